//! `fraglab compare --from DIR...` (issue 23, item 2): result files written by `compare
//! --results-dir`, here or elsewhere, merged into the same table as the runs that made them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fraglab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn fail(o: Output) -> String {
    assert!(!o.status.success(), "should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-from-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// Two seconds of the pgbench example (its TPS figures are floating point, so the JSON
// round trip is covered) and of the kbuild example with defrag_mode on.
const BASE: &str = "base=example:pgbench-checkpoints@workload.duration=\"2s\",run.seed=7";
const DM: &str = "dm=example:pgbench-checkpoints@workload.duration=\"2s\",run.seed=7,vm.defrag_mode=1";

/// The table without its first line (which says how the table was made).
fn body(o: &Output) -> String {
    let t = String::from_utf8_lossy(&o.stdout);
    t.split_once('\n').unwrap().1.to_string()
}

#[test]
fn from_results_dir_gives_the_same_table() {
    let d = temp_dir("same");
    let res = d.join("results");
    let json = d.join("compare.json");
    ok(&fraglab(&[
        "compare",
        DM,
        BASE,
        "--runs",
        "2",
        "--results-dir",
        s(&res),
        "--format",
        "json",
        "-o",
        s(&json),
    ]));
    let names: Vec<String> = std::fs::read_dir(&res)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    // The files' order puts "base" first; --baseline restores the run's column order.
    let merged = fraglab(&[
        "compare",
        "--from",
        s(&res),
        "--baseline",
        "dm",
        "--format",
        "json",
    ]);
    ok(&merged);
    assert_eq!(
        String::from_utf8_lossy(&merged.stdout),
        std::fs::read_to_string(&json).unwrap()
    );
    // The printed table, too (all but the header line).
    let direct = fraglab(&["compare", DM, BASE, "--runs", "2"]);
    ok(&direct);
    let merged = fraglab(&["compare", "--from", s(&res), "--baseline", "dm"]);
    ok(&merged);
    assert_eq!(body(&merged), body(&direct));
    assert!(String::from_utf8_lossy(&merged.stdout)
        .starts_with("# fraglab compare: 2 configurations x 2 runs, merged from"));
    // Without --baseline, the first label found (by file name) is the baseline.
    let o = fraglab(&["compare", "--from", s(&res), "--format", "json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["configs"], serde_json::json!(["base", "dm"]));
}

#[test]
fn runs_made_in_two_places_merge_like_one_compare() {
    let d = temp_dir("two");
    let (a, b) = (d.join("a"), d.join("b"));
    // Seeds 7 here and 8 "on another machine": together, `--runs 2` from seed 7.
    ok(&fraglab(&["compare", BASE, "--results-dir", s(&a)]));
    let other = BASE.replace("run.seed=7", "run.seed=8");
    ok(&fraglab(&["compare", &other, "--results-dir", s(&b)]));
    let merged = fraglab(&["compare", "--from", s(&a), s(&b), "--format", "json"]);
    ok(&merged);
    let direct = fraglab(&["compare", BASE, "--runs", "2", "--format", "json"]);
    ok(&direct);
    assert_eq!(merged.stdout, direct.stdout);

    // The same directory twice: the same runs twice, refused naming both files.
    let e = fail(fraglab(&["compare", "--from", s(&a), s(&a)]));
    assert!(
        e.contains("base-run1.json and") && e.contains("the same run twice"),
        "{e}"
    );
    // A result of another spec under the label: refused naming the file.
    let c = d.join("c");
    ok(&fraglab(&[
        "compare",
        "base=example:kbuild-thp-burst@workload.duration=\"1s\"",
        "--results-dir",
        s(&c),
    ]));
    std::fs::rename(c.join("base-run1.json"), c.join("base-run2.json")).unwrap();
    let e = fail(fraglab(&["compare", "--from", s(&a), s(&c)]));
    assert!(
        e.contains("base-run2.json: configuration \"base\" mixes results of different specs"),
        "{e}"
    );
    // A baseline no result has, a directory without results, and a file that is no result.
    let e = fail(fraglab(&["compare", "--from", s(&a), "--baseline", "nope"]));
    assert!(
        e.contains("--baseline \"nope\"") && e.contains("there are: base"),
        "{e}"
    );
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let e = fail(fraglab(&["compare", "--from", s(&empty)]));
    assert!(e.contains("empty: no result files"), "{e}");
    std::fs::write(c.join("x-run1.json"), "{\"schema\": 1,\n\"engine\": 3}").unwrap();
    let e = fail(fraglab(&["compare", "--from", s(&c)]));
    assert!(e.contains("x-run1.json: line 2"), "{e}");
    // --from runs nothing: configurations with it are refused by the argument parser.
    let e = fail(fraglab(&["compare", BASE, "--from", s(&a)]));
    assert!(e.contains("cannot be used with"), "{e}");
}

/// SIGINT during `compare --results-dir` (issue 34, item 5): the runs that finished are on
/// disk, each file whole, the running one finishes and is written, no further run starts, and
/// the command fails naming the complete files. (Before, every file was written only after all
/// runs: an interrupted compare left the directory empty.)
#[test]
fn sigint_keeps_every_finished_run() {
    // ~0.25 s a run in the test profile: 40 runs leave seconds between the first file and the end.
    const LONG: &str = "base=example:pgbench-checkpoints@workload.duration=\"30s\",run.seed=7";
    let d = temp_dir("sigint");
    let res = d.join("results");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fraglab"))
        .args([
            "compare",
            LONG,
            "--runs",
            "40",
            "--jobs",
            "1",
            "--results-dir",
            s(&res),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let jsons = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| p.extension().is_some_and(|e| e == "json"));
        v.sort();
        v
    };
    let t0 = std::time::Instant::now();
    while jsons(&res).is_empty() {
        assert!(t0.elapsed().as_secs() < 300, "no run finished in 300 s");
        assert!(
            child.try_wait().unwrap().is_none(),
            "compare ended before any file"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an interrupted compare fails: {err}");
    assert!(err.contains("interrupted by SIGINT after"), "{err}");
    let files = jsons(&res);
    assert!(
        !files.is_empty() && files.len() < 40,
        "{} files: {err}",
        files.len()
    );
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(err.contains(name), "{name} not named: {err}");
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap())
            .unwrap_or_else(|e| panic!("{name} is not whole: {e}"));
        assert!(v.is_object(), "{name}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(&res)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_none_or(|x| x != "json"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}
