//! What a timed run measures besides /proc/vmstat: latency histograms per allocation order and
//! path, and the workload generators' own figures.

use crate::anon::AllocPath;

/// The latency histogram of both engines: log-linear nanosecond buckets, 16 per power of two
/// (`fraglab_spec::result::hist`: p50/p99 within 1/16 above the true value), written to results
/// with the power-of-two buckets older fraglab reads.
pub use fraglab_spec::result::Histogram;

/// One THP burst of a `thp_burst` task.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Burst {
    pub start_ns: u64,
    /// Time spent faulting the burst's memory in (the "Hugealloc Time" of the burst).
    pub alloc_ns: u64,
    pub faults: u64,
    pub huge: u64,
}

/// One build of a `kbuild` generator.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
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
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct Metrics {
    /// Fault latency by folio order and path: wall time from the fault's start to its return
    /// (its CPU time and every wait the model has inside it), and its CPU time alone.
    pub fault_latency: FaultLatency,
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
    /// Free page reporting (§32.3 item 6): by (folio order, path) as
    /// `fault_latency`, the faults that took host faults and the time those added (kept apart
    /// from the histograms they are also in). Empty without a reporting device.
    pub host_faults: std::collections::BTreeMap<(u32, AllocPath), (u64, u64)>,
}

/// The fault latency histograms by (folio order, allocation path), in key order as a
/// `BTreeMap<(u32, AllocPath), Histogram>` would hold them (a key is present once a fault of it
/// was recorded), with an O(1) lookup for orders up to `FAST_ORDERS - 1`. Each key has two
/// histograms: wall time (what [`FaultLatency::iter`] gives, the result's `fault_latency`) and
/// CPU time ([`FaultLatency::iter_cpu`], the result's `fault_latency_cpu`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct FaultLatency {
    /// The histograms (wall, CPU), sorted by key.
    entries: Vec<((u32, AllocPath), Histogram, Histogram)>,
    /// For order o < `FAST_ORDERS` and path p: 1 + the position of (o, p) in `entries`, or 0.
    slot: [[u8; 4]; FaultLatency::FAST_ORDERS],
}

impl FaultLatency {
    const FAST_ORDERS: usize = 11;

    /// Records a fault of wall time `wall` and CPU time `cpu` in the histograms of
    /// (`order`, `path`), creating them if needed.
    #[inline]
    pub fn record(&mut self, order: u32, path: AllocPath, wall: u64, cpu: u64) {
        self.record_n(order, path, wall, cpu, 1);
    }

    /// `n` calls of `record(order, path, wall, cpu)` (one lookup).
    #[inline]
    pub fn record_n(&mut self, order: u32, path: AllocPath, wall: u64, cpu: u64, n: u64) {
        if n == 0 {
            return;
        }
        let i = match self.slot.get(order as usize).map_or(0, |row| row[path as usize]) {
            0 => self.entry(order, path),
            s => s as usize - 1,
        };
        let e = &mut self.entries[i];
        e.1.record_n(wall, n);
        e.2.record_n(cpu, n);
    }

    /// The position of (`order`, `path`) in `entries`, inserted if new.
    fn entry(&mut self, order: u32, path: AllocPath) -> usize {
        let key = (order, path);
        match self.entries.binary_search_by(|(k, _, _)| k.cmp(&key)) {
            Ok(i) => i,
            Err(i) => {
                self.entries
                    .insert(i, (key, Histogram::default(), Histogram::default()));
                self.slot = Default::default();
                for (j, &((o, p), _, _)) in self.entries.iter().enumerate() {
                    if let Some(row) = self.slot.get_mut(o as usize) {
                        row[p as usize] = j as u8 + 1;
                    }
                }
                i
            }
        }
    }

    /// The wall-time histograms in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&(u32, AllocPath), &Histogram)> {
        self.entries.iter().map(|(k, h, _)| (k, h))
    }

    /// The CPU-time histograms in key order.
    pub fn iter_cpu(&self) -> impl Iterator<Item = (&(u32, AllocPath), &Histogram)> {
        self.entries.iter().map(|(k, _, c)| (k, c))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &(u32, AllocPath)> {
        self.entries.iter().map(|(k, _, _)| k)
    }

    /// The wall-time histogram of `key`.
    pub fn get(&self, key: &(u32, AllocPath)) -> Option<&Histogram> {
        self.entries.iter().find(|(k, _, _)| k == key).map(|(_, h, _)| h)
    }

    /// The CPU-time histogram of `key`.
    pub fn get_cpu(&self, key: &(u32, AllocPath)) -> Option<&Histogram> {
        self.entries.iter().find(|(k, _, _)| k == key).map(|(_, _, c)| c)
    }

    pub fn contains_key(&self, key: &(u32, AllocPath)) -> bool {
        self.get(key).is_some()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.slot = Default::default();
    }
}

/// The start of a run's measured part: its time and /proc/vmstat then.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
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
        self.host_faults.clear();
        self.thpchallenge_huge = Histogram::default();
        self.thpchallenge_base = Histogram::default();
    }

    /// A fault of wall time `wall` and CPU time `cpu`.
    pub fn fault(&mut self, order: u32, path: AllocPath, wall: u64, cpu: u64) {
        self.fault_latency.record(order, path, wall, cpu);
    }

    /// `n` calls of `fault(order, path, wall, cpu)`.
    pub fn faults(&mut self, order: u32, path: AllocPath, wall: u64, cpu: u64, n: u64) {
        self.fault_latency.record_n(order, path, wall, cpu, n);
    }

    /// `n` faults of (`order`, `path`) each took host faults costing `ns` (free page
    /// reporting); the same faults are recorded in `fault_latency` with that time included.
    pub fn host_faults(&mut self, order: u32, path: AllocPath, ns: u64, n: u64) {
        let e = self.host_faults.entry((order, path)).or_default();
        e.0 += n;
        e.1 += ns * n;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// `FaultLatency` holds what a `BTreeMap<(u32, AllocPath), Histogram>` filled with the same
    /// records holds, in the same order (orders beyond the fast table included); `record_n`
    /// is n single records.
    #[test]
    fn fault_latency_matches_btreemap() {
        let paths = [
            AllocPath::Fast,
            AllocPath::AfterKswapd,
            AllocPath::DirectReclaim,
            AllocPath::DirectCompaction,
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..50 {
            let mut fl = FaultLatency::default();
            let mut bt: BTreeMap<(u32, AllocPath), Histogram> = BTreeMap::new();
            for i in 0..500 {
                let order = (rnd() % 13) as u32;
                let path = paths[(rnd() % 4) as usize];
                let ns = rnd() % 1_000_000;
                if i % 3 == 0 {
                    // `record_n`: n single records (none for 0).
                    let n = rnd() % 5;
                    fl.record_n(order, path, ns, ns / 2, n);
                    for _ in 0..n {
                        bt.entry((order, path)).or_default().record(ns);
                    }
                } else {
                    fl.record(order, path, ns, ns / 2);
                    bt.entry((order, path)).or_default().record(ns);
                }
                if round % 7 == 0 && i == 250 {
                    fl.clear();
                    bt.clear();
                }
            }
            let a: Vec<_> = fl.iter().map(|(k, h)| (*k, h.clone())).collect();
            let b: Vec<_> = bt.iter().map(|(k, h)| (*k, h.clone())).collect();
            assert_eq!(a, b);
            // The CPU histograms hold the CPU times recorded beside them.
            for (k, c) in fl.iter_cpu() {
                let w = fl.get(k).unwrap();
                assert_eq!((c.count, c.sum_ns <= w.sum_ns), (w.count, true));
            }
            assert_eq!(fl.len(), bt.len());
            for k in bt.keys() {
                assert!(fl.contains_key(k));
            }
        }
    }
}
