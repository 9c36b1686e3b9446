//! A live kdamond's monitoring regions as a snapshot carries them (docs/model §27.2 item
//! 3: every region's range, its accesses in the last aggregation and its age), and the reading
//! of the `damon:damon_aggregated` lines they are taken from.
//!
//! **Why that tracepoint.** `kdamond_reset_aggregated` (mm/damon/core.c) emits one
//! `damon_aggregated` line per region of every target at the end of each aggregation interval,
//! after the schemes were applied (an applied region already shows age 0) and before the
//! regions are split again: the whole monitoring state, in address order. The sysfs
//! `update_schemes_tried_regions` command does not give that: its directories are filled by
//! the DAMOS walk (`damos_walk_call_walk`, called from `damos_apply_scheme` only), so they hold
//! the regions the scheme's action is applied to during the next apply interval — for a
//! pageout scheme with a size quota, at most the quota's worth (S2: about six regions, 128 MiB)
//! and those are paged out and reset to age 0 by that very application.
//!
//! A batch is one aggregation of one kdamond: for each of its targets, `nr_regions` lines in
//! increasing address order, written together; the next aggregation's come one aggregation
//! interval later. [`Batcher`] assembles the first complete one from a stream of lines.

use serde::{Deserialize, Serialize};

/// The tracepoint the regions are read from.
pub const DAMON_AGGREGATED: &str = "damon:damon_aggregated";

/// One monitoring region (`struct damon_region`) of a target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamonRegion {
    /// The target's index in its context.
    pub target: u32,
    /// `[start, end)` in DAMON's core address space (paddr with `addr_unit` 1: physical bytes).
    pub start: u64,
    pub end: u64,
    /// Accesses counted in the aggregation that just ended (samples with the sampled page
    /// young).
    pub nr_accesses: u32,
    /// Aggregation intervals the region's access count has stayed similar.
    pub age: u32,
}

/// A kdamond's regions at one aggregation, recorded with a snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DamonCapture {
    /// The kdamond's sysfs index (`kdamonds/N`) and thread pid.
    pub kdamond: u32,
    pub pid: u32,
    /// Its aggregation interval (µs): the unit of `age`.
    pub aggr_us: u64,
    /// Where the regions come from ([`DAMON_AGGREGATED`]).
    pub source: String,
    /// The aggregation's timestamp (trace clock `mono`, ns) and the start of the snapshot's pfn
    /// read (CLOCK_MONOTONIC, ns): how old the regions are against the pages.
    pub aggregated_at_ns: u64,
    pub pages_at_ns: u64,
    /// Every region of every target, by target then address; empty when none could be read.
    pub regions: Vec<DamonRegion>,
    /// The regions the pageout scheme was applied to in that aggregation, in order
    /// (`damon:damos_before_apply`, target and `[start, end)`): where the scheme's next
    /// application resumes (`charge_addr_from`) when they used up its quota. Empty when none
    /// was or the tracepoint is missing.
    #[serde(default)]
    pub applied: Vec<DamonRegion>,
    /// Why `regions` is empty (no tracepoint, no complete aggregation in time, ...), else empty.
    pub note: String,
}

/// One `damon:damon_aggregated` line: `target_id=%lu nr_regions=%u %lu-%lu: %u %u`
/// (include/trace/events/damon.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aggregated {
    pub pid: u32,
    /// The line's timestamp (ns, whole microseconds).
    pub ts_ns: u64,
    pub target: u32,
    pub nr_regions: u32,
    pub start: u64,
    pub end: u64,
    pub nr_accesses: u32,
    pub age: u32,
}

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Reads one `damon_aggregated` line of a `trace`/`trace_pipe` file; `None` for any other line.
pub fn parse_damon_aggregated(line: &str) -> Option<Aggregated> {
    let line = line.trim_end_matches(['\n', '\r']);
    if crate::trace::event_name(line)? != "damon_aggregated" {
        return None;
    }
    let pid = crate::trace::line_pid(line)?;
    let (head, fields) = line.split_once(": damon_aggregated: ")?;
    let (secs, usecs) = head.rsplit(' ').next()?.split_once('.')?;
    if usecs.len() != 6 {
        return None;
    }
    let ts_ns = (num::<u64>(secs)? * 1_000_000 + num::<u64>(usecs)?) * 1000;
    let rest = fields.strip_prefix("target_id=")?;
    let (target, rest) = rest.split_once(" nr_regions=")?;
    let (nr, rest) = rest.split_once(' ')?;
    let (start, rest) = rest.split_once('-')?;
    let (end, rest) = rest.split_once(": ")?;
    let (acc, age) = rest.split_once(' ')?;
    Some(Aggregated {
        pid,
        ts_ns,
        target: num(target)?,
        nr_regions: num(nr)?,
        start: num(start)?,
        end: num(end)?,
        nr_accesses: num(acc)?,
        age: num(age)?,
    })
}

/// One `damon:damos_before_apply` line: `ctx_idx=%u scheme_idx=%u target_idx=%lu
/// nr_regions=%u %lu-%lu: %u %u` (include/trace/events/damon.h), with its pid.
pub fn parse_damos_before_apply(line: &str) -> Option<(u32, u32, DamonRegion)> {
    let line = line.trim_end_matches(['\n', '\r']);
    if crate::trace::event_name(line)? != "damos_before_apply" {
        return None;
    }
    let pid = crate::trace::line_pid(line)?;
    let (_, fields) = line.split_once(": damos_before_apply: ")?;
    let rest = fields.strip_prefix("ctx_idx=")?;
    let (_ctx, rest) = rest.split_once(" scheme_idx=")?;
    let (scheme, rest) = rest.split_once(" target_idx=")?;
    let (target, rest) = rest.split_once(" nr_regions=")?;
    let (_nr, rest) = rest.split_once(' ')?;
    let (start, rest) = rest.split_once('-')?;
    let (end, rest) = rest.split_once(": ")?;
    let (acc, age) = rest.split_once(' ')?;
    Some((
        pid,
        num(scheme)?,
        DamonRegion {
            target: num(target)?,
            start: num(start)?,
            end: num(end)?,
            nr_accesses: num(acc)?,
            age: num(age)?,
        },
    ))
}

/// Assembles the first complete aggregation of one kdamond (`pid`, `nr_targets` targets) from
/// `damon_aggregated` lines in the order the trace gives them. A line more than half an
/// aggregation interval after the previous one starts a new batch (what came before it was
/// the end of an aggregation the reading joined part way); so does a target that goes back or
/// a region that does not follow the previous one's start. The `damos_before_apply` lines of
/// scheme `scheme` that come between two aggregations belong to the later one (the kernel
/// applies the schemes, then reports the regions, in one pass of its loop).
#[derive(Clone, Debug)]
pub struct Batcher {
    pid: u32,
    nr_targets: u32,
    scheme: u32,
    gap_ns: u64,
    last_ts: Option<u64>,
    cur: Vec<DamonRegion>,
    /// Per target of the batch: the region count its lines announce.
    expect: Vec<Option<u32>>,
    /// Applications seen since the last `damon_aggregated` line, and those of the batch being
    /// assembled.
    pending: Vec<DamonRegion>,
    cur_applied: Vec<DamonRegion>,
    last_was_aggregated: bool,
    done: Option<Batch>,
}

/// A complete aggregation: its last line's timestamp, its regions and the applications that
/// preceded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub ts_ns: u64,
    pub regions: Vec<DamonRegion>,
    pub applied: Vec<DamonRegion>,
}

impl Batcher {
    /// A batcher for kdamond `pid` with `nr_targets` targets, aggregation interval `aggr_us`,
    /// whose pageout scheme is `scheme` (its index in the context).
    pub fn new(pid: u32, nr_targets: u32, aggr_us: u64, scheme: u32) -> Batcher {
        Batcher {
            pid,
            nr_targets: nr_targets.max(1),
            scheme,
            gap_ns: (aggr_us * 1000 / 2).max(1_000_000),
            last_ts: None,
            cur: Vec::new(),
            expect: Vec::new(),
            pending: Vec::new(),
            cur_applied: Vec::new(),
            last_was_aggregated: false,
            done: None,
        }
    }

    fn restart(&mut self) {
        self.cur.clear();
        self.expect = vec![None; self.nr_targets as usize];
    }

    fn complete(&self) -> bool {
        self.expect.len() == self.nr_targets as usize
            && self.expect.iter().enumerate().all(|(t, n)| {
                n.is_some_and(|n| self.cur.iter().filter(|r| r.target as usize == t).count() == n as usize)
            })
    }

    /// Feeds one line (other events and other pids are ignored). True once a batch is
    /// complete.
    pub fn line(&mut self, line: &str) -> bool {
        if self.done.is_some() {
            return true;
        }
        if let Some((pid, scheme, r)) = parse_damos_before_apply(line) {
            if pid == self.pid && scheme == self.scheme {
                if self.last_was_aggregated {
                    self.pending.clear();
                    self.last_was_aggregated = false;
                }
                self.pending.push(r);
            }
            return false;
        }
        let Some(a) = parse_damon_aggregated(line).filter(|a| a.pid == self.pid) else {
            return false;
        };
        if a.target >= self.nr_targets || a.end <= a.start {
            return false;
        }
        let gap = self.last_ts.is_some_and(|t| a.ts_ns > t + self.gap_ns);
        self.last_ts = Some(a.ts_ns);
        let follows = match self.cur.last() {
            None => true,
            Some(p) => a.target > p.target || (a.target == p.target && a.start >= p.end),
        };
        if !self.last_was_aggregated {
            // The first report line after applications (or at the start): a new aggregation,
            // which those applications belong to.
            self.last_was_aggregated = true;
            self.cur_applied = std::mem::take(&mut self.pending);
            self.restart();
        } else if gap {
            // A new aggregation with no application before it.
            self.cur_applied.clear();
            self.restart();
        } else if !follows || self.expect.is_empty() {
            self.restart();
        }
        let slot = &mut self.expect[a.target as usize];
        if slot.is_some_and(|n| n != a.nr_regions) {
            self.restart();
        }
        self.expect[a.target as usize] = Some(a.nr_regions);
        self.cur.push(DamonRegion {
            target: a.target,
            start: a.start,
            end: a.end,
            nr_accesses: a.nr_accesses,
            age: a.age,
        });
        if self.complete() {
            self.done = Some(Batch {
                ts_ns: a.ts_ns,
                regions: std::mem::take(&mut self.cur),
                applied: std::mem::take(&mut self.cur_applied),
            });
            return true;
        }
        false
    }

    /// The complete batch.
    pub fn take(&mut self) -> Option<Batch> {
        self.done.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pid: u32, t: &str, (target, nr): (u32, u32), s: u64, e: u64, acc: u32, age: u32) -> String {
        format!(
            "       kdamond.0-{pid:<7} [001] ..... {t:>12}: damon_aggregated: target_id={target} nr_regions={nr} {s}-{e}: {acc} {age}"
        )
    }

    #[test]
    fn s27_damon_aggregated_line() {
        let line = "       kdamond.0-83      [001] .....   812.345678: damon_aggregated: target_id=0 nr_regions=1187 9663676416-9686745088: 0 80";
        assert_eq!(
            parse_damon_aggregated(line),
            Some(Aggregated {
                pid: 83,
                ts_ns: 812_345_678_000,
                target: 0,
                nr_regions: 1187,
                start: 9_663_676_416,
                end: 9_686_745_088,
                nr_accesses: 0,
                age: 80
            })
        );
        assert_eq!(
            parse_damon_aggregated(&line.replace("damon_aggregated", "damos_before_apply")),
            None
        );
        assert_eq!(parse_damon_aggregated(&line.replace(": 0 80", ": 0")), None);
        assert_eq!(parse_damon_aggregated(&line.replace("9663676416-", "0x9-")), None);
    }

    fn apply(pid: u32, t: &str, scheme: u32, s: u64, e: u64, age: u32) -> String {
        format!(
            "       kdamond.0-{pid:<7} [001] ..... {t:>12}: damos_before_apply: ctx_idx=0 scheme_idx={scheme} target_idx=0 nr_regions=3 {s}-{e}: 0 {age}"
        )
    }

    /// The `damos_before_apply` lines before an aggregation's report are its applications;
    /// those before an earlier report, and another scheme's, are not.
    #[test]
    fn s27_batcher_keeps_the_applications_of_its_aggregation() {
        let mib = 1u64 << 20;
        let lines = [
            apply(83, "99.999000", 0, 0, 8 * mib, 90),
            l(83, "100.000010", (0, 2), 0, 8 * mib, 0, 0),
            l(83, "100.000011", (0, 2), 8 * mib, 60 * mib, 0, 91),
            apply(83, "105.119000", 0, 8 * mib, 40 * mib, 92),
            apply(83, "105.119001", 1, 40 * mib, 60 * mib, 92),
            apply(83, "105.119002", 0, 40 * mib, 60 * mib, 92),
            l(83, "105.120000", (0, 3), 0, 8 * mib, 0, 1),
            l(83, "105.120001", (0, 3), 8 * mib, 40 * mib, 0, 0),
        ];
        // The first report is complete after its second line: the batch, with the one
        // application before it.
        let mut b = Batcher::new(83, 1, 5_000_000, 0);
        let mut done = None;
        for x in &lines {
            if b.line(x) {
                done = b.take();
                break;
            }
        }
        let batch = done.unwrap();
        assert_eq!(batch.ts_ns, 100_000_011_000);
        assert_eq!(
            batch.applied.iter().map(|r| (r.start, r.end)).collect::<Vec<_>>(),
            [(0, 8 * mib)]
        );
        // Joined after it: the next report's applications, scheme 1's left out.
        let mut b = Batcher::new(83, 1, 5_000_000, 0);
        for x in &lines[2..] {
            assert!(!b.line(x));
        }
        assert!(b.line(&l(83, "105.120002", (0, 3), 40 * mib, 60 * mib, 0, 0)));
        let batch = b.take().unwrap();
        assert_eq!(
            batch
                .applied
                .iter()
                .map(|r| (r.start / mib, r.end / mib))
                .collect::<Vec<_>>(),
            [(8, 40), (40, 60)]
        );
    }

    /// The reading joins an aggregation part way: those lines are dropped at the gap, and the
    /// next aggregation's lines (one target, three regions) make the batch; another kdamond's
    /// lines are ignored.
    #[test]
    fn s27_batcher_takes_the_first_whole_aggregation() {
        let mib = 1u64 << 20;
        let mut b = Batcher::new(83, 1, 5_000_000, 0);
        let lines = [
            l(83, "100.000010", (0, 3), 20 * mib, 40 * mib, 0, 7),
            l(83, "100.000011", (0, 3), 40 * mib, 60 * mib, 1, 2),
            l(99, "102.000000", (0, 1), 0, mib, 0, 1),
            l(83, "105.120000", (0, 3), 16 * mib, 20 * mib, 0, 8),
            l(83, "105.120001", (0, 3), 20 * mib, 40 * mib, 0, 8),
        ];
        for x in &lines {
            assert!(!b.line(x), "{x}");
        }
        assert!(b.line(&l(83, "105.120002", (0, 3), 40 * mib, 60 * mib, 0, 0)));
        let batch = b.take().unwrap();
        assert_eq!(batch.ts_ns, 105_120_002_000);
        assert_eq!(
            batch
                .regions
                .iter()
                .map(|r| (r.start / mib, r.end / mib, r.age))
                .collect::<Vec<_>>(),
            [(16, 20, 8), (20, 40, 8), (40, 60, 0)]
        );
        assert!(batch.applied.is_empty());
        // Two targets: complete when both have their announced counts.
        let mut b = Batcher::new(83, 2, 5_000_000, 0);
        assert!(!b.line(&l(83, "1.000000", (0, 1), 0, mib, 0, 1)));
        assert!(!b.line(&l(83, "1.000001", (1, 2), 0, mib, 0, 1)));
        assert!(b.line(&l(83, "1.000002", (1, 2), mib, 2 * mib, 0, 1)));
        assert_eq!(b.take().unwrap().regions.len(), 3);
    }
}
