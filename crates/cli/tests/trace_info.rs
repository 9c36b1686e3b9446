//! `fraglab trace info` (issue 21 item 4): the summary of a trace file and of plain ftrace text,
//! streamed; a damaged file is a one-line error naming the file and the byte offset.

use std::path::PathBuf;
use std::process::Command;

use fraglab_state::trace::{TraceHeader, TraceWriter};

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-trace-info-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Lines as this machine's 6.18 kernel printed them (docs/model §15.1).
const LINES: [&str; 4] = [
    "           <...>-19280   [000] ..... 30993.168075: mm_page_alloc: page=000000009bcb6469 pfn=0x32c47b order=0 migratetype=1 gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_ZERO|__GFP_COMP",
    "              dd-19233   [001] ..... 30993.168144: mm_page_free: page=0000000090b1b451 pfn=0x2b3710 order=0",
    "              dd-19233   [001] ..... 30993.168150: mm_page_free_batched: page=0000000090b1b452 pfn=0x2b3711 order=0",
    "      kcompactd0-36      [001] ..... 30993.328033: mm_compaction_kcompactd_sleep: nid=0",
];

fn info_json(path: &std::path::Path) -> serde_json::Value {
    let o = fraglab()
        .args(["trace", "info", "--json"])
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn issue_21_item_4_trace_info_counts_events_per_name() {
    let d = temp_dir("container");
    let p = d.join("t.trace");
    let mut w = TraceWriter::create(&p, &TraceHeader::default(), None).unwrap();
    for _ in 0..1000 {
        for l in LINES {
            w.line(l).unwrap();
        }
    }
    w.line("CPU:1 [LOST 7 EVENTS]").unwrap();
    let h = TraceHeader {
        duration_ns: 2_000_000_000,
        lost_events: 7,
        clock: "mono".into(),
        ..Default::default()
    };
    w.finish(&h).unwrap();
    let v = info_json(&p);
    assert_eq!(v["format"], "fraglab-trace");
    assert_eq!(v["events"], 4000);
    assert_eq!(v["events_per_name"]["mm_page_alloc"], 1000);
    assert_eq!(v["events_per_name"]["mm_page_free_batched"], 1000);
    // The model's parser reads alloc, free and kcompactd_sleep; not mm_page_free_batched.
    assert_eq!(v["parsed_by_model"], 3000);
    assert_eq!(v["parsed_by_model_per_name"]["mm_page_free_batched"], 0);
    assert_eq!(v["lost_events"], 7);
    assert_eq!(v["snapshot"], serde_json::Value::Null);
    assert_eq!(v["duration_ns"], 2_000_000_000u64);

    // Plain ftrace text reads the same lines.
    let t = d.join("trace.txt");
    std::fs::write(&t, format!("# tracer: nop\n#\n{}\n", LINES.join("\n"))).unwrap();
    let v = info_json(&t);
    assert_eq!(v["format"], "ftrace-text");
    assert_eq!(v["events"], 4);
    assert_eq!(v["parsed_by_model"], 3);

    // Cut short: one line naming the file and the offset, failure status.
    let full = std::fs::read(&p).unwrap();
    let cut = d.join("cut.trace");
    std::fs::write(&cut, &full[..full.len() - 40]).unwrap();
    let o = fraglab().args(["trace", "info"]).arg(&cut).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cut.trace") && err.contains("offset") && err.contains("truncated"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
