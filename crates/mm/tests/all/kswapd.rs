//! kswapd (docs/model §10.1–§10.2) and its hand-off to kcompactd (§9.11.3), with the
//! defrag_mode stages of §8 (D6, D7).

use crate::common;

use common::*;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::kswapd::KswapdPhase;
use fraglab_mm::mmzone::{WMARK_HIGH, WMARK_LOW};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{DefragStage, Gfp, Mm, Tunables, Wakeup, ZoneType};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// A 16-block DMA32 machine filled with clean order-0 page cache (without direct reclaim), its
/// kswapd woken by the fill and not yet run.
fn full_of_page_cache(tun: Tunables) -> (Mm, Vec<FolioId>) {
    let mut mm = dma32(16, 1, tun);
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false) {
        ids.push(id);
    }
    (mm, ids)
}

fn free(mm: &Mm) -> i64 {
    mm.zones[DMA32].nr_free_pages()
}

#[test]
fn s10_1_wakeup_records_and_wakes_only_a_waiting_thread() {
    let (mut mm, _) = full_of_page_cache(tun_kb(512));
    // The fill woke the thread once; later wakes found it runnable and only raised the request.
    let w = mm.take_wakeups();
    assert_eq!(
        w.iter()
            .filter(|w| matches!(w, Wakeup::Kswapd { nid: 0, .. }))
            .count(),
        1,
        "{w:?}"
    );
    assert_eq!(mm.reclaim.kswapd[0].phase, KswapdPhase::Running);
    mm.wakeup_kswapd(DMA32, Gfp::GFP_KERNEL, 3, ZoneType::Dma32);
    mm.wakeup_kswapd(DMA32, Gfp::GFP_KERNEL, 1, ZoneType::Normal);
    assert!(mm.take_wakeups().is_empty());
    assert_eq!(mm.reclaim.kswapd[0].order, 3, "the highest order is kept");
    // GFP_HIGHUSER_MOVABLE's zone is Movable: the highest index asked for is kept.
    assert_eq!(
        mm.reclaim.kswapd[0].highest_zoneidx,
        Some(ZoneType::Movable.idx())
    );
    check(&mm);
}

#[test]
fn s10_2_balance_pgdat_reclaims_to_the_high_watermark_then_sleeps() {
    let (mut mm, _) = full_of_page_cache(tun_kb(512));
    let high = mm.zones[DMA32].wmark_pages(WMARK_HIGH) as i64;
    assert!(free(&mm) < mm.zones[DMA32].wmark_pages(WMARK_LOW) as i64);
    let cycles = mm.kswapd_until_sleep(0, 8);
    let first = cycles[0];
    assert!(first.balanced_run && first.reclaimed > 0 && first.napping);
    assert!(cycles.last().unwrap().asleep);
    assert_eq!(mm.reclaim.kswapd[0].phase, KswapdPhase::Sleeping);
    assert!(free(&mm) > high, "free {} high {high}", free(&mm));
    // kswapd_shrink_node asks for max(high, 32) per zone and stops at balance: it does not
    // reclaim the whole page cache.
    assert!(first.reclaimed <= 2 * high as u64 + 64, "{first:?}");
    assert_eq!(mm.stat(Stat::pageoutrun), 1);
    assert_eq!(mm.stat(Stat::pgsteal_kswapd), first.reclaimed);
    assert_eq!(mm.stat(Stat::pgsteal_direct), 0);
    assert_eq!(mm.reclaim.kswapd_failures[0], 0);
    // Balanced and asleep: a new order-0 wake does not wake it (§10.1.3), and neither emits
    // anything for kcompactd at order 0.
    mm.take_wakeups();
    mm.wakeup_kswapd(DMA32, Gfp::GFP_KERNEL, 0, ZoneType::Dma32);
    assert!(mm.take_wakeups().is_empty());
    assert_eq!(mm.reclaim.kswapd[0].phase, KswapdPhase::Sleeping);
    check(&mm);
}

#[test]
fn s10_2_high_order_reclaim_drops_to_order_0_after_compact_gap_and_hands_off_to_kcompactd() {
    // Page cache interleaved with unreclaimable anon: reclaim frees only order-0 holes, so no
    // amount of it balances the node at order 9.
    let mut mm = dma32(16, 1, tun_kb(512));
    fill_anon_and_file(&mut mm);
    mm.kswapd_until_sleep(0, 8);
    mm.take_wakeups();
    assert!(!mm.pgdat_balanced(0, 9, DMA32) && mm.pgdat_balanced(0, 0, DMA32));
    mm.wakeup_kswapd(DMA32, Gfp::GFP_KERNEL, 9, ZoneType::Dma32);
    assert_eq!(mm.reclaim.kswapd[0].phase, KswapdPhase::Running);
    let c = mm.kswapd_run(0);
    assert_eq!(c.alloc_order, 9);
    assert_eq!(c.reclaim_order, 0, "order dropped once 2<<9 pages were reclaimed");
    assert!(c.reclaimed >= 1024, "{c:?}");
    // It naps for order 0 and wakes kcompactd for the allocation's order 9.
    assert!(c.napping);
    assert_eq!(mm.compact.kcompactd[0].max_order, 9);
    assert!(mm.take_wakeups().contains(&Wakeup::Kcompactd {
        nid: 0,
        order: 9,
        highest_zoneidx: DMA32
    }));
    check(&mm);
}

#[test]
fn s10_1_balanced_node_wakes_kcompactd_for_non_reclaiming_gfp() {
    // A machine with free memory but no order-9 chunk is balanced at order 0 and not at 9.
    let (mut mm, ids) = full_of_page_cache(tun_kb(512));
    mm.kswapd_until_sleep(0, 8);
    for id in ids.iter().step_by(2) {
        if mm.folios.folios[*id as usize].live() {
            mm.free_folio(0, *id);
        }
    }
    mm.drain_all_pages();
    mm.take_wakeups();
    // An order-0 request on a balanced node: no kswapd, and kcompactd ignores order 0.
    mm.wakeup_kswapd(DMA32, NO_RECLAIM, 0, ZoneType::Dma32);
    assert!(mm.take_wakeups().is_empty());
    // kswapd_failures at MAX_RECLAIM_RETRIES: the node is hopeless — a non-reclaiming order-9
    // request wakes kcompactd instead; a reclaiming one wakes nobody.
    mm.reclaim.kswapd_failures[0] = 16;
    mm.wakeup_kswapd(DMA32, Gfp::GFP_TRANSHUGE, 9, ZoneType::Dma32);
    assert!(mm.take_wakeups().is_empty());
    assert_eq!(mm.reclaim.kswapd[0].phase, KswapdPhase::Sleeping);
    let light = Gfp::GFP_TRANSHUGE_LIGHT.union(Gfp::KSWAPD_RECLAIM);
    mm.wakeup_kswapd(DMA32, light, 9, ZoneType::Dma32);
    assert_eq!(
        mm.take_wakeups(),
        vec![Wakeup::Kcompactd {
            nid: 0,
            order: 9,
            highest_zoneidx: DMA32
        }]
    );
    check(&mm);
}

#[test]
fn s10_2_nothing_reclaimable_counts_failures_until_hopeless() {
    // Anonymous memory without swap cannot be reclaimed.
    let mut mm = dma32(16, 1, tun_kb(512));
    while mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).is_some() {}
    assert_eq!(mm.reclaim.kswapd[0].phase, KswapdPhase::Running);
    let cycles = mm.kswapd_until_sleep(0, 64);
    let runs = cycles.iter().filter(|c| c.balanced_run).count();
    assert_eq!(
        runs, 16,
        "one failure per balance_pgdat until MAX_RECLAIM_RETRIES"
    );
    assert_eq!(mm.reclaim.kswapd_failures[0], 16);
    assert_eq!(
        mm.reclaim.kswapd[0].phase,
        KswapdPhase::Sleeping,
        "hopeless nodes let kswapd sleep"
    );
    // Every run but the last could not even nap: high_wmark_hit_quickly each time.
    assert_eq!(mm.stat(Stat::kswapd_high_wmark_hit_quickly), 15);
    assert_eq!(mm.stat(Stat::pageoutrun), 16);
    check(&mm);
}

#[test]
fn s10_2_3_a_wake_during_the_nap_cuts_it_short() {
    let (mut mm, _) = full_of_page_cache(tun_kb(512));
    let c = mm.kswapd_run(0);
    assert!(c.napping);
    mm.take_wakeups();
    // Something allocates the node below low again during the nap.
    // The allocation that finds the node below low takes the slow path and wakes kswapd.
    for _ in 0..10_000 {
        mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).unwrap();
        if !mm.outbox.wakeups.is_empty() {
            break;
        }
    }
    assert!(mm
        .take_wakeups()
        .iter()
        .any(|w| matches!(w, Wakeup::Kswapd { nid: 0, .. })));
    let n = mm.kswapd_nap_done(0);
    assert!(!n.asleep);
    assert_eq!(mm.stat(Stat::kswapd_low_wmark_hit_quickly), 1);
    assert_eq!(mm.reclaim.kswapd[0].phase, KswapdPhase::Running);
    let more = mm.kswapd_until_sleep(0, 8);
    assert!(more[0].reclaimed > 0);
    assert!(more.last().unwrap().asleep);
    check(&mm);
}

#[test]
fn s10_2_boosted_reclaim_clears_the_boost_and_wakes_kcompactd_for_a_pageblock() {
    let (mut mm, _) = full_of_page_cache(tun_kb(512));
    mm.kswapd_until_sleep(0, 8);
    mm.take_wakeups();
    // A fallback boosted the watermark (§3.4); the node is otherwise balanced.
    assert!(mm.pgdat_balanced(0, 0, DMA32));
    mm.zones[DMA32].watermark_boost = 64;
    mm.wakeup_kswapd(DMA32, Gfp(0), 0, ZoneType::Dma32);
    assert_eq!(
        mm.reclaim.kswapd[0].phase,
        KswapdPhase::Running,
        "a boost wakes a balanced node's kswapd"
    );
    let c = mm.kswapd_run(0);
    assert!(c.balanced_run);
    assert_eq!(mm.zones[DMA32].watermark_boost, 0);
    assert!(
        mm.compact.kcompactd[0].max_order >= 9,
        "kcompactd asked for pageblock order"
    );
    check(&mm);
}

/// §8 D6: defrag_mode from the kswapd_assist stage on wakes kswapd with pageblock order from
/// the slow path; earlier stages (and defrag_mode = 0) use the request's order.
#[test]
fn s8_d6_slowpath_wakes_kswapd_with_pageblock_order_from_kswapd_assist() {
    for (mode, stage, want) in [
        (false, DefragStage::KswapdWatermarks, 0),
        (true, DefragStage::Vanilla, 0),
        (true, DefragStage::NofragmentOnly, 0),
        (true, DefragStage::KswapdAssist, 9),
        (true, DefragStage::KswapdWatermarks, 9),
    ] {
        let tun = Tunables {
            defrag_mode: mode,
            ..tun_kb(512)
        };
        let mut mm = dma32(16, 1, tun);
        mm.set_policy(fraglab_mm::policy::DefragStageLayer::on_kernel(stage));
        while mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false).is_some() {}
        let w = mm.take_wakeups();
        let orders: Vec<u32> = w
            .iter()
            .filter_map(|w| match w {
                Wakeup::Kswapd { nid: 0, order, .. } => Some(*order),
                _ => None,
            })
            .collect();
        assert_eq!(orders, vec![want], "{mode} {stage:?}");
        assert_eq!(mm.reclaim.kswapd[0].order, want, "{mode} {stage:?}");
    }
}

/// §8 D7: with the watermarks stage, an order-9 kswapd counts only free pageblocks towards
/// the high watermark; earlier stages count all free pages.
#[test]
fn s8_d7_pgdat_balanced_counts_free_pageblocks_only_in_the_watermarks_stage() {
    for (stage, want) in [
        (DefragStage::NofragmentOnly, true),
        (DefragStage::KswapdAssist, true),
        (DefragStage::KswapdWatermarks, false),
    ] {
        let tun = Tunables {
            defrag_mode: true,
            ..tun_kb(128)
        };
        let mut mm = dma32(16, 1, tun);
        mm.set_policy(fraglab_mm::policy::DefragStageLayer::on_kernel(stage));
        // Keep four whole free pageblocks, and fragment the rest half-free.
        let mut ids = Vec::new();
        while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
            ids.push(id);
        }
        for id in &ids {
            let pfn = mm.folios.get(*id).pfn;
            if pfn < block(4) || pfn.is_multiple_of(2) {
                mm.free_folio(0, *id);
            }
        }
        mm.drain_all_pages();
        let z = &mm.zones[DMA32];
        let blocks_free = z.stat(Stat::nr_free_pages_blocks);
        let high = z.wmark_pages(WMARK_HIGH) as i64;
        assert!(
            z.nr_free_pages() > 2 * high && blocks_free >= 4 * 512,
            "{blocks_free}"
        );
        // Raise the high watermark above the free pageblocks but below all free pages.
        let boost = (blocks_free - high + 512) as u64;
        mm.zones[DMA32].watermark_boost = boost;
        assert!(mm.zones[DMA32].nr_free_pages() > high + boost as i64);
        assert_eq!(mm.pgdat_balanced(0, 9, DMA32), want, "{stage:?}");
        assert!(mm.pgdat_balanced(0, 0, DMA32), "order 0 is unchanged by D7");
    }
}
