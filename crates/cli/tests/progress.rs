//! Issue 23 item 4: progress bars draw only on a terminal. With standard error a pipe (CI, a
//! log file), commands that run long enough to show one (over 2 s) print nothing on it.

use std::process::Command;

fn fraglab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fraglab"))
}

/// A timed run of a few seconds of wall time (past the 2 s a bar waits before it shows).
const TIMED: &str = r#"[machine]
memory = "1GiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[workload]
duration = "15s"
[[workload.kbuild]]
jobs_parallel = 4
jobs = 120
iterations = 3
job_anon = "24MiB"
job_cpu = "100ms"
source = "2GiB"
job_read = "16MiB"
[[workload.thp_burst]]
interval = "2s"
size = "64MiB"
hold = "1s"
bursts = 30
"#;

#[test]
fn nothing_on_stderr_when_it_is_not_a_terminal() {
    let d = std::env::temp_dir().join(format!("fraglab-progress-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let spec = d.join("timed.toml");
    std::fs::write(&spec, TIMED).unwrap();
    let ops = d.join("ops.toml");
    std::fs::write(
        &ops,
        "[machine]\nmemory = \"64MiB\"\n[[op]]\nalloc = \"a\"\ncount = 1000\ngfp = \"GFP_KERNEL\"\n[[op]]\nfree = \"a\"\n",
    )
    .unwrap();
    for args in [
        vec!["run".to_string(), spec.display().to_string()],
        vec!["run".into(), ops.display().to_string()],
        vec![
            "compare".into(),
            format!("{}@workload.duration=8s", spec.display()),
            "--runs".into(),
            "2".into(),
            "--jobs".into(),
            "1".into(),
        ],
    ] {
        let t0 = std::time::Instant::now();
        let o = fraglab().args(&args).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!o.stdout.is_empty(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), "", "{args:?} wrote on a pipe");
        eprintln!("{args:?}: {:.1} s", t0.elapsed().as_secs_f64());
    }
    std::fs::remove_dir_all(&d).unwrap();
}
