//! Replay (issue 21 item 5): a recorded allocation stream (ftrace text of kmem:mm_page_alloc,
//! mm_page_free, mm_page_free_batched, with mm_page_alloc_extfrag and the compaction events for
//! the recorded side of the report) driven through the simulated allocator, under one or more
//! policies, reported beside the recording.
//!
//! What is replayed, event by event in file order (docs/model §15 for the event formats):
//!
//! * Each line sets the task context: `mm.cur.pid`/`comm` from the line, the CPU (modulo the
//!   simulated CPU count, so a recording from a larger machine still replays), and the time:
//!   `mm.cur.now_ns` = the line's timestamp minus the first line's, never going backwards
//!   (trace_pipe interleaves the per-CPU buffers, so timestamps may step back a little).
//! * `mm_page_alloc` with a page: the same order and gfp flags go through the model's allocator
//!   (`Mm::alloc_folio` → `__alloc_pages`, fast and slow path: placement, fallbacks, reclaim,
//!   compaction are the simulator's). The folio's kind follows the gfp's migratetype
//!   (`FolioKind::from_gfp`): movable → anonymous (on the LRU and migratable by compaction,
//!   not reclaimable while the machine has no swap — so reclaim cannot free what the recording
//!   frees later; with `[machine] swap` it may, and the later free is counted as a free of a
//!   reclaimed folio), reclaimable → slab (not declared shrinkable, so never freed by the
//!   shrinker), unmovable → kernel memory. The recorded pfn is remembered → (folio id, content
//!   token): the simulated folio sits elsewhere, and compaction may move it (the id follows it).
//! * `mm_page_alloc` with a NULL page (failed in the recording): counted, not replayed (the
//!   recorded attempt's reclaim and compaction are not reproduced).
//! * `mm_page_free` (order) / `mm_page_free_batched` (order 0, `free_unref_folios`): the
//!   allocation covering the recorded pfn. On 6.18 a batched free emits both: mm_page_free
//!   from `free_pages_prepare`, then mm_page_free_batched before `free_frozen_page_commit`
//!   (measured on this machine: the batched lines matched nothing once their mm_page_free had
//!   freed the page, as many as there were batched lines). So a batched line frees only a
//!   pfn still live (its mm_page_free lost or not enabled) and is otherwise counted as a
//!   duplicate, not as an unmatched free. Its head with its order → the folio is freed
//!   (`Mm::free_folio`). A part of it (a non-compound high-order allocation freed piecewise
//!   after `split_page`, or the tail pages `___free_pages` frees when the head's reference
//!   was not the last) → the simulated folio is split into order-0 pieces
//!   (`Mm::split_folio`; simplified: the kernel's pages are never a folio, the model's
//!   `thp_split_page` counts an order-9 split) and the matching pieces are freed.
//! * A free no replayed allocation covers is counted (allocated before the recording started,
//!   by a path without mm_page_alloc such as `alloc_pages_bulk`, or a lost event), as are frees
//!   of folios the simulator freed meanwhile (reclaim, OOM kill: the token no longer matches),
//!   allocations at a pfn the recording still held (a lost free: the old folio is freed first),
//!   and allocations never freed. Lines of other events are skipped and counted; a line of an
//!   event the replay reads that does not parse is an error naming the file and line.
//! * Boot from a snapshot (`--snapshot STATE`, else the start snapshot a trace file embeds, else
//!   the policy's `[machine]`; `crate::restore`, docs/model §30.5): every folio the machine
//!   boots with is an allocation the recording may free, at its boot pfn (the recording's pfns
//!   are the snapshot's), tracked by folio id and token so compaction may move it meanwhile.
//!   A recorded allocation over a snapshot folio frees that folio first (counted apart: the
//!   snapshot saw it allocated, or the reconstruction put it there). The recorder's own
//!   allocations (`fraglab host record`'s pid) are in the stream and replayed like any other.
//! * Wake-ups: the model's `wakeup_kswapd`/`wakeup_kcompactd` requests (`mm.outbox.wakeups`)
//!   run the daemon at once, before the next recorded event: kswapd until it sleeps
//!   (`kswapd_until_sleep`, naps cut to their end), kcompactd until it waits
//!   (`kcompactd_until_wait`). No clock advances during their work (the timeless engine's
//!   treatment: the `kswapd` and `kcompactd` ops). kcompactd's timer follows the recorded
//!   time: whenever it advances, the elapsed whole milliseconds go to `kcompactd_tick`, so the
//!   500 ms proactive check (and its 32 s back-off, §26.2–§26.3) runs as often as the
//!   recording's span allows; a gap longer than the timeout fires it once.
//! * OOM kills free the victim's anonymous folios at once (`out_of_memory`); the victim is the
//!   recorded pid with the most replayed movable memory.

pub mod report;
pub mod source;
pub mod synth;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::node::{trace_kind, Mm, Wakeup};
use fraglab_mm::trace::{parse_trace_line, TraceEvent};
use fraglab_mm::vmstat::Stat;
use fraglab_spec::{SnapshotSpec, Spec};
use fraglab_state::reconstruct::{reconstruct, ReconstructOptions};
use fraglab_state::snapshot::Snapshot;

use crate::error::RunError;
use crate::restore::Loaded;
use report::{CompactionStats, EndState, ExtfragStats, ReplayColumn, ReplayCounts, ReplayReport};

/// One simulated column: a label and the spec whose `[machine]`, knobs and model switches the
/// machine boots with (its ops and workload are not run).
pub struct Policy {
    pub label: String,
    pub spec: Spec,
}

/// The events whose lines the replay parses (a malformed one is an error).
const READ_EVENTS: &[&str] = &[
    "mm_page_alloc",
    "mm_page_free",
    "mm_page_free_batched",
    "mm_page_alloc_extfrag",
    "mm_compaction_try_to_compact_pages",
    "mm_compaction_isolate_migratepages",
    "mm_compaction_isolate_freepages",
    "mm_compaction_fast_isolate_freepages",
    "mm_compaction_migratepages",
];

/// The other events the model knows (`TraceEvent::name`): skipped as "other events", not
/// parsed. Anything else is an unknown line.
const OTHER_EVENTS: &[&str] = &[
    "mm_page_alloc_zone_locked",
    "mm_page_pcpu_drain",
    "mm_compaction_begin",
    "mm_compaction_end",
    "mm_compaction_suitable",
    "mm_compaction_finished",
    "mm_compaction_deferred",
    "mm_compaction_defer_compaction",
    "mm_compaction_defer_reset",
    "mm_compaction_wakeup_kcompactd",
    "mm_compaction_kcompactd_wake",
    "mm_compaction_kcompactd_sleep",
    "mm_migrate_pages",
    "mm_migrate_pages_start",
    "mm_vmscan_kswapd_sleep",
    "mm_vmscan_kswapd_wake",
    "mm_vmscan_wakeup_kswapd",
    "mm_vmscan_direct_reclaim_begin",
    "mm_vmscan_direct_reclaim_end",
    "mm_vmscan_lru_isolate",
    "mm_vmscan_lru_shrink_inactive",
    "mm_vmscan_lru_shrink_active",
    "mm_vmscan_throttled",
];

/// The event name of a trace line: the word between the timestamp's `: ` and the next `:`
/// (`comm-pid [cpu] flags secs.usecs: NAME: fields`).
pub fn event_name(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let mut from = 0;
    while let Some(i) = line[from..].find(": ") {
        let at = from + i;
        if at > 0 && b[at - 1].is_ascii_digit() {
            let rest = &line[at + 2..];
            let name = &rest[..rest.find(':').unwrap_or(rest.len())];
            if !name.is_empty()
                && name
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
            {
                return Some(name);
            }
        }
        from = at + 2;
    }
    None
}

/// The count of a trace_pipe `CPU:N [LOST M EVENTS]` line.
fn lost_events_line(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("CPU:")?;
    let (_, rest) = rest.split_once(" [LOST ")?;
    rest.strip_suffix(" EVENTS]")?.parse().ok()
}

/// The `key=value` fields of a line after `: NAME: `.
fn field<'a>(line: &'a str, name: &str, key: &str) -> Option<&'a str> {
    let fields = &line[line.find(&format!(": {name}: "))? + name.len() + 4..];
    fields
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// A compaction line the strict parser (`parse_trace_line`, which requires the text to re-render
/// byte for byte) refused, read for the counts the recorded column takes from it. Seen on the
/// live 6.18 machine: mm_compaction_fast_isolate_freepages printing its range start with bit 63
/// set (`range=(0x80000000003dd000 ~ 0x3dd000)`), outside the model's u32 pfns.
fn lenient_compaction(name: &str, line: &str) -> Option<TraceEvent> {
    let num = |key: &str| -> Option<u64> { field(line, name, key)?.parse().ok() };
    Some(match name {
        "mm_compaction_isolate_migratepages" | "mm_compaction_isolate_freepages" => {
            TraceEvent::MmCompactionIsolate {
                free: name.ends_with("freepages"),
                start_pfn: 0,
                end_pfn: 0,
                nr_scanned: num("nr_scanned")?,
                nr_taken: num("nr_taken")?,
            }
        }
        "mm_compaction_fast_isolate_freepages" => TraceEvent::MmCompactionFastIsolateFreepages {
            start_pfn: 0,
            end_pfn: 0,
            nr_scanned: num("nr_scanned")?,
            nr_taken: num("nr_taken")?,
        },
        "mm_compaction_migratepages" => TraceEvent::MmCompactionMigratepages {
            nr_migrated: num("nr_migrated")?,
            nr_failed: num("nr_failed")?,
        },
        "mm_compaction_try_to_compact_pages" => TraceEvent::MmCompactionTryToCompactPages {
            order: field(line, name, "order")?.parse().ok()?,
            gfp: fraglab_mm::Gfp(0),
            prio: field(line, name, "priority")?.parse().ok()?,
        },
        _ => return None,
    })
}

/// A recorded allocation still live: where the simulated folio is (id and content token), its
/// order, and, once a part of it was freed, the order-0 pieces still allocated (by offset).
struct Live {
    id: FolioId,
    token: u64,
    order: u32,
    pieces: Option<Vec<Option<FolioId>>>,
    left: u32,
    /// A folio the machine booted with (a snapshot's), not a replayed allocation.
    boot: bool,
}

impl Live {
    /// A whole, not yet partly freed folio.
    fn whole(id: FolioId, token: u64, order: u32, boot: bool) -> Live {
        Live {
            id,
            token,
            order,
            pieces: None,
            left: 1 << order,
            boot,
        }
    }
}

/// One replay of a trace under one policy, plus the recorded side (the same for every policy).
struct Replay {
    mm: Mm,
    live: BTreeMap<u32, Live>,
    counts: ReplayCounts,
    sim_extfrag: ExtfragStats,
    rec_extfrag: ExtfragStats,
    rec_compaction: CompactionStats,
    stats0: Vec<u64>,
    t0: Option<u64>,
    last_tick_ms: u64,
    last_ts: u64,
    /// Fragmentation blame (issue 37, with `[run] blame`): the last (comm, gfp) a source was
    /// interned for, and its id; a recorded allocation's source is `COMM GFP_FLAGS` (the
    /// recording has no call site on mm_page_alloc).
    blame_key: Option<(String, u32, u32)>,
}

const COMPACTION_STATS: [Stat; 6] = [
    Stat::compact_stall,
    Stat::compact_success,
    Stat::compact_fail,
    Stat::compact_migrate_scanned,
    Stat::compact_free_scanned,
    Stat::pgmigrate_success,
];

impl Replay {
    fn new(mut mm: Mm) -> Replay {
        // Only the simulated extfrag events are recorded (drained after every operation).
        mm.set_trace_mask(trace_kind::MM_PAGE_ALLOC_EXTFRAG);
        mm.take_trace();
        let stats0 = COMPACTION_STATS.iter().map(|&s| mm.stat(s)).collect();
        Replay {
            mm,
            live: BTreeMap::new(),
            counts: ReplayCounts::default(),
            sim_extfrag: ExtfragStats::default(),
            rec_extfrag: ExtfragStats::default(),
            rec_compaction: CompactionStats::default(),
            stats0,
            t0: None,
            last_tick_ms: 0,
            last_ts: 0,
            blame_key: None,
        }
    }

    /// With blame on, makes the recorded allocation's `COMM GFP` the current source.
    fn blame_source(&mut self, gfp: fraglab_mm::Gfp) {
        let Some(b) = self.mm.blame.as_deref_mut() else {
            return;
        };
        let comm = &self.mm.cur.comm;
        match &self.blame_key {
            Some((c, g, id)) if c == comm && *g == gfp.0 => b.cur = *id,
            _ => {
                let id = b.intern(&format!("{comm} {}", fraglab_mm::trace::show_gfp_flags(gfp)));
                b.cur = id;
                self.blame_key = Some((comm.clone(), gfp.0, id));
            }
        }
    }

    /// A snapshot boot: every folio the machine booted with is an allocation the recording may
    /// free, at the pfn it had at boot (the recording's pfns are the snapshot's); tracked by
    /// folio id and token, so the simulator may migrate it meanwhile.
    fn adopt_boot_folios(&mut self) {
        let boot: Vec<(u32, FolioId, u64, u32)> = self
            .mm
            .folios
            .live()
            .map(|(id, f)| (f.pfn, id, f.token(), f.order as u32))
            .collect();
        for (pfn, id, token, order) in boot {
            self.live.insert(pfn, Live::whole(id, token, order, true));
        }
    }

    /// One line.
    fn line(&mut self, line: &str, file: &Path, line_no: u64) -> Result<(), RunError> {
        self.counts.lines += 1;
        let Some(name) = event_name(line) else {
            match lost_events_line(line) {
                Some(n) => self.counts.lost_events += n,
                None => self.counts.unknown_lines += 1,
            }
            return Ok(());
        };
        if !READ_EVENTS.contains(&name) {
            if OTHER_EVENTS.contains(&name) {
                self.counts.other_events += 1;
            } else {
                self.counts.unknown_lines += 1;
            }
            return Ok(());
        }
        let batched = name == "mm_page_free_batched";
        // mm_page_free_batched prints "page=%p pfn=0x%lx order=0", mm_page_free's format with
        // the order fixed: read it as that event.
        let rewritten;
        let text = if batched {
            rewritten = line.replacen(": mm_page_free_batched: ", ": mm_page_free: ", 1);
            &rewritten
        } else {
            line
        };
        let malformed = || {
            RunError(format!(
                "{}:{line_no}: a malformed {name} line: {line:?}",
                file.display()
            ))
        };
        let rec = match parse_trace_line(text) {
            Some(rec) => rec,
            None if name.starts_with("mm_compaction_") => {
                // Read only for the recorded column's counts: the numbers it needs suffice.
                let ev = lenient_compaction(name, line).ok_or_else(malformed)?;
                self.counts.lenient_lines += 1;
                self.rec_compaction.add_recorded(&ev);
                return Ok(());
            }
            None => return Err(malformed()),
        };
        // An order the kernel cannot print (above MAX_PAGE_ORDER) is a malformed line.
        let order = match rec.event {
            TraceEvent::MmPageAlloc { order, .. } | TraceEvent::MmPageFree { order, .. } => order,
            _ => 0,
        };
        if order as usize >= fraglab_mm::types::NR_PAGE_ORDERS {
            return Err(RunError(format!(
                "{}:{line_no}: {name} with order {order} (above MAX_PAGE_ORDER {}): {line:?}",
                file.display(),
                fraglab_mm::types::NR_PAGE_ORDERS - 1
            )));
        }
        // The task context and the time.
        let t0 = *self.t0.get_or_insert(rec.ts_ns);
        let now = rec.ts_ns.saturating_sub(t0).max(self.last_ts);
        self.last_ts = now;
        self.mm.cur.now_ns = now;
        self.mm.cur.pid = rec.pid;
        if self.mm.cur.comm != rec.comm {
            self.mm.cur.comm = rec.comm.clone();
        }
        let cpu = rec.cpu % self.mm.nr_cpus.max(1);
        let now_ms = now / 1_000_000;
        if now_ms > self.last_tick_ms {
            let ms = now_ms - self.last_tick_ms;
            self.last_tick_ms = now_ms;
            let mut ran = false;
            for nid in 0..self.mm.numa.nr_nodes {
                ran |= self.mm.kcompactd_tick(nid, ms).is_some();
            }
            if ran {
                self.counts.kcompactd_timer_runs += 1;
                self.settle();
            }
        }
        match rec.event {
            TraceEvent::MmPageAlloc {
                pfn: Some(pfn),
                order,
                gfp,
                ..
            } => {
                self.counts.allocs += 1;
                self.blame_source(gfp);
                self.alloc(cpu, pfn, order, gfp);
            }
            TraceEvent::MmPageAlloc { pfn: None, .. } => self.counts.recorded_failed_allocs += 1,
            TraceEvent::MmPageFree { pfn, order } => {
                if !batched {
                    self.counts.frees += 1;
                    self.free(cpu, pfn, order);
                } else {
                    self.counts.frees_batched += 1;
                    // free_unref_folios: free_pages_prepare already emitted mm_page_free for
                    // this page; the batched line only frees a page still live (its
                    // mm_page_free lost, or not enabled).
                    if self.covering(pfn).is_some() {
                        self.free(cpu, pfn, order);
                    } else {
                        self.counts.batched_duplicates += 1;
                    }
                }
            }
            ref ev @ TraceEvent::MmPageAllocExtfrag { .. } => self.rec_extfrag.add(ev),
            ref ev => self.rec_compaction.add_recorded(ev),
        }
        self.settle();
        Ok(())
    }

    /// After an operation: run the daemons it woke, note OOM kills, count the simulated extfrag
    /// events.
    fn settle(&mut self) {
        loop {
            let wakeups = self.mm.take_wakeups();
            if wakeups.is_empty() {
                break;
            }
            for w in wakeups {
                match w {
                    Wakeup::Kswapd { nid, .. } => {
                        self.counts.kswapd_wakes += 1;
                        self.mm.kswapd_until_sleep(nid, 64);
                    }
                    Wakeup::Kcompactd { nid, .. } => {
                        self.counts.kcompactd_wakes += 1;
                        self.mm.kcompactd_until_wait(nid);
                    }
                    // A replay has no timer for free page reporting's delayed pass: none runs.
                    Wakeup::PageReporting => {}
                }
                self.mm.debug_check();
            }
        }
        self.counts.oom_kills += self.mm.outbox.oom_victims.len() as u64;
        self.mm.outbox.oom_victims.clear();
        if !self.mm.trace.buf.is_empty() {
            for r in self.mm.take_trace() {
                self.sim_extfrag.add(&r.event);
            }
        }
    }

    /// The recorded allocation covering `pfn`, if any: (its recorded pfn).
    fn covering(&self, pfn: u32) -> Option<u32> {
        let (&start, l) = self.live.range(..=pfn).next_back()?;
        (u64::from(pfn) < u64::from(start) + (1u64 << l.order)).then_some(start)
    }

    fn alloc(&mut self, cpu: u32, pfn: u32, order: u32, gfp: fraglab_mm::Gfp) {
        // Recorded allocations still live in [pfn, pfn + 2^order): their frees were lost.
        let end = u64::from(pfn) + (1u64 << order);
        let mut stale: Vec<u32> = self.covering(pfn).into_iter().collect();
        stale.extend(
            self.live
                .range(pfn..)
                .take_while(|(&s, _)| u64::from(s) < end)
                .map(|(&s, _)| s),
        );
        stale.dedup();
        for s in stale {
            let l = self.live.remove(&s).expect("a live record");
            if l.boot {
                self.counts.snapshot_overlaps += 1;
            } else {
                self.counts.lost_frees += 1;
            }
            self.free_record(cpu, l);
        }
        let kind = FolioKind::from_gfp(gfp);
        match self.mm.alloc_folio(cpu, gfp, order, kind, false) {
            Some(id) => {
                let token = self.mm.folios.get(id).token();
                self.live.insert(pfn, Live::whole(id, token, order, false));
            }
            None => {
                self.counts.sim_failed_allocs += 1;
                *self
                    .counts
                    .sim_failed_by
                    .entry(format!(
                        "order {order} gfp {}",
                        fraglab_mm::trace::show_gfp_flags(gfp)
                    ))
                    .or_default() += 1;
            }
        }
        self.mm.debug_check();
    }

    /// Frees what is left of a record in the simulator.
    fn free_record(&mut self, cpu: u32, l: Live) {
        match l.pieces {
            None => {
                if self.mm.folio_is(l.id, l.token) {
                    self.mm.free_folio(cpu, l.id);
                } else {
                    self.counts.frees_of_reclaimed += 1;
                }
            }
            Some(pieces) => {
                for id in pieces.into_iter().flatten() {
                    if self.mm.folio_is(id, l.token) {
                        self.mm.free_folio(cpu, id);
                    }
                }
            }
        }
        self.mm.debug_check();
    }

    fn free(&mut self, cpu: u32, pfn: u32, order: u32) {
        let Some(start) = self.covering(pfn) else {
            self.counts.unmatched_frees += 1;
            return;
        };
        let l = self.live.get_mut(&start).expect("covering() found it");
        if l.boot {
            self.counts.snapshot_frees += 1;
        }
        if start == pfn && order >= l.order && l.pieces.is_none() {
            if order != l.order {
                self.counts.order_mismatches += 1;
            }
            let l = self.live.remove(&start).expect("a live record");
            self.free_record(cpu, l);
            return;
        }
        // A part of the allocation.
        self.counts.partial_frees += 1;
        if l.pieces.is_none() {
            l.pieces = Some(if self.mm.folio_is(l.id, l.token) {
                let now = u32::from(self.mm.folios.get(l.id).order);
                if l.order > 0 && now == l.order {
                    self.mm.split_folio(l.id).into_iter().map(Some).collect()
                } else if l.order == 0 {
                    vec![Some(l.id)]
                } else {
                    // The simulator split it meanwhile (its pieces keep the token; only the
                    // first keeps the id): the folio still known is freed with the first part
                    // that covers its pages, the others stay allocated (counted never freed).
                    self.counts.order_mismatches += 1;
                    let mut v = vec![None; 1 << l.order];
                    v[0] = Some(l.id);
                    l.left = 1;
                    v
                }
            } else {
                self.counts.frees_of_reclaimed += 1;
                vec![None; 1 << l.order]
            });
        }
        let first = (pfn - start) as usize;
        let size = 1usize << l.order;
        let last = first + (1usize << order);
        if last > size {
            self.counts.order_mismatches += 1;
        }
        let token = l.token;
        let pieces = l.pieces.as_mut().expect("set above");
        let mut freed = Vec::new();
        for slot in pieces[first..last.min(size)].iter_mut() {
            if let Some(id) = slot.take() {
                freed.push(id);
            }
        }
        l.left -= freed.len() as u32;
        let done = l.left == 0;
        for id in freed {
            if self.mm.folio_is(id, token) {
                self.mm.free_folio(cpu, id);
            }
        }
        if done {
            self.live.remove(&start);
        }
        self.mm.debug_check();
    }

    /// The simulated column.
    fn column(&mut self, label: &str) -> ReplayColumn {
        let d: Vec<u64> = COMPACTION_STATS
            .iter()
            .zip(&self.stats0)
            .map(|(&s, &b)| self.mm.stat(s).saturating_sub(b))
            .collect();
        let mut counts = self.counts.clone();
        let replayed = || self.live.values().filter(|l| !l.boot);
        counts.never_freed = replayed().count() as u64;
        counts.never_freed_pages = replayed().map(|l| u64::from(l.left)).sum();
        let s = crate::snapshot::sample(&self.mm, self.mm.cur.now_ns);
        let mut blocks = [0u64; fraglab_mm::types::MIGRATE_TYPES];
        blocks.copy_from_slice(&s.blocks_by_type);
        let mut free = [0u64; fraglab_mm::types::NR_PAGE_ORDERS];
        free.copy_from_slice(&s.free_by_order);
        ReplayColumn {
            label: label.to_string(),
            extfrag: self.sim_extfrag.clone(),
            extfrag_measured: true,
            compaction: CompactionStats {
                stalls: Some(d[0]),
                success: Some(d[1]),
                fail: Some(d[2]),
                migrate_scanned: Some(d[3]),
                free_scanned: Some(d[4]),
                migrated: Some(d[5]),
            },
            end_state: EndState {
                blocks_by_type: Some(blocks),
                mixed_blocks: Some(s.mixed_blocks),
                free_pages_by_order: Some(free),
            },
            counts: Some(counts),
            blame: self.mm.blame.as_deref().map(crate::timed::blame_result),
        }
    }
}

/// Where the simulated machines boot from.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// `--snapshot STATE`: every policy boots in this snapshot's state.
    pub snapshot: Option<PathBuf>,
    /// Boot from each policy's own `[machine]` even when the trace embeds a start snapshot.
    pub ignore_embedded: bool,
}

/// A snapshot reconstructed once for all policies (its match report goes to stderr, as a
/// `[machine] snapshot` boot prints it).
fn load_snapshot(path: &Path, s: Snapshot) -> Result<Loaded, RunError> {
    let rec = reconstruct(&s, &ReconstructOptions::default())
        .map_err(|e| RunError(format!("{}: reconstruction: {e}", path.display())))?;
    eprint!("{}", crate::restore::match_report_text(path, &rec.report));
    crate::restore::loaded(path, s.header, rec).map_err(RunError)
}

/// Boots `spec` in the state of `loaded`: as `[machine] snapshot` would (its zones and CPUs
/// and, for knobs the spec does not set, its recorded knobs, `crate::restore`); the spec's
/// memory size or zones are not used.
fn boot_snapshot(spec: &Spec, loaded: &Loaded) -> Result<Mm, RunError> {
    let mut s = spec.clone();
    s.machine.snapshot = Some(SnapshotSpec {
        path: loaded.path.display().to_string(),
        resolved: loaded.path.clone(),
        line: 0,
        cpus_given: false,
        hugetlb_given: false,
    });
    s.machine.memory_bytes = None;
    s.machine.zones = None;
    crate::boot::boot_restored(&s, loaded)
}

/// Replays the trace at `path` under each policy ([`replay_with`], default options: a start
/// snapshot the trace embeds is booted from).
pub fn replay(
    path: &Path,
    policies: &[Policy],
    progress: &mut dyn FnMut(usize, u64),
) -> Result<ReplayReport, RunError> {
    replay_with(path, policies, &ReplayOptions::default(), progress)
}

/// Replays the trace at `path` under each policy (in order, each from a fresh boot: from
/// `opts.snapshot`, else the trace's embedded start snapshot, else the policy's `[machine]`)
/// and returns the report: the recorded column, then one column per policy. With a snapshot
/// boot every folio the machine booted with may be freed by the recording (tracked by folio
/// id). `progress` is called every 65 536 lines with the pass index and the lines read so far.
pub fn replay_with(
    path: &Path,
    policies: &[Policy],
    opts: &ReplayOptions,
    progress: &mut dyn FnMut(usize, u64),
) -> Result<ReplayReport, RunError> {
    if policies.is_empty() {
        return Err(RunError("replay: no policy to replay under".into()));
    }
    let loaded = match &opts.snapshot {
        Some(p) => {
            let s = Snapshot::read(p).map_err(|e| RunError(e.to_string()))?;
            Some(load_snapshot(p, s)?)
        }
        None if !opts.ignore_embedded => match source::open(path, true)?.take_snapshot() {
            Some(s) => Some(load_snapshot(path, s)?),
            None => None,
        },
        None => None,
    };
    let mut columns = Vec::new();
    let mut recorded: Option<ReplayColumn> = None;
    let mut duration_ns = 0;
    for (i, p) in policies.iter().enumerate() {
        let mut lines = source::open(path, false)?;
        let mm = match &loaded {
            Some(l) => boot_snapshot(&p.spec, l)?,
            None => crate::boot::boot(&p.spec)?,
        };
        let mut r = Replay::new(mm);
        if p.spec.run.blame {
            r.mm.enable_blame();
        }
        if loaded.is_some() || p.spec.machine.snapshot.is_some() {
            r.adopt_boot_folios();
        }
        while let Some((line_no, line)) = lines.next_line()? {
            r.line(line, path, line_no)?;
            if r.counts.lines.is_multiple_of(65_536) {
                progress(i, r.counts.lines);
            }
        }
        progress(i, r.counts.lines);
        if recorded.is_none() {
            no_events_check(path, &r)?;
            let info = lines.info();
            let mut compaction = r.rec_compaction.clone();
            let enabled = info.events.iter().any(|e| e.starts_with("compaction"));
            compaction.settle_recorded(enabled);
            let extfrag_measured =
                info.events.is_empty() || info.events.iter().any(|e| e.ends_with("mm_page_alloc_extfrag"));
            recorded = Some(ReplayColumn {
                label: "recorded".into(),
                extfrag: r.rec_extfrag.clone(),
                extfrag_measured,
                compaction,
                end_state: report::recorded_end_state(&info.proc_end),
                counts: None,
                blame: None,
            });
            duration_ns = r.last_ts;
        }
        r.counts.lost_events = r.counts.lost_events.max(lines.info().lost_events);
        if p.spec.run.debug_vm {
            r.mm.check_invariants()
                .map_err(|e| RunError(format!("{}: {e}", p.spec.file)))?;
        }
        columns.push(r.column(&p.label));
    }
    columns.insert(0, recorded.expect("at least one policy"));
    let table = report::table(&columns);
    Ok(ReplayReport {
        trace: path.display().to_string(),
        duration_ns,
        columns,
        table,
    })
}

/// After the first pass: a trace with no line the replay reads (an empty file, text of other
/// events, bytes that are no trace) is an error naming the file and what its lines were.
fn no_events_check(path: &Path, r: &Replay) -> Result<(), RunError> {
    if r.t0.is_some() || r.counts.lenient_lines > 0 {
        return Ok(());
    }
    let c = &r.counts;
    Err(RunError(format!(
        "{}: no event the replay reads ({}) in its {} lines ({} not trace events, {} of other events, {} events lost): nothing to replay",
        path.display(),
        READ_EVENTS[..3].join(", "),
        c.lines,
        c.unknown_lines,
        c.other_events,
        c.lost_events
    )))
}

/// The report as text: a summary line and the table in compare's layout.
pub fn format_text(r: &ReplayReport) -> String {
    let mut out = format!(
        "# fraglab replay {}: {:.3} s recorded, {} columns (recorded first; % = change against the recording)\n{}",
        r.trace,
        r.duration_ns as f64 / 1e9,
        r.columns.len(),
        crate::compare::format_table(&r.table)
    );
    // Fragmentation blame of the policies that asked for it (issue 37): sources ranked.
    for c in &r.columns {
        if let Some(b) = &c.blame {
            out += &format!(
                "\n# blame, {}: recorded allocations by COMM GFP_FLAGS\n{}",
                c.label,
                fraglab_spec::result::blame::table(&fraglab_spec::result::blame::ranked(b))
            );
        }
    }
    out
}
