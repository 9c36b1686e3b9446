//! The fio small-file generator (`[[workload.fio_smallfiles]]`, mmtests' thpchallenge).

use fraglab_sim::timed::run_workload;
use fraglab_spec::result::RunResult;

/// Two fio jobs writing 16 KiB files on a 256 MiB, 2-CPU machine for `duration`, in a ring of
/// `working_set`.
fn run_fio(duration: &str, working_set: &str) -> RunResult {
    let text = format!(
        "name = \"fio\"\n[machine]\nmemory = \"256MiB\"\ncpus = 2\n[workload]\nduration = \"{duration}\"\n\
         [[workload.fio_smallfiles]]\njobs = 2\nfile_size = \"16KiB\"\nworking_set = \"{working_set}\"\n"
    );
    run_workload(&fraglab_spec::parse_spec(&text, "fio.toml").unwrap()).unwrap()
}

/// Files are created and deleted in a ring: reclaimable slab grows to one dentry and inode per
/// file of the working set and no further, page cache is written and reclaimed, and the run
/// lasts the workload's duration.
#[test]
fn creates_and_deletes_small_files_in_a_ring() {
    let r = run_fio("6s", "64MiB");
    let d = &r.vmstat_delta;
    // 64 MiB / 16 KiB = 4096 files: 4096 dentries (21 per page) and inodes (28 per 8 pages).
    let slab = d["nr_slab_reclaimable"];
    let most = 4096 / 21 + 1 + (4096 / 28 + 1) * 8;
    assert!(
        slab > most as i64 / 2 && slab <= most as i64 + 16,
        "slab pages {slab}, at most {most}"
    );
    // nr_file_pages also counts the block device's page cache that the files' ext4 metadata
    // takes (docs/model §33.1 item 2: page cache like any other; the inode tables,
    // directory blocks, bitmaps and journal blocks, `sim_work`'s `bdev_pages_end`), which the
    // ring does not bound.
    let data = d["nr_file_pages"] - r.sim_work["bdev_pages_end"] as i64;
    assert!(r.sim_work["bdev_pages_end"] > 0);
    assert!(
        data <= 64 * 256 + 256,
        "the ring bounds the files' page cache: {data}"
    );
    assert!(r.duration_ns >= 6_000_000_000);
}

/// Under memory pressure the closed files' dentries and inodes go to the slab shrinker
/// (`SlabCache::shrinkable`): reclaim scans slab, frees slab pages in reclaimable pageblocks
/// before fio deletes the files, and the reclaimable slab stays under a full ring's.
#[test]
fn shrinker_frees_closed_files_dentries_and_inodes_under_pressure() {
    let r = run_fio("8s", "1GiB");
    let d = &r.vmstat_delta;
    assert!(d["slabs_scanned"] > 0, "the shrinker never ran");
    // 1 GiB / 16 KiB = 65,536 files: a full ring's dentries and inodes would take this many.
    let full = 65_536 / 21 + (65_536 / 28) * 8;
    assert!(
        d["nr_slab_reclaimable"] < full / 2,
        "reclaimable slab {} pages, a full ring {full}",
        d["nr_slab_reclaimable"]
    );
    // The shrinker's holes: free memory in reclaimable pageblocks at some sample.
    let most = r.samples.iter().map(|s| s.free_by_type[2]).max().unwrap();
    assert!(most > 0, "no free page ever sat in a reclaimable pageblock");
}
