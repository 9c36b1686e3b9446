//! Issue 23 items 4 and 5: a timed run's progress estimate (the workload's expected end, from
//! its generators' work) and `[run] debug_vm` honoured in timed runs (checks every
//! `debug_vm_every` task steps, a violation caught mid-run).

use fraglab_sim::engine::{run_expected_end, Progress, SEC};
use fraglab_sim::timed::{run_workload, run_workload_hooked, run_workload_with_progress, TimedProgress};
use fraglab_spec::parse_spec;

use crate::fixtures::small_build;

fn spec(run: &str) -> fraglab_spec::Spec {
    parse_spec(&small_build("3", run, "10min"), "t.toml").unwrap()
}

#[test]
fn a_task_extrapolates_its_work_and_is_bounded_by_its_end_time() {
    // Half the work in 10 s from a start at 2 s: done at 20 s.
    assert_eq!(
        Progress::work(5, 10).expected_end(2 * SEC, 12 * SEC),
        Some(22 * SEC)
    );
    // Nothing done yet: it cannot tell, unless it has an end time.
    assert_eq!(Progress::work(0, 10).expected_end(0, 5 * SEC), None);
    assert_eq!(Progress::until(30 * SEC).expected_end(0, 5 * SEC), Some(30 * SEC));
    // Both: the earlier; never before now.
    let p = Progress {
        work: Some((1, 10)),
        until_ns: Some(40 * SEC),
        wakes: None,
    };
    assert_eq!(p.expected_end(0, 10 * SEC), Some(40 * SEC));
    assert_eq!(Progress::until(3 * SEC).expected_end(0, 5 * SEC), Some(5 * SEC));
    assert_eq!(Progress::work(10, 10).expected_end(0, 5 * SEC), Some(5 * SEC));
    // A periodic waker ends at its first wake from the work's end: passes at 3, 8, 13 s.
    let flusher = |done| Progress {
        wakes: Some((3 * SEC, 5 * SEC)),
        ..Progress::work(done, 10)
    };
    assert_eq!(flusher(5).expected_end(0, 5 * SEC), Some(13 * SEC));
    assert_eq!(flusher(10).expected_end(0, 2 * SEC), Some(3 * SEC));
    // The run: the latest task, within [now, cap]; unknown if any task cannot tell.
    assert_eq!(run_expected_end(5, 100, [Some(20), Some(50)]), Some(50));
    assert_eq!(run_expected_end(5, 100, [Some(20), Some(500)]), Some(100));
    assert_eq!(run_expected_end(5, 100, [Some(20), None]), None);
    assert_eq!(run_expected_end(5, 100, []), Some(5));
}

#[test]
fn the_expected_end_converges_on_the_real_end_and_leaves_the_result_alone() {
    let s = spec("");
    let mut seen: Vec<TimedProgress> = Vec::new();
    let r = run_workload_with_progress(&s, &mut |p| seen.push(*p)).unwrap();
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&run_workload(&s).unwrap()).unwrap()
    );
    let end = r.duration_ns;
    // The builds end the run well before the 10-minute cap.
    assert!(end < 300 * SEC, "{end}");
    assert!(seen.iter().all(|p| p.cap_ns == 600 * SEC && p.now_ns <= end));
    // From a quarter of the run on, the estimate is known and within 25 % of the real end;
    // over the last tenth, within 5 %.
    for p in seen.iter().filter(|p| p.now_ns >= end / 4) {
        let e = p.expected_end_ns.expect("the builds report their jobs") as f64;
        let tol = if p.now_ns >= end / 10 * 9 { 0.05 } else { 0.25 };
        assert!(
            (e - end as f64).abs() <= tol * end as f64,
            "at {} s: expected end {} s, real {} s",
            p.now_ns / SEC,
            e / 1e9,
            end / SEC
        );
    }
}

#[test]
fn debug_vm_checks_every_n_steps_and_counts_them() {
    let plain = run_workload(&spec("")).unwrap();
    assert!(!plain.sim_work.contains_key("debug_vm_checks"));
    let checked = run_workload(&spec("debug_vm = true\ndebug_vm_every = 2000")).unwrap();
    let checks = checked.sim_work["debug_vm_checks"];
    // The task steps of the run (kernel threads' included) are at least the workload's.
    let mut rest = checked.sim_work.clone();
    rest.remove("debug_vm_checks");
    assert_eq!(rest, plain.sim_work);
    assert_eq!(checked.samples, plain.samples);
    assert!(checks >= 5, "{checks} checks");
    let fewer = run_workload(&spec("debug_vm = true\ndebug_vm_every = 4000")).unwrap();
    let half = fewer.sim_work["debug_vm_checks"];
    // Every N steps plus the one at the end.
    assert_eq!((checks - 1) / 2, half - 1, "{checks} vs {half}");
}

/// Corrupts the model at t = 2 s (a HighAtomic free count no free list backs).
fn corrupt(e: &mut fraglab_sim::engine::Engine) {
    e.on_tick(Box::new(|t, mm| {
        if t == 2 * SEC {
            let z = mm.zones.iter().rposition(|z| z.managed > 0).unwrap();
            mm.zones[z].nr_free_highatomic += 1;
        }
    }));
}

#[test]
fn debug_vm_catches_a_corruption_mid_run() {
    let err = run_workload_hooked(
        &spec("debug_vm = true\ndebug_vm_every = 100"),
        &mut |_| {},
        &mut |_| {},
        &mut corrupt,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("[run] debug_vm: invariant violated after task step"),
        "{err}"
    );
    // Caught at a check after the corruption, before the run's end.
    let t: f64 = err
        .split("(t = ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let end = run_workload(&spec("")).unwrap().duration_ns as f64 / 1e9;
    assert!((2.0..end).contains(&t), "{t} s, end {end} s: {err}");
    // Without debug_vm only the check at the end sees it.
    let err = run_workload_hooked(&spec(""), &mut |_| {}, &mut |_| {}, &mut corrupt)
        .unwrap_err()
        .to_string();
    assert!(err.contains("at the end of the run"), "{err}");
}

/// Above 16 GiB the default end-of-run check is the sampled one
/// (`Mm::check_invariants_sampled`): it still checks every counter, and so finds the
/// corruption; with `debug_vm` the full check runs at the end.
#[test]
fn the_sampled_end_of_run_check_of_a_large_machine_catches_a_broken_counter() {
    let large = |run: &str| {
        parse_spec(
            &small_build("3", run, "3s").replace("memory = \"512MiB\"", "memory = \"20GiB\""),
            "t.toml",
        )
        .unwrap()
    };
    let mut seen = None;
    run_workload_hooked(
        &large(""),
        &mut |_| {},
        &mut |mm| {
            let s = fraglab_mm::debug_vm::CheckSample::end_of_run(3);
            seen = Some((
                mm.zones.iter().map(|z| z.spanned as u64).sum::<u64>() > s.full_up_to_pages,
                mm.check_invariants_sampled(&s).is_ok(),
            ));
        },
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(seen, Some((true, true)), "a sampled check, and a sound machine");
    let err = run_workload_hooked(&large(""), &mut |_| {}, &mut |_| {}, &mut corrupt)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("at the end of the run") && err.contains("nr_free_highatomic"),
        "{err}"
    );
}
