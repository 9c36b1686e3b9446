//! One test per decision rule of docs/model §1–§6 (and the §21 sanity figures), named
//! after the section it checks. Each test builds a precise state through the public API
//! (small machines, explicit allocate/free sequences), performs the operation under test and
//! asserts what the kernel would do: block types, free-list contents and order (head first),
//! PCP lists, counters, trace fields. Every test ends with the debug-vm checker.

use crate::common;

use common::*;
use fraglab_mm::gfp::{AllocFlags as AF, Gfp};
use fraglab_mm::mmzone::{
    order_to_pindex, pcp_allowed_order, pindex_to_order, PageKind, WMARK_LOW, WMARK_MIN,
};
use fraglab_mm::node::trace_kind;
use fraglab_mm::page_alloc::RmqueueMode;
use fraglab_mm::trace::TraceEvent;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{MigrateType, Mm, Tunables, Wakeup, ZoneConfig, ZoneType};

use MigrateType::{HighAtomic, Movable, Reclaimable, Unmovable};

/// 8 pageblocks (4096 pages), one CPU, min_free_kbytes 128: min 32, low 40, high 48; PCP batch 1.
fn lab8() -> Mm {
    dma32(8, 1, tun_kb(128))
}

/// 32 pageblocks (16384 pages): PCP batch 3.
fn lab32(nr_cpus: u32, tun: Tunables) -> Mm {
    dma32(32, nr_cpus, tun)
}

fn af(f: u32) -> AF {
    AF(f)
}

fn nr_free(mm: &Mm, zi: usize) -> i64 {
    mm.zones[zi].nr_free_pages()
}

fn blocks_stat(mm: &Mm, zi: usize) -> i64 {
    mm.zones[zi].stat(Stat::nr_free_pages_blocks)
}

fn boost(mm: &Mm) -> u64 {
    mm.zones[DMA32].watermark_boost
}

/// Odd pfns `[start+1, start+3, …]`, `n` of them: order-0 chunks that cannot merge.
fn odd(start: u32, n: u32) -> impl Iterator<Item = u32> {
    (0..n).map(move |i| start + 2 * i + 1)
}

/// The S2 machine of §21: DMA, DMA32, Normal as on the reference VM, 2 CPUs, default knobs.
fn s2_machine(tun: Tunables) -> Mm {
    boot(
        vec![
            ZoneConfig {
                zone_type: ZoneType::Dma,
                nid: 0,
                start_pfn: 1,
                spanned: 4095,
                present: 3998,
                managed: 3840,
            },
            ZoneConfig {
                zone_type: ZoneType::Dma32,
                nid: 0,
                start_pfn: 4096,
                spanned: 1044480,
                present: 782336,
                managed: 772917,
            },
            ZoneConfig {
                zone_type: ZoneType::Normal,
                nid: 0,
                start_pfn: 1048576,
                spanned: 327680,
                present: 327680,
                managed: 327680,
            },
        ],
        2,
        tun,
    )
}

// ---- §1.4 free lists: insertion position ------------------------------------------------------

#[test]
fn s1_4_boot_frees_to_tail() {
    // memblock_free_all frees with FPI_TO_TAIL in ascending order: the list is address-ordered.
    let mm = lab8();
    assert_eq!(
        list(&mm, DMA32, 10, Movable),
        vec![block(0), block(2), block(4), block(6)]
    );
    check(&mm);
}

#[test]
fn s1_4_merge_likely_goes_to_tail() {
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let x = block(1);
    let z = block(1) + 64;
    let w = block(1) + 128;
    // An order-1 chunk whose surroundings are all in use: head.
    free_pfns(&mut mm, 0, [z + 2, z + 3]);
    assert_eq!(list(&mm, DMA32, 1, Movable), vec![z + 2]);
    // An order-2 chunk at x+4 ...
    free_range(&mut mm, 0, x + 4, 4);
    assert_eq!(list(&mm, DMA32, 2, Movable), vec![x + 4]);
    // ... then an order-1 chunk at x+2: its buddy x is in use, but the buddy of the order-2 chunk
    // containing it (x+4) is free at order 2: merge likely, so the tail.
    free_pfns(&mut mm, 0, [x + 2, x + 3]);
    assert_eq!(list(&mm, DMA32, 1, Movable), vec![z + 2, x + 2]);
    // Another order-1 chunk with nothing free around it: head again.
    free_pfns(&mut mm, 0, [w + 2, w + 3]);
    assert_eq!(list(&mm, DMA32, 1, Movable), vec![w + 2, z + 2, x + 2]);
    assert!(list(&mm, DMA32, 0, Movable).is_empty());
    check(&mm);
}

#[test]
fn s1_4_no_merge_likely_tail_at_pageblock_order() {
    // buddy_merge_likely only applies below MAX_PAGE_ORDER - 1 = 9.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, block(5), 512);
    assert_eq!(list(&mm, DMA32, 9, Movable), vec![block(5)]);
    free_range(&mut mm, 0, block(2), 1024);
    assert_eq!(list(&mm, DMA32, 10, Movable), vec![block(2)]);
    // Order 9 at block 0: its buddy (block 1) is in use, the order-10 buddy (block 2) is free at
    // order 10 — "likely", but order 9 is too high: head.
    free_range(&mut mm, 0, block(0), 512);
    assert_eq!(list(&mm, DMA32, 9, Movable), vec![block(0), block(5)]);
    check(&mm);
}

#[test]
fn s1_4_3_pcp_pages_are_not_free_and_counters() {
    let mut mm = lab32(1, tun_kb(128));
    let total = nr_free(&mm, DMA32);
    assert_eq!(total, 16384);
    let alloc0 = mm.stat(Stat::pgalloc_dma32);
    let free0 = mm.stat(Stat::pgfree);
    // An order-0 refill takes batch (3) pages off the buddy lists; one is handed out.
    let p = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert_eq!(nr_free(&mm, DMA32), total - 3);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 2);
    assert_eq!(
        mm.stat(Stat::pgalloc_dma32) - alloc0,
        1,
        "pgalloc counts the page, not the refill"
    );
    let c = check(&mm);
    assert_eq!((c.free, c.pcp, c.allocated), (16381, 2, 1));
    // Freeing to the PCP counts pgfree but leaves NR_FREE_PAGES alone.
    mm.free_pages(0, p, 0);
    assert_eq!(mm.stat(Stat::pgfree) - free0, 1);
    assert_eq!(nr_free(&mm, DMA32), total - 3);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 3);
    // Draining moves them back without counting pgfree again.
    mm.drain_all_pages();
    assert_eq!(nr_free(&mm, DMA32), total);
    assert_eq!(mm.stat(Stat::pgfree) - free0, 1);
    // §1.5.5: pgfree/pgalloc count 2^order.
    let q = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 4).unwrap();
    assert_eq!(mm.stat(Stat::pgalloc_dma32) - alloc0, 17);
    assert_eq!(nr_free(&mm, DMA32), total - 16);
    mm.free_pages(0, q, 4);
    assert_eq!(mm.stat(Stat::pgfree) - free0, 17);
    assert_eq!(nr_free(&mm, DMA32), total);
    assert_eq!(list(&mm, DMA32, 10, Movable).len(), 16);
    check(&mm);
}

// ---- §1.5 __free_one_page ----------------------------------------------------------------------

#[test]
fn s1_5_2c_no_merge_across_highatomic_at_pageblock_order() {
    for highatomic_first in [true, false] {
        let mut mm = lab8();
        fill(&mut mm, DMA32, 0);
        let (a, b) = (block(2), block(3));
        set_type(&mut mm, a, HighAtomic);
        if highatomic_first {
            free_range(&mut mm, 0, a, 512);
            free_range(&mut mm, 0, b, 512);
        } else {
            free_range(&mut mm, 0, b, 512);
            free_range(&mut mm, 0, a, 512);
        }
        assert_eq!(list(&mm, DMA32, 9, HighAtomic), vec![a]);
        assert_eq!(list(&mm, DMA32, 9, Movable), vec![b]);
        assert_eq!(mm.zones[DMA32].area.nr_free[10], 0);
        assert_eq!(mm.block_mt(a), HighAtomic);
        assert_eq!(mm.block_mt(b), Movable);
        assert_eq!(mm.zones[DMA32].nr_free_highatomic, 512);
        assert_eq!(nr_free(&mm, DMA32), 1024);
        assert_eq!(blocks_stat(&mm, DMA32), 1024);
        check(&mm);
    }
    // Same for an isolated block; isolated pages are not counted free (§1.4.3).
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let (a, b) = (block(2), block(3));
    mm.set_block_isolate(a, true);
    free_range(&mut mm, 0, a, 512);
    free_range(&mut mm, 0, b, 512);
    assert_eq!(list(&mm, DMA32, 9, MigrateType::Isolate), vec![a]);
    assert_eq!(list(&mm, DMA32, 9, Movable), vec![b]);
    assert_eq!(nr_free(&mm, DMA32), 512);
    assert_eq!(blocks_stat(&mm, DMA32), 512);
    check(&mm);
}

#[test]
fn s1_5_2b_no_merge_across_zones() {
    // DMA32 ends (and Normal starts) inside a pageblock: the order-8 chunks at 7680 (DMA32) and
    // 7936 (Normal) are buddies by pfn but belong to different zones.
    let boundary = 7936;
    let mut mm = boot(
        vec![
            ZoneConfig {
                zone_type: ZoneType::Dma32,
                nid: 0,
                start_pfn: BASE,
                spanned: boundary - BASE,
                present: boundary - BASE,
                managed: boundary - BASE,
            },
            zone(ZoneType::Normal, boundary, 8),
        ],
        1,
        tun_kb(128),
    );
    assert_eq!(list(&mm, DMA32, 8, Movable), vec![boundary - 256]);
    assert_eq!(
        list(&mm, NORMAL, 8, Movable),
        vec![boundary, boundary + 4096 - 256]
    );
    // Allocate and free the DMA32 one: it still does not merge.
    let p = mm.rmqueue(0, DMA32, 8, af(0), Movable).unwrap();
    assert_eq!(p, boundary - 256);
    mm.free_pages(0, p, 8);
    assert_eq!(list(&mm, DMA32, 8, Movable), vec![boundary - 256]);
    assert_eq!(mm.zones[DMA32].area.nr_free[9], 1);
    check(&mm);
}

#[test]
fn s1_5_2d_merge_retypes_buddy_block() {
    // The freed chunk's type wins; the buddy's block is retyped.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let (a, b) = (block(2), block(3));
    set_type(&mut mm, a, Unmovable);
    free_range(&mut mm, 0, a, 512);
    assert_eq!(list(&mm, DMA32, 9, Unmovable), vec![a]);
    free_range(&mut mm, 0, b, 512);
    assert_eq!(list(&mm, DMA32, 10, Movable), vec![a]);
    assert!(list(&mm, DMA32, 9, Unmovable).is_empty());
    assert_eq!((mm.block_mt(a), mm.block_mt(b)), (Movable, Movable));
    assert_eq!(mm.blocks_by_type(DMA32)[Unmovable.idx()], 0);
    assert_eq!(blocks_stat(&mm, DMA32), 1024);
    check(&mm);

    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    set_type(&mut mm, a, Unmovable);
    free_range(&mut mm, 0, b, 512);
    free_range(&mut mm, 0, a, 512);
    assert_eq!(list(&mm, DMA32, 10, Unmovable), vec![a]);
    assert!(list(&mm, DMA32, 10, Movable).is_empty());
    assert_eq!((mm.block_mt(a), mm.block_mt(b)), (Unmovable, Unmovable));
    assert_eq!(mm.blocks_by_type(DMA32)[Unmovable.idx()], 2);
    check(&mm);
}

#[test]
fn s1_5_4_split_large_buddy_frees_per_block_type() {
    // An order-10 free spanning a MOVABLE and a HIGHATOMIC block: two order-9 pieces, each on
    // its own block's list, and they may not merge.
    let mut mm = lab8();
    let free0 = mm.stat(Stat::pgfree);
    let p = mm.rmqueue(0, DMA32, 10, af(0), Movable).unwrap();
    assert_eq!(p, block(0));
    set_type(&mut mm, p + 512, HighAtomic);
    mm.free_pages(0, p, 10);
    assert_eq!(list(&mm, DMA32, 9, Movable), vec![p]);
    assert_eq!(list(&mm, DMA32, 9, HighAtomic), vec![p + 512]);
    assert_eq!(list(&mm, DMA32, 10, Movable), vec![block(2), block(4), block(6)]);
    assert_eq!(mm.zones[DMA32].nr_free_highatomic, 512);
    assert_eq!(mm.stat(Stat::pgfree) - free0, 1024);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 0, "order 10 bypasses the PCP");
    check(&mm);

    // MOVABLE + UNMOVABLE: the second piece is freed as UNMOVABLE and merges, retyping the first.
    let mut mm = lab8();
    let p = mm.rmqueue(0, DMA32, 10, af(0), Movable).unwrap();
    set_type(&mut mm, p + 512, Unmovable);
    mm.free_pages(0, p, 10);
    assert_eq!(list(&mm, DMA32, 10, Unmovable), vec![p]);
    assert_eq!((mm.block_mt(p), mm.block_mt(p + 512)), (Unmovable, Unmovable));
    assert_eq!(list(&mm, DMA32, 10, Movable), vec![block(2), block(4), block(6)]);
    check(&mm);
}

// ---- §1.6 expand --------------------------------------------------------------------------------

#[test]
fn s1_6_expand_upper_halves_to_head() {
    // Note: which end of the list a half goes to cannot be observed through allocation, because
    // smallest-first (§5.2) guarantees the lists at orders [low, high) are empty when `expand`
    // runs. What is observable: the request gets the lowest pages, each upper half sits at
    // pfn + 2^k with order k on the caller's list, and only 2^low pages leave NR_FREE_PAGES.
    let mut mm = lab8();
    let p = mm.rmqueue(0, DMA32, 4, af(0), Movable).unwrap();
    assert_eq!(p, block(0));
    for k in 4..=9u32 {
        assert_eq!(list(&mm, DMA32, k, Movable), vec![p + (1 << k)], "order {k}");
    }
    assert_eq!(list(&mm, DMA32, 10, Movable), vec![block(2), block(4), block(6)]);
    assert_eq!(nr_free(&mm, DMA32), 4096 - 16);
    assert_eq!(blocks_stat(&mm, DMA32), 4096 - 1024 + 512);
    // The next requests take the halves, lowest first.
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(p + 16));
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(p + 32));
    assert_eq!(list(&mm, DMA32, 4, Movable), vec![p + 48]);
    assert_eq!(mm.rmqueue(0, DMA32, 5, af(0), Movable), Some(p + 64));
    assert_eq!(list(&mm, DMA32, 5, Movable), vec![p + 96]);
    check(&mm);
}

// ---- §1.7 pageblock type changes ------------------------------------------------------------

#[test]
fn s1_7_claim_moves_free_chunks_to_list_tail() {
    // move_to_free_list appends: chunks of a claimed block queue behind the chunks already on the
    // new type's lists (here an order-0 MOVABLE page), in pfn order.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let x = block(5) + 1;
    free_pfns(&mut mm, 0, [x]);
    let u = block(2);
    set_type(&mut mm, u, Unmovable);
    free_pfns(&mut mm, 0, [u + 3, u + 1]);
    free_range(&mut mm, 0, u + 256, 256);
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(u + 256));
    assert_eq!(mm.block_mt(u), Movable);
    assert_eq!(list(&mm, DMA32, 0, Movable), vec![x, u + 1, u + 3]);
    assert!(list(&mm, DMA32, 0, Unmovable).is_empty());
    check(&mm);
}

// ---- §2 PCP --------------------------------------------------------------------------------------

#[test]
fn s2_1_pindex() {
    for (mt, o, pindex) in [
        (Unmovable, 0, 0),
        (Movable, 0, 1),
        (Reclaimable, 0, 2),
        (Unmovable, 1, 3),
        (Movable, 2, 7),
        (Reclaimable, 3, 11),
        (Unmovable, 9, 12),
        (Reclaimable, 9, 12),
        (Movable, 9, 13),
    ] {
        assert_eq!(order_to_pindex(mt, o), pindex, "{mt:?} order {o}");
        assert_eq!(pindex_to_order(pindex), o);
    }
    for o in 0..=10 {
        assert_eq!(pcp_allowed_order(o), o <= 3 || o == 9, "order {o}");
    }
    // Behaviour: THP frees land on list 12 (non-movable) or 13 (movable); order 4 bypasses.
    let tun = Tunables {
        percpu_pagelist_high_fraction: 8,
        ..tun_kb(128)
    };
    let mut mm = lab32(1, tun);
    let p: Vec<u32> = (0..4)
        .map(|_| mm.rmqueue(0, DMA32, 9, af(0), Movable).unwrap())
        .collect();
    assert_eq!(p, vec![block(0), block(1), block(2), block(3)]);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 0);
    set_type(&mut mm, p[1], Unmovable);
    set_type(&mut mm, p[2], Reclaimable);
    mm.free_pages(0, p[0], 9);
    mm.free_pages(0, p[1], 9);
    mm.free_pages(0, p[2], 9);
    assert_eq!(pcp_list(&mm, DMA32, 0, 13), vec![p[0]]);
    assert_eq!(pcp_list(&mm, DMA32, 0, 12), vec![p[2], p[1]]);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 1536);
    let q = mm.rmqueue(0, DMA32, 4, af(0), Movable).unwrap();
    assert_eq!(mm.zones[DMA32].pcp[0].count, 1536);
    mm.free_pages(0, q, 4);
    assert_eq!(mm.pages.kind(q), PageKind::Buddy);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 1536);
    check(&mm);
}

#[test]
fn s2_1_3_highatomic_frees_to_movable_list_isolate_bypasses() {
    let mut mm = lab32(1, tun_kb(128));
    fill(&mut mm, DMA32, 0);
    mm.set_trace_mask(trace_kind::ALL);
    let h = block(1) + 5;
    set_type(&mut mm, h, HighAtomic);
    mm.free_pages(0, h, 0);
    assert_eq!(pcp_list(&mm, DMA32, 0, order_to_pindex(Movable, 0)), vec![h]);
    assert_eq!(nr_free(&mm, DMA32), 0);
    mm.drain_all_pages();
    // Drained with its block's type: onto the HighAtomic list.
    assert_eq!(list(&mm, DMA32, 0, HighAtomic), vec![h]);
    assert_eq!(mm.zones[DMA32].nr_free_highatomic, 1);
    assert_eq!(pcpu_drains(&mm.take_trace()), vec![(h, 0, 3)]);
    // Isolated blocks: straight to the buddy, not counted free.
    let i = block(2) + 7;
    mm.set_block_isolate(i, true);
    let free0 = mm.stat(Stat::pgfree);
    mm.free_pages(0, i, 0);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 0);
    assert_eq!(list(&mm, DMA32, 0, MigrateType::Isolate), vec![i]);
    assert_eq!(nr_free(&mm, DMA32), 1);
    assert_eq!(mm.stat(Stat::pgfree) - free0, 1);
    check(&mm);
}

#[test]
fn s2_1_4_drain_one_list_at_a_time_oldest_first() {
    let tun = Tunables {
        percpu_pagelist_high_fraction: 8,
        ..tun_kb(128)
    };
    let mut mm = lab32(1, tun);
    fill(&mut mm, DMA32, 0);
    let (u, r, m) = (block(1), block(2), block(4));
    set_type(&mut mm, u, Unmovable);
    set_type(&mut mm, r, Reclaimable);
    let (a1, a2, a3, a4) = (m + 1, m + 3, m + 5, m + 7);
    let (u1, u2) = (u + 1, u + 3);
    let r1 = r + 1;
    for p in [a1, u1, a2, r1, u2, a3] {
        mm.free_pages(0, p, 0);
    }
    assert_eq!(mm.zones[DMA32].pcp[0].count, 6);
    mm.set_trace_mask(trace_kind::MM_PAGE_PCPU_DRAIN);
    // Starting with list 1 (movable order 0): empty it oldest first, then the next list.
    mm.free_pcppages_bulk(0, DMA32, 4, 1);
    assert_eq!(
        pcpu_drains(&mm.take_trace()),
        vec![(a1, 0, 1), (a2, 0, 1), (a3, 0, 1), (r1, 0, 2)]
    );
    assert_eq!(pcp_list(&mm, DMA32, 0, 0), vec![u2, u1]);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 2);
    // Wrapping around from list 5.
    mm.free_pages(0, a4, 0);
    mm.free_pcppages_bulk(0, DMA32, 3, 5);
    assert_eq!(
        pcpu_drains(&mm.take_trace()),
        vec![(u1, 0, 0), (u2, 0, 0), (a4, 0, 1)]
    );
    assert_eq!(mm.zones[DMA32].pcp[0].count, 0);
    check(&mm);
}

#[test]
fn s2_1_4_drain_uses_block_type_at_drain_time() {
    let mut mm = lab32(1, tun_kb(128));
    fill(&mut mm, DMA32, 0);
    let p = block(5) + 9;
    mm.free_pages(0, p, 0);
    assert_eq!(pcp_list(&mm, DMA32, 0, order_to_pindex(Movable, 0)), vec![p]);
    // The block is retyped while the page sits on the PCP (no free chunk in it moves).
    mm.set_block_mt(p, Unmovable);
    mm.set_trace_mask(trace_kind::MM_PAGE_PCPU_DRAIN);
    mm.drain_all_pages();
    assert_eq!(list(&mm, DMA32, 0, Unmovable), vec![p]);
    assert_eq!(pcpu_drains(&mm.take_trace()), vec![(p, 0, 0)]);
    check(&mm);
}

#[test]
fn s2_2_batch_and_high_for_s2_zones() {
    let mut mm = s2_machine(Tunables::default());
    for (zi, batch, high_min, high_max) in [
        (DMA, 1, 36, 240),
        (DMA32, 63, 7390, 48307),
        (NORMAL, 63, 3132, 20480),
    ] {
        for cpu in 0..2 {
            let p = &mm.zones[zi].pcp[cpu];
            assert_eq!(
                (p.batch, p.high_min, p.high_max, p.high),
                (batch, high_min, high_max, 0),
                "zone {zi}"
            );
        }
        let v = &mm.zone_views()[zi];
        assert_eq!(v.pagesets.len(), 2);
        assert_eq!(
            (
                v.pagesets[1].batch,
                v.pagesets[1].high_min,
                v.pagesets[1].high_max
            ),
            (batch, high_min, high_max)
        );
    }
    // The first order-0 refill: high is clamped up to high_min and grows by a batch; 63 pages.
    let before = nr_free(&mm, DMA32);
    mm.rmqueue(1, DMA32, 0, af(0), Movable).unwrap();
    assert_eq!(mm.zones[DMA32].pcp[1].high, 7390 + 63);
    assert_eq!(mm.zones[DMA32].pcp[1].count, 62);
    assert_eq!(nr_free(&mm, DMA32), before - 63);
    check(&mm);
}

#[test]
fn s2_2_3_decay_pcp_high_toward_high_min() {
    let mut mm = lab32(1, tun_kb(128));
    fill(&mut mm, DMA32, 0);
    {
        let p = &mut mm.zones[DMA32].pcp[0];
        assert_eq!((p.batch, p.high_min, p.high_max), (3, 48, 2048));
        // As if refills had grown it.
        p.high = 1000;
    }
    free_pfns_no_drain(&mut mm, (0..950).map(|i| block(2) + i));
    assert_eq!(mm.zones[DMA32].pcp[0].count, 950);
    mm.set_trace_mask(trace_kind::MM_PAGE_PCPU_DRAIN);
    // high = max(count - batch<<5, high - high/8, high_min) = max(854, 875, 48); drain 75.
    mm.decay_pcp_high(0, DMA32);
    assert_eq!(mm.zones[DMA32].pcp[0].high, 875);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 875);
    let d = pcpu_drains(&mm.take_trace());
    assert_eq!(d.len(), 75);
    assert_eq!(d[0].0, block(2), "oldest first");
    // max(779, 766, 48) = 779: the batch<<5 cap on the decrement; drain 96.
    mm.decay_pcp_high(0, DMA32);
    assert_eq!(mm.zones[DMA32].pcp[0].high, 779);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 779);
    check(&mm);
}

fn free_pfns_no_drain(mm: &mut Mm, pfns: impl IntoIterator<Item = u32>) {
    for p in pfns {
        mm.free_pages(0, p, 0);
    }
}

#[test]
fn s2_2_pcp_high_clamp_with_high_min_above_high_max() {
    // min_free_kbytes 4096 on an 8-block zone: low 1280 > managed/8 = 512, so high_min (1280)
    // > high_max (512). The kernel's clamp(v, lo, hi) is `v >= hi ? hi : v <= lo ? lo : v`
    // (include/linux/minmax.h) and does not fail; the model must not panic either.
    let mut mm = dma32(8, 1, tun_kb(4096));
    {
        let p = &mm.zones[DMA32].pcp[0];
        assert_eq!((p.batch, p.high_min, p.high_max), (1, 1280, 512));
    }
    let a = mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    // clamp(0, 1280, 512) = 1280; grown by a batch, capped at high_max: 512.
    assert_eq!(mm.zones[DMA32].pcp[0].high, 512);
    mm.free_pages(0, a, 0);
    let b = mm.rmqueue(0, DMA32, 1, af(0), Movable).unwrap();
    mm.free_pages(0, b, 1);
    mm.decay_pcp_high(0, DMA32);
    mm.drain_all_pages();
    assert_eq!(nr_free(&mm, DMA32), 4096);
    check(&mm);
}

#[test]
fn s2_3_order9_refill_takes_two() {
    let mut mm = lab32(1, tun_kb(128));
    let total = nr_free(&mm, DMA32);
    let a0 = mm.stat(Stat::pgalloc_dma32);
    let p = mm.alloc_pages(0, Gfp::GFP_TRANSHUGE_LIGHT, 9).unwrap();
    assert_eq!(p, block(0));
    assert_eq!(pcp_list(&mm, DMA32, 0, 13), vec![block(1)]);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 512);
    assert_eq!(nr_free(&mm, DMA32), total - 1024);
    assert_eq!(mm.stat(Stat::pgalloc_dma32) - a0, 512);
    // The second THP comes from the PCP without touching the buddy.
    let q = mm.alloc_pages(0, Gfp::GFP_TRANSHUGE_LIGHT, 9).unwrap();
    assert_eq!(q, block(1));
    assert_eq!(nr_free(&mm, DMA32), total - 1024);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 0);
    let r = mm.alloc_pages(0, Gfp::GFP_TRANSHUGE_LIGHT, 9).unwrap();
    assert_eq!(r, block(2));
    assert_eq!(pcp_list(&mm, DMA32, 0, 13), vec![block(3)]);
    check(&mm);
}

#[test]
fn s2_3_refill_sizes_with_batch_63() {
    // 1 GiB zone: batch 63; order n refills take max(63 >> n, 2) chunks; order 0 takes
    // batch << alloc_factor, and alloc_factor grows on consecutive refills.
    let mut mm = dma32(512, 1, Tunables::default());
    assert_eq!(mm.zones[DMA32].pcp[0].batch, 63);
    for (mt, order, chunks) in [
        (Unmovable, 1, 31),
        (Movable, 2, 15),
        (Reclaimable, 3, 7),
        (Movable, 9, 2),
    ] {
        mm.rmqueue(0, DMA32, order, af(0), mt).unwrap();
        let l = pcp_list(&mm, DMA32, 0, order_to_pindex(mt, order));
        assert_eq!(l.len(), chunks - 1, "{mt:?} order {order}");
    }
    let l0 = order_to_pindex(Movable, 0);
    mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    assert_eq!(pcp_list(&mm, DMA32, 0, l0).len(), 62);
    for _ in 0..62 {
        mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    }
    assert!(pcp_list(&mm, DMA32, 0, l0).is_empty());
    mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    assert_eq!(
        pcp_list(&mm, DMA32, 0, l0).len(),
        125,
        "second refill takes 63 << 1"
    );
    check(&mm);
}

#[test]
fn s2_3_refill_keeps_mode_across_bulk() {
    // min_free_kbytes 2800 on 16384 pages: high 1050, max boost 1575. A movable order-0 refill
    // of 3 pages: the first __rmqueue tries to claim a partly used UNMOVABLE block (fails, boosts
    // once) and steals; the next two start in STEAL mode and never retry the claim.
    let mut mm = lab32(2, tun_kb(2800));
    assert_eq!(mm.zones[DMA32].wmark[2], 1050);
    fill(&mut mm, DMA32, 1);
    let u = block(2);
    set_type(&mut mm, u, Unmovable);
    free_pfns(&mut mm, 1, [u + 1, u + 3, u + 5, u + 7]);
    free_range(&mut mm, 1, u + 32, 16);
    assert_eq!(list(&mm, DMA32, 0, Unmovable), vec![u + 7, u + 5, u + 3, u + 1]);
    assert_eq!(list(&mm, DMA32, 4, Unmovable), vec![u + 32]);
    mm.set_trace_mask(trace_kind::ALL);
    let p = mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    assert_eq!(p, u + 7);
    assert_eq!(
        pcp_list(&mm, DMA32, 0, order_to_pindex(Movable, 0)),
        vec![u + 5, u + 3]
    );
    assert_eq!(boost(&mm), 512, "one claim attempt per refill, not one per page");
    assert_eq!(mm.fallbacks.steal[Movable.idx()][Unmovable.idx()], 3);
    let ev = extfrags(&mm.take_trace());
    assert_eq!(ev.len(), 3);
    assert!(ev
        .iter()
        .all(|e| !e.change_ownership && e.fallback_order == 0 && e.fallback_mt == 0));
    assert_eq!(mm.block_mt(u), Unmovable);
    check(&mm);
}

#[test]
fn s2_4_free_over_high_drains_batch() {
    // high fixed at 12 (fraction 1024: 16384/1024/2 = 8, at least 4 * batch); batch 3.
    let tun = Tunables {
        percpu_pagelist_high_fraction: 1024,
        ..tun_kb(128)
    };
    let mut mm = lab32(2, tun);
    assert_eq!(
        (mm.zones[DMA32].pcp[0].high_min, mm.zones[DMA32].pcp[0].high_max),
        (12, 12)
    );
    fill(&mut mm, DMA32, 1);
    let pages: Vec<u32> = odd(block(3), 12).collect();
    mm.set_trace_mask(trace_kind::MM_PAGE_PCPU_DRAIN);
    free_pfns_no_drain(&mut mm, pages[..11].iter().copied());
    assert_eq!(mm.zones[DMA32].pcp[0].count, 11);
    assert!(mm.take_trace().is_empty());
    // Reaching high: free clamp(free_count = 12, batch, high - batch) = 9, oldest first.
    mm.free_pages(0, pages[11], 0);
    assert_eq!(mm.zones[DMA32].pcp[0].count, 3);
    let d: Vec<u32> = pcpu_drains(&mm.take_trace()).iter().map(|d| d.0).collect();
    assert_eq!(d, pages[..9].to_vec());
    assert_eq!(
        pcp_list(&mm, DMA32, 0, order_to_pindex(Movable, 0)),
        vec![pages[11], pages[10], pages[9]]
    );
    check(&mm);
}

#[test]
fn s2_4_2_consecutive_high_order_frees_drain_everything() {
    // high_min 24, batch 3: once free_count >= batch + high_min/2 = 15 and the previous free was
    // also of order 1..3, the PCP is drained entirely.
    let mut mm = lab32(2, tun_kb(128));
    assert_eq!(mm.zones[DMA32].pcp[0].high_min, 24);
    let chunks: Vec<u32> = (0..9)
        .map(|_| mm.rmqueue(1, DMA32, 1, af(0), Movable).unwrap())
        .collect();
    for (i, &c) in chunks.iter().enumerate() {
        mm.free_pages(0, c, 1);
        let count = mm.zones[DMA32].pcp[0].count;
        if i < 8 {
            assert_eq!(count, 2 * (i as u64 + 1), "free {i}");
        } else {
            assert_eq!(count, 0, "the 9th order-1 free drains everything");
        }
    }
    check(&mm);
}

// ---- §3 watermarks, reserves, boosting ---------------------------------------------------------

#[test]
fn s3_1_watermarks_match_s2() {
    let mm = s2_machine(Tunables::default());
    assert_eq!(mm.min_free_kbytes, 67584);
    let w = |zi: usize| mm.zones[zi].wmark;
    assert_eq!(w(DMA), [58, 72, 86, 100]);
    assert_eq!(w(DMA32), [11824, 14780, 17736, 20692]);
    assert_eq!(w(NORMAL)[..3], [5012, 6265, 7518]);
    assert_eq!(w(NORMAL)[3], 7518 + 1253);
    assert_eq!(
        w(3),
        [32, 32, 32, 32],
        "empty Movable zone: min clamped to 32, no gap"
    );
    assert_eq!(w(4), [0, 0, 0, 0]);
    assert_eq!(w(DMA)[0] + w(DMA32)[0] + w(NORMAL)[0], 16894);
    let v = mm.zone_views();
    assert_eq!(v[DMA32].wmark, [11824, 14780, 17736, 20692]);
    // Without THP, min_free_kbytes = int_sqrt(16 * lowmem_kbytes).
    let mm2 = s2_machine(Tunables {
        thp_enabled: false,
        ..Tunables::default()
    });
    assert_eq!(mm2.min_free_kbytes, 8407);
    check(&mm);
}

#[test]
fn s3_1_5_boost_raises_all_marks_atomic_order0_ignores_it_at_min() {
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let (u, r) = (block(2), block(3));
    set_type(&mut mm, u, Unmovable);
    set_type(&mut mm, r, Reclaimable);
    free_range(&mut mm, 0, u + 32, 16);
    free_pfns(&mut mm, 0, odd(r, 200));
    // A failed partial claim boosts by a pageblock (max boost here is 512).
    let p = mm.rmqueue(0, DMA32, 4, af(0), Movable).unwrap();
    assert_eq!(p, u + 32);
    assert_eq!(boost(&mm), 512);
    assert_eq!(nr_free(&mm, DMA32), 200);
    assert_eq!(mm.zones[DMA32].wmark_pages(WMARK_LOW), 40 + 512);
    assert_eq!(mm.zones[DMA32].wmark_pages(WMARK_MIN), 32 + 512);
    // 200 free pages would pass the low mark (40) but not low + boost; nor min + boost.
    assert_eq!(mm.alloc_pages(0, Gfp::GFP_NOWAIT, 0), None);
    // GFP_ATOMIC at min: 544 - 272 - 68 = 204 >= 200 fails, but order-0 __GFP_HIGH retries with
    // the unboosted min (32 -> 12) and succeeds.
    assert!(mm.alloc_pages(0, Gfp::GFP_ATOMIC, 0).is_some());
    check(&mm);
}

#[test]
fn s3_2_lowmem_reserve_matches_s2() {
    let mm = s2_machine(Tunables::default());
    assert_eq!(mm.zones[DMA].lowmem_reserve, [0, 3019, 4299, 4299, 4299]);
    assert_eq!(mm.zones[DMA32].lowmem_reserve, [0, 0, 1280, 1280, 1280]);
    assert_eq!(mm.zones[NORMAL].lowmem_reserve, [0; 5]);
    assert_eq!(mm.zones[3].lowmem_reserve, [0; 5]);
    assert_eq!(mm.zone_views()[DMA].protection, [0, 3019, 4299, 4299, 4299]);
    // The request's highest zone picks the entry: DMA has 3840 free pages.
    let low = mm.zones[DMA].wmark_pages(WMARK_LOW);
    assert!(mm.zone_watermark_ok(DMA, 0, low, ZoneType::Dma, af(0)));
    assert!(mm.zone_watermark_ok(DMA, 0, low, ZoneType::Dma32, af(0)));
    assert!(!mm.zone_watermark_ok(DMA, 0, low, ZoneType::Normal, af(0)));
    assert!(!mm.zone_watermark_ok(DMA, 0, low, ZoneType::Movable, af(0)));
    check(&mm);
}

#[test]
fn s3_2_lowmem_reserve_zero_for_zone_without_managed_pages() {
    // setup_per_zone_lowmem_reserve clears the entries of a zone with no managed pages (or
    // ratio 0): a machine without a DMA zone prints "protection: (0, 0, 0, 0, 0)" for it.
    let mm = boot(
        vec![
            zone(ZoneType::Dma32, BASE, 8),
            zone(ZoneType::Normal, BASE + 4096, 8),
        ],
        1,
        tun_kb(128),
    );
    assert_eq!(mm.zones[DMA].lowmem_reserve, [0; 5]);
    assert_eq!(mm.zones[DMA32].lowmem_reserve, [0, 0, 16, 16, 16]);
    check(&mm);
}

/// Everything allocated, then 100 free pages in a HighAtomic block and 30 order-0 holes in a
/// MOVABLE one.
fn highatomic_lab() -> Mm {
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let h = block(2);
    set_type(&mut mm, h, HighAtomic);
    free_range(&mut mm, 0, h, 100);
    free_pfns(&mut mm, 0, odd(block(4), 30));
    assert_eq!(mm.zones[DMA32].nr_free_highatomic, 100);
    mm
}

#[test]
fn s3_3_highatomic_hidden_without_reserves() {
    let mut mm = highatomic_lab();
    let free = nr_free(&mm, DMA32);
    assert_eq!(free, 130);
    let ok = |mm: &Mm, mark, f| mm.__zone_watermark_ok(DMA32, 0, mark, ZoneType::Dma32, af(f), free);
    assert!(ok(&mm, 29, 0));
    assert!(!ok(&mm, 30, 0));
    for f in [AF::NON_BLOCK, AF::HIGHATOMIC] {
        assert!(ok(&mm, 129, f), "flags {f:#x}");
        assert!(!ok(&mm, 130, f), "flags {f:#x}");
    }
    // ALLOC_OOM also halves the mark.
    assert!(ok(&mm, 258, AF::OOM));
    assert!(!ok(&mm, 259, AF::OOM));
    assert!(mm.zone_watermark_fast(DMA32, 0, 29, ZoneType::Dma32, af(0)));
    assert!(!mm.zone_watermark_fast(DMA32, 0, 30, ZoneType::Dma32, af(0)));
    // NR_FREE_PAGES (130) is above low (40), but without reserve rights only 30 are usable, below
    // min (32): GFP_KERNEL without direct reclaim fails; GFP_NOWAIT's slow path has
    // ALLOC_NON_BLOCK and succeeds.
    let kernel_noreclaim = Gfp::GFP_KERNEL
        .without(Gfp::DIRECT_RECLAIM)
        .union(Gfp::NOMEMALLOC);
    assert_eq!(mm.alloc_pages(0, kernel_noreclaim, 0), None);
    assert!(mm.alloc_pages(0, Gfp::GFP_NOWAIT, 0).is_some());
    check(&mm);
}

/// §7.6.4 with §5.5.3: a blocking request that reclaims nothing force-unreserves the HighAtomic
/// block before giving up, and then succeeds.
#[test]
fn s7_6_4_forced_unreserve_before_failing() {
    let mut mm = highatomic_lab();
    let kernel_noreclaim = Gfp::GFP_KERNEL
        .without(Gfp::DIRECT_RECLAIM)
        .union(Gfp::NOMEMALLOC);
    assert_eq!(
        mm.alloc_pages(0, kernel_noreclaim, 0),
        None,
        "no reserves, no slow-path work"
    );
    assert!(mm.alloc_pages(0, Gfp::GFP_KERNEL, 0).is_some());
    assert_eq!(mm.work.last_alloc.reclaimed, 0);
    assert_eq!(
        mm.zones[DMA32].nr_free_highatomic, 0,
        "the HighAtomic block was given back"
    );
    check(&mm);
}

#[test]
fn s3_3_reserve_fractions() {
    let mm = lab8();
    let ok = |f: u32, order: u32, free: i64| {
        mm.__zone_watermark_ok(DMA32, order, 1000, ZoneType::Dma32, af(f), free)
    };
    assert!(ok(0, 0, 1001) && !ok(0, 0, 1000));
    assert!(ok(AF::MIN_RESERVE, 0, 501) && !ok(AF::MIN_RESERVE, 0, 500));
    let atomic = AF::MIN_RESERVE | AF::NON_BLOCK;
    assert!(ok(atomic, 0, 376) && !ok(atomic, 0, 375));
    assert!(ok(AF::NON_BLOCK, 0, 1001) && !ok(AF::NON_BLOCK, 0, 1000));
    assert!(ok(AF::OOM, 0, 501) && !ok(AF::OOM, 0, 500));
    let all = AF::OOM | atomic;
    assert!(ok(all, 0, 189) && !ok(all, 0, 188));
    // Order n subtracts 2^n - 1 first.
    assert!(ok(0, 2, 1004) && !ok(0, 2, 1003));
    check(&mm);
}

#[test]
fn s3_3_high_order_any_pcp_type_counts() {
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let r = block(2);
    set_type(&mut mm, r, Reclaimable);
    free_range(&mut mm, 0, r + 16, 16);
    free_pfns(&mut mm, 0, odd(block(4), 40));
    let free = nr_free(&mm, DMA32);
    assert_eq!(free, 56);
    // The only order >= 4 chunk is RECLAIMABLE; a movable order-4 check still passes.
    assert!(mm.__zone_watermark_ok(DMA32, 4, 0, ZoneType::Movable, af(0), free));
    assert!(!mm.__zone_watermark_ok(DMA32, 5, 0, ZoneType::Movable, af(0), free));
    // ... and the allocation then needs a fallback.
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(r + 16));
    check(&mm);

    // A HIGHATOMIC chunk counts only with ALLOC_HIGHATOMIC or ALLOC_OOM.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let h = block(2);
    set_type(&mut mm, h, HighAtomic);
    free_range(&mut mm, 0, h + 16, 16);
    free_pfns(&mut mm, 0, odd(block(4), 40));
    let free = nr_free(&mm, DMA32);
    let ok = |f| mm.__zone_watermark_ok(DMA32, 4, 0, ZoneType::Movable, af(f), free);
    assert!(!ok(0));
    assert!(!ok(AF::NON_BLOCK | AF::MIN_RESERVE));
    assert!(ok(AF::HIGHATOMIC));
    assert!(ok(AF::OOM));
    check(&mm);
}

/// A zone of `blocks` blocks, filled; block 2 UNMOVABLE with the given pages free.
fn unmovable_block_lab(blocks: u32, tun: Tunables, free: &[(u32, u32)]) -> Mm {
    let mut mm = dma32(blocks, 1, tun);
    fill(&mut mm, DMA32, 0);
    set_type(&mut mm, block(2), Unmovable);
    for &(off, n) in free {
        free_range(&mut mm, 0, block(2) + off, n);
    }
    mm
}

#[test]
fn s3_4_boost_on_partial_claim_only() {
    // (a) Whole-block claim (chunk order >= 9): no boost.
    let mut mm = lab8();
    mm.rmqueue(0, DMA32, 4, af(AF::KSWAPD), Unmovable).unwrap();
    assert_eq!(boost(&mm), 0);
    assert!(mm.take_wakeups().is_empty());
    check(&mm);

    // (b) Only small foreign chunks: a movable request never tries to claim; it steals. No boost.
    let mut mm = unmovable_block_lab(8, tun_kb(128), &[(1, 1), (3, 1), (5, 1)]);
    let p = mm.rmqueue(0, DMA32, 0, af(AF::KSWAPD), Movable).unwrap();
    assert_eq!(mm.block_mt(p), Unmovable);
    assert_eq!(boost(&mm), 0);
    assert!(mm.take_wakeups().is_empty());
    check(&mm);

    // (c) A partly used block is considered (order-4 chunk) but not claimed: boost, then steal.
    let mut mm = unmovable_block_lab(8, tun_kb(128), &[(1, 1), (3, 1), (32, 16)]);
    let p = mm.rmqueue(0, DMA32, 0, af(AF::KSWAPD), Movable).unwrap();
    assert_eq!(mm.block_mt(p), Unmovable);
    assert_eq!(boost(&mm), 512);
    check(&mm);

    // (d) A partly used block claimed (256 free): boost as well.
    let mut mm = unmovable_block_lab(8, tun_kb(128), &[(256, 256)]);
    let p = mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    assert_eq!(p, block(2) + 256);
    assert_eq!(mm.block_mt(p), Movable);
    assert_eq!(boost(&mm), 512);
    check(&mm);
}

#[test]
fn s3_4_boost_capped_and_skipped_on_small_zones() {
    // 16384 pages, min_free_kbytes 4096: high 1536, max boost 2304. Free chunks of order 7, 6, 5
    // and 4 in one UNMOVABLE block (240 pages): a movable order-4 request tries each (4 boosts).
    let free = [(16, 240)];
    let mut mm = unmovable_block_lab(32, tun_kb(4096), &free);
    assert_eq!(mm.zones[DMA32].wmark[2], 1536);
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(block(2) + 16));
    assert_eq!(boost(&mm), 4 * 512);
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(block(2) + 32));
    assert_eq!(boost(&mm), 2304, "capped at high * 15000 / 10000");
    check(&mm);

    // Fewer than 4 pageblocks managed: no boost.
    let mut mm = unmovable_block_lab(3, tun_kb(128), &free);
    assert!(mm.rmqueue(0, DMA32, 4, af(0), Movable).is_some());
    assert_eq!(boost(&mm), 0);
    check(&mm);

    // watermark_boost_factor 0: no boost.
    let tun = Tunables {
        watermark_boost_factor: 0,
        ..tun_kb(128)
    };
    let mut mm = unmovable_block_lab(8, tun, &free);
    assert!(mm.rmqueue(0, DMA32, 4, af(0), Movable).is_some());
    assert_eq!(boost(&mm), 0);
    check(&mm);
}

#[test]
fn s3_4_boost_wakes_kswapd_with_alloc_kswapd() {
    for kswapd in [true, false] {
        let mut mm = unmovable_block_lab(8, tun_kb(128), &[(32, 16)]);
        let r = block(3);
        set_type(&mut mm, r, Reclaimable);
        free_pfns(&mut mm, 0, odd(r, 60));
        let gfp = if kswapd {
            Gfp::GFP_HIGHUSER_MOVABLE
        } else {
            Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::KSWAPD_RECLAIM)
        };
        let p = mm.alloc_pages(0, gfp, 0).unwrap();
        assert_eq!(mm.block_mt(p), Reclaimable, "stolen from the first fallback type");
        assert_eq!(boost(&mm), 512);
        assert!(!mm.zones[DMA32].flags.boosted_watermark);
        let w = mm.take_wakeups();
        if kswapd {
            assert_eq!(
                w,
                vec![Wakeup::Kswapd {
                    nid: 0,
                    zone: ZoneType::Dma32,
                    order: 0,
                    highest_zoneidx: ZoneType::Dma32,
                    gfp: 0
                }]
            );
        } else {
            assert!(w.is_empty());
        }
        check(&mm);
    }
}

// ---- §4 allocation flags, fast path --------------------------------------------------------------

#[test]
fn s4_1_gfp_to_alloc_flags_atomic() {
    let mm = lab8();
    let f = |g: Gfp, o| mm.gfp_to_alloc_flags(g, o).0;
    assert_eq!(
        f(Gfp::GFP_ATOMIC, 1),
        AF::MIN_RESERVE | AF::KSWAPD | AF::NON_BLOCK | AF::HIGHATOMIC
    );
    assert_eq!(
        f(Gfp::GFP_ATOMIC, 0),
        AF::MIN_RESERVE | AF::KSWAPD | AF::NON_BLOCK
    );
    assert_eq!(f(Gfp::GFP_KERNEL, 3), AF::CPUSET | AF::KSWAPD);
    assert_eq!(f(Gfp::GFP_NOWAIT, 1), AF::CPUSET | AF::KSWAPD | AF::NON_BLOCK);
    assert_eq!(f(Gfp::GFP_TRANSHUGE_LIGHT, 9), AF::CPUSET);
    assert_eq!(f(Gfp::GFP_TRANSHUGE, 9), AF::CPUSET);
    assert_eq!(
        f(Gfp::GFP_ATOMIC.union(Gfp::NOMEMALLOC), 2),
        AF::MIN_RESERVE | AF::KSWAPD
    );
    let dm = dma32(
        8,
        1,
        Tunables {
            defrag_mode: true,
            ..tun_kb(128)
        },
    );
    assert_eq!(
        dm.gfp_to_alloc_flags(Gfp::GFP_KERNEL, 0).0,
        AF::CPUSET | AF::KSWAPD | AF::NOFRAGMENT
    );

    // Behaviour: 60 free pages, min 100 (min_free_kbytes 400). GFP_KERNEL and GFP_NOWAIT fail at
    // min; GFP_ATOMIC may go to min - min/2 - min/8 = 38.
    let mut mm = dma32(8, 1, tun_kb(400));
    assert_eq!(mm.zones[DMA32].wmark[..3], [100, 125, 150]);
    fill(&mut mm, DMA32, 0);
    free_pfns(&mut mm, 0, odd(block(4), 60));
    assert_eq!(mm.alloc_pages(0, Gfp::GFP_KERNEL, 0), None);
    // The slow path wakes kswapd at its start (§7.4 step 2); the second wake at the retry point
    // (step 5) finds the thread running and only records the request (§10.1.2). Nothing is
    // reclaimable, so the allocation fails after one pass.
    let wake = Wakeup::Kswapd {
        nid: 0,
        zone: ZoneType::Dma32,
        order: 0,
        highest_zoneidx: ZoneType::Normal,
        gfp: Gfp::GFP_KERNEL.0,
    };
    assert_eq!(mm.take_wakeups(), vec![wake]);
    assert_eq!(
        mm.reclaim.kswapd[0].phase,
        fraglab_mm::kswapd::KswapdPhase::Running
    );
    assert_eq!(
        (mm.reclaim.kswapd[0].order, mm.reclaim.kswapd[0].highest_zoneidx),
        (0, Some(ZoneType::Normal.idx()))
    );
    // One fruitless direct reclaim counts two allocstalls: do_try_to_free_pages runs its
    // priority loop again as the full memcg walk (§10.5).
    assert_eq!(mm.stat(fraglab_mm::vmstat::Stat::allocstall_normal), 2);
    assert_eq!(mm.alloc_pages(0, Gfp::GFP_NOWAIT, 0), None);
    assert!(mm.alloc_pages(0, Gfp::GFP_ATOMIC, 0).is_some());
    check(&mm);
}

#[test]
fn s4_2_nofragment_flag_rules() {
    let mm = lab8();
    let f = |mm: &Mm, z: Option<usize>, g: Gfp| mm.alloc_flags_nofragment(z, g).0;
    assert_eq!(f(&mm, Some(DMA32), Gfp::GFP_KERNEL), AF::KSWAPD);
    assert_eq!(f(&mm, Some(NORMAL), Gfp::GFP_KERNEL), AF::KSWAPD | AF::NOFRAGMENT);
    assert_eq!(f(&mm, Some(NORMAL), Gfp::GFP_TRANSHUGE_LIGHT), AF::NOFRAGMENT);
    assert_eq!(f(&mm, None, Gfp::GFP_KERNEL), AF::KSWAPD);
    let dm = dma32(
        8,
        1,
        Tunables {
            defrag_mode: true,
            ..tun_kb(128)
        },
    );
    assert_eq!(f(&dm, Some(DMA32), Gfp::GFP_TRANSHUGE_LIGHT), AF::NOFRAGMENT);
    assert_eq!(f(&dm, Some(DMA32), Gfp::GFP_KERNEL), AF::KSWAPD | AF::NOFRAGMENT);
    check(&mm);
}

#[test]
fn s4_2_nofragment_prefers_dma32_before_stealing() {
    // DMA32 [4096, 8192) + Normal [8192, 12288), defrag_mode 0. Normal's free pages are all in
    // partly used UNMOVABLE blocks; a movable request (preferred zone Normal → NOFRAGMENT) goes
    // to DMA32 in the first pass rather than stealing.
    let mut mm = boot(
        vec![zone(ZoneType::Dma32, BASE, 8), zone(ZoneType::Normal, 8192, 8)],
        2,
        tun_kb(128),
    );
    assert_eq!(mm.zones[DMA32].lowmem_reserve[3], 16);
    fill(&mut mm, NORMAL, 1);
    let (n1, n2) = (8192 + 512, 8192 + 1024);
    set_type(&mut mm, n1, Unmovable);
    set_type(&mut mm, n2, Unmovable);
    free_pfns(&mut mm, 1, odd(n1, 40).chain(odd(n2, 40)));
    assert_eq!(nr_free(&mm, NORMAL), 80);
    mm.set_trace_mask(trace_kind::ALL);
    let p = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert!(
        (BASE..8192).contains(&p),
        "first pass should use DMA32, got {p:#x}"
    );
    assert!(extfrags(&mm.take_trace()).is_empty());
    assert_eq!(nr_free(&mm, NORMAL), 80);
    assert_eq!(mm.zones[NORMAL].watermark_boost, 0);
    assert_eq!(mm.fallbacks.steal[Movable.idx()][Unmovable.idx()], 0);
    check(&mm);

    // With DMA32 exhausted, the second pass (NOFRAGMENT cleared) steals in Normal.
    mm.free_pages(0, p, 0);
    mm.drain_all_pages();
    fill(&mut mm, DMA32, 1);
    let q = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert!(
        (8192..12288).contains(&q),
        "second pass should steal in Normal, got {q:#x}"
    );
    assert_eq!(mm.block_mt(q), Unmovable);
    let ev = extfrags(&mm.take_trace());
    assert!(!ev.is_empty());
    assert!(ev
        .iter()
        .all(|e| !e.change_ownership && e.alloc_mt == 1 && e.fallback_mt == 0));
    check(&mm);
}

/// One DMA32 zone, filled, with 80 free single pages in MOVABLE block 4.
fn partial_movable_lab(defrag_mode: bool) -> Mm {
    let mut mm = dma32(
        8,
        1,
        Tunables {
            defrag_mode,
            ..tun_kb(128)
        },
    );
    fill(&mut mm, DMA32, 0);
    free_pfns(&mut mm, 0, odd(block(4), 80));
    mm
}

#[test]
fn s4_2_defrag_mode_never_drops_nofragment_in_fast_path() {
    let fast = af(AF::WMARK_LOW | AF::KSWAPD | AF::NOFRAGMENT);
    let mut mm = partial_movable_lab(true);
    mm.set_trace_mask(trace_kind::ALL);
    let ac = mm.alloc_context(Gfp::GFP_NOWAIT);
    assert_eq!(mm.get_page_from_freelist(0, Gfp::GFP_NOWAIT, 0, fast, &ac), None);
    // Non-blocking requests in defrag_mode never fall back into partly used blocks (§7.4).
    assert_eq!(mm.alloc_pages(0, Gfp::GFP_NOWAIT, 0), None);
    let t = mm.take_trace();
    assert!(extfrags(&t).is_empty());
    assert!(t.iter().any(|r| matches!(
        r.event,
        TraceEvent::MmPageAlloc {
            pfn: None,
            order: 0,
            ..
        }
    )));
    assert_eq!(mm.block_mt(block(4)), Movable);
    assert_eq!(nr_free(&mm, DMA32), 80);
    check(&mm);

    // defrag_mode 0: the same call retries without NOFRAGMENT and claims the block.
    let mut mm = partial_movable_lab(false);
    let ac = mm.alloc_context(Gfp::GFP_NOWAIT);
    let p = mm
        .get_page_from_freelist(0, Gfp::GFP_NOWAIT, 0, fast, &ac)
        .unwrap();
    assert_eq!(p & !511, block(4));
    assert_eq!(mm.block_mt(block(4)), Unmovable);
    check(&mm);
}

#[test]
fn s4_3_high_mark_only_maintains_below_high() {
    // low 40, high 48: with 45 free pages the request passes at low (the high test only sets
    // ZONE_BELOW_HIGH); a PCP bulk free that brings the zone back above high clears it.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    free_pfns(&mut mm, 0, odd(block(4), 45));
    assert!(!mm.zones[DMA32].flags.below_high);
    assert!(mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0).is_some());
    assert!(mm.zones[DMA32].flags.below_high);
    // With BELOW_HIGH the PCP holds at most high_min (40) pages before freeing a batch.
    free_pfns_no_drain(&mut mm, odd(block(5), 100));
    assert!(mm.zones[DMA32].pcp[0].count < 40);
    assert!(nr_free(&mm, DMA32) > 48);
    assert!(!mm.zones[DMA32].flags.below_high);
    check(&mm);
}

// ---- §5 rmqueue ------------------------------------------------------------------------------------

#[test]
fn s5_1_highatomic_first_and_last_resort() {
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let h = block(2);
    set_type(&mut mm, h, HighAtomic);
    free_range(&mut mm, 0, h + 16, 16);
    free_range(&mut mm, 0, block(4) + 16, 16);
    // ALLOC_HIGHATOMIC takes the reserve first even though a fallback is possible.
    assert_eq!(
        mm.rmqueue(0, DMA32, 4, af(AF::HIGHATOMIC), Unmovable),
        Some(h + 16)
    );
    mm.free_pages(0, h + 16, 4);
    assert_eq!(list(&mm, DMA32, 4, HighAtomic), vec![h + 16]);
    // Plain requests never use HighAtomic as a fallback ...
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(block(4) + 16));
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), None);
    // ... non-blocking ones do, as a last resort.
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(AF::NON_BLOCK), Movable), Some(h + 16));
    // Order 0: the PCP refill finds nothing (§2.3.3), rmqueue_buddy's last resort does.
    free_pfns(&mut mm, 0, [h + 1]);
    assert_eq!(mm.rmqueue(0, DMA32, 0, af(0), Movable), None);
    assert_eq!(mm.rmqueue(0, DMA32, 0, af(AF::NON_BLOCK), Movable), Some(h + 1));
    assert_eq!(mm.zones[DMA32].pcp[0].count, 0);
    check(&mm);
}

#[test]
fn s5_2_smallest_first() {
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, block(1), 128); // order 7 at a low address
    free_range(&mut mm, 0, block(3) + 64, 32); // order 5
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(block(3) + 64));
    assert_eq!(list(&mm, DMA32, 4, Movable), vec![block(3) + 80]);
    assert_eq!(list(&mm, DMA32, 7, Movable), vec![block(1)]);
    assert_eq!(mm.rmqueue(0, DMA32, 6, af(0), Movable), Some(block(1)));
    assert_eq!(list(&mm, DMA32, 6, Movable), vec![block(1) + 64]);
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(block(3) + 80));
    assert_eq!(list(&mm, DMA32, 6, Movable), vec![block(1) + 64]);
    // Same order: the head (most recently freed) first.
    free_range(&mut mm, 0, block(5) + 32, 32);
    free_range(&mut mm, 0, block(6) + 32, 32);
    assert_eq!(list(&mm, DMA32, 5, Movable), vec![block(6) + 32, block(5) + 32]);
    assert_eq!(mm.rmqueue(0, DMA32, 5, af(0), Movable), Some(block(6) + 32));
    check(&mm);
}

#[test]
fn s5_2_zone_locked_trace_percpu_refill() {
    let mut mm = lab32(1, tun_kb(128));
    mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC_ZONE_LOCKED);
    mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    mm.rmqueue(0, DMA32, 4, af(0), Movable).unwrap();
    let ev: Vec<(u32, u32, i32, bool)> = mm
        .take_trace()
        .iter()
        .filter_map(|r| match r.event {
            TraceEvent::MmPageAllocZoneLocked {
                pfn,
                order,
                migratetype,
                percpu_refill,
            } => Some((pfn, order, migratetype, percpu_refill)),
            _ => None,
        })
        .collect();
    let b = block(0);
    assert_eq!(
        ev,
        vec![
            (b, 0, 1, true),
            (b + 1, 0, 1, true),
            (b + 2, 0, 1, true),
            (b + 16, 4, 1, false)
        ]
    );
    check(&mm);
}

#[test]
fn s5_3_fallback_order() {
    for (req, first, second) in [
        (Unmovable, Reclaimable, Movable),
        (Movable, Reclaimable, Unmovable),
        (Reclaimable, Unmovable, Movable),
    ] {
        let mut mm = lab8();
        fill(&mut mm, DMA32, 0);
        let (p, q) = (block(2), block(5));
        set_type(&mut mm, p, first);
        set_type(&mut mm, q, second);
        free_range(&mut mm, 0, p, 512);
        free_range(&mut mm, 0, q, 512);
        mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC_EXTFRAG);
        assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), req), Some(p), "{req:?}");
        assert_eq!((mm.block_mt(p), mm.block_mt(q)), (req, second));
        assert_eq!(mm.rmqueue(0, DMA32, 9, af(0), req), Some(q), "{req:?}");
        assert_eq!(mm.block_mt(q), req);
        let ev = extfrags(&mm.take_trace());
        let fb: Vec<i32> = ev.iter().map(|e| e.fallback_mt).collect();
        assert_eq!(fb, vec![first as i32, second as i32]);
        check(&mm);
    }
}

#[test]
fn s5_5_highatomic_reserve_on_atomic_high_order() {
    // 128 blocks (managed/100 = 655 >= 512), min 1024, low 1280.
    let tun = tun_kb(4096);
    // Plenty free: the fast path succeeds without ALLOC_HIGHATOMIC, nothing is reserved.
    let mut mm = dma32(128, 1, tun.clone());
    assert!(mm.alloc_pages(0, Gfp::GFP_ATOMIC, 1).is_some());
    assert_eq!(mm.zones[DMA32].nr_reserved_highatomic, 0);
    assert_eq!(mm.blocks_by_type(DMA32)[HighAtomic.idx()], 0);
    check(&mm);

    for (blocks, reserves) in [(128u32, true), (64, false)] {
        let mut mm = dma32(blocks, 1, tun.clone());
        fill(&mut mm, DMA32, 0);
        let (b5, b9) = (block(5), block(9));
        free_range(&mut mm, 0, b5, 512);
        free_range(&mut mm, 0, b9, 512);
        assert_eq!(list(&mm, DMA32, 9, Movable), vec![b9, b5]);
        // 1024 free < low: the slow path (ALLOC_HIGHATOMIC) claims b9 and reserves it.
        let p = mm.alloc_pages(0, Gfp::GFP_ATOMIC, 1).unwrap();
        assert_eq!(p, b9);
        let z = &mm.zones[DMA32];
        let refill = 2 * pcp_list(&mm, DMA32, 0, order_to_pindex(Unmovable, 1)).len() as u64 + 2;
        if reserves {
            assert_eq!(refill, 14);
            assert_eq!(mm.block_mt(b9), HighAtomic);
            assert_eq!(z.nr_reserved_highatomic, 512);
            assert_eq!(z.nr_free_highatomic, 512 - refill);
            assert_eq!(mm.block_mt(b5), Movable);
            // The next high-order atomic request uses the reserve first; nothing more is reserved.
            let q = mm.alloc_pages(0, Gfp::GFP_ATOMIC, 4).unwrap();
            assert_eq!(q, b9 + 16);
            assert_eq!(mm.zones[DMA32].nr_reserved_highatomic, 512);
            assert_eq!(mm.blocks_by_type(DMA32)[HighAtomic.idx()], 1);
        } else {
            assert_eq!(
                mm.block_mt(b9),
                Unmovable,
                "managed/100 < a pageblock: no reserve"
            );
            assert_eq!(z.nr_reserved_highatomic, 0);
        }
        check(&mm);
    }
}

#[test]
fn s5_5_3_unreserve_keeps_one_block_unless_forced() {
    let mut mm = dma32(128, 1, tun_kb(4096));
    fill(&mut mm, DMA32, 0);
    let b9 = block(9);
    free_range(&mut mm, 0, b9, 512);
    assert_eq!(mm.alloc_pages(0, Gfp::GFP_ATOMIC, 1), Some(b9));
    assert_eq!(mm.block_mt(b9), HighAtomic);
    assert_eq!(mm.zones[DMA32].nr_reserved_highatomic, 512);
    let free_ha = mm.zones[DMA32].nr_free_highatomic;
    assert!(free_ha > 0);
    let ac = mm.alloc_context(Gfp::GFP_KERNEL);
    assert!(
        !mm.unreserve_highatomic_pageblock(&ac, false),
        "the last block is kept"
    );
    assert_eq!(mm.block_mt(b9), HighAtomic);
    assert!(mm.unreserve_highatomic_pageblock(&ac, true));
    assert_eq!(mm.block_mt(b9), Unmovable, "given back to the requester's type");
    assert_eq!(mm.zones[DMA32].nr_reserved_highatomic, 0);
    assert_eq!(mm.zones[DMA32].nr_free_highatomic, 0);
    assert!(nr_by_type(&mm, DMA32, Unmovable).iter().sum::<u64>() > 0);
    check(&mm);
}

// ---- §6 __rmqueue and fallback -------------------------------------------------------------------

#[test]
fn s6_2_claim_resets_mode_steal_persists() {
    // Claim → NORMAL inside a PCP refill: the refill's next pages come from the claimed block,
    // not from claiming a second block.
    let mut mm = lab32(2, tun_kb(128));
    fill(&mut mm, DMA32, 1);
    let (m1, m2) = (block(3), block(6));
    free_range(&mut mm, 1, m1 + 256, 256);
    free_range(&mut mm, 1, m2, 128);
    mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC_EXTFRAG);
    let p = mm.rmqueue(0, DMA32, 0, af(0), Unmovable).unwrap();
    assert_eq!(p, m1 + 256);
    assert_eq!(pcp_list(&mm, DMA32, 0, 0), vec![m1 + 257, m1 + 258]);
    assert_eq!((mm.block_mt(m1), mm.block_mt(m2)), (Unmovable, Movable));
    assert_eq!(mm.fallbacks.claim_partial[Unmovable.idx()][Movable.idx()], 1);
    assert_eq!(extfrags(&mm.take_trace()).len(), 1);
    check(&mm);

    // Raw __rmqueue: execution starts at *mode.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let u = block(2);
    set_type(&mut mm, u, Unmovable);
    let m = block(4) + 1;
    free_pfns(&mut mm, 0, [m, u + 1]);
    // STEAL skips NORMAL even though a movable page is free, and stays STEAL.
    let mut mode = RmqueueMode::Steal;
    assert_eq!(mm.__rmqueue(0, DMA32, 0, Movable, af(0), &mut mode), Some(u + 1));
    assert_eq!(mode, RmqueueMode::Steal);
    take(&mut mm, u + 1, 0);
    // STEAL under NOFRAGMENT: nothing, although both a movable page and a foreign page are free.
    free_pfns(&mut mm, 0, [u + 3]);
    assert_eq!(
        mm.__rmqueue(0, DMA32, 0, Movable, af(AF::NOFRAGMENT), &mut mode),
        None
    );
    assert_eq!(mode, RmqueueMode::Steal);
    // NORMAL finds the movable page.
    let mut mode = RmqueueMode::Normal;
    assert_eq!(mm.__rmqueue(0, DMA32, 0, Movable, af(0), &mut mode), Some(m));
    assert_eq!(mode, RmqueueMode::Normal);
    take(&mut mm, m, 0);
    // CLAIM that succeeds resets to NORMAL.
    free_range(&mut mm, 0, u + 256, 256);
    let mut mode = RmqueueMode::Claim;
    assert_eq!(mm.__rmqueue(0, DMA32, 0, Movable, af(0), &mut mode), Some(u + 3));
    assert_eq!(mode, RmqueueMode::Normal);
    assert_eq!(mm.block_mt(u), Movable);
    take(&mut mm, u + 3, 0);
    check(&mm);
}

#[test]
fn s6_3_whole_block_claim_no_boost() {
    let mut mm = lab8();
    mm.set_trace_mask(trace_kind::ALL);
    let p = mm.rmqueue(0, DMA32, 4, af(AF::KSWAPD), Unmovable).unwrap();
    assert_eq!(p, block(0));
    assert_eq!(
        (mm.block_mt(block(0)), mm.block_mt(block(1))),
        (Unmovable, Unmovable)
    );
    assert_eq!(
        nr_by_type(&mm, DMA32, Unmovable),
        [0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0]
    );
    assert_eq!(list(&mm, DMA32, 9, Unmovable), vec![block(1)]);
    assert_eq!(boost(&mm), 0);
    assert!(mm.take_wakeups().is_empty());
    let t = mm.take_trace();
    assert_eq!(
        extfrags(&t),
        vec![Extfrag {
            pfn: p,
            alloc_order: 4,
            fallback_order: 10,
            alloc_mt: 0,
            fallback_mt: 1,
            change_ownership: true
        }]
    );
    // Whole-block claims do not go through __rmqueue_smallest: no zone_locked event.
    assert!(!t
        .iter()
        .any(|r| matches!(r.event, TraceEvent::MmPageAllocZoneLocked { .. })));
    assert_eq!(mm.fallbacks.claim_whole[Unmovable.idx()][Movable.idx()], 1);
    check(&mm);

    // An order-9 chunk: exactly its block is retyped.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, block(5), 512);
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Reclaimable), Some(block(5)));
    assert_eq!(
        (mm.block_mt(block(4)), mm.block_mt(block(5))),
        (Movable, Reclaimable)
    );
    assert_eq!(boost(&mm), 0);
    check(&mm);
}

#[test]
fn s6_3_partial_claim_threshold_256() {
    struct Case {
        req: MigrateType,
        block_type: MigrateType,
        /// Free pages: offset in the block and count.
        free: (u32, u32),
        /// Offsets of the LRU ("movable") allocated pages.
        lru: Vec<u32>,
        claims: bool,
        /// Expected page (offset) and fallback order.
        page: u32,
        fallback_order: i32,
    }
    let case = |req, block_type, free, lru, claims, page, fallback_order| Case {
        req,
        block_type,
        free,
        lru,
        claims,
        page,
        fallback_order,
    };
    let b = block(3);
    let lru = |n: u32| -> Vec<u32> { (0..n).collect() };
    let mut lru257: Vec<u32> = lru(256);
    lru257.push(384);
    let cases = vec![
        // MOVABLE into UNMOVABLE: alike = LRU pages. 128 free + 128 LRU = 256.
        case(Movable, Unmovable, (256, 128), lru(128), true, 256, 7),
        case(Movable, Unmovable, (256, 128), lru(127), false, 256, 7),
        // UNMOVABLE into MOVABLE: alike = 512 - free - LRU. 128 + (512 - 128 - 256) = 256.
        case(Unmovable, Movable, (256, 128), lru(256), true, 256, 7),
        case(Unmovable, Movable, (256, 128), lru257, false, 256, 7),
        // UNMOVABLE into RECLAIMABLE: alike = 0, free alone must make half a block.
        case(Unmovable, Reclaimable, (256, 256), vec![], true, 256, 8),
        case(Unmovable, Reclaimable, (256, 255), vec![], false, 480, 4),
    ];
    for c in cases {
        let Case {
            req,
            block_type: bt,
            free: (off, n),
            lru: lru_pages,
            claims,
            page: page_off,
            fallback_order: fb_order,
        } = c;
        let what = format!("{req:?} into {bt:?}, {n} free, {} LRU", lru_pages.len());
        let mut mm = lab8();
        fill(&mut mm, DMA32, 0);
        set_type(&mut mm, b, bt);
        set_lru(&mut mm, lru_pages.iter().map(|o| b + o));
        free_range(&mut mm, 0, b + off, n);
        mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC_EXTFRAG);
        let p = mm.rmqueue(0, DMA32, 4, af(0), req).unwrap();
        assert_eq!(p, b + page_off, "{what}");
        assert_eq!(mm.block_mt(b), if claims { req } else { bt }, "{what}");
        let ev = extfrags(&mm.take_trace());
        assert_eq!(ev.len(), 1, "{what}");
        assert_eq!(
            (ev[0].fallback_order, ev[0].change_ownership),
            (fb_order, claims),
            "{what}"
        );
        let (c, s) = (
            mm.fallbacks.claim_partial[req.idx()][bt.idx()],
            mm.fallbacks.steal[req.idx()][bt.idx()],
        );
        assert_eq!((c, s), if claims { (1, 0) } else { (0, 1) }, "{what}");
        if claims {
            // Every free chunk of the block moved to the request's lists.
            assert_eq!(nr_by_type(&mm, DMA32, bt), [0; 11], "{what}");
        }
        check(&mm);
    }
}

#[test]
fn s6_3_movable_only_claims_order4_plus() {
    // 32 free order-3 chunks (256 pages) and 256 LRU pages: plenty to claim, but a MOVABLE request
    // only considers claiming chunks of order >= 4.
    let u = block(2);
    let o3_free: Vec<u32> = (0..32)
        .flat_map(|k| (0..8).map(move |i| u + 16 * k + i))
        .collect();
    let o3_lru: Vec<u32> = (0..32)
        .flat_map(|k| (8..16).map(move |i| u + 16 * k + i))
        .collect();
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    set_type(&mut mm, u, Unmovable);
    set_lru(&mut mm, o3_lru.iter().copied());
    free_pfns(&mut mm, 0, o3_free.iter().copied());
    assert_eq!(nr_by_type(&mm, DMA32, Unmovable)[3], 32);
    let p = mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    assert_eq!(p & !511, u);
    assert_eq!(mm.block_mt(u), Unmovable);
    assert_eq!(boost(&mm), 0, "no claim attempt");
    check(&mm);

    // The same block with its first 16 pages free (one order-4 chunk): claimed.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    set_type(&mut mm, u, Unmovable);
    set_lru(&mut mm, o3_lru.iter().copied().filter(|&p| p >= u + 16));
    free_pfns(
        &mut mm,
        0,
        (u..u + 16).chain(o3_free.iter().copied().filter(|&p| p >= u + 16)),
    );
    assert_eq!(nr_by_type(&mm, DMA32, Unmovable)[4], 1);
    mm.rmqueue(0, DMA32, 0, af(0), Movable).unwrap();
    assert_eq!(mm.block_mt(u), Movable);
    assert_eq!(boost(&mm), 512);
    check(&mm);

    // UNMOVABLE requests consider every order: order-3 chunks in a MOVABLE block are claimed.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    free_pfns(&mut mm, 0, o3_free.iter().copied());
    let p = mm.rmqueue(0, DMA32, 0, af(0), Unmovable).unwrap();
    assert_eq!(p & !511, u);
    assert_eq!(mm.block_mt(u), Unmovable);
    assert_eq!(boost(&mm), 512);
    check(&mm);
}

#[test]
fn s6_3_nofragment_min_order_9() {
    let m = block(2);
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, m + 256, 256);
    mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC_EXTFRAG);
    // A claimable order-8 chunk, but under NOFRAGMENT only whole pageblocks: nothing, no boost.
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(AF::NOFRAGMENT), Unmovable), None);
    assert_eq!(boost(&mm), 0);
    assert_eq!(mm.block_mt(m), Movable);
    assert!(mm.take_trace().is_empty());
    // A whole free pageblock is still claimed.
    free_range(&mut mm, 0, block(5), 512);
    assert_eq!(
        mm.rmqueue(0, DMA32, 4, af(AF::NOFRAGMENT), Unmovable),
        Some(block(5))
    );
    assert_eq!((mm.block_mt(block(5)), mm.block_mt(m)), (Unmovable, Movable));
    assert_eq!(boost(&mm), 0);
    check(&mm);

    // Without NOFRAGMENT the order-8 chunk's block is claimed (and boosts).
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    free_range(&mut mm, 0, m + 256, 256);
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Unmovable), Some(m + 256));
    assert_eq!(mm.block_mt(m), Unmovable);
    assert_eq!(boost(&mm), 512);
    check(&mm);
}

#[test]
fn s6_3_boost_before_zone_boundary_check() {
    // A zone starting inside a pageblock: the first block straddles the boundary. A claim attempt
    // there boosts the watermark, then gives up (the block cannot be moved) although it has 256
    // free pages; the request steals instead.
    let mut mm = boot(
        vec![ZoneConfig {
            zone_type: ZoneType::Dma32,
            nid: 0,
            start_pfn: BASE + 256,
            spanned: 4096,
            present: 4096,
            managed: 4096,
        }],
        1,
        tun_kb(128),
    );
    fill(&mut mm, DMA32, 0);
    set_type(&mut mm, BASE, Unmovable);
    free_range(&mut mm, 0, BASE + 256, 256);
    assert_eq!(list(&mm, DMA32, 8, Unmovable), vec![BASE + 256]);
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Movable), Some(BASE + 256));
    assert_eq!(boost(&mm), 512);
    assert_eq!(mm.block_mt(BASE), Unmovable);
    assert_eq!(mm.fallbacks.steal[Movable.idx()][Unmovable.idx()], 1);
    assert_eq!(list(&mm, DMA32, 7, Unmovable), vec![BASE + 384]);
    check(&mm);
}

#[test]
fn s6_4_steal_smallest_remainders_stay_foreign() {
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let r = block(2);
    set_type(&mut mm, r, Reclaimable);
    free_range(&mut mm, 0, r + 32, 32); // order 5
    free_range(&mut mm, 0, r + 128, 128); // order 7
    mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC_EXTFRAG);
    // 160 free, alike 0: both claim attempts fail; the steal takes the smallest chunk.
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Unmovable), Some(r + 32));
    assert_eq!(list(&mm, DMA32, 4, Reclaimable), vec![r + 48]);
    assert_eq!(list(&mm, DMA32, 7, Reclaimable), vec![r + 128]);
    assert!(list(&mm, DMA32, 4, Unmovable).is_empty());
    assert_eq!(mm.block_mt(r), Reclaimable);
    assert_eq!(
        extfrags(&mm.take_trace()),
        vec![Extfrag {
            pfn: r + 32,
            alloc_order: 4,
            fallback_order: 5,
            alloc_mt: 0,
            fallback_mt: 2,
            change_ownership: false
        }]
    );
    assert_eq!(mm.fallbacks.steal[Unmovable.idx()][Reclaimable.idx()], 1);
    check(&mm);
}

#[test]
fn s6_4_steal_order_before_fallback_type() {
    // A RECLAIMABLE order-7 chunk (first fallback) and a MOVABLE order-5 chunk (second): the
    // steal goes by order first.
    let mut mm = lab8();
    fill(&mut mm, DMA32, 0);
    let (r, m) = (block(2), block(4));
    set_type(&mut mm, r, Reclaimable);
    free_range(&mut mm, 0, r + 128, 128);
    set_lru(&mut mm, m + 64..m + 364);
    free_range(&mut mm, 0, m + 32, 32);
    assert_eq!(mm.rmqueue(0, DMA32, 4, af(0), Unmovable), Some(m + 32));
    assert_eq!(list(&mm, DMA32, 4, Movable), vec![m + 48]);
    assert_eq!(list(&mm, DMA32, 7, Reclaimable), vec![r + 128]);
    assert_eq!((mm.block_mt(r), mm.block_mt(m)), (Reclaimable, Movable));
    check(&mm);
}

#[test]
fn s6_5_extfrag_trace_fields() {
    let render = |e: &TraceEvent| {
        let mut s = String::new();
        e.render_fields(&mut s);
        s
    };
    let extfrag_event = |mm: &mut Mm| {
        let t = mm.take_trace();
        let v: Vec<TraceEvent> = t
            .into_iter()
            .map(|r| r.event)
            .filter(|e| matches!(e, TraceEvent::MmPageAllocExtfrag { .. }))
            .collect();
        assert_eq!(v.len(), 1);
        render(&v[0])
    };
    // "claimer": whole free block.
    let mut mm = lab8();
    mm.set_trace_mask(trace_kind::ALL);
    let p = mm.rmqueue(0, DMA32, 4, af(0), Unmovable).unwrap();
    let s = extfrag_event(&mut mm);
    assert!(
        s.ends_with(&format!(
            "pfn={p:#x} alloc_order=4 fallback_order=10 pageblock_order=9 alloc_migratetype=0 \
             fallback_migratetype=1 fragmenting=0 change_ownership=1"
        )),
        "{s}"
    );
    // "steal": partly used block claimed.
    let mut mm = unmovable_block_lab(8, tun_kb(128), &[(256, 256)]);
    mm.set_trace_mask(trace_kind::ALL);
    let p = mm.rmqueue(0, DMA32, 4, af(0), Movable).unwrap();
    let s = extfrag_event(&mut mm);
    assert!(
        s.ends_with(&format!(
            "pfn={p:#x} alloc_order=4 fallback_order=8 pageblock_order=9 alloc_migratetype=1 \
             fallback_migratetype=0 fragmenting=1 change_ownership=1"
        )),
        "{s}"
    );
    // "pollute": single chunk stolen, block keeps its type.
    let mut mm = unmovable_block_lab(8, tun_kb(128), &[(32, 32)]);
    mm.set_trace_mask(trace_kind::ALL);
    let p = mm.rmqueue(0, DMA32, 4, af(0), Movable).unwrap();
    let s = extfrag_event(&mut mm);
    assert!(
        s.ends_with(&format!(
            "pfn={p:#x} alloc_order=4 fallback_order=5 pageblock_order=9 alloc_migratetype=1 \
             fallback_migratetype=0 fragmenting=1 change_ownership=0"
        )),
        "{s}"
    );
    check(&mm);
}

/// §4.4.1: an order above MAX_PAGE_ORDER is rejected with NULL, touching nothing.
#[test]
fn s4_4_order_above_max_is_rejected() {
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.set_trace_mask(trace_kind::ALL);
    let before = mm.zone_views();
    assert_eq!(mm.alloc_pages(0, Gfp::GFP_KERNEL, 11), None);
    assert_eq!(mm.zone_views(), before);
    assert!(mm.take_trace().is_empty());
    mm.check_invariants().unwrap();
}
