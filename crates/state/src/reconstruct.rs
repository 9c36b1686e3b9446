//! The initial state inferred from a snapshot (docs/model §30.3–§30.5): what the simulator
//! boots from (`[machine] snapshot`).
//!
//! INTERFACE (issue 21): the types below are the contract between the inference (this file) and
//! the simulator's boot (`fraglab_sim::restore`). Pfns are absolute; the simulator's memory map
//! covers pfns 0..`end_pfn`.

// The free tables are indexed by zone, type and order side by side.
#![allow(clippy::needless_range_loop)]

use serde::{Deserialize, Serialize};

use crate::page::{PageClass, ACTIVE, CLASS_MASK, REFERENCED, TAIL, UNEVICTABLE};
use std::collections::BTreeMap;

use crate::procparse::{
    check_buddyinfo, check_pagetypeinfo, parse_buddyinfo_nodes, type_index, uninitialised_memory,
    PagetypeZone, ZoneKey, TYPE_NAMES,
};
use crate::snapshot::{Snapshot, SnapshotHeader, ZoneSpan};

/// A zone to build (from zoneinfo, checked against the page bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RZone {
    /// The NUMA node the zone belongs to (zoneinfo's "Node N"; 0 in reconstructions written
    /// before it was kept).
    #[serde(default)]
    pub node: u32,
    /// "DMA", "DMA32", "Normal", "Movable".
    pub name: String,
    pub start_pfn: u64,
    pub spanned: u64,
    pub present: u64,
    /// Managed pages as the simulator will have them: present pages that are not
    /// [`Reconstruction::unusable`].
    pub managed: u64,
}

/// What an allocated folio is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RKind {
    Anon,
    File,
    /// tmpfs/shmem: swap-backed page cache.
    Shmem,
    /// Slab in a block fitted Reclaimable (reclaimable caches) or not.
    SlabReclaimable,
    SlabUnreclaimable,
    PageTable,
    Hugetlb,
    /// Kernel memory without a class: flagged kernel pages, unflagged pages (kernel allocations,
    /// PCP pages, chunks under free page reporting), offline (balloon) pages.
    Kernel,
}

/// An allocated folio at its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RFolio {
    pub pfn: u64,
    pub order: u8,
    pub kind: RKind,
    pub active: bool,
    pub referenced: bool,
    /// PG_unevictable or PG_mlocked.
    pub unevictable: bool,
    /// PG_dirty or PG_writeback of a page-cache folio (the snapshot's dirty bitmap at the
    /// head; false for snapshots without one).
    #[serde(default)]
    pub dirty: bool,
}

/// A free buddy chunk (§30.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RFree {
    pub pfn: u64,
    pub order: u8,
}

/// One row of the match report: a captured figure and the reconstruction's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatchRow {
    /// e.g. "Normal blocks Unmovable", "Normal free Movable order 3 (chunks)".
    pub what: String,
    pub captured: i64,
    pub reconstructed: i64,
}

/// How well the reconstruction matches what the kernel printed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MatchReport {
    /// Blocks per (zone, type): pagetypeinfo's "Number of blocks type" against the fitted types.
    pub blocks: Vec<MatchRow>,
    /// Free chunks per (zone, type, order): pagetypeinfo against the chunks with their block's
    /// type.
    pub free_by_type: Vec<MatchRow>,
    /// Free chunks per (zone, order): buddyinfo against the chunks.
    pub free_by_order: Vec<MatchRow>,
    /// Pageblocks whose allocated pages have more than one mobility (unmovable, reclaimable,
    /// movable), and blocks whose content disagrees with their fitted type.
    pub mixed_blocks: u64,
    pub content_disagrees: u64,
    /// Local-search swaps made and the table's L1 error before and after (§30.5 item 4).
    pub swaps: u64,
    /// Random swaps of the iterated local search (kicks, whatever their effect on the error;
    /// `swaps` counts the improving swaps, including those of kicked rounds that were undone).
    #[serde(default)]
    pub kicks: u64,
    pub l1_before: u64,
    pub l1_after: u64,
    /// Moves of the annealing (`Search::anneal`), uphill ones included.
    #[serde(default)]
    pub anneal_moves: u64,
    /// Pages by class as read.
    pub pages_by_class: Vec<(String, u64)>,
    /// Which /proc read the fit used: "before" or "after" the pfn read (the one whose
    /// buddyinfo is nearer the cut free chunks, §30.5 item 6).
    #[serde(default)]
    pub fitted_to: String,
    /// Managed pages per zone: zoneinfo's `managed` against present pages that are neither
    /// reserved nor holes (the difference: memblock allocations freed late, e.g. the memmap of
    /// hot-added memory, and pages the kernel counts as managed but marks Reserved).
    #[serde(default)]
    pub managed: Vec<MatchRow>,
    /// Free chunks per (zone, type) and order as grids (the rows of `free_by_type`, for
    /// [`MatchReport::render`]).
    #[serde(default)]
    pub free_grid: Vec<FreeGrid>,
    /// Head + tail runs that were not a power of two, not naturally aligned or larger than
    /// order 10, and tail pages without a head before them: made into order-0 pieces.
    #[serde(default)]
    pub odd_compound: u64,
    /// Order-10 chunks in non-mergeable blocks (HighAtomic, Isolate) split into two order-9
    /// chunks (§30.3 item 3).
    #[serde(default)]
    pub split_order10: u64,
}

/// Free chunks of one (zone, type) per order: captured (pagetypeinfo) and reconstructed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FreeGrid {
    pub zone: String,
    /// A type name ("Unmovable", ...), or "all" for buddyinfo's per-order totals.
    pub mtype: String,
    pub captured: Vec<u64>,
    pub reconstructed: Vec<u64>,
}

/// The reconstructed state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reconstruction {
    pub end_pfn: u64,
    pub zones: Vec<RZone>,
    /// Pfn ranges [start, end) inside zone spans that the simulator marks Reserved (PG_reserved
    /// pages) or Hole (no memmap); everything else in a zone's span is managed and is either in
    /// `free` or in `folios`.
    pub reserved: Vec<[u64; 2]>,
    pub holes: Vec<[u64; 2]>,
    /// One type per pageblock, index = pfn / 512, covering 0..end_pfn, as the number of
    /// `fraglab_types::page::MigrateType` (0 Unmovable, 1 Movable, 2 Reclaimable, 3 HighAtomic,
    /// 4 Isolate).
    pub block_types: Vec<u8>,
    pub free: Vec<RFree>,
    pub folios: Vec<RFolio>,
    pub report: MatchReport,
}

/// Options of the inference.
#[derive(Clone, Debug, PartialEq)]
pub struct ReconstructOptions {
    /// Local-search swaps at most (§30.5 item 4); deterministic for a given seed.
    pub max_swaps: u64,
    pub seed: u64,
    /// Proposals of the annealing per zone whose table is not yet within 1 % in every cell
    /// ([`Search::anneal`]); 0 turns it off.
    pub anneal_proposals: u64,
}

impl Default for ReconstructOptions {
    fn default() -> Self {
        ReconstructOptions {
            max_swaps: 300_000,
            seed: 1,
            anneal_proposals: 2_000_000,
        }
    }
}

/// Pages per pageblock (`pageblock_nr_pages`, order 9 on x86-64).
pub const PAGEBLOCK_PAGES: u64 = 512;
/// The largest buddy order (`MAX_PAGE_ORDER`).
pub const MAX_ORDER: u8 = 10;

const UNMOVABLE: u8 = 0;
const MOVABLE: u8 = 1;
const RECLAIMABLE: u8 = 2;

/// §30.3 items 1–2: cuts the run of free pfns [start, end) greedily into the largest naturally
/// aligned chunks (order ≤ 10) that fit, lowest pfn first. This is the one cut of the run in
/// which no two neighbouring chunks of equal order are buddies, i.e. the cut the buddy
/// allocator's merging (`__free_one_page`) leaves. Item 3 (two order-9 buddies of non-mergeable
/// types stay apart) needs the block types and is applied after the fit.
pub fn cut_free_run(start: u64, end: u64, out: &mut Vec<RFree>) {
    let mut p = start;
    while p < end {
        let mut o = MAX_ORDER;
        while p & ((1u64 << o) - 1) != 0 || p + (1u64 << o) > end {
            o -= 1;
        }
        out.push(RFree { pfn: p, order: o });
        p += 1u64 << o;
    }
}

/// A small deterministic generator (splitmix64) for the local search.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The error of one cell of the free table: |reconstructed − captured|, or for a cell the
/// kernel printed capped (">100000") only the shortfall.
fn cell_err(pred: i64, capt: i64, capped: bool) -> i64 {
    if capped {
        (capt - pred).max(0)
    } else {
        (pred - capt).abs()
    }
}

/// A fitting unit: one pageblock, or the two pageblocks an order-10 free chunk covers (its
/// two blocks have one type: `__free_one_page` gives a merged buddy the type of the block it
/// merges into, so the fit moves them together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    pub first_block: u64,
    /// Blocks: 1, or 2 under an order-10 free chunk.
    pub size: u8,
    /// Index of its zone among the populated zones.
    pub zone: usize,
    /// Free chunks in it per order.
    pub hist: [i64; 11],
}

fn class_of(b: u8) -> PageClass {
    PageClass::of(b).unwrap_or(PageClass::Kernel)
}

fn push_range(v: &mut Vec<[u64; 2]>, p: u64) {
    match v.last_mut() {
        Some(r) if r[1] == p => r[1] = p + 1,
        _ => v.push([p, p + 1]),
    }
}

/// Infers the initial state from a snapshot (docs/model §30.3–§30.5), in thirteen stages,
/// each a function of its own:
///
/// 1. [`check_geometry`] (§30.5 item 1): the page bytes cover `end_pfn`, every byte has a
///    class, the /proc reads show a fully initialised memmap, and the populated zones lie
///    within `end_pfn` without overlapping, with managed ≤ present ≤ spanned.
/// 2. [`pages_by_class`]: pages per class, for the report.
/// 3. [`scan_zones`] (§30.3, §30.5 items 1 and 3): per zone, holes and reserved ranges, free
///    runs cut by [`cut_free_run`], folios from head + tail runs (a power of two, naturally
///    aligned, at most order 10; anything else is counted in `odd_compound` and made order-0
///    pieces; Offline, Kernel and Unflagged pages are Kernel order-0 pages each — unflagged
///    pages include free pages on PCP lists and under page reporting, §30.2.3: simplified to
///    allocations), and per-block content evidence.
/// 4. [`choose_read`]: which bracketing /proc read is fitted (see below).
/// 5. [`fit_tables`]: that read's pagetypeinfo and buddyinfo, parsed strictly.
/// 6. [`fitting_units`]: the blocks pagetypeinfo counts (`pagetypeinfo_showblockcount_print`:
///    from the zone's start_pfn in steps of 512 whose pfn has a memmap, not Hole) as units: a
///    block, or the two blocks under one order-10 free chunk.
/// 7. [`page_owner_fixed`] (§30.4): units whose type page_owner named, never swapped.
/// 8. [`rank_types`] (§30.5 item 4): units ranked by content evidence, pagetypeinfo's exact
///    per-zone block counts imposed by that ranking (Unmovable, then Reclaimable, HighAtomic,
///    Isolate; Movable takes the rest).
/// 9. [`free_tables`]: the free-chunk table per (zone, type, order), captured and predicted.
/// 10. [`search_types`]: a seeded local search swapping the types of two units of one zone and
///     size whenever that lowers the table's L1 error, then, in a zone where some cell is still
///     off by more than 1 %, simulated annealing (`Search::anneal`).
/// 11. [`unit_block_types`]: the fitted type of every pageblock.
/// 12. [`split_nonmergeable`] (§30.3 item 3) and [`slab_kinds`]: order-10 chunks in HighAtomic
///     or Isolate blocks become two order-9 chunks; slab in a Reclaimable block is reclaimable.
/// 13. [`match_report`] and [`mixed_blocks`]: the captured tables against the result.
///
/// Refused (an error naming the zone and the numbers) when either bracketing /proc read shows
/// a zone whose memmap is not fully initialised ([`uninitialised_memory`]).
///
/// Which read is fitted: the snapshot brackets the pfn read with two /proc reads; the one whose
/// buddyinfo is nearer (L1 over zones and orders) the cut chunks is used, "after" on a tie (on
/// S2 orders 2–10 of the read after matched the cut exactly, §30.3). Measured on the S2 fixture
/// (tests/data): the read after is 28 chunks from the cut (Normal orders 0–2 only), the read
/// before 4 379 (Normal had 2 350 fewer order-0 chunks: memory was being freed around the
/// capture); fitted to the read before, the free table's L1 stays at 4 351, to the read after it
/// reaches 28, the floor the per-order churn leaves.
pub fn reconstruct(snap: &Snapshot, opt: &ReconstructOptions) -> Result<Reconstruction, String> {
    let h = &snap.header;
    let spans = check_geometry(snap)?;
    let by_class = pages_by_class(&snap.pages);
    let scan = scan_zones(snap, &spans);
    let fitted_to = choose_read(h, &spans, &scan.free);
    let read = if fitted_to == "before" {
        &h.proc_before
    } else {
        &h.proc_after
    };
    let (pti, buddy) = fit_tables(read, fitted_to)?;
    let nblocks = h.end_pfn.div_ceil(PAGEBLOCK_PAGES) as usize;
    let units = fitting_units(&snap.pages, &spans, &scan.free, nblocks);
    let fixed = page_owner_fixed(h.page_owner_blocks.as_deref(), &units);
    let utype = rank_types(&units, &scan.evidence, &fixed, &spans, &pti);
    let tables = free_tables(&spans, &pti, &units, &utype);
    let fit = search_types(&units, &fixed, utype, &tables, opt);
    let block_types = unit_block_types(&units, &fit.utype, nblocks);
    let (free, split_order10) = split_nonmergeable(scan.free, &block_types);
    let mut folios = scan.folios;
    slab_kinds(&mut folios, &scan.slab_folios, &block_types);
    let (mixed, disagrees) = mixed_blocks(&scan.evidence, &units.block_zone, &block_types);
    let mut report = match_report(
        &spans,
        &scan.zones,
        &pti,
        &buddy,
        &free,
        &units.block_zone,
        &block_types,
    );
    report.fitted_to = fitted_to.to_string();
    report.swaps = fit.swaps;
    report.kicks = fit.kicks;
    report.anneal_moves = fit.annealed;
    report.l1_before = tables.l1(&tables.pred);
    report.l1_after = tables.l1(&fit.pred);
    report.odd_compound = scan.odd_compound;
    report.split_order10 = split_order10;
    report.mixed_blocks = mixed;
    report.content_disagrees = disagrees;
    report.pages_by_class = PageClass::ALL
        .iter()
        .map(|c| (c.name().to_string(), by_class[*c as usize]))
        .collect();
    Ok(Reconstruction {
        end_pfn: h.end_pfn,
        zones: scan.zones,
        reserved: scan.reserved,
        holes: scan.holes,
        block_types,
        free,
        folios,
        report,
    })
}

/// Stage 1: the snapshot's populated zones in pfn order, or why it cannot be reconstructed: a
/// page byte count other than `end_pfn`, a /proc read showing uninitialised memory (deferred
/// struct page init: its pfns read as unflagged pages), a page byte without a class, a zone
/// beyond `end_pfn`, with managed > present or present > spanned, overlapping zones, or none.
pub fn check_geometry(snap: &Snapshot) -> Result<Vec<&ZoneSpan>, String> {
    let h = &snap.header;
    let end = h.end_pfn;
    if snap.pages.len() as u64 != end {
        return Err(format!(
            "snapshot has {} page bytes for end_pfn {end}",
            snap.pages.len()
        ));
    }
    for read in [&h.proc_before, &h.proc_after] {
        if let (Some(zi), Some(pti)) = (read.get("zoneinfo"), read.get("pagetypeinfo")) {
            if let Some(why) = uninitialised_memory(zi, pti) {
                return Err(format!("the snapshot was taken too soon after boot: {why}"));
            }
        }
    }
    if let Some(bad) = snap.pages.iter().position(|&b| PageClass::of(b).is_none()) {
        return Err(format!("page byte of pfn {bad} has no class: corrupt"));
    }
    let mut spans: Vec<&ZoneSpan> = h.zones.iter().filter(|z| z.spanned > 0).collect();
    spans.sort_by_key(|z| z.start_pfn);
    for (i, z) in spans.iter().enumerate() {
        let zend = z.start_pfn.checked_add(z.spanned).filter(|&e| e <= end);
        let Some(zend) = zend else {
            return Err(format!(
                "zone {} spans {} pages from pfn {}, beyond the snapshot's end_pfn {end}",
                z.name, z.spanned, z.start_pfn
            ));
        };
        if z.managed > z.present || z.present > z.spanned {
            return Err(format!(
                "zone {} has managed {}, present {}, spanned {}: managed ≤ present ≤ spanned expected",
                z.name, z.managed, z.present, z.spanned
            ));
        }
        if i > 0 && spans[i - 1].start_pfn + spans[i - 1].spanned > z.start_pfn {
            return Err(format!("zones {} and {} overlap", spans[i - 1].name, z.name));
        }
        debug_assert!(zend > z.start_pfn);
    }
    if spans.is_empty() {
        return Err("snapshot has no populated zone".into());
    }
    Ok(spans)
}

/// Stage 2: pages per class (index = `PageClass as usize`).
pub fn pages_by_class(pages: &[u8]) -> [u64; 12] {
    let mut by_class = [0u64; 12];
    for &b in pages {
        by_class[(b & CLASS_MASK) as usize] += 1;
    }
    by_class
}

/// What stage 3 ([`scan_zones`]) reads from the page bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZoneScan {
    pub zones: Vec<RZone>,
    pub holes: Vec<[u64; 2]>,
    pub reserved: Vec<[u64; 2]>,
    /// Free chunks as cut, before the fit (order-10 chunks not yet split).
    pub free: Vec<RFree>,
    /// Folios; slab ones are `SlabUnreclaimable` until [`slab_kinds`].
    pub folios: Vec<RFolio>,
    /// Indexes in `folios` of the slab folios.
    pub slab_folios: Vec<usize>,
    /// Pages of each class per pageblock (index = pfn / 512; holes are not counted).
    pub evidence: Vec<[u32; 12]>,
    pub odd_compound: u64,
}

/// Stage 3: each zone's pfns read in order: holes and reserved ranges, free runs cut into
/// chunks ([`cut_free_run`]), folios, and the classes seen per block. A zone's managed pages
/// are its span less its holes and reserved pages.
pub fn scan_zones(snap: &Snapshot, spans: &[&ZoneSpan]) -> ZoneScan {
    let nblocks = snap.header.end_pfn.div_ceil(PAGEBLOCK_PAGES) as usize;
    let mut s = ZoneScan {
        evidence: vec![[0u32; 12]; nblocks],
        ..Default::default()
    };
    for z in spans {
        let unusable = scan_zone(snap, z.start_pfn, z.start_pfn + z.spanned, &mut s);
        s.zones.push(RZone {
            node: z.node,
            name: z.name.clone(),
            start_pfn: z.start_pfn,
            spanned: z.spanned,
            present: z.present,
            managed: z.spanned - unusable,
        });
    }
    s
}

/// One zone [start, zend) of [`scan_zones`]; returns its unusable (hole and reserved) pages.
fn scan_zone(snap: &Snapshot, start: u64, zend: u64, s: &mut ZoneScan) -> u64 {
    let pages = &snap.pages;
    let mut unusable = 0u64;
    let mut p = start;
    while p < zend {
        let b = pages[p as usize];
        let c = class_of(b);
        let block = (p / PAGEBLOCK_PAGES) as usize;
        match c {
            PageClass::Hole => {
                push_range(&mut s.holes, p);
                unusable += 1;
                p += 1;
            }
            PageClass::Reserved => {
                push_range(&mut s.reserved, p);
                s.evidence[block][c as usize] += 1;
                unusable += 1;
                p += 1;
            }
            PageClass::Free => {
                let run = p;
                while p < zend && class_of(pages[p as usize]) == PageClass::Free {
                    s.evidence[(p / PAGEBLOCK_PAGES) as usize][c as usize] += 1;
                    p += 1;
                }
                cut_free_run(run, p, &mut s.free);
            }
            PageClass::Offline | PageClass::Kernel | PageClass::Unflagged => {
                s.evidence[block][c as usize] += 1;
                s.folios.push(folio(p, 0, RKind::Kernel, b));
                p += 1;
            }
            _ => p = scan_folio(snap, p, zend, c, s),
        }
    }
    unusable
}

/// The folio of class `c` whose head (or stray tail) is at `p`, with the TAIL pages of its
/// class after it (at most 2048): one folio when the run is a power of two, naturally aligned,
/// at most order 10 and starts with a head; order-0 pieces otherwise (counted in
/// `odd_compound`). Returns the pfn after the run.
fn scan_folio(snap: &Snapshot, p: u64, zend: u64, c: PageClass, s: &mut ZoneScan) -> u64 {
    let pages = &snap.pages;
    let b = pages[p as usize];
    let mut q = p + 1;
    while q < zend && q - p < 2048 && pages[q as usize] & TAIL != 0 && class_of(pages[q as usize]) == c {
        q += 1;
    }
    let n = q - p;
    for x in p..q {
        s.evidence[(x / PAGEBLOCK_PAGES) as usize][c as usize] += 1;
    }
    let kind = match c {
        PageClass::Anon => RKind::Anon,
        PageClass::File => RKind::File,
        PageClass::Shmem => RKind::Shmem,
        PageClass::Slab => RKind::SlabUnreclaimable,
        PageClass::PageTable => RKind::PageTable,
        _ => RKind::Hugetlb,
    };
    let whole = b & TAIL == 0 && n.is_power_of_two() && n <= 1 << MAX_ORDER && p.is_multiple_of(n);
    let pieces: Vec<(u64, u8)> = if whole {
        vec![(p, n.trailing_zeros() as u8)]
    } else {
        s.odd_compound += 1;
        (p..q).map(|x| (x, 0)).collect()
    };
    for (x, o) in pieces {
        if kind == RKind::SlabUnreclaimable {
            s.slab_folios.push(s.folios.len());
        }
        let mut f = folio(x, o, kind, pages[x as usize]);
        f.dirty = matches!(kind, RKind::File | RKind::Shmem) && snap.is_dirty(x);
        s.folios.push(f);
    }
    q
}

/// Stage 4: which bracketing /proc read to fit, "before" or "after": the one whose buddyinfo
/// is nearer (L1 over zones and orders) the cut chunks `free`, "after" on a tie; "before" when
/// only it has a buddyinfo, or when the read after has no pagetypeinfo.
pub fn choose_read(h: &SnapshotHeader, spans: &[&ZoneSpan], free: &[RFree]) -> &'static str {
    let cut_by_order: Vec<[u64; 11]> = spans
        .iter()
        .map(|z| {
            let mut a = [0u64; 11];
            for f in free
                .iter()
                .filter(|f| f.pfn >= z.start_pfn && f.pfn < z.start_pfn + z.spanned)
            {
                a[f.order as usize] += 1;
            }
            a
        })
        .collect();
    let buddy_l1 = |which: &std::collections::BTreeMap<String, String>| -> Option<u64> {
        let bi = parse_buddyinfo_nodes(which.get("buddyinfo")?);
        Some(
            spans
                .iter()
                .zip(&cut_by_order)
                .map(|(z, cut)| {
                    let cap = bi.get(&z.key()).copied().unwrap_or([0; 11]);
                    (0..11).fold(0u64, |a, o| a.saturating_add(cap[o].abs_diff(cut[o])))
                })
                .fold(0u64, u64::saturating_add),
        )
    };
    let use_before = match (buddy_l1(&h.proc_before), buddy_l1(&h.proc_after)) {
        (Some(b), Some(a)) => b < a,
        (Some(_), None) => true,
        _ => false,
    } || !h.proc_after.contains_key("pagetypeinfo");
    if use_before {
        "before"
    } else {
        "after"
    }
}

/// Per-zone pagetypeinfo tables by node and zone name.
pub type PagetypeTables = BTreeMap<ZoneKey, PagetypeZone>;
/// Per-zone buddyinfo counts by node and zone name.
pub type BuddyTables = BTreeMap<ZoneKey, [u64; 11]>;

/// Stage 5: the fitted read's pagetypeinfo (required) and buddyinfo (optional), each parsed
/// strictly ([`check_pagetypeinfo`], [`check_buddyinfo`]): a line the kernel does not print is
/// an error naming the read and the line.
pub fn fit_tables(
    read: &BTreeMap<String, String>,
    which: &str,
) -> Result<(PagetypeTables, BuddyTables), String> {
    let pti = read
        .get("pagetypeinfo")
        .ok_or("the snapshot has no /proc/pagetypeinfo read: block types cannot be fitted")?;
    let pti = check_pagetypeinfo(pti)
        .map_err(|(line, why)| format!("/proc/pagetypeinfo read {which} the pfn read, line {line}: {why}"))?;
    let buddy = check_buddyinfo(read.get("buddyinfo").map(String::as_str).unwrap_or(""))
        .map_err(|(line, why)| format!("/proc/buddyinfo read {which} the pfn read, line {line}: {why}"))?;
    Ok((pti, buddy))
}

/// The fitting units of stage 6.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Units {
    /// Each pageblock's zone (index in the populated zones), `usize::MAX` for blocks
    /// pagetypeinfo does not count.
    pub block_zone: Vec<usize>,
    pub units: Vec<Unit>,
    /// Each pageblock's unit, `u32::MAX` for none.
    pub unit_of: Vec<u32>,
}

/// Stage 6: the counted blocks (from each zone's start_pfn in steps of 512, where the pfn is
/// not a Hole) and the units the fit moves: a block, or two blocks of one zone under an
/// order-10 free chunk (its two blocks have one type: `__free_one_page` gives a merged buddy
/// the type of the block it merges into). Each unit has the histogram of the free chunks in it.
pub fn fitting_units(pages: &[u8], spans: &[&ZoneSpan], free: &[RFree], nblocks: usize) -> Units {
    let mut block_zone = vec![usize::MAX; nblocks];
    for (zi, z) in spans.iter().enumerate() {
        let mut p = z.start_pfn;
        while p < z.start_pfn + z.spanned {
            if class_of(pages[p as usize]) != PageClass::Hole {
                block_zone[(p / PAGEBLOCK_PAGES) as usize] = zi;
            }
            p += PAGEBLOCK_PAGES;
        }
    }
    let mut pair_start = vec![false; nblocks];
    for f in free.iter().filter(|f| f.order == MAX_ORDER) {
        pair_start[(f.pfn / PAGEBLOCK_PAGES) as usize] = true;
    }
    let mut units: Vec<Unit> = Vec::new();
    let mut unit_of = vec![u32::MAX; nblocks];
    let mut b = 0usize;
    while b < nblocks {
        let zi = block_zone[b];
        if zi == usize::MAX {
            b += 1;
            continue;
        }
        let size = if pair_start[b] && b + 1 < nblocks && block_zone[b + 1] == zi {
            2
        } else {
            1
        };
        for k in 0..size {
            unit_of[b + k] = units.len() as u32;
        }
        units.push(Unit {
            first_block: b as u64,
            size: size as u8,
            zone: zi,
            hist: [0; 11],
        });
        b += size;
    }
    for f in free {
        let u = unit_of[(f.pfn / PAGEBLOCK_PAGES) as usize];
        if u != u32::MAX {
            units[u as usize].hist[f.order as usize] += 1;
        }
    }
    Units {
        block_zone,
        units,
        unit_of,
    }
}

/// Stage 7 (§30.4): the type page_owner gave each unit's block, if any (a block outside the
/// units or of an unknown type name is ignored).
pub fn page_owner_fixed(page_owner: Option<&[(u64, String)]>, units: &Units) -> Vec<Option<u8>> {
    let mut fixed: Vec<Option<u8>> = vec![None; units.units.len()];
    for (blk, t) in page_owner.unwrap_or(&[]) {
        let u = usize::try_from(*blk).ok().and_then(|b| units.unit_of.get(b));
        if let (Some(&u), Some(t)) = (u, type_index(t)) {
            if u != u32::MAX {
                fixed[u as usize] = Some(t as u8);
            }
        }
    }
    fixed
}

/// Stage 8 (§30.5 item 4): each unit's first type. Fixed units keep page_owner's type; per
/// zone and type (Unmovable, Reclaimable, HighAtomic, Isolate), the units whose content says
/// that type most (PGTABLE, RESERVED, kernel and bare pages say Unmovable; SLAB Unmovable or
/// Reclaimable; LRU/THP/HUGE/OFFLINE Movable) take it until pagetypeinfo's block count is
/// reached; Movable (the boot default) takes the rest.
pub fn rank_types(
    units: &Units,
    evidence: &[[u32; 12]],
    fixed: &[Option<u8>],
    spans: &[&ZoneSpan],
    pti: &PagetypeTables,
) -> Vec<u8> {
    let units = &units.units;
    let score = |u: &Unit, t: u8| -> i64 {
        let mut s = 0i64;
        for k in 0..u.size as u64 {
            let e = &evidence[(u.first_block + k) as usize];
            let g = |c: PageClass| e[c as usize] as i64;
            let kern = g(PageClass::PageTable) + g(PageClass::Reserved) + g(PageClass::Kernel);
            let movable = g(PageClass::Anon)
                + g(PageClass::File)
                + g(PageClass::Shmem)
                + g(PageClass::Hugetlb)
                + g(PageClass::Offline);
            let slab = g(PageClass::Slab);
            s += match t {
                RECLAIMABLE => 4 * slab - 2 * kern - movable,
                _ => 4 * kern + 2 * slab + g(PageClass::Unflagged) - movable,
            };
        }
        s
    };
    let mut utype = vec![MOVABLE; units.len()];
    let mut assigned = vec![false; units.len()];
    for (u, f) in fixed.iter().enumerate() {
        if let Some(t) = f {
            utype[u] = *t;
            assigned[u] = true;
        }
    }
    for (zi, z) in spans.iter().enumerate() {
        let target = pti.get(&z.key()).map(|p| p.blocks).unwrap_or_default();
        for t in [UNMOVABLE, RECLAIMABLE, 3, 4] {
            let have: u64 = (0..units.len())
                .filter(|&u| units[u].zone == zi && assigned[u] && utype[u] == t)
                .map(|u| units[u].size as u64)
                .sum();
            let mut need = target[t as usize].saturating_sub(have);
            let mut cand: Vec<(i64, usize)> = (0..units.len())
                .filter(|&u| units[u].zone == zi && !assigned[u])
                .map(|u| (-score(&units[u], t), u))
                .collect();
            cand.sort_unstable();
            for (_, u) in cand {
                if need == 0 {
                    break;
                }
                if units[u].size as u64 <= need {
                    utype[u] = t;
                    assigned[u] = true;
                    need -= units[u].size as u64;
                }
            }
        }
    }
    utype
}

/// The largest captured count the fit takes (see [`free_tables`]).
const MAX_CAPTURED: u64 = 1 << 42;

/// The free-chunk table of stage 9, per (zone, type, order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FreeTables {
    /// pagetypeinfo's counts, and whether each was printed capped (">100000").
    pub capt: Vec<[[i64; 11]; 5]>,
    pub capped: Vec<[[bool; 11]; 5]>,
    /// The chunks of the units of each type, for the types the units have.
    pub pred: Vec<[[i64; 11]; 5]>,
}

impl FreeTables {
    /// The L1 error of `pred` against the captured table (a capped cell counts its shortfall
    /// only).
    pub fn l1(&self, pred: &[[[i64; 11]; 5]]) -> u64 {
        let mut s = 0i64;
        for zi in 0..self.capt.len() {
            for t in 0..5 {
                for o in 0..11 {
                    s = s.saturating_add(cell_err(
                        pred[zi][t][o],
                        self.capt[zi][t][o],
                        self.capped[zi][t][o],
                    ));
                }
            }
        }
        s as u64
    }
}

/// Stage 9: the captured table from pagetypeinfo and the predicted one from the units' chunk
/// histograms under the types `utype`.
pub fn free_tables(spans: &[&ZoneSpan], pti: &PagetypeTables, units: &Units, utype: &[u8]) -> FreeTables {
    let nz = spans.len();
    let mut t = FreeTables {
        capt: vec![[[0i64; 11]; 5]; nz],
        capped: vec![[[false; 11]; 5]; nz],
        pred: vec![[[0i64; 11]; 5]; nz],
    };
    for (zi, z) in spans.iter().enumerate() {
        if let Some(p) = pti.get(&z.key()) {
            for ty in 0..5 {
                for o in 0..11 {
                    // A count beyond 2^42 (more chunks than a 4 PiB zone has pages: corrupt)
                    // is clamped there, so that the search's error sums cannot overflow.
                    t.capt[zi][ty][o] = p.free[ty][o].min(MAX_CAPTURED) as i64;
                    t.capped[zi][ty][o] = p.capped[ty][o];
                }
            }
        }
    }
    for (u, un) in units.units.iter().enumerate() {
        for o in 0..11 {
            t.pred[un.zone][utype[u] as usize][o] += un.hist[o];
        }
    }
    t
}

/// What stage 10 ([`search_types`]) found.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeFit {
    pub utype: Vec<u8>,
    pub pred: Vec<[[i64; 11]; 5]>,
    pub swaps: u64,
    pub kicks: u64,
    pub annealed: u64,
}

/// Stage 10 (§30.5 item 4), see [`Search`]: from the ranked types `utype`, two searches, zone
/// by zone the better: (a) sweeps and the iterated local search (`Search::run`); (b)
/// `max_swaps` random proposals, then sweeps (on S2 their local minima differ: (a) fits Normal
/// better, (b) DMA32 exactly); then annealing, zone by zone, on the error beyond 1 % of each
/// cell (`Search::anneal`). Fixed units are never swapped.
pub fn search_types(
    units: &Units,
    fixed: &[Option<u8>],
    utype: Vec<u8>,
    tables: &FreeTables,
    opt: &ReconstructOptions,
) -> TypeFit {
    let nz = tables.capt.len();
    let units = &units.units;
    let mut search = Search {
        units,
        lists: (0..nz).map(|_| Default::default()).collect(),
        pos: vec![0usize; units.len()],
        utype,
        pred: tables.pred.clone(),
        capt: &tables.capt,
        capped: &tables.capped,
        l1: tables.l1(&tables.pred) as i64,
        swaps: 0,
        kicks: 0,
        rng: Rng(opt.seed ^ 0x5eed_f1a6_0000_0021),
        zone_units: vec![Vec::new(); nz],
    };
    for (u, un) in units.iter().enumerate() {
        if fixed[u].is_some() {
            continue;
        }
        let l = &mut search.lists[un.zone][search.utype[u] as usize][un.size as usize - 1];
        search.pos[u] = l.len();
        l.push(u as u32);
        search.zone_units[un.zone].push(u as u32);
    }
    let mut a = search.clone();
    a.run(opt.max_swaps);
    let mut b = search;
    b.random(opt.max_swaps, opt.max_swaps);
    while b.swaps < opt.max_swaps && b.sweep(None, opt.max_swaps) {}
    for zi in 0..nz {
        if b.zone_l1(zi) < a.zone_l1(zi) {
            let st = b.save(zi);
            a.restore(zi, &st);
        }
    }
    let mut annealed = 0u64;
    for zi in 0..nz {
        annealed += a.anneal(zi, opt.anneal_proposals);
    }
    TypeFit {
        swaps: a.swaps + b.swaps,
        kicks: a.kicks,
        annealed,
        utype: a.utype,
        pred: a.pred,
    }
}

/// Stage 11: each pageblock's type, its unit's (Movable for blocks outside the units).
pub fn unit_block_types(units: &Units, utype: &[u8], nblocks: usize) -> Vec<u8> {
    let mut block_types = vec![MOVABLE; nblocks];
    for (u, un) in units.units.iter().enumerate() {
        for k in 0..un.size as u64 {
            block_types[(un.first_block + k) as usize] = utype[u];
        }
    }
    block_types
}

/// Stage 12 (§30.3 item 3): order-10 chunks whose block is HighAtomic or Isolate (types that
/// never merge) become two order-9 chunks; returns the chunks and how many were split.
pub fn split_nonmergeable(free: Vec<RFree>, block_types: &[u8]) -> (Vec<RFree>, u64) {
    let mut split = 0u64;
    let mut cut = Vec::with_capacity(free.len());
    for f in free {
        let t = block_types[(f.pfn / PAGEBLOCK_PAGES) as usize];
        if f.order == MAX_ORDER && (t == 3 || t == 4) {
            split += 1;
            cut.push(RFree { pfn: f.pfn, order: 9 });
            cut.push(RFree {
                pfn: f.pfn + PAGEBLOCK_PAGES,
                order: 9,
            });
        } else {
            cut.push(f);
        }
    }
    (cut, split)
}

/// Stage 12: slab folios (`slab_folios`, indexes in `folios`) in a Reclaimable block are
/// `SlabReclaimable`.
pub fn slab_kinds(folios: &mut [RFolio], slab_folios: &[usize], block_types: &[u8]) {
    for &i in slab_folios {
        if block_types[(folios[i].pfn / PAGEBLOCK_PAGES) as usize] == RECLAIMABLE {
            folios[i].kind = RKind::SlabReclaimable;
        }
    }
}

/// Stage 13: the match report's tables — blocks per (zone, type), free chunks per (zone, type,
/// order) against pagetypeinfo and per (zone, order) against buddyinfo, their grids, and
/// managed pages per zone against zoneinfo. The fit's figures are filled in by the caller.
pub fn match_report(
    spans: &[&ZoneSpan],
    zones: &[RZone],
    pti: &PagetypeTables,
    buddy: &BuddyTables,
    free: &[RFree],
    block_zone: &[usize],
    block_types: &[u8],
) -> MatchReport {
    let mut report = MatchReport::default();
    let mut final_free = vec![[[0u64; 11]; 5]; spans.len()];
    for f in free {
        let b = (f.pfn / PAGEBLOCK_PAGES) as usize;
        let zi = match block_zone[b] {
            usize::MAX => match spans
                .iter()
                .position(|z| f.pfn >= z.start_pfn && f.pfn < z.start_pfn + z.spanned)
            {
                Some(z) => z,
                None => continue,
            },
            zi => zi,
        };
        final_free[zi][block_types[b] as usize][f.order as usize] += 1;
    }
    for (zi, z) in spans.iter().enumerate() {
        let p = pti.get(&z.key()).cloned().unwrap_or_default();
        let label = z.label();
        let mut blocks = [0i64; 5];
        for (b, &bz) in block_zone.iter().enumerate() {
            if bz == zi {
                blocks[block_types[b] as usize] += 1;
            }
        }
        for t in 0..5 {
            type_rows(&mut report, &label, t, &p, blocks[t], &final_free[zi][t]);
        }
        let bi = buddy.get(&z.key()).copied().unwrap_or([0; 11]);
        let mut all = [0u64; 11];
        for t in 0..5 {
            for o in 0..11 {
                all[o] += final_free[zi][t][o];
            }
        }
        for o in 0..11 {
            report.free_by_order.push(MatchRow {
                what: format!("{label} free order {o} (chunks)"),
                captured: bi[o] as i64,
                reconstructed: all[o] as i64,
            });
        }
        report.free_grid.push(FreeGrid {
            zone: label.clone(),
            mtype: "all".into(),
            captured: bi.to_vec(),
            reconstructed: all.to_vec(),
        });
        report.managed.push(MatchRow {
            what: format!("{label} managed pages"),
            captured: z.managed as i64,
            reconstructed: zones[zi].managed as i64,
        });
    }
    report
}

/// The rows of zone `zone`, type `t` in the match report: its blocks, its non-empty free
/// cells and its grid.
fn type_rows(
    report: &mut MatchReport,
    zone: &str,
    t: usize,
    p: &PagetypeZone,
    blocks: i64,
    free: &[u64; 11],
) {
    report.blocks.push(MatchRow {
        what: format!("{zone} blocks {}", TYPE_NAMES[t]),
        captured: p.blocks[t] as i64,
        reconstructed: blocks,
    });
    for o in 0..11 {
        if p.free[t][o] > 0 || free[o] > 0 {
            report.free_by_type.push(MatchRow {
                what: format!("{zone} free {} order {o} (chunks)", TYPE_NAMES[t]),
                captured: p.free[t][o] as i64,
                reconstructed: free[o] as i64,
            });
        }
    }
    if p.blocks[t] > 0 || blocks > 0 || p.free[t].iter().any(|&n| n > 0) {
        report.free_grid.push(FreeGrid {
            zone: zone.to_string(),
            mtype: TYPE_NAMES[t].to_string(),
            captured: p.free[t].to_vec(),
            reconstructed: free.to_vec(),
        });
    }
}

/// Stage 13: mixed blocks (allocated pages of more than one mobility: slab counts Reclaimable
/// in a Reclaimable block, Unmovable elsewhere; unflagged pages are not counted, they may be
/// free PCP pages) and blocks whose content disagrees with their fitted type, among the
/// counted blocks.
pub fn mixed_blocks(evidence: &[[u32; 12]], block_zone: &[usize], block_types: &[u8]) -> (u64, u64) {
    let (mut mixed, mut disagrees) = (0u64, 0u64);
    for (b, &bz) in block_zone.iter().enumerate() {
        if bz == usize::MAX {
            continue;
        }
        let e = &evidence[b];
        let g = |c: PageClass| e[c as usize] > 0;
        let t = block_types[b];
        let slab = g(PageClass::Slab);
        let unm = g(PageClass::PageTable) || g(PageClass::Kernel) || (slab && t != RECLAIMABLE);
        let rec = slab && t == RECLAIMABLE;
        let mov = g(PageClass::Anon)
            || g(PageClass::File)
            || g(PageClass::Shmem)
            || g(PageClass::Hugetlb)
            || g(PageClass::Offline);
        if (unm as u8 + rec as u8 + mov as u8) > 1 {
            mixed += 1;
        }
        let own = match t {
            UNMOVABLE => unm,
            MOVABLE => mov,
            RECLAIMABLE => rec,
            _ => true,
        };
        if (unm || rec || mov) && !own {
            disagrees += 1;
        }
    }
    (mixed, disagrees)
}

/// The block-type fit's local search (§30.5 item 4): swaps of the types of two units of one
/// zone and size.
///
/// Best-improvement sweeps: every swap that changes anything pairs units of two different
/// types, so one of them is of a type other than the zone's most common one; for each such unit
/// u, in an order rotated by the seed, take the unit v of another type whose swap lowers the L1
/// error most, and swap if it does; repeat until a sweep swaps nothing. Then, per zone, an
/// iterated local search ([`Search::run`]) to leave the local minimum. The error's change is
/// computed from the two units' chunk counts only (at most 22 cells), never by a recount.
#[derive(Clone)]
struct Search<'a> {
    units: &'a [Unit],
    /// Swappable (not page_owner-fixed) units per (zone, type, size − 1), and each unit's
    /// index in its list.
    lists: Vec<[[Vec<u32>; 2]; 5]>,
    pos: Vec<usize>,
    utype: Vec<u8>,
    pred: Vec<[[i64; 11]; 5]>,
    capt: &'a [[[i64; 11]; 5]],
    capped: &'a [[[bool; 11]; 5]],
    l1: i64,
    swaps: u64,
    kicks: u64,
    rng: Rng,
    /// The swappable units of each zone.
    zone_units: Vec<Vec<u32>>,
}

impl Search<'_> {
    fn delta(&self, zi: usize, ta: usize, tb: usize, hu: &[i64; 11], hv: &[i64; 11]) -> i64 {
        self.delta_by(cell_err, zi, ta, tb, hu, hv)
    }

    /// The change of `cost` summed over the cells of zone `zi` when a unit of type `ta` with
    /// free histogram `hu` and one of type `tb` with `hv` trade types.
    fn delta_by(
        &self,
        cost: fn(i64, i64, bool) -> i64,
        zi: usize,
        ta: usize,
        tb: usize,
        hu: &[i64; 11],
        hv: &[i64; 11],
    ) -> i64 {
        let mut delta = 0i64;
        for o in 0..11 {
            let d = hv[o] - hu[o];
            if d == 0 {
                continue;
            }
            let (pa, pb) = (self.pred[zi][ta][o], self.pred[zi][tb][o]);
            let (ca, cb) = (self.capt[zi][ta][o], self.capt[zi][tb][o]);
            let (ka, kb) = (self.capped[zi][ta][o], self.capped[zi][tb][o]);
            delta += cost(pa + d, ca, ka) - cost(pa, ca, ka);
            delta += cost(pb - d, cb, kb) - cost(pb, cb, kb);
        }
        delta
    }

    fn swap(&mut self, u: usize, v: usize, delta: i64) {
        let (zi, s) = (self.units[u].zone, self.units[u].size as usize - 1);
        let (ta, tb) = (self.utype[u] as usize, self.utype[v] as usize);
        let (hu, hv) = (self.units[u].hist, self.units[v].hist);
        for o in 0..11 {
            let d = hv[o] - hu[o];
            self.pred[zi][ta][o] += d;
            self.pred[zi][tb][o] -= d;
        }
        let (pu, pv) = (self.pos[u], self.pos[v]);
        self.lists[zi][ta][s][pu] = v as u32;
        self.lists[zi][tb][s][pv] = u as u32;
        self.pos[u] = pv;
        self.pos[v] = pu;
        self.utype[u] = tb as u8;
        self.utype[v] = ta as u8;
        self.l1 += delta;
        if delta < 0 {
            self.swaps += 1;
        }
    }

    /// One best-improvement sweep over the units of zone `only` (all zones if None); false
    /// if it swapped nothing.
    fn sweep(&mut self, only: Option<usize>, max_swaps: u64) -> bool {
        let mut movers: Vec<u32> = Vec::new();
        for (zi, l) in self.lists.iter().enumerate() {
            if only.is_some_and(|z| z != zi) {
                continue;
            }
            let major = (0..5)
                .max_by_key(|&t| (l[t][0].len() + 2 * l[t][1].len(), std::cmp::Reverse(t)))
                .unwrap_or(1);
            for t in (0..5).filter(|&t| t != major) {
                movers.extend_from_slice(&l[t][0]);
                movers.extend_from_slice(&l[t][1]);
            }
        }
        if movers.is_empty() {
            return false;
        }
        movers.sort_unstable();
        let rot = self.rng.below(movers.len());
        movers.rotate_left(rot);
        let mut swapped = false;
        for &u in &movers {
            if self.swaps >= max_swaps {
                break;
            }
            let u = u as usize;
            let (zi, ta, s) = (
                self.units[u].zone,
                self.utype[u] as usize,
                self.units[u].size as usize - 1,
            );
            let hu = self.units[u].hist;
            let mut best: Option<(i64, usize)> = None;
            for tb in (0..5).filter(|&t| t != ta) {
                for &v in &self.lists[zi][tb][s] {
                    let hv = &self.units[v as usize].hist;
                    if *hv == hu {
                        continue;
                    }
                    let d = self.delta(zi, ta, tb, &hu, hv);
                    if d < 0 && !matches!(best, Some((bd, _)) if bd <= d) {
                        best = Some((d, v as usize));
                    }
                }
            }
            if let Some((d, v)) = best {
                self.swap(u, v, d);
                swapped = true;
            }
        }
        swapped
    }

    /// The error of zone `zi`'s rows of the table.
    fn zone_l1(&self, zi: usize) -> i64 {
        let mut e = 0;
        for t in 0..5 {
            for o in 0..11 {
                e += cell_err(self.pred[zi][t][o], self.capt[zi][t][o], self.capped[zi][t][o]);
            }
        }
        e
    }

    /// One random swap in zone `zi` whatever it does to the error (a perturbation).
    fn kick(&mut self, zi: usize) {
        let zu = &self.zone_units[zi];
        if zu.is_empty() {
            return;
        }
        let u = zu[self.rng.below(zu.len())] as usize;
        let (ta, s) = (self.utype[u] as usize, self.units[u].size as usize - 1);
        let others: Vec<usize> = (0..5)
            .filter(|&t| t != ta && !self.lists[zi][t][s].is_empty())
            .collect();
        if others.is_empty() {
            return;
        }
        let tb = others[self.rng.below(others.len())];
        let v = self.lists[zi][tb][s][self.rng.below(self.lists[zi][tb][s].len())] as usize;
        let d = self.delta(zi, ta, tb, &self.units[u].hist, &self.units[v].hist);
        self.swap(u, v, d);
        self.kicks += 1;
    }

    fn save(&self, zi: usize) -> ZoneState {
        ZoneState {
            lists: self.lists[zi].clone(),
            units: self.zone_units[zi]
                .iter()
                .map(|&u| (self.utype[u as usize], self.pos[u as usize]))
                .collect(),
            pred: self.pred[zi],
        }
    }

    fn restore(&mut self, zi: usize, st: &ZoneState) {
        self.l1 += {
            let now = self.zone_l1(zi);
            self.pred[zi] = st.pred;
            self.zone_l1(zi) - now
        };
        self.lists[zi].clone_from(&st.lists);
        for (k, &u) in self.zone_units[zi].iter().enumerate() {
            (self.utype[u as usize], self.pos[u as usize]) = st.units[k];
        }
    }

    /// Best-improvement sweeps over all zones until none swaps, then per zone an iterated
    /// local search: `ILS_ROUNDS` times, three random swaps (a kick), sweeps of the zone until
    /// none swaps, and back to the best state seen if the error did not fall.
    fn run(&mut self, max_swaps: u64) {
        while self.swaps < max_swaps && self.sweep(None, max_swaps) {}
        for zi in 0..self.lists.len() {
            if self.zone_units[zi].len() > ILS_MAX_UNITS {
                continue;
            }
            let mut best = self.zone_l1(zi);
            let mut saved = self.save(zi);
            for _ in 0..ILS_ROUNDS {
                if best == 0 || self.swaps >= max_swaps {
                    break;
                }
                for _ in 0..3 {
                    self.kick(zi);
                }
                while self.swaps < max_swaps && self.sweep(Some(zi), max_swaps) {}
                let now = self.zone_l1(zi);
                if now < best {
                    best = now;
                    saved = self.save(zi);
                } else {
                    self.restore(zi, &saved);
                }
            }
        }
    }
}

/// Kicks of the iterated local search per zone (§30.5 item 4).
const ILS_ROUNDS: usize = 24;
/// Zones with more swappable units skip the iterated local search: on S2 it lowered Normal's
/// error by nothing and took 2 s there; DMA32 (1528 units) is where the sweeps stop early.
const ILS_MAX_UNITS: usize = 4096;

impl Search<'_> {
    /// `n` random proposals (a zone by its number of units, a unit of it, a unit of another
    /// type and the same size), each swap made if it lowers the error.
    fn random(&mut self, n: u64, max_swaps: u64) {
        let total: usize = self.zone_units.iter().map(Vec::len).sum();
        if total == 0 {
            return;
        }
        for _ in 0..n {
            if self.swaps >= max_swaps {
                break;
            }
            let mut r = self.rng.below(total);
            let mut zi = 0;
            while r >= self.zone_units[zi].len() {
                r -= self.zone_units[zi].len();
                zi += 1;
            }
            let u = self.zone_units[zi][r] as usize;
            let (ta, s) = (self.utype[u] as usize, self.units[u].size as usize - 1);
            let others: Vec<usize> = (0..5)
                .filter(|&t| t != ta && !self.lists[zi][t][s].is_empty())
                .collect();
            if others.is_empty() {
                continue;
            }
            let tb = others[self.rng.below(others.len())];
            let v = self.lists[zi][tb][s][self.rng.below(self.lists[zi][tb][s].len())] as usize;
            let (hu, hv) = (self.units[u].hist, self.units[v].hist);
            if hu == hv {
                continue;
            }
            let d = self.delta(zi, ta, tb, &hu, &hv);
            if d < 0 {
                self.swap(u, v, d);
            }
        }
    }
}

/// The annealing's cost of one cell: the error beyond 1 % of the captured count (the tolerance
/// the match is judged by, and the order of the churn between the pfn read and the /proc read
/// in the large cells), weighted [`ANNEAL_EXCESS_WEIGHT`], plus the plain error, so that among
/// tables within 1 % the closer one still costs less.
fn cell_cost(pred: i64, capt: i64, capped: bool) -> i64 {
    let e = cell_err(pred, capt, capped);
    ANNEAL_EXCESS_WEIGHT * (e - capt / 100).max(0) + e
}

/// Weight of the error beyond 1 % in [`cell_cost`].
const ANNEAL_EXCESS_WEIGHT: i64 = 16;

impl Search<'_> {
    fn delta_cost(&self, zi: usize, ta: usize, tb: usize, hu: &[i64; 11], hv: &[i64; 11]) -> i64 {
        self.delta_by(cell_cost, zi, ta, tb, hu, hv)
    }

    fn zone_cost(&self, zi: usize) -> i64 {
        let mut c = 0;
        for t in 0..5 {
            for o in 0..11 {
                c += cell_cost(self.pred[zi][t][o], self.capt[zi][t][o], self.capped[zi][t][o]);
            }
        }
        c
    }

    /// Simulated annealing of zone `zi`'s block types (§30.5 item 4) on [`cell_cost`]:
    /// `proposals` swaps of a unit of a type other than the zone's most common one with a unit
    /// of another type and the same size, each made if it lowers the cost or, at temperature
    /// T (falling geometrically from [`ANNEAL_T0`] to [`ANNEAL_T1`]), with probability
    /// exp(−Δ/T); the zone ends in the cheapest state seen. Skipped when every cell of the zone
    /// is already within 1 %; up to [`ANNEAL_ROUNDS`] coolings, each from the cheapest state, until
    /// every cell is within 1 %. Returns the moves made.
    ///
    /// Why: the sweeps and the random proposals stop in a local minimum of single swaps; on a
    /// capture of this 24 GiB machine (Normal: 148 Unmovable, 81 Reclaimable of 10752 blocks)
    /// they left 8 of 42 cells beyond 1 % (Unmovable order 7: 57 for 75) and the minimum
    /// depended on the seed (L1 53–163). The minority types' rows are sums of a few hundred
    /// block histograms; leaving the minimum takes uphill moves. The objective tolerates 1 % in
    /// each cell because the large order-0/1 cells move by that much between the pfn read and
    /// the /proc read (Normal Movable order 0: 29828 before, 30386 after), while the small
    /// high-order cells of the minority types do not (equal in both reads): an exact L1 fit
    /// spends the search on the former.
    fn anneal(&mut self, zi: usize, proposals: u64) -> u64 {
        let excess = |s: &Self| s.zone_cost(zi) - s.zone_l1(zi);
        if proposals == 0 || excess(self) == 0 {
            return 0;
        }
        let l = &self.lists[zi];
        let major = (0..5)
            .max_by_key(|&t| (l[t][0].len() + 2 * l[t][1].len(), std::cmp::Reverse(t)))
            .unwrap_or(1);
        let mut cost = self.zone_cost(zi);
        let mut best = cost;
        let mut saved = self.save(zi);
        let mut moves = 0u64;
        let ratio = (ANNEAL_T1 / ANNEAL_T0).ln();
        for round in 0..ANNEAL_ROUNDS {
            if round > 0 {
                // Reheat from the cheapest state, unless it is within 1 % everywhere.
                if cost > best {
                    self.restore(zi, &saved);
                    cost = best;
                }
                if excess(self) == 0 {
                    break;
                }
            }
            moves += self.anneal_round(zi, major, proposals, ratio, &mut cost, &mut best, &mut saved);
        }
        if cost > best {
            self.restore(zi, &saved);
        }
        moves
    }

    /// One cooling of [`Search::anneal`] from [`ANNEAL_T0`] to [`ANNEAL_T1`].
    #[allow(clippy::too_many_arguments)]
    fn anneal_round(
        &mut self,
        zi: usize,
        major: usize,
        proposals: u64,
        ratio: f64,
        cost: &mut i64,
        best: &mut i64,
        saved: &mut ZoneState,
    ) -> u64 {
        let mut moves = 0u64;
        for k in 0..proposals {
            // A unit of a minority type: (type, size) lists weighted by their length.
            let minor: usize = (0..5)
                .filter(|&t| t != major)
                .map(|t| self.lists[zi][t][0].len() + self.lists[zi][t][1].len())
                .sum();
            if minor == 0 {
                break;
            }
            let mut r = self.rng.below(minor);
            let (mut ta, mut s) = (0, 0);
            'pick: for t in (0..5).filter(|&t| t != major) {
                for sz in 0..2 {
                    let n = self.lists[zi][t][sz].len();
                    if r < n {
                        (ta, s) = (t, sz);
                        break 'pick;
                    }
                    r -= n;
                }
            }
            let u = self.lists[zi][ta][s][r] as usize;
            // A unit of another type and the same size, every such unit equally likely.
            let n: usize = (0..5)
                .filter(|&t| t != ta)
                .map(|t| self.lists[zi][t][s].len())
                .sum();
            if n == 0 {
                continue;
            }
            let mut r = self.rng.below(n);
            let mut tb = ta;
            for t in (0..5).filter(|&t| t != ta) {
                let len = self.lists[zi][t][s].len();
                if r < len {
                    tb = t;
                    break;
                }
                r -= len;
            }
            let v = self.lists[zi][tb][s][r] as usize;
            let (hu, hv) = (self.units[u].hist, self.units[v].hist);
            if hu == hv {
                continue;
            }
            let d = self.delta_cost(zi, ta, tb, &hu, &hv);
            let accept = d <= 0 || {
                let t = ANNEAL_T0 * (ratio * k as f64 / proposals as f64).exp();
                (self.rng.next() >> 11) as f64 / (1u64 << 53) as f64 <= (-(d as f64) / t).exp()
            };
            if accept {
                let dl = self.delta(zi, ta, tb, &hu, &hv);
                self.swap(u, v, dl);
                moves += 1;
                *cost += d;
                if *cost < *best {
                    *best = *cost;
                    *saved = self.save(zi);
                    if self.zone_l1(zi) == 0 {
                        break;
                    }
                }
            }
        }
        moves
    }
}

/// Coolings of the annealing at most, each from the cheapest state seen (reheats).
const ANNEAL_ROUNDS: usize = 4;

/// The annealing's temperatures, first and last (in units of [`cell_cost`]).
const ANNEAL_T0: f64 = 32.0;
const ANNEAL_T1: f64 = 0.5;

/// One zone's part of the search state (to go back to the best one seen).
struct ZoneState {
    lists: [[Vec<u32>; 2]; 5],
    units: Vec<(u8, usize)>,
    pred: [[i64; 11]; 5],
}

fn folio(pfn: u64, order: u8, kind: RKind, b: u8) -> RFolio {
    RFolio {
        pfn,
        order,
        kind,
        active: b & ACTIVE != 0,
        referenced: b & REFERENCED != 0,
        unevictable: b & UNEVICTABLE != 0,
        dirty: false,
    }
}

impl MatchReport {
    /// A readable table: blocks per type, free chunks per order and type (captured over
    /// reconstructed), buddyinfo's per-order totals, mixed blocks, the fit's swaps and L1.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "snapshot reconstruction (docs/model §30.5), fitted to the /proc read {} the pfn read",
            self.fitted_to
        );
        let _ = writeln!(s, "  {:<28} {:>10} {:>14}", "blocks", "captured", "reconstructed");
        for r in self
            .blocks
            .iter()
            .filter(|r| r.captured != 0 || r.reconstructed != 0)
        {
            let _ = writeln!(s, "  {:<28} {:>10} {:>14}", r.what, r.captured, r.reconstructed);
        }
        let _ = writeln!(
            s,
            "  free chunks per order (c: captured pagetypeinfo/buddyinfo, r: reconstructed)"
        );
        let _ = write!(s, "  {:<24}", "");
        for o in 0..11 {
            let _ = write!(s, " {:>7}", format!("o{o}"));
        }
        s.push('\n');
        for g in &self.free_grid {
            for (tag, v) in [("c", &g.captured), ("r", &g.reconstructed)] {
                let _ = write!(s, "  {:<22}{tag} ", format!("{} {}", g.zone, g.mtype));
                for n in v {
                    let _ = write!(s, " {n:>7}");
                }
                s.push('\n');
            }
        }
        let worst = self
            .free_by_type
            .iter()
            .map(|r| (r.reconstructed - r.captured, r))
            .max_by_key(|(d, r)| (d.abs(), std::cmp::Reverse(r.what.clone())));
        if let Some((d, r)) = worst {
            let _ = writeln!(
                s,
                "  worst free cell: {} captured {} reconstructed {} ({d:+})",
                r.what, r.captured, r.reconstructed
            );
        }
        for r in &self.managed {
            let _ = writeln!(
                s,
                "  {}: zoneinfo {} reconstructed {} ({:+})",
                r.what,
                r.captured,
                r.reconstructed,
                r.reconstructed - r.captured
            );
        }
        let _ = writeln!(
            s,
            "  mixed blocks {}, blocks whose content disagrees with their type {}, odd compound runs {}, order-10 splits {}",
            self.mixed_blocks, self.content_disagrees, self.odd_compound, self.split_order10
        );
        let _ = writeln!(
            s,
            "  block-type fit: {} swaps, {} kicks, {} annealing moves, free-table L1 {} -> {}",
            self.swaps, self.kicks, self.anneal_moves, self.l1_before, self.l1_after
        );
        s
    }
}

#[cfg(test)]
mod tests;
