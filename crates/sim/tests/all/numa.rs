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

/// A two-node snapshot (issue 35 item 2): node 0 one Normal zone of 8 blocks, four of them
/// anonymous pages; node 1 one Normal zone of 8 blocks, the first of them kernel pages
/// (Unmovable). The /proc reads are per node, as the kernel prints them.
fn two_node_snapshot(path: &std::path::Path) {
    use fraglab_state::page::PageClass;
    use fraglab_state::snapshot::{Snapshot, SnapshotHeader, ZoneSpan};
    let n = 4096u64;
    let mut pages = vec![PageClass::Free as u8; 2 * n as usize];
    pages[..2048].fill(PageClass::Anon as u8);
    pages[4096..4608].fill(PageClass::Kernel as u8);
    let order_head = "Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \n";
    let blocks_head =
        "Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n";
    let pti = format!(
        "Page block order: 9\nPages per block:  512\n\n{order_head}\
         Node    0, zone   Normal, type      Movable      0      0      0      0      0      0      0      0      0      0      2 \n\
         Node    1, zone   Normal, type      Movable      0      0      0      0      0      0      0      0      0      1      3 \n\n\
         {blocks_head}\
         Node 0, zone   Normal            0            8            0            0            0 \n\
         Node 1, zone   Normal            1            7            0            0            0 \n"
    );
    let buddy = "Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      0      2 \n\
                 Node 1, zone   Normal      0      0      0      0      0      0      0      0      0      1      3 \n";
    let proc: std::collections::BTreeMap<String, String> = [
        ("pagetypeinfo".to_string(), pti),
        ("buddyinfo".to_string(), buddy.to_string()),
    ]
    .into();
    let zone = |node: u32, start_pfn: u64| ZoneSpan {
        node,
        name: "Normal".into(),
        start_pfn,
        spanned: n,
        present: n,
        managed: n,
        ..Default::default()
    };
    Snapshot {
        header: SnapshotHeader {
            nr_cpus: 4,
            node_cpus: vec![1, 3],
            end_pfn: 2 * n,
            ram_ranges: vec![[0, 2 * n]],
            zones: vec![zone(0, 0), zone(1, n)],
            proc_before: proc.clone(),
            proc_after: proc,
            ..Default::default()
        },
        pages,
        dirty: Vec::new(),
    }
    .write(path)
    .unwrap();
}

#[test]
fn a_two_node_snapshot_boots_with_its_nodes() {
    use fraglab_mm::vmstat::{render_buddyinfo, render_pagetypeinfo};
    let d = std::env::temp_dir().join(format!("fraglab-numa-snap-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    two_node_snapshot(&d.join("two.fsnap"));
    let spec_path = d.join("spec.toml");
    let spec = |extra: &str| {
        parse_spec(
            &format!("[machine]\nsnapshot = \"two.fsnap\"\n{extra}"),
            spec_path.to_str().unwrap(),
        )
        .unwrap()
    };
    let mm = fraglab_sim::boot(&spec("")).unwrap();
    assert_eq!(mm.numa.nr_nodes, 2);
    // The CPUs as the snapshot recorded them: one on node 0, three on node 1.
    let cpus: Vec<u32> = (0..4).map(|c| mm.numa.cpu_to_node(c)).collect();
    assert_eq!(cpus, [0, 1, 1, 1]);
    // Each node's free lists and block types are the captured ones: node 1's Unmovable block
    // stays on node 1 (tables summed by zone name would have given node 0 one too).
    let buddy = mm.render_per_node(render_buddyinfo);
    assert!(
        buddy.contains("Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      0      2")
            && buddy.contains("Node 1, zone   Normal      0      0      0      0      0      0      0      0      0      1      3"),
        "{buddy}"
    );
    let pti = mm.render_per_node(render_pagetypeinfo);
    let blocks: Vec<&str> = pti
        .lines()
        .filter(|l| l.starts_with("Node") && !l.contains("type"))
        .collect();
    assert_eq!(blocks.len(), 2, "{pti}");
    assert_eq!(
        blocks[0].split_whitespace().skip(4).take(2).collect::<Vec<_>>(),
        ["0", "8"],
        "{pti}"
    );
    assert_eq!(
        blocks[1].split_whitespace().skip(4).take(2).collect::<Vec<_>>(),
        ["1", "7"],
        "{pti}"
    );
    // A spec that asks for another CPU count gets them spread over the nodes.
    let mm = fraglab_sim::boot(&spec("cpus = 5\n")).unwrap();
    let cpus: Vec<u32> = (0..5).map(|c| mm.numa.cpu_to_node(c)).collect();
    assert_eq!(cpus, [0, 0, 0, 1, 1]);
    // A task bound to node 1 runs there from the snapshot's state.
    let r = fraglab_sim::timed::run_workload(&spec(
        "[run]\nseed = 1\ndebug_vm = true\n[workload]\nduration = \"2s\"\n[[workload.task]]\nnuma_node = 1\n\
         steps = [{ mmap = \"a\", size = \"4MiB\" }, { touch = \"a\" }, { sleep = \"10ms\" }]\n",
    ))
    .unwrap();
    let ev = numa_events(&r.proc_end["zoneinfo"]);
    assert!(event(&ev, "1, zone   Normal", "hit") >= 1024, "{ev:?}");
    // A node the snapshot's machine does not have is refused when it boots, naming the line.
    let e = fraglab_sim::timed::run_workload(&spec(
        "[workload]\nduration = \"1s\"\n[[workload.task]]\nmempolicy = \"bind:0,2\"\n\
         steps = [{ sleep = \"10ms\" }]\n",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("spec.toml:5: workload.task: mempolicy names node 2: the machine has 2 node(s)"),
        "{e}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
