//! A host run ([`host_run`]): the run's directory and files, the knobs and the rest of the
//! machine's changes in the run's change journal ([`crate::journal`]), the workers and their
//! supervision, and the result.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fraglab_spec::result::{
    vmstat_delta_between, BurstResult, FitMemory, Histogram, HostConfounders, Prelude, RunResult, Sample,
    ThpChallengeResult, RESULT_SCHEMA,
};
use fraglab_spec::{Spec, WorkloadSpec, TRACE_EVENTS};

use crate::journal::{Change, Journal, Machine, RECOMPUTED_BY_HOTPLUG};
use crate::preflight::{fio_rings, preflight, Plan};
use crate::{
    confounders, default_state_file, hugetlb, knobs, memblock, procfs, read_all_knobs, signals, start_proc,
    trace, worker, HostError, HostOptions,
};

/// The run's directory (`fraglab-host-PID-NANOS` under `parent`), a `work_dir` change of the
/// journal: removed with everything in it on every way out.
fn make_work_dir(journal: &mut Journal, parent: &Path) -> Result<PathBuf, HostError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let p = parent.join(format!("fraglab-host-{}-{nanos}", std::process::id()));
    journal.apply(Change::WorkDir { path: p.clone() })?;
    Ok(p)
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

/// Runs `spec`'s workload on this machine and returns its result (`engine = "host"`).
///
/// Every change to the machine is a change of the run's journal ([`crate::journal`]), written
/// to the state file before it is made and undone before this returns, whatever happens: on
/// success, on error (the workload processes are SIGKILLed by pid first), on a panic (the
/// journal's drop during unwinding), and on SIGINT/SIGTERM (then the error is
/// [`HostError::Interrupted`]). A run killed with SIGKILL leaves its state file for
/// [`restore_from_state_file`](crate::restore_from_state_file); its workers die with it
/// (PR_SET_PDEATHSIG).
pub fn host_run(spec: &Spec, opts: &HostOptions) -> Result<RunResult, HostError> {
    let plan = preflight(spec, opts)?;
    let w = spec.workload.as_ref().expect("preflight checked");
    let _lock = knobs::RunLock::acquire()?;
    let signals = signals::SignalFlag::install();
    let state_file = opts
        .state_file
        .clone()
        .unwrap_or_else(|| default_state_file(std::process::id()));
    let mut journal = Journal::new(Machine::live(), state_file);
    let setup = set_up(spec, opts, &plan, &mut journal, &signals)?;
    // The files, images and pools are in place: MemAvailable again, against the preflight's.
    let now = procfs::mem_available()?;
    if let Some(n) = plan.memory.setup_note(now) {
        eprintln!("fraglab host: {n}");
    }
    plan.memory.check_after_setup(now, opts.mem_floor_bytes)?;
    let measured = run_workload(spec, w, opts, &plan, &mut journal, &signals, &setup)?;
    journal.undo_all()?;
    result(spec, w, setup, measured)
}

/// What [`set_up`] made of the machine for the run.
struct Setup {
    dir: PathBuf,
    slab_dir: PathBuf,
    files: BTreeMap<String, PathBuf>,
    damon_turned_off: Vec<u32>,
    pool_fit: Option<hugetlb::Fit>,
    pool: Option<hugetlb::Pool>,
    /// The pool the run holds before any step (`nr_hugepages` steps count on top of it).
    hugetlb_base: u64,
    fit_memory: Option<FitMemory>,
    images: Option<crate::loops::LoopImages>,
    read_device: Option<String>,
    captured: Option<(PathBuf, Duration, Instant)>,
}

/// Readies the machine, every change through `journal`: the run's directory and files, the
/// knobs, DAMON, `--fit-memory`, the hugetlb pool of the steps, the loop images,
/// read_ahead_kb; then the read device fit and the same-start capture.
fn set_up(
    spec: &Spec,
    opts: &HostOptions,
    plan: &Plan,
    journal: &mut Journal,
    signals: &signals::SignalFlag,
) -> Result<Setup, HostError> {
    let dir = make_work_dir(journal, &plan.workdir_parent)?;
    let slab_dir = dir.join("slab");
    std::fs::create_dir(&slab_dir).map_err(|e| HostError::io(slab_dir.display().to_string(), e))?;
    // With loop images the files are made after the images.
    let mut files = if spec.host.loop_images {
        BTreeMap::new()
    } else {
        create_files(plan, &|_| Ok(dir.clone()), opts, signals)?
    };
    for (name, value) in plan.knob_changes() {
        let c = Change::knob(journal.machine(), &name, &value)?;
        journal.apply(c)?;
    }
    let damon_turned_off = if spec.host.damon_off {
        damon_off(journal)?
    } else {
        Vec::new()
    };
    let fit = fit_machine(plan, opts, journal, signals)?;
    // `[host] loop_images`: each image a change of the journal, made before the files on it.
    let images = if spec.host.loop_images {
        let images = crate::loops::LoopImages::create(journal, &dir, &plan.loop_images)?;
        if let Some(sig) = signals.caught() {
            return Err(HostError::Interrupted(sig));
        }
        files = create_files(plan, &|n| image_base(plan, &images, n), opts, signals)?;
        Some(images)
    } else {
        None
    };
    if let Some(kb) = plan.read_ahead_kb {
        set_read_ahead(journal, &dir, images.as_ref(), kb)?;
    }
    let read_device = opts
        .fit_read_device
        .then(|| fit_read_device(spec, plan, &dir, images.as_ref()))
        .transpose()?;
    // The same start on both engines (`HostOptions::capture_to`): the page state once the
    // knobs are set and the machine fitted, read right before anything of the run starts.
    let captured = match &opts.capture_to {
        Some(path) => Some(capture_into(path)?),
        None => None,
    };
    Ok(Setup {
        dir,
        slab_dir,
        files,
        damon_turned_off,
        pool_fit: fit.pool_fit,
        pool: fit.pool,
        hugetlb_base: fit.hugetlb_base,
        fit_memory: fit.fit_memory,
        images,
        read_device,
        captured,
    })
}

/// `--fit-memory` and the pool of `nr_hugepages` steps.
struct Fitted {
    pool_fit: Option<hugetlb::Fit>,
    pool: Option<hugetlb::Pool>,
    hugetlb_base: u64,
    fit_memory: Option<FitMemory>,
}

/// `--fit-memory` by offlining (each block a `memory_block` change, recorded before it goes
/// offline, after `watch` changes of the values the kernel recomputes), the hugetlb pool of
/// `--fit-memory` or of its shortfall (a `hugetlb_pool` change, recorded before it is filled),
/// and §28.1's `nr_hugepages` steps: the pool's size before the run (preflight checked it is
/// 0) recorded before any worker can resize it. With a pool of the run's own that pool's
/// record stands and the steps count on top of it (the base).
fn fit_machine(
    plan: &Plan,
    opts: &HostOptions,
    journal: &mut Journal,
    signals: &signals::SignalFlag,
) -> Result<Fitted, HostError> {
    let blocks = match &plan.offline {
        Some(o) => Some(take_offline(o, journal, signals)?),
        None => None,
    };
    // Offlining is best effort: the blocks that refused are made up by a hugetlb pool of 2 MiB
    // pages, planned on the MemTotal left once the blocks that went are gone.
    let pool_fit = match (&plan.fit, &blocks) {
        (Some(fit), _) => Some(fit.clone()),
        (None, Some(b)) if b.shortfall() > 0 => {
            let o = plan.offline.as_ref().expect("blocks come from an offline plan");
            let meminfo = procfs::read("/proc/meminfo")?;
            Some(hugetlb::shortfall(&meminfo, hugetlb::current_pages()?, o.target)?)
        }
        _ => None,
    };
    let pool = match &pool_fit {
        Some(fit) => {
            journal.record(Change::HugetlbPool {
                before: fit.before,
                after: fit.pages,
            })?;
            Some(hugetlb::Pool::reserve(fit)?)
        }
        None => None,
    };
    let hugetlb_base = pool.as_ref().map_or(0, |p| p.pages);
    if plan.hugetlb_step_pages.is_some() && pool.is_none() {
        let before = hugetlb::current_pages()?;
        journal.record(Change::HugetlbPool {
            before,
            after: before,
        })?;
    }
    let fit_memory = fitted(plan, blocks.as_ref(), pool_fit.as_ref(), pool.as_ref(), opts)?;
    Ok(Fitted {
        pool_fit,
        pool,
        hugetlb_base,
        fit_memory,
    })
}

/// `[machine] read_ahead_kb` (§23.1): the run directory's device and the run's own loop
/// devices, each a `read_ahead` change (its value before recorded first, written back on every
/// way out, the loop devices' while they are still attached).
fn set_read_ahead(
    journal: &mut Journal,
    dir: &Path,
    images: Option<&crate::loops::LoopImages>,
    kb: u64,
) -> Result<(), HostError> {
    let dev = block_device_of(dir).ok_or_else(|| {
        HostError::Unsafe(format!(
            "machine.read_ahead_kb: {} is not on a block device",
            dir.display()
        ))
    })?;
    let c = Change::read_ahead(journal.machine(), &dev, kb)?;
    journal.apply(c)?;
    for i in images.iter().flat_map(|l| &l.images) {
        let Some(name) = i
            .dev
            .as_ref()
            .and_then(|d| d.file_name())
            .and_then(|n| n.to_str())
        else {
            continue;
        };
        let c = Change::read_ahead(journal.machine(), name, kb)?;
        journal.apply(c)?;
    }
    Ok(())
}

/// The read device as it is today, under the run's files (`HostOptions::fit_read_device`).
/// A directory that refuses O_DIRECT (tmpfs) or a full disk costs the fit, not the run: the
/// line says why, and the simulator keeps its cost model's device.
fn fit_read_device(
    spec: &Spec,
    plan: &Plan,
    dir: &Path,
    images: Option<&crate::loops::LoopImages>,
) -> Result<String, HostError> {
    let under = match (images, plan.read_files.keys().next()) {
        (Some(i), Some(name)) => image_base(plan, i, name)?,
        _ => dir.to_path_buf(),
    };
    Ok(match crate::readdev::fit_read_device(&under, spec.run.seed) {
        Ok(fit) => fit.line(&under),
        Err(e) => format!("read device: not fitted under {}: {e}\n", under.display()),
    })
}

/// What [`run_workload`] measured.
struct Measured {
    samples: Vec<Sample>,
    vm_start: BTreeMap<String, i64>,
    vm_end: BTreeMap<String, i64>,
    confounders_start: fraglab_spec::result::confounders::ConfounderReading,
    confounders_end: fraglab_spec::result::confounders::ConfounderReading,
    proc_start: BTreeMap<String, String>,
    proc_end: BTreeMap<String, String>,
    trace_counts: BTreeMap<String, u64>,
    ended: Ended,
    workers: Vec<worker::Worker>,
    phases: Phases,
    end_ns: u64,
}

/// The `host` facts of the start that [`set_up`] found: the images, the read device fit, the
/// capture (`t0`: when the workers start).
fn setup_facts(setup: &Setup, proc_start: &mut BTreeMap<String, String>, t0: Instant) {
    let host = proc_start.entry("host".into()).or_default();
    if let Some(i) = &setup.images {
        host.push_str(&i.facts());
    }
    if let Some(line) = &setup.read_device {
        host.push_str(line);
    }
    if let Some((path, read, ended)) = &setup.captured {
        host.push_str(&format!(
            "capture: {} (pfns read in {} ms; ended {} ms before the workers started)\n",
            path.display(),
            read.as_millis(),
            t0.saturating_duration_since(*ended).as_millis()
        ));
    }
}

/// Starts tracing, the workers and their supervision; the measurements, tracing ended (its
/// instance removed through the journal).
fn run_workload(
    spec: &Spec,
    w: &WorkloadSpec,
    opts: &HostOptions,
    plan: &Plan,
    journal: &mut Journal,
    signals: &signals::SignalFlag,
    setup: &Setup,
) -> Result<Measured, HostError> {
    let run_knobs = read_all_knobs();
    let trace_mark = journal.mark();
    let mut tracing = start_tracing(spec, opts, journal)?;
    let mut proc_start = run_proc_start(setup.pool_fit.as_ref(), setup.pool.as_ref(), &run_knobs)?;
    let confounders_start = confounders::read();
    let vm_start = procfs::parse_vmstat(&procfs::read("/proc/vmstat")?);
    let phases = Phases(worker::PhaseBoard::new()?);
    let t0 = Instant::now();
    setup_facts(setup, &mut proc_start, t0);
    let clock = worker::Clock {
        t0,
        deadline: t0 + plan.duration,
        seed: spec.run.seed,
        phases: phases.0,
        hugetlb_base: setup.hugetlb_base,
    };
    let mut samples: Vec<Sample> = vec![procfs::sample(0)?];
    let hooks = worker::MeasureHooks {
        capture_to: opts.capture_at_measure.clone(),
        trace_marker: tracing.as_ref().map(|t| t.marker_path()),
    };
    let (jobs, background) = build_jobs(spec, w, &setup.dir, &setup.files, &setup.slab_dir, hooks)?;
    // Phases: the jobs of a task with `after` start when the jobs they wait for are done.
    let gates = task_gates(&w.task, jobs.len());
    let mut workers = Vec::new();
    for (j, g) in jobs.iter().zip(&gates) {
        workers.push(match g {
            None => Some(spawn_recorded(journal, j, clock)?),
            Some(_) => None,
        });
    }
    let supervisor = Supervisor {
        opts,
        signals,
        t0,
        duration: plan.duration,
        background: &background,
        jobs: &jobs,
        gates: &gates,
        clock,
    };
    let ended = supervisor.run(&mut workers, journal, &mut samples)?;
    let end_ns = t0.elapsed().as_nanos() as u64;
    if samples.last().is_some_and(|s| s.t_ns < end_ns) {
        samples.push(procfs::sample(end_ns)?);
    }
    let vm_end = procfs::parse_vmstat(&procfs::read("/proc/vmstat")?);
    let confounders_end = confounders::read();
    let mut proc_end = start_proc(&run_knobs)?;
    let trace_counts = finish_tracing(tracing.take(), &mut proc_end, opts.trace_to.as_deref());
    journal.undo_to(trace_mark)?;
    if plan.hugetlb_step_pages.is_some() {
        // The pool the tasks' nr_hugepages steps left on top of the base, as the simulator
        // records the pool its last step read back.
        let now = hugetlb::current_pages()?.saturating_sub(setup.hugetlb_base);
        proc_end.insert("nr_hugepages".into(), format!("{now}\n"));
    }
    Ok(Measured {
        samples,
        vm_start,
        vm_end,
        confounders_start,
        confounders_end,
        proc_start,
        proc_end,
        trace_counts,
        ended,
        workers: workers.into_iter().flatten().collect(),
        phases,
        end_ns,
    })
}

/// Forks a worker and records it in the journal (a `child` change, ended with SIGKILL; it
/// also dies with the engine, PR_SET_PDEATHSIG, before it is recorded).
fn spawn_recorded(
    journal: &mut Journal,
    job: &worker::Job,
    clock: worker::Clock,
) -> Result<worker::Worker, HostError> {
    let wk = worker::spawn(job, clock)?;
    journal.record(Change::child(journal.machine(), wk.pid, Duration::ZERO))?;
    Ok(wk)
}

/// The run's result from what it measured, the machine put back.
fn result(spec: &Spec, w: &WorkloadSpec, setup: Setup, m: Measured) -> Result<RunResult, HostError> {
    let Measured {
        mut proc_start,
        mut proc_end,
        workers,
        phases,
        ..
    } = m;
    // Phases: with a `measure` step, the deltas start at the vmstat its worker read, and the
    // part before it is the prelude.
    let mark = workers
        .iter()
        .filter_map(|w| w.measure())
        .min_by_key(|m| m.measure_ns);
    let mut reports = collect_reports(&workers, &m.ended, mark.is_some(), &mut proc_end)?;
    drop(workers);
    drop(phases);
    let (vmstat_delta, prelude) = match &mark {
        None => (vmstat_delta_between(&m.vm_start, &m.vm_end), None),
        Some(mk) => (
            vmstat_delta_between(&mk.vmstat, &m.vm_end),
            Some(Prelude {
                duration_ns: mk.measure_ns,
                vmstat_delta: vmstat_delta_between(&m.vm_start, &mk.vmstat),
            }),
        ),
    };
    if let Some(mk) = &mark {
        reports.bursts.retain(|b| b.start_ns >= mk.measure_ns);
        if let Some((path, ns)) = &mk.capture {
            proc_start.entry("host".into()).or_default().push_str(&format!(
                "capture at the measured part: {} (took {} ms, ended right before the measured part)\n",
                path.display(),
                ns / 1_000_000
            ));
        }
    }
    Ok(RunResult {
        schema: RESULT_SCHEMA,
        engine: "host".into(),
        spec_name: spec.name.clone(),
        seed: spec.run.seed,
        duration_ns: m.end_ns,
        vmstat_delta,
        samples: m.samples,
        fault_latency: reports
            .faults
            .iter()
            .map(|(o, h)| h.to_latency(*o, "host"))
            .collect(),
        bursts: reports.bursts,
        thpchallenge: (!w.thpchallenge.is_empty())
            .then(|| ThpChallengeResult::from_histograms(&reports.huge, &reports.base)),
        trace_counts: m.trace_counts,
        proc_start,
        proc_end,
        wall_ns: m.end_ns,
        confounders: Some(HostConfounders {
            damon_turned_off: setup.damon_turned_off,
            fit_memory: setup.fit_memory.as_ref().map(|f| f.description.clone()),
            ..HostConfounders::from_readings(m.confounders_start, m.confounders_end)
        }),
        fit_memory: setup.fit_memory,
        measure_start_ns: mark.map(|m| m.measure_ns),
        prelude,
        census: reports.census,
        task_reads: reports.reads,
        named_samples: reports.named_samples,
        // The simulator's CPU-time histograms and lock model, its work counters, builds,
        // pgbench, vm-scalability, pageblock maps: not measured on the host. The host is its
        // own state: no reconstruction to report.
        ..Default::default()
    })
}

/// Captures this machine into the snapshot file `path` ([`crate::snapshot::capture`], without
/// page_owner, which can take seconds); returns the path, the time the pfn read took and the
/// moment the capture ended.
fn capture_into(path: &Path) -> Result<(PathBuf, std::time::Duration, Instant), HostError> {
    let opts = crate::snapshot::CaptureOptions {
        page_owner: false,
        damon_regions: true,
        ..Default::default()
    };
    let snap = crate::snapshot::capture(&opts, &mut |_, _| {})?;
    snap.write(path).map_err(|e| HostError::Io {
        what: format!("writing the capture {}", path.display()),
        err: std::io::Error::other(e.to_string()),
    })?;
    let read = std::time::Duration::from_nanos(snap.header.read_ns);
    Ok((path.to_path_buf(), read, Instant::now()))
}

/// Phases: the shared word, unmapped when the run is over (after its workers are reaped).
struct Phases(worker::PhaseBoard);

impl Drop for Phases {
    fn drop(&mut self) {
        self.0.unmap();
    }
}

/// Phases: a job that waits for other jobs (by index) to be done, and then `start_ns` more.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Gate {
    after: Vec<usize>,
    start_ns: u64,
}

/// The gates of `jobs` jobs whose first are the task instances in [`build_jobs`]'s order: an
/// instance of a task with `after = "NAME"` waits for every instance of every task named NAME
/// (the spec checked the names and that they make no cycle).
fn task_gates(tasks: &[fraglab_spec::TaskParams], jobs: usize) -> Vec<Option<Gate>> {
    let mut first = Vec::new();
    let mut n = 0usize;
    for t in tasks {
        first.push(n);
        n += t.count as usize;
    }
    let mut gates = vec![None; jobs.max(n)];
    for (i, t) in tasks.iter().enumerate() {
        let Some(a) = &t.after else { continue };
        let after: Vec<usize> = tasks
            .iter()
            .enumerate()
            .filter(|(_, u)| u.name == *a)
            .flat_map(|(k, u)| first[k]..first[k] + u.count as usize)
            .collect();
        for g in &mut gates[first[i]..first[i] + t.count as usize] {
            *g = Some(Gate {
                after: after.clone(),
                start_ns: t.start_ns,
            });
        }
    }
    gates.truncate(jobs);
    gates
}

/// Phases: the gated jobs not started yet (`started` false) whose jobs to wait for are all
/// done.
fn ready_jobs(gates: &[Option<Gate>], started: &[bool], done: &[bool]) -> Vec<usize> {
    (0..gates.len())
        .filter(|&i| !started[i])
        .filter(|&i| {
            gates[i]
                .as_ref()
                .is_some_and(|g| g.after.iter().all(|&d| done[d]))
        })
        .collect()
}

/// `--fit-memory` by offlining ([`memblock::offline_best_effort`]): the values the kernel
/// recomputes when blocks go and come back (`watch` changes) recorded first, then each block
/// recorded (a `memory_block` change) before it goes offline; a SIGINT/SIGTERM meanwhile
/// stops (the journal onlines the blocks taken). The blocks that refuse are left to the run's
/// hugetlb pool.
fn take_offline(
    o: &memblock::OfflinePlan,
    journal: &mut Journal,
    signals: &signals::SignalFlag,
) -> Result<memblock::Offlined, HostError> {
    for p in RECOMPUTED_BY_HOTPLUG {
        if journal.machine().path(Path::new(p)).exists() {
            let c = Change::watch(journal.machine(), p)?;
            journal.record(c)?;
        }
    }
    let limits = memblock::Limits::for_plan(o);
    let mut write = |p: &Path, v: &str| memblock::write_bounded(p, v, limits.per_block);
    let mut record = |i: u64| {
        if let Some(sig) = signals.caught() {
            return Err(HostError::Interrupted(sig));
        }
        journal.record(Change::MemoryBlock { index: i })
    };
    memblock::offline_best_effort(o, limits, &mut write, &mut record)
}

/// The result's record of `--fit-memory` (None without it): the method, the plan's line, and
/// MemTotal and node 0's zones once fitted.
fn fitted(
    plan: &Plan,
    blocks: Option<&memblock::Offlined>,
    pool_fit: Option<&hugetlb::Fit>,
    pool: Option<&hugetlb::Pool>,
    opts: &HostOptions,
) -> Result<Option<FitMemory>, HostError> {
    if !opts.fit_memory {
        return Ok(None);
    }
    let meminfo = procfs::read("/proc/meminfo")?;
    let total = procfs::meminfo_bytes(&meminfo, "MemTotal").unwrap_or(0);
    let zones = procfs::parse_zones(&procfs::read("/proc/zoneinfo")?);
    let mut f = FitMemory {
        mem_total_fitted: total,
        zones,
        ..Default::default()
    };
    if let (Some(o), Some(b)) = (&plan.offline, blocks) {
        f.method = "offline".into();
        f.description = b.describe(o);
        f.target_bytes = o.target;
        f.mem_total_before = o.mem_total;
        f.blocks = b.blocks.clone();
        f.block_bytes = b.block_bytes;
        if let (Some(fit), Some(p)) = (pool_fit, pool) {
            f.method = "offline+hugetlb".into();
            f.description = format!(
                "{}; the shortfall held in a hugetlb pool of {} pages of {} MiB ({} asked; {} MiB \
                 of MemTotal {} MiB left to the page allocator)",
                b.describe(o),
                p.pages,
                fit.page_bytes >> 20,
                fit.pages,
                p.outside(fit) >> 20,
                fit.mem_total >> 20
            );
            f.hugetlb_pages = p.pages;
        }
    } else if let (Some(fit), Some(p)) = (pool_fit, pool) {
        f.method = "hugetlb".into();
        f.description = format!(
            "hugetlb pool of {} pages of {} MiB ({} asked; {} MiB of MemTotal {} MiB left to the \
             page allocator for machine.memory {} MiB; offlining unavailable: {})",
            p.pages,
            fit.page_bytes >> 20,
            fit.pages,
            p.outside(fit) >> 20,
            fit.mem_total >> 20,
            fit.target >> 20,
            plan.fit_fallback.as_deref().unwrap_or("?")
        );
        f.target_bytes = fit.target;
        f.mem_total_before = fit.mem_total;
        f.hugetlb_pages = p.pages;
    }
    Ok(Some(f))
}

/// `[host] damon = "off"`: turns off the kdamonds that are on, each a `kdamond` change of the
/// journal (turned back on with the rest). Returns their indices.
pub(crate) fn damon_off(journal: &mut Journal) -> Result<Vec<u32>, HostError> {
    let on = crate::damon::running_under(&journal.machine().root);
    for p in &on {
        journal
            .apply(Change::Kdamond { state: p.clone() })
            .map_err(|e| HostError::KnobWrite {
                name: "[host] damon".into(),
                value: "off".into(),
                why: e.to_string(),
            })?;
    }
    Ok(on
        .iter()
        .filter_map(|p| p.parent()?.file_name()?.to_str()?.parse().ok())
        .collect())
}

/// The run's files (`read` and `write` steps) and file sets (`files` steps), by the spec's
/// name for them, under the directory `base_of` gives each name (the run's directory, or with
/// `[host] loop_images` the mount point of the image of the name's filesystem); the files
/// `read` steps read, and the sets a `files` step reads first, are created now
/// ([`make_read_file`]).
fn create_files(
    plan: &Plan,
    base_of: &dyn Fn(&str) -> Result<PathBuf, HostError>,
    opts: &HostOptions,
    signals: &signals::SignalFlag,
) -> Result<BTreeMap<String, PathBuf>, HostError> {
    let mut files = BTreeMap::new();
    for (i, name) in plan.read_files.keys().chain(plan.write_files.keys()).enumerate() {
        if !files.contains_key(name) {
            files.insert(name.clone(), base_of(name)?.join(format!("file{i}")));
        }
    }
    for (name, size) in &plan.read_files {
        make_read_file(&files[name], *size, opts.prefill_read_files)?;
        if let Some(sig) = signals.caught() {
            return Err(HostError::Interrupted(sig));
        }
    }
    // File sets of `files` steps: a directory each, its files made now when the first step
    // naming the set reads it.
    for (i, (name, fs)) in plan.file_sets.iter().enumerate() {
        let d = base_of(name)?.join(format!("set{i}"));
        std::fs::create_dir(&d).map_err(|e| HostError::io(d.display().to_string(), e))?;
        if fs.prefill {
            for j in 0..fs.count {
                make_read_file(&d.join(j.to_string()), fs.size, opts.prefill_read_files)?;
                if let Some(sig) = signals.caught() {
                    return Err(HostError::Interrupted(sig));
                }
            }
        }
        files.insert(name.clone(), d);
    }
    Ok(files)
}

/// `[host] loop_images`: the mount point of the image of `name`'s filesystem.
fn image_base(plan: &Plan, images: &crate::loops::LoopImages, name: &str) -> Result<PathBuf, HostError> {
    let fs = plan.file_fs.get(name).copied().unwrap_or(crate::loops::Fs::Xfs);
    images
        .mount_of(fs)
        .map(Path::to_path_buf)
        .ok_or_else(|| HostError::LoopImage(format!("no {} image for file {name}", fs.name())))
}

/// The block device holding `path` (its name under /sys/block: the whole disk for a
/// partition), or `None` when `path` is not on a block device (tmpfs, overlay).
pub fn block_device_of(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major == 0 {
        return None;
    }
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let disk = if sys.join("partition").exists() {
        sys.parent()?.to_path_buf()
    } else {
        sys
    };
    let name = disk.file_name()?.to_str()?.to_string();
    knobs::read_ahead_kb_path(&name).exists().then_some(name)
}

/// With tracing on, a private trace instance recording the spec's events (the instance and a
/// tracefs mount are changes of the journal).
fn start_tracing(
    spec: &Spec,
    opts: &HostOptions,
    journal: &mut Journal,
) -> Result<Option<trace::TraceSession>, HostError> {
    if !opts.trace && opts.trace_to.is_none() {
        return Ok(None);
    }
    let events = trace_events(spec);
    Ok(Some(match &opts.trace_to {
        None => trace::TraceSession::start(journal, &events, opts.trace_keep_bytes)?,
        // The events `fraglab trace diff` compares, on top of the spec's (those this kernel
        // lacks left out).
        Some(path) => trace::TraceSession::start_to(journal, &events, opts.trace_keep_bytes, path)?,
    }))
}

/// Ends the trace session: its counts (returned, and as `proc_end["trace_counts"]`) and text
/// (`proc_end["trace"]`); with `trace_to`, `trace_counts["lost_events"]` and
/// `proc_end["trace_to"]` (what was written to the file).
fn finish_tracing(
    tracing: Option<trace::TraceSession>,
    proc_end: &mut BTreeMap<String, String>,
    trace_to: Option<&std::path::Path>,
) -> BTreeMap<String, u64> {
    let mut trace_counts = BTreeMap::new();
    if let Some(t) = tracing {
        let o = t.finish_full();
        let (mut counts, text) = (o.counts, o.text);
        if let Some(path) = trace_to {
            counts.insert("lost_events".into(), o.lost_events);
            proc_end.insert(
                "trace_to".into(),
                format!(
                    "file {}\nlines_written {}\nlost_events {}\n{}",
                    path.display(),
                    o.lines_written,
                    o.lost_events,
                    o.write_error
                        .map_or(String::new(), |e| format!("write_error {e}\n"))
                ) + &o
                    .missing_events
                    .iter()
                    .map(|e| format!("not_on_this_kernel {e}\n"))
                    .collect::<String>(),
            );
        }
        trace_counts = counts.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        proc_end.insert(
            "trace_counts".into(),
            counts.iter().map(|(k, v)| format!("{k} {v}\n")).collect(),
        );
        proc_end.insert("trace".into(), text);
    }
    trace_counts
}

/// `proc_start` of the run ([`start_proc`]), with the `--fit-memory` pool in its `host` facts.
fn run_proc_start(
    pool_fit: Option<&hugetlb::Fit>,
    pool: Option<&hugetlb::Pool>,
    run_knobs: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, HostError> {
    let mut proc_start = start_proc(run_knobs)?;
    if let (Some(fit), Some(p)) = (pool_fit, pool) {
        let host = proc_start.entry("host".into()).or_default();
        host.push_str(&format!(
            "fit_memory_target_bytes {}\nfit_memory_hugetlb_pages {}\nfit_memory_hugetlb_pages_asked {}\nfit_memory_outside_bytes {}\n",
            fit.target,
            p.pages,
            fit.pages,
            p.outside(fit)
        ));
    }
    Ok(proc_start)
}

/// One job per task instance, thp_burst generator and thpchallenge thread, then the fio jobs
/// (each ring in a directory of its own); returns the jobs and which of them are background
/// load: the instances of `background = true` tasks, and fio beside any other job (as in the
/// simulator). The run ends when the others are done and then stops the background jobs.
fn build_jobs(
    spec: &Spec,
    w: &WorkloadSpec,
    dir: &Path,
    files: &BTreeMap<String, PathBuf>,
    slab_dir: &Path,
    hooks: worker::MeasureHooks,
) -> Result<(Vec<worker::Job>, Vec<bool>), HostError> {
    let mut jobs = Vec::new();
    for t in &w.task {
        for instance in 0..t.count {
            jobs.push(worker::Job::Task {
                params: t.clone(),
                instance,
                files: files.clone(),
                slab_dir: slab_dir.to_path_buf(),
                hooks: hooks.clone(),
            });
        }
    }
    jobs.extend(w.thp_burst.iter().cloned().map(worker::Job::ThpBurst));
    for c in &w.thpchallenge {
        jobs.extend((0..c.threads).map(|_| worker::Job::ThpChallenge(c.clone())));
    }
    let others = jobs.len() - w.task.iter().map(|t| t.count as usize).sum::<usize>();
    for (i, (f, (jobs_n, _, per_job))) in w.fio_smallfiles.iter().zip(fio_rings(spec)).enumerate() {
        let fio_dir = dir.join(format!("fio{i}"));
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
    let fio = jobs.len() - others - w.task.iter().map(|t| t.count as usize).sum::<usize>();
    let background = job_background(&w.task, others, fio);
    debug_assert_eq!(background.len(), jobs.len());
    Ok((jobs, background))
}

/// Which of [`build_jobs`]' jobs are background load: the instances of `background = true`
/// tasks (first, in task order), none of the `others` (thp_burst, thpchallenge threads), and
/// the `fio` jobs last when any job before them is not background (fio beside another
/// generator, as the simulator runs it).
fn job_background(tasks: &[fraglab_spec::TaskParams], others: usize, fio: usize) -> Vec<bool> {
    let mut v: Vec<bool> = tasks
        .iter()
        .flat_map(|t| std::iter::repeat_n(t.background, t.count as usize))
        .collect();
    v.resize(v.len() + others, false);
    let fio_background = v.iter().any(|b| !b);
    v.resize(v.len() + fio, fio_background);
    v
}

/// Workers the run ended by force without failing it.
#[derive(Default)]
struct Ended {
    /// Still running 5 s after the deadline.
    killed_at_deadline: Vec<libc::pid_t>,
    /// Background jobs (fio beside other jobs, `background = true` tasks) stopped when the
    /// others were done.
    stopped_background: Vec<libc::pid_t>,
}

/// Watches the running workers: samples /proc every `sample_interval`, stops everything on a
/// signal or under the MemAvailable floor, and ends the run when the workers are done.
struct Supervisor<'a> {
    opts: &'a HostOptions,
    signals: &'a signals::SignalFlag,
    t0: Instant,
    duration: Duration,
    /// Per worker: background load, stopped when every other worker is done
    /// ([`build_jobs`]).
    background: &'a [bool],
    /// Phases: the jobs, those that wait for others (`after`) and the run's clock, to start
    /// them when the jobs they wait for are done.
    jobs: &'a [worker::Job],
    gates: &'a [Option<Gate>],
    clock: worker::Clock,
}

impl Supervisor<'_> {
    /// Phases: starts the gated jobs whose jobs to wait for are done, their `start` counted
    /// from now (before the deadline only).
    fn start_ready(
        &self,
        workers: &mut [Option<worker::Worker>],
        journal: &mut Journal,
    ) -> Result<(), HostError> {
        let started: Vec<bool> = workers.iter().map(Option::is_some).collect();
        let done: Vec<bool> = workers
            .iter_mut()
            .map(|w| w.as_mut().is_some_and(|w| w.poll()))
            .collect();
        let el = self.t0.elapsed();
        if el >= self.duration {
            return Ok(());
        }
        for i in ready_jobs(self.gates, &started, &done) {
            let mut job = self.jobs[i].clone();
            if let worker::Job::Task { params, .. } = &mut job {
                params.start_ns += el.as_nanos() as u64;
            }
            workers[i] = Some(spawn_recorded(journal, &job, self.clock)?);
        }
        Ok(())
    }

    fn run(
        &self,
        workers: &mut [Option<worker::Worker>],
        journal: &mut Journal,
        samples: &mut Vec<Sample>,
    ) -> Result<Ended, HostError> {
        // Background load (fio beside another generator, `background = true` tasks; as in the
        // simulator): the run ends with the others, and the background jobs are then stopped.
        let any_background = self.background.iter().any(|b| *b);
        let mut next_sample = self.opts.sample_interval;
        let mut ended = Ended::default();
        let grace = Duration::from_secs(5);
        // Phases: with jobs waiting for others, a shorter poll, so that they start within
        // 5 ms of the last job they wait for.
        let tick = if self.gates.iter().any(Option::is_some) {
            Duration::from_millis(5)
        } else {
            Duration::from_millis(50)
        };
        loop {
            std::thread::sleep(tick);
            if let Some(sig) = self.signals.caught() {
                stop(workers);
                return Err(HostError::Interrupted(sig));
            }
            let avail = procfs::mem_available()?;
            if avail < self.opts.mem_floor_bytes {
                stop(workers);
                return Err(HostError::MemoryFloor {
                    available: avail,
                    floor: self.opts.mem_floor_bytes,
                });
            }
            self.start_ready(workers, journal)?;
            let mut running = 0;
            for (i, wk) in workers.iter_mut().enumerate() {
                let live = match wk {
                    Some(wk) => !wk.poll(),
                    // A job waiting for others counts as running until the deadline.
                    None => self.t0.elapsed() < self.duration,
                };
                if live && !self.background[i] {
                    running += 1;
                }
            }
            if running == 0 && any_background {
                let bg = workers.iter_mut().zip(self.background).filter(|(_, b)| **b);
                for wk in bg.filter_map(|(w, _)| w.as_mut()) {
                    if !wk.poll() {
                        wk.kill();
                        ended.stopped_background.push(wk.pid);
                    }
                }
            }
            let el = self.t0.elapsed();
            if el >= next_sample {
                samples.push(procfs::sample(el.as_nanos() as u64)?);
                next_sample += self.opts.sample_interval;
            }
            if running == 0 {
                break;
            }
            if el > self.duration + grace {
                // Workers stop themselves at the deadline; one still running 5 s later is stuck
                // in a long step (a big write, compact_memory) and is killed without failing the
                // run.
                for wk in workers.iter_mut().flatten() {
                    if !wk.poll() {
                        wk.kill();
                        ended.killed_at_deadline.push(wk.pid);
                    }
                }
                break;
            }
        }
        Ok(ended)
    }
}

/// Kills every worker (the journal then undoes the rest as the error goes up).
fn stop(workers: &mut [Option<worker::Worker>]) {
    for wk in workers.iter_mut().flatten() {
        wk.kill();
    }
}

/// What the workers measured, merged.
#[derive(Default)]
struct Reports {
    faults: BTreeMap<u32, Histogram>,
    bursts: Vec<BurstResult>,
    /// thpchallenge faults that got a huge page, and the others.
    huge: Histogram,
    base: Histogram,
    census: Vec<fraglab_spec::result::CensusResult>,
    reads: Vec<fraglab_spec::result::TaskReadResult>,
    /// Issue 33: the workers' `sample` steps.
    named_samples: Vec<fraglab_spec::result::NamedSample>,
}

/// Merges the workers' reports (bursts by start time). Workers the run ended by force may
/// have none; they are counted in `proc_end["host"]`. Any other failed worker fails the run.
/// With phases (`measuring`), the histograms of workers that ended before the measured part
/// started are left out.
fn collect_reports(
    workers: &[worker::Worker],
    ended: &Ended,
    measuring: bool,
    proc_end: &mut BTreeMap<String, String>,
) -> Result<Reports, HostError> {
    let mut reports = Reports::default();
    let mut errors = Vec::new();
    for wk in workers {
        match wk.report() {
            Ok(mut r) => {
                if measuring && !r.measured {
                    r.faults.clear();
                    r.thpc_huge = Histogram::default();
                    r.thpc_base = Histogram::default();
                }
                for (o, h) in &r.faults {
                    reports.faults.entry(*o).or_default().merge(h);
                }
                reports.bursts.extend(r.bursts);
                reports.huge.merge(&r.thpc_huge);
                reports.base.merge(&r.thpc_base);
                reports.census.extend(r.census);
                reports.reads.extend(r.reads);
                reports.named_samples.extend(r.named_samples);
            }
            Err(_)
                if ended.killed_at_deadline.contains(&wk.pid)
                    || ended.stopped_background.contains(&wk.pid) => {}
            Err(e) => errors.push(e),
        }
    }
    if !ended.killed_at_deadline.is_empty() {
        let host = proc_end.entry("host".into()).or_default();
        host.push_str(&format!(
            "workers_killed_at_deadline {}\n",
            ended.killed_at_deadline.len()
        ));
    }
    if !ended.stopped_background.is_empty() {
        let host = proc_end.entry("host".into()).or_default();
        host.push_str(&format!(
            "background_jobs_stopped {}\n",
            ended.stopped_background.len()
        ));
    }
    if !errors.is_empty() {
        return Err(HostError::Worker(errors.join("; ")));
    }
    reports.bursts.sort_by_key(|b| b.start_ns);
    reports.census.sort_by_key(|c| c.at_ns);
    // In the order they were taken (the simulator's order), as the rows take the last of a name.
    reports.named_samples.sort_by_key(|s| s.sample.t_ns);
    reports
        .reads
        .sort_by(|a, b| (&a.task, a.instance).cmp(&(&b.task, b.instance)));
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(name: &str, count: u32, after: Option<&str>, start_ns: u64) -> fraglab_spec::TaskParams {
        fraglab_spec::TaskParams {
            numa: Default::default(),
            line: 1,
            name: name.into(),
            count,
            start_ns,
            loops: 1,
            steps: vec![fraglab_spec::TaskStep::Measure],
            after: after.map(str::to_string),
            background: false,
        }
    }

    /// `background = true` tasks and fio beside other jobs are background load; fio alone is
    /// not, nor is anything when every task is background (the spec refuses that).
    #[test]
    fn background_jobs_are_the_background_tasks_and_fio_beside_others() {
        let mut readers = task("reader", 2, None, 0);
        readers.background = true;
        let thp = task("thp", 1, None, 0);
        assert_eq!(
            job_background(&[readers.clone(), thp.clone()], 0, 0),
            [true, true, false]
        );
        assert_eq!(
            job_background(std::slice::from_ref(&thp), 1, 2),
            [false, false, true, true],
            "fio beside a task and a generator"
        );
        assert_eq!(job_background(&[], 0, 2), [false, false], "fio alone");
        assert_eq!(
            job_background(&[readers], 0, 1),
            [true, true, false],
            "fio beside background tasks only is not background"
        );
    }

    /// Phases: `after` gates every instance of a task on every instance of the tasks of that
    /// name; a chain starts one link at a time, each as the one before is done.
    #[test]
    fn phases_after_starts_jobs_in_order() {
        // Jobs: age[0], age[1], run (after age), tail (after run), then one other job (fio).
        let tasks = [
            task("run", 1, Some("age"), 7),
            task("age", 2, None, 0),
            task("tail", 1, Some("run"), 0),
        ];
        let gates = task_gates(&tasks, 5);
        assert_eq!(
            gates,
            vec![
                Some(Gate {
                    after: vec![1, 2],
                    start_ns: 7
                }),
                None,
                None,
                Some(Gate {
                    after: vec![0],
                    start_ns: 0
                }),
                None,
            ]
        );
        let started = [false, true, true, false, true];
        // Nothing is ready while an instance of age runs.
        assert!(ready_jobs(&gates, &started, &[false, true, false, false, false]).is_empty());
        // Both instances done: run starts, tail still waits.
        assert_eq!(
            ready_jobs(&gates, &started, &[false, true, true, false, false]),
            vec![0]
        );
        // run started and done: tail starts.
        let started = [true, true, true, false, true];
        assert_eq!(
            ready_jobs(&gates, &started, &[true, true, true, false, false]),
            vec![3]
        );
        // A started job is never started again.
        assert!(ready_jobs(&gates, &[true; 5], &[true; 5]).is_empty());
    }

    /// Phases: a worker's measure message comes before its report on the pipe.
    #[test]
    fn phases_measure_message_before_the_report() {
        let (lines, report) =
            worker::split_messages_for_test(b"{\"measure_ns\":5,\"vmstat\":{\"pgfault\":3}}\n{\"x\":1}");
        assert_eq!(lines.len(), 1);
        assert_eq!(report, b"{\"x\":1}");
        let m: worker::MeasureMsg = serde_json::from_slice(lines[0]).unwrap();
        assert_eq!(m.measure_ns, 5);
        assert_eq!(m.vmstat["pgfault"], 3);
        assert_eq!(worker::split_messages_for_test(b"{}").1, b"{}");
    }
}
