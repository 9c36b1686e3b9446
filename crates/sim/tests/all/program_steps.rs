//! Issue 19 item 3: the task steps `free`, `files` and `fadvise`, and `[machine] read_ahead_kb`,
//! run by the timed engine.

use fraglab_spec::parse_spec;
use fraglab_spec::result::RunResult;

/// Runs a one-task workload of `steps` on a 512 MiB machine (`machine` adds [machine] keys),
/// stopped at 1 s: a final long sleep keeps what the task holds in the result's deltas. The
/// files' ext4 metadata (docs/model §33: block-device page cache and its buffer heads,
/// tests/bdev.rs) is off, so that the deltas are the steps' own pages;
/// `files_and_slab_steps_with_their_metadata` runs with it.
fn run(machine: &str, steps: &str) -> RunResult {
    run_with(machine, "fs_metadata = \"off\"", steps)
}

fn run_with(machine: &str, model: &str, steps: &str) -> RunResult {
    let text = format!(
        "[machine]\nmemory = \"512MiB\"\ncpus = 2\n{machine}\n[model]\n{model}\n[workload]\nduration = \"1s\"\n\
         [[workload.task]]\nname = \"t\"\nsteps = [{steps}, {{ sleep = \"10s\" }}]\n"
    );
    fraglab_sim::timed::run_workload(&parse_spec(&text, "t.toml").unwrap()).unwrap()
}

/// With the ext4 metadata on (the default, §33), the same steps also make block-device page
/// cache (counted in nr_file_pages) and its buffer heads (reclaimable slab): 100 files of
/// 64 KiB on top of their 1600 data pages, 3000 empty files behind `slab = 1000`.
#[test]
fn files_and_slab_steps_with_their_metadata() {
    let set = "files = \"s\", count = 100, size = \"64KiB\"";
    let r = run_with("", "", &format!("{{ {set}, op = \"create\" }}"));
    let bdev = r.sim_work["bdev_pages_end"] as i64;
    let files = delta(&r, "nr_file_pages");
    assert!(
        files > 1600 && files <= 1600 + bdev,
        "{files} file pages, {bdev} bdev"
    );
    let r = run_with("", "", "{ slab = 1000 }");
    // 3000 inodes: 188 inode-table blocks, and the directory's blocks.
    assert!(r.sim_work["bdev_alloc_movable"] >= 188);
    assert!(r.sim_work["bdev_alloc_unmovable"] >= 1);
    assert!(delta(&r, "nr_slab_reclaimable") > 1000);
}

fn delta(r: &RunResult, k: &str) -> i64 {
    *r.vmstat_delta
        .get(k)
        .unwrap_or_else(|| panic!("no {k} in the delta"))
}

/// `free = "slab"`: every Nth reclaimable slab object (a page, as `slab` models them) is freed
/// now, the others stay held.
#[test]
fn free_every_nth_slab_object() {
    let held = run("", "{ slab = 1000 }");
    let half = run("", "{ slab = 1000 }, { free = \"slab\" }");
    let quarter = run("", "{ slab = 1000 }, { free = \"slab\", every = 4 }");
    let twice = run("", "{ slab = 1000 }, { free = \"slab\" }, { free = \"slab\" }");
    assert_eq!(delta(&held, "nr_slab_reclaimable"), 1000);
    assert_eq!(delta(&half, "nr_slab_reclaimable"), 500);
    assert_eq!(delta(&quarter, "nr_slab_reclaimable"), 750);
    // The second free takes every 2nd of the 500 left.
    assert_eq!(delta(&twice, "nr_slab_reclaimable"), 250);
    // Freed now (to the PCP lists: pgfree counts them, nr_free_pages not yet).
    assert_eq!(delta(&half, "pgfree") - delta(&held, "pgfree"), 500);
}

/// `free = "pipes"`: whole pipes (256 pages each, as the host fills them) go, every Nth; the
/// slab objects of the same task are untouched.
#[test]
fn free_every_nth_pipe() {
    let held = run("", "{ pipes = 1024 }, { slab = 10 }");
    let freed = run("", "{ pipes = 1024 }, { slab = 10 }, { free = \"pipes\" }");
    assert_eq!(delta(&freed, "pgfree") - delta(&held, "pgfree"), 512);
    assert_eq!(delta(&freed, "nr_slab_reclaimable"), 10);
}

/// `files`: create writes each file (dirty page cache, a dentry and an inode per file in
/// reclaimable slab), read reads each whole (from the device after drop_caches), delete frees
/// the page cache and the dentries and inodes.
#[test]
fn files_create_read_delete() {
    let set = "files = \"s\", count = 100, size = \"64KiB\"";
    let created = run("", &format!("{{ {set}, op = \"create\" }}"));
    assert_eq!(delta(&created, "nr_file_pages"), 1600);
    assert_eq!(delta(&created, "nr_dirty"), 1600);
    // 100 dentries (21 a page) and 100 inodes (28 per order-3 slab).
    assert_eq!(delta(&created, "nr_slab_reclaimable"), 5 + 4 * 8);
    let read = run(
        "",
        &format!("{{ {set}, op = \"create\" }}, {{ drop_caches = true }}, {{ {set}, op = \"read\", pattern = \"random\" }}"),
    );
    assert_eq!(delta(&read, "nr_file_pages"), 1600);
    assert_eq!(delta(&read, "nr_dirty"), 1600, "drop_caches leaves dirty pages");
    let cold = run("", &format!("{{ {set}, op = \"read\" }}"));
    assert_eq!(delta(&cold, "pgpgin"), 6400, "every file read from the device");
    assert_eq!(delta(&cold, "nr_file_pages"), 1600);
    let deleted = run(
        "",
        &format!("{{ {set}, op = \"create\" }}, {{ {set}, op = \"delete\" }}"),
    );
    assert_eq!(delta(&deleted, "nr_file_pages"), 0);
    assert_eq!(delta(&deleted, "nr_dirty"), 0);
    assert_eq!(
        delta(&deleted, "nr_slab_reclaimable"),
        0,
        "dentries and inodes freed"
    );
}

/// `mapping` per file set (docs/model §23.5, §23.7): with read_ahead_kb 8192 a 64 MiB
/// file read whole reaches order-9 folios in a large-folio mapping, none in a
/// no_large_folios one.
#[test]
fn files_mapping_kind() {
    let read = |kind: &str| {
        let r = run(
            "read_ahead_kb = 8192",
            &format!("{{ files = \"s\", count = 2, size = \"64MiB\", op = \"read\", mapping = \"{kind}\" }}"),
        );
        assert_eq!(delta(&r, "nr_file_pages"), 2 * 16384);
        delta(&r, "nr_file_hugepages")
    };
    assert!(read("large_folios") > 0);
    assert_eq!(read("no_large_folios"), 0);
}

/// docs/model §23.6 (generic_fadvise) and §23.3: RANDOM makes a 1-page miss read just
/// that page (FMODE_RANDOM), where a normal file reads a 4-page initial window; SEQUENTIAL
/// doubles ra_pages (a 64-page read from the start: a 64-page window whose marker at page 32
/// brings a second 64 — 128 pages — where ra_pages 32 gives 32 + 32 + 32), NORMAL restores it.
#[test]
fn s23_6_fadvise_random_sequential_normal() {
    let read = |advice: &str, len: &str| {
        let steps = format!("{advice}{{ read = \"d\", length = \"{len}\", file_size = \"16MiB\" }}");
        delta(&run("", &steps), "pgpgin")
    };
    assert_eq!(read("", "4KiB"), 16);
    assert_eq!(read("{ fadvise = \"d\", advice = \"random\" }, ", "4KiB"), 4);
    assert_eq!(read("", "256KiB"), 384);
    assert_eq!(
        read("{ fadvise = \"d\", advice = \"sequential\" }, ", "256KiB"),
        512
    );
    assert_eq!(read("{ fadvise = \"d\", advice = \"random\" }, ", "256KiB"), 256);
    assert_eq!(
        read(
            "{ fadvise = \"d\", advice = \"sequential\" }, { fadvise = \"d\", advice = \"normal\" }, ",
            "256KiB"
        ),
        384
    );
}

/// §23.6: WILLNEED reads the range at order 0, capped at ra_pages (32: 128 KiB of a 1 MiB
/// file); DONTNEED drops the clean page cache of the range and starts the writeback of dirty
/// pages, which stay.
#[test]
fn s23_6_fadvise_willneed_dontneed() {
    let w = run("", "{ read = \"d\", length = 4096, file_size = \"1MiB\" }, { fadvise = \"d\", advice = \"dontneed\" }, { fadvise = \"d\", advice = \"willneed\" }");
    assert_eq!(delta(&w, "nr_file_pages"), 32);
    assert_eq!(delta(&w, "pgpgin"), 16 + 128);
    let d = run("", "{ read = \"d\", length = \"1MiB\", file_size = \"1MiB\" }, { fadvise = \"d\", advice = \"dontneed\" }");
    assert_eq!(delta(&d, "nr_file_pages"), 0);
    let part = run("", "{ read = \"d\", length = \"1MiB\", file_size = \"1MiB\", mapping = \"no_large_folios\" }, { fadvise = \"d\", advice = \"dontneed\", offset = 2048, length = 16384 }");
    // Pages wholly in [2 KiB, 18 KiB): 1, 2 and 3.
    assert_eq!(delta(&part, "nr_file_pages"), 256 - 3);
    let dirty = run(
        "",
        "{ write = \"d\", length = \"1MiB\" }, { fadvise = \"d\", advice = \"dontneed\" }",
    );
    // Dirty pages: the first DONTNEED starts (here: completes) their writeback and leaves them,
    // clean, as the kernel's are still under writeback when it invalidates; a second drops them.
    assert_eq!(delta(&dirty, "nr_file_pages"), 256, "under writeback");
    assert_eq!(delta(&dirty, "nr_dirty"), 0, "writeback started");
    let twice = run(
        "",
        "{ write = \"d\", length = \"1MiB\" }, { fadvise = \"d\", advice = \"dontneed\" }, { fadvise = \"d\", advice = \"dontneed\" }",
    );
    assert_eq!(delta(&twice, "nr_file_pages"), 0);
}

/// docs/model §23.1: read_ahead_kb is every file's ra_pages: a 128 KiB read at the start
/// of a file gets a 32-page window whose marker (page 16) brings the next 32 with the default
/// 128, and a 128-page window (init(32, 2048), marker at page 32) with 8192; 128 given
/// explicitly is the default.
#[test]
fn s23_1_read_ahead_kb_sets_the_window() {
    let steps = "{ read = \"d\", length = \"128KiB\", file_size = \"16MiB\" }";
    assert_eq!(delta(&run("", steps), "pgpgin"), 256);
    assert_eq!(delta(&run("read_ahead_kb = 128", steps), "pgpgin"), 256);
    assert_eq!(delta(&run("read_ahead_kb = 8192", steps), "pgpgin"), 512);
    // No readahead: the pages asked for.
    assert_eq!(delta(&run("read_ahead_kb = 0", steps), "pgpgin"), 128);
    assert_eq!(
        delta(
            &run(
                "read_ahead_kb = 0",
                "{ read = \"d\", length = 4096, file_size = \"16MiB\" }"
            ),
            "pgpgin"
        ),
        4
    );
}

/// `background = true`: the run ends when the other tasks are done (mmtests' thpchallenge
/// stops its fio readers when the THP faults are done); the background task is stopped then.
#[test]
fn background_tasks_end_with_the_others() {
    let text = r#"
[machine]
memory = "512MiB"
cpus = 2
[workload]
duration = "60s"
[[workload.task]]
name = "reader"
background = true
loops = 1000
steps = [{ compute = "100ms" }]
[[workload.task]]
name = "main"
steps = [{ compute = "2s" }]
"#;
    let r = fraglab_sim::timed::run_workload(&parse_spec(text, "t.toml").unwrap()).unwrap();
    assert!(
        (2_000_000_000..2_500_000_000).contains(&r.duration_ns),
        "ends with main, not at 60 s: {}",
        r.duration_ns
    );
    // Without it the reader's 100 s of loops run to the cap.
    let r = fraglab_sim::timed::run_workload(
        &parse_spec(&text.replace("background = true\n", ""), "t.toml").unwrap(),
    )
    .unwrap();
    assert_eq!(r.duration_ns, 60_000_000_000);
}

/// Issue 33: `{ free = "pipes", every_page = N }` frees single pipe pages, those whose place in
/// the task's pipe population is a multiple of N (from 1, in allocation order), pages freed
/// before keeping their place.
#[test]
fn free_every_nth_pipe_page() {
    let held = run("", "{ pipes = 1000 }, { slab = 10 }");
    let freed = |steps: &str| delta(&run("", steps), "pgfree") - delta(&held, "pgfree");
    assert_eq!(
        freed("{ pipes = 1000 }, { slab = 10 }, { free = \"pipes\", every_page = 3 }"),
        333
    );
    assert_eq!(
        freed("{ pipes = 1000 }, { slab = 10 }, { free = \"pipes\", every_page = 1 }"),
        1000
    );
    // Every 2nd, then every 3rd by place: |{k ≤ 1000: 2 | k or 3 | k}| = 500 + 333 - 166.
    assert_eq!(
        freed("{ pipes = 1000 }, { slab = 10 }, { free = \"pipes\", every_page = 2 }, { free = \"pipes\", every_page = 3 }"),
        667
    );
    // The same step twice frees nothing the second time.
    assert_eq!(
        freed("{ pipes = 1000 }, { slab = 10 }, { free = \"pipes\", every_page = 4 }, { free = \"pipes\", every_page = 4 }"),
        250
    );
    // Places continue over pipes steps: pages 501..1000 are the second step's.
    assert_eq!(
        freed("{ pipes = 500 }, { free = \"pipes\", every_page = 2 }, { pipes = 500 }, { slab = 10 }, { free = \"pipes\", every_page = 2 }"),
        500
    );
    // The slab objects are untouched.
    let r = run(
        "",
        "{ pipes = 1000 }, { slab = 10 }, { free = \"pipes\", every_page = 2 }",
    );
    assert_eq!(delta(&r, "nr_slab_reclaimable"), 10);
}

/// Issue 33: freeing every other pipe page scatters free order-0 pages through the pipes'
/// memory, where freeing every other whole pipe gives back 256-page runs: the named sample
/// after the free shows it (the same number of pages freed). 128 MiB of pipes, half freed: more
/// than the per-CPU list holds (high_max = managed / 8 / CPUs, §2.2: 8192 pages here), so the
/// rest reaches the buddy allocator.
#[test]
fn every_page_frees_scatter_where_whole_pipes_do_not() {
    let at_freed = |free: &str| {
        let r = run(
            "",
            &format!("{{ pipes = 32768 }}, {{ sample = \"built\" }}, {{ free = \"pipes\", {free} }}, {{ sample = \"freed\" }}"),
        );
        let o0 = |name: &str| {
            r.named_samples
                .iter()
                .find(|s| s.name == name)
                .unwrap()
                .sample
                .free_by_order[0]
        };
        (delta(&r, "pgfree"), o0("freed") - o0("built"))
    };
    let (whole_freed, whole_o0) = at_freed("every = 2");
    let (page_freed, page_o0) = at_freed("every_page = 2");
    assert_eq!(whole_freed, page_freed);
    assert!(
        page_o0 > 4096 && whole_o0 < 64,
        "order-0 free pages gained: page frees {page_o0}, whole pipes {whole_o0}"
    );
}

/// Issue 33: `files` with `op = "delete"` and `every = N` deletes files N-1, 2N-1, ... of the
/// set: every 4th, then every 2nd deletes 25 + 25 (files 3, 7, ... are already gone), in
/// order or in a random order.
#[test]
fn files_delete_every_nth() {
    let set = "files = \"s\", count = 100, size = \"64KiB\"";
    for pattern in ["sequential", "random"] {
        let r = run(
            "",
            &format!("{{ {set}, op = \"create\" }}, {{ {set}, op = \"delete\", every = 4, pattern = \"{pattern}\" }}"),
        );
        assert_eq!(delta(&r, "nr_file_pages"), 75 * 16, "{pattern}");
        let r = run(
            "",
            &format!(
                "{{ {set}, op = \"create\" }}, {{ {set}, op = \"delete\", every = 4, pattern = \"{pattern}\" }}, \
                 {{ {set}, op = \"delete\", every = 2 }}"
            ),
        );
        assert_eq!(delta(&r, "nr_file_pages"), 50 * 16, "{pattern}");
        // The 50 files left are spread over every dentry page (21 a page) and inode slab (28
        // per order-3 slab): a slab page is freed only when all its objects are, so none is.
        assert_eq!(delta(&r, "nr_slab_reclaimable"), 5 + 4 * 8, "{pattern}");
    }
    // Deleted files read back from the device, the others from the cache.
    let r = run(
        "",
        &format!("{{ {set}, op = \"create\" }}, {{ {set}, op = \"delete\", every = 5 }}, {{ {set}, op = \"read\" }}"),
    );
    assert_eq!(delta(&r, "pgpgin"), 20 * 64);
}

/// Issue 33: `{ sample = "NAME" }` records a sample with that name where the program reaches
/// it, with the pageblock census of each zone; the rows `census.NAME.ZONE.CLASS` read the last
/// sample of each name; the run is deterministic.
#[test]
fn named_samples_with_zone_census() {
    use fraglab_spec::result::pageblock::BlockClass;
    use fraglab_spec::result::rows::{named_census_row, named_census_rows};
    let steps = "{ sample = \"start\" }, { mmap = \"a\", size = \"64MiB\" }, { touch = \"a\" }, \
                 { pipes = 4096 }, { sample = \"built\" }, { compute = \"1ms\" }, { munmap = \"a\" }, \
                 { sample = \"built\" }";
    let r = run("", steps);
    let names: Vec<&str> = r.named_samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["start", "built", "built"]);
    assert!(r
        .named_samples
        .windows(2)
        .all(|w| w[0].sample.t_ns <= w[1].sample.t_ns));
    assert!(
        r.named_samples[2].sample.t_ns >= 1_000_000,
        "taken after the compute step"
    );
    for s in &r.named_samples {
        assert_eq!(s.task, "t");
        // The zones are pagetypeinfo's, their blocks and mixed blocks the sample's.
        let zones: Vec<&str> = s.zones.iter().map(|z| z.zone.as_str()).collect();
        assert_eq!(zones, ["DMA", "DMA32"]);
        for t in 0..5 {
            let sum: u64 = s.zones.iter().map(|z| z.blocks_by_type[t]).sum();
            assert_eq!(sum, s.sample.blocks_by_type[t]);
        }
        let mixed: u64 = s.zones.iter().map(|z| z.mixed_blocks.unwrap()).sum();
        assert_eq!(mixed, s.sample.mixed_blocks);
        // Wholly free blocks are free pages in chunks of order 9 and 10.
        let free: u64 = s.zones.iter().map(|z| z.free_blocks()).sum();
        assert_eq!(
            free,
            s.sample.free_by_order[9] / 512 + s.sample.free_by_order[10] / 512
        );
        // free + the types' blocks in use (+ HighAtomic and Isolate) = every block.
        for z in &s.zones {
            let classes: u64 = [
                BlockClass::Free,
                BlockClass::Unmovable,
                BlockClass::Movable,
                BlockClass::Reclaimable,
            ]
            .iter()
            .map(|c| z.class(*c).unwrap())
            .sum::<u64>()
                + (z.blocks_by_type[3] - z.free_blocks_by_type[3])
                + (z.blocks_by_type[4] - z.free_blocks_by_type[4]);
            assert_eq!(classes, z.blocks_by_type.iter().sum::<u64>());
        }
    }
    // 64 MiB of anon and 16 MiB of pipes took blocks: fewer wholly free ones when built.
    let free_at = |i: usize| -> u64 { r.named_samples[i].zones.iter().map(|z| z.free_blocks()).sum() };
    assert!(
        free_at(1) + 32 <= free_at(0),
        "{} then {}",
        free_at(0),
        free_at(1)
    );
    // The unmapped anon came back: the last "built" has more wholly free blocks.
    assert!(free_at(2) > free_at(1));
    // Rows: the last sample of each name, every zone and class.
    let rows = named_census_rows(&r);
    assert_eq!(rows.len(), 2 * 2 * 5);
    let row = |name: &str| rows.iter().find(|(n, _)| n == name).unwrap().1.clone().unwrap();
    let last = &r.named_samples[2].zones[1];
    assert_eq!(
        row(&named_census_row("built", "DMA32", BlockClass::Free)),
        last.free_blocks() as f64
    );
    assert_eq!(row("census.built.DMA32.mixed"), last.mixed_blocks.unwrap() as f64);
    assert_eq!(
        row("census.start.DMA32.unmovable"),
        r.named_samples[0].zones[1].class(BlockClass::Unmovable).unwrap() as f64
    );
    // compare's samples and validate's rows have them.
    let s = fraglab_spec::result::rows::samples_of(std::slice::from_ref(&r));
    assert_eq!(
        fraglab_spec::result::rows::values(&s, "census.built.DMA32.free"),
        &[last.free_blocks() as f64]
    );
    let scored = fraglab_spec::result::scoreboard::score(std::slice::from_ref(&r), std::slice::from_ref(&r));
    let sc = scored
        .iter()
        .find(|x| x.row == "census.built.DMA32.movable")
        .unwrap();
    assert_eq!(sc.class, fraglab_spec::result::scoreboard::Class::Census);
    assert_eq!(sc.verdict, fraglab_spec::result::scoreboard::Verdict::Pass);
    // Deterministic, and a spec without the step has no named_samples in its JSON.
    let json = serde_json::to_string(&r).unwrap();
    assert_eq!(json, serde_json::to_string(&run("", steps)).unwrap());
    assert!(!serde_json::to_string(&run("", "{ pipes = 10 }"))
        .unwrap()
        .contains("named_samples"));
}

/// Issue 33: the new steps in a run with several instances and loops are deterministic.
#[test]
fn issue33_steps_are_deterministic() {
    let text = "[machine]\nmemory = \"512MiB\"\ncpus = 2\n[workload]\nduration = \"1s\"\n\
         [[workload.task]]\nname = \"t\"\ncount = 3\nloops = 2\nsteps = [\
         { pipes = 300 }, { free = \"pipes\", every_page = 3 }, \
         { files = \"s\", count = 40, size = \"16KiB\", op = \"create\" }, \
         { files = \"s\", count = 40, op = \"delete\", every = 3, pattern = \"random\" }, \
         { sample = \"x\" }]\n";
    let s = parse_spec(text, "t.toml").unwrap();
    let a = serde_json::to_string(&fraglab_sim::timed::run_workload(&s).unwrap()).unwrap();
    let b = serde_json::to_string(&fraglab_sim::timed::run_workload(&s).unwrap()).unwrap();
    assert_eq!(a, b);
    let r: RunResult = serde_json::from_str(&a).unwrap();
    assert_eq!(r.named_samples.len(), 6, "3 instances x 2 loops");
}
