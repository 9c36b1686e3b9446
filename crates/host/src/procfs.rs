//! Reading the live kernel's /proc files into the result schema (kernel-model.md §15 formats).

use std::collections::BTreeMap;

use fraglab_spec::result::Sample;

/// The migratetypes in /proc/pagetypeinfo's order, as the result's `free_by_type` and
/// `blocks_by_type` index them (Unmovable, Movable, Reclaimable, HighAtomic, Isolate).
const TYPES: [&str; 5] = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"];

pub fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// /proc/vmstat as name → value.
pub fn vmstat(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter_map(|l| {
            let (n, v) = l.split_once(' ')?;
            Some((n.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// Free pages per order summed over the zones of /proc/buddyinfo.
pub fn buddyinfo_free_by_order(text: &str) -> Vec<u64> {
    let mut out = vec![0u64; 11];
    for line in text.lines() {
        let Some(rest) = line.split("zone").nth(1) else {
            continue;
        };
        for (o, n) in rest.split_whitespace().skip(1).enumerate() {
            if let (Some(slot), Ok(n)) = (out.get_mut(o), n.parse::<u64>()) {
                *slot += n << o;
            }
        }
    }
    out
}

/// Free pages per migratetype (from the "Free pages count per migrate type at order" rows) and
/// pageblocks per migratetype (the "Number of blocks type" rows) of /proc/pagetypeinfo.
pub fn pagetypeinfo(text: &str) -> (Vec<u64>, Vec<u64>) {
    let mut free = vec![0u64; 5];
    let mut blocks = vec![0u64; 5];
    let mut in_blocks = false;
    for line in text.lines() {
        if line.starts_with("Number of blocks type") {
            in_blocks = true;
            continue;
        }
        if line.starts_with("Free pages count") {
            in_blocks = false;
            continue;
        }
        if !line.starts_with("Node") {
            continue;
        }
        if in_blocks {
            // "Node 0, zone   Normal   63   10574   115   0   0": counts per type, in order.
            let nums: Vec<u64> = line
                .split_whitespace()
                .skip(4)
                .filter_map(|w| w.parse().ok())
                .collect();
            for (t, n) in nums.iter().enumerate().take(5) {
                blocks[t] += n;
            }
            continue;
        }
        // "Node 0, zone Normal, type Movable  n0 n1 ... n10": free chunks per order.
        let Some(t) = TYPES
            .iter()
            .position(|t| line.split_whitespace().any(|w| w == *t))
        else {
            continue;
        };
        let nums: Vec<u64> = line
            .split_whitespace()
            .skip_while(|w| *w != TYPES[t])
            .skip(1)
            .filter_map(|w| w.parse().ok())
            .collect();
        free[t] += nums.iter().enumerate().map(|(o, n)| n << o).sum::<u64>();
    }
    (free, blocks)
}

/// MemAvailable from /proc/meminfo, in bytes.
pub fn mem_available() -> u64 {
    read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// One sample of the live system at `t_ns` after the run's start. `mixed_blocks` is 0: the
/// kernel does not report mixed pageblocks (the simulator's count has no /proc counterpart).
pub fn sample(t_ns: u64) -> Sample {
    let v = vmstat(&read("/proc/vmstat"));
    let (free_by_type, blocks_by_type) = pagetypeinfo(&read("/proc/pagetypeinfo"));
    Sample {
        t_ns,
        free_by_order: buddyinfo_free_by_order(&read("/proc/buddyinfo")),
        free_by_type,
        blocks_by_type,
        mixed_blocks: 0,
        thp_fault_alloc: *v.get("thp_fault_alloc").unwrap_or(&0) as u64,
        thp_fault_fallback: *v.get("thp_fault_fallback").unwrap_or(&0) as u64,
    }
}

/// /proc text kept at the start and the end of a run, as the simulator keeps it.
pub fn snapshot() -> BTreeMap<String, String> {
    ["buddyinfo", "pagetypeinfo", "zoneinfo", "vmstat"]
        .iter()
        .map(|f| (f.to_string(), read(&format!("/proc/{f}"))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real files of a Linux 6.18 VM (shared/reference/samples).
    #[test]
    fn parses_the_reference_samples() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/reference/samples");
        let Ok(pti) = std::fs::read_to_string(format!("{dir}/pagetypeinfo.txt")) else {
            eprintln!("SKIPPED: no reference samples beside the repository");
            return;
        };
        let (free, blocks) = pagetypeinfo(&pti);
        assert!(
            blocks[1] > blocks[0] && blocks.iter().sum::<u64>() > 0,
            "{blocks:?}"
        );
        assert!(free[1] > 0, "{free:?}");
        let bi = std::fs::read_to_string(format!("{dir}/buddyinfo.txt")).unwrap();
        let by_order = buddyinfo_free_by_order(&bi);
        assert_eq!(by_order.len(), 11);
        // Free pages agree between the two files (taken at the same moment or not, both are
        // whole-machine totals of the same kind).
        assert!(by_order.iter().sum::<u64>() > 0);
    }
}
