//! The operating-system half of Contiguitas (Zhao et al., "Contiguitas: The Pursuit of
//! Physical Memory Contiguity in Datacenters", ISCA 2023, from Meta's fleet), as a fallback
//! policy: unmovable memory confined to one contiguous region at the low end of each zone,
//! movable memory in the rest, the boundary moved with demand.
//!
//! How the model places a request whose own free lists are empty (`__rmqueue`'s fallback,
//! docs/model §6.2, which this policy replaces):
//!
//! - **Unmovable or reclaimable** (both live in the region): first a free chunk of the other
//!   non-movable type (inside the region); then the region *grows* by the pageblock just above
//!   it: the block is retyped with its free pages (`Mm::set_pageblock_type`), and, if it is not
//!   wholly free, its movable pages are queued to be migrated out (`Mm::evacuate_range`, the
//!   model's `alloc_contig_range` migration) in the slow path of the request, before direct
//!   reclaim (or at the end of the next allocation that may sleep); no further block joins
//!   the zone's region until that is done.
//!   A request never takes memory from a block outside the region, so the kernel's steals and
//!   claims of movable blocks do not happen.
//! - **Movable**: the region *shrinks* by its top blocks while they are wholly free;
//!   otherwise the request fails in this zone and the slow path reclaims or compacts, as
//!   movable memory stays out of the region. Only a request that cannot wait (ALLOC_NON_BLOCK:
//!   atomic) or one for a whole pageblock (a THP, movable again when the region needs its
//!   block) borrows a free chunk inside the region.
//! - Other types (high-atomic reserves) fall back as in the kernel.
//!
//! Simplified against the paper: the region starts empty at each zone's first whole pageblock
//! (a machine booted from a snapshot keeps its unmovable blocks wherever they are; only new
//! growth is confined); it grows one pageblock at a time, on demand only, and shrinks only
//! when a movable request needs memory; the migration of a grown block's movable pages is
//! charged to no task's time; the hardware half (moving unmovable pages in the memory
//! controller) is not modelled. The DMA zone (16 MiB) is left to the kernel's policy.

use fraglab_mm::ZoneType;
use fraglab_mm::gfp::AllocFlags;
use fraglab_mm::node::Mm;
use fraglab_mm::policy::{FallbackDecision, FallbackRequest, Policy};
use fraglab_mm::types::{MigrateType, PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER};

use crate::PluginInfo;

/// At most this many pageblocks join the region for one request (a request of order ≤ 3 finds
/// a chunk in the first block that has one; the bound keeps one request from sweeping memory
/// when every block above the region is full of smaller pieces).
const MAX_GROW_PER_REQUEST: u32 = 8;

pub const INFO: PluginInfo = PluginInfo {
    name: "contiguitas",
    summary: "Contiguitas' OS half (ISCA 2023): unmovable memory confined to a region at the low \
              end of each zone that grows (migrating movable pages out) and shrinks with demand",
    make: || Box::new(Contiguitas::default()),
};

/// The policy's state: each zone's region and the work queued.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Contiguitas {
    /// Per zone index: the region `[start, end)` as pfns, set at the zone's first fallback.
    region: Vec<Option<(u32, u32)>>,
    /// Blocks that joined the region with pages in use: (zone index, block start).
    pending: Vec<(usize, u32)>,
    grown: u64,
    shrunk: u64,
    borrowed: u64,
    inside: u64,
    evacuated: u64,
    stayed: u64,
}

impl Contiguitas {
    /// The region of zone `zi`, created empty at its first whole pageblock.
    fn region(&mut self, mm: &Mm, zi: usize) -> (u32, u32) {
        if self.region.len() <= zi {
            self.region.resize(zi + 1, None);
        }
        *self.region[zi].get_or_insert_with(|| {
            let z = &mm.zones[zi];
            let start = z.start_pfn.next_multiple_of(PAGEBLOCK_NR_PAGES);
            (start, start)
        })
    }

    fn set_end(&mut self, zi: usize, end: u32) {
        if let Some(r) = self.region[zi].as_mut() {
            r.1 = end;
        }
    }

    fn non_movable(&mut self, mm: &mut Mm, req: FallbackRequest) -> Option<u32> {
        let other = if req.migratetype == MigrateType::Unmovable {
            MigrateType::Reclaimable
        } else {
            MigrateType::Unmovable
        };
        if let Some(p) = mm.__rmqueue_smallest(req.cpu, req.zi, req.order, other) {
            self.inside += 1;
            return Some(p);
        }
        let (_, mut end) = self.region(mm, req.zi);
        let zend = mm.zones[req.zi].end_pfn();
        for _ in 0..MAX_GROW_PER_REQUEST {
            // One block at a time while a grown block waits for its pages to be moved out:
            // the request then fails here, and the slow path runs the move (or reclaims).
            if end + PAGEBLOCK_NR_PAGES > zend || self.pending.iter().any(|&(z, _)| z == req.zi) {
                break;
            }
            let b = end;
            let was = mm.block_mt(b);
            if mm.set_pageblock_type(req.zi, b, req.migratetype).is_none() {
                break;
            }
            end += PAGEBLOCK_NR_PAGES;
            // A free chunk of two blocks is retyped whole: the block above joins too.
            while end + PAGEBLOCK_NR_PAGES <= zend
                && mm.block_mt(end) == req.migratetype
                && mm.pageblock_free(end)
            {
                end += PAGEBLOCK_NR_PAGES;
                self.grown += 1;
            }
            self.set_end(req.zi, end);
            self.grown += 1;
            if was == MigrateType::Movable && !mm.pageblock_free(b) {
                self.pending.push((req.zi, b));
                mm.request_policy_work();
            }
            if let Some(p) = mm.__rmqueue_smallest(req.cpu, req.zi, req.order, req.migratetype) {
                return Some(p);
            }
        }
        None
    }

    fn movable(&mut self, mm: &mut Mm, req: FallbackRequest) -> Option<u32> {
        let (start, mut end) = self.region(mm, req.zi);
        while end > start && mm.pageblock_free(end - PAGEBLOCK_NR_PAGES) {
            let b = end - PAGEBLOCK_NR_PAGES;
            if mm.set_pageblock_type(req.zi, b, MigrateType::Movable).is_none() {
                break;
            }
            end = b;
            // A free chunk of two blocks is retyped whole: the block below leaves too.
            while end > start && mm.block_mt(end - PAGEBLOCK_NR_PAGES) == MigrateType::Movable {
                end -= PAGEBLOCK_NR_PAGES;
                self.shrunk += 1;
            }
            self.set_end(req.zi, end);
            self.shrunk += 1;
            if let Some(p) = mm.__rmqueue_smallest(req.cpu, req.zi, req.order, MigrateType::Movable) {
                return Some(p);
            }
        }
        // Movable memory stays out of the region; only a request that cannot wait for reclaim
        // (ALLOC_NON_BLOCK: atomic), or one for whole pageblocks (a THP: the kernel's
        // high-order watermark test counts the region's free blocks for it, and the folio can
        // be moved out when the region needs the block), borrows a free chunk inside it.
        if req.alloc_flags.has(AllocFlags::NON_BLOCK) || req.order >= PAGEBLOCK_ORDER {
            for fb in [MigrateType::Reclaimable, MigrateType::Unmovable] {
                if let Some(p) = mm.__rmqueue_smallest(req.cpu, req.zi, req.order, fb) {
                    self.borrowed += 1;
                    return Some(p);
                }
            }
        }
        None
    }
}

impl Policy for Contiguitas {
    fn name(&self) -> String {
        INFO.name.to_string()
    }

    fn has_fallback_hook(&self) -> bool {
        true
    }

    /// No fallback crosses the boundary: compaction does not count a non-movable free chunk as
    /// one a movable request could take (nor the reverse).
    fn fallback_allowed(&self, start: MigrateType, fallback: MigrateType) -> bool {
        (start == MigrateType::Movable) == (fallback == MigrateType::Movable)
    }

    fn rmqueue_fallback(&mut self, mm: &mut Mm, req: FallbackRequest) -> FallbackDecision {
        if mm.zones[req.zi].zone_type == ZoneType::Dma {
            return FallbackDecision::Kernel;
        }
        match req.migratetype {
            MigrateType::Unmovable | MigrateType::Reclaimable => {
                FallbackDecision::Placed(self.non_movable(mm, req))
            }
            MigrateType::Movable => FallbackDecision::Placed(self.movable(mm, req)),
            _ => FallbackDecision::Kernel,
        }
    }

    fn deferred_work(&mut self, mm: &mut Mm) {
        for (zi, b) in std::mem::take(&mut self.pending) {
            let in_region = self.region[zi].is_some_and(|(s, e)| b >= s && b < e);
            if !in_region || mm.block_mt(b) == MigrateType::Movable {
                continue;
            }
            let (moved, stayed) = mm.evacuate_range(zi, b, b + PAGEBLOCK_NR_PAGES, 0);
            self.evacuated += moved;
            self.stayed += stayed;
        }
    }

    /// The regions, the blocks still to evacuate and the counters.
    fn save_state(&self) -> Result<Vec<u8>, String> {
        postcard::to_allocvec(self).map_err(|e| format!("contiguitas: cannot save its state: {e}"))
    }

    fn restore_state(&mut self, state: &[u8]) -> Result<(), String> {
        *self = postcard::from_bytes(state).map_err(|e| format!("contiguitas: bad saved state: {e}"))?;
        Ok(())
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let pages: u64 = self
            .region
            .iter()
            .flatten()
            .map(|(s, e)| (e - s) as u64)
            .sum();
        vec![
            ("region_pages".into(), pages),
            ("blocks_grown".into(), self.grown),
            ("blocks_shrunk".into(), self.shrunk),
            ("movable_borrowed".into(), self.borrowed),
            ("non_movable_inside".into(), self.inside),
            ("pages_evacuated".into(), self.evacuated),
            ("pages_not_evacuated".into(), self.stayed),
        ]
    }
}
