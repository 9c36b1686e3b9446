//! The vm-scalability generators (seed 000's published results): each case's defining behaviour,
//! run through `fraglab run`'s path (`run_workload`) on a small machine.

use fraglab_sim::timed::run_workload;
use fraglab_spec::result::RunResult;

fn run(case: &str, extra: &str) -> RunResult {
    let text = format!(
        "name = \"vmscal-{case}\"\n[machine]\nmemory = \"256MiB\"\ncpus = 2\n[run]\nseed = 3\n\
         [workload]\nduration = \"2s\"\n[[workload.vm_scalability]]\ncase = \"{case}\"\n\
         runtime = \"2s\"\n{extra}\n"
    );
    let spec = fraglab_spec::parse_spec(&text, "vmscal.toml").unwrap();
    run_workload(&spec).unwrap()
}

fn d(r: &RunResult, k: &str) -> i64 {
    r.vmstat_delta[k]
}

/// small-allocs maps the zero page on read faults: page tables and VMA slab, no data pages.
#[test]
fn small_allocs_faults_without_data_pages() {
    let r = run("small-allocs", "");
    let v = &r.vm_scalability[0];
    assert_eq!(v.processes, 2);
    assert!(v.throughput > 0.0 && v.bytes > 0);
    assert_eq!(
        d(&r, "pgfault") as u64,
        v.bytes / 4096,
        "one read fault per page touched"
    );
    assert_eq!(d(&r, "pgmajfault"), 0);
    let anon = d(&r, "nr_anon_pages");
    assert_eq!(anon, 0, "no anonymous data pages");
}

/// mmap-pread-seq reads a file 1.5 × memory through mmap: read-around and async readahead
/// bring the pages in ahead of the faults (few major faults), fault-around maps 16 pages per
/// fault, and every pass reclaims page cache.
#[test]
fn mmap_pread_seq_reads_ahead_and_reclaims() {
    let r = run("mmap-pread-seq", "");
    let v = &r.vm_scalability[0];
    let pages = v.bytes / 4096;
    assert!(
        pages > 65536 * 2,
        "more than the machine's memory was read: {pages}"
    );
    let faults = d(&r, "pgfault") as u64;
    assert!(
        faults * 8 < pages,
        "fault-around: {faults} faults for {pages} pages"
    );
    assert!(
        (d(&r, "pgmajfault") as u64) * 50 < faults,
        "readahead ahead of the faults: {} major of {faults}",
        d(&r, "pgmajfault")
    );
    assert!(d(&r, "pgsteal_kswapd") + d(&r, "pgsteal_direct") > 0);
}

/// lru-file-readtwice: two dd readers per file, so about half the reads hit pages the other
/// reader brought in; the files together are larger than memory (reclaim runs).
#[test]
fn lru_file_readtwice_two_readers_per_file() {
    let r = run("lru-file-readtwice", "size = \"128MiB\"");
    let v = &r.vm_scalability[0];
    assert_eq!(v.processes, 4);
    assert_eq!(
        v.bytes,
        (2 * 128) << 20,
        "each of the two readers reads its whole file once"
    );
    let r2 = run("lru-file-readtwice", "");
    assert!(d(&r2, "pgsteal_kswapd") + d(&r2, "pgsteal_direct") > 0);
    assert!(r2.vm_scalability[0].throughput > 0.0);
}

/// msync dirties every page of its mapping each pass and writes it back with msync: the
/// write faults (page_mkwrite after writeback write-protects) outnumber the passes' pages.
#[test]
fn msync_dirties_and_writes_back() {
    let r = run("msync", "size = \"8MiB\"");
    let v = &r.vm_scalability[0];
    // Timed passes of both processes together (the prefault passes are not counted).
    let passes = v.bytes / (8 << 20);
    assert!(passes >= 4, "{passes} timed passes");
    let faults = d(&r, "pgfault") as u64;
    assert!(
        faults >= (passes + 2) * 2048 && faults <= (passes + 4) * 2048,
        "a write fault per page per pass: {faults} faults, {passes} passes + 2 prefaults"
    );
    assert!(d(&r, "nr_dirty") <= 2 * 2048, "msync cleaned the mapping");
}

/// Same spec and seed: byte-identical results; the cases differ from each other.
#[test]
fn vm_scalability_is_deterministic() {
    let a = serde_json::to_string(&run("lru-file-mmap-read", "")).unwrap();
    let b = serde_json::to_string(&run("lru-file-mmap-read", "")).unwrap();
    assert_eq!(a, b);
}
