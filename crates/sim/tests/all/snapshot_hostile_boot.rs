//! A spec booting from a hostile snapshot file (issue 34 item 3) gets the reader's refusal,
//! naming the spec line, the file and the byte offset of the bad field, at once: an end_pfn of
//! 2^38 aborted the process, nr_cpus 0 and a FIFO without a writer (which blocked) booted or hung.

use std::time::{Duration, Instant};

use fraglab_spec::parse_spec;
use fraglab_state::page::PageClass;
use fraglab_state::snapshot::{Snapshot, SnapshotHeader, ZoneSpan};

/// A valid one-zone snapshot of 4096 free pages, written to `path`.
fn write_snapshot(path: &std::path::Path) {
    let n = 4096u64;
    let pti = "Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \n\
        Node    0, zone   Normal, type      Movable      0      0      0      0      0      0      0      0      0      0      4 \n\n\
        Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n\
        Node 0, zone   Normal            0            8            0            0            0 \n";
    let proc: std::collections::BTreeMap<String, String> =
        [("pagetypeinfo".to_string(), pti.to_string())].into();
    Snapshot {
        header: SnapshotHeader {
            nr_cpus: 2,
            end_pfn: n,
            ram_ranges: vec![[0, n]],
            zones: vec![ZoneSpan {
                name: "Normal".into(),
                start_pfn: 0,
                spanned: n,
                present: n,
                managed: n,
                ..Default::default()
            }],
            proc_before: proc.clone(),
            proc_after: proc,
            ..Default::default()
        },
        pages: vec![PageClass::Free as u8; n as usize],
        dirty: Vec::new(),
    }
    .write(path)
    .unwrap();
}

/// `file` with the JSON header's text `from` replaced by `to` (same container otherwise).
fn patch_header(file: &[u8], from: &str, to: &str) -> Vec<u8> {
    let hl = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let h = std::str::from_utf8(&file[16..16 + hl]).unwrap();
    assert!(h.contains(from), "{from} in the header");
    let h = h.replacen(from, to, 1);
    let mut out = file[..12].to_vec();
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(&file[16 + hl..]);
    out
}

#[test]
fn a_spec_booting_a_hostile_snapshot_is_refused_at_once() {
    let d = std::env::temp_dir().join(format!("fraglab-hostile-boot-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let good = d.join("good.fsnap");
    write_snapshot(&good);
    let bytes = std::fs::read(&good).unwrap();
    let boot = |file: &str| {
        let spec = d.join("spec.toml");
        let text = format!("[machine]\nsnapshot = \"{file}\"\n");
        let (tx, rx) = std::sync::mpsc::channel();
        let spec_path = spec.to_str().unwrap().to_string();
        std::thread::spawn(move || {
            let r = fraglab_sim::boot(&parse_spec(&text, &spec_path).unwrap()).map(|_| ());
            let _ = tx.send(r);
        });
        let t = Instant::now();
        let r = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the boot returns");
        (r, t.elapsed())
    };
    assert!(boot("good.fsnap").0.is_ok());
    for (name, from, to, want) in [
        (
            "end.fsnap",
            "\"end_pfn\":4096",
            "\"end_pfn\":274877906944",
            "end_pfn 274877906944 but the 1 page sections",
        ),
        (
            "cpus.fsnap",
            "\"nr_cpus\":2",
            "\"nr_cpus\":0",
            "nr_cpus 0 is outside 1..=8192",
        ),
        (
            "managed.fsnap",
            "\"managed\":4096",
            "\"managed\":5000",
            "zone Normal has managed 5000 > present 4096",
        ),
    ] {
        std::fs::write(d.join(name), patch_header(&bytes, from, to)).unwrap();
        let (r, took) = boot(name);
        let e = r.expect_err(name).to_string();
        assert!(
            e.contains("spec.toml:2: machine.snapshot")
                && e.contains(name)
                && e.contains("at byte offset")
                && e.contains(want),
            "{e}"
        );
        assert!(took < Duration::from_secs(5), "{name}: {took:?}");
    }
    let fifo = d.join("pipe.fsnap");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let e = boot("pipe.fsnap").0.expect_err("a FIFO").to_string();
    assert!(e.contains("a FIFO (named pipe), not a regular file"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}
