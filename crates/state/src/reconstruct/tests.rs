//! Each stage of [`reconstruct`] alone, on small hand-made inputs.

use super::*;
use crate::page::PageClass as C;

const ANON: u8 = C::Anon as u8;
const FILE: u8 = C::File as u8;
const FREE: u8 = C::Free as u8;
const SLAB: u8 = C::Slab as u8;
const KERNEL: u8 = C::Kernel as u8;
const HOLE: u8 = C::Hole as u8;
const RESERVED: u8 = C::Reserved as u8;

fn zone(name: &str, start: u64, spanned: u64) -> ZoneSpan {
    ZoneSpan {
        name: name.into(),
        start_pfn: start,
        spanned,
        present: spanned,
        managed: spanned,
        ..Default::default()
    }
}

fn snap(pages: Vec<u8>, zones: Vec<ZoneSpan>) -> Snapshot {
    Snapshot {
        header: SnapshotHeader {
            nr_cpus: 1,
            end_pfn: pages.len() as u64,
            zones,
            ..Default::default()
        },
        pages,
        dirty: Vec::new(),
    }
}

fn unit(first_block: u64, size: u8, zone: usize, hist: [i64; 11]) -> Unit {
    Unit {
        first_block,
        size,
        zone,
        hist,
    }
}

const PTI_HEAD: &str = "Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \n";
const BLOCKS_HEAD: &str =
    "Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n";

/// A pagetypeinfo text of zone Normal: free counts per type (orders 0–10) and blocks per type.
fn pti(free: [[u64; 11]; 5], blocks: [u64; 5]) -> String {
    let mut s = PTI_HEAD.to_string();
    for (t, name) in TYPE_NAMES.iter().enumerate() {
        let cells: String = free[t].iter().map(|n| format!(" {n:>6}")).collect();
        s.push_str(&format!("Node    0, zone   Normal, type {name:>12}{cells} \n"));
    }
    s.push('\n');
    s.push_str(BLOCKS_HEAD);
    let cells: String = blocks.iter().map(|n| format!(" {n:>12}")).collect();
    s.push_str(&format!("Node 0, zone   Normal{cells} \n"));
    s
}

/// Stage 1: the populated zones in pfn order; every inconsistency an error, none a panic.
#[test]
fn stage1_check_geometry() {
    let s = snap(
        vec![FREE; 1024],
        vec![
            zone("Normal", 512, 512),
            zone("Movable", 0, 0),
            zone("DMA", 0, 512),
        ],
    );
    let names: Vec<&str> = check_geometry(&s)
        .unwrap()
        .iter()
        .map(|z| z.name.as_str())
        .collect();
    assert_eq!(names, ["DMA", "Normal"]);
    let err = |f: &dyn Fn(&mut Snapshot)| {
        let mut s = snap(
            vec![FREE; 1024],
            vec![zone("DMA", 0, 512), zone("Normal", 512, 512)],
        );
        f(&mut s);
        check_geometry(&s).unwrap_err()
    };
    assert!(err(&|s| s.pages.pop().map(drop).unwrap()).contains("1023 page bytes for end_pfn 1024"));
    assert!(err(&|s| s.pages[700] = 0x0e).contains("page byte of pfn 700 has no class"));
    assert!(err(&|s| s.header.zones[1].spanned = u64::MAX)
        .contains("zone Normal spans 18446744073709551615 pages from pfn 512, beyond"));
    assert!(err(&|s| s.header.zones[1].managed = 513).contains("zone Normal has managed 513, present 512"));
    assert!(err(&|s| s.header.zones[0].present = 600)
        .contains("zone DMA has managed 512, present 600, spanned 512"));
    assert!(err(&|s| s.header.zones[1].start_pfn = 256).contains("zones DMA and Normal overlap"));
    assert!(err(&|s| s.header.zones.clear()).contains("no populated zone"));
}

/// Stage 2: pages per class.
#[test]
fn stage2_pages_by_class() {
    let n = pages_by_class(&[FREE, FREE, ANON | TAIL, HOLE, 0x0b]);
    assert_eq!((n[2], n[3], n[0], n[11]), (2, 1, 1, 1));
    assert_eq!(n.iter().sum::<u64>(), 5);
}

/// Stage 3: holes, reserved ranges, free runs cut, folios by head and tails (a stray tail
/// breaks a run into order-0 pieces), slab folios indexed, evidence per block, managed pages,
/// dirty page cache.
#[test]
fn stage3_scan_zones() {
    let mut pages = vec![FREE; 2048];
    pages[0] = HOLE;
    pages[1..4].fill(RESERVED);
    pages[512] = ANON;
    pages[513..1024].fill(ANON | TAIL);
    pages[1024] = FILE;
    pages[1025..1028].fill(FILE | TAIL);
    pages[1028] = FILE | TAIL; // a fifth page: the run of 5 is not a folio
    pages[1100..1104].fill(SLAB);
    pages[1200] = KERNEL;
    let mut s = snap(pages, vec![zone("Normal", 0, 2048)]);
    s.header.dirty_bitmap = true;
    s.dirty = vec![0; 256];
    s.dirty[1025 / 8] |= 1 << (1025 % 8);
    let spans = check_geometry(&s).unwrap();
    let z = scan_zones(&s, &spans);
    assert_eq!(z.holes, vec![[0, 1]]);
    assert_eq!(z.reserved, vec![[1, 4]]);
    assert_eq!(z.zones[0].managed, 2044);
    assert_eq!(
        &z.free[..3],
        &[
            RFree { pfn: 4, order: 2 },
            RFree { pfn: 8, order: 3 },
            RFree { pfn: 16, order: 4 }
        ]
    );
    let anon: Vec<_> = z.folios.iter().filter(|f| f.kind == RKind::Anon).collect();
    assert_eq!((anon.len(), anon[0].pfn, anon[0].order), (1, 512, 9));
    let file: Vec<(u64, u8, bool)> = z
        .folios
        .iter()
        .filter(|f| f.kind == RKind::File)
        .map(|f| (f.pfn, f.order, f.dirty))
        .collect();
    assert_eq!(
        file,
        vec![
            (1024, 0, false),
            (1025, 0, true),
            (1026, 0, false),
            (1027, 0, false),
            (1028, 0, false)
        ]
    );
    assert_eq!(z.odd_compound, 1);
    assert_eq!(z.slab_folios.len(), 4);
    assert!(z
        .slab_folios
        .iter()
        .all(|&i| z.folios[i].kind == RKind::SlabUnreclaimable));
    assert_eq!(z.folios.iter().filter(|f| f.kind == RKind::Kernel).count(), 1);
    // Block 2 (pfns 1024..1535): 5 file, 4 slab, 1 kernel, the rest free.
    let e = z.evidence[2];
    assert_eq!(
        (
            e[FILE as usize],
            e[SLAB as usize],
            e[KERNEL as usize],
            e[FREE as usize]
        ),
        (5, 4, 1, 502)
    );
    assert_eq!(z.evidence[0][HOLE as usize], 0, "holes are not evidence");
    assert_eq!(z.evidence[0][RESERVED as usize], 3);
}

/// Stage 4: the read whose buddyinfo is nearer the cut; "after" on a tie or without
/// buddyinfo; "before" when the read after has no pagetypeinfo.
#[test]
fn stage4_choose_read() {
    let s = snap(vec![FREE; 1024], vec![zone("Normal", 0, 1024)]);
    let spans = check_geometry(&s).unwrap();
    let free = [RFree { pfn: 0, order: 10 }];
    let bi = |o10: u64| {
        format!("Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      0 {o10:>6}\n")
    };
    let with = |before: Option<String>, after: Option<String>, after_pti: bool| {
        let mut h = s.header.clone();
        if let Some(b) = before {
            h.proc_before.insert("buddyinfo".into(), b);
        }
        if let Some(a) = after {
            h.proc_after.insert("buddyinfo".into(), a);
        }
        if after_pti {
            h.proc_after.insert("pagetypeinfo".into(), String::new());
        }
        choose_read(&h, &spans, &free)
    };
    assert_eq!(with(Some(bi(1)), Some(bi(3)), true), "before");
    assert_eq!(with(Some(bi(3)), Some(bi(1)), true), "after");
    assert_eq!(with(Some(bi(2)), Some(bi(2)), true), "after");
    assert_eq!(with(Some(bi(5)), None, true), "before");
    assert_eq!(with(None, None, true), "after");
    assert_eq!(with(Some(bi(5)), Some(bi(1)), false), "before");
}

/// Stage 5: the fitted read's tables, strictly: no pagetypeinfo, or a line the kernel does not
/// print, is an error naming the read and the line.
#[test]
fn stage5_fit_tables() {
    let mut read = BTreeMap::new();
    assert!(fit_tables(&read, "after")
        .unwrap_err()
        .contains("no /proc/pagetypeinfo read"));
    read.insert("pagetypeinfo".to_string(), pti([[0; 11]; 5], [1, 2, 0, 0, 0]));
    let (p, b) = fit_tables(&read, "after").unwrap();
    assert_eq!(p[&(0, "Normal".to_string())].blocks, [1, 2, 0, 0, 0]);
    assert!(b.is_empty());
    read.insert("buddyinfo".to_string(), "Node 0, zone Normal 1 2\n".into());
    assert_eq!(
        fit_tables(&read, "before").unwrap_err(),
        "/proc/buddyinfo read before the pfn read, line 1: 2 counts, 11 expected (orders 0-10)"
    );
    read.insert(
        "pagetypeinfo".to_string(),
        "Node 0, zone Normal, type Movable 1 1 1 1 1 1 1 1 1 1 -1\n".into(),
    );
    assert!(fit_tables(&read, "after")
        .unwrap_err()
        .contains("line 1: \"-1\" is not a count"));
}

/// Stage 6: counted blocks (not those starting on a hole), two-block units under order-10
/// chunks, chunk histograms.
#[test]
fn stage6_fitting_units() {
    let mut pages = vec![FREE; 4096];
    pages[3072..3584].fill(HOLE);
    let spans_owned = [zone("Normal", 0, 4096)];
    let spans: Vec<&ZoneSpan> = spans_owned.iter().collect();
    let free = [
        RFree { pfn: 0, order: 10 },
        RFree { pfn: 1024, order: 9 },
        RFree { pfn: 1536, order: 3 },
        RFree { pfn: 1544, order: 3 },
        RFree { pfn: 3584, order: 9 },
    ];
    let u = fitting_units(&pages, &spans, &free, 8);
    assert_eq!(u.block_zone, vec![0, 0, 0, 0, 0, 0, usize::MAX, 0]);
    assert_eq!(
        u.units
            .iter()
            .map(|u| (u.first_block, u.size))
            .collect::<Vec<_>>(),
        vec![(0, 2), (2, 1), (3, 1), (4, 1), (5, 1), (7, 1)]
    );
    assert_eq!(u.unit_of, vec![0, 0, 1, 2, 3, 4, u32::MAX, 5]);
    assert_eq!(u.units[0].hist[10], 1);
    assert_eq!(u.units[2].hist[3], 2);
    assert_eq!(u.units[5].hist[9], 1);
}

/// Stage 7: page_owner's types fix their units; blocks outside the units (however large) and
/// unknown names are ignored.
#[test]
fn stage7_page_owner_fixed() {
    let units = Units {
        block_zone: vec![0, 0, usize::MAX],
        units: vec![unit(0, 1, 0, [0; 11]), unit(1, 1, 0, [0; 11])],
        unit_of: vec![0, 1, u32::MAX],
    };
    let po = vec![
        (1, "Reclaimable".to_string()),
        (2, "Unmovable".into()),
        (u64::MAX, "Movable".into()),
        (0, "CMA".into()),
    ];
    assert_eq!(page_owner_fixed(Some(&po), &units), vec![None, Some(2)]);
    assert_eq!(page_owner_fixed(None, &units), vec![None, None]);
}

/// Stage 8: pagetypeinfo's block counts imposed by content: the kernel-page block Unmovable,
/// the slab block Reclaimable, the rest Movable; a fixed unit keeps its type and counts.
#[test]
fn stage8_rank_types() {
    let mut evidence = vec![[0u32; 12]; 4];
    evidence[1][KERNEL as usize] = 100;
    evidence[2][SLAB as usize] = 100;
    evidence[3][ANON as usize] = 100;
    let units = Units {
        block_zone: vec![0; 4],
        units: (0..4).map(|b| unit(b, 1, 0, [0; 11])).collect(),
        unit_of: vec![0, 1, 2, 3],
    };
    let spans_owned = [zone("Normal", 0, 2048)];
    let spans: Vec<&ZoneSpan> = spans_owned.iter().collect();
    let tables = check_pagetypeinfo(&pti([[0; 11]; 5], [1, 2, 1, 0, 0])).unwrap();
    assert_eq!(
        rank_types(&units, &evidence, &[None; 4], &spans, &tables),
        vec![1, 0, 2, 1]
    );
    // Block 3 fixed Unmovable by page_owner: the one Unmovable block is taken.
    let fixed = [None, None, None, Some(0)];
    assert_eq!(
        rank_types(&units, &evidence, &fixed, &spans, &tables),
        vec![1, 1, 2, 0]
    );
}

/// Stage 9: captured counts, predicted counts per assigned type, and the L1 error (a capped
/// cell counts only its shortfall; an absurd count is clamped, not overflowed).
#[test]
fn stage9_free_tables() {
    let spans_owned = [zone("Normal", 0, 1024)];
    let spans: Vec<&ZoneSpan> = spans_owned.iter().collect();
    let mut free = [[0u64; 11]; 5];
    free[0][3] = 2;
    free[1][0] = 5;
    let mut text = pti(free, [1, 1, 0, 0, 0]);
    let units = Units {
        block_zone: vec![0, 0],
        units: vec![
            unit(0, 1, 0, [0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0]),
            unit(1, 1, 0, [7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ],
        unit_of: vec![0, 1],
    };
    let t = free_tables(&spans, &check_pagetypeinfo(&text).unwrap(), &units, &[0, 1]);
    assert_eq!((t.capt[0][0][3], t.capt[0][1][0]), (2, 5));
    assert_eq!((t.pred[0][0][3], t.pred[0][1][0]), (2, 7));
    assert_eq!(t.l1(&t.pred), 2);
    // The same with the Movable order-0 cell printed capped (">5"): 7 is no shortfall.
    text = text.replacen("Movable      5", "Movable     >5", 1);
    let t = free_tables(&spans, &check_pagetypeinfo(&text).unwrap(), &units, &[0, 1]);
    assert!(t.capped[0][1][0]);
    assert_eq!(t.l1(&t.pred), 0);
    // Swapped types: every chunk in the wrong row (7 + 2 in Unmovable, the capped cell short
    // by 5, 2 in Movable).
    assert_eq!(
        t.l1(&free_tables(&spans, &check_pagetypeinfo(&text).unwrap(), &units, &[1, 0]).pred),
        7 + 2 + 5 + 2
    );
    free[2][10] = 9_999_999_999_999_999_999;
    let t = free_tables(
        &spans,
        &check_pagetypeinfo(&pti(free, [1, 1, 0, 0, 0])).unwrap(),
        &units,
        &[0, 1],
    );
    assert_eq!(t.capt[0][2][10], 1 << 42);
    assert_eq!(t.l1(&t.pred), 2 + (1 << 42));
}

/// Stage 10: from a ranking that put the types on the wrong blocks, the search swaps them to
/// an exact fit; a fixed unit is never swapped.
#[test]
fn stage10_search_types() {
    let spans_owned = [zone("Normal", 0, 1536)];
    let spans: Vec<&ZoneSpan> = spans_owned.iter().collect();
    let mut free = [[0u64; 11]; 5];
    free[0][5] = 1; // the Unmovable block holds the order-5 chunk
    free[1][3] = 1;
    free[1][0] = 4;
    let pti = check_pagetypeinfo(&pti(free, [1, 2, 0, 0, 0])).unwrap();
    let units = Units {
        block_zone: vec![0; 3],
        units: vec![
            unit(0, 1, 0, [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]),
            unit(1, 1, 0, [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]),
            unit(2, 1, 0, [4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ],
        unit_of: vec![0, 1, 2],
    };
    let ranked = vec![0, 1, 1];
    let tables = free_tables(&spans, &pti, &units, &ranked);
    assert_eq!(tables.l1(&tables.pred), 4);
    let opt = ReconstructOptions::default();
    let fit = search_types(&units, &[None; 3], ranked.clone(), &tables, &opt);
    assert_eq!(fit.utype, vec![1, 0, 1]);
    assert_eq!(tables.l1(&fit.pred), 0);
    assert!(fit.swaps >= 1);
    let fit = search_types(&units, &[Some(0), None, None], ranked, &tables, &opt);
    assert_eq!(fit.utype[0], 0, "fixed");
    assert_eq!(fit.swaps, 0);
}

/// Stage 11: each block takes its unit's type; blocks without a unit stay Movable.
#[test]
fn stage11_unit_block_types() {
    let units = Units {
        block_zone: vec![0, 0, usize::MAX, 0],
        units: vec![unit(0, 2, 0, [0; 11]), unit(3, 1, 0, [0; 11])],
        unit_of: vec![0, 0, u32::MAX, 1],
    };
    assert_eq!(unit_block_types(&units, &[3, 2], 4), vec![3, 3, 1, 2]);
}

/// Stage 12: order-10 chunks in HighAtomic or Isolate blocks split into order-9 buddies; slab
/// in Reclaimable blocks reclaimable.
#[test]
fn stage12_split_and_slab_kinds() {
    let free = vec![
        RFree { pfn: 0, order: 10 },
        RFree { pfn: 1024, order: 10 },
        RFree { pfn: 2048, order: 10 },
        RFree { pfn: 3072, order: 3 },
    ];
    let (cut, n) = split_nonmergeable(free, &[3, 3, 1, 1, 4, 4, 3, 3]);
    assert_eq!(n, 2);
    assert_eq!(
        cut.iter().map(|f| (f.pfn, f.order)).collect::<Vec<_>>(),
        vec![(0, 9), (512, 9), (1024, 10), (2048, 9), (2560, 9), (3072, 3)]
    );
    let slab = |pfn| folio(pfn, 0, RKind::SlabUnreclaimable, SLAB);
    let mut folios = vec![slab(10), folio(600, 0, RKind::Anon, ANON), slab(700), slab(1100)];
    slab_kinds(&mut folios, &[0, 2, 3], &[0, 2, 1]);
    let kinds: Vec<RKind> = folios.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        vec![
            RKind::SlabUnreclaimable,
            RKind::Anon,
            RKind::SlabReclaimable,
            RKind::SlabUnreclaimable
        ]
    );
}

/// Stage 13: the report's rows (blocks, free cells against pagetypeinfo and buddyinfo,
/// managed pages) and the mixed and disagreeing blocks.
#[test]
fn stage13_match_report_and_mixed_blocks() {
    let spans_owned = [zone("Normal", 0, 1024)];
    let spans: Vec<&ZoneSpan> = spans_owned.iter().collect();
    let mut free = [[0u64; 11]; 5];
    free[1][9] = 1;
    let pti = check_pagetypeinfo(&pti(free, [1, 1, 0, 0, 0])).unwrap();
    let buddy = check_buddyinfo("Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      2      0\n").unwrap();
    let rz = [RZone {
        node: 0,
        name: "Normal".into(),
        start_pfn: 0,
        spanned: 1024,
        present: 1024,
        managed: 1000,
    }];
    let chunks = [RFree { pfn: 512, order: 9 }];
    let r = match_report(&spans, &rz, &pti, &buddy, &chunks, &[0, 0], &[0, 1]);
    let row = |rows: &[MatchRow], what: &str| {
        rows.iter()
            .find(|r| r.what == what)
            .map(|r| (r.captured, r.reconstructed))
    };
    assert_eq!(row(&r.blocks, "Normal blocks Unmovable"), Some((1, 1)));
    assert_eq!(
        row(&r.free_by_type, "Normal free Movable order 9 (chunks)"),
        Some((1, 1))
    );
    assert_eq!(
        row(&r.free_by_order, "Normal free order 9 (chunks)"),
        Some((2, 1))
    );
    assert_eq!(row(&r.managed, "Normal managed pages"), Some((1024, 1000)));
    assert_eq!(r.free_grid.last().unwrap().mtype, "all");
    let mut evidence = vec![[0u32; 12]; 3];
    evidence[0][ANON as usize] = 3;
    evidence[0][KERNEL as usize] = 1; // mixed, Movable content in an Unmovable block too
    evidence[1][SLAB as usize] = 2; // slab in a Movable block: disagrees
    evidence[2][ANON as usize] = 9; // not counted (no zone)
    assert_eq!(mixed_blocks(&evidence, &[0, 0, usize::MAX], &[0, 1, 1]), (1, 1));
    // Block 0 Movable: still mixed, its own content; block 1 Reclaimable: slab agrees.
    assert_eq!(mixed_blocks(&evidence, &[0, 0, usize::MAX], &[1, 2, 0]), (1, 0));
    // Block 0 Reclaimable without slab disagrees; block 1 Unmovable takes its slab.
    assert_eq!(mixed_blocks(&evidence, &[0, 0, usize::MAX], &[2, 0, 0]), (1, 1));
}
