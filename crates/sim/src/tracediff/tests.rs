use super::*;

const FIXTURE: &str = include_str!("kernel-fixture.txt");

fn side(text: &str, from_ns: Option<u64>) -> SideSummary {
    let mut r = SideReader::new("k.txt", from_ns);
    for (i, l) in text.lines().enumerate() {
        if l.starts_with('#') {
            continue;
        }
        r.line(l, || format!("k.txt:{}", i + 1));
    }
    r.finish()
}

#[test]
fn fixture_lines_parse() {
    // Every diff-event line of the fixture but the deliberately broken last one is read by
    // the model's parser.
    let bad: Vec<&str> = FIXTURE
        .lines()
        .filter(|l| event_name(l).is_some_and(is_diff_event))
        .filter(|l| parse_trace_line(l).is_none())
        .collect();
    assert_eq!(bad.len(), 1, "{bad:#?}");
    assert!(bad[0].contains("status=bogus"));
}

#[test]
fn fixture_episodes() {
    let s = side(FIXTURE, None);
    assert_eq!(s.phase, "marker at 100.100000 s");
    // The two extfrag lines came before the marker.
    assert_eq!(s.skipped_before_phase, 2);
    assert_eq!(s.totals.get("extfrag"), None);
    assert_eq!(s.malformed, 1);
    assert!(
        s.malformed_examples[0].starts_with("k.txt:31: mm_compaction_end not read"),
        "{:?}",
        s.malformed_examples
    );
    assert_eq!(s.lost_events, 7);
    assert_eq!(s.compaction_runs, 3);
    let c = &s.compaction;
    assert_eq!(c[0].trigger, "direct");
    assert_eq!((c[0].order, c[0].prio), (9, Some(2)));
    assert_eq!(c[0].zone, "Normal");
    assert_eq!(c[0].start_ns, 100_001_000);
    assert_eq!(
        (c[0].migrate_pfn, c[0].free_pfn),
        ([0x100000, 0x100200], [0x13fe00, 0x13fe00])
    );
    assert_eq!(
        (c[0].scanned(), c[0].migrate_isolated, c[0].free_isolated),
        (612, 32, 32)
    );
    assert_eq!((c[0].migrated, c[0].migrate_failed), (30, 2));
    assert_eq!(c[0].status, "partial_skipped");
    assert!(!c[0].sync);
    assert_eq!(
        (c[1].trigger.as_str(), c[1].order, c[1].status.as_str()),
        ("kcompactd", 9, "success")
    );
    assert_eq!(c[1].scanned(), 512);
    // The run whose end is malformed stays open: a manual run of order -1, unfinished.
    assert_eq!(
        (c[2].trigger.as_str(), c[2].order, c[2].status.as_str()),
        ("manual", -1, UNFINISHED)
    );
    assert_eq!(c[2].zone, "pfn:0x100000");
    assert_eq!(s.reclaim_episodes, 2);
    let r = &s.reclaim;
    assert_eq!(
        (r[0].kind.as_str(), r[0].order, r[0].scanned, r[0].reclaimed),
        ("direct", 9, 32, 30)
    );
    assert_eq!(
        (r[1].kind.as_str(), r[1].order, r[1].scanned, r[1].reclaimed),
        ("kswapd", 3, 64, 60)
    );
    assert_eq!(s.totals["defer_compaction"], 1);
    assert_eq!(s.totals["kcompactd_wake"], 1);
    assert_eq!(s.totals["wakeup_kcompactd"], 1);
    assert_eq!(s.totals["compact_migrated"], 30);
    assert_eq!(s.hist["compact_by_trigger"]["direct"], 1);
    assert_eq!(s.hist["compact_scanned_per_run"]["512-1023"], 2);
    assert_eq!(s.hist["defer_compaction_by_order"]["9"], 1);
}

#[test]
fn from_ts_wins_over_the_marker() {
    let s = side(FIXTURE, Some(100_000_150_000));
    assert_eq!(s.phase, "from 100.000150 s");
    assert_eq!(s.skipped_before_phase, 1);
    assert_eq!(s.totals["extfrag"], 1);
    assert_eq!(s.hist["extfrag"]["Movable->Unmovable not_claimed"], 1);
    // Times are relative to the given start.
    assert_eq!(s.compaction[0].start_ns, 200_001_000 - 150_000);
}

#[test]
fn buckets_and_factors() {
    assert_eq!(bucket(0), "0");
    assert_eq!(bucket(1), "1");
    assert_eq!(bucket(3), "2-3");
    assert_eq!(bucket(512), "512-1023");
    assert_eq!(factor(0, 1), Some(1.0));
    assert_eq!(factor(0, 2), None);
    assert_eq!(factor(10, 15), Some(1.5));
    assert!(!diverges(10, 15));
    assert!(diverges(10, 16));
    let mut v = vec!["16-31", "2-3", "0", "-1", "9", "success"];
    v.sort_by_key(|b| bucket_key(b));
    assert_eq!(v, ["-1", "0", "2-3", "9", "16-31", "success"]);
}

#[test]
fn diff_of_a_trace_with_itself_has_no_divergence() {
    let d = diff(side(FIXTURE, None), side(FIXTURE, None), 0);
    assert_eq!(d.first_divergence, None);
    assert_eq!(d.largest_divergence, None);
    let t = render_text(&d);
    assert!(t.contains("first divergence: none\n"), "{t}");
    assert!(t.contains("largest divergence: none\n"), "{t}");
    assert!(
        t.contains("total compaction_runs: kernel=3 sim=3 ratio=1.000 factor=x1.00\n"),
        "{t}"
    );
}

#[test]
fn divergences_are_found_and_labelled() {
    // The "sim" side: the direct run scans 4x as much, and kswapd reclaims nothing.
    let sim = FIXTURE
        .replace("nr_scanned=512 nr_taken=32", "nr_scanned=2048 nr_taken=32")
        .replace("nr_scanned=64 nr_reclaimed=60", "nr_scanned=64 nr_reclaimed=0");
    let d = diff(side(FIXTURE, None), side(&sim, None), 1);
    let f = d.first_divergence.clone().expect("diverges");
    assert_eq!(f.label, "compact[0]");
    assert_eq!(f.reasons, ["scanned kernel=612 sim=2148 (x3.51)"]);
    let r = d.first_reclaim_divergence.clone().expect("reclaim diverges");
    assert_eq!(r.label, "reclaim[1]");
    assert_eq!(r.reasons, ["reclaimed kernel=60 sim=0 (xinf)"]);
    let l = d.largest_divergence.clone().expect("largest");
    assert_eq!((l.name.as_str(), l.kernel, l.sim), ("reclaim_reclaimed", 90, 30));
    // Episodes are listed up to the limit given.
    assert_eq!(d.kernel.compaction.len(), 1);
    let t = render_text(&d);
    let line = |label: &str| {
        t.lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("{label}: {t}"))
    };
    assert!(line("first divergence: ")
        .starts_with("first divergence: compact[0] t(kernel)=+0.100001 t(sim)=+0.100001: scanned"));
    assert!(line("largest divergence: ").contains("total reclaim_reclaimed kernel=90 sim=30"));
    assert!(line("malformed kernel: ").contains("k.txt:31"));
    assert!(line("compact[0]: ").contains("| sim: direct o=9 prio=2 zone=Normal async"));
    assert!(!t.contains("compact[1]: "));
    // The JSON form holds the same.
    let j = serde_json::to_value(&d).unwrap();
    assert_eq!(j["first_divergence"]["label"], "compact[0]");
    assert_eq!(j["largest_divergence"]["name"], "reclaim_reclaimed");
}

#[test]
fn a_side_without_an_episode() {
    let sim: String = FIXTURE
        .lines()
        .filter(|l| !l.contains("kswapd0"))
        .map(|l| format!("{l}\n"))
        .collect();
    let d = diff(side(FIXTURE, None), side(&sim, None), 0);
    let r = d.first_reclaim_divergence.expect("kswapd missing");
    assert_eq!(r.label, "reclaim[1]");
    assert_eq!(r.reasons, ["the sim has no such episode"]);
    assert!(r.sim.is_none());
}

#[test]
fn read_side_reports_file_line_and_offset() {
    let dir = std::env::temp_dir().join(format!("fraglab-tracediff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("k.txt");
    std::fs::write(&p, FIXTURE).unwrap();
    let s = read_side(&p, None).unwrap();
    let off = FIXTURE.lines().take(30).map(|l| l.len() + 1).sum::<usize>();
    assert!(
        s.malformed_examples[0].starts_with(&format!(
            "{}:31 (byte offset {off}): mm_compaction_end not read",
            p.display()
        )),
        "{:?}",
        s.malformed_examples
    );
    // An overlong line is an error naming the file, the line and its byte offset (read no
    // further than the bound).
    let long = format!(
        "{FIXTURE}{}\n",
        "x".repeat(fraglab_state::trace::MAX_LINE_BYTES * 3)
    );
    std::fs::write(&p, long).unwrap();
    let e = read_side(&p, None).unwrap_err();
    let at = FIXTURE.len();
    let n = FIXTURE.lines().count() + 1;
    assert!(
        e.contains("k.txt")
            && e.contains(&format!("offset {at}"))
            && e.contains(&format!("line {n} is longer than 64 KiB")),
        "{e}"
    );
    let e = read_side(&dir.join("missing.txt"), None).unwrap_err();
    assert!(e.contains("missing.txt"), "{e}");
    // Not a trace at all: an error naming the file and its first line.
    std::fs::write(&p, "{\n  \"schema\": 3\n}\n").unwrap();
    let e = read_side(&p, None).unwrap_err();
    assert!(
        e.starts_with(&format!(
            "{}:1 (byte offset 0): not an ftrace event line",
            p.display()
        )),
        "{e}"
    );
    // A result JSON quoting trace text: its quoted line does not make it a trace.
    let quoted = FIXTURE.lines().nth(7).unwrap().replace('"', "\\\"");
    std::fs::write(&p, format!("{{\n  \"trace\": \"{quoted}\\n\"\n}}\n")).unwrap();
    let e = read_side(&p, None).unwrap_err();
    assert!(e.contains(":1 (byte offset 0): not an ftrace event line"), "{e}");
    assert!(e.contains("(1 malformed, the first at "), "{e}");
    // An empty file is an empty side.
    std::fs::write(&p, "").unwrap();
    assert_eq!(read_side(&p, None).unwrap().lines, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A kernel side with S2's kdamond (pid 83) applying its pageout scheme in two aggregations
/// (the lines as include/trace/events/damon.h and vmscan.h print them), and one
/// `reclaim_pages` of another task (MADV_PAGEOUT), which is not DAMON's.
const DAMON_KERNEL: &str = "\
# tracer: nop
           <...>-77      [000] .....   100.000000: tracing_mark_write: fraglab: measure
       kdamond.0-83      [001] .....   100.512000: damos_before_apply: ctx_idx=0 scheme_idx=0 target_idx=0 nr_regions=1187 4294967296-4317036544: 0 80
       kdamond.0-83      [001] .....   100.519000: mm_vmscan_reclaim_pages: nid=0 nr_scanned=5376 nr_reclaimed=5120 nr_dirty=256 nr_writeback=0 nr_congested=0 nr_immediate=0 nr_activate_anon=0 nr_activate_file=256 nr_ref_keep=0 nr_unmap_fail=0
       kdamond.0-83      [001] .....   100.519100: damos_before_apply: ctx_idx=0 scheme_idx=0 target_idx=0 nr_regions=1187 4317036544-4328521728: 1 83
       kdamond.0-83      [001] .....   100.523000: mm_vmscan_reclaim_pages: nid=0 nr_scanned=2816 nr_reclaimed=2816 nr_dirty=0 nr_writeback=0 nr_congested=0 nr_immediate=0 nr_activate_anon=0 nr_activate_file=0 nr_ref_keep=0 nr_unmap_fail=0
      stress-ng-4711    [000] .....   102.000000: mm_vmscan_reclaim_pages: nid=0 nr_scanned=512 nr_reclaimed=512 nr_dirty=0 nr_writeback=0 nr_congested=0 nr_immediate=0 nr_activate_anon=0 nr_activate_file=0 nr_ref_keep=0 nr_unmap_fail=0
       kdamond.0-83      [001] .....   105.632000: damos_before_apply: ctx_idx=0 scheme_idx=0 target_idx=0 nr_regions=1190 4328521728-4362076160: 0 81
";

/// The simulator's side: its kdamond (pid 62) applied nothing in the first 5 s (it starts
/// cold), then one 16 MiB region.
const DAMON_SIM: &str = "\
         fraglab-0       [000] .....     0.000000: tracing_mark_write: fraglab: measure
       kdamond.0-62      [000] .....     5.000000: damos_before_apply: ctx_idx=0 scheme_idx=0 target_idx=0 nr_regions=1024 16777216-33554432: 0 12
       kdamond.0-62      [000] .....     5.000000: mm_vmscan_reclaim_pages: nid=0 nr_scanned=4096 nr_reclaimed=4096 nr_dirty=0 nr_writeback=0 nr_congested=0 nr_immediate=0 nr_activate_anon=0 nr_activate_file=0 nr_ref_keep=0 nr_unmap_fail=0
";

/// §27.2 item 6: the DAMON section's totals, bins and first divergence from kernel-format
/// `damos_before_apply` and `mm_vmscan_reclaim_pages` lines.
#[test]
fn s27_diff_damon_totals_from_kernel_text() {
    let k = side(DAMON_KERNEL, None);
    assert_eq!(k.malformed, 0, "{:?}", k.malformed_examples);
    let t = |k: &SideSummary, n: &str| k.totals.get(n).copied().unwrap_or(0);
    assert_eq!(t(&k, "damon_regions_applied"), 3);
    // 21 + 11 + 32 MiB of region span.
    assert_eq!(t(&k, "damon_bytes_applied"), 64 << 20);
    assert_eq!(t(&k, "damon_reclaim_pages_calls"), 2);
    assert_eq!(t(&k, "damon_pages_scanned"), 8192);
    assert_eq!(t(&k, "damon_pages_reclaimed"), 7936);
    assert_eq!(t(&k, "damon_pages_activated"), 256);
    assert_eq!(
        (
            t(&k, "reclaim_pages_other_calls"),
            t(&k, "reclaim_pages_other_reclaimed")
        ),
        (1, 512)
    );
    assert_eq!(k.hist["damon_age_at_apply"]["64-127"], 3);
    // Bins of 5 s from the marker: the first aggregation in bin 0, the second in bin 1.
    assert_eq!(k.damon.len(), 2);
    let b = &k.damon[0];
    assert_eq!(
        (
            b.regions,
            b.bytes,
            b.calls,
            b.reclaimed,
            b.activated,
            b.age_min,
            b.age_max
        ),
        (2, 32 << 20, 2, 7936, 256, Some(80), Some(83))
    );
    let b = &k.damon[1];
    assert_eq!(
        (b.start_ns, b.regions, b.bytes, b.calls),
        (5_000_000_000, 1, 32 << 20, 0)
    );
    assert_eq!(b.cum_reclaimed, 7936);

    let s = side(DAMON_SIM, None);
    assert_eq!(t(&s, "damon_bytes_applied"), 16 << 20);
    let d = diff(k, s, 0);
    let row = d
        .totals
        .iter()
        .find(|r| r.name == "damon_pages_reclaimed")
        .unwrap();
    assert_eq!((row.kernel, row.sim), (7936, 4096));
    let f = d.first_damon_divergence.clone().expect("diverges");
    assert_eq!(f.label, "damon[0]");
    assert_eq!(
        f.reasons,
        [
            "bytes applied kernel=33554432 sim=0 (xinf)",
            "pages reclaimed kernel=7936 sim=0 (xinf)"
        ]
    );
    // The only divergence, so also the first of all.
    assert_eq!(
        d.first_divergence.as_ref().map(|x| x.label.as_str()),
        Some("damon[0]")
    );
    let text = render_text(&d);
    assert!(
        text.contains(
            "damon[0] +0s: kernel: regions=2 applied=32.0MiB ages=80-83 calls=2 reclaimed=7936 activated=256 cum_reclaimed=7936 | sim: regions=0 applied=0.0MiB ages=- calls=0 reclaimed=0 activated=0 cum_reclaimed=0\n"
        ),
        "{text}"
    );
    assert!(text.contains("damon[1] +5s: kernel: regions=1 applied=32.0MiB ages=81-81 calls=0 reclaimed=0 activated=0 cum_reclaimed=7936 | sim: regions=1 applied=16.0MiB ages=12-12 calls=1 reclaimed=4096 activated=0 cum_reclaimed=4096\n"), "{text}");
    assert!(
        text.contains("first damon divergence: damon[0] t(kernel)=+0.000000 t(sim)=+0.000000: bytes applied"),
        "{text}"
    );
    assert!(
        text.contains("total damon_bytes_applied: kernel=67108864 sim=16777216 ratio=0.250 factor=x4.00\n"),
        "{text}"
    );
    // A trace with itself: no DAMON divergence.
    let same = diff(side(DAMON_KERNEL, None), side(DAMON_KERNEL, None), 0);
    assert_eq!(same.first_damon_divergence, None);
    // Wider bins put both aggregations in one.
    let mut r = SideReader::new("k.txt", None).with_damon_bin(10_000_000_000);
    for l in DAMON_KERNEL.lines().filter(|l| !l.starts_with('#')) {
        r.line(l, String::new);
    }
    let w = r.finish();
    assert_eq!(w.damon.len(), 1);
    assert_eq!((w.damon[0].regions, w.damon[0].bytes), (3, 64 << 20));
}

/// A host trace file from a kernel without DAMON's tracepoints says so in a comment line;
/// the diff names the events that side could not record.
#[test]
fn s27_diff_names_events_the_kernel_lacked() {
    let dir = std::env::temp_dir().join(format!("fraglab-tracediff-dm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("k.txt");
    std::fs::write(
        &p,
        format!(
            "# fraglab host trace: trace_clock=mono\n{} damon:damos_before_apply\n{FIXTURE}",
            fraglab_state::trace::MISSING_EVENT_PREFIX
        ),
    )
    .unwrap();
    let k = read_side(&p, None).unwrap();
    assert_eq!(k.not_on_kernel, ["damon:damos_before_apply"]);
    let d = diff(k, side(DAMON_SIM, None), 0);
    let text = render_text(&d);
    assert!(
        text.contains("not recorded kernel: damon:damos_before_apply (not on its kernel)\n"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
