//! `fraglab trace diff` on the simulator's own traces (issue 32): a run streamed to a file with
//! `run_workload_trace_to`, twice with different seeds, diffed.

use std::path::{Path, PathBuf};

use fraglab_sim::timed::{run_workload, run_workload_trace_to};
use fraglab_sim::tracediff::{diff_files, read_side, render_text, DiffOptions, MEASURE_MARKER};
use fraglab_spec::parse_spec;
use fraglab_spec::result::RunResult;

/// 384 MiB in 1 MiB mlocked chunks, every other one unmapped (holes smaller than a huge page),
/// then the measured part: a hugetlb pool that needs compaction, and `compact_memory`.
fn spec_text(seed: u64, pool: u32) -> String {
    let mut steps = String::from("  { nr_hugepages = 0 },\n");
    for i in 0..384 {
        steps.push_str(&format!(
            "  {{ mmap = \"c{i}\", size = \"1MiB\", locked = true }},\n"
        ));
    }
    for i in (0..384).step_by(2) {
        steps.push_str(&format!("  {{ munmap = \"c{i}\" }},\n"));
    }
    steps.push_str(&format!(
        "  {{ measure = true }},\n  {{ nr_hugepages = {pool} }},\n  {{ compact_memory = true }},\n"
    ));
    format!(
        "[machine]\nmemory = \"512MiB\"\ncpus = 2\n[run]\nseed = {seed}\n[workload]\nduration = \"60s\"\n\
         [[workload.task]]\nname = \"t\"\nsteps = [\n{steps}]\n"
    )
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-tracediff-it-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn traced(text: &str, path: &Path) -> RunResult {
    let spec = parse_spec(text, "tracediff.toml").unwrap();
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    run_workload_trace_to(&spec, Box::new(f), "trace.txt", &mut |_| {}, &mut |_| {}).unwrap()
}

#[test]
fn trace_out_then_diff() {
    let d = dir();
    let (a, b) = (d.join("seed1.txt"), d.join("seed2.txt"));
    let ra = traced(&spec_text(1, 150), &a);
    let rb = traced(&spec_text(2, 100), &b);
    assert!(rb.trace_counts["mm_compaction_begin"] > 0);
    // Tracing only observes: the run is the same run as without the file.
    let plain = run_workload(&parse_spec(&spec_text(1, 150), "tracediff.toml").unwrap()).unwrap();
    assert_eq!(plain.vmstat_delta, ra.vmstat_delta);
    assert_eq!(plain.samples, ra.samples);
    assert_eq!(plain.measure_start_ns, ra.measure_start_ns);
    assert!(plain.trace_counts.is_empty());
    // The file holds every event counted (one line each) and the marker once.
    let text = std::fs::read_to_string(&a).unwrap();
    let events: u64 = ra.trace_counts.values().sum();
    assert_eq!(text.lines().count() as u64, events + 1);
    assert_eq!(text.matches(MEASURE_MARKER).count(), 1);
    let k = read_side(&a, None).unwrap();
    assert_eq!(k.malformed, 0, "{:?}", k.malformed_examples);
    // The measured part starts at the marker, written at the run's measure_start_ns.
    let m = ra.measure_start_ns.expect("the spec has a measure step");
    assert_eq!(
        k.phase,
        format!("marker at {:.6} s", ((m + 500) / 1000) as f64 / 1e6)
    );
    assert!(k.skipped_before_phase > 0 || k.events.is_empty());
    assert!(
        k.compaction_runs > 0,
        "the pool needs compaction: {:?}",
        ra.trace_counts
    );
    let triggers = &k.hist["compact_by_trigger"];
    assert!(
        triggers.contains_key("manual"),
        "compact_memory runs: {triggers:?}"
    );
    // A trace against itself has no divergence; against the other seed's, the labelled lines.
    let same = diff_files(&a, &a, &DiffOptions::default()).unwrap();
    assert!(same.first_divergence.is_none() && same.largest_divergence.is_none());
    let dd = diff_files(
        &a,
        &b,
        &DiffOptions {
            episodes: 5,
            ..Default::default()
        },
    )
    .unwrap();
    let out = render_text(&dd);
    for label in [
        "input kernel: ",
        "input sim: ",
        "total compaction_runs: ",
        "hist compact_by_status ",
        "compact[0]: ",
        "first divergence: ",
        "largest divergence: ",
    ] {
        assert!(out.lines().any(|l| l.starts_with(label)), "{label}\n{out}");
    }
    assert!(dd.largest_divergence.is_some(), "{out}");
    println!("{out}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// The CI-size validation scenarios, each run three times with `--trace-out` (seed 1, seed 2,
/// and seed 1 with `vm.defrag_mode = 1`) and the first diffed against the other two:
/// `FRAGLAB_TRACEDIFF_OUT=DIR cargo test -p fraglab-sim --test all -- --ignored tracediff::
/// --nocapture` leaves the traces and the diffs (`NAME.VARIANT.diff.txt`/`.json`) in DIR.
#[test]
#[ignore]
fn validation_scenarios_seeds_and_settings() {
    let out = std::env::var_os("FRAGLAB_TRACEDIFF_OUT").map_or_else(dir, PathBuf::from);
    std::fs::create_dir_all(&out).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/validation");
    let variants: [(&str, &[(&str, &str)]); 3] = [
        ("seed1", &[("run.seed", "1")]),
        ("seed2", &[("run.seed", "2")]),
        ("dm1", &[("run.seed", "1"), ("vm.defrag_mode", "1")]),
    ];
    for name in [
        "compaction-test",
        "scattered-frees-compact",
        "thp-frag-dm0",
        "thpscale",
    ] {
        let text = std::fs::read_to_string(root.join(format!("{name}.toml"))).unwrap();
        let mut paths = Vec::new();
        for (v, over) in variants {
            let over: Vec<(String, String)> =
                over.iter().map(|(k, x)| (k.to_string(), x.to_string())).collect();
            let t = fraglab_spec::apply_overrides(&text, &over).unwrap();
            let p = out.join(format!("{name}-{v}.trace"));
            let t0 = std::time::Instant::now();
            let spec = parse_spec(&t, &format!("{name}.toml")).unwrap();
            let f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
            let r = run_workload_trace_to(&spec, Box::new(f), "trace", &mut |_| {}, &mut |_| {}).unwrap();
            eprintln!(
                "{name} {v}: {:.1} s simulated in {:.1} s, {} events",
                r.duration_ns as f64 / 1e9,
                t0.elapsed().as_secs_f64(),
                r.trace_counts.values().sum::<u64>()
            );
            paths.push(p);
        }
        for (j, (v, _)) in variants.iter().enumerate().skip(1) {
            let d = diff_files(
                &paths[0],
                &paths[j],
                &DiffOptions {
                    episodes: 10,
                    ..Default::default()
                },
            )
            .unwrap();
            let text = render_text(&d);
            std::fs::write(out.join(format!("{name}.{v}.diff.txt")), &text).unwrap();
            std::fs::write(
                out.join(format!("{name}.{v}.diff.json")),
                serde_json::to_string_pretty(&d).unwrap(),
            )
            .unwrap();
            assert_eq!(d.kernel.malformed + d.sim.malformed, 0);
            for l in text
                .lines()
                .filter(|l| l.starts_with("first divergence: ") || l.starts_with("largest divergence: "))
            {
                println!("{name} seed1 vs {v}: {l}");
            }
        }
    }
}
