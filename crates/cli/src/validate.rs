//! `fraglab validate --suite DIR`: every scenario of a validation suite on both engines (the live
//! kernel through the host engine, then the simulator), scored row by row against the issue-19
//! tolerances (`fraglab_spec::result::scoreboard`), printed, and — for a whole run with the
//! kernel — written to DIR/README.md (between the scoreboard markers) and DIR/scoreboard.json
//! with the date and commit.
//!
//! The suite is DIR/suite.toml (`[[scenario]]`s, below) or, without one, every other `*.toml`
//! in DIR with default settings. A scenario's kernel arm is the host engine (`kernel = "host"`)
//! or recorded host results (`kernel = "GLOB"` of result JSONs relative to DIR, for workloads the
//! host engine does not run, such as a real kernel build). A scenario one engine cannot run is
//! skipped on that side with the reason; a run that fails is marked and the rest kept.
//!
//! Host counters are system-wide, so each host run is preceded by an idle baseline: /proc/vmstat
//! read twice `--idle` apart with nothing of ours running; the baseline's event rates times the
//! run's measured duration are subtracted from the run's deltas (clamped at 0), and the
//! scoreboard says so. Before the baseline the suite waits (at most `--quiet-wait` seconds) for
//! the 1-minute load average to fall under [`QUIET_LOAD`]; a kernel run whose load at its start
//! or end was above [`LOADED`] is flagged in the notes and in `loaded_runs`.
//!
//! Scoring ([`scenario_score`]) follows `fraglab_spec::result::scoreboard`: trivial rows are
//! listed but left out of every pass rate, kernel-unstable rows are scored against the kernel's
//! range and counted apart, and each scenario with at least 2 kernel runs has the kernel's own
//! leave-one-out ceiling beside the simulator's rates. A scenario may have two simulator arms:
//! one booted from a snapshot of this machine captured right before each kernel run ("same
//! start", `rows`) and one from a clean boot (`clean_rows`); with the clean boot alone its rows
//! are `rows`. `--rescore FILE` scores an older scoreboard.json again by the current rule.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_spec::result::scoreboard::{
    self, fmt_range, fmt_stat, fmt_value, Ceiling, Class, Hits, ScoreRow, Tally, Verdict,
};
use fraglab_spec::result::RunResult;
use serde::{Deserialize, Serialize};

use crate::compare::{load_config, run_many};
const _: () = assert!(crate::suite_file::MAX_SUITE_RUNS == crate::compare::MAX_RUNS);
use crate::suite_file::{
    check_runs, host_word, parse_diagnoses, parse_suite, run_word, Diagnosis, ScenarioDef,
};
use fraglab_state::textfile::{read_text, MAX_RESULT_BYTES};

use crate::write_via_tmp;

/// The measured part of `spec` alone, for a simulator booted from a capture taken when the
/// measured part started on the kernel: the tasks with a `{ measure = true }` step, from that
/// step on, and the tasks that start with them (the same `after`), whole; each starts at once
/// (its `after` gate was passed when the capture was taken). Every other task ran before the
/// measured part, or beside it, and what it holds is in the capture as pages; its later steps
/// (a sleep, its exit) are not run. Refused, with why, where this would change what the
/// measured part does: generators (their state is not in a capture), a measure step in a task
/// that loops, tasks measured with different gates, or a kept step that uses a mapping, file or
/// object made before the measured part.
pub(crate) fn measured_part_spec(spec: &fraglab_spec::Spec) -> Result<fraglab_spec::Spec, String> {
    use fraglab_spec::{FilesOp, TaskStep};
    let w = spec.workload.as_ref().ok_or("no [workload]")?;
    if !(w.kbuild.is_empty()
        && w.thp_burst.is_empty()
        && w.thpchallenge.is_empty()
        && w.pgbench.is_empty()
        && w.vm_scalability.is_empty()
        && w.fio_smallfiles.is_empty())
    {
        return Err("the workload has generators, whose state a capture does not hold".into());
    }
    let measured: Vec<&fraglab_spec::TaskParams> = w
        .task
        .iter()
        .filter(|t| t.steps.contains(&TaskStep::Measure))
        .collect();
    let Some(first) = measured.first() else {
        return Err("no task has a { measure = true } step".into());
    };
    let gate = first.after.clone();
    if measured.iter().any(|t| t.after != gate) {
        return Err("tasks with a measure step start after different tasks".into());
    }
    // Files and file sets the other tasks use: a kept step reading one reads what they made.
    let mut earlier: Vec<&str> = Vec::new();
    for t in w.task.iter().filter(|t| t.after != gate) {
        for st in &t.steps {
            match st {
                TaskStep::Read { file, .. }
                | TaskStep::Write { file, .. }
                | TaskStep::Delete { file }
                | TaskStep::Census { file }
                | TaskStep::Fadvise { file, .. } => earlier.push(file),
                TaskStep::Files { set, .. } => earlier.push(set),
                _ => {}
            }
        }
    }
    let mut tasks = Vec::new();
    for t in w.task.iter().filter(|t| t.after == gate) {
        let mut t = t.clone();
        if let Some(i) = t.steps.iter().position(|s| *s == TaskStep::Measure) {
            if t.loops > 1 {
                return Err(format!("task {} loops over its measure step", t.name));
            }
            t.steps.drain(..i);
        }
        // Everything a kept step uses must be made by an earlier kept step of its task.
        let (mut vmas, mut files, mut sets, mut objects) = (vec![], vec![], vec![], false);
        for st in &t.steps {
            let missing = match st {
                TaskStep::Mmap { vma, .. } => {
                    vmas.push(vma.clone());
                    None
                }
                TaskStep::Touch { vma, .. }
                | TaskStep::Dontneed { vma, .. }
                | TaskStep::Munmap { vma }
                | TaskStep::Mlock { vma }
                | TaskStep::Munlock { vma } => (!vmas.contains(vma)).then(|| format!("mapping {vma}")),
                TaskStep::Read { file, .. } | TaskStep::Write { file, .. } => {
                    files.push(file.clone());
                    earlier.contains(&file.as_str()).then(|| format!("file {file}"))
                }
                TaskStep::Delete { file } | TaskStep::Census { file } | TaskStep::Fadvise { file, .. } => {
                    (!files.contains(file)).then(|| format!("file {file}"))
                }
                TaskStep::Files { set, op, .. } => match op {
                    FilesOp::Create => {
                        sets.push(set.clone());
                        earlier.contains(&set.as_str()).then(|| format!("file set {set}"))
                    }
                    _ => (!sets.contains(set)).then(|| format!("file set {set}")),
                },
                TaskStep::Slab { .. } => {
                    objects = true;
                    None
                }
                TaskStep::Free { .. } | TaskStep::FreePipePages { .. } => {
                    (!objects).then(|| "slab objects or pipes".to_string())
                }
                _ => None,
            };
            if let Some(m) = missing {
                return Err(format!("task {} uses {m} made before the measured part", t.name));
            }
        }
        t.after = None;
        tasks.push(t);
    }
    let mut out = spec.clone();
    if let Some(w) = out.workload.as_mut() {
        w.task = tasks;
    }
    Ok(out)
}

/// The options of `validate --suite`.
pub struct SuiteOptions {
    pub dir: PathBuf,
    pub runs: u32,
    pub only: Vec<String>,
    pub sim_only: bool,
    pub ci: bool,
    pub format: String,
    pub floor: String,
    pub idle_secs: f64,
    pub jobs: Option<usize>,
    pub no_write: bool,
    pub workdir: Option<PathBuf>,
    /// Keep each kernel run's result JSON and same-start capture here
    /// (`SCENARIO-kernel-runN.json`, `SCENARIO-kernel-runN.fsnap`); without it the captures go
    /// to a scratch directory removed at the end.
    pub results_dir: Option<PathBuf>,
    /// Read the kernel arms from the results and captures a `--results-dir` run kept there
    /// instead of running the kernel.
    pub kernel_results: Option<PathBuf>,
    /// Seconds to wait at most, before each kernel run, for a 1-minute load under [`QUIET_LOAD`].
    pub quiet_wait_secs: f64,
    /// `--trace-dir`: the first run of each arm traced in full, and the diff of the two.
    pub trace_dir: Option<PathBuf>,
}

/// The 1-minute load average under which the machine counts as quiet before a kernel run.
pub const QUIET_LOAD: f64 = 1.0;
/// A kernel run whose 1-minute load at its start or end was above this is flagged as loaded.
pub const LOADED: f64 = 1.5;
/// How often the quiet wait reads /proc/loadavg.
const QUIET_POLL_SECS: f64 = 5.0;

/// Per class: the simulator arms' tallies and the kernel's ceiling.
#[derive(Clone, Debug, Serialize)]
struct ClassLine {
    class: Class,
    /// The same-start arm's rows (absent without that arm).
    #[serde(skip_serializing_if = "Option::is_none")]
    same_start: Option<Tally>,
    clean_boot: Tally,
    /// The kernel's leave-one-out passes (absent under 2 kernel runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    ceiling: Option<Hits>,
    /// The clean boot's rows and the kernel's ceiling over the scenarios that have a same-start
    /// arm only, so the two arms compare on the same rows (absent without that arm).
    #[serde(skip_serializing_if = "Option::is_none")]
    clean_boot_same_scenarios: Option<Tally>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ceiling_same_scenarios: Option<Hits>,
}

/// A kernel run whose 1-minute load at its start or end was above [`LOADED`].
#[derive(Clone, Debug, Serialize)]
struct LoadedRun {
    scenario: String,
    /// 1-based.
    run: usize,
    load_start: Option<f64>,
    load_end: Option<f64>,
}

/// A 1-minute load as the notes print it ("?" where the run has none).
fn load_text(x: Option<f64>) -> String {
    x.map_or("?".into(), |x| format!("{x:.2}"))
}

/// Pass / fail by the old rule (issues 19–20: every measured row, means compared).
#[derive(Clone, Copy, Debug, Default, Serialize)]
struct OldRule {
    pass: usize,
    fail: usize,
}

/// One scenario's scores, as written to scoreboard.json.
#[derive(Debug, Serialize)]
struct ScenarioScore {
    name: String,
    spec: String,
    about: String,
    /// "host", "host --fit-memory", "recorded (N files)", or "skipped: why".
    kernel: String,
    kernel_runs: usize,
    /// The clean boot's runs.
    sim_runs: usize,
    /// The same-start arm's runs (absent without that arm).
    #[serde(skip_serializing_if = "Option::is_none")]
    same_start_runs: Option<usize>,
    /// The arm of `rows`: "same start" or "clean boot".
    sim_arm: String,
    /// Failed runs, skipped arms, the idle baseline subtracted, the host's confounders.
    notes: Vec<String>,
    /// Page allocations per run (the sum of `pgalloc_*`, the kernel's mean or else the
    /// simulator's) and the count under which work rows are trivial.
    allocations: Option<f64>,
    work_floor: f64,
    /// The same-start arm's rows, or the clean boot's without it.
    rows: Vec<ScoreRow>,
    /// The clean boot's rows when `rows` are the same start's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    clean_rows: Vec<ScoreRow>,
    /// Non-trivial rows with a stable kernel, of `rows`: the headline.
    pass: usize,
    fail: usize,
    pass_rate: Option<f64>,
    /// `rows` counted in full (unstable and trivial rows too).
    tally: Tally,
    old_rule: OldRule,
    classes: Vec<ClassLine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ceiling: Option<Ceiling>,
    loaded_runs: Vec<LoadedRun>,
}

/// The whole suite's scores.
#[derive(Debug, Serialize)]
struct SuiteScore {
    date: String,
    commit: String,
    runs: u32,
    tolerances: BTreeMap<&'static str, &'static str>,
    scenarios: Vec<ScenarioScore>,
    /// Non-trivial rows with a stable kernel, over every scenario's `rows`.
    pass: usize,
    fail: usize,
    pass_rate: Option<f64>,
    tally: Tally,
    /// The previous rule's count of the same rows, for before → after.
    old_rule: OldRule,
    classes: Vec<ClassLine>,
    /// The kernel's leave-one-out passes summed over the scenarios with ≥ 2 kernel runs.
    ceiling: Hits,
    loaded_runs: Vec<LoadedRun>,
    wall_secs: f64,
    /// `--kernel-results DIR`: the kernel arms were read from there (measured earlier).
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_results: Option<String>,
}

/// Whether the suite run writes DIR/scoreboard.json and DIR/README.md: a whole run with the
/// kernel, not told `--no-write`.
fn writes_scoreboard(o: &SuiteOptions) -> bool {
    !o.no_write && !o.sim_only && o.only.is_empty() && !o.ci
}

/// The numeric options' bounds, as suite.toml's (`suite_file::check_runs`): `--runs` 1 to
/// [`crate::compare::MAX_RUNS`], `--idle` 0 to an hour, `--quiet-wait` 0 to a day; the format.
fn check_options(o: &SuiteOptions) -> Result<(), String> {
    check_runs(o.runs).map_err(|e| format!("--{e}"))?;
    for (flag, v, max) in [
        ("--idle", o.idle_secs, 3600.0),
        ("--quiet-wait", o.quiet_wait_secs, 86_400.0),
    ] {
        if !(0.0..=max).contains(&v) {
            return Err(format!("{flag} {v}: seconds from 0 to {max}"));
        }
    }
    if o.format == "csv" {
        return Err("validate --suite: --format table, markdown or json".into());
    }
    Ok(())
}

/// `fraglab validate --suite DIR ...`.
pub fn suite(o: SuiteOptions) -> Result<(), String> {
    check_options(&o)?;
    if let Some(td) = &o.trace_dir {
        crate::check_output_dir("--trace-dir", td)?;
        std::fs::create_dir_all(td).map_err(|e| format!("--trace-dir {}: {e}", td.display()))?;
    }
    let t0 = std::time::Instant::now();
    // The code the suite runs is the tree as it is now; the files the run writes itself (the
    // traces of `--trace-dir` inside the suite) do not make it "dirty".
    let at_commit = commit(&o.dir);
    if writes_scoreboard(&o) {
        // Checked before the first run, not after an hour of them.
        for f in ["scoreboard.json", "README.md"] {
            crate::check_output("validate --suite", &o.dir.join(f))?;
        }
    }
    if let Some(d) = &o.kernel_results {
        check_kernel_results(d)?;
    }
    let defs = load_suite(&o.dir)?;
    let defs: Vec<ScenarioDef> = defs
        .into_iter()
        .filter(|d| o.only.is_empty() || o.only.contains(&d.name))
        .filter(|d| !o.ci || d.ci)
        .collect();
    if defs.is_empty() {
        return Err(format!(
            "{}: no scenario selected (--only {:?}{})",
            o.dir.display(),
            o.only,
            if o.ci { ", --ci" } else { "" }
        ));
    }
    for n in &o.only {
        if !defs.iter().any(|d| &d.name == n) {
            return Err(format!("--only {n}: no such scenario in {}", o.dir.display()));
        }
    }
    let diagnoses = load_diagnoses(&o.dir)?;
    // Where kernel results and same-start captures go: --results-dir, else a scratch
    // directory removed when the suite ends.
    let keep = match &o.results_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("--results-dir {}: {e}", d.display()))?;
            KeepDir {
                path: d.clone(),
                scratch: false,
            }
        }
        None => {
            let base = o.workdir.clone().unwrap_or_else(|| PathBuf::from("/var/tmp"));
            let p = base.join(format!("fraglab-validate-{}", std::process::id()));
            std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            KeepDir {
                path: p,
                scratch: true,
            }
        }
    };
    // Every kernel arm first, then every simulation: the machine stays quiet while the kernel
    // is measured.
    let mut phases = Vec::new();
    for (i, d) in defs.iter().enumerate() {
        eprintln!("[{}/{}] {}: kernel", i + 1, defs.len(), d.name);
        phases.push(kernel_phase(d, &o, &keep.path)?);
    }
    let mut scores = Vec::new();
    for (i, (d, k)) in defs.iter().zip(phases).enumerate() {
        eprintln!("[{}/{}] {}: simulator", i + 1, defs.len(), d.name);
        let s = run_scenario(d, &o, k, &diagnoses)?;
        eprintln!(
            "[{}/{}] {}: {} pass, {} fail (non-trivial), {} trivial",
            i + 1,
            defs.len(),
            d.name,
            s.pass,
            s.fail,
            s.tally.trivial
        );
        scores.push(s);
    }
    let mut tally = Tally::default();
    let mut old_rule = OldRule::default();
    let mut ceiling = Hits::default();
    for s in &scores {
        tally.add(&s.tally);
        old_rule.pass += s.old_rule.pass;
        old_rule.fail += s.old_rule.fail;
        if let Some(c) = &s.ceiling {
            ceiling.add(&c.all);
        }
    }
    let suite = SuiteScore {
        kernel_results: o.kernel_results.as_ref().map(|d| d.display().to_string()),
        date: today(),
        commit: at_commit,
        runs: o.runs,
        tolerances: [
            ("THP fault success %", scoreboard::Class::ThpSuccess.tolerance()),
            ("work counters", scoreboard::Class::Work.tolerance()),
            ("census", scoreboard::Class::Census.tolerance()),
            ("latency p50/p99", scoreboard::Class::Latency.tolerance()),
            (
                "page-cache folio orders",
                scoreboard::Class::FolioOrders.tolerance(),
            ),
            ("read throughput", scoreboard::Class::Throughput.tolerance()),
        ]
        .into_iter()
        .collect(),
        pass: tally.pass,
        fail: tally.fail,
        pass_rate: tally.rate(),
        tally,
        old_rule,
        classes: sum_classes(&scores),
        ceiling,
        loaded_runs: scores.iter().flat_map(|s| s.loaded_runs.clone()).collect(),
        scenarios: scores,
        wall_secs: t0.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_string_pretty(&suite).map_err(|e| e.to_string())? + "\n";
    let text = match o.format.as_str() {
        "json" => json.clone(),
        "markdown" => markdown(&suite),
        _ => table(&suite),
    };
    print!("{text}");
    if writes_scoreboard(&o) {
        write_via_tmp(&o.dir.join("scoreboard.json"), &json)?;
        write_readme(&o.dir.join("README.md"), &markdown(&suite))?;
        eprintln!(
            "wrote {} and the scoreboard of {}",
            o.dir.join("scoreboard.json").display(),
            o.dir.join("README.md").display()
        );
    }
    verdict(&suite, o.sim_only)
}

/// The suite's exit: an error naming every scenario that scored nothing ([`unscored`]).
fn verdict(suite: &SuiteScore, sim_only: bool) -> Result<(), String> {
    let unscored = unscored(
        suite
            .scenarios
            .iter()
            .map(|s| (s.name.as_str(), s.kernel.as_str(), s.kernel_runs)),
        sim_only,
    );
    if unscored.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} scenarios scored nothing against the kernel:\n  {}",
            unscored.len(),
            suite.scenarios.len(),
            unscored.join("\n  ")
        ))
    }
}

/// The scenarios whose kernel arm gave no run to score against (the host engine refused it, a
/// tool is missing, every run failed, no recorded file): `NAME: why` each. Such a suite run
/// exits non-zero after printing what it has, so "0 pass, 0 fail" is never a success. With
/// `--sim-only` the kernel arm is not asked for: nothing is refused.
fn unscored<'a>(scenarios: impl Iterator<Item = (&'a str, &'a str, usize)>, sim_only: bool) -> Vec<String> {
    if sim_only {
        return Vec::new();
    }
    scenarios
        .filter(|&(_, _, runs)| runs == 0)
        .map(|(name, kernel, _)| {
            let why = kernel.strip_prefix("skipped: ").unwrap_or(kernel);
            if kernel.starts_with("skipped") {
                format!("{name}: {why}")
            } else {
                format!("{name}: kernel arm {why}: every run failed (see its notes)")
            }
        })
        .collect()
}

/// How to install the tool a host engine refusal names (Debian and Ubuntu package names), or
/// "" when it names none: `mkfs.xfs` is in xfsprogs, `mkfs.ext4` in e2fsprogs, `losetup`,
/// `mount` and `umount` in mount.
fn install_hint(refusal: &str) -> String {
    const TOOLS: [(&str, &str); 5] = [
        ("mkfs.xfs", "xfsprogs"),
        ("mkfs.ext4", "e2fsprogs"),
        ("losetup", "mount"),
        ("umount", "mount"),
        ("mount", "mount"),
    ];
    let Some(rest) = refusal.split(" needs ").nth(1) else {
        return String::new();
    };
    let tool = rest.split([',', ' ']).next().unwrap_or("");
    match TOOLS.iter().find(|(t, _)| *t == tool) {
        Some((t, pkg)) if refusal.contains("not installed") => {
            format!(" (install {t}: `apt-get install {pkg}` on Debian and Ubuntu)")
        }
        _ => String::new(),
    }
}

/// The cost keys of the device a spec's files are read from (`loop_read_*` on loop images)
/// and the median over the kernel's runs of the read device each measured at its start
/// (`fraglab_host::readdev`), if any run has one.
fn read_device_costs(
    spec: &fraglab_spec::Spec,
    kernel: &[RunResult],
) -> Option<([&'static str; 2], (u64, u64))> {
    let mut fits: Vec<(u64, u64)> = kernel
        .iter()
        .filter_map(|r| r.proc_start.get("host"))
        .filter_map(|h| fraglab_host::readdev::parse_line(h))
        .collect();
    if fits.is_empty() {
        return None;
    }
    let median = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let mut req: Vec<u64> = fits.iter().map(|f| f.0).collect();
    let mut page: Vec<u64> = fits.drain(..).map(|f| f.1).collect();
    let keys = if spec.host.loop_images {
        ["loop_read_req_ns", "loop_read_page_ns"]
    } else {
        ["read_req_ns", "read_page_ns"]
    };
    Some((keys, (median(&mut req), median(&mut page))))
}

/// `--kernel-results DIR` must hold what a `--results-dir` run kept: checked before anything
/// runs, so that a mistyped directory does not score every scenario as skipped (and write that
/// scoreboard over the last one).
fn check_kernel_results(d: &Path) -> Result<(), String> {
    let rd = std::fs::read_dir(d).map_err(|e| format!("--kernel-results {}: {e}", d.display()))?;
    let kept = rd
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().ends_with("-kernel-run1.json"));
    if kept {
        Ok(())
    } else {
        Err(format!(
            "--kernel-results {}: no NAME-kernel-run1.json in it (the files `validate --suite --results-dir` keeps)",
            d.display()
        ))
    }
}

/// The directory of kernel results and captures; a scratch one is removed on drop.
struct KeepDir {
    path: PathBuf,
    scratch: bool,
}

impl Drop for KeepDir {
    fn drop(&mut self) {
        if self.scratch {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The same-start arm's specs: for each capture (one per kernel run, in run order), `spec`
/// booted from that capture (its zones, CPUs, hugetlb pool and — for knobs the spec does not
/// set — knobs, as `[machine] snapshot` does) with the seed of the kernel run it precedes.
/// `damon` is the clean arm's DAMON setting (the kernel's scheme, or the spec's own).
fn same_start_specs(
    spec: &fraglab_spec::Spec,
    captures: &[(u64, PathBuf)],
    damon: &fraglab_spec::DamonSpec,
) -> Vec<fraglab_spec::Spec> {
    captures
        .iter()
        .map(|(seed, path)| {
            let mut s = spec.clone();
            s.machine.memory_bytes = None;
            s.machine.zones = None;
            s.machine.snapshot = Some(fraglab_spec::SnapshotSpec {
                path: path.display().to_string(),
                resolved: path.clone(),
                line: s.machine.line,
                cpus_given: false,
                hugetlb_given: false,
            });
            s.run.seed = *seed;
            s.damon = damon.clone();
            s
        })
        .collect()
}

/// How the same-start arm's kdamond starts (docs/model §27.2 item 3): from the regions
/// and ages of the kernel's kdamond each capture recorded (`SnapshotHeader::damon`), else cold
/// (a booted kdamond starts every region at age 0), with the capture's reason.
fn damon_start_note(captures: &[(u64, PathBuf)]) -> String {
    let mut warm = Vec::new();
    let mut cold = Vec::new();
    for (i, (_, p)) in captures.iter().enumerate() {
        match fraglab_state::snapshot::Snapshot::read_header(p) {
            Ok(h) => match h.damon {
                Some(d) if !d.regions.is_empty() => {
                    let ages = d.regions.iter().map(|r| r.age);
                    warm.push(format!(
                        "run {}: {} regions, ages {}-{}",
                        i + 1,
                        d.regions.len(),
                        ages.clone().min().unwrap_or(0),
                        ages.max().unwrap_or(0)
                    ));
                }
                Some(d) => cold.push(format!("run {}: {}", i + 1, d.note)),
                None => cold.push(format!("run {}: the capture has no kdamond regions", i + 1)),
            },
            Err(e) => cold.push(format!("run {}: {e}", i + 1)),
        }
    }
    let mut parts = Vec::new();
    if !warm.is_empty() {
        parts.push(format!(
            "DAMON goes on from the kernel kdamond's regions and ages each capture recorded ({})",
            warm.join("; ")
        ));
    }
    if !cold.is_empty() {
        parts.push(format!(
            "DAMON starts cold (every region at age 0) where a capture recorded no regions ({})",
            cold.join("; ")
        ));
    }
    parts.join("; ")
}

/// §32: the free page reporting order the simulator arms boot with when the spec gives none —
/// the one the kernel's first run had at its start; `None` when the spec gives its own (an
/// order or "off") or the kernel had no device (or recorded none).
fn kernel_page_reporting(spec: &fraglab_spec::Spec, kernel: &[RunResult]) -> Option<u32> {
    if spec.machine.page_reporting_given {
        return None;
    }
    kernel.first()?.confounders.as_ref()?.page_reporting_order()
}

/// A diagnosis's row pattern: exact, `PREFIX*` or `*SUFFIX`.
fn row_matches(pat: &str, row: &str) -> bool {
    if let Some(p) = pat.strip_suffix('*') {
        row.starts_with(p)
    } else if let Some(p) = pat.strip_prefix('*') {
        row.ends_with(p)
    } else {
        pat == row
    }
}

/// The suite's scenarios: suite.toml's, or every other `*.toml` of `dir`.
fn load_suite(dir: &Path) -> Result<Vec<ScenarioDef>, String> {
    if !dir.is_dir() {
        return Err(format!("{}: not a directory", dir.display()));
    }
    let manifest = dir.join("suite.toml");
    let defs = if manifest.exists() {
        let text = read_text(
            &manifest,
            crate::suite_file::MAX_SUITE_FILE_BYTES as u64,
            "suite file",
        )
        .map_err(|e| e.to_string())?;
        parse_suite(&text, &manifest.display().to_string())?
    } else {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .filter(|p| p.file_name().is_some_and(|n| n != "diagnoses.toml"))
            .collect();
        files.sort();
        files
            .into_iter()
            .map(|p| ScenarioDef {
                name: p
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                spec: p
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                kernel: host_word(),
                fit_memory: false,
                ci: false,
                runs: None,
                about: String::new(),
                same_start: false,
                capture_at: run_word(),
            })
            .collect()
    };
    if defs.is_empty() {
        return Err(format!(
            "{}: no scenario (no [[scenario]] in suite.toml, or no spec *.toml)",
            dir.display()
        ));
    }
    Ok(defs)
}

fn load_diagnoses(dir: &Path) -> Result<Vec<Diagnosis>, String> {
    let p = dir.join("diagnoses.toml");
    if !p.exists() {
        return Ok(Vec::new());
    }
    let text = read_text(&p, crate::suite_file::MAX_SUITE_FILE_BYTES as u64, "suite file")
        .map_err(|e| e.to_string())?;
    parse_diagnoses(&text, &p.display().to_string())
}

/// Runs one scenario's two arms and scores them; an error here is the suite's (a spec that does
/// not parse), a failed run only marks the scenario.
/// The same-start captures of a kernel arm: (seed, file) per kernel run that has one, and
/// whether they were taken when the measured part started.
#[derive(Default)]
struct SameStart {
    captures: Vec<(u64, PathBuf)>,
    at_measure: bool,
}

/// A scenario's spec and its kernel arm, measured (or read) before any simulation runs.
struct KernelPhase {
    spec: fraglab_spec::Spec,
    runs: u32,
    label: String,
    kernel: Vec<RunResult>,
    /// (seed, capture) of each kernel run with a same-start capture, in run order.
    captures: Vec<(u64, PathBuf)>,
    /// The captures were taken when the measured part started (`capture_at = "measure"`).
    at_measure: bool,
    notes: Vec<String>,
}

/// A scenario's spec, checked.
fn load_scenario_spec(d: &ScenarioDef, o: &SuiteOptions) -> Result<fraglab_spec::Spec, String> {
    let path = o.dir.join(&d.spec);
    let (_, spec) = load_config(&path.to_string_lossy()).map_err(|e| format!("scenario {}: {e}", d.name))?;
    if spec.workload.is_none() {
        return Err(format!(
            "scenario {}: {} has no [workload] (both engines run timed specs)",
            d.name,
            path.display()
        ));
    }
    Ok(spec)
}

/// The kernel arm of one scenario (see [`kernel_arm`]). The suite runs every scenario's kernel
/// arm first and the simulations after them all, so no simulation loads the machine while the
/// kernel is measured.
fn kernel_phase(d: &ScenarioDef, o: &SuiteOptions, keep: &Path) -> Result<KernelPhase, String> {
    let runs = d.runs().unwrap_or(o.runs);
    let spec = load_scenario_spec(d, o)?;
    let mut notes = Vec::new();
    let mut same = SameStart::default();
    let (label, kernel) = kernel_arm(d, &spec, runs, o, keep, &mut same, &mut notes);
    // A skipped arm or a failed run says why as it happens, not only in the scoreboard.
    if label.starts_with("skipped") && !o.sim_only {
        eprintln!("  kernel arm {label}");
    }
    for n in notes.iter().filter(|n| n.contains(": failed: ")) {
        eprintln!("  {n}");
    }
    let SameStart { captures, at_measure } = same;
    Ok(KernelPhase {
        spec,
        runs,
        label,
        kernel,
        captures,
        at_measure,
        notes,
    })
}

/// The simulator arms of one scenario, scored against its kernel arm.
fn run_scenario(
    d: &ScenarioDef,
    o: &SuiteOptions,
    k: KernelPhase,
    diagnoses: &[Diagnosis],
) -> Result<ScenarioScore, String> {
    let KernelPhase {
        spec,
        runs,
        label: kernel_label,
        kernel,
        captures,
        at_measure,
        mut notes,
    } = k;
    // With --fit-memory the simulator boots the machine the kernel's first run was fitted to:
    // its zones once fitted and, for a mixed fit, the hugetlb pool that made up the rest
    // (`sim_spec_for`); later runs' fits may differ by a few blocks.
    let mut sim_spec = match kernel.first() {
        Some(h) if d.fit_memory && d.kernel == "host" => fraglab_host::sim_spec_for(&spec, h),
        _ => spec.clone(),
    };
    // docs/model §27.3: the model runs the pageout scheme the kernel's first run had on
    // (none: DAMON stays off), unless the spec sets its own `[damon]`.
    let damon = kernel.first().and_then(|h| h.confounders.as_ref());
    if let Some(dm) = damon.and_then(fraglab_host::damon::damon_spec_for) {
        if !sim_spec.damon.enabled {
            notes.push("simulator: DAMON on with the kernel's recorded pageout scheme (§27.3)".into());
            sim_spec.damon = dm;
        }
    }
    // §32: the model has the free page reporting device the kernel's first run
    // had (its order), unless the spec gives `page_reporting_order`. The same-start arm takes
    // it from each capture instead (`[machine] snapshot`).
    if let Some(order) = kernel_page_reporting(&spec, &kernel) {
        notes.push(format!(
            "simulator: free page reporting at order {order}, as the kernel's first run had it (§32)"
        ));
        sim_spec.machine.page_reporting_order = Some(order);
    }
    if d.fit_memory && d.kernel == "host" && sim_spec.machine.zones != spec.machine.zones {
        let pool = sim_spec.machine.hugetlb_pages;
        notes.push(format!(
            "simulator: booted with the zones of the kernel's first run once fitted{}",
            if pool > 0 {
                format!(", {pool} pages of 2 MiB held in a hugetlb pool as on the kernel")
            } else {
                String::new()
            }
        ));
    }
    // The read device the kernel's runs measured at their start, unless the spec sets its own.
    if let Some((keys, (req, page))) = read_device_costs(&spec, &kernel) {
        let mut set = Vec::new();
        for (k, v) in keys.iter().zip([req, page]) {
            if !spec.cost.contains_key(*k) {
                sim_spec.cost.insert(k.to_string(), v);
                set.push(format!("{k} {v}"));
            }
        }
        if !set.is_empty() {
            notes.push(format!(
                "simulator: the read device the kernel's runs measured at their start (median of {}): {}",
                kernel.len(),
                set.join(", ")
            ));
        }
    }
    eprintln!("  simulator: {runs} runs");
    let phase = format!("{}: simulator", d.name);
    let sim = match run_many(
        std::slice::from_ref(&sim_spec),
        runs,
        o.jobs.unwrap_or(2).max(1),
        &phase,
    ) {
        Ok(mut v) => v.remove(0),
        Err(e) => {
            notes.push(format!("simulator: failed: {e}"));
            Vec::new()
        }
    };
    // The same start: one simulator run from each kernel run's capture.
    // `--trace-dir`: the simulator's traced run is the same-start arm's first (booted from the
    // first kernel run's capture, as the traced kernel run started), else the clean boot's.
    let mut trace_spec: Option<fraglab_spec::Spec> = None;
    // The tasks a measured-part arm leaves out: they run on in the kernel's measured part (a
    // task holding objects until after the measured tasks, then exiting), but the capture
    // holds their memory without them, so the arm's end state lacks what they do there.
    let mut left_out: Vec<String> = Vec::new();
    let same: Option<Vec<RunResult>> = if captures.is_empty() {
        None
    } else {
        // At the measured part: the measured part alone (checked by the kernel arm).
        let base = if at_measure {
            measured_part_spec(&spec)?
        } else {
            spec.clone()
        };
        if at_measure {
            let kept = |n: &str| base.workload.iter().flat_map(|w| &w.task).any(|t| t.name == n);
            for t in spec.workload.iter().flat_map(|w| &w.task) {
                if !kept(&t.name) && !left_out.contains(&t.name) {
                    left_out.push(t.name.clone());
                }
            }
        }
        let mut specs = same_start_specs(&base, &captures, &sim_spec.damon);
        for s in &mut specs {
            s.cost = sim_spec.cost.clone();
        }
        trace_spec = specs.first().cloned();
        eprintln!("  simulator, same start: {} runs", specs.len());
        notes.push(format!(
            "simulator, same start: booted from each kernel run's capture{} ({} runs){}",
            if at_measure {
                " taken when its measured part started, running the measured part only"
            } else {
                " taken right before its workers started"
            },
            specs.len(),
            if sim_spec.damon.enabled {
                format!("; {}", damon_start_note(&captures))
            } else {
                String::new()
            }
        ));
        match run_many(
            &specs,
            1,
            o.jobs.unwrap_or(2).max(1),
            &format!("{}: simulator, same start", d.name),
        ) {
            Ok(v) => Some(v.into_iter().flatten().collect()),
            Err(e) => {
                notes.push(format!("simulator, same start: failed: {e}"));
                Some(Vec::new())
            }
        }
    };
    if let Some(td) = &o.trace_dir {
        trace_arms(d, trace_spec.as_ref().unwrap_or(&sim_spec), td, &mut notes);
    }
    let mut score = scenario_score(d, kernel_label, &kernel, same.as_deref(), &sim, notes, diagnoses);
    if same.is_some() && !left_out.is_empty() {
        end_census_not_comparable(&mut score, &left_out);
    }
    Ok(score)
}

/// A measured-part arm's end census is not the kernel's: the tasks it leaves out (`left_out`)
/// still hold and then free their memory inside the kernel's measured part (their exits come
/// after the measured tasks), which the arm cannot do. Its "(end)" census rows become n/a
/// with that reason, and the tallies and class lines are counted again; named samples taken
/// by the measured tasks (`{ sample = NAME }`) are compared instead.
fn end_census_not_comparable(score: &mut ScenarioScore, left_out: &[String]) {
    let why = format!(
        "the same-start arm runs the measured part alone; task(s) {} outside it end inside the kernel's measured part (their exits free memory there), so the end census is not comparable: the named samples are",
        left_out.join(", ")
    );
    let mut changed = false;
    for r in score.rows.iter_mut() {
        if r.class == Class::Census && r.row.ends_with("(end)") {
            r.verdict = Verdict::NotMeasured(why.clone());
            r.trivial = false;
            changed = true;
        }
    }
    if !changed {
        return;
    }
    let tally = Tally::of(&score.rows);
    let (op, of) = scoreboard::old_rule_tally(&score.rows);
    score.pass = tally.pass;
    score.fail = tally.fail;
    score.pass_rate = tally.rate();
    score.tally = tally;
    score.old_rule = OldRule { pass: op, fail: of };
    let by = scoreboard::by_class(&score.rows);
    for l in score.classes.iter_mut() {
        if l.same_start.is_some() {
            l.same_start = Some(by[&l.class]);
        }
    }
    score.notes.push(format!("simulator, same start: {why}"));
}

/// Scores one scenario: the same-start arm (when run) and the clean boot against the kernel,
/// the tallies of the rows (same start's, else clean boot's), the per-class rates of both arms,
/// the kernel's leave-one-out ceiling, its loaded runs, and the diagnoses of rows off by ×3.
fn scenario_score(
    d: &ScenarioDef,
    kernel_label: String,
    kernel: &[RunResult],
    same_start: Option<&[RunResult]>,
    clean: &[RunResult],
    mut notes: Vec<String>,
    diagnoses: &[Diagnosis],
) -> ScenarioScore {
    let diagnose = |rows: &mut Vec<ScoreRow>| {
        for r in rows.iter_mut() {
            if r.off_by_3() {
                r.diagnosis = diagnoses
                    .iter()
                    .find(|x| row_matches(&x.scenario, &d.name) && row_matches(&x.row, &r.row))
                    .map(|x| x.text.clone());
            }
        }
    };
    let mut clean_rows = scoreboard::score(kernel, clean);
    diagnose(&mut clean_rows);
    let same_rows = same_start.map(|s| {
        let mut rows = scoreboard::score(kernel, s);
        diagnose(&mut rows);
        rows
    });
    let ceiling = scoreboard::ceiling(kernel);
    let clean_classes = scoreboard::by_class(&clean_rows);
    let same_classes = same_rows.as_deref().map(scoreboard::by_class);
    let classes = Class::ALL
        .iter()
        .map(|c| ClassLine {
            class: *c,
            same_start: same_classes.as_ref().map(|m| m[c]),
            clean_boot: clean_classes[c],
            clean_boot_same_scenarios: same_classes.as_ref().map(|_| clean_classes[c]),
            ceiling_same_scenarios: same_classes.as_ref().and_then(|_| {
                ceiling
                    .as_ref()
                    .map(|x| x.by_class.get(c).copied().unwrap_or_default())
            }),
            ceiling: ceiling
                .as_ref()
                .map(|x| x.by_class.get(c).copied().unwrap_or_default()),
        })
        .collect();
    let mut loaded_runs = Vec::new();
    for (i, r) in kernel.iter().enumerate() {
        if let Some((a, b)) = loaded(r) {
            notes.push(format!(
                "kernel run {}: LOADED — 1-minute load {} at its start, {} at its end (above {LOADED})",
                i + 1,
                load_text(a),
                load_text(b)
            ));
            loaded_runs.push(LoadedRun {
                scenario: d.name.clone(),
                run: i + 1,
                load_start: a,
                load_end: b,
            });
        }
    }
    let support = {
        let k: Vec<&RunResult> = kernel.iter().collect();
        let s: Vec<&RunResult> = clean.iter().collect();
        scoreboard::Support::of(&k, &s)
    };
    let (rows, clean_rows, sim_arm) = match same_rows {
        Some(r) => (r, clean_rows, "same start"),
        None => (clean_rows, Vec::new(), "clean boot"),
    };
    let tally = Tally::of(&rows);
    let (op, of) = scoreboard::old_rule_tally(&rows);
    ScenarioScore {
        name: d.name.clone(),
        spec: d.spec.clone(),
        about: d.about.clone(),
        kernel: kernel_label,
        kernel_runs: kernel.len(),
        sim_runs: clean.len(),
        same_start_runs: same_start.map(<[RunResult]>::len),
        sim_arm: sim_arm.into(),
        notes,
        allocations: support.allocations,
        work_floor: support.work_floor(),
        rows,
        clean_rows,
        pass: tally.pass,
        fail: tally.fail,
        pass_rate: tally.rate(),
        tally,
        old_rule: OldRule { pass: op, fail: of },
        classes,
        ceiling,
        loaded_runs,
    }
}

/// The per-class lines summed over scenarios (an arm's tally only where every scenario has it).
fn sum_classes(scores: &[ScenarioScore]) -> Vec<ClassLine> {
    Class::ALL
        .iter()
        .map(|c| {
            let lines: Vec<&ClassLine> = scores
                .iter()
                .flat_map(|s| s.classes.iter().filter(|l| l.class == *c))
                .collect();
            let mut clean = Tally::default();
            let mut same: Option<Tally> = None;
            let mut ceiling: Option<Hits> = None;
            let mut clean_same: Option<Tally> = None;
            let mut ceiling_same: Option<Hits> = None;
            for l in &lines {
                clean.add(&l.clean_boot);
                if let Some(t) = &l.same_start {
                    same.get_or_insert_with(Tally::default).add(t);
                }
                if let Some(h) = &l.ceiling {
                    ceiling.get_or_insert_with(Hits::default).add(h);
                }
                if let Some(t) = &l.clean_boot_same_scenarios {
                    clean_same.get_or_insert_with(Tally::default).add(t);
                }
                if let Some(h) = &l.ceiling_same_scenarios {
                    ceiling_same.get_or_insert_with(Hits::default).add(h);
                }
            }
            ClassLine {
                class: *c,
                same_start: same,
                clean_boot: clean,
                ceiling,
                clean_boot_same_scenarios: clean_same,
                ceiling_same_scenarios: ceiling_same,
            }
        })
        .collect()
}

/// A kernel run's 1-minute load at its start and end, when either was above [`LOADED`].
fn loaded(r: &RunResult) -> Option<(Option<f64>, Option<f64>)> {
    let c = r.confounders.as_ref()?;
    let (a, b) = (c.start.loadavg.map(|l| l[0]), c.end.loadavg.map(|l| l[0]));
    (a.is_some_and(|x| x > LOADED) || b.is_some_and(|x| x > LOADED)).then_some((a, b))
}

/// One step of the quiet wait.
#[derive(Debug, PartialEq)]
enum QuietStep {
    /// The load is under [`QUIET_LOAD`]: run.
    Quiet,
    /// Poll again in [`QUIET_POLL_SECS`].
    Wait,
    /// Another poll would pass the limit: run anyway.
    GiveUp,
}

/// What to do with a 1-minute load `load1` after `waited` of at most `limit` seconds.
fn quiet_step(load1: f64, waited: f64, limit: f64) -> QuietStep {
    if load1 < QUIET_LOAD {
        QuietStep::Quiet
    } else if waited + QUIET_POLL_SECS > limit {
        QuietStep::GiveUp
    } else {
        QuietStep::Wait
    }
}

/// The 1-minute load average of /proc/loadavg's text.
fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Waits at most `limit` seconds, reading /proc/loadavg (read only) every 5 s, for the
/// 1-minute load to fall under [`QUIET_LOAD`]; what happened, in one line.
fn wait_for_quiet(limit: f64) -> String {
    let t = std::time::Instant::now();
    loop {
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .as_deref()
            .and_then(parse_loadavg);
        let Some(load) = load else {
            return "quiet wait: /proc/loadavg unreadable, not waited".into();
        };
        let waited = t.elapsed().as_secs_f64();
        match quiet_step(load, waited, limit) {
            QuietStep::Quiet => {
                return format!(
                    "quiet wait: 1-minute load {load:.2} after {waited:.0} s (under {QUIET_LOAD})"
                )
            }
            QuietStep::GiveUp => {
                return format!(
                "quiet wait: gave up after {waited:.0} s (limit {limit:.0} s), 1-minute load still {load:.2}"
            )
            }
            QuietStep::Wait => {
                eprintln!("  waiting for a quiet machine: 1-minute load {load:.2} after {waited:.0} s");
                std::thread::sleep(std::time::Duration::from_secs_f64(QUIET_POLL_SECS));
            }
        }
    }
}

/// `--trace-dir`: the simulator's first run again with its whole trace in TD/NAME-sim.trace
/// (the run is deterministic, so it is the first run of the arm), and, when the kernel's first
/// run left TD/NAME-kernel.trace, the diff of the two in TD/NAME.diff.txt.
fn trace_arms(d: &ScenarioDef, sim_spec: &fraglab_spec::Spec, td: &Path, notes: &mut Vec<String>) {
    let sim_path = td.join(format!("{}-sim.trace", d.name));
    let traced = std::fs::File::create(&sim_path)
        .map_err(|e| format!("{}: {e}", sim_path.display()))
        .and_then(|f| {
            let out = Box::new(std::io::BufWriter::with_capacity(1 << 20, f));
            let name = sim_path.display().to_string();
            fraglab_sim::timed::run_workload_trace_to(sim_spec, out, &name, &mut |_| {}, &mut |_| {})
                .map_err(|e| e.to_string())
        });
    if let Err(e) = traced {
        notes.push(format!("simulator trace: failed: {e}"));
        return;
    }
    let kernel_path = kernel_trace_path(d, td);
    if !kernel_path.exists() {
        notes.push(format!("trace diff: no kernel trace ({})", kernel_path.display()));
        return;
    }
    let opts = fraglab_sim::tracediff::DiffOptions {
        episodes: 20,
        ..Default::default()
    };
    let diff_path = td.join(format!("{}.diff.txt", d.name));
    let written = fraglab_sim::tracediff::diff_files(&kernel_path, &sim_path, &opts).and_then(|dd| {
        std::fs::write(&diff_path, fraglab_sim::tracediff::render_text(&dd))
            .map_err(|e| format!("{}: {e}", diff_path.display()))?;
        Ok(dd)
    });
    match written {
        Ok(dd) => {
            notes.push(format!("trace diff: {}", diff_path.display()));
            if let Some(f) = &dd.first_divergence {
                notes.push(format!(
                    "trace diff: first divergence: {} {}",
                    f.label,
                    f.reasons.join("; ")
                ));
            }
        }
        Err(e) => notes.push(format!("trace diff: failed: {e}")),
    }
}

/// Where `--trace-dir` puts the kernel's first run's trace.
fn kernel_trace_path(d: &ScenarioDef, td: &Path) -> PathBuf {
    td.join(format!("{}-kernel.trace", d.name))
}

/// The kernel's results: recorded, or `runs` host runs each after an idle baseline.
fn kernel_arm(
    d: &ScenarioDef,
    spec: &fraglab_spec::Spec,
    runs: u32,
    o: &SuiteOptions,
    keep: &Path,
    same: &mut SameStart,
    notes: &mut Vec<String>,
) -> (String, Vec<RunResult>) {
    let SameStart { captures, at_measure } = same;
    if d.kernel != "host" {
        return match recorded(&o.dir, &d.kernel) {
            Ok(v) if !v.is_empty() => (format!("recorded ({} runs, {})", v.len(), d.kernel), v),
            Ok(_) => (format!("skipped: no file matches {}", d.kernel), Vec::new()),
            Err(e) => (format!("skipped: {e}"), Vec::new()),
        };
    }
    if o.sim_only {
        return ("skipped: --sim-only".into(), Vec::new());
    }
    // `capture_at = "measure"` where the measured part can run alone in the simulator.
    *at_measure = d.same_start && spec.machine.snapshot.is_none() && d.capture_at == "measure";
    if *at_measure {
        if let Err(e) = measured_part_spec(spec) {
            notes.push(format!(
                "same start: captured before the run, not at the measured part: {e}"
            ));
            *at_measure = false;
        }
    }
    if let Some(dir) = &o.kernel_results {
        return kept_kernel_arm(d, spec, runs, dir, *at_measure, captures, notes);
    }
    let floor = match fraglab_spec::parse_size(&o.floor) {
        Ok(f) => f,
        Err(e) => return (format!("skipped: --floor: {e}"), Vec::new()),
    };
    let mut opts = fraglab_host::HostOptions {
        mem_floor_bytes: floor,
        fit_memory: d.fit_memory,
        workdir: o.workdir.clone(),
        ..Default::default()
    };
    // The read device as it is today, for the simulator's arms (`read_device_costs`).
    opts.fit_read_device = true;
    // The same start needs a machine the spec does not fix itself (a spec booting from its
    // own snapshot already captures it, below).
    let same_start = d.same_start && spec.machine.snapshot.is_none();
    if let Err(e) = fraglab_host::preflight(spec, &opts) {
        let e = e.to_string();
        return (
            format!("skipped: the host engine cannot run it: {e}{}", install_hint(&e)),
            Vec::new(),
        );
    }
    let mut out = Vec::new();
    for i in 0..runs {
        let mut s = spec.clone();
        s.run.seed = s.run.seed.wrapping_add(i as u64);
        let quiet = wait_for_quiet(o.quiet_wait_secs);
        eprintln!("  {quiet}");
        notes.push(format!("kernel run {}: {quiet}", i + 1));
        let idle = match idle_rates(o.idle_secs) {
            Ok(r) => r,
            Err(e) => {
                notes.push(format!("kernel run {}: no idle baseline: {e}", i + 1));
                BTreeMap::new()
            }
        };
        // A spec booting from a snapshot (issue 21 item 3): capture this machine into the
        // snapshot file right before each kernel run, so the kernel starts from the state the
        // simulator boots from (the capture before the last kernel run, when runs > 1).
        if let Some(sn) = &s.machine.snapshot {
            let captured = fraglab_host::snapshot::capture(&Default::default(), &mut |_, _| {})
                .map_err(|e| e.to_string())
                .and_then(|snap| snap.write(&sn.resolved).map_err(|e| e.to_string()));
            match captured {
                Ok(()) => notes.push(format!(
                    "kernel run {}: this machine captured into {} just before it",
                    i + 1,
                    sn.path
                )),
                Err(e) => return (format!("skipped: snapshot capture: {e}"), Vec::new()),
            }
        }
        let capture = same_start.then(|| keep.join(format!("{}-kernel-run{}.fsnap", d.name, i + 1)));
        if *at_measure {
            opts.capture_at_measure = capture.clone();
        } else {
            opts.capture_to = capture.clone();
        }
        let t = std::time::Instant::now();
        eprintln!("  kernel: run {}/{runs}", i + 1);
        // A bar by wall time over the workload's duration on a terminal (`crate::progress`).
        let mut bar = crate::progress::Bar::new();
        bar.set_phase(&format!("{}: kernel run {}/{runs}", d.name, i + 1));
        let expected = std::time::Duration::from_nanos(s.workload.as_ref().map_or(0, |w| w.duration_ns));
        // `--trace-dir`: the first run's whole trace.
        let opts = fraglab_host::HostOptions {
            trace_to: o
                .trace_dir
                .as_ref()
                .filter(|_| i == 0)
                .map(|td| kernel_trace_path(d, td)),
            ..opts.clone()
        };
        let result = bar.during(expected, || fraglab_host::host_run(&s, &opts));
        bar.finish();
        match result {
            Ok(mut r) => {
                // A capture at the measured part exists only if the run reached it.
                let taken = !*at_measure
                    || r.proc_start
                        .get("host")
                        .is_some_and(|h| h.contains("capture at the measured part:"));
                match capture {
                    Some(c) if taken => captures.push((s.run.seed, c)),
                    Some(_) => notes.push(format!(
                        "kernel run {}: no capture (the measured part never started)",
                        i + 1
                    )),
                    None => {}
                }
                let sub = subtract_idle(&mut r, &idle);
                // Kept as scored: the idle baseline already subtracted (and said so).
                if o.results_dir.is_some() {
                    r.proc_start.entry("host".into()).or_default().push_str(&format!(
                        "idle baseline over {:.0} s subtracted: {}\n",
                        o.idle_secs,
                        if sub.is_empty() {
                            "nothing scored".to_string()
                        } else {
                            sub.join(", ")
                        }
                    ));
                    let p = keep.join(format!("{}-kernel-run{}.json", d.name, i + 1));
                    match serde_json::to_string_pretty(&r) {
                        Ok(j) => {
                            if let Err(e) = write_via_tmp(&p, j + "\n") {
                                notes.push(format!("kernel run {}: result not kept: {e}", i + 1));
                            }
                        }
                        Err(e) => notes.push(format!("kernel run {}: result not kept: {e}", i + 1)),
                    }
                }
                if i == 0 {
                    if let Some(c) = &r.confounders {
                        notes.extend(
                            c.summary()
                                .lines()
                                .map(|l| l.trim_start_matches("# ").to_string()),
                        );
                    }
                }
                notes.push(format!(
                    "kernel run {}: {:.0} s; idle baseline over {:.0} s subtracted{}",
                    i + 1,
                    t.elapsed().as_secs_f64(),
                    o.idle_secs,
                    if sub.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", sub.join(", "))
                    }
                ));
                out.push(r);
            }
            Err(e) => {
                notes.push(format!("kernel run {}: failed: {e}", i + 1));
                if matches!(
                    e,
                    fraglab_host::HostError::NotRoot
                        | fraglab_host::HostError::NotLinux
                        | fraglab_host::HostError::Busy(_)
                        | fraglab_host::HostError::RestoreFailed(_)
                        | fraglab_host::HostError::Interrupted(_)
                ) {
                    break;
                }
            }
        }
    }
    let label = if d.fit_memory { "host --fit-memory" } else { "host" };
    (label.into(), out)
}

/// The kernel arm from the results and captures an earlier `validate --suite --results-dir
/// DIR` kept (`NAME-kernel-runN.json`, `NAME-kernel-runN.fsnap`), up to `runs` of them: the
/// simulator's arms and the scoring re-run without the kernel.
fn kept_kernel_arm(
    d: &ScenarioDef,
    spec: &fraglab_spec::Spec,
    runs: u32,
    dir: &Path,
    at_measure: bool,
    captures: &mut Vec<(u64, PathBuf)>,
    notes: &mut Vec<String>,
) -> (String, Vec<RunResult>) {
    let mut out = Vec::new();
    for i in 0..runs {
        let p = dir.join(format!("{}-kernel-run{}.json", d.name, i + 1));
        if !p.exists() {
            break;
        }
        let r: RunResult = match read_text(&p, MAX_RESULT_BYTES, "result JSON")
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        {
            Ok(r) => r,
            Err(e) => return (format!("skipped: {}: {e}", p.display()), Vec::new()),
        };
        let c = dir.join(format!("{}-kernel-run{}.fsnap", d.name, i + 1));
        let taken = !at_measure
            || r.proc_start
                .get("host")
                .is_some_and(|h| h.contains("capture at the measured part:"));
        if d.same_start && spec.machine.snapshot.is_none() && c.exists() && taken {
            captures.push((spec.run.seed.wrapping_add(i as u64), c));
        }
        if i == 0 {
            if let Some(c) = &r.confounders {
                notes.extend(
                    c.summary()
                        .lines()
                        .map(|l| l.trim_start_matches("# ").to_string()),
                );
            }
        }
        notes.push(format!("kernel run {}: kept in {}", i + 1, p.display()));
        out.push(r);
    }
    if out.is_empty() {
        return (
            format!("skipped: no {}-kernel-run1.json in {}", d.name, dir.display()),
            Vec::new(),
        );
    }
    let label = if d.fit_memory { "host --fit-memory" } else { "host" };
    (format!("{label} (kept)"), out)
}

/// Recorded host results matching `glob`, a path relative to `dir` in which any component may
/// hold one `*` (`live/run-*/vanilla.json`), in path order.
fn recorded(dir: &Path, glob: &str) -> Result<Vec<RunResult>, String> {
    let mut paths = vec![dir.to_path_buf()];
    for comp in Path::new(glob).components() {
        let pat = comp.as_os_str().to_string_lossy().into_owned();
        let mut next = Vec::new();
        for p in &paths {
            match pat.split_once('*') {
                None => next.push(p.join(&pat)),
                Some((pre, post)) => {
                    let Ok(rd) = std::fs::read_dir(p) else { continue };
                    for e in rd.filter_map(|e| e.ok()) {
                        let n = e.file_name().to_string_lossy().into_owned();
                        if n.starts_with(pre) && n.ends_with(post) && n.len() >= pre.len() + post.len() {
                            next.push(e.path());
                        }
                    }
                }
            }
        }
        paths = next;
    }
    let mut files: Vec<PathBuf> = paths.into_iter().filter(|p| p.is_file()).collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let text = read_text(f, MAX_RESULT_BYTES, "result JSON").map_err(|e| e.to_string())?;
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))
        })
        .collect()
}

/// Per-second rates of /proc/vmstat's event counters over `secs` of idling.
fn idle_rates(secs: f64) -> Result<BTreeMap<String, f64>, String> {
    if secs <= 0.0 {
        return Ok(BTreeMap::new());
    }
    let read = || {
        fraglab_host::procfs::read("/proc/vmstat")
            .map(|t| fraglab_host::procfs::parse_vmstat(&t))
            .map_err(|e| e.to_string())
    };
    let a = read()?;
    let t = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_secs_f64(secs));
    let b = read()?;
    let dt = t.elapsed().as_secs_f64();
    Ok(b.iter()
        .filter(|(k, _)| !k.starts_with("nr_"))
        .filter_map(|(k, v)| {
            let d = v - a.get(k).copied().unwrap_or(*v);
            (d > 0).then(|| (k.clone(), d as f64 / dt))
        })
        .collect())
}

/// Subtracts the idle rates over the run's duration from its vmstat deltas (at least 0); the
/// scored items that changed, for the notes.
fn subtract_idle(r: &mut RunResult, rates: &BTreeMap<String, f64>) -> Vec<String> {
    // Over the measured part only (from a `measure` step on, when the spec has one).
    let secs = r.duration_ns.saturating_sub(r.measure_start_ns.unwrap_or(0)) as f64 / 1e9;
    let mut changed = Vec::new();
    for (k, rate) in rates {
        if let Some(v) = r.vmstat_delta.get_mut(k) {
            let sub = (rate * secs).round() as i64;
            if sub > 0 {
                *v = (*v - sub).max(0);
                if scoreboard::WORK_ITEMS.contains(&k.as_str()) {
                    changed.push(format!("{k} −{sub}"));
                }
            }
        }
    }
    changed
}

/// Today's date (UTC) as YYYY-MM-DD.
fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The commit the suite runs at (`git describe`-like: short hash, `-dirty` with local changes),
/// read when the suite starts.
fn commit(dir: &Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(h) => {
            let dirty =
                git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{h}-dirty")
            } else {
                h
            }
        }
        None => "unknown".into(),
    }
}

fn ratio_text(r: &ScoreRow) -> String {
    match (r.ratio, &r.kernel, &r.sim) {
        (Some(x), _, _) => format!("{x:.2}"),
        (None, Some(k), Some(s)) if k.mean == 0.0 && s.mean != 0.0 => "∞".into(),
        (None, Some(_), Some(_)) => "=".into(),
        _ => "".into(),
    }
}

/// A scoreboard.json as read back by `--rescore` (older ones have fewer fields).
#[derive(Debug, Deserialize)]
struct StoredSuite {
    #[serde(default)]
    date: String,
    #[serde(default)]
    commit: String,
    #[serde(default)]
    runs: u32,
    scenarios: Vec<StoredScenario>,
}

#[derive(Debug, Deserialize)]
struct StoredScenario {
    rows: Vec<ScoreRow>,
    #[serde(default)]
    allocations: Option<f64>,
}

/// A class as `--rescore` prints it: latency split into p50 and p99.
fn rescore_key(r: &ScoreRow) -> String {
    match r.class {
        Class::Latency if r.row.contains("p99") => "latency p99".into(),
        Class::Latency => "latency p50".into(),
        c => c.name().into(),
    }
}

/// Per class of a stored scoreboard: the old rule's (pass, fail) as stored, and the rows
/// scored again.
#[derive(Debug, Default, Serialize)]
struct RescoreLine {
    class: String,
    old_pass: usize,
    old_fail: usize,
    new: Tally,
    /// The kernel's leave-one-out passes (from per-run values; None without them).
    ceiling: Option<Hits>,
}

/// The rescore of a stored scoreboard: per class, old rule against new, and the notes.
fn rescore_text(text: &str, format: &str) -> Result<String, String> {
    use std::fmt::Write as _;
    let mut suite: StoredSuite = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut keys: Vec<String> = Vec::new();
    let mut lines: BTreeMap<String, RescoreLine> = BTreeMap::new();
    let (mut mismatched, mut measured) = (0, 0);
    let mut ceilings = 0;
    for sc in &mut suite.scenarios {
        for r in &sc.rows {
            let key = rescore_key(r);
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
            let l = lines.entry(key.clone()).or_default();
            l.class = key;
            match &r.verdict {
                Verdict::Pass => l.old_pass += 1,
                Verdict::Fail => l.old_fail += 1,
                Verdict::NotMeasured(_) => continue,
            }
            measured += 1;
            if r.old_verdict() != r.verdict {
                mismatched += 1;
            }
        }
        if let Some(c) = scoreboard::ceiling_from_rows(&sc.rows, sc.allocations) {
            ceilings += 1;
            for (class, h) in &c.by_class {
                // Latency p50 and p99 share a class: its hits are split by row below.
                if let (false, Some(r)) = (
                    *class == Class::Latency,
                    sc.rows.iter().find(|r| r.class == *class),
                ) {
                    lines
                        .entry(rescore_key(r))
                        .or_default()
                        .ceiling
                        .get_or_insert_with(Hits::default)
                        .add(h);
                }
            }
            for (key, h) in latency_ceiling(&sc.rows, sc.allocations) {
                lines
                    .entry(key)
                    .or_default()
                    .ceiling
                    .get_or_insert_with(Hits::default)
                    .add(&h);
            }
        }
        scoreboard::rescore(&mut sc.rows, sc.allocations);
        for r in &sc.rows {
            let t = Tally::of([r]);
            if let Some(l) = lines.get_mut(&rescore_key(r)) {
                l.new.add(&t);
            }
        }
    }
    keys.sort_by_key(|k| {
        [
            "THP success",
            "work counters",
            "census",
            "latency p50",
            "latency p99",
            "folio orders",
            "read throughput",
        ]
        .iter()
        .position(|x| x == k)
        .unwrap_or(99)
    });
    let mut ordered: Vec<RescoreLine> = keys.iter().filter_map(|k| lines.remove(k)).collect();
    let mut all = RescoreLine {
        class: "all".into(),
        ..Default::default()
    };
    for l in &ordered {
        all.old_pass += l.old_pass;
        all.old_fail += l.old_fail;
        all.new.add(&l.new);
        if let Some(h) = &l.ceiling {
            all.ceiling.get_or_insert_with(Hits::default).add(h);
        }
    }
    ordered.push(all);
    let notes = [
        format!(
            "{} of {} stored pass/fail verdicts differ from the old rule recomputed from the means{}",
            mismatched,
            measured,
            if mismatched > 0 {
                " (a scoreboard scored by the new rule already stores new verdicts)"
            } else {
                ""
            }
        ),
        format!(
            "trivial work rows: both means under max(10, 0.1 % of the scenario's page allocations){}",
            if suite.scenarios.iter().all(|s| s.allocations.is_none()) {
                " — this scoreboard has no allocation totals, so under 10"
            } else {
                ""
            }
        ),
        "trivial latency rows need the faults per order, which a scoreboard does not hold: none is trivial here unless marked".into(),
        "kernel-unstable rows: sd / mean > 0.5 over n ≥ 2 runs, scored against the kernel's min–max; where a scoreboard has no min/max, the widest range n values of that mean and sd can span, mean ± sd × (n − 1) / √n (exact for n = 2)".into(),
        if ceilings == suite.scenarios.len() && ceilings > 0 {
            "kernel ceiling: each kernel run's stored value scored against the others' (no latency row trivial: a scoreboard holds no faults per order)".to_string()
        } else if ceilings > 0 {
            format!("kernel ceiling: from the {ceilings} scenarios whose rows keep every kernel run's value")
        } else {
            "kernel ceiling: not computable — this scoreboard keeps no per-run kernel values (scoreboards since issue 32 do)".to_string()
        },
    ];
    if format == "json" {
        let v = serde_json::json!({
            "date": suite.date, "commit": suite.commit, "runs": suite.runs,
            "classes": ordered, "notes": notes,
        });
        return serde_json::to_string_pretty(&v)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string());
    }
    let md = format == "markdown";
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}rescore of a scoreboard measured {} at commit {} ({} runs per arm): the old rule against the new, per class\n",
        if md { "" } else { "# " },
        suite.date,
        suite.commit,
        suite.runs
    );
    let head = [
        "class",
        "measured rows",
        "old rule pass",
        "non-trivial pass",
        "stable pass",
        "kernel-unstable pass",
        "trivial",
        "kernel ceiling",
    ];
    let frac = |p: usize, n: usize| {
        if n == 0 {
            "–".to_string()
        } else {
            format!("{p} / {n} ({:.0} %)", p as f64 * 100.0 / n as f64)
        }
    };
    let cells = |l: &RescoreLine| -> [String; 8] {
        let t = &l.new;
        [
            l.class.clone(),
            (l.old_pass + l.old_fail).to_string(),
            frac(l.old_pass, l.old_pass + l.old_fail),
            frac(t.pass + t.unstable_pass, t.scored() + t.unstable()),
            frac(t.pass, t.scored()),
            frac(t.unstable_pass, t.unstable()),
            t.trivial.to_string(),
            l.ceiling.map_or("n/a".into(), |h| frac(h.pass, h.scored)),
        ]
    };
    if md {
        let _ = writeln!(
            out,
            "| {} |\n|---|---:|---:|---:|---:|---:|---:|---:|",
            head.join(" | ")
        );
        for l in &ordered {
            let _ = writeln!(out, "| {} |", cells(l).join(" | "));
        }
        out.push('\n');
        for n in &notes {
            let _ = writeln!(out, "- {n}");
        }
    } else {
        let line = |r: &[String]| {
            format!(
                "{:<16} {:>13} {:>18} {:>18} {:>18} {:>21} {:>8} {:>18}\n",
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
            )
        };
        let h: Vec<String> = head.iter().map(|x| x.to_string()).collect();
        out.push_str(&line(&h));
        for l in &ordered {
            out.push_str(&line(&cells(l)));
        }
        out.push('\n');
        for n in &notes {
            let _ = writeln!(out, "# {n}");
        }
    }
    Ok(out)
}

/// The leave-one-out hits of a stored scenario's latency rows, split into p50 and p99.
fn latency_ceiling(rows: &[ScoreRow], allocations: Option<f64>) -> Vec<(String, Hits)> {
    ["latency p50", "latency p99"]
        .iter()
        .filter_map(|key| {
            let sub: Vec<ScoreRow> = rows
                .iter()
                .filter(|r| r.class != Class::Latency || rescore_key(r) == *key)
                .cloned()
                .collect();
            let c = scoreboard::ceiling_from_rows(&sub, allocations)?;
            c.by_class.get(&Class::Latency).map(|h| (key.to_string(), *h))
        })
        .collect()
}

/// `fraglab validate --rescore FILE.json`.
pub fn rescore(path: &Path, format: &str) -> Result<(), String> {
    let text = read_text(path, MAX_RESULT_BYTES, "scoreboard JSON").map_err(|e| e.to_string())?;
    let out = rescore_text(&text, format).map_err(|e| format!("{}: {e}", path.display()))?;
    print!("{out}");
    Ok(())
}

fn pct(r: Option<f64>) -> String {
    r.map_or("n/a".into(), |p| format!("{p:.0} %"))
}

/// "pass / scored (rate)" of a tally's non-trivial stable rows.
fn tally_text(t: &Tally) -> String {
    if t.scored() == 0 {
        return "–".into();
    }
    format!("{} / {} ({})", t.pass, t.scored(), pct(t.rate()))
}

fn hits_text(h: &Option<Hits>) -> String {
    match h {
        Some(h) if h.scored > 0 => format!("{} / {} ({})", h.pass, h.scored, pct(h.rate())),
        Some(_) => "–".into(),
        None => "n/a".into(),
    }
}

/// The per-class summary: class | non-trivial rows | same start | clean boot | kernel ceiling |
/// kernel-unstable rows | trivial rows (rows of the first arm: same start, else clean boot).
fn class_table(lines: &[ClassLine], md: bool) -> String {
    use std::fmt::Write as _;
    let head = [
        "class",
        "non-trivial rows",
        "same start pass",
        "clean boot pass, same scenarios",
        "kernel ceiling, same scenarios",
        "clean boot pass, all scenarios",
        "kernel ceiling, all scenarios",
        "kernel-unstable rows (pass)",
        "trivial rows",
    ];
    let mut out = String::new();
    let cells = |l: &ClassLine| -> [String; 9] {
        let first = l.same_start.unwrap_or(l.clean_boot);
        [
            l.class.name().to_string(),
            first.scored().to_string(),
            l.same_start.as_ref().map_or("n/a".into(), tally_text),
            l.clean_boot_same_scenarios
                .as_ref()
                .map_or("n/a".into(), tally_text),
            l.same_start
                .map_or("n/a".into(), |_| hits_text(&l.ceiling_same_scenarios)),
            tally_text(&l.clean_boot),
            hits_text(&l.ceiling),
            format!("{} ({})", first.unstable(), first.unstable_pass),
            first.trivial.to_string(),
        ]
    };
    let mut total = ClassLine {
        class: Class::Work,
        same_start: None,
        clean_boot: Tally::default(),
        ceiling: None,
        clean_boot_same_scenarios: None,
        ceiling_same_scenarios: None,
    };
    for l in lines {
        total.clean_boot.add(&l.clean_boot);
        if let Some(t) = &l.same_start {
            total.same_start.get_or_insert_with(Tally::default).add(t);
        }
        if let Some(h) = &l.ceiling {
            total.ceiling.get_or_insert_with(Hits::default).add(h);
        }
        if let Some(t) = &l.clean_boot_same_scenarios {
            total
                .clean_boot_same_scenarios
                .get_or_insert_with(Tally::default)
                .add(t);
        }
        if let Some(h) = &l.ceiling_same_scenarios {
            total
                .ceiling_same_scenarios
                .get_or_insert_with(Hits::default)
                .add(h);
        }
    }
    let mut rows: Vec<[String; 9]> = lines
        .iter()
        .filter(|l| {
            let t = l.same_start.unwrap_or(l.clean_boot);
            t.scored() + t.unstable() + t.trivial + t.not_measured > 0
        })
        .map(cells)
        .collect();
    let mut all = cells(&total);
    all[0] = "all".into();
    rows.push(all);
    if md {
        let _ = writeln!(
            out,
            "| {} |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            head.join(" | ")
        );
        for r in rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
    } else {
        let line = |r: &[String]| {
            format!(
                "{:<16} {:>16} {:>16} {:>31} {:>30} {:>30} {:>29} {:>27} {:>12}\n",
                r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]
            )
        };
        let h: Vec<String> = head.iter().map(|x| x.to_string()).collect();
        out.push_str(&line(&h));
        for r in rows {
            out.push_str(&line(&r));
        }
    }
    out
}

/// One line of a scenario's or the suite's counts.
fn counts_text(t: &Tally, ceiling: Option<&Hits>, old: &OldRule) -> String {
    format!(
        "{} pass, {} fail{} (non-trivial, stable kernel); kernel-unstable {} pass, {} fail; {} trivial; \
         kernel ceiling {}; old rule {} pass, {} fail",
        t.pass,
        t.fail,
        t.rate().map_or(String::new(), |p| format!(", {p:.0} %")),
        t.unstable_pass,
        t.unstable_fail,
        t.trivial,
        ceiling.map_or("n/a".into(), |h| pct(h.rate())),
        old.pass,
        old.fail
    )
}

/// The simulator columns of a row: (first arm's stat, its verdict, clean boot's stat and verdict
/// when the first arm is the same start).
fn sim_cells(sc: &ScenarioScore, r: &ScoreRow) -> Vec<String> {
    let mut v = vec![fmt_stat(&r.sim), r.verdict_text()];
    if sc.same_start_runs.is_some() {
        match sc.clean_rows.iter().find(|c| c.row == r.row) {
            Some(c) => v.extend([fmt_stat(&c.sim), c.verdict_text()]),
            None => v.extend(["n/a".to_string(), "n/a".to_string()]),
        }
    }
    v
}

/// The plain-text scoreboard.
fn table(s: &SuiteScore) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# fraglab validate --suite: {} at {}, {} runs per arm; tolerances THP ±10 pp, work ×1.5, census ±15 %, latency ×2; \
         trivial rows (both engines next to nothing) in no pass rate",
        s.date, s.commit, s.runs
    );
    for sc in &s.scenarios {
        let _ = writeln!(
            out,
            "\n## {} ({}; kernel: {}, {} runs; simulator {}{} runs): {}",
            sc.name,
            sc.spec,
            sc.kernel,
            sc.kernel_runs,
            sc.same_start_runs
                .map_or(String::new(), |n| format!("same start {n}, clean boot ")),
            sc.sim_runs,
            counts_text(&sc.tally, sc.ceiling.as_ref().map(|c| &c.all), &sc.old_rule)
        );
        for n in &sc.notes {
            let _ = writeln!(out, "#   {n}");
        }
        let two = sc.same_start_runs.is_some();
        let mut head = format!(
            "{:<36} {:>7} {:>20} {:>15}",
            "row", "tol", "kernel", "kernel min–max"
        );
        if two {
            let _ = write!(
                head,
                " {:>20} {:>13} {:>20} {:>13}",
                "same start", "", "clean boot", ""
            );
        } else {
            let _ = write!(head, " {:>20} {:>13}", "simulator", "");
        }
        let _ = writeln!(out, "{head} {:>7}", "ratio");
        for r in &sc.rows {
            let _ = write!(
                out,
                "{:<36} {:>7} {:>20} {:>15}",
                r.row,
                r.class.tolerance(),
                fmt_stat(&r.kernel),
                fmt_range(&r.kernel)
            );
            let c = sim_cells(sc, r);
            for pair in c.chunks(2) {
                let _ = write!(out, " {:>20} {:>13}", pair[0], pair[1]);
            }
            let _ = write!(out, " {:>7}", ratio_text(r));
            if let Some(d) = &r.diagnosis {
                let _ = write!(out, "  # {d}");
            }
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&class_table(&sc.classes, false));
    }
    let _ = writeln!(
        out,
        "\n# overall: {}",
        counts_text(&s.tally, Some(&s.ceiling), &s.old_rule)
    );
    out.push_str(&class_table(&s.classes, false));
    for l in &s.loaded_runs {
        let _ = writeln!(
            out,
            "# loaded: {} kernel run {} (1-minute load {} -> {}, above {LOADED})",
            l.scenario,
            l.run,
            load_text(l.load_start),
            load_text(l.load_end)
        );
    }
    out
}

/// The markdown scoreboard (the README's section).
fn markdown(s: &SuiteScore) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let t = &s.tally;
    let _ = writeln!(
        out,
        "Measured {} at commit `{}` with `fraglab validate --suite experiments/validation --runs {}` \
         ({:.0} min). Overall, non-trivial rows with a stable kernel: **{} pass, {} fail{}**; \
         kernel-unstable rows (scored against the kernel's range): {} pass, {} fail; trivial rows \
         (both engines next to nothing, in no pass rate): {}; n/a rows: {}. The kernel's own \
         leave-one-out ceiling: {}. By the old rule (every measured row): {} pass, {} fail.\n",
        s.date,
        s.commit,
        s.runs,
        s.wall_secs / 60.0,
        t.pass,
        t.fail,
        t.rate().map_or(String::new(), |p| format!(", {p:.0} %")),
        t.unstable_pass,
        t.unstable_fail,
        t.trivial,
        t.not_measured,
        pct(s.ceiling.rate()),
        s.old_rule.pass,
        s.old_rule.fail
    );
    if let Some(d) = &s.kernel_results {
        let _ = writeln!(
            out,
            "The kernel arms were measured earlier and kept in `{d}` (each run's date, load and \
             confounders are in its notes below); this run scored them again with \
             `--kernel-results` and ran the simulator arms.\n"
        );
    }
    out.push_str(&class_table(&s.classes, true));
    let _ = writeln!(
        out,
        "\n| scenario | kernel | pass | fail | pass rate | kernel ceiling | kernel-unstable pass / fail | trivial | old rule pass / fail |\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for sc in &s.scenarios {
        let _ = writeln!(
            out,
            "| {} | {} ({} runs) | {} | {} | {} | {} | {} / {} | {} | {} / {} |",
            sc.name,
            sc.kernel,
            sc.kernel_runs,
            sc.pass,
            sc.fail,
            pct(sc.pass_rate),
            sc.ceiling.as_ref().map_or("n/a".into(), |c| pct(c.all.rate())),
            sc.tally.unstable_pass,
            sc.tally.unstable_fail,
            sc.tally.trivial,
            sc.old_rule.pass,
            sc.old_rule.fail
        );
    }
    if !s.loaded_runs.is_empty() {
        let _ = writeln!(
            out,
            "\nKernel runs on a loaded machine (1-minute load above {LOADED} at the start or end):\n"
        );
        for l in &s.loaded_runs {
            let _ = writeln!(
                out,
                "- {} run {}: {} → {}",
                l.scenario,
                l.run,
                load_text(l.load_start),
                load_text(l.load_end)
            );
        }
    }
    for sc in &s.scenarios {
        let _ = writeln!(out, "\n### {}\n", sc.name);
        if !sc.about.is_empty() {
            let _ = writeln!(out, "{}\n", sc.about);
        }
        for n in &sc.notes {
            let _ = writeln!(out, "- {n}");
        }
        let _ = writeln!(
            out,
            "- {}; work counters of pages trivial under {} ({} pages allocated per run), of events under 10\n",
            counts_text(&sc.tally, sc.ceiling.as_ref().map(|c| &c.all), &sc.old_rule),
            fmt_value(sc.work_floor),
            sc.allocations.map_or("unknown".into(), fmt_value)
        );
        out.push_str(&class_table(&sc.classes, true));
        let sims = if sc.same_start_runs.is_some() {
            ("same start | verdict | clean boot | verdict", "---:|---|---:|---")
        } else {
            ("simulator | verdict", "---:|---")
        };
        let _ = writeln!(
            out,
            "\n| row | tolerance | kernel | kernel min–max | {} | ratio | diagnosis |\n|---|---|---:|---:|{}|---:|---|",
            sims.0, sims.1
        );
        for r in &sc.rows {
            let why = match (&r.verdict, &r.diagnosis) {
                (_, Some(d)) => d.clone(),
                (Verdict::NotMeasured(w), _) => w.clone(),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.row,
                r.class.tolerance(),
                fmt_stat(&r.kernel),
                fmt_range(&r.kernel),
                sim_cells(sc, r).join(" | "),
                ratio_text(r),
                why
            );
        }
    }
    out
}

const BEGIN: &str = "<!-- scoreboard:begin (written by fraglab validate --suite) -->";
const END: &str = "<!-- scoreboard:end -->";

/// Replaces the scoreboard section of `readme` (between the markers; appended when absent).
fn write_readme(readme: &Path, section: &str) -> Result<(), String> {
    let old = std::fs::read_to_string(readme).unwrap_or_default();
    let block = format!("{BEGIN}\n{section}{END}\n");
    let new = match (old.find(BEGIN), old.find(END)) {
        (Some(a), Some(b)) if b > a => format!(
            "{}{block}{}",
            &old[..a],
            old[b + END.len()..].trim_start_matches('\n')
        ),
        _ => format!(
            "{old}{}{block}",
            if old.is_empty() || old.ends_with("\n\n") {
                ""
            } else {
                "\n"
            }
        ),
    };
    write_via_tmp(readme, new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_34_a_missing_tool_names_its_package() {
        // The host engine's refusal when mkfs.xfs is missing (crates/host/src/loops.rs).
        let e = "[host] loop_images needs mkfs.xfs, which is not installed (not in PATH or /usr/sbin, /sbin)";
        assert_eq!(
            install_hint(e),
            " (install mkfs.xfs: `apt-get install xfsprogs` on Debian and Ubuntu)"
        );
        let e = "[host] loop_images needs losetup, which is not installed (not in PATH or /usr/sbin, /sbin)";
        assert!(install_hint(e).contains("apt-get install mount"));
        assert_eq!(install_hint("not root: the host engine needs root"), "");
    }

    #[test]
    fn issue_34_a_refused_scenario_fails_the_suite_with_its_reason() {
        // A forced preflight refusal, as kernel_arm labels it.
        let label = format!(
            "skipped: the host engine cannot run it: {}{}",
            "[host] loop_images needs mkfs.xfs, which is not installed",
            install_hint("[host] loop_images needs mkfs.xfs, which is not installed")
        );
        let got = unscored(
            [("cold-read-xfs", label.as_str(), 0), ("thp-frag-dm0", "host", 3)].into_iter(),
            false,
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("cold-read-xfs: the host engine cannot run it:"),
            "{got:?}"
        );
        assert!(
            got[0].contains("mkfs.xfs") && got[0].contains("apt-get install xfsprogs"),
            "{got:?}"
        );
        // Every kernel run failed: unscored too, and said so.
        let got = unscored([("a", "host", 0)].into_iter(), false);
        assert_eq!(
            got,
            vec!["a: kernel arm host: every run failed (see its notes)".to_string()]
        );
        // --sim-only asks for no kernel arm: nothing is refused.
        assert!(unscored([("a", "skipped: --sim-only", 0)].into_iter(), true).is_empty());
        assert!(unscored([("a", "host", 2)].into_iter(), false).is_empty());
    }

    #[test]
    fn issue_34_suite_runs_are_bounded_with_their_line() {
        let t = "[[scenario]]\nname = \"a\"\nspec = \"a.toml\"\nruns = 4000000000\n";
        let e = parse_suite(t, "suite.toml").unwrap_err();
        assert!(
            e.starts_with("suite.toml:4: scenario \"a\": runs = 4000000000: at most 10000"),
            "{e}"
        );
        let e = parse_suite(&t.replace("4000000000", "0"), "suite.toml").unwrap_err();
        assert!(
            e.starts_with("suite.toml:4: scenario \"a\": runs = 0: at least 1"),
            "{e}"
        );
        let e = parse_suite(&t.replace("4000000000", "-1"), "suite.toml").unwrap_err();
        assert!(e.contains("suite.toml") && e.contains("line 4"), "{e}");
        let d = parse_suite(&t.replace("4000000000", "10000"), "suite.toml").unwrap();
        assert_eq!(d[0].runs(), Some(10000));
        let max = crate::suite_file::MAX_SUITE_RUNS;
        assert!(check_runs(max).is_ok() && check_runs(max + 1).is_err());
    }

    #[test]
    fn dates() {
        let t = today();
        assert_eq!(t.len(), 10);
        assert!(t.starts_with("20"));
    }

    #[test]
    fn readme_section_is_replaced_in_place() {
        let d = std::env::temp_dir().join(format!("fraglab-readme-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("README.md");
        std::fs::write(&p, "# Suite\n\nintro\n").unwrap();
        write_readme(&p, "table 1\n").unwrap();
        write_readme(&p, "table 2\n").unwrap();
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.starts_with("# Suite\n\nintro\n"));
        assert!(t.contains("table 2") && !t.contains("table 1"));
        assert_eq!(t.matches(BEGIN).count(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn same_start_specs_boot_each_capture_with_its_runs_seed() {
        let spec = fraglab_spec::parse_spec(
            "[machine]\nmemory = \"8GiB\"\ncpus = 2\n[run]\nseed = 5\n[workload]\nduration = \"1s\"\n[[workload.task]]\nname = \"a\"\nsteps = [{ sleep = \"1s\" }]\n",
            "t.toml",
        )
        .unwrap();
        let caps = vec![
            (5, PathBuf::from("/tmp/a.fsnap")),
            (6, PathBuf::from("/tmp/b.fsnap")),
        ];
        let damon = fraglab_spec::DamonSpec::default();
        let v = same_start_specs(&spec, &caps, &damon);
        assert_eq!(v.len(), 2);
        for (s, (seed, p)) in v.iter().zip(&caps) {
            assert_eq!(s.run.seed, *seed);
            assert_eq!(s.machine.memory_bytes, None, "the capture gives the machine");
            assert!(s.machine.zones.is_none());
            let snap = s.machine.snapshot.as_ref().unwrap();
            assert_eq!(&snap.resolved, p);
            assert!(!snap.cpus_given && !snap.hugetlb_given);
        }
    }

    /// §27.2 item 3: the same-start note says which captures carry the kernel kdamond's
    /// regions (the booted kdamond goes on from them) and why the others start cold.
    #[test]
    fn s27_same_start_note_names_the_captured_damon_regions() {
        use fraglab_state::damon::{DamonCapture, DamonRegion};
        use fraglab_state::snapshot::{Snapshot, SnapshotHeader};
        let d = std::env::temp_dir().join(format!("fraglab-dmnote-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let snap = |damon: Option<DamonCapture>| Snapshot {
            header: SnapshotHeader {
                end_pfn: 8,
                damon,
                ..Default::default()
            },
            pages: vec![0; 8],
            dirty: Vec::new(),
        };
        let region = |age| DamonRegion {
            target: 0,
            start: 0,
            end: 4096,
            nr_accesses: 0,
            age,
        };
        let caps: Vec<(u64, PathBuf)> = (1..=3).map(|i| (i, d.join(format!("{i}.fsnap")))).collect();
        snap(Some(DamonCapture {
            regions: vec![region(76), region(83)],
            ..Default::default()
        }))
        .write(&caps[0].1)
        .unwrap();
        snap(Some(DamonCapture {
            note: "no damon:damon_aggregated tracepoint on this kernel".into(),
            ..Default::default()
        }))
        .write(&caps[1].1)
        .unwrap();
        snap(None).write(&caps[2].1).unwrap();
        let n = damon_start_note(&caps);
        assert_eq!(
            n,
            "DAMON goes on from the kernel kdamond's regions and ages each capture recorded (run 1: 2 regions, ages 76-83); \
             DAMON starts cold (every region at age 0) where a capture recorded no regions (run 2: no damon:damon_aggregated \
             tracepoint on this kernel; run 3: the capture has no kdamond regions)"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn read_device_costs_take_the_median_of_the_kernel_runs() {
        let spec = fraglab_spec::parse_spec("[machine]\nmemory = \"1GiB\"\n", "t.toml").unwrap();
        let run = |req: u64, page: u64| {
            let mut r = RunResult::default();
            r.proc_start.insert(
                "host".into(),
                format!("kernel_release 6.18\nread device: req_ns {req} page_ns {page} (x)\n"),
            );
            r
        };
        assert_eq!(read_device_costs(&spec, &[RunResult::default()]), None);
        let (keys, v) = read_device_costs(&spec, &[run(30, 3), run(10, 9), run(20, 1)]).unwrap();
        assert_eq!(keys, ["read_req_ns", "read_page_ns"]);
        assert_eq!(v, (20, 3));
    }

    fn suite_spec(name: &str) -> fraglab_spec::Spec {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../experiments/validation")
            .join(name);
        let text = std::fs::read_to_string(&p).unwrap();
        fraglab_spec::parse_spec(&text, &p.to_string_lossy()).unwrap()
    }

    #[test]
    fn the_measured_part_alone() {
        // thp-frag: the THP task from its measure step; the fragmenting tasks are the capture.
        let s = measured_part_spec(&suite_spec("thp-frag-dm0.toml")).unwrap();
        let t = &s.workload.as_ref().unwrap().task;
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].name, "thp");
        assert_eq!(t[0].after, None);
        assert_eq!(t[0].steps[0], fraglab_spec::TaskStep::Measure);
        let s = measured_part_spec(&suite_spec("scattered-frees-compact.toml")).unwrap();
        let names: Vec<&str> = s
            .workload
            .as_ref()
            .unwrap()
            .task
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["compact"]);
        // thpchallenge's readers read the files its prepare task made: refused, with why.
        let e = measured_part_spec(&suite_spec("thpchallenge-mmtests.toml")).unwrap_err();
        assert!(e.contains("made before the measured part"), "{e}");
        // A kept step on a mapping made before the measure step.
        let spec = fraglab_spec::parse_spec(
            "[machine]\nmemory = \"1GiB\"\n[workload]\nduration = \"1s\"\n[[workload.task]]\nname = \"a\"\nsteps = [{ mmap = \"m\", size = \"4MiB\" }, { measure = true }, { touch = \"m\" }]\n",
            "t.toml",
        )
        .unwrap();
        let e = measured_part_spec(&spec).unwrap_err();
        assert!(e.contains("mapping m"), "{e}");
    }

    #[test]
    fn diagnosis_patterns() {
        assert!(row_matches("free pages order *", "free pages order 3 (end)"));
        assert!(row_matches("pgmigrate_success", "pgmigrate_success"));
        assert!(!row_matches("pgmigrate_success", "pgmigrate_fail"));
        assert!(row_matches("*read MiB/s", "seq: read MiB/s"));
        // Scenario patterns take the same forms.
        assert!(row_matches("*", "thpscale"));
        assert!(row_matches("thp-frag-dm*", "thp-frag-dm1"));
        assert!(!row_matches("thp-frag-dm*", "thpscale"));
        assert!(row_matches("*_kswapd", "pgsteal_kswapd"));
    }

    #[test]
    fn kernel_results_must_hold_kept_runs() {
        let d = std::env::temp_dir().join(format!("fraglab-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let e = check_kernel_results(&d).unwrap_err();
        assert!(
            e.contains("--kernel-results") && e.contains("fraglab-kept-"),
            "{e}"
        );
        std::fs::create_dir_all(&d).unwrap();
        let e = check_kernel_results(&d).unwrap_err();
        assert!(e.contains("no NAME-kernel-run1.json"), "{e}");
        std::fs::write(d.join("thpscale-kernel-run1.json"), "{}").unwrap();
        assert!(check_kernel_results(&d).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn suite_errors_name_the_file() {
        let d = std::env::temp_dir().join(format!("fraglab-suite-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let e = load_suite(&d).unwrap_err();
        assert!(e.contains("no scenario"), "{e}");
        std::fs::write(
            d.join("suite.toml"),
            "[[scenario]]\nname = \"a\"\nspec = \"a.toml\"\nfit_memroy = true\n",
        )
        .unwrap();
        let e = load_suite(&d).unwrap_err();
        assert!(
            e.contains("suite.toml") && e.contains("line 4") && e.contains("fit_memroy"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn host(items: &[(&str, i64)], load: Option<(f64, f64)>) -> RunResult {
        let mut r = RunResult {
            engine: "host".into(),
            ..Default::default()
        };
        for (k, v) in items {
            r.vmstat_delta.insert(k.to_string(), *v);
        }
        if let Some((a, b)) = load {
            let mut c = fraglab_spec::result::HostConfounders::default();
            c.start.loadavg = Some([a, 1.0, 1.0]);
            c.end.loadavg = Some([b, 1.0, 1.0]);
            r.confounders = Some(c);
        }
        r
    }

    /// A measured-part arm whose spec leaves tasks out: its "(end)" census rows are n/a with
    /// the reason, the other rows and the clean boot's keep their verdicts, and the tallies
    /// and class lines are counted again.
    #[test]
    fn same_start_end_census_is_not_comparable_when_tasks_are_left_out() {
        let with_sample = |free: u64| {
            let mut r = host(&[("pgmigrate_success", 5000)], None);
            r.samples.push(fraglab_spec::result::Sample {
                t_ns: 1,
                free_by_order: vec![free; 11],
                free_by_type: vec![0; 5],
                blocks_by_type: vec![100, 1000, 50, 0, 0],
                ..Default::default()
            });
            r
        };
        let k: Vec<RunResult> = (0..3).map(|_| with_sample(1000)).collect();
        let same = vec![with_sample(100)];
        let clean = vec![with_sample(100)];
        let mut sc = scenario_score(&def(), "host".into(), &k, Some(&same), &clean, Vec::new(), &[]);
        let census_fails = |rows: &[ScoreRow]| {
            rows.iter()
                .filter(|r| r.class == Class::Census && r.verdict == Verdict::Fail)
                .count()
        };
        assert_eq!(census_fails(&sc.rows), 11, "free pages per order fail before");
        let fail_before = sc.fail;
        end_census_not_comparable(&mut sc, &["keep".to_string()]);
        assert_eq!(census_fails(&sc.rows), 0);
        assert!(sc
            .rows
            .iter()
            .filter(|r| r.row.ends_with("(end)"))
            .all(|r| matches!(
                &r.verdict,
                Verdict::NotMeasured(w) if w.contains("keep")
            )));
        assert_eq!(sc.fail, fail_before - 11);
        assert_eq!(census_fails(&sc.clean_rows), 11, "the clean boot is untouched");
        let census = sc.classes.iter().find(|l| l.class == Class::Census).unwrap();
        assert_eq!(census.same_start.map(|t| t.fail), Some(0));
        assert!(sc.notes.iter().any(|n| n.contains("not comparable")));
    }

    /// §32: the simulator arms take the kernel's first run's page_reporting_order, unless the
    /// spec gives one (an order or "off").
    #[test]
    fn s32_simulator_arms_take_the_kernels_page_reporting_order() {
        let with = |order: Option<u32>| {
            let mut r = host(&[], None);
            let mut c = fraglab_spec::result::HostConfounders::default();
            c.start.page_reporting = Some(fraglab_spec::result::confounders::PageReporting {
                order,
                ..Default::default()
            });
            r.confounders = Some(c);
            r
        };
        let spec = |extra: &str| {
            fraglab_spec::parse_spec(&format!("[machine]\nmemory = \"1GiB\"\n{extra}"), "s.toml").unwrap()
        };
        let plain = spec("");
        assert_eq!(
            kernel_page_reporting(&plain, &[with(Some(9)), with(Some(5))]),
            Some(9)
        );
        assert_eq!(kernel_page_reporting(&plain, &[with(None)]), None);
        assert_eq!(kernel_page_reporting(&plain, &[host(&[], None)]), None);
        assert_eq!(kernel_page_reporting(&plain, &[]), None);
        assert_eq!(
            kernel_page_reporting(&spec("page_reporting_order = 3\n"), &[with(Some(9))]),
            None
        );
        assert_eq!(
            kernel_page_reporting(&spec("page_reporting_order = \"off\"\n"), &[with(Some(9))]),
            None
        );
    }

    fn def() -> ScenarioDef {
        ScenarioDef {
            name: "s".into(),
            spec: "s.toml".into(),
            kernel: "host".into(),
            fit_memory: false,
            ci: false,
            runs: None,
            about: String::new(),
            same_start: false,
            capture_at: run_word(),
        }
    }

    #[test]
    fn quiet_wait_decisions() {
        assert_eq!(quiet_step(0.99, 0.0, 300.0), QuietStep::Quiet);
        assert_eq!(quiet_step(0.99, 500.0, 300.0), QuietStep::Quiet);
        assert_eq!(quiet_step(1.0, 0.0, 300.0), QuietStep::Wait);
        assert_eq!(quiet_step(3.0, 295.0, 300.0), QuietStep::Wait);
        assert_eq!(quiet_step(3.0, 296.0, 300.0), QuietStep::GiveUp);
        assert_eq!(
            quiet_step(3.0, 0.0, 0.0),
            QuietStep::GiveUp,
            "--quiet-wait 0 reads once"
        );
        assert_eq!(parse_loadavg("0.52 0.58 0.59 1/467 12345\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
    }

    #[test]
    fn loaded_kernel_runs_are_flagged() {
        assert_eq!(loaded(&host(&[], Some((0.5, 1.4)))), None);
        assert_eq!(loaded(&host(&[], Some((1.6, 0.2)))), Some((Some(1.6), Some(0.2))));
        assert_eq!(loaded(&host(&[], Some((0.3, 2.0)))), Some((Some(0.3), Some(2.0))));
        assert_eq!(loaded(&host(&[], None)), None, "no confounders recorded");
        let k = vec![
            host(&[("compact_stall", 100)], Some((0.2, 0.3))),
            host(&[("compact_stall", 100)], Some((2.5, 0.3))),
        ];
        let sim = vec![host(&[("compact_stall", 100)], None)];
        let sc = scenario_score(&def(), "host".into(), &k, None, &sim, Vec::new(), &[]);
        assert_eq!(sc.loaded_runs.len(), 1);
        assert_eq!(
            (sc.loaded_runs[0].run, sc.loaded_runs[0].load_start),
            (2, Some(2.5))
        );
        assert!(
            sc.notes.iter().any(|n| n.starts_with("kernel run 2: LOADED")),
            "{:?}",
            sc.notes
        );
    }

    #[test]
    fn scenario_scores_both_arms_with_ceiling_and_class_rates() {
        let k: Vec<RunResult> = [(100, 0), (110, 0), (300, 0)]
            .iter()
            .map(|(a, b)| {
                host(
                    &[
                        ("compact_stall", *a),
                        ("compact_fail", *b),
                        ("pgmigrate_success", 5000),
                    ],
                    None,
                )
            })
            .collect();
        let same = vec![host(
            &[
                ("compact_stall", 150),
                ("compact_fail", 0),
                ("pgmigrate_success", 5000),
            ],
            None,
        )];
        let clean = vec![host(
            &[
                ("compact_stall", 1000),
                ("compact_fail", 0),
                ("pgmigrate_success", 20_000),
            ],
            None,
        )];
        let sc = scenario_score(&def(), "host".into(), &k, Some(&same), &clean, Vec::new(), &[]);
        assert_eq!(sc.sim_arm, "same start");
        assert_eq!((sc.same_start_runs, sc.sim_runs), (Some(1), 1));
        // Same start: compact_stall (kernel 100/110/300, unstable) passes by the range,
        // pgmigrate_success passes, compact_fail is trivial.
        assert_eq!(
            (sc.pass, sc.fail, sc.tally.unstable_pass, sc.tally.trivial),
            (1, 0, 1, 1)
        );
        assert_eq!((sc.old_rule.pass, sc.old_rule.fail), (3, 0));
        let work = sc.classes.iter().find(|l| l.class == Class::Work).unwrap();
        assert_eq!(work.same_start.map(|t| (t.pass, t.fail)), Some((1, 0)));
        assert_eq!(
            (
                work.clean_boot.pass,
                work.clean_boot.fail,
                work.clean_boot.unstable_fail
            ),
            (0, 1, 1)
        );
        assert_eq!(work.ceiling, Some(Hits { pass: 5, scored: 6 }));
        assert_eq!(
            sc.ceiling.as_ref().map(|c| c.all),
            Some(Hits { pass: 5, scored: 6 })
        );
        assert_eq!(sc.clean_rows.len(), sc.rows.len());
        // Both simulator columns in the markdown, and the per-class table.
        let suite = SuiteScore {
            date: "d".into(),
            commit: "c".into(),
            runs: 3,
            tolerances: BTreeMap::new(),
            pass: sc.pass,
            fail: sc.fail,
            pass_rate: sc.pass_rate,
            tally: sc.tally,
            old_rule: sc.old_rule,
            classes: sum_classes(std::slice::from_ref(&sc)),
            ceiling: Hits { pass: 5, scored: 6 },
            loaded_runs: Vec::new(),
            kernel_results: None,
            scenarios: vec![sc],
            wall_secs: 0.0,
        };
        let md = markdown(&suite);
        assert!(
            md.contains("| same start | verdict | clean boot | verdict |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| work counters | 1 | 1 / 1 (100 %) | 0 / 1 (0 %) | 5 / 6 (83 %) | 0 / 1 (0 %) | 5 / 6 (83 %) | 1 (1) | 1 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| compact_fail |") && md.contains("| trivial |"),
            "{md}"
        );
        assert!(md.contains("pass (range)"), "{md}");
        let t = table(&suite);
        assert!(t.contains("same start") && t.contains("clean boot"), "{t}");
        // Scored again from its own JSON (per-run values kept): the same ceiling.
        let json = serde_json::to_string(&suite).unwrap();
        let r = rescore_text(&json, "table").unwrap();
        let w = r.lines().find(|l| l.starts_with("work counters")).unwrap();
        assert!(w.trim_end().ends_with("5 / 6 (83 %)"), "{r}");
        assert!(
            r.contains("kernel ceiling: each kernel run's stored value"),
            "{r}"
        );
        // The clean boot alone: its rows are `rows`.
        let sc = scenario_score(&def(), "host".into(), &k, None, &clean, Vec::new(), &[]);
        assert_eq!(sc.sim_arm, "clean boot");
        assert!(sc.clean_rows.is_empty());
        assert_eq!((sc.pass, sc.fail), (0, 1));
        assert!(sc.classes.iter().all(|l| l.same_start.is_none()));
    }

    #[test]
    fn rescore_of_a_tiny_old_scoreboard() {
        let old = r#"{"date": "2026-11-26", "commit": "abc", "runs": 2, "pass": 3, "fail": 2,
          "scenarios": [{"name": "a", "kernel": "host", "rows": [
            {"row": "compact_stall", "class": "work", "kernel": {"mean": 0.0, "sd": 0.0, "n": 2},
             "sim": {"mean": 0.0, "sd": 0.0, "n": 2}, "ratio": null, "verdict": "pass"},
            {"row": "pgscan_kswapd", "class": "work", "kernel": {"mean": 1000.0, "sd": 10.0, "n": 2},
             "sim": {"mean": 1200.0, "sd": 0.0, "n": 2}, "ratio": 1.2, "verdict": "pass"},
            {"row": "pgmigrate_success", "class": "work", "kernel": {"mean": 1000.0, "sd": 900.0, "n": 2},
             "sim": {"mean": 2000.0, "sd": 0.0, "n": 2}, "ratio": 2.0, "verdict": "fail"},
            {"row": "order-9 fault p99 (us)", "class": "latency", "kernel": {"mean": 100.0, "sd": 1.0, "n": 2},
             "sim": {"mean": 500.0, "sd": 0.0, "n": 2}, "ratio": 5.0, "verdict": "fail"},
            {"row": "free pages order 0 (end)", "class": "census", "kernel": {"mean": 5.0, "sd": 0.0, "n": 2},
             "sim": {"mean": 9.0, "sd": 0.0, "n": 2}, "ratio": 1.8, "verdict": "pass"},
            {"row": "mixed blocks (end)", "class": "census", "kernel": null, "sim": {"mean": 1.0, "sd": 0.0, "n": 2},
             "ratio": null, "verdict": {"not_measured": "no CONFIG_PAGE_OWNER"}}
          ]}]}"#;
        let t = rescore_text(old, "table").unwrap();
        let line = |c: &str| {
            t.lines()
                .find(|l| l.starts_with(c))
                .unwrap_or_else(|| panic!("{c}: {t}"))
                .to_string()
        };
        // work: old 2 / 3; new: compact_stall trivial, pgscan_kswapd a stable pass,
        // pgmigrate_success unstable (range 363–1636, 2000 within × 1.5) a pass.
        let w = line("work counters")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            w.contains("3 2 / 3 (67 %) 2 / 2 (100 %) 1 / 1 (100 %) 1 / 1 (100 %) 1"),
            "{w}"
        );
        let c = line("census").split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(c.ends_with("1 1 / 1 (100 %) – – – 1 n/a"), "{c}");
        let l = line("latency p99")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(l.contains("0 / 1 (0 %)"), "{l}");
        assert!(t.contains("0 of 5 stored pass/fail verdicts differ"), "{t}");
        assert!(t.contains("kernel ceiling: not computable"), "{t}");
        assert!(rescore_text("{}", "table").is_err());
        let j: serde_json::Value = serde_json::from_str(&rescore_text(old, "json").unwrap()).unwrap();
        assert_eq!(j["classes"][0]["class"], "work counters");
    }
}
