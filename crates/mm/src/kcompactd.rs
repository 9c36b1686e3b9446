//! kcompactd (docs/model §9.11–§9.12, §26): `wakeup_kcompactd`, `kcompactd_node_suitable`,
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

/// kcompactd's per-node state (§9.11.1, §26).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct KcompactdState {
    /// `pgdat->kcompactd_max_order`: the highest order requested since the last
    /// `kcompactd_do_work` (kept even when no wake-up follows, §26.1 item 2).
    pub max_order: u32,
    /// `pgdat->kcompactd_highest_zoneidx` (reset value: the highest populated zone).
    pub highest_zoneidx: usize,
    /// The timeout of the thread's next wait in ms (`HPAGE_FRAG_CHECK_INTERVAL_MSEC`, or that
    /// << COMPACT_MAX_DEFER_SHIFT after a proactive run that did not lower the score); `None`
    /// = no timeout (proactiveness 0).
    pub next_timeout_ms: Option<u64>,
    /// `pgdat->proactive_compact_trigger` (§26.1 "Proactiveness writes", §26.2 item 3).
    pub proactive_trigger: bool,
    /// A modelled kcompactd thread consumes [`Wakeup::Kcompactd`] (the engine sets this). Without
    /// one (timeless runs, unit tests) nothing runs the thread between the calls that drive it,
    /// so it counts as asleep at every `wakeup_kcompactd`, as before §26.
    pub threaded: bool,
    /// The thread is not on `kcompactd_wait` (`wq_has_sleeper` false): from a wake-up or timeout
    /// until its loop waits again (only with `threaded`).
    pub awake: bool,
    /// The (max_order, highest_zoneidx) the running `kcompactd_do_work` read, until the thread
    /// waits again: requests arriving meanwhile are absorbed or kept as its end-of-work clearing
    /// would (§26.2 item 5).
    pub working: Option<(u32, usize)>,
    /// Milliseconds counted by timer ticks ([`Mm::kcompactd_tick`]) since the wait began.
    pub waited_ms: u64,
}

/// `HPAGE_FRAG_CHECK_INTERVAL_MSEC`: kcompactd's wait timeout.
pub const HPAGE_FRAG_CHECK_INTERVAL_MSEC: u64 = 500;

/// What one iteration of kcompactd's loop did.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// `wakeup_kcompactd` (§26.1, §9.11.2): order 0 returns; the request is recorded
    /// ([`Mm::kcompactd_record`]) even when no wake-up follows; only a sleeping kcompactd
    /// (`wq_has_sleeper`) is considered, and only then does `kcompactd_node_suitable` run with
    /// the recorded order and zone; a suitable node emits mm_compaction_wakeup_kcompactd (the
    /// order and zone passed in) and wakes the thread. Returns whether it woke it. A successful
    /// wake-up ends a proactive back-off: the loop resets its timeout after the work.
    /// Simplified: with a thread the timer's expiry marks it awake at once (the kernel
    /// does when the woken task runs `finish_wait`).
    pub fn wakeup_kcompactd(&mut self, nid: u32, order: u32, highest_zoneidx: usize) -> bool {
        let n = nid as usize;
        if order == 0 {
            return false;
        }
        self.kcompactd_record(nid, order, highest_zoneidx);
        if self.compact.kcompactd[n].threaded && self.compact.kcompactd[n].awake {
            return false;
        }
        let woken = self.kcompactd_node_suitable(nid);
        if woken {
            let ev = TraceEvent::MmCompactionKcompactd {
                wake: false,
                order: order as i32,
                highest_zoneidx: (nid as usize * MAX_NR_ZONES + highest_zoneidx) as u8,
            };
            self.ctrace(trace_kind::COMPACTION_KCOMPACTD, ev);
            self.outbox.wakeups.push(Wakeup::Kcompactd {
                nid,
                order,
                highest_zoneidx,
            });
            if self.compact.kcompactd[n].threaded {
                self.compact.kcompactd[n].awake = true;
            }
        }
        woken
    }

    /// The recording half of `wakeup_kcompactd` (§26.1 item 2): max_order = max(…, order),
    /// highest_zoneidx = min(…, zoneidx). While a `kcompactd_do_work` runs ([`KcompactdState::working`])
    /// its end-of-work clearing has not happened yet in the kernel: an order ≤ the one it works on
    /// and a zone ≥ its zone would be cleared with it (absorbed), a higher order or lower zone stays
    /// and is served right after (§26.2 item 5). The model's work is atomic and has already cleared
    /// both, so this applies the same rule here.
    pub fn kcompactd_record(&mut self, nid: u32, order: u32, highest_zoneidx: usize) {
        let n = nid as usize;
        let k = &mut self.compact.kcompactd[n];
        let (keep_order, keep_zone) = match k.working {
            Some((wo, wz)) => (order > wo, highest_zoneidx < wz),
            None => (true, true),
        };
        if keep_order && k.max_order < order {
            k.max_order = order;
        }
        if keep_zone && k.highest_zoneidx > highest_zoneidx {
            k.highest_zoneidx = highest_zoneidx;
        }
    }

    /// `pgdat->nr_zones - 1`: the highest populated zone, kcompactd's reset value.
    pub fn kcompactd_max_zoneidx(&self, nid: u32) -> usize {
        let base = nid as usize * MAX_NR_ZONES;
        (0..MAX_NR_ZONES)
            .rev()
            .find(|&i| self.zones[base + i].populated())
            .unwrap_or(0)
    }

    /// `kcompactd_node_suitable`.
    pub fn kcompactd_node_suitable(&mut self, nid: u32) -> bool {
        let n = nid as usize;
        let af = AllocFlags(if self.defrag_watermarks() {
            AllocFlags::WMARK_HIGH
        } else {
            AllocFlags::WMARK_MIN
        });
        let highest = self.compact.kcompactd[n].highest_zoneidx.min(MAX_NR_ZONES - 1);
        let order = self.compact.kcompactd[n].max_order;
        let base = nid as usize * MAX_NR_ZONES;
        (base..=base + highest).any(|zi| {
            self.zones[zi].populated()
                && self.compaction_suit_allocation_order(zi, order, highest, af, false, true)
                    == CompactResult::Continue
        })
    }

    /// `kcompactd_do_work` (§9.11.4, §8 D8–D10): SYNC_LIGHT with GFP_KERNEL (so UNMOVABLE),
    /// cached positions, skip hints honoured, no capture; drains all PCPs and defers after a
    /// failed zone. Counts compact_daemon_*.
    pub fn kcompactd_do_work(&mut self, nid: u32) -> CompactRunStats {
        let n = nid as usize;
        let order = self.compact.kcompactd[n].max_order;
        let highest = self.compact.kcompactd[n].highest_zoneidx.min(MAX_NR_ZONES - 1);
        let af = AllocFlags(if self.defrag_watermarks() {
            AllocFlags::WMARK_HIGH
        } else {
            AllocFlags::WMARK_MIN
        });
        self.count(Stat::compact_daemon_wake, 1);
        let ev = TraceEvent::MmCompactionKcompactd {
            wake: true,
            order: order as i32,
            highest_zoneidx: (nid as usize * MAX_NR_ZONES + highest) as u8,
        };
        self.ctrace(trace_kind::COMPACTION_KCOMPACTD, ev);
        let mut total = CompactRunStats::default();
        let base = nid as usize * MAX_NR_ZONES;
        for zi in base..=base + highest {
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
            let cpu = self.kswapd_cpu(nid);
            let mut cc = CompactControl::new(zi, order as i32, Gfp::GFP_KERNEL, MigrateMode::SyncLight, cpu);
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
        if self.compact.kcompactd[n].max_order <= order {
            self.compact.kcompactd[n].max_order = 0;
        }
        if self.compact.kcompactd[n].highest_zoneidx >= highest {
            self.compact.kcompactd[n].highest_zoneidx = self.kcompactd_max_zoneidx(nid);
        }
        total
    }

    /// `should_proactive_compact_node` (§9.12.4): proactiveness on, kswapd not running, and
    /// the node's score above the high threshold.
    pub fn should_proactive_compact_node(&self, nid: u32) -> bool {
        let n = nid as usize;
        self.compact.cfg.proactiveness > 0
            && self.reclaim.kswapd[n].phase != crate::kswapd::KswapdPhase::Running
            && self.fragmentation_score_node(nid) > self.fragmentation_score_wmark(false)
    }

    /// One pass of the `kcompactd` thread loop after its wait ended (§26.2 items 2–3, §9.12.4):
    /// with a recorded order and no trigger, `kcompactd_do_work` (the wait's condition is
    /// re-evaluated at a timeout too, so an order recorded without a wake-up is served then);
    /// otherwise the proactive check — `should_proactive_compact_node`, `compact_node(proactive)`
    /// and a 32 s back-off when the node score did not drop — then the trigger is cleared. A
    /// pending order is not served during a triggered check but right after it (the next wait
    /// returns at once). Either branch resets the timeout to 500 ms first (so any work after a
    /// wake-up ends a back-off). The wait itself is [`Mm::kcompactd_wait`].
    pub fn kcompactd_run(&mut self, nid: u32) -> KcompactdCycle {
        let n = nid as usize;
        let mut out = KcompactdCycle::default();
        if self.compact.kcompactd[n].threaded {
            self.compact.kcompactd[n].awake = true;
        }
        let mut timeout = HPAGE_FRAG_CHECK_INTERVAL_MSEC;
        if self.compact.kcompactd[n].max_order > 0 && !self.compact.kcompactd[n].proactive_trigger {
            let read = (
                self.compact.kcompactd[n].max_order,
                self.compact.kcompactd[n].highest_zoneidx.min(MAX_NR_ZONES - 1),
            );
            out.stats = self.kcompactd_do_work(nid);
            out.did_work = true;
            if self.compact.kcompactd[n].threaded {
                self.compact.kcompactd[n].working = Some(read);
            }
        } else {
            if self.should_proactive_compact_node(nid) {
                let prev = self.fragmentation_score_node(nid);
                out.stats = self.compact_node(nid, true);
                out.proactive = true;
                if self.fragmentation_score_node(nid) >= prev {
                    timeout <<= COMPACT_MAX_DEFER_SHIFT;
                }
            }
            self.compact.kcompactd[n].proactive_trigger = false;
        }
        self.compact.kcompactd[n].next_timeout_ms = Some(timeout);
        out.next_timeout_ms = Some(timeout);
        out
    }

    /// The top of kcompactd's loop (§26.2 item 1): emit mm_compaction_kcompactd_sleep, then wait
    /// for `max_order > 0` or the trigger, up to the timeout (none at proactiveness 0). Returns
    /// the wait's timeout in ms: `Some(0)` when the condition already holds (the wait returns at
    /// once and the thread stays awake: a higher order recorded during the work, or an order
    /// pending behind a triggered check), `None` for no timeout.
    pub fn kcompactd_wait(&mut self, nid: u32) -> Option<u64> {
        let n = nid as usize;
        self.ctrace(
            trace_kind::COMPACTION_KCOMPACTD,
            TraceEvent::MmCompactionKcompactdSleep { nid: nid as i32 },
        );
        let k = &mut self.compact.kcompactd[n];
        k.working = None;
        k.waited_ms = 0;
        if self.compact.cfg.proactiveness == 0 {
            k.next_timeout_ms = None;
        }
        if k.max_order > 0 || k.proactive_trigger {
            return Some(0);
        }
        k.awake = false;
        k.next_timeout_ms
    }

    /// kcompactd's wait timed out (the engine's timer): the thread is awake until it waits again.
    pub fn kcompactd_timed_out(&mut self, nid: u32) {
        let n = nid as usize;
        if self.compact.kcompactd[n].threaded {
            self.compact.kcompactd[n].awake = true;
        }
    }

    /// One iteration of the loop: [`Mm::kcompactd_run`] then [`Mm::kcompactd_wait`];
    /// `next_timeout_ms` is the wait's (`Some(0)`: it returns at once).
    pub fn kcompactd_cycle(&mut self, nid: u32) -> KcompactdCycle {
        let mut out = self.kcompactd_run(nid);
        out.next_timeout_ms = self.kcompactd_wait(nid);
        out
    }

    /// Iterations of the loop until it waits for real (at most 4: an order pending behind a
    /// triggered check is served right after it; the work clears both conditions).
    pub fn kcompactd_until_wait(&mut self, nid: u32) -> CompactRunStats {
        let mut total = CompactRunStats::default();
        for _ in 0..4 {
            let c = self.kcompactd_cycle(nid);
            total.add(&c.stats);
            if c.next_timeout_ms != Some(0) {
                break;
            }
        }
        total
    }

    /// kcompactd's wait ends now by its timeout, whatever time is left of it (so a 32 s back-off
    /// is not honoured — the `proactive_compact` op's default `mode = "timer"`): the loop runs
    /// until it waits again.
    pub fn kcompactd_timer(&mut self, nid: u32) -> CompactRunStats {
        self.kcompactd_timed_out(nid);
        self.kcompactd_until_wait(nid)
    }

    /// `ms` of time pass for a sleeping kcompactd (`mode = "tick"`, §26.2–§26.3): the timeout
    /// expires only once the wait has lasted its full timeout (500 ms, 32 s after a fruitless
    /// proactive run, never at proactiveness 0); then as [`Mm::kcompactd_timer`]. Returns the
    /// run's statistics, `None` when the thread slept on.
    pub fn kcompactd_tick(&mut self, nid: u32, ms: u64) -> Option<CompactRunStats> {
        let n = nid as usize;
        let k = &mut self.compact.kcompactd[n];
        k.waited_ms += ms;
        match k.next_timeout_ms {
            Some(t) if k.waited_ms >= t => Some(self.kcompactd_timer(nid)),
            _ => None,
        }
    }

    /// A non-zero write to `vm.compaction_proactiveness` (§26.1 "Proactiveness writes",
    /// `compaction_proactiveness_sysctl_handler`): set `proactive_compact_trigger`; if the thread
    /// sleeps, emit mm_compaction_wakeup_kcompactd with order −1 and wake it. Returns whether it
    /// woke it. Without a thread the woken loop is run here until it waits again.
    pub fn kcompactd_trigger(&mut self, nid: u32) -> (bool, CompactRunStats) {
        let n = nid as usize;
        self.compact.kcompactd[n].proactive_trigger = true;
        let k = &self.compact.kcompactd[n];
        if k.threaded && k.awake {
            return (false, CompactRunStats::default());
        }
        let zone = self.kcompactd_max_zoneidx(nid);
        let ev = TraceEvent::MmCompactionKcompactd {
            wake: false,
            order: -1,
            highest_zoneidx: (nid as usize * MAX_NR_ZONES + zone) as u8,
        };
        self.ctrace(trace_kind::COMPACTION_KCOMPACTD, ev);
        if self.compact.kcompactd[n].threaded {
            self.outbox.wakeups.push(Wakeup::Kcompactd {
                nid,
                order: 0,
                highest_zoneidx: zone,
            });
            self.compact.kcompactd[n].awake = true;
            return (true, CompactRunStats::default());
        }
        (true, self.kcompactd_until_wait(nid))
    }
}
