//! `--fit-memory` by offlining (issue 19, item 4): the simulator's arm of `fraglab validate`
//! boots the zones the host had once fitted ([`fraglab_host::sim_spec_for`]). The offlining
//! itself is tested on fake sysfs trees in `src/memblock.rs` and live in `tests/live.rs`.

use fraglab_host::sim_spec_for;
use fraglab_spec::result::{FitMemory, RunResult, ZoneLayout};
use fraglab_spec::{parse_spec, ZoneSpec, ZoneType};

const SPEC: &str = r#"[machine]
memory = "8GiB"
[workload]
duration = "2s"
[[workload.task]]
steps = [{ mmap = "a", size = "16MiB" }, { touch = "a" }]
"#;

fn zone(name: &str, start_pfn: u64, spanned: u64, present: u64, managed: u64) -> ZoneLayout {
    ZoneLayout {
        name: name.into(),
        start_pfn,
        spanned,
        present,
        managed,
    }
}

/// This VM after offlining its Normal zone down to 4 GiB: DMA and DMA32 as they were, Normal
/// spanning what is left (zoneinfo of a fitted run).
fn fitted(method: &str) -> RunResult {
    RunResult {
        engine: "host".into(),
        fit_memory: Some(FitMemory {
            method: method.into(),
            zones: vec![
                zone("DMA", 1, 4095, 3998, 3840),
                zone("DMA32", 4096, 1_044_480, 782_336, 772_915),
                zone("Normal", 1_048_576, 1_048_576, 1_048_576, 1_032_000),
            ],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn sim_spec_for_boots_the_hosts_zones_after_offlining() {
    let spec = parse_spec(SPEC, "spec.toml").unwrap();
    let s = sim_spec_for(&spec, &fitted("offline"));
    let zones = s.machine.zones.as_ref().expect("explicit zones");
    assert_eq!(
        zones[2],
        ZoneSpec {
            zone: ZoneType::Normal,
            start_pfn: 1_048_576,
            spanned: 1_048_576,
            present: 1_048_576,
            managed: 1_032_000,
        }
    );
    assert_eq!(zones.len(), 3);
    assert_eq!(s.machine.memory_bytes, None);
    // The simulator accepts the layout: the zones it boots are the host's.
    let mc = fraglab_sim::boot::machine_config(&s).unwrap();
    let managed: Vec<u64> = mc.zones.iter().map(|z| z.managed as u64).collect();
    assert_eq!(managed, vec![3840, 772_915, 1_032_000]);
    // Everything else is the spec's.
    assert_eq!(s.workload, spec.workload);
}

#[test]
fn sim_spec_for_keeps_the_spec_after_a_hugetlb_pool_or_without_fitting() {
    let spec = parse_spec(SPEC, "spec.toml").unwrap();
    assert_eq!(sim_spec_for(&spec, &fitted("hugetlb")), spec);
    assert_eq!(sim_spec_for(&spec, &RunResult::default()), spec);
}

/// A mixed fit (offlining what went, a hugetlb pool for the rest): the simulator boots the
/// host's zones with the pool taken out at boot (`machine.hugetlb_pages`, docs/model
/// §28.1), as the host held it.
#[test]
fn sim_spec_for_boots_the_zones_and_the_pool_of_a_mixed_fit() {
    let spec = parse_spec(SPEC, "spec.toml").unwrap();
    let mut host = fitted("offline+hugetlb");
    host.fit_memory.as_mut().unwrap().hugetlb_pages = 300;
    let s = sim_spec_for(&spec, &host);
    assert_eq!(s.machine.zones.as_ref().map(Vec::len), Some(3));
    assert_eq!(s.machine.hugetlb_pages, 300);
    assert_eq!(s.machine.memory_bytes, None);
    // Offlining alone leaves the spec's pool (none) alone.
    assert_eq!(sim_spec_for(&spec, &fitted("offline")).machine.hugetlb_pages, 0);
    // The simulator boots it: the pool's pages are out of the buddy allocator.
    fraglab_sim::boot::machine_config(&s).unwrap();
}
