//! The validation scoreboard (issue 19): for one scenario run on both engines, each row's kernel
//! mean ± sd over the kernel's runs, the simulator's over its runs, their ratio, and a verdict
//! against the row's tolerance class; then the pass rate per scenario and overall.
//!
//! The rows and their classes (the issue's tolerances):
//! - **THP success** (`THP fault success %` = thp_fault_alloc × 100 / (alloc + fallback), per
//!   run): the simulator within ±10 percentage points of the kernel.
//! - **Work counters** (the /proc/vmstat deltas of compaction, migration, reclaim, stalls and THP
//!   faults, [`WORK_ITEMS`]): the ratio simulator / kernel within ×1.5 either way. Two counts that
//!   both stay under [`WORK_SLACK`] events agree whatever their ratio: a handful of events is the
//!   noise of one run, not a magnitude.
//! - **Census** (free pages per order and pageblocks per migratetype in the last sample, mixed
//!   blocks): the simulator within ±15 % of the kernel, or within [`CENSUS_SLACK`] of it in
//!   absolute terms (the unit of each census: a handful of pages or blocks).
//! - **Latency** (p50 and p99 of the fault latency per folio order, all allocation paths merged):
//!   the ratio within ×2. Quantiles are read from the log2 histograms with geometric interpolation
//!   inside the bucket (the histograms have no finer resolution).
//!
//! A row is `n/a` — never 0 — when one side cannot measure it: the host engine has no allocator
//! work counters (`sim_work`), no "Number of mixed blocks" without CONFIG_PAGE_OWNER, and a side
//! with no THP fault or no fault of an order has no success rate or latency for it. `n/a` rows
//! are left out of the pass rate. Host counters are system-wide: the suite runner subtracts an
//! idle baseline before scoring (crates/cli/src/validate.rs); this module only compares.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rows::{amean, stddev, ALLOCSTALL_ITEMS};
use super::RunResult;

/// The /proc/vmstat items scored as work counters, each a row under its kernel name
/// (`allocstall` sums the per-zone items).
pub const WORK_ITEMS: &[&str] = &[
    "compact_stall",
    "compact_fail",
    "compact_success",
    "compact_migrate_scanned",
    "compact_free_scanned",
    "compact_isolated",
    "compact_daemon_wake",
    "compact_daemon_migrate_scanned",
    "compact_daemon_free_scanned",
    "pgmigrate_success",
    "pgmigrate_fail",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "allocstall",
    "thp_fault_alloc",
    "thp_fault_fallback",
    "htlb_buddy_alloc_success",
    "htlb_buddy_alloc_fail",
];

/// Work counters that both stay under this many events agree (see the module doc).
pub const WORK_SLACK: f64 = 10.0;
/// Census rows within this many units (pages, blocks) agree whatever the relative difference.
pub const CENSUS_SLACK: f64 = 8.0;

/// The tolerance class of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    ThpSuccess,
    Work,
    Census,
    Latency,
    /// The page-cache folio order distribution of a file (`census` steps): percent of its cached
    /// pages in folios of order 0, 1–3, 4–8 and ≥ 9.
    FolioOrders,
    /// Read throughput (MiB/s) of a task's read steps.
    Throughput,
}

impl Class {
    /// The tolerance in words, as the tables print it.
    pub fn tolerance(self) -> &'static str {
        match self {
            Class::ThpSuccess => "±10 pp",
            Class::Work => "×1.5",
            Class::Census => "±15 %",
            Class::Latency => "×2",
            Class::FolioOrders => "±10 pp",
            Class::Throughput => "×2",
        }
    }

    /// Whether the simulator's `sim` agrees with the kernel's `kernel` within this class's
    /// tolerance.
    pub fn agrees(self, kernel: f64, sim: f64) -> bool {
        match self {
            Class::ThpSuccess => (sim - kernel).abs() <= 10.0,
            Class::Work => (kernel < WORK_SLACK && sim < WORK_SLACK) || within_ratio(kernel, sim, 1.5),
            Class::Census => {
                (sim - kernel).abs() <= CENSUS_SLACK || (sim - kernel).abs() <= 0.15 * kernel.abs()
            }
            Class::Latency | Class::Throughput => within_ratio(kernel, sim, 2.0),
            Class::FolioOrders => (sim - kernel).abs() <= 10.0,
        }
    }
}

fn within_ratio(kernel: f64, sim: f64, f: f64) -> bool {
    if kernel <= 0.0 || sim <= 0.0 {
        return kernel == sim;
    }
    let r = sim / kernel;
    r <= f && r >= 1.0 / f
}

/// Mean and sample standard deviation over runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub mean: f64,
    pub sd: f64,
    pub n: usize,
}

impl Stat {
    fn of(v: &[f64]) -> Option<Stat> {
        (!v.is_empty()).then(|| Stat {
            mean: amean(v),
            sd: stddev(v),
            n: v.len(),
        })
    }
}

/// A row's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// One side cannot measure the row (the reason).
    NotMeasured(String),
}

impl Verdict {
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "FAIL",
            Verdict::NotMeasured(_) => "n/a",
        }
    }
}

/// One scored row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreRow {
    pub row: String,
    pub class: Class,
    pub kernel: Option<Stat>,
    pub sim: Option<Stat>,
    /// Simulator mean / kernel mean (absent when either is absent or the kernel's is 0).
    pub ratio: Option<f64>,
    pub verdict: Verdict,
    /// A one-line diagnosis of a row off by more than ×3 (from the suite's diagnoses.toml).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub diagnosis: Option<String>,
}

impl ScoreRow {
    /// Off by more than ×3 (either way), or one side 0 and the other not: a row that needs a
    /// diagnosis.
    pub fn off_by_3(&self) -> bool {
        match (&self.kernel, &self.sim, self.verdict == Verdict::Fail) {
            (Some(k), Some(s), true) => {
                let (a, b) = (k.mean.abs(), s.mean.abs());
                a == 0.0 || b == 0.0 || a / b > 3.0 || b / a > 3.0
            }
            _ => false,
        }
    }
}

/// One measured value of a run: `None` when this run cannot measure it (with why).
type Value = Result<f64, String>;

/// Every row of one run, in a fixed order: (row, class, value).
pub fn run_rows(r: &RunResult) -> Vec<(String, Class, Value)> {
    let mut out = Vec::new();
    let d = &r.vmstat_delta;
    let get = |k: &str| -> Value {
        if k == "allocstall" && ALLOCSTALL_ITEMS.iter().any(|i| d.contains_key(*i)) {
            return Ok(ALLOCSTALL_ITEMS
                .iter()
                .map(|i| *d.get(*i).unwrap_or(&0) as f64)
                .sum());
        }
        d.get(k)
            .map(|v| *v as f64)
            .ok_or_else(|| format!("{} has no {k} in its /proc/vmstat", r.engine))
    };
    let (alloc, fallback) = (get("thp_fault_alloc"), get("thp_fault_fallback"));
    let thp = match (alloc, fallback) {
        (Ok(a), Ok(f)) if a + f > 0.0 => Ok(a * 100.0 / (a + f)),
        (Ok(_), Ok(_)) => Err(format!("no THP fault in the {} run", r.engine)),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    out.push(("THP fault success %".to_string(), Class::ThpSuccess, thp));
    for k in WORK_ITEMS {
        out.push((k.to_string(), Class::Work, get(k)));
    }
    if let Some(s) = r.samples.last() {
        for (o, v) in s.free_by_order.iter().enumerate() {
            out.push((
                format!("free pages order {o} (end)"),
                Class::Census,
                Ok(*v as f64),
            ));
        }
        for (t, v) in MIGRATETYPE_NAMES.iter().zip(&s.blocks_by_type) {
            out.push((format!("{t} blocks (end)"), Class::Census, Ok(*v as f64)));
        }
        let mixed = if r.engine == "host" && !host_counts_mixed(r) {
            Err("the kernel prints no \"Number of mixed blocks\" (no CONFIG_PAGE_OWNER)".into())
        } else {
            Ok(s.mixed_blocks as f64)
        };
        out.push(("mixed blocks (end)".to_string(), Class::Census, mixed));
    }
    // Each census step, numbered per file in the order they ran (the same on both engines).
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &r.census {
        let k = seen.entry(c.file.as_str()).or_default();
        *k += 1;
        let all = c.pages();
        for (lo, hi, name) in [(0, 0, "0"), (1, 3, "1-3"), (4, 8, "4-8"), (9, 10, ">=9")] {
            let v = if all == 0 {
                Err(format!("census {} #{k}: no page of the file cached", c.file))
            } else {
                Ok(c.pages_per_order[lo..=hi].iter().sum::<u64>() as f64 * 100.0 / all as f64)
            };
            out.push((
                format!("census {} #{k}: % in order {name}", c.file),
                Class::FolioOrders,
                v,
            ));
        }
    }
    let mut tasks: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for t in &r.task_reads {
        tasks.entry(t.task.as_str()).or_default().push(t.mib_per_s());
    }
    for (t, v) in tasks {
        out.push((format!("{t}: read MiB/s"), Class::Throughput, Ok(amean(&v))));
    }
    for (order, h) in latency_by_order(r) {
        for (q, name) in [(0.5, "p50"), (0.99, "p99")] {
            out.push((
                format!("order-{order} fault {name} (us)"),
                Class::Latency,
                Ok(quantile_ns(&h, q) / 1000.0),
            ));
        }
    }
    out
}

/// The migratetypes in the order of `Sample::blocks_by_type`.
const MIGRATETYPE_NAMES: &[&str] = &["Unmovable", "Movable", "Reclaimable", "HighAtomic", "CMA"];

fn host_counts_mixed(r: &RunResult) -> bool {
    r.proc_end
        .get("pagetypeinfo")
        .is_some_and(|t| t.contains("Number of mixed blocks"))
}

/// The pages the page allocator manages at the end of a run: the sum of `managed` over the
/// zones of its /proc/zoneinfo (both engines print it in the kernel's format).
fn managed_pages(r: &RunResult) -> Option<u64> {
    let z = r.proc_end.get("zoneinfo")?;
    let v: Vec<u64> = z
        .lines()
        .filter_map(|l| l.trim().strip_prefix("managed"))
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum())
}

/// The fault-latency log2 buckets per folio order, every allocation path merged.
fn latency_by_order(r: &RunResult) -> BTreeMap<u32, Vec<u64>> {
    let mut m: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for h in r.fault_latency.iter().filter(|h| h.count > 0) {
        let b = m.entry(h.order).or_default();
        if b.len() < h.log2_buckets.len() {
            b.resize(h.log2_buckets.len(), 0);
        }
        for (a, x) in b.iter_mut().zip(&h.log2_buckets) {
            *a += x;
        }
    }
    m
}

/// Quantile `q` of log2 buckets (bucket i holds [2^i, 2^(i+1)) ns), interpolated geometrically
/// inside its bucket.
pub fn quantile_ns(buckets: &[u64], q: f64) -> f64 {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let target = q * total as f64;
    let mut seen = 0.0;
    for (i, &n) in buckets.iter().enumerate() {
        if n > 0 && seen + n as f64 >= target {
            let frac = ((target - seen) / n as f64).clamp(0.0, 1.0);
            return 2f64.powf(i as f64 + frac);
        }
        seen += n as f64;
    }
    2f64.powi(buckets.len() as i32)
}

/// Scores a scenario: the kernel's runs against the simulator's. Rows come in the order of the
/// first run that has them; a row one side never measures is `n/a` with the reason.
pub fn score(kernel: &[RunResult], sim: &[RunResult]) -> Vec<ScoreRow> {
    type Side = BTreeMap<String, (Vec<f64>, Option<String>)>;
    let collect = |runs: &[RunResult], order: &mut Vec<(String, Class)>| -> Side {
        let mut m: Side = BTreeMap::new();
        for r in runs {
            for (name, class, v) in run_rows(r) {
                if !order.iter().any(|(n, _)| *n == name) {
                    order.push((name.clone(), class));
                }
                let e = m.entry(name).or_default();
                match v {
                    Ok(x) => e.0.push(x),
                    Err(why) => e.1 = Some(why),
                }
            }
        }
        m
    };
    let mut order = Vec::new();
    let k = collect(kernel, &mut order);
    let s = collect(sim, &mut order);
    // A census of free lists and pageblocks compares only machines of the same size.
    let machines_differ = match (
        kernel.first().and_then(managed_pages),
        sim.first().and_then(managed_pages),
    ) {
        (Some(a), Some(b)) if a.max(b) as f64 > 1.1 * a.min(b) as f64 => Some(format!(
            "the machines differ: the kernel manages {} MiB, the simulator {} MiB (scenario not fitted)",
            a / 256,
            b / 256
        )),
        _ => None,
    };
    order
        .into_iter()
        .map(|(row, class)| {
            let side = |m: &Side, who: &str, runs: &[RunResult]| -> Result<Stat, String> {
                match m.get(&row) {
                    // A side measures a row only if every run of it did.
                    Some((v, None)) if v.len() == runs.len() => {
                        Stat::of(v).ok_or_else(|| format!("{who}: no run"))
                    }
                    Some((_, Some(why))) => Err(why.clone()),
                    _ if runs.is_empty() => Err(format!("{who}: not run")),
                    _ => Err(format!("{who}: not measured")),
                }
            };
            let (ks, ss) = (side(&k, "kernel", kernel), side(&s, "simulator", sim));
            let ratio = match (&ks, &ss) {
                (Ok(a), Ok(b)) if a.mean != 0.0 => Some(b.mean / a.mean),
                _ => None,
            };
            let verdict = match (&ks, &ss) {
                _ if class == Class::Census && machines_differ.is_some() => {
                    Verdict::NotMeasured(machines_differ.clone().unwrap_or_default())
                }
                (Ok(a), Ok(b)) if class.agrees(a.mean, b.mean) => Verdict::Pass,
                (Ok(_), Ok(_)) => Verdict::Fail,
                (Err(why), _) | (_, Err(why)) => Verdict::NotMeasured(why.clone()),
            };
            ScoreRow {
                row,
                class,
                kernel: ks.ok(),
                sim: ss.ok(),
                ratio,
                verdict,
                diagnosis: None,
            }
        })
        .collect()
}

/// (passed, failed) among `rows` (n/a rows left out).
pub fn tally(rows: &[ScoreRow]) -> (usize, usize) {
    let pass = rows.iter().filter(|r| r.verdict == Verdict::Pass).count();
    let fail = rows.iter().filter(|r| r.verdict == Verdict::Fail).count();
    (pass, fail)
}

/// The pass rate in percent of `(pass, fail)`, `None` without a scored row.
pub fn pass_rate((pass, fail): (usize, usize)) -> Option<f64> {
    (pass + fail > 0).then(|| pass as f64 * 100.0 / (pass + fail) as f64)
}

/// A figure for the tables: 3 significant digits, thousands grouped for large counts.
pub fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// "mean ± sd" of a side, or "n/a".
pub fn fmt_stat(s: &Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} ± {}", fmt_value(s.mean), fmt_value(s.sd)),
        Some(s) => fmt_value(s.mean),
        None => "n/a".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{LatencyHistogram, Sample};

    fn run(engine: &str, items: &[(&str, i64)]) -> RunResult {
        let mut r = RunResult {
            engine: engine.into(),
            ..Default::default()
        };
        for (k, v) in items {
            r.vmstat_delta.insert(k.to_string(), *v);
        }
        r
    }

    fn row<'a>(rows: &'a [ScoreRow], name: &str) -> &'a ScoreRow {
        rows.iter().find(|r| r.row == name).expect(name)
    }

    fn with_managed(mut r: RunResult, managed: u64) -> RunResult {
        r.proc_end.insert(
            "zoneinfo".into(),
            format!("Node 0, zone   Normal\n  pages free     10\n        managed  {managed}\n"),
        );
        r.samples.push(Sample {
            free_by_order: vec![10; 11],
            blocks_by_type: vec![1, 2, 0, 0, 0],
            ..Default::default()
        });
        r
    }

    #[test]
    fn census_rows_are_na_when_the_machines_differ() {
        let k = with_managed(run("host", &[]), 6_000_000);
        let same = with_managed(run("sim", &[]), 5_900_000);
        let rows = score(std::slice::from_ref(&k), std::slice::from_ref(&same));
        assert_eq!(row(&rows, "free pages order 3 (end)").verdict, Verdict::Pass);
        let small = with_managed(run("sim", &[]), 1_000_000);
        let rows = score(&[k], &[small]);
        for name in ["free pages order 3 (end)", "Movable blocks (end)"] {
            match &row(&rows, name).verdict {
                Verdict::NotMeasured(why) => assert!(why.contains("machines differ"), "{why}"),
                v => panic!("{name}: {v:?}"),
            }
        }
        assert_eq!(
            row(&rows, "compact_stall").verdict,
            Verdict::NotMeasured("host has no compact_stall in its /proc/vmstat".into())
        );
    }

    #[test]
    fn tolerances_of_each_class() {
        assert!(Class::ThpSuccess.agrees(50.0, 59.9));
        assert!(!Class::ThpSuccess.agrees(50.0, 60.5));
        assert!(Class::Work.agrees(1000.0, 1490.0));
        assert!(Class::Work.agrees(1000.0, 670.0));
        assert!(!Class::Work.agrees(1000.0, 1600.0));
        assert!(!Class::Work.agrees(1000.0, 600.0));
        assert!(Class::Work.agrees(0.0, 9.0), "both under the slack");
        assert!(!Class::Work.agrees(0.0, 10.0));
        assert!(Class::Census.agrees(1000.0, 1150.0));
        assert!(!Class::Census.agrees(1000.0, 1160.0));
        assert!(Class::Census.agrees(2.0, 10.0), "within 8 units");
        assert!(Class::Latency.agrees(100.0, 199.0));
        assert!(!Class::Latency.agrees(100.0, 201.0));
        assert!(!Class::Latency.agrees(100.0, 49.0));
    }

    #[test]
    fn rows_mean_ratio_and_verdict() {
        let k = vec![
            run(
                "host",
                &[
                    ("compact_stall", 100),
                    ("thp_fault_alloc", 60),
                    ("thp_fault_fallback", 40),
                ],
            ),
            run(
                "host",
                &[
                    ("compact_stall", 300),
                    ("thp_fault_alloc", 80),
                    ("thp_fault_fallback", 20),
                ],
            ),
        ];
        let s = vec![run(
            "sim",
            &[
                ("compact_stall", 250),
                ("thp_fault_alloc", 75),
                ("thp_fault_fallback", 25),
            ],
        )];
        let rows = score(&k, &s);
        let cs = row(&rows, "compact_stall");
        assert_eq!(cs.kernel.unwrap().mean, 200.0);
        assert_eq!(cs.kernel.unwrap().n, 2);
        assert_eq!(cs.ratio, Some(1.25));
        assert_eq!(cs.verdict, Verdict::Pass);
        let thp = row(&rows, "THP fault success %");
        assert_eq!(thp.kernel.unwrap().mean, 70.0);
        assert_eq!(thp.verdict, Verdict::Pass);
        // An item absent on one side is n/a, not 0.
        let ms = row(&rows, "compact_migrate_scanned");
        assert!(matches!(ms.verdict, Verdict::NotMeasured(_)));
        // compact_stall, the success rate, thp_fault_alloc (75 vs 70) and thp_fault_fallback
        // (25 vs 30).
        assert_eq!(tally(&rows), (4, 0));
    }

    #[test]
    fn mixed_blocks_are_na_on_a_host_without_page_owner() {
        let sample = Sample {
            free_by_order: vec![1; 11],
            blocks_by_type: vec![1, 2, 3, 0, 0],
            ..Default::default()
        };
        let mut h = run("host", &[]);
        h.samples.push(sample.clone());
        h.proc_end
            .insert("pagetypeinfo".into(), "Free pages count per migrate type".into());
        let mut s = run("sim", &[]);
        s.samples.push(sample);
        let rows = score(&[h.clone()], &[s.clone()]);
        assert!(matches!(
            row(&rows, "mixed blocks (end)").verdict,
            Verdict::NotMeasured(_)
        ));
        assert_eq!(row(&rows, "Movable blocks (end)").verdict, Verdict::Pass);
        h.proc_end
            .insert("pagetypeinfo".into(), "Number of mixed blocks ...".into());
        let rows = score(&[h], &[s]);
        assert_eq!(row(&rows, "mixed blocks (end)").verdict, Verdict::Pass);
    }

    #[test]
    fn latency_quantiles_merge_paths_and_interpolate() {
        let h = |path: &str, b: Vec<u64>| LatencyHistogram {
            order: 9,
            path: path.into(),
            count: b.iter().sum(),
            log2_buckets: b,
            ..Default::default()
        };
        let mut r = run("sim", &[]);
        r.fault_latency = vec![
            h("fast", vec![0, 0, 0, 2]),
            h("direct_compaction", vec![0, 0, 0, 0, 2]),
        ];
        let rows = run_rows(&r);
        let p50 = rows.iter().find(|x| x.0 == "order-9 fault p50 (us)").unwrap();
        // Half of 4 values lie in bucket 3 ([8, 16) ns): the median is its top, 16 ns.
        assert_eq!(p50.2.clone().unwrap(), 16.0 / 1000.0);
        assert_eq!(quantile_ns(&[0, 4], 0.5), 2f64.powf(1.5));
    }

    #[test]
    fn off_by_3_flags_failed_rows_only() {
        let k = vec![run("host", &[("pgmigrate_success", 900_000)])];
        let s = vec![run("sim", &[("pgmigrate_success", 135_000)])];
        let rows = score(&k, &s);
        let r = row(&rows, "pgmigrate_success");
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.off_by_3());
        let s2 = vec![run("sim", &[("pgmigrate_success", 500_000)])];
        let r2 = score(&k, &s2);
        assert!(!row(&r2, "pgmigrate_success").off_by_3());
    }

    #[test]
    fn census_rows_are_shares_of_the_cached_pages() {
        use crate::result::CensusResult;
        let mut c = CensusResult {
            task: "r".into(),
            file: "data".into(),
            ..Default::default()
        };
        c.pages_per_order[0] = 10;
        c.pages_per_order[9] = 90;
        let mut k = run("host", &[]);
        k.census.push(c.clone());
        let mut s = run("sim", &[]);
        c.pages_per_order[5] = 90;
        c.pages_per_order[9] = 0;
        s.census.push(c);
        let rows = score(&[k], &[s]);
        let r9 = row(&rows, "census data #1: % in order >=9");
        assert_eq!(r9.kernel.unwrap().mean, 90.0);
        assert_eq!(r9.sim.unwrap().mean, 0.0);
        assert_eq!(r9.verdict, Verdict::Fail);
        assert_eq!(row(&rows, "census data #1: % in order 0").verdict, Verdict::Pass);
    }
}
