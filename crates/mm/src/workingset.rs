//! Refault detection (docs/model §10.3.8; mm/workingset.c, classic LRU): evicted folios
//! leave a shadow entry recording the node's "non-resident age" at eviction and whether the
//! folio was part of the workingset (PG_workingset); a folio brought back where a shadow is finds
//! the refault distance, and is activated when that distance fits in the workingset
//! (`workingset_test_recent`).
//!
//! Page-cache shadows are value entries in the page cache's own xarray
//! ([`PageCache`](crate::filemap::PageCache)), as the kernel keeps them: `page_cache_delete`
//! stores the shadow `workingset_eviction` packed in the slots the evicted folio had (here
//! [`Mm::page_cache_evict`]), covering the folio's pages (the xarray's multi-index entry), and
//! `__filemap_add_folio` takes the shadows its folio's range holds, handing the first to
//! `workingset_refault`. A shadow's entry is its eviction stamp and PG_workingset
//! ([`pack`]); its first index and extent are where it sits in the tree. There is no record per
//! shadow besides its slots. Anonymous shadows live in the swap map (`swap.rs`), one per
//! swapped content token.
//!
//! The shadows' age order. The kernel's shadow-node shrinker (`shadow_lru_isolate`,
//! `count_shadow_nodes`) reclaims whole xarray nodes holding only shadows from an LRU of such
//! nodes; the model bounds the shadows (below) and has the shrinker's stand-in (`xa_node.rs`)
//! start from the *oldest shadow*. Oldest is (eviction, mapping, first index) order: each
//! page-cache eviction takes the non-resident age before it and advances it by the folio's
//! pages (≥ 1), so eviction stamps rise strictly from one eviction to the next and the stamp
//! alone orders shadows by eviction; only the pieces of one shadow split by a refault inside it
//! share a stamp, and they sort by first index, the lower first. This is exactly the order of
//! the separate eviction list (a per-shadow FIFO by eviction sequence, mapping, first index)
//! the model kept before shadows moved into the page cache's xarray: the same shadows are
//! pruned first. The xarray finds the least of it without a list: its leaves holding shadows
//! sit in a heap keyed by their oldest shadow ([`XArray::least_value`](crate::xarray::XArray)),
//! a stand-in for the kernel's `shadow_nodes` list_lru of xarray nodes.
//!
//! Simplifications: `bucket_order` is 0 (true below 256 GiB on 64-bit) and the eviction stamp
//! is kept whole (62 bits; the kernel truncates it to its `EVICTION_BITS`); no memcg. The
//! shadow count is bounded by the node's managed pages: beyond it the oldest shadows are
//! dropped, one `workingset_nodereclaim` per dropped entry, standing in for the shadow-node
//! shrinker (which reclaims whole xarray nodes of up to 64 entries under memory pressure).

use crate::filemap::PageCache;
use crate::folio::FolioId;
use crate::node::Mm;
use crate::vmscan::{LRU_ACTIVE_ANON, LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use crate::vmstat::Stat;
use crate::xarray::{is_value, Kind, VALUE_TAG};

/// One page-cache shadow entry, as read back from the page cache.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shadow {
    /// `nonresident_age` when the folio was evicted.
    pub eviction: u64,
    /// Pages covered (the evicted folio's size, or what is left of it after a refault of part
    /// of its range).
    pub nr: u64,
    /// PG_workingset of the evicted folio.
    pub workingset: bool,
}

/// The xarray value entry of a shadow (`pack_shadow` without memcg and node ids: one node):
/// [`VALUE_TAG`], the eviction stamp, PG_workingset in the low bit. Entries compare as their
/// stamps do, which is the order [`PageCache::oldest_shadow`] needs.
pub fn pack(eviction: u64, workingset: bool) -> u64 {
    assert!(
        eviction < 1 << 62,
        "eviction stamp {eviction} overflows a shadow entry"
    );
    VALUE_TAG | eviction << 1 | workingset as u64
}

/// `unpack_shadow`: (eviction stamp, PG_workingset) of a shadow entry.
pub fn unpack(entry: u64) -> (u64, bool) {
    debug_assert!(is_value(entry), "{entry:#x} is not a shadow entry");
    ((entry & !VALUE_TAG) >> 1, entry & 1 != 0)
}

fn shadow_of(entry: u64, nr: u64) -> Shadow {
    let (eviction, workingset) = unpack(entry);
    Shadow {
        eviction,
        nr,
        workingset,
    }
}

/// The node's refault state (the shadows themselves are in the page cache).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct Workingset {
    /// `lruvec->nonresident_age`: advanced by evictions and activations.
    pub nonresident_age: u64,
}

impl PageCache {
    /// Number of shadow entries.
    pub fn shadows_len(&self) -> usize {
        self.xa.len(Kind::Value)
    }

    /// The shadow covering page `index` of `mapping`, if any: (first index, shadow).
    pub fn shadow(&self, mapping: u32, index: u64) -> Option<(u64, Shadow)> {
        let entry = self.xa.lookup(mapping, index).filter(|&e| is_value(e))?;
        let start = self.xa.entry_start(mapping, index)?;
        Some((start, shadow_of(entry, self.xa.entry_len(mapping, start))))
    }

    /// Shadows in (mapping, index) order.
    pub fn shadows(&self) -> impl Iterator<Item = ((u32, u64), Shadow)> + '_ {
        self.xa
            .iter(Kind::Value)
            .map(|((m, s), e)| ((m, s), shadow_of(e, self.xa.entry_len(m, s))))
    }

    /// `__filemap_add_folio`'s store: folio `id` of `order` at `index` of `mapping` (a range
    /// holding no folio) takes the place of the shadows there; returns the first of them
    /// ([`PageCache::take_shadows`]), the one `workingset_refault` judges. A shadow covering
    /// exactly the folio's range (a refault of the folio's size) is replaced in its slots.
    pub fn add_folio(&mut self, mapping: u32, index: u64, order: u32, id: FolioId) -> Option<Shadow> {
        let nr = 1u64 << order;
        if let Some(entry) = self.xa.value_exactly(mapping, index, nr) {
            self.xa.replace(mapping, index, nr, entry, id as u64);
            self.log_xa(mapping, index, nr, -1, true);
            self.log_xa(mapping, index, nr, 1, false);
            return Some(shadow_of(entry, nr));
        }
        let shadow = self.take_shadows(mapping, index, nr);
        self.insert(mapping, index, order, id);
        shadow
    }

    /// `page_cache_delete` of a clean folio reclaim evicts: folio `id` of `order` at `index` of
    /// `mapping` leaves its slots to its shadow `sh` (`xas_store(&xas, shadow)`).
    pub fn evict_folio(&mut self, mapping: u32, index: u64, order: u32, id: FolioId, sh: Shadow) {
        let nr = 1u64 << order;
        debug_assert_eq!(sh.nr, nr);
        let marked = self
            .xa
            .replace(mapping, index, nr, id as u64, pack(sh.eviction, sh.workingset));
        assert!(!marked, "folio {id} evicted while tagged dirty");
        self.log_xa(mapping, index, nr, -1, false);
        self.log_xa(mapping, index, nr, 1, true);
    }

    /// Removes the shadow starting at `start` of `mapping`, overlapping pages [index, end),
    /// leaving its parts outside the range (the xarray splits a multi-index shadow entry, each
    /// part keeping its value: the same eviction stamp, so they keep its place in the age
    /// order, the lower piece first).
    fn cut_shadow(&mut self, mapping: u32, start: u64, index: u64, end: u64) -> Shadow {
        let (nr, entry) = self.xa.remove_value(mapping, start);
        self.log_xa(mapping, start, nr, -1, true);
        if start < index {
            self.xa.insert(mapping, start, index - start, entry);
            self.log_xa(mapping, start, index - start, 1, true);
        }
        if start + nr > end {
            self.xa.insert(mapping, end, start + nr - end, entry);
            self.log_xa(mapping, end, start + nr - end, 1, true);
        }
        shadow_of(entry, nr)
    }

    /// Removes every shadow overlapping pages [index, index + nr) of `mapping` and returns the
    /// first one in index order (the one covering `index`, else the lowest inside the range) —
    /// what `__filemap_add_folio` finds (the kernel's `xas_store` of the folio over the range
    /// returns the old entry; `xas_for_each_conflict` meets the rest). Parts of a shadow outside
    /// the range stay. Folios in the range are left alone.
    pub fn take_shadows(&mut self, mapping: u32, index: u64, nr: u64) -> Option<Shadow> {
        let end = index + nr;
        let mut first = None;
        // The shadow covering `index`, then those starting in (index, end) in index order;
        // the pieces a cut leaves start below `index` or at `end`, outside the walk.
        let mut pos = index;
        while pos < end {
            let Some(start) = self.xa.first_value_in(mapping, pos, end) else {
                break;
            };
            let sh = self.cut_shadow(mapping, start, index, end);
            first.get_or_insert(sh);
            pos = start.max(index) + 1;
        }
        first
    }

    /// The oldest shadow (see the module documentation for the order): (mapping, first index,
    /// pages covered).
    pub(crate) fn oldest_shadow(&mut self) -> Option<(u32, u64, u64)> {
        let (m, s, _) = self.xa.least_value()?;
        Some((m, s, self.xa.entry_len(m, s)))
    }

    /// Drops the oldest shadow; false if there is none.
    fn drop_oldest_shadow(&mut self) -> bool {
        let Some((m, s, _)) = self.xa.least_value() else {
            return false;
        };
        let (nr, _) = self.xa.remove_value(m, s);
        self.log_xa(m, s, nr, -1, true);
        true
    }

    /// Drops the shadows overlapping pages [index, index + nr) of `mapping` (parts outside the
    /// range stay, as [`PageCache::take_shadows`] leaves them).
    pub(crate) fn forget_shadow_range(&mut self, mapping: u32, index: u64, nr: u64) {
        self.take_shadows(mapping, index, nr);
    }

    /// Drops every shadow of `mapping` (truncation or unlink of the file), in index order.
    pub fn forget_shadows(&mut self, mapping: u32) {
        while let Some((s, _)) = self.xa.next_from(mapping, 0, Kind::Value) {
            let (nr, _) = self.xa.remove_value(mapping, s);
            self.log_xa(mapping, s, nr, -1, true);
        }
    }

    /// Consistency (debug-vm): the xarray's own check — which covers the shadows' bitmaps,
    /// extents and the age heap (each leaf with shadows under its oldest one) — plus: every
    /// shadow covers a page and is a well-formed entry, the oldest is the least of them in
    /// (eviction, mapping, first index) order, and at most `bound` are held.
    pub(crate) fn check_shadows(&self, bound: usize) -> Result<(), String> {
        self.xa.check()?;
        let mut least: Option<(u64, u32, u64)> = None;
        let mut n = 0usize;
        for ((m, s), e) in self.xa.iter(Kind::Value) {
            let nr = self.xa.entry_len(m, s);
            if nr == 0 {
                return Err(format!("shadow {m}:{s} covers no page"));
            }
            let (eviction, ws) = unpack(e);
            if pack(eviction, ws) != e {
                return Err(format!("shadow {m}:{s}: malformed entry {e:#x}"));
            }
            least = Some(least.map_or((eviction, m, s), |l| l.min((eviction, m, s))));
            n += 1;
        }
        if n != self.shadows_len() {
            return Err(format!(
                "{} shadows counted, {n} in the index",
                self.shadows_len()
            ));
        }
        let oldest = self.xa.least_value_peek().map(|(m, s, e)| (unpack(e).0, m, s));
        if oldest != least {
            return Err(format!("oldest shadow {oldest:?}, least {least:?}"));
        }
        if n > bound {
            return Err(format!("{n} shadows over the bound {bound}"));
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

    /// `__remove_mapping` for a clean page-cache folio that reclaim frees (§10.3.6): its slots
    /// in the page cache take its shadow entry (`workingset_eviction`, then `page_cache_delete`
    /// storing the shadow where the folio was), the bound on shadows is applied, and the folio
    /// is freed. The one way reclaim evicts page cache. A folio in no mapping is just freed.
    pub fn page_cache_evict(&mut self, cpu: u32, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        debug_assert!(f.kind.file_lru(), "folio {id} is not page cache");
        let (mapping, index, order, workingset) = (f.mapping, f.index, f.order as u32, f.workingset());
        if mapping == 0 {
            self.free_folio(cpu, id);
            return;
        }
        let nr = 1u64 << order;
        let eviction = self.workingset_eviction_age(nr);
        let sh = Shadow {
            eviction,
            nr,
            workingset,
        };
        self.cache.index.evict_folio(mapping, index, order, id, sh);
        let bound = self.workingset_shadow_bound();
        while self.cache.index.shadows_len() > bound {
            assert!(self.cache.index.drop_oldest_shadow(), "shadows");
            self.count(Stat::workingset_nodereclaim, 1);
        }
        self.free_deleted_folio(cpu, id);
    }

    /// `__filemap_add_folio` for folio `id`, whose mapping and index are set and whose range
    /// holds no folio: the shadows in its range are taken (the first is the one
    /// `workingset_refault` judges), the folio is stored, and its refault is decided
    /// ([`Mm::workingset_refault_shadow`]). Nothing is counted without a shadow.
    pub fn page_cache_insert(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        let (mapping, index, order) = (f.mapping, f.index, f.order as u32);
        if let Some(sh) = self.cache.index.add_folio(mapping, index, order, id) {
            self.workingset_refault_shadow(id, sh.eviction, sh.workingset);
        }
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

    /// An anonymous folio swapped in with the shadow its content left in the swap map.
    pub(crate) fn workingset_refault_anon(&mut self, id: FolioId, eviction: u64, workingset: bool) {
        self.workingset_refault_shadow(id, eviction, workingset);
    }

    /// Drops the page-cache shadows of `mapping` (truncate/unlink: `truncate_inode_pages`
    /// clears shadow entries too).
    pub fn workingset_forget_mapping(&mut self, mapping: u32) {
        self.cache.index.forget_shadows(mapping);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// The shadow store the page cache's value entries replaced: a BTreeMap by (mapping, first
    /// index) and a BTreeSet FIFO by (sequence, mapping, first index), with the same
    /// operations; and the folios, by (mapping, first index) → pages.
    #[derive(Default)]
    struct Old {
        shadows: BTreeMap<(u32, u64), (Shadow, u64)>,
        fifo: BTreeSet<(u64, u32, u64)>,
        folios: BTreeMap<(u32, u64), u64>,
        log: Vec<crate::xa_node::XaEvent>,
    }

    impl Old {
        fn ev(&mut self, mapping: u32, start: u64, nr: u64, delta: i8, shadow: bool) {
            self.log.push(crate::xa_node::XaEvent {
                mapping,
                start,
                nr,
                delta,
                shadow,
            });
        }
        fn get(&self, mapping: u32, index: u64) -> Option<(u64, Shadow)> {
            let (&(m, start), &(sh, _)) = self.shadows.range(..=(mapping, index)).next_back()?;
            (m == mapping && index < start + sh.nr).then_some((start, sh))
        }
        fn folio_free(&self, mapping: u32, index: u64, nr: u64) -> bool {
            let below = self.folios.range(..=(mapping, index)).next_back();
            let above = self.folios.range((mapping, index)..).next();
            below.is_none_or(|(&(m, s), &n)| m != mapping || s + n <= index)
                && above.is_none_or(|(&(m, s), _)| m != mapping || s >= index + nr)
        }
        fn insert(&mut self, mapping: u32, start: u64, sh: Shadow, seq: u64) {
            self.fifo.insert((seq, mapping, start));
            assert!(self.shadows.insert((mapping, start), (sh, seq)).is_none());
            self.ev(mapping, start, sh.nr, 1, true);
        }
        fn remove(&mut self, mapping: u32, start: u64) {
            let (sh, seq) = self.shadows.remove(&(mapping, start)).unwrap();
            self.fifo.remove(&(seq, mapping, start));
            self.ev(mapping, start, sh.nr, -1, true);
        }
        fn take_range(&mut self, mapping: u32, index: u64, nr: u64) -> Option<Shadow> {
            let end = index + nr;
            let mut hits: Vec<(u64, Shadow, u64)> = self
                .get(mapping, index)
                .map(|(s, sh)| (s, sh, self.shadows[&(mapping, s)].1))
                .into_iter()
                .collect();
            for (&(_, start), &(sh, seq)) in self.shadows.range((mapping, index + 1)..(mapping, end)) {
                hits.push((start, sh, seq));
            }
            let first = hits.first().map(|&(_, sh, _)| sh);
            for (start, sh, seq) in hits {
                self.remove(mapping, start);
                if start < index {
                    let left = Shadow {
                        nr: index - start,
                        ..sh
                    };
                    self.insert(mapping, start, left, seq);
                }
                if start + sh.nr > end {
                    let right = Shadow {
                        nr: start + sh.nr - end,
                        ..sh
                    };
                    self.insert(mapping, end, right, seq);
                }
            }
            first
        }
        fn oldest(&self) -> Option<(u32, u64, u64)> {
            self.fifo
                .first()
                .map(|&(_, m, s)| (m, s, self.shadows[&(m, s)].0.nr))
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A folio added (its shadows taken) and, if `evict`, evicted at once (a shadow left).
        Add {
            mapping: u32,
            index: u64,
            order: u32,
            evict: bool,
        },
        /// A folio (the `pick`th) evicted.
        Evict {
            pick: usize,
        },
        /// A folio (the `pick`th) removed with no shadow (truncation).
        Drop {
            pick: usize,
        },
        Take {
            mapping: u32,
            index: u64,
            nr: u64,
        },
        DropOldest,
        Forget {
            mapping: u32,
        },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1u32..3, 0u64..1200, prop_oneof![Just(0u32), 0u32..10], prop_oneof![3 => Just(true), 1 => Just(false)])
                .prop_map(|(mapping, index, order, evict)| Op::Add { mapping, index, order, evict }),
            2 => any::<usize>().prop_map(|pick| Op::Evict { pick }),
            1 => any::<usize>().prop_map(|pick| Op::Drop { pick }),
            3 => (1u32..3, 0u64..1200, 1u64..100)
                .prop_map(|(mapping, index, nr)| Op::Take { mapping, index, nr }),
            1 => Just(Op::DropOldest),
            1 => (1u32..3).prop_map(|mapping| Op::Forget { mapping }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Same operations as the insertion, eviction, refault, bound and truncation paths
        /// perform, on the page cache (folios and shadow value entries in one xarray) and on
        /// the separate shadow store it replaced: same shadows found, same index order, same
        /// oldest-first order, same xarray-node events, folios untouched by shadow operations.
        #[test]
        fn matches_btree_store(ops in proptest::collection::vec(op(), 1..150)) {
            let mut new = PageCache::default();
            new.xa_log_on = true;
            let mut old = Old::default();
            let mut seq = 0;
            let mut next_id = 0;
            let mut evict = |new: &mut PageCache, old: &mut Old, mapping: u32, index: u64, nr: u64, id: u32| {
                old.folios.remove(&(mapping, index));
                old.ev(mapping, index, nr, -1, false);
                let sh = Shadow { eviction: seq * 3, nr, workingset: seq % 2 == 0 };
                new.evict_folio(mapping, index, nr.trailing_zeros(), id, sh);
                old.insert(mapping, index, sh, seq);
                seq += 1;
            };
            for op in ops {
                match op {
                    Op::Add { mapping, index, order, evict: ev } => {
                        let nr = 1u64 << order;
                        if old.folio_free(mapping, index, nr) {
                            prop_assert_eq!(new.add_folio(mapping, index, order, next_id), old.take_range(mapping, index, nr));
                            old.folios.insert((mapping, index), nr);
                            old.ev(mapping, index, nr, 1, false);
                            if ev {
                                evict(&mut new, &mut old, mapping, index, nr, next_id);
                            }
                            next_id += 1;
                        }
                    }
                    Op::Evict { pick } | Op::Drop { pick } => {
                        if !old.folios.is_empty() {
                            let (&(m, s), &nr) = old.folios.iter().nth(pick % old.folios.len()).unwrap();
                            let id = new.get(m, s).unwrap();
                            if matches!(op, Op::Evict { .. }) {
                                evict(&mut new, &mut old, m, s, nr, id);
                            } else {
                                new.remove(m, s, nr.trailing_zeros(), id);
                                old.folios.remove(&(m, s));
                                old.ev(m, s, nr, -1, false);
                            }
                        }
                    }
                    Op::Take { mapping, index, nr } => {
                        prop_assert_eq!(new.shadow(mapping, index), old.get(mapping, index));
                        prop_assert_eq!(new.take_shadows(mapping, index, nr), old.take_range(mapping, index, nr));
                    }
                    Op::DropOldest => {
                        let o = old.fifo.first().copied();
                        prop_assert_eq!(new.drop_oldest_shadow(), o.is_some());
                        if let Some((_, m, s)) = o {
                            old.remove(m, s);
                        }
                    }
                    Op::Forget { mapping } => {
                        new.forget_shadows(mapping);
                        let keys: Vec<u64> = old.shadows.range((mapping, 0)..=(mapping, u64::MAX)).map(|(&(_, s), _)| s).collect();
                        for s in keys {
                            old.remove(mapping, s);
                        }
                    }
                }
                prop_assert_eq!(new.check_shadows(usize::MAX), Ok(()));
                prop_assert_eq!(new.oldest_shadow(), old.oldest());
                prop_assert_eq!(&new.xa_log, &old.log);
                let a: Vec<_> = new.shadows().collect();
                let b: Vec<_> = old.shadows.iter().map(|(&k, &(v, _))| (k, v)).collect();
                prop_assert_eq!(a, b);
                let a: Vec<_> = new.iter().map(|(k, _)| k).collect();
                let b: Vec<_> = old.folios.keys().copied().collect();
                prop_assert_eq!(a, b);
            }
            // The whole age order, oldest first.
            while let Some(o) = old.fifo.first().copied() {
                prop_assert_eq!(new.oldest_shadow().map(|(m, s, _)| (m, s)), Some((o.1, o.2)));
                new.drop_oldest_shadow();
                old.remove(o.1, o.2);
            }
            prop_assert_eq!(new.shadows_len(), 0);
            for ((m, s), id) in new.iter().collect::<Vec<_>>() {
                new.remove(m, s, old.folios[&(m, s)].trailing_zeros(), id);
            }
            prop_assert!(new.xa.is_empty());
            prop_assert_eq!(new.xa.nodes_in_use(), 0);
        }
    }

    /// A shadow entry holds the whole eviction stamp and PG_workingset.
    #[test]
    fn pack_round_trip() {
        for (e, ws) in [(0, false), (1, true), (12345, true), ((1 << 62) - 1, false)] {
            assert_eq!(unpack(pack(e, ws)), (e, ws));
            assert!(is_value(pack(e, ws)));
        }
        assert!(pack(5, true) < pack(6, false));
    }
}
