//! Issue 23 item 5: a timeless run's result JSON (`fraglab run ops.toml -o x.json`) is the timed
//! runs' schema, with the printed text in `printed`, and reading the state for it changes
//! nothing the ops print.

use fraglab_sim::{run_ops, run_ops_result};
use fraglab_spec::parse_spec;

const SPEC: &str = r#"name = "small"
[machine]
memory = "64MiB"
dma = false
[run]
seed = 9
[[op]]
alloc = "a"
count = 2000
gfp = "GFP_KERNEL"
[[op]]
alloc = "b"
count = 100
order = 3
gfp = "GFP_HIGHUSER_MOVABLE"
[[op]]
free = "a"
every = 2
[[op]]
print = "buddyinfo"
"#;

#[test]
fn timeless_result_carries_the_printed_text_and_the_state() {
    let spec = parse_spec(SPEC, "small.toml").unwrap();
    let text = run_ops(&spec).unwrap();
    let r = run_ops_result(&spec).unwrap();
    assert_eq!(
        r.printed.as_deref(),
        Some(text.as_str()),
        "the same text, byte for byte"
    );
    assert_eq!(
        (r.engine.as_str(), r.spec_name.as_deref(), r.seed, r.duration_ns),
        ("sim", Some("small"), 9, 0)
    );
    // The ops' allocations and frees are in the deltas: 2000 + 100 x 8 pages allocated,
    // 1000 freed (the PCP lists may hold some back from the buddy, not from the counters).
    assert_eq!(
        r.vmstat_delta["pgalloc_normal"] + r.vmstat_delta["pgalloc_dma32"],
        2800
    );
    assert_eq!(r.vmstat_delta["pgfree"], 1000);
    // The end state: /proc files and one pageblock map (64 MiB = 32 blocks).
    assert_eq!(
        r.proc_end.keys().collect::<Vec<_>>(),
        ["buddyinfo", "pagetypeinfo", "vmstat", "zoneinfo"]
    );
    assert_ne!(r.proc_start["buddyinfo"], r.proc_end["buddyinfo"]);
    assert!(text.contains(r.proc_end["buddyinfo"].trim_end()), "{text}");
    assert_eq!(r.pageblock_maps.len(), 1);
    assert_eq!(r.pageblock_maps[0].types.chars().count(), 32);
    // Round trip through JSON; a timed run's JSON has no `printed`.
    let json = serde_json::to_string(&r).unwrap();
    let back: fraglab_spec::result::RunResult = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let timed = fraglab_spec::result::RunResult::default();
    assert!(!serde_json::to_string(&timed).unwrap().contains("printed"));
}
