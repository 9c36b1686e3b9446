//! Partial unmapping of PMD-mapped anonymous THPs and the deferred split (docs/model §31),
//! through the workload's mappings (`AnonVma`) and through a timed run of the §31.5
//! transhuge-stress loop.

use fraglab_mm::folio::FolioKind;
use fraglab_mm::node::trace_kind;
use fraglab_mm::trace::TraceEvent;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, MachineConfig, Mm, Tunables};
use fraglab_sim::anon::{AnonVma, Touch};
use fraglab_spec::parse_spec;

const REGION: u64 = 512;

/// An x86-64 machine of `mib` MiB (no swap), tracing page frees, the task pid 7.
fn machine(mib: u64) -> Mm {
    let m = MachineConfig::x86_64(mib << 20, true, 2).unwrap();
    let mut mm = Mm::new(&m, Tunables::default()).unwrap();
    mm.set_trace_mask(trace_kind::MM_PAGE_FREE);
    mm.cur.pid = 7;
    mm
}

/// The page frees traced since the last call, as (pfn, order).
fn frees(mm: &mut Mm) -> Vec<(u32, u32)> {
    mm.take_trace()
        .into_iter()
        .filter_map(|r| match r.event {
            TraceEvent::MmPageFree { pfn, order } => Some((pfn, order)),
            _ => None,
        })
        .collect()
}

/// A madvised mapping of `regions` 2 MiB regions with a PMD THP faulted in each by a write to
/// its first page (as `allocate_transhuge` does); returns the mapping and the THPs' pfns.
fn thps(mm: &mut Mm, regions: u64) -> (AnonVma, Vec<u32>) {
    let mut v = AnonVma::new(regions * REGION, true);
    let mut pfns = Vec::new();
    for r in 0..regions {
        match v.touch(mm, 0, r * REGION) {
            Touch::Fault { order: 9, .. } => {}
            t => panic!("no THP: {t:?}"),
        }
        let f = mm
            .folios
            .live()
            .find(|(_, f)| f.kind == FolioKind::Anon && f.order == 9 && !pfns.contains(&f.pfn));
        pfns.push(f.expect("the THP").1.pfn);
    }
    // Kind (b) entries (§31.3 item 1): every PMD THP is queued, nothing counted.
    assert_eq!(mm.deferred_split.len, regions);
    assert_eq!(mm.stat(Stat::thp_deferred_split_page), 0);
    (v, pfns)
}

fn free_pages(mm: &Mm) -> u64 {
    mm.zones.iter().map(|z| z.nr_free_pages() as u64).sum::<u64>()
        + mm.zones.iter().flat_map(|z| &z.pcp).map(|p| p.count).sum::<u64>()
}

/// §31.1: MADV_DONTNEED of a whole aligned 2 MiB range frees the THP whole, as one order-9
/// free, with no split and no thp_* event; AnonHugePages and AnonPages fall by 512.
#[test]
fn s31_1_whole_aligned_dontneed_frees_order9_without_events() {
    let mut mm = machine(256);
    let (mut v, pfns) = thps(&mut mm, 2);
    frees(&mut mm);
    let (anon, thp) = (
        mm.stat(Stat::nr_anon_pages),
        mm.stat(Stat::nr_anon_transparent_hugepages),
    );
    assert_eq!(v.dontneed(&mut mm, 0, REGION, REGION), 512);
    assert_eq!(frees(&mut mm), vec![(pfns[1], 9)]);
    for s in [
        Stat::thp_split_pmd,
        Stat::thp_deferred_split_page,
        Stat::thp_split_page,
        Stat::thp_split_page_failed,
    ] {
        assert_eq!(mm.stat(s), 0, "{}", s.name());
    }
    assert_eq!(mm.stat(Stat::nr_anon_pages), anon - 512);
    assert_eq!(mm.stat(Stat::nr_anon_transparent_hugepages), thp - 512);
    // It left the deferred split queue (no counter).
    assert_eq!(mm.deferred_split.len, 1);
    assert_eq!(mm.mthp.split_deferred[9], 0);
    assert_eq!(v.rss, 512);
    mm.check_invariants().unwrap();
}

/// §31.2: MADV_DONTNEED of all but the last 4 KiB of a THP splits its PMD (thp_split_pmd +1,
/// AnonHugePages −2 MiB), unmaps 511 pages (AnonPages −511) and queues the folio as
/// partially mapped (thp_deferred_split_page +1, split_deferred and nr_anon_partially_mapped
/// of 2048 kB +1): nothing is freed, MemFree does not rise.
#[test]
fn s31_2_partial_dontneed_defers_split_and_frees_nothing() {
    let mut mm = machine(256);
    let (mut v, _) = thps(&mut mm, 2);
    frees(&mut mm);
    let (anon, thp, free) = (
        mm.stat(Stat::nr_anon_pages),
        mm.stat(Stat::nr_anon_transparent_hugepages),
        free_pages(&mm),
    );
    assert_eq!(v.dontneed(&mut mm, 0, 0, REGION - 1), 0);
    assert_eq!(mm.stat(Stat::thp_split_pmd), 1);
    assert_eq!(mm.stat(Stat::thp_deferred_split_page), 1);
    assert_eq!(mm.mthp.split_deferred[9], 1);
    assert_eq!(mm.mthp.nr_anon_partially_mapped[9], 1);
    assert_eq!(mm.stat(Stat::thp_split_page), 0);
    assert_eq!(mm.stat(Stat::nr_anon_pages), anon - 511);
    assert_eq!(mm.stat(Stat::nr_anon_transparent_hugepages), thp - 512);
    assert_eq!(frees(&mut mm), vec![]);
    assert_eq!(free_pages(&mm), free);
    assert_eq!(v.rss, 2 * REGION - 511);
    // Still one order-9 folio (stats/nr_anon of 2048 kB counts it).
    assert_eq!(mm.folios.census_of(FolioKind::Anon)[9], 2);
    // Already kind (b) on the queue: it keeps its place, the queue does not grow.
    assert_eq!(mm.deferred_split.len, 2);

    mm.check_invariants().unwrap();
}

/// §31.4 row 3: more partial zaps of a partially mapped folio count nothing (no PMD split,
/// no deferred split) and free nothing; AnonPages falls by the pages unmapped.
#[test]
fn s31_2_second_partial_zap_counts_nothing() {
    let mut mm = machine(256);
    let (mut v, _) = thps(&mut mm, 1);
    assert_eq!(v.dontneed(&mut mm, 0, 0, 100), 0);
    frees(&mut mm);
    let counters = |mm: &Mm| {
        (
            mm.stat(Stat::thp_split_pmd),
            mm.stat(Stat::thp_deferred_split_page),
            mm.mthp.split_deferred[9],
            mm.mthp.nr_anon_partially_mapped[9],
        )
    };
    let (before, anon) = (counters(&mm), mm.stat(Stat::nr_anon_pages));
    assert_eq!(before, (1, 1, 1, 1));
    assert_eq!(v.dontneed(&mut mm, 0, 200, 100), 0);
    assert_eq!(v.dontneed(&mut mm, 0, 50, 100), 0, "half of it already unmapped");
    assert_eq!(counters(&mm), before);
    assert_eq!(mm.stat(Stat::nr_anon_pages), anon - 150);
    assert_eq!(frees(&mut mm), vec![]);
    assert_eq!(v.rss, 512 - 250);
    mm.check_invariants().unwrap();
}

/// §31.2 item 6: the rest unmapped later (MADV_DONTNEED of the rest, or munmap) frees the
/// folio whole, as one order-9 free; it leaves the queue and nr_anon_partially_mapped falls
/// back; thp_split_page stays 0.
#[test]
fn s31_2_later_full_unmap_frees_whole_order9() {
    let mut mm = machine(256);
    let (mut v, pfns) = thps(&mut mm, 2);
    for r in 0..2 {
        assert_eq!(v.dontneed(&mut mm, 0, r * REGION, REGION - 1), 0);
    }
    assert_eq!(mm.mthp.nr_anon_partially_mapped[9], 2);
    frees(&mut mm);
    // The rest of the first by MADV_DONTNEED.
    assert_eq!(v.dontneed(&mut mm, 0, REGION - 1, 1), 512);
    assert_eq!(frees(&mut mm), vec![(pfns[0], 9)]);
    assert_eq!(mm.mthp.nr_anon_partially_mapped[9], 1);
    // The second by munmap.
    assert_eq!(v.unmap(&mut mm, 0), 512);
    let f = frees(&mut mm);
    assert!(f.contains(&(pfns[1], 9)), "{f:?}");
    assert!(
        f.iter().all(|&(_, o)| o == 9 || o == 0),
        "the page-table pages are order 0"
    );
    assert_eq!(f.iter().filter(|&&(_, o)| o == 9).count(), 1);
    assert_eq!(mm.mthp.nr_anon_partially_mapped[9], 0);
    assert_eq!(mm.deferred_split.len, 0);
    assert_eq!(mm.stat(Stat::thp_split_page), 0);
    assert_eq!(mm.stat(Stat::nr_anon_pages), 0);
    assert_eq!(mm.stat(Stat::nr_anon_transparent_hugepages), 0);
    mm.check_invariants().unwrap();
}

/// §31.3 items 3–6 under reclaim: THPs whose first half was zapped and whose second half has
/// 44 written and 212 never-written pages fill the machine; allocations then reclaim
/// directly (nothing on the LRU can go: no swap), `shrink_slab` runs the deferred split
/// shrinker as the priority falls, and each split frees the 256 unmapped and the 212
/// zero-filled pages as order-0 frees into the folio's own pageblock; the 44 written pages
/// stay as order-0 anon folios. The mapping then finds its pieces (a touch of a kept page is
/// a hit, a touch of a freed one a fault), and its munmap frees them.
#[test]
fn s31_3_shrinker_under_reclaim_frees_unmapped_and_zero_filled() {
    let mut mm = machine(128);
    let n = 40;
    let (mut v, pfns) = thps(&mut mm, n);
    for r in 0..n {
        // Written: pages 256..300 of each (and page 0, zapped below).
        for p in 256..300 {
            assert_eq!(v.touch(&mut mm, 0, r * REGION + p), Touch::Hit);
        }
        assert_eq!(v.dontneed(&mut mm, 0, r * REGION, 256), 0);
    }
    assert_eq!(mm.mthp.nr_anon_partially_mapped[9], n);
    frees(&mut mm);
    // Allocate until direct reclaim has run (the partially mapped THPs hold most of memory).
    let mut held = Vec::new();
    let g = Gfp::GFP_HIGHUSER_MOVABLE;
    while mm.stat(Stat::thp_split_page) < n {
        let id = mm
            .alloc_folio(0, g, 0, FolioKind::Kernel, false)
            .expect("reclaim freed the split pages");
        held.push(id);
        assert!(held.len() < 1 << 16);
    }
    assert!(mm.work.sum.reclaim_calls > 0, "direct reclaim ran");
    assert_eq!(mm.mthp.split[9], n);
    assert_eq!(mm.mthp.nr_anon_partially_mapped[9], 0);
    assert_eq!(mm.deferred_split.len, 0);
    let f = frees(&mut mm);
    for &pfn in &pfns {
        let mine: Vec<_> = f.iter().filter(|&&(p, _)| p >= pfn && p < pfn + 512).collect();
        assert_eq!(mine.len(), 256 + 212, "pfn {pfn:#x}");
        assert!(mine
            .iter()
            .all(|&&(p, o)| o == 0 && !(pfn + 256..pfn + 300).contains(&p)));
    }
    assert_eq!(mm.stat(Stat::nr_anon_pages), n * 44);
    assert_eq!(mm.folios.census_of(FolioKind::Anon)[9], 0);
    // The kept pages: order-0 anon folios at their pfns.
    for &pfn in &pfns {
        for p in pfn + 256..pfn + 300 {
            let id = mm.folio_at(p).expect("kept");
            assert_eq!(mm.folios.get(id).order, 0);
        }
    }
    for id in held {
        mm.free_folio(0, id);
    }
    mm.check_invariants().unwrap();
    // The mapping takes its pieces: kept pages are hits, zero-filled ones fault anew.
    assert_eq!(v.touch(&mut mm, 0, 256), Touch::Hit);
    assert_eq!(mm.deferred_split.pending_records(), n as usize - 1);
    assert!(matches!(v.touch(&mut mm, 0, 400), Touch::Fault { order: 0, .. }));
    assert_eq!(v.unmap(&mut mm, 0), n * 44 + 1);
    assert_eq!(mm.deferred_split.pending_records(), 0);
    assert_eq!(mm.stat(Stat::nr_anon_pages), 0);
    mm.check_invariants().unwrap();
}

/// Runs a one-task timed workload of `steps` on a `memory` machine.
fn run(memory: &str, loops: u32, steps: &str) -> fraglab_spec::result::RunResult {
    let text = format!(
        "[machine]\nmemory = \"{memory}\"\ncpus = 2\n[knobs]\n\"transparent_hugepage/enabled\" = \"madvise\"\n\
         [workload]\nduration = \"60s\"\n[[workload.task]]\nname = \"t\"\nloops = {loops}\nsteps = [{steps}]\n"
    );
    fraglab_sim::timed::run_workload(&parse_spec(&text, "t.toml").unwrap()).unwrap()
}

fn delta(r: &fraglab_spec::result::RunResult, k: &str) -> i64 {
    r.vmstat_delta[k]
}

/// §31.5: the transhuge-stress loop on a machine with room for it (2 GiB, a 256 MiB mapping):
/// per 2 MiB unit and loop one THP fault, one thp_split_pmd, one thp_deferred_split_page,
/// no thp_split_page; the previous loop's folios freed whole (order 9) by the remap.
#[test]
fn s31_5_transhuge_stress_loop() {
    let loops = 4;
    let units = 128;
    let r = run(
        "2GiB",
        loops,
        "{ mmap = \"a\", size = \"256MiB\", madvise = true }, \
         { touch = \"a\", stride = \"2MiB\" }, \
         { dontneed = \"a\", offset = 0, length = \"2044KiB\", stride = \"2MiB\" }",
    );
    let total = (loops * units) as i64;
    assert_eq!(delta(&r, "thp_fault_alloc"), total);
    assert_eq!(delta(&r, "thp_fault_fallback"), 0);
    assert_eq!(delta(&r, "thp_split_pmd"), total);
    assert_eq!(delta(&r, "thp_deferred_split_page"), total);
    assert_eq!(delta(&r, "thp_split_page"), 0);
    assert_eq!(delta(&r, "thp_split_page_failed"), 0);
    assert_eq!(delta(&r, "thp_underused_split_page"), 0);
    // Every THP freed whole at the remap or the exit, plus the page-table pages.
    assert!(delta(&r, "pgfree") >= 512 * total);
    assert_eq!(delta(&r, "nr_anon_transparent_hugepages"), 0);
    assert_eq!(delta(&r, "nr_anon_pages"), 0);
}
