#!/usr/bin/env bash
# Runs the spec fuzz target (fuzz/fuzz_targets/spec_run.rs: any bytes parsed as a spec, small
# machines booted and run briefly) for SECONDS and reports runs, execs/s and crashes.
#
#   tools/fuzz.sh SECONDS [JOBS]
#
# Needs a nightly toolchain and cargo-fuzz (`rustup toolchain install nightly`,
# `cargo install cargo-fuzz`). The repository's corpus (fuzz/corpus/spec_run: the examples',
# the experiments' and the hostile specs of issue 23) is read, never written: new inputs go to
# fuzz/work-corpus/, crashes to fuzz/artifacts/spec_run/. A crash is a panic, an abort (an
# allocation failure included: -malloc_limit_mb makes one malloc above 1 GiB a crash, and
# -rss_limit_mb a process above 2 GiB), or an input running more than 10 s (-timeout).
# Exit status: 0 when no crash was found, 1 otherwise.
set -euo pipefail
secs=${1:?usage: tools/fuzz.sh SECONDS [JOBS]}
jobs=${2:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz"
mkdir -p work-corpus artifacts/spec_run
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo +nightly fuzz build -O spec_run
rc=0
cargo +nightly fuzz run -O spec_run work-corpus corpus/spec_run -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -max_len=65536 -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -artifact_prefix="$root/fuzz/artifacts/spec_run/" -print_final_stats=1 2>&1 | tee "$log" || rc=$?
crashes=$(find artifacts/spec_run -maxdepth 1 -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) -newer "$log" | wc -l)
# A timeout found on a loaded machine is run again alone: one that then ends within the limit
# was the machine's load, not a hang (reported, not counted).
bin=target/x86_64-unknown-linux-gnu/release/spec_run
for t in $(find artifacts/spec_run -maxdepth 1 -type f -name 'timeout-*' -newer "$log"); do
    if "$bin" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 "$t" >/dev/null 2>&1; then
        echo "fuzz: $t ends within 10 s when run alone (a timeout of the loaded machine)"
        crashes=$((crashes - 1))
    fi
done
runs=$(grep -oE '#[0-9]+' "$log" | tail -1 | tr -d '#')
execs=$(grep -oE 'exec/s: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
echo "fuzz: ${secs} s, ${runs:-0} runs, ${execs:-?} execs/s at the end, ${crashes} crashes (exit ${rc}; artifacts in fuzz/artifacts/spec_run/)"
[ "$crashes" -eq 0 ] && [ "$rc" -eq 0 ]
