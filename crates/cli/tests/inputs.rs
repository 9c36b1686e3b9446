//! Issue 23 item 5: no silent acceptance — output paths checked before the run, warnings for
//! inputs that are accepted but do not do what they say, line numbers on every spec error,
//! timeless runs' JSON results.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-inputs-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The whole kbuild-thp experiment: minutes of work, so a check after the run would show.
const LONG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../experiments/defrag-mode/kbuild-thp.toml"
);

/// Runs `cmd`, which must fail within two seconds with one line naming `path` and `why`.
fn fails_at_once(mut cmd: Command, path: &Path, why: &str) {
    let t = Instant::now();
    let o = cmd.output().unwrap();
    let took = t.elapsed();
    let err = stderr(&o);
    assert!(!o.status.success(), "{cmd:?} should fail");
    assert!(
        took < Duration::from_secs(2),
        "{cmd:?}: failed only after {took:?}: the path was not checked before the run"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(
        err.contains(&path.display().to_string()) && err.contains(why),
        "{cmd:?}: names {} and {why:?}: {err}",
        path.display()
    );
}

/// `run -o`, `compare -o`, `compare --results-dir` and `report -o` refuse a path they could
/// not write before any simulation: a missing directory, a file where a directory should be,
/// a directory where the file should be.
#[test]
fn bad_output_paths_fail_before_the_run() {
    let d = temp_dir("paths");
    let file = d.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = d.join("no-such-dir").join("out.json");

    let mut c = fraglab();
    c.args(["run", LONG, "-o"]).arg(&missing);
    fails_at_once(c, &missing, "does not exist");

    let under_file = file.join("out.json");
    let mut c = fraglab();
    c.args(["run", LONG, "-o"]).arg(&under_file);
    fails_at_once(c, &under_file, "is not a directory");

    let mut c = fraglab();
    c.args(["run", LONG, "-o"]).arg(&d);
    fails_at_once(c, &d, "is a directory");

    let mut c = fraglab();
    c.args(["compare", LONG, "-o"]).arg(&missing);
    fails_at_once(c, &missing, "does not exist");

    let rd = file.join("results");
    let mut c = fraglab();
    c.args(["compare", LONG, "--results-dir"]).arg(&rd);
    fails_at_once(c, &file, "is not a directory");

    let mut c = fraglab();
    c.args(["report", LONG, "-o"]).arg(&missing);
    fails_at_once(c, &missing, "does not exist");

    // Nothing was left behind: no temporary file, no probe.
    let mut left: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, vec![std::ffi::OsString::from("a-file")]);
    std::fs::remove_dir_all(&d).unwrap();
}

/// `--jobs 0` is refused (zero threads would run nothing) rather than quietly taken as 1.
#[test]
fn jobs_zero_is_refused() {
    let o = fraglab().args(["compare", LONG, "--jobs", "0"]).output().unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--jobs") && stderr(&o).contains("at least 1"),
        "{}",
        stderr(&o)
    );
}

const TIMED: &str = r#"name = "tiny"
[machine]
memory = "128MiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[run]
seed = 5
[workload]
duration = "1s"
[[workload.thp_burst]]
interval = "200ms"
size = "16MiB"
hold = "100ms"
bursts = 2
"#;

/// A label holding a `/` (as every `transparent_hugepage/...` override makes in compare's
/// default labels) gives one file in `--results-dir`, its `/` replaced; the table keeps the label.
#[test]
fn results_dir_takes_labels_with_a_slash() {
    let d = temp_dir("labels");
    let spec = d.join("tiny.toml");
    std::fs::write(&spec, TIMED).unwrap();
    let s = spec.to_str().unwrap();
    let rd = d.join("results");
    let o = fraglab()
        .args(["compare", s])
        .arg(format!("{s}@transparent_hugepage/enabled=never"))
        .arg("--results-dir")
        .arg(&rd)
        .args(["--format", "csv"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut files: Vec<String> = std::fs::read_dir(&rd)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        vec![
            "tiny-run1.json".to_string(),
            "tiny@transparent_hugepage_enabled=never-run1.json".to_string()
        ]
    );
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(
        table.contains("tiny@transparent_hugepage/enabled=never"),
        "{table}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// Runs `fraglab run` on a spec of these bytes; returns (success, stderr).
fn run_bytes(name: &str, bytes: &[u8]) -> (bool, String) {
    let d = temp_dir(name);
    let spec = d.join("spec.toml");
    std::fs::write(&spec, bytes).unwrap();
    let o = fraglab().arg("run").arg(&spec).output().unwrap();
    std::fs::remove_dir_all(&d).unwrap();
    (o.status.success(), stderr(&o))
}

/// The three errors that named no line (issue 23, "Why"): bytes that are not UTF-8, a hugetlb
/// pool the machine cannot hold, a machine that manages less than one pageblock — each now
/// one line with the file, line and (where there is one) key.
#[test]
fn every_spec_error_has_a_line() {
    let (ok, err) = run_bytes(
        "utf8",
        b"name = \"x\"\n[machine]\nmemory = \"64MiB\"\n# caf\xe9\n[[op]]\nprint = \"buddyinfo\"\n",
    );
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("spec.toml:4: not UTF-8 (column 6: byte 0xE9)"),
        "{err}"
    );

    let (ok, err) = run_bytes(
        "hugetlb",
        b"[machine]\nmemory = \"64MiB\"\ndma = false\nhugetlb_pages = 1000\n[[op]]\nprint = \"buddyinfo\"\n",
    );
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("spec.toml:4: key machine.hugetlb_pages: only ") && err.contains("of 1000 pages"),
        "{err}"
    );

    // 2 MiB of memory passes the parser's bound, but ZONE_DMA's reserved pages leave less than
    // a pageblock managed.
    let (ok, err) = run_bytes(
        "tiny",
        b"[machine]\ncpus = 1\nmemory = \"2MiB\"\n[[op]]\nprint = \"buddyinfo\"\n",
    );
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("spec.toml:3: key machine.memory: ") && err.contains("smaller than one pageblock"),
        "{err}"
    );

    let (ok, err) = run_bytes(
        "zones",
        b"[machine]\ncpus = 1\n\n[[machine.zone]]\nname = \"DMA32\"\nstart_pfn = 4096\nspanned = 100\n[[op]]\nprint = \"buddyinfo\"\n",
    );
    assert!(!ok);
    assert!(
        err.contains("spec.toml:4: key machine.zone: ") && err.contains("less than one pageblock"),
        "{err}"
    );
}

/// A THP burst four times the machine: accepted with one warning line naming the file, line and
/// key, and the OOM kills it causes are in the printed rows (they were only in the JSON).
#[test]
fn thp_burst_past_memory_warns_and_shows_its_oom_kills() {
    let d = temp_dir("oom");
    let spec = d.join("spec.toml");
    std::fs::write(
        &spec,
        "[machine]\nmemory = \"64MiB\"\ndma = false\n[knobs]\n\"transparent_hugepage/enabled\" = \"madvise\"\n\
         [workload]\nduration = \"2s\"\n[[workload.thp_burst]]\ninterval = \"500ms\"\nsize = \"256MiB\"\n\
         hold = \"100ms\"\nbursts = 3\n",
    )
    .unwrap();
    let out = d.join("r.json");
    let o = fraglab()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let warn: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warn.len(), 1, "{err}");
    assert!(
        warn[0].starts_with("fraglab: warning: ")
            && warn[0].contains("spec.toml:10: key workload.thp_burst[0].size: 256 MiB is larger than the machine's memory (64 MiB)"),
        "{err}"
    );
    let r: fraglab_spec::result::RunResult =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let kills = r.vmstat_delta["oom_kill"];
    assert!(kills > 0, "the bursts are OOM-killed");
    let rows = String::from_utf8(o.stdout).unwrap();
    assert!(
        rows.lines()
            .any(|l| l.starts_with("OOM kills") && l.split_whitespace().last() == Some(&kills.to_string())),
        "{rows}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// A timeless run (`[[op]]`s) with `-o x.json` writes the result JSON (its printed text in
/// `printed`, the same text on stdout); with any other name, the text as before.
#[test]
fn timeless_run_writes_json_by_extension() {
    let d = temp_dir("timeless");
    let spec = d.join("ops.toml");
    std::fs::write(
        &spec,
        "name = \"ops\"\n[machine]\nmemory = \"64MiB\"\ndma = false\n[[op]]\nalloc = \"a\"\ncount = 10\n\
         gfp = \"GFP_KERNEL\"\n[[op]]\nprint = \"buddyinfo\"\n",
    )
    .unwrap();
    let (json, txt) = (d.join("r.json"), d.join("r.txt"));
    let o = fraglab()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8(o.stdout).unwrap();
    let r: fraglab_spec::result::RunResult =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r.engine, "sim");
    assert_eq!(r.spec_name.as_deref(), Some("ops"));
    assert_eq!(r.printed.as_deref(), Some(stdout.as_str()));
    assert!(stdout.contains("# op[1] print buddyinfo"), "{stdout}");
    let o = fraglab()
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&txt)
        .output()
        .unwrap();
    assert!(o.status.success() && o.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&txt).unwrap(), stdout);
    std::fs::remove_dir_all(&d).unwrap();
}
