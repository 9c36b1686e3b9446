//! mlock and compaction (docs/model §29): PG_mlocked/PG_unevictable, the nr_mlock and
//! nr_unevictable gauges, the unevictable_pgs_* events, reclaim and `zone_reclaimable_pages`
//! leaving unevictable folios alone, and `vm.compact_unevictable_allowed` gating compaction.

use crate::common;

use common::*;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::vmscan::{LRU_INACTIVE_ANON, LRU_UNEVICTABLE};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

fn anon(mm: &mut Mm, order: u32) -> FolioId {
    mm.alloc_folio(0, NO_RECLAIM, order, FolioKind::Anon, false)
        .expect("memory")
}

fn ev(mm: &Mm) -> [u64; 6] {
    [
        mm.stat(Stat::unevictable_pgs_mlocked),
        mm.stat(Stat::unevictable_pgs_munlocked),
        mm.stat(Stat::unevictable_pgs_culled),
        mm.stat(Stat::unevictable_pgs_rescued),
        mm.stat(Stat::unevictable_pgs_stranded),
        mm.stat(Stat::unevictable_pgs_cleared),
    ]
}

fn nr_mlock(mm: &Mm) -> i64 {
    mm.zone_stat_sum(Stat::nr_mlock)
}

/// The zone filled with order-0 anon folios, those at even pfns freed, the rest mlocked.
fn scattered_mlocked(allowed: bool) -> (Mm, Vec<FolioId>) {
    let mut mm = dma32(8, 1, tun_kb(128));
    mm.compact.cfg.unevictable_allowed = allowed;
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        all.push(id);
    }
    let mut kept = Vec::new();
    for id in all {
        if mm.folios.get(id).pfn.is_multiple_of(2) {
            mm.free_folio(0, id);
        } else {
            mm.mlock_folio(id);
            kept.push(id);
        }
    }
    mm.drain_all_pages();
    check(&mm);
    (mm, kept)
}

#[test]
fn s29_1_2_mlock_sets_mlocked_and_culls_to_unevictable() {
    let mut mm = dma32(8, 1, tun_kb(128));
    let a = anon(&mut mm, 0);
    let b = anon(&mut mm, 2);
    let inactive = mm.stat(Stat::nr_inactive_anon);
    assert_eq!(inactive, 5);
    mm.mlock_folio(a);
    mm.mlock_folio(b);
    assert_eq!(
        ev(&mm),
        [5, 0, 5, 0, 0, 0],
        "mlocked and culled by the folios' pages"
    );
    assert_eq!(nr_mlock(&mm), 5);
    assert_eq!(mm.stat(Stat::nr_unevictable), 5);
    assert_eq!(mm.zone_stat_sum(Stat::nr_zone_unevictable), 5);
    assert_eq!(mm.stat(Stat::nr_inactive_anon), 0);
    assert_eq!(mm.stat(Stat::nr_anon_pages), 5, "still anonymous memory");
    assert_eq!(mm.folios.get(a).lru, LRU_UNEVICTABLE);
    assert!(mm.folios.get(b).mlocked() && mm.folios.get(b).unevictable());
    // mlock of an mlocked folio changes nothing (mlock_fixup of an unchanged VMA).
    mm.mlock_folio(a);
    assert_eq!(ev(&mm), [5, 0, 5, 0, 0, 0]);
    check(&mm);
}

#[test]
fn s29_1_5_munlock_rescues_and_free_of_mlocked_clears() {
    let mut mm = dma32(8, 1, tun_kb(128));
    let a = anon(&mut mm, 0);
    let b = anon(&mut mm, 1);
    mm.mlock_folio(a);
    mm.mlock_folio(b);
    mm.munlock_folio(a);
    assert_eq!(ev(&mm), [3, 1, 3, 1, 0, 0]);
    assert_eq!(
        mm.folios.get(a).lru,
        LRU_INACTIVE_ANON,
        "back on its evictable list"
    );
    assert!(!mm.folios.get(a).mlocked() && !mm.folios.get(a).unevictable());
    assert_eq!(nr_mlock(&mm), 2);
    assert_eq!(mm.stat(Stat::nr_unevictable), 2);
    // Freed while still mlocked: __page_cache_release counts _cleared.
    mm.free_folio(0, b);
    assert_eq!(ev(&mm), [3, 1, 3, 1, 0, 2]);
    assert_eq!(nr_mlock(&mm), 0);
    assert_eq!(mm.stat(Stat::nr_unevictable), 0);
    check(&mm);
}

#[test]
fn s29_1_6_mlocked_folios_are_not_reclaimed() {
    // All anon, swap with room for everything: kswapd swaps evictable folios only.
    let mut mm = dma32(16, 1, tun_kb(512));
    mm.reclaim.swap.total = 1 << 20;
    let mut locked = Vec::new();
    let mut i = 0;
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        if i % 2 == 0 {
            mm.mlock_folio(id);
            locked.push((id, mm.folios.get(id).token()));
        }
        i += 1;
    }
    mm.kswapd_until_sleep(0, 32);
    assert!(mm.stat(Stat::pswpout) > 0, "evictable anon was swapped");
    for &(id, token) in &locked {
        assert!(mm.folio_is(id, token), "mlocked folio {id} was reclaimed");
    }
    assert_eq!(mm.stat(Stat::unevictable_pgs_scanned), 0);
    check(&mm);
}

#[test]
fn s29_1_6_unevictable_pages_are_not_reclaimable() {
    let mut mm = dma32(8, 1, tun_kb(128));
    mm.reclaim.swap.total = 1 << 20;
    let ids: Vec<FolioId> = (0..100).map(|_| anon(&mut mm, 0)).collect();
    let before = mm.zone_reclaimable_pages(DMA32);
    for &id in &ids[..40] {
        mm.mlock_folio(id);
    }
    assert_eq!(mm.zone_reclaimable_pages(DMA32), before - 40);
    check(&mm);
}

#[test]
fn s29_2_2_compaction_migrates_mlocked_folios_when_allowed() {
    let (mut mm, kept) = scattered_mlocked(true);
    let locked = nr_mlock(&mm);
    let unevictable = mm.stat(Stat::nr_unevictable);
    let before = ev(&mm);
    mm.compact_memory();
    check(&mm);
    let moved: u64 = kept.iter().filter(|&&id| mm.folios.migrations(id) > 0).count() as u64;
    assert!(moved > 0, "compaction isolated mlocked folios");
    assert_eq!(mm.stat(Stat::pgmigrate_success), moved);
    // §29.2.3: each migrated page moves _stranded, _rescued, _mlocked and _culled once.
    let after = ev(&mm);
    let d: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    assert_eq!(
        d,
        vec![moved, 0, moved, moved, moved, 0],
        "mlocked, munlocked, culled, rescued, stranded, cleared"
    );
    assert_eq!(nr_mlock(&mm), locked, "nr_mlock unchanged");
    assert_eq!(
        mm.stat(Stat::nr_unevictable),
        unevictable,
        "nr_unevictable unchanged"
    );
    assert!(kept
        .iter()
        .all(|&id| mm.folios.get(id).mlocked() && mm.folios.get(id).unevictable()));
}

#[test]
fn s29_2_4_compaction_skips_unevictable_when_not_allowed() {
    let (mut mm, kept) = scattered_mlocked(false);
    let before = ev(&mm);
    mm.compact_memory();
    check(&mm);
    assert!(kept.iter().all(|&id| mm.folios.migrations(id) == 0));
    assert_eq!(mm.stat(Stat::pgmigrate_success), 0);
    assert_eq!(mm.stat(Stat::compact_isolated), 0);
    assert_eq!(ev(&mm), before);
    // The same layout with evictable folios is compacted.
    let (mut mm, kept) = scattered_mlocked(false);
    for &id in &kept {
        mm.munlock_folio(id);
    }
    mm.compact_memory();
    assert!(mm.stat(Stat::pgmigrate_success) > 0);
}

/// §29.2.4: at 0, one unevictable page abandons its whole cc.order sub-block in async direct
/// compaction (skip-on-failure): with one mlocked page per pageblock an order-9 async
/// compaction isolates nothing, though every block is half evictable pages; at 1 it isolates,
/// and at 0 sync compaction takes the evictable pages around the mlocked ones.
#[test]
fn s29_2_4_async_direct_compaction_abandons_sub_blocks_with_unevictable_pages() {
    use fraglab_mm::compaction::CompactPriority;
    use fraglab_mm::AllocFlags;
    let min = AllocFlags(AllocFlags::WMARK_MIN);
    let layout = |allowed: bool| {
        let (mut mm, kept) = scattered_mlocked(allowed);
        for &id in &kept {
            if mm.folios.get(id).pfn % 512 != 1 {
                mm.munlock_folio(id);
            }
        }
        check(&mm);
        mm
    };
    let mut mm = layout(false);
    let (rc, _, st) = mm.try_to_compact_pages(0, Gfp::GFP_TRANSHUGE, 9, min, CompactPriority::Async);
    assert!(st.migrate_scanned > 0, "{rc:?} {st:?}");
    assert_eq!(st.isolated, 0, "every sub-block abandoned: {st:?}");
    check(&mm);
    // Allowed: the same async compaction isolates.
    let mut mm = layout(true);
    let (_, _, st) = mm.try_to_compact_pages(0, Gfp::GFP_TRANSHUGE, 9, min, CompactPriority::Async);
    assert!(st.isolated > 0, "{st:?}");
    // Not allowed, sync: the evictable pages are taken, the mlocked ones stay.
    let mut mm = layout(false);
    let (_, _, st) = mm.try_to_compact_pages(0, Gfp::GFP_TRANSHUGE, 9, min, CompactPriority::SyncFull);
    assert!(st.isolated > 0, "{st:?}");
    let moved_locked = mm
        .folios
        .live()
        .filter(|&(id, f)| f.mlocked() && mm.folios.migrations(id) > 0)
        .count();
    assert_eq!(moved_locked, 0);
    check(&mm);
}
