//! Preflight, the run loop (forked workload processes, per-second sampling, the safety floor,
//! signals) and the one-shot snapshot.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fraglab_spec::result::{BurstResult, LatencyHistogram, RunResult, RESULT_SCHEMA};
use fraglab_spec::{Spec, TaskStep};

use crate::knobs::{read_knob, KnobGuard};
use crate::{procfs, HostError};

const MIB: u64 = 1 << 20;
const PMD: usize = 2 << 20;
const PAGE: usize = 4096;

/// Limits and places of a host run.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Refuse to start, or stop, when MemAvailable would fall or falls under this (bytes).
    pub floor_bytes: u64,
    /// Refuse a spec whose anonymous memory exceeds this (bytes).
    pub anon_cap_bytes: u64,
    /// Scratch directory for the spec's files (created, and removed at the end).
    pub dir: PathBuf,
    /// Where the knobs' values before the run are kept until they are restored.
    pub state_file: PathBuf,
    /// Record the compaction tracepoints and kmem:mm_page_alloc_extfrag during the run
    /// (counts per event in `RunResult::trace_counts`).
    pub trace: bool,
}

impl Default for HostOptions {
    fn default() -> Self {
        let pid = std::process::id();
        HostOptions {
            floor_bytes: 3 << 30,
            anon_cap_bytes: 10 << 30,
            dir: std::env::temp_dir().join(format!("fraglab-host-{pid}")),
            state_file: PathBuf::from(format!("/run/fraglab-host-{pid}.restore")),
            trace: false,
        }
    }
}

/// What a run would do: the knobs it changes (name, now, new) and its anonymous memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub knobs: Vec<(String, String, String)>,
    pub anon_bytes: u64,
    pub mem_available: u64,
    pub kernel: String,
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kernel {}, MemAvailable {} MiB",
            self.kernel,
            self.mem_available / MIB
        )?;
        writeln!(f, "anonymous memory at most {} MiB", self.anon_bytes / MIB)?;
        if self.knobs.is_empty() {
            writeln!(f, "no knob changes")?;
        }
        for (n, now, new) in &self.knobs {
            let same = if now == new { " (unchanged)" } else { "" };
            writeln!(
                f,
                "knob {n} ({}): {now} -> {new}{same}",
                crate::knob_path(n).display()
            )?;
        }
        Ok(())
    }
}

fn kernel_release() -> String {
    procfs::read("/proc/sys/kernel/osrelease").trim().to_string()
}

/// Checks that the spec can run here, safely, and says what it would change.
pub fn preflight(spec: &Spec, opts: &HostOptions) -> Result<Plan, HostError> {
    if !cfg!(target_os = "linux") {
        return Err(HostError::NotLinux);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(HostError::NotRoot);
    }
    let kernel = kernel_release();
    let mut it = kernel
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse::<u32>().ok());
    let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    if (major, minor) < (6, 15) {
        return Err(HostError::KernelTooOld(kernel));
    }
    let w = spec.workload.as_ref().ok_or_else(|| {
        HostError::Unsupported(format!(
            "{}: no [workload] (the host engine runs timed workloads)",
            spec.file
        ))
    })?;
    for (what, n) in [
        ("kbuild", w.kbuild.len()),
        ("pgbench", w.pgbench.len()),
        ("thpchallenge", w.thpchallenge.len()),
        ("vm_scalability", w.vm_scalability.len()),
    ] {
        if n > 0 {
            return Err(HostError::Unsupported(format!(
                "{}: [[workload.{what}]] (simulator only so far)",
                spec.file
            )));
        }
    }
    let mut knobs = Vec::new();
    for (name, value) in &spec.knobs {
        let now = read_knob(name)?;
        knobs.push((name.clone(), now, value.to_string()));
    }
    // Anonymous memory: every instance's mappings at once, and the bursts.
    let mut anon = 0u64;
    for t in &w.task {
        let per: u64 = t
            .steps
            .iter()
            .map(|s| match s {
                TaskStep::Mmap { size_bytes, .. } => *size_bytes,
                _ => 0,
            })
            .sum();
        anon += per * t.count as u64;
    }
    anon += w.thp_burst.iter().map(|b| b.size_bytes).sum::<u64>();
    let mem_available = procfs::mem_available();
    if anon > opts.anon_cap_bytes {
        return Err(HostError::Unsafe(format!(
            "{} MiB of anonymous memory exceeds the cap of {} MiB",
            anon / MIB,
            opts.anon_cap_bytes / MIB
        )));
    }
    if mem_available < anon + opts.floor_bytes {
        return Err(HostError::Unsafe(format!(
            "MemAvailable {} MiB - {} MiB of anonymous memory would fall under the floor of {} MiB",
            mem_available / MIB,
            anon / MIB,
            opts.floor_bytes / MIB
        )));
    }
    Ok(Plan {
        knobs,
        anon_bytes: anon,
        mem_available,
        kernel,
    })
}

/// A one-shot capture of the /proc files and every knob fraglab knows (in `vmstat_delta`'s
/// place: `knobs`), engine "host".
pub fn snapshot() -> (RunResult, BTreeMap<String, String>) {
    let knobs = fraglab_spec::KNOBS
        .iter()
        .filter_map(|k| read_knob(k.name).ok().map(|v| (k.name.to_string(), v)))
        .collect();
    let r = RunResult {
        schema: RESULT_SCHEMA,
        engine: "host".into(),
        samples: vec![procfs::sample(0)],
        proc_start: procfs::snapshot(),
        ..Default::default()
    };
    (r, knobs)
}

fn now_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// An anonymous mapping of the process (2 MiB aligned so that THP faults are possible).
struct Map {
    addr: *mut u8,
    len: usize,
}

impl Map {
    fn new(len: usize, huge: bool) -> Option<Map> {
        let len = len.div_ceil(PAGE) * PAGE;
        // SAFETY: an anonymous private mapping of len + 2 MiB, trimmed to a 2 MiB boundary.
        unsafe {
            let raw = libc::mmap(
                std::ptr::null_mut(),
                len + PMD,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if raw == libc::MAP_FAILED {
                return None;
            }
            let start = (raw as usize).div_ceil(PMD) * PMD;
            let head = start - raw as usize;
            if head > 0 {
                libc::munmap(raw, head);
            }
            let tail = PMD - head;
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
            let advice = if huge {
                libc::MADV_HUGEPAGE
            } else {
                libc::MADV_NOHUGEPAGE
            };
            libc::madvise(start as *mut libc::c_void, len, advice);
            Some(Map {
                addr: start as *mut u8,
                len,
            })
        }
    }

    /// Writes one byte per page of [from, to) (a fault for every unpopulated page).
    fn touch(&self, from: usize, to: usize) {
        let mut off = from;
        while off < to.min(self.len) {
            // SAFETY: off < len, inside the mapping.
            unsafe { std::ptr::write_volatile(self.addr.add(off), 1) };
            off += PAGE;
        }
    }

    fn dontneed(&self, off: usize, len: usize) {
        let off = off.min(self.len) / PAGE * PAGE;
        let len = len.min(self.len - off);
        // SAFETY: inside the mapping.
        unsafe { libc::madvise(self.addr.add(off) as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// AnonHugePages of this process, in bytes (/proc/self/smaps_rollup).
fn anon_huge_bytes() -> u64 {
    procfs::read("/proc/self/smaps_rollup")
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The body of one forked task instance: its steps, `loops` times. Reports per-2 MiB touch
/// latencies as lines `lat NS` into `out`.
fn run_task(t: &fraglab_spec::TaskParams, dir: &std::path::Path, out: &mut std::fs::File, seed: u64) {
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut maps: BTreeMap<String, Map> = BTreeMap::new();
    let mut held_files: Vec<PathBuf> = Vec::new();
    let mut pipes: Vec<(i32, i32)> = Vec::new();
    for _ in 0..t.loops.max(1) {
        for s in &t.steps {
            match s {
                TaskStep::Mmap {
                    vma,
                    size_bytes,
                    madvise,
                } => {
                    if let Some(m) = Map::new(*size_bytes as usize, *madvise) {
                        maps.insert(vma.clone(), m);
                    }
                }
                TaskStep::Touch { vma, random } => {
                    if let Some(m) = maps.get(vma) {
                        let steps = m.len.div_ceil(PMD);
                        let mut order: Vec<usize> = (0..steps).collect();
                        if *random {
                            for i in (1..order.len()).rev() {
                                order.swap(i, next() as usize % (i + 1));
                            }
                        }
                        for i in order {
                            let t0 = Instant::now();
                            m.touch(i * PMD, (i + 1) * PMD);
                            let _ = writeln!(out, "lat {}", t0.elapsed().as_nanos());
                        }
                    }
                }
                TaskStep::Dontneed { vma, offset, length } => {
                    if let Some(m) = maps.get(vma) {
                        m.dontneed(*offset as usize, *length as usize);
                    }
                }
                TaskStep::Munmap { vma } => {
                    maps.remove(vma);
                }
                TaskStep::Compute { ns } => {
                    let t0 = Instant::now();
                    let mut x = 0u64;
                    while (t0.elapsed().as_nanos() as u64) < *ns {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        std::hint::black_box(x);
                    }
                }
                TaskStep::Sleep { ns } => std::thread::sleep(Duration::from_nanos(*ns)),
                TaskStep::Read {
                    file,
                    offset,
                    length,
                    file_size,
                    random,
                } => {
                    let path = dir.join(file);
                    if !path.exists() {
                        if let Ok(f) = std::fs::File::create(&path) {
                            let _ = f.set_len(*file_size);
                        }
                    }
                    if let Ok(f) = std::fs::File::open(&path) {
                        use std::os::unix::fs::FileExt;
                        let mut buf = vec![0u8; 64 << 10];
                        let pages = length.div_ceil(PAGE as u64);
                        if *random {
                            for _ in 0..pages {
                                let p = next() % file_size.div_ceil(PAGE as u64).max(1);
                                let _ = f.read_at(&mut buf[..PAGE], p * PAGE as u64);
                            }
                        } else {
                            let mut pos = *offset;
                            while pos < offset + length {
                                let n = buf.len().min((offset + length - pos) as usize);
                                if f.read_at(&mut buf[..n], pos).unwrap_or(0) == 0 {
                                    break;
                                }
                                pos += n as u64;
                            }
                        }
                    }
                }
                TaskStep::Write {
                    file,
                    offset,
                    length,
                    chunk,
                } => {
                    use std::os::unix::fs::FileExt;
                    if let Ok(f) = std::fs::OpenOptions::new()
                        .create(true)
                        .truncate(false)
                        .write(true)
                        .open(dir.join(file))
                    {
                        let buf = vec![7u8; (*chunk as usize).max(PAGE)];
                        let mut pos = *offset;
                        while pos < offset + length {
                            let n = buf.len().min((offset + length - pos) as usize);
                            let _ = f.write_at(&buf[..n], pos);
                            pos += n as u64;
                        }
                    }
                }
                TaskStep::Delete { file } => {
                    let _ = std::fs::remove_file(dir.join(file));
                }
                TaskStep::Slab {
                    count,
                    reclaimable: true,
                } => {
                    // Small files: dentries and inodes (reclaimable slab), kept until the end.
                    let sub = dir.join(format!("slab-{}", std::process::id()));
                    let _ = std::fs::create_dir_all(&sub);
                    for i in 0..*count {
                        let p = sub.join(format!("f{}-{i}", held_files.len()));
                        if std::fs::File::create(&p).is_ok() {
                            held_files.push(p);
                        }
                    }
                }
                TaskStep::Slab {
                    count,
                    reclaimable: false,
                } => {
                    // Pipes holding one page each (unmovable pipe buffers).
                    for _ in 0..*count {
                        let mut fds = [0i32; 2];
                        // SAFETY: fds is a valid 2-int array.
                        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
                            break;
                        }
                        let page = [1u8; PAGE];
                        // SAFETY: writing our buffer into our pipe.
                        unsafe { libc::write(fds[1], page.as_ptr() as *const libc::c_void, PAGE) };
                        pipes.push((fds[0], fds[1]));
                    }
                }
                TaskStep::CompactMemory => {
                    let _ = std::fs::write("/proc/sys/vm/compact_memory", "1");
                }
                TaskStep::DropCaches => {
                    let _ = std::fs::write("/proc/sys/vm/drop_caches", "1");
                }
            }
        }
    }
    for (r, w) in pipes {
        // SAFETY: closing our descriptors.
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
    for p in held_files {
        let _ = std::fs::remove_file(p);
    }
}

/// The THP burst process (seed 001's Hugealloc): lines `burst START_NS ALLOC_NS FAULTS HUGE`.
fn run_bursts(b: &fraglab_spec::ThpBurstParams, out: &mut std::fs::File, t0: Instant) {
    std::thread::sleep(Duration::from_nanos(b.start_ns));
    for i in 0..b.bursts {
        let start = now_ns(t0);
        let Some(m) = Map::new(b.size_bytes as usize, true) else {
            break;
        };
        let huge_before = anon_huge_bytes();
        let t = Instant::now();
        m.touch(0, m.len);
        let alloc = t.elapsed().as_nanos();
        let huge = anon_huge_bytes().saturating_sub(huge_before) / PMD as u64;
        let _ = writeln!(out, "burst {start} {alloc} {} {huge}", m.len / PMD);
        std::thread::sleep(Duration::from_nanos(b.hold_ns));
        drop(m);
        let next = b.start_ns + (i as u64 + 1) * b.interval_ns;
        let now = now_ns(t0);
        if next > now {
            std::thread::sleep(Duration::from_nanos(next - now));
        }
    }
}

/// Forks a child that runs `body` and exits; returns its pid.
fn spawn(body: impl FnOnce()) -> Result<i32, HostError> {
    // SAFETY: the child only runs `body` (no locks held across fork in this single-threaded
    // parent) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(HostError::Io("fork failed".into()));
    }
    if pid == 0 {
        // Die with the run: a run killed with SIGKILL must not leave its workload behind.
        // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number has no other effect.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        // SAFETY: ends the child without running the parent's destructors (knob guard).
        unsafe { libc::_exit(if r.is_ok() { 0 } else { 1 }) };
    }
    Ok(pid)
}

fn kill_all(pids: &[i32]) {
    for &p in pids {
        // SAFETY: only our own children, by pid.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    for &p in pids {
        let mut st = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(p, &mut st, 0) };
    }
}

/// Runs the spec on this kernel (after [`preflight`]): applies the knobs under a guard, forks
/// the workload processes, samples every second, and returns the result. Knobs are restored and
/// the scratch directory removed whatever happens.
pub fn host_run(spec: &Spec, opts: &HostOptions) -> Result<RunResult, HostError> {
    let plan = preflight(spec, opts)?;
    let w = spec.workload.as_ref().expect("preflight checked");
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| HostError::Io(e.to_string()))?;
    }
    std::fs::create_dir_all(&opts.dir).map_err(|e| HostError::Io(format!("{}: {e}", opts.dir.display())))?;
    let _dir = ScratchDir(opts.dir.clone());
    let wanted: Vec<(String, String)> = plan
        .knobs
        .iter()
        .map(|(n, _, v)| (n.clone(), v.clone()))
        .collect();
    let mut guard = KnobGuard::apply(&wanted, &opts.state_file)?;
    let tracing = if opts.trace {
        Some(crate::trace::Tracing::start()?)
    } else {
        None
    };
    let mut result = run_loop(spec, w, opts, &stop);
    if let Some(t) = tracing {
        let counts = t.stop();
        if let Ok(r) = result.as_mut() {
            r.trace_counts = counts;
        }
    }
    guard.restore()?;
    result
}

struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_loop(
    spec: &Spec,
    w: &fraglab_spec::WorkloadSpec,
    opts: &HostOptions,
    stop: &AtomicBool,
) -> Result<RunResult, HostError> {
    let t0 = Instant::now();
    let vm0 = procfs::vmstat(&procfs::read("/proc/vmstat"));
    let proc_start = procfs::snapshot();
    let mut samples = vec![procfs::sample(0)];
    let mut children: Vec<(i32, PathBuf)> = Vec::new();
    let mut n = 0;
    for t in &w.task {
        for i in 0..t.count {
            let log = opts.dir.join(format!("task-{n}.log"));
            n += 1;
            let (t2, dir, log2) = (t.clone(), opts.dir.clone(), log.clone());
            let seed = spec.run.seed.wrapping_mul(1000).wrapping_add(i as u64);
            let pid = spawn(move || {
                std::thread::sleep(Duration::from_nanos(t2.start_ns));
                if let Ok(mut f) = std::fs::File::create(&log2) {
                    run_task(&t2, &dir, &mut f, seed);
                }
            })?;
            children.push((pid, log));
        }
    }
    for b in &w.thp_burst {
        let log = opts.dir.join(format!("burst-{n}.log"));
        n += 1;
        let (b2, log2) = (b.clone(), log.clone());
        let pid = spawn(move || {
            if let Ok(mut f) = std::fs::File::create(&log2) {
                run_bursts(&b2, &mut f, t0);
            }
        })?;
        children.push((pid, log));
    }
    let pids: Vec<i32> = children.iter().map(|(p, _)| *p).collect();
    let mut alive: Vec<i32> = pids.clone();
    let mut next_sample = 1_000_000_000u64;
    let outcome = loop {
        std::thread::sleep(Duration::from_millis(50));
        alive.retain(|&p| {
            let mut st = 0;
            // SAFETY: polling our own child.
            unsafe { libc::waitpid(p, &mut st, libc::WNOHANG) == 0 }
        });
        let now = now_ns(t0);
        if now >= next_sample {
            samples.push(procfs::sample(now));
            next_sample += 1_000_000_000;
        }
        if stop.load(Ordering::SeqCst) {
            break Err(HostError::Interrupted);
        }
        let avail = procfs::mem_available();
        if avail < opts.floor_bytes {
            break Err(HostError::Unsafe(format!(
                "MemAvailable fell to {} MiB, under the floor of {} MiB: stopped",
                avail / MIB,
                opts.floor_bytes / MIB
            )));
        }
        if alive.is_empty() || now >= w.duration_ns {
            break Ok(now);
        }
    };
    kill_all(&alive);
    let end_ns = outcome?;
    let vm1 = procfs::vmstat(&procfs::read("/proc/vmstat"));
    let mut lat = LatencyHistogram {
        order: 9,
        path: "host_2mib_step".into(),
        min_ns: u64::MAX,
        log2_buckets: vec![0; 40],
        ..Default::default()
    };
    let mut bursts = Vec::new();
    for (_, log) in &children {
        for line in procfs::read(&log.to_string_lossy()).lines() {
            let f: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            if line.starts_with("lat ") && f.len() == 1 {
                let ns = f[0];
                lat.count += 1;
                lat.sum_ns += ns;
                lat.min_ns = lat.min_ns.min(ns);
                lat.max_ns = lat.max_ns.max(ns);
                lat.log2_buckets[(63 - ns.max(1).leading_zeros()) as usize] += 1;
            } else if line.starts_with("burst ") && f.len() == 4 {
                bursts.push(BurstResult {
                    start_ns: f[0],
                    alloc_ns: f[1],
                    faults: f[2],
                    huge: f[3],
                });
            }
        }
    }
    bursts.sort_by_key(|b| b.start_ns);
    if lat.count == 0 {
        lat.min_ns = 0;
    }
    samples.push(procfs::sample(end_ns));
    Ok(RunResult {
        schema: RESULT_SCHEMA,
        engine: "host".into(),
        spec_name: spec.name.clone(),
        seed: spec.run.seed,
        duration_ns: end_ns,
        vmstat_delta: vm1
            .iter()
            .map(|(k, v)| (k.clone(), v - vm0.get(k).copied().unwrap_or(0)))
            .collect(),
        samples,
        fault_latency: if lat.count > 0 { vec![lat] } else { vec![] },
        bursts,
        proc_start,
        proc_end: procfs::snapshot(),
        wall_ns: end_ns,
        ..Default::default()
    })
}
