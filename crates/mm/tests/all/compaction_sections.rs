//! One test per compaction rule of docs/model §9 and §13, named after its section.

use crate::common;

use common::*;
use fraglab_mm::compaction::{CompactPriority, CompactResult, FolioMode};
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{AllocFlags, Gfp, Mm, Tunables};

const MIN: AllocFlags = AllocFlags(AllocFlags::WMARK_MIN);
/// Fills without direct reclaim, so page cache is not evicted while the state is built.
const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// A DMA32 zone of `blocks` pageblocks with a tiny min watermark.
fn small(blocks: u32) -> Mm {
    dma32(blocks, 1, tun_kb(128))
}

fn anon(mm: &mut Mm, order: u32) -> Option<FolioId> {
    mm.alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, order, FolioKind::Anon, false)
}

/// Fills the zone with anon order-0 folios and frees those with `free(i)`; drains the PCPs.
fn fill_free(mm: &mut Mm, free: impl Fn(usize) -> bool) -> Vec<FolioId> {
    let mut all = Vec::new();
    while let Some(id) = anon(mm, 0) {
        all.push(id);
    }
    let mut kept = Vec::new();
    for (i, id) in all.into_iter().enumerate() {
        if free(i) {
            mm.free_folio(0, id);
        } else {
            kept.push(id);
        }
    }
    mm.drain_all_pages();
    kept
}

#[test]
fn s9_2_fragmentation_index_values() {
    let mut mm = small(8);
    // Fresh: order-10 chunks exist, so every order has a suitable chunk: −1000.
    assert_eq!(mm.fragmentation_index(DMA32, 9), -1000);
    fill_free(&mut mm, |i| i % 2 == 0);
    let z = &mm.zones[DMA32];
    let (free, blocks): (u64, u64) = (0..11).fold((0, 0), |(f, b), o| {
        (f + (z.area.nr_free[o] << o), b + z.area.nr_free[o])
    });
    assert!(z.area.nr_free[9] == 0 && z.area.nr_free[10] == 0);
    let expect = 1000 - ((1000 + free * 1000 / 512) / blocks) as i32;
    assert_eq!(mm.fragmentation_index(DMA32, 9), expect);
    assert!(
        expect > 900,
        "scattered order-0 holes are fragmentation, not low memory: {expect}"
    );
    // extfrag_for_order: all free memory is in chunks below order 9.
    assert_eq!(mm.extfrag_for_order(DMA32, 9), 100);
    check(&mm);
}

#[test]
fn s9_2_suitable_success_when_watermark_ok_and_skipped_without_gap() {
    let mut mm = small(8);
    // A free order-9 chunk exists: "the allocation should already succeed".
    assert_eq!(
        mm.compaction_suit_allocation_order(DMA32, 9, 1, MIN, false, false),
        CompactResult::Success
    );
    // No free memory to speak of: fails the order-0 + compact_gap test → SKIPPED.
    let mut held = Vec::new();
    while let Some(id) = anon(&mut mm, 0) {
        held.push(id);
    }
    assert_eq!(
        mm.compaction_suit_allocation_order(DMA32, 9, 1, MIN, false, false),
        CompactResult::Skipped
    );
    check(&mm);
}

#[test]
fn s9_2_4_fragindex_below_threshold_skips_costly() {
    let mut mm = small(16);
    fill_free(&mut mm, |i| i % 2 == 0);
    let fi = mm.fragmentation_index(DMA32, 9);
    assert_eq!(
        mm.compaction_suit_allocation_order(DMA32, 9, 1, MIN, false, false),
        CompactResult::Continue
    );
    mm.compact.cfg.extfrag_threshold = fi; // fi ≤ threshold: "lack of memory, reclaim instead"
    assert_eq!(
        mm.compaction_suit_allocation_order(DMA32, 9, 1, MIN, false, false),
        CompactResult::Skipped
    );
    mm.compact.cfg.extfrag_threshold = fi - 1; // fi above the threshold: worth compacting
    assert_eq!(
        mm.compaction_suit_allocation_order(DMA32, 9, 1, MIN, false, false),
        CompactResult::Continue
    );
    check(&mm);
}

#[test]
fn s9_2_defrag_mode_kcompactd_uses_free_blocks() {
    // §8 D9: with defrag_mode, kcompactd's "already satisfied" test counts only free pageblocks.
    let mut mm = dma32(
        16,
        1,
        Tunables {
            defrag_mode: true,
            min_free_kbytes: Some(128),
            ..Tunables::default()
        },
    );
    fill_free(&mut mm, |i| i % 2 == 0);
    assert_eq!(mm.zones[DMA32].stat(Stat::nr_free_pages_blocks), 0);
    assert!(
        mm.zones[DMA32].area.nr_free[1..].iter().any(|&n| n > 0),
        "some chunk of order ≥ 1 is free"
    );
    // kcompactd (defrag_mode): no free block, so an order-1 request is not "already done".
    assert_eq!(
        mm.compaction_suit_allocation_order(DMA32, 1, 1, MIN, false, true),
        CompactResult::Continue
    );
    // Direct compaction in the same state counts NR_FREE_PAGES: satisfied.
    assert_eq!(
        mm.compaction_suit_allocation_order(DMA32, 1, 1, MIN, false, false),
        CompactResult::Success
    );
    // And without defrag_mode kcompactd agrees with direct compaction.
    mm.tun.defrag_mode = false;
    assert_eq!(
        mm.compaction_suit_allocation_order(DMA32, 1, 1, MIN, false, true),
        CompactResult::Success
    );
    check(&mm);
}

#[test]
fn s9_3_defer_shift_considered_and_reset() {
    let mut mm = small(4);
    assert!(!mm.compaction_deferred(DMA32, 9), "never deferred at boot");
    mm.defer_compaction(DMA32, 9);
    mm.defer_compaction(DMA32, 9);
    let c = &mm.zones[DMA32].compact;
    assert_eq!((c.defer_shift, c.considered, c.order_failed), (2, 0, 0));
    // After two failures, the next 2^2 − 1 = 3 attempts are skipped, the 4th runs.
    assert!(mm.compaction_deferred(DMA32, 9));
    assert!(mm.compaction_deferred(DMA32, 9));
    assert!(mm.compaction_deferred(DMA32, 9));
    assert!(!mm.compaction_deferred(DMA32, 9));
    // Shift saturates at 6.
    for _ in 0..10 {
        mm.defer_compaction(DMA32, 9);
    }
    assert_eq!(mm.zones[DMA32].compact.defer_shift, 6);
    // Reset after a success without allocation keeps the shift but raises order_failed.
    mm.compaction_defer_reset(DMA32, 9, false);
    assert_eq!(mm.zones[DMA32].compact.defer_shift, 6);
    assert_eq!(mm.zones[DMA32].compact.order_failed, 10);
    assert!(
        !mm.compaction_deferred(DMA32, 9),
        "orders below order_failed are never deferred"
    );
    mm.compaction_defer_reset(DMA32, 9, true);
    assert_eq!(mm.zones[DMA32].compact.defer_shift, 0);
    check(&mm);
}

#[test]
fn s9_3_5_restarting_after_max_deferral() {
    let mut mm = small(4);
    for _ in 0..6 {
        mm.defer_compaction(DMA32, 9);
    }
    assert!(!mm.compaction_restarting(DMA32, 9));
    for _ in 0..64 {
        mm.compaction_deferred(DMA32, 9);
    }
    assert!(mm.compaction_restarting(DMA32, 9));
}

#[test]
fn s9_5_1_scanners_met_complete_and_blockskip_flush() {
    let mut mm = small(16);
    fill_free(&mut mm, |i| i % 2 == 0);
    // Direct SYNC_FULL compaction runs the whole zone; scanners meet on a zone where order 10 is
    // never reached (max 16 blocks, half full).
    let (rc, _, st) = mm.try_to_compact_pages(0, Gfp::GFP_TRANSHUGE, 10, MIN, CompactPriority::SyncFull);
    assert!(st.migrated_pages > 0);
    assert!(
        matches!(rc, CompactResult::Complete | CompactResult::Success),
        "{rc:?}"
    );
    if rc == CompactResult::Complete {
        assert!(
            mm.zones[DMA32].compact.blockskip_flush,
            "a direct compaction whose scanners met"
        );
        // Cached positions were reset to the zone's ends.
        let c = &mm.zones[DMA32].compact;
        assert_eq!(c.cached_migrate_pfn, [BASE, BASE]);
        // A sync failure defers.
        assert_eq!(c.defer_shift, 1);
    }
    check(&mm);
}

#[test]
fn s9_6_3_large_folio_at_or_above_cc_order_not_isolated() {
    // Order-4 folios in every block, alternate ones freed: a direct compaction for order 4
    // isolates no order-4 folio (≥ cc.order), so it migrates nothing; for order 9 it does.
    let run = |order: u32| {
        let mut mm = small(16);
        let mut all = Vec::new();
        while let Some(id) = anon(&mut mm, 4) {
            all.push(id);
        }
        for (i, id) in all.iter().enumerate() {
            if i % 2 == 0 {
                mm.free_folio(0, *id);
            }
        }
        mm.drain_all_pages();
        let (_, _, st) =
            mm.try_to_compact_pages(0, Gfp::GFP_TRANSHUGE, order, MIN, CompactPriority::SyncFull);
        check(&mm);
        st.migrated_pages
    };
    assert_eq!(run(4), 0);
    assert!(run(9) > 0);
}

#[test]
#[allow(clippy::while_let_loop)]
fn s9_6_3_nofs_compactor_skips_file_folios_and_unmovable_never_moves() {
    let mut mm = small(16);
    let mut files = Vec::new();
    let mut kern = Vec::new();
    loop {
        let Some(f) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false) else {
            break;
        };
        files.push(f);
        let Some(k) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Kernel, false) else {
            break;
        };
        kern.push(k);
    }
    for (i, id) in files.iter().enumerate() {
        if i % 2 == 0 {
            mm.free_folio(0, *id);
        }
    }
    mm.drain_all_pages();
    let nofs = Gfp::GFP_NOFS.union(Gfp::MOVABLE).union(Gfp::COMP);
    let (_, _, st) = mm.try_to_compact_pages(0, nofs, 9, MIN, CompactPriority::SyncFull);
    assert_eq!(
        st.migrated_pages, 0,
        "a NOFS compactor may not migrate file folios"
    );
    let (_, _, st) = mm.try_to_compact_pages(0, Gfp::GFP_TRANSHUGE, 9, MIN, CompactPriority::SyncFull);
    assert!(st.migrated_pages > 0);
    for k in kern {
        assert_eq!(mm.folios.migrations(k), 0, "non-LRU folios never move");
    }
    check(&mm);
}

#[test]
fn s9_6_3_stops_after_32_pages() {
    let mut mm = small(16);
    fill_free(&mut mm, |i| i % 2 == 0);
    mm.set_trace_mask(fraglab_mm::node::trace_kind::COMPACTION_ISOLATE);
    mm.compact_memory();
    let t = mm.take_trace();
    let taken: Vec<u64> = t
        .iter()
        .filter_map(|r| match r.event {
            fraglab_mm::trace::TraceEvent::MmCompactionIsolate {
                free: false,
                nr_taken,
                ..
            } => Some(nr_taken),
            _ => None,
        })
        .collect();
    // Each block: the first pass stops at 32 pages; the next iteration starts in the same block,
    // so finish_pageblock is set and the rest of the block is isolated at once (§9.4.5a).
    assert!(!taken.is_empty());
    assert!(taken.iter().step_by(2).all(|&n| n == 32), "{taken:?}");
    assert!(taken.iter().skip(1).step_by(2).all(|&n| n > 32), "{taken:?}");
    assert!(taken.contains(&32));
    check(&mm);
}

#[test]
fn s9_7_skip_bit_set_and_honoured() {
    let mut mm = small(16);
    fill_free(&mut mm, |i| i % 2 == 0);
    // An async direct compaction marks the blocks it worked on.
    mm.try_to_compact_pages(0, Gfp::GFP_TRANSHUGE, 9, MIN, CompactPriority::Async);
    let skipped = (0..16).filter(|&b| mm.block_skip(block(b))).count();
    assert!(skipped > 0);
    // Proc compaction ignores the hints and still works on those blocks.
    let st = mm.compact_memory();
    assert!(st.migrated_pages > 0);
    check(&mm);
}

#[test]
fn s9_7_reset_isolation_suitable_only_with_flush_flag() {
    let mut mm = small(16);
    fill_free(&mut mm, |i| i % 2 == 0);
    for b in 0..16 {
        mm.set_block_skip(block(b), true);
    }
    mm.reset_isolation_suitable(DMA32);
    assert_eq!(
        (0..16).filter(|&b| mm.block_skip(block(b))).count(),
        16,
        "no flush flag: no-op"
    );
    mm.zones[DMA32].compact.blockskip_flush = true;
    mm.reset_isolation_suitable(DMA32);
    let left = (0..16).filter(|&b| mm.block_skip(block(b))).count();
    assert!(left < 16, "blocks with LRU or free pages are cleared");
    assert!(!mm.zones[DMA32].compact.blockskip_flush);
    check(&mm);
}

#[test]
fn s9_8_4_isolated_large_chunks_retype_blocks_movable() {
    // After compaction the released chunks of order ≥ 8 sit in MOVABLE blocks.
    let mut mm = small(16);
    fill_free(&mut mm, |i| i % 2 == 0);
    mm.compact_memory();
    let z = &mm.zones[DMA32];
    assert!(z.area.nr_by_type[9][fraglab_mm::MigrateType::Movable.idx()] + z.area.nr_by_type[10][1] > 0);
    check(&mm);
}

#[test]
fn s9_8_5_free_page_split_vs_exact_order() {
    for (mode, expect_migrated) in [
        (FolioMode::MigrateFreeSplit, true),
        (FolioMode::MigrateNoFreeSplit, false),
    ] {
        let mut mm = small(16);
        mm.set_policy(fraglab_mm::policy::FolioCompaction::on_kernel(mode));
        // Holes of order 1 (pairs of pages freed); order-0 folios to move.
        fill_free(&mut mm, |i| i % 4 < 2);
        let st = mm.compact_memory();
        assert_eq!(st.migrated_pages > 0, expect_migrated, "{mode:?}: {st:?}");
        if !expect_migrated {
            assert_eq!(mm.stat(Stat::pgmigrate_fail), 1, "one −ENOMEM");
        }
        check(&mm);
    }
}

#[test]
fn s9_11_kcompactd_work_counts_and_defers_on_failure() {
    let mut mm = small(16);
    fill_free(&mut mm, |i| i % 2 == 0);
    assert!(
        mm.wakeup_kcompactd(0, 9, 1),
        "suitable: free memory but no order-9 chunk"
    );
    assert_eq!(mm.compact.kcompactd[0].max_order, 9);
    let st = mm.kcompactd_do_work(0);
    assert_eq!(mm.stat(Stat::compact_daemon_wake), 1);
    assert_eq!(mm.stat(Stat::compact_daemon_migrate_scanned), st.migrate_scanned);
    assert_eq!(mm.stat(Stat::compact_daemon_free_scanned), st.free_scanned);
    assert!(st.migrate_scanned > 0);
    assert_eq!(mm.compact.kcompactd[0].max_order, 0, "cleared after the work");
    check(&mm);
}

#[test]
fn s9_11_2_order_zero_is_ignored() {
    let mut mm = small(4);
    assert!(!mm.wakeup_kcompactd(0, 0, 1));
    assert_eq!(mm.compact.kcompactd[0].max_order, 0);
}

#[test]
fn s9_12_scores_and_thresholds() {
    let mut mm = small(16);
    assert_eq!(mm.fragmentation_score_wmark(true), 80);
    assert_eq!(mm.fragmentation_score_wmark(false), 90);
    mm.compact.cfg.proactiveness = 100;
    assert_eq!(
        (
            mm.fragmentation_score_wmark(true),
            mm.fragmentation_score_wmark(false)
        ),
        (0, 0)
    );
    mm.compact.cfg.proactiveness = 20;
    assert_eq!(
        mm.fragmentation_score_node(0),
        0,
        "fresh: everything in order-10 chunks"
    );
    fill_free(&mut mm, |i| i % 2 == 0);
    // Node score = zone score · present / (node present + 1) = 100 · 8192 / 8193 → 99.
    assert_eq!(mm.fragmentation_score_zone(DMA32), 100);
    assert_eq!(mm.fragmentation_score_node(0), 99);
    // Not while kswapd runs (the fill woke it).
    assert_eq!(
        mm.reclaim.kswapd[0].phase,
        fraglab_mm::kswapd::KswapdPhase::Running
    );
    assert!(!mm.should_proactive_compact_node(0));
    mm.kswapd_until_sleep(0, 4);
    assert!(mm.should_proactive_compact_node(0));
    let c = mm.kcompactd_cycle(0);
    assert!(c.proactive && !c.did_work && c.stats.migrated_pages > 0);
    assert!(
        mm.fragmentation_score_zone(DMA32) <= 80,
        "stops at the low threshold or when the scanners meet"
    );
    assert_eq!(c.next_timeout_ms, Some(500), "the score went down: no back-off");
    mm.compact.cfg.proactiveness = 0;
    assert!(!mm.should_proactive_compact_node(0));
    check(&mm);
}

#[test]
fn s9_11_5_kcompactd_loop_backs_off_when_proactive_compaction_makes_no_progress() {
    // Every other page is unmovable kernel memory: nothing can be migrated, the score stays.
    let mut mm = small(16);
    let kernel = Gfp::GFP_KERNEL.without(Gfp::DIRECT_RECLAIM);
    let mut pages = Vec::new();
    while let Some(id) = mm.alloc_folio(0, kernel, 0, FolioKind::Kernel, false) {
        pages.push(id);
    }
    for id in pages.into_iter().step_by(2) {
        mm.free_folio(0, id);
    }
    mm.drain_all_pages();
    mm.kswapd_until_sleep(0, 20);
    mm.trace.mask = fraglab_mm::node::trace_kind::COMPACTION_KCOMPACTD;
    assert!(mm.should_proactive_compact_node(0));
    let c = mm.kcompactd_cycle(0);
    assert!(c.proactive && c.stats.migrated_pages == 0);
    assert_eq!(c.next_timeout_ms, Some(500 << 6), "no progress: 32 s back-off");
    assert_eq!(mm.compact.kcompactd[0].next_timeout_ms, Some(32_000));
    let last = mm.trace.buf.last().unwrap();
    assert!(matches!(
        last.event,
        fraglab_mm::trace::TraceEvent::MmCompactionKcompactdSleep { nid: 0 }
    ));
    // A recorded order is worked on at the next iteration, woken or not; the timeout resets.
    mm.wakeup_kcompactd(0, 9, DMA32);
    let c = mm.kcompactd_cycle(0);
    assert!(c.did_work && !c.proactive);
    assert_eq!(c.next_timeout_ms, Some(500));
    assert_eq!(mm.compact.kcompactd[0].max_order, 0);
    // Proactiveness 0: no proactive work and no timeout.
    mm.compact.cfg.proactiveness = 0;
    let c = mm.kcompactd_cycle(0);
    assert!(!c.proactive && !c.did_work && c.next_timeout_ms.is_none());
    check(&mm);
}

#[test]
#[allow(clippy::while_let_loop)]
fn s13_3_large_folio_split_on_enomem_and_s13_6_counters() {
    // THP-sized folios cannot be isolated (≥ pageblock order); use order-4 folios whose only
    // targets are order-0 holes: each is split and its pieces migrate.
    let mut mm = small(16);
    let mut small_ids = Vec::new();
    let mut big = Vec::new();
    loop {
        let Some(a) = anon(&mut mm, 0) else { break };
        small_ids.push(a);
        let Some(b) = anon(&mut mm, 4) else { break };
        big.push(b);
    }
    for (i, id) in small_ids.iter().enumerate() {
        if i % 2 == 0 {
            mm.free_folio(0, *id);
        }
    }
    mm.drain_all_pages();
    let before = mm.folios.census_of(FolioKind::Anon);
    mm.compact_memory();
    let after = mm.folios.census_of(FolioKind::Anon);
    assert!(mm.stat(Stat::pgmigrate_success) > 0);
    if after[4] < before[4] {
        let split = before[4] - after[4];
        assert_eq!(
            after[0],
            before[0] + 16 * split,
            "each split gives 16 order-0 folios"
        );
    }
    assert_eq!(
        mm.stat(Stat::thp_migration_success),
        0,
        "no THP-size folio was isolated"
    );
    check(&mm);
}
