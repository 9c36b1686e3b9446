//! THP and mTHP faults (docs/model §11.2, §11.3): on a fragmented machine, a fault under
//! each defrag value does the work §11.2 predicts.

use crate::common;

use common::*;
use fraglab_mm::folio::FolioKind;
use fraglab_mm::huge_memory::{vma_thp_gfp_mask, ThpDefrag, ThpEnabled};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm, Wakeup};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// Every other 4 KiB page free: half of memory free, no free pageblock.
fn fragmented() -> Mm {
    let mut mm = dma32(16, 1, tun_kb(128));
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        all.push(id);
    }
    for (i, id) in all.into_iter().enumerate() {
        if i % 2 == 0 {
            mm.free_folio(0, id);
        }
    }
    mm.drain_all_pages();
    // The fill woke kswapd; with half of memory free the node is balanced at order 0, so the
    // thread naps and goes back to sleep without reclaiming.
    let cycles = mm.kswapd_until_sleep(0, 4);
    assert!(cycles.last().unwrap().asleep && cycles.iter().all(|c| c.reclaimed == 0));
    mm.take_wakeups();
    mm
}

#[test]
fn s11_2_gfp_table() {
    let light = Gfp::GFP_TRANSHUGE_LIGHT;
    assert_eq!(vma_thp_gfp_mask(ThpDefrag::Always, true), Gfp::GFP_TRANSHUGE);
    assert_eq!(
        vma_thp_gfp_mask(ThpDefrag::Always, false),
        Gfp::GFP_TRANSHUGE.union(Gfp::NORETRY)
    );
    assert_eq!(
        vma_thp_gfp_mask(ThpDefrag::Defer, true),
        light.union(Gfp::KSWAPD_RECLAIM)
    );
    assert_eq!(
        vma_thp_gfp_mask(ThpDefrag::DeferMadvise, true),
        light.union(Gfp::DIRECT_RECLAIM)
    );
    assert_eq!(
        vma_thp_gfp_mask(ThpDefrag::DeferMadvise, false),
        light.union(Gfp::KSWAPD_RECLAIM)
    );
    assert_eq!(vma_thp_gfp_mask(ThpDefrag::Madvise, true), Gfp::GFP_TRANSHUGE);
    assert_eq!(vma_thp_gfp_mask(ThpDefrag::Madvise, false), light);
    assert_eq!(vma_thp_gfp_mask(ThpDefrag::Never, true), light);
    // What the live kernel printed for a madvised fault's first attempt (trace.rs vectors).
    let first = vma_thp_gfp_mask(ThpDefrag::Madvise, true)
        .union(Gfp::THISNODE)
        .union(Gfp::NORETRY);
    assert_eq!(first.0, 0x3d24ca);
}

#[test]
fn s11_3_defrag_madvise_unmadvised_is_fast_path_only() {
    let mut mm = fragmented();
    let id = mm.do_anonymous_fault(0, false).unwrap();
    assert_eq!(
        mm.folios.get(id).order,
        0,
        "no THP for a non-madvised VMA under enabled=madvise"
    );
    assert_eq!(mm.stat(Stat::thp_fault_fallback), 0, "not even tried");
    mm.thp.enabled = ThpEnabled::Always;
    let id = mm.do_anonymous_fault(0, false).unwrap();
    assert_eq!(mm.folios.get(id).order, 0);
    assert_eq!(mm.stat(Stat::thp_fault_fallback), 1);
    assert_eq!(
        mm.stat(Stat::compact_stall),
        0,
        "defrag=madvise, !M: no direct compaction"
    );
    assert!(
        mm.take_wakeups()
            .iter()
            .all(|w| !matches!(w, Wakeup::Kswapd { nid: 0, order: 9, .. })),
        "nothing woken for the THP"
    );
    check(&mm);
}

#[test]
fn s11_3_madvised_fault_compacts_and_gets_a_thp() {
    let mut mm = fragmented();
    let id = mm.do_anonymous_fault(0, true).unwrap();
    assert_eq!(mm.folios.get(id).order, 9);
    assert_eq!(
        (mm.stat(Stat::thp_fault_alloc), mm.stat(Stat::thp_fault_fallback)),
        (1, 0)
    );
    assert_eq!(mm.mthp.anon_fault_alloc[9], 1);
    assert!(mm.stat(Stat::compact_stall) >= 1 && mm.stat(Stat::pgmigrate_success) > 0);
    assert!(
        mm.take_wakeups().is_empty(),
        "GFP_TRANSHUGE has no __GFP_KSWAPD_RECLAIM"
    );
    check(&mm);
}

#[test]
fn s11_3_defer_wakes_kswapd_and_does_no_direct_work() {
    let mut mm = fragmented();
    mm.thp.defrag = ThpDefrag::Defer;
    let id = mm.do_anonymous_fault(0, true).unwrap();
    assert_eq!(mm.folios.get(id).order, 0);
    assert_eq!(mm.stat(Stat::thp_fault_fallback), 1);
    assert_eq!(mm.stat(Stat::compact_stall), 0);
    assert_eq!(mm.stat(Stat::allocstall_movable), 0);
    assert!(mm
        .take_wakeups()
        .iter()
        .any(|w| matches!(w, Wakeup::Kswapd { nid: 0, order: 9, .. })));
    check(&mm);
}

#[test]
fn s11_3_mthp_ladder_falls_back_highest_first() {
    let mut mm = fragmented();
    mm.thp.defrag = ThpDefrag::Never;
    mm.thp.per_size[4] = ThpEnabled::Always; // 64 kB
    mm.thp.per_size[2] = ThpEnabled::Always; // 16 kB
    let id = mm.do_anonymous_fault(0, true).unwrap();
    // No order-4 chunk is free either (only order-0 holes and the fill's leftover), so the
    // ladder goes 9 → 4 → 2 → 0, counting a fallback at every size tried.
    let order = mm.folios.get(id).order as usize;
    assert_eq!(mm.mthp.anon_fault_fallback[9], 1);
    assert!(order == 0 || order == 2 || order == 4, "{order}");
    if order < 4 {
        assert_eq!(mm.mthp.anon_fault_fallback[4], 1);
    }
    if order < 2 {
        assert_eq!(mm.mthp.anon_fault_fallback[2], 1);
    }
    assert_eq!(mm.mthp.anon_fault_alloc[order], (order > 0) as u64);
    assert_eq!(
        mm.stat(Stat::thp_fault_alloc),
        0,
        "vmstat thp_fault_* are PMD-only"
    );
    check(&mm);
}
