//! kcompactd's wake-ups, loop and back-off: one test per rule of docs/model §26 (and
//! §9.11–§9.12), named after its section.

use crate::common;

use common::*;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::node::trace_kind;
use fraglab_mm::trace::TraceEvent;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm, Wakeup};

/// A DMA32 zone of `blocks` pageblocks with a tiny min watermark.
fn small(blocks: u32) -> Mm {
    dma32(blocks, 1, tun_kb(128))
}

/// Every other page of the zone free (anon order-0 folios in between), PCPs drained, kswapd
/// asleep: zone score 100, node score 99, order 9 suitable for kcompactd.
fn fragmented(blocks: u32) -> (Mm, Vec<FolioId>) {
    let mut mm = small(blocks);
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::Anon, false) {
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
    mm.kswapd_until_sleep(0, 20);
    mm.take_wakeups();
    (mm, kept)
}

/// Every other page free between unmovable kernel pages: nothing can be migrated.
fn unmovable(blocks: u32) -> Mm {
    let mut mm = small(blocks);
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
    mm.take_wakeups();
    mm
}

fn kcompactd_wakeups(mm: &mut Mm) -> usize {
    mm.take_wakeups()
        .iter()
        .filter(|w| matches!(w, Wakeup::Kcompactd { nid: 0, .. }))
        .count()
}

#[test]
fn section_26_1_order_zero_returns_and_a_request_is_recorded_without_a_wake_up() {
    let mut mm = small(8);
    let top = mm.kcompactd_max_zoneidx(0);
    assert!(!mm.wakeup_kcompactd(0, 0, DMA32));
    assert_eq!(mm.compact.kcompactd[0].max_order, 0, "order 0 records nothing");
    // Fresh: a free order-9 chunk exists, so no zone returns CONTINUE (SUCCESS): no wake-up, but
    // the request is kept.
    assert!(!mm.wakeup_kcompactd(0, 4, DMA32));
    assert_eq!(kcompactd_wakeups(&mut mm), 0);
    assert_eq!(
        (
            mm.compact.kcompactd[0].max_order,
            mm.compact.kcompactd[0].highest_zoneidx
        ),
        (4, DMA32.min(top))
    );
    // max(order), min(zone).
    assert!(!mm.wakeup_kcompactd(0, 2, DMA32));
    assert_eq!(mm.compact.kcompactd[0].max_order, 4);
    check(&mm);
}

#[test]
fn section_26_1_only_a_sleeping_kcompactd_is_woken_and_checked() {
    let (mut mm, _) = fragmented(16);
    mm.compact.kcompactd[0].threaded = true;
    mm.set_trace_mask(trace_kind::COMPACTION_DECIDE | trace_kind::COMPACTION_KCOMPACTD);
    assert!(mm.wakeup_kcompactd(0, 9, DMA32), "asleep and suitable: woken");
    assert_eq!(kcompactd_wakeups(&mut mm), 1);
    assert!(mm.compact.kcompactd[0].awake);
    let after_first = mm.trace.buf.len();
    assert!(
        after_first >= 2,
        "suitability check and mm_compaction_wakeup_kcompactd"
    );
    // kcompactd is awake (woken, not yet waiting again): no suitability check, no tracepoint,
    // no wake-up; the request is still recorded.
    assert!(!mm.wakeup_kcompactd(0, 10, DMA32));
    assert_eq!(kcompactd_wakeups(&mut mm), 0);
    assert_eq!(
        mm.trace.buf.len(),
        after_first,
        "no suitability check while awake"
    );
    assert_eq!(mm.compact.kcompactd[0].max_order, 10);
    // The loop serves it and waits again: the next wake-up is checked and wakes it.
    let c = mm.kcompactd_cycle(0);
    assert!(c.did_work);
    assert!(!mm.compact.kcompactd[0].awake);
    let woken = mm.wakeup_kcompactd(0, 9, DMA32);
    assert_eq!(
        woken,
        mm.kcompactd_node_suitable(0),
        "asleep again: the check decides"
    );
    assert_eq!(kcompactd_wakeups(&mut mm), woken as usize);
    check(&mm);
}

#[test]
fn section_26_2_a_triggered_check_takes_precedence_and_the_pending_order_runs_right_after() {
    let (mut mm, _) = fragmented(16);
    mm.wakeup_kcompactd(0, 9, DMA32);
    assert_eq!(mm.compact.kcompactd[0].max_order, 9);
    mm.compact.kcompactd[0].proactive_trigger = true;
    let c = mm.kcompactd_cycle(0);
    assert!(
        c.proactive && !c.did_work,
        "the trigger runs the proactive check, not the work"
    );
    assert!(!mm.compact.kcompactd[0].proactive_trigger, "cleared");
    assert_eq!(
        c.next_timeout_ms,
        Some(0),
        "the order is pending: the wait returns at once"
    );
    let c = mm.kcompactd_cycle(0);
    assert!(c.did_work && !c.proactive);
    assert_eq!(mm.compact.kcompactd[0].max_order, 0);
    assert_eq!(c.next_timeout_ms, Some(500));
    // The sysctl write path: without a thread kcompactd_trigger runs the woken loop itself.
    mm.wakeup_kcompactd(0, 9, DMA32);
    let before = mm.stat(Stat::compact_daemon_wake);
    let (woken, _) = mm.kcompactd_trigger(0);
    assert!(woken);
    assert_eq!(
        mm.stat(Stat::compact_daemon_wake),
        before + 1,
        "the pending order ran after"
    );
    assert_eq!(mm.compact.kcompactd[0].max_order, 0);
    check(&mm);
}

#[test]
fn section_26_2_the_32s_back_off_honoured_by_ticks_and_ended_by_a_wake_up() {
    let mut mm = unmovable(16);
    assert!(mm.should_proactive_compact_node(0));
    let c = mm.kcompactd_cycle(0);
    assert!(c.proactive && c.stats.migrated_pages == 0);
    assert_eq!(c.next_timeout_ms, Some(32_000), "no progress: 500 ms << 6");
    // 63 ticks of 500 ms: kcompactd sleeps on; the 64th ends the wait.
    let scanned = mm.stat(Stat::compact_daemon_migrate_scanned);
    for _ in 0..63 {
        assert!(mm.kcompactd_tick(0, 500).is_none());
    }
    assert_eq!(
        mm.stat(Stat::compact_daemon_migrate_scanned),
        scanned,
        "nothing ran"
    );
    assert!(mm.kcompactd_tick(0, 500).is_some());
    assert!(
        mm.stat(Stat::compact_daemon_migrate_scanned) > scanned,
        "the proactive run"
    );
    assert_eq!(
        mm.compact.kcompactd[0].next_timeout_ms,
        Some(32_000),
        "still no progress"
    );
    // A successful wake-up: the work resets the timeout to 500 ms.
    assert!(mm.wakeup_kcompactd(0, 9, DMA32));
    mm.kcompactd_until_wait(0);
    assert_eq!(mm.compact.kcompactd[0].next_timeout_ms, Some(500));
    assert!(mm.kcompactd_tick(0, 500).is_some());
    // Proactiveness 0: no timeout, ticks never end the wait.
    mm.compact.cfg.proactiveness = 0;
    mm.kcompactd_timer(0);
    assert_eq!(mm.compact.kcompactd[0].next_timeout_ms, None);
    assert!(mm.kcompactd_tick(0, 500_000).is_none());
    check(&mm);
}

#[test]
fn section_26_2_5_an_equal_order_during_the_work_is_absorbed_a_higher_one_runs_right_after() {
    let (mut mm, _) = fragmented(16);
    mm.compact.kcompactd[0].threaded = true;
    mm.wakeup_kcompactd(0, 4, DMA32);
    let c = mm.kcompactd_run(0);
    assert!(c.did_work);
    // While the work is charged kcompactd is awake: a lower order is absorbed.
    assert!(!mm.wakeup_kcompactd(0, 3, DMA32));
    assert!(!mm.wakeup_kcompactd(0, 4, DMA32));
    assert_eq!(mm.compact.kcompactd[0].max_order, 0);
    assert_eq!(mm.kcompactd_wait(0), Some(500), "nothing pending: a real wait");
    assert!(!mm.compact.kcompactd[0].awake);
    // A higher order arriving during the work stays recorded: the wait returns at once.
    mm.wakeup_kcompactd(0, 4, DMA32);
    assert!(mm.kcompactd_run(0).did_work);
    assert!(!mm.wakeup_kcompactd(0, 9, DMA32));
    assert_eq!(mm.compact.kcompactd[0].max_order, 9);
    assert_eq!(mm.kcompactd_wait(0), Some(0));
    assert!(
        mm.compact.kcompactd[0].awake,
        "the wait returned at once: still awake"
    );
    let wakes = mm.stat(Stat::compact_daemon_wake);
    assert!(mm.kcompactd_run(0).did_work);
    assert_eq!(mm.stat(Stat::compact_daemon_wake), wakes + 1);
    assert_eq!(mm.kcompactd_wait(0), Some(500));
    check(&mm);
}

#[test]
fn section_26_2_5_do_work_checks_deferral_before_suitability() {
    let mut mm = small(8);
    // Fresh: order 9 is already satisfied (SUCCESS), but the zone is deferred for it.
    mm.defer_compaction(DMA32, 9);
    let considered = mm.zones[DMA32].compact.considered;
    mm.wakeup_kcompactd(0, 9, DMA32);
    let st = mm.kcompactd_do_work(0);
    assert_eq!(st.runs, 0);
    assert_eq!(
        mm.zones[DMA32].compact.considered,
        considered + 1,
        "compaction_deferred ran first and counted the zone"
    );
    check(&mm);
}

#[test]
fn section_26_3_a_low_score_only_sleeps_and_hysteresis_between_low_and_high() {
    let mut mm = small(8);
    mm.set_trace_mask(trace_kind::COMPACTION);
    assert_eq!(mm.fragmentation_score_node(0), 0);
    let c = mm.kcompactd_cycle(0);
    assert!(!c.proactive && !c.did_work);
    for s in [
        Stat::compact_daemon_wake,
        Stat::compact_daemon_migrate_scanned,
        Stat::compact_daemon_free_scanned,
        Stat::compact_migrate_scanned,
    ] {
        assert_eq!(mm.stat(s), 0, "{s:?}");
    }
    assert_eq!(mm.trace.buf.len(), 1, "only mm_compaction_kcompactd_sleep");
    assert!(matches!(
        mm.trace.buf[0].event,
        TraceEvent::MmCompactionKcompactdSleep { nid: 0 }
    ));
    // Node score 99 with proactiveness 5: low 95, high min(95 + 10, 100) = 100 → no run.
    let (mut mm, _) = fragmented(16);
    assert_eq!(mm.fragmentation_score_node(0), 99);
    mm.compact.cfg.proactiveness = 5;
    assert_eq!(mm.fragmentation_score_wmark(false), 100);
    assert!(!mm.kcompactd_cycle(0).proactive);
    // Proactiveness 20: high 90 → a run that compacts the zone down to its own score ≤ 80;
    // it bumps compact_daemon_*_scanned but not compact_daemon_wake.
    mm.compact.cfg.proactiveness = 20;
    let c = mm.kcompactd_cycle(0);
    assert!(c.proactive && c.stats.migrated_pages > 0);
    assert!(mm.fragmentation_score_zone(DMA32) <= 80);
    assert!(mm.stat(Stat::compact_daemon_migrate_scanned) > 0);
    assert!(mm.stat(Stat::compact_daemon_free_scanned) > 0);
    assert_eq!(mm.stat(Stat::compact_daemon_wake), 0);
    // The score is now between low and high's reach: the next check does nothing.
    let scanned = mm.stat(Stat::compact_migrate_scanned);
    assert!(!mm.kcompactd_cycle(0).proactive);
    assert_eq!(mm.stat(Stat::compact_migrate_scanned), scanned);
    check(&mm);
}
