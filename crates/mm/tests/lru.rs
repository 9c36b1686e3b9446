//! The LRU lists (kernel-model.md §10.3).

mod common;

use common::*;
use fraglab_mm::folio::FolioKind;
use fraglab_mm::vmscan::{LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::Gfp;

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
    assert_eq!(mm.lruvec.pages[LRU_INACTIVE_FILE as usize], 5);
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
    assert!(mm.folios.get(f).referenced && !mm.folios.get(f).active);
    assert_eq!(mm.stat(Stat::pgactivate), 0);
    mm.folio_mark_accessed(f);
    assert!(mm.folios.get(f).active && !mm.folios.get(f).referenced);
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
    while let Some(id) = mm.alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::File, false) {
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
