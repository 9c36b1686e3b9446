//! Shape tests of the three experiments (experiments/*/README.md), small enough for CI: the
//! published direction of the headline rows that fraglab reproduces. Each runs the
//! experiment's own spec with overrides that shrink it (smaller machine, shorter run).

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

fn mean(results: &[RunResult], metric: &str) -> f64 {
    let s = samples_of(results);
    amean(
        &s.iter()
            .find(|(n, _, _)| n == metric)
            .map(|(_, _, v)| v.clone())
            .unwrap_or_default(),
    )
}

/// Seed 002: direct compaction during the checkpoints near zero for V1–V3 and below the
/// baseline's for V4 (published-results.md §3).
#[test]
fn costly_pagecache_variants_avoid_direct_compaction() {
    let text = include_str!("../../../experiments/costly-pagecache/pgbench.toml");
    let small = [
        ("machine.memory", "\"512MiB\""),
        ("machine.cpus", "2"),
        ("workload.duration", "\"30s\""),
    ];
    let runs = |policy: &str| -> Vec<RunResult> {
        let mut o = small.to_vec();
        o.push(("model.costly_order_policy", policy));
        (1..=2).map(|seed| run(&shrink_pgbench(text), &o, seed)).collect()
    };
    let base = runs("\"baseline\"");
    let base_stall = mean(&base, "Direct compact stall");
    assert!(
        base_stall > 100.0,
        "the baseline compacts during checkpoints: {base_stall}"
    );
    for (v, policy) in [
        ("V1", "\"v1_iomap\""),
        ("V2", "\"v2_filemap_costly\""),
        ("V3", "\"v3_filemap_opportunistic\""),
        ("V4", "\"v4_kcompactd_background\""),
    ] {
        let r = runs(policy);
        // Not asserted: TPS above the baseline's. fraglab's TPS differences between the
        // policies are within ±1 % and change sign with the configuration (see
        // experiments/costly-pagecache/README.md): the published +31–41 % is not reproduced.
        let stall = mean(&r, "Direct compact stall");
        let limit = if v == "V4" { 0.5 } else { 0.05 };
        assert!(
            stall < base_stall * limit,
            "{v}: {stall} direct compactions against the baseline's {base_stall}"
        );
    }
}

/// Seed 000, the mechanism: without large-folio migration (skip_large) compaction cannot
/// empty blocks holding large page-cache folios, so THP faults beside them fail more than in
/// 6.18 (migrate_free_split); migration without free-page split ends early (-ENOMEM) and does
/// no better than skipping; splitting (split_large) recovers the THPs.
#[test]
fn folio_compaction_stages() {
    let text = include_str!("../../../experiments/folio-compaction/vmscal-thp.toml");
    let small = [
        ("machine.memory", "\"512MiB\""),
        ("machine.cpus", "2"),
        ("workload.duration", "\"3s\""),
    ];
    let thp = |mode: &str| -> (f64, f64) {
        let mut o = small.to_vec();
        o.push(("model.folio_mode", mode));
        let r: Vec<RunResult> = (1..=2).map(|seed| run(text, &o, seed)).collect();
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

/// Seed 001, the row fraglab reproduces: patch 3/5 alone (ALLOC_NOFRAGMENT without kswapd and
/// kcompactd assistance) lowers THP success below vanilla.
#[test]
fn defrag_mode_nofragment_only_lowers_thp_success() {
    let text = include_str!("../../../experiments/defrag-mode/kbuild-thp.toml");
    // The experiment's machine and workload, 5 builds instead of 15 (the effect shows from
    // the second build on; smaller machines do not show it).
    let text = text.replace("iterations = 15", "iterations = 5");
    let alloc = |o: &[(&str, &str)]| -> f64 { mean(&[run(&text, o, 1)], "THP fault alloc") };
    let vanilla = alloc(&[]);
    let nofrag = alloc(&[
        ("vm.defrag_mode", "1"),
        ("model.defrag_stage", "\"nofragment_only\""),
    ]);
    assert!(nofrag < vanilla, "nofragment_only {nofrag} vs vanilla {vanilla}");
}

/// The experiment's pgbench made small: a checkpoint every 5 s, spread over 2 s, of 128 MiB,
/// a 1 GiB data file, 16 clients, 30 s.
fn shrink_pgbench(text: &str) -> String {
    text.replace("checkpoint_interval = \"30s\"", "checkpoint_interval = \"5s\"")
        .replace("checkpoint_spread = \"15s\"", "checkpoint_spread = \"2s\"")
        .replace("checkpoint_size = \"512MiB\"", "checkpoint_size = \"128MiB\"")
        .replace("data = \"4GiB\"", "data = \"1GiB\"")
        .replace("clients = 32", "clients = 16")
        .replace("duration = \"2min\"", "duration = \"30s\"")
}
