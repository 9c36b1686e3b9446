//! kswapd (docs/model §10.1–§10.2, §8 D6–D7): `wakeup_kswapd`, the thread's loop
//! (`kswapd`, `kswapd_try_to_sleep`, `prepare_kswapd_sleep`), `balance_pgdat` with boost
//! accounting and `kswapd_shrink_node`, and the hand-off to kcompactd. Models mm/vmscan.c.
//!
//! The model has no clock: the thread is a state machine whose steps the engine schedules.
//! `wakeup_kswapd` records the request and, when the thread is waiting, pushes
//! [`Wakeup::Kswapd`]; the engine then calls [`Mm::kswapd_run`] (one wake-up: `balance_pgdat`
//! and the first half of `kswapd_try_to_sleep`). If that ends in the 100 ms nap the engine calls
//! [`Mm::kswapd_nap_done`] when the nap expires (a `wakeup_kswapd` during the nap cuts it
//! short, as `schedule_timeout` returning early does). [`Mm::kswapd_until_sleep`] runs the thread
//! to sleep with nothing else happening in between (the timeless runner's semantics).
//!
//! Simplifications: kswapd frees to CPU 0's PCP lists; no freezer, no pfmemalloc waiters, no
//! memcg soft limit, no buffer_heads_over_limit; the vmstat
//! threshold switch (`set_pgdat_percpu_threshold`) does not arise (counters are exact).

use crate::gfp::Gfp;
use crate::node::{trace_kind, Mm, Wakeup};
use crate::trace::TraceEvent;
use crate::types::*;
use crate::vmscan::{ScanControl, DEF_PRIORITY, LRU_ACTIVE_ANON, LRU_INACTIVE_ANON};
use crate::vmstat::Stat;

/// `MAX_RECLAIM_RETRIES`: kswapd_failures at which the node is hopeless.
pub const KSWAPD_MAX_FAILURES: u32 = 16;
/// The CPU whose PCP lists receive what kswapd frees (the model has no kswapd CPU).
pub const KSWAPD_CPU: u32 = 0;

/// Where the kswapd thread is.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KswapdPhase {
    /// Asleep until woken (`schedule()` in `kswapd_try_to_sleep`).
    Sleeping,
    /// In the 100 ms nap of `kswapd_try_to_sleep`, with the orders it will sleep for.
    Napping {
        alloc_order: u32,
        reclaim_order: u32,
        highest_zoneidx: usize,
    },
    /// Runnable: woken, or not able to sleep; the engine must call `kswapd_run`.
    Running,
}

/// The node's kswapd state (`pgdat->kswapd_order`, `kswapd_highest_zoneidx`, the thread's
/// local `highest_zoneidx`, and where it is).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct KswapdState {
    /// `pgdat->kswapd_order`.
    pub order: u32,
    /// `pgdat->kswapd_highest_zoneidx`; `None` is MAX_NR_ZONES ("unset").
    pub highest_zoneidx: Option<usize>,
    /// The thread's `highest_zoneidx` from its previous cycle.
    pub prev_highest_zoneidx: usize,
    pub phase: KswapdPhase,
    /// A wake-up arrived during the nap (`schedule_timeout` returned early).
    pub nap_cut_short: bool,
    /// Wake-ups that woke the thread (emitted mm_vmscan_wakeup_kswapd).
    pub wakes: u64,
}

impl Default for KswapdState {
    fn default() -> Self {
        KswapdState {
            order: 0,
            highest_zoneidx: None,
            prev_highest_zoneidx: MAX_NR_ZONES - 1,
            phase: KswapdPhase::Sleeping,
            nap_cut_short: false,
            wakes: 0,
        }
    }
}

/// What one `kswapd_run` or `kswapd_nap_done` did, and what the thread does next.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KswapdCycle {
    /// `balance_pgdat` ran (kswapd_run only).
    pub balanced_run: bool,
    pub alloc_order: u32,
    pub reclaim_order: u32,
    pub highest_zoneidx: usize,
    pub scanned: u64,
    pub reclaimed: u64,
    /// Priority passes of `balance_pgdat`.
    pub passes: u32,
    /// kcompactd was woken by kswapd (end of a boosted run or before the nap).
    pub kcompactd_woken: bool,
    /// The thread naps next (engine: call `kswapd_nap_done` after 100 ms).
    pub napping: bool,
    /// The thread went to sleep.
    pub asleep: bool,
}

/// The result of `balance_pgdat`.
#[derive(serde::Serialize, serde::Deserialize)]
struct BalanceResult {
    reclaim_order: u32,
    scanned: u64,
    reclaimed: u64,
    passes: u32,
    kcompactd_woken: bool,
}

impl Mm {
    /// `wakeup_kswapd(zone, gfp, order, highest_zoneidx)` (§10.1): records the request; if the
    /// thread waits (asleep or napping) and the node is neither hopeless nor balanced without
    /// boost, wakes it (mm_vmscan_wakeup_kswapd; the engine gets [`Wakeup::Kswapd`]); a
    /// balanced or hopeless node instead gets kcompactd woken when the gfp cannot direct
    /// reclaim (e.g. THP defrag=defer).
    pub fn wakeup_kswapd(&mut self, zi: usize, gfp: Gfp, order: u32, highest_zoneidx: ZoneType) {
        if self.zones[zi].managed == 0 {
            return;
        }
        let hz = highest_zoneidx.idx();
        let nid = self.zones[zi].nid;
        let n = nid as usize;
        let k = &mut self.reclaim.kswapd[n];
        if k.highest_zoneidx.is_none_or(|cur| cur < hz) {
            k.highest_zoneidx = Some(hz);
        }
        if k.order < order {
            k.order = order;
        }
        if k.phase == KswapdPhase::Running {
            return;
        }
        if self.reclaim.kswapd_failures[n] >= KSWAPD_MAX_FAILURES
            || (self.pgdat_balanced(nid, order, hz) && !self.pgdat_watermark_boosted(nid, hz))
        {
            if !gfp.intersects(Gfp::DIRECT_RECLAIM) {
                self.wakeup_kcompactd(nid, order, hz);
            }
            return;
        }
        match self.reclaim.kswapd[n].phase {
            KswapdPhase::Napping { .. } => self.reclaim.kswapd[n].nap_cut_short = true,
            _ => self.reclaim.kswapd[n].phase = KswapdPhase::Running,
        }
        self.reclaim.kswapd[n].wakes += 1;
        if self.trace_on(trace_kind::VMSCAN_KSWAPD) {
            let ev = TraceEvent::MmVmscanWakeupKswapd {
                nid: nid as i32,
                order: order as i32,
                gfp,
            };
            self.emit(0, ev);
        }
        self.outbox.wakeups.push(Wakeup::Kswapd {
            nid,
            zone: self.zones[zi].zone_type,
            order,
            highest_zoneidx,
            gfp: gfp.0,
        });
    }

    /// `kswapd_highest_zoneidx`: the recorded zone index, or the previous cycle's if unset.
    fn kswapd_highest_zoneidx(&self, nid: u32, prev: usize) -> usize {
        self.reclaim.kswapd[nid as usize].highest_zoneidx.unwrap_or(prev)
    }

    /// Whether node `nid`'s kswapd is off its wait queue, running (`!waitqueue_active(
    /// &pgdat->kswapd_wait)`; napping and sleeping both wait on the queue).
    #[inline]
    pub fn kswapd_running(&self, nid: u32) -> bool {
        self.reclaim.kswapd[nid as usize].phase == KswapdPhase::Running
    }

    /// The CPU node `nid`'s kswapd frees to (the node's first CPU, or CPU 0 for a node
    /// without CPUs; the model has no kswapd CPU of its own).
    pub fn kswapd_cpu(&self, nid: u32) -> u32 {
        if nid == 0 {
            return KSWAPD_CPU;
        }
        self.numa.cpu_node.iter().position(|&n| n == nid).unwrap_or(0) as u32
    }

    /// `prepare_kswapd_sleep` (§10.2.3): the node is hopeless or balanced at `order`.
    pub fn prepare_kswapd_sleep(&self, nid: u32, order: u32, highest_zoneidx: usize) -> bool {
        self.reclaim.kswapd_failures[nid as usize] >= KSWAPD_MAX_FAILURES
            || self.pgdat_balanced(nid, order, highest_zoneidx)
    }

    /// One pass of the kswapd thread from a wake-up (§10.2.1): read and reset the request,
    /// `balance_pgdat`, then the first half of `kswapd_try_to_sleep` — with the orders the
    /// kernel uses: (alloc, reclaim) when reclaim stopped below the requested order, otherwise
    /// the (possibly new) recorded order for both. If the node is balanced (or hopeless) the
    /// skip bits are reset, kcompactd is woken for the allocation order and the thread naps;
    /// otherwise `kswapd_high_wmark_hit_quickly` and the thread stays runnable.
    pub fn kswapd_run(&mut self, nid: u32) -> KswapdCycle {
        let n = nid as usize;
        let alloc_order = self.reclaim.kswapd[n].order;
        let hz = self.kswapd_highest_zoneidx(nid, self.reclaim.kswapd[n].prev_highest_zoneidx);
        self.reclaim.kswapd[n].order = 0;
        self.reclaim.kswapd[n].highest_zoneidx = None;
        self.reclaim.kswapd[n].prev_highest_zoneidx = hz;
        self.reclaim.kswapd[n].phase = KswapdPhase::Running;
        self.reclaim.kswapd[n].nap_cut_short = false;
        self.kswapd_trace_wake(nid, alloc_order);
        let b = self.balance_pgdat(nid, alloc_order, hz);
        let mut cycle = KswapdCycle {
            balanced_run: true,
            alloc_order,
            reclaim_order: b.reclaim_order,
            highest_zoneidx: hz,
            scanned: b.scanned,
            reclaimed: b.reclaimed,
            passes: b.passes,
            kcompactd_woken: b.kcompactd_woken,
            ..Default::default()
        };
        let (a, r, h) = if b.reclaim_order < alloc_order {
            (alloc_order, b.reclaim_order, hz)
        } else {
            // Back at the top of the kswapd() loop: both orders are the recorded one.
            let o = self.reclaim.kswapd[n].order;
            let h = self.kswapd_highest_zoneidx(nid, hz);
            self.reclaim.kswapd[n].prev_highest_zoneidx = h;
            (o, o, h)
        };
        self.kswapd_try_to_sleep(nid, a, r, h, &mut cycle);
        cycle
    }

    /// The first half of `kswapd_try_to_sleep` (§10.2.3).
    fn kswapd_try_to_sleep(
        &mut self,
        nid: u32,
        alloc_order: u32,
        reclaim_order: u32,
        hz: usize,
        cycle: &mut KswapdCycle,
    ) {
        let n = nid as usize;
        if self.prepare_kswapd_sleep(nid, reclaim_order, hz) {
            for zi in self.node_zones(nid) {
                self.reset_isolation_suitable(zi);
            }
            if alloc_order > 0 {
                cycle.kcompactd_woken |= self.wakeup_kcompactd(nid, alloc_order, hz);
            }
            self.reclaim.kswapd[n].nap_cut_short = false;
            self.reclaim.kswapd[n].phase = KswapdPhase::Napping {
                alloc_order,
                reclaim_order,
                highest_zoneidx: hz,
            };
            cycle.napping = true;
        } else {
            self.count(Stat::kswapd_high_wmark_hit_quickly, 1);
            self.reclaim.kswapd[n].phase = KswapdPhase::Running;
        }
    }

    /// The end of kswapd's 100 ms nap (second half of `kswapd_try_to_sleep`): a nap cut short
    /// by a wake-up restores the request (`kswapd_low_wmark_hit_quickly`); a full nap on a
    /// still balanced node goes to sleep (mm_vmscan_kswapd_sleep); otherwise
    /// `kswapd_high_wmark_hit_quickly` and the thread runs again.
    pub fn kswapd_nap_done(&mut self, nid: u32) -> KswapdCycle {
        let n = nid as usize;
        let KswapdPhase::Napping {
            alloc_order,
            reclaim_order,
            highest_zoneidx,
        } = self.reclaim.kswapd[n].phase
        else {
            panic!(
                "kswapd_nap_done while kswapd is {:?}",
                self.reclaim.kswapd[n].phase
            );
        };
        let remaining = self.reclaim.kswapd[n].nap_cut_short;
        let mut cycle = KswapdCycle {
            alloc_order,
            reclaim_order,
            highest_zoneidx,
            ..Default::default()
        };
        if remaining {
            let h = self.kswapd_highest_zoneidx(nid, highest_zoneidx);
            self.reclaim.kswapd[n].highest_zoneidx = Some(h);
            if self.reclaim.kswapd[n].order < reclaim_order {
                self.reclaim.kswapd[n].order = reclaim_order;
            }
        }
        if !remaining && self.prepare_kswapd_sleep(nid, reclaim_order, highest_zoneidx) {
            self.kswapd_trace_sleep(nid);
            self.reclaim.kswapd[n].phase = KswapdPhase::Sleeping;
            cycle.asleep = true;
        } else {
            self.count(
                if remaining {
                    Stat::kswapd_low_wmark_hit_quickly
                } else {
                    Stat::kswapd_high_wmark_hit_quickly
                },
                1,
            );
            self.reclaim.kswapd[n].phase = KswapdPhase::Running;
        }
        self.reclaim.kswapd[n].nap_cut_short = false;
        cycle
    }

    /// Runs kswapd, if it is not asleep, until it sleeps, with no other activity in between
    /// (every nap runs to its end). Stops after `max_runs` calls of `kswapd_run` (a node that
    /// can neither be balanced nor becomes hopeless would otherwise loop). Returns the
    /// cycles.
    pub fn kswapd_until_sleep(&mut self, nid: u32, max_runs: u32) -> Vec<KswapdCycle> {
        let mut out = Vec::new();
        let mut runs = 0;
        loop {
            match self.reclaim.kswapd[nid as usize].phase {
                KswapdPhase::Sleeping => break,
                KswapdPhase::Napping { .. } => out.push(self.kswapd_nap_done(nid)),
                KswapdPhase::Running => {
                    if runs == max_runs {
                        break;
                    }
                    runs += 1;
                    out.push(self.kswapd_run(nid));
                }
            }
        }
        out
    }

    /// `kswapd_age_node`: age the anon active list when its inactive list is low and a swap
    /// device exists (`can_age_anon_pages`: total swap, not free slots or may_swap; §10.2.2).
    fn kswapd_age_node(&mut self, sc: &mut ScanControl) {
        if self.reclaim.swap.total == 0 {
            return;
        }
        if self.inactive_is_low(sc.nid, LRU_INACTIVE_ANON) {
            self.shrink_active_list(SWAP_CLUSTER_MAX, LRU_ACTIVE_ANON, sc);
        }
    }

    /// `kswapd_shrink_node` (§10.2.2): reclaim Σ max(high wmark, 32) over the eligible zones;
    /// once 2<<order pages were reclaimed, drop to order 0 (leave high order to compaction).
    /// Returns whether enough was scanned (then the priority is not raised).
    fn kswapd_shrink_node(&mut self, sc: &mut ScanControl) -> bool {
        let start = sc.nr_reclaimed;
        let base = sc.nid as usize * MAX_NR_ZONES;
        sc.nr_to_reclaim = (base..=base + sc.reclaim_idx.min(MAX_NR_ZONES - 1))
            .filter(|&zi| self.zones[zi].managed > 0)
            .map(|zi| {
                self.zones[zi]
                    .wmark_pages(crate::mmzone::WMARK_HIGH)
                    .max(SWAP_CLUSTER_MAX)
            })
            .sum();
        self.shrink_node(sc);
        if sc.order > 0 && sc.nr_reclaimed >= crate::compaction::compact_gap(sc.order) {
            sc.order = 0;
        }
        sc.nr_scanned.max(sc.nr_reclaimed - start) >= sc.nr_to_reclaim
    }

    /// `balance_pgdat` (§10.2.2): reclaim until a zone up to `hz` is balanced at the (possibly
    /// lowered) order, priority 12 down to 1; boosted reclaim (a watermark boost pending) uses
    /// no swap and stops lowering the priority at 10, is abandoned for normal balancing when
    /// the node is unbalanced, and ends when it reclaims nothing. A run that reclaims nothing
    /// counts a kswapd failure. A boosted run subtracts its boosts and wakes kcompactd for
    /// pageblock order. Counts `pageoutrun`.
    fn balance_pgdat(&mut self, nid: u32, order: u32, hz: usize) -> BalanceResult {
        self.count(Stat::pageoutrun, 1);
        let base = nid as usize * MAX_NR_ZONES;
        let last = base + hz.min(MAX_NR_ZONES - 1);
        let mut zone_boosts = [0u64; MAX_NR_ZONES];
        let mut nr_boost_reclaim = 0u64;
        for (boost, z) in zone_boosts.iter_mut().zip(&self.zones[base..=last]) {
            if z.managed > 0 {
                *boost = z.watermark_boost;
                nr_boost_reclaim += z.watermark_boost;
            }
        }
        let boosted = nr_boost_reclaim > 0;
        let mut sc = ScanControl::direct(hz, order, self.kswapd_cpu(nid));
        sc.kswapd = true;
        sc.nid = nid;
        let mut passes = 0;
        let mut scanned = 0;
        'restart: loop {
            self.set_reclaim_active(base, last, true);
            sc.priority = DEF_PRIORITY;
            let mut done = false;
            loop {
                let before = sc.nr_reclaimed;
                let mut raise_priority = true;
                sc.reclaim_idx = hz;
                let balanced = self.pgdat_balanced(nid, sc.order, hz);
                if !balanced && nr_boost_reclaim > 0 {
                    nr_boost_reclaim = 0;
                    continue 'restart;
                }
                if nr_boost_reclaim == 0 && balanced {
                    done = true;
                    break;
                }
                if nr_boost_reclaim > 0 && sc.priority == DEF_PRIORITY - 2 {
                    raise_priority = false;
                }
                sc.may_swap = nr_boost_reclaim == 0;
                self.kswapd_age_node(&mut sc);
                sc.nr_scanned = 0;
                passes += 1;
                if self.kswapd_shrink_node(&mut sc) {
                    raise_priority = false;
                }
                scanned += sc.nr_scanned;
                let reclaimed = sc.nr_reclaimed - before;
                nr_boost_reclaim -= nr_boost_reclaim.min(reclaimed);
                if nr_boost_reclaim > 0 && reclaimed == 0 {
                    break;
                }
                if raise_priority || reclaimed == 0 {
                    sc.priority -= 1;
                }
                if sc.priority < 1 {
                    break;
                }
            }
            // Restart once without cache-trim mode if the whole priority loop reclaimed
            // nothing while trimming the cache failed.
            if !done
                && sc.nr_reclaimed == 0
                && sc.priority < 1
                && !sc.no_cache_trim_mode
                && sc.cache_trim_mode_failed
            {
                sc.no_cache_trim_mode = true;
                continue 'restart;
            }
            if !done && sc.nr_reclaimed == 0 {
                self.reclaim.kswapd_failures[nid as usize] += 1;
            }
            break;
        }
        self.set_reclaim_active(base, last, false);
        let mut kcompactd_woken = false;
        if boosted {
            for (i, &b) in zone_boosts.iter().enumerate().take(last - base + 1) {
                if b > 0 {
                    let z = &mut self.zones[base + i];
                    z.watermark_boost -= z.watermark_boost.min(b);
                }
            }
            kcompactd_woken = self.wakeup_kcompactd(nid, PAGEBLOCK_ORDER, hz);
        }
        self.snapshot_refaults(nid);
        BalanceResult {
            reclaim_order: sc.order,
            scanned,
            reclaimed: sc.nr_reclaimed,
            passes,
            kcompactd_woken,
        }
    }

    /// `set_reclaim_active` / `clear_reclaim_active`: ZONE_RECLAIM_ACTIVE on the managed zones
    /// up to `last` (it lowers the PCP high limit, §2.2).
    fn set_reclaim_active(&mut self, base: usize, last: usize, active: bool) {
        for zi in base..=last {
            if self.zones[zi].managed > 0 {
                self.zones[zi].flags.reclaim_active = active;
            }
        }
    }

    fn kswapd_trace_wake(&mut self, nid: u32, order: u32) {
        if self.trace_on(trace_kind::VMSCAN_KSWAPD) {
            let ev = TraceEvent::MmVmscanKswapdWake {
                nid: nid as i32,
                order: order as i32,
            };
            let cpu = self.kswapd_cpu(nid);
            self.emit(cpu, ev);
        }
    }

    fn kswapd_trace_sleep(&mut self, nid: u32) {
        if self.trace_on(trace_kind::VMSCAN_KSWAPD) {
            let cpu = self.kswapd_cpu(nid);
            self.emit(cpu, TraceEvent::MmVmscanKswapdSleep { nid: nid as i32 });
        }
    }
}
