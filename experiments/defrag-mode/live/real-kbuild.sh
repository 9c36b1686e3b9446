#!/bin/bash
# Seed 001 with a real kernel build on the live kernel: while `fraglab host run --fit-memory`
# holds the machine at 6 GiB (kbuild-bursts.toml: the knobs, and the madvised 256 MiB THP
# bursts every 2 s), build Linux 6.1 (tinyconfig, make -j3) over and over, each build in a
# fresh untar of the source on a scratch ext4 without discard. The trees of the last TREES
# builds (default 3) are kept, the oldest removed before each untar: the tar file and three
# trees (1.36 GB each) are more page cache than 6 GiB holds, so memory stays under pressure
# (with one tree, removing it freed its cache and kswapd never ran). Every build creates
# 78,635 files (dentries and inodes) in 5,096 directories. The
# vmstat of each build is saved before and after; builds that end after the host run are
# marked incomplete; the host run's launch time is saved too (the bursts' start_ns count from
# a few seconds later, once the pool is held). Needs root, a built fraglab, the source tarball (uncompressed) and the
# scratch filesystem of ../README.md.
#
#   experiments/defrag-mode/live/real-kbuild.sh OUT CONFIG [TAR] [SCRATCH]
#   CONFIG: vanilla | dm1 (vm.defrag_mode=1); O= in the environment adds overrides.
set -euo pipefail
OUT=${1:?usage: real-kbuild.sh OUT vanilla|dm1 [TAR] [SCRATCH]}
C=${2:?usage: real-kbuild.sh OUT vanilla|dm1 [TAR] [SCRATCH]}
TAR=${3:-/work/kb/linux-6.1.tar}
SCR=${4:-/mnt/fraglab-scratch}
TREES=${TREES:-3}
S=experiments/defrag-mode/live/kbuild-bursts.toml
X=${O:-}
[ "$C" = dm1 ] && X=${X:+$X,}vm.defrag_mode=1
mkdir -p "$OUT"
./target/release/fraglab host run "$S${X:+@$X}" --fit-memory -o "$OUT/$C.json" > "$OUT/$C.log" 2>&1 &
HP=$!
date +%s.%N > "$OUT/$C-launch.txt"
# Start building once the pool is in place (the bursts start 30 s in).
for _ in $(seq 1 120); do
  [ "$(cat /proc/sys/vm/nr_hugepages)" -gt 0 ] && break
  sleep 1
done
sleep 5
k=0
while kill -0 $HP 2>/dev/null; do
  k=$((k + 1))
  b=$OUT/$C-build$k
  cp /proc/vmstat "$b.vmstat0"
  t0=$(date +%s.%N)
  tree=$SCR/linux$((k % TREES))
  rm -rf "$tree"
  mkdir "$tree"
  tar xf "$TAR" -C "$tree" --strip-components=1
  t1=$(date +%s.%N)
  (cd "$tree" && make tinyconfig > /dev/null 2>&1 && make -j3 > "$b.make.log" 2>&1)
  t2=$(date +%s.%N)
  cp /proc/vmstat "$b.vmstat1"
  complete=1
  kill -0 $HP 2>/dev/null || complete=0
  echo "$k $t0 $t1 $t2 $complete" >> "$OUT/$C-builds.txt"
  echo "build $k: untar $(echo "$t1 - $t0" | bc) s, make $(echo "$t2 - $t1" | bc) s, complete $complete"
done
wait $HP
rm -rf "$SCR"/linux*
