//! `[machine] hugetlb_pages`: the hugetlb pool filled at boot (as `vm.nr_hugepages`).

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
    let before = mm.folios.census_of(FolioKind::Hugetlb);
    mm.compact_node(false);
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
