//! Criterion benchmarks of the allocator model's hot paths (issue: order-0 and order-9
//! allocate+free through the PCP and through the buddy lists, and a fallback-heavy sequence).
//! Run: `cargo bench -p fraglab-mm --features bench --bench buddy`.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use fraglab_mm::{Gfp, MachineConfig, MigrateType, Mm, Tunables};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn machine(bytes: u64) -> Mm {
    Mm::new(
        &MachineConfig::x86_64(bytes, true, 2).unwrap(),
        Tunables::default(),
    )
    .unwrap()
}

fn alloc_free(c: &mut Criterion) {
    let mut g = c.benchmark_group("alloc_free");
    let mut mm = machine(8 << 30);
    g.bench_function("order0_pcp", |b| {
        b.iter(|| {
            let p = mm.alloc_pages(0, Gfp::GFP_KERNEL, 0).unwrap();
            mm.free_pages(0, black_box(p), 0);
        })
    });
    g.bench_function("order9_pcp", |b| {
        b.iter(|| {
            let p = mm.alloc_pages(0, Gfp::GFP_TRANSHUGE_LIGHT, 9).unwrap();
            mm.free_pages(0, black_box(p), 9);
        })
    });
    // Through the buddy lists: rmqueue_buddy (no PCP) and free_one_page (merge).
    let normal = fraglab_mm::ZoneType::Normal.idx();
    for order in [0u32, 9] {
        g.bench_function(format!("order{order}_buddy"), |b| {
            b.iter(|| {
                let p = mm
                    .rmqueue_buddy(0, normal, order, fraglab_mm::AllocFlags(1), MigrateType::Movable)
                    .unwrap();
                mm.free_one_page(black_box(p), order);
            })
        });
    }
    g.finish();
}

/// A fallback-heavy mixed sequence on a 1 GiB machine: unmovable, reclaimable and movable
/// allocations of orders 0..3 and 9 interleaved with random frees, so claims, steals and merges
/// happen all the time. One iteration = 10,000 operations.
fn mixed_fallback(c: &mut Criterion) {
    c.bench_function("mixed_fallback_10k_ops", |b| {
        b.iter_batched(
            || {
                let mut mm = machine(1 << 30);
                let mut rng = ChaCha8Rng::seed_from_u64(7);
                let mut live = Vec::new();
                // Pre-fragment: fill 90% with a mix, free half at random.
                let gfps = [
                    Gfp::GFP_KERNEL,
                    Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE),
                    Gfp::GFP_HIGHUSER_MOVABLE,
                ];
                while let Some(p) = mm.alloc_pages(0, gfps[rng.gen_range(0..3)], 0) {
                    live.push((p, 0u32));
                    if live.len() > 235_000 {
                        break;
                    }
                }
                for i in (0..live.len()).rev() {
                    if rng.gen_bool(0.5) {
                        let (p, o) = live.swap_remove(i);
                        mm.free_pages(0, p, o);
                    }
                }
                (mm, live, rng)
            },
            |(mut mm, mut live, mut rng)| {
                let gfps = [
                    Gfp::GFP_KERNEL,
                    Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE),
                    Gfp::GFP_HIGHUSER_MOVABLE,
                ];
                for _ in 0..10_000 {
                    let cpu = rng.gen_range(0..2);
                    if rng.gen_bool(0.5) || live.is_empty() {
                        let order = [0, 0, 0, 1, 2, 3, 9][rng.gen_range(0..7)];
                        if let Some(p) = mm.alloc_pages(cpu, gfps[rng.gen_range(0..3)], order) {
                            live.push((p, order));
                        }
                    } else {
                        let (p, o) = live.swap_remove(rng.gen_range(0..live.len()));
                        mm.free_pages(cpu, p, o);
                    }
                }
                black_box(mm.fallbacks.steal[1][0])
            },
            BatchSize::LargeInput,
        )
    });
}

criterion_group!(benches, alloc_free, mixed_fallback);
criterion_main!(benches);
