#!/usr/bin/env bash
# Issue 35, item 3: the scale model against the exact full-size run. Runs SPEC for DURATION of
# simulated time exactly and at each K given (fraglab run --scale 1/K), one run at a time, and
# writes OUT/{exact,k4,...}.json with each run's CPU time, peak RSS and load average in
# OUT/runs.tsv. Then `python3 experiments/scale/agreement.py OUT` prints the table.
#   experiments/scale/agreement.sh BIN experiments/scale/kbuild-256g.toml 10s OUT 4 8 16
# With EXACT_FROM=DIR the exact run is not run again: DIR's (an earlier OUT of the same spec and
# duration, by a binary whose full-size runs are byte-identical) is copied.
set -euo pipefail
BIN=$(realpath "$1")
SPEC=$2
DUR=$3
OUT=$4
shift 4
mkdir -p "$OUT"
# The spec with its duration capped (`fraglab run` takes a file; the rest is unchanged).
sed -E "s/^duration = \"[^\"]*\"/duration = \"$DUR\"/" "$SPEC" > "$OUT/spec.toml"
printf 'run\tcpu_user_s\tcpu_sys_s\twall_s\tmax_rss_kib\tloadavg_before\tloadavg_after\n' > "$OUT/runs.tsv"
one() { # name [--scale 1/K]
    local name=$1
    shift
    local before
    before=$(cut -d' ' -f1-3 /proc/loadavg)
    /usr/bin/time -f "%U\t%S\t%e\t%M" -o "$OUT/$name.time" \
        "$BIN" run "$OUT/spec.toml" "$@" -o "$OUT/$name.json" > "$OUT/$name.txt"
    printf '%s\t%s\t%s\t%s\n' "$name" "$(cat "$OUT/$name.time")" "$before" "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/runs.tsv"
    echo "$name done: $(cat "$OUT/$name.time")" >&2
}
for k in "$@"; do
    one "k$k" --scale "1/$k"
done
if [ -n "${EXACT_FROM:-}" ]; then
    cp "$EXACT_FROM"/exact.{json,txt,time} "$OUT"/
    grep '^exact' "$EXACT_FROM/runs.tsv" | sed 's/^exact/exact (copied)/' >> "$OUT/runs.tsv"
else
    one exact
fi
