//! A synthetic recorded stream, for the replay's speed measurement and tests: ftrace text of
//! kmem:mm_page_alloc / mm_page_free / mm_page_free_batched as the kernel prints them
//! (`TraceRecord::render`), from a seeded ChaCha PRNG (same arguments → same text).
//!
//! Mix: order-0 movable pages (most), order-9 movable compound pages (THP-like), order-0
//! unmovable and reclaimable pages, order-3 unmovable compound pages; live memory is held near
//! `target_pages`, each free picks a random live allocation; half of the order-0 frees are
//! batched. Recorded pfns come from a bump pointer (never reused), so every free matches.

use fraglab_mm::trace::{TraceEvent, TraceRecord};
use fraglab_mm::Gfp;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `events` lines (allocations and frees).
pub fn synthetic_trace(events: u64, seed: u64, target_pages: u64) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = String::with_capacity(events as usize * 120);
    out.push_str("# tracer: nop\n#\n");
    let mut live: Vec<(u32, u32)> = Vec::new();
    let mut live_pages = 0u64;
    let mut next: u32 = 0x10_0000;
    let mut ts = 1_000_000_000u64;
    let thp = Gfp(Gfp::GFP_HIGHUSER_MOVABLE.0 | Gfp::COMP.0);
    let kcomp = Gfp(Gfp::GFP_KERNEL.0 | Gfp::COMP.0);
    let reclaimable = Gfp(Gfp::GFP_KERNEL.0 | Gfp::RECLAIMABLE.0);
    for _ in 0..events {
        ts += rng.gen_range(500..5000);
        let cpu = rng.gen_range(0..2u32);
        let pid = 1000 + rng.gen_range(0..8u32);
        let alloc = live.is_empty() || (live_pages < target_pages && rng.gen_bool(0.6)) || rng.gen_bool(0.05);
        if alloc && live_pages < target_pages + 1024 {
            let (order, gfp) = match rng.gen_range(0..100) {
                0..=84 => (0, Gfp::GFP_HIGHUSER_MOVABLE),
                85..=88 => (9, thp),
                89..=94 => (0, Gfp::GFP_KERNEL),
                95..=98 => (0, reclaimable),
                _ => (3, kcomp),
            };
            let size = 1u32 << order;
            let pfn = next.div_ceil(size) * size;
            next = pfn + size;
            live.push((pfn, order));
            live_pages += u64::from(size);
            TraceRecord::new(
                ts,
                cpu,
                pid,
                TraceEvent::MmPageAlloc {
                    pfn: Some(pfn),
                    order,
                    gfp,
                    migratetype: gfp.migratetype() as i32,
                },
            )
            .render(&mut out);
        } else {
            let i = rng.gen_range(0..live.len());
            let (pfn, order) = live.swap_remove(i);
            live_pages -= 1u64 << order;
            let batched = order == 0 && rng.gen_bool(0.5);
            let mut line = String::new();
            TraceRecord::new(ts, cpu, pid, TraceEvent::MmPageFree { pfn, order }).render(&mut line);
            if batched {
                line = line.replacen(": mm_page_free: ", ": mm_page_free_batched: ", 1);
            }
            out.push_str(&line);
        }
    }
    out
}
