//! Issue 23's hostile specs (fuzz/corpus/spec_run/hostile-*.toml, also the fuzzer's seeds):
//! each is refused with one line naming the file, line, key and the real limit, or parses (the
//! run tests are crates/sim/tests/all/hostile.rs). Offsets past `MAX_LFS_FILESIZE`, op counts and
//! lengths past `WORK_FACTOR` times the machine, and `count` past `u32::MAX`.

use std::path::PathBuf;

use fraglab_spec::{load_spec, parse_spec, MAX_LFS_FILESIZE, WORK_FACTOR};

fn hostile(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus/spec_run")
        .join(format!("hostile-{name}.toml"))
}

/// The one-line error of hostile spec `name`: `FILE:line: key K: message`.
#[track_caller]
fn refused(name: &str, line: usize, key: &str) -> String {
    let path = hostile(name);
    let e = load_spec(&path).expect_err("a refusal");
    assert_eq!((e.line, e.key.as_deref()), (line, Some(key)), "{e}");
    let s = e.to_string();
    assert!(
        s.starts_with(&format!("{}:{line}: key {key}: ", path.display())),
        "{s}"
    );
    assert!(!s.contains('\n'));
    e.message
}

#[test]
fn the_kernel_bound_is_llong_max() {
    assert_eq!(MAX_LFS_FILESIZE, (1 << 63) - 1);
    assert_eq!(WORK_FACTOR, 16);
}

#[test]
fn offsets_the_page_cache_holds_parse() {
    for name in ["write-64tib", "read-1000tib", "task-random-64tib"] {
        load_spec(&hostile(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn a_write_at_the_largest_offset_is_refused() {
    let m = refused("write-at-max-lfs", 7, "op[0].offset");
    assert_eq!(
        m,
        "a write at byte 9223372036854775807 starts at or past the end of the largest file, \
         MAX_LFS_FILESIZE = 2^63 - 1 bytes (include/linux/fs.h), the largest file offset the \
         model supports"
    );
}

#[test]
fn a_write_ending_past_the_largest_offset_is_refused() {
    let m = refused("write-past-max-lfs", 8, "op[0].length");
    assert!(
        m.starts_with(
            "a write of 65536 bytes at byte 9223372036854771712 ends past MAX_LFS_FILESIZE = 2^63 - 1 bytes"
        ),
        "{m}"
    );
    assert!(m.ends_with("(at most 4095 bytes here)"), "{m}");
}

#[test]
fn a_file_size_past_the_largest_is_refused() {
    let m = refused(
        "task-file-size-past-max-lfs",
        9,
        "workload.task[0].steps[0].file_size",
    );
    assert_eq!(
        m,
        "9223372036854775808 bytes is past MAX_LFS_FILESIZE = 2^63 - 1 bytes (include/linux/fs.h), \
         the largest file the model supports"
    );
}

/// The largest write the bound allows, ending exactly at MAX_LFS_FILESIZE, parses.
#[test]
fn a_write_ending_at_the_largest_offset_parses() {
    let text = format!(
        "[machine]\nmemory = \"1GiB\"\n[[op]]\nwrite = \"f\"\noffset = {}\nlength = 4095\n",
        MAX_LFS_FILESIZE - 4095
    );
    parse_spec(&text, "s.toml").unwrap();
    let past = text.replace("length = 4095", "length = 4096");
    let e = parse_spec(&past, "s.toml").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (6, Some("op[0].length")));
}

#[test]
fn count_1e12_names_the_machine_limit() {
    let m = refused("count-1e12", 7, "op[0].count");
    assert_eq!(
        m,
        "1000000000000 allocations of order 0 is more than the machine can hold 16 times over \
         (65536 pages of memory and swap): past them every allocation fails after a full slow \
         path, minutes to hours of work with no new result (at most 1048576 here; a larger \
         machine takes more)"
    );
}

/// One of the three hangs: 4294967295 allocations on a 256 MiB machine ran for hours.
#[test]
fn count_u32_max_is_refused_on_a_small_machine() {
    let m = refused("count-4294967295", 7, "op[0].count");
    assert!(
        m.starts_with("4294967295 allocations of order 0 is more than"),
        "{m}"
    );
    assert!(m.contains("(at most 1048576 here;"), "{m}");
}

/// The bound is exact, scales with the order, swap and the machine, and a count past u32 is
/// refused with the u32 limit where the machine's size is not known.
#[test]
fn count_bound_scales_with_the_machine() {
    let op = |mem: &str, swap: &str, count: u64, order: u32| {
        format!(
            "[machine]\nmemory = \"{mem}\"\nswap = \"{swap}\"\n[[op]]\nalloc = \"a\"\ncount = {count}\norder = {order}\ngfp = \"GFP_KERNEL\"\n"
        )
    };
    assert!(parse_spec(&op("256MiB", "0", 1 << 20, 0), "s").is_ok());
    assert!(parse_spec(&op("256MiB", "0", (1 << 20) + 1, 0), "s").is_err());
    assert!(parse_spec(&op("256MiB", "0", 1 << 11, 9), "s").is_ok());
    let e = parse_spec(&op("256MiB", "0", (1 << 11) + 1, 9), "s").unwrap_err();
    assert!(e.message.contains("allocations of order 9"), "{e}");
    assert!(parse_spec(&op("256MiB", "256MiB", 1 << 21, 0), "s").is_ok());
    assert!(parse_spec(&op("1TiB", "0", u32::MAX as u64, 0), "s").is_ok());
    let e = parse_spec(&op("1TiB", "0", u32::MAX as u64 + 1, 0), "s").unwrap_err();
    assert_eq!(
        e.message,
        "4294967296 is out of range (expected >= 1, at most 4294967295)"
    );
}

/// A `fault` op's count has the same bound (at least a page per fault).
#[test]
fn fault_count_is_bounded() {
    let text = "[machine]\nmemory = \"256MiB\"\n[[op]]\nfault = \"t\"\ncount = 2000000\n";
    let e = parse_spec(text, "s.toml").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (5, Some("op[0].count")));
    assert!(
        e.message
            .starts_with("2000000 faults (each takes at least a page) is more than"),
        "{e}"
    );
}

/// One of the three hangs: a 1 TiB read on a 1 GiB machine (~13 min) is refused; the bound is
/// 16 GiB there, and a 1 TiB read on a 1 TiB machine parses.
#[test]
fn a_read_of_1tib_on_1gib_is_refused() {
    let m = refused("read-1tib-on-1gib", 8, "op[0].length");
    assert_eq!(
        m,
        "a read of 1099511627776 bytes is more than 16 times the machine's memory and swap \
         (1073741824 bytes): past them every page read evicts another, minutes to hours of \
         work with no new result (at most 17179869184 bytes here; a larger machine takes more)"
    );
    let ok = std::fs::read_to_string(hostile("read-1tib-on-1gib"))
        .unwrap()
        .replace("memory = \"1GiB\"", "memory = \"1TiB\"");
    parse_spec(&ok, "s.toml").unwrap();
}

/// An out-of-range value of a key whose range text does not say its end names the end.
#[test]
fn an_open_range_names_its_end() {
    let text = "[machine]\nmemory = \"256MiB\"\n[[op]]\nalloc = \"a\"\ngfp = \"GFP_KERNEL\"\n[[op]]\nfree = \"a\"\nevery = 10000000000\n";
    let e = parse_spec(text, "s.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "s.toml:8: key op[1].every: 10000000000 is out of range (expected >= 1, at most 4294967295)"
    );
}

/// A spec larger than 8 MiB (a 50 MB one needed 2.0 GB to parse) is refused before parsing,
/// at the line where the limit falls.
#[test]
fn a_spec_past_8mib_is_refused() {
    use fraglab_spec::MAX_SPEC_BYTES;
    assert_eq!(MAX_SPEC_BYTES, 8 << 20);
    // Lines of 16 bytes: byte 8 MiB is on line 2^19 + 1.
    let line = "# fifteen bytes\n";
    assert_eq!(line.len(), 16);
    let text = line.repeat((MAX_SPEC_BYTES / 16) + 1);
    let e = parse_spec(&text, "big.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "big.toml:524289: the spec is 8388624 bytes, more than the 8388608 (8 MiB) a spec may be: \
         parsing needs about 40 bytes of memory per byte (this line is where the limit falls)"
    );
    // Exactly 8 MiB is parsed (and found to lack a machine).
    let e = parse_spec(&line.repeat(MAX_SPEC_BYTES / 16), "ok.toml").unwrap_err();
    assert_eq!(e.key.as_deref(), Some("machine"), "{e}");
}

/// One of the three hangs: msync on 256 CPUs for 10 s is a legitimate run of minutes, accepted;
/// the command line shows its progress with an ETA measured as it runs (crates/cli/src/
/// progress.rs), not an up-front guess from CPUs × duration (which said "43–125 min" for a 44 s
/// run: issue 34).
#[test]
fn msync_on_256_cpus_is_accepted() {
    let spec = load_spec(&hostile("msync-256-cpus")).unwrap();
    assert_eq!(spec.machine.cpus, 256);
    assert!(spec.workload.is_some());
}
