//! Compaction scenarios (docs/model §9, §13) and the folio_mode behaviours of seed 000.

use fraglab_mm::compaction::{CompactPriority, CompactResult, FolioMode};
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{AllocFlags, Gfp, Mm};

use crate::common::machine;

/// Fills memory with folios of `order` (anon) until allocation fails (or `fill` folios), then
/// frees the members whose index i has `free(i)`; returns the survivors with their tokens.
fn fragment_with(mm: &mut Mm, order: u32, fill: usize, free: impl Fn(usize) -> bool) -> Vec<(FolioId, u64)> {
    let mut all = Vec::new();
    for _ in 0..fill {
        match mm.alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, order, FolioKind::Anon, false) {
            Some(id) => all.push(id),
            None => break,
        }
    }
    let mut kept = Vec::new();
    for (i, id) in all.into_iter().enumerate() {
        if free(i) {
            mm.free_folio(0, id);
        } else {
            kept.push((id, mm.folios.get(id).token()));
        }
    }
    mm.drain_all_pages();
    mm.check_invariants().unwrap();
    kept
}

fn fragment(mm: &mut Mm, order: u32, fill: usize) -> Vec<(FolioId, u64)> {
    fragment_with(mm, order, fill, |i| i % 2 == 0)
}

fn free_blocks(mm: &Mm) -> u64 {
    mm.zones
        .iter()
        .map(|z| z.area.nr_free[9] + 2 * z.area.nr_free[10])
        .sum()
}

fn check_identity(mm: &Mm, kept: &[(FolioId, u64)]) {
    for &(id, token) in kept {
        let f = mm.folios.get(id);
        assert_eq!(f.token(), token, "folio {id} lost its content");
        assert_eq!(mm.folio_at(f.pfn), Some(id));
    }
}

#[test]
fn s9_compact_memory_rebuilds_free_pageblocks() {
    let mut mm = machine(256);
    let total_blocks = mm.zones.iter().map(|z| z.managed).sum::<u64>() / 512;
    let kept = fragment(&mut mm, 0, usize::MAX);
    let before = free_blocks(&mm);
    let stats = mm.compact_memory();
    mm.check_invariants().unwrap();
    let after = free_blocks(&mm);
    assert!(stats.migrated_pages > 1000, "{stats:?}");
    assert!(
        after > before + total_blocks / 4,
        "free blocks {before} -> {after} of {total_blocks}"
    );
    assert_eq!(mm.stat(Stat::pgmigrate_success), stats.migrated_pages);
    assert!(mm.stat(Stat::compact_migrate_scanned) > 0 && mm.stat(Stat::compact_free_scanned) > 0);
    check_identity(&mm, &kept);
    assert!(kept.iter().any(|(id, _)| mm.folios.migrations(*id) > 0));
}

/// Seed 000: with order-4 folios on the LRU, skip_large cannot empty their pageblocks;
/// migrate_free_split can; migrate_no_free_split runs out of exact-order targets.
#[test]
fn folio_modes_differ_on_large_folios() {
    let mut results = Vec::new();
    for mode in FolioMode::ALL {
        let mut mm = machine(256);
        mm.set_policy(fraglab_mm::policy::FolioCompaction::on_kernel(mode));
        let kept = fragment(&mut mm, 4, 100_000);
        let before = free_blocks(&mm);
        let stats = mm.compact_memory();
        mm.check_invariants().unwrap();
        check_identity(&mm, &kept);
        let census: Vec<u64> = mm.folios.census_of(FolioKind::Anon).to_vec();
        results.push((mode, before, free_blocks(&mm), stats.migrated_pages, census));
    }
    for r in &results {
        eprintln!("{:?}", r);
    }
    let get = |m: FolioMode| results.iter().find(|r| r.0 == m).unwrap().clone();
    let skip = get(FolioMode::SkipLarge);
    let split = get(FolioMode::SplitLarge);
    let nosplit = get(FolioMode::MigrateNoFreeSplit);
    let full = get(FolioMode::MigrateFreeSplit);
    assert_eq!(skip.3, 0, "skip_large migrates nothing");
    assert_eq!(skip.2, skip.1, "skip_large frees no block");
    assert!(full.2 > skip.2 + 10, "migrate_free_split frees blocks");
    assert!(
        split.4[0] > 10 * full.4[0].max(1),
        "split_large splits folios, 6.18 keeps them whole"
    );
    assert!(split.4[4] < full.4[4]);
    assert!(
        nosplit.2 <= full.2,
        "without free-page split compaction ends no better"
    );
}

/// Patch 2 without patch 3: order-0 folios need order-0 targets, but the holes are order-1
/// chunks, so `compaction_alloc` fails, migration returns −ENOMEM and compaction stops early
/// (§9.8.5, §13.3). With free-page split (6.18) the same state compacts.
#[test]
fn migrate_no_free_split_ends_with_enomem_on_larger_chunks() {
    let mut out = Vec::new();
    for mode in [FolioMode::MigrateNoFreeSplit, FolioMode::MigrateFreeSplit] {
        let mut mm = machine(256);
        mm.set_policy(fraglab_mm::policy::FolioCompaction::on_kernel(mode));
        let kept = fragment_with(&mut mm, 0, usize::MAX, |i| i % 4 < 2);
        let before = free_blocks(&mm);
        let stats = mm.compact_memory();
        mm.check_invariants().unwrap();
        check_identity(&mm, &kept);
        out.push((
            before,
            free_blocks(&mm),
            stats.migrated_pages,
            mm.stat(Stat::pgmigrate_fail),
        ));
    }
    eprintln!("{out:?}");
    let (nosplit, full) = (out[0], out[1]);
    assert!(nosplit.3 > 0, "the −ENOMEM failure is counted in pgmigrate_fail");
    assert_eq!(nosplit.2, 0, "the first order-0 folio finds no order-0 target");
    assert_eq!(nosplit.1, nosplit.0, "so no block is freed");
    assert!(full.2 > 10_000, "free-page split migrates: {out:?}");
    assert!(full.1 > nosplit.1 + 10, "and frees many blocks: {out:?}");
}

#[test]
fn s9_9_direct_compaction_captures_a_thp() {
    let mut mm = machine(256);
    let total_blocks = mm.zones.iter().map(|z| z.managed).sum::<u64>() / 512;
    fragment(&mut mm, 0, usize::MAX);
    let _ = total_blocks;
    // Take the remaining free pageblocks, so compaction has work.
    let mut held = Vec::new();
    while let Some(p) = mm.alloc_pages(0, Gfp::GFP_NOWAIT, 9) {
        held.push(p);
    }
    assert_eq!(free_blocks(&mm), 0);
    let (rc, page, stats) = mm.try_to_compact_pages(
        0,
        Gfp::GFP_TRANSHUGE,
        9,
        AllocFlags(AllocFlags::WMARK_MIN),
        CompactPriority::SyncLight,
    );
    assert!(stats.migrated_pages > 0);
    assert_eq!(rc, CompactResult::Success, "{stats:?}");
    let _ = page;
    if let Some(p) = page {
        mm.free_pages(0, p, 9);
    }
    mm.check_invariants().unwrap();
}

/// §15.2: compaction tracepoints in ftrace text form, with the format files' print strings.
#[test]
fn s15_2_compaction_tracepoints() {
    let mut mm = machine(64);
    fragment(&mut mm, 0, usize::MAX);
    mm.set_trace_mask(fraglab_mm::node::trace_kind::COMPACTION);
    mm.compact_memory();
    let text = fraglab_mm::trace::render_trace(&mm.take_trace());
    let begin = text.lines().find(|l| l.contains("mm_compaction_begin:")).unwrap();
    assert!(
        begin.ends_with(
            "mm_compaction_begin: zone_start=0x0 migrate_pfn=0x0 free_pfn=0x3e00 zone_end=0x4000, mode=sync"
        ),
        "{begin}"
    );
    let end = text.lines().find(|l| l.contains("mm_compaction_end:")).unwrap();
    assert!(end.contains(", mode=sync status=complete"), "{end}");
    let iso = text
        .lines()
        .find(|l| l.contains("mm_compaction_isolate_migratepages:"))
        .unwrap();
    assert!(
        iso.contains("range=(0x0 ~ 0x") && iso.contains(" nr_taken=32"),
        "{iso}"
    );
    let mig = text
        .lines()
        .find(|l| l.contains("mm_compaction_migratepages:"))
        .unwrap();
    assert!(mig.ends_with("nr_migrated=32 nr_failed=0"), "{mig}");
    assert!(text.contains("mm_compaction_finished: node=0 zone=DMA32    order=-1 ret=continue"));
}
