//! The timeless engine: runs a spec's explicit operations (`[[op]]`) against the mm model in
//! order, with no clock, and collects what its `print` operations print. For tests and for
//! anyone checking a rule by hand.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use fraglab_mm::compaction::HPAGE_FRAG_CHECK_INTERVAL_MSEC;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::mmzone::{PageKind, PG_LRU};
use fraglab_mm::node::Mm;
use fraglab_mm::trace::render_trace;
use fraglab_mm::types::*;
use fraglab_mm::vmstat::{render_buddyinfo, render_pagetypeinfo, render_vmstat, render_zoneinfo};
use fraglab_spec::result::pageblock::{alloc_mixes, BlockState};
use fraglab_spec::result::{RunResult, RESULT_SCHEMA};
use fraglab_spec::{KcompactdMode, Op, PrintWhat, ProactiveMode, Spec};

use crate::snapshot::{pageblock_snapshot, proc_snapshot, vmstat_values};

use crate::error::RunError;

/// A named set of allocated folios, each with its content token: reclaim or the OOM killer
/// may free a folio behind the set's back, and folio ids are reused, so a member is only
/// freed while its id still holds the same content.
struct ChunkSet {
    name: String,
    chunks: Vec<(FolioId, u64)>,
}

fn set_index(sets: &mut Vec<ChunkSet>, set: &str) -> usize {
    match sets.iter().position(|s| s.name == set) {
        Some(si) => si,
        None => {
            sets.push(ChunkSet {
                name: set.to_string(),
                chunks: Vec::new(),
            });
            sets.len() - 1
        }
    }
}

/// The mapping id of a spec file (mappings are registered at boot in `spec.files` order).
fn file_mapping(spec: &Spec, file: &str) -> u32 {
    spec.files
        .iter()
        .position(|(f, _)| f == file)
        .expect("the parser registers every file an op names") as u32
        + 1
}

/// `3 x order 0, 1 x order 9`, or `none`.
fn by_order(counts: &[u64; 11]) -> String {
    let parts: Vec<String> = counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(o, n)| format!("{n} x order {o}"))
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// Runs every op of `spec` in order and returns the text its `print` ops produced, with a
/// `#`-prefixed log line per op. Deterministic: no randomness is involved.
pub fn run_ops(spec: &Spec) -> Result<String, RunError> {
    run_ops_with_progress(spec, &mut |_, _| {})
}

/// [`run_ops`], calling `progress(done, total)` after each operation (`[[op]]`s done of the
/// spec's). It only reports: the output is the same.
pub fn run_ops_with_progress(
    spec: &Spec,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<String, RunError> {
    let mut r = OpRunner::boot(spec)?;
    r.run_all(progress)?;
    Ok(r.out)
}

/// A timeless run as a result ([`RunResult`], the schema of timed runs, so reports and
/// notebooks read one schema): engine "sim", the spec's name and seed, duration 0 (no clock),
/// the /proc/vmstat deltas over the ops, /proc/{buddyinfo,pagetypeinfo,zoneinfo,vmstat} before
/// and after, the pageblock map at the end, the allocator's work counters, and in `printed` the
/// text [`run_ops`] returns (byte for byte: reading the model's state for the result changes
/// nothing in it).
pub fn run_ops_result(spec: &Spec) -> Result<RunResult, RunError> {
    run_ops_result_with_progress(spec, &mut |_, _| {})
}

/// [`run_ops_result`], calling `progress(done, total)` after each operation, as
/// [`run_ops_with_progress`].
pub fn run_ops_result_with_progress(
    spec: &Spec,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<RunResult, RunError> {
    ops_result(spec, progress, None)
}

/// [`run_ops_result_with_progress`] that stops soon after `cancel` is set: it is read after boot
/// and before every operation, and a run that saw it set ends with [`RunError::interrupted`].
/// Never set, the result is [`run_ops_result`]'s, byte for byte.
pub fn run_ops_result_cancellable(
    spec: &Spec,
    progress: &mut dyn FnMut(usize, usize),
    cancel: &AtomicBool,
) -> Result<RunResult, RunError> {
    ops_result(spec, progress, Some(cancel))
}

fn ops_result(
    spec: &Spec,
    progress: &mut dyn FnMut(usize, usize),
    cancel: Option<&AtomicBool>,
) -> Result<RunResult, RunError> {
    let mut r = OpRunner::boot(spec)?;
    r.cancel = cancel;
    let proc_start = proc_snapshot(&r.mm);
    let start = vmstat_values(&r.mm);
    r.run_all(progress)?;
    let end = vmstat_values(&r.mm);
    let w = &r.mm.work.sum;
    Ok(RunResult {
        schema: RESULT_SCHEMA,
        engine: "sim".into(),
        spec_name: spec.name.clone(),
        seed: spec.run.seed,
        duration_ns: 0,
        vmstat_delta: start
            .iter()
            .zip(&end)
            .map(|((n, a), (_, b))| (n.clone(), b - a))
            .collect(),
        sim_work: [
            ("alloc_slowpaths", w.slowpaths),
            ("direct_reclaim_calls", w.reclaim_calls),
            ("drain_all_pages", w.drains),
            ("pcp_pages_drained", w.drained_pages),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        pageblock_maps: vec![pageblock_snapshot(&r.mm, 0)],
        proc_start,
        proc_end: proc_snapshot(&r.mm),
        printed: Some(std::mem::take(&mut r.out)),
        ..Default::default()
    })
}

impl<'s> OpRunner<'s> {
    /// Boots the spec's machine; the output starts with the note on knobs this model does not
    /// read.
    fn boot(spec: &'s Spec) -> Result<OpRunner<'s>, RunError> {
        let mut r = OpRunner {
            spec,
            mm: crate::boot::boot(spec)?,
            out: String::new(),
            sets: Vec::new(),
            ra_states: std::collections::BTreeMap::new(),
            cancel: None,
        };
        let unused = crate::boot::unread_knobs(spec);
        if !unused.is_empty() {
            let _ = writeln!(
                r.out,
                "# note: knobs not read by this model version: {}",
                unused.join(", ")
            );
        }
        r.mm.debug_check();
        Ok(r)
    }

    /// Runs every op in order, calling `progress(done, total)` after each, then (with
    /// `debug_vm`) checks the invariants.
    fn run_all(&mut self, progress: &mut dyn FnMut(usize, usize)) -> Result<(), RunError> {
        let spec = self.spec;
        for (i, op) in spec.ops.iter().enumerate() {
            if self.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(RunError::interrupted(&spec.file));
            }
            self.op(i, op)?;
            progress(i + 1, spec.ops.len());
        }
        if spec.run.debug_vm {
            self.mm
                .check_invariants()
                .map_err(|e| RunError(format!("{}: {e}", spec.file)))?;
        }
        Ok(())
    }
}

/// The state of a timeless run: the model, the named sets of folios, each file's readahead
/// state, and the text printed so far.
struct OpRunner<'s> {
    spec: &'s Spec,
    mm: Mm,
    out: String,
    sets: Vec<ChunkSet>,
    ra_states: std::collections::BTreeMap<String, fraglab_mm::filemap::ReadaheadState>,
    /// Stops the run before the next operation when set ([`run_ops_result_cancellable`]).
    cancel: Option<&'s AtomicBool>,
}

impl OpRunner<'_> {
    /// Runs op `i`, appending its log line (and what a `print` prints) to the output.
    fn op(&mut self, i: usize, op: &Op) -> Result<(), RunError> {
        match op {
            Op::Alloc {
                set,
                count,
                order,
                gfp,
                cpu,
                must_succeed,
                kind,
                nofs,
                ..
            } => self.alloc(i, set, *count, *order, *gfp, *cpu, *must_succeed, *kind, *nofs)?,
            Op::Free {
                set,
                every,
                offset,
                cpu,
                ..
            } => self.free(i, set, *every, *offset, *cpu)?,
            Op::Fault {
                set,
                count,
                madvised,
                cpu,
                ..
            } => self.fault(i, set, *count, *madvised, *cpu),
            Op::Write {
                file,
                offset,
                length,
                cpu,
                ..
            } => self.write(i, file, *offset, *length, *cpu),
            Op::Read {
                file,
                offset,
                length,
                file_size,
                cpu,
                ..
            } => self.read(i, file, *offset, *length, *file_size, *cpu),
            Op::Print { what, zone, .. } => {
                let _ = writeln!(self.out, "# op[{i}] print {}", what.name());
                print(&mut self.mm, *what, *zone, &mut self.out);
            }
            Op::NrHugepages { count, .. } => self.nr_hugepages(i, *count),
            _ => self.mechanism(i, op),
        }
        Ok(())
    }

    /// `alloc`: `count` folios into set `set`.
    #[allow(clippy::too_many_arguments)]
    fn alloc(
        &mut self,
        i: usize,
        set: &str,
        count: u32,
        order: u32,
        gfp: fraglab_mm::Gfp,
        cpu: u32,
        must_succeed: bool,
        kind: FolioKind,
        nofs: bool,
    ) -> Result<(), RunError> {
        let (mm, out) = (&mut self.mm, &mut self.out);
        let si = set_index(&mut self.sets, set);
        let mut failed = 0u32;
        for n in 0..count {
            match mm.alloc_folio(cpu, gfp, order, kind, nofs) {
                Some(id) => {
                    self.sets[si].chunks.push((id, mm.folios.get(id).token()));
                }
                None if must_succeed => {
                    return Err(RunError(format!(
                        "{}: alloc {set}: allocation {} of {count} (order {order}) failed and must_succeed is set",
                        self.spec.op_where(i),
                        n + 1
                    )));
                }
                None => failed += 1,
            }
            mm.debug_check();
        }
        let _ = writeln!(
            out,
            "# op[{i}] alloc {set}: {count} x order {order} {} {}: {} allocated, {failed} failed",
            kind.name(),
            fraglab_mm::trace::show_gfp_flags(gfp),
            count - failed
        );
        Ok(())
    }

    /// `free`: the members `n` of set `set` with `n % every == offset` that are still its own.
    fn free(&mut self, i: usize, set: &str, every: u32, offset: u32, cpu: u32) -> Result<(), RunError> {
        let mm = &mut self.mm;
        let si = self
            .sets
            .iter()
            .position(|s| s.name == set)
            .ok_or_else(|| RunError(format!("{}: free {set}: no such set", self.spec.op_where(i))))?;
        let chunks = std::mem::take(&mut self.sets[si].chunks);
        let mut kept = Vec::with_capacity(chunks.len());
        let mut freed = 0;
        let mut gone = 0;
        for (n, (id, token)) in chunks.into_iter().enumerate() {
            if n as u32 % every == offset {
                if mm.folio_is(id, token) {
                    mm.free_folio(cpu, id);
                    mm.debug_check();
                    freed += 1;
                } else {
                    gone += 1;
                }
            } else {
                kept.push((id, token));
            }
        }
        let left = kept.len();
        self.sets[si].chunks = kept;
        let gone = if gone > 0 {
            format!(" ({gone} already freed by reclaim or OOM)")
        } else {
            String::new()
        };
        let _ = writeln!(
            self.out,
            "# op[{i}] free {set} every {every} offset {offset}: {freed} freed, {left} left{gone}"
        );
        Ok(())
    }

    /// `fault`: `count` anonymous faults on fresh 2 MiB ranges, the folios into set `set`.
    fn fault(&mut self, i: usize, set: &str, count: u32, madvised: bool, cpu: u32) {
        let mm = &mut self.mm;
        let si = set_index(&mut self.sets, set);
        let mut orders = [0u64; NR_PAGE_ORDERS];
        let mut failed = 0;
        for _ in 0..count {
            match mm.do_anonymous_fault(cpu, madvised) {
                Some(id) => {
                    let f = mm.folios.get(id);
                    orders[f.order as usize] += 1;
                    self.sets[si].chunks.push((id, f.token()));
                }
                None => failed += 1,
            }
            mm.debug_check();
        }
        let _ = writeln!(
            self.out,
            "# op[{i}] fault {set}: {count} faults{}: {}{}",
            if madvised { " (MADV_HUGEPAGE)" } else { "" },
            by_order(&orders),
            if failed > 0 {
                format!(", {failed} failed")
            } else {
                String::new()
            }
        );
    }

    /// `write`: a buffered write through iomap (§12.3).
    fn write(&mut self, i: usize, file: &str, offset: u64, length: u64, cpu: u32) {
        let mapping = file_mapping(self.spec, file);
        let st = self.mm.filemap_write(cpu, mapping, offset / 4096, length);
        self.mm.debug_check();
        let _ = writeln!(
            self.out,
            "# op[{i}] write {file}: {length} bytes at {offset}: {} pages cached, folios added {}; {} allocation attempts ({} failed), {} compact stalls, {} direct reclaims{}",
            st.hit_pages,
            by_order(&st.added),
            st.attempts.len(),
            st.attempts.iter().filter(|a| !a.ok).count(),
            st.attempts.iter().map(|a| a.work.compact_stalls).sum::<u32>(),
            st.attempts.iter().map(|a| a.work.reclaim_calls).sum::<u32>(),
            if st.failed_pages > 0 { format!("; {} pages failed", st.failed_pages) } else { String::new() }
        );
    }

    /// `read`: a buffered read with readahead (§12.2).
    fn read(&mut self, i: usize, file: &str, offset: u64, length: u64, file_size: u64, cpu: u32) {
        let mapping = file_mapping(self.spec, file);
        let init = self.mm.file_ra_state_init();
        let ra = self.ra_states.entry(file.to_string()).or_insert(init);
        let first = offset / 4096;
        let last = (offset + length).div_ceil(4096);
        let st = self
            .mm
            .filemap_read(cpu, mapping, ra, first, last - first, file_size.div_ceil(4096));
        self.mm.debug_check();
        let _ = writeln!(
            self.out,
            "# op[{i}] read {file}: {length} bytes at {offset}: {} pages cached, {} read; readahead {} sync, {} async, folios added {}, {} large-folio failures{}",
            st.hit_pages,
            st.miss_pages,
            st.sync_ra,
            st.async_ra,
            by_order(&st.added),
            st.alloc_failures,
            if st.failed_pages > 0 { format!("; {} pages failed", st.failed_pages) } else { String::new() }
        );
    }

    /// `nr_hugepages`: `echo count > /proc/sys/vm/nr_hugepages` (`set_max_huge_pages`,
    /// docs/model §28.1) on CPU 0; logs the pool before and after, the counters as
    /// /proc/vmstat shows them and the slow-path work of the write's allocations.
    fn nr_hugepages(&mut self, i: usize, count: u64) {
        use fraglab_mm::slowpath::MeasureWork;
        use fraglab_mm::vmstat::Stat;
        let (r, work) = self.mm.measure(|mm| mm.set_max_huge_pages(0, count));
        self.mm.debug_check();
        let _ = writeln!(
            self.out,
            "# op[{i}] nr_hugepages {count}: pool {} -> {} ({} allocated, {} freed{}); htlb_buddy_alloc_success {} htlb_buddy_alloc_fail {}; {} compact stalls, {} direct reclaims",
            r.before,
            r.pool,
            r.allocated,
            r.freed,
            if r.failed { ", stopped at the first failure" } else { "" },
            self.mm.stat(Stat::htlb_buddy_alloc_success),
            self.mm.stat(Stat::htlb_buddy_alloc_fail),
            work.compact_stalls,
            work.reclaim_calls,
        );
    }

    /// The ops that run one mechanism directly: kswapd, drain_all_pages, compact_memory,
    /// direct compaction, kcompactd and its proactive timer, free page reporting's pass.
    fn mechanism(&mut self, i: usize, op: &Op) {
        let (mm, out) = (&mut self.mm, &mut self.out);
        match op {
            Op::Kswapd { .. } => {
                let phase = mm.reclaim.kswapd[0].phase;
                let cycles = mm.kswapd_until_sleep(0, 64);
                mm.debug_check();
                let runs = cycles.iter().filter(|c| c.balanced_run).count();
                let reclaimed: u64 = cycles.iter().map(|c| c.reclaimed).sum();
                let _ = writeln!(
                    out,
                    "# op[{i}] kswapd: was {phase:?}; {runs} balance_pgdat runs, {reclaimed} pages reclaimed; now {:?}",
                    mm.reclaim.kswapd[0].phase
                );
            }
            Op::DrainAllPages { .. } => {
                let ipis = mm.drain_all_pages();
                mm.debug_check();
                let _ = writeln!(out, "# op[{i}] drain_all_pages: {ipis} CPUs drained");
            }
            Op::CompactMemory { .. } => {
                let st = mm.compact_memory();
                mm.debug_check();
                let _ = writeln!(out, "# op[{i}] compact_memory: {}", run_stats(&st));
            }
            Op::Compact {
                order,
                gfp,
                priority,
                cpu,
                ..
            } => {
                let af = fraglab_mm::AllocFlags(fraglab_mm::AllocFlags::WMARK_MIN);
                let (rc, page, st) = mm.try_to_compact_pages(*cpu, *gfp, *order, af, *priority);
                // A captured page is handed to the caller; the spec has no owner for it, so it
                // goes straight back (it stays a free order-`order` chunk, as compaction made it).
                if let Some(p) = page {
                    mm.free_pages(*cpu, p, *order);
                }
                mm.debug_check();
                let _ = writeln!(
                    out,
                    "# op[{i}] compact order {order} {priority:?}: {}{}; {}",
                    rc.name(),
                    if page.is_some() { " (captured)" } else { "" },
                    run_stats(&st)
                );
            }
            Op::Kcompactd { order, mode, .. } => {
                let woken = mm.wakeup_kcompactd(0, *order, ZoneType::Normal.idx());
                // Force: kcompactd_do_work at once, woken or not (the op before §26). Wake: the
                // loop runs only if the wake-up woke it (§26.1), until it waits again.
                let (ran, st) = match mode {
                    KcompactdMode::Force => (true, mm.kcompactd_do_work(0)),
                    KcompactdMode::Wake if woken => (true, mm.kcompactd_until_wait(0)),
                    KcompactdMode::Wake => (false, Default::default()),
                };
                mm.debug_check();
                let _ = writeln!(
                    out,
                    "# op[{i}] kcompactd order {order} (suitable: {woken}){}: {}",
                    if ran { "" } else { " recorded, not run" },
                    run_stats(&st)
                );
            }
            Op::ProactiveCompact { mode, .. } => {
                let score = mm.fragmentation_score_node(0);
                let st = match mode {
                    ProactiveMode::Timer => Some(mm.kcompactd_timer(0)),
                    ProactiveMode::Tick => mm.kcompactd_tick(0, HPAGE_FRAG_CHECK_INTERVAL_MSEC),
                    ProactiveMode::Trigger => Some(mm.kcompactd_trigger(0).1),
                    ProactiveMode::Force => Some(mm.compact_node(0, true)),
                };
                mm.debug_check();
                let _ = writeln!(
                    out,
                    "# op[{i}] proactive_compact: node score {score} -> {} (high {}); {}",
                    mm.fragmentation_score_node(0),
                    mm.fragmentation_score_wmark(false),
                    match st {
                        Some(st) => run_stats(&st),
                        None => format!(
                            "kcompactd sleeps on ({} of {} ms)",
                            mm.compact.kcompactd[0].waited_ms,
                            mm.compact.kcompactd[0]
                                .next_timeout_ms
                                .map_or("no timeout".to_string(), |t| t.to_string())
                        ),
                    }
                );
            }
            Op::PageReporting { .. } => {
                use fraglab_mm::page_reporting::ReportingState;
                // No clock here: the pass the device asked for (its delayed work) runs when
                // this op asks; the request itself is the device's state.
                mm.outbox
                    .wakeups
                    .retain(|w| *w != fraglab_mm::Wakeup::PageReporting);
                let text = match (mm.reporting.order(), mm.reporting.state) {
                    (None, _) => "no reporting device (machine.page_reporting_order)".to_string(),
                    (Some(_), ReportingState::Idle) => "idle, no pass pending".to_string(),
                    (Some(order), _) => {
                        let p = mm.page_reporting_process();
                        mm.outbox
                            .wakeups
                            .retain(|w| *w != fraglab_mm::Wakeup::PageReporting);
                        format!(
                            "pass at order {order}: {} reports, {} chunks ({} pages) reported, {} blocks retyped to Movable; {}; {} free pages reported, {} pages not host-backed",
                            p.reports,
                            p.chunks,
                            p.pages,
                            p.retyped_blocks,
                            if p.again { "another pass pending" } else { "idle" },
                            mm.reported_free_pages(),
                            mm.host_discarded_pages(),
                        )
                    }
                };
                mm.debug_check();
                let _ = writeln!(out, "# op[{i}] page_reporting: {text}");
            }
            Op::Alloc { .. }
            | Op::Free { .. }
            | Op::Fault { .. }
            | Op::Write { .. }
            | Op::Read { .. }
            | Op::NrHugepages { .. }
            | Op::Print { .. } => unreachable!("handled by OpRunner::op"),
        }
    }
}

/// Appends one report to `out`.
pub fn print(mm: &mut Mm, what: PrintWhat, zone: Option<ZoneType>, out: &mut String) {
    match what {
        PrintWhat::Buddyinfo => out.push_str(&render_buddyinfo(0, &mm.zone_views())),
        PrintWhat::Pagetypeinfo => out.push_str(&render_pagetypeinfo(0, &mm.zone_views())),
        PrintWhat::Zoneinfo => {
            out.push_str(&render_zoneinfo(0, &mm.zone_views(), &stats_with_zone_items(mm)))
        }
        PrintWhat::Vmstat => out.push_str(&render_vmstat(&mm.zone_views(), &stats_with_zone_items(mm))),
        PrintWhat::Pageblocks => out.push_str(&pageblock_map(mm, zone)),
        PrintWhat::Trace => out.push_str(&render_trace(&mm.take_trace())),
        PrintWhat::Summary => out.push_str(&summary(mm)),
        PrintWhat::Folios => out.push_str(&folio_census(mm)),
        PrintWhat::Compaction => out.push_str(&compaction_report(mm)),
        PrintWhat::ExtfragIndex => out.push_str(&mm.render_extfrag_index()),
        PrintWhat::UnusableIndex => out.push_str(&mm.render_unusable_index()),
    }
}

fn run_stats(st: &fraglab_mm::compaction::CompactRunStats) -> String {
    format!(
        "{} zone runs, migrate scanned {}, free scanned {}, isolated {}, migrated {}, failed {}",
        st.runs, st.migrate_scanned, st.free_scanned, st.isolated, st.migrated_pages, st.failed_pages
    )
}

/// Live folios by kind and order, with their pages.
pub fn folio_census(mm: &Mm) -> String {
    let mut out = String::new();
    let _ = write!(out, "{:<10}", "folios");
    for o in 0..NR_PAGE_ORDERS {
        let _ = write!(out, " {:>8}", format!("order{o}"));
    }
    let _ = writeln!(out, " {:>10}", "pages");
    for kind in FolioKind::ALL {
        let c = mm.folios.census_of(kind);
        let _ = write!(out, "{:<10}", kind.name());
        for v in c {
            let _ = write!(out, " {v:>8}");
        }
        let pages: u64 = c.iter().enumerate().map(|(o, n)| n << o).sum();
        let _ = writeln!(out, " {pages:>10}");
    }
    out
}

/// Compaction and migration counters (/proc/vmstat names), free pageblocks and scores.
pub fn compaction_report(mm: &Mm) -> String {
    use fraglab_mm::vmstat::Stat;
    let mut out = String::new();
    for s in [
        Stat::compact_migrate_scanned,
        Stat::compact_free_scanned,
        Stat::compact_isolated,
        Stat::compact_stall,
        Stat::compact_fail,
        Stat::compact_success,
        Stat::compact_daemon_wake,
        Stat::compact_daemon_migrate_scanned,
        Stat::compact_daemon_free_scanned,
        Stat::pgmigrate_success,
        Stat::pgmigrate_fail,
        Stat::thp_migration_success,
        Stat::thp_migration_fail,
        Stat::thp_migration_split,
        Stat::thp_split_page,
    ] {
        let _ = writeln!(out, "{} {}", s.name(), mm.stat(s));
    }
    for (zi, z) in mm.zones.iter().enumerate().filter(|(_, z)| z.populated()) {
        let _ = writeln!(
            out,
            "zone {:>8}: free order-9 chunks {} order-10 chunks {} (free pageblocks {}), fragmentation score {}",
            z.zone_type.name(),
            z.area.nr_free[9],
            z.area.nr_free[10],
            z.area.nr_free[9] + 2 * z.area.nr_free[10],
            mm.fragmentation_score_zone(zi)
        );
    }
    let _ = writeln!(out, "node fragmentation score {}", mm.fragmentation_score_node(0));
    out
}

pub fn stats_with_zone_items(mm: &Mm) -> [u64; fraglab_mm::vmstat::NR_STATS] {
    mm.stats
}

/// One pageblock (from `start`, clipped to its zone `z_start..z_end`) from a walk of its pages:
/// free and in-use pages, and mixed when an allocated chunk in it was allocated with another
/// migratetype than the block's (page_owner's view, docs/model §30.4), or is an LRU page
/// in an Unmovable or Reclaimable block whatever it was allocated as — the block-device page
/// cache of §33 is allocated UNMOVABLE, and a census by content (/proc/kpageflags, §30.2;
/// the timed engine's `snapshot::pageblock_snapshot`) sees an LRU page next to the block's
/// kernel pages.
fn block_state(mm: &Mm, start: u32, z_start: u32, z_end: u32) -> BlockState {
    let lo = start.max(z_start);
    let hi = (start + PAGEBLOCK_NR_PAGES).min(z_end);
    let mt = mm.block_mt(start).idx();
    let mut s = BlockState {
        migratetype: mt,
        ..Default::default()
    };
    let count = |s: &mut BlockState, kind: PageKind, head: u32, nr: u32| {
        s.present = true;
        match kind {
            PageKind::Buddy => s.free_pages += nr,
            PageKind::Allocated => {
                s.used_pages += nr;
                s.mixed |= alloc_mixes(mt, mm.pages.alloc_migratetype(head) as usize)
                    || (alloc_mixes(mt, MigrateType::Movable.idx()) && mm.pages.flag(head, PG_LRU));
            }
            _ => s.used_pages += nr,
        }
    };
    let mut p = lo;
    // A block may start inside a chunk larger than a block.
    if mm.pages.kind(p) == PageKind::Tail {
        if let Some((head, order)) = mm.enclosing_chunk(p) {
            let end = (head + (1 << order)).min(hi);
            count(&mut s, mm.pages.kind(head), head, end - p);
            p = end;
        }
    }
    while p < hi {
        let kind = mm.pages.kind(p);
        let nr = match kind {
            PageKind::Hole => {
                p += 1;
                continue;
            }
            PageKind::Reserved | PageKind::Tail => 1,
            _ => 1u32 << mm.pages.order(p),
        };
        count(&mut s, kind, p, nr);
        p += nr;
    }
    s
}

/// The pageblock map: one character per pageblock, 64 per row, each row prefixed with its first
/// pfn. Upper case = the block is entirely free; lower case = in use (allocated, PCP-cached or
/// reserved pages); `!` = the block holds allocations of another migratetype than its own
/// ("mixed": polluted by a steal). The characters are `BlockState::map_char`
/// (`fraglab_spec::result::pageblock`).
pub fn pageblock_map(mm: &Mm, only: Option<ZoneType>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Pageblock map (one char per {PAGEBLOCK_NR_PAGES}-page block; U/M/R/H/I = free block of that type, u/m/r/h/i = in use, ! = mixed)"
    );
    for z in mm.zones.iter().filter(|z| z.populated()) {
        if only.is_some_and(|o| o != z.zone_type) {
            continue;
        }
        let _ = writeln!(out, "Node {}, zone {:>8}", z.nid, z.zone_type.name());
        let first = z.start_pfn & !(PAGEBLOCK_NR_PAGES - 1);
        let mut b = first;
        let mut row = String::new();
        let mut row_start = b;
        while b < z.end_pfn() {
            row.push(block_state(mm, b, z.start_pfn, z.end_pfn()).map_char());
            b += PAGEBLOCK_NR_PAGES;
            if row.len() == 64 || b >= z.end_pfn() {
                let trimmed = row.trim_end();
                if !trimmed.is_empty() {
                    let _ = writeln!(out, "  {row_start:#010x} {trimmed}");
                }
                row.clear();
                row_start = b;
            }
        }
    }
    out
}

/// A short state summary: per zone free pages, free pageblocks, block census by type with the
/// mixed count, and the fallback classes of §6.5.
pub fn summary(mm: &Mm) -> String {
    let mut out = String::new();
    for (zi, z) in mm.zones.iter().enumerate().filter(|(_, z)| z.populated()) {
        let blocks = mm.blocks_by_type(zi);
        let _ = writeln!(
            out,
            "zone {:>8}: managed {} free {} free_blocks {} boost {} | blocks U {} M {} R {} H {} I {}",
            z.zone_type.name(),
            z.managed,
            z.nr_free_pages(),
            z.stat(fraglab_mm::vmstat::Stat::nr_free_pages_blocks),
            z.watermark_boost,
            blocks[0],
            blocks[1],
            blocks[2],
            blocks[3],
            blocks[4]
        );
    }
    let names = ["Unmovable", "Movable", "Reclaimable"];
    let f = &mm.fallbacks;
    for (label, table) in [
        ("claimer", &f.claim_whole),
        ("steal", &f.claim_partial),
        ("pollute", &f.steal),
    ] {
        for (a, row) in table.iter().enumerate() {
            for (b, n) in row.iter().enumerate() {
                if *n > 0 {
                    let _ = writeln!(out, "fallback {label} {}-from-{}: {n}", names[a], names[b]);
                }
            }
        }
    }
    out
}
