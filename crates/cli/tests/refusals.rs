//! Issue 34: what the readers refuse, from the command line — traces that are no trace (a
//! device, a FIFO, an empty file, random bytes, text without events), suite.toml run counts out
//! of bounds, and a suite scenario that could score nothing. Every case exits non-zero at once
//! with a message naming the file (and the line or offset); none touches the live kernel.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fraglab-refusals-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `args`, killed after 20 s (a reader that blocks fails the test instead of hanging it).
fn run(args: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let mut child = fraglab()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("fraglab {args:?} still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), t.elapsed())
}

/// `args` fails within 5 s with a message containing every one of `wants`.
fn refused(args: &[&str], wants: &[&str]) -> String {
    let (o, took) = run(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!o.status.success(), "fraglab {args:?} succeeded: {err}");
    assert!(took < Duration::from_secs(5), "{took:?}: {err}");
    for w in wants {
        assert!(err.contains(w), "fraglab {args:?}: {w:?} not in {err}");
    }
    err
}

/// A line as the 6.18 kernel prints mm_page_alloc.
fn alloc_line(i: u32) -> String {
    format!(
        "              dd-1234    [001] ..... 100.{i:06}: mm_page_alloc: page=00000000a1b2c3d4 pfn=0x{:x} order=0 migratetype=1 gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_COMP",
        0x1000 + i
    )
}

const MACHINE: &str = "[machine]\nmemory = \"64MiB\"\ncpus = 2\n";

#[test]
fn traces_that_are_no_trace_are_refused_by_trace_info_and_replay() {
    let d = temp_dir("traces");
    let spec = d.join("m.toml");
    std::fs::write(&spec, MACHINE).unwrap();
    let empty = d.join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    let random = d.join("random.bin");
    // Deterministic "random" bytes (an LCG): NULs among them.
    let mut x: u32 = 12345;
    let bytes: Vec<u8> = (0..100_000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect();
    std::fs::write(&random, &bytes).unwrap();
    let text = d.join("words.txt");
    std::fs::write(&text, "hello\nworld\n").unwrap();
    let fifo = d.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let cases: [(&Path, &[&str]); 5] = [
        (
            Path::new("/dev/zero"),
            &["/dev/zero", "a character device, not a regular file"],
        ),
        (&fifo, &["fifo", "a FIFO (named pipe), not a regular file"]),
        (&empty, &["empty.txt", "an empty file"]),
        (&random, &["random.bin", "byte offset", "NUL byte"]),
        (&text, &["words.txt", "2 lines"]),
    ];
    for (p, wants) in cases {
        let p = p.to_str().unwrap();
        refused(&["trace", "info", p], wants);
        refused(&["trace", "info", "--json", p], wants);
        refused(&["replay", p, "--config", spec.to_str().unwrap()], wants);
    }
    // Event-less text: trace info says it has no event, replay that nothing is replayable.
    refused(&["trace", "info", text.to_str().unwrap()], &["no trace event"]);
    refused(
        &[
            "replay",
            text.to_str().unwrap(),
            "--config",
            spec.to_str().unwrap(),
        ],
        &["no event the replay reads", "2 lines (2 not trace events"],
    );
    // An over-long line: its line number and byte offset.
    let long = d.join("long.txt");
    let first = alloc_line(0);
    let mut b = format!("{first}\n").into_bytes();
    b.extend(std::iter::repeat_n(b'x', 1 << 20));
    std::fs::write(&long, &b).unwrap();
    let at = format!("byte offset {}", first.len() + 1);
    refused(
        &["trace", "info", long.to_str().unwrap()],
        &["long.txt", &at, "line 2 is longer than 64 KiB"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn malformed_event_lines_are_counted_and_the_first_named() {
    let d = temp_dir("malformed");
    let p = d.join("t.txt");
    let bad = "      kcompactd0-36      [001] ..... 100.500000: mm_compaction_migratepages: nr_migrated=x nr_failed=0";
    let text = format!("{}\n{bad}\n{}\n{bad}\n", alloc_line(1), alloc_line(2));
    std::fs::write(&p, &text).unwrap();
    let o = fraglab()
        .args(["trace", "info", "--json"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["events"], 4);
    assert_eq!(v["malformed_lines"], 2, "{v}");
    let off = alloc_line(1).len() + 1;
    let first = v["first_malformed"].as_str().unwrap();
    assert!(
        first.starts_with(&format!("line 2 (byte offset {off}): ")),
        "{first}"
    );
    let o = fraglab().args(["trace", "info"]).arg(&p).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("malformed      2 lines"), "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn suite_runs_out_of_bounds_are_refused_before_anything_runs() {
    let d = temp_dir("runs");
    std::fs::write(d.join("m.toml"), MACHINE).unwrap();
    let dir = d.to_str().unwrap();
    for (runs, want) in [("4000000000", "at most 10000 runs"), ("0", "at least 1 run")] {
        std::fs::write(
            d.join("suite.toml"),
            format!("[[scenario]]\nname = \"m\"\nspec = \"m.toml\"\nruns = {runs}\n"),
        )
        .unwrap();
        let suite = d.join("suite.toml");
        let at = format!("{}:4: scenario \"m\": runs = {runs}", suite.display());
        refused(&["validate", "--suite", dir, "--sim-only"], &[&at, want]);
    }
    std::fs::remove_file(d.join("suite.toml")).unwrap();
    refused(
        &["validate", "--suite", dir, "--runs", "0"],
        &["--runs = 0: at least 1 run"],
    );
    refused(
        &["validate", "--suite", dir, "--runs", "4000000000"],
        &["at most 10000 runs"],
    );
    refused(
        &["validate", "--suite", dir, "--idle=-1"],
        &["--idle -1: seconds from 0"],
    );
    refused(
        &["validate", "--suite", dir, "--quiet-wait=nan"],
        &["--quiet-wait NaN: seconds from 0"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A scenario whose kernel arm has nothing (here: recorded results that match no file, standing
/// in for a host engine refusal, whose decision `validate::unscored` unit-tests) scores nothing:
/// the suite prints its table, then exits non-zero naming the scenario and why.
#[test]
fn a_scenario_that_scores_nothing_fails_the_suite() {
    let d = temp_dir("unscored");
    let spec = "name = \"tiny\"\n[machine]\nmemory = \"256MiB\"\ncpus = 2\n[workload]\nduration = \"200ms\"\n[[workload.task]]\nname = \"t\"\nsteps = [{ mmap = \"a\", size = \"8MiB\" }, { touch = \"a\" }]\n";
    std::fs::write(d.join("tiny.toml"), spec).unwrap();
    std::fs::write(
        d.join("suite.toml"),
        "[[scenario]]\nname = \"tiny\"\nspec = \"tiny.toml\"\nkernel = \"rec/none-*.json\"\n",
    )
    .unwrap();
    let (o, _) = run(&[
        "validate",
        "--suite",
        d.to_str().unwrap(),
        "--only",
        "tiny",
        "--runs",
        "1",
        "--no-write",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("1 of 1 scenarios scored nothing against the kernel")
            && err.contains("tiny: no file matches rec/none-*.json"),
        "{err}"
    );
    // The same suite with --sim-only asks for no kernel: it succeeds.
    let (o, _) = run(&[
        "validate",
        "--suite",
        d.to_str().unwrap(),
        "--sim-only",
        "--runs",
        "1",
        "--no-write",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&d);
}

/// The result JSON readers (`report`, `compare --from`) refuse a device and a FIFO before
/// opening them, and read nothing past their bound.
#[test]
fn result_readers_refuse_devices_and_fifos() {
    let d = temp_dir("results");
    let html = d.join("r.html");
    let html = html.to_str().unwrap();
    refused(
        &["report", "/dev/zero", "-o", html],
        &["/dev/zero", "a character device, not a regular file"],
    );
    let fifo = d.join("a-run1.json");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    refused(
        &["report", fifo.to_str().unwrap(), "-o", html],
        &["a-run1.json", "a FIFO (named pipe)"],
    );
    refused(
        &[
            "report",
            "--compare",
            "/dev/zero",
            fifo.to_str().unwrap(),
            "-o",
            html,
        ],
        &["a FIFO (named pipe)"],
    );
    refused(
        &["compare", "--from", d.to_str().unwrap()],
        &["a-run1.json", "a FIFO (named pipe), not a regular file"],
    );
    assert!(!Path::new(html).exists());
    let _ = std::fs::remove_dir_all(&d);
}
