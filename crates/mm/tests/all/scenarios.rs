//! Scenario tests without a clock (issue 4, item 7): on fragmented machines, the work each
//! policy performs is the work docs/model predicts — THP faults under every defrag value
//! (§11.2), and defrag_mode's refusal to pollute MOVABLE blocks (§8, §7.4 "Consequences").

use crate::common;

use common::*;
use fraglab_mm::folio::FolioKind;
use fraglab_mm::huge_memory::{ThpDefrag, ThpEnabled};
use fraglab_mm::mmzone::WMARK_HIGH;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, MigrateType, Mm, Tunables, Wakeup};

const NO_RECLAIM: Gfp = Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::DIRECT_RECLAIM);

/// Half of memory free in order-0 holes between anon pages: compaction can build a THP.
fn compactable() -> Mm {
    let mut mm = dma32(16, 1, tun_kb(128));
    let mut all = Vec::new();
    while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
        all.push(id);
    }
    for id in all.into_iter().step_by(2) {
        mm.free_folio(0, id);
    }
    mm.drain_all_pages();
    mm.kswapd_until_sleep(0, 4);
    mm.take_wakeups();
    mm
}

/// Memory full of anon and clean page cache, interleaved; kswapd has brought free memory to
/// the high watermark. Far too little is free for order-9 compaction (§9.2: SKIPPED), but
/// direct reclaim can make progress.
fn tight() -> Mm {
    let mut mm = dma32(16, 1, tun_kb(128));
    fill_anon_and_file(&mut mm);
    mm.kswapd_until_sleep(0, 8);
    mm.take_wakeups();
    mm
}

/// What a THP fault did, read from the counters and wake-ups a developer would look at.
#[derive(Debug, PartialEq, Eq)]
struct Work {
    compacted: bool,
    reclaimed: bool,
    kswapd_for_thp: bool,
    thp: bool,
}

fn fault(mut mm: Mm, defrag: ThpDefrag, madvised: bool) -> Work {
    mm.thp.enabled = ThpEnabled::Always;
    mm.thp.defrag = defrag;
    let stall = mm.stat(Stat::compact_stall);
    let allocstall = mm.stat(Stat::allocstall_movable);
    let id = mm.do_anonymous_fault(0, madvised).unwrap();
    let w = mm.take_wakeups();
    check(&mm);
    Work {
        compacted: mm.stat(Stat::compact_stall) > stall,
        reclaimed: mm.stat(Stat::allocstall_movable) > allocstall,
        kswapd_for_thp: w
            .iter()
            .any(|w| matches!(w, Wakeup::Kswapd { nid: 0, order: 9, .. })),
        thp: mm.folios.get(id).order == 9,
    }
}

fn work(compacted: bool, reclaimed: bool, kswapd_for_thp: bool, thp: bool) -> Work {
    Work {
        compacted,
        reclaimed,
        kswapd_for_thp,
        thp,
    }
}

/// §11.2 table, on a machine where compaction can succeed: direct compaction exactly for the
/// gfps with __GFP_DIRECT_RECLAIM, a kswapd wake exactly for those with KSWAPD_RECLAIM.
#[test]
fn s11_2_thp_fault_work_per_defrag_value_compactable_machine() {
    use ThpDefrag::*;
    let cases = [
        (Always, true, work(true, false, false, true)),
        (Always, false, work(true, false, false, true)),
        (Defer, true, work(false, false, true, false)),
        (Defer, false, work(false, false, true, false)),
        (DeferMadvise, true, work(true, false, false, true)),
        (DeferMadvise, false, work(false, false, true, false)),
        (Madvise, true, work(true, false, false, true)),
        (Madvise, false, work(false, false, false, false)),
        (Never, true, work(false, false, false, false)),
        (Never, false, work(false, false, false, false)),
    ];
    for (defrag, m, want) in cases {
        assert_eq!(fault(compactable(), defrag, m), want, "{defrag:?} madvised={m}");
    }
}

/// §11.2 / §7.4 on a machine where order-9 compaction is SKIPPED: a madvised fault with direct
/// reclaim (always, defer+madvise, madvise) runs the full costly slow path: reclaim, which in
/// reclaim/compaction mode continues until compaction can go ahead (§10.4.5
/// `should_continue_reclaim`), then SYNC_LIGHT direct compaction; the
/// NORETRY variant (always, !M) gives up at the skipped compaction without reclaim (both the
/// THISNODE|NORETRY attempt and the second one); defer only wakes kswapd.
#[test]
fn s11_2_thp_fault_work_per_defrag_value_tight_machine() {
    use ThpDefrag::*;
    let cases = [
        (Always, true, work(true, true, false, false)),
        (Always, false, work(false, false, false, false)),
        (Defer, true, work(false, false, true, false)),
        (DeferMadvise, true, work(true, true, false, false)),
        (DeferMadvise, false, work(false, false, true, false)),
        (Madvise, true, work(true, true, false, false)),
        (Madvise, false, work(false, false, false, false)),
        (Never, true, work(false, false, false, false)),
    ];
    for (defrag, m, want) in cases {
        assert_eq!(fault(tight(), defrag, m), want, "{defrag:?} madvised={m}");
    }
}

/// A tiny deterministic generator (xorshift64*), so the scenario needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn pollution(mm: &Mm) -> u64 {
    let (u, m) = (MigrateType::Unmovable.idx(), MigrateType::Movable.idx());
    mm.fallbacks.steal[u][m] + mm.fallbacks.claim_partial[u][m]
}

/// §8 D1–D5 and §7.4 "Consequences": under defrag_mode = 1 an unmovable allocation takes a
/// page from a partially used MOVABLE block (a steal, or a claim of a block that is not
/// wholly free) only after reclaim and compaction were exhausted and the slow path dropped
/// ALLOC_NOFRAGMENT (D5); a non-reclaiming one (GFP_ATOMIC, GFP_NOWAIT) never does. With
/// defrag_mode = 0 the same workload pollutes MOVABLE blocks freely.
#[test]
fn s8_defrag_mode_unmovable_requests_never_pollute_movable_blocks_before_d5() {
    for seed in [1u64, 7, 42] {
        let mut polluted_vanilla = 0;
        for defrag_mode in [false, true] {
            let tun = Tunables {
                defrag_mode,
                ..tun_kb(128)
            };
            let mut mm = dma32(16, 2, tun);
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let mut movable = Vec::new();
            let mut unmovable = Vec::new();
            for _ in 0..12000 {
                let cpu = rng.below(2) as u32;
                match rng.below(10) {
                    0..=4 => {
                        if let Some(id) = mm.alloc_folio(cpu, NO_RECLAIM, 0, FolioKind::Anon, false) {
                            movable.push(id);
                        }
                    }
                    5..=7 => {
                        let gfp = match rng.below(3) {
                            0 => Gfp::GFP_KERNEL,
                            1 => Gfp::GFP_ATOMIC,
                            _ => Gfp::GFP_NOWAIT,
                        };
                        let order = [0, 0, 1, 2, 3][rng.below(5) as usize];
                        let before = pollution(&mm);
                        let r = mm.alloc_folio(cpu, gfp, order, FolioKind::Kernel, false);
                        let polluted = pollution(&mm) > before;
                        if defrag_mode && polluted {
                            assert!(
                                gfp.intersects(Gfp::DIRECT_RECLAIM) && mm.work.last_alloc.nofragment_dropped,
                                "seed {seed}: {gfp:?} order {order} polluted a MOVABLE block"
                            );
                        }
                        if let Some(id) = r {
                            unmovable.push(id);
                        }
                    }
                    _ => {
                        let v = if rng.below(3) == 0 && !unmovable.is_empty() {
                            &mut unmovable
                        } else {
                            &mut movable
                        };
                        if !v.is_empty() {
                            let i = rng.below(v.len() as u64) as usize;
                            let id = v.swap_remove(i);
                            mm.free_folio(cpu, id);
                        }
                    }
                }
                if mm.reclaim.kswapd[0].phase != fraglab_mm::kswapd::KswapdPhase::Sleeping {
                    mm.kswapd_until_sleep(0, 4);
                }
                mm.take_wakeups();
            }
            check(&mm);
            if !defrag_mode {
                polluted_vanilla = pollution(&mm);
            }
        }
        assert!(
            polluted_vanilla > 0,
            "seed {seed}: vanilla must pollute for the test to mean anything"
        );
    }
}

/// §7.4 "Consequences" (the 2026 production report): with defrag_mode = 1, a GFP_ATOMIC
/// request fails while a third of memory is free in MOVABLE blocks, because it may neither
/// steal (NOFRAGMENT) nor reclaim, and fails at step 7 before the D5 drop. With
/// defrag_mode = 0 the same request steals a page from a MOVABLE block. Nothing special-cases
/// GFP_ATOMIC: it falls out of D1–D5 and the step order.
#[test]
fn s8_defrag_mode_gfp_atomic_fails_with_movable_memory_free() {
    for defrag_mode in [false, true] {
        let tun = Tunables {
            defrag_mode,
            ..tun_kb(128)
        };
        let mut mm = dma32(16, 1, tun);
        // Some kernel memory: its first allocation claims a free block (or two) for UNMOVABLE.
        let kernel = Gfp::GFP_KERNEL.without(Gfp::DIRECT_RECLAIM);
        for _ in 0..256 {
            mm.alloc_folio(0, kernel, 0, FolioKind::Kernel, false).unwrap();
        }
        // Everything else MOVABLE anon, then every third page freed: no free pageblock.
        let mut anon = Vec::new();
        while let Some(id) = mm.alloc_folio(0, NO_RECLAIM, 0, FolioKind::Anon, false) {
            anon.push(id);
        }
        for id in anon.into_iter().step_by(3) {
            mm.free_folio(0, id);
        }
        mm.drain_all_pages();
        let z = &mm.zones[DMA32];
        assert!(z.nr_free_pages() > 4 * z.wmark_pages(WMARK_HIGH) as i64);
        assert_eq!(z.stat(Stat::nr_free_pages_blocks), 0);
        // Use up the UNMOVABLE blocks' free pages with more kernel allocations (under
        // defrag_mode none of them may fall back into a MOVABLE block).
        let before = pollution(&mm);
        let unmovable_free = |mm: &Mm| {
            mm.zones[DMA32]
                .area
                .nr_by_type
                .iter()
                .map(|r| r[MigrateType::Unmovable.idx()])
                .sum::<u64>()
        };
        loop {
            mm.drain_all_pages();
            if unmovable_free(&mm) == 0 {
                break;
            }
            mm.alloc_folio(0, kernel, 0, FolioKind::Kernel, false).unwrap();
        }
        if defrag_mode {
            assert_eq!(pollution(&mm), before);
        }
        let before = pollution(&mm);
        let r = mm.alloc_pages(0, Gfp::GFP_ATOMIC, 0);
        check(&mm);
        if defrag_mode {
            assert_eq!(r, None, "defrag_mode: GFP_ATOMIC fails");
            assert_eq!(pollution(&mm), before);
            assert!(
                !mm.work.last_alloc.nofragment_dropped,
                "fails at step 7, before D5"
            );
        } else {
            assert!(r.is_some(), "vanilla: GFP_ATOMIC steals from a MOVABLE block");
            assert!(pollution(&mm) > before);
        }
    }
}
