//! Folio ids and owner kinds (docs/model §19.2 item 10). The folio table itself is the
//! model's (`fraglab_mm::folio`).

use crate::gfp::Gfp;
use crate::page::MigrateType;

/// A folio's stable identity.
pub type FolioId = u32;

/// Who owns the memory (docs/model §19.2 item 10): anonymous and page-cache folios are
/// on the LRU and movable; slab, page tables and other kernel memory are neither.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FolioKind {
    Anon,
    File,
    Slab,
    PageTable,
    Kernel,
    /// A page of the hugetlb pool (`vm.nr_hugepages`, `[machine] hugetlb_pages`): allocated
    /// movable (`htlb_alloc_mask` = GFP_HIGHUSER_MOVABLE), not on the LRU, never reclaimed;
    /// compaction steps over it (a compound page of pageblock order, §9.6).
    Hugetlb,
    /// Block-device page cache ("bdev page cache", §33.1): a page of the block device's own
    /// mapping holding filesystem metadata (ext4 directory and inode-table blocks, bitmaps,
    /// jbd2 log blocks), order 0, on the file LRU like any page cache, allocated UNMOVABLE or
    /// MOVABLE by the buffer-head helper that created it (§33.2's table): the one kind whose
    /// LRU pages may sit in Unmovable pageblocks without a fallback.
    Bdev,
}

impl FolioKind {
    pub const ALL: [FolioKind; 7] = [
        FolioKind::Anon,
        FolioKind::File,
        FolioKind::Slab,
        FolioKind::PageTable,
        FolioKind::Kernel,
        FolioKind::Hugetlb,
        FolioKind::Bdev,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FolioKind::Anon => "anon",
            FolioKind::File => "file",
            FolioKind::Slab => "slab",
            FolioKind::PageTable => "pagetable",
            FolioKind::Kernel => "kernel",
            FolioKind::Hugetlb => "hugetlb",
            FolioKind::Bdev => "bdev",
        }
    }

    /// Anonymous and file folios live on the LRU lists (PageLRU), which is what makes them
    /// isolatable by compaction (§9.6.3) and "movable" to `try_to_claim_block` (§6.3c).
    pub fn on_lru(self) -> bool {
        matches!(self, FolioKind::Anon | FolioKind::File | FolioKind::Bdev)
    }

    /// Page cache on the file LRU: a file's (`File`) or the block device's (`Bdev`, §33.1
    /// item 2). Reclaim evicts both as file pages; compaction isolates both only for a
    /// __GFP_FS compactor (§9.6.3).
    pub fn file_lru(self) -> bool {
        matches!(self, FolioKind::File | FolioKind::Bdev)
    }

    /// The default owner of an allocation with this gfp: movable → anon, reclaimable → slab,
    /// otherwise other kernel memory.
    pub fn from_gfp(gfp: Gfp) -> FolioKind {
        match gfp.migratetype() {
            MigrateType::Movable => FolioKind::Anon,
            MigrateType::Reclaimable => FolioKind::Slab,
            _ => FolioKind::Kernel,
        }
    }
}
