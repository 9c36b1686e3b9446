//! kcompactd (`kernel-model.md` §9.11–§9.12, §26): `wakeup_kcompactd`, `kcompactd_node_suitable`,
//! `kcompactd_do_work`, the thread's loop and the proactive check. Models the kcompactd part of
//! mm/compaction.c of Linux 6.18; `compact_node` (shared with /proc/sys/vm/compact_memory) and the
//! fragmentation scores stay in `compaction.rs`.

use crate::compaction::{
    CompactControl, CompactResult, CompactRunStats, MigrateMode, COMPACT_MAX_DEFER_SHIFT,
};
use crate::gfp::{AllocFlags, Gfp};
use crate::node::{trace_kind, Mm, Wakeup};
use crate::trace::TraceEvent;
use crate::types::*;
use crate::vmstat::Stat;

/// kcompactd's per-node state (§9.11.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KcompactdState {
    pub max_order: u32,
    pub highest_zoneidx: usize,
    /// The timeout of the thread's next wait in ms (`HPAGE_FRAG_CHECK_INTERVAL_MSEC`, or that
    /// << COMPACT_MAX_DEFER_SHIFT after a proactive run that did not lower the score); `None`
    /// = no timeout (proactiveness 0).
    pub next_timeout_ms: Option<u64>,
}

/// `HPAGE_FRAG_CHECK_INTERVAL_MSEC`: kcompactd's wait timeout.
pub const HPAGE_FRAG_CHECK_INTERVAL_MSEC: u64 = 500;

/// What one iteration of kcompactd's loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KcompactdCycle {
    /// `kcompactd_do_work` ran (a recorded order).
    pub did_work: bool,
    /// A proactive `compact_node` ran.
    pub proactive: bool,
    pub stats: CompactRunStats,
    /// The timeout of the wait that follows (`None`: until woken).
    pub next_timeout_ms: Option<u64>,
}

impl Mm {
    /// `wakeup_kcompactd` (§9.11.2): records the order and zone; returns whether the thread
    /// would be woken now (`kcompactd_node_suitable`).
    pub fn wakeup_kcompactd(&mut self, order: u32, highest_zoneidx: usize) -> bool {
        if order == 0 {
            return false;
        }
        if self.compact.kcompactd.max_order < order {
            self.compact.kcompactd.max_order = order;
        }
        if self.compact.kcompactd.highest_zoneidx > highest_zoneidx {
            self.compact.kcompactd.highest_zoneidx = highest_zoneidx;
        }
        let woken = self.kcompactd_node_suitable();
        if woken {
            let ev = TraceEvent::MmCompactionKcompactd {
                wake: false,
                order: order as i32,
                highest_zoneidx: highest_zoneidx as u8,
            };
            self.ctrace(trace_kind::COMPACTION_KCOMPACTD, ev);
            self.outbox.wakeups.push(Wakeup::Kcompactd {
                order,
                highest_zoneidx,
            });
        }
        woken
    }

    /// `pgdat->nr_zones - 1`: the highest populated zone, kcompactd's reset value.
    pub fn kcompactd_max_zoneidx(&self) -> usize {
        (0..self.zones.len())
            .rev()
            .find(|&i| self.zones[i].populated())
            .unwrap_or(0)
    }

    /// `kcompactd_node_suitable`.
    pub fn kcompactd_node_suitable(&mut self) -> bool {
        let af = AllocFlags(if self.tun.defrag_watermarks() {
            AllocFlags::WMARK_HIGH
        } else {
            AllocFlags::WMARK_MIN
        });
        let highest = self.compact.kcompactd.highest_zoneidx.min(MAX_NR_ZONES - 1);
        let order = self.compact.kcompactd.max_order;
        (0..=highest).any(|zi| {
            self.zones[zi].populated()
                && self.compaction_suit_allocation_order(zi, order, highest, af, false, true)
                    == CompactResult::Continue
        })
    }

    /// `kcompactd_do_work` (§9.11.4, §8 D8–D10): SYNC_LIGHT with GFP_KERNEL (so UNMOVABLE),
    /// cached positions, skip hints honoured, no capture; drains all PCPs and defers after a
    /// failed zone. Counts compact_daemon_*.
    pub fn kcompactd_do_work(&mut self) -> CompactRunStats {
        let order = self.compact.kcompactd.max_order;
        let highest = self.compact.kcompactd.highest_zoneidx.min(MAX_NR_ZONES - 1);
        let af = AllocFlags(if self.tun.defrag_watermarks() {
            AllocFlags::WMARK_HIGH
        } else {
            AllocFlags::WMARK_MIN
        });
        self.count(Stat::compact_daemon_wake, 1);
        let ev = TraceEvent::MmCompactionKcompactd {
            wake: true,
            order: order as i32,
            highest_zoneidx: highest as u8,
        };
        self.ctrace(trace_kind::COMPACTION_KCOMPACTD, ev);
        let mut total = CompactRunStats::default();
        for zi in 0..=highest {
            if !self.zones[zi].populated() {
                continue;
            }
            if self.compaction_deferred(zi, order) {
                continue;
            }
            if self.compaction_suit_allocation_order(zi, order, zi, af, false, true)
                != CompactResult::Continue
            {
                continue;
            }
            let mut cc = CompactControl::new(zi, order as i32, Gfp::GFP_KERNEL, MigrateMode::SyncLight, 0);
            cc.alloc_flags = af;
            cc.highest_zoneidx = highest;
            let (status, stats) = self.compact_zone(&mut cc);
            if status == CompactResult::Success {
                self.compaction_defer_reset(zi, order, false);
            } else if matches!(status, CompactResult::PartialSkipped | CompactResult::Complete) {
                for cpu in 0..self.nr_cpus {
                    self.drain_pages_zone(cpu, zi);
                }
                self.defer_compaction(zi, order);
            }
            self.count(Stat::compact_daemon_migrate_scanned, stats.migrate_scanned);
            self.count(Stat::compact_daemon_free_scanned, stats.free_scanned);
            total.add(&stats);
        }
        if self.compact.kcompactd.max_order <= order {
            self.compact.kcompactd.max_order = 0;
        }
        if self.compact.kcompactd.highest_zoneidx >= highest {
            self.compact.kcompactd.highest_zoneidx = self.kcompactd_max_zoneidx();
        }
        total
    }

    /// `should_proactive_compact_node` (§9.12.4): proactiveness on, kswapd not running, and
    /// the node's score above the high threshold.
    pub fn should_proactive_compact_node(&self) -> bool {
        self.compact.cfg.proactiveness > 0
            && self.reclaim.kswapd.phase != crate::kswapd::KswapdPhase::Running
            && self.fragmentation_score_node() > self.fragmentation_score_wmark(false)
    }

    /// One iteration of the `kcompactd` thread loop (§9.11.5, §9.12.4), run when its wait ends
    /// — by a wake-up ([`crate::Wakeup::Kcompactd`]) or by the timeout in `next_timeout_ms`; the
    /// wait condition is re-evaluated either way, so a recorded order is worked on
    /// (`kcompactd_do_work`) whether or not it woke the thread. Otherwise the proactive check
    /// runs (`compact_node`, with a 32 s back-off when the score did not go down). Ends with
    /// mm_compaction_kcompactd_sleep and the next wait's timeout (none with proactiveness 0).
    pub fn kcompactd_cycle(&mut self) -> KcompactdCycle {
        let mut out = KcompactdCycle::default();
        let mut timeout = HPAGE_FRAG_CHECK_INTERVAL_MSEC;
        if self.compact.kcompactd.max_order > 0 {
            out.stats = self.kcompactd_do_work();
            out.did_work = true;
        } else if self.should_proactive_compact_node() {
            let prev = self.fragmentation_score_node();
            out.stats = self.compact_node(true);
            out.proactive = true;
            if self.fragmentation_score_node() >= prev {
                timeout <<= COMPACT_MAX_DEFER_SHIFT;
            }
        }
        out.next_timeout_ms = (self.compact.cfg.proactiveness > 0).then_some(timeout);
        self.compact.kcompactd.next_timeout_ms = out.next_timeout_ms;
        self.ctrace(
            trace_kind::COMPACTION_KCOMPACTD,
            TraceEvent::MmCompactionKcompactdSleep { nid: 0 },
        );
        out
    }

    /// One expiry of kcompactd's 500 ms timer: [`Mm::kcompactd_cycle`]'s compaction work.
    pub fn kcompactd_timer(&mut self) -> CompactRunStats {
        self.kcompactd_cycle().stats
    }
}
