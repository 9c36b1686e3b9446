//! The trace file (issue 21 item 4): round trips with and without an embedded snapshot, plain
//! ftrace text, many lines across sections, truncated and corrupt files (errors naming the file
//! and the byte offset), and the ftrace line helpers (docs/model §15 line layout).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_state::container::{partial_path, ContainerReader, SECTION_CHUNK};
use fraglab_state::snapshot::{Snapshot, SnapshotHeader};
use fraglab_state::trace::{
    event_name, line_pid, lost_events_line, pages_spool_path, spool_path, TraceHeader, TraceReader,
    TraceWriter, TEXT_TAG, TRACE_MAGIC,
};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-trace-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A line as the kernel prints mm_page_alloc (§15.1), numbered by `i`.
fn alloc_line(i: u64) -> String {
    format!(
        "              dd-{:<7} [{:03}] d..1. {:5}.{:06}: mm_page_alloc: page=00000000a1b2c3d4 pfn=0x{:x} order=0 migratetype=1 gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_COMP",
        1000 + i % 7,
        i % 2,
        100 + i / 1_000_000,
        i % 1_000_000,
        0x10000 + i
    )
}

fn header() -> TraceHeader {
    let mut proc_end = BTreeMap::new();
    proc_end.insert(
        "buddyinfo".to_string(),
        "Node 0, zone   Normal  1 2 3\n".to_string(),
    );
    TraceHeader {
        events: vec!["kmem:mm_page_alloc".into(), "kmem:mm_page_free".into()],
        started_at_unix_s: 1_790_000_000,
        duration_ns: 1_000_000_000,
        nr_cpus: 2,
        buffer_size_kb: 32768,
        lost_events: 3,
        proc_end,
        workload: "dd if=/dev/zero of=/dev/null".into(),
        workload_status: Some(0),
        recorder_pid: Some(4242),
        ..Default::default()
    }
}

fn snapshot(n: u64) -> Snapshot {
    Snapshot {
        header: SnapshotHeader {
            hostname: "s2".into(),
            kernel: "6.18.44".into(),
            nr_cpus: 2,
            end_pfn: n,
            ram_ranges: vec![[1, n]],
            dirty_bitmap: true,
            ..Default::default()
        },
        // Classes 0..=11, flag bits above: every byte valid (page.rs).
        pages: (0..n)
            .map(|i| ((i % 12) as u8) | (((i / 12) % 16) as u8) << 4)
            .collect(),
        // Every 3rd pfn dirty: the bitmap's sections round-trip with the pages.
        dirty: (0..n.div_ceil(8))
            .map(|i| {
                (0..8)
                    .filter(|b| (i * 8 + b) % 3 == 0)
                    .fold(0u8, |a, b| a | 1 << b)
            })
            .collect(),
    }
}

fn write(path: &Path, lines: &[String], snap: Option<&Snapshot>) -> TraceHeader {
    let mut w = TraceWriter::create(path, &TraceHeader::default(), snap).unwrap();
    for l in lines {
        w.line(l).unwrap();
    }
    let h = header();
    w.finish(&h).unwrap();
    h
}

fn read_all(r: &mut TraceReader) -> Vec<String> {
    let mut v = Vec::new();
    while let Some(l) = r.next_line().unwrap() {
        v.push(l);
    }
    v
}

#[test]
fn issue_21_item_4_round_trip_without_snapshot() {
    let d = tmpdir("plainrt");
    let p = d.join("t.trace");
    let lines: Vec<String> = (0..1000).map(alloc_line).collect();
    let h = write(&p, &lines, None);
    // Nothing but the file is left behind.
    assert!(!partial_path(&p).exists());
    assert!(!spool_path(&p).exists());
    let mut r = TraceReader::open(&p).unwrap();
    assert!(r.is_container());
    let mut want = h.clone();
    want.lines = 1000;
    assert_eq!(r.header(), &want);
    assert!(r.take_snapshot().is_none());
    assert_eq!(r.line_no(), 0);
    assert_eq!(r.next_line().unwrap().as_deref(), Some(lines[0].as_str()));
    assert_eq!(r.line_no(), 1);
    let rest = read_all(&mut r);
    assert_eq!(rest, lines[1..]);
    assert_eq!(r.line_no(), 1000);
    assert_eq!(r.next_line().unwrap(), None);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_21_item_4_round_trip_with_snapshot() {
    let d = tmpdir("snaprt");
    let p = d.join("t.trace");
    // More than one PAGE section.
    let s = snapshot(SECTION_CHUNK as u64 + 12_345);
    let lines: Vec<String> = (0..100).map(alloc_line).collect();
    write(&p, &lines, Some(&s));
    let mut r = TraceReader::open(&p).unwrap();
    assert_eq!(r.header().snapshot.as_ref(), Some(&s.header));
    assert_eq!(r.take_snapshot().as_ref(), Some(&s));
    assert!(r.take_snapshot().is_none());
    assert_eq!(read_all(&mut r), lines);
    // For a summary the page bytes are skipped, the header still tells there is a snapshot.
    let mut r = TraceReader::open_without_snapshot(&p).unwrap();
    assert!(r.header().snapshot.is_some());
    assert!(r.take_snapshot().is_none());
    assert_eq!(read_all(&mut r), lines);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_21_item_4_snapshot_after_lines() {
    // The recorder traces while it reads the snapshot: the snapshot comes after lines, and the
    // file still holds it before them.
    let d = tmpdir("snaplate");
    let p = d.join("t.trace");
    let s = snapshot(70_000);
    let lines: Vec<String> = (0..5000).map(alloc_line).collect();
    let mut w = TraceWriter::create(&p, &TraceHeader::default(), None).unwrap();
    for l in &lines[..2000] {
        w.line(l).unwrap();
    }
    w.set_snapshot(&s).unwrap();
    assert!(w.set_snapshot(&s).is_err(), "one snapshot per file");
    for l in &lines[2000..] {
        w.line(l).unwrap();
    }
    w.finish(&header()).unwrap();
    assert!(!pages_spool_path(&p).exists());
    let mut r = TraceReader::open(&p).unwrap();
    assert_eq!(r.take_snapshot().as_ref(), Some(&s));
    assert_eq!(read_all(&mut r), lines);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_21_item_4_empty_trace() {
    let d = tmpdir("empty");
    let p = d.join("t.trace");
    write(&p, &[], None);
    let mut r = TraceReader::open(&p).unwrap();
    assert_eq!(r.next_line().unwrap(), None);
    assert_eq!(r.header().lines, 0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_21_item_4_many_lines_across_sections() {
    let d = tmpdir("many");
    let p = d.join("t.trace");
    let n = 150_000u64; // ~25 MB of text: several TEXT sections
    let mut w = TraceWriter::create(&p, &TraceHeader::default(), None).unwrap();
    let mut text = 0u64;
    for i in 0..n {
        let l = alloc_line(i);
        text += l.len() as u64 + 1;
        w.line(&l).unwrap();
    }
    assert_eq!(w.lines(), n);
    assert_eq!(w.text_bytes(), text);
    w.finish(&header()).unwrap();
    // Sections hold whole lines and at most SECTION_CHUNK bytes.
    let mut c = ContainerReader::open(&p, &TRACE_MAGIC, "trace").unwrap();
    let mut sections = 0;
    while let Some((tag, raw)) = c.next_section().unwrap() {
        assert_eq!(tag, TEXT_TAG);
        assert!(raw.len() <= SECTION_CHUNK);
        assert_eq!(raw.last(), Some(&b'\n'));
        sections += 1;
    }
    assert!(
        sections as u64 > text / SECTION_CHUNK as u64,
        "{sections} sections"
    );
    let mut r = TraceReader::open(&p).unwrap();
    let mut i = 0u64;
    while let Some(l) = r.next_line().unwrap() {
        assert_eq!(l, alloc_line(i), "line {i}");
        i += 1;
    }
    assert_eq!(i, n);
    assert_eq!(r.header().lines, n);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_21_item_4_plain_text_import() {
    let d = tmpdir("plain");
    let p = d.join("trace.txt");
    let text = format!(
        "# tracer: nop\n#\n# entries-in-buffer/entries-written: 2/2   #P:2\n\n{}\r\n{}\nCPU:1 [LOST 12 EVENTS]\n{}",
        alloc_line(1),
        alloc_line(2),
        alloc_line(3)
    );
    std::fs::write(&p, text).unwrap();
    let mut r = TraceReader::open(&p).unwrap();
    assert!(!r.is_container());
    assert_eq!(r.header(), &TraceHeader::default());
    assert!(r.take_snapshot().is_none());
    assert_eq!(r.next_line().unwrap(), Some(alloc_line(1)));
    // Comments and the blank line count: the line number is the file's.
    assert_eq!(r.line_no(), 5);
    assert_eq!(r.next_line().unwrap(), Some(alloc_line(2)));
    assert_eq!(r.next_line().unwrap().as_deref(), Some("CPU:1 [LOST 12 EVENTS]"));
    assert_eq!(r.line_no(), 7);
    // The last line has no newline.
    assert_eq!(r.next_line().unwrap(), Some(alloc_line(3)));
    assert_eq!(r.line_no(), 8);
    assert_eq!(r.next_line().unwrap(), None);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_21_item_4_truncated_file_names_file_and_offset() {
    let d = tmpdir("trunc");
    let p = d.join("t.trace");
    let lines: Vec<String> = (0..20_000).map(alloc_line).collect();
    write(&p, &lines, Some(&snapshot(5000)));
    let full = std::fs::read(&p).unwrap();
    let cut = d.join("cut.trace");
    // Cut inside the header, the page sections, the text sections, and just before the end
    // marker: every one is an error naming the file and an offset, never a silent short read.
    for len in [20, 200, full.len() / 2, full.len() - 16, full.len() - 3] {
        std::fs::write(&cut, &full[..len]).unwrap();
        let err = match TraceReader::open(&cut) {
            Err(e) => e,
            Ok(mut r) => loop {
                match r.next_line() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("a file cut at {len} of {} read to its end", full.len()),
                    Err(e) => break e,
                }
            },
        };
        assert_eq!(err.path, cut, "{err}");
        let off = err.offset.unwrap_or_else(|| panic!("no offset: {err}"));
        assert!(off <= len as u64, "offset {off} beyond the cut {len}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("cut.trace") && msg.contains("offset"), "{msg}");
        assert!(msg.contains("truncated"), "{msg}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_21_item_4_corrupt_section_names_file_and_offset() {
    let d = tmpdir("corrupt");
    let p = d.join("t.trace");
    let lines: Vec<String> = (0..20_000).map(alloc_line).collect();
    write(&p, &lines, None);
    let mut full = std::fs::read(&p).unwrap();
    // The first section starts after magic, version, header length and header.
    let hl = u32::from_le_bytes(full[12..16].try_into().unwrap()) as usize;
    let sec = 16 + hl;
    assert_eq!(&full[sec..sec + 4], b"TEXT");
    full[sec + 16 + 100] ^= 0x55; // inside the deflate data
    let bad = d.join("bad.trace");
    std::fs::write(&bad, &full).unwrap();
    let mut r = TraceReader::open(&bad).unwrap();
    let err = r.next_line().unwrap_err();
    assert_eq!(err.path, bad);
    let off = err.offset.unwrap();
    assert!(
        off == sec as u64 || off == sec as u64 + 16,
        "offset {off}, section at {sec}: {err}"
    );
    assert!(
        err.to_string().contains("corrupt") || err.to_string().contains("decompress"),
        "{err}"
    );
    // A bad header is named too.
    let mut full = std::fs::read(&p).unwrap();
    full[16] = b'!';
    std::fs::write(&bad, &full).unwrap();
    let err = TraceReader::open(&bad).err().unwrap();
    assert_eq!(err.offset, Some(16), "{err}");
    // A snapshot file is not a trace, and is not read as text either.
    let s = d.join("s.snap");
    snapshot(100).write(&s).unwrap();
    let err = TraceReader::open(&s).err().unwrap();
    assert_eq!((err.path.as_path(), err.offset), (s.as_path(), Some(0)), "{err}");
    assert!(err.to_string().contains("snapshot"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_21_item_4_unfinished_writer_leaves_nothing() {
    let d = tmpdir("drop");
    let p = d.join("t.trace");
    {
        let mut w = TraceWriter::create(&p, &header(), Some(&snapshot(100))).unwrap();
        for i in 0..10 {
            w.line(&alloc_line(i)).unwrap();
        }
        assert!(spool_path(&p).exists());
        assert!(w.line("two\nlines").is_err());
    }
    assert!(!p.exists());
    assert!(!spool_path(&p).exists());
    assert!(!pages_spool_path(&p).exists());
    assert!(!partial_path(&p).exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn section_15_event_name_and_lost_lines() {
    assert_eq!(event_name(&alloc_line(7)), Some("mm_page_alloc"));
    assert_eq!(
        event_name("   kworker/u4:2-123     [001] ..... 42.000001: mm_compaction_kcompactd_sleep: nid=0"),
        Some("mm_compaction_kcompactd_sleep")
    );
    // A comm with "] " and '-' in it, the record-tgid column, and no irq-info column.
    assert_eq!(
        event_name("  a] b-c-77 (     77) [000] 5.5: mm_vmscan_kswapd_wake: nid=0 order=3"),
        Some("mm_vmscan_kswapd_wake")
    );
    assert_eq!(event_name("CPU:1 [LOST 12 EVENTS]"), None);
    assert_eq!(line_pid(&alloc_line(7)), Some(1000));
    assert_eq!(line_pid("  a] b-c-77 (     77) [000] 5.5: x: y"), Some(77));
    assert_eq!(line_pid("CPU:1 [LOST 12 EVENTS]"), None);
    assert_eq!(event_name("# tracer: nop"), None);
    assert_eq!(lost_events_line("CPU:1 [LOST 12 EVENTS]"), Some(12));
    assert_eq!(lost_events_line(&alloc_line(1)), None);
}

/// Issue 34: the reader refuses what is not a trace before reading much of it.
fn open_err(p: &std::path::Path) -> fraglab_state::StateError {
    let t = std::time::Instant::now();
    let e = match TraceReader::open(p) {
        Err(e) => e,
        Ok(mut r) => loop {
            match r.next_line() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("{} read to its end", p.display()),
                Err(e) => break e,
            }
        },
    };
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(e.path, p, "{e}");
    e
}

#[test]
fn issue_34_a_line_without_newline_is_an_error_at_its_offset() {
    let d = tmpdir("overlong");
    let p = d.join("long.txt");
    let first = alloc_line(1);
    let mut text = format!("{first}\n").into_bytes();
    text.extend(std::iter::repeat_n(
        b'x',
        fraglab_state::trace::MAX_LINE_BYTES * 4,
    ));
    std::fs::write(&p, &text).unwrap();
    let e = open_err(&p);
    assert_eq!(e.offset, Some(first.len() as u64 + 1), "{e}");
    assert!(e.msg.contains("line 2 is longer than 64 KiB"), "{e}");
    // A line of exactly the bound is read.
    let mut ok = vec![b'y'; fraglab_state::trace::MAX_LINE_BYTES];
    ok.push(b'\n');
    std::fs::write(&p, &ok).unwrap();
    let mut r = TraceReader::open(&p).unwrap();
    assert_eq!(
        r.next_line().unwrap().unwrap().len(),
        fraglab_state::trace::MAX_LINE_BYTES
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_34_empty_and_binary_files_are_errors() {
    let d = tmpdir("binary");
    let p = d.join("empty.txt");
    std::fs::write(&p, b"").unwrap();
    let e = open_err(&p);
    assert!(e.msg.contains("empty file"), "{e}");
    // Bytes with a NUL: the line and the NUL's offset are named.
    let p = d.join("bin.txt");
    let mut b = format!("{}\nab", alloc_line(0)).into_bytes();
    let nul_at = b.len();
    b.extend_from_slice(b"\0\x01\x02\n");
    std::fs::write(&p, &b).unwrap();
    let e = open_err(&p);
    assert_eq!(e.offset, Some(nul_at as u64), "{e}");
    assert!(e.msg.contains("line 2 holds a NUL byte"), "{e}");
    // A FRAGTRCE file whose TEXT section holds binary bytes.
    let p = d.join("bin.trace");
    write(&p, &[alloc_line(0), "\0\0\0garbage".into()], None);
    let e = open_err(&p);
    assert!(e.msg.contains("line 2") && e.msg.contains("NUL"), "{e}");
    assert!(e.offset.is_some(), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_34_fifos_and_devices_are_refused_without_blocking() {
    let d = tmpdir("fifo");
    let p = d.join("pipe");
    let st = std::process::Command::new("mkfifo").arg(&p).status().unwrap();
    assert!(st.success());
    // No writer: opening it would block forever; the metadata check refuses it first.
    let e = open_err(&p);
    assert!(e.msg.contains("a FIFO (named pipe), not a regular file"), "{e}");
    let e = open_err(std::path::Path::new("/dev/zero"));
    assert!(e.msg.contains("a character device"), "{e}");
    let e = open_err(&d);
    assert!(e.msg.contains("a directory"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn issue_34_sniffing_the_format_keeps_the_first_bytes() {
    // A file shorter than the 8-byte magic, and one whose first line is an event: both read
    // from their first byte.
    let d = tmpdir("sniff");
    let p = d.join("short.txt");
    std::fs::write(&p, b"abc\n").unwrap();
    let mut r = TraceReader::open(&p).unwrap();
    assert_eq!(r.next_line().unwrap().as_deref(), Some("abc"));
    assert_eq!(r.next_line().unwrap(), None);
    let p = d.join("ev.txt");
    std::fs::write(&p, format!("{}\n{}", alloc_line(0), alloc_line(1))).unwrap();
    let mut r = TraceReader::open(&p).unwrap();
    assert_eq!(r.next_line().unwrap(), Some(alloc_line(0)));
    assert_eq!(r.next_line().unwrap(), Some(alloc_line(1)));
    let _ = std::fs::remove_dir_all(&d);
}
