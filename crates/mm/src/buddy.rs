//! Buddy primitives below both page_alloc and compaction: free-list operations with their
//! accounting, `expand`, `__free_one_page`, `split_large_buddy`, `move_freepages_block`
//! (docs/model §1.4–§1.7). Models the corresponding static functions of mm/page_alloc.c.

use crate::mmzone::*;
use crate::node::Mm;
use crate::types::*;
use crate::vmstat::Stat;

impl Mm {
    // ---- intrusive lists over the page arrays ------------------------------------------------

    /// `list_add` / `list_add_tail` on an intrusive list threaded through the pages' link words
    /// (`a` = next, `b` = prev, side by side in `PageArray::links`).
    #[inline]
    fn list_add(&mut self, head: ListRef, pfn: u32, tail: bool) {
        let l = self.list_mut(head);
        let (first, last) = (l.first, l.last);
        if tail {
            l.last = pfn;
            if last == NIL {
                l.first = pfn;
            }
            self.pages.links[pfn as usize] = [NIL, last];
            if last != NIL {
                self.pages.links[last as usize][0] = pfn;
            }
        } else {
            l.first = pfn;
            if first == NIL {
                l.last = pfn;
            }
            self.pages.links[pfn as usize] = [first, NIL];
            if first != NIL {
                self.pages.links[first as usize][1] = pfn;
            }
        }
    }

    /// `list_del`: unlinks `pfn` and clears its link words. Always inlined: it sits in the
    /// merge loop, the PCP drain and the refill, where a call costs more than its body.
    #[inline(always)]
    fn list_del(&mut self, head: ListRef, pfn: u32) {
        let [next, prev] = std::mem::replace(&mut self.pages.links[pfn as usize], [NIL, NIL]);
        if prev != NIL {
            self.pages.links[prev as usize][0] = next;
        }
        if next != NIL {
            self.pages.links[next as usize][1] = prev;
        }
        if prev == NIL || next == NIL {
            let l = self.list_mut(head);
            if prev == NIL {
                l.first = next;
            }
            if next == NIL {
                l.last = prev;
            }
        }
    }

    /// `list_rotate_to_front(&page->buddy_list, &free_list[order][mt])`: makes `pfn` the
    /// list's first element, the elements before it going to the tail in their order (the
    /// list's cyclic order is kept). Used by free page reporting (§32.2 item 4).
    pub(crate) fn free_list_rotate_to_front(&mut self, zi: usize, order: u32, mt: MigrateType, pfn: u32) {
        let prev = self.pages.links[pfn as usize][1];
        if prev == NIL {
            return;
        }
        let l = self.zones[zi].area.lists[order as usize][mt.idx()];
        debug_assert!(l.first != NIL && l.last != NIL);
        self.pages.links[l.last as usize][0] = l.first;
        self.pages.links[l.first as usize][1] = l.last;
        self.pages.links[prev as usize][0] = NIL;
        self.pages.links[pfn as usize][1] = NIL;
        let l = &mut self.zones[zi].area.lists[order as usize][mt.idx()];
        l.first = pfn;
        l.last = prev;
    }

    #[inline]
    fn list_mut(&mut self, r: ListRef) -> &mut ListHead {
        match r {
            ListRef::Free { zone, order, mt } => &mut self.zones[zone].area.lists[order][mt],
        }
    }

    /// Next element after `pfn` in whatever list it is on (NIL at the end).
    #[inline]
    pub fn list_next(&self, pfn: u32) -> u32 {
        self.pages.a(pfn)
    }

    /// Previous element (NIL at the front).
    #[inline]
    pub fn list_prev(&self, pfn: u32) -> u32 {
        self.pages.b(pfn)
    }

    // ---- free-list accounting (§1.4.3) ------------------------------------------------------

    /// `account_freepages`: NR_FREE_PAGES and nr_free_highatomic, not for Isolate lists.
    #[inline]
    pub(crate) fn account_freepages(&mut self, zi: usize, nr: i64, mt: MigrateType) {
        if mt == MigrateType::Isolate {
            return;
        }
        self.mod_zone_stat(zi, Stat::nr_free_pages, nr);
        if mt == MigrateType::HighAtomic {
            let z = &mut self.zones[zi];
            z.nr_free_highatomic = (z.nr_free_highatomic as i64 + nr) as u64;
        }
    }

    /// `__add_to_free_list`: puts a chunk head on free_list[order][mt] (head or tail), marks it
    /// PageBuddy with its order, and keeps nr_free and NR_FREE_PAGES_BLOCKS. The caller does
    /// `account_freepages`.
    #[inline]
    pub(crate) fn add_to_free_list(&mut self, zi: usize, pfn: u32, order: u32, mt: MigrateType, tail: bool) {
        debug_assert_eq!(
            self.block_mt(pfn),
            mt,
            "free chunk {pfn:#x} put on a list unlike its block"
        );
        self.pages.set(pfn, PageKind::Buddy, order);
        self.list_add(
            ListRef::Free {
                zone: zi,
                order: order as usize,
                mt: mt.idx(),
            },
            pfn,
            tail,
        );
        let area = &mut self.zones[zi].area;
        area.nr_free[order as usize] += 1;
        area.nr_by_type[order as usize][mt.idx()] += 1;
        if order >= PAGEBLOCK_ORDER && mt != MigrateType::Isolate {
            self.mod_zone_stat(zi, Stat::nr_free_pages_blocks, 1 << order);
        }
    }

    /// `__del_page_from_free_list`: takes a chunk off its list and clears PageBuddy (the page
    /// becomes a plain tail until the caller says what it is). No `account_freepages`.
    #[inline]
    pub(crate) fn del_from_free_list(&mut self, zi: usize, pfn: u32, order: u32, mt: MigrateType) {
        debug_assert!(self.pages.is_buddy_of_order(pfn, order));
        self.list_del(
            ListRef::Free {
                zone: zi,
                order: order as usize,
                mt: mt.idx(),
            },
            pfn,
        );
        self.pages.set(pfn, PageKind::Tail, 0);
        let area = &mut self.zones[zi].area;
        area.nr_free[order as usize] -= 1;
        area.nr_by_type[order as usize][mt.idx()] -= 1;
        if order >= PAGEBLOCK_ORDER && mt != MigrateType::Isolate {
            self.mod_zone_stat(zi, Stat::nr_free_pages_blocks, -(1 << order));
        }
    }

    /// `del_page_from_free_list`: delete plus `account_freepages`.
    #[inline]
    pub(crate) fn del_page_from_free_list(&mut self, zi: usize, pfn: u32, order: u32, mt: MigrateType) {
        self.del_from_free_list(zi, pfn, order, mt);
        self.account_freepages(zi, -(1i64 << order), mt);
    }

    /// `move_to_free_list`: moves a free chunk to the tail of another type's list.
    pub(crate) fn move_to_free_list(
        &mut self,
        zi: usize,
        pfn: u32,
        order: u32,
        old: MigrateType,
        new: MigrateType,
    ) {
        let o = order as usize;
        self.list_del(
            ListRef::Free {
                zone: zi,
                order: o,
                mt: old.idx(),
            },
            pfn,
        );
        self.list_add(
            ListRef::Free {
                zone: zi,
                order: o,
                mt: new.idx(),
            },
            pfn,
            true,
        );
        let area = &mut self.zones[zi].area;
        area.nr_by_type[o][old.idx()] -= 1;
        area.nr_by_type[o][new.idx()] += 1;
        self.account_freepages(zi, -(1i64 << order), old);
        self.account_freepages(zi, 1i64 << order, new);
        let old_iso = old == MigrateType::Isolate;
        if order >= PAGEBLOCK_ORDER && old_iso != (new == MigrateType::Isolate) {
            let nr = if old_iso { 1i64 << order } else { -(1i64 << order) };
            self.mod_zone_stat(zi, Stat::nr_free_pages_blocks, nr);
        }
    }

    // ---- split and merge ----------------------------------------------------------------------

    /// `expand` (§1.6): splits an order-`high` chunk at `pfn` down to `low`; the upper half of
    /// each split goes to the head of free_list[half order][mt]. Returns the pages put back.
    pub(crate) fn expand(&mut self, zi: usize, pfn: u32, low: u32, mut high: u32, mt: MigrateType) -> u64 {
        let mut added = 0;
        while high > low {
            high -= 1;
            let half = pfn + (1 << high);
            self.add_to_free_list(zi, half, high, mt, false);
            added += 1u64 << high;
        }
        added
    }

    /// `page_del_and_expand`: takes the chunk off its list, splits it, and accounts only the
    /// 2^low pages handed out.
    pub(crate) fn page_del_and_expand(&mut self, zi: usize, pfn: u32, low: u32, high: u32, mt: MigrateType) {
        self.del_from_free_list(zi, pfn, high, mt);
        let nr = (1u64 << high) - self.expand(zi, pfn, low, high, mt);
        self.account_freepages(zi, -(nr as i64), mt);
    }

    /// `find_buddy_page_pfn` + `page_is_buddy`: the buddy of `pfn` at `order` if it is a free
    /// chunk of exactly that order in the same zone.
    #[inline]
    fn find_buddy(&self, zi: usize, pfn: u32, order: u32) -> Option<u32> {
        let buddy = pfn ^ (1 << order);
        if buddy >= self.end_pfn || !self.pages.is_buddy_of_order(buddy, order) {
            return None;
        }
        if !self.zones[zi].spans(buddy) {
            return None;
        }
        Some(buddy)
    }

    /// `__free_one_page` (§1.5 steps 1–3): accounts the chunk, merges it with free buddies up
    /// to MAX_PAGE_ORDER (at order ≥ pageblock_order only across mergeable types, retyping the
    /// buddy's block), and inserts the result at the head, or at the tail for `to_tail`
    /// (FPI_TO_TAIL) or when a merge is likely (`buddy_merge_likely`, final order < 9).
    ///
    /// Then notifies free page reporting of the order reached (`page_reporting_notify_free`,
    /// §32.2 item 1; one comparison without a reporting device). A compactor's capture (§9.10)
    /// returns before both, as in the kernel. Page shuffling is off (the 6.18 default).
    #[inline]
    pub(crate) fn free_one_page_core(
        &mut self,
        zi: usize,
        pfn: u32,
        order: u32,
        mt: MigrateType,
        to_tail: bool,
    ) {
        if let Some(order) = self.free_one_page_inner(zi, pfn, order, mt, to_tail) {
            self.page_reporting_notify_free(order);
        }
    }

    /// `__free_one_page` without the reporting notification (FPI_SKIP_REPORT_NOTIFY, which
    /// free page reporting's own put-backs pass, §32.2 item 7): returns the order the chunk
    /// merged to, or None if a compactor captured it.
    pub(crate) fn free_one_page_inner(
        &mut self,
        zi: usize,
        mut pfn: u32,
        mut order: u32,
        mt: MigrateType,
        to_tail: bool,
    ) -> Option<u32> {
        debug_assert_eq!(
            pfn & ((1 << order) - 1),
            0,
            "unaligned free of {pfn:#x} order {order}"
        );
        self.pages.set(pfn, PageKind::Tail, 0);
        self.account_freepages(zi, 1i64 << order, mt);
        // Host-cache hint: the state bytes of the buddies at orders 6..9 lie on other cache
        // lines than `pfn`'s; the merge loop below reads them one after the other.
        for o in order.max(6)..PAGEBLOCK_ORDER.min(MAX_PAGE_ORDER) + 1 {
            if let Some(st) = self
                .pages
                .state
                .get(((pfn & !((1 << o) - 1)) ^ (1 << o)) as usize)
            {
                crate::mmzone::prefetch(st);
            }
        }
        let mut last_buddy = None;
        while order < MAX_PAGE_ORDER {
            if self.compact.capc.is_some() && self.compaction_capture(zi, order, mt) {
                // The direct compactor takes the page (§9.10).
                self.account_freepages(zi, -(1i64 << order), mt);
                self.pages.set(pfn, PageKind::Allocated, order);
                self.pages.set_a(pfn, NIL);
                let capc = self.compact.capc.as_mut().expect("capture control");
                capc.page = Some(pfn);
                let want = capc.migratetype;
                self.pages.set_b(pfn, want as u32);
                if mt != want && self.trace_on(crate::node::trace_kind::MM_PAGE_ALLOC_EXTFRAG) {
                    let ev = crate::trace::TraceEvent::MmPageAllocExtfrag {
                        pfn,
                        alloc_order: order as i32,
                        fallback_order: order as i32,
                        alloc_migratetype: want as i32,
                        fallback_migratetype: mt as i32,
                        change_ownership: self.block_mt(pfn) == want,
                    };
                    self.emit(0, ev);
                }
                return None;
            }
            let buddy_pfn = pfn ^ (1 << order);
            last_buddy = Some(buddy_pfn);
            let Some(buddy) = self.find_buddy(zi, pfn, order) else {
                break;
            };
            let mut buddy_mt = mt;
            if order >= PAGEBLOCK_ORDER {
                buddy_mt = self.block_mt(buddy);
                if mt != buddy_mt && (!mt.is_mergeable() || !buddy_mt.is_mergeable()) {
                    break;
                }
            }
            // Host-cache hint, one step ahead: the next step's buddy (state byte and link
            // words) starts loading while this buddy's list_del waits on its neighbours.
            if order + 1 < MAX_PAGE_ORDER {
                self.pages.prefetch((pfn & buddy) ^ (2 << order));
            }
            self.del_from_free_list(zi, buddy, order, buddy_mt);
            if buddy_mt != mt {
                // Match the buddy's block type, so later splits use the right lists (§1.5.2d).
                self.set_block_mt(buddy, mt);
            }
            pfn &= buddy;
            order += 1;
        }
        let tail = to_tail || self.buddy_merge_likely(zi, pfn, last_buddy, order);
        self.add_to_free_list(zi, pfn, order, mt, tail);
        Some(order)
    }

    /// `buddy_merge_likely` (§1.4.4c): below order MAX_PAGE_ORDER−1, is the buddy of the
    /// order+1 chunk containing this one free at order+1?
    fn buddy_merge_likely(&self, zi: usize, pfn: u32, buddy_pfn: Option<u32>, order: u32) -> bool {
        if order >= MAX_PAGE_ORDER - 1 {
            return false;
        }
        let Some(buddy_pfn) = buddy_pfn else { return false };
        let higher = buddy_pfn & pfn;
        self.find_buddy(zi, higher, order + 1).is_some()
    }

    /// `split_large_buddy` (§1.5.4): frees a chunk larger than a pageblock as pageblock-sized
    /// pieces, each with its own block's migratetype.
    pub(crate) fn split_large_buddy(&mut self, zi: usize, pfn: u32, order: u32, to_tail: bool) {
        let end = pfn + (1 << order);
        let step = order.min(PAGEBLOCK_ORDER);
        let mut p = pfn;
        while p < end {
            let mt = self.block_mt(p);
            self.pages.set(p, PageKind::Tail, 0);
            self.free_one_page_core(zi, p, step, mt, to_tail);
            p += 1 << step;
        }
    }

    // ---- pageblock moves (§1.7) ------------------------------------------------------------------

    /// `prep_move_freepages_block`: the block of `pfn`, if it lies wholly in the zone; with
    /// `count`, also the free pages (buddy chunks) and the "movable" pages (on the LRU; counted
    /// per 4 KiB page, tails reading their head's flag) in it (§6.3c).
    pub(crate) fn prep_move_freepages_block(
        &self,
        zi: usize,
        pfn: u32,
        count: bool,
    ) -> Option<(u32, u64, u64)> {
        let start = pfn & !(PAGEBLOCK_NR_PAGES - 1);
        let end = start + PAGEBLOCK_NR_PAGES;
        let z = &self.zones[zi];
        if !z.spans(start) || !z.spans(end - 1) {
            return None;
        }
        if !count {
            return Some((start, 0, 0));
        }
        let (mut free, mut movable) = (0u64, 0u64);
        let mut p = start;
        // A block may begin inside a chunk larger than a block (order 10): its tail pages read
        // the head's state.
        if self.pages.kind(p) == PageKind::Tail {
            if let Some((head, order)) = self.enclosing_chunk(p) {
                let cend = head + (1 << order);
                if self.pages.kind(head) == PageKind::Allocated && self.pages.flag(head, PG_LRU) {
                    movable += (cend.min(end) - p) as u64;
                }
                p = cend.min(end);
            }
        }
        while p < end {
            match self.pages.kind(p) {
                PageKind::Buddy => {
                    let nr = 1u32 << self.pages.order(p);
                    free += nr as u64;
                    p += nr;
                }
                PageKind::Allocated => {
                    let nr = 1u32 << self.pages.order(p);
                    if self.pages.flag(p, PG_LRU) {
                        movable += nr.min(end - p) as u64;
                    }
                    p += nr;
                }
                PageKind::Pcp => p += 1 << self.pages.order(p),
                _ => p += 1,
            }
        }
        Some((start, free, movable))
    }

    /// The head and order of the chunk (free, PCP or allocated) that covers `pfn`, if any.
    pub fn enclosing_chunk(&self, pfn: u32) -> Option<(u32, u32)> {
        for order in 0..=MAX_PAGE_ORDER {
            let head = pfn & !((1u32 << order) - 1);
            match self.pages.kind(head) {
                PageKind::Buddy | PageKind::Pcp | PageKind::Allocated | PageKind::Isolated => {
                    let o = self.pages.order(head);
                    return (head + (1 << o) > pfn).then_some((head, o));
                }
                PageKind::Hole | PageKind::Reserved => return None,
                PageKind::Tail => {}
            }
        }
        None
    }

    /// `__move_freepages_block`: moves every free chunk of the block at `start` from `old`'s to
    /// `new`'s lists (to the tail). Returns the pages moved. The caller retypes the block.
    pub(crate) fn move_freepages_block_from(
        &mut self,
        zi: usize,
        start: u32,
        old: MigrateType,
        new: MigrateType,
    ) -> u64 {
        let end = start + PAGEBLOCK_NR_PAGES;
        let mut p = start;
        let mut moved = 0;
        while p < end {
            if !self.pages.is_buddy(p) {
                p += 1;
                continue;
            }
            let order = self.pages.order(p);
            self.move_to_free_list(zi, p, order, old, new);
            p += 1 << order;
            moved += 1u64 << order;
        }
        moved
    }

    /// `move_freepages_block`: the whole block of `pfn` to `new`, and retype it. None if the
    /// block straddles the zone boundary.
    pub(crate) fn move_freepages_block(
        &mut self,
        zi: usize,
        pfn: u32,
        old: MigrateType,
        new: MigrateType,
    ) -> Option<u64> {
        let (start, _, _) = self.prep_move_freepages_block(zi, pfn, false)?;
        let moved = self.move_freepages_block_from(zi, start, old, new);
        self.set_block_mt(start, new);
        Some(moved)
    }

    /// Retypes the pageblock of `pfn` to `new` with its free pages, for a policy that moves
    /// block types on purpose (`policy.rs`): `move_freepages_block` (§1.7). When the block lies
    /// in a free chunk larger than a block, the whole chunk is retyped, every block of it, as a
    /// claim of such a chunk does (`try_to_claim_block` with `change_pageblock_range`,
    /// §6.3.2c): split into blocks of different types, its halves would merge again when freed
    /// and `__free_one_page` would give both the freed half's type (§1.5.3; only an Isolate
    /// block, which is not mergeable, stays apart). Returns the free pages that moved (the
    /// caller reads `block_mt` to see which blocks changed); `None` if the block straddles the
    /// zone's boundary.
    pub fn set_pageblock_type(&mut self, zi: usize, pfn: u32, new: MigrateType) -> Option<u64> {
        let (start, _, _) = self.prep_move_freepages_block(zi, pfn, false)?;
        if let Some((head, order)) = self.enclosing_chunk(start) {
            if order > PAGEBLOCK_ORDER && self.pages.kind(head) == PageKind::Buddy {
                let old = self.block_mt(head);
                if old == new {
                    return Some(0);
                }
                self.del_page_from_free_list(zi, head, order, old);
                self.change_pageblock_range(head, order, new);
                self.add_to_free_list(zi, head, order, new, false);
                self.account_freepages(zi, 1i64 << order, new);
                return Some(1u64 << order);
            }
        }
        let old = self.block_mt(start);
        if old == new {
            return Some(0);
        }
        self.move_freepages_block(zi, start, old, new)
    }

    /// Whether every page of the pageblock of `pfn` is free in the buddy allocator (not on a
    /// PCP list, not isolated).
    pub fn pageblock_free(&self, pfn: u32) -> bool {
        let start = pfn & !(PAGEBLOCK_NR_PAGES - 1);
        match self.enclosing_chunk(start) {
            Some((head, order)) => order >= PAGEBLOCK_ORDER && self.pages.kind(head) == PageKind::Buddy,
            None => false,
        }
    }

    /// `change_pageblock_range`: retypes the 2^(order−9) blocks from `pfn`.
    pub(crate) fn change_pageblock_range(&mut self, pfn: u32, order: u32, mt: MigrateType) {
        let n = 1u32 << (order - PAGEBLOCK_ORDER);
        for i in 0..n {
            self.set_block_mt(pfn + i * PAGEBLOCK_NR_PAGES, mt);
        }
    }

    // ---- PCP lists ----------------------------------------------------------------------------

    /// Puts a chunk head on PCP list `pindex` (head or tail), marked Pcp with its order. Its
    /// link words are cleared: a PCP list does not use them (`PcpList`), and a page that
    /// leaves the list as a tail of a merged chunk keeps them clear.
    #[inline]
    pub(crate) fn pcp_list_add(
        &mut self,
        zi: usize,
        cpu: usize,
        pindex: usize,
        pfn: u32,
        order: u32,
        tail: bool,
    ) {
        self.pages.set(pfn, PageKind::Pcp, order);
        self.pages.set_ab(pfn, NIL, NIL);
        self.zones[zi].pcp[cpu].lists[pindex].push(pfn, tail);
    }

    /// Takes the chunk head `pfn`, at the head or the tail of PCP list `pindex`, off it (a
    /// plain tail page until the caller says what it is).
    #[inline]
    pub(crate) fn pcp_list_del(&mut self, zi: usize, cpu: usize, pindex: usize, pfn: u32) {
        self.zones[zi].pcp[cpu].lists[pindex].remove_end(pfn);
        self.pages.set(pfn, PageKind::Tail, 0);
    }
}

/// Which free list a chunk head is linked on.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
enum ListRef {
    Free { zone: usize, order: usize, mt: usize },
}
