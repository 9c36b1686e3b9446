//! The pageblock census of the result (issue 32 item 1): a timed run's samples, its pageblock
//! maps and replay's end-state rows count the blocks /proc/pagetypeinfo's "Number of blocks
//! type" counts (`pagetypeinfo_showblockcount_print`, docs/model §16.2 item 4): present,
//! online blocks, not the blocks of zone holes or of offline memory.

use std::collections::BTreeMap;

use fraglab_spec::parse_spec;
use fraglab_spec::result::RunResult;
use fraglab_state::procparse::parse_pagetypeinfo;

const WORKLOAD: &str = r#"
[run]
seed = 1
[workload]
duration = "3s"
[[workload.thp_burst]]
interval = "500ms"
size = "16MiB"
hold = "200ms"
bursts = 4
"#;

/// Blocks per type summed over the zones of a rendered /proc/pagetypeinfo.
fn pti_blocks(pti: &str) -> Vec<u64> {
    let mut sum = vec![0u64; 5];
    for z in parse_pagetypeinfo(pti).values() {
        for (s, n) in sum.iter_mut().zip(z.blocks) {
            *s += n;
        }
    }
    sum
}

fn run(machine: &str) -> RunResult {
    let spec = parse_spec(&format!("{machine}{WORKLOAD}"), "t.toml").unwrap();
    fraglab_sim::timed::run_workload(&spec).unwrap()
}

/// Every sample's blocks per type is what the run's own pagetypeinfo prints (the first sample
/// against the /proc read at the start, the last against the read at the end), and every map
/// has one cell per counted block. Returns the total.
fn check_census(r: &RunResult) -> u64 {
    let first = r.samples.first().unwrap();
    let last = r.samples.last().unwrap();
    assert_eq!(first.blocks_by_type, pti_blocks(&r.proc_start["pagetypeinfo"]));
    assert_eq!(last.blocks_by_type, pti_blocks(&r.proc_end["pagetypeinfo"]));
    let total: u64 = first.blocks_by_type.iter().sum();
    for s in &r.samples {
        assert_eq!(s.blocks_by_type.iter().sum::<u64>(), total, "at {} ns", s.t_ns);
    }
    assert!(r.pageblock_maps.len() >= 2);
    for m in &r.pageblock_maps {
        assert_eq!(m.types.chars().count() as u64, total, "map at {} ns", m.t_ns);
        assert_eq!(m.fill.chars().count() as u64, total);
    }
    total
}

/// A plain machine whose DMA32 zone spans the 3–4 GiB PCI hole: 5 GiB present is 2560 blocks,
/// though the zones span 3072 (§1.2: the hole is in DMA32's span, not present).
#[test]
fn s16_2_samples_count_present_blocks_of_a_machine_with_a_hole() {
    let r = run("[machine]\nmemory = \"5GiB\"\ncpus = 2\n");
    let zi = &r.proc_start["zoneinfo"];
    let spanned: u64 = zi
        .lines()
        .filter_map(|l| l.trim().strip_prefix("spanned"))
        .map(|v| v.trim().parse::<u64>().unwrap())
        .sum();
    assert!(
        spanned > (5u64 << 18) + 512 * 64,
        "the zones span a hole: {spanned}"
    );
    assert_eq!(check_census(&r), 5 << 9);
}

/// A machine fitted as `--fit-memory` fits the kernel's (its zones as the kernel printed them
/// after taking memory blocks offline): Normal spans 2 GiB of which 1 GiB is online, DMA32
/// spans the PCI hole, DMA starts at pfn 1 with holes of its own. The kernel counts 8 + 1528 +
/// 512 blocks.
#[test]
fn s16_2_samples_count_online_blocks_of_a_fitted_machine() {
    let machine = r#"
[machine]
cpus = 2
[[machine.zone]]
name = "DMA"
start_pfn = 1
spanned = 4095
present = 3998
managed = 3840
[[machine.zone]]
name = "DMA32"
start_pfn = 4096
spanned = 1044480
present = 782336
managed = 772848
[[machine.zone]]
name = "Normal"
start_pfn = 1048576
spanned = 524288
present = 262144
managed = 258048
"#;
    let r = run(machine);
    assert_eq!(check_census(&r), 8 + 1528 + 512);
    let per_zone: BTreeMap<String, u64> = parse_pagetypeinfo(&r.proc_end["pagetypeinfo"])
        .into_iter()
        .map(|(z, p)| (z, p.blocks.iter().sum()))
        .collect();
    assert_eq!(per_zone["DMA"], 8);
    assert_eq!(per_zone["DMA32"], 1528);
    assert_eq!(per_zone["Normal"], 512);
    // The maps' zones start where the previous zone's counted blocks end.
    let m = &r.pageblock_maps[0];
    let starts: Vec<usize> = m.zones.iter().map(|(_, s)| *s).collect();
    assert_eq!(starts, vec![0, 8, 8 + 1528]);
}

/// Replay's end-state rows of a simulated column count the blocks the column's machine's
/// pagetypeinfo counts: a DMA32 zone spanning 8192 pages with 4096 present (the rest a hole) has 8
/// blocks, not 16.
#[test]
fn s16_2_replay_end_state_counts_present_blocks() {
    use fraglab_mm::vmstat::render_pagetypeinfo;
    use fraglab_sim::replay::{replay, Policy};
    let spec = parse_spec(
        "[machine]\ncpus = 2\n[[machine.zone]]\nname = \"DMA32\"\nstart_pfn = 4096\nspanned = 8192\npresent = 4096\n[knobs]\n\"vm.min_free_kbytes\" = 512\n",
        "t.toml",
    )
    .unwrap();
    let mm = fraglab_sim::boot(&spec).unwrap();
    let want = pti_blocks(&render_pagetypeinfo(0, &mm.zone_views()));
    assert_eq!(want.iter().sum::<u64>(), 8);
    let path = std::env::temp_dir().join(format!("fraglab-census-{}.trace", std::process::id()));
    let mut text = String::from("# tracer: nop\n#\n");
    fraglab_mm::trace::TraceRecord::new(
        1_000_000_000,
        0,
        100,
        fraglab_mm::trace::TraceEvent::MmPageAlloc {
            pfn: Some(0x2000),
            order: 0,
            gfp: fraglab_mm::Gfp::GFP_KERNEL,
            migratetype: 0,
        },
    )
    .with_comm("worker")
    .render(&mut text);
    std::fs::write(&path, text).unwrap();
    let r = replay(
        &path,
        &[Policy {
            label: "sim".into(),
            spec,
        }],
        &mut |_, _| {},
    )
    .unwrap();
    let _ = std::fs::remove_file(&path);
    // The allocation may retype blocks (a steal), never add or drop one.
    let end = r.columns[1].end_state.blocks_by_type.unwrap();
    assert_eq!(end.iter().sum::<u64>(), 8, "{end:?}");
}
