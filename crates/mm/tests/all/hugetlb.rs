//! Runtime hugetlb allocation through `vm.nr_hugepages` (docs/model §28.1–§28.2):
//! `Mm::set_max_huge_pages`.

use crate::common;

use common::*;
use fraglab_mm::folio::FolioKind;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::Mm;

fn pool_tokens(mm: &Mm) -> Vec<u64> {
    mm.hugetlb.folios().map(|id| mm.folios.get(id).token()).collect()
}

#[test]
fn s28_1_grows_one_order9_page_per_iteration_with_the_counters() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let r = mm.set_max_huge_pages(0, 4);
    assert_eq!(
        (r.requested, r.before, r.pool, r.allocated, r.failed),
        (4, 0, 4, 4, false)
    );
    assert_eq!(mm.hugetlb.nr_huge_pages(), 4);
    assert_eq!(mm.hugetlb.max_huge_pages, 4);
    assert_eq!(mm.folios.census_of(FolioKind::Hugetlb)[9], 4);
    assert_eq!(mm.stat(Stat::htlb_buddy_alloc_success), 4);
    assert_eq!(mm.stat(Stat::htlb_buddy_alloc_fail), 0);
    // The pool's pages are not nr_hugetlb (charged, mapped hugetlb folios only).
    assert_eq!(mm.stat(Stat::nr_hugetlb), 0);
    // Growing again allocates only the difference.
    let r = mm.set_max_huge_pages(0, 6);
    assert_eq!((r.before, r.pool, r.allocated), (4, 6, 2));
    assert_eq!(mm.stat(Stat::htlb_buddy_alloc_success), 6);
    check(&mm);
}

#[test]
fn s28_1_stops_at_the_first_failure_and_the_write_does_not_fail() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let r = mm.set_max_huge_pages(0, 1000);
    assert!(r.failed);
    assert!(r.pool > 0 && r.pool < 16, "{r:?}");
    assert_eq!(r.pool, r.allocated);
    assert_eq!(mm.hugetlb.max_huge_pages, r.pool);
    // One failed attempt, then the loop ends.
    assert_eq!(mm.stat(Stat::htlb_buddy_alloc_fail), 1);
    assert_eq!(mm.stat(Stat::htlb_buddy_alloc_success), r.pool);
    check(&mm);
}

#[test]
fn s28_1_new_pages_join_the_pool_after_the_loop_oldest_at_the_head() {
    // prep_and_add_allocated_folios enqueues the loop's list (newest first) at the free list's
    // head one by one: the first page of a write ends at the head, ahead of older pool pages.
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.set_max_huge_pages(0, 2);
    let first = pool_tokens(&mm);
    assert!(first[0] < first[1], "{first:?}");
    mm.set_max_huge_pages(0, 4);
    let all = pool_tokens(&mm);
    assert_eq!(&all[2..], &first[..]);
    assert!(all[0] < all[1] && all[1] > first[1], "{all:?}");
}

#[test]
fn s28_1_shrinking_frees_the_heads_back_to_the_buddy_allocator() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let free0 = mm.zones[0].nr_free_pages();
    mm.set_max_huge_pages(0, 4);
    let toks = pool_tokens(&mm);
    let r = mm.set_max_huge_pages(0, 1);
    assert_eq!(
        (r.before, r.pool, r.allocated, r.freed, r.failed),
        (4, 1, 0, 3, false)
    );
    assert_eq!(pool_tokens(&mm), vec![toks[3]]);
    assert_eq!(mm.folios.census_of(FolioKind::Hugetlb)[9], 1);
    let r = mm.set_max_huge_pages(0, 0);
    assert_eq!((r.pool, r.freed), (0, 1));
    mm.drain_all_pages();
    assert_eq!(mm.zones[0].nr_free_pages(), free0);
    // Shrinking allocates nothing and counts nothing.
    assert_eq!(mm.stat(Stat::htlb_buddy_alloc_success), 4);
    assert_eq!(mm.stat(Stat::htlb_buddy_alloc_fail), 0);
    check(&mm);
}

#[test]
fn s28_2_retry_mayfail_compacts_and_never_oom_kills() {
    let (mut mm, _kept) = fragmented(tun_kb(128));
    let r = mm.set_max_huge_pages(0, 16);
    // No free order-9 chunk at the start: every page came from the slow path's compaction.
    assert!(r.allocated > 0, "{r:?}");
    assert!(
        r.failed,
        "half the memory is in use: the pool cannot reach 16: {r:?}"
    );
    assert!(mm.stat(Stat::compact_stall) > 0);
    assert_eq!(
        mm.stat(Stat::compact_success) + mm.stat(Stat::compact_fail),
        mm.stat(Stat::compact_stall)
    );
    assert!(mm.stat(Stat::pgmigrate_success) > 0);
    assert_eq!(mm.work.sum.oom_kills, 0);
    assert!(mm.outbox.oom_victims.is_empty());
    assert_eq!(mm.stat(Stat::htlb_buddy_alloc_fail), 1);
    check(&mm);
}

#[test]
fn s28_2_compaction_never_moves_pool_pages() {
    let (mut mm, _kept) = fragmented(tun_kb(128));
    mm.set_max_huge_pages(0, 3);
    let pfns: Vec<u32> = mm.hugetlb.folios().map(|id| mm.folios.get(id).pfn).collect();
    mm.compact_memory();
    let after: Vec<u32> = mm.hugetlb.folios().map(|id| mm.folios.get(id).pfn).collect();
    assert_eq!(pfns, after);
    assert!(mm
        .hugetlb
        .folios()
        .all(|id| mm.folio_is(id, mm.folios.get(id).token())));
    check(&mm);
}
