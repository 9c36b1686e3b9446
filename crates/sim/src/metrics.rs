//! What a timed run measures besides /proc/vmstat: latency histograms per allocation order and
//! path, and the workload generators' own figures.

use std::collections::BTreeMap;

use crate::anon::AllocPath;

/// The latency histogram of both engines (power-of-two nanosecond buckets).
pub use fraglab_spec::result::Histogram;

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
    /// Phases: where the measured part of the run started (a task's `{ measure = true }`).
    pub measure: Option<MeasureMark>,
}

/// The start of a run's measured part: its time and /proc/vmstat then.
#[derive(Clone, Debug, Default)]
pub struct MeasureMark {
    pub t_ns: u64,
    pub vmstat: Vec<(String, i64)>,
}

impl Metrics {
    /// Phases: the measured part starts at `t_ns` (the first call only; later ones are
    /// ignored). The latency histograms restart empty, so that they cover the measured part.
    pub fn start_measuring(&mut self, t_ns: u64, vmstat: Vec<(String, i64)>) {
        if self.measure.is_some() {
            return;
        }
        self.measure = Some(MeasureMark { t_ns, vmstat });
        self.fault_latency.clear();
        self.thpchallenge_huge = Histogram::default();
        self.thpchallenge_base = Histogram::default();
    }

    pub fn fault(&mut self, order: u32, path: AllocPath, ns: u64) {
        self.fault_latency.entry((order, path)).or_default().record(ns);
    }
}
