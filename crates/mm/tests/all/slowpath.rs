//! The allocation slow path (docs/model §7.4–§7.7, §8 D5): what each kind of request does.

use crate::common;

use common::*;
use fraglab_mm::folio::FolioKind;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm, Tunables};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

#[test]
fn s7_4_costly_noretry_compacts_async_once_and_never_reclaims() {
    // THP "always" for a non-madvised VMA: GFP_TRANSHUGE_LIGHT has no direct reclaim at all;
    // with __GFP_DIRECT_RECLAIM | __GFP_NORETRY it gets one async compaction then, on
    // failure, reclaim + one more async compaction.
    let (mut mm, _) = fragmented(tun_kb(128));
    let gfp = Gfp::GFP_TRANSHUGE.union(Gfp::NORETRY);
    let page = mm.alloc_pages(0, gfp, 9);
    let w = mm.work.last_alloc;
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
    let w = mm.work.last_alloc;
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
    assert_eq!(mm.work.last_alloc.reclaim_calls, 0, "fails before any reclaim");
    check(&mm);
}

#[test]
fn s7_4_madvised_thp_compacts_and_succeeds_on_a_fragmented_machine() {
    // GFP_TRANSHUGE (defrag=madvise with MADV_HUGEPAGE): async compaction, then reclaim, then
    // SYNC_LIGHT compaction; memory is half free, so it succeeds.
    let (mut mm, kept) = fragmented(tun_kb(128));
    let page = mm.alloc_pages(0, Gfp::GFP_TRANSHUGE, 9);
    assert!(page.is_some(), "{:?}", mm.work.last_alloc);
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
    assert!(!mm.work.last_alloc.nofragment_dropped);
    let p = mm.alloc_pages(0, Gfp::GFP_KERNEL, 0);
    assert!(p.is_some());
    assert!(mm.work.last_alloc.nofragment_dropped, "{:?}", mm.work.last_alloc);
    check(&mm);
}

/// Two tasks own all anonymous memory (no swap, no page cache): task 100 a quarter, task 200
/// the rest.
fn two_tasks() -> Mm {
    let mut mm = dma32(16, 1, tun_kb(128));
    let mut n = 0u64;
    loop {
        mm.cur.pid = if n.is_multiple_of(4) { 100 } else { 200 };
        if mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).is_none() {
            break;
        }
        n += 1;
    }
    mm.cur.pid = 300;
    mm
}

fn task_pages(mm: &Mm, pid: u32) -> u64 {
    mm.folios
        .live()
        .filter(|(_, f)| f.owner == pid)
        .map(|(_, f)| 1u64 << f.order)
        .sum()
}

#[test]
fn s7_4_13_oom_kills_the_largest_task_and_the_allocation_succeeds() {
    let mut mm = two_tasks();
    let (small, big) = (task_pages(&mm, 100), task_pages(&mm, 200));
    assert!(big > 2 * small && small > 0);
    let p = mm.alloc_pages(0, Gfp::GFP_KERNEL, 0);
    assert!(p.is_some());
    assert_eq!(mm.stat(Stat::oom_kill), 1);
    assert_eq!(mm.outbox.oom_victims, vec![200]);
    assert_eq!(mm.work.last_alloc.oom_kills, 1);
    assert_eq!(task_pages(&mm, 200), 0);
    assert_eq!(task_pages(&mm, 100), small, "only the victim's memory is freed");
    // Reclaim ran first and found nothing (allocstall counted before the kill).
    assert!(mm.stat(Stat::allocstall_normal) >= 1);
    check(&mm);
}

#[test]
fn s7_4_13_oom_is_skipped_for_mayfail_thisnode_costly_lowmem_and_nofs() {
    let cases = [
        ("RETRY_MAYFAIL", Gfp::GFP_KERNEL.union(Gfp::RETRY_MAYFAIL), 0),
        ("THISNODE", Gfp::GFP_KERNEL.union(Gfp::THISNODE), 0),
        ("costly order", Gfp::GFP_KERNEL, 4),
        ("below Normal", Gfp::GFP_KERNEL.union(Gfp::GFP_DMA32), 0),
        ("NOFS", Gfp::GFP_NOFS, 0),
    ];
    for (what, gfp, order) in cases {
        let mut mm = two_tasks();
        assert_eq!(mm.alloc_pages(0, gfp, order), None, "{what}");
        assert_eq!(mm.stat(Stat::oom_kill), 0, "{what}");
        assert!(mm.outbox.oom_victims.is_empty(), "{what}");
        assert_eq!(mm.work.last_alloc.oom_nofs_fail, what == "NOFS", "{what}");
        check(&mm);
    }
}

#[test]
fn s7_4_14_nofail_without_a_victim_empties_the_reserves_then_reports_failure() {
    // Only init's memory (task 1 is unkillable): nothing to kill.
    let mut mm = dma32(16, 1, tun_kb(2048));
    while mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).is_some() {}
    // The fill stopped near the min watermark. With no victim, out_of_memory fails but a
    // NOFAIL request is still given progress and the ALLOC_NO_WATERMARKS fallback
    // (`WARN_ON_ONCE_GFP` in __alloc_pages_may_oom): it empties the zone. Once nothing at all
    // is left the kernel loops forever; the model stops and flags the failure.
    let before = mm.zones[DMA32].nr_free_pages();
    assert!(before >= 300, "{before}");
    let mut served = 0;
    let nofail = Gfp::GFP_KERNEL.union(Gfp::NOFAIL);
    while mm.alloc_pages(0, nofail, 0).is_some() {
        assert!(!mm.work.last_alloc.nofail_failed);
        served += 1;
        assert!(served < 10_000);
    }
    assert!(served >= before, "served {served} of {before}");
    assert!(mm.work.last_alloc.nofail_failed);
    assert_eq!(mm.zones[DMA32].nr_free_pages(), 0);
    // A plain GFP_KERNEL request is not given the reserves.
    let mut mm2 = dma32(16, 1, tun_kb(2048));
    while mm2
        .alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false)
        .is_some()
    {}
    assert_eq!(mm2.alloc_pages(0, Gfp::GFP_KERNEL, 0), None);
    assert!(!mm2.work.last_alloc.nofail_failed);
    assert!(mm2.zones[DMA32].nr_free_pages() >= 300);
    assert_eq!(mm.stat(Stat::oom_kill), 0);
    check(&mm);
}
