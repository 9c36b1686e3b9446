//! The allocator primitives a policy plug-in uses (issue 37, docs/policies.md):
//! `set_pageblock_type`, `pageblock_free` and `evacuate_range`.

use fraglab_mm::folio::FolioKind;
use fraglab_mm::types::{MigrateType, PAGEBLOCK_NR_PAGES};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, MachineConfig, Mm, Tunables};

use crate::common::machine;

/// The DMA32 zone's index and its first whole pageblock.
fn dma32(mm: &Mm) -> (usize, u32) {
    let zi = mm
        .zones
        .iter()
        .position(|z| z.zone_type == fraglab_mm::ZoneType::Dma32)
        .unwrap();
    (zi, mm.zones[zi].start_pfn.next_multiple_of(PAGEBLOCK_NR_PAGES))
}

#[test]
fn retyping_a_block_inside_a_free_max_order_chunk_retypes_the_chunk() {
    let mut mm = machine(256);
    let (zi, _) = dma32(&mm);
    // At boot the blocks of DMA32 past its reserved pages are free, in max-order chunks of two
    // blocks: take the one before the last.
    let b = (mm.zones[zi].end_pfn() - 4 * PAGEBLOCK_NR_PAGES) & !(2 * PAGEBLOCK_NR_PAGES - 1);
    assert!(mm.pageblock_free(b) && mm.pageblock_free(b + PAGEBLOCK_NR_PAGES));
    let free_before = mm.zones[zi].nr_free_pages();
    let moved = mm.set_pageblock_type(zi, b + PAGEBLOCK_NR_PAGES, MigrateType::Unmovable);
    assert_eq!(moved, Some(2 * PAGEBLOCK_NR_PAGES as u64));
    // Both blocks of the chunk: a half freed alone would merge back and retype its buddy.
    assert_eq!(mm.block_mt(b + PAGEBLOCK_NR_PAGES), MigrateType::Unmovable);
    assert_eq!(mm.block_mt(b), MigrateType::Unmovable);
    assert_eq!(
        mm.block_mt(b + 2 * PAGEBLOCK_NR_PAGES),
        MigrateType::Movable,
        "the next chunk keeps its type"
    );
    assert_eq!(
        mm.zones[zi].nr_free_pages(),
        free_before,
        "no free page lost or made"
    );
    assert!(mm.pageblock_free(b) && mm.pageblock_free(b + PAGEBLOCK_NR_PAGES));
    mm.check_invariants().unwrap();
    // Retyping to the type it has moves nothing.
    assert_eq!(
        mm.set_pageblock_type(zi, b + PAGEBLOCK_NR_PAGES, MigrateType::Unmovable),
        Some(0)
    );
    // An order-9 unmovable request is served from the retyped block without any fallback.
    let pfn = mm.alloc_pages(0, Gfp::GFP_KERNEL, 9).unwrap();
    assert!(pfn == b || pfn == b + PAGEBLOCK_NR_PAGES, "{pfn:#x}");
}

#[test]
fn evacuating_a_block_moves_its_movable_folios_out_and_empties_it() {
    let mut mm = machine(256);
    let (zi, _) = dma32(&mm);
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::Anon, false) {
        ids.push(id);
        if ids.len() == 20_000 {
            break;
        }
    }
    // The block of the first folio: full of anon pages. Retype it, then empty it.
    let b = mm.folios.get(ids[0]).pfn & !(PAGEBLOCK_NR_PAGES - 1);
    assert!(!mm.pageblock_free(b));
    let tokens: Vec<u64> = ids.iter().map(|&id| mm.folios.get(id).token()).collect();
    mm.set_pageblock_type(zi, b, MigrateType::Unmovable).unwrap();
    let before = mm.stat(Stat::pgmigrate_success);
    let in_block = |mm: &Mm| {
        ids.iter()
            .filter(|&&id| (b..b + PAGEBLOCK_NR_PAGES).contains(&mm.folios.get(id).pfn))
            .count() as u64
    };
    let n = in_block(&mm);
    let (moved, stayed) = mm.evacuate_range(zi, b, b + PAGEBLOCK_NR_PAGES, 0);
    assert_eq!(mm.stat(Stat::pgmigrate_success) - before, moved);
    // The block was full of anon pages; every one moved out (free memory is plenty), into
    // targets outside the block.
    assert_eq!((moved, stayed), (n, 0));
    assert_eq!(n, PAGEBLOCK_NR_PAGES as u64);
    assert_eq!(in_block(&mm), 0);
    // Every folio kept its contents.
    for (&id, &t) in ids.iter().zip(&tokens) {
        assert_eq!(mm.folios.get(id).token(), t);
    }
    mm.drain_all_pages();
    assert!(mm.pageblock_free(b), "every page of the block moved out");
    mm.check_invariants().unwrap();
}

/// `Mm::apply_settings` (a warm fork's sysctl writes): watermarks follow the written knobs as
/// after a boot with them; THP switched on raises min_free_kbytes (khugepaged's
/// recommendation), switched off recalculates it; an unset min_free_kbytes is not written.
#[test]
fn applied_settings_are_the_sysctl_writes() {
    use fraglab_mm::config::MmConfig;
    let machine = MachineConfig::x86_64(1 << 30, false, 1).unwrap();
    let cfg = |f: &dyn Fn(&mut Tunables)| {
        let mut c = MmConfig::new(machine.clone());
        f(&mut c.tun);
        c
    };
    // The watermarks and, derived from the low one (`zone_pcp_update`), the PCP high limits.
    let wmarks = |mm: &Mm| {
        mm.zones
            .iter()
            .map(|z| {
                (
                    z.wmark,
                    z.pcp
                        .iter()
                        .map(|p| (p.high_min, p.high_max, p.batch))
                        .collect::<Vec<_>>(),
                )
            })
            .collect::<Vec<_>>()
    };
    // watermark_scale_factor: the watermarks of a boot with it.
    let mut mm = Mm::from_config(&cfg(&|_| {})).unwrap();
    let boosted = cfg(&|t| t.watermark_scale_factor = 200);
    let before = wmarks(&mm);
    mm.apply_settings(&boosted);
    assert_ne!(wmarks(&mm), before);
    assert_eq!(wmarks(&mm), wmarks(&Mm::from_config(&boosted).unwrap()));
    // A written min_free_kbytes is taken as is; leaving it unset keeps it.
    mm.apply_settings(&cfg(&|t| t.min_free_kbytes = Some(20_000)));
    assert_eq!(mm.min_free_kbytes, 20_000);
    mm.apply_settings(&cfg(&|_| {}));
    assert_eq!(mm.min_free_kbytes, 20_000);
    // THP off at boot: the plain sqrt value; switched on: raised to khugepaged's
    // recommendation; switched off again: recalculated, below the recommendation.
    let mut mm = Mm::from_config(&cfg(&|t| t.thp_enabled = false)).unwrap();
    let plain = mm.min_free_kbytes;
    mm.apply_settings(&cfg(&|t| t.thp_enabled = true));
    let raised = mm.min_free_kbytes;
    assert!(raised > plain, "{plain} -> {raised}");
    mm.apply_settings(&cfg(&|t| t.thp_enabled = false));
    assert!(
        mm.min_free_kbytes < raised && mm.min_free_kbytes >= 128,
        "{}",
        mm.min_free_kbytes
    );
    mm.check_invariants().unwrap();
}
