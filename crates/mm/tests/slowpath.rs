//! The allocation slow path (kernel-model.md §7.4–§7.7, §8 D5): what each kind of request does.

mod common;

use common::*;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm, Tunables};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// Anon order-0 folios everywhere, every other one freed: plenty of free memory, no free
/// order-9 chunk (fragmentation index near 1000).
fn fragmented(tun: Tunables) -> (Mm, Vec<FolioId>) {
    let mut mm = dma32(16, 1, tun);
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        all.push(id);
    }
    let mut kept = Vec::new();
    for (i, id) in all.into_iter().enumerate() {
        if i % 2 == 0 {
            mm.free_folio(0, id);
        } else {
            kept.push(id);
        }
    }
    mm.drain_all_pages();
    (mm, kept)
}

#[test]
fn s7_4_costly_noretry_compacts_async_once_and_never_reclaims() {
    // THP "always" for a non-madvised VMA: GFP_TRANSHUGE_LIGHT has no direct reclaim at all;
    // with __GFP_DIRECT_RECLAIM | __GFP_NORETRY it gets one async compaction then, on
    // failure, reclaim + one more async compaction.
    let (mut mm, _) = fragmented(tun_kb(128));
    let gfp = Gfp::GFP_TRANSHUGE.union(Gfp::NORETRY);
    let page = mm.alloc_pages(0, gfp, 9);
    let w = mm.last_alloc;
    assert!(w.slowpath);
    assert!(w.compact_stalls >= 1, "{w:?}");
    assert_eq!(mm.stat(Stat::compact_stall), w.compact_stalls as u64);
    assert_eq!(
        mm.stat(Stat::compact_success) + mm.stat(Stat::compact_fail),
        mm.stat(Stat::compact_stall)
    );
    if page.is_some() {
        assert_eq!(mm.stat(Stat::compact_success), 1);
    }
    assert!(w.reclaim_calls <= 1, "NORETRY: at most one reclaim pass: {w:?}");
    check(&mm);
}

#[test]
fn s7_4_no_direct_reclaim_never_compacts_or_reclaims() {
    let (mut mm, _) = fragmented(tun_kb(128));
    assert_eq!(mm.alloc_pages(0, Gfp::GFP_TRANSHUGE_LIGHT, 9), None);
    let w = mm.last_alloc;
    assert_eq!((w.compact_stalls, w.reclaim_calls), (0, 0));
    assert_eq!(mm.stat(Stat::compact_stall), 0);
    assert_eq!(mm.stat(Stat::allocstall_movable), 0);
    check(&mm);
}

#[test]
fn s7_5_skipped_compaction_counts_nothing() {
    // No free memory to compact with: every zone SKIPPED, so no compact_stall, and a costly
    // NORETRY request fails at step 4 without reclaim.
    let mut mm = dma32(8, 1, tun_kb(128));
    while mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).is_some() {}
    let gfp = Gfp::GFP_TRANSHUGE.union(Gfp::NORETRY);
    assert_eq!(mm.alloc_pages(0, gfp, 9), None);
    assert_eq!(mm.stat(Stat::compact_stall), 0);
    assert_eq!(mm.last_alloc.reclaim_calls, 0, "fails before any reclaim");
    check(&mm);
}

#[test]
fn s7_4_madvised_thp_compacts_and_succeeds_on_a_fragmented_machine() {
    // GFP_TRANSHUGE (defrag=madvise with MADV_HUGEPAGE): async compaction, then reclaim, then
    // SYNC_LIGHT compaction; memory is half free, so it succeeds.
    let (mut mm, kept) = fragmented(tun_kb(128));
    let page = mm.alloc_pages(0, Gfp::GFP_TRANSHUGE, 9);
    assert!(page.is_some(), "{:?}", mm.last_alloc);
    assert!(mm.stat(Stat::compact_success) >= 1);
    assert!(mm.stat(Stat::pgmigrate_success) > 0);
    for id in kept {
        assert_eq!(mm.folio_at(mm.folios.get(id).pfn), Some(id));
    }
    check(&mm);
}

#[test]
fn s8_d5_defrag_mode_drops_nofragment_only_at_the_end() {
    // Memory is full except for order-0 holes in MOVABLE blocks. An UNMOVABLE order-0 request
    // under defrag_mode may not fall back into a partial foreign block while NOFRAGMENT is set;
    // a blocking request gets it only after reclaim and compaction fail (D5). A non-blocking
    // one never does (§7.4 consequences).
    let tun = Tunables {
        defrag_mode: true,
        ..tun_kb(128)
    };
    let (mut mm, _) = fragmented(tun);
    assert_eq!(
        mm.alloc_pages(0, Gfp::GFP_NOWAIT, 0),
        None,
        "non-blocking: no fallback"
    );
    assert!(!mm.last_alloc.nofragment_dropped);
    let p = mm.alloc_pages(0, Gfp::GFP_KERNEL, 0);
    assert!(p.is_some());
    assert!(mm.last_alloc.nofragment_dropped, "{:?}", mm.last_alloc);
    check(&mm);
}
