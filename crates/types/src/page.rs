//! Pages, pfns, orders, migratetypes and zones: the basic types and constants of the model
//! (docs/model §0.3, §1.1–§1.3).

/// A page frame number. 32 bits cover 16 TiB of 4 KiB pages (architecture.md, "Data structures").
#[derive(
    serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default,
)]
pub struct Pfn(pub u32);

impl Pfn {
    #[inline]
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for Pfn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// 4 KiB base pages (§0.3).
pub const PAGE_SHIFT: u32 = 12;
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// `MAX_PAGE_ORDER` = 10; orders 0..=10 (§0.3).
pub const MAX_PAGE_ORDER: u32 = 10;
pub const NR_PAGE_ORDERS: usize = 11;
/// `pageblock_order` = 9 on x86-64 with 4 KiB pages (§0.3).
pub const PAGEBLOCK_ORDER: u32 = 9;
pub const PAGEBLOCK_NR_PAGES: u32 = 1 << PAGEBLOCK_ORDER;
/// `PAGE_ALLOC_COSTLY_ORDER` = 3: orders above it are "costly" (§0.3).
pub const PAGE_ALLOC_COSTLY_ORDER: u32 = 3;
/// `SWAP_CLUSTER_MAX` = 32 (§0.3).
pub const SWAP_CLUSTER_MAX: u64 = 32;
/// `HPAGE_PMD_ORDER` = 9.
pub const HPAGE_PMD_ORDER: u32 = 9;

/// Migratetypes in kernel enumeration order, CONFIG_CMA off (as on S2), so ISOLATE = 4 (§1.3).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum MigrateType {
    Unmovable = 0,
    Movable = 1,
    Reclaimable = 2,
    HighAtomic = 3,
    Isolate = 4,
}

/// `MIGRATE_PCPTYPES` = 3.
pub const MIGRATE_PCPTYPES: usize = 3;
/// `MIGRATE_TYPES` with CMA off and MEMORY_ISOLATION on (§1.3).
pub const MIGRATE_TYPES: usize = 5;

impl MigrateType {
    pub const ALL: [MigrateType; MIGRATE_TYPES] = [
        MigrateType::Unmovable,
        MigrateType::Movable,
        MigrateType::Reclaimable,
        MigrateType::HighAtomic,
        MigrateType::Isolate,
    ];

    #[inline]
    pub fn from_index(i: usize) -> MigrateType {
        Self::ALL[i]
    }

    #[inline]
    pub fn idx(self) -> usize {
        self as usize
    }

    /// The name /proc/pagetypeinfo prints (`migratetype_names`).
    pub fn name(self) -> &'static str {
        match self {
            MigrateType::Unmovable => "Unmovable",
            MigrateType::Movable => "Movable",
            MigrateType::Reclaimable => "Reclaimable",
            MigrateType::HighAtomic => "HighAtomic",
            MigrateType::Isolate => "Isolate",
        }
    }

    /// `migratetype_is_mergeable`: only the three PCP types (§1.3).
    #[inline]
    pub fn is_mergeable(self) -> bool {
        (self as usize) < MIGRATE_PCPTYPES
    }
}

/// Zone types in kernel index order for x86-64 (§1.1.1).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ZoneType {
    Dma = 0,
    Dma32 = 1,
    Normal = 2,
    Movable = 3,
    Device = 4,
}

/// `MAX_NR_ZONES` on x86-64 with ZONE_DMA, ZONE_DMA32 and ZONE_DEVICE (§1.1.1).
pub const MAX_NR_ZONES: usize = 5;

impl ZoneType {
    pub const ALL: [ZoneType; MAX_NR_ZONES] = [
        ZoneType::Dma,
        ZoneType::Dma32,
        ZoneType::Normal,
        ZoneType::Movable,
        ZoneType::Device,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ZoneType::Dma => "DMA",
            ZoneType::Dma32 => "DMA32",
            ZoneType::Normal => "Normal",
            ZoneType::Movable => "Movable",
            ZoneType::Device => "Device",
        }
    }

    pub fn from_name(s: &str) -> Option<ZoneType> {
        Self::ALL
            .iter()
            .copied()
            .find(|z| z.name().eq_ignore_ascii_case(s))
    }

    #[inline]
    pub fn idx(self) -> usize {
        self as usize
    }
}
