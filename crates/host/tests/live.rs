//! Live tests of the host engine on this machine's kernel: opt-in, with `cargo test -p
//! fraglab-host --features live` (or `tools/full-tests.sh`, which adds it as root). Without the
//! feature cargo lists each as ignored. With it, each needs what the engine needs (root,
//! Linux >= 6.15, MemAvailable >= 6 GiB, no other host run) and fails, saying which is
//! missing, where the machine does not have it. Each keeps its anonymous memory at or under 1 GiB.
//!
//! The knobs these tests change are low-impact ones (writeback and khugepaged periods, moved by
//! one unit) so that other measurements on the machine are not disturbed; THP enabled/defrag
//! are set to "madvise", the machine's default.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use fraglab_host::{
    host_run, knob_path, preflight, restore_from_state_file, snapshot, HostError, HostOptions,
};

/// Tests that change knobs run one at a time (two runs would restore each other's values).
static LOCK: Mutex<()> = Mutex::new(());

const GIB: u64 = 1 << 30;

fn skip_reason() -> Option<String> {
    if !cfg!(target_os = "linux") {
        return Some("not Linux".into());
    }
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit());
    let v: (u32, u32) = (
        it.next().and_then(|x| x.parse().ok()).unwrap_or(0),
        it.next().and_then(|x| x.parse().ok()).unwrap_or(0),
    );
    if v < (6, 15) {
        return Some(format!("kernel {} older than 6.15", rel.trim()));
    }
    let avail = fraglab_host::procfs::mem_available().unwrap_or(0);
    if avail < 6 * GIB {
        return Some(format!("MemAvailable {} MiB < 6 GiB", avail >> 20));
    }
    None
}

/// Takes the lock of the knob-changing tests; fails the test where the machine cannot run the
/// engine (the live tests are opt-in: whoever runs them says the machine can).
fn live() -> MutexGuard<'static, ()> {
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason() {
        panic!("the live tests need root, Linux >= 6.15 and MemAvailable >= 6 GiB: {why}");
    }
    guard
}

fn knob(name: &str) -> String {
    fraglab_host::knobs::read_knob(&knob_path(name)).unwrap()
}

/// Two low-impact knobs and the values one unit away from their current ones.
fn test_knobs() -> Vec<(&'static str, String, String)> {
    [
        "vm.dirty_writeback_centisecs",
        "transparent_hugepage/khugepaged/alloc_sleep_millisecs",
    ]
    .into_iter()
    .map(|n| {
        let cur = knob(n);
        let new = (cur.parse::<i64>().unwrap() + 1).to_string();
        (n, cur, new)
    })
    .collect()
}

fn knobs_toml(k: &[(&str, String, String)]) -> String {
    k.iter().map(|(n, _, new)| format!("\"{n}\" = {new}\n")).collect()
}

fn spec(text: &str) -> fraglab_spec::Spec {
    fraglab_spec::parse_spec(text, "live.toml").unwrap()
}

fn state_path(tag: &str) -> PathBuf {
    PathBuf::from(format!(
        "/run/fraglab-host-test-{}-{tag}.restore",
        std::process::id()
    ))
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn fragmenting_thp_run_produces_a_result_and_restores_knobs() {
    let _g = live();
    let k = test_knobs();
    let s = fragmenting_thp_spec(&k);
    let opts = HostOptions {
        state_file: Some(state_path("normal")),
        ..Default::default()
    };
    let plan = preflight(&s, &opts).unwrap();
    let shown = plan.to_string();
    for (n, cur, new) in &k {
        assert!(
            shown.contains(&format!("{cur} -> {new}")),
            "{n} missing from the plan:\n{shown}"
        );
    }
    assert_eq!(plan.processes, 3);
    assert_eq!(plan.planned_anon_bytes, (128 + 128 + 32) << 20);

    eprintln!("{plan}");
    let t = Instant::now();
    let r = host_run(&s, &opts).unwrap();
    eprintln!("run took {:?}", t.elapsed());

    // Knobs: applied during the run (recorded in proc_start), restored after.
    for (n, cur, new) in &k {
        assert!(
            r.proc_start["knobs"].contains(&format!("{n} = {new}\n")),
            "{n} not applied: {}",
            r.proc_start["knobs"]
        );
        assert_eq!(&knob(n), cur, "{n} not restored");
    }
    assert!(
        !state_path("normal").exists(),
        "state file left after a clean run"
    );

    print_fragmenting_thp_result(&r);
    check_result_and_samples(&r);
    check_faults_and_bursts(&r);
    check_proc_files_and_cleanup(&r);
}

/// The fragmenting run: a task that touches 128 MiB at random and punches holes in it between
/// pipes, slab, a write and a read; a task faulting 128 MiB of madvised THPs; and three bursts.
fn fragmenting_thp_spec(k: &[(&str, String, String)]) -> fraglab_spec::Spec {
    spec(&format!(
        r#"
name = "live-frag-thp"
[machine]
memory = "1GiB"
[knobs]
"transparent_hugepage/enabled" = "madvise"
"transparent_hugepage/defrag" = "madvise"
{}
[workload]
duration = "30s"
[[workload.task]]
name = "fragmenter"
steps = [
  {{ mmap = "a", size = "128MiB" }},
  {{ touch = "a", pattern = "random" }},
  {{ dontneed = "a", offset = "0", length = "16MiB" }},
  {{ dontneed = "a", offset = "64MiB", length = "16MiB" }},
  {{ pipes = 512 }},
  {{ slab = 300 }},
  {{ write = "log", length = "8MiB", chunk = "256KiB" }},
  {{ read = "data", length = "8MiB", file_size = "16MiB" }},
  {{ sleep = "1500ms" }},
]
[[workload.task]]
name = "thp"
start = "500ms"
steps = [
  {{ mmap = "h", size = "128MiB", madvise = true }},
  {{ touch = "h" }},
  {{ compute = "100ms" }},
]
[[workload.thp_burst]]
interval = "400ms"
size = "32MiB"
hold = "200ms"
bursts = 3
start = "200ms"
"#,
        knobs_toml(k)
    ))
}

/// What the fragmenting run measured (shown with --nocapture).
fn print_fragmenting_thp_result(r: &fraglab_spec::result::RunResult) {
    let huge_h = r.fault_latency.iter().find(|h| h.order == 9);
    let base_h = r.fault_latency.iter().find(|h| h.order == 0);
    let mean = |h: Option<&fraglab_spec::result::LatencyHistogram>| {
        h.map_or(0.0, |h| h.sum_ns as f64 / h.count.max(1) as f64 / 1000.0)
    };
    eprintln!(
        "samples {}, thp_fault_alloc +{}, thp_fault_fallback +{}, order-9 faults {} mean {:.1} us, \
         order-0 faults {} mean {:.2} us, bursts {:?}, host {:?} -> {:?}",
        r.samples.len(),
        r.vmstat_delta["thp_fault_alloc"],
        r.vmstat_delta["thp_fault_fallback"],
        huge_h.map_or(0, |h| h.count),
        mean(huge_h),
        base_h.map_or(0, |h| h.count),
        mean(base_h),
        r.bursts
            .iter()
            .map(|b| (b.huge, b.alloc_ns / 1000))
            .collect::<Vec<_>>(),
        r.proc_start["host"],
        r.proc_end["host"],
    );
}

/// The result's identity and its samples: ordered, monotonic, every zone's free lists.
fn check_result_and_samples(r: &fraglab_spec::result::RunResult) {
    assert_eq!(r.engine, "host");
    assert_eq!(r.spec_name.as_deref(), Some("live-frag-thp"));
    assert!(
        r.duration_ns >= 1_500_000_000,
        "ended too early: {} ns",
        r.duration_ns
    );
    assert!(r.samples.len() >= 3, "{} samples", r.samples.len());
    for w in r.samples.windows(2) {
        assert!(w[0].t_ns < w[1].t_ns);
        assert!(w[0].thp_fault_alloc <= w[1].thp_fault_alloc);
    }
    for smp in &r.samples {
        assert_eq!(smp.free_by_order.len(), 11);
        assert_eq!(smp.free_by_type.len(), 5);
        // Per-type and per-order free counts come from two files read a moment apart.
        let (a, b) = (
            smp.free_by_order.iter().sum::<u64>(),
            smp.free_by_type.iter().sum::<u64>(),
        );
        assert!(a.abs_diff(b) < a / 20 + 4096, "buddyinfo {a} vs pagetypeinfo {b}");
        assert!(
            smp.blocks_by_type[1] > 1000,
            "movable blocks {:?}",
            smp.blocks_by_type
        );
    }
}

/// THP: the madvised task and the bursts fault 2 MiB folios on an unfragmented machine.
fn check_faults_and_bursts(r: &fraglab_spec::result::RunResult) {
    let thp = r.vmstat_delta["thp_fault_alloc"];
    assert!(thp >= 32, "thp_fault_alloc delta {thp}");
    let last = r.samples.last().unwrap();
    assert!(last.thp_fault_alloc >= r.samples[0].thp_fault_alloc + 32);
    let huge = r
        .fault_latency
        .iter()
        .find(|h| h.order == 9)
        .expect("order-9 histogram");
    assert_eq!(huge.path, "host");
    assert!(huge.count >= 32, "order-9 faults {}", huge.count);
    assert!(
        huge.min_ns > 10_000,
        "a 2 MiB fault zeroes 2 MiB: min {} ns",
        huge.min_ns
    );
    let base = r
        .fault_latency
        .iter()
        .find(|h| h.order == 0)
        .expect("order-0 histogram");
    // The fragmenter's 128 MiB without MADV_HUGEPAGE (THP = madvise): 32768 base faults.
    assert!(base.count >= 32768, "order-0 faults {}", base.count);
    assert_eq!(base.log2_buckets.iter().sum::<u64>(), base.count);
    assert_eq!(r.bursts.len(), 3);
    for b in &r.bursts {
        assert_eq!(b.faults, 16);
        assert!(b.huge >= 1 && b.huge <= 16);
        assert!(b.alloc_ns > 0);
    }
    assert!(r.bursts[1].start_ns >= r.bursts[0].start_ns + 350_000_000);
}

/// The /proc snapshots at both ends, the run's directory gone, and the JSON round trip.
fn check_proc_files_and_cleanup(r: &fraglab_spec::result::RunResult) {
    for key in ["buddyinfo", "pagetypeinfo", "zoneinfo", "vmstat", "knobs", "host"] {
        assert!(
            r.proc_start.contains_key(key) && r.proc_end.contains_key(key),
            "{key}"
        );
    }
    assert!(r.proc_end["buddyinfo"].contains("zone   Normal"));
    // The run's directory is gone.
    let left: Vec<_> = std::fs::read_dir("/var/tmp")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("fraglab-host-{}-", std::process::id()))
        })
        .collect();
    assert!(left.is_empty(), "run directory left: {left:?}");
    let json = serde_json::to_string(r).unwrap();
    let back: fraglab_spec::result::RunResult = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, r);
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn thpchallenge_counts_every_step() {
    let _g = live();
    let s = spec(
        r#"
[machine]
memory = "1GiB"
[workload]
duration = "20s"
[[workload.thpchallenge]]
threads = 2
size = "64MiB"
madvised = true
hold = "100ms"
"#,
    );
    let r = host_run(&s, &HostOptions::default()).unwrap();
    let t = r.thpchallenge.expect("thpchallenge result");
    // 2 threads x 32 steps of 2 MiB, each either huge or base.
    assert_eq!(t.huge.count + t.base.count, 64);
    assert_eq!(t.huge.order, 9);
    assert!(t.huge.count > 0, "no huge step on an unfragmented machine");
    let pct = t.huge.count as f64 * 100.0 / 64.0;
    assert!((t.huge_pct - pct).abs() < 1e-9);
    assert!(r.vmstat_delta["thp_fault_alloc"] >= t.huge.count as i64);
}

/// Issue 19 item 5: a host run records the confounders at its start and end (free page
/// reporting, DAMON, THP settings, read_ahead_kb, swap, load, CPU steal) as the files read;
/// a snapshot records them too.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn host_results_record_the_confounders() {
    let _g = live();
    let s = spec(
        r#"
[machine]
memory = "1GiB"
[workload]
duration = "3s"
[[workload.task]]
steps = [{ mmap = "a", size = "64MiB" }, { touch = "a" }, { sleep = "2s" }]
"#,
    );
    let r = host_run(&s, &HostOptions::default()).unwrap();
    let c = r
        .confounders
        .as_ref()
        .expect("host results carry the confounders");
    print!("{}", c.summary());
    for reading in [&c.start, &c.end] {
        assert_eq!(
            reading.thp.get("enabled").map(String::as_str),
            Some(knob("transparent_hugepage/enabled").as_str())
        );
        assert!(reading.loadavg.is_some());
        assert!(reading.cpu_ticks.is_some());
        assert!(reading.swap.is_some());
        for (dev, kb) in &reading.read_ahead_kb {
            let f = format!("/sys/block/{dev}/queue/read_ahead_kb");
            assert_eq!(std::fs::read_to_string(f).unwrap().trim(), kb.to_string());
        }
    }
    assert!(c.end.cpu_ticks.unwrap().total > c.start.cpu_ticks.unwrap().total);
    let steal = c.steal_share.expect("ticks passed during the run");
    assert!((0.0..=1.0).contains(&steal));
    let reporting = Path::new("/sys/module/page_reporting/parameters/reported_kib").exists();
    assert_eq!(c.end.page_reporting.is_some(), reporting);
    assert_eq!(c.reported_kib_delta.is_some(), reporting);
    let damon = Path::new("/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds");
    if let Ok(n) = std::fs::read_to_string(damon) {
        let d = c.end.damon.as_ref().expect("DAMON's sysfs tree is there");
        assert_eq!(d.nr_kdamonds.to_string(), n.trim());
        assert_eq!(d.kdamonds.len(), d.nr_kdamonds as usize);
    }
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"confounders\""));
    let snap = snapshot().unwrap();
    let sc = snap.confounders.expect("snapshots carry the confounders");
    assert_eq!(sc.start, sc.end);
    assert!(sc.start.loadavg.is_some());
}

/// fio small-file background on the host: its jobs create files in the run's directory while
/// thpchallenge runs, are stopped when thpchallenge is done (the run does not wait for the
/// deadline), and the files go with the run's directory.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn fio_background_runs_beside_thpchallenge_and_stops_with_it() {
    let _g = live();
    let s = spec(
        r#"
[machine]
memory = "64MiB"
[workload]
duration = "30s"
[[workload.fio_smallfiles]]
jobs = 2
file_size = "16KiB"
[[workload.thpchallenge]]
threads = 1
size = "32MiB"
madvised = true
start = "1s"
hold = "100ms"
"#,
    );
    let parent = std::env::temp_dir().join(format!("fraglab-fio-live-{}", std::process::id()));
    std::fs::create_dir_all(&parent).unwrap();
    let opts = HostOptions {
        workdir: Some(parent.clone()),
        ..Default::default()
    };
    let plan = preflight(&s, &opts).unwrap();
    // 1.5 x 64 MiB of 16 KiB files over 2 jobs.
    assert_eq!(plan.fio, vec![(2, 16384, 3072)]);
    let t0 = Instant::now();
    let r = host_run(&s, &opts).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the run ended with thpchallenge"
    );
    let t = r.thpchallenge.as_ref().expect("thpchallenge result");
    assert_eq!(t.huge.count + t.base.count, 16, "32 MiB in 2 MiB steps");
    let host = &r.proc_end["host"];
    assert!(host.contains("background_jobs_stopped 2"), "{host}");
    // The files were written: 4 dirtied pages each, thousands of files a second here.
    let dirtied = r.vmstat_delta["nr_dirtied"];
    assert!(dirtied >= 1000, "nr_dirtied {dirtied}");
    assert_eq!(
        std::fs::read_dir(&parent).unwrap().count(),
        0,
        "run directory removed"
    );
    std::fs::remove_dir(&parent).unwrap();
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn journal_restores_knobs_while_unwinding() {
    let _g = live();
    let k = test_knobs();
    let state = state_path("panic");
    let r = std::panic::catch_unwind(|| {
        let mut journal = fraglab_host::Journal::new(fraglab_host::Machine::live(), state.clone());
        for (n, _, v) in &k {
            let c = fraglab_host::Change::knob(journal.machine(), n, v).unwrap();
            journal.apply(c).unwrap();
        }
        for (n, _, v) in &k {
            assert_eq!(&knob(n), v, "{n} not applied");
        }
        assert!(state.exists());
        panic!("in the middle of a run");
    });
    assert!(r.is_err());
    for (n, cur, _) in &k {
        assert_eq!(&knob(n), cur, "{n} not restored after a panic");
    }
    assert!(!state.exists());
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn unsafe_specs_are_refused() {
    let _g = live();
    let s = spec(
        r#"
[machine]
memory = "1GiB"
[workload]
duration = "1s"
[[workload.task]]
count = 4
steps = [{ mmap = "a", size = "3GiB" }, { touch = "a" }]
"#,
    );
    let e = preflight(&s, &HostOptions::default()).unwrap_err();
    assert!(matches!(e, HostError::Unsafe(_)), "{e}");
    assert_eq!(e.exit_code(), 15);
    // Under the cap, but the floor is set above what is available.
    let avail = fraglab_host::procfs::mem_available().unwrap();
    let opts = HostOptions {
        anon_cap_bytes: 100 * GIB,
        mem_floor_bytes: avail,
        ..Default::default()
    };
    assert!(matches!(preflight(&s, &opts), Err(HostError::Unsafe(_))));
    let kb = spec(
        r#"
[machine]
memory = "1GiB"
[workload]
duration = "1s"
[[workload.kbuild]]
jobs = 4
"#,
    );
    let e = preflight(&kb, &HostOptions::default()).unwrap_err();
    assert!(matches!(e, HostError::Unsupported(_)), "{e}");
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn memory_floor_stops_the_run_and_restores() {
    let _g = live();
    let k = test_knobs();
    let s = spec(&format!(
        r#"
[machine]
memory = "1GiB"
[knobs]
{}[workload]
duration = "20s"
[[workload.task]]
steps = [{{ mmap = "a", size = "16MiB" }}, {{ touch = "a" }}, {{ sleep = "15s" }}]
"#,
        knobs_toml(&k)
    ));
    let avail = fraglab_host::procfs::mem_available().unwrap();
    let opts = HostOptions {
        mem_floor_bytes: avail - (256 << 20),
        state_file: Some(state_path("floor")),
        ..Default::default()
    };
    // Someone else (this thread) takes 900 MiB during the run.
    let eater = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(700));
        let mut v = vec![0u8; 900 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::thread::sleep(Duration::from_secs(3));
        std::hint::black_box(&v);
    });
    let t = Instant::now();
    let e = host_run(&s, &opts).unwrap_err();
    eater.join().unwrap();
    assert!(matches!(e, HostError::MemoryFloor { .. }), "{e}");
    assert_eq!(e.exit_code(), 19);
    assert!(t.elapsed() < Duration::from_secs(10), "the run was not stopped");
    for (n, cur, _) in &k {
        assert_eq!(&knob(n), cur, "{n} not restored");
    }
    assert!(!state_path("floor").exists());
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn tracing_counts_events_and_cleans_up() {
    let _g = live();
    let mounts = |fs: &str| -> Vec<String> {
        std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .lines()
            .filter(|l| l.split_whitespace().nth(2) == Some(fs))
            .map(String::from)
            .collect()
    };
    let before = mounts("tracefs");
    let s = spec(
        r#"
[machine]
memory = "1GiB"
[run]
trace = ["kmem:mm_page_alloc", "compaction:*"]
[workload]
duration = "5s"
[[workload.task]]
steps = [{ mmap = "a", size = "16MiB" }, { touch = "a" }]
"#,
    );
    let opts = HostOptions {
        trace: true,
        ..Default::default()
    };
    let r = host_run(&s, &opts).unwrap();
    let counts = &r.proc_end["trace_counts"];
    let allocs: u64 = counts
        .lines()
        .find_map(|l| l.strip_prefix("mm_page_alloc "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(allocs >= 4096, "mm_page_alloc events {allocs}: {counts}");
    assert!(r.proc_end["trace"].contains("mm_page_alloc:"));
    assert_eq!(mounts("tracefs"), before, "tracefs mounts changed");
    if let Some(root) = fraglab_host::trace::tracefs_mount() {
        let inst = root
            .join("instances")
            .join(format!("fraglab-host-{}", std::process::id()));
        assert!(!inst.exists(), "instance {} left", inst.display());
    }
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn snapshot_has_proc_files_and_knobs() {
    let _g = live();
    let r = snapshot().unwrap();
    assert_eq!(r.engine, "host");
    assert_eq!(r.samples.len(), 1);
    assert!(r.samples[0].free_by_order.iter().sum::<u64>() > 0);
    let k = &r.proc_start["knobs"];
    assert!(k.contains(&format!(
        "transparent_hugepage/enabled = {}\n",
        knob("transparent_hugepage/enabled")
    )));
    assert!(k.contains(&format!("vm.swappiness = {}\n", knob("vm.swappiness"))));
    assert!(r.proc_start["pagetypeinfo"].starts_with("Page block order: 9"));
}

// ---- A run killed from outside: the knob test re-executes this test binary as the run. ----

const CHILD_ENV: &str = "FRAGLAB_HOST_TEST_CHILD";

/// Not a test of its own: the body of the child process of the kill tests, which run it with
/// `--ignored` (it fails when CHILD_ENV is not set). It runs a spec that sets the knobs given in
/// the environment and sleeps, and is to be stopped by a signal: a run that ends by itself or
/// fails otherwise fails the test (exit code 101, which the kill tests reject); a run
/// interrupted by SIGTERM exits with the engine's exit code (128 + SIGTERM).
#[test]
#[ignore = "the child process of the kill tests, which run it"]
fn child_helper() {
    let state = std::env::var(CHILD_ENV)
        .expect("child_helper is the run of the kill tests (knobs_restored_when_the_run_gets_sigterm, state_file_restores_after_sigkill): run those");
    let knobs = std::env::var("FRAGLAB_HOST_TEST_KNOBS").unwrap();
    let extra = std::env::var("FRAGLAB_HOST_TEST_EXTRA").unwrap_or_default();
    let first = std::env::var("FRAGLAB_HOST_TEST_FIRST_STEPS").unwrap_or_default();
    // --fit-memory to this many KiB (the offlining kill tests).
    let fit = std::env::var("FRAGLAB_HOST_TEST_FIT_KIB").ok();
    let memory = fit.as_ref().map_or("1GiB".to_string(), |k| format!("{k}KiB"));
    let s = spec(&format!(
        r#"
[machine]
memory = "{memory}"
[knobs]
{knobs}{extra}[workload]
duration = "60s"
[[workload.task]]
count = 2
steps = [{first}{{ mmap = "a", size = "32MiB" }}, {{ touch = "a" }}, {{ sleep = "50s" }}]
"#
    ));
    let opts = HostOptions {
        state_file: Some(PathBuf::from(state)),
        fit_memory: fit.is_some(),
        ..Default::default()
    };
    match host_run(&s, &opts) {
        Ok(r) => panic!(
            "child: the run ended by itself after {} ns; the kill tests stop it",
            r.duration_ns
        ),
        Err(e) => {
            assert!(
                matches!(e, HostError::Interrupted(_)),
                "child: the run failed instead of being interrupted: {e}"
            );
            eprintln!("child: {e}");
            std::process::exit(e.exit_code())
        }
    }
}

/// Pids of processes whose environment has `CHILD_ENV=<state>` (the run and its workers).
fn processes_with(state: &Path) -> Vec<u32> {
    let needle = format!("{CHILD_ENV}={}", state.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Starts the child run and waits until its knobs are applied and its workers run.
fn start_child(tag: &str, k: &[(&str, String, String)]) -> (std::process::Child, PathBuf) {
    start_child_with(tag, k, "")
}

/// [`start_child`] with more tables in the child's spec (`extra`, TOML after `[knobs]`).
fn start_child_with(tag: &str, k: &[(&str, String, String)], extra: &str) -> (std::process::Child, PathBuf) {
    start_child_steps(tag, k, extra, "")
}

/// [`start_child_with`] with steps (`first`, TOML inline tables each followed by ", ") before
/// the child's tasks' own.
fn start_child_steps(
    tag: &str,
    k: &[(&str, String, String)],
    extra: &str,
    first: &str,
) -> (std::process::Child, PathBuf) {
    start_child_fit(tag, k, extra, first, None)
}

/// [`start_child_steps`], the child run with `--fit-memory` to `fit_kib` KiB when given.
fn start_child_fit(
    tag: &str,
    k: &[(&str, String, String)],
    extra: &str,
    first: &str,
    fit_kib: Option<u64>,
) -> (std::process::Child, PathBuf) {
    let state = state_path(tag);
    let _ = std::fs::remove_file(&state);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    if let Some(f) = fit_kib {
        cmd.env("FRAGLAB_HOST_TEST_FIT_KIB", f.to_string());
    }
    let child = cmd
        .args([
            "--exact",
            "child_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &state)
        .env("FRAGLAB_HOST_TEST_KNOBS", knobs_toml(k))
        .env("FRAGLAB_HOST_TEST_EXTRA", extra)
        .env("FRAGLAB_HOST_TEST_FIRST_STEPS", first)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        let applied = k.iter().all(|(n, _, new)| &knob(n) == new);
        // The run process and its two workers.
        if state.exists() && applied && processes_with(&state).len() >= 3 {
            break;
        }
        // Offlining tries every candidate block when most refuse (about 40 s on this VM).
        let limit = if fit_kib.is_some() { 300 } else { 60 };
        assert!(
            t.elapsed() < Duration::from_secs(limit),
            "child run did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    (child, state)
}

fn wait_gone(state: &Path) {
    let t = Instant::now();
    while !processes_with(state).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "workload processes left: {:?}",
            processes_with(state)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn knobs_restored_when_the_run_gets_sigterm() {
    let _g = live();
    let k = test_knobs();
    let (mut child, state) = start_child("term", &k);
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(128 + libc::SIGTERM), "exit status {st:?}");
    for (n, cur, _) in &k {
        assert_eq!(&knob(n), cur, "{n} not restored after SIGTERM");
    }
    assert!(!state.exists(), "state file left after a clean restore");
    wait_gone(&state);
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn state_file_restores_after_sigkill() {
    let _g = live();
    let k = test_knobs();
    let (mut child, state) = start_child("kill", &k);
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let st = child.wait().unwrap();
    assert_eq!(st.code(), None, "killed by a signal");
    // Nothing could restore: the knobs keep the run's values and the state file is there.
    let changed: Vec<bool> = k.iter().map(|(n, _, new)| &knob(n) == new).collect();
    let kept = state.exists();
    let saved: fraglab_host::StateFile =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap_or_default()).unwrap();
    let workdir = saved
        .cleanup
        .workdir
        .clone()
        .expect("the run's directory is in the state file");
    let workdir_was_left = workdir.is_dir();
    // Restore before asserting, so that a failed assertion does not leave knobs changed.
    let restored = restore_from_state_file(&state);
    for (n, cur, _) in &k {
        assert_eq!(&knob(n), cur, "{n} not restored from the state file");
    }
    assert!(
        changed.iter().all(|c| *c),
        "knobs were restored without the state file?"
    );
    assert!(kept, "no state file after SIGKILL");
    let restored = restored.unwrap();
    assert_eq!(restored.len(), k.len());
    assert!(!state.exists(), "state file not removed after restore");
    assert!(
        workdir_was_left,
        "{} was not left by the killed run",
        workdir.display()
    );
    assert!(
        !workdir.exists(),
        "{} not removed by the restore",
        workdir.display()
    );
    // The workers die with the run (PR_SET_PDEATHSIG).
    wait_gone(&state);
    // A second restore has nothing to read.
    assert!(matches!(
        restore_from_state_file(&state),
        Err(HostError::Io { .. })
    ));
}

/// `--fit-memory` with the hugetlb pool (the fallback of offlining, forced here by
/// `fit_by_hugetlb`): the run holds MemTotal minus the spec's memory in a hugetlb pool (here
/// 1 GiB: a target 1 GiB under MemTotal) and gives it back at the end; a state file with the
/// pool in its cleanup puts the pool back after a killed run; a target above the machine is
/// refused.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn fit_memory_holds_a_hugetlb_pool_for_the_run_and_gives_it_back() {
    let _g = live();
    assert_eq!(
        fraglab_host::hugetlb::current_pages().unwrap(),
        0,
        "this test needs a machine without a hugetlb pool"
    );
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total = fraglab_host::procfs::meminfo_bytes(&meminfo, "MemTotal").unwrap();
    let target_kib = (total - GIB) >> 10;
    let s = spec(&format!(
        r#"
[machine]
memory = "{target_kib}KiB"
[workload]
duration = "10s"
[[workload.thpchallenge]]
threads = 1
size = "32MiB"
madvised = true
"#
    ));
    let opts = HostOptions {
        fit_memory: true,
        fit_by_hugetlb: true,
        ..Default::default()
    };
    let plan = preflight(&s, &opts).unwrap();
    let fit = plan.fit.clone().expect("a planned pool");
    assert!(plan.offline.is_none());
    assert_eq!(fit.pages, (total - (target_kib << 10)) / fit.page_bytes);
    assert!(plan.to_string().contains("hugetlb pages"), "{plan}");
    let r = host_run(&s, &opts).unwrap();
    let host = &r.proc_start["host"];
    let held: u64 = host
        .lines()
        .find_map(|l| l.strip_prefix("fit_memory_hugetlb_pages "))
        .unwrap_or_else(|| panic!("no pool in {host}"))
        .parse()
        .unwrap();
    assert!(held * 100 >= fit.pages * 99, "{held} of {}", fit.pages);
    assert_eq!(
        fraglab_host::hugetlb::current_pages().unwrap(),
        0,
        "pool not given back"
    );
    let t = r.thpchallenge.unwrap();
    assert_eq!(t.huge.count + t.base.count, 16);

    // A killed run's state file gives the pool back.
    std::fs::write(fraglab_host::hugetlb::NR_HUGEPAGES, "4").unwrap();
    assert_eq!(fraglab_host::hugetlb::current_pages().unwrap(), 4);
    let path = state_path("fit");
    let state = fraglab_host::knobs::StateFile {
        pid: std::process::id(),
        knobs: Vec::new(),
        cleanup: fraglab_host::knobs::Cleanup {
            hugetlb_pages: Some(0),
            ..Default::default()
        },
    };
    std::fs::write(&path, serde_json::to_string(&state).unwrap()).unwrap();
    let restored = restore_from_state_file(&path);
    let now = fraglab_host::hugetlb::current_pages().unwrap();
    if now != 0 {
        std::fs::write(fraglab_host::hugetlb::NR_HUGEPAGES, "0").unwrap();
    }
    restored.unwrap();
    assert_eq!(now, 0);
    assert!(!path.exists());

    // A target at or above MemTotal is refused before anything changes.
    let big = spec(&format!(
        "[machine]\nmemory = \"{}KiB\"\n[workload]\nduration = \"1s\"\n\
         [[workload.thpchallenge]]\nthreads = 1\nsize = \"2MiB\"\n",
        (total >> 10) + 1024
    ));
    assert!(matches!(preflight(&big, &opts), Err(HostError::Unsafe(_))));

    // A spec's own pool (`[machine] hugetlb_pages`) is planned as given, and --fit-memory
    // beside it is refused.
    let own = spec(&format!(
        "[machine]\nmemory = \"{target_kib}KiB\"\nhugetlb_pages = 8\n[workload]\nduration = \"1s\"\n\
         [[workload.thpchallenge]]\nthreads = 1\nsize = \"2MiB\"\n"
    ));
    let plain = HostOptions::default();
    assert_eq!(preflight(&own, &plain).unwrap().fit.unwrap().pages, 8);
    assert!(matches!(preflight(&own, &opts), Err(HostError::Unsupported(_))));
}

// ---- [host] damon = "off": DAMON turned off for a run and back on. ----

const KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";

/// A kdamond to turn off: the machine's own if one is on, else one made for the test (a `stat`
/// scheme over physical memory, which only monitors) and removed when dropped.
struct TestKdamond {
    made: bool,
}

impl TestKdamond {
    fn ensure() -> TestKdamond {
        if !fraglab_host::damon::running().is_empty() {
            return TestKdamond { made: false };
        }
        let nr = std::fs::read_to_string(format!("{KDAMONDS}/nr_kdamonds"))
            .expect("DAMON's sysfs interface (CONFIG_DAMON_SYSFS)");
        assert_eq!(
            nr.trim(),
            "0",
            "kdamonds configured but none on: leaving them alone"
        );
        let w = |rel: &str, v: &str| {
            std::fs::write(format!("{KDAMONDS}/{rel}"), v).unwrap_or_else(|e| panic!("{rel}: {e}"))
        };
        let t = TestKdamond { made: true };
        w("nr_kdamonds", "1");
        w("0/contexts/nr_contexts", "1");
        w("0/contexts/0/operations", "paddr");
        w("0/contexts/0/targets/nr_targets", "1");
        w("0/contexts/0/schemes/nr_schemes", "1");
        let s = "0/contexts/0/schemes/0";
        w(&format!("{s}/action"), "stat");
        w(&format!("{s}/access_pattern/nr_accesses/max"), "1");
        w(&format!("{s}/access_pattern/age/min"), "12");
        w(&format!("{s}/quotas/ms"), "50");
        w(&format!("{s}/quotas/bytes"), "134217728");
        w(&format!("{s}/quotas/reset_interval_ms"), "1000");
        w(&format!("{s}/ops_filters/nr_filters"), "2");
        w(&format!("{s}/ops_filters/0/type"), "anon");
        w(&format!("{s}/ops_filters/0/allow"), "N");
        w(&format!("{s}/ops_filters/1/type"), "unmapped");
        w(&format!("{s}/ops_filters/1/allow"), "Y");
        w("0/state", "on");
        t
    }
}

impl Drop for TestKdamond {
    fn drop(&mut self) {
        if self.made {
            let _ = std::fs::write(format!("{KDAMONDS}/0/state"), "off");
            let _ = std::fs::write(format!("{KDAMONDS}/nr_kdamonds"), "0");
        }
    }
}

/// Every parameter file of the kdamonds (not the state, pid, stats and tried regions, which
/// change by themselves), as `path:value` lines.
fn damon_parameters() -> Vec<String> {
    fn walk(d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap().filter_map(Result::ok) {
            let p = e.path();
            let n = e.file_name().to_string_lossy().into_owned();
            if ["stats", "tried_regions", "state", "pid", "effective_bytes"].contains(&n.as_str()) {
                continue;
            }
            if p.is_dir() {
                walk(&p, out);
            } else if let Ok(v) = std::fs::read_to_string(&p) {
                out.push(format!("{}:{}", p.display(), v.trim()));
            }
        }
    }
    let mut v = Vec::new();
    walk(Path::new(KDAMONDS), &mut v);
    v.sort();
    v
}

fn kdamond_pids() -> Vec<String> {
    fraglab_host::damon::running()
        .iter()
        .map(|s| {
            std::fs::read_to_string(s.with_file_name("pid"))
                .unwrap()
                .trim()
                .to_string()
        })
        .collect()
}

/// `[host] damon = "off"`: the run's start reading shows every kdamond off and no kdamond
/// thread; at the end the same kdamonds are on again (new threads) with the same parameters.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn damon_off_for_a_run_and_back_on_with_the_same_scheme() {
    let _g = live();
    let _k = TestKdamond::ensure();
    let on = fraglab_host::damon::running();
    let params = damon_parameters();
    let pids = kdamond_pids();
    let s = spec(
        r#"
[machine]
memory = "1GiB"
[host]
damon = "off"
[workload]
duration = "2s"
[[workload.task]]
steps = [{ mmap = "a", size = "32MiB" }, { touch = "a" }, { sleep = "1s" }]
"#,
    );
    let r = host_run(&s, &HostOptions::default());
    let after = fraglab_host::damon::running();
    assert_eq!(after, on, "kdamonds not back on after the run");
    assert_eq!(damon_parameters(), params, "DAMON's parameters changed");
    assert_ne!(kdamond_pids(), pids, "the kdamonds were not restarted");
    let r = r.unwrap();
    let c = r.confounders.expect("confounders");
    print!("{}", c.summary());
    let want: Vec<u32> = on
        .iter()
        .map(|p| {
            p.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(c.damon_turned_off, want);
    for reading in [&c.start, &c.end] {
        let d = reading.damon.as_ref().expect("DAMON tree");
        assert!(
            d.threads.is_empty(),
            "a kdamond ran during the run: {:?}",
            d.threads
        );
        assert!(d.kdamonds.iter().all(|k| k.state == "off"));
    }
    assert!(c.summary().contains("DAMON turned off for the run"));
}

/// A run with `[host] damon = "off"` killed with SIGKILL leaves DAMON off and its state file
/// naming the kdamonds; restoring from it (what `fraglab host restore` does) turns them back on
/// with the same parameters.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn damon_back_on_from_the_state_file_after_sigkill() {
    let _g = live();
    let _k = TestKdamond::ensure();
    let on = fraglab_host::damon::running();
    let params = damon_parameters();
    let k = test_knobs();
    let (mut child, state) = start_child_with("damon", &k, "[host]\ndamon = \"off\"\n");
    let off_during_run = fraglab_host::damon::running().is_empty();
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let left_off = fraglab_host::damon::running().is_empty();
    let saved: Option<fraglab_host::StateFile> = std::fs::read_to_string(&state)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    // Restore before asserting, so that a failed assertion does not leave DAMON off.
    let restored = restore_from_state_file(&state);
    assert_eq!(fraglab_host::damon::running(), on, "kdamonds not back on");
    for (n, cur, _) in &k {
        assert_eq!(&knob(n), cur, "{n} not restored from the state file");
    }
    assert_eq!(damon_parameters(), params, "DAMON's parameters changed");
    assert!(off_during_run, "DAMON was on during the run");
    assert!(left_off, "DAMON back on without the state file?");
    assert_eq!(saved.expect("state file after SIGKILL").cleanup.damon_on, on);
    let restored = restored.unwrap();
    for p in &on {
        assert!(restored.contains(&(p.display().to_string(), "on".to_string())));
    }
    wait_gone(&state);
}

/// Free page reporting and DAMON of this VM, printed beside a live hugetlb measurement
/// (measured on the reference VM: both are recorded with every measurement).
fn print_vm_confounders(r: &fraglab_spec::result::RunResult) {
    let c = r
        .confounders
        .as_ref()
        .expect("host results record the confounders");
    println!(
        "free page reporting: reported_kib delta {:?}; DAMON: {} kdamonds at the start, {} at \
         the end",
        c.reported_kib_delta,
        c.start.damon.as_ref().map_or(0, |d| d.nr_kdamonds),
        c.end.damon.as_ref().map_or(0, |d| d.nr_kdamonds)
    );
}

/// docs/model §28.1 on the live kernel: a task's `{ nr_hugepages = 64 }` step fills the
/// pool (`set_max_huge_pages`: 64 pages of 2 MiB from the buddy allocator, counted in
/// `htlb_buddy_alloc_success`), the result records the pool read back in
/// `proc_end["nr_hugepages"]`, and the run writes the old size (0) back at its end.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn s28_1_nr_hugepages_step_fills_the_pool_and_the_run_gives_it_back() {
    let _g = live();
    assert_eq!(
        fraglab_host::hugetlb::current_pages().unwrap(),
        0,
        "this test needs a machine without a hugetlb pool"
    );
    let s = spec(
        r#"
[machine]
memory = "1GiB"
[workload]
duration = "3s"
[[workload.task]]
name = "pool"
steps = [{ nr_hugepages = 64 }, { sleep = "1s" }]
"#,
    );
    let opts = HostOptions::default();
    let plan = preflight(&s, &opts).unwrap();
    assert_eq!(plan.hugetlb_step_pages, Some(64));
    let r = host_run(&s, &opts);
    let after = fraglab_host::hugetlb::current_pages().unwrap();
    if after != 0 {
        std::fs::write(fraglab_host::hugetlb::NR_HUGEPAGES, "0").unwrap();
    }
    let r = r.unwrap();
    assert_eq!(after, 0, "pool not given back after the run");
    print_vm_confounders(&r);
    let success = r
        .vmstat_delta
        .get("htlb_buddy_alloc_success")
        .copied()
        .unwrap_or(0);
    let fail = r.vmstat_delta.get("htlb_buddy_alloc_fail").copied().unwrap_or(0);
    println!(
        "pool read back {:?}; htlb_buddy_alloc_success {success} htlb_buddy_alloc_fail {fail}",
        r.proc_end.get("nr_hugepages")
    );
    assert_eq!(r.proc_end.get("nr_hugepages").map(String::as_str), Some("64\n"));
    assert!(success >= 64, "htlb_buddy_alloc_success moved by {success}");
}

/// §28.1: a run killed (SIGKILL) while its task holds a 64-page pool leaves the old size in
/// its state file, and `restore_from_state_file` (`fraglab host restore`) writes it back.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn s28_1_nr_hugepages_pool_is_restored_after_sigkill() {
    let _g = live();
    assert_eq!(
        fraglab_host::hugetlb::current_pages().unwrap(),
        0,
        "this test needs a machine without a hugetlb pool"
    );
    let (mut child, state) = start_child_steps("hugekill", &[], "", "{ nr_hugepages = 64 }, ");
    let held = fraglab_host::hugetlb::current_pages().unwrap();
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let st = child.wait().unwrap();
    assert_eq!(st.code(), None, "killed by a signal");
    wait_gone(&state);
    let kept = fraglab_host::hugetlb::current_pages().unwrap();
    let saved: fraglab_host::StateFile =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap_or_default()).unwrap();
    // Restore before asserting, so that a failed assertion does not leave the pool held.
    let restored = restore_from_state_file(&state);
    let now = fraglab_host::hugetlb::current_pages().unwrap();
    if now != 0 {
        std::fs::write(fraglab_host::hugetlb::NR_HUGEPAGES, "0").unwrap();
    }
    restored.unwrap();
    assert_eq!(held, 64, "the task's step did not fill the pool");
    assert_eq!(kept, 64, "the pool was given back without the state file?");
    assert_eq!(saved.cleanup.hugetlb_pages, Some(0));
    assert_eq!(now, 0, "restore did not give the pool back");
    assert!(!state.exists(), "state file not removed after restore");
}

/// §28.1: a run stopped by SIGTERM while its task holds a 64-page pool writes the old size (0)
/// back before it exits, and removes its state file.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn s28_1_nr_hugepages_pool_is_restored_after_sigterm() {
    let _g = live();
    assert_eq!(
        fraglab_host::hugetlb::current_pages().unwrap(),
        0,
        "this test needs a machine without a hugetlb pool"
    );
    let (mut child, state) = start_child_steps("hugeterm", &[], "", "{ nr_hugepages = 64 }, ");
    let held = fraglab_host::hugetlb::current_pages().unwrap();
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    wait_gone(&state);
    let now = fraglab_host::hugetlb::current_pages().unwrap();
    if now != 0 {
        let _ = restore_from_state_file(&state);
        std::fs::write(fraglab_host::hugetlb::NR_HUGEPAGES, "0").unwrap();
    }
    assert_eq!(st.code(), Some(128 + libc::SIGTERM), "exit status {st:?}");
    assert_eq!(held, 64, "the task's step did not fill the pool");
    assert_eq!(now, 0, "pool not given back after SIGTERM");
    assert!(!state.exists(), "state file left after a clean restore");
}

// ---- --fit-memory by offlining memory blocks (issue 19, item 4). ----

/// The memory blocks that read `offline` now.
fn offline_blocks() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fraglab_host::memblock::MEMORY_SYSFS)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("state")).is_ok_and(|s| s.trim() == "offline")
                })
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn mem_total() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").unwrap();
    fraglab_host::procfs::meminfo_bytes(&m, "MemTotal").unwrap()
}

/// Onlines every block the test may have left offline (after an assertion failed).
fn online_all(blocks: &[String]) {
    for b in blocks {
        let p = Path::new(fraglab_host::memblock::MEMORY_SYSFS)
            .join(b)
            .join("state");
        let _ = std::fs::write(p, "online_kernel");
    }
}

/// A target 2 GiB under MemTotal: 16 blocks of 128 MiB on this VM.
fn fit_target() -> (u64, u64) {
    let total = mem_total();
    (total, (total - 2 * GIB) >> 10)
}

/// `--fit-memory` by offlining: preflight plans blocks from the top of zone Normal, the run
/// takes them offline (MemTotal sampled during the run is the target plus less than one block,
/// and the result records the method, the blocks and the zones once fitted), and every block
/// is online again after the run.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn fit_memory_offlines_blocks_for_the_run_and_onlines_them_after() {
    let _g = live();
    assert!(
        offline_blocks().is_empty(),
        "blocks offline before the test: {:?}",
        offline_blocks()
    );
    let (total, target_kib) = fit_target();
    let target = target_kib << 10;
    let s = spec(&format!(
        r#"
[machine]
memory = "{target_kib}KiB"
[workload]
duration = "3s"
[[workload.task]]
steps = [{{ mmap = "a", size = "32MiB" }}, {{ touch = "a" }}, {{ sleep = "2s" }}]
"#
    ));
    let opts = HostOptions {
        fit_memory: true,
        ..Default::default()
    };
    let plan = preflight(&s, &opts).unwrap();
    let o = plan.offline.clone().expect("offlining planned on this VM");
    assert!(plan.fit.is_none(), "no pool with offlining");
    assert_eq!(o.blocks, (total - target) / o.block_bytes);
    assert!(
        plan.to_string().contains("fit: offline 16 blocks of 128 MiB ("),
        "{plan}"
    );
    let run = std::thread::spawn(move || host_run(&s, &opts));
    let mut min_total = total;
    while !run.is_finished() {
        min_total = min_total.min(mem_total());
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = run.join().unwrap();
    let left = offline_blocks();
    online_all(&left);
    let r = r.unwrap();
    let f = r.fit_memory.clone().expect("the result records the fitting");
    println!(
        "fit: {}; MemTotal {} -> {} (sampled minimum {}), target {target}",
        f.description, total, f.mem_total_fitted, min_total
    );
    for z in &f.zones {
        println!(
            "  zone {} start_pfn {} spanned {} present {} managed {}",
            z.name, z.start_pfn, z.spanned, z.present, z.managed
        );
    }
    assert!(left.is_empty(), "blocks left offline after the run: {left:?}");
    assert_eq!(mem_total(), total, "MemTotal not back after the run");
    assert_eq!(f.method, "offline");
    assert_eq!(f.blocks.len() as u64, o.blocks);
    assert!(
        (target..target + o.block_bytes).contains(&min_total),
        "MemTotal during the run {min_total}, target {target}"
    );
    assert_eq!(min_total, f.mem_total_fitted);
    assert!(
        r.confounders
            .as_ref()
            .unwrap()
            .summary()
            .contains("#   fit: offline 16 blocks of 128 MiB ("),
        "{}",
        r.confounders.as_ref().unwrap().summary()
    );
    // The zones once fitted: Normal lost the blocks' pages; the simulator boots them.
    let normal = f
        .zones
        .iter()
        .find(|z| z.name == "Normal")
        .expect("a Normal zone");
    let before = fraglab_host::procfs::parse_zones(&std::fs::read_to_string("/proc/zoneinfo").unwrap());
    let normal_now = before.iter().find(|z| z.name == "Normal").unwrap();
    assert_eq!(
        normal_now.present - normal.present,
        o.blocks * (o.block_bytes >> 12)
    );
    let sim = fraglab_host::sim_spec_for(&preflight_spec(target_kib), &r);
    assert_eq!(sim.machine.zones.as_ref().map(Vec::len), Some(f.zones.len()));
}

fn preflight_spec(target_kib: u64) -> fraglab_spec::Spec {
    spec(&format!(
        "[machine]\nmemory = \"{target_kib}KiB\"\n[workload]\nduration = \"1s\"\n\
         [[workload.task]]\nsteps = [{{ sleep = \"1s\" }}]\n"
    ))
}

/// Preflight refuses offlining that would leave MemAvailable under the floor, before anything
/// changes.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn fit_memory_offlining_is_refused_under_the_floor() {
    let _g = live();
    let (_, target_kib) = fit_target();
    let avail = fraglab_host::procfs::mem_available().unwrap();
    let opts = HostOptions {
        fit_memory: true,
        // 1 GiB under MemAvailable: taking 2 GiB goes under it.
        mem_floor_bytes: avail - GIB,
        ..Default::default()
    };
    let e = preflight(&preflight_spec(target_kib), &opts)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--fit-memory: taking 2.00 GiB offline (16 blocks)"),
        "{e}"
    );
    assert!(offline_blocks().is_empty());
}

/// A run with `--fit-memory` killed with SIGKILL leaves its blocks offline and listed in its
/// state file; `restore_from_state_file` (`fraglab host restore`) onlines every one.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn fit_memory_blocks_are_onlined_by_restore_after_sigkill() {
    let _g = live();
    assert!(
        offline_blocks().is_empty(),
        "blocks offline before the test: {:?}",
        offline_blocks()
    );
    let (total, target_kib) = fit_target();
    let (mut child, state) = start_child_fit("fitkill", &[], "", "", Some(target_kib));
    let during = mem_total();
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let st = child.wait().unwrap();
    wait_gone(&state);
    let left = offline_blocks();
    let saved: Option<fraglab_host::StateFile> = std::fs::read_to_string(&state)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    // Restore before asserting, so that a failed assertion does not leave blocks offline.
    let restored = restore_from_state_file(&state);
    let after = offline_blocks();
    online_all(&after);
    assert_eq!(st.code(), None, "killed by a signal");
    let saved = saved.expect("a state file after SIGKILL");
    println!(
        "MemTotal during the run {during} of {total}; offline after SIGKILL: {}",
        left.len()
    );
    assert_eq!(left.len(), 16, "the killed run's blocks: {left:?}");
    let listed: Vec<String> = saved
        .cleanup
        .offline_blocks
        .iter()
        .map(|i| format!("memory{i}"))
        .collect();
    assert!(
        left.iter().all(|b| listed.contains(b)),
        "{left:?} not all in {listed:?}"
    );
    let restored = restored.unwrap();
    assert_eq!(restored.len(), listed.len());
    assert!(after.is_empty(), "blocks still offline after restore: {after:?}");
    assert_eq!(mem_total(), total);
    assert!(during < total - GIB, "MemTotal {during} during the run");
    assert!(!state.exists(), "state file not removed after restore");
}

fn nr_hugepages_now() -> u64 {
    fraglab_host::hugetlb::current_pages().unwrap()
}

/// Best-effort offlining with the shortfall in a hugetlb pool (a mixed fit): 8 GiB out is
/// more than the blocks that go offline on this VM (about one in six of Normal's), so the run
/// holds blocks and a pool. Killed with SIGKILL it leaves both, listed in its state file (the
/// pool as its size before it was filled, 0); `restore_from_state_file` (`fraglab host
/// restore`) onlines every block and writes the pool back to 0.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn fit_memory_mixed_blocks_and_pool_are_restored_after_sigkill() {
    let _g = live();
    assert!(
        offline_blocks().is_empty(),
        "blocks offline before the test: {:?}",
        offline_blocks()
    );
    assert_eq!(nr_hugepages_now(), 0, "a hugetlb pool before the test");
    let total = mem_total();
    let target_kib = (total - 8 * GIB) >> 10;
    let (mut child, state) = start_child_fit("fitmixed", &[], "", "", Some(target_kib));
    let during_pool = nr_hugepages_now();
    let during_blocks = offline_blocks().len();
    let during_total = mem_total();
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let st = child.wait().unwrap();
    wait_gone(&state);
    let left_pool = nr_hugepages_now();
    let saved: Option<fraglab_host::StateFile> = std::fs::read_to_string(&state)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    // Restore before asserting, so that a failed assertion does not leave the machine fitted.
    let restored = restore_from_state_file(&state);
    let after = offline_blocks();
    let after_pool = nr_hugepages_now();
    online_all(&after);
    if after_pool != 0 {
        let _ = std::fs::write(fraglab_host::hugetlb::NR_HUGEPAGES, "0");
    }
    println!(
        "mixed fit: {during_blocks} blocks offline and a pool of {during_pool} pages during the \
         run (MemTotal {during_total} of {total}); after SIGKILL pool {left_pool}; after \
         restore {} blocks offline, pool {after_pool}",
        after.len()
    );
    assert_eq!(st.code(), None, "killed by a signal");
    let saved = saved.expect("a state file after SIGKILL");
    assert!(during_blocks > 0, "no block went offline");
    assert!(during_pool > 0, "no shortfall pool (every block went?)");
    assert_eq!(left_pool, during_pool, "the killed run's pool");
    assert_eq!(
        saved.cleanup.hugetlb_pages,
        Some(0),
        "the pool's size before the run"
    );
    assert!(saved.cleanup.offline_blocks.len() >= during_blocks);
    restored.unwrap();
    assert!(after.is_empty(), "blocks still offline after restore: {after:?}");
    assert_eq!(after_pool, 0, "pool not given back by restore");
    assert_eq!(mem_total(), total);
    assert!(!state.exists(), "state file not removed after restore");
}

/// A run with `--fit-memory` stopped by SIGTERM onlines its blocks before it exits.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn fit_memory_blocks_are_onlined_after_sigterm() {
    let _g = live();
    assert!(
        offline_blocks().is_empty(),
        "blocks offline before the test: {:?}",
        offline_blocks()
    );
    let (total, target_kib) = fit_target();
    let (mut child, state) = start_child_fit("fitterm", &[], "", "", Some(target_kib));
    let during = offline_blocks().len();
    // SAFETY: signalling the child this test started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    wait_gone(&state);
    let after = offline_blocks();
    if !after.is_empty() {
        let _ = restore_from_state_file(&state);
        online_all(&after);
    }
    assert_eq!(st.code(), Some(128 + libc::SIGTERM), "exit status {st:?}");
    assert_eq!(during, 16);
    assert!(after.is_empty(), "blocks left offline after SIGTERM: {after:?}");
    assert_eq!(mem_total(), total);
    assert!(!state.exists(), "state file left after a clean restore");
}

/// `[host] loop_images = true` and the census step (issue 19 item 1, docs/model §30.2): a
/// cold sequential read of a 256 MiB file on the run's xfs image; the census counts every page
/// of the file once, some in large folios; the image, its mount and its loop device are gone
/// afterwards, and the result names them.
#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn loop_image_cold_read_census_and_cleanup() {
    let _g = live();
    let s = spec(
        "[machine]\nmemory = \"24GiB\"\ncpus = 2\n[host]\nloop_images = true\n[workload]\nduration = \"60s\"\n\
         [[workload.task]]\nname = \"reader\"\nsteps = [{ read = \"big\", length = \"256MiB\" }, { census = \"big\" }]\n",
    );
    let opts = HostOptions {
        state_file: Some(state_path("loop")),
        ..Default::default()
    };
    let r = host_run(&s, &opts).unwrap();
    assert_eq!(r.census.len(), 1, "{:?}", r.census);
    let c = &r.census[0];
    assert_eq!(c.pages(), 65536, "{c:?}");
    assert!(c.pages_per_order[1..].iter().sum::<u64>() > 0, "{c:?}");
    for o in 0..11 {
        assert_eq!(c.pages_per_order[o], c.folios_per_order[o] << o);
    }
    assert_eq!(r.task_reads.len(), 1);
    assert_eq!(r.task_reads[0].bytes, 256 << 20);
    let host = &r.proc_start["host"];
    let line = host
        .lines()
        .find(|l| l.starts_with("loop_image xfs dev /dev/loop"))
        .unwrap_or_else(|| panic!("{host}"));
    let dev = line.split(' ').nth(3).unwrap();
    let out = Command::new("losetup").arg("-a").output().unwrap();
    let loops = String::from_utf8_lossy(&out.stdout);
    assert!(
        !loops.contains("fraglab-host-"),
        "loop device left: {loops} ({dev})"
    );
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains("fraglab-host-"), "mount left: {mounts}");
    assert!(!state_path("loop").exists());
}
