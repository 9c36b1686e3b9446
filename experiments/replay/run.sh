#!/bin/sh
# Issue 21 item 6: record the fragmenting workload (frag.toml) on this machine with
# vm.defrag_mode 0 and with 1, then replay each recording under its own policy and under the
# other. Root, Linux 6.18; about 6 minutes per recording, a few minutes per replay.
#   experiments/replay/run.sh [OUT_DIR]      (default /var/tmp/replay; traces are ~400 MB each)
# Writes OUT_DIR/dm{0,1}.ftrace (trace + start snapshot), dm{0,1}-host.json (the host engine's
# result of the recorded run), dm{0,1}-replay.json (the replay report: recorded column, then
# the simulator under defrag_mode 0 and 1), and copies the replay reports here (results/).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/var/tmp/replay}
fraglab=${FRAGLAB:-$here/../../target/release/fraglab}
mkdir -p "$out" "$here/results"
for dm in 0 1; do
  # A per-CPU buffer of 256 MiB: this workload makes ~95k events/s for ~5 min; at the default
  # 32 MiB the reader fell behind and the kernel dropped a quarter of them.
  "$fraglab" host record --buffer-kb 262144 -o "$out/dm$dm.ftrace" -- \
    "$fraglab" host run "$here/frag.toml@vm.defrag_mode=$dm" -o "$out/dm$dm-host.json"
done
for dm in 0 1; do
  "$fraglab" trace info "$out/dm$dm.ftrace" --json > "$here/results/dm$dm-trace-info.json"
  "$fraglab" replay "$out/dm$dm.ftrace" --set vm.defrag_mode=0 --set vm.defrag_mode=1 \
    -o "$out/dm$dm-replay.json" | tee "$here/results/dm$dm-replay.txt"
  cp "$out/dm$dm-replay.json" "$here/results/"
done
