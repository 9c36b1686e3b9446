//! `[machine] snapshot` (issue 21 item 2, docs/model §30.5): a spec boots in a
//! reconstructed state and runs ops or a workload from there. The reconstruction here is
//! hand-made (`fraglab_sim::restore::preload` puts it in the cache for a file), so the tests do
//! not depend on the inference.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_mm::vmstat::{render_buddyinfo, render_pagetypeinfo};
use fraglab_sim::restore::{loaded, preload, to_restore};
use fraglab_spec::parse_spec;
use fraglab_state::reconstruct::{MatchReport, MatchRow, RFolio, RFree, RKind, RZone, Reconstruction};
use fraglab_state::snapshot::SnapshotHeader;

const BASE: u64 = 4096;
const PB: u64 = 512;
const BLOCKS: u64 = 32;

fn blk(i: u64) -> u64 {
    BASE + i * PB
}

/// Greedy aligned cut of [start, end) (§30.3 item 2).
fn cut(start: u64, end: u64) -> Vec<RFree> {
    let mut out = Vec::new();
    let mut pfn = start;
    while pfn < end {
        let mut order = 10u32;
        while order > 0 && (pfn & ((1 << order) - 1) != 0 || pfn + (1 << order) > end) {
            order -= 1;
        }
        out.push(RFree {
            pfn,
            order: order as u8,
        });
        pfn += 1 << order;
    }
    out
}

fn folio(pfn: u64, order: u8, kind: RKind) -> RFolio {
    RFolio {
        pfn,
        order,
        kind,
        active: false,
        referenced: false,
        unevictable: false,
        dirty: false,
    }
}

/// A 64 MiB DMA32 zone at pfn 4096: reserved pages and a hole in block 0, an Unmovable and a
/// Reclaimable block, eight blocks of anon pages with every other page free (fragmented), four
/// blocks of sparse page cache, an anon THP, a hugetlb page, the rest free.
fn reconstruction() -> Reconstruction {
    let mut r = Reconstruction {
        end_pfn: blk(BLOCKS),
        zones: vec![RZone {
            node: 0,
            name: "DMA32".into(),
            start_pfn: BASE,
            spanned: BLOCKS * PB,
            present: BLOCKS * PB - 64,
            managed: BLOCKS * PB - 128,
        }],
        reserved: vec![[BASE, BASE + 64]],
        holes: vec![[BASE + 64, BASE + 128]],
        block_types: vec![1; (blk(BLOCKS) / PB) as usize],
        free: Vec::new(),
        folios: Vec::new(),
        report: MatchReport {
            blocks: vec![MatchRow {
                what: "DMA32 blocks Movable".into(),
                captured: 30,
                reconstructed: 30,
            }],
            ..Default::default()
        },
    };
    r.block_types[(blk(1) / PB) as usize] = 0;
    r.block_types[(blk(2) / PB) as usize] = 2;
    r.free.extend(cut(BASE + 128, blk(1)));
    for i in 0..8 {
        r.folios.push(folio(blk(1) + i, 0, RKind::SlabUnreclaimable));
    }
    for i in 8..12 {
        r.folios.push(folio(blk(1) + i, 0, RKind::PageTable));
    }
    r.folios.push(folio(blk(1) + 12, 2, RKind::Kernel));
    r.free.extend(cut(blk(1) + 16, blk(2)));
    for i in 0..16 {
        r.folios.push(folio(blk(2) + 2 * i, 1, RKind::SlabReclaimable));
    }
    r.free.extend(cut(blk(2) + 32, blk(3)));
    // Free pages at even pfns: the free scanner's strides (powers of two from a block's start)
    // land on them.
    for p in (blk(3)..blk(11)).step_by(2) {
        let mut f = folio(p + 1, 0, RKind::Anon);
        f.active = p % 4 == 0;
        r.folios.push(f);
        r.free.push(RFree { pfn: p, order: 0 });
    }
    for p in (blk(11)..blk(15)).step_by(4) {
        r.folios.push(folio(p, 0, RKind::File));
        r.free.extend(cut(p + 1, p + 4));
    }
    r.folios.push(folio(blk(15), 9, RKind::Anon));
    r.folios.push(folio(blk(16), 9, RKind::Hugetlb));
    r.free.extend(cut(blk(17), blk(BLOCKS)));
    r
}

fn header() -> SnapshotHeader {
    let knobs: BTreeMap<String, String> = [
        ("vm.min_free_kbytes", "2345"),
        ("vm.watermark_scale_factor", "50"),
        ("transparent_hugepage/enabled", "always [madvise] never"),
        (
            "transparent_hugepage/defrag",
            "always defer [defer+madvise] madvise never",
        ),
        ("vm.defrag_mode", "1"),
        ("vm.compaction_proactiveness", "0"),
        ("vm.extfrag_threshold", "700"),
        // Not a value the declaration accepts: skipped, the kernel default is used.
        ("vm.swappiness", "lots"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    SnapshotHeader {
        nr_cpus: 4,
        end_pfn: blk(BLOCKS),
        knobs,
        ..Default::default()
    }
}

/// A directory of its own for a test, with a stand-in snapshot file whose reconstruction is
/// [`reconstruction`] (preloaded).
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-restore-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let file = d.join("state.fsnap");
    std::fs::write(&file, b"stand-in").unwrap();
    preload(&file, loaded(&file, header(), reconstruction()).unwrap()).unwrap();
    d
}

fn spec_at(d: &Path, body: &str) -> fraglab_spec::Spec {
    let file = d.join("spec.toml");
    let text = format!("[machine]\nsnapshot = \"state.fsnap\"\n{body}");
    parse_spec(&text, file.to_str().unwrap()).unwrap()
}

#[test]
fn section_30_5_snapshot_boot_reproduces_blocks_and_free_table() {
    let d = dir("exact");
    let spec = spec_at(&d, "[run]\ndebug_vm = true\n");
    let mm = fraglab_sim::boot(&spec).unwrap();
    mm.check_invariants().unwrap();
    let rec = reconstruction();
    let views = mm.zone_views();
    let text = render_pagetypeinfo(0, &views);
    // Blocks per type: 1 Unmovable, 30 Movable, 1 Reclaimable.
    assert!(
        text.contains(
            "Node 0, zone    DMA32            1           30            1            0            0"
        ),
        "{text}"
    );
    // The free table per type and order, and buddyinfo.
    let mut want = [[0u64; 11]; 5];
    let mut by_order = [0u64; 11];
    for c in &rec.free {
        want[rec.block_types[(c.pfn / PB) as usize] as usize][c.order as usize] += 1;
        by_order[c.order as usize] += 1;
    }
    let z = &views[1];
    for (mt, row) in want.iter().enumerate() {
        assert_eq!(&z.nr_free_by_type[mt], row, "free chunks of type {mt}");
    }
    assert_eq!(z.nr_free, by_order);
    let buddy: Vec<u64> = render_buddyinfo(0, &views)
        .split_whitespace()
        .skip(4)
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(buddy, by_order);
    // CPUs from the snapshot (the spec gives none); the hugetlb pool is the snapshot's page.
    assert_eq!(mm.nr_cpus, 4);
    assert_eq!(mm.hugetlb.nr_huge_pages(), 1);
    let _ = std::fs::remove_dir_all(d);
}

/// The spec's knob wins, else the snapshot's, else the kernel default (module doc of
/// `fraglab_sim::restore`).
#[test]
fn section_30_5_snapshot_knobs_spec_then_snapshot_then_default() {
    let d = dir("knobs");
    let spec = spec_at(
        &d,
        "cpus = 2\n[knobs]\n\"vm.watermark_scale_factor\" = 20\n\"transparent_hugepage/defrag\" = \"never\"\n",
    );
    let mm = fraglab_sim::boot(&spec).unwrap();
    assert_eq!(mm.nr_cpus, 2, "the spec's cpus");
    assert_eq!(mm.tun.watermark_scale_factor, 20, "the spec's value wins");
    assert_eq!(mm.min_free_kbytes, 2345, "the snapshot's min_free_kbytes");
    assert!(mm.tun.defrag_mode, "the snapshot's defrag_mode");
    assert_eq!(
        mm.thp.enabled,
        fraglab_mm::huge_memory::ThpEnabled::Madvise,
        "the snapshot's THP enabled (the bracketed word)"
    );
    assert_eq!(
        mm.thp.defrag,
        fraglab_mm::huge_memory::ThpDefrag::Never,
        "the spec's"
    );
    assert_eq!(mm.compact.cfg.proactiveness, 0);
    assert_eq!(mm.compact.cfg.extfrag_threshold, 700);
    assert_eq!(
        mm.tun.swappiness, 60,
        "unparsable snapshot value: the kernel default"
    );
    assert_eq!(
        mm.tun.vfs_cache_pressure, 100,
        "not in the snapshot: the kernel default"
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn section_30_5_compact_memory_from_a_snapshot_moves_pages() {
    let d = dir("compact");
    let spec = spec_at(
        &d,
        "[knobs]\n\"vm.defrag_mode\" = 0\n[run]\ndebug_vm = true\n[[op]]\ncompact_memory = true\n[[op]]\nprint = \"vmstat\"\n",
    );
    let out = fraglab_sim::run_ops(&spec).unwrap();
    let item = |name: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} not printed:\n{out}"))
    };
    assert!(item("compact_migrate_scanned") > 0);
    assert!(item("pgmigrate_success") > 0, "{out}");
    // Determinism: the same spec and snapshot give the same output.
    assert_eq!(out, fraglab_sim::run_ops(&spec).unwrap());
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn section_30_5_workload_from_a_snapshot_is_deterministic() {
    let d = dir("workload");
    let body = "[run]\nseed = 3\n[workload]\nduration = \"5s\"\n[[workload.thp_burst]]\ninterval = \"500ms\"\nsize = \"8MiB\"\nhold = \"200ms\"\nbursts = 4\n";
    let spec = spec_at(&d, body);
    let a = fraglab_sim::timed::run_workload(&spec).unwrap();
    assert_eq!(a.bursts.len(), 4);
    // The result names the snapshot and keeps the match report.
    let m = a.snapshot.as_ref().expect("the snapshot's match report");
    assert_eq!(m.file, "state.fsnap");
    assert_eq!(m.blocks, vec![("DMA32 blocks Movable".to_string(), 30, 30)]);
    let b = fraglab_sim::timed::run_workload(&spec).unwrap();
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn snapshot_spec_errors_name_file_line_and_key() {
    let err = |text: &str| parse_spec(text, "s.toml").unwrap_err().to_string();
    let e = err("[machine]\nsnapshot = \"x.fsnap\"\nmemory = \"1GiB\"\n");
    assert!(
        e.starts_with("s.toml:3: key machine.memory:") && e.contains("line 2"),
        "{e}"
    );
    let e = err("[machine]\nsnapshot = \"x.fsnap\"\n[[machine.zone]]\nname = \"DMA32\"\nstart_pfn = 4096\nspanned = 4096\n");
    assert!(e.contains("machine.zone") && e.contains("snapshot"), "{e}");
    let e = err("[machine]\ndma = false\nsnapshot = \"x.fsnap\"\n");
    assert!(e.starts_with("s.toml:2: key machine.dma:"), "{e}");
    let e = err("[machine]\nsnapshot = 3\n");
    assert!(e.starts_with("s.toml:2: key machine.snapshot:"), "{e}");
    // A missing file: the spec's file, line and key, then the snapshot's path.
    let d = std::env::temp_dir().join(format!("fraglab-restore-{}-missing", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let spec = parse_spec(
        "[machine]\nsnapshot = \"nope.fsnap\"\n",
        d.join("m.toml").to_str().unwrap(),
    )
    .unwrap();
    let e = fraglab_sim::boot(&spec).err().unwrap().0;
    assert!(
        e.contains("m.toml:2: machine.snapshot:") && e.contains("nope.fsnap"),
        "{e}"
    );
    // A corrupt file: the snapshot's path and a byte offset.
    std::fs::write(d.join("bad.fsnap"), b"FRAGSNAPxxxxxxxxxxxxxxxxxxxxxxx").unwrap();
    let spec = parse_spec(
        "[machine]\nsnapshot = \"bad.fsnap\"\n",
        d.join("m.toml").to_str().unwrap(),
    )
    .unwrap();
    let e = fraglab_sim::boot(&spec).err().unwrap().0;
    assert!(
        e.contains("m.toml:2: machine.snapshot:") && e.contains("bad.fsnap") && e.contains("offset"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(d);
}

#[test]
fn reconstruction_converts_kinds_and_clips_ranges() {
    let mut rec = reconstruction();
    // A range partly outside the zone is clipped; an Isolate block boots Movable.
    rec.reserved.push([0, 10]);
    rec.block_types[(blk(20) / PB) as usize] = 4;
    let r = to_restore(&rec).unwrap();
    assert_eq!(r.reserved, vec![[BASE as u32, BASE as u32 + 64]]);
    assert_eq!(r.zones[0].present, (BLOCKS * PB - 64) as u32);
    assert_eq!(r.zones[0].managed, (BLOCKS * PB - 128) as u32);
    assert_eq!(
        r.block_types[(blk(20) / PB) as usize],
        fraglab_mm::MigrateType::Movable
    );
    let slab: Vec<_> = r
        .folios
        .iter()
        .filter(|f| f.kind == fraglab_mm::folio::FolioKind::Slab)
        .map(|f| f.alloc_mt)
        .collect();
    assert!(slab.contains(&fraglab_mm::MigrateType::Reclaimable));
    assert!(slab.contains(&fraglab_mm::MigrateType::Unmovable));
}

/// With the xarray-node model on, the restored page cache is settled like any other (the
/// snapshot's radix_tree_node slab is already among its slab pages).
#[test]
fn section_30_5_snapshot_boot_with_xa_nodes_holds_invariants() {
    let d = dir("xa");
    let spec = spec_at(
        &d,
        "[model]\nxa_nodes = \"true\"\n[run]\ndebug_vm = true\n[[op]]\ncompact_memory = true\n",
    );
    let mm = fraglab_sim::boot(&spec).unwrap();
    mm.check_invariants().unwrap();
    fraglab_sim::run_ops(&spec).unwrap();
    let _ = std::fs::remove_dir_all(d);
}

/// The committed S2 snapshot (crates/state/tests/data, helper A's capture of this machine) boots
/// with pagetypeinfo's blocks per type exactly and its free pages per (type, order) within 1 %
/// (the L1 distance of the page tables, per zone, against the zone's captured free pages), the
/// free table being exactly the reconstruction's; debug-vm's invariants hold.
#[test]
fn section_30_5_s2_fixture_boots_exact_blocks_free_within_1pct() {
    use fraglab_state::procparse::parse_pagetypeinfo;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../state/tests/data/s2-snapshot.fsnap");
    let text = format!(
        "[machine]\nsnapshot = \"{}\"\n[run]\ndebug_vm = true\n",
        path.display()
    );
    let spec = parse_spec(&text, "fixture.toml").unwrap();
    // Loaded once per process, also by runs started together (`fraglab compare`'s threads).
    let loads: Vec<_> = (0..3)
        .map(|_| {
            let spec = spec.clone();
            std::thread::spawn(move || fraglab_sim::restore::load(&spec).unwrap())
        })
        .collect();
    let loads: Vec<_> = loads.into_iter().map(|t| t.join().unwrap()).collect();
    let l = fraglab_sim::restore::load(&spec).unwrap();
    assert!(loads.iter().all(|x| std::sync::Arc::ptr_eq(x, &l)));
    let mm = fraglab_sim::boot(&spec).unwrap();
    mm.check_invariants().unwrap();
    assert_eq!(mm.nr_cpus, l.header.nr_cpus);
    let views = mm.zone_views();
    // The boot holds the reconstruction's free chunks, by block type, exactly.
    let rec = &l.reconstruction;
    let mut want = vec![[[0u64; 11]; 5]; views.len()];
    for c in &rec.free {
        let zi = mm.pfn_zone(c.pfn as u32).unwrap();
        let t = rec.block_types[(c.pfn / PB) as usize] as usize;
        want[zi][if t == 4 { 1 } else { t }][c.order as usize] += 1;
    }
    for (zi, v) in views.iter().enumerate() {
        assert_eq!(v.nr_free_by_type, want[zi], "zone {}", v.zone_type.name());
    }
    // Against the captured tables: the closer of the two reads that bracket the pfn read.
    let best = ["before", "after"]
        .iter()
        .map(|which| {
            let read = if *which == "before" {
                &l.header.proc_before
            } else {
                &l.header.proc_after
            };
            let pti = parse_pagetypeinfo(&read["pagetypeinfo"]);
            let mut worst = 0f64;
            for v in views.iter().filter(|v| v.present > 0) {
                let c = &pti[v.zone_type.name()];
                assert_eq!(
                    v.blocks_by_type,
                    c.blocks,
                    "{which}: blocks of zone {}",
                    v.zone_type.name()
                );
                let cap: u64 = (0..5)
                    .flat_map(|t| (0..11).map(move |o| (t, o)))
                    .map(|(t, o)| c.free[t][o] << o)
                    .sum();
                let l1: u64 = (0..5)
                    .flat_map(|t| (0..11).map(move |o| (t, o)))
                    .map(|(t, o)| (c.free[t][o] << o).abs_diff(v.nr_free_by_type[t][o] << o))
                    .sum();
                worst = worst.max(l1 as f64 / cap.max(1) as f64);
            }
            worst
        })
        .fold(f64::MAX, f64::min);
    assert!(
        best <= 0.01,
        "free pages per (type, order) off by {:.3} %",
        best * 100.0
    );
}

/// §27.2 item 3: a snapshot that recorded the kernel's kdamond regions (every region 80
/// aggregations old, no access) boots a kdamond that goes on from them: S2's scheme pages the
/// snapshot's cold page cache out at its first aggregation (5 s). From the same snapshot
/// without them the booted kdamond starts cold and frees nothing in 30 s (it would after 60 s).
#[test]
fn s27_snapshot_boot_kdamond_starts_from_the_captured_ages() {
    use fraglab_state::damon::{DamonCapture, DamonRegion};
    let body = "[workload]\nduration = \"30s\"\n[[workload.task]]\nname = \"idle\"\nsteps = [{ sleep = \"30s\" }]\n[damon]\npreset = \"s2\"\nmin_nr_regions = 8\nmax_nr_regions = 64\n";
    let run = |d: &Path| fraglab_sim::timed::run_workload(&spec_at(d, body)).unwrap();
    // The page cache: one order-0 file folio every 4 pfns in blocks 11..15.
    let cache = ((blk(15) - blk(11)) / 4) as i64;
    let cold = run(&dir("damon-cold"));
    assert_eq!(cold.vmstat_delta.get("nr_file_pages").copied().unwrap_or(0), 0);
    let d = dir("damon-warm");
    let mut h = header();
    let step = 4 * PB;
    h.damon = Some(DamonCapture {
        kdamond: 0,
        pid: 83,
        aggr_us: 5_000_000,
        source: "damon:damon_aggregated".into(),
        regions: (0..BLOCKS / 4)
            .map(|i| DamonRegion {
                target: 0,
                start: (BASE + i * step) * 4096,
                end: (BASE + (i + 1) * step) * 4096,
                nr_accesses: 0,
                age: 80,
            })
            .collect(),
        ..Default::default()
    });
    assert_eq!(fraglab_sim::restore::damon_start(&h).len(), (BLOCKS / 4) as usize);
    assert_eq!(fraglab_sim::restore::damon_start(&header()), []);
    let file = d.join("state.fsnap");
    preload(&file, loaded(&file, h, reconstruction()).unwrap()).unwrap();
    let warm = run(&d);
    // 128 MiB of region span per aggregation covers this 64 MiB zone: all of it goes at 5 s.
    assert_eq!(warm.vmstat_delta["nr_file_pages"], -cache);
    let t_free = warm
        .samples
        .iter()
        .find(|s| s.free_by_order.iter().sum::<u64>() != cold.samples[0].free_by_order.iter().sum::<u64>())
        .map(|s| s.t_ns);
    assert!(t_free.is_some_and(|t| t <= 6_000_000_000), "{t_free:?}");
    for p in [d, dir("damon-cold")] {
        let _ = std::fs::remove_dir_all(p);
    }
}
