//! The timed run: a spec's `[workload]` on the discrete-event engine, producing a
//! [`RunResult`] (the JSON schema of `fraglab_spec::result`, whose mmtests-style rows of
//! `shared/reference/published-results.md` §5.1 are `fraglab_spec::result::rows`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use fraglab_mm::types::PAGEBLOCK_ORDER;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::Mm;
use fraglab_spec::result::{
    BuildResult, BurstResult, RunResult, ThpChallengeResult, VmScalabilityResult, RESULT_SCHEMA,
};
use fraglab_spec::Spec;

use crate::boot::boot;
use crate::cost::CostModel;
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::snapshot::{histogram, pageblock_snapshot, proc_snapshot, sample, vmstat_values};
use crate::timeless::RunError;
use crate::vmscal::{VmScalSpec, VmScalTask};
use crate::workload::{
    Flusher, KbuildShared, KbuildSpec, KbuildWorker, PageCacheFlusher, PgbenchCheckpointer, PgbenchClient,
    PgbenchShared, PgbenchSpec, ProgramTask, ThpBurst, ThpBurstSpec, ThpChallenge, ThpChallengeSpec,
};

fn pgbench_result(sh: &PgbenchShared) -> fraglab_spec::result::PgbenchResult {
    let secs = (sh.spec.duration_ns / 1_000_000_000) as usize;
    let mut tps = sh.tps.clone();
    tps.resize(secs, 0);
    let mean = |f: &dyn Fn(usize) -> bool| {
        let v: Vec<f64> = (0..secs).filter(|&s| f(s)).map(|s| tps[s] as f64).collect();
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let ck = |s: usize| sh.checkpoint_secs.contains(&(s as u64));
    fraglab_spec::result::PgbenchResult {
        mean_tps: mean(&|_| true),
        checkpoint_tps: mean(&|s| ck(s)),
        steady_tps: mean(&|s| !ck(s)),
        checkpoint_secs: sh
            .checkpoint_secs
            .iter()
            .copied()
            .filter(|&s| (s as usize) < secs)
            .collect(),
        tps,
    }
}

/// The cost model of a spec: defaults with its `[cost]` overrides.
pub fn cost_model(spec: &Spec) -> CostModel {
    let mut c = CostModel::default();
    for (k, v) in &spec.cost {
        *c.get_mut(k).expect("[cost] keys are validated against COST_KEYS") = *v;
    }
    c
}

/// Runs the spec's workload to its end (or its duration). Deterministic: the result depends only
/// on the spec (and its seed); `wall_ns` is left 0 for the caller to fill in if it wants.
pub fn run_workload(spec: &Spec) -> Result<RunResult, RunError> {
    run_workload_with_progress(spec, &mut |_, _| {})
}

/// [`run_workload`], calling `progress(now_ns, end_ns)` as simulated time advances (at most
/// once per simulated 100 ms).
pub fn run_workload_with_progress(
    spec: &Spec,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<RunResult, RunError> {
    let w = spec
        .workload
        .as_ref()
        .ok_or_else(|| RunError(format!("{}: no [workload] to run", spec.file)))?;
    let mm = boot(spec)?;
    let mut e = Engine::new(mm, cost_model(spec), spec.run.seed);
    e.sched = spec.model.sched;
    let metrics = Rc::new(RefCell::new(Metrics::default()));
    let page = |b: u64| b.div_ceil(4096);
    // One writeback flusher daemon for the run, however many workloads dirty page cache
    // (the kernel has one writeback worker per device, not one per writer).
    let mut flusher = false;
    let mut spawn_flusher = |e: &mut Engine| {
        if !std::mem::replace(&mut flusher, true) {
            e.spawn_daemon(Box::new(PageCacheFlusher {
                until_ns: w.duration_ns,
            }));
        }
    };
    for k in &w.kbuild {
        let shared = KbuildShared::new(
            &mut e.mm,
            KbuildSpec {
                jobs_parallel: k.jobs_parallel,
                jobs: k.jobs,
                iterations: k.iterations,
                job_anon_pages: page(k.job_anon_bytes),
                job_cpu_ns: k.job_cpu_ns,
                source_pages: page(k.source_bytes),
                job_read_pages: page(k.job_read_bytes),
                job_slab_pages: page(k.job_slab_bytes),
                job_obj_pages: page(k.job_obj_bytes),
                source_file_pages: page(k.source_file_bytes),
                untar: k.untar,
                trees: k.trees,
            },
            metrics.clone(),
        );
        for _ in 0..k.jobs_parallel {
            e.spawn(Box::new(KbuildWorker::new(shared.clone())));
        }
        e.spawn(Box::new(Flusher { shared }));
        if k.untar {
            // The unpacked trees are dirty page cache of their own: the general flusher
            // writes them back (expired after 30 s, or above the background threshold).
            spawn_flusher(&mut e);
        }
    }
    // Beside a kbuild, the THP burst process is background load (seed 001's "concurrent
    // bursts"): the run ends with the builds, not with the last burst.
    let bursts_are_background = !w.kbuild.is_empty();
    for b in &w.thp_burst {
        let spawn = if bursts_are_background {
            Engine::spawn_daemon
        } else {
            Engine::spawn
        };
        spawn(
            &mut e,
            Box::new(ThpBurst::new(
                ThpBurstSpec {
                    interval_ns: b.interval_ns,
                    pages: page(b.size_bytes),
                    hold_ns: b.hold_ns,
                    bursts: b.bursts,
                    start_ns: b.start_ns,
                    madvised: b.madvised,
                },
                metrics.clone(),
            )),
        );
    }
    for c in &w.thpchallenge {
        for _ in 0..c.threads {
            e.spawn_at(
                c.start_ns,
                Box::new(ThpChallenge::new(
                    ThpChallengeSpec {
                        pages: page(c.size_bytes),
                        madvised: c.madvised,
                        hold_ns: c.hold_ns,
                    },
                    metrics.clone(),
                )),
            );
        }
    }
    let mut pgbench = Vec::new();
    for p in &w.pgbench {
        let spec = PgbenchSpec {
            clients: p.clients,
            client_private_pages: page(p.client_private_bytes),
            data_pages: page(p.data_bytes),
            wal_pages: page(p.wal_bytes),
            tx_cpu_ns: p.tx_cpu_ns,
            tx_data_bytes: p.tx_data_bytes,
            tx_wal_bytes: p.tx_wal_bytes,
            fpw_wal_bytes: p.fpw_wal_bytes,
            checkpoint_ns: p.checkpoint_ns,
            checkpoint_bytes: p.checkpoint_bytes,
            checkpoint_write_bytes: p.checkpoint_write_bytes,
            checkpoint_spread_ns: p.checkpoint_spread_ns,
            duration_ns: p.duration_ns,
        };
        let shared = PgbenchShared::new(&mut e.mm, spec, metrics.clone());
        for _ in 0..p.clients {
            e.spawn(Box::new(PgbenchClient::new(shared.clone())));
        }
        e.spawn(Box::new(PgbenchCheckpointer::new(shared.clone())));
        e.spawn(Box::new(PageCacheFlusher {
            until_ns: p.duration_ns,
        }));
        pgbench.push(shared);
    }
    let mut vmscal = Vec::new();
    let mem_pages: u64 = e.mm.zones.iter().map(|z| z.managed).sum();
    for v in &w.vm_scalability {
        use fraglab_spec::VmScalabilityCase as C;
        let tasks = v.tasks.unwrap_or(spec.machine.cpus).max(1);
        let cpus = spec.machine.cpus.max(1) as u64;
        // ROTATE_BYTES: 1.5 × memory, so that every pass reclaims page cache (§2).
        let total = v.size_bytes.map(page).unwrap_or(mem_pages * 3 / 2);
        let (task_pages, file_pages) = match v.case {
            C::SmallAllocs => (total / tasks as u64, 0),
            C::MmapPreadSeq => (total / tasks as u64, total),
            C::LruFileReadtwice | C::LruFileMmapRead => (total / tasks as u64, total / tasks as u64),
            C::Msync => (v.size_bytes.map(page).unwrap_or(mem_pages / cpus / 2), mem_pages),
        };
        let vs = VmScalSpec {
            case: v.case,
            tasks,
            task_pages: task_pages.max(1),
            file_pages,
            unit_pages: page(v.unit_bytes).max(1),
            start_ns: v.start_ns,
            runtime_ns: v.runtime_ns,
        };
        let kind = match v.mapping {
            fraglab_spec::MappingKind::Xfs => fraglab_mm::filemap::Mapping::xfs_like(),
            fraglab_spec::MappingKind::LargeFolios => fraglab_mm::filemap::Mapping::large_folios(),
            fraglab_spec::MappingKind::NoLargeFolios => fraglab_mm::filemap::Mapping::no_large_folios(),
        };
        let shared = crate::vmscal::new_shared(&mut e.mm, vs.clone(), kind);
        for i in 0..crate::vmscal::processes(&vs) {
            e.spawn_at(v.start_ns, Box::new(VmScalTask::new(shared.clone(), i)));
        }
        vmscal.push(shared);
    }
    for f in &w.fio_smallfiles {
        // 1.5 × the memory the page allocator manages outside the hugetlb pool.
        let usable = mem_pages.saturating_sub(spec.machine.hugetlb_pages << PAGEBLOCK_ORDER);
        let ws = f.working_set_bytes.map(page).unwrap_or(usable * 3 / 2);
        let until = f.runtime_ns.map_or(w.duration_ns, |r| f.start_ns + r);
        let shared = crate::workload::FioShared::new(&mut e.mm, f.jobs, page(f.file_size_bytes), ws, until);
        shared.borrow_mut().start_ns = f.start_ns;
        // Beside another generator fio is background load (mmtests' thpchallenge-fio): the run
        // ends with the others.
        let background = !(w.kbuild.is_empty() && w.thpchallenge.is_empty() && w.task.is_empty());
        for j in 0..f.jobs {
            let body = Box::new(crate::workload::FioSmallFiles::new(shared.clone(), j));
            if background {
                e.spawn_daemon(body);
            } else {
                e.spawn(body);
            }
        }
    }
    if w.vm_scalability
        .iter()
        .any(|v| v.case == fraglab_spec::VmScalabilityCase::Msync)
        || !w.fio_smallfiles.is_empty()
    {
        spawn_flusher(&mut e);
    }
    let files = Rc::new(RefCell::new(BTreeMap::new()));
    for t in &w.task {
        for s in &t.steps {
            if let fraglab_spec::TaskStep::Read { file, .. }
            | fraglab_spec::TaskStep::Write { file, .. }
            | fraglab_spec::TaskStep::Delete { file } = s
            {
                if !files.borrow().contains_key(file) {
                    let id = e.mm.add_mapping(fraglab_mm::filemap::Mapping::xfs_like());
                    files.borrow_mut().insert(file.clone(), id);
                }
            }
        }
    }
    let any_write = w.task.iter().any(|t| {
        t.steps
            .iter()
            .any(|s| matches!(s, fraglab_spec::TaskStep::Write { .. }))
    });
    for t in &w.task {
        for _ in 0..t.count {
            e.spawn_at(
                t.start_ns,
                Box::new(ProgramTask::new(t, files.clone(), metrics.clone())),
            );
        }
    }
    if any_write {
        spawn_flusher(&mut e);
    }
    let samples = Rc::new(RefCell::new(vec![sample(&e.mm, 0)]));
    let s2 = samples.clone();
    // About 120 pageblock maps over the run, at whole seconds.
    let map_every = (w.duration_ns / 120).div_ceil(1_000_000_000).max(1) * 1_000_000_000;
    let maps = Rc::new(RefCell::new(vec![pageblock_snapshot(&e.mm, 0)]));
    let m2 = maps.clone();
    // `[run] trace`: the events are counted per name over the run (as the host engine's
    // `--trace` counts them) and the first TRACE_KEEP_BYTES of their ftrace text kept; the
    // buffer is emptied every tick so that a long run does not hold them all.
    let traced = Rc::new(RefCell::new((BTreeMap::<String, u64>::new(), String::new())));
    let t2 = traced.clone();
    e.on_tick(Box::new(move |t, mm| {
        s2.borrow_mut().push(sample(mm, t));
        if t % map_every == 0 {
            m2.borrow_mut().push(pageblock_snapshot(mm, t));
        }
        drain_trace(mm, &mut t2.borrow_mut());
    }));
    let proc_start = proc_snapshot(&e.mm);
    let start = vmstat_values(&e.mm);
    let mut last = 0u64;
    let duration = w.duration_ns;
    let end_ns = e.run(duration, |e| {
        let now = e.now();
        if now >= last + 100_000_000 {
            last = now;
            progress(now, duration);
        }
        e.workload_done()
    });
    e.mm.check_invariants().map_err(|v| {
        RunError(format!(
            "{}: invariant violated at the end of the run: {v}",
            spec.file
        ))
    })?;
    drain_trace(&mut e.mm, &mut traced.borrow_mut());
    let (trace_counts, trace_text) = std::mem::take(&mut *traced.borrow_mut());
    let end = vmstat_values(&e.mm);
    let vmstat_delta = start
        .iter()
        .zip(&end)
        .map(|((n, a), (_, b))| (n.clone(), b - a))
        .collect();
    let m = metrics.borrow();
    let stat_delta = |d: &[i64]| -> BTreeMap<String, i64> {
        d.iter()
            .enumerate()
            .filter(|(i, _)| Stat::ALL[*i].name() != "")
            .map(|(i, v)| (Stat::ALL[i].name().to_string(), *v))
            .collect()
    };
    let samples = samples.borrow().clone();
    Ok(RunResult {
        schema: RESULT_SCHEMA,
        engine: "sim".into(),
        spec_name: spec.name.clone(),
        seed: spec.run.seed,
        duration_ns: end_ns,
        vmstat_delta,
        samples,
        fault_latency: m
            .fault_latency
            .iter()
            .map(|(&(order, path), h)| histogram(order, path.name(), h))
            .collect(),
        builds: m
            .builds
            .iter()
            .map(|b| BuildResult {
                start_ns: b.start_ns,
                end_ns: b.end_ns,
                user_ns: b.user_ns,
                system_ns: b.system_ns,
                jobs: b.jobs,
                vmstat_delta: stat_delta(&b.stats_delta),
            })
            .collect(),
        bursts: m
            .bursts
            .iter()
            .map(|b| BurstResult {
                start_ns: b.start_ns,
                alloc_ns: b.alloc_ns,
                faults: b.faults,
                huge: b.huge,
            })
            .collect(),
        thpchallenge: (!w.thpchallenge.is_empty()).then(|| {
            let (h, b) = (&m.thpchallenge_huge, &m.thpchallenge_base);
            ThpChallengeResult {
                huge: histogram(9, "huge", h),
                base: histogram(0, "base", b),
                huge_pct: if h.count + b.count > 0 {
                    h.count as f64 * 100.0 / (h.count + b.count) as f64
                } else {
                    0.0
                },
            }
        }),
        pgbench: pgbench.first().map(|sh| pgbench_result(&sh.borrow())),
        vm_scalability: vmscal
            .iter()
            .map(|sh| {
                let sh = sh.borrow();
                VmScalabilityResult {
                    case: sh.spec.case.name().to_string(),
                    processes: sh.results.len() as u32,
                    bytes: sh.results.iter().map(|r| r.bytes).sum(),
                    throughput: sh.throughput_kib_s(),
                }
            })
            .collect(),
        trace_counts: trace_counts.clone(),
        sim_work: {
            let w = &e.mm.work_sum;
            // The kernel threads' CPU time and the time they were runnable but waited for a
            // CPU (`[model] sched`).
            let (ks, kc) = (e.task_stats(e.kswapd), e.task_stats(e.kcompactd));
            [
                ("alloc_slowpaths", w.slowpaths),
                ("direct_reclaim_calls", w.reclaim_calls),
                ("drain_all_pages", w.drains),
                ("pcp_pages_drained", w.drained_pages),
                ("kswapd_cpu_ns", ks.cpu_ns),
                ("kswapd_runq_wait_ns", ks.runq_wait_ns),
                ("kswapd_steps", ks.steps),
                ("kcompactd_cpu_ns", kc.cpu_ns),
                ("kcompactd_runq_wait_ns", kc.runq_wait_ns),
                ("kcompactd_steps", kc.steps),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        },
        pageblock_maps: {
            let mut v = maps.borrow().clone();
            if v.last().is_none_or(|m| m.t_ns != end_ns) {
                v.push(pageblock_snapshot(&e.mm, end_ns));
            }
            v
        },
        proc_start,
        proc_end: {
            let mut p = proc_snapshot(&e.mm);
            if !trace_text.is_empty() {
                p.insert("trace".into(), trace_text);
            }
            p
        },
        wall_ns: 0,
    })
}

/// How much ftrace text of `[run] trace` a timed run keeps (in `proc_end["trace"]`).
pub const TRACE_KEEP_BYTES: usize = 4 << 20;

/// Moves the mm's trace records into the run's counts per event name and the kept text.
fn drain_trace(mm: &mut Mm, (counts, text): &mut (BTreeMap<String, u64>, String)) {
    for r in mm.take_trace() {
        *counts.entry(r.event.name().to_string()).or_default() += 1;
        if text.len() < TRACE_KEEP_BYTES {
            r.render(text);
        }
    }
}
