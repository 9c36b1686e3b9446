//! Workload generators on the engine: kbuild + thp_burst, the seed-001 workload in miniature.

use std::cell::RefCell;
use std::rc::Rc;

use fraglab_mm::mmzone::{MachineConfig, ZoneConfig};
use fraglab_mm::types::ZoneType;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Mm, Tunables};
use fraglab_sim::anon::AllocPath;
use fraglab_sim::cost::CostModel;
use fraglab_sim::engine::{Engine, MS, SEC};
use fraglab_sim::metrics::Metrics;
use fraglab_sim::workload::{Flusher, KbuildShared, KbuildWorker, ThpBurst};
use fraglab_spec::{KbuildParams, ThpBurstParams};

fn machine(mib: u32) -> Mm {
    let pages = mib * 256;
    let z = ZoneConfig {
        zone_type: ZoneType::Dma32,
        nid: 0,
        start_pfn: 4096,
        spanned: pages,
        present: pages,
        managed: pages,
    };
    let m = MachineConfig {
        cpu_node: Vec::new(),
        zones: vec![z],
        nr_cpus: 2,
    };
    let mut mm = Mm::new(&m, Tunables::default()).unwrap();
    mm.thp.enabled = fraglab_mm::huge_memory::ThpEnabled::Madvise;
    mm
}

fn run(seed: u64, defrag_mode: bool) -> (Engine, Metrics, u64) {
    let mut mm = machine(256);
    mm.tun.defrag_mode = defrag_mode;
    let metrics = Rc::new(RefCell::new(Metrics::default()));
    let mut e = Engine::new(mm, CostModel::default(), seed);
    let spec = KbuildParams {
        numa: Default::default(),
        line: 0,
        jobs_parallel: 4,
        jobs: 60,
        iterations: 2,
        job_anon_bytes: 2048 * 4096,
        job_cpu_ns: 50 * MS,
        source_bytes: 20_000 * 4096,
        job_read_bytes: 600 * 4096,
        job_slab_bytes: 100 * 4096,
        job_obj_bytes: 40 * 4096,
        source_file_bytes: 16 * 4096,
        untar: false,
        trees: 1,
    };
    let shared = KbuildShared::new(&mut e.mm, spec, metrics.clone(), None);
    for _ in 0..4 {
        e.spawn(Box::new(KbuildWorker::new(shared.clone())));
    }
    e.spawn(Box::new(Flusher {
        shared: shared.clone(),
        next_pass_ns: 0,
    }));
    e.spawn(Box::new(ThpBurst::new(
        ThpBurstParams {
            numa: Default::default(),
            line: 0,
            interval_ns: 500 * MS,
            size_bytes: 16 * 512 * 4096,
            hold_ns: 200 * MS,
            bursts: 6,
            start_ns: 100 * MS,
            madvised: true,
        },
        metrics.clone(),
    )));
    let end = e.run(600 * SEC, |e| e.workload_done());
    let m = metrics.borrow().clone();
    (e, m, end)
}

#[test]
fn kbuild_and_thp_bursts_run_to_completion_with_consistent_accounting() {
    let (e, m, end) = run(1, false);
    assert!(e.workload_done(), "ended at {end}");
    assert_eq!(m.builds.len(), 2);
    for b in &m.builds {
        assert_eq!(b.jobs, 60);
        assert!(b.end_ns > b.start_ns);
        assert_eq!(b.user_ns, 60 * 50 * MS, "user time is the jobs' own CPU time");
        assert!(b.system_ns > 0);
        // 4 workers on 2 CPUs: real time at least user/2.
        assert!(b.end_ns - b.start_ns >= b.user_ns / 2);
    }
    assert_eq!(m.bursts.len(), 6);
    let faults: u64 = m.bursts.iter().map(|b| b.faults).sum();
    assert_eq!(faults, 6 * 16);
    let huge: u64 = m.bursts.iter().map(|b| b.huge).sum();
    assert_eq!(
        huge,
        e.mm.stat(Stat::thp_fault_alloc),
        "every PMD THP is a burst's"
    );
    assert!(m.fault_latency.keys().any(|&(o, _)| o == 9));
    assert!(m.fault_latency.contains_key(&(0, AllocPath::Fast)));
    e.mm.check_invariants().unwrap();
}

#[test]
fn workload_runs_are_deterministic() {
    let (a, ma, ta) = run(3, true);
    let (b, mb, tb) = run(3, true);
    assert_eq!(ta, tb);
    assert_eq!(a.mm.stats, b.mm.stats);
    assert_eq!(ma.builds, mb.builds);
    assert_eq!(ma.bursts, mb.bursts);
}

/// A kbuild whose builds each unpack their tree afresh (`untar`), keeping `trees` trees, on a
/// machine large enough that nothing is reclaimed.
fn untar_run(trees: u32) -> (Engine, Metrics) {
    let metrics = Rc::new(RefCell::new(Metrics::default()));
    let mut e = Engine::new(machine(256), CostModel::default(), 1);
    let spec = KbuildParams {
        numa: Default::default(),
        line: 0,
        jobs_parallel: 2,
        jobs: 20,
        iterations: 3,
        job_anon_bytes: 256 * 4096,
        job_cpu_ns: 10 * MS,
        source_bytes: 4000 * 4096,
        job_read_bytes: 64 * 4096,
        job_slab_bytes: 0,
        job_obj_bytes: 8 * 4096,
        source_file_bytes: 4 * 4096,
        untar: true,
        trees,
    };
    let shared = KbuildShared::new(&mut e.mm, spec, metrics.clone(), None);
    for _ in 0..2 {
        e.spawn(Box::new(KbuildWorker::new(shared.clone())));
    }
    e.run(600 * SEC, |e| e.workload_done());
    let m = metrics.borrow().clone();
    (e, m)
}

#[test]
fn kbuild_untar_keeps_the_last_trees_and_reads_only_the_tarball() {
    let (one, m1) = untar_run(1);
    let (two, m2) = untar_run(2);
    for (e, m) in [(&one, &m1), (&two, &m2)] {
        assert!(e.workload_done());
        assert_eq!(m.builds.len(), 3);
        assert!(m.builds.iter().all(|b| b.jobs == 20));
        e.mm.check_invariants().unwrap();
        // The tarball (4,000 pages; `pgpgin` counts 512-byte sectors, 8 a page) is read from
        // the device once, at the first untar; the trees are written, and the jobs' reads hit
        // their tree's page cache.
        assert_eq!(e.mm.stat(Stat::pgpgin), 8 * 4000);
        assert_eq!(e.mm.stat(Stat::pgscan_kswapd) + e.mm.stat(Stat::pgscan_direct), 0);
    }
    // Cached at the end: the tarball, and the kept trees with their builds' object files
    // (20 jobs × 8 pages); a deleted tree's pages are freed with it.
    let files = |e: &Engine| e.mm.stat(Stat::nr_file_pages);
    assert_eq!(files(&one), 4000 + (4000 + 160));
    assert_eq!(files(&two), 4000 + 2 * (4000 + 160));
}

/// A task program's `compute` runs in slices of at most 10 ms, as a kbuild job's does, so a
/// long computation does not hold its CPU against kswapd and kcompactd for its whole length.
#[test]
fn task_compute_runs_in_10ms_slices() {
    let text = r#"
[machine]
memory = "256MiB"
cpus = 1
[workload]
[[workload.task]]
name = "cc1"
steps = [{ compute = "95ms" }]
"#;
    let spec = fraglab_spec::parse_spec(text, "t.toml").unwrap();
    let mut e = Engine::new(machine(64), CostModel::default(), 1);
    let files = Rc::new(RefCell::new(std::collections::BTreeMap::new()));
    let metrics = Rc::new(RefCell::new(Metrics::default()));
    let t = e.spawn(Box::new(fraglab_sim::workload::ProgramTask::new(
        &spec.workload.as_ref().unwrap().task[0],
        files,
        metrics,
    )));
    e.run(10 * SEC, |e| e.workload_done());
    let s = e.task_stats(t);
    // Nine slices of 10 ms and one of 5 ms, then the step that ends the program.
    assert_eq!(s.steps, 11, "{s:?}");
    assert!(s.cpu_ns >= 95 * MS && s.cpu_ns < 96 * MS, "{s:?}");
}
