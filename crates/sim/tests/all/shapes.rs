//! Shape tests of the three experiments (experiments/*/README.md): the published direction of
//! the headline rows that fraglab reproduces. Each runs the experiment's own spec with
//! overrides that shrink it (smaller machine, shorter run).
//!
//! Two layers. The full versions (the top-level tests but `folio_compaction_stages`) take
//! minutes on this 2-CPU machine and are `#[ignore]`d: `tools/full-tests.sh` runs them
//! (`cargo test --release -p fraglab-sim --test all -- --ignored shapes::`). `ci::*` is the slice that
//! `cargo test` runs: the same assertions on one seed or a shorter miniature, where every
//! margin held on each seed measured (the measurements are in each slice's comment); a shape
//! whose margins do not hold on a slice is left to the full suite. `folio_compaction_stages`
//! takes seconds and runs as it is.

use fraglab_sim::compare::{amean, samples_of};
use fraglab_spec::result::RunResult;

fn run(text: &str, overrides: &[(&str, &str)], seed: u64) -> RunResult {
    let mut o: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    o.push(("run.seed".into(), seed.to_string()));
    let text = fraglab_spec::apply_overrides(text, &o).unwrap();
    let spec = fraglab_spec::parse_spec(&text, "shape.toml").unwrap();
    fraglab_sim::timed::run_workload(&spec).unwrap()
}

/// `run` for each of `seeds`, the runs in parallel (one thread each; the results in seed
/// order, so the means do not depend on the threads' timing).
fn runs(text: &str, overrides: &[(&str, &str)], seeds: std::ops::RangeInclusive<u64>) -> Vec<RunResult> {
    std::thread::scope(|sc| {
        let handles: Vec<_> = seeds
            .map(|seed| sc.spawn(move || run(text, overrides, seed)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The mean of `f` over `results`.
fn avg(results: &[RunResult], f: impl Fn(&RunResult) -> f64) -> f64 {
    results.iter().map(f).sum::<f64>() / results.len() as f64
}

fn mean(results: &[RunResult], metric: &str) -> f64 {
    let s = samples_of(results);
    amean(
        &s.iter()
            .find(|(n, _, _)| n == metric)
            .map(|(_, _, v)| v.clone())
            .unwrap_or_default(),
    )
}

/// The miniature of seed 002 (`examples/pgbench-checkpoints.toml`: 512 MiB, a 128 MiB
/// checkpoint every 5 s).
const PGBENCH: &str = include_str!("../../../../examples/pgbench-checkpoints.toml");

/// The four variants of the 2026 iomap thread, by `model.costly_order_policy`.
const COSTLY_VARIANTS: [(&str, &str); 4] = [
    ("V1", "\"v1_iomap\""),
    ("V2", "\"v2_filemap_costly\""),
    ("V3", "\"v3_filemap_opportunistic\""),
    ("V4", "\"v4_kcompactd_background\""),
];

/// The baseline's rows that the variants are compared with.
#[derive(Clone, Copy)]
struct CostlyBase {
    stall: f64,
    tps: f64,
    ckpt: f64,
    drains: f64,
}

/// The baseline compacts and drains during checkpoints; returns its rows.
fn check_costly_baseline(base: &[RunResult]) -> CostlyBase {
    let base_stall = mean(base, "Direct compact stall");
    let base_tps = mean(base, "pgbench TPS");
    let base_ckpt = mean(base, "pgbench TPS during checkpoints");
    assert!(
        base_stall > 1000.0,
        "the baseline compacts during checkpoints: {base_stall}"
    );
    assert!(base_tps > 0.0 && base_ckpt > 0.0, "TPS rows present");
    // The other half of the seed's perf profile: drain_all_pages after failed reclaim.
    let base_drains = mean(base, "drain_all_pages calls");
    assert!(
        base_drains > 500.0,
        "the baseline drains the PCP lists: {base_drains}"
    );
    assert!(base
        .iter()
        .all(|r| !r.pgbench.as_ref().unwrap().checkpoint_secs.is_empty()));
    CostlyBase {
        stall: base_stall,
        tps: base_tps,
        ckpt: base_ckpt,
        drains: base_drains,
    }
}

/// Variant `v` (runs `r`) against the baseline's rows.
fn check_costly_variant(v: &str, r: &[RunResult], base: &CostlyBase) {
    let CostlyBase {
        stall: base_stall,
        tps: base_tps,
        ckpt: base_ckpt,
        drains: base_drains,
    } = *base;
    let stall = mean(r, "Direct compact stall");
    assert!(
        stall < base_stall * 0.05,
        "{v}: {stall} direct compactions against the baseline's {base_stall}"
    );
    // The published ranking against the baseline: every variant's TPS above it, overall
    // and during checkpoints. On this miniature the gap is +0.3 % overall and +3 %
    // during checkpoints (6 seeds: every variant run above every baseline run); the
    // published +31–41 % is not reproduced (experiments/costly-pagecache/README.md).
    let drains = mean(r, "drain_all_pages calls");
    assert!(
        drains < base_drains * 0.5,
        "{v}: {drains} drain_all_pages calls against the baseline's {base_drains}"
    );
    let tps = mean(r, "pgbench TPS");
    let ckpt = mean(r, "pgbench TPS during checkpoints");
    assert!(
        tps > base_tps,
        "{v}: TPS {tps} not above the baseline's {base_tps}"
    );
    assert!(
        ckpt > base_ckpt * 1.01,
        "{v}: TPS during checkpoints {ckpt} not 1 % above the baseline's {base_ckpt}"
    );
}

/// Seed 002: direct compaction during the checkpoints nearly gone with every variant
/// (seed 002's published results: the baseline's perf profile is direct compaction under
/// `iomap_get_folio`). On the experiment's miniature (`PGBENCH`), 2 seeds each.
#[test]
#[ignore = "full shape test (minutes): tools/full-tests.sh"]
fn costly_pagecache_variants_avoid_direct_compaction() {
    let policy_runs =
        |policy: &str| -> Vec<RunResult> { runs(PGBENCH, &[("model.costly_order_policy", policy)], 1..=2) };
    let base = check_costly_baseline(&policy_runs("\"baseline\""));
    for (v, policy) in COSTLY_VARIANTS {
        check_costly_variant(v, &policy_runs(policy), &base);
    }
}

/// Seed 000, the mechanism: without large-folio migration (skip_large) compaction cannot
/// empty blocks holding large page-cache folios, so THP faults beside them fail more than in
/// 6.18 (migrate_free_split); migration without free-page split ends early (-ENOMEM) and does
/// no better than skipping; splitting (split_large) recovers the THPs.
#[test]
fn folio_compaction_stages() {
    let text = include_str!("../../../../experiments/folio-compaction/vmscal-thp.toml");
    let small = [
        ("machine.memory", "\"512MiB\""),
        ("machine.cpus", "2"),
        ("workload.duration", "\"3s\""),
    ];
    let thp = |mode: &str| -> (f64, f64) {
        let mut o = small.to_vec();
        o.push(("model.folio_mode", mode));
        let r = runs(text, &o, 1..=2);
        (mean(&r, "THP fault alloc"), mean(&r, "Direct compact success"))
    };
    let (skip, skip_ok) = thp("\"skip_large\"");
    let (split, _) = thp("\"split_large\"");
    let (no_split, no_split_ok) = thp("\"migrate_no_free_split\"");
    let (free_split, free_split_ok) = thp("\"migrate_free_split\"");
    assert!(free_split > skip * 1.5, "6.18 {free_split} vs skip_large {skip}");
    assert!(split > skip * 1.5, "split_large {split} vs skip_large {skip}");
    assert!(
        free_split > no_split * 1.5,
        "free split {free_split} vs none {no_split}"
    );
    assert!(free_split_ok > skip_ok && free_split_ok > no_split_ok);
}

/// The two defrag_mode stages of seed 001's series that keep pageblocks clean.
const CLEAN_STAGES: [&str; 2] = ["\"nofragment_only\"", "\"kswapd_watermarks\""];

/// The mixed pageblocks of each sample of `text`'s run (seed 1) with overrides `o`, without the
/// files' ext4 metadata (`[model] fs_metadata = "off"`): seed 001's "clean" is about fallback
/// pollution (seed 001's published results: "removed all pollution/steal fallbacks"), while the
/// directory blocks and inode-table readahead of docs/model §33 are LRU pages in
/// Unmovable blocks with no fallback at all, which the census by content counts as mixed under
/// either defrag_mode (the kbuild's cold source lookups make ~20 such blocks here;
/// tests/bdev.rs covers them).
fn mixed_blocks(text: &str, o: &[(&str, &str)]) -> Vec<u64> {
    let mut o = o.to_vec();
    o.push(("model.fs_metadata", "\"off\""));
    run(text, &o, 1).samples.iter().map(|s| s.mixed_blocks).collect()
}

/// Vanilla's mixed blocks grow over the run; each defrag_mode stage's stay near zero.
fn check_pageblocks_clean(vanilla: &[u64], stages: &[(&str, Vec<u64>)]) {
    let late = vanilla[vanilla.len() * 3 / 4..].iter().copied().max().unwrap();
    let early = vanilla[..vanilla.len() / 4].iter().copied().max().unwrap();
    assert!(
        late >= 10 && late > early,
        "vanilla's mixed blocks grow: early {early}, late {late}"
    );
    for (stage, mixed) in stages {
        // The slow path's last resort (defrag_mode drops ALLOC_NOFRAGMENT when all else
        // failed, §8 D5) may still mix a block now and then.
        let worst = mixed.iter().copied().max().unwrap();
        assert!(
            worst <= 2 && worst * 5 < late,
            "{stage}: at most {worst} mixed pageblocks, vanilla {late}"
        );
    }
}

/// Seed 001, the mechanism: vanilla pollutes movable pageblocks (unmovable and reclaimable
/// slab pages land in them through fallbacks, and mixed blocks accumulate over the builds),
/// while `vm.defrag_mode` — already patch 3/5 alone — keeps every pageblock clean ("removed all
/// pollution/steal fallbacks", seed 001's published results) but for the slow path's rare last
/// resort.
#[test]
#[ignore = "full shape test (minutes): tools/full-tests.sh"]
fn defrag_mode_keeps_pageblocks_clean() {
    let text = include_str!("../../../../experiments/defrag-mode/kbuild-thp.toml");
    // The experiment's machine and workload, 5 builds instead of 15.
    let text = text.replace("iterations = 15", "iterations = 5");
    let vanilla = mixed_blocks(&text, &[]);
    let stages: Vec<(&str, Vec<u64>)> = CLEAN_STAGES
        .into_iter()
        .map(|stage| {
            let o = [("vm.defrag_mode", "1"), ("model.defrag_stage", stage)];
            (stage, mixed_blocks(&text, &o))
        })
        .collect();
    check_pageblocks_clean(&vanilla, &stages);
}

/// `vm.defrag_mode` on mmtests' thpchallenge with fio background
/// (`experiments/defrag-mode/thpchallenge-fio.toml`) in the configuration of the live check
/// (defrag-mode README, "On the live kernel at 8 GiB": 8 GiB, 2 CPUs, two 1.5 GiB thpchallenge
/// threads after 90 s of fio; five alternating pairs on Linux 6.18). The live kernel's
/// directions under `defrag_mode=1`, each with Welch's p < 0.05: THP fault alloc −32 %, direct
/// compaction successes −29 %, alloc stalls +195 %, direct reclaim scanning +237 %, kswapd
/// scanning −19 %; free memory in reclaimable pageblocks +64 %, in movable ones −32 % — the
/// dentry and inode slab the shrinkers empty leaves free pages in reclaimable blocks that
/// movable requests may not take under `ALLOC_NOFRAGMENT`, so they reclaim directly, kswapd
/// (counting that memory free) scans less, and fewer 2 MiB blocks come free. fraglab over seeds
/// 1–3 at 8465993: −49 %, −60 %, +1,785 %, +345 %, −16 %; +85 %, −58 %. Asserted: the kernel's
/// direction of each, with a margin below what both show.
///
/// Until 2026-11-27 this test asserted the opposite THP direction at the experiment's 2 GiB (the
/// seed's +35 % on its kernel build), which the live check had already contradicted; the model
/// itself no longer gave it (over seeds 1–5 at b1871de: −2.8 %; with the dirty throttle counting
/// writeback, 8465993: +4.9 %, neither significant), so the test now asserts the live kernel's
/// shape at the live kernel's size. ~1.5 minutes of simulated time per run, six runs.
#[test]
#[ignore = "full shape test (minutes): tools/full-tests.sh"]
fn defrag_mode_strands_free_memory_and_loses_thps_under_small_file_churn() {
    let text = include_str!("../../../../experiments/defrag-mode/thpchallenge-fio.toml");
    let live = [
        ("machine.memory", "8GiB"),
        ("machine.cpus", "2"),
        ("workload.duration", "6min"),
        ("workload.thpchallenge.start", "90s"),
        ("workload.thpchallenge.size", "1536MiB"),
    ];
    let mut series_o = live.to_vec();
    series_o.push(("vm.defrag_mode", "1"));
    let vanilla = runs(text, &live, 1..=3);
    let series = runs(text, &series_o, 1..=3);
    let ratio = |f: &dyn Fn(&RunResult) -> f64| avg(&series, f) / avg(&vanilla, f).max(1e-9);
    let stat = |k: &'static str| move |r: &RunResult| r.vmstat_delta[k] as f64;
    let stalls = |r: &RunResult| -> f64 {
        r.vmstat_delta
            .iter()
            .filter(|(k, _)| k.starts_with("allocstall_"))
            .map(|(_, v)| *v as f64)
            .sum()
    };
    // Free pages of a migratetype, averaged over the run once memory is full (from 5 s), as the
    // live check averages them.
    let free_in = |mt: usize| {
        move |r: &RunResult| -> f64 {
            let s: Vec<f64> = r
                .samples
                .iter()
                .filter(|x| x.t_ns >= 5_000_000_000)
                .map(|x| x.free_by_type[mt] as f64)
                .collect();
            s.iter().sum::<f64>() / s.len().max(1) as f64
        }
    };
    let checks: [(&str, f64, bool, f64); 7] = [
        ("THP fault alloc", ratio(&stat("thp_fault_alloc")), false, 0.85),
        (
            "direct compaction successes",
            ratio(&stat("compact_success")),
            false,
            0.85,
        ),
        ("alloc stalls", ratio(&stalls), true, 1.5),
        (
            "pages direct reclaim scanned",
            ratio(&stat("pgscan_direct")),
            true,
            1.5,
        ),
        ("pages kswapd scanned", ratio(&stat("pgscan_kswapd")), false, 0.95),
        ("free pages in reclaimable blocks", ratio(&free_in(2)), true, 1.2),
        ("free pages in movable blocks", ratio(&free_in(1)), false, 0.8),
    ];
    for (what, r, up, margin) in checks {
        if up {
            assert!(
                r > margin,
                "{what}: defrag_mode / vanilla = {r:.3}, the live kernel's is above {margin}"
            );
        } else {
            assert!(
                r < margin,
                "{what}: defrag_mode / vanilla = {r:.3}, the live kernel's is below {margin}"
            );
        }
    }
}

/// Seed 001's regime on both engines (`experiments/defrag-mode/buildlike.toml`, shrunk to
/// 2 GiB, a 3 GiB file and one minute): THP faults that never compact (`enabled=always`),
/// page-cache churn and madvised bursts. On the live 6.18 kernel (defrag-mode README, five
/// pairs at 8 GiB) `defrag_mode=1` left THP fault alloc unchanged (+0 %), cut direct
/// compaction successes (−30 %, t = −3.2), doubled kcompactd's wake-ups (+100 %, t = 8.9)
/// and raised its migrate scanning (+60 %, t = 0.7). fraglab on this miniature, means over
/// seeds 1–3 (asserted, with margin): +0.5 %, −77 %, +13 %, +49 %.
#[test]
#[ignore = "full shape test (minutes): tools/full-tests.sh"]
fn defrag_mode_in_the_seeds_regime_moves_compaction_to_kcompactd_not_thp_success() {
    let text = include_str!("../../../../experiments/defrag-mode/buildlike.toml")
        .replace("memory = \"8GiB\"", "memory = \"2GiB\"")
        .replace("file_size = \"12GiB\"", "file_size = \"3GiB\"")
        .replace("duration = \"3min\"", "duration = \"60s\"")
        .replace("start = \"30s\"", "start = \"10s\"");
    let vanilla = runs(&text, &[], 1..=3);
    let series = runs(&text, &[("vm.defrag_mode", "1")], 1..=3);
    let v = |rs: &[RunResult], k: &str| avg(rs, |r| r.vmstat_delta[k] as f64);
    let (va, sa) = (v(&vanilla, "thp_fault_alloc"), v(&series, "thp_fault_alloc"));
    assert!(va > 5000.0, "the build-like processes fault THPs: {va}");
    assert!(
        (sa - va).abs() < va * 0.05,
        "THP fault alloc: vanilla {va}, defrag_mode {sa}"
    );
    let (vs, ss) = (v(&vanilla, "compact_success"), v(&series, "compact_success"));
    assert!(
        ss < vs * 0.8,
        "direct compaction successes: vanilla {vs}, defrag_mode {ss}"
    );
    let (vw, sw) = (
        v(&vanilla, "compact_daemon_wake"),
        v(&series, "compact_daemon_wake"),
    );
    assert!(sw > vw * 1.1, "kcompactd wakes: vanilla {vw}, defrag_mode {sw}");
    let (vm, sm) = (
        v(&vanilla, "compact_daemon_migrate_scanned"),
        v(&series, "compact_daemon_migrate_scanned"),
    );
    assert!(
        sm > vm * 1.2,
        "kcompactd migrate scanning: vanilla {vm}, defrag_mode {sm}"
    );
}

/// The CI slice of the shapes above: the same assertions, on one seed or a shorter run.
///
/// Left to the full suite, as no slice measured holds their margins:
/// - `defrag_mode_strands_free_memory_and_loses_thps_under_small_file_churn`: it is the live
///   check's 8 GiB configuration (six runs of ~90 simulated seconds); no smaller slice has been
///   measured against it.
/// - `defrag_mode_in_the_seeds_regime_moves_compaction_to_kcompactd_not_thp_success`: one seed
///   of the 2 GiB miniature misses the kcompactd margins (migrate scanning +2.7 % on seed 1
///   against +20 %, wake-ups +7.9 % on seed 3 against +10 %), and a 1 GiB, 30 s miniature
///   reverses direct compaction successes (26 with defrag_mode against 19 without).
mod ci {
    use super::*;

    /// Seed 002 on seed 1 alone, the five policies in parallel. Measured one seed at a time
    /// (seeds 1–4): the variants' direct compactions at most 4.1 % of the same seed's
    /// baseline (asserted < 5 %), drain_all_pages calls at most 32 % (< 50 %), TPS +0.16 % to
    /// +0.6 % (> 0) and TPS during checkpoints +1.6 % to +5.2 % (> 1 %) over it; seed 1:
    /// 2.6 %, 20 %, +0.3 %, +3.5 %.
    #[test]
    fn costly_pagecache_variants_avoid_direct_compaction() {
        let policies: Vec<&str> = std::iter::once("\"baseline\"")
            .chain(COSTLY_VARIANTS.iter().map(|(_, p)| *p))
            .collect();
        let results: Vec<RunResult> = std::thread::scope(|sc| {
            let handles: Vec<_> = policies
                .iter()
                .map(|p| sc.spawn(move || run(PGBENCH, &[("model.costly_order_policy", p)], 1)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let base = check_costly_baseline(&results[..1]);
        for ((v, _), r) in COSTLY_VARIANTS.iter().zip(&results[1..]) {
            check_costly_variant(v, std::slice::from_ref(r), &base);
        }
    }

    /// Seed 001's clean pageblocks over 3 builds instead of 5, the three runs in parallel.
    /// Measured (seeds 1 and 2): vanilla's mixed blocks 0 in the first quarter and 18 and 16
    /// in the last (asserted ≥ 10 and growing), each stage's at most 1 (≤ 2 and under a fifth
    /// of vanilla's).
    #[test]
    fn defrag_mode_keeps_pageblocks_clean() {
        let text = include_str!("../../../../experiments/defrag-mode/kbuild-thp.toml")
            .replace("iterations = 15", "iterations = 3");
        let text = text.as_str();
        let (vanilla, stages) = std::thread::scope(|sc| {
            let vanilla = sc.spawn(move || mixed_blocks(text, &[]));
            let stages: Vec<_> = CLEAN_STAGES
                .into_iter()
                .map(|stage| {
                    sc.spawn(move || {
                        let o = [("vm.defrag_mode", "1"), ("model.defrag_stage", stage)];
                        (stage, mixed_blocks(text, &o))
                    })
                })
                .collect();
            (
                vanilla.join().unwrap(),
                stages.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>(),
            )
        });
        check_pageblocks_clean(&vanilla, &stages);
    }
}
