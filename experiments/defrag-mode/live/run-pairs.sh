#!/bin/bash
# Seed 001 on the live kernel: thpchallenge with fio on this machine brought down to 8 GiB
# (fraglab host run --fit-memory), vanilla and vm.defrag_mode=1 alternating (pageblock
# migratetypes are sticky, so each run starts from what the one before left), N pairs.
# Needs root, a built fraglab (cargo build --release) and a scratch filesystem without
# `discard` at $SCRATCH (see ../README.md: a loop-mounted ext4). Writes $OUT/{vanilla,dm1}-K.json.
#
#   experiments/defrag-mode/live/run-pairs.sh OUT [N] [SCRATCH]
set -euo pipefail
OUT=${1:?usage: run-pairs.sh OUT [N] [SCRATCH]}
N=${2:-3}
SCRATCH=${3:-/mnt/fraglab-scratch}
# The spec and its overrides (comma-separated KEY=VALUE) may be changed with S= and O= in the
# environment; the default is the thpchallenge-fio check of ../README.md.
S=${S:-experiments/defrag-mode/thpchallenge-fio.toml}
O=${O-machine.memory=8GiB,machine.cpus=2,workload.duration=6min,workload.thpchallenge.start=90s,workload.thpchallenge.size=1536MiB}
mkdir -p "$OUT"
for k in $(seq 1 "$N"); do
  for c in vanilla dm1; do
    X=$O
    [ "$c" = dm1 ] && X=${O:+$O,}vm.defrag_mode=1
    ./target/release/fraglab host run "$S${X:+@$X}" --fit-memory --dir "$SCRATCH" --trace \
      -o "$OUT/$c-$k.json" > "$OUT/$c-$k.log"
  done
done
