//! The `TP_printk` text of each event (what follows `name: ` on a trace line).

use std::fmt::Write as _;

use super::tables::{
    show_gfp_flags, show_reclaim_flags, show_throttle_flags, symbol, write_gfp_flags, COMPACT_STATUS,
    MIGRATE_MODE_NAMES, MIGRATE_REASON_NAMES, ZONE_NAMES,
};
use super::{page_address, TraceEvent, PAGEBLOCK_ORDER};

impl TraceEvent {
    /// Appends the event's `TP_printk` text (what follows `name: `), by trace system.
    pub fn render_fields(&self, out: &mut String) {
        match self.group() {
            "kmem" => self.render_kmem_fields(out),
            "compaction" => self.render_compaction_fields(out),
            "vmscan" => self.render_vmscan_fields(out),
            "migrate" => self.render_migrate_fields(out),
            "damon" => self.render_damon_fields(out),
            g => unreachable!("no renderer for trace system {g}"),
        }
    }

    /// The kmem page-allocator events (include/trace/events/kmem.h). `order` is printed with
    /// %d for most events although the field is unsigned int.
    fn render_kmem_fields(&self, out: &mut String) {
        match *self {
            TraceEvent::MmPageAlloc {
                pfn,
                order,
                gfp,
                migratetype,
            } => {
                let (page, pfn) = match pfn {
                    Some(p) => (page_address(p), p),
                    None => (0, 0),
                };
                let _ = write!(
                    out,
                    "page={page:016x} pfn={pfn:#x} order={} migratetype={migratetype} gfp_flags=",
                    order as i32
                );
                write_gfp_flags(out, gfp);
            }
            TraceEvent::MmPageFree { pfn, order } => {
                let _ = write!(
                    out,
                    "page={:016x} pfn={pfn:#x} order={}",
                    page_address(pfn),
                    order as i32
                );
            }
            TraceEvent::MmPageAllocZoneLocked {
                pfn,
                order,
                migratetype,
                percpu_refill,
            } => {
                let _ = write!(
                    out,
                    "page={:016x} pfn={pfn:#x} order={order} migratetype={migratetype} \
                     percpu_refill={}",
                    page_address(pfn),
                    percpu_refill as i32
                );
            }
            TraceEvent::MmPagePcpuDrain {
                pfn,
                order,
                migratetype,
            } => {
                let _ = write!(
                    out,
                    "page={:016x} pfn={pfn:#x} order={} migratetype={migratetype}",
                    page_address(pfn),
                    order as i32
                );
            }
            TraceEvent::MmPageAllocExtfrag {
                pfn,
                alloc_order,
                fallback_order,
                alloc_migratetype,
                fallback_migratetype,
                change_ownership,
            } => {
                let _ = write!(
                    out,
                    "page={:016x} pfn={pfn:#x} alloc_order={alloc_order} \
                     fallback_order={fallback_order} pageblock_order={PAGEBLOCK_ORDER} \
                     alloc_migratetype={alloc_migratetype} \
                     fallback_migratetype={fallback_migratetype} fragmenting={} \
                     change_ownership={}",
                    page_address(pfn),
                    (fallback_order < PAGEBLOCK_ORDER) as i32,
                    change_ownership as i32
                );
            }
            _ => unreachable!("{} is not rendered here", self.name()),
        }
    }

    /// The compaction events (include/trace/events/compaction.h); those without a node print
    /// node 0.
    fn render_compaction_fields(&self, out: &mut String) {
        match *self {
            TraceEvent::MmCompactionIsolate {
                start_pfn,
                end_pfn,
                nr_scanned,
                nr_taken,
                ..
            }
            | TraceEvent::MmCompactionFastIsolateFreepages {
                start_pfn,
                end_pfn,
                nr_scanned,
                nr_taken,
            } => {
                let _ = write!(
                    out,
                    "range=({start_pfn:#x} ~ {end_pfn:#x}) nr_scanned={nr_scanned} nr_taken={nr_taken}"
                );
            }
            TraceEvent::MmCompactionMigratepages {
                nr_migrated,
                nr_failed,
            } => {
                let _ = write!(out, "nr_migrated={nr_migrated} nr_failed={nr_failed}");
            }
            TraceEvent::MmCompactionBeginEnd {
                zone_start,
                migrate_pfn,
                free_pfn,
                zone_end,
                sync,
                status,
            } => {
                let _ = write!(
                    out,
                    "zone_start={zone_start:#x} migrate_pfn={migrate_pfn:#x} free_pfn={free_pfn:#x} \
                     zone_end={zone_end:#x}, mode={}",
                    if sync { "sync" } else { "async" }
                );
                if let Some(st) = status {
                    let _ = write!(out, " status={}", symbol(&COMPACT_STATUS, st.into()));
                }
            }
            TraceEvent::MmCompactionTryToCompactPages { order, gfp, prio } => {
                let _ = write!(out, "order={order} gfp_mask=");
                write_gfp_flags(out, gfp);
                let _ = write!(out, " priority={prio}");
            }
            TraceEvent::MmCompactionSuitableFinished { zone, order, ret, .. } => {
                let _ = write!(
                    out,
                    "node={} zone={:<8} order={order} ret={}",
                    zone / 5,
                    symbol(&ZONE_NAMES, (zone % 5).into()),
                    symbol(&COMPACT_STATUS, ret.into())
                );
            }
            TraceEvent::MmCompactionDefer {
                zone,
                order,
                considered,
                defer_shift,
                order_failed,
                ..
            } => {
                let _ = write!(
                    out,
                    "node={} zone={:<8} order={order} order_failed={order_failed} consider={considered} limit={}",
                    zone / 5,
                    symbol(&ZONE_NAMES, (zone % 5).into()),
                    // `1UL << defer_shift`; x86 masks the count, as wrapping_shl does.
                    1u64.wrapping_shl(defer_shift)
                );
            }
            TraceEvent::MmCompactionKcompactd {
                order,
                highest_zoneidx,
                ..
            } => {
                let _ = write!(
                    out,
                    "nid={} order={order} classzone_idx={:<8}",
                    highest_zoneidx / 5,
                    symbol(&ZONE_NAMES, (highest_zoneidx % 5).into())
                );
            }
            TraceEvent::MmCompactionKcompactdSleep { nid } => {
                let _ = write!(out, "nid={nid}");
            }
            _ => unreachable!("{} is not rendered here", self.name()),
        }
    }

    /// The vmscan events (include/trace/events/vmscan.h).
    fn render_vmscan_fields(&self, out: &mut String) {
        match *self {
            TraceEvent::MmVmscanKswapdSleep { nid } => {
                let _ = write!(out, "nid={nid}");
            }
            TraceEvent::MmVmscanKswapdWake { nid, order } => {
                let _ = write!(out, "nid={nid} order={order}");
            }
            TraceEvent::MmVmscanWakeupKswapd { nid, order, gfp } => {
                let _ = write!(out, "nid={nid} order={order} gfp_flags={}", show_gfp_flags(gfp));
            }
            TraceEvent::MmVmscanDirectReclaimBegin { order, gfp } => {
                let _ = write!(out, "order={order} gfp_flags={}", show_gfp_flags(gfp));
            }
            TraceEvent::MmVmscanDirectReclaimEnd { nr_reclaimed } => {
                let _ = write!(out, "nr_reclaimed={nr_reclaimed}");
            }
            TraceEvent::MmVmscanLruIsolate {
                highest_zoneidx,
                order,
                nr_requested,
                nr_scanned,
                nr_skipped,
                nr_taken,
                lru,
            } => {
                let _ = write!(
                    out,
                    "classzone={highest_zoneidx} order={order} nr_requested={nr_requested} nr_scanned={nr_scanned} nr_skipped={nr_skipped} nr_taken={nr_taken} lru={}",
                    symbol(&crate::vmscan::LRU_NAMES, lru.into())
                );
            }
            TraceEvent::MmVmscanLruShrinkInactive {
                nid,
                nr_scanned,
                nr_reclaimed,
                nr_dirty,
                nr_writeback,
                nr_congested,
                nr_immediate,
                nr_activate,
                nr_ref_keep,
                nr_unmap_fail,
                priority,
                flags,
            } => {
                let _ = write!(
                    out,
                    "nid={nid} nr_scanned={nr_scanned} nr_reclaimed={nr_reclaimed} nr_dirty={nr_dirty} nr_writeback={nr_writeback} nr_congested={nr_congested} nr_immediate={nr_immediate} nr_activate_anon={} nr_activate_file={} nr_ref_keep={nr_ref_keep} nr_unmap_fail={nr_unmap_fail} priority={priority} flags={}",
                    nr_activate[0],
                    nr_activate[1],
                    show_reclaim_flags(flags)
                );
            }
            TraceEvent::MmVmscanLruShrinkActive {
                nid,
                nr_taken,
                nr_active,
                nr_deactivated,
                nr_referenced,
                priority,
                flags,
            } => {
                let _ = write!(
                    out,
                    "nid={nid} nr_taken={nr_taken} nr_active={nr_active} nr_deactivated={nr_deactivated} nr_referenced={nr_referenced} priority={priority} flags={}",
                    show_reclaim_flags(flags)
                );
            }
            TraceEvent::MmVmscanReclaimPages {
                nid,
                nr_scanned,
                nr_reclaimed,
                nr_dirty,
                nr_writeback,
                nr_congested,
                nr_immediate,
                nr_activate,
                nr_ref_keep,
                nr_unmap_fail,
            } => {
                let _ = write!(
                    out,
                    "nid={nid} nr_scanned={nr_scanned} nr_reclaimed={nr_reclaimed} nr_dirty={nr_dirty} nr_writeback={nr_writeback} nr_congested={nr_congested} nr_immediate={nr_immediate} nr_activate_anon={} nr_activate_file={} nr_ref_keep={nr_ref_keep} nr_unmap_fail={nr_unmap_fail}",
                    nr_activate[0], nr_activate[1]
                );
            }
            TraceEvent::MmVmscanThrottled {
                nid,
                usec_timeout,
                usec_delayed,
                reason,
            } => {
                let _ = write!(
                    out,
                    "nid={nid} usec_timeout={usec_timeout} usect_delayed={usec_delayed} reason={}",
                    show_throttle_flags(reason)
                );
            }
            _ => unreachable!("{} is not rendered here", self.name()),
        }
    }

    /// The migrate events (include/trace/events/migrate.h).
    fn render_migrate_fields(&self, out: &mut String) {
        match *self {
            TraceEvent::MmMigratePages {
                succeeded,
                failed,
                thp_succeeded,
                thp_failed,
                thp_split,
                large_folio_split,
                mode,
                reason,
            } => {
                let _ = write!(
                    out,
                    "nr_succeeded={succeeded} nr_failed={failed} nr_thp_succeeded={thp_succeeded} \
                     nr_thp_failed={thp_failed} nr_thp_split={thp_split} nr_split={large_folio_split} \
                     mode={} reason={}",
                    symbol(&MIGRATE_MODE_NAMES, mode.into()),
                    symbol(&MIGRATE_REASON_NAMES, reason.into())
                );
            }
            TraceEvent::MmMigratePagesStart { mode, reason } => {
                let _ = write!(
                    out,
                    "mode={} reason={}",
                    symbol(&MIGRATE_MODE_NAMES, mode.into()),
                    symbol(&MIGRATE_REASON_NAMES, reason.into())
                );
            }
            _ => unreachable!("{} is not rendered here", self.name()),
        }
    }

    /// The DAMON events (include/trace/events/damon.h): `damos_before_apply` prints
    /// `ctx_idx=%u scheme_idx=%u target_idx=%lu nr_regions=%u %lu-%lu: %u %u` (the region's
    /// start and end in decimal, then its `nr_accesses` and age).
    fn render_damon_fields(&self, out: &mut String) {
        match *self {
            TraceEvent::DamosBeforeApply {
                context_idx,
                scheme_idx,
                target_idx,
                nr_regions,
                start,
                end,
                nr_accesses,
                age,
            } => {
                let _ = write!(
                    out,
                    "ctx_idx={context_idx} scheme_idx={scheme_idx} target_idx={target_idx} nr_regions={nr_regions} {start}-{end}: {nr_accesses} {age}"
                );
            }
            _ => unreachable!("{} is not rendered here", self.name()),
        }
    }
}
