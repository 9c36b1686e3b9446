//! `fraglab_sim::replay` (issue 21 item 5): a synthetic ftrace text stream replayed through the
//! simulated allocator. docs/model §15 gives the event formats; §6.3–§6.5 the fallbacks the
//! report counts; §30 the recorded state the replay starts from.

use std::path::{Path, PathBuf};

use fraglab_mm::trace::{TraceEvent, TraceRecord};
use fraglab_mm::Gfp;
use fraglab_sim::replay::{replay, Policy};
use fraglab_spec::parse_spec;

const MACHINE: &str = r#"
[machine]
cpus = 2
[[machine.zone]]
name = "DMA32"
start_pfn = 4096
spanned = 8192
[knobs]
"vm.min_free_kbytes" = 512
"#;

fn policy(label: &str, extra: &str) -> Policy {
    Policy {
        label: label.into(),
        spec: parse_spec(&format!("{MACHINE}{extra}"), "t.toml").unwrap(),
    }
}

/// Builds a trace text.
struct Trace {
    text: String,
    ts: u64,
}

impl Trace {
    fn new() -> Trace {
        Trace {
            text: "# tracer: nop\n#\n".into(),
            ts: 1_000_000_000,
        }
    }
    fn ev(&mut self, cpu: u32, pid: u32, ev: TraceEvent) {
        self.ts += 1000;
        TraceRecord::new(self.ts, cpu, pid, ev)
            .with_comm("worker")
            .render(&mut self.text);
    }
    fn alloc(&mut self, pfn: u32, order: u32, gfp: Gfp) {
        self.ev(
            pfn & 1,
            100,
            TraceEvent::MmPageAlloc {
                pfn: Some(pfn),
                order,
                gfp,
                migratetype: gfp.migratetype() as i32,
            },
        );
    }
    fn free(&mut self, pfn: u32, order: u32) {
        self.ev(0, 100, TraceEvent::MmPageFree { pfn, order });
    }
    /// mm_page_free_batched: mm_page_free's line with the event renamed (its format is
    /// "page=%p pfn=0x%lx order=0").
    fn free_batched(&mut self, pfn: u32) {
        let mut l = String::new();
        self.ts += 1000;
        TraceRecord::new(self.ts, 1, 100, TraceEvent::MmPageFree { pfn, order: 0 })
            .with_comm("worker")
            .render(&mut l);
        self.text
            .push_str(&l.replacen(": mm_page_free: ", ": mm_page_free_batched: ", 1));
    }
    fn raw(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
    }
    fn write(&self, name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fraglab-replay-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, &self.text).unwrap();
        p
    }
}

const MOVABLE: Gfp = Gfp::GFP_HIGHUSER_MOVABLE;
const KERNEL: Gfp = Gfp::GFP_KERNEL;

/// Allocations and frees of every kind the replay matches, and the ones it only counts.
fn mixed_trace() -> Trace {
    let mut t = Trace::new();
    let base = 0x10_0000;
    // 100 movable order-0 pages: 60 freed through the PCP batch path, 20 one by one, 20 kept.
    for i in 0..100 {
        t.alloc(base + i, 0, MOVABLE);
    }
    for i in 0..60 {
        t.free_batched(base + i);
    }
    for i in 60..80 {
        t.free(base + i, 0);
    }
    // 6.18's free_unref_folios: mm_page_free from free_pages_prepare, then the batched line.
    t.alloc(base + 0x800, 0, MOVABLE);
    t.free(base + 0x800, 0);
    t.free_batched(base + 0x800);
    // 5 non-compound order-2 kernel allocations split with split_page, freed page by page.
    for k in 0..5 {
        t.alloc(base + 0x1000 + 4 * k, 2, KERNEL);
    }
    for k in 0..5 {
        for p in 0..4 {
            t.free(base + 0x1000 + 4 * k + p, 0);
        }
    }
    // One order-3 allocation freed whole.
    t.alloc(base + 0x2000, 3, Gfp(KERNEL.0 | Gfp::COMP.0));
    t.free(base + 0x2000, 3);
    // Three frees of pfns never allocated in the recording.
    for i in 0..3 {
        t.free(0x70000 + i, 0);
    }
    // A failed allocation (NULL page).
    t.ev(
        0,
        101,
        TraceEvent::MmPageAlloc {
            pfn: None,
            order: 9,
            gfp: Gfp::GFP_TRANSHUGE_LIGHT,
            migratetype: 1,
        },
    );
    // Recorded extfrag events: a fragmenting steal and a whole-block claim.
    t.ev(
        0,
        100,
        TraceEvent::MmPageAllocExtfrag {
            pfn: base + 0x3000,
            alloc_order: 0,
            fallback_order: 3,
            alloc_migratetype: 0,
            fallback_migratetype: 1,
            change_ownership: false,
        },
    );
    t.ev(
        0,
        100,
        TraceEvent::MmPageAllocExtfrag {
            pfn: base + 0x3200,
            alloc_order: 0,
            fallback_order: 9,
            alloc_migratetype: 0,
            fallback_migratetype: 1,
            change_ownership: true,
        },
    );
    // A known event the replay does not drive, an unknown event, a lost-events marker.
    t.ev(
        1,
        100,
        TraceEvent::MmPagePcpuDrain {
            pfn: base,
            order: 0,
            migratetype: 1,
        },
    );
    t.raw("          worker-100     [001] .....     2.000000: sched_switch: prev_comm=worker prev_pid=100");
    t.raw("CPU:1 [LOST 3 EVENTS]");
    t
}

#[test]
fn section_15_replay_counts_matches_and_mismatches() {
    let t = mixed_trace();
    let path = t.write("mixed.trace");
    let r = replay(&path, &[policy("sim", "")], &mut |_, _| {}).unwrap();
    assert_eq!(r.columns.len(), 2);
    assert_eq!(r.columns[0].label, "recorded");
    let c = r.columns[1].counts.clone().unwrap();
    assert_eq!(c.allocs, 107, "{c:?}");
    assert_eq!(c.recorded_failed_allocs, 1, "{c:?}");
    assert_eq!(c.sim_failed_allocs, 0, "{c:?}");
    assert_eq!(c.frees_batched, 61, "{c:?}");
    assert_eq!(c.batched_duplicates, 1, "{c:?}");
    assert_eq!(c.frees, 20 + 1 + 20 + 1 + 3, "{c:?}");
    assert_eq!(c.unmatched_frees, 3, "{c:?}");
    assert_eq!(c.partial_frees, 20, "{c:?}");
    assert_eq!(c.order_mismatches, 0, "{c:?}");
    assert_eq!(c.lost_frees, 0, "{c:?}");
    assert_eq!(c.frees_of_reclaimed, 0, "{c:?}");
    assert_eq!(c.never_freed, 20, "{c:?}");
    assert_eq!(c.never_freed_pages, 20, "{c:?}");
    assert_eq!(c.other_events, 1, "{c:?}");
    assert_eq!(c.unknown_lines, 1, "{c:?}");
    assert_eq!(c.lost_events, 3, "{c:?}");
    // The recorded side: the two extfrag events.
    let rec = &r.columns[0].extfrag;
    assert_eq!(
        (rec.events, rec.fragmenting, rec.claims, rec.steals),
        (2, 1, 1, 1)
    );
    assert_eq!(rec.by_fallback_order[3], 1);
    assert_eq!(rec.by_types.get("Unmovable->Movable"), Some(&2));
    // The simulated end state: exactly the 20 kept movable pages are allocated by the replay.
    let sim = &r.columns[1];
    let free: u64 = sim.end_state.free_pages_by_order.unwrap().iter().sum();
    // The baseline: a trace whose one event frees a pfn nothing allocated (an unmatched free,
    // no change to the machine); a trace with no event at all is refused (issue 34).
    let mut baseline = Trace::new();
    baseline.free(0x7000, 0);
    let zero = replay(
        &baseline.write("baseline.trace"),
        &[policy("sim", "")],
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(zero.columns[1].counts.as_ref().unwrap().unmatched_frees, 1);
    let e = replay(
        &Trace::new().write("empty.trace"),
        &[policy("sim", "")],
        &mut |_, _| {},
    )
    .err()
    .unwrap();
    assert!(
        e.0.contains("empty.trace: no event the replay reads") && e.0.contains("nothing to replay"),
        "{}",
        e.0
    );
    let free0: u64 = zero.columns[1]
        .end_state
        .free_pages_by_order
        .unwrap()
        .iter()
        .sum();
    // PCP lists hold some freed pages (not in the free lists), so compare with a margin of the
    // PCP's size but never more than the 20 pages kept.
    assert!(free < free0 && free0 - free >= 20, "free {free} vs {free0}");
    // The table: recorded column first, n/a where the recording has no figure.
    let text = fraglab_sim::replay::format_text(&r);
    assert!(text.contains("extfrag events"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("compact success") && l.contains("n/a")),
        "{text}"
    );
}

#[test]
fn section_15_replay_split_page_pieces_free_the_simulated_pages() {
    // One order-3 unmovable allocation freed as its eight order-0 pages: afterwards the
    // simulator holds nothing of it.
    let mut t = Trace::new();
    t.alloc(0x20_0000, 3, KERNEL);
    for p in 0..8 {
        t.free(0x20_0000 + p, 0);
    }
    let r = replay(&t.write("split.trace"), &[policy("sim", "")], &mut |_, _| {}).unwrap();
    let c = r.columns[1].counts.clone().unwrap();
    assert_eq!(
        (c.partial_frees, c.never_freed, c.unmatched_frees),
        (8, 0, 0),
        "{c:?}"
    );
    // Freed halfway: four pages remain allocated.
    let mut t = Trace::new();
    t.alloc(0x20_0000, 3, KERNEL);
    t.free(0x20_0004, 2);
    let r = replay(&t.write("split2.trace"), &[policy("sim", "")], &mut |_, _| {}).unwrap();
    let c = r.columns[1].counts.clone().unwrap();
    assert_eq!(
        (c.partial_frees, c.never_freed, c.never_freed_pages),
        (1, 1, 4),
        "{c:?}"
    );
}

#[test]
fn section_15_replay_lost_free_frees_the_old_folio() {
    let mut t = Trace::new();
    t.alloc(0x30_0000, 0, MOVABLE);
    t.alloc(0x30_0000, 0, MOVABLE);
    t.free(0x30_0000, 0);
    let r = replay(&t.write("lost.trace"), &[policy("sim", "")], &mut |_, _| {}).unwrap();
    let c = r.columns[1].counts.clone().unwrap();
    assert_eq!(
        (c.lost_frees, c.never_freed, c.unmatched_frees),
        (1, 0, 0),
        "{c:?}"
    );
}

#[test]
fn section_15_replay_malformed_line_names_file_and_line() {
    let mut t = Trace::new();
    t.alloc(0x10_0000, 0, MOVABLE);
    t.raw("          worker-100     [000] .....     1.500000: mm_page_alloc: page=ffffea0000000000 pfn=0xzz order=0 migratetype=1 gfp_flags=GFP_KERNEL");
    let path = t.write("bad.trace");
    let e = replay(&path, &[policy("sim", "")], &mut |_, _| {})
        .unwrap_err()
        .to_string();
    // Two comment lines, the alloc, then the bad line.
    assert!(e.contains(&format!("{}:4:", path.display())), "{e}");
    assert!(e.contains("mm_page_alloc"), "{e}");
}

#[test]
fn section_15_replay_is_deterministic() {
    let path = mixed_trace().write("det.trace");
    let a = replay(&path, &[policy("a", "")], &mut |_, _| {}).unwrap();
    let b = replay(&path, &[policy("a", "")], &mut |_, _| {}).unwrap();
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

/// A fragmenting stream: movable pages fill most of memory, every fourth one is freed (holes in
/// every movable block, too few for an unmovable claim, §6.3), then unmovable pages arrive until
/// the free pageblocks are gone and they must steal.
fn fragmenting_trace(path: &Path) {
    let mut t = Trace::new();
    let base = 0x40_0000u32;
    let (movable, unmov) = (5200u32, 3200u32);
    for i in 0..movable {
        t.alloc(base + i, 0, MOVABLE);
    }
    for i in (0..movable).step_by(4) {
        t.free(base + i, 0);
    }
    for i in 0..unmov {
        t.alloc(base + 0x10_0000 + i, 0, KERNEL);
    }
    std::fs::write(path, &t.text).unwrap();
}

/// What the model shows (measured: 282 fragmenting fallbacks under defrag_mode 0, 249 under 1):
/// a modest cut. The movable memory is anonymous without swap, so kswapd's order-9 wake (§8 D6)
/// reclaims nothing and compaction never becomes suitable on the near-full machine (§9.2 step 3);
/// what remains of defrag_mode is NOFRAGMENT in the fast and slow paths (D1, D3) until the slow
/// path drops it (D5), after which the order-0 requests steal as under 0.
#[test]
fn section_6_5_replay_defrag_mode_cuts_fragmenting_fallbacks() {
    let path = std::env::temp_dir().join(format!("fraglab-replay-frag-{}.trace", std::process::id()));
    fragmenting_trace(&path);
    let r = replay(
        &path,
        &[
            policy("dm0", "\"vm.defrag_mode\" = 0\n"),
            policy("dm1", "\"vm.defrag_mode\" = 1\n"),
        ],
        &mut |_, _| {},
    )
    .unwrap();
    let (d0, d1) = (&r.columns[1].extfrag, &r.columns[2].extfrag);
    assert!(d0.fragmenting > 0, "defrag_mode 0 falls back fragmenting: {d0:?}");
    assert!(
        d1.fragmenting < d0.fragmenting,
        "defrag_mode 1 has fewer fragmenting fallbacks: {} vs {}",
        d1.fragmenting,
        d0.fragmenting
    );
}

/// The recorded column's end state comes from the trace header's /proc files (§16.2:
/// pagetypeinfo's block counts, buddyinfo's free chunks); read back from the model's own
/// renderings they give the model's census.
#[test]
fn section_30_4_recorded_end_state_reads_pagetypeinfo_and_buddyinfo() {
    use fraglab_mm::vmstat::{render_buddyinfo, render_pagetypeinfo};
    let p = policy("sim", "");
    let mm = fraglab_sim::boot(&p.spec).unwrap();
    let views = mm.zone_views();
    let mut proc_end = std::collections::BTreeMap::new();
    proc_end.insert("pagetypeinfo".to_string(), render_pagetypeinfo(0, &views));
    proc_end.insert("buddyinfo".to_string(), render_buddyinfo(0, &views));
    let end = fraglab_sim::replay::report::recorded_end_state(&proc_end);
    let s = fraglab_sim::snapshot::sample(&mm, 0);
    assert_eq!(end.blocks_by_type.unwrap().to_vec(), s.blocks_by_type);
    assert_eq!(end.free_pages_by_order.unwrap().to_vec(), s.free_by_order);
    // No page_owner: no mixed-block section, n/a.
    assert_eq!(end.mixed_blocks, None);
    // With page_owner's section (6.18 layout, CMA column included in the total only).
    let mut pti = proc_end["pagetypeinfo"].clone();
    pti.push_str("\nNumber of mixed blocks    Unmovable      Movable  Reclaimable   HighAtomic          CMA      Isolate \nNode 0, zone      DMA            0            1            0            0            0            0 \nNode 0, zone    DMA32            2            3            1            0            1            0 \n");
    proc_end.insert("pagetypeinfo".into(), pti);
    let end = fraglab_sim::replay::report::recorded_end_state(&proc_end);
    assert_eq!(end.mixed_blocks, Some(8));
    assert_eq!(end.blocks_by_type.unwrap().to_vec(), s.blocks_by_type);
}

/// Requests the simulated machine cannot serve the way the recorded one did (a ZONE_DMA request
/// on a machine without ZONE_DMA, an order-10 request, a request from a CPU the machine does
/// not have) are replayed or counted, never a crash; an order above MAX_PAGE_ORDER is a
/// malformed line.
#[test]
fn section_15_replay_odd_requests_are_counted_not_fatal() {
    let mut t = Trace::new();
    t.alloc(0x50_0000, 0, Gfp(Gfp::GFP_KERNEL.0 | Gfp::DMA.0));
    t.alloc(0x50_0400, 10, Gfp::GFP_HIGHUSER_MOVABLE);
    t.ev(
        7,
        0,
        TraceEvent::MmPageAlloc {
            pfn: Some(0x50_1000),
            order: 0,
            gfp: Gfp::GFP_KERNEL,
            migratetype: 0,
        },
    );
    t.free(0x50_0000, 0);
    t.free(0x50_0400, 10);
    t.free(0x50_1000, 0);
    let r = replay(&t.write("odd.trace"), &[policy("sim", "")], &mut |_, _| {}).unwrap();
    let c = r.columns[1].counts.clone().unwrap();
    assert_eq!(c.allocs, 3, "{c:?}");
    assert_eq!(c.never_freed, 0, "{c:?}");
    // More order-10 GFP_NOWAIT requests than the machine has free 4 MiB chunks: the ones the
    // simulator fails are listed by order and gfp.
    let mut t = Trace::new();
    for i in 0..200u32 {
        t.alloc(0x10_0000 + (i << 10), 10, Gfp::GFP_NOWAIT);
    }
    let r = replay(&t.write("nowait.trace"), &[policy("sim", "")], &mut |_, _| {}).unwrap();
    let c = r.columns[1].counts.clone().unwrap();
    assert!(c.sim_failed_allocs > 0, "{c:?}");
    assert_eq!(
        c.sim_failed_by.get("order 10 gfp GFP_NOWAIT"),
        Some(&c.sim_failed_allocs),
        "{c:?}"
    );
    let mut t = Trace::new();
    t.raw("          worker-100     [000] .....     1.500000: mm_page_free: page=ffffea0000000000 pfn=0x100 order=11");
    let e = replay(&t.write("order.trace"), &[policy("sim", "")], &mut |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("order.trace:3:") && e.contains("MAX_PAGE_ORDER"),
        "{e}"
    );
}

/// The committed S2 snapshot (crates/state/tests/data).
fn s2_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../state/tests/data/s2-snapshot.fsnap")
}

/// Boot from a snapshot (§30.5): given as `--snapshot` or embedded in the trace file, the
/// machine boots in its state, and a recorded free of a pfn the snapshot had allocated frees the
/// folio the simulator booted there (tracked by folio id).
#[test]
fn section_30_5_replay_from_snapshot_frees_boot_folios() {
    use fraglab_sim::replay::{replay_with, ReplayOptions};
    use fraglab_state::snapshot::Snapshot;
    use fraglab_state::trace::{TraceHeader, TraceWriter};
    let fixture = s2_fixture();
    // A kernel folio of the snapshot, and its pfn.
    let spec = parse_spec(
        &format!("[machine]\nsnapshot = \"{}\"\n", fixture.display()),
        "fixture.toml",
    )
    .unwrap();
    let mm = fraglab_sim::boot(&spec).unwrap();
    let (pfn, order) = mm
        .folios
        .live()
        .find(|(_, f)| f.kind == fraglab_mm::folio::FolioKind::Kernel)
        .map(|(_, f)| (f.pfn, f.order as u32))
        .unwrap();
    let mut t = Trace::new();
    t.free(pfn, order);
    t.alloc(0x7000_0000, 0, MOVABLE);
    let path = t.write("snap.trace");
    let r = replay_with(
        &path,
        &[policy("sim", "")],
        &ReplayOptions {
            snapshot: Some(fixture.clone()),
            ignore_embedded: false,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let c = r.columns[1].counts.clone().unwrap();
    assert_eq!(
        (c.snapshot_frees, c.unmatched_frees, c.frees_of_reclaimed),
        (1, 0, 0),
        "{c:?}"
    );
    // The machine is the snapshot's, not the config's 32 MiB.
    let blocks: u64 = r.columns[1].end_state.blocks_by_type.unwrap().iter().sum();
    assert!(blocks > 1000, "{blocks} pageblocks");
    // Without the snapshot the same free matches nothing.
    let r = replay(&path, &[policy("sim", "")], &mut |_, _| {}).unwrap();
    assert_eq!(r.columns[1].counts.as_ref().unwrap().unmatched_frees, 1);
    // The same lines in a trace file that embeds the snapshot: booted from it by default.
    let snap = Snapshot::read(&fixture).unwrap();
    let tpath = path.with_extension("ftrace");
    let header = TraceHeader {
        events: vec!["kmem:mm_page_alloc".into(), "kmem:mm_page_free".into()],
        ..Default::default()
    };
    let mut w = TraceWriter::create(&tpath, &header, Some(&snap)).unwrap();
    for l in t.text.lines() {
        w.line(l).unwrap();
    }
    w.finish(&header).unwrap();
    let r = replay(&tpath, &[policy("sim", "")], &mut |_, _| {}).unwrap();
    let c = r.columns[1].counts.clone().unwrap();
    assert_eq!((c.snapshot_frees, c.unmatched_frees), (1, 0), "{c:?}");
    // Its header lists the events without mm_page_alloc_extfrag: the recorded extfrag rows
    // are n/a.
    assert!(!r.columns[0].extfrag_measured);
    let text = fraglab_sim::replay::format_text(&r);
    let row = text.lines().find(|l| l.contains("extfrag events")).unwrap();
    assert!(row.contains("n/a"), "{row}");
    let r = replay_with(
        &tpath,
        &[policy("sim", "")],
        &ReplayOptions {
            snapshot: None,
            ignore_embedded: true,
        },
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(r.columns[1].counts.as_ref().unwrap().unmatched_frees, 1);
}

/// A compaction line as the live 6.18 kernel printed it (docs/model §15.2), which the
/// strict parser refuses (the range start has bit 63 set): read for its counts, not an error.
#[test]
fn section_15_replay_reads_the_kernels_odd_fast_isolate_line() {
    let mut t = Trace::new();
    t.raw("     fraglab-rec-13759   [000] ..... 33141.060927: mm_compaction_fast_isolate_freepages: range=(0x80000000003dd000 ~ 0x3dd000) nr_scanned=12 nr_taken=0");
    t.raw("     fraglab-rec-13759   [000] ..... 33141.060928: mm_compaction_fast_isolate_freepages: range=(0x80000000003dd000 ~ 0x3dd000) nr_scanned=zz nr_taken=0");
    let e = replay(&t.write("fast.trace"), &[policy("sim", "")], &mut |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("fast.trace:4:"), "{e}");
    let mut t = Trace::new();
    t.raw("     fraglab-rec-13759   [000] ..... 33141.060927: mm_compaction_fast_isolate_freepages: range=(0x80000000003dd000 ~ 0x3dd000) nr_scanned=12 nr_taken=0");
    let r = replay(&t.write("fast2.trace"), &[policy("sim", "")], &mut |_, _| {}).unwrap();
    assert_eq!(r.columns[1].counts.as_ref().unwrap().lenient_lines, 1);
    assert_eq!(r.columns[0].compaction.free_scanned, Some(12));
}

/// Fragmentation blame in a replay (issue 37): with `[run] blame` in a policy's spec, the
/// recorded allocations are sources by `COMM GFP_FLAGS`; the unmovable stream that must steal
/// is blamed for every steal the column counts, the movable one for none; the text report
/// ranks them; without blame the column has no section.
#[test]
fn replay_blames_recorded_allocations_by_comm_and_gfp() {
    let path = std::env::temp_dir().join(format!("fraglab-replay-blame-{}.trace", std::process::id()));
    fragmenting_trace(&path);
    let r = replay(
        &path,
        &[policy("plain", ""), policy("blamed", "[run]\nblame = true\n")],
        &mut |_, _| {},
    )
    .unwrap();
    assert!(r.columns[0].blame.is_none() && r.columns[1].blame.is_none());
    let b = r.columns[2].blame.as_ref().expect("the blamed policy's sources");
    let source = |name: &str| b.iter().find(|s| s.source == name);
    let ev = |s: &fraglab_spec::result::BlameSource, k: &str| s.events.get(k).copied().unwrap_or(0);
    let kernel = source("worker GFP_KERNEL").unwrap_or_else(|| panic!("{b:?}"));
    let movable = source("worker GFP_HIGHUSER_MOVABLE").unwrap_or_else(|| panic!("{b:?}"));
    let ext = &r.columns[2].extfrag;
    assert!(ext.steals > 0, "{ext:?}");
    assert_eq!(
        ev(kernel, "steal"),
        ext.steals,
        "every steal is the unmovable stream's"
    );
    assert!(kernel.mixed_blocks > 0);
    assert_eq!(ev(movable, "steal"), 0);
    let total: u64 = b
        .iter()
        .map(|s| ev(s, "claim_partial") + ev(s, "claim_whole"))
        .sum();
    assert_eq!(total, ext.claims, "claims over the sources = the column's");
    let text = fraglab_sim::replay::format_text(&r);
    let at = text
        .find("# blame, blamed")
        .expect("the ranked table in the text report");
    assert!(text[at..].contains("worker GFP_KERNEL"), "{text}");
    // Blame changes nothing else: the blamed column's figures are the plain one's.
    assert_eq!(r.columns[1].extfrag, r.columns[2].extfrag);
    assert_eq!(r.columns[1].compaction, r.columns[2].compaction);
    assert_eq!(r.columns[1].end_state, r.columns[2].end_state);
    std::fs::remove_file(&path).unwrap();
}
