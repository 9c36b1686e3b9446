//! The page-cache census (issue 19 item 1): `Mm::filemap_census` and the `census` task step,
//! whose figures the host reads through /proc/kpageflags (docs/model §30.2). The folio
//! sizes themselves follow readahead (§12.2) and the mapping's folio orders (§12.1).

use fraglab_mm::filemap::{Mapping, ReadaheadState};
use fraglab_sim::boot::boot;

fn mm() -> fraglab_mm::Mm {
    let spec = fraglab_spec::parse_spec(
        "[machine]\nmemory = \"1GiB\"\n[[op]]\ncompact_memory = true\n",
        "c.toml",
    )
    .unwrap();
    boot(&spec).unwrap()
}

/// A cold sequential read of 64 MiB through a mapping, 1 MiB at a time; its census.
fn read_cold(m: Mapping) -> ([u64; 11], [u64; 11]) {
    let mut mm = mm();
    let id = mm.add_mapping(m);
    let mut ra = ReadaheadState::default();
    let pages = 64 << 8;
    for first in (0..pages).step_by(256) {
        mm.filemap_read(0, id, &mut ra, first, 256, pages);
    }
    let (p, f) = mm.filemap_census(id);
    assert!(p.iter().sum::<u64>() >= pages, "every page read is cached: {p:?}");
    for o in 0..11 {
        assert_eq!(p[o], f[o] << o, "order {o}: pages = folios x 2^order");
    }
    (p, f)
}

/// §12.1–§12.2: with large folios a cold sequential read grows its readahead folios beyond
/// order 0; without them every folio is order 0.
#[test]
fn s12_2_census_of_a_cold_sequential_read() {
    let (large, _) = read_cold(Mapping::large_folios());
    let big: u64 = large[1..].iter().sum();
    assert!(
        big * 2 > large.iter().sum::<u64>(),
        "most pages in large folios: {large:?}"
    );
    let (xfs, _) = read_cold(Mapping::xfs_like());
    assert!(xfs[1..].iter().sum::<u64>() > 0, "{xfs:?}");
    let (small, folios) = read_cold(Mapping::no_large_folios());
    assert_eq!(small[1..], [0; 10], "{small:?}");
    assert_eq!(folios[0], small[0]);
    // An unknown-to-the-cache mapping has an empty census.
    let mut m = mm();
    let id = m.add_mapping(Mapping::large_folios());
    assert_eq!(m.filemap_census(id), ([0; 11], [0; 11]));
}

/// The task step: a census after a cold read records the file's folio orders in the result,
/// with its task, file and time; the read row is there too; a spec without the step has none.
#[test]
fn s30_2_census_task_step_records_the_file() {
    let text = "[machine]
memory = \"1GiB\"
cpus = 1
[workload]
duration = \"30s\"
[[workload.task]]
name = \"reader\"
steps = [
  { read = \"big\", length = \"128MiB\" },
  { census = \"big\" },
]
";
    let spec = fraglab_spec::parse_spec(text, "t.toml").unwrap();
    let r = fraglab_sim::timed::run_workload(&spec).unwrap();
    assert_eq!(r.census.len(), 1, "{:?}", r.census);
    let c = &r.census[0];
    assert_eq!((c.task.as_str(), c.file.as_str()), ("reader", "big"));
    assert!(c.at_ns > 0);
    assert!(c.pages() >= 128 << 8, "{c:?}");
    assert!(c.pct_at_least(4) > 50.0, "{c:?}");
    assert_eq!(r.task_reads.len(), 1);
    assert_eq!(r.task_reads[0].bytes, 128 << 20);
    assert!(r.task_reads[0].ns > 0 && r.task_reads[0].ns <= c.at_ns);
    let s = fraglab_spec::result::rows::samples_of(std::slice::from_ref(&r));
    assert!(!fraglab_spec::result::rows::values(&s, "big: % in order >= 4").is_empty());
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"census\""));
    let plain = text.replace("  { census = \"big\" },\n", "");
    let r = fraglab_sim::timed::run_workload(&fraglab_spec::parse_spec(&plain, "t.toml").unwrap()).unwrap();
    assert!(r.census.is_empty());
}
