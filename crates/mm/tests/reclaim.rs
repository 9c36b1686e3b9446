//! Reclaim (kernel-model.md §10): swap and anonymous reclaim, get_scan_count, refaults, slab
//! shrinking, compaction_ready in direct reclaim, and the vmscan tracepoints.

mod common;

use common::*;
use fraglab_mm::filemap::Mapping;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::node::trace_kind;
use fraglab_mm::trace::{render_trace, TraceEvent};
use fraglab_mm::vmscan::{ScanBalance, ScanControl, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm, Tunables};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// Half anon, half clean page cache, all of memory; swap of `swap` pages.
fn mixed(swap: u64, swappiness: u32) -> (Mm, Vec<FolioId>, Vec<FolioId>) {
    let tun = Tunables {
        swappiness,
        ..tun_kb(512)
    };
    let mut mm = dma32(16, 1, tun);
    mm.swap.total = swap;
    let (mut anon, mut file) = (Vec::new(), Vec::new());
    loop {
        let a = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false);
        let f = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false);
        match (a, f) {
            (Some(a), Some(f)) => {
                anon.push(a);
                file.push(f);
            }
            _ => break,
        }
    }
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
        mm.lruvec.pages[LRU_INACTIVE_ANON as usize]
    );
}

#[test]
fn s10_3_6_anon_is_swapped_out_only_with_room() {
    // Only anonymous memory, swap of 200 pages: kswapd swaps out until the node is balanced.
    let mut mm = dma32(16, 1, tun_kb(512));
    mm.swap.total = 200;
    let mut anon = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        anon.push(id);
    }
    mm.kswapd_until_sleep(32);
    let out = mm.stat(Stat::pswpout);
    assert!(out > 0 && out <= 200, "pswpout {out}");
    assert_eq!(mm.swap.used, out);
    assert_eq!(mm.stat(Stat::pgsteal_anon), out);
    // Swapped contents are gone from memory and counted by token; swap-in brings one page back.
    let gone: Vec<FolioId> = anon
        .iter()
        .copied()
        .filter(|&id| !mm.folios.folios[id as usize].live)
        .collect();
    assert_eq!(gone.len() as u64, out);
    check(&mm);
    let (mut mm, _, _) = mixed(0, 200);
    mm.kswapd_until_sleep(32);
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
    let t = mm.folios.get(anon[0]).token;
    let mut sc = ScanControl::direct(3, 0, 0);
    // Reclaim the whole inactive anon tail directly.
    mm.shrink_inactive_list(64, LRU_INACTIVE_ANON, &mut sc);
    assert!(mm.swapped(t) == 1, "the oldest anon page is in swap");
    let used = mm.swap.used;
    let back = mm.swap_in(0, t).unwrap();
    assert_eq!(mm.folios.get(back).token, t);
    assert_eq!(mm.swap.used, used - 1);
    assert_eq!(mm.stat(Stat::pswpin), 1);
    assert_eq!(mm.swap_in(0, t), None, "nothing left in swap for it");
    let t2 = mm.folios.folios[anon[1] as usize].token;
    mm.swap_free_token(t2);
    assert_eq!(mm.swap.used, used - 2);
    check(&mm);
}

#[test]
fn s10_3_6_large_anon_folio_is_split_when_swap_lacks_room() {
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.swap.total = 100;
    let thp = mm
        .alloc_folio(0, Gfp::GFP_TRANSHUGE, 9, FolioKind::Anon, false)
        .unwrap();
    let mut sc = ScanControl::direct(3, 0, 0);
    let got = mm.shrink_inactive_list(512, LRU_INACTIVE_ANON, &mut sc);
    assert_eq!(mm.stat(Stat::thp_swpout_fallback), 1);
    assert_eq!(mm.stat(Stat::thp_swpout), 0);
    assert_eq!(mm.stat(Stat::thp_split_page), 1);
    assert_eq!(got, 100, "the pieces fill the swap device");
    assert!(!mm.folios.folios[thp as usize].live || mm.folios.folios[thp as usize].order == 0);
    check(&mm);
    // With room, a THP swaps out whole.
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.swap.total = 1024;
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
            mm.folio_mark_accessed(id);
        }
    }
    // Evict the ten oldest clean pages (they are not referenced).
    let mut sc = ScanControl::direct(3, 0, 0);
    let evicted = mm.shrink_inactive_list(10, LRU_INACTIVE_FILE, &mut sc);
    assert_eq!(evicted, 10);
    assert_eq!(mm.workingset.len(), 10);
    // Re-reading them: each is a refault; the distance (≤ 10) is within the workingset.
    let mut ra = fraglab_mm::filemap::ReadaheadState::default();
    let st = mm.filemap_read(0, m, &mut ra, 0, 10, 100);
    assert_eq!(st.miss_pages, 10);
    assert_eq!(mm.stat(Stat::workingset_refault_file), 10);
    assert_eq!(mm.stat(Stat::workingset_activate_file), 10);
    assert!(mm.workingset.is_empty());
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
    mm.trace_mask = trace_kind::VMSCAN_DIRECT;
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
    assert!(
        lines[1].ends_with("mm_vmscan_direct_reclaim_end: nr_reclaimed=0"),
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
fn s19_1_8_slab_shrinking_is_proportional_and_counted() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let g = Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE);
    for _ in 0..4096 {
        let id = mm.alloc_folio(0, g, 0, FolioKind::Slab, false).unwrap();
        mm.set_slab_shrinkable(id);
    }
    let mut sc = ScanControl::direct(3, 0, 0);
    // Priority 12: (4096 >> 12) * 4 / 2 = 2 objects.
    assert_eq!(mm.shrink_slab(&mut sc), 2);
    assert_eq!(mm.stat(Stat::slabs_scanned), 2);
    sc.priority = 6;
    // (4094 >> 6) * 2 = 126.
    assert_eq!(mm.shrink_slab(&mut sc), 126);
    assert_eq!(mm.stat(Stat::slabs_scanned), 128);
    // vfs_cache_pressure 0: nothing is shrunk.
    mm.tun.vfs_cache_pressure = 0;
    assert_eq!(mm.shrink_slab(&mut sc), 0);
    check(&mm);
}

#[test]
fn s15_3_lru_tracepoints_render_as_the_kernel_prints_them() {
    let (mut mm, _, _) = mixed(0, 60);
    mm.trace_mask = trace_kind::VMSCAN;
    mm.kswapd_until_sleep(8);
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
