//! NUMA nodes: the machine layout, zonelists (`build_zonelists`), node fallback in
//! `get_page_from_freelist`, memory policies, the `numa_*` events, per-node kswapd and
//! kcompactd, and `vm.zone_reclaim_mode`'s node reclaim.

use fraglab_mm::filemap::Mapping;
use fraglab_mm::folio::FolioKind;
use fraglab_mm::numa::{MemPolicy, NUMA_FOREIGN, NUMA_HIT, NUMA_LOCAL, NUMA_MISS, NUMA_OTHER};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, MachineConfig, Mm, Tunables, Wakeup, ZoneType};

const MIB: u64 = 1 << 20;

/// Two nodes of `mib` MiB each, one CPU each (CPU 0 on node 0, CPU 1 on node 1), debug-vm on.
fn two_nodes(mib: u64) -> Mm {
    let m = MachineConfig::x86_64_nodes(&[mib * MIB, mib * MIB], false, &[1, 1]).unwrap();
    let mut mm = Mm::new(&m, Tunables::default()).unwrap();
    mm.debug_vm = true;
    mm
}

/// The zone index of (node, zone type).
fn zi(nid: u32, t: ZoneType) -> usize {
    nid as usize * fraglab_mm::types::MAX_NR_ZONES + t.idx()
}

fn free(mm: &Mm, nid: u32) -> i64 {
    mm.zones[mm.node_zones(nid)]
        .iter()
        .map(|z| z.nr_free_pages())
        .sum()
}

/// A watermark of a node: the sum over its managed zones.
fn wmark(mm: &Mm, nid: u32, i: usize) -> u64 {
    mm.zones[mm.node_zones(nid)]
        .iter()
        .filter(|z| z.managed > 0)
        .map(|z| z.wmark_pages(i))
        .sum()
}

fn low(mm: &Mm, nid: u32) -> u64 {
    wmark(mm, nid, fraglab_mm::mmzone::WMARK_LOW)
}

fn kswapd_wakes(mm: &mut Mm) -> Vec<u32> {
    mm.outbox
        .wakeups
        .drain(..)
        .filter_map(|w| match w {
            Wakeup::Kswapd { nid, .. } => Some(nid),
            _ => None,
        })
        .collect()
}

#[test]
fn the_layout_puts_low_zones_on_node_0_and_later_nodes_above_4_gib() {
    let m = MachineConfig::x86_64_nodes(&[2 << 30, 2 << 30], true, &[2, 2]).unwrap();
    assert_eq!(m.nr_nodes(), 2);
    assert_eq!(m.cpu_node, vec![0, 0, 1, 1]);
    let node1: Vec<_> = m.zones.iter().filter(|z| z.nid == 1).collect();
    assert_eq!(node1.len(), 1);
    assert_eq!(node1[0].zone_type, ZoneType::Normal);
    assert_eq!(node1[0].start_pfn, 1 << 20, "node 1 starts at 4 GiB, above DMA32");
    assert!(m
        .zones
        .iter()
        .filter(|z| z.nid == 0)
        .all(|z| z.zone_type <= ZoneType::Dma32));
    // One node is the single-node layout exactly.
    let one = MachineConfig::x86_64_nodes(&[3 << 30], true, &[2]).unwrap();
    assert_eq!(one, MachineConfig::x86_64(3 << 30, true, 2).unwrap());
    // A node without memory is refused.
    let mut bad = m.clone();
    bad.zones.retain(|z| z.nid == 0);
    bad.zones.push(fraglab_mm::ZoneConfig { nid: 2, ..*node1[0] });
    assert!(bad.validate().unwrap_err().0.contains("node 1 has no memory"));
}

#[test]
fn zonelists_follow_find_next_best_node_round_robin() {
    let m = MachineConfig::x86_64_nodes(&[512 * MIB; 4], false, &[1; 4]).unwrap();
    let mm = Mm::new(&m, Tunables::default()).unwrap();
    // The kernel's boot log: "Fallback order for Node 1: 1 2 3 0" (equal distances: the
    // nodes above first, then a node_load tie-break spreads the first remote node).
    assert_eq!(mm.numa.node_order[0], vec![0, 1, 2, 3]);
    assert_eq!(mm.numa.node_order[1], vec![1, 2, 3, 0]);
    assert_eq!(mm.numa.node_order[2], vec![2, 3, 0, 1]);
    assert_eq!(mm.numa.node_order[3], vec![3, 0, 1, 2]);
    // Each node's zones from the highest down, node by node.
    let zl = &mm.numa.zonelists[1];
    assert_eq!(mm.zones[zl[0]].nid, 1);
    assert_eq!(mm.zones[zl[0]].zone_type, ZoneType::Normal);
}

#[test]
fn an_allocation_goes_to_the_remote_node_once_the_local_one_is_below_low() {
    let mut mm = two_nodes(256);
    let gfp = Gfp::GFP_HIGHUSER_MOVABLE;
    // Fill node 0 from CPU 0 until an allocation lands on node 1.
    let mut local = 0u64;
    let remote_pfn = loop {
        let pfn = mm.alloc_pages(0, gfp, 0).expect("memory is left");
        if mm.pfn_nid(pfn) == 1 {
            break pfn;
        }
        local += 1;
    };
    assert!(local > 1000);
    // The fast path spilled before node 0 fell through its low watermark: no kswapd woken,
    // node 0 still at about its low watermark.
    assert!(
        kswapd_wakes(&mut mm).is_empty(),
        "zone_reclaim_mode = 0: spill, do not reclaim"
    );
    // (The last PCP refill may take node 0 a batch below low; it stays above min.)
    assert!(free(&mm, 0) as u64 > wmark(&mm, 0, fraglab_mm::mmzone::WMARK_MIN));
    // numa_miss on the serving zone, numa_foreign on the preferred one, numa_other (CPU 0 is
    // on node 0).
    let pref = zi(0, ZoneType::Dma32);
    let served = mm.pfn_zone(remote_pfn).unwrap();
    assert_eq!(mm.zones[served].numa[NUMA_MISS], 1);
    assert_eq!(mm.zones[served].numa[NUMA_OTHER], 1);
    assert_eq!(mm.zones[pref].numa[NUMA_FOREIGN], 1);
    assert_eq!(mm.zones[pref].numa[NUMA_HIT], local);
    assert_eq!(mm.zones[pref].numa[NUMA_LOCAL], local);
    // The same allocation from CPU 1 is a local hit on node 1.
    let pfn = mm.alloc_pages(1, gfp, 0).unwrap();
    assert_eq!(mm.pfn_nid(pfn), 1);
    assert_eq!(mm.zones[served].numa[NUMA_HIT], 1);
    assert_eq!(mm.zones[served].numa[NUMA_LOCAL], 1);
    mm.check_invariants().unwrap();
}

#[test]
fn a_bound_task_stays_on_its_node_and_wakes_only_that_nodes_kswapd() {
    let mut mm = two_nodes(256);
    mm.cur.mempolicy = MemPolicy::Bind(1 << 0);
    let gfp = Gfp::GFP_HIGHUSER_MOVABLE;
    let mut woken = Vec::new();
    for _ in 0..70_000 {
        let Some(pfn) = mm.alloc_pages(1, gfp, 0) else {
            break;
        };
        assert_eq!(mm.pfn_nid(pfn), 0, "bind:0 from a CPU of node 1");
        woken.extend(kswapd_wakes(&mut mm));
        if !woken.is_empty() {
            break;
        }
    }
    assert_eq!(woken, vec![0], "only node 0's kswapd is woken");
    assert_eq!(
        free(&mm, 1) as u64,
        mm.zones[zi(1, ZoneType::Normal)].managed,
        "node 1 untouched"
    );
    // Node 0's kswapd reclaims node 0 (nothing reclaimable here: anonymous memory, no swap),
    // node 1's stays asleep.
    assert!(mm.kswapd_running(0));
    assert!(!mm.kswapd_running(1));
    mm.check_invariants().unwrap();
}

#[test]
fn each_nodes_kswapd_reclaims_its_own_nodes_lru() {
    let mut mm = two_nodes(256);
    let mapping = mm.add_mapping(Mapping::no_large_folios());
    // Page cache on both nodes: 100 MiB read from each node's CPU with a local policy.
    let mut ra = mm.file_ra_state_init();
    mm.filemap_read(0, mapping, &mut ra, 0, 25_600, 1 << 20);
    let mut ra = mm.file_ra_state_init();
    mm.filemap_read(1, mapping, &mut ra, 25_600, 25_600, 1 << 20);
    let file = |mm: &Mm, nid: usize| {
        let lv = &mm.reclaim.lruvec[nid];
        lv.pages[2] + lv.pages[3]
    };
    let (f0, f1) = (file(&mm, 0), file(&mm, 1));
    assert!(f0 >= 25_600 && f1 >= 25_600, "{f0} {f1}");
    // Fill node 0 with anonymous memory (bound) until its kswapd is woken, then run it.
    mm.cur.mempolicy = MemPolicy::Bind(1);
    while kswapd_wakes(&mut mm).is_empty() {
        mm.alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::Anon, false)
            .expect("node 0 has memory");
    }
    let cycles = mm.kswapd_until_sleep(0, 64);
    let reclaimed: u64 = cycles.iter().map(|c| c.reclaimed).sum();
    assert!(reclaimed > 0);
    assert!(file(&mm, 0) < f0, "node 0's page cache was reclaimed");
    assert_eq!(file(&mm, 1), f1, "node 1's was not touched");
    assert!(mm.stat(Stat::pgsteal_kswapd) > 0);
    mm.check_invariants().unwrap();
}

#[test]
fn zone_reclaim_mode_reclaims_the_local_node_before_going_remote() {
    let mut remote = [0u32; 2];
    for mode in [0u32, 1] {
        let mut mm = two_nodes(256);
        mm.numa.zone_reclaim_mode = mode;
        let mapping = mm.add_mapping(Mapping::no_large_folios());
        // Node 0 full of clean, unmapped page cache read from CPU 0.
        let mut ra = mm.file_ra_state_init();
        let mut index = 0;
        while free(&mm, 0) as u64 > low(&mm, 0) + 1024 {
            mm.filemap_read(0, mapping, &mut ra, index, 256, 1 << 22);
            index += 256;
        }
        // Allocations from CPU 0 past node 0's low watermark.
        for _ in 0..4096 {
            let pfn = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
            remote[mode as usize] += (mm.pfn_nid(pfn) == 1) as u32;
        }
        let (ok, failed) = (
            mm.stat(Stat::zone_reclaim_success),
            mm.stat(Stat::zone_reclaim_failed),
        );
        if mode == 0 {
            assert_eq!((ok, failed), (0, 0), "mode 0 never reclaims the node");
        } else {
            // Each node_reclaim frees SWAP_CLUSTER_MAX pages at priority 4; until the zone is
            // back above low, "did we reclaim enough" fails and that allocation still goes
            // off-node (as in the kernel), after that they stay local.
            assert!(ok > 0 && failed == 0, "{ok} successes, {failed} failures");
            assert!(mm.stat(Stat::pgsteal_direct) >= 32 * ok);
            assert!(
                free(&mm, 0) as u64 >= low(&mm, 0),
                "node 0 was brought back above low"
            );
        }
        mm.check_invariants().unwrap();
    }
    assert!(remote[0] > 2000, "mode 0 spills: {remote:?}");
    assert!(
        remote[1] * 10 < remote[0],
        "mode 1 keeps allocations local: {remote:?}"
    );
}

#[test]
fn interleave_alternates_nodes_and_preferred_falls_back() {
    let mut mm = two_nodes(256);
    mm.cur.mempolicy = MemPolicy::Interleave(0b11);
    let nodes: Vec<u32> = (0..6)
        .map(|_| {
            let pfn = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
            mm.pfn_nid(pfn)
        })
        .collect();
    assert_eq!(nodes, vec![0, 1, 0, 1, 0, 1]);
    mm.cur.mempolicy = MemPolicy::Preferred(1 << 1);
    let pfn = mm.alloc_pages(0, Gfp::GFP_HIGHUSER_MOVABLE, 0).unwrap();
    assert_eq!(mm.pfn_nid(pfn), 1);
    // __GFP_THISNODE never leaves the preferred node.
    mm.cur.mempolicy = MemPolicy::Local;
    let ac = mm.alloc_context_node(Gfp::GFP_HIGHUSER_MOVABLE.union(Gfp::THISNODE), 1, u64::MAX);
    let mut k = 0;
    let zones: Vec<usize> = std::iter::from_fn(|| mm.next_zone(&ac, &mut k)).collect();
    assert!(zones.iter().all(|&z| mm.zones[z].nid == 1));
    mm.check_invariants().unwrap();
}

#[test]
fn kcompactd_is_per_node() {
    let mut mm = two_nodes(256);
    // A request recorded on node 1 does not touch node 0's kcompactd.
    mm.kcompactd_record(1, 9, ZoneType::Normal.idx());
    assert_eq!(mm.compact.kcompactd[1].max_order, 9);
    assert_eq!(mm.compact.kcompactd[0].max_order, 0);
    // Node 1 has a single Normal zone; node 0 here only DMA32 (256 MiB, no DMA).
    assert_eq!(mm.kcompactd_max_zoneidx(1), ZoneType::Normal.idx());
    assert_eq!(mm.kcompactd_max_zoneidx(0), ZoneType::Dma32.idx());
    let st = mm.compact_memory();
    assert_eq!(st.migrated_pages, 0, "nothing to migrate on fresh nodes");
    mm.check_invariants().unwrap();
}

#[test]
fn a_thp_fault_follows_bind_and_interleave_policies() {
    let mut mm = two_nodes(256);
    mm.thp.enabled = fraglab_mm::huge_memory::ThpEnabled::Always;
    let node = |mm: &Mm, id| mm.pfn_nid(mm.folios.folios[id as usize].pfn);
    // bind:0 from a CPU of node 1: the THISNODE first try is skipped (the local node is not
    // in the mask) and the THP comes from node 0.
    mm.cur.mempolicy = MemPolicy::Bind(1 << 0);
    let id = mm.do_anonymous_fault(1, true).unwrap();
    assert_eq!(mm.folios.folios[id as usize].order, 9);
    assert_eq!(node(&mm, id), 0);
    // interleave: one node per fault (the policy's node is taken once per fault).
    mm.cur.mempolicy = MemPolicy::Interleave(0b11);
    let nodes: Vec<u32> = (0..4)
        .map(|_| {
            let id = mm.do_anonymous_fault(0, true).unwrap();
            assert_eq!(mm.folios.folios[id as usize].order, 9);
            node(&mm, id)
        })
        .collect();
    assert_eq!(nodes, vec![0, 1, 0, 1]);
    mm.check_invariants().unwrap();
}
