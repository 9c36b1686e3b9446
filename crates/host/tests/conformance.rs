//! The conformance suite: one spec body run on both engines, asserting what must hold on both.
//! The host arm runs only where it may (Linux ≥ 6.15, root, MemAvailable ≥ 4 GiB) and prints
//! why it is skipped elsewhere; the simulator arm always runs. Small: ≤ 512 MiB of anonymous
//! memory on the host.

use fraglab_host::{host_run, HostOptions};
use fraglab_spec::result::RunResult;

fn host_allowed() -> Result<(), String> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").map_err(|_| "not Linux".to_string())?;
    let mut it = rel
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse::<u32>().ok());
    if (it.next().unwrap_or(0), it.next().unwrap_or(0)) < (6, 15) {
        return Err(format!("kernel {} older than 6.15", rel.trim()));
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .unwrap_or("1");
    if uid != "0" {
        return Err("not root".into());
    }
    let avail: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemAvailable:")
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0);
    if avail < 4 << 20 {
        return Err(format!("MemAvailable {} MiB < 4 GiB", avail >> 10));
    }
    Ok(())
}

/// The machine size for the simulator arm: this host's memory (so both arms start alike), or
/// 4 GiB where /proc/meminfo is unreadable.
fn spec(body: &str) -> fraglab_spec::Spec {
    let kb: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(4 << 20);
    let text = format!(
        "name = \"conformance\"\n[machine]\nmemory = \"{}MiB\"\ncpus = 2\n{body}",
        kb / 1024
    );
    fraglab_spec::parse_spec(&text, "conformance.toml").unwrap()
}

/// The host arms change the same knobs: one at a time.
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn both(body: &str) -> (RunResult, Option<RunResult>) {
    let _l = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let s = spec(body);
    let sim = fraglab_sim::timed::run_workload(&s).unwrap();
    let host = match host_allowed() {
        Ok(()) => Some(host_run(&s, &HostOptions::default()).unwrap()),
        Err(why) => {
            eprintln!("SKIPPED host arm: {why}");
            None
        }
    };
    (sim, host)
}

/// On a machine with free memory, every madvised THP fault of the bursts gets a huge page
/// (THP enabled = madvise), on both engines.
#[test]
fn madvised_thp_bursts_succeed_on_a_free_machine() {
    let body = r#"[knobs]
"transparent_hugepage/enabled" = "madvise"
"transparent_hugepage/defrag" = "madvise"
[workload]
duration = "5s"
[[workload.thp_burst]]
interval = "1s"
size = "128MiB"
hold = "200ms"
bursts = 3
"#;
    let (sim, host) = both(body);
    for (engine, r) in std::iter::once(("sim", &sim)).chain(host.iter().map(|h| ("host", h))) {
        assert_eq!(r.bursts.len(), 3, "{engine}: {:?}", r.bursts);
        for b in &r.bursts {
            assert_eq!(b.faults, 64, "{engine}: 128 MiB = 64 PMD ranges");
            assert!(
                b.huge * 10 >= b.faults * 9,
                "{engine}: {} of {} huge",
                b.huge,
                b.faults
            );
        }
    }
    assert_eq!(sim.vmstat_delta["thp_fault_fallback"], 0);
}

/// THP disabled: no burst gets a huge page, on both engines.
#[test]
fn thp_never_gives_no_huge_pages() {
    let body = r#"[knobs]
"transparent_hugepage/enabled" = "never"
[workload]
duration = "3s"
[[workload.thp_burst]]
interval = "1s"
size = "64MiB"
hold = "100ms"
bursts = 2
"#;
    let (sim, host) = both(body);
    for (engine, r) in std::iter::once(("sim", &sim)).chain(host.iter().map(|h| ("host", h))) {
        // The bursts' own AnonHugePages on the host (vmstat counts the whole machine).
        assert_eq!(r.bursts.iter().map(|b| b.huge).sum::<u64>(), 0, "{engine}");
    }
}
