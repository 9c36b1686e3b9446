//! Runs of order-0 anonymous faults served by the PCP fast path in one call (issue 22 item 1,
//! host-side batching only: every page is still its own fault, allocation and folio).
//!
//! An order-0 `GFP_HIGHUSER_MOVABLE` allocation that `get_page_from_freelist` serves from the
//! head of the CPU's PCP list (docs/model §2.3, §4.3) leaves every input of the next one's
//! decisions as it found them: PCP pages are not free pages, so the zone's NR_FREE_PAGES, its
//! free areas, `below_high`, the watermarks and their boost do not move; only the PCP list
//! shrinks. So while that list has pages, N faults in a row take the same branch N times, and
//! [`Mm::anon_fault_run`] proves the branch once and then does, per page, only what differs:
//! the PCP list head taken, the page's state, the new folio (token, owner, LRU head) and its
//! pageblock content, and the mm_page_alloc event when traced. The counters every page adds
//! the same amount to (pgfault, pgalloc_*, the NUMA hits, `WorkSum::allocs`, the LRU and anon
//! gauges, the owner's rss) are added once for the run: nothing reads them in between.
//!
//! The run stops (and the caller faults the next page the ordinary way) wherever a page
//! would not take that branch: an empty PCP list (a refill, `rmqueue_bulk`), a zone whose
//! `below_high` would be set, a pending boost wake-up of kswapd (`ZONE_BOOSTED_WATERMARK`),
//! no zone passing its watermark (the slow path), or a VMA whose faults may try an mTHP or PMD
//! order.

use crate::folio::FolioId;
use crate::gfp::{AllocFlags, Gfp};
use crate::mmzone::{order_to_pindex, NIL, WMARK_HIGH};
use crate::node::{trace_kind, Mm};
use crate::trace::TraceEvent;
use crate::types::*;
use crate::vmstat::Stat;

/// How many faults ahead `anon_fault_run` prefetches the folio slot it will fill.
const FOLIO_PREFETCH: usize = 4;

impl Mm {
    /// A host-cache hint: starts loading the folio slot that the `ahead`-th next
    /// `FolioTable::insert` will reuse (if it reuses one). No effect on the model.
    #[inline]
    fn prefetch_free_slot(&self, ahead: usize) {
        let free = &self.folios.free_ids;
        if let Some(&id) = free.len().checked_sub(1 + ahead).and_then(|i| free.get(i)) {
            if let Some(f) = self.folios.folios.get(id as usize) {
                crate::mmzone::prefetch(f);
            }
        }
    }

    /// Whether every anonymous fault of a VMA (`madvised` = VM_HUGEPAGE) allocates an order-0
    /// folio whatever its neighbourhood: no mTHP order (2..=8) and not the PMD order is enabled
    /// for it (`do_anonymous_fault_upto` then goes straight to the order-0 allocation).
    pub fn anon_faults_order0(&self, madvised: bool) -> bool {
        !(2..=HPAGE_PMD_ORDER).any(|o| self.thp.order_allowed(o, madvised))
    }

    /// The zone `get_page_from_freelist` would try first and serve from for an allocation
    /// with `alloc_flags` at order 0, if deciding it changes no state: None when a zone's
    /// high-watermark test would fail and set `below_high`, or when no zone passes (the
    /// NOFRAGMENT retry and the slow path are the ordinary path's business).
    ///
    /// On several nodes only the preferred node's zones qualify, and only while its kswapd
    /// is not running (the walk's remote-node and busy-kswapd rules are the ordinary path's).
    fn fast_zone(&self, alloc_flags: AllocFlags, ac: &crate::page_alloc::AllocContext) -> Option<usize> {
        let preferred = ac.preferred_zone?;
        let mut k = ac.zref;
        while let Some(zi) = self.next_zone(ac, &mut k) {
            let z = &self.zones[zi];
            if self.numa.multi() && (z.nid != self.zones[preferred].nid || self.kswapd_running(z.nid)) {
                return None;
            }
            if !z.flags.below_high {
                let mark = z.wmark_pages(WMARK_HIGH);
                if self.zone_watermark_fast(zi, 0, mark, ac.highest_zoneidx, alloc_flags) {
                    return Some(zi);
                }
                return None;
            }
            let mark = z.wmark_pages(alloc_flags.wmark() as usize);
            if self.zone_watermark_fast(zi, 0, mark, ac.highest_zoneidx, alloc_flags)
                || alloc_flags.has(AllocFlags::NO_WATERMARKS)
            {
                return Some(zi);
            }
        }
        None
    }

    /// Up to `n` anonymous faults in a row on `cpu`, each what `do_anonymous_fault_upto(cpu,
    /// madvised, _)` followed by nothing else would do, for as long as each is an order-0
    /// allocation served from the head of the PCP list without a refill (see the module
    /// comment). The folios are appended to `out` in fault order; returns how many. 0 means
    /// the next fault must take the ordinary path (it may refill the PCP list, set
    /// `below_high`, wake kswapd, enter the slow path or try a large order).
    ///
    /// Leaves the model as that many single faults would: same PCP list order, pfns, folio
    /// ids and tokens, LRU order, pageblock contents, counters, gauges, rss, work sum and
    /// trace events.
    pub fn anon_fault_run(&mut self, cpu: u32, madvised: bool, n: usize, out: &mut Vec<FolioId>) -> usize {
        // With free page reporting each fault may take a host fault of its own (§32.3 item 6),
        // so the faults are no longer alike: the ordinary path takes them one by one.
        if n == 0 || !self.anon_faults_order0(madvised) || self.reporting.enabled() {
            return 0;
        }
        assert!(cpu < self.nr_cpus, "cpu {cpu} out of range");
        let gfp = Gfp::GFP_HIGHUSER_MOVABLE;
        if self.numa.multi() && matches!(self.cur.mempolicy, crate::numa::MemPolicy::Interleave(_)) {
            // Each fault of an interleaving task takes the next node: not a run.
            return 0;
        }
        let ac = self.alloc_context_cpu(cpu, gfp);
        let mut alloc_flags = AllocFlags(AllocFlags::WMARK_LOW);
        alloc_flags.set(self.alloc_flags_nofragment(ac.preferred_zone, gfp).0);
        let Some(zi) = self.fast_zone(alloc_flags, &ac) else {
            return 0;
        };
        if alloc_flags.has(AllocFlags::KSWAPD) && self.zones[zi].flags.boosted_watermark {
            // The first fault's rmqueue wakes kswapd: the ordinary path's.
            return 0;
        }
        let c = cpu as usize;
        let mt = ac.migratetype;
        let pindex = order_to_pindex(mt, 0);
        let trace = self.trace_on(trace_kind::MM_PAGE_ALLOC);
        let owner = self.cur.pid;
        let start = out.len();
        // Host-cache hints (no effect on the model): the folio slots the first faults will
        // fill (`FolioTable::insert` reuses freed ids, last freed first).
        for j in 0..n.min(FOLIO_PREFETCH) {
            self.prefetch_free_slot(j);
        }
        for _ in 0..n {
            self.prefetch_free_slot(FOLIO_PREFETCH);
            let pfn = self.zones[zi].pcp[c].lists[pindex].first();
            if pfn == NIL {
                break;
            }
            // rmqueue_pcplist (the list's head) and rmqueue's page setup.
            let p = &mut self.zones[zi].pcp[c];
            p.free_count >>= 1;
            p.count -= 1;
            self.pcp_list_del(zi, c, pindex, pfn);
            self.pages.set(pfn, crate::mmzone::PageKind::Allocated, 0);
            self.pages.set_b(pfn, mt as u32);
            if trace {
                self.emit(
                    cpu,
                    TraceEvent::MmPageAlloc {
                        pfn: Some(pfn),
                        order: 0,
                        gfp,
                        migratetype: mt as i32,
                    },
                );
            }
            // alloc_folio: the folio, its owner, the head page's owner word, the LRU head,
            // and its pageblock's movable content (`account_folio`'s per-page part).
            let id = self
                .folios
                .insert(pfn, 0, crate::folio::FolioKind::Anon, false, None);
            self.folios.folios[id as usize].owner = owner;
            self.pages.set_a(pfn, id);
            self.lru_add(id);
            debug_assert_eq!(self.zone_of(pfn), zi);
            self.block_content[(pfn >> PAGEBLOCK_ORDER) as usize][1] += 1;
            out.push(id);
        }
        let k = out.len() - start;
        if k == 0 {
            return 0;
        }
        let nr = k as u64;
        // The counters each fault adds the same amount to.
        self.count(Stat::pgfault, nr);
        self.count(crate::page_alloc::PGALLOC_BY_ZONE[zi % MAX_NR_ZONES], nr);
        let preferred = ac.preferred_zone.expect("a zone was found");
        self.zone_statistics(preferred, zi, cpu, nr);
        // alloc_pages: a fast-path allocation adds an empty `AllocWork` (allocs only).
        self.work.last_alloc = crate::slowpath::AllocWork::default();
        self.work.sum.allocs += nr;
        // account_folio(id, 1) of a new, inactive, evictable order-0 anonymous folio.
        if owner > 1 {
            self.folios.rss.add(owner, nr as i64);
        }
        self.count(Stat::nr_inactive_anon, nr);
        self.count(Stat::nr_anon_pages, nr);
        self.mod_zone_stat(zi, Stat::nr_zone_inactive_anon, nr as i64);
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmzone::{MachineConfig, ZoneConfig};
    use proptest::prelude::*;

    /// A small DMA32 zone of `pages` and a 128 MiB Normal zone (PCP batch 7: refills of
    /// several pages, so that runs happen).
    fn machine(pages: u32) -> Mm {
        let z = |zone_type, start_pfn, pages| ZoneConfig {
            zone_type,
            nid: 0,
            start_pfn,
            spanned: pages,
            present: pages,
            managed: pages,
        };
        let m = MachineConfig {
            cpu_node: Vec::new(),
            zones: vec![
                z(ZoneType::Dma32, 4096, pages),
                z(ZoneType::Normal, 4096 + pages, 32768),
            ],
            nr_cpus: 2,
        };
        let mut mm = Mm::new(&m, crate::Tunables::default()).unwrap();
        mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC);
        mm
    }

    /// Everything the faults may touch, for comparison.
    fn state(mm: &Mm) -> String {
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{}",
            mm.zones,
            mm.pages,
            mm.block_content,
            mm.stats,
            mm.folios.folios,
            {
                let mut r: Vec<_> = mm.folios.rss.iter().collect();
                r.sort();
                r
            },
            mm.folios.census,
            mm.reclaim.lruvec,
            mm.work.sum,
            mm.mthp,
            mm.trace
                .buf
                .iter()
                .map(|r| format!("{r:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// `n` faults on `cpu` by `pid`.
        Faults { cpu: u32, pid: u32, n: usize },
        /// Frees the folio at this position of the live list (the PCP list grows).
        Free { cpu: u32, at: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..2u32, 0..4u32, 1..3000usize).prop_map(|(cpu, pid, n)| Op::Faults { cpu, pid, n }),
            1 => (0..2u32, any::<usize>()).prop_map(|(cpu, at)| Op::Free { cpu, at }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        /// Runs of faults leave the machine as the same faults one by one through
        /// `do_anonymous_fault_upto` (order 0): PCP lists, page states, folio table, LRU order,
        /// pageblock contents, counters, rss, work sum and trace events — through refills,
        /// `below_high`, kswapd wakes, reclaim and frees (a small machine runs out).
        #[test]
        fn run_matches_single_faults(blocks in 8u32..24, ops in prop::collection::vec(op(), 1..40)) {
            let pages = blocks * PAGEBLOCK_NR_PAGES;
            let (mut a, mut b) = (machine(pages), machine(pages));
            let mut live: Vec<FolioId> = Vec::new();
            let mut out = Vec::new();
            for op in ops {
                match op {
                    Op::Faults { cpu, pid, n } => {
                        a.cur.pid = pid;
                        b.cur.pid = pid;
                        let mut want = Vec::new();
                        let mut failed = false;
                        for _ in 0..n {
                            match a.do_anonymous_fault_upto(cpu, false, 0) {
                                Some(id) => want.push(id),
                                None => {
                                    failed = true;
                                    break;
                                }
                            }
                        }
                        let mut got = Vec::new();
                        while got.len() < want.len() {
                            out.clear();
                            let k = b.anon_fault_run(cpu, false, want.len() - got.len(), &mut out);
                            if k == 0 {
                                let id = b.do_anonymous_fault_upto(cpu, false, 0);
                                prop_assert!(id.is_some());
                                got.push(id.unwrap());
                            } else {
                                prop_assert_eq!(k, out.len());
                                got.extend_from_slice(&out);
                            }
                        }
                        prop_assert_eq!(&want, &got);
                        if failed {
                            prop_assert!(b.do_anonymous_fault_upto(cpu, false, 0).is_none());
                        }
                        live.extend(want.iter().filter(|&&id| a.folios.folios[id as usize].live()));
                    }
                    Op::Free { cpu, at } => {
                        live.retain(|&id| a.folios.folios[id as usize].live());
                        live.sort_unstable();
                        live.dedup();
                        if !live.is_empty() {
                            let id = live.swap_remove(at % live.len());
                            a.free_folio(cpu, id);
                            b.free_folio(cpu, id);
                        }
                    }
                }
                prop_assert_eq!(state(&a), state(&b));
            }
        }
    }

    /// A VMA allowed a PMD THP (madvised with THP `madvise`) gets no run: its faults try the
    /// large order first. Nor does an empty PCP list.
    #[test]
    fn no_run_where_a_large_order_may_be_tried() {
        let mut mm = machine(8192);
        let mut out = Vec::new();
        assert!(!mm.anon_faults_order0(true));
        assert_eq!(mm.anon_fault_run(0, true, 10, &mut out), 0);
        assert!(mm.anon_faults_order0(false));
        // An empty PCP list: no run; after the refilling fault, a run.
        assert_eq!(mm.anon_fault_run(0, false, 10, &mut out), 0);
        assert!(mm.do_anonymous_fault_upto(0, false, 0).is_some());
        let k = mm.anon_fault_run(0, false, 10, &mut out);
        assert!(k > 0 && k == out.len());
    }
}
