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
        start_pfn: 4096,
        spanned: pages,
        present: pages,
        managed: pages,
    };
    Mm::new(
        &MachineConfig {
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
