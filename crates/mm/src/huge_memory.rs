//! Anonymous THP and mTHP faults (docs/model §11): the fault-time gfp of every
//! `transparent_hugepage/defrag` value (`vma_thp_gfp_mask`), the PMD-order first attempt with
//! __GFP_THISNODE|__GFP_NORETRY then the full one, the mTHP order ladder of the per-size
//! `enabled` knobs, the order-0 fallback, and the counters thp_fault_alloc / thp_fault_fallback
//! and the per-size anon_fault_alloc / anon_fault_fallback. Models mm/huge_memory.c,
//! mm/memory.c alloc_anon_folio and mm/mempolicy.c alloc_pages_mpol.
//!
//! Simplification: no memcg, so charge failures (`*_fallback_charge`) never happen (§19.1.3);
//! the faulting range is assumed PMD-aligned, inside the VMA and unpopulated.
//!
//! Partial unmapping of large anonymous folios and the deferred split (§31; huge_memory.c
//! `__split_huge_pmd`, `deferred_split_folio`, `deferred_split_scan`, `thp_underused`,
//! `__folio_split`; rmap.c `__folio_remove_rmap`; shrinker.c `do_shrink_slab`): a zap of part
//! of a large anon folio ([`Mm::zap_anon_folio`]) splits a PMD mapping, unmaps the subpages and
//! queues the folio, whole, on the node's deferred split queue ([`DeferredSplit`]); a later
//! zap of the rest frees it whole; the queue's shrinker, run by `shrink_slab` (kswapd, direct
//! reclaim) and `drop_slab`, splits it and frees its unmapped and zero-filled subpages as
//! order-0 pages. The state per folio is kept only for folios that need it: the flags
//! `Folio::deferred`, `partially_mapped`, `pmd_split`, and a [`SubpageMap`] (the mapped and
//! the written subpages) for a partially unmapped folio, or for every PMD THP while
//! `thp_underused` can be true. Simplified: one queue for the whole machine, scanned by every
//! node's shrinker (the kernel keeps one per node and per memcg); a written subpage
//! is taken as non-zero and a never-written one as zero-filled; the owner of the mapping
//! tells the model which subpages it wrote ([`Mm::anon_folio_written`]).

use std::collections::{HashMap, VecDeque};

use crate::folio::{FolioId, FolioKind, IdHasher};
use crate::gfp::Gfp;
use crate::node::Mm;
use crate::types::*;
use crate::vmstat::Stat;

pub use fraglab_types::switches::{ThpDefrag, ThpEnabled};

/// The THP knobs (§11.1), with the S2 defaults.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ThpConfig {
    pub enabled: ThpEnabled,
    pub defrag: ThpDefrag,
    /// `hugepages-<N>kB/enabled` for anon orders 2..=9 (index = order); orders 0, 1 and 10 unused.
    pub per_size: [ThpEnabled; NR_PAGE_ORDERS],
    /// `transparent_hugepage/shrink_underused` (`split_underused_thp`, §31.3 item 1): every
    /// PMD THP a fault maps is queued on the deferred split queue (kind (b) entries).
    pub shrink_underused: bool,
    /// `transparent_hugepage/khugepaged/max_ptes_none`: `thp_underused` (§31.3 item 5) is
    /// false at 511 (HPAGE_PMD_NR − 1), else true once more subpages than this are zero-filled.
    pub max_ptes_none: u32,
}

impl Default for ThpConfig {
    fn default() -> Self {
        let mut per_size = [ThpEnabled::Never; NR_PAGE_ORDERS];
        per_size[HPAGE_PMD_ORDER as usize] = ThpEnabled::Inherit;
        ThpConfig {
            enabled: ThpEnabled::Madvise,
            defrag: ThpDefrag::Madvise,
            per_size,
            shrink_underused: true,
            max_ptes_none: HPAGE_PMD_NR - 1,
        }
    }
}

/// Per-size mTHP stats (`hugepages-<N>kB/stats/`), indexed by order.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct MthpStats {
    pub anon_fault_alloc: [u64; NR_PAGE_ORDERS],
    pub anon_fault_fallback: [u64; NR_PAGE_ORDERS],
    /// `swpout` / `swpout_fallback` (reclaim, `vmscan.rs`): folios of this order written to
    /// swap whole / split because swap had no room for them (orders 1..=9 only, as
    /// `mod_mthp_stat` counts).
    pub swpout: [u64; NR_PAGE_ORDERS],
    pub swpout_fallback: [u64; NR_PAGE_ORDERS],
    /// `split` / `split_failed` (§31.3 item 5, `__folio_split`): large folios of this order
    /// split to order 0, or whose split failed (orders 1..=9, any kind, as `count_mthp_stat`).
    pub split: [u64; NR_PAGE_ORDERS],
    pub split_failed: [u64; NR_PAGE_ORDERS],
    /// `split_deferred` (§31.2 item 4, `deferred_split_folio`): anon folios of this order
    /// that became partially mapped (orders 2..=9).
    pub split_deferred: [u64; NR_PAGE_ORDERS],
    /// `nr_anon_partially_mapped` (a gauge): live anon folios of this order with
    /// PG_partially_mapped (§31.2 item 4, §31.2 item 6, §31.3 item 6).
    pub nr_anon_partially_mapped: [u64; NR_PAGE_ORDERS],
}

/// HPAGE_PMD_NR: the subpages of a PMD-size folio.
pub const HPAGE_PMD_NR: u32 = 1 << HPAGE_PMD_ORDER;

/// A set of subpages of one folio (bit i = subpage i; at most 512): the mapped or the written
/// subpages of a [`SubpageMap`].
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Subpages(pub [u64; 8]);

impl Subpages {
    /// Subpages [`start`, `start + n`) (clipped at 512).
    pub fn range(start: u32, n: u32) -> Subpages {
        let mut s = Subpages::default();
        s.set_range(start, n, true);
        s
    }

    /// The first `nr` subpages.
    pub fn full(nr: u32) -> Subpages {
        Subpages::range(0, nr)
    }

    /// Sets (`on`) or clears subpages [`start`, `start + n`) (clipped at 512).
    pub fn set_range(&mut self, start: u32, n: u32, on: bool) {
        let end = (start + n).min(HPAGE_PMD_NR);
        let mut i = start;
        while i < end {
            let (w, b) = ((i / 64) as usize, i % 64);
            let len = (end - i).min(64 - b);
            let m = if len == 64 {
                u64::MAX
            } else {
                ((1u64 << len) - 1) << b
            };
            if on {
                self.0[w] |= m;
            } else {
                self.0[w] &= !m;
            }
            i += len;
        }
    }

    #[inline]
    pub fn test(&self, i: u32) -> bool {
        self.0[(i / 64) as usize] >> (i % 64) & 1 != 0
    }

    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&w| w == 0)
    }

    pub fn and(&self, o: &Subpages) -> Subpages {
        Subpages(std::array::from_fn(|i| self.0[i] & o.0[i]))
    }

    pub fn and_not(&self, o: &Subpages) -> Subpages {
        Subpages(std::array::from_fn(|i| self.0[i] & !o.0[i]))
    }

    /// The subpages set, ascending.
    pub fn ones(&self) -> impl Iterator<Item = u32> + '_ {
        (0..HPAGE_PMD_NR).filter(|&i| self.test(i))
    }

    /// Bits [`start`, `start + n`) of `bits` (a 512-bit map, e.g. the pages of a 2 MiB
    /// region), as subpages 0..n: the subpages of a naturally aligned folio of `n` pages at
    /// `start` (`start` a multiple of `n`, `n` a power of two ≤ 512).
    pub fn extract(bits: &[u64; 8], start: u32, n: u32) -> Subpages {
        debug_assert!(n.is_power_of_two() && n <= HPAGE_PMD_NR && start.is_multiple_of(n));
        let mut s = Subpages::default();
        if n >= 64 {
            let (w, k) = ((start / 64) as usize, (n / 64) as usize);
            s.0[..k].copy_from_slice(&bits[w..w + k]);
        } else {
            let w = bits[(start / 64) as usize] >> (start % 64);
            s.0[0] = w & ((1u64 << n) - 1);
        }
        s
    }
}

/// The subpages of a large anonymous folio that are mapped and that were ever written (§31):
/// kept, in `FolioTable::submaps`, for a folio that was partially unmapped (from its first
/// partial zap until it is freed or split) and, while `thp_underused` can be true, for every
/// PMD THP from its fault (§31.3 item 5). A folio without one is wholly mapped.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubpageMap {
    pub mapped: Subpages,
    /// Written since the fault: a never-written subpage is zero-filled (§31.3 item 6).
    pub written: Subpages,
}

/// What [`Mm::zap_anon_folio`] did.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Zap {
    /// The range covers every subpage still mapped: nothing was changed, and the caller frees
    /// the folio whole (§31.1, §31.2 item 6).
    Whole,
    /// Subpages stay mapped: `unmapped` of them lost their mapping (§31.2 items 1–5).
    Partial { unmapped: u32 },
}

/// The node's deferred split queue (`pgdata->deferred_split_queue`, §31.3; one per node: the
/// model has no memcgs) and the state of its shrinker ("thp-deferred_split").
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct DeferredSplit {
    /// The queued folios with their content tokens, oldest first. Entries of folios freed or
    /// split since they were queued stay until met (`Folio::deferred` tells a live entry) and
    /// are dropped in bulk (`compact`).
    queue: VecDeque<(FolioId, u64)>,
    /// `split_queue_len`: the live entries (every folio with `Folio::deferred`).
    pub len: u64,
    /// The shrinker's `nr_deferred` (scan work carried over).
    pub nr_deferred: u64,
    /// The pieces a split of a folio with a [`SubpageMap`] left mapped, (subpage, piece) in
    /// pfn order, by the folio's content token, until the mapping's owner takes them
    /// ([`Mm::take_split_pieces`]): the owner's page tables then point at the pieces.
    split_pieces: HashMap<u64, Vec<(u16, FolioId)>, std::hash::BuildHasherDefault<IdHasher>>,
    /// `split_pieces` is pruned of records whose pieces are all gone when it grows past this.
    prune_at: usize,
}

impl DeferredSplit {
    /// The queue, oldest first, live entries only (for tests and the invariant checks).
    pub fn queued<'a>(&'a self, folios: &'a crate::folio::FolioTable) -> impl Iterator<Item = FolioId> + 'a {
        self.queue
            .iter()
            .filter(|&&(id, t)| entry_live(folios, id, t))
            .map(|&(id, _)| id)
    }

    /// Split records not yet taken by their owner.
    pub fn pending_records(&self) -> usize {
        self.split_pieces.len()
    }

    pub(crate) fn queue_entries(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn host_bytes(&self) -> u64 {
        use crate::host_mem::{deque_bytes, hash_bytes};
        deque_bytes(&self.queue)
            + hash_bytes(&self.split_pieces)
            + self
                .split_pieces
                .values()
                .map(|v| (v.capacity() * std::mem::size_of::<(u16, FolioId)>()) as u64)
                .sum::<u64>()
    }
}

/// Whether queue entry (`id`, `token`) is live: the folio is the one queued and still queued.
fn entry_live(folios: &crate::folio::FolioTable, id: FolioId, token: u64) -> bool {
    let f = &folios.folios[id as usize];
    f.live() && f.token() == token && f.deferred()
}

/// `vma_thp_gfp_mask` (§11.2): the gfp of a THP/mTHP fault for each defrag value; `madvised`
/// is VM_HUGEPAGE.
pub fn vma_thp_gfp_mask(defrag: ThpDefrag, madvised: bool) -> Gfp {
    let light = Gfp::GFP_TRANSHUGE_LIGHT;
    match defrag {
        ThpDefrag::Always => {
            if madvised {
                Gfp::GFP_TRANSHUGE
            } else {
                Gfp::GFP_TRANSHUGE.union(Gfp::NORETRY)
            }
        }
        ThpDefrag::Defer => light.union(Gfp::KSWAPD_RECLAIM),
        ThpDefrag::DeferMadvise => light.union(if madvised {
            Gfp::DIRECT_RECLAIM
        } else {
            Gfp::KSWAPD_RECLAIM
        }),
        ThpDefrag::Madvise => {
            if madvised {
                light.union(Gfp::DIRECT_RECLAIM)
            } else {
                light
            }
        }
        ThpDefrag::Never => light,
    }
}

impl ThpConfig {
    /// Whether anonymous folios of `order` may be used in a VMA (`madvised` = VM_HUGEPAGE):
    /// `inherit` follows the top-level `enabled`.
    pub fn order_allowed(&self, order: u32, madvised: bool) -> bool {
        let e = match self.per_size[order as usize] {
            ThpEnabled::Inherit => self.enabled,
            e => e,
        };
        match e {
            ThpEnabled::Always => true,
            ThpEnabled::Madvise => madvised,
            ThpEnabled::Never | ThpEnabled::Inherit => false,
        }
    }
}

impl Mm {
    /// `alloc_pages_mpol` for a PMD-order folio (§11.2 NUMA wrinkle): first with
    /// __GFP_THISNODE|__GFP_NORETRY on the policy's node, then — only if that failed and the
    /// gfp can reclaim directly — unmodified. The first try is skipped, as the kernel skips
    /// it, for an interleave policy and for a bind policy whose nodes do not include the
    /// CPU's node (always made on one node).
    fn alloc_thp_mpol(&mut self, cpu: u32, gfp: Gfp) -> Option<FolioId> {
        if self.numa.multi() {
            let local = self.numa.cpu_to_node(cpu);
            let skip_first = match self.cur.mempolicy {
                crate::numa::MemPolicy::Interleave(_) => true,
                crate::numa::MemPolicy::Bind(m) => m & (1 << local) == 0,
                _ => false,
            };
            if skip_first {
                return self.alloc_folio(cpu, gfp, HPAGE_PMD_ORDER, FolioKind::Anon, false);
            }
        }
        let first = gfp.union(Gfp::THISNODE).union(Gfp::NORETRY);
        if let Some(id) = self.alloc_folio(cpu, first, HPAGE_PMD_ORDER, FolioKind::Anon, false) {
            return Some(id);
        }
        if gfp.intersects(Gfp::DIRECT_RECLAIM) {
            return self.alloc_folio(cpu, gfp, HPAGE_PMD_ORDER, FolioKind::Anon, false);
        }
        None
    }

    /// One anonymous page fault on an empty, PMD-aligned 2 MiB range (§11.3): a PMD THP if
    /// allowed, else the enabled mTHP orders from highest to lowest, else an order-0 page with
    /// GFP_HIGHUSER_MOVABLE. Counts thp_fault_alloc / thp_fault_fallback (PMD only) and the
    /// per-size anon_fault_alloc / anon_fault_fallback. Returns the folio mapped, if any.
    pub fn do_anonymous_fault(&mut self, cpu: u32, madvised: bool) -> Option<FolioId> {
        self.do_anonymous_fault_upto(cpu, madvised, HPAGE_PMD_ORDER)
    }

    /// An anonymous page fault where the largest naturally aligned empty range around the
    /// faulting address inside the VMA has order `max_order` (§11.3.2: mTHP orders are tried
    /// only where their aligned range is entirely unpopulated; the PMD order only for an empty,
    /// PMD-aligned 2 MiB range inside the VMA).
    pub fn do_anonymous_fault_upto(&mut self, cpu: u32, madvised: bool, max_order: u32) -> Option<FolioId> {
        // handle_mm_fault counts every fault (PGFAULT).
        self.count(Stat::pgfault, 1);
        let gfp = vma_thp_gfp_mask(self.thp.defrag, madvised);
        let pmd = HPAGE_PMD_ORDER as usize;
        if max_order >= HPAGE_PMD_ORDER && self.thp.order_allowed(HPAGE_PMD_ORDER, madvised) {
            if let Some(b) = self.blame.as_deref_mut() {
                b.begin_thp_fault();
            }
            let thp = self.alloc_thp_mpol(cpu, gfp);
            if let Some(b) = self.blame.as_deref_mut() {
                b.end_thp_fault(thp.is_none());
            }
            match thp {
                Some(id) => {
                    self.count(Stat::thp_fault_alloc, 1);
                    self.mthp.anon_fault_alloc[pmd] += 1;
                    // `__do_huge_pmd_anonymous_page`: a kind (b) entry of the deferred split
                    // queue while shrink_underused is set (§31.3 item 1).
                    self.deferred_split_folio(id, false);
                    return Some(id);
                }
                None => {
                    self.count(Stat::thp_fault_fallback, 1);
                    self.mthp.anon_fault_fallback[pmd] += 1;
                }
            }
        }
        for order in (2..HPAGE_PMD_ORDER.min(max_order + 1)).rev() {
            if !self.thp.order_allowed(order, madvised) {
                continue;
            }
            match self.alloc_folio(cpu, gfp, order, FolioKind::Anon, false) {
                Some(id) => {
                    self.mthp.anon_fault_alloc[order as usize] += 1;
                    return Some(id);
                }
                None => self.mthp.anon_fault_fallback[order as usize] += 1,
            }
        }
        self.alloc_folio(cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::Anon, false)
    }
}

/// Partial unmapping and the deferred split (§31).
impl Mm {
    /// `deferred_split_folio(folio, partially_mapped)` (huge_memory.c, §31.2 item 4, §31.3
    /// item 1): orders ≤ 1 are never queued; without `partially_mapped` only while
    /// shrink_underused is set. A folio becoming partially mapped gets PG_partially_mapped and
    /// counts `thp_deferred_split_page` (PMD size only), `split_deferred` and
    /// `nr_anon_partially_mapped` of its size, once. A folio not yet on the queue goes to its
    /// tail. (Swap-cache folios are never queued; the model's mapped anon folios never are in
    /// the swap cache.)
    pub(crate) fn deferred_split_folio(&mut self, id: FolioId, partially_mapped: bool) {
        let f = &self.folios.folios[id as usize];
        let order = f.order as usize;
        if order <= 1 || (!partially_mapped && !self.thp.shrink_underused) {
            return;
        }
        if partially_mapped && !f.partially_mapped() {
            self.folios.folios[id as usize].set_partially_mapped(true);
            if order == HPAGE_PMD_ORDER as usize {
                self.count(Stat::thp_deferred_split_page, 1);
            }
            self.mthp.split_deferred[order] += 1;
            self.mthp.nr_anon_partially_mapped[order] += 1;
        }
        let f = &mut self.folios.folios[id as usize];
        if !f.deferred() {
            f.set_deferred(true);
            let token = f.token();
            let q = &mut self.deferred_split;
            q.queue.push_back((id, token));
            q.len += 1;
            if q.queue.len() as u64 > 2 * q.len + 64 {
                let folios = &self.folios;
                q.queue.retain(|&(i, t)| entry_live(folios, i, t));
            }
        }
    }

    /// `__folio_unqueue_deferred_split` (§31.2 item 6, §31.3 item 2): a queued folio leaves
    /// the queue (at its free or split); PG_partially_mapped is cleared with
    /// `nr_anon_partially_mapped` −1. No event counter. Its entry stays until met.
    pub(crate) fn unqueue_deferred_split(&mut self, id: FolioId) {
        let f = &mut self.folios.folios[id as usize];
        if !f.deferred() {
            debug_assert!(!f.partially_mapped());
            return;
        }
        f.set_deferred(false);
        self.deferred_split.len -= 1;
        if f.partially_mapped() {
            f.set_partially_mapped(false);
            self.mthp.nr_anon_partially_mapped[f.order as usize] -= 1;
        }
    }

    /// The subpages of folio `id` still mapped (all of them without a [`SubpageMap`]).
    pub fn folio_mapped_subpages(&self, id: FolioId) -> Subpages {
        match self.folios.submap(id) {
            Some(m) => m.mapped,
            None => Subpages::full(1 << self.folios.folios[id as usize].order),
        }
    }

    /// Whether `thp_underused` can be true (`khugepaged/max_ptes_none` below 511 and
    /// shrink_underused set, §31.3 items 5 and 8): then the owner of every PMD THP gives its
    /// written subpages at the fault ([`Mm::anon_track_written`]).
    pub fn thp_tracks_underused(&self) -> bool {
        self.thp.shrink_underused && self.thp.max_ptes_none < HPAGE_PMD_NR - 1
    }

    /// Gives wholly mapped large anon folio `id` a [`SubpageMap`] with these written
    /// subpages (the owner of a PMD THP, right after its fault, when
    /// [`Mm::thp_tracks_underused`]).
    pub fn anon_track_written(&mut self, id: FolioId, written: &Subpages) {
        let nr = 1u32 << self.folios.get(id).order;
        if self.folios.submap(id).is_none() {
            self.folios.set_submap(
                id,
                SubpageMap {
                    mapped: Subpages::full(nr),
                    written: written.and(&Subpages::full(nr)),
                },
            );
        }
    }

    /// Records writes to subpages [`first`, `first + n`) of folio `id`, if it has a
    /// [`SubpageMap`] (the owner calls it for every write to a large folio that has one:
    /// `Folio::has_submap`).
    pub fn anon_folio_written(&mut self, id: FolioId, first: u32, n: u32) {
        if let Some(m) = self.folios.submap_mut(id) {
            m.written.set_range(first, n, true);
        }
    }

    /// Whether folio `id` has a [`SubpageMap`] (its owner then reports writes to it).
    #[inline]
    pub fn folio_has_submap(&self, id: FolioId) -> bool {
        self.folios.folios[id as usize].has_submap()
    }

    /// A zap (MADV_DONTNEED, munmap) of subpages [`first`, `first + n`) of live large
    /// anonymous folio `id` (`zap_pmd_range` → `zap_huge_pmd` or `__split_huge_pmd` +
    /// `zap_pte_range` → `__folio_remove_rmap`, §31.1, §31.2). `written` are the subpages the
    /// mapping wrote (read only when the folio gets its [`SubpageMap`] here).
    /// * If the range covers every subpage still mapped, nothing changes and [`Zap::Whole`]
    ///   says so: the caller frees the folio whole, at its order (`zap_huge_pmd` of a whole
    ///   aligned PMD counts no split, §31.1; the last PTE of a partially mapped one, §31.2
    ///   item 6; `free_folio` unqueues it).
    /// * Otherwise a PMD-mapped folio has its PMD split first: `thp_split_pmd` +1, NR_ANON_THPS
    ///   −512, the folio now PTE-mapped (§31.2 items 1–2; a PTE-mapped one counts nothing).
    ///   Each subpage in the range that was mapped loses its mapping: NR_ANON_MAPPED −1 and
    ///   the owner's rss −1 (item 3). If any did, `deferred_split_folio(folio, true)` (item
    ///   4). Nothing is freed (item 5).
    pub fn zap_anon_folio(&mut self, id: FolioId, first: u32, n: u32, written: &Subpages) -> Zap {
        let f = self.folios.get(id);
        let (order, owner) = (f.order as u32, f.owner);
        debug_assert!(f.kind == FolioKind::Anon && order > 0 && !f.isolated());
        let nr = 1u32 << order;
        let range = Subpages::range(first, n).and(&Subpages::full(nr));
        let mapped = self.folio_mapped_subpages(id);
        if mapped.and_not(&range).is_empty() {
            return Zap::Whole;
        }
        if order == HPAGE_PMD_ORDER && !f.pmd_split() {
            self.count(Stat::thp_split_pmd, 1);
            self.folios.folios[id as usize].set_pmd_split(true);
            let v = &mut self.stats[Stat::nr_anon_transparent_hugepages as usize];
            *v -= nr as u64;
        }
        let hit = mapped.and(&range).count();
        if self.folios.submap(id).is_none() {
            self.folios.set_submap(
                id,
                SubpageMap {
                    mapped,
                    written: written.and(&Subpages::full(nr)),
                },
            );
        }
        let m = self.folios.submap_mut(id).expect("set above");
        m.mapped = m.mapped.and_not(&range);
        if hit > 0 {
            self.stats[Stat::nr_anon_pages as usize] -= hit as u64;
            if owner > 1 {
                self.folios.rss.add(owner, -(hit as i64));
            }
            self.deferred_split_folio(id, true);
        }
        Zap::Partial { unmapped: hit }
    }

    /// The pieces the split of the folio of content `token` left mapped, as (subpage, piece)
    /// in pfn order, if a split made them since the last call (`split_anon_folio`): the
    /// mapping's owner takes them once, to map the pieces where the folio was.
    pub fn take_split_pieces(&mut self, token: u64) -> Option<Vec<(u16, FolioId)>> {
        self.deferred_split.split_pieces.remove(&token)
    }

    /// `__folio_split` of large anonymous folio `id` to order 0 with RMP_USE_SHARED_ZEROPAGE
    /// (huge_memory.c `__folio_split`, `remap_page`, §31.3 item 6), for a caller that found
    /// it splittable (`can_split_folio`, the folio lock): a PMD-mapped folio has its PMD split
    /// first (`unmap_folio`: `thp_split_pmd` +1); the folio leaves the deferred split queue;
    /// [`Mm::split_folio`] makes the order-0 pieces (`thp_split_page`, `split`, the old size's
    /// `nr_anon` −1). Every mapped subpage that was never written (zero-filled) is mapped to
    /// the shared zero page instead (not for an mlocked folio), and every piece left without
    /// a mapping is freed: order-0 frees into the folio's own pageblock, the tails in pfn
    /// order and then the head (`free_folio_and_swap_cache` of each tail, the caller's
    /// `folio_put` of the head). An isolated folio's freed pieces leave the isolation first.
    ///
    /// With a [`SubpageMap`] the kept pieces are recorded for the mapping's owner
    /// ([`Mm::take_split_pieces`]); without one the folio counts as wholly mapped and written
    /// (nothing is freed). Returns the kept pieces in pfn order.
    pub(crate) fn split_anon_folio(&mut self, cpu: u32, id: FolioId) -> Vec<FolioId> {
        let f = self.folios.get(id);
        debug_assert!(f.kind == FolioKind::Anon && f.order > 0);
        let (order, token, mlocked) = (f.order as u32, f.token(), f.mlocked());
        let nr = 1u32 << order;
        if order == HPAGE_PMD_ORDER && !f.pmd_split() {
            self.count(Stat::thp_split_pmd, 1);
        }
        let sub = self.folios.submap(id).copied();
        let (mapped, written) = match sub {
            Some(m) => (m.mapped, m.written),
            None => (Subpages::full(nr), Subpages::full(nr)),
        };
        let pieces = self.split_folio(id);
        let (mut keep, mut freed, mut record) = (Vec::new(), Vec::new(), Vec::new());
        for (i, &p) in pieces.iter().enumerate() {
            let i = i as u32;
            if mapped.test(i) && (written.test(i) || mlocked) {
                keep.push(p);
                record.push((i as u16, p));
            } else if i > 0 {
                freed.push(p);
            }
        }
        if !(mapped.test(0) && (written.test(0) || mlocked)) {
            freed.push(pieces[0]);
        }
        for &p in &freed {
            if self.folios.folios[p as usize].isolated() {
                self.account_putback(p);
            }
        }
        self.free_folio_run(cpu, &freed);
        if sub.is_some() {
            let q = &mut self.deferred_split;
            q.split_pieces.insert(token, record);
            if q.split_pieces.len() > q.prune_at.max(4096) {
                let folios = &self.folios;
                q.split_pieces.retain(|&t, v| {
                    v.iter().any(|&(_, p)| {
                        let f = &folios.folios[p as usize];
                        f.live() && f.token() == t
                    })
                });
                q.prune_at = 2 * q.split_pieces.len();
            }
        }
        keep
    }

    /// `thp_underused` (§31.3 item 5): false at max_ptes_none 511; else, over the subpages
    /// in order, true once more than max_ptes_none are zero-filled (never written), false once
    /// 512 − max_ptes_none are not. A folio without a [`SubpageMap`] counts as written.
    fn thp_underused(&self, id: FolioId) -> bool {
        let none = self.thp.max_ptes_none;
        if none >= HPAGE_PMD_NR - 1 {
            return false;
        }
        let Some(m) = self.folios.submap(id) else {
            return false;
        };
        let nr = 1u32 << self.folios.folios[id as usize].order;
        let (mut zero, mut filled) = (0u32, 0u32);
        for i in 0..nr {
            if !m.written.test(i) {
                zero += 1;
                if zero > none {
                    return true;
                }
            } else {
                filled += 1;
                if filled >= HPAGE_PMD_NR - none {
                    return false;
                }
            }
        }
        false
    }

    /// `deferred_split_scan(nr_to_scan)` (§31.3 item 5): takes up to `nr_to_scan` folios from
    /// the head of the queue, then for each: one not partially mapped (kind (b)) is skipped
    /// if mlocked, else kept only if `thp_underused`; a partially mapped or underused one is
    /// split if its lock can be taken (not `io_locked`) and `can_split_folio` holds (no GUP
    /// pin): `split_anon_folio`, with `thp_underused_split_page` +1 if underused; a split that
    /// fails counts `thp_split_page_failed` (PMD size) and `split_failed`. A folio not split
    /// goes back to the tail if partially mapped and leaves the queue otherwise (no counter).
    /// Returns the folios split.
    fn deferred_split_scan(&mut self, cpu: u32, nr_to_scan: u64) -> u64 {
        let mut list = Vec::new();
        while (list.len() as u64) < nr_to_scan {
            let Some((id, token)) = self.deferred_split.queue.pop_front() else {
                break;
            };
            if entry_live(&self.folios, id, token) {
                list.push((id, token));
            }
        }
        let mut split = 0;
        for (id, token) in list {
            let f = &self.folios.folios[id as usize];
            let (partial, order) = (f.partially_mapped(), f.order as usize);
            let mut did_split = false;
            let underused = !partial && !f.mlocked() && self.thp_underused(id);
            if partial || underused {
                let f = &self.folios.folios[id as usize];
                // folio_trylock; an isolated folio is another path's (never met: compaction
                // and reclaim put their folios back before the shrinker runs).
                if !f.io_locked() && !f.isolated() {
                    if !f.pinned() {
                        self.split_anon_folio(cpu, id);
                        did_split = true;
                        split += 1;
                        if underused {
                            self.count(Stat::thp_underused_split_page, 1);
                        }
                    } else {
                        // `can_split_folio`: extra references (§31.3 item 5).
                        if order == HPAGE_PMD_ORDER as usize {
                            self.count(Stat::thp_split_page_failed, 1);
                        }
                        self.mthp.split_failed[order] += 1;
                    }
                }
            }
            if did_split {
                // `split_folio` took it off the queue.
            } else if !partial {
                let f = &mut self.folios.folios[id as usize];
                f.set_deferred(false);
                self.deferred_split.len -= 1;
            } else {
                self.deferred_split.queue.push_back((id, token));
            }
        }
        split
    }

    /// `do_shrink_slab` for the "thp-deferred_split" shrinker (shrinker.c, §31.3 items 3–4):
    /// `count_objects` = the queue's length; delta = (len >> priority) · 4 / DEFAULT_SEEKS
    /// (2·(len >> priority)); total = min((nr_deferred >> priority) + delta, 2·len); scans in
    /// batches of min(SHRINK_BATCH = 128, total) while total ≥ 128 or ≥ len, each
    /// `deferred_split_scan` counting `slabs_scanned` += the batch, except a scan that split
    /// nothing and left the queue empty (SHRINK_STOP), which ends the loop; nr_deferred =
    /// min(max(nr + delta − scanned, 0), 2·len). So at DEF_PRIORITY (12) a queue shorter than
    /// 2048 is not scanned, and at priority 0 all of it is. Returns the folios split (the
    /// pages a split frees are not reclaim's: `nr_reclaimed` does not count them).
    pub(crate) fn shrink_deferred_split(&mut self, cpu: u32, priority: i32) -> u64 {
        use crate::vmscan::{DEFAULT_SEEKS, SHRINK_BATCH};
        let freeable = self.deferred_split.len;
        if freeable == 0 {
            return 0;
        }
        let priority = priority.clamp(0, 63) as u32;
        let nr = std::mem::take(&mut self.deferred_split.nr_deferred);
        let delta = (freeable >> priority) * 4 / DEFAULT_SEEKS;
        let mut total = ((nr >> priority) + delta).min(2 * freeable);
        let (mut scanned, mut freed) = (0u64, 0u64);
        while total >= SHRINK_BATCH || total >= freeable {
            let n = SHRINK_BATCH.min(total);
            let split = self.deferred_split_scan(cpu, n);
            if split == 0 && self.deferred_split.len == 0 {
                break;
            }
            freed += split;
            self.count(Stat::slabs_scanned, n);
            total -= n;
            scanned += n;
        }
        self.deferred_split.nr_deferred = (nr + delta).saturating_sub(scanned).min(2 * freeable);
        freed
    }

    /// The deferred split shrinker's part of writing 2 or 3 to /proc/sys/vm/drop_caches
    /// (vmscan.c `drop_slab` → `drop_slab_node` → `shrink_slab` at priority 0, §31.3 item 3):
    /// rounds while the objects freed, shifted right by one more bit each round, exceed 1.
    /// Returns the folios split. Simplified: the model's other shrinker (the declared slab
    /// caches) is not run by drop_caches.
    pub fn drop_slab(&mut self, cpu: u32) -> u64 {
        let (mut total, mut shift) = (0u64, 0u32);
        loop {
            let freed = self.shrink_deferred_split(cpu, 0);
            total += freed;
            let more = (freed >> shift) > 1;
            shift += 1;
            if !more {
                break;
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmscan::ScanControl;

    /// 64 pageblocks (128 MiB), mTHP order `order` enabled for madvised VMAs.
    fn machine(order: u32) -> Mm {
        let mut mm = crate::test_machines::dma32(64);
        mm.thp.per_size[order as usize] = ThpEnabled::Madvise;
        mm.cur.pid = 7;
        mm
    }

    /// `n` anon folios of `order` (a PMD fault for order 9, an mTHP fault below), each zapped
    /// but for its last subpage (which was never written), as transhuge-stress leaves them.
    fn partial_folios(mm: &mut Mm, order: u32, n: usize) -> Vec<FolioId> {
        let nr = 1u32 << order;
        (0..n)
            .map(|_| {
                let id = mm.do_anonymous_fault_upto(0, true, order).expect("memory");
                assert_eq!(mm.folios.get(id).order as u32, order);
                let z = mm.zap_anon_folio(id, 0, nr - 1, &Subpages::range(0, 1));
                assert_eq!(z, Zap::Partial { unmapped: nr - 1 });
                id
            })
            .collect()
    }

    /// §31.3 item 4 at DEF_PRIORITY: delta = 2·(len >> 12) is 0 for a queue shorter than
    /// 4096/2 = 2048, so nothing is scanned; at 4096 the delta (2) is below the batch and the
    /// queue, so it is only carried in nr_deferred, growing by 2 per call.
    #[test]
    fn s31_3_def_priority_scans_nothing_below_2048() {
        let mut mm = machine(2);
        let ids = partial_folios(&mut mm, 2, 2047);
        assert_eq!(mm.deferred_split.len, 2047);
        assert_eq!(mm.shrink_deferred_split(0, crate::vmscan::DEF_PRIORITY), 0);
        assert_eq!(mm.stat(Stat::slabs_scanned), 0);
        assert_eq!(mm.deferred_split.nr_deferred, 0);
        // Through shrink_slab, as kswapd's first pass calls it.
        let mut sc = ScanControl::direct(3, 0, 0);
        sc.priority = crate::vmscan::DEF_PRIORITY;
        mm.shrink_slab(&mut sc);
        assert_eq!((mm.stat(Stat::thp_split_page), mm.mthp.split[2]), (0, 0));
        assert_eq!(mm.deferred_split.len, 2047);
        let more = partial_folios(&mut mm, 2, 4096 - 2047);
        assert_eq!(mm.deferred_split.len, 4096);
        for call in 1..=3u64 {
            assert_eq!(mm.shrink_deferred_split(0, 12), 0);
            assert_eq!(mm.deferred_split.nr_deferred, 2 * call, "call {call}");
        }
        assert_eq!(mm.stat(Stat::slabs_scanned), 0);
        assert!(ids
            .iter()
            .chain(&more)
            .all(|&id| mm.folios.get(id).partially_mapped()));
        mm.check_invariants().unwrap();
    }

    /// §31.3 item 4 at low priorities: priority 1 with 300 queued scans 2·150 = 300 in batches
    /// of 128 while ≥ 128 is left (two batches, 44 carried); priority 0 scans 2·len: every
    /// folio is split, and the batch that finds the queue empty is SHRINK_STOP (uncounted).
    #[test]
    fn s31_3_do_shrink_slab_arithmetic() {
        let mut mm = machine(2);
        partial_folios(&mut mm, 2, 300);
        assert_eq!(mm.shrink_deferred_split(0, 1), 256);
        assert_eq!(mm.stat(Stat::slabs_scanned), 256);
        assert_eq!(mm.deferred_split.len, 44);
        assert_eq!(mm.deferred_split.nr_deferred, 300 - 256);
        assert_eq!(mm.mthp.split[2], 256);
        assert_eq!(mm.mthp.nr_anon_partially_mapped[2], 44);
        // mTHP: no PMD-size counters (§31.4).
        assert_eq!(
            mm.stat(Stat::thp_split_page) + mm.stat(Stat::thp_deferred_split_page),
            0
        );
        let mut mm = machine(2);
        partial_folios(&mut mm, 2, 300);
        assert_eq!(mm.shrink_deferred_split(0, 0), 300);
        // 128 + 128 + 128 (44 found) counted, then a batch on the empty queue stops.
        assert_eq!(mm.stat(Stat::slabs_scanned), 384);
        assert_eq!(mm.deferred_split.nr_deferred, 600 - 384);
        assert_eq!(
            (mm.deferred_split.len, mm.mthp.nr_anon_partially_mapped[2]),
            (0, 0)
        );
        mm.check_invariants().unwrap();
    }

    /// §31.3 item 5 (kind (b), default max_ptes_none 511): PMD faults are queued while
    /// shrink_underused is set; the shrinker drops them without a split or counter (and the
    /// scan that empties the queue is SHRINK_STOP); with shrink_underused 0 none is queued.
    #[test]
    fn s31_3_kind_b_entries_are_dropped_at_max_ptes_none_511() {
        let mut mm = machine(9);
        let ids: Vec<_> = (0..3).map(|_| mm.do_anonymous_fault(0, true).unwrap()).collect();
        assert_eq!(mm.deferred_split.len, 3);
        assert!(ids
            .iter()
            .all(|&id| mm.folios.get(id).deferred() && !mm.folios.get(id).partially_mapped()));
        assert_eq!(mm.stat(Stat::thp_deferred_split_page), 0);
        assert_eq!(mm.drop_slab(0), 0);
        assert_eq!(mm.deferred_split.len, 0);
        assert_eq!(mm.stat(Stat::slabs_scanned), 0);
        assert_eq!(mm.stat(Stat::thp_split_page), 0);
        assert!(ids.iter().all(|&id| mm.folios.get(id).order == 9));
        let mut mm = machine(9);
        mm.thp.shrink_underused = false;
        mm.do_anonymous_fault(0, true).unwrap();
        assert_eq!(mm.deferred_split.len, 0);
        mm.check_invariants().unwrap();
    }

    /// §31.3 items 5–6 with max_ptes_none below 511: a PMD THP with one written subpage is
    /// underused; the shrinker splits it (its PMD first), maps the 511 zero-filled subpages to
    /// the zero page and frees them as order-0 pages, keeping the written one, and counts
    /// thp_underused_split_page. A THP with enough written subpages is dropped unsplit.
    #[test]
    fn s31_3_underused_thp_is_split() {
        let mut mm = machine(9);
        mm.thp.max_ptes_none = 255;
        assert!(mm.thp_tracks_underused());
        let thin = mm.do_anonymous_fault(0, true).unwrap();
        mm.anon_track_written(thin, &Subpages::range(3, 1));
        let full = mm.do_anonymous_fault(0, true).unwrap();
        mm.anon_track_written(full, &Subpages::range(0, 1));
        mm.anon_folio_written(full, 0, 300);
        let (pfn, token) = (mm.folios.get(thin).pfn, mm.folios.get(thin).token());
        let anon = mm.stat(Stat::nr_anon_pages);
        mm.set_trace_mask(crate::node::trace_kind::MM_PAGE_FREE);
        assert_eq!(mm.drop_slab(0), 1);
        assert_eq!(mm.stat(Stat::thp_underused_split_page), 1);
        assert_eq!(mm.stat(Stat::thp_split_page), 1);
        assert_eq!(mm.stat(Stat::thp_split_pmd), 1);
        assert_eq!(mm.stat(Stat::nr_anon_pages), anon - 511);
        assert_eq!(mm.stat(Stat::nr_anon_transparent_hugepages), 512);
        let frees: Vec<_> = mm
            .take_trace()
            .into_iter()
            .filter_map(|r| match r.event {
                crate::trace::TraceEvent::MmPageFree { pfn, order } => Some((pfn, order)),
                _ => None,
            })
            .collect();
        assert_eq!(frees.len(), 511);
        assert!(frees
            .iter()
            .all(|&(p, o)| o == 0 && p >= pfn && p < pfn + 512 && p != pfn + 3));
        // The head goes last (the caller's folio_put, after the tails).
        assert_eq!(frees.last(), Some(&(pfn, 0)));
        let pieces = mm.take_split_pieces(token).unwrap();
        assert_eq!(pieces.len(), 1);
        assert_eq!(pieces[0].0, 3);
        assert_eq!(mm.folios.get(pieces[0].1).pfn, pfn + 3);
        assert_eq!(mm.folios.get(full).order, 9);
        assert!(!mm.folios.get(full).deferred());
        mm.check_invariants().unwrap();
    }

    /// §31.3 item 5: a split that fails (`can_split_folio`: a GUP pin) counts
    /// thp_split_page_failed and split_failed, and the partially mapped folio goes back to
    /// the tail of the queue.
    #[test]
    fn s31_3_failed_split_stays_queued() {
        let mut mm = machine(9);
        let ids = partial_folios(&mut mm, 9, 2);
        mm.folios.folios[ids[0] as usize].set_pinned(true);
        assert_eq!(mm.shrink_deferred_split(0, 0), 1);
        assert_eq!(mm.stat(Stat::thp_split_page_failed), 1);
        assert_eq!(mm.mthp.split_failed[9], 1);
        assert_eq!(mm.stat(Stat::thp_split_page), 1);
        assert_eq!(
            mm.deferred_split.queued(&mm.folios).collect::<Vec<_>>(),
            vec![ids[0]]
        );
        assert_eq!(mm.mthp.nr_anon_partially_mapped[9], 1);
        mm.check_invariants().unwrap();
    }

    /// §31.4 mTHP row: a partial zap of an order-4 folio counts split_deferred and
    /// nr_anon_partially_mapped of 64 KiB but no thp_split_pmd or thp_deferred_split_page;
    /// a second partial zap counts nothing; freeing it takes it off the queue.
    #[test]
    fn s31_4_mthp_counting() {
        let mut mm = machine(4);
        let id = mm.do_anonymous_fault_upto(0, true, 4).unwrap();
        assert_eq!(mm.folios.get(id).order, 4);
        assert_eq!(mm.deferred_split.len, 0, "only PMD faults are kind (b)");
        let z = mm.zap_anon_folio(id, 2, 3, &Subpages::range(0, 16));
        assert_eq!(z, Zap::Partial { unmapped: 3 });
        let z = mm.zap_anon_folio(id, 0, 4, &Subpages::default());
        assert_eq!(z, Zap::Partial { unmapped: 2 });
        assert_eq!(mm.stat(Stat::thp_split_pmd), 0);
        assert_eq!(mm.stat(Stat::thp_deferred_split_page), 0);
        assert_eq!(
            (mm.mthp.split_deferred[4], mm.mthp.nr_anon_partially_mapped[4]),
            (1, 1)
        );
        assert_eq!(mm.folio_mapped_subpages(id), Subpages::range(5, 11));
        assert_eq!(mm.zap_anon_folio(id, 0, 16, &Subpages::default()), Zap::Whole);
        mm.free_folio(0, id);
        assert_eq!(
            (mm.deferred_split.len, mm.mthp.nr_anon_partially_mapped[4]),
            (0, 0)
        );
        mm.check_invariants().unwrap();
    }

    /// §31.3 item 7 (`shrink_folio_list`): reclaim splits a partially mapped folio before it
    /// is added to swap; the unmapped pages are freed without I/O, the written page left is
    /// swapped alone.
    #[test]
    fn s31_3_7_reclaim_splits_partially_mapped_before_swap() {
        let mut mm = machine(9);
        mm.reclaim.swap.total = 4096;
        let id = partial_folios(&mut mm, 9, 1)[0];
        mm.anon_folio_written(id, 511, 1);
        mm.folios.folios[id as usize].set_referenced(false);
        let mut sc = ScanControl::direct(3, 0, 0);
        mm.shrink_inactive_list(512, crate::vmscan::LRU_INACTIVE_ANON, &mut sc);
        assert_eq!(mm.stat(Stat::thp_split_page), 1);
        assert_eq!(mm.stat(Stat::thp_swpout) + mm.stat(Stat::thp_swpout_fallback), 0);
        assert_eq!(mm.stat(Stat::pswpout), 1);
        assert_eq!(mm.deferred_split.len, 0);
        assert_eq!(mm.stat(Stat::nr_anon_pages), 0);
        mm.check_invariants().unwrap();
    }

    /// §31.3 item 7 (`migrate_pages_batch`): a partially mapped mTHP on the deferred split
    /// queue that compaction isolated is split before migration: its unmapped pages are
    /// freed, the mapped ones migrated as order-0 folios (one ASYNC pass) and recorded for the
    /// mapping's owner; the split counts in stats/split, not as a migration failure of pages.
    #[test]
    fn s31_3_7_migration_splits_partially_mapped_first() {
        use crate::compaction::CompactControl;
        use crate::compaction::MigrateMode;
        let mut mm = machine(4);
        let id = mm.do_anonymous_fault_upto(0, true, 4).unwrap();
        let (pfn, token) = (mm.folios.get(id).pfn, mm.folios.get(id).token());
        assert_eq!(
            mm.zap_anon_folio(id, 0, 8, &Subpages::range(8, 8)),
            Zap::Partial { unmapped: 8 }
        );
        let mut cc = CompactControl::new(1, -1, Gfp::GFP_KERNEL, MigrateMode::Sync, 0);
        cc.free_pfn = mm.zones[1].end_pfn() - 512;
        mm.isolate_lru_folio(id);
        cc.migratepages.push(id);
        cc.nr_migratepages = 16;
        mm.migrate_pages(&mut cc);
        assert_eq!(mm.mthp.split[4], 1);
        assert_eq!(mm.compact.last_migrate.nr_split, 1);
        assert_eq!(mm.deferred_split.len, 0);
        assert_eq!(mm.mthp.nr_anon_partially_mapped[4], 0);
        let pieces = mm.take_split_pieces(token).unwrap();
        assert_eq!(
            pieces.iter().map(|p| p.0).collect::<Vec<_>>(),
            (8..16).collect::<Vec<_>>()
        );
        for &(i, p) in &pieces {
            assert!(mm.folio_is(p, token));
            let f = mm.folios.get(p);
            assert!(f.order == 0 && !f.isolated());
            assert_ne!(f.pfn, pfn + i as u32, "migrated");
        }
        assert_eq!(mm.stat(Stat::pgmigrate_success), 8);
        assert_eq!(mm.stat(Stat::nr_anon_pages), 8);
        // Return what compaction still holds (its free pages) before checking.
        mm.release_free_list(&mut cc);
        mm.check_invariants().unwrap();
    }

    #[test]
    fn subpages_extract_and_ranges() {
        let mut bits = [0u64; 8];
        bits[2] = 0xf0;
        bits[3] = 1;
        assert_eq!(Subpages::extract(&bits, 128, 128).0[..2], [0xf0, 1]);
        assert_eq!(Subpages::extract(&bits, 132, 4).0[0], 0xf);
        assert_eq!(Subpages::extract(&bits, 136, 8).0[0], 0);
        assert_eq!(Subpages::range(60, 10).count(), 10);
        assert_eq!(Subpages::range(500, 100).count(), 12);
        assert_eq!(Subpages::full(512).count(), 512);
        assert_eq!(Subpages::range(3, 2).ones().collect::<Vec<_>>(), vec![3, 4]);
    }
}
