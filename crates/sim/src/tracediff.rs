//! `fraglab trace diff KERNEL SIM` (issue 32 item 3): where the two engines part.
//!
//! Both inputs are ftrace text (a FRAGTRCE trace file or plain text) holding the
//! [`DIFF_EVENTS`](fraglab_spec::DIFF_EVENTS); each line is read by
//! [`parse_trace_line`], so the kernel's text and the simulator's go through the same parser.
//! The lines are streamed: what is kept per side is the open episodes (one per pid), the
//! histograms and totals, and the first [`MAX_EPISODES`] closed episodes of each kind.
//!
//! **Episodes.** A *compaction run* is `mm_compaction_begin` … `mm_compaction_end` of one pid;
//! the `isolate_migratepages`/`isolate_freepages`/`migratepages` events of that pid in between
//! add to it, its first `mm_compaction_finished` gives its zone and order. Its trigger:
//! `kcompactd` when the task is `kcompactd*` and the run's order is not -1 (`mm_compaction_kcompactd_wake`
//! gives the order when no `finished` line does), `proactive` for a `kcompactd*` run of order -1,
//! `direct` when the pid's last `mm_compaction_try_to_compact_pages` (order, priority) precedes it
//! and the order is not -1, `manual` otherwise (a write to `compact_memory`, order -1). A
//! *reclaim episode* is `mm_vmscan_direct_reclaim_begin` … `_end` of one pid (order; reclaimed =
//! the end's `nr_reclaimed`), or `mm_vmscan_kswapd_wake` … `mm_vmscan_kswapd_sleep` (or the next
//! wake) of one kswapd (reclaimed = the sum of its `lru_shrink_inactive` `nr_reclaimed`); scanned
//! is the sum of the episode's `mm_vmscan_lru_shrink_inactive` `nr_scanned`. Episodes are ordered
//! by their start; an episode still open at the end of the trace has status `unfinished`.
//!
//! **DAMON.** `damon:damos_before_apply` (a scheme applied to a region, docs/model §27.2
//! item 6) and `vmscan:mm_vmscan_reclaim_pages` (what `reclaim_pages` did with the folios that
//! passed the filters; a task `kdamond*` is DAMON's, others, such as MADV_PAGEOUT, count as
//! `reclaim_pages_other_*`) are summed per side — regions applied, bytes of region span
//! applied, `reclaim_pages` calls, pages scanned, reclaimed and activated — and per time bin
//! of [`DAMON_BIN_NS`] (S2's 5 s aggregation interval; [`DiffOptions::damon_bin_ns`]) from the
//! phase start, with the cumulative pages reclaimed. A bin whose bytes applied or pages
//! reclaimed differ by more than [`DIVERGENCE_RATIO`] is a divergence (`damon[i]`). The
//! kernel's aggregation drifts against fixed bins (S2's took ≈ 5.12 s: about one bin in 40
//! has no application there), so a late bin at 0 on one side can be drift, not yield.
//!
//! **Phases.** The diff compares the measured part of each trace. It starts at the line
//! `tracing_mark_write: fraglab: measure` ([`MEASURE_MARKER`], what a write of that text to the
//! instance's `trace_marker` prints; the simulator's `--trace-out` writes it at the run's
//! `measure_start_ns`), or at a timestamp given per side ([`DiffOptions::kernel_from_ns`],
//! `--kernel-from`/`--sim-from`, seconds of the trace clock: a host trace is on CLOCK_MONOTONIC
//! when it was written by `HostOptions::trace_to`). An explicit timestamp wins over a marker.
//! Without either, the whole trace is compared. Events before the start are counted
//! (`skipped_before_phase`), not diffed.
//!
//! **Divergence.** Two magnitudes differ when `max / max(min, 1)` > [`DIVERGENCE_RATIO`] (so 0 vs
//! 1 does not count, 0 vs 2 does). The first divergence is the first episode index, compaction
//! runs and reclaim episodes each in start order, whose trigger/kind, order or status differ or
//! whose pages scanned/isolated/migrated/failed (compaction) or scanned/reclaimed (reclaim)
//! differ, or that one side lacks; of the two kinds, the one that starts earlier in the kernel
//! trace (relative to its phase start). The largest divergence is the total with the largest such factor (a side
//! at 0 against a side at 2 or more ranks above any finite factor; ties go to the larger count).
//!
//! **Bad input.** A line naming one of the diff events that [`parse_trace_line`] does not read
//! is counted as malformed and the first [`MAX_MALFORMED_EXAMPLES`] are reported with their
//! file, line number and byte offset (of the line in plain text, of its compressed `TEXT`
//! section in a trace file); lines of other events and other text are counted, `CPU:N [LOST M
//! EVENTS]` lines add to the lost events.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use fraglab_mm::trace::{parse_trace_line, TraceEvent, COMPACT_STATUS, ZONE_NAMES};
use fraglab_state::trace::{event_name, lost_events_line, TraceReader};
use serde::Serialize;

/// Closed episodes of each kind kept per side (the aggregates count them all).
pub const MAX_EPISODES: usize = 100_000;
/// Malformed lines quoted per side.
pub const MAX_MALFORMED_EXAMPLES: usize = 5;
/// The text of the phase marker line (`tracing_mark_write: fraglab: measure`).
pub const MEASURE_MARKER: &str = "fraglab: measure";
/// Two magnitudes diverge when their ratio exceeds this.
pub const DIVERGENCE_RATIO: f64 = 1.5;
/// The DAMON section's time bin: S2's aggregation interval, 5 s (§27.3).
pub const DAMON_BIN_NS: u64 = 5_000_000_000;

/// The phase marker line the simulator's `--trace-out` writes at `ts_ns` (the line the kernel
/// prints for a write of [`MEASURE_MARKER`] to `trace_marker` by a task `fraglab`, pid 0).
pub fn marker_line(ts_ns: u64) -> String {
    let us = ts_ns / 1000 + u64::from(ts_ns % 1000 >= 500);
    format!(
        "{:>16}-{:<7} [000] ..... {:>5}.{:06}: tracing_mark_write: {MEASURE_MARKER}\n",
        "fraglab",
        0,
        us / 1_000_000,
        us % 1_000_000
    )
}

/// The `mm_compaction_end`-less status of a run still open at the end of the trace.
pub const UNFINISHED: &str = "unfinished";

/// One compaction run (begin … end of one pid).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CompactionRun {
    pub pid: u32,
    pub comm: String,
    /// ns since the phase start.
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    /// `direct`, `kcompactd`, `proactive` or `manual`.
    pub trigger: String,
    pub order: i32,
    /// The priority of `mm_compaction_try_to_compact_pages` (direct runs).
    pub prio: Option<i32>,
    /// Zone name from `mm_compaction_finished`, else `pfn:0x…` of the zone start.
    pub zone: String,
    pub sync: bool,
    /// Migrate scanner position at begin and end.
    pub migrate_pfn: [u32; 2],
    /// Free scanner position at begin and end.
    pub free_pfn: [u32; 2],
    pub migrate_scanned: u64,
    pub free_scanned: u64,
    pub migrate_isolated: u64,
    pub free_isolated: u64,
    pub migrated: u64,
    pub migrate_failed: u64,
    /// The end status (`COMPACT_STATUS` name) or [`UNFINISHED`].
    pub status: String,
    #[serde(skip)]
    finished_order: Option<i32>,
    #[serde(skip)]
    zone_start: u32,
}

impl CompactionRun {
    /// Pages scanned by both scanners.
    pub fn scanned(&self) -> u64 {
        self.migrate_scanned + self.free_scanned
    }

    fn text(&self) -> String {
        format!(
            "{} o={} prio={} zone={} {} mig=0x{:x}->0x{:x} free=0x{:x}->0x{:x} scanned={} ({}+{}) isolated={}+{} migrated={} failed={} status={} t=+{:.6}",
            self.trigger,
            self.order,
            self.prio.map_or("-".to_string(), |p| p.to_string()),
            self.zone,
            if self.sync { "sync" } else { "async" },
            self.migrate_pfn[0],
            self.migrate_pfn[1],
            self.free_pfn[0],
            self.free_pfn[1],
            self.scanned(),
            self.migrate_scanned,
            self.free_scanned,
            self.migrate_isolated,
            self.free_isolated,
            self.migrated,
            self.migrate_failed,
            self.status,
            self.start_ns as f64 / 1e9
        )
    }
}

/// One reclaim episode.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReclaimEpisode {
    pub pid: u32,
    pub comm: String,
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    /// `direct` or `kswapd`.
    pub kind: String,
    pub order: i32,
    pub scanned: u64,
    pub reclaimed: u64,
    /// `done`, or [`UNFINISHED`].
    pub status: String,
    #[serde(skip)]
    shrink_reclaimed: u64,
}

impl ReclaimEpisode {
    fn text(&self) -> String {
        format!(
            "{} o={} scanned={} reclaimed={} status={} t=+{:.6}",
            self.kind,
            self.order,
            self.scanned,
            self.reclaimed,
            self.status,
            self.start_ns as f64 / 1e9
        )
    }
}

/// DAMON's pageout in one time bin of a side (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DamonBin {
    pub index: usize,
    /// The bin's start, ns since the phase start.
    pub start_ns: u64,
    /// `damos_before_apply` events and the bytes of region span they name.
    pub regions: u64,
    pub bytes: u64,
    /// The applied regions' ages (aggregation intervals), lowest and highest.
    pub age_min: Option<u32>,
    pub age_max: Option<u32>,
    /// `mm_vmscan_reclaim_pages` of a `kdamond*` task: calls and their pages.
    pub calls: u64,
    pub scanned: u64,
    pub reclaimed: u64,
    pub activated: u64,
    /// Pages reclaimed up to the end of this bin.
    pub cum_reclaimed: u64,
}

impl DamonBin {
    fn text(&self) -> String {
        let ages = match (self.age_min, self.age_max) {
            (Some(a), Some(b)) => format!("{a}-{b}"),
            _ => "-".into(),
        };
        format!(
            "regions={} applied={:.1}MiB ages={ages} calls={} reclaimed={} activated={} cum_reclaimed={}",
            self.regions,
            self.bytes as f64 / (1u64 << 20) as f64,
            self.calls,
            self.reclaimed,
            self.activated,
            self.cum_reclaimed
        )
    }
}

/// What one side's compared part holds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SideSummary {
    pub file: String,
    /// Lines read (comments and blank lines not counted).
    pub lines: u64,
    /// Diff events in the compared part, per name.
    pub events: BTreeMap<String, u64>,
    /// Event lines of other events, and lines that are no event.
    pub other_events: u64,
    pub other_lines: u64,
    pub malformed: u64,
    pub malformed_examples: Vec<String>,
    /// Events the kernel dropped (`CPU:N [LOST M EVENTS]` lines, the trace file's header).
    pub lost_events: u64,
    /// `whole`, `marker at S s`, `from S s`.
    pub phase: String,
    /// Diff events before the phase start.
    pub skipped_before_phase: u64,
    /// Events of a pid with no open episode (an isolate outside a run, an end without begin).
    pub orphan_events: u64,
    pub compaction_runs: u64,
    pub reclaim_episodes: u64,
    /// The first [`MAX_EPISODES`] (or, in a [`TraceDiff`], the first `episodes` shown), by start.
    pub compaction: Vec<CompactionRun>,
    pub reclaim: Vec<ReclaimEpisode>,
    /// DAMON's pageout per time bin, from the phase start to the last bin with an event.
    pub damon: Vec<DamonBin>,
    /// Diff events the trace file says its kernel did not have (the host's `not on this
    /// kernel` comment lines).
    pub not_on_kernel: Vec<String>,
    pub totals: BTreeMap<String, u64>,
    /// Histogram name -> bucket -> count.
    pub hist: BTreeMap<String, BTreeMap<String, u64>>,
}

/// Reads one side's lines.
pub struct SideReader {
    s: SideSummary,
    from_ns: Option<u64>,
    phase_start_ns: Option<u64>,
    open_runs: HashMap<u32, CompactionRun>,
    open_reclaim: HashMap<u32, ReclaimEpisode>,
    pending_try: HashMap<u32, (i32, i32)>,
    pending_wake: HashMap<u32, i32>,
    /// Where the first line that is no event is (for the error when no line is).
    first_other: Option<String>,
    /// The DAMON section's bin width (ns).
    damon_bin_ns: u64,
}

/// The names of the diff events (without their group).
fn is_diff_event(name: &str) -> bool {
    fraglab_spec::DIFF_EVENTS
        .iter()
        .any(|e| e.split_once(':').is_some_and(|(_, n)| n == name))
}

fn bump(m: &mut BTreeMap<String, u64>, k: &str, n: u64) {
    *m.entry(k.to_string()).or_default() += n;
}

/// The log2 bucket of a count: `0`, `1`, `2-3`, `4-7`, ...
pub fn bucket(n: u64) -> String {
    if n < 2 {
        return n.to_string();
    }
    let lo = 1u64 << (63 - n.leading_zeros());
    format!("{lo}-{}", lo.saturating_mul(2) - 1)
}

/// The timestamp (ns) of an ftrace line: the `SECS.USECS:` token before the event name.
fn line_ts_ns(line: &str, name: &str) -> Option<u64> {
    let head = &line[..line.find(&format!(": {name}:"))?];
    let (s, us) = head.rsplit(' ').next()?.split_once('.')?;
    Some(s.parse::<u64>().ok()? * 1_000_000_000 + us.parse::<u64>().ok()? * 1000)
}

impl SideReader {
    /// A side read from `file` (the name errors and the output use), compared from `from_ns`
    /// (trace clock) when given, else from a [`MEASURE_MARKER`] line when there is one.
    pub fn new(file: &str, from_ns: Option<u64>) -> SideReader {
        SideReader {
            s: SideSummary {
                file: file.to_string(),
                phase: match from_ns {
                    Some(t) => format!("from {:.6} s", t as f64 / 1e9),
                    None => "whole".into(),
                },
                ..Default::default()
            },
            from_ns,
            phase_start_ns: from_ns,
            open_runs: HashMap::new(),
            open_reclaim: HashMap::new(),
            pending_try: HashMap::new(),
            pending_wake: HashMap::new(),
            first_other: None,
            damon_bin_ns: DAMON_BIN_NS,
        }
    }

    /// The DAMON section's bins `ns` wide (0: [`DAMON_BIN_NS`]).
    pub fn with_damon_bin(mut self, ns: u64) -> SideReader {
        self.damon_bin_ns = if ns == 0 { DAMON_BIN_NS } else { ns };
        self
    }

    /// The DAMON bin of time `t` (ns since the phase start), made (with the empty ones
    /// before it) if needed.
    fn damon_bin(&mut self, t: u64) -> &mut DamonBin {
        let i = (t / self.damon_bin_ns) as usize;
        while self.s.damon.len() <= i {
            let index = self.s.damon.len();
            self.s.damon.push(DamonBin {
                index,
                start_ns: index as u64 * self.damon_bin_ns,
                ..Default::default()
            });
        }
        &mut self.s.damon[i]
    }

    /// Reads one line; `at` says where it is (for a malformed line's report).
    pub fn line(&mut self, line: &str, at: impl FnOnce() -> String) {
        self.s.lines += 1;
        if let Some(n) = lost_events_line(line) {
            self.s.lost_events += n;
            return;
        }
        let Some(name) = event_name(line) else {
            self.s.other_lines += 1;
            if self.first_other.is_none() {
                self.first_other = Some(at());
            }
            return;
        };
        if name == "tracing_mark_write" {
            // The first marker only (a later one is another task's measure step).
            if self.from_ns.is_none() && !self.s.phase.starts_with("marker") && line.contains(MEASURE_MARKER)
            {
                self.start_phase(line_ts_ns(line, name));
            } else {
                self.s.other_events += 1;
            }
            return;
        }
        if !is_diff_event(name) {
            self.s.other_events += 1;
            return;
        }
        let Some(r) = parse_trace_line(line) else {
            self.s.malformed += 1;
            if self.s.malformed_examples.len() < MAX_MALFORMED_EXAMPLES {
                let mut l: String = line.chars().take(200).collect();
                if l.len() < line.len() {
                    l.push('…');
                }
                self.s
                    .malformed_examples
                    .push(format!("{}: {name} not read: {l}", at()));
            }
            return;
        };
        if self.from_ns.is_some_and(|t| r.ts_ns < t) {
            self.s.skipped_before_phase += 1;
            return;
        }
        let t0 = *self.phase_start_ns.get_or_insert(r.ts_ns);
        let t = r.ts_ns.saturating_sub(t0);
        bump(&mut self.s.events, r.event.name(), 1);
        let pid = r.pid;
        let tot = &mut self.s.totals;
        match r.event {
            TraceEvent::MmCompactionTryToCompactPages { order, prio, .. } => {
                bump(tot, "try_to_compact_pages", 1);
                self.pending_try.insert(pid, (order, prio));
            }
            TraceEvent::MmCompactionKcompactd { wake, order, .. } => {
                if wake {
                    bump(tot, "kcompactd_wake", 1);
                    self.pending_wake.insert(pid, order);
                } else {
                    bump(tot, "wakeup_kcompactd", 1);
                }
            }
            TraceEvent::MmCompactionBeginEnd {
                zone_start,
                migrate_pfn,
                free_pfn,
                sync,
                status: None,
                ..
            } => {
                if let Some(old) = self.open_runs.remove(&pid) {
                    self.close_run(old);
                }
                self.open_runs.insert(
                    pid,
                    CompactionRun {
                        pid,
                        comm: r.comm.clone(),
                        start_ns: t,
                        sync,
                        migrate_pfn: [migrate_pfn, migrate_pfn],
                        free_pfn: [free_pfn, free_pfn],
                        status: UNFINISHED.into(),
                        zone_start,
                        ..Default::default()
                    },
                );
            }
            TraceEvent::MmCompactionBeginEnd {
                migrate_pfn,
                free_pfn,
                status: Some(st),
                ..
            } => match self.open_runs.remove(&pid) {
                Some(mut run) => {
                    run.migrate_pfn[1] = migrate_pfn;
                    run.free_pfn[1] = free_pfn;
                    run.end_ns = Some(t);
                    run.status = COMPACT_STATUS
                        .get(st as usize)
                        .map_or(format!("{st:#x}"), |s| s.to_string());
                    self.close_run(run);
                }
                None => self.s.orphan_events += 1,
            },
            TraceEvent::MmCompactionIsolate {
                free,
                nr_scanned,
                nr_taken,
                ..
            } => match self.open_runs.get_mut(&pid) {
                Some(run) if free => {
                    run.free_scanned += nr_scanned;
                    run.free_isolated += nr_taken;
                }
                Some(run) => {
                    run.migrate_scanned += nr_scanned;
                    run.migrate_isolated += nr_taken;
                }
                None => self.s.orphan_events += 1,
            },
            TraceEvent::MmCompactionMigratepages {
                nr_migrated,
                nr_failed,
            } => match self.open_runs.get_mut(&pid) {
                Some(run) => {
                    run.migrated += nr_migrated;
                    run.migrate_failed += nr_failed;
                }
                None => self.s.orphan_events += 1,
            },
            TraceEvent::MmCompactionSuitableFinished {
                finished: true,
                zone,
                order,
                ..
            } => {
                if let Some(run) = self.open_runs.get_mut(&pid) {
                    if run.finished_order.is_none() {
                        run.finished_order = Some(order);
                        run.zone = ZONE_NAMES
                            .get(zone as usize)
                            .map_or(format!("{zone:#x}"), |z| z.to_string());
                    }
                }
            }
            TraceEvent::MmCompactionDefer { kind, order, .. } => {
                let k = ["compaction_deferred", "defer_compaction", "defer_reset"][kind.min(2) as usize];
                bump(tot, k, 1);
                let h = self.s.hist.entry(format!("{k}_by_order")).or_default();
                bump(h, &order.to_string(), 1);
            }
            TraceEvent::MmPageAllocExtfrag {
                alloc_migratetype,
                fallback_migratetype,
                change_ownership,
                ..
            } => {
                bump(tot, "extfrag", 1);
                if change_ownership {
                    bump(tot, "extfrag_claimed", 1);
                }
                let h = self.s.hist.entry("extfrag".into()).or_default();
                let k = format!(
                    "{}->{} {}",
                    migratetype_name(fallback_migratetype),
                    migratetype_name(alloc_migratetype),
                    if change_ownership {
                        "claimed"
                    } else {
                        "not_claimed"
                    }
                );
                bump(h, &k, 1);
            }
            TraceEvent::MmVmscanKswapdWake { order, .. } => {
                if let Some(old) = self.open_reclaim.remove(&pid) {
                    self.close_reclaim(old);
                }
                self.open_reclaim
                    .insert(pid, reclaim_episode(pid, &r.comm, t, "kswapd", order));
            }
            TraceEvent::MmVmscanKswapdSleep { .. } => match self.open_reclaim.remove(&pid) {
                Some(mut e) => {
                    e.end_ns = Some(t);
                    e.status = "done".into();
                    self.close_reclaim(e);
                }
                None => self.s.orphan_events += 1,
            },
            TraceEvent::MmVmscanDirectReclaimBegin { order, .. } => {
                if let Some(old) = self.open_reclaim.remove(&pid) {
                    self.close_reclaim(old);
                }
                self.open_reclaim
                    .insert(pid, reclaim_episode(pid, &r.comm, t, "direct", order));
            }
            TraceEvent::MmVmscanDirectReclaimEnd { nr_reclaimed } => match self.open_reclaim.remove(&pid) {
                Some(mut e) => {
                    e.end_ns = Some(t);
                    e.status = "done".into();
                    e.reclaimed = nr_reclaimed;
                    self.close_reclaim(e);
                }
                None => self.s.orphan_events += 1,
            },
            TraceEvent::MmVmscanLruShrinkInactive {
                nr_scanned,
                nr_reclaimed,
                ..
            } => {
                let (sc, rc) = (nr_scanned.max(0) as u64, nr_reclaimed.max(0) as u64);
                bump(tot, "lru_inactive_scanned", sc);
                bump(tot, "lru_inactive_reclaimed", rc);
                match self.open_reclaim.get_mut(&pid) {
                    Some(e) => {
                        e.scanned += sc;
                        e.shrink_reclaimed += rc;
                    }
                    None => self.s.orphan_events += 1,
                }
            }
            TraceEvent::DamosBeforeApply { start, end, age, .. } => {
                let bytes = end.saturating_sub(start);
                bump(tot, "damon_regions_applied", 1);
                bump(tot, "damon_bytes_applied", bytes);
                bump(
                    self.s.hist.entry("damon_age_at_apply".into()).or_default(),
                    &bucket(age.into()),
                    1,
                );
                let b = self.damon_bin(t);
                b.regions += 1;
                b.bytes += bytes;
                b.age_min = Some(b.age_min.map_or(age, |a| a.min(age)));
                b.age_max = Some(b.age_max.map_or(age, |a| a.max(age)));
            }
            TraceEvent::MmVmscanReclaimPages {
                nr_scanned,
                nr_reclaimed,
                nr_activate,
                ..
            } => {
                let (sc, rc) = (nr_scanned.max(0) as u64, nr_reclaimed.max(0) as u64);
                let act = nr_activate[0].max(0) as u64 + nr_activate[1].max(0) as u64;
                if r.comm.starts_with("kdamond") {
                    bump(tot, "damon_reclaim_pages_calls", 1);
                    bump(tot, "damon_pages_scanned", sc);
                    bump(tot, "damon_pages_reclaimed", rc);
                    bump(tot, "damon_pages_activated", act);
                    let b = self.damon_bin(t);
                    b.calls += 1;
                    b.scanned += sc;
                    b.reclaimed += rc;
                    b.activated += act;
                } else {
                    bump(tot, "reclaim_pages_other_calls", 1);
                    bump(tot, "reclaim_pages_other_reclaimed", rc);
                }
            }
            _ => {}
        }
    }

    /// Notes a diff event the side's kernel did not have (the trace file's
    /// [`MISSING_EVENT_PREFIX`](fraglab_state::trace::MISSING_EVENT_PREFIX) lines).
    pub fn not_on_kernel(&mut self, ev: &str) {
        if !self.s.not_on_kernel.iter().any(|e| e == ev) {
            self.s.not_on_kernel.push(ev.to_string());
        }
    }

    /// The phase marker: what came before is dropped (counted as skipped).
    fn start_phase(&mut self, ts: Option<u64>) {
        let mut fresh = SideReader::new(&self.s.file, None);
        fresh.first_other = self.first_other.take();
        fresh.damon_bin_ns = self.damon_bin_ns;
        let old = std::mem::replace(self, fresh);
        let o = old.s;
        let skipped: u64 = o.events.values().sum::<u64>() + o.skipped_before_phase;
        self.s.lines = o.lines;
        self.s.malformed = o.malformed;
        self.s.malformed_examples = o.malformed_examples;
        self.s.lost_events = o.lost_events;
        self.s.other_events = o.other_events;
        self.s.other_lines = o.other_lines;
        self.s.not_on_kernel = o.not_on_kernel;
        self.s.skipped_before_phase = skipped;
        self.phase_start_ns = ts;
        self.s.phase = match ts {
            Some(t) => format!("marker at {:.6} s", t as f64 / 1e9),
            None => "marker".into(),
        };
    }

    fn close_run(&mut self, mut run: CompactionRun) {
        let kcompactd = run.comm.starts_with("kcompactd");
        let tried = if kcompactd {
            None
        } else {
            self.pending_try.get(&run.pid).copied()
        };
        let order = run
            .finished_order
            .or(tried.map(|t| t.0))
            .or(if kcompactd {
                self.pending_wake.get(&run.pid).copied()
            } else {
                None
            })
            .unwrap_or(-1);
        run.order = order;
        run.trigger = match (kcompactd, order, tried) {
            (true, -1, _) => "proactive",
            (true, _, _) => "kcompactd",
            (false, o, Some(_)) if o != -1 => "direct",
            _ => "manual",
        }
        .into();
        if run.trigger == "direct" {
            run.prio = tried.map(|t| t.1);
        }
        if run.zone.is_empty() {
            run.zone = format!("pfn:{:#x}", run.zone_start);
        }
        let s = &mut self.s;
        s.compaction_runs += 1;
        let tot = &mut s.totals;
        bump(tot, "compaction_runs", 1);
        bump(tot, &format!("compaction_runs_{}", run.trigger), 1);
        bump(tot, "compact_scanned", run.scanned());
        bump(tot, "compact_migrate_scanned", run.migrate_scanned);
        bump(tot, "compact_free_scanned", run.free_scanned);
        bump(tot, "compact_migrate_isolated", run.migrate_isolated);
        bump(tot, "compact_free_isolated", run.free_isolated);
        bump(tot, "compact_migrated", run.migrated);
        bump(tot, "compact_migrate_failed", run.migrate_failed);
        let mut h = |name: &str, k: &str| bump(s.hist.entry(name.into()).or_default(), k, 1);
        h("compact_by_status", &run.status);
        h("compact_by_order", &run.order.to_string());
        h("compact_by_trigger", &run.trigger);
        h("compact_scanned_per_run", &bucket(run.scanned()));
        h("compact_migrated_per_run", &bucket(run.migrated));
        if s.compaction.len() < MAX_EPISODES {
            s.compaction.push(run);
        }
    }

    fn close_reclaim(&mut self, mut e: ReclaimEpisode) {
        if e.kind == "kswapd" {
            e.reclaimed = e.shrink_reclaimed;
        }
        let s = &mut self.s;
        s.reclaim_episodes += 1;
        let tot = &mut s.totals;
        bump(tot, &format!("reclaim_episodes_{}", e.kind), 1);
        bump(tot, "reclaim_scanned", e.scanned);
        bump(tot, "reclaim_reclaimed", e.reclaimed);
        let mut h = |name: &str, k: &str| bump(s.hist.entry(name.into()).or_default(), k, 1);
        h("reclaim_by_kind", &e.kind);
        h("reclaim_by_order", &e.order.to_string());
        h("reclaim_scanned_per_episode", &bucket(e.scanned));
        if s.reclaim.len() < MAX_EPISODES {
            s.reclaim.push(e);
        }
    }

    /// Adds events the trace file's header says were lost.
    pub fn add_lost(&mut self, n: u64) {
        self.s.lost_events = self.s.lost_events.max(n);
    }

    /// [`SideReader::finish`], or an error naming the first line when the input has lines but
    /// not one that reads as an ftrace event line (not a trace: a result JSON, a spec, binary
    /// data; the malformed ones are named too).
    pub fn finish_checked(self) -> Result<SideSummary, String> {
        let no_event = self.s.events.is_empty()
            && self.s.other_events == 0
            && self.s.skipped_before_phase == 0
            && self.s.lost_events == 0
            && !self.s.phase.starts_with("marker");
        match (&self.first_other, no_event) {
            (Some(at), true) => Err(format!(
                "{at}: not an ftrace event line (\"comm-pid [cpu] ... ts: event: fields\"), and no line of the file is read as one ({} malformed{})",
                self.s.malformed,
                self.s.malformed_examples.first().map_or(String::new(), |m| format!(", the first at {m}"))
            )),
            _ => Ok(self.finish()),
        }
    }

    /// Closes what is still open and returns the summary, episodes by start.
    pub fn finish(mut self) -> SideSummary {
        let mut runs: Vec<CompactionRun> = self.open_runs.drain().map(|(_, r)| r).collect();
        runs.sort_by_key(|r| (r.start_ns, r.pid));
        for r in runs {
            self.close_run(r);
        }
        let mut eps: Vec<ReclaimEpisode> = self.open_reclaim.drain().map(|(_, e)| e).collect();
        eps.sort_by_key(|e| (e.start_ns, e.pid));
        for e in eps {
            self.close_reclaim(e);
        }
        let mut cum = 0;
        for b in &mut self.s.damon {
            cum += b.reclaimed;
            b.cum_reclaimed = cum;
        }
        self.s.compaction.sort_by_key(|r| (r.start_ns, r.pid));
        self.s.reclaim.sort_by_key(|e| (e.start_ns, e.pid));
        self.s
    }
}

fn reclaim_episode(pid: u32, comm: &str, t: u64, kind: &str, order: i32) -> ReclaimEpisode {
    ReclaimEpisode {
        pid,
        comm: comm.to_string(),
        start_ns: t,
        kind: kind.into(),
        order,
        status: UNFINISHED.into(),
        ..Default::default()
    }
}

/// `enum migratetype` names on S2 (no CMA): the numbers mm_page_alloc_extfrag prints.
fn migratetype_name(mt: i32) -> String {
    match mt {
        0 => "Unmovable".into(),
        1 => "Movable".into(),
        2 => "Reclaimable".into(),
        3 => "HighAtomic".into(),
        4 => "Isolate".into(),
        _ => mt.to_string(),
    }
}

/// Reads one side from a trace file or plain ftrace text (streamed).
pub fn read_side(path: &Path, from_ns: Option<u64>) -> Result<SideSummary, String> {
    read_side_binned(path, from_ns, 0)
}

/// [`read_side`] with the DAMON section's bins `damon_bin_ns` wide (0: [`DAMON_BIN_NS`]).
pub fn read_side_binned(path: &Path, from_ns: Option<u64>, damon_bin_ns: u64) -> Result<SideSummary, String> {
    let file = path.display().to_string();
    // An empty regular file is an empty side, not an error as for `trace info` and the
    // replay: the simulator's trace of a run in which the model emitted none of the diff
    // events is empty (its writer adds no header line), and the diff then says so row by row.
    fraglab_state::trace::check_regular_file(path, "trace").map_err(|e| e.to_string())?;
    if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        return Ok(SideReader::new(&file, from_ns)
            .with_damon_bin(damon_bin_ns)
            .finish());
    }
    let mut r = TraceReader::open_without_snapshot(path).map_err(|e| e.to_string())?;
    let container = r.is_container();
    let mut side = SideReader::new(&file, from_ns).with_damon_bin(damon_bin_ns);
    side.add_lost(r.header().lost_events);
    loop {
        let l = match r.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => return Err(format!("{e} (after line {})", r.line_no())),
        };
        let (no, off) = (r.line_no(), r.offset());
        side.line(&l, || {
            if container {
                format!("{file}: line {no} (TEXT section at byte offset {off})")
            } else {
                format!("{file}:{no} (byte offset {off})")
            }
        });
    }
    for e in r.missing_events() {
        side.not_on_kernel(e);
    }
    side.finish_checked()
}

/// A total on both sides.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct MetricRow {
    pub name: String,
    pub kernel: u64,
    pub sim: u64,
    /// sim / kernel (None when the kernel's is 0).
    pub ratio: Option<f64>,
    /// `max / max(min, 1)` (None: one side 0 and the other ≥ 2, an unbounded divergence).
    pub factor: Option<f64>,
}

/// One histogram bucket on both sides.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct HistRow {
    pub hist: String,
    pub bucket: String,
    pub kernel: u64,
    pub sim: u64,
}

/// Where an episode sequence first differs.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Divergence {
    /// `compact[i]` or `reclaim[i]`.
    pub label: String,
    pub index: usize,
    /// The episodes as the text lines print them (None: that side has no episode `index`).
    pub kernel: Option<String>,
    pub sim: Option<String>,
    pub kernel_t_ns: Option<u64>,
    pub sim_t_ns: Option<u64>,
    pub reasons: Vec<String>,
}

/// The diff of two sides.
#[derive(Clone, Debug, Serialize)]
pub struct TraceDiff {
    pub kernel: SideSummary,
    pub sim: SideSummary,
    pub totals: Vec<MetricRow>,
    pub hist: Vec<HistRow>,
    pub first_divergence: Option<Divergence>,
    pub first_compaction_divergence: Option<Divergence>,
    pub first_reclaim_divergence: Option<Divergence>,
    /// The first DAMON bin whose bytes applied or pages reclaimed differ.
    pub first_damon_divergence: Option<Divergence>,
    pub largest_divergence: Option<MetricRow>,
}

/// How to diff.
#[derive(Clone, Debug, Default)]
pub struct DiffOptions {
    /// Compare the kernel trace from this timestamp (ns of its trace clock).
    pub kernel_from_ns: Option<u64>,
    pub sim_from_ns: Option<u64>,
    /// Episodes listed side by side (and kept in the JSON) per kind; 0 = all kept.
    pub episodes: usize,
    /// The DAMON section's bin width in ns (0: [`DAMON_BIN_NS`]).
    pub damon_bin_ns: u64,
}

/// `max / max(min, 1)`; None when that is unbounded (one side 0, the other ≥ 2).
pub fn factor(a: u64, b: u64) -> Option<f64> {
    let (lo, hi) = (a.min(b), a.max(b));
    if hi == 0 {
        return Some(1.0);
    }
    if lo == 0 && hi >= 2 {
        return None;
    }
    Some(hi as f64 / lo.max(1) as f64)
}

fn diverges(a: u64, b: u64) -> bool {
    factor(a, b).is_none_or(|f| f > DIVERGENCE_RATIO)
}

fn magnitude(reasons: &mut Vec<String>, what: &str, k: u64, s: u64) {
    if diverges(k, s) {
        let f = factor(k, s).map_or("inf".to_string(), |f| format!("{f:.2}"));
        reasons.push(format!("{what} kernel={k} sim={s} (x{f})"));
    }
}

fn same(reasons: &mut Vec<String>, what: &str, k: &str, s: &str) {
    if k != s {
        reasons.push(format!("{what} kernel={k} sim={s}"));
    }
}

/// An episode the diff pairs in start order: a compaction run or a reclaim episode.
trait Episode {
    /// The label's stem (`compact`, `reclaim`) and the words of a missing one.
    const LABEL: &'static str;
    const MISSING: &'static str;
    /// Pushes why `self` (the kernel's) and `other` (the simulator's) differ.
    fn differences(&self, other: &Self, reasons: &mut Vec<String>);
    fn text(&self) -> String;
    fn start_ns(&self) -> u64;
}

impl Episode for CompactionRun {
    const LABEL: &'static str = "compact";
    const MISSING: &'static str = "run";
    fn differences(&self, b: &Self, reasons: &mut Vec<String>) {
        same(reasons, "trigger", &self.trigger, &b.trigger);
        same(reasons, "order", &self.order.to_string(), &b.order.to_string());
        same(reasons, "status", &self.status, &b.status);
        magnitude(reasons, "scanned", self.scanned(), b.scanned());
        magnitude(reasons, "isolated", self.migrate_isolated, b.migrate_isolated);
        magnitude(reasons, "migrated", self.migrated, b.migrated);
        magnitude(reasons, "failed", self.migrate_failed, b.migrate_failed);
    }
    fn text(&self) -> String {
        CompactionRun::text(self)
    }
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
}

impl Episode for ReclaimEpisode {
    const LABEL: &'static str = "reclaim";
    const MISSING: &'static str = "episode";
    fn differences(&self, b: &Self, reasons: &mut Vec<String>) {
        same(reasons, "kind", &self.kind, &b.kind);
        same(reasons, "order", &self.order.to_string(), &b.order.to_string());
        same(reasons, "status", &self.status, &b.status);
        magnitude(reasons, "scanned", self.scanned, b.scanned);
        magnitude(reasons, "reclaimed", self.reclaimed, b.reclaimed);
    }
    fn text(&self) -> String {
        ReclaimEpisode::text(self)
    }
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
}

impl Episode for DamonBin {
    const LABEL: &'static str = "damon";
    const MISSING: &'static str = "bin";
    fn differences(&self, b: &Self, reasons: &mut Vec<String>) {
        magnitude(reasons, "bytes applied", self.bytes, b.bytes);
        magnitude(reasons, "pages reclaimed", self.reclaimed, b.reclaimed);
    }
    fn text(&self) -> String {
        DamonBin::text(self)
    }
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
}

/// The first pair of episodes (in start order on each side) whose kind, order or status
/// differ, or whose magnitudes differ by more than [`DIVERGENCE_RATIO`]; one side running out
/// first is a divergence too.
fn first_divergence<E: Episode>(k: &[E], s: &[E]) -> Option<Divergence> {
    for i in 0..k.len().max(s.len()) {
        let (a, b) = (k.get(i), s.get(i));
        let mut reasons = Vec::new();
        match (a, b) {
            (Some(a), Some(b)) => a.differences(b, &mut reasons),
            (Some(_), None) => reasons.push(format!("the sim has no such {}", E::MISSING)),
            (None, Some(_)) => reasons.push(format!("the kernel has no such {}", E::MISSING)),
            (None, None) => unreachable!(),
        }
        if !reasons.is_empty() {
            return Some(Divergence {
                label: format!("{}[{i}]", E::LABEL),
                index: i,
                kernel: a.map(Episode::text),
                sim: b.map(Episode::text),
                kernel_t_ns: a.map(Episode::start_ns),
                sim_t_ns: b.map(Episode::start_ns),
                reasons,
            });
        }
    }
    None
}

/// Sort key of a histogram bucket or order: numeric where it starts with a number.
fn bucket_key(b: &str) -> (i64, String) {
    let num: String = b
        .chars()
        .enumerate()
        .take_while(|(i, c)| c.is_ascii_digit() || (*i == 0 && *c == '-'))
        .map(|(_, c)| c)
        .collect();
    (num.parse().unwrap_or(i64::MAX), b.to_string())
}

/// The diff of two side summaries.
pub fn diff(mut kernel: SideSummary, mut sim: SideSummary, episodes: usize) -> TraceDiff {
    let mut names: Vec<&String> = kernel.totals.keys().chain(sim.totals.keys()).collect();
    names.sort();
    names.dedup();
    let totals: Vec<MetricRow> = names
        .into_iter()
        .map(|n| {
            let (k, s) = (
                kernel.totals.get(n).copied().unwrap_or(0),
                sim.totals.get(n).copied().unwrap_or(0),
            );
            MetricRow {
                name: n.clone(),
                kernel: k,
                sim: s,
                ratio: (k > 0).then(|| s as f64 / k as f64),
                factor: factor(k, s),
            }
        })
        .collect();
    let largest_divergence = totals
        .iter()
        .filter(|r| r.kernel.max(r.sim) > 0)
        .max_by(|a, b| {
            let key = |r: &MetricRow| (r.factor.unwrap_or(f64::INFINITY), r.kernel.max(r.sim));
            let (ka, kb) = (key(a), key(b));
            ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1))
        })
        .filter(|r| r.factor.is_none_or(|f| f > 1.0))
        .cloned();
    let mut hist = Vec::new();
    let mut hnames: Vec<&String> = kernel.hist.keys().chain(sim.hist.keys()).collect();
    hnames.sort();
    hnames.dedup();
    for h in hnames {
        let empty = BTreeMap::new();
        let (kh, sh) = (
            kernel.hist.get(h).unwrap_or(&empty),
            sim.hist.get(h).unwrap_or(&empty),
        );
        let mut buckets: Vec<&String> = kh.keys().chain(sh.keys()).collect();
        buckets.sort_by_key(|b| bucket_key(b));
        buckets.dedup();
        for b in buckets {
            hist.push(HistRow {
                hist: h.clone(),
                bucket: b.clone(),
                kernel: kh.get(b).copied().unwrap_or(0),
                sim: sh.get(b).copied().unwrap_or(0),
            });
        }
    }
    let fc = first_divergence(&kernel.compaction, &sim.compaction);
    let fr = first_divergence(&kernel.reclaim, &sim.reclaim);
    // The bins are the same time windows on both sides: the shorter list gets empty bins.
    let bin_ns = [&kernel.damon, &sim.damon]
        .iter()
        .find_map(|v| v.get(1).map(|b| b.start_ns))
        .unwrap_or(DAMON_BIN_NS);
    let n = kernel.damon.len().max(sim.damon.len());
    for side in [&mut kernel.damon, &mut sim.damon] {
        let cum = side.last().map_or(0, |b| b.cum_reclaimed);
        while side.len() < n {
            let index = side.len();
            side.push(DamonBin {
                index,
                start_ns: index as u64 * bin_ns,
                cum_reclaimed: cum,
                ..Default::default()
            });
        }
    }
    let fd = first_divergence(&kernel.damon, &sim.damon);
    let t = |d: &Divergence| d.kernel_t_ns.or(d.sim_t_ns).unwrap_or(u64::MAX);
    let first_divergence = [&fc, &fr, &fd]
        .into_iter()
        .flatten()
        .min_by_key(|d| t(d))
        .cloned();
    if episodes > 0 {
        kernel.compaction.truncate(episodes);
        sim.compaction.truncate(episodes);
        kernel.reclaim.truncate(episodes);
        sim.reclaim.truncate(episodes);
        kernel.damon.truncate(episodes);
        sim.damon.truncate(episodes);
    }
    TraceDiff {
        kernel,
        sim,
        totals,
        hist,
        first_divergence,
        first_compaction_divergence: fc,
        first_reclaim_divergence: fr,
        first_damon_divergence: fd,
        largest_divergence,
    }
}

/// Reads both files and diffs them.
pub fn diff_files(kernel: &Path, sim: &Path, opts: &DiffOptions) -> Result<TraceDiff, String> {
    let k = read_side_binned(kernel, opts.kernel_from_ns, opts.damon_bin_ns)?;
    let s = read_side_binned(sim, opts.sim_from_ns, opts.damon_bin_ns)?;
    Ok(diff(k, s, opts.episodes))
}

fn ratio_text(r: &MetricRow) -> String {
    match (r.ratio, r.factor) {
        (Some(x), _) => format!("ratio={x:.3}"),
        (None, _) if r.sim == 0 => "ratio=-".into(),
        (None, _) => "ratio=inf".into(),
    }
}

fn divergence_line(label: &str, d: &Option<Divergence>) -> String {
    match d {
        None => format!("{label}: none\n"),
        Some(d) => format!(
            "{label}: {} t(kernel)={} t(sim)={}: {}\n",
            d.label,
            d.kernel_t_ns
                .map_or("-".into(), |t| format!("+{:.6}", t as f64 / 1e9)),
            d.sim_t_ns
                .map_or("-".into(), |t| format!("+{:.6}", t as f64 / 1e9)),
            d.reasons.join("; ")
        ),
    }
}

/// The text form: one labelled line per fact (`input`, `malformed`, `total`, `hist`,
/// `compact[i]`, `reclaim[i]`, `damon[i]`, `first divergence`, `largest divergence`).
pub fn render_text(d: &TraceDiff) -> String {
    let mut o = String::new();
    for (side, s) in [("kernel", &d.kernel), ("sim", &d.sim)] {
        let _ = writeln!(
            o,
            "input {side}: file={} lines={} diff_events={} malformed={} lost_events={} other_events={} other_lines={} orphan_events={} phase={} skipped_before_phase={} compaction_runs={} reclaim_episodes={}",
            s.file,
            s.lines,
            s.events.values().sum::<u64>(),
            s.malformed,
            s.lost_events,
            s.other_events,
            s.other_lines,
            s.orphan_events,
            s.phase.replace(' ', "_"),
            s.skipped_before_phase,
            s.compaction_runs,
            s.reclaim_episodes
        );
        for m in &s.malformed_examples {
            let _ = writeln!(o, "malformed {side}: {m}");
        }
    }
    for r in &d.totals {
        let f = r.factor.map_or("inf".into(), |f| format!("{f:.2}"));
        let _ = writeln!(
            o,
            "total {}: kernel={} sim={} {} factor=x{f}",
            r.name,
            r.kernel,
            r.sim,
            ratio_text(r)
        );
    }
    for h in &d.hist {
        let _ = writeln!(
            o,
            "hist {} {}: kernel={} sim={}",
            h.hist, h.bucket, h.kernel, h.sim
        );
    }
    let n = d.kernel.compaction.len().max(d.sim.compaction.len());
    for i in 0..n {
        let (a, b) = (d.kernel.compaction.get(i), d.sim.compaction.get(i));
        let _ = writeln!(
            o,
            "compact[{i}]: kernel: {} | sim: {}",
            a.map_or("-".into(), |r| r.text()),
            b.map_or("-".into(), |r| r.text())
        );
    }
    let n = d.kernel.reclaim.len().max(d.sim.reclaim.len());
    for i in 0..n {
        let (a, b) = (d.kernel.reclaim.get(i), d.sim.reclaim.get(i));
        let _ = writeln!(
            o,
            "reclaim[{i}]: kernel: {} | sim: {}",
            a.map_or("-".into(), |r| r.text()),
            b.map_or("-".into(), |r| r.text())
        );
    }
    let n = d.kernel.damon.len().max(d.sim.damon.len());
    for i in 0..n {
        let (a, b) = (d.kernel.damon.get(i), d.sim.damon.get(i));
        let start = a.or(b).map_or(0, |x| x.start_ns);
        let _ = writeln!(
            o,
            "damon[{i}] +{:.0}s: kernel: {} | sim: {}",
            start as f64 / 1e9,
            a.map_or("-".into(), |x| x.text()),
            b.map_or("-".into(), |x| x.text())
        );
    }
    for (side, s) in [("kernel", &d.kernel), ("sim", &d.sim)] {
        for e in &s.not_on_kernel {
            let _ = writeln!(o, "not recorded {side}: {e} (not on its kernel)");
        }
    }
    for (label, dv) in [
        ("first compaction divergence", &d.first_compaction_divergence),
        ("first reclaim divergence", &d.first_reclaim_divergence),
        ("first damon divergence", &d.first_damon_divergence),
    ] {
        if let Some(x) = dv {
            for (side, t) in [("kernel", &x.kernel), ("sim", &x.sim)] {
                let _ = writeln!(o, "{label} {side}: {} {}", x.label, t.as_deref().unwrap_or("-"));
            }
        }
    }
    o.push_str(&divergence_line(
        "first compaction divergence",
        &d.first_compaction_divergence,
    ));
    o.push_str(&divergence_line(
        "first reclaim divergence",
        &d.first_reclaim_divergence,
    ));
    o.push_str(&divergence_line(
        "first damon divergence",
        &d.first_damon_divergence,
    ));
    o.push_str(&divergence_line("first divergence", &d.first_divergence));
    match &d.largest_divergence {
        None => o.push_str("largest divergence: none\n"),
        Some(r) => {
            let f = r.factor.map_or("inf".into(), |f| format!("{f:.2}"));
            let _ = writeln!(
                o,
                "largest divergence: total {} kernel={} sim={} {} factor=x{f}",
                r.name,
                r.kernel,
                r.sim,
                ratio_text(r)
            );
        }
    }
    o
}

#[cfg(test)]
mod tests;
