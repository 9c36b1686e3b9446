//! Property tests: random allocate/free sequences (orders 0..=10, the common GFP masks, random
//! CPUs, occasional drains, PCP decay and LRU marking; both defrag_mode values; machines with one
//! zone, DMA32 + Normal, and an x86-64 layout with an unaligned DMA zone). After every operation
//! the debug-vm checker must pass, every page must be accounted for, buddies below pageblock
//! order must be merged, and the HighAtomic reserve must match the HighAtomic pageblocks. After
//! freeing everything and draining, all managed memory is free and merged as at boot. The same
//! sequence run twice gives the same state.

use crate::common;

use common::*;
use fraglab_mm::mmzone::PageKind;
use fraglab_mm::node::trace_kind;
use fraglab_mm::types::PAGEBLOCK_NR_PAGES;
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, MachineConfig, MigrateType, Mm, Tunables, ZoneType};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const GFPS: [Gfp; 6] = [
    Gfp::GFP_KERNEL,
    Gfp::GFP_HIGHUSER_MOVABLE,
    Gfp(Gfp::GFP_KERNEL.0 | Gfp::RECLAIMABLE.0),
    Gfp::GFP_ATOMIC,
    Gfp::GFP_NOWAIT,
    Gfp::GFP_TRANSHUGE_LIGHT,
];

#[derive(Clone, Copy, Debug)]
enum Layout {
    /// One DMA32 zone of 16 pageblocks.
    Dma32Only,
    /// DMA32 (8 blocks) + Normal (16 blocks): the NOFRAGMENT two-pass case.
    Dma32Normal,
    /// `MachineConfig::x86_64(64 MiB, dma)`: DMA at pfn 1 with reserved pages, DMA32 with a
    /// reserved head (unaligned free ranges, a pageblock straddling the DMA zone start).
    X86Dma,
    /// One DMA32 zone of 104 pageblocks: managed/100 >= a pageblock, so high-order atomic
    /// allocations reserve HighAtomic blocks (§5.5).
    Big,
}

#[derive(Clone, Debug)]
struct Setup {
    layout: Layout,
    nr_cpus: u32,
    defrag_mode: bool,
    min_free_kbytes: Option<u64>,
    high_fraction: u32,
    watermark_scale_factor: u64,
}

/// One operation; `n` repeats it (a burst of allocations or frees, each checked on its own).
#[derive(Clone, Copy, Debug)]
enum Op {
    Alloc {
        cpu: u32,
        gfp: usize,
        order: u32,
        n: u32,
    },
    Free {
        cpu: u32,
        pick: usize,
        n: u32,
    },
    /// Allocates until an allocation fails (at most 512 times): memory pressure.
    Fill {
        cpu: u32,
        gfp: usize,
        order: u32,
    },
    Lru {
        pick: usize,
    },
    Drain,
    Decay {
        cpu: u32,
        zone: usize,
    },
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![
            3 => Just(Layout::Dma32Only),
            3 => Just(Layout::Dma32Normal),
            3 => Just(Layout::X86Dma),
            1 => Just(Layout::Big)
        ],
        1u32..=3,
        any::<bool>(),
        prop_oneof![Just(None), Just(Some(128u64)), Just(Some(1024u64))],
        prop_oneof![3 => Just(0u32), 1 => Just(8u32)],
        // 3000 (the maximum) makes low > managed/8 on these zones: PCP high_min > high_max.
        prop_oneof![3 => Just(10u64), 1 => Just(3000u64)],
    )
        .prop_map(
            |(layout, nr_cpus, defrag_mode, min_free_kbytes, high_fraction, watermark_scale_factor)| Setup {
                layout,
                nr_cpus,
                defrag_mode,
                min_free_kbytes,
                high_fraction,
                watermark_scale_factor,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    let order = prop_oneof![6 => 0u32..=3, 2 => 4u32..=8, 2 => 9u32..=10];
    let n = || prop_oneof![4 => Just(1u32), 2 => 2u32..=8, 1 => 9u32..=64];
    prop_oneof![
        10 => (0u32..3, 0..GFPS.len(), order, n())
            .prop_map(|(cpu, gfp, order, n)| Op::Alloc { cpu, gfp, order, n }),
        6 => (0u32..3, any::<usize>(), n()).prop_map(|(cpu, pick, n)| Op::Free { cpu, pick, n }),
        1 => (0u32..3, 0..GFPS.len(), prop_oneof![3 => 0u32..=3, 1 => 4u32..=10])
            .prop_map(|(cpu, gfp, order)| Op::Fill { cpu, gfp, order }),
        1 => any::<usize>().prop_map(|pick| Op::Lru { pick }),
        1 => Just(Op::Drain),
        1 => (0u32..3, 0usize..3).prop_map(|(cpu, zone)| Op::Decay { cpu, zone }),
    ]
}

fn build(s: &Setup) -> Mm {
    let tun = Tunables {
        defrag_mode: s.defrag_mode,
        min_free_kbytes: s.min_free_kbytes,
        percpu_pagelist_high_fraction: s.high_fraction,
        watermark_scale_factor: s.watermark_scale_factor,
        ..Tunables::default()
    };
    let zones = match s.layout {
        Layout::Dma32Only => vec![zone(ZoneType::Dma32, BASE, 16)],
        Layout::Dma32Normal => vec![
            zone(ZoneType::Dma32, BASE, 8),
            zone(ZoneType::Normal, BASE + 4096, 16),
        ],
        Layout::X86Dma => MachineConfig::x86_64(64 << 20, true, s.nr_cpus).unwrap().zones,
        Layout::Big => vec![zone(ZoneType::Dma32, BASE, 104)],
    };
    boot(zones, s.nr_cpus, tun)
}

/// A model run with the caller's bookkeeping of live allocations.
struct Run {
    mm: Mm,
    /// (pfn, order, movable gfp) of every live allocation.
    live: Vec<(u32, u32, bool)>,
    live_pages: u64,
    /// What each operation returned (for the determinism property).
    results: Vec<Option<u32>>,
}

impl Run {
    fn new(s: &Setup) -> Run {
        Run {
            mm: build(s),
            live: Vec::new(),
            live_pages: 0,
            results: Vec::new(),
        }
    }

    /// Applies `op`; with `check`, runs [`Run::verify`] after each single allocation or free.
    fn apply(&mut self, op: Op, check: bool) -> Result<(), TestCaseError> {
        let cpus = self.mm.nr_cpus;
        match op {
            Op::Alloc { cpu, gfp, order, n } => {
                for _ in 0..n {
                    self.alloc(cpu % cpus, GFPS[gfp], order)?;
                    if check {
                        self.verify()?;
                    }
                }
                return Ok(());
            }
            Op::Free { cpu, pick, n } => {
                for i in 0..n as usize {
                    if self.live.is_empty() {
                        break;
                    }
                    let (p, order, _) = self
                        .live
                        .swap_remove(pick.wrapping_add(i.wrapping_mul(2654435761)) % self.live.len());
                    self.mm.free_pages(cpu % cpus, p, order);
                    self.live_pages -= 1 << order;
                    self.results.push(Some(p));
                    if check {
                        self.verify()?;
                    }
                }
                return Ok(());
            }
            Op::Fill { cpu, gfp, order } => {
                for _ in 0..512 {
                    self.alloc(cpu % cpus, GFPS[gfp], order)?;
                    if check {
                        self.verify()?;
                    }
                    if self.results.last() == Some(&None) {
                        break;
                    }
                }
                return Ok(());
            }
            Op::Lru { pick } => {
                // LRU pages are user (movable) allocations.
                let movable: Vec<u32> = self.live.iter().filter(|l| l.2).map(|l| l.0).collect();
                if !movable.is_empty() {
                    let p = movable[pick % movable.len()];
                    self.mm.set_page_owner(p, p, true);
                }
            }
            Op::Drain => {
                self.mm.drain_all_pages();
            }
            Op::Decay { cpu, zone } => {
                let populated: Vec<usize> = (0..self.mm.zones.len())
                    .filter(|&z| self.mm.zones[z].populated())
                    .collect();
                let zi = populated[zone % populated.len()];
                self.mm.decay_pcp_high(cpu % cpus, zi);
            }
        }
        if check {
            self.verify()?;
        }
        Ok(())
    }

    fn alloc(&mut self, cpu: u32, gfp: Gfp, order: u32) -> Result<(), TestCaseError> {
        let r = self.mm.alloc_pages(cpu, gfp, order);
        if let Some(p) = r {
            prop_assert_eq!(self.mm.pages.kind(p), PageKind::Allocated);
            prop_assert_eq!(self.mm.pages.order(p), order);
            prop_assert_eq!(p & ((1 << order) - 1), 0, "unaligned allocation");
            let zi = self.mm.pfn_zone(p).unwrap();
            prop_assert!(zi <= gfp.zone().idx(), "pfn {:#x} above the gfp's zone", p);
            self.live
                .push((p, order, gfp.migratetype() == MigrateType::Movable));
            self.live_pages += 1 << order;
        }
        self.results.push(r);
        Ok(())
    }

    fn verify(&self) -> Result<(), TestCaseError> {
        let mm = &self.mm;
        let c = mm
            .check_invariants()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(c.free + c.pcp + c.allocated, c.managed);
        prop_assert_eq!(c.allocated, self.live_pages);
        // No block is isolated in these runs, so every free page counts.
        prop_assert_eq!(mm.zone_stat_sum(Stat::nr_free_pages), c.free as i64);
        let pcp: u64 = mm.zones.iter().flat_map(|z| z.pcp.iter()).map(|p| p.count).sum();
        prop_assert_eq!(pcp, c.pcp);
        for (zi, z) in mm.zones.iter().enumerate() {
            // §21.5: NR_FREE_PAGES_BLOCKS is whole pageblocks and at most NR_FREE_PAGES.
            let blocks = z.stat(Stat::nr_free_pages_blocks);
            prop_assert!(blocks % PAGEBLOCK_NR_PAGES as i64 == 0 && blocks <= z.nr_free_pages());
            // §5.5: the reserve counts exactly the HighAtomic pageblocks (no unreserve here).
            let ha_blocks = mm.blocks_by_type(zi)[MigrateType::HighAtomic.idx()];
            prop_assert_eq!(z.nr_reserved_highatomic, ha_blocks * PAGEBLOCK_NR_PAGES as u64);
            let cap = (z.managed / 100).div_ceil(PAGEBLOCK_NR_PAGES as u64) * PAGEBLOCK_NR_PAGES as u64;
            prop_assert!(z.nr_reserved_highatomic <= cap + 2 * PAGEBLOCK_NR_PAGES as u64);
        }
        if let Some(msg) = unmerged_buddies(mm) {
            return Err(TestCaseError::fail(msg));
        }
        Ok(())
    }

    /// Frees everything, drains, and checks that all managed memory is free again.
    fn teardown(&mut self, s: &Setup) -> Result<(), TestCaseError> {
        let cpus = self.mm.nr_cpus;
        for (i, (p, order, _)) in std::mem::take(&mut self.live).into_iter().enumerate() {
            self.mm.free_pages(i as u32 % cpus, p, order);
            self.live_pages -= 1 << order;
        }
        self.mm.drain_all_pages();
        self.verify()?;
        let c = self.mm.check_invariants().unwrap();
        prop_assert_eq!(c.free, c.managed);
        prop_assert_eq!(c.pcp, 0);
        for z in &self.mm.zones {
            prop_assert_eq!(z.nr_free_pages(), z.managed as i64, "zone {}", z.zone_type.name());
        }
        prop_assert_eq!(self.mm.zone_stat_sum(Stat::nr_free_pages), c.managed as i64);
        // Fully merged: without HighAtomic blocks (which stop merges at pageblock order) the
        // chunk sizes are exactly those after boot.
        let fresh = build(s);
        for (zi, z) in self.mm.zones.iter().enumerate() {
            if self.mm.blocks_by_type(zi)[MigrateType::HighAtomic.idx()] == 0 {
                prop_assert_eq!(
                    z.area.nr_free,
                    fresh.zones[zi].area.nr_free,
                    "zone {}",
                    z.zone_type.name()
                );
            }
        }
        Ok(())
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2000,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn random_sequences_keep_invariants(s in setup(), ops in prop::collection::vec(op(), 1..250)) {
        let mut run = Run::new(&s);
        for op in ops {
            run.apply(op, true)?;
        }
        run.teardown(&s)?;
    }
}

proptest! {
    #![proptest_config(config(16))]

    #[test]
    fn same_sequence_same_state(s in setup(), ops in prop::collection::vec(op(), 1..200)) {
        let mut runs = [Run::new(&s), Run::new(&s)];
        for run in &mut runs {
            run.mm.set_trace_mask(trace_kind::ALL);
            for &op in &ops {
                run.apply(op, false)?;
            }
        }
        let [a, b] = &mut runs;
        prop_assert_eq!(&a.results, &b.results);
        prop_assert_eq!(a.mm.zone_views(), b.mm.zone_views());
        prop_assert_eq!(&a.mm.stats[..], &b.mm.stats[..]);
        prop_assert_eq!(&a.mm.fallbacks, &b.mm.fallbacks);
        prop_assert_eq!(a.mm.take_wakeups(), b.mm.take_wakeups());
        prop_assert_eq!(a.mm.take_trace(), b.mm.take_trace());
        prop_assert_eq!(&a.mm.blocks, &b.mm.blocks);
    }
}
