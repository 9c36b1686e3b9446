//! What a timed run measures besides /proc/vmstat: latency histograms per allocation order and
//! path, and the workload generators' own figures.

use std::collections::BTreeMap;

use crate::anon::AllocPath;

/// A latency histogram with power-of-two buckets in nanoseconds (bucket i holds values in
/// [2^i, 2^(i+1)), bucket 0 also 0 and 1), plus exact count, sum, min and max.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        let b = 63 - ns.max(1).leading_zeros() as usize;
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        if self.count == 0 || ns < self.min_ns {
            self.min_ns = ns;
        }
        self.max_ns = self.max_ns.max(ns);
        self.count += 1;
        self.sum_ns += ns;
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The upper bound of the bucket holding quantile `q` (0..=1).
    pub fn quantile_ns(&self, q: f64) -> u64 {
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target {
                return (1u64 << (i + 1)) - 1;
            }
        }
        self.max_ns
    }
}

/// One THP burst of a `thp_burst` task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Burst {
    pub start_ns: u64,
    /// Time spent faulting the burst's memory in (the "Hugealloc Time" of the burst).
    pub alloc_ns: u64,
    pub faults: u64,
    pub huge: u64,
}

/// One build of a `kbuild` generator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Build {
    /// `Mm::stats` when the build started, and their change over the build.
    pub stats_start: Vec<u64>,
    pub stats_delta: Vec<i64>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// CPU time of the compile jobs' own work (Kbuild User time).
    pub user_ns: u64,
    /// CPU time of the jobs' kernel work: faults, allocations, reclaim, compaction (System).
    pub system_ns: u64,
    pub jobs: u64,
}

/// Everything the workload tasks record.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    /// Fault latency (cost charged for the fault) by folio order and path.
    pub fault_latency: BTreeMap<(u32, AllocPath), Histogram>,
    pub bursts: Vec<Burst>,
    pub builds: Vec<Build>,
    /// Faults that could not be served.
    pub failed_faults: u64,
    /// thpchallenge: latency of each 2 MiB step (fault + memset), split by whether the step
    /// got a PMD THP (mmtests' "huge") or not ("base").
    pub thpchallenge_huge: Histogram,
    pub thpchallenge_base: Histogram,
}

impl Metrics {
    pub fn fault(&mut self, order: u32, path: AllocPath, ns: u64) {
        self.fault_latency.entry((order, path)).or_default().record(ns);
    }
}
