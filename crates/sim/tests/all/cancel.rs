//! Issue 36 item 4: runs that stop on a cancellation flag (the Python package's Ctrl-C). Never
//! set, the flag changes nothing in the result; set, the run stops at the next engine event
//! (timed) or operation (timeless) with an "interrupted" error.

use std::sync::atomic::{AtomicBool, Ordering};

use fraglab_sim::compare::{load_config, load_config_detailed, ConfigError};
use fraglab_sim::timed::{run_workload, run_workload_cancellable};
use fraglab_sim::timeless::{run_ops_result, run_ops_result_cancellable};
use fraglab_spec::parse_spec;

use crate::fixtures::small_build;

const OPS: &str = r#"
[machine]
memory = "64MiB"
dma = false
[[op]]
alloc = "a"
count = 100
gfp = "GFP_KERNEL"
[[op]]
free = "a"
[[op]]
print = "buddyinfo"
"#;

#[test]
fn a_timed_run_never_cancelled_is_the_same_and_one_cancelled_stops_at_once() {
    let s = parse_spec(&small_build("3", "", "10min"), "t.toml").unwrap();
    let flag = AtomicBool::new(false);
    let r = run_workload_cancellable(&s, &mut |_| {}, &flag).unwrap();
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&run_workload(&s).unwrap()).unwrap()
    );
    assert!(
        r.duration_ns > 1_000_000_000,
        "the run is long enough to be cut short"
    );
    // Set at the first progress report (simulated 100 ms): no report after it.
    let mut reports = Vec::new();
    let e = run_workload_cancellable(
        &s,
        &mut |p| {
            reports.push(p.now_ns);
            flag.store(true, Ordering::Relaxed);
        },
        &flag,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "t.toml: interrupted");
    assert_eq!(reports.len(), 1);
    assert!(reports[0] < 200_000_000);
    // Set before it starts: it stops after boot.
    assert_eq!(
        run_workload_cancellable(&s, &mut |_| {}, &flag)
            .unwrap_err()
            .to_string(),
        "t.toml: interrupted"
    );
}

#[test]
fn a_timeless_run_never_cancelled_is_the_same_and_one_cancelled_stops_before_the_next_op() {
    let s = parse_spec(OPS, "ops.toml").unwrap();
    let flag = AtomicBool::new(false);
    let r = run_ops_result_cancellable(&s, &mut |_, _| {}, &flag).unwrap();
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&run_ops_result(&s).unwrap()).unwrap()
    );
    let mut done = Vec::new();
    let e = run_ops_result_cancellable(
        &s,
        &mut |i, _| {
            done.push(i);
            flag.store(true, Ordering::Relaxed);
        },
        &flag,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "ops.toml: interrupted");
    assert_eq!(done, [1], "the second op never ran");
}

#[test]
fn a_configs_errors_keep_their_text_and_say_where_the_spec_is_at_fault() {
    // An unknown key: the spec's error, with its file, line and key.
    let c = "example:kbuild-thp-burst@workload.nope=1";
    let Err(ConfigError::Spec { error, shown: None }) = load_config_detailed(c) else {
        panic!("a spec error")
    };
    assert_eq!(error.key.as_deref(), Some("workload.nope"));
    assert!(error.line > 0);
    assert_eq!(load_config(c).unwrap_err(), error.to_string());
    // An override that cannot apply: named by the configuration, as before.
    let c = "example:kbuild-thp-burst@workload.kbuild[7].jobs=1";
    let Err(ConfigError::Spec {
        error,
        shown: Some(shown),
    }) = load_config_detailed(c)
    else {
        panic!("a spec error")
    };
    assert_eq!(
        error.file,
        "examples/kbuild-thp-burst.toml [workload.kbuild[7].jobs=1]"
    );
    assert_eq!(shown, format!("{c}: {}", error.message));
    assert_eq!(load_config(c).unwrap_err(), shown);
    // No such example: the spec's fault; the message as before.
    let Err(ConfigError::Spec {
        error,
        shown: Some(shown),
    }) = load_config_detailed("example:nope")
    else {
        panic!("a spec error")
    };
    assert_eq!(error.file, "examples/nope.toml");
    assert!(shown.starts_with("no built-in example \"nope\""), "{shown}");
    // A malformed configuration is not the spec's fault.
    assert!(matches!(
        load_config_detailed("example:kbuild-thp-burst@nope"),
        Err(ConfigError::Config(m)) if m.ends_with("override \"nope\" is not KEY=VALUE")
    ));
}
