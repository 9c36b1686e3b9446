//! The kpageflags decoding of the `census` step (docs/model §30.2) on a page cache
//! recorded on this project's VM (tests/data/README.md, census-ext4-16m.kpf).

use std::collections::BTreeMap;

use fraglab_host::census::{decode, KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL, KPF_LRU};

/// (file page index, PFN, flags) of every page of the fixture.
fn fixture() -> Vec<(u64, u64, u64)> {
    let b = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/census-ext4-16m.kpf"
    ))
    .unwrap();
    assert_eq!(b.len(), 4096 * 24);
    b.chunks(24)
        .map(|c| {
            let u = |i: usize| u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
            (u(0), u(1), u(2))
        })
        .collect()
}

/// §30.2.1 on real bytes: each head's run of tails gives its order, and every page is counted
/// in exactly one folio: the recorded read's readahead ramp.
#[test]
fn s30_2_decodes_a_recorded_cold_read() {
    let rows = fixture();
    // The recorded pages are page-cache pages: on the LRU, large ones compound.
    assert!(rows.iter().all(|r| r.2 & KPF_LRU != 0));
    assert!(rows.iter().any(|r| r.2 & KPF_COMPOUND_TAIL != 0));
    let mut kpf: BTreeMap<u64, u64> = rows.iter().map(|r| (r.1, r.2)).collect();
    let pages: Vec<(u64, u64)> = rows.iter().map(|r| (r.0, r.1)).collect();
    let (p, f) = decode(&pages, &mut kpf);
    assert_eq!(p, [128, 0, 256, 0, 512, 0, 1024, 128, 2048, 0, 0]);
    assert_eq!(f, [128, 0, 64, 0, 32, 0, 16, 1, 8, 0, 0]);
    // Starting mid-folio (the first 1000 pages not cached): the tail finds its head, and the
    // folio it is in counts whole.
    let (p2, _) = decode(&pages[1000..], &mut kpf);
    // Page 1000 lies in the order-6 folio at pages 960..1024.
    assert_eq!(p2.iter().sum::<u64>(), 4096 - 960);
    // Without the compound bits every page would be order 0: the bits are what is decoded.
    let mut flat: BTreeMap<u64, u64> = rows
        .iter()
        .map(|r| (r.1, r.2 & !(KPF_COMPOUND_HEAD | KPF_COMPOUND_TAIL)))
        .collect();
    assert_eq!(decode(&pages, &mut flat).0[0], 4096);
}
