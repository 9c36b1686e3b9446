//! `fraglab compare`'s statistics and derived rows (mmtests' vmstat rows and compare columns).

use std::collections::BTreeMap;

use fraglab_sim::compare::{
    compare, format_markdown, format_table, hmean, stddev, summarize, welch_p, Center,
};
use fraglab_spec::result::{BuildResult, RunResult};

/// Welch's t-test against scipy.stats.ttest_ind(equal_var=False) on the same samples.
#[test]
fn welch_matches_scipy() {
    let p = welch_p(&[1., 2., 3., 4., 5.], &[2., 4., 6., 8., 10.]).unwrap();
    assert!((p - 0.107_531_194_930_627_28).abs() < 1e-9, "{p}");
    let p = welch_p(&[10.1, 10.3, 9.9, 10.2], &[11.0, 11.2, 10.9, 11.3]).unwrap();
    assert!((p - 0.000_239_247_752_866_025_4).abs() < 1e-9, "{p}");
    assert_eq!(welch_p(&[1.0], &[2.0, 3.0]), None, "one sample: no test");
    assert_eq!(welch_p(&[2.0, 2.0], &[2.0, 2.0]), None);
    assert_eq!(welch_p(&[2.0, 2.0], &[3.0, 3.0]), Some(0.0));
}

#[test]
fn summaries() {
    let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], Center::Amean);
    assert_eq!((s.min, s.center, s.max), (2.0, 5.0, 9.0));
    assert!((s.stddev - 2.138_089_935_299_395).abs() < 1e-12);
    assert!((s.coeffvar - 42.761_798_705_987_9).abs() < 1e-9);
    assert!((hmean(&[1.0, 2.0, 4.0]) - 12.0 / 7.0).abs() < 1e-12);
    assert_eq!(hmean(&[1.0, 0.0]), 0.0);
    assert_eq!(stddev(&[3.0]), 0.0);
}

fn build(items: &[(&str, i64)]) -> BuildResult {
    BuildResult {
        start_ns: 0,
        end_ns: 100_000_000_000,
        vmstat_delta: items
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<BTreeMap<_, _>>(),
        ..Default::default()
    }
}

fn run(builds: Vec<BuildResult>) -> RunResult {
    RunResult {
        builds,
        ..Default::default()
    }
}

/// Builds are the samples; the compact success rate is the mean of per-build ratios, not the
/// ratio of the means; the THP fail rate comes from the means; changes are (new − base)/base.
#[test]
fn rows_and_derived_rows() {
    let base = run(vec![
        build(&[
            ("thp_fault_alloc", 100),
            ("thp_fault_fallback", 100),
            ("compact_success", 1),
            ("compact_fail", 9),
        ]),
        build(&[
            ("thp_fault_alloc", 300),
            ("thp_fault_fallback", 100),
            ("compact_success", 10),
            ("compact_fail", 10),
        ]),
    ]);
    let new = run(vec![
        build(&[
            ("thp_fault_alloc", 300),
            ("thp_fault_fallback", 0),
            ("compact_success", 0),
            ("compact_fail", 0),
        ]),
        build(&[
            ("thp_fault_alloc", 500),
            ("thp_fault_fallback", 0),
            ("compact_success", 3),
            ("compact_fail", 1),
        ]),
    ]);
    let labels = vec!["base".to_string(), "new".to_string()];
    let r = compare(&labels, &[vec![base], vec![new]]);
    let row = |m: &str, s: &str| {
        r.rows
            .iter()
            .find(|x| x.metric == m && x.stat == s)
            .unwrap()
            .clone()
    };
    let alloc = row("THP fault alloc", "Amean");
    assert_eq!(alloc.values, vec![200.0, 400.0]);
    assert_eq!(alloc.change_pct, vec![None, Some(100.0)]);
    assert_eq!(alloc.per_run, vec![vec![100.0, 300.0], vec![300.0, 500.0]]);
    let fail = row("THP fault fail rate %", "");
    assert!((fail.values[0] - 100.0 * 100.0 / 300.0).abs() < 1e-9);
    assert_eq!(fail.values[1], 0.0);
    let rate = row("Direct compact success rate %", "");
    // base: mean(10 %, 50 %) = 30 %, not 11/30; new: the build without compaction is skipped.
    assert!((rate.values[0] - 30.0).abs() < 1e-9, "{:?}", rate.values);
    assert!((rate.values[1] - 75.0).abs() < 1e-9);
    let t = format_table(&r);
    assert!(t.contains("Amean     THP fault alloc"));
    assert!(
        t.contains("400.00 ( 100.00%)") || t.contains("400.00 * 100.00%*"),
        "{t}"
    );
    let md = format_markdown(&r);
    assert!(md.starts_with("| stat | metric | base | new |"));
}

/// The simulator's drain counts are rows of runs without builds, one sample per run, and not
/// rows where the samples are builds (their scope would differ from the vmstat rows').
#[test]
fn drain_rows_per_run_only() {
    let with = |drains: u64| RunResult {
        sim_work: [
            ("drain_all_pages".to_string(), drains),
            ("pcp_pages_drained".to_string(), 10 * drains),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    let s = fraglab_sim::compare::samples_of(&[with(4), with(6)]);
    let row = |name: &str| s.iter().find(|(n, _, _)| n == name).map(|(_, _, v)| v.clone());
    assert_eq!(row("drain_all_pages calls"), Some(vec![4.0, 6.0]));
    assert_eq!(row("PCP pages drained"), Some(vec![40.0, 60.0]));
    let mut kb = with(4);
    kb.builds = vec![build(&[("thp_fault_alloc", 1)])];
    let s = fraglab_sim::compare::samples_of(&[kb]);
    assert!(!s.iter().any(|(n, _, _)| n == "drain_all_pages calls"));
}

/// The Hugealloc rows as mmtests reports them: each build's mean and standard deviation of the
/// allocation times of the bursts that started during it, summarised over builds.
#[test]
fn hugealloc_rows_are_per_build_mean_and_stddev() {
    let burst = |t: u64, us: u64| fraglab_spec::result::BurstResult {
        start_ns: t,
        alloc_ns: us * 1000,
        ..Default::default()
    };
    let b = |start: u64, end: u64| BuildResult {
        start_ns: start,
        end_ns: end,
        ..Default::default()
    };
    let r = RunResult {
        builds: vec![b(0, 100), b(100, 200)],
        // Build 1: 10 and 30 us (mean 20, sd 14.14); build 2: 50, 50, 50 (mean 50, sd 0);
        // the burst at 250 is after the last build and belongs to none.
        bursts: vec![
            burst(10, 10),
            burst(20, 30),
            burst(100, 50),
            burst(150, 50),
            burst(199, 50),
            burst(250, 999),
        ],
        ..Default::default()
    };
    let s = fraglab_sim::compare::samples_of(&[r]);
    let row = |name: &str| {
        s.iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, v)| v.clone())
            .unwrap()
    };
    assert_eq!(row("Hugealloc Time mean (us)"), vec![20.0, 50.0]);
    let sd = row("Hugealloc Time stddev (us)");
    assert!((sd[0] - 200f64.sqrt()).abs() < 1e-9 && sd[1] == 0.0, "{sd:?}");
}

/// issue 19: a metric one configuration does not measure (a host result has no allocator work
/// counters) is `n/a` in every format, never 0, and has no change against it.
#[test]
fn unmeasured_rows_print_na() {
    let mut host = RunResult {
        engine: "host".into(),
        ..Default::default()
    };
    host.vmstat_delta.insert("compact_stall".into(), 5);
    let mut sim = host.clone();
    sim.engine = "sim".into();
    sim.sim_work.insert("drain_all_pages".into(), 7);
    let labels = vec!["kernel".to_string(), "simulator".to_string()];
    let r = compare(&labels, &[vec![host], vec![sim]]);
    let drain = r
        .rows
        .iter()
        .find(|x| x.metric == "drain_all_pages calls" && x.stat == "Amean")
        .unwrap();
    assert_eq!(drain.unmeasured, vec![0]);
    assert_eq!(drain.change_pct[1], None);
    let line = format_table(&r)
        .lines()
        .find(|l| l.contains("Amean") && l.contains("drain_all_pages calls"))
        .unwrap()
        .to_string();
    assert!(line.contains("n/a") && line.contains("7.00"), "{line}");
    let stall = r
        .rows
        .iter()
        .find(|x| x.metric == "Direct compact stall")
        .unwrap();
    assert!(stall.unmeasured.is_empty());
    assert!(format_markdown(&r).contains("| n/a |"));
}

/// Issue 23 item 7: the change is (new − base) / base for every metric, as the table says under
/// it; the metrics where that is worse when positive are named, as mmtests' compare names
/// its `pndiff` (time) rows — and the CSV says which way each metric is better.
#[test]
fn sign_convention_is_stated() {
    use fraglab_sim::compare::{better, format_csv, Better};
    for (m, b) in [
        ("Hugealloc Time (us)", Better::Lower),
        ("Kbuild Real time", Better::Lower),
        ("thpchallenge fault-huge (us)", Better::Lower),
        ("Direct compact stall", Better::Lower),
        ("THP fault fallback", Better::Lower),
        ("THP fault fail rate %", Better::Lower),
        ("Pages direct scanned", Better::Lower),
        ("Swap out", Better::Lower),
        ("OOM kills", Better::Lower),
        ("THP fault alloc", Better::Higher),
        ("pgbench TPS", Better::Higher),
        ("cc1: read (MiB/s)", Better::Higher),
        ("Direct compact success rate %", Better::Higher),
        ("vm-scalability.throughput mmap-pread-seq", Better::Higher),
        ("thpchallenge huge-pct", Better::Higher),
        ("seq:big: pages in order-4 folios", Better::Neither),
        ("Hugealloc Time stddev (us)", Better::Neither),
    ] {
        assert_eq!(better(m), b, "{m}");
    }
    let labels = vec!["base".to_string(), "new".to_string()];
    let r = compare(&labels, &[vec![run(Vec::new())], vec![run(Vec::new())]]);
    let t = format_table(&r);
    let note: Vec<&str> = t.lines().filter(|l| l.starts_with("# ")).collect();
    assert!(
        note[0].contains("(config - baseline) / baseline") && note[0].contains("positive means higher"),
        "{t}"
    );
    assert!(note[1].contains("mmtests"), "{t}");
    let lower = note[2];
    assert!(
        lower.starts_with("# Lower is better")
            && lower.contains("Alloc stall")
            && !lower.contains("THP fault alloc,"),
        "{t}"
    );
    let md = format_markdown(&r);
    assert!(
        md.contains("\nLower is better (a positive change is worse): "),
        "{md}"
    );
    let csv = format_csv(&r);
    assert!(csv.starts_with("metric,stat,config,value,change_pct,significant,better\n"));
    assert!(
        csv.lines()
            .any(|l| l.starts_with("THP fault fallback,Amean,new,") && l.ends_with(",lower")),
        "{csv}"
    );
}
