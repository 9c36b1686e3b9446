//! `fraglab run`: one spec, its `[[op]]`s in order or its timed `[workload]`.

use std::io::Write;
use std::path::PathBuf;

use crate::{example, write_via_tmp};

/// Runs the spec file or built-in example; a timed run prints its report and writes its result
/// JSON to `output`. A list of operations prints what its `print` operations ask for to
/// standard output, or with an `output` ending in `.json` also writes its result JSON there
/// ([`fraglab_sim::run_ops_result`]), or writes the text to any other `output`.
/// `fraglab run`'s options besides the spec and the output.
#[derive(clap::Args, Debug)]
pub struct RunFlags {
    /// Override the spec's `[model] folio_mode` (skip_large, split_large,
    /// migrate_no_free_split, migrate_free_split).
    #[arg(long, value_parser = crate::parse_folio_mode)]
    pub folio_mode: Option<fraglab_spec::FolioMode>,
    /// A timed run: stream its whole ftrace text to this file (the spec's `run.trace` events
    /// and `fraglab_spec::DIFF_EVENTS`, with a `tracing_mark_write: fraglab: measure` line
    /// where a `{ measure = true }` step starts the measured part), the input of `fraglab
    /// trace diff`.
    #[arg(long)]
    pub trace_out: Option<PathBuf>,
    /// Run a scale model instead of the spec's machine: `1/K` (K a power of two, 2..=1024)
    /// divides the machine's memory (each zone's pages), CPUs and swap by K and the
    /// workload's sizes and parallelism so every per-GiB pressure is kept (times stay);
    /// the scaled machine boots normally, so watermarks, min_free_kbytes and PCP high are
    /// the kernel's for its size. A parameter K does not divide, a task program or a
    /// snapshot is refused. The report and result say "scale model 1/K"; the result's
    /// `scale.vmstat_delta_scaled_up` has the counters x K. As `[run] scale = "1/K"`.
    #[arg(long, value_parser = crate::parse_scale)]
    pub scale: Option<u32>,
    /// Fragmentation blame (docs/blame.md): attribute every event that makes a pageblock
    /// impure to the task or kernel thread that caused it; the result JSON gets a `blame`
    /// section (`fraglab blame RESULT.json` ranks it). As `[run] blame = true`.
    #[arg(long)]
    pub blame: bool,
    /// A timed run: write a checkpoint (docs/checkpoints.md), the whole simulated state
    /// after the first event at or after this simulated time (e.g. 540s), to
    /// `--checkpoint-file`; the run goes on unchanged. As `[run] checkpoint_at`.
    #[arg(long, value_parser = crate::parse_duration_arg)]
    pub checkpoint_at: Option<u64>,
    /// Where `--checkpoint-at` writes (default: the spec's name with .ckpt, beside it).
    #[arg(long, requires = "checkpoint_at")]
    pub checkpoint_file: Option<PathBuf>,
    /// Continue from a checkpoint instead of booting (docs/checkpoints.md): the spec must be
    /// the one that wrote it, except its knobs and [model] policy switches. As `[machine]
    /// checkpoint`.
    #[arg(long)]
    pub from_checkpoint: Option<PathBuf>,
}

pub fn run(
    spec: Option<String>,
    ex: Option<String>,
    output: Option<PathBuf>,
    flags: RunFlags,
) -> Result<(), String> {
    let RunFlags {
        folio_mode,
        trace_out,
        scale,
        blame,
        checkpoint_at,
        checkpoint_file,
        from_checkpoint,
    } = flags;
    if let Some(p) = &output {
        crate::check_output("-o", p)?;
    }
    if let Some(p) = &trace_out {
        crate::check_output("--trace-out", p)?;
    }
    let spec = match (spec, ex) {
        // A file that exists is read as it is; otherwise the argument may carry overrides or
        // name an example, as a configuration of `compare` does.
        (Some(arg), _)
            if std::path::Path::new(&arg).exists() || !(arg.contains('@') || arg.starts_with("example:")) =>
        {
            fraglab_spec::load_spec(std::path::Path::new(&arg)).map_err(|e| e.to_string())?
        }
        (Some(arg), _) => fraglab_sim::compare::load_config(&arg)?.1,
        (None, Some(name)) => fraglab_spec::parse_spec(example(&name)?, &format!("examples/{name}.toml"))
            .map_err(|e| e.to_string())?,
        (None, None) => return Err(run_usage()),
    };
    crate::warn_spec(&spec);
    let mut spec = crate::scale_by_flag(spec, scale)?;
    if let Some(m) = folio_mode {
        spec.model.folio_mode = m;
    }
    if blame {
        if spec.workload.is_none() {
            return Err("--blame: the spec has no timed [workload] (blame covers timed runs)".into());
        }
        spec.run.blame = true;
    }
    if (checkpoint_at.is_some() || from_checkpoint.is_some()) && spec.workload.is_none() {
        return Err("--checkpoint-at, --from-checkpoint: the spec has no timed [workload] (checkpoints are of timed runs)".into());
    }
    if let Some(at_ns) = checkpoint_at {
        let file = checkpoint_file.unwrap_or_else(|| fraglab_spec::default_checkpoint_file(&spec.file));
        spec.run.checkpoint = Some(fraglab_spec::CheckpointOut { at_ns, file, line: 0 });
    }
    if let Some(p) = &from_checkpoint {
        spec.machine.checkpoint = Some(crate::checkpoint_in(p));
    }
    if trace_out.is_some() && spec.workload.is_none() {
        return Err("--trace-out: the spec has no timed [workload] to trace".into());
    }
    let text = if spec.workload.is_some() {
        // A timed run: the report goes to stdout, the JSON result to -o.
        let (result, report) = timed(&spec, trace_out.as_deref())?;
        match output {
            Some(path) => {
                let json = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
                write_via_tmp(&path, json + "\n")?;
                print!("{report}");
                return checkpoint_written(&spec, &result);
            }
            None => {
                print_to_stdout(&report)?;
                return checkpoint_written(&spec, &result);
            }
        }
    } else if output.as_deref().is_some_and(is_json) {
        // A timeless run with `-o x.json`: the result JSON (the timed runs' schema, the printed
        // text in `printed`) to the file, the text to stdout.
        let path = output.expect("checked");
        let mut bar = crate::progress::Bar::new();
        let r = fraglab_sim::timeless::run_ops_result_with_progress(&spec, &mut |done, total| {
            bar.set(done as f64 / total as f64, &format!("{done}/{total} operations"))
        });
        bar.finish();
        let result = r.map_err(|e| e.to_string())?;
        let json = serde_json::to_string_pretty(&result).map_err(|e| e.to_string())?;
        write_via_tmp(&path, json + "\n")?;
        return print_to_stdout(result.printed.as_deref().unwrap_or_default());
    } else {
        // A timeless run: a bar of operations done on a terminal.
        let mut bar = crate::progress::Bar::new();
        let r = fraglab_sim::timeless::run_ops_with_progress(&spec, &mut |done, total| {
            bar.set(done as f64 / total as f64, &format!("{done}/{total} operations"))
        });
        bar.finish();
        r.map_err(|e| e.to_string())?
    };
    match output {
        // Written to a temporary file and renamed, so nothing is half-written.
        Some(path) => write_via_tmp(&path, text),
        None => print_to_stdout(&text),
    }
}

/// After a run that was to write a checkpoint: where it is, or an error if the run ended before
/// the checkpoint's time (its result is written and printed all the same).
fn checkpoint_written(spec: &fraglab_spec::Spec, r: &fraglab_spec::result::RunResult) -> Result<(), String> {
    let Some(want) = &spec.run.checkpoint else {
        return Ok(());
    };
    match &r.checkpoint {
        Some(c) => {
            eprintln!(
                "fraglab: checkpoint at t = {:.3} s written to {} ({:.1} MiB)",
                c.t_ns as f64 / 1e9,
                c.file,
                c.bytes as f64 / (1u64 << 20) as f64
            );
            Ok(())
        }
        None => Err(format!(
            "no checkpoint written: the run ended at {:.3} s, before checkpoint_at = {:.3} s",
            r.duration_ns as f64 / 1e9,
            want.at_ns as f64 / 1e9
        )),
    }
}

/// Whether `-o` names a JSON file (`.json`, any case): a timeless run then writes its result
/// JSON there; any other name gets the printed text, as before.
fn is_json(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// A timed run and its report: a header (simulated and wall time, seed), then the mmtests rows.
fn timed(
    spec: &fraglab_spec::Spec,
    trace_out: Option<&std::path::Path>,
) -> Result<(fraglab_spec::result::RunResult, String), String> {
    let t0 = std::time::Instant::now();
    let result = run_with_progress(spec, trace_out)?;
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
    if let Some(s) = &result.scale {
        report.push_str(&format!(
            "# {}: {} MiB, {} CPUs standing for {} MiB, {} CPUs; the rows are the scaled machine's own (raw), the result's scale.vmstat_delta_scaled_up has the counters x {}\n",
            s.label,
            s.memory_bytes >> 20,
            s.cpus,
            s.full_memory_bytes >> 20,
            s.full_cpus,
            s.factor
        ));
    }
    report.push_str(&fraglab_spec::result::rows::mmtests_rows(&result));
    Ok((result, report))
}

/// Writes `text` to standard output; a closed pipe (`fraglab run ... | head`) is not an error.
pub(crate) fn print_to_stdout(text: &str) -> Result<(), String> {
    let mut so = std::io::stdout().lock();
    if let Err(e) = so.write_all(text.as_bytes()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(format!("stdout: {e}"));
        }
    }
    Ok(())
}

/// A timed run with a progress bar on a terminal (simulated time against the workload's
/// expected end, `crate::progress`); quiet otherwise (CI).
/// With `trace_out`, the run's whole trace text is streamed to that file
/// ([`fraglab_sim::timed::run_workload_trace_to`]).
fn run_with_progress(
    spec: &fraglab_spec::Spec,
    trace_out: Option<&std::path::Path>,
) -> Result<fraglab_spec::result::RunResult, String> {
    let mut at_end = crate::host_mem_print();
    let mut bar = crate::progress::Bar::new();
    let r = match trace_out {
        None => fraglab_sim::timed::run_workload_inspect(spec, &mut |p| bar.set_timed(p), &mut at_end),
        Some(path) => {
            let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let out = Box::new(std::io::BufWriter::with_capacity(1 << 20, f));
            let name = path.display().to_string();
            fraglab_sim::timed::run_workload_trace_to(
                spec,
                out,
                &name,
                &mut |p| bar.set_timed(p),
                &mut at_end,
            )
        }
    };
    bar.finish();
    r.map_err(|e| e.to_string())
}

/// `--folio-mode`: one of [`fraglab_spec::FolioMode::ALL`] by name.
pub fn parse_folio_mode(s: &str) -> Result<fraglab_spec::FolioMode, String> {
    fraglab_spec::FolioMode::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = fraglab_spec::FolioMode::ALL.iter().map(|m| m.name()).collect();
        format!("{s:?} is not one of {}", names.join(", "))
    })
}

/// What `fraglab run` without a spec says: its two forms and the built-in examples.
pub fn run_usage() -> String {
    let mut s = String::from(
        "run needs a spec file or a built-in example\n\n\
         Usage: fraglab run <SPEC> [OPTIONS]\n       fraglab run --example <NAME> [OPTIONS]\n\n\
         Built-in examples (`fraglab examples NAME` prints one):\n",
    );
    for (name, text) in fraglab_spec::examples::EXAMPLES {
        let desc = text
            .lines()
            .find_map(|l| l.strip_prefix("description = "))
            .unwrap_or("")
            .trim_matches('"');
        s.push_str(&format!("  {name:24} {desc}\n"));
    }
    s.push_str("\nFor more information, try 'fraglab run --help'.");
    s
}
