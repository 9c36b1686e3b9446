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
//! scoreboard says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_spec::result::scoreboard::{self, fmt_stat, pass_rate, tally, ScoreRow, Verdict};
use fraglab_spec::result::RunResult;
use serde::{Deserialize, Serialize};

use crate::compare::{load_config, run_many};
use crate::write_via_tmp;

/// DIR/suite.toml.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    #[serde(default)]
    scenario: Vec<ScenarioDef>,
}

/// One `[[scenario]]` of suite.toml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioDef {
    name: String,
    /// The spec, relative to DIR, optionally with `@KEY=VALUE,...` overrides as in compare.
    spec: String,
    /// `host` (default) or a glob of recorded host result JSONs relative to DIR.
    #[serde(default = "host_word")]
    kernel: String,
    /// Run the host arm with `--fit-memory`.
    #[serde(default)]
    fit_memory: bool,
    /// Part of the CI slice (`--ci`).
    #[serde(default)]
    ci: bool,
    /// Runs of this scenario (default `--runs`).
    runs: Option<u32>,
    /// What the scenario models, for the README (one line).
    #[serde(default)]
    about: String,
}

fn host_word() -> String {
    "host".into()
}

/// DIR/diagnoses.toml: one-line diagnoses of rows off by more than ×3.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DiagnosesFile {
    #[serde(default)]
    diagnosis: Vec<Diagnosis>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Diagnosis {
    /// A scenario name, or `*` for every scenario.
    scenario: String,
    /// A row name, or a prefix ending in `*`.
    row: String,
    text: String,
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
    /// `--trace-dir`: the first run of each arm traced in full, and the diff of the two.
    pub trace_dir: Option<PathBuf>,
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
    sim_runs: usize,
    /// Failed runs, skipped arms, the idle baseline subtracted, the host's confounders.
    notes: Vec<String>,
    rows: Vec<ScoreRow>,
    pass: usize,
    fail: usize,
    pass_rate: Option<f64>,
}

/// The whole suite's scores.
#[derive(Debug, Serialize)]
struct SuiteScore {
    date: String,
    commit: String,
    runs: u32,
    tolerances: BTreeMap<&'static str, &'static str>,
    scenarios: Vec<ScenarioScore>,
    pass: usize,
    fail: usize,
    pass_rate: Option<f64>,
    wall_secs: f64,
}

/// Whether the suite run writes DIR/scoreboard.json and DIR/README.md: a whole run with the
/// kernel, not told `--no-write`.
fn writes_scoreboard(o: &SuiteOptions) -> bool {
    !o.no_write && !o.sim_only && o.only.is_empty() && !o.ci
}

/// `fraglab validate --suite DIR ...`.
pub fn suite(o: SuiteOptions) -> Result<(), String> {
    if o.runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if o.format == "csv" {
        return Err("validate --suite: --format table, markdown or json".into());
    }
    if let Some(td) = &o.trace_dir {
        crate::check_output_dir("--trace-dir", td)?;
        std::fs::create_dir_all(td).map_err(|e| format!("--trace-dir {}: {e}", td.display()))?;
    }
    let t0 = std::time::Instant::now();
    if writes_scoreboard(&o) {
        // Checked before the first run, not after an hour of them.
        for f in ["scoreboard.json", "README.md"] {
            crate::check_output("validate --suite", &o.dir.join(f))?;
        }
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
    let mut scores = Vec::new();
    for (i, d) in defs.iter().enumerate() {
        eprintln!("[{}/{}] {}", i + 1, defs.len(), d.name);
        let mut s = run_scenario(d, &o)?;
        for r in &mut s.rows {
            if r.off_by_3() {
                r.diagnosis = diagnoses
                    .iter()
                    .find(|x| (x.scenario == "*" || x.scenario == s.name) && row_matches(&x.row, &r.row))
                    .map(|x| x.text.clone());
            }
        }
        eprintln!(
            "[{}/{}] {}: {} pass, {} fail",
            i + 1,
            defs.len(),
            d.name,
            s.pass,
            s.fail
        );
        scores.push(s);
    }
    let (pass, fail) = scores.iter().fold((0, 0), |(p, f), s| (p + s.pass, f + s.fail));
    let suite = SuiteScore {
        date: today(),
        commit: commit(&o.dir),
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
        scenarios: scores,
        pass,
        fail,
        pass_rate: pass_rate((pass, fail)),
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
    Ok(())
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
        let text = std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
        let f: SuiteFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
        let mut seen = Vec::new();
        for d in &f.scenario {
            if seen.contains(&&d.name) {
                return Err(format!(
                    "{}: two scenarios named {:?}",
                    manifest.display(),
                    d.name
                ));
            }
            seen.push(&d.name);
        }
        f.scenario
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
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let f: DiagnosesFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(f.diagnosis)
}

/// Runs one scenario's two arms and scores them; an error here is the suite's (a spec that does
/// not parse), a failed run only marks the scenario.
fn run_scenario(d: &ScenarioDef, o: &SuiteOptions) -> Result<ScenarioScore, String> {
    let runs = d.runs.unwrap_or(o.runs);
    let path = o.dir.join(&d.spec);
    let (_, spec) = load_config(&path.to_string_lossy()).map_err(|e| format!("scenario {}: {e}", d.name))?;
    if spec.workload.is_none() {
        return Err(format!(
            "scenario {}: {} has no [workload] (both engines run timed specs)",
            d.name,
            path.display()
        ));
    }
    let mut notes = Vec::new();
    let (kernel_label, kernel) = kernel_arm(d, &spec, runs, o, &mut notes);
    // With --fit-memory the simulator boots the machine the kernel's first run was fitted to:
    // its zones once fitted and, for a mixed fit, the hugetlb pool that made up the rest
    // (`sim_spec_for`); later runs' fits may differ by a few blocks.
    let mut sim_spec = match kernel.first() {
        Some(h) if d.fit_memory && d.kernel == "host" => fraglab_host::sim_spec_for(&spec, h),
        _ => spec.clone(),
    };
    // kernel-model.md §27.3: the model runs the pageout scheme the kernel's first run had on
    // (none: DAMON stays off), unless the spec sets its own `[damon]`.
    let damon = kernel.first().and_then(|h| h.confounders.as_ref());
    if let Some(dm) = damon.and_then(fraglab_host::damon::damon_spec_for) {
        if !sim_spec.damon.enabled {
            notes.push("simulator: DAMON on with the kernel's recorded pageout scheme (§27.3)".into());
            sim_spec.damon = dm;
        }
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
    if let Some(td) = &o.trace_dir {
        trace_arms(d, &sim_spec, td, &mut notes);
    }
    let rows = scoreboard::score(&kernel, &sim);
    let (pass, fail) = tally(&rows);
    Ok(ScenarioScore {
        name: d.name.clone(),
        spec: d.spec.clone(),
        about: d.about.clone(),
        kernel: kernel_label,
        kernel_runs: kernel.len(),
        sim_runs: sim.len(),
        notes,
        rows,
        pass,
        fail,
        pass_rate: pass_rate((pass, fail)),
    })
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
    notes: &mut Vec<String>,
) -> (String, Vec<RunResult>) {
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
    let floor = match fraglab_spec::parse_size(&o.floor) {
        Ok(f) => f,
        Err(e) => return (format!("skipped: --floor: {e}"), Vec::new()),
    };
    let opts = fraglab_host::HostOptions {
        mem_floor_bytes: floor,
        fit_memory: d.fit_memory,
        workdir: o.workdir.clone(),
        ..Default::default()
    };
    if let Err(e) = fraglab_host::preflight(spec, &opts) {
        return (format!("skipped: the host engine cannot run it: {e}"), Vec::new());
    }
    let mut out = Vec::new();
    for i in 0..runs {
        let mut s = spec.clone();
        s.run.seed = s.run.seed.wrapping_add(i as u64);
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
                let sub = subtract_idle(&mut r, &idle);
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
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
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

/// The commit the suite ran at (`git describe`-like: short hash, `-dirty` with local changes).
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

/// The plain-text scoreboard.
fn table(s: &SuiteScore) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# fraglab validate --suite: {} at {}, {} runs per arm; tolerances THP ±10 pp, work ×1.5, census ±15 %, latency ×2",
        s.date, s.commit, s.runs
    );
    for sc in &s.scenarios {
        let _ = writeln!(
            out,
            "\n## {} ({}; kernel: {}, {} runs; simulator {} runs): {} pass, {} fail{}",
            sc.name,
            sc.spec,
            sc.kernel,
            sc.kernel_runs,
            sc.sim_runs,
            sc.pass,
            sc.fail,
            sc.pass_rate.map_or(String::new(), |p| format!(", {p:.0} %"))
        );
        for n in &sc.notes {
            let _ = writeln!(out, "#   {n}");
        }
        let _ = writeln!(
            out,
            "{:<36} {:>7} {:>20} {:>20} {:>7} {:>5}",
            "row", "tol", "kernel", "simulator", "ratio", ""
        );
        for r in &sc.rows {
            let _ = write!(
                out,
                "{:<36} {:>7} {:>20} {:>20} {:>7} {:>5}",
                r.row,
                r.class.tolerance(),
                fmt_stat(&r.kernel),
                fmt_stat(&r.sim),
                ratio_text(r),
                r.verdict.word()
            );
            if let Some(d) = &r.diagnosis {
                let _ = write!(out, "  # {d}");
            }
            out.push('\n');
        }
    }
    let _ = writeln!(
        out,
        "\n# overall: {} pass, {} fail{}",
        s.pass,
        s.fail,
        s.pass_rate.map_or(String::new(), |p| format!(" ({p:.0} %)"))
    );
    out
}

/// The markdown scoreboard (the README's section).
fn markdown(s: &SuiteScore) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Measured {} at commit `{}` with `fraglab validate --suite experiments/validation --runs {}` \
         ({:.0} min). Overall: **{} pass, {} fail{}** (n/a rows left out).\n",
        s.date,
        s.commit,
        s.runs,
        s.wall_secs / 60.0,
        s.pass,
        s.fail,
        s.pass_rate.map_or(String::new(), |p| format!(", {p:.0} %"))
    );
    let _ = writeln!(
        out,
        "| scenario | kernel | pass | fail | pass rate |\n|---|---|---:|---:|---:|"
    );
    for sc in &s.scenarios {
        let _ = writeln!(
            out,
            "| {} | {} ({} runs) | {} | {} | {} |",
            sc.name,
            sc.kernel,
            sc.kernel_runs,
            sc.pass,
            sc.fail,
            sc.pass_rate.map_or("n/a".into(), |p| format!("{p:.0} %"))
        );
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
            "\n| row | tolerance | kernel | simulator | ratio | verdict | diagnosis |\n|---|---|---:|---:|---:|---|---|"
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
                fmt_stat(&r.sim),
                ratio_text(r),
                r.verdict.word(),
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
    fn diagnosis_patterns() {
        assert!(row_matches("free pages order *", "free pages order 3 (end)"));
        assert!(row_matches("pgmigrate_success", "pgmigrate_success"));
        assert!(!row_matches("pgmigrate_success", "pgmigrate_fail"));
        assert!(row_matches("*read MiB/s", "seq: read MiB/s"));
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
}
