//! The mmtests-style rows of run results, defined once (seed 001's published results and mmtests' vmstat rows):
//! which rows exist, how each is computed from the result schema, and the summary statistics
//! over runs (§5.2). `fraglab run` and `fraglab host run` print [`mmtests_rows`];
//! `fraglab compare` and `fraglab host validate` (fraglab-sim `compare`) summarise
//! [`samples_of`] per configuration; both read the same rows.
//!
//! A *sample* is what mmtests calls one run: for a workload with kbuild iterations each
//! finished build is a sample (seed 001's "15 consecutive runs" are 15 builds in one boot, so
//! that the memory state carries over from one to the next); otherwise each simulation (each
//! seed) is one. Rows are the §5.1 vmstat rows plus the workloads' own (Hugealloc Time per
//! burst, Kbuild Real/User/System time, pgbench TPS, vm-scalability throughput, thpchallenge
//! latencies).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::pageblock::BlockClass;
use super::{BuildResult, RunResult};

/// How a metric's central value is summarised: arithmetic mean, or harmonic mean for rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Center {
    Amean,
    Hmean,
}

/// One metric's samples: (row name, summary, values).
pub type Samples = (String, Center, Vec<f64>);

/// A row that is the delta of /proc/vmstat items over a sample, summed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmstatRow {
    pub name: &'static str,
    /// The vmstat items summed (docs/model's /proc/vmstat names).
    pub items: &'static [&'static str],
    /// Printed by `fraglab run` (the rows of the seed 001 table, §1); `compare` prints them all.
    pub in_run_summary: bool,
}

/// `allocstall_*`: one per zone type (`ALLOCSTALL` counted at the reclaim zone index,
/// docs/model §14), all summed by "Alloc stall" (§5.1).
pub const ALLOCSTALL_ITEMS: &[&str] = &[
    "allocstall_dma",
    "allocstall_dma32",
    "allocstall_normal",
    "allocstall_movable",
    "allocstall_device",
];

const fn row(name: &'static str, items: &'static [&'static str], in_run_summary: bool) -> VmstatRow {
    VmstatRow {
        name,
        items,
        in_run_summary,
    }
}

/// The §5.1 vmstat rows, in the order they are printed.
pub const VMSTAT_ROWS: &[VmstatRow] = &[
    row("THP fault alloc", &["thp_fault_alloc"], true),
    row("THP fault fallback", &["thp_fault_fallback"], true),
    row("Direct compact stall", &["compact_stall"], false),
    row("Direct compact fail", &["compact_fail"], true),
    row("Direct compact success", &["compact_success"], true),
    row(
        "Compact daemon scanned migrate",
        &["compact_daemon_migrate_scanned"],
        true,
    ),
    row(
        "Compact daemon scanned free",
        &["compact_daemon_free_scanned"],
        true,
    ),
    row("Kcompactd wake", &["compact_daemon_wake"], false),
    row("Alloc stall", ALLOCSTALL_ITEMS, true),
    row("Pages kswapd scanned", &["pgscan_kswapd"], true),
    row("Pages kswapd stolen", &["pgsteal_kswapd"], false),
    row("Pages direct scanned", &["pgscan_direct"], true),
    row("Swap out", &["pswpout"], true),
    row("Swap in", &["pswpin"], false),
    row("File refaults", &["workingset_refault_file"], true),
];

/// The vmstat row named `name` (panics on a name not in [`VMSTAT_ROWS`]).
pub fn vmstat_row(name: &str) -> &'static VmstatRow {
    VMSTAT_ROWS
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("{name:?} is not a vmstat row"))
}

impl VmstatRow {
    /// The row's value in a vmstat delta map (absent items count 0).
    pub fn value(&self, delta: &BTreeMap<String, i64>) -> i64 {
        self.items.iter().map(|k| *delta.get(*k).unwrap_or(&0)).sum()
    }
}

/// "Direct compact success rate %" (§5.1): the mean over samples of the per-sample ratio
/// success × 100 / (success + fail), samples without direct compaction skipped — not the ratio
/// of the means.
pub fn direct_compact_success_rate(success: &[f64], fail: &[f64]) -> f64 {
    let r: Vec<f64> = success
        .iter()
        .zip(fail)
        .filter(|(s, f)| **s + **f > 0.0)
        .map(|(s, f)| s * 100.0 / (s + f))
        .collect();
    amean(&r)
}

/// The finished builds of `results`: the samples when there are any.
fn finished_builds(results: &[RunResult]) -> Vec<&BuildResult> {
    results
        .iter()
        .flat_map(|r| r.builds.iter())
        .filter(|b| b.end_ns > 0)
        .collect()
}

/// The samples of one configuration's results, by metric name, in a fixed order.
pub fn samples_of(results: &[RunResult]) -> Vec<Samples> {
    let mut out: Vec<Samples> = Vec::new();
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
    let builds = finished_builds(results);
    // mmtests' Hugealloc rows (seed 001's published results): each run (build) reports the mean and
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
    for row in VMSTAT_ROWS {
        push(
            row.name,
            Center::Amean,
            deltas.iter().map(|d| row.value(d) as f64).collect(),
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
        push(&vm_scalability_row(case), Center::Hmean, v);
    }
    let thp: Vec<&_> = results.iter().filter_map(|r| r.thpchallenge.as_ref()).collect();
    push(
        "thpchallenge fault-huge (us)",
        Center::Amean,
        thp.iter().map(|t| t.huge.mean_us()).collect(),
    );
    push(
        "thpchallenge fault-base (us)",
        Center::Amean,
        thp.iter().map(|t| t.base.mean_us()).collect(),
    );
    push(
        "thpchallenge huge-pct",
        Center::Amean,
        thp.iter().map(|t| t.huge_pct).collect(),
    );
    for (name, v) in census_and_read_samples(results) {
        let center = if name.ends_with("(MiB/s)") {
            Center::Hmean
        } else {
            Center::Amean
        };
        push(&name, center, v);
    }
    for (name, v) in named_census_samples(results) {
        push(&name, Center::Amean, v);
    }
    out
}

/// The row of pageblock class `class` of zone `zone` at the named sample `name` (issue 33):
/// `census.NAME.ZONE.CLASS`, e.g. `census.built.Normal.mixed`.
pub fn named_census_row(name: &str, zone: &str, class: BlockClass) -> String {
    format!("census.{name}.{zone}.{}", class.name())
}

/// Why a result has no mixed-blocks count: its kernel printed none.
pub const NO_MIXED_COUNT: &str = "the kernel prints no \"Number of mixed blocks\" (no CONFIG_PAGE_OWNER)";

/// The named-sample rows of one result (issue 33): for each sample name, in the order first
/// taken, the last sample of that name (when every instance and loop that takes it has), and
/// per zone of it and per [`BlockClass`] its census ([`ZoneCensus::class`](super::pageblock::ZoneCensus::class)):
/// (row, value, or why the result has none: mixed blocks on a kernel without page_owner).
pub fn named_census_rows(r: &RunResult) -> Vec<(String, Result<f64, String>)> {
    let mut names: Vec<&str> = Vec::new();
    for s in &r.named_samples {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    let mut out = Vec::new();
    for name in names {
        let last = r
            .named_samples
            .iter()
            .rev()
            .find(|s| s.name == name)
            .expect("a name of a sample");
        for z in &last.zones {
            for c in BlockClass::ALL {
                let v = z
                    .class(c)
                    .map(|n| n as f64)
                    .ok_or_else(|| NO_MIXED_COUNT.to_string());
                out.push((named_census_row(name, &z.zone, c), v));
            }
        }
    }
    out
}

/// The named-sample rows of `results` for `compare` (issue 33): each row of
/// [`named_census_rows`] with its value in every result that has one, rows in first-seen order.
pub fn named_census_samples(results: &[RunResult]) -> Vec<(String, Vec<f64>)> {
    let mut out: Vec<(String, Vec<f64>)> = Vec::new();
    for r in results {
        for (row, v) in named_census_rows(r) {
            let Ok(v) = v else { continue };
            match out.iter_mut().find(|(n, _)| *n == row) {
                Some((_, vs)) => vs.push(v),
                None => out.push((row, vec![v])),
            }
        }
    }
    out
}

/// The last census of each (task, file) in each result, by (task, file), in first-seen order.
fn last_censuses(r: &RunResult) -> Vec<&super::CensusResult> {
    let mut out: Vec<&super::CensusResult> = Vec::new();
    for c in &r.census {
        match out.iter_mut().find(|x| x.task == c.task && x.file == c.file) {
            Some(x) => *x = c,
            None => out.push(c),
        }
    }
    out
}

/// The census rows (issue 19 item 1): per file, the pages in folios of each order that any
/// result has, the percent in order >= 4 and >= 9 (from the last census of each task's file in
/// each result), and the read throughput rows: per task, bytes read / time in read steps, in
/// MiB/s, summed over the task's instances' bytes and averaged over their times.
pub fn census_and_read_samples(results: &[RunResult]) -> Vec<(String, Vec<f64>)> {
    let mut out: Vec<(String, Vec<f64>)> = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in results {
        for c in last_censuses(r) {
            let k = (c.task.clone(), c.file.clone());
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    // A file two tasks census is labelled with the task's name too.
    let mut files: Vec<&str> = keys.iter().map(|(_, f)| f.as_str()).collect();
    files.sort_unstable();
    files.dedup();
    let multi_task = files.len() != keys.len();
    for (task, file) in &keys {
        let label = if multi_task {
            format!("{task}:{file}")
        } else {
            file.clone()
        };
        let cs: Vec<&super::CensusResult> = results
            .iter()
            .filter_map(|r| {
                last_censuses(r)
                    .into_iter()
                    .find(|c| &c.task == task && &c.file == file)
            })
            .collect();
        for o in 0..11 {
            if cs.iter().any(|c| c.pages_per_order[o] > 0) {
                out.push((
                    census_row(&label, o),
                    cs.iter().map(|c| c.pages_per_order[o] as f64).collect(),
                ));
            }
        }
        for min in [4, 9] {
            out.push((
                format!("{label}: % in order >= {min}"),
                cs.iter().map(|c| c.pct_at_least(min)).collect(),
            ));
        }
    }
    let mut tasks: Vec<&str> = Vec::new();
    for r in results {
        for t in &r.task_reads {
            if !tasks.contains(&t.task.as_str()) {
                tasks.push(&t.task);
            }
        }
    }
    for task in tasks {
        let v: Vec<f64> = results
            .iter()
            .filter_map(|r| {
                let ts: Vec<&super::TaskReadResult> =
                    r.task_reads.iter().filter(|t| t.task == task).collect();
                if ts.is_empty() {
                    return None;
                }
                // The instances read side by side: their bytes over their mean time.
                let bytes: u64 = ts.iter().map(|t| t.bytes).sum();
                let ns = ts.iter().map(|t| t.ns).sum::<u64>() / ts.len() as u64;
                Some(
                    super::TaskReadResult {
                        bytes,
                        ns,
                        ..Default::default()
                    }
                    .mib_per_s(),
                )
            })
            .collect();
        out.push((read_row(task), v));
    }
    out
}

/// The census row of `file`'s pages in folios of `order`.
pub fn census_row(file: &str, order: usize) -> String {
    format!("{file}: pages in order-{order} folios")
}

/// The read throughput row of `task`.
pub fn read_row(task: &str) -> String {
    format!("{task}: read (MiB/s)")
}

/// lkp's metric name, the case in the testcase column's place.
pub fn vm_scalability_row(case: &str) -> String {
    format!("vm-scalability.throughput {case}")
}

/// The values of row `name` in `samples` (empty if absent).
pub fn values<'a>(samples: &'a [Samples], name: &str) -> &'a [f64] {
    samples
        .iter()
        .find(|(n, _, _)| n == name)
        .map_or(&[], |(_, _, v)| v.as_slice())
}

/// The mmtests-style rows of one result as `fraglab run` prints them (seed 001's published results,
/// §5.1): the Amean over its samples of the rows of [`samples_of`] — per build with kbuild
/// iterations, else the whole run as one sample — restricted to the rows of the seed 001
/// table ([`VmstatRow::in_run_summary`]) and the workloads' own.
pub fn mmtests_rows(r: &RunResult) -> String {
    let s = samples_of(std::slice::from_ref(r));
    let mean = |name: &str| amean(values(&s, name));
    let mut out = String::new();
    // With builds, mmtests' per-build figures averaged over the builds (as `compare` prints);
    // else the figures over all bursts.
    let (per_build_mean, per_build_sd) = (
        values(&s, "Hugealloc Time mean (us)"),
        values(&s, "Hugealloc Time stddev (us)"),
    );
    let (hm, hs) = if per_build_mean.is_empty() || per_build_sd.is_empty() {
        let v = values(&s, "Hugealloc Time (us)");
        (amean(v), stddev(v))
    } else {
        (amean(per_build_mean), amean(per_build_sd))
    };
    let _ = writeln!(out, "{:<34} {:>14}", "", "Amean");
    let _ = writeln!(out, "{:<34} {:>14.2}", "Hugealloc Time mean (us)", hm);
    let _ = writeln!(out, "{:<34} {:>14.2}", "Hugealloc Time stddev (us)", hs);
    for name in ["Kbuild Real time", "Kbuild User time", "Kbuild System time"] {
        if !values(&s, name).is_empty() {
            let _ = writeln!(out, "{:<34} {:>14.2}", name, mean(name));
        }
    }
    for row in VMSTAT_ROWS.iter().filter(|r| r.in_run_summary) {
        let _ = writeln!(out, "{:<34} {:>14.2}", row.name, mean(row.name));
    }
    let rate = direct_compact_success_rate(
        values(&s, "Direct compact success"),
        values(&s, "Direct compact fail"),
    );
    let _ = writeln!(out, "{:<34} {:>14.2}", "Direct compact success rate %", rate);
    // The OOM killer's victims over the whole run (/proc/vmstat `oom_kill`): a workload larger
    // than the machine shows here instead of only in the result JSON.
    let _ = writeln!(
        out,
        "{:<34} {:>14}",
        "OOM kills",
        r.vmstat_delta.get("oom_kill").copied().unwrap_or(0)
    );
    if r.pgbench.is_some() {
        // The run's mean TPS is compare's "pgbench TPS" row.
        for (label, name) in [
            ("pgbench TPS mean", "pgbench TPS"),
            ("pgbench TPS during checkpoints", "pgbench TPS during checkpoints"),
            (
                "pgbench TPS between checkpoints",
                "pgbench TPS between checkpoints",
            ),
        ] {
            let _ = writeln!(out, "{:<34} {:>14.2}", label, mean(name));
        }
        // Seed 002's raw counters over the whole run.
        let d = &r.vmstat_delta;
        let _ = writeln!(
            out,
            "{:<34} {:>14}",
            "compact_stall",
            vmstat_row("Direct compact stall").value(d)
        );
        let _ = writeln!(
            out,
            "{:<34} {:>14}",
            "allocstall",
            vmstat_row("Alloc stall").value(d)
        );
    }
    if r.thpchallenge.is_some() {
        for name in [
            "thpchallenge fault-huge (us)",
            "thpchallenge fault-base (us)",
            "thpchallenge huge-pct",
        ] {
            let _ = writeln!(out, "{:<34} {:>14.2}", name, mean(name));
        }
    }
    for v in &r.vm_scalability {
        let _ = writeln!(out, "{:<34} {:>14.0}", vm_scalability_row(&v.case), v.throughput);
    }
    for (name, v) in census_and_read_samples(std::slice::from_ref(r)) {
        let _ = writeln!(out, "{:<34} {:>14.2}", name, amean(&v));
    }
    for (name, v) in named_census_rows(r) {
        match v {
            Ok(v) => {
                let _ = writeln!(out, "{:<34} {:>14}", name, v);
            }
            Err(_) => {
                let _ = writeln!(out, "{:<34} {:>14}", name, "n/a");
            }
        }
    }
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{BurstResult, PgbenchResult};

    fn delta(items: &[(&str, i64)]) -> BTreeMap<String, i64> {
        items.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn build(start_ns: u64, end_ns: u64, items: &[(&str, i64)]) -> BuildResult {
        BuildResult {
            start_ns,
            end_ns,
            vmstat_delta: delta(items),
            ..Default::default()
        }
    }

    /// "Alloc stall" sums every allocstall_* item, ZONE_DEVICE's included (§5.1).
    #[test]
    fn alloc_stall_sums_every_zone() {
        let d = delta(&[
            ("allocstall_dma", 1),
            ("allocstall_dma32", 2),
            ("allocstall_normal", 4),
            ("allocstall_movable", 8),
            ("allocstall_device", 16),
            ("pgscan_kswapd", 100),
        ]);
        assert_eq!(vmstat_row("Alloc stall").value(&d), 31);
        assert_eq!(vmstat_row("Pages kswapd scanned").value(&d), 100);
        assert_eq!(vmstat_row("Swap in").value(&d), 0, "absent items count 0");
        let names: Vec<&str> = VMSTAT_ROWS.iter().map(|r| r.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "row names are unique");
    }

    #[test]
    fn success_rate_is_the_mean_of_per_sample_ratios() {
        // 1/(1+9) = 10 %, 10/(10+10) = 50 %, a sample without compaction skipped: 30 %, not
        // 11/30.
        let r = direct_compact_success_rate(&[1.0, 10.0, 0.0], &[9.0, 10.0, 0.0]);
        assert!((r - 30.0).abs() < 1e-12, "{r}");
        assert_eq!(direct_compact_success_rate(&[], &[]), 0.0);
    }

    /// With builds, the finished builds are the samples: an unfinished one (end 0) counts in
    /// neither the vmstat rows nor the build times.
    #[test]
    fn finished_builds_are_the_samples() {
        let r = RunResult {
            builds: vec![
                build(0, 2_000_000_000, &[("thp_fault_alloc", 10)]),
                build(2_000_000_000, 6_000_000_000, &[("thp_fault_alloc", 30)]),
                build(6_000_000_000, 0, &[("thp_fault_alloc", 1000)]),
            ],
            vmstat_delta: delta(&[("thp_fault_alloc", 1040)]),
            ..Default::default()
        };
        let s = samples_of(std::slice::from_ref(&r));
        assert_eq!(values(&s, "THP fault alloc"), &[10.0, 30.0]);
        assert_eq!(values(&s, "Kbuild Real time"), &[2.0, 4.0]);
        let rows = mmtests_rows(&r);
        assert!(
            rows.contains(&format!("{:<34} {:>14.2}\n", "THP fault alloc", 20.0)),
            "{rows}"
        );
        assert!(
            rows.contains(&format!("{:<34} {:>14.2}\n", "Kbuild Real time", 3.0)),
            "{rows}"
        );
    }

    /// `fraglab run` prints the run-summary rows, in the table's order, from the same samples
    /// as compare; a run without builds is one sample.
    #[test]
    fn run_summary_rows() {
        let burst = |us: u64| BurstResult {
            alloc_ns: us * 1000,
            ..Default::default()
        };
        let r = RunResult {
            vmstat_delta: delta(&[
                ("compact_stall", 7),
                ("allocstall_movable", 3),
                ("allocstall_device", 2),
                ("pswpin", 9),
                ("oom_kill", 50),
            ]),
            bursts: vec![burst(10), burst(30)],
            pgbench: Some(PgbenchResult {
                mean_tps: 1234.5,
                ..Default::default()
            }),
            ..Default::default()
        };
        let rows = mmtests_rows(&r);
        let names: Vec<&str> = rows.lines().skip(1).map(|l| l[..34].trim_end()).collect();
        let mut want = vec!["Hugealloc Time mean (us)", "Hugealloc Time stddev (us)"];
        want.extend(VMSTAT_ROWS.iter().filter(|r| r.in_run_summary).map(|r| r.name));
        want.extend([
            "Direct compact success rate %",
            "OOM kills",
            "pgbench TPS mean",
            "pgbench TPS during checkpoints",
            "pgbench TPS between checkpoints",
            "compact_stall",
            "allocstall",
        ]);
        assert_eq!(names, want);
        let line = |l: &str, v: String| format!("{l:<34} {v:>14}\n");
        // The run's OOM kills, a count over the whole run.
        assert!(rows.contains(&line("OOM kills", "50".into())), "{rows}");
        // Without builds the Hugealloc figures are over all bursts.
        assert!(rows.contains(&line("Hugealloc Time mean (us)", "20.00".into())));
        assert!(rows.contains(&line(
            "Hugealloc Time stddev (us)",
            format!("{:.2}", 200f64.sqrt())
        )));
        assert!(rows.contains(&line("Alloc stall", "5.00".into())), "{rows}");
        assert!(rows.contains(&line("allocstall", "5".into())), "{rows}");
        assert!(rows.contains(&line("compact_stall", "7".into())));
        assert!(rows.contains(&line("pgbench TPS mean", "1234.50".into())));
        // The same row in compare's samples.
        let s = samples_of(std::slice::from_ref(&r));
        assert_eq!(values(&s, "Alloc stall"), &[5.0]);
        assert_eq!(values(&s, "Swap in"), &[9.0]);
        assert_eq!(values(&s, "pgbench TPS"), &[1234.5]);
    }

    #[test]
    fn statistics() {
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], Center::Amean);
        assert_eq!((s.min, s.center, s.max), (2.0, 5.0, 9.0));
        assert!((s.stddev - 2.138_089_935_299_395).abs() < 1e-12);
        assert!((hmean(&[1.0, 2.0, 4.0]) - 12.0 / 7.0).abs() < 1e-12);
        assert_eq!(hmean(&[1.0, 0.0]), 0.0);
        assert_eq!((stddev(&[3.0]), amean(&[])), (0.0, 0.0));
        assert_eq!(summarize(&[1.0, 4.0], Center::Hmean).center, 1.6);
    }

    /// Issue 19 item 1: the census rows come from the last census of each file, per order with
    /// pages, and the % in order >= 4 and >= 9; the read row is MiB/s over the read steps.
    #[test]
    fn census_and_read_rows() {
        use crate::result::{CensusResult, TaskReadResult};
        let mut pages = [0u64; 11];
        pages[0] = 100;
        pages[9] = 900;
        let r = RunResult {
            census: vec![
                CensusResult {
                    task: "reader".into(),
                    file: "big".into(),
                    at_ns: 1,
                    pages_per_order: [7; 11],
                    ..Default::default()
                },
                CensusResult {
                    task: "reader".into(),
                    file: "big".into(),
                    at_ns: 2,
                    pages_per_order: pages,
                    ..Default::default()
                },
            ],
            task_reads: vec![
                TaskReadResult {
                    task: "reader".into(),
                    instance: 0,
                    bytes: 512 << 20,
                    ns: 1_000_000_000,
                },
                TaskReadResult {
                    task: "reader".into(),
                    instance: 1,
                    bytes: 512 << 20,
                    ns: 3_000_000_000,
                },
            ],
            ..Default::default()
        };
        let s = samples_of(std::slice::from_ref(&r));
        assert_eq!(values(&s, &census_row("big", 0)), &[100.0]);
        assert_eq!(values(&s, &census_row("big", 9)), &[900.0]);
        assert!(
            values(&s, &census_row("big", 3)).is_empty(),
            "orders without pages have no row"
        );
        assert_eq!(values(&s, "big: % in order >= 4"), &[90.0]);
        assert_eq!(values(&s, "big: % in order >= 9"), &[90.0]);
        // 1 GiB in a mean of 2 s.
        assert_eq!(values(&s, &read_row("reader")), &[512.0]);
        let rows = mmtests_rows(&r);
        assert!(rows.contains("big: pages in order-9 folios"), "{rows}");
        assert!(rows.contains("reader: read (MiB/s)"), "{rows}");
        // Without census or reads: no such rows.
        assert!(census_and_read_samples(&[RunResult::default()]).is_empty());
    }

    /// Issue 33: the named-sample rows read the last sample of each name, one row per zone and
    /// class; a result without a mixed count (a host without page_owner) has that row as
    /// "why not", which compare leaves out and `fraglab run` prints as n/a.
    #[test]
    fn named_census_rows_read_the_last_sample_of_each_name() {
        use crate::result::pageblock::ZoneCensus;
        use crate::result::NamedSample;
        let zone = |name: &str, movable: u64, free: u64, mixed: Option<u64>| ZoneCensus {
            zone: name.into(),
            blocks_by_type: vec![2, movable, 1, 0, 0],
            free_blocks_by_type: vec![0, free, 0, 0, 0],
            mixed_blocks: mixed,
        };
        let sample = |name: &str, zones: Vec<ZoneCensus>| NamedSample {
            name: name.into(),
            zones,
            ..Default::default()
        };
        let r = RunResult {
            named_samples: vec![
                sample("built", vec![zone("Normal", 100, 90, Some(1))]),
                sample("freed", vec![zone("Normal", 100, 95, None)]),
                sample(
                    "built",
                    vec![zone("DMA32", 10, 10, Some(0)), zone("Normal", 100, 50, Some(4))],
                ),
            ],
            ..Default::default()
        };
        let rows = named_census_rows(&r);
        let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names[..6],
            [
                "census.built.DMA32.free",
                "census.built.DMA32.unmovable",
                "census.built.DMA32.movable",
                "census.built.DMA32.reclaimable",
                "census.built.DMA32.mixed",
                "census.built.Normal.free"
            ]
        );
        assert_eq!(rows.len(), 3 * 5);
        let get = |n: &str| rows.iter().find(|(x, _)| x == n).unwrap().1.clone();
        assert_eq!(get("census.built.Normal.free"), Ok(50.0));
        assert_eq!(get("census.built.Normal.movable"), Ok(50.0));
        assert_eq!(get("census.built.Normal.mixed"), Ok(4.0));
        assert_eq!(get("census.freed.Normal.mixed"), Err(NO_MIXED_COUNT.to_string()));
        let s = samples_of(std::slice::from_ref(&r));
        assert_eq!(values(&s, "census.built.Normal.unmovable"), &[2.0]);
        assert!(values(&s, "census.freed.Normal.mixed").is_empty());
        let printed = mmtests_rows(&r);
        assert!(
            printed.contains(&format!("{:<34} {:>14}\n", "census.freed.Normal.mixed", "n/a")),
            "{printed}"
        );
        assert!(
            printed.contains(&format!("{:<34} {:>14}\n", "census.built.Normal.free", "50")),
            "{printed}"
        );
    }
}
