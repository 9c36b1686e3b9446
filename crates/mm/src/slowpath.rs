//! The allocation slow path, `__alloc_pages_slowpath` (`kernel-model.md` §7, §8 rows D3, D5,
//! D6): kswapd wake-ups, the min-watermark retry, initial async compaction for costly and
//! non-movable requests, direct reclaim with the unreserve + `drain_all_pages` retry, direct
//! compaction with priority escalation, `should_reclaim_retry`, `should_compact_retry`, the
//! __GFP_NORETRY / costly / __GFP_RETRY_MAYFAIL exits and defrag_mode's final NOFRAGMENT drop.
//!
//! Simplifications (named where they apply): no OOM killer (the model has no tasks to kill, so
//! §7.4 step 13 makes no progress and the request fails); __GFP_NOFAIL requests fail like any
//! other instead of looping forever; no PF_MEMALLOC/pfmemalloc contexts, cpusets or RT tasks; no
//! fatal signals; swap is absent, so anonymous memory is not reclaimable.

use crate::compaction::{CompactPriority, CompactResult, CompactRunStats};
use crate::filemap::{CostlyOrderPolicy, V4Position};
use crate::gfp::{AllocFlags, Gfp};
use crate::mmzone::WMARK_MIN;
use crate::node::Mm;
use crate::page_alloc::AllocContext;
use crate::types::*;
use crate::vmstat::Stat;

/// `MAX_RECLAIM_RETRIES` / `MAX_COMPACT_RETRIES`.
pub const MAX_RECLAIM_RETRIES: u32 = 16;
pub const MAX_COMPACT_RETRIES: u32 = 16;

/// The work one allocation's slow path did (for a cost model), reset by every `alloc_pages`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocWork {
    pub slowpath: bool,
    pub compaction: CompactRunStats,
    pub compact_stalls: u32,
    pub reclaim_calls: u32,
    pub reclaimed: u64,
    pub drains: u32,
    pub drain_ipis: u32,
    pub retries: u32,
    /// defrag_mode dropped ALLOC_NOFRAGMENT at the end (§8 D5).
    pub nofragment_dropped: bool,
    /// The slow path called `wakeup_kcompactd` itself (§12.5 V4).
    pub kcompactd_wakes: u32,
}

impl Mm {
    /// `zone_reclaimable_pages`: file LRU pages of the zone (anon only with swap, absent).
    pub fn zone_reclaimable_pages(&self, zi: usize) -> u64 {
        let z = &self.zones[zi];
        (z.stat(Stat::nr_zone_inactive_file) + z.stat(Stat::nr_zone_active_file)).max(0) as u64
    }

    /// `__alloc_pages_direct_compact` (§7.5).
    fn alloc_pages_direct_compact(
        &mut self,
        cpu: u32,
        gfp: Gfp,
        order: u32,
        alloc_flags: AllocFlags,
        ac: &AllocContext,
        prio: CompactPriority,
    ) -> (Option<u32>, CompactResult) {
        if order == 0 {
            return (None, CompactResult::Skipped);
        }
        let (rc, captured, st) = self.try_to_compact_pages(cpu, gfp, order, alloc_flags, prio);
        self.last_alloc.compaction = add_stats(self.last_alloc.compaction, st);
        if rc == CompactResult::Skipped {
            return (None, rc);
        }
        self.count(Stat::compact_stall, 1);
        self.last_alloc.compact_stalls += 1;
        let page = captured.or_else(|| self.get_page_from_freelist(cpu, gfp, order, alloc_flags, ac));
        match page {
            Some(pfn) => {
                let zi = self.zone_of(pfn);
                self.zones[zi].compact.blockskip_flush = false;
                self.compaction_defer_reset(zi, order, true);
                self.count(Stat::compact_success, 1);
            }
            None => self.count(Stat::compact_fail, 1),
        }
        (page, rc)
    }

    /// `__alloc_pages_direct_reclaim` (§7.4 step 8): try_to_free_pages, then on failure one
    /// HighAtomic unreserve and `drain_all_pages` before a last attempt.
    fn alloc_pages_direct_reclaim(
        &mut self,
        cpu: u32,
        gfp: Gfp,
        order: u32,
        alloc_flags: AllocFlags,
        ac: &AllocContext,
    ) -> (Option<u32>, u64) {
        let progress = self.try_to_free_pages(cpu, gfp, order);
        self.last_alloc.reclaim_calls += 1;
        self.last_alloc.reclaimed += progress;
        if progress == 0 {
            return (None, 0);
        }
        let mut page = self.get_page_from_freelist(cpu, gfp, order, alloc_flags, ac);
        if page.is_none() {
            self.unreserve_highatomic_pageblock(ac, false);
            let ipis = self.drain_all_pages();
            self.last_alloc.drains += 1;
            self.last_alloc.drain_ipis += ipis;
            page = self.get_page_from_freelist(cpu, gfp, order, alloc_flags, ac);
        }
        (page, progress)
    }

    /// `should_reclaim_retry` (§7.6).
    fn should_reclaim_retry(
        &mut self,
        order: u32,
        ac: &AllocContext,
        alloc_flags: AllocFlags,
        progress: bool,
        no_progress_loops: &mut u32,
    ) -> bool {
        if progress && order <= PAGE_ALLOC_COSTLY_ORDER {
            *no_progress_loops = 0;
        } else {
            *no_progress_loops += 1;
        }
        let mut ret = false;
        if *no_progress_loops <= MAX_RECLAIM_RETRIES {
            if let Some(pref) = ac.preferred_zone {
                ret = (0..=pref)
                    .rev()
                    .filter(|&zi| self.zones[zi].populated())
                    .any(|zi| {
                        let available =
                            self.zone_reclaimable_pages(zi) as i64 + self.zones[zi].nr_free_pages();
                        let min = self.zones[zi].wmark_pages(WMARK_MIN);
                        self.__zone_watermark_ok(zi, order, min, ac.highest_zoneidx, alloc_flags, available)
                    });
            }
        }
        if !ret {
            return self.unreserve_highatomic_pageblock(ac, true);
        }
        ret
    }

    /// `compaction_zonelist_suitable`.
    fn compaction_zonelist_suitable(&self, order: u32, ac: &AllocContext) -> bool {
        let Some(pref) = ac.preferred_zone else {
            return false;
        };
        (0..=pref)
            .rev()
            .filter(|&zi| self.zones[zi].populated())
            .any(|zi| {
                let available =
                    (self.zone_reclaimable_pages(zi) / order as u64) as i64 + self.zones[zi].nr_free_pages();
                let min = self.zones[zi].wmark_pages(WMARK_MIN);
                let mut wm = min + crate::compaction::compact_gap(order);
                if order > PAGE_ALLOC_COSTLY_ORDER {
                    wm += self.zones[zi].wmark_pages(crate::mmzone::WMARK_LOW) - min;
                }
                self.__zone_watermark_ok(
                    zi,
                    0,
                    wm,
                    ac.highest_zoneidx,
                    AllocFlags(AllocFlags::CMA),
                    available,
                )
            })
    }

    /// `should_compact_retry` (§7.7).
    fn should_compact_retry(
        &self,
        order: u32,
        ac: &AllocContext,
        result: CompactResult,
        prio: &mut CompactPriority,
        retries: &mut u32,
    ) -> bool {
        if order == 0 {
            return false;
        }
        if result == CompactResult::Skipped {
            return self.compaction_zonelist_suitable(order, ac);
        }
        if result == CompactResult::Success {
            let max = if order > PAGE_ALLOC_COSTLY_ORDER {
                MAX_COMPACT_RETRIES / 4
            } else {
                MAX_COMPACT_RETRIES
            };
            *retries += 1;
            if *retries <= max {
                return true;
            }
        }
        let min_priority = if order > PAGE_ALLOC_COSTLY_ORDER {
            CompactPriority::SyncLight
        } else {
            CompactPriority::SyncFull
        };
        if *prio > min_priority {
            *prio = if *prio == CompactPriority::Async {
                CompactPriority::SyncLight
            } else {
                CompactPriority::SyncFull
            };
            *retries = 0;
            return true;
        }
        false
    }

    /// The V4 exit (§12.5): `wakeup_kcompactd(node, order, highest_zoneidx)`, then fail.
    fn v4_kcompactd_background(&mut self, order: u32, ac: &AllocContext) -> Option<u32> {
        self.last_alloc.kcompactd_wakes += 1;
        self.wakeup_kcompactd(order, ac.highest_zoneidx.idx());
        None
    }

    /// `__alloc_pages_slowpath` (§7.4).
    pub(crate) fn alloc_pages_slowpath(
        &mut self,
        cpu: u32,
        gfp: Gfp,
        order: u32,
        ac: &AllocContext,
    ) -> Option<u32> {
        self.last_alloc.slowpath = true;
        let can_direct_reclaim = gfp.intersects(Gfp::DIRECT_RECLAIM);
        let can_compact = gfp.compaction_allowed();
        let costly = order > PAGE_ALLOC_COSTLY_ORDER;
        // Step 1.
        let mut compaction_retries = 0u32;
        let mut no_progress_loops = 0u32;
        let mut compact_priority = CompactPriority::SyncLight;
        let mut alloc_flags = self.gfp_to_alloc_flags(gfp, order);
        // Steps 2–3.
        if alloc_flags.has(AllocFlags::KSWAPD) {
            self.wake_all_kswapds(order, gfp, ac);
        }
        if let Some(p) = self.get_page_from_freelist(cpu, gfp, order, alloc_flags, ac) {
            return Some(p);
        }
        // §12.5 V4 ("kcompactd background"): a costly NORETRY request that could do direct
        // work wakes kcompactd and fails. Placed before step 4 by default (the intended
        // semantics), or after it, where the posted diff sits relative to direct reclaim.
        let v4 = self.pagecache.costly_order_policy == CostlyOrderPolicy::V4KcompactdBackground
            && costly
            && gfp.intersects(Gfp::NORETRY)
            && can_direct_reclaim;
        if v4 && self.pagecache.v4_position == V4Position::BeforeInitialCompaction {
            return self.v4_kcompactd_background(order, ac);
        }
        // Step 4: initial async compaction for costly and non-movable high-order requests.
        if can_direct_reclaim
            && can_compact
            && (costly || (order > 0 && ac.migratetype != MigrateType::Movable))
        {
            let (page, rc) =
                self.alloc_pages_direct_compact(cpu, gfp, order, alloc_flags, ac, CompactPriority::Async);
            if page.is_some() {
                return page;
            }
            if costly && gfp.intersects(Gfp::NORETRY) {
                if matches!(rc, CompactResult::Skipped | CompactResult::Deferred) {
                    return None;
                }
                compact_priority = CompactPriority::Async;
            }
        }
        loop {
            // Steps 5–6.
            if alloc_flags.has(AllocFlags::KSWAPD) {
                self.wake_all_kswapds(order, gfp, ac);
            }
            if let Some(p) = self.get_page_from_freelist(cpu, gfp, order, alloc_flags, ac) {
                return Some(p);
            }
            // Step 7.
            if !can_direct_reclaim {
                return None;
            }
            if v4 {
                return self.v4_kcompactd_background(order, ac);
            }
            // Step 8.
            let (page, progress) = self.alloc_pages_direct_reclaim(cpu, gfp, order, alloc_flags, ac);
            if page.is_some() {
                return page;
            }
            // Step 9.
            let (page, compact_result) =
                self.alloc_pages_direct_compact(cpu, gfp, order, alloc_flags, ac, compact_priority);
            if page.is_some() {
                return page;
            }
            // Step 10.
            if gfp.intersects(Gfp::NORETRY) {
                return None;
            }
            if costly && (!can_compact || !gfp.intersects(Gfp::RETRY_MAYFAIL)) {
                return None;
            }
            // Step 11.
            self.last_alloc.retries += 1;
            if self.should_reclaim_retry(order, ac, alloc_flags, progress > 0, &mut no_progress_loops) {
                continue;
            }
            if progress > 0
                && can_compact
                && self.should_compact_retry(
                    order,
                    ac,
                    compact_result,
                    &mut compact_priority,
                    &mut compaction_retries,
                )
            {
                continue;
            }
            // Step 12 (§8 D5): defrag_mode drops NOFRAGMENT once before giving up.
            if self.tun.defrag_nofragment() && alloc_flags.has(AllocFlags::NOFRAGMENT) {
                alloc_flags.clear(AllocFlags::NOFRAGMENT);
                self.last_alloc.nofragment_dropped = true;
                continue;
            }
            // Step 13: no OOM killer in the model (no tasks); step 14: fail.
            return None;
        }
    }
}

fn add_stats(a: CompactRunStats, b: CompactRunStats) -> CompactRunStats {
    CompactRunStats {
        migrate_scanned: a.migrate_scanned + b.migrate_scanned,
        free_scanned: a.free_scanned + b.free_scanned,
        isolated: a.isolated + b.isolated,
        migrated_pages: a.migrated_pages + b.migrated_pages,
        failed_pages: a.failed_pages + b.failed_pages,
        runs: a.runs + b.runs,
    }
}
