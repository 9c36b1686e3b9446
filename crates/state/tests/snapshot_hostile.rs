//! Hostile snapshot files (issue 34 item 3): every header field is checked against the file's
//! own sizes and sane bounds before anything is allocated, reading is held to a memory budget,
//! and what is not a regular file is refused before it is opened for reading. Each refusal names
//! the file and the byte offset of the bad field.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use fraglab_state::container::ContainerReader;
use fraglab_state::snapshot::{ReadLimits, Snapshot, SnapshotHeader, BUDGET_ENV, SNAPSHOT_MAGIC};
use serde_json::json;

fn unlimited() -> ReadLimits {
    ReadLimits {
        memory_budget: u64::MAX,
        budget_source: "no limit".into(),
    }
}

/// Writes `bytes` as `name` in `dir` and reads it with `limits`; returns the error and the
/// file's bytes. Reading must fail, within a second.
fn refused(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    limits: &ReadLimits,
) -> (fraglab_state::StateError, Vec<u8>) {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    let t = Instant::now();
    let e = Snapshot::read_with(&p, limits).expect_err(name);
    assert!(t.elapsed() < Duration::from_secs(1), "{name}: {:?}", t.elapsed());
    assert_eq!(e.path, p);
    assert!(e.to_string().contains(name), "{e}");
    (e, bytes.to_vec())
}

/// The bytes at the error's offset start with `field` (the offset is the bad field's).
fn at_field(e: &fraglab_state::StateError, file: &[u8], field: &str) {
    let at = e.offset.expect("an offset") as usize;
    let quoted = format!("\"{field}\"");
    assert!(
        file[at..].starts_with(quoted.as_bytes()),
        "offset {at} is not the field {quoted}: {:?}",
        String::from_utf8_lossy(&file[at..(at + 40).min(file.len())])
    );
}

fn base() -> (Snapshot, Vec<u8>) {
    let s = common::machine(8192, 3);
    let dir = common::tmp("hostile-base");
    let b = common::file_bytes(&s, &dir);
    (s, b)
}

/// end_pfn 2^38 used to size the page vector before any page was read (the process aborted
/// allocating 256 GiB); now the file's page sections, which hold 8192 bytes, refuse it.
#[test]
fn end_pfn_beyond_the_files_page_sections_is_refused_before_allocating() {
    let dir = common::tmp("end-pfn");
    let (_, good) = base();
    let bytes = common::with_header(&good, |h| h["end_pfn"] = json!(1u64 << 38));
    let (e, file) = refused(&dir, "end-2p38.fsnap", &bytes, &unlimited());
    assert!(
        e.msg.contains("end_pfn 274877906944 but the 1 page sections")
            && e.msg.contains("hold 8192 page bytes"),
        "{e}"
    );
    at_field(&e, &file, "end_pfn");
    // 2^64 − 1 panicked (capacity overflow); 0 has no pages.
    for (name, v) in [("end-max.fsnap", u64::MAX), ("end-0.fsnap", 0)] {
        let bytes = common::with_header(&good, |h| h["end_pfn"] = json!(v));
        let (e, file) = refused(&dir, name, &bytes, &unlimited());
        assert!(
            e.msg
                .contains(&format!("end_pfn {v} is outside 1..=1099511627776")),
            "{e}"
        );
        at_field(&e, &file, "end_pfn");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// nr_cpus 0 or 10^6, managed > present, present > spanned, a zone beyond end_pfn, overlapping
/// zones, a RAM range beyond end_pfn and a page_owner block beyond it all booted; each is now
/// refused at its field.
#[test]
fn insane_header_fields_are_refused_at_their_offset() {
    let dir = common::tmp("fields");
    let (_, good) = base();
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit, &str, &str); 8] = [
        (
            "cpus0",
            |h| h["nr_cpus"] = json!(0),
            "nr_cpus",
            "nr_cpus 0 is outside 1..=8192",
        ),
        (
            "cpus1e6",
            |h| h["nr_cpus"] = json!(1_000_000),
            "nr_cpus",
            "nr_cpus 1000000 is outside",
        ),
        (
            "managed",
            |h| h["zones"][1]["managed"] = json!(5000),
            "managed",
            "zone Normal has managed 5000 > present",
        ),
        (
            "present",
            |h| h["zones"][0]["present"] = json!(9999),
            "present",
            "zone DMA has present 9999 > spanned 4095",
        ),
        (
            "beyond",
            |h| h["zones"][1]["spanned"] = json!(u64::MAX),
            "spanned",
            "zone Normal spans 18446744073709551615 pages from pfn 4096, beyond end_pfn 8192",
        ),
        (
            "overlap",
            |h| h["zones"][1]["start_pfn"] = json!(2048),
            "start_pfn",
            "zones DMA and Normal overlap",
        ),
        (
            "ram",
            |h| h["ram_ranges"] = json!([[1, 9000]]),
            "ram_ranges",
            "RAM range [1, 9000) is empty or ends beyond end_pfn 8192",
        ),
        (
            "owner",
            |h| h["page_owner_blocks"] = json!([[16, "Movable"]]),
            "page_owner_blocks",
            "page_owner block 16 of type \"Movable\": not a block below 16",
        ),
    ];
    for (name, edit, field, msg) in cases {
        let bytes = common::with_header(&good, edit);
        let (e, file) = refused(&dir, &format!("{name}.fsnap"), &bytes, &unlimited());
        assert!(e.msg.contains(msg), "{name}: {e}");
        // Array elements point at the element; fields at their name.
        if field == "ram_ranges" || field == "page_owner_blocks" {
            let at = e.offset.unwrap() as usize;
            assert_eq!(file[at], b'[', "{name}: {e}");
        } else {
            at_field(&e, &file, field);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A pagetypeinfo or buddyinfo the kernel could not have printed (garbage, a short row, a count
/// that is not a number) used to parse as zeros and boot; now the read and the line are named.
#[test]
fn garbage_proc_tables_are_refused_with_their_line() {
    let dir = common::tmp("proc");
    let (s, good) = base();
    let pti = s.header.proc_after["pagetypeinfo"].clone();
    let cases = [
        (
            "garbage",
            "proc_after",
            "pagetypeinfo",
            "\u{1}\u{2}garbage\n".to_string(),
            "proc_after.pagetypeinfo line 1: not a line of /proc/pagetypeinfo",
        ),
        (
            "x",
            "proc_before",
            "pagetypeinfo",
            pti.replacen("      0 \n", "      x \n", 1),
            "proc_before.pagetypeinfo line 5: \"x\" is not a count",
        ),
        (
            "short",
            "proc_after",
            "pagetypeinfo",
            pti.replacen("      0 \n", " \n", 1),
            "proc_after.pagetypeinfo line 5: 10 free counts, 11 expected",
        ),
        (
            "empty",
            "proc_after",
            "pagetypeinfo",
            String::new(),
            "proc_after.pagetypeinfo line 1: no zone rows",
        ),
        (
            "nozone",
            "proc_after",
            "pagetypeinfo",
            pti.replace("Normal", "Highmem"),
            "proc_after.pagetypeinfo has no rows for zone Normal",
        ),
        (
            "blocks",
            "proc_after",
            "pagetypeinfo",
            pti.replace("            7            0", "      9999999            0"),
            "counts 10000000 blocks in zone",
        ),
        (
            "buddy",
            "proc_before",
            "buddyinfo",
            "Node 0, zone DMA 1 2 3\n".to_string(),
            "proc_before.buddyinfo line 1: 3 counts, 11 expected",
        ),
    ];
    for (name, read, file_name, text, msg) in cases {
        let bytes = common::with_header(&good, |h| h[read][file_name] = json!(text));
        let (e, file) = refused(&dir, &format!("{name}.fsnap"), &bytes, &unlimited());
        assert!(e.msg.contains(msg), "{name}: {e}");
        at_field(&e, &file, file_name);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The memory budget: the estimate (48 bytes per pfn) above it refuses the file before its pages
/// are read, naming the estimate, the budget, where the budget came from and how to raise it.
#[test]
fn a_snapshot_above_the_memory_budget_is_refused_with_the_estimate() {
    let dir = common::tmp("budget");
    let (s, good) = base();
    let small = ReadLimits {
        memory_budget: 100 << 10,
        budget_source: "the test's budget".into(),
    };
    let (e, file) = refused(&dir, "budget.fsnap", &good, &small);
    for part in [
        "end_pfn 8192 (32.0 MiB of memory)",
        "needs an estimated 384.0 KiB (48 bytes per pfn)",
        "above the memory budget of 100.0 KiB (the test's budget)",
        "set FRAGLAB_SNAPSHOT_BUDGET=SIZE",
    ] {
        assert!(e.msg.contains(part), "{part:?} in {e}");
    }
    at_field(&e, &file, "end_pfn");
    let enough = ReadLimits {
        memory_budget: 384 << 10,
        budget_source: "the test's budget".into(),
    };
    assert_eq!(
        Snapshot::read_with(&dir.join("budget.fsnap"), &enough).unwrap(),
        s
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Section headers are checked before their data is allocated: a section claiming 64 MiB from
/// a few compressed bytes, or more compressed bytes than the file has, and a header length of
/// 4 GiB.
#[test]
fn section_and_header_lengths_are_checked_against_the_file() {
    let dir = common::tmp("sections");
    let (_, good) = base();
    let hl = u32::from_le_bytes(good[12..16].try_into().unwrap()) as usize;
    let sec = 16 + hl;
    let mut claims = good.clone();
    claims[sec + 4..sec + 8].copy_from_slice(&(64u32 << 20).to_le_bytes());
    let (e, _) = refused(&dir, "claims.fsnap", &claims, &unlimited());
    assert!(
        e.msg.contains("claims 67108864 bytes from") && e.offset == Some(sec as u64),
        "{e}"
    );
    let mut comp = good.clone();
    comp[sec + 8..sec + 12].copy_from_slice(&(1u32 << 24).to_le_bytes());
    let (e, _) = refused(&dir, "comp.fsnap", &comp, &unlimited());
    assert!(
        e.msg.contains("claims 16777216 compressed bytes") && e.offset == Some(sec as u64),
        "{e}"
    );
    let mut header = good.clone();
    header[12..16].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let (e, _) = refused(&dir, "header.fsnap", &header, &unlimited());
    assert!(
        e.msg.contains("header length 4294967280 is larger than the") && e.offset == Some(12),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A FIFO without a writer blocked `snapshot info` forever; a directory or a character device
/// is refused the same way: by its type, before it is opened for reading.
#[test]
fn fifos_directories_and_devices_are_refused_without_blocking() {
    let dir = common::tmp("fifo");
    let fifo = dir.join("pipe.fsnap");
    let st = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success());
    let (tx, rx) = std::sync::mpsc::channel();
    for (p, kind) in [
        (fifo.clone(), "a FIFO (named pipe), not a regular file"),
        (dir.clone(), "a directory, not a regular file"),
        (
            Path::new("/dev/null").to_path_buf(),
            "a character device, not a regular file",
        ),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let r = Snapshot::read(&p).map(|_| ());
            let _ = tx.send((p, kind, r));
        });
        let (p, kind, r) = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the reader returns (it blocked on a FIFO before)");
        let e = r.expect_err("refused");
        assert!(e.msg.contains(kind) && e.path == p, "{e}");
        let e = ContainerReader::open(&p, &SNAPSHOT_MAGIC, "snapshot")
            .err()
            .unwrap();
        assert!(e.msg.contains(kind), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every snapshot committed to the repository passes the checks (tests/data and the validation
/// results), with the default budget of a machine with 4 GiB free for it.
#[test]
fn every_committed_snapshot_passes_the_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    let mut dirs = vec![
        root.join("crates/state/tests/data"),
        root.join("experiments/validation"),
    ];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "fsnap") {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 40, "{} snapshots", files.len());
    let limits = ReadLimits {
        memory_budget: 4 << 30,
        budget_source: "4 GiB".into(),
    };
    for p in &files {
        let mut r = ContainerReader::open(p, &SNAPSHOT_MAGIC, "snapshot").unwrap();
        let h: SnapshotHeader = serde_json::from_value(r.header.clone()).unwrap();
        Snapshot::check_sizes(&mut r, &h, &limits).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Sizes for the budget's environment variable.
#[test]
fn budget_sizes_parse() {
    use fraglab_state::snapshot::parse_bytes;
    assert_eq!(parse_bytes("64G"), Some(64 << 30));
    assert_eq!(parse_bytes("512m"), Some(512 << 20));
    assert_eq!(parse_bytes("4096"), Some(4096));
    assert_eq!(parse_bytes("2T"), Some(2 << 40));
    assert_eq!(parse_bytes("lots"), None);
    assert_eq!(parse_bytes("99999999999T"), None);
    assert_eq!(BUDGET_ENV, "FRAGLAB_SNAPSHOT_BUDGET");
}

/// A trace file's embedded start snapshot goes through the same checks (`fraglab replay` boots
/// from it): its end_pfn of 2^38 is refused at the field inside the trace header's `snapshot`.
#[test]
fn a_trace_files_embedded_snapshot_is_checked_too() {
    use fraglab_state::trace::{TraceHeader, TraceReader, TraceWriter};
    let dir = common::tmp("trace");
    let p = dir.join("t.trace");
    let s = common::machine(4096, 1);
    let w = TraceWriter::create(&p, &TraceHeader::default(), Some(&s)).unwrap();
    w.finish(&TraceHeader::default()).unwrap();
    assert_eq!(TraceReader::open(&p).unwrap().take_snapshot(), Some(s));
    let bytes = common::with_header(&std::fs::read(&p).unwrap(), |h| {
        h["snapshot"]["end_pfn"] = json!(1u64 << 38)
    });
    std::fs::write(&p, bytes).unwrap();
    let t = Instant::now();
    let e = TraceReader::open(&p).err().expect("refused");
    assert!(t.elapsed() < Duration::from_secs(1));
    assert!(
        e.msg.contains("end_pfn 274877906944 but the 1 page sections") && e.path == p,
        "{e}"
    );
    let file = std::fs::read(&p).unwrap();
    at_field(&e, &file, "end_pfn");
    let at = e.offset.unwrap() as usize;
    let before = String::from_utf8_lossy(&file[..at]);
    assert!(
        before.rfind("\"snapshot\"").is_some(),
        "inside the snapshot member"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A header field of the wrong type is refused at its value's offset (it was reported at the
/// header's first byte).
#[test]
fn a_field_of_the_wrong_type_is_refused_at_its_offset() {
    let dir = common::tmp("wrong-type");
    let (_, good) = base();
    let bytes = common::with_header(&good, |h| h["zones"] = json!("DMA"));
    let (e, file) = refused(&dir, "wrong.fsnap", &bytes, &unlimited());
    assert!(
        e.msg
            .contains("invalid type: string \"DMA\", expected a sequence"),
        "{e}"
    );
    let at = e.offset.unwrap() as usize;
    let field = file.windows(13).position(|w| w == b"\"zones\":\"DMA\"").unwrap();
    assert!(
        (field..field + 13).contains(&at),
        "{at} not in the field at {field}"
    );
    assert!(Snapshot::read_header(&dir.join("wrong.fsnap")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
