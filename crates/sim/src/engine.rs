//! The discrete-event engine: virtual time around the mm model (architecture.md "Determinism
//! and time").
//!
//! Ordering contract: events run in order of virtual time, then in the order they were
//! scheduled (a sequence number breaks ties). Nothing else — no hash order, no wall clock —
//! influences the order, so the same inputs give the same run.
//!
//! Execution model: N CPUs, each with a FIFO run queue. A task runs one *step* at a time: the
//! step's mm operations happen atomically at the moment it starts, and the CPU is then busy for
//! the step's cost (from the [`CostModel`] and the work mm reports). A runnable task goes back
//! to the tail of its CPU's queue after each step, so tasks sharing a CPU interleave at step
//! granularity; switching tasks costs a context switch. Kernel threads are tasks too: kswapd and
//! kcompactd are woken by the [`Wakeup`]s mm returns and by their own timeouts (the 100 ms nap,
//! the 500 ms / 32 s kcompactd wait). A periodic tick (1 s) runs the PCP high decay.
//!
//! Simplifications: no preemption inside a step; a task is placed on the least loaded CPU when
//! it becomes runnable, and moves afterwards only when a CPU runs out of work and pulls a
//! waiting task (idle balancing, `Engine::pull_queued`) — no periodic balancing between busy
//! CPUs; kernel threads have no priority over user tasks.
//!
//! Two ways to pick the next task of a CPU ([`Sched`]): `Fifo` (the default) takes the run
//! queue's head, so a task with short steps (kswapd's reclaim batches, kcompactd's runs) waits
//! behind every long step (a compile job's 10 ms slices) each time; `Fair` picks the runnable
//! task with the least virtual runtime, as CFS/EEVDF does, and places a waking task at most
//! [`SLEEPER_CREDIT_NS`] before the CPU's minimum, so kswapd and kcompactd, which sleep most of
//! the time, run next after the current step and get a fair share when they stay runnable.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use fraglab_mm::kswapd::KswapdPhase;
use fraglab_mm::{Mm, Wakeup};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::cost::{Charge, CostModel, Phase};
use crate::lock::{LockId, Locks};
use fraglab_mm::node::ZoneLockWork;

pub type TaskId = usize;

/// How a CPU picks its next task (see the module comment): `[model] sched`.
pub use fraglab_types::switches::Sched;

/// `Sched::Fair`: how far before the CPU's minimum virtual runtime a waking task may be placed.
/// Simplified from the scheduler's placement (CFS's half of `sched_latency`, EEVDF's lag
/// bounded by the slice): 3 ms, the base slice of a 4-CPU machine (0.75 ms × (1 + log2 4)),
/// rounded.
pub const SLEEPER_CREDIT_NS: u64 = 3 * MS;

/// A function called at every tick with the time and the model (samplers).
pub type TickHook = Box<dyn FnMut(u64, &mut Mm)>;

/// Nanoseconds per millisecond and per second.
pub const MS: u64 = 1_000_000;
pub const SEC: u64 = 1_000_000_000;

/// What a task's step did and what it does next.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Ran for this many ns; runnable again afterwards.
    Ran(u64),
    /// Ran for `ran` ns, then sleeps for `sleep` ns.
    Sleep { ran: u64, sleep: u64 },
    /// Ran for `ran` ns, then waits to be woken, or until `timeout` ns have passed.
    Wait { ran: u64, timeout: Option<u64> },
    /// Ran for this many ns and exited.
    Exit(u64),
}

impl Step {
    fn ran(self) -> u64 {
        match self {
            Step::Ran(r) | Step::Exit(r) | Step::Sleep { ran: r, .. } | Step::Wait { ran: r, .. } => r,
        }
    }
}

/// What a step can see and change.
pub struct Cx<'a> {
    pub mm: &'a mut Mm,
    pub now: u64,
    pub cpu: u32,
    pub pid: u32,
    pub cost: &'a CostModel,
    /// The task's own random stream (derived from the run seed and the task id).
    pub rng: &'a mut ChaCha8Rng,
    /// The contended locks ([`crate::lock`]).
    pub locks: &'a mut Locks,
    /// Where the step is in virtual time: its start (after the context switch) plus what it
    /// has charged through [`Cx::charge`] so far, waits included. Lock requests are made here.
    pub clock: u64,
    /// The waits of the step's charges (lock waits, writeback waits): the engine adds them to
    /// the step's CPU time, which the step's [`Step`] gives without them.
    pub waited: u64,
    /// `mm.work.zone_lock` as far as charged: the allocation and free paths' `zone->lock`
    /// holds since then go with the next charge (or the end of the step).
    zone_lock_mark: ZoneLockWork,
}

/// What a charge took: its CPU time (the cost model's) and its waits (locks, writeback).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    pub cpu: u64,
    pub wait: u64,
}

impl Spent {
    /// Wall time: from the work's start to its end.
    #[inline]
    pub fn wall(&self) -> u64 {
        self.cpu + self.wait
    }
}

/// Lock holds of a phase are laid out in at most this many grants per lock, evenly over the
/// phase (a grant standing for several lock calls back to back): bounds the engine's work and
/// the reservations a long phase (a compaction run) makes.
pub const MAX_GRANTS: u64 = 8;

impl Cx<'_> {
    /// Charges `c` at the step's clock: its CPU time, its lock holds (waiting for each lock
    /// another CPU holds, in virtual time) and its waits; the `zone->lock` holds of the
    /// allocation and free paths done since the last charge go with its first phase. Advances
    /// the clock by the wall time and adds the waits to `waited`. Returns CPU and wait.
    pub fn charge(&mut self, c: &Charge) -> Spent {
        let cpu = c.cpu_ns();
        let zl = self.mm.work.zone_lock;
        let calls = zl.acquisitions - self.zone_lock_mark.acquisitions;
        if calls == 0 && c.is_plain() {
            self.clock += cpu;
            return Spent { cpu, wait: 0 };
        }
        let chunks = zl.chunks - self.zone_lock_mark.chunks;
        self.zone_lock_mark = zl;
        let start = self.clock;
        let mut base = c.base;
        base.zone.calls += calls;
        base.zone.hold_ns += chunks * self.cost.zone_lock_chunk_ns;
        self.run_phase(&base);
        self.run_phase(&c.compaction);
        self.run_phase(&c.reclaim);
        self.run_drain(&c.drain);
        let wait = (self.clock - start).saturating_sub(cpu);
        self.waited += wait;
        Spent { cpu, wait }
    }

    /// CPU work without locks at the clock ([`Cx::charge`] of [`Charge::cpu`]).
    #[inline]
    pub fn cpu(&mut self, ns: u64) -> Spent {
        self.charge(&Charge::cpu(ns))
    }

    /// [`Cx::charge`] of allocation work; returns its CPU time.
    pub fn alloc_work(&mut self, w: &fraglab_mm::slowpath::WorkSum) -> u64 {
        let c = self.cost.alloc_charge(w);
        self.charge(&c).cpu
    }

    /// [`Cx::charge`] of one allocation attempt (a buffered write's); returns its CPU time.
    pub fn alloc_attempt(&mut self, w: &fraglab_mm::slowpath::AllocWork) -> u64 {
        let c = self.cost.attempt_charge(w);
        self.charge(&c).cpu
    }

    /// [`Cx::charge`] of compaction work; returns its CPU time.
    pub fn compaction(&mut self, st: &fraglab_mm::compaction::CompactRunStats) -> u64 {
        let c = Charge {
            compaction: self.cost.compaction_phase(st),
            ..Charge::default()
        };
        self.charge(&c).cpu
    }

    /// [`Cx::charge`] of reclaim of `pages` pages and `folios` folios; returns its CPU time.
    pub fn reclaim(&mut self, pages: u64, folios: u64) -> u64 {
        let c = Charge {
            reclaim: self.cost.reclaim_phase(pages, folios),
            ..Charge::default()
        };
        self.charge(&c).cpu
    }

    /// Takes the allocation and free paths' `zone->lock` holds not yet charged at the clock
    /// (the engine calls it when the step ends, for work the step charged without
    /// [`Cx::charge`]: its CPU time, which includes the holds, is in the step's [`Step`]
    /// already, so only the waits count).
    fn settle(&mut self) {
        let zl = self.mm.work.zone_lock;
        if zl != self.zone_lock_mark {
            let hold = (zl.chunks - self.zone_lock_mark.chunks) * self.cost.zone_lock_chunk_ns;
            self.charge(&Charge::cpu(hold));
        }
    }

    /// One phase on the clock: its CPU time with its lock holds laid out evenly in it (at most
    /// [`MAX_GRANTS`] grants per lock, the two locks' grants interleaved by position; holds
    /// longer than the CPU time are scaled down to it), then its waits.
    fn run_phase(&mut self, p: &Phase) {
        if p.zone.calls == 0 && p.lru.calls == 0 {
            self.clock += p.cpu_ns + p.wait_ns;
            return;
        }
        let held = p.zone.hold_ns + p.lru.hold_ns;
        let scale = |h: u64| {
            if held > p.cpu_ns {
                (h as u128 * p.cpu_ns as u128 / held as u128) as u64
            } else {
                h
            }
        };
        let (zh, lh) = (scale(p.zone.hold_ns), scale(p.lru.hold_ns));
        let nz = p.zone.calls.min(MAX_GRANTS);
        let nl = p.lru.calls.min(MAX_GRANTS);
        let grants = nz + nl;
        let free = p.cpu_ns - zh - lh;
        let (mut iz, mut il) = (0, 0);
        for _ in 0..grants {
            // Unlocked time before each grant: an equal share of the rest, the remainder
            // after the last.
            self.clock += free / (grants + 1);
            // Grant j of n sits at (2j + 1) / 2n of the phase; the zone lock first on ties.
            let zone_next = iz < nz && (il >= nl || (2 * iz + 1) * nl <= (2 * il + 1) * nz);
            let (id, n, i, h, calls) = if zone_next {
                iz += 1;
                (LockId::Zone, nz, iz - 1, zh, p.zone.calls)
            } else {
                il += 1;
                (LockId::Lru, nl, il - 1, lh, p.lru.calls)
            };
            // Grant i's share of the hold and of the lock calls.
            let hold = h * (i + 1) / n - h * i / n;
            let c = calls * (i + 1) / n - calls * i / n;
            let granted = self.locks.acquire(id, self.clock, hold, c);
            self.clock = granted + hold;
        }
        self.clock += free - free / (grants + 1) * grants + p.wait_ns;
    }

    /// A `drain_all_pages` on the clock ([`crate::cost::Drain`]): `pcpu_drain_mutex` from the
    /// first moment it is free (the model decided at the step's start that the drain runs; if
    /// another CPU's drain holds the mutex here, this one waits for it), then for each CPU
    /// with pages its pcp lock's overhead (`drain_ipi_ns`) and its share of the pages freed
    /// under `zone->lock` (one `free_pcppages_bulk` per CPU: `drain_pages_zone` frees up to
    /// `batch << 5` pages per call, more than a CPU's lists hold at the default `high`).
    /// Simplified: the pages are spread evenly over the CPUs; the pcp locks are not
    /// contended (each CPU's own allocations and frees take its pcp lock with a trylock and
    /// fall back to the buddy lists, under the zone lock the drain holds).
    fn run_drain(&mut self, d: &crate::cost::Drain) {
        // Two or more drains in one charge (several allocations measured together): their
        // CPUs and pages one after the other under one hold of the mutex.
        if d.calls == 0 {
            return;
        }
        let asked = self.clock;
        let start = self.locks.free_from(LockId::PcpDrain, asked);
        self.clock = start;
        let cpus = d.cpus;
        let unlocked = d.cpu_ns - d.pages * self.cost.drain_page_ns;
        for i in 0..cpus.max(1) {
            let n = cpus.max(1);
            self.clock += unlocked * (i + 1) / n - unlocked * i / n;
            let pages = d.pages * (i + 1) / n - d.pages * i / n;
            if pages > 0 {
                let hold = pages * self.cost.drain_page_ns;
                let granted = self.locks.acquire(LockId::Zone, self.clock, hold, 1);
                self.clock = granted + hold;
            }
        }
        // The mutex is held at least for the moment of the call.
        let end = self.clock.max(start + 1);
        self.locks.reserve(LockId::PcpDrain, start, end);
        self.locks
            .stat_mut(LockId::PcpDrain)
            .record(d.calls, end - start, start - asked);
    }
}

/// A task's program.
pub trait TaskBody {
    /// The task's command name (`comm`), as trace lines print it.
    fn comm(&self) -> &str;
    /// Runs one step at `cx.now`.
    fn step(&mut self, cx: &mut Cx) -> Step;

    /// How far the task is through its work, for the progress estimate of a timed run
    /// ([`Engine::expected_end`]); `None` (the default): the task cannot tell (its end is then
    /// bounded only by the run's duration). Never read by the run itself.
    fn progress(&self) -> Option<Progress> {
        None
    }

    /// The task as a checkpoint holds it (`crate::checkpoint`); `None` (the default): the
    /// task cannot be checkpointed, and a checkpoint of a run with it fails, naming it.
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        None
    }
}

/// What a task knows of its end: work done of a total (pages faulted, compile jobs, program
/// steps) and/or a time it runs until (a benchmark's duration, a schedule's last burst).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// (done, total) units of work.
    pub work: Option<(u64, u64)>,
    /// The simulated time the task stops at (at the latest).
    pub until_ns: Option<u64>,
    /// A task that only notices its end when it wakes, at `first + k × interval` (a periodic
    /// flusher whose work is another task's): (first, interval).
    pub wakes: Option<(u64, u64)>,
}

impl Progress {
    /// `done` of `total` units of work.
    pub fn work(done: u64, total: u64) -> Progress {
        Progress {
            work: Some((done, total)),
            ..Progress::default()
        }
    }

    /// Runs until simulated time `t`.
    pub fn until(t: u64) -> Progress {
        Progress {
            until_ns: Some(t),
            ..Progress::default()
        }
    }

    /// When a task that started at `start_ns` should end, seen at `now`: the work extrapolated
    /// linearly from its rate so far (start + elapsed × total / done), no later than
    /// `until_ns`, then at the first of its `wakes` from there. `None` when neither is known
    /// (no work done yet and no end time).
    pub fn expected_end(&self, start_ns: u64, now: u64) -> Option<u64> {
        let by_work = match self.work {
            Some((done, total)) if done >= total => Some(now),
            Some((done, total)) if done > 0 && now > start_ns => {
                let elapsed = (now - start_ns) as u128;
                Some(start_ns.saturating_add((elapsed * total as u128 / done as u128).min(u64::MAX as u128) as u64))
            }
            _ => None,
        };
        let end = match (by_work, self.until_ns) {
            (Some(w), Some(u)) => Some(w.min(u)),
            (w, u) => w.or(u),
        }?;
        let end = match self.wakes {
            Some((first, _)) if end <= first => first,
            Some((first, interval)) if interval > 0 => {
                first.saturating_add((end - first).div_ceil(interval).saturating_mul(interval))
            }
            _ => end,
        };
        Some(end.max(now))
    }
}

/// A run's expected end from its live tasks' expected ends (`None`: a task cannot tell):
/// the latest of them, within `[now, cap]`; `None` if any task cannot tell (then only the cap
/// bounds the run). With no live task, `now`.
pub fn run_expected_end(now: u64, cap: u64, tasks: impl IntoIterator<Item = Option<u64>>) -> Option<u64> {
    let mut end = now;
    for t in tasks {
        end = end.max(t?);
    }
    Some(end.clamp(now.min(cap), cap))
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// On a run queue.
    Ready,
    Sleeping,
    Waiting,
    Exited,
}

/// Per-task accounting.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskStats {
    /// CPU time charged (steps and context switches).
    pub cpu_ns: u64,
    pub steps: u64,
    /// When the task was created and when it exited.
    pub start_ns: u64,
    pub exit_ns: Option<u64>,
    /// Time spent runnable but waiting for a CPU.
    pub runq_wait_ns: u64,
    /// Time the task's steps waited on their CPU (contended locks, writeback in migration):
    /// part of `cpu_ns`.
    pub wait_ns: u64,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Task {
    #[serde(with = "crate::checkpoint::task_body")]
    body: Box<dyn TaskBody>,
    /// A kernel-side helper (flusher): not waited for by `workload_done`.
    daemon: bool,
    pid: u32,
    state: TaskState,
    /// Incremented whenever a pending timer of the task becomes stale.
    gen: u64,
    rng: ChaCha8Rng,
    stats: TaskStats,
    ready_since: u64,
    /// `Sched::Fair`: virtual runtime (CPU time charged, shifted at placement), and, while the
    /// task sleeps, its virtual runtime minus its CPU's minimum when it went to sleep.
    vruntime: u64,
    sleep_rel: i64,
    sleep_since: u64,
    /// The node whose CPUs the task may run on (`numactl --cpunodebind`, a kernel thread's
    /// node), `None`: any CPU.
    node: Option<u32>,
    /// The task's memory policy (`numactl --membind/--interleave/--preferred`).
    mempolicy: fraglab_mm::numa::MemPolicy,
    /// Fragmentation blame (issue 37): the generator tag (an index into `Engine::tags`) and
    /// the task's interned source (`NO_BLAME_SOURCE` until its first step with blame on).
    tag: u32,
    blame_src: u32,
}

const NO_BLAME_SOURCE: u32 = u32::MAX;

/// Where the tasks spawned next run and allocate (`numactl` around a workload):
/// [`Engine::spawn_binding`].
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    /// Run on this node's CPUs only.
    pub node: Option<u32>,
    pub mempolicy: fraglab_mm::numa::MemPolicy,
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Cpu {
    busy: bool,
    runq: VecDeque<TaskId>,
    last: Option<TaskId>,
    /// `Sched::Fair`: the CPU's minimum virtual runtime (monotonic).
    min_vruntime: u64,
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum EventKind {
    /// A CPU finished its step (or was idle and got work).
    CpuFree(u32),
    /// A task's sleep or wait timeout expired (ignored if `gen` is stale).
    Timer { task: TaskId, gen: u64 },
    /// The periodic tick.
    Tick,
    /// kcompactd's step has been charged: its loop reaches the top and waits (§26.2 item 1,
    /// [`Mm::kcompactd_wait`]); ignored if `gen` is stale.
    KcompactdWait { nid: u32, gen: u64 },
    /// Free page reporting's delayed work expires: one pass ([`Mm::page_reporting_process`],
    /// §32.2), run at this instant (the kworker's CPU time and the wait for the host are not
    /// modelled).
    PageReporting,
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Event {
    time: u64,
    seq: u64,
    kind: EventKind,
}

/// The engine.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Engine {
    pub mm: Mm,
    pub cost: CostModel,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<Event>>,
    cpus: Vec<Cpu>,
    tasks: Vec<Task>,
    seed: u64,
    next_pid: u32,
    /// Each node's kswapd and kcompactd thread, indexed by nid.
    pub kswapd: Vec<TaskId>,
    pub kcompactd: Vec<TaskId>,
    /// Tick period (PCP decay and samplers).
    pub tick_ns: u64,
    /// Called at every tick with the engine's time (samplers). Not in a checkpoint: whoever
    /// continues one installs its own.
    #[serde(skip)]
    tick_hooks: Vec<TickHook>,
    /// Wake-ups handled (for tests and reports).
    pub kswapd_wakes: u64,
    pub kcompactd_wakes: u64,
    /// How CPUs pick their next task.
    pub sched: Sched,
    /// Tasks created asleep that start `delay` ns after every task of their list has exited
    /// (`[[workload.task]] after`, [`Engine::gate`]).
    gated: Vec<(TaskId, Vec<TaskId>, u64)>,
    /// `[run] debug_vm` in a timed run: check the model's invariants every this many task
    /// steps (0: never); [`Engine::run`] stops at the first violation.
    pub check_every: u64,
    /// Task steps run (all tasks, kernel threads included) and invariant checks made.
    pub steps: u64,
    pub checks: u64,
    /// The first violation found: the step count and time after which it was found.
    pub violation: Option<(u64, u64, fraglab_mm::debug_vm::InvariantViolation)>,
    /// Free page reporting (§32): a pass is scheduled and has not run yet (the delayed work is
    /// pending, so another request does not queue it again).
    reporting_pending: bool,
    /// The contended locks and their lock_stat figures ([`crate::lock`]).
    pub locks: Locks,
    /// The binding every task spawned from now on gets (a workload's `numa_node` and
    /// `mempolicy`); the default runs anywhere with the local policy.
    pub spawn_binding: Binding,
    /// Fragmentation blame (issue 37): the source tags (index 0: `kernel`) and the tag the
    /// tasks spawned next get ([`Engine::set_spawn_tag`]; a task spawned by a running task
    /// inherits that task's tag when blame is on).
    tags: Vec<String>,
    spawn_tag: u32,
}

impl Engine {
    /// An engine around `mm` with `seed`; creates the kswapd and kcompactd threads (asleep:
    /// kswapd until woken, kcompactd until woken or its first timeout).
    pub fn new(mm: Mm, cost: CostModel, seed: u64) -> Engine {
        let nr_cpus = mm.nr_cpus as usize;
        let mut e = Engine {
            mm,
            cost,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            cpus: (0..nr_cpus).map(|_| Cpu::default()).collect(),
            tasks: Vec::new(),
            seed,
            next_pid: 100,
            kswapd: Vec::new(),
            kcompactd: Vec::new(),
            tick_ns: SEC,
            tick_hooks: Vec::new(),
            kswapd_wakes: 0,
            kcompactd_wakes: 0,
            sched: Sched::Fifo,
            gated: Vec::new(),
            check_every: 0,
            steps: 0,
            checks: 0,
            violation: None,
            reporting_pending: false,
            locks: Locks::default(),
            spawn_binding: Binding::default(),
            tags: vec!["kernel".to_string()],
            spawn_tag: 0,
        };
        // Node 0's threads first (pids 60 and 61), then each further node's (pids 64, 65, ...;
        // the model allows 16 nodes, so they stay below the workload's pids from 100).
        for nid in 0..e.mm.numa.nr_nodes {
            let (ks_pid, kc_pid) = if nid == 0 {
                (60, 61)
            } else {
                (62 + 2 * nid, 63 + 2 * nid)
            };
            let ks = e.add_task(Box::new(KswapdTask::new(nid)), TaskState::Waiting, ks_pid);
            let kc = e.add_task(Box::new(KcompactdTask::new(nid)), TaskState::Waiting, kc_pid);
            if e.mm.numa.multi() && e.mm.numa.nr_cpus_node(nid) > 0 {
                // A node's kernel threads run on its CPUs (`kthread_bind_mask(cpumask_of_node)`).
                e.tasks[ks].node = Some(nid);
                e.tasks[kc].node = Some(nid);
            }
            e.kswapd.push(ks);
            e.kcompactd.push(kc);
            let k = &mut e.mm.compact.kcompactd[nid as usize];
            k.threaded = true;
            if let Some(t) = k.next_timeout_ms {
                e.schedule_timer(kc, t * MS);
            }
        }
        e.schedule(e.tick_ns, EventKind::Tick);
        // Free page reporting: the device registered at boot and asked for its first pass
        // (§32.1); other wake-ups left by boot are handled as before, after the first step.
        if e.mm.outbox.wakeups.contains(&Wakeup::PageReporting) {
            e.mm.outbox.wakeups.retain(|w| *w != Wakeup::PageReporting);
            e.schedule_page_reporting();
        }
        e
    }

    /// `schedule_delayed_work(&prdev->work, PAGE_REPORTING_DELAY)`: a pass 2 s from now,
    /// unless one is pending.
    fn schedule_page_reporting(&mut self) {
        if !self.reporting_pending {
            self.reporting_pending = true;
            let at = self.now + fraglab_mm::page_reporting::PAGE_REPORTING_DELAY_MS * MS;
            self.schedule(at, EventKind::PageReporting);
        }
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    fn add_task(&mut self, body: Box<dyn TaskBody>, state: TaskState, pid: u32) -> TaskId {
        let id = self.tasks.len();
        let stream = self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (id as u64).wrapping_add(1);
        self.tasks.push(Task {
            daemon: false,
            body,
            pid,
            state,
            gen: 0,
            rng: ChaCha8Rng::seed_from_u64(stream),
            stats: TaskStats {
                start_ns: self.now,
                ..Default::default()
            },
            ready_since: self.now,
            vruntime: 0,
            sleep_rel: 0,
            sleep_since: self.now,
            node: self.spawn_binding.node,
            mempolicy: self.spawn_binding.mempolicy,
            tag: self.spawn_tag,
            blame_src: NO_BLAME_SOURCE,
        });
        id
    }

    /// Whether task `id` may run on `cpu` (its node binding).
    #[inline]
    fn allowed(&self, id: TaskId, cpu: usize) -> bool {
        match self.tasks[id].node {
            None => true,
            Some(n) => self.mm.numa.cpu_to_node(cpu as u32) == n,
        }
    }

    /// Starts a task now (runnable at once). Returns its id; its pid is assigned in creation
    /// order from 100.
    pub fn spawn(&mut self, body: Box<dyn TaskBody>) -> TaskId {
        let pid = self.next_pid;
        self.next_pid += 1;
        let id = self.add_task(body, TaskState::Sleeping, pid);
        self.make_ready(id);
        id
    }

    /// Fragmentation blame (issue 37): the tasks spawned from now on (outside a task's step)
    /// are attributed to `tag` — the generator that makes them, e.g. `kbuild[0]`.
    pub fn set_spawn_tag(&mut self, tag: &str) {
        self.spawn_tag = match self.tags.iter().position(|t| t == tag) {
            Some(i) => i as u32,
            None => {
                self.tags.push(tag.to_string());
                (self.tags.len() - 1) as u32
            }
        };
    }

    /// Starts a background task (a flusher) now; `workload_done` does not wait for it.
    pub fn spawn_daemon(&mut self, body: Box<dyn TaskBody>) -> TaskId {
        let id = self.spawn(body);
        self.tasks[id].daemon = true;
        id
    }

    /// Makes task `id` background load: `workload_done` no longer waits for it (a task
    /// program's `background = true`; the run ends when the others are done).
    pub fn set_daemon(&mut self, id: TaskId) {
        self.tasks[id].daemon = true;
    }

    /// Starts a task at time `at` (≥ now).
    pub fn spawn_at(&mut self, at: u64, body: Box<dyn TaskBody>) -> TaskId {
        let pid = self.next_pid;
        self.next_pid += 1;
        let id = self.add_task(body, TaskState::Sleeping, pid);
        self.tasks[id].stats.start_ns = at;
        self.schedule_timer(id, at.saturating_sub(self.now));
        id
    }

    /// Creates a task that does not start until [`Engine::gate`] releases it (its pid is
    /// assigned now, in creation order, as [`Engine::spawn_at`] assigns it).
    pub fn spawn_gated(&mut self, body: Box<dyn TaskBody>) -> TaskId {
        let pid = self.next_pid;
        self.next_pid += 1;
        self.add_task(body, TaskState::Sleeping, pid)
    }

    /// Starts task `id` (made by [`Engine::spawn_gated`]) `delay` ns after every task of
    /// `after` has exited (at once, `delay` from now, if they all have).
    pub fn gate(&mut self, id: TaskId, after: Vec<TaskId>, delay: u64) {
        self.gated.push((id, after, delay));
        let now = self.now;
        self.start_gated(now);
    }

    /// Starts the gated tasks whose tasks to wait for have all exited (the last at `end`).
    fn start_gated(&mut self, end: u64) {
        let tasks = &self.tasks;
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.gated)
            .into_iter()
            .partition(|(_, after, _)| after.iter().all(|&d| tasks[d].state == TaskState::Exited));
        self.gated = waiting;
        for (id, _, delay) in ready {
            let at = end + delay;
            self.tasks[id].stats.start_ns = at;
            let gen = self.tasks[id].gen;
            self.schedule(at, EventKind::Timer { task: id, gen });
        }
    }

    pub fn task_stats(&self, id: TaskId) -> TaskStats {
        self.tasks[id].stats
    }

    pub fn task_state(&self, id: TaskId) -> TaskState {
        self.tasks[id].state
    }

    pub fn task_pid(&self, id: TaskId) -> u32 {
        self.tasks[id].pid
    }

    /// Registers a function called at every tick.
    pub fn on_tick(&mut self, f: TickHook) {
        self.tick_hooks.push(f);
    }

    fn schedule(&mut self, at: u64, kind: EventKind) {
        self.seq += 1;
        self.queue.push(Reverse(Event {
            time: at,
            seq: self.seq,
            kind,
        }));
    }

    fn schedule_timer(&mut self, task: TaskId, after: u64) {
        let gen = self.tasks[task].gen;
        self.schedule(self.now + after, EventKind::Timer { task, gen });
    }

    /// Puts a task on the run queue of the least loaded CPU (an idle one first, lowest index
    /// on ties) and starts that CPU if it is idle.
    fn make_ready(&mut self, id: TaskId) {
        let cpu = (0..self.cpus.len())
            .filter(|&c| self.allowed(id, c))
            .min_by_key(|&c| (self.cpus[c].busy as usize + self.cpus[c].runq.len(), c))
            .unwrap();
        let t = &mut self.tasks[id];
        debug_assert_ne!(t.state, TaskState::Ready);
        t.state = TaskState::Ready;
        t.gen += 1;
        t.ready_since = self.now;
        if self.sched == Sched::Fair {
            // Placement: where the task left off relative to its CPU's minimum, less what the
            // minimum advanced while it slept (about the sleep divided among the CPU's runnable
            // tasks), but no further back than the sleeper credit.
            let c = &self.cpus[cpu];
            let nr = (c.busy as i64 + c.runq.len() as i64).max(1);
            // A kernel thread can be woken while its last step is still being charged (its
            // state changes when the step starts), before `sleep_since`: it did not sleep.
            let slept = self.now.saturating_sub(t.sleep_since) as i64;
            let rel = (t.sleep_rel - slept / nr).max(-(SLEEPER_CREDIT_NS as i64));
            t.vruntime = c.min_vruntime.saturating_add_signed(rel);
        }
        self.cpus[cpu].runq.push_back(id);
        if !self.cpus[cpu].busy {
            self.cpus[cpu].busy = true;
            self.schedule(self.now, EventKind::CpuFree(cpu as u32));
        }
    }

    /// Wakes a waiting kernel thread now (cancelling its timeout); no effect on a runnable one.
    fn wake(&mut self, id: TaskId) {
        if matches!(self.tasks[id].state, TaskState::Waiting | TaskState::Sleeping) {
            self.make_ready(id);
        }
    }

    /// Hands mm's wake-up requests to the threads they name.
    fn handle_wakeups(&mut self) {
        for w in self.mm.take_wakeups() {
            match w {
                Wakeup::Kswapd { nid, .. } => {
                    self.kswapd_wakes += 1;
                    self.wake(self.kswapd[nid as usize]);
                }
                Wakeup::Kcompactd { nid, .. } => {
                    self.kcompactd_wakes += 1;
                    self.wake(self.kcompactd[nid as usize]);
                }
                Wakeup::PageReporting => self.schedule_page_reporting(),
            }
        }
    }

    /// Idle balancing, simplified from the scheduler's `sched_balance_newidle` (kernel/sched/
    /// fair.c): a CPU whose run queue is empty takes a task that is waiting *now* on another
    /// CPU's queue — from the CPU with the most such tasks (lowest index on ties), the most
    /// recently queued one (the least cache-hot). A task whose step another CPU is still
    /// charging sits on that CPU's queue with `ready_since` in the future and is not taken.
    /// Without this a task moves only when it wakes, and three compile jobs that never sleep
    /// stay on one CPU while the other idles. Simplified: no migration cost, no `avg_idle`
    /// test, no periodic balancing between two busy CPUs (placement at wake-up does that).
    fn pull_queued(&mut self, cpu: usize) -> Option<TaskId> {
        let now = self.now;
        // Only tasks allowed on this CPU (their node binding) can be pulled.
        let takes = |t: TaskId| self.tasks[t].ready_since <= now && self.allowed(t, cpu);
        let src = (0..self.cpus.len())
            .filter(|&c| c != cpu)
            .map(|c| (self.cpus[c].runq.iter().filter(|&&t| takes(t)).count(), c))
            .filter(|&(n, _)| n > 0)
            .max_by_key(|&(n, c)| (n, Reverse(c)))?
            .1;
        let pos = self.cpus[src].runq.iter().rposition(|&t| takes(t))?;
        let id = self.cpus[src].runq.remove(pos)?;
        if self.sched == Sched::Fair {
            // Keep the task's place relative to its queue's minimum.
            let t = &mut self.tasks[id];
            let rel = t.vruntime as i64 - self.cpus[src].min_vruntime as i64;
            t.vruntime = self.cpus[cpu].min_vruntime.saturating_add_signed(rel);
        }
        Some(id)
    }

    fn run_cpu(&mut self, cpu: usize) {
        let next = match self.sched {
            Sched::Fifo => self.cpus[cpu].runq.pop_front(),
            Sched::Fair => {
                // The least virtual runtime; the earliest queued on ties.
                let tasks = &self.tasks;
                let q = &self.cpus[cpu].runq;
                let pos = (0..q.len()).min_by_key(|&i| (tasks[q[i]].vruntime, i));
                pos.and_then(|i| self.cpus[cpu].runq.remove(i))
            }
        };
        let Some(id) = next.or_else(|| self.pull_queued(cpu)) else {
            self.cpus[cpu].busy = false;
            return;
        };
        if self.sched == Sched::Fair {
            let c = &mut self.cpus[cpu];
            c.min_vruntime = c.min_vruntime.max(self.tasks[id].vruntime);
        }
        let switch = if self.cpus[cpu].last != Some(id) {
            self.cost.context_switch_ns
        } else {
            0
        };
        self.cpus[cpu].last = Some(id);
        let now = self.now;
        let task = &mut self.tasks[id];
        task.stats.runq_wait_ns += now - task.ready_since;
        self.mm.cur.now_ns = now;
        self.mm.cur.pid = task.pid;
        self.mm.cur.mempolicy = task.mempolicy;
        let comm = task.body.comm().to_string();
        if let Some(b) = self.mm.blame.as_deref_mut() {
            // Issue 37: one store per switch (the source is interned at the task's first step);
            // tasks this step spawns inherit its generator tag.
            if task.blame_src == NO_BLAME_SOURCE {
                task.blame_src = b.intern(&format!("{} {comm}", self.tags[task.tag as usize]));
            }
            b.cur = task.blame_src;
            self.spawn_tag = task.tag;
        }
        if self.mm.cur.comm != comm {
            self.mm.cur.comm = comm;
        }
        self.locks.prune(now);
        self.mm.cur.drain_mutex_held = self.locks.held_at(LockId::PcpDrain, now);
        // Async compaction's trylocks see the holds other steps laid out (§24.5).
        let busy = self.mm.cur.locks_busy.get_or_insert_with(Default::default);
        busy.costs = self.cost.compact_costs();
        busy.elapsed_ns = 0;
        self.locks.busy_into(LockId::Zone, &mut busy.zone);
        self.locks.busy_into(LockId::Lru, &mut busy.lru);
        let zone_lock_mark = self.mm.work.zone_lock;
        let mut cx = Cx {
            mm: &mut self.mm,
            now,
            cpu: cpu as u32,
            pid: task.pid,
            cost: &self.cost,
            rng: &mut task.rng,
            locks: &mut self.locks,
            clock: now + switch,
            waited: 0,
            zone_lock_mark,
        };
        let step = task.body.step(&mut cx);
        cx.settle();
        let waited = cx.waited;
        // Free page reporting (§32.3 item 6): host faults of pages the step wrote that it did
        // not charge itself (a fault charges its own) cost the step's CPU that much longer.
        let host = self.mm.take_host_faults() * self.cost.host_fault_ns;
        // The step's CPU time, its context switch, and its waits (a spinning CPU stays busy;
        // writeback waits are kept on the CPU too, as before: docs/costs.md).
        let busy = step.ran() + switch + waited + host;
        task.stats.wait_ns += waited;
        self.steps += 1;
        let task = &mut self.tasks[id];
        task.stats.cpu_ns += busy;
        task.stats.steps += 1;
        task.vruntime += busy;
        if !matches!(step, Step::Ran(_)) {
            task.sleep_rel = task.vruntime as i64 - self.cpus[cpu].min_vruntime as i64;
            task.sleep_since = now + busy;
        }
        let end = now + busy;
        match step {
            Step::Ran(_) => {
                task.ready_since = end;
                self.cpus[cpu].runq.push_back(id);
            }
            Step::Sleep { sleep, .. } => {
                task.state = TaskState::Sleeping;
                task.gen += 1;
                let gen = task.gen;
                self.schedule(end + sleep, EventKind::Timer { task: id, gen });
            }
            Step::Wait { timeout, .. } => {
                task.state = TaskState::Waiting;
                task.gen += 1;
                let gen = task.gen;
                if let Some(nid) = self.kcompactd.iter().position(|&k| k == id) {
                    // kcompactd stays off its wait queue while its work is charged: the wait
                    // (and its timeout) begins when the step ends.
                    self.schedule(end, EventKind::KcompactdWait { nid: nid as u32, gen });
                } else if let Some(t) = timeout {
                    self.schedule(end + t, EventKind::Timer { task: id, gen });
                }
            }
            Step::Exit(_) => {
                task.state = TaskState::Exited;
                task.stats.exit_ns = Some(end);
            }
        }
        self.schedule(end, EventKind::CpuFree(cpu as u32));
        if matches!(step, Step::Exit(_)) && !self.gated.is_empty() {
            self.start_gated(end);
        }
        self.handle_wakeups();
    }

    /// Runs events until virtual time `until` (events at `until` included) or until `done`
    /// says so (checked after every event). Returns the time reached. With `check_every` set,
    /// the invariants are checked after every `check_every`-th task step (`CONFIG_DEBUG_VM`'s
    /// `VM_BUG_ON`s, docs/model's debug-vm checker: [`Mm::check_invariants`]); the first
    /// violation stops the run and is kept in `violation`.
    pub fn run(&mut self, until: u64, mut done: impl FnMut(&Engine) -> bool) -> u64 {
        let mut checked_at = self.steps;
        while let Some(Reverse(ev)) = self.queue.peek().copied() {
            if ev.time > until {
                self.now = until;
                break;
            }
            self.queue.pop();
            self.now = ev.time;
            match ev.kind {
                EventKind::CpuFree(c) => self.run_cpu(c as usize),
                EventKind::Timer { task, gen } => {
                    let t = &self.tasks[task];
                    if t.gen == gen && matches!(t.state, TaskState::Sleeping | TaskState::Waiting) {
                        if let Some(nid) = self.kcompactd.iter().position(|&k| k == task) {
                            self.mm.kcompactd_timed_out(nid as u32);
                        }
                        self.make_ready(task);
                    }
                }
                EventKind::KcompactdWait { nid, gen } => {
                    let kc = self.kcompactd[nid as usize];
                    let t = &self.tasks[kc];
                    if t.gen == gen && t.state == TaskState::Waiting {
                        self.mm.cur.now_ns = self.now;
                        self.mm.cur.pid = t.pid;
                        let comm = t.body.comm();
                        if self.mm.cur.comm != comm {
                            self.mm.cur.comm = comm.to_string();
                        }
                        if let Some(ms) = self.mm.kcompactd_wait(nid) {
                            self.schedule_timer(kc, ms * MS);
                        }
                    }
                }
                EventKind::PageReporting => {
                    self.reporting_pending = false;
                    self.mm.cur.now_ns = self.now;
                    self.mm.page_reporting_process();
                    // Work nobody charged (none is expected: the pass writes no page).
                    self.mm.take_host_faults();
                    self.handle_wakeups();
                }
                EventKind::Tick => {
                    let before = self.mm.work.zone_lock;
                    for cpu in 0..self.mm.nr_cpus {
                        for zi in 0..self.mm.zones.len() {
                            if self.mm.zones[zi].populated() {
                                self.mm.decay_pcp_high(cpu, zi);
                            }
                        }
                    }
                    // The vmstat worker's `free_pcppages_bulk` calls hold the zone lock now
                    // (one after the other; no task is charged for them).
                    let after = self.mm.work.zone_lock;
                    if after.acquisitions > before.acquisitions {
                        self.locks.prune(self.now);
                        let hold = (after.chunks - before.chunks) * self.cost.zone_lock_chunk_ns;
                        self.locks.acquire(
                            LockId::Zone,
                            self.now,
                            hold,
                            after.acquisitions - before.acquisitions,
                        );
                    }
                    let now = self.now;
                    for h in &mut self.tick_hooks {
                        h(now, &mut self.mm);
                    }
                    self.schedule(now + self.tick_ns, EventKind::Tick);
                }
            }
            if self.check_every > 0 && self.steps != checked_at && self.steps.is_multiple_of(self.check_every)
            {
                checked_at = self.steps;
                if !self.check_now() {
                    break;
                }
            }
            if done(self) {
                break;
            }
        }
        self.now
    }

    /// Checks the model's invariants now (counted in `checks`); a violation is kept in
    /// `violation` (the first one only). Returns whether they hold.
    pub fn check_now(&mut self) -> bool {
        self.checks += 1;
        match self.mm.check_invariants() {
            Ok(_) => true,
            Err(v) => {
                self.violation.get_or_insert((self.steps, self.now, v));
                false
            }
        }
    }

    /// The expected end of the workload ([`run_expected_end`] over its live tasks'
    /// [`TaskBody::progress`]), within `[now, cap]`; `None` when a live task cannot tell.
    pub fn expected_end(&self, cap: u64) -> Option<u64> {
        let now = self.now;
        run_expected_end(
            now,
            cap,
            self.tasks
                .iter()
                .enumerate()
                .filter(|&(i, t)| self.is_workload(i) && t.state != TaskState::Exited)
                .map(|(_, t)| {
                    t.body
                        .progress()
                        .and_then(|p| p.expected_end(t.stats.start_ns, now))
                }),
        )
    }

    /// Whether task `i` is one `workload_done` waits for (not a kernel thread, not a daemon).
    fn is_workload(&self, i: TaskId) -> bool {
        !self.kswapd.contains(&i) && !self.kcompactd.contains(&i) && !self.tasks[i].daemon
    }

    /// Starts the model's kdamond (`[damon]`, docs/model §27) now: a kernel thread (pid 62,
    /// not waited for by `workload_done`) that runs one sample interval of
    /// [`fraglab_mm::damon::Kdamond::step`] per step and sleeps the interval it returns. Created
    /// only when DAMON is on, after the workload's tasks, so runs without it keep their task
    /// ids and random streams.
    pub fn start_kdamond(&mut self, cfg: fraglab_mm::damon::DamonConfig) -> TaskId {
        let kd = fraglab_mm::damon::Kdamond::new(cfg, &self.mm, self.seed);
        let id = self.add_task(Box::new(KdamondTask(kd)), TaskState::Sleeping, 62);
        self.tasks[id].daemon = true;
        self.make_ready(id);
        id
    }

    /// Whether every task spawned by the workload (not the kernel threads) has exited.
    pub fn workload_done(&self) -> bool {
        self.tasks
            .iter()
            .enumerate()
            .all(|(i, t)| !self.is_workload(i) || t.state == TaskState::Exited)
    }
}

/// A node's kswapd thread (§10.2): one `kswapd_run` per step, the 100 ms nap as a timed
/// wait, then sleep until woken.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct KswapdTask {
    nid: u32,
    comm: String,
}

impl KswapdTask {
    fn new(nid: u32) -> KswapdTask {
        KswapdTask {
            nid,
            comm: format!("kswapd{nid}"),
        }
    }
}

/// `HZ/10`: kswapd's nap.
pub const KSWAPD_NAP_NS: u64 = 100 * MS;

impl TaskBody for KswapdTask {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::Kswapd(self))
    }

    fn comm(&self) -> &str {
        &self.comm
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        match cx.mm.reclaim.kswapd[self.nid as usize].phase {
            KswapdPhase::Running => {
                let folios_before = cx.mm.reclaim.reclaimed_folios;
                let c = cx.mm.kswapd_run(self.nid);
                let folios = cx.mm.reclaim.reclaimed_folios - folios_before;
                let ran = cx
                    .reclaim(c.scanned.max(c.reclaimed), folios)
                    .max(cx.cost.context_switch_ns);
                if c.napping {
                    Step::Wait {
                        ran,
                        timeout: Some(KSWAPD_NAP_NS),
                    }
                } else {
                    Step::Ran(ran)
                }
            }
            KswapdPhase::Napping { .. } => {
                let c = cx.mm.kswapd_nap_done(self.nid);
                if c.asleep {
                    Step::Wait {
                        ran: 0,
                        timeout: None,
                    }
                } else {
                    Step::Ran(0)
                }
            }
            KswapdPhase::Sleeping => Step::Wait {
                ran: 0,
                timeout: None,
            },
        }
    }
}

/// The kcompactd thread (§9.11.5, §26.2): one pass of its loop per step (`kcompactd_run`);
/// the wait that follows begins when the step's cost has been charged
/// ([`EventKind::KcompactdWait`]), so wake-ups during the work find it awake.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct KcompactdTask {
    nid: u32,
    comm: String,
}

impl KcompactdTask {
    fn new(nid: u32) -> KcompactdTask {
        KcompactdTask {
            nid,
            comm: format!("kcompactd{nid}"),
        }
    }
}

impl TaskBody for KcompactdTask {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::Kcompactd(self))
    }

    fn comm(&self) -> &str {
        &self.comm
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let c = cx.mm.kcompactd_run(self.nid);
        // CPU time; its writeback and lock waits are the engine's (`Cx::waited`).
        Step::Wait {
            ran: cx.compaction(&c.stats),
            timeout: None,
        }
    }
}

/// The kdamond thread (§27.2): one sample interval of `kdamond_fn` per step, then sleep for the
/// sample interval (or the watermarks' interval while the scheme is inactive). Its CPU time is a
/// context switch per step plus the reclaim cost of what `reclaim_pages` freed (simplified: the
/// sampling and region walks are not charged).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct KdamondTask(pub fraglab_mm::damon::Kdamond);

impl TaskBody for KdamondTask {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::Kdamond(self))
    }

    fn comm(&self) -> &str {
        "kdamond.0"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let folios_before = cx.mm.reclaim.reclaimed_folios;
        let freed_before = self.0.stats.sz_applied;
        self.0.cpu = cx.cpu;
        let sleep = self.0.step(cx.mm, cx.now);
        let pages = (self.0.stats.sz_applied - freed_before) / 4096;
        let folios = cx.mm.reclaim.reclaimed_folios - folios_before;
        let ran = cx.reclaim(pages, folios).max(cx.cost.context_switch_ns);
        Step::Sleep { ran, sleep }
    }
}
