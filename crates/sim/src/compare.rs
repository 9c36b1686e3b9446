//! `fraglab compare`: the per-sample figures of run results, their summary statistics, Welch's
//! t-test against the baseline, and the table in the field's formats (published-results.md §5).
//!
//! A *sample* is what mmtests calls one run: for a workload with kbuild iterations each build
//! is a sample (seed 001's "15 consecutive runs" are 15 builds in one boot, so that the memory
//! state carries over from one to the next); otherwise each simulation (each seed) is one.
//! Rows are the §5.1 vmstat rows plus the workloads' own (Hugealloc Time per burst, Kbuild
//! Real/User/System time, pgbench TPS, vm-scalability throughput, thpchallenge latencies).
//! The relative change printed is the plain (new − base) / base, as the defrag_mode tables
//! print it (§5.2), whatever the metric's direction.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fraglab_spec::result::{CompareReport, CompareRow, RunResult};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// How a metric's central value is summarised: arithmetic mean, or harmonic mean for rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Center {
    Amean,
    Hmean,
}

/// One metric's samples for every configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricSamples {
    pub name: String,
    pub center: Center,
    pub per_config: Vec<Vec<f64>>,
}

/// The §5.1 vmstat rows: (row name, vmstat items summed).
pub const VMSTAT_ROWS: &[(&str, &[&str])] = &[
    ("THP fault alloc", &["thp_fault_alloc"]),
    ("THP fault fallback", &["thp_fault_fallback"]),
    ("Direct compact stall", &["compact_stall"]),
    ("Direct compact fail", &["compact_fail"]),
    ("Direct compact success", &["compact_success"]),
    (
        "Compact daemon scanned migrate",
        &["compact_daemon_migrate_scanned"],
    ),
    ("Compact daemon scanned free", &["compact_daemon_free_scanned"]),
    ("Kcompactd wake", &["compact_daemon_wake"]),
    (
        "Alloc stall",
        &[
            "allocstall_dma",
            "allocstall_dma32",
            "allocstall_normal",
            "allocstall_movable",
            "allocstall_device",
        ],
    ),
    ("Pages kswapd scanned", &["pgscan_kswapd"]),
    ("Pages kswapd stolen", &["pgsteal_kswapd"]),
    ("Pages direct scanned", &["pgscan_direct"]),
    ("Swap out", &["pswpout"]),
    ("Swap in", &["pswpin"]),
    ("File refaults", &["workingset_refault_file"]),
];

fn sum(d: &BTreeMap<String, i64>, items: &[&str]) -> f64 {
    items.iter().map(|k| *d.get(*k).unwrap_or(&0) as f64).sum()
}

/// The samples of one configuration's results, by metric name, in a fixed order.
pub fn samples_of(results: &[RunResult]) -> Vec<(String, Center, Vec<f64>)> {
    let mut out: Vec<(String, Center, Vec<f64>)> = Vec::new();
    let mut push = |name: &str, center: Center, v: Vec<f64>| {
        if !v.is_empty() {
            out.push((name.to_string(), center, v));
        }
    };
    let bursts: Vec<f64> = results
        .iter()
        .flat_map(|r| r.bursts.iter().map(|b| b.alloc_ns as f64 / 1000.0))
        .collect();
    push("Hugealloc Time (us)", Center::Amean, bursts);
    let builds: Vec<_> = results
        .iter()
        .flat_map(|r| r.builds.iter())
        .filter(|b| b.end_ns > 0)
        .collect();
    // mmtests' Hugealloc rows (published-results.md §1): each run (build) reports the mean and
    // the standard deviation of its own allocation times, and compare summarises those per-run
    // figures. The bursts that started during a build are that build's.
    if !builds.is_empty() {
        let (mut means, mut sds) = (Vec::new(), Vec::new());
        for r in results {
            for b in r.builds.iter().filter(|b| b.end_ns > 0) {
                let v: Vec<f64> = r
                    .bursts
                    .iter()
                    .filter(|x| x.start_ns >= b.start_ns && x.start_ns < b.end_ns)
                    .map(|x| x.alloc_ns as f64 / 1000.0)
                    .collect();
                if !v.is_empty() {
                    means.push(amean(&v));
                    sds.push(stddev(&v));
                }
            }
        }
        push("Hugealloc Time mean (us)", Center::Amean, means);
        push("Hugealloc Time stddev (us)", Center::Amean, sds);
    }
    if !builds.is_empty() {
        let secs = |ns: u64| ns as f64 / 1e9;
        push(
            "Kbuild Real time",
            Center::Amean,
            builds.iter().map(|b| secs(b.end_ns - b.start_ns)).collect(),
        );
        push(
            "Kbuild User time",
            Center::Amean,
            builds.iter().map(|b| secs(b.user_ns)).collect(),
        );
        push(
            "Kbuild System time",
            Center::Amean,
            builds.iter().map(|b| secs(b.system_ns)).collect(),
        );
    }
    let deltas: Vec<&BTreeMap<String, i64>> = if builds.is_empty() {
        results.iter().map(|r| &r.vmstat_delta).collect()
    } else {
        builds.iter().map(|b| &b.vmstat_delta).collect()
    };
    for (name, items) in VMSTAT_ROWS {
        push(
            name,
            Center::Amean,
            deltas.iter().map(|d| sum(d, items)).collect(),
        );
    }
    // The simulator's allocator work that /proc does not count (per run, so only where the
    // rows above are per run too): seed 002's perf profile names drain_all_pages.
    if builds.is_empty() && results.iter().any(|r| !r.sim_work.is_empty()) {
        for (name, key) in [
            ("drain_all_pages calls", "drain_all_pages"),
            ("PCP pages drained", "pcp_pages_drained"),
        ] {
            push(
                name,
                Center::Amean,
                results
                    .iter()
                    .map(|r| r.sim_work.get(key).copied().unwrap_or(0) as f64)
                    .collect(),
            );
        }
    }
    let tps: Vec<&_> = results.iter().filter_map(|r| r.pgbench.as_ref()).collect();
    push(
        "pgbench TPS",
        Center::Hmean,
        tps.iter().map(|p| p.mean_tps).collect(),
    );
    push(
        "pgbench TPS during checkpoints",
        Center::Hmean,
        tps.iter().map(|p| p.checkpoint_tps).collect(),
    );
    push(
        "pgbench TPS between checkpoints",
        Center::Hmean,
        tps.iter().map(|p| p.steady_tps).collect(),
    );
    let mut cases: Vec<&str> = results
        .iter()
        .flat_map(|r| r.vm_scalability.iter().map(|v| v.case.as_str()))
        .collect();
    cases.sort_unstable();
    cases.dedup();
    for case in cases {
        let v: Vec<f64> = results
            .iter()
            .flat_map(|r| {
                r.vm_scalability
                    .iter()
                    .filter(|v| v.case == case)
                    .map(|v| v.throughput)
            })
            .collect();
        push(&format!("vm-scalability.throughput {case}"), Center::Hmean, v);
    }
    let thp: Vec<&_> = results.iter().filter_map(|r| r.thpchallenge.as_ref()).collect();
    let us = |h: &fraglab_spec::result::LatencyHistogram| {
        if h.count == 0 {
            0.0
        } else {
            h.sum_ns as f64 / h.count as f64 / 1000.0
        }
    };
    push(
        "thpchallenge fault-huge (us)",
        Center::Amean,
        thp.iter().map(|t| us(&t.huge)).collect(),
    );
    push(
        "thpchallenge fault-base (us)",
        Center::Amean,
        thp.iter().map(|t| us(&t.base)).collect(),
    );
    push(
        "thpchallenge huge-pct",
        Center::Amean,
        thp.iter().map(|t| t.huge_pct).collect(),
    );
    out
}

/// Picks one statistic of a summary.
type StatFn = fn(&Summary) -> f64;

/// Summary statistics of one sample set, as mmtests prints them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub min: f64,
    pub center: f64,
    pub stddev: f64,
    /// Stddev × 100 / mean (0 when the mean is 0).
    pub coeffvar: f64,
    pub max: f64,
}

pub fn amean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Sample standard deviation (n − 1).
pub fn stddev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = amean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// Harmonic mean; 0 if any value is 0 or below (as a rate of zero makes the harmonic mean 0).
pub fn hmean(v: &[f64]) -> f64 {
    if v.is_empty() || v.iter().any(|x| *x <= 0.0) {
        return 0.0;
    }
    v.len() as f64 / v.iter().map(|x| 1.0 / x).sum::<f64>()
}

pub fn summarize(v: &[f64], center: Center) -> Summary {
    let m = amean(v);
    let sd = stddev(v);
    Summary {
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        center: match center {
            Center::Amean => m,
            Center::Hmean => hmean(v),
        },
        stddev: sd,
        coeffvar: if m != 0.0 { sd * 100.0 / m } else { 0.0 },
        max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// Welch's two-sided t-test: the p-value for "the means of `a` and `b` are equal". `None` when
/// it cannot be computed (fewer than two samples on a side, or both sides without variance and
/// equal means); both sides without variance and different means give p = 0.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (amean(a), amean(b));
    let (va, vb) = (
        stddev(a).powi(2) / a.len() as f64,
        stddev(b).powi(2) / b.len() as f64,
    );
    let se2 = va + vb;
    if se2 == 0.0 {
        return if ma == mb { None } else { Some(0.0) };
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2 * se2 / (va * va / (a.len() - 1) as f64 + vb * vb / (b.len() - 1) as f64);
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(2.0 * (1.0 - dist.cdf(t.abs())))
}

fn change(v: f64, base: f64) -> Option<f64> {
    (base != 0.0).then(|| (v - base) * 100.0 / base)
}

/// Builds the compare report of configurations `labels` from their results (one `Vec` of runs
/// per configuration), each metric present in any configuration (a configuration without it
/// shows 0).
pub fn compare(labels: &[String], results: &[Vec<RunResult>]) -> CompareReport {
    let per: Vec<Vec<(String, Center, Vec<f64>)>> = results.iter().map(|r| samples_of(r)).collect();
    // Metric order: first appearance over the configurations.
    let mut metrics: Vec<(String, Center)> = Vec::new();
    for p in &per {
        for (n, c, _) in p {
            if !metrics.iter().any(|(m, _)| m == n) {
                metrics.push((n.clone(), *c));
            }
        }
    }
    let mut rows = Vec::new();
    let get = |p: &Vec<(String, Center, Vec<f64>)>, name: &str| -> Vec<f64> {
        p.iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, v)| v.clone())
            .unwrap_or_default()
    };
    let mut centers: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (name, center) in &metrics {
        let vals: Vec<Vec<f64>> = per.iter().map(|p| get(p, name)).collect();
        let sums: Vec<Summary> = vals.iter().map(|v| summarize(v, *center)).collect();
        let sig: Vec<bool> = vals
            .iter()
            .enumerate()
            .map(|(i, v)| i > 0 && welch_p(&vals[0], v).is_some_and(|p| p < 0.05))
            .collect();
        centers.insert(name.clone(), sums.iter().map(|s| s.center).collect());
        let stat_rows: [(&str, StatFn); 5] = [
            ("Min", |s| s.min),
            (
                match center {
                    Center::Amean => "Amean",
                    Center::Hmean => "Hmean",
                },
                |s| s.center,
            ),
            ("Stddev", |s| s.stddev),
            ("CoeffVar", |s| s.coeffvar),
            ("Max", |s| s.max),
        ];
        for (stat, f) in stat_rows {
            let values: Vec<f64> = sums
                .iter()
                .zip(&vals)
                .map(|(s, v)| if v.is_empty() { 0.0 } else { f(s) })
                .collect();
            let is_center = stat == "Amean" || stat == "Hmean";
            rows.push(CompareRow {
                metric: name.clone(),
                stat: stat.to_string(),
                change_pct: values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| if i == 0 { None } else { change(*v, values[0]) })
                    .collect(),
                significant: if is_center {
                    sig.clone()
                } else {
                    vec![false; values.len()]
                },
                per_run: if is_center { vals.clone() } else { Vec::new() },
                values,
            });
        }
    }
    // Derived rows (§5.1).
    let c = |name: &str| {
        centers
            .get(name)
            .cloned()
            .unwrap_or_else(|| vec![0.0; labels.len()])
    };
    let ratio = |num: &[f64], den: &[f64]| -> Vec<f64> {
        num.iter()
            .zip(den)
            .map(|(n, d)| if *d > 0.0 { n * 100.0 / d } else { 0.0 })
            .collect()
    };
    let mut derived: Vec<(&str, Vec<f64>)> = Vec::new();
    if centers.contains_key("THP fault alloc") {
        let (a, f) = (c("THP fault alloc"), c("THP fault fallback"));
        let tot: Vec<f64> = a.iter().zip(&f).map(|(x, y)| x + y).collect();
        derived.push(("THP fault fail rate %", ratio(&f, &tot)));
        // The mean over samples of the per-sample ratio, not the ratio of the means.
        let rates: Vec<f64> = per
            .iter()
            .map(|p| {
                let (s, fl) = (get(p, "Direct compact success"), get(p, "Direct compact fail"));
                let r: Vec<f64> = s
                    .iter()
                    .zip(&fl)
                    .filter(|(s, f)| **s + **f > 0.0)
                    .map(|(s, f)| s * 100.0 / (s + f))
                    .collect();
                amean(&r)
            })
            .collect();
        derived.push(("Direct compact success rate %", rates));
        derived.push((
            "Compaction efficiency",
            ratio(&c("Direct compact success"), &c("Direct compact stall")),
        ));
        derived.push((
            "Kswapd efficiency %",
            ratio(&c("Pages kswapd stolen"), &c("Pages kswapd scanned")),
        ));
    }
    for (name, values) in derived {
        rows.push(CompareRow {
            metric: name.to_string(),
            stat: String::new(),
            change_pct: values
                .iter()
                .enumerate()
                .map(|(i, v)| if i == 0 { None } else { change(*v, values[0]) })
                .collect(),
            significant: vec![false; values.len()],
            per_run: Vec::new(),
            values,
        });
    }
    CompareReport {
        configs: labels.to_vec(),
        runs: results.iter().map(|r| r.len() as u32).max().unwrap_or(0),
        rows,
    }
}

/// One cell: `value ( +x.xx%)`, or `value * +x.xx%*` when significant; the baseline's change
/// is 0.00 %.
fn cell(v: f64, pct: Option<f64>, sig: bool, first: bool) -> String {
    let p = if first { Some(0.0) } else { pct };
    match (p, sig) {
        (Some(p), true) => format!("{v:>14.2} *{p:>7.2}%*"),
        (Some(p), false) => format!("{v:>14.2} ({p:>7.2}%)"),
        (None, _) => format!("{v:>14.2} (    n/a)"),
    }
}

/// The mmtests compare layout: `Stat  Metric  value ( +x.xx%) ...`.
pub fn format_table(r: &CompareReport) -> String {
    let mut out = String::new();
    let _ = write!(out, "{:<9} {:<34}", "", "");
    for c in &r.configs {
        let _ = write!(out, " {c:>25}");
    }
    out.push('\n');
    for row in &r.rows {
        let _ = write!(out, "{:<9} {:<34}", row.stat, row.metric);
        for (i, v) in row.values.iter().enumerate() {
            let _ = write!(
                out,
                " {:>25}",
                cell(*v, row.change_pct[i], row.significant[i], i == 0)
            );
        }
        out.push('\n');
    }
    out
}

pub fn format_markdown(r: &CompareReport) -> String {
    let mut out = String::new();
    let _ = write!(out, "| stat | metric |");
    for c in &r.configs {
        let _ = write!(out, " {c} |");
    }
    out.push('\n');
    let _ = write!(out, "|---|---|");
    for _ in &r.configs {
        out.push_str("---:|");
    }
    out.push('\n');
    for row in &r.rows {
        let _ = write!(out, "| {} | {} |", row.stat, row.metric);
        for (i, v) in row.values.iter().enumerate() {
            let p = if i == 0 { Some(0.0) } else { row.change_pct[i] };
            let pct = p.map_or("n/a".to_string(), |p| format!("{p:+.2}%"));
            if row.significant[i] {
                let _ = write!(out, " **{v:.2} ({pct})** |");
            } else {
                let _ = write!(out, " {v:.2} ({pct}) |");
            }
        }
        out.push('\n');
    }
    out
}

pub fn format_csv(r: &CompareReport) -> String {
    let mut out = String::from("metric,stat,config,value,change_pct,significant\n");
    let q = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    for row in &r.rows {
        for (i, v) in row.values.iter().enumerate() {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{}",
                q(&row.metric),
                q(&row.stat),
                q(&r.configs[i]),
                v,
                row.change_pct[i].map_or(String::new(), |p| format!("{p}")),
                row.significant[i]
            );
        }
    }
    out
}
