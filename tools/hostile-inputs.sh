#!/usr/bin/env bash
# Feeds issue 34's hostile inputs to a fraglab binary and prints, per input, the exit status and
# the first line of output: snapshots with impossible headers (dumped from the fuzz corpus),
# FIFOs, /dev/zero, empty, random and binary traces, an over-long line, a malformed compaction
# line, suite files with runs = 0 and 4e9. Each command runs under `timeout 10` and a 3 GB
# address-space limit, so a blocking read shows as status 124 and a runaway allocation as an
# abort (134) or a panic (101) instead of taking the machine.
#
#   tools/hostile-inputs.sh [BIN]        # default: target/debug/fraglab
#
# Used to compare a build from before the readers were hardened with today's; every input is
# read-only and nothing outside a temporary directory is written.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(realpath "${1:-$root/target/debug/fraglab}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
corpus=$root/fuzz/corpus
mkfifo fifo
: > empty.txt
head -c 4096 /dev/urandom > random.bin
mkdir -p snap fromdir
ln -s /dev/zero fromdir/a-run1.json
(cd "$root" && FRAGLAB_DUMP_SNAPSHOT_FILES="$dir/snap" cargo test -q -p fraglab-state --test fuzz_corpus \
    dump_snapshot_files_when_asked >/dev/null 2>&1) || echo "(could not dump the snapshot files)"
for n in 0 4000000000; do
    mkdir -p "suite$n"
    cp "$root/experiments/validation/compaction-test.toml" "suite$n/"
    printf '[[scenario]]\nname = "m"\nspec = "compaction-test.toml"\nruns = %s\nci = true\nabout = "x"\n' \
        "$n" > "suite$n/suite.toml"
done
one() {
    local label=$1
    shift
    local out rc
    out=$( (ulimit -v 3000000; timeout 10 "$bin" "$@") 2>&1 )
    rc=$?
    printf "%-42s rc=%-3s %s\n" "$label" "$rc" "$(echo "$out" | grep -v '^\s*$' | head -1 | cut -c1-110)"
}
for f in end-pfn-2p38 end-pfn-u64-max nr-cpus-0 nr-cpus-1e6 managed-gt-present garbage-pagetypeinfo header-length-4g; do
    one "snapshot info $f" snapshot info "snap/hostile-$f.fsnap"
done
one "snapshot info FIFO" snapshot info fifo
one "trace info /dev/zero" trace info /dev/zero
one "trace info empty" trace info empty.txt
one "trace info random bytes" trace info random.bin
one "trace info FIFO" trace info fifo
one "trace info binary TEXT section" trace info "$corpus/trace_replay/hostile-container-binary-text.trace"
one "trace info 70 KiB line" trace info "$corpus/trace_replay/hostile-long-line.txt"
printf "%-42s %s\n" "trace info malformed compaction line" \
    "$("$bin" trace info --json "$corpus/trace_replay/hostile-malformed-compaction.txt" 2>&1 | grep -c '"malformed_lines": 1') of 1 count it"
one "report /dev/zero" report -o "$dir/r.html" /dev/zero
one "report FIFO" report -o "$dir/r.html" fifo
one "compare --from (a run file -> /dev/zero)" compare --from fromdir
one "validate runs = 0" validate --suite suite0 --sim-only --no-write
one "validate runs = 4000000000" validate --suite suite4000000000 --sim-only --no-write
