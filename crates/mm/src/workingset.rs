//! Refault detection for the page cache (`kernel-model.md` §10.3.8; mm/workingset.c): evicted
//! file folios leave a shadow entry that records the node's "nonresident age" at eviction; a
//! new folio added where a shadow is finds the refault distance, and is activated when that
//! distance fits in the workingset (`workingset_test_recent`).
//!
//! Simplifications: one shadow per evicted folio, keyed by its first page and covering its
//! pages; no PG_workingset (no `workingset_restore_*`); the shadow count is bounded by the
//! node's pages (oldest dropped first, standing in for the shadow-node shrinker, counted in
//! `workingset_nodereclaim`).

use std::collections::{BTreeMap, VecDeque};

use crate::folio::FolioId;
use crate::node::Mm;
use crate::vmscan::{LRU_ACTIVE_ANON, LRU_ACTIVE_FILE, LRU_INACTIVE_ANON};
use crate::vmstat::Stat;

/// The node's shadow entries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workingset {
    /// `lruvec->nonresident_age`: advanced by evictions and activations.
    pub nonresident_age: u64,
    /// (mapping, first index) → (age at eviction, pages).
    shadows: BTreeMap<(u32, u64), (u64, u64)>,
    /// Insertion order, for the bound (entries may be stale).
    order: VecDeque<((u32, u64), u64)>,
}

impl Workingset {
    pub fn len(&self) -> usize {
        self.shadows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shadows.is_empty()
    }

    /// The shadow covering page `index` of `mapping`, removed.
    fn take(&mut self, mapping: u32, index: u64) -> Option<(u64, u64)> {
        let (&(m, start), &(age, nr)) = self.shadows.range(..=(mapping, index)).next_back()?;
        if m != mapping || index >= start + nr {
            return None;
        }
        self.shadows.remove(&(m, start));
        Some((age, nr))
    }
}

impl Mm {
    /// `workingset_age_nonresident`.
    pub(crate) fn workingset_age(&mut self, nr: u64) {
        self.workingset.nonresident_age += nr;
    }

    /// `workingset_eviction`: a clean page-cache folio leaves; record its shadow.
    pub(crate) fn workingset_eviction(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        if f.mapping == 0 {
            return;
        }
        let (key, nr) = ((f.mapping, f.index), 1u64 << f.order);
        self.workingset_age(nr);
        let age = self.workingset.nonresident_age;
        self.workingset.shadows.insert(key, (age, nr));
        self.workingset.order.push_back((key, age));
        let bound = self.end_pfn as usize;
        while self.workingset.shadows.len() > bound {
            let Some((k, a)) = self.workingset.order.pop_front() else {
                break;
            };
            if self.workingset.shadows.get(&k).is_some_and(|&(sa, _)| sa == a) {
                self.workingset.shadows.remove(&k);
                self.count(Stat::workingset_nodereclaim, 1);
            }
        }
        while self.workingset.order.len() > 2 * bound.max(1) {
            self.workingset.order.pop_front();
        }
    }

    /// `workingset_refault`, called when folio `id` has just been added to the page cache:
    /// if a shadow covers its index, count the refault and activate the folio when the
    /// refault distance is within the workingset (active file pages, plus all anon pages when
    /// swap has room — `workingset_test_recent` for a file folio).
    pub fn workingset_refault(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        let (mapping, index, nr) = (f.mapping, f.index, 1u64 << f.order);
        let Some((eviction, _)) = self.workingset.take(mapping, index) else {
            return;
        };
        self.count(Stat::workingset_refault_file, nr);
        let distance = self.workingset.nonresident_age.wrapping_sub(eviction);
        let mut ws = self.lruvec.pages[LRU_ACTIVE_FILE as usize];
        if self.can_reclaim_anon() {
            ws += self.lruvec.pages[LRU_ACTIVE_ANON as usize] + self.lruvec.pages[LRU_INACTIVE_ANON as usize];
        }
        if distance <= ws {
            self.workingset_age(nr);
            self.activate_folio(id);
            self.count(Stat::workingset_activate_file, nr);
        }
    }
}
