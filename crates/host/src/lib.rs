//! fraglab-host: the host engine. It runs a spec's `[workload]` on the live Linux kernel of this
//! machine and reports the same [`RunResult`] the simulator does (`engine = "host"`), so reports
//! can put the two side by side.
//!
//! - [`preflight`] checks the machine (Linux, root, kernel ≥ 6.15, every knob the spec sets at
//!   its real path, memory and disk limits) and returns a [`Plan`] (what `--dry-run` prints).
//! - [`host_run`] applies the knobs under a [`KnobGuard`] (state file first, restored on every
//!   way out: normal end, error, panic, SIGINT/SIGTERM), forks one process per task instance and
//!   generator, samples /proc every second, and restores everything at the end.
//! - [`restore_from_state_file`] puts back the knobs of a run that was killed with SIGKILL.
//! - [`snapshot`] captures the /proc files and all knobs once.
//!
//! Where the host result differs from the simulator's (see the README of this crate in the
//! main docs): fault latency histograms have path `"host"` (the allocator path of a fault cannot
//! be seen from user space), order 9 = the fault mapped a PMD THP, order 0 = anything else;
//! `mixed_blocks` is 0 unless the kernel prints "Number of mixed blocks" (CONFIG_PAGE_OWNER);
//! `proc_start`/`proc_end` also hold `knobs` (`name = value` lines), `host` (kernel release,
//! free page reporting's reported_kib, DAMON threads) and, with tracing, `trace_counts` and
//! `trace`.

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fraglab_spec::result::{BurstResult, Histogram, RunResult, Sample, ThpChallengeResult, RESULT_SCHEMA};
use fraglab_spec::{Spec, TaskParams, TaskStep, TRACE_EVENTS};

mod error;
pub mod hugetlb;
pub mod knobs;
pub mod procfs;
mod signals;
pub mod trace;
mod worker;

pub use error::HostError;
pub use knobs::{
    default_state_file, find_state_files, knob_path, read_all_knobs, restore_from_state_file, Cleanup,
    KnobGuard, SavedKnob, StateFile,
};
pub use worker::FILES_PER_SLAB_PAGE;

const GIB: u64 = 1 << 30;

/// The oldest kernel the engine runs on (vm.defrag_mode and the 6.15 allocator).
pub const MIN_KERNEL: (u32, u32) = (6, 15);

/// How a host run is carried out.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Where the run's directory (its files) is created; default `/var/tmp`. The run makes a
    /// fresh subdirectory and removes it at the end.
    pub workdir: Option<PathBuf>,
    /// Refuse to start, or stop the run, if MemAvailable would fall / falls under this
    /// (default 3 GiB).
    pub mem_floor_bytes: u64,
    /// Refuse specs whose anonymous (and pipe-buffer) memory exceeds this (default 10 GiB).
    pub anon_cap_bytes: u64,
    /// Refuse specs whose `slab` steps would create more files than this (default 2,000,000).
    pub max_slab_files: u64,
    /// Sample period (default 1 s).
    pub sample_interval: Duration,
    /// Stop the run after this long even if the spec's `duration` is longer.
    pub max_duration: Option<Duration>,
    /// Record tracepoints (spec `run.trace`, else [`trace::DEFAULT_EVENTS`]).
    pub trace: bool,
    /// Bytes of trace text kept in `proc_end["trace"]` (default 4 MiB).
    pub trace_keep_bytes: usize,
    /// The state file (default `/run/fraglab-host-<pid>.restore`).
    pub state_file: Option<PathBuf>,
    /// Write real data into the files `read` steps read before the run and drop them from the
    /// page cache (POSIX_FADV_DONTNEED), so reads do I/O; false: sparse files (default true).
    pub prefill_read_files: bool,
    /// Take the difference between this machine's MemTotal and the spec's `machine.memory`
    /// out of the page allocator for the run, as a hugetlb pool ([`hugetlb`]), so memory
    /// pressure comes at the spec's size (default false).
    pub fit_memory: bool,
}

impl Default for HostOptions {
    fn default() -> HostOptions {
        HostOptions {
            workdir: None,
            mem_floor_bytes: 3 * GIB,
            anon_cap_bytes: 10 * GIB,
            max_slab_files: 2_000_000,
            sample_interval: Duration::from_secs(1),
            max_duration: None,
            trace: false,
            trace_keep_bytes: 4 << 20,
            state_file: None,
            prefill_read_files: true,
            fit_memory: false,
        }
    }
}

/// One knob as the run will change it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedKnob {
    pub name: String,
    pub path: PathBuf,
    pub current: String,
    pub new: String,
}

/// What [`host_run`] would do: the `--dry-run` output.
#[derive(Clone, Debug)]
pub struct Plan {
    pub spec_name: Option<String>,
    pub kernel_release: String,
    pub knobs: Vec<PlannedKnob>,
    /// Processes forked: task instances, thp_burst generators, thpchallenge threads.
    pub processes: u32,
    /// Peak anonymous memory of the workload (all processes at their peaks), bytes.
    pub planned_anon_bytes: u64,
    /// Pipe-buffer pages (`pipes` steps) held, bytes.
    pub planned_pipe_bytes: u64,
    /// Empty files created by `slab` steps.
    pub planned_slab_files: u64,
    /// Files `read` steps read (name, size) and files `write` steps write (name, end offset).
    pub read_files: BTreeMap<String, u64>,
    pub write_files: BTreeMap<String, u64>,
    /// fio small-file rings: (jobs, file size, files per job), one per `[[workload.fio_smallfiles]]`.
    pub fio: Vec<(u32, u64, u64)>,
    pub mem_available_bytes: u64,
    pub mem_floor_bytes: u64,
    pub anon_cap_bytes: u64,
    /// The parent of the run's directory.
    pub workdir_parent: PathBuf,
    pub duration: Duration,
    /// `--fit-memory`: the hugetlb pool the run will hold.
    pub fit: Option<hugetlb::Fit>,
    /// Things to know about this machine (free page reporting, DAMON, tracefs).
    pub notes: Vec<String>,
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / GIB as f64)
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "host run of {} on Linux {}",
            self.spec_name.as_deref().unwrap_or("(unnamed spec)"),
            self.kernel_release
        )?;
        if self.knobs.is_empty() {
            writeln!(f, "knobs: none set by the spec")?;
        } else {
            writeln!(f, "knobs (restored at the end):")?;
            let w = self.knobs.iter().map(|k| k.name.len()).max().unwrap_or(0);
            for k in &self.knobs {
                let same = if k.current == k.new { "  (unchanged)" } else { "" };
                writeln!(
                    f,
                    "  {:<w$}  {} -> {}{same}    [{}]",
                    k.name,
                    k.current,
                    k.new,
                    k.path.display()
                )?;
            }
        }
        writeln!(
            f,
            "workload: {} processes, duration at most {:.1} s",
            self.processes,
            self.duration.as_secs_f64()
        )?;
        writeln!(
            f,
            "memory: anonymous {} + pipe buffers {} (cap {}); MemAvailable {} (floor {})",
            gib(self.planned_anon_bytes),
            gib(self.planned_pipe_bytes),
            gib(self.anon_cap_bytes),
            gib(self.mem_available_bytes),
            gib(self.mem_floor_bytes)
        )?;
        if let Some(fit) = &self.fit {
            writeln!(
                f,
                "fit memory: {} hugetlb pages ({}) held for the run, leaving {} of {} to the \
                 page allocator (vm.nr_hugepages {} -> {}, restored at the end)",
                fit.pages,
                gib(fit.bytes()),
                gib(fit.mem_total - fit.bytes()),
                gib(fit.mem_total),
                fit.before,
                fit.pages
            )?;
        }
        if self.planned_slab_files > 0 {
            writeln!(f, "slab: {} empty files", self.planned_slab_files)?;
        }
        for (n, s) in &self.read_files {
            writeln!(f, "file {n}: {} read", gib(*s))?;
        }
        for (n, s) in &self.write_files {
            writeln!(f, "file {n}: {} written", gib(*s))?;
        }
        for (jobs, size, per_job) in &self.fio {
            writeln!(
                f,
                "fio: {jobs} jobs, each cycling through {per_job} files of {size} bytes ({} on disk)",
                gib(*jobs as u64 * per_job * size)
            )?;
        }
        writeln!(
            f,
            "files under a fresh directory in {} (removed at the end)",
            self.workdir_parent.display()
        )?;
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

impl Plan {
    fn knob_changes(&self) -> Vec<(String, String)> {
        self.knobs
            .iter()
            .map(|k| (k.name.clone(), k.new.clone()))
            .collect()
    }
}

/// `6.18.44-fc-v657` → (6, 18).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Peak anonymous bytes, pipe pages and slab files of one instance of a task program.
fn task_footprint(t: &TaskParams) -> (u64, u64, u64) {
    let mut live: BTreeMap<&str, u64> = BTreeMap::new();
    let (mut peak, mut pipes, mut files) = (0u64, 0u64, 0u64);
    // Two passes: mappings persist from one loop into the next.
    for pass in 0..2u32.min(t.loops) {
        for s in &t.steps {
            match s {
                TaskStep::Mmap { vma, size_bytes, .. } => {
                    live.insert(vma, size_bytes.next_multiple_of(4096));
                }
                TaskStep::Munmap { vma } => {
                    live.remove(vma.as_str());
                }
                TaskStep::Slab { count, reclaimable } if pass == 0 => {
                    if *reclaimable {
                        files += count * FILES_PER_SLAB_PAGE;
                    } else {
                        pipes += count;
                    }
                }
                _ => {}
            }
            peak = peak.max(live.values().sum());
        }
    }
    (peak, pipes * t.loops as u64, files * t.loops as u64)
}

/// The fio rings of a spec: (jobs, file size, files per job). The ring holds the working set
/// (default 1.5 × the spec's `machine.memory`, as in the simulator: on the host the workload
/// runs at the spec's absolute sizes, so a spec meant to fragment this machine sets its memory).
fn fio_rings(spec: &Spec) -> Vec<(u32, u64, u64)> {
    let Some(w) = spec.workload.as_ref() else {
        return Vec::new();
    };
    // 1.5 × the memory outside the hugetlb pool, as the simulator sizes it.
    let mem = spec
        .machine
        .memory_bytes
        .unwrap_or(0)
        .saturating_sub(spec.machine.hugetlb_pages << 21);
    w.fio_smallfiles
        .iter()
        .map(|f| {
            let ws = f.working_set_bytes.unwrap_or(mem / 2 * 3);
            let files = (ws / f.file_size_bytes.max(1)).max(f.jobs as u64);
            (f.jobs, f.file_size_bytes, files / f.jobs.max(1) as u64)
        })
        .collect()
}

fn statvfs(p: &Path) -> Option<(u64, u64)> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: zeroed statvfs is valid; c is a valid path string.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut s) == 0)
            .then(|| (s.f_bavail as u64 * s.f_frsize as u64, s.f_favail as u64))
    }
}

/// Checks that `spec` can run on this machine and says what the run would do. Errors: not
/// Linux, not root, kernel older than [`MIN_KERNEL`], a knob missing at its real path, a
/// generator the host engine does not run (kbuild, pgbench, `[[op]]` specs), or a safety limit
/// (anonymous cap, MemAvailable floor, slab files, disk space).
pub fn preflight(spec: &Spec, opts: &HostOptions) -> Result<Plan, HostError> {
    if !cfg!(target_os = "linux")
        || std::fs::read_to_string("/proc/sys/kernel/ostype")
            .map(|s| s.trim().to_string())
            .ok()
            != Some("Linux".into())
    {
        return Err(HostError::NotLinux);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(HostError::NotRoot);
    }
    let release = procfs::read("/proc/sys/kernel/osrelease")?.trim().to_string();
    match kernel_version(&release) {
        Some(v) if v >= MIN_KERNEL => {}
        _ => {
            return Err(HostError::KernelTooOld {
                found: release,
                need: MIN_KERNEL,
            })
        }
    }
    let Some(w) = spec.workload.as_ref() else {
        return Err(HostError::Unsupported(format!(
            "{}: a list of [[op]]s (the host engine runs a [workload])",
            spec.file
        )));
    };
    if let Some(k) = w.kbuild.first() {
        return Err(HostError::Unsupported(format!(
            "{}:{}: [[workload.kbuild]]",
            spec.file, k.line
        )));
    }
    if let Some(p) = w.pgbench.first() {
        return Err(HostError::Unsupported(format!(
            "{}:{}: [[workload.pgbench]]",
            spec.file, p.line
        )));
    }
    if let Some(v) = w.vm_scalability.first() {
        return Err(HostError::Unsupported(format!(
            "{}:{}: [[workload.vm_scalability]]",
            spec.file, v.line
        )));
    }
    let mut knobs = Vec::new();
    for (name, value) in &spec.knobs {
        let path = knob_path(name);
        if !path.exists() {
            return Err(HostError::MissingKnob {
                name: name.clone(),
                path: path.display().to_string(),
            });
        }
        knobs.push(PlannedKnob {
            name: name.clone(),
            current: knobs::read_knob(&path)?,
            new: value.to_string(),
            path,
        });
    }
    let (mut anon, mut pipes, mut files, mut procs) = (0u64, 0u64, 0u64, 0u32);
    let mut read_files: BTreeMap<String, u64> = BTreeMap::new();
    let mut write_files: BTreeMap<String, u64> = BTreeMap::new();
    for t in &w.task {
        let (a, p, f) = task_footprint(t);
        anon += a * t.count as u64;
        pipes += p * 4096 * t.count as u64;
        files += f * t.count as u64;
        procs += t.count;
        for s in &t.steps {
            match s {
                TaskStep::Read { file, file_size, .. } => {
                    let e = read_files.entry(file.clone()).or_default();
                    *e = (*e).max(*file_size);
                }
                TaskStep::Write {
                    file, offset, length, ..
                } => {
                    let e = write_files.entry(file.clone()).or_default();
                    *e = (*e).max(offset + length);
                }
                _ => {}
            }
        }
    }
    for b in &w.thp_burst {
        anon += b.size_bytes;
        procs += 1;
    }
    for c in &w.thpchallenge {
        anon += c.size_bytes * c.threads as u64;
        procs += c.threads;
    }
    let fio = fio_rings(spec);
    let (mut fio_disk, mut fio_files) = (0u64, 0u64);
    for (jobs, size, per_job) in &fio {
        procs += jobs;
        fio_files += *jobs as u64 * per_job;
        fio_disk += *jobs as u64 * per_job * size;
    }
    let meminfo = procfs::read("/proc/meminfo")?;
    let fit = if spec.machine.hugetlb_pages > 0 {
        if opts.fit_memory {
            return Err(HostError::Unsupported(format!(
                "{}: --fit-memory with machine.hugetlb_pages (the spec already sets the pool)",
                spec.file
            )));
        }
        Some(hugetlb::exact(
            &meminfo,
            hugetlb::current_pages()?,
            spec.machine.hugetlb_pages,
        )?)
    } else if opts.fit_memory {
        let target = spec.machine.memory_bytes.ok_or_else(|| {
            HostError::Unsupported(format!("{}: --fit-memory needs machine.memory", spec.file))
        })?;
        Some(hugetlb::plan(&meminfo, hugetlb::current_pages()?, target)?)
    } else {
        None
    };
    // The pool comes out of what is available now.
    let avail = procfs::mem_available()?.saturating_sub(fit.as_ref().map_or(0, |f| f.bytes()));
    if anon + pipes > opts.anon_cap_bytes {
        return Err(HostError::Unsafe(format!(
            "the workload maps {} of anonymous memory and pipe buffers, over the cap of {}",
            gib(anon + pipes),
            gib(opts.anon_cap_bytes)
        )));
    }
    if avail.saturating_sub(anon + pipes) < opts.mem_floor_bytes {
        return Err(HostError::Unsafe(format!(
            "MemAvailable {} minus the workload's {} is under the floor of {}",
            gib(avail),
            gib(anon + pipes),
            gib(opts.mem_floor_bytes)
        )));
    }
    if files > opts.max_slab_files {
        return Err(HostError::Unsafe(format!(
            "slab steps would create {files} files, over the limit of {}",
            opts.max_slab_files
        )));
    }
    let parent = opts.workdir.clone().unwrap_or_else(|| PathBuf::from("/var/tmp"));
    if !parent.is_dir() {
        return Err(HostError::io(
            parent.display().to_string(),
            std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        ));
    }
    let disk: u64 = read_files.values().sum::<u64>() + write_files.values().sum::<u64>() + fio_disk;
    if let Some((bytes, inodes)) = statvfs(&parent) {
        if disk + GIB > bytes {
            return Err(HostError::Unsafe(format!(
                "the run's files need {} but {} has {} free",
                gib(disk),
                parent.display(),
                gib(bytes)
            )));
        }
        if files + fio_files + 10_000 > inodes {
            return Err(HostError::Unsafe(format!(
                "slab steps and fio need {} inodes, {} has {inodes} free",
                files + fio_files,
                parent.display()
            )));
        }
    }
    let mut notes = Vec::new();
    let facts = procfs::host_facts();
    if !fio_rings(spec).is_empty()
        && procfs::mount_options(&parent).is_some_and(|o| o.split(',').any(|x| x == "discard"))
    {
        notes.push(format!(
            "{} is on a filesystem mounted with `discard`: every unlink waits for a discard \
             (370 to 1,800 a second on this VM's ext4), so fio's deletes and the removal of the \
             run's files at the end are slow",
            parent.display()
        ));
    }
    if facts.contains("page_reporting_reported_kib") {
        notes.push(
            "free page reporting is active: THP faults on memory reported to the hypervisor cost \
             ~5 ms instead of ~0.2 ms (reported_kib is recorded in proc_start/proc_end[\"host\"])"
                .into(),
        );
    }
    if facts
        .lines()
        .any(|l| l.starts_with("kdamond_threads ") && l != "kdamond_threads 0")
    {
        notes.push("DAMON (kdamond) runs: idle page cache may be reclaimed behind the workload".into());
    }
    if !std::fs::read_to_string("/proc/pagetypeinfo").is_ok_and(|t| t.contains("Number of mixed blocks")) {
        notes.push(
            "no \"Number of mixed blocks\" in /proc/pagetypeinfo: samples report mixed_blocks = 0".into(),
        );
    }
    if opts.trace {
        notes.push(match trace::tracefs_mount() {
            Some(m) => format!("tracing in a private instance under {}", m.display()),
            None => "tracefs not mounted: it will be mounted for the run and unmounted after".into(),
        });
    }
    let total = procfs::read("/proc/meminfo")
        .ok()
        .and_then(|t| procfs::meminfo_bytes(&t, "MemTotal"))
        .unwrap_or(0);
    if fit.is_some() {
        notes.push(format!(
            "with the pool the zones still span {}: their watermarks (min {} pages in all) are \
             the large machine's, and compaction scans past the pool's blocks",
            gib(total),
            procfs::read("/proc/zoneinfo")
                .ok()
                .and_then(|z| procfs::zone_min_pages(&z))
                .map_or("?".to_string(), |p| p.to_string())
        ));
    } else if let Some(m) = spec.machine.memory_bytes {
        if m.abs_diff(total) > total / 10 {
            notes.push(format!(
                "the spec's machine.memory ({}) is the simulator's; this machine has {} \
                 (MemTotal), and the workload runs at the spec's absolute sizes \
                 (--fit-memory holds the difference in a hugetlb pool)",
                gib(m),
                gib(total)
            ));
        }
    }
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if cpus > 0 && cpus as u32 != spec.machine.cpus {
        notes.push(format!(
            "the spec's machine.cpus is {}; this machine has {cpus} online CPUs",
            spec.machine.cpus
        ));
    }
    let global: Vec<&str> = w
        .task
        .iter()
        .flat_map(|t| &t.steps)
        .filter_map(|s| match s {
            TaskStep::CompactMemory => Some("compact_memory"),
            TaskStep::DropCaches => Some("drop_caches"),
            _ => None,
        })
        .collect();
    if !global.is_empty() {
        notes.push(format!(
            "{} step(s) act on the whole machine, not only on this workload",
            global.join(", ")
        ));
    }
    if !spec.run.trace.is_empty() && !opts.trace {
        notes.push("the spec's run.trace is recorded only with tracing on (HostOptions::trace)".into());
    }
    let mut duration = Duration::from_nanos(w.duration_ns);
    if let Some(m) = opts.max_duration {
        duration = duration.min(m);
    }
    Ok(Plan {
        spec_name: spec.name.clone(),
        kernel_release: release,
        knobs,
        processes: procs,
        planned_anon_bytes: anon,
        planned_pipe_bytes: pipes,
        planned_slab_files: files,
        read_files,
        write_files,
        fio,
        mem_available_bytes: avail,
        mem_floor_bytes: opts.mem_floor_bytes,
        anon_cap_bytes: opts.anon_cap_bytes,
        workdir_parent: parent,
        duration,
        fit,
        notes,
    })
}

/// The run's directory, removed (with everything in it) on drop.
struct WorkDir(PathBuf);

impl WorkDir {
    fn create(parent: &Path) -> Result<WorkDir, HostError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let p = parent.join(format!("fraglab-host-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&p).map_err(|e| HostError::io(p.display().to_string(), e))?;
        Ok(WorkDir(p))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("fraglab-host: cannot remove {}: {e}", self.0.display());
        }
    }
}

/// Creates a file `read` steps read: `size` bytes of data, written back and dropped from the
/// page cache (fdatasync(2), posix_fadvise(2) POSIX_FADV_DONTNEED), or a sparse file.
fn make_read_file(path: &Path, size: u64, fill: bool) -> Result<(), HostError> {
    let err = |e| HostError::io(path.display().to_string(), e);
    let f = std::fs::File::create(path).map_err(err)?;
    if fill {
        let b = vec![0x3cu8; 1 << 20];
        let mut off = 0;
        while off < size {
            let n = (size - off).min(b.len() as u64) as usize;
            f.write_all_at(&b[..n], off).map_err(err)?;
            off += n as u64;
        }
        f.sync_data().map_err(err)?;
        use std::os::fd::AsRawFd;
        // SAFETY: advice on our own descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    f.set_len(size).map_err(err)
}

/// The full group:name of each event of the spec's `run.trace` (which names them without the
/// group), or [`trace::DEFAULT_EVENTS`].
fn trace_events(spec: &Spec) -> Vec<String> {
    if spec.run.trace.is_empty() {
        return trace::DEFAULT_EVENTS.iter().map(|s| s.to_string()).collect();
    }
    spec.run
        .trace
        .iter()
        .filter_map(|n| {
            TRACE_EVENTS
                .iter()
                .find(|e| e.split_once(':').is_some_and(|(_, x)| x == n))
                .map(|e| e.to_string())
        })
        .collect()
}

fn start_proc(knobs: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, HostError> {
    let mut m = procfs::proc_snapshot()?;
    m.insert("knobs".into(), knobs::knobs_text(knobs));
    m.insert("host".into(), procfs::host_facts());
    Ok(m)
}

/// One-shot capture: one [`Sample`], /proc/buddyinfo, pagetypeinfo, zoneinfo, vmstat, every
/// known knob (`proc_start["knobs"]`, `name = value` lines; [`read_all_knobs`] gives them as a
/// map) and the host facts (`proc_start["host"]`). `proc_end` is the same as `proc_start`.
pub fn snapshot() -> Result<RunResult, HostError> {
    let proc_start = start_proc(&read_all_knobs())?;
    Ok(RunResult {
        schema: RESULT_SCHEMA,
        engine: "host".into(),
        samples: vec![procfs::sample(0)?],
        proc_end: proc_start.clone(),
        proc_start,
        ..Default::default()
    })
}

/// Runs `spec`'s workload on this machine and returns its result (`engine = "host"`).
///
/// The knobs are restored before this returns, whatever happens: on success, on error (the
/// workload processes are SIGKILLed by pid first), on a panic (drop during unwinding), and on
/// SIGINT/SIGTERM (then the error is [`HostError::Interrupted`]). A run killed with SIGKILL
/// leaves its state file for [`restore_from_state_file`]; its workers die with it
/// (PR_SET_PDEATHSIG).
pub fn host_run(spec: &Spec, opts: &HostOptions) -> Result<RunResult, HostError> {
    let plan = preflight(spec, opts)?;
    let w = spec.workload.as_ref().expect("preflight checked");
    let _lock = knobs::RunLock::acquire()?;
    let signals = signals::SignalFlag::install();
    let dir = WorkDir::create(&plan.workdir_parent)?;
    let slab_dir = dir.0.join("slab");
    std::fs::create_dir(&slab_dir).map_err(|e| HostError::io(slab_dir.display().to_string(), e))?;
    let mut files = BTreeMap::new();
    for (i, name) in plan.read_files.keys().chain(plan.write_files.keys()).enumerate() {
        files
            .entry(name.clone())
            .or_insert_with(|| dir.0.join(format!("file{i}")));
    }
    for (name, size) in &plan.read_files {
        make_read_file(&files[name], *size, opts.prefill_read_files)?;
        if let Some(sig) = signals.caught() {
            return Err(HostError::Interrupted(sig));
        }
    }
    let state_file = opts
        .state_file
        .clone()
        .unwrap_or_else(|| default_state_file(std::process::id()));
    let mut guard = KnobGuard::apply(
        &plan.knob_changes(),
        &state_file,
        knobs::Cleanup {
            workdir: Some(dir.0.clone()),
            ..Default::default()
        },
    )?;
    // --fit-memory: the pool is recorded in the state file before it is filled, and given
    // back (Pool's drop) on every way out of this function.
    let mut pool = match &plan.fit {
        Some(fit) => {
            guard.update_cleanup(|c| c.hugetlb_pages = Some(fit.before))?;
            Some(hugetlb::Pool::reserve(fit)?)
        }
        None => None,
    };
    let run_knobs = read_all_knobs();
    let mut tracing = if opts.trace {
        let t = trace::TraceSession::start(&trace_events(spec), opts.trace_keep_bytes)?;
        let (inst, mount) = t.leftovers();
        guard.update_cleanup(|c| {
            c.trace_instance = Some(inst);
            c.trace_mount = mount;
        })?;
        Some(t)
    } else {
        None
    };
    let mut proc_start = start_proc(&run_knobs)?;
    if let (Some(fit), Some(p)) = (&plan.fit, &pool) {
        let host = proc_start.entry("host".into()).or_default();
        host.push_str(&format!(
            "fit_memory_target_bytes {}\nfit_memory_hugetlb_pages {}\nfit_memory_hugetlb_pages_asked {}\nfit_memory_outside_bytes {}\n",
            fit.target,
            p.pages,
            fit.pages,
            p.outside(fit)
        ));
    }
    let vm_start = procfs::parse_vmstat(&procfs::read("/proc/vmstat")?);
    let t0 = Instant::now();
    let clock = worker::Clock {
        t0,
        deadline: t0 + plan.duration,
        seed: spec.run.seed,
    };
    let mut samples: Vec<Sample> = vec![procfs::sample(0)?];
    let mut jobs = Vec::new();
    for t in &w.task {
        for instance in 0..t.count {
            jobs.push(worker::Job::Task {
                params: t.clone(),
                instance,
                files: files.clone(),
                slab_dir: slab_dir.clone(),
            });
        }
    }
    jobs.extend(w.thp_burst.iter().cloned().map(worker::Job::ThpBurst));
    for c in &w.thpchallenge {
        jobs.extend((0..c.threads).map(|_| worker::Job::ThpChallenge(c.clone())));
    }
    // fio beside another generator is background load (as in the simulator): the run ends
    // with the others, and the fio jobs are then stopped.
    let foreground = jobs.len();
    let fio_background = foreground > 0;
    for (i, (f, (jobs_n, _, per_job))) in w.fio_smallfiles.iter().zip(fio_rings(spec)).enumerate() {
        let fio_dir = dir.0.join(format!("fio{i}"));
        std::fs::create_dir(&fio_dir).map_err(|e| HostError::io(fio_dir.display().to_string(), e))?;
        for job in 0..jobs_n {
            jobs.push(worker::Job::Fio {
                params: f.clone(),
                job,
                dir: fio_dir.clone(),
                slots: per_job,
            });
        }
    }
    let mut workers = Vec::new();
    for j in &jobs {
        workers.push(worker::spawn(j, clock)?);
    }
    let mut next_sample = opts.sample_interval;
    let mut killed_at_deadline = Vec::new();
    let mut stopped_background = Vec::new();
    let grace = Duration::from_secs(5);
    let stop = |workers: &mut Vec<worker::Worker>, guard: &mut KnobGuard| -> Result<(), HostError> {
        for wk in workers.iter_mut() {
            wk.kill();
        }
        guard.restore()
    };
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if let Some(sig) = signals.caught() {
            stop(&mut workers, &mut guard)?;
            return Err(HostError::Interrupted(sig));
        }
        let avail = procfs::mem_available()?;
        if avail < opts.mem_floor_bytes {
            stop(&mut workers, &mut guard)?;
            return Err(HostError::MemoryFloor {
                available: avail,
                floor: opts.mem_floor_bytes,
            });
        }
        let mut running = 0;
        for (i, wk) in workers.iter_mut().enumerate() {
            if !wk.poll() && (i < foreground || !fio_background) {
                running += 1;
            }
        }
        if running == 0 && fio_background {
            for wk in workers[foreground..].iter_mut() {
                if !wk.poll() {
                    wk.kill();
                    stopped_background.push(wk.pid);
                }
            }
        }
        let el = t0.elapsed();
        if el >= next_sample {
            samples.push(procfs::sample(el.as_nanos() as u64)?);
            next_sample += opts.sample_interval;
        }
        if running == 0 {
            break;
        }
        if el > plan.duration + grace {
            // Workers stop themselves at the deadline; one still running 5 s later is stuck in
            // a long step (a big write, compact_memory) and is killed without failing the run.
            for wk in workers.iter_mut() {
                if !wk.poll() {
                    wk.kill();
                    killed_at_deadline.push(wk.pid);
                }
            }
            break;
        }
    }
    let end = t0.elapsed();
    let end_ns = end.as_nanos() as u64;
    if samples.last().is_some_and(|s| s.t_ns < end_ns) {
        samples.push(procfs::sample(end_ns)?);
    }
    let vm_end = procfs::parse_vmstat(&procfs::read("/proc/vmstat")?);
    let mut proc_end = start_proc(&run_knobs)?;
    let mut trace_counts = BTreeMap::new();
    if let Some(t) = tracing.take() {
        let (counts, text) = t.finish();
        trace_counts = counts.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        proc_end.insert(
            "trace_counts".into(),
            counts.iter().map(|(k, v)| format!("{k} {v}\n")).collect(),
        );
        proc_end.insert("trace".into(), text);
    }
    guard.restore()?;
    if let Some(p) = pool.as_mut() {
        p.release()?;
    }

    let mut faults: BTreeMap<u32, Histogram> = BTreeMap::new();
    let mut bursts: Vec<BurstResult> = Vec::new();
    let (mut huge, mut base) = (Histogram::default(), Histogram::default());
    let mut errors = Vec::new();
    for wk in &workers {
        match wk.report() {
            Ok(r) => {
                for (o, h) in &r.faults {
                    faults.entry(*o).or_default().merge(h);
                }
                bursts.extend(r.bursts);
                huge.merge(&r.thpc_huge);
                base.merge(&r.thpc_base);
            }
            Err(_) if killed_at_deadline.contains(&wk.pid) || stopped_background.contains(&wk.pid) => {}
            Err(e) => errors.push(e),
        }
    }
    if !killed_at_deadline.is_empty() {
        let host = proc_end.entry("host".into()).or_default();
        host.push_str(&format!(
            "workers_killed_at_deadline {}\n",
            killed_at_deadline.len()
        ));
    }
    if !stopped_background.is_empty() {
        let host = proc_end.entry("host".into()).or_default();
        host.push_str(&format!("background_jobs_stopped {}\n", stopped_background.len()));
    }
    if !errors.is_empty() {
        return Err(HostError::Worker(errors.join("; ")));
    }
    bursts.sort_by_key(|b| b.start_ns);
    let vmstat_delta = vm_end
        .iter()
        .map(|(k, v)| (k.clone(), v - vm_start.get(k).copied().unwrap_or(0)))
        .collect();
    Ok(RunResult {
        schema: RESULT_SCHEMA,
        engine: "host".into(),
        spec_name: spec.name.clone(),
        seed: spec.run.seed,
        duration_ns: end_ns,
        vmstat_delta,
        samples,
        fault_latency: faults.iter().map(|(o, h)| h.to_latency(*o, "host")).collect(),
        builds: Vec::new(),
        bursts,
        thpchallenge: (!w.thpchallenge.is_empty()).then(|| ThpChallengeResult::from_histograms(&huge, &base)),
        pgbench: None,
        vm_scalability: Vec::new(),
        trace_counts,
        sim_work: BTreeMap::new(),
        pageblock_maps: Vec::new(),
        proc_start,
        proc_end,
        wall_ns: end_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(kernel_version("5.15.0"), Some((5, 15)));
        assert!(kernel_version("6.9") < Some(MIN_KERNEL));
        assert!(kernel_version("6.15-rc1") >= Some(MIN_KERNEL));
        assert_eq!(kernel_version("x"), None);
    }

    #[test]
    fn footprint_peak_and_loops() {
        let spec = fraglab_spec::parse_spec(
            r#"
[machine]
memory = "1GiB"
[workload]
duration = "10s"
[[workload.task]]
loops = 3
steps = [
  { mmap = "a", size = "64MiB" },
  { mmap = "b", size = "32MiB" },
  { munmap = "a" },
  { pipes = 10 },
  { slab = 5 },
]
"#,
            "t.toml",
        )
        .unwrap();
        let t = &spec.workload.unwrap().task[0];
        let (a, p, f) = task_footprint(t);
        // Peak: a + b live at once; second pass: b (kept) + a again.
        assert_eq!(a, 96 << 20);
        assert_eq!(p, 30);
        assert_eq!(f, 15 * FILES_PER_SLAB_PAGE);
    }
}
