//! Slab caches (`fraglab_sim::slab`): objects share slab pages; a page is freed only with its
//! last object; freed slots are reused before a new page is taken.

use fraglab_mm::mmzone::{MachineConfig, ZoneConfig};
use fraglab_mm::types::ZoneType;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm, Tunables};
use fraglab_sim::slab::SlabCache;

fn machine() -> Mm {
    let pages = 64 * 256;
    let z = ZoneConfig {
        zone_type: ZoneType::Dma32,
        nid: 0,
        start_pfn: 4096,
        spanned: pages,
        present: pages,
        managed: pages,
    };
    Mm::new(
        &MachineConfig {
            cpu_node: Vec::new(),
            zones: vec![z],
            nr_cpus: 2,
        },
        Tunables::default(),
    )
    .unwrap()
}

#[test]
fn objects_pin_their_slab_pages() {
    let mut mm = machine();
    let mut c = SlabCache::new("dentry", 0, 21, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE));
    let reclaimable = |mm: &Mm| mm.stats[Stat::nr_slab_reclaimable as usize];
    let before = reclaimable(&mm);
    let objs: Vec<_> = (0..210).map(|_| c.alloc(&mut mm, 0).unwrap()).collect();
    assert_eq!(c.pages(), 10, "210 objects, 21 per page");
    // Free 20 of every page's 21 objects: every page stays, pinned by one object.
    for (i, o) in objs.iter().enumerate() {
        if i % 21 != 0 {
            c.free(&mut mm, 0, *o);
        }
    }
    assert_eq!((c.pages(), c.objects), (10, 10));
    // New objects fill the partial pages before a new page is taken.
    let more: Vec<_> = (0..100).map(|_| c.alloc(&mut mm, 0).unwrap()).collect();
    assert_eq!(c.pages(), 10);
    for o in more {
        c.free(&mut mm, 0, o);
    }
    for (i, o) in objs.iter().enumerate() {
        if i % 21 == 0 {
            c.free(&mut mm, 0, *o);
        }
    }
    assert_eq!((c.pages(), c.objects), (0, 0), "the last object frees each page");
    assert_eq!(reclaimable(&mm), before);
    mm.check_invariants().unwrap();
}

/// A shrinkable cache (closed files' dentries): its pages go to the mm's slab shrinker, which
/// frees them oldest first; the owner's handles to objects on freed pages then free nothing
/// (`free` returns false) and never alias the objects of a later page in the same slot.
#[test]
fn shrinker_frees_a_shrinkable_cache_oldest_first() {
    use fraglab_mm::vmscan::ScanControl;
    let mut mm = machine();
    let mut c = SlabCache::new("dentry", 0, 21, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)).shrinkable();
    let old: Vec<_> = (0..21 * 150).map(|_| c.alloc(&mut mm, 0).unwrap()).collect();
    let young: Vec<_> = (0..21 * 150).map(|_| c.alloc(&mut mm, 0).unwrap()).collect();
    assert_eq!(c.pages(), 300);
    let before = mm.stats[Stat::slabs_scanned as usize];
    // At priority 1 the scan target is (300 >> 1) * 4 / DEFAULT_SEEKS = 300 objects (pages
    // here): two batches of SHRINK_BATCH = 128, the 44 left carried over as deferred work.
    let mut sc = ScanControl::direct(0, 0, 0);
    sc.priority = 1;
    let freed = mm.shrink_slab(&mut sc);
    assert_eq!(freed, 256);
    // slabs_scanned counts the scan work (whole batches), at least the pages freed.
    assert!(mm.stats[Stat::slabs_scanned as usize] - before >= freed);
    // Oldest first: the first pages' objects are gone before any younger one.
    let gone = |objs: &[fraglab_sim::slab::Obj], c: &mut SlabCache, mm: &mut Mm| {
        objs.iter().filter(|o| !c.free(mm, 0, **o)).count()
    };
    let old_gone = gone(&old, &mut c, &mut mm);
    assert_eq!(old_gone, old.len(), "the oldest pages go first");
    // A new object may reuse a reaped slot; the stale handles of that slot stay dead.
    let fresh: Vec<_> = (0..21).map(|_| c.alloc(&mut mm, 0).unwrap()).collect();
    assert_eq!(
        gone(&old, &mut c, &mut mm),
        old.len(),
        "a stale handle freed a new object"
    );
    assert_eq!(gone(&fresh, &mut c, &mut mm), 0);
    let young_gone = gone(&young, &mut c, &mut mm);
    assert_eq!(young_gone as u64, 21 * (256 - 150));
    assert_eq!((c.pages(), c.objects), (0, 0));
    assert_eq!(c.shrunk_objects, 21 * freed);
    mm.check_invariants().unwrap();
}
