//! `fraglab compare`: several configurations, each run N times, in mmtests' compare format;
//! and the `[LABEL=]SPEC[@KEY=VALUE,...]` configurations other commands take too.

use std::path::PathBuf;

use crate::write_via_tmp;

/// The most runs per configuration: `compare` holds every run's result in memory until it
/// prints the table (the statistics need them all), and even the smallest result is tens of KiB
/// (`--runs 4000000000` asked the allocator for 6.5 TB up front and aborted).
pub const MAX_RUNS: u32 = 10_000;

/// `fraglab compare`'s arguments.
#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    #[arg(required_unless_present = "from")]
    pub configs: Vec<String>,
    /// Merge the result files in these directories instead of running (see above).
    #[arg(long, num_args = 1.., conflicts_with_all = ["configs", "jobs", "results_dir"])]
    pub from: Vec<PathBuf>,
    /// With `--from`: the label of the baseline column (default: the first label found).
    #[arg(long, requires = "from")]
    pub baseline: Option<String>,
    /// Simulations per configuration (seeds: the spec's seed, +1, +2, ...).
    #[arg(long, default_value_t = 1)]
    pub runs: u32,
    /// Simulations run at once, at least 1 (default: the CPUs available).
    #[arg(long, value_parser = crate::parse_jobs)]
    pub jobs: Option<usize>,
    #[arg(long, default_value = "table", value_parser = ["table", "markdown", "json", "csv"])]
    pub format: String,
    /// Write the table to this file (written only on success).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also write every run's result JSON into this directory (LABEL-runN.json).
    #[arg(long)]
    pub results_dir: Option<PathBuf>,
    /// Run every configuration as a scale model `1/K` (as `fraglab run --scale`; one
    /// configuration alone: `SPEC@run.scale=1/K`).
    #[arg(long, value_parser = crate::parse_scale, conflicts_with = "from")]
    pub scale: Option<u32>,
    /// Warm fork (docs/policies.md "Warm forks"): run the first configuration to this
    /// simulated time (e.g. 540s), then fork one process per other configuration there,
    /// which takes its knobs and [model] policy/switches and runs on. The configurations
    /// may differ only in those; the warm-up runs once per run index.
    #[arg(long, conflicts_with_all = ["from", "scale"])]
    pub fork_at: Option<String>,
    /// Every configuration continues from this checkpoint (`fraglab run --checkpoint-at`,
    /// docs/checkpoints.md) instead of booting: the configurations may differ from the
    /// spec that wrote it only in knobs and [model] policy switches, and run once each
    /// (a checkpoint holds one seed's run).
    #[arg(long, conflicts_with_all = ["from", "scale", "fork_at"])]
    pub from_checkpoint: Option<PathBuf>,
}

/// `fraglab compare`: merges result directories (`--from`), runs warm forks (`--fork-at`), or
/// runs every configuration.
pub fn dispatch(a: CompareArgs) -> Result<(), String> {
    if !a.from.is_empty() {
        return compare_from(a.from, a.baseline, a.format, a.output);
    }
    if let Some(at) = &a.fork_at {
        if a.scale.is_some() || a.jobs.is_some() {
            return Err(
                "--fork-at runs each run index's configurations as forked processes: \
                        it takes neither --scale nor --jobs"
                    .into(),
            );
        }
        return compare_forked(a.configs, a.runs, at, a.format, a.output, a.results_dir);
    }
    compare(a)
}

/// Runs every configuration `runs` times on `jobs` threads and prints (or writes) the compare
/// table in `format`; with `results_dir`, every run's result JSON as well.
fn compare(a: CompareArgs) -> Result<(), String> {
    let CompareArgs {
        configs,
        runs,
        jobs,
        format,
        output,
        results_dir,
        scale,
        from_checkpoint,
        ..
    } = a;
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    if runs > MAX_RUNS {
        return Err(format!(
            "--runs {runs}: at most {MAX_RUNS} runs per configuration (compare holds every run's \
             result in memory until it prints the table)"
        ));
    }
    if let Some(p) = &output {
        crate::check_output("-o", p)?;
    }
    let (labels, specs) = load_configs(&configs)?;
    let mut specs = specs
        .into_iter()
        .map(|s| crate::scale_by_flag(s, scale))
        .collect::<Result<Vec<_>, String>>()?;
    if let Some(p) = &from_checkpoint {
        if runs > 1 {
            return Err("--from-checkpoint: a checkpoint holds one seed's run: give --runs 1".into());
        }
        for s in &mut specs {
            s.machine.checkpoint = Some(crate::checkpoint_in(p));
        }
    }
    if let Some(dir) = &results_dir {
        crate::check_output_dir("--results-dir", dir)?;
        check_file_names(&labels)?;
    }
    let jobs = jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    if let Some(dir) = &results_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    if labels.len() == 1 {
        note_one_configuration(&labels[0]);
    }
    let t0 = std::time::Instant::now();
    let results = run_and_write(&specs, &labels, runs, jobs, results_dir.as_deref())?;
    let wall = t0.elapsed().as_secs_f64();
    let report = fraglab_sim::compare::compare(&labels, &results);
    let sim: f64 = results.iter().flatten().map(|r| r.duration_ns as f64 / 1e9).sum();
    let header = format!(
        "# fraglab compare: {} configurations x {runs} runs, {:.0} s simulated in {:.1} s wall ({jobs} jobs){}",
        labels.len(),
        sim,
        wall,
        match scale {
            Some(k) => format!(", every configuration a {}", fraglab_spec::scale::label(k)),
            None => String::new(),
        }
    );
    emit(&report, &format, &header, output)
}

/// `compare --fork-at T`: per run index, the first configuration runs to T once and the
/// others fork from it there ([`fraglab_sim::fork::run_workload_forked`]); then the table as
/// [`compare`] prints it. Runs one run index after another (the forked processes of one index
/// run in parallel).
pub fn compare_forked(
    configs: Vec<String>,
    runs: u32,
    at: &str,
    format: String,
    output: Option<PathBuf>,
    results_dir: Option<PathBuf>,
) -> Result<(), String> {
    let at_ns = fraglab_spec::parse_duration(at).map_err(|e| format!("--fork-at {at}: {e}"))?;
    if runs == 0 || runs > MAX_RUNS {
        return Err(format!("--runs must be 1 to {MAX_RUNS}"));
    }
    if let Some(p) = &output {
        crate::check_output("-o", p)?;
    }
    let (labels, specs) = load_configs(&configs)?;
    if labels.len() < 2 {
        return Err("--fork-at needs at least two configurations: the first runs the warm-up".into());
    }
    if let Some(dir) = &results_dir {
        crate::check_output_dir("--results-dir", dir)?;
        check_file_names(&labels)?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let t0 = std::time::Instant::now();
    let mut results: Vec<Vec<fraglab_spec::result::RunResult>> = vec![Vec::new(); specs.len()];
    for run in 0..runs {
        let seeded: Vec<fraglab_spec::Spec> = specs
            .iter()
            .map(|s| {
                let mut s = s.clone();
                s.run.seed = s.run.seed.wrapping_add(run as u64);
                s
            })
            .collect();
        let out = fraglab_sim::fork::run_workload_forked(&seeded, at_ns).map_err(|e| e.to_string())?;
        for (si, r) in out.into_iter().enumerate() {
            let r = r.map_err(|e| e.to_string())?;
            if let Some(dir) = &results_dir {
                let name = crate::result_file_name(&labels[si], run as usize + 1);
                let json = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?;
                write_via_tmp(&dir.join(&name), json + "\n")?;
            }
            results[si].push(r);
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    let report = fraglab_sim::compare::compare(&labels, &results);
    let sim: f64 = results.iter().flatten().map(|r| r.duration_ns as f64 / 1e9).sum();
    let header = format!(
        "# fraglab compare: {} configurations x {runs} runs, {sim:.0} s simulated in {wall:.1} s wall; \
         forked from {}'s run at {:.0} s (every count covers the whole run, the warm-up included)",
        labels.len(),
        labels[0],
        at_ns as f64 / 1e9
    );
    emit(&report, &format, &header, output)
}

/// Prints or writes (`output`, via a temporary file) the compare table in `format`; `header`
/// heads the plain table only.
fn emit(
    report: &fraglab_spec::result::CompareReport,
    format: &str,
    header: &str,
    output: Option<PathBuf>,
) -> Result<(), String> {
    let text = match format {
        "json" => serde_json::to_string_pretty(report).map_err(|e| e.to_string())? + "\n",
        "csv" => fraglab_sim::compare::format_csv(report),
        "markdown" => fraglab_sim::compare::format_markdown(report),
        _ => format!("{header}\n{}", fraglab_sim::compare::format_table(report)),
    };
    match output {
        Some(path) => write_via_tmp(&path, text),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

/// `compare --from DIR...`: the compare table of the result files in `dirs`, merged by
/// [`fraglab_sim::compare::merge_results`] (the code the Python package's sweeps use).
pub fn compare_from(
    dirs: Vec<PathBuf>,
    baseline: Option<String>,
    format: String,
    output: Option<PathBuf>,
) -> Result<(), String> {
    if let Some(p) = &output {
        crate::check_output("-o", p)?;
    }
    let files = fraglab_sim::compare::read_result_dirs(&dirs)?;
    let (labels, results) = fraglab_sim::compare::merge_results(files, baseline.as_deref())?;
    if labels.len() == 1 {
        note_one_configuration(&labels[0]);
    }
    let report = fraglab_sim::compare::compare(&labels, &results);
    let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let header = format!(
        "# fraglab compare: {} configurations x {} runs, merged from {}",
        labels.len(),
        report.runs,
        dirs.join(" ")
    );
    emit(&report, &format, &header, output)
}

/// What compare says when given one configuration: there is no second column to compare with,
/// so the table holds the baseline's runs alone and every change reads 0 %.
pub fn one_configuration(label: &str) -> String {
    format!(
        "fraglab compare: one configuration ({label}): nothing to compare it with; the table shows \
         its runs alone and every change is 0 %. Add a second CONFIG, e.g. `other=SPEC@vm.defrag_mode=1`, \
         or use `fraglab run` for a single run."
    )
}

/// Says [`one_configuration`] on standard error when it is a terminal (a person is reading; a
/// script's stderr stays as quiet as with two configurations).
fn note_one_configuration(label: &str) {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!("{}", one_configuration(label));
    }
}

/// The configurations' labels and specs; every spec must be a timed run, every label unique.
fn load_configs(configs: &[String]) -> Result<(Vec<String>, Vec<fraglab_spec::Spec>), String> {
    let mut labels = Vec::new();
    let mut specs = Vec::new();
    for c in configs {
        let (label, spec) = load_config(c)?;
        if spec.workload.is_none() {
            return Err(format!(
                "{c}: compare needs a spec with a [workload] (a timed run)"
            ));
        }
        if labels.contains(&label) {
            return Err(format!(
                "two configurations are labelled {label:?}; name them with LABEL=SPEC"
            ));
        }
        labels.push(label);
        specs.push(spec);
    }
    Ok((labels, specs))
}

/// `--results-dir`: two labels must not give the same file name ([`crate::result_file_name`]:
/// `a/b` and `a_b` both give `a_b-run1.json`).
fn check_file_names(labels: &[String]) -> Result<(), String> {
    for (i, a) in labels.iter().enumerate() {
        if let Some(b) = labels[..i]
            .iter()
            .find(|b| crate::result_file_name(b, 1) == crate::result_file_name(a, 1))
        {
            return Err(format!(
                "--results-dir: the labels {b:?} and {a:?} both give the file {}; name them with LABEL=SPEC",
                crate::result_file_name(a, 1)
            ));
        }
    }
    Ok(())
}

/// Runs every configuration `runs` times; with `dir` (`--results-dir`), each run's result
/// JSON is written as `LABEL-runN.json` ([`crate::result_file_name`], via a temporary file and
/// a rename) as soon as the run finishes, so an interrupted compare keeps every finished run.
/// The first SIGINT/SIGTERM stops starting runs and lets the running ones finish and be
/// written; a second abandons them ([`crate::interrupt`]). An interrupted compare is an error
/// that names the complete files.
fn run_and_write(
    specs: &[fraglab_spec::Spec],
    labels: &[String],
    runs: u32,
    jobs: usize,
    dir: Option<&std::path::Path>,
) -> Result<Vec<Vec<fraglab_spec::result::RunResult>>, String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    let interrupts = fraglab_host::signals::SignalFlag::install_escalating();
    let written: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let announced = AtomicBool::new(false);
    let stop = |running: usize| {
        let Some(sig) = interrupts.caught() else {
            return false;
        };
        if !announced.swap(true, Ordering::SeqCst) {
            eprintln!(
                "\nfraglab compare: {}: starting no more runs; {running} running run(s) finish{} \
                 (again to abandon them)",
                fraglab_host::signals::signal_name(sig),
                if dir.is_some() { " and are written" } else { "" }
            );
        }
        true
    };
    let done = |si: usize, run: usize, r: &fraglab_spec::result::RunResult| -> Result<(), String> {
        let Some(dir) = dir else {
            return Ok(());
        };
        let name = crate::result_file_name(&labels[si], run + 1);
        let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
        write_via_tmp(&dir.join(&name), json + "\n")?;
        written.lock().expect("no panics while holding it").push(name);
        Ok(())
    };
    let all = run_many_hooked(
        specs,
        runs,
        jobs,
        "",
        &RunHooks {
            stop: &stop,
            done: &done,
        },
    );
    let total = all.len();
    let finished = all.iter().filter(|r| r.is_some()).count();
    if let Some(sig) = interrupts.caught() {
        let mut files = written.into_inner().expect("threads joined");
        files.sort();
        let listed = match dir {
            None => "no --results-dir: nothing was written".to_string(),
            Some(d) if files.is_empty() => format!("no run finished: {} holds none", d.display()),
            Some(d) => format!(
                "the complete result files, in {}: {}",
                d.display(),
                files.join(", ")
            ),
        };
        return Err(format!(
            "interrupted by {} after {finished} of {total} runs; {listed}",
            fraglab_host::signals::signal_name(sig)
        ));
    }
    shape_results(all, specs.len(), runs)
}

/// A compare configuration `[LABEL=]SPEC[@KEY=VALUE,...]` → (label, spec)
/// ([`fraglab_sim::compare::load_config`], shared with the Python package).
pub fn load_config(c: &str) -> Result<(String, fraglab_spec::Spec), String> {
    let (label, spec) = fraglab_sim::compare::load_config(c)?;
    crate::warn_spec(&spec);
    Ok((label, spec))
}

/// Runs every spec `runs` times (seed, seed + 1, ...) on `jobs` threads; the results are in
/// (spec, run) order whatever the scheduling, so the output is deterministic. On a terminal, a
/// bar of runs done (with each running run's share) is shown, after `phase`.
pub(crate) fn run_many(
    specs: &[fraglab_spec::Spec],
    runs: u32,
    jobs: usize,
    phase: &str,
) -> Result<Vec<Vec<fraglab_spec::result::RunResult>>, String> {
    let hooks = RunHooks {
        stop: &|_| false,
        done: &|_, _, _| Ok(()),
    };
    shape_results(
        run_many_hooked(specs, runs, jobs, phase, &hooks),
        specs.len(),
        runs,
    )
}

/// What [`run_many_hooked`] asks and tells its caller.
pub(crate) struct RunHooks<'a> {
    /// Asked before each run starts, with the number of runs running: true starts no more.
    pub stop: &'a (dyn Fn(usize) -> bool + Sync),
    /// Called as each run finishes successfully: (spec index, run index, result). An error
    /// becomes that run's error.
    pub done: &'a (dyn Fn(usize, usize, &fraglab_spec::result::RunResult) -> Result<(), String> + Sync),
}

/// The results in (spec, run) order; the first failed run's error. Every run must have run.
fn shape_results(
    mut all: Vec<Option<Result<fraglab_spec::result::RunResult, String>>>,
    nspecs: usize,
    runs: u32,
) -> Result<Vec<Vec<fraglab_spec::result::RunResult>>, String> {
    let mut res = Vec::new();
    for si in 0..nspecs {
        let mut v = Vec::new();
        for run in 0..runs as usize {
            v.push(all[si * runs as usize + run].take().expect("every run ran")?);
        }
        res.push(v);
    }
    Ok(res)
}

/// [`run_many`] with hooks: each entry of the result (spec-major) is `None` for a run that was
/// not started because `hooks.stop` said so.
pub(crate) fn run_many_hooked(
    specs: &[fraglab_spec::Spec],
    runs: u32,
    jobs: usize,
    phase: &str,
    hooks: &RunHooks,
) -> Vec<Option<Result<fraglab_spec::result::RunResult, String>>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let n = specs.len() * runs as usize;
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let started = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Result<fraglab_spec::result::RunResult, String>>>> =
        Mutex::new((0..n).map(|_| None).collect());
    // The bar: runs done, plus each running run's simulated time over its expected end, by
    // worker thread (`crate::progress::runs_fraction`).
    let bar = Mutex::new((crate::progress::Bar::new(), vec![0.0f64; jobs.min(n)]));
    let show = |bar: &Mutex<(crate::progress::Bar, Vec<f64>)>| {
        let (b, running) = &mut *bar.lock().expect("no panics while holding it");
        let d = done.load(Ordering::SeqCst);
        let f = crate::progress::runs_fraction(d, running, n);
        b.set(f, &format!("{d}/{n} runs done"));
    };
    let active = {
        let b = &mut bar.lock().expect("not poisoned").0;
        b.set_phase(phase);
        b.active()
    };
    std::thread::scope(|s| {
        for w in 0..jobs.min(n) {
            let (next, done, out, bar, show, started) = (&next, &done, &out, &bar, &show, &started);
            s.spawn(move || loop {
                if (hooks.stop)(started.load(Ordering::SeqCst) - done.load(Ordering::SeqCst)) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                started.fetch_add(1, Ordering::SeqCst);
                let (si, run) = (i / runs as usize, i % runs as usize);
                let mut spec = specs[si].clone();
                spec.run.seed = spec.run.seed.wrapping_add(run as u64);
                let r = if active {
                    fraglab_sim::timed::run_workload_with_progress(&spec, &mut |p| {
                        bar.lock().expect("no panics while holding it").1[w] =
                            crate::progress::timed_fraction(p).0;
                        show(bar);
                    })
                } else {
                    fraglab_sim::timed::run_workload(&spec)
                }
                .map_err(|e| e.to_string())
                .and_then(|r| {
                    (hooks.done)(i / runs as usize, i % runs as usize, &r)?;
                    Ok(r)
                });
                out.lock().expect("no panics while holding it")[i] = Some(r);
                // This run's share is cleared before it counts as done (never counted twice).
                bar.lock().expect("no panics while holding it").1[w] = 0.0;
                done.fetch_add(1, Ordering::SeqCst);
                if active {
                    show(bar);
                }
            });
        }
    });
    bar.into_inner().expect("threads joined").0.finish();
    out.into_inner().expect("threads joined")
}
