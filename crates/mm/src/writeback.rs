//! Writeback takes time: PG_writeback from the flusher's submission to the I/O's completion
//! (docs/model §25.4, §19.1 item 9; mm/page-writeback.c `folio_clear_dirty_for_io`,
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
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct WritebackQueue {
    /// Service time of one I/O of [`WRITEBACK_IO_PAGES`] pages (0: writes complete at once).
    pub io_ns: u64,
    /// When the device finishes the last submitted I/O.
    pub busy_until_ns: u64,
    /// Submitted writes not yet retired from the gauge: (completion time, pages, folio, pages
    /// queued since boot up to and including this write), in completion order (completion
    /// times strictly grow). The running total lets [`Mm::nr_writeback_now`] count the pages
    /// completed since the last settle with one binary search (host-side only).
    inflight: std::collections::VecDeque<(u64, u32, FolioId, u64)>,
    /// Pages queued in `inflight` since boot.
    queued_pages: u64,
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
        q.queued_pages += pages;
        q.inflight.push_back((done, pages as u32, id, q.queued_pages));
        q.nr_writeback += pages;
        self.stats[Stat::nr_writeback as usize] = q.nr_writeback;
        self.folios.set_writeback_end_ns(id, done);
        pages
    }

    /// Pages under writeback now: the gauge as of the last [`Mm::writeback_settle`] less the
    /// I/Os completed since (read only: the gauge itself moves at the next settle).
    pub fn nr_writeback_now(&self) -> u64 {
        let q = &self.cache.writeback;
        let now = self.cur.now_ns;
        // The pages of the writes completed by now: those queued up to the last of them,
        // less those queued before the first still in the queue.
        let k = q.inflight.partition_point(|&(end, _, _, _)| end <= now);
        let done = match (q.inflight.front(), k) {
            (Some(&(_, p, _, first)), k) if k > 0 => q.inflight[k - 1].3 - (first - p as u64),
            _ => 0,
        };
        q.nr_writeback - done
    }

    /// Retires the I/Os completed by now from the `nr_writeback` gauge (`__folio_end_writeback`).
    /// Returns the time of the next completion, if any I/O is still in flight.
    ///
    /// A retired folio's writeback end is forgotten (its side-table entry goes, `folio.rs`):
    /// a past end reads as "not under writeback" and waits for nothing, as 0 does. The entry
    /// is the folio's only if it still holds this I/O's end (completion times strictly grow,
    /// so a freed folio's id reused by another folio cannot match).
    pub fn writeback_settle(&mut self) -> Option<u64> {
        let now = self.cur.now_ns;
        let q = &mut self.cache.writeback;
        while let Some(&(done, pages, id, _)) = q.inflight.front() {
            if done > now {
                break;
            }
            q.inflight.pop_front();
            q.nr_writeback -= pages as u64;
            let live = self.folios.folios.get(id as usize).is_some_and(|f| f.live());
            if live && self.folios.writeback_end_ns(id) == done {
                self.folios.clear_writeback_end_ns(id);
            }
        }
        self.stats[Stat::nr_writeback as usize] = q.nr_writeback;
        q.inflight.front().map(|&(done, _, _, _)| done)
    }
}

#[cfg(test)]
mod tests {
    use crate::filemap::Mapping;
    use crate::folio::FolioKind;

    /// Settling forgets the writeback end of the folios whose I/O completed, and of no other:
    /// every folio answers `folio_test_writeback` as it did with the end kept, the ends still
    /// ahead are kept, a reused id's own end is left alone.
    #[test]
    fn settle_forgets_completed_ends_only() {
        let mut mm = crate::test_machines::dma32(8);
        let map = mm.add_mapping(Mapping::no_large_folios());
        for i in 0..64 {
            mm.filemap_write(0, map, i, 4096);
        }
        let ids: Vec<_> = mm
            .folios
            .live()
            .filter(|(_, f)| f.kind == FolioKind::File && f.dirty())
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ids.len(), 64);
        mm.cache.writeback.io_ns = 32_000;
        for &id in &ids {
            assert_eq!(mm.folio_start_writeback(id), 1);
        }
        let ends: Vec<u64> = ids.iter().map(|&id| mm.folios.writeback_end_ns(id)).collect();
        assert!(ends.windows(2).all(|w| w[0] < w[1]), "ends strictly grow");
        // Free one under writeback and reuse its id for a folio of its own.
        let freed = ids[40];
        mm.free_folio(0, freed);
        for now in [0, ends[10], ends[10] + 1, ends[50], ends[63]] {
            mm.cur.now_ns = now;
            // Before the settle, the pages still under writeback are counted from the queue.
            let left = ends.iter().filter(|&&e| e > now).count() as u64;
            assert_eq!(mm.nr_writeback_now(), left, "at {now}");
            mm.writeback_settle();
            assert_eq!(mm.nr_writeback_now(), left);
            for (&id, &end) in ids.iter().zip(&ends) {
                if id == freed {
                    continue;
                }
                assert_eq!(mm.folio_test_writeback(id), end > now);
                let kept = mm.folios.writeback_end_ns(id);
                assert!(
                    kept == end || (kept == 0 && end <= now),
                    "{id}: {kept} {end} {now}"
                );
            }
            if now == ends[10] {
                let id = mm.alloc_folio(0, crate::Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::File, false);
                assert_eq!(id, Some(freed), "ids are reused");
                mm.folios.set_writeback_end_ns(freed, 7);
            }
        }
        assert_eq!(
            mm.folios.writeback_end_ns(freed),
            7,
            "the reused id's end is its own"
        );
        assert_eq!(mm.cache.writeback.nr_writeback, 0);
    }
}
