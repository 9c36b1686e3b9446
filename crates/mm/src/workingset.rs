//! Refault detection (`kernel-model.md` §10.3.8; mm/workingset.c, classic LRU): evicted folios
//! leave a shadow entry recording the node's "non-resident age" at eviction and whether the
//! folio was part of the workingset (PG_workingset); a folio brought back where a shadow is finds
//! the refault distance, and is activated when that distance fits in the workingset
//! (`workingset_test_recent`).
//!
//! Page-cache shadows live here, keyed by (mapping, first index) and covering the evicted
//! folio's pages (the xarray's multi-index entry), in a radix tree per mapping of their own
//! (`xarray.rs`; the kernel keeps them in the page cache's xarray, in the slots the folios
//! left). Anonymous shadows live in the swap map
//! (`swap.rs`), one per swapped content token.
//!
//! Simplifications: `bucket_order` is 0 (true below 256 GiB on 64-bit); no memcg. The shadow
//! count is bounded by the node's managed pages: beyond it the oldest shadows are dropped, one
//! `workingset_nodereclaim` per dropped entry, standing in for the shadow-node shrinker (which
//! reclaims whole xarray nodes of up to 64 entries under memory pressure).

use crate::folio::FolioId;
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

/// One shadow entry's record: where it is, what it holds, and its neighbours in the eviction
/// FIFO (slots of `Workingset::recs`, `NIL` at the ends).
#[derive(Clone, Copy, Debug)]
struct ShadowRec {
    mapping: u32,
    start: u64,
    sh: Shadow,
    prev: u32,
    next: u32,
}

const NIL: u32 = u32::MAX;

/// The node's refault state.
///
/// The shadow entries are held as the kernel holds them, in the page cache's xarray (one
/// [`XArray`](crate::xarray::XArray) tree per mapping, a shadow covering each page it stands
/// for: `get` finds the shadow over a page in one descent). Their records sit in a slab with a
/// free list (no allocation per shadow), linked oldest first: the order of (eviction sequence,
/// mapping, first index) — a shadow split by a refault keeps its sequence number and its pieces
/// take its place in the list — from which the bound drops the oldest, standing in for the
/// shadow-node shrinker's LRU (§10.3 item 8).
#[derive(Clone, Debug)]
pub struct Workingset {
    /// `lruvec->nonresident_age`: advanced by evictions and activations.
    pub nonresident_age: u64,
    /// (mapping, page) → the slot in `recs` of the shadow covering it.
    index: crate::xarray::XArray,
    recs: Vec<ShadowRec>,
    free: Vec<u32>,
    /// The oldest and newest shadow (slots in `recs`), `NIL` when there is none.
    head: u32,
    tail: u32,
    next_seq: u64,
    /// Shadow insertions and removals not yet settled by the xarray-node model
    /// (`xa_node.rs`), recorded while `xa_log_on`.
    pub(crate) xa_log: Vec<crate::xa_node::XaEvent>,
    pub(crate) xa_log_on: bool,
}

impl Default for Workingset {
    fn default() -> Self {
        Workingset {
            nonresident_age: 0,
            index: Default::default(),
            recs: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            next_seq: 0,
            xa_log: Vec::new(),
            xa_log_on: false,
        }
    }
}

impl Workingset {
    /// Host bytes of the shadow index, records and logs (`host_mem.rs`), with the counts that
    /// explain them.
    pub(crate) fn host_bytes(&self) -> Vec<(&'static str, u64)> {
        use crate::host_mem::vec_bytes;
        vec![
            ("workingset.xarray", self.index.host_bytes()),
            ("workingset.recs", vec_bytes(&self.recs) + vec_bytes(&self.free)),
            ("workingset.xa_log", vec_bytes(&self.xa_log)),
            ("count.shadows", self.len() as u64),
        ]
    }

    /// Number of shadow entries.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The shadow covering page `index` of `mapping`, if any: (first index, shadow).
    pub fn get(&self, mapping: u32, index: u64) -> Option<(u64, Shadow)> {
        let r = &self.recs[self.index.lookup(mapping, index)? as usize];
        Some((r.start, r.sh))
    }

    /// Shadows in (mapping, index) order.
    pub fn iter(&self) -> impl Iterator<Item = ((u32, u64), Shadow)> + '_ {
        self.index
            .iter()
            .map(|(k, slot)| (k, self.recs[slot as usize].sh))
    }

    fn log(&mut self, mapping: u32, start: u64, nr: u64, delta: i8) {
        if self.xa_log_on {
            self.xa_log.push(crate::xa_node::XaEvent {
                mapping,
                start,
                nr,
                delta,
                shadow: true,
            });
        }
    }

    /// Stores shadow `sh` over `[start, start + sh.nr)` of `mapping`, placed in the FIFO after
    /// slot `after` (`NIL`: first).
    fn insert_after(&mut self, after: u32, mapping: u32, start: u64, sh: Shadow) -> u32 {
        let next = if after == NIL {
            self.head
        } else {
            self.recs[after as usize].next
        };
        let rec = ShadowRec {
            mapping,
            start,
            sh,
            prev: after,
            next,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.recs[s as usize] = rec;
                s
            }
            None => {
                self.recs.push(rec);
                (self.recs.len() - 1) as u32
            }
        };
        if after == NIL {
            self.head = slot;
        } else {
            self.recs[after as usize].next = slot;
        }
        if next == NIL {
            self.tail = slot;
        } else {
            self.recs[next as usize].prev = slot;
        }
        self.index.insert(mapping, start, sh.nr, slot);
        self.log(mapping, start, sh.nr, 1);
        slot
    }

    /// A new shadow (the newest: it goes last in the FIFO).
    fn insert(&mut self, mapping: u32, start: u64, sh: Shadow) {
        self.insert_after(self.tail, mapping, start, sh);
    }

    /// Removes the shadow in slot `slot`; returns the slot before it in the FIFO.
    fn remove_slot(&mut self, slot: u32) -> u32 {
        let r = self.recs[slot as usize];
        self.index.remove(r.mapping, r.start, r.sh.nr, slot);
        if r.prev == NIL {
            self.head = r.next;
        } else {
            self.recs[r.prev as usize].next = r.next;
        }
        if r.next == NIL {
            self.tail = r.prev;
        } else {
            self.recs[r.next as usize].prev = r.prev;
        }
        self.free.push(slot);
        self.log(r.mapping, r.start, r.sh.nr, -1);
        r.prev
    }

    /// Removes shadow `slot`, overlapping pages [index, end), leaving its parts outside the
    /// range where it was in the FIFO (the pieces keep its sequence number, so they sort where
    /// it sorted, the lower piece first).
    fn cut(&mut self, slot: u32, index: u64, end: u64) -> Shadow {
        let ShadowRec {
            mapping, start, sh, ..
        } = self.recs[slot as usize];
        let mut at = self.remove_slot(slot);
        if start < index {
            let left = Shadow {
                nr: index - start,
                ..sh
            };
            at = self.insert_after(at, mapping, start, left);
        }
        if start + sh.nr > end {
            let right = Shadow {
                nr: start + sh.nr - end,
                ..sh
            };
            self.insert_after(at, mapping, end, right);
        }
        sh
    }

    /// Removes every shadow overlapping pages [index, index + nr) of `mapping` and returns the
    /// first one in index order (the one covering `index`, else the lowest inside the range) —
    /// what `__filemap_add_folio` finds. Parts of a shadow outside the range stay (the xarray
    /// splits a multi-index shadow entry, each part keeping its value).
    fn take_range(&mut self, mapping: u32, index: u64, nr: u64) -> Option<Shadow> {
        let end = index + nr;
        let mut first = None;
        // The shadow covering `index`, then those starting in (index, end) in index order;
        // the pieces a cut leaves start below `index` or at `end`, outside the walk.
        let mut pos = index;
        while pos < end {
            let Some(slot) = self.index.first_in(mapping, pos, end) else {
                break;
            };
            let start = self.recs[slot as usize].start;
            let sh = self.cut(slot, index, end);
            first.get_or_insert(sh);
            pos = start.max(index) + 1;
        }
        first
    }

    /// The oldest shadow: (mapping, first index, pages covered).
    pub(crate) fn oldest(&self) -> Option<(u32, u64, u64)> {
        let r = self.recs.get(self.head as usize)?;
        Some((r.mapping, r.start, r.sh.nr))
    }

    /// Drops the oldest shadow; false if there is none.
    fn drop_oldest(&mut self) -> bool {
        if self.head == NIL {
            return false;
        }
        self.remove_slot(self.head);
        true
    }

    /// Drops the shadows overlapping pages [index, index + nr) of `mapping` (parts outside the
    /// range stay, as `take_range` leaves them).
    pub(crate) fn forget_range(&mut self, mapping: u32, index: u64, nr: u64) {
        self.take_range(mapping, index, nr);
    }

    /// Drops every shadow of `mapping` (truncation or unlink of the file), in index order.
    pub fn forget_mapping(&mut self, mapping: u32) {
        while let Some((_, slot)) = self.index.next_from(mapping, 0) {
            self.remove_slot(slot);
        }
    }

    /// Consistency (debug-vm): the FIFO links exactly the shadows, oldest first by (sequence,
    /// mapping, first index); each is indexed over its pages (so that shadows of a mapping do
    /// not overlap); at most `bound` entries.
    pub(crate) fn check(&self, bound: usize) -> Result<(), String> {
        let mut n = 0usize;
        let mut prev_key: Option<(u64, u32, u64)> = None;
        let mut prev = NIL;
        let mut slot = self.head;
        while slot != NIL {
            let r = self.recs.get(slot as usize).ok_or("FIFO link out of range")?;
            let (m, s) = (r.mapping, r.start);
            if r.prev != prev {
                return Err(format!("shadow {m}:{s}: FIFO back link broken"));
            }
            if r.sh.nr == 0 {
                return Err(format!("shadow {m}:{s} covers no page"));
            }
            let key = (r.sh.seq, m, s);
            if prev_key.is_some_and(|p| p >= key) {
                return Err(format!("FIFO entry ({}, {m}:{s}) out of order", r.sh.seq));
            }
            if self.index.get(m, s) != Some(slot) || self.index.lookup(m, s + r.sh.nr - 1) != Some(slot) {
                return Err(format!("FIFO entry ({}, {m}:{s}) names no shadow", r.sh.seq));
            }
            prev_key = Some(key);
            prev = slot;
            slot = r.next;
            n += 1;
            if n > self.recs.len() {
                return Err("FIFO loops".into());
            }
        }
        if prev != self.tail {
            return Err("FIFO tail is not its last shadow".into());
        }
        if n != self.len() {
            return Err(format!("{} shadows, {n} in the FIFO", self.len()));
        }
        if self.len() > bound {
            return Err(format!("{} shadows over the bound {bound}", self.len()));
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
        debug_assert!(f.kind.file_lru(), "folio {id} is not page cache");
        let (mapping, index, nr, workingset) = (f.mapping, f.index, 1u64 << f.order, f.workingset());
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
                assert!(self.reclaim.workingset.drop_oldest(), "shadows");
                self.count(Stat::workingset_nodereclaim, 1);
            }
        }
        self.free_folio(cpu, id);
    }

    /// `workingset_test_recent`: the refault distance (age now − eviction) is within the
    /// workingset: active file pages; plus inactive file for an anon refault; plus, when swap
    /// has room, active anon — and inactive anon for a file refault.
    pub fn workingset_test_recent(&self, eviction: u64, file: bool) -> bool {
        // Simplified: one machine-wide non-resident age, so the workingset is every node's.
        let mut p = [0u64; crate::vmscan::NR_LRU_LISTS];
        for lv in &self.reclaim.lruvec {
            for (a, b) in p.iter_mut().zip(lv.pages) {
                *a += b;
            }
        }
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
        let (file, nr) = (f.kind.file_lru(), 1u64 << f.order);
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
            self.folios.folios[id as usize].set_workingset(true);
            let nid = self.pfn_nid(self.folios.folios[id as usize].pfn);
            self.lru_note_cost(nid, file, nr, 0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// The shadow store this one replaced: a BTreeMap by (mapping, first index) and a BTreeSet
    /// FIFO by (sequence, mapping, first index), with the same operations.
    #[derive(Default)]
    struct Old {
        shadows: BTreeMap<(u32, u64), Shadow>,
        fifo: BTreeSet<(u64, u32, u64)>,
        log: Vec<crate::xa_node::XaEvent>,
    }

    impl Old {
        fn ev(&mut self, mapping: u32, start: u64, nr: u64, delta: i8) {
            self.log.push(crate::xa_node::XaEvent {
                mapping,
                start,
                nr,
                delta,
                shadow: true,
            });
        }
        fn get(&self, mapping: u32, index: u64) -> Option<(u64, Shadow)> {
            let (&(m, start), &sh) = self.shadows.range(..=(mapping, index)).next_back()?;
            (m == mapping && index < start + sh.nr).then_some((start, sh))
        }
        fn insert(&mut self, mapping: u32, start: u64, sh: Shadow) {
            self.fifo.insert((sh.seq, mapping, start));
            assert!(self.shadows.insert((mapping, start), sh).is_none());
            self.ev(mapping, start, sh.nr, 1);
        }
        fn remove(&mut self, mapping: u32, start: u64) {
            let sh = self.shadows.remove(&(mapping, start)).unwrap();
            self.fifo.remove(&(sh.seq, mapping, start));
            self.ev(mapping, start, sh.nr, -1);
        }
        fn take_range(&mut self, mapping: u32, index: u64, nr: u64) -> Option<Shadow> {
            let end = index + nr;
            let mut hits: Vec<(u64, Shadow)> = self.get(mapping, index).into_iter().collect();
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
    }

    #[derive(Clone, Debug)]
    enum Op {
        Evict { mapping: u32, index: u64, order: u32 },
        Take { mapping: u32, index: u64, nr: u64 },
        DropOldest,
        Forget { mapping: u32 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1u32..3, 0u64..1200, prop_oneof![Just(0u32), 0u32..10])
                .prop_map(|(mapping, index, order)| Op::Evict { mapping, index, order }),
            4 => (1u32..3, 0u64..1200, 1u64..100)
                .prop_map(|(mapping, index, nr)| Op::Take { mapping, index, nr }),
            1 => Just(Op::DropOldest),
            1 => (1u32..3).prop_map(|mapping| Op::Forget { mapping }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Same operations as the eviction, refault, bound and truncation paths perform: same
        /// shadows found, same index order, same FIFO order, same xarray-node events.
        #[test]
        fn matches_btree_store(ops in proptest::collection::vec(op(), 1..150)) {
            let mut new = Workingset { xa_log_on: true, ..Default::default() };
            let mut old = Old::default();
            let mut seq = 0;
            for op in ops {
                match op {
                    Op::Evict { mapping, index, order } => {
                        let nr = 1u64 << order;
                        new.take_range(mapping, index, nr);
                        old.take_range(mapping, index, nr);
                        let sh = Shadow { eviction: seq * 3, nr, workingset: seq % 2 == 0, seq };
                        seq += 1;
                        new.insert(mapping, index, sh);
                        old.insert(mapping, index, sh);
                    }
                    Op::Take { mapping, index, nr } => {
                        prop_assert_eq!(new.get(mapping, index), old.get(mapping, index));
                        prop_assert_eq!(new.take_range(mapping, index, nr), old.take_range(mapping, index, nr));
                    }
                    Op::DropOldest => {
                        let o = old.fifo.first().copied();
                        prop_assert_eq!(new.drop_oldest(), o.is_some());
                        if let Some((_, m, s)) = o {
                            old.remove(m, s);
                        }
                    }
                    Op::Forget { mapping } => {
                        new.forget_mapping(mapping);
                        let keys: Vec<u64> = old.shadows.range((mapping, 0)..=(mapping, u64::MAX)).map(|(&(_, s), _)| s).collect();
                        for s in keys {
                            old.remove(mapping, s);
                        }
                    }
                }
                prop_assert_eq!(new.check(usize::MAX), Ok(()));
                prop_assert_eq!(new.oldest(), old.fifo.first().map(|&(_, m, s)| (m, s, old.shadows[&(m, s)].nr)));
                prop_assert_eq!(&new.xa_log, &old.log);
                let a: Vec<_> = new.iter().collect();
                let b: Vec<_> = old.shadows.iter().map(|(&k, &v)| (k, v)).collect();
                prop_assert_eq!(a, b);
            }
            // The whole FIFO, oldest first.
            while let Some(o) = old.fifo.first().copied() {
                prop_assert_eq!(new.oldest().map(|(m, s, _)| (m, s)), Some((o.1, o.2)));
                new.drop_oldest();
                old.remove(o.1, o.2);
            }
            prop_assert!(new.is_empty());
            prop_assert_eq!(new.index.nodes_in_use(), 0);
        }
    }
}
