//! Issue 23's aborting specs (fuzz/corpus/spec_run/hostile-*.toml) run, in little memory: the
//! page cache is indexed by the pages cached, not by file offsets (mm's `xarray.rs`), so a
//! write at 64 TiB, a read at 1000 TiB, a random reader of a 64 TiB file and reads and writes
//! at the largest offset the model supports (`MAX_LFS_FILESIZE`) run. The refusals are
//! crates/spec/tests/bounds.rs.

use std::path::PathBuf;

use fraglab_spec::{load_spec, parse_spec, MAX_LFS_FILESIZE};

fn hostile(name: &str) -> fraglab_spec::Spec {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/spec_run")
        .join(format!("hostile-{name}.toml"));
    load_spec(&p).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_write_at_64tib_runs() {
    let out = fraglab_sim::run_ops(&hostile("write-64tib")).unwrap();
    assert!(
        out.contains(
            "# op[0] write f: 65536 bytes at 70368744177664: 0 pages cached, folios added 1 x order 4;"
        ),
        "{out}"
    );
}

#[test]
fn a_read_at_1000tib_runs() {
    let out = fraglab_sim::run_ops(&hostile("read-1000tib")).unwrap();
    assert!(
        out.contains("# op[0] read f: 65536 bytes at 1099511627776000: 0 pages cached, 16 read;"),
        "{out}"
    );
}

#[test]
fn a_random_reader_of_a_64tib_file_runs() {
    let mut spec = hostile("task-random-64tib");
    spec.workload.as_mut().unwrap().duration_ns = 500_000_000;
    let r = fraglab_sim::timed::run_workload(&spec).unwrap();
    let added = r.vmstat_delta.get("nr_file_pages").copied().unwrap_or(0);
    assert!(added > 0, "the reader cached pages: {:?}", r.vmstat_delta);
}

/// Reads and writes ending exactly at MAX_LFS_FILESIZE (page index 2^51 - 1), with the file's
/// size at the limit: readahead stops at the end of the file, no index overflows.
#[test]
fn the_last_bytes_of_the_largest_file() {
    let off = MAX_LFS_FILESIZE - 65535;
    let text = format!(
        "[machine]\nmemory = \"256MiB\"\n\
         [[op]]\nwrite = \"w\"\noffset = {off}\nlength = 65535\n\
         [[op]]\nread = \"r\"\noffset = {off}\nlength = 65535\nfile_size = {MAX_LFS_FILESIZE}\n\
         [[op]]\nread = \"r\"\noffset = 0\nlength = 4096\nfile_size = {MAX_LFS_FILESIZE}\n\
         [run]\ndebug_vm = true\n"
    );
    let spec = parse_spec(&text, "s.toml").unwrap();
    let out = fraglab_sim::run_ops(&spec).unwrap();
    assert!(
        out.contains(&format!("# op[0] write w: 65535 bytes at {off}:")),
        "{out}"
    );
    assert!(
        out.contains(&format!("# op[1] read r: 65535 bytes at {off}:")),
        "{out}"
    );
}
