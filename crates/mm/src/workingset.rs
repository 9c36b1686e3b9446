//! Refault detection (`kernel-model.md` §10.3.8; mm/workingset.c, classic LRU): evicted folios
//! leave a shadow entry recording the node's "non-resident age" at eviction and whether the
//! folio was part of the workingset (PG_workingset); a folio brought back where a shadow is finds
//! the refault distance, and is activated when that distance fits in the workingset
//! (`workingset_test_recent`).
//!
//! Page-cache shadows live here, keyed by (mapping, first index) and covering the evicted
//! folio's pages (the xarray's multi-index entry). Anonymous shadows live in the swap map
//! (`swap.rs`), one per swapped content token.
//!
//! Simplifications: `bucket_order` is 0 (true below 256 GiB on 64-bit); no memcg. The shadow
//! count is bounded by the node's managed pages: beyond it the oldest shadows are dropped, one
//! `workingset_nodereclaim` per dropped entry, standing in for the shadow-node shrinker (which
//! reclaims whole xarray nodes of up to 64 entries under memory pressure).

use std::collections::{BTreeMap, BTreeSet};

use crate::folio::{FolioId, FolioKind};
use crate::node::Mm;
use crate::vmscan::{LRU_ACTIVE_ANON, LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use crate::vmstat::Stat;

/// One page-cache shadow entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shadow {
    /// `nonresident_age` when the folio was evicted.
    pub eviction: u64,
    /// Pages covered (the evicted folio's size, or what is left of it after a refault of part
    /// of its range).
    pub nr: u64,
    /// PG_workingset of the evicted folio.
    pub workingset: bool,
    /// Eviction sequence number (the bound drops the smallest first).
    seq: u64,
}

/// The node's refault state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workingset {
    /// `lruvec->nonresident_age`: advanced by evictions and activations.
    pub nonresident_age: u64,
    /// (mapping, first index) → shadow.
    shadows: BTreeMap<(u32, u64), Shadow>,
    /// (seq, mapping, first index) of every shadow, oldest first.
    fifo: BTreeSet<(u64, u32, u64)>,
    next_seq: u64,
    /// Shadow insertions and removals not yet settled by the xarray-node model
    /// (`xa_node.rs`), recorded while `xa_log_on`.
    pub(crate) xa_log: Vec<crate::xa_node::XaEvent>,
    pub(crate) xa_log_on: bool,
}

impl Workingset {
    /// Number of shadow entries.
    pub fn len(&self) -> usize {
        self.shadows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shadows.is_empty()
    }

    /// The shadow covering page `index` of `mapping`, if any: (first index, shadow).
    pub fn get(&self, mapping: u32, index: u64) -> Option<(u64, Shadow)> {
        let (&(m, start), &sh) = self.shadows.range(..=(mapping, index)).next_back()?;
        (m == mapping && index < start + sh.nr).then_some((start, sh))
    }

    /// Shadows in (mapping, index) order.
    pub fn iter(&self) -> impl Iterator<Item = ((u32, u64), Shadow)> + '_ {
        self.shadows.iter().map(|(&k, &v)| (k, v))
    }

    fn insert(&mut self, mapping: u32, start: u64, sh: Shadow) {
        self.fifo.insert((sh.seq, mapping, start));
        let old = self.shadows.insert((mapping, start), sh);
        debug_assert!(old.is_none());
        if self.xa_log_on {
            self.xa_log.push(crate::xa_node::XaEvent {
                mapping,
                start,
                nr: sh.nr,
                delta: 1,
                shadow: true,
            });
        }
    }

    fn remove(&mut self, mapping: u32, start: u64) -> Option<Shadow> {
        let sh = self.shadows.remove(&(mapping, start))?;
        self.fifo.remove(&(sh.seq, mapping, start));
        if self.xa_log_on {
            self.xa_log.push(crate::xa_node::XaEvent {
                mapping,
                start,
                nr: sh.nr,
                delta: -1,
                shadow: true,
            });
        }
        Some(sh)
    }

    /// Removes every shadow overlapping pages [index, index + nr) of `mapping` and returns the
    /// first one in index order (the one covering `index`, else the lowest inside the range) —
    /// what `__filemap_add_folio` finds. Parts of a shadow outside the range stay (the xarray
    /// splits a multi-index shadow entry, each part keeping its value).
    fn take_range(&mut self, mapping: u32, index: u64, nr: u64) -> Option<Shadow> {
        let end = index + nr;
        let mut hits: Vec<(u64, Shadow)> = Vec::new();
        if let Some((start, sh)) = self.get(mapping, index) {
            hits.push((start, sh));
        }
        for (&(_, start), &sh) in self.shadows.range((mapping, index + 1)..(mapping, end)) {
            hits.push((start, sh));
        }
        let first = hits.first().map(|&(_, sh)| sh);
        for (start, sh) in hits {
            self.remove(mapping, start);
            if start < index {
                self.insert(
                    mapping,
                    start,
                    Shadow {
                        nr: index - start,
                        ..sh
                    },
                );
            }
            if start + sh.nr > end {
                self.insert(
                    mapping,
                    end,
                    Shadow {
                        nr: start + sh.nr - end,
                        ..sh
                    },
                );
            }
        }
        first
    }

    /// The oldest shadow: (mapping, first index, pages covered).
    pub(crate) fn oldest(&self) -> Option<(u32, u64, u64)> {
        let &(_, m, s) = self.fifo.first()?;
        Some((m, s, self.shadows[&(m, s)].nr))
    }

    /// Drops the shadows overlapping pages [index, index + nr) of `mapping` (parts outside the
    /// range stay, as `take_range` leaves them).
    pub(crate) fn forget_range(&mut self, mapping: u32, index: u64, nr: u64) {
        self.take_range(mapping, index, nr);
    }

    /// Drops every shadow of `mapping` (truncation or unlink of the file).
    pub fn forget_mapping(&mut self, mapping: u32) {
        let keys: Vec<u64> = self
            .shadows
            .range((mapping, 0)..=(mapping, u64::MAX))
            .map(|(&(_, s), _)| s)
            .collect();
        for s in keys {
            self.remove(mapping, s);
        }
    }

    /// Consistency (debug-vm): the FIFO indexes exactly the shadows; shadows of a mapping do
    /// not overlap; at most `bound` entries.
    pub(crate) fn check(&self, bound: usize) -> Result<(), String> {
        if self.fifo.len() != self.shadows.len() {
            return Err(format!(
                "{} shadows, {} in the FIFO",
                self.shadows.len(),
                self.fifo.len()
            ));
        }
        for &(seq, m, s) in &self.fifo {
            match self.shadows.get(&(m, s)) {
                Some(sh) if sh.seq == seq => {}
                _ => return Err(format!("FIFO entry ({seq}, {m}:{s}) names no shadow")),
            }
        }
        let mut prev: Option<(u32, u64)> = None;
        for (&(m, s), sh) in &self.shadows {
            if sh.nr == 0 {
                return Err(format!("shadow {m}:{s} covers no page"));
            }
            if let Some((pm, pend)) = prev {
                if pm == m && s < pend {
                    return Err(format!("shadow {m}:{s} overlaps the one before it"));
                }
            }
            prev = Some((m, s + sh.nr));
        }
        if self.shadows.len() > bound {
            return Err(format!("{} shadows over the bound {bound}", self.shadows.len()));
        }
        Ok(())
    }
}

impl Mm {
    /// `workingset_age_nonresident`.
    pub(crate) fn workingset_age(&mut self, nr: u64) {
        self.reclaim.workingset.nonresident_age += nr;
    }

    /// The eviction stamp of `workingset_eviction`: the age *before* this eviction, which then
    /// ages the non-resident pages by the folio's size.
    pub(crate) fn workingset_eviction_age(&mut self, nr: u64) -> u64 {
        let eviction = self.reclaim.workingset.nonresident_age;
        self.workingset_age(nr);
        eviction
    }

    /// The bound on page-cache shadow entries: the node's managed pages.
    pub fn workingset_shadow_bound(&self) -> usize {
        self.zones
            .iter()
            .map(|z| z.managed as usize)
            .sum::<usize>()
            .max(1)
    }

    /// `__remove_mapping` for a clean page-cache folio that reclaim frees (§10.3.6): stores
    /// its shadow entry (`workingset_eviction`) and frees it (which removes it from the page
    /// cache). The one way reclaim evicts page cache. A folio in no mapping is just freed.
    pub fn page_cache_evict(&mut self, cpu: u32, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        debug_assert_eq!(f.kind, FolioKind::File);
        let (mapping, index, nr, workingset) = (f.mapping, f.index, 1u64 << f.order, f.workingset);
        if mapping != 0 {
            let eviction = self.workingset_eviction_age(nr);
            let ws = &mut self.reclaim.workingset;
            // A stale shadow in the range (a folio added without `workingset_refault`) goes.
            ws.take_range(mapping, index, nr);
            let seq = ws.next_seq;
            ws.next_seq += 1;
            ws.insert(
                mapping,
                index,
                Shadow {
                    eviction,
                    nr,
                    workingset,
                    seq,
                },
            );
            let bound = self.workingset_shadow_bound();
            while self.reclaim.workingset.len() > bound {
                let &(_, m, s) = self.reclaim.workingset.fifo.first().expect("shadows");
                self.reclaim.workingset.remove(m, s);
                self.count(Stat::workingset_nodereclaim, 1);
            }
        }
        self.free_folio(cpu, id);
    }

    /// `workingset_test_recent`: the refault distance (age now − eviction) is within the
    /// workingset: active file pages; plus inactive file for an anon refault; plus, when swap
    /// has room, active anon — and inactive anon for a file refault.
    pub fn workingset_test_recent(&self, eviction: u64, file: bool) -> bool {
        let p = &self.reclaim.lruvec.pages;
        let distance = self.reclaim.workingset.nonresident_age.wrapping_sub(eviction);
        let mut ws = p[LRU_ACTIVE_FILE as usize];
        if !file {
            ws += p[LRU_INACTIVE_FILE as usize];
        }
        if self.can_reclaim_anon() {
            ws += p[LRU_ACTIVE_ANON as usize];
            if file {
                ws += p[LRU_INACTIVE_ANON as usize];
            }
        }
        distance <= ws
    }

    /// `workingset_refault` for folio `id` just brought in with the shadow `(eviction,
    /// workingset)`: counts `workingset_refault_{anon,file}` (pages); if the refault is recent
    /// the folio goes to the active list (as `folio_set_active` before `folio_add_lru`: no
    /// pgactivate), the non-resident age advances, `workingset_activate_*` counts, and a folio
    /// that was in the workingset gets PG_workingset back, counts `workingset_restore_*` and
    /// charges the refault as I/O cost to its LRU type (`lru_note_cost_refault`).
    fn workingset_refault_shadow(&mut self, id: FolioId, eviction: u64, workingset: bool) {
        let f = &self.folios.folios[id as usize];
        let (file, nr) = (f.kind == FolioKind::File, 1u64 << f.order);
        let (refault, activate, restore) = if file {
            (
                Stat::workingset_refault_file,
                Stat::workingset_activate_file,
                Stat::workingset_restore_file,
            )
        } else {
            (
                Stat::workingset_refault_anon,
                Stat::workingset_activate_anon,
                Stat::workingset_restore_anon,
            )
        };
        self.count(refault, nr);
        if !self.workingset_test_recent(eviction, file) {
            return;
        }
        self.move_to_active(id);
        self.workingset_age(nr);
        self.count(activate, nr);
        if workingset {
            self.folios.folios[id as usize].workingset = true;
            self.lru_note_cost(file, nr, 0);
            self.count(restore, nr);
        }
    }

    /// `workingset_refault` for a page-cache folio: to be called right after folio `id` was
    /// added to the page cache at its (mapping, index). Every shadow overlapping the folio's
    /// range is removed; with one, the refault is counted and decided as
    /// [`workingset_test_recent`](Mm::workingset_test_recent) says (see
    /// `workingset_refault_shadow`). Nothing happens without a shadow.
    pub fn workingset_refault(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        if f.mapping == 0 {
            return;
        }
        let (mapping, index, nr) = (f.mapping, f.index, 1u64 << f.order);
        let Some(sh) = self.reclaim.workingset.take_range(mapping, index, nr) else {
            return;
        };
        self.workingset_refault_shadow(id, sh.eviction, sh.workingset);
    }

    /// An anonymous folio swapped in with the shadow its content left in the swap map.
    pub(crate) fn workingset_refault_anon(&mut self, id: FolioId, eviction: u64, workingset: bool) {
        self.workingset_refault_shadow(id, eviction, workingset);
    }

    /// Drops the page-cache shadows of `mapping` (truncate/unlink: `truncate_inode_pages`
    /// clears shadow entries too).
    pub fn workingset_forget_mapping(&mut self, mapping: u32) {
        self.reclaim.workingset.forget_mapping(mapping);
    }
}
