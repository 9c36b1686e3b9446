//! Compaction's fast paths and limits (docs/model §24): the shared fail counter and scan
//! limit, `fast_find_migrateblock`, `fast_isolate_freepages`, `too_many_isolated` and the
//! skip-bit table. One test per rule, named after its section.

use crate::common;

use common::*;
use fraglab_mm::compaction::{CompactControl, CompactResult, MigrateMode};
use fraglab_mm::folio::FolioKind;
use fraglab_mm::mmzone::PageKind;
use fraglab_mm::node::trace_kind;
use fraglab_mm::trace::TraceEvent;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{AllocFlags, Gfp, MigrateType, Mm};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// A 16-block DMA32 zone with every page allocated (raw order-0 MOVABLE pages, not on the LRU)
/// but blocks 14–15, one free order-10 chunk (so `__isolate_free_page` passes its watermark; no
/// fast path looks at order 10 here).
fn full() -> Mm {
    let mut mm = dma32(16, 1, tun_kb(128));
    fill(&mut mm, DMA32, 0);
    free_chunk(&mut mm, block(14), 10);
    mm
}

/// Frees the aligned order-`order` chunk at `pfn` of a [`full`] zone (it merges in the buddy).
fn free_chunk(mm: &mut Mm, pfn: u32, order: u32) {
    free_range(mm, 0, pfn, 1 << order);
    assert!(mm.pages.is_buddy_of_order(pfn, order), "{pfn:#x} order {order}");
}

/// kcompactd's control block (§9.11.4): GFP_KERNEL, SYNC_LIGHT, not direct.
fn kcompactd_cc(order: i32) -> CompactControl {
    let mut cc = CompactControl::new(DMA32, order, Gfp::GFP_KERNEL, MigrateMode::SyncLight, 0);
    cc.migrate_pfn = BASE;
    cc.free_pfn = block(15);
    cc
}

#[test]
fn section_24_1_freelist_scan_limit() {
    let mut cc = kcompactd_cc(9);
    let got: Vec<u32> = (0..8)
        .map(|f| {
            cc.fast_search_fail = f;
            cc.freelist_scan_limit()
        })
        .collect();
    assert_eq!(got, vec![33, 17, 9, 5, 3, 2, 1, 1]);
    cc.fast_search_fail = 200;
    assert_eq!(cc.freelist_scan_limit(), 1);
}

#[test]
fn section_24_2_fast_find_migrateblock_jumps() {
    let mut mm = full();
    // Gap 15 blocks from the zone start: d = half, so the bound is block 7.
    free_chunk(&mut mm, block(5) + 64, 3);
    let mut cc = kcompactd_cc(9);
    assert_eq!(mm.fast_find_migrateblock(&mut cc), block(5));
    assert_eq!(cc.fast_search_fail, 0);
    assert_eq!(cc.fast_start_pfn, block(5) + 64);
    assert_eq!(cc.total_migrate_scanned, 1, "entries examined are counted");
    // The scanner itself is not moved: isolate_migratepages starts there.
    assert_eq!(cc.migrate_pfn, BASE);

    // Above the bound: no candidate, the scanner stays.
    let mut mm = full();
    free_chunk(&mut mm, block(9), 4);
    let mut cc = kcompactd_cc(9);
    assert_eq!(mm.fast_find_migrateblock(&mut cc), BASE);
    assert_eq!(cc.fast_search_fail, 1);
    assert_eq!(cc.total_migrate_scanned, 1);
    // Not at the zone start: an eighth of the gap (block 6 + 9/8 blocks → bound block 7).
    let mut cc = kcompactd_cc(9);
    cc.migrate_pfn = block(6);
    free_chunk(&mut mm, block(6) + 8, 3);
    assert_eq!(mm.fast_find_migrateblock(&mut cc), block(6));
    assert_eq!(cc.fast_search_fail, 0);
    check(&mm);
}

#[test]
fn section_24_2_preconditions() {
    let mut mm = full();
    free_chunk(&mut mm, block(5), 3);
    let untouched = |mm: &mut Mm, cc: &mut CompactControl| {
        let before = cc.migrate_pfn;
        assert_eq!(mm.fast_find_migrateblock(cc), before);
        assert_eq!((cc.fast_search_fail, cc.total_migrate_scanned), (0, 0));
    };
    // cc.order ≤ 3 (and order −1).
    untouched(&mut mm, &mut kcompactd_cc(3));
    untouched(&mut mm, &mut kcompactd_cc(-1));
    // Skip hints ignored.
    let mut cc = kcompactd_cc(9);
    cc.ignore_skip_hint = true;
    untouched(&mut mm, &mut cc);
    // Finishing a block.
    let mut cc = kcompactd_cc(9);
    cc.finish_pageblock = true;
    untouched(&mut mm, &mut cc);
    // Not at a block start (a continuation after 32 pages).
    let mut cc = kcompactd_cc(9);
    cc.migrate_pfn = block(1) + 40;
    untouched(&mut mm, &mut cc);
    // Direct compaction for a non-MOVABLE type.
    let mut cc = kcompactd_cc(9);
    cc.direct_compaction = true;
    untouched(&mut mm, &mut cc);
    // Direct compaction for MOVABLE: allowed.
    let mut cc = CompactControl::new(DMA32, 9, Gfp::GFP_HIGHUSER_MOVABLE, MigrateMode::Async, 0);
    cc.migrate_pfn = BASE;
    cc.free_pfn = block(15);
    cc.direct_compaction = true;
    assert_eq!(mm.fast_find_migrateblock(&mut cc), block(5));
}

#[test]
fn section_24_2_skip_bits_and_one_rewind() {
    let mut mm = full();
    free_chunk(&mut mm, block(3), 3);
    free_chunk(&mut mm, block(5), 3);
    // A skip-marked candidate is passed over (§24.6: the fast path reads skip bits).
    mm.set_block_skip(block(3), true);
    let mut cc = kcompactd_cc(9);
    assert_eq!(mm.fast_find_migrateblock(&mut cc), block(5));
    assert_eq!(cc.fast_start_pfn, block(5));
    // The hit goes to the tail of its list.
    assert_eq!(list(&mm, DMA32, 3, MigrateType::Movable).last(), Some(&block(5)));
    // The block was worked on (isolate_migratepages_block marks it); the scanner moved on.
    mm.set_block_skip(block(5), true);
    cc.migrate_pfn = block(6);
    // Miss: fail++ and the one rewind to the lowest block chosen in this run.
    assert_eq!(mm.fast_find_migrateblock(&mut cc), block(5));
    assert_eq!(cc.migrate_pfn, block(5));
    assert_eq!(cc.fast_search_fail, 1);
    assert_eq!(cc.fast_start_pfn, u32::MAX);
    // A second miss does not rewind again.
    cc.migrate_pfn = block(6);
    assert_eq!(mm.fast_find_migrateblock(&mut cc), block(6));
    assert_eq!(cc.fast_search_fail, 2);
}

#[test]
fn section_24_2_limit_counts_entries_and_rotates() {
    let mut mm = full();
    for b in [9, 10, 11, 12] {
        free_chunk(&mut mm, block(b), 3);
    }
    let before = list(&mm, DMA32, 3, MigrateType::Movable);
    assert_eq!(before.len(), 4);
    let mut cc = kcompactd_cc(9);
    cc.fast_search_fail = 5; // limit 2
    assert_eq!(mm.fast_find_migrateblock(&mut cc), BASE);
    // Two entries examined, and the one that hit the limit is counted too.
    assert_eq!(cc.total_migrate_scanned, 3);
    assert_eq!(cc.fast_search_fail, 6);
    // The entry at the limit became the tail; the unexamined one comes first.
    let after = list(&mm, DMA32, 3, MigrateType::Movable);
    assert_eq!(after, vec![before[3], before[0], before[1], before[2]]);
    check(&mm);
}

/// Anon order-0 folios in every page (the rest raw pages), then every other page of blocks
/// 8..15 freed (order-0 holes: enough free memory for compaction, fragmentation index high)
/// and an order-3 chunk at `hole`.
fn anon_with_hole(hole: u32) -> Mm {
    let mut mm = dma32(16, 1, tun_kb(128));
    while mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).is_some() {}
    while mm
        .rmqueue(0, DMA32, 0, AllocFlags(0), MigrateType::Movable)
        .is_some()
    {}
    let free = |mm: &mut Mm, p: u32| match mm.folio_at(p) {
        Some(id) => mm.free_folio(0, id),
        None => mm.free_pages(0, p, 0),
    };
    for p in (block(8)..block(16)).step_by(2) {
        free(&mut mm, p);
    }
    for p in hole..hole + 8 {
        free(&mut mm, p);
    }
    mm.drain_all_pages();
    assert!(mm.pages.is_buddy_of_order(hole, 3));
    mm
}

#[test]
fn section_24_2_compact_zone_starts_at_the_found_block() {
    let mut mm = anon_with_hole(block(4) + 16);
    mm.set_trace_mask(trace_kind::COMPACTION_ISOLATE);
    let mut cc = CompactControl::new(DMA32, 9, Gfp::GFP_KERNEL, MigrateMode::SyncLight, 0);
    cc.alloc_flags = AllocFlags(AllocFlags::WMARK_MIN);
    cc.highest_zoneidx = DMA32;
    let (_, stats) = mm.compact_zone(&mut cc);
    assert!(stats.migrated_pages > 0);
    let first = mm.take_trace().into_iter().find_map(|r| match r.event {
        TraceEvent::MmCompactionIsolate {
            free: false,
            start_pfn,
            ..
        } => Some(start_pfn),
        _ => None,
    });
    // The linear scan starts at the jump target, not at the zone start.
    assert_eq!(first, Some(block(4)));
    // Blocks 0..3 were jumped over: not scanned (no skip bit) in this run.
    assert!((0..4).all(|b| !mm.block_skip(block(b))));
    check(&mm);
}

#[test]
fn section_24_3_fast_isolate_freepages_takes_one_chunk_from_the_top_quarter() {
    let mut mm = full();
    free_chunk(&mut mm, block(2), 2);
    free_chunk(&mut mm, block(13) + 8, 2);
    free_chunk(&mut mm, block(9), 2);
    // §24.6: the fast free path does not read skip bits.
    mm.set_block_skip(block(13), true);
    mm.zones[DMA32].compact.init_free_pfn = block(16); // not at scan start
    mm.zones[DMA32].compact.cached_free_pfn = block(10);
    mm.set_trace_mask(trace_kind::COMPACTION_ISOLATE);
    let l = list(&mm, DMA32, 2, MigrateType::Movable);
    // Walked from the tail up to the preferred chunk.
    let examined = l.len() - l.iter().position(|&p| p == block(13) + 8).unwrap();
    let isolated0 = mm.stat(Stat::compact_isolated);
    let mut cc = kcompactd_cc(3);
    cc.nr_migratepages = 4;
    cc.fast_search_fail = 2;
    mm.fast_isolate_freepages(&mut cc);
    assert_eq!(cc.freepages[2], vec![block(13) + 8]);
    assert_eq!(cc.nr_freepages, 4);
    assert_eq!(mm.pages.kind(block(13) + 8), PageKind::Isolated);
    assert_eq!((cc.fast_search_fail, cc.search_order), (0, 2));
    assert_eq!(cc.total_free_scanned, examined as u64 + 3);
    assert_eq!(mm.stat(Stat::compact_isolated) - isolated0, 4);
    // highest ≥ the cached free pfn: the cached free pfn goes to the block below it.
    assert_eq!(mm.zones[DMA32].compact.cached_free_pfn, block(12));
    let t = mm.take_trace();
    let ev: Vec<_> = t
        .iter()
        .filter(|r| matches!(r.event, TraceEvent::MmCompactionFastIsolateFreepages { .. }))
        .collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        ev[0].event,
        TraceEvent::MmCompactionFastIsolateFreepages {
            start_pfn: block(7),
            end_pfn: block(15),
            nr_scanned: examined as u64 + 3,
            nr_taken: 4,
        }
    );
}

#[test]
fn section_24_3_fallback_candidate_is_the_highest() {
    let mut mm = full();
    // Preferred range from block 11, fallback from block 7: only fallback candidates.
    free_chunk(&mut mm, block(8), 2);
    free_chunk(&mut mm, block(9), 2);
    free_chunk(&mut mm, block(1), 2);
    mm.zones[DMA32].compact.init_free_pfn = block(16);
    let mut cc = kcompactd_cc(3);
    cc.nr_migratepages = 4;
    mm.fast_isolate_freepages(&mut cc);
    assert_eq!(cc.freepages[2], vec![block(9)]);
    assert_eq!(cc.fast_search_fail, 0, "a fallback candidate is not a failure");
}

#[test]
fn section_24_3_failure_at_scan_start_isolates_around_min() {
    // Order-0 holes only low in the zone, below the fallback bound (block 7).
    let setup = || {
        let mut mm = full();
        free_pfns(&mut mm, 0, [block(1), block(1) + 2, block(1) + 4]);
        mm.zones[DMA32].compact.init_free_pfn = 0; // scan start
        mm
    };
    let mut mm = setup();
    let mut cc = CompactControl::new(DMA32, 1, Gfp::GFP_HIGHUSER_MOVABLE, MigrateMode::SyncLight, 0);
    cc.migrate_pfn = BASE;
    cc.free_pfn = block(15);
    cc.direct_compaction = true;
    cc.nr_migratepages = 1;
    mm.fast_isolate_freepages(&mut cc);
    assert_eq!(cc.fast_search_fail, 1);
    assert_eq!(cc.nr_freepages, 0);
    // Direct compaction: the free scanner moves to the fallback bound and isolates around it;
    // the block was scanned to its end (nothing free), so it is marked skip.
    assert_eq!(cc.free_pfn, block(7));
    assert!(mm.block_skip(block(7)));
    assert_eq!(cc.total_free_scanned, 3 + 512);

    // kcompactd (not direct): the scanner stays, nothing is isolated around.
    let mut mm = setup();
    let mut cc = kcompactd_cc(1);
    cc.nr_migratepages = 1;
    mm.fast_isolate_freepages(&mut cc);
    assert_eq!(cc.free_pfn, block(15));
    assert!(!mm.block_skip(block(7)));
    assert_eq!(cc.total_free_scanned, 3);
    // Order −1: no fast path at all.
    let mut cc = kcompactd_cc(-1);
    mm.fast_isolate_freepages(&mut cc);
    assert_eq!((cc.total_free_scanned, cc.fast_search_fail), (0, 0));
}

#[test]
fn section_24_4_too_many_isolated_aborts_async() {
    let run = |mode: MigrateMode, gfp: Gfp, isolated: u64| {
        let (mut mm, _) = fragmented(tun_kb(128));
        let lru = mm.stat(Stat::nr_inactive_anon) + mm.stat(Stat::nr_active_anon);
        assert!(lru > 1000);
        // Another isolator holds `isolated` pages.
        mm.stats[Stat::nr_isolated_anon as usize] += isolated;
        let mut cc = CompactControl::new(DMA32, 9, gfp, mode, 0);
        cc.alloc_flags = AllocFlags(AllocFlags::WMARK_MIN);
        cc.highest_zoneidx = DMA32;
        cc.direct_compaction = true;
        let (r, stats) = mm.compact_zone(&mut cc);
        mm.stats[Stat::nr_isolated_anon as usize] -= isolated;
        check(&mm);
        (r, stats, lru)
    };
    let (_, _, lru) = run(MigrateMode::Async, Gfp::GFP_HIGHUSER_MOVABLE, 0);
    // __GFP_FS: the limit is LRU/16.
    let over = lru / 16 + 1;
    let (r, stats, _) = run(MigrateMode::Async, Gfp::GFP_HIGHUSER_MOVABLE, over);
    assert_eq!(r, CompactResult::Contended);
    // Only the fast path's free-list entries were examined; no page isolated or migrated.
    assert_eq!((stats.isolated, stats.migrated_pages), (0, 0));
    assert!(stats.migrate_scanned <= 33);
    // Below the limit: not too many.
    let (r, stats, _) = run(MigrateMode::Async, Gfp::GFP_HIGHUSER_MOVABLE, lru / 64);
    assert_ne!(r, CompactResult::Contended);
    assert!(stats.migrated_pages > 0);
    // NOFS compactors get LRU/2.
    let (r, _, _) = run(
        MigrateMode::Async,
        Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::FS),
        over,
    );
    assert_ne!(r, CompactResult::Contended);
    // Sync modes throttle instead (not modelled: nothing else runs meanwhile) and go on.
    let (r, stats, _) = run(MigrateMode::SyncLight, Gfp::GFP_HIGHUSER_MOVABLE, over);
    assert_ne!(r, CompactResult::Contended);
    assert!(stats.migrated_pages > 0);
}

/// §24.5: an ASYNC run's `compact_lock_irqsave` tries the zone lock (free scanner) and the LRU
/// lock (migration scanner) first; when another CPU holds it at that moment the run records
/// `contended`, isolates past the 32-page batch, and ends CONTENDED at the next
/// pageblock-aligned check that finds no suitable page. The moment of each lock call is the
/// step's start plus the run's work so far at the cost model's rates. Sync runs wait for the
/// lock and never end contended; without a clock (`locks_busy` None) no trylock fails.
#[test]
fn section_24_5_async_trylock_sets_contended() {
    use fraglab_mm::compaction::{CompactCosts, LocksBusy};
    let run_order = |mode: MigrateMode, busy: Option<LocksBusy>, order: i32| {
        let (mut mm, _) = fragmented(tun_kb(128));
        mm.cur.now_ns = 1_000_000;
        mm.cur.locks_busy = busy;
        mm.set_trace_mask(trace_kind::COMPACTION_ISOLATE);
        let mut cc = CompactControl::new(DMA32, order, Gfp::GFP_HIGHUSER_MOVABLE, mode, 0);
        cc.alloc_flags = AllocFlags(AllocFlags::WMARK_MIN);
        cc.highest_zoneidx = DMA32;
        cc.direct_compaction = true;
        let (r, stats) = mm.compact_zone(&mut cc);
        check(&mm);
        // The migration scanner's first isolation batch.
        let first_batch = mm.take_trace().into_iter().find_map(|t| match t.event {
            TraceEvent::MmCompactionIsolate {
                free: false,
                nr_taken,
                ..
            } if nr_taken > 0 => Some(nr_taken),
            _ => None,
        });
        let failed = mm.cur.locks_busy.as_ref().map(|b| b.trylock_failed);
        (r, stats, cc.contended, first_batch, failed)
    };
    let run = |mode: MigrateMode, busy: Option<LocksBusy>| run_order(mode, busy, 9);
    let costs = CompactCosts {
        run_ns: 1_000,
        ..Default::default()
    };
    let held = |zone: Vec<(u64, u64)>, lru: Vec<(u64, u64)>| {
        Some(LocksBusy {
            zone,
            lru,
            costs,
            ..Default::default()
        })
    };
    let always = vec![(0, u64::MAX)];
    // No clock: the run as before, isolating 32 pages at a time.
    let (r0, s0, c0, b0, _) = run(MigrateMode::Async, None);
    assert!(!c0 && r0 != CompactResult::Contended);
    assert!(s0.migrated_pages > 0);
    assert_eq!(b0, Some(32));
    // Locks free at every moment: the same run.
    let (r, s, c, _, failed) = run(MigrateMode::Async, held(vec![], vec![]));
    assert_eq!((r, s, c, failed), (r0, s0, false, Some([0, 0])));
    // The LRU lock held by another CPU: the migration scanner's first lock call fails and the
    // batch takes the whole pageblock's folios. At order 9 that empties the block, and a
    // suitable page found at the aligned check still wins over `contended`.
    let (r, _, c, b, failed) = run(MigrateMode::Async, held(vec![], always.clone()));
    assert!(c);
    assert_eq!(r, CompactResult::Success);
    assert!(b.unwrap() > 32, "contended: no 32-page cap, got {b:?}");
    assert_eq!(failed, Some([0, 1]), "one failed trylock: the flag stays set");
    // At order 10 one emptied block is not enough: free, the run goes on to the next block;
    // contended, it ends CONTENDED at the first aligned check.
    let (r10, s10, c, _, _) = run_order(MigrateMode::Async, None, 10);
    assert!(!c && r10 != CompactResult::Contended, "{r10:?}");
    let (r, s, c, _, _) = run_order(MigrateMode::Async, held(vec![], always.clone()), 10);
    assert!(c);
    assert_eq!(r, CompactResult::Contended);
    assert!(s.migrate_scanned < s10.migrate_scanned, "{s:?} vs {s10:?}");
    // The zone lock held: the free scanner's lock call fails.
    let (r, _, c, _, failed) = run_order(MigrateMode::Async, held(always.clone(), vec![]), 10);
    assert!(c);
    assert_eq!(r, CompactResult::Contended);
    assert_eq!(failed, Some([1, 0]));
    // The lock calls are placed in time: the run's first (at now + run_ns = 1,001,000 ns at
    // the earliest) comes after a hold that ends at 1,000,500 and inside one that ends later.
    let (r, s, c, _, _) = run(MigrateMode::Async, held(vec![], vec![(0, 1_000_500)]));
    assert_eq!((r, s, c), (r0, s0, false));
    let (_, _, c, _, _) = run(MigrateMode::Async, held(vec![], vec![(1_000_900, 1_001_100)]));
    assert!(c);
    // Sync compaction waits for the lock: never contended, the same run as without a clock.
    let (rs, ss, _, _, _) = run(MigrateMode::SyncLight, None);
    let (r, s, c, _, failed) = run(MigrateMode::SyncLight, held(always.clone(), always));
    assert_eq!((r, s, c, failed), (rs, ss, false, Some([0, 0])));
}
