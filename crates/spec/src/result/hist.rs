//! The latency histogram, defined once for both engines: the simulator's workload tasks
//! (fraglab-sim `metrics`) and the host engine's worker processes (fraglab-host `worker`) record
//! into it, and it becomes the result schema's [`LatencyHistogram`].

use serde::{Deserialize, Serialize};

use super::{LatencyHistogram, ThpChallengeResult};

/// A latency histogram with power-of-two buckets in nanoseconds (bucket i holds values in
/// [2^i, 2^(i+1)), bucket 0 also 0 and 1), plus exact count, sum, min and max. Serialised as is
/// in the host engine's worker reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl Histogram {
    #[inline]
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

    /// `n` calls of `record(ns)` (one bucket update).
    #[inline]
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        let b = 63 - ns.max(1).leading_zeros() as usize;
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += n;
        if self.count == 0 || ns < self.min_ns {
            self.min_ns = ns;
        }
        self.max_ns = self.max_ns.max(ns);
        self.count += n;
        self.sum_ns += ns * n;
    }

    /// Adds the values recorded in `o` (the host engine merges its workers' histograms).
    pub fn merge(&mut self, o: &Histogram) {
        if o.count == 0 {
            return;
        }
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize(o.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.min_ns = if self.count == 0 {
            o.min_ns
        } else {
            self.min_ns.min(o.min_ns)
        };
        self.max_ns = self.max_ns.max(o.max_ns);
        self.count += o.count;
        self.sum_ns += o.sum_ns;
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

    /// The result schema's histogram of folio order `order` and allocation path `path`.
    pub fn to_latency(&self, order: u32, path: &str) -> LatencyHistogram {
        LatencyHistogram {
            order,
            path: path.to_string(),
            count: self.count,
            sum_ns: self.sum_ns,
            min_ns: self.min_ns,
            max_ns: self.max_ns,
            log2_buckets: self.buckets.clone(),
            host_faults: 0,
            host_fault_ns: 0,
        }
    }
}

impl LatencyHistogram {
    /// The mean latency in µs (0 without values): thpchallenge's fault-huge/fault-base rows.
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64 / 1000.0
        }
    }
}

impl ThpChallengeResult {
    /// mmtests thpchallenge (mmtests' thpchallenge) from the 2 MiB steps that got a PMD THP
    /// (`huge`) and those that did not (`base`): huge-pct = huge × 100 / (huge + base).
    pub fn from_histograms(huge: &Histogram, base: &Histogram) -> ThpChallengeResult {
        ThpChallengeResult {
            huge: huge.to_latency(9, "huge"),
            base: base.to_latency(0, "base"),
            huge_pct: if huge.count + base.count > 0 {
                huge.count as f64 * 100.0 / (huge.count + base.count) as f64
            } else {
                0.0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_log2_of_ns() {
        let mut h = Histogram::default();
        for ns in [0, 1, 2, 3, 4, 1023, 1024] {
            h.record(ns);
        }
        // 0 and 1 in bucket 0, 2–3 in 1, 4 in 2, 1023 in 9, 1024 in 10.
        assert_eq!(h.buckets, vec![2, 2, 1, 0, 0, 0, 0, 0, 0, 1, 1]);
        assert_eq!((h.count, h.sum_ns, h.min_ns, h.max_ns), (7, 2057, 0, 1024));
        assert_eq!(h.quantile_ns(0.5), 3);
        assert_eq!(h.quantile_ns(1.0), 2047);
        assert!((h.mean_ns() - 2057.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn merge_adds_and_keeps_extremes() {
        let mut a = Histogram::default();
        a.record(100);
        a.record(3000);
        let mut b = Histogram::default();
        b.record(10);
        a.merge(&b);
        assert_eq!((a.count, a.min_ns, a.max_ns, a.sum_ns), (3, 10, 3000, 3110));
        assert_eq!((a.buckets[3], a.buckets[6], a.buckets[11]), (1, 1, 1));
        // Merging into an empty histogram takes the other's minimum, not 0.
        let mut e = Histogram::default();
        e.merge(&b);
        assert_eq!(e, b);
        e.merge(&Histogram::default());
        assert_eq!(e, b);
    }

    #[test]
    fn thpchallenge_huge_pct() {
        let (mut huge, mut base) = (Histogram::default(), Histogram::default());
        huge.record(2000);
        for _ in 0..3 {
            base.record(1000);
        }
        let t = ThpChallengeResult::from_histograms(&huge, &base);
        assert_eq!(t.huge_pct, 25.0);
        assert_eq!((t.huge.order, t.huge.path.as_str()), (9, "huge"));
        assert_eq!((t.base.order, t.base.path.as_str(), t.base.count), (0, "base", 3));
        assert_eq!(t.huge.mean_us(), 2.0);
        let none = ThpChallengeResult::from_histograms(&Histogram::default(), &Histogram::default());
        assert_eq!((none.huge_pct, none.base.mean_us()), (0.0, 0.0));
    }
}
