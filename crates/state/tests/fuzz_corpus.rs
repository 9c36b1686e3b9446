//! Every file of the snapshot fuzz target's corpus (fuzz/corpus/snapshot_read: small valid
//! snapshots from the writer, hostile headers and files, and whatever the fuzzer found) through
//! the target's own run (fuzz/src/snapshot.rs): read with the reader's checks and a memory
//! budget, small ones reconstructed and checked, with no panic and in bounded time. The stable
//! half of the fuzzing, run by `cargo test`. `FRAGLAB_WRITE_FUZZ_CORPUS=1 cargo test -p
//! fraglab-state --test fuzz_corpus` writes the seeds (files named `valid-*` and `hostile-*`).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

include!("../../../fuzz/src/snapshot.rs");

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/snapshot_read")
}

/// The seeds: (file name, bytes).
fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = common::tmp("seeds");
    let mut v: Vec<(String, Vec<u8>)> = Vec::new();
    // Valid: written by the writer (verbatim), and as the structured input.
    for seed in 1..=3u64 {
        let s = common::machine(4096 * seed, seed);
        v.push((format!("valid-written-{seed}"), common::file_bytes(&s, &dir)));
        let h = serde_json::to_vec(&s.header).unwrap();
        v.push((
            format!("valid-parts-{seed}"),
            common::structured(&h, &s.pages, &[]),
        ));
    }
    let mut s = common::machine(4096, 9);
    s.header.dirty_bitmap = true;
    s.dirty = (0..512).map(|i| (i * 37) as u8).collect();
    s.header.page_owner_blocks = Some(vec![(2, "Reclaimable".into()), (5, "HighAtomic".into())]);
    v.push((
        "valid-written-dirty-page-owner".into(),
        common::file_bytes(&s, &dir),
    ));
    // Hostile headers, as parts (so that the checksums are right and the header is the fault).
    let base = common::machine(4096, 4);
    let hostile = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut h = serde_json::to_value(&base.header).unwrap();
        f(&mut h);
        common::structured(&serde_json::to_vec(&h).unwrap(), &base.pages, &[])
    };
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "hostile-end-pfn-2p38",
            Box::new(|h| h["end_pfn"] = json!(1u64 << 38)),
        ),
        (
            "hostile-end-pfn-u64-max",
            Box::new(|h| h["end_pfn"] = json!(u64::MAX)),
        ),
        ("hostile-end-pfn-0", Box::new(|h| h["end_pfn"] = json!(0))),
        ("hostile-nr-cpus-0", Box::new(|h| h["nr_cpus"] = json!(0))),
        (
            "hostile-nr-cpus-1e6",
            Box::new(|h| h["nr_cpus"] = json!(1_000_000)),
        ),
        (
            "hostile-managed-gt-present",
            Box::new(|h| h["zones"][1]["managed"] = json!(5000)),
        ),
        (
            "hostile-present-gt-spanned",
            Box::new(|h| h["zones"][0]["present"] = json!(1u64 << 40)),
        ),
        (
            "hostile-zone-beyond-end",
            Box::new(|h| h["zones"][1]["spanned"] = json!(u64::MAX)),
        ),
        (
            "hostile-zones-overlap",
            Box::new(|h| h["zones"][1]["start_pfn"] = json!(1024)),
        ),
        (
            "hostile-ram-range-beyond-end",
            Box::new(|h| h["ram_ranges"] = json!([[1, 1u64 << 40]])),
        ),
        (
            "hostile-garbage-pagetypeinfo",
            Box::new(|h| {
                h["proc_after"]["pagetypeinfo"] =
                    json!("\u{1}\u{2}garbage\nNode 0, zone Normal, type Movable 1 2 x\n")
            }),
        ),
        (
            "hostile-pagetypeinfo-short-row",
            Box::new(|h| {
                h["proc_before"]["pagetypeinfo"] =
                    json!("Node    0, zone   Normal, type      Movable      1      2\n")
            }),
        ),
        (
            "hostile-garbage-buddyinfo",
            Box::new(|h| h["proc_after"]["buddyinfo"] = json!("random words\n")),
        ),
        (
            "hostile-page-owner-block-out-of-range",
            Box::new(|h| h["page_owner_blocks"] = json!([[1u64 << 50, "Movable"]])),
        ),
        (
            "hostile-dirty-bitmap-missing",
            Box::new(|h| h["dirty_bitmap"] = json!(true)),
        ),
        (
            "hostile-header-wrong-type",
            Box::new(|h| h["zones"] = json!("DMA")),
        ),
    ];
    for (name, f) in &cases {
        v.push((name.to_string(), hostile(f.as_ref())));
    }
    v.push((
        "hostile-header-not-json".into(),
        common::structured(b"{\"end_pfn\": 12", &base.pages, &[]),
    ));
    v.push(("hostile-empty".into(), Vec::new()));
    let mut bad_class = base.pages.clone();
    bad_class[3000] = 0x0f;
    let h = serde_json::to_vec(&base.header).unwrap();
    v.push((
        "hostile-page-class-15".into(),
        common::structured(&h, &bad_class, &[]),
    ));
    v.push((
        "hostile-pages-short".into(),
        common::structured(&h, &base.pages[..4000], &[]),
    ));
    // Hostile files, verbatim.
    let good = common::file_bytes(&base, &dir);
    v.push(("hostile-truncated".into(), good[..good.len() / 2].to_vec()));
    let mut flipped = good.clone();
    let mid = good.len() - 40;
    flipped[mid] ^= 0x55;
    v.push(("hostile-flipped-byte".into(), flipped));
    let mut long_header = good.clone();
    long_header[12..16].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    v.push(("hostile-header-length-4g".into(), long_header));
    // The first PAGE section claims 64 MiB from its few compressed bytes.
    let hl = u32::from_le_bytes(good[12..16].try_into().unwrap()) as usize;
    let mut claims = good.clone();
    claims[16 + hl + 4..16 + hl + 8].copy_from_slice(&(64u32 << 20).to_le_bytes());
    v.push(("hostile-section-claims-64mib".into(), claims));
    let mut version = good.clone();
    version[8] = 7;
    v.push(("hostile-version-7".into(), version));
    // Above the fuzz target's budget: 6 M pfns of free pages (a few KB compressed).
    let mut big = common::machine(4096, 5);
    big.header.end_pfn = 6 << 20;
    big.header.ram_ranges = vec![[1, 6 << 20]];
    big.header.zones[1].spanned = (6 << 20) - 2048;
    big.header.zones[1].present = big.header.zones[1].spanned;
    big.header.zones[1].managed = big.header.zones[1].spanned;
    big.header.proc_before.clear();
    big.header.proc_after.clear();
    big.pages.resize(6 << 20, PAGE_FREE);
    v.push((
        "hostile-over-budget-6m-pfns".into(),
        common::file_bytes(&big, &dir),
    ));
    std::fs::remove_dir_all(&dir).unwrap();
    v
}

const PAGE_FREE: u8 = fraglab_state::page::PageClass::Free as u8;

/// With FRAGLAB_DUMP_SNAPSHOT_FILES=DIR, writes the snapshot file the target makes of each
/// corpus file as DIR/NAME.fsnap (to run the command line on them).
#[test]
fn dump_snapshot_files_when_asked() {
    let Ok(dir) = std::env::var("FRAGLAB_DUMP_SNAPSHOT_FILES") else {
        return;
    };
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(corpus_dir()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let bytes = snapshot_file_bytes(&std::fs::read(&p).unwrap());
        std::fs::write(Path::new(&dir).join(format!("{name}.fsnap")), bytes).unwrap();
    }
}

/// Writes the seeds into the corpus (only with FRAGLAB_WRITE_FUZZ_CORPUS=1).
#[test]
fn write_seed_corpus_when_asked() {
    if std::env::var("FRAGLAB_WRITE_FUZZ_CORPUS").as_deref() != Ok("1") {
        return;
    }
    std::fs::create_dir_all(corpus_dir()).unwrap();
    for (name, bytes) in seeds() {
        std::fs::write(corpus_dir().join(name), bytes).unwrap();
    }
}

/// The committed seeds are what the generator writes now (the generator and the corpus do not
/// drift apart): every seed is in the corpus with the same bytes.
#[test]
fn the_committed_seeds_are_current() {
    for (name, bytes) in seeds() {
        let got = std::fs::read(corpus_dir().join(&name))
            .unwrap_or_else(|e| panic!("{name}: {e} (FRAGLAB_WRITE_FUZZ_CORPUS=1 writes it)"));
        assert!(
            got == bytes,
            "{name} differs from the generator's (FRAGLAB_WRITE_FUZZ_CORPUS=1 rewrites it)"
        );
    }
}

#[test]
fn every_corpus_file_is_read_or_refused_cleanly() {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 30, "the corpus has {} files", files.len());
    let t0 = Instant::now();
    let (mut valid, mut hostile) = (0, 0);
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let t = Instant::now();
        let out = snapshot_run(&bytes);
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("valid-") {
            assert_eq!(out, SnapOutcome::Reconstructed, "{name}");
            valid += 1;
        }
        if name.starts_with("hostile-") {
            assert_eq!(out, SnapOutcome::Refused, "{name}");
            hostile += 1;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "{name}: {:?}", t.elapsed());
    }
    assert!(
        valid >= 7 && hostile >= 25,
        "{valid} valid, {hostile} hostile seeds"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(120),
        "{:?} in all",
        t0.elapsed()
    );
}
