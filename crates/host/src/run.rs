//! A host run ([`host_run`]): the run's directory and files, the knobs under a [`KnobGuard`],
//! the workers and their supervision, and the result.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fraglab_spec::result::{
    BurstResult, Histogram, HostConfounders, RunResult, Sample, ThpChallengeResult, RESULT_SCHEMA,
};
use fraglab_spec::{Spec, WorkloadSpec, TRACE_EVENTS};

use crate::preflight::{fio_rings, preflight, Plan};
use crate::{
    confounders, default_state_file, hugetlb, knobs, procfs, read_all_knobs, signals, start_proc, trace,
    worker, HostError, HostOptions, KnobGuard,
};

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

/// Runs `spec`'s workload on this machine and returns its result (`engine = "host"`).
///
/// The knobs are restored before this returns, whatever happens: on success, on error (the
/// workload processes are SIGKILLed by pid first), on a panic (drop during unwinding), and on
/// SIGINT/SIGTERM (then the error is [`HostError::Interrupted`]). A run killed with SIGKILL
/// leaves its state file for [`restore_from_state_file`](crate::restore_from_state_file); its
/// workers die with it (PR_SET_PDEATHSIG).
pub fn host_run(spec: &Spec, opts: &HostOptions) -> Result<RunResult, HostError> {
    let plan = preflight(spec, opts)?;
    let w = spec.workload.as_ref().expect("preflight checked");
    let _lock = knobs::RunLock::acquire()?;
    let signals = signals::SignalFlag::install();
    let dir = WorkDir::create(&plan.workdir_parent)?;
    let slab_dir = dir.0.join("slab");
    std::fs::create_dir(&slab_dir).map_err(|e| HostError::io(slab_dir.display().to_string(), e))?;
    let files = create_files(&plan, &dir, opts, &signals)?;
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
    let damon_turned_off = if spec.host.damon_off {
        damon_off(&mut guard)?
    } else {
        Vec::new()
    };
    // --fit-memory: the pool is recorded in the state file before it is filled, and given
    // back (Pool's drop) on every way out of this function.
    let mut pool = match &plan.fit {
        Some(fit) => {
            guard.update_cleanup(|c| c.hugetlb_pages = Some(fit.before))?;
            Some(hugetlb::Pool::reserve(fit)?)
        }
        None => None,
    };
    // §28.1's nr_hugepages step: the pool's size before the run (preflight checked it is 0)
    // goes in the state file before any worker can resize it (`fraglab host restore` writes it
    // back after a SIGKILL), and is written back on every way out of this function.
    let mut step_pool = match plan.hugetlb_step_pages {
        Some(_) => {
            let before = hugetlb::current_pages()?;
            guard.update_cleanup(|c| c.hugetlb_pages = Some(before))?;
            Some(hugetlb::Pool::hold(before))
        }
        None => None,
    };
    // `[machine] read_ahead_kb` (§23.1): the run directory's device, recorded in the state
    // file and restored with the knobs.
    if let Some(kb) = plan.read_ahead_kb {
        let dev = block_device_of(&dir.0).ok_or_else(|| {
            HostError::Unsafe(format!(
                "machine.read_ahead_kb: {} is not on a block device",
                dir.0.display()
            ))
        })?;
        guard.set_read_ahead_kb(&dev, kb)?;
    }
    let run_knobs = read_all_knobs();
    let mut tracing = start_tracing(spec, opts, &mut guard)?;
    let proc_start = run_proc_start(&plan, pool.as_ref(), &run_knobs)?;
    let confounders_start = confounders::read();
    let vm_start = procfs::parse_vmstat(&procfs::read("/proc/vmstat")?);
    let t0 = Instant::now();
    let clock = worker::Clock {
        t0,
        deadline: t0 + plan.duration,
        seed: spec.run.seed,
    };
    let mut samples: Vec<Sample> = vec![procfs::sample(0)?];
    let (jobs, foreground) = build_jobs(spec, w, &dir, &files, &slab_dir)?;
    let mut workers = Vec::new();
    for j in &jobs {
        workers.push(worker::spawn(j, clock)?);
    }
    let supervisor = Supervisor {
        opts,
        signals: &signals,
        t0,
        duration: plan.duration,
        foreground,
    };
    let ended = supervisor.run(&mut workers, &mut guard, &mut samples)?;
    let end_ns = t0.elapsed().as_nanos() as u64;
    if samples.last().is_some_and(|s| s.t_ns < end_ns) {
        samples.push(procfs::sample(end_ns)?);
    }
    let vm_end = procfs::parse_vmstat(&procfs::read("/proc/vmstat")?);
    let confounders_end = confounders::read();
    let mut proc_end = start_proc(&run_knobs)?;
    let trace_counts = finish_tracing(tracing.take(), &mut proc_end);
    if let Some(p) = step_pool.as_mut() {
        // The pool the tasks' nr_hugepages steps left, as the simulator records the pool its
        // last step read back.
        proc_end.insert("nr_hugepages".into(), format!("{}\n", hugetlb::current_pages()?));
        p.release()?;
    }
    guard.restore()?;
    if let Some(p) = pool.as_mut() {
        p.release()?;
    }
    let reports = collect_reports(&workers, &ended, &mut proc_end)?;
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
        fault_latency: reports
            .faults
            .iter()
            .map(|(o, h)| h.to_latency(*o, "host"))
            .collect(),
        builds: Vec::new(),
        bursts: reports.bursts,
        thpchallenge: (!w.thpchallenge.is_empty())
            .then(|| ThpChallengeResult::from_histograms(&reports.huge, &reports.base)),
        pgbench: None,
        vm_scalability: Vec::new(),
        trace_counts,
        sim_work: BTreeMap::new(),
        pageblock_maps: Vec::new(),
        proc_start,
        proc_end,
        wall_ns: end_ns,
        confounders: Some(HostConfounders {
            damon_turned_off,
            ..HostConfounders::from_readings(confounders_start, confounders_end)
        }),
    })
}

/// `[host] damon = "off"`: records the kdamonds that are on in the state file, then turns them
/// off (the guard turns them back on with the knobs). Returns their indices.
fn damon_off(guard: &mut KnobGuard) -> Result<Vec<u32>, HostError> {
    let on = crate::damon::running();
    guard.update_cleanup(|c| c.damon_on = on.clone())?;
    for p in &on {
        crate::damon::set_state(p, "off").map_err(|why| HostError::KnobWrite {
            name: "[host] damon".into(),
            value: "off".into(),
            why,
        })?;
    }
    Ok(on
        .iter()
        .filter_map(|p| p.parent()?.file_name()?.to_str()?.parse().ok())
        .collect())
}

/// The run's files (`read` and `write` steps) under its directory, by the spec's name for
/// them; the files `read` steps read are created now ([`make_read_file`]).
fn create_files(
    plan: &Plan,
    dir: &WorkDir,
    opts: &HostOptions,
    signals: &signals::SignalFlag,
) -> Result<BTreeMap<String, PathBuf>, HostError> {
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
    // File sets of `files` steps: a directory each, its files made now when the first step
    // naming the set reads it.
    for (i, (name, fs)) in plan.file_sets.iter().enumerate() {
        let d = dir.0.join(format!("set{i}"));
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

/// With tracing on, a private trace instance recording the spec's events, recorded in the
/// state file's cleanup.
fn start_tracing(
    spec: &Spec,
    opts: &HostOptions,
    guard: &mut KnobGuard,
) -> Result<Option<trace::TraceSession>, HostError> {
    if !opts.trace {
        return Ok(None);
    }
    let t = trace::TraceSession::start(&trace_events(spec), opts.trace_keep_bytes)?;
    let (inst, mount) = t.leftovers();
    guard.update_cleanup(|c| {
        c.trace_instance = Some(inst);
        c.trace_mount = mount;
    })?;
    Ok(Some(t))
}

/// Ends the trace session: its counts (returned, and as `proc_end["trace_counts"]`) and text
/// (`proc_end["trace"]`).
fn finish_tracing(
    tracing: Option<trace::TraceSession>,
    proc_end: &mut BTreeMap<String, String>,
) -> BTreeMap<String, u64> {
    let mut trace_counts = BTreeMap::new();
    if let Some(t) = tracing {
        let (counts, text) = t.finish();
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
    plan: &Plan,
    pool: Option<&hugetlb::Pool>,
    run_knobs: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, HostError> {
    let mut proc_start = start_proc(run_knobs)?;
    if let (Some(fit), Some(p)) = (&plan.fit, pool) {
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
/// (each ring in a directory of its own); returns the jobs and how many come before fio.
fn build_jobs(
    spec: &Spec,
    w: &WorkloadSpec,
    dir: &WorkDir,
    files: &BTreeMap<String, PathBuf>,
    slab_dir: &Path,
) -> Result<(Vec<worker::Job>, usize), HostError> {
    let mut jobs = Vec::new();
    for t in &w.task {
        for instance in 0..t.count {
            jobs.push(worker::Job::Task {
                params: t.clone(),
                instance,
                files: files.clone(),
                slab_dir: slab_dir.to_path_buf(),
            });
        }
    }
    jobs.extend(w.thp_burst.iter().cloned().map(worker::Job::ThpBurst));
    for c in &w.thpchallenge {
        jobs.extend((0..c.threads).map(|_| worker::Job::ThpChallenge(c.clone())));
    }
    let foreground = jobs.len();
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
    Ok((jobs, foreground))
}

/// Workers the run ended by force without failing it.
#[derive(Default)]
struct Ended {
    /// Still running 5 s after the deadline.
    killed_at_deadline: Vec<libc::pid_t>,
    /// fio jobs stopped when the foreground generators were done.
    stopped_background: Vec<libc::pid_t>,
}

/// Watches the running workers: samples /proc every `sample_interval`, stops everything on a
/// signal or under the MemAvailable floor, and ends the run when the workers are done.
struct Supervisor<'a> {
    opts: &'a HostOptions,
    signals: &'a signals::SignalFlag,
    t0: Instant,
    duration: Duration,
    /// The workers before this index are the foreground; the fio workers after it are
    /// background load when there is a foreground.
    foreground: usize,
}

impl Supervisor<'_> {
    fn run(
        &self,
        workers: &mut [worker::Worker],
        guard: &mut KnobGuard,
        samples: &mut Vec<Sample>,
    ) -> Result<Ended, HostError> {
        // fio beside another generator is background load (as in the simulator): the run ends
        // with the others, and the fio jobs are then stopped.
        let foreground = self.foreground;
        let fio_background = foreground > 0;
        let mut next_sample = self.opts.sample_interval;
        let mut ended = Ended::default();
        let grace = Duration::from_secs(5);
        loop {
            std::thread::sleep(Duration::from_millis(50));
            if let Some(sig) = self.signals.caught() {
                stop(workers, guard)?;
                return Err(HostError::Interrupted(sig));
            }
            let avail = procfs::mem_available()?;
            if avail < self.opts.mem_floor_bytes {
                stop(workers, guard)?;
                return Err(HostError::MemoryFloor {
                    available: avail,
                    floor: self.opts.mem_floor_bytes,
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
                for wk in workers.iter_mut() {
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

/// Kills every worker and restores the knobs.
fn stop(workers: &mut [worker::Worker], guard: &mut KnobGuard) -> Result<(), HostError> {
    for wk in workers.iter_mut() {
        wk.kill();
    }
    guard.restore()
}

/// What the workers measured, merged.
#[derive(Default)]
struct Reports {
    faults: BTreeMap<u32, Histogram>,
    bursts: Vec<BurstResult>,
    /// thpchallenge faults that got a huge page, and the others.
    huge: Histogram,
    base: Histogram,
}

/// Merges the workers' reports (bursts by start time). Workers the run ended by force may
/// have none; they are counted in `proc_end["host"]`. Any other failed worker fails the run.
fn collect_reports(
    workers: &[worker::Worker],
    ended: &Ended,
    proc_end: &mut BTreeMap<String, String>,
) -> Result<Reports, HostError> {
    let mut reports = Reports::default();
    let mut errors = Vec::new();
    for wk in workers {
        match wk.report() {
            Ok(r) => {
                for (o, h) in &r.faults {
                    reports.faults.entry(*o).or_default().merge(h);
                }
                reports.bursts.extend(r.bursts);
                reports.huge.merge(&r.thpc_huge);
                reports.base.merge(&r.thpc_base);
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
    Ok(reports)
}
