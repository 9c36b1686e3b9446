//! Live test of `fraglab host record` (issue 21 item 4): opt-in with `cargo test -p
//! fraglab-host --features live --test record` as root. Records 1 s of the default events while
//! a command allocates, and checks the file, the header and that the private tracefs instance
//! (and any tracefs this process mounted) is gone afterwards.

use std::time::Duration;

use fraglab_host::record::{instance_name, record, RecordOptions};
use fraglab_state::trace::{event_name, TraceReader};

fn mounted_tracefs() -> Vec<String> {
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("tracefs"))
        .map(|l| l.split_whitespace().nth(1).unwrap().to_string())
        .collect()
}

#[test]
#[cfg_attr(not(feature = "live"), ignore = "live kernel: opt in with --features live")]
fn issue_21_item_4_record_one_second_live() {
    // SAFETY: no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the live record test needs root");
    let dir = std::env::temp_dir().join(format!("fraglab-record-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("one.trace");
    let before = mounted_tracefs();
    let opts = RecordOptions {
        output: out.clone(),
        duration: Some(Duration::from_secs(1)),
        snapshot: false,
        buffer_kb: 4096,
        // A 64 MiB buffer filled once: 16,384 anonymous base pages (THP is "madvise" here and
        // dd does not madvise), freed at exit.
        command: [
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=64M",
            "count=1",
            "status=none",
        ]
        .map(String::from)
        .to_vec(),
        progress: false,
        ..Default::default()
    };
    let h = record(&opts).unwrap();
    // The command ended the recording (the duration is only a cap), with its status.
    assert_eq!(h.workload_status, Some(0));
    assert!(h.duration_ns < 1_500_000_000, "{} ns", h.duration_ns);
    // Nothing of the recorder is left in tracefs.
    assert_eq!(mounted_tracefs(), before, "a tracefs mount was left");
    for m in &before {
        let inst = std::path::Path::new(m)
            .join("instances")
            .join(instance_name(std::process::id()));
        assert!(!inst.exists(), "{} left behind", inst.display());
    }
    assert_eq!(h.clock, "mono");
    assert_eq!(h.recorder_pid, Some(std::process::id()));
    assert!(h.proc_end.contains_key("pagetypeinfo") && h.proc_end.contains_key("buddyinfo"));
    assert!(
        h.knobs.contains_key("vm.min_free_kbytes"),
        "{:?}",
        h.knobs.keys().take(5).collect::<Vec<_>>()
    );
    let mut r = TraceReader::open(&out).unwrap();
    assert_eq!(r.header().lines, h.lines);
    let (mut n, mut allocs) = (0u64, 0u64);
    while let Some(l) = r.next_line().unwrap() {
        n += 1;
        if event_name(&l) == Some("mm_page_alloc") {
            allocs += 1;
        }
    }
    assert_eq!(n, h.lines);
    assert!(allocs >= 10_000, "{allocs} mm_page_alloc lines");

    // Without a command: the duration.
    let opts = RecordOptions {
        command: Vec::new(),
        ..opts
    };
    let h = record(&opts).unwrap();
    assert!(
        h.duration_ns >= 1_000_000_000 && h.duration_ns < 2_000_000_000,
        "{} ns",
        h.duration_ns
    );
    assert_eq!(h.workload_status, None);
    assert_eq!(mounted_tracefs(), before, "a tracefs mount was left");
    assert_eq!(TraceReader::open(&out).unwrap().header().lines, h.lines);
    let _ = std::fs::remove_dir_all(&dir);
}
