//! The LRU lists (docs/model §10.3).

use crate::common;

use common::*;
use fraglab_mm::folio::FolioKind;
use fraglab_mm::vmscan::{LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::Gfp;

/// Fills without direct reclaim: with it, page cache would be evicted to make room forever.
const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

#[test]
fn s10_3_2_new_folios_enter_the_inactive_lists_at_the_head() {
    let mut mm = dma32(8, 1, tun_kb(128));
    let a = mm
        .alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::Anon, false)
        .unwrap();
    let f1 = mm
        .alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 2, FolioKind::File, false)
        .unwrap();
    let f2 = mm
        .alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::File, false)
        .unwrap();
    let k = mm
        .alloc_folio(0, Gfp::GFP_KERNEL, 0, FolioKind::Slab, false)
        .unwrap();
    assert_eq!(mm.lru_folios(LRU_INACTIVE_ANON), vec![a]);
    assert_eq!(
        mm.lru_folios(LRU_INACTIVE_FILE),
        vec![f2, f1],
        "newest at the head"
    );
    assert_eq!(mm.reclaim.lruvec[0].pages[LRU_INACTIVE_FILE as usize], 5);
    assert_eq!(mm.stat(Stat::nr_inactive_file), 5);
    assert_eq!(mm.stat(Stat::nr_slab_unreclaimable), 1);
    assert!(mm.lru_folios(LRU_ACTIVE_FILE).is_empty());
    mm.free_folio(0, f1);
    mm.free_folio(0, k);
    assert_eq!(mm.lru_folios(LRU_INACTIVE_FILE), vec![f2]);
    check(&mm);
}

#[test]
fn s10_3_3_mark_accessed_twice_activates() {
    let mut mm = dma32(8, 1, tun_kb(128));
    let f = mm
        .alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 2, FolioKind::File, false)
        .unwrap();
    mm.folio_mark_accessed(f);
    assert!(mm.folios.get(f).referenced() && !mm.folios.get(f).active());
    assert_eq!(mm.stat(Stat::pgactivate), 0);
    mm.folio_mark_accessed(f);
    assert!(mm.folios.get(f).active() && !mm.folios.get(f).referenced());
    assert_eq!(mm.lru_folios(LRU_ACTIVE_FILE), vec![f]);
    assert_eq!(mm.stat(Stat::pgactivate), 4);
    assert_eq!(
        (mm.stat(Stat::nr_active_file), mm.stat(Stat::nr_inactive_file)),
        (4, 0)
    );
    check(&mm);
}

#[test]
fn migrated_folios_keep_their_list() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false) {
        ids.push(id);
    }
    for (i, id) in ids.iter().enumerate() {
        if i % 2 == 0 {
            mm.free_folio(0, *id);
        } else if i % 3 == 0 {
            mm.folio_mark_accessed(*id);
            mm.folio_mark_accessed(*id);
        }
    }
    mm.drain_all_pages();
    let active_before = mm.lru_folios(LRU_ACTIVE_FILE).len();
    let st = mm.compact_memory();
    assert!(st.migrated_pages > 0);
    assert_eq!(mm.lru_folios(LRU_ACTIVE_FILE).len(), active_before);
    check(&mm);
}

/// §10.5: direct reclaim takes 32 pages of clean page cache from the inactive tail (oldest
/// first), counts one allocstall in the request's zone and the scan/steal counters.
#[test]
fn s10_5_direct_reclaim_frees_oldest_clean_file_folios() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::File, false) {
        ids.push(id);
    }
    // The two oldest are dirty: reclaim must not free them; it activates them.
    mm.folio_mark_dirty(ids[0], true);
    mm.folio_mark_dirty(ids[1], true);
    let free_before = mm.zones[DMA32].nr_free_pages();
    let got = mm.try_to_free_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0);
    assert!(got >= 32, "{got}");
    assert_eq!(mm.stat(Stat::allocstall_movable), 1);
    assert_eq!(mm.stat(Stat::pgsteal_direct), got);
    assert_eq!(mm.stat(Stat::pgsteal_file), got);
    assert!(mm.stat(Stat::pgscan_direct) >= got + 2);
    assert_eq!(mm.stat(Stat::nr_vmscan_immediate_reclaim), 2);
    assert!(mm.folios.get(ids[0]).active() && mm.folios.get(ids[1]).active());
    // Oldest clean folios went first.
    let end = 2 + got as usize;
    assert!(ids[2..end]
        .iter()
        .all(|&id| !mm.folios.folios[id as usize].live()));
    assert!(ids[end..].iter().all(|&id| mm.folios.folios[id as usize].live()));
    let survivors = ids
        .iter()
        .filter(|&&id| mm.folios.folios[id as usize].live())
        .count() as u64;
    assert_eq!(survivors, ids.len() as u64 - got);
    mm.drain_all_pages();
    assert!(mm.zones[DMA32].nr_free_pages() >= free_before + got as i64);
    check(&mm);
}

/// §10.4.2: without swap, anonymous memory is not scanned at all. §10.5: a direct reclaim
/// that reclaims nothing runs its priority loop a second time (`memcg_full_walk`), counting a
/// second allocstall.
#[test]
fn s10_4_2_no_swap_no_anon_scanning() {
    let mut mm = dma32(8, 1, tun_kb(128));
    while mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).is_some() {}
    assert_eq!(mm.try_to_free_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0), 0);
    assert_eq!(mm.stat(Stat::pgscan_anon), 0);
    assert_eq!(mm.stat(Stat::allocstall_movable), 2);
    check(&mm);
}

/// §10.1 and §8 D7: kswapd's balance test counts free pageblocks under defrag_mode for order
/// > 0, NR_FREE_PAGES otherwise.
#[test]
fn s10_1_pgdat_balanced_and_d7() {
    let mut mm = dma32(16, 1, tun_kb(128));
    // Half of memory free in order-0 holes: balanced at order 0 (free ≫ high), not at order 9.
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        all.push(id);
    }
    for (i, id) in all.iter().enumerate() {
        if i % 2 == 0 {
            mm.free_folio(0, *id);
        }
    }
    mm.drain_all_pages();
    assert!(mm.pgdat_balanced(0, 0, 2));
    assert!(!mm.pgdat_balanced(0, 9, 2));
    // A chunk of order ≥ 1 is left over from the fill, so without defrag_mode order 1 is
    // balanced; D7 counts only free pageblocks (none here), so with defrag_mode it is not.
    assert!(mm.zones[DMA32].area.nr_free[1..9].iter().any(|&n| n > 0));
    assert_eq!(mm.zones[DMA32].stat(Stat::nr_free_pages_blocks), 0);
    assert!(mm.pgdat_balanced(0, 1, 2));
    mm.tun.defrag_mode = true;
    assert!(mm.pgdat_balanced(0, 0, 2), "order 0 is unchanged by defrag_mode");
    assert!(!mm.pgdat_balanced(0, 1, 2));
    assert!(!mm.pgdat_watermark_boosted(0, 2));
    mm.zones[DMA32].watermark_boost = 512;
    assert!(mm.pgdat_watermark_boosted(0, 2));
    check(&mm);
}
