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
    /// Anonymous folios may be reclaimed (a swap device exists; the model has none yet).
    pub may_swap: bool,
    /// kswapd (counts pgscan/pgsteal_kswapd) rather than direct reclaim.
    pub kswapd: bool,
    /// CPU whose PCP receives the freed folios.
    pub cpu: u32,
    pub nr_scanned: u64,
    pub nr_reclaimed: u64,
}

impl ScanControl {
    pub fn direct(reclaim_idx: usize, order: u32, cpu: u32) -> ScanControl {
        ScanControl {
            nr_to_reclaim: crate::types::SWAP_CLUSTER_MAX,
            reclaim_idx,
            order,
            priority: DEF_PRIORITY,
            may_swap: false,
            kswapd: false,
            cpu,
            nr_scanned: 0,
            nr_reclaimed: 0,
        }
    }
}

/// `DEF_PRIORITY`.
pub const DEF_PRIORITY: i32 = 12;

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

    /// `shrink_active_list` (§10.3.7): takes up to `nr_to_scan` pages from the tail of an
    /// active list and deactivates them (no executable file folios in the model, so none stays
    /// active). Counts `pgrefill` and `pgdeactivate`.
    pub fn shrink_active_list(&mut self, nr_to_scan: u64, active_list: u8, sc: &mut ScanControl) {
        let mut scanned = 0;
        let mut id = self.lruvec.lists[active_list as usize].last;
        while id != NIL && scanned < nr_to_scan {
            let prev = self.folios.folios[id as usize].lru_prev;
            let f = &self.folios.folios[id as usize];
            let nr = 1u64 << f.order;
            if self.zone_of(f.pfn) > sc.reclaim_idx {
                id = prev;
                continue;
            }
            scanned += nr;
            self.account_folio(id, -1);
            self.lru_del(id);
            let f = &mut self.folios.folios[id as usize];
            f.active = false;
            f.referenced = false;
            self.lru_add(id);
            self.account_folio(id, 1);
            self.count(crate::vmstat::Stat::pgdeactivate, nr);
            id = prev;
        }
        self.count(crate::vmstat::Stat::pgrefill, scanned);
    }

    /// `shrink_inactive_list` + `shrink_folio_list` (§10.3.5–6, §10.4.4): isolates up to
    /// `nr_to_scan` pages from the tail of an inactive list (folios in zones above
    /// `reclaim_idx` are skipped and counted in `pgskip_<zone>`), then reclaims them: a clean
    /// file folio is removed from the page cache and freed whole at its order; a dirty one is
    /// not written by reclaim (6.18): it is counted in `nr_vmscan_immediate_reclaim` and
    /// activated. Anonymous folios need swap, which the model does not have yet, so anon lists
    /// are not scanned (`get_scan_count`). Counts pgscan_* and pgsteal_*. Returns pages reclaimed.
    ///
    /// Simplification: no PTE reference bits, so `folio_check_references` reduces to the
    /// referenced-file rule (reclaim if clean) — every clean file folio at the tail is reclaimed.
    pub fn shrink_inactive_list(&mut self, nr_to_scan: u64, inactive_list: u8, sc: &mut ScanControl) -> u64 {
        use crate::vmstat::Stat;
        let file = inactive_list == LRU_INACTIVE_FILE;
        let mut scanned = 0;
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
            } else {
                scanned += nr;
                self.isolate_lru_folio(id);
                isolated.push(id);
            }
            id = prev;
        }
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
        for id in isolated {
            let f = &self.folios.folios[id as usize];
            let nr = 1u64 << f.order;
            if file && !f.dirty {
                // Back off the isolation, then free the folio (it leaves the page cache).
                self.account_folio(id, -1);
                self.folios.folios[id as usize].isolated = false;
                self.account_folio(id, 1);
                self.free_folio(sc.cpu, id);
                reclaimed += nr;
            } else {
                if file {
                    self.count(Stat::nr_vmscan_immediate_reclaim, nr);
                }
                self.account_folio(id, -1);
                let f = &mut self.folios.folios[id as usize];
                f.isolated = false;
                f.active = true;
                self.lru_add(id);
                self.account_folio(id, 1);
                self.count(Stat::pgactivate, nr);
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
        sc.nr_scanned += scanned;
        sc.nr_reclaimed += reclaimed;
        reclaimed
    }

    /// `shrink_lruvec` with `get_scan_count` (§10.4.2–3) for the model without swap: only the
    /// file lists are scanned; each gets a target of its size (eligible zones) >> priority,
    /// worked in chunks of SWAP_CLUSTER_MAX until the targets are met or enough was reclaimed
    /// (direct reclaim at DEF_PRIORITY finishes its targets); then the active file list is aged
    /// if the inactive one is low.
    ///
    /// Simplification: without swap `get_scan_count` is "file only", so the anon cost balancing
    /// and swappiness do not arise; list sizes are node-wide (one zone-eligible filter at
    /// isolation time, pgskip).
    pub fn shrink_lruvec(&mut self, sc: &mut ScanControl) {
        let cluster = crate::types::SWAP_CLUSTER_MAX;
        let lists: &[u8] = if sc.may_swap {
            &[
                LRU_INACTIVE_ANON,
                LRU_ACTIVE_ANON,
                LRU_INACTIVE_FILE,
                LRU_ACTIVE_FILE,
            ]
        } else {
            &[LRU_INACTIVE_FILE, LRU_ACTIVE_FILE]
        };
        let mut targets = [0u64; NR_LRU_LISTS];
        for &l in lists {
            targets[l as usize] = self.lruvec.pages[l as usize] >> sc.priority;
        }
        let proportional = !sc.kswapd && sc.priority == DEF_PRIORITY;
        let start = sc.nr_reclaimed;
        while lists.iter().any(|&l| targets[l as usize] > 0) {
            for &l in lists {
                let n = targets[l as usize].min(cluster);
                if n == 0 {
                    continue;
                }
                targets[l as usize] -= n;
                if l & 1 == 1 {
                    self.shrink_active_list(n, l, sc);
                } else {
                    self.shrink_inactive_list(n, l, sc);
                }
            }
            if sc.nr_reclaimed - start >= sc.nr_to_reclaim && !proportional {
                break;
            }
        }
        if self.inactive_is_low(LRU_INACTIVE_FILE) {
            self.shrink_active_list(cluster, LRU_ACTIVE_FILE, sc);
        }
    }

    /// `try_to_free_pages` / `do_try_to_free_pages` (§10.5): direct reclaim of 32 pages,
    /// priority 12 down to 0, counting `allocstall_<zone>` once. Returns pages reclaimed.
    ///
    /// Not yet modelled: the compaction_ready early stop for costly orders (§10.5.4), slab
    /// shrinking, throttling and the vmscan tracepoints.
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
        let mut sc = ScanControl::direct(reclaim_idx, order, cpu);
        while sc.priority >= 0 {
            self.shrink_lruvec(&mut sc);
            if sc.nr_reclaimed >= sc.nr_to_reclaim {
                break;
            }
            sc.priority -= 1;
        }
        sc.nr_reclaimed
    }
}

impl Mm {
    /// `folio_mark_dirty` for a file folio (written to by the workload; the flusher cleans it).
    pub fn folio_mark_dirty(&mut self, id: FolioId, dirty: bool) {
        let f = &mut self.folios.folios[id as usize];
        assert_eq!(f.kind, FolioKind::File, "only file folios are dirtied");
        f.dirty = dirty;
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
