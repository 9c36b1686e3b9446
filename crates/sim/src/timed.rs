//! The timed run: a spec's `[workload]` on the discrete-event engine, producing a
//! [`RunResult`] (the JSON schema of `fraglab_spec::result`) and the mmtests-style rows of
//! `shared/reference/published-results.md` §5.1.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

use fraglab_mm::types::{MigrateType, MIGRATE_TYPES, NR_PAGE_ORDERS, PAGEBLOCK_ORDER};
use fraglab_mm::vmstat::{render_buddyinfo, render_pagetypeinfo, render_vmstat, render_zoneinfo, Stat};
use fraglab_mm::Mm;
use fraglab_spec::result::{
    BuildResult, BurstResult, LatencyHistogram, PageblockMap, RunResult, Sample, ThpChallengeResult,
    VmScalabilityResult, RESULT_SCHEMA,
};
use fraglab_spec::Spec;

use crate::boot::boot;
use crate::cost::CostModel;
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::timeless::{stats_with_zone_items, RunError};
use crate::vmscal::{VmScalSpec, VmScalTask};
use crate::workload::{
    Flusher, KbuildShared, KbuildSpec, KbuildWorker, PageCacheFlusher, PgbenchCheckpointer, PgbenchClient,
    PgbenchShared, PgbenchSpec, ProgramTask, ThpBurst, ThpBurstSpec, ThpChallenge, ThpChallengeSpec,
};

/// The /proc files captured at the start and end of a run.
fn proc_snapshot(mm: &Mm) -> BTreeMap<String, String> {
    let z = mm.zone_views();
    let stats = stats_with_zone_items(mm);
    BTreeMap::from([
        ("buddyinfo".to_string(), render_buddyinfo(0, &z)),
        ("pagetypeinfo".to_string(), render_pagetypeinfo(0, &z)),
        ("zoneinfo".to_string(), render_zoneinfo(0, &z, &stats)),
        ("vmstat".to_string(), render_vmstat(&z, &stats)),
    ])
}

/// /proc/vmstat as (name, value) pairs.
fn vmstat_values(mm: &Mm) -> Vec<(String, i64)> {
    render_vmstat(&mm.zone_views(), &stats_with_zone_items(mm))
        .lines()
        .filter_map(|l| {
            let (n, v) = l.split_once(' ')?;
            Some((n.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// One time-series sample.
/// The pageblock map of `mm` at `t_ns` (result schema `PageblockMap`): per block its
/// migratetype (lower case if mixed) and how full it is, from the per-block folio census.
pub fn pageblock_snapshot(mm: &Mm, t_ns: u64) -> PageblockMap {
    let mut m = PageblockMap {
        t_ns,
        ..Default::default()
    };
    for z in mm.zones.iter().filter(|z| z.populated()) {
        m.zones.push((z.zone_type.name().to_string(), m.types.len()));
        let first = z.start_pfn >> PAGEBLOCK_ORDER;
        let last = (z.end_pfn() - 1) >> PAGEBLOCK_ORDER;
        for b in first..=last {
            let mt = mm.block_mt(b << PAGEBLOCK_ORDER);
            let c = &mm.block_content[b as usize];
            let own = match mt {
                MigrateType::Unmovable => Some(0),
                MigrateType::Movable => Some(1),
                MigrateType::Reclaimable => Some(2),
                _ => None,
            };
            let mixed = own.is_some_and(|o| c.iter().enumerate().any(|(k, n)| k != o && *n > 0));
            let ch = ['U', 'M', 'R', 'H', 'I'][mt.idx().min(4)];
            m.types.push(if mixed { ch.to_ascii_lowercase() } else { ch });
            let used: u64 = c.iter().map(|&n| n as u64).sum();
            let digit = (used * 10 / (1 << PAGEBLOCK_ORDER)).min(9) as u8;
            m.fill.push((b'0' + digit) as char);
        }
    }
    m
}

pub fn sample(mm: &Mm, t_ns: u64) -> Sample {
    let mut free_by_order = vec![0u64; NR_PAGE_ORDERS];
    let mut free_by_type = vec![0u64; MIGRATE_TYPES];
    for z in &mm.zones {
        for (o, row) in z.area.nr_by_type.iter().enumerate() {
            for (t, n) in row.iter().enumerate() {
                free_by_order[o] += n << o;
                free_by_type[t] += n << o;
            }
        }
    }
    let mut blocks_by_type = vec![0u64; MIGRATE_TYPES];
    for z in &mm.zones {
        if !z.populated() {
            continue;
        }
        let first = z.start_pfn >> PAGEBLOCK_ORDER;
        let last = (z.end_pfn() - 1) >> PAGEBLOCK_ORDER;
        for b in first..=last {
            blocks_by_type[mm.block_mt(b << PAGEBLOCK_ORDER).idx()] += 1;
        }
    }
    // Mixed: a block holding folio pages whose mobility is not the block's type (HighAtomic
    // and Isolate blocks are not counted).
    let mut mixed = 0u64;
    for (b, c) in mm.block_content.iter().enumerate() {
        let own = match mm.block_mt((b as u32) << PAGEBLOCK_ORDER) {
            MigrateType::Unmovable => 0,
            MigrateType::Movable => 1,
            MigrateType::Reclaimable => 2,
            _ => continue,
        };
        if c.iter().enumerate().any(|(m, n)| m != own && *n > 0) {
            mixed += 1;
        }
    }
    Sample {
        t_ns,
        free_by_order,
        free_by_type,
        blocks_by_type,
        mixed_blocks: mixed,
        thp_fault_alloc: mm.stat(Stat::thp_fault_alloc),
        thp_fault_fallback: mm.stat(Stat::thp_fault_fallback),
    }
}

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

fn histogram(order: u32, path: &str, h: &crate::metrics::Histogram) -> LatencyHistogram {
    LatencyHistogram {
        order,
        path: path.into(),
        count: h.count,
        sum_ns: h.sum_ns,
        min_ns: h.min_ns,
        max_ns: h.max_ns,
        log2_buckets: h.buckets.clone(),
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

/// Item `k` of a vmstat delta map (0 if absent).
fn g(d: &BTreeMap<String, i64>, k: &str) -> f64 {
    *d.get(k).unwrap_or(&0) as f64
}

/// A row's value from one build's vmstat deltas.
type DeltaFn = dyn Fn(&BTreeMap<String, i64>) -> f64;

fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (mean, var.sqrt())
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

/// The mmtests-style rows of published-results.md §1/§5.1 for a result: per-build (iteration)
/// vmstat deltas averaged over the builds, the build times, and the burst process's
/// "Hugealloc Time" (µs per burst).
pub fn mmtests_rows(r: &RunResult) -> String {
    let mut out = String::new();
    let builds = &r.builds;
    // The vmstat rows: a mean over the builds, or, for a run without builds (thpchallenge,
    // a host run), the whole run's deltas as one sample (as `compare` takes them).
    let deltas: Vec<&BTreeMap<String, i64>> = if builds.is_empty() {
        vec![&r.vmstat_delta]
    } else {
        builds.iter().map(|b| &b.vmstat_delta).collect()
    };
    let per_build = |f: &DeltaFn| -> (f64, f64) {
        let v: Vec<f64> = deltas.iter().map(|d| f(d)).collect();
        mean_sd(&v)
    };
    let hug: Vec<f64> = r.bursts.iter().map(|b| b.alloc_ns as f64 / 1000.0).collect();
    let (mut hm, mut hs) = mean_sd(&hug);
    // With builds, mmtests' per-build figures averaged over the builds (as `compare` prints).
    let compared = crate::compare::samples_of(std::slice::from_ref(r));
    let row = |name: &str| {
        compared
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, v)| crate::compare::amean(v))
    };
    if let (Some(m), Some(sd)) = (row("Hugealloc Time mean (us)"), row("Hugealloc Time stddev (us)")) {
        (hm, hs) = (m, sd);
    }
    let _ = writeln!(out, "{:<34} {:>14}", "", "Amean");
    let _ = writeln!(out, "{:<34} {:>14.2}", "Hugealloc Time mean (us)", hm);
    let _ = writeln!(out, "{:<34} {:>14.2}", "Hugealloc Time stddev (us)", hs);
    let secs = |f: &dyn Fn(&BuildResult) -> u64| {
        let v: Vec<f64> = builds.iter().map(|b| f(b) as f64 / 1e9).collect();
        mean_sd(&v).0
    };
    if !builds.is_empty() {
        let _ = writeln!(
            out,
            "{:<34} {:>14.2}",
            "Kbuild Real time",
            secs(&|b| b.end_ns - b.start_ns)
        );
        let _ = writeln!(out, "{:<34} {:>14.2}", "Kbuild User time", secs(&|b| b.user_ns));
        let _ = writeln!(
            out,
            "{:<34} {:>14.2}",
            "Kbuild System time",
            secs(&|b| b.system_ns)
        );
    }
    let rows: [(&str, &DeltaFn); 11] = [
        ("THP fault alloc", &|d| g(d, "thp_fault_alloc")),
        ("THP fault fallback", &|d| g(d, "thp_fault_fallback")),
        ("Direct compact fail", &|d| g(d, "compact_fail")),
        ("Direct compact success", &|d| g(d, "compact_success")),
        ("Compact daemon scanned migrate", &|d| {
            g(d, "compact_daemon_migrate_scanned")
        }),
        ("Compact daemon scanned free", &|d| {
            g(d, "compact_daemon_free_scanned")
        }),
        ("Alloc stall", &|d| {
            [
                "allocstall_dma",
                "allocstall_dma32",
                "allocstall_normal",
                "allocstall_movable",
                "allocstall_device",
            ]
            .iter()
            .map(|k| g(d, k))
            .sum()
        }),
        ("Pages kswapd scanned", &|d| g(d, "pgscan_kswapd")),
        ("Pages direct scanned", &|d| g(d, "pgscan_direct")),
        ("Swap out", &|d| g(d, "pswpout")),
        ("File refaults", &|d| g(d, "workingset_refault_file")),
    ];
    for (name, f) in rows {
        let _ = writeln!(out, "{:<34} {:>14.2}", name, per_build(f).0);
    }
    // Mean over runs of the per-run ratio (§5.1).
    let rates: Vec<f64> = deltas
        .iter()
        .filter_map(|d| {
            let (s, f) = (g(d, "compact_success"), g(d, "compact_fail"));
            (s + f > 0.0).then(|| s * 100.0 / (s + f))
        })
        .collect();
    let _ = writeln!(
        out,
        "{:<34} {:>14.2}",
        "Direct compact success rate %",
        mean_sd(&rates).0
    );
    if let Some(p) = &r.pgbench {
        let d = &r.vmstat_delta;
        let stalls: i64 = [
            "allocstall_dma",
            "allocstall_dma32",
            "allocstall_normal",
            "allocstall_movable",
        ]
        .iter()
        .map(|k| d.get(*k).unwrap_or(&0))
        .sum();
        let _ = writeln!(out, "{:<34} {:>14.2}", "pgbench TPS mean", p.mean_tps);
        let _ = writeln!(
            out,
            "{:<34} {:>14.2}",
            "pgbench TPS during checkpoints", p.checkpoint_tps
        );
        let _ = writeln!(
            out,
            "{:<34} {:>14.2}",
            "pgbench TPS between checkpoints", p.steady_tps
        );
        let _ = writeln!(
            out,
            "{:<34} {:>14}",
            "compact_stall",
            d.get("compact_stall").unwrap_or(&0)
        );
        let _ = writeln!(out, "{:<34} {:>14}", "allocstall", stalls);
    }
    if let Some(t) = &r.thpchallenge {
        let us = |h: &LatencyHistogram| {
            if h.count == 0 {
                0.0
            } else {
                h.sum_ns as f64 / h.count as f64 / 1000.0
            }
        };
        let _ = writeln!(
            out,
            "{:<34} {:>14.2}",
            "thpchallenge fault-huge (us)",
            us(&t.huge)
        );
        let _ = writeln!(
            out,
            "{:<34} {:>14.2}",
            "thpchallenge fault-base (us)",
            us(&t.base)
        );
        let _ = writeln!(out, "{:<34} {:>14.2}", "thpchallenge huge-pct", t.huge_pct);
    }
    for v in &r.vm_scalability {
        // lkp's metric name, the case in the testcase column's place.
        let name = format!("vm-scalability.throughput {}", v.case);
        let _ = writeln!(out, "{:<34} {:>14.0}", name, v.throughput);
    }
    out
}
