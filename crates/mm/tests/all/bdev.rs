//! Kernel-model.md §33: page-cache pages in Unmovable pageblocks without a fallback event — the
//! block device's page cache that holds ext4's metadata (mm's `bdev.rs`). Each test builds the
//! state through the public API and checks what the kernel does: where the pages go and with
//! which migratetype, how many a number of files makes, when reclaim and compaction may take
//! them.

use crate::common;

use common::*;
use fraglab_mm::bdev::{dir_blocks_needed, dirent_rec_len, meta_of_block, Meta, BH_PER_SLAB};
use fraglab_mm::compaction::{CompactControl, MigrateMode};
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::migrate::MigrateOutcome;
use fraglab_mm::node::trace_kind;
use fraglab_mm::vmscan::{LRU_ACTIVE_FILE, LRU_INACTIVE_FILE};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, MigrateType, Mm};

const S: u64 = 1_000_000_000;

/// The live bdev folios whose block is a directory block (the layout's directory area).
fn dir_folios(mm: &Mm) -> Vec<FolioId> {
    mm.folios
        .live()
        .filter(|(_, f)| f.kind == FolioKind::Bdev && meta_of_block(f.index) == Meta::Dir)
        .map(|(id, _)| id)
        .collect()
}

fn bdev_folios(mm: &Mm) -> u64 {
    mm.folios.census_of(FolioKind::Bdev).iter().sum()
}

/// A machine whose free memory is block 0, claimed for UNMOVABLE by an unmovable kernel
/// folio (the model's "Unmovable free memory exists"), and a free Reclaimable block 1 (for the
/// buffer heads' slab); everything else is allocated as raw order-0 MOVABLE pages, which
/// compaction cannot move.
fn unmovable_block_at_0(blocks: u32) -> (Mm, FolioId) {
    let mut mm = dma32(blocks, 1, tun_kb(128));
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, block(0), PB);
    let k = mm
        .alloc_folio(0, Gfp::GFP_KERNEL, 0, FolioKind::Kernel, false)
        .expect("block 0 is free");
    assert_eq!(mm.block_mt(block(0)), MigrateType::Unmovable);
    set_type(&mut mm, block(1), MigrateType::Reclaimable);
    free_range(&mut mm, 0, block(1), PB);
    (mm, k)
}

#[test]
fn s33_1_directory_blocks_are_unmovable_lru_pages_without_an_extfrag_event() {
    let (mut mm, k) = unmovable_block_at_0(16);
    // Room for the MOVABLE metadata (inode tables, bitmaps) elsewhere.
    free_range(&mut mm, 0, block(8), 4 * PB);
    let fallbacks = mm.fallbacks.clone();
    mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC_EXTFRAG);
    let e = mm.ext4_mount();
    let d = mm.ext4_mkdir(0, e, 0, false);
    for key in 0..2000 {
        mm.ext4_create(0, e, d, key, 4, false, false);
    }
    check(&mm);
    // §33.3: 2000 four-character names of 12 bytes make an htree of a root and 9 leaves.
    let dirs = dir_folios(&mm);
    assert_eq!(dirs.len() as u64, dir_blocks_needed(2000 * dirent_rec_len(4)));
    assert_eq!(dirs.len(), 10);
    assert_eq!(mm.ext4_stats(e).pages[Meta::Dir as usize], 10);
    for &id in &dirs {
        let f = mm.folios.get(id);
        // §33.1 item 3: from the UNMOVABLE lists, inside the Unmovable block, on the file LRU.
        assert_eq!(mm.pages.alloc_migratetype(f.pfn), MigrateType::Unmovable as u32);
        assert_eq!(mm.block_mt(f.pfn), MigrateType::Unmovable);
        assert!(
            f.pfn < block(1),
            "directory block at {:#x}, not in block 0",
            f.pfn
        );
        assert!(matches!(f.lru, LRU_INACTIVE_FILE | LRU_ACTIVE_FILE));
        assert!(mm.pages.flag(f.pfn, fraglab_mm::mmzone::PG_LRU));
    }
    // No fallback: neither the counters nor mm_page_alloc_extfrag moved.
    assert_eq!(mm.fallbacks, fallbacks);
    assert!(extfrags(&mm.take_trace()).is_empty());
    // The census by content: block 0 holds the kernel page and LRU pages — mixed, as the
    // kernel's kpageflags census (slab/kernel + LRU) sees it.
    let c = mm.block_content[(block(0) / PB) as usize];
    assert!(c[0] >= 1 && c[1] >= 10, "block 0 content {c:?}");
    assert!(mm.folio_is(k, mm.folios.get(k).token()));
    // The MOVABLE metadata went to Movable blocks.
    for (_, f) in mm.folios.live().filter(|(_, f)| f.kind == FolioKind::Bdev) {
        if meta_of_block(f.index) != Meta::Dir {
            assert_eq!(mm.pages.alloc_migratetype(f.pfn), MigrateType::Movable as u32);
            assert_eq!(mm.block_mt(f.pfn), MigrateType::Movable);
        }
    }
    // They are page cache: nr_file_pages counts them.
    assert_eq!(mm.stat(Stat::nr_file_pages), bdev_folios(&mm));
}

#[test]
fn s33_3_rates_files_to_pages() {
    let mut mm = dma32(256, 1, tun_kb(128));
    let e = mm.ext4_mount();
    let d = mm.ext4_mkdir(0, e, 0, false);
    let n = 4096u64;
    for key in 0..n {
        let len = key.checked_ilog10().map_or(1, |l| l + 1);
        mm.ext4_create(0, e, d, key, len, true, false);
    }
    mm.cur.now_ns = 5 * S;
    mm.jbd2_tick(0);
    check(&mm);
    let st = mm.ext4_stats(e).clone();
    // The directory's inode is the first free (ino 11, 0-based), the files take 12..=4107: 16
    // a table block (§33.3 item 1: 1/16 MOVABLE page a file), blocks 0..=256, each zeroed
    // (its other inodes free) — no read.
    let itable = (11 + 1 + n - 1) / 16 + 1;
    assert_eq!(st.pages[Meta::InodeTable as usize], itable);
    assert_eq!(st.pages[Meta::InodeReadahead as usize], 0);
    // One directory block a ≈ 234 files (12-byte entries at 69 % of 4084 bytes), plus the
    // root.
    let bytes: u64 = (0..n)
        .map(|k| dirent_rec_len(k.checked_ilog10().map_or(1, |l| l + 1)))
        .sum();
    let dirs = dir_blocks_needed(bytes);
    assert_eq!((bytes, dirs), (4096 * 12, 19));
    assert_eq!(st.pages[Meta::Dir as usize], dirs);
    // One group: its inode and block bitmaps (read: §33.3 item 3); and table block 0, which
    // holds mkfs's reserved inodes, is read when the directory's inode is written — its
    // readahead window ends at the used table (12 inodes: no whole block), so nothing more.
    assert_eq!(st.pages[Meta::Bitmap as usize], 2);
    assert_eq!((st.reads, st.itable_reads), (3, 1));
    // One commit of the 278 buffers journalled: 2 descriptors (254 tags each) + 1 commit block.
    assert_eq!((st.commits, st.journalled), (1, itable + dirs + 2));
    assert_eq!(st.pages[Meta::Journal as usize], 3);
    assert_eq!(st.unmovable(), dirs);
    assert_eq!(st.movable(), itable + 2 + 3);
    // One buffer_head a page, 39 to a RECLAIMABLE slab page.
    let pages = st.unmovable() + st.movable();
    assert_eq!(bdev_folios(&mm), pages);
    assert_eq!(mm.bh_census(), (pages, pages.div_ceil(BH_PER_SLAB as u64)));
    assert_eq!(
        mm.stat(Stat::nr_slab_reclaimable),
        pages.div_ceil(BH_PER_SLAB as u64)
    );
    // A second commit with nothing journalled does not happen.
    mm.cur.now_ns = 20 * S;
    mm.jbd2_tick(0);
    assert_eq!(mm.ext4_stats(e).commits, 1);
}

#[test]
fn s33_2_cold_inode_read_reads_the_table_ahead_unmovable() {
    let mut mm = dma32(64, 1, tun_kb(128));
    let e = mm.ext4_mount();
    let d = mm.ext4_mkdir(0, e, 0, true);
    // 2000 files on disk from before: nothing of them cached.
    let inos: Vec<u32> = (0..2000)
        .map(|k| mm.ext4_create(0, e, d, k, 4, true, true))
        .collect();
    assert_eq!(bdev_folios(&mm), 0);
    // Looking up file 1000 (inode 1012, table block 63): the leaf and root (UNMOVABLE), its
    // table block (MOVABLE) and the 32-block window [32, 64] around it, capped by the used
    // table (2012 inodes: 125 blocks): 32 UNMOVABLE pages besides the block itself.
    mm.ext4_lookup(0, e, d, 1000, Some(inos[1000]));
    let st = mm.ext4_stats(e).clone();
    assert_eq!(st.itable_reads, 1);
    assert_eq!(st.pages[Meta::InodeTable as usize], 1);
    assert_eq!(st.pages[Meta::InodeReadahead as usize], 32);
    assert_eq!(st.pages[Meta::Dir as usize], 2);
    assert_eq!(st.unmovable(), 34);
    // A neighbour's inode is now cached: no read.
    mm.ext4_lookup(0, e, d, 1001, Some(inos[1001]));
    assert_eq!(mm.ext4_stats(e).itable_reads, 1);
    check(&mm);
}

/// Block 0 Unmovable with a directory block in it (pinned: just journalled); then every free
/// page taken (raw allocations), and the kernel page that claimed block 0 and every other page
/// of the top two blocks freed: order-0 free pages only, so order-1 compaction has to run.
fn dir_page_in_block_0() -> (Mm, FolioId, u32) {
    let (mut mm, k) = unmovable_block_at_0(8);
    let e = mm.ext4_mount();
    mm.ext4_mkdir(0, e, 0, false);
    while mm
        .rmqueue(0, DMA32, 0, fraglab_mm::AllocFlags(0), MigrateType::Unmovable)
        .is_some()
    {}
    assert_eq!(mm.zones[DMA32].nr_free_pages(), 0);
    mm.free_folio(0, k);
    free_pfns(&mut mm, 0, (block(6)..block(8)).step_by(2));
    // What merged in the Unmovable block (the kernel page and a neighbour) is taken again:
    // no free chunk of order ≥ 1 anywhere.
    for o in (1..11).rev() {
        while mm.zones[DMA32].area.nr_by_type[o][MigrateType::Unmovable.idx()] > 0 {
            mm.rmqueue(
                0,
                DMA32,
                o as u32,
                fraglab_mm::AllocFlags(0),
                MigrateType::Unmovable,
            )
            .unwrap();
        }
    }
    assert!((1..11).all(|o| mm.zones[DMA32].area.nr_by_type[o].iter().all(|&n| n == 0)));
    // The fallbacks of the set-up boosted the watermark; kswapd would have reset it.
    mm.zones[DMA32].watermark_boost = 0;
    let id = dir_folios(&mm)[0];
    let pfn = mm.folios.get(id).pfn;
    assert!(pfn < block(1));
    assert_eq!(mm.block_mt(pfn), MigrateType::Unmovable);
    assert!(mm.bdev_pinned(id));
    (mm, id, pfn)
}

/// Async direct compaction of order 1 for `gfp` (`try_to_compact_pages`' first attempt), over
/// the whole zone whatever the skip hints an earlier run left.
fn async_direct(mm: &mut Mm, gfp: Gfp) -> u64 {
    let mut cc = CompactControl::new(DMA32, 1, gfp, MigrateMode::Async, 0);
    cc.direct_compaction = true;
    cc.highest_zoneidx = DMA32;
    cc.whole_zone = true;
    cc.ignore_skip_hint = true;
    let (_, stats) = mm.compact_zone(&mut cc);
    check(mm);
    stats.migrate_scanned
}

#[test]
fn s33_1_6_migratable_only_unpinned_and_by_compaction_that_scans_unmovable_blocks() {
    let (mut mm, id, pfn) = dir_page_in_block_0();
    // Journalled at 0: commit at 5 s, writeback at 35 s, next commit at 40 s.
    for mode in [MigrateMode::Async, MigrateMode::SyncLight, MigrateMode::Sync] {
        assert_eq!(mm.migrate_folio_outcome(id, mode, false), MigrateOutcome::Again);
    }
    // Pinned: even /proc/sys/vm/compact_memory (SYNC, every block) cannot move it.
    mm.compact_memory();
    check(&mm);
    assert_eq!(mm.folios.get(id).pfn, pfn);
    assert_eq!(mm.folios.cold(id).migrations, 0);
    mm.cur.now_ns = 39 * S;
    assert!(mm.bdev_pinned(id));
    mm.cur.now_ns = 40 * S;
    assert!(!mm.bdev_pinned(id));
    assert_eq!(
        mm.migrate_folio_outcome(id, MigrateMode::Async, false),
        MigrateOutcome::Success
    );
    // Unpinned, async direct compaction for a MOVABLE request scans (the Movable blocks) but
    // not the Unmovable block (`suitable_migration_source`): the folio stays.
    assert!(async_direct(&mut mm, Gfp::GFP_HIGHUSER_MOVABLE) > 0);
    assert_eq!(mm.folios.get(id).pfn, pfn);
    // compact_memory (SYNC), like kcompactd (SYNC_LIGHT), scans every block: the folio moves
    // out, its content and identity with it.
    let token = mm.folios.get(id).token();
    mm.compact_memory();
    check(&mm);
    assert_ne!(
        mm.folios.get(id).pfn,
        pfn,
        "the unpinned directory block migrated"
    );
    assert_eq!(mm.folios.get(id).token(), token);
    assert_eq!(mm.folios.cold(id).migrations, 1);
    assert_eq!(mm.folios.get(id).kind, FolioKind::Bdev);
    assert_eq!(mm.bdev_lookup(0, mm.folios.get(id).index), Some(id));
}

#[test]
fn s33_1_5_reclaim_drops_clean_unpinned_bdev_pages_only() {
    let mut mm = dma32(32, 1, tun_kb(128));
    let e = mm.ext4_mount();
    let d = mm.ext4_mkdir(0, e, 0, false);
    for key in 0..1000 {
        mm.ext4_create(0, e, d, key, 4, false, false);
    }
    mm.cur.now_ns = 5 * S;
    mm.jbd2_tick(0);
    let all = bdev_folios(&mm);
    let journal = mm.ext4_stats(e).pages[Meta::Journal as usize];
    assert!(all > 60 && journal == 1 + 1, "{all} {journal}");
    // drop_caches keeps the journalled buffers, frees the log blocks (clean, no journal_head).
    mm.drop_caches(0);
    check(&mm);
    assert_eq!(bdev_folios(&mm), all - journal);
    // Reclaim while pinned: nothing freed, the folios activated.
    let act = mm.stat(Stat::pgactivate);
    for _ in 0..8 {
        mm.try_to_free_pages(0, Gfp::GFP_KERNEL, 0);
    }
    check(&mm);
    assert_eq!(bdev_folios(&mm), all - journal);
    assert!(mm.stat(Stat::pgactivate) > act);
    // After the pin (journalled at 0..: commit 5 s, writeback 35 s, next commit 40 s): reclaim
    // evicts them, and their buffer heads and slab pages go with them.
    mm.cur.now_ns = 41 * S;
    for _ in 0..64 {
        mm.try_to_free_pages(0, Gfp::GFP_KERNEL, 0);
        if bdev_folios(&mm) == 0 {
            break;
        }
    }
    check(&mm);
    assert_eq!(bdev_folios(&mm), 0);
    assert_eq!(mm.bh_census(), (0, 0));
    assert_eq!(mm.stat(Stat::nr_file_pages), 0);
    // A directory block evicted is read again (UNMOVABLE) when the directory is next used.
    let before = mm.ext4_stats(e).pages[Meta::Dir as usize];
    mm.ext4_lookup(0, e, d, 7, None);
    assert_eq!(mm.ext4_stats(e).pages[Meta::Dir as usize], before + 2);
    check(&mm);
}

#[test]
fn s33_3_a_tree_on_disk_in_bulk_is_the_tree_made_file_by_file() {
    let mut a = dma32(32, 1, tun_kb(128));
    let mut b = dma32(32, 1, tun_kb(128));
    let (ea, eb) = (a.ext4_mount(), b.ext4_mount());
    let tree = a.ext4_tree(ea, 1000, 16, 12);
    let mut dirs = Vec::new();
    for f in 0..1000u64 {
        if f % 16 == 0 {
            dirs.push(b.ext4_mkdir(0, eb, 0, true));
        }
        let d = dirs[(f / 16) as usize];
        let ino = b.ext4_create(0, eb, d, f, 12, true, true);
        assert_eq!((tree.dir_of(f), tree.ino_of(f)), (d, ino), "file {f}");
    }
    assert_eq!(bdev_folios(&a) + bdev_folios(&b), 0, "nothing cached");
    for f in [0, 17, 500, 999] {
        a.ext4_lookup(0, ea, tree.dir_of(f), f, Some(tree.ino_of(f)));
        b.ext4_lookup(0, eb, dirs[(f / 16) as usize], f, Some(tree.ino_of(f)));
    }
    assert_eq!(a.ext4_stats(ea), b.ext4_stats(eb));
    // Cold lookups: each directory block (UNMOVABLE), and inode-table reads with readahead.
    let st = a.ext4_stats(ea);
    assert!(st.itable_reads >= 1 && st.pages[Meta::InodeReadahead as usize] > 0);
    check(&a);
}
