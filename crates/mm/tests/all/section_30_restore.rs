//! docs/model §30.3–§30.5: booting in a reconstructed state (`Mm::from_restore`). A
//! hand-made state on one DMA32 zone: reserved pages and a hole, blocks of every type, free
//! chunks of many orders, folios of every kind. After boot the rendered /proc files show
//! exactly the blocks, free chunks and folios given, and debug-vm's invariants hold.

use crate::common;

use common::{check, BASE, PB};
use fraglab_mm::folio::FolioKind;
use fraglab_mm::restore::{Restore, RestoreFolio};
use fraglab_mm::types::{MAX_PAGE_ORDER, NR_PAGE_ORDERS};
use fraglab_mm::vmstat::{render_buddyinfo, render_pagetypeinfo, render_vmstat};
use fraglab_mm::{MachineConfig, MigrateType, Mm, MmConfig, ZoneConfig, ZoneType};

const BLOCKS: u32 = 16;

/// Cuts [start, end) greedily into the largest naturally aligned chunks (§30.3 item 2).
fn cut(start: u32, end: u32) -> Vec<(u32, u8)> {
    let mut out = Vec::new();
    let mut pfn = start;
    while pfn < end {
        let mut order = MAX_PAGE_ORDER;
        while order > 0 && (pfn & ((1 << order) - 1) != 0 || pfn + (1 << order) > end) {
            order -= 1;
        }
        out.push((pfn, order as u8));
        pfn += 1 << order;
    }
    out
}

fn blk(i: u32) -> u32 {
    BASE + i * PB
}

/// Folios laid end to end from `start` (each aligned), the rest of [start, end) free.
fn fill(r: &mut Restore, start: u32, end: u32, folios: &[(u8, RestoreFolio, u32)]) {
    let mut pfn = start;
    for &(order, proto, n) in folios {
        for _ in 0..n {
            let size = 1u32 << order;
            let at = pfn.div_ceil(size) * size;
            r.free.extend(cut(pfn, at));
            r.folios.push(RestoreFolio {
                pfn: at,
                order,
                ..proto
            });
            pfn = at + size;
        }
    }
    r.free.extend(cut(pfn, end));
}

fn f(kind: FolioKind) -> RestoreFolio {
    RestoreFolio::new(0, 0, kind)
}

/// The hand-made state (module doc).
fn state() -> Restore {
    let zone = ZoneConfig {
        zone_type: ZoneType::Dma32,
        nid: 0,
        start_pfn: BASE,
        spanned: BLOCKS * PB,
        present: BLOCKS * PB - 64,
        managed: BLOCKS * PB - 128,
    };
    let mut r = Restore {
        zones: vec![zone],
        reserved: vec![[BASE, BASE + 64]],
        holes: vec![[BASE + 64, BASE + 128]],
        block_types: vec![MigrateType::Movable; ((BASE + BLOCKS * PB) / PB) as usize],
        ..Default::default()
    };
    let b = |i: u32| (blk(i) / PB) as usize;
    r.block_types[b(1)] = MigrateType::Unmovable;
    r.block_types[b(2)] = MigrateType::Reclaimable;
    r.block_types[b(10)] = MigrateType::HighAtomic;
    r.block_types[b(11)] = MigrateType::HighAtomic;
    // Block 0: reserved, hole, then free.
    r.free.extend(cut(BASE + 128, blk(1)));
    // Block 1 (Unmovable): slab, page tables, a kernel allocation.
    fill(
        &mut r,
        blk(1),
        blk(2),
        &[
            (0, f(FolioKind::Slab), 8),
            (0, f(FolioKind::PageTable), 4),
            (2, f(FolioKind::Kernel), 1),
        ],
    );
    // Block 2 (Reclaimable): reclaimable slab.
    let reclaimable = RestoreFolio {
        alloc_mt: MigrateType::Reclaimable,
        ..f(FolioKind::Slab)
    };
    fill(&mut r, blk(2), blk(3), &[(1, reclaimable, 16)]);
    // Block 3: anon, half of it active and referenced.
    let active = RestoreFolio {
        active: true,
        referenced: true,
        ..f(FolioKind::Anon)
    };
    fill(
        &mut r,
        blk(3),
        blk(4),
        &[(0, f(FolioKind::Anon), 50), (0, active, 50)],
    );
    // Block 4: page cache of orders 0 and 2.
    fill(
        &mut r,
        blk(4),
        blk(5),
        &[(0, f(FolioKind::File), 50), (2, f(FolioKind::File), 10)],
    );
    // Blocks 5-7: an anon THP, a PMD-size page-cache folio, a hugetlb page.
    fill(&mut r, blk(5), blk(6), &[(9, f(FolioKind::Anon), 1)]);
    fill(&mut r, blk(6), blk(7), &[(9, f(FolioKind::File), 1)]);
    fill(&mut r, blk(7), blk(8), &[(9, f(FolioKind::Hugetlb), 1)]);
    // Blocks 8-9: one order-10 chunk.
    r.free.extend(cut(blk(8), blk(10)));
    // Blocks 10-11 (HighAtomic): two order-9 buddies that must stay two chunks (§30.3 item 3).
    r.free.push((blk(10), 9));
    r.free.push((blk(11), 9));
    // Block 12: mlocked anon and shmem.
    let mlocked = RestoreFolio {
        mlocked: true,
        unevictable: true,
        ..f(FolioKind::Anon)
    };
    let shmem = RestoreFolio {
        shmem: true,
        ..f(FolioKind::File)
    };
    fill(&mut r, blk(12), blk(13), &[(0, mlocked, 10), (0, shmem, 5)]);
    r.free.extend(cut(blk(13), blk(BLOCKS)));
    r
}

fn config() -> MmConfig {
    let mut cfg = MmConfig::new(MachineConfig {
        cpu_node: Vec::new(),
        zones: Vec::new(),
        nr_cpus: 2,
    });
    cfg.debug_vm = true;
    cfg
}

fn boot(r: &Restore) -> Mm {
    let mm = Mm::from_restore(&config(), r).expect("a valid state");
    check(&mm);
    mm
}

/// The numbers of the rendered pagetypeinfo's free table (type → per-order counts) and block
/// table (type → blocks) of zone DMA32.
fn parse_pagetypeinfo(text: &str) -> (Vec<(String, Vec<u64>)>, Vec<u64>) {
    let mut free = Vec::new();
    let mut blocks = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Node    0, zone    DMA32, type") {
            let mut w = rest.split_whitespace();
            let ty = w.next().unwrap().to_string();
            free.push((ty, w.map(|v| v.parse().unwrap()).collect()));
        } else if let Some(rest) = line.strip_prefix("Node 0, zone    DMA32") {
            blocks = rest.split_whitespace().map(|v| v.parse().unwrap()).collect();
        }
    }
    (free, blocks)
}

fn vmstat_item(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /proc/vmstat"))
}

#[test]
fn section_30_5_restore_pagetypeinfo_and_buddyinfo_exact() {
    let r = state();
    let mm = boot(&r);
    let views = mm.zone_views();
    let (free, blocks) = parse_pagetypeinfo(&render_pagetypeinfo(0, &views));
    // Expected: each chunk counted for its block's type, per order.
    let mut want = vec![vec![0u64; NR_PAGE_ORDERS]; MigrateType::ALL.len()];
    let mut by_order = vec![0u64; NR_PAGE_ORDERS];
    for &(pfn, order) in &r.free {
        want[r.block_types[(pfn / PB) as usize].idx()][order as usize] += 1;
        by_order[order as usize] += 1;
    }
    for (mt, row) in MigrateType::ALL.iter().zip(&free) {
        assert_eq!(row.0, mt.name());
        assert_eq!(row.1, want[mt.idx()], "free chunks of type {}", mt.name());
    }
    // Blocks: 1 Unmovable, 12 Movable, 1 Reclaimable, 2 HighAtomic.
    assert_eq!(blocks, [1, 12, 1, 2, 0]);
    let buddy: Vec<u64> = render_buddyinfo(0, &views)
        .split_whitespace()
        .skip(4)
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(buddy, by_order);
    // The HighAtomic buddies stayed two order-9 chunks (§30.3 item 3).
    assert_eq!(want[MigrateType::HighAtomic.idx()][9], 2);
    assert_eq!(mm.zones[1].nr_reserved_highatomic, 2 * PB as u64);
    let free_pages: u64 = r.free.iter().map(|&(_, o)| 1u64 << o).sum();
    assert_eq!(mm.zones[1].nr_free_pages() as u64, free_pages);
}

#[test]
fn section_30_5_restore_counts_folios_in_vmstat() {
    let mm = boot(&state());
    let text = render_vmstat(&mm.zone_views(), &mm.stats);
    // Anon: 100 order-0, one THP, 10 mlocked, 5 shmem restored as anon.
    assert_eq!(vmstat_item(&text, "nr_anon_pages"), 100 + 512 + 10 + 5);
    assert_eq!(vmstat_item(&text, "nr_anon_transparent_hugepages"), 1);
    assert_eq!(vmstat_item(&text, "nr_file_pages"), 50 + 40 + 512);
    assert_eq!(vmstat_item(&text, "nr_active_anon"), 50);
    assert_eq!(vmstat_item(&text, "nr_inactive_anon"), 50 + 512 + 5);
    assert_eq!(vmstat_item(&text, "nr_unevictable"), 10);
    assert_eq!(vmstat_item(&text, "nr_mlock"), 10);
    assert_eq!(vmstat_item(&text, "nr_slab_unreclaimable"), 8);
    assert_eq!(vmstat_item(&text, "nr_slab_reclaimable"), 32);
    assert_eq!(vmstat_item(&text, "nr_page_table_pages"), 4);
    assert_eq!(mm.hugetlb.nr_huge_pages(), 1);
    assert_eq!(mm.hugetlb.max_huge_pages, 1);
    // The page-cache folios are in one mapping, at order-aligned indices.
    let (pages, folios) = mm.filemap_census(1);
    assert_eq!(pages[0] + pages[2] + pages[9], 50 + 40 + 512);
    assert_eq!((folios[0], folios[2], folios[9]), (50, 10, 1));
}

#[test]
fn section_30_5_restore_then_compact_memory_moves_pages() {
    let mut mm = boot(&state());
    let before = mm.zones[1].area.nr_free[MAX_PAGE_ORDER as usize];
    let stats = mm.compact_memory();
    check(&mm);
    assert!(
        mm.stat(fraglab_mm::vmstat::Stat::compact_migrate_scanned) > 0,
        "compaction scanned nothing: {stats:?}"
    );
    assert!(mm.stat(fraglab_mm::vmstat::Stat::pgmigrate_success) > 0);
    assert!(mm.zones[1].area.nr_free[MAX_PAGE_ORDER as usize] >= before);
}

#[test]
fn section_30_5_restore_is_deterministic() {
    let a = boot(&state());
    let b = boot(&state());
    let views = |m: &Mm| render_pagetypeinfo(0, &m.zone_views()) + &render_vmstat(&m.zone_views(), &m.stats);
    assert_eq!(views(&a), views(&b));
}

#[test]
fn section_30_5_restore_rejects_bad_states() {
    let cfg = config();
    let bad = |edit: &dyn Fn(&mut Restore), want: &str| {
        let mut r = state();
        edit(&mut r);
        match Mm::from_restore(&cfg, &r) {
            Ok(_) => panic!("accepted a state with {want}"),
            Err(e) => assert!(e.0.contains(want), "{e} does not say {want:?}"),
        }
    };
    // A chunk overlapping a folio.
    bad(&|r| r.free.push((blk(3), 0)), "overlaps another chunk or folio");
    // A misaligned chunk.
    bad(
        &|r| {
            r.free.retain(|&(p, _)| p != blk(13));
            r.free.push((blk(13) + 1, 1));
        },
        "not naturally aligned",
    );
    // A chunk outside the zone.
    bad(&|r| r.free.push((BASE + BLOCKS * PB, 0)), "not inside one zone");
    // A managed page left uncovered.
    bad(
        &|r| r.free.retain(|&(p, _)| p != blk(13)),
        "neither free nor in a folio",
    );
    // A chunk on a hole.
    bad(&|r| r.free.push((BASE + 64, 0)), "a hole");
    // Present pages that disagree with the holes.
    bad(&|r| r.zones[0].present += 1, "disagree with the ranges");
    // An Isolate block.
    bad(
        &|r| r.block_types[(blk(13) / PB) as usize] = MigrateType::Isolate,
        "Isolate",
    );
    // An order-10 chunk over blocks of two types.
    bad(
        &|r| r.block_types[(blk(9) / PB) as usize] = MigrateType::Unmovable,
        "spans pageblocks of types",
    );
    // Too few block types.
    bad(&|r| r.block_types.truncate(3), "pageblock types for");
}

/// A page-cache folio restored dirty (the snapshot's dirty bitmap) is dirty in the model:
/// counted in nr_dirty, so the flusher and migration (§25.1) meet it dirty.
#[test]
fn section_30_2_restore_marks_dirty_page_cache() {
    let mut r = state();
    let mut want = 0u64;
    for f in r
        .folios
        .iter_mut()
        .filter(|f| f.kind == FolioKind::File && !f.shmem)
    {
        if f.order == 9 || f.pfn % 2 == 0 {
            f.dirty = true;
            want += 1 << f.order;
        }
    }
    assert!(want > 512, "the state has dirty-able page cache");
    let clean = boot(&state());
    let mm = boot(&r);
    let nr_dirty = |m: &Mm| vmstat_item(&render_vmstat(&m.zone_views(), &m.stats), "nr_dirty");
    assert_eq!(nr_dirty(&clean), 0);
    assert_eq!(nr_dirty(&mm), want);
}
