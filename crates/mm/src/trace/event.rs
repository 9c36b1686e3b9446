//! The tracepoint events the model emits, one variant per event (or per pair of events sharing
//! a format), with their names and trace systems.

use crate::gfp::Gfp;

/// One tracepoint event with the fields of its format file (samples/tracefs-formats).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// kmem:mm_page_alloc. `pfn` None = failed allocation (prints a NULL page and pfn=0x0).
    MmPageAlloc {
        pfn: Option<u32>,
        order: u32,
        gfp: Gfp,
        migratetype: i32,
    },
    /// kmem:mm_page_free.
    MmPageFree {
        pfn: u32,
        order: u32,
    },
    /// kmem:mm_page_alloc_zone_locked.
    MmPageAllocZoneLocked {
        pfn: u32,
        order: u32,
        migratetype: i32,
        percpu_refill: bool,
    },
    /// kmem:mm_page_pcpu_drain.
    MmPagePcpuDrain {
        pfn: u32,
        order: u32,
        migratetype: i32,
    },
    /// kmem:mm_page_alloc_extfrag. `pageblock_order` (9) and `fragmenting`
    /// (`fallback_order < 9`) are printed but derived, so not stored.
    MmPageAllocExtfrag {
        pfn: u32,
        alloc_order: i32,
        fallback_order: i32,
        alloc_migratetype: i32,
        fallback_migratetype: i32,
        change_ownership: bool,
    },
    /// compaction:mm_compaction_isolate_migratepages / _isolate_freepages (`free` = true).
    MmCompactionIsolate {
        free: bool,
        start_pfn: u32,
        end_pfn: u32,
        nr_scanned: u64,
        nr_taken: u64,
    },
    /// compaction:mm_compaction_migratepages.
    MmCompactionMigratepages {
        nr_migrated: u64,
        nr_failed: u64,
    },
    /// compaction:mm_compaction_begin, and _end when `status` is Some (index of
    /// `compaction::CompactResult`).
    MmCompactionBeginEnd {
        zone_start: u32,
        migrate_pfn: u32,
        free_pfn: u32,
        zone_end: u32,
        sync: bool,
        status: Option<u8>,
    },
    /// compaction:mm_compaction_try_to_compact_pages.
    MmCompactionTryToCompactPages {
        order: i32,
        gfp: Gfp,
        prio: i32,
    },
    /// compaction:mm_compaction_suitable (`finished` = false) / _finished (true); `zone` is the
    /// zone index, `ret` the `CompactResult` index.
    MmCompactionSuitableFinished {
        finished: bool,
        zone: u8,
        order: i32,
        ret: u8,
    },
    /// compaction:mm_compaction_deferred (kind 0), _defer_compaction (1), _defer_reset (2).
    MmCompactionDefer {
        kind: u8,
        zone: u8,
        order: i32,
        considered: u32,
        defer_shift: u32,
        order_failed: i32,
    },
    /// compaction:mm_compaction_wakeup_kcompactd (`wake` = false) / _kcompactd_wake (true).
    /// `highest_zoneidx` is nid × MAX_NR_ZONES + the zone type, as the compaction events'
    /// `zone` fields are the model's zone index (node by node).
    MmCompactionKcompactd {
        wake: bool,
        order: i32,
        highest_zoneidx: u8,
    },
    /// compaction:mm_compaction_fast_isolate_freepages (the isolate class, from
    /// `fast_isolate_freepages`).
    MmCompactionFastIsolateFreepages {
        start_pfn: u32,
        end_pfn: u32,
        nr_scanned: u64,
        nr_taken: u64,
    },
    /// compaction:mm_compaction_kcompactd_sleep.
    MmCompactionKcompactdSleep {
        nid: i32,
    },
    /// migrate:mm_migrate_pages, at the end of `migrate_pages()`. `mode` is the `migrate_mode`
    /// (index of [`MIGRATE_MODE_NAMES`](super::MIGRATE_MODE_NAMES), as `compaction::MigrateMode`), `reason` the
    /// `migrate_reason` (index of [`MIGRATE_REASON_NAMES`](super::MIGRATE_REASON_NAMES);
    /// [`MR_COMPACTION`](super::MR_COMPACTION) = 0).
    /// `large_folio_split` prints as `nr_split`.
    MmMigratePages {
        succeeded: u64,
        failed: u64,
        thp_succeeded: u64,
        thp_failed: u64,
        thp_split: u64,
        large_folio_split: u64,
        mode: u8,
        reason: u8,
    },
    /// migrate:mm_migrate_pages_start, at the start of `migrate_pages()`.
    MmMigratePagesStart {
        mode: u8,
        reason: u8,
    },
    /// vmscan:mm_vmscan_kswapd_sleep.
    MmVmscanKswapdSleep {
        nid: i32,
    },
    /// vmscan:mm_vmscan_kswapd_wake (the zone index is recorded but not printed, so not kept).
    MmVmscanKswapdWake {
        nid: i32,
        order: i32,
    },
    /// vmscan:mm_vmscan_wakeup_kswapd (zone index not printed, not kept).
    MmVmscanWakeupKswapd {
        nid: i32,
        order: i32,
        gfp: Gfp,
    },
    /// vmscan:mm_vmscan_direct_reclaim_begin / _end.
    MmVmscanDirectReclaimBegin {
        order: i32,
        gfp: Gfp,
    },
    MmVmscanDirectReclaimEnd {
        nr_reclaimed: u64,
    },
    /// vmscan:mm_vmscan_lru_isolate (pages; `lru` indexes [`crate::vmscan::LRU_NAMES`]).
    MmVmscanLruIsolate {
        highest_zoneidx: i32,
        order: i32,
        nr_requested: u64,
        nr_scanned: u64,
        nr_skipped: u64,
        nr_taken: u64,
        lru: u8,
    },
    /// vmscan:mm_vmscan_lru_shrink_inactive; `nr_activate` = [anon, file]; `flags` the
    /// RECLAIM_WB_* bits.
    MmVmscanLruShrinkInactive {
        nid: i32,
        nr_scanned: i64,
        nr_reclaimed: i64,
        nr_dirty: i64,
        nr_writeback: i64,
        nr_congested: i64,
        nr_immediate: i64,
        nr_activate: [i32; 2],
        nr_ref_keep: i64,
        nr_unmap_fail: i64,
        priority: i32,
        flags: u32,
    },
    /// vmscan:mm_vmscan_lru_shrink_active.
    MmVmscanLruShrinkActive {
        nid: i32,
        nr_taken: i64,
        nr_active: i64,
        nr_deactivated: i64,
        nr_referenced: i64,
        priority: i32,
        flags: u32,
    },
    /// vmscan:mm_vmscan_reclaim_pages, at the end of `reclaim_folio_list` (the folios
    /// `reclaim_pages` was given, e.g. by DAMON's pageout, §27.2 item 5): pages scanned and
    /// reclaimed and the `reclaim_stat` of the batch. The fields are `unsigned long` printed with
    /// `%ld` (so kept signed here); `nr_activate` = [anon, file] (`nr_activate0`/`1`).
    MmVmscanReclaimPages {
        nid: i32,
        nr_scanned: i64,
        nr_reclaimed: i64,
        nr_dirty: i64,
        nr_writeback: i64,
        nr_congested: i64,
        nr_immediate: i64,
        nr_activate: [i32; 2],
        nr_ref_keep: i64,
        nr_unmap_fail: i64,
    },
    /// damon:damos_before_apply (`damos_apply_scheme`, §27.2 item 6): a DAMOS scheme is about to
    /// be applied to a region (after the quota's split). `start`/`end` are the region's
    /// addresses in DAMON's core address space (paddr with `addr_unit` 1: physical bytes);
    /// `nr_accesses` is `nr_accesses_bp / 10000`; `nr_regions` the target's region count.
    DamosBeforeApply {
        context_idx: u32,
        scheme_idx: u32,
        target_idx: u64,
        nr_regions: u32,
        start: u64,
        end: u64,
        nr_accesses: u32,
        age: u32,
    },
    /// vmscan:mm_vmscan_throttled (`reclaim_throttle`). `reason` is the recorded field, i.e.
    /// `1 << enum vmscan_throttle_state` (see [`vmscan_throttle_reason`](super::vmscan_throttle_reason)), printed with
    /// `show_throttle_flags`. The model does not throttle reclaim yet, so nothing emits it.
    MmVmscanThrottled {
        nid: i32,
        usec_timeout: i32,
        usec_delayed: i32,
        reason: i32,
    },
}

impl TraceEvent {
    /// The event's name as printed after the timestamp.
    pub fn name(&self) -> &'static str {
        match self {
            TraceEvent::MmPageAlloc { .. } => "mm_page_alloc",
            TraceEvent::MmPageFree { .. } => "mm_page_free",
            TraceEvent::MmPageAllocZoneLocked { .. } => "mm_page_alloc_zone_locked",
            TraceEvent::MmPagePcpuDrain { .. } => "mm_page_pcpu_drain",
            TraceEvent::MmPageAllocExtfrag { .. } => "mm_page_alloc_extfrag",
            TraceEvent::MmCompactionIsolate { free: false, .. } => "mm_compaction_isolate_migratepages",
            TraceEvent::MmCompactionIsolate { free: true, .. } => "mm_compaction_isolate_freepages",
            TraceEvent::MmCompactionMigratepages { .. } => "mm_compaction_migratepages",
            TraceEvent::MmCompactionBeginEnd { status: None, .. } => "mm_compaction_begin",
            TraceEvent::MmCompactionBeginEnd { status: Some(_), .. } => "mm_compaction_end",
            TraceEvent::MmCompactionTryToCompactPages { .. } => "mm_compaction_try_to_compact_pages",
            TraceEvent::MmCompactionSuitableFinished { finished: false, .. } => "mm_compaction_suitable",
            TraceEvent::MmCompactionSuitableFinished { finished: true, .. } => "mm_compaction_finished",
            TraceEvent::MmCompactionDefer { kind: 0, .. } => "mm_compaction_deferred",
            TraceEvent::MmCompactionDefer { kind: 1, .. } => "mm_compaction_defer_compaction",
            TraceEvent::MmCompactionDefer { .. } => "mm_compaction_defer_reset",
            TraceEvent::MmCompactionKcompactd { wake: false, .. } => "mm_compaction_wakeup_kcompactd",
            TraceEvent::MmCompactionKcompactd { wake: true, .. } => "mm_compaction_kcompactd_wake",
            TraceEvent::MmCompactionFastIsolateFreepages { .. } => "mm_compaction_fast_isolate_freepages",
            TraceEvent::MmCompactionKcompactdSleep { .. } => "mm_compaction_kcompactd_sleep",
            TraceEvent::MmMigratePages { .. } => "mm_migrate_pages",
            TraceEvent::MmMigratePagesStart { .. } => "mm_migrate_pages_start",
            TraceEvent::MmVmscanKswapdSleep { .. } => "mm_vmscan_kswapd_sleep",
            TraceEvent::MmVmscanKswapdWake { .. } => "mm_vmscan_kswapd_wake",
            TraceEvent::MmVmscanWakeupKswapd { .. } => "mm_vmscan_wakeup_kswapd",
            TraceEvent::MmVmscanDirectReclaimBegin { .. } => "mm_vmscan_direct_reclaim_begin",
            TraceEvent::MmVmscanDirectReclaimEnd { .. } => "mm_vmscan_direct_reclaim_end",
            TraceEvent::MmVmscanLruIsolate { .. } => "mm_vmscan_lru_isolate",
            TraceEvent::MmVmscanLruShrinkInactive { .. } => "mm_vmscan_lru_shrink_inactive",
            TraceEvent::MmVmscanLruShrinkActive { .. } => "mm_vmscan_lru_shrink_active",
            TraceEvent::MmVmscanThrottled { .. } => "mm_vmscan_throttled",
            TraceEvent::MmVmscanReclaimPages { .. } => "mm_vmscan_reclaim_pages",
            TraceEvent::DamosBeforeApply { .. } => "damos_before_apply",
        }
    }

    /// The event's trace system (its directory under `events/`): `kmem`, `compaction`,
    /// `migrate`, `vmscan` or `damon`.
    pub fn group(&self) -> &'static str {
        match self {
            TraceEvent::MmPageAlloc { .. }
            | TraceEvent::MmPageFree { .. }
            | TraceEvent::MmPageAllocZoneLocked { .. }
            | TraceEvent::MmPagePcpuDrain { .. }
            | TraceEvent::MmPageAllocExtfrag { .. } => "kmem",
            TraceEvent::MmMigratePages { .. } | TraceEvent::MmMigratePagesStart { .. } => "migrate",
            TraceEvent::MmVmscanKswapdSleep { .. }
            | TraceEvent::MmVmscanKswapdWake { .. }
            | TraceEvent::MmVmscanWakeupKswapd { .. }
            | TraceEvent::MmVmscanDirectReclaimBegin { .. }
            | TraceEvent::MmVmscanDirectReclaimEnd { .. }
            | TraceEvent::MmVmscanLruIsolate { .. }
            | TraceEvent::MmVmscanLruShrinkInactive { .. }
            | TraceEvent::MmVmscanLruShrinkActive { .. }
            | TraceEvent::MmVmscanThrottled { .. }
            | TraceEvent::MmVmscanReclaimPages { .. } => "vmscan",
            TraceEvent::DamosBeforeApply { .. } => "damon",
            TraceEvent::MmCompactionIsolate { .. }
            | TraceEvent::MmCompactionMigratepages { .. }
            | TraceEvent::MmCompactionBeginEnd { .. }
            | TraceEvent::MmCompactionTryToCompactPages { .. }
            | TraceEvent::MmCompactionSuitableFinished { .. }
            | TraceEvent::MmCompactionDefer { .. }
            | TraceEvent::MmCompactionKcompactd { .. }
            | TraceEvent::MmCompactionFastIsolateFreepages { .. }
            | TraceEvent::MmCompactionKcompactdSleep { .. } => "compaction",
        }
    }
}
