//! The validation scoreboard (issues 19 and 32): for one scenario run on both engines, each row's
//! kernel mean ± sd (and min–max) over the kernel's runs, the simulator's over its runs, their
//! ratio, and a verdict against the row's tolerance class; then the pass rates per class, per
//! scenario and overall — counted only over the rows that carry information.
//!
//! The rows and their classes (the tolerances):
//! - **THP success** (`THP fault success %` = thp_fault_alloc × 100 / (alloc + fallback), per
//!   run): the simulator within ±10 percentage points of the kernel.
//! - **Work counters** (the /proc/vmstat deltas of compaction, migration, reclaim, stalls and THP
//!   faults, [`WORK_ITEMS`]): the ratio simulator / kernel within ×1.5 either way.
//! - **Census** (free pages per order and pageblocks per migratetype in the last sample, mixed
//!   blocks; and per zone, at the last named sample of each name, its wholly free blocks, the
//!   blocks in use of each type and its mixed blocks, `census.NAME.ZONE.CLASS`): the simulator
//!   within ±15 % of the kernel, or within [`CENSUS_SLACK`] of it in absolute terms (the unit of
//!   each census: a handful of pages or blocks).
//! - **Latency** (p50 and p99 of the fault latency per folio order, all allocation paths merged):
//!   the ratio within ×2. Quantiles are read from the log2 histograms with geometric interpolation
//!   inside the bucket (the histograms have no finer resolution).
//! - **Folio orders** (per `census` step of a file, the percent of its cached pages in folios of
//!   order 0, 1–3, 4–8, ≥ 9): within ±10 percentage points.
//! - **Throughput** (read MiB/s of a task's read steps): the ratio within ×2.
//!
//! **Trivial rows** (issue 32) are rows where both engines saw (next to) nothing: 0 = 0 is an
//! agreement that says nothing about the model. They are listed, with the verdict their tolerance
//! gives, but left out of every pass rate. Per class, a row is trivial when
//! - work counters that count pages (scanned, isolated, migrated, reclaimed: [`PAGE_ITEMS`]):
//!   both means are under max([`TRIVIAL_COUNT`], [`TRIVIAL_ALLOC_SHARE`] of the scenario's page
//!   allocations), the allocations being the kernel's mean over its runs of the sum of the
//!   `pgalloc_*` deltas (the simulator's when the kernel has none): a few hundred migrations in
//!   a run that allocated ten million pages are noise, not a magnitude. Work counters that count
//!   events (stalls, compaction outcomes, kcompactd wake-ups, THP faults, hugetlb allocations)
//!   are trivial under [`TRIVIAL_COUNT`] alone: `pgalloc_*` counts pages, so a share of it is no
//!   measure of how many of those events a run could have (2,000 THP faults are 1 M pages);
//! - census: both means under [`TRIVIAL_COUNT`] pages or blocks;
//! - THP success: both sides had fewer than [`TRIVIAL_COUNT`] THP faults (alloc + fallback, mean
//!   per run) — a rate of a handful of faults;
//! - latency: both sides had fewer than [`TRIVIAL_COUNT`] faults of that folio order (mean per
//!   run): a p99 of nine faults is their maximum;
//! - folio orders: both shares under [`TRIVIAL_SHARE_PP`] percentage point;
//! - throughput: never (a read step always moves data).
//!
//! **Kernel-unstable rows**: where the kernel's own runs disagree — coefficient of variation
//! sd / mean over at least 2 runs above [`UNSTABLE_CV`] — its mean is no target. Such a row is
//! scored against the kernel's [min, max] range widened by the class tolerance (the simulator
//! agrees with some value of the range: work ×1.5 gives [min / 1.5, max × 1.5], the ±pp classes
//! [min − 10, max + 10], census ±15 % or 8 units beyond either end), and counted apart from the
//! stable rows ([`Tally`]).
//!
//! **The kernel's own ceiling** ([`ceiling`]): each kernel run scored, as if it were the
//! simulator, against the mean of the other kernel runs, with the same tolerances and triviality
//! rule; the share of non-trivial rows (stable or not) that pass, summed over the runs left out,
//! is what the kernel itself achieves — the simulator cannot be expected to do better.
//!
//! **The old rule** (issues 19–20) is kept computable: [`ScoreRow::old_verdict`] compares the two
//! means with the plain tolerances, two work counts both under [`WORK_SLACK`] agreeing, every
//! measured row counted; [`old_rule_tally`] sums it.
//!
//! A row is `n/a` — never 0 — when one side cannot measure it: the host engine has no allocator
//! work counters (`sim_work`), no "Number of mixed blocks" without CONFIG_PAGE_OWNER, and a side
//! with no THP fault or no fault of an order has no success rate or latency for it. `n/a` rows
//! are left out of every pass rate. Host counters are system-wide: the suite runner subtracts an
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
    // Partial unmapping and the deferred split (docs/model §31.4).
    "thp_split_pmd",
    "thp_deferred_split_page",
    "thp_split_page",
    "htlb_buddy_alloc_success",
    "htlb_buddy_alloc_fail",
];

/// The old rule only: work counters that both stay under this many events agree.
pub const WORK_SLACK: f64 = 10.0;
/// Census rows within this many units (pages, blocks) agree whatever the relative difference.
pub const CENSUS_SLACK: f64 = 8.0;
/// A count (events, pages, blocks, faults) under which both sides saw next to nothing.
pub const TRIVIAL_COUNT: f64 = 10.0;
/// The work counters that count pages, whose trivial floor scales with the scenario's page
/// allocations (the others count events).
pub const PAGE_ITEMS: &[&str] = &[
    "compact_migrate_scanned",
    "compact_free_scanned",
    "compact_isolated",
    "compact_daemon_migrate_scanned",
    "compact_daemon_free_scanned",
    "pgmigrate_success",
    "pgmigrate_fail",
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
];

/// Work counters are trivial under this share of the scenario's page allocations (0.1 %) when
/// that is above [`TRIVIAL_COUNT`].
pub const TRIVIAL_ALLOC_SHARE: f64 = 0.001;
/// Folio-order shares both under this many percentage points are trivial.
pub const TRIVIAL_SHARE_PP: f64 = 1.0;
/// A kernel coefficient of variation (sd / mean, n ≥ 2) above which a row is kernel-unstable.
pub const UNSTABLE_CV: f64 = 0.5;

/// The tolerance class of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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
    /// Every class, in the order of the tables.
    pub const ALL: [Class; 6] = [
        Class::ThpSuccess,
        Class::Work,
        Class::Census,
        Class::Latency,
        Class::FolioOrders,
        Class::Throughput,
    ];

    /// The class's name in the tables.
    pub fn name(self) -> &'static str {
        match self {
            Class::ThpSuccess => "THP success",
            Class::Work => "work counters",
            Class::Census => "census",
            Class::Latency => "latency p50/p99",
            Class::FolioOrders => "folio orders",
            Class::Throughput => "read throughput",
        }
    }

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
    /// tolerance (no slack for small work counts: those rows are trivial, see the module doc).
    pub fn agrees(self, kernel: f64, sim: f64) -> bool {
        match self {
            Class::ThpSuccess | Class::FolioOrders => (sim - kernel).abs() <= 10.0,
            Class::Work => within_ratio(kernel, sim, 1.5),
            Class::Census => {
                (sim - kernel).abs() <= CENSUS_SLACK || (sim - kernel).abs() <= 0.15 * kernel.abs()
            }
            Class::Latency | Class::Throughput => within_ratio(kernel, sim, 2.0),
        }
    }

    /// The old rule (issues 19–20): [`Class::agrees`], and two work counts both under
    /// [`WORK_SLACK`] agree whatever their ratio.
    pub fn agrees_old(self, kernel: f64, sim: f64) -> bool {
        match self {
            Class::Work => (kernel < WORK_SLACK && sim < WORK_SLACK) || self.agrees(kernel, sim),
            _ => self.agrees(kernel, sim),
        }
    }

    /// Whether `sim` agrees with some value of the kernel's range [`lo`, `hi`] within this
    /// class's tolerance: inside the range, or agreeing with either end (for ×f classes
    /// [lo / f, hi × f], for ±pp classes [lo − 10, hi + 10]).
    pub fn agrees_range(self, lo: f64, hi: f64, sim: f64) -> bool {
        (lo..=hi).contains(&sim) || self.agrees(lo, sim) || self.agrees(hi, sim)
    }
}

fn within_ratio(kernel: f64, sim: f64, f: f64) -> bool {
    if kernel <= 0.0 || sim <= 0.0 {
        return kernel == sim;
    }
    let r = sim / kernel;
    r <= f && r >= 1.0 / f
}

/// Mean, sample standard deviation, range and values over runs. `min`, `max` and `values` are
/// absent from scoreboards before issue 32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub mean: f64,
    pub sd: f64,
    pub n: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// The value of each run, in run order (so that a scoreboard can be scored again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<f64>,
}

impl Stat {
    pub fn of(v: &[f64]) -> Option<Stat> {
        (!v.is_empty()).then(|| Stat {
            mean: amean(v),
            sd: stddev(v),
            n: v.len(),
            min: Some(v.iter().copied().fold(f64::INFINITY, f64::min)),
            max: Some(v.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
            values: v.to_vec(),
        })
    }

    /// The coefficient of variation sd / |mean| (None under 2 runs or with a mean of 0).
    pub fn cv(&self) -> Option<f64> {
        (self.n >= 2 && self.mean != 0.0).then(|| self.sd / self.mean.abs())
    }

    /// Kernel-unstable: [`Stat::cv`] above [`UNSTABLE_CV`].
    pub fn unstable(&self) -> bool {
        self.cv().is_some_and(|c| c > UNSTABLE_CV)
    }

    /// [min, max]; for a Stat without them (an old scoreboard), the widest range `n` values of
    /// this mean and sample sd can span, mean ± sd × (n − 1) / √n (exact for n = 2), not below
    /// 0 for a non-negative mean (every row is a count, a share, a time or a rate).
    pub fn range(&self) -> (f64, f64) {
        if let (Some(a), Some(b)) = (self.min, self.max) {
            return (a, b);
        }
        if !self.values.is_empty() {
            let s = Stat::of(&self.values).expect("values");
            return (s.min.unwrap_or(s.mean), s.max.unwrap_or(s.mean));
        }
        let n = self.n.max(1) as f64;
        let half = self.sd * (n - 1.0) / n.sqrt();
        let lo = self.mean - half;
        (if self.mean >= 0.0 { lo.max(0.0) } else { lo }, self.mean + half)
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
    /// The tolerance's verdict: the means compared, or for a kernel-unstable row the
    /// simulator's mean against the kernel's widened range. Given for trivial rows too.
    pub verdict: Verdict,
    /// Both engines saw next to nothing (the module doc): left out of every pass rate.
    #[serde(default)]
    pub trivial: bool,
    /// The kernel's runs vary by more than [`UNSTABLE_CV`]: scored against their range and
    /// counted apart.
    #[serde(default)]
    pub kernel_unstable: bool,
    /// A one-line diagnosis of a row off by more than ×3 (from the suite's diagnoses.toml).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub diagnosis: Option<String>,
}

impl ScoreRow {
    /// Off by more than ×3 (either way), or one side 0 and the other not: a row that needs a
    /// diagnosis.
    pub fn off_by_3(&self) -> bool {
        match (&self.kernel, &self.sim, self.verdict == Verdict::Fail) {
            (Some(k), Some(s), true) if !self.trivial => {
                let (a, b) = (k.mean.abs(), s.mean.abs());
                a == 0.0 || b == 0.0 || a / b > 3.0 || b / a > 3.0
            }
            _ => false,
        }
    }

    /// The verdict of the old rule (issues 19–20): the means with [`Class::agrees_old`].
    pub fn old_verdict(&self) -> Verdict {
        match (&self.verdict, &self.kernel, &self.sim) {
            (Verdict::NotMeasured(w), _, _) => Verdict::NotMeasured(w.clone()),
            (_, Some(k), Some(s)) if self.class.agrees_old(k.mean, s.mean) => Verdict::Pass,
            (_, Some(_), Some(_)) => Verdict::Fail,
            _ => Verdict::NotMeasured("a side is missing".into()),
        }
    }

    /// The verdict column: `trivial`, `n/a`, `pass`/`FAIL`, with ` (range)` for a
    /// kernel-unstable row.
    pub fn verdict_text(&self) -> String {
        match &self.verdict {
            Verdict::NotMeasured(_) => "n/a".into(),
            _ if self.trivial => "trivial".into(),
            v if self.kernel_unstable => format!("{} (range)", v.word()),
            v => v.word().into(),
        }
    }
}

/// What decides whether a row is trivial, beyond its two means (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Support {
    /// The scenario's page allocations per run (the sum of `pgalloc_*`): the kernel's mean, or
    /// the simulator's when the kernel has none.
    pub allocations: Option<f64>,
    /// THP faults (alloc + fallback) per run, kernel and simulator.
    pub thp_faults: (Option<f64>, Option<f64>),
    /// Faults per run by folio order, kernel and simulator (None: unknown, as in an old
    /// scoreboard: no latency row is then trivial).
    pub faults_by_order: Option<(BTreeMap<u32, f64>, BTreeMap<u32, f64>)>,
}

impl Support {
    /// From the runs of both sides.
    pub fn of(kernel: &[&RunResult], sim: &[&RunResult]) -> Support {
        let allocs = |runs: &[&RunResult]| -> Option<f64> {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.vmstat_delta.keys().any(|k| k.starts_with("pgalloc_")))
                .map(|r| {
                    r.vmstat_delta
                        .iter()
                        .filter(|(k, _)| k.starts_with("pgalloc_"))
                        .map(|(_, v)| *v as f64)
                        .sum()
                })
                .collect();
            (!v.is_empty()).then(|| amean(&v))
        };
        let thp = |runs: &[&RunResult]| -> Option<f64> {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|r| {
                    let d = &r.vmstat_delta;
                    match (d.get("thp_fault_alloc"), d.get("thp_fault_fallback")) {
                        (None, None) => None,
                        (a, f) => Some((a.copied().unwrap_or(0) + f.copied().unwrap_or(0)) as f64),
                    }
                })
                .collect();
            (!v.is_empty()).then(|| amean(&v))
        };
        let by_order = |runs: &[&RunResult]| -> BTreeMap<u32, f64> {
            let mut m: BTreeMap<u32, f64> = BTreeMap::new();
            for r in runs {
                for h in &r.fault_latency {
                    *m.entry(h.order).or_default() += h.count as f64;
                }
            }
            let n = runs.len().max(1) as f64;
            m.values_mut().for_each(|v| *v /= n);
            m
        };
        Support {
            allocations: allocs(kernel).or_else(|| allocs(sim)),
            thp_faults: (thp(kernel), thp(sim)),
            faults_by_order: Some((by_order(kernel), by_order(sim))),
        }
    }

    /// From a scenario's scored rows alone (an old scoreboard): no allocations, THP faults from
    /// the `thp_fault_alloc` and `thp_fault_fallback` rows, faults per order unknown.
    pub fn of_rows(rows: &[ScoreRow]) -> Support {
        let mean = |name: &str, kernel: bool| {
            rows.iter()
                .find(|r| r.row == name)
                .and_then(|r| if kernel { r.kernel.as_ref() } else { r.sim.as_ref() })
                .map(|s| s.mean)
        };
        let thp = |kernel: bool| match (
            mean("thp_fault_alloc", kernel),
            mean("thp_fault_fallback", kernel),
        ) {
            (None, None) => None,
            (a, f) => Some(a.unwrap_or(0.0) + f.unwrap_or(0.0)),
        };
        Support {
            allocations: None,
            thp_faults: (thp(true), thp(false)),
            faults_by_order: None,
        }
    }

    /// The count under which both work counters are trivial: max(10, 0.1 % of allocations).
    pub fn work_floor(&self) -> f64 {
        self.allocations
            .map_or(TRIVIAL_COUNT, |a| (a * TRIVIAL_ALLOC_SHARE).max(TRIVIAL_COUNT))
    }

    /// Whether a row of `class` named `row` with these two means is trivial.
    pub fn trivial(&self, class: Class, row: &str, kernel: f64, sim: f64) -> bool {
        let under = |x: f64| both(kernel, sim, x);
        match class {
            Class::Work if PAGE_ITEMS.contains(&row) => under(self.work_floor()),
            Class::Work => under(TRIVIAL_COUNT),
            Class::Census => under(TRIVIAL_COUNT),
            Class::FolioOrders => under(TRIVIAL_SHARE_PP),
            Class::Throughput => false,
            Class::ThpSuccess => {
                let (k, s) = self.thp_faults;
                both(k.unwrap_or(0.0), s.unwrap_or(0.0), TRIVIAL_COUNT)
            }
            Class::Latency => {
                let order = row
                    .strip_prefix("order-")
                    .and_then(|r| r.split_once(' '))
                    .and_then(|(o, _)| o.parse::<u32>().ok());
                match (&self.faults_by_order, order) {
                    (Some((k, s)), Some(o)) => both(
                        k.get(&o).copied().unwrap_or(0.0),
                        s.get(&o).copied().unwrap_or(0.0),
                        TRIVIAL_COUNT,
                    ),
                    _ => false,
                }
            }
        }
    }
}

fn both(a: f64, b: f64, under: f64) -> bool {
    a.abs() < under && b.abs() < under
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
    // Named samples (issue 33): the pageblock census per zone at the last sample of each name.
    for (row, v) in super::rows::named_census_rows(r) {
        out.push((row, Class::Census, v));
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

/// The fault-latency log2 buckets per folio order, every allocation path merged. The
/// power-of-two buckets, not the log-linear ones newer results also hold: the stored kernel
/// runs (experiments/validation) have only these, and both arms are scored alike.
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
    let k: Vec<&RunResult> = kernel.iter().collect();
    let s: Vec<&RunResult> = sim.iter().collect();
    score_refs(&k, &s)
}

fn score_refs(kernel: &[&RunResult], sim: &[&RunResult]) -> Vec<ScoreRow> {
    type Side = BTreeMap<String, (Vec<f64>, Option<String>)>;
    let collect = |runs: &[&RunResult], order: &mut Vec<(String, Class)>| -> Side {
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
    let support = Support::of(kernel, sim);
    // A census of free lists and pageblocks compares only machines of the same size.
    let machines_differ = match (
        kernel.first().and_then(|r| managed_pages(r)),
        sim.first().and_then(|r| managed_pages(r)),
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
            let side = |m: &Side, who: &str, runs: &[&RunResult]| -> Result<Stat, String> {
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
                (Ok(_), Ok(_)) => Verdict::Pass, // judged below
                (Err(why), _) | (_, Err(why)) => Verdict::NotMeasured(why.clone()),
            };
            let mut r = ScoreRow {
                row,
                class,
                kernel: ks.ok(),
                sim: ss.ok(),
                ratio,
                verdict,
                trivial: false,
                kernel_unstable: false,
                diagnosis: None,
            };
            judge(&mut r, &support);
            r
        })
        .collect()
}

/// Sets a measured row's trivial and kernel-unstable flags and its verdict (the rule of the
/// module doc); an `n/a` row is left as it is.
fn judge(r: &mut ScoreRow, support: &Support) {
    let (Some(k), Some(s)) = (&r.kernel, &r.sim) else {
        return;
    };
    if matches!(r.verdict, Verdict::NotMeasured(_)) {
        return;
    }
    r.trivial = support.trivial(r.class, &r.row, k.mean, s.mean);
    r.kernel_unstable = k.unstable();
    let ok = if r.kernel_unstable {
        let (lo, hi) = k.range();
        r.class.agrees_range(lo, hi, s.mean)
    } else {
        r.class.agrees(k.mean, s.mean)
    };
    r.verdict = if ok { Verdict::Pass } else { Verdict::Fail };
}

/// Scores an old scoreboard's rows again by the rule of this module: trivial rows from the two
/// means and the THP-fault rows ([`Support::of_rows`]: no allocations, so work counters are
/// trivial under 10; no fault counts per order, so no latency row is trivial unless it was
/// marked), kernel-unstable rows from the kernel's sd / mean and its range ([`Stat::range`]).
///
/// `allocations` (the scenario's page allocations per run, when the scoreboard has them) raises
/// the work counters' floor as in [`Support::work_floor`].
pub fn rescore(rows: &mut [ScoreRow], allocations: Option<f64>) {
    let support = Support {
        allocations,
        ..Support::of_rows(rows)
    };
    for r in rows.iter_mut() {
        let was_trivial = r.trivial;
        judge(r, &support);
        r.trivial |= was_trivial && r.class == Class::Latency;
    }
}

/// Counts of a set of rows (of one class, one scenario, or all) by the rule of the module doc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Non-trivial rows with a stable kernel: passed, failed.
    pub pass: usize,
    pub fail: usize,
    /// Non-trivial kernel-unstable rows (scored against the kernel's range): passed, failed.
    pub unstable_pass: usize,
    pub unstable_fail: usize,
    /// Trivial rows (either verdict).
    pub trivial: usize,
    /// Rows one side cannot measure.
    pub not_measured: usize,
}

impl Tally {
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a ScoreRow>) -> Tally {
        let mut t = Tally::default();
        for r in rows {
            match (&r.verdict, r.trivial, r.kernel_unstable) {
                (Verdict::NotMeasured(_), _, _) => t.not_measured += 1,
                (_, true, _) => t.trivial += 1,
                (Verdict::Pass, _, false) => t.pass += 1,
                (Verdict::Fail, _, false) => t.fail += 1,
                (Verdict::Pass, _, true) => t.unstable_pass += 1,
                (Verdict::Fail, _, true) => t.unstable_fail += 1,
            }
        }
        t
    }

    pub fn add(&mut self, o: &Tally) {
        self.pass += o.pass;
        self.fail += o.fail;
        self.unstable_pass += o.unstable_pass;
        self.unstable_fail += o.unstable_fail;
        self.trivial += o.trivial;
        self.not_measured += o.not_measured;
    }

    /// Non-trivial stable rows.
    pub fn scored(&self) -> usize {
        self.pass + self.fail
    }

    /// The pass rate of the non-trivial stable rows (the headline).
    pub fn rate(&self) -> Option<f64> {
        pass_rate((self.pass, self.fail))
    }

    /// Non-trivial kernel-unstable rows.
    pub fn unstable(&self) -> usize {
        self.unstable_pass + self.unstable_fail
    }
}

/// Per class, the [`Tally`] of `rows` (every class present, empty ones too).
pub fn by_class(rows: &[ScoreRow]) -> BTreeMap<Class, Tally> {
    Class::ALL
        .iter()
        .map(|c| (*c, Tally::of(rows.iter().filter(|r| r.class == *c))))
        .collect()
}

/// (passed, failed) among `rows` by the old rule: every measured row, trivial or not, its means
/// compared with [`Class::agrees_old`].
pub fn old_rule_tally(rows: &[ScoreRow]) -> (usize, usize) {
    rows.iter().fold((0, 0), |(p, f), r| match r.old_verdict() {
        Verdict::Pass => (p + 1, f),
        Verdict::Fail => (p, f + 1),
        Verdict::NotMeasured(_) => (p, f),
    })
}

/// Non-trivial passes of some scored rows: (passed, scored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hits {
    pub pass: usize,
    pub scored: usize,
}

impl Hits {
    pub fn add(&mut self, o: &Hits) {
        self.pass += o.pass;
        self.scored += o.scored;
    }

    pub fn rate(&self) -> Option<f64> {
        (self.scored > 0).then(|| self.pass as f64 * 100.0 / self.scored as f64)
    }
}

/// The kernel's own ceiling of a scenario (the module doc): overall and per class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    /// The kernel runs left out in turn.
    pub runs: usize,
    pub all: Hits,
    pub by_class: BTreeMap<Class, Hits>,
}

/// Leave one out: each kernel run scored as the simulator against the other runs; None under 2
/// runs.
pub fn ceiling(kernel: &[RunResult]) -> Option<Ceiling> {
    if kernel.len() < 2 {
        return None;
    }
    let mut c = Ceiling {
        runs: kernel.len(),
        ..Default::default()
    };
    for i in 0..kernel.len() {
        let others: Vec<&RunResult> = kernel
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, r)| r)
            .collect();
        for r in score_refs(&others, &[&kernel[i]]) {
            if r.trivial || matches!(r.verdict, Verdict::NotMeasured(_)) {
                continue;
            }
            let h = Hits {
                pass: usize::from(r.verdict == Verdict::Pass),
                scored: 1,
            };
            c.all.add(&h);
            c.by_class.entry(r.class).or_default().add(&h);
        }
    }
    Some(c)
}

/// [`ceiling`] from a stored scoreboard's rows, when every row the kernel measured keeps its
/// per-run values (scoreboards since issue 32): each kernel value scored against the others'.
/// THP success is trivial from the THP-fault rows' values, work counters from `allocations`; a
/// scoreboard holds no faults per order, so no latency row is trivial here. None under 2 runs
/// or without the values.
pub fn ceiling_from_rows(rows: &[ScoreRow], allocations: Option<f64>) -> Option<Ceiling> {
    let kernel: Vec<(&ScoreRow, &Stat)> = rows
        .iter()
        .filter_map(|r| r.kernel.as_ref().map(|k| (r, k)))
        .collect();
    let n = kernel.first()?.1.n;
    if n < 2 || kernel.iter().any(|(_, k)| k.n != n || k.values.len() != n) {
        return None;
    }
    let values = |name: &str| kernel.iter().find(|(r, _)| r.row == name).map(|(_, k)| &k.values);
    let mut c = Ceiling {
        runs: n,
        ..Default::default()
    };
    for i in 0..n {
        let others = |v: &Vec<f64>| -> Vec<f64> {
            v.iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, x)| *x)
                .collect()
        };
        let thp = |pick: &dyn Fn(&Vec<f64>) -> f64| -> Option<f64> {
            match (values("thp_fault_alloc"), values("thp_fault_fallback")) {
                (None, None) => None,
                (a, f) => Some(a.map_or(0.0, pick) + f.map_or(0.0, pick)),
            }
        };
        let support = Support {
            allocations,
            thp_faults: (thp(&|v| amean(&others(v))), thp(&|v| v[i])),
            faults_by_order: None,
        };
        for (r, k) in &kernel {
            let mut x = ScoreRow {
                row: r.row.clone(),
                class: r.class,
                kernel: Stat::of(&others(&k.values)),
                sim: Stat::of(&[k.values[i]]),
                ratio: None,
                verdict: Verdict::Pass,
                trivial: false,
                kernel_unstable: false,
                diagnosis: None,
            };
            judge(&mut x, &support);
            if x.trivial {
                continue;
            }
            let h = Hits {
                pass: usize::from(x.verdict == Verdict::Pass),
                scored: 1,
            };
            c.all.add(&h);
            c.by_class.entry(r.class).or_default().add(&h);
        }
    }
    Some(c)
}

/// (passed, failed) among `rows`: the non-trivial rows with a stable kernel (see [`Tally`]).
pub fn tally(rows: &[ScoreRow]) -> (usize, usize) {
    let t = Tally::of(rows);
    (t.pass, t.fail)
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

/// The kernel's "min–max" (over at least 2 runs), or "".
pub fn fmt_range(s: &Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => {
            let (lo, hi) = s.range();
            format!("{}–{}", fmt_value(lo), fmt_value(hi))
        }
        _ => String::new(),
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
        assert!(Class::Work.agrees_old(0.0, 9.0), "both under the old slack");
        assert!(
            !Class::Work.agrees(0.0, 9.0),
            "no slack: such rows are trivial instead"
        );
        assert!(!Class::Work.agrees_old(0.0, 10.0));
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
        let k = cs.kernel.as_ref().unwrap();
        assert_eq!((k.mean, k.n, k.min, k.max), (200.0, 2, Some(100.0), Some(300.0)));
        assert_eq!(k.values, vec![100.0, 300.0]);
        assert_eq!(cs.ratio, Some(1.25));
        assert_eq!(cs.verdict, Verdict::Pass);
        // 100 and 300: sd / mean 0.71, scored against [100, 300] and counted apart.
        assert!(cs.kernel_unstable && !cs.trivial);
        let thp = row(&rows, "THP fault success %");
        assert_eq!(thp.kernel.as_ref().unwrap().mean, 70.0);
        assert_eq!(thp.verdict, Verdict::Pass);
        // An item absent on one side is n/a, not 0.
        let ms = row(&rows, "compact_migrate_scanned");
        assert!(matches!(ms.verdict, Verdict::NotMeasured(_)));
        // The success rate, thp_fault_alloc (75 vs 70) and thp_fault_fallback (25 vs 30);
        // compact_stall is kernel-unstable.
        assert_eq!(tally(&rows), (3, 0));
        assert_eq!(Tally::of(&rows).unstable_pass, 1);
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

    /// Issue 33: the named samples' census rows are census rows of validate's scoreboard; the
    /// mixed row is n/a for a host without page_owner, the others scored with the census
    /// tolerance.
    #[test]
    fn named_sample_census_rows_are_scored() {
        use crate::result::pageblock::ZoneCensus;
        use crate::result::NamedSample;
        let named = |mixed: Option<u64>, free: u64| NamedSample {
            name: "built".into(),
            zones: vec![ZoneCensus {
                zone: "Normal".into(),
                blocks_by_type: vec![40, 500, 30, 0, 0],
                free_blocks_by_type: vec![0, free, 0, 0, 0],
                mixed_blocks: mixed,
            }],
            ..Default::default()
        };
        let mut h = run("host", &[]);
        h.named_samples.push(named(None, 200));
        let mut s = run("sim", &[]);
        s.named_samples.push(named(Some(7), 300));
        let rows = score(&[h], &[s]);
        let r = row(&rows, "census.built.Normal.mixed");
        assert_eq!(r.class, Class::Census);
        assert!(matches!(&r.verdict, Verdict::NotMeasured(w) if w.contains("Number of mixed blocks")));
        assert_eq!(row(&rows, "census.built.Normal.unmovable").verdict, Verdict::Pass);
        // 200 against 300 wholly free blocks: over ±15 %; in-use Movable 300 against 200 too.
        assert_eq!(row(&rows, "census.built.Normal.free").verdict, Verdict::Fail);
        assert_eq!(row(&rows, "census.built.Normal.movable").verdict, Verdict::Fail);
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
        assert_eq!(r9.kernel.as_ref().unwrap().mean, 90.0);
        assert_eq!(r9.sim.as_ref().unwrap().mean, 0.0);
        assert_eq!(r9.verdict, Verdict::Fail);
        assert_eq!(row(&rows, "census data #1: % in order 0").verdict, Verdict::Pass);
    }

    #[test]
    fn work_rows_are_trivial_under_10_or_0_1_percent_of_allocations() {
        // 1,000 pages allocated: the floor is 10; 50 vs 90 carries information and fails.
        let k = run(
            "host",
            &[
                ("pgalloc_normal", 900),
                ("pgalloc_dma32", 100),
                ("pgmigrate_success", 50),
                ("compact_stall", 50),
            ],
        );
        let s = run(
            "sim",
            &[
                ("pgalloc_normal", 1000),
                ("pgmigrate_success", 90),
                ("compact_stall", 90),
                ("compact_fail", 0),
            ],
        );
        let rows = score(std::slice::from_ref(&k), std::slice::from_ref(&s));
        let pm = row(&rows, "pgmigrate_success");
        assert!(!pm.trivial);
        assert_eq!(pm.verdict, Verdict::Fail);
        // 100,000 pages allocated (the kernel's, not the simulator's): the floor of the
        // counters of pages is 100; the counters of events keep the floor of 10.
        let k2 = run(
            "host",
            &[
                ("pgalloc_normal", 100_000),
                ("pgmigrate_success", 50),
                ("compact_stall", 50),
                ("compact_fail", 0),
            ],
        );
        let rows = score(&[k2], std::slice::from_ref(&s));
        let pm = row(&rows, "pgmigrate_success");
        assert!(pm.trivial, "both under 0.1 % of 100,000 allocations");
        assert_eq!(pm.verdict_text(), "trivial");
        let cs = row(&rows, "compact_stall");
        assert!(
            !cs.trivial,
            "50 vs 90 stalls are events: not scaled by page allocations"
        );
        let cf = row(&rows, "compact_fail");
        assert!(cf.trivial && cf.verdict == Verdict::Pass, "0 = 0");
        assert_eq!(Tally::of(&rows).trivial, 2);
        assert_eq!(
            tally(&rows),
            (0, 1),
            "trivial rows are in no pass rate: the stalls' fail only"
        );
        // The old rule counted 0 = 0 as a pass (and both 50 vs 90 as fails).
        assert_eq!(old_rule_tally(&rows), (1, 2));
        // Without pgalloc on the kernel, the simulator's allocations decide.
        let sup = Support::of(
            &[&run("host", &[])],
            &[&run("sim", &[("pgalloc_movable", 50_000)])],
        );
        assert_eq!(sup.work_floor(), 50.0);
        assert_eq!(Support::default().work_floor(), TRIVIAL_COUNT);
    }

    #[test]
    fn thp_latency_census_and_folio_rows_have_their_own_triviality() {
        let sup = Support {
            allocations: None,
            thp_faults: (Some(4.0), Some(9.0)),
            faults_by_order: Some((
                [(0, 5000.0), (9, 3.0)].into_iter().collect(),
                [(0, 4000.0), (9, 12.0)].into_iter().collect(),
            )),
        };
        assert!(sup.trivial(Class::ThpSuccess, "THP fault success %", 25.0, 100.0));
        let many = Support {
            thp_faults: (Some(4.0), Some(10.0)),
            ..sup.clone()
        };
        assert!(!many.trivial(Class::ThpSuccess, "THP fault success %", 25.0, 100.0));
        assert!(
            !sup.trivial(Class::Latency, "order-9 fault p99 (us)", 1.0, 1.0),
            "12 faults"
        );
        let few = Support {
            faults_by_order: Some(([(9, 3.0)].into_iter().collect(), [(9, 9.0)].into_iter().collect())),
            ..sup.clone()
        };
        assert!(few.trivial(Class::Latency, "order-9 fault p99 (us)", 1.0, 50.0));
        assert!(
            few.trivial(Class::Latency, "order-0 fault p99 (us)", 1.0, 50.0),
            "no fault"
        );
        assert!(sup.trivial(Class::Census, "free pages order 9 (end)", 9.0, 0.0));
        assert!(!sup.trivial(Class::Census, "free pages order 9 (end)", 10.0, 0.0));
        assert!(sup.trivial(Class::FolioOrders, "census f #1: % in order 0", 0.9, 0.0));
        assert!(!sup.trivial(Class::FolioOrders, "census f #1: % in order 0", 1.0, 0.0));
        assert!(!sup.trivial(Class::Throughput, "r: read MiB/s", 0.0, 0.0));
        // An old scoreboard does not know the faults per order: no latency row is trivial.
        assert!(!Support::default().trivial(Class::Latency, "order-9 fault p99 (us)", 1.0, 1.0));
    }

    #[test]
    fn unstable_kernel_rows_are_scored_against_the_widened_range() {
        let k: Vec<RunResult> = [100, 400, 700]
            .iter()
            .map(|v| run("host", &[("pgmigrate_success", *v)]))
            .collect();
        let sim = |v| vec![run("sim", &[("pgmigrate_success", v)])];
        // mean 400, sd 300: unstable; [100 / 1.5, 700 × 1.5] = [66.7, 1050].
        for (v, ok) in [(1000, true), (1100, false), (70, true), (60, false)] {
            let rows = score(&k, &sim(v));
            let r = row(&rows, "pgmigrate_success");
            assert!(r.kernel_unstable, "{v}");
            assert_eq!(r.verdict == Verdict::Pass, ok, "{v}");
            // Against the mean, 1000 and 70 would fail.
            assert!(!Class::Work.agrees(400.0, v as f64));
            let t = Tally::of(&rows);
            assert_eq!((t.pass + t.fail, t.unstable_pass + t.unstable_fail), (0, 1));
        }
        assert!(Class::ThpSuccess.agrees_range(40.0, 60.0, 69.0));
        assert!(!Class::ThpSuccess.agrees_range(40.0, 60.0, 71.0));
        assert!(Class::Census.agrees_range(1000.0, 2000.0, 2300.0));
        assert!(!Class::Census.agrees_range(1000.0, 2000.0, 2400.0));
        assert!(Class::Census.agrees_range(0.0, 20.0, 28.0));
        // A stable kernel (sd / mean 0.25) is scored against its mean.
        let k: Vec<RunResult> = [300, 500]
            .iter()
            .map(|v| run("host", &[("pgmigrate_success", *v)]))
            .collect();
        let rows = score(&k, &sim(700));
        let r = row(&rows, "pgmigrate_success");
        assert!(!r.kernel_unstable);
        assert_eq!(
            r.verdict,
            Verdict::Fail,
            "700 / 400 > 1.5 though inside 500 × 1.5"
        );
    }

    /// Three kernel runs: compact_stall 100, 110 and 300 (unstable), pgmigrate_success 1000 in
    /// each, compact_fail 0 (trivial).
    fn three_kernel_runs() -> Vec<RunResult> {
        [100, 110, 300]
            .iter()
            .map(|a| {
                run(
                    "host",
                    &[
                        ("compact_stall", *a),
                        ("pgmigrate_success", 1000),
                        ("compact_fail", 0),
                    ],
                )
            })
            .collect()
    }

    #[test]
    fn leave_one_out_ceiling_of_three_kernel_runs() {
        let k = three_kernel_runs();
        assert_eq!(ceiling(&k[..1]), None);
        let c = ceiling(&k).unwrap();
        // compact_stall: 300 against 100 and 110 (mean 105) fails; 100 against 110 and 300
        // (unstable, [110 / 1.5, 300 × 1.5]) and 110 against 100 and 300 pass. pgmigrate_success
        // passes thrice; compact_fail (0 = 0) is trivial and not counted.
        assert_eq!(c.runs, 3);
        assert_eq!(c.all, Hits { pass: 5, scored: 6 });
        assert_eq!(c.by_class.get(&Class::Work), Some(&Hits { pass: 5, scored: 6 }));
        assert_eq!(c.by_class.get(&Class::ThpSuccess), None);
        assert!((c.all.rate().unwrap() - 500.0 / 6.0).abs() < 1e-9);
    }

    #[test]
    fn tallies_per_class() {
        let mk = |class, k: f64, s: f64, verdict: Verdict, trivial, unstable| ScoreRow {
            row: "r".into(),
            class,
            kernel: Stat::of(&[k]),
            sim: Stat::of(&[s]),
            ratio: None,
            verdict,
            trivial,
            kernel_unstable: unstable,
            diagnosis: None,
        };
        let rows = vec![
            mk(Class::Work, 100.0, 120.0, Verdict::Pass, false, false),
            mk(Class::Work, 100.0, 300.0, Verdict::Fail, false, false),
            mk(Class::Work, 0.0, 0.0, Verdict::Pass, true, false),
            mk(Class::Work, 3.0, 9.0, Verdict::Fail, true, false),
            mk(Class::Work, 100.0, 1000.0, Verdict::Fail, false, true),
            mk(Class::Census, 50.0, 52.0, Verdict::Pass, false, true),
            mk(
                Class::Latency,
                1.0,
                1.0,
                Verdict::NotMeasured("x".into()),
                false,
                false,
            ),
        ];
        let c = by_class(&rows);
        assert_eq!(
            c[&Class::Work],
            Tally {
                pass: 1,
                fail: 1,
                unstable_pass: 0,
                unstable_fail: 1,
                trivial: 2,
                not_measured: 0
            }
        );
        assert_eq!(c[&Class::Work].rate(), Some(50.0));
        assert_eq!(c[&Class::Census].unstable_pass, 1);
        assert_eq!(c[&Class::Census].rate(), None);
        assert_eq!(c[&Class::Latency].not_measured, 1);
        assert_eq!(c.len(), Class::ALL.len());
        let mut all = Tally::default();
        c.values().for_each(|t| all.add(t));
        assert_eq!(all, Tally::of(&rows));
        // The old rule: every measured row, trivial or not; 3 vs 9 passes under the slack.
        assert_eq!(old_rule_tally(&rows), (4, 2));
    }

    #[test]
    fn an_old_scoreboard_row_without_range_or_values_parses_and_rescores() {
        let old = r#"[
          {"row": "compact_stall", "class": "work", "kernel": {"mean": 200.0, "sd": 141.42135623730951, "n": 2},
           "sim": {"mean": 420.0, "sd": 0.0, "n": 2}, "ratio": 2.1, "verdict": "fail"},
          {"row": "compact_fail", "class": "work", "kernel": {"mean": 0.0, "sd": 0.0, "n": 2},
           "sim": {"mean": 0.0, "sd": 0.0, "n": 2}, "ratio": null, "verdict": "pass"},
          {"row": "pgscan_kswapd", "class": "work", "kernel": {"mean": 1000.0, "sd": 10.0, "n": 3},
           "sim": {"mean": 1600.0, "sd": 0.0, "n": 3}, "ratio": 1.6, "verdict": "fail"},
          {"row": "thp_fault_alloc", "class": "work", "kernel": {"mean": 3.0, "sd": 0.0, "n": 2},
           "sim": {"mean": 2.0, "sd": 0.0, "n": 2}, "ratio": 0.67, "verdict": "pass"},
          {"row": "THP fault success %", "class": "thp_success", "kernel": {"mean": 100.0, "sd": 0.0, "n": 2},
           "sim": {"mean": 50.0, "sd": 0.0, "n": 2}, "ratio": 0.5, "verdict": "fail"},
          {"row": "mixed blocks (end)", "class": "census", "kernel": null, "sim": {"mean": 3.0, "sd": 0.0, "n": 2},
           "ratio": null, "verdict": {"not_measured": "no CONFIG_PAGE_OWNER"}}
        ]"#;
        let mut rows: Vec<ScoreRow> = serde_json::from_str(old).unwrap();
        let k = rows[0].kernel.clone().unwrap();
        assert_eq!((k.min, k.max, k.values.len()), (None, None, 0));
        // n = 2: the two values are mean ± sd / √2 exactly.
        let (lo, hi) = k.range();
        assert!(
            (lo - 100.0).abs() < 1e-9 && (hi - 300.0).abs() < 1e-9,
            "{lo} {hi}"
        );
        let before: Vec<Verdict> = rows.iter().map(|r| r.verdict.clone()).collect();
        let old_verdicts: Vec<Verdict> = rows.iter().map(|r| r.old_verdict()).collect();
        assert_eq!(before, old_verdicts, "the old rule is reproduced from the means");
        assert_eq!(old_rule_tally(&rows), (2, 3));
        rescore(&mut rows, None);
        // compact_stall: unstable, 420 within 300 × 1.5; compact_fail and thp_fault_alloc
        // trivial; the success rate of 3 faults trivial; pgscan_kswapd a stable fail.
        assert!(rows[0].kernel_unstable && rows[0].verdict == Verdict::Pass);
        assert!(rows[1].trivial && rows[3].trivial && rows[4].trivial);
        assert!(!rows[2].trivial && rows[2].verdict == Verdict::Fail);
        assert!(matches!(rows[5].verdict, Verdict::NotMeasured(_)));
        let t = Tally::of(&rows);
        assert_eq!(
            (t.pass, t.fail, t.unstable_pass, t.trivial, t.not_measured),
            (0, 1, 1, 3, 1)
        );
        // Without n's values the widest range: n = 3, sd 10 gives mean ± 11.5.
        let s3 = Stat {
            mean: 1000.0,
            sd: 10.0,
            n: 3,
            min: None,
            max: None,
            values: vec![],
        };
        let (lo, hi) = s3.range();
        assert!((hi - lo - 2.0 * 20.0 / 3f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn the_ceiling_from_stored_values_matches_the_one_from_runs() {
        let k = three_kernel_runs();
        let rows = score(&k, &[run("sim", &[])]);
        let stored: Vec<ScoreRow> = serde_json::from_str(&serde_json::to_string(&rows).unwrap()).unwrap();
        let from_rows = ceiling_from_rows(&stored, None).unwrap();
        assert_eq!(Some(from_rows), ceiling(&k));
        // Without the per-run values (an old scoreboard): none.
        let mut old = stored.clone();
        for r in &mut old {
            if let Some(k) = &mut r.kernel {
                k.values.clear();
            }
        }
        assert_eq!(ceiling_from_rows(&old, None), None);
    }
}
