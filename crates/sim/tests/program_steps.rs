//! Issue 19 item 3: the task steps `free`, `files` and `fadvise`, and `[machine] read_ahead_kb`,
//! run by the timed engine.

use fraglab_spec::parse_spec;
use fraglab_spec::result::RunResult;

/// Runs a one-task workload of `steps` on a 512 MiB machine (`machine` adds [machine] keys),
/// stopped at 1 s: a final long sleep keeps what the task holds in the result's deltas. The
/// files' ext4 metadata (kernel-model.md §33: block-device page cache and its buffer heads,
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

/// `mapping` per file set (kernel-model.md §23.5, §23.7): with read_ahead_kb 8192 a 64 MiB
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

/// kernel-model.md §23.6 (generic_fadvise) and §23.3: RANDOM makes a 1-page miss read just
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

/// kernel-model.md §23.1: read_ahead_kb is every file's ra_pages: a 128 KiB read at the start
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
