//! The workload processes: each `[[workload.task]]` instance, each thp_burst generator and each
//! thpchallenge thread runs in a process of its own (fork(2)), so that each has its own mm as
//! the simulator models it. A worker sends a JSON [`WorkerReport`] back through a pipe when it
//! ends, and dies with the engine (`PR_SET_PDEATHSIG` = SIGKILL, prctl(2)) if the engine is
//! killed.
//!
//! Fault timing: every first write to a page is timed with `CLOCK_MONOTONIC` (`Instant`). On
//! the first touch of a 2 MiB-aligned region the worker reads `/proc/self/pagemap`
//! (Documentation/admin-guide/mm/pagemap.rst: bit 63 present, bits 0–54 PFN for root) for the
//! region's first and last page: both present, PFN 512-aligned and contiguous means the fault
//! mapped a PMD THP (order 9); otherwise the fault is counted as order 0 (mTHP orders are not
//! told apart). Which allocator path served a fault cannot be seen from user space, so every
//! histogram has path `"host"`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fraglab_spec::result::{BurstResult, Histogram};
use fraglab_spec::{
    Fadvice, FilesOp, FioSmallFilesParams, TaskParams, TaskStep, ThpBurstParams, ThpChallengeParams,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

const PAGE: usize = 4096;
const PMD_PAGES: usize = 512;
const PMD: usize = PAGE * PMD_PAGES;

/// Empty files created per page of reclaimable slab a `slab` step asks for: an ext4 inode
/// (`ext4_inode_cache`, about 1.1 KiB) plus its dentry (192 B) is roughly a third of a page.
pub const FILES_PER_SLAB_PAGE: u64 = 3;

/// What a worker sends back.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Fault latency by folio order (9: PMD THP, 0: everything else).
    pub faults: BTreeMap<u32, Histogram>,
    pub bursts: Vec<BurstResult>,
    pub thpc_huge: Histogram,
    pub thpc_base: Histogram,
    /// The worker stopped because the run's duration ended.
    pub hit_deadline: bool,
    /// Phases: the measured part had started when the worker ended (its histograms cover
    /// that part; otherwise they are the prelude's, and the engine leaves them out).
    #[serde(default)]
    pub measured: bool,
    pub error: Option<String>,
    // H5: census steps and read throughput.
    /// The `census` steps this worker ran.
    #[serde(default)]
    pub census: Vec<fraglab_spec::result::CensusResult>,
    /// A task's `read` steps: bytes read and the wall time they took (None without reads).
    #[serde(default)]
    pub reads: Option<fraglab_spec::result::TaskReadResult>,
    /// Issue 33: the `sample` steps this worker ran, in order.
    #[serde(default)]
    pub named_samples: Vec<fraglab_spec::result::NamedSample>,
}

/// What a worker runs.
#[derive(Clone, Debug)]
pub enum Job {
    Task {
        params: TaskParams,
        instance: u32,
        /// Spec file name → path in the run's directory (a file set's name → its directory,
        /// holding files `0`, `1`, ...).
        files: BTreeMap<String, PathBuf>,
        /// Where `slab` steps create their files.
        slab_dir: PathBuf,
        /// What the worker that starts the measured part does first.
        hooks: MeasureHooks,
    },
    ThpBurst(ThpBurstParams),
    ThpChallenge(ThpChallengeParams),
    /// One fio job of `[[workload.fio_smallfiles]]`: files `jobN-SLOT` in `dir`, `slots` of
    /// them in its share of the ring.
    Fio {
        params: FioSmallFilesParams,
        job: u32,
        dir: PathBuf,
        slots: u64,
    },
}

impl Job {
    pub fn name(&self) -> String {
        match self {
            Job::Task { params, instance, .. } => format!("task {}[{instance}]", params.name),
            Job::ThpBurst(_) => "thp_burst".into(),
            Job::ThpChallenge(_) => "thpchallenge".into(),
            Job::Fio { job, .. } => format!("fio[{job}]"),
        }
    }
}

/// What the worker that starts the measured part (`{ measure = true }`) does before it reads
/// /proc/vmstat, in this order.
#[derive(Clone, Debug, Default)]
pub struct MeasureHooks {
    /// The same start at the measured part (`HostOptions::capture_at_measure`): capture the
    /// machine into this snapshot file.
    pub capture_to: Option<PathBuf>,
    /// With a traced run: the tracefs instance's `trace_marker`, where it writes the phase
    /// marker `fraglab: measure` that `fraglab trace diff` starts the kernel's side at.
    pub trace_marker: Option<PathBuf>,
}

/// A running worker, seen from the engine.
pub struct Worker {
    pub pid: libc::pid_t,
    pub name: String,
    pipe: File,
    buf: Vec<u8>,
    /// The wait status once reaped.
    pub status: Option<i32>,
}

/// The run's clock, shared (by value) with every worker.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub t0: Instant,
    pub deadline: Instant,
    pub seed: u64,
    /// Phases: where the workers learn that the measured part has started.
    pub phases: PhaseBoard,
    /// H7: the hugetlb pool the run holds before any step (`machine.hugetlb_pages` or
    /// `--fit-memory`'s pool; 0 without): `nr_hugepages` steps write it plus their count.
    pub hugetlb_base: u64,
}

/// Phases (`{ measure = true }`): one word of memory shared by the engine and every worker
/// (an anonymous MAP_SHARED mapping made before the workers are forked, mmap(2)): 0 until
/// the measured part starts, then its start in ns since `t0`, plus 1. The first worker to
/// run the step sets it (compare-and-swap, so at most once per run), reads /proc/vmstat and
/// sends both to the engine through its pipe ([`MeasureMsg`]); every worker empties its
/// latency histograms the first time it sees the word set, so that they cover the measured
/// part. The engine unmaps it when the run is over ([`PhaseBoard::unmap`]); the workers'
/// copies go with them.
#[derive(Clone, Copy, Debug)]
pub struct PhaseBoard(usize);

impl PhaseBoard {
    pub fn new() -> Result<PhaseBoard, crate::HostError> {
        // SAFETY: a fresh shared anonymous page, only used through `word`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(crate::HostError::io(
                "mmap (phases)",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(PhaseBoard(p as usize))
    }

    fn word(&self) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: a page-aligned mapping of PAGE bytes that lives until `unmap`, which is
        // called after every worker has been reaped; the page starts zeroed.
        unsafe { &*(self.0 as *const std::sync::atomic::AtomicU64) }
    }

    /// When the measured part started (ns since `t0`), if it has.
    pub fn measure_start(&self) -> Option<u64> {
        self.word()
            .load(std::sync::atomic::Ordering::Acquire)
            .checked_sub(1)
    }

    /// Starts the measured part at `t_ns`; false if it had started already.
    fn try_start(&self, t_ns: u64) -> bool {
        use std::sync::atomic::Ordering;
        self.word()
            .compare_exchange(0, t_ns + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Unmaps the word (the engine, once every worker is reaped).
    pub fn unmap(self) {
        // SAFETY: our own mapping, not used after this.
        unsafe {
            libc::munmap(self.0 as *mut _, PAGE);
        }
    }
}

/// Phases: what the worker that started the measured part sends the engine (one line of JSON
/// before its report): when, and /proc/vmstat then.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasureMsg {
    pub measure_ns: u64,
    pub vmstat: BTreeMap<String, i64>,
    /// With a capture at the measured part: the file and how long the capture took (ns),
    /// ended right before `measure_ns`.
    #[serde(default)]
    pub capture: Option<(PathBuf, u64)>,
}

/// Forks a worker for `job`. The child never returns from this function.
pub fn spawn(job: &Job, clock: Clock) -> Result<Worker, crate::HostError> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(crate::HostError::io("pipe2", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors are fresh and owned here.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork; the child only runs this crate's code and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(crate::HostError::io("fork", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(rd);
        // SAFETY: prctl/getppid have no memory preconditions.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
        }
        crate::signals::reset_in_child();
        let mut f = File::from(wr);
        let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_job(job, clock, &f)))
            .unwrap_or_else(|_| WorkerReport {
                error: Some("worker panicked".into()),
                ..Default::default()
            });
        let ok = report.error.is_none();
        let _ = f.write_all(serde_json::to_string(&report).unwrap_or_default().as_bytes());
        drop(f);
        // SAFETY: leave the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) }
    }
    drop(wr);
    // SAFETY: fcntl on our read descriptor.
    unsafe {
        let fl = libc::fcntl(rd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(rd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    Ok(Worker {
        pid,
        name: job.name(),
        pipe: File::from(rd),
        buf: Vec::new(),
        status: None,
    })
}

impl Worker {
    /// Reads what the worker has written so far and reaps it if it has exited; true once it has.
    pub fn poll(&mut self) -> bool {
        self.drain();
        if self.status.is_none() {
            let mut st = 0;
            // SAFETY: waitpid on our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
            if r == self.pid {
                self.status = Some(st);
                self.drain();
            }
        }
        self.status.is_some()
    }

    fn drain(&mut self) {
        let mut chunk = [0u8; 8192];
        loop {
            match std::io::Read::read(&mut self.pipe, &mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// SIGKILLs the worker (by its pid) if it is still running, and reaps it.
    pub fn kill(&mut self) {
        if self.status.is_none() {
            // SAFETY: signalling and reaping our own child, which has not been reaped yet.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                let mut st = 0;
                libc::waitpid(self.pid, &mut st, 0);
                self.status = Some(st);
            }
            self.drain();
        }
    }

    /// Phases: the measure message the worker sent, if it started the measured part.
    pub fn measure(&self) -> Option<MeasureMsg> {
        let (lines, _) = split_messages(&self.buf);
        lines.iter().find_map(|l| serde_json::from_slice(l).ok())
    }

    /// The report, once the worker has exited.
    pub fn report(&self) -> Result<WorkerReport, String> {
        let st = self.status.unwrap_or(-1);
        let rep: Option<WorkerReport> = serde_json::from_slice(split_messages(&self.buf).1).ok();
        match rep {
            Some(r) => match &r.error {
                Some(e) => Err(format!("{}: {e}", self.name)),
                None => Ok(r),
            },
            None if libc::WIFSIGNALED(st) => Err(format!(
                "{} (pid {}) killed by signal {}",
                self.name,
                self.pid,
                libc::WTERMSIG(st)
            )),
            None => Err(format!("{} (pid {}) ended without a report", self.name, self.pid)),
        }
    }
}

/// What a worker wrote: the lines of its messages (each ending with a newline) and its report
/// (after the last newline; serde_json writes none inside a value).
fn split_messages(buf: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    match buf.iter().rposition(|&b| b == b'\n') {
        Some(i) => (buf[..i].split(|&b| b == b'\n').collect(), &buf[i + 1..]),
        None => (Vec::new(), buf),
    }
}

#[cfg(test)]
pub(crate) fn split_messages_for_test(buf: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    split_messages(buf)
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A worker's own state.
struct Cx<'p> {
    clock: Clock,
    pagemap: Option<File>,
    report: WorkerReport,
    rng: ChaCha8Rng,
    /// The pipe to the engine (phases' measure message).
    pipe: Option<&'p File>,
    /// Phases: the histograms were emptied when the measured part started.
    measuring: bool,
    /// What the worker that starts the measured part does first (see `Job::Task`).
    hooks: MeasureHooks,
}

impl Cx<'_> {
    /// Phases: the first time this worker sees that the measured part has started, its
    /// latency histograms restart empty.
    fn check_measuring(&mut self) {
        if !self.measuring && self.clock.phases.measure_start().is_some() {
            self.measuring = true;
            self.report.faults.clear();
            self.report.thpc_huge = Histogram::default();
            self.report.thpc_base = Histogram::default();
        }
    }

    /// `{ measure = true }`: the first worker to get here starts the measured part now, reads
    /// /proc/vmstat and sends both to the engine.
    fn measure(&mut self) -> Result<(), String> {
        let now = self.since_t0(Instant::now());
        if !self.clock.phases.try_start(now) {
            return Ok(());
        }
        // The same start at the measured part: the page state right before its first step
        // (the capture reads only; other workers that reach the step meanwhile go on).
        let capture = match &self.hooks.capture_to {
            Some(p) => {
                let t = Instant::now();
                let opts = crate::snapshot::CaptureOptions {
                    page_owner: false,
                    damon_regions: true,
                    ..Default::default()
                };
                let snap =
                    crate::snapshot::capture(&opts, &mut |_, _| {}).map_err(|e| format!("capture: {e}"))?;
                snap.write(p)
                    .map_err(|e| format!("capture {}: {e}", p.display()))?;
                Some((p.clone(), t.elapsed().as_nanos() as u64))
            }
            None => None,
        };
        let now = if capture.is_some() {
            self.since_t0(Instant::now())
        } else {
            now
        };
        // The phase marker of a traced run (a failed write only leaves the trace without it:
        // `trace diff --kernel-from` then gives the start).
        if let Some(m) = &self.hooks.trace_marker {
            let _ = std::fs::write(m, "fraglab: measure\n");
        }
        let text = std::fs::read_to_string("/proc/vmstat").map_err(|e| format!("/proc/vmstat: {e}"))?;
        let msg = MeasureMsg {
            measure_ns: now,
            vmstat: crate::procfs::parse_vmstat(&text).into_iter().collect(),
            capture,
        };
        let mut line = serde_json::to_string(&msg).map_err(|e| e.to_string())?;
        line.push('\n');
        if let Some(mut p) = self.pipe {
            p.write_all(line.as_bytes()).map_err(|e| format!("pipe: {e}"))?;
        }
        self.check_measuring();
        Ok(())
    }

    fn past_deadline(&mut self) -> bool {
        if Instant::now() >= self.clock.deadline {
            self.report.hit_deadline = true;
            true
        } else {
            false
        }
    }

    /// Sleeps until `t` (or the deadline); false if the deadline came first.
    fn sleep_until(&mut self, t: Instant) -> bool {
        let end = t.min(self.clock.deadline);
        let now = Instant::now();
        if end > now {
            std::thread::sleep(end - now);
        }
        !self.past_deadline()
    }

    fn at(&self, ns: u64) -> Instant {
        self.clock.t0 + Duration::from_nanos(ns)
    }

    fn since_t0(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.clock.t0).as_nanos() as u64
    }

    fn fault(&mut self, order: u32, ns: u64) {
        self.check_measuring();
        self.report.faults.entry(order).or_default().record(ns);
    }

    /// pagemap entry of virtual address `addr`.
    fn pagemap_entry(&self, addr: usize) -> Option<u64> {
        let f = self.pagemap.as_ref()?;
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, (addr / PAGE * 8) as u64).ok()?;
        Some(u64::from_ne_bytes(b))
    }

    /// Whether the 2 MiB-aligned region at `addr` is mapped by one PMD THP (see the module doc).
    fn pmd_thp(&self, addr: usize) -> bool {
        let (Some(a), Some(b)) = (self.pagemap_entry(addr), self.pagemap_entry(addr + PMD - PAGE)) else {
            return false;
        };
        let present = |e: u64| e >> 63 & 1 == 1;
        let pfn = |e: u64| e & ((1 << 55) - 1);
        if !present(a) || !present(b) {
            return false;
        }
        if pfn(a) == 0 {
            // No PFNs without CAP_SYS_ADMIN: both ends present after one fault is the sign.
            return true;
        }
        pfn(a) % PMD_PAGES as u64 == 0 && pfn(b) == pfn(a) + PMD_PAGES as u64 - 1
    }
}

/// An anonymous mapping (mmap(2) MAP_PRIVATE|MAP_ANONYMOUS), 2 MiB-aligned so that THP can back
/// it, with MADV_HUGEPAGE if asked (madvise(2)); unmapped on drop.
struct Vma {
    base: usize,
    len: usize,
    /// Pages written since mapped (or since MADV_DONTNEED).
    populated: Vec<bool>,
    /// 2 MiB regions whose first touch was classified.
    checked: Vec<bool>,
    /// VM_LOCKED: mlock(2) (or `locked = true` on mmap) ran on the whole mapping
    /// (docs/model §29.1).
    locked: bool,
}

impl Vma {
    fn new(size: u64, madvise: bool) -> Result<Vma, String> {
        let len = (size as usize).div_ceil(PAGE) * PAGE;
        let map_len = len + PMD;
        // SAFETY: a fresh anonymous mapping; all later accesses stay inside [base, base+len).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!("mmap {len} bytes: {}", std::io::Error::last_os_error()));
        }
        let start = p as usize;
        let base = start.next_multiple_of(PMD);
        // SAFETY: trimming the unaligned head and the tail of our own mapping.
        unsafe {
            if base > start {
                libc::munmap(start as *mut _, base - start);
            }
            let end = base + len;
            if start + map_len > end {
                libc::munmap(end as *mut _, start + map_len - end);
            }
            if madvise && libc::madvise(base as *mut _, len, libc::MADV_HUGEPAGE) != 0 {
                return Err(format!("MADV_HUGEPAGE: {}", std::io::Error::last_os_error()));
            }
        }
        let pages = len / PAGE;
        Ok(Vma {
            base,
            len,
            populated: vec![false; pages],
            checked: vec![false; pages.div_ceil(PMD_PAGES)],
            locked: false,
        })
    }

    /// mlock(2) of the whole mapping (docs/model §29.1.2): VM_LOCKED, every page
    /// populated and mlocked inside the call. Also how `locked = true` on mmap runs: MAP_LOCKED
    /// on the over-sized mapping `new` trims would populate and mlock the trimmed head and tail
    /// too, so the aligned mapping is mlocked after the trim instead (same population, same
    /// counters for the mapping's pages). The faults happen inside the call: they are not
    /// timed one by one. Needs CAP_IPC_LOCK or RLIMIT_MEMLOCK room (root here has the former).
    fn mlock(&mut self) -> Result<(), String> {
        // SAFETY: our own mapping.
        if unsafe { libc::mlock(self.base as *const _, self.len) } != 0 {
            return Err(format!(
                "mlock {} bytes: {}",
                self.len,
                std::io::Error::last_os_error()
            ));
        }
        self.locked = true;
        self.populated.fill(true);
        self.checked.fill(true);
        Ok(())
    }

    /// munlock(2) of the whole mapping (§29.1.5).
    fn munlock(&mut self) -> Result<(), String> {
        // SAFETY: our own mapping.
        if unsafe { libc::munlock(self.base as *const _, self.len) } != 0 {
            return Err(format!("munlock: {}", std::io::Error::last_os_error()));
        }
        self.locked = false;
        Ok(())
    }

    fn pages(&self) -> usize {
        self.len / PAGE
    }

    /// Writes the pages of `order` (page indices) not yet populated, timing each fault; returns
    /// the summed fault time and the number of PMD THPs mapped. Stops at the deadline.
    fn touch(&mut self, order: impl Iterator<Item = usize>, cx: &mut Cx) -> (u64, u64) {
        let (mut total, mut huge) = (0u64, 0u64);
        for (i, p) in order.enumerate() {
            if i % PMD_PAGES == 0 && cx.past_deadline() {
                break;
            }
            if self.populated[p] {
                continue;
            }
            let addr = self.base + p * PAGE;
            let t = Instant::now();
            // SAFETY: addr is inside our mapping.
            unsafe { std::ptr::write_volatile(addr as *mut u8, 1) };
            let ns = t.elapsed().as_nanos() as u64;
            total += ns;
            self.populated[p] = true;
            let r = p / PMD_PAGES;
            if !self.checked[r] {
                self.checked[r] = true;
                let full = (r + 1) * PMD_PAGES <= self.pages();
                if full && cx.pmd_thp(self.base + r * PMD) {
                    huge += 1;
                    cx.fault(9, ns);
                    self.populated[r * PMD_PAGES..(r + 1) * PMD_PAGES].fill(true);
                    continue;
                }
            }
            cx.fault(0, ns);
        }
        (total, huge)
    }

    /// MADV_DONTNEED of [offset, offset + length) (page-rounded, clamped to the mapping). On a
    /// locked mapping the kernel refuses it (EINVAL): nothing happens, as in the simulator.
    fn dontneed(&mut self, offset: u64, length: u64) -> Result<(), String> {
        if self.locked {
            return Ok(());
        }
        let first = (offset as usize / PAGE).min(self.pages());
        let end = (offset as usize / PAGE + (length as usize).div_ceil(PAGE)).min(self.pages());
        if end <= first {
            return Ok(());
        }
        // SAFETY: a range inside our mapping.
        let r = unsafe {
            libc::madvise(
                (self.base + first * PAGE) as *mut _,
                (end - first) * PAGE,
                libc::MADV_DONTNEED,
            )
        };
        if r != 0 {
            return Err(format!("MADV_DONTNEED: {}", std::io::Error::last_os_error()));
        }
        self.populated[first..end].fill(false);
        self.checked[first / PMD_PAGES..end.div_ceil(PMD_PAGES)].fill(false);
        Ok(())
    }
}

impl Drop for Vma {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe {
            libc::munmap(self.base as *mut _, self.len);
        }
    }
}

fn run_job(job: &Job, clock: Clock, pipe: &File) -> WorkerReport {
    let salt = match job {
        Job::Task { instance, params, .. } => ((params.line as u64) << 20) + *instance as u64 + 1,
        Job::ThpBurst(p) => (p.line as u64) << 20,
        Job::ThpChallenge(p) => (p.line as u64) << 20,
        Job::Fio { params, job, .. } => ((params.line as u64) << 20) + *job as u64 + 1,
    };
    let mut cx = Cx {
        clock,
        pagemap: File::open("/proc/self/pagemap").ok(),
        report: WorkerReport::default(),
        rng: ChaCha8Rng::seed_from_u64(clock.seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        pipe: Some(pipe),
        measuring: false,
        hooks: match job {
            Job::Task { hooks, .. } => hooks.clone(),
            _ => MeasureHooks::default(),
        },
    };
    let r = match job {
        Job::Task {
            params,
            files,
            slab_dir,
            instance,
            ..
        } => run_task(params, *instance, files, slab_dir, &mut cx),
        Job::ThpBurst(p) => run_burst(p, &mut cx),
        Job::ThpChallenge(p) => run_challenge(p, &mut cx),
        Job::Fio {
            params,
            job,
            dir,
            slots,
        } => run_fio(params, *job, dir, *slots, &mut cx),
    };
    if let Err(e) = r {
        cx.report.error = Some(e);
    }
    // Phases: a worker that has not recorded since the measured part started has recorded
    // only before it.
    cx.check_measuring();
    cx.report.measured = cx.measuring;
    cx.report
}

/// What a task holds until it ends: pipes full of buffers and slab directories.
#[derive(Default)]
struct Held {
    /// The pipes, by (group, lane) ([`PipeLayout::pipe_of`]); with one lane, by (the pipe's
    /// number, 0), so that key order is creation order.
    pipes: BTreeMap<(u64, u64), (OwnedFd, OwnedFd)>,
    /// Pipe pages written so far (the next page's place in the population).
    pipe_pages: u64,
    /// Pipes made so far (the one-lane key).
    pipes_made: u64,
    dirs: Vec<PathBuf>,
    /// The files of `slab` steps not yet unlinked by a `free` step: (index in `dirs`, name).
    slab_files: Vec<(u32, u64)>,
    /// The task's open files (`read` and `fadvise` steps): one open file per name for the
    /// task's life, so its readahead state (f_ra, FMODE_RANDOM) carries from one step to the
    /// next, as the simulator keeps one per task and file.
    open: BTreeMap<String, File>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.pipes.clear();
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn write_proc(path: &str, v: &str) -> Result<(), String> {
    std::fs::write(path, v).map_err(|e| format!("{path}: {e}"))
}

/// A task's own state while it runs: its mappings, what it holds, its pipe layout.
struct TaskState<'a> {
    p: &'a TaskParams,
    instance: u32,
    files: &'a BTreeMap<String, PathBuf>,
    slab_dir: &'a std::path::Path,
    /// Dropped (unmapped) before `held`.
    vmas: BTreeMap<String, Vma>,
    held: Held,
    nslab: u32,
    layout: PipeLayout,
}

/// Whether a task goes on after a step (`Stop`: the deadline came within it).
enum Flow {
    Go,
    Stop,
}

fn run_task(
    p: &TaskParams,
    instance: u32,
    files: &BTreeMap<String, PathBuf>,
    slab_dir: &std::path::Path,
    cx: &mut Cx,
) -> Result<(), String> {
    if !cx.sleep_until(cx.at(p.start_ns)) {
        return Ok(());
    }
    let mut t = TaskState {
        p,
        instance,
        files,
        slab_dir,
        vmas: BTreeMap::new(),
        held: Held::default(),
        nslab: 0,
        layout: PipeLayout::of(p),
    };
    'run: for _ in 0..p.loops {
        for step in &p.steps {
            if cx.past_deadline() {
                break 'run;
            }
            let flow = match step {
                TaskStep::Mmap { .. }
                | TaskStep::Touch { .. }
                | TaskStep::Dontneed { .. }
                | TaskStep::Munmap { .. }
                | TaskStep::Mlock { .. }
                | TaskStep::Munlock { .. } => memory_step(&mut t, step, cx)?,
                TaskStep::Read { .. }
                | TaskStep::Write { .. }
                | TaskStep::Delete { .. }
                | TaskStep::Census { .. }
                | TaskStep::Files { .. }
                | TaskStep::Fadvise { .. } => file_step(&mut t, step, cx)?,
                _ => other_step(&mut t, step, cx)?,
            };
            if let Flow::Stop = flow {
                break 'run;
            }
        }
    }
    drop(t);
    Ok(())
}

/// A task's steps on its mappings.
fn memory_step(t: &mut TaskState, step: &TaskStep, cx: &mut Cx) -> Result<Flow, String> {
    match step {
        TaskStep::Mmap {
            vma,
            size_bytes,
            madvise,
            locked,
        } => {
            // Replacing a mapping unmaps the old one first (as the simulator does).
            t.vmas.remove(vma);
            let mut v = Vma::new(*size_bytes, *madvise)?;
            if *locked {
                v.mlock()?;
            }
            t.vmas.insert(vma.clone(), v);
        }
        TaskStep::Touch { vma, random, stride } => {
            let v = t
                .vmas
                .get_mut(vma)
                .ok_or_else(|| format!("touch of unmapped {vma}"))?;
            // With a stride, the first page of every stride only (one write each).
            let every = (*stride as usize / PAGE).max(1);
            let mut order: Vec<usize> = (0..v.pages()).step_by(every).collect();
            if *random {
                order.shuffle(&mut cx.rng);
            }
            v.touch(order.into_iter(), cx);
        }
        TaskStep::Dontneed {
            vma,
            offset,
            length,
            stride,
        } => {
            let v = t
                .vmas
                .get_mut(vma)
                .ok_or_else(|| format!("dontneed of unmapped {vma}"))?;
            match stride {
                None => v.dontneed(*offset, *length)?,
                // One madvise(MADV_DONTNEED) per range, in address order, as far as
                // the mapping goes (the last one clamped).
                Some(st) => {
                    let mut at = *offset;
                    loop {
                        v.dontneed(at, *length)?;
                        at += st;
                        if at >= v.len as u64 {
                            break;
                        }
                    }
                }
            }
        }
        TaskStep::Munmap { vma } => {
            t.vmas.remove(vma);
        }
        // mlock (H2, docs/model §29); munmap (dropping the Vma) munlocks.
        TaskStep::Mlock { vma } => t
            .vmas
            .get_mut(vma)
            .ok_or_else(|| format!("mlock of unmapped {vma}"))?
            .mlock()?,
        TaskStep::Munlock { vma } => t
            .vmas
            .get_mut(vma)
            .ok_or_else(|| format!("munlock of unmapped {vma}"))?
            .munlock()?,
        _ => unreachable!("memory_step: not one of its steps"),
    }
    Ok(Flow::Go)
}

/// A task's steps on its files.
fn file_step(t: &mut TaskState, step: &TaskStep, cx: &mut Cx) -> Result<Flow, String> {
    match step {
        TaskStep::Read {
            file,
            offset,
            length,
            file_size,
            random,
            ..
        } => {
            let started = Instant::now();
            let f = open_file(&mut t.held, file, &t.files[file])?;
            let bytes = read_file(f, &t.files[file], *offset, *length, *file_size, *random, cx)?;
            let r = cx
                .report
                .reads
                .get_or_insert_with(|| fraglab_spec::result::TaskReadResult {
                    task: t.p.name.clone(),
                    instance: t.instance,
                    ..Default::default()
                });
            r.bytes += bytes;
            r.ns += started.elapsed().as_nanos() as u64;
        }
        TaskStep::Write {
            file,
            offset,
            length,
            chunk,
            ..
        } => write_file(&t.files[file], *offset, *length, *chunk, cx)?,
        TaskStep::Delete { file } => {
            t.held.open.remove(file);
            if let Some(path) = t.files.get(file) {
                let _ = std::fs::remove_file(path);
            }
        }
        // H5: the page-cache census (crate::census, docs/model §30.2).
        TaskStep::Census { file } => {
            let at_ns = cx.since_t0(Instant::now());
            let (pages_per_order, folios_per_order) = crate::census::file_census(&t.files[file])?;
            cx.report.census.push(fraglab_spec::result::CensusResult {
                task: t.p.name.clone(),
                file: file.clone(),
                at_ns,
                pages_per_order,
                folios_per_order,
            });
        }
        TaskStep::Files {
            set,
            count,
            size_bytes,
            op,
            random,
            every,
            ..
        } => {
            let sel = FilesSel {
                count: *count,
                every: *every,
                random: *random,
            };
            if !files_step(&t.files[set], sel, *size_bytes, *op, cx)? {
                return Ok(Flow::Stop);
            }
        }
        TaskStep::Fadvise {
            file,
            advice,
            offset,
            length,
        } => {
            let path = t
                .files
                .get(file)
                .ok_or_else(|| format!("fadvise of {file}: no read or write step names it"))?;
            let f = open_file(&mut t.held, file, path)?;
            fadvise(f, path, *advice, *offset, *length)?;
        }
        _ => unreachable!("file_step: not one of its steps"),
    }
    Ok(Flow::Go)
}

/// A task's other steps: time, slab, the kernel's sysctls, phases, frees, samples.
fn other_step(t: &mut TaskState, step: &TaskStep, cx: &mut Cx) -> Result<Flow, String> {
    match step {
        TaskStep::Compute { ns } => {
            let end = (Instant::now() + Duration::from_nanos(*ns)).min(cx.clock.deadline);
            let mut x = 0u64;
            while Instant::now() < end {
                for i in 0..1000u64 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
                }
            }
        }
        TaskStep::Sleep { ns } => {
            let until = Instant::now() + Duration::from_nanos(*ns);
            cx.sleep_until(until);
        }
        TaskStep::Slab { count, reclaimable } => {
            if *reclaimable {
                let d = t
                    .slab_dir
                    .join(format!("{}-{}-{}", t.p.name, t.instance, t.nslab));
                t.nslab += 1;
                std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
                t.held.dirs.push(d.clone());
                let di = t.held.dirs.len() as u32 - 1;
                for i in 0..count * FILES_PER_SLAB_PAGE {
                    if i % 1024 == 0 && cx.past_deadline() {
                        return Ok(Flow::Stop);
                    }
                    let f = d.join(i.to_string());
                    File::create(&f).map_err(|e| format!("{}: {e}", f.display()))?;
                    t.held.slab_files.push((di, i));
                }
            } else {
                fill_pipes(*count, t.layout, &mut t.held, cx)?;
            }
        }
        TaskStep::CompactMemory => write_proc("/proc/sys/vm/compact_memory", "1")?,
        TaskStep::DropCaches => write_proc("/proc/sys/vm/drop_caches", "3")?,
        // §28.1: `echo count > /proc/sys/vm/nr_hugepages` (set_max_huge_pages), then
        // the pool reached read back, as the kernel reports it (the run records the
        // old size and writes it back; the htlb_buddy_alloc_* counters are in vmstat).
        // The count is on top of the pool the run holds (the base): base + count.
        TaskStep::NrHugepages { count } => {
            let pages = cx.clock.hugetlb_base + count;
            write_proc(crate::hugetlb::NR_HUGEPAGES, &pages.to_string())?;
            crate::hugetlb::current_pages().map_err(|e| e.to_string())?;
        }
        // Phases (issue 19).
        TaskStep::Measure => cx.measure()?,
        TaskStep::Free { reclaimable, every } => free_every(&mut t.held, *reclaimable, *every)?,
        // Issue 33: single pipe pages, whole lanes closed.
        TaskStep::FreePipePages { every } => free_pipe_pages(&mut t.held, *every),
        // Issue 33: a named sample, read where the program reaches the step.
        TaskStep::Sample { name } => {
            let at = cx.since_t0(Instant::now());
            let (sample, zones) =
                crate::procfs::sample_and_census(at).map_err(|e| format!("sample {name}: {e}"))?;
            cx.report.named_samples.push(fraglab_spec::result::NamedSample {
                name: name.clone(),
                task: t.p.name.clone(),
                instance: t.instance,
                sample,
                zones,
            });
        }
        _ => unreachable!("other_step: not one of its steps"),
    }
    Ok(Flow::Go)
}

/// Pipe-buffer pages a pipe holds when a `pipes` step fills whole pipes (F_SETPIPE_SZ 1 MiB),
/// as the simulator's `free = "pipes"` counts them (fraglab-sim `program::PIPE_PAGES`).
pub const PIPE_PAGES: u64 = 256;

/// How a task lays out its pipe population (issue 33). Without `every_page` frees: pipes of
/// [`PIPE_PAGES`] filled one after the other. With them: `lanes` pipes
/// ([`TaskParams::pipe_lanes`], the lcm of the task's `every_page` values) filled side by side,
/// page k of the population written to lane k mod lanes, `slots` pages per pipe (the population
/// spread over the lanes, rounded up to a power of two as F_SETPIPE_SZ rounds it, at most
/// [`PIPE_PAGES`]); when a group of pipes is full the next group starts. A lane then holds pages
/// of one residue modulo every `every_page`, so closing a lane's pipes frees exactly every Nth
/// page of the population (see [`free_pipe_pages`] for why the pages are not read out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PipeLayout {
    pub lanes: u64,
    pub slots: u64,
}

impl PipeLayout {
    pub(crate) fn of(p: &TaskParams) -> PipeLayout {
        let lanes = p.pipe_lanes().max(1);
        if lanes == 1 {
            return PipeLayout {
                lanes,
                slots: PIPE_PAGES,
            };
        }
        let per_lane = p.pipe_pages().div_ceil(lanes).max(1);
        PipeLayout {
            lanes,
            slots: per_lane.next_power_of_two().min(PIPE_PAGES),
        }
    }

    /// The pipe, (group, lane), that page `k` (from 0) of the population goes to.
    pub(crate) fn pipe_of(&self, k: u64) -> (u64, u64) {
        (k / (self.lanes * self.slots), k % self.lanes)
    }
}

/// A new pipe (pipe2(2), non-blocking): on EMFILE the soft RLIMIT_NOFILE is raised to the hard
/// one (this process only) and the call tried again, since a large population holds many.
fn new_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut raised = false;
    loop {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } == 0 {
            // SAFETY: fresh descriptors, owned from here.
            return Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) });
        }
        let e = std::io::Error::last_os_error();
        if raised || e.raw_os_error() != Some(libc::EMFILE) {
            return Err(e);
        }
        raised = true;
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: get/setrlimit on this process with a valid struct.
        let more = unsafe {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max && {
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0
            }
        };
        if !more {
            return Err(e);
        }
    }
}

/// Unmovable kernel memory: pipes (pipe2(2)) filled with 4 KiB writes, each of which allocates
/// one order-0 pipe-buffer page (`anon_pipe_get_page`: GFP_HIGHUSER | __GFP_ACCOUNT, no
/// __GFP_MOVABLE; a pipe that has read nothing has no cached `tmp_page` to reuse), held until
/// the task ends. With one lane, pipes enlarged with F_SETPIPE_SZ to 1 MiB filled one after the
/// other; with more ([`PipeLayout`]), page by page into the lanes' pipes.
fn fill_pipes(pages: u64, layout: PipeLayout, held: &mut Held, cx: &mut Cx) -> Result<(), String> {
    if layout.lanes > 1 {
        return fill_pipe_lanes(pages, layout, held, cx);
    }
    let buf = [0xa5u8; PAGE];
    let mut left = pages;
    while left > 0 {
        if cx.past_deadline() {
            return Ok(());
        }
        let (r, w) = new_pipe().map_err(|e| format!("pipe2 after {} pipes: {e}", held.pipes.len()))?;
        // SAFETY: fcntl on our pipe; failure leaves the default 64 KiB.
        unsafe {
            libc::fcntl(
                w.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                (PIPE_PAGES as usize * PAGE) as libc::c_int,
            )
        };
        loop {
            if left == 0 {
                break;
            }
            // SAFETY: writing our buffer to our pipe.
            let n = unsafe { libc::write(w.as_raw_fd(), buf.as_ptr() as *const _, PAGE) };
            if n < PAGE as isize {
                break;
            }
            left -= 1;
            held.pipe_pages += 1;
        }
        held.pipes.insert((held.pipes_made, 0), (r, w));
        held.pipes_made += 1;
    }
    Ok(())
}

/// [`fill_pipes`] with lanes: each page into the pipe [`PipeLayout::pipe_of`] names, made (with
/// `slots` pages of room) when first needed or again after a `free` closed it. A pipe that
/// cannot be given its room, or a page that does not fit, is an error: the layout is what makes
/// the frees exact.
fn fill_pipe_lanes(pages: u64, layout: PipeLayout, held: &mut Held, cx: &mut Cx) -> Result<(), String> {
    let buf = [0xa5u8; PAGE];
    let room = (layout.slots as usize * PAGE) as libc::c_int;
    for i in 0..pages {
        if i % 1024 == 0 && cx.past_deadline() {
            return Ok(());
        }
        let key = layout.pipe_of(held.pipe_pages);
        if !held.pipes.contains_key(&key) {
            let (r, w) = new_pipe().map_err(|e| format!("pipe2 after {} pipes: {e}", held.pipes.len()))?;
            // SAFETY: fcntl on our pipe.
            let got = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, room) };
            if got < room {
                return Err(format!(
                    "F_SETPIPE_SZ {} pages for pipe lane {}: {}",
                    layout.slots,
                    key.1,
                    std::io::Error::last_os_error()
                ));
            }
            held.pipes.insert(key, (r, w));
        }
        let w = &held.pipes[&key].1;
        // SAFETY: writing our buffer to our pipe.
        let n = unsafe { libc::write(w.as_raw_fd(), buf.as_ptr() as *const _, PAGE) };
        if n != PAGE as isize {
            return Err(format!(
                "pipe lane {} of group {}: a page did not fit ({})",
                key.1,
                key.0,
                std::io::Error::last_os_error()
            ));
        }
        held.pipe_pages += 1;
    }
    Ok(())
}

fn read_file(
    f: &File,
    path: &std::path::Path,
    offset: u64,
    length: u64,
    file_size: u64,
    random: bool,
    cx: &mut Cx,
) -> Result<u64, String> {
    let err = |e: std::io::Error| format!("read {}: {e}", path.display());
    let mut done = 0u64;
    if random {
        let mut b = [0u8; PAGE];
        let pages = file_size.div_ceil(PAGE as u64).max(1);
        for i in 0..length.div_ceil(PAGE as u64) {
            if i % 256 == 0 && cx.past_deadline() {
                break;
            }
            let p = cx.rng.gen_range(0..pages);
            done += f.read_at(&mut b, p * PAGE as u64).map_err(err)? as u64;
        }
    } else {
        let mut b = vec![0u8; 128 << 10];
        while done < length {
            if cx.past_deadline() {
                break;
            }
            let n = (length - done).min(b.len() as u64) as usize;
            let got = f.read_at(&mut b[..n], offset + done).map_err(err)?;
            if got == 0 {
                break;
            }
            done += got as u64;
        }
    }
    Ok(done)
}

fn write_file(
    path: &std::path::Path,
    offset: u64,
    length: u64,
    chunk: u64,
    cx: &mut Cx,
) -> Result<(), String> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let b = vec![0x5au8; chunk.min(64 << 20) as usize];
    let mut done = 0u64;
    while done < length {
        if cx.past_deadline() {
            break;
        }
        let n = (length - done).min(b.len() as u64) as usize;
        f.write_all_at(&b[..n], offset + done)
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        done += n as u64;
    }
    Ok(())
}

/// The seed-001 "Hugealloc" process: every `interval`, map `size` (with MADV_HUGEPAGE unless
/// `madvised = false`), fault it
/// in 2 MiB steps (timed: the burst's `alloc_ns`), hold it `hold`, unmap it.
fn run_burst(p: &ThpBurstParams, cx: &mut Cx) -> Result<(), String> {
    for i in 0..p.bursts as u64 {
        let start = cx.at(p.start_ns + i * p.interval_ns);
        if !cx.sleep_until(start) {
            break;
        }
        let t = Instant::now();
        let mut v = Vma::new(p.size_bytes, p.madvised)?;
        let mut b = BurstResult {
            start_ns: cx.since_t0(t),
            ..Default::default()
        };
        let pages = v.pages();
        for s in (0..pages).step_by(PMD_PAGES) {
            if cx.past_deadline() {
                break;
            }
            let (ns, huge) = v.touch(s..(s + PMD_PAGES).min(pages), cx);
            b.alloc_ns += ns;
            b.faults += 1;
            b.huge += huge;
        }
        cx.report.bursts.push(b);
        cx.sleep_until(t + Duration::from_nanos(p.hold_ns));
        drop(v);
    }
    Ok(())
}

/// One thread of mmtests' thpchallenge: map `size`, fault it in 2 MiB steps (each step timed
/// and counted as huge or base), hold it, exit.
fn run_challenge(p: &ThpChallengeParams, cx: &mut Cx) -> Result<(), String> {
    let start = cx.at(p.start_ns);
    if !cx.sleep_until(start) {
        return Ok(());
    }
    let mut v = Vma::new(p.size_bytes, p.madvised)?;
    let pages = v.pages();
    for s in (0..pages).step_by(PMD_PAGES) {
        if cx.past_deadline() {
            break;
        }
        let (ns, huge) = v.touch(s..(s + PMD_PAGES).min(pages), cx);
        cx.check_measuring();
        if huge > 0 {
            cx.report.thpc_huge.record(ns);
        } else {
            cx.report.thpc_base.record(ns);
        }
    }
    cx.sleep_until(Instant::now() + Duration::from_nanos(p.hold_ns));
    Ok(())
}

/// mmtests' fio small-file background (mmtests' thpchallenge), as the simulator's
/// `FioSmallFiles` runs it: the job cycles through its slots of the ring, and for each slot
/// deletes the file a previous pass left there, then creates it anew with one buffered write of
/// `file_size` bytes (a dentry and an inode from their slab caches, then page cache: the two
/// interleave in memory). Until the run's deadline or the job's runtime; no fsync (writeback
/// is the kernel's). Files are `DIR/jobJ-SLOT`.
fn run_fio(
    p: &FioSmallFilesParams,
    job: u32,
    dir: &std::path::Path,
    slots: u64,
    cx: &mut Cx,
) -> Result<(), String> {
    if !cx.sleep_until(cx.at(p.start_ns)) {
        return Ok(());
    }
    let until = p.runtime_ns.map(|r| cx.at(p.start_ns + r));
    let data = vec![0x5au8; p.file_size_bytes as usize];
    let mut next = 0u64;
    loop {
        if cx.past_deadline() || until.is_some_and(|u| Instant::now() >= u) {
            return Ok(());
        }
        let path = dir.join(format!("job{job}-{}", next % slots.max(1)));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
        let mut f = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        f.write_all(&data)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        next += 1;
    }
}

/// The task's open file `name` at `path`, opened read-only on first use ([`Held::open`]).
fn open_file<'h>(held: &'h mut Held, name: &str, path: &std::path::Path) -> Result<&'h File, String> {
    if !held.open.contains_key(name) {
        let f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        held.open.insert(name.to_string(), f);
    }
    Ok(&held.open[name])
}

/// `free`: unlink every `every`th file of the task's `slab` steps (their dentries and inodes
/// are freed: `kmem_cache_free`, the slab page only once all its objects are) or close every
/// `every`th pipe (its buffer pages freed, `free_pipe_info`), in creation order.
fn free_every(held: &mut Held, reclaimable: bool, every: u64) -> Result<(), String> {
    let pick = |k: usize| (k as u64 + 1).is_multiple_of(every);
    if reclaimable {
        let mut k = 0;
        let mut kept = Vec::with_capacity(held.slab_files.len());
        for (d, i) in std::mem::take(&mut held.slab_files) {
            k += 1;
            if pick(k - 1) {
                let f = held.dirs[d as usize].join(i.to_string());
                std::fs::remove_file(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            } else {
                kept.push((d, i));
            }
        }
        held.slab_files = kept;
    } else {
        // In key order: the pipes in the order they were made.
        let mut k = 0;
        held.pipes.retain(|_, _| {
            k += 1;
            !pick(k - 1)
        });
    }
    Ok(())
}

/// `{ free = "pipes", every_page = N }` (issue 33): closes the pipes of the lanes whose pages
/// are every Nth of the population (lane j holds pages k ≡ j mod lanes, and N divides lanes, so
/// all its pages have (k + 1) mod N = (j + 1) mod N); closing frees every buffer page of the
/// pipe (`free_pipe_info`). Not by reading: reading a page's worth releases that buffer
/// (`pipe_read` → `anon_pipe_put_page`), but only at the head of its pipe, and the first two
/// pages a pipe releases are kept for its next writes (`tmp_page[2]`) instead of freed.
fn free_pipe_pages(held: &mut Held, every: u64) {
    held.pipes
        .retain(|&(_, lane), _| !(lane + 1).is_multiple_of(every));
}

/// Which files of a set a `files` step takes: `count` files, every `every`th of them (issue
/// 33, delete only; 1 = all), in order or in a seeded random order.
#[derive(Clone, Copy, Debug)]
struct FilesSel {
    count: u64,
    every: u64,
    random: bool,
}

/// `files`: files `dir/0` .. `dir/{count - 1}` (or every `every`th of them,
/// [`TaskStep::files_selected`]) in order or in a seeded random order: create (O_CREAT |
/// O_TRUNC and one buffered write of `size` bytes), read (the whole file, 128 KiB reads) or
/// delete (unlink; a missing file is skipped). False when the deadline passed.
fn files_step(
    dir: &std::path::Path,
    sel: FilesSel,
    size: u64,
    op: FilesOp,
    cx: &mut Cx,
) -> Result<bool, String> {
    let mut order: Vec<u64> = TaskStep::files_selected(sel.count, sel.every).collect();
    if sel.random {
        order.shuffle(&mut cx.rng);
    }
    let data = vec![0x5au8; if op == FilesOp::Create { size as usize } else { 0 }];
    let mut buf = vec![0u8; 128 << 10];
    for (n, i) in order.into_iter().enumerate() {
        if n % 64 == 0 && cx.past_deadline() {
            return Ok(false);
        }
        let path = dir.join(i.to_string());
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        match op {
            FilesOp::Create => File::create(&path)
                .and_then(|mut f| f.write_all(&data))
                .map_err(err)?,
            FilesOp::Read => {
                let mut f = File::open(&path).map_err(err)?;
                while std::io::Read::read(&mut f, &mut buf).map_err(err)? > 0 {}
            }
            FilesOp::Delete => match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(err(e)),
            },
        }
    }
    Ok(true)
}

/// `fadvise`: posix_fadvise(2) on the task's open file (`length` `None` = 0, to the end).
fn fadvise(
    f: &File,
    path: &std::path::Path,
    advice: Fadvice,
    offset: u64,
    length: Option<u64>,
) -> Result<(), String> {
    let a = match advice {
        Fadvice::Normal => libc::POSIX_FADV_NORMAL,
        Fadvice::Random => libc::POSIX_FADV_RANDOM,
        Fadvice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Fadvice::Willneed => libc::POSIX_FADV_WILLNEED,
        Fadvice::Dontneed => libc::POSIX_FADV_DONTNEED,
    };
    // SAFETY: advice on our own open file.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), offset as i64, length.unwrap_or(0) as i64, a) };
    if r != 0 {
        return Err(format!(
            "posix_fadvise {}: {}",
            path.display(),
            std::io::Error::from_raw_os_error(r)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vma_touch_and_dontneed() {
        let clock = Clock {
            t0: Instant::now(),
            deadline: Instant::now() + Duration::from_secs(60),
            seed: 1,
            phases: PhaseBoard::new().unwrap(),
            hugetlb_base: 0,
        };
        let mut cx = Cx {
            clock,
            pagemap: File::open("/proc/self/pagemap").ok(),
            report: WorkerReport::default(),
            rng: ChaCha8Rng::seed_from_u64(1),
            pipe: None,
            measuring: false,
            hooks: MeasureHooks::default(),
        };
        let mut v = Vma::new(4 << 20, false).unwrap();
        assert_eq!(v.base % PMD, 0);
        assert_eq!(v.pages(), 1024);
        v.touch(0..1024, &mut cx);
        let n: u64 = cx.report.faults.values().map(|h| h.count).sum();
        // Every page is either its own fault or part of a THP.
        let huge = cx.report.faults.get(&9).map_or(0, |h| h.count);
        assert_eq!(n - huge + huge * 512, 1024);
        v.dontneed(0, 8192).unwrap();
        assert!(!v.populated[0] && !v.populated[1] && v.populated[2]);
        v.touch(0..4, &mut cx);
        assert!(v.populated[..4].iter().all(|x| *x));
    }

    /// Phases: the first worker to run the step starts the measured part (once per run);
    /// every worker's histograms restart the first time it records after that, and a worker
    /// that saw nothing of it reports `measured = false`.
    #[test]
    fn phases_histograms_restart_at_the_measured_part() {
        let board = PhaseBoard::new().unwrap();
        let clock = Clock {
            t0: Instant::now(),
            deadline: Instant::now() + Duration::from_secs(60),
            seed: 1,
            phases: board,
            hugetlb_base: 0,
        };
        let mut cx = Cx {
            clock,
            pagemap: None,
            report: WorkerReport::default(),
            rng: ChaCha8Rng::seed_from_u64(1),
            pipe: None,
            measuring: false,
            hooks: MeasureHooks::default(),
        };
        cx.fault(0, 10);
        cx.fault(0, 20);
        cx.check_measuring();
        assert!(!cx.measuring);
        assert_eq!(board.measure_start(), None);
        assert!(board.try_start(5));
        assert!(!board.try_start(6));
        assert_eq!(board.measure_start(), Some(5));
        cx.fault(9, 30);
        assert!(cx.measuring);
        assert_eq!(cx.report.faults.len(), 1);
        assert_eq!(cx.report.faults[&9].count, 1);
        board.unmap();
    }

    fn test_cx() -> Cx<'static> {
        let clock = Clock {
            t0: Instant::now(),
            deadline: Instant::now() + Duration::from_secs(60),
            seed: 1,
            phases: PhaseBoard::new().unwrap(),
            hugetlb_base: 0,
        };
        Cx {
            clock,
            pagemap: None,
            report: WorkerReport::default(),
            rng: ChaCha8Rng::seed_from_u64(1),
            pipe: None,
            measuring: false,
            hooks: MeasureHooks::default(),
        }
    }

    /// `files` create/read/delete and `free` of slab files and pipes (issue 19 item 3).
    #[test]
    fn files_and_free_steps() {
        let mut cx = test_cx();
        let dir = std::env::temp_dir().join(format!("fraglab-h3-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let all = |random| FilesSel {
            count: 10,
            every: 1,
            random,
        };
        assert!(files_step(&dir, all(false), 5000, FilesOp::Create, &mut cx).unwrap());
        let n = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(n, 10);
        assert_eq!(std::fs::metadata(dir.join("9")).unwrap().len(), 5000);
        assert!(files_step(&dir, all(true), 5000, FilesOp::Read, &mut cx).unwrap());
        assert!(files_step(&dir, all(false), 5000, FilesOp::Delete, &mut cx).unwrap());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        // free: every 3rd slab file unlinked, every 2nd pipe closed.
        let mut held = Held::default();
        held.dirs.push(dir.clone());
        for i in 0..9u64 {
            File::create(dir.join(i.to_string())).unwrap();
            held.slab_files.push((0, i));
        }
        free_every(&mut held, true, 3).unwrap();
        let mut left: Vec<u64> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, vec![0, 1, 3, 4, 6, 7]);
        assert_eq!(held.slab_files.len(), 6);
        let whole = PipeLayout {
            lanes: 1,
            slots: PIPE_PAGES,
        };
        fill_pipes(4 * 256, whole, &mut held, &mut cx).unwrap();
        let pipes = held.pipes.len();
        free_every(&mut held, false, 2).unwrap();
        assert_eq!(held.pipes.len(), pipes - pipes / 2);
        drop(held);
        assert!(!dir.exists());
    }

    fn task(steps: &str) -> TaskParams {
        let text = format!(
            "[machine]\nmemory = \"1GiB\"\n[workload]\n[[workload.task]]\nloops = 2\nsteps = [{steps}]\n"
        );
        let spec = fraglab_spec::parse_spec(&text, "t.toml").unwrap();
        spec.workload.unwrap().task.remove(0)
    }

    /// Issue 33: the pipe layout of a task. Without `every_page`, pipes of 256 pages one after
    /// the other; with it, lcm(every_page) lanes side by side, each pipe sized for its share of
    /// the population (both loops), rounded up to a power of two, at most 256.
    #[test]
    fn pipe_layout_of_a_task() {
        let whole = PipeLayout::of(&task("{ pipes = 1000 }, { free = \"pipes\", every = 3 }"));
        assert_eq!((whole.lanes, whole.slots), (1, PIPE_PAGES));
        assert_eq!(whole.pipe_of(255), (0, 0));
        assert_eq!(whole.pipe_of(256), (1, 0));
        let t = task(
            "{ pipes = 1000 }, { free = \"pipes\", every_page = 4 }, { free = \"pipes\", every_page = 6 }",
        );
        assert_eq!(t.pipe_pages(), 2000);
        let l = PipeLayout::of(&t);
        // lcm(4, 6) = 12 lanes; 2000 pages / 12 = 167 per lane -> 256 slots.
        assert_eq!((l.lanes, l.slots), (12, 256));
        let small = PipeLayout::of(&task("{ pipes = 40 }, { free = \"pipes\", every_page = 3 }"));
        // 80 pages over 3 lanes: 27 each, 32 slots.
        assert_eq!((small.lanes, small.slots), (3, 32));
        let big = PipeLayout::of(&task("{ pipes = 100000 }, { free = \"pipes\", every_page = 2 }"));
        assert_eq!((big.lanes, big.slots), (2, PIPE_PAGES));
        assert_eq!(big.pipe_of(511), (0, 1));
        assert_eq!(big.pipe_of(512), (1, 0));
    }

    /// Issue 33: closing the lanes `free_pipe_pages` closes frees exactly the pages the
    /// simulator frees — every Nth of the population by place, pages freed before keeping their
    /// place — for any sequence of every_page steps and of fills between them (the layout's
    /// arithmetic, no pipe made).
    #[test]
    fn pipe_lanes_free_every_nth_page() {
        for (fills, frees) in [
            (vec![1000u64], vec![2u64]),
            (vec![1000], vec![4, 6]),
            (vec![300, 700], vec![3]),
            (vec![5000], vec![5, 2, 10]),
            (vec![7], vec![8]),
        ] {
            let mut steps: Vec<String> = fills.iter().map(|n| format!("{{ pipes = {n} }}")).collect();
            steps.extend(
                frees
                    .iter()
                    .map(|n| format!("{{ free = \"pipes\", every_page = {n} }}")),
            );
            let mut t = task(&steps.join(", "));
            t.loops = 1;
            let l = PipeLayout::of(&t);
            let total: u64 = fills.iter().sum();
            // Pages as the host holds them: each in its pipe; closing lanes drops pages.
            let mut held: Vec<(u64, (u64, u64))> = (0..total).map(|k| (k, l.pipe_of(k))).collect();
            let mut sim: Vec<u64> = (0..total).collect();
            for &n in &frees {
                held.retain(|(_, (_, lane))| !(lane + 1).is_multiple_of(n));
                sim.retain(|k| !(k + 1).is_multiple_of(n));
            }
            let host: Vec<u64> = held.iter().map(|(k, _)| *k).collect();
            assert_eq!(host, sim, "fills {fills:?}, frees {frees:?}");
            // A pipe never holds more than its slots.
            let mut per_pipe: BTreeMap<(u64, u64), u64> = BTreeMap::new();
            for k in 0..total {
                *per_pipe.entry(l.pipe_of(k)).or_default() += 1;
            }
            assert!(per_pipe.values().all(|&n| n <= l.slots), "{l:?}");
        }
    }

    /// Issue 33: the files a `files` step with `every` takes.
    #[test]
    fn files_every_selection() {
        let sel = |count, every| TaskStep::files_selected(count, every).collect::<Vec<u64>>();
        assert_eq!(sel(10, 3), vec![2, 5, 8]);
        assert_eq!(sel(4, 1), vec![0, 1, 2, 3]);
        assert!(sel(2, 3).is_empty());
    }

    /// Issue 33: a named sample from /proc texts (the reference machine's pagetypeinfo and
    /// buddyinfo): the periodic sample's record and the census of each zone.
    #[test]
    fn named_sample_from_proc_texts() {
        let pti = include_str!("../tests/data/pagetypeinfo.txt");
        let buddy = include_str!("../tests/data/buddyinfo.txt");
        let (s, zones) = crate::procfs::sample_from(7, buddy, pti, "thp_fault_alloc 3\n");
        assert_eq!((s.t_ns, s.thp_fault_alloc), (7, 3));
        assert_eq!(s.blocks_by_type, vec![1 + 45, 7 + 1528 + 560, 35, 0, 0]);
        let names: Vec<&str> = zones.iter().map(|z| z.zone.as_str()).collect();
        assert_eq!(names, ["DMA", "DMA32", "Normal"]);
        use fraglab_spec::result::pageblock::BlockClass as C;
        let normal = &zones[2];
        // Normal: Movable 4 order-9 + 190 order-10 chunks = 384 free blocks, all Movable.
        assert_eq!(normal.class(C::Free), Some(384));
        assert_eq!(normal.class(C::Movable), Some(560 - 384));
        assert_eq!(normal.class(C::Unmovable), Some(45));
        assert_eq!(normal.class(C::Reclaimable), Some(35));
        assert_eq!(
            normal.class(C::Mixed),
            None,
            "no page_owner on the reference machine"
        );
    }

    /// Issue 33: real pipes filled in lanes and every 3rd page freed by closing lanes. Makes
    /// pipes on this machine (no knob, no /proc write), so it is opt-in as the live tests are.
    #[test]
    #[cfg_attr(not(feature = "live"), ignore = "real pipes: opt in with --features live")]
    fn pipe_lanes_on_real_pipes() {
        let mut cx = test_cx();
        let t = task("{ pipes = 600 }, { free = \"pipes\", every_page = 3 }");
        let l = PipeLayout::of(&t);
        let mut held = Held::default();
        fill_pipes(600, l, &mut held, &mut cx).unwrap();
        assert_eq!(held.pipe_pages, 600);
        assert_eq!(held.pipes.len() as u64, 3 * 600u64.div_ceil(3 * l.slots));
        free_pipe_pages(&mut held, 3);
        assert!(held.pipes.keys().all(|(_, lane)| lane % 3 != 2));
        // Pages still held: what FIONREAD says the pipes hold.
        let mut bytes = 0i64;
        for (r, _) in held.pipes.values() {
            let mut n: libc::c_int = 0;
            // SAFETY: FIONREAD on our pipe into an int.
            assert_eq!(unsafe { libc::ioctl(r.as_raw_fd(), libc::FIONREAD, &mut n) }, 0);
            bytes += n as i64;
        }
        assert_eq!(bytes, 400 * PAGE as i64);
        // A second fill goes on where the first stopped, remaking closed lanes.
        fill_pipes(6, l, &mut held, &mut cx).unwrap();
        assert_eq!(held.pipe_pages, 606);
    }

    /// `fadvise` on an open file: every advice is accepted by posix_fadvise(2).
    #[test]
    fn fadvise_step() {
        let path = std::env::temp_dir().join(format!("fraglab-h3-fadvise-{}", std::process::id()));
        std::fs::write(&path, vec![1u8; 1 << 16]).unwrap();
        let f = File::open(&path).unwrap();
        for a in Fadvice::ALL {
            fadvise(&f, &path, a, 0, None).unwrap();
            fadvise(&f, &path, a, 4096, Some(8192)).unwrap();
        }
        std::fs::remove_file(&path).unwrap();
    }
}
