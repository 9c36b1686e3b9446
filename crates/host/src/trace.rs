//! Optional tracepoint capture in a private tracefs instance (Documentation/trace/ftrace.rst,
//! "Instances"): tracefs is used where /proc/mounts shows it, else mounted at a temporary
//! directory (`mount -t tracefs nodev DIR`, mount(2)); a private instance
//! `instances/fraglab-host-<pid>` gets the events enabled and its own buffer, so other users of
//! the global buffer are not disturbed. A reader thread drains the instance's `trace_pipe`,
//! counts events by name and keeps the first bytes of the text; with a file
//! ([`TraceSession::start_to`], `HostOptions::trace_to`) it also streams every line there, the
//! instance then having a [`TRACE_TO_BUFFER_KB`] buffer per CPU and `trace_clock` mono. Stopping
//! disables the events and reads the instance's lost events (`per_cpu/cpuN/stats`); the
//! instance and the mount are changes of the run's journal ([`open_instance`]), which removes
//! and unmounts them.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::journal::{Change, Journal};
use crate::HostError;

/// The events recorded when the spec names none: `compaction:*` and
/// `kmem:mm_page_alloc_extfrag`.
pub const DEFAULT_EVENTS: &[&str] = &["compaction:*", "kmem:mm_page_alloc_extfrag"];

/// `events` (`group:name` or `group:*`) with each of [`fraglab_spec::DIFF_EVENTS`] that none
/// of them covers added, in order: what a session writing to a file records.
pub fn with_diff_events(mut events: Vec<String>) -> Vec<String> {
    for e in fraglab_spec::DIFF_EVENTS {
        let group = e.split_once(':').map_or("", |(g, _)| g);
        let covered = events
            .iter()
            .any(|x| x == e || x.strip_suffix(":*").is_some_and(|g| g == group));
        if !covered {
            events.push(e.to_string());
        }
    }
    events
}

/// The tracefs mount point from /proc/mounts, if tracefs is mounted.
pub fn tracefs_mount() -> Option<PathBuf> {
    tracefs_in(&std::fs::read_to_string("/proc/mounts").ok()?)
}

/// The first tracefs mount point in the text of /proc/mounts.
fn tracefs_in(m: &str) -> Option<PathBuf> {
    m.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == "tracefs").then(|| PathBuf::from(f[1]))
    })
}

/// The per-CPU buffer of the instance when the text goes to a file (`HostOptions::trace_to`),
/// in KiB: 64 MiB per CPU. A compaction storm on the live S2 machine writes tens of thousands of
/// compaction lines a second per CPU; the reader drains the pipe every 50 ms at worst, and a
/// buffer this size holds several seconds of such a storm, so the reader falling behind (a slow
/// disk, a busy CPU) does not lose events. The buffer is kernel memory taken when the instance
/// is made (before the workload starts), so it is part of the machine the run sees. Without a
/// file the buffer stays 4 MiB (only counts and the first bytes are kept).
pub const TRACE_TO_BUFFER_KB: u64 = 64 << 10;

#[derive(Default)]
struct Captured {
    counts: BTreeMap<String, u64>,
    text: String,
    partial: String,
    /// `trace_to`: the file every line goes to, the lines written, the first write error.
    out: Option<std::io::BufWriter<std::fs::File>>,
    lines_written: u64,
    write_error: Option<String>,
    /// `CPU:N [LOST M EVENTS]` lines in the pipe.
    lost_lines: u64,
}

/// What a finished session captured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceOutcome {
    pub counts: BTreeMap<String, u64>,
    /// The first `keep_bytes` of the text.
    pub text: String,
    /// Events the kernel dropped: `overrun` + `dropped events` of the instance's
    /// `per_cpu/cpuN/stats` (read before the instance is removed), or the `[LOST M EVENTS]`
    /// lines of the pipe if more.
    pub lost_events: u64,
    /// With a file: the lines written to it and the first write error (the rest of the text
    /// is then not written).
    pub lines_written: u64,
    pub write_error: Option<String>,
    /// Diff events left out because this kernel does not have them
    /// ([`TraceSession::start_to`]).
    pub missing_events: Vec<String>,
}

/// A running capture. Its instance (and the tracefs mount, if one was made) are changes of
/// the run's journal: the session stops recording and its reader, the journal removes them.
pub struct TraceSession {
    instance: PathBuf,
    enabled: Vec<PathBuf>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    data: Arc<Mutex<Captured>>,
    finished: bool,
    /// `per_cpu/*/stats` lost events, read when the session stops.
    lost_events: u64,
    /// Optional events this kernel does not have (left out).
    missing: Vec<String>,
}

pub use fraglab_state::trace::MISSING_EVENT_PREFIX;

/// Writes `1` to the `enable` file of each of `events` (`group:name` or `group:*`) under
/// `instance`, pushing each path written to `enabled` (so a failure part way still lets the
/// caller disable them). An event of `optional` whose `enable` file does not exist is skipped
/// and returned; a missing one not in `optional`, or a failed write, is an error.
pub fn enable_events(
    instance: &Path,
    events: &[String],
    optional: &[String],
    enabled: &mut Vec<PathBuf>,
) -> Result<Vec<String>, HostError> {
    let mut missing = Vec::new();
    for ev in events {
        let (group, name) = ev.split_once(':').unwrap_or(("", ev));
        let p = if name == "*" {
            instance.join("events").join(group).join("enable")
        } else {
            instance.join("events").join(group).join(name).join("enable")
        };
        if optional.contains(ev) && !p.exists() {
            missing.push(ev.clone());
            continue;
        }
        write(&p, "1")?;
        enabled.push(p);
    }
    Ok(missing)
}

/// The event name of one trace_pipe line (`  comm-12  [001] ..... 12.345678: mm_compaction_end: ...`).
fn event_name(line: &str) -> Option<&str> {
    // The timestamp is the token before the event; it ends with ':' and is a number.
    let mut it = line.split_whitespace();
    while let Some(tok) = it.next() {
        if let Some(ts) = tok.strip_suffix(':') {
            if !ts.is_empty() && ts.bytes().all(|b| b.is_ascii_digit() || b == b'.') && ts.contains('.') {
                return it.next().map(|e| e.trim_end_matches(':'));
            }
        }
    }
    None
}

/// Writes a tracefs control file.
pub(crate) fn write(path: &Path, v: &str) -> Result<(), HostError> {
    std::fs::write(path, v).map_err(|e| HostError::io(path.display().to_string(), e))
}

/// A private tracefs instance `instances/INSTANCE`, both changes of `journal`: on tracefs
/// where the machine's /proc/mounts shows it, else tracefs mounted at `/run/MOUNT` first (a
/// `trace_mount` change), then the instance (a `trace_instance` change). Returns the
/// instance's real path. Undoing them (the journal) removes the instance and unmounts.
pub fn open_instance(journal: &mut Journal, mount: &str, instance: &str) -> Result<PathBuf, HostError> {
    let m = journal.machine().clone();
    let mounts = std::fs::read_to_string(m.path(Path::new("/proc/mounts"))).unwrap_or_default();
    let root = match tracefs_in(&mounts) {
        Some(r) => r,
        None => {
            let dir = PathBuf::from("/run").join(mount);
            journal.apply(Change::TraceMount { path: dir.clone() })?;
            dir
        }
    };
    let path = root.join("instances").join(instance);
    journal.apply(Change::TraceInstance { path: path.clone() })?;
    Ok(path)
}

impl TraceSession {
    /// Starts capturing `events` (`group:name` or `group:*`), keeping at most `keep_bytes` of
    /// trace text.
    pub fn start(
        journal: &mut Journal,
        events: &[String],
        keep_bytes: usize,
    ) -> Result<TraceSession, HostError> {
        Self::start_with(journal, events, &[], keep_bytes, None)
    }

    /// [`TraceSession::start`] of `events` and each of [`fraglab_spec::DIFF_EVENTS`] they do
    /// not cover ([`with_diff_events`]), also streaming every line of text to `path` (created
    /// or truncated; a first comment line says the clock): the instance's buffer is
    /// [`TRACE_TO_BUFFER_KB`] per CPU and its `trace_clock` is `mono` (CLOCK_MONOTONIC, as
    /// `fraglab host record` uses), so `trace diff --kernel-from` takes CLOCK_MONOTONIC seconds.
    ///
    /// A diff event this kernel does not have (no `events/GROUP/NAME/enable`: a kernel built
    /// without DAMON has no `damon:` events) is left out, not an error: a comment line
    /// [`MISSING_EVENT_PREFIX`]` GROUP:NAME` after the clock line says so, and
    /// [`TraceOutcome::missing_events`] lists it. An event `events` names itself must exist.
    pub fn start_to(
        journal: &mut Journal,
        events: &[String],
        keep_bytes: usize,
        path: &Path,
    ) -> Result<TraceSession, HostError> {
        let all = with_diff_events(events.to_vec());
        let optional = &all[events.len()..];
        let f = std::fs::File::create(path).map_err(|e| HostError::io(path.display().to_string(), e))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
        use std::io::Write as _;
        writeln!(out, "# fraglab host trace: trace_clock=mono")
            .map_err(|e| HostError::io(path.display().to_string(), e))?;
        Self::start_with(journal, &all, optional, keep_bytes, Some(out))
    }

    fn start_with(
        journal: &mut Journal,
        events: &[String],
        optional: &[String],
        keep_bytes: usize,
        out: Option<std::io::BufWriter<std::fs::File>>,
    ) -> Result<TraceSession, HostError> {
        let to_file = out.is_some();
        let pid = std::process::id();
        let instance = open_instance(
            journal,
            &format!("fraglab-host-tracefs-{pid}"),
            &format!("fraglab-host-{pid}"),
        )?;
        let mut s = TraceSession {
            instance: instance.clone(),
            enabled: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            data: Arc::new(Mutex::new(Captured {
                out,
                ..Captured::default()
            })),
            finished: false,
            lost_events: 0,
            missing: Vec::new(),
        };
        if to_file {
            write(&instance.join("buffer_size_kb"), &TRACE_TO_BUFFER_KB.to_string())?;
            write(&instance.join("trace_clock"), "mono")?;
        } else {
            let _ = write(&instance.join("buffer_size_kb"), "4096");
        }
        let missing = enable_events(&instance, events, optional, &mut s.enabled)?;
        if !missing.is_empty() {
            let mut d = s.data.lock().expect("no reader yet");
            if let Some(out) = d.out.as_mut() {
                use std::io::Write as _;
                for m in &missing {
                    writeln!(out, "{MISSING_EVENT_PREFIX} {m}")
                        .map_err(|e| HostError::io("the trace file", e))?;
                }
            }
        }
        s.missing = missing;
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(instance.join("trace_pipe"))
            .map_err(|e| HostError::io("trace_pipe", e))?;
        let (stop, data) = (s.stop.clone(), s.data.clone());
        s.reader = Some(std::thread::spawn(move || reader(pipe, stop, data, keep_bytes)));
        Ok(s)
    }

    /// The instance's `trace_marker`: a write of `fraglab: measure` there (e.g. by the worker
    /// that runs a `{ measure = true }` step) puts the line `tracing_mark_write: fraglab:
    /// measure` into the trace at that moment, where `fraglab trace diff` starts comparing.
    pub fn marker_path(&self) -> PathBuf {
        self.instance.join("trace_marker")
    }

    /// Stops the capture (the journal removes the instance); returns the event counts and the
    /// kept text.
    pub fn finish(self) -> (BTreeMap<String, u64>, String) {
        let o = self.finish_full();
        (o.counts, o.text)
    }

    /// Stops the capture (the journal removes the instance); everything it captured, the file
    /// flushed.
    pub fn finish_full(mut self) -> TraceOutcome {
        self.cleanup();
        let mut d = std::mem::take(&mut *self.data.lock().expect("reader never panics holding it"));
        if let Some(mut out) = d.out.take() {
            use std::io::Write as _;
            if let Err(e) = out.flush() {
                d.write_error.get_or_insert(e.to_string());
            }
        }
        TraceOutcome {
            counts: d.counts,
            text: d.text,
            lost_events: self.lost_events.max(d.lost_lines),
            lines_written: d.lines_written,
            write_error: d.write_error,
            missing_events: std::mem::take(&mut self.missing),
        }
    }

    fn cleanup(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        for p in &self.enabled {
            let _ = write(p, "0");
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
        self.lost_events = crate::record::lost_events(&self.instance);
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        self.cleanup();
    }
}

fn reader(mut pipe: std::fs::File, stop: Arc<AtomicBool>, data: Arc<Mutex<Captured>>, keep: usize) {
    let mut buf = vec![0u8; 64 << 10];
    let mut idle_after_stop = 0;
    loop {
        match pipe.read(&mut buf) {
            Ok(n) if n > 0 => {
                let mut d = data.lock().expect("only this thread writes");
                let chunk = String::from_utf8_lossy(&buf[..n]);
                let mut text = std::mem::take(&mut d.partial);
                text.push_str(&chunk);
                let complete = text.rfind('\n').map_or(0, |i| i + 1);
                for line in text[..complete].lines() {
                    take_line(&mut d, line, keep);
                }
                d.partial = text[complete..].to_string();
                continue;
            }
            _ => {
                if stop.load(Ordering::SeqCst) {
                    idle_after_stop += 1;
                    if idle_after_stop > 2 {
                        break;
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

/// One whole line from the pipe: counted, kept while under `keep` bytes, written to the file.
fn take_line(d: &mut Captured, line: &str, keep: usize) {
    if let Some(e) = event_name(line) {
        *d.counts.entry(e.to_string()).or_default() += 1;
    } else if let Some(n) = fraglab_state::trace::lost_events_line(line) {
        d.lost_lines += n;
    }
    if d.text.len() + line.len() < keep {
        d.text.push_str(line);
        d.text.push('\n');
    }
    if d.write_error.is_none() {
        if let Some(out) = d.out.as_mut() {
            use std::io::Write as _;
            match writeln!(out, "{line}") {
                Ok(()) => d.lines_written += 1,
                Err(e) => d.write_error = Some(e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_events_are_added_once() {
        let ev = with_diff_events(DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect());
        assert_eq!(&ev[..2], ["compaction:*", "kmem:mm_page_alloc_extfrag"]);
        // compaction:* and the extfrag event cover all but the vmscan ones.
        let rest: Vec<&str> = ev[2..].iter().map(String::as_str).collect();
        assert_eq!(
            rest,
            [
                "vmscan:mm_vmscan_kswapd_wake",
                "vmscan:mm_vmscan_kswapd_sleep",
                "vmscan:mm_vmscan_direct_reclaim_begin",
                "vmscan:mm_vmscan_direct_reclaim_end",
                "vmscan:mm_vmscan_lru_shrink_inactive",
                "vmscan:mm_vmscan_reclaim_pages",
                "damon:damos_before_apply",
            ]
        );
        assert_eq!(
            with_diff_events(Vec::new()).len(),
            fraglab_spec::DIFF_EVENTS.len()
        );
    }

    /// A diff event the kernel lacks (no DAMON: no `events/damon/`) is skipped and reported;
    /// one the spec named itself must exist.
    #[test]
    fn s27_missing_diff_events_are_skipped() {
        let inst = std::env::temp_dir().join(format!("fraglab-host-enable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&inst);
        for d in ["events/compaction", "events/vmscan/mm_vmscan_reclaim_pages"] {
            std::fs::create_dir_all(inst.join(d)).unwrap();
        }
        std::fs::write(inst.join("events/compaction/enable"), "0").unwrap();
        std::fs::write(inst.join("events/vmscan/mm_vmscan_reclaim_pages/enable"), "0").unwrap();
        let events: Vec<String> = [
            "compaction:*",
            "vmscan:mm_vmscan_reclaim_pages",
            "damon:damos_before_apply",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut enabled = Vec::new();
        let missing = enable_events(&inst, &events, &events[1..], &mut enabled).unwrap();
        assert_eq!(missing, ["damon:damos_before_apply"]);
        assert_eq!(enabled.len(), 2);
        for p in &enabled {
            assert_eq!(std::fs::read_to_string(p).unwrap(), "1");
        }
        // Named by the spec (not optional): an error naming the event's file.
        let mut enabled = Vec::new();
        let e = enable_events(&inst, &events, &[], &mut enabled).unwrap_err();
        assert!(e.to_string().contains("damos_before_apply"), "{e}");
        assert_eq!(
            enabled.len(),
            2,
            "the ones written before the failure are returned"
        );
        std::fs::remove_dir_all(&inst).unwrap();
    }

    #[test]
    fn lines_go_to_the_file_and_are_counted() {
        let dir = std::env::temp_dir().join(format!("fraglab-host-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.txt");
        let mut d = Captured {
            out: Some(std::io::BufWriter::new(std::fs::File::create(&p).unwrap())),
            ..Captured::default()
        };
        let a = " kcompactd0-35 [000] ..... 88.000001: mm_compaction_kcompactd_sleep: nid=0";
        let b = "CPU:1 [LOST 12 EVENTS]";
        take_line(&mut d, a, 10);
        take_line(&mut d, b, 10);
        use std::io::Write as _;
        d.out.take().unwrap().flush().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), format!("{a}\n{b}\n"));
        assert_eq!(d.lines_written, 2);
        assert_eq!(d.lost_lines, 12);
        assert_eq!(d.counts["mm_compaction_kcompactd_sleep"], 1);
        // Only what fits in `keep` is kept in memory.
        assert!(d.text.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn event_names() {
        let l = "          <idle>-0       [001] d..2.  1234.567890: mm_compaction_begin: zone_start=0x1000 migrate_pfn=0x1000";
        assert_eq!(event_name(l), Some("mm_compaction_begin"));
        let l = " kcompactd0-35 [000] ..... 88.000001: mm_compaction_kcompactd_sleep: nid=0";
        assert_eq!(event_name(l), Some("mm_compaction_kcompactd_sleep"));
        assert_eq!(event_name("garbage"), None);
    }
}
