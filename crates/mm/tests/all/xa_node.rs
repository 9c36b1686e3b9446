//! The page cache's xarray nodes (`xa_node.rs`): nodes follow the page cache and its shadow
//! entries, come from reclaimable slab pages, and go with the last entry of their range.

use crate::common;

use common::*;
use fraglab_mm::filemap::{FileVma, Mapping, ReadaheadState};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::xa_node::XA_SLAB_ORDER;

/// A VMA with MADV_RANDOM: a fault adds exactly the faulting page.
const RANDOM: FileVma = FileVma {
    hugepage: false,
    seq_read: false,
    rand_read: true,
};

#[test]
fn nodes_follow_reads_truncation_and_the_switch() {
    for on in [false, true] {
        let mut mm = dma32(32, 1, tun_kb(128));
        mm.set_xa_nodes(on);
        let f = mm.add_mapping(Mapping::no_large_folios());
        // One page at index 0 lives in xa_head: no node.
        let mut ra = ReadaheadState::default();
        let st = mm.filemap_fault(0, f, &mut ra, RANDOM, 0, 1);
        assert_eq!(st.miss_pages, 1);
        assert_eq!(mm.cache.index.len(), 1);
        assert_eq!(mm.cache.xa.stats.nodes, 0);
        // 200 pages: indices 0..200 in four level-0 nodes under one level-1 node.
        let mut ra = ReadaheadState::default();
        let st = mm.filemap_read(0, f, &mut ra, 0, 200, 200);
        assert_eq!(st.failed_pages, 0);
        mm.xa_check(false).unwrap();
        let want = if on { 5 } else { 0 };
        assert_eq!(mm.cache.xa.stats.nodes, want);
        // Nodes are reclaimable slab: one order-1 slab holds them all.
        if on {
            assert_eq!(mm.cache.xa.stats.slabs_high, 1);
            assert_eq!(mm.cache.xa.stats.pages, 1 << XA_SLAB_ORDER);
            assert_eq!(mm.stats[Stat::nr_slab_reclaimable as usize], 1 << XA_SLAB_ORDER);
        }
        mm.filemap_truncate(0, f);
        mm.xa_check(false).unwrap();
        assert_eq!(mm.cache.xa.stats.nodes, 0);
        assert_eq!(mm.cache.xa.stats.pages, 0);
        assert_eq!(mm.stats[Stat::nr_slab_reclaimable as usize], 0);
        check(&mm);
    }
}

#[test]
fn files_of_a_mapping_have_their_own_xarrays() {
    let mut mm = dma32(32, 1, tun_kb(128));
    mm.set_xa_nodes(true);
    let f = mm.add_mapping(Mapping::no_large_folios());
    mm.xa_set_file_pages(f, 16);
    let mut ra = ReadaheadState::default();
    // Two pages in each of 8 files of 16 pages: one node per file.
    for file in 0..8u64 {
        for i in 0..2 {
            mm.filemap_fault(0, f, &mut ra, RANDOM, file * 16 + i, 1 << 20);
        }
    }
    assert_eq!(mm.cache.index.len(), 16);
    mm.xa_check(false).unwrap();
    assert_eq!(mm.cache.xa.stats.nodes, 8);
    // Only index 0 left in a file: back in xa_head, the node goes.
    mm.filemap_truncate_range(0, f, 1, 1);
    mm.xa_check(false).unwrap();
    assert_eq!(mm.cache.xa.stats.nodes, 7);
}

#[test]
fn shadows_keep_nodes_and_refaults_reuse_them() {
    let mut mm = dma32(32, 1, tun_kb(128));
    mm.set_xa_nodes(true);
    let f = mm.add_mapping(Mapping::no_large_folios());
    let mut ra = ReadaheadState::default();
    mm.filemap_read(0, f, &mut ra, 0, 32, 32);
    assert_eq!(mm.cache.xa.stats.nodes, 1);
    // Evict everything: the shadows keep the node.
    for i in 0..32 {
        let id = mm.filemap_lookup(f, i).unwrap();
        mm.page_cache_evict(0, id);
    }
    assert_eq!(mm.cache.index.len(), 0);
    mm.xa_check(false).unwrap();
    assert_eq!(mm.cache.xa.stats.nodes, 1);
    let allocs = mm.cache.xa.stats.allocs;
    // A refault replaces a shadow: no new node.
    let mut ra = ReadaheadState::default();
    mm.filemap_read(0, f, &mut ra, 0, 32, 32);
    mm.xa_check(false).unwrap();
    assert_eq!(mm.cache.xa.stats.allocs, allocs);
    // The slab page is a reclaimable allocation.
    let st = mm.stats[Stat::nr_slab_reclaimable as usize];
    assert_eq!(st, 1 << XA_SLAB_ORDER);
}

#[test]
fn shadow_only_nodes_are_bounded_by_present_pages_over_8() {
    let mut mm = dma32(32, 1, tun_kb(128));
    mm.set_xa_nodes(true);
    let f = mm.add_mapping(Mapping::no_large_folios());
    mm.xa_set_file_pages(f, 16);
    let present: u64 = mm.zones.iter().map(|z| z.present as u64).sum();
    let bound = present / 8;
    let files = bound + 500;
    let mut ra = ReadaheadState::default();
    for file in 0..files {
        for i in 0..2 {
            mm.filemap_fault(0, f, &mut ra, RANDOM, file * 16 + i, 1 << 30);
        }
    }
    assert_eq!(mm.cache.xa.stats.nodes, files);
    assert_eq!(mm.cache.xa.stats.shadow_nodes, 0);
    let ids: Vec<_> = mm.cache.index.iter().map(|(_, id)| id).collect();
    for id in ids {
        mm.page_cache_evict(0, id);
    }
    mm.xa_check(false).unwrap();
    assert_eq!(mm.cache.xa.stats.shadow_nodes, bound);
    assert_eq!(mm.cache.xa.stats.nodes, bound);
    assert_eq!(mm.stats[Stat::workingset_nodereclaim as usize], 500);
    check(&mm);
}
