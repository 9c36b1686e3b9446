//! The hugetlb pool (docs/model §28): `[machine] hugetlb_pages` filled at boot as
//! `vm.nr_hugepages` is, the `nr_hugepages` op of a timeless run and the `nr_hugepages` task step
//! of a timed run.

use fraglab_mm::folio::FolioKind;
use fraglab_sim::boot::boot;

fn spec(extra: &str) -> fraglab_spec::Spec {
    let text = format!("[machine]\nmemory = \"1GiB\"\n{extra}\n[[op]]\ncompact_memory = true\n");
    fraglab_spec::parse_spec(&text, "pool.toml").unwrap()
}

/// The pool's pages leave the free lists as order-9 folios of their own kind, in movable
/// pageblocks that are not counted as mixed, and compaction of the whole machine steps over
/// them; a pool larger than the machine is an error naming the key.
#[test]
fn pool_is_taken_at_boot_and_compaction_steps_over_it() {
    let free = |mm: &fraglab_mm::Mm| -> i64 { mm.zones.iter().map(|z| z.nr_free_pages()).sum() };
    let plain = boot(&spec("")).unwrap();
    let mut mm = boot(&spec("hugetlb_pages = 100")).unwrap();
    assert_eq!(free(&plain) - free(&mm), 100 * 512);
    assert_eq!(mm.folios.census_of(FolioKind::Hugetlb)[9], 100);
    assert_eq!(mm.stats[fraglab_mm::vmstat::Stat::nr_hugetlb as usize], 0);
    // Filled through set_max_huge_pages (§28.1): counted as the kernel counts a write.
    assert_eq!(mm.hugetlb.nr_huge_pages(), 100);
    assert_eq!(mm.stat(fraglab_mm::vmstat::Stat::htlb_buddy_alloc_success), 100);
    let before = mm.folios.census_of(FolioKind::Hugetlb);
    mm.compact_node(0, false);
    assert_eq!(
        mm.folios.census_of(FolioKind::Hugetlb),
        before,
        "compaction moved a pool page"
    );
    mm.check_invariants().unwrap();
    let e = match boot(&spec("hugetlb_pages = 600")) {
        Ok(_) => panic!("a 1.2 GiB pool on a 1 GiB machine booted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("machine.hugetlb_pages") && e.contains("of 600"), "{e}");
}

const SMALL: &str = "[machine]\nmemory = \"64MiB\"\ncpus = 1\n";

/// §28.1–§28.2 through the timeless engine: on a machine whose free memory is scattered, the
/// write compacts page by page, stops at the first failure, and the log shows the pool and the
/// counters; a second write shrinks the pool.
#[test]
fn s28_1_nr_hugepages_op_grows_until_the_first_failure_then_shrinks() {
    let text = format!(
        "{SMALL}
[[op]]
alloc = \"a\"
count = 15000
gfp = \"GFP_HIGHUSER_MOVABLE\"
[[op]]
free = \"a\"
every = 2
[[op]]
nr_hugepages = 30
[[op]]
print = \"folios\"
[[op]]
nr_hugepages = 2
"
    );
    let spec = fraglab_spec::parse_spec(&text, "t.toml").unwrap();
    let out = fraglab_sim::run_ops(&spec).unwrap();
    let line = |op: usize| {
        out.lines()
            .find(|l| l.starts_with(&format!("# op[{op}] nr_hugepages")))
            .unwrap_or_else(|| panic!("no op[{op}] line in\n{out}"))
            .to_string()
    };
    let grow = line(2);
    assert!(grow.starts_with("# op[2] nr_hugepages 30: pool 0 -> "), "{grow}");
    assert!(grow.contains("stopped at the first failure"), "{grow}");
    assert!(grow.contains("htlb_buddy_alloc_fail 1;"), "{grow}");
    assert!(!grow.contains(" 0 compact stalls"), "the write compacted: {grow}");
    let pool: u64 = grow["# op[2] nr_hugepages 30: pool 0 -> ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(pool > 2 && pool < 30, "{grow}");
    assert!(grow.contains(&format!("({pool} allocated, 0 freed")), "{grow}");
    assert!(
        grow.contains(&format!("htlb_buddy_alloc_success {pool} ")),
        "{grow}"
    );
    let hugetlb = out.lines().find(|l| l.starts_with("hugetlb")).unwrap();
    assert!(hugetlb.ends_with(&format!(" {}", pool * 512)), "{hugetlb}");
    assert_eq!(
        line(4),
        format!(
            "# op[4] nr_hugepages 2: pool {pool} -> 2 (0 allocated, {} freed); \
             htlb_buddy_alloc_success {pool} htlb_buddy_alloc_fail 1; 0 compact stalls, 0 direct reclaims",
            pool - 2
        )
    );
}

/// The task step: a program fills memory, frees every other page, then writes nr_hugepages;
/// the result has the counters in its vmstat delta and the pool in proc_end.
#[test]
fn s28_1_nr_hugepages_task_step_reports_the_pool_and_the_counters() {
    let text = format!(
        "{SMALL}
[workload]
duration = \"10s\"
[[workload.task]]
name = \"pool\"
steps = [
  {{ mmap = \"m\", size = \"56MiB\" }},
  {{ touch = \"m\" }},
  {{ dontneed = \"m\", offset = \"0\", length = \"28MiB\" }},
  {{ nr_hugepages = 64 }},
  {{ sleep = \"1s\" }},
]
"
    );
    let spec = fraglab_spec::parse_spec(&text, "t.toml").unwrap();
    let r = fraglab_sim::timed::run_workload(&spec).unwrap();
    let ok = r.vmstat_delta["htlb_buddy_alloc_success"];
    assert!(ok > 0 && ok < 64, "{ok}");
    assert_eq!(r.vmstat_delta["htlb_buddy_alloc_fail"], 1);
    assert_eq!(r.proc_end["nr_hugepages"], format!("{ok}\n"));
    // A spec without the step has no such entry.
    let plain = text
        .replace("  {{ nr_hugepages = 64 }},\n", "")
        .replace("  { nr_hugepages = 64 },\n", "");
    let spec = fraglab_spec::parse_spec(&plain, "t.toml").unwrap();
    let r = fraglab_sim::timed::run_workload(&spec).unwrap();
    assert!(!r.proc_end.contains_key("nr_hugepages"));
    assert_eq!(r.vmstat_delta["htlb_buddy_alloc_success"], 0);
}

/// §28.1: the step's count is the pool the workload asks for on top of the machine's pool
/// (`machine.hugetlb_pages` = N): the step writes N + M, the pool reaches N + M, and the
/// result reports M (the pool minus the machine's); shrinking to 0 gives back only the
/// workload's part.
#[test]
fn s28_1_nr_hugepages_task_step_counts_on_top_of_the_machines_pool() {
    let text = "[machine]\nmemory = \"1GiB\"\ncpus = 1\nhugetlb_pages = 40\n\
        [workload]\nduration = \"2s\"\n[[workload.task]]\nname = \"pool\"\n\
        steps = [{ nr_hugepages = 24 }, { sleep = \"1s\" }]\n";
    let spec = fraglab_spec::parse_spec(text, "t.toml").unwrap();
    let r = fraglab_sim::timed::run_workload(&spec).unwrap();
    // 24 more pages than the 40 the machine holds, all of them allocated by the step.
    assert_eq!(r.vmstat_delta["htlb_buddy_alloc_success"], 24);
    assert_eq!(r.proc_end["nr_hugepages"], "24\n");
    // Back to 0: the workload's 24 are given back, the machine's 40 stay.
    let down = text.replace(
        "nr_hugepages = 24 }, {",
        "nr_hugepages = 24 }, { nr_hugepages = 0 }, {",
    );
    let spec = fraglab_spec::parse_spec(&down, "t.toml").unwrap();
    let r = fraglab_sim::timed::run_workload(&spec).unwrap();
    assert_eq!(r.proc_end["nr_hugepages"], "0\n");
    assert_eq!(r.vmstat_delta["htlb_buddy_alloc_success"], 24);
}
