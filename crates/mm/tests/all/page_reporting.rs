//! Free page reporting (§32): the device's request state, the pass (watermark
//! gate, budget, rotation, batches, `__isolate_free_page`'s test and retype, the put-back), the
//! PageReported flag and the host's backing. One test per rule, named after its section.

use crate::common;

use common::*;
use fraglab_mm::compaction::{CompactControl, MigrateMode};
use fraglab_mm::mmzone::{PageKind, PG_REPORTED, WMARK_LOW};
use fraglab_mm::node::trace_kind;
use fraglab_mm::page_reporting::{PassSummary, ReportingState};
use fraglab_mm::trace::TraceEvent;
use fraglab_mm::{Gfp, MachineConfig, MigrateType, Mm, MmConfig, Wakeup, ZoneType};

/// One DMA32 zone of `blocks` pageblocks at [`BASE`], `min_free_kbytes` fixed, and a reporting
/// device at `order` (None: none). debug-vm on.
fn machine(blocks: u32, order: Option<u32>, min_kb: u64) -> Mm {
    let cfg = MmConfig {
        tun: tun_kb(min_kb),
        page_reporting_order: order,
        ..MmConfig::new(MachineConfig {
            cpu_node: Vec::new(),
            zones: vec![zone(ZoneType::Dma32, BASE, blocks)],
            nr_cpus: 1,
        })
    };
    let mut mm = Mm::from_config(&cfg).expect("valid machine");
    mm.debug_vm = true;
    check(&mm);
    mm
}

/// The reporting requests among the wake-ups handed out since the last call.
fn requests(mm: &mut Mm) -> usize {
    mm.take_wakeups()
        .iter()
        .filter(|w| **w == Wakeup::PageReporting)
        .count()
}

/// One pass, then the invariants.
fn pass(mm: &mut Mm) -> PassSummary {
    let p = mm.page_reporting_process();
    check(mm);
    p
}

/// Order-10 chunk `i` of a zone at [`BASE`].
fn c10(i: u32) -> u32 {
    BASE + 1024 * i
}

/// §32.1 items 1–2: a device registers at the end of boot and asks for the initial pass; without
/// one nothing is requested, passes do nothing and every page stays host-backed.
#[test]
fn s32_1_registration_requests_the_first_pass_and_no_device_does_nothing() {
    let mut mm = machine(16, Some(9), 128);
    assert_eq!(requests(&mut mm), 1);
    assert_eq!(mm.reporting.state, ReportingState::Requested);
    assert_eq!(mm.reporting.order(), Some(9));

    let mut off = machine(16, None, 128);
    assert_eq!(requests(&mut off), 0);
    assert_eq!(off.page_reporting_process(), PassSummary::default());
    assert_eq!(off.reporting.stats.passes, 0);
    fill(&mut off, DMA32, 0);
    free_range(&mut off, 0, BASE, 16 * PB);
    assert_eq!(requests(&mut off), 0, "no device: frees notify nobody");
    let p = off.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 9).unwrap();
    assert_eq!(off.reporting.stats.host_fault_pages, 0);
    assert!((p..p + PB).all(|q| off.host_backed(q)));
    assert_eq!(off.reported_free_pages(), 0);
}

/// §32.2 item 1: a free notifies when its merge ends at order ≥ page_reporting_order; from
/// IDLE that schedules a pass (one request), while REQUESTED it does nothing more. §32.2
/// items 2 and 8: a pass over a zone below its watermark reports nothing and ends IDLE.
#[test]
fn s32_2_a_merge_to_the_reporting_order_requests_a_pass_from_idle_only() {
    let mut mm = machine(64, Some(9), 128);
    assert_eq!(requests(&mut mm), 1);
    pass(&mut mm);
    assert_eq!(mm.reporting.state, ReportingState::Idle);
    assert_eq!(requests(&mut mm), 0);
    fill(&mut mm, DMA32, 0);
    // Half a block merges to order 8 only: below the order, no request.
    free_range(&mut mm, 0, block(0), 256);
    assert!(mm.pages.is_buddy_of_order(block(0), 8));
    assert_eq!(requests(&mut mm), 0);
    assert_eq!(mm.reporting.state, ReportingState::Idle);
    // The other half completes the block: order 9, a request.
    free_range(&mut mm, 0, block(0) + 256, 256);
    assert!(mm.pages.is_buddy_of_order(block(0), 9));
    assert_eq!(requests(&mut mm), 1);
    assert_eq!(mm.reporting.state, ReportingState::Requested);
    // Another order-9 free while a pass is pending: nothing more.
    free_range(&mut mm, 0, block(2), PB);
    assert_eq!(requests(&mut mm), 0);
    // The pass finds 1024 free pages, far below low + 32·512: nothing reported, IDLE.
    let p = pass(&mut mm);
    assert_eq!((p.reports, p.chunks, p.again), (0, 0, false));
    assert_eq!(mm.reporting.stats.zones_skipped, 1);
    assert_eq!(mm.reporting.state, ReportingState::Idle);
    // From IDLE again, the next order-9 free asks again.
    free_range(&mut mm, 0, block(4), PB);
    assert_eq!(requests(&mut mm), 1);
}

/// §32.2 item 2: a zone is processed only when it passes an order-0 watermark test at
/// low + 32·2^R pages (free must exceed the mark).
#[test]
fn s32_2_zone_is_processed_only_above_low_plus_32_chunks() {
    let mut mm = machine(16, Some(0), 128);
    let low = mm.zones[DMA32].wmark_pages(WMARK_LOW);
    assert_eq!(low, 40, "min 32 + max(min/4, managed/1000)");
    fill(&mut mm, DMA32, 0);
    requests(&mut mm);
    // low + 32 single pages (odd pfns: no merging) is not above the mark.
    let odd = |n: u32| (0..n).map(|i| BASE + 1 + 2 * i);
    free_pfns(&mut mm, 0, odd(low as u32 + 32));
    let p = pass(&mut mm);
    assert_eq!((p.reports, p.chunks), (0, 0));
    assert_eq!(mm.reporting.stats.zones_skipped, 1);
    // One page more passes it.
    free_pfns(&mut mm, 0, [BASE + 1 + 2 * (low as u32 + 32)]);
    let p = pass(&mut mm);
    assert!(p.chunks > 0, "{p:?}");
    assert_eq!(mm.reporting.stats.zones_skipped, 1);

    // The same zone with 16 free pageblocks is below low + 32·512 at order 9, above it at 5.
    for (order, reported) in [(9, false), (5, true)] {
        let mut mm = machine(32, Some(order), 128);
        let p = pass(&mut mm);
        assert_eq!(p.chunks > 0, reported, "order {order}: {p:?}");
    }
}

/// §32.2 items 3–4 and 7: per list and pass, ⌈nr_free[order]/512⌉ + 1 report calls of 32
/// chunks; with the budget spent the state goes back to REQUESTED (another pass follows) and the
/// walk stops at the first unreported chunk. Isolated chunks leave the list head first and come
/// back to its tail, the one isolated last first; everything is reported after enough passes.
#[test]
fn s32_2_budget_is_nr_free_over_512_plus_one_call_per_list() {
    let mut mm = machine(16, Some(0), 128);
    fill(&mut mm, DMA32, 0);
    requests(&mut mm);
    free_pfns(&mut mm, 0, (0..200).map(|i| BASE + 1 + 2 * i));
    let before = list(&mm, DMA32, 0, MigrateType::Movable);
    assert_eq!(before.len(), 200);
    // nr_free[0] = 200: a budget of 1, so 2 reports of 32, then REQUESTED.
    let p = pass(&mut mm);
    assert_eq!((p.reports, p.chunks, p.again), (2, 64, true));
    assert_eq!(mm.reporting.state, ReportingState::Requested);
    assert_eq!(requests(&mut mm), 1, "the next pass is scheduled");
    assert_eq!(mm.reporting.stats.budget_spent, 1);
    let mut want: Vec<u32> = before[64..].to_vec();
    want.extend(before[..32].iter().rev());
    want.extend(before[32..64].iter().rev());
    assert_eq!(list(&mm, DMA32, 0, MigrateType::Movable), want);
    assert!(before[..64].iter().all(|&p| mm.pages.is_reported(p)));
    assert!(before[64..].iter().all(|&p| !mm.pages.is_reported(p)));
    // 64 more twice, then the last 8 as the zone's partial batch, and IDLE.
    let got: Vec<(u64, u64, bool)> = (0..3)
        .map(|_| {
            let p = pass(&mut mm);
            (p.reports, p.chunks, p.again)
        })
        .collect();
    assert_eq!(got, vec![(2, 64, true), (2, 64, true), (1, 8, false)]);
    assert_eq!(mm.reporting.state, ReportingState::Idle);
    assert_eq!(mm.reported_free_pages(), 200);
    assert_eq!(mm.reporting.stats.reports, 7);
}

/// §32.2 items 4–5: `__isolate_free_page` refuses a chunk that would leave the zone at or
/// below min + 2^order, which ends the list's walk; the chunk it stopped at is rotated to the
/// head (the reported chunks before it go to the tail), so allocations take unreported chunks
/// first (§32.3 item 4).
#[test]
fn s32_2_refused_isolation_rotates_the_list_to_the_first_unreported_chunk() {
    // min = 2048 pages: an order-10 chunk is isolated only while free > 3072.
    let mut mm = machine(16, Some(0), 8192);
    assert_eq!(mm.zones[DMA32].wmark[0], 2048);
    let boot: Vec<u32> = (0..8).map(c10).collect();
    assert_eq!(list(&mm, DMA32, 10, MigrateType::Movable), boot);
    // The head chunk was reported by an earlier pass.
    mm.pages.set_flag(c10(0), PG_REPORTED, true);
    let p = pass(&mut mm);
    // Chunks 1..5 isolated (free 8192 -> 3072), chunk 6 refused.
    assert_eq!((p.reports, p.chunks, p.again), (1, 5, false));
    assert_eq!(mm.reporting.stats.isolate_refused, 1);
    let want = [6, 7, 0, 5, 4, 3, 2, 1].map(c10).to_vec();
    assert_eq!(list(&mm, DMA32, 10, MigrateType::Movable), want);
    let reported: Vec<bool> = want.iter().map(|&c| mm.pages.is_reported(c)).collect();
    assert_eq!(reported, [false, false, true, true, true, true, true, true]);
    let got = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 10).unwrap();
    assert_eq!(got, c10(6), "the unreported chunk at the head");
    assert_eq!(
        mm.reporting.stats.host_fault_pages, 0,
        "its backing was never discarded"
    );
}

/// §32.2 item 5: with order ≥ pageblock_order − 1, isolating a chunk retypes its Unmovable and
/// Reclaimable blocks to Movable (no extfrag event, no counter), so the chunk comes back on the
/// Movable list, reported.
#[test]
fn s32_2_a_pass_retypes_free_unmovable_and_reclaimable_blocks_to_movable() {
    let mut mm = machine(64, Some(9), 128);
    fill(&mut mm, DMA32, 0);
    set_type(&mut mm, block(3), MigrateType::Unmovable);
    set_type(&mut mm, block(5), MigrateType::Reclaimable);
    free_range(&mut mm, 0, block(3), PB);
    free_range(&mut mm, 0, block(5), PB);
    free_range(&mut mm, 0, block(32), 32 * PB);
    assert_eq!(list(&mm, DMA32, 9, MigrateType::Unmovable), vec![block(3)]);
    assert_eq!(list(&mm, DMA32, 9, MigrateType::Reclaimable), vec![block(5)]);
    requests(&mut mm);
    mm.set_trace_mask(trace_kind::KMEM);
    let blocks_before = mm.blocks_by_type(DMA32);
    let stats_before = mm.stats;
    let p = pass(&mut mm);
    assert_eq!(p.retyped_blocks, 2);
    assert_eq!(mm.block_mt(block(3)), MigrateType::Movable);
    assert_eq!(mm.block_mt(block(5)), MigrateType::Movable);
    assert!(list(&mm, DMA32, 9, MigrateType::Unmovable).is_empty());
    assert!(list(&mm, DMA32, 9, MigrateType::Reclaimable).is_empty());
    let movable9 = list(&mm, DMA32, 9, MigrateType::Movable);
    assert_eq!(movable9, vec![block(5), block(3)], "put back last-isolated first");
    assert!(movable9.iter().all(|&c| mm.pages.is_reported(c)));
    let blocks = mm.blocks_by_type(DMA32);
    assert_eq!(blocks[0], blocks_before[0] - 1);
    assert_eq!(blocks[2], blocks_before[2] - 1);
    assert_eq!(blocks[1], blocks_before[1] + 2);
    assert!(
        !mm.take_trace()
            .iter()
            .any(|r| matches!(r.event, TraceEvent::MmPageAllocExtfrag { .. })),
        "no extfrag event"
    );
    assert_eq!(mm.stats, stats_before, "no counter moves");
    // The pass isolated 15 of the 16 order-10 chunks (free > min + 1024) and put everything back.
    assert_eq!(p.chunks, 2 + 15);
    assert_eq!(mm.zones[DMA32].nr_free_pages(), 2 * 512 + 16 * 1024);
}

/// §32.3 item 2: the flag goes when a chunk leaves the free lists — allocated, absorbed by a
/// merge (whichever buddy survives), isolated by compaction's free scanner.
#[test]
fn s32_3_reported_flag_is_cleared_on_allocation_merge_and_compaction_isolation() {
    // Allocation.
    let mut mm = machine(64, Some(9), 128);
    let p = pass(&mut mm);
    assert_eq!(p.chunks, 31, "the last order-10 chunk is refused (min + 1024)");
    let first = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 10).unwrap();
    assert!(mm.host_backed(first));
    assert_eq!(
        mm.reporting.stats.host_fault_pages, 0,
        "the unreported chunk goes first"
    );
    let head = mm.zones[DMA32].free_list_first(10, MigrateType::Movable).unwrap();
    assert!(mm.pages.is_reported(head));
    let got = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 10).unwrap();
    assert_eq!(got, head);
    assert!(!mm.pages.is_reported(got));
    mm.free_pages(0, got, 10);
    assert!(mm.pages.is_buddy_of_order(got, 10) && !mm.pages.is_reported(got));

    // Merge: a reported order-9 chunk absorbed by its buddy's free, as the higher and as the
    // lower half.
    let mut mm = machine(64, Some(9), 128);
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, block(10), PB);
    free_range(&mut mm, 0, block(13), PB);
    free_range(&mut mm, 0, block(32), 32 * PB);
    requests(&mut mm);
    pass(&mut mm);
    assert!(mm.pages.is_reported(block(10)) && mm.pages.is_reported(block(13)));
    free_range(&mut mm, 0, block(11), PB);
    assert!(mm.pages.is_buddy_of_order(block(10), 10));
    assert!(
        !mm.pages.is_reported(block(10)),
        "the survivor is a new, unreported chunk"
    );
    free_range(&mut mm, 0, block(12), PB);
    assert!(mm.pages.is_buddy_of_order(block(12), 10));
    assert!(!mm.pages.is_reported(block(12)));
    assert_eq!(mm.pages.kind(block(13)), PageKind::Tail);
    assert_eq!(
        requests(&mut mm),
        1,
        "the first merge to order 10 requests a pass, the second finds it requested"
    );

    // Compaction's free scanner (the set-up of §24.3's test, with reporting at order 2).
    let mut mm = machine(16, Some(2), 128);
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, block(14), 1024);
    for c in [block(2), block(13) + 8, block(9)] {
        free_range(&mut mm, 0, c, 4);
    }
    requests(&mut mm);
    pass(&mut mm);
    for c in [block(2), block(13) + 8, block(9)] {
        assert!(mm.pages.is_reported(c), "{c:#x}");
    }
    mm.set_block_skip(block(13), true);
    mm.zones[DMA32].compact.init_free_pfn = block(16);
    mm.zones[DMA32].compact.cached_free_pfn = block(10);
    let mut cc = CompactControl::new(DMA32, 3, Gfp::GFP_KERNEL, MigrateMode::SyncLight, 0);
    cc.migrate_pfn = BASE;
    cc.free_pfn = block(15);
    cc.nr_migratepages = 4;
    cc.fast_search_fail = 2;
    mm.fast_isolate_freepages(&mut cc);
    assert_eq!(cc.freepages[2], vec![block(13) + 8]);
    assert_eq!(mm.pages.kind(block(13) + 8), PageKind::Isolated);
    assert!(!mm.pages.is_reported(block(13) + 8));
    assert!(mm.pages.is_reported(block(2)) && mm.pages.is_reported(block(9)));
}

/// §32.3 items 3 and 6: a reported chunk split by an allocation leaves its remainders on the
/// lists unreported, though the host still does not back them; the allocated pages take one
/// host fault each, once.
#[test]
fn s32_3_split_remainders_are_unreported_and_not_host_backed() {
    let mut mm = machine(64, Some(9), 128);
    pass(&mut mm);
    // The unreported chunk the pass stopped at comes first: allocate it out of the way.
    let unreported = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 10).unwrap();
    assert_eq!(mm.reporting.stats.host_fault_pages, 0);
    assert!(mm.host_backed(unreported));
    let x = mm.zones[DMA32].free_list_first(10, MigrateType::Movable).unwrap();
    assert!(mm.pages.is_reported(x));
    assert!((x..x + 1024).all(|p| !mm.host_backed(p)));
    // Order 4 (not a PCP order): __rmqueue_smallest splits x.
    let got = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 4).unwrap();
    assert_eq!(got, x);
    for o in 4..10 {
        let r = x + (1 << o);
        assert!(mm.pages.is_buddy_of_order(r, o), "remainder {r:#x} order {o}");
        assert!(
            !mm.pages.is_reported(r),
            "remainder {r:#x} order {o} is unreported"
        );
        assert!(
            (r..r + (1 << o)).all(|p| !mm.host_backed(p)),
            "and not host-backed"
        );
    }
    assert!((x..x + 16).all(|p| mm.host_backed(p)));
    assert_eq!(mm.reporting.stats.host_fault_pages, 16);
    assert_eq!(mm.take_host_faults(), 16);
    // Freed and allocated again: the same pages, backed now, no host fault.
    mm.free_pages(0, got, 4);
    let again = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 4).unwrap();
    assert_eq!(again, x);
    assert_eq!(mm.reporting.stats.host_fault_pages, 16);
    assert_eq!(mm.take_host_faults(), 0);
    // host_write counts only what the host does not back: x+8.. is, x+16.. is not.
    assert_eq!(mm.host_write(x + 8, 16), 8);
    assert_eq!(mm.host_write(x + 8, 16), 0);
}

/// §32.2 item 1: reporting's own put-backs do not notify; the pass that reports everything
/// leaves the device IDLE with no request queued.
#[test]
fn s32_2_put_backs_do_not_notify() {
    let mut mm = machine(64, Some(9), 128);
    assert_eq!(requests(&mut mm), 1);
    let p = pass(&mut mm);
    assert!(p.chunks > 0 && !p.again);
    assert_eq!(requests(&mut mm), 0, "31 put-backs of order 10, no notification");
    assert_eq!(mm.reporting.state, ReportingState::Idle);
}

/// §32.1 item 2: a write of page_reporting_order takes effect at the next pass (and for
/// notifications at once).
#[test]
fn s32_1_a_new_order_applies_from_the_next_pass() {
    let mut mm = machine(16, Some(9), 128);
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, block(4), 4 * PB);
    requests(&mut mm);
    assert_eq!(pass(&mut mm).chunks, 0, "2048 free pages: below low + 32·512");
    free_range(&mut mm, 0, block(0), 256);
    assert_eq!(requests(&mut mm), 0, "order 8 < 9");
    mm.set_page_reporting_order(8);
    free_range(&mut mm, 0, block(2), 256);
    assert_eq!(requests(&mut mm), 1, "order 8 notifies now");
    // 2560 free pages: below low (40) + 32·256, skipped; at order 3 the pass reports both
    // order-8 chunks and one order-10 chunk (the other would leave free ≤ min + 1024).
    assert_eq!(pass(&mut mm).chunks, 0);
    mm.set_page_reporting_order(3);
    assert_eq!(pass(&mut mm).chunks, 3);
    assert!(mm.pages.is_reported(block(0)) && mm.pages.is_reported(block(2)));
}
