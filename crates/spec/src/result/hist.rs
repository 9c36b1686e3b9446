//! The latency histogram, defined once for both engines: the simulator's workload tasks
//! (fraglab-sim `metrics`) and the host engine's worker processes (fraglab-host `worker`) record
//! into it, and it becomes the result schema's [`LatencyHistogram`].

use serde::{Deserialize, Serialize};

use super::{LatencyHistogram, LogLinearBuckets, ThpChallengeResult};

/// log2 of the sub-buckets per power of two the engines record: 16, so that a bucket at or
/// above 16 ns spans at most 1/16 (6.25 %) of its lower bound (the values below 16 ns have a
/// bucket each). HdrHistogram's layout with 4 significant bits.
pub const SUB_BITS: u32 = 4;

/// The largest `sub_bits` a histogram read from a file may have (256 sub-buckets per power of
/// two): beyond it the file's log-linear buckets are not taken (its power-of-two ones are).
pub const MAX_SUB_BITS: u32 = 8;

/// The bucket of `ns` in a histogram of `2^sub_bits` sub-buckets per power of two: values
/// 1..2^sub_bits have a bucket each (0 shares 1's), and every power of two [2^e, 2^(e+1)) above
/// is cut into `2^sub_bits` equal sub-buckets. With `sub_bits` 0 these are the power-of-two
/// buckets of result schema 1 (bucket i holds [2^i, 2^(i+1)), bucket 0 also 0).
#[inline]
pub fn bucket_of(ns: u64, sub_bits: u32) -> usize {
    let u = ns.max(1);
    let e = 63 - u.leading_zeros();
    if e < sub_bits {
        (u - 1) as usize
    } else {
        let s = e - sub_bits;
        ((s as usize) << sub_bits) + (u >> s) as usize - 1
    }
}

/// The values bucket `i` holds (of [`bucket_of`] with `sub_bits`), both ends included:
/// [`u64::MAX`, `u64::MAX`] past the last bucket.
pub fn bucket_range(i: usize, sub_bits: u32) -> (u64, u64) {
    let j = i as u64 + 1;
    let s = j >> sub_bits;
    if s == 0 {
        return (if i == 0 { 0 } else { j }, j);
    }
    let shift = s - 1;
    if shift >= 64 {
        return (u64::MAX, u64::MAX);
    }
    let m = j - (shift << sub_bits);
    match m.checked_shl(shift as u32).filter(|lo| lo >> shift == m) {
        Some(lo) => (if i == 0 { 0 } else { lo }, lo + ((1u64 << shift) - 1)),
        None => (u64::MAX, u64::MAX),
    }
}

/// A latency histogram with log-linear buckets in nanoseconds ([`bucket_of`]: `2^sub_bits`
/// sub-buckets per power of two), plus exact count, sum, min and max. The engines record at
/// [`SUB_BITS`]; a result file of an older fraglab (power-of-two buckets only) reads back as
/// `sub_bits` 0. Serialised as is in the host engine's worker reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    pub buckets: Vec<u64>,
    pub count: u64,
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// log2 of the sub-buckets per power of two.
    #[serde(default = "sub_bits_default")]
    pub sub_bits: u32,
}

fn sub_bits_default() -> u32 {
    SUB_BITS
}

impl Default for Histogram {
    /// An empty histogram at the engines' resolution ([`SUB_BITS`]).
    fn default() -> Self {
        Histogram {
            buckets: Vec::new(),
            count: 0,
            sum_ns: 0,
            min_ns: 0,
            max_ns: 0,
            sub_bits: SUB_BITS,
        }
    }
}

impl Histogram {
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// `n` calls of `record(ns)` (one bucket update).
    #[inline]
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        let b = bucket_of(ns, self.sub_bits);
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

    /// The buckets at the coarser resolution `sub_bits` (at most `self.sub_bits`): every bucket
    /// lies inside one of the coarser ones, so nothing is split. Trailing empty buckets are
    /// left out.
    pub fn coarsened(&self, sub_bits: u32) -> Vec<u64> {
        if sub_bits >= self.sub_bits {
            let mut b = self.buckets.clone();
            while b.last() == Some(&0) {
                b.pop();
            }
            return b;
        }
        let mut out: Vec<u64> = Vec::new();
        for (i, &n) in self.buckets.iter().enumerate().filter(|b| *b.1 > 0) {
            let j = bucket_of(bucket_range(i, self.sub_bits).0, sub_bits);
            if out.len() <= j {
                out.resize(j + 1, 0);
            }
            out[j] = out[j].saturating_add(n);
        }
        out
    }

    /// The power-of-two buckets (result schema 1's `log2_buckets`): bucket i holds
    /// [2^i, 2^(i+1)) ns, bucket 0 also 0.
    pub fn log2_buckets(&self) -> Vec<u64> {
        self.coarsened(0)
    }

    /// Adds the values recorded in `o` (the host engine merges its workers' histograms; a
    /// report merges runs). Histograms of different resolutions merge at the coarser one.
    pub fn merge(&mut self, o: &Histogram) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            self.buckets.clear();
            self.sub_bits = o.sub_bits;
        }
        let k = self.sub_bits.min(o.sub_bits);
        if self.sub_bits != k {
            self.buckets = self.coarsened(k);
            self.sub_bits = k;
        }
        let theirs = if o.sub_bits == k {
            std::borrow::Cow::Borrowed(&o.buckets)
        } else {
            std::borrow::Cow::Owned(o.coarsened(k))
        };
        if self.buckets.len() < theirs.len() {
            self.buckets.resize(theirs.len(), 0);
        }
        // (saturating: a result file's counts are whatever it says)
        for (a, b) in self.buckets.iter_mut().zip(theirs.iter()) {
            *a = a.saturating_add(*b);
        }
        self.min_ns = if self.count == 0 {
            o.min_ns
        } else {
            self.min_ns.min(o.min_ns)
        };
        self.max_ns = self.max_ns.max(o.max_ns);
        self.count = self.count.saturating_add(o.count);
        self.sum_ns = self.sum_ns.saturating_add(o.sum_ns);
    }

    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }

    /// The bucket holding quantile `q` (0..=1): the first whose cumulative count reaches
    /// ⌈q × count⌉ (at least 1); `None` if the buckets hold fewer values.
    pub fn quantile_bucket(&self, q: f64) -> Option<usize> {
        let target = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, n) in self.buckets.iter().enumerate() {
            seen = seen.saturating_add(*n);
            if seen >= target {
                return Some(i);
            }
        }
        None
    }

    /// An upper bound of quantile `q` (0..=1): the upper end of the bucket holding it, or the
    /// largest value recorded if that is lower. At [`SUB_BITS`] it is within 1/16 above the
    /// true quantile (a value below 16 ns exact); at `sub_bits` 0, within 2×.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        match self.quantile_bucket(q) {
            Some(i) => bucket_range(i, self.sub_bits).1.min(self.max_ns),
            None => self.max_ns,
        }
    }

    /// The result schema's histogram of folio order `order` and allocation path `path`: the
    /// power-of-two buckets (as older fraglab wrote and reads them) and the log-linear ones.
    pub fn to_latency(&self, order: u32, path: &str) -> LatencyHistogram {
        let first = self.buckets.iter().position(|&n| n > 0);
        LatencyHistogram {
            order,
            path: path.to_string(),
            count: self.count,
            sum_ns: self.sum_ns,
            min_ns: self.min_ns,
            max_ns: self.max_ns,
            log2_buckets: self.log2_buckets(),
            log_linear_buckets: first.filter(|_| self.sub_bits > 0).map(|f| {
                let last = self.buckets.iter().rposition(|&n| n > 0).unwrap_or(f);
                LogLinearBuckets {
                    sub_buckets: 1 << self.sub_bits,
                    first: f as u32,
                    counts: self.buckets[f..=last].to_vec(),
                }
            }),
            host_faults: 0,
            host_fault_ns: 0,
        }
    }
}

impl LatencyHistogram {
    /// The histogram this result holds: its log-linear buckets, or, from a result of an older
    /// fraglab (or log-linear buckets this one cannot take: a `sub_buckets` not a power of two
    /// up to 2^[`MAX_SUB_BITS`], buckets past the last), its power-of-two ones (`sub_bits` 0).
    pub fn histogram(&self) -> Histogram {
        let fine = self.log_linear_buckets.as_ref().and_then(|b| {
            let k = b.sub_buckets.checked_ilog2()?;
            let end = (b.first as usize).checked_add(b.counts.len())?;
            (1 << k == b.sub_buckets && k <= MAX_SUB_BITS && end <= bucket_of(u64::MAX, k) + 1).then(|| {
                let mut v = vec![0; b.first as usize];
                v.extend_from_slice(&b.counts);
                (k, v)
            })
        });
        let (sub_bits, buckets) =
            fine.unwrap_or_else(|| (0, self.log2_buckets.iter().take(64).copied().collect()));
        Histogram {
            buckets,
            count: self.count,
            sum_ns: self.sum_ns,
            min_ns: self.min_ns,
            max_ns: self.max_ns,
            sub_bits,
        }
    }

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

    /// The power-of-two bucket of result schema 1, as fraglab before issue 36 computed it.
    fn old_log2_bucket(ns: u64) -> usize {
        63 - ns.max(1).leading_zeros() as usize
    }

    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn log2_buckets_are_the_old_ones() {
        let mut h = Histogram::default();
        for ns in [0, 1, 2, 3, 4, 1023, 1024] {
            h.record(ns);
        }
        // 0 and 1 in bucket 0, 2–3 in 1, 4 in 2, 1023 in 9, 1024 in 10.
        assert_eq!(h.log2_buckets(), vec![2, 2, 1, 0, 0, 0, 0, 0, 0, 1, 1]);
        assert_eq!((h.count, h.sum_ns, h.min_ns, h.max_ns), (7, 2057, 0, 1024));
        // Exact below 16 ns; 1023 is in [992, 1023], 1024 in [1024, 1087] (capped at the max).
        assert_eq!(h.quantile_ns(0.5), 3);
        assert_eq!(h.quantile_ns(0.8), 1023);
        assert_eq!(h.quantile_ns(1.0), 1024);
        assert!((h.mean_ns() - 2057.0 / 7.0).abs() < 1e-12);
        // Over random values of every magnitude, the coarse buckets are the old code's.
        let mut rnd = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut old = vec![0u64; 64];
        let mut h = Histogram::default();
        for _ in 0..20_000 {
            let v = rnd() >> (16 + rnd() % 48); // up to 2^48: the sum fits
            h.record(v);
            old[old_log2_bucket(v)] += 1;
        }
        while old.last() == Some(&0) {
            old.pop();
        }
        assert_eq!(h.log2_buckets(), old);
    }

    #[test]
    fn log_linear_bucket_boundaries() {
        // 16 sub-buckets per power of two: values below 16 have a bucket each (0 with 1), then
        // 16 equal parts of each power of two.
        let k = SUB_BITS;
        assert_eq!(1 << k, 16);
        for (ns, b) in [
            (0, 0),
            (1, 0),
            (2, 1),
            (15, 14),
            (16, 15),
            (31, 30),
            (32, 31),
            (33, 31),
            (34, 32),
            (63, 46),
            (64, 47),
            (1000, 110),
        ] {
            assert_eq!(bucket_of(ns, k), b, "bucket of {ns}");
        }
        assert_eq!(bucket_range(110, k), (992, 1023));
        assert_eq!(bucket_range(31, k), (32, 33));
        assert_eq!(bucket_range(0, k), (0, 1));
        // Every resolution: the buckets tile 0..=u64::MAX in order, each value in the bucket
        // whose range holds it, each bucket at most 1/2^k of its lower bound wide.
        for k in 0..=MAX_SUB_BITS {
            let last = bucket_of(u64::MAX, k);
            let mut next = 0u64;
            for i in 0..=last {
                let (lo, hi) = bucket_range(i, k);
                assert_eq!(
                    lo,
                    next,
                    "sub_bits {k}: bucket {i} starts where {} ends",
                    i.max(1) - 1
                );
                assert!(hi >= lo);
                assert_eq!(
                    (bucket_of(lo, k), bucket_of(hi, k)),
                    (i, i),
                    "sub_bits {k} bucket {i}"
                );
                if lo >= 1 << k {
                    assert!(
                        (hi - lo + 1) << k <= lo,
                        "sub_bits {k}: bucket {i} [{lo}, {hi}] too wide"
                    );
                } else {
                    assert!(hi - lo <= 1);
                }
                next = hi.wrapping_add(1);
            }
            assert_eq!(bucket_range(last, k).1, u64::MAX);
            assert_eq!(bucket_range(last + 1, k), (u64::MAX, u64::MAX));
        }
        // sub_bits 0 is the power-of-two layout.
        for i in 1..64 {
            assert_eq!(bucket_range(i, 0), (1 << i, (1 << i) + ((1 << i) - 1)));
        }
    }

    #[test]
    fn quantiles_within_one_sub_bucket() {
        // Latencies from 1 ns to about 4 s, log-uniform, and a tight cluster two configurations
        // could share a power of two in (200–240 µs).
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1d);
        for round in 0..20 {
            let mut h = Histogram::default();
            let mut v: Vec<u64> = (0..2000)
                .map(|_| {
                    if round % 2 == 0 {
                        (rnd() >> 32) >> (rnd() % 32)
                    } else {
                        200_000 + rnd() % 40_000
                    }
                })
                .collect();
            for &x in &v {
                h.record(x);
            }
            v.sort_unstable();
            for q in [0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let exact = v[((q * v.len() as f64).ceil() as usize).max(1) - 1];
                let est = h.quantile_ns(q);
                assert!(
                    est >= exact && est as f64 <= exact.max(1) as f64 * (1.0 + 1.0 / 16.0),
                    "q {q}: estimate {est} ns, exact {exact} ns"
                );
                if exact < 16 {
                    assert_eq!(est, exact.max(1).min(h.max_ns));
                }
            }
        }
        // Two clusters in one power of two (the summary said "≤ 262 µs" for both): the
        // log-linear p50s differ, the power-of-two ones did not.
        let (mut a, mut b) = (Histogram::default(), Histogram::default());
        for i in 0..100 {
            a.record(140_000 + i);
            b.record(220_000 + i);
        }
        assert_ne!(a.quantile_ns(0.5), b.quantile_ns(0.5));
        let old_p50 = |h: &Histogram| (1u64 << (old_log2_bucket(h.quantile_ns(0.5)) + 1)) - 1;
        assert_eq!(old_p50(&a), old_p50(&b));
    }

    #[test]
    fn results_round_trip_and_old_results_read_as_power_of_two() {
        let mut h = Histogram::default();
        let mut rnd = xorshift(42);
        for _ in 0..500 {
            h.record(1000 + rnd() % 5_000_000);
        }
        let l = h.to_latency(9, "fast");
        let b = l.log_linear_buckets.as_ref().unwrap();
        assert_eq!(b.sub_buckets, 16);
        assert!(b.counts[0] > 0 && *b.counts.last().unwrap() > 0);
        assert_eq!(b.counts.iter().sum::<u64>(), 500);
        let json = serde_json::to_string(&l).unwrap();
        let back: LatencyHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(back, l);
        assert_eq!(back.histogram(), h);
        // A schema-1 histogram as fraglab before issue 36 wrote it: power-of-two buckets only.
        let old = r#"{"order": 9, "path": "fast", "count": 8, "sum_ns": 1651600, "min_ns": 206450, "max_ns": 206450, "log2_buckets": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8]}"#;
        let old: LatencyHistogram = serde_json::from_str(old).unwrap();
        assert_eq!(old.log_linear_buckets, None);
        let oh = old.histogram();
        assert_eq!((oh.sub_bits, oh.count, oh.buckets.len()), (0, 8, 18));
        // Its quantile is the power-of-two bucket's upper end, capped at the largest value.
        assert_eq!(oh.quantile_ns(0.5), 206450);
        let mut two = old.clone();
        two.max_ns = 300_000;
        assert_eq!(two.histogram().quantile_ns(0.5), (1 << 18) - 1);
        // Written again, it is the same JSON (no log-linear buckets invented).
        assert_eq!(
            serde_json::to_value(&old).unwrap().get("log_linear_buckets"),
            None
        );
        // Merged with a new result, at the coarser resolution: counts and bounds kept.
        let mut m = oh.clone();
        m.merge(&h);
        assert_eq!((m.sub_bits, m.count), (0, 508));
        let mut expect = h.log2_buckets();
        expect[17] += 8;
        assert_eq!(m.buckets, expect);
        let mut m2 = h.clone();
        m2.merge(&oh);
        assert_eq!(m2, m);
        // Log-linear buckets this fraglab cannot take fall back to the power-of-two ones.
        for bad in [
            LogLinearBuckets {
                sub_buckets: 3,
                first: 0,
                counts: vec![8],
            },
            LogLinearBuckets {
                sub_buckets: 1 << 12,
                first: 0,
                counts: vec![8],
            },
            LogLinearBuckets {
                sub_buckets: 16,
                first: u32::MAX,
                counts: vec![8],
            },
        ] {
            let mut x = old.clone();
            x.log_linear_buckets = Some(bad);
            assert_eq!(x.histogram(), oh);
        }
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
        assert_eq!(
            (
                a.buckets[bucket_of(10, SUB_BITS)],
                a.buckets[bucket_of(100, SUB_BITS)],
                a.buckets[bucket_of(3000, SUB_BITS)]
            ),
            (1, 1, 1)
        );
        assert_eq!(a.buckets.iter().sum::<u64>(), 3);
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
