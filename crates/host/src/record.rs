//! `fraglab host record`: records the live kernel's allocation tracepoints into a trace file
//! (issue 21 item 4; `fraglab_state::trace`), for the simulator's replay.
//!
//! A tracefs instance of its own (Documentation/trace/ftrace.rst, "Instances"),
//! `instances/fraglab-record-PID`, on tracefs where /proc/mounts shows it or mounted at a private
//! directory (`/run/fraglab-record-tracefs-PID`) otherwise. The instance gets its own per-CPU
//! buffer (`buffer_size_kb`, default 32 MiB per CPU), `trace_clock` "mono" (CLOCK_MONOTONIC, so
//! the header's times and the lines' timestamps are on one clock, comparable across CPUs) and the
//! events; other users of tracefs are not disturbed. A reader thread (named "fraglab-record")
//! drains the instance's `trace_pipe` into the [`TraceWriter`] while the duration runs or the
//! command runs; the command starts after tracing is on. Then the end state (/proc pagetypeinfo,
//! buddyinfo, vmstat, zoneinfo, meminfo) is read right after the events are disabled, the lost
//! events from `per_cpu/cpuN/stats` ("overrun" + "dropped events"), the knobs (at the start) and
//! the confounders (free page reporting, DAMON, ... at start and end).
//!
//! The start snapshot is read after tracing is on (events during the pfn read are recorded; the
//! header gives the read's window on the trace clock, `snapshot_window_ns`).
//!
//! The tracefs mount (if one is made), the instance and the command are changes of the
//! recorder's change journal ([`crate::journal`]; state file `/run/fraglab-host-PID.restore`),
//! each written to the state file before it is made: every exit path removes the instance,
//! unmounts what was mounted and ends the command: normal end, error, panic (the journal's
//! `Drop`), SIGINT/SIGTERM (they stop the recording early; the file is still written, with
//! `interrupted_by`, and the command is sent SIGTERM), and after a SIGKILL `fraglab host
//! restore`. The command gets SIGTERM if the recorder dies (PR_SET_PDEATHSIG).
//!
//! The recorder's own allocations are in the trace (reading trace_pipe, spooling the file through
//! the page cache, reading the snapshot): its lines carry its pid or its reader thread's tid
//! (`recorder_pid`, `recorder_tids`), and the header counts them (`recorder_lines`).

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fraglab_spec::result::HostConfounders;
use fraglab_state::snapshot::Snapshot;
use fraglab_state::trace::{line_pid, lost_events_line, TraceHeader, TraceWriter};

use crate::journal::{Change, Journal, Machine};
use crate::signals::SignalFlag;
use crate::trace::write;
use crate::{confounders, knobs, procfs, HostError};

/// The events recorded by default: the page allocator's (kmem), every compaction event the
/// model has (compaction:* on 6.18 is exactly the 15 of docs/model §15.2), and the reclaim
/// events the model emits (§15.3).
pub const DEFAULT_EVENTS: &[&str] = &[
    "kmem:mm_page_alloc",
    "kmem:mm_page_free",
    "kmem:mm_page_free_batched",
    "kmem:mm_page_pcpu_drain",
    "kmem:mm_page_alloc_extfrag",
    "compaction:*",
    "vmscan:mm_vmscan_kswapd_wake",
    "vmscan:mm_vmscan_kswapd_sleep",
    "vmscan:mm_vmscan_wakeup_kswapd",
    "vmscan:mm_vmscan_direct_reclaim_begin",
    "vmscan:mm_vmscan_direct_reclaim_end",
    "vmscan:mm_vmscan_lru_shrink_inactive",
];

/// Per-CPU ring buffer of the instance (KiB): the least [`size_buffer`] gives.
pub const DEFAULT_BUFFER_KB: u64 = 32 << 10;

/// The most [`size_buffer`] gives a CPU (KiB)…
pub const MAX_AUTO_BUFFER_KB: u64 = 1 << 20;

/// …and the most for all CPUs together: this fraction of MemAvailable.
pub const AUTO_BUFFER_MEM_DIVISOR: u64 = 16;

/// How long the events are sampled before the recording to size the buffer.
pub const RATE_PROBE: Duration = Duration::from_millis(500);

/// The seconds of events the sized buffer holds at the probed rate: the reader empties it far
/// faster than this, but a burst (a workload starting, compaction) can outrun it.
pub const BUFFER_HEADROOM_S: u64 = 8;

/// Recording time when no command is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(30);

/// What to record and how.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    pub output: PathBuf,
    /// How long to record. None: [`DEFAULT_DURATION`] without a command, until the command
    /// exits with one. With a command and a duration, the command gets SIGTERM at the end of
    /// the duration if it is still running.
    pub duration: Option<Duration>,
    /// `group:name` or `group:*`; empty: [`DEFAULT_EVENTS`].
    pub events: Vec<String>,
    /// Per-CPU buffer (KiB); `None`: sized from the events' rate ([`size_buffer`]).
    pub buffer_kb: Option<u64>,
    /// Embed a snapshot taken at the start.
    pub snapshot: bool,
    /// The command to run while recording (program and arguments), or empty.
    pub command: Vec<String>,
    /// Progress lines on stderr once a second.
    pub progress: bool,
}

impl Default for RecordOptions {
    fn default() -> RecordOptions {
        RecordOptions {
            output: PathBuf::from("fraglab.trace"),
            duration: None,
            events: Vec::new(),
            buffer_kb: None,
            snapshot: true,
            command: Vec::new(),
            progress: true,
        }
    }
}

/// The name of the instance a recorder with this pid uses.
pub fn instance_name(pid: u32) -> String {
    format!("fraglab-record-{pid}")
}

/// CLOCK_MONOTONIC now (ns): the clock of trace_clock "mono".
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn state_err(e: fraglab_state::StateError) -> HostError {
    HostError::Io {
        what: "trace file".into(),
        err: std::io::Error::other(e.to_string()),
    }
}

/// Counters the reader thread updates and the main thread prints.
#[derive(Default)]
struct Progress {
    lines: AtomicU64,
    text_bytes: AtomicU64,
    spooled: AtomicU64,
    lost_lines: AtomicU64,
    /// The per-CPU buffer the session uses (KiB).
    buffer_kb: AtomicU64,
    self_lines: AtomicU64,
    tid: AtomicU32,
    failed: AtomicBool,
    /// The reader thread's CPU time (user, system; µs), at its end.
    cpu_user_us: AtomicU64,
    cpu_sys_us: AtomicU64,
}

/// The calling thread's CPU time (user, system) in µs.
fn thread_cpu_us() -> (u64, u64) {
    // SAFETY: a zeroed rusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime), us(ru.ru_stime))
}

/// The reader thread and the command of a recording. The tracefs mount, the instance and the
/// command are changes of the recorder's journal ([`crate::journal`]), undone on every way out
/// (and by `fraglab host restore` after a SIGKILL); `Drop` stops the events and the reader
/// first (the pipe must be closed before the instance can be removed), so the session is
/// declared after the journal.
struct Session {
    instance: PathBuf,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Result<TraceWriter, HostError>>>,
    child: Option<Child>,
}

impl Session {
    fn open(journal: &mut Journal, pid: u32) -> Result<Session, HostError> {
        let instance = crate::trace::open_instance(
            journal,
            &format!("fraglab-record-tracefs-{pid}"),
            &instance_name(pid),
        )?;
        if let Some(instances) = instance.parent() {
            remove_stale_instances(instances);
        }
        Ok(Session {
            instance,
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            child: None,
        })
    }

    fn disable_events(&self) {
        let _ = std::fs::write(self.instance.join("events/enable"), "0");
        let _ = std::fs::write(self.instance.join("tracing_on"), "0");
    }

    /// Stops the reader thread (after the events were disabled it drains what is left).
    fn join_reader(&mut self) -> Option<Result<TraceWriter, HostError>> {
        self.stop.store(true, Ordering::SeqCst);
        let h = self.reader.take()?;
        Some(
            h.join()
                .unwrap_or_else(|_| Err(HostError::Worker("the trace reader panicked".into()))),
        )
    }

    /// SIGTERM to the command, SIGKILL after [`CHILD_GRACE`]; its exit status.
    fn end_child(&mut self) -> Option<std::process::ExitStatus> {
        let mut c = self.child.take()?;
        if let Ok(Some(st)) = c.try_wait() {
            return Some(st);
        }
        // SAFETY: signalling the child this process started (still unreaped, so the pid is
        // ours).
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < CHILD_GRACE {
            if let Ok(Some(st)) = c.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        c.wait().ok()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.disable_events();
        drop(self.join_reader());
    }
}

/// How long a recorded command has after SIGTERM before SIGKILL: `fraglab host run` needs it
/// to restore knobs, online memory blocks and remove its scratch files (11 GiB took longer than
/// the 5 s this once was, and SIGKILL left them behind).
const CHILD_GRACE: Duration = Duration::from_secs(120);

/// Removes the instances of recorders that died without cleaning up (SIGKILL): an instance
/// outlives its process and even an unmount of tracefs, keeping its buffer and, if its events
/// are on, tracing. `fraglab-record-PID` (and a snapshot's `fraglab-damon-PID`,
/// [`crate::damon::capture_regions`], and a run's `fraglab-host-PID`) where no process PID
/// exists. (Since the change journal, `fraglab host restore` removes them from the state file;
/// this catches those of older versions.)
pub fn remove_stale_instances(instances: &Path) {
    for e in std::fs::read_dir(instances).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("fraglab-record-")
            .or_else(|| name.strip_prefix("fraglab-damon-"))
            .or_else(|| name.strip_prefix("fraglab-host-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let _ = std::fs::write(e.path().join("events/enable"), "0");
        match std::fs::remove_dir(e.path()) {
            Ok(()) => {
                eprintln!("fraglab host record: removed the stale instance {name} (its recorder is gone)")
            }
            Err(err) => eprintln!("fraglab host record: cannot remove the stale instance {name}: {err}"),
        }
    }
}

/// Events dropped by the kernel: the sum over CPUs of `overrun` (overwritten before they were
/// read) and `dropped events` (buffer full in non-overwrite mode) of `per_cpu/cpuN/stats`.
pub fn lost_events(instance: &Path) -> u64 {
    let mut lost = 0;
    for e in std::fs::read_dir(instance.join("per_cpu"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(t) = std::fs::read_to_string(e.path().join("stats")) else {
            continue;
        };
        for l in t.lines() {
            if let Some((k, v)) = l.split_once(':') {
                if k == "overrun" || k == "dropped events" {
                    lost += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    lost
}

/// The snapshot at the start: [`crate::snapshot::capture`] (issue 21 item 1), read while the
/// events are already on.
fn take_snapshot(progress: bool) -> Result<Snapshot, HostError> {
    let t = Instant::now();
    let snap = crate::snapshot::capture(&crate::snapshot::CaptureOptions::default(), &mut |_, _| {})?;
    if progress {
        eprintln!(
            "record: snapshot of {} pfns in {:.1} s",
            snap.header.end_pfn,
            t.elapsed().as_secs_f64()
        );
    }
    Ok(snap)
}

/// The reader thread: drains `trace_pipe` (non-blocking reads; each returns at most a page of
/// formatted text) into the writer, whole lines only, until stopped and the pipe is empty.
fn reader(
    mut pipe: std::fs::File,
    mut w: TraceWriter,
    stop: Arc<AtomicBool>,
    prog: Arc<Progress>,
    pid: u32,
) -> Result<TraceWriter, HostError> {
    let tid = gettid();
    prog.tid.store(tid, Ordering::SeqCst);
    let mut buf = vec![0u8; 64 << 10];
    let mut partial: Vec<u8> = Vec::new();
    let mut idle_after_stop = 0;
    let mut lines = 0u64;
    let mut self_lines = 0u64;
    let mut lost_lines = 0u64;
    let mut run = || -> Result<(), HostError> {
        loop {
            match pipe.read(&mut buf) {
                Ok(n) if n > 0 => {
                    idle_after_stop = 0;
                    partial.extend_from_slice(&buf[..n]);
                    let Some(last_nl) = partial.iter().rposition(|&b| b == b'\n') else {
                        continue;
                    };
                    for raw in partial[..last_nl].split(|&b| b == b'\n') {
                        let line = String::from_utf8_lossy(raw);
                        if line.is_empty() {
                            continue;
                        }
                        if let Some(n) = lost_events_line(&line) {
                            lost_lines += n;
                        } else if let Some(p) = line_pid(&line) {
                            if p == pid || p == tid {
                                self_lines += 1;
                            }
                        }
                        w.line(&line).map_err(state_err)?;
                        lines += 1;
                    }
                    partial.drain(..=last_nl);
                    prog.lines.store(lines, Ordering::Relaxed);
                    prog.text_bytes.store(w.text_bytes(), Ordering::Relaxed);
                    prog.spooled.store(w.spooled_bytes(), Ordering::Relaxed);
                    prog.self_lines.store(self_lines, Ordering::Relaxed);
                    prog.lost_lines.store(lost_lines, Ordering::Relaxed);
                }
                Ok(_) => idle(&stop, &mut idle_after_stop),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => idle(&stop, &mut idle_after_stop),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(HostError::io("trace_pipe", e)),
            }
            if idle_after_stop > 2 {
                return Ok(());
            }
        }
    };
    let r = run();
    let (u, sy) = thread_cpu_us();
    prog.cpu_user_us.store(u, Ordering::SeqCst);
    prog.cpu_sys_us.store(sy, Ordering::SeqCst);
    if let Err(e) = r {
        prog.failed.store(true, Ordering::SeqCst);
        return Err(e);
    }
    if !partial.is_empty() {
        w.line(&String::from_utf8_lossy(&partial)).map_err(state_err)?;
        prog.lines.fetch_add(1, Ordering::Relaxed);
    }
    Ok(w)
}

fn idle(stop: &AtomicBool, idle_after_stop: &mut u32) {
    if stop.load(Ordering::SeqCst) {
        *idle_after_stop += 1;
    }
    std::thread::sleep(Duration::from_millis(20));
}

/// The events to record ([`DEFAULT_EVENTS`] when none are given), checked, and the duration
/// (None: until the command exits).
fn check_options(opts: &RecordOptions) -> Result<(Vec<String>, Option<Duration>), HostError> {
    if !cfg!(target_os = "linux") {
        return Err(HostError::NotLinux);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(HostError::NotRoot);
    }
    let events: Vec<String> = if opts.events.is_empty() {
        DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect()
    } else {
        opts.events.clone()
    };
    for ev in &events {
        let ok = ev
            .split_once(':')
            .is_some_and(|(g, n)| valid_name(g) && (n == "*" || valid_name(n)));
        if !ok {
            return Err(HostError::Unsupported(format!(
                "event {ev:?}: expected group:name or group:* (e.g. kmem:mm_page_alloc)"
            )));
        }
    }
    if opts.buffer_kb == Some(0) {
        return Err(HostError::Unsupported("--buffer-kb 0".into()));
    }
    let duration = match (opts.duration, opts.command.is_empty()) {
        (Some(d), _) => Some(d),
        (None, true) => Some(DEFAULT_DURATION),
        (None, false) => None,
    };
    Ok((events, duration))
}

/// The header as known at the start.
fn start_header(opts: &RecordOptions, events: &[String], pid: u32) -> TraceHeader {
    let started_at_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // SAFETY: sysconf has no preconditions.
    let nr_cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    TraceHeader {
        events: events.to_vec(),
        started_at_unix_s,
        nr_cpus,
        buffer_size_kb: opts.buffer_kb.unwrap_or(DEFAULT_BUFFER_KB),
        knobs: knobs::read_all_knobs(),
        workload: opts.command.join(" "),
        recorder_pid: Some(pid),
        clock: "mono".into(),
        ..Default::default()
    }
}

/// Sets up the session's instance (buffer, clock, events) and starts its reader thread into
/// `writer`; tracing is still off.
fn start_session(
    journal: &mut Journal,
    opts: &RecordOptions,
    events: &[String],
    writer: TraceWriter,
    pid: u32,
) -> Result<(Session, Arc<Progress>), HostError> {
    let mut s = Session::open(journal, pid)?;
    let inst = s.instance.clone();
    write(&inst.join("tracing_on"), "0")?;
    write(&inst.join("buffer_size_kb"), &DEFAULT_BUFFER_KB.to_string())?;
    write(&inst.join("trace_clock"), "mono")?;
    for ev in events {
        let (group, name) = ev.split_once(':').expect("checked");
        let p = if name == "*" {
            inst.join("events").join(group).join("enable")
        } else {
            inst.join("events").join(group).join(name).join("enable")
        };
        if !p.exists() {
            return Err(HostError::io(
                format!("event {ev}: {}", p.display()),
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such event on this kernel"),
            ));
        }
        write(&p, "1")?;
    }
    let kb = match opts.buffer_kb {
        Some(kb) => kb,
        None => probe_buffer_kb(&inst, opts.progress)?,
    };
    write(&inst.join("buffer_size_kb"), &kb.to_string())?;
    let pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(inst.join("trace_pipe"))
        .map_err(|e| HostError::io("trace_pipe", e))?;
    let prog = Arc::new(Progress::default());
    prog.buffer_kb.store(kb, Ordering::SeqCst);
    let (stop, p) = (s.stop.clone(), prog.clone());
    s.reader = Some(
        std::thread::Builder::new()
            .name("fraglab-record".into())
            .spawn(move || reader(pipe, writer, stop, p, pid))
            .map_err(|e| HostError::io("spawn the trace reader", e))?,
    );
    Ok((s, prog))
}

/// Starts the command (a `child` change of the journal; it dies with the recorder,
/// PR_SET_PDEATHSIG, until the journal has it).
fn start_command(journal: &mut Journal, s: &mut Session, command: &[String]) -> Result<(), HostError> {
    let Some((prog_name, args)) = command.split_first() else {
        return Ok(());
    };
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new(prog_name);
    cmd.args(args);
    // SAFETY: prctl only, in the forked child before exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| HostError::Worker(format!("cannot start {prog_name}: {e}")))?;
    let c = Change::child(journal.machine(), child.id() as i32, CHILD_GRACE);
    s.child = Some(child);
    journal.record(c)
}

/// Waits for the end (duration, command, signal, reader failure), printing progress; the
/// command's exit status if it ended.
fn wait_for_end(
    opts: &RecordOptions,
    s: &mut Session,
    prog: &Progress,
    signals: &SignalFlag,
    header: &mut TraceHeader,
    deadline: Option<Instant>,
    t0: Instant,
) -> Option<std::process::ExitStatus> {
    let mut last_print = Instant::now();
    let mut last_lines = 0u64;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(sig) = signals.caught() {
            header.interrupted_by = Some(sig);
            return None;
        }
        if prog.failed.load(Ordering::SeqCst) {
            return None;
        }
        if let Some(c) = s.child.as_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                s.child = None;
                return Some(st);
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        if opts.progress && last_print.elapsed() >= Duration::from_secs(1) {
            let l = prog.lines.load(Ordering::Relaxed);
            let dt = last_print.elapsed().as_secs_f64();
            eprintln!(
                "record: {:>4.0} s  {l} events  {:.0}/s  text {:.1} MiB  file {:.1} MiB  lost {}",
                t0.elapsed().as_secs_f64(),
                (l - last_lines) as f64 / dt,
                prog.text_bytes.load(Ordering::Relaxed) as f64 / (1 << 20) as f64,
                prog.spooled.load(Ordering::Relaxed) as f64 / (1 << 20) as f64,
                prog.lost_lines.load(Ordering::Relaxed),
            );
            last_print = Instant::now();
            last_lines = l;
        }
    }
}

/// Records the live kernel's tracepoints into `opts.output` (see the module doc); the header
/// written.
pub fn record(opts: &RecordOptions) -> Result<TraceHeader, HostError> {
    let (events, duration) = check_options(opts)?;
    let pid = std::process::id();
    let signals = SignalFlag::install();
    let conf_start = confounders::read();
    let mut header = start_header(opts, &events, pid);
    let writer = TraceWriter::create(&opts.output, &header, None).map_err(state_err)?;
    // Declared before the session: dropped (undone) after it.
    let mut journal = Journal::new(Machine::live(), knobs::default_state_file(pid));
    let (mut s, prog) = start_session(&mut journal, opts, &events, writer, pid)?;
    let inst = s.instance.clone();
    header.trace_start_ns = mono_ns();
    write(&inst.join("tracing_on"), "1")?;
    let t0 = Instant::now();
    let snapshot = if opts.snapshot {
        let a = mono_ns();
        let snap = take_snapshot(opts.progress)?;
        header.snapshot_window_ns = Some([a, mono_ns()]);
        Some(snap)
    } else {
        None
    };
    start_command(&mut journal, &mut s, &opts.command)?;
    let deadline = duration.map(|d| t0 + d);
    let mut child_status = wait_for_end(opts, &mut s, &prog, &signals, &mut header, deadline, t0);
    if child_status.is_none() {
        child_status = s.end_child();
    }
    // The end state as the last events left it: events off, then /proc.
    write(&inst.join("tracing_on"), "0")?;
    s.disable_events();
    header.trace_end_ns = mono_ns();
    header.duration_ns = header.trace_end_ns - header.trace_start_ns;
    let mut proc_end = procfs::proc_snapshot()?;
    proc_end.insert("meminfo".into(), procfs::read("/proc/meminfo")?);
    header.proc_end = proc_end;
    let t_drain = Instant::now();
    let writer = s.join_reader().expect("the reader runs until joined")?;
    let drain_s = t_drain.elapsed().as_secs_f64();
    header.lost_events = lost_events(&inst).max(prog.lost_lines.load(Ordering::SeqCst));
    header.buffer_size_kb = prog.buffer_kb.load(Ordering::SeqCst);
    drop(s);
    journal.undo_all()?;
    header.workload_status = child_status.and_then(|st| st.code());
    finish_file(opts, header, writer, snapshot, conf_start, &prog, drain_s)
}

/// Writes the end of the file (the snapshot, the header) and prints the summary.
fn finish_file(
    opts: &RecordOptions,
    mut header: TraceHeader,
    mut writer: TraceWriter,
    snapshot: Option<Snapshot>,
    conf_start: fraglab_spec::result::confounders::ConfounderReading,
    prog: &Progress,
    drain_s: f64,
) -> Result<TraceHeader, HostError> {
    let conf_end = confounders::read();
    header.confounders = serde_json::to_value(HostConfounders::from_readings(conf_start, conf_end))
        .expect("the confounders serialize");
    header.recorder_lines = prog.self_lines.load(Ordering::SeqCst);
    header.recorder_tids = vec![prog.tid.load(Ordering::SeqCst)];
    if let Some(snap) = &snapshot {
        writer.set_snapshot(snap).map_err(state_err)?;
    }
    header.lines = writer.lines();
    writer.finish(&header).map_err(state_err)?;
    // What finish put in: the snapshot's header.
    header.snapshot = snapshot.map(|s| s.header);
    if let Some(w) = lost_warning(&header) {
        eprintln!("{w}");
    }
    if opts.progress {
        eprintln!(
            "record: {} events in {:.1} s ({:.0}/s), {} lost, {} by the recorder itself; \
             reader CPU {:.1} s user + {:.1} s system, {:.1} s draining after the end; {}",
            header.lines,
            header.duration_ns as f64 / 1e9,
            header.lines as f64 / (header.duration_ns.max(1) as f64 / 1e9),
            header.lost_events,
            header.recorder_lines,
            prog.cpu_user_us.load(Ordering::SeqCst) as f64 / 1e6,
            prog.cpu_sys_us.load(Ordering::SeqCst) as f64 / 1e6,
            drain_s,
            opts.output.display()
        );
    }
    Ok(header)
}

/// Samples the enabled events for [`RATE_PROBE`] with tracing on and returns the per-CPU
/// buffer for the recording ([`size_buffer`] of the busiest CPU's bytes per second, from
/// `per_cpu/cpuN/stats`); the sample is then cleared. The machine's rate before the recorded
/// command starts can be lower than during it: [`lost_warning`] says so when events are lost.
fn probe_buffer_kb(inst: &Path, progress: bool) -> Result<u64, HostError> {
    write(&inst.join("tracing_on"), "1")?;
    std::thread::sleep(RATE_PROBE);
    write(&inst.join("tracing_on"), "0")?;
    let busiest = per_cpu_stat(inst, "bytes").into_iter().max().unwrap_or(0);
    // Clearing the buffer: truncating `trace` empties every CPU's ring.
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(inst.join("trace"))
        .map_err(|e| HostError::io("trace (clearing the rate probe)", e))?;
    let per_s = busiest as f64 / RATE_PROBE.as_secs_f64();
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
    let avail = procfs::mem_available().unwrap_or(0);
    let kb = size_buffer(per_s, cpus, avail);
    if progress {
        eprintln!(
            "record: events at {:.1} MiB/s on the busiest CPU before the start: {kb} KiB per CPU \
             ({BUFFER_HEADROOM_S} s of that; --buffer-kb sets it)",
            per_s / (1 << 20) as f64
        );
    }
    Ok(kb)
}

/// The per-CPU buffer (KiB) for events arriving at `bytes_per_s` on the busiest CPU:
/// [`BUFFER_HEADROOM_S`] seconds of them, at least [`DEFAULT_BUFFER_KB`], at most
/// [`MAX_AUTO_BUFFER_KB`] and at most 1/[`AUTO_BUFFER_MEM_DIVISOR`] of MemAvailable (`avail`
/// bytes) over all `cpus`.
pub fn size_buffer(bytes_per_s: f64, cpus: u64, avail: u64) -> u64 {
    let want = (bytes_per_s * BUFFER_HEADROOM_S as f64 / 1024.0).ceil() as u64;
    let mem_cap = avail / AUTO_BUFFER_MEM_DIVISOR / cpus.max(1) / 1024;
    want.clamp(DEFAULT_BUFFER_KB, MAX_AUTO_BUFFER_KB.max(DEFAULT_BUFFER_KB))
        .min(mem_cap.max(DEFAULT_BUFFER_KB))
}

/// A field of `per_cpu/cpuN/stats` for every CPU that has one.
fn per_cpu_stat(inst: &Path, key: &str) -> Vec<u64> {
    let Ok(rd) = std::fs::read_dir(inst.join("per_cpu")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stats")).ok())
        .filter_map(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().parse::<u64>().ok()).flatten()
            })
        })
        .collect()
}

/// When the kernel dropped events: how many, against what was recorded, and the fix — a
/// larger per-CPU buffer (four times the one used, or more), fewer events, or a lighter
/// workload. `None` when nothing was lost.
pub fn lost_warning(h: &TraceHeader) -> Option<String> {
    if h.lost_events == 0 {
        return None;
    }
    let share = 100.0 * h.lost_events as f64 / (h.lines + h.lost_events).max(1) as f64;
    Some(format!(
        "warning: {} events ({share:.1} % of those traced) were lost: the per-CPU buffer of {} \
         KiB filled faster than the recorder emptied it. Record again with --buffer-kb {} (or \
         more), fewer events (--events) or a lighter workload. The gaps are marked \
         [LOST n EVENTS] in the trace.",
        h.lost_events,
        h.buffer_size_kb,
        (h.buffer_size_kb * 4).max(DEFAULT_BUFFER_KB * 4)
    ))
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34: the buffer is sized from the events' measured rate, within its bounds.
    #[test]
    fn the_buffer_holds_seconds_of_the_probed_rate() {
        let gib = 1u64 << 30;
        // Idle: the floor.
        assert_eq!(size_buffer(1e5, 2, 20 * gib), DEFAULT_BUFFER_KB);
        // 10 MiB/s on the busiest CPU: 8 s of it.
        assert_eq!(size_buffer(10.0 * (1 << 20) as f64, 2, 20 * gib), 80 << 10);
        // A flood: capped per CPU…
        assert_eq!(size_buffer(1e12, 2, 1 << 50), MAX_AUTO_BUFFER_KB);
        // …and by memory: 1/16 of 16 GiB over 64 CPUs is 16 MiB, under the floor: the floor.
        assert_eq!(size_buffer(1e12, 64, 16 * gib), DEFAULT_BUFFER_KB);
        // 1/16 of 64 GiB over 8 CPUs: 512 MiB each.
        assert_eq!(size_buffer(1e12, 8, 64 * gib), 512 << 10);
    }

    /// Lost events give a warning with the numbers and the fix; none without losses.
    #[test]
    fn lost_events_warn_with_the_fix() {
        let mut h = TraceHeader {
            lines: 680,
            lost_events: 320,
            buffer_size_kb: 32 << 10,
            ..Default::default()
        };
        let w = lost_warning(&h).expect("a warning");
        assert!(w.contains("320 events (32.0 % of those traced) were lost"), "{w}");
        assert!(w.contains("--buffer-kb 131072"), "{w}");
        h.lost_events = 0;
        assert_eq!(lost_warning(&h), None);
    }
}
