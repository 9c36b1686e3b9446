//! The initial state inferred from a snapshot (kernel-model.md §30.3–§30.5): what the simulator
//! boots from (`[machine] snapshot`).
//!
//! INTERFACE (issue 21): the types below are the contract between the inference (this file) and
//! the simulator's boot (`fraglab_sim::restore`). Pfns are absolute; the simulator's memory map
//! covers pfns 0..`end_pfn`.

use serde::{Deserialize, Serialize};

use crate::snapshot::Snapshot;

/// A zone to build (from zoneinfo, checked against the page bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RZone {
    /// "DMA", "DMA32", "Normal", "Movable".
    pub name: String,
    pub start_pfn: u64,
    pub spanned: u64,
    pub present: u64,
    /// Managed pages as the simulator will have them: present pages that are not
    /// [`Reconstruction::unusable`].
    pub managed: u64,
}

/// What an allocated folio is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RKind {
    Anon,
    File,
    /// tmpfs/shmem: swap-backed page cache.
    Shmem,
    /// Slab in a block fitted Reclaimable (reclaimable caches) or not.
    SlabReclaimable,
    SlabUnreclaimable,
    PageTable,
    Hugetlb,
    /// Kernel memory without a class: flagged kernel pages, unflagged pages (kernel allocations,
    /// PCP pages, chunks under free page reporting), offline (balloon) pages.
    Kernel,
}

/// An allocated folio at its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RFolio {
    pub pfn: u64,
    pub order: u8,
    pub kind: RKind,
    pub active: bool,
    pub referenced: bool,
    /// PG_unevictable or PG_mlocked.
    pub unevictable: bool,
}

/// A free buddy chunk (§30.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RFree {
    pub pfn: u64,
    pub order: u8,
}

/// One row of the match report: a captured figure and the reconstruction's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatchRow {
    /// e.g. "Normal blocks Unmovable", "Normal free Movable order 3 (chunks)".
    pub what: String,
    pub captured: i64,
    pub reconstructed: i64,
}

/// How well the reconstruction matches what the kernel printed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MatchReport {
    /// Blocks per (zone, type): pagetypeinfo's "Number of blocks type" against the fitted types.
    pub blocks: Vec<MatchRow>,
    /// Free chunks per (zone, type, order): pagetypeinfo against the chunks with their block's
    /// type.
    pub free_by_type: Vec<MatchRow>,
    /// Free chunks per (zone, order): buddyinfo against the chunks.
    pub free_by_order: Vec<MatchRow>,
    /// Pageblocks whose allocated pages have more than one mobility (unmovable, reclaimable,
    /// movable), and blocks whose content disagrees with their fitted type.
    pub mixed_blocks: u64,
    pub content_disagrees: u64,
    /// Local-search swaps made and the table's L1 error before and after (§30.5 item 4).
    pub swaps: u64,
    pub l1_before: u64,
    pub l1_after: u64,
    /// Pages by class as read.
    pub pages_by_class: Vec<(String, u64)>,
}

/// The reconstructed state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reconstruction {
    pub end_pfn: u64,
    pub zones: Vec<RZone>,
    /// Pfn ranges [start, end) inside zone spans that the simulator marks Reserved (PG_reserved
    /// pages) or Hole (no memmap); everything else in a zone's span is managed and is either in
    /// `free` or in `folios`.
    pub reserved: Vec<[u64; 2]>,
    pub holes: Vec<[u64; 2]>,
    /// One type per pageblock, index = pfn / 512, covering 0..end_pfn, as the number of
    /// `fraglab_types::page::MigrateType` (0 Unmovable, 1 Movable, 2 Reclaimable, 3 HighAtomic,
    /// 4 Isolate).
    pub block_types: Vec<u8>,
    pub free: Vec<RFree>,
    pub folios: Vec<RFolio>,
    pub report: MatchReport,
}

/// Options of the inference.
#[derive(Clone, Debug, PartialEq)]
pub struct ReconstructOptions {
    /// Local-search swaps at most (§30.5 item 4); deterministic for a given seed.
    pub max_swaps: u64,
    pub seed: u64,
}

impl Default for ReconstructOptions {
    fn default() -> Self {
        ReconstructOptions {
            max_swaps: 300_000,
            seed: 1,
        }
    }
}

/// Infers the initial state from a snapshot (§30.5).
pub fn reconstruct(_snap: &Snapshot, _opt: &ReconstructOptions) -> Result<Reconstruction, String> {
    todo!("issue 21 helper A")
}
