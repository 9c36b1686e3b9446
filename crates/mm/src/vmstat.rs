//! Event counters and gauges under their /proc/vmstat names, and renderers for /proc/buddyinfo,
//! /proc/pagetypeinfo, /proc/zoneinfo and /proc/vmstat (`kernel-model.md` §14, §16), byte-compatible
//! with `shared/reference/samples/`.
//!
//! The renderers take plain views (filled by `Mm::zone_views`), so they can be tested against the
//! samples without a model behind them.

pub use crate::vmstat_items::*;
use crate::types::{MAX_NR_ZONES, MIGRATE_TYPES, NR_PAGE_ORDERS, ZoneType};

/// One CPU's pageset of one zone, as /proc/zoneinfo prints it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PagesetView {
    pub count: u64,
    pub high: u64,
    pub batch: u64,
    pub high_min: u64,
    pub high_max: u64,
}

/// Everything the renderers need about one zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneView {
    pub zone_type: ZoneType,
    pub start_pfn: u64,
    pub spanned: u64,
    pub present: u64,
    pub managed: u64,
    pub cma: u64,
    /// `pages free` = NR_FREE_PAGES.
    pub free: u64,
    pub boost: u64,
    /// min, low, high, promo (stored values, without boost).
    pub wmark: [u64; 4],
    pub protection: [i64; MAX_NR_ZONES],
    /// Zone items (`Stat` indices 0..NR_ZONE_STATS).
    pub zone_stats: [u64; NR_ZONE_STATS],
    /// NUMA items (`Stat` indices NR_ZONE_STATS..NR_ZONE_STATS+NR_NUMA_STATS).
    pub numa_stats: [u64; NR_NUMA_STATS],
    /// `free_area[order].nr_free`.
    pub nr_free: [u64; NR_PAGE_ORDERS],
    /// Free chunks per migratetype and order (pagetypeinfo).
    pub nr_free_by_type: [[u64; NR_PAGE_ORDERS]; MIGRATE_TYPES],
    /// Pageblocks per migratetype (pagetypeinfo "Number of blocks type").
    pub blocks_by_type: [u64; MIGRATE_TYPES],
    pub pagesets: Vec<PagesetView>,
    pub stat_threshold: u32,
    pub node_unreclaimable: u32,
}

impl ZoneView {
    /// `populated_zone()`: a zone with present pages.
    pub fn populated(&self) -> bool {
        self.present > 0
    }
}
