//! Compaction (docs/model §9): suitability, deferral, `compact_zone` with the migration
//! and free scanners, skip bits and cached positions, `compaction_alloc`/`compaction_free` with
//! per-order isolated free lists and free-page split (`compaction_free` takes back a target a
//! failed migration did not use, see migrate.rs), capture, `try_to_compact_pages`,
//! kcompactd's work function, proactive compaction and /proc/sys/vm/compact_memory. Models
//! mm/compaction.c of Linux 6.18; migration itself is in `migrate.rs`.
//!
//! The fast paths (§24) are modelled as the kernel has them: `fast_find_migrateblock` (the
//! migration scanner's jump to a block that already has free MOVABLE chunks of orders
//! cc.order−1..3, with the one rewind per run) and `fast_isolate_freepages` (one free chunk per
//! call from the MOVABLE lists near the free scanner, plus `fast_isolate_around`), sharing
//! `fast_search_fail` and `freelist_scan_limit`; both are off for order −1 and the migration
//! one also when skip hints are ignored. The free-list rotations are exact. `too_many_isolated`
//! (§24.4) is evaluated on the model's own NR_ISOLATED_* at each `isolate_migratepages_block`
//! entry (−EAGAIN → CONTENDED).
//!
//! Simplifications (§19.1 item 5, §24.7), each named where it applies:
//! * lock contention only under the clocked engine: an ASYNC run's trylocks of `zone->lock`
//!   and the lruvec's `lru_lock` fail when another CPU holds the lock at that moment of virtual
//!   time ([`LocksBusy`], §24.5); no `need_resched` or fatal signals; the −ENOMEM and the
//!   −EAGAIN CONTENDED are kept; the sync-mode `reclaim_throttle(ISOLATED)` wait is not
//!   modelled (nothing else runs while it would wait);
//! * no LRU-add batches (`lru_add_drain` is a no-op); the drain check drains this CPU's PCP
//!   lists for the zone, as `lru_add_drain_cpu_zone` does.

use crate::folio::FolioId;
use crate::gfp::{AllocFlags, Gfp};
use crate::mmzone::*;
use crate::node::{trace_kind, Mm};
use crate::page_alloc::Fallback;
use crate::trace::TraceEvent;
use crate::types::*;
use crate::vmstat::Stat;

/// `COMPACT_CLUSTER_MAX`.
pub const COMPACT_CLUSTER_MAX: u64 = 32;
/// `COMPACT_MAX_DEFER_SHIFT`.
pub const COMPACT_MAX_DEFER_SHIFT: u32 = 6;

/// `enum compact_result` (§7.1), in kernel order (the order matters: try_to_compact_pages takes
/// the max over zones).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CompactResult {
    NotSuitableZone = 0,
    Skipped = 1,
    Deferred = 2,
    NoSuitablePage = 3,
    Continue = 4,
    Complete = 5,
    PartialSkipped = 6,
    Contended = 7,
    Success = 8,
}

impl CompactResult {
    /// The name tracepoints print (`COMPACTION_STATUS`).
    pub fn name(self) -> &'static str {
        match self {
            CompactResult::NotSuitableZone => "not_suitable_zone",
            CompactResult::Skipped => "skipped",
            CompactResult::Deferred => "deferred",
            CompactResult::NoSuitablePage => "no_suitable_page",
            CompactResult::Continue => "continue",
            CompactResult::Complete => "complete",
            CompactResult::PartialSkipped => "partial_skipped",
            CompactResult::Contended => "contended",
            CompactResult::Success => "success",
        }
    }
}

pub use fraglab_types::switches::CompactPriority;

/// `enum migrate_mode`.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MigrateMode {
    Async = 0,
    SyncLight = 1,
    Sync = 2,
}

pub use fraglab_types::switches::FolioMode;

pub use crate::kcompactd::{KcompactdCycle, KcompactdState, HPAGE_FRAG_CHECK_INTERVAL_MSEC};

/// Compaction knobs and model switches.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CompactionConfig {
    /// `vm.extfrag_threshold` (§9.2.4).
    pub extfrag_threshold: i32,
    /// `vm.compaction_proactiveness` (§9.12).
    pub proactiveness: u32,
    /// `vm.compact_unevictable_allowed` (§29.2): isolation takes PG_unevictable folios only
    /// when true (ISOLATE_UNEVICTABLE).
    pub unevictable_allowed: bool,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            extfrag_threshold: 500,
            proactiveness: 20,
            unevictable_allowed: true,
        }
    }
}

/// `struct capture_control` (§9.10).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CaptureControl {
    pub zone: usize,
    pub order: u32,
    pub migratetype: MigrateType,
    pub page: Option<u32>,
}

/// `struct compact_control` (§9.1).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct CompactControl {
    pub zi: usize,
    /// −1 = whole zone (/proc, proactive).
    pub order: i32,
    pub gfp: Gfp,
    pub migratetype: MigrateType,
    pub mode: MigrateMode,
    pub alloc_flags: AllocFlags,
    pub highest_zoneidx: usize,
    pub direct_compaction: bool,
    pub proactive_compaction: bool,
    pub whole_zone: bool,
    pub ignore_skip_hint: bool,
    /// `no_set_skip_hint`: a run for isolation rather than compaction ([`Mm::evacuate_range`])
    /// leaves the skip bits and cached scanner positions alone.
    pub no_set_skip_hint: bool,
    pub ignore_block_suitable: bool,
    pub finish_pageblock: bool,
    pub migrate_pfn: u32,
    pub free_pfn: u32,
    /// Isolated free chunks kept at their buddy order (§9.1).
    pub freepages: [Vec<u32>; NR_PAGE_ORDERS],
    pub nr_freepages: u64,
    pub migratepages: Vec<FolioId>,
    pub nr_migratepages: u64,
    pub total_migrate_scanned: u64,
    pub total_free_scanned: u64,
    /// The CPU the compactor runs on (its PCP receives migrated-away sources).
    pub cpu: u32,
    /// `fast_search_fail` (§24.1): shared by both fast paths; a failure of either increments
    /// it, a success of either resets it. The scan limit is `(32 >> fail) + 1`.
    pub fast_search_fail: u32,
    /// `search_order` (§24.3): where `fast_isolate_freepages` starts its round-robin over
    /// orders; set to the order requested by the callers (compact_zone_order, kcompactd).
    pub search_order: i32,
    /// `fast_start_pfn` (§24.2.4–5): the lowest block `fast_find_migrateblock` chose in this
    /// run (0 = none yet, `u32::MAX` = the one rewind was made and recording has stopped).
    pub fast_start_pfn: u32,
    /// Migration's extra passes and writeback waits in this run (`migrate.rs`, §25.2).
    pub migrate_retries: u64,
    pub migrate_wait_ns: u64,
    /// `contended` (§24.5): an ASYNC run's trylock found the zone or LRU lock held by another
    /// CPU; it stays set for the rest of the run.
    pub contended: bool,
    /// compact_isolated and pgmigrate_success at the run's start (the run's work so far, for
    /// placing its lock calls in time).
    clock_base: (u64, u64),
}

impl CompactControl {
    /// A control block as the callers build it (§9.1): no flags set, scan totals zero,
    /// `search_order` = `order` (compact_zone_order and kcompactd set it so; order −1 runs
    /// never read it).
    pub fn new(zi: usize, order: i32, gfp: Gfp, mode: MigrateMode, cpu: u32) -> Self {
        CompactControl {
            zi,
            order,
            gfp,
            migratetype: gfp.migratetype(),
            mode,
            alloc_flags: AllocFlags(0),
            highest_zoneidx: zi % MAX_NR_ZONES,
            direct_compaction: false,
            proactive_compaction: false,
            whole_zone: false,
            ignore_skip_hint: false,
            no_set_skip_hint: false,
            ignore_block_suitable: false,
            finish_pageblock: false,
            migrate_pfn: 0,
            free_pfn: 0,
            freepages: Default::default(),
            nr_freepages: 0,
            migratepages: Vec::new(),
            nr_migratepages: 0,
            total_migrate_scanned: 0,
            total_free_scanned: 0,
            cpu,
            fast_search_fail: 0,
            search_order: order.max(0),
            fast_start_pfn: 0,
            migrate_retries: 0,
            migrate_wait_ns: 0,
            contended: false,
            clock_base: (0, 0),
        }
    }

    /// `freelist_scan_limit` (§24.1): `(COMPACT_CLUSTER_MAX >> fast_search_fail) + 1` — 33,
    /// 17, 9, 5, 3, 2, 1, … entries.
    pub fn freelist_scan_limit(&self) -> u32 {
        (COMPACT_CLUSTER_MAX as u32)
            .checked_shr(self.fast_search_fail)
            .unwrap_or(0)
            + 1
    }
}

/// What `isolate_migratepages` reports (`isolate_migrate_t`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum IsolateMigrate {
    /// −EAGAIN/−EINTR from `isolate_migratepages_block`: compact_zone ends CONTENDED.
    Abort,
    None,
    Success,
}

/// What one `compact_zone` run did, for whoever charges time for it.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactRunStats {
    pub migrate_scanned: u64,
    pub free_scanned: u64,
    pub isolated: u64,
    pub migrated_pages: u64,
    pub failed_pages: u64,
    pub runs: u64,
    /// Migration's extra passes and its SYNC waits for writeback (§25.2, `migrate.rs`).
    pub migrate_retries: u64,
    pub migrate_wait_ns: u64,
}

impl CompactRunStats {
    pub(crate) fn add(&mut self, o: &CompactRunStats) {
        self.migrate_scanned += o.migrate_scanned;
        self.free_scanned += o.free_scanned;
        self.isolated += o.isolated;
        self.migrated_pages += o.migrated_pages;
        self.failed_pages += o.failed_pages;
        self.runs += o.runs;
        self.migrate_retries += o.migrate_retries;
        self.migrate_wait_ns += o.migrate_wait_ns;
    }
}

/// A compaction run's CPU cost per unit of work, as the clocked engine charges it (its cost
/// model's figures): the one formula for a run's time, used by the engine to charge a run and
/// by the model to place a run's lock calls in virtual time ([`LocksBusy`]).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactCosts {
    pub run_ns: u64,
    pub migrate_scan_pfn_ns_x1000: u64,
    pub free_scan_pfn_ns_x1000: u64,
    pub isolate_page_ns: u64,
    pub migrate_page_ns: u64,
}

impl CompactCosts {
    /// The CPU time of the work `st` counts: a fixed cost per run, the two scanners per pfn,
    /// isolation per page (free and migration sides), migration per page, and one isolation's
    /// cost per extra migration pass.
    pub fn cpu_ns(&self, st: &CompactRunStats) -> u64 {
        st.runs * self.run_ns
            + st.migrate_scanned * self.migrate_scan_pfn_ns_x1000 / 1000
            + st.free_scanned * self.free_scan_pfn_ns_x1000 / 1000
            + st.isolated * self.isolate_page_ns
            + st.migrated_pages * self.migrate_page_ns
            + st.migrate_retries * self.isolate_page_ns
    }
}

/// Which locks other CPUs hold, and when, as the clocked engine tells the model before each
/// task step (§24.5, async compaction's `compact_lock_irqsave`): the intervals of virtual time
/// `[start, end)`, sorted and disjoint, in which `zone->lock` and the lruvec's `lru_lock` are
/// held from the step's start on by steps already laid out (other CPUs' work, kswapd's, the
/// vmstat worker's), and the costs that place this step's lock calls in that time. `None`
/// without a clock: one thing runs at a time and no trylock fails.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct LocksBusy {
    pub zone: Vec<(u64, u64)>,
    pub lru: Vec<(u64, u64)>,
    pub costs: CompactCosts,
    /// The compaction work this step did before the current run (ns): a later run's lock
    /// calls come after it. Reset by the engine at each step.
    pub elapsed_ns: u64,
    /// Trylocks that failed, over the whole run of the engine: `zone->lock`, `lru_lock`.
    pub trylock_failed: [u64; 2],
}

/// Whether a sorted list of disjoint intervals covers `t`.
fn busy_at(list: &[(u64, u64)], t: u64) -> bool {
    let i = list.partition_point(|&(_, e)| e <= t);
    list.get(i).is_some_and(|&(s, _)| s <= t)
}

/// `pageblock_start_pfn`.
#[inline]
fn pb_start(pfn: u32) -> u32 {
    pfn & !(PAGEBLOCK_NR_PAGES - 1)
}

/// `compact_gap(order)` = 2 << order (§9.2.3).
#[inline]
pub fn compact_gap(order: u32) -> u64 {
    2u64 << order
}

impl Mm {
    /// Emits a compaction tracepoint if its group is enabled.
    pub(crate) fn ctrace(&mut self, kind: u32, ev: TraceEvent) {
        if self.trace_on(kind) {
            self.emit(0, ev);
        }
    }

    fn defer_event(&mut self, kind: u8, zi: usize, order: u32) {
        let c = &self.zones[zi].compact;
        let ev = TraceEvent::MmCompactionDefer {
            kind,
            zone: zi as u8,
            order: order as i32,
            considered: c.considered,
            defer_shift: c.defer_shift,
            order_failed: c.order_failed as i32,
        };
        self.ctrace(trace_kind::COMPACTION_DEFER, ev);
    }

    // ---- indices (§9.2) ---------------------------------------------------------------------

    /// `fill_contig_page_info`: (free pages, free blocks, suitable blocks for `order`).
    fn contig_page_info(&self, zi: usize, order: u32) -> (u64, u64, u64) {
        let a = &self.zones[zi].area;
        let (mut free_pages, mut blocks, mut suitable) = (0u64, 0u64, 0u64);
        for o in 0..NR_PAGE_ORDERS {
            let n = a.nr_free[o];
            blocks += n;
            free_pages += n << o;
            if o as u32 >= order {
                suitable += n << (o as u32 - order);
            }
        }
        (free_pages, blocks, suitable)
    }

    /// `fragmentation_index` (§9.2): −1000 if a suitable chunk exists, 0 with no free blocks,
    /// else 1000 − (1000 + free·1000/2^order) / blocks.
    pub fn fragmentation_index(&self, zi: usize, order: u32) -> i32 {
        let (free_pages, blocks, suitable) = self.contig_page_info(zi, order);
        if blocks == 0 {
            return 0;
        }
        if suitable > 0 {
            return -1000;
        }
        1000 - ((1000 + free_pages * 1000 / (1u64 << order)) / blocks) as i32
    }

    /// `unusable_free_index` (debugfs unusable_index) ×1000.
    pub fn unusable_free_index(&self, zi: usize, order: u32) -> u64 {
        let (free_pages, _, suitable) = self.contig_page_info(zi, order);
        if free_pages == 0 {
            return 1000;
        }
        (free_pages - (suitable << order)) * 1000 / free_pages
    }

    /// `extfrag_for_order` (§9.2): percent of free memory in chunks below `order`.
    pub fn extfrag_for_order(&self, zi: usize, order: u32) -> u64 {
        let (free_pages, _, suitable) = self.contig_page_info(zi, order);
        if free_pages == 0 {
            return 0;
        }
        (free_pages - (suitable << order)) * 100 / free_pages
    }

    /// `fragmentation_score_zone` = extfrag_for_order(zone, 9) (§9.12.2).
    pub fn fragmentation_score_zone(&self, zi: usize) -> u64 {
        self.extfrag_for_order(zi, PAGEBLOCK_ORDER)
    }

    /// `fragmentation_score_node` (§9.12.2).
    pub fn fragmentation_score_node(&self, nid: u32) -> u64 {
        let zones = self.node_zones(nid);
        let node_present: u64 = self.zones[zones.clone()].iter().map(|z| z.present as u64).sum();
        zones
            .filter(|&zi| self.zones[zi].populated())
            .map(|zi| self.zones[zi].present as u64 * self.fragmentation_score_zone(zi) / (node_present + 1))
            .sum()
    }

    /// `fragmentation_score_wmark` (§9.12.3).
    pub fn fragmentation_score_wmark(&self, low: bool) -> u64 {
        let wmark_low = 100u64.saturating_sub(self.compact.cfg.proactiveness as u64);
        let leeway = 10u64.min(wmark_low / 2);
        if low {
            wmark_low
        } else {
            (wmark_low + leeway).min(100)
        }
    }

    /// `__compaction_suitable` (§9.2.3).
    fn __compaction_suitable(
        &self,
        zi: usize,
        order: u32,
        watermark: u64,
        highest: usize,
        free: i64,
    ) -> bool {
        let z = &self.zones[zi];
        let mut wm = watermark + compact_gap(order);
        if order > PAGE_ALLOC_COSTLY_ORDER {
            wm += z.wmark_pages(WMARK_LOW) - z.wmark_pages(WMARK_MIN);
        }
        self.__zone_watermark_ok(
            zi,
            0,
            wm,
            ZoneType::ALL[highest],
            AllocFlags(AllocFlags::CMA),
            free,
        )
    }

    /// `compaction_suitable` (§9.2.3–4), with the fragmentation index for costly orders.
    pub fn compaction_suitable(&mut self, zi: usize, order: u32, watermark: u64, highest: usize) -> bool {
        let free = self.zones[zi].nr_free_pages();
        let mut suitable = self.__compaction_suitable(zi, order, watermark, highest, free);
        let mut ret = if suitable {
            CompactResult::Continue
        } else {
            CompactResult::Skipped
        };
        if suitable && order > PAGE_ALLOC_COSTLY_ORDER {
            let fi = self.fragmentation_index(zi, order);
            if fi >= 0 && fi <= self.compact.cfg.extfrag_threshold {
                suitable = false;
                ret = CompactResult::NotSuitableZone;
            }
        }
        let ev = TraceEvent::MmCompactionSuitableFinished {
            finished: false,
            zone: zi as u8,
            order: order as i32,
            ret: ret as u8,
        };
        self.ctrace(trace_kind::COMPACTION_DECIDE, ev);
        suitable
    }

    /// `compaction_suit_allocation_order` (§9.2.1–2, §8 D9).
    pub fn compaction_suit_allocation_order(
        &mut self,
        zi: usize,
        order: u32,
        highest: usize,
        alloc_flags: AllocFlags,
        is_async: bool,
        kcompactd: bool,
    ) -> CompactResult {
        let z = &self.zones[zi];
        let free = if kcompactd && self.defrag_watermarks() {
            z.stat(Stat::nr_free_pages_blocks)
        } else {
            z.nr_free_pages()
        };
        let watermark = z.wmark_pages(alloc_flags.wmark() as usize);
        let hz = ZoneType::ALL[highest];
        if self.__zone_watermark_ok(zi, order, watermark, hz, alloc_flags, free) {
            return CompactResult::Success;
        }
        // ALLOC_CMA is 0 without CONFIG_CMA, so this test always applies to costly async runs.
        if order > PAGE_ALLOC_COSTLY_ORDER
            && is_async
            && !self.__zone_watermark_ok(
                zi,
                0,
                watermark + compact_gap(order),
                hz,
                AllocFlags(0),
                z.nr_free_pages(),
            )
        {
            return CompactResult::Skipped;
        }
        if !self.compaction_suitable(zi, order, watermark, highest) {
            return CompactResult::Skipped;
        }
        CompactResult::Continue
    }

    // ---- deferral (§9.3) --------------------------------------------------------------------

    /// `defer_compaction`.
    pub fn defer_compaction(&mut self, zi: usize, order: u32) {
        let c = &mut self.zones[zi].compact;
        c.considered = 0;
        c.defer_shift = (c.defer_shift + 1).min(COMPACT_MAX_DEFER_SHIFT);
        if order < c.order_failed {
            c.order_failed = order;
        }
        self.defer_event(1, zi, order);
    }

    /// `compaction_deferred`.
    pub fn compaction_deferred(&mut self, zi: usize, order: u32) -> bool {
        let c = &mut self.zones[zi].compact;
        if order < c.order_failed {
            return false;
        }
        c.considered += 1;
        let limit = 1u32 << c.defer_shift;
        if c.considered >= limit {
            c.considered = limit;
            return false;
        }
        self.defer_event(0, zi, order);
        true
    }

    /// `compaction_defer_reset`.
    pub fn compaction_defer_reset(&mut self, zi: usize, order: u32, alloc_success: bool) {
        let c = &mut self.zones[zi].compact;
        if alloc_success {
            c.considered = 0;
            c.defer_shift = 0;
        }
        if order >= c.order_failed {
            c.order_failed = order + 1;
        }
        self.defer_event(2, zi, order);
    }

    /// `compaction_restarting`.
    pub fn compaction_restarting(&self, zi: usize, order: u32) -> bool {
        let c = &self.zones[zi].compact;
        order >= c.order_failed
            && c.defer_shift == COMPACT_MAX_DEFER_SHIFT
            && c.considered >= 1 << COMPACT_MAX_DEFER_SHIFT
    }

    // ---- skip bits and cached positions (§9.7) ----------------------------------------------

    /// `reset_cached_positions`.
    pub fn reset_cached_positions(&mut self, zi: usize) {
        let z = &mut self.zones[zi];
        if z.spanned == 0 {
            return;
        }
        let start = z.start_pfn;
        let free = pb_start(z.end_pfn() - 1);
        z.compact.cached_migrate_pfn = [start, start];
        z.compact.cached_free_pfn = free;
    }

    /// Whether a block lies wholly in the zone and has memory at both ends
    /// (`pageblock_pfn_to_page` on a single node without offline sections).
    fn block_in_zone(&self, zi: usize, start: u32, end: u32) -> bool {
        let z = &self.zones[zi];
        let start = start.max(z.start_pfn);
        z.spans(start)
            && z.spans(end - 1)
            && self.pages.kind(start) != PageKind::Hole
            && self.pages.kind(end - 1) != PageKind::Hole
    }

    /// `__reset_isolation_suitable` (§9.7): two cursors, one up from the zone start and one
    /// down from the zone end, clear the skip bits of blocks where a sample (every 8th page)
    /// finds an LRU page (lower cursor) or a free buddy page (upper cursor; only in MOVABLE
    /// blocks until its restart point is set), and derive the restart positions. Does nothing
    /// unless `compact_blockskip_flush` is set.
    pub fn reset_isolation_suitable(&mut self, zi: usize) {
        if !self.zones[zi].compact.blockskip_flush || !self.zones[zi].populated() {
            return;
        }
        self.zones[zi].compact.blockskip_flush = false;
        let z = &self.zones[zi];
        let mut migrate_pfn = z.start_pfn;
        let mut free_pfn = z.end_pfn() - 1;
        let mut reset_migrate = free_pfn;
        let mut reset_free = migrate_pfn;
        let (mut source_set, mut free_set) = (false, false);
        while migrate_pfn < free_pfn {
            if self.reset_isolation_pfn(zi, migrate_pfn, true, source_set) && migrate_pfn < reset_migrate {
                source_set = true;
                reset_migrate = migrate_pfn;
                let c = &mut self.zones[zi].compact;
                c.init_migrate_pfn = reset_migrate;
                c.cached_migrate_pfn = [reset_migrate, reset_migrate];
            }
            if self.reset_isolation_pfn(zi, free_pfn, free_set, true) && free_pfn > reset_free {
                free_set = true;
                reset_free = free_pfn;
                let c = &mut self.zones[zi].compact;
                c.init_free_pfn = reset_free;
                c.cached_free_pfn = reset_free;
            }
            migrate_pfn += PAGEBLOCK_NR_PAGES;
            free_pfn = free_pfn.saturating_sub(PAGEBLOCK_NR_PAGES);
        }
        if reset_migrate >= reset_free {
            let c = &mut self.zones[zi].compact;
            c.cached_migrate_pfn = [migrate_pfn, migrate_pfn];
            c.cached_free_pfn = free_pfn;
        }
    }

    /// PageLRU of any page (tails read their head) and PageBuddy (heads only).
    fn page_lru_or_buddy(&self, pfn: u32) -> (bool, bool) {
        match self.pages.kind(pfn) {
            PageKind::Buddy => (false, true),
            PageKind::Allocated => (self.pages.flag(pfn, PG_LRU), false),
            PageKind::Tail => match self.enclosing_chunk(pfn) {
                Some((h, _)) if self.pages.kind(h) == PageKind::Allocated => {
                    (self.pages.flag(h, PG_LRU), false)
                }
                _ => (false, false),
            },
            _ => (false, false),
        }
    }

    /// `pageblock_skip_persistent`: the page is part of a compound page of order ≥ 9.
    fn pageblock_skip_persistent(&self, pfn: u32) -> bool {
        matches!(self.enclosing_chunk(pfn), Some((h, o)) if o >= PAGEBLOCK_ORDER && self.pages.kind(h) == PageKind::Allocated)
    }

    /// `__reset_isolation_pfn` for the block of `pfn`.
    fn reset_isolation_pfn(&mut self, zi: usize, pfn: u32, check_source: bool, check_target: bool) -> bool {
        let z = &self.zones[zi];
        if !z.spans(pfn) || matches!(self.pages.kind(pfn), PageKind::Hole) {
            return false;
        }
        if self.pageblock_skip_persistent(pfn) {
            return false;
        }
        if check_source && check_target && !self.block_skip(pfn) {
            return true;
        }
        if !check_source && check_target && self.block_mt(pfn) != MigrateType::Movable {
            return false;
        }
        let start = pb_start(pfn).max(z.start_pfn);
        let end = (pb_start(pfn) + PAGEBLOCK_NR_PAGES - 1).min(z.end_pfn() - 1);
        if self.pages.kind(end) == PageKind::Hole {
            return false;
        }
        let mut p = start;
        while p <= end {
            let (lru, buddy) = self.page_lru_or_buddy(p);
            if (check_source && lru) || (check_target && buddy) {
                self.set_block_skip(p, false);
                return true;
            }
            p += 1 << PAGE_ALLOC_COSTLY_ORDER;
        }
        false
    }

    fn update_cached_migrate(&mut self, cc: &CompactControl, pfn: u32) {
        if cc.no_set_skip_hint {
            return;
        }
        let pfn = pb_start(pfn)
            + if pfn & (PAGEBLOCK_NR_PAGES - 1) == 0 {
                0
            } else {
                PAGEBLOCK_NR_PAGES
            };
        let c = &mut self.zones[cc.zi].compact;
        if pfn > c.cached_migrate_pfn[0] {
            c.cached_migrate_pfn[0] = pfn;
        }
        if cc.mode != MigrateMode::Async && pfn > c.cached_migrate_pfn[1] {
            c.cached_migrate_pfn[1] = pfn;
        }
    }

    fn update_pageblock_skip(&mut self, cc: &CompactControl, block: u32, pfn: u32) {
        if cc.no_set_skip_hint {
            return;
        }
        self.set_block_skip(block, true);
        let c = &mut self.zones[cc.zi].compact;
        if pfn < c.cached_free_pfn {
            c.cached_free_pfn = pfn;
        }
    }

    // ---- the migration scanner (§9.6) -------------------------------------------------------

    /// `suitable_migration_source` (§9.6.2c). Async direct compaction for a MOVABLE request
    /// scans Movable blocks only, so the block-device pages an Unmovable block holds
    /// (directory blocks, inode-table readahead, §33.1 item 6) are moved out only by kcompactd,
    /// SYNC_LIGHT/SYNC compaction or direct compaction for an unmovable request.
    fn suitable_migration_source(&self, cc: &CompactControl, start: u32) -> bool {
        if self.pageblock_skip_persistent(start) {
            return false;
        }
        if cc.mode != MigrateMode::Async || !cc.direct_compaction {
            return true;
        }
        let bmt = self.block_mt(start);
        if cc.migratetype == MigrateType::Movable {
            bmt == MigrateType::Movable
        } else {
            bmt == cc.migratetype
        }
    }

    /// Whether the migration scanner may isolate the folio at `pfn` (§9.6.3): on the LRU, not
    /// already isolated, below cc.order and pageblock_order (Zi Yan's rule), file folios only
    /// with __GFP_FS, and with `folio_mode = skip_large` no large folio at all.
    fn folio_isolatable(&self, cc: &CompactControl, id: FolioId) -> bool {
        let f = &self.folios.folios[id as usize];
        if f.isolated() || !f.kind.on_lru() {
            return false;
        }
        // §29.2.2/§29.2.4 (`isolate_migratepages_block`): without ISOLATE_UNEVICTABLE an
        // unevictable folio fails isolation (and so, in async direct compaction, abandons its
        // cc.order sub-block below). Every compaction of the model reads the sysctl; the
        // alloc_contig_range callers that always take them (§29.2.5) are not modelled.
        if f.unevictable() && !self.compact.cfg.unevictable_allowed {
            return false;
        }
        let order = f.order as u32;
        if order > 0 && !self.policy.compaction_isolates_large_folios() {
            return false;
        }
        if skip_isolation_on_order(order, cc.order) {
            return false;
        }
        if f.kind.file_lru() && !cc.gfp.intersects(Gfp::FS) {
            return false;
        }
        self.migrate_isolation_ok(cc.mode, id)
    }

    /// Fragmentation blame (issue 37): whether the allocated chunk at `pfn`, which the migrate
    /// scanner did not isolate, is one no compaction could move — a page outside the LRU
    /// (slab, page tables, kernel pages: §9.3), an unevictable folio (§29.2), or one
    /// migration refuses (pinned, busy buffers: §25) — rather than one skipped for this run
    /// only (already isolated, a large folio skipped by order or folio mode, a file folio
    /// under a NOFS compactor).
    fn blocks_compaction(&self, cc: &CompactControl, pfn: u32) -> bool {
        let Some(id) = self.folio_at(pfn) else {
            return true;
        };
        let f = &self.folios.folios[id as usize];
        if f.isolated() {
            return false;
        }
        if !f.kind.on_lru() || (f.unevictable() && !self.compact.cfg.unevictable_allowed) {
            return true;
        }
        let order = f.order as u32;
        if (order > 0 && !self.policy.compaction_isolates_large_folios())
            || skip_isolation_on_order(order, cc.order)
            || (f.kind.file_lru() && !cc.gfp.intersects(Gfp::FS))
        {
            return false;
        }
        !self.migrate_isolation_ok(cc.mode, id)
    }

    /// `too_many_isolated` (§24.4.2, compaction.c): NR_ISOLATED_ANON + NR_ISOLATED_FILE >
    /// (inactive + active)/2 over the node's anon and file LRUs, with active and inactive first
    /// divided by 8 for __GFP_FS compactors (LRU/16; NOFS compactors get LRU/2).
    pub fn too_many_isolated(&self, cc: &CompactControl) -> bool {
        let g = |s: Stat| self.stat(s);
        let mut inactive = g(Stat::nr_inactive_file) + g(Stat::nr_inactive_anon);
        let mut active = g(Stat::nr_active_file) + g(Stat::nr_active_anon);
        let isolated = g(Stat::nr_isolated_file) + g(Stat::nr_isolated_anon);
        if cc.gfp.intersects(Gfp::FS) {
            inactive >>= 3;
            active >>= 3;
        }
        isolated > (inactive + active) / 2
    }

    /// `compact_lock_irqsave` (§24.5): an ASYNC run that has not yet found a lock contended
    /// tries it first and, when another CPU holds it, sets `contended` (and takes it anyway:
    /// the wait is the clocked engine's, which lays this run's holds out after the other's).
    /// The call's moment: the step's start, plus the compaction this step did before this run,
    /// plus this run's work so far (`pending_*`: pfns scanned in the current block, not yet in
    /// the run's totals) at the cost model's rates. Without a clock no trylock fails.
    fn compact_lock(
        &mut self,
        cc: &mut CompactControl,
        zone_lock: bool,
        pending_migrate: u64,
        pending_free: u64,
    ) {
        if cc.mode != MigrateMode::Async || cc.contended {
            return;
        }
        let (isolated, migrated) = (
            self.stat(Stat::compact_isolated) - cc.clock_base.0,
            self.stat(Stat::pgmigrate_success) - cc.clock_base.1,
        );
        let now = self.cur.now_ns;
        let Some(b) = &mut self.cur.locks_busy else {
            return;
        };
        let so_far = CompactRunStats {
            migrate_scanned: cc.total_migrate_scanned + pending_migrate,
            free_scanned: cc.total_free_scanned + pending_free,
            isolated,
            migrated_pages: migrated,
            runs: 1,
            migrate_retries: cc.migrate_retries,
            ..Default::default()
        };
        let t = now + b.elapsed_ns + b.costs.cpu_ns(&so_far);
        let list = if zone_lock { &b.zone } else { &b.lru };
        if busy_at(list, t) {
            cc.contended = true;
            b.trylock_failed[!zone_lock as usize] += 1;
        }
    }

    /// `isolate_migratepages_block` (§9.6.3) over [low, end). Returns the pfn where it stopped,
    /// or `None` for −EAGAIN: on entry (before every batch of at most 32 pages) `too_many_isolated`
    /// (§24.4) with pages already isolated in this run or in ASYNC mode. Simplified (§24.7,
    /// single-threaded model): in sync modes `reclaim_throttle(ISOLATED)` would wait for other
    /// isolators to put pages back; the model has none running meanwhile, so the wait is not
    /// modelled and isolation proceeds (no −EINTR: no signals).
    fn isolate_migratepages_block(&mut self, cc: &mut CompactControl, mut low: u32, end: u32) -> Option<u32> {
        if self.too_many_isolated(cc) && (cc.nr_migratepages > 0 || cc.mode == MigrateMode::Async) {
            return None;
        }
        let start = low;
        let (mut nr_scanned, mut nr_isolated) = (0u64, 0u64);
        let skip_on_failure = cc.direct_compaction && cc.mode == MigrateMode::Async && cc.order > 0;
        let order_block = |pfn: u32, order: i32| -> u32 {
            let o = order.max(0) as u32;
            (pfn | ((1u32 << o) - 1)) + 1
        };
        let mut next_skip = if skip_on_failure {
            order_block(low, cc.order)
        } else {
            0
        };
        let mut sub_isolated: Vec<FolioId> = Vec::new();
        let mut block_claimed = false;
        let mut lru_locked: Option<u32> = None;
        let block_start = pb_start(start);
        while low < end {
            if skip_on_failure && low >= next_skip {
                if nr_isolated > 0 && !sub_isolated.is_empty() {
                    // A whole sub-block isolated: stop and migrate it.
                    break;
                }
                sub_isolated.clear();
                next_skip = order_block(low, cc.order);
            }
            nr_scanned += 1;
            let kind = self.pages.kind(low);
            let mut fail = false;
            match kind {
                PageKind::Buddy => {
                    let o = self.pages.order(low);
                    low += (1 << o) - 1;
                    nr_scanned += (1u64 << o) - 1;
                }
                PageKind::Allocated => {
                    let o = self.pages.order(low);
                    match self.folio_at(low) {
                        Some(id) if self.folio_isolatable(cc, id) => {
                            // The LRU lock is taken at the first folio to isolate and dropped
                            // at every 32-pfn boundary (`compact_unlock_should_abort`).
                            if lru_locked != Some(low / COMPACT_CLUSTER_MAX as u32) {
                                lru_locked = Some(low / COMPACT_CLUSTER_MAX as u32);
                                self.compact_lock(cc, false, nr_scanned, 0);
                            }
                            if !block_claimed && !cc.ignore_skip_hint {
                                block_claimed = true;
                                let was = self.block_skip(block_start);
                                self.set_block_skip(block_start, true);
                                if was && !cc.finish_pageblock {
                                    low = end;
                                    break;
                                }
                            }
                            self.isolate_lru_folio(id);
                            cc.migratepages.push(id);
                            sub_isolated.push(id);
                            cc.nr_migratepages += 1 << o;
                            nr_isolated += 1 << o;
                            low += (1 << o) - 1;
                            // A contended run isolates on, to remove one source of
                            // contention quickly (§24.5).
                            if cc.nr_migratepages >= COMPACT_CLUSTER_MAX
                                && !cc.finish_pageblock
                                && !cc.contended
                            {
                                low += 1;
                                break;
                            }
                        }
                        _ => {
                            if self.blame.is_some() && self.blocks_compaction(cc, low) {
                                // Issue 37: a page the scanner cannot isolate (§9.3, §25)
                                // keeps this block from emptying; blamed on its allocator.
                                if let Some(b) = self.blame.as_deref_mut() {
                                    b.note_compact_blocked(low, o);
                                }
                            }
                            // Skip over the whole compound page.
                            low += (1 << o) - 1;
                            nr_scanned += (1u64 << o) - 1;
                            fail = true;
                        }
                    }
                }
                _ => fail = true,
            }
            if fail && skip_on_failure {
                // Put back what this sub-block isolated and jump to the next sub-block.
                for id in sub_isolated.drain(..) {
                    let o = self.folios.folios[id as usize].order as u64;
                    self.putback_lru_folio(id);
                    cc.migratepages.retain(|x| *x != id);
                    cc.nr_migratepages -= 1 << o;
                    nr_isolated -= 1 << o;
                }
                if low < next_skip {
                    low = next_skip - 1;
                    next_skip += 1 << cc.order.max(0);
                }
            }
            low += 1;
        }
        if low > end {
            low = end;
        }
        if low == end && (nr_isolated == 0 || cc.finish_pageblock) {
            if !cc.ignore_skip_hint {
                self.set_block_skip(block_start, true);
            }
            self.update_cached_migrate(cc, low);
        }
        cc.total_migrate_scanned += nr_scanned;
        if nr_isolated > 0 {
            self.count(Stat::compact_isolated, nr_isolated);
        }
        let ev = TraceEvent::MmCompactionIsolate {
            free: false,
            start_pfn: start,
            end_pfn: low,
            nr_scanned,
            nr_taken: nr_isolated,
        };
        self.ctrace(trace_kind::COMPACTION_ISOLATE, ev);
        cc.migrate_pfn = low;
        Some(low)
    }

    /// Rotates free_list[order][mt] of zone `zi` so that `last` becomes its tail (the entries
    /// after it move to the front, keeping their order). This is `move_freelist_tail(list,
    /// last)` and, with `last` = the entry before `freepage`, `move_freelist_head(list,
    /// freepage)` (§24.2.3, §24.3).
    fn rotate_free_list(&mut self, zi: usize, order: u32, mt: MigrateType, last: u32) {
        let l = self.zones[zi].area.lists[order as usize][mt.idx()];
        let next = self.list_next(last);
        if next == NIL || l.first == NIL {
            return;
        }
        // Splice [first, last] after the old tail.
        self.pages.set_a(l.last, l.first);
        self.pages.set_b(l.first, l.last);
        self.pages.set_a(last, NIL);
        self.pages.set_b(next, NIL);
        let h = &mut self.zones[zi].area.lists[order as usize][mt.idx()];
        h.first = next;
        h.last = last;
    }

    /// `update_fast_start_pfn` (§24.2.4): the lowest free-chunk pfn chosen in this run, until
    /// the one rewind stops the recording.
    fn update_fast_start_pfn(cc: &mut CompactControl, pfn: u32) {
        if cc.fast_start_pfn == u32::MAX {
            return;
        }
        if cc.fast_start_pfn == 0 {
            cc.fast_start_pfn = pfn;
        }
        cc.fast_start_pfn = cc.fast_start_pfn.min(pfn);
    }

    /// `reinit_migrate_pfn` (§24.2.5): once per run, rewind the migration scanner to
    /// `fast_start_pfn`, then stop recording.
    fn reinit_migrate_pfn(cc: &mut CompactControl) -> u32 {
        if cc.fast_start_pfn == 0 || cc.fast_start_pfn == u32::MAX {
            return cc.migrate_pfn;
        }
        cc.migrate_pfn = cc.fast_start_pfn;
        cc.fast_start_pfn = u32::MAX;
        cc.migrate_pfn
    }

    /// `fast_find_migrateblock` (§24.2, compaction.c): the pfn where the migration scanner
    /// starts its linear search. Preconditions: skip hints honoured, block not being finished,
    /// scanner at a block start or the zone start, cc.order > 3, not direct compaction for a
    /// non-MOVABLE type; otherwise `cc.migrate_pfn` unchanged (and no fail counted). Walks the
    /// MOVABLE lists of orders cc.order−1 down to 3 from the head, at most
    /// `freelist_scan_limit` entries in all (the entry that hits the limit is counted too, as
    /// the kernel's post-increment does), for a chunk below
    /// `block_start(migrate_pfn + d)` (d = half the scanner gap at the zone start, an eighth
    /// otherwise) whose block's skip bit is clear. A hit rotates the list so that it is the
    /// tail, records `fast_start_pfn`, resets `fast_search_fail` and returns its block start (a
    /// jump: the blocks in between are not scanned in this run). A miss increments
    /// `fast_search_fail` and rewinds to `fast_start_pfn` once per run. Entries examined are
    /// added to compact_migrate_scanned. The list rotation is exact (§24.7 allows approximating
    /// it). Public for the section tests.
    pub fn fast_find_migrateblock(&mut self, cc: &mut CompactControl) -> u32 {
        let zi = cc.zi;
        let zstart = self.zones[zi].start_pfn;
        let limit = cc.freelist_scan_limit();
        let mut pfn = cc.migrate_pfn;
        if cc.ignore_skip_hint || cc.finish_pageblock {
            return pfn;
        }
        if pfn != zstart && pfn != pb_start(pfn) {
            return pfn;
        }
        if cc.order <= PAGE_ALLOC_COSTLY_ORDER as i32 {
            return pfn;
        }
        if cc.direct_compaction && cc.migratetype != MigrateType::Movable {
            return pfn;
        }
        let mut distance = cc.free_pfn.saturating_sub(cc.migrate_pfn) >> 1;
        if cc.migrate_pfn != zstart {
            distance >>= 2;
        }
        let high_pfn = pb_start(cc.migrate_pfn + distance);
        let mut nr_scanned = 0u32;
        let mut found = false;
        let mut order = cc.order - 1;
        while order >= PAGE_ALLOC_COSTLY_ORDER as i32 && !found && nr_scanned < limit {
            let o = order as u32;
            order -= 1;
            if self.zones[zi].area.nr_free[o as usize] == 0 {
                continue;
            }
            let mut e = self.zones[zi].area.lists[o as usize][MigrateType::Movable.idx()].first;
            while e != NIL {
                let scanned = nr_scanned;
                nr_scanned += 1;
                if scanned >= limit {
                    self.rotate_free_list(zi, o, MigrateType::Movable, e);
                    break;
                }
                if e < high_pfn {
                    if self.block_skip(e) {
                        e = self.list_next(e);
                        continue;
                    }
                    self.rotate_free_list(zi, o, MigrateType::Movable, e);
                    Self::update_fast_start_pfn(cc, e);
                    pfn = pb_start(e).max(zstart);
                    cc.fast_search_fail = 0;
                    found = true;
                    break;
                }
                e = self.list_next(e);
            }
        }
        cc.total_migrate_scanned += nr_scanned as u64;
        if !found {
            cc.fast_search_fail += 1;
            pfn = Self::reinit_migrate_pfn(cc);
        }
        pfn
    }

    /// `isolate_migratepages` (§9.6.2, §24.2): starts where `fast_find_migrateblock` says, then
    /// the first suitable pageblock from there. A block the fast path found is exempt from the
    /// skip check (`suitable_migration_source` still applies). Blocks jumped over are not
    /// scanned; the cached migrate pfn only moves forward (`update_cached_migrate`).
    fn isolate_migratepages(&mut self, cc: &mut CompactControl) -> IsolateMigrate {
        let zstart = self.zones[cc.zi].start_pfn;
        let mut low = self.fast_find_migrateblock(cc);
        let mut block_start = pb_start(low).max(zstart);
        let mut fast_find_block = low != cc.migrate_pfn && cc.fast_search_fail == 0;
        let mut block_end = pb_start(low) + PAGEBLOCK_NR_PAGES;
        while block_end <= cc.free_pfn {
            let mut next = false;
            if !self.block_in_zone(cc.zi, block_start, block_end) {
                next = true;
            } else {
                let aligned = low & (PAGEBLOCK_NR_PAGES - 1) == 0 || low == zstart;
                if aligned && !fast_find_block && !cc.ignore_skip_hint && self.block_skip(block_start) {
                    next = true;
                } else if !self.suitable_migration_source(cc, pb_start(block_start)) {
                    self.update_cached_migrate(cc, block_end);
                    next = true;
                }
            }
            if next {
                fast_find_block = false;
                cc.migrate_pfn = block_end;
                low = block_end;
                block_start = block_end;
                block_end += PAGEBLOCK_NR_PAGES;
                continue;
            }
            if self.isolate_migratepages_block(cc, low, block_end).is_none() {
                return IsolateMigrate::Abort;
            }
            break;
        }
        if cc.nr_migratepages > 0 {
            IsolateMigrate::Success
        } else {
            IsolateMigrate::None
        }
    }

    // ---- the free scanner (§9.8) ------------------------------------------------------------

    /// `__isolate_free_page` (§9.8.4, §1.7.3, page_alloc.c), for compaction's free scanner and
    /// free page reporting's pass (§32.2) alike: refuses unless the zone passes an order-0
    /// watermark test at min + 2^order (unboosted min, ALLOC_CMA); takes the chunk off its list
    /// and marks it Isolated; for order ≥ pageblock_order − 1 runs `move_freepages_block` to
    /// Movable on every Unmovable, Reclaimable or Movable block of the chunk (the block's other
    /// free chunks move to the tail of the Movable lists, even from a Movable block; no counter,
    /// no extfrag event). Returns `None` when refused, else how many blocks changed type.
    pub(crate) fn isolate_free_page(&mut self, zi: usize, pfn: u32, order: u32) -> Option<u32> {
        let mt = self.block_mt(pfn);
        if mt != MigrateType::Isolate {
            let wm = self.zones[zi].wmark[WMARK_MIN] + (1u64 << order);
            if !self.zone_watermark_ok(zi, 0, wm, ZoneType::Dma, AllocFlags(AllocFlags::CMA)) {
                return None;
            }
        }
        self.del_page_from_free_list(zi, pfn, order, mt);
        self.pages.set(pfn, PageKind::Isolated, order);
        let mut retyped = 0;
        if order + 1 >= PAGEBLOCK_ORDER {
            let mut p = pfn;
            while p < pfn + (1 << order) {
                let bmt = self.block_mt(p);
                // The isolated chunk is off the lists, so only the block's other free chunks
                // move; then the block is retyped (a no-op for a Movable one).
                if bmt.is_mergeable()
                    && self
                        .move_freepages_block(zi, p, bmt, MigrateType::Movable)
                        .is_some()
                    && bmt != MigrateType::Movable
                {
                    retyped += 1;
                }
                p += PAGEBLOCK_NR_PAGES;
            }
        }
        Some(retyped)
    }

    /// `isolate_freepages_block` over [start, end) with `stride`; returns (stop pfn, isolated).
    fn isolate_freepages_block(
        &mut self,
        cc: &mut CompactControl,
        start: u32,
        end: u32,
        stride: u32,
    ) -> (u32, u64) {
        let mut pfn = start;
        let (mut scanned, mut isolated) = (0u64, 0u64);
        let mut zone_locked: Option<u32> = None;
        while pfn < end {
            scanned += 1;
            match self.pages.kind(pfn) {
                PageKind::Allocated | PageKind::Pcp | PageKind::Isolated => {
                    let o = self.pages.order(pfn);
                    if o > 0 && pfn + (1 << o) <= end {
                        pfn += (1 << o) - 1;
                        scanned += (1u64 << o) - 1;
                    }
                }
                PageKind::Buddy => {
                    // The zone lock is taken at the first free page and dropped at every
                    // 32-pfn boundary (`compact_unlock_should_abort`).
                    if zone_locked != Some(pfn / COMPACT_CLUSTER_MAX as u32) {
                        zone_locked = Some(pfn / COMPACT_CLUSTER_MAX as u32);
                        self.compact_lock(cc, true, 0, scanned);
                    }
                    let o = self.pages.order(pfn);
                    if self.isolate_free_page(cc.zi, pfn, o).is_none() {
                        break;
                    }
                    let n = 1u64 << o;
                    scanned += n - 1;
                    isolated += n;
                    cc.nr_freepages += n;
                    cc.freepages[o as usize].push(pfn);
                    if cc.nr_migratepages <= cc.nr_freepages {
                        pfn += n as u32;
                        break;
                    }
                    pfn += n as u32 - 1;
                    pfn += 1;
                    continue;
                }
                _ => {}
            }
            pfn += stride;
        }
        let pfn = pfn.min(end);
        let ev = TraceEvent::MmCompactionIsolate {
            free: true,
            start_pfn: start,
            end_pfn: pfn,
            nr_scanned: scanned,
            nr_taken: isolated,
        };
        self.ctrace(trace_kind::COMPACTION_ISOLATE, ev);
        cc.total_free_scanned += scanned;
        if isolated > 0 {
            self.count(Stat::compact_isolated, isolated);
        }
        (pfn, isolated)
    }

    /// `suitable_migration_target` (§9.8.3).
    fn suitable_migration_target(&self, cc: &CompactControl, start: u32) -> bool {
        if self.pages.kind(start) == PageKind::Buddy {
            let order = if cc.order > 0 {
                cc.order as u32
            } else {
                PAGEBLOCK_ORDER
            };
            if self.pages.order(start) >= order {
                return false;
            }
        }
        cc.ignore_block_suitable || self.block_mt(start) == MigrateType::Movable
    }

    /// `fast_isolate_around` (§9.8.2, §24.3): after the fast free search, scan the rest of
    /// `pfn`'s pageblock with stride 1 (not for async direct compaction, nor when enough pages
    /// are isolated already), and mark the block skip if the scan reached its end.
    fn fast_isolate_around(&mut self, cc: &mut CompactControl, pfn: u32) {
        if cc.nr_freepages >= cc.nr_migratepages {
            return;
        }
        if cc.direct_compaction && cc.mode == MigrateMode::Async {
            return;
        }
        let z = &self.zones[cc.zi];
        let start = pb_start(pfn).max(z.start_pfn);
        let end = (pb_start(pfn) + PAGEBLOCK_NR_PAGES).min(z.end_pfn());
        if !self.block_in_zone(cc.zi, start, end) {
            return;
        }
        let (stop, _) = self.isolate_freepages_block(cc, start, end, 1);
        if stop == end {
            self.set_block_skip(start, true);
        }
    }

    /// `next_search_order` (§24.3): round-robin from `cc.search_order` downward, wrapping to
    /// cc.order−1; −1 once the search is back at `search_order` (which then moves down one).
    fn next_search_order(cc: &mut CompactControl, order: i32) -> i32 {
        let mut order = order - 1;
        if order < 0 {
            order = cc.order - 1;
        }
        if order == cc.search_order {
            cc.search_order -= 1;
            if cc.search_order < 0 {
                cc.search_order = cc.order - 1;
            }
            return -1;
        }
        order
    }

    /// `fast_isolate_freepages` (§9.8.2, §24.3, compaction.c), for cc.order > 0 only. Preferred
    /// range: pfn ≥ `block_start(free_pfn − gap/4)`; fallback: ≥ `block_start(free_pfn −
    /// gap/2)`. Orders round-robin from `cc.search_order`; each MOVABLE list is walked from the
    /// tail (skip bits are not read), up to max(1, limit/2) entries (256 at scan start, when
    /// free_pfn ≥ the zone's `compact_init_free_pfn`), halved on each fallback candidate and for
    /// the next order once a list used it up. The first preferred chunk, or else the order's
    /// highest fallback candidate, is isolated whole (`__isolate_free_page`; a refusal aborts
    /// the search) and the list rotated so that it is the head (`move_freelist_head`). `highest`
    /// is the highest block start among all entries examined. On failure `fast_search_fail`++,
    /// and at scan start the free scanner moves to `highest` (if ≥ the fallback bound) or, for
    /// direct compaction, to the fallback bound, and isolates around that block. If `highest` ≥
    /// the cached free pfn, the cached free pfn becomes `highest − 512`. compact_free_scanned
    /// += entries examined + 2^order − 1 for the isolated chunk; tracepoint
    /// mm_compaction_fast_isolate_freepages (min bound, free_pfn, nr_scanned, nr_taken). Then
    /// `fast_isolate_around` the chosen chunk. Public for the section tests.
    pub fn fast_isolate_freepages(&mut self, cc: &mut CompactControl) {
        if cc.order <= 0 {
            return;
        }
        let zi = cc.zi;
        let (zstart, zend) = (self.zones[zi].start_pfn, self.zones[zi].end_pfn());
        let mut limit = (cc.freelist_scan_limit() >> 1).max(1);
        let (mut nr_scanned, mut total_isolated) = (0u64, 0u64);
        let mut highest: u32 = 0;
        let mut scan_start = false;
        if cc.free_pfn >= self.zones[zi].compact.init_free_pfn {
            limit = PAGEBLOCK_NR_PAGES >> 1;
            scan_start = true;
        }
        let distance = cc.free_pfn.saturating_sub(cc.migrate_pfn);
        let mut low_pfn = pb_start(cc.free_pfn - (distance >> 2));
        let min_pfn = pb_start(cc.free_pfn - (distance >> 1));
        if min_pfn > low_pfn {
            low_pfn = min_pfn;
        }
        cc.search_order = cc.search_order.min(cc.order - 1);
        let mut page: Option<u32> = None;
        let mut order = cc.search_order;
        while page.is_none() && order >= 0 {
            let o = order as u32;
            if self.zones[zi].area.nr_free[o as usize] == 0 {
                order = Self::next_search_order(cc, order);
                continue;
            }
            let mut order_scanned = 0u32;
            let mut high_pfn = 0u32;
            // list_for_each_entry_reverse; `stop` is the entry the walk broke at (None: ran
            // off the head, then the list is not reordered).
            let mut stop: Option<u32> = None;
            let mut e = self.zones[zi].area.lists[o as usize][MigrateType::Movable.idx()].last;
            while e != NIL {
                order_scanned += 1;
                nr_scanned += 1;
                if e >= highest {
                    highest = pb_start(e).max(zstart);
                }
                if e >= low_pfn {
                    cc.fast_search_fail = 0;
                    cc.search_order = order;
                    page = Some(e);
                    stop = Some(e);
                    break;
                }
                if e >= min_pfn && e > high_pfn {
                    high_pfn = e;
                    limit >>= 1;
                }
                if order_scanned >= limit {
                    stop = Some(e);
                    break;
                }
                e = self.list_prev(e);
            }
            if page.is_none() && high_pfn != 0 {
                page = Some(high_pfn);
                stop = Some(high_pfn);
            }
            // move_freelist_head: the entries before `stop` go to the tail.
            if let Some(f) = stop {
                let prev = self.list_prev(f);
                if prev != NIL {
                    self.rotate_free_list(zi, o, MigrateType::Movable, prev);
                }
            }
            if let Some(p) = page {
                if self.isolate_free_page(zi, p, o).is_some() {
                    let n = 1u64 << o;
                    nr_scanned += n - 1;
                    total_isolated += n;
                    cc.nr_freepages += n;
                    cc.freepages[o as usize].push(p);
                    self.count(Stat::compact_isolated, n);
                } else {
                    order = cc.search_order + 1;
                    page = None;
                }
            }
            if cc.nr_freepages >= cc.nr_migratepages {
                break;
            }
            if order_scanned >= limit {
                limit = (limit >> 1).max(1);
            }
            order = Self::next_search_order(cc, order);
        }
        let ev = TraceEvent::MmCompactionFastIsolateFreepages {
            start_pfn: min_pfn,
            end_pfn: cc.free_pfn,
            nr_scanned,
            nr_taken: total_isolated,
        };
        self.ctrace(trace_kind::COMPACTION_ISOLATE, ev);
        if page.is_none() {
            cc.fast_search_fail += 1;
            if scan_start {
                if highest >= min_pfn {
                    page = Some(highest);
                    cc.free_pfn = highest;
                } else if cc.direct_compaction && self.zones[zi].spans(min_pfn) {
                    let end = (min_pfn + PAGEBLOCK_NR_PAGES).min(zend);
                    if self.block_in_zone(zi, min_pfn, end)
                        && self.suitable_migration_target(cc, min_pfn.max(zstart))
                    {
                        page = Some(min_pfn);
                    }
                    cc.free_pfn = min_pfn;
                }
            }
        }
        let c = &mut self.zones[zi].compact;
        if highest != 0 && highest >= c.cached_free_pfn {
            c.cached_free_pfn = highest.wrapping_sub(PAGEBLOCK_NR_PAGES);
        }
        cc.total_free_scanned += nr_scanned;
        if let Some(p) = page {
            self.fast_isolate_around(cc, p);
        }
    }

    /// `isolate_freepages` (§9.8.1–3): first `fast_isolate_freepages`; if anything is isolated
    /// after it (`nr_freepages` > 0, including chunks isolated earlier in the run), return;
    /// otherwise the linear free scanner, downward from cc.free_pfn, until as many pages are
    /// isolated as there are to migrate.
    fn isolate_freepages(&mut self, cc: &mut CompactControl) {
        self.fast_isolate_freepages(cc);
        if cc.nr_freepages > 0 {
            return;
        }
        let z = &self.zones[cc.zi];
        let zend = z.end_pfn();
        let mut isolate_start = cc.free_pfn;
        let mut block_start = pb_start(isolate_start);
        let mut block_end = (block_start + PAGEBLOCK_NR_PAGES).min(zend);
        let low = pb_start(cc.migrate_pfn) + PAGEBLOCK_NR_PAGES;
        let mut stride: u32 = if cc.mode == MigrateMode::Async {
            COMPACT_CLUSTER_MAX as u32
        } else {
            1
        };
        while block_start >= low {
            let next = |bs: u32| bs.wrapping_sub(PAGEBLOCK_NR_PAGES);
            if !self.block_in_zone(cc.zi, block_start, block_end)
                || !self.suitable_migration_target(cc, block_start.max(z_start(self, cc.zi)))
                || (!cc.ignore_skip_hint && self.block_skip(block_start))
            {
                block_end = block_start;
                if block_start < PAGEBLOCK_NR_PAGES {
                    break;
                }
                block_start = next(block_start);
                isolate_start = block_start;
                continue;
            }
            let (stop, nr) = self.isolate_freepages_block(cc, isolate_start, block_end, stride);
            isolate_start = stop;
            if isolate_start == block_end {
                let below = block_start.wrapping_sub(PAGEBLOCK_NR_PAGES);
                self.update_pageblock_skip(cc, block_start, below);
            }
            if cc.nr_freepages >= cc.nr_migratepages {
                if isolate_start >= block_end {
                    isolate_start = block_start.wrapping_sub(PAGEBLOCK_NR_PAGES);
                }
                break;
            } else if isolate_start < block_end {
                break;
            }
            stride = if nr > 0 {
                1
            } else {
                (stride << 1).min(COMPACT_CLUSTER_MAX as u32)
            };
            block_end = block_start;
            if block_start < PAGEBLOCK_NR_PAGES {
                isolate_start = 0;
                break;
            }
            block_start = next(block_start);
            isolate_start = block_start;
        }
        if block_start < low && isolate_start > block_start {
            isolate_start = block_start;
        }
        cc.free_pfn = isolate_start;
    }

    /// `compaction_alloc` (§9.8.5) per `folio_mode`: the smallest isolated chunk of at least the
    /// folio's order, split down with the upper halves kept ("free page split"); with
    /// `migrate_no_free_split` only a chunk of exactly the folio's order. Calls the free scanner
    /// once if nothing fits. Returns the target pfn.
    pub(crate) fn compaction_alloc(&mut self, cc: &mut CompactControl, order: u32) -> Option<u32> {
        let exact = !self.policy.compaction_free_page_split();
        let find = |cc: &CompactControl| -> Option<u32> {
            if exact {
                (!cc.freepages[order as usize].is_empty()).then_some(order)
            } else {
                (order..=MAX_PAGE_ORDER).find(|&o| !cc.freepages[o as usize].is_empty())
            }
        };
        let mut start = find(cc);
        if start.is_none() {
            self.isolate_freepages(cc);
            start = find(cc);
        }
        let mut o = start?;
        // list_first_entry: the chunk isolated first at this order.
        let pfn = cc.freepages[o as usize].remove(0);
        while o > order {
            o -= 1;
            let half = pfn + (1 << o);
            self.pages.set(half, PageKind::Isolated, o);
            // list_add: at the head.
            cc.freepages[o as usize].insert(0, half);
        }
        self.pages.set(pfn, PageKind::Allocated, order);
        cc.nr_freepages -= 1 << order;
        cc.nr_migratepages -= 1 << order;
        Some(pfn)
    }

    /// `release_free_list`: isolated chunks go back through the normal free path (§9.4.6).
    /// Returns the highest pfn released.
    pub(crate) fn release_free_list(&mut self, cc: &mut CompactControl) -> u32 {
        let mut high = 0;
        for o in 0..NR_PAGE_ORDERS {
            for pfn in std::mem::take(&mut cc.freepages[o]) {
                self.pages.set(pfn, PageKind::Allocated, o as u32);
                self.pages.set_b(pfn, MigrateType::Movable as u32);
                self.free_pages(cc.cpu, pfn, o as u32);
                high = high.max(pfn);
            }
        }
        cc.nr_freepages = 0;
        high
    }

    /// Moves every folio that can move out of the pfn range `[start, end)` of zone `zi`, as
    /// `alloc_contig_range`'s `__alloc_contig_migrate_range` does (§9.6, §13): the migration
    /// scanner's isolation over the range in MIGRATE_SYNC, ignoring and setting no skip hints,
    /// then migration, until the range is scanned. The targets are free chunks of the zone's
    /// Movable lists, taken as the page allocator's `alloc_migration_target` would take them
    /// (smallest first, whole free blocks included — the compaction free scanner would refuse
    /// those); the compaction free scanner only if the lists run dry. Simplified: the targets
    /// are not searched on other zones or nodes. The range's blocks should not be Movable, or a
    /// target may lie inside it. Used by policies that
    /// empty memory on purpose (the Contiguitas plug-in's region growth). Returns (pages
    /// migrated, pages that stayed).
    pub fn evacuate_range(&mut self, zi: usize, start: u32, end: u32, cpu: u32) -> (u64, u64) {
        let mut cc = CompactControl::new(zi, -1, Gfp::GFP_HIGHUSER_MOVABLE, MigrateMode::Sync, cpu);
        cc.ignore_skip_hint = true;
        cc.no_set_skip_hint = true;
        cc.whole_zone = true;
        let zend = self.zones[zi].end_pfn();
        cc.free_pfn = pb_start(zend - 1);
        cc.migrate_pfn = start;
        let (ok_before, fail_before) = (
            self.stat(Stat::pgmigrate_success),
            self.stat(Stat::pgmigrate_fail),
        );
        let mut low = start;
        while low < end {
            let Some(next) = self.isolate_migratepages_block(&mut cc, low, end) else {
                break;
            };
            if !cc.migratepages.is_empty() {
                let need = cc
                    .migratepages
                    .iter()
                    .map(|&id| self.folios.folios[id as usize].order as u32)
                    .max()
                    .unwrap_or(0);
                while cc.nr_freepages < cc.nr_migratepages {
                    let Some((o, pfn)) = (need..=MAX_PAGE_ORDER).find_map(|o| {
                        self.zones[zi]
                            .free_list_first(o, MigrateType::Movable)
                            .map(|p| (o, p))
                    }) else {
                        break;
                    };
                    if self.isolate_free_page(zi, pfn, o).is_none() {
                        break;
                    }
                    cc.freepages[o as usize].push(pfn);
                    cc.nr_freepages += 1 << o;
                }
                let enomem = self.migrate_pages(&mut cc);
                cc.nr_migratepages = 0;
                if enomem {
                    break;
                }
            }
            low = next.max(low + 1);
        }
        for id in std::mem::take(&mut cc.migratepages) {
            self.putback_lru_folio(id);
        }
        self.release_free_list(&mut cc);
        (
            self.stat(Stat::pgmigrate_success) - ok_before,
            self.stat(Stat::pgmigrate_fail) - fail_before,
        )
    }

    // ---- compact_finished and compact_zone (§9.4, §9.5) -------------------------------------

    /// `__compact_finished` (§9.5, §8 D10).
    fn __compact_finished(&self, cc: &CompactControl) -> (CompactResult, bool) {
        let z = &self.zones[cc.zi];
        if (cc.free_pfn >> PAGEBLOCK_ORDER) <= (cc.migrate_pfn >> PAGEBLOCK_ORDER) {
            let r = if cc.whole_zone {
                CompactResult::Complete
            } else {
                CompactResult::PartialSkipped
            };
            return (r, true);
        }
        // `out:` — a contended run ends CONTENDED where the check would go on (or, for the
        // proactive and defrag_mode branches, whatever they found); finding a suitable page
        // for a direct compactor still wins (§24.5).
        let out = |r: CompactResult| if cc.contended { CompactResult::Contended } else { r };
        if cc.proactive_compaction {
            // The kernel also ends a proactive run (PARTIAL_SKIPPED) while kswapd runs; not
            // checked here: a run is one step of the model, and `should_proactive_compact_node`
            // has checked kswapd before it started, so nothing can change in between.
            let score = self.fragmentation_score_zone(cc.zi);
            let r = if score > self.fragmentation_score_wmark(true) {
                CompactResult::Continue
            } else {
                CompactResult::Success
            };
            return (out(r), false);
        }
        if cc.order < 0 {
            return (CompactResult::Continue, false);
        }
        if cc.migrate_pfn & (PAGEBLOCK_NR_PAGES - 1) != 0 {
            return (CompactResult::Continue, false);
        }
        let order = cc.order as u32;
        if self.defrag_watermarks() && !cc.direct_compaction {
            let ok = self.__zone_watermark_ok(
                cc.zi,
                order,
                z.wmark_pages(WMARK_HIGH),
                ZoneType::ALL[cc.highest_zoneidx],
                cc.alloc_flags,
                z.stat(Stat::nr_free_pages_blocks),
            );
            return (
                out(if ok {
                    CompactResult::Success
                } else {
                    CompactResult::Continue
                }),
                false,
            );
        }
        for o in order..=MAX_PAGE_ORDER {
            if !z.free_list_empty(o, cc.migratetype) {
                return (CompactResult::Success, false);
            }
            if let Fallback::Found(_) = self.find_suitable_fallback(cc.zi, o, cc.migratetype, true) {
                return (CompactResult::Success, false);
            }
        }
        (out(CompactResult::NoSuitablePage), false)
    }

    /// `compact_finished`: `__compact_finished`, resetting cached positions (and setting the
    /// skip-flush flag for direct compaction) when the scanners meet; NO_SUITABLE_PAGE → CONTINUE.
    fn compact_finished(&mut self, cc: &CompactControl) -> CompactResult {
        let (r, met) = self.__compact_finished(cc);
        let ev = TraceEvent::MmCompactionSuitableFinished {
            finished: true,
            zone: cc.zi as u8,
            order: cc.order,
            ret: r as u8,
        };
        self.ctrace(trace_kind::COMPACTION_DECIDE, ev);
        if met {
            self.reset_cached_positions(cc.zi);
            if cc.direct_compaction {
                self.zones[cc.zi].compact.blockskip_flush = true;
            }
        }
        if r == CompactResult::NoSuitablePage {
            CompactResult::Continue
        } else {
            r
        }
    }

    /// `compact_zone` (§9.4). Returns the result and what the run did.
    pub fn compact_zone(&mut self, cc: &mut CompactControl) -> (CompactResult, CompactRunStats) {
        let zi = cc.zi;
        let (zstart, zend) = (self.zones[zi].start_pfn, self.zones[zi].end_pfn());
        let isolated_before = self.stat(Stat::compact_isolated);
        let (mig_before, fail_before) = (
            self.stat(Stat::pgmigrate_success),
            self.stat(Stat::pgmigrate_fail),
        );
        cc.total_migrate_scanned = 0;
        cc.total_free_scanned = 0;
        cc.nr_migratepages = 0;
        cc.nr_freepages = 0;
        cc.migratetype = cc.gfp.migratetype();
        cc.contended = false;
        cc.clock_base = (isolated_before, mig_before);
        if cc.order >= 0 {
            let r = self.compaction_suit_allocation_order(
                zi,
                cc.order as u32,
                cc.highest_zoneidx,
                cc.alloc_flags,
                cc.mode == MigrateMode::Async,
                !cc.direct_compaction,
            );
            if r != CompactResult::Continue {
                return (r, CompactRunStats::default());
            }
            if self.compaction_restarting(zi, cc.order as u32) {
                self.reset_isolation_suitable(zi);
            }
        }
        let sync = cc.mode != MigrateMode::Async;
        cc.fast_start_pfn = 0;
        if cc.whole_zone {
            cc.migrate_pfn = zstart;
            cc.free_pfn = pb_start(zend - 1);
        } else {
            let c = &mut self.zones[zi].compact;
            cc.migrate_pfn = c.cached_migrate_pfn[sync as usize];
            cc.free_pfn = c.cached_free_pfn;
            if cc.free_pfn < zstart || cc.free_pfn >= zend {
                cc.free_pfn = pb_start(zend - 1);
                c.cached_free_pfn = cc.free_pfn;
            }
            if cc.migrate_pfn < zstart || cc.migrate_pfn >= zend {
                cc.migrate_pfn = zstart;
                c.cached_migrate_pfn = [zstart, zstart];
            }
            if cc.migrate_pfn <= c.init_migrate_pfn {
                cc.whole_zone = true;
            }
        }
        let ev = TraceEvent::MmCompactionBeginEnd {
            zone_start: zstart,
            migrate_pfn: cc.migrate_pfn,
            free_pfn: cc.free_pfn,
            zone_end: zend,
            sync,
            status: None,
        };
        self.ctrace(trace_kind::COMPACTION_RUN, ev);
        let mut last_migrated: u32 = 0;
        let c = &self.zones[zi].compact;
        let mut update_cached = !sync && c.cached_migrate_pfn[0] == c.cached_migrate_pfn[1];
        let mut ret;
        loop {
            ret = self.compact_finished(cc);
            if ret != CompactResult::Continue {
                break;
            }
            let iteration_start = cc.migrate_pfn;
            cc.finish_pageblock = last_migrated != 0 && pb_start(last_migrated) == pb_start(iteration_start);
            let mut rescan = true;
            while rescan {
                rescan = false;
                let isolated = self.isolate_migratepages(cc);
                if isolated == IsolateMigrate::Abort {
                    // §9.4.5b, §24.4.4: put back whatever was isolated, end CONTENDED.
                    for id in std::mem::take(&mut cc.migratepages) {
                        self.putback_lru_folio(id);
                    }
                    cc.nr_migratepages = 0;
                    ret = CompactResult::Contended;
                    return self.compact_zone_out(cc, ret, isolated_before, mig_before, fail_before);
                }
                if isolated == IsolateMigrate::None {
                    if update_cached {
                        let c = &mut self.zones[zi].compact;
                        c.cached_migrate_pfn[1] = c.cached_migrate_pfn[0];
                    }
                    break;
                }
                update_cached = false;
                last_migrated = zstart.max(pb_start(cc.migrate_pfn.saturating_sub(1)));
                let nr_migratepages = cc.nr_migratepages;
                let err = self.migrate_pages(cc);
                let ok = self.compact.last_migrate.nr_succeeded;
                let ev = TraceEvent::MmCompactionMigratepages {
                    nr_migrated: ok,
                    nr_failed: nr_migratepages.saturating_sub(ok),
                };
                self.ctrace(trace_kind::COMPACTION_RUN, ev);
                cc.nr_migratepages = 0;
                if err {
                    // −ENOMEM.
                    if (cc.free_pfn >> PAGEBLOCK_ORDER) > (cc.migrate_pfn >> PAGEBLOCK_ORDER) {
                        ret = CompactResult::Contended;
                        return self.compact_zone_out(cc, ret, isolated_before, mig_before, fail_before);
                    }
                }
                // §25.2.5 / §9.4.5d: a failure (migrate_pages returned non-zero) mid-block
                // below SYNC rescans the rest of the block once, finishing it.
                if (err || self.compact.last_migrate.nr_failed > 0)
                    && cc.migrate_pfn & (PAGEBLOCK_NR_PAGES - 1) != 0
                    && !cc.ignore_skip_hint
                    && !cc.finish_pageblock
                    && cc.mode < MigrateMode::Sync
                {
                    cc.finish_pageblock = true;
                    if cc.order == HPAGE_PMD_ORDER as i32 {
                        last_migrated = 0;
                    }
                    rescan = true;
                }
                if self.compact.capc.is_some_and(|c| c.page.is_some()) {
                    ret = CompactResult::Success;
                    return self.compact_zone_out(cc, ret, isolated_before, mig_before, fail_before);
                }
            }
            // Drain check (§9.4.5f).
            if cc.order > 0 && last_migrated != 0 {
                let current_block = cc.migrate_pfn & !((1u32 << cc.order) - 1);
                if last_migrated < current_block {
                    self.drain_pages_zone(cc.cpu, zi);
                    last_migrated = 0;
                }
            }
            if self.compact.capc.is_some_and(|c| c.page.is_some()) {
                ret = CompactResult::Success;
                break;
            }
        }
        self.compact_zone_out(cc, ret, isolated_before, mig_before, fail_before)
    }

    fn compact_zone_out(
        &mut self,
        cc: &mut CompactControl,
        ret: CompactResult,
        isolated_before: u64,
        mig_before: u64,
        fail_before: u64,
    ) -> (CompactResult, CompactRunStats) {
        debug_assert!(cc.migratepages.is_empty());
        if cc.nr_freepages > 0 || cc.freepages.iter().any(|l| !l.is_empty()) {
            let high = self.release_free_list(cc);
            let block = pb_start(high);
            let c = &mut self.zones[cc.zi].compact;
            if block > c.cached_free_pfn {
                c.cached_free_pfn = block;
            }
        }
        self.count(Stat::compact_migrate_scanned, cc.total_migrate_scanned);
        self.count(Stat::compact_free_scanned, cc.total_free_scanned);
        let z = &self.zones[cc.zi];
        let ev = TraceEvent::MmCompactionBeginEnd {
            zone_start: z.start_pfn,
            migrate_pfn: cc.migrate_pfn,
            free_pfn: cc.free_pfn,
            zone_end: z.end_pfn(),
            sync: cc.mode != MigrateMode::Async,
            status: Some(ret as u8),
        };
        self.ctrace(trace_kind::COMPACTION_RUN, ev);
        let stats = CompactRunStats {
            migrate_scanned: cc.total_migrate_scanned,
            free_scanned: cc.total_free_scanned,
            isolated: self.stat(Stat::compact_isolated) - isolated_before,
            migrated_pages: self.stat(Stat::pgmigrate_success) - mig_before,
            failed_pages: self.stat(Stat::pgmigrate_fail) - fail_before,
            runs: 1,
            migrate_retries: cc.migrate_retries,
            migrate_wait_ns: cc.migrate_wait_ns,
        };
        if let Some(b) = &mut self.cur.locks_busy {
            b.elapsed_ns += b.costs.cpu_ns(&stats);
        }
        (ret, stats)
    }

    // ---- callers (§9.9, §9.11, §9.12) -------------------------------------------------------

    /// `try_to_compact_pages` (§9.9) with `compact_zone_order` and capture (§9.10): direct
    /// compaction of every zone of the zonelist. Returns the result, a captured page (already
    /// allocated to the caller) and what the runs did.
    pub fn try_to_compact_pages(
        &mut self,
        cpu: u32,
        gfp: Gfp,
        order: u32,
        alloc_flags: AllocFlags,
        prio: CompactPriority,
    ) -> (CompactResult, Option<u32>, CompactRunStats) {
        let ac = self.alloc_context(gfp);
        self.try_to_compact_pages_ac(cpu, gfp, order, alloc_flags, prio, &ac)
    }

    /// [`Mm::try_to_compact_pages`] over the zonelist and nodemask of the allocation context
    /// `ac` (the slow path's).
    pub fn try_to_compact_pages_ac(
        &mut self,
        cpu: u32,
        gfp: Gfp,
        order: u32,
        alloc_flags: AllocFlags,
        prio: CompactPriority,
        ac: &crate::page_alloc::AllocContext,
    ) -> (CompactResult, Option<u32>, CompactRunStats) {
        let mut total = CompactRunStats::default();
        if !gfp.compaction_allowed() {
            return (CompactResult::Skipped, None, total);
        }
        let ev = TraceEvent::MmCompactionTryToCompactPages {
            order: order as i32,
            gfp,
            prio: prio as i32,
        };
        self.ctrace(trace_kind::COMPACTION_DECIDE, ev);
        if ac.preferred_zone.is_none() {
            return (CompactResult::Skipped, None, total);
        }
        let mut rc = CompactResult::Skipped;
        let mut captured = None;
        let mut k = ac.zref;
        while let Some(zi) = self.next_zone(ac, &mut k) {
            if prio > CompactPriority::SyncFull && self.compaction_deferred(zi, order) {
                rc = rc.max(CompactResult::Deferred);
                continue;
            }
            let mode = if prio == CompactPriority::Async {
                MigrateMode::Async
            } else {
                MigrateMode::SyncLight
            };
            let mut cc = CompactControl::new(zi, order as i32, gfp, mode, cpu);
            cc.alloc_flags = alloc_flags;
            cc.highest_zoneidx = ac.highest_zoneidx.idx();
            cc.direct_compaction = true;
            cc.whole_zone = prio == CompactPriority::SyncFull;
            cc.ignore_skip_hint = prio == CompactPriority::SyncFull;
            cc.ignore_block_suitable = prio == CompactPriority::SyncFull;
            self.compact.capc = Some(CaptureControl {
                zone: zi,
                order,
                migratetype: cc.migratetype,
                page: None,
            });
            let (mut status, stats) = self.compact_zone(&mut cc);
            total.add(&stats);
            let cap = self.compact.capc.take().and_then(|c| c.page);
            if let Some(p) = cap {
                status = CompactResult::Success;
                captured = Some(p);
            }
            rc = rc.max(status);
            if captured.is_some() {
                break;
            }
            if status == CompactResult::Success {
                self.compaction_defer_reset(zi, order, false);
                break;
            }
            if prio != CompactPriority::Async
                && matches!(status, CompactResult::Complete | CompactResult::PartialSkipped)
            {
                self.defer_compaction(zi, order);
            }
        }
        (rc, captured, total)
    }

    /// `compact_node` (§9.12.4, /proc): order −1, whole zones, skip hints ignored. `proactive`
    /// runs are SYNC_LIGHT and stop per zone at the low score threshold; /proc runs are SYNC.
    pub fn compact_node(&mut self, nid: u32, proactive: bool) -> CompactRunStats {
        let mut total = CompactRunStats::default();
        for zi in self.node_zones(nid) {
            if !self.zones[zi].populated() {
                continue;
            }
            if proactive && self.fragmentation_score_zone(zi) <= self.fragmentation_score_wmark(true) {
                continue;
            }
            let mode = if proactive {
                MigrateMode::SyncLight
            } else {
                MigrateMode::Sync
            };
            let cpu = self.kswapd_cpu(nid);
            let mut cc = CompactControl::new(zi, -1, Gfp::GFP_KERNEL, mode, cpu);
            cc.whole_zone = true;
            cc.ignore_skip_hint = true;
            cc.proactive_compaction = proactive;
            let (_, stats) = self.compact_zone(&mut cc);
            if proactive {
                self.count(Stat::compact_daemon_migrate_scanned, stats.migrate_scanned);
                self.count(Stat::compact_daemon_free_scanned, stats.free_scanned);
            }
            total.add(&stats);
        }
        total
    }

    /// Writing 1 to /proc/sys/vm/compact_memory: `compact_node` of every node, then (as the
    /// kernel's sysctl handler does through compact_nodes) nothing else.
    pub fn compact_memory(&mut self) -> CompactRunStats {
        let mut total = CompactRunStats::default();
        for nid in 0..self.numa.nr_nodes {
            total.add(&self.compact_node(nid, false));
        }
        total
    }

    /// The capture test of `__free_one_page` (`compaction_capture`, §9.10).
    pub(crate) fn compaction_capture(&mut self, zi: usize, order: u32, mt: MigrateType) -> bool {
        let Some(c) = self.compact.capc else { return false };
        if c.page.is_some() || c.zone != zi || c.order != order {
            return false;
        }
        if mt == MigrateType::Isolate {
            return false;
        }
        if order < PAGEBLOCK_ORDER && mt == MigrateType::Movable && c.migratetype != MigrateType::Movable {
            return false;
        }
        true
    }
}

/// `skip_isolation_on_order` (§9.6.3): large folios of order ≥ cc.order (unless order −1) or ≥
/// pageblock_order are not isolated.
fn skip_isolation_on_order(order: u32, target: i32) -> bool {
    (target >= 0 && order >= target as u32) || order >= PAGEBLOCK_ORDER
}

fn z_start(mm: &Mm, zi: usize) -> u32 {
    mm.zones[zi].start_pfn
}

impl Mm {
    /// /sys/kernel/debug/extfrag/extfrag_index (§16.5): per populated zone, the fragmentation
    /// index of every order as `%2d.%03d` of index/1000.
    pub fn render_extfrag_index(&self) -> String {
        self.render_index(|mm, zi, o| mm.fragmentation_index(zi, o) as i64, true)
    }

    /// /sys/kernel/debug/extfrag/unusable_index (§16.5): `%d.%03d` of the unusable free index.
    pub fn render_unusable_index(&self) -> String {
        self.render_index(|mm, zi, o| mm.unusable_free_index(zi, o) as i64, false)
    }

    fn render_index(&self, f: impl Fn(&Mm, usize, u32) -> i64, pad: bool) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for (zi, z) in self.zones.iter().enumerate().filter(|(_, z)| z.populated()) {
            let _ = write!(out, "Node {}, zone {:>8} ", z.nid, z.zone_type.name());
            for o in 0..=MAX_PAGE_ORDER {
                let v = f(self, zi, o);
                // C division truncates toward zero, so −1000 prints as "-1.000".
                let (q, r) = (v / 1000, (v % 1000).abs());
                if pad {
                    let _ = write!(out, "{q:2}.{r:03} ");
                } else {
                    let _ = write!(out, "{q}.{r:03} ");
                }
            }
            out.push('\n');
        }
        out
    }
}
