//! DAMON-based reclaim (docs/model §27): the kdamond's pageout scheme on paddr regions.

use crate::common;

use common::*;
use fraglab_mm::damon::{DamonConfig, Kdamond};
use fraglab_mm::filemap::{Mapping, ReadaheadState};
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::Mm;

const SEC: u64 = 1_000_000_000;

/// Runs `kd` for `secs` of virtual time from `*now`; returns the time reached.
fn run(kd: &mut Kdamond, mm: &mut Mm, now: &mut u64, secs: u64) {
    let end = *now + secs * SEC;
    while *now < end {
        *now += kd.step(mm, *now);
    }
}

/// A 64 MiB machine whose page cache (one large-folio file read in full, `pages` pages) and
/// `anon` anonymous order-0 folios fill it; returns the file's folios and the anon folios.
fn cached(pages: u64, anon: usize) -> (Mm, Vec<FolioId>, Vec<FolioId>) {
    let mut mm = dma32(32, 1, tun_kb(128));
    let f = mm.add_mapping(Mapping::large_folios());
    let mut ra = ReadaheadState {
        ra_pages: 512,
        ..Default::default()
    };
    let mut pos = 0;
    while pos < pages {
        mm.filemap_read(0, f, &mut ra, pos, 64, pages);
        pos += 64;
    }
    let g = fraglab_mm::Gfp::GFP_HIGHUSER_MOVABLE.without(fraglab_mm::Gfp::DIRECT_RECLAIM);
    let anon: Vec<FolioId> = (0..anon)
        .map_while(|_| mm.alloc_folio(0, g, 0, FolioKind::Anon, false))
        .collect();
    let file: Vec<FolioId> = mm
        .folios
        .live()
        .filter(|(_, f)| f.kind == FolioKind::File)
        .map(|(id, _)| id)
        .collect();
    (mm, file, anon)
}

/// S2's scheme with a smaller region count for a 64 MiB machine.
fn s2_small() -> DamonConfig {
    DamonConfig {
        min_nr_regions: 16,
        max_nr_regions: 128,
        ..DamonConfig::s2()
    }
}

fn pages_of(mm: &Mm, kind: FolioKind) -> u64 {
    mm.folios
        .live()
        .filter(|(_, f)| f.kind == kind)
        .map(|(_, f)| 1u64 << f.order)
        .sum()
}

/// §27.2 item 4, §27.3: each application (one per 5 s aggregation, a fresh 1 s window each
/// time) charges at most the size quota of region span, whole regions with the last split at
/// the remaining quota; the next window resumes after the last charged address.
#[test]
fn section_27_2_quota_bounds_region_span_per_window() {
    let (mut mm, _, _) = cached(8192, 1024);
    let cfg = DamonConfig {
        quota_bytes: 4 << 20,
        ..s2_small()
    };
    let mut kd = Kdamond::new(cfg, &mm, 1);
    let mut now = 0;
    run(&mut kd, &mut mm, &mut now, 150);
    let mut windows: Vec<(u64, Vec<(u32, u32)>)> = Vec::new();
    for a in &kd.applied {
        match windows.last_mut() {
            Some((t, v)) if *t == a.now_ns => v.push((a.start, a.end)),
            _ => windows.push((a.now_ns, vec![(a.start, a.end)])),
        }
    }
    assert!(windows.len() >= 10, "applications in {} windows", windows.len());
    for (t, v) in &windows {
        let span: u64 = v.iter().map(|(s, e)| (e - s) as u64 * 4096).sum();
        assert!(span <= 4 << 20, "at {t}: {span} bytes charged");
        assert!(
            v.windows(2).all(|w| w[0].1 <= w[1].0),
            "address order at {t}: {v:?}"
        );
    }
    // Windows that reached the quota charged exactly it (the last region split).
    let full = windows
        .iter()
        .filter(|(_, v)| v.iter().map(|(s, e)| (e - s) as u64 * 4096).sum::<u64>() == 4 << 20)
        .count();
    assert!(full >= 5, "{full} full windows");
    // The window after a full one starts after (one page past, `charge_addr_from` = end + 1)
    // where it stopped, unless it wrapped around to the start of memory.
    let mut resumed = 0;
    for w in windows.windows(2) {
        let last_end = w[0].1.last().unwrap().1;
        let next_start = w[1].1[0].0;
        if next_start >= last_end {
            resumed += 1;
        }
    }
    assert!(
        resumed >= windows.len() / 2,
        "{resumed} of {} windows resumed",
        windows.len()
    );
    assert_eq!(
        kd.stats.sz_tried,
        windows
            .iter()
            .flat_map(|(_, v)| v)
            .map(|(s, e)| (e - s) as u64 * 4096)
            .sum::<u64>()
    );
    check(&mm);
}

/// §27.3: with S2's filters [anon reject, unmapped allow] only page cache goes (the model's
/// file folios are unmapped), every anonymous folio stays.
#[test]
fn section_27_3_s2_filters_free_only_unmapped_page_cache() {
    let (mut mm, file, anon) = cached(8192, 4096);
    // With swap, an anonymous folio that passed the filters would be swapped out.
    mm.reclaim.swap.total = 1 << 20;
    let file_before = pages_of(&mm, FolioKind::File);
    let mut kd = Kdamond::new(s2_small(), &mm, 7);
    let mut now = 0;
    run(&mut kd, &mut mm, &mut now, 300);
    let file_after = pages_of(&mm, FolioKind::File);
    assert!(
        file_after < file_before / 4,
        "file pages {file_before} -> {file_after}"
    );
    assert!(file.iter().any(|&id| !mm.folios.folios[id as usize].live()));
    assert!(anon
        .iter()
        .all(|&id| mm.folios.folios[id as usize].live()
            && mm.folios.folios[id as usize].kind == FolioKind::Anon));
    assert_eq!(kd.stats.sz_applied, (file_before - file_after) * 4096);
    assert_eq!(mm.stat(Stat::pswpout), 0);
    check(&mm);
}

/// §27.2 item 6: DAMON's pageout bypasses the LRU scan: no pgscan/pgsteal, but pgfree; dirty
/// file folios are activated (pgactivate, nr_vmscan_immediate_reclaim), not freed.
#[test]
fn section_27_2_no_pgscan_pgsteal() {
    let (mut mm, file, _) = cached(4096, 0);
    let dirty: Vec<FolioId> = file.iter().copied().step_by(3).collect();
    for &id in &dirty {
        mm.folio_mark_dirty(id, true);
    }
    let (free0, act0) = (mm.stat(Stat::pgfree), mm.stat(Stat::pgactivate));
    let mut kd = Kdamond::new(s2_small(), &mm, 3);
    let mut now = 0;
    run(&mut kd, &mut mm, &mut now, 200);
    for s in [
        Stat::pgscan_kswapd,
        Stat::pgscan_direct,
        Stat::pgsteal_kswapd,
        Stat::pgsteal_direct,
        Stat::pgsteal_file,
        Stat::pgsteal_anon,
    ] {
        assert_eq!(mm.stat(s), 0, "{s:?}");
    }
    assert!(mm.stat(Stat::pgfree) > free0);
    assert!(mm.stat(Stat::pgactivate) > act0);
    assert!(mm.stat(Stat::nr_vmscan_immediate_reclaim) > 0);
    assert!(dirty
        .iter()
        .all(|&id| mm.folios.folios[id as usize].live() && mm.folios.folios[id as usize].active()));
    check(&mm);
}

/// §27.2 item 5, §27.4: a clean file folio is freed whole, at its order (its pages become one
/// free chunk at least that large), and leaves a shadow entry.
#[test]
fn section_27_2_freed_at_their_order() {
    let (mut mm, file, _) = cached(8192, 0);
    let large: Vec<(FolioId, u32, u8, u64)> = file
        .iter()
        .map(|&id| {
            let f = &mm.folios.folios[id as usize];
            (id, f.pfn, f.order, f.token())
        })
        .filter(|&(_, _, o, _)| o >= 2)
        .collect();
    assert!(large.len() > 10, "{} large folios", large.len());
    assert_eq!(mm.cache.index.shadows_len(), 0);
    let mut kd = Kdamond::new(s2_small(), &mm, 5);
    let mut now = 0;
    run(&mut kd, &mut mm, &mut now, 100);
    let mut freed = 0;
    for &(id, pfn, order, token) in &large {
        if mm.folio_is(id, token) {
            continue;
        }
        freed += 1;
        match mm.enclosing_chunk(pfn) {
            Some((head, o)) => {
                if mm.folio_at(head).is_none() {
                    assert!(
                        o >= order as u32,
                        "folio of order {order} at {pfn:#x}: free chunk of order {o}"
                    );
                }
            }
            None => panic!("no chunk at {pfn:#x}"),
        }
    }
    assert!(freed > 10, "{freed} large folios freed");
    assert!(mm.cache.index.shadows_len() > 0, "shadow entries");
    check(&mm);
}

/// §27.2 item 1: with DAMON_RECLAIM's watermarks (500/400/200 per thousand) the scheme is
/// inactive above 50 % free and below 20 % free, activates below 40 %, and, once active, runs
/// until free memory exceeds 50 %.
#[test]
fn section_27_2_watermarks_activate_and_deactivate() {
    let cfg = DamonConfig {
        age: (0, u32::MAX),
        wmarks: Some(fraglab_mm::damon::Watermarks {
            interval_us: 1_000_000,
            high: 500,
            mid: 400,
            low: 200,
        }),
        ..DamonConfig::damon_reclaim()
    };
    // Mostly free (> 50 %): never active, nothing applied.
    let (mut mm, _, _) = cached(2048, 0);
    assert!(Kdamond::free_mem_rate(&mm) > 500);
    let mut kd = Kdamond::new(cfg.clone(), &mm, 2);
    let mut now = 0;
    run(&mut kd, &mut mm, &mut now, 20);
    assert!(!kd.active && kd.applied.is_empty());
    // About 30 % free: active; reclaims until above 50 %, then deactivated.
    let (mut mm, _, _) = cached(11_000, 0);
    let rate = Kdamond::free_mem_rate(&mm);
    assert!((200..400).contains(&rate), "free rate {rate}");
    let mut kd = Kdamond::new(cfg.clone(), &mm, 2);
    let mut now = kd.step(&mut mm, 0);
    assert!(kd.active, "active at {rate}");
    run(&mut kd, &mut mm, &mut now, 60);
    assert!(!kd.applied.is_empty());
    let after = Kdamond::free_mem_rate(&mm);
    assert!(after > 500, "free rate {rate} -> {after}");
    assert!(!kd.active, "deactivated above high");
    let n = kd.applied.len();
    run(&mut kd, &mut mm, &mut now, 20);
    assert_eq!(kd.applied.len(), n, "nothing applied while inactive");
    // Below 20 % free: left to kswapd.
    let (mut mm, _, _) = cached(8192, 6000);
    let rate = Kdamond::free_mem_rate(&mm);
    assert!(rate < 200, "free rate {rate}");
    let mut kd = Kdamond::new(cfg, &mm, 2);
    let mut now = 0;
    run(&mut kd, &mut mm, &mut now, 20);
    assert!(!kd.active && kd.applied.is_empty());
    check(&mm);
}

/// §27.2 items 2–3: a region whose pages are read at every sample counts accesses and is not
/// aged; unread regions age by one per aggregation.
#[test]
fn section_27_2_sampling_counts_accesses_and_ages_idle_regions() {
    let (mut mm, file, _) = cached(8192, 0);
    let cfg = DamonConfig {
        age: (u32::MAX, u32::MAX),
        ..s2_small()
    };
    let mut kd = Kdamond::new(cfg, &mm, 9);
    let mut now = 0;
    // Read every file folio between samples (folio_mark_accessed clears PG_idle).
    for _ in 0..200 {
        now += kd.step(&mut mm, now);
        for &id in &file {
            if mm.folios.folios[id as usize].live() {
                mm.folio_mark_accessed(id);
            }
        }
    }
    let f = &mm.folios.folios[file[0] as usize];
    let hot = kd
        .regions
        .iter()
        .find(|r| r.start <= f.pfn && f.pfn < r.end)
        .unwrap();
    assert!(hot.last_nr_accesses >= 5, "{hot:?}");
    let cold = kd.regions.last().unwrap();
    assert!(cold.age >= 10 && cold.last_nr_accesses == 0, "{cold:?}");
}

/// §27.2 item 6: the kdamond emits `damon:damos_before_apply` for every region the scheme is
/// applied to (the region after the quota's split, its accesses and age before the reset, the
/// target's region count) and `vmscan:mm_vmscan_reclaim_pages` once per application whose
/// folios reached `reclaim_pages` (none for a region with nothing that passed the filters):
/// its pages scanned and reclaimed, and the dirty folios it activated.
#[test]
fn s27_tracepoints_fields_and_counts() {
    use fraglab_mm::node::trace_kind;
    use fraglab_mm::trace::{parse_trace_line, render_trace, TraceEvent};
    let (mut mm, file, _) = cached(8192, 512);
    let dirty: Vec<FolioId> = file.iter().copied().step_by(5).collect();
    for &id in &dirty {
        mm.folio_mark_dirty(id, true);
    }
    mm.set_trace_mask(trace_kind::DAMON | trace_kind::VMSCAN_RECLAIM_PAGES);
    let mut kd = Kdamond::new(s2_small(), &mm, 11);
    mm.cur.pid = 62;
    mm.cur.comm = "kdamond.0".into();
    let mut now = 0;
    while now < 200 * SEC {
        mm.cur.now_ns = now;
        now += kd.step(&mut mm, now);
    }
    let recs = mm.take_trace();
    let text = render_trace(&recs);
    // Every line reads back as the record it came from.
    for (l, r) in text.lines().zip(&recs) {
        assert_eq!(parse_trace_line(l).as_ref(), Some(r), "{l}");
        assert_eq!((r.pid, r.cpu, r.comm.as_str()), (62, 0, "kdamond.0"));
    }
    let before: Vec<&TraceEvent> = recs
        .iter()
        .map(|r| &r.event)
        .filter(|e| matches!(e, TraceEvent::DamosBeforeApply { .. }))
        .collect();
    assert!(kd.applied.len() > 20, "{} applications", kd.applied.len());
    assert_eq!(before.len(), kd.applied.len());
    for (e, a) in before.iter().zip(&kd.applied) {
        let TraceEvent::DamosBeforeApply {
            context_idx,
            scheme_idx,
            target_idx,
            nr_regions,
            start,
            end,
            nr_accesses,
            age,
        } = **e
        else {
            unreachable!()
        };
        assert_eq!((context_idx, scheme_idx, target_idx), (0, 0, 0));
        assert_eq!((start, end), (a.start as u64 * 4096, a.end as u64 * 4096));
        assert_eq!(
            (nr_accesses, age, nr_regions as usize),
            (a.nr_accesses, a.age, a.nr_regions)
        );
        // The scheme's access pattern: 0-1 accesses, at least 12 aggregations old.
        assert!(nr_accesses <= 1 && age >= 12, "{e:?}");
    }
    let span: u64 = before
        .iter()
        .map(|e| match e {
            TraceEvent::DamosBeforeApply { start, end, .. } => end - start,
            _ => 0,
        })
        .sum();
    assert_eq!(span, kd.stats.sz_tried);
    let mut calls = 0;
    let (mut scanned, mut reclaimed, mut activated) = (0i64, 0i64, 0i64);
    for r in &recs {
        if let TraceEvent::MmVmscanReclaimPages {
            nr_scanned,
            nr_reclaimed,
            nr_dirty,
            nr_activate,
            ..
        } = r.event
        {
            calls += 1;
            assert!(nr_scanned > 0 && nr_reclaimed + nr_activate[1] as i64 <= nr_scanned);
            assert_eq!(nr_dirty, nr_activate[1] as i64, "dirty page cache is activated");
            assert_eq!(nr_activate[0], 0, "no anonymous folio passes S2's filters");
            scanned += nr_scanned;
            reclaimed += nr_reclaimed;
            activated += nr_activate[1] as i64;
        }
    }
    // One call per application whose folios reached reclaim_pages: fewer than the
    // applications (regions of free memory or anonymous folios give none).
    let with_folios = kd.applied.iter().filter(|a| a.freed > 0).count();
    assert!(calls >= with_folios && calls < kd.applied.len(), "{calls} calls");
    assert_eq!(reclaimed as u64 * 4096, kd.stats.sz_applied);
    assert!(activated > 0);
    assert_eq!(scanned as u64 * 4096, kd.stats.sz_ops_filter_passed);
    check(&mm);
}

/// §27.2 item 3, §27.3: a kdamond booted with the regions and ages a running one had (a
/// snapshot's) applies S2's scheme at its first aggregation (5 s) and frees cold page cache
/// there; a kdamond started cold (every region at age 0) applies nothing until its regions
/// are 12 aggregations old (60 s).
#[test]
fn s27_booted_kdamond_with_aged_regions_applies_in_its_first_aggregation() {
    use fraglab_mm::damon::StartRegion;
    let (mut warm_mm, _, _) = cached(8192, 0);
    let (mut cold_mm, _, _) = cached(8192, 0);
    let file0 = pages_of(&warm_mm, FolioKind::File);
    // The kernel's regions when the pages were read: 16 regions over the memory, cold (no
    // access in the last aggregation) and 80 aggregations old, one of them just applied
    // (age 0).
    let first = warm_mm.zones.iter().find(|z| z.managed > 0).unwrap().start_pfn;
    let end = warm_mm.end_pfn();
    let step = (end - first) / 16;
    let start: Vec<StartRegion> = (0..16)
        .map(|i| StartRegion {
            start: first + i * step,
            end: if i == 15 { end } else { first + (i + 1) * step },
            nr_accesses: 0,
            age: if i == 3 { 0 } else { 80 },
        })
        .collect();
    let warm_cfg = DamonConfig {
        start: start.clone(),
        ..s2_small()
    };
    let mut warm = Kdamond::new(warm_cfg, &warm_mm, 9);
    // Split once, as the kernel does right after the aggregation it was recorded at: the
    // same span, more regions, the ages kept.
    assert!(warm.regions.len() > 16);
    assert_eq!(warm.regions[0].start, first);
    assert_eq!(warm.regions.last().unwrap().end, end);
    assert!(warm.regions.iter().all(|r| r.age == 80 || r.age == 0));
    let mut cold = Kdamond::new(s2_small(), &cold_mm, 9);
    let (mut tw, mut tc) = (0, 0);
    run(&mut warm, &mut warm_mm, &mut tw, 6);
    run(&mut cold, &mut cold_mm, &mut tc, 6);
    let first_aggr = 5 * SEC;
    assert!(
        !warm.applied.is_empty() && warm.applied.iter().all(|a| a.now_ns == first_aggr),
        "{:?}",
        warm.applied.first()
    );
    // Aged 81 at that merge (80 + 1); the region recorded just applied is not eligible.
    assert!(warm.applied.iter().all(|a| a.age == 81));
    assert!(warm.applied.iter().map(|a| a.freed).sum::<u64>() > 0);
    assert!(pages_of(&warm_mm, FolioKind::File) < file0);
    assert!(cold.applied.is_empty());
    assert_eq!(pages_of(&cold_mm, FolioKind::File), file0);
    // The cold one starts only once its regions are 12 aggregations old.
    run(&mut cold, &mut cold_mm, &mut tc, 54);
    assert!(cold.applied.is_empty(), "{:?}", cold.applied.first());
    run(&mut cold, &mut cold_mm, &mut tc, 10);
    assert!(!cold.applied.is_empty());
    assert!(cold.applied[0].now_ns >= 60 * SEC);
    check(&warm_mm);
}

/// §27.3 (S2's targets), §27.1 (DAMON_RECLAIM's default): on an x86-64 machine of 4 GiB the
/// PCI hole [3 GiB, 4 GiB) is not monitored. S2's kdamond covers [16 MiB, 3 GiB) and [4 GiB,
/// end) and its sweep goes from below the hole to above it without charging the quota for
/// the hole (the model monitored [first managed pfn, end) before: eight aggregations of each
/// pass, 40 s, went on 1 GiB with no page in it). DAMON_RECLAIM's default is the largest System
/// RAM range, here the one below the hole.
#[test]
fn s27_monitored_ranges_leave_out_the_pci_hole() {
    use fraglab_mm::mmzone::MachineConfig;
    let m = MachineConfig::x86_64(4 << 30, true, 1).unwrap();
    let mut mm = Mm::new(&m, fraglab_mm::Tunables::default()).unwrap();
    let (hole, four_g) = (3u32 << 18, 4u32 << 18);
    let end = mm.end_pfn();
    assert_eq!(end, four_g + (1 << 18));
    let mut kd = Kdamond::new(DamonConfig::s2(), &mm, 3);
    assert_eq!(kd.regions.first().unwrap().start, (16 << 20) / 4096);
    assert_eq!(kd.regions.last().unwrap().end, end);
    let outside = |s: u32, e: u32| e <= hole || s >= four_g;
    assert!(kd.regions.iter().all(|r| outside(r.start, r.end)));
    let total: u64 = kd.regions.iter().map(|r| (r.end - r.start) as u64).sum();
    assert_eq!(total, (hole - 4096 + (end - four_g)) as u64);
    let reclaim = Kdamond::new(DamonConfig::damon_reclaim(), &mm, 3);
    let (s, e) = Kdamond::largest_ram_range(&mm).unwrap();
    assert!(e <= hole && e - s > (2 << 18), "{s:#x}-{e:#x}");
    assert_eq!(
        (
            reclaim.regions.first().unwrap().start,
            reclaim.regions.last().unwrap().end
        ),
        (s, e)
    );
    // A pass of S2's sweep over the idle machine: 128 MiB of region span per aggregation from
    // 60 s on, none of it in the hole, across it in one aggregation.
    let mut now = 0;
    run(&mut kd, &mut mm, &mut now, 200);
    assert!(kd.applied.iter().all(|a| outside(a.start, a.end)));
    assert!(
        kd.applied.iter().any(|a| a.start >= four_g),
        "the sweep reached 4 GiB by 200 s"
    );
    let mut per_window: Vec<(u64, u64)> = Vec::new();
    for a in &kd.applied {
        let sz = (a.end - a.start) as u64 * 4096;
        match per_window.last_mut() {
            Some((t, v)) if *t == a.now_ns => *v += sz,
            _ => per_window.push((a.now_ns, sz)),
        }
    }
    assert!(per_window.iter().all(|&(_, v)| v <= 128 << 20));
    // 3 GiB less 16 MiB below the hole: 24 windows, the 24th ending above 4 GiB.
    let first_above = kd.applied.iter().find(|a| a.start >= four_g).unwrap().now_ns;
    let windows_before = per_window.iter().filter(|&&(t, _)| t < first_above).count();
    assert!(windows_before <= 24, "{windows_before} windows below the hole");
    check(&mm);
}

/// §27.2 item 4: the applications recorded with the regions used up the quota, so the booted
/// kdamond's first application resumes after the last of them (`charge_addr_from`), as the
/// kernel's would; with applications short of the quota it starts at the lowest address.
#[test]
fn s27_booted_kdamond_resumes_after_the_recorded_applications() {
    use fraglab_mm::damon::StartRegion;
    let (mm, _, _) = cached(8192, 0);
    let first = mm.zones.iter().find(|z| z.managed > 0).unwrap().start_pfn;
    let end = mm.end_pfn();
    let step = (end - first) / 16;
    let start: Vec<StartRegion> = (0..16)
        .map(|i| StartRegion {
            start: first + i * step,
            end: if i == 15 { end } else { first + (i + 1) * step },
            nr_accesses: 0,
            age: 80,
        })
        .collect();
    // 4 MiB of quota = 1024 pages; the recorded aggregation applied exactly that, ending at
    // the middle of memory.
    let mid = first + 8 * step;
    let cfg = |applied: Vec<(u32, u32)>| DamonConfig {
        quota_bytes: 4 << 20,
        start: start.clone(),
        start_applied: applied,
        ..s2_small()
    };
    let first_applied = |c: DamonConfig| {
        let (mut mm, _, _) = cached(8192, 0);
        let mut kd = Kdamond::new(c, &mm, 4);
        let mut now = 0;
        run(&mut kd, &mut mm, &mut now, 6);
        kd.applied.first().map(|a| a.start)
    };
    let resumed = first_applied(cfg(vec![(mid - 1024, mid)])).unwrap();
    assert!(resumed >= mid, "{resumed:#x} < {mid:#x}");
    let fresh = first_applied(cfg(vec![(mid - 512, mid)])).unwrap();
    assert!(fresh < mid - 1024, "{fresh:#x}");
}
