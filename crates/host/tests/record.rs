//! Live test of `fraglab host record` (issue 21 item 4): opt-in with `cargo test -p
//! fraglab-host --features live --test record` as root. Records 1 s of the default events while
//! a command allocates, and checks the file, the header and that the private tracefs instance
//! (and any tracefs this process mounted) is gone afterwards.

use std::time::Duration;

use fraglab_host::record::{instance_name, record, RecordOptions};
use fraglab_state::trace::{event_name, TraceReader};

/// Whether tracefs has an instance of this name: tracefs is one file system however often it is
/// mounted, and an instance outlives an unmount, so it is looked at through a mount of its own
/// where none is mounted.
fn instance_exists(name: &str) -> bool {
    if let Some(m) = mounted_tracefs().first() {
        return std::path::Path::new(m).join("instances").join(name).exists();
    }
    let dir = std::env::temp_dir().join(format!("fraglab-record-test-tracefs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    let (src, tgt, ty) = (c("nodev"), c(&dir.to_string_lossy()), c("tracefs"));
    // SAFETY: valid C strings; no mount data.
    let r = unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) };
    assert_eq!(r, 0, "mount tracefs: {}", std::io::Error::last_os_error());
    let exists = dir.join("instances").join(name).exists();
    // SAFETY: unmounting what this test mounted.
    assert_eq!(unsafe { libc::umount2(tgt.as_ptr(), 0) }, 0);
    std::fs::remove_dir(&dir).unwrap();
    exists
}

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
        buffer_kb: Some(4096),
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
    let name = instance_name(std::process::id());
    assert!(!instance_exists(&name), "tracefs instance {name} left behind");
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

    // Without a command: the duration; with the snapshot, read while tracing is on (its
    // window inside the recording).
    let opts = RecordOptions {
        command: Vec::new(),
        snapshot: true,
        ..opts
    };
    let h = record(&opts).unwrap();
    assert!(h.duration_ns >= 1_000_000_000, "{} ns", h.duration_ns);
    assert_eq!(h.workload_status, None);
    assert_eq!(mounted_tracefs(), before, "a tracefs mount was left");
    assert!(!instance_exists(&name), "tracefs instance {name} left behind");
    let [a, b] = h.snapshot_window_ns.unwrap();
    assert!(h.trace_start_ns <= a && a <= b && b <= h.trace_end_ns);
    let mut r = TraceReader::open(&out).unwrap();
    assert_eq!(r.header().lines, h.lines);
    let snap = r.take_snapshot().expect("the snapshot is embedded");
    assert_eq!(Some(&snap.header), h.snapshot.as_ref());
    assert!(snap.header.end_pfn > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
