//! `fraglab bench` with tiny caps runs and its `--format json` is valid (issue 22, item 4).
//! The figures themselves are measurements, not asserted.

use std::process::Command;

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

#[test]
fn bench_with_tiny_caps_emits_json() {
    let o = fraglab()
        .args([
            "bench",
            "--experiments",
            "--max-sim",
            "20ms",
            "--growth",
            "--growth-gib",
            "1,2",
            "--growth-sim",
            "20ms",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("bench: growth, 2 GiB"),
        "progress on stderr: {stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON on stdout");
    let rows = v["rows"].as_array().expect("rows");
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    for k in [
        "experiments.defrag_mode.sim_per_wall",
        "experiments.costly_pagecache.sim_per_wall",
        "experiments.folio_compaction.sim_per_wall",
        "growth.1g.cpu_s",
        "growth.2g.cpu_s",
        "growth.exponent",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
    for r in rows {
        assert!(r["what"].is_string() && r["unit"].is_string() && r["how"].is_string());
    }
    // Two sizes with positive CPU time: the exponent is fitted (a number, not null).
    let exp = rows.iter().find(|r| r["key"] == "growth.exponent").unwrap();
    assert!(exp["value"].as_f64().is_some_and(f64::is_finite), "{exp}");
}

#[test]
fn bench_rejects_a_mode_that_does_not_exist() {
    let o = fraglab()
        .args(["bench", "--kbuild-thp", "--mode", "fast"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("only `exact`"));
}
