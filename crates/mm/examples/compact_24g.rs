//! Times one full compaction of a fragmented 24 GiB machine and prints what it did.
//! Run: `cargo run --release -p fraglab-mm --example compact_24g`.

use fraglab_mm::folio::FolioKind;
use fraglab_mm::{Gfp, MachineConfig, Mm, Tunables};
use std::time::Instant;

fn main() {
    let t0 = Instant::now();
    let mut mm = Mm::new(
        &MachineConfig::x86_64(24 << 30, true, 2).unwrap(),
        Tunables::default(),
    )
    .unwrap();
    let mut ids = Vec::new();
    while let Some(id) = mm.alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::Anon, false) {
        ids.push(id);
    }
    for (i, id) in ids.iter().enumerate() {
        if i % 2 == 0 {
            mm.free_folio(0, *id);
        }
    }
    mm.drain_all_pages();
    let blocks = |mm: &Mm| {
        mm.zones
            .iter()
            .map(|z| z.area.nr_free[9] + 2 * z.area.nr_free[10])
            .sum::<u64>()
    };
    println!(
        "fragmented in {:.2?}: {} folios allocated, free pageblocks {}",
        t0.elapsed(),
        ids.len(),
        blocks(&mm)
    );
    let t1 = Instant::now();
    let c1 = cpu_ns();
    let st = mm.compact_memory();
    let dt = t1.elapsed();
    let cpu = cpu_ns()
        .zip(c1)
        .map(|(b, a)| format!(" ({:.3} s CPU)", (b - a) as f64 / 1e9));
    println!(
        "compact_memory: {:.3?}{}, migrated {} pages, scanned migrate {} free {}, free pageblocks {}",
        dt,
        cpu.unwrap_or_default(),
        st.migrated_pages,
        st.migrate_scanned,
        st.free_scanned,
        blocks(&mm)
    );
}

/// This thread's CPU time in ns (Linux: the first field of /proc/thread-self/schedstat), for a
/// figure a loaded host's wall clock does not inflate.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
