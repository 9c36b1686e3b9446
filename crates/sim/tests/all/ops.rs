//! The timeless runner's fault and kswapd ops, the model switches, and sets that survive
//! reclaim freeing their members.

use fraglab_spec::parse_spec;

const MACHINE: &str = r#"
[machine]
cpus = 1
[[machine.zone]]
name = "DMA32"
start_pfn = 4096
spanned = 8192
[knobs]
"vm.min_free_kbytes" = 512
"transparent_hugepage/enabled" = "always"
"#;

fn run(body: &str) -> String {
    let spec = parse_spec(&format!("{MACHINE}{body}"), "t.toml").unwrap();
    fraglab_sim::run_ops(&spec).unwrap()
}

#[test]
fn fault_op_maps_thps_then_falls_back() {
    let out = run("[[op]]\nfault = \"thp\"\ncount = 20\nmadvised = true\n[[op]]\nprint = \"vmstat\"\n");
    // 16 pageblocks, minus the watermarks: most faults get a THP, the last ones fall back.
    let line = out.lines().find(|l| l.starts_with("# op[0] fault thp")).unwrap();
    assert!(line.contains("(MADV_HUGEPAGE)"), "{line}");
    assert!(line.contains("x order 9"), "{line}");
    assert!(line.contains("x order 0"), "{line}");
    let stat = |name: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(stat("thp_fault_alloc") >= 12);
    assert!(stat("thp_fault_fallback") >= 1);
    assert_eq!(stat("thp_fault_alloc") + stat("thp_fault_fallback"), 20);
}

#[test]
fn kswapd_op_reclaims_page_cache_and_sets_skip_what_reclaim_freed() {
    let out = run(r#"
[[op]]
alloc = "cache"
count = 8150
gfp = "GFP_HIGHUSER_MOVABLE"
kind = "file"
[[op]]
kswapd = true
[[op]]
free = "cache"
[[op]]
print = "summary"
"#);
    let k = out.lines().find(|l| l.starts_with("# op[1] kswapd")).unwrap();
    assert!(k.contains("was Running") && k.ends_with("now Sleeping"), "{k}");
    assert!(!k.contains(" 0 pages reclaimed"), "{k}");
    // Reclaim freed some of the set's folios (direct reclaim during the fill, then kswapd):
    // the free op skips them instead of freeing reused ids.
    let f = out.lines().find(|l| l.starts_with("# op[2] free cache")).unwrap();
    assert!(f.contains("already freed by reclaim or OOM"), "{f}");
}

#[test]
fn model_switches_reach_the_model() {
    // Under V4 (before the initial compaction) a costly NORETRY request does no compaction.
    for (policy, stalls) in [("baseline", true), ("v4_kcompactd_background", false)] {
        let out = run(&format!(
            r#"
[model]
costly_order_policy = "{policy}"
[[op]]
alloc = "a"
count = 8100
gfp = "GFP_HIGHUSER_MOVABLE|__GFP_NORETRY"
[[op]]
free = "a"
every = 2
[[op]]
alloc = "big"
count = 2
order = 9
gfp = "GFP_HIGHUSER_MOVABLE|__GFP_NORETRY"
[[op]]
print = "vmstat"
"#
        ));
        let stall: u64 = out
            .lines()
            .find_map(|l| l.strip_prefix("compact_stall "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(stall > 0, stalls, "{policy}");
    }
}

#[test]
fn migrate_tracepoints_frame_each_migrate_pages_call() {
    let out = run(r#"
[run]
trace = ["migrate:*", "compaction:mm_compaction_kcompactd_sleep"]
[[op]]
alloc = "a"
count = 8100
gfp = "GFP_HIGHUSER_MOVABLE|__GFP_NORETRY"
[[op]]
free = "a"
every = 2
[[op]]
compact = 9
[[op]]
proactive_compact = true
[[op]]
print = "trace"
"#);
    let starts = out
        .lines()
        .filter(|l| l.contains(" mm_migrate_pages_start: "))
        .count();
    let ends: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" mm_migrate_pages: "))
        .collect();
    assert!(starts > 0 && starts == ends.len(), "{out}");
    assert!(
        out.contains("mm_migrate_pages_start: mode=MIGRATE_ASYNC reason=compaction"),
        "{out}"
    );
    assert!(
        ends[0].contains("mode=MIGRATE_ASYNC reason=compaction"),
        "{}",
        ends[0]
    );
    assert!(out.contains(" mm_compaction_kcompactd_sleep: nid=0"), "{out}");
}

#[test]
fn write_and_read_ops_use_the_page_cache_paths() {
    let out = run(r#"
[[op]]
write = "wal"
length = "2MiB"
[[op]]
write = "log"
mapping = "no_large_folios"
length = "64KiB"
[[op]]
read = "data"
mapping = "large_folios"
length = "64KiB"
file_size = "64MiB"
[[op]]
read = "data"
offset = "64KiB"
length = "256KiB"
file_size = "64MiB"
[[op]]
write = "wal"
length = "8KiB"
"#);
    let line = |p: &str| out.lines().find(|l| l.starts_with(p)).unwrap().to_string();
    // A fresh machine: the 2 MiB XFS write gets one PMD-size folio.
    assert!(
        line("# op[0] write wal").contains("folios added 1 x order 9;"),
        "{out}"
    );
    assert!(
        line("# op[1] write log").contains("folios added 16 x order 0;"),
        "{out}"
    );
    let r1 = line("# op[2] read data");
    assert!(r1.contains("1 sync") && r1.contains("x order 0"), "{r1}");
    let r2 = line("# op[3] read data");
    assert!(r2.contains("async") && r2.contains("x order 2"), "{r2}");
    assert!(
        line("# op[4] write wal").contains("2 pages cached, folios added none"),
        "{out}"
    );
}

#[test]
fn machine_swap_and_swappiness_reach_the_model() {
    let spec = parse_spec(
        &format!("{MACHINE}\"vm.swappiness\" = 100\n").replace("cpus = 1", "cpus = 1\nswap = \"8MiB\""),
        "t.toml",
    )
    .unwrap();
    let mm = fraglab_sim::boot(&spec).unwrap();
    assert_eq!(mm.reclaim.swap.total, 2048);
    assert_eq!(mm.tun.swappiness, 100);
}

/// docs/model §26: the `mode` of the kcompactd ops. A `kcompactd` op on a fresh machine
/// (order 9 already available, so no zone is suitable) runs `kcompactd_do_work` with "force" but
/// only records the order with "wake"; `proactive_compact` "tick" ends kcompactd's 500 ms wait on
/// its first tick, and "force" skips the node-score check (each zone still stops at low).
#[test]
fn section_26_op_modes() {
    let out = run(r#"
[[op]]
kcompactd = 9
[[op]]
kcompactd = 9
mode = "wake"
[[op]]
proactive_compact = true
mode = "tick"
[[op]]
proactive_compact = true
mode = "force"
[[op]]
print = "vmstat"
"#);
    let line = |i: usize| {
        out.lines()
            .find(|l| l.starts_with(&format!("# op[{i}]")))
            .unwrap()
    };
    assert!(line(0).contains("(suitable: false): "), "{}", line(0));
    assert!(
        line(1).contains("(suitable: false) recorded, not run"),
        "{}",
        line(1)
    );
    // The recorded order is served at the timeout, before any proactive check.
    assert!(line(2).contains("zone runs"), "{}", line(2));
    // Forced, but a zone at or below the low threshold (score 0 here) is not compacted.
    assert!(
        line(3).contains("node score 0 -> 0 (high 90); 0 zone runs"),
        "{}",
        line(3)
    );
    let wakes: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("compact_daemon_wake "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(wakes, 2, "the forced op and the timeout's kcompactd_do_work");
}
