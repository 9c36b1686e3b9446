//! The discrete-event engine: ordering, CPU time accounting, and the kernel threads it runs
//! for mm's wake-ups.

use crate::fixtures::{dma32_machine as machine, no_switch_cost};
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::kswapd::KswapdPhase;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::Gfp;
use fraglab_sim::cost::CostModel;
use fraglab_sim::engine::{Cx, Engine, Sched, Step, TaskBody, TaskState, MS, SEC};
use rand::Rng;

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// Burns `steps` steps of `ns` each.
struct Spin {
    steps: u32,
    ns: u64,
}

impl TaskBody for Spin {
    fn comm(&self) -> &str {
        "spin"
    }
    fn step(&mut self, _cx: &mut Cx) -> Step {
        self.steps -= 1;
        if self.steps == 0 {
            Step::Exit(self.ns)
        } else {
            Step::Ran(self.ns)
        }
    }
}

#[test]
fn tasks_share_a_cpu_and_run_in_parallel_on_two() {
    let cost = no_switch_cost();
    for (cpus, want_end) in [(1u32, 2 * 10 * MS), (2, 10 * MS)] {
        let mut e = Engine::new(machine(8, cpus), cost.clone(), 1);
        let a = e.spawn(Box::new(Spin { steps: 10, ns: MS }));
        let b = e.spawn(Box::new(Spin { steps: 10, ns: MS }));
        e.run(10 * SEC, |e| e.workload_done());
        let (sa, sb) = (e.task_stats(a), e.task_stats(b));
        assert_eq!(sa.cpu_ns, 10 * MS);
        assert_eq!(sb.cpu_ns, 10 * MS);
        assert_eq!(sa.exit_ns.max(sb.exit_ns), Some(want_end), "{cpus} CPUs");
        if cpus == 1 {
            // Round robin at step granularity: each waited for the other's steps.
            assert!(sa.runq_wait_ns > 0 && sb.runq_wait_ns > 0);
        }
    }
}

/// Runs `ns` per step for ever, sleeping `sleep` after each step if asked.
struct Sipper {
    ns: u64,
    sleep: u64,
}

impl TaskBody for Sipper {
    fn comm(&self) -> &str {
        "sipper"
    }
    fn step(&mut self, _cx: &mut Cx) -> Step {
        if self.sleep > 0 {
            Step::Sleep {
                ran: self.ns,
                sleep: self.sleep,
            }
        } else {
            Step::Ran(self.ns)
        }
    }
}

/// A task of 1 ms steps against two of 10 ms steps on one CPU for 3 s: FIFO hands the CPU
/// round robin per step (1/21 of it to the short one), `Sched::Fair` by virtual runtime (a
/// third each, within a step).
#[test]
fn fair_scheduling_shares_the_cpu_by_time_not_by_steps() {
    let cost = no_switch_cost();
    for sched in [Sched::Fifo, Sched::Fair] {
        let mut e = Engine::new(machine(8, 1), cost.clone(), 1);
        e.sched = sched;
        let short = e.spawn(Box::new(Sipper { ns: MS, sleep: 0 }));
        let long1 = e.spawn(Box::new(Sipper {
            ns: 10 * MS,
            sleep: 0,
        }));
        let long2 = e.spawn(Box::new(Sipper {
            ns: 10 * MS,
            sleep: 0,
        }));
        e.run(3 * SEC, |_| false);
        let cpu = |t| e.task_stats(t).cpu_ns;
        match sched {
            Sched::Fifo => {
                assert!(cpu(short) < 3 * SEC / 15, "FIFO short task got {} ns", cpu(short));
            }
            Sched::Fair => {
                for t in [short, long1, long2] {
                    let c = cpu(t) as i64;
                    assert!((c - SEC as i64).abs() <= 20 * MS as i64, "fair share: {c} ns");
                }
            }
        }
    }
}

/// A task waking from sleep behind two busy tasks: FIFO queues it behind both of their
/// steps; `Sched::Fair` places it at most the sleeper credit before the CPU's minimum, so it
/// runs as soon as the current step ends.
#[test]
fn fair_scheduling_runs_a_waking_task_after_the_current_step() {
    let cost = no_switch_cost();
    let mut waits = Vec::new();
    for sched in [Sched::Fifo, Sched::Fair] {
        let mut e = Engine::new(machine(8, 1), cost.clone(), 1);
        e.sched = sched;
        e.spawn(Box::new(Sipper {
            ns: 10 * MS,
            sleep: 0,
        }));
        e.spawn(Box::new(Sipper {
            ns: 10 * MS,
            sleep: 0,
        }));
        let waker = e.spawn(Box::new(Sipper {
            ns: 100_000,
            sleep: 50 * MS,
        }));
        e.run(2 * SEC, |_| false);
        let s = e.task_stats(waker);
        waits.push(s.runq_wait_ns / s.steps);
    }
    // FIFO: it waits for the rest of the current step and the other queued one (~15 ms on
    // average); fair: only for the rest of the current step (~5 ms).
    assert!(waits[0] > 12 * MS, "FIFO wait per wake {} ns", waits[0]);
    assert!(waits[1] < 7 * MS, "fair wait per wake {} ns", waits[1]);
}

#[test]
fn context_switches_are_charged() {
    let cost = CostModel {
        context_switch_ns: 1_000,
        ..CostModel::default()
    };
    let mut e = Engine::new(machine(8, 1), cost, 1);
    let a = e.spawn(Box::new(Spin { steps: 3, ns: MS }));
    let b = e.spawn(Box::new(Spin { steps: 3, ns: MS }));
    e.run(SEC, |e| e.workload_done());
    // a, b, a, b, a, b: every step follows the other task.
    assert_eq!(e.task_stats(a).cpu_ns, 3 * MS + 3_000);
    assert_eq!(e.task_stats(b).cpu_ns, 3 * MS + 3_000);
}

/// Fills memory with clean page cache, one folio per step, then sleeps and exits.
struct Filler {
    left: u32,
    ids: Vec<FolioId>,
}

impl TaskBody for Filler {
    fn comm(&self) -> &str {
        "filler"
    }
    fn step(&mut self, cx: &mut Cx) -> Step {
        if self.left == 0 {
            return Step::Exit(0);
        }
        self.left -= 1;
        let order = cx.rng.gen_range(0..3u32);
        if let Some(id) = cx
            .mm
            .alloc_folio(cx.cpu, NO_RECLAIM, order, FolioKind::File, false)
        {
            self.ids.push(id);
        }
        let ran = cx.cost.fault_base_ns + cx.cost.slowpath(&cx.mm.work.last_alloc);
        if self.left.is_multiple_of(512) {
            Step::Sleep { ran, sleep: 50 * MS }
        } else {
            Step::Ran(ran)
        }
    }
}

fn filler_run(seed: u64) -> (Engine, u64) {
    let mut e = Engine::new(machine(16, 2), CostModel::default(), seed);
    e.spawn(Box::new(Filler {
        left: 12_000,
        ids: Vec::new(),
    }));
    let end = e.run(60 * SEC, |e| e.workload_done());
    (e, end)
}

#[test]
fn kswapd_runs_in_the_background_when_the_workload_wakes_it() {
    let (mut e, end) = filler_run(1);
    assert!(e.workload_done());
    assert!(end < 60 * SEC);
    assert!(e.kswapd_wakes > 0);
    let steal = e.mm.stat(Stat::pgsteal_kswapd);
    assert!(steal > 0, "kswapd reclaimed page cache");
    assert_eq!(
        e.mm.stat(Stat::pgsteal_direct),
        0,
        "the filler never reclaims itself"
    );
    assert!(e.task_stats(e.kswapd[0]).cpu_ns > 0);
    // Let the machine settle: kswapd naps and goes to sleep.
    e.run(end + 2 * SEC, |_| false);
    assert_eq!(e.mm.reclaim.kswapd[0].phase, KswapdPhase::Sleeping);
    assert_eq!(e.task_state(e.kswapd[0]), TaskState::Waiting);
    e.mm.check_invariants().unwrap();
}

#[test]
fn same_seed_same_run_different_seed_differs() {
    let (a, ta) = filler_run(7);
    let (b, tb) = filler_run(7);
    let (c, tc) = filler_run(8);
    assert_eq!(ta, tb);
    assert_eq!(a.mm.stats, b.mm.stats);
    assert!(ta != tc || a.mm.stats != c.mm.stats);
}

#[test]
fn kcompactd_runs_proactively_on_its_timer() {
    // Half of memory free in order-0 holes between anon pages: the fragmentation score is
    // above the proactive threshold, so kcompactd compacts on its own after 500 ms.
    let mut mm = machine(16, 1);
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        ids.push(id);
    }
    for id in ids.into_iter().step_by(2) {
        mm.free_folio(0, id);
    }
    mm.drain_all_pages();
    mm.kswapd_until_sleep(0, 8);
    mm.take_wakeups();
    let before = mm.fragmentation_score_node(0);
    let mut e = Engine::new(mm, CostModel::default(), 1);
    e.run(400 * MS, |_| false);
    assert_eq!(
        e.mm.stat(Stat::pgmigrate_success),
        0,
        "nothing before the first timeout"
    );
    e.run(SEC, |_| false);
    assert!(e.mm.stat(Stat::pgmigrate_success) > 0);
    assert!(e.mm.fragmentation_score_node(0) < before);
    assert!(e.task_stats(e.kcompactd[0]).cpu_ns > 0);
}

#[test]
fn cost_model_names_match_the_spec_keys() {
    // Every [cost] key names a constant of the model.
    let mut c = CostModel::default();
    for n in CostModel::NAMES {
        *c.get_mut(n).unwrap() = 7;
    }
    assert_eq!(c.fault_base_ns, 7);
    assert_eq!(c.free_page_ns, 7);
    assert!(c.get_mut("nope").is_none());
}

/// Idle balancing (`sched_balance_newidle`, simplified): three tasks that never sleep on two
/// CPUs. Placement puts two of them on CPU 0 (A, then C on a tie) and a short one (B) on CPU
/// 1; when B exits, CPU 1 takes the task waiting on CPU 0's queue instead of idling, so the
/// two long tasks finish in about 1 s, not the 2 s they would take sharing CPU 0.
#[test]
fn an_idle_cpu_takes_a_waiting_task_from_another() {
    for sched in [Sched::Fifo, Sched::Fair] {
        let mut e = Engine::new(machine(8, 2), no_switch_cost(), 1);
        e.sched = sched;
        let a = e.spawn(Box::new(Spin {
            steps: 100,
            ns: 10 * MS,
        }));
        let _b = e.spawn(Box::new(Spin {
            steps: 1,
            ns: 10 * MS,
        }));
        let c = e.spawn(Box::new(Spin {
            steps: 100,
            ns: 10 * MS,
        }));
        e.run(10 * SEC, |e| e.workload_done());
        let end = e.task_stats(a).exit_ns.max(e.task_stats(c).exit_ns).unwrap();
        assert!(
            (1000 * MS..=1020 * MS).contains(&end),
            "{sched:?}: the long tasks ended at {end} ns"
        );
        // Neither long task waited for the other after the pull.
        let wait = e.task_stats(a).runq_wait_ns + e.task_stats(c).runq_wait_ns;
        assert!(wait <= 20 * MS, "{sched:?}: {wait} ns waited on run queues");
    }
}

/// Calls `wakeup_kcompactd(9)` twice per step, every 100 ms, and records what each returned.
struct KcompactdWaker {
    seen: std::rc::Rc<std::cell::RefCell<Vec<(bool, bool)>>>,
    left: u32,
}

impl TaskBody for KcompactdWaker {
    fn comm(&self) -> &str {
        "waker"
    }
    fn step(&mut self, cx: &mut Cx) -> Step {
        let zone = cx.mm.kcompactd_max_zoneidx(0);
        let a = cx.mm.wakeup_kcompactd(0, 9, zone);
        let b = cx.mm.wakeup_kcompactd(0, 9, zone);
        self.seen.borrow_mut().push((a, b));
        self.left -= 1;
        if self.left == 0 {
            Step::Exit(1000)
        } else {
            Step::Sleep {
                ran: 1000,
                sleep: 100 * MS,
            }
        }
    }
}

/// §26.1 `wq_has_sleeper` and §26.2 in the engine: a wake-up finds kcompactd asleep and wakes
/// it; a second one before it has waited again finds it awake (no suitability check, no
/// wake-up) and is served by the same run; once it waits again, it can be woken again.
#[test]
fn section_26_1_engine_wakes_kcompactd_only_while_it_sleeps() {
    let mut mm = machine(16, 1);
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        ids.push(id);
    }
    for id in ids.into_iter().step_by(2) {
        mm.free_folio(0, id);
    }
    mm.drain_all_pages();
    mm.kswapd_until_sleep(0, 8);
    mm.take_wakeups();
    mm.compact.cfg.proactiveness = 0;
    mm.compact.kcompactd[0].next_timeout_ms = None;
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut e = Engine::new(mm, CostModel::default(), 1);
    e.spawn(Box::new(KcompactdWaker {
        seen: seen.clone(),
        left: 1,
    }));
    e.run(SEC, |_| false);
    assert_eq!(
        seen.borrow()[0],
        (true, false),
        "the second call found kcompactd awake"
    );
    assert_eq!(e.kcompactd_wakes, 1);
    assert_eq!(e.mm.stat(Stat::compact_daemon_wake), 1, "one run served both");
    assert!(!e.mm.compact.kcompactd[0].awake, "waiting again after its run");
    assert_eq!(e.task_state(e.kcompactd[0]), TaskState::Waiting);
}
