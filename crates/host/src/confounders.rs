//! Reads the host's confounders ([`ConfounderReading`]): free page reporting, DAMON's sysfs
//! tree, lazy memory initialisation (`deferred_init=` and each zone's managed against present
//! pages), the THP settings, every block device's `read_ahead_kb`, swap, load average and the
//! CPU tick counts, at the start and end of every host run (issue 19, item 5;
//! measured on the reference VM; docs/model §27.3 for what DAMON does on these VMs).
//!
//! Every reader takes the root of the file system (`/` on the live machine, a recorded tree in
//! the tests, `tests/data/confounders/`). A missing or unreadable file is recorded as absent,
//! never an error: the readings describe the machine, they do not gate the run.
//!
//! Files: `/sys/module/page_reporting/parameters/*` (mm/page_reporting.c's module parameters),
//! `/proc/cmdline`, `/sys/kernel/mm/damon/admin/kdamonds/N/...` (the DAMON sysfs interface,
//! Documentation/admin-guide/mm/damon/usage.rst), `/sys/kernel/mm/transparent_hugepage/...`,
//! `/sys/block/*/queue/read_ahead_kb`, `/proc/zoneinfo`, `/proc/meminfo`, `/proc/swaps`, `/proc/loadavg`,
//! `/proc/stat` (Documentation/filesystems/proc.rst).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_spec::result::confounders::{
    ConfounderReading, CpuTicks, Damon, DamonContext, DamonFilter, DamonScheme, Kdamond, MemoryInit,
    PageReporting, Swap,
};

use crate::knobs::normalise;

/// Reads the confounders of the live machine.
pub fn read() -> ConfounderReading {
    read_at(Path::new("/"))
}

/// Reads the confounders of the file-system tree at `root`.
pub fn read_at(root: &Path) -> ConfounderReading {
    let meminfo = text(&root.join("proc/meminfo"));
    ConfounderReading {
        page_reporting: page_reporting(root),
        damon: damon(root),
        thp: thp(&root.join("sys/kernel/mm/transparent_hugepage")),
        read_ahead_kb: queue_kb(&root.join("sys/block"), "read_ahead_kb"),
        max_sectors_kb: queue_kb(&root.join("sys/block"), "max_sectors_kb"),
        swap: meminfo
            .as_deref()
            .and_then(|m| parse_swap(m, text(&root.join("proc/swaps")).as_deref())),
        loadavg: text(&root.join("proc/loadavg")).and_then(|t| parse_loadavg(&t)),
        cpu_ticks: text(&root.join("proc/stat")).and_then(|t| parse_cpu_ticks(&t)),
        memory_init: text(&root.join("proc/zoneinfo")).map(|z| MemoryInit {
            deferred_init: text(&root.join("proc/cmdline")).and_then(|c| parse_cmdline_deferred_init(&c)),
            zones: parse_zone_pages(&z),
        }),
    }
}

/// `deferred_init=VALUE` of a kernel command line (before the init's arguments).
pub fn parse_cmdline_deferred_init(cmdline: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .find_map(|w| w.strip_prefix("deferred_init="))
        .map(str::to_string)
}

/// Each zone's `present` and `managed` pages from /proc/zoneinfo, zones with present pages
/// only, in the file's order.
pub fn parse_zone_pages(zoneinfo: &str) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    let mut cur: Option<(String, u64, u64)> = None;
    for line in zoneinfo.lines() {
        if let Some(rest) = line.strip_prefix("Node ") {
            if let Some(z) = cur.take().filter(|z| z.1 > 0) {
                out.push(z);
            }
            let zone = rest.split_once("zone").map(|(_, z)| z.trim().to_string());
            cur = zone.map(|z| (z, 0, 0));
            continue;
        }
        let mut w = line.split_whitespace();
        if let (Some(k), Some(v), Some(c)) = (w.next(), w.next(), cur.as_mut()) {
            match k {
                "present" => c.1 = v.parse().unwrap_or(0),
                "managed" => c.2 = v.parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    if let Some(z) = cur.filter(|z| z.1 > 0) {
        out.push(z);
    }
    out
}

fn text(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

fn trimmed(p: &Path) -> Option<String> {
    text(p).map(|t| t.trim().to_string())
}

fn num(p: &Path) -> Option<u64> {
    trimmed(p)?.parse().ok()
}

/// The entries of a directory, sorted by name (none if it is absent).
fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The numbered subdirectories (`0`, `1`, ...) of a DAMON directory, in numeric order.
fn numbered(dir: &Path) -> Vec<(u32, PathBuf)> {
    let mut v: Vec<(u32, PathBuf)> = entries(dir)
        .into_iter()
        .filter_map(|(n, p)| Some((n.parse().ok()?, p)))
        .filter(|(_, p)| p.is_dir())
        .collect();
    v.sort();
    v
}

/// `page_reporting.page_reporting_order=N` of a kernel command line.
pub fn parse_cmdline_order(cmdline: &str) -> Option<u32> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .find_map(|w| w.strip_prefix("page_reporting.page_reporting_order="))
        .and_then(|v| v.parse().ok())
}

fn page_reporting(root: &Path) -> Option<PageReporting> {
    let dir = root.join("sys/module/page_reporting/parameters");
    if !dir.is_dir() {
        return None;
    }
    let parameters: BTreeMap<String, String> = entries(&dir)
        .into_iter()
        .filter_map(|(n, p)| Some((n, trimmed(&p)?)))
        .collect();
    let get = |k: &str| parameters.get(k).and_then(|v| v.parse::<u64>().ok());
    Some(PageReporting {
        order: get("page_reporting_order").map(|v| v as u32),
        cmdline_order: text(&root.join("proc/cmdline")).and_then(|c| parse_cmdline_order(&c)),
        reported_kib: get("reported_kib"),
        active: get("reported_kib").unwrap_or(0) > 0 || get("passes").unwrap_or(0) > 0,
        parameters,
    })
}

/// DAMON's sysfs tree (`sys/kernel/mm/damon/admin`) and the running `kdamond*` threads.
fn damon(root: &Path) -> Option<Damon> {
    let kd = root.join("sys/kernel/mm/damon/admin/kdamonds");
    if !kd.is_dir() {
        return None;
    }
    Some(Damon {
        nr_kdamonds: num(&kd.join("nr_kdamonds")).unwrap_or(0) as u32,
        threads: kdamond_threads(&root.join("proc")),
        kdamonds: numbered(&kd)
            .into_iter()
            .map(|(index, d)| Kdamond {
                index,
                state: trimmed(&d.join("state")).unwrap_or_default(),
                pid: trimmed(&d.join("pid")).and_then(|p| p.parse().ok()),
                contexts: numbered(&d.join("contexts"))
                    .into_iter()
                    .map(|(_, c)| damon_context(&c))
                    .collect(),
            })
            .collect(),
    })
}

fn damon_context(c: &Path) -> DamonContext {
    let attrs = c.join("monitoring_attrs");
    let iv = attrs.join("intervals");
    DamonContext {
        operations: trimmed(&c.join("operations")).unwrap_or_default(),
        sample_us: num(&iv.join("sample_us")),
        aggr_us: num(&iv.join("aggr_us")),
        update_us: num(&iv.join("update_us")),
        nr_regions: (
            num(&attrs.join("nr_regions/min")),
            num(&attrs.join("nr_regions/max")),
        ),
        nr_targets: num(&c.join("targets/nr_targets")),
        target_regions: numbered(&c.join("targets"))
            .into_iter()
            .flat_map(|(_, t)| numbered(&t.join("regions")))
            .filter_map(|(_, r)| Some([num(&r.join("start"))?, num(&r.join("end"))?]))
            .collect(),
        schemes: numbered(&c.join("schemes"))
            .into_iter()
            .map(|(_, s)| damon_scheme(&s))
            .collect(),
    }
}

fn damon_scheme(s: &Path) -> DamonScheme {
    let range = |k: &str| {
        (
            num(&s.join(format!("access_pattern/{k}/min"))),
            num(&s.join(format!("access_pattern/{k}/max"))),
        )
    };
    let wm = s.join("watermarks");
    let yes = |p: &Path| trimmed(p).is_some_and(|v| v == "Y" || v == "1");
    let filters = ["filters", "core_filters", "ops_filters"]
        .iter()
        .flat_map(|set| {
            numbered(&s.join(set)).into_iter().map(move |(_, f)| DamonFilter {
                set: set.to_string(),
                kind: trimmed(&f.join("type")).unwrap_or_default(),
                matching: yes(&f.join("matching")),
                allow: yes(&f.join("allow")),
            })
        })
        .collect();
    DamonScheme {
        action: trimmed(&s.join("action")).unwrap_or_default(),
        nr_accesses: range("nr_accesses"),
        age: range("age"),
        sz: range("sz"),
        quota_ms: num(&s.join("quotas/ms")),
        quota_bytes: num(&s.join("quotas/bytes")),
        quota_reset_interval_ms: num(&s.join("quotas/reset_interval_ms")),
        watermark_metric: trimmed(&wm.join("metric")).unwrap_or_default(),
        watermarks: ["interval_us", "high", "mid", "low"].map(|k| num(&wm.join(k))),
        filters,
        stats: entries(&s.join("stats"))
            .into_iter()
            .filter_map(|(n, p)| Some((n, num(&p)?)))
            .collect(),
    }
}

/// Pids under `proc` whose `comm` starts with `kdamond`.
fn kdamond_threads(proc: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = entries(proc)
        .into_iter()
        .filter_map(|(n, p)| {
            let pid: u32 = n.parse().ok()?;
            trimmed(&p.join("comm"))
                .is_some_and(|c| c.starts_with("kdamond"))
                .then_some(pid)
        })
        .collect();
    v.sort_unstable();
    v
}

/// The THP settings: the top-level choice files, `khugepaged/defrag` and each size's
/// `enabled`/`shmem_enabled`, normalised to the active word.
fn thp(dir: &Path) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for k in [
        "enabled",
        "defrag",
        "shmem_enabled",
        "use_zero_page",
        "khugepaged/defrag",
    ] {
        if let Some(t) = text(&dir.join(k)) {
            m.insert(k.to_string(), normalise(&t));
        }
    }
    for (n, p) in entries(dir) {
        if n.starts_with("hugepages-") {
            for k in ["enabled", "shmem_enabled"] {
                if let Some(t) = text(&p.join(k)) {
                    m.insert(format!("{n}/{k}"), normalise(&t));
                }
            }
        }
    }
    m
}

/// `NAME/queue/FILE` of every device under `sys/block` (`read_ahead_kb`: the bdi's
/// `ra_pages` × 4; `max_sectors_kb`: its `io_pages` × 4, docs/model §23.1).
fn queue_kb(dir: &Path, file: &str) -> BTreeMap<String, u64> {
    entries(dir)
        .into_iter()
        .filter_map(|(n, p)| Some((n, num(&p.join("queue").join(file))?)))
        .collect()
}

/// SwapTotal and SwapFree of /proc/meminfo (KiB) and the areas of /proc/swaps (its lines after
/// the header). None without SwapTotal.
pub fn parse_swap(meminfo: &str, swaps: Option<&str>) -> Option<Swap> {
    let kib = |f: &str| crate::procfs::meminfo_bytes(meminfo, f).map(|b| b / 1024);
    Some(Swap {
        total_kib: kib("SwapTotal")?,
        free_kib: kib("SwapFree").unwrap_or(0),
        areas: swaps
            .map(|s| {
                s.lines()
                    .skip(1)
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// The three load averages of /proc/loadavg (`1.43 1.93 4.12 2/89 9287`).
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|w| w.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The `cpu` line of /proc/stat (`cpu user nice system idle iowait irq softirq steal guest
/// guest_nice`, in USER_HZ ticks): the sum of the first eight (guest time is already inside
/// user) and steal.
pub fn parse_cpu_ticks(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    (v.len() >= 8).then(|| CpuTicks {
        total: v[..8].iter().sum(),
        steal: v[7],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/confounders")
    }

    #[test]
    fn page_reporting_order_and_reported_kib() {
        let p = read_at(&fixture()).page_reporting.expect("recorded");
        assert_eq!(p.order, Some(9));
        assert_eq!(p.cmdline_order, Some(11));
        assert_eq!(p.reported_kib, Some(4670324));
        assert!(p.active);
        assert_eq!(p.parameters["passes"], "405");
    }

    /// Lazy memory init (measured on the reference VM): the command line's deferred_init and each
    /// populated zone's present and managed pages, from this machine's recorded files.
    #[test]
    fn memory_init_of_the_recorded_tree() {
        let m = read_at(&fixture()).memory_init.expect("recorded");
        assert_eq!(m.deferred_init.as_deref(), Some("lazy"));
        let names: Vec<&str> = m.zones.iter().map(|z| z.0.as_str()).collect();
        assert_eq!(names, ["DMA", "DMA32", "Normal"]);
        let normal = &m.zones[2];
        assert_eq!((normal.1, normal.2), (5_505_024, 5_394_258));
        assert_eq!(parse_cmdline_deferred_init("quiet -- deferred_init=lazy"), None);
    }

    #[test]
    fn cmdline_order_only_before_the_init_arguments() {
        assert_eq!(
            parse_cmdline_order("quiet page_reporting.page_reporting_order=11 x"),
            Some(11)
        );
        assert_eq!(
            parse_cmdline_order("quiet -- page_reporting.page_reporting_order=11"),
            None
        );
        assert_eq!(parse_cmdline_order("quiet"), None);
    }

    /// docs/model §27.3: the recorded kdamond has S2's pageout scheme (not started).
    #[test]
    fn damon_scheme_of_the_sysfs_tree() {
        let d = read_at(&fixture()).damon.expect("recorded");
        assert_eq!(d.nr_kdamonds, 1);
        assert!(d.threads.is_empty());
        let k = &d.kdamonds[0];
        assert_eq!((k.index, k.state.as_str(), k.pid), (0, "off", Some(-1)));
        let c = &k.contexts[0];
        assert_eq!(c.operations, "paddr");
        assert_eq!(c.schemes.len(), 1);
        let s = &c.schemes[0];
        assert_eq!(s.action, "pageout");
        assert_eq!(s.nr_accesses, (Some(0), Some(1)));
        assert_eq!(s.age.0, Some(12));
        assert_eq!(
            (s.quota_ms, s.quota_bytes, s.quota_reset_interval_ms),
            (Some(50), Some(128 << 20), Some(1000))
        );
        assert_eq!(s.watermark_metric, "none");
        let f: Vec<(&str, &str, bool, bool)> = s
            .filters
            .iter()
            .map(|f| (f.set.as_str(), f.kind.as_str(), f.matching, f.allow))
            .collect();
        assert_eq!(
            f,
            vec![
                ("ops_filters", "anon", true, false),
                ("ops_filters", "unmapped", true, true)
            ]
        );
        assert_eq!(s.stats["nr_applied"], 0);
        assert!(s.describe().contains("filters [anon reject, unmapped allow]"));
    }

    #[test]
    fn thp_settings_and_read_ahead() {
        let r = read_at(&fixture());
        assert_eq!(r.thp["enabled"], "madvise");
        assert_eq!(r.thp["defrag"], "madvise");
        assert_eq!(r.thp["khugepaged/defrag"], "1");
        assert_eq!(r.thp["hugepages-2048kB/enabled"], "inherit");
        assert_eq!(r.thp["hugepages-64kB/enabled"], "never");
        assert_eq!(r.read_ahead_kb["vda"], 8192);
        assert_eq!(r.read_ahead_kb["loop0"], 128);
        // §23.1 item 5: vda's io_pages is 1024 (max_sectors_kb 4096).
        assert_eq!(r.max_sectors_kb["vda"], 4096);
        assert_eq!(r.max_sectors_kb["zram0"], 124);
    }

    #[test]
    fn swap_load_and_cpu_ticks() {
        let r = read_at(&fixture());
        let s = r.swap.expect("meminfo recorded");
        assert_eq!((s.total_kib, s.free_kib), (0, 0));
        assert!(s.areas.is_empty());
        assert_eq!(r.loadavg, Some([1.44, 1.92, 4.10]));
        let t = r.cpu_ticks.expect("stat recorded");
        assert_eq!(t.steal, 8370);
        assert_eq!(t.total, 883151 + 37140 + 77504 + 1002 + 225 + 8370);
        let swaps = "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition\t8388604\t0\t100\n";
        let m = "SwapTotal:       8388604 kB\nSwapFree:        8388604 kB\n";
        let s = parse_swap(m, Some(swaps)).unwrap();
        assert_eq!(s.total_kib, 8388604);
        assert_eq!(s.areas, vec!["/dev/zram0 partition 8388604 0 100"]);
    }

    #[test]
    fn missing_files_are_absent() {
        let r = read_at(Path::new("/nonexistent-fraglab-root"));
        assert_eq!(r, ConfounderReading::default());
    }
}
