#!/usr/bin/env bash
# Byte-identity check for changes meant to keep behaviour: runs every example and experiment spec
# (and a small compare) with two fraglab binaries and compares the result files with cmp.
# Usage: tools/compare-results.sh OLD_FRAGLAB NEW_FRAGLAB [OUT_DIR]
# Takes about 10 minutes on a 2-CPU machine (the 16 GiB kbuild and build-like specs dominate).
set -uo pipefail
cd "$(dirname "$0")/.."
old=$(readlink -f "$1"); new=$(readlink -f "$2"); out=${3:-$(mktemp -d)}
mkdir -p "$out/old" "$out/new"
specs=$(ls examples/*.toml experiments/*/*.toml | grep -v '^experiments/host/')
fail=0
for spec in $specs; do
  name=$(echo "$spec" | tr / _)
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    "$bin" run "$spec" -o "$out/$side/$name.json" > /dev/null 2>&1 || echo "$side: $spec failed" >&2
  done
  if cmp -s "$out/old/$name.json" "$out/new/$name.json"; then echo "same  $spec"; else echo "DIFF  $spec"; fail=1; fi
done
for side in old new; do
  bin=$old; [ $side = new ] && bin=$new
  "$bin" compare a=examples/kbuild-thp-burst.toml b=examples/kbuild-thp-burst.toml@vm.defrag_mode=1 \
    c=examples/pgbench-checkpoints.toml --runs 2 --format json -o "$out/$side/compare.json" > /dev/null 2>&1
done
if cmp -s "$out/old/compare.json" "$out/new/compare.json"; then echo "same  compare.json"; else echo "DIFF  compare.json"; fail=1; fi
echo "outputs in $out"
exit $fail
