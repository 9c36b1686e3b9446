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
use fraglab_spec::result::{BuildResult, LatencyHistogram, PageblockMap, RunResult, Sample, RESULT_SCHEMA};
use fraglab_spec::Spec;

use crate::cost::CostModel;
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::timeless::{boot, stats_with_zone_items, RunError};
use crate::workload::{generators, Run};

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

pub(crate) fn histogram(order: u32, path: &str, h: &crate::metrics::Histogram) -> LatencyHistogram {
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
    let mut e = Engine::new(boot(spec)?, cost_model(spec), spec.run.seed);
    if spec.model.sched == "fair" {
        e.sched = crate::engine::Sched::Fair;
    }
    let metrics = Rc::new(RefCell::new(Metrics::default()));
    let mut gens = generators(w);
    let mut run = Run::new(&mut e, spec, w, metrics.clone());
    for g in &mut gens {
        g.spawn(&mut run);
    }
    let rec = Recorder::install(&mut e, w.duration_ns);
    let proc_start = proc_snapshot(&e.mm);
    let start = vmstat_values(&e.mm);
    let end_ns = run_to_end(&mut e, w.duration_ns, progress);
    e.mm.check_invariants().map_err(|v| {
        RunError(format!(
            "{}: invariant violated at the end of the run: {v}",
            spec.file
        ))
    })?;
    let mut r = result(spec, &mut e, &rec, proc_start, &start, end_ns);
    let m = metrics.borrow();
    r.fault_latency = m
        .fault_latency
        .iter()
        .map(|(&(order, path), h)| histogram(order, path.name(), h))
        .collect();
    for g in &gens {
        g.result(&m, &mut r);
    }
    Ok(r)
}

/// What a timed run records as it goes: a sample per tick, a pageblock map at whole seconds
/// (about 120 over the run) and, with `[run] trace`, the trace events.
struct Recorder {
    samples: Rc<RefCell<Vec<Sample>>>,
    maps: Rc<RefCell<Vec<PageblockMap>>>,
    /// The events counted per name over the run (as the host engine's `--trace` counts them)
    /// and the first TRACE_KEEP_BYTES of their ftrace text.
    traced: Rc<RefCell<(BTreeMap<String, u64>, String)>>,
}

impl Recorder {
    /// Takes the first sample and map and registers the tick hook that takes the others.
    fn install(e: &mut Engine, duration_ns: u64) -> Recorder {
        let samples = Rc::new(RefCell::new(vec![sample(&e.mm, 0)]));
        let s2 = samples.clone();
        // About 120 pageblock maps over the run, at whole seconds.
        let map_every = (duration_ns / 120).div_ceil(1_000_000_000).max(1) * 1_000_000_000;
        let maps = Rc::new(RefCell::new(vec![pageblock_snapshot(&e.mm, 0)]));
        let m2 = maps.clone();
        // The trace buffer is emptied every tick so that a long run does not hold them all.
        let traced = Rc::new(RefCell::new((BTreeMap::<String, u64>::new(), String::new())));
        let t2 = traced.clone();
        e.on_tick(Box::new(move |t, mm| {
            s2.borrow_mut().push(sample(mm, t));
            if t % map_every == 0 {
                m2.borrow_mut().push(pageblock_snapshot(mm, t));
            }
            drain_trace(mm, &mut t2.borrow_mut());
        }));
        Recorder {
            samples,
            maps,
            traced,
        }
    }
}

/// Runs the engine until the workload is done or `duration` has passed, reporting progress at
/// most once per simulated 100 ms. Returns the end time.
fn run_to_end(e: &mut Engine, duration: u64, progress: &mut dyn FnMut(u64, u64)) -> u64 {
    let mut last = 0u64;
    e.run(duration, |e| {
        let now = e.now();
        if now >= last + 100_000_000 {
            last = now;
            progress(now, duration);
        }
        e.workload_done()
    })
}

/// The run's result without the generators' parts: vmstat deltas, samples, the trace, the
/// model's own work, the pageblock maps and the /proc files.
fn result(
    spec: &Spec,
    e: &mut Engine,
    rec: &Recorder,
    proc_start: BTreeMap<String, String>,
    start: &[(String, i64)],
    end_ns: u64,
) -> RunResult {
    drain_trace(&mut e.mm, &mut rec.traced.borrow_mut());
    let (trace_counts, trace_text) = std::mem::take(&mut *rec.traced.borrow_mut());
    let end = vmstat_values(&e.mm);
    let vmstat_delta = start
        .iter()
        .zip(&end)
        .map(|((n, a), (_, b))| (n.clone(), b - a))
        .collect();
    let samples = rec.samples.borrow().clone();
    RunResult {
        schema: RESULT_SCHEMA,
        engine: "sim".into(),
        spec_name: spec.name.clone(),
        seed: spec.run.seed,
        duration_ns: end_ns,
        vmstat_delta,
        samples,
        trace_counts: trace_counts.clone(),
        sim_work: sim_work(e),
        pageblock_maps: {
            let mut v = rec.maps.borrow().clone();
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
        ..Default::default()
    }
}

/// The allocator's work that /proc/vmstat does not count, and the kernel threads' CPU time
/// and the time they were runnable but waited for a CPU (`[model] sched`).
fn sim_work(e: &Engine) -> BTreeMap<String, u64> {
    let w = &e.mm.work_sum;
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
