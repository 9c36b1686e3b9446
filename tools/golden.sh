#!/usr/bin/env bash
# Byte-identity harness for pure optimisations (issue 22): runs a fixed set of specs with the
# given binary and writes every result JSON (wall time zeroed by compare's --results-dir) and
# compare table into OUTDIR. Compare two binaries with:
#   tools/golden.sh OLD_BIN /tmp/g-old && tools/golden.sh NEW_BIN /tmp/g-new && diff -r /tmp/g-old /tmp/g-new
# Durations are capped so the whole set runs in a few minutes; every workload generator and
# engine path (timeless ops, kbuild, THP bursts, pgbench, thpchallenge, vm-scalability, fio
# small files, DAMON, reclaim with swap, compaction, snapshot boot) is exercised.
set -euo pipefail
BIN=$(realpath "$1")
OUT=$2
cd "$(dirname "$0")/.."
rm -rf "$OUT"
mkdir -p "$OUT"
run() { # label config...
    local label=$1
    shift
    "$BIN" compare "$@" --runs 1 --jobs 1 --format json --results-dir "$OUT/$label" -o "$OUT/$label.table.json" 2>"$OUT/$label.stderr" >/dev/null
    sed -i -E -e 's/[0-9.]+ s (simulated )?in [0-9.]+ s.*//' -e 's/read in [0-9]+ ms, reconstructed in [0-9]+ ms//' "$OUT/$label.stderr"
    echo "$label done" >&2
}
"$BIN" run --example claim-steal-merge -o "$OUT/claim-steal-merge.txt"
run kbuild-thp-burst example:kbuild-thp-burst
run pgbench-checkpoints example:pgbench-checkpoints
run kbuild-thp 'dm0=experiments/defrag-mode/kbuild-thp.toml@workload.duration=60s' \
    'dm1=experiments/defrag-mode/kbuild-thp.toml@vm.defrag_mode=1,workload.duration=60s'
run buildlike 'experiments/defrag-mode/buildlike.toml@workload.duration=40s'
run thpchallenge-fio 'experiments/defrag-mode/thpchallenge-fio.toml@workload.duration=30s'
run pgbench 'experiments/costly-pagecache/pgbench.toml@workload.duration=40s'
run idle-cache 'experiments/damon-reclaim/idle-cache.toml@workload.duration=60s'
run vmscal-thp 'experiments/folio-compaction/vmscal-thp.toml'
run cold-read 'experiments/validation/cold-read-ext4.toml@workload.duration=30s'
run compaction-test 'experiments/validation/compaction-test.toml@workload.duration=60s'
run scattered 'experiments/validation/scattered-frees-compact.toml@workload.duration=60s'
run thpscale 'experiments/validation/thpscale.toml@workload.duration=60s'
run snapshot-compact 'experiments/validation/snapshot-compact.toml'
run thp-frag 'dm0=experiments/validation/thp-frag-dm0.toml@workload.duration=60s' 'dm1=experiments/validation/thp-frag-dm1.toml@workload.duration=60s'
run thpchallenge-mmtests 'experiments/validation/thpchallenge-mmtests.toml@workload.duration=20s'
run real-kbuild 'experiments/defrag-mode/real-kbuild.toml@workload.duration=60s'
"$BIN" run experiments/folio-compaction/mix-16g.toml -o "$OUT/mix-16g.txt" # an [[op]] spec: no compare
# The seed series' switches (issue 37: they run as policy layers, results must not move).
run folio-modes 'experiments/folio-compaction/vmscal-thp.toml@model.folio_mode=skip_large' \
    'experiments/folio-compaction/vmscal-thp.toml@model.folio_mode=split_large' \
    'experiments/folio-compaction/vmscal-thp.toml@model.folio_mode=migrate_no_free_split'
run defrag-stages 'experiments/defrag-mode/kbuild-thp.toml@vm.defrag_mode=1,model.defrag_stage=vanilla,workload.duration=30s' \
    'experiments/defrag-mode/kbuild-thp.toml@vm.defrag_mode=1,model.defrag_stage=nofragment_only,workload.duration=30s' \
    'experiments/defrag-mode/kbuild-thp.toml@vm.defrag_mode=1,model.defrag_stage=kswapd_assist,workload.duration=30s'
run costly 'experiments/costly-pagecache/pgbench.toml@model.costly_order_policy=v1_iomap,workload.duration=20s' \
    'experiments/costly-pagecache/pgbench.toml@model.costly_order_policy=v2_filemap_costly,workload.duration=20s' \
    'experiments/costly-pagecache/pgbench.toml@model.costly_order_policy=v3_filemap_opportunistic,workload.duration=20s' \
    'experiments/costly-pagecache/pgbench.toml@model.costly_order_policy=v4_kcompactd_background,workload.duration=20s' \
    'experiments/costly-pagecache/pgbench.toml@model.costly_order_policy=v4_kcompactd_background,model.v4_position=after_initial_compaction,workload.duration=20s'

