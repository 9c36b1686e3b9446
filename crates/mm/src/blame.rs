//! Fragmentation blame (issue 37): every event that makes a pageblock impure is attributed to
//! the *source* whose allocation caused it, and the sources' figures are summed for ranking.
//!
//! A source is a small interned id ([`SourceId`]) that whoever runs the model sets in
//! [`Blame::cur`] when it switches to running something (the timed engine: at each task step,
//! from the generator and the task's `comm`). Everything here exists only when blame is on:
//! [`Mm::blame`](crate::node::Mm::blame) is `None` otherwise, and each event point costs one
//! branch on that `Option`, with no allocation and no per-page work.
//!
//! The events, at the points where the model already has the kernel's behaviour:
//! - [`BlameKind::Steal`]: `__rmqueue_steal` took a chunk of another type's block (§6.4); the
//!   block keeps its type and now holds a foreign allocation: it is made mixed.
//! - [`BlameKind::ClaimPartial`] / [`BlameKind::ClaimWhole`]: `__rmqueue_claim` converted a
//!   block (§6.3.2c, §6.5's classes by whether the chunk was a whole block): a partial claim
//!   leaves the block's allocated pages of the old type in it (mixed); a whole-block claim
//!   takes a free block (pure).
//! - [`BlameKind::NoFallback`]: an allocation of one type handed a page in a block of another
//!   type without a fallback event of that type in the block ever (the PCP handing out a page
//!   cached before a claim retyped its block: docs/pageblock-mixing.md rule 3, §2.3).
//! - [`BlameKind::PagecacheUnmovable`]: a block-device page-cache folio placed in a
//!   non-Movable block (§33.1 item 3: the bdev cache is allocated without `__GFP_MOVABLE`,
//!   next to slab and page tables, with no fallback event).
//! - [`BlameKind::CompactBlocked`]: the compaction migrate scanner met a page it cannot isolate
//!   (unmovable, pinned, unmigratable: §9.3, §25) in a block; blamed on the source that
//!   allocated that page (kept per pfn, only when blame is on).
//!
//! And one outcome: a PMD THP fault that failed (`thp_fault_fallback`, §11.3) is charged to
//! every source whose pages blocked its direct compaction in some block
//! ([`SourceStats::thp_fault_fail`]): the THP faults that failed in blocks the source's pages
//! kept from emptying. A failed fault that did not compact (no direct reclaim in its gfp, or
//! compaction deferred or skipped) is charged to no one.
//!
//! A page allocated before blame was turned on, or outside any source, is blamed on source 0,
//! `boot`.

use std::collections::{BTreeSet, HashMap};

/// An interned source.
pub type SourceId = u32;

/// Source 0: boot, and pages whose allocating source is not known.
pub const BOOT_SOURCE: SourceId = 0;

/// What happened (see the module comment).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlameKind {
    Steal = 0,
    ClaimPartial = 1,
    ClaimWhole = 2,
    NoFallback = 3,
    PagecacheUnmovable = 4,
    CompactBlocked = 5,
}

pub const NR_BLAME_KINDS: usize = 6;

/// The kinds' names in the result JSON, by `BlameKind as usize`.
pub use fraglab_types::blame::BLAME_KIND_NAMES;
const _: () = assert!(BLAME_KIND_NAMES.len() == NR_BLAME_KINDS);

/// One source's figures.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct SourceStats {
    /// Events by kind (`BlameKind as usize`).
    pub counts: [u64; NR_BLAME_KINDS],
    /// Pages involved in the events, by kind (`1 << order` each; compaction: the page's).
    pub pages: [u64; NR_BLAME_KINDS],
    /// Events by the allocation's migratetype (Unmovable, Movable, Reclaimable; others
    /// folded into Unmovable) — the compaction failures are not in it.
    pub by_mt: [u64; 3],
    /// Distinct pageblocks this source's events made mixed (steal, partial claim, no-fallback,
    /// page cache in a non-Movable block).
    pub mixed_blocks: BTreeSet<u32>,
    /// Distinct pageblocks the migrate scanner could not empty because of this source's pages.
    pub compact_blocked: BTreeSet<u32>,
    /// PMD THP faults that failed after their direct compaction met this source's pages in a
    /// block it could not empty (module comment).
    pub thp_fault_fail: u64,
}

/// The blame state (only allocated when blame is on).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct Blame {
    /// The source the current operation runs for.
    pub cur: SourceId,
    names: Vec<String>,
    index: HashMap<String, SourceId>,
    pub stats: Vec<SourceStats>,
    /// The source that allocated each pfn's chunk (set at the chunk's head).
    owner: Vec<SourceId>,
    /// Per pageblock: bit `mt` set once a fallback of migratetype `mt` took pages in it.
    fell_back: Vec<u8>,
    /// While a PMD THP fault allocates: the sources whose pages blocked its compaction.
    thp_fault: Option<Vec<SourceId>>,
}

impl Blame {
    /// Blame for a machine of `end_pfn` pfns and `nr_blocks` pageblocks; source 0 is `boot`.
    pub fn new(end_pfn: u32, nr_blocks: usize) -> Blame {
        let mut b = Blame {
            cur: BOOT_SOURCE,
            names: Vec::new(),
            index: HashMap::new(),
            stats: Vec::new(),
            owner: vec![BOOT_SOURCE; end_pfn as usize],
            fell_back: vec![0; nr_blocks],
            thp_fault: None,
        };
        b.intern("boot");
        b
    }

    /// The id of source `name`, made on first use.
    pub fn intern(&mut self, name: &str) -> SourceId {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.names.len() as SourceId;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        self.stats.push(SourceStats::default());
        id
    }

    pub fn name(&self, id: SourceId) -> &str {
        &self.names[id as usize]
    }

    pub fn nr_sources(&self) -> usize {
        self.names.len()
    }

    /// The source that allocated the chunk headed at `pfn`.
    pub fn owner(&self, pfn: u32) -> SourceId {
        self.owner.get(pfn as usize).copied().unwrap_or(BOOT_SOURCE)
    }

    /// A folio migrated from the chunk at `src` to the one at `dst` keeps its allocator.
    pub fn moved(&mut self, src: u32, dst: u32) {
        let o = self.owner(src);
        if let Some(d) = self.owner.get_mut(dst as usize) {
            *d = o;
        }
    }

    /// An allocation of the chunk at `pfn` by the current source.
    #[inline]
    pub fn note_alloc(&mut self, pfn: u32) {
        if let Some(o) = self.owner.get_mut(pfn as usize) {
            *o = self.cur;
        }
    }

    /// A fallback (steal or claim) by the current source of an `order` chunk at `pfn` of
    /// migratetype `mt` (§6.3–§6.5).
    pub fn note_fallback(&mut self, kind: BlameKind, pfn: u32, order: u32, mt: usize) {
        let block = pfn >> crate::types::PAGEBLOCK_ORDER;
        if let Some(f) = self.fell_back.get_mut(block as usize) {
            *f |= 1 << mt.min(7);
        }
        let mixes = kind != BlameKind::ClaimWhole;
        self.record(self.cur, kind, order, mt, block, mixes);
    }

    /// An allocation of migratetype `alloc_mt` handed a chunk at `pfn` in a block of type
    /// `block_mt`: a [`BlameKind::NoFallback`] event unless a fallback of `alloc_mt` has taken
    /// pages in that block before.
    pub fn note_placed(&mut self, pfn: u32, order: u32, alloc_mt: usize, block_mt: usize) {
        let block = pfn >> crate::types::PAGEBLOCK_ORDER;
        if alloc_mt == block_mt || alloc_mt >= 3 || block_mt >= 3 {
            return;
        }
        if self
            .fell_back
            .get(block as usize)
            .is_some_and(|f| f & (1 << alloc_mt) != 0)
        {
            return;
        }
        self.record(self.cur, BlameKind::NoFallback, order, alloc_mt, block, true);
    }

    /// A block-device page-cache folio at `pfn` in a non-Movable block (§33.1 item 3).
    pub fn note_pagecache_unmovable(&mut self, pfn: u32, order: u32, alloc_mt: usize) {
        let block = pfn >> crate::types::PAGEBLOCK_ORDER;
        self.record(
            self.cur,
            BlameKind::PagecacheUnmovable,
            order,
            alloc_mt,
            block,
            true,
        );
    }

    /// The migrate scanner could not isolate the chunk at `pfn` (of `order`): blamed on its
    /// allocator.
    pub fn note_compact_blocked(&mut self, pfn: u32, order: u32) {
        let src = self.owner(pfn);
        let block = pfn >> crate::types::PAGEBLOCK_ORDER;
        let s = &mut self.stats[src as usize];
        let k = BlameKind::CompactBlocked as usize;
        s.counts[k] += 1;
        s.pages[k] += 1 << order;
        s.compact_blocked.insert(block);
        if let Some(v) = self.thp_fault.as_mut() {
            if !v.contains(&src) {
                v.push(src);
            }
        }
    }

    /// A PMD THP fault starts allocating its folio.
    pub fn begin_thp_fault(&mut self) {
        self.thp_fault = Some(Vec::new());
    }

    /// The PMD THP fault's allocation ended; if it `failed`, every source that blocked its
    /// compaction is charged with it.
    pub fn end_thp_fault(&mut self, failed: bool) {
        if let Some(v) = self.thp_fault.take() {
            if failed {
                for src in v {
                    self.stats[src as usize].thp_fault_fail += 1;
                }
            }
        }
    }

    fn record(&mut self, src: SourceId, kind: BlameKind, order: u32, mt: usize, block: u32, mixes: bool) {
        let s = &mut self.stats[src as usize];
        s.counts[kind as usize] += 1;
        s.pages[kind as usize] += 1 << order;
        s.by_mt[if mt < 3 { mt } else { 0 }] += 1;
        if mixes {
            s.mixed_blocks.insert(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intern_is_stable_and_boot_is_zero() {
        let mut b = Blame::new(4096, 8);
        assert_eq!(b.name(BOOT_SOURCE), "boot");
        let a = b.intern("kbuild cc1");
        assert_eq!(b.intern("kbuild cc1"), a);
        assert_ne!(b.intern("thp_burst thp_burst"), a);
        assert_eq!(b.nr_sources(), 3);
    }

    #[test]
    fn events_aggregate_per_source() {
        let mut b = Blame::new(4096, 8);
        let a = b.intern("a");
        b.cur = a;
        b.note_alloc(1024);
        b.note_fallback(BlameKind::Steal, 1024, 0, 0);
        b.note_fallback(BlameKind::Steal, 1030, 1, 0);
        b.note_fallback(BlameKind::ClaimWhole, 2048, 0, 0);
        // The block had an Unmovable fallback: not a no-fallback event.
        b.note_placed(1040, 0, 0, 1);
        // Block 3 had none.
        b.note_placed(3 * 512, 0, 0, 1);
        let s = &b.stats[a as usize];
        assert_eq!(s.counts[BlameKind::Steal as usize], 2);
        assert_eq!(s.pages[BlameKind::Steal as usize], 3);
        assert_eq!(s.counts[BlameKind::ClaimWhole as usize], 1);
        assert_eq!(s.counts[BlameKind::NoFallback as usize], 1);
        assert_eq!(s.mixed_blocks.iter().copied().collect::<Vec<_>>(), vec![2, 3]);
        // Compaction failures go to the page's allocator, not the current source.
        let c = b.intern("c");
        b.cur = c;
        b.note_compact_blocked(1024, 0);
        b.note_compact_blocked(8, 0);
        assert_eq!(b.stats[a as usize].compact_blocked.len(), 1);
        assert_eq!(
            b.stats[BOOT_SOURCE as usize].counts[BlameKind::CompactBlocked as usize],
            1
        );
        assert!(b.stats[c as usize].compact_blocked.is_empty());
        // A failed THP fault whose compaction met a's page (twice) and boot's: one each; a
        // fault that succeeded, or a block met outside a fault, charges no one.
        b.begin_thp_fault();
        b.note_compact_blocked(1024, 0);
        b.note_compact_blocked(1025, 0);
        b.note_compact_blocked(8, 0);
        b.end_thp_fault(true);
        b.begin_thp_fault();
        b.note_compact_blocked(1024, 0);
        b.end_thp_fault(false);
        b.note_compact_blocked(1024, 0);
        assert_eq!(b.stats[a as usize].thp_fault_fail, 1);
        assert_eq!(b.stats[BOOT_SOURCE as usize].thp_fault_fail, 1);
        assert_eq!(b.stats[c as usize].thp_fault_fail, 0);
    }
}
