//! The page allocator's policy: rmqueue and the 6.15+ fallback modes, claim and steal,
//! watermark boosting, watermarks and lowmem reserves, PCP refill/free/drain, high-atomic
//! reserves, `get_page_from_freelist` and the allocation entry point
//! (docs/model §2–§6, §8 rows D1–D4). Models mm/page_alloc.c of Linux 6.18.

use crate::gfp::{AllocFlags, Gfp};
use crate::mmzone::*;
use crate::node::{trace_kind, Mm, PCP_BATCH_SCALE_MAX};
use crate::trace::TraceEvent;
use crate::types::*;
use crate::vmstat::Stat;

/// `enum rmqueue_mode` (§6.2), in escalating order.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RmqueueMode {
    Normal = 0,
    Cma = 1,
    Claim = 2,
    Steal = 3,
}

/// `fallbacks[]` (§5.3).
pub const FALLBACKS: [[MigrateType; 2]; MIGRATE_PCPTYPES] = [
    [MigrateType::Reclaimable, MigrateType::Movable],
    [MigrateType::Reclaimable, MigrateType::Unmovable],
    [MigrateType::Unmovable, MigrateType::Movable],
];

/// What `find_suitable_fallback` answers (§6.3.2a).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// A fallback type with a chunk at this order.
    Found(MigrateType),
    /// "-1": nothing at this order.
    NoneHere,
    /// "-2": claiming is not worth trying at this order or below.
    StopClaim,
}

/// `struct alloc_context`: the zonelist of the preferred node, the nodemask, the highest
/// usable zone, the migratetype and the preferred zoneref.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
pub struct AllocContext {
    pub highest_zoneidx: ZoneType,
    pub migratetype: MigrateType,
    /// Index of the preferred zone (the first zone of the zonelist that is populated, at or
    /// below highest_zoneidx and in the nodemask), None if none.
    pub preferred_zone: Option<usize>,
    /// The node whose zonelist is walked (`preferred_nid`).
    pub nid: u32,
    /// The preferred zone's position in that zonelist (`preferred_zoneref`): walks start here.
    pub zref: usize,
    /// The nodes the allocation may use, a bit per node (`ac->nodemask`; all bits: no mask).
    pub nodemask: u64,
    /// __GFP_THISNODE: the preferred node's zones only (`ZONELIST_NOFALLBACK`).
    pub thisnode: bool,
}

impl AllocContext {
    /// Whether the allocation may use node `nid`.
    #[inline]
    pub fn node_allowed(&self, nid: u32) -> bool {
        self.nodemask & (1u64 << nid) != 0 && (!self.thisnode || nid == self.nid)
    }
}

/// The kernel's `clamp(v, lo, hi)` (include/linux/minmax.h): `v >= hi ? hi : v <= lo ? lo : v`.
/// Unlike `Ord::clamp` it does not panic when lo > hi, which happens to the PCP `high_min` and
/// `high_max` when the low watermark exceeds managed/8 (large min_free_kbytes or
/// watermark_scale_factor on a small zone).
#[inline]
fn kclamp(v: u64, lo: u64, hi: u64) -> u64 {
    if v >= hi {
        hi
    } else if v <= lo {
        lo
    } else {
        v
    }
}

/// The order of the aligned block that starts at `p` in a drained run ending at `end`: the
/// largest whose block is aligned at `p` and ends by `end`, at least the run's chunk `order`
/// and at most pageblock_order (`Mm::drain_run`).
#[inline]
fn drain_block_order(p: u32, end: u32, order: u32) -> u32 {
    let mut o = order;
    while o < PAGEBLOCK_ORDER && p & ((2 << o) - 1) == 0 && p + (2 << o) <= end {
        o += 1;
    }
    o
}

/// How many chunks ahead of the one it frees `free_pcppages_bulk` prefetches.
const DRAIN_PREFETCH: usize = 2;

/// The order of the aligned block that ends at `e` in a drained descending run starting at
/// `start`: the largest whose block is aligned, ends at `e` and starts at or after `start`, at
/// least the run's chunk `order` and at most pageblock_order (`Mm::drain_run`).
#[inline]
fn drain_block_order_down(start: u32, e: u32, order: u32) -> u32 {
    let mut o = order;
    while o < PAGEBLOCK_ORDER && e & ((2 << o) - 1) == 0 && e >= start + (2 << o) {
        o += 1;
    }
    o
}

/// Whether the refill and the drain take their batch paths (`Mm::rmqueue_carve`,
/// `Mm::drain_run`); the unit tests turn them off to get the page-by-page reference.
#[cfg(not(test))]
#[inline(always)]
fn batch_paths() -> bool {
    true
}

#[cfg(test)]
fn batch_paths() -> bool {
    !tests::PAGE_BY_PAGE.with(|c| c.get())
}

/// `should_try_claim_block` (§6.3.2b).
#[inline]
pub fn should_try_claim_block(order: u32, start_mt: MigrateType) -> bool {
    order >= PAGEBLOCK_ORDER
        || order >= PAGEBLOCK_ORDER / 2
        || matches!(start_mt, MigrateType::Reclaimable | MigrateType::Unmovable)
}

/// `pgalloc_<zone>` of /proc/vmstat by zone index (§14.2): the pages allocated in each zone.
pub(crate) const PGALLOC_BY_ZONE: [Stat; 5] = [
    Stat::pgalloc_dma,
    Stat::pgalloc_dma32,
    Stat::pgalloc_normal,
    Stat::pgalloc_movable,
    Stat::pgalloc_device,
];

impl Mm {
    // ---- __rmqueue and its modes (§5.2, §6) -------------------------------------------------

    /// `__rmqueue_smallest` (§5.2): the smallest chunk on `mt`'s lists at or above `order`,
    /// split down to `order`.
    pub fn __rmqueue_smallest(&mut self, cpu: u32, zi: usize, order: u32, mt: MigrateType) -> Option<u32> {
        for current in order..=MAX_PAGE_ORDER {
            let Some(pfn) = self.zones[zi].free_list_first(current, mt) else {
                continue;
            };
            self.page_del_and_expand(zi, pfn, order, current, mt);
            // Host-cache hint for the next take from this list (a PCP refill takes many in a
            // row): the new first's state and its successor's links.
            if let Some(n1) = self.zones[zi].free_list_first(current, mt) {
                self.pages.prefetch(n1);
                let n2 = self.pages.a(n1);
                if n2 != NIL {
                    self.pages.prefetch(n2);
                }
            }
            if self.trace_on(trace_kind::MM_PAGE_ALLOC_ZONE_LOCKED) {
                let percpu_refill = pcp_allowed_order(order) && mt.idx() < MIGRATE_PCPTYPES;
                self.emit(
                    cpu,
                    TraceEvent::MmPageAllocZoneLocked {
                        pfn,
                        order,
                        migratetype: mt as i32,
                        percpu_refill,
                    },
                );
            }
            return Some(pfn);
        }
        None
    }

    /// `find_suitable_fallback` (§6.3.2a).
    pub fn find_suitable_fallback(
        &self,
        zi: usize,
        order: u32,
        mt: MigrateType,
        claimable: bool,
    ) -> Fallback {
        if claimable && !should_try_claim_block(order, mt) {
            return Fallback::StopClaim;
        }
        let z = &self.zones[zi];
        if z.area.nr_free[order as usize] == 0 {
            return Fallback::NoneHere;
        }
        for fb in FALLBACKS[mt.idx()] {
            if self.policy_fallback_hook && !self.policy.fallback_allowed(mt, fb) {
                continue;
            }
            if !z.free_list_empty(order, fb) {
                return Fallback::Found(fb);
            }
        }
        Fallback::NoneHere
    }

    /// `boost_watermark` (§3.4.2–3).
    pub fn boost_watermark(&mut self, zi: usize) -> bool {
        let factor = self.tun.watermark_boost_factor;
        let z = &mut self.zones[zi];
        if factor == 0 || (PAGEBLOCK_NR_PAGES as u64 * 4) > z.managed {
            return false;
        }
        let max_boost = z.wmark[WMARK_HIGH] * factor / 10000;
        if max_boost == 0 {
            return false;
        }
        let max_boost = max_boost.max(PAGEBLOCK_NR_PAGES as u64);
        z.watermark_boost = (z.watermark_boost + PAGEBLOCK_NR_PAGES as u64).min(max_boost);
        true
    }

    /// `try_to_claim_block` (§6.3.2c): a whole-block claim for chunks ≥ pageblock_order;
    /// otherwise boost the watermark, count the block's free and "alike" pages and claim the
    /// block if they make half of it.
    #[allow(clippy::too_many_arguments)]
    pub fn try_to_claim_block(
        &mut self,
        cpu: u32,
        zi: usize,
        pfn: u32,
        current_order: u32,
        order: u32,
        start_mt: MigrateType,
        block_mt: MigrateType,
        alloc_flags: AllocFlags,
    ) -> Option<u32> {
        if current_order >= PAGEBLOCK_ORDER {
            self.del_page_from_free_list(zi, pfn, current_order, block_mt);
            self.change_pageblock_range(pfn, current_order, start_mt);
            let added = self.expand(zi, pfn, order, current_order, start_mt);
            self.account_freepages(zi, added as i64, start_mt);
            return Some(pfn);
        }
        if self.boost_watermark(zi) && alloc_flags.has(AllocFlags::KSWAPD) {
            self.zones[zi].flags.boosted_watermark = true;
        }
        let (start, free, movable) = self.prep_move_freepages_block(zi, pfn, true)?;
        let alike = if start_mt == MigrateType::Movable {
            movable
        } else if block_mt == MigrateType::Movable {
            PAGEBLOCK_NR_PAGES as u64 - (free + movable)
        } else {
            0
        };
        if free + alike >= (1 << (PAGEBLOCK_ORDER - 1)) {
            self.move_freepages_block_from(zi, start, block_mt, start_mt);
            self.set_block_mt(start, start_mt);
            return self.__rmqueue_smallest(cpu, zi, order, start_mt);
        }
        None
    }

    fn trace_extfrag(
        &mut self,
        cpu: u32,
        pfn: u32,
        order: u32,
        fallback_order: u32,
        start_mt: MigrateType,
        fallback_mt: MigrateType,
    ) {
        if self.trace_on(trace_kind::MM_PAGE_ALLOC_EXTFRAG) {
            let change_ownership = self.block_mt(pfn) == start_mt;
            self.emit(
                cpu,
                TraceEvent::MmPageAllocExtfrag {
                    pfn,
                    alloc_order: order as i32,
                    fallback_order: fallback_order as i32,
                    alloc_migratetype: start_mt as i32,
                    fallback_migratetype: fallback_mt as i32,
                    change_ownership,
                },
            );
        }
    }

    /// `__rmqueue_claim` (§6.3): largest fallback chunk first; under ALLOC_NOFRAGMENT only
    /// whole free pageblocks (min_order 9).
    pub fn __rmqueue_claim(
        &mut self,
        cpu: u32,
        zi: usize,
        order: u32,
        start_mt: MigrateType,
        alloc_flags: AllocFlags,
    ) -> Option<u32> {
        let mut min_order = order;
        if order < PAGEBLOCK_ORDER && alloc_flags.has(AllocFlags::NOFRAGMENT) {
            min_order = PAGEBLOCK_ORDER;
        }
        let mut current = MAX_PAGE_ORDER as i32;
        while current >= min_order as i32 {
            let co = current as u32;
            current -= 1;
            let fb = match self.find_suitable_fallback(zi, co, start_mt, true) {
                Fallback::NoneHere => continue,
                Fallback::StopClaim => break,
                Fallback::Found(fb) => fb,
            };
            let pfn = self.zones[zi]
                .free_list_first(co, fb)
                .expect("fallback list is non-empty");
            if let Some(page) = self.try_to_claim_block(cpu, zi, pfn, co, order, start_mt, fb, alloc_flags) {
                if co >= PAGEBLOCK_ORDER {
                    self.fallbacks.claim_whole[start_mt.idx()][fb.idx()] += 1;
                } else {
                    self.fallbacks.claim_partial[start_mt.idx()][fb.idx()] += 1;
                }
                if let Some(b) = self.blame.as_deref_mut() {
                    // Issue 37: a claim, classed as §6.5 classes it (whole or partial block).
                    let kind = if co >= PAGEBLOCK_ORDER {
                        crate::blame::BlameKind::ClaimWhole
                    } else {
                        crate::blame::BlameKind::ClaimPartial
                    };
                    b.note_fallback(kind, page, order, start_mt.idx());
                }
                self.trace_extfrag(cpu, page, order, co, start_mt, fb);
                return Some(page);
            }
        }
        None
    }

    /// `__rmqueue_steal` (§6.4): the smallest fallback chunk, split with the remainders kept
    /// on the fallback type's lists; the block keeps its type.
    pub fn __rmqueue_steal(&mut self, cpu: u32, zi: usize, order: u32, start_mt: MigrateType) -> Option<u32> {
        for co in order..=MAX_PAGE_ORDER {
            let Fallback::Found(fb) = self.find_suitable_fallback(zi, co, start_mt, false) else {
                continue;
            };
            let pfn = self.zones[zi]
                .free_list_first(co, fb)
                .expect("fallback list is non-empty");
            self.page_del_and_expand(zi, pfn, order, co, fb);
            self.fallbacks.steal[start_mt.idx()][fb.idx()] += 1;
            if let Some(b) = self.blame.as_deref_mut() {
                // Issue 37: a steal (§6.4) mixes the fallback type's block.
                b.note_fallback(crate::blame::BlameKind::Steal, pfn, order, start_mt.idx());
            }
            self.trace_extfrag(cpu, pfn, order, co, start_mt, fb);
            return Some(pfn);
        }
        None
    }

    /// `__rmqueue` (§6.2): NORMAL → (CMA: not configured, as on S2) → CLAIM → STEAL, starting
    /// at `*mode`; a claim resets the mode to NORMAL, a steal leaves it at STEAL; STEAL is
    /// forbidden under ALLOC_NOFRAGMENT.
    pub fn __rmqueue(
        &mut self,
        cpu: u32,
        zi: usize,
        order: u32,
        mt: MigrateType,
        alloc_flags: AllocFlags,
        mode: &mut RmqueueMode,
    ) -> Option<u32> {
        if *mode == RmqueueMode::Normal {
            if let Some(p) = self.__rmqueue_smallest(cpu, zi, order, mt) {
                return Some(p);
            }
        }
        if self.policy_fallback_hook {
            // Issue 37: a policy that places fallbacks itself (`policy.rs`). The policy is
            // taken out for the call so that it may use the allocator; `Kernel` is a
            // zero-sized placeholder (no allocation).
            let mut p = std::mem::replace(&mut self.policy, Box::new(crate::policy::Kernel));
            let req = crate::policy::FallbackRequest {
                cpu,
                zi,
                order,
                migratetype: mt,
                alloc_flags,
            };
            let d = p.rmqueue_fallback(self, req);
            self.policy = p;
            if let crate::policy::FallbackDecision::Placed(r) = d {
                return r;
            }
        }
        if *mode <= RmqueueMode::Claim {
            if let Some(p) = self.__rmqueue_claim(cpu, zi, order, mt, alloc_flags) {
                *mode = RmqueueMode::Normal;
                return Some(p);
            }
        }
        if !alloc_flags.has(AllocFlags::NOFRAGMENT) {
            if let Some(p) = self.__rmqueue_steal(cpu, zi, order, mt) {
                *mode = RmqueueMode::Steal;
                return Some(p);
            }
        }
        None
    }

    // ---- PCP (§2) ------------------------------------------------------------------------------

    /// `nr_pcp_alloc` (§2.3.1): how many chunks a refill takes; grows `high` and `alloc_factor`.
    fn nr_pcp_alloc(&mut self, zi: usize, cpu: usize, order: u32) -> u64 {
        let below_high = self.zones[zi].flags.below_high;
        let p = &mut self.zones[zi].pcp[cpu];
        let base = p.batch;
        p.high = kclamp(p.high, p.high_min, p.high_max);
        let mut high = p.high;
        if high < base {
            return 1;
        }
        let mut batch = if order > 0 { base } else { base << p.alloc_factor };
        if p.high_min != p.high_max && !below_high {
            p.high = (high + batch).min(p.high_max);
            high = p.high;
        }
        if order == 0 {
            let max_nr = (high as i64 - p.count as i64 - base as i64).max(base as i64) as u64;
            if batch <= max_nr && p.alloc_factor < PCP_BATCH_SCALE_MAX {
                p.alloc_factor += 1;
            }
            batch = batch.min(max_nr);
        }
        if batch > 1 {
            batch = (batch >> order).max(2);
        }
        batch
    }

    /// `rmqueue_bulk` (§2.3): `count` chunks under one lock hold, keeping the fallback mode
    /// across the loop, appended to the PCP list's tail in the order obtained.
    #[allow(clippy::too_many_arguments)]
    fn rmqueue_bulk(
        &mut self,
        cpu: u32,
        zi: usize,
        order: u32,
        count: u64,
        mt: MigrateType,
        alloc_flags: AllocFlags,
        pindex: usize,
    ) -> u64 {
        let mut mode = RmqueueMode::Normal;
        let mut i = 0;
        // One zone->lock hold for the whole refill (the engine's lock model).
        self.work.zone_lock.acquisitions += 1;
        while i < count {
            if mode == RmqueueMode::Normal && count - i >= 2 && batch_paths() {
                let n = self.rmqueue_carve(cpu, zi, order, mt, pindex, count - i);
                if n > 0 {
                    i += n;
                    continue;
                }
            }
            let Some(pfn) = self.__rmqueue(cpu, zi, order, mt, alloc_flags, &mut mode) else {
                break;
            };
            self.pcp_list_add(zi, cpu as usize, pindex, pfn, order, true);
            i += 1;
        }
        self.work.zone_lock.chunks += i.max(1);
        i
    }

    /// The refill's batch split: when `mt` has no chunk of `order` but one of a higher order
    /// `k`, takes up to `want` chunks of `order` from the first order-`k` chunk in one pass,
    /// as the next `want` `__rmqueue_smallest` calls of `rmqueue_bulk` would, and appends them
    /// to PCP list `pindex` in the same order. Returns how many it took; 0 (and nothing done)
    /// if `mt` has a chunk of `order` or none at all above it, where the caller takes the
    /// page-by-page path.
    ///
    /// Why that is the page-by-page result (§1.6, §2.3, §5.2): the lists of orders `order`
    /// to `k`−1 of `mt` are empty, so the first call takes the order-`k` chunk `C` and
    /// `expand` leaves one piece of `C` on each of those lists; the next call then finds the
    /// lowest-addressed remaining piece on the lowest non-empty list, takes it and splits it
    /// the same way, and so on: call number `c` hands out the `c`-th chunk of `C` in address
    /// order, and after `n` calls the lists hold exactly the pieces of the rest of `C`, one
    /// per order, from small to large as the address grows (each list holding one element,
    /// its position in it is the only one). The per-order counts, the page states and link
    /// words of the chunks handed out end the same; NR_FREE_PAGES (and nr_free_highatomic)
    /// moves by the same sum; NR_FREE_PAGES_BLOCKS by the same deltas, summed. The
    /// mm_page_alloc_zone_locked events carry only the chunk, order and type, and come in
    /// the same order.
    fn rmqueue_carve(
        &mut self,
        cpu: u32,
        zi: usize,
        order: u32,
        mt: MigrateType,
        pindex: usize,
        want: u64,
    ) -> u64 {
        let z = &self.zones[zi];
        if !z.free_list_empty(order, mt) {
            return 0;
        }
        let Some((k, pfn)) =
            (order + 1..=MAX_PAGE_ORDER).find_map(|k| z.free_list_first(k, mt).map(|p| (k, p)))
        else {
            return 0;
        };
        let n = want.min(1 << (k - order));
        self.del_from_free_list(zi, pfn, k, mt);
        // Host-cache hint for the next refill, which is likely to carve the list's new head.
        if let Some(next) = self.zones[zi].free_list_first(k, mt) {
            self.pages.prefetch(next);
        }
        let trace = self.trace_on(trace_kind::MM_PAGE_ALLOC_ZONE_LOCKED);
        let percpu_refill = pcp_allowed_order(order) && mt.idx() < MIGRATE_PCPTYPES;
        for i in 0..n as u32 {
            let q = pfn + (i << order);
            if trace {
                self.emit(
                    cpu,
                    TraceEvent::MmPageAllocZoneLocked {
                        pfn: q,
                        order,
                        migratetype: mt as i32,
                        percpu_refill,
                    },
                );
            }
            self.pcp_list_add(zi, cpu as usize, pindex, q, order, true);
        }
        let end = pfn + (1 << k);
        let mut p = pfn + ((n as u32) << order);
        while p < end {
            let o = (p - pfn).trailing_zeros();
            self.add_to_free_list(zi, p, o, mt, false);
            p += 1 << o;
        }
        self.account_freepages(zi, -((n as i64) << order), mt);
        #[cfg(test)]
        tests::note(0, n);
        n
    }

    /// `rmqueue_pcplist` / `__rmqueue_pcplist` (§2.3): take the head of the (order, mt) list,
    /// refilling it from the buddy when empty. As in the kernel, the head is handed out without
    /// looking at its block: a page cached while its block had type `mt` is handed out under
    /// `mt` even if a claim has retyped the block since (docs/pageblock-mixing.md rule 3; a
    /// mixed block without an extfrag event of its own).
    fn rmqueue_pcplist(
        &mut self,
        cpu: u32,
        zi: usize,
        order: u32,
        mt: MigrateType,
        alloc_flags: AllocFlags,
    ) -> Option<u32> {
        let c = cpu as usize;
        self.zones[zi].pcp[c].free_count >>= 1;
        let pindex = order_to_pindex(mt, order);
        if self.zones[zi].pcp[c].lists[pindex].is_empty() {
            let batch = self.nr_pcp_alloc(zi, c, order);
            let got = self.rmqueue_bulk(cpu, zi, order, batch, mt, alloc_flags, pindex);
            self.zones[zi].pcp[c].count += got << order;
            if got == 0 {
                return None;
            }
        }
        let pfn = self.zones[zi].pcp[c].lists[pindex].first();
        self.pcp_list_del(zi, c, pindex, pfn);
        self.zones[zi].pcp[c].count -= 1 << order;
        Some(pfn)
    }

    /// `rmqueue_buddy` (§5.1.2): HighAtomic first for ALLOC_HIGHATOMIC, then `__rmqueue` from
    /// NORMAL, then HighAtomic as a last resort for ALLOC_OOM / ALLOC_NON_BLOCK.
    pub fn rmqueue_buddy(
        &mut self,
        cpu: u32,
        zi: usize,
        order: u32,
        alloc_flags: AllocFlags,
        mt: MigrateType,
    ) -> Option<u32> {
        let mut page = None;
        // Under one zone->lock hold (the engine's lock model).
        self.work.zone_lock.hold(1);
        if alloc_flags.has(AllocFlags::HIGHATOMIC) {
            page = self.__rmqueue_smallest(cpu, zi, order, MigrateType::HighAtomic);
        }
        if page.is_none() {
            let mut mode = RmqueueMode::Normal;
            page = self.__rmqueue(cpu, zi, order, mt, alloc_flags, &mut mode);
            if page.is_none() && alloc_flags.has(AllocFlags::OOM | AllocFlags::NON_BLOCK) {
                page = self.__rmqueue_smallest(cpu, zi, order, MigrateType::HighAtomic);
            }
        }
        page
    }

    /// `rmqueue` (§5.1): PCP for cached orders, else/then the buddy lists; counts pgalloc and
    /// the NUMA hit; wakes kswapd if a claim attempt boosted the watermark (§3.4.4).
    pub fn rmqueue(
        &mut self,
        cpu: u32,
        zi: usize,
        order: u32,
        alloc_flags: AllocFlags,
        mt: MigrateType,
    ) -> Option<u32> {
        let mut page = None;
        if pcp_allowed_order(order) {
            page = self.rmqueue_pcplist(cpu, zi, order, mt, alloc_flags);
        }
        if page.is_none() {
            page = self.rmqueue_buddy(cpu, zi, order, alloc_flags, mt);
        }
        if let Some(pfn) = page {
            self.pages.set(pfn, PageKind::Allocated, order);
            self.pages.set_a(pfn, NIL);
            // `b` of an allocated head: the migratetype it was allocated for (for the block
            // map's "mixed" census; the kernel keeps no such record outside page_owner).
            self.pages.set_b(pfn, mt as u32);
            self.count(PGALLOC_BY_ZONE[zi % MAX_NR_ZONES], 1 << order);
        }
        if alloc_flags.has(AllocFlags::KSWAPD) && self.zones[zi].flags.boosted_watermark {
            self.zones[zi].flags.boosted_watermark = false;
            let zt = self.zones[zi].zone_type;
            self.wakeup_kswapd(zi, Gfp(0), 0, zt);
        }
        page
    }

    /// `nr_pcp_high` (§2.2.3, §2.4): the effective high for a free, adjusting `pcp.high`.
    fn nr_pcp_high(&mut self, zi: usize, cpu: usize, batch: u64, free_high: bool) -> u64 {
        let flags = self.zones[zi].flags;
        let p = &mut self.zones[zi].pcp[cpu];
        p.high = kclamp(p.high, p.high_min, p.high_max);
        let mut high = p.high;
        if high == 0 {
            return 0;
        }
        if free_high {
            p.high = high.saturating_sub(batch << PCP_BATCH_SCALE_MAX).max(p.high_min);
            return 0;
        }
        if flags.reclaim_active {
            let fc = p.free_count.max(batch);
            p.high = high.saturating_sub(fc).max(p.high_min);
            return (batch << 2).min(p.high);
        }
        if p.high_min == p.high_max {
            return high;
        }
        if flags.below_high {
            let fc = p.free_count.max(batch);
            p.high = high.saturating_sub(fc).max(p.high_min);
            high = p.count.max(p.high_min);
        } else if p.count >= high {
            let need = p.free_count + batch;
            if p.high < need {
                p.high = kclamp(need, p.high_min, p.high_max);
            }
        }
        high
    }

    /// `nr_pcp_free` (§2.4.3).
    fn nr_pcp_free(&self, zi: usize, cpu: usize, batch: u64, high: u64, free_high: bool) -> u64 {
        let p = &self.zones[zi].pcp[cpu];
        if free_high {
            return p.count.min(batch << PCP_BATCH_SCALE_MAX);
        }
        if high < batch {
            return 1;
        }
        kclamp(p.free_count, batch, high - batch)
    }

    /// `free_pcppages_bulk` (§2.1.4): drains `count` pages, one list at a time starting with
    /// `pindex`, oldest (tail) first, each chunk freed with its block's type at drain time
    /// (runs of buddies drained one after the other are freed as whole blocks, with the same
    /// result: `drain_run`).
    pub fn free_pcppages_bulk(&mut self, cpu: u32, zi: usize, count: u64, pindex: usize) {
        let c = cpu as usize;
        let mut count = count.min(self.zones[zi].pcp[c].count) as i64;
        let mut pindex = pindex as isize - 1;
        // One zone->lock hold for the whole call, one chunk per `__free_one_page` of a PCP
        // chunk (the engine's lock model).
        let mut chunks = 0u64;
        while count > 0 {
            let mut idx;
            loop {
                pindex += 1;
                if pindex > NR_PCP_LISTS as isize - 1 {
                    pindex = 0;
                }
                idx = pindex as usize;
                if !self.zones[zi].pcp[c].lists[idx].is_empty() {
                    break;
                }
            }
            let order = pindex_to_order(idx);
            loop {
                let pfn = self.zones[zi].pcp[c].lists[idx].last();
                let mt = self.block_mt(pfn);
                self.pcp_list_del(zi, c, idx, pfn);
                count -= 1 << order;
                self.zones[zi].pcp[c].count -= 1 << order;
                // The run of chunks drained next that continue `pfn` upward or downward in its
                // pageblock (see `drain_run`), taken off the list now and freed below as
                // aligned blocks, in the drain's order.
                let (start, end, down) =
                    if order < PAGEBLOCK_ORDER && self.compact.capc.is_none() && batch_paths() {
                        self.drain_run(zi, c, idx, pfn, order, &mut count)
                    } else {
                        (pfn, pfn + (1 << order), false)
                    };
                // Host-cache hint for a chunk drained a few steps from now and its buddy (the
                // merge loop reads the buddy's state byte, and its link words if it is free),
                // without waiting for either. At order 0 the buddy's state byte and link words
                // lie on the same cache lines as the chunk's (an aligned pair of 1-byte states
                // and of 8-byte link pairs, in arrays at least 16-byte aligned), so one hint
                // covers both.
                let p1 = self.zones[zi].pcp[c].lists[idx].nth_from_tail(DRAIN_PREFETCH);
                if p1 != NIL {
                    self.pages.prefetch(p1);
                    if order > 0 {
                        self.pages.prefetch(p1 ^ (1 << order));
                    }
                }
                if down {
                    let mut e = end;
                    while e > start {
                        let o = drain_block_order_down(start, e, order);
                        e -= 1 << o;
                        self.free_one_page_core(zi, e, o, mt, false);
                    }
                } else {
                    let mut p = start;
                    while p < end {
                        let o = drain_block_order(p, end, order);
                        self.free_one_page_core(zi, p, o, mt, false);
                        p += 1 << o;
                    }
                }
                chunks += ((end - start) >> order) as u64;
                if self.trace_on(trace_kind::MM_PAGE_PCPU_DRAIN) {
                    let ev = |pfn| TraceEvent::MmPagePcpuDrain {
                        pfn,
                        order,
                        migratetype: mt as i32,
                    };
                    let chunks = (start..end).step_by(1 << order);
                    if down {
                        chunks.rev().for_each(|q| self.emit(cpu, ev(q)));
                    } else {
                        chunks.for_each(|q| self.emit(cpu, ev(q)));
                    }
                }
                if count <= 0 || self.zones[zi].pcp[c].lists[idx].is_empty() {
                    break;
                }
            }
        }
        if chunks > 0 {
            self.work.zone_lock.hold(chunks);
        }
    }

    /// The drain's batch merge: after `free_pcppages_bulk` has taken the chunk at `pfn` off
    /// PCP list `idx`, takes off the chunks the page-by-page drain would take next (while
    /// `count` lasts) as long as each is the one right above the previous in the same
    /// pageblock (an ascending run) or each the one right below (a descending run, `down`),
    /// and returns the run as `[start, end)`. The caller frees the run, with `pfn`'s block
    /// type, as the aligned blocks `drain_block_order` cuts an ascending run into from its
    /// start, or `drain_block_order_down` a descending one from its end: in the drain's order.
    ///
    /// Why that is the page-by-page result (§1.5, §2.1.4): the chunks of one aligned block
    /// `B` of the run are drained one after the other (the run is monotonic), so while they
    /// are freed nothing else changes. Every one of them but the last finds the buddies that
    /// would complete `B` not yet freed (on the PCP list, or here already off it: not
    /// PageBuddy either way), so it merges only with free pieces of `B`, and the last
    /// completes `B` and merges on from `B`'s order exactly as a free of `B` does
    /// (the merge loop's state at that order — chunk, order, type, the buddy it looks at next
    /// — is the same). The pieces of `B` put on free lists in between are all taken off again:
    /// an insertion at the head or tail followed by the removal of the same element leaves
    /// every other element of the list where it was, so the lists' contents and order, the
    /// per-order counts and the page states end as after the free of `B`; NR_FREE_PAGES moves
    /// by the same sum; no piece reaches pageblock order, so no NR_FREE_PAGES_BLOCKS or
    /// pageblock retyping happens before `B` is whole. One pageblock means one block type,
    /// which nothing in the run can change (a merge at order ≥ pageblock_order retypes only
    /// the other block). The mm_page_pcpu_drain events carry only the chunk, its order and
    /// that type, and are emitted in the same order. Not used while a compactor's capture is
    /// armed (a capture could take a piece of `B`). Free page reporting's notification
    /// (§32.2 item 1) only marks a pass wanted, at this same instant, and the free of `B`
    /// reaches at least every order the frees of its pieces would.
    #[inline]
    fn drain_run(
        &mut self,
        zi: usize,
        c: usize,
        idx: usize,
        pfn: u32,
        order: u32,
        count: &mut i64,
    ) -> (u32, u32, bool) {
        let size = 1u32 << order;
        let (mut start, mut end) = (pfn, pfn + size);
        let next = self.zones[zi].pcp[c].lists[idx].last();
        let down = next != NIL && next == pfn.wrapping_sub(size);
        while *count > 0 {
            let q = if down {
                if start & (PAGEBLOCK_NR_PAGES - 1) == 0 {
                    break;
                }
                start - size
            } else {
                if end & (PAGEBLOCK_NR_PAGES - 1) == 0 {
                    break;
                }
                end
            };
            if self.zones[zi].pcp[c].lists[idx].last() != q {
                break;
            }
            self.pcp_list_del(zi, c, idx, q);
            *count -= size as i64;
            self.zones[zi].pcp[c].count -= size as u64;
            if down {
                start = q;
            } else {
                end += size;
            }
        }
        #[cfg(test)]
        tests::note(1 + down as usize, ((end - start) >> order) as u64 - 1);
        (start, end, down)
    }

    /// `free_frozen_page_commit` (§2.4).
    fn free_frozen_page_commit(&mut self, cpu: u32, zi: usize, pfn: u32, mt: MigrateType, order: u32) {
        let c = cpu as usize;
        let pindex = order_to_pindex(mt, order);
        self.pcp_list_add(zi, c, pindex, pfn, order, false);
        let p = &mut self.zones[zi].pcp[c];
        p.alloc_factor >>= 1;
        p.count += 1 << order;
        let batch = p.batch;
        let mut free_high = false;
        if order > 0 && order <= PAGE_ALLOC_COSTLY_ORDER {
            free_high = p.free_count >= batch + p.high_min / 2
                && p.flags & PCPF_PREV_FREE_HIGH_ORDER != 0
                && (p.flags & PCPF_FREE_HIGH_BATCH == 0 || p.count >= batch);
            p.flags |= PCPF_PREV_FREE_HIGH_ORDER;
        } else if p.flags & PCPF_PREV_FREE_HIGH_ORDER != 0 {
            p.flags &= !PCPF_PREV_FREE_HIGH_ORDER;
        }
        if p.free_count < (batch << PCP_BATCH_SCALE_MAX) {
            p.free_count += 1 << order;
        }
        let high = self.nr_pcp_high(zi, c, batch, free_high);
        if self.zones[zi].pcp[c].count < high {
            return;
        }
        let n = self.nr_pcp_free(zi, c, batch, high, free_high);
        self.free_pcppages_bulk(cpu, zi, n, pindex);
        if self.zones[zi].flags.below_high {
            let mark = self.zones[zi].wmark_pages(WMARK_HIGH);
            if self.zone_watermark_ok(zi, 0, mark, ZoneType::Movable, AllocFlags(0)) {
                self.zones[zi].flags.below_high = false;
            }
        }
    }

    /// Frees a chunk allocated by [`Mm::alloc_pages`] (`__free_pages` → `__free_frozen_pages`,
    /// §1.5, §2.4): orders the PCP caches go to the CPU's list (HighAtomic blocks to the
    /// MOVABLE list, Isolate blocks straight to the buddy), others to the buddy lists, split
    /// into pageblocks first. Counts pgfree and emits mm_page_free. The list is chosen by the
    /// block's type at free time (`get_pfnblock_migratetype`, §2.1.3), not by the type the
    /// page was allocated with (docs/pageblock-mixing.md rule 4).
    pub fn free_pages(&mut self, cpu: u32, pfn: u32, order: u32) {
        assert!(
            self.pages.kind(pfn) == PageKind::Allocated && self.pages.order(pfn) == order,
            "free of pfn {pfn:#x} order {order}: not an allocated chunk of that order ({:?} order {})",
            self.pages.kind(pfn),
            self.pages.order(pfn)
        );
        assert!(cpu < self.nr_cpus, "cpu {cpu} out of range");
        let zi = self.zone_of(pfn);
        self.free_pages_zone(cpu, zi, pfn, order);
    }

    /// [`Mm::free_pages`] of an allocated chunk whose zone `zi` the caller knows
    /// (`free_folio_run` has it from the folio's accounting).
    #[inline]
    pub(crate) fn free_pages_zone(&mut self, cpu: u32, zi: usize, pfn: u32, order: u32) {
        debug_assert!(self.pages.kind(pfn) == PageKind::Allocated && self.pages.order(pfn) == order);
        debug_assert!(cpu < self.nr_cpus && zi == self.zone_of(pfn));
        if self.trace_on(trace_kind::MM_PAGE_FREE) {
            self.emit(cpu, TraceEvent::MmPageFree { pfn, order });
        }
        self.count(Stat::pgfree, 1 << order);
        self.pages.set(pfn, PageKind::Tail, 0);
        if !pcp_allowed_order(order) {
            // `free_one_page`: one zone->lock hold (the engine's lock model).
            self.work.zone_lock.hold(1);
            self.split_large_buddy(zi, pfn, order, false);
            return;
        }
        let mut mt = self.block_mt(pfn);
        if mt.idx() >= MIGRATE_PCPTYPES {
            if mt == MigrateType::Isolate {
                self.work.zone_lock.hold(1);
                self.split_large_buddy(zi, pfn, order, false);
                return;
            }
            mt = MigrateType::Movable;
        }
        self.free_frozen_page_commit(cpu, zi, pfn, mt, order);
    }

    /// `free_one_page` (§1.5.4): frees a chunk straight to the buddy lists, bypassing the PCP
    /// (split into pageblocks first). The chunk need not have been marked allocated: this is
    /// the primitive under `free_pages` for non-cached orders and Isolate blocks.
    pub fn free_one_page(&mut self, pfn: u32, order: u32) {
        let zi = self.zone_of(pfn);
        self.work.zone_lock.hold(1);
        self.split_large_buddy(zi, pfn, order, false);
    }

    /// `drain_pages_zone` (§2.5): everything on one CPU's lists of one zone back to the buddy.
    pub fn drain_pages_zone(&mut self, cpu: u32, zi: usize) {
        loop {
            let p = &self.zones[zi].pcp[cpu as usize];
            if p.count == 0 {
                break;
            }
            let n = p.count.min(p.batch << PCP_BATCH_SCALE_MAX);
            self.free_pcppages_bulk(cpu, zi, n, 0);
        }
    }

    /// Pages on every PCP list of every zone.
    pub fn pcp_pages_total(&self) -> u64 {
        self.zones
            .iter()
            .flat_map(|z| z.pcp.iter())
            .map(|p| p.count)
            .sum()
    }

    /// `drain_all_pages(NULL)`: every CPU, every populated zone. Returns the number of CPUs
    /// that had pages (the IPIs the kernel would send).
    pub fn drain_all_pages(&mut self) -> u32 {
        let mut ipis = 0;
        for cpu in 0..self.nr_cpus {
            if self
                .zones
                .iter()
                .any(|z| z.populated() && z.pcp[cpu as usize].count > 0)
            {
                ipis += 1;
                for zi in 0..self.zones.len() {
                    if self.zones[zi].populated() {
                        self.drain_pages_zone(cpu, zi);
                    }
                }
            }
        }
        ipis
    }

    /// `decay_pcp_high` (§2.2.3): the vmstat-interval decay of `high` toward `high_min`,
    /// draining the excess. Called by the engine every second.
    pub fn decay_pcp_high(&mut self, cpu: u32, zi: usize) {
        let p = &mut self.zones[zi].pcp[cpu as usize];
        if p.high > p.high_min {
            let a = p.count.saturating_sub(p.batch << PCP_BATCH_SCALE_MAX);
            p.high = a.max(p.high - (p.high >> 3)).max(p.high_min);
        }
        let to_drain = p.count as i64 - p.high as i64;
        if to_drain > 0 {
            self.free_pcppages_bulk(cpu, zi, to_drain as u64, 0);
        }
    }

    // ---- watermarks (§3.3) ----------------------------------------------------------------------

    /// `__zone_watermark_unusable_free`.
    fn zone_watermark_unusable_free(&self, zi: usize, order: u32, alloc_flags: AllocFlags) -> i64 {
        let mut unusable = (1i64 << order) - 1;
        if !alloc_flags.has(AllocFlags::RESERVES) {
            unusable += self.zones[zi].nr_free_highatomic as i64;
        }
        unusable
    }

    /// `__zone_watermark_ok` (§3.3).
    pub fn __zone_watermark_ok(
        &self,
        zi: usize,
        order: u32,
        mark: u64,
        highest: ZoneType,
        alloc_flags: AllocFlags,
        free: i64,
    ) -> bool {
        let z = &self.zones[zi];
        let mut min = mark as i64;
        let free = free - self.zone_watermark_unusable_free(zi, order, alloc_flags);
        if alloc_flags.has(AllocFlags::RESERVES) {
            if alloc_flags.has(AllocFlags::MIN_RESERVE) {
                min -= min / 2;
                if alloc_flags.has(AllocFlags::NON_BLOCK) {
                    min -= min / 4;
                }
            }
            if alloc_flags.has(AllocFlags::OOM) {
                min -= min / 2;
            }
        }
        if free <= min + z.lowmem_reserve[highest.idx()] as i64 {
            return false;
        }
        if order == 0 {
            return true;
        }
        for o in order..=MAX_PAGE_ORDER {
            if z.area.nr_free[o as usize] == 0 {
                continue;
            }
            for mt in 0..MIGRATE_PCPTYPES {
                if !z.free_list_empty(o, MigrateType::from_index(mt)) {
                    return true;
                }
            }
            if alloc_flags.has(AllocFlags::HIGHATOMIC | AllocFlags::OOM)
                && !z.free_list_empty(o, MigrateType::HighAtomic)
            {
                return true;
            }
        }
        false
    }

    /// `zone_watermark_ok` with the zone's NR_FREE_PAGES.
    pub fn zone_watermark_ok(
        &self,
        zi: usize,
        order: u32,
        mark: u64,
        highest: ZoneType,
        alloc_flags: AllocFlags,
    ) -> bool {
        self.__zone_watermark_ok(
            zi,
            order,
            mark,
            highest,
            alloc_flags,
            self.zones[zi].nr_free_pages(),
        )
    }

    /// `zone_watermark_fast` (§3.3.5): an order-0 shortcut, and for __GFP_HIGH order-0 at the
    /// min watermark a retry that ignores the boost.
    pub fn zone_watermark_fast(
        &self,
        zi: usize,
        order: u32,
        mark: u64,
        highest: ZoneType,
        alloc_flags: AllocFlags,
    ) -> bool {
        let z = &self.zones[zi];
        let free = z.nr_free_pages();
        if order == 0 {
            let reserved = self.zone_watermark_unusable_free(zi, 0, alloc_flags);
            let usable = free - free.min(reserved);
            if usable > (mark + z.lowmem_reserve[highest.idx()]) as i64 {
                return true;
            }
        }
        if self.__zone_watermark_ok(zi, order, mark, highest, alloc_flags, free) {
            return true;
        }
        if order == 0
            && alloc_flags.has(AllocFlags::MIN_RESERVE)
            && z.watermark_boost > 0
            && alloc_flags.wmark() == AllocFlags::WMARK_MIN
        {
            return self.__zone_watermark_ok(zi, order, z.wmark[WMARK_MIN], highest, alloc_flags, free);
        }
        false
    }

    // ---- the allocation entry and get_page_from_freelist (§4) --------------------------------

    /// `prepare_alloc_pages` for node 0 without a memory policy (the context of a single-node
    /// machine's allocations; tests and callers without a CPU use it).
    pub fn alloc_context(&self, gfp: Gfp) -> AllocContext {
        self.alloc_context_node(gfp, 0, u64::MAX)
    }

    /// `prepare_alloc_pages` for an allocation preferring node `nid` and limited to
    /// `nodemask`: highest zone from the gfp, migratetype, the node's zonelist (its own node
    /// only for __GFP_THISNODE), the preferred zoneref = the first usable zone of it
    /// (§1.1.4–5).
    pub fn alloc_context_node(&self, gfp: Gfp, nid: u32, nodemask: u64) -> AllocContext {
        let mut ac = AllocContext {
            highest_zoneidx: gfp.zone(),
            migratetype: gfp.migratetype(),
            preferred_zone: None,
            nid,
            zref: 0,
            nodemask,
            thisnode: self.numa.multi() && gfp.intersects(Gfp::THISNODE),
        };
        let mut k = 0;
        if let Some(zi) = self.next_zone(&ac, &mut k) {
            ac.preferred_zone = Some(zi);
            ac.zref = k - 1;
        }
        ac
    }

    /// `prepare_alloc_pages` for the task now running (`mm.cur`) on `cpu`: its memory policy
    /// picks the preferred node and the nodemask (`policy_node`, `policy_nodemask`; an
    /// interleave policy takes its next node), on a single node machine node 0.
    pub fn alloc_context_cpu(&mut self, cpu: u32, gfp: Gfp) -> AllocContext {
        if !self.numa.multi() {
            return self.alloc_context(gfp);
        }
        let (nid, mask) = self.policy_node(cpu);
        self.alloc_context_node(gfp, nid, mask)
    }

    /// The usable zones of the context's zonelist from position `k` on
    /// (`for_next_zone_zonelist_nodemask` as an iterator).
    pub fn zonelist_from<'a>(
        &'a self,
        ac: &'a AllocContext,
        mut k: usize,
    ) -> impl Iterator<Item = usize> + 'a {
        std::iter::from_fn(move || self.next_zone(ac, &mut k))
    }

    /// `for_next_zone_zonelist_nodemask`: the next zone of the context's zonelist from
    /// position `*k` that is populated, at or below the highest usable zone and on an allowed
    /// node; advances `*k` past it.
    #[inline]
    pub fn next_zone(&self, ac: &AllocContext, k: &mut usize) -> Option<usize> {
        let zl = &self.numa.zonelists[ac.nid as usize];
        while let Some(&zi) = zl.get(*k) {
            *k += 1;
            let z = &self.zones[zi];
            if z.zone_type <= ac.highest_zoneidx && z.populated() && ac.node_allowed(z.nid) {
                return Some(zi);
            }
        }
        None
    }

    /// `alloc_flags_nofragment` (§4.2, §8 D1): ALLOC_KSWAPD from the gfp; NOFRAGMENT always
    /// with defrag_mode, otherwise only when the preferred zone is Normal and DMA32 exists.
    pub fn alloc_flags_nofragment(&self, preferred: Option<usize>, gfp: Gfp) -> AllocFlags {
        let mut f = AllocFlags(gfp.0 & Gfp::KSWAPD_RECLAIM.0);
        debug_assert_eq!(Gfp::KSWAPD_RECLAIM.0, AllocFlags::KSWAPD);
        if self.defrag_nofragment() {
            f.set(AllocFlags::NOFRAGMENT);
            return f;
        }
        let Some(zi) = preferred else { return f };
        if self.zones[zi].zone_type != ZoneType::Normal {
            return f;
        }
        // On one node "if Normal is populated then so is DMA32" is assumed; on several the
        // node's DMA32 must be populated (a node above 4 GiB has none). CONFIG_ZONE_DMA32 is
        // on for x86-64.
        if self.numa.multi() && !self.zones[zi - 1].populated() {
            return f;
        }
        f.set(AllocFlags::NOFRAGMENT);
        f
    }

    /// `get_page_from_freelist` (§4.3, §8 D2): the zonelist from the preferred zone on; the
    /// high-watermark test only maintains ZONE_BELOW_HIGH; the allocation's watermark decides;
    /// a failed NOFRAGMENT pass is retried without it unless defrag_mode.
    ///
    /// On several nodes (`nr_online_nodes > 1`): NOFRAGMENT is dropped, and the walk
    /// restarted, as soon as it would move to a remote node ("locality is more important than
    /// fragmentation avoidance"; not with defrag_mode); the first pass skips nodes whose
    /// kswapd is running and, if it skipped any and found nothing, a second pass takes any
    /// node; a zone failing its watermark is reclaimed on its node first when
    /// `vm.zone_reclaim_mode` allows (`node_reclaim`). Not modelled: `spread_dirty_pages`
    /// (per-node dirty limits for page-cache writes).
    pub fn get_page_from_freelist(
        &mut self,
        cpu: u32,
        gfp: Gfp,
        order: u32,
        mut alloc_flags: AllocFlags,
        ac: &AllocContext,
    ) -> Option<u32> {
        let preferred = ac.preferred_zone?;
        let multi = self.numa.multi();
        let local_nid = self.zones[preferred].nid;
        let mut skip_kswapd_nodes = multi;
        let mut skipped_kswapd_nodes = false;
        'retry: loop {
            let no_fallback = alloc_flags.has(AllocFlags::NOFRAGMENT);
            let mut k = ac.zref;
            while let Some(zi) = self.next_zone(ac, &mut k) {
                let nid = self.zones[zi].nid;
                if multi && no_fallback && !self.defrag_nofragment() && zi != preferred && nid != local_nid {
                    alloc_flags.clear(AllocFlags::NOFRAGMENT);
                    continue 'retry;
                }
                if skip_kswapd_nodes && self.kswapd_running(nid) {
                    skipped_kswapd_nodes = true;
                    continue;
                }
                let mut ok = false;
                if !self.zones[zi].flags.below_high {
                    let mark = self.zones[zi].wmark_pages(WMARK_HIGH);
                    if self.zone_watermark_fast(zi, order, mark, ac.highest_zoneidx, alloc_flags) {
                        ok = true;
                    } else {
                        self.zones[zi].flags.below_high = true;
                    }
                }
                if !ok {
                    let mark = self.zones[zi].wmark_pages(alloc_flags.wmark() as usize);
                    if !self.zone_watermark_fast(zi, order, mark, ac.highest_zoneidx, alloc_flags)
                        && !alloc_flags.has(AllocFlags::NO_WATERMARKS)
                    {
                        if self.numa.zone_reclaim_mode == 0 || !self.numa.zone_allows_reclaim(local_nid, nid)
                        {
                            continue;
                        }
                        match self.node_reclaim(nid, cpu, gfp, order) {
                            crate::vmscan::NodeReclaim::NoScan | crate::vmscan::NodeReclaim::Full => continue,
                            crate::vmscan::NodeReclaim::Reclaimed(_) => {
                                if !self.zone_watermark_ok(zi, order, mark, ac.highest_zoneidx, alloc_flags) {
                                    continue;
                                }
                            }
                        }
                    }
                }
                if let Some(pfn) = self.rmqueue(cpu, zi, order, alloc_flags, ac.migratetype) {
                    self.zone_statistics(preferred, zi, cpu, 1);
                    if alloc_flags.has(AllocFlags::HIGHATOMIC) {
                        self.reserve_highatomic_pageblock(zi, pfn, order);
                    }
                    return Some(pfn);
                }
            }
            if skip_kswapd_nodes && skipped_kswapd_nodes {
                skip_kswapd_nodes = false;
                continue;
            }
            if no_fallback && !self.defrag_nofragment() {
                alloc_flags.clear(AllocFlags::NOFRAGMENT);
                continue;
            }
            return None;
        }
    }

    /// `zone_statistics(preferred_zone, z, nr)`: numa_hit on the serving zone if it is on the
    /// preferred zone's node, else numa_miss there and numa_foreign on the preferred zone;
    /// numa_local or numa_other by whether the serving zone is on the allocating CPU's node.
    #[inline]
    pub(crate) fn zone_statistics(&mut self, preferred: usize, zi: usize, cpu: u32, nr: u64) {
        use crate::numa::*;
        let nid = self.zones[zi].nid;
        if nid == self.zones[preferred].nid {
            self.zones[zi].numa[NUMA_HIT] += nr;
        } else {
            self.zones[zi].numa[NUMA_MISS] += nr;
            self.zones[preferred].numa[NUMA_FOREIGN] += nr;
        }
        let local = if nid == self.numa.cpu_to_node(cpu) {
            NUMA_LOCAL
        } else {
            NUMA_OTHER
        };
        self.zones[zi].numa[local] += nr;
    }

    /// `reserve_highatomic_pageblock` (§5.5.1).
    fn reserve_highatomic_pageblock(&mut self, zi: usize, pfn: u32, order: u32) {
        let managed = self.zones[zi].managed;
        let pb = PAGEBLOCK_NR_PAGES as u64;
        if managed / 100 < pb {
            return;
        }
        let max_managed = (managed / 100).div_ceil(pb) * pb;
        if self.zones[zi].nr_reserved_highatomic >= max_managed {
            return;
        }
        let mt = self.block_mt(pfn);
        if !mt.is_mergeable() {
            return;
        }
        if order < PAGEBLOCK_ORDER {
            if self
                .move_freepages_block(zi, pfn, mt, MigrateType::HighAtomic)
                .is_none()
            {
                return;
            }
            self.zones[zi].nr_reserved_highatomic += pb;
        } else {
            self.change_pageblock_range(pfn, order, MigrateType::HighAtomic);
            self.zones[zi].nr_reserved_highatomic += 1 << order;
        }
    }

    /// `unreserve_highatomic_pageblock` (§5.5.3): gives one HighAtomic chunk's block(s) back to
    /// `ac.migratetype`. Without `force`, keeps at least one block. Returns whether it moved any.
    pub fn unreserve_highatomic_pageblock(&mut self, ac: &AllocContext, force: bool) -> bool {
        let mut k = ac.zref;
        while let Some(zi) = self.next_zone(ac, &mut k) {
            if !force && self.zones[zi].nr_reserved_highatomic <= PAGEBLOCK_NR_PAGES as u64 {
                continue;
            }
            for order in 0..=MAX_PAGE_ORDER {
                let Some(pfn) = self.zones[zi].free_list_first(order, MigrateType::HighAtomic) else {
                    continue;
                };
                let size = (PAGEBLOCK_NR_PAGES as u64)
                    .max(1 << order)
                    .min(self.zones[zi].nr_reserved_highatomic);
                self.zones[zi].nr_reserved_highatomic -= size;
                let moved = if order < PAGEBLOCK_ORDER {
                    self.move_freepages_block(zi, pfn, MigrateType::HighAtomic, ac.migratetype)
                        .unwrap_or(0)
                } else {
                    self.move_to_free_list(zi, pfn, order, MigrateType::HighAtomic, ac.migratetype);
                    self.change_pageblock_range(pfn, order, ac.migratetype);
                    1
                };
                if moved > 0 {
                    return true;
                }
            }
        }
        false
    }

    /// `gfp_to_alloc_flags` (§7.2): the slow path's flags; defrag_mode adds NOFRAGMENT (§8 D3).
    pub fn gfp_to_alloc_flags(&self, gfp: Gfp, order: u32) -> AllocFlags {
        let mut f = AllocFlags(AllocFlags::WMARK_MIN | AllocFlags::CPUSET);
        f.set(gfp.0 & (Gfp::HIGH.0 | Gfp::KSWAPD_RECLAIM.0));
        if !gfp.intersects(Gfp::DIRECT_RECLAIM) {
            if !gfp.intersects(Gfp::NOMEMALLOC) {
                f.set(AllocFlags::NON_BLOCK);
                if order > 0 && f.has(AllocFlags::MIN_RESERVE) {
                    f.set(AllocFlags::HIGHATOMIC);
                }
            }
            if f.has(AllocFlags::MIN_RESERVE) {
                f.clear(AllocFlags::CPUSET);
            }
        }
        if self.defrag_nofragment() {
            f.set(AllocFlags::NOFRAGMENT);
        }
        f
    }

    /// `wake_all_kswapds` (§7.3, §8 D6 when `pageblock_order_wake`).
    pub(crate) fn wake_all_kswapds(&mut self, order: u32, gfp: Gfp, ac: &AllocContext) {
        let Some(preferred) = ac.preferred_zone else {
            return;
        };
        let reclaim_order = self.policy.kswapd_wake_order(self.tun.defrag_mode, order);
        // One wake per node of the zonelist, at the node's first zone in it.
        if !self.numa.multi() {
            self.wakeup_kswapd(preferred, gfp, reclaim_order, ac.highest_zoneidx);
            return;
        }
        let mut k = 0;
        let mut woken = 0u64;
        while let Some(zi) = self.next_zone(ac, &mut k) {
            let nid = self.zones[zi].nid;
            if self.zones[zi].managed > 0 && woken & (1 << nid) == 0 {
                woken |= 1 << nid;
                self.wakeup_kswapd(zi, gfp, reclaim_order, ac.highest_zoneidx);
            }
        }
    }

    /// The allocation entry, `__alloc_pages` (§4.4): the fast path at the low watermark, then
    /// the slow path. Emits mm_page_alloc for success and failure.
    ///
    /// What the slow path did is left in `mm.work.last_alloc` for whoever charges time for it.
    /// With a free page reporting device, the chunk counts as written (`Mm::host_write`, §32).
    pub fn alloc_pages(&mut self, cpu: u32, gfp: Gfp, order: u32) -> Option<u32> {
        if order > MAX_PAGE_ORDER {
            // The kernel warns (unless __GFP_NOWARN) and returns NULL, without a trace event.
            return None;
        }
        assert!(cpu < self.nr_cpus, "cpu {cpu} out of range");
        self.work.last_alloc = crate::slowpath::AllocWork::default();
        let ac = self.alloc_context_cpu(cpu, gfp);
        let mut alloc_flags = AllocFlags(AllocFlags::WMARK_LOW);
        alloc_flags.set(self.alloc_flags_nofragment(ac.preferred_zone, gfp).0);
        let mut page = self.get_page_from_freelist(cpu, gfp, order, alloc_flags, &ac);
        if page.is_none() {
            page = self.alloc_pages_slowpath(cpu, gfp, order, &ac);
        }
        let w = self.work.last_alloc;
        self.work.sum.add(&w);
        if let (true, Some(pfn)) = (self.blame.is_some(), page) {
            // Issue 37: who allocated the chunk, and a type mismatch with its block that no
            // fallback of this type in the block explains (docs/pageblock-mixing.md rule 3).
            let bmt = self.block_mt(pfn).idx();
            if let Some(b) = self.blame.as_deref_mut() {
                b.note_alloc(pfn);
                b.note_placed(pfn, order, ac.migratetype.idx(), bmt);
            }
        }
        if let (Some(pfn), true) = (page, self.reporting.enabled()) {
            // Free page reporting (§32.3 item 6): the chunk's user writes it at once (a fault
            // zeroes it, a read fills it); pages the host discarded take host faults.
            self.host_write(pfn, 1 << order);
        }
        if self.trace_on(trace_kind::MM_PAGE_ALLOC) {
            self.emit(
                cpu,
                TraceEvent::MmPageAlloc {
                    pfn: page,
                    order,
                    gfp,
                    migratetype: ac.migratetype as i32,
                },
            );
        }
        if self.policy_work_pending && gfp.intersects(Gfp::DIRECT_RECLAIM) {
            self.run_policy_work();
        }
        page
    }

    /// Marks an allocated chunk as on (or off) the LRU, and records its owner id. LRU pages
    /// count as "movable" in `try_to_claim_block` (§6.3c).
    pub fn set_page_owner(&mut self, pfn: u32, owner: u32, lru: bool) {
        assert_eq!(
            self.pages.kind(pfn),
            PageKind::Allocated,
            "pfn {pfn:#x} is not an allocated head"
        );
        self.pages.set_a(pfn, owner);
        self.pages.set_flag(pfn, PG_LRU, lru);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cell::Cell;

    thread_local! {
        /// Set: `rmqueue_bulk` and `free_pcppages_bulk` go page by page (the reference).
        pub(super) static PAGE_BY_PAGE: Cell<bool> = const { Cell::new(false) };
        /// Chunks handed out by `rmqueue_carve`; chunks `drain_run` joined to an ascending, to
        /// a descending run.
        static BATCHED: Cell<[u64; 3]> = const { Cell::new([0; 3]) };
    }

    pub(super) fn note(what: usize, n: u64) {
        BATCHED.with(|b| {
            let mut v = b.get();
            v[what] += n;
            b.set(v);
        });
    }

    fn machine() -> Mm {
        crate::test_machines::dma32_normal(trace_kind::ALL)
    }

    /// Everything the refill and the drain may touch, rendered comparable: zones (free lists,
    /// counts, PCP lists and state, zone counters), page array, pageblock bits, vmstat, trace.
    fn state(mm: &Mm) -> String {
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            mm.zones, mm.pages, mm.blocks, mm.stats, mm.trace.buf
        )
    }

    /// One machine and the chunks it has allocated, oldest first.
    struct Run {
        mm: Mm,
        live: Vec<(u32, u32)>,
        pages: u64,
    }

    /// One operation: (kind, a, b).
    type Op = (u8, u8, u16);

    const GFPS: [Gfp; 5] = [
        Gfp::GFP_HIGHUSER_MOVABLE,
        Gfp::GFP_KERNEL,
        Gfp(Gfp::GFP_KERNEL.0 | Gfp::RECLAIMABLE.0),
        Gfp(Gfp::GFP_KERNEL.0 | Gfp::DMA32.0),
        Gfp::GFP_ATOMIC,
    ];

    impl Run {
        fn apply(&mut self, (kind, a, b): Op) {
            let cpu = (a & 1) as u32;
            match kind % 8 {
                0..=2 => {
                    let order = [0, 0, 0, 0, 1, 2, 3, 9][(a >> 1) as usize % 8];
                    if self.pages + (1 << order) > 18_000 {
                        return;
                    }
                    let gfp = if order == 9 {
                        Gfp::GFP_TRANSHUGE_LIGHT
                    } else {
                        GFPS[(a >> 4) as usize % GFPS.len()]
                    };
                    // A batch of allocations of one kind, as a fault run makes.
                    for _ in 0..1 + b % 48 {
                        if let Some(pfn) = self.mm.alloc_pages(cpu, gfp, order) {
                            self.live.push((pfn, order));
                            self.pages += 1 << order;
                        }
                    }
                }
                3 | 4 => {
                    // The oldest chunks, in allocation order (ascending runs for the drain).
                    let n = (1 + b as usize % 96).min(self.live.len());
                    for (pfn, order) in self.live.drain(..n).collect::<Vec<_>>() {
                        self.mm.free_pages(cpu, pfn, order);
                        self.pages -= 1 << order;
                    }
                }
                5 => {
                    // The newest chunks, newest first.
                    for _ in 0..1 + b % 32 {
                        let Some((pfn, order)) = self.live.pop() else {
                            break;
                        };
                        self.mm.free_pages(cpu, pfn, order);
                        self.pages -= 1 << order;
                    }
                }
                6 => {
                    // Chunks at random.
                    for i in 0..1 + (b % 16) as usize {
                        if self.live.is_empty() {
                            break;
                        }
                        let j = (b as usize * 7919 + i * 104_729) % self.live.len();
                        let (pfn, order) = self.live.swap_remove(j);
                        self.mm.free_pages(cpu, pfn, order);
                        self.pages -= 1 << order;
                    }
                }
                _ => {
                    if b % 3 == 0 {
                        self.mm.drain_all_pages();
                    } else {
                        self.mm.decay_pcp_high(cpu, 1 + (b % 2) as usize);
                    }
                }
            }
        }
    }

    fn run_both(ops: &[Op]) -> Result<(), TestCaseError> {
        let mut r = [
            Run {
                mm: machine(),
                live: Vec::new(),
                pages: 0,
            },
            Run {
                mm: machine(),
                live: Vec::new(),
                pages: 0,
            },
        ];
        for &op in ops {
            for (i, run) in r.iter_mut().enumerate() {
                PAGE_BY_PAGE.with(|c| c.set(i == 0));
                run.apply(op);
            }
            PAGE_BY_PAGE.with(|c| c.set(false));
            prop_assert_eq!(&r[0].live, &r[1].live);
            prop_assert_eq!(format!("{:?}", r[0].mm.zones), format!("{:?}", r[1].mm.zones));
        }
        prop_assert_eq!(state(&r[0].mm), state(&r[1].mm));
        prop_assert!(r[1].mm.check_invariants().is_ok());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// The batch paths of the refill (`rmqueue_carve`) and the drain (`drain_run`)
        /// leave the state the page-by-page paths leave: free lists in the same order and with
        /// the same counts, PCP lists in the same order, page states and links, pageblock
        /// types, zone and node counters, and the trace events in the same order.
        #[test]
        fn batch_paths_match_page_by_page(ops in proptest::collection::vec(any::<Op>(), 1..300)) {
            run_both(&ops)?;
        }
    }

    /// The batch paths are taken (so the property above compares something): order-0 refills
    /// carve from higher-order chunks, freeing in allocation order drains ascending runs and
    /// freeing newest first descending ones.
    #[test]
    fn batch_paths_are_taken() {
        BATCHED.with(|b| b.set([0; 3]));
        let ops: Vec<Op> = (0..250u16)
            .map(|i| match i % 5 {
                0 | 1 => (0, (i % 2) as u8, 40),
                2 => (3, (i % 2) as u8, 90),
                3 => (5, (i % 2) as u8, 31),
                _ => (7, 0, i % 3),
            })
            .collect();
        run_both(&ops).unwrap();
        let [carved, up, down] = BATCHED.with(|b| b.get());
        assert!(
            carved > 100 && up > 100 && down > 100,
            "carved {carved}, joined up {up}, down {down}"
        );
    }
}
