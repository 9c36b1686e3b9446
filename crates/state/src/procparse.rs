//! Parsers of the /proc texts a snapshot keeps (docs/model §30.1, §30.4; formats of
//! mm/vmstat.c `zoneinfo_show_print`, `frag_show_print`, `pagetypeinfo_showfree_print`,
//! `pagetypeinfo_showblockcount_print`, kernel/resource.c for /proc/iomem), per zone. The
//! page_owner dump is read by [`crate::page_owner`].
//!
//! The host engine has whole-machine parsers (`fraglab_host::procfs`); the reconstruction needs
//! the per-zone tables, and this crate may not depend on the host engine.

use std::collections::BTreeMap;

use crate::snapshot::ZoneSpan;

/// Orders of the buddy allocator (`NR_PAGE_ORDERS` on x86-64).
pub const NR_ORDERS: usize = 11;

/// Migratetype names in the order of `fraglab_types::page::MigrateType` (0 Unmovable,
/// 1 Movable, 2 Reclaimable, 3 HighAtomic, 4 Isolate). CMA is not configured on S2.
pub const TYPE_NAMES: [&str; 5] = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"];

/// The index of a migratetype name in [`TYPE_NAMES`].
pub fn type_index(name: &str) -> Option<usize> {
    TYPE_NAMES.iter().position(|t| *t == name)
}

/// System RAM of /proc/iomem as pfn ranges [start, end): top-level "System RAM" lines only; a
/// partial page at either end is left out (it has no whole page of RAM).
pub fn parse_iomem_ram(text: &str) -> Vec<[u64; 2]> {
    let mut v = Vec::new();
    for line in text.lines() {
        if line.starts_with(' ') {
            continue;
        }
        let Some((range, name)) = line.split_once(" : ") else {
            continue;
        };
        if name.trim() != "System RAM" {
            continue;
        }
        let Some((a, b)) = range.trim().split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let (s, e) = (a.div_ceil(4096), (b + 1) / 4096);
        if e > s {
            v.push([s, e]);
        }
    }
    v.sort_unstable();
    v
}

/// The zones of /proc/zoneinfo, every node, in file order: spans, watermarks (the bare
/// `min`/`low`/`high` lines, not the PCP `high:` lines) and the PCP `count:` lines summed.
pub fn parse_zoneinfo(text: &str) -> Vec<ZoneSpan> {
    let mut zones: Vec<ZoneSpan> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Node ") {
            if let Some((node, zone)) = rest.split_once(", zone") {
                zones.push(ZoneSpan {
                    node: node.trim().parse().unwrap_or(0),
                    name: zone.trim().to_string(),
                    ..Default::default()
                });
            }
            continue;
        }
        let Some(z) = zones.last_mut() else { continue };
        let mut it = line.split_whitespace();
        let (Some(key), Some(val)) = (it.next(), it.next()) else {
            continue;
        };
        let Ok(n) = val.parse::<u64>() else { continue };
        match key {
            "spanned" => z.spanned = n,
            "present" => z.present = n,
            "managed" => z.managed = n,
            "min" => z.min = n,
            "low" => z.low = n,
            "high" => z.high = n,
            "count:" => z.pcp_count = z.pcp_count.saturating_add(n),
            "start_pfn:" => z.start_pfn = n,
            _ => {}
        }
    }
    zones
}

/// A zone of a /proc table: (node id, zone name).
pub type ZoneKey = (u32, String);

/// The node and the rest of a "Node N, zone NAME..." line (`None` for any other line).
fn node_line(line: &str) -> Option<(u32, &str)> {
    let (node, rest) = line.strip_prefix("Node")?.split_once(", zone")?;
    Some((node.trim().parse().ok()?, rest))
}

/// /proc/buddyinfo: free chunks per order, by node and zone name.
pub fn parse_buddyinfo_nodes(text: &str) -> BTreeMap<ZoneKey, [u64; NR_ORDERS]> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let Some((node, rest)) = node_line(line) else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let Some(name) = it.next() else { continue };
        let e: &mut [u64; NR_ORDERS] = m.entry((node, name.to_string())).or_insert([0; NR_ORDERS]);
        for (o, n) in it.enumerate().take(NR_ORDERS) {
            e[o] = e[o].saturating_add(n.parse::<u64>().unwrap_or(0));
        }
    }
    m
}

/// /proc/buddyinfo: free chunks per order, by zone name (every node's zone of that name summed).
pub fn parse_buddyinfo(text: &str) -> BTreeMap<String, [u64; NR_ORDERS]> {
    let mut m: BTreeMap<String, [u64; NR_ORDERS]> = BTreeMap::new();
    for ((_, name), counts) in parse_buddyinfo_nodes(text) {
        let e = m.entry(name).or_insert([0; NR_ORDERS]);
        for (a, b) in e.iter_mut().zip(counts) {
            *a = a.saturating_add(b);
        }
    }
    m
}

/// One zone of /proc/pagetypeinfo.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PagetypeZone {
    /// Free chunks per type ([`TYPE_NAMES`]) and order.
    pub free: [[u64; NR_ORDERS]; 5],
    /// Cells printed as ">100000": the kernel stopped counting there (the true count is at
    /// least the value).
    pub capped: [[bool; NR_ORDERS]; 5],
    /// "Number of blocks type" per type.
    pub blocks: [u64; 5],
    /// The zone's "Number of blocks type" row summed over every column, types outside
    /// [`TYPE_NAMES`] (CMA) included: every block the kernel counted.
    pub counted_blocks: u64,
}

/// /proc/pagetypeinfo by node and zone name (types other than [`TYPE_NAMES`], e.g. CMA,
/// ignored).
pub fn parse_pagetypeinfo_nodes(text: &str) -> BTreeMap<ZoneKey, PagetypeZone> {
    let mut m: BTreeMap<ZoneKey, PagetypeZone> = BTreeMap::new();
    let mut cols: Option<Vec<Option<usize>>> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Number of blocks type") {
            cols = Some(rest.split_whitespace().map(type_index).collect());
            continue;
        }
        if line.starts_with("Number of") {
            // "Number of mixed blocks" (CONFIG_PAGE_OWNER): not a block count.
            cols = None;
            continue;
        }
        if line.trim().is_empty() {
            cols = None;
            continue;
        }
        let Some((node, rest)) = node_line(line) else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some((zone, typed)) = rest.split_once(", type") {
            let mut it = typed.split_whitespace();
            let Some(t) = it.next().and_then(type_index) else {
                continue;
            };
            let z = m.entry((node, zone.trim().to_string())).or_default();
            for (o, n) in it.enumerate().take(NR_ORDERS) {
                let capped = n.starts_with('>');
                z.free[t][o] = n.trim_start_matches('>').parse().unwrap_or(0);
                z.capped[t][o] = capped;
            }
        } else if let Some(cols) = &cols {
            let mut it = rest.split_whitespace();
            let Some(zone) = it.next() else { continue };
            let z = m.entry((node, zone.to_string())).or_default();
            for (c, n) in it.enumerate() {
                let n: u64 = n.parse().unwrap_or(0);
                if c < cols.len() {
                    z.counted_blocks = z.counted_blocks.saturating_add(n);
                }
                if let Some(Some(t)) = cols.get(c) {
                    z.blocks[*t] = n;
                }
            }
        }
    }
    m
}

/// /proc/pagetypeinfo by zone name: every node's zone of that name summed (a cell is capped
/// when any node's is).
pub fn parse_pagetypeinfo(text: &str) -> BTreeMap<String, PagetypeZone> {
    let mut m: BTreeMap<String, PagetypeZone> = BTreeMap::new();
    for ((_, name), z) in parse_pagetypeinfo_nodes(text) {
        let e = m.entry(name).or_default();
        for t in 0..5 {
            for o in 0..NR_ORDERS {
                e.free[t][o] = e.free[t][o].saturating_add(z.free[t][o]);
                e.capped[t][o] |= z.capped[t][o];
            }
            e.blocks[t] = e.blocks[t].saturating_add(z.blocks[t]);
        }
        e.counted_blocks = e.counted_blocks.saturating_add(z.counted_blocks);
    }
    m
}

/// A count of a /proc table: digits, or (`capped`) digits after '>' (a cell the kernel stopped
/// counting at).
fn count(word: &str, capped_ok: bool) -> Result<u64, String> {
    let digits = match word.strip_prefix('>') {
        Some(d) if capped_ok => d,
        _ => word,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 19 {
        return Err(format!("{word:?} is not a count"));
    }
    digits.parse().map_err(|_| format!("{word:?} is not a count"))
}

/// The counts after a row's first word (its zone name or migratetype), each read by [`count`];
/// `missing` says what the first word is when the row has none.
fn counts_after(row: &str, missing: &str, capped_ok: bool) -> Result<Vec<u64>, String> {
    let mut it = row.split_whitespace();
    it.next().ok_or_else(|| missing.to_string())?;
    it.map(|w| count(w, capped_ok)).collect()
}

/// /proc/pagetypeinfo read strictly: every line must be one the kernel prints (the block
/// order and size, the free table's title and rows of [`NR_ORDERS`] counts, the block counts'
/// title and rows of one count per column, "Number of mixed blocks" rows, blank lines), and
/// every count a number. Returns the tables as [`parse_pagetypeinfo_nodes`] does, or the first bad
/// line (1-based) and why.
pub fn check_pagetypeinfo(text: &str) -> Result<BTreeMap<ZoneKey, PagetypeZone>, (usize, String)> {
    let mut cols: Option<usize> = None;
    let mut rows = 0usize;
    for (i, line) in text.lines().enumerate() {
        let bad = |why: String| (i + 1, why);
        let line = line.trim_end();
        if line.is_empty() {
            cols = None;
            continue;
        }
        if let Some(rest) = line
            .strip_prefix("Page block order:")
            .or_else(|| line.strip_prefix("Pages per block:"))
        {
            count(rest.trim(), false).map_err(bad)?;
            continue;
        }
        if line.starts_with("Free pages count per migrate type at order") {
            cols = None;
            continue;
        }
        if let Some(rest) = line.strip_prefix("Number of blocks type") {
            cols = Some(rest.split_whitespace().count());
            continue;
        }
        if line.starts_with("Number of mixed blocks") {
            cols = Some(usize::MAX);
            continue;
        }
        let Some(rest) = line.strip_prefix("Node") else {
            return Err(bad(format!("not a line of /proc/pagetypeinfo: {:?}", clip(line))));
        };
        let Some((node, rest)) = rest.split_once(", zone") else {
            return Err(bad("a \"Node\" line without \", zone\"".into()));
        };
        node.trim()
            .parse::<u32>()
            .map_err(|_| bad(format!("node id {:?} is not a number", node.trim())))?;
        rows += 1;
        if let Some((_, typed)) = rest.split_once(", type") {
            let n = counts_after(typed, "no migratetype after \"type\"", true).map_err(bad)?;
            if n.len() != NR_ORDERS {
                return Err(bad(format!(
                    "{} free counts, {NR_ORDERS} expected (orders 0-10)",
                    n.len()
                )));
            }
        } else {
            let Some(want) = cols else {
                return Err(bad(
                    "a block-count row without a \"Number of blocks type\" title".into()
                ));
            };
            let n = counts_after(rest, "no zone name", false).map_err(bad)?;
            if want != usize::MAX && n.len() != want {
                return Err(bad(format!("{} block counts under {want} columns", n.len())));
            }
        }
    }
    if rows == 0 {
        return Err((1, "no zone rows: not /proc/pagetypeinfo".into()));
    }
    Ok(parse_pagetypeinfo_nodes(text))
}

/// /proc/buddyinfo read strictly: every non-blank line "Node N, zone NAME" and [`NR_ORDERS`]
/// counts. Returns the table as [`parse_buddyinfo_nodes`] does, or the first bad line and why.
pub fn check_buddyinfo(text: &str) -> Result<BTreeMap<ZoneKey, [u64; NR_ORDERS]>, (usize, String)> {
    for (i, line) in text.lines().enumerate() {
        let bad = |why: String| (i + 1, why);
        if line.trim().is_empty() {
            continue;
        }
        let Some((node, rest)) = line.strip_prefix("Node").and_then(|r| r.split_once(", zone")) else {
            return Err(bad(format!("not a line of /proc/buddyinfo: {:?}", clip(line))));
        };
        node.trim()
            .parse::<u32>()
            .map_err(|_| bad(format!("node id {:?} is not a number", node.trim())))?;
        let n = counts_after(rest, "no zone name", false).map_err(bad)?;
        if n.len() != NR_ORDERS {
            return Err(bad(format!(
                "{} counts, {NR_ORDERS} expected (orders 0-10)",
                n.len()
            )));
        }
    }
    Ok(parse_buddyinfo_nodes(text))
}

/// The first 60 characters of `line` (for a message).
fn clip(line: &str) -> String {
    line.chars().take(60).collect()
}

/// Why a machine whose /proc files read `zoneinfo` and `pagetypeinfo` is not fit to snapshot
/// and boot from, or None if it is: its memory map is not fully initialised (docs/model
/// §30.5 item 1: the geometry comes from zoneinfo; §16.2 item 4: what pagetypeinfo counts).
///
/// With deferred struct page init (CONFIG_DEFERRED_STRUCT_PAGE_INIT; `deferred_init=lazy` on
/// kernels that leave it to `deferred_grow_zone()`), only part of a zone's memmap is
/// initialised at boot and handed to the buddy allocator; the rest is initialised when an
/// allocation needs it. Its pfns read as pages without flags in /proc/kpageflags, so a
/// reconstruction would take gigabytes of memory the kernel has not yet handed out for kernel
/// allocations. The test: /proc/pagetypeinfo's "Number of blocks type" counts a block only when
/// the struct page of its first pfn belongs to the zone (`pagetypeinfo_showblockcount_print`:
/// `pfn_to_online_page`, then `page_zone(page) != zone` skips it; an uninitialised struct page
/// is zeroed, so it names zone 0), while zoneinfo's `present` counts every page. Fully
/// initialised, a zone's counted blocks cover its present pages (512 each; a block is counted
/// when any pfn of its memory section is online, so holes only add blocks), but for a block
/// lost at each end of a zone that starts and ends unaligned. A zone is refused when more than
/// 1/64 of its present pages, plus two blocks, lie outside its counted blocks. Measured on a
/// fresh 24 GiB machine (`deferred_init=lazy`): Normal present 5505024, managed 458752, 896
/// blocks counted (458752 pages); the same machine once warmed: 10752 blocks, exactly its
/// present pages (managed 5394258). `managed` is not the test: reservations (crashkernel,
/// firmware, boot-time hugetlb) can lower it legitimately; it is named in the reason.
///
/// The reason is one line: the zone, the numbers and how to warm the machine (make the kernel
/// want more memory than it has initialised: read more file data than RAM once).
pub fn uninitialised_memory(zoneinfo: &str, pagetypeinfo: &str) -> Option<String> {
    let pti = parse_pagetypeinfo_nodes(pagetypeinfo);
    let zones = parse_zoneinfo(zoneinfo);
    let ram: u64 = zones.iter().fold(0u64, |a, z| a.saturating_add(z.present));
    for z in zones.iter().filter(|z| z.present > 0) {
        let blocks = pti.get(&(z.node, z.name.clone())).map_or(0, |p| p.counted_blocks);
        let covered = blocks.saturating_mul(512);
        let missing = z.present.saturating_sub(covered);
        if missing > z.present / 64 + 2 * 512 {
            // A sparse file reads as zeroes without disk I/O: 5/4 of RAM, in whole GiB.
            let gib = (ram.saturating_mul(4096) / 4 * 5).div_ceil(1 << 30);
            return Some(format!(
                "zone {} is not fully initialised (deferred struct page init): /proc/pagetypeinfo counts {blocks} pageblocks ({covered} pages) of its {} present pages, managed {}; warm the machine first by reading more file data than RAM once, e.g. a sparse file: `truncate -s {gib}G f; cat f > /dev/null; rm f`",
                z.name, z.present, z.managed
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_30_1_proc_texts() {
        let iomem = "00000000-00000fff : Reserved\n00001000-0009fbff : System RAM\n00100000-bfffffff : System RAM\n  01000000-01ffffff : Kernel code\n100000000-63fffffff : System RAM\n";
        assert_eq!(
            parse_iomem_ram(iomem),
            vec![[1, 0x9f], [0x100, 0xc0000], [0x100000, 0x640000]]
        );
        let zi = "Node 0, zone      DMA\n  pages free     3840\n        min      10\n        low      13\n        high     16\n        spanned  4095\n        present  3998\n        managed  3840\n  pagesets\n    cpu: 0\n              count:    5\n              high:     0\n    cpu: 1\n              count:    2\n              high:     9\n  start_pfn:           1\n";
        let z = parse_zoneinfo(zi);
        assert_eq!(z.len(), 1);
        assert_eq!(
            (z[0].start_pfn, z[0].spanned, z[0].present, z[0].managed),
            (1, 4095, 3998, 3840)
        );
        assert_eq!((z[0].min, z[0].low, z[0].high, z[0].pcp_count), (10, 13, 16, 7));
        let pti = "Free pages count per migrate type at order       0      1\nNode    0, zone   Normal, type    Unmovable      1      2 \nNode    0, zone   Normal, type      Movable >100000      0 \n\nNumber of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \nNode 0, zone   Normal          114        10375          263            0            0 \n";
        let p = parse_pagetypeinfo(pti);
        let n = &p["Normal"];
        assert_eq!(n.free[0][..2], [1, 2]);
        assert_eq!(n.free[1][0], 100000);
        assert!(n.capped[1][0]);
        assert_eq!(n.blocks, [114, 10375, 263, 0, 0]);
        let bi = parse_buddyinfo("Node 0, zone      DMA      0      1      2\n");
        assert_eq!(bi["DMA"][..3], [0, 1, 2]);
    }

    #[test]
    fn tables_are_kept_per_node_and_summed_by_name_on_request() {
        let pti = "Free pages count per migrate type at order 0 1 2 3 4 5 6 7 8 9 10\n\
            Node    0, zone   Normal, type      Movable 1 0 0 0 0 0 0 0 0 0 2\n\
            Node    1, zone   Normal, type      Movable 3 0 0 0 0 0 0 0 0 0 >100000\n\n\
            Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate\n\
            Node 0, zone   Normal 0 8 0 0 0\n\
            Node 1, zone   Normal 1 7 0 0 0\n";
        let by_node = check_pagetypeinfo(pti).unwrap();
        let n1 = &by_node[&(1, "Normal".to_string())];
        assert_eq!(
            (n1.free[1][0], n1.free[1][10], n1.capped[1][10]),
            (3, 100000, true)
        );
        assert_eq!(n1.blocks[..2], [1, 7]);
        assert_eq!(by_node[&(0, "Normal".to_string())].blocks[..2], [0, 8]);
        let summed = parse_pagetypeinfo(pti);
        assert_eq!(summed["Normal"].blocks[..2], [1, 15]);
        assert_eq!(summed["Normal"].free[1][0], 4);
        assert!(summed["Normal"].capped[1][10]);
        let bi = "Node 0, zone   Normal 1 0 0 0 0 0 0 0 0 0 2\nNode 1, zone   Normal 3 0 0 0 0 0 0 0 0 0 1\n";
        assert_eq!(check_buddyinfo(bi).unwrap()[&(1, "Normal".to_string())][0], 3);
        assert_eq!(parse_buddyinfo(bi)["Normal"][..1], [4]);
        let e = check_buddyinfo("Node x, zone   Normal 1 0 0 0 0 0 0 0 0 0 2\n").unwrap_err();
        assert_eq!(e, (1, "node id \"x\" is not a number".to_string()));
    }
}
