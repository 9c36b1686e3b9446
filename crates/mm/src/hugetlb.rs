//! The default-size (2 MiB) hugetlb pool and its runtime resizing through `vm.nr_hugepages`
//! (docs/model §28). Models mm/hugetlb.c `set_max_huge_pages`, `alloc_pool_huge_folio`,
//! `alloc_buddy_hugetlb_folio`, `prep_and_add_allocated_folios`, `remove_pool_hugetlb_folio`
//! and `update_and_free_pages_bulk`, with include/linux/hugetlb.h `htlb_alloc_mask`.
//!
//! Each pool page is a folio of kind [`FolioKind::Hugetlb`] at pageblock order, allocated
//! through the real allocator (`alloc_pages` with its slow path, §28.2); compaction never takes
//! it as a migration source (§28.2 item 7).
//!
//! Simplified: the pool grows on one node, the caller's (node 0 at boot), with __GFP_THISNODE;
//! the kernel goes round-robin over the allowed nodes (`next_nid_to_alloc`, the
//! `node_alloc_noretry` mask; on one node the first failure ends the write, §28.1 item 4); no surplus pages,
//! no reservations and no hugetlbfs mappings, so every pool page is free (`HugePages_Free` =
//! `HugePages_Total`) and a shrink always reaches its target; no pending signals; gigantic
//! hstates are not modelled.

use std::collections::VecDeque;

use crate::folio::{FolioId, FolioKind};
use crate::gfp::Gfp;
use crate::node::Mm;
use crate::types::PAGEBLOCK_ORDER;
use crate::vmstat::Stat;

/// The order of the pool's pages (`huge_page_order` of the default 2 MiB hstate).
pub const HUGETLB_ORDER: u32 = PAGEBLOCK_ORDER;

/// `alloc_pool_huge_folio`'s gfp for 2 MiB pages on the first try of a node (§28.1 item 4):
/// `htlb_alloc_mask` (GFP_HIGHUSER_MOVABLE | __GFP_COMP | __GFP_NOWARN, movable because 2 MiB
/// hugetlb pages can migrate) | __GFP_THISNODE, plus __GFP_RETRY_MAYFAIL from
/// `alloc_buddy_hugetlb_folio` (try hard: the node has not failed yet in this write).
pub const HTLB_POOL_GFP: Gfp = Gfp::GFP_HIGHUSER_MOVABLE
    .union(Gfp::COMP)
    .union(Gfp::NOWARN)
    .union(Gfp::THISNODE)
    .union(Gfp::RETRY_MAYFAIL);

/// The default hstate's pool (`struct hstate`'s free list and counts, one node).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct Hstate {
    /// `hugepage_freelists[0]`, head first: `enqueue_hugetlb_folio` puts a page at the head and
    /// `remove_pool_hugetlb_folio` takes the head.
    free: VecDeque<FolioId>,
    /// `max_huge_pages`: the persistent count the last write reached.
    pub max_huge_pages: u64,
}

impl Hstate {
    /// `nr_huge_pages` (HugePages_Total; no surplus pages, so also the persistent count).
    pub fn nr_huge_pages(&self) -> u64 {
        self.free.len() as u64
    }

    /// The pool's folios, head of the free list first.
    pub fn folios(&self) -> impl Iterator<Item = FolioId> + '_ {
        self.free.iter().copied()
    }

    /// Adds a restored page at the tail of the free list (`Mm::from_restore`): the pool grows
    /// by one persistent page.
    pub(crate) fn restore_free(&mut self, id: FolioId) {
        self.free.push_back(id);
        self.max_huge_pages += 1;
    }
}

/// What one write of `vm.nr_hugepages` did.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolResize {
    /// The count written.
    pub requested: u64,
    /// HugePages_Total before the write.
    pub before: u64,
    /// HugePages_Total after it (what reading the sysctl back shows).
    pub pool: u64,
    /// Pages allocated from the buddy allocator (`htlb_buddy_alloc_success` of this write).
    pub allocated: u64,
    /// An allocation failed and ended the growth (`htlb_buddy_alloc_fail` of this write).
    pub failed: bool,
    /// Pages given back to the buddy allocator.
    pub freed: u64,
}

impl Mm {
    /// `echo count > /proc/sys/vm/nr_hugepages` (`set_max_huge_pages` with every node allowed,
    /// §28.1) on `cpu`:
    ///
    /// * growing: while count > pool + allocated, one page per iteration through
    ///   `alloc_pool_huge_folio` with [`HTLB_POOL_GFP`] at order 9 — the page allocator's fast
    ///   and slow paths (§28.2: kswapd wake, async then SYNC_LIGHT compaction, direct reclaim,
    ///   no OOM kill); `htlb_buddy_alloc_success` or `htlb_buddy_alloc_fail` per attempt; the
    ///   loop stops at the first failure; the pages allocated join the pool only after the loop
    ///   (`prep_and_add_allocated_folios`), each enqueued at the head of the free list in the
    ///   reverse of the order the loop collected them, so the first page allocated ends at the
    ///   head;
    /// * shrinking: while count < pool, `remove_pool_hugetlb_folio` takes the free list's head;
    ///   the pages go back to the buddy allocator after the removal loop, in the order removed
    ///   (`update_and_free_pages_bulk`).
    ///
    /// The write never fails; the returned [`PoolResize::pool`] is what reading back shows, and
    /// `max_huge_pages` becomes it.
    pub fn set_max_huge_pages(&mut self, cpu: u32, count: u64) -> PoolResize {
        let before = self.hugetlb.nr_huge_pages();
        let mut r = PoolResize {
            requested: count,
            before,
            ..Default::default()
        };
        let mut page_list = Vec::new();
        while count > before + page_list.len() as u64 {
            match self.alloc_buddy_hugetlb_folio(cpu) {
                Some(id) => page_list.push(id),
                None => {
                    r.failed = true;
                    break;
                }
            }
        }
        r.allocated = page_list.len() as u64;
        // prep_and_add_allocated_folios walks page_list (built with list_add, newest first) and
        // enqueues each page at the head: the oldest page of the batch ends at the head.
        for &id in page_list.iter().rev() {
            self.hugetlb.free.push_front(id);
        }
        let mut removed = Vec::new();
        while count < self.hugetlb.nr_huge_pages() {
            match self.hugetlb.free.pop_front() {
                Some(id) => removed.push(id),
                None => break,
            }
        }
        r.freed = removed.len() as u64;
        for id in removed {
            self.free_folio(cpu, id);
        }
        r.pool = self.hugetlb.nr_huge_pages();
        self.hugetlb.max_huge_pages = r.pool;
        r
    }

    /// `alloc_buddy_hugetlb_folio` for `alloc_pool_huge_folio` on the only node: one order-9
    /// compound page with [`HTLB_POOL_GFP`], counted in `htlb_buddy_alloc_success` /
    /// `htlb_buddy_alloc_fail`.
    fn alloc_buddy_hugetlb_folio(&mut self, cpu: u32) -> Option<FolioId> {
        let id = self.alloc_folio(cpu, HTLB_POOL_GFP, HUGETLB_ORDER, FolioKind::Hugetlb, false);
        self.count(
            if id.is_some() {
                Stat::htlb_buddy_alloc_success
            } else {
                Stat::htlb_buddy_alloc_fail
            },
            1,
        );
        id
    }
}
