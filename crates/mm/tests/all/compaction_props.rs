//! Property tests: random fragmentation followed by compaction, with debug-vm checks
//! (issue "compaction", deliverable 6): no invariant broken, every folio keeps its identity and
//! its order (unless split by a mode that splits), nothing unmovable moves.

use fraglab_mm::compaction::{CompactPriority, FolioMode};
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::{AllocFlags, Gfp, MachineConfig, Mm, Tunables};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        kind: u8,
        order: u32,
        n: u16,
    },
    Free {
        frac: u8,
        seed: u16,
    },
    /// mlock (or munlock) a random fraction of the live folios (§29.1).
    Mlock {
        frac: u8,
        seed: u16,
        munlock: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0u8..5,
            prop_oneof![Just(0u32), Just(0), Just(1), Just(2), Just(3), Just(4), Just(9)],
            1u16..400
        )
            .prop_map(|(kind, order, n)| Op::Alloc { kind, order, n }),
        (1u8..8, any::<u16>()).prop_map(|(frac, seed)| Op::Free { frac, seed }),
        (1u8..8, any::<u16>(), any::<bool>()).prop_map(|(frac, seed, munlock)| Op::Mlock {
            frac,
            seed,
            munlock
        }),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Compact {
    Memory,
    Direct(u32, CompactPriority),
    Kcompactd(u32),
    Proactive,
}

fn compact() -> impl Strategy<Value = Compact> {
    prop_oneof![
        Just(Compact::Memory),
        (
            prop_oneof![Just(2u32), Just(4), Just(9)],
            prop_oneof![
                Just(CompactPriority::Async),
                Just(CompactPriority::SyncLight),
                Just(CompactPriority::SyncFull)
            ]
        )
            .prop_map(|(o, p)| Compact::Direct(o, p)),
        prop_oneof![Just(3u32), Just(9)].prop_map(Compact::Kcompactd),
        Just(Compact::Proactive),
    ]
}

fn kind_gfp(k: u8) -> (FolioKind, Gfp) {
    match k {
        0 => (FolioKind::Anon, Gfp::GFP_HIGHUSER_MOVABLE),
        1 => (FolioKind::File, Gfp::GFP_HIGHUSER_MOVABLE),
        2 => (FolioKind::Slab, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)),
        3 => (FolioKind::PageTable, Gfp::GFP_KERNEL),
        _ => (FolioKind::Kernel, Gfp::GFP_KERNEL),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_identity_and_never_moves_unmovable(
        ops in proptest::collection::vec(op(), 1..30),
        compactions in proptest::collection::vec(compact(), 1..4),
        mode in prop_oneof![
            Just(FolioMode::SkipLarge), Just(FolioMode::SplitLarge),
            Just(FolioMode::MigrateNoFreeSplit), Just(FolioMode::MigrateFreeSplit)],
        defrag in any::<bool>(),
        unevictable_allowed in any::<bool>(),
    ) {
        let tun = Tunables { defrag_mode: defrag, ..Tunables::default() };
        let mut mm = Mm::new(&MachineConfig::x86_64(64 << 20, true, 2).unwrap(), tun).unwrap();
        mm.set_policy(fraglab_mm::policy::FolioCompaction::on_kernel(mode));
        mm.compact.cfg.unevictable_allowed = unevictable_allowed;
        // (id, token): direct reclaim in the slow path may evict page-cache folios, and a freed
        // id can be reused, so a folio is ours only while its token matches.
        let mut live: Vec<(FolioId, u64)> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc { kind, order, n } => {
                    let (k, gfp) = kind_gfp(kind);
                    for i in 0..n {
                        match mm.alloc_folio((i % 2) as u32, gfp, order, k, false) {
                            Some(id) => live.push((id, mm.folios.get(id).token())),
                            None => break,
                        }
                    }
                    live.retain(|&(id, t)| {
                        let f = &mm.folios.folios[id as usize];
                        f.live() && f.token() == t
                    });
                }
                Op::Free { frac, seed } => {
                    let mut x = seed as usize;
                    live.retain(|&(id, _)| {
                        x = x.wrapping_mul(1103515245).wrapping_add(12345);
                        if (x >> 8) % 8 < frac as usize { mm.free_folio(0, id); false } else { true }
                    });
                }
                Op::Mlock { frac, seed, munlock } => {
                    let mut x = seed as usize;
                    for &(id, _) in &live {
                        x = x.wrapping_mul(1103515245).wrapping_add(12345);
                        if (x >> 8) % 8 < frac as usize {
                            if munlock { mm.munlock_folio(id) } else { mm.mlock_folio(id) }
                        }
                    }
                }
            }
        }
        mm.check_invariants().unwrap();
        // Every live folio (including pieces of folios that allocation-time compaction split).
        let before: Vec<(FolioId, u32, u8, u64, FolioKind)> =
            mm.folios.live().map(|(id, f)| (id, f.pfn, f.order, f.token(), f.kind)).collect();
        let tokens_before: std::collections::BTreeMap<u64, u64> = before.iter().fold(Default::default(), |mut m, b| {
            *m.entry(b.3).or_insert(0) += 1u64 << b.2; m
        });
        // §29.2: unevictable folios, and what they hold, before compaction.
        let unevictable: Vec<(FolioId, u32, u32)> = mm.folios.live()
            .filter(|(_, f)| f.unevictable())
            .map(|(id, f)| (id, f.pfn, mm.folios.migrations(id)))
            .collect();
        let nr_mlock = mm.zone_stat_sum(fraglab_mm::vmstat::Stat::nr_mlock);
        for c in compactions {
            match c {
                Compact::Memory => { mm.compact_memory(); }
                Compact::Direct(order, prio) => {
                    let (_, page, _) = mm.try_to_compact_pages(1, Gfp::GFP_TRANSHUGE, order, AllocFlags(AllocFlags::WMARK_MIN), prio);
                    if let Some(p) = page { mm.free_pages(1, p, order); }
                }
                Compact::Kcompactd(order) => { mm.wakeup_kcompactd(0, order, 2); mm.kcompactd_do_work(0); }
                Compact::Proactive => { mm.kcompactd_timer(0); }
            }
            mm.check_invariants().unwrap();
        }
        // Migration keeps mlock (§29.2.3); at 0 no unevictable folio moved (§29.2.4).
        prop_assert_eq!(mm.zone_stat_sum(fraglab_mm::vmstat::Stat::nr_mlock), nr_mlock);
        if !unevictable_allowed {
            for &(id, pfn, migrations) in &unevictable {
                let f = mm.folios.get(id);
                prop_assert_eq!((f.pfn, mm.folios.migrations(id)), (pfn, migrations));
            }
        }
        // Unmovable folios stayed where they were, with their order.
        for (id, pfn, order, token, kind) in &before {
            if !kind.on_lru() {
                let f = mm.folios.get(*id);
                prop_assert_eq!(f.pfn, *pfn);
                prop_assert_eq!(f.order, *order);
                prop_assert_eq!(f.token(), *token);
                prop_assert_eq!(mm.folios.migrations(*id), 0);
            }
        }
        // Every piece of content survives: pages per token are unchanged (a split keeps the
        // token on every piece), and only modes that split may change a folio's order.
        let mut tokens_after: std::collections::BTreeMap<u64, u64> = Default::default();
        for (id, f) in mm.folios.live() {
            *tokens_after.entry(f.token()).or_insert(0) += 1u64 << f.order;
            if mm.folios.split_from(id).is_some() {
                prop_assert!(mode != FolioMode::SkipLarge);
            }
        }
        prop_assert_eq!(tokens_before, tokens_after);
        let c = mm.check_invariants().unwrap();
        prop_assert_eq!(c.isolated, 0);
    }
}
