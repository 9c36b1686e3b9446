//! DAMON-based reclaim (docs/model §27): one kdamond with one physical-address (paddr)
//! target and one DAMOS `pageout` scheme, as DAMON_RECLAIM (mm/damon/reclaim.c, §27.1) or a
//! sysfs-made kdamond such as S2's (§27.3) runs it.
//!
//! The loop follows `kdamond_fn` (mm/damon/core.c), rotated so that one [`Kdamond::step`] is one
//! sample interval: check the accesses of the previous sample, at an aggregation boundary merge
//! the regions (`kdamond_merge_regions`), apply the scheme (`kdamond_apply_schemes`), reset the
//! counts and split (`kdamond_reset_aggregated`, `kdamond_split_regions`); then check the
//! watermarks (`kdamond_wait_activation`) and make one random page per region old
//! (`damon_pa_prepare_access_checks`). The caller (the engine's kdamond task) sleeps for the
//! interval [`Kdamond::step`] returns.
//!
//! **Access information.** A folio's `idle` flag is PG_idle (§27.2 item 2): sampling sets it
//! (`damon_folio_mkold`), and every access the model records clears it — `folio_mark_accessed`
//! (a read(2) hit) and the fault and touch paths that set PG_referenced (which stands in for the
//! PTE young bit, so clearing PG_idle there is the young bit being set again). A folio is
//! *young* (`damon_folio_young`) when it is not idle; a new folio is young. Sampling does not
//! clear PG_referenced: the kernel's mkold sets PG_young so that reclaim still sees the access.
//!
//! Simplifications (each said where it is made): the model does not record which file folios
//! are mapped (`filemap_fault`), so file folios are *unmapped* and anonymous folios *mapped* for
//! the ops filters; the time quota uses the initial throughput estimate (`PAGE_SIZE * 1024`
//! bytes per ms) for ever, because kdamond has no CPU clock in the model; no quota goals or
//! auto-tuning; no ops-update pass (the regions cover the monitored range from the start). The
//! regions are page-granular (`DAMON_MIN_REGION` = PAGE_SIZE), in pfns.
//!
//! **Monitored ranges and start.** The target's ranges are the configured ones (S2's leave out
//! the first 16 MiB and the PCI hole; DAMON_RECLAIM's default is the largest System RAM range),
//! clipped to the machine. A kdamond starts with one age-0 region per range, as one just turned
//! on; booted from a snapshot that recorded the kernel's kdamond it starts with that one's
//! regions and ages instead ([`Kdamond::with_start`], §27.2 item 3).
//!
//! **Tracepoints** (§27.2 item 6): `damon:damos_before_apply` where `damos_apply_scheme` is
//! about to apply the scheme to a region, and `vmscan:mm_vmscan_reclaim_pages` where
//! `reclaim_pages` (`reclaim_folio_list`) has finished with the folios that passed the filters
//! (only when some did, as in the kernel). `damon:damon_aggregated` and `damon:damos_esz` are
//! not emitted.

use crate::folio::FolioId;
use crate::node::Mm;
use crate::types::MAX_PAGE_ORDER;
use fraglab_types::folio::FolioKind;

/// S2's monitored ranges (§27.3), in pfns: from 16 MiB to the PCI hole at 3 GiB, and from
/// 4 GiB on.
const S2_START_PFN: u32 = (16 << 20) / 4096;
const PCI_HOLE_START_PFN: u32 = 3 << 18;
const PCI_HOLE_END_PFN: u32 = 4 << 18;

/// `DAMOS_MAX_SCORE`.
pub const DAMOS_MAX_SCORE: u32 = 99;
/// `DAMON_MAX_SUBSCORE`.
const DAMON_MAX_SUBSCORE: i64 = 100;
/// `DAMON_MAX_AGE_IN_LOG`.
const DAMON_MAX_AGE_IN_LOG: i64 = 32;
/// `damos_set_effective_quota`'s throughput before anything was charged: `PAGE_SIZE * 1024`
/// bytes per ms.
pub const INITIAL_THROUGHPUT_BYTES_PER_MS: u64 = 4096 * 1024;
const PAGE: u64 = 4096;

/// The type of a DAMOS ops filter the model evaluates (§27.2 item 5; `damos_pa_filter_match`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterKind {
    /// `anon`: `folio_test_anon`.
    Anon,
    /// `unmapped`: `!folio_mapped` (the model: every file folio, see the module comment).
    Unmapped,
    /// `young`: `damon_folio_young` (and the folio is made old when it matches).
    Young,
}

/// One ops filter (`matching` is always true in the schemes the model runs).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpsFilter {
    pub kind: FilterKind,
    /// An allow filter; else a reject filter.
    pub allow: bool,
}

/// DAMOS watermarks on the free memory rate (`DAMOS_WMARK_FREE_MEM_RATE`, per-thousand).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watermarks {
    pub interval_us: u64,
    pub high: u64,
    pub mid: u64,
    pub low: u64,
}

/// One kdamond's context and its pageout scheme, with the sysfs names of the parameters.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct DamonConfig {
    /// `monitoring_attrs/intervals/sample_us` and `aggr_us`.
    pub sample_us: u64,
    pub aggr_us: u64,
    /// `monitoring_attrs/nr_regions/min` and `max`.
    pub min_nr_regions: u32,
    pub max_nr_regions: u32,
    /// `access_pattern/nr_accesses/{min,max}` (samples per aggregation) and
    /// `access_pattern/age/{min,max}` (aggregation intervals).
    pub nr_accesses: (u32, u32),
    pub age: (u32, u32),
    /// `access_pattern/sz/{min,max}`: region size bounds, bytes.
    pub sz: (u64, u64),
    /// `quotas/ms`, `quotas/bytes`, `quotas/reset_interval_ms` (0: no limit).
    pub quota_ms: u64,
    pub quota_bytes: u64,
    pub quota_reset_interval_ms: u64,
    /// `watermarks/` with metric `free_mem_rate`; `None`: metric `none` (always active).
    pub wmarks: Option<Watermarks>,
    /// `ops_filters/`, in order.
    pub filters: Vec<OpsFilter>,
    /// The monitored physical ranges in pfns, `[start, end)`, clipped to the machine's memory
    /// (a range past its end monitors nothing); empty: the largest "System RAM" range
    /// (DAMON_RECLAIM's default `monitor_region_start/end` 0/0, §27.1, which
    /// `damon_set_region_biggest_system_ram_default` picks).
    pub regions: Vec<(u32, u32)>,
    /// The regions the kdamond starts with, with their accesses and ages: a snapshot's (the
    /// kernel's kdamond when the pages were read, §27.2 item 3). Empty: one region per range
    /// of `regions`, every one at age 0 (a kdamond just started). When given, they are the
    /// monitored ranges (the kernel's targets) and `regions` is not used.
    pub start: Vec<StartRegion>,
    /// With `start`: the regions (pfns) the scheme was applied to in the aggregation they were
    /// recorded at, in order. When they used up the quota the next application resumes after
    /// the last one (`charge_addr_from`), as the kernel's does.
    pub start_applied: Vec<(u32, u32)>,
}

/// A region a kdamond starts with (see [`DamonConfig::start`]), in pfns.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartRegion {
    pub start: u32,
    pub end: u32,
    /// Accesses counted in the aggregation that ended when it was recorded.
    pub nr_accesses: u32,
    /// Aggregation intervals.
    pub age: u32,
}

impl DamonConfig {
    /// DAMON_RECLAIM's module defaults (§27.1): 5 ms / 100 ms, 10–1000 regions, no accesses for
    /// `min_age` = 120 s (1200 aggregations), 10 ms and 128 MiB per 1 s, watermarks 500/400/200
    /// every 5 s, no ops filters (`skip_anon` = N).
    pub fn damon_reclaim() -> DamonConfig {
        DamonConfig {
            sample_us: 5_000,
            aggr_us: 100_000,
            min_nr_regions: 10,
            max_nr_regions: 1000,
            nr_accesses: (0, 0),
            age: (120_000_000 / 100_000, u32::MAX),
            sz: (PAGE, u64::MAX),
            quota_ms: 10,
            quota_bytes: 128 << 20,
            quota_reset_interval_ms: 1000,
            wmarks: Some(Watermarks {
                interval_us: 5_000_000,
                high: 500,
                mid: 400,
                low: 200,
            }),
            filters: Vec::new(),
            regions: Vec::new(),
            start: Vec::new(),
            start_applied: Vec::new(),
        }
    }

    /// S2's sysfs-made kdamond (§27.3): 500 ms / 5 s, 1024–8192 regions, 0–1 accesses, age ≥ 12
    /// aggregations, 128 MiB per 1 s and 50 ms, no watermarks, filters [anon reject, unmapped
    /// allow], over [16 MiB, 3 GiB) and [4 GiB, end).
    pub fn s2() -> DamonConfig {
        DamonConfig {
            sample_us: 500_000,
            aggr_us: 5_000_000,
            min_nr_regions: 1024,
            max_nr_regions: 8192,
            nr_accesses: (0, 1),
            age: (12, u32::MAX),
            sz: (0, u64::MAX),
            quota_ms: 50,
            quota_bytes: 128 << 20,
            quota_reset_interval_ms: 1000,
            wmarks: None,
            filters: vec![
                OpsFilter {
                    kind: FilterKind::Anon,
                    allow: false,
                },
                OpsFilter {
                    kind: FilterKind::Unmapped,
                    allow: true,
                },
            ],
            // §27.3: targets/0/regions [16 MiB, 3 GiB) and [4 GiB, end of memory): the PCI
            // hole below 4 GiB and the first 16 MiB are not monitored.
            regions: vec![(S2_START_PFN, PCI_HOLE_START_PFN), (PCI_HOLE_END_PFN, u32::MAX)],
            start: Vec::new(),
            start_applied: Vec::new(),
        }
    }

    /// `damon_max_nr_accesses`: samples per aggregation.
    pub fn max_nr_accesses(&self) -> u32 {
        (self.aggr_us / self.sample_us.max(1)).max(1) as u32
    }
}

/// One monitoring region (`struct damon_region`), in pfns.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub start: u32,
    pub end: u32,
    pub nr_accesses: u32,
    pub last_nr_accesses: u32,
    pub age: u32,
    /// The page made old at the last sample (`sampling_addr`).
    pub sampling: u32,
}

impl Region {
    fn new(start: u32, end: u32) -> Region {
        Region {
            start,
            end,
            nr_accesses: 0,
            last_nr_accesses: 0,
            age: 0,
            sampling: start,
        }
    }

    /// `damon_sz_region` in bytes.
    pub fn bytes(&self) -> u64 {
        (self.end - self.start) as u64 * PAGE
    }
}

/// The scheme's statistics (`schemes/N/stats/`), sizes in bytes.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DamosStats {
    pub nr_tried: u64,
    pub sz_tried: u64,
    pub nr_applied: u64,
    pub sz_applied: u64,
    pub sz_ops_filter_passed: u64,
    pub qt_exceeds: u64,
}

/// The quota's state (`struct damos_quota`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuotaState {
    /// The effective size quota of the window (`esz`), bytes.
    pub esz: u64,
    /// Bytes charged in the current window and in the earlier ones.
    pub charged_sz: u64,
    pub total_charged_sz: u64,
    /// When the current window started (ns), once one has.
    pub charged_from: Option<u64>,
    /// `charge_addr_from` in bytes (0: none).
    pub charge_addr_from: u64,
    pub min_score: u32,
}

/// One application of the scheme to a region (what `damon:damos_before_apply` reports), for
/// tests and reports.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    pub now_ns: u64,
    pub start: u32,
    pub end: u32,
    pub nr_accesses: u32,
    pub age: u32,
    pub nr_regions: usize,
    /// Pages freed by `reclaim_pages` for this region.
    pub freed: u64,
}

/// A kdamond: its configuration, regions, scheme state and statistics.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct Kdamond {
    pub cfg: DamonConfig,
    pub regions: Vec<Region>,
    /// `ctx->passed_sample_intervals` and `next_aggregation_sis`.
    pub passed_sample_intervals: u64,
    next_aggregation_sis: u64,
    /// Sampling was prepared at the last step (the next step checks the accesses).
    prepared: bool,
    /// `s->wmarks.activated`.
    pub active: bool,
    pub quota: QuotaState,
    pub stats: DamosStats,
    /// `damon_region_sz_limit`, pages.
    sz_limit: u64,
    /// `kdamond_split_regions`' `last_nr_regions`.
    last_nr_regions: usize,
    /// `ops_filters_default_reject`: the last user filter is an allow filter.
    default_reject: bool,
    /// Applications, most recent last (bounded by [`Kdamond::LOG`]).
    pub applied: Vec<Applied>,
    /// The CPU kdamond runs on (where `reclaim_pages` frees), set by the caller.
    pub cpu: u32,
    rng: u64,
}

impl Kdamond {
    /// How many applications [`Kdamond::applied`] keeps.
    pub const LOG: usize = 4096;

    /// A kdamond over `mm`'s memory (the configured ranges, else from the first managed pfn
    /// to the end of memory), one region per range (as the sysfs `targets/0/regions` give
    /// them), `seed` for `damon_rand`. With [`DamonConfig::start`] it starts with those
    /// regions instead ([`Kdamond::with_start`]).
    pub fn new(cfg: DamonConfig, mm: &Mm, seed: u64) -> Kdamond {
        if !cfg.start.is_empty() {
            return Self::with_start(cfg, mm, seed);
        }
        let ranges = if cfg.regions.is_empty() {
            Self::largest_ram_range(mm).into_iter().collect()
        } else {
            cfg.regions.clone()
        };
        let regions: Vec<Region> = ranges
            .into_iter()
            .map(|(s, e)| (s, e.min(mm.end_pfn)))
            .filter(|(s, e)| e > s)
            .map(|(s, e)| Region::new(s, e))
            .collect();
        let total: u64 = regions.iter().map(|r| (r.end - r.start) as u64).sum();
        let sz_limit = (total / cfg.min_nr_regions.max(1) as u64).max(1);
        let default_reject = cfg.filters.last().is_some_and(|f| f.allow);
        let next_aggregation_sis = (cfg.aggr_us / cfg.sample_us.max(1)).max(1);
        Kdamond {
            regions,
            passed_sample_intervals: 0,
            next_aggregation_sis,
            prepared: false,
            active: cfg.wmarks.is_none(),
            quota: QuotaState::default(),
            stats: DamosStats::default(),
            sz_limit,
            last_nr_regions: 0,
            default_reject,
            applied: Vec::new(),
            cpu: 0,
            rng: seed ^ 0x6461_6d6f_6e5f_7264,
            cfg,
        }
    }

    /// A kdamond that has been running (§27.2 item 3): its regions are [`DamonConfig::start`]
    /// (clipped to `mm`'s memory, in address order, overlaps dropped) with their ages, each
    /// region's recorded `nr_accesses` the previous aggregation's (`last_nr_accesses`, which
    /// the next merge compares with) and a new aggregation window starting now. The regions
    /// were recorded where the kernel's `kdamond_reset_aggregated` reports them, after the
    /// merge and the schemes and before `kdamond_split_regions`, so they are split once here
    /// as the kernel's were next. `sz_limit` is their total over `min_nr_regions`
    /// (`damon_region_sz_limit`). When [`DamonConfig::start_applied`] charged at least the
    /// quota (the model's effective one), the sweep resumes after the last of them
    /// (`charge_addr_from` = its end + 1, §27.2 item 4), else at the lowest address.
    /// Simplified: the kernel's sample phase is not recorded (the first aggregation ends one
    /// interval from now), nor its quota window (a new one starts at the first application,
    /// as it would after the kernel's 5 s).
    pub fn with_start(cfg: DamonConfig, mm: &Mm, seed: u64) -> Kdamond {
        let mut start = cfg.start.clone();
        start.sort_by_key(|r| (r.start, r.end));
        let mut regions: Vec<Region> = Vec::with_capacity(start.len());
        for s in start {
            let end = s.end.min(mm.end_pfn);
            let begin = regions.last().map_or(s.start, |p| s.start.max(p.end));
            if end <= begin {
                continue;
            }
            regions.push(Region {
                start: begin,
                end,
                nr_accesses: 0,
                last_nr_accesses: s.nr_accesses,
                age: s.age,
                sampling: begin,
            });
        }
        let mut kd = Self::new(
            DamonConfig {
                start: Vec::new(),
                start_applied: Vec::new(),
                regions: regions.iter().map(|r| (r.start, r.end)).collect(),
                ..cfg.clone()
            },
            mm,
            seed,
        );
        let applied: u64 = cfg
            .start_applied
            .iter()
            .map(|&(s, e)| e.saturating_sub(s) as u64 * PAGE)
            .sum();
        let esz = kd.effective_quota();
        if esz > 0 && applied >= esz {
            if let Some(&(_, e)) = cfg.start_applied.last() {
                kd.quota.charge_addr_from = e as u64 * PAGE + 1;
            }
        }
        kd.cfg = cfg;
        kd.regions = regions;
        kd.split_regions();
        kd
    }

    /// The largest "System RAM" range (`damon_set_region_biggest_system_ram_default`, §27.1):
    /// the zones' present pages as contiguous ranges (each zone's from its start: the model's
    /// holes are at the ends of zone spans, as on x86-64 where DMA32 ends at the PCI hole;
    /// simplified for a snapshot's machine, whose holes may lie inside a span), adjacent
    /// zones' joined; the first of the largest.
    pub fn largest_ram_range(mm: &Mm) -> Option<(u32, u32)> {
        let mut zones: Vec<(u32, u32)> = mm
            .zones
            .iter()
            .filter(|z| z.present > 0)
            .map(|z| (z.start_pfn, z.start_pfn + z.present))
            .collect();
        zones.sort_unstable();
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        for (s, e) in zones {
            match ranges.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => ranges.push((s, e)),
            }
        }
        ranges
            .into_iter()
            .fold(None, |best: Option<(u32, u32)>, r| match best {
                Some(b) if b.1 - b.0 >= r.1 - r.0 => Some(b),
                _ => Some(r),
            })
    }

    /// `damon_rand(l, r)`: uniform in `[l, r)` (splitmix64 on the kdamond's own seed).
    fn rand(&mut self, l: u64, r: u64) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        if r <= l {
            return l;
        }
        l + z % (r - l)
    }

    /// One sample interval of `kdamond_fn` at `now_ns`; returns how long to sleep (ns) before
    /// the next step: the sample interval, or the watermarks' interval while inactive.
    pub fn step(&mut self, mm: &mut Mm, now_ns: u64) -> u64 {
        let sample_ns = self.cfg.sample_us.max(1) * 1000;
        if self.prepared {
            self.prepared = false;
            self.passed_sample_intervals += 1;
            let max_nr_accesses = self.check_accesses(mm);
            let aggregate = self.passed_sample_intervals >= self.next_aggregation_sis;
            if aggregate {
                self.merge_regions(max_nr_accesses / 10);
                self.apply_schemes(mm, now_ns);
                self.next_aggregation_sis += (self.cfg.aggr_us / self.cfg.sample_us.max(1)).max(1);
                for r in &mut self.regions {
                    r.last_nr_accesses = r.nr_accesses;
                    r.nr_accesses = 0;
                }
                self.split_regions();
            }
        }
        if let Some(wait_us) = self.wmark_wait_us(mm) {
            return wait_us.max(1) * 1000;
        }
        self.prepare_access_checks(mm);
        self.prepared = true;
        sample_ns
    }

    /// `damos_wmark_metric_value(DAMOS_WMARK_FREE_MEM_RATE)`: NR_FREE_PAGES · 1000 / totalram.
    pub fn free_mem_rate(mm: &Mm) -> u64 {
        let free: i64 = mm.zones.iter().map(|z| z.nr_free_pages()).sum();
        let total: u64 = mm.zones.iter().map(|z| z.managed).sum();
        free.max(0) as u64 * 1000 / total.max(1)
    }

    /// `damos_wmark_wait_us` / `kdamond_wait_activation` (§27.2 item 1): `None` when the scheme
    /// is active, else the interval to wait before checking again (no monitoring meanwhile).
    fn wmark_wait_us(&mut self, mm: &Mm) -> Option<u64> {
        let Some(w) = self.cfg.wmarks else {
            self.active = true;
            return None;
        };
        let metric = Self::free_mem_rate(mm);
        if metric > w.high || metric < w.low {
            self.active = false;
            return Some(w.interval_us);
        }
        if metric >= w.mid && metric <= w.high && !self.active {
            return Some(w.interval_us);
        }
        self.active = true;
        None
    }

    /// `damon_get_folio` of paddr: the LRU folio covering `pfn` (a tail page finds its head).
    fn lru_folio(mm: &Mm, pfn: u32) -> Option<FolioId> {
        if pfn >= mm.end_pfn {
            return None;
        }
        for order in 0..=MAX_PAGE_ORDER {
            let head = pfn & !((1u32 << order) - 1);
            if let Some(id) = mm.folio_at(head) {
                let f = &mm.folios.folios[id as usize];
                let covers = head + (1u32 << f.order) > pfn;
                return (covers && f.lru != crate::vmscan::LRU_NONE && !f.isolated()).then_some(id);
            }
            if mm.pages.kind(head) != crate::mmzone::PageKind::Tail {
                return None;
            }
        }
        None
    }

    /// `damon_pa_prepare_access_checks`: one random page per region made old (PG_idle set).
    fn prepare_access_checks(&mut self, mm: &mut Mm) {
        for i in 0..self.regions.len() {
            let (s, e) = (self.regions[i].start, self.regions[i].end);
            let pfn = self.rand(s as u64, e as u64) as u32;
            self.regions[i].sampling = pfn;
            if let Some(id) = Self::lru_folio(mm, pfn) {
                mm.folios.folios[id as usize].set_idle(true);
            }
        }
    }

    /// `damon_pa_check_accesses`: a region counts one access if its sampled page's folio is
    /// young again. Returns the largest `nr_accesses`.
    fn check_accesses(&mut self, mm: &Mm) -> u32 {
        let mut max = 0;
        for r in &mut self.regions {
            let young =
                Self::lru_folio(mm, r.sampling).is_some_and(|id| !mm.folios.folios[id as usize].idle());
            if young {
                r.nr_accesses += 1;
            }
            max = max.max(r.nr_accesses);
        }
        max
    }

    /// `kdamond_merge_regions` / `damon_merge_regions_of` (§27.2 item 3): ages, then merges
    /// adjacent regions whose counts differ by at most `thres` while their sum stays within the
    /// size limit; repeated with a doubled threshold while there are more than `max_nr_regions`.
    fn merge_regions(&mut self, threshold: u32) {
        let max_thres = self.cfg.max_nr_accesses();
        let mut thres = threshold;
        loop {
            let mut out: Vec<Region> = Vec::with_capacity(self.regions.len());
            for mut r in std::mem::take(&mut self.regions) {
                if r.nr_accesses.abs_diff(r.last_nr_accesses) > thres
                    || (r.nr_accesses == 0) != (r.last_nr_accesses == 0)
                {
                    r.age = 0;
                } else {
                    r.age = r.age.saturating_add(1);
                }
                if let Some(p) = out.last_mut() {
                    let (sp, sr) = ((p.end - p.start) as u64, (r.end - r.start) as u64);
                    if p.end == r.start
                        && p.nr_accesses.abs_diff(r.nr_accesses) <= thres
                        && sp + sr <= self.sz_limit
                    {
                        // damon_merge_two_regions: size-weighted count and age.
                        p.nr_accesses =
                            ((p.nr_accesses as u64 * sp + r.nr_accesses as u64 * sr) / (sp + sr)) as u32;
                        p.age = ((p.age as u64 * sp + r.age as u64 * sr) / (sp + sr)) as u32;
                        p.end = r.end;
                        continue;
                    }
                }
                out.push(r);
            }
            self.regions = out;
            thres = (thres * 2).max(1);
            if !(self.regions.len() > self.cfg.max_nr_regions as usize && thres / 2 < max_thres) {
                break;
            }
        }
    }

    /// `kdamond_split_regions` / `damon_split_regions_of`: while there are at most half of
    /// `max_nr_regions`, each region is split in two (three if the count did not change and is
    /// below a third), the left part 10–90 % of it.
    fn split_regions(&mut self) {
        let n = self.regions.len();
        if n > self.cfg.max_nr_regions as usize / 2 {
            return;
        }
        let nr_subs = if self.last_nr_regions == n && n < self.cfg.max_nr_regions as usize / 3 {
            3
        } else {
            2
        };
        let mut out = Vec::with_capacity(n * nr_subs);
        for r in std::mem::take(&mut self.regions) {
            // The left part is split again; the right parts follow it in address order.
            let mut left = r;
            let mut rights = Vec::new();
            let mut sz = (r.end - r.start) as u64;
            for _ in 0..nr_subs - 1 {
                if sz <= 2 {
                    break;
                }
                let sub = self.rand(1, 10) * sz / 10;
                if sub == 0 || sub >= sz {
                    continue;
                }
                let mut right = left;
                right.start = left.start + sub as u32;
                left.end = right.start;
                rights.push(right);
                sz = sub;
            }
            out.push(left);
            out.extend(rights.into_iter().rev());
        }
        self.regions = out;
        self.last_nr_regions = n;
    }

    /// `__damos_valid_target`: the region's size, accesses and age are within the scheme's
    /// access pattern.
    fn pattern_matches(&self, r: &Region) -> bool {
        let (a0, a1) = self.cfg.nr_accesses;
        let (g0, g1) = self.cfg.age;
        let (s0, s1) = self.cfg.sz;
        (s0..=s1).contains(&r.bytes()) && (a0..=a1).contains(&r.nr_accesses) && (g0..=g1).contains(&r.age)
    }

    /// `damon_cold_score` (`damon_pa_scheme_score` for pageout) with DAMON_RECLAIM's and S2's
    /// weights (size 0, accesses 0, age 1): `DAMOS_MAX_SCORE` minus the age subscore, the age
    /// counted as a negative log2 of seconds when the region saw no access.
    pub fn cold_score(&self, r: &Region) -> u32 {
        let freq_subscore = r.nr_accesses as i64 * DAMON_MAX_SUBSCORE / self.cfg.max_nr_accesses() as i64;
        let mut age_in_sec = r.age as u64 * self.cfg.aggr_us / 1_000_000;
        let mut age_in_log = 0i64;
        while age_in_log < DAMON_MAX_AGE_IN_LOG && age_in_sec > 0 {
            age_in_log += 1;
            age_in_sec >>= 1;
        }
        if freq_subscore == 0 {
            age_in_log = -age_in_log;
        }
        age_in_log += DAMON_MAX_AGE_IN_LOG;
        let age_subscore = age_in_log * DAMON_MAX_SUBSCORE / DAMON_MAX_AGE_IN_LOG / 2;
        // (0 · freq + 1 · age) / (0 + 1).
        let hotness = age_subscore * DAMOS_MAX_SCORE as i64 / DAMON_MAX_SUBSCORE;
        DAMOS_MAX_SCORE - hotness.clamp(0, DAMOS_MAX_SCORE as i64) as u32
    }

    /// `damos_set_effective_quota` (§27.2 item 4): `min(bytes, throughput × ms)`, the
    /// throughput at its initial estimate (module comment).
    fn effective_quota(&self) -> u64 {
        let mut esz = u64::MAX;
        if self.cfg.quota_ms > 0 {
            esz = INITIAL_THROUGHPUT_BYTES_PER_MS * self.cfg.quota_ms;
        }
        if self.cfg.quota_bytes > 0 && self.cfg.quota_bytes < esz {
            esz = self.cfg.quota_bytes;
        }
        if esz == u64::MAX {
            0
        } else {
            esz
        }
    }

    /// `damos_adjust_quota`: a new charge window when `reset_interval` has elapsed, then the
    /// coldness histogram that sets `min_score`.
    fn adjust_quota(&mut self, now_ns: u64) {
        if self.cfg.quota_ms == 0 && self.cfg.quota_bytes == 0 {
            return;
        }
        let esz = self.effective_quota();
        let q = &mut self.quota;
        if q.total_charged_sz == 0 && q.charged_from.is_none() {
            q.charged_from = Some(now_ns);
            q.esz = esz;
        }
        let from = q.charged_from.expect("set above");
        if now_ns >= from + self.cfg.quota_reset_interval_ms * 1_000_000 {
            if q.esz > 0 && q.charged_sz >= q.esz {
                self.stats.qt_exceeds += 1;
            }
            q.total_charged_sz += q.charged_sz;
            q.charged_from = Some(now_ns);
            q.charged_sz = 0;
            q.esz = esz;
        }
        let mut hist = [0u64; DAMOS_MAX_SCORE as usize + 1];
        let mut max_score = 0;
        for r in &self.regions {
            if !self.pattern_matches(r) {
                continue;
            }
            let s = self.cold_score(r);
            hist[s as usize] += r.bytes();
            max_score = max_score.max(s);
        }
        let mut cum = 0;
        let mut score = max_score;
        loop {
            cum += hist[score as usize];
            if cum >= self.quota.esz || score == 0 {
                break;
            }
            score -= 1;
        }
        self.quota.min_score = score;
    }

    /// `kdamond_apply_schemes` / `damon_do_apply_schemes` / `damos_skip_charged_region` /
    /// `damos_apply_scheme` (§27.2 item 4): regions in address order, resuming after the last
    /// charged address; each eligible one is charged its whole size (the last split at the
    /// remaining quota), has the action applied and its age reset.
    fn apply_schemes(&mut self, mm: &mut Mm, now_ns: u64) {
        if !self.active {
            return;
        }
        self.adjust_quota(now_ns);
        let mut i = 0;
        while i < self.regions.len() {
            let esz = self.quota.esz;
            if esz > 0 && self.quota.charged_sz >= esz {
                i += 1;
                continue;
            }
            // damos_skip_charged_region.
            if self.quota.charge_addr_from != 0 {
                let r = self.regions[i];
                if i == self.regions.len() - 1 {
                    self.quota.charge_addr_from = 0;
                    i += 1;
                    continue;
                }
                let (rs, re) = (r.start as u64 * PAGE, r.end as u64 * PAGE);
                if re <= self.quota.charge_addr_from {
                    i += 1;
                    continue;
                }
                if rs < self.quota.charge_addr_from {
                    let mut skip = (self.quota.charge_addr_from - rs) / PAGE;
                    if skip == 0 {
                        if r.end - r.start <= 1 {
                            i += 1;
                            continue;
                        }
                        skip = 1;
                    }
                    self.split_at(i, skip as u32);
                    i += 1;
                }
                self.quota.charge_addr_from = 0;
            }
            let r = self.regions[i];
            if !self.pattern_matches(&r) || (esz > 0 && self.cold_score(&r) < self.quota.min_score) {
                i += 1;
                continue;
            }
            // damos_apply_scheme.
            let mut sz = r.bytes();
            if esz > 0 && self.quota.charged_sz + sz > esz {
                sz = (esz - self.quota.charged_sz) / PAGE * PAGE;
                if sz == 0 {
                    self.stats.nr_tried += 1;
                    i += 1;
                    continue;
                }
                self.split_at(i, (sz / PAGE) as u32);
            }
            let r = self.regions[i];
            if mm.trace_on(crate::node::trace_kind::DAMOS_BEFORE_APPLY) {
                // trace_damos_before_apply: context, scheme and target 0 (one each), the
                // region after the quota's split, its accesses and age before the reset.
                let ev = crate::trace::TraceEvent::DamosBeforeApply {
                    context_idx: 0,
                    scheme_idx: 0,
                    target_idx: 0,
                    nr_regions: self.regions.len() as u32,
                    start: r.start as u64 * PAGE,
                    end: r.end as u64 * PAGE,
                    nr_accesses: r.nr_accesses,
                    age: r.age,
                };
                mm.emit(self.cpu, ev);
            }
            let (freed, passed) = self.pageout(mm, r.start, r.end);
            if self.applied.len() == Self::LOG {
                self.applied.remove(0);
            }
            self.applied.push(Applied {
                now_ns,
                start: r.start,
                end: r.end,
                nr_accesses: r.nr_accesses,
                age: r.age,
                nr_regions: self.regions.len(),
                freed,
            });
            self.quota.charged_sz += sz;
            if esz > 0 && self.quota.charged_sz >= esz {
                self.quota.charge_addr_from = r.end as u64 * PAGE + 1;
            }
            self.regions[i].age = 0;
            self.stats.nr_tried += 1;
            self.stats.sz_tried += sz;
            if freed > 0 {
                self.stats.nr_applied += 1;
                self.stats.sz_applied += freed * PAGE;
            }
            self.stats.sz_ops_filter_passed += passed * PAGE;
            i += 1;
        }
    }

    /// `damon_split_region_at`: region `i` keeps its first `pages` pages, the rest follows it
    /// with the same counts and age.
    fn split_at(&mut self, i: usize, pages: u32) {
        let r = self.regions[i];
        if pages == 0 || pages >= r.end - r.start {
            return;
        }
        let mut right = r;
        right.start = r.start + pages;
        self.regions[i].end = right.start;
        self.regions.insert(i + 1, right);
    }

    /// `damos_pa_filter_out` (§27.2 item 5): the first matching filter decides, the young
    /// filter `damon_pa_pageout` appends (reject young) last; no match: rejected if the last
    /// user filter is an allow filter.
    fn filter_out(&self, mm: &mut Mm, id: FolioId) -> bool {
        let young_given = self.cfg.filters.iter().any(|f| f.kind == FilterKind::Young);
        let appended = OpsFilter {
            kind: FilterKind::Young,
            allow: false,
        };
        let filters = self
            .cfg
            .filters
            .iter()
            .copied()
            .chain((!young_given).then_some(appended));
        for f in filters {
            let folio = &mm.folios.folios[id as usize];
            let matched = match f.kind {
                FilterKind::Anon => folio.kind == FolioKind::Anon,
                // Simplification: file folios are unmapped, anonymous ones mapped.
                FilterKind::Unmapped => folio.kind != FolioKind::Anon,
                FilterKind::Young => {
                    let young = !folio.idle();
                    if young {
                        mm.folios.folios[id as usize].set_idle(true);
                    }
                    young
                }
            };
            if matched {
                return !f.allow;
            }
        }
        self.default_reject
    }

    /// `damon_pa_pageout` (§27.2 item 5): every LRU folio of `[start, end)` that passes the
    /// filters has PG_referenced cleared and is isolated (an unevictable one goes straight
    /// back); `reclaim_pages` then runs `shrink_folio_list` on them, ignoring references: clean
    /// file folios are freed at their order with a shadow entry, dirty ones get PG_reclaim
    /// (`nr_vmscan_immediate_reclaim`) and are activated, anonymous ones are swapped out if
    /// swap has room, else activated. No pgscan/pgsteal. Returns (pages freed, pages that
    /// passed the filters).
    fn pageout(&mut self, mm: &mut Mm, start: u32, end: u32) -> (u64, u64) {
        let mut list = Vec::new();
        let mut passed = 0;
        let mut pfn = start;
        while pfn < end {
            let Some(id) = Self::lru_folio(mm, pfn) else {
                pfn += 1;
                continue;
            };
            let nr = 1u32 << mm.folios.folios[id as usize].order;
            pfn += nr;
            if self.filter_out(mm, id) {
                continue;
            }
            passed += nr as u64;
            mm.folios.folios[id as usize].set_referenced(false);
            if mm.folios.folios[id as usize].unevictable() {
                continue;
            }
            mm.isolate_lru_folio(id);
            list.push(id);
        }
        if list.is_empty() {
            return (0, passed);
        }
        // reclaim_pages: GFP_KERNEL, may swap, references ignored (cleared above).
        let nr_scanned: u64 = list
            .iter()
            .map(|&id| 1u64 << mm.folios.folios[id as usize].order)
            .sum();
        let sc = crate::vmscan::ScanControl::direct(mm.zones.len() - 1, 0, self.cpu);
        let stat = mm.shrink_folio_list(list, &sc);
        if mm.trace_on(crate::node::trace_kind::VMSCAN_RECLAIM_PAGES) {
            // reclaim_folio_list's trace_mm_vmscan_reclaim_pages: `sc.nr_scanned` counts every
            // page `shrink_folio_list` was given. The model has no congestion, no PG_reclaim
            // writeback retry and no unmap failure (those count 0).
            let ev = crate::trace::TraceEvent::MmVmscanReclaimPages {
                nid: 0,
                nr_scanned: nr_scanned as i64,
                nr_reclaimed: stat.nr_reclaimed as i64,
                nr_dirty: stat.nr_dirty as i64,
                nr_writeback: stat.nr_writeback as i64,
                nr_congested: 0,
                nr_immediate: 0,
                nr_activate: [stat.nr_activate[0] as i32, stat.nr_activate[1] as i32],
                nr_ref_keep: stat.nr_ref_keep as i64,
                nr_unmap_fail: 0,
            };
            mm.emit(self.cpu, ev);
        }
        (stat.nr_reclaimed, passed)
    }
}
