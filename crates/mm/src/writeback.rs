//! Writeback takes time: PG_writeback from the flusher's submission to the I/O's completion
//! (`kernel-model.md` §25.4, §19.1 item 9; mm/page-writeback.c `folio_clear_dirty_for_io`,
//! `__folio_start_writeback`, `__folio_end_writeback`).
//!
//! The flusher (the sim's `PageCacheFlusher` and kbuild's object-file `Flusher`, through
//! [`Mm::writeback_expired`] and [`Mm::writeback_oldest`]) submits a dirty page-cache folio with
//! [`Mm::folio_start_writeback`]: PG_dirty is cleared (`folio_clear_dirty_for_io`), the folio
//! joins the tail of one device queue and stays under writeback until its I/O completes. The
//! device serves the queue in order, one I/O of [`WRITEBACK_IO_PAGES`] pages (128 KiB) per
//! `write_io_ns` of the cost model (the sim sets [`WritebackQueue::io_ns`] from
//! `CostModel::write_io_ns`; 0, the default of a bare `Mm`, completes every write at once as
//! before). The folio's `writeback_end_ns` is the completion time; [`Mm::folio_test_writeback`]
//! compares it with the current time, so the state is exact at every instant.
//! [`Mm::writeback_settle`] retires completed I/Os from the `nr_writeback` gauge; the flushers
//! call it on every wake-up and wake when the queue drains, so /proc/vmstat's `nr_writeback`
//! follows the device.
//!
//! What this changes:
//! * reclaim (§10.3.6, `shrink_folio_list`): a folio under writeback is not freed; it counts
//!   in `nr_writeback` (the `mm_vmscan_lru_shrink_inactive` field) and is activated, as global
//!   reclaim does (`writeback_throttling_sane`: PG_reclaim set, `goto activate_locked`);
//!   before, a folio became clean, hence reclaimable, the moment the flusher ran;
//! * migration (§25.1 #4, §25.3): ASYNC and SYNC_LIGHT compaction do not isolate a folio
//!   under writeback; SYNC (/proc, direct at full priority) isolates it, its ASYNC first
//!   phase fails with −EBUSY and the SYNC retry waits for the end of writeback;
//! * the `nr_writeback` gauge of /proc/vmstat (NR_WRITEBACK), 0 before.
//!
//! Simplifications: one device for every mapping (the kernel has a queue per bdi); the
//! flusher submits folio by folio in its own order, not per inode; no bio merging beyond the
//! per-page share of an I/O's time; PG_reclaim and `folio_rotate_reclaimable` at completion
//! are not modelled (the folio reclaim found was activated anyway); a folio freed while under
//! writeback (the kernel's truncation would wait for it) keeps its pages in the gauge until
//! the I/O completes; `filemap_writeback_range` (msync, fadvise) still completes at once.

use crate::folio::{FolioId, FolioKind};
use crate::node::Mm;
use crate::vmstat::Stat;

/// Pages per write I/O (128 KiB: the unit `write_io_ns` is charged for, as msync's).
pub const WRITEBACK_IO_PAGES: u64 = 32;

/// The device queue of writeback I/O.
#[derive(Clone, Debug, Default)]
pub struct WritebackQueue {
    /// Service time of one I/O of [`WRITEBACK_IO_PAGES`] pages (0: writes complete at once).
    pub io_ns: u64,
    /// When the device finishes the last submitted I/O.
    pub busy_until_ns: u64,
    /// Submitted writes not yet retired from the gauge: (completion time, pages), in
    /// completion order.
    inflight: std::collections::VecDeque<(u64, u64)>,
    /// Pages under writeback (NR_WRITEBACK) as of the last settle.
    pub nr_writeback: u64,
    /// Folios and pages submitted since boot.
    pub submitted_folios: u64,
    pub submitted_pages: u64,
}

impl WritebackQueue {
    /// Host bytes of the in-flight queue (`host_mem.rs`).
    pub(crate) fn host_bytes(&self) -> u64 {
        crate::host_mem::deque_bytes(&self.inflight)
    }
}

impl Mm {
    /// PG_writeback of folio `id` now (§25.4).
    #[inline]
    pub fn folio_test_writeback(&self, id: FolioId) -> bool {
        self.folios.writeback_end_ns(id) > self.cur.now_ns
    }

    /// Submits dirty page-cache folio `id` for writeback (`folio_clear_dirty_for_io` +
    /// `__folio_start_writeback`): it becomes clean and stays under writeback until the device
    /// has served it. A folio already under writeback is skipped, as WB_SYNC_NONE writeback
    /// does (`folio_prepare_writeback`), and so is a clean one. Returns the pages submitted.
    pub fn folio_start_writeback(&mut self, id: FolioId) -> u64 {
        let f = &self.folios.folios[id as usize];
        debug_assert_eq!(f.kind, FolioKind::File, "only page-cache folios are written back");
        if !f.dirty() || self.folio_test_writeback(id) {
            return 0;
        }
        let pages = 1u64 << f.order;
        self.folio_mark_dirty(id, false);
        let now = self.cur.now_ns;
        let q = &mut self.cache.writeback;
        q.submitted_folios += 1;
        q.submitted_pages += pages;
        if q.io_ns == 0 {
            return pages;
        }
        let start = q.busy_until_ns.max(now);
        let done = start + (pages * q.io_ns).div_ceil(WRITEBACK_IO_PAGES);
        q.busy_until_ns = done;
        q.inflight.push_back((done, pages));
        q.nr_writeback += pages;
        self.stats[Stat::nr_writeback as usize] = q.nr_writeback;
        self.folios.set_writeback_end_ns(id, done);
        pages
    }

    /// Retires the I/Os completed by now from the `nr_writeback` gauge (`__folio_end_writeback`).
    /// Returns the time of the next completion, if any I/O is still in flight.
    pub fn writeback_settle(&mut self) -> Option<u64> {
        let now = self.cur.now_ns;
        let q = &mut self.cache.writeback;
        while let Some(&(done, pages)) = q.inflight.front() {
            if done > now {
                break;
            }
            q.inflight.pop_front();
            q.nr_writeback -= pages;
        }
        self.stats[Stat::nr_writeback as usize] = q.nr_writeback;
        q.inflight.front().map(|&(done, _)| done)
    }
}
