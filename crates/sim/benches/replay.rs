//! Replay speed (issue 21: a recorded trace of ≥ 500k events replays in under 10 s): a
//! synthetic 500 000-event stream (`replay::synth`) replayed on a 4 GiB machine, one policy.
//! Run: `cargo bench -p fraglab-sim --features bench --bench replay` (each iteration is a whole replay).

use criterion::{criterion_group, criterion_main, Criterion};
use fraglab_sim::replay::{replay, synth::synthetic_trace, Policy};

fn replay_500k(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("fraglab-replay-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("synthetic.trace");
    std::fs::write(&path, synthetic_trace(500_000, 1, 400_000)).unwrap();
    let spec = fraglab_spec::parse_spec("[machine]\nmemory = \"4GiB\"\ncpus = 2\n", "bench.toml").unwrap();
    let policies = [Policy {
        label: "sim".into(),
        spec,
    }];
    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    g.bench_function("synthetic_500k_events", |b| {
        b.iter(|| replay(&path, &policies, &mut |_, _| {}).unwrap())
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, replay_500k);
criterion_main!(benches);
