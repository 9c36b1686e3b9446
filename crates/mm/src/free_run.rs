//! Freeing a run of folios in one pass (issue 22 item 1: "unmaps in batches that stay exact per
//! page"): what `zap_pte_range` → `tlb_flush_mmu` → `free_pages_and_swap_cache` →
//! `folios_put_refs` does in the kernel for the folios an munmap or exit releases, a batch of
//! frees (docs/model §1.5 and §2.4 for the free path, §14.2 for the gauges).
//!
//! [`Mm::free_folio_run`] frees the folios of a slice in order and leaves the machine in the
//! state that calling [`Mm::free_folio`] on each of them in the same order leaves it in, to the
//! byte: the same LRU unlinks, the same folio-table frees (so the same order of reusable ids),
//! the same pages pushed on the same PCP lists in the same order, and `free_pcppages_bulk` run
//! at the same frees with the same state. What it saves is the per-folio gauge work of
//! `account_folio`: for anonymous and page-table folios (the ones an unmap frees) the
//! gauges it moves — the LRU and anon sizes of /proc/vmstat and /proc/zoneinfo, NR_MLOCK,
//! nr_page_table_pages, `unevictable_pgs_cleared`, the per-owner rss, the pageblock content
//! census — are summed over the run and applied once at its end. That is exact because (a)
//! every one of them is a sum (wrapping adds of the same deltas in any grouping give the same
//! value), and (b) nothing a free does in between reads them: `free_pages`, the PCP commit,
//! `free_pcppages_bulk`, `__free_one_page` and the ZONE_BELOW_HIGH watermark test read the
//! page array, the pageblock bits, the PCP and buddy lists and the zone's NR_FREE_PAGES (moved
//! per page as before), never an LRU, anon, mlock or page-table gauge, the rss map or the
//! content census. A folio the fast path does not cover (page cache, dirty, slab, kernel,
//! hugetlb folios, and folios with deferred-split state, §31) is freed by `free_folio` after
//! the sums so far are applied; while a direct compactor's capture is armed (`compact.capc`),
//! every folio is.
//!
//! The kernel batches too (`folios_put_refs` takes the LRU lock once per batch and frees
//! through `free_unref_folios`), but its counters are per-CPU deltas folded in at thresholds;
//! the model keeps exact gauges, so only the grouping of the additions changes.

use crate::folio::{FolioId, FolioKind};
use crate::mmzone::prefetch;
use crate::node::Mm;
use crate::types::*;
use crate::vmscan::LRU_NONE;
use crate::vmstat::Stat;

/// How many folios ahead the run prefetches a folio record.
const PREFETCH_RECORD: usize = 8;
/// How many folios ahead it prefetches the page state and LRU neighbours of a folio (whose
/// record the earlier prefetch should have brought in).
const PREFETCH_PAGES: usize = 4;

/// Zone gauges a run moves, by zone: indices into `RunGauges::zone`.
const Z_INACTIVE_ANON: usize = 0;
const Z_ACTIVE_ANON: usize = 1;
const Z_UNEVICTABLE: usize = 2;
const Z_MLOCK: usize = 3;
const Z_STATS: [Stat; 4] = [
    Stat::nr_zone_inactive_anon,
    Stat::nr_zone_active_anon,
    Stat::nr_zone_unevictable,
    Stat::nr_mlock,
];

/// Node gauges and events a run moves: indices into `RunGauges::node`.
const N_INACTIVE_ANON: usize = 0;
const N_ACTIVE_ANON: usize = 1;
const N_UNEVICTABLE: usize = 2;
const N_ANON_PAGES: usize = 3;
const N_ANON_THP: usize = 4;
const N_PAGE_TABLES: usize = 5;
const N_UNEVICTABLE_CLEARED: usize = 6;
const N_STATS: [Stat; 7] = [
    Stat::nr_inactive_anon,
    Stat::nr_active_anon,
    Stat::nr_unevictable,
    Stat::nr_anon_pages,
    Stat::nr_anon_transparent_hugepages,
    Stat::nr_page_table_pages,
    Stat::unevictable_pgs_cleared,
];

/// The gauge deltas of the folios freed so far in a run and not yet applied (pages, signed as
/// `account_folio` applies them: negative for frees).
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct RunGauges {
    node: [i64; N_STATS.len()],
    /// By zone type, of the zones of the node whose first zone index is `base` (a folio of
    /// another node flushes the sums first).
    zone: [[i64; Z_STATS.len()]; MAX_NR_ZONES],
    base: usize,
    /// The rss owner of the latest folios and their pages (applied when the owner changes).
    rss: Option<(u32, i64)>,
    /// The pageblock and mobility of the latest folios and their pages (applied when either
    /// changes).
    block: Option<(usize, usize, i64)>,
    /// Whether anything is pending in `node` or `zone`.
    any: bool,
}

impl RunGauges {
    #[inline]
    fn rss(&mut self, mm: &mut Mm, owner: u32, nr: i64) {
        match &mut self.rss {
            Some((o, n)) if *o == owner => *n += nr,
            _ => {
                self.flush_rss(mm);
                self.rss = Some((owner, nr));
            }
        }
    }

    /// `account_folio`'s rss step for the pending sum.
    fn flush_rss(&mut self, mm: &mut Mm) {
        if let Some((owner, nr)) = self.rss.take() {
            mm.folios.rss.add(owner, nr);
        }
    }

    #[inline]
    fn block(&mut self, mm: &mut Mm, b: usize, m: usize, nr: i64) {
        match &mut self.block {
            Some((bb, mm_, n)) if *bb == b && *mm_ == m => *n += nr,
            _ => {
                self.flush_block(mm);
                self.block = Some((b, m, nr));
            }
        }
    }

    fn flush_block(&mut self, mm: &mut Mm) {
        if let Some((b, m, nr)) = self.block.take() {
            let c = &mut mm.block_content[b][m];
            *c = (*c as i64 + nr) as u32;
        }
    }

    /// Applies everything pending.
    fn flush(&mut self, mm: &mut Mm) {
        self.flush_rss(mm);
        self.flush_block(mm);
        if !self.any {
            return;
        }
        self.any = false;
        for (s, d) in N_STATS.iter().zip(&mut self.node) {
            if *d != 0 {
                let v = &mut mm.stats[*s as usize];
                *v = (*v as i64 + *d) as u64;
                *d = 0;
            }
        }
        for (i, zone) in self.zone.iter_mut().enumerate() {
            for (s, d) in Z_STATS.iter().zip(zone.iter_mut()) {
                if *d != 0 {
                    mm.mod_zone_stat(self.base + i, *s, *d);
                    *d = 0;
                }
            }
        }
    }
}

impl Mm {
    /// Frees the folios `ids`, in order, as [`Mm::free_folio`] on each would (see the module
    /// documentation for what is batched and why that is exact). Every id must be a live folio.
    pub fn free_folio_run(&mut self, cpu: u32, ids: &[FolioId]) {
        if self.compact.capc.is_some() {
            // A capture may take a freed page mid-run: keep the per-folio path.
            for &id in ids {
                self.free_folio(cpu, id);
            }
            return;
        }
        let mut g = RunGauges::default();
        for (i, &id) in ids.iter().enumerate() {
            // Host-cache hints (no effect on the model): the record of a folio further on
            // (both lines a record may span, and its LRU links: `prefetch_folio`), and for a
            // nearer one whose record should be in by now, its head page and its LRU
            // neighbours.
            if let Some(&a) = ids.get(i + PREFETCH_RECORD) {
                self.prefetch_folio(a);
            }
            if let Some(f) = ids
                .get(i + PREFETCH_PAGES)
                .and_then(|&a| self.folios.folios.get(a as usize))
            {
                self.pages.prefetch(f.pfn);
                // The LRU neighbours whose links the unlink rewrites.
                let [next, prev] = self.folios.lru_links[ids[i + PREFETCH_PAGES] as usize];
                if let Some(n) = self.folios.lru_links.get(next as usize) {
                    prefetch(n);
                }
                if let Some(p) = self.folios.lru_links.get(prev as usize) {
                    prefetch(p);
                }
            }
            let f = self.folios.get(id);
            assert!(
                !f.isolated(),
                "free of folio {id} while it is isolated for migration"
            );
            // A folio with deferred-split state (§31: queued, partially mapped, PMD-split)
            // takes the per-folio path, which unqueues it and counts its mapped pages.
            if f.mapping != 0
                || f.dirty()
                || f.split_state()
                || !matches!(f.kind, FolioKind::Anon | FolioKind::PageTable)
            {
                g.flush(self);
                self.free_folio(cpu, id);
                continue;
            }
            let (pfn, order, kind, lru, owner) = (f.pfn, f.order as u32, f.kind, f.lru, f.owner);
            let (active, unevictable, mlocked) = (f.active(), f.unevictable(), f.mlocked());
            let zi = self.zone_of(pfn);
            let base = zi - zi % MAX_NR_ZONES;
            if base != g.base {
                g.flush(self);
                g.base = base;
            }
            let zt = zi - base;
            // `account_folio(id, -1)`, deferred.
            let nr = -(1i64 << order);
            let m = crate::folio::folio_mobility(kind, 0);
            debug_assert_eq!(m, crate::folio::folio_mobility(kind, self.pages.b(pfn)));
            if order < PAGEBLOCK_ORDER {
                g.block(self, (pfn >> PAGEBLOCK_ORDER) as usize, m, nr);
            } else {
                let first = (pfn >> PAGEBLOCK_ORDER) as usize;
                for b in first..first + ((1usize << order) >> PAGEBLOCK_ORDER) {
                    g.block(self, b, m, -(PAGEBLOCK_NR_PAGES as i64));
                }
            }
            if owner > 1 {
                g.rss(self, owner, nr);
            }
            g.any = true;
            if kind == FolioKind::Anon {
                let (n, z) = match active {
                    _ if unevictable => (N_UNEVICTABLE, Z_UNEVICTABLE),
                    false => (N_INACTIVE_ANON, Z_INACTIVE_ANON),
                    true => (N_ACTIVE_ANON, Z_ACTIVE_ANON),
                };
                g.node[n] += nr;
                g.zone[zt][z] += nr;
                g.node[N_ANON_PAGES] += nr;
                if order == HPAGE_PMD_ORDER {
                    g.node[N_ANON_THP] += nr;
                }
                if mlocked {
                    g.zone[zt][Z_MLOCK] += nr;
                }
            } else {
                g.node[N_PAGE_TABLES] += nr;
            }
            if mlocked {
                // `free_folio`'s __page_cache_release count.
                g.node[N_UNEVICTABLE_CLEARED] -= nr;
            }
            if lru != LRU_NONE {
                self.lru_del(id);
            }
            self.folios.remove(id);
            self.free_pages_zone(cpu, zi, pfn, order);
        }
        g.flush(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gfp::Gfp;
    use proptest::prelude::*;

    fn machine() -> Mm {
        crate::test_machines::dma32_normal(u32::MAX)
    }

    /// One folio to allocate: (order choice, kind choice, owner, mlock, activate, cpu, gfp).
    type Spec = (u8, u8, u8, bool, bool, bool, bool);

    /// Allocates the folios of `specs` (the same on every machine: the model is
    /// deterministic). Returns the ones still live at the end.
    fn populate(mm: &mut Mm, specs: &[Spec]) -> Vec<FolioId> {
        let mut ids = Vec::new();
        for &(o, k, owner, mlock, activate, cpu1, dma32) in specs {
            let order = [0, 0, 0, 0, 1, 2, 3, 4, 9][o as usize % 9];
            let kind = match k % 8 {
                0 => FolioKind::PageTable,
                1 => FolioKind::Kernel,
                _ => FolioKind::Anon,
            };
            let order = if kind == FolioKind::Anon {
                order
            } else {
                order.min(1)
            };
            mm.cur.pid = [0, 1, 2, 3, 7][owner as usize % 5];
            let gfp = match (kind, dma32) {
                (FolioKind::Anon, false) => Gfp::GFP_HIGHUSER_MOVABLE,
                (FolioKind::Anon, true) => Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::HIGHMEM).union(Gfp::DMA32),
                _ => Gfp::GFP_KERNEL,
            };
            let Some(id) = mm.alloc_folio(cpu1 as u32, gfp, order, kind, false) else {
                continue;
            };
            if kind == FolioKind::Anon {
                if mlock {
                    mm.mlock_folio(id);
                }
                if activate {
                    mm.folio_mark_accessed(id);
                    mm.folio_mark_accessed(id);
                }
            }
            ids.push((id, mm.folios.get(id).token()));
        }
        // Later allocations may have reclaimed or OOM-killed earlier folios (and reused ids).
        ids.into_iter()
            .filter(|&(id, token)| mm.folio_is(id, token))
            .map(|(id, _)| id)
            .collect()
    }

    /// Everything a free may touch, rendered comparable.
    fn state(mm: &Mm) -> String {
        let mut rss: Vec<_> = mm.folios.rss.iter().collect();
        rss.sort();
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{}",
            mm.zones,
            mm.pages,
            mm.blocks,
            mm.block_content,
            mm.stats,
            mm.folios.folios,
            mm.folios.census,
            rss,
            mm.reclaim.lruvec,
            mm.trace.buf,
            mm.folios.nr_shrinkable,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// `free_folio_run` leaves the state `free_folio` one by one leaves: buddy lists and
        /// counts, PCP lists in order, page array, folio table (and the order of reused ids:
        /// the folios allocated afterwards get the same ids), LRU lists in order, vmstat and
        /// zone gauges, rss, the pageblock census and the trace.
        #[test]
        fn run_matches_per_folio_frees(
            specs in proptest::collection::vec(any::<Spec>(), 1..1500),
            pick in proptest::collection::vec(any::<(bool, u16)>(), 0..1500),
            cut in any::<u16>(),
            more in proptest::collection::vec(any::<Spec>(), 0..200),
        ) {
            let (mut a, mut b) = (machine(), machine());
            let ids = populate(&mut a, &specs);
            prop_assert_eq!(&ids, &populate(&mut b, &specs));
            // A random selection of the live folios in a random order, freed in two runs.
            let mut sel: Vec<FolioId> = Vec::new();
            let mut pool = ids.clone();
            for &(take, r) in &pick {
                if pool.is_empty() {
                    break;
                }
                let id = pool.swap_remove(r as usize % pool.len());
                if take {
                    sel.push(id);
                }
            }
            let cut = if sel.is_empty() { 0 } else { cut as usize % (sel.len() + 1) };
            for &id in &sel {
                a.free_folio(1, id);
            }
            b.free_folio_run(1, &sel[..cut]);
            b.free_folio_run(1, &sel[cut..]);
            prop_assert_eq!(state(&a), state(&b));
            prop_assert!(a.check_invariants().is_ok());
            // The freed ids are reused in the same order.
            prop_assert_eq!(populate(&mut a, &more), populate(&mut b, &more));
            prop_assert_eq!(state(&a), state(&b));
        }
    }
}
