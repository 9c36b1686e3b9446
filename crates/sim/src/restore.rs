//! `[machine] snapshot` (issue 21 item 2, docs/model §30.5): a snapshot file read,
//! reconstructed (`fraglab_state::reconstruct`), turned into the model's [`Restore`] and booted
//! with [`Mm::from_restore`].
//!
//! * **Cache.** One process reconstructs a snapshot once: the result is kept per (path, size,
//!   modification time), so `fraglab compare` of several configs sharing a snapshot, or the runs
//!   of a seed sweep, pay for it once. The reconstruction's options are fixed (its own seed 1,
//!   not the run's): the state is the machine's, not the run's.
//! * **Match report.** The first reconstruction of a file prints how well it matches what the
//!   kernel printed (blocks per type, free chunks per order and type, mixed blocks) to stderr,
//!   once per process.
//! * **Knobs.** A knob the spec sets wins; a knob it does not set takes the value the snapshot
//!   recorded (`SnapshotHeader::knobs`, by sysctl/sysfs name), else the kernel default. This
//!   holds for every knob boot reads (min_free_kbytes, watermark_scale_factor, THP
//!   enabled/defrag, defrag_mode, compaction_proactiveness, extfrag_threshold, ...). A
//!   recorded value the knob's declaration does not accept is skipped with a note on stderr.
//! * **CPUs** come from the spec if it gives `cpus`, else from the snapshot; the hugetlb pool is
//!   the snapshot's unless the spec gives `hugetlb_pages` (then it is resized to it, as a write
//!   of vm.nr_hugepages would).
//! * **Free page reporting** (§32): the spec's `page_reporting_order` if it
//!   gives one (an order or "off"), else the order the snapshot's confounders recorded
//!   (`SnapshotHeader::page_reporting_order`; none: no device). A capture records which free
//!   pages were reported (`SnapshotHeader::reported_bits`, KPF_UPTODATE on a free page): those
//!   chunks boot reported, their pages not host-backed and at the tail of their lists
//!   ([`reported_heads`]). A file from before that does not say: it boots with no chunk
//!   reported (assuming every chunk reported would be as wrong: a free Unmovable or Reclaimable
//!   block in a capture is one reporting had not reached, since reporting it retypes it
//!   Movable, §32.2). Every other page is host-backed, and the device asks for a first pass 2 s
//!   in.
//!
//! From [`Reconstruction`] to [`Restore`], simplified: zone `present`/`managed` are counted from
//! the hole and reserved ranges (clipped to the zone spans); an Isolate block (type 4) boots
//! Movable (nothing would ever unisolate it); blocks past the reconstruction's table boot
//! Movable; a folio above MAX_PAGE_ORDER (a gigantic hugetlb page) is cut into order-10 kernel
//! folios, and a hugetlb folio not of order 9 is a kernel folio (the model's pool holds 2 MiB
//! pages only).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use fraglab_mm::folio::FolioKind;
use fraglab_mm::mmzone::{MachineConfig, ZoneConfig};
use fraglab_mm::restore::{Restore, RestoreFolio};
use fraglab_mm::types::{MAX_PAGE_ORDER, PAGEBLOCK_NR_PAGES};
use fraglab_mm::{MigrateType, ZoneType};
use fraglab_spec::{KnobKind, KnobValue, Spec, KNOBS};
use fraglab_state::reconstruct::{reconstruct, MatchReport, RKind, ReconstructOptions, Reconstruction};
use fraglab_state::snapshot::{Snapshot, SnapshotHeader};

use crate::error::RunError;

/// A snapshot read and reconstructed, ready to boot.
#[derive(Debug)]
pub struct Loaded {
    /// The file it came from.
    pub path: PathBuf,
    pub header: SnapshotHeader,
    pub reconstruction: Reconstruction,
    /// The reconstruction as the model boots it.
    pub restore: Restore,
}

type CacheKey = (PathBuf, u64, Option<SystemTime>);

static CACHE: Mutex<Vec<(CacheKey, Arc<Loaded>)>> = Mutex::new(Vec::new());

/// The snapshot a spec names, read and reconstructed once per process (module doc). Errors name
/// the spec file, line and key, then the snapshot file and offset.
pub fn load(spec: &Spec) -> Result<Arc<Loaded>, RunError> {
    let snap = spec
        .machine
        .snapshot
        .as_ref()
        .ok_or_else(|| RunError(format!("{}: machine: no snapshot", spec.file)))?;
    let at = snap.at(&spec.file);
    let path = &snap.resolved;
    let meta = std::fs::metadata(path).map_err(|e| RunError(format!("{at}: {}: {e}", path.display())))?;
    let key: CacheKey = (
        std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()),
        meta.len(),
        meta.modified().ok(),
    );
    // The cache stays locked while a snapshot is read and reconstructed, so runs started
    // together (`fraglab compare`'s threads) wait for the first and reuse its reconstruction.
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, l)) = cache.iter().find(|(k, _)| *k == key) {
        return Ok(l.clone());
    }
    let t0 = std::time::Instant::now();
    let s = Snapshot::read(path).map_err(|e| RunError(format!("{at}: {e}")))?;
    let t1 = std::time::Instant::now();
    let rec = reconstruct(&s, &ReconstructOptions::default())
        .map_err(|e| RunError(format!("{at}: {}: reconstruction: {e}", path.display())))?;
    // Host wall times go to stderr only: results stay deterministic.
    eprintln!(
        "snapshot {}: read in {} ms, reconstructed in {} ms",
        path.display(),
        (t1 - t0).as_millis(),
        t1.elapsed().as_millis()
    );
    eprint!("{}", match_report_text(path, &rec.report));
    for note in effective_spec(spec, &s.header).1 {
        eprintln!("{at}: {note}");
    }
    let reported = s.header.reported_bits.then(|| reported_heads(&s.pages, &rec));
    let mut l = loaded(path, s.header, rec).map_err(|e| RunError(format!("{at}: {e}")))?;
    l.restore.free_reported = reported;
    let loaded = Arc::new(l);
    cache.push((key, loaded.clone()));
    Ok(loaded)
}

/// The reconstruction's free chunks that hold a page the capture saw reported
/// (`fraglab_state::page::REPORTED`, on the head of a reported chunk), by head pfn: the
/// reconstruction may cut a captured free run into chunks differently than the buddy allocator
/// had it, so a chunk counts as reported when any of its pages carries the mark.
pub fn reported_heads(pages: &[u8], rec: &Reconstruction) -> Vec<u32> {
    use fraglab_state::page::{PageClass, REPORTED};
    rec.free
        .iter()
        .filter(|c| {
            let (s, e) = (
                c.pfn as usize,
                (c.pfn as usize + (1usize << c.order)).min(pages.len()),
            );
            pages.get(s..e).is_some_and(|r| {
                r.iter()
                    .any(|&b| b & REPORTED != 0 && PageClass::of(b) == Some(PageClass::Free))
            })
        })
        .filter_map(|c| u32::try_from(c.pfn).ok())
        .collect()
}

/// The regions and ages of the kernel's kdamond a snapshot recorded (`SnapshotHeader::damon`,
/// docs/model §27.2 item 3) as the model's kdamond starts with them
/// ([`fraglab_mm::damon::DamonConfig::start`]): physical byte ranges to pfns, every target's
/// in address order. Empty when the snapshot has none (files from before, a machine without a
/// kdamond, a capture that could not read them): the booted kdamond then starts cold.
pub fn damon_start(header: &SnapshotHeader) -> Vec<fraglab_mm::damon::StartRegion> {
    let page = fraglab_mm::types::PAGE_SIZE;
    let mut v: Vec<fraglab_mm::damon::StartRegion> = header
        .damon
        .iter()
        .flat_map(|d| &d.regions)
        .filter_map(|r| {
            let (start, end) = (r.start / page, r.end.div_ceil(page));
            (end > start && end <= u32::MAX as u64).then_some(fraglab_mm::damon::StartRegion {
                start: start as u32,
                end: end as u32,
                nr_accesses: r.nr_accesses,
                age: r.age,
            })
        })
        .collect();
    v.sort_by_key(|r| (r.start, r.end));
    v
}

/// The regions (pfns) the kernel's pageout scheme was applied to in the aggregation the
/// snapshot recorded (`DamonCapture::applied`), in order: where the booted kdamond's sweep
/// resumes ([`fraglab_mm::damon::DamonConfig::start_applied`]).
pub fn damon_applied(header: &SnapshotHeader) -> Vec<(u32, u32)> {
    let page = fraglab_mm::types::PAGE_SIZE;
    header
        .damon
        .iter()
        .flat_map(|d| &d.applied)
        .map(|r| ((r.start / page), r.end.div_ceil(page)))
        .filter(|&(s, e)| e > s && e <= u32::MAX as u64)
        .map(|(s, e)| (s as u32, e as u32))
        .collect()
}

/// Puts `loaded` in the cache as the reconstruction of the file at `path` as it is now, so
/// that specs naming that file boot in it without reading it (tests; a tool that has already
/// reconstructed a snapshot).
pub fn preload(path: &Path, loaded: Loaded) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let key: CacheKey = (
        std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        meta.len(),
        meta.modified().ok(),
    );
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    cache.retain(|(k, _)| *k != key);
    cache.push((key, Arc::new(loaded)));
    Ok(())
}

/// A [`Loaded`] from a header and reconstruction already in memory (tests, and `load`).
pub fn loaded(path: &Path, header: SnapshotHeader, rec: Reconstruction) -> Result<Loaded, String> {
    let restore = to_restore(&rec).map_err(|e| format!("{}: reconstruction: {e}", path.display()))?;
    Ok(Loaded {
        path: path.to_path_buf(),
        header,
        reconstruction: rec,
        restore,
    })
}

/// The match report as the result schema keeps it (`RunResult::snapshot`).
pub fn snapshot_match(file: &str, r: &MatchReport) -> fraglab_spec::result::SnapshotMatch {
    let rows = |v: &[fraglab_state::reconstruct::MatchRow]| {
        v.iter()
            .map(|m| (m.what.clone(), m.captured, m.reconstructed))
            .collect()
    };
    fraglab_spec::result::SnapshotMatch {
        file: file.to_string(),
        blocks: rows(&r.blocks),
        free_by_type: rows(&r.free_by_type),
        free_by_order: rows(&r.free_by_order),
        mixed_blocks: r.mixed_blocks,
        content_disagrees: r.content_disagrees,
        swaps: r.swaps,
        l1_before: r.l1_before,
        l1_after: r.l1_after,
    }
}

/// The match report as printed on stderr: one line per row that does not match exactly, and a
/// summary.
pub fn match_report_text(path: &Path, r: &MatchReport) -> String {
    let mut out = format!("snapshot {}: reconstruction\n", path.display());
    for (what, rows) in [
        ("blocks per type", &r.blocks),
        ("free chunks per type and order", &r.free_by_type),
        ("free chunks per order", &r.free_by_order),
    ] {
        let exact = rows.iter().filter(|m| m.captured == m.reconstructed).count();
        out += &format!("  {what}: {exact} of {} rows exact\n", rows.len());
        for m in rows.iter().filter(|m| m.captured != m.reconstructed) {
            out += &format!(
                "    {}: captured {}, reconstructed {}\n",
                m.what, m.captured, m.reconstructed
            );
        }
    }
    out += &format!(
        "  mixed blocks {}, blocks whose content disagrees with their type {}, swaps {} (L1 error {} -> {})\n",
        r.mixed_blocks, r.content_disagrees, r.swaps, r.l1_before, r.l1_after
    );
    out
}

fn pfn32(v: u64, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{what} at pfn {v:#x} is beyond the 32-bit pfn limit"))
}

/// Ranges clipped to the zones' spans, split at zone boundaries.
fn clip(ranges: &[[u64; 2]], zones: &[ZoneConfig]) -> Vec<[u32; 2]> {
    let mut out = Vec::new();
    for &[s, e] in ranges {
        for z in zones {
            let (zs, ze) = (z.start_pfn as u64, z.start_pfn as u64 + z.spanned as u64);
            let (a, b) = (s.max(zs), e.min(ze));
            if a < b {
                out.push([a as u32, b as u32]);
            }
        }
    }
    out
}

/// The model's [`Restore`] of a reconstruction (module doc).
pub fn to_restore(rec: &Reconstruction) -> Result<Restore, String> {
    let mut zones = Vec::new();
    for z in &rec.zones {
        let zone_type = ZoneType::from_name(&z.name)
            .filter(|t| *t != ZoneType::Device)
            .ok_or_else(|| format!("zone {:?}: not a zone the model has", z.name))?;
        if z.spanned == 0 {
            continue;
        }
        let spanned = pfn32(z.spanned, "zone span")?;
        zones.push(ZoneConfig {
            zone_type,
            nid: z.node,
            start_pfn: pfn32(z.start_pfn, "zone start")?,
            spanned,
            present: spanned,
            managed: spanned,
        });
    }
    let holes = clip(&rec.holes, &zones);
    let reserved = clip(&rec.reserved, &zones);
    for z in &mut zones {
        let (zs, ze) = (z.start_pfn, z.start_pfn + z.spanned);
        let inside = |r: &[[u32; 2]]| -> u32 {
            r.iter()
                .filter(|[a, _]| *a >= zs && *a < ze)
                .map(|[a, b]| b - a)
                .sum()
        };
        z.present = z.spanned - inside(&holes);
        z.managed = z.present.saturating_sub(inside(&reserved));
    }
    let end_pfn = MachineConfig {
        cpu_node: Vec::new(),
        zones: zones.clone(),
        nr_cpus: 1,
    }
    .end_pfn();
    let nr_blocks = (end_pfn as usize).div_ceil(PAGEBLOCK_NR_PAGES as usize);
    let mut block_types = Vec::with_capacity(nr_blocks);
    for b in 0..nr_blocks {
        block_types.push(match rec.block_types.get(b).copied().unwrap_or(1) {
            0 => MigrateType::Unmovable,
            1 | 4 => MigrateType::Movable,
            2 => MigrateType::Reclaimable,
            3 => MigrateType::HighAtomic,
            t => return Err(format!("pageblock {b}: type {t} is not a migratetype (0..=4)")),
        });
    }
    let free = rec
        .free
        .iter()
        .map(|c| Ok((pfn32(c.pfn, "free chunk")?, c.order)))
        .collect::<Result<Vec<_>, String>>()?;
    let mut folios = Vec::with_capacity(rec.folios.len());
    for f in &rec.folios {
        let pfn = pfn32(f.pfn, "folio")?;
        let (kind, alloc_mt, shmem) = match f.kind {
            RKind::Anon => (FolioKind::Anon, MigrateType::Movable, false),
            RKind::File => (FolioKind::File, MigrateType::Movable, false),
            RKind::Shmem => (FolioKind::File, MigrateType::Movable, true),
            RKind::SlabReclaimable => (FolioKind::Slab, MigrateType::Reclaimable, false),
            RKind::SlabUnreclaimable => (FolioKind::Slab, MigrateType::Unmovable, false),
            RKind::PageTable => (FolioKind::PageTable, MigrateType::Unmovable, false),
            RKind::Hugetlb if f.order as u32 == fraglab_mm::hugetlb::HUGETLB_ORDER => {
                (FolioKind::Hugetlb, MigrateType::Movable, false)
            }
            RKind::Hugetlb | RKind::Kernel => (FolioKind::Kernel, MigrateType::Unmovable, false),
        };
        let proto = RestoreFolio {
            alloc_mt,
            active: f.active,
            referenced: f.referenced,
            unevictable: f.unevictable,
            mlocked: false,
            shmem,
            dirty: f.dirty,
            ..RestoreFolio::new(pfn, f.order, kind)
        };
        if f.order as u32 <= MAX_PAGE_ORDER {
            folios.push(proto);
        } else {
            // A gigantic page: order-10 kernel pieces.
            let piece = 1u32 << MAX_PAGE_ORDER;
            for k in 0..(1u32 << (f.order as u32 - MAX_PAGE_ORDER)) {
                folios.push(RestoreFolio::new(
                    pfn + k * piece,
                    MAX_PAGE_ORDER as u8,
                    FolioKind::Kernel,
                ));
            }
        }
    }
    Ok(Restore {
        zones,
        reserved,
        holes,
        block_types,
        free,
        free_reported: None,
        folios,
        pre_mappings: Vec::new(),
    })
}

/// Parses a knob's recorded text (a sysfs choice file's bracketed word or the plain value, a
/// list as whitespace-separated integers) by its declaration; `None` if the declaration does
/// not accept it.
fn knob_value(kind: KnobKind, text: &str) -> Option<KnobValue> {
    let word = match (text.find('['), text.find(']')) {
        (Some(a), Some(b)) if a < b => text[a + 1..b].trim(),
        _ => text.trim(),
    };
    match kind {
        KnobKind::Int { .. } | KnobKind::ZeroOrInt { .. } => {
            let v: i64 = word.parse().ok()?;
            kind.int_ok(v).then_some(KnobValue::Int(v))
        }
        KnobKind::Choice(words) => words.contains(&word).then(|| KnobValue::Str(word.to_string())),
        KnobKind::IntList { len, .. } => {
            let v: Vec<i64> = word
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            (v.len() == len && v.iter().all(|&x| kind.int_ok(x))).then_some(KnobValue::List(v))
        }
    }
}

/// The spec as boot reads it with a snapshot: every knob boot reads that the spec does not set
/// takes the snapshot's recorded value (module doc); `cpus` the snapshot's unless given. Returns
/// the notes about recorded values that were skipped.
pub fn effective_spec(spec: &Spec, header: &SnapshotHeader) -> (Spec, Vec<String>) {
    let mut s = spec.clone();
    let mut notes = Vec::new();
    for k in KNOBS.iter().filter(|k| k.read.is_read()) {
        if s.knobs.contains_key(k.name) {
            continue;
        }
        let Some(text) = header.knobs.get(k.name) else {
            continue;
        };
        match knob_value(k.kind, text) {
            Some(v) => {
                s.knobs.insert(k.name.to_string(), v);
            }
            None => notes.push(format!(
                "the snapshot's {} = {text:?} is not {}: the kernel default is used",
                k.name,
                k.kind.expected()
            )),
        }
    }
    if let Some(snap) = &spec.machine.snapshot {
        if !snap.cpus_given && (1..=256).contains(&header.nr_cpus) {
            s.machine.cpus = header.nr_cpus;
        }
    }
    // Free page reporting (§32.1): the machine's device as the snapshot
    // recorded it, unless the spec gives `page_reporting_order` (an order or "off").
    if !spec.machine.page_reporting_given {
        s.machine.page_reporting_order = header.page_reporting_order();
    }
    (s, notes)
}
