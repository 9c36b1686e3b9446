//! Anonymous THP and mTHP faults (`kernel-model.md` §11): the fault-time gfp of every
//! `transparent_hugepage/defrag` value (`vma_thp_gfp_mask`), the PMD-order first attempt with
//! __GFP_THISNODE|__GFP_NORETRY then the full one, the mTHP order ladder of the per-size
//! `enabled` knobs, the order-0 fallback, and the counters thp_fault_alloc / thp_fault_fallback
//! and the per-size anon_fault_alloc / anon_fault_fallback. Models mm/huge_memory.c,
//! mm/memory.c alloc_anon_folio and mm/mempolicy.c alloc_pages_mpol.
//!
//! Simplification: no memcg, so charge failures (`*_fallback_charge`) never happen (§19.1.3);
//! the faulting range is assumed PMD-aligned, inside the VMA and unpopulated.

use crate::folio::{FolioId, FolioKind};
use crate::gfp::Gfp;
use crate::node::Mm;
use crate::types::*;
use crate::vmstat::Stat;

pub use fraglab_types::switches::{ThpDefrag, ThpEnabled};

/// The THP knobs (§11.1), with the S2 defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThpConfig {
    pub enabled: ThpEnabled,
    pub defrag: ThpDefrag,
    /// `hugepages-<N>kB/enabled` for anon orders 2..=9 (index = order); orders 0, 1 and 10 unused.
    pub per_size: [ThpEnabled; NR_PAGE_ORDERS],
}

impl Default for ThpConfig {
    fn default() -> Self {
        let mut per_size = [ThpEnabled::Never; NR_PAGE_ORDERS];
        per_size[HPAGE_PMD_ORDER as usize] = ThpEnabled::Inherit;
        ThpConfig {
            enabled: ThpEnabled::Madvise,
            defrag: ThpDefrag::Madvise,
            per_size,
        }
    }
}

/// Per-size mTHP stats (`hugepages-<N>kB/stats/`), indexed by order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MthpStats {
    pub anon_fault_alloc: [u64; NR_PAGE_ORDERS],
    pub anon_fault_fallback: [u64; NR_PAGE_ORDERS],
    /// `swpout` / `swpout_fallback` (reclaim, `vmscan.rs`): folios of this order written to
    /// swap whole / split because swap had no room for them (orders 1..=9 only, as
    /// `mod_mthp_stat` counts).
    pub swpout: [u64; NR_PAGE_ORDERS],
    pub swpout_fallback: [u64; NR_PAGE_ORDERS],
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
    /// `alloc_pages_mpol` for a PMD-order folio on one node (§11.2 NUMA wrinkle): first with
    /// __GFP_THISNODE|__GFP_NORETRY, then — only if that failed and the gfp can reclaim
    /// directly — unmodified.
    fn alloc_thp_mpol(&mut self, cpu: u32, gfp: Gfp) -> Option<FolioId> {
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
            match self.alloc_thp_mpol(cpu, gfp) {
                Some(id) => {
                    self.count(Stat::thp_fault_alloc, 1);
                    self.mthp.anon_fault_alloc[pmd] += 1;
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
