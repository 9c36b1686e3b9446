//! Phases (issue 19): `[[workload.task]] after` and the `{ measure = true }` step — the result's
//! vmstat deltas, latency histograms and rows cover the measured part, the prelude's deltas
//! are kept beside them.

use fraglab_sim::timed::run_workload;
use fraglab_spec::parse_spec;
use fraglab_spec::result::RunResult;

/// A prelude task that maps, touches (THP, madvised) and unmaps 96 MiB, then a measured task
/// started after it that touches 32 MiB. `MEASURE` is the measured task's first step.
const SPEC: &str = r#"
[machine]
memory = "1GiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[workload]
duration = "30s"
[[workload.task]]
name = "age"
steps = [
  { mmap = "a", size = "96MiB", madvise = true },
  { touch = "a" },
  { munmap = "a" },
]
[[workload.task]]
name = "run"
after = "age"
start = "10ms"
steps = [
  MEASURE
  { mmap = "b", size = "32MiB", madvise = true },
  { touch = "b" },
  { compute = "5ms" },
]
"#;

fn run(measure: &str, drop_run: bool) -> RunResult {
    let mut text = SPEC.replace("MEASURE", measure);
    if drop_run {
        text = text[..text.find("[[workload.task]]\nname = \"run\"").unwrap()].to_string();
    }
    run_workload(&parse_spec(&text, "phases.toml").unwrap()).unwrap()
}

fn faults(r: &RunResult) -> u64 {
    r.fault_latency.iter().map(|h| h.count).sum()
}

/// The measured deltas are the whole run's minus the prelude's: with the marker the run is the
/// same run (the step takes no time), so the prelude's deltas plus the measured ones are the
/// deltas of the run without it, item by item; the prelude's THP faults are those of the
/// prelude task alone, and the measured part's are the measured task's 16.
#[test]
fn phases_measured_deltas_cover_the_measured_part() {
    let whole = run("", false);
    let phased = run("{ measure = true },", false);
    let alone = run("", true);
    assert_eq!(whole.measure_start_ns, None);
    assert_eq!(whole.prelude, None);
    let t = phased.measure_start_ns.expect("the run reached the measure step");
    let prelude = phased.prelude.as_ref().expect("a prelude");
    assert_eq!(prelude.duration_ns, t);
    // The measured task starts 10 ms after the prelude task exited.
    assert!(t >= 10_000_000 && t < whole.duration_ns, "{t}");
    assert_eq!(phased.duration_ns, whole.duration_ns);
    assert_eq!(phased.samples, whole.samples, "samples keep the whole run");
    for (k, v) in &whole.vmstat_delta {
        assert_eq!(
            prelude.vmstat_delta[k] + phased.vmstat_delta[k],
            *v,
            "{k}: prelude + measured = whole"
        );
    }
    let d = |r: &std::collections::BTreeMap<String, i64>, k: &str| r[k];
    // The prelude moved what only it moves: its 48 THP faults and the frees of its unmap.
    assert_eq!(d(&whole.vmstat_delta, "thp_fault_alloc"), 64);
    assert_eq!(d(&prelude.vmstat_delta, "thp_fault_alloc"), 48);
    assert_eq!(
        d(&prelude.vmstat_delta, "thp_fault_alloc"),
        d(&alone.vmstat_delta, "thp_fault_alloc")
    );
    assert_eq!(d(&phased.vmstat_delta, "thp_fault_alloc"), 16);
    assert!(d(&prelude.vmstat_delta, "pgfree") >= 96 * 256);
    assert!(d(&phased.vmstat_delta, "pgfree") < d(&whole.vmstat_delta, "pgfree"));
    // The latency histograms restart at the marker: the measured task's 16 faults only.
    assert_eq!(faults(&whole), 64);
    assert_eq!(faults(&phased), 16);
}

/// `after`: the second task starts `start` after the first has exited, not at its own `start`
/// from the run's beginning; without `after` both start at once.
#[test]
fn phases_after_starts_when_the_named_task_is_done() {
    let phased = run("{ measure = true },", false);
    let t = phased.measure_start_ns.unwrap();
    let unordered = SPEC
        .replace("MEASURE", "{ measure = true },")
        .replace("after = \"age\"\n", "");
    let r = run_workload(&parse_spec(&unordered, "phases.toml").unwrap()).unwrap();
    assert_eq!(r.measure_start_ns, Some(10_000_000));
    assert!(t > 10_000_000, "{t}");
}

/// No marker: the result has no prelude and its JSON carries neither field (byte-identical to
/// a run before phases).
#[test]
fn phases_no_marker_no_fields() {
    let json = serde_json::to_string(&run("", false)).unwrap();
    assert!(!json.contains("prelude") && !json.contains("measure_start_ns"));
}
