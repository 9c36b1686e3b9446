//! `fraglab_host::snapshot::capture` on this machine's kernel (issue 21 item 1,
//! docs/model §30): opt-in with `--features live`, root only; read-only (it changes no
//! knob and takes no memory beyond a byte per pfn).

use fraglab_host::snapshot::{capture, CaptureOptions};
use fraglab_state::page::PageClass;
use fraglab_state::procparse::{parse_buddyinfo, parse_pagetypeinfo};
use fraglab_state::reconstruct::{reconstruct, ReconstructOptions};

/// §30.1/§30.5 item 6: every pfn up to the last zone's end is read in bounded chunks within
/// 30 s, bracketed by two /proc reads; the free pages read as BUDDY are within the churn of
/// buddyinfo's total; the reconstruction imposes pagetypeinfo's block counts exactly.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn section_30_1_capture_this_machine() {
    // SAFETY: no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "capture needs root (run as root)");
    let mut calls = 0u64;
    let mut last = 0u64;
    let t = std::time::Instant::now();
    let s = capture(
        &CaptureOptions {
            chunk_pfns: 256 << 10,
            ..Default::default()
        },
        &mut |done, total| {
            assert!(done > last && done <= total);
            last = done;
            calls += 1;
        },
    )
    .expect("capture");
    assert!(t.elapsed().as_secs() < 30, "{:?}", t.elapsed());
    let h = &s.header;
    assert_eq!(s.pages.len() as u64, h.end_pfn);
    assert_eq!(last, h.end_pfn);
    assert_eq!(calls, h.end_pfn.div_ceil(256 << 10));
    assert!(!h.ram_ranges.is_empty() && h.zones.iter().any(|z| z.name == "Normal" && z.spanned > 0));
    for f in ["buddyinfo", "pagetypeinfo", "zoneinfo", "vmstat", "meminfo"] {
        assert!(
            h.proc_before.contains_key(f) && h.proc_after.contains_key(f),
            "{f}"
        );
    }
    assert!(!h.knobs.is_empty());
    assert!(h.confounders.get("page_reporting").is_some());
    let free = s
        .pages
        .iter()
        .filter(|&&b| PageClass::of(b) == Some(PageClass::Free))
        .count() as i64;
    let buddy: i64 = parse_buddyinfo(&h.proc_after["buddyinfo"])
        .values()
        .map(|a| a.iter().enumerate().map(|(o, n)| (*n as i64) << o).sum::<i64>())
        .sum();
    assert!(
        (free - buddy).abs() * 20 < buddy,
        "free pages {free} vs buddyinfo {buddy}"
    );
    let r = reconstruct(&s, &ReconstructOptions::default()).expect("reconstructs");
    let pti = match r.report.fitted_to.as_str() {
        "before" => parse_pagetypeinfo(&h.proc_before["pagetypeinfo"]),
        _ => parse_pagetypeinfo(&h.proc_after["pagetypeinfo"]),
    };
    for z in &r.zones {
        let rows: Vec<_> = r
            .report
            .blocks
            .iter()
            .filter(|b| b.what.starts_with(&format!("{} ", z.name)))
            .collect();
        assert_eq!(rows.len(), 5);
        for (t, row) in rows.iter().enumerate() {
            assert_eq!(row.reconstructed as u64, pti[&z.name].blocks[t], "{}", row.what);
        }
    }
}
