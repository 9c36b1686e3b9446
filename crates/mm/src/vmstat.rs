//! Event counters and gauges under their /proc/vmstat names, and renderers for /proc/buddyinfo,
//! /proc/pagetypeinfo, /proc/zoneinfo and /proc/vmstat (docs/model §14, §16), byte-compatible
//! with the reference machine's own output (tests/data).
//!
//! The renderers take plain views (filled by `Mm::zone_views`), so they can be tested against the
//! samples without a model behind them.

use crate::types::{
    MigrateType, ZoneType, MAX_NR_ZONES, MIGRATE_TYPES, NR_PAGE_ORDERS, PAGEBLOCK_NR_PAGES, PAGEBLOCK_ORDER,
};
pub use crate::vmstat_items::*;
use std::fmt::Write;

/// One CPU's pageset of one zone, as /proc/zoneinfo prints it.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct PagesetView {
    pub count: u64,
    pub high: u64,
    pub batch: u64,
    pub high_min: u64,
    pub high_max: u64,
}

/// Everything the renderers need about one zone.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
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

// ---------------------------------------------------------------------------------------------
// Units of the `stats` array
// ---------------------------------------------------------------------------------------------
//
// `stats` (and the views' zone/NUMA arrays) hold the counters in the units the kernel *stores*
// them in, and the renderers convert to the units /proc *prints*, as mm/vmstat.c does:
//
// * THP-sized node items (`vmstat_item_print_in_thp()` in include/linux/mmzone.h:
//   NR_ANON_THPS, NR_FILE_THPS, NR_SHMEM_THPS, NR_SHMEM_PMDMAPPED, NR_FILE_PMDMAPPED, i.e.
//   nr_anon_transparent_hugepages, nr_file_hugepages, nr_shmem_hugepages, nr_shmem_pmdmapped,
//   nr_file_pmdmapped) are stored in base pages (the kernel bumps them by folio_nr_pages()) and
//   divided by HPAGE_PMD_NR (512) when printed. mm/vmstat.c does this division in BOTH
//   `zoneinfo_show_print` (per-node block) and `vmstat_start`, so the sample's
//   `nr_file_hugepages 90` appears as 90 in zoneinfo.txt and vmstat.txt alike: the stored value is
//   90 * 512 = 46080 pages.
// * `pgpgin` / `pgpgout` are stored in 512-byte sectors (the block layer counts bio sectors) and
//   halved (to KiB) by `vmstat_start`; /proc/zoneinfo does not print events.
// * Every other item is printed as stored.

/// `HPAGE_PMD_NR`: base pages per PMD-sized THP.
pub const HPAGE_PMD_NR: u64 = 1 << crate::types::HPAGE_PMD_ORDER;

/// `vmstat_item_print_in_thp`: node items stored in pages but printed in THP units.
pub fn print_in_thp(s: Stat) -> bool {
    matches!(
        s,
        Stat::nr_anon_transparent_hugepages
            | Stat::nr_file_hugepages
            | Stat::nr_shmem_hugepages
            | Stat::nr_shmem_pmdmapped
            | Stat::nr_file_pmdmapped
    )
}

/// The value /proc/vmstat (and, for node items, /proc/zoneinfo) prints for item `s` whose stored
/// value is `stored` (see the unit notes above).
pub fn printed_value(s: Stat, stored: u64) -> u64 {
    if print_in_thp(s) {
        stored / HPAGE_PMD_NR
    } else if matches!(s, Stat::pgpgin | Stat::pgpgout) {
        stored / 2
    } else {
        stored
    }
}

/// `calculate_normal_threshold` (mm/vmstat.c): the per-CPU counter drift allowed for a zone, shown
/// as "vm stats threshold" in /proc/zoneinfo.
/// `2 * fls(cpus) * (1 + fls(managed >> (27 - PAGE_SHIFT)))`, at most 125.
pub fn calculate_normal_threshold(managed_pages: u64, nr_cpus: u32) -> u32 {
    // fls(x): 1-based index of the most significant set bit, 0 for 0.
    fn fls(x: u64) -> u32 {
        64 - x.leading_zeros()
    }
    let mem = managed_pages >> (27 - crate::types::PAGE_SHIFT);
    let threshold = 2 * fls(nr_cpus as u64) * (1 + fls(mem));
    threshold.min(125)
}

/// The cap of pagetypeinfo's free-list walk: a list with at least this many entries prints as
/// `>100000`.
pub const PAGETYPEINFO_FREE_CAP: u64 = 100_000;

/// /proc/buddyinfo for one node (`frag_show_print`, §16.1): one line per populated zone.
pub fn render_buddyinfo(node: u32, zones: &[ZoneView]) -> String {
    let mut out = String::new();
    for z in zones.iter().filter(|z| z.populated()) {
        let _ = write!(out, "Node {}, zone {:>8} ", node, z.zone_type.name());
        for n in &z.nr_free {
            let _ = write!(out, "{:>6} ", n);
        }
        out.push('\n');
    }
    out
}

/// /proc/pagetypeinfo for one node (`pagetypeinfo_show`, §16.2). Empty for a node without memory.
/// No "Number of mixed blocks" section (CONFIG_PAGE_OWNER is off on S2).
pub fn render_pagetypeinfo(node: u32, zones: &[ZoneView]) -> String {
    let mut out = String::new();
    // node_state(nid, N_MEMORY): the node has present memory in some zone.
    if !zones.iter().any(|z| z.populated()) {
        return out;
    }
    let _ = writeln!(out, "Page block order: {}", PAGEBLOCK_ORDER);
    let _ = writeln!(out, "Pages per block:  {}", PAGEBLOCK_NR_PAGES);
    out.push('\n');

    // Free chunks per migratetype and order.
    let _ = write!(out, "{:<43} ", "Free pages count per migrate type at order");
    for order in 0..NR_PAGE_ORDERS {
        let _ = write!(out, "{:>6} ", order);
    }
    out.push('\n');
    for z in zones.iter().filter(|z| z.populated()) {
        for mt in MigrateType::ALL {
            let _ = write!(
                out,
                "Node {:>4}, zone {:>8}, type {:>12} ",
                node,
                z.zone_type.name(),
                mt.name()
            );
            for &n in &z.nr_free_by_type[mt.idx()] {
                // The kernel stops walking a list at its 100000th entry and flags the overflow.
                if n >= PAGETYPEINFO_FREE_CAP {
                    let _ = write!(out, ">{:>6} ", PAGETYPEINFO_FREE_CAP);
                } else {
                    let _ = write!(out, "{:>6} ", n);
                }
            }
            out.push('\n');
        }
    }

    // Pageblocks per migratetype.
    let _ = write!(out, "\n{:<23}", "Number of blocks type ");
    for mt in MigrateType::ALL {
        let _ = write!(out, "{:>12} ", mt.name());
    }
    out.push('\n');
    for z in zones.iter().filter(|z| z.populated()) {
        let _ = write!(out, "Node {}, zone {:>8} ", node, z.zone_type.name());
        for n in &z.blocks_by_type {
            let _ = write!(out, "{:>12} ", n);
        }
        out.push('\n');
    }
    out
}

/// /proc/zoneinfo for one node (`zoneinfo_show_print`, §16.4). `zones` are all zones of the node
/// in index order, populated or not; `stats` supplies the node items (stored units, see above),
/// printed once, under the node's first populated zone. Watermarks print as stored value + boost
/// (`wmark_pages`).
pub fn render_zoneinfo(node: u32, zones: &[ZoneView], stats: &[u64; NR_STATS]) -> String {
    let mut out = String::new();
    let first_populated = zones.iter().position(|z| z.populated());
    for (zi, z) in zones.iter().enumerate() {
        let _ = write!(out, "Node {}, zone {:>8}", node, z.zone_type.name());
        if first_populated == Some(zi) {
            out.push_str("\n  per-node stats");
            for (i, &v) in stats
                .iter()
                .enumerate()
                .take(FIRST_GLOBAL_STAT)
                .skip(FIRST_NODE_STAT)
            {
                let s = Stat::ALL[i];
                let _ = write!(out, "\n      {:<12} {}", s.name(), printed_value(s, v));
            }
        }
        let b = z.boost;
        let _ = write!(
            out,
            "\n  pages free     {}\n        boost    {}\n        min      {}\n        low      {}\
             \n        high     {}\n        promo    {}\n        spanned  {}\n        present  {}\
             \n        managed  {}\n        cma      {}",
            z.free,
            b,
            z.wmark[0] + b,
            z.wmark[1] + b,
            z.wmark[2] + b,
            z.wmark[3] + b,
            z.spanned,
            z.present,
            z.managed,
            z.cma
        );
        out.push_str("\n        protection: (");
        for (i, p) in z.protection.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}", p);
        }
        out.push(')');
        if !z.populated() {
            out.push('\n');
            continue;
        }
        for (i, &v) in z.zone_stats.iter().enumerate() {
            let _ = write!(out, "\n      {:<12} {}", STAT_NAMES[i], v);
        }
        for (i, &v) in z.numa_stats.iter().enumerate() {
            let _ = write!(out, "\n      {:<12} {}", STAT_NAMES[NR_ZONE_STATS + i], v);
        }
        out.push_str("\n  pagesets");
        for (cpu, p) in z.pagesets.iter().enumerate() {
            let _ = write!(
                out,
                "\n    cpu: {}\n              count:    {}\n              high:     {}\
                 \n              batch:    {}\n              high_min: {}\
                 \n              high_max: {}\n  vm stats threshold: {}",
                cpu, p.count, p.high, p.batch, p.high_min, p.high_max, z.stat_threshold
            );
        }
        let _ = write!(
            out,
            "\n  node_unreclaimable:  {}\n  start_pfn:           {}\n",
            z.node_unreclaimable, z.start_pfn
        );
    }
    out
}

/// /proc/vmstat (`vmstat_start`/`vmstat_show`, §16.3). Zone and NUMA items are summed over
/// `zones` (pass the zones of every node); node, global and event items come from `stats`
/// (stored units, see above). Ends with the deprecated literal `nr_unstable 0`.
pub fn render_vmstat(zones: &[ZoneView], stats: &[u64; NR_STATS]) -> String {
    let mut out = String::with_capacity(NR_STATS * 32);
    for (i, s) in Stat::ALL.iter().copied().enumerate() {
        let v = if i < NR_ZONE_STATS {
            zones.iter().map(|z| z.zone_stats[i]).sum()
        } else if i < FIRST_NODE_STAT {
            zones.iter().map(|z| z.numa_stats[i - NR_ZONE_STATS]).sum()
        } else {
            printed_value(s, stats[i])
        };
        let _ = writeln!(out, "{} {}", s.name(), v);
    }
    out.push_str("nr_unstable 0\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Verbatim copies of the reference machine's /proc files (vendored:
    /// tests/data/README.md).
    const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/");

    fn sample(name: &str) -> String {
        let path = format!("{SAMPLES}{name}");
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn empty_zone(zone_type: ZoneType) -> ZoneView {
        ZoneView {
            zone_type,
            start_pfn: 0,
            spanned: 0,
            present: 0,
            managed: 0,
            cma: 0,
            free: 0,
            boost: 0,
            wmark: [0; 4],
            protection: [0; MAX_NR_ZONES],
            zone_stats: [0; NR_ZONE_STATS],
            numa_stats: [0; NR_NUMA_STATS],
            nr_free: [0; NR_PAGE_ORDERS],
            nr_free_by_type: [[0; NR_PAGE_ORDERS]; MIGRATE_TYPES],
            blocks_by_type: [0; MIGRATE_TYPES],
            pagesets: Vec::new(),
            stat_threshold: 0,
            node_unreclaimable: 0,
        }
    }

    /// The stored value of item `s` whose printed value is `printed` (inverse of `printed_value`).
    fn stored_value(s: Stat, printed: u64) -> u64 {
        if print_in_thp(s) {
            printed * HPAGE_PMD_NR
        } else if matches!(s, Stat::pgpgin | Stat::pgpgout) {
            printed * 2
        } else {
            printed
        }
    }

    fn zone_index(name: &str) -> usize {
        ZoneType::from_name(name).unwrap().idx()
    }

    /// Parses zoneinfo.txt into the five zone views of node 0 and the node items of its per-node
    /// block (stored units). Free lists and pageblock counts are filled from pagetypeinfo.txt.
    fn sample_node() -> (Vec<ZoneView>, Box<[u64; NR_STATS]>) {
        let mut zones: Vec<ZoneView> = ZoneType::ALL.iter().map(|&t| empty_zone(t)).collect();
        let mut stats = Box::new([0u64; NR_STATS]);
        let text = sample("zoneinfo.txt");
        let mut cur = usize::MAX;
        let mut in_node_block = false;
        for line in text.lines() {
            let t = line.trim();
            if let Some(rest) = line.strip_prefix("Node 0, zone ") {
                cur = zone_index(rest.trim());
                in_node_block = false;
                continue;
            }
            let z = &mut zones[cur];
            if t == "per-node stats" {
                in_node_block = true;
                continue;
            }
            if t == "pagesets" {
                continue;
            }
            if let Some(cpu) = t.strip_prefix("cpu: ") {
                assert_eq!(cpu.parse::<usize>().unwrap(), z.pagesets.len());
                z.pagesets.push(PagesetView::default());
                continue;
            }
            if let Some(p) = t.strip_prefix("protection: (") {
                let p = p.strip_suffix(')').unwrap();
                for (i, v) in p.split(", ").enumerate() {
                    z.protection[i] = v.parse().unwrap();
                }
                in_node_block = false;
                continue;
            }
            let (key, val) = t.rsplit_once(' ').unwrap();
            let key = key.trim().trim_end_matches(':');
            let v: u64 = val.parse().unwrap();
            match key {
                "pages free" => {
                    z.free = v;
                    in_node_block = false;
                }
                "boost" => z.boost = v,
                "min" => z.wmark[0] = v,
                "low" => z.wmark[1] = v,
                "high" if z.pagesets.is_empty() => z.wmark[2] = v,
                "promo" => z.wmark[3] = v,
                "spanned" => z.spanned = v,
                "present" => z.present = v,
                "managed" => z.managed = v,
                "cma" => z.cma = v,
                "count" => z.pagesets.last_mut().unwrap().count = v,
                "high" => z.pagesets.last_mut().unwrap().high = v,
                "batch" => z.pagesets.last_mut().unwrap().batch = v,
                "high_min" => z.pagesets.last_mut().unwrap().high_min = v,
                "high_max" => z.pagesets.last_mut().unwrap().high_max = v,
                "vm stats threshold" => z.stat_threshold = v as u32,
                "node_unreclaimable" => z.node_unreclaimable = v as u32,
                "start_pfn" => z.start_pfn = v,
                name => {
                    let s = Stat::from_name(name).unwrap_or_else(|| panic!("unknown {name}"));
                    let i = s as usize;
                    if in_node_block {
                        assert!((FIRST_NODE_STAT..FIRST_GLOBAL_STAT).contains(&i), "{name}");
                        stats[i] = stored_value(s, v);
                    } else if i < NR_ZONE_STATS {
                        z.zone_stats[i] = v;
                    } else {
                        assert!(i < FIRST_NODE_STAT, "{name}");
                        z.numa_stats[i - NR_ZONE_STATS] = v;
                    }
                }
            }
        }

        let text = sample("pagetypeinfo.txt");
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("Node    0, zone ") {
                // "   Normal, type      Movable    156 ..."
                let (zname, rest) = rest.split_once(", type ").unwrap();
                let mut f = rest.split_whitespace();
                let mt_name = f.next().unwrap();
                let mt = MigrateType::ALL.iter().find(|m| m.name() == mt_name).unwrap();
                let z = &mut zones[zone_index(zname.trim())];
                for (o, n) in f.enumerate() {
                    z.nr_free_by_type[mt.idx()][o] = n.parse().unwrap();
                }
            } else if let Some(rest) = line.strip_prefix("Node 0, zone ") {
                let mut f = rest.split_whitespace();
                let z = &mut zones[zone_index(f.next().unwrap())];
                for (m, n) in f.enumerate() {
                    z.blocks_by_type[m] = n.parse().unwrap();
                }
            }
        }
        // buddyinfo's per-order counts are the sums over the migratetypes.
        for z in &mut zones {
            for o in 0..NR_PAGE_ORDERS {
                z.nr_free[o] = z.nr_free_by_type.iter().map(|t| t[o]).sum();
            }
        }
        (zones, stats)
    }

    #[test]
    fn s16_1_buddyinfo_matches_sample() {
        let (zones, _) = sample_node();
        assert_eq!(render_buddyinfo(0, &zones), sample("buddyinfo.txt"));
    }

    #[test]
    fn s16_1_buddyinfo_skips_unpopulated_zones_and_ends_lines_with_space() {
        let (zones, _) = sample_node();
        let text = render_buddyinfo(0, &zones);
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().all(|l| l.ends_with(' ')));
        assert_eq!(render_buddyinfo(1, &[empty_zone(ZoneType::Normal)]), "");
    }

    #[test]
    fn s16_2_pagetypeinfo_matches_sample() {
        let (zones, _) = sample_node();
        assert_eq!(render_pagetypeinfo(0, &zones), sample("pagetypeinfo.txt"));
    }

    #[test]
    fn s16_2_pagetypeinfo_caps_free_counts_at_100000() {
        let mut z = empty_zone(ZoneType::Normal);
        z.present = 1 << 20;
        z.nr_free_by_type[MigrateType::Movable.idx()][0] = 100_000;
        z.nr_free_by_type[MigrateType::Movable.idx()][1] = 99_999;
        z.nr_free_by_type[MigrateType::Movable.idx()][2] = 250_000;
        let text = render_pagetypeinfo(0, &[z]);
        let line = text.lines().find(|l| l.contains("type      Movable")).unwrap();
        let want = format!(
            "Node    0, zone   Normal, type      Movable >100000  99999 >100000 {}",
            "     0 ".repeat(8)
        );
        assert_eq!(line, want);
    }

    #[test]
    fn s16_2_pagetypeinfo_empty_for_memoryless_node() {
        assert_eq!(render_pagetypeinfo(1, &[empty_zone(ZoneType::Normal)]), "");
    }

    #[test]
    fn s16_4_zoneinfo_matches_sample() {
        let (zones, stats) = sample_node();
        assert_eq!(stats[Stat::nr_file_hugepages as usize], 90 * 512);
        assert_eq!(render_zoneinfo(0, &zones, &stats), sample("zoneinfo.txt"));
    }

    #[test]
    fn s16_4_zoneinfo_node_block_under_first_populated_zone() {
        let (mut zones, stats) = sample_node();
        // Without DMA, the per-node block moves to DMA32.
        zones[0] = empty_zone(ZoneType::Dma);
        let text = render_zoneinfo(0, &zones, &stats);
        assert!(text.starts_with("Node 0, zone      DMA\n  pages free     0\n"));
        assert!(text.contains("Node 0, zone    DMA32\n  per-node stats\n      nr_inactive_anon 1180\n"));
        assert_eq!(text.matches("per-node stats").count(), 1);
    }

    #[test]
    fn s16_4_zoneinfo_watermarks_include_boost() {
        let (mut zones, stats) = sample_node();
        zones[2].boost = 1000;
        let text = render_zoneinfo(0, &zones, &stats);
        assert!(text.contains(
            "        boost    1000\n        min      6012\n        low      7265\n        high     8518\n        promo    9771\n"
        ));
    }

    #[test]
    fn s16_3_vmstat_matches_sample() {
        let text = sample("vmstat.txt");
        let mut stats = Box::new([0u64; NR_STATS]);
        let mut want_zone = [0u64; NR_ZONE_STATS];
        let mut want_numa = [0u64; NR_NUMA_STATS];
        let mut lines = text.lines();
        for (i, s) in Stat::ALL.iter().copied().enumerate() {
            let (name, v) = lines.next().unwrap().split_once(' ').unwrap();
            assert_eq!(name, s.name());
            let v: u64 = v.parse().unwrap();
            if i < NR_ZONE_STATS {
                want_zone[i] = v;
            } else if i < FIRST_NODE_STAT {
                want_numa[i - NR_ZONE_STATS] = v;
            } else {
                stats[i] = stored_value(s, v);
            }
        }
        assert_eq!(lines.next(), Some("nr_unstable 0"));
        assert_eq!(lines.next(), None);

        // Zone views from the zoneinfo sample; vmstat.txt was captured at another instant, so
        // put the difference of each zone/NUMA sum into the Normal zone.
        let (mut zones, _) = sample_node();
        let normal = ZoneType::Normal.idx();
        for (i, &want) in want_zone.iter().enumerate() {
            let others: u64 = zones
                .iter()
                .enumerate()
                .filter(|(zi, _)| *zi != normal)
                .map(|(_, z)| z.zone_stats[i])
                .sum();
            zones[normal].zone_stats[i] = want - others;
        }
        for (i, &want) in want_numa.iter().enumerate() {
            let others: u64 = zones
                .iter()
                .enumerate()
                .filter(|(zi, _)| *zi != normal)
                .map(|(_, z)| z.numa_stats[i])
                .sum();
            zones[normal].numa_stats[i] = want - others;
        }
        assert_eq!(render_vmstat(&zones, &stats), text);
    }

    #[test]
    fn s16_3_vmstat_unit_conversions() {
        assert_eq!(
            printed_value(Stat::nr_anon_transparent_hugepages, 3 * 512 + 511),
            3
        );
        assert_eq!(printed_value(Stat::nr_shmem_pmdmapped, 1024), 2);
        assert_eq!(printed_value(Stat::pgpgin, 2_540_339), 1_270_169);
        assert_eq!(printed_value(Stat::pgpgout, 7), 3);
        assert_eq!(printed_value(Stat::nr_anon_pages, 7), 7);
        assert_eq!(printed_value(Stat::pgalloc_normal, 7), 7);
    }

    #[test]
    fn s16_4_calculate_normal_threshold_matches_sample_zones() {
        assert_eq!(calculate_normal_threshold(3840, 2), 4);
        assert_eq!(calculate_normal_threshold(772_917, 2), 24);
        assert_eq!(calculate_normal_threshold(327_680, 2), 20);
        // The values zoneinfo.txt shows.
        let (zones, _) = sample_node();
        for z in zones.iter().filter(|z| z.populated()) {
            assert_eq!(calculate_normal_threshold(z.managed, 2), z.stat_threshold);
        }
        // Capped at 125; one CPU, no memory.
        assert_eq!(calculate_normal_threshold(1 << 40, 64), 125);
        assert_eq!(calculate_normal_threshold(0, 1), 2);
    }
}
