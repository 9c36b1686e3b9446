//! The allocation slow path, `__alloc_pages_slowpath` (docs/model §7, §8 rows D3, D5,
//! D6): kswapd wake-ups, the min-watermark retry, initial async compaction for costly and
//! non-movable requests, direct reclaim with the unreserve + `drain_all_pages` retry, direct
//! compaction with priority escalation, `should_reclaim_retry`, `should_compact_retry`, the
//! __GFP_NORETRY / costly / __GFP_RETRY_MAYFAIL exits, defrag_mode's final NOFRAGMENT drop, the
//! OOM killer (kill the largest task, §19.1 item 11), __GFP_NOFAIL's reserve fallbacks, and the
//! seed-002 V4 exit (§12.5).
//!
//! Simplifications (named where they apply): a __GFP_NOFAIL request that has exhausted every
//! option, and a __GFP_FS-less request that reaches OOM, loop forever in the kernel waiting for
//! someone else to free memory; with nothing else running the model fails them and flags it in
//! `AllocWork`. No PF_MEMALLOC/pfmemalloc contexts, cpusets or RT tasks; no fatal signals; the
//! OOM victim's memory is freed at once (the reaper's delay is the engine's business).

use crate::compaction::{CompactPriority, CompactResult, CompactRunStats};
use crate::filemap::V4Position;
use crate::gfp::{AllocFlags, Gfp};
use crate::mmzone::WMARK_MIN;
use crate::node::Mm;
use crate::page_alloc::AllocContext;
use crate::types::*;
use crate::vmstat::Stat;

/// `MAX_RECLAIM_RETRIES` / `MAX_COMPACT_RETRIES`.
pub const MAX_RECLAIM_RETRIES: u32 = 16;
pub const MAX_COMPACT_RETRIES: u32 = 16;

/// The allocation work done since boot, summed over every `alloc_pages` call: an engine
/// charges a step for the difference between two readings.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkSum {
    pub allocs: u64,
    pub slowpaths: u64,
    pub compaction: CompactRunStats,
    pub compact_stalls: u64,
    pub reclaim_calls: u64,
    pub reclaimed: u64,
    pub reclaimed_folios: u64,
    pub drains: u64,
    pub drain_ipis: u64,
    /// Pages `drain_all_pages` returned from the PCP lists to the buddy lists.
    pub drained_pages: u64,
    /// `drain_all_pages(NULL)` calls that returned at once because another CPU's drain held
    /// `pcpu_drain_mutex` (`Current::drain_mutex_held`; not counted in `drains`).
    pub drains_skipped: u64,
    pub oom_kills: u64,
}

impl WorkSum {
    pub(crate) fn add(&mut self, w: &AllocWork) {
        self.allocs += 1;
        self.slowpaths += w.slowpath as u64;
        self.compaction = add_stats(self.compaction, w.compaction);
        self.compact_stalls += w.compact_stalls as u64;
        self.reclaim_calls += w.reclaim_calls as u64;
        self.reclaimed += w.reclaimed;
        self.reclaimed_folios += w.reclaimed_folios;
        self.drains += w.drains as u64;
        self.drain_ipis += w.drain_ipis as u64;
        self.drained_pages += w.drained_pages;
        self.drains_skipped += w.drains_skipped as u64;
        self.oom_kills += w.oom_kills as u64;
    }

    /// The allocations done between reading `earlier` and reading `self` if none of them
    /// entered the slow path (None if one did): then every other counter is unchanged, since
    /// only `alloc_pages_slowpath` (which counts in `slowpaths`) raises them, and
    /// `self.since(earlier)` is `WorkSum { allocs, ..Default::default() }`. A cheap check for
    /// the common case, so that callers build a whole difference only after a slow path.
    #[inline]
    pub fn fast_allocs_since(&self, earlier: &WorkSum) -> Option<u64> {
        (self.slowpaths == earlier.slowpaths).then(|| self.allocs - earlier.allocs)
    }

    /// The work done between reading `earlier` and reading `self`.
    pub fn since(&self, earlier: &WorkSum) -> WorkSum {
        let c = &self.compaction;
        let e = &earlier.compaction;
        WorkSum {
            allocs: self.allocs - earlier.allocs,
            slowpaths: self.slowpaths - earlier.slowpaths,
            compaction: CompactRunStats {
                migrate_scanned: c.migrate_scanned - e.migrate_scanned,
                free_scanned: c.free_scanned - e.free_scanned,
                isolated: c.isolated - e.isolated,
                migrated_pages: c.migrated_pages - e.migrated_pages,
                failed_pages: c.failed_pages - e.failed_pages,
                runs: c.runs - e.runs,
                migrate_retries: c.migrate_retries - e.migrate_retries,
                migrate_wait_ns: c.migrate_wait_ns - e.migrate_wait_ns,
            },
            compact_stalls: self.compact_stalls - earlier.compact_stalls,
            reclaim_calls: self.reclaim_calls - earlier.reclaim_calls,
            reclaimed: self.reclaimed - earlier.reclaimed,
            reclaimed_folios: self.reclaimed_folios - earlier.reclaimed_folios,
            drains: self.drains - earlier.drains,
            drain_ipis: self.drain_ipis - earlier.drain_ipis,
            drained_pages: self.drained_pages - earlier.drained_pages,
            drains_skipped: self.drains_skipped - earlier.drains_skipped,
            oom_kills: self.oom_kills - earlier.oom_kills,
        }
    }
}

/// Whatever holds the model (`Mm` itself, or an engine's context around it): `measure` runs a
/// piece of work on it and returns the allocation work done meanwhile, the difference of two
/// readings of `Mm::work.sum`, so that callers charging time for it need no readings of their
/// own.
///
/// ```
/// use fraglab_mm::slowpath::{MeasureWork, WorkSum};
/// struct Meter(WorkSum);
/// impl MeasureWork for Meter {
///     fn work_sum(&self) -> WorkSum {
///         self.0
///     }
/// }
/// let mut m = Meter(WorkSum { allocs: 5, ..Default::default() });
/// let (r, work) = m.measure(|m| {
///     m.0.allocs += 2;
///     "done"
/// });
/// assert_eq!((r, work.allocs), ("done", 2));
/// ```
pub trait MeasureWork {
    /// The model's `Mm::work.sum` now.
    fn work_sum(&self) -> WorkSum;

    /// Runs `f` and returns its result with the allocation work (`WorkSum`) it did.
    fn measure<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> (R, WorkSum)
    where
        Self: Sized,
    {
        let before = self.work_sum();
        let r = f(self);
        let after = self.work_sum();
        // The common case (no slow path ran) needs no field-by-field difference.
        let work = match after.fast_allocs_since(&before) {
            Some(allocs) => WorkSum {
                allocs,
                ..Default::default()
            },
            None => after.since(&before),
        };
        (r, work)
    }
}

impl MeasureWork for Mm {
    fn work_sum(&self) -> WorkSum {
        self.work.sum
    }
}

/// The work one allocation's slow path did (for a cost model), reset by every `alloc_pages`.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocWork {
    pub slowpath: bool,
    pub compaction: CompactRunStats,
    pub compact_stalls: u32,
    pub reclaim_calls: u32,
    pub reclaimed: u64,
    pub reclaimed_folios: u64,
    pub drains: u32,
    pub drain_ipis: u32,
    pub drained_pages: u64,
    /// `drain_all_pages` calls skipped: another CPU held `pcpu_drain_mutex` (§2.5).
    pub drains_skipped: u32,
    pub retries: u32,
    /// defrag_mode dropped ALLOC_NOFRAGMENT at the end (§8 D5).
    pub nofragment_dropped: bool,
    /// The slow path called `wakeup_kcompactd` itself (§12.5 V4).
    pub kcompactd_wakes: u32,
    /// The OOM killer killed this many tasks for the allocation (§7.4 step 13).
    pub oom_kills: u32,
    /// `out_of_memory` for a request without __GFP_FS: the kernel reports progress without
    /// killing and the request retries until someone else frees memory; with nothing else
    /// running the model fails it instead.
    pub oom_nofs_fail: bool,
    /// A __GFP_NOFAIL request ran out of options (the kernel would loop forever).
    pub nofail_failed: bool,
}

impl Mm {
    /// `zone_reclaimable_pages`: file LRU pages of the zone, plus anon when swap has room.
    pub fn zone_reclaimable_pages(&self, zi: usize) -> u64 {
        let z = &self.zones[zi];
        let mut n = z.stat(Stat::nr_zone_inactive_file) + z.stat(Stat::nr_zone_active_file);
        if self.can_reclaim_anon() {
            n += z.stat(Stat::nr_zone_inactive_anon) + z.stat(Stat::nr_zone_active_anon);
        }
        n.max(0) as u64
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
        let (rc, captured, st) = self.try_to_compact_pages_ac(cpu, gfp, order, alloc_flags, prio, ac);
        self.work.last_alloc.compaction = add_stats(self.work.last_alloc.compaction, st);
        if rc == CompactResult::Skipped {
            return (None, rc);
        }
        self.count(Stat::compact_stall, 1);
        self.work.last_alloc.compact_stalls += 1;
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
        let folios_before = self.reclaim.reclaimed_folios;
        let progress = self.try_to_free_pages_ac(cpu, gfp, order, ac);
        self.work.last_alloc.reclaim_calls += 1;
        self.work.last_alloc.reclaimed += progress;
        self.work.last_alloc.reclaimed_folios += self.reclaim.reclaimed_folios - folios_before;
        if progress == 0 {
            return (None, 0);
        }
        let mut page = self.get_page_from_freelist(cpu, gfp, order, alloc_flags, ac);
        if page.is_none() {
            self.unreserve_highatomic_pageblock(ac, false);
            // `__drain_all_pages(NULL, false)` (mm/page_alloc.c, §2.5): a caller that finds
            // `pcpu_drain_mutex` taken (`mutex_trylock` fails) returns at once — another CPU
            // is draining — unless it asked for one zone, which this one does not. Only a
            // clocked engine knows whether another CPU holds it (`cur.drain_mutex_held`).
            if self.cur.drain_mutex_held {
                self.work.last_alloc.drains_skipped += 1;
            } else {
                let before = self.pcp_pages_total();
                // The drain's zone->lock holds are charged with the drain (`drain_ipis`,
                // `drained_pages`), not with the allocation paths' holds.
                let zone_lock = self.work.zone_lock;
                let ipis = self.drain_all_pages();
                self.work.zone_lock = zone_lock;
                self.work.last_alloc.drains += 1;
                self.work.last_alloc.drain_ipis += ipis;
                self.work.last_alloc.drained_pages += before - self.pcp_pages_total();
            }
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
        if *no_progress_loops <= MAX_RECLAIM_RETRIES && ac.preferred_zone.is_some() {
            ret = self.zonelist_from(ac, ac.zref).any(|zi| {
                let available = self.zone_reclaimable_pages(zi) as i64 + self.zones[zi].nr_free_pages();
                let min = self.zones[zi].wmark_pages(WMARK_MIN);
                self.__zone_watermark_ok(zi, order, min, ac.highest_zoneidx, alloc_flags, available)
            });
        }
        if !ret {
            return self.unreserve_highatomic_pageblock(ac, true);
        }
        ret
    }

    /// `compaction_zonelist_suitable`.
    fn compaction_zonelist_suitable(&self, order: u32, ac: &AllocContext) -> bool {
        if ac.preferred_zone.is_none() {
            return false;
        }
        self.zonelist_from(ac, ac.zref).any(|zi| {
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

    /// `__alloc_pages_may_oom` (§7.4 step 13): one last attempt at the high watermark, then —
    /// unless the order is costly, the gfp has __GFP_RETRY_MAYFAIL or __GFP_THISNODE, or the
    /// request is for zones below Normal — `out_of_memory`. Returns the page and whether OOM
    /// made progress.
    fn alloc_pages_may_oom(
        &mut self,
        cpu: u32,
        gfp: Gfp,
        order: u32,
        ac: &AllocContext,
    ) -> (Option<u32>, bool) {
        let high = AllocFlags(AllocFlags::WMARK_HIGH | AllocFlags::CPUSET);
        let g = gfp.union(Gfp::HARDWALL).without(Gfp::DIRECT_RECLAIM);
        if let Some(p) = self.get_page_from_freelist(cpu, g, order, high, ac) {
            return (Some(p), false);
        }
        if order > PAGE_ALLOC_COSTLY_ORDER
            || gfp.intersects(Gfp::RETRY_MAYFAIL.union(Gfp::THISNODE))
            || ac.highest_zoneidx < ZoneType::Normal
        {
            return (None, false);
        }
        let progress = self.out_of_memory(cpu, gfp);
        if progress || gfp.intersects(Gfp::NOFAIL) {
            if gfp.intersects(Gfp::NOFAIL) {
                let f = AllocFlags(AllocFlags::NO_WATERMARKS | AllocFlags::CPUSET);
                if let Some(p) = self.get_page_from_freelist(cpu, gfp, order, f, ac) {
                    return (Some(p), true);
                }
            }
            // A NOFAIL request without a victim: the kernel warns and claims progress; the
            // model would loop without change, so it reports no progress.
            return (None, progress);
        }
        (None, false)
    }

    /// `out_of_memory` for the global (non-memcg) case (§7.4 step 13, §19.1 item 11): a
    /// request without __GFP_FS kills nothing; otherwise the task with the most anonymous and
    /// page-table pages (`oom_badness` without swap entries or mapped file pages; ties → the
    /// lowest id; task 0 (the kernel) and task 1 (init, `is_global_init`) are never chosen) is killed and its memory freed at once
    /// (the OOM reaper's work, without its delay). Counts `oom_kill` and records the victim in
    /// `mm.outbox.oom_victims` for the owner of the tasks. Returns whether a task was killed.
    pub fn out_of_memory(&mut self, cpu: u32, gfp: Gfp) -> bool {
        use crate::folio::FolioKind;
        if !gfp.intersects(Gfp::FS) {
            self.work.last_alloc.oom_nofs_fail = true;
            return false;
        }
        let Some((victim, _)) = self
            .folios
            .rss
            .iter()
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        else {
            return false;
        };
        let doomed: Vec<_> = self
            .folios
            .live()
            .filter(|(_, f)| f.owner == victim && matches!(f.kind, FolioKind::Anon | FolioKind::PageTable))
            .map(|(id, _)| id)
            .collect();
        for id in doomed {
            self.free_folio(cpu, id);
        }
        self.count(Stat::oom_kill, 1);
        self.outbox.oom_victims.push(victim);
        self.work.last_alloc.oom_kills += 1;
        true
    }

    /// The V4 exit (§12.5): `wakeup_kcompactd(node, order, highest_zoneidx)`, then fail.
    fn v4_kcompactd_background(&mut self, order: u32, ac: &AllocContext) -> Option<u32> {
        self.work.last_alloc.kcompactd_wakes += 1;
        let nid = ac.preferred_zone.map_or(ac.nid, |zi| self.zones[zi].nid);
        self.wakeup_kcompactd(nid, order, ac.highest_zoneidx.idx());
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
        self.work.last_alloc.slowpath = true;
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
        let v4_position = self.policy.costly_background();
        let v4 = v4_position.is_some() && costly && gfp.intersects(Gfp::NORETRY) && can_direct_reclaim;
        if v4 && v4_position == Some(V4Position::BeforeInitialCompaction) {
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
            // A policy's deferred work (`policy.rs`: moving pages to resize a region) runs
            // here, where direct compaction may run too, before direct reclaim.
            if self.policy_work_pending {
                self.run_policy_work();
                if let Some(p) = self.get_page_from_freelist(cpu, gfp, order, alloc_flags, ac) {
                    return Some(p);
                }
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
            self.work.last_alloc.retries += 1;
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
            if self.defrag_nofragment() && alloc_flags.has(AllocFlags::NOFRAGMENT) {
                alloc_flags.clear(AllocFlags::NOFRAGMENT);
                self.work.last_alloc.nofragment_dropped = true;
                continue;
            }
            // Step 13: the OOM killer; progress (a victim was killed) restarts the retries.
            let (page, oom_progress) = self.alloc_pages_may_oom(cpu, gfp, order, ac);
            if page.is_some() {
                return page;
            }
            if oom_progress {
                no_progress_loops = 0;
                continue;
            }
            // Step 14: a __GFP_NOFAIL request that can reclaim gets one attempt with the
            // MIN_RESERVE allowance and then loops forever in the kernel. Nothing else runs in
            // the model while it loops, so the model stops there and reports the failure.
            if gfp.intersects(Gfp::NOFAIL) {
                let mut f = AllocFlags(alloc_flags.0 & !AllocFlags::WMARK_MASK);
                f.set(AllocFlags::WMARK_MIN | AllocFlags::MIN_RESERVE | AllocFlags::CPUSET);
                if let Some(p) = self.get_page_from_freelist(cpu, gfp, order, f, ac) {
                    return Some(p);
                }
                self.work.last_alloc.nofail_failed = true;
            }
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
        migrate_retries: a.migrate_retries + b.migrate_retries,
        migrate_wait_ns: a.migrate_wait_ns + b.migrate_wait_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fast_allocs_since` answers exactly when `since` is allocations alone, and then with
    /// their number: readings around fast-path allocations (an `AllocWork` without a slow path
    /// is all zero, as `alloc_pages` leaves it) and around slow ones.
    #[test]
    fn fast_allocs_since_matches_since() {
        let mut x = 0x5851_f42d_4c95_7f2du64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut sum = WorkSum::default();
        for _ in 0..2000 {
            let before = sum;
            for _ in 0..rnd() % 4 {
                let w = if rnd() % 5 == 0 {
                    AllocWork {
                        slowpath: true,
                        compact_stalls: (rnd() % 2) as u32,
                        reclaim_calls: (rnd() % 2) as u32,
                        reclaimed: rnd() % 64,
                        drain_ipis: (rnd() % 3) as u32,
                        ..Default::default()
                    }
                } else {
                    AllocWork::default()
                };
                sum.add(&w);
            }
            let full = sum.since(&before);
            match sum.fast_allocs_since(&before) {
                Some(allocs) => assert_eq!(
                    full,
                    WorkSum {
                        allocs,
                        ..Default::default()
                    }
                ),
                None => assert!(full.slowpaths > 0),
            }
        }
    }
}
