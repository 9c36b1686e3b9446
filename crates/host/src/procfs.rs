//! Readers and parsers of the /proc files the engine samples (formats: docs/model §16,
//! mm/vmstat.c): `/proc/buddyinfo`, `/proc/pagetypeinfo`, `/proc/vmstat`, `/proc/zoneinfo`,
//! `/proc/meminfo`.

use std::collections::BTreeMap;

use fraglab_spec::result::pageblock::ZoneCensus;
use fraglab_spec::result::Sample;

use crate::HostError;

/// Orders of the buddy allocator (`NR_PAGE_ORDERS` on x86-64).
pub const NR_ORDERS: usize = 11;

/// The migratetypes in the order of `Sample::free_by_type` and `blocks_by_type` (the kernel's
/// `migratetype_names` with CMA off: Unmovable, Movable, Reclaimable, HighAtomic, Isolate).
pub const MIGRATETYPES: [&str; 5] = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"];

/// The whole text of a /proc (or sysfs) file.
pub fn read(path: &str) -> Result<String, HostError> {
    std::fs::read_to_string(path).map_err(|e| HostError::io(path, e))
}

/// Free pages per order over all zones, from `/proc/buddyinfo` (one line per populated zone:
/// `Node N, zone NAME` then nr_free of each order, i.e. blocks, which this converts to pages).
pub fn parse_buddyinfo(text: &str) -> Vec<u64> {
    let mut free = vec![0u64; NR_ORDERS];
    for line in text.lines() {
        let Some((_, counts)) = line.split_once("zone") else {
            continue;
        };
        // Skip the zone name, then the counts.
        for (o, n) in counts.split_whitespace().skip(1).enumerate() {
            if o < NR_ORDERS {
                free[o] += n.parse::<u64>().unwrap_or(0) << o;
            }
        }
    }
    free
}

/// What a sample needs from `/proc/pagetypeinfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PagetypeInfo {
    /// Free pages per migratetype ([`MIGRATETYPES`] order), all zones and orders.
    pub free_by_type: Vec<u64>,
    /// Pageblocks per migratetype, all zones.
    pub blocks_by_type: Vec<u64>,
    /// "Number of mixed blocks" totals, only with CONFIG_PAGE_OWNER (else `None`).
    pub mixed_blocks: Option<u64>,
}

fn type_index(name: &str) -> Option<usize> {
    MIGRATETYPES.iter().position(|t| *t == name)
}

/// Parses `/proc/pagetypeinfo`: the per-type free counts (`Node 0, zone Normal, type Movable
/// n0 .. n10`, a `>` prefix marking a count capped at 100000), the "Number of blocks type" table
/// and, if present, the "Number of mixed blocks" table (CONFIG_PAGE_OWNER). Types other than
/// [`MIGRATETYPES`] (CMA) are ignored.
pub fn parse_pagetypeinfo(text: &str) -> PagetypeInfo {
    let mut p = PagetypeInfo {
        free_by_type: vec![0; MIGRATETYPES.len()],
        blocks_by_type: vec![0; MIGRATETYPES.len()],
        mixed_blocks: None,
    };
    // Column headers of the current table (block or mixed table), by type index.
    let mut header: Option<(bool, Vec<Option<usize>>)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Number of blocks type") {
            header = Some((false, rest.split_whitespace().map(type_index).collect()));
            continue;
        }
        if let Some(rest) = line.strip_prefix("Number of mixed blocks") {
            header = Some((true, rest.split_whitespace().map(type_index).collect()));
            p.mixed_blocks.get_or_insert(0);
            continue;
        }
        if let Some(i) = line.find(", type ") {
            let rest = &line[i + ", type ".len()..];
            let mut it = rest.split_whitespace();
            let Some(t) = it.next().and_then(type_index) else {
                continue;
            };
            for (o, n) in it.enumerate() {
                let n: u64 = n.trim_start_matches('>').parse().unwrap_or(0);
                p.free_by_type[t] += n << o;
            }
            continue;
        }
        if line.starts_with("Node ") {
            if let (Some((mixed, cols)), Some((_, counts))) = (&header, line.split_once("zone")) {
                for (c, n) in counts.split_whitespace().skip(1).enumerate() {
                    let n: u64 = n.parse().unwrap_or(0);
                    match (mixed, cols.get(c).copied().flatten()) {
                        (false, Some(t)) => p.blocks_by_type[t] += n,
                        (true, Some(_)) => *p.mixed_blocks.as_mut().expect("set above") += n,
                        _ => {}
                    }
                }
            }
        } else if line.trim().is_empty() {
            header = None;
        }
    }
    p
}

/// `/proc/vmstat` as name → value.
pub fn parse_vmstat(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let (n, v) = l.split_once(' ')?;
            Some((n.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// A field of `/proc/meminfo` in bytes (`MemAvailable:   24219480 kB`).
pub fn meminfo_bytes(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    })
}

/// The `min` watermarks of every zone in /proc/zoneinfo, summed (pages).
pub fn zone_min_pages(zoneinfo: &str) -> Option<u64> {
    let v: Vec<u64> = zoneinfo
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            (it.next()? == "min").then(|| it.next()?.parse().ok())?
        })
        .collect();
    (!v.is_empty()).then(|| v.iter().sum())
}

/// Node 0's zones in /proc/zoneinfo (`Node 0, zone NAME` sections: `spanned`, `present`,
/// `managed`, `start_pfn:`), the populated ones (spanned > 0), in pfn order.
pub fn parse_zones(zoneinfo: &str) -> Vec<fraglab_spec::result::ZoneLayout> {
    let mut zones = Vec::new();
    let mut cur: Option<fraglab_spec::result::ZoneLayout> = None;
    for l in zoneinfo.lines() {
        if let Some(rest) = l.strip_prefix("Node ") {
            zones.extend(cur.take());
            if let Some((node, zone)) = rest.split_once(", zone") {
                if node.trim() == "0" {
                    cur = Some(fraglab_spec::result::ZoneLayout {
                        name: zone.trim().to_string(),
                        ..Default::default()
                    });
                }
            }
            continue;
        }
        let Some(z) = cur.as_mut() else { continue };
        let mut it = l.split_whitespace();
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let Ok(v) = v.parse::<u64>() else { continue };
        match k {
            "spanned" => z.spanned = v,
            "present" => z.present = v,
            "managed" => z.managed = v,
            "start_pfn:" => z.start_pfn = v,
            _ => {}
        }
    }
    zones.extend(cur);
    zones.retain(|z| z.spanned > 0);
    zones.sort_by_key(|z| z.start_pfn);
    zones
}

/// MemAvailable in bytes, now.
pub fn mem_available() -> Result<u64, HostError> {
    let t = read("/proc/meminfo")?;
    meminfo_bytes(&t, "MemAvailable")
        .ok_or_else(|| HostError::io("/proc/meminfo", std::io::Error::other("no MemAvailable")))
}

/// One [`Sample`] from `/proc/buddyinfo`, `/proc/pagetypeinfo` and `/proc/vmstat`.
/// `mixed_blocks` is 0 unless pagetypeinfo has the CONFIG_PAGE_OWNER "Number of mixed blocks"
/// table (the reference kernel does not).
pub fn sample(t_ns: u64) -> Result<Sample, HostError> {
    Ok(sample_and_census(t_ns)?.0)
}

/// A [`Sample`] and the pageblock census of each zone (issue 33's named samples,
/// [`ZoneCensus::from_pagetypeinfo`]) from one read of each file: the census is of the same
/// /proc/pagetypeinfo text as the sample's block counts.
pub fn sample_and_census(t_ns: u64) -> Result<(Sample, Vec<ZoneCensus>), HostError> {
    let buddy = read("/proc/buddyinfo")?;
    let pagetypeinfo = read("/proc/pagetypeinfo")?;
    let vmstat = read("/proc/vmstat")?;
    Ok(sample_from(t_ns, &buddy, &pagetypeinfo, &vmstat))
}

/// [`sample_and_census`] of the texts of the three files.
pub fn sample_from(t_ns: u64, buddy: &str, pagetypeinfo: &str, vmstat: &str) -> (Sample, Vec<ZoneCensus>) {
    let pti = parse_pagetypeinfo(pagetypeinfo);
    let vm = parse_vmstat(vmstat);
    let get = |k: &str| vm.get(k).copied().unwrap_or(0).max(0) as u64;
    let sample = Sample {
        t_ns,
        free_by_order: parse_buddyinfo(buddy),
        free_by_type: pti.free_by_type,
        blocks_by_type: pti.blocks_by_type,
        mixed_blocks: pti.mixed_blocks.unwrap_or(0),
        thp_fault_alloc: get("thp_fault_alloc"),
        thp_fault_fallback: get("thp_fault_fallback"),
    };
    (sample, ZoneCensus::from_pagetypeinfo(pagetypeinfo))
}

/// The /proc texts of a run's start and end: buddyinfo, pagetypeinfo, zoneinfo, vmstat.
pub fn proc_snapshot() -> Result<BTreeMap<String, String>, HostError> {
    let mut m = BTreeMap::new();
    for name in ["buddyinfo", "pagetypeinfo", "zoneinfo", "vmstat"] {
        m.insert(name.to_string(), read(&format!("/proc/{name}"))?);
    }
    Ok(m)
}

/// What this VM adds beyond the page allocator (measured on the reference VM), as `key value` lines:
/// the kernel release, free page reporting's `reported_kib` and `page_reporting_order`, and
/// whether a `kdamond` (DAMON) thread runs. Recorded at the start and end of every run.
pub fn host_facts() -> String {
    let mut s = String::new();
    let rd = |p: &str| std::fs::read_to_string(p).ok().map(|t| t.trim().to_string());
    s += &format!(
        "kernel_release {}\n",
        rd("/proc/sys/kernel/osrelease").unwrap_or_default()
    );
    if let Some(v) = rd("/sys/module/page_reporting/parameters/reported_kib") {
        s += &format!("page_reporting_reported_kib {v}\n");
    }
    if let Some(v) = rd("/sys/module/page_reporting/parameters/page_reporting_order") {
        s += &format!("page_reporting_order {v}\n");
    }
    let kdamonds = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                        && rd(&format!("/proc/{}/comm", e.file_name().to_string_lossy()))
                            .is_some_and(|c| c.starts_with("kdamond"))
                })
                .count()
        })
        .unwrap_or(0);
    s += &format!("kdamond_threads {kdamonds}\n");
    s
}

/// The mount options of the filesystem holding `path` (the longest mount point that is a
/// prefix of it in /proc/self/mountinfo), or `None` if unknown.
pub fn mount_options(path: &std::path::Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let path = path.canonicalize().ok()?;
    let mut best: Option<(usize, String)> = None;
    for line in info.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // mountinfo: id parent major:minor root mount-point options ... - fstype source super-options
        let (Some(mp), Some(opts)) = (f.get(4), f.get(5)) else {
            continue;
        };
        let sep = f.iter().position(|x| *x == "-");
        let sup = sep.and_then(|i| f.get(i + 3)).copied().unwrap_or("");
        if path.starts_with(mp) && best.as_ref().is_none_or(|(l, _)| mp.len() >= *l) {
            best = Some((mp.len(), format!("{opts},{sup}")));
        }
    }
    best.map(|(_, o)| o)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDDY: &str = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n\
Node 0, zone    DMA32      1      2      4      2      5      4      3      3      4      2    752 \n";

    #[test]
    fn buddyinfo_pages_per_order() {
        let f = parse_buddyinfo(BUDDY);
        assert_eq!(f.len(), 11);
        assert_eq!(f[0], 1);
        assert_eq!(f[1], 4);
        assert_eq!(f[8], 5 << 8);
        assert_eq!(f[10], 755 << 10);
    }

    #[test]
    fn pagetypeinfo_sample_file() {
        let t = include_str!("../tests/data/pagetypeinfo.txt");
        let p = parse_pagetypeinfo(t);
        assert_eq!(p.blocks_by_type, vec![1 + 45, 7 + 1528 + 560, 35, 0, 0]);
        // Unmovable: DMA one order-8 block; Normal 406 380 178 12 2 43 19 10 4 0 0.
        let normal_unmov: u64 = [406u64, 380, 178, 12, 2, 43, 19, 10, 4, 0, 0]
            .iter()
            .enumerate()
            .map(|(o, n)| n << o)
            .sum();
        assert_eq!(p.free_by_type[0], 256 + normal_unmov);
        assert_eq!(p.mixed_blocks, None);
        // Free per type sums to the buddyinfo total.
        let b: u64 = parse_buddyinfo(include_str!("../tests/data/buddyinfo.txt"))
            .iter()
            .sum();
        assert_eq!(p.free_by_type.iter().sum::<u64>(), b);
    }

    #[test]
    fn pagetypeinfo_capped_and_mixed() {
        let t = "Node    0, zone   Normal, type      Movable >100000      0\n\n\
Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n\
Node 0, zone   Normal           45          560           35            0            0 \n\n\
Number of mixed blocks    Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n\
Node 0, zone   Normal            3            4            1            0            0 \n";
        let p = parse_pagetypeinfo(t);
        assert_eq!(p.free_by_type[1], 100000);
        assert_eq!(p.blocks_by_type, vec![45, 560, 35, 0, 0]);
        assert_eq!(p.mixed_blocks, Some(8));
    }

    #[test]
    fn meminfo_field() {
        let t = "MemTotal:       24684092 kB\nMemAvailable:   24219480 kB\n";
        assert_eq!(meminfo_bytes(t, "MemAvailable"), Some(24219480 * 1024));
        assert_eq!(meminfo_bytes(t, "MemFree"), None);
    }

    #[test]
    fn zone_min_watermarks_summed() {
        let t = include_str!("../tests/data/zoneinfo.txt");
        let want: u64 = t
            .lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix("min ")
                    .map(|v| v.trim().parse::<u64>().unwrap())
            })
            .sum();
        assert!(want > 0);
        assert_eq!(zone_min_pages(t), Some(want));
        assert_eq!(zone_min_pages("Node 0, zone DMA\n  pages free 3\n"), None);
    }

    #[test]
    fn zones_of_node_0_from_zoneinfo() {
        let z = parse_zones(include_str!("../tests/data/zoneinfo.txt"));
        let got: Vec<(&str, u64, u64, u64, u64)> = z
            .iter()
            .map(|z| (z.name.as_str(), z.start_pfn, z.spanned, z.present, z.managed))
            .collect();
        // Movable and Device span nothing and are left out.
        assert_eq!(
            got,
            vec![
                ("DMA", 1, 4095, 3998, 3840),
                ("DMA32", 4096, 1_044_480, 782_336, 772_917),
                ("Normal", 1_048_576, 5_505_024, 5_505_024, 327_680),
            ]
        );
        let node1 = "Node 1, zone   Normal\n        spanned  10\n  start_pfn: 5\n";
        assert!(parse_zones(node1).is_empty());
    }
}
