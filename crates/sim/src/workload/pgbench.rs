//! `[[workload.pgbench]]`: seed 002's pgbench simple-update (seed 002's published results): the
//! clients (PostgreSQL backends), the checkpointer, and the TPS figures.

use std::cell::RefCell;
use std::rc::Rc;

use fraglab_mm::Mm;
use fraglab_spec::result::{PgbenchResult, RunResult};
use fraglab_spec::PgbenchParams;
use rand::Rng;

use super::common::{touch_range, write_cost, CHUNK};
use super::{pages_of, Generator, PageCacheFlusher, Run, Shared};
use crate::anon::AnonVma;
use crate::engine::{Cx, Progress, Step, TaskBody, MS, SEC};
use crate::metrics::Metrics;

/// The files and counters the pgbench tasks share. From the parameters: each backend's private
/// anonymous memory (`client_private`, its page tables come with it), the shared data file
/// (`data`) and the WAL segment (`wal`, written sequentially); per transaction its CPU time and
/// the bytes it writes to the data file and to the WAL, and while a checkpoint runs
/// `fpw_wal_write` WAL bytes (full-page writes after the redo point, larger group-commit
/// flushes); every `checkpoint_ns` a checkpoint of `checkpoint_bytes` in writes of
/// `checkpoint_write_bytes` (large buffered writes: costly folio orders), spread over
/// `checkpoint_spread_ns` (0: as fast as possible); the benchmark runs `duration_ns`.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PgbenchShared {
    pub p: PgbenchParams,
    pub data: u32,
    pub wal: u32,
    pub ckpt: u32,
    wal_pos: u64,
    ckpt_pos: u64,
    /// Transactions completed per simulated second.
    pub tps: Vec<u64>,
    /// Seconds during which a checkpoint was running.
    pub checkpoint_secs: std::collections::BTreeSet<u64>,
    /// A checkpoint is being written.
    pub checkpointing: bool,
    #[serde(with = "crate::checkpoint::shared")]
    metrics: Shared<Metrics>,
}

impl PgbenchShared {
    /// Registers the data, WAL and checkpoint files (XFS-like mappings).
    pub fn new(mm: &mut Mm, p: PgbenchParams, metrics: Shared<Metrics>) -> Shared<PgbenchShared> {
        use fraglab_mm::filemap::Mapping;
        let data = mm.add_mapping(Mapping::xfs_like());
        let wal = mm.add_mapping(Mapping::xfs_like());
        let ckpt = mm.add_mapping(Mapping::xfs_like());
        Rc::new(RefCell::new(PgbenchShared {
            p,
            data,
            wal,
            ckpt,
            wal_pos: 0,
            ckpt_pos: 0,
            tps: Vec::new(),
            checkpoint_secs: Default::default(),
            checkpointing: false,
            metrics,
        }))
    }
}

/// One pgbench client (a PostgreSQL backend): faults its private memory in, then runs
/// transactions until the benchmark's end: CPU, a random data-page write, a WAL append.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PgbenchClient {
    #[serde(with = "crate::checkpoint::shared")]
    shared: Shared<PgbenchShared>,
    vma: AnonVma,
    touched: u64,
}

impl PgbenchClient {
    pub fn new(shared: Shared<PgbenchShared>) -> PgbenchClient {
        let pages = pages_of(shared.borrow().p.client_private_bytes);
        PgbenchClient {
            shared,
            vma: AnonVma::new(pages.max(1), false),
            touched: 0,
        }
    }
}

impl TaskBody for PgbenchClient {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::PgbenchClient(self))
    }

    fn comm(&self) -> &str {
        "postgres"
    }

    /// Transactions run for the benchmark's duration.
    fn progress(&self) -> Option<Progress> {
        Some(Progress::until(self.shared.borrow().p.duration_ns))
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let shared = self.shared.clone();
        let mut sh = shared.borrow_mut();
        if cx.now >= sh.p.duration_ns {
            let freed = self.vma.unmap(cx.mm, cx.cpu);
            return Step::Exit(freed * cx.cost.free_page_ns);
        }
        if self.touched < self.vma.nr_pages {
            let metrics = sh.metrics.clone();
            let ns = touch_range(cx, &mut self.vma, self.touched, CHUNK, &mut metrics.borrow_mut()).cpu_ns;
            self.touched += CHUNK;
            return Step::Ran(ns);
        }
        let p = sh.p.clone();
        // balance_dirty_pages: above the dirty limit, the writer waits for writeback.
        if cx.mm.dirty_exceeded() {
            return Step::Sleep {
                ran: 0,
                sleep: 10 * MS,
            };
        }
        let page = cx.rng.gen_range(0..pages_of(p.data_bytes).max(1));
        let (data, wal) = (sh.data, sh.wal);
        let st = cx.mm.filemap_write(cx.cpu, data, page & !1, p.tx_data_bytes);
        // The transaction's CPU time, then its data write, on the step's clock.
        let mut ns = cx.cpu(p.tx_cpu_ns).cpu;
        ns += write_cost(cx, &st, p.tx_data_bytes.div_ceil(4096));
        // During a checkpoint every transaction's first change to a page logs the full page
        // (full_page_writes): the commit's WAL write is larger.
        let wal_bytes = if sh.checkpointing {
            p.fpw_wal_bytes
        } else {
            p.tx_wal_bytes
        };
        let pos = sh.wal_pos;
        sh.wal_pos = (pos + wal_bytes.div_ceil(4096)) % pages_of(p.wal_bytes).max(1);
        let st = cx.mm.filemap_write(cx.cpu, wal, pos, wal_bytes);
        ns += write_cost(cx, &st, wal_bytes.div_ceil(4096));
        // The transaction commits when its CPU work and its waits (locks) are over.
        let sec = ((cx.now + ns + cx.waited) / SEC) as usize;
        if sh.tps.len() <= sec {
            sh.tps.resize(sec + 1, 0);
        }
        sh.tps[sec] += 1;
        Step::Ran(ns)
    }
}

/// The checkpointer: every `checkpoint_ns`, writes `checkpoint_bytes` in large buffered writes
/// (the seed's checkpoint bursts: costly folio orders), then sleeps.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PgbenchCheckpointer {
    #[serde(with = "crate::checkpoint::shared")]
    shared: Shared<PgbenchShared>,
    left: u64,
    next: u64,
}

impl PgbenchCheckpointer {
    pub fn new(shared: Shared<PgbenchShared>) -> PgbenchCheckpointer {
        let next = shared.borrow().p.checkpoint_ns;
        PgbenchCheckpointer {
            shared,
            left: 0,
            next,
        }
    }
}

impl TaskBody for PgbenchCheckpointer {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::PgbenchCheckpointer(self))
    }

    fn comm(&self) -> &str {
        "postgres: checkpointer"
    }

    fn progress(&self) -> Option<Progress> {
        Some(Progress::until(self.shared.borrow().p.duration_ns))
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let mut sh = self.shared.borrow_mut();
        let p = sh.p.clone();
        if cx.now >= p.duration_ns {
            return Step::Exit(0);
        }
        if self.left == 0 {
            sh.checkpointing = false;
            if cx.now < self.next {
                return Step::Sleep {
                    ran: 0,
                    sleep: (self.next - cx.now).min(p.duration_ns - cx.now),
                };
            }
            self.left = p.checkpoint_bytes;
            self.next += p.checkpoint_ns;
        }
        if cx.mm.dirty_exceeded() {
            return Step::Sleep {
                ran: 0,
                sleep: 10 * MS,
            };
        }
        let len = self.left.min(p.checkpoint_write_bytes);
        let pages = len.div_ceil(4096);
        let pos = sh.ckpt_pos;
        let ckpt = sh.ckpt;
        // The checkpoint file is overwritten in place as a ring of the data file's size.
        sh.ckpt_pos = (pos + pages) % pages_of(p.data_bytes).max(pages);
        let st = cx.mm.filemap_write(cx.cpu, ckpt, pos, len);
        let ns = write_cost(cx, &st, pages);
        self.left -= len;
        sh.checkpointing = true;
        sh.checkpoint_secs.insert(cx.now / SEC);
        if p.checkpoint_spread_ns > 0 && self.left > 0 {
            // Paced: one write per spread / number of writes.
            let writes = p.checkpoint_bytes.div_ceil(p.checkpoint_write_bytes).max(1);
            let gap = p.checkpoint_spread_ns / writes;
            return Step::Sleep {
                ran: ns,
                sleep: gap.saturating_sub(ns),
            };
        }
        Step::Ran(ns)
    }
}

/// The `[[workload.pgbench]]` entries: per entry its clients, its checkpointer and a writeback
/// flusher of its own (until the benchmark's end).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Pgbench {
    params: Vec<PgbenchParams>,
    #[serde(with = "crate::checkpoint::shared_vec")]
    shared: Vec<Shared<PgbenchShared>>,
}

impl Pgbench {
    pub fn new(params: &[PgbenchParams]) -> Pgbench {
        Pgbench {
            params: params.to_vec(),
            shared: Vec::new(),
        }
    }
}

impl Generator for Pgbench {
    fn saved(&self) -> Option<crate::checkpoint::GeneratorRef<'_>> {
        Some(crate::checkpoint::GeneratorRef::Pgbench(self))
    }

    fn spawn(&mut self, run: &mut Run<'_>) {
        for p in &self.params {
            let shared = PgbenchShared::new(&mut run.e.mm, p.clone(), run.metrics.clone());
            for _ in 0..p.clients {
                run.e.spawn(Box::new(PgbenchClient::new(shared.clone())));
            }
            run.e.spawn(Box::new(PgbenchCheckpointer::new(shared.clone())));
            run.e.spawn(Box::new(PageCacheFlusher {
                until_ns: p.duration_ns,
            }));
            self.shared.push(shared);
        }
    }

    /// The first entry's TPS.
    fn result(&self, _: &Metrics, r: &mut RunResult) {
        r.pgbench = self.shared.first().map(|sh| pgbench_result(&sh.borrow()));
    }
}

/// Transactions per second of the benchmark's whole seconds: their mean, during checkpoints
/// and between them.
fn pgbench_result(sh: &PgbenchShared) -> PgbenchResult {
    let secs = (sh.p.duration_ns / 1_000_000_000) as usize;
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
    PgbenchResult {
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
