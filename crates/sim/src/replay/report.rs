//! What a replay reports, per column (the recorded run, then one per simulated policy): extfrag
//! events, compaction work, the end state and the replay's own counts; and the side-by-side
//! table in `fraglab compare`'s layout (`compare::format_table`, the recorded column first, so
//! the percentages are each policy's change against the recording).

use std::collections::BTreeMap;

use fraglab_mm::trace::{TraceEvent, PAGEBLOCK_ORDER};
use fraglab_mm::types::{MIGRATE_TYPES, NR_PAGE_ORDERS};
use fraglab_spec::result::{CompareReport, CompareRow};
use serde::{Deserialize, Serialize};

/// kmem:mm_page_alloc_extfrag events (docs/model §6.3–§6.5, `trace_mm_page_alloc_extfrag`
/// in `try_to_claim_block`/`__rmqueue_fallback` → `steal_suitable_fallback`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtfragStats {
    pub events: u64,
    /// `fallback_order < pageblock_order` (the event's `fragmenting` field).
    pub fragmenting: u64,
    /// `change_ownership=1`: the block was claimed for the requested type.
    pub claims: u64,
    /// `change_ownership=0`: a chunk was stolen, the block kept its type.
    pub steals: u64,
    /// Events by fallback order (0..=10).
    pub by_fallback_order: [u64; NR_PAGE_ORDERS],
    /// Events by "alloc->fallback" migratetype names (`Unmovable->Movable`).
    pub by_types: BTreeMap<String, u64>,
}

/// A migratetype number as the trace prints it → its name (numbers the model has no name for,
/// e.g. CMA/Isolate numbering with CONFIG_CMA, print as `mtN`).
fn mt_name(mt: i32) -> String {
    match mt {
        0 => "Unmovable".into(),
        1 => "Movable".into(),
        2 => "Reclaimable".into(),
        3 => "HighAtomic".into(),
        n => format!("mt{n}"),
    }
}

impl ExtfragStats {
    /// Counts one event (other events are ignored).
    pub fn add(&mut self, ev: &TraceEvent) {
        if let TraceEvent::MmPageAllocExtfrag {
            fallback_order,
            alloc_migratetype,
            fallback_migratetype,
            change_ownership,
            ..
        } = *ev
        {
            self.events += 1;
            if fallback_order < PAGEBLOCK_ORDER {
                self.fragmenting += 1;
            }
            if change_ownership {
                self.claims += 1;
            } else {
                self.steals += 1;
            }
            if let Some(n) = self.by_fallback_order.get_mut(fallback_order.max(0) as usize) {
                *n += 1;
            }
            *self
                .by_types
                .entry(format!(
                    "{}->{}",
                    mt_name(alloc_migratetype),
                    mt_name(fallback_migratetype)
                ))
                .or_default() += 1;
        }
    }

    /// The fragmenting share in percent (0 without events).
    pub fn fragmenting_pct(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.fragmenting as f64 * 100.0 / self.events as f64
        }
    }
}

/// Compaction work. Recorded: from the trace's compaction events (`None` when the trace did
/// not enable them); simulated: the model's /proc/vmstat counters over the replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompactionStats {
    /// Simulated `compact_stall`; recorded: mm_compaction_try_to_compact_pages events (one per
    /// `try_to_compact_pages` call; the kernel does not count a stall when every zone was
    /// skipped, so this is an upper bound).
    pub stalls: Option<u64>,
    /// Simulated `compact_success` / `compact_fail`; not in the trace (n/a recorded).
    pub success: Option<u64>,
    pub fail: Option<u64>,
    /// `compact_migrate_scanned`; recorded: the `nr_scanned` of
    /// mm_compaction_isolate_migratepages.
    pub migrate_scanned: Option<u64>,
    /// `compact_free_scanned`; recorded: the `nr_scanned` of mm_compaction_isolate_freepages and
    /// mm_compaction_fast_isolate_freepages.
    pub free_scanned: Option<u64>,
    /// Simulated `pgmigrate_success` (the model migrates for compaction only); recorded: the
    /// `nr_migrated` of mm_compaction_migratepages.
    pub migrated: Option<u64>,
}

impl CompactionStats {
    /// Recorded: counts one event.
    pub fn add_recorded(&mut self, ev: &TraceEvent) {
        let bump = |o: &mut Option<u64>, n: u64| *o = Some(o.unwrap_or(0) + n);
        match *ev {
            TraceEvent::MmCompactionTryToCompactPages { .. } => bump(&mut self.stalls, 1),
            TraceEvent::MmCompactionIsolate { free, nr_scanned, .. } => {
                if free {
                    bump(&mut self.free_scanned, nr_scanned)
                } else {
                    bump(&mut self.migrate_scanned, nr_scanned)
                }
            }
            TraceEvent::MmCompactionFastIsolateFreepages { nr_scanned, .. } => {
                bump(&mut self.free_scanned, nr_scanned)
            }
            TraceEvent::MmCompactionMigratepages { nr_migrated, .. } => bump(&mut self.migrated, nr_migrated),
            _ => {}
        }
    }

    /// Recorded, at the end: a trace whose events include compaction reports 0 for what it did
    /// not see; one without them (or a plain text file that showed none) keeps n/a.
    pub fn settle_recorded(&mut self, compaction_enabled: bool) {
        if compaction_enabled {
            for o in [
                &mut self.stalls,
                &mut self.migrate_scanned,
                &mut self.free_scanned,
                &mut self.migrated,
            ] {
                o.get_or_insert(0);
            }
        }
    }
}

/// The end state, summed over zones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EndState {
    /// Pageblocks per migratetype (Unmovable, Movable, Reclaimable, HighAtomic, Isolate).
    pub blocks_by_type: Option<[u64; MIGRATE_TYPES]>,
    /// Pageblocks holding pages of another mobility than their type (simulated: the model's
    /// census; recorded: pagetypeinfo's "Number of mixed blocks", printed only with page_owner).
    pub mixed_blocks: Option<u64>,
    /// Free pages (not chunks) per order.
    pub free_pages_by_order: Option<[u64; NR_PAGE_ORDERS]>,
}

/// What the replay itself met: every mismatch between the recording and the simulation is
/// counted, never fatal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayCounts {
    /// Event lines read (any event), lines that were not an event the parser knows (skipped).
    pub lines: u64,
    pub unknown_lines: u64,
    /// Events the kernel dropped, from trace_pipe's `CPU:N [LOST M EVENTS]` lines (their
    /// allocations and frees are missing: expect unmatched frees and lost frees).
    pub lost_events: u64,
    /// Compaction lines the strict parser refused, read leniently for their counts (e.g. the
    /// kernel's mm_compaction_fast_isolate_freepages with bit 63 set in its range start).
    #[serde(default)]
    pub lenient_lines: u64,
    /// Known events that the replay does not drive (zone_locked, pcpu_drain, vmscan, ...).
    pub other_events: u64,
    /// mm_page_alloc with a page, replayed; and those that failed in the simulator.
    pub allocs: u64,
    pub sim_failed_allocs: u64,
    /// The simulator's failed allocations by `order ORDER gfp GFP_FLAGS` (the flags as the
    /// recording printed them), so that a column's failures can be traced to their callers.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sim_failed_by: std::collections::BTreeMap<String, u64>,
    /// mm_page_alloc with a NULL page (failed in the recording; not replayed).
    pub recorded_failed_allocs: u64,
    /// mm_page_free / mm_page_free_batched lines.
    pub frees: u64,
    pub frees_batched: u64,
    /// mm_page_free_batched lines whose page its mm_page_free (from `free_pages_prepare`)
    /// had already freed: the same free seen twice, not replayed again.
    #[serde(default)]
    pub batched_duplicates: u64,
    /// Frees of a pfn no replayed allocation covers (allocated before the recording began,
    /// through a path without mm_page_alloc such as the bulk allocator, or lost).
    pub unmatched_frees: u64,
    /// Frees of a part of a recorded allocation (after `split_page`): the simulated folio was
    /// split and that part freed.
    pub partial_frees: u64,
    /// Frees whose order does not match the allocation they hit (the allocation is freed).
    pub order_mismatches: u64,
    /// Frees of folios the simulator had already freed (reclaim, OOM kill).
    pub frees_of_reclaimed: u64,
    /// Allocations at a pfn the recording still held allocated (a free was lost): the old
    /// simulated folio is freed first.
    pub lost_frees: u64,
    /// Snapshot folios freed because the recording allocated over them (freed before the first
    /// line, or during the snapshot's read, or a page the reconstruction placed there).
    #[serde(default)]
    pub snapshot_overlaps: u64,
    /// Folios of a snapshot boot freed by the recording (tracked by folio id).
    pub snapshot_frees: u64,
    /// Replayed allocations still allocated at the end, and their pages.
    pub never_freed: u64,
    pub never_freed_pages: u64,
    /// OOM kills in the simulator; kswapd and kcompactd wake-ups it handled.
    pub oom_kills: u64,
    pub kswapd_wakes: u64,
    pub kcompactd_wakes: u64,
    /// kcompactd timeouts that ran its loop (proactive checks, §26.2), from the recorded time.
    pub kcompactd_timer_runs: u64,
}

/// One column.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayColumn {
    pub label: String,
    pub extfrag: ExtfragStats,
    /// False for a recording whose header lists its events without
    /// kmem:mm_page_alloc_extfrag: its extfrag rows are n/a (a plain text file, whose events
    /// are unknown, counts what it holds).
    #[serde(default = "measured")]
    pub extfrag_measured: bool,
    pub compaction: CompactionStats,
    pub end_state: EndState,
    /// The replay's counts (`None` for the recorded column).
    pub counts: Option<ReplayCounts>,
    /// Fragmentation blame (issue 37, `[run] blame` in the policy's spec): per source, `COMM
    /// GFP_FLAGS` of the recorded allocations, kernel threads and `boot`. `None` for the
    /// recorded column and without blame (and then absent from the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame: Option<Vec<fraglab_spec::result::BlameSource>>,
}

fn measured() -> bool {
    true
}

/// The whole report: the recorded column first, then one per policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    pub trace: String,
    /// The recording's span (first to last event), ns.
    pub duration_ns: u64,
    pub columns: Vec<ReplayColumn>,
    /// The same figures as rows in compare's layout.
    pub table: CompareReport,
}

const MT_NAMES: [&str; MIGRATE_TYPES] = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"];

/// The rows: each metric with one value per column (`None` = n/a).
fn rows(cols: &[ReplayColumn]) -> Vec<(String, Vec<Option<f64>>)> {
    let mut rows: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    let mut row = |name: String, f: &dyn Fn(&ReplayColumn) -> Option<f64>| {
        rows.push((name, cols.iter().map(f).collect()));
    };
    let ef = |c: &ReplayColumn, v: f64| c.extfrag_measured.then_some(v);
    row("extfrag events".into(), &|c| ef(c, c.extfrag.events as f64));
    row("extfrag fragmenting".into(), &|c| {
        ef(c, c.extfrag.fragmenting as f64)
    });
    row("extfrag fragmenting %".into(), &|c| {
        ef(c, c.extfrag.fragmenting_pct())
    });
    row("extfrag claims".into(), &|c| ef(c, c.extfrag.claims as f64));
    row("extfrag steals".into(), &|c| ef(c, c.extfrag.steals as f64));
    for o in 0..NR_PAGE_ORDERS {
        if cols.iter().any(|c| c.extfrag.by_fallback_order[o] > 0) {
            row(format!("extfrag fallback order {o}"), &|c| {
                ef(c, c.extfrag.by_fallback_order[o] as f64)
            });
        }
    }
    let mut pairs: Vec<&String> = cols.iter().flat_map(|c| c.extfrag.by_types.keys()).collect();
    pairs.sort();
    pairs.dedup();
    for p in pairs {
        row(format!("extfrag {p}"), &|c| {
            ef(c, c.extfrag.by_types.get(p).copied().unwrap_or(0) as f64)
        });
    }
    type Pick = fn(&CompactionStats) -> Option<u64>;
    let compaction: [(&str, Pick); 6] = [
        ("compact stalls", |s| s.stalls),
        ("compact success", |s| s.success),
        ("compact fail", |s| s.fail),
        ("compact migrate scanned", |s| s.migrate_scanned),
        ("compact free scanned", |s| s.free_scanned),
        ("compact migrated", |s| s.migrated),
    ];
    for (name, f) in compaction {
        row(name.into(), &|c| f(&c.compaction).map(|v| v as f64));
    }
    for (t, name) in MT_NAMES.iter().enumerate() {
        row(format!("end blocks {name}"), &|c| {
            c.end_state.blocks_by_type.map(|b| b[t] as f64)
        });
    }
    row("end mixed blocks".into(), &|c| {
        c.end_state.mixed_blocks.map(|v| v as f64)
    });
    for o in 0..NR_PAGE_ORDERS {
        row(format!("end free pages order {o}"), &|c| {
            c.end_state.free_pages_by_order.map(|f| f[o] as f64)
        });
    }
    type PickCount = fn(&ReplayCounts) -> u64;
    let counts: [(&str, PickCount); 19] = [
        ("replay allocs", |c| c.allocs),
        ("replay frees", |c| {
            c.frees + c.frees_batched - c.batched_duplicates
        }),
        ("replay sim failed allocs", |c| c.sim_failed_allocs),
        ("replay recorded failed allocs", |c| c.recorded_failed_allocs),
        ("replay unmatched frees", |c| c.unmatched_frees),
        ("replay batched duplicates", |c| c.batched_duplicates),
        ("replay partial frees", |c| c.partial_frees),
        ("replay order mismatches", |c| c.order_mismatches),
        ("replay frees of reclaimed", |c| c.frees_of_reclaimed),
        ("replay lost frees", |c| c.lost_frees),
        ("replay snapshot frees", |c| c.snapshot_frees),
        ("replay snapshot overlaps", |c| c.snapshot_overlaps),
        ("replay never freed", |c| c.never_freed),
        ("replay unknown lines", |c| c.unknown_lines),
        ("replay lenient lines", |c| c.lenient_lines),
        ("replay other events", |c| c.other_events),
        ("replay lost events", |c| c.lost_events),
        ("replay oom kills", |c| c.oom_kills),
        ("replay kcompactd timer runs", |c| c.kcompactd_timer_runs),
    ];
    for (name, f) in counts {
        row(name.into(), &|c| c.counts.as_ref().map(|n| f(n) as f64));
    }
    rows
}

/// The columns as a compare table (the recorded column is the baseline).
pub fn table(cols: &[ReplayColumn]) -> CompareReport {
    let rows = rows(cols)
        .into_iter()
        .map(|(metric, vals)| {
            let unmeasured: Vec<usize> = (0..vals.len()).filter(|&i| vals[i].is_none()).collect();
            let values: Vec<f64> = vals.iter().map(|v| v.unwrap_or(0.0)).collect();
            let base = vals.first().copied().flatten();
            CompareRow {
                metric,
                stat: String::new(),
                change_pct: vals
                    .iter()
                    .enumerate()
                    .map(|(i, v)| match (i, base, v) {
                        (0, _, _) => None,
                        (_, Some(b), Some(v)) if b != 0.0 => Some((v - b) * 100.0 / b),
                        _ => None,
                    })
                    .collect(),
                significant: vec![false; values.len()],
                per_run: Vec::new(),
                values,
                unmeasured,
            }
        })
        .collect();
    CompareReport {
        configs: cols.iter().map(|c| c.label.clone()).collect(),
        runs: 1,
        rows,
        scale: Vec::new(),
    }
}

/// Recorded end state from the trace header's /proc files at the end: pagetypeinfo's "Number of
/// blocks type" (and "Number of mixed blocks" when page_owner printed it), buddyinfo's free
/// chunks per order (× 2^order pages). Sections that are missing or unreadable stay n/a.
pub fn recorded_end_state(proc_end: &BTreeMap<String, String>) -> EndState {
    let mut end = EndState::default();
    if let Some(pti) = proc_end.get("pagetypeinfo") {
        end.blocks_by_type = block_section(pti, "Number of blocks type").map(|(b, _)| b);
        end.mixed_blocks = block_section(pti, "Number of mixed blocks").map(|(_, total)| total);
    }
    if let Some(bi) = proc_end.get("buddyinfo") {
        end.free_pages_by_order = buddyinfo_pages(bi);
    }
    end
}

/// A pagetypeinfo block-count section: its header line names the columns, each following
/// `Node N, zone NAME v v v` line adds its counts. Returns the sums by the model's migratetype
/// order (columns it does not know, e.g. CMA, only in the total) and the total.
fn block_section(text: &str, title: &str) -> Option<([u64; MIGRATE_TYPES], u64)> {
    let mut lines = text.lines();
    let header = lines.find(|l| l.starts_with(title))?;
    let names: Vec<&str> = header[title.len()..].split_whitespace().collect();
    let mut out = [0u64; MIGRATE_TYPES];
    let mut total = 0u64;
    let mut seen = false;
    for l in lines {
        let Some(rest) = l.strip_prefix("Node ") else {
            break;
        };
        let (_, after) = rest.split_once("zone")?;
        let mut words = after.split_whitespace();
        words.next()?; // the zone's name
        let vals: Vec<u64> = words.map(|w| w.parse().ok()).collect::<Option<_>>()?;
        if vals.len() != names.len() {
            return None;
        }
        for (n, v) in names.iter().zip(vals) {
            total += v;
            if let Some(t) = MT_NAMES.iter().position(|m| m == n) {
                out[t] += v;
            }
        }
        seen = true;
    }
    seen.then_some((out, total))
}

/// /proc/buddyinfo → free pages per order, summed over zones.
fn buddyinfo_pages(text: &str) -> Option<[u64; NR_PAGE_ORDERS]> {
    let mut out = [0u64; NR_PAGE_ORDERS];
    let mut seen = false;
    for l in text.lines().filter(|l| l.starts_with("Node ")) {
        let (_, after) = l.split_once("zone")?;
        let mut words = after.split_whitespace();
        words.next()?;
        for (o, w) in words.enumerate() {
            let n: u64 = w.parse().ok()?;
            *out.get_mut(o)? += n << o;
        }
        seen = true;
    }
    seen.then_some(out)
}
