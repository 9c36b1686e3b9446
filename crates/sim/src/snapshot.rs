//! What a timed run reads from the model while it runs: the /proc files at its start and end,
//! /proc/vmstat as values, the time-series samples and the pageblock maps of the result schema
//! (`fraglab_spec::result`). The classification of a pageblock is the result schema's own
//! (`fraglab_spec::result::pageblock`); this file only takes the census from the model.

use std::collections::BTreeMap;

use fraglab_mm::types::{MIGRATE_TYPES, NR_PAGE_ORDERS, PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER};
use fraglab_mm::vmstat::{render_buddyinfo, render_pagetypeinfo, render_vmstat, render_zoneinfo, Stat};
use fraglab_mm::Mm;
use fraglab_spec::result::pageblock::{census_mixed, BlockState, ZoneCensus, PAGEBLOCK_PAGES};
use fraglab_spec::result::{Histogram, LatencyHistogram, PageblockMap, Sample};

use crate::timeless::stats_with_zone_items;

// The result schema's block size is the model's.
const _: () = assert!(PAGEBLOCK_PAGES == PAGEBLOCK_NR_PAGES as u64);

/// The /proc files captured at the start and end of a run.
pub(crate) fn proc_snapshot(mm: &Mm) -> BTreeMap<String, String> {
    let z = mm.zone_views();
    let stats = stats_with_zone_items(mm);
    BTreeMap::from([
        ("buddyinfo".to_string(), mm.render_per_node(render_buddyinfo)),
        (
            "pagetypeinfo".to_string(),
            mm.render_per_node(render_pagetypeinfo),
        ),
        (
            "zoneinfo".to_string(),
            mm.render_per_node(|nid, zones| render_zoneinfo(nid, zones, &mm.node_stats(nid))),
        ),
        ("vmstat".to_string(), render_vmstat(&z, &stats)),
    ])
}

/// /proc/vmstat as (name, value) pairs.
pub(crate) fn vmstat_values(mm: &Mm) -> Vec<(String, i64)> {
    render_vmstat(&mm.zone_views(), &stats_with_zone_items(mm))
        .lines()
        .filter_map(|l| {
            let (n, v) = l.split_once(' ')?;
            Some((n.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Pageblock `b` (its index) from the per-block folio census (`Mm::block_content`): its
/// migratetype, the folio pages in it as used, mixed when it holds folio pages of a mobility
/// other than its type.
fn census_block(mm: &Mm, b: u32) -> BlockState {
    let mt = mm.block_mt(b << PAGEBLOCK_ORDER).idx();
    let c = &mm.block_content[b as usize];
    BlockState {
        migratetype: mt,
        present: true,
        free_pages: 0,
        used_pages: c.iter().sum(),
        mixed: census_mixed(mt, c),
    }
}

/// The pageblock map of `mm` at `t_ns` (result schema `PageblockMap`): per block its
/// migratetype (lower case if mixed) and how full it is, from the per-block folio census. The
/// blocks are those /proc/pagetypeinfo counts, zone after zone ([`Mm::counted_blocks`]): the
/// blocks of zone holes and offline memory are not in the map.
pub fn pageblock_snapshot(mm: &Mm, t_ns: u64) -> PageblockMap {
    let mut m = PageblockMap {
        t_ns,
        ..Default::default()
    };
    for (zi, z) in mm.zones.iter().enumerate().filter(|(_, z)| z.populated()) {
        m.zones.push((z.zone_type.name().to_string(), m.types.len()));
        for b in mm.counted_blocks(zi) {
            let s = census_block(mm, b);
            m.types.push(s.type_char());
            m.fill.push(s.fill_char());
        }
    }
    m
}

/// One time-series sample. Its `blocks_by_type` is the sum over zones of the blocks
/// /proc/pagetypeinfo's "Number of blocks type" prints (`Mm::blocks_by_type`,
/// `pagetypeinfo_showblockcount_print`, docs/model §16.2 item 4): present, online blocks
/// only, not those of zone holes or offline memory.
pub fn sample(mm: &Mm, t_ns: u64) -> Sample {
    let mut free_by_order = vec![0u64; NR_PAGE_ORDERS];
    let mut free_by_type = vec![0u64; MIGRATE_TYPES];
    for z in &mm.zones {
        for (o, row) in z.area.nr_by_type.iter().enumerate() {
            for (t, n) in row.iter().enumerate() {
                free_by_order[o] += n << o;
                free_by_type[t] += n << o;
            }
        }
    }
    let mut blocks_by_type = vec![0u64; MIGRATE_TYPES];
    for zi in (0..mm.zones.len()).filter(|&zi| mm.zones[zi].populated()) {
        for (sum, n) in blocks_by_type.iter_mut().zip(mm.blocks_by_type(zi)) {
            *sum += n;
        }
    }
    // Mixed: every block of the census, populated zone or not (HighAtomic and Isolate blocks
    // are never mixed; a hole holds no folio, so is never mixed).
    let mixed = (0..mm.block_content.len() as u32)
        .filter(|&b| census_block(mm, b).mixed)
        .count() as u64;
    Sample {
        t_ns,
        free_by_order,
        free_by_type,
        blocks_by_type,
        mixed_blocks: mixed,
        thp_fault_alloc: mm.stat(Stat::thp_fault_alloc),
        thp_fault_fallback: mm.stat(Stat::thp_fault_fallback),
    }
}

/// The pageblock census of each populated zone (issue 33's named samples,
/// [`ZoneCensus`]): parsed from the /proc/pagetypeinfo this model renders in the kernel's
/// format, as the host engine parses the kernel's, so that both count blocks, wholly free
/// blocks and types alike; the mixed blocks of each zone are counted from the per-block folio
/// census over the zone's counted blocks, as the periodic samples count them (the kernel's
/// page_owner table, `pagetypeinfo_showmixedcount_print`, walks the same blocks; the rendered
/// text leaves that table out).
pub fn zone_census(mm: &Mm) -> Vec<ZoneCensus> {
    let mut zones = ZoneCensus::from_pagetypeinfo(&render_pagetypeinfo(0, &mm.zone_views()));
    for (zi, z) in mm.zones.iter().enumerate().filter(|(_, z)| z.populated()) {
        let mixed = mm
            .counted_blocks(zi)
            .filter(|&b| census_block(mm, b).mixed)
            .count() as u64;
        if let Some(c) = zones.iter_mut().find(|c| c.zone == z.zone_type.name()) {
            c.mixed_blocks = Some(mixed);
        }
    }
    zones
}

/// The result schema's histogram of order `order` and path `path`.
pub(crate) fn histogram(order: u32, path: &str, h: &Histogram) -> LatencyHistogram {
    h.to_latency(order, path)
}
