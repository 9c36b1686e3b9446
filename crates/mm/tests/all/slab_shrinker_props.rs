//! §19.1 item 8: the slab shrinker's live count (`count_objects` kept as folios are declared
//! and freed, stale queue entries skipped where met) frees exactly what the former eager
//! clean-up did — every declared folio still live was re-checked on every call — in the same
//! order, with the same deferred work. The reference model below is that former algorithm.

use crate::common;

use common::*;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::vmscan::ScanControl;
use fraglab_mm::{Gfp, Mm};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Allocate a slab folio of this order, declared or not.
    Alloc(u32, bool),
    /// The owner frees the n-th (mod len) folio it still holds.
    Free(usize),
    /// Reclaim's `shrink_slab` at this priority.
    Shrink(i32),
    /// Change vm.vfs_cache_pressure.
    Pressure(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..=1, any::<bool>()).prop_map(|(o, d)| Op::Alloc(o, d)),
        3 => any::<usize>().prop_map(Op::Free),
        2 => (0i32..=12).prop_map(Op::Shrink),
        1 => prop_oneof![Just(100u32), Just(0), Just(50), Just(200)].prop_map(Op::Pressure),
    ]
}

/// The former `shrink_slab`: retain the live entries, count them, free from the front.
/// Returns the ids it frees (in order) and the new nr_deferred.
fn reference(mm: &Mm, q: &mut Vec<(FolioId, u64)>, priority: i32, nr: u64) -> (Vec<FolioId>, u64) {
    q.retain(|&(id, t)| mm.folio_is(id, t));
    let freeable = q.len() as u64 * mm.tun.vfs_cache_pressure as u64 / 100;
    if freeable == 0 {
        return (Vec::new(), nr);
    }
    let priority = priority.clamp(0, 63) as u32;
    let delta = (freeable >> priority) * 4 / 2;
    let mut total_scan = ((nr >> priority) + delta).min(2 * freeable);
    let (mut scanned, mut freed) = (0u64, Vec::new());
    while total_scan >= 128 || total_scan >= freeable {
        let n = 128u64.min(total_scan);
        for _ in 0..n {
            if q.is_empty() {
                break;
            }
            freed.push(q.remove(0).0);
        }
        total_scan -= n;
        scanned += n;
    }
    (freed, (nr + delta).saturating_sub(scanned).min(2 * freeable))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn live_count_shrinker_matches_eager_retain(ops in prop::collection::vec(op(), 1..400)) {
        let mut mm = dma32(16, 1, tun_kb(128));
        let g = Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE);
        let mut held: Vec<(FolioId, u64)> = Vec::new();
        let mut q: Vec<(FolioId, u64)> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc(order, declare) => {
                    if let Some(id) = mm.alloc_folio(0, g, order, FolioKind::Slab, false) {
                        let t = mm.folios.get(id).token();
                        if declare {
                            mm.set_slab_shrinkable(id);
                            q.push((id, t));
                        }
                        held.push((id, t));
                    }
                }
                Op::Free(n) => {
                    held.retain(|&(id, t)| mm.folio_is(id, t));
                    if !held.is_empty() {
                        let (id, _) = held.remove(n % held.len());
                        mm.free_folio(0, id);
                    }
                }
                Op::Pressure(p) => mm.tun.vfs_cache_pressure = p,
                Op::Shrink(priority) => {
                    let nr = mm.reclaim.slab_shrinker.nr_deferred;
                    let live_before: Vec<(FolioId, u64)> =
                        held.iter().copied().filter(|&(id, t)| mm.folio_is(id, t)).collect();
                    let (want, want_nr) = reference(&mm, &mut q, priority, nr);
                    let want_pages: u64 =
                        want.iter().map(|&id| 1u64 << mm.folios.get(id).order).sum();
                    let mut sc = ScanControl::direct(0, 0, 0);
                    sc.priority = priority;
                    let got = mm.shrink_slab(&mut sc);
                    prop_assert_eq!(got, want_pages);
                    prop_assert_eq!(mm.reclaim.slab_shrinker.nr_deferred, want_nr);
                    let freed: Vec<FolioId> = live_before
                        .iter()
                        .filter(|&&(id, t)| !mm.folio_is(id, t))
                        .map(|&(id, _)| id)
                        .collect();
                    let mut want_sorted = want.clone();
                    want_sorted.sort_unstable();
                    let mut freed_sorted = freed;
                    freed_sorted.sort_unstable();
                    prop_assert_eq!(freed_sorted, want_sorted);
                }
            }
            mm.check_invariants().unwrap();
        }
    }
}
