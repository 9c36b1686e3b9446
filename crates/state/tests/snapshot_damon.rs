//! The snapshot header's kdamond regions (docs/model §27.2 item 3): written and read
//! back; files written before the field existed still load, without it.

use std::path::Path;

use fraglab_state::damon::{DamonCapture, DamonRegion, DAMON_AGGREGATED};
use fraglab_state::snapshot::{Snapshot, SnapshotHeader};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-snapdamon-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn s27_snapshot_damon_regions_round_trip() {
    let mib = 1u64 << 20;
    let capture = DamonCapture {
        kdamond: 0,
        pid: 83,
        aggr_us: 5_000_000,
        source: DAMON_AGGREGATED.into(),
        aggregated_at_ns: 812_345_678_000,
        pages_at_ns: 812_400_000_000,
        regions: vec![
            DamonRegion {
                target: 0,
                start: 16 * mib,
                end: 40 * mib,
                nr_accesses: 0,
                age: 80,
            },
            DamonRegion {
                target: 0,
                start: 40 * mib,
                end: 64 * mib,
                nr_accesses: 1,
                age: 0,
            },
        ],
        applied: vec![DamonRegion {
            target: 0,
            start: 40 * mib,
            end: 64 * mib,
            nr_accesses: 0,
            age: 81,
        }],
        note: String::new(),
    };
    let n = 64 * 256;
    let snap = Snapshot {
        header: SnapshotHeader {
            // A reader refuses a header without CPUs (`SnapshotHeader::check`).
            nr_cpus: 2,
            end_pfn: n,
            ram_ranges: vec![[1, n]],
            damon: Some(capture.clone()),
            ..Default::default()
        },
        pages: vec![0; n as usize],
        dirty: Vec::new(),
    };
    let d = tmp("rt");
    let p = d.join("s.fsnap");
    snap.write(&p).unwrap();
    let back = Snapshot::read(&p).unwrap();
    assert_eq!(back.header.damon, Some(capture.clone()));
    assert_eq!(back, snap);
    assert_eq!(Snapshot::read_header(&p).unwrap().damon, Some(capture));
    // Without regions the header has no `damon` key at all (older readers see what they knew).
    let plain = Snapshot {
        header: SnapshotHeader {
            damon: None,
            ..snap.header.clone()
        },
        ..snap
    };
    assert!(plain.header_json().get("damon").is_none());
    plain.write(&p).unwrap();
    assert_eq!(Snapshot::read(&p).unwrap().header.damon, None);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A snapshot file captured on S2 before the field existed loads, with no regions.
#[test]
fn s27_old_snapshot_file_loads_without_damon_regions() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/s2-snapshot.fsnap");
    let h: SnapshotHeader = Snapshot::read_header(&p).unwrap();
    assert_eq!(h.damon, None);
    assert!(h.end_pfn > 0);
    let s = Snapshot::read(&p).unwrap();
    assert_eq!(s.header, h);
    // Its JSON header indeed predates the key.
    let r = fraglab_state::container::ContainerReader::open(
        &p,
        &fraglab_state::snapshot::SNAPSHOT_MAGIC,
        "snapshot",
    )
    .unwrap();
    assert!(r.header.get("damon").is_none());
}
