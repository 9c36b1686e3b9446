//! The host engine on this machine's live kernel. Runs only where it may (Linux ≥ 6.15, root,
//! MemAvailable ≥ 4 GiB); elsewhere each test prints why it is skipped and passes. Each test
//! uses at most 640 MiB of anonymous memory and changes only vm.defrag_mode and the THP knobs,
//! which it checks are restored. The tests serialise on a lock: they share the knobs.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fraglab_host::{host_run, read_knob, restore_from_state_file, HostOptions};

static LOCK: Mutex<()> = Mutex::new(());

fn allowed() -> Result<(), String> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map_err(|_| "not Linux".to_string())?;
    let mut it = rel
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse::<u32>().ok());
    if (it.next().unwrap_or(0), it.next().unwrap_or(0)) < (6, 15) {
        return Err(format!("kernel {} older than 6.15", rel.trim()));
    }
    // SAFETY: no preconditions.
    if unsafe { libc_geteuid() } != 0 {
        return Err("not root".into());
    }
    let avail = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemAvailable:")
                .map(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap())
        })
        .unwrap()
        * 1024;
    if avail < 4 << 30 {
        return Err(format!("MemAvailable {} MiB < 4 GiB", avail >> 20));
    }
    Ok(())
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

fn spec(duration: &str, sleep: &str) -> fraglab_spec::Spec {
    let text = format!(
        r#"name = "host-test"
[machine]
memory = "4GiB"
[knobs]
"transparent_hugepage/enabled" = "madvise"
"vm.defrag_mode" = 1
[workload]
duration = "{duration}"
[[workload.thp_burst]]
interval = "500ms"
size = "64MiB"
hold = "100ms"
bursts = 3
[[workload.task]]
name = "frag"
steps = [{{ mmap = "a", size = "128MiB" }}, {{ touch = "a", pattern = "random" }}, {{ dontneed = "a", offset = "0", length = "64MiB" }}, {{ pipes = 100 }}, {{ slab = 500 }}, {{ sleep = "{sleep}" }}, {{ munmap = "a" }}]
"#
    );
    fraglab_spec::parse_spec(&text, "host-test.toml").unwrap()
}

/// Scratch directory and state file of a test's run; the child of the kill tests uses its
/// parent's pid (passed in the environment) so that the parent finds the state file.
fn opts(tag: &str) -> HostOptions {
    let pid = std::env::var("FRAGLAB_HOST_PARENT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(std::process::id());
    HostOptions {
        dir: std::env::temp_dir().join(format!("fraglab-host-test-{pid}-{tag}")),
        state_file: PathBuf::from(format!("/run/fraglab-host-test-{pid}-{tag}.restore")),
        ..Default::default()
    }
}

/// A run produces the result schema, the madvised THP bursts on this (unfragmented) machine
/// get huge pages, tracepoints are counted, and every knob is back afterwards; the scratch
/// files are gone.
#[test]
fn runs_and_restores_knobs() {
    if let Err(why) = allowed() {
        eprintln!("SKIPPED runs_and_restores_knobs: {why}");
        return;
    }
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let before = (
        read_knob("vm.defrag_mode").unwrap(),
        read_knob("transparent_hugepage/enabled").unwrap(),
    );
    let o = HostOptions {
        trace: true,
        ..opts("run")
    };
    let r = host_run(&spec("10s", "1s"), &o).unwrap();
    // Tracing: the compaction tracepoints were recorded (kcompactd sleeps every proactive
    // round), in an instance of our own that is gone afterwards.
    assert!(
        r.trace_counts.keys().any(|k| k.starts_with("mm_compaction_")),
        "{:?}",
        r.trace_counts
    );
    assert_eq!(r.engine, "host");
    assert!(r.samples.len() >= 2 && r.samples[0].blocks_by_type.iter().sum::<u64>() > 0);
    assert_eq!(r.bursts.len(), 3, "{:?}", r.bursts);
    let (huge, faults): (u64, u64) = r
        .bursts
        .iter()
        .fold((0, 0), |(h, f), b| (h + b.huge, f + b.faults));
    assert!(
        huge * 10 >= faults * 9,
        "madvised THP faults on a machine with free memory: {huge}/{faults}"
    );
    assert!(r.vmstat_delta["thp_fault_alloc"] >= huge as i64);
    assert!(!r.fault_latency.is_empty() && r.fault_latency[0].count >= 64);
    let after = (
        read_knob("vm.defrag_mode").unwrap(),
        read_knob("transparent_hugepage/enabled").unwrap(),
    );
    assert_eq!(before, after, "knobs restored");
    assert!(
        !o.dir.exists() && !o.state_file.exists(),
        "scratch directory and state file removed"
    );
}

/// The child side of the kill tests: runs a long spec when asked through the environment.
#[test]
#[ignore = "run by the kill tests as a child process"]
fn child_entry() {
    if let Ok(tag) = std::env::var("FRAGLAB_HOST_CHILD") {
        let _ = host_run(&spec("60s", "50s"), &opts(&tag));
    }
}

fn child(tag: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_entry", "--nocapture"])
        .env("FRAGLAB_HOST_CHILD", tag)
        .env("FRAGLAB_HOST_PARENT", std::process::id().to_string())
        .spawn()
        .unwrap()
}

fn wait_for_knob(value: &str) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if read_knob("vm.defrag_mode").unwrap() == value {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// SIGTERM mid-run: the run stops, kills its own workload processes and restores the knobs.
#[test]
fn sigterm_mid_run_restores_knobs() {
    if let Err(why) = allowed() {
        eprintln!("SKIPPED sigterm_mid_run_restores_knobs: {why}");
        return;
    }
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let before = read_knob("vm.defrag_mode").unwrap();
    if before != "0" {
        eprintln!("SKIPPED sigterm_mid_run_restores_knobs: vm.defrag_mode is {before}, the test needs 0");
        return;
    }
    let mut c = child("term");
    assert!(wait_for_knob("1"), "the run applied vm.defrag_mode = 1");
    std::thread::sleep(Duration::from_secs(1));
    Command::new("kill")
        .args(["-TERM", &c.id().to_string()])
        .status()
        .unwrap();
    c.wait().unwrap();
    assert_eq!(
        read_knob("vm.defrag_mode").unwrap(),
        before,
        "restored after SIGTERM"
    );
    assert!(!opts("term").state_file.exists());
}

/// SIGKILL mid-run: nothing can run in the process, so the knobs stay changed until
/// `restore_from_state_file` (`fraglab host restore`) puts them back from the state file.
#[test]
fn sigkill_leaves_a_state_file_that_restores() {
    if let Err(why) = allowed() {
        eprintln!("SKIPPED sigkill_leaves_a_state_file_that_restores: {why}");
        return;
    }
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let before = read_knob("vm.defrag_mode").unwrap();
    if before != "0" {
        eprintln!(
            "SKIPPED sigkill_leaves_a_state_file_that_restores: vm.defrag_mode is {before}, the test needs 0"
        );
        return;
    }
    let mut c = child("kill");
    assert!(wait_for_knob("1"));
    c.kill().unwrap();
    c.wait().unwrap();
    // The workload processes of the killed run die with it (PR_SET_PDEATHSIG); give them a
    // moment before the scratch directory is removed.
    std::thread::sleep(Duration::from_millis(300));
    let state = opts("kill").state_file;
    assert_eq!(
        read_knob("vm.defrag_mode").unwrap(),
        "1",
        "SIGKILL leaves the knob set"
    );
    let restored = restore_from_state_file(&state).unwrap();
    assert!(restored
        .iter()
        .any(|(n, v)| n == "vm.defrag_mode" && *v == before));
    assert_eq!(read_knob("vm.defrag_mode").unwrap(), before);
    assert!(!state.exists());
    let _ = std::fs::remove_dir_all(opts("kill").dir);
}
