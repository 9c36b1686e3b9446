//! `fraglab validate --suite` (issue 19): its bad input, the simulator-only slice, the scoreboard
//! of recorded kernel results, and the CI slice of experiments/validation.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-suite-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A two-second timed spec on a 1 GiB machine: THP faults and a fragmenting task.
const TINY: &str = r#"name = "tiny"
[machine]
memory = "1GiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[run]
seed = 3
[workload]
duration = "2s"
[[workload.thp_burst]]
interval = "500ms"
size = "32MiB"
hold = "200ms"
bursts = 3
[[workload.task]]
name = "frag"
steps = [{ mmap = "a", size = "128MiB" }, { touch = "a", pattern = "random" }, { dontneed = "a", offset = "0", length = "64MiB" }, { slab = 500 }, { sleep = "1s" }]
"#;

fn run(args: &[&str]) -> (bool, String, String) {
    let o = fraglab().args(args).output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn a_suite_without_scenarios_is_an_error() {
    let d = temp_dir("empty");
    let (ok, _, err) = run(&["validate", "--suite", d.to_str().unwrap(), "--sim-only"]);
    assert!(!ok);
    assert!(
        err.contains("no scenario") && err.contains(d.to_str().unwrap()),
        "{err}"
    );
}

#[test]
fn a_bad_suite_key_names_the_file_line_and_key() {
    let d = temp_dir("badkey");
    std::fs::write(d.join("tiny.toml"), TINY).unwrap();
    std::fs::write(
        d.join("suite.toml"),
        "[[scenario]]\nname = \"tiny\"\nspec = \"tiny.toml\"\nkernal = \"host\"\n",
    )
    .unwrap();
    let (ok, _, err) = run(&["validate", "--suite", d.to_str().unwrap(), "--sim-only"]);
    assert!(!ok);
    assert!(
        err.contains("suite.toml") && err.contains("line 4") && err.contains("kernal"),
        "{err}"
    );
    assert!(!d.join("scoreboard.json").exists(), "nothing written");
}

#[test]
fn sim_only_marks_the_kernel_side_na_and_writes_nothing() {
    let d = temp_dir("simonly");
    std::fs::write(d.join("tiny.toml"), TINY).unwrap();
    let (ok, out, err) = run(&[
        "validate",
        "--suite",
        d.to_str().unwrap(),
        "--sim-only",
        "--runs",
        "1",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let v = json(&out);
    let sc = &v["scenarios"][0];
    assert_eq!(sc["name"], "tiny");
    assert_eq!(sc["kernel"], "skipped: --sim-only");
    assert_eq!(sc["sim_runs"], 1);
    let rows = sc["rows"].as_array().unwrap();
    assert!(rows.len() > 20, "{}", rows.len());
    for r in rows {
        assert!(r["kernel"].is_null(), "{r}");
        assert!(r["verdict"].get("not_measured").is_some(), "{r}");
    }
    assert_eq!(v["pass"], 0);
    assert_eq!(v["fail"], 0);
    assert!(!d.join("scoreboard.json").exists() && !d.join("README.md").exists());
}

/// The simulator scored against its own results recorded as the kernel's: every measured row
/// agrees with ratio 1, and the README section and scoreboard.json are written.
#[test]
fn recorded_kernel_results_are_scored_and_written() {
    let d = temp_dir("recorded");
    std::fs::write(d.join("tiny.toml"), TINY).unwrap();
    let rec = d.join("rec");
    std::fs::create_dir_all(&rec).unwrap();
    for (i, seed) in [(1, 3), (2, 4)] {
        let out = rec.join(format!("k-{i}.json"));
        let spec = rec.join(format!("seed{seed}.toml"));
        std::fs::write(&spec, TINY.replace("seed = 3", &format!("seed = {seed}"))).unwrap();
        let (ok, _, err) = run(&["run", spec.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert!(ok, "{err}");
    }
    std::fs::write(
        d.join("suite.toml"),
        "[[scenario]]\nname = \"tiny\"\nspec = \"tiny.toml\"\nkernel = \"rec/k-*.json\"\nruns = 2\n",
    )
    .unwrap();
    std::fs::write(d.join("README.md"), "# Tiny suite\n").unwrap();
    let (ok, out, err) = run(&["validate", "--suite", d.to_str().unwrap(), "--format", "json"]);
    assert!(ok, "{err}");
    let v = json(&out);
    let sc = &v["scenarios"][0];
    assert!(
        sc["kernel"].as_str().unwrap().starts_with("recorded (2 runs"),
        "{}",
        sc["kernel"]
    );
    assert_eq!(v["fail"], 0, "{out}");
    assert!(v["pass"].as_u64().unwrap() > 20);
    for r in sc["rows"].as_array().unwrap() {
        if let Some(x) = r["ratio"].as_f64() {
            assert!((x - 1.0).abs() < 1e-12, "{r}");
        }
    }
    let readme = std::fs::read_to_string(d.join("README.md")).unwrap();
    assert!(readme.starts_with("# Tiny suite\n"));
    assert!(readme.contains("| tiny | recorded (2 runs"), "{readme}");
    assert!(Path::new(&d.join("scoreboard.json")).exists());
}
