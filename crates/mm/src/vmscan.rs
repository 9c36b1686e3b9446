//! The LRU lists of the classic (non-MGLRU) reclaim model (`kernel-model.md` §10.3): one lruvec
//! for the single node (no memcg, §19.1 item 3), five lists of folios, and the isolation and
//! putback primitives compaction and reclaim share. Models parts of mm/vmscan.c and mm/swap.c.
//!
//! This is the first part of the reclaim model: list membership, aging flags and the
//! `folio_mark_accessed` rule. Shrinking, kswapd and direct reclaim build on it.

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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lruvec {
    pub lists: [ListHead; NR_LRU_LISTS],
    pub pages: [u64; NR_LRU_LISTS],
    /// Recent reclaim cost of each side (`lru_note_cost`), for `get_scan_count`.
    pub anon_cost: u64,
    pub file_cost: u64,
}

impl Mm {
    /// `folio_lru_list`: the list a folio belongs on (anon/file × active).
    pub fn folio_lru_list(&self, id: FolioId) -> u8 {
        let f = &self.folios.folios[id as usize];
        let base = if f.kind == FolioKind::Anon {
            LRU_INACTIVE_ANON
        } else {
            LRU_INACTIVE_FILE
        };
        base + f.active as u8
    }

    /// `lruvec_add_folio`: puts an LRU folio at the head of its list and sets PageLRU.
    pub(crate) fn lru_add(&mut self, id: FolioId) {
        let l = self.folio_lru_list(id);
        let first = self.lruvec.lists[l as usize].first;
        let f = &mut self.folios.folios[id as usize];
        debug_assert_eq!(f.lru, LRU_NONE, "folio {id} is already on a list");
        f.lru = l;
        f.lru_prev = NIL;
        f.lru_next = first;
        let (pfn, nr) = (f.pfn, 1u64 << f.order);
        if first == NIL {
            self.lruvec.lists[l as usize].last = id;
        } else {
            self.folios.folios[first as usize].lru_prev = id;
        }
        self.lruvec.lists[l as usize].first = id;
        self.lruvec.pages[l as usize] += nr;
        self.pages.set_flag(pfn, PG_LRU, true);
    }

    /// `lruvec_del_folio`: takes a folio off its list and clears PageLRU.
    pub(crate) fn lru_del(&mut self, id: FolioId) {
        let f = &mut self.folios.folios[id as usize];
        let l = f.lru;
        assert_ne!(l, LRU_NONE, "folio {id} is on no list");
        let (next, prev, pfn, nr) = (f.lru_next, f.lru_prev, f.pfn, 1u64 << f.order);
        f.lru = LRU_NONE;
        f.lru_next = NIL;
        f.lru_prev = NIL;
        if prev == NIL {
            self.lruvec.lists[l as usize].first = next;
        } else {
            self.folios.folios[prev as usize].lru_next = next;
        }
        if next == NIL {
            self.lruvec.lists[l as usize].last = prev;
        } else {
            self.folios.folios[next as usize].lru_prev = prev;
        }
        self.lruvec.pages[l as usize] -= nr;
        self.pages.set_flag(pfn, PG_LRU, false);
    }

    /// `folio_isolate_lru` as compaction uses it: off the list, counted in NR_ISOLATED_*.
    pub(crate) fn isolate_lru_folio(&mut self, id: FolioId) {
        self.account_folio(id, -1);
        self.lru_del(id);
        self.folios.folios[id as usize].isolated = true;
        self.account_folio(id, 1);
    }

    /// `folio_putback_lru`: back on the head of its list.
    pub(crate) fn putback_lru_folio(&mut self, id: FolioId) {
        self.account_folio(id, -1);
        self.folios.folios[id as usize].isolated = false;
        self.lru_add(id);
        self.account_folio(id, 1);
    }

    /// `folio_mark_accessed` (§10.3.3): an unreferenced folio becomes referenced; a referenced
    /// inactive folio is activated (moved to the active list, referenced cleared, `pgactivate`
    /// += its pages).
    pub fn folio_mark_accessed(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        if !f.kind.on_lru() || f.isolated {
            return;
        }
        if !f.referenced {
            self.folios.folios[id as usize].referenced = true;
        } else if !f.active {
            self.activate_folio(id);
        }
    }

    /// The folios of an LRU list from head (newest) to tail (oldest).
    pub fn lru_folios(&self, list: u8) -> Vec<FolioId> {
        let mut out = Vec::new();
        let mut id = self.lruvec.lists[list as usize].first;
        while id != NIL {
            out.push(id);
            id = self.folios.folios[id as usize].lru_next;
        }
        out
    }
}

/// `struct scan_control`, the parts the model uses (§10.4, §10.5).
#[derive(Clone, Copy, Debug)]
pub struct ScanControl {
    pub nr_to_reclaim: u64,
    /// The highest zone index whose folios may be reclaimed (`gfp_zone` of the request).
    pub reclaim_idx: usize,
    pub order: u32,
    pub priority: i32,
    /// `may_swap`: anonymous folios may be reclaimed (if a swap device has room).
    pub may_swap: bool,
    /// kswapd (counts pgscan/pgsteal_kswapd) rather than direct reclaim.
    pub kswapd: bool,
    /// CPU whose PCP receives the freed folios.
    pub cpu: u32,
    /// The request's gfp (`gfp_compaction_allowed` for reclaim/compaction mode).
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
}

impl ScanControl {
    /// Direct reclaim's control (§10.5.2): 32 pages, priority 12, may swap.
    pub fn direct(reclaim_idx: usize, order: u32, cpu: u32) -> ScanControl {
        ScanControl {
            nr_to_reclaim: crate::types::SWAP_CLUSTER_MAX,
            reclaim_idx,
            order,
            priority: DEF_PRIORITY,
            may_swap: true,
            kswapd: false,
            cpu,
            gfp: crate::gfp::Gfp::GFP_KERNEL,
            nr_scanned: 0,
            nr_reclaimed: 0,
            compaction_ready: false,
            may_deactivate: 0,
            cache_trim_mode: false,
            file_is_tiny: false,
        }
    }
}

/// `DEF_PRIORITY`.
pub const DEF_PRIORITY: i32 = 12;
const DEACTIVATE_ANON: u8 = 1;
const DEACTIVATE_FILE: u8 = 2;

/// `enum scan_balance`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanBalance {
    Equal,
    Fract,
    Anon,
    File,
}

impl Mm {
    /// `inactive_is_low` (§10.3.4): with gb = (inactive + active) in GiB and ratio =
    /// int_sqrt(10·gb) (1 below 1 GiB), the inactive list is low if inactive·ratio < active.
    pub fn inactive_is_low(&self, inactive_list: u8) -> bool {
        let inactive = self.lruvec.pages[inactive_list as usize];
        let active = self.lruvec.pages[inactive_list as usize + 1];
        let gb = (inactive + active) >> (30 - crate::types::PAGE_SHIFT);
        let ratio = if gb > 0 {
            ((10 * gb) as f64).sqrt() as u64
        } else {
            1
        };
        inactive * ratio < active
    }

    /// Moves an LRU folio to the active list (`folio_activate`), counting `pgactivate`.
    pub(crate) fn activate_folio(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        if f.active || f.isolated || f.lru == LRU_NONE {
            return;
        }
        let nr = 1u64 << f.order;
        self.account_folio(id, -1);
        self.lru_del(id);
        let f = &mut self.folios.folios[id as usize];
        f.active = true;
        f.referenced = false;
        self.lru_add(id);
        self.account_folio(id, 1);
        self.count(crate::vmstat::Stat::pgactivate, nr);
    }

    fn trace_lru_isolate(
        &mut self,
        sc: &ScanControl,
        req: u64,
        scanned: u64,
        skipped: u64,
        taken: u64,
        lru: u8,
    ) {
        if self.trace_on(crate::node::trace_kind::VMSCAN_LRU) {
            let ev = crate::trace::TraceEvent::MmVmscanLruIsolate {
                highest_zoneidx: sc.reclaim_idx as i32,
                order: sc.order as i32,
                nr_requested: req,
                nr_scanned: scanned,
                nr_skipped: skipped,
                nr_taken: taken,
                lru,
            };
            self.emit(sc.cpu, ev);
        }
    }

    /// `shrink_active_list` (§10.3.7): takes up to `nr_to_scan` pages from the tail of an
    /// active list and deactivates them (no executable file folios in the model, so none stays
    /// active). Counts `pgrefill` and `pgdeactivate`; emits mm_vmscan_lru_isolate and
    /// mm_vmscan_lru_shrink_active.
    pub fn shrink_active_list(&mut self, nr_to_scan: u64, active_list: u8, sc: &mut ScanControl) {
        let mut scanned = 0;
        let mut skipped = 0;
        let mut id = self.lruvec.lists[active_list as usize].last;
        let mut taken = Vec::new();
        while id != NIL && scanned < nr_to_scan {
            let prev = self.folios.folios[id as usize].lru_prev;
            let f = &self.folios.folios[id as usize];
            let nr = 1u64 << f.order;
            if self.zone_of(f.pfn) > sc.reclaim_idx {
                skipped += nr;
                id = prev;
                continue;
            }
            scanned += nr;
            taken.push(id);
            id = prev;
        }
        self.trace_lru_isolate(sc, nr_to_scan, scanned, skipped, scanned, active_list);
        let mut referenced = 0;
        for id in taken {
            let f = &self.folios.folios[id as usize];
            let nr = 1u64 << f.order;
            referenced += f.referenced as u64 * nr;
            self.account_folio(id, -1);
            self.lru_del(id);
            let f = &mut self.folios.folios[id as usize];
            f.active = false;
            f.referenced = false;
            self.lru_add(id);
            self.account_folio(id, 1);
            self.count(crate::vmstat::Stat::pgdeactivate, nr);
        }
        self.count(crate::vmstat::Stat::pgrefill, scanned);
        if self.trace_on(crate::node::trace_kind::VMSCAN_LRU) {
            let ev = crate::trace::TraceEvent::MmVmscanLruShrinkActive {
                nid: 0,
                nr_taken: scanned as i64,
                nr_active: 0,
                nr_deactivated: scanned as i64,
                nr_referenced: referenced as i64,
                priority: sc.priority,
                flags: crate::trace::trace_reclaim_flags(active_list == LRU_ACTIVE_FILE),
            };
            self.emit(sc.cpu, ev);
        }
    }

    /// `shrink_inactive_list` + `shrink_folio_list` (§10.3.5–6, §10.4.4): isolates up to
    /// `nr_to_scan` pages from the tail of an inactive list (folios in zones above
    /// `reclaim_idx` are skipped and counted in `pgskip_<zone>`), then decides each folio:
    /// * `folio_check_references`: an anonymous folio whose PG_referenced is set (standing in for
    ///   a young PTE: the model has no page tables to scan) is activated; page-cache folios are
    ///   not mapped in the model, so PG_referenced alone does not keep them ("reclaim if clean");
    /// * a clean file folio leaves the page cache (a shadow entry is left, §10.3.8) and is freed
    ///   whole at its order; a dirty one is not written by reclaim (6.18): it is counted in
    ///   `nr_vmscan_immediate_reclaim` and activated;
    /// * an anonymous folio is swapped out (`pswpout`, `thp_swpout`) if the swap device has room
    ///   for all of it; a large one without room is split (`thp_swpout_fallback`) and its pieces
    ///   go back to the inactive list; without swap room it is activated.
    ///
    /// Counts pgscan_* and pgsteal_*; records reclaim cost for `get_scan_count`; emits
    /// mm_vmscan_lru_isolate and mm_vmscan_lru_shrink_inactive. Returns pages reclaimed.
    pub fn shrink_inactive_list(&mut self, nr_to_scan: u64, inactive_list: u8, sc: &mut ScanControl) -> u64 {
        use crate::vmstat::Stat;
        let file = inactive_list == LRU_INACTIVE_FILE;
        let mut scanned = 0;
        let mut skipped = 0;
        let mut isolated = Vec::new();
        let mut id = self.lruvec.lists[inactive_list as usize].last;
        let pgskip = [
            Stat::pgskip_dma,
            Stat::pgskip_dma32,
            Stat::pgskip_normal,
            Stat::pgskip_movable,
            Stat::pgskip_device,
        ];
        while id != NIL && scanned < nr_to_scan {
            let prev = self.folios.folios[id as usize].lru_prev;
            let f = &self.folios.folios[id as usize];
            let nr = 1u64 << f.order;
            let zi = self.zone_of(f.pfn);
            if zi > sc.reclaim_idx {
                self.count(pgskip[zi], nr);
                skipped += nr;
            } else {
                scanned += nr;
                self.isolate_lru_folio(id);
                isolated.push(id);
            }
            id = prev;
        }
        self.trace_lru_isolate(sc, nr_to_scan, scanned, skipped, scanned, inactive_list);
        let (scan_who, steal_who) = if sc.kswapd {
            (Stat::pgscan_kswapd, Stat::pgsteal_kswapd)
        } else {
            (Stat::pgscan_direct, Stat::pgsteal_direct)
        };
        self.count(scan_who, scanned);
        self.count(
            if file {
                Stat::pgscan_file
            } else {
                Stat::pgscan_anon
            },
            scanned,
        );
        let mut reclaimed = 0;
        let (mut nr_dirty, mut nr_immediate, mut activated, mut swapped) = (0u64, 0u64, 0u64, 0u64);
        let mut queue: std::collections::VecDeque<FolioId> = isolated.into();
        while let Some(id) = queue.pop_front() {
            let f = &self.folios.folios[id as usize];
            let (nr, order, referenced, dirty, token) =
                (1u64 << f.order, f.order, f.referenced, f.dirty, f.token);
            let keep = |mm: &mut Mm, id: FolioId, active: bool| {
                mm.account_folio(id, -1);
                let f = &mut mm.folios.folios[id as usize];
                f.isolated = false;
                f.active = active;
                f.referenced = false;
                mm.lru_add(id);
                mm.account_folio(id, 1);
            };
            if referenced && !file {
                keep(self, id, true);
                self.count(Stat::pgactivate, nr);
                activated += nr;
                continue;
            }
            if file {
                if dirty {
                    nr_dirty += nr;
                    nr_immediate += nr;
                    self.count(Stat::nr_vmscan_immediate_reclaim, nr);
                    keep(self, id, true);
                    self.count(Stat::pgactivate, nr);
                    activated += nr;
                    continue;
                }
                self.account_folio(id, -1);
                self.folios.folios[id as usize].isolated = false;
                self.account_folio(id, 1);
                self.workingset_eviction(id);
                self.free_folio(sc.cpu, id);
                reclaimed += nr;
                continue;
            }
            // Anonymous.
            if sc.may_swap && self.swap.free_slots() >= nr {
                self.account_folio(id, -1);
                self.folios.folios[id as usize].isolated = false;
                self.account_folio(id, 1);
                self.swap_out(token, nr);
                if order as u32 == crate::types::HPAGE_PMD_ORDER {
                    self.count(Stat::thp_swpout, 1);
                }
                self.free_folio(sc.cpu, id);
                reclaimed += nr;
                swapped += nr;
            } else if sc.may_swap && order > 0 && self.swap.free_slots() > 0 {
                if order as u32 == crate::types::HPAGE_PMD_ORDER {
                    self.count(Stat::thp_swpout_fallback, 1);
                }
                queue.extend(self.split_folio(id));
            } else {
                keep(self, id, true);
                self.count(Stat::pgactivate, nr);
                activated += nr;
            }
        }
        self.count(steal_who, reclaimed);
        self.count(
            if file {
                Stat::pgsteal_file
            } else {
                Stat::pgsteal_anon
            },
            reclaimed,
        );
        self.lru_note_cost(file, swapped, activated);
        sc.nr_scanned += scanned;
        sc.nr_reclaimed += reclaimed;
        if self.trace_on(crate::node::trace_kind::VMSCAN_LRU) {
            let mut nr_activate = [0i32; 2];
            nr_activate[file as usize] = activated as i32;
            let ev = crate::trace::TraceEvent::MmVmscanLruShrinkInactive {
                nid: 0,
                nr_scanned: scanned as i64,
                nr_reclaimed: reclaimed as i64,
                nr_dirty: nr_dirty as i64,
                nr_writeback: 0,
                nr_congested: 0,
                nr_immediate: nr_immediate as i64,
                nr_activate,
                nr_ref_keep: 0,
                nr_unmap_fail: 0,
                priority: sc.priority,
                flags: crate::trace::trace_reclaim_flags(file),
            };
            self.emit(sc.cpu, ev);
        }
        reclaimed
    }

    /// `lru_note_cost`: the cost of reclaiming from one side (pages that needed I/O count
    /// SWAP_CLUSTER_MAX each, rotated pages one); both sides decay by half once their sum
    /// exceeds a quarter of the LRU pages.
    fn lru_note_cost(&mut self, file: bool, nr_io: u64, nr_rotated: u64) {
        let cost = nr_io * crate::types::SWAP_CLUSTER_MAX + nr_rotated;
        if file {
            self.lruvec.file_cost += cost;
        } else {
            self.lruvec.anon_cost += cost;
        }
        let lrusize: u64 = self.lruvec.pages[..4].iter().sum();
        if self.lruvec.file_cost + self.lruvec.anon_cost > lrusize / 4 {
            self.lruvec.file_cost /= 2;
            self.lruvec.anon_cost /= 2;
        }
    }

    /// `prepare_scan_control` (§10.4.1): which active lists may be deactivated (their inactive
    /// list is low), cache-trim mode (enough inactive file at this priority and file not being
    /// deactivated), and "file is tiny" (file + free ≤ Σ high watermarks, with inactive anon to
    /// scan).
    fn prepare_scan_control(&self, sc: &mut ScanControl) {
        sc.may_deactivate = 0;
        if self.inactive_is_low(LRU_INACTIVE_ANON) {
            sc.may_deactivate |= DEACTIVATE_ANON;
        }
        if self.inactive_is_low(LRU_INACTIVE_FILE) {
            sc.may_deactivate |= DEACTIVATE_FILE;
        }
        let inactive_file = self.lruvec.pages[LRU_INACTIVE_FILE as usize];
        sc.cache_trim_mode = (inactive_file >> sc.priority) > 0 && sc.may_deactivate & DEACTIVATE_FILE == 0;
        let free: i64 = self.zones.iter().map(|z| z.nr_free_pages()).sum();
        let high: u64 = self
            .zones
            .iter()
            .filter(|z| z.managed > 0)
            .map(|z| z.wmark_pages(crate::mmzone::WMARK_HIGH))
            .sum();
        let file =
            self.lruvec.pages[LRU_INACTIVE_FILE as usize] + self.lruvec.pages[LRU_ACTIVE_FILE as usize];
        let anon = self.lruvec.pages[LRU_INACTIVE_ANON as usize];
        sc.file_is_tiny = (file as i64 + free) as u64 <= high
            && sc.may_deactivate & DEACTIVATE_ANON == 0
            && (anon >> sc.priority) > 0;
    }

    /// `get_scan_count` (§10.4.2): the scan balance and each evictable list's target.
    pub fn get_scan_count(&self, sc: &ScanControl) -> (ScanBalance, [u64; NR_LRU_LISTS]) {
        let swappiness = self.tun.swappiness as u64;
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
        let (sa, sf) = (self.lruvec.anon_cost, self.lruvec.file_cost);
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
            let scan = self.lruvec.pages[lru as usize] >> sc.priority;
            nr[lru as usize] = match balance {
                ScanBalance::Equal => scan,
                ScanBalance::Fract => {
                    let frac = if is_file { fp } else { ap };
                    (scan * frac).div_ceil(denominator)
                }
                ScanBalance::File => scan * is_file as u64,
                ScanBalance::Anon => scan * !is_file as u64,
            };
        }
        (balance, nr)
    }

    /// `shrink_lruvec` (§10.4.3): scan the targets in SWAP_CLUSTER_MAX chunks per list (active
    /// lists only when `may_deactivate` allows); once `nr_to_reclaim` is met (not for direct
    /// reclaim at DEF_PRIORITY, "proportional reclaim"), stop the smaller side and scale the
    /// other to the fraction already done; finally age the anon active list if its inactive
    /// list is low and anon is reclaimable.
    ///
    /// Simplification: list sizes are node-wide (zone eligibility is applied at isolation).
    pub fn shrink_lruvec(&mut self, sc: &mut ScanControl) {
        let cluster = crate::types::SWAP_CLUSTER_MAX;
        let (_, targets) = self.get_scan_count(sc);
        let mut nr = targets;
        let proportional = !sc.kswapd && sc.priority == DEF_PRIORITY;
        let mut adjusted = false;
        let start = sc.nr_reclaimed;
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
                if lru & 1 == 1 {
                    let bit = if lru == LRU_ACTIVE_FILE {
                        DEACTIVATE_FILE
                    } else {
                        DEACTIVATE_ANON
                    };
                    if sc.may_deactivate & bit != 0 {
                        self.shrink_active_list(n, lru, sc);
                    }
                } else {
                    self.shrink_inactive_list(n, lru, sc);
                }
            }
            if sc.nr_reclaimed - start < sc.nr_to_reclaim || proportional || adjusted {
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
            adjusted = true;
        }
        if sc.may_swap && self.can_reclaim_anon() && self.inactive_is_low(LRU_INACTIVE_ANON) {
            self.shrink_active_list(cluster, LRU_ACTIVE_ANON, sc);
        }
    }

    /// Marks a slab folio as part of a reclaimable cache that shrinkers may free (§19.1 item
    /// 8). Contract: the folio may be freed by any later reclaim; its owner must check, before
    /// using or freeing it, that the id still holds a live folio with the same content token
    /// (ids are reused).
    pub fn set_slab_shrinkable(&mut self, id: FolioId) {
        let f = self.folios.get(id);
        assert_eq!(f.kind, FolioKind::Slab, "only slab folios are shrinkable");
        self.shrinkable_slab.push_back((id, f.token));
    }

    /// `shrink_slab` for the model's one reclaimable cache (§19.1 item 8, `do_shrink_slab`):
    /// `delta = (freeable >> priority) · 4 / seeks(2)` scaled by vfs_cache_pressure/100, at
    /// least one batch of 128 objects when there is that much; objects (order-0..3 folios)
    /// are freed oldest first. Counts `slabs_scanned` (objects scanned) and adds the pages
    /// freed to the reclaim (`reclaim_state`).
    pub fn shrink_slab(&mut self, sc: &mut ScanControl) -> u64 {
        while let Some(&(id, token)) = self.shrinkable_slab.front() {
            let f = &self.folios.folios[id as usize];
            if f.live && f.token == token {
                break;
            }
            self.shrinkable_slab.pop_front();
        }
        let freeable = self.shrinkable_slab.len() as u64;
        if freeable == 0 {
            return 0;
        }
        let delta = ((freeable >> sc.priority) * 4 / 2) * self.tun.vfs_cache_pressure as u64 / 100;
        let batch = 128u64;
        let mut total_scan = delta.min(2 * freeable);
        if total_scan < batch && freeable < batch {
            total_scan = total_scan.max(freeable >> sc.priority);
        }
        let mut scanned = 0;
        let mut freed_pages = 0;
        while scanned < total_scan {
            let Some((id, token)) = self.shrinkable_slab.pop_front() else {
                break;
            };
            scanned += 1;
            let f = &self.folios.folios[id as usize];
            if !(f.live && f.token == token) {
                continue;
            }
            freed_pages += 1u64 << f.order;
            self.free_folio(sc.cpu, id);
        }
        self.count(crate::vmstat::Stat::slabs_scanned, scanned);
        sc.nr_reclaimed += freed_pages;
        freed_pages
    }

    /// `in_reclaim_compaction`: compaction allowed and (costly order, or order > 0 with the
    /// priority below DEF_PRIORITY − 2).
    fn in_reclaim_compaction(sc: &ScanControl) -> bool {
        sc.gfp.compaction_allowed()
            && sc.order > 0
            && (sc.order > crate::types::PAGE_ALLOC_COSTLY_ORDER || sc.priority < DEF_PRIORITY - 2)
    }

    /// `should_continue_reclaim` (§10.4.5).
    fn should_continue_reclaim(&mut self, nr_reclaimed: u64, sc: &ScanControl) -> bool {
        if !Self::in_reclaim_compaction(sc) || nr_reclaimed == 0 {
            return false;
        }
        let hz = crate::types::ZoneType::ALL[sc.reclaim_idx.min(crate::types::MAX_NR_ZONES - 1)];
        for zi in 0..=sc.reclaim_idx.min(self.zones.len() - 1) {
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
        let mut inactive = self.lruvec.pages[LRU_INACTIVE_FILE as usize];
        if self.can_reclaim_anon() {
            inactive += self.lruvec.pages[LRU_INACTIVE_ANON as usize];
        }
        inactive > crate::compaction::compact_gap(sc.order)
    }

    /// `shrink_node` (§10.4.5): `prepare_scan_control`, `shrink_lruvec`, `shrink_slab`, again
    /// while `should_continue_reclaim`; any progress resets `kswapd_failures`.
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
            self.kswapd_failures = 0;
        }
    }

    /// `compaction_ready` (§10.5.4): the allocation would already pass the min watermark, or
    /// compaction is suitable at the high watermark.
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

    /// `try_to_free_pages` / `do_try_to_free_pages` (§10.5): direct reclaim of 32 pages,
    /// priority 12 down to 0, counting `allocstall_<zone>` once. For costly orders, zones where
    /// compaction is ready are skipped (`shrink_zones`); the node is shrunk if any eligible zone
    /// is not. Returns pages reclaimed, or 1 if it stopped only because compaction is ready.
    /// Emits mm_vmscan_direct_reclaim_begin/end.
    ///
    /// Not modelled: the pfmemalloc throttle (§10.5.1, optional).
    pub fn try_to_free_pages(&mut self, cpu: u32, gfp: crate::gfp::Gfp, order: u32) -> u64 {
        use crate::vmstat::Stat;
        let reclaim_idx = gfp.zone().idx();
        let allocstall = [
            Stat::allocstall_dma,
            Stat::allocstall_dma32,
            Stat::allocstall_normal,
            Stat::allocstall_movable,
            Stat::allocstall_device,
        ];
        self.count(allocstall[reclaim_idx], 1);
        if self.trace_on(crate::node::trace_kind::VMSCAN_DIRECT) {
            let ev = crate::trace::TraceEvent::MmVmscanDirectReclaimBegin {
                order: order as i32,
                gfp,
            };
            self.emit(cpu, ev);
        }
        let mut sc = ScanControl::direct(reclaim_idx, order, cpu);
        sc.gfp = gfp;
        while sc.priority >= 0 {
            let mut shrink = false;
            for zi in 0..=reclaim_idx.min(self.zones.len() - 1) {
                if self.zones[zi].managed == 0 {
                    continue;
                }
                if order > crate::types::PAGE_ALLOC_COSTLY_ORDER && self.compaction_ready(zi, &sc) {
                    sc.compaction_ready = true;
                    continue;
                }
                shrink = true;
            }
            if shrink {
                self.shrink_node(&mut sc);
            }
            if sc.nr_reclaimed >= sc.nr_to_reclaim || sc.compaction_ready {
                break;
            }
            sc.priority -= 1;
        }
        if self.trace_on(crate::node::trace_kind::VMSCAN_DIRECT) {
            let ev = crate::trace::TraceEvent::MmVmscanDirectReclaimEnd {
                nr_reclaimed: sc.nr_reclaimed,
            };
            self.emit(cpu, ev);
        }
        if sc.nr_reclaimed > 0 {
            sc.nr_reclaimed
        } else if sc.compaction_ready {
            1
        } else {
            0
        }
    }
}

impl Mm {
    /// `folio_mark_dirty` for a file folio (written to by the workload; the flusher cleans it).
    pub fn folio_mark_dirty(&mut self, id: FolioId, dirty: bool) {
        let now = self.now_ns;
        let f = &mut self.folios.folios[id as usize];
        assert_eq!(f.kind, FolioKind::File, "only file folios are dirtied");
        if dirty && !f.dirty {
            f.dirtied_ns = now;
        }
        let nr = 1u64 << f.order;
        match (f.dirty, dirty) {
            (false, true) => self.nr_dirty += nr,
            (true, false) => self.nr_dirty -= nr,
            _ => {}
        }
        self.folios.folios[id as usize].dirty = dirty;
    }

    /// The dirty thresholds (`global_dirty_limits` with the default ratios): background
    /// writeback starts above 10 % and writers are throttled above 20 % of the dirtyable memory
    /// (free pages + file LRU pages).
    pub fn dirty_thresholds(&self) -> (u64, u64) {
        let free: i64 = self.zones.iter().map(|z| z.nr_free_pages()).sum();
        let file =
            self.lruvec.pages[LRU_INACTIVE_FILE as usize] + self.lruvec.pages[LRU_ACTIVE_FILE as usize];
        let avail = free.max(0) as u64 + file;
        (avail / 10, avail / 5)
    }

    /// Background writeback: cleans the oldest dirty page-cache folios until at most `target`
    /// pages are dirty. Returns the pages cleaned.
    pub fn writeback_oldest(&mut self, target: u64) -> u64 {
        if self.nr_dirty <= target {
            return 0;
        }
        let mut dirty: Vec<(u64, FolioId)> = self
            .page_cache
            .iter()
            .map(|(_, id)| id)
            .filter(|&id| self.folios.folios[id as usize].dirty)
            .map(|id| (self.folios.folios[id as usize].dirtied_ns, id))
            .collect();
        dirty.sort_unstable();
        let mut n = 0;
        for (_, id) in dirty {
            if self.nr_dirty <= target {
                break;
            }
            n += 1u64 << self.folios.folios[id as usize].order;
            self.folio_mark_dirty(id, false);
        }
        n
    }

    /// The writeback flusher's periodic pass (`wb_workfn` for expired inodes, §19.1 item 9):
    /// page-cache folios dirty for at least `expire_ns` are written back and become clean (the
    /// write completes at once). Returns the pages cleaned.
    pub fn writeback_expired(&mut self, expire_ns: u64) -> u64 {
        let now = self.now_ns;
        let ids: Vec<FolioId> = self
            .page_cache
            .iter()
            .map(|(_, id)| id)
            .filter(|&id| {
                let f = &self.folios.folios[id as usize];
                f.dirty && now >= f.dirtied_ns + expire_ns
            })
            .collect();
        let mut n = 0;
        for id in ids {
            n += 1u64 << self.folios.folios[id as usize].order;
            self.folio_mark_dirty(id, false);
        }
        n
    }
}

impl Mm {
    /// `pgdat_balanced` (§10.1, §8 D7): true if any managed zone up to `highest_zoneidx` passes
    /// the high watermark (boost included) at `order`, counting NR_FREE_PAGES — or, under
    /// defrag_mode for order > 0, NR_FREE_PAGES_BLOCKS; true also when no zone is managed.
    /// (Memory tiering's promo watermark and the per-CPU drift snapshot do not arise here.)
    pub fn pgdat_balanced(&self, order: u32, highest_zoneidx: usize) -> bool {
        let mut any = false;
        for zi in 0..=highest_zoneidx.min(self.zones.len() - 1) {
            let z = &self.zones[zi];
            if z.managed == 0 {
                continue;
            }
            any = true;
            let mark = z.wmark_pages(crate::mmzone::WMARK_HIGH);
            let free = if self.tun.defrag_watermarks() && order > 0 {
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
    pub fn pgdat_watermark_boosted(&self, highest_zoneidx: usize) -> bool {
        (0..=highest_zoneidx.min(self.zones.len() - 1))
            .any(|zi| self.zones[zi].managed > 0 && self.zones[zi].watermark_boost > 0)
    }
}
