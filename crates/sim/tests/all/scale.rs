//! Scale models (issue 35, item 3): a 1/4 scale of a tiny machine boots with its memory and
//! CPUs divided and the kernel's derived settings recomputed for the scaled size, and its result
//! says so.

use fraglab_sim::boot::boot;
use fraglab_sim::timed::run_workload;
use fraglab_spec::parse_spec;

const TINY: &str = r#"
name = "tiny"
[machine]
memory = "512MiB"
cpus = 8
swap = "256MiB"
[knobs]
"transparent_hugepage/enabled" = "madvise"
[workload]
duration = "300ms"
[[workload.kbuild]]
jobs_parallel = 8
jobs = 16
iterations = 1
job_anon = "8MiB"
job_cpu = "20ms"
source = "256MiB"
job_read = "1MiB"
[[workload.thp_burst]]
interval = "100ms"
size = "32MiB"
hold = "50ms"
bursts = 2
start = "50ms"
"#;

/// The same machine written at 1/4 by hand: what the kernel would boot on a machine that size.
const TINY_QUARTER_BY_HAND: &str = r#"
[machine]
memory = "128MiB"
cpus = 2
swap = "64MiB"
[knobs]
"transparent_hugepage/enabled" = "madvise"
[workload]
duration = "300ms"
[[workload.kbuild]]
jobs_parallel = 2
jobs = 4
iterations = 1
job_anon = "8MiB"
job_cpu = "20ms"
source = "64MiB"
job_read = "1MiB"
[[workload.thp_burst]]
interval = "100ms"
size = "8MiB"
hold = "50ms"
bursts = 2
start = "50ms"
"#;

#[test]
fn quarter_scale_boots_divided_with_its_own_watermarks() {
    let full = parse_spec(TINY, "tiny.toml").unwrap();
    let quarter = fraglab_spec::scale::scale_spec(&full, 4, 0).unwrap();
    let by_hand = parse_spec(TINY_QUARTER_BY_HAND, "by-hand.toml").unwrap();
    let (f, q, h) = (
        boot(&full).unwrap(),
        boot(&quarter).unwrap(),
        boot(&by_hand).unwrap(),
    );
    let managed = |m: &fraglab_mm::Mm| m.zones.iter().map(|z| z.managed).sum::<u64>();
    let present = |m: &fraglab_mm::Mm| m.zones.iter().map(|z| z.present as u64).sum::<u64>();
    // Memory and CPUs divided.
    assert_eq!(q.nr_cpus, f.nr_cpus / 4);
    assert_eq!(present(&q), present(&h));
    assert!(present(&q) * 4 <= present(&f) && present(&q) * 4 + 4096 >= present(&f));
    // The kernel's derived settings are those of the scaled machine, recomputed at boot (here
    // khugepaged's recommended min_free_kbytes, capped at 5 % of memory), not the full
    // machine's carried over.
    assert_eq!(q.min_free_kbytes, h.min_free_kbytes);
    assert_ne!(q.min_free_kbytes, f.min_free_kbytes);
    assert_eq!(managed(&q), managed(&h));
    for (zq, zh) in q.zones.iter().zip(&h.zones) {
        assert_eq!(zq.wmark, zh.wmark, "{:?}", zq.zone_type);
        assert_eq!(zq.lowmem_reserve, zh.lowmem_reserve, "{:?}", zq.zone_type);
        assert_eq!(zq.pcp.len(), zh.pcp.len());
        for (pq, ph) in zq.pcp.iter().zip(&zh.pcp) {
            assert_eq!(
                (pq.high, pq.high_min, pq.high_max, pq.batch),
                (ph.high, ph.high_min, ph.high_max, ph.batch)
            );
        }
    }
}

#[test]
fn a_scaled_result_carries_its_label_and_counters_times_k() {
    let full = parse_spec(TINY, "tiny.toml").unwrap();
    let quarter = fraglab_spec::scale::scale_spec(&full, 4, 0).unwrap();
    let r = run_workload(&quarter).unwrap();
    assert_eq!(r.schema, fraglab_spec::result::RESULT_SCHEMA_SCALED);
    let s = r.scale.as_ref().expect("a scale object");
    assert_eq!(s.label, "scale model 1/4");
    assert_eq!((s.factor, s.cpus, s.full_cpus), (4, 2, 8));
    assert_eq!((s.memory_bytes, s.full_memory_bytes), (128 << 20, 512 << 20));
    assert!(r.vmstat_delta["pgalloc_normal"] + r.vmstat_delta["pgalloc_dma32"] > 0);
    for (k, v) in &r.vmstat_delta {
        assert_eq!(s.vmstat_delta_scaled_up[k], v * 4, "{k}");
    }
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"label\":\"scale model 1/4\""));
    // It reads back; the compare table says which configuration is scaled.
    let back = fraglab_sim::compare::parse_result(&json, "q.json").unwrap();
    assert_eq!(back, r);
    let plain = run_workload(&full).unwrap();
    assert_eq!(plain.schema, fraglab_spec::result::RESULT_SCHEMA);
    assert!(plain.scale.is_none());
    assert!(!serde_json::to_string(&plain).unwrap().contains("\"scale\""));
    let report = fraglab_sim::compare::compare(&["full".into(), "q".into()], &[vec![plain], vec![r]]);
    assert_eq!(report.scale, vec![String::new(), "scale model 1/4".to_string()]);
    let table = fraglab_sim::compare::format_table(&report);
    assert!(table.starts_with("# scale model 1/4: q"), "{table}");
}
