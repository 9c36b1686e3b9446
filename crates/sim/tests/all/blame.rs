//! Fragmentation blame (issue 37, docs/blame.md): the events that make pageblocks impure are
//! attributed to the task that caused them, and ranked.

use fraglab_spec::parse_spec;
use fraglab_spec::result::{BlameSource, RunResult};

/// A small machine: task `polluter` fills memory with anon pages, frees every fourth page
/// (free memory scattered over Movable blocks, too little in any for a claim) and then makes
/// unmovable allocations (pipe buffers) that must steal from them; task `thp` only makes
/// madvised THP faults (and the page tables they need).
fn spec(blame: bool) -> fraglab_spec::Spec {
    let text = format!(
        "[machine]\nmemory = \"256MiB\"\ncpus = 2\n\
         [knobs]\n\"transparent_hugepage/enabled\" = \"madvise\"\n\"transparent_hugepage/defrag\" = \"madvise\"\n\
         [run]\nseed = 3\nblame = {blame}\ntrace = [\"kmem:mm_page_alloc_extfrag\"]\n\
         [workload]\nduration = \"20s\"\n\
         [[workload.task]]\nname = \"polluter\"\nloops = 4\n\
         steps = [{{ mmap = \"a\", size = \"180MiB\" }}, {{ touch = \"a\" }}, \
         {{ dontneed = \"a\", offset = 0, length = \"4KiB\", stride = \"16KiB\" }}, {{ pipes = 4000 }}, \
         {{ munmap = \"a\" }}, {{ sleep = \"50ms\" }}]\n\
         [[workload.task]]\nname = \"thp\"\nloops = 20\n\
         steps = [{{ mmap = \"h\", size = \"32MiB\", madvise = true }}, {{ touch = \"h\" }}, \
         {{ munmap = \"h\" }}, {{ sleep = \"100ms\" }}]\n"
    );
    parse_spec(&text, "blame.toml").unwrap()
}

fn run(blame: bool) -> RunResult {
    fraglab_sim::timed::run_workload(&spec(blame)).unwrap()
}

fn source<'a>(r: &'a RunResult, name: &str) -> &'a BlameSource {
    r.blame
        .as_ref()
        .expect("a blame section")
        .iter()
        .find(|s| s.source == name)
        .unwrap_or_else(|| panic!("no source {name}: {:?}", r.blame))
}

fn ev(s: &BlameSource, k: &str) -> u64 {
    s.events[k]
}

#[test]
fn polluter_ranks_first_and_thp_task_steals_nothing() {
    let r = run(true);
    let blame = r.blame.as_ref().unwrap();
    let p = source(&r, "task polluter");
    let t = source(&r, "task thp");
    assert!(p.mixed_blocks > 0, "{p:?}");
    assert!(ev(p, "steal") > 0, "{p:?}");
    // The THP task steals nothing; at most its page tables' rare partial claim mixes a block.
    assert_eq!(ev(t, "steal"), 0, "{t:?}");
    assert!(t.mixed_blocks * 5 < p.mixed_blocks, "{t:?} vs {p:?}");
    // The ranking (mixed blocks first) puts the polluter above every other source.
    let top = blame.iter().max_by_key(|s| s.mixed_blocks).unwrap();
    assert_eq!(top.source, "task polluter", "{blame:?}");
}

/// Every fallback the run made is one source's event: the steals and claims summed over
/// sources are the run's mm_page_alloc_extfrag events.
#[test]
fn fallback_events_sum_to_the_extfrag_count() {
    let r = run(true);
    let sum: u64 = r
        .blame
        .as_ref()
        .unwrap()
        .iter()
        .map(|s| ev(s, "steal") + ev(s, "claim_partial") + ev(s, "claim_whole"))
        .sum();
    assert!(sum > 0);
    assert_eq!(sum, r.trace_counts["mm_page_alloc_extfrag"]);
}

/// Blame only observes: with it on, everything but the `blame` section is what the run
/// without it gives, and without it the section is absent from the JSON.
#[test]
fn blame_off_is_unchanged_and_on_changes_nothing_else() {
    let off = run(false);
    assert!(off.blame.is_none());
    let json = serde_json::to_string(&off).unwrap();
    assert!(!json.contains("\"blame\""));
    let mut on = run(true);
    assert!(on.blame.is_some());
    on.blame = None;
    on.wall_ns = off.wall_ns;
    assert_eq!(serde_json::to_string(&on).unwrap(), json);
}

#[test]
fn blame_is_deterministic() {
    let a = run(true);
    let b = run(true);
    assert_eq!(a.blame, b.blame);
}

/// Failed THP faults are charged to the sources whose pages blocked their compaction: in the
/// kbuild example, the compile jobs' pages block some; no source is charged with more faults
/// than failed, and the sources that never allocate (boot's free memory) with none.
#[test]
fn failed_thp_faults_are_charged_to_the_pages_that_blocked_their_compaction() {
    let mut s = fraglab_spec::parse_spec(
        fraglab_spec::examples::example("kbuild-thp-burst").unwrap(),
        "k.toml",
    )
    .unwrap();
    s.run.blame = true;
    s.workload.as_mut().unwrap().duration_ns = 12_000_000_000;
    let r = fraglab_sim::timed::run_workload(&s).unwrap();
    let failed = r.vmstat_delta["thp_fault_fallback"] as u64;
    let blame = r.blame.as_ref().unwrap();
    let cc1 = source(&r, "kbuild cc1");
    assert!(failed > 0 && cc1.thp_fault_fail > 0, "{failed} {cc1:?}");
    for b in blame {
        assert!(b.thp_fault_fail <= failed, "{b:?} vs {failed}");
        // Charged only where its pages blocked compaction.
        assert!(b.thp_fault_fail == 0 || b.compact_blocked_blocks > 0, "{b:?}");
    }
}
