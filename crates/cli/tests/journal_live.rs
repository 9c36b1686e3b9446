//! Live test of the host engine's change journal (issue 34): only with `--features live`, as
//! root. `fraglab host record` is started as a child and SIGKILLed once its tracefs instance
//! exists; `fraglab host restore` must then leave no tracefs instance of a fraglab recorder or
//! run and no mount the recorder made. It records for a few seconds with the default events
//! and no snapshot (no large memory).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn live() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not run: the live journal test needs root");
        return false;
    }
    true
}

fn tracefs_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("tracefs"))
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect()
}

/// The names under tracefs's `instances/`, through a mount of this test's own where tracefs
/// is not mounted (an instance outlives every mount; tracefs is one file system).
fn instances() -> Vec<String> {
    let list = |root: &Path| -> Vec<String> {
        std::fs::read_dir(root.join("instances"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    if let Some(m) = tracefs_mounts().first() {
        return list(Path::new(m));
    }
    let dir = std::env::temp_dir().join(format!("fraglab-journal-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tracefs", "nodev"])
        .arg(&dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount tracefs at {}", dir.display());
    let v = list(&dir);
    assert!(Command::new("umount").arg(&dir).status().unwrap().success());
    std::fs::remove_dir(&dir).unwrap();
    v
}

fn ours(name: &str) -> bool {
    name.starts_with("fraglab-host-") || name.starts_with("fraglab-record-")
}

/// The tracefs instance the state file records, once it exists.
fn wait_for_instance(state: &Path, t: Instant) -> PathBuf {
    loop {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no instance in {}",
            state.display()
        );
        if let Ok(text) = std::fs::read_to_string(state) {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let inst = v["changes"].as_array().unwrap().iter().find_map(|c| {
                (c["kind"] == "trace_instance").then(|| PathBuf::from(c["path"].as_str().unwrap()))
            });
            if let Some(i) = inst.filter(|i| i.exists()) {
                return i;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn a_sigkilled_host_record_is_cleaned_by_host_restore() {
    if !live() {
        return;
    }
    assert!(
        !instances().iter().any(|n| ours(n)),
        "a fraglab tracefs instance is already there: {:?}",
        instances()
    );
    let mounts_before = tracefs_mounts();
    let out = std::env::temp_dir().join(format!("fraglab-journal-live-{}.trace", std::process::id()));
    let bin = env!("CARGO_BIN_EXE_fraglab");
    let mut child = Command::new(bin)
        .args(["host", "record", "--duration", "60s", "--no-snapshot", "-q", "-o"])
        .arg(&out)
        .spawn()
        .unwrap();
    let state = PathBuf::from(format!("/run/fraglab-host-{}.restore", child.id()));
    let inst = wait_for_instance(&state, Instant::now());
    // SIGKILL: nothing of the recorder's own clean-up runs.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(inst.exists(), "{} gone before host restore", inst.display());
    let made_mount = tracefs_mounts().len() > mounts_before.len();
    let r = Command::new(bin)
        .args(["host", "restore"])
        .arg(&state)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(
        r.status.success(),
        "host restore: {stdout}{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(stdout.contains(&inst.display().to_string()), "{stdout}");
    assert!(!state.exists(), "state file left");
    assert_eq!(
        tracefs_mounts(),
        mounts_before,
        "a tracefs mount left (made one: {made_mount})"
    );
    let left: Vec<String> = instances().into_iter().filter(|n| ours(n)).collect();
    assert!(left.is_empty(), "instances left: {left:?}");
    // The trace file and its spool files (`PATH.partial`, `PATH.body.partial`, ...).
    let name = out.file_name().unwrap().to_string_lossy().into_owned();
    for e in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}
