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
    assert_eq!(v["tally"]["unstable_fail"], 0, "{out}");
    // Trivial rows (both sides next to nothing) are in no pass rate; the old rule counts them.
    assert!(v["pass"].as_u64().unwrap() > 0, "{out}");
    assert!(v["old_rule"]["pass"].as_u64().unwrap() > 20, "{out}");
    assert_eq!(v["old_rule"]["fail"], 0, "{out}");
    // Two kernel runs: the kernel's own leave-one-out ceiling.
    assert!(sc["ceiling"]["all"]["scored"].as_u64().unwrap() > 0, "{sc}");
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

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The CI slice of experiments/validation (issue 19: under 2 minutes): every scenario marked
/// `ci = true` runs in the simulator and is scored with the kernel's side n/a.
#[test]
fn the_ci_slice_of_the_suite_runs_in_the_simulator() {
    let suite = repo().join("experiments/validation");
    let t = std::time::Instant::now();
    let (ok, out, err) = run(&[
        "validate",
        "--suite",
        suite.to_str().unwrap(),
        "--ci",
        "--sim-only",
        "--runs",
        "1",
        "--format",
        "json",
    ]);
    assert!(ok, "{err}");
    let v = json(&out);
    let scenarios = v["scenarios"].as_array().unwrap();
    assert!(scenarios.len() >= 4, "{}", scenarios.len());
    for sc in scenarios {
        assert_eq!(sc["sim_runs"], 1, "{}", sc["name"]);
        assert!(
            sc["notes"].as_array().unwrap().is_empty(),
            "{}: {}",
            sc["name"],
            sc["notes"]
        );
        assert!(sc["rows"].as_array().unwrap().len() > 20, "{}", sc["name"]);
    }
    // The cold reads are scored by their page-cache census.
    let cold = scenarios.iter().find(|s| s["name"] == "cold-read-ext4").unwrap();
    assert!(
        cold["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["row"].as_str().unwrap().starts_with("census ")),
        "{cold}"
    );
    println!(
        "CI slice: {} scenarios in {:.1} s",
        scenarios.len(),
        t.elapsed().as_secs_f64()
    );
}

/// The host arm on the live kernel where it can run (root, Linux >= 6.15): a small scenario
/// without --fit-memory, run once on each side; elsewhere the test says why it did not run.
/// It sets THP knobs and runs a workload on this machine: opt in with `--features live`.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn a_host_arm_runs_where_the_kernel_allows() {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let v: Vec<u32> = release
        .trim()
        .split(['.', '-'])
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc_geteuid() } == 0;
    if !root || v.len() < 2 || (v[0], v[1]) < (6, 15) {
        println!(
            "host arm not run: root {root}, kernel {:?} (needs root and Linux >= 6.15)",
            release.trim()
        );
        return;
    }
    let d = temp_dir("host");
    std::fs::write(d.join("tiny.toml"), TINY).unwrap();
    let (ok, out, err) = run(&[
        "validate",
        "--suite",
        d.to_str().unwrap(),
        "--runs",
        "1",
        "--idle",
        "1",
        "--quiet-wait",
        "0",
        "--format",
        "json",
    ]);
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\nstderr: {err}"));
    let sc = &v["scenarios"][0];
    assert_eq!(sc["kernel"], "host", "{sc}");
    // Another host run (a suite on this machine) holds the machine-wide lock: the run is marked
    // failed with the reason, as it must be, the kernel's side is n/a, and the suite, which then
    // scored nothing against the kernel, exits non-zero saying so.
    if sc["notes"].to_string().contains("busy: another host run holds") {
        assert_eq!(sc["kernel_runs"], 0);
        assert!(!ok && err.contains("scored nothing against the kernel"), "{err}");
        println!("host arm not run: another host run holds the machine-wide lock");
        return;
    }
    assert!(ok, "{err}");
    assert_eq!(sc["kernel_runs"], 1, "{sc}");
    assert!(v["pass"].as_u64().unwrap() > 0, "{out}");
    assert!(d.join("scoreboard.json").exists());
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
