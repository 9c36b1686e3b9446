//! Issue 23's `compare --runs 4000000000` (it aborted on a 6.5 TB allocation) is refused
//! before any run with the real limit, and `run` announces a long timed run up front.

use std::process::Command;

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

fn corpus(name: &str) -> String {
    format!("{}/../../fuzz/corpus/spec_run/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn compare_runs_past_the_limit_is_refused() {
    let out = fraglab()
        .args(["compare", "--runs", "4000000000", "--jobs", "1"])
        .arg(corpus("hostile-write-64tib.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "fraglab: --runs 4000000000: at most 10000 runs per configuration (compare holds every \
         run's result in memory until it prints the table)\n"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn compare_runs_at_the_limit_is_accepted() {
    // 10000 runs of a spec that fails to load: the refusal is the spec's, not --runs'.
    let out = fraglab()
        .args(["compare", "--runs", "10000", "--jobs", "1"])
        .arg(corpus("hostile-count-1e12.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("key op[0].count: 1000000000000 allocations"),
        "{err}"
    );
}
