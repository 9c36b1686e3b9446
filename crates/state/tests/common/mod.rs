//! Small synthetic snapshots for the reader's and the reconstruction's tests and the snapshot
//! fuzz target's seed corpus (crates/state/tests/fuzz_corpus.rs).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_state::page::{PageClass, TAIL};
use fraglab_state::reconstruct::{cut_free_run, RFree};
use fraglab_state::snapshot::{Snapshot, SnapshotHeader, ZoneSpan};

/// A directory of its own for a test.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-state-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small deterministic generator (splitmix64).
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Page bytes of a machine of `end` pfns: pfn 0 a hole, 1..16 reserved, then 64-pfn stretches
/// of free pages, anon THPs and order-2 file folios, slab, page tables and kernel pages chosen
/// by `seed`, an order-9 hugetlb page in the last block but one, and a hole stretch.
pub fn machine_pages(end: u64, seed: u64) -> Vec<u8> {
    let mut g = Gen(seed);
    let mut pages = vec![PageClass::Free as u8; end as usize];
    pages[0] = PageClass::Hole as u8;
    pages[1..16].fill(PageClass::Reserved as u8);
    let mut p = 64usize;
    while p + 64 <= end as usize - 1024 {
        let stretch = &mut pages[p..p + 64];
        match g.next() % 8 {
            0..=2 => {}
            3 => {
                for (i, b) in stretch.iter_mut().enumerate() {
                    *b = PageClass::File as u8 | if i % 4 == 0 { 0 } else { TAIL };
                }
            }
            4 => stretch.fill(PageClass::Slab as u8),
            5 => stretch.fill(PageClass::PageTable as u8),
            6 => stretch.fill(PageClass::Kernel as u8),
            _ => stretch.fill(PageClass::Hole as u8),
        }
        p += 64;
    }
    // An anon THP at the third block, a hugetlb page at the last block but one.
    let anon = PageClass::Anon as u8;
    pages[1024] = anon;
    pages[1025..1536].fill(anon | TAIL);
    let h = end as usize - 1024;
    pages[h] = PageClass::Hugetlb as u8;
    pages[h + 1..h + 512].fill(PageClass::Hugetlb as u8 | TAIL);
    pages
}

/// pagetypeinfo and buddyinfo texts (the kernel's layout) for `zones` over `pages`: every free
/// chunk counted Movable, one Unmovable block per zone, the rest Movable.
pub fn proc_texts(pages: &[u8], zones: &[ZoneSpan]) -> BTreeMap<String, String> {
    let mut pti = String::from("Page block order: 9\nPages per block:  512\n\nFree pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \n");
    let mut blocks = String::from(
        "\nNumber of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n",
    );
    let mut buddy = String::new();
    for z in zones.iter().filter(|z| z.spanned > 0) {
        let (s, e) = (z.start_pfn, z.start_pfn + z.spanned);
        let mut free: Vec<RFree> = Vec::new();
        let mut p = s;
        while p < e {
            if pages[p as usize] & 0x0f == PageClass::Free as u8 {
                let run = p;
                while p < e && pages[p as usize] & 0x0f == PageClass::Free as u8 {
                    p += 1;
                }
                cut_free_run(run, p, &mut free);
            } else {
                p += 1;
            }
        }
        let mut n = [0u64; 11];
        for f in &free {
            n[f.order as usize] += 1;
        }
        let row = |counts: [u64; 11]| counts.iter().map(|c| format!("{c:>7}")).collect::<String>();
        for (i, t) in ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"]
            .iter()
            .enumerate()
        {
            let counts = if i == 1 { n } else { [0; 11] };
            pti.push_str(&format!(
                "Node    0, zone {:>8}, type {t:>12}{} \n",
                z.name,
                row(counts)
            ));
        }
        let counted = (s..e)
            .step_by(512)
            .filter(|&p| pages[p as usize] & 0x0f != PageClass::Hole as u8)
            .count() as u64;
        blocks.push_str(&format!(
            "Node 0, zone {:>8} {:>12} {:>12} {:>12} {:>12} {:>12} \n",
            z.name,
            1.min(counted),
            counted.saturating_sub(1),
            0,
            0,
            0
        ));
        buddy.push_str(&format!("Node 0, zone {:>8}{}\n", z.name, row(n)));
    }
    pti.push_str(&blocks);
    [
        ("pagetypeinfo".to_string(), pti),
        ("buddyinfo".to_string(), buddy),
    ]
    .into()
}

/// A two-zone machine (DMA from pfn 1, Normal from pfn `end / 2`) of `end` pfns (a multiple of
/// 1024, at least 4096) with the pages of [`machine_pages`], both /proc reads alike.
pub fn machine(end: u64, seed: u64) -> Snapshot {
    let pages = machine_pages(end, seed);
    let zone = |name: &str, start: u64, stop: u64| {
        let range = &pages[start as usize..stop as usize];
        let holes = range
            .iter()
            .filter(|&&b| b & 0x0f == PageClass::Hole as u8)
            .count() as u64;
        let reserved = range
            .iter()
            .filter(|&&b| b & 0x0f == PageClass::Reserved as u8)
            .count() as u64;
        ZoneSpan {
            node: 0,
            name: name.into(),
            start_pfn: start,
            spanned: stop - start,
            present: stop - start - holes,
            managed: stop - start - holes - reserved,
            min: 8,
            low: 10,
            high: 12,
            pcp_count: 0,
        }
    };
    let zones = vec![zone("DMA", 1, end / 2), zone("Normal", end / 2, end)];
    let proc = proc_texts(&pages, &zones);
    Snapshot {
        header: SnapshotHeader {
            taken_at_unix_s: 1_700_000_000,
            hostname: "synthetic".into(),
            kernel: "6.18.0".into(),
            nr_cpus: 2,
            end_pfn: end,
            ram_ranges: vec![[1, end]],
            zones,
            proc_before: proc.clone(),
            proc_after: proc,
            ..Default::default()
        },
        pages,
        dirty: Vec::new(),
    }
}

/// The file `snap.write` writes, as bytes.
pub fn file_bytes(snap: &Snapshot, dir: &Path) -> Vec<u8> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = dir.join(format!("written-{n}.fsnap"));
    snap.write(&p).unwrap();
    let b = std::fs::read(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    b
}

/// `file` (a container) with its JSON header changed by `f`.
pub fn with_header(file: &[u8], f: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let hl = u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let mut h: serde_json::Value = serde_json::from_slice(&file[16..16 + hl]).unwrap();
    f(&mut h);
    let hb = serde_json::to_vec(&h).unwrap();
    let mut out = file[..12].to_vec();
    out.extend_from_slice(&(hb.len() as u32).to_le_bytes());
    out.extend_from_slice(&hb);
    out.extend_from_slice(&file[16 + hl..]);
    out
}

/// The fuzz target's structured input (fuzz/src/snapshot.rs): header bytes, 0, the page count
/// (u32 LE), the page bytes, the dirty bitmap.
pub fn structured(header: &[u8], pages: &[u8], dirty: &[u8]) -> Vec<u8> {
    let mut v = header.to_vec();
    v.push(0);
    v.extend_from_slice(&(pages.len() as u32).to_le_bytes());
    v.extend_from_slice(pages);
    v.extend_from_slice(dirty);
    v
}
