//! The LRU lists of the classic (non-MGLRU) reclaim model (docs/model §10.3): one lruvec
//! for the single node (no memcg, §19.1 item 3), five lists of folios, and the isolation and
//! putback primitives compaction and reclaim share. Models parts of mm/vmscan.c and mm/swap.c.
//!
//! Reclaim proper lives here too: `isolate_lru_folios`, `shrink_active_list`,
//! `shrink_inactive_list`/`shrink_folio_list` (file eviction with shadow entries, anon swap-out),
//! `get_scan_count`, `shrink_lruvec`, `shrink_slab`, `shrink_node` (the entry kswapd and direct
//! reclaim share) and direct reclaim's `try_to_free_pages` (§10.3–§10.5). kswapd's loop is in
//! `kswapd.rs`, the swap device in `swap.rs`, refault detection in `workingset.rs`.

use crate::folio::{FolioId, FolioKind};
use crate::mmzone::{ListHead, NIL, PG_LRU};
use crate::node::Mm;

/// `enum lru_list` (§10.3.1); the names are the ones tracepoints print.
pub const LRU_INACTIVE_ANON: u8 = 0;
pub const LRU_ACTIVE_ANON: u8 = 1;
pub const LRU_INACTIVE_FILE: u8 = 2;
pub const LRU_ACTIVE_FILE: u8 = 3;
pub const LRU_UNEVICTABLE: u8 = 4;
pub const NR_LRU_LISTS: usize = 5;
/// Not on any list.
pub const LRU_NONE: u8 = 0xff;

pub const LRU_NAMES: [&str; NR_LRU_LISTS] = [
    "inactive_anon",
    "active_anon",
    "inactive_file",
    "active_file",
    "unevictable",
];

/// The node's lruvec: the five lists (head = most recently added) and their sizes in pages.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Lruvec {
    pub lists: [ListHead; NR_LRU_LISTS],
    pub pages: [u64; NR_LRU_LISTS],
    /// Recent reclaim cost of each side (`lru_note_cost`), for `get_scan_count`.
    pub anon_cost: u64,
    pub file_cost: u64,
    /// workingset_activate_{anon,file} at the last `snapshot_refaults` (`lruvec->refaults`).
    pub refaults: [u64; 2],
}

impl Mm {
    /// `folio_lru_list`: the list a folio belongs on (anon/file × active, or unevictable,
    /// §29.1.3).
    pub fn folio_lru_list(&self, id: FolioId) -> u8 {
        let f = &self.folios.folios[id as usize];
        if f.unevictable() {
            return LRU_UNEVICTABLE;
        }
        let base = if f.kind == FolioKind::Anon {
            LRU_INACTIVE_ANON
        } else {
            LRU_INACTIVE_FILE
        };
        base + f.active() as u8
    }

    /// `lruvec_add_folio`: puts an LRU folio at the head of its list and sets PageLRU.
    pub(crate) fn lru_add(&mut self, id: FolioId) {
        let l = self.folio_lru_list(id);
        let n = self.pfn_nid(self.folios.folios[id as usize].pfn) as usize;
        let first = self.reclaim.lruvec[n].lists[l as usize].first;
        let f = &mut self.folios.folios[id as usize];
        debug_assert_eq!(f.lru, LRU_NONE, "folio {id} is already on a list");
        f.lru = l;
        let (pfn, nr) = (f.pfn, 1u64 << f.order);
        let links = &mut self.folios.lru_links;
        links[id as usize] = [first, NIL];
        if first == NIL {
            self.reclaim.lruvec[n].lists[l as usize].last = id;
        } else {
            links[first as usize][1] = id;
        }
        self.reclaim.lruvec[n].lists[l as usize].first = id;
        self.reclaim.lruvec[n].pages[l as usize] += nr;
        self.pages.set_flag(pfn, PG_LRU, true);
    }

    /// `lruvec_del_folio`: takes a folio off its list and clears PageLRU.
    pub(crate) fn lru_del(&mut self, id: FolioId) {
        let f = &mut self.folios.folios[id as usize];
        let l = f.lru;
        assert_ne!(l, LRU_NONE, "folio {id} is on no list");
        let (pfn, nr) = (f.pfn, 1u64 << f.order);
        f.lru = LRU_NONE;
        let n = self.pfn_nid(pfn) as usize;
        let links = &mut self.folios.lru_links;
        let [next, prev] = std::mem::replace(&mut links[id as usize], [NIL, NIL]);
        if prev == NIL {
            self.reclaim.lruvec[n].lists[l as usize].first = next;
        } else {
            links[prev as usize][0] = next;
        }
        if next == NIL {
            self.reclaim.lruvec[n].lists[l as usize].last = prev;
        } else {
            links[next as usize][1] = prev;
        }
        self.reclaim.lruvec[n].pages[l as usize] -= nr;
        self.pages.set_flag(pfn, PG_LRU, false);
    }

    /// `folio_isolate_lru` as compaction uses it: off the list, counted in NR_ISOLATED_*.
    pub(crate) fn isolate_lru_folio(&mut self, id: FolioId) {
        self.lru_del(id);
        self.account_isolate(id);
    }

    /// `folio_putback_lru`: back on the head of its list (after `lru_add`'s evictability
    /// check, §29.1.3).
    pub(crate) fn putback_lru_folio(&mut self, id: FolioId) {
        self.lru_add_evictable_check(id);
        self.account_putback(id);
        self.lru_add(id);
    }

    /// `folio_mark_accessed` (§10.3.3, mm/swap.c): an unreferenced folio becomes referenced; a
    /// referenced inactive folio is activated (moved to the active list, referenced cleared,
    /// `pgactivate` += its pages) and `workingset_activation` ages the node's non-resident
    /// pages by its size (§10.3.8).
    pub fn folio_mark_accessed(&mut self, id: FolioId) {
        // PG_idle is cleared by any access (`folio_clear_idle`, §27.2 item 2).
        self.folios.folios[id as usize].set_idle(false);
        let f = &self.folios.folios[id as usize];
        if !f.kind.on_lru() || f.isolated() {
            return;
        }
        if !f.referenced() {
            self.folios.folios[id as usize].set_referenced(true);
        } else if !f.active() && !f.unevictable() {
            // An unevictable folio is not activated (§29.1).
            let nr = 1u64 << f.order;
            self.move_to_active(id);
            self.count(crate::vmstat::Stat::pgactivate, nr);
            // workingset_activation: activations age the non-resident pages too.
            self.workingset_age(nr);
        }
    }

    /// The folios of an LRU list from head (newest) to tail (oldest), node by node.
    pub fn lru_folios(&self, list: u8) -> Vec<FolioId> {
        let mut out = Vec::new();
        for lv in &self.reclaim.lruvec {
            let mut id = lv.lists[list as usize].first;
            while id != NIL {
                out.push(id);
                id = self.folios.lru_links[id as usize][0];
            }
        }
        out
    }
}

/// `struct scan_control`, the parts the model uses (§10.4, §10.5).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
pub struct ScanControl {
    /// The node being reclaimed (`pgdat` of `shrink_node`).
    pub nid: u32,
    pub nr_to_reclaim: u64,
    /// The highest zone index whose folios may be reclaimed (`gfp_zone` of the request).
    pub reclaim_idx: usize,
    pub order: u32,
    pub priority: i32,
    /// `may_swap`: anonymous folios may be reclaimed (if a swap device has room).
    pub may_swap: bool,
    /// `may_unmap`: mapped folios may be reclaimed (cleared by node reclaim without
    /// RECLAIM_UNMAP). The model maps anonymous folios only, so without it anonymous folios
    /// are kept.
    pub may_unmap: bool,
    /// kswapd (counts pgscan/pgsteal_kswapd) rather than direct reclaim.
    pub kswapd: bool,
    /// CPU whose PCP receives the freed folios.
    pub cpu: u32,
    /// The request's gfp (`gfp_compaction_allowed` for reclaim/compaction mode; anon folios
    /// are only swapped with __GFP_IO).
    pub gfp: crate::gfp::Gfp,
    pub nr_scanned: u64,
    pub nr_reclaimed: u64,
    /// Direct reclaim stopped because compaction can go ahead (§10.5.4).
    pub compaction_ready: bool,
    /// `may_deactivate` bits (DEACTIVATE_ANON = 1, DEACTIVATE_FILE = 2), `cache_trim_mode`,
    /// `file_is_tiny` — set by `prepare_scan_control`.
    pub may_deactivate: u8,
    pub cache_trim_mode: bool,
    pub file_is_tiny: bool,
    /// An active list had a scan target but `may_deactivate` forbade it (`shrink_list`);
    /// `do_try_to_free_pages` then retries with `force_deactivate`.
    pub skipped_deactivate: bool,
    /// Deactivate both active lists regardless of their balance.
    pub force_deactivate: bool,
    /// kswapd's restart without cache-trim mode (`balance_pgdat`): never enter it.
    pub no_cache_trim_mode: bool,
    /// A `shrink_node` pass in cache-trim mode reclaimed nothing.
    pub cache_trim_mode_failed: bool,
}

impl ScanControl {
    /// Direct reclaim's control (§10.5.2): 32 pages, priority 12, may swap.
    pub fn direct(reclaim_idx: usize, order: u32, cpu: u32) -> ScanControl {
        ScanControl {
            nid: 0,
            nr_to_reclaim: crate::types::SWAP_CLUSTER_MAX,
            reclaim_idx,
            order,
            priority: DEF_PRIORITY,
            may_swap: true,
            may_unmap: true,
            kswapd: false,
            cpu,
            gfp: crate::gfp::Gfp::GFP_KERNEL,
            nr_scanned: 0,
            nr_reclaimed: 0,
            compaction_ready: false,
            may_deactivate: 0,
            cache_trim_mode: false,
            file_is_tiny: false,
            skipped_deactivate: false,
            force_deactivate: false,
            no_cache_trim_mode: false,
            cache_trim_mode_failed: false,
        }
    }
}

/// `DEF_PRIORITY`.
pub const DEF_PRIORITY: i32 = 12;
/// `NODE_RECLAIM_PRIORITY`: node reclaim scans 1/16 of the lists per pass.
pub const NODE_RECLAIM_PRIORITY: i32 = 4;
/// `RECLAIM_ZONE`, `RECLAIM_WRITE`, `RECLAIM_UNMAP`: the bits of `vm.zone_reclaim_mode`.
pub const RECLAIM_ZONE: u32 = 1;
pub const RECLAIM_WRITE: u32 = 2;
pub const RECLAIM_UNMAP: u32 = 4;

/// What `node_reclaim` returned.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeReclaim {
    /// `NODE_RECLAIM_NOSCAN`: it did not scan (the allocation may not block, or the node has
    /// CPUs and is not the allocating CPU's).
    NoScan,
    /// `NODE_RECLAIM_FULL`: too little unmapped page cache and reclaimable slab to bother.
    Full,
    /// It scanned; whether it reclaimed 2^order pages.
    Reclaimed(bool),
}
const DEACTIVATE_ANON: u8 = 1;
const DEACTIVATE_FILE: u8 = 2;
/// `SWAP_CLUSTER_MAX_SKIPPED` (include/linux/swap.h): folios `isolate_lru_folios` may skip
/// (zone above `reclaim_idx`) before it takes them anyway.
pub const SWAP_CLUSTER_MAX_SKIPPED: u64 = crate::types::SWAP_CLUSTER_MAX << 10;
/// `SHRINK_BATCH` (include/linux/shrinker.h): objects per `scan_objects` call.
pub const SHRINK_BATCH: u64 = 128;
/// `DEFAULT_SEEKS`: the cost of recreating an object, for the shrinker's pressure.
pub const DEFAULT_SEEKS: u64 = 2;

/// `enum scan_balance`.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanBalance {
    Equal,
    Fract,
    Anon,
    File,
}

/// The one shrinker of the model (the reclaimable caches the workload declared with
/// [`Mm::set_slab_shrinkable`]): `shrinker->nr_deferred`, the scan work carried over.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SlabShrinker {
    pub nr_deferred: u64,
}

/// `struct reclaim_stat`: what `shrink_folio_list` did with one isolated batch (pages).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReclaimStat {
    pub nr_dirty: u64,
    pub nr_unqueued_dirty: u64,
    /// Pages found under writeback (§10.3.6, `writeback.rs`).
    pub nr_writeback: u64,
    /// Pages written by reclaim (anon to swap; file folios are never written by 6.18 reclaim).
    pub nr_pageout: u64,
    /// Activated pages, [anon, file].
    pub nr_activate: [u64; 2],
    pub nr_ref_keep: u64,
    pub nr_reclaimed: u64,
}

impl Mm {
    /// `inactive_is_low` (§10.3.4): with gb = (inactive + active) in GiB and ratio =
    /// int_sqrt(10·gb) (1 below 1 GiB), the inactive list is low if inactive·ratio < active.
    pub fn inactive_is_low(&self, nid: u32, inactive_list: u8) -> bool {
        let lv = &self.reclaim.lruvec[nid as usize];
        let inactive = lv.pages[inactive_list as usize];
        let active = lv.pages[inactive_list as usize + 1];
        let gb = (inactive + active) >> (30 - crate::types::PAGE_SHIFT);
        let ratio = if gb > 0 {
            ((10 * gb) as f64).sqrt() as u64
        } else {
            1
        };
        inactive * ratio < active
    }

    /// `lruvec_lru_size(lruvec, lru, zone_idx)`: pages of list `lru` in node `nid`'s zones ≤
    /// `zone_idx` (the zone LRU gauges, which like the lists exclude isolated folios).
    pub fn lruvec_lru_size(&self, nid: u32, lru: u8, zone_idx: usize) -> u64 {
        use crate::vmstat::Stat;
        let item = [
            Stat::nr_zone_inactive_anon,
            Stat::nr_zone_active_anon,
            Stat::nr_zone_inactive_file,
            Stat::nr_zone_active_file,
        ][lru as usize];
        let base = nid as usize * crate::types::MAX_NR_ZONES;
        self.zones[base..=base + zone_idx.min(crate::types::MAX_NR_ZONES - 1)]
            .iter()
            .filter(|z| z.managed > 0)
            .map(|z| z.stat(item).max(0) as u64)
            .sum()
    }

    /// Puts an unisolated LRU folio on its active list without counting (`folio_set_active`
    /// before `folio_add_lru`, as a refault does).
    pub(crate) fn move_to_active(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        if f.active() || f.isolated() || f.lru == LRU_NONE || f.unevictable() {
            return;
        }
        self.account_folio(id, -1);
        self.lru_del(id);
        let f = &mut self.folios.folios[id as usize];
        f.set_active(true);
        f.set_referenced(false);
        self.lru_add(id);
        self.account_folio(id, 1);
    }

    /// Puts an isolated folio back on the head of the list its flags name (`move_folios_to_lru`
    /// for one folio).
    fn putback_isolated(&mut self, id: FolioId, active: bool) {
        // An isolated folio's gauges do not depend on PG_active: set it before the putback.
        self.folios.folios[id as usize].set_active(active);
        self.account_putback(id);
        self.lru_add(id);
    }

    /// `isolate_lru_folios` (§10.4.4): walks list `lru` from its tail (oldest) until
    /// `nr_to_scan` eligible pages were taken or the list ends. Folios in zones above
    /// `sc.reclaim_idx` are skipped (`pgskip_<zone>`) and spliced back to the list *head*, but
    /// at most [`SWAP_CLUSTER_MAX_SKIPPED`] of them: after that they are taken like the others.
    /// The scanned count includes the skipped pages (it is what pgscan/pgrefill count). Emits
    /// mm_vmscan_lru_isolate. Returns (folios taken, oldest first; pages scanned; pages taken).
    fn isolate_lru_folios(&mut self, nr_to_scan: u64, lru: u8, sc: &ScanControl) -> (Vec<FolioId>, u64, u64) {
        use crate::vmstat::Stat;
        let (mut scan, mut total_scan, mut nr_taken) = (0u64, 0u64, 0u64);
        let mut taken = Vec::new();
        let mut skipped = Vec::new();
        let mut nr_skipped = [0u64; crate::types::MAX_NR_ZONES];
        let mut id = self.reclaim.lruvec[sc.nid as usize].lists[lru as usize].last;
        while id != NIL && scan < nr_to_scan {
            let prev = self.folios.lru_links[id as usize][1];
            let f = &self.folios.folios[id as usize];
            let nr = 1u64 << f.order;
            // A host-cache hint, no effect on the model: the page flags `lru_del` will clear.
            self.pages.prefetch(f.pfn);
            let zi = self.zone_of(f.pfn);
            total_scan += nr;
            let zidx = zi % crate::types::MAX_NR_ZONES;
            if (skipped.len() as u64) < SWAP_CLUSTER_MAX_SKIPPED && zidx > sc.reclaim_idx {
                nr_skipped[zidx] += nr;
                skipped.push(id);
            } else {
                scan += nr;
                nr_taken += nr;
                taken.push(id);
            }
            id = prev;
        }
        for &id in &taken {
            self.isolate_lru_folio(id);
        }
        // list_splice(&folios_skipped, src): the block goes to the head, the first skipped
        // (oldest) deepest.
        for &id in &skipped {
            self.lru_del(id);
            self.lru_add(id);
        }
        let pgskip = [
            Stat::pgskip_dma,
            Stat::pgskip_dma32,
            Stat::pgskip_normal,
            Stat::pgskip_movable,
            Stat::pgskip_device,
        ];
        let mut nr_skipped_total = 0;
        for (zi, &n) in nr_skipped.iter().enumerate() {
            if n > 0 {
                self.count(pgskip[zi], n);
                nr_skipped_total += n;
            }
        }
        if self.trace_on(crate::node::trace_kind::VMSCAN_LRU) {
            let ev = crate::trace::TraceEvent::MmVmscanLruIsolate {
                highest_zoneidx: sc.reclaim_idx as i32,
                order: sc.order as i32,
                nr_requested: nr_to_scan,
                nr_scanned: total_scan,
                nr_skipped: nr_skipped_total,
                nr_taken,
                lru,
            };
            self.emit(sc.cpu, ev);
        }
        (taken, total_scan, nr_taken)
    }

    /// `shrink_active_list` (§10.3.7): isolates up to `nr_to_scan` pages from the tail of an
    /// active list and deactivates them all — the model has no executable mappings, so no
    /// referenced VM_EXEC file folio stays active (`nr_referenced` = 0). Deactivated folios get
    /// PG_workingset. `folio_referenced` clears the PTE young bits but not PG_referenced: the
    /// model's `referenced` stands for the young bit of an anon folio (cleared here) and for
    /// PG_referenced of a page-cache folio (kept, so one more access reactivates it). Counts
    /// `pgrefill` (pages scanned) and `pgdeactivate`; emits mm_vmscan_lru_isolate and
    /// mm_vmscan_lru_shrink_active.
    pub fn shrink_active_list(&mut self, nr_to_scan: u64, active_list: u8, sc: &mut ScanControl) {
        use crate::vmstat::Stat;
        let file = active_list == LRU_ACTIVE_FILE;
        let (taken, nr_scanned, nr_taken) = self.isolate_lru_folios(nr_to_scan, active_list, sc);
        self.count(Stat::pgrefill, nr_scanned);
        let mut nr_deactivate = 0;
        for id in taken {
            let f = &mut self.folios.folios[id as usize];
            f.set_workingset(true);
            if !file {
                f.set_referenced(false);
            }
            nr_deactivate += 1u64 << f.order;
            self.putback_isolated(id, false);
        }
        self.count(Stat::pgdeactivate, nr_deactivate);
        if self.trace_on(crate::node::trace_kind::VMSCAN_LRU) {
            let ev = crate::trace::TraceEvent::MmVmscanLruShrinkActive {
                nid: 0,
                nr_taken: nr_taken as i64,
                nr_active: 0,
                nr_deactivated: nr_deactivate as i64,
                nr_referenced: 0,
                priority: sc.priority,
                flags: crate::trace::trace_reclaim_flags(file),
            };
            self.emit(sc.cpu, ev);
        }
    }

    /// `shrink_inactive_list` (§10.4.4): isolates up to `nr_to_scan` pages from the tail of an
    /// inactive list ([`Mm::isolate_lru_folios`]), counts `pgscan_{kswapd|direct}` and
    /// `pgscan_{anon|file}` (pages scanned, skipped ones included), reclaims them
    /// (`shrink_folio_list`), counts `pgsteal_*` and `pgsteal_{anon|file}`, records the reclaim
    /// cost (`lru_note_cost`: pages written, and scanned − reclaimed as rotations) and emits
    /// mm_vmscan_lru_shrink_inactive. Nothing taken: returns at once (no cost, no event), as
    /// the kernel does. Returns pages reclaimed (also added to `sc.nr_reclaimed`).
    ///
    /// Simplification: no too_many_isolated throttling (one reclaimer at a time in the model).
    pub fn shrink_inactive_list(&mut self, nr_to_scan: u64, inactive_list: u8, sc: &mut ScanControl) -> u64 {
        use crate::vmstat::Stat;
        let file = inactive_list == LRU_INACTIVE_FILE;
        let (taken, nr_scanned, nr_taken) = self.isolate_lru_folios(nr_to_scan, inactive_list, sc);
        let (scan_who, steal_who) = if sc.kswapd {
            (Stat::pgscan_kswapd, Stat::pgsteal_kswapd)
        } else {
            (Stat::pgscan_direct, Stat::pgsteal_direct)
        };
        self.count(scan_who, nr_scanned);
        self.count(
            if file {
                Stat::pgscan_file
            } else {
                Stat::pgscan_anon
            },
            nr_scanned,
        );
        if nr_taken == 0 {
            return 0;
        }
        sc.nr_scanned += nr_taken;
        let stat = self.shrink_folio_list(taken, sc);
        let reclaimed = stat.nr_reclaimed;
        self.count(steal_who, reclaimed);
        self.count(
            if file {
                Stat::pgsteal_file
            } else {
                Stat::pgsteal_anon
            },
            reclaimed,
        );
        self.lru_note_cost(
            sc.nid,
            file,
            stat.nr_pageout,
            nr_scanned.saturating_sub(reclaimed),
        );
        sc.nr_reclaimed += reclaimed;
        if self.trace_on(crate::node::trace_kind::VMSCAN_LRU) {
            let ev = crate::trace::TraceEvent::MmVmscanLruShrinkInactive {
                nid: 0,
                nr_scanned: nr_scanned as i64,
                nr_reclaimed: reclaimed as i64,
                nr_dirty: stat.nr_dirty as i64,
                nr_writeback: stat.nr_writeback as i64,
                nr_congested: 0,
                nr_immediate: 0,
                nr_activate: [stat.nr_activate[0] as i32, stat.nr_activate[1] as i32],
                nr_ref_keep: stat.nr_ref_keep as i64,
                nr_unmap_fail: 0,
                priority: sc.priority,
                flags: crate::trace::trace_reclaim_flags(file),
            };
            self.emit(sc.cpu, ev);
        }
        reclaimed
    }

    /// `shrink_folio_list` (§10.3.5–6) for a batch of isolated inactive folios, oldest first:
    /// * `folio_check_references`: the model has no page tables. An anonymous folio's
    ///   `referenced` stands for a young PTE seen twice (the workload marks touched anon
    ///   folios): it is activated and the bit consumed. A page-cache folio is not mapped in the
    ///   model, so PG_referenced alone means FOLIOREF_RECLAIM_CLEAN ("reclaim if clean"); the
    ///   bit is cleared (`folio_test_clear_referenced`).
    /// * A dirty page-cache folio is not written by reclaim (6.18): it counts in `nr_dirty`,
    ///   `nr_unqueued_dirty` and node `nr_vmscan_immediate_reclaim`, and is activated (the
    ///   flusher writes it). A folio under writeback (`writeback.rs`) counts in `nr_writeback`
    ///   and is activated (global reclaim sets PG_reclaim and keeps it; `nr_immediate` and
    ///   `nr_congested` stay 0). A block-device folio whose buffer is journalled (§33.1 item 6,
    ///   `bdev.rs`) cannot release its buffers and is activated. A clean one leaves the page
    ///   cache through [`Mm::page_cache_evict`] (shadow entry) and is freed whole at its order.
    /// * An anonymous folio needs __GFP_IO and swap room for all its pages (`folio_alloc_swap`):
    ///   then it is "paged out" — the device is synchronous (zram-like), so the write completes
    ///   at once and the folio is freed in this pass: `pswpout` += pages, `thp_swpout` (PMD
    ///   order) and the mTHP `swpout` of its order, `nr_pageout`. A large folio without room is
    ///   split (`thp_swpout_fallback` for PMD, mTHP `swpout_fallback`): its head is retried at
    ///   once and the tail pieces go to the end of the batch; an order-0 folio without room is
    ///   activated. Swapped content leaves an anon shadow (the eviction age) in the swap map.
    ///
    /// Simplifications: mapped folios always unmap; no PG_reclaim, no demotion, no
    /// lazyfree, no zero-filled-page elision (`swpout_zero`).
    pub(crate) fn shrink_folio_list(&mut self, folios: Vec<FolioId>, sc: &ScanControl) -> ReclaimStat {
        use crate::vmstat::Stat;
        let mut stat = ReclaimStat::default();
        let mut queue: std::collections::VecDeque<FolioId> = folios.into();
        while let Some(id) = queue.pop_front() {
            let f = &self.folios.folios[id as usize];
            let (nr, order, file) = (1u64 << f.order, f.order as u32, f.kind.file_lru());
            let (referenced, dirty, token) = (f.referenced(), f.dirty(), f.token());
            if file {
                self.folios.folios[id as usize].set_referenced(false);
                if self.folio_test_writeback(id) {
                    // §10.3.6 / §25.4: under writeback (global reclaim,
                    // `writeback_throttling_sane`): PG_reclaim, counted, activated.
                    stat.nr_writeback += nr;
                    stat.nr_activate[1] += nr;
                    self.putback_isolated(id, true);
                    continue;
                }
                if dirty {
                    stat.nr_dirty += nr;
                    stat.nr_unqueued_dirty += nr;
                    self.count(Stat::nr_vmscan_immediate_reclaim, nr);
                    stat.nr_activate[1] += nr;
                    self.putback_isolated(id, true);
                    continue;
                }
                if self.folios.folios[id as usize].kind == FolioKind::Bdev && self.bdev_pinned(id) {
                    // §33.1 items 5–6: a journalled buffer is busy, `filemap_release_folio`
                    // (`try_to_free_buffers`) fails and the folio is activated.
                    stat.nr_activate[1] += nr;
                    self.putback_isolated(id, true);
                    continue;
                }
                self.putback_isolated_for_free(id);
                self.page_cache_evict(sc.cpu, id);
                stat.nr_reclaimed += nr;
                self.reclaim.reclaimed_folios += 1;
                continue;
            }
            // Anonymous.
            if !sc.may_unmap {
                // `folio_mapped` and !may_unmap: keep_locked.
                self.putback_isolated(id, self.folios.folios[id as usize].active());
                continue;
            }
            if referenced {
                self.folios.folios[id as usize].set_referenced(false);
                stat.nr_activate[0] += nr;
                self.putback_isolated(id, true);
                continue;
            }
            if !sc.gfp.intersects(crate::gfp::Gfp::IO) {
                self.putback_isolated(id, false);
                continue;
            }
            let f = &self.folios.folios[id as usize];
            if order > 0 && f.deferred() && f.partially_mapped() {
                // §31.3 item 7: a partially mapped folio is split before it is added to swap,
                // its unmapped (and zero-filled) pages freed without I/O; a folio that cannot
                // be split is kept (a GUP pin: `folio_maybe_dma_pinned` → keep_locked).
                if f.pinned() {
                    self.putback_isolated(id, false);
                    continue;
                }
                let pieces = self.split_anon_folio(sc.cpu, id);
                for &p in pieces.iter().rev() {
                    queue.push_front(p);
                }
                continue;
            }
            if self.reclaim.swap.free_slots() < nr {
                if order == 0 {
                    stat.nr_activate[0] += nr;
                    self.putback_isolated(id, true);
                    continue;
                }
                // Fall back to swapping the base pages.
                if order == crate::types::HPAGE_PMD_ORDER {
                    self.count(Stat::thp_swpout_fallback, 1);
                }
                if order <= crate::types::HPAGE_PMD_ORDER {
                    self.mthp.swpout_fallback[order as usize] += 1;
                }
                // `split_folio_to_list` of a PMD-mapped THP splits its PMD first (`unmap_folio`,
                // §31.2 item 1: thp_split_pmd); a folio with a subpage map (§31) frees its
                // unmapped and zero-filled pieces.
                let pieces = if self.folios.folios[id as usize].has_submap() {
                    self.split_anon_folio(sc.cpu, id)
                } else {
                    if order == crate::types::HPAGE_PMD_ORDER && !self.folios.folios[id as usize].pmd_split()
                    {
                        self.count(Stat::thp_split_pmd, 1);
                    }
                    self.split_folio(id)
                };
                if let Some((&head, tails)) = pieces.split_first() {
                    queue.push_front(head);
                    queue.extend(tails.iter().copied());
                }
                continue;
            }
            let workingset = self.folios.folios[id as usize].workingset();
            self.putback_isolated_for_free(id);
            let eviction = self.workingset_eviction_age(nr);
            self.swap_out(token, nr, eviction, workingset);
            if order == crate::types::HPAGE_PMD_ORDER {
                self.count(Stat::thp_swpout, 1);
            }
            if (1..=crate::types::HPAGE_PMD_ORDER).contains(&order) {
                self.mthp.swpout[order as usize] += 1;
            }
            stat.nr_pageout += nr;
            self.free_folio(sc.cpu, id);
            stat.nr_reclaimed += nr;
            self.reclaim.reclaimed_folios += 1;
        }
        self.count(Stat::pgactivate, stat.nr_activate[0] + stat.nr_activate[1]);
        stat
    }

    /// Ends an isolation before the folio is freed (the folio is off every list; only the
    /// NR_ISOLATED gauges change back).
    fn putback_isolated_for_free(&mut self, id: FolioId) {
        self.account_putback(id);
    }

    /// `lru_note_cost` (mm/swap.c): the cost of reclaiming from one side — pages that needed
    /// I/O count SWAP_CLUSTER_MAX each, rotated pages one; nothing is recorded for a zero cost;
    /// both sides decay by half once their sum exceeds a quarter of the LRU pages.
    pub(crate) fn lru_note_cost(&mut self, nid: u32, file: bool, nr_io: u64, nr_rotated: u64) {
        let cost = nr_io * crate::types::SWAP_CLUSTER_MAX + nr_rotated;
        if cost == 0 {
            return;
        }
        let lv = &mut self.reclaim.lruvec[nid as usize];
        if file {
            lv.file_cost += cost;
        } else {
            lv.anon_cost += cost;
        }
        let lrusize: u64 = lv.pages[..4].iter().sum();
        if lv.file_cost + lv.anon_cost > lrusize / 4 {
            lv.file_cost /= 2;
            lv.anon_cost /= 2;
        }
    }

    /// `snapshot_refaults`: remember workingset_activate_{anon,file} so the next
    /// `prepare_scan_control` can tell whether refaults were observed since. Called at the end
    /// of direct reclaim (`do_try_to_free_pages`) and of kswapd's `balance_pgdat`.
    ///
    /// Simplified: the activations are counted machine-wide (the model keeps node items of
    /// /proc/vmstat for the whole machine), so on several nodes each node's snapshot reads the
    /// machine's count.
    pub fn snapshot_refaults(&mut self, nid: u32) {
        use crate::vmstat::Stat;
        self.reclaim.lruvec[nid as usize].refaults = [
            self.stat(Stat::workingset_activate_anon),
            self.stat(Stat::workingset_activate_file),
        ];
    }

    /// `prepare_scan_control` (§10.4.1): an active list may be deactivated when refaults of its
    /// type were observed since the last [`Mm::snapshot_refaults`] or its inactive list is low
    /// (both with `force_deactivate`); cache-trim mode when inactive file >> priority > 0, file
    /// is not being deactivated and `no_cache_trim_mode` is clear; "file is tiny" when file +
    /// free ≤ Σ high watermarks, anon is not being deactivated and inactive anon >> priority > 0.
    pub fn prepare_scan_control(&self, sc: &mut ScanControl) {
        use crate::vmstat::Stat;
        if sc.force_deactivate {
            sc.may_deactivate = DEACTIVATE_ANON | DEACTIVATE_FILE;
        } else {
            sc.may_deactivate = 0;
            let refaults = self.reclaim.lruvec[sc.nid as usize].refaults;
            if self.stat(Stat::workingset_activate_anon) != refaults[0]
                || self.inactive_is_low(sc.nid, LRU_INACTIVE_ANON)
            {
                sc.may_deactivate |= DEACTIVATE_ANON;
            }
            if self.stat(Stat::workingset_activate_file) != refaults[1]
                || self.inactive_is_low(sc.nid, LRU_INACTIVE_FILE)
            {
                sc.may_deactivate |= DEACTIVATE_FILE;
            }
        }
        let lv = &self.reclaim.lruvec[sc.nid as usize];
        let inactive_file = lv.pages[LRU_INACTIVE_FILE as usize];
        sc.cache_trim_mode = (inactive_file >> sc.priority) > 0
            && sc.may_deactivate & DEACTIVATE_FILE == 0
            && !sc.no_cache_trim_mode;
        let node = &self.zones[self.node_zones(sc.nid)];
        let free: i64 = node.iter().map(|z| z.nr_free_pages()).sum();
        let high: u64 = node
            .iter()
            .filter(|z| z.managed > 0)
            .map(|z| z.wmark_pages(crate::mmzone::WMARK_HIGH))
            .sum();
        let file = lv.pages[LRU_INACTIVE_FILE as usize] + lv.pages[LRU_ACTIVE_FILE as usize];
        let anon = lv.pages[LRU_INACTIVE_ANON as usize];
        sc.file_is_tiny = (file as i64 + free) as u64 <= high
            && sc.may_deactivate & DEACTIVATE_ANON == 0
            && (anon >> sc.priority) > 0;
    }

    /// `get_scan_count` (§10.4.2): the scan balance and each evictable list's target.
    /// Balance: no swap room or !may_swap → file only; priority 0 with swappiness > 0 → equal;
    /// file tiny → anon only; cache-trim mode → file only; otherwise the fraction of
    /// `calculate_pressure_balance` (anon ∝ swappiness / anon cost share, file ∝ (200 −
    /// swappiness) / file cost share). Each target is the list's size in zones ≤ reclaim_idx
    /// (`lruvec_lru_size`) >> priority, scaled down by the fraction (rounded down: the root
    /// memcg is online).
    pub fn get_scan_count(&self, sc: &ScanControl) -> (ScanBalance, [u64; NR_LRU_LISTS]) {
        let swappiness = (self.tun.swappiness as u64).min(200);
        let balance = if !sc.may_swap || !self.can_reclaim_anon() {
            ScanBalance::File
        } else if sc.priority == 0 && swappiness > 0 {
            ScanBalance::Equal
        } else if sc.file_is_tiny {
            ScanBalance::Anon
        } else if sc.cache_trim_mode {
            ScanBalance::File
        } else {
            ScanBalance::Fract
        };
        // calculate_pressure_balance.
        let lv = &self.reclaim.lruvec[sc.nid as usize];
        let (sa, sf) = (lv.anon_cost, lv.file_cost);
        let total = sa + sf;
        let anon_cost = total + sa;
        let file_cost = total + sf;
        let total = anon_cost + file_cost;
        let ap = swappiness * (total + 1) / (anon_cost + 1);
        let fp = (200 - swappiness) * (total + 1) / (file_cost + 1);
        let denominator = (ap + fp).max(1);
        let mut nr = [0u64; NR_LRU_LISTS];
        for lru in [
            LRU_INACTIVE_ANON,
            LRU_ACTIVE_ANON,
            LRU_INACTIVE_FILE,
            LRU_ACTIVE_FILE,
        ] {
            let is_file = lru >= LRU_INACTIVE_FILE;
            let scan = self.lruvec_lru_size(sc.nid, lru, sc.reclaim_idx) >> sc.priority;
            nr[lru as usize] = match balance {
                ScanBalance::Equal => scan,
                ScanBalance::Fract => {
                    let frac = if is_file { fp } else { ap };
                    ((scan as u128 * frac as u128) / denominator as u128) as u64
                }
                ScanBalance::File => scan * is_file as u64,
                ScanBalance::Anon => scan * !is_file as u64,
            };
        }
        (balance, nr)
    }

    /// `shrink_list`: an active list is shrunk only when `may_deactivate` allows it (else
    /// `skipped_deactivate` is noted); an inactive one is reclaimed.
    fn shrink_list(&mut self, lru: u8, nr_to_scan: u64, sc: &mut ScanControl) -> u64 {
        if lru & 1 == 1 {
            let bit = if lru == LRU_ACTIVE_FILE {
                DEACTIVATE_FILE
            } else {
                DEACTIVATE_ANON
            };
            if sc.may_deactivate & bit != 0 {
                self.shrink_active_list(nr_to_scan, lru, sc);
            } else {
                sc.skipped_deactivate = true;
            }
            return 0;
        }
        self.shrink_inactive_list(nr_to_scan, lru, sc)
    }

    /// `shrink_lruvec` (§10.4.3): while inactive anon, active file or inactive file has a
    /// target left, each evictable list gets min(target, SWAP_CLUSTER_MAX) ([`Mm::shrink_list`]).
    /// Once `nr_to_reclaim` is met — except in direct reclaim at DEF_PRIORITY ("proportional
    /// reclaim" finishes the whole target) — the side with less left is stopped and the other
    /// is cut to the share of its original target the stopped side had left; the next time
    /// the goal is seen met, one side is already empty and the loop ends. Finally the anon
    /// active list is aged if a swap device exists (`can_age_anon_pages`) and its inactive list
    /// is low.
    pub fn shrink_lruvec(&mut self, sc: &mut ScanControl) {
        let cluster = crate::types::SWAP_CLUSTER_MAX;
        let (_, targets) = self.get_scan_count(sc);
        let mut nr = targets;
        let proportional = !sc.kswapd && sc.priority == DEF_PRIORITY;
        let mut nr_reclaimed = 0;
        let (ia, aa, ifl, af) = (
            LRU_INACTIVE_ANON as usize,
            LRU_ACTIVE_ANON as usize,
            LRU_INACTIVE_FILE as usize,
            LRU_ACTIVE_FILE as usize,
        );
        while nr[ia] > 0 || nr[af] > 0 || nr[ifl] > 0 {
            for lru in [
                LRU_INACTIVE_ANON,
                LRU_ACTIVE_ANON,
                LRU_INACTIVE_FILE,
                LRU_ACTIVE_FILE,
            ] {
                let n = nr[lru as usize].min(cluster);
                if n == 0 {
                    continue;
                }
                nr[lru as usize] -= n;
                nr_reclaimed += self.shrink_list(lru, n, sc);
            }
            if nr_reclaimed < sc.nr_to_reclaim || proportional {
                continue;
            }
            let nr_file = nr[ifl] + nr[af];
            let nr_anon = nr[ia] + nr[aa];
            if nr_file == 0 || nr_anon == 0 {
                break;
            }
            let (small, big, pct) = if nr_file > nr_anon {
                (ia, ifl, nr_anon * 100 / (targets[ia] + targets[aa] + 1))
            } else {
                (ifl, ia, nr_file * 100 / (targets[ifl] + targets[af] + 1))
            };
            nr[small] = 0;
            nr[small + 1] = 0;
            for l in [big, big + 1] {
                let done = targets[l] - nr[l];
                nr[l] = targets[l] * (100 - pct) / 100;
                nr[l] -= nr[l].min(done);
            }
        }
        if self.reclaim.swap.total > 0 && self.inactive_is_low(sc.nid, LRU_INACTIVE_ANON) {
            self.shrink_active_list(cluster, LRU_ACTIVE_ANON, sc);
        }
    }

    /// Declares a slab folio part of a reclaimable cache that the shrinker may free (§19.1
    /// item 8): slab folios are owned by the workload, so only those declared here are freed
    /// by [`Mm::shrink_slab`], oldest declaration first.
    ///
    /// Contract for the owner: any later reclaim (direct or kswapd) may free the folio, and
    /// folio ids are reused, so before using or freeing a declared folio the owner must check
    /// that `folios.folios[id]` is live **and still carries the token it had** ([`Mm::folio_is`]).
    /// The owner may free it itself at any time; the shrinker forgets it then.
    pub fn set_slab_shrinkable(&mut self, id: FolioId) {
        let f = self.folios.get(id);
        assert_eq!(f.kind, FolioKind::Slab, "only slab folios are shrinkable");
        assert!(!f.on_shrinker(), "slab folio {id} declared shrinkable twice");
        let token = f.token();
        self.folios.folios[id as usize].set_on_shrinker(true);
        self.folios.nr_shrinkable += 1;
        self.reclaim.shrinkable_slab.push_back((id, token));
        self.slab_shrinker_compact();
    }

    /// Drops the stale entries of `reclaim.shrinkable_slab` (folios freed since they were
    /// declared) once they outnumber the live ones, so the queue stays within twice the live
    /// count. The live entries keep their order: which folio the shrinker frees next is the
    /// same as with an eager clean-up.
    fn slab_shrinker_compact(&mut self) {
        let q = &mut self.reclaim.shrinkable_slab;
        if q.len() as u64 > 2 * self.folios.nr_shrinkable + 64 {
            let folios = &self.folios.folios;
            q.retain(|&(id, token)| {
                let f = &folios[id as usize];
                f.live() && f.token() == token
            });
            debug_assert_eq!(q.len() as u64, self.folios.nr_shrinkable);
        }
    }

    /// Whether folio `id` is live and holds content `token` (the owner's check for folios
    /// that reclaim may free: shrinkable slab, reclaimed page cache, swapped anon).
    pub fn folio_is(&self, id: FolioId, token: u64) -> bool {
        self.folios
            .folios
            .get(id as usize)
            .is_some_and(|f| f.live() && f.token() == token)
    }

    /// `shrink_slab` → `do_shrink_slab` (mm/shrinker.c, §19.1 item 8): the THP deferred split
    /// shrinker (`Mm::shrink_deferred_split`, §31.3), then the slab shrinker, whose objects
    /// are the declared slab folios (one object per folio):
    /// * `count_objects` = live declared folios (`FolioTable::nr_shrinkable`, kept as folios
    ///   are declared and freed, as the kernel's list_lru keeps its count), scaled by
    ///   vm.vfs_cache_pressure/100 (as the dcache/inode shrinkers' `vfs_pressure_ratio`
    ///   does); 0 → nothing;
    /// * delta = (freeable >> priority) · 4 / DEFAULT_SEEKS; total_scan = (nr_deferred >>
    ///   priority) + delta, at most 2 · freeable;
    /// * scan in batches of min(SHRINK_BATCH, total_scan) while total_scan ≥ SHRINK_BATCH or
    ///   ≥ freeable; each batch frees that many objects oldest first and counts `slabs_scanned`
    ///   += the batch;
    /// * nr_deferred = min(max(nr + delta − scanned, 0), 2 · freeable).
    ///
    /// The pages freed count as reclaimed (`reclaim_state`, flushed into `sc.nr_reclaimed` for
    /// root reclaim). Returns the pages freed. 6.18 scales slab pressure by the priority
    /// only (older kernels used the LRU scanned/eligible ratio).
    pub fn shrink_slab(&mut self, sc: &mut ScanControl) -> u64 {
        use crate::vmstat::Stat;
        // The THP deferred split shrinker first (registered at boot, before the caches'
        // shrinkers), §31.3 item 3: its splits free pages but reclaim does not count them.
        self.shrink_deferred_split(sc.cpu, sc.priority);
        // The queue may hold stale entries (folios the owner freed): they are skipped where
        // they are met, at its front, and dropped in bulk by `slab_shrinker_compact`.
        let freeable = self.folios.nr_shrinkable * self.tun.vfs_cache_pressure as u64 / 100;
        if freeable == 0 {
            return 0;
        }
        let priority = sc.priority.clamp(0, 63) as u32;
        let nr = std::mem::take(&mut self.reclaim.slab_shrinker.nr_deferred);
        let delta = (freeable >> priority) * 4 / DEFAULT_SEEKS;
        let mut total_scan = ((nr >> priority) + delta).min(2 * freeable);
        let (mut scanned, mut freed_pages) = (0u64, 0u64);
        while total_scan >= SHRINK_BATCH || total_scan >= freeable {
            let n = SHRINK_BATCH.min(total_scan);
            for _ in 0..n {
                let Some(id) = self.pop_live_shrinkable() else {
                    break;
                };
                freed_pages += 1u64 << self.folios.folios[id as usize].order;
                self.free_folio(sc.cpu, id);
            }
            self.count(Stat::slabs_scanned, n);
            total_scan -= n;
            scanned += n;
        }
        self.reclaim.slab_shrinker.nr_deferred = (nr + delta).saturating_sub(scanned).min(2 * freeable);
        if self.folios.nr_shrinkable == 0 {
            // Nothing live is left: the rest are stale.
            self.reclaim.shrinkable_slab.clear();
        }
        sc.nr_reclaimed += freed_pages;
        freed_pages
    }

    /// The oldest live entry of `reclaim.shrinkable_slab`, taken off the queue with the stale
    /// entries before it.
    fn pop_live_shrinkable(&mut self) -> Option<FolioId> {
        while let Some((id, token)) = self.reclaim.shrinkable_slab.pop_front() {
            let f = &self.folios.folios[id as usize];
            if f.live() && f.token() == token {
                debug_assert!(f.on_shrinker());
                return Some(id);
            }
        }
        None
    }

    /// `in_reclaim_compaction`: compaction allowed and (costly order, or order > 0 with the
    /// priority below DEF_PRIORITY − 2).
    fn in_reclaim_compaction(sc: &ScanControl) -> bool {
        sc.gfp.compaction_allowed()
            && sc.order > 0
            && (sc.order > crate::types::PAGE_ALLOC_COSTLY_ORDER || sc.priority < DEF_PRIORITY - 2)
    }

    /// `should_continue_reclaim` (§10.4.5): only in reclaim/compaction mode and after a pass
    /// that reclaimed something; stop if any eligible zone passes its min watermark at this
    /// order or `compaction_suitable` at min; else continue while the inactive pages (file,
    /// plus anon when swap has room) exceed compact_gap(order) = 2 << order.
    fn should_continue_reclaim(&mut self, nr_reclaimed: u64, sc: &ScanControl) -> bool {
        if !Self::in_reclaim_compaction(sc) || nr_reclaimed == 0 {
            return false;
        }
        let hz = crate::types::ZoneType::ALL[sc.reclaim_idx.min(crate::types::MAX_NR_ZONES - 1)];
        let base = sc.nid as usize * crate::types::MAX_NR_ZONES;
        for zi in base..=base + sc.reclaim_idx.min(crate::types::MAX_NR_ZONES - 1) {
            if self.zones[zi].managed == 0 {
                continue;
            }
            let min = self.zones[zi].wmark_pages(crate::mmzone::WMARK_MIN);
            let free = self.zones[zi].nr_free_pages();
            if self.__zone_watermark_ok(zi, sc.order, min, hz, crate::gfp::AllocFlags(0), free) {
                return false;
            }
            if self.compaction_suitable(zi, sc.order, min, sc.reclaim_idx) {
                return false;
            }
        }
        let lv = &self.reclaim.lruvec[sc.nid as usize];
        let mut inactive = lv.pages[LRU_INACTIVE_FILE as usize];
        if self.can_reclaim_anon() {
            inactive += lv.pages[LRU_INACTIVE_ANON as usize];
        }
        inactive > crate::compaction::compact_gap(sc.order)
    }

    /// `shrink_node` (§10.4.5), the entry both kswapd (`sc.kswapd` set) and direct reclaim
    /// call: `prepare_scan_control`, `shrink_lruvec`, `shrink_slab`, repeated while
    /// `should_continue_reclaim`. Any progress resets `kswapd_failures` to 0 (a successful
    /// direct reclaim revives a hopeless kswapd); no progress in cache-trim mode sets
    /// `cache_trim_mode_failed`.
    ///
    /// Not modelled: the kswapd-only PGDAT_WRITEBACK/DIRTY and congestion flags and the
    /// writeback/congestion throttles (no writeback state in the model).
    pub fn shrink_node(&mut self, sc: &mut ScanControl) {
        let mut reclaimable = false;
        loop {
            let before = sc.nr_reclaimed;
            self.prepare_scan_control(sc);
            self.shrink_lruvec(sc);
            self.shrink_slab(sc);
            let node_reclaimed = sc.nr_reclaimed - before;
            if node_reclaimed > 0 {
                reclaimable = true;
            }
            if !self.should_continue_reclaim(node_reclaimed, sc) {
                break;
            }
        }
        if reclaimable {
            self.reclaim.kswapd_failures[sc.nid as usize] = 0;
        } else if sc.cache_trim_mode {
            sc.cache_trim_mode_failed = true;
        }
    }

    /// `compaction_ready` (§10.5.4): compaction is allowed and the allocation would already
    /// pass the min watermark, or compaction is suitable at the **high** watermark.
    fn compaction_ready(&mut self, zi: usize, sc: &ScanControl) -> bool {
        if !sc.gfp.compaction_allowed() {
            return false;
        }
        let hz = crate::types::ZoneType::ALL[sc.reclaim_idx.min(crate::types::MAX_NR_ZONES - 1)];
        let min = self.zones[zi].wmark_pages(crate::mmzone::WMARK_MIN);
        let free = self.zones[zi].nr_free_pages();
        if self.__zone_watermark_ok(zi, sc.order, min, hz, crate::gfp::AllocFlags(0), free) {
            return true;
        }
        let high = self.zones[zi].wmark_pages(crate::mmzone::WMARK_HIGH);
        self.compaction_suitable(zi, sc.order, high, sc.reclaim_idx)
    }

    /// `shrink_zones` (§10.5.4): walks the zonelist (populated zones ≤ reclaim_idx, highest
    /// first); for a costly order a zone where [`compaction_ready`](Mm::compaction_ready)
    /// holds is skipped and sets `sc.compaction_ready`; the node is shrunk once if any zone
    /// was not skipped.
    ///
    /// Not modelled: `consider_reclaim_throttle` (the NOPROGRESS throttle at priority 1).
    ///
    /// On several nodes the zonelist is `ac`'s (the allocation's nodes in fallback order and
    /// its nodemask): each node with a zone to reclaim is shrunk once, in zonelist order.
    ///
    /// Known deviation, kept so results stay as they were: the kernel shrinks a node as soon
    /// as it meets the node's first zone that is not `compaction_ready` and tests the node's
    /// lower zones afterwards; the model tests all of a node's zones first, then shrinks it.
    fn shrink_zones(&mut self, sc: &mut ScanControl, ac: &crate::page_alloc::AllocContext) {
        let mut ac = *ac;
        ac.highest_zoneidx = crate::types::ZoneType::ALL[sc.reclaim_idx.min(crate::types::MAX_NR_ZONES - 1)];
        let mut k = 0;
        let mut pending: Option<u32> = None;
        loop {
            let next = self.next_zone(&ac, &mut k);
            let nid = next.map(|zi| self.zones[zi].nid);
            if let Some(p) = pending.filter(|&p| Some(p) != nid) {
                sc.nid = p;
                self.shrink_node(sc);
                pending = None;
            }
            let Some(zi) = next else { break };
            if self.zones[zi].managed == 0 {
                continue;
            }
            sc.nid = self.zones[zi].nid;
            if sc.order > crate::types::PAGE_ALLOC_COSTLY_ORDER && self.compaction_ready(zi, sc) {
                sc.compaction_ready = true;
                continue;
            }
            pending = Some(self.zones[zi].nid);
        }
    }

    /// `try_to_free_pages` / `do_try_to_free_pages` (§10.5): emits
    /// mm_vmscan_direct_reclaim_begin (order, gfp); scan_control of 32 pages, reclaim_idx =
    /// gfp_zone, priority 12 down to 0 ([`Mm::shrink_zones`] per priority), stopping once 32
    /// pages are reclaimed or compaction is ready; counts `allocstall_<reclaim_idx zone>` per
    /// pass. A pass that reclaimed nothing (and did not stop for compaction) is retried: once
    /// as the full memcg walk (`memcg_full_walk` — the field exists without memcg too, so the
    /// retry always happens), then once more with `force_deactivate` if an active list was
    /// skipped. Snapshots the refaults after each pass. Returns the pages reclaimed, or 1 if
    /// it stopped only because compaction is ready (so the allocator does not OOM);
    /// mm_vmscan_direct_reclaim_end prints that return value.
    ///
    /// Not modelled: the pfmemalloc throttle (§10.5.1, optional).
    pub fn try_to_free_pages(&mut self, cpu: u32, gfp: crate::gfp::Gfp, order: u32) -> u64 {
        let ac = self.alloc_context(gfp);
        self.try_to_free_pages_ac(cpu, gfp, order, &ac)
    }

    /// [`Mm::try_to_free_pages`] over the zonelist and nodemask of the allocation context `ac`.
    pub fn try_to_free_pages_ac(
        &mut self,
        cpu: u32,
        gfp: crate::gfp::Gfp,
        order: u32,
        ac: &crate::page_alloc::AllocContext,
    ) -> u64 {
        use crate::vmstat::Stat;
        let reclaim_idx = gfp.zone().idx();
        let allocstall = [
            Stat::allocstall_dma,
            Stat::allocstall_dma32,
            Stat::allocstall_normal,
            Stat::allocstall_movable,
            Stat::allocstall_device,
        ];
        if self.trace_on(crate::node::trace_kind::VMSCAN_DIRECT) {
            let ev = crate::trace::TraceEvent::MmVmscanDirectReclaimBegin {
                order: order as i32,
                gfp,
            };
            self.emit(cpu, ev);
        }
        let mut sc = ScanControl::direct(reclaim_idx, order, cpu);
        sc.gfp = gfp;
        let mut full_walk = false;
        let ret = loop {
            self.count(allocstall[reclaim_idx], 1);
            loop {
                sc.nr_scanned = 0;
                self.shrink_zones(&mut sc, ac);
                if sc.nr_reclaimed >= sc.nr_to_reclaim || sc.compaction_ready {
                    break;
                }
                sc.priority -= 1;
                if sc.priority < 0 {
                    break;
                }
            }
            // The zonelist's nodes (`snapshot_refaults` per pgdat of the zonelist).
            for nid in 0..self.numa.nr_nodes {
                if ac.node_allowed(nid) {
                    self.snapshot_refaults(nid);
                }
            }
            if sc.nr_reclaimed > 0 {
                break sc.nr_reclaimed;
            }
            if sc.compaction_ready {
                break 1;
            }
            if !full_walk {
                full_walk = true;
                sc.priority = DEF_PRIORITY;
                continue;
            }
            if sc.skipped_deactivate {
                sc.priority = DEF_PRIORITY;
                sc.force_deactivate = true;
                sc.skipped_deactivate = false;
                continue;
            }
            break 0;
        };
        if self.trace_on(crate::node::trace_kind::VMSCAN_DIRECT) {
            let ev = crate::trace::TraceEvent::MmVmscanDirectReclaimEnd { nr_reclaimed: ret };
            self.emit(cpu, ev);
        }
        ret
    }
}

impl Mm {
    /// `folio_mark_dirty` for a file folio (written to by the workload; the flusher cleans it).
    pub fn folio_mark_dirty(&mut self, id: FolioId, dirty: bool) {
        let now = self.cur.now_ns;
        let f = &self.folios.folios[id as usize];
        assert_eq!(f.kind, FolioKind::File, "only file folios are dirtied");
        if dirty && !f.dirty() {
            self.folios.set_dirtied_ns(id, now);
            self.cache.oldest_dirty_ns = self.cache.oldest_dirty_ns.min(now);
        }
        let f = &mut self.folios.folios[id as usize];
        let nr = 1u64 << f.order;
        match (f.dirty(), dirty) {
            (false, true) => self.cache.nr_dirty += nr,
            (true, false) => self.cache.nr_dirty -= nr,
            _ => {}
        }
        // NR_FILE_DIRTY, as /proc/vmstat's nr_dirty shows it.
        self.stats[crate::vmstat::Stat::nr_dirty as usize] = self.cache.nr_dirty;
        let (was, mapping, index, order) = (f.dirty(), f.mapping, f.index, f.order as u32);
        self.folios.folios[id as usize].set_dirty(dirty);
        // PAGECACHE_TAG_DIRTY follows PG_dirty (`filemap.rs`).
        if was != dirty && mapping != 0 {
            let d = self.folios.dirtied_ns(id);
            self.cache.index.set_dirty(mapping, index, id, order, dirty, d);
        }
        if was && !dirty {
            // A clean folio's dirtying time is never read: its side-table entry goes.
            self.folios.clear_dirtied_ns(id);
        }
    }

    /// The dirty thresholds (`global_dirty_limits`, mm/page-writeback.c): background writeback
    /// starts above `vm.dirty_background_ratio` percent (default 10) and writers are throttled
    /// above `vm.dirty_ratio` percent (default 20) of the dirtyable memory (free pages + file
    /// LRU pages; `global_dirtyable_memory` without the reserves and highmem); a background
    /// threshold at or above the throttling one is halved from it, as the kernel does.
    /// Simplified: the `*_bytes` forms and the per-wb (bdi) split are not modelled.
    pub fn dirty_thresholds(&self) -> (u64, u64) {
        let free: i64 = self.zones.iter().map(|z| z.nr_free_pages()).sum();
        let file: u64 = self
            .reclaim
            .lruvec
            .iter()
            .map(|lv| lv.pages[LRU_INACTIVE_FILE as usize] + lv.pages[LRU_ACTIVE_FILE as usize])
            .sum();
        let avail = free.max(0) as u64 + file;
        let thresh = avail * self.tun.dirty_ratio as u64 / 100;
        let mut bg = avail * self.tun.dirty_background_ratio as u64 / 100;
        if bg >= thresh {
            bg = thresh / 2;
        }
        (bg, thresh)
    }

    /// Whether a task dirtying page cache now must wait (`balance_dirty_pages`,
    /// mm/page-writeback.c; docs/model §25.4): its limit test (`balance_domain_limits` →
    /// `domain_dirty_avail(dtc, true)`) counts NR_FILE_DIRTY **plus NR_WRITEBACK** against the
    /// throttling threshold of [`Mm::dirty_thresholds`] — only the background test
    /// (`domain_over_bg_thresh`) leaves the pages under writeback out. So writers cannot
    /// run ahead of the device: the dirty and writeback pages together stay near
    /// `vm.dirty_ratio` of the dirtyable memory. Simplified: the kernel's freerun ceiling and
    /// proportional pauses (`wb_position_ratio`) are a fixed 10 ms sleep at the callers, and the
    /// per-wb share of the threshold is the whole (one device).
    pub fn dirty_exceeded(&self) -> bool {
        self.cache.nr_dirty + self.nr_writeback_now() > self.dirty_thresholds().1
    }

    /// Background writeback: submits the oldest dirty page-cache folios for writeback
    /// ([`Mm::folio_start_writeback`], which cleans them) until at most `target` pages are
    /// dirty. Returns the pages submitted.
    pub fn writeback_oldest(&mut self, target: u64) -> u64 {
        if self.cache.nr_dirty <= target {
            return 0;
        }
        // The dirty page cache by (dirtying time, id), oldest first; submitting a folio
        // cleans it or (under writeback already) leaves it in place, and dirties nothing.
        let mut n = 0;
        let mut at = self.cache.index.dirty_by_age().next();
        while let Some((d, id)) = at {
            if self.cache.nr_dirty <= target {
                break;
            }
            n += self.folio_start_writeback(id);
            at = self.cache.index.dirty_after((d, id));
        }
        n
    }

    /// The writeback flusher's periodic pass (`wb_workfn` for expired inodes, §19.1 item 9):
    /// page-cache folios dirty for at least `vm.dirty_expire_centisecs` are submitted for
    /// writeback ([`Mm::folio_start_writeback`]: clean, under writeback until the device
    /// completes them). Returns the pages submitted.
    pub fn writeback_expired(&mut self) -> u64 {
        let now = self.cur.now_ns;
        let expire_ns = self.dirty_expire_ns();
        if self.cache.nr_dirty == 0 || now < self.cache.oldest_dirty_ns.saturating_add(expire_ns) {
            // No dirty folio, or none old enough: the walk below would select nothing.
            return 0;
        }
        // The dirty page cache's folios (dirty-tagged) that have expired: the oldest ones,
        // submitted in (mapping, index) order, the order of a walk of the whole cache.
        let seen = self.cache.index.dirty_pages();
        let dirty_before = self.cache.nr_dirty;
        let mut ids: Vec<(u32, u64, FolioId)> = self
            .cache
            .index
            .dirty_by_age()
            .take_while(|&(d, _)| now >= d + expire_ns)
            .map(|(_, id)| {
                let f = &self.folios.folios[id as usize];
                debug_assert!(f.dirty(), "folio {id} tagged dirty but clean");
                (f.mapping, f.index, id)
            })
            .collect();
        ids.sort_unstable();
        let mut n = 0;
        for &(_, _, id) in &ids {
            n += self.folio_start_writeback(id);
        }
        // The oldest dirtying among the folios left dirty (the younger ones, and the selected
        // ones already under writeback): the new lower bound, if the tags cover every dirty
        // folio.
        let oldest = self
            .cache
            .index
            .dirty_by_age()
            .next()
            .map_or(u64::MAX, |(d, _)| d);
        // A dirty folio outside the index (isolated, being migrated or split) is not tagged:
        // the bound is then unknown until the next pass.
        self.cache.oldest_dirty_ns = if seen == dirty_before { oldest } else { 0 };
        n
    }
}

impl Mm {
    /// `vm.dirty_expire_centisecs` in ns.
    pub fn dirty_expire_ns(&self) -> u64 {
        self.tun.dirty_expire_centisecs as u64 * 10_000_000
    }

    /// `vm.dirty_writeback_centisecs` in ns (0: periodic writeback is off).
    pub fn dirty_writeback_ns(&self) -> u64 {
        self.tun.dirty_writeback_centisecs as u64 * 10_000_000
    }
}

impl Mm {
    /// `node_pagecache_reclaimable`: the node's page cache node reclaim may take — all of its
    /// file pages with RECLAIM_UNMAP, else its unmapped ones; minus its dirty pages without
    /// RECLAIM_WRITE.
    ///
    /// Simplified: the model keeps NR_FILE_MAPPED and NR_FILE_DIRTY for the whole machine; a
    /// node's share of each is taken in proportion to its file LRU pages.
    pub fn node_pagecache_reclaimable(&self, nid: u32) -> u64 {
        use crate::vmstat::Stat;
        let file_lru =
            |lv: &Lruvec| lv.pages[LRU_INACTIVE_FILE as usize] + lv.pages[LRU_ACTIVE_FILE as usize];
        let node = file_lru(&self.reclaim.lruvec[nid as usize]);
        let all: u64 = self.reclaim.lruvec.iter().map(file_lru).sum();
        let share = |v: u64| {
            if all == 0 {
                0
            } else {
                (v as u128 * node as u128 / all as u128) as u64
            }
        };
        let mode = self.numa.zone_reclaim_mode;
        let reclaimable = if mode & RECLAIM_UNMAP != 0 {
            node
        } else {
            node.saturating_sub(share(self.stat(Stat::nr_mapped)))
        };
        let delta = if mode & RECLAIM_WRITE == 0 {
            share(self.cache.nr_dirty)
        } else {
            0
        };
        reclaimable - delta.min(reclaimable)
    }

    /// The node's reclaimable slab pages. Simplified: NR_SLAB_RECLAIMABLE_B is kept for the
    /// whole machine; a node's share is in proportion to its managed pages.
    fn node_slab_reclaimable(&self, nid: u32) -> u64 {
        let managed = |r: std::ops::Range<usize>| self.zones[r].iter().map(|z| z.managed).sum::<u64>();
        let node = managed(self.node_zones(nid));
        let all = managed(0..self.zones.len()).max(1);
        (self.stat(crate::vmstat::Stat::nr_slab_reclaimable) as u128 * node as u128 / all as u128) as u64
    }

    /// `pgdat->min_unmapped_pages` and `min_slab_pages`: Σ over the node's zones of managed ×
    /// `vm.min_unmapped_ratio` / 100 and × `vm.min_slab_ratio` / 100.
    fn node_reclaim_floors(&self, nid: u32) -> (u64, u64) {
        let (u, sl) = (
            self.numa.min_unmapped_ratio as u64,
            self.numa.min_slab_ratio as u64,
        );
        self.zones[self.node_zones(nid)].iter().fold((0, 0), |(a, b), z| {
            (a + z.managed * u / 100, b + z.managed * sl / 100)
        })
    }

    /// `node_reclaim(pgdat, gfp, order)` (mm/vmscan.c), called by `get_page_from_freelist`
    /// when `vm.zone_reclaim_mode` is set and a zone of node `nid` fails its watermark: unless
    /// the node holds no more unmapped page cache and reclaimable slab than its floors
    /// (FULL), the allocation may not block, or the node has CPUs and is not `cpu`'s (NOSCAN),
    /// `shrink_node` at priority 4 down to 0 until 2^order pages are reclaimed, with
    /// `may_unmap` from the mode's bit 4; counts zone_reclaim_success or
    /// zone_reclaim_failed. The node's reclaim lock (PGDAT_RECLAIM_LOCKED) is never contended:
    /// one operation runs at a time.
    ///
    /// Simplified: bit 2 (RECLAIM_WRITE, the kernel's `may_writepage`) is not read. Reclaim
    /// writes no page-cache folio in either, but the kernel's node reclaim without the bit
    /// also keeps dirty anonymous folios instead of swapping them (`shrink_folio_list`), while
    /// the model's swaps them when swap has room (on a machine without swap they are the same).
    pub fn node_reclaim(&mut self, nid: u32, cpu: u32, gfp: crate::gfp::Gfp, order: u32) -> NodeReclaim {
        use crate::vmstat::Stat;
        let nr_pages = 1u64 << order;
        let (min_unmapped, min_slab) = self.node_reclaim_floors(nid);
        let reclaimable = self.node_pagecache_reclaimable(nid);
        let slab = self.node_slab_reclaimable(nid);
        if reclaimable <= min_unmapped && slab <= min_slab {
            return NodeReclaim::Full;
        }
        if !gfp.intersects(crate::gfp::Gfp::DIRECT_RECLAIM) {
            return NodeReclaim::NoScan;
        }
        if self.numa.nr_cpus_node(nid) > 0 && nid != self.numa.cpu_to_node(cpu) {
            return NodeReclaim::NoScan;
        }
        let mut sc = ScanControl::direct(gfp.zone().idx(), order, cpu);
        sc.nid = nid;
        sc.gfp = gfp;
        sc.nr_to_reclaim = nr_pages.max(crate::types::SWAP_CLUSTER_MAX);
        sc.priority = NODE_RECLAIM_PRIORITY;
        sc.may_unmap = self.numa.zone_reclaim_mode & RECLAIM_UNMAP != 0;
        loop {
            self.shrink_node(&mut sc);
            if sc.nr_reclaimed >= nr_pages {
                break;
            }
            sc.priority -= 1;
            if sc.priority < 0 {
                break;
            }
        }
        let ok = sc.nr_reclaimed >= nr_pages;
        self.count(
            if ok {
                Stat::zone_reclaim_success
            } else {
                Stat::zone_reclaim_failed
            },
            1,
        );
        NodeReclaim::Reclaimed(ok)
    }
}

impl Mm {
    /// `pgdat_balanced` (§10.1, §8 D7): true if any managed zone up to `highest_zoneidx` passes
    /// the high watermark (boost included) at `order`, counting NR_FREE_PAGES — or, under
    /// defrag_mode for order > 0, NR_FREE_PAGES_BLOCKS; true also when no zone is managed.
    /// (Memory tiering's promo watermark and the per-CPU drift snapshot do not arise here.)
    pub fn pgdat_balanced(&self, nid: u32, order: u32, highest_zoneidx: usize) -> bool {
        let mut any = false;
        let base = nid as usize * crate::types::MAX_NR_ZONES;
        for zi in base..=base + highest_zoneidx.min(crate::types::MAX_NR_ZONES - 1) {
            let z = &self.zones[zi];
            if z.managed == 0 {
                continue;
            }
            any = true;
            let mark = z.wmark_pages(crate::mmzone::WMARK_HIGH);
            let free = if self.defrag_watermarks() && order > 0 {
                z.stat(crate::vmstat::Stat::nr_free_pages_blocks)
            } else {
                z.nr_free_pages()
            };
            let hz = crate::types::ZoneType::ALL[highest_zoneidx.min(crate::types::MAX_NR_ZONES - 1)];
            if self.__zone_watermark_ok(zi, order, mark, hz, crate::gfp::AllocFlags(0), free) {
                return true;
            }
        }
        !any
    }

    /// `pgdat_watermark_boosted`: some managed zone up to `highest_zoneidx` has a boost.
    pub fn pgdat_watermark_boosted(&self, nid: u32, highest_zoneidx: usize) -> bool {
        let base = nid as usize * crate::types::MAX_NR_ZONES;
        (base..=base + highest_zoneidx.min(crate::types::MAX_NR_ZONES - 1))
            .any(|zi| self.zones[zi].managed > 0 && self.zones[zi].watermark_boost > 0)
    }
}
