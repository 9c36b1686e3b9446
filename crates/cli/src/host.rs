//! `fraglab host ...` and `fraglab validate`: the host engine on this machine's live kernel.

use std::path::PathBuf;

use crate::compare::load_config;
use crate::{write_via_tmp, HostCmd};

/// `fraglab host ...`: a host error exits with its own code (after the knobs were restored).
pub fn host(cmd: HostCmd) -> Result<(), String> {
    match cmd {
        HostCmd::Run {
            spec,
            output,
            dry_run,
            floor,
            cap,
            dir,
            trace,
            trace_to,
            fit_memory,
        } => {
            if let (Some(p), false) = (&output, dry_run) {
                crate::check_output("-o", p)?;
            }
            if let Some(p) = &trace_to {
                crate::check_output("--trace-to", p)?;
            }
            let (_, spec) = load_config(&spec)?;
            let opts = fraglab_host::HostOptions {
                mem_floor_bytes: fraglab_spec::parse_size(&floor).map_err(|e| format!("--floor: {e}"))?,
                anon_cap_bytes: fraglab_spec::parse_size(&cap).map_err(|e| format!("--cap: {e}"))?,
                trace: trace || !spec.run.trace.is_empty(),
                trace_to,
                workdir: dir,
                fit_memory,
                ..Default::default()
            };
            run(&spec, &opts, dry_run, output)
        }
        HostCmd::Validate {
            spec,
            floor,
            format,
            fit_memory,
            dir,
            capture_snapshot,
        } => validate(spec, floor, format, fit_memory, dir, capture_snapshot),
        HostCmd::Snapshot { output, pages: true } => crate::snapshot::capture(output),
        HostCmd::Snapshot { output, pages: false } => snapshot(output),
        HostCmd::Restore { state_file } => restore(state_file),
        HostCmd::Record(a) => crate::record::record(a),
    }
}

/// Reports a host error and exits with its code.
pub(crate) fn fail(e: fraglab_host::HostError) -> ! {
    eprintln!("fraglab host: {e}");
    std::process::exit(e.exit_code())
}

/// `host run`: the plan (`--dry-run`), or the run's mmtests rows and its result JSON.
fn run(
    spec: &fraglab_spec::Spec,
    opts: &fraglab_host::HostOptions,
    dry_run: bool,
    output: Option<PathBuf>,
) -> Result<(), String> {
    if dry_run {
        let plan = fraglab_host::preflight(spec, opts).unwrap_or_else(|e| fail(e));
        print!("{plan}");
        return Ok(());
    }
    let r = fraglab_host::host_run(spec, opts).unwrap_or_else(|e| fail(e));
    println!(
        "# {}: {:.1} s on the live kernel (host engine), {} bursts",
        spec.file,
        r.duration_ns as f64 / 1e9,
        r.bursts.len()
    );
    if let Some(c) = &r.confounders {
        print!("{}", c.summary());
    }
    print!("{}", fraglab_spec::result::rows::mmtests_rows(&r));
    if let Some(p) = output {
        write_json(&p, serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?)?;
    }
    Ok(())
}

/// `validate`: the spec on the live kernel, then in the simulator, in the compare layout.
pub fn validate(
    spec: String,
    floor: String,
    format: String,
    fit_memory: bool,
    dir: Option<PathBuf>,
    capture_snapshot: bool,
) -> Result<(), String> {
    let (_, spec) = load_config(&spec)?;
    if capture_snapshot {
        // Issue 21 item 3: both engines start from this moment, the kernel right after the
        // capture, the simulator booted from it.
        let snap = spec.machine.snapshot.as_ref().ok_or_else(|| {
            format!(
                "{}: --capture-snapshot needs [machine] snapshot = \"FILE\" (where to capture)",
                spec.file
            )
        })?;
        crate::snapshot::capture(Some(snap.resolved.clone()))?;
    }
    let opts = fraglab_host::HostOptions {
        mem_floor_bytes: fraglab_spec::parse_size(&floor).map_err(|e| format!("--floor: {e}"))?,
        fit_memory,
        workdir: dir,
        ..Default::default()
    };
    // Progress by phase on a terminal (`crate::progress`): the kernel run by wall time over the
    // workload's duration, then the simulator run by simulated time.
    let mut bar = crate::progress::Bar::new();
    bar.set_phase("kernel run");
    let expected = std::time::Duration::from_nanos(spec.workload.as_ref().map_or(0, |w| w.duration_ns));
    let host = bar.during(expected, || fraglab_host::host_run(&spec, &opts));
    bar.finish();
    let host = host.unwrap_or_else(|e| fail(e));
    // The kernel run's confounders: before the table, or on standard error where standard
    // output is machine-readable (json, csv, markdown).
    let confounders = host.confounders.as_ref().map(|c| c.summary()).unwrap_or_default();
    if format != "table" {
        eprint!("{confounders}");
    }
    // --fit-memory: the simulator boots the zones the kernel had once fitted (offlining), else
    // the spec's own machine.
    let sim_spec = if fit_memory {
        fraglab_host::sim_spec_for(&spec, &host)
    } else {
        spec.clone()
    };
    let sim_zones = match (&host.fit_memory, &sim_spec.machine.zones) {
        (Some(f), Some(z)) if spec.machine.zones.is_none() => format!(
            "# simulator on the kernel's zones once fitted ({}): {}\n",
            f.method,
            z.iter()
                .map(|z| format!("{} {} pages managed", z.zone.name(), z.managed))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (Some(f), _) => format!(
            "# simulator on the spec's machine (the kernel was fitted by {})\n",
            f.method
        ),
        _ => String::new(),
    };
    if format != "table" {
        eprint!("{sim_zones}");
    }
    let mut bar = crate::progress::Bar::new();
    bar.set_phase("simulator run");
    let sim = fraglab_sim::timed::run_workload_with_progress(&sim_spec, &mut |p| bar.set_timed(p));
    bar.finish();
    let sim = sim.map_err(|e| e.to_string())?;
    let labels = vec!["kernel".to_string(), "simulator".to_string()];
    let report = fraglab_sim::compare::compare(&labels, &[vec![host], vec![sim]]);
    let text = match format.as_str() {
        "json" => serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n",
        "csv" => fraglab_sim::compare::format_csv(&report),
        "markdown" => fraglab_sim::compare::format_markdown(&report),
        _ => format!(
            "# fraglab validate {}: the kernel's figures, then the simulator's with its difference\n{confounders}{sim_zones}{}",
            spec.file,
            fraglab_sim::compare::format_table(&report)
        ),
    };
    print!("{text}");
    Ok(())
}

/// `host snapshot`: the one-shot capture as a result JSON, to `output` or standard output.
fn snapshot(output: Option<PathBuf>) -> Result<(), String> {
    if let Some(p) = &output {
        crate::check_output("-o", p)?;
    }
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

/// `host restore`: undoes the changes journalled in the given state file, or in every one found
/// in /run (left by a `host run` or `host record` killed with SIGKILL); half-written state
/// files of dead processes are removed.
fn restore(state_file: Option<PathBuf>) -> Result<(), String> {
    let files = match state_file {
        Some(f) => vec![f],
        None => fraglab_host::find_state_files(),
    };
    for t in fraglab_host::remove_stale_tmp_files(std::path::Path::new("/run")) {
        println!(
            "{}: removed (half-written by a killed run; nothing was applied after it)",
            t.display()
        );
    }
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

/// Writes a result JSON (and a final newline) through a temporary file.
fn write_json(path: &std::path::Path, json: String) -> Result<(), String> {
    write_via_tmp(path, json + "\n")
}
