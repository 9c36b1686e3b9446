#!/usr/bin/env bash
# Runs one fuzz target of fuzz/fuzz_targets/ for SECONDS and reports runs, execs/s and crashes:
# snapshot_read (a snapshot file read within a budget, small ones reconstructed and checked),
# trace_replay (any bytes as a trace file, read and replayed on a small machine), result_json
# (run results and compare reports into `compare --from` and `report`), suite_toml (suite.toml
# and diagnoses.toml), overrides (`@KEY=VALUE` overrides on the built-in examples), or spec_run
# (`tools/fuzz.sh SECONDS` is this with spec_run).
#
#   tools/fuzz-target.sh TARGET SECONDS [JOBS]
#
# Needs a nightly toolchain and cargo-fuzz (`rustup toolchain install nightly`,
# `cargo install cargo-fuzz`). The repository's corpus (fuzz/corpus/TARGET) is read, never
# written: new inputs go to fuzz/work-corpus/TARGET/, crashes to fuzz/artifacts/TARGET/. A crash is a panic, an abort (an
# allocation failure included: -malloc_limit_mb makes one malloc above 1 GiB a crash, and
# -rss_limit_mb a process above 2 GiB), or an input running more than 10 s (-timeout).
# Exit status: 0 when no crash was found, 1 otherwise.
set -euo pipefail
target=${1:?usage: tools/fuzz-target.sh TARGET SECONDS [JOBS]}
secs=${2:?usage: tools/fuzz-target.sh TARGET SECONDS [JOBS]}
jobs=${3:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/fuzz"
mkdir -p "work-corpus/$target" "artifacts/$target"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo +nightly fuzz build -O "$target"
rc=0
cargo +nightly fuzz run -O "$target" "work-corpus/$target" "corpus/$target" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -max_len=65536 -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -artifact_prefix="$root/fuzz/artifacts/$target/" -print_final_stats=1 2>&1 | tee "$log" || rc=$?
crashes=$(find artifacts/$target -maxdepth 1 -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) -newer "$log" | wc -l)
# A timeout found on a loaded machine is run again alone: one that then ends within the limit
# was the machine's load, not a hang (reported, not counted).
bin=target/x86_64-unknown-linux-gnu/release/$target
for t in $(find artifacts/$target -maxdepth 1 -type f -name 'timeout-*' -newer "$log"); do
    if "$bin" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 "$t" >/dev/null 2>&1; then
        echo "fuzz: $t ends within 10 s when run alone (a timeout of the loaded machine)"
        crashes=$((crashes - 1))
    fi
done
runs=$(grep -oE '#[0-9]+' "$log" | tail -1 | tr -d '#')
execs=$(grep -oE 'exec/s: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
echo "fuzz $target: ${secs} s, ${runs:-0} runs, ${execs:-?} execs/s at the end, ${crashes} crashes (exit ${rc}; artifacts in fuzz/artifacts/$target/)"
[ "$crashes" -eq 0 ] && [ "$rc" -eq 0 ]
