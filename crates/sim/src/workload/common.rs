//! What the generators share: the cost of a fault and of a buffered write, touching a range
//! of an anonymous mapping, a file's dentry and inode, the step sizes, and the run's writeback
//! flusher for page-cache workloads.

use fraglab_mm::slowpath::{MeasureWork, WorkSum};
use fraglab_mm::Mm;

use crate::anon::{AnonVma, Touch};
use crate::cost::{Charge, CostModel};
use crate::engine::{Cx, Progress, Step, TaskBody, MS};
use crate::metrics::Metrics;
use crate::slab::{Obj, SlabCache};

/// Pages touched, read or written per step, so that tasks interleave.
pub const CHUNK: u64 = 64;

/// The longest step a `compute` step of a `[[workload.task]]` takes at once (a kbuild job's
/// compile slice is the same).
pub const COMPUTE_SLICE_NS: u64 = 10 * MS;

/// A step measures the allocation work of its model calls with `cx.measure(|cx| ...)`.
impl MeasureWork for Cx<'_> {
    fn work_sum(&self) -> WorkSum {
        self.mm.work_sum()
    }
}

/// The CPU cost of a fault that mapped an order-`order` folio (zeroed) after `work`.
pub fn fault_cost(cost: &CostModel, order: u32, pt: bool, work: &WorkSum) -> u64 {
    fault_charge(cost, order, pt, cost.alloc_charge(work)).cpu_ns()
}

/// A fault's own CPU cost, beyond its allocation work: the fault itself and the zeroing of its
/// folio (and page-table page). A term added here is part of every fault's CPU time and so of
/// its wall time ([`fault_charge`]).
#[inline]
fn fault_own_ns(cost: &CostModel, order: u32, pt: bool) -> u64 {
    cost.fault_base_ns + (1u64 << order) * cost.zero_page_ns + (pt as u64) * cost.zero_page_ns
}

/// A fault as the timed engine charges it: its allocation work (`alloc`, [`Charge`] phases:
/// fast paths, compaction, reclaim, drain) with the fault's own work
/// ([`fault_own_ns`]) in its first phase.
#[inline]
pub fn fault_charge(cost: &CostModel, order: u32, pt: bool, mut alloc: Charge) -> Charge {
    alloc.base.cpu_ns += fault_own_ns(cost, order, pt);
    alloc
}

/// What [`touch_range`] took: CPU time, wall time (CPU and the faults' waits) and the faults
/// that mapped a PMD THP.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub huge: u64,
}

/// Touches every page of `[start, start+n)` of `vma`, recording each fault's latency: its wall
/// time from start to return (`Cx::charge`: its CPU time and the waits the model has inside
/// it — contended locks, writeback waits of its compaction) and its CPU time. The step's
/// waits go to `cx.waited` (the engine adds them to the step), so a caller returns
/// `Step::Ran(cpu_ns)`.
pub fn touch_range(cx: &mut Cx, vma: &mut AnonVma, start: u64, n: u64, metrics: &mut Metrics) -> Touched {
    let mut done = Touched::default();
    let end = (start + n).min(vma.nr_pages);
    let mut p = start;
    // Page by page, except that a hit's run of pages of the same folio, and a run of faults
    // served alike (`AnonVma::touch_run`), are one step: `run` equal faults are recorded as
    // `run` single ones (the first carries the run's allocator lock holds, if any).
    while p < end {
        let (t, run) = vma.touch_run(cx.mm, cx.cpu, p, end);
        p += run;
        match t {
            Touch::Hit => {}
            Touch::Fault {
                order,
                pt,
                work,
                host,
            } => {
                let path = work.path();
                let mut c = fault_charge(cx.cost, order, pt, work.charge(cx.cost));
                // Free page reporting (§32.3 item 6): host faults of the pages the fault
                // wrote, in its time and recorded apart (0 without a device).
                if host > 0 {
                    let h = host * cx.cost.host_fault_ns;
                    c.base.cpu_ns += h;
                    metrics.host_faults(order, path, h, run);
                }
                let first = cx.charge(&c);
                metrics.fault(order, path, first.wall(), first.cpu);
                done.cpu_ns += first.cpu;
                done.wall_ns += first.wall();
                if run > 1 {
                    let mut rest = cx.charge(&c);
                    if run > 2 && rest.wait == 0 && c.is_plain() {
                        // The others are alike, with nothing to wait for.
                        let more = cx.cpu(c.cpu_ns() * (run - 2));
                        metrics.faults(order, path, rest.cpu, rest.cpu, run - 1);
                        rest.cpu += more.cpu;
                    } else {
                        metrics.fault(order, path, rest.wall(), rest.cpu);
                        for _ in 2..run {
                            let s = cx.charge(&c);
                            metrics.fault(order, path, s.wall(), s.cpu);
                            rest.cpu += s.cpu;
                            rest.wait += s.wait;
                        }
                    }
                    done.cpu_ns += rest.cpu;
                    done.wall_ns += rest.wall();
                }
                done.huge += (order == fraglab_mm::types::HPAGE_PMD_ORDER) as u64 * run;
            }
            Touch::Failed { work, host } => {
                metrics.failed_faults += 1;
                // The fault and its allocation work (and host faults, §32), nothing mapped or
                // zeroed.
                let mut c = work.charge(cx.cost);
                c.base.cpu_ns += cx.cost.fault_base_ns + host * cx.cost.host_fault_ns;
                let s = cx.charge(&c);
                done.cpu_ns += s.cpu;
                done.wall_ns += s.wall();
            }
        }
    }
    done
}

/// A new file's dentry and inode (`d_alloc` and the filesystem's `alloc_inode`), or neither:
/// when one of the two slab allocations fails the other object is freed again, as the
/// kernel's error path does before the create or lookup fails.
pub fn alloc_file_objs(
    dentry: &mut SlabCache,
    inode: &mut SlabCache,
    mm: &mut Mm,
    cpu: u32,
) -> Option<(Obj, Obj)> {
    let d = dentry.alloc(mm, cpu);
    let i = inode.alloc(mm, cpu);
    match (d, i) {
        (Some(d), Some(i)) => return Some((d, i)),
        (Some(d), None) => {
            dentry.free(mm, cpu, d);
        }
        (None, Some(i)) => {
            inode.free(mm, cpu, i);
        }
        (None, None) => {}
    }
    None
}

/// The length of the decimal name of file `n` (the host engine names a set's and a `slab`
/// step's files by their index: crates/host worker.rs), for its directory entry's size
/// (docs/model §33.3 item 1).
pub fn decimal_len(n: u64) -> u32 {
    n.checked_ilog10().map_or(1, |l| l + 1)
}

/// The CPU cost of a buffered write, charged at the step's clock (`Cx::charge`, its lock and
/// writeback waits going to `cx.waited`): every folio allocation attempt's work, in order,
/// then the copy from user space (one page copy each, `zero_page_ns`).
pub fn write_cost(cx: &mut Cx, st: &fraglab_mm::filemap::WriteStats, pages: u64) -> u64 {
    let mut work = 0;
    for a in &st.attempts {
        work += cx.alloc_attempt(&a.work);
    }
    work + cx.cpu(pages * cx.cost.zero_page_ns).cpu
}

/// The writeback flusher for page-cache workloads (until `until_ns`): every 100 ms it submits
/// for writeback the folios dirty for longer than `vm.dirty_expire_centisecs` (default 30 s)
/// and, above the background threshold (`vm.dirty_background_ratio`, default 10 %), the oldest
/// dirty folios down to it. The writes take the device's time (`write_io_ns` per 128 KiB, one
/// queue: `fraglab_mm::writeback`), the folios staying under writeback until then; each wake
/// retires completed writes from `nr_writeback`. Simplifications: submission costs the flusher
/// `free_page_ns` per page; the expiry is checked every 100 ms rather than every
/// `dirty_writeback_centisecs` (the kernel also wakes the flusher as soon as the background
/// threshold is crossed).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct PageCacheFlusher {
    pub until_ns: u64,
}

impl TaskBody for PageCacheFlusher {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::PageCacheFlusher(self))
    }

    fn comm(&self) -> &str {
        "kworker/u4:flush"
    }

    fn progress(&self) -> Option<Progress> {
        Some(Progress::until(self.until_ns))
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        if cx.now >= self.until_ns {
            return Step::Exit(0);
        }
        // Every 100 ms: jbd2's due commits (kjournald2's timer, docs/model §33.3 item 4),
        // completions, expired folios, then background writeback down to the background
        // threshold.
        cx.mm.jbd2_tick(cx.cpu);
        cx.mm.cache.writeback.io_ns = cx.cost.write_io_ns;
        cx.mm.writeback_settle();
        let mut n = cx.mm.writeback_expired();
        let (bg, _) = cx.mm.dirty_thresholds();
        n += cx.mm.writeback_oldest(bg);
        Step::Sleep {
            ran: n * cx.cost.free_page_ns,
            sleep: 100 * MS,
        }
    }
}
