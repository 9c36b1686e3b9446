//! Helpers shared by the rule tests (`rules.rs`) and the property tests (`props.rs`): small
//! machines, building precise free-list states through the public API, and reading lists,
//! PCP lists and trace events back.
#![allow(dead_code)]

use fraglab_mm::debug_vm::PageCensus;
use fraglab_mm::mmzone::{PageKind, NIL};
use fraglab_mm::trace::{TraceEvent, TraceRecord};
use fraglab_mm::types::{PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER};
use fraglab_mm::{AllocFlags, MachineConfig, MigrateType, Mm, Tunables, ZoneConfig, ZoneType};

/// A freshly booted x86-64 machine of `mb` MiB (no DMA zone, one CPU, default tunables) with
/// the debug-vm checker on.
pub fn machine(mb: u64) -> Mm {
    let mut mm = Mm::new(
        &MachineConfig::x86_64(mb << 20, false, 1).unwrap(),
        Tunables::default(),
    )
    .unwrap();
    mm.debug_vm = true;
    mm
}

/// Zone indices in `Mm::zones` (kernel zone order).
pub const DMA: usize = 0;
pub const DMA32: usize = 1;
pub const NORMAL: usize = 2;

/// Start of the test DMA32 zones: max-order aligned, like the S2 DMA32 zone.
pub const BASE: u32 = 4096;
pub const PB: u32 = PAGEBLOCK_NR_PAGES;

/// First pfn of pageblock `i` of a zone starting at [`BASE`].
pub fn block(i: u32) -> u32 {
    BASE + i * PB
}

/// A fully managed zone (no holes, no reserved pages) of `blocks` pageblocks at `start`.
pub fn zone(zone_type: ZoneType, start: u32, blocks: u32) -> ZoneConfig {
    ZoneConfig {
        zone_type,
        nid: 0,
        start_pfn: start,
        spanned: blocks * PB,
        present: blocks * PB,
        managed: blocks * PB,
    }
}

/// Tunables with `min_free_kbytes` fixed (so the watermarks are easy to reason about).
pub fn tun_kb(min_free_kbytes: u64) -> Tunables {
    Tunables {
        min_free_kbytes: Some(min_free_kbytes),
        ..Tunables::default()
    }
}

/// Boots a machine with debug-vm on.
pub fn boot(zones: Vec<ZoneConfig>, nr_cpus: u32, tun: Tunables) -> Mm {
    let m = MachineConfig {
        zones,
        nr_cpus,
        cpu_node: Vec::new(),
    };
    let mut mm = Mm::new(&m, tun).expect("valid machine");
    mm.debug_vm = true;
    check(&mm);
    mm
}

/// One DMA32 zone of `blocks` pageblocks at [`BASE`].
pub fn dma32(blocks: u32, nr_cpus: u32, tun: Tunables) -> Mm {
    boot(vec![zone(ZoneType::Dma32, BASE, blocks)], nr_cpus, tun)
}

/// Runs the debug-vm checker; panics with the violation.
pub fn check(mm: &Mm) -> PageCensus {
    match mm.check_invariants() {
        Ok(c) => {
            assert_eq!(c.free + c.pcp + c.allocated, c.managed, "census {c:?}");
            c
        }
        Err(e) => panic!("{e}"),
    }
}

/// Allocates every free page of zone `zi` as an order-0 MOVABLE page on `cpu`, through `rmqueue`
/// (no watermark), and returns how many. Afterwards the zone has no free and no PCP pages and
/// every page is an order-0 allocation that can be freed one by one.
pub fn fill(mm: &mut Mm, zi: usize, cpu: u32) -> u64 {
    let mut n = 0;
    while mm
        .rmqueue(cpu, zi, 0, AllocFlags(0), MigrateType::Movable)
        .is_some()
    {
        n += 1;
    }
    assert_eq!(mm.zones[zi].nr_free_pages(), 0);
    assert!(mm.zones[zi].pcp.iter().all(|p| p.count == 0));
    assert_eq!(n, mm.zones[zi].managed);
    n
}

/// Frees order-0 allocations on `cpu`, in the order given, then drains every PCP list, so the
/// pages end up merged in the buddy lists.
pub fn free_pfns(mm: &mut Mm, cpu: u32, pfns: impl IntoIterator<Item = u32>) {
    for p in pfns {
        mm.free_pages(cpu, p, 0);
    }
    mm.drain_all_pages();
}

/// Frees `[start, start + n)` (order-0 allocations) and drains.
pub fn free_range(mm: &mut Mm, cpu: u32, start: u32, n: u32) {
    free_pfns(mm, cpu, start..start + n);
}

/// Sets a pageblock's type. The block must hold no free and no PCP chunk (so no list has to
/// move): used to build blocks of a given type before freeing pages into them.
pub fn set_type(mm: &mut Mm, pfn: u32, mt: MigrateType) {
    let start = pfn & !(PB - 1);
    for p in start..start + PB {
        let k = mm.pages.kind(p);
        assert!(
            !matches!(k, PageKind::Buddy | PageKind::Pcp),
            "set_type: block {start:#x} holds a {k:?} chunk at {p:#x}"
        );
    }
    mm.set_block_mt(start, mt);
}

/// Marks allocated order-0 pages as LRU pages ("movable" for the claim heuristic).
pub fn set_lru(mm: &mut Mm, pfns: impl IntoIterator<Item = u32>) {
    for p in pfns {
        mm.set_page_owner(p, p, true);
    }
}

/// Marks a chunk taken by a raw `__rmqueue*` call as allocated, as `rmqueue` would.
pub fn take(mm: &mut Mm, pfn: u32, order: u32) {
    assert_eq!(
        mm.pages.kind(pfn),
        PageKind::Tail,
        "{pfn:#x} was not just taken off a list"
    );
    mm.pages.set(pfn, PageKind::Allocated, order);
}

/// The free list [order][mt] of zone `zi`, head first.
pub fn list(mm: &Mm, zi: usize, order: u32, mt: MigrateType) -> Vec<u32> {
    walk(mm, mm.zones[zi].area.lists[order as usize][mt.idx()].first)
}

/// PCP list `pindex` of `cpu` in zone `zi`, head first.
pub fn pcp_list(mm: &Mm, zi: usize, cpu: usize, pindex: usize) -> Vec<u32> {
    mm.zones[zi].pcp[cpu].lists[pindex].iter().collect()
}

fn walk(mm: &Mm, mut p: u32) -> Vec<u32> {
    let mut v = Vec::new();
    while p != NIL {
        v.push(p);
        p = mm.list_next(p);
        assert!(v.len() <= mm.end_pfn() as usize, "list loops");
    }
    v
}

/// Number of free chunks per order of one type.
pub fn nr_by_type(mm: &Mm, zi: usize, mt: MigrateType) -> [u64; 11] {
    let mut out = [0; 11];
    for (o, row) in mm.zones[zi].area.nr_by_type.iter().enumerate() {
        out[o] = row[mt.idx()];
    }
    out
}

/// The fields of one kmem:mm_page_alloc_extfrag event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extfrag {
    pub pfn: u32,
    pub alloc_order: i32,
    pub fallback_order: i32,
    pub alloc_mt: i32,
    pub fallback_mt: i32,
    pub change_ownership: bool,
}

pub fn extfrags(trace: &[TraceRecord]) -> Vec<Extfrag> {
    trace
        .iter()
        .filter_map(|r| match r.event {
            TraceEvent::MmPageAllocExtfrag {
                pfn,
                alloc_order,
                fallback_order,
                alloc_migratetype,
                fallback_migratetype,
                change_ownership,
            } => Some(Extfrag {
                pfn,
                alloc_order,
                fallback_order,
                alloc_mt: alloc_migratetype,
                fallback_mt: fallback_migratetype,
                change_ownership,
            }),
            _ => None,
        })
        .collect()
}

/// (pfn, order, migratetype) of every mm_page_pcpu_drain event, in order.
pub fn pcpu_drains(trace: &[TraceRecord]) -> Vec<(u32, u32, i32)> {
    trace
        .iter()
        .filter_map(|r| match r.event {
            TraceEvent::MmPagePcpuDrain {
                pfn,
                order,
                migratetype,
            } => Some((pfn, order, migratetype)),
            _ => None,
        })
        .collect()
}

/// A free chunk whose buddy is a free chunk of the same order in the same zone (the pair should
/// have merged): below pageblock order always a bug; at or above it only allowed when one of
/// the two blocks is of a non-mergeable type (§1.5 step 2c).
pub fn unmerged_buddies(mm: &Mm) -> Option<String> {
    for (zi, z) in mm.zones.iter().enumerate() {
        if z.spanned == 0 {
            continue;
        }
        for order in 0..10u32 {
            for mt in MigrateType::ALL {
                for p in list(mm, zi, order, mt) {
                    let b = p ^ (1 << order);
                    if !z.spans(b) || !mm.pages.is_buddy_of_order(b, order) {
                        continue;
                    }
                    let bmt = mm.block_mt(b);
                    if order < PAGEBLOCK_ORDER || (mt.is_mergeable() && bmt.is_mergeable()) {
                        return Some(format!(
                            "zone {}: free chunks {p:#x} ({mt:?}) and {b:#x} ({bmt:?}) of order {order} \
                             are buddies but did not merge",
                            z.zone_type.name()
                        ));
                    }
                }
            }
        }
    }
    None
}

/// Fills memory with order-0 anon and clean page-cache folios, alternating, with a gfp that
/// cannot reclaim directly (so the fill stops at the watermark instead of evicting page cache);
/// returns the (anon, file) folios. Unreclaimable anon interleaved with page cache: reclaim
/// frees only order-0 holes.
pub fn fill_anon_and_file(mm: &mut Mm) -> (Vec<fraglab_mm::folio::FolioId>, Vec<fraglab_mm::folio::FolioId>) {
    use fraglab_mm::folio::FolioKind;
    let g = fraglab_mm::Gfp::GFP_HIGHUSER_MOVABLE.without(fraglab_mm::Gfp::DIRECT_RECLAIM);
    let (mut anon, mut file) = (Vec::new(), Vec::new());
    loop {
        let a = mm.alloc_folio(0, g, 0, FolioKind::Anon, false);
        let f = mm.alloc_folio(0, g, 0, FolioKind::File, false);
        match (a, f) {
            (Some(a), Some(f)) => {
                anon.push(a);
                file.push(f);
            }
            _ => break,
        }
    }
    (anon, file)
}

/// Anon order-0 folios in every page of a 16-block DMA32 zone, every other one freed: half the
/// memory free, no free order-9 chunk (fragmentation index near 1000); the anon folios can
/// migrate, so compaction can make 2 MiB chunks. Returns the folios kept.
#[allow(dead_code)]
pub fn fragmented(tun: Tunables) -> (Mm, Vec<fraglab_mm::folio::FolioId>) {
    let no_reclaim = fraglab_mm::Gfp::GFP_HIGHUSER_MOVABLE.without(fraglab_mm::Gfp::DIRECT_RECLAIM);
    let mut mm = dma32(16, 1, tun);
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, no_reclaim, 0, fraglab_mm::folio::FolioKind::Anon, false) {
        all.push(id);
    }
    let mut kept = Vec::new();
    for (i, id) in all.into_iter().enumerate() {
        if i % 2 == 0 {
            mm.free_folio(0, id);
        } else {
            kept.push(id);
        }
    }
    mm.drain_all_pages();
    (mm, kept)
}
