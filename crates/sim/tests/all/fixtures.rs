//! Specs several test files run.

/// A 512 MiB, 2-CPU machine running a small kernel build (two iterations of 30 jobs, three at
/// a time) beside eight 32 MiB bursts of madvised THP faults. Placeholders: `SEED`, `RUN` (a
/// line of extra `[run]` keys, or empty) and `DURATION`.
pub const SMALL_BUILD: &str = r#"
name = "t"
[machine]
memory = "512MiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[run]
seed = SEED
RUN
[workload]
duration = "DURATION"
[[workload.kbuild]]
jobs_parallel = 3
jobs = 30
iterations = 2
job_anon = "8MiB"
job_cpu = "50ms"
source = "1GiB"
job_read = "24MiB"
[[workload.thp_burst]]
interval = "500ms"
size = "32MiB"
hold = "200ms"
bursts = 8
"#;

/// [`SMALL_BUILD`] with the given seed, extra `[run]` line and duration.
pub fn small_build(seed: &str, run: &str, duration: &str) -> String {
    SMALL_BUILD
        .replace("SEED", seed)
        .replace("RUN", run)
        .replace("DURATION", duration)
}

/// A one-zone machine (DMA32 of `blocks` pageblocks from pfn 4096, no holes) with `cpus` CPUs,
/// min_free_kbytes 512 and every invariant checked after each operation.
pub fn dma32_machine(blocks: u32, cpus: u32) -> fraglab_mm::Mm {
    use fraglab_mm::mmzone::{MachineConfig, ZoneConfig};
    let z = ZoneConfig {
        zone_type: fraglab_mm::types::ZoneType::Dma32,
        nid: 0,
        start_pfn: 4096,
        spanned: blocks * 512,
        present: blocks * 512,
        managed: blocks * 512,
    };
    let m = MachineConfig {
        cpu_node: Vec::new(),
        zones: vec![z],
        nr_cpus: cpus,
    };
    let tun = fraglab_mm::Tunables {
        min_free_kbytes: Some(512),
        ..fraglab_mm::Tunables::default()
    };
    let mut mm = fraglab_mm::Mm::new(&m, tun).unwrap();
    mm.debug_vm = true;
    mm
}

/// The default costs without the context-switch charge, so CPU time is the steps' alone.
pub fn no_switch_cost() -> fraglab_sim::cost::CostModel {
    fraglab_sim::cost::CostModel {
        context_switch_ns: 0,
        ..fraglab_sim::cost::CostModel::default()
    }
}
