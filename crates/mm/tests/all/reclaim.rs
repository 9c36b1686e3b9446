//! Reclaim (docs/model §10): swap and anonymous reclaim, get_scan_count, refaults, slab
//! shrinking, compaction_ready in direct reclaim, and the vmscan tracepoints.

use crate::common;

use common::*;
use fraglab_mm::filemap::Mapping;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::node::trace_kind;
use fraglab_mm::trace::{render_trace, TraceEvent};
use fraglab_mm::vmscan::{
    ScanBalance, ScanControl, LRU_ACTIVE_ANON, LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE,
};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm, Tunables, ZoneType};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// Half anon, half clean page cache, all of memory; swap of `swap` pages.
fn mixed(swap: u64, swappiness: u32) -> (Mm, Vec<FolioId>, Vec<FolioId>) {
    let tun = Tunables {
        swappiness,
        ..tun_kb(512)
    };
    let mut mm = dma32(16, 1, tun);
    mm.reclaim.swap.total = swap;
    let (anon, file) = fill_anon_and_file(&mut mm);
    (mm, anon, file)
}

#[test]
fn s10_4_2_no_swap_or_swappiness_0_scans_file_only() {
    let (mm, _, _) = mixed(0, 60);
    let sc = ScanControl::direct(1, 0, 0);
    assert_eq!(mm.get_scan_count(&sc).0, ScanBalance::File, "no swap");
    let (mm, _, _) = mixed(100_000, 0);
    let mut sc = ScanControl::direct(1, 0, 0);
    sc.priority = 4;
    let (b, nr) = mm.get_scan_count(&sc);
    assert_eq!(b, ScanBalance::Fract);
    assert_eq!(
        nr[LRU_INACTIVE_ANON as usize], 0,
        "swappiness 0: anon gets no share"
    );
    assert!(nr[LRU_INACTIVE_FILE as usize] > 0);
    // Priority 0 with swappiness > 0 scans both equally.
    let (mm, _, _) = mixed(100_000, 60);
    let mut sc = ScanControl::direct(1, 0, 0);
    sc.priority = 0;
    let (b, nr) = mm.get_scan_count(&sc);
    assert_eq!(b, ScanBalance::Equal);
    assert_eq!(
        nr[LRU_INACTIVE_ANON as usize],
        mm.reclaim.lruvec[0].pages[LRU_INACTIVE_ANON as usize]
    );
}

#[test]
fn s10_3_6_anon_is_swapped_out_only_with_room() {
    // Only anonymous memory, swap of 200 pages: kswapd swaps out until the node is balanced.
    let mut mm = dma32(16, 1, tun_kb(512));
    mm.reclaim.swap.total = 200;
    let mut anon = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        anon.push(id);
    }
    mm.kswapd_until_sleep(0, 32);
    let out = mm.stat(Stat::pswpout);
    assert!(out > 0 && out <= 200, "pswpout {out}");
    assert_eq!(mm.reclaim.swap.used, out);
    assert_eq!(mm.stat(Stat::pgsteal_anon), out);
    // Swapped contents are gone from memory and counted by token; swap-in brings one page back.
    let gone: Vec<FolioId> = anon
        .iter()
        .copied()
        .filter(|&id| !mm.folios.folios[id as usize].live())
        .collect();
    assert_eq!(gone.len() as u64, out);
    check(&mm);
    let (mut mm, _, _) = mixed(0, 200);
    mm.kswapd_until_sleep(0, 32);
    assert_eq!(
        mm.stat(Stat::pswpout),
        0,
        "no swap device: anon is never reclaimed"
    );
    assert_eq!(mm.stat(Stat::pgscan_anon), 0);
    check(&mm);
}

#[test]
fn s10_3_6_swap_in_and_free() {
    let (mut mm, anon, _) = mixed(64, 200);
    let t = mm.folios.get(anon[0]).token();
    let mut sc = ScanControl::direct(3, 0, 0);
    // Reclaim the whole inactive anon tail directly.
    mm.shrink_inactive_list(64, LRU_INACTIVE_ANON, &mut sc);
    assert!(mm.swapped(t) == 1, "the oldest anon page is in swap");
    let used = mm.reclaim.swap.used;
    let back = mm.swap_in(0, t).unwrap();
    assert_eq!(mm.folios.get(back).token(), t);
    assert_eq!(mm.reclaim.swap.used, used - 1);
    assert_eq!(mm.stat(Stat::pswpin), 1);
    assert_eq!(mm.swap_in(0, t), None, "nothing left in swap for it");
    let t2 = mm.folios.folios[anon[1] as usize].token();
    mm.swap_free_token(t2);
    assert_eq!(mm.reclaim.swap.used, used - 2);
    check(&mm);
}

#[test]
fn s10_3_6_large_anon_folio_is_split_when_swap_lacks_room() {
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.reclaim.swap.total = 100;
    let thp = mm
        .alloc_folio(0, Gfp::GFP_TRANSHUGE, 9, FolioKind::Anon, false)
        .unwrap();
    let mut sc = ScanControl::direct(3, 0, 0);
    let got = mm.shrink_inactive_list(512, LRU_INACTIVE_ANON, &mut sc);
    assert_eq!(mm.stat(Stat::thp_swpout_fallback), 1);
    assert_eq!(mm.stat(Stat::thp_swpout), 0);
    assert_eq!(mm.stat(Stat::thp_split_page), 1);
    assert_eq!(got, 100, "the pieces fill the swap device");
    assert!(!mm.folios.folios[thp as usize].live() || mm.folios.folios[thp as usize].order == 0);
    check(&mm);
    // With room, a THP swaps out whole.
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.reclaim.swap.total = 1024;
    mm.alloc_folio(0, Gfp::GFP_TRANSHUGE, 9, FolioKind::Anon, false)
        .unwrap();
    let mut sc = ScanControl::direct(3, 0, 0);
    assert_eq!(mm.shrink_inactive_list(512, LRU_INACTIVE_ANON, &mut sc), 512);
    assert_eq!(mm.stat(Stat::thp_swpout), 1);
    assert_eq!(mm.stat(Stat::thp_split_page), 0);
    check(&mm);
}

#[test]
fn s10_3_8_refault_within_the_workingset_activates() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let m = mm.add_mapping(Mapping::no_large_folios());
    // Page cache 0..100 and a large active file list (the workingset).
    mm.filemap_write(0, m, 0, 100 * 4096);
    for id in mm.folios.live().map(|(id, _)| id).collect::<Vec<_>>() {
        mm.folio_mark_dirty(id, false);
        let f = mm.folios.get(id);
        if f.index >= 50 {
            // Two accesses activate a page-cache folio (the write itself marks nothing).
            mm.folio_mark_accessed(id);
            mm.folio_mark_accessed(id);
        }
    }
    assert_eq!(
        mm.reclaim.lruvec[0].pages[fraglab_mm::vmscan::LRU_ACTIVE_FILE as usize],
        50
    );
    // Evict the ten oldest clean pages (they are not referenced).
    let mut sc = ScanControl::direct(3, 0, 0);
    let evicted = mm.shrink_inactive_list(10, LRU_INACTIVE_FILE, &mut sc);
    assert_eq!(evicted, 10);
    assert_eq!(mm.cache.index.shadows_len(), 10);
    // Re-reading them: each is a refault; the distance (≤ 10) is within the workingset.
    let mut ra = fraglab_mm::filemap::ReadaheadState::default();
    let st = mm.filemap_read(0, m, &mut ra, 0, 10, 100);
    assert_eq!(st.miss_pages, 10);
    assert_eq!(mm.stat(Stat::workingset_refault_file), 10);
    assert_eq!(mm.stat(Stat::workingset_activate_file), 10);
    assert_eq!(mm.cache.index.shadows_len(), 0);
    check(&mm);
}

#[test]
fn s10_3_8_refault_beyond_the_workingset_does_not_activate() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let m = mm.add_mapping(Mapping::no_large_folios());
    mm.filemap_write(0, m, 0, 2000 * 4096);
    for id in mm.folios.live().map(|(id, _)| id).collect::<Vec<_>>() {
        mm.folio_mark_dirty(id, false);
    }
    // Evict everything: the first evicted page's distance grows to ~2000, and nothing is active.
    let mut sc = ScanControl::direct(3, 0, 0);
    sc.nr_to_reclaim = u64::MAX;
    mm.shrink_inactive_list(2000, LRU_INACTIVE_FILE, &mut sc);
    let mut ra = fraglab_mm::filemap::ReadaheadState::default();
    mm.filemap_read(0, m, &mut ra, 0, 1, 2000);
    assert!(mm.stat(Stat::workingset_refault_file) >= 1);
    assert_eq!(mm.stat(Stat::workingset_activate_file), 0);
    check(&mm);
}

#[test]
fn s10_5_4_compaction_ready_stops_costly_direct_reclaim() {
    // Plenty of free memory in order-0 holes and plenty of page cache: compaction for order 9
    // is suitable at the high watermark, so direct reclaim for order 9 does not shrink at all
    // and reports 1 ("compaction ready"); for order 3 it reclaims.
    let mut mm = dma32(16, 1, tun_kb(128));
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false) {
        ids.push(id);
    }
    for id in ids.iter().step_by(2) {
        mm.free_folio(0, *id);
    }
    mm.drain_all_pages();
    mm.trace.mask = trace_kind::VMSCAN_DIRECT;
    assert_eq!(mm.try_to_free_pages(0, Gfp::GFP_TRANSHUGE, 9), 1);
    assert_eq!(mm.stat(Stat::pgscan_direct), 0);
    let got = mm.try_to_free_pages(0, Gfp::GFP_KERNEL, 3);
    assert!(got >= 32, "{got}");
    assert!(mm.stat(Stat::pgscan_direct) > 0);
    let text = render_trace(&mm.take_trace());
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0].ends_with("mm_vmscan_direct_reclaim_begin: order=9 gfp_flags=GFP_TRANSHUGE"),
        "{}",
        lines[0]
    );
    // The end event prints the return value: 1 when it stopped only for compaction.
    assert!(
        lines[1].ends_with("mm_vmscan_direct_reclaim_end: nr_reclaimed=1"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].ends_with("mm_vmscan_direct_reclaim_begin: order=3 gfp_flags=GFP_KERNEL"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].ends_with(&format!("mm_vmscan_direct_reclaim_end: nr_reclaimed={got}")),
        "{}",
        lines[3]
    );
    check(&mm);
}

#[test]
fn s15_3_lru_tracepoints_render_as_the_kernel_prints_them() {
    let (mut mm, _, _) = mixed(0, 60);
    mm.trace.mask = trace_kind::VMSCAN;
    mm.kswapd_until_sleep(0, 8);
    let recs = mm.take_trace();
    let text = render_trace(&recs);
    assert!(text.contains("mm_vmscan_kswapd_wake: nid=0 order=0"), "{text}");
    assert!(text.contains("mm_vmscan_kswapd_sleep: nid=0"));
    let iso = text
        .lines()
        .find(|l| l.contains("mm_vmscan_lru_isolate: "))
        .unwrap();
    // kswapd reclaims up to the highest zone asked for: GFP_HIGHUSER_MOVABLE's, Movable (3).
    assert!(
        iso.contains("classzone=3 order=0 nr_requested=") && iso.ends_with("lru=inactive_file"),
        "{iso}"
    );
    let inact = text
        .lines()
        .find(|l| l.contains("mm_vmscan_lru_shrink_inactive: "))
        .unwrap();
    assert!(
        inact.contains("nid=0 nr_scanned=") && inact.ends_with("flags=RECLAIM_WB_FILE|RECLAIM_WB_ASYNC"),
        "{inact}"
    );
    // Every recorded event parses back to itself.
    for r in &recs {
        let line = render_trace(std::slice::from_ref(r));
        let line = line.lines().find(|l| !l.starts_with('#')).unwrap();
        assert_eq!(
            fraglab_mm::trace::parse_trace_line(line).map(|p| p.event),
            Some(r.event.clone())
        );
    }
    assert!(recs
        .iter()
        .any(|r| matches!(r.event, TraceEvent::MmVmscanLruShrinkInactive { .. })));
}

/// Allocates an order-`order` page-cache folio and adds it at `index` of `mapping` as the
/// read/write paths do (`page_cache_insert`: shadows taken, refault decided).
fn add_to_page_cache(mm: &mut Mm, mapping: u32, index: u64, order: u32) -> FolioId {
    let id = mm
        .alloc_folio(0, NO_RECLAIM, order, FolioKind::File, false)
        .unwrap();
    let f = &mut mm.folios.folios[id as usize];
    f.mapping = mapping;
    f.index = index;
    mm.page_cache_insert(id);
    id
}

/// A control block that reclaims without limit at `priority` (kswapd-like: no proportional
/// reclaim), all zones eligible.
fn sc_at(priority: i32) -> ScanControl {
    let mut sc = ScanControl::direct(3, 0, 0);
    sc.priority = priority;
    sc.nr_to_reclaim = u64::MAX;
    sc.kswapd = true;
    sc
}

/// §10.4.4 `isolate_lru_folios`: folios in zones above reclaim_idx are skipped (pgskip_<zone>),
/// count as scanned (pgscan, the isolate event's nr_scanned), and are spliced back to the head
/// of the list in their old relative order; the scan goes on until enough eligible pages are
/// taken.
#[test]
fn s10_4_4_skipped_folios_count_as_scanned_and_go_to_the_head() {
    let mut mm = boot(
        vec![
            zone(ZoneType::Dma32, BASE, 8),
            zone(ZoneType::Normal, BASE + 8 * PB, 1),
        ],
        1,
        tun_kb(128),
    );
    let mut normal = Vec::new();
    let mut dma32 = Vec::new();
    for _ in 0..600 {
        let id = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false).unwrap();
        if mm.pfn_zone(mm.folios.get(id).pfn) == Some(NORMAL) {
            normal.push(id);
        } else {
            dma32.push(id);
        }
    }
    // The zone allocator filled Normal first: the oldest folios are all in Normal.
    assert!(normal.len() > 100 && dma32.len() > 32);
    let before = mm.lru_folios(LRU_INACTIVE_FILE);
    assert!(before.ends_with(&normal.iter().rev().copied().collect::<Vec<_>>()));
    mm.trace.mask = trace_kind::VMSCAN_LRU;
    let mut sc = sc_at(12);
    sc.reclaim_idx = DMA32;
    sc.kswapd = false;
    let got = mm.shrink_inactive_list(32, LRU_INACTIVE_FILE, &mut sc);
    assert_eq!(got, 32);
    let skipped = normal.len() as u64;
    assert_eq!(mm.stat(Stat::pgskip_normal), skipped);
    assert_eq!(mm.stat(Stat::pgscan_direct), skipped + 32);
    assert_eq!(mm.stat(Stat::pgscan_file), skipped + 32);
    assert_eq!(mm.stat(Stat::pgsteal_direct), 32);
    // The 32 oldest DMA32 folios went; the Normal block now heads the list, newest first.
    assert!(dma32[..32]
        .iter()
        .all(|&id| !mm.folios.folios[id as usize].live()));
    let after = mm.lru_folios(LRU_INACTIVE_FILE);
    let want_head: Vec<FolioId> = normal.iter().rev().copied().collect();
    assert_eq!(&after[..normal.len()], &want_head[..]);
    let text = render_trace(&mm.take_trace());
    assert!(
        text.contains(&format!(
            "mm_vmscan_lru_isolate: classzone=1 order=0 nr_requested=32 nr_scanned={} nr_skipped={skipped} \
             nr_taken=32 lru=inactive_file",
            skipped + 32
        )),
        "{text}"
    );
    check(&mm);
}

/// §10.3.7: `shrink_active_list` deactivates every folio it takes (no VM_EXEC in the model),
/// sets PG_workingset, keeps a page-cache folio's PG_referenced (one more access reactivates
/// it) but clears an anon folio's young bit; pgrefill/pgdeactivate and the exact event.
#[test]
fn s10_3_7_deactivation_sets_workingset_and_keeps_file_referenced() {
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.reclaim.swap.total = 1000;
    let f: Vec<FolioId> = (0..3)
        .map(|_| mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false).unwrap())
        .collect();
    let a = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).unwrap();
    for &id in f.iter().chain([&a]) {
        mm.folio_mark_accessed(id);
        mm.folio_mark_accessed(id);
        mm.folio_mark_accessed(id); // referenced again while active
        assert!(mm.folios.get(id).active() && mm.folios.get(id).referenced());
    }
    mm.trace.mask = trace_kind::VMSCAN_LRU;
    let mut sc = sc_at(12);
    mm.shrink_active_list(32, LRU_ACTIVE_FILE, &mut sc);
    mm.shrink_active_list(32, LRU_ACTIVE_ANON, &mut sc);
    assert_eq!(mm.stat(Stat::pgrefill), 4);
    assert_eq!(mm.stat(Stat::pgdeactivate), 4);
    for &id in &f {
        let fo = mm.folios.get(id);
        assert!(!fo.active() && fo.workingset() && fo.referenced(), "{fo:?}");
    }
    let fa = mm.folios.get(a);
    assert!(!fa.active() && fa.workingset() && !fa.referenced());
    // The oldest deactivated folio deepest: the list keeps their order.
    assert_eq!(mm.lru_folios(LRU_INACTIVE_FILE), vec![f[2], f[1], f[0]]);
    let act = mm.stat(Stat::pgactivate);
    mm.folio_mark_accessed(f[0]);
    assert!(
        mm.folios.get(f[0]).active(),
        "one access reactivates a referenced page-cache folio"
    );
    assert_eq!(mm.stat(Stat::pgactivate), act + 1);
    let text = render_trace(&mm.take_trace());
    assert!(text.contains(
        "mm_vmscan_lru_shrink_active: nid=0 nr_taken=3 nr_active=0 nr_deactivated=3 nr_referenced=0 \
         priority=12 flags=RECLAIM_WB_FILE|RECLAIM_WB_ASYNC"
    ));
    assert!(text.contains(
        "mm_vmscan_lru_shrink_active: nid=0 nr_taken=1 nr_active=0 nr_deactivated=1 nr_referenced=0 \
         priority=12 flags=RECLAIM_WB_ANON|RECLAIM_WB_ASYNC"
    ));
    check(&mm);
}

/// §10.4.2: the fractional split rounds down (`div64_u64`, the root memcg is online) and the
/// targets count only zones ≤ reclaim_idx (`lruvec_lru_size`).
#[test]
fn s10_4_2_fraction_rounds_down_over_eligible_zones() {
    let (mm, _, _) = mixed(100_000, 60);
    // No reclaim cost yet: ap = 60, fp = 140 of 200.
    let mut seen_remainder = false;
    for prio in 1..8 {
        let mut sc = ScanControl::direct(3, 0, 0);
        sc.priority = prio;
        let (b, nr) = mm.get_scan_count(&sc);
        assert_eq!(b, ScanBalance::Fract);
        let anon = mm.reclaim.lruvec[0].pages[LRU_INACTIVE_ANON as usize] >> prio;
        let file = mm.reclaim.lruvec[0].pages[LRU_INACTIVE_FILE as usize] >> prio;
        assert_eq!(nr[LRU_INACTIVE_ANON as usize], anon * 60 / 200, "prio {prio}");
        assert_eq!(nr[LRU_INACTIVE_FILE as usize], file * 140 / 200, "prio {prio}");
        seen_remainder |= anon * 60 % 200 != 0;
    }
    assert!(seen_remainder, "some target must have needed rounding");
    // Only zones ≤ reclaim_idx count: everything is in DMA32, so a DMA-only reclaim has none.
    let mut sc = ScanControl::direct(0, 0, 0);
    sc.priority = 1;
    let (_, nr) = mm.get_scan_count(&sc);
    assert_eq!(nr, [0; 5]);
}

/// §10.4.3: once nr_to_reclaim is met (kswapd, no proportional reclaim), the side with less
/// left stops, the other is cut to its remaining share, and the loop ends the next time the
/// goal is seen met — it does not finish the cut target.
#[test]
fn s10_4_3_proportional_adjustment_then_stop() {
    let tun = Tunables {
        swappiness: 100,
        ..tun_kb(128)
    };
    let mut mm = dma32(16, 1, tun);
    mm.reclaim.swap.total = 100_000;
    for _ in 0..4000 {
        mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).unwrap();
    }
    for _ in 0..512 {
        mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false).unwrap();
    }
    let mut sc = sc_at(2);
    sc.nr_to_reclaim = 32;
    let (b, targets) = mm.get_scan_count(&sc);
    assert_eq!(b, ScanBalance::Fract);
    assert_eq!(
        (
            targets[LRU_INACTIVE_ANON as usize],
            targets[LRU_INACTIVE_FILE as usize]
        ),
        (500, 64)
    );
    mm.shrink_lruvec(&mut sc);
    // Round 1: 32 + 32. File has less left (32 of 64): anon is cut to 500·51% − 32 = 223,
    // round 2 scans 32 of it, then file is empty and the loop ends.
    assert_eq!(mm.stat(Stat::pgscan_file), 32);
    assert_eq!(mm.stat(Stat::pgscan_anon), 64);
    assert_eq!(mm.stat(Stat::pswpout), 64);
    check(&mm);
}

/// §10.4.3 `can_age_anon_pages`: the anon active list is aged whenever a swap device exists —
/// even a full one — and never without one.
#[test]
fn s10_4_3_anon_aging_needs_a_swap_device_not_room() {
    for (total, aged) in [(0u64, false), (64, true)] {
        let mut mm = dma32(16, 1, tun_kb(128));
        for _ in 0..200 {
            let a = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).unwrap();
            mm.folio_mark_accessed(a);
            mm.folio_mark_accessed(a);
        }
        mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false).unwrap();
        // A full device: every slot holds some other content.
        mm.reclaim.swap.total = total;
        if total > 0 {
            mm.reclaim.swap.map.insert(u64::MAX, total);
            mm.reclaim.swap.used = total;
        }
        assert!(!mm.can_reclaim_anon());
        let mut sc = sc_at(12);
        mm.shrink_lruvec(&mut sc);
        assert_eq!(mm.stat(Stat::pgdeactivate) == 32, aged, "swap {total}");
        assert_eq!(mm.stat(Stat::pgscan_anon), 0);
        check(&mm);
    }
}

/// §10.4.1: refaults observed since the last snapshot allow deactivating the active list (and
/// so end cache-trim mode); `snapshot_refaults` resets that.
#[test]
fn s10_4_1_refaults_since_the_snapshot_allow_deactivation() {
    let mut mm = dma32(16, 1, tun_kb(128));
    for _ in 0..400 {
        mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false).unwrap();
    }
    let mut sc = sc_at(4);
    mm.prepare_scan_control(&mut sc);
    assert_eq!(sc.may_deactivate & 2, 0, "inactive file is not low");
    assert!(sc.cache_trim_mode);
    mm.count(Stat::workingset_activate_file, 1);
    mm.prepare_scan_control(&mut sc);
    assert_eq!(
        sc.may_deactivate & 2,
        2,
        "a refault was activated since the snapshot"
    );
    assert!(!sc.cache_trim_mode);
    mm.snapshot_refaults(0);
    mm.prepare_scan_control(&mut sc);
    assert_eq!(sc.may_deactivate & 2, 0);
    sc.no_cache_trim_mode = true;
    mm.prepare_scan_control(&mut sc);
    assert!(!sc.cache_trim_mode, "kswapd's restart forbids cache-trim mode");
    sc.force_deactivate = true;
    mm.prepare_scan_control(&mut sc);
    assert_eq!(sc.may_deactivate, 3);
}

/// §10.5 `do_try_to_free_pages`: a pass that reclaims nothing is run again as the full memcg
/// walk, and once more with forced deactivation when an active list was skipped; each pass
/// counts an allocstall.
#[test]
fn s10_5_fruitless_direct_reclaim_retries() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false) {
        mm.folio_mark_dirty(id, true);
        ids.push(id);
    }
    // A quarter of the (dirty, so unreclaimable) cache is active: not "inactive is low".
    for &id in &ids[ids.len() * 3 / 4..] {
        mm.folio_mark_accessed(id);
        mm.folio_mark_accessed(id);
    }
    assert_eq!(mm.try_to_free_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0), 0);
    assert_eq!(mm.stat(Stat::allocstall_movable), 3);
    assert!(mm.stat(Stat::pgdeactivate) > 0, "the forced pass deactivated");
    check(&mm);
}

/// §10.3.8: the shadow records the age *before* the eviction; a refault is recent when the
/// distance is at most the workingset (here the active file list): distance = workingset
/// activates, one more does not. Refault activation moves the folio without pgactivate.
#[test]
fn s10_3_8_refault_distance_boundary() {
    for (extra, activates) in [(0u64, true), (1, false)] {
        let mut mm = dma32(16, 1, tun_kb(128));
        let m = mm.add_mapping(Mapping::no_large_folios());
        let victims: Vec<FolioId> = (0..50 + extra)
            .map(|i| add_to_page_cache(&mut mm, m, i, 0))
            .collect();
        for i in 0..50 {
            let id = add_to_page_cache(&mut mm, m, 1000 + i, 0);
            mm.folio_mark_accessed(id);
            mm.folio_mark_accessed(id);
        }
        assert_eq!(mm.reclaim.lruvec[0].pages[LRU_ACTIVE_FILE as usize], 50);
        let age0 = mm.reclaim.workingset.nonresident_age;
        let mut sc = sc_at(12);
        assert_eq!(
            mm.shrink_inactive_list(50 + extra, LRU_INACTIVE_FILE, &mut sc),
            50 + extra
        );
        assert!(victims.iter().all(|&id| !mm.folios.folios[id as usize].live()));
        let (start, sh) = mm.cache.index.shadow(m, 0).unwrap();
        assert_eq!((start, sh.eviction, sh.nr, sh.workingset), (0, age0, 1, false));
        assert_eq!(mm.reclaim.workingset.nonresident_age, age0 + 50 + extra);
        let act = mm.stat(Stat::pgactivate);
        let id = add_to_page_cache(&mut mm, m, 0, 0);
        assert_eq!(mm.stat(Stat::workingset_refault_file), 1);
        assert_eq!(mm.folios.get(id).active(), activates, "distance {}", 50 + extra);
        assert_eq!(mm.stat(Stat::workingset_activate_file), activates as u64);
        assert_eq!(mm.stat(Stat::pgactivate), act);
        assert!(mm.cache.index.shadow(m, 0).is_none());
        check(&mm);
    }
}

/// §10.3.8: a folio deactivated from the active list (PG_workingset) that refaults is
/// restored (`workingset_restore_file`, file reclaim cost charged); a shadow of a large folio
/// covers all its pages and a smaller refault inside it leaves the rest of the shadow.
#[test]
fn s10_3_8_restore_and_large_shadows() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let m = mm.add_mapping(Mapping::no_large_folios());
    let a = add_to_page_cache(&mut mm, m, 0, 0);
    mm.folio_mark_accessed(a);
    mm.folio_mark_accessed(a);
    let mut sc = sc_at(12);
    mm.shrink_active_list(32, LRU_ACTIVE_FILE, &mut sc);
    assert!(mm.folios.get(a).workingset());
    add_to_page_cache(&mut mm, m, 8, 2);
    // A workingset of 10 active pages (a's refault distance will be 1 + 4 = 5).
    for i in 100..110 {
        let keep = add_to_page_cache(&mut mm, m, i, 0);
        mm.folio_mark_accessed(keep);
        mm.folio_mark_accessed(keep);
    }
    // Evict a (deactivated, so oldest) and the order-2 folio.
    assert_eq!(mm.shrink_inactive_list(5, LRU_INACTIVE_FILE, &mut sc), 5);
    assert!(mm.cache.index.shadow(m, 0).unwrap().1.workingset);
    assert_eq!(
        mm.cache.index.shadow(m, 11).unwrap(),
        mm.cache.index.shadow(m, 8).unwrap()
    );
    let cost = mm.reclaim.lruvec[0].file_cost;
    let a2 = add_to_page_cache(&mut mm, m, 0, 0);
    assert!(mm.folios.get(a2).active() && mm.folios.get(a2).workingset());
    assert_eq!(mm.stat(Stat::workingset_restore_file), 1);
    assert!(mm.reclaim.lruvec[0].file_cost > cost, "lru_note_cost_refault");
    // An order-0 refault at 9: one page counted, shadows [8, 9) and [10, 12) stay.
    add_to_page_cache(&mut mm, m, 9, 0);
    assert_eq!(mm.stat(Stat::workingset_refault_file), 2);
    assert_eq!(
        mm.cache.index.shadow(m, 8).map(|(s, sh)| (s, sh.nr)),
        Some((8, 1))
    );
    assert_eq!(
        mm.cache.index.shadow(m, 11).map(|(s, sh)| (s, sh.nr)),
        Some((10, 2))
    );
    assert!(mm.cache.index.shadow(m, 9).is_none());
    // An order-2 refault over [8, 12) takes both remaining parts and counts its 4 pages.
    mm.page_cache_evict(0, mm.cache.index.get(m, 9).unwrap());
    assert_eq!(mm.cache.index.shadows_len(), 3);
    add_to_page_cache(&mut mm, m, 8, 2);
    assert_eq!(mm.stat(Stat::workingset_refault_file), 6);
    assert!((8..12).all(|i| mm.cache.index.shadow(m, i).is_none()));
    // Truncation forgets the mapping's shadows.
    mm.page_cache_evict(0, mm.cache.index.get(m, 100).unwrap());
    mm.workingset_forget_mapping(m);
    assert_eq!(mm.cache.index.shadows_len(), 0);
    check(&mm);
}

/// §10.3.6/§10.3.8: swapped-out anon content leaves a shadow; swap-in counts
/// workingset_refault_anon and, when recent, activates the page.
#[test]
fn s10_3_8_swap_in_is_an_anon_refault() {
    let (mut mm, anon, _) = mixed(64, 200);
    let t = mm.folios.get(anon[0]).token();
    let mut sc = sc_at(12);
    mm.shrink_inactive_list(1, LRU_INACTIVE_ANON, &mut sc);
    assert_eq!(mm.swapped(t), 1);
    assert!(mm.reclaim.swap.shadows.contains_key(&t));
    let id = mm.swap_in(0, t).unwrap();
    assert_eq!(mm.stat(Stat::workingset_refault_anon), 1);
    assert_eq!(mm.stat(Stat::workingset_activate_anon), 1);
    assert!(mm.folios.get(id).active());
    assert!(
        !mm.reclaim.swap.shadows.contains_key(&t),
        "the shadow goes with the last slot"
    );
    check(&mm);
}

/// §10.3.6: mTHP orders count the per-size swpout / swpout_fallback (orders 1..=9 only); a
/// large folio without room is split even when no slot is free (the pieces are activated).
#[test]
fn s10_3_6_mthp_swpout_counters() {
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.reclaim.swap.total = 24;
    let mut sc = sc_at(12);
    mm.alloc_folio(0, NO_RECLAIM, 4, FolioKind::Anon, false).unwrap();
    assert_eq!(mm.shrink_inactive_list(16, LRU_INACTIVE_ANON, &mut sc), 16);
    assert_eq!((mm.mthp.swpout[4], mm.stat(Stat::pswpout)), (1, 16));
    mm.alloc_folio(0, NO_RECLAIM, 4, FolioKind::Anon, false).unwrap();
    assert_eq!(mm.shrink_inactive_list(16, LRU_INACTIVE_ANON, &mut sc), 8);
    assert_eq!(mm.mthp.swpout_fallback[4], 1);
    assert_eq!(mm.stat(Stat::thp_swpout_fallback), 0, "not PMD-sized");
    assert_eq!(mm.reclaim.lruvec[0].pages[LRU_ACTIVE_ANON as usize], 8);
    // Swap full: an order-2 folio is still split (folio_alloc_swap failed) and activated.
    mm.alloc_folio(0, NO_RECLAIM, 2, FolioKind::Anon, false).unwrap();
    assert_eq!(mm.shrink_inactive_list(4, LRU_INACTIVE_ANON, &mut sc), 0);
    assert_eq!(mm.mthp.swpout_fallback[2], 1);
    assert_eq!(mm.reclaim.lruvec[0].pages[LRU_ACTIVE_ANON as usize], 12);
    assert_eq!(mm.stat(Stat::pgactivate), 12);
    check(&mm);
}

/// §19.1 item 8, `do_shrink_slab`: delta = (freeable >> priority)·4/2; work below one batch
/// (128) of a cache larger than that is deferred to the next call; a small cache is scanned
/// whole once the work reaches its size; slabs_scanned counts the batches. Objects are freed
/// oldest first; the owner's own frees and reused ids are respected (token check).
#[test]
fn s19_1_8_slab_shrink_follows_do_shrink_slab() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let g = Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE);
    let mut slab = Vec::new();
    for _ in 0..4096 {
        let id = mm.alloc_folio(0, g, 0, FolioKind::Slab, false).unwrap();
        mm.set_slab_shrinkable(id);
        slab.push((id, mm.folios.get(id).token()));
    }
    let mut sc = sc_at(12);
    // (4096 >> 12)·4/2 = 2 < 128: deferred.
    assert_eq!(mm.shrink_slab(&mut sc), 0);
    assert_eq!(mm.stat(Stat::slabs_scanned), 0);
    assert_eq!(mm.reclaim.slab_shrinker.nr_deferred, 2);
    sc.priority = 6;
    // (4096 >> 6)·2 = 128 (+ 2 >> 6): one batch, the 128 oldest.
    let before = sc.nr_reclaimed;
    assert_eq!(mm.shrink_slab(&mut sc), 128);
    assert_eq!(sc.nr_reclaimed - before, 128, "slab pages count as reclaimed");
    assert_eq!(mm.stat(Stat::slabs_scanned), 128);
    assert_eq!(mm.reclaim.slab_shrinker.nr_deferred, 2);
    assert!(slab[..128].iter().all(|&(id, t)| !mm.folio_is(id, t)));
    assert!(slab[128..].iter().all(|&(id, t)| mm.folio_is(id, t)));
    // The owner frees all but ten itself; one freed id is reused by a new, undeclared slab
    // folio, which the shrinker must not touch.
    for &(id, _) in &slab[128..4086] {
        mm.free_folio(0, id);
    }
    let reused = mm.alloc_folio(0, g, 0, FolioKind::Slab, false).unwrap();
    let reused_token = mm.folios.get(reused).token();
    assert!(slab.iter().any(|&(id, _)| id == reused));
    // Ten objects at priority 0: delta 20 ≥ 10 → one batch of 20 frees all ten.
    sc.priority = 0;
    assert_eq!(mm.shrink_slab(&mut sc), 10);
    assert_eq!(mm.stat(Stat::slabs_scanned), 148);
    assert!(mm.folio_is(reused, reused_token));
    assert!(mm.reclaim.shrinkable_slab.is_empty());
    // vfs_cache_pressure 0: count_objects reports nothing.
    let id = mm.alloc_folio(0, g, 0, FolioKind::Slab, false).unwrap();
    mm.set_slab_shrinkable(id);
    mm.tun.vfs_cache_pressure = 0;
    assert_eq!(mm.shrink_slab(&mut sc), 0);
    check(&mm);
}

/// §10.2.4/§10.4.5: shrink_node resets kswapd_failures when it reclaims anything (kswapd or
/// direct), and leaves it when it reclaims nothing.
#[test]
fn s10_4_5_shrink_node_progress_resets_kswapd_failures() {
    let mut mm = dma32(16, 1, tun_kb(128));
    for _ in 0..2000 {
        mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).unwrap();
    }
    mm.reclaim.kswapd_failures[0] = 5;
    let mut sc = ScanControl::direct(3, 0, 0);
    sc.priority = 4;
    mm.shrink_node(&mut sc);
    assert_eq!(
        (sc.nr_reclaimed, mm.reclaim.kswapd_failures[0]),
        (0, 5),
        "nothing reclaimable"
    );
    for _ in 0..2000 {
        mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false).unwrap();
    }
    let mut sc = ScanControl::direct(3, 0, 0);
    sc.priority = 4;
    mm.shrink_node(&mut sc);
    assert!(sc.nr_reclaimed > 0);
    assert_eq!(mm.reclaim.kswapd_failures[0], 0);
    check(&mm);
}

/// §10.4.5: in reclaim/compaction mode (order 9) shrink_node keeps going after a pass that
/// reclaimed something until compaction would be suitable or the inactive lists are down to
/// compact_gap; at order 0 it is one pass.
#[test]
fn s10_4_5_reclaim_compaction_mode_continues() {
    let fill = || {
        let mut mm = dma32(16, 1, tun_kb(128));
        while mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false).is_some() {}
        mm
    };
    let mut mm = fill();
    let mut sc = sc_at(8);
    mm.shrink_node(&mut sc);
    let one_pass = sc.nr_reclaimed;
    assert!(one_pass > 0);
    let mut mm = fill();
    let mut sc = sc_at(8);
    sc.order = 9;
    mm.shrink_node(&mut sc);
    assert!(
        sc.nr_reclaimed >= 2 * one_pass,
        "{} vs {one_pass}",
        sc.nr_reclaimed
    );
    // It stopped because an order-9 page is free, compaction became suitable, or the
    // inactive list is down to compact_gap(9).
    let min = mm.zones[DMA32].wmark_pages(fraglab_mm::mmzone::WMARK_MIN);
    assert!(
        mm.zones[DMA32].area.nr_free[9..].iter().any(|&n| n > 0)
            || mm.compaction_suitable(DMA32, 9, min, 3)
            || mm.reclaim.lruvec[0].pages[LRU_INACTIVE_FILE as usize] <= 2 << 9
    );
    check(&mm);
}

/// §15.3: the lines direct reclaim emits, exactly as S2 prints them (a dirty page at the tail
/// is activated and counted dirty; nothing is writeback/immediate in the model).
#[test]
fn s15_3_direct_reclaim_lines_exact() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false) {
        ids.push(id);
    }
    mm.folio_mark_dirty(ids[0], true);
    let t = mm.reclaim.lruvec[0].pages[LRU_INACTIVE_FILE as usize] >> 12;
    assert!(t >= 1);
    mm.trace.mask = trace_kind::VMSCAN;
    let got = mm.try_to_free_pages(0, Gfp::GFP_KERNEL, 0);
    let text = render_trace(&mm.take_trace());
    let lines: Vec<&str> = text.lines().map(|l| l.split_once(": ").unwrap().1).collect();
    assert_eq!(
        lines[0],
        "mm_vmscan_direct_reclaim_begin: order=0 gfp_flags=GFP_KERNEL"
    );
    assert_eq!(
        lines[1],
        format!(
            "mm_vmscan_lru_isolate: classzone=2 order=0 nr_requested={t} nr_scanned={t} nr_skipped=0 \
             nr_taken={t} lru=inactive_file"
        )
    );
    assert_eq!(
        lines[2],
        format!(
            "mm_vmscan_lru_shrink_inactive: nid=0 nr_scanned={t} nr_reclaimed={} nr_dirty=1 nr_writeback=0 \
             nr_congested=0 nr_immediate=0 nr_activate_anon=0 nr_activate_file=1 nr_ref_keep=0 \
             nr_unmap_fail=0 priority=12 flags=RECLAIM_WB_FILE|RECLAIM_WB_ASYNC",
            t - 1
        )
    );
    assert_eq!(
        *lines.last().unwrap(),
        format!("mm_vmscan_direct_reclaim_end: nr_reclaimed={got}")
    );
    assert_eq!(mm.stat(Stat::nr_vmscan_immediate_reclaim), 1);
    check(&mm);
}
