//! `vm.defrag_mode` given by the spec takes effect on a snapshot boot (issue 33 item 0; §8).
//!
//! The snapshot is a real capture: the live kernel's page state taken by the validation suite
//! right before the THP fault phase of `thp-frag-dm1` (an 8 GiB machine after page cache, small
//! files, slab and pipes with every other object freed). The same capture is booted under each
//! value of the knob and the same THP fault phase run on it; the two runs must differ where §8's
//! rules differ:
//!
//! * D1/D3/D4 (`alloc_flags_nofragment`, `gfp_to_alloc_flags`, `__rmqueue`): under 1 every
//!   allocation carries ALLOC_NOFRAGMENT, so no fallback takes a chunk from a block of another
//!   type without claiming the whole free block — no "steal" (Weiner's pollute) and no partial
//!   claim — unless the slow path's last resort (D5) dropped it;
//! * D6/D8/D10 (`wake_all_kswapds`, `kcompactd_do_work`, `__compact_finished`): kcompactd works
//!   towards the high watermark in free pageblocks instead of stopping at the first free
//!   order-9 chunk, so under 1 it scans at least as much as under 0 from the same state.
//!
//! It also checks that the knob reaches the model at all (the snapshot's own value was 1: under
//! the spec's 0 the model's `defrag_mode` is off).

use std::path::PathBuf;

use fraglab_mm::node::FallbackStats;
use fraglab_spec::parse_spec;

fn capture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../experiments/validation/results/2026-12-05/thp-frag-dm1-kernel-run1.fsnap")
}

fn spec(dm: u32) -> fraglab_spec::Spec {
    let text = format!(
        r#"
[machine]
snapshot = "{snap}"
cpus = 2
read_ahead_kb = 8192
[knobs]
"transparent_hugepage/enabled" = "madvise"
"transparent_hugepage/defrag" = "madvise"
"vm.defrag_mode" = {dm}
[run]
seed = 1
[workload]
duration = "60s"
[[workload.task]]
name = "thp"
steps = [
  {{ mmap = "thp", size = "4GiB", madvise = true }},
  {{ touch = "thp" }},
  {{ slab = 8192 }},
  {{ pipes = 1024 }},
  {{ munmap = "thp" }},
]
"#,
        snap = capture().display()
    );
    parse_spec(&text, "defrag-mode-snapshot.toml").unwrap()
}

struct Out {
    defrag_mode: bool,
    fallbacks: FallbackStats,
    vm: std::collections::BTreeMap<String, i64>,
}

fn run(dm: u32) -> Out {
    let s = spec(dm);
    let mut defrag_mode = None;
    let mut fallbacks = None;
    let r = fraglab_sim::timed::run_workload_inspect(&s, &mut |_| {}, &mut |mm| {
        defrag_mode = Some(mm.tun.defrag_mode);
        fallbacks = Some(mm.fallbacks.clone());
    })
    .unwrap();
    Out {
        defrag_mode: defrag_mode.unwrap(),
        fallbacks: fallbacks.unwrap(),
        vm: r.vmstat_delta.into_iter().collect(),
    }
}

fn sum(m: &[[u64; 3]; 3]) -> u64 {
    m.iter().flatten().sum()
}

#[test]
fn section_8_defrag_mode_from_the_spec_changes_a_snapshot_boot_where_its_rules_differ() {
    let off = run(0);
    let on = run(1);
    assert!(!off.defrag_mode, "the spec's 0 overrides the snapshot's 1");
    assert!(on.defrag_mode);
    // The workload does real work from this state on both: THP faults, direct compaction.
    for o in [&off, &on] {
        assert!(o.vm["thp_fault_alloc"] >= 1000, "{:?}", o.vm);
        assert!(o.vm["compact_stall"] >= 10, "{:?}", o.vm);
    }
    // D4: no steal and no partial claim under 1 (the D5 last resort is reachable only by
    // blocking non-costly requests that exhausted reclaim and compaction; none of this
    // workload's unmovable requests get there on this machine, where reclaim succeeds).
    assert_eq!(sum(&on.fallbacks.steal), 0, "{:?}", on.fallbacks);
    assert_eq!(sum(&on.fallbacks.claim_partial), 0, "{:?}", on.fallbacks);
    // ... which the same workload does under 0 from the same state (unmovable requests claim
    // partly used blocks of another type), so the assertion above is the knob's doing.
    assert!(
        sum(&off.fallbacks.steal) + sum(&off.fallbacks.claim_partial) > 0,
        "{:?}",
        off.fallbacks
    );
    // D8/D10: kcompactd scans on towards the high watermark in free blocks.
    assert!(
        on.vm["compact_daemon_migrate_scanned"] >= off.vm["compact_daemon_migrate_scanned"],
        "dm1 {:?} dm0 {:?}",
        on.vm["compact_daemon_migrate_scanned"],
        off.vm["compact_daemon_migrate_scanned"]
    );
    // And the two runs are not the same run.
    assert_ne!(off.vm, on.vm);
}
