//! What the generators share: the cost of a fault and of a buffered write, touching a range
//! of an anonymous mapping, a file's dentry and inode, the step sizes, and the run's writeback
//! flusher for page-cache workloads.

use fraglab_mm::slowpath::{MeasureWork, WorkSum};
use fraglab_mm::Mm;

use crate::anon::{AnonVma, Touch};
use crate::cost::CostModel;
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

/// The cost of a fault that mapped an order-`order` folio (zeroed) after `work`.
pub fn fault_cost(cost: &CostModel, order: u32, pt: bool, work: &WorkSum) -> u64 {
    fault_cost_with(cost, order, pt, cost.alloc_work(work))
}

/// `fault_cost` given the cost of the allocation work, `alloc_ns`.
#[inline]
fn fault_cost_with(cost: &CostModel, order: u32, pt: bool, alloc_ns: u64) -> u64 {
    cost.fault_base_ns + (1u64 << order) * cost.zero_page_ns + (pt as u64) * cost.zero_page_ns + alloc_ns
}

/// Touches every page of `[start, start+n)` of `vma`, recording each fault. Returns the time
/// charged and whether any fault mapped a PMD THP.
pub fn touch_range(cx: &mut Cx, vma: &mut AnonVma, start: u64, n: u64, metrics: &mut Metrics) -> (u64, u64) {
    let mut ns = 0;
    let mut huge = 0;
    let end = (start + n).min(vma.nr_pages);
    let mut p = start;
    // Page by page, except that a hit's run of pages of the same folio, and a run of faults
    // served alike (`AnonVma::touch_run`), are one step: `run` equal faults are recorded as
    // `run` single ones.
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
                let mut c = fault_cost_with(cx.cost, order, pt, work.cost(cx.cost));
                // Free page reporting (§32.3 item 6): host faults of the pages
                // the fault wrote, in its latency and recorded apart (0 without a device).
                if host > 0 {
                    let h = host * cx.cost.host_fault_ns;
                    c += h;
                    metrics.host_faults(order, work.path(), h, run);
                }
                metrics.faults(order, work.path(), c, run);
                ns += c * run;
                huge += (order == fraglab_mm::types::HPAGE_PMD_ORDER) as u64 * run;
            }
            Touch::Failed { work, host } => {
                metrics.failed_faults += 1;
                ns += cx.cost.fault_base_ns + work.cost(cx.cost) + host * cx.cost.host_fault_ns;
            }
        }
    }
    (ns, huge)
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
/// (kernel-model.md §33.3 item 1).
pub fn decimal_len(n: u64) -> u32 {
    n.checked_ilog10().map_or(1, |l| l + 1)
}

/// The charged cost of a buffered write: the faults' zeroing of new folios' pages is the copy
/// from user space (one page copy each), plus the allocations' work.
pub fn write_cost(cx: &Cx, st: &fraglab_mm::filemap::WriteStats, pages: u64) -> u64 {
    let work: u64 = st
        .attempts
        .iter()
        .map(|a| {
            cx.cost.alloc_fast_ns
                + cx.cost.compaction(&a.work.compaction)
                + cx.cost.reclaim(a.work.reclaimed, a.work.reclaimed_folios)
                + cx.cost.drain_wait(a.work.drain_ipis as u64, a.work.drained_pages)
        })
        .sum();
    work + pages * cx.cost.zero_page_ns
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
pub struct PageCacheFlusher {
    pub until_ns: u64,
}

impl TaskBody for PageCacheFlusher {
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
        // Every 100 ms: jbd2's due commits (kjournald2's timer, kernel-model.md §33.3 item 4),
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
