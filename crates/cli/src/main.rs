//! `fraglab`: simulate the physical memory manager of Linux 6.18.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;

/// The experiments' specs (`experiments/*/`), for `fraglab bench`.
const EXPERIMENTS: &[(&str, &str)] = &[
    (
        "defrag-mode (seed 001)",
        include_str!("../../../experiments/defrag-mode/kbuild-thp.toml"),
    ),
    (
        "costly-pagecache (seed 002)",
        include_str!("../../../experiments/costly-pagecache/pgbench.toml"),
    ),
    (
        "folio-compaction (seed 000)",
        include_str!("../../../experiments/folio-compaction/vmscal-thp.toml"),
    ),
];

/// Built-in example specs, shipped in the binary (the files live in `examples/`).
const EXAMPLES: &[(&str, &str)] = &[
    (
        "claim-steal-merge",
        include_str!("../../../examples/claim-steal-merge.toml"),
    ),
    (
        "kbuild-thp-burst",
        include_str!("../../../examples/kbuild-thp-burst.toml"),
    ),
    (
        "pgbench-checkpoints",
        include_str!("../../../examples/pgbench-checkpoints.toml"),
    ),
];

#[derive(Parser)]
#[command(
    name = "fraglab",
    version,
    about = "Simulate Linux 6.18 physical memory management: buddy allocator, migratetypes, fallbacks"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum HostCmd {
    /// Run a spec's workload on the live kernel and write the simulator's result schema
    /// (engine "host"). Knobs are restored on exit, error, SIGINT/SIGTERM and panic.
    Run {
        /// The spec: a file or `example:NAME`, optionally with overrides as in `compare`
        /// (`SPEC@vm.defrag_mode=1,workload.thpchallenge.start=90s`).
        spec: String,
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Print what would change (knobs, memory) and exit.
        #[arg(long)]
        dry_run: bool,
        /// Refuse or stop when MemAvailable would fall under this.
        #[arg(long, default_value = "3GiB")]
        floor: String,
        /// Refuse a spec with more anonymous memory than this.
        #[arg(long, default_value = "10GiB")]
        cap: String,
        /// Scratch directory for the spec's files (created and removed).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Count the compaction tracepoints and kmem:mm_page_alloc_extfrag during the run.
        #[arg(long)]
        trace: bool,
        /// Hold MemTotal minus the spec's machine.memory in a hugetlb pool for the run
        /// (vm.nr_hugepages, restored after), so memory pressure comes at the spec's size.
        #[arg(long)]
        fit_memory: bool,
    },
    /// Capture /proc/{buddyinfo,pagetypeinfo,zoneinfo,vmstat} and every knob as a result file.
    Snapshot {
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Run a spec on both engines (the live kernel, then the simulator) and print, row by row,
    /// kernel against simulator with the relative difference (the compare layout, kernel first).
    Validate {
        /// The spec: a file or `example:NAME`, optionally with overrides as in `compare`.
        spec: String,
        /// Refuse or stop when MemAvailable would fall under this.
        #[arg(long, default_value = "3GiB")]
        floor: String,
        #[arg(long, default_value = "table", value_parser = ["table", "markdown", "json", "csv"])]
        format: String,
        /// As `host run --fit-memory`.
        #[arg(long)]
        fit_memory: bool,
        /// Scratch directory for the spec's files (created and removed).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Restore the knobs recorded in a state file left by a killed run
    /// (/run/fraglab-host-PID.restore); without a file, every such file found.
    Restore { state_file: Option<PathBuf> },
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a spec: its operations in order, printing what its `print` operations ask for.
    Run {
        /// The spec file (TOML).
        #[arg(required_unless_present = "example", conflicts_with = "example")]
        spec: Option<PathBuf>,
        /// Run a built-in example instead (see `fraglab examples`).
        #[arg(long)]
        example: Option<String>,
        /// Write the output to this file instead of standard output (written only on success).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Override the spec's `[model] folio_mode` (skip_large, split_large,
        /// migrate_no_free_split, migrate_free_split).
        #[arg(long, value_parser = parse_folio_mode)]
        folio_mode: Option<fraglab_spec::FolioMode>,
    },
    /// Run specs N times each (different seeds, in parallel) and print the rows of
    /// published-results.md §5.1 and the workloads' own rows in mmtests' compare format.
    ///
    /// Each CONFIG is `[LABEL=]SPEC[@KEY=VALUE,...]`: SPEC is a file or `example:NAME`; KEY is a
    /// knob name (`vm.defrag_mode`) or `model.X`, `run.X`, `machine.X`, `cost.X`,
    /// `workload.X`, or a path into a workload's tables (`workload.kbuild.jobs_parallel` sets
    /// it in every `[[workload.kbuild]]`, `workload.thp_burst[1].size` in the second only).
    /// The first CONFIG is the baseline.
    Compare {
        #[arg(required = true)]
        configs: Vec<String>,
        /// Simulations per configuration (seeds: the spec's seed, +1, +2, ...).
        #[arg(long, default_value_t = 1)]
        runs: u32,
        /// Simulations run at once (default: the CPUs available).
        #[arg(long)]
        jobs: Option<usize>,
        #[arg(long, default_value = "table", value_parser = ["table", "markdown", "json", "csv"])]
        format: String,
        /// Write the table to this file (written only on success).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Also write every run's result JSON into this directory (LABEL-runN.json).
        #[arg(long)]
        results_dir: Option<PathBuf>,
    },
    /// Write one self-contained HTML report (no network needed to open it) of run results
    /// (`fraglab run ... -o result.json`, `fraglab compare --results-dir`), with plots, and the
    /// compare table of `fraglab compare --format json -o compare.json` if given.
    Report {
        #[arg(required = true)]
        results: Vec<PathBuf>,
        #[arg(long)]
        compare: Option<PathBuf>,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Run a spec on both engines (the live kernel, then the simulator) and print them side by
    /// side (the same as `fraglab host validate`).
    Validate {
        /// The spec: a file or `example:NAME`, optionally with overrides as in `compare`.
        spec: String,
        #[arg(long, default_value = "3GiB")]
        floor: String,
        #[arg(long, default_value = "table", value_parser = ["table", "markdown", "json", "csv"])]
        format: String,
        /// As `host run --fit-memory`.
        #[arg(long)]
        fit_memory: bool,
        /// Scratch directory for the spec's files (created and removed).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The host engine: run a spec on this machine's live kernel (root), capture its state, or
    /// restore knobs after a killed run.
    Host {
        #[command(subcommand)]
        cmd: HostCmd,
    },
    /// The standard performance figures: simulated seconds per wall second of each experiment
    /// (one configuration, run once), allocate/free operations per second, compaction pfns
    /// scanned per second, host memory per simulated page.
    Bench {
        /// Cap each experiment at this much simulated time (e.g. 30s) for a quick look.
        #[arg(long)]
        max_sim: Option<String>,
    },
    /// List the built-in examples, or print one (`fraglab examples NAME`).
    Examples { name: Option<String> },
    /// List the kernel knobs a spec may set, with their kinds and defaults.
    Knobs,
    /// Boot a machine of the given size and report the model's host memory per simulated page.
    Footprint {
        /// RAM of the simulated machine, e.g. 24GiB or 1TiB.
        #[arg(long, default_value = "1TiB")]
        memory: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fraglab: {e}");
            ExitCode::FAILURE
        }
    }
}

fn example(name: &str) -> Result<&'static str, String> {
    EXAMPLES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let names: Vec<&str> = EXAMPLES.iter().map(|(n, _)| *n).collect();
            format!("no built-in example {name:?} (there are: {})", names.join(", "))
        })
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Run {
            spec,
            example: ex,
            output,
            folio_mode,
        } => {
            let mut spec = match (spec, ex) {
                (Some(path), _) => fraglab_spec::load_spec(&path).map_err(|e| e.to_string())?,
                (None, Some(name)) => {
                    fraglab_spec::parse_spec(example(&name)?, &format!("examples/{name}.toml"))
                        .map_err(|e| e.to_string())?
                }
                (None, None) => unreachable!("clap requires one"),
            };
            if let Some(m) = folio_mode {
                spec.model.folio_mode = m;
            }
            let text = if spec.workload.is_some() {
                // A timed run: the report goes to stdout, the JSON result to -o.
                let t0 = std::time::Instant::now();
                let result = run_with_progress(&spec)?;
                let wall = t0.elapsed().as_secs_f64();
                let sim = result.duration_ns as f64 / 1e9;
                let mut report = format!(
                    "# {}: {:.1} s simulated in {:.2} s ({:.0}x real time), seed {}\n",
                    spec.file,
                    sim,
                    wall,
                    sim / wall.max(1e-9),
                    result.seed
                );
                report.push_str(&fraglab_spec::result::rows::mmtests_rows(&result));
                match output {
                    Some(path) => {
                        let json = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
                        let tmp = path.with_extension("tmp-fraglab");
                        std::fs::write(&tmp, json + "\n").map_err(|e| format!("{}: {e}", tmp.display()))?;
                        std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
                        print!("{report}");
                        return Ok(());
                    }
                    None => report,
                }
            } else {
                fraglab_sim::run_ops(&spec).map_err(|e| e.to_string())?
            };
            match output {
                Some(path) => {
                    // Write to a temporary file and rename, so nothing is half-written.
                    let tmp = path.with_extension("tmp-fraglab");
                    std::fs::write(&tmp, &text).map_err(|e| format!("{}: {e}", tmp.display()))?;
                    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
                }
                None => {
                    let mut so = std::io::stdout().lock();
                    if let Err(e) = so.write_all(text.as_bytes()) {
                        if e.kind() != std::io::ErrorKind::BrokenPipe {
                            return Err(format!("stdout: {e}"));
                        }
                    }
                }
            }
            Ok(())
        }
        Cmd::Compare {
            configs,
            runs,
            jobs,
            format,
            output,
            results_dir,
        } => {
            if runs == 0 {
                return Err("--runs must be at least 1".into());
            }
            let mut labels = Vec::new();
            let mut specs = Vec::new();
            for c in &configs {
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
            let jobs = jobs
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
                .max(1);
            let t0 = std::time::Instant::now();
            let results = run_many(&specs, runs, jobs)?;
            let wall = t0.elapsed().as_secs_f64();
            if let Some(dir) = &results_dir {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                for (label, rs) in labels.iter().zip(&results) {
                    for (i, r) in rs.iter().enumerate() {
                        let path = dir.join(format!("{label}-run{}.json", i + 1));
                        let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
                        std::fs::write(&path, json + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
                    }
                }
            }
            let report = fraglab_sim::compare::compare(&labels, &results);
            let text = match format.as_str() {
                "json" => serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n",
                "csv" => fraglab_sim::compare::format_csv(&report),
                "markdown" => fraglab_sim::compare::format_markdown(&report),
                _ => {
                    let sim: f64 = results.iter().flatten().map(|r| r.duration_ns as f64 / 1e9).sum();
                    format!(
                        "# fraglab compare: {} configurations x {runs} runs, {:.0} s simulated in {:.1} s wall ({jobs} jobs)\n{}",
                        labels.len(),
                        sim,
                        wall,
                        fraglab_sim::compare::format_table(&report)
                    )
                }
            };
            match output {
                Some(path) => {
                    let tmp = path.with_extension("tmp-fraglab");
                    std::fs::write(&tmp, &text).map_err(|e| format!("{}: {e}", tmp.display()))?;
                    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;
                }
                None => print!("{text}"),
            }
            Ok(())
        }
        Cmd::Report {
            results,
            compare,
            output,
        } => {
            let mut runs = Vec::new();
            for p in &results {
                let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                let r: fraglab_spec::result::RunResult = serde_json::from_str(&text)
                    .map_err(|e| format!("{}: not a fraglab result: {e}", p.display()))?;
                let label = p
                    .file_stem()
                    .map_or(p.display().to_string(), |s| s.to_string_lossy().into_owned());
                runs.push((label, r));
            }
            let cmp = match &compare {
                Some(p) => {
                    let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
                    Some(
                        serde_json::from_str::<fraglab_spec::result::CompareReport>(&text).map_err(|e| {
                            format!("{}: not a compare report (--format json): {e}", p.display())
                        })?,
                    )
                }
                None => None,
            };
            let html = fraglab_report::render_html(&runs, cmp.as_ref());
            let tmp = output.with_extension("tmp-fraglab");
            std::fs::write(&tmp, html).map_err(|e| format!("{}: {e}", tmp.display()))?;
            std::fs::rename(&tmp, &output).map_err(|e| format!("{}: {e}", output.display()))?;
            Ok(())
        }
        Cmd::Host { cmd } => host(cmd),
        Cmd::Validate {
            spec,
            floor,
            format,
            fit_memory,
            dir,
        } => host(HostCmd::Validate {
            spec,
            floor,
            format,
            fit_memory,
            dir,
        }),
        Cmd::Bench { max_sim } => {
            let mut rows = Vec::new();
            for (label, text) in EXPERIMENTS {
                let text = match &max_sim {
                    Some(d) => fraglab_spec::apply_overrides(
                        text,
                        &[("workload.duration".into(), format!("{d:?}"))],
                    )?,
                    None => text.to_string(),
                };
                let spec = fraglab_spec::parse_spec(&text, label).map_err(|e| e.to_string())?;
                rows.push(bench::sim_ratio(label, &spec)?);
                eprint!(
                    "{}",
                    bench::format(&rows[rows.len() - 1..])
                        .lines()
                        .nth(1)
                        .unwrap_or("")
                        .to_string()
                        + "\n"
                );
            }
            rows.extend(bench::core_rows());
            print!("{}", bench::format(&rows));
            Ok(())
        }
        Cmd::Examples { name: Some(name) } => {
            print!("{}", example(&name)?);
            Ok(())
        }
        Cmd::Examples { name: None } => {
            for (name, text) in EXAMPLES {
                let desc = text
                    .lines()
                    .find_map(|l| l.strip_prefix("description = "))
                    .unwrap_or("")
                    .trim_matches('"');
                println!("{name:24} {desc}");
            }
            Ok(())
        }
        Cmd::Footprint { memory } => {
            let bytes = fraglab_spec::parse_size(&memory).map_err(|e| format!("--memory: {e}"))?;
            let before = peak_rss_kib();
            let machine = fraglab_mm::MachineConfig::x86_64(bytes, true, 2).map_err(|e| e.to_string())?;
            let mm =
                fraglab_mm::Mm::new(&machine, fraglab_mm::Tunables::default()).map_err(|e| e.to_string())?;
            let pages = mm.end_pfn() as f64;
            println!("simulated machine: {memory} ({} pfns spanned)", mm.end_pfn());
            println!(
                "model state (per-page arrays + pageblock bits): {} bytes = {:.2} bytes per page",
                mm.host_bytes(),
                mm.host_bytes() as f64 / pages
            );
            if let (Some(b), Some(a)) = (before, peak_rss_kib()) {
                println!(
                    "process peak RSS grew by {} KiB = {:.2} bytes per page (VmHWM)",
                    a - b,
                    (a - b) as f64 * 1024.0 / pages
                );
            }
            Ok(())
        }
        Cmd::Knobs => {
            println!("{:<52} {:<40} {:<16} description", "knob", "values", "default");
            for k in fraglab_spec::KNOBS {
                let used = if k.read.is_read() {
                    ""
                } else {
                    " [not read by the model yet]"
                };
                println!(
                    "{:<52} {:<40} {:<16} {}{used}",
                    k.name,
                    k.kind.expected(),
                    k.default,
                    k.doc
                );
            }
            Ok(())
        }
    }
}

/// A timed run with a progress bar on a terminal (simulated seconds); quiet otherwise (CI).
fn run_with_progress(spec: &fraglab_spec::Spec) -> Result<fraglab_spec::result::RunResult, String> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return fraglab_sim::timed::run_workload(spec).map_err(|e| e.to_string());
    }
    let end = spec.workload.as_ref().map_or(0, |w| w.duration_ns) / 1_000_000_000;
    let bar = indicatif::ProgressBar::new(end.max(1));
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} simulated s (at most)",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let r = fraglab_sim::timed::run_workload_with_progress(spec, &mut |now, _| {
        bar.set_position(now / 1_000_000_000)
    });
    bar.finish_and_clear();
    r.map_err(|e| e.to_string())
}

fn write_json(path: &std::path::Path, json: String) -> Result<(), String> {
    let tmp = path.with_extension("tmp-fraglab");
    std::fs::write(&tmp, json + "\n").map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `fraglab host ...`: a host error exits with its own code (after the knobs were restored).
fn host(cmd: HostCmd) -> Result<(), String> {
    let fail = |e: fraglab_host::HostError| -> ! {
        eprintln!("fraglab host: {e}");
        std::process::exit(e.exit_code())
    };
    match cmd {
        HostCmd::Run {
            spec,
            output,
            dry_run,
            floor,
            cap,
            dir,
            trace,
            fit_memory,
        } => {
            let (_, spec) = load_config(&spec)?;
            let opts = fraglab_host::HostOptions {
                mem_floor_bytes: fraglab_spec::parse_size(&floor).map_err(|e| format!("--floor: {e}"))?,
                anon_cap_bytes: fraglab_spec::parse_size(&cap).map_err(|e| format!("--cap: {e}"))?,
                trace: trace || !spec.run.trace.is_empty(),
                workdir: dir,
                fit_memory,
                ..Default::default()
            };
            if dry_run {
                let plan = fraglab_host::preflight(&spec, &opts).unwrap_or_else(|e| fail(e));
                print!("{plan}");
                return Ok(());
            }
            let r = fraglab_host::host_run(&spec, &opts).unwrap_or_else(|e| fail(e));
            println!(
                "# {}: {:.1} s on the live kernel (host engine), {} bursts",
                spec.file,
                r.duration_ns as f64 / 1e9,
                r.bursts.len()
            );
            print!("{}", fraglab_spec::result::rows::mmtests_rows(&r));
            if let Some(p) = output {
                write_json(&p, serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?)?;
            }
            Ok(())
        }
        HostCmd::Validate {
            spec,
            floor,
            format,
            fit_memory,
            dir,
        } => {
            let (_, spec) = load_config(&spec)?;
            let opts = fraglab_host::HostOptions {
                mem_floor_bytes: fraglab_spec::parse_size(&floor).map_err(|e| format!("--floor: {e}"))?,
                fit_memory,
                workdir: dir,
                ..Default::default()
            };
            let host = fraglab_host::host_run(&spec, &opts).unwrap_or_else(|e| fail(e));
            let sim = fraglab_sim::timed::run_workload(&spec).map_err(|e| e.to_string())?;
            let labels = vec!["kernel".to_string(), "simulator".to_string()];
            let report = fraglab_sim::compare::compare(&labels, &[vec![host], vec![sim]]);
            let text = match format.as_str() {
                "json" => serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n",
                "csv" => fraglab_sim::compare::format_csv(&report),
                "markdown" => fraglab_sim::compare::format_markdown(&report),
                _ => format!(
                    "# fraglab validate {}: the kernel's figures, then the simulator's with its difference\n{}",
                    spec.file,
                    fraglab_sim::compare::format_table(&report)
                ),
            };
            print!("{text}");
            Ok(())
        }
        HostCmd::Snapshot { output } => {
            let r = fraglab_host::snapshot().unwrap_or_else(|e| fail(e));
            let json = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?;
            match output {
                Some(p) => write_json(&p, json),
                None => {
                    println!("{json}");
                    Ok(())
                }
            }
        }
        HostCmd::Restore { state_file } => {
            let files = match state_file {
                Some(f) => vec![f],
                None => fraglab_host::find_state_files(),
            };
            if files.is_empty() {
                println!("no state file of a killed run found");
            }
            for f in files {
                let done = fraglab_host::restore_from_state_file(&f).unwrap_or_else(|e| fail(e));
                for (n, v) in done {
                    println!("{}: restored {n} = {v}", f.display());
                }
            }
            Ok(())
        }
    }
}

/// A compare configuration `[LABEL=]SPEC[@KEY=VALUE,...]` → (label, spec).
fn load_config(c: &str) -> Result<(String, fraglab_spec::Spec), String> {
    let (label, rest) = match c.split_once('=') {
        Some((l, r))
            if !l.is_empty()
                && l.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
                && !l.contains('@') =>
        {
            (Some(l.to_string()), r)
        }
        _ => (None, c),
    };
    let (file, ovr) = match rest.split_once('@') {
        Some((f, o)) => (f, o),
        None => (rest, ""),
    };
    let mut overrides = Vec::new();
    for kv in ovr.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("{c}: override {kv:?} is not KEY=VALUE"))?;
        overrides.push((k.trim().to_string(), v.trim().to_string()));
    }
    let spec = match file.strip_prefix("example:") {
        Some(name) => {
            let text =
                fraglab_spec::apply_overrides(example(name)?, &overrides).map_err(|e| format!("{c}: {e}"))?;
            fraglab_spec::parse_spec(&text, &format!("examples/{name}.toml [{ovr}]"))
                .map_err(|e| e.to_string())?
        }
        None => {
            fraglab_spec::load_spec_with(std::path::Path::new(file), &overrides).map_err(|e| e.to_string())?
        }
    };
    let label = label.unwrap_or_else(|| {
        let stem = std::path::Path::new(file.strip_prefix("example:").unwrap_or(file))
            .file_stem()
            .map_or(file.to_string(), |s| s.to_string_lossy().into_owned());
        if ovr.is_empty() {
            stem
        } else {
            format!("{stem}@{ovr}")
        }
    });
    Ok((label, spec))
}

/// Runs every spec `runs` times (seed, seed + 1, ...) on `jobs` threads; the results are in
/// (spec, run) order whatever the scheduling, so the output is deterministic.
fn run_many(
    specs: &[fraglab_spec::Spec],
    runs: u32,
    jobs: usize,
) -> Result<Vec<Vec<fraglab_spec::result::RunResult>>, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let n = specs.len() * runs as usize;
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Result<fraglab_spec::result::RunResult, String>>>> =
        Mutex::new((0..n).map(|_| None).collect());
    let bar = {
        use std::io::IsTerminal;
        std::io::stderr().is_terminal().then(|| {
            let b = indicatif::ProgressBar::new(n as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} runs")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            b
        })
    };
    std::thread::scope(|s| {
        for _ in 0..jobs.min(n) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                let (si, run) = (i / runs as usize, i % runs as usize);
                let mut spec = specs[si].clone();
                spec.run.seed = spec.run.seed.wrapping_add(run as u64);
                let r = fraglab_sim::timed::run_workload(&spec).map_err(|e| e.to_string());
                out.lock().expect("no panics while holding it")[i] = Some(r);
                done.fetch_add(1, Ordering::SeqCst);
                if let Some(b) = &bar {
                    b.set_position(done.load(Ordering::SeqCst) as u64);
                }
            });
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut all = out.into_inner().expect("threads joined");
    let mut res = Vec::new();
    for si in 0..specs.len() {
        let mut v = Vec::new();
        for run in 0..runs as usize {
            v.push(all[si * runs as usize + run].take().expect("every run ran")?);
        }
        res.push(v);
    }
    Ok(res)
}

fn parse_folio_mode(s: &str) -> Result<fraglab_spec::FolioMode, String> {
    fraglab_spec::FolioMode::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = fraglab_spec::FolioMode::ALL.iter().map(|m| m.name()).collect();
        format!("{s:?} is not one of {}", names.join(", "))
    })
}

/// VmHWM of this process from /proc/self/status, in KiB (Linux only).
fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
