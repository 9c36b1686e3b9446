//! Migration failures in compaction (docs/model §25, §13, §9.6.3): the per-folio outcomes
//! by mode and caller, the isolation filters, the passes' work, `pgmigrate_fail`, and the
//! writeback timeline (`writeback.rs`) that puts folios under writeback.

use crate::common;

use common::*;
use fraglab_mm::compaction::{CompactPriority, MigrateMode};
use fraglab_mm::filemap::Mapping;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::migrate::{MigrateKind, MigrateOutcome};
use fraglab_mm::vmscan::{ScanControl, LRU_INACTIVE_FILE};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{AllocFlags, Gfp, Mm};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// A 16-block zone: anon folios at pfn % 4 == 0, order-0 page-cache folios of a mapping built
/// as `mapping` (written, so dirty) in the holes at pfn % 4 == 1, the rest free. Returns the
/// machine, the mapping and the file folios.
fn layout(mapping: Mapping) -> (Mm, u32, Vec<FolioId>) {
    let mut mm = dma32(16, 1, tun_kb(128));
    let m = mm.add_mapping(mapping);
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        all.push(id);
    }
    let mut rest = Vec::new();
    let mut holes = 0u64;
    for id in all {
        if mm.folios.get(id).pfn % 4 == 1 {
            mm.free_folio(0, id);
            holes += 1;
        } else {
            rest.push(id);
        }
    }
    mm.drain_all_pages();
    for i in 0..holes {
        mm.filemap_write(0, m, i, 4096);
    }
    for id in rest {
        if mm.folios.get(id).pfn % 4 >= 2 {
            mm.free_folio(0, id);
        }
    }
    mm.drain_all_pages();
    let file: Vec<FolioId> = mm
        .folios
        .live()
        .filter(|(_, f)| f.kind == FolioKind::File)
        .map(|(id, _)| id)
        .collect();
    assert!(file.len() > 1000, "{} file folios", file.len());
    assert!(file.iter().all(|&id| mm.folios.get(id).dirty()));
    check(&mm);
    (mm, m, file)
}

fn moved(mm: &Mm, ids: &[FolioId]) -> usize {
    ids.iter()
        .filter(|&&id| mm.folios.folios[id as usize].live() && mm.folios.migrations(id) > 0)
        .count()
}

fn direct(mm: &mut Mm, prio: CompactPriority) -> fraglab_mm::compaction::CompactRunStats {
    let min = AllocFlags(AllocFlags::WMARK_MIN);
    mm.try_to_compact_pages(0, Gfp::GFP_TRANSHUGE, 9, min, prio).2
}

/// The most pages one `migrate_pages` call failed (from migrate:mm_migrate_pages): at most 1
/// when the only failure is an order-0 folio's −ENOMEM, which ends the call.
fn max_failed_per_call(mm: &mut Mm) -> u64 {
    mm.take_trace()
        .iter()
        .filter_map(|r| match r.event {
            fraglab_mm::trace::TraceEvent::MmMigratePages { failed, .. } => Some(failed),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

fn trace_migrate(mm: &mut Mm) {
    mm.set_trace_mask(fraglab_mm::node::trace_kind::MIGRATE);
}

/// Pages the migration scanner isolated (mm_compaction_isolate_migratepages' nr_taken).
fn migrate_isolated(mm: &mut Mm) -> u64 {
    mm.take_trace()
        .iter()
        .map(|r| match r.event {
            fraglab_mm::trace::TraceEvent::MmCompactionIsolate {
                free: false,
                nr_taken,
                ..
            } => nr_taken,
            _ => 0,
        })
        .sum()
}

/// Puts every dirty folio of `ids` under writeback for a long time (the device is slow).
fn under_writeback(mm: &mut Mm, ids: &[FolioId]) {
    mm.cache.writeback.io_ns = 1_000_000_000;
    for &id in ids {
        mm.folio_start_writeback(id);
    }
    assert!(ids.iter().all(|&id| mm.folio_test_writeback(id)));
}

/// §25.1: the table's columns for the states the model has — a lock held for a read in flight
/// (#3), writeback (#4), a pin (#7), dirty with and without `migrate_folio` (#9).
#[test]
fn section_25_1_outcome_per_mode_and_caller() {
    use MigrateMode::*;
    use MigrateOutcome::*;
    let (mut mm, _, file) = layout(Mapping::large_folios());
    let id = file[0];
    assert_eq!(mm.folio_migrate_kind(id), MigrateKind::FileBufferHeads);
    let cols = |mm: &Mm| {
        [
            mm.migrate_folio_outcome(id, Async, true),
            mm.migrate_folio_outcome(id, SyncLight, true),
            mm.migrate_folio_outcome(id, SyncLight, false),
            mm.migrate_folio_outcome(id, Sync, true),
            mm.migrate_folio_outcome(id, Sync, false),
        ]
    };
    // Dirty, with migrate_folio: migrates in every mode.
    assert_eq!(cols(&mm), [Success; 5]);
    // #3: locked with a read in flight: only SYNC from kcompactd or /proc waits for it.
    mm.folios.folios[id as usize].set_io_locked(true);
    assert_eq!(cols(&mm), [Again, Again, Again, Again, Success]);
    mm.folios.folios[id as usize].set_io_locked(false);
    // #4: under writeback: permanent below SYNC, SYNC waits.
    under_writeback(&mut mm, &[id]);
    assert_eq!(cols(&mm), [Fail, Fail, Fail, Success, Success]);
    mm.cur.now_ns = mm.folios.writeback_end_ns(id);
    assert!(!mm.folio_test_writeback(id));
    assert_eq!(cols(&mm), [Success; 5]);
    // #7: a pin fails every attempt.
    mm.folios.folios[id as usize].set_pinned(true);
    assert_eq!(cols(&mm), [Again; 5]);
    mm.folios.folios[id as usize].set_pinned(false);
    // #9: dirty without migrate_folio: permanent in every mode; clean it migrates.
    let (mut mm, _, file) = layout(Mapping {
        migrate_folio: false,
        ..Mapping::no_large_folios()
    });
    let id = file[0];
    assert_eq!(mm.folio_migrate_kind(id), MigrateKind::FileNoMigrateFolio);
    assert_eq!(cols(&mm), [Fail; 5]);
    mm.folio_mark_dirty(id, false);
    assert_eq!(cols(&mm), [Success; 5]);
}

/// §25.4: the mapping's filesystem gives the folio's kind.
#[test]
fn section_25_4_kind_from_the_mapping() {
    for (m, kind) in [
        (Mapping::xfs_like(), MigrateKind::FileMigrateFolio),
        (Mapping::large_folios(), MigrateKind::FileBufferHeads),
        (Mapping::no_large_folios(), MigrateKind::FileBufferHeadsNorefs),
    ] {
        let mut mm = dma32(4, 1, tun_kb(128));
        let map = mm.add_mapping(m);
        mm.filemap_write(0, map, 0, 4096);
        let a = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false).unwrap();
        let f = mm.filemap_lookup(map, 0).unwrap();
        assert_eq!(mm.folio_migrate_kind(f), kind);
        assert_eq!(mm.folio_migrate_kind(a), MigrateKind::Anon);
    }
}

/// §25.3 + §25.1 #4: ASYNC and SYNC_LIGHT compaction do not isolate folios under writeback
/// (so no −EBUSY failure is counted); SYNC (/proc) isolates them and waits for the writes,
/// migrating them; once the writes completed, SYNC_LIGHT migrates them too.
#[test]
fn section_25_3_writeback_is_not_isolated_below_sync() {
    for prio in [CompactPriority::Async, CompactPriority::SyncLight] {
        let (mut mm, _, file) = layout(Mapping::large_folios());
        under_writeback(&mut mm, &file);
        trace_migrate(&mut mm);
        let st = direct(&mut mm, prio);
        if prio == CompactPriority::Async {
            // Every order-9 sub-block holds a folio under writeback: skip-on-failure (§9.6.3)
            // abandons them all.
            assert_eq!(st.isolated, 0, "{st:?}");
            assert!(st.migrate_scanned > 0, "{st:?}");
        } else {
            assert!(st.migrated_pages > 0, "{prio:?}: the anon folios move: {st:?}");
        }
        assert_eq!(moved(&mm, &file), 0, "{prio:?}");
        assert!(
            max_failed_per_call(&mut mm) <= 1,
            "{prio:?}: never isolated, so no −EBUSY"
        );
        check(&mm);
    }
    // /proc: SYNC waits for the end of writeback.
    let (mut mm, _, file) = layout(Mapping::large_folios());
    under_writeback(&mut mm, &file);
    trace_migrate(&mut mm);
    let st = mm.compact_memory();
    assert!(moved(&mm, &file) > 0, "{st:?}");
    assert!(max_failed_per_call(&mut mm) <= 1);
    assert!(st.migrate_wait_ns > 0, "{st:?}");
    // Each waited folio first failed its ASYNC phase (−EBUSY, one attempt) and was retried once.
    assert_eq!(st.migrate_retries, moved(&mm, &file) as u64, "{st:?}");
    check(&mm);
    // Completed writes: SYNC_LIGHT migrates the same folios.
    let (mut mm, _, file) = layout(Mapping::large_folios());
    under_writeback(&mut mm, &file);
    mm.cur.now_ns = mm.cache.writeback.busy_until_ns;
    direct(&mut mm, CompactPriority::SyncLight);
    assert!(moved(&mm, &file) > 0);
    check(&mm);
}

/// §25.3 + §25.1 #9: dirty folios of a mapping without `migrate_folio` are not isolated below
/// SYNC; SYNC isolates them and every one fails permanently (`pgmigrate_fail` counts their
/// pages, no retry). Dirty folios of a mapping with `migrate_folio` migrate in every mode.
#[test]
fn section_25_1_9_dirty_without_migrate_folio_never_migrates() {
    let no_mf = Mapping {
        migrate_folio: false,
        ..Mapping::no_large_folios()
    };
    let (mut mm, _, file) = layout(no_mf);
    trace_migrate(&mut mm);
    direct(&mut mm, CompactPriority::SyncLight);
    assert_eq!(moved(&mm, &file), 0);
    assert!(max_failed_per_call(&mut mm) <= 1, "not isolated by SYNC_LIGHT");
    let (mut mm, _, file) = layout(no_mf);
    mm.set_trace_mask(fraglab_mm::node::trace_kind::COMPACTION_ISOLATE);
    let st = mm.compact_memory();
    assert_eq!(moved(&mm, &file), 0);
    let fail = mm.stat(Stat::pgmigrate_fail);
    assert!(fail > 0, "{st:?}");
    assert_eq!(fail, st.failed_pages);
    // Every isolated page migrated or failed (no −ENOMEM here), each failure after one retry
    // (the SYNC phase after the ASYNC one).
    assert_eq!(migrate_isolated(&mut mm), fail + st.migrated_pages, "{st:?}");
    assert_eq!(st.migrate_retries, fail, "{st:?}");
    assert!(file.iter().all(|&id| mm.folios.get(id).dirty()));
    check(&mm);
    for prio in [CompactPriority::Async, CompactPriority::SyncLight] {
        let (mut mm, _, file) = layout(Mapping::no_large_folios());
        trace_migrate(&mut mm);
        direct(&mut mm, prio);
        assert!(moved(&mm, &file) > 0, "{prio:?}");
        assert!(max_failed_per_call(&mut mm) <= 1);
        // PG_dirty travels with the folio.
        assert!(file.iter().all(|&id| mm.folios.get(id).dirty()));
    }
}

/// §25.3 + §25.1 #7: a pinned anon folio is never isolated; a pinned page-cache folio is, and
/// fails at the reference count in every pass: ASYNC 10 passes; SYNC 3 ASYNC passes then 7 in
/// its own mode; each extra pass is one retry of work, and its pages count in pgmigrate_fail.
#[test]
fn section_25_1_7_pins_fail_and_pinned_anon_is_not_isolated() {
    let (mut mm, _, file) = layout(Mapping::large_folios());
    let anon: Vec<FolioId> = mm
        .folios
        .live()
        .filter(|(_, f)| f.kind == FolioKind::Anon)
        .map(|(id, _)| id)
        .collect();
    for &id in anon.iter().chain(&file) {
        mm.folios.folios[id as usize].set_pinned(true);
    }
    mm.set_trace_mask(fraglab_mm::node::trace_kind::COMPACTION_ISOLATE);
    let st = mm.compact_memory();
    assert_eq!(moved(&mm, &anon), 0);
    assert_eq!(moved(&mm, &file), 0);
    let fail = mm.stat(Stat::pgmigrate_fail);
    assert!(fail > 0);
    assert_eq!(st.migrated_pages, 0);
    // Only the file folios were isolated, and each failed after 3 + 7 attempts.
    assert_eq!(migrate_isolated(&mut mm), fail, "{st:?}");
    assert!(
        fail <= file.len() as u64,
        "{fail} pages failed, {} file folios",
        file.len()
    );
    assert_eq!(st.migrate_retries, 9 * fail, "{st:?}");
    check(&mm);
    // Direct ASYNC: 10 passes.
    let (mut mm, _, file) = layout(Mapping::large_folios());
    for &id in &file {
        mm.folios.folios[id as usize].set_pinned(true);
    }
    let st = direct(&mut mm, CompactPriority::Async);
    let fail = mm.stat(Stat::pgmigrate_fail);
    assert!(fail > 0, "{st:?}");
    let retried = st.migrate_retries / 9;
    assert_eq!(st.migrate_retries % 9, 0, "10 attempts each: {st:?}");
    assert!(retried == fail || retried + 1 == fail, "{st:?}");
    assert_eq!(moved(&mm, &file), 0);
    check(&mm);
}

/// §25.4 / `writeback.rs`: the flusher's submission clears PG_dirty and sets PG_writeback
/// until the device has served the folio (`io_ns` per 32 pages, one queue in order);
/// `nr_writeback` follows the device; reclaim neither frees nor counts such a folio as dirty.
#[test]
fn section_25_4_writeback_lasts_until_the_device_completes() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let m = mm.add_mapping(Mapping::no_large_folios());
    mm.filemap_write(0, m, 0, 64 * 4096);
    assert_eq!(mm.cache.nr_dirty, 64);
    mm.cache.writeback.io_ns = 64_000;
    mm.cur.now_ns = 1_000;
    assert_eq!(mm.writeback_oldest(0), 64);
    assert_eq!(mm.cache.nr_dirty, 0);
    assert_eq!(mm.stat(Stat::nr_writeback), 64);
    assert_eq!(mm.cache.writeback.busy_until_ns, 1_000 + 64 * 2_000);
    // Submitted again while under writeback: skipped (WB_SYNC_NONE).
    let ids: Vec<FolioId> = (0..64).map(|i| mm.filemap_lookup(m, i).unwrap()).collect();
    mm.folio_mark_dirty(ids[0], true);
    assert_eq!(mm.folio_start_writeback(ids[0]), 0);
    mm.folio_mark_dirty(ids[0], false);
    // Half-way: the first 32 are done.
    mm.cur.now_ns = 1_000 + 32 * 2_000;
    assert!(mm.writeback_settle().is_some());
    assert_eq!(mm.stat(Stat::nr_writeback), 32);
    assert!(!mm.folio_test_writeback(ids[31]) && mm.folio_test_writeback(ids[32]));
    // Reclaim: the 32 written are freed, the 32 under writeback are kept and activated.
    let mut sc = ScanControl::direct(3, 0, 0);
    sc.nr_to_reclaim = u64::MAX;
    let freed = mm.shrink_inactive_list(64, LRU_INACTIVE_FILE, &mut sc);
    assert_eq!(freed, 32);
    assert!(ids[32..].iter().all(|&id| mm.folios.get(id).active()));
    mm.cur.now_ns = 1_000 + 64 * 2_000;
    assert_eq!(mm.writeback_settle(), None);
    assert_eq!(mm.stat(Stat::nr_writeback), 0);
    check(&mm);
}

/// A 16-block zone of anon order-0 folios with order-2 ext4 page-cache folios (buffer heads,
/// written, so dirty) at pfn % 16 == 4..8 and order-0 holes at pfn % 16 ∈ {1, 9}: the free
/// scanner can only isolate order-0 chunks, so every order-2 folio meets `compaction_alloc`
/// returning NULL (§9.8.5). `dirty` false cleans the folios first.
fn ext4_large_folios_and_order0_holes(dirty: bool) -> (Mm, Vec<FolioId>) {
    let mut mm = dma32(16, 1, tun_kb(128));
    let m = mm.add_mapping(Mapping::large_folios());
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        all.push(id);
    }
    let (mut kept, mut later) = (Vec::new(), Vec::new());
    let mut holes = 0u64;
    for id in all {
        let r = mm.folios.get(id).pfn % 16;
        if (4..8).contains(&r) {
            mm.free_folio(0, id);
            holes += 1;
        } else if r == 1 || r == 9 {
            later.push(id);
        } else {
            kept.push(id);
        }
    }
    mm.drain_all_pages();
    for i in 0..holes / 4 {
        mm.filemap_write(0, m, i * 4, 16384);
    }
    for id in later {
        mm.free_folio(0, id);
    }
    mm.drain_all_pages();
    let file: Vec<FolioId> = mm
        .folios
        .live()
        .filter(|(_, f)| f.kind == FolioKind::File)
        .map(|(id, _)| id)
        .collect();
    assert!(file.len() > 200, "{} file folios", file.len());
    assert!(file.iter().all(|&id| mm.folios.get(id).order == 2));
    if !dirty {
        for &id in &file {
            mm.folio_mark_dirty(id, false);
        }
    }
    check(&mm);
    (mm, file)
}

/// §13.3 / §9.8.5 (migrate.c `try_split_folio`, huge_memory.c `__folio_split`,
/// `filemap_release_folio` → `ext4_release_folio` → `try_to_free_buffers`): when no isolated
/// free chunk fits a large folio, a clean ext4 folio is split and its pieces migrate, but a
/// dirty one keeps its dirty buffers, so the split fails, `migrate_pages` returns −ENOMEM and
/// `compact_memory` ends the zone CONTENDED at the first such folio (as the live kernel did in
/// every contended zone of docs/snapshot-compact.md).
#[test]
fn section_13_3_dirty_ext4_large_folio_split_fails_and_ends_compaction() {
    let (mut clean, _) = ext4_large_folios_and_order0_holes(false);
    let st = clean.compact_memory();
    // Split pieces are order-0 page-cache folios (the model reuses folio ids).
    let split = clean
        .folios
        .live()
        .filter(|(_, f)| f.kind == FolioKind::File && f.order == 0)
        .count();
    assert!(split > 100, "clean folios are split: {split} {st:?}");
    assert!(st.migrated_pages > 500, "{st:?}");
    check(&clean);

    let (mut dirty, file) = ext4_large_folios_and_order0_holes(true);
    dirty
        .set_trace_mask(fraglab_mm::node::trace_kind::MIGRATE | fraglab_mm::node::trace_kind::COMPACTION_RUN);
    let st = dirty.compact_memory();
    assert!(
        file.iter().all(|&id| dirty.folios.folios[id as usize].live()
            && dirty.folios.get(id).order == 2
            && dirty.folios.get(id).dirty()),
        "no dirty ext4 folio is split"
    );
    assert!(
        st.migrated_pages < 100,
        "the zone ends at the first dirty large folio: {st:?}"
    );
    // The folio that failed counts whole in pgmigrate_fail.
    assert!(dirty.stat(Stat::pgmigrate_fail) >= 4, "{st:?}");
    let contended = dirty.take_trace().iter().any(|r| {
        matches!(
            r.event,
            fraglab_mm::trace::TraceEvent::MmCompactionBeginEnd { status: Some(s), .. }
                if s == fraglab_mm::compaction::CompactResult::Contended as u8
        )
    });
    assert!(contended, "compact_zone ends CONTENDED");
    check(&dirty);
}

/// §13.3 (huge_memory.c `__folio_split`: −EBUSY under writeback): the same ext4 large folios,
/// clean but under writeback, are isolated by compact_memory (SYNC) and not split either; the
/// zone ends CONTENDED at the first of them.
#[test]
fn section_13_3_large_folio_under_writeback_is_not_split() {
    let (mut mm, file) = ext4_large_folios_and_order0_holes(true);
    under_writeback(&mut mm, &file);
    assert!(file.iter().all(|&id| !mm.folios.get(id).dirty()));
    let st = mm.compact_memory();
    assert!(
        file.iter()
            .all(|&id| mm.folios.folios[id as usize].live() && mm.folios.get(id).order == 2),
        "no folio under writeback is split"
    );
    assert!(st.migrated_pages < 100, "{st:?}");
    check(&mm);
}

/// Fragmentation blame (issue 37): a folio isolated and then refused by migration (#9 here:
/// dirty without `migrate_folio`, in every pass) kept its block from emptying as a page the
/// scanner could not isolate does: each is a `compact_blocked` event on its allocator (boot:
/// blame was turned on after the pages were allocated).
#[test]
fn migration_failures_after_isolation_are_blamed_on_the_folio_s_allocator() {
    use fraglab_mm::blame::{BlameKind, BOOT_SOURCE};
    let no_mf = Mapping {
        migrate_folio: false,
        ..Mapping::no_large_folios()
    };
    let (mut mm, _, _) = layout(no_mf);
    mm.enable_blame();
    mm.compact_memory();
    let fail = mm.stat(Stat::pgmigrate_fail);
    assert!(fail > 0);
    let b = mm.blame.as_deref().unwrap();
    let pages = b.stats[BOOT_SOURCE as usize].pages[BlameKind::CompactBlocked as usize];
    assert!(pages >= fail, "{pages} blamed pages, {fail} failed");
    assert!(!b.stats[BOOT_SOURCE as usize].compact_blocked.is_empty());
}
