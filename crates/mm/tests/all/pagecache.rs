//! Page-cache folios (docs/model §12): the write path's order loop and its gfp under each
//! policy of the 2026 iomap thread (§12.5), and readahead's order ramp (§12.2).

use crate::common;

use common::*;
use fraglab_mm::filemap::{
    fgf_order, get_init_ra_size, get_next_ra_size, write_folio_gfp, CostlyOrderPolicy, FileVma, Mapping,
    ReadaheadState, V4Position,
};
use fraglab_mm::folio::FolioKind;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm, Wakeup};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

#[test]
fn s12_3_fgf_order_and_ra_sizes() {
    assert_eq!(fgf_order(4096), 0);
    assert_eq!(fgf_order(8192), 1);
    assert_eq!(fgf_order(16 << 10), 2);
    assert_eq!(fgf_order(64 << 10), 4);
    assert_eq!(fgf_order(100 << 10), 4, "ilog2 rounds down");
    assert_eq!(fgf_order(2 << 20), 9);
    // ra_pages 32: a 1-page read at the start gets 4 pages, 8 pages get 16, 16 get 32.
    assert_eq!(get_init_ra_size(1, 32), 4);
    assert_eq!(get_init_ra_size(8, 32), 16);
    assert_eq!(get_init_ra_size(16, 32), 32);
    assert_eq!(get_next_ra_size(1, 32), 4);
    assert_eq!(get_next_ra_size(4, 32), 8);
    assert_eq!(get_next_ra_size(16, 32), 32);
    assert_eq!(get_next_ra_size(32, 32), 32);
}

/// The §12.5 table, row by row: base = XFS mapping gfp (no __GFP_FS) + __GFP_WRITE.
#[test]
fn s12_5_write_gfp_per_policy() {
    use CostlyOrderPolicy::*;
    let base = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::FS).union(Gfp::WRITE);
    let light = Gfp::NORETRY.union(Gfp::NOWARN);
    let opportunistic = base.without(Gfp::DIRECT_RECLAIM).union(Gfp::NOWARN);
    // Baseline (and V4, whose change is in the allocator): NORETRY|NOWARN above the minimum.
    for p in [Baseline, V4KcompactdBackground] {
        for o in 1..=9 {
            assert_eq!(write_folio_gfp(p, base, 6, o, 0), base.union(light), "{p:?} {o}");
        }
        assert_eq!(write_folio_gfp(p, base, 6, 0, 0), base);
    }
    // V1: decided on the hint; a costly hint drops direct reclaim for every attempt, order 0 too.
    assert_eq!(
        write_folio_gfp(V1Iomap, base, 6, 5, 0),
        base.without(Gfp::DIRECT_RECLAIM).union(light)
    );
    assert_eq!(
        write_folio_gfp(V1Iomap, base, 6, 2, 0),
        base.without(Gfp::DIRECT_RECLAIM).union(light)
    );
    assert_eq!(
        write_folio_gfp(V1Iomap, base, 6, 0, 0),
        base.without(Gfp::DIRECT_RECLAIM)
    );
    assert_eq!(write_folio_gfp(V1Iomap, base, 3, 3, 0), base.union(light));
    assert_eq!(write_folio_gfp(V1Iomap, base, 3, 0, 0), base);
    // V2: costly orders opportunistic, 1..=3 light, the minimum plain.
    assert_eq!(write_folio_gfp(V2FilemapCostly, base, 6, 4, 0), opportunistic);
    assert_eq!(write_folio_gfp(V2FilemapCostly, base, 6, 3, 0), base.union(light));
    assert_eq!(write_folio_gfp(V2FilemapCostly, base, 6, 1, 0), base.union(light));
    assert_eq!(write_folio_gfp(V2FilemapCostly, base, 6, 0, 0), base);
    // V3: every order above the minimum opportunistic, without NORETRY.
    for o in 1..=9 {
        assert_eq!(
            write_folio_gfp(V3FilemapOpportunistic, base, 6, o, 0),
            opportunistic
        );
    }
    assert_eq!(write_folio_gfp(V3FilemapOpportunistic, base, 6, 0, 0), base);
}

/// Half of memory free in order-0 holes between anon pages, plus some clean page cache that
/// reclaim can free; kswapd asleep.
fn fragmented(policy: CostlyOrderPolicy) -> (Mm, u32) {
    let mut mm = dma32(16, 1, tun_kb(128));
    mm.set_policy(fraglab_mm::policy::CostlyOrder::on_kernel(
        policy,
        V4Position::default(),
    ));
    let mut anon = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        anon.push(id);
    }
    for id in anon.into_iter().step_by(2) {
        mm.free_folio(0, id);
    }
    // The fill stopped at the min watermark; take whatever larger chunks are left with atomic
    // kernel allocations, so that the only free memory is the order-0 holes.
    mm.drain_all_pages();
    for order in (1..=10).rev() {
        while mm
            .alloc_folio(0, Gfp::GFP_ATOMIC, order, FolioKind::Kernel, false)
            .is_some()
        {}
    }
    mm.drain_all_pages();
    mm.kswapd_until_sleep(0, 8);
    mm.take_wakeups();
    let xfs = mm.add_mapping(Mapping::xfs_like());
    (mm, xfs)
}

#[test]
fn s12_3_write_walks_orders_down_one_at_a_time() {
    // A 256 KiB write hints order 6; with no free chunk above order 0 and opportunistic
    // attempts, it tries 6, 5, 4, 3, 2, 1, then succeeds at 0.
    let (mut mm, xfs) = fragmented(CostlyOrderPolicy::V3FilemapOpportunistic);
    let st = mm.filemap_write(0, xfs, 0, 256 << 10);
    let orders: Vec<u32> = st.attempts.iter().map(|a| a.order).collect();
    assert_eq!(&orders[..7], &[6, 5, 4, 3, 2, 1, 0]);
    assert!(st.attempts[..6].iter().all(|a| !a.ok) && st.attempts[6].ok);
    assert_eq!(st.added[0], 64, "the whole write in order-0 folios");
    assert_eq!(st.failed_pages, 0);
    // The folios are dirty page cache of the XFS mapping, not migratable by a NOFS compactor.
    let id = mm.filemap_lookup(xfs, 17).unwrap();
    let f = mm.folios.get(id);
    assert!(f.dirty() && f.nofs_mapping() && f.kind == FolioKind::File && f.index == 17);
    // Writing again hits the cache.
    let again = mm.filemap_write(0, xfs, 0, 256 << 10);
    assert_eq!((again.hit_pages, again.attempts.len()), (64, 0));
    check(&mm);
}

#[test]
fn s12_3_write_alignment_and_fresh_machine() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let xfs = mm.add_mapping(Mapping::xfs_like());
    // 64 KiB at page 4: the hint (4) is reduced to the index's alignment (order 2), then the
    // rest of the write continues at page 8 with its own hint.
    let st = mm.filemap_write(0, xfs, 4, 64 << 10);
    assert_eq!(st.attempts[0].order, 2);
    assert!(st.attempts.iter().all(|a| a.ok));
    assert_eq!(st.added.iter().enumerate().map(|(o, n)| n << o).sum::<u64>(), 16);
    // A mapping without large folios only ever gets order 0.
    let plain = mm.add_mapping(Mapping::no_large_folios());
    let st = mm.filemap_write(0, plain, 0, 1 << 20);
    assert_eq!(st.added[0], 256);
    assert!(st.added[1..].iter().all(|&n| n == 0));
    check(&mm);
}

/// §12.5 scenario: what one 256 KiB XFS write's allocation attempts do on a fragmented machine
/// under each policy.
#[test]
fn s12_5_write_work_per_policy_on_a_fragmented_machine() {
    use CostlyOrderPolicy::*;
    // Baseline: the costly attempts run direct compaction (initial async compaction).
    let (mut mm, xfs) = fragmented(Baseline);
    let st = mm.filemap_write(0, xfs, 0, 256 << 10);
    assert_eq!(st.attempts[0].order, 6);
    assert!(st.attempts[0].work.compact_stalls >= 1, "{:?}", st.attempts[0]);
    assert!(mm.stat(Stat::compact_stall) >= 1);
    check(&mm);

    // V1 and V3: no direct work at all for the large attempts; kswapd is asked instead.
    for p in [V1Iomap, V3FilemapOpportunistic] {
        let (mut mm, xfs) = fragmented(p);
        let st = mm.filemap_write(0, xfs, 0, 256 << 10);
        // V1 decides on each call's hint: the last, small pieces of the write hint a
        // non-costly order and keep direct reclaim.
        let opportunistic = |a: &&fraglab_mm::filemap::WriteAttempt| match p {
            V1Iomap => a.hint > 3,
            _ => a.order > 0,
        };
        assert!(st.attempts.iter().filter(opportunistic).count() >= 6);
        for a in st.attempts.iter().filter(opportunistic) {
            assert!(!a.gfp.intersects(Gfp::DIRECT_RECLAIM), "{p:?} {a:?}");
            assert_eq!(
                (a.work.compact_stalls, a.work.reclaim_calls, a.work.drains),
                (0, 0, 0),
                "{p:?} {a:?}"
            );
        }
        if p == V3FilemapOpportunistic {
            // Only the order-0 attempts may reclaim, and order 0 never compacts.
            assert_eq!(mm.stat(Stat::compact_stall), 0, "{p:?}");
        }
        let woke = mm
            .take_wakeups()
            .iter()
            .any(|w| matches!(w, Wakeup::Kswapd { nid: 0, order: 6, .. }));
        assert!(
            woke || mm.reclaim.kswapd[0].order >= 6,
            "{p:?}: kswapd asked for order 6"
        );
        check(&mm);
    }

    // V2: nothing direct for the costly orders; the light NORETRY path for orders 1..=3.
    let (mut mm, xfs) = fragmented(V2FilemapCostly);
    let st = mm.filemap_write(0, xfs, 0, 256 << 10);
    for a in &st.attempts {
        if a.order > 3 {
            assert_eq!((a.work.compact_stalls, a.work.reclaim_calls), (0, 0), "{a:?}");
        }
    }
    let light = st.attempts.iter().find(|a| a.order == 3).expect("order 3 tried");
    assert!(
        light.work.reclaim_calls + light.work.compact_stalls > 0,
        "order 3 does light direct work: {light:?}"
    );
    check(&mm);

    // V4 before the initial compaction: costly attempts wake kcompactd and fail, no direct work.
    let (mut mm, xfs) = fragmented(V4KcompactdBackground);
    let st = mm.filemap_write(0, xfs, 0, 256 << 10);
    // (Later, aligned pieces of the write may find a chunk that the order-3 attempts'
    // compaction freed: those succeed on the fast path.)
    assert!(!st.attempts[0].ok);
    for a in st.attempts.iter().filter(|a| a.order > 3) {
        assert_eq!((a.work.compact_stalls, a.work.reclaim_calls), (0, 0), "{a:?}");
        if a.ok {
            assert!(!a.work.slowpath, "{a:?}");
        } else {
            assert_eq!(a.work.kcompactd_wakes, 1, "{a:?}");
        }
    }
    assert!(mm.compact.kcompactd[0].max_order >= 4);
    check(&mm);

    // V4 after it: one async compaction per costly attempt, then the exit (no reclaim).
    let (mut mm, xfs) = fragmented(V4KcompactdBackground);
    mm.set_policy(fraglab_mm::policy::CostlyOrder::on_kernel(
        V4KcompactdBackground,
        V4Position::AfterInitialCompaction,
    ));
    let st = mm.filemap_write(0, xfs, 0, 256 << 10);
    let first = st.attempts[0];
    assert_eq!(first.order, 6);
    assert!(first.work.compact_stalls >= 1, "{first:?}");
    assert_eq!(first.work.reclaim_calls, 0, "{first:?}");
    check(&mm);
}

#[test]
fn s12_2_readahead_ramps_the_order_by_two_per_window() {
    for (ra_pages, want) in [(32u64, vec![0u32, 2, 4, 5]), (2048, vec![0, 2, 4, 6, 8, 9])] {
        let mut mm = dma32(32, 1, tun_kb(128));
        let f = mm.add_mapping(Mapping::large_folios());
        let mut ra = ReadaheadState {
            ra_pages,
            ..Default::default()
        };
        let file = 16_384;
        // The largest order each readahead call added (smaller folios fill unaligned starts
        // and window ends).
        let mut orders: Vec<u32> = Vec::new();
        let mut pos = 0;
        while pos < 8192 {
            let st = mm.filemap_read(0, f, &mut ra, pos, 16, file);
            assert_eq!(st.failed_pages, 0);
            if let Some(o) = (0..11u32).rev().find(|&o| st.added[o as usize] > 0) {
                if !orders.contains(&o) {
                    orders.push(o);
                }
            }
            pos += 16;
        }
        assert_eq!(orders, want, "ra_pages {ra_pages}");
        check(&mm);
    }
}

/// `pgpgin` counts the sectors readahead reads (8 per 4 KiB page, stored as the block layer
/// counts them; /proc/vmstat prints KiB): every page a read brings into the page cache, and
/// nothing for pages that were cached already.
#[test]
fn pgpgin_counts_the_pages_readahead_reads_in() {
    let mut mm = dma32(32, 1, tun_kb(128));
    let f = mm.add_mapping(Mapping::large_folios());
    let mut ra = ReadaheadState {
        ra_pages: 32,
        ..Default::default()
    };
    let mut added = 0u64;
    let mut pos = 0;
    while pos < 1024 {
        let st = mm.filemap_read(0, f, &mut ra, pos, 16, 4096);
        added += (0..11).map(|o| st.added[o] << o).sum::<u64>();
        pos += 16;
    }
    assert!(added >= 1024, "readahead brought in {added} pages");
    assert_eq!(mm.stat(Stat::pgpgin), added * 8);
    // Cached pages read again cost no I/O.
    let before = mm.stat(Stat::pgpgin);
    let mut ra2 = ReadaheadState::default();
    let st = mm.filemap_read(0, f, &mut ra2, 0, 256, 4096);
    assert_eq!(st.miss_pages, 0);
    assert_eq!(mm.stat(Stat::pgpgin), before);
    // A fault under MADV_RANDOM reads just the faulting folio (no read-around): one page.
    let rand = FileVma {
        rand_read: true,
        ..FileVma::default()
    };
    let st = mm.filemap_fault(0, f, &mut ReadaheadState::default(), rand, 3000, 4096);
    assert_eq!(st.added.iter().sum::<u64>(), 1, "{st:?}");
    assert_eq!(mm.stat(Stat::pgpgin), before + 8);
    check(&mm);
}

#[test]
fn s12_2_first_failure_falls_back_to_order_0_for_the_rest_of_the_window() {
    let (mut mm, _) = fragmented(CostlyOrderPolicy::Baseline);
    let f = mm.add_mapping(Mapping::large_folios());
    let mut ra = ReadaheadState {
        ra_pages: 2048,
        ..Default::default()
    };
    let mut failures = 0;
    let mut large = 0;
    let mut pos = 0;
    while pos < 4096 {
        let st = mm.filemap_read(0, f, &mut ra, pos, 64, 8192);
        failures += st.alloc_failures;
        large += st.added[1..].iter().sum::<u64>();
        if st.alloc_failures > 0 {
            assert!(
                st.added[0] > 0,
                "the window's rest came as order-0 folios: {st:?}"
            );
            // One failure ends the window's large folios: never more than one per window.
            assert!(st.alloc_failures <= st.sync_ra + st.async_ra, "{st:?}");
        }
        assert_eq!(st.failed_pages, 0, "order-0 folios always come");
        pos += 64;
    }
    assert!(
        failures > 0,
        "large readahead folios fail on a fragmented machine"
    );
    // Some windows still got large folios (NORETRY readahead may compact asynchronously).
    assert!(large > 0);
    check(&mm);
}

#[test]
fn s12_2_mapping_without_large_folios_reads_order_0_and_random_reads_do_not_ramp() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let f = mm.add_mapping(Mapping::no_large_folios());
    let mut ra = ReadaheadState::default();
    let mut added = [0u64; 11];
    for pos in (0..2048).step_by(16) {
        let st = mm.filemap_read(0, f, &mut ra, pos, 16, 4096);
        for (o, n) in st.added.iter().enumerate() {
            added[o] += n;
        }
    }
    assert!(added[0] >= 2048 && added[1..].iter().all(|&n| n == 0));
    // Random 1-page reads far apart: each reads only its page (no window).
    let g = mm.add_mapping(Mapping::large_folios());
    let mut ra = ReadaheadState::default();
    mm.filemap_read(0, g, &mut ra, 0, 1, 1 << 20);
    let st = mm.filemap_read(0, g, &mut ra, 500_000, 1, 1 << 20);
    assert_eq!(st.added.iter().sum::<u64>(), 1);
    assert_eq!(st.added[0], 1);
    check(&mm);
}

#[test]
fn s12_3_writes_dirty_but_do_not_mark_accessed() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let f = mm.add_mapping(Mapping::no_large_folios());
    mm.filemap_write(0, f, 0, 4096);
    mm.filemap_write(0, f, 0, 4096);
    let id = mm.filemap_lookup(f, 0).unwrap();
    let folio = mm.folios.get(id);
    assert!(folio.dirty() && !folio.referenced() && !folio.active());
    assert_eq!(mm.stat(Stat::pgactivate), 0);
}

#[test]
fn s12_2_3_history_probe_turns_a_miss_after_cached_pages_into_a_window() {
    let mut mm = dma32(16, 1, tun_kb(128));
    let f = mm.add_mapping(Mapping::no_large_folios());
    let mut ra = ReadaheadState::default();
    mm.filemap_read(0, f, &mut ra, 0, 64, 4096);
    assert!(mm.filemap_lookup(f, 63).is_some());
    // A new open file misses at the first uncached page after 64 cached ones: the probe finds
    // at least ra_pages (32) cached pages behind it and reads a full window.
    let first_uncached = (64..4096).find(|&i| mm.filemap_lookup(f, i).is_none()).unwrap();
    let mut fresh = ReadaheadState::default();
    let st = mm.filemap_read(0, f, &mut fresh, first_uncached, 1, 4096);
    assert_eq!(st.added[0], 32, "{st:?}");
    assert_eq!((fresh.size, fresh.async_size), (32, 1));
    // Far from any cached page the same miss is a standalone read of one page.
    let mut other = ReadaheadState::default();
    let st = mm.filemap_read(0, f, &mut other, 3000, 1, 4096);
    assert_eq!(st.added[0], 1);
    check(&mm);
}

/// `filemap_fault` (mm/filemap.c, 6.18): a miss reads around the fault (`ra_pages` from
/// `ra_pages / 2` before it, order 0, PG_readahead `ra_pages / 4` from the end) and counts a
/// major fault; a hit counts a minor fault and lowers `mmap_miss`; a sequential walk that
/// faults every 16 pages (fault-around) takes one major fault per 16 pages after the first
/// window; VM_HUGEPAGE reads two PMD folios; VM_RAND_READ reads only the page.
#[test]
fn filemap_fault_read_around_and_hugepage() {
    let mut mm = dma32(32, 1, tun_kb(128));
    let f = mm.add_mapping(Mapping::large_folios());
    let file = 4096;
    let mut ra = ReadaheadState::default();
    let maj0 = mm.stats[Stat::pgmajfault as usize];
    let st = mm.filemap_fault(0, f, &mut ra, FileVma::default(), 100, file);
    assert_eq!(st.miss_pages, 1);
    assert_eq!(mm.stats[Stat::pgmajfault as usize] - maj0, 1);
    for i in 84..116 {
        assert!(mm.filemap_lookup(f, i).is_some(), "page {i} read around");
    }
    assert!(mm.filemap_lookup(f, 83).is_none() && mm.filemap_lookup(f, 116).is_none());
    assert_eq!(ra.mmap_miss, 1);
    let hit = mm.filemap_fault(0, f, &mut ra, FileVma::default(), 90, file);
    assert_eq!((hit.hit_pages, hit.miss_pages), (1, 0));
    assert_eq!(ra.mmap_miss, 0);
    assert_eq!(mm.stats[Stat::pgmajfault as usize] - maj0, 1);

    // A sequential walk of 1024 pages faulting every 16th page (and any missing page).
    let g = mm.add_mapping(Mapping::large_folios());
    let mut ra = ReadaheadState::default();
    let maj = mm.stats[Stat::pgmajfault as usize];
    for p in 0..1024u64 {
        if p % 16 == 0 || mm.filemap_lookup(g, p).is_none() {
            mm.filemap_fault(0, g, &mut ra, FileVma::default(), p, file);
        }
    }
    let majors = mm.stats[Stat::pgmajfault as usize] - maj;
    assert!(
        (60..=70).contains(&majors),
        "{majors} major faults for 1024 pages read around 32 at a time"
    );

    // VM_HUGEPAGE: two PMD-order folios at the aligned index.
    let h = mm.add_mapping(Mapping::large_folios());
    let mut ra = ReadaheadState::default();
    let vma = FileVma {
        hugepage: true,
        ..Default::default()
    };
    let st = mm.filemap_fault(0, h, &mut ra, vma, 700, file);
    assert_eq!(st.added[9], 2, "two PMD folios: {st:?}");
    let id = mm.filemap_lookup(h, 700).unwrap();
    assert_eq!(mm.folios.get(id).order, 9);
    assert_eq!(mm.folios.get(id).index, 512);

    // VM_RAND_READ: only the faulting page.
    let r = mm.add_mapping(Mapping::large_folios());
    let mut ra = ReadaheadState::default();
    let vma = FileVma {
        rand_read: true,
        ..Default::default()
    };
    let st = mm.filemap_fault(0, r, &mut ra, vma, 10, file);
    assert_eq!(st.added.iter().sum::<u64>(), 1);
    assert!(mm.filemap_lookup(r, 11).is_none());
}

/// §19.1 item 9, `global_dirty_limits`: the background and throttling thresholds are
/// `vm.dirty_background_ratio` and `vm.dirty_ratio` percent of the dirtyable memory, and a
/// background ratio at or above the other is halved from it.
#[test]
fn s19_1_9_dirty_thresholds_follow_the_ratios() {
    let mut mm = dma32(16, 1, tun_kb(1024));
    let free: u64 = mm.zones.iter().map(|z| z.nr_free_pages().max(0) as u64).sum();
    assert_eq!(
        mm.dirty_thresholds(),
        (free * 10 / 100, free * 20 / 100),
        "6.18 defaults"
    );
    mm.tun.dirty_ratio = 40;
    mm.tun.dirty_background_ratio = 5;
    assert_eq!(mm.dirty_thresholds(), (free * 5 / 100, free * 40 / 100));
    mm.tun.dirty_background_ratio = 50;
    assert_eq!(mm.dirty_thresholds(), (free * 40 / 100 / 2, free * 40 / 100));
}

/// `vm.dirty_expire_centisecs`: the flusher's pass writes back only what has been dirty for
/// that long.
#[test]
fn s19_1_9_writeback_expired_follows_dirty_expire_centisecs() {
    let mut mm = dma32(16, 1, tun_kb(1024));
    let m = mm.add_mapping(Mapping::xfs_like());
    let st = mm.filemap_write(0, m, 0, 16 << 10);
    assert!(st.added.iter().sum::<u64>() > 0);
    let dirty = mm.cache.nr_dirty;
    assert!(dirty > 0);
    mm.tun.dirty_expire_centisecs = 100; // 1 s
    mm.cur.now_ns = 999_999_999;
    assert_eq!(mm.writeback_expired(), 0, "dirty for less than 1 s");
    mm.cur.now_ns = 1_000_000_000;
    assert_eq!(mm.writeback_expired(), dirty);
    assert_eq!(mm.cache.nr_dirty, 0);
}

/// §25.4, `balance_dirty_pages` (`balance_domain_limits` → `domain_dirty_avail(dtc, true)`):
/// a writer is throttled when its dirty pages **plus those under writeback** exceed the
/// throttling threshold, so a writer cannot run ahead of a slow device by handing its dirty
/// pages to the flusher; the pages leave the count when the device completes them, whether or
/// not the gauge has been settled since.
#[test]
fn s25_4_dirty_throttle_counts_pages_under_writeback() {
    let mut mm = dma32(16, 1, tun_kb(1024));
    let thresh = mm.dirty_thresholds().1;
    let m = mm.add_mapping(Mapping::no_large_folios());
    let pages = thresh + 64;
    mm.filemap_write(0, m, 0, pages * 4096);
    assert!(mm.cache.nr_dirty > mm.dirty_thresholds().1);
    assert!(mm.dirty_exceeded());
    // The flusher hands everything to a slow device: nothing is dirty, all under writeback.
    mm.cache.writeback.io_ns = 1_000_000;
    mm.cur.now_ns = 1_000;
    assert_eq!(mm.writeback_oldest(0), pages);
    assert_eq!(mm.cache.nr_dirty, 0);
    assert_eq!(mm.nr_writeback_now(), pages);
    assert!(mm.dirty_exceeded(), "dirty + writeback above the threshold");
    // The device completes all but 32 pages (one I/O): below the threshold, not yet settled.
    let end = mm.cache.writeback.busy_until_ns;
    mm.cur.now_ns = end - 1_000_000;
    assert_eq!(mm.nr_writeback_now(), 32);
    assert_eq!(
        mm.stat(Stat::nr_writeback),
        pages,
        "the gauge moves at the next settle"
    );
    assert!(!mm.dirty_exceeded());
    mm.writeback_settle();
    assert_eq!(mm.stat(Stat::nr_writeback), 32);
    assert_eq!(mm.nr_writeback_now(), 32);
}
