//! Host only: what the machine around the page allocator did during a run (issue 19, item 5;
//! measured on the reference VM "Mechanisms outside the page allocator"). The simulator models none of
//! it, so a kernel figure is read against these: free page reporting (a THP fault on reported
//! memory costs hypervisor faults), DAMON's proactive reclaim (docs/model §27.3: it drops
//! cold unmapped page cache without counting `pgscan`/`pgsteal`), the THP settings, readahead
//! windows (§30), swap, load and CPU steal.
//!
//! A file or directory missing on the host is recorded as absent (`None`, an empty list or map),
//! never as an error. Simulator results have no `confounders` at all.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The confounders of one host run: a reading at its start and at its end, and what is
/// derived from the two.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostConfounders {
    pub start: ConfounderReading,
    pub end: ConfounderReading,
    /// Free page reporting's `reported_kib` at the end minus at the start (None if absent).
    pub reported_kib_delta: Option<i64>,
    /// CPU steal during the run: the `steal` ticks of /proc/stat's `cpu` line over the run as a
    /// share (0–1) of all its ticks over the run (None if /proc/stat is absent or no tick
    /// passed).
    pub steal_share: Option<f64>,
    /// `[host] damon = "off"`: the indices of the kdamonds the run turned off (and back on at
    /// its end).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damon_turned_off: Vec<u32>,
    /// `--fit-memory`: how the machine was fitted (`offline N blocks of 128 MiB (…)` or
    /// `hugetlb pool …`; [`crate::result::FitMemory`] has the figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_memory: Option<String>,
}

/// The confounders read once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfounderReading {
    /// Free page reporting (/sys/module/page_reporting/parameters; None without it).
    pub page_reporting: Option<PageReporting>,
    /// DAMON's sysfs interface (/sys/kernel/mm/damon/admin; None without it).
    pub damon: Option<Damon>,
    /// THP settings under /sys/kernel/mm/transparent_hugepage, by path relative to it
    /// (`enabled`, `defrag`, `shmem_enabled`, `khugepaged/defrag`, `hugepages-2048kB/enabled`,
    /// ...), the active word of a choice file.
    pub thp: BTreeMap<String, String>,
    /// /sys/block/NAME/queue/read_ahead_kb of every block device, by NAME.
    pub read_ahead_kb: BTreeMap<String, u64>,
    /// /sys/block/NAME/queue/max_sectors_kb of every block device, by NAME: the bdi's
    /// `io_pages` × 4 (docs/model §23.1 item 2; `[machine] max_sectors_kb`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_sectors_kb: BTreeMap<String, u64>,
    /// SwapTotal/SwapFree and /proc/swaps (None if /proc/meminfo is absent).
    pub swap: Option<Swap>,
    /// /proc/loadavg's 1, 5 and 15 minute load averages.
    pub loadavg: Option<[f64; 3]>,
    /// /proc/stat's `cpu` line: all ticks and the steal ticks (for [`HostConfounders::steal_share`]).
    pub cpu_ticks: Option<CpuTicks>,
    /// Lazy memory initialisation: the command line's `deferred_init=` and each populated
    /// zone's present and managed pages (None when /proc/zoneinfo is absent; readings from
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_init: Option<MemoryInit>,
}

/// How far the kernel has initialised memory. With `deferred_init=lazy` (this project's VMs)
/// a zone's memory joins the page allocator on demand after boot: `managed` grows towards
/// `present` (about 688 k of 5.5 M Normal pages on a freshly booted machine), and a
/// measurement taken before that is of a smaller machine whose watermarks move under it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryInit {
    /// `deferred_init=` of /proc/cmdline (before the init's `--`), if given.
    pub deferred_init: Option<String>,
    /// (zone, present pages, managed pages) of each zone with present pages, from /proc/zoneinfo.
    pub zones: Vec<(String, u64, u64)>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PageReporting {
    /// The order of the blocks reported (`page_reporting_order`; sysfs is the value in force).
    pub order: Option<u32>,
    /// The order asked for on the kernel command line (`page_reporting.page_reporting_order=`),
    /// which may differ from the sysfs value (measured on the reference VM).
    pub cmdline_order: Option<u32>,
    /// KiB reported to the hypervisor since boot (`reported_kib`).
    pub reported_kib: Option<u64>,
    /// Whether reporting has run: a reporting device registered and reported something
    /// (`reported_kib` or `passes` above 0).
    pub active: bool,
    /// Every parameter file, as read (trimmed).
    pub parameters: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Damon {
    /// `kdamonds/nr_kdamonds`.
    pub nr_kdamonds: u32,
    /// Pids of the running `kdamond*` threads (from /proc/*/comm).
    pub threads: Vec<u32>,
    pub kdamonds: Vec<Kdamond>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Kdamond {
    /// Its directory's index under `kdamonds/`.
    pub index: u32,
    /// `state`: "on" or "off".
    pub state: String,
    /// `pid` (-1 when off).
    pub pid: Option<i64>,
    pub contexts: Vec<DamonContext>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DamonContext {
    /// `operations`: "paddr", "vaddr", "fvaddr".
    pub operations: String,
    /// `monitoring_attrs/intervals/{sample_us,aggr_us,update_us}`.
    pub sample_us: Option<u64>,
    pub aggr_us: Option<u64>,
    pub update_us: Option<u64>,
    /// `monitoring_attrs/nr_regions/{min,max}`.
    pub nr_regions: (Option<u64>, Option<u64>),
    /// `targets/nr_targets`.
    pub nr_targets: Option<u64>,
    /// The monitored ranges of every target (`targets/N/regions/M/{start,end}`), bytes, in
    /// target then region order (absent in results recorded before it was read).
    #[serde(default)]
    pub target_regions: Vec<[u64; 2]>,
    pub schemes: Vec<DamonScheme>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DamonScheme {
    /// `action`: "pageout", "lru_deprio", "stat", ...
    pub action: String,
    /// `access_pattern/{nr_accesses,age,sz}/{min,max}`.
    pub nr_accesses: (Option<u64>, Option<u64>),
    /// In aggregation intervals.
    pub age: (Option<u64>, Option<u64>),
    pub sz: (Option<u64>, Option<u64>),
    /// `quotas/{ms,bytes,reset_interval_ms}`.
    pub quota_ms: Option<u64>,
    pub quota_bytes: Option<u64>,
    pub quota_reset_interval_ms: Option<u64>,
    /// `watermarks/{metric,interval_us,high,mid,low}` ("none": always active).
    pub watermark_metric: String,
    pub watermarks: [Option<u64>; 4],
    /// The filters of `filters/`, `core_filters/` and `ops_filters/`, in that order.
    pub filters: Vec<DamonFilter>,
    /// `stats/*` (nr_tried, sz_tried, nr_applied, sz_applied, qt_exceeds, ...).
    pub stats: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DamonFilter {
    /// "filters", "core_filters" or "ops_filters".
    pub set: String,
    /// `type`: "anon", "memcg", "young", "unmapped", "addr", "target", ...
    pub kind: String,
    pub matching: bool,
    pub allow: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Swap {
    pub total_kib: u64,
    pub free_kib: u64,
    /// The lines of /proc/swaps after its header (one per swap area).
    pub areas: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTicks {
    /// user + nice + system + idle + iowait + irq + softirq + steal (guest time is inside user).
    pub total: u64,
    pub steal: u64,
}

impl HostConfounders {
    /// Both readings, with the derived figures.
    pub fn from_readings(start: ConfounderReading, end: ConfounderReading) -> HostConfounders {
        let kib = |r: &ConfounderReading| r.page_reporting.as_ref().and_then(|p| p.reported_kib);
        let reported_kib_delta = match (kib(&start), kib(&end)) {
            (Some(a), Some(b)) => Some(b as i64 - a as i64),
            _ => None,
        };
        let steal_share = match (start.cpu_ticks, end.cpu_ticks) {
            (Some(a), Some(b)) if b.total > a.total => {
                Some(b.steal.saturating_sub(a.steal) as f64 / (b.total - a.total) as f64)
            }
            _ => None,
        };
        HostConfounders {
            start,
            end,
            reported_kib_delta,
            steal_share,
            damon_turned_off: Vec::new(),
            fit_memory: None,
        }
    }

    /// The free page reporting order the machine had at the run's start (§32.1: sysfs
    /// `page_reporting_order`, which reads −1 until a device registers); `None` without a
    /// device, or when not recorded. What `validate` boots its simulator arms with.
    pub fn page_reporting_order(&self) -> Option<u32> {
        self.start.page_reporting.as_ref()?.order.filter(|&o| o <= 10)
    }

    /// The short block `fraglab host run` and `validate` print before their rows: one `# `
    /// line per confounder.
    pub fn summary(&self) -> String {
        let (s, e) = (&self.start, &self.end);
        let mut t = String::from("# host confounders (start -> end of the run):\n");
        let opt = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
        match &e.page_reporting {
            Some(p) => {
                let _ = writeln!(
                    t,
                    "#   free page reporting: {}, order {} (command line {}), reported_kib {} -> {} (delta {})",
                    if p.active { "active" } else { "inactive" },
                    opt(p.order.map(u64::from)),
                    opt(p.cmdline_order.map(u64::from)),
                    opt(s.page_reporting.as_ref().and_then(|p| p.reported_kib)),
                    opt(p.reported_kib),
                    self.reported_kib_delta.map_or("?".into(), |d| d.to_string()),
                );
            }
            None => t.push_str("#   free page reporting: absent\n"),
        }
        match &e.damon {
            Some(d) => {
                let _ = writeln!(
                    t,
                    "#   DAMON: {} kdamond(s) configured, {} thread(s) running{}",
                    d.nr_kdamonds,
                    d.threads.len(),
                    if d.threads.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (pids {})",
                            d.threads
                                .iter()
                                .map(|p| p.to_string())
                                .collect::<Vec<_>>()
                                .join(" ")
                        )
                    }
                );
                for k in &d.kdamonds {
                    for (ci, c) in k.contexts.iter().enumerate() {
                        for (si, sc) in c.schemes.iter().enumerate() {
                            let _ = writeln!(
                                t,
                                "#     kdamond {} ({}) context {ci} ({}) scheme {si}: {}{}",
                                k.index,
                                k.state,
                                c.operations,
                                sc.describe(),
                                if c.target_regions.is_empty() {
                                    String::new()
                                } else {
                                    format!(
                                        ", over {}",
                                        c.target_regions
                                            .iter()
                                            .map(|[a, b]| format!("{a}-{b}"))
                                            .collect::<Vec<_>>()
                                            .join(" ")
                                    )
                                }
                            );
                        }
                    }
                }
            }
            None => t.push_str("#   DAMON: absent\n"),
        }
        if !self.damon_turned_off.is_empty() {
            let _ = writeln!(
                t,
                "#   DAMON turned off for the run ([host] damon = \"off\") and back on after: kdamond {}",
                self.damon_turned_off
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        let thp = |k: &str| e.thp.get(k).map_or("?", String::as_str);
        let _ = writeln!(
            t,
            "#   THP: enabled {}, defrag {}, khugepaged/defrag {}, 2 MiB {}{}",
            thp("enabled"),
            thp("defrag"),
            thp("khugepaged/defrag"),
            thp("hugepages-2048kB/enabled"),
            {
                let other: Vec<String> = e
                    .thp
                    .iter()
                    .filter(|(k, v)| {
                        k.starts_with("hugepages-")
                            && k.ends_with("/enabled")
                            && k.as_str() != "hugepages-2048kB/enabled"
                            && v.as_str() != "never"
                    })
                    .map(|(k, v)| format!("{} {v}", k.trim_end_matches("/enabled")))
                    .collect();
                if other.is_empty() {
                    ", other sizes never".to_string()
                } else {
                    format!(", {}", other.join(", "))
                }
            }
        );
        let ra: Vec<String> = e
            .read_ahead_kb
            .iter()
            .map(|(d, v)| match e.max_sectors_kb.get(d) {
                Some(m) => format!("{d} {v} (max_sectors_kb {m})"),
                None => format!("{d} {v}"),
            })
            .collect();
        let _ = writeln!(
            t,
            "#   read_ahead_kb: {}",
            if ra.is_empty() {
                "absent".into()
            } else {
                ra.join(", ")
            }
        );
        match &e.memory_init {
            Some(m) => {
                let zones: Vec<String> = m
                    .zones
                    .iter()
                    .map(|(z, present, managed)| {
                        format!(
                            "{z} {managed} of {present} ({:.0} %)",
                            100.0 * *managed as f64 / (*present).max(1) as f64
                        )
                    })
                    .collect();
                let _ = writeln!(
                    t,
                    "#   memory init: deferred_init {}; managed of present pages: {}",
                    m.deferred_init.as_deref().unwrap_or("not given"),
                    zones.join(", ")
                );
            }
            None => t.push_str("#   memory init: not recorded\n"),
        }
        match &e.swap {
            Some(w) => {
                let _ = writeln!(
                    t,
                    "#   swap: SwapTotal {} KiB, SwapFree {} KiB, {} area(s)",
                    w.total_kib,
                    w.free_kib,
                    w.areas.len()
                );
            }
            None => t.push_str("#   swap: absent\n"),
        }
        let la = |r: &ConfounderReading| {
            r.loadavg
                .map_or("?".into(), |l| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]))
        };
        let _ = writeln!(
            t,
            "#   load average: {} -> {}; CPU steal during the run: {}",
            la(s),
            la(e),
            self.steal_share
                .map_or("?".into(), |x| format!("{:.2} %", x * 100.0))
        );
        if let Some(f) = &self.fit_memory {
            let _ = writeln!(t, "#   fit: {f}");
        }
        t
    }
}

impl DamonScheme {
    /// One line: action, access pattern, quota, watermarks, filters.
    pub fn describe(&self) -> String {
        let o = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
        let filters: Vec<String> = self
            .filters
            .iter()
            .map(|f| {
                format!(
                    "{}{} {}",
                    if f.matching { "" } else { "!" },
                    f.kind,
                    if f.allow { "allow" } else { "reject" }
                )
            })
            .collect();
        format!(
            "{} nr_accesses {}-{} age {}-{}, quota {} ms {} bytes per {} ms, watermarks {}, filters [{}]",
            self.action,
            o(self.nr_accesses.0),
            o(self.nr_accesses.1),
            o(self.age.0),
            o(self.age.1),
            o(self.quota_ms),
            o(self.quota_bytes),
            o(self.quota_reset_interval_ms),
            if self.watermark_metric == "none" || self.watermark_metric.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "{} {}/{}/{} per {} us",
                    self.watermark_metric,
                    o(self.watermarks[1]),
                    o(self.watermarks[2]),
                    o(self.watermarks[3]),
                    o(self.watermarks[0])
                )
            },
            filters.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_from_two_readings() {
        let r = |kib, total, steal| ConfounderReading {
            page_reporting: Some(PageReporting {
                reported_kib: Some(kib),
                ..Default::default()
            }),
            cpu_ticks: Some(CpuTicks { total, steal }),
            ..Default::default()
        };
        let c = HostConfounders::from_readings(r(100, 1000, 10), r(2148, 1400, 30));
        assert_eq!(c.reported_kib_delta, Some(2048));
        assert_eq!(c.steal_share, Some(0.05));
        let none = HostConfounders::from_readings(Default::default(), Default::default());
        assert_eq!((none.reported_kib_delta, none.steal_share), (None, None));
        assert!(none.summary().contains("free page reporting: absent"));
        assert!(none.summary().contains("DAMON: absent"));
        assert!(none.summary().contains("memory init: not recorded"));
        let init = ConfounderReading {
            memory_init: Some(MemoryInit {
                deferred_init: Some("lazy".into()),
                zones: vec![("Normal".into(), 5_505_024, 688_128)],
            }),
            ..Default::default()
        };
        let c = HostConfounders::from_readings(init.clone(), init);
        assert!(c.summary().contains(
            "memory init: deferred_init lazy; managed of present pages: Normal 688128 of 5505024 (12 %)"
        ));
    }

    /// §32.1: the order `validate` gives its simulator arms is the start reading's, when a
    /// device had registered (sysfs reads −1, recorded as none, until one does).
    #[test]
    fn s32_page_reporting_order_of_a_run() {
        let r = |order| ConfounderReading {
            page_reporting: Some(PageReporting {
                order,
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = |a, b| HostConfounders::from_readings(r(a), r(b));
        assert_eq!(c(Some(9), Some(5)).page_reporting_order(), Some(9));
        assert_eq!(c(None, Some(9)).page_reporting_order(), None);
        assert_eq!(c(Some(11), None).page_reporting_order(), None);
        let none = HostConfounders::from_readings(Default::default(), Default::default());
        assert_eq!(none.page_reporting_order(), None);
    }
}
