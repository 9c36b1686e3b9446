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
