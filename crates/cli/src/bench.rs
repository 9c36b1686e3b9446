//! `fraglab bench`: the standard performance figures in one run (issue "experiments", item 5).
//! Each figure is measured here, on this host, when the command runs; nothing is cached.

use std::time::Instant;

use fraglab_mm::{Gfp, MachineConfig, Mm, Tunables};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One row of the table.
pub struct Row {
    pub what: String,
    pub value: f64,
    pub unit: &'static str,
    pub how: String,
}

fn machine(bytes: u64) -> Mm {
    Mm::new(
        &MachineConfig::x86_64(bytes, true, 2).expect("a valid machine"),
        Tunables::default(),
    )
    .expect("boots")
}

/// Order-0 GFP_KERNEL allocate + free pairs through the PCP lists, and order-0/3/9 mixed
/// allocations freed in random order (buddy merges, fallbacks), on a 4 GiB machine.
fn alloc_free() -> Vec<Row> {
    let mut mm = machine(4 << 30);
    let n = 2_000_000u64;
    let t = Instant::now();
    for _ in 0..n {
        let p = mm.alloc_pages(0, Gfp::GFP_KERNEL, 0).expect("memory");
        mm.free_pages(0, p, 0);
    }
    let pcp = n as f64 / t.elapsed().as_secs_f64();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut live: Vec<(u32, u32)> = Vec::new();
    let mut ops = 0u64;
    let t = Instant::now();
    for _ in 0..400_000 {
        if live.len() < 200_000 && rng.gen_bool(0.55) {
            let (gfp, order) = match rng.gen_range(0..10) {
                0 => (Gfp::GFP_KERNEL, 0),
                1 => (Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE), 0),
                2 => (Gfp::GFP_HIGHUSER_MOVABLE, 3),
                3 => (Gfp::GFP_TRANSHUGE_LIGHT, 9),
                _ => (Gfp::GFP_HIGHUSER_MOVABLE, 0),
            };
            if let Some(p) = mm.alloc_pages(0, gfp, order) {
                live.push((p, order));
            }
        } else if !live.is_empty() {
            let i = rng.gen_range(0..live.len());
            let (p, o) = live.swap_remove(i);
            mm.free_pages(0, p, o);
        }
        ops += 1;
    }
    let mixed = ops as f64 / t.elapsed().as_secs_f64();
    vec![
        Row {
            what: "alloc+free, order 0, PCP".into(),
            value: pcp,
            unit: "pairs/s",
            how: format!("{n} alloc_pages/free_pages pairs, 4 GiB machine"),
        },
        Row {
            what: "alloc or free, mixed orders".into(),
            value: mixed,
            unit: "ops/s",
            how: "400,000 random ops: orders 0/3/9, three migratetypes, random frees".into(),
        },
    ]
}

/// compact_memory on a 4 GiB machine filled with movable order-0 pages, every other one freed.
fn compaction() -> Row {
    let mut mm = machine(4 << 30);
    let mut folios = Vec::new();
    while let Some(id) = mm.alloc_folio(
        0,
        Gfp::GFP_HIGHUSER_MOVABLE.union(Gfp::NORETRY),
        0,
        fraglab_mm::folio::FolioKind::Anon,
        false,
    ) {
        folios.push(id);
        if folios.len() as u64 >= mm.end_pfn() as u64 * 8 / 10 {
            break;
        }
    }
    for id in folios.iter().step_by(2) {
        mm.free_folio(0, *id);
    }
    mm.drain_all_pages();
    let t = Instant::now();
    let st = mm.compact_memory();
    let secs = t.elapsed().as_secs_f64();
    Row {
        what: "compaction pfns scanned".into(),
        value: (st.migrate_scanned + st.free_scanned) as f64 / secs,
        unit: "pfns/s",
        how: format!(
            "compact_memory, 4 GiB, every other anon page freed: {} + {} pfns scanned, {} pages migrated in {:.3} s",
            st.migrate_scanned, st.free_scanned, st.migrated_pages, secs
        ),
    }
}

fn footprint() -> Row {
    let mm = machine(64 << 30);
    Row {
        what: "host memory per simulated page".into(),
        value: mm.host_bytes() as f64 / mm.end_pfn() as f64,
        unit: "bytes",
        how: "per-page arrays + pageblock bits of a 64 GiB machine (Mm::host_bytes), before any folio".into(),
    }
}

/// Simulated seconds per wall second of a spec (run once).
pub fn sim_ratio(label: &str, spec: &fraglab_spec::Spec) -> Result<Row, String> {
    let t = Instant::now();
    let r = fraglab_sim::timed::run_workload(spec).map_err(|e| e.to_string())?;
    let wall = t.elapsed().as_secs_f64();
    let sim = r.duration_ns as f64 / 1e9;
    Ok(Row {
        what: format!("simulated/wall: {label}"),
        value: sim / wall,
        unit: "x",
        how: format!("{sim:.1} s simulated in {wall:.2} s"),
    })
}

pub fn core_rows() -> Vec<Row> {
    let mut rows = alloc_free();
    rows.push(compaction());
    rows.push(footprint());
    rows
}

pub fn format(rows: &[Row]) -> String {
    let mut out = format!("{:<44} {:>16} {:<8} {}\n", "figure", "value", "unit", "how");
    for r in rows {
        out.push_str(&format!(
            "{:<44} {:>16.1} {:<8} {}\n",
            r.what, r.value, r.unit, r.how
        ));
    }
    out
}
