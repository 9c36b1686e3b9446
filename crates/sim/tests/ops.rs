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
