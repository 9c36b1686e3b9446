//! NUMA in timed runs (issue 35): workloads bound to nodes run on the node's CPUs and allocate
//! there, each node's kswapd is its own thread, and the result's /proc files are per node.

use fraglab_spec::parse_spec;

fn run(text: &str) -> fraglab_spec::result::RunResult {
    let spec = parse_spec(text, "t.toml").unwrap();
    fraglab_sim::timed::run_workload(&spec).unwrap()
}

const MACHINE: &str =
    "[machine]\nmemory = \"2GiB\"\ncpus = 4\nnodes = 2\ndma = false\n[run]\nseed = 3\ndebug_vm = true\n";

/// The NUMA events of each zone line of /proc/zoneinfo: (node, zone, item, value).
fn numa_events(zoneinfo: &str) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    let mut at = String::new();
    for l in zoneinfo.lines() {
        if let Some(rest) = l.strip_prefix("Node ") {
            at = rest.to_string();
        } else if let Some(rest) = l.trim().strip_prefix("numa_") {
            let (k, v) = rest.split_once(char::is_whitespace).unwrap();
            out.push((at.clone(), k.to_string(), v.trim().parse().unwrap()));
        }
    }
    out
}

fn event(ev: &[(String, String, u64)], zone: &str, item: &str) -> u64 {
    ev.iter()
        .filter(|(z, k, _)| z.starts_with(zone) && k == item)
        .map(|e| e.2)
        .sum()
}

#[test]
fn a_task_bound_to_node_1_runs_and_allocates_there() {
    let r = run(&format!(
        "{MACHINE}[workload]\nduration = \"5s\"\n[[workload.task]]\nnuma_node = 1\n\
         steps = [{{ mmap = \"a\", size = \"256MiB\" }}, {{ touch = \"a\" }}, {{ sleep = \"100ms\" }}]\n"
    ));
    let zi = &r.proc_end["zoneinfo"];
    let ev = numa_events(zi);
    // Every allocation of the task was on node 1, from a CPU of node 1 (CPUs 2 and 3).
    assert!(event(&ev, "1, zone   Normal", "hit") >= 65536, "{ev:?}");
    assert_eq!(event(&ev, "1, zone   Normal", "other"), 0);
    assert_eq!(event(&ev, "0,", "miss") + event(&ev, "1,", "miss"), 0);
    // Per-node /proc files.
    let buddy = &r.proc_end["buddyinfo"];
    assert!(buddy.contains("Node 0, zone    DMA32"), "{buddy}");
    assert!(buddy.contains("Node 1, zone   Normal"), "{buddy}");
    assert_eq!(
        r.proc_end["pagetypeinfo"].matches("Page block order: 9").count(),
        2
    );
}

#[test]
fn interleave_spreads_a_task_over_both_nodes() {
    let r = run(&format!(
        "{MACHINE}[workload]\nduration = \"5s\"\n[[workload.task]]\nmempolicy = \"interleave:all\"\n\
         steps = [{{ mmap = \"a\", size = \"128MiB\" }}, {{ touch = \"a\" }}, {{ sleep = \"100ms\" }}]\n"
    ));
    let ev = numa_events(&r.proc_end["zoneinfo"]);
    let on0 = event(&ev, "0,", "hit") + event(&ev, "0,", "miss");
    let on1 = event(&ev, "1,", "hit") + event(&ev, "1,", "miss");
    // 32768 pages interleaved (plus the page tables, allocated like the pages).
    assert!(on0 >= 16384 && on1 >= 16384, "node 0 {on0}, node 1 {on1}");
    assert!(on0.abs_diff(on1) < 512, "node 0 {on0}, node 1 {on1}");
}

#[test]
fn a_node_without_cpus_cannot_host_a_bound_task() {
    let text = "[machine]\n[[machine.node]]\nmemory = \"1GiB\"\ncpus = 2\n[[machine.node]]\nmemory = \"1GiB\"\ncpus = 0\n\
                [workload]\n[[workload.task]]\nnuma_node = 1\nsteps = [{ sleep = \"1ms\" }]\n";
    let spec = parse_spec(text, "t.toml").unwrap();
    let e = fraglab_sim::timed::run_workload(&spec).unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.toml:9: key workload.task.numa_node: node 1 has no CPUs to run the tasks on"
    );
}

/// A value of one zone's block of /proc/zoneinfo ("pages free", "managed").
fn zone_value(zoneinfo: &str, zone: &str, item: &str) -> u64 {
    let block = zoneinfo.split("Node ").find(|b| b.starts_with(zone)).unwrap();
    let line = block.lines().find(|l| l.trim_start().starts_with(item)).unwrap();
    line.trim_start()[item.len()..].trim().parse().unwrap()
}

#[test]
fn a_node_filled_by_a_bound_task_is_reclaimed_by_its_kswapd_alone() {
    // A task bound to node 0 faults more than node 0 holds: node 0 is reclaimed (to swap, by
    // kswapd0: node 1 has nothing on its LRU lists to scan), node 1 is never touched.
    let r = run(
        "[machine]\nmemory = \"2GiB\"\ncpus = 4\nnodes = 2\ndma = false\nswap = \"1GiB\"\n\
         [run]\nseed = 3\n[workload]\nduration = \"5s\"\n[[workload.task]]\nnuma_node = 0\n\
         steps = [{ mmap = \"a\", size = \"1100MiB\" }, { touch = \"a\" }, { sleep = \"1s\" }]\n",
    );
    let zi = &r.proc_end["zoneinfo"];
    let ev = numa_events(zi);
    assert_eq!(
        event(&ev, "1,", "hit") + event(&ev, "1,", "miss"),
        0,
        "bind:0 stays on node 0"
    );
    let d = &r.vmstat_delta;
    assert!(d["pswpout"] > 0, "node 0 was reclaimed to swap: {d:?}");
    assert!(d["pgscan_kswapd"] > 0, "by kswapd: {d:?}");
    assert_eq!(
        zone_value(zi, "1, zone   Normal", "pages free"),
        zone_value(zi, "1, zone   Normal", "managed"),
        "node 1 untouched"
    );
}
