//! Contended kernel locks as resources in virtual time (issue 33 item 8): `zone->lock`, the
//! lruvec's `lru_lock` and `pcpu_drain_mutex`. A CPU that needs a lock another CPU holds waits
//! for it; the waits extend the step that took the lock, and each lock keeps the figures
//! `/proc/lock_stat` reports (contentions, wait time, acquisitions, hold time).
//!
//! Model: a lock is the union of the intervals of virtual time it is held in, as the steps
//! that took it reserved them. A step's operations happen at its start (engine.rs), but its
//! lock holds lie inside its charged time, so steps that started earlier can have reserved
//! intervals later than a new request: a request at `t` for `hold` ns is granted at the
//! earliest time from `t` on when the lock is free for `hold` ns — after every interval that
//! covers `t` (first come, first served in virtual time), and before an interval that starts
//! later only if the hold fits in the gap before it. Reservations already made never move
//! (a later-committed step that would have come first in the kernel's queue fills a gap or
//! queues behind them). Ties are impossible to break differently: the engine commits steps in
//! one fixed order (time, then event sequence), so the same run gives the same grants.
//!
//! Which operations take which lock, and the part of their cost that is the hold, is the cost
//! model's (`cost.rs` [`crate::cost::Charge`], docs/costs.md "Locks"). Spinlocks (`zone->lock`,
//! `lru_lock`) are waited for on the CPU (the waiter spins); `pcpu_drain_mutex` is a sleeping
//! mutex, but `drain_all_pages(NULL)` only try-locks it (the model's `Mm` skips the drain
//! when another CPU holds it, `Current::drain_mutex_held`).

use std::collections::VecDeque;

/// The modelled locks (the index of each in [`Locks`]).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockId {
    /// `zone->lock` (one for the node: the work counters do not say which zone).
    Zone = 0,
    /// `lruvec->lru_lock` of the node's one lruvec (no memcg).
    Lru = 1,
    /// `pcpu_drain_mutex`, held by `__drain_all_pages` for the whole drain.
    PcpDrain = 2,
}

impl LockId {
    pub const ALL: [LockId; 3] = [LockId::Zone, LockId::Lru, LockId::PcpDrain];

    /// The lock's name as `/proc/lock_stat` prints its class.
    pub fn name(self) -> &'static str {
        match self {
            LockId::Zone => "&zone->lock",
            LockId::Lru => "&lruvec->lru_lock",
            LockId::PcpDrain => "pcpu_drain_mutex",
        }
    }
}

/// One lock's `/proc/lock_stat` figures (nanoseconds). A grant that had to wait counts one
/// contention; `acquisitions` counts the kernel's lock calls, of which one grant may stand for
/// several taken back to back ([`crate::cost::Hold`]).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockStat {
    pub acquisitions: u64,
    pub contentions: u64,
    pub wait_total_ns: u64,
    pub wait_max_ns: u64,
    /// The shortest wait of a contended grant (0 when none waited).
    pub wait_min_ns: u64,
    pub hold_total_ns: u64,
    /// The longest single hold (a grant's hold divided by the lock calls it stands for).
    pub hold_max_ns: u64,
    /// Try-locks that failed (`pcpu_drain_mutex`: drains skipped).
    pub trylock_failed: u64,
}

impl LockStat {
    /// One grant: `calls` lock calls holding it `hold` ns in all, granted `wait` ns after they
    /// asked (a wait > 0 is one contention).
    pub fn record(&mut self, calls: u64, hold: u64, wait: u64) {
        self.acquisitions += calls.max(1);
        self.hold_total_ns += hold;
        self.hold_max_ns = self.hold_max_ns.max(hold / calls.max(1));
        if wait > 0 {
            self.wait_min_ns = if self.contentions == 0 {
                wait
            } else {
                self.wait_min_ns.min(wait)
            };
            self.contentions += 1;
            self.wait_total_ns += wait;
            self.wait_max_ns = self.wait_max_ns.max(wait);
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
struct Lock {
    /// Held intervals `[start, end)`, sorted, disjoint and not touching (touching ones are
    /// merged); none ends at or before the time last pruned to.
    busy: VecDeque<(u64, u64)>,
    stat: LockStat,
}

/// The engine's locks.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct Locks {
    locks: [Lock; 3],
}

impl Locks {
    /// Forgets the intervals that end at or before `now` (no request comes before the engine's
    /// time).
    #[inline]
    pub fn prune(&mut self, now: u64) {
        for l in &mut self.locks {
            while l.busy.front().is_some_and(|&(_, e)| e <= now) {
                l.busy.pop_front();
            }
        }
    }

    /// Whether `id` is held at time `t`.
    pub fn held_at(&self, id: LockId, t: u64) -> bool {
        let b = &self.locks[id as usize].busy;
        let i = b.partition_point(|&(_, e)| e <= t);
        b.get(i).is_some_and(|&(s, _)| s <= t)
    }

    /// Takes `id` at time `at` for `hold` ns, standing for `calls` lock calls; returns when it
    /// is granted (≥ `at`): the earliest time from `at` on when the lock is free for `hold` ns.
    pub fn acquire(&mut self, id: LockId, at: u64, hold: u64, calls: u64) -> u64 {
        let l = &mut self.locks[id as usize];
        let b = &mut l.busy;
        let mut i = b.partition_point(|&(_, e)| e <= at);
        let mut start = at;
        while let Some(&(s, e)) = b.get(i) {
            if s >= start + hold.max(1) {
                break;
            }
            start = start.max(e);
            i += 1;
        }
        insert(b, i, start, start + hold);
        l.stat.record(calls, hold, start - at);
        start
    }

    /// Reserves `id` over `[start, end)` whatever else holds it then (the interval is merged
    /// with any it overlaps): a hold whose length was known only after it began
    /// (`pcpu_drain_mutex` over a drain whose zone-lock waits are resolved inside it).
    pub fn reserve(&mut self, id: LockId, start: u64, end: u64) {
        let b = &mut self.locks[id as usize].busy;
        let i = b.partition_point(|&(_, e)| e < start);
        let mut s = start;
        let mut e = end.max(start + 1);
        while let Some(&(s2, e2)) = b.get(i) {
            if s2 > e {
                break;
            }
            s = s.min(s2);
            e = e.max(e2);
            b.remove(i);
        }
        b.insert(i, (s, e));
    }

    /// The first time from `at` on when `id` is not held.
    pub fn free_from(&self, id: LockId, at: u64) -> u64 {
        let b = &self.locks[id as usize].busy;
        let i = b.partition_point(|&(_, e)| e <= at);
        match b.get(i) {
            Some(&(s, e)) if s <= at => e,
            _ => at,
        }
    }

    /// The intervals held from the last prune on, into `out` (cleared first).
    pub fn busy_into(&self, id: LockId, out: &mut Vec<(u64, u64)>) {
        out.clear();
        out.extend(self.locks[id as usize].busy.iter().copied());
    }

    pub fn stat(&self, id: LockId) -> &LockStat {
        &self.locks[id as usize].stat
    }

    pub fn stat_mut(&mut self, id: LockId) -> &mut LockStat {
        &mut self.locks[id as usize].stat
    }

    /// Intervals held now (for tests).
    pub fn intervals(&self, id: LockId) -> Vec<(u64, u64)> {
        self.locks[id as usize].busy.iter().copied().collect()
    }
}

/// Inserts `[s, e)` at position `i` of a sorted, disjoint list where it fits without
/// overlapping, merging it with a neighbour it touches.
fn insert(b: &mut VecDeque<(u64, u64)>, i: usize, s: u64, e: u64) {
    if e == s {
        return;
    }
    let join_prev = i > 0 && b[i - 1].1 == s;
    let join_next = b.get(i).is_some_and(|&(s2, _)| s2 == e);
    match (join_prev, join_next) {
        (true, true) => {
            b[i - 1].1 = b[i].1;
            b.remove(i);
        }
        (true, false) => b[i - 1].1 = e,
        (false, true) => b[i].0 = s,
        (false, false) => b.insert(i, (s, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two CPUs want the zone lock: the second waits exactly the first's remaining hold.
    #[test]
    fn a_contended_lock_serialises() {
        let mut l = Locks::default();
        assert_eq!(l.acquire(LockId::Zone, 1_000, 500, 1), 1_000);
        // CPU 1 asks 200 ns into CPU 0's hold: granted when it ends.
        assert_eq!(l.acquire(LockId::Zone, 1_200, 300, 1), 1_500);
        let s = l.stat(LockId::Zone);
        assert_eq!((s.acquisitions, s.contentions), (2, 1));
        assert_eq!((s.wait_total_ns, s.wait_max_ns, s.wait_min_ns), (300, 300, 300));
        assert_eq!(s.hold_total_ns, 800);
        assert_eq!(l.intervals(LockId::Zone), vec![(1_000, 1_800)]);
        // Other locks are independent.
        assert_eq!(l.acquire(LockId::Lru, 1_200, 100, 1), 1_200);
    }

    /// A request earlier than a reservation made before it takes the gap if it fits, else
    /// queues behind the reservation; the reservation does not move.
    #[test]
    fn gaps_are_filled_first_come_first_served() {
        let mut l = Locks::default();
        l.acquire(LockId::Zone, 5_000, 1_000, 1);
        assert_eq!(l.acquire(LockId::Zone, 1_000, 2_000, 1), 1_000, "fits before");
        assert_eq!(
            l.acquire(LockId::Zone, 3_500, 2_000, 1),
            6_000,
            "does not fit the gap"
        );
        assert_eq!(l.intervals(LockId::Zone), vec![(1_000, 3_000), (5_000, 8_000)]);
        assert!(l.held_at(LockId::Zone, 2_999) && !l.held_at(LockId::Zone, 3_000));
        assert_eq!(l.free_from(LockId::Zone, 5_500), 8_000);
        l.prune(3_000);
        assert_eq!(l.intervals(LockId::Zone), vec![(5_000, 8_000)]);
        l.reserve(LockId::PcpDrain, 10, 20);
        l.reserve(LockId::PcpDrain, 15, 40);
        assert_eq!(l.intervals(LockId::PcpDrain), vec![(10, 40)]);
    }
}
