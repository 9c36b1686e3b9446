//! `fraglab host record` (a live allocation trace into a trace file) and `fraglab trace info`
//! (a trace file's summary), issue 21 item 4.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use std::collections::BTreeMap;

use fraglab_state::trace::{event_name, lost_events_line, TraceReader};

/// `fraglab host record`.
#[derive(Args)]
pub struct RecordArgs {
    /// The trace file to write (written through TRACE.partial, renamed when complete).
    #[arg(short, long)]
    output: PathBuf,
    /// How long to record (e.g. 30s, 2min; a plain number is seconds). Default: 30s without a
    /// command; with one, until it exits (a duration then ends it with SIGTERM).
    #[arg(long)]
    duration: Option<String>,
    /// Comma-separated events, `group:name` or `group:*` (default: kmem page events,
    /// compaction:*, the vmscan events the model has).
    #[arg(long, value_delimiter = ',')]
    events: Vec<String>,
    /// Per-CPU trace buffer of the private tracefs instance (KiB). Default: sized from the
    /// events' rate in a half-second sample before the start (8 s of it, 32 MiB to 1 GiB per
    /// CPU, at most 1/16 of MemAvailable in all).
    #[arg(long)]
    buffer_kb: Option<u64>,
    /// Do not embed a snapshot of the physical memory taken at the start.
    #[arg(long)]
    no_snapshot: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// The command to run while recording (after `--`).
    #[arg(last = true)]
    command: Vec<String>,
}

/// `fraglab trace ...`.
#[derive(Subcommand)]
pub enum TraceCmd {
    /// A trace file's summary: header, events per name (counted by streaming the lines),
    /// duration, lost events, whether a snapshot is embedded. Plain ftrace text is read too.
    Info {
        trace: PathBuf,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Where two traces part (issue 32): compaction runs and reclaim episodes side by side,
    /// deferrals, kcompactd wakes, extfrag counts, DAMON's pageout per time bin (regions and
    /// bytes applied, pages reclaimed), histograms, totals and their ratio, the first and the
    /// largest divergence, one labelled line each. Inputs: trace files or plain ftrace
    /// text with the events of `fraglab_spec::DIFF_EVENTS` (the simulator's `run --trace-out`,
    /// the host engine's trace file). Each side is compared from its `tracing_mark_write:
    /// fraglab: measure` line when it has one, else from `--kernel-from`/`--sim-from`, else whole.
    Diff {
        kernel: PathBuf,
        sim: PathBuf,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Compare the kernel trace from this timestamp (seconds of its trace clock, as printed).
        #[arg(long)]
        kernel_from: Option<f64>,
        /// Compare the simulator's trace from this timestamp (seconds).
        #[arg(long)]
        sim_from: Option<f64>,
        /// Episodes of each kind listed side by side (0: all, up to the kept maximum).
        #[arg(long, default_value_t = 20)]
        episodes: usize,
        /// The DAMON section's time bin in seconds (default 5: S2's aggregation interval).
        #[arg(long, default_value_t = 5.0)]
        damon_bin: f64,
    },
}

/// `--duration`: a duration with its unit (`parse_duration`), or a plain number of seconds
/// (`--duration 60`, as `timeout` and `perf record -- sleep` users type it).
fn parse_record_duration(d: &str) -> Result<u64, String> {
    let t = d.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return fraglab_spec::parse_duration(&format!("{t}s"));
    }
    fraglab_spec::parse_duration(t)
}

/// `fraglab host record`: a host error exits with its own code (after the instance was removed).
pub fn record(a: RecordArgs) -> Result<(), String> {
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_record_duration(d).map(Duration::from_nanos))
        .transpose()
        .map_err(|e| format!("--duration: {e}"))?;
    let opts = fraglab_host::record::RecordOptions {
        output: a.output,
        duration,
        events: a.events,
        buffer_kb: a.buffer_kb,
        snapshot: !a.no_snapshot,
        command: a.command,
        progress: !a.quiet,
    };
    match fraglab_host::record::record(&opts) {
        Ok(h) => {
            if let Some(sig) = h.interrupted_by {
                eprintln!(
                    "fraglab host record: interrupted by signal {sig}; {} written with the events up to then",
                    opts.output.display()
                );
                std::process::exit(128 + sig);
            }
            if !opts.command.is_empty() && h.workload_status != Some(0) {
                eprintln!(
                    "fraglab host record: the command exited with {}",
                    h.workload_status
                        .map_or("a signal".to_string(), |c| format!("status {c}"))
                );
            }
            Ok(())
        }
        Err(e) => {
            eprintln!("fraglab host record: {e}");
            std::process::exit(e.exit_code())
        }
    }
}

/// `fraglab trace ...`.
pub fn trace(cmd: TraceCmd) -> Result<(), String> {
    match cmd {
        TraceCmd::Info { trace, json } => info(trace, json),
        TraceCmd::Diff {
            kernel,
            sim,
            json,
            kernel_from,
            sim_from,
            episodes,
            damon_bin,
        } => {
            let secs = |flag: &str, s: Option<f64>| -> Result<Option<u64>, String> {
                match s {
                    None => Ok(None),
                    Some(x) if x.is_finite() && x >= 0.0 => Ok(Some((x * 1e9).round() as u64)),
                    Some(x) => Err(format!("{flag}: {x} is not a timestamp (seconds, >= 0)")),
                }
            };
            let opts = fraglab_sim::tracediff::DiffOptions {
                kernel_from_ns: secs("--kernel-from", kernel_from)?,
                sim_from_ns: secs("--sim-from", sim_from)?,
                episodes,
                damon_bin_ns: match secs("--damon-bin", Some(damon_bin))? {
                    Some(0) | None => {
                        return Err(format!(
                            "--damon-bin: {damon_bin} is not a bin width (seconds, > 0)"
                        ))
                    }
                    Some(ns) => ns,
                },
            };
            let d = fraglab_sim::tracediff::diff_files(&kernel, &sim, &opts)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&d).map_err(|e| e.to_string())?);
            } else {
                print!("{}", fraglab_sim::tracediff::render_text(&d));
            }
            Ok(())
        }
    }
}

/// An event the model's trace parser reads (`fraglab_spec::TRACE_EVENTS`): a line of it the
/// parser refuses is malformed.
fn model_event(name: &str) -> bool {
    fraglab_spec::TRACE_EVENTS
        .iter()
        .any(|e| e.split_once(':').is_some_and(|(_, n)| n == name))
}

/// What `trace info` counts in one streamed pass over a trace.
#[derive(Default)]
struct InfoCounts {
    /// Per event name: its lines, and how many of them the model's parser reads
    /// (`fraglab_mm::trace::parse_trace_line`, what the replay uses).
    per_name: BTreeMap<String, (u64, u64)>,
    /// Lines that are no event line, and the events `CPU:N [LOST M EVENTS]` lines report lost.
    other: u64,
    lost_lines: u64,
    /// Lines of events the model reads that its parser refused, and the first of them named by
    /// line and byte offset.
    malformed: u64,
    first_malformed: Option<String>,
}

/// Counts the lines of `r`; the reader's errors (which name the file, the line and its byte
/// offset) end the count.
fn count_info(r: &mut TraceReader) -> Result<InfoCounts, String> {
    let mut c = InfoCounts::default();
    while let Some(l) = r.next_line().map_err(|e| e.to_string())? {
        if let Some(n) = lost_events_line(&l) {
            c.lost_lines += n;
        } else if let Some(e) = event_name(&l) {
            let n = c.per_name.entry(e.to_string()).or_default();
            n.0 += 1;
            if fraglab_mm::trace::parse_trace_line(&l).is_some() {
                n.1 += 1;
            } else if model_event(e) {
                c.malformed += 1;
                if c.first_malformed.is_none() {
                    c.first_malformed = Some(format!(
                        "line {} (byte offset {}{}): {}",
                        r.line_no(),
                        r.offset(),
                        if r.is_container() {
                            ", of its TEXT section"
                        } else {
                            ""
                        },
                        l.chars().take(200).collect::<String>()
                    ));
                }
            }
        } else {
            c.other += 1;
        }
    }
    Ok(c)
}

fn info(path: PathBuf, json: bool) -> Result<(), String> {
    let mut r = TraceReader::open_without_snapshot(&path).map_err(|e| e.to_string())?;
    let container = r.is_container();
    let h = r.header().clone();
    let c = count_info(&mut r)?;
    let counts: BTreeMap<String, u64> = c.per_name.iter().map(|(k, n)| (k.clone(), n.0)).collect();
    let per_name_parsed: BTreeMap<String, u64> = c.per_name.iter().map(|(k, n)| (k.clone(), n.1)).collect();
    let parsed: u64 = per_name_parsed.values().sum();
    let events: u64 = counts.values().sum();
    let other = c.other;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let lost = h.lost_events.max(c.lost_lines);
    if events == 0 {
        return Err(format!(
            "{}: no trace event in its {} lines ({other} not event lines, {lost} events lost): not an ftrace trace of events",
            path.display(),
            r.line_no()
        ));
    }
    if json {
        let v = serde_json::json!({
            "file": path.display().to_string(),
            "format": if container { "fraglab-trace" } else { "ftrace-text" },
            "bytes": size,
            "events": events,
            "events_per_name": counts,
            "parsed_by_model": parsed,
            "parsed_by_model_per_name": per_name_parsed,
            "other_lines": other,
            "malformed_lines": c.malformed,
            "first_malformed": c.first_malformed,
            "lost_events": lost,
            "duration_ns": h.duration_ns,
            "snapshot": h.snapshot.as_ref().map(|s| serde_json::json!({
                "end_pfn": s.end_pfn, "hostname": s.hostname, "kernel": s.kernel,
                "taken_at_unix_s": s.taken_at_unix_s,
            })),
            "header": {
                "events": h.events, "started_at_unix_s": h.started_at_unix_s,
                "nr_cpus": h.nr_cpus, "buffer_size_kb": h.buffer_size_kb, "clock": h.clock,
                "workload": h.workload, "workload_status": h.workload_status,
                "recorder_pid": h.recorder_pid, "recorder_tids": h.recorder_tids,
                "recorder_lines": h.recorder_lines, "interrupted_by": h.interrupted_by,
                "lines": h.lines, "snapshot_window_ns": h.snapshot_window_ns,
                "proc_end": h.proc_end.keys().collect::<Vec<_>>(),
            },
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("JSON serializes"));
        return Ok(());
    }
    print_header_text(&path, size, container, &h);
    let rate = if h.duration_ns > 0 {
        format!(" ({:.0}/s)", events as f64 / (h.duration_ns as f64 / 1e9))
    } else {
        String::new()
    };
    println!("events         {events}{rate}, {parsed} read by the model's parser");
    println!("lost events    {lost}");
    if other > 0 {
        println!("other lines    {other} (no event line)");
    }
    if c.malformed > 0 {
        println!(
            "malformed      {} lines of events the model reads that its parser refused; the first at {}",
            c.malformed,
            c.first_malformed.as_deref().unwrap_or("?")
        );
    }
    println!("  {:<40} {:>12} {:>12}", "event", "lines", "model reads");
    for (name, n) in &counts {
        println!("  {name:<40} {n:>12} {:>12}", per_name_parsed[name]);
    }
    Ok(())
}

/// `trace info`'s text lines about the file and its header.
fn print_header_text(
    path: &std::path::Path,
    size: u64,
    container: bool,
    h: &fraglab_state::trace::TraceHeader,
) {
    println!(
        "file           {} ({:.1} MiB)",
        path.display(),
        size as f64 / (1 << 20) as f64
    );
    if !container {
        println!("format         plain ftrace text (no header)");
    } else {
        println!("format         fraglab trace");
        println!("events on      {}", h.events.join(" "));
        println!("started at     {} (unix s)", h.started_at_unix_s);
        println!(
            "duration       {:.3} s (clock {})",
            h.duration_ns as f64 / 1e9,
            if h.clock.is_empty() { "?" } else { &h.clock }
        );
        println!(
            "cpus           {}, buffer {} KiB per CPU",
            h.nr_cpus, h.buffer_size_kb
        );
        if !h.workload.is_empty() {
            println!(
                "workload       {} (exit {})",
                h.workload,
                h.workload_status.map_or("-".to_string(), |c| c.to_string())
            );
        }
        if let Some(p) = h.recorder_pid {
            println!(
                "recorder       pid {p}, threads {:?}: {} of the lines are its own",
                h.recorder_tids, h.recorder_lines
            );
        }
        if let Some(sig) = h.interrupted_by {
            println!("interrupted    by signal {sig}");
        }
        println!(
            "end state      {}",
            h.proc_end.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    match &h.snapshot {
        Some(s) => println!(
            "snapshot       yes: {} pfns, {} {}, taken at {}",
            s.end_pfn, s.hostname, s.kernel, s.taken_at_unix_s
        ),
        None => println!("snapshot       no"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--duration 60` is 60 seconds (issue 34: it was refused for want of a unit).
    #[test]
    fn a_plain_number_is_seconds() {
        assert_eq!(parse_record_duration("60"), Ok(60_000_000_000));
        assert_eq!(parse_record_duration("90s"), Ok(90_000_000_000));
        assert_eq!(parse_record_duration("2min"), Ok(120_000_000_000));
        assert!(parse_record_duration("6o").is_err());
        assert!(parse_record_duration("").is_err());
    }
}
