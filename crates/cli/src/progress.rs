//! Progress bars with an ETA for the commands that run long (issue 23 item 4): timed runs
//! against the workload's expected end, `compare` by runs done (with each running run's share),
//! timeless runs by operations done, `validate` by phase, `soak` by operations.
//!
//! A bar draws on standard error only when it is a terminal, and only once the command has
//! run for [`SHOW_AFTER`] (a short command prints nothing). When standard error is not a
//! terminal (CI logs, pipes, a cluster's job output), a long command prints a plain line with
//! the same fraction and ETA after [`LOG_FIRST`] and then every [`LOG_EVERY`] ([`log_line`]):
//! the estimate comes from the progress so far, not from a guess made before the run. Bars only
//! read what they are given: results are the same with or without.
//!
//! Every bar is a fraction in `[0, 1]` (drawn in thousandths) with a message; the ETA is the
//! wall time so far scaled by the fraction left over the fraction done ([`eta`]), computed
//! here rather than by indicatif, whose rate estimate cannot follow a denominator that moves
//! (a timed run's expected end changes as its generators report).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use fraglab_sim::timed::TimedProgress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a command runs before its bar appears.
pub const SHOW_AFTER: Duration = Duration::from_secs(2);

/// Without a terminal: the first plain progress line after this long…
pub const LOG_FIRST: Duration = Duration::from_secs(30);
/// …and then one this often.
pub const LOG_EVERY: Duration = Duration::from_secs(300);

/// Thousandths: the bar's length.
const STEPS: u64 = 1000;

/// A progress bar on standard error (or nothing when it is not a terminal).
pub struct Bar {
    pb: Option<ProgressBar>,
    t0: Instant,
    shown: bool,
    /// Plain progress lines (standard error is not a terminal): when the next one is due.
    log_at: Option<Duration>,
    phase: String,
}

impl Bar {
    /// A bar, drawn only if standard error is a terminal; otherwise plain progress lines for
    /// long commands.
    pub fn new() -> Bar {
        let tty = std::io::stderr().is_terminal();
        let mut b = Bar::with(tty);
        if !tty {
            b.log_at = Some(LOG_FIRST);
        }
        b
    }

    /// A bar that draws (`on`) or stays silent.
    fn with(on: bool) -> Bar {
        let pb = on.then(|| {
            let pb = ProgressBar::with_draw_target(Some(STEPS), ProgressDrawTarget::hidden());
            pb.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:25}] {prefix}{wide_msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            pb
        });
        Bar {
            pb,
            t0: Instant::now(),
            shown: false,
            log_at: None,
            phase: String::new(),
        }
    }

    /// Whether the bar draws at all (standard error is a terminal).
    pub fn active(&self) -> bool {
        self.pb.is_some()
    }

    /// Sets the phase shown before the message (`"simulator run: "`).
    pub fn set_phase(&mut self, phase: &str) {
        self.phase = phase.to_string();
        if let Some(pb) = &self.pb {
            pb.set_prefix(if phase.is_empty() {
                String::new()
            } else {
                format!("{phase}: ")
            });
        }
    }

    /// Moves the bar to `fraction` with `msg`, followed by the ETA when one can be told.
    pub fn set(&mut self, fraction: f64, msg: &str) {
        let elapsed = self.t0.elapsed();
        if let Some(at) = self.log_at {
            if elapsed >= at {
                eprintln!("{}", log_line(&self.phase, fraction, msg, elapsed));
                self.log_at = Some(elapsed + LOG_EVERY);
            }
        }
        let Some(pb) = &self.pb else { return };
        if !self.shown && elapsed < SHOW_AFTER {
            return;
        }
        let f = fraction.clamp(0.0, 1.0);
        pb.set_position((f * STEPS as f64) as u64);
        let eta = eta(elapsed, f).map_or(String::new(), |d| format!(", ETA {}", clock(d)));
        pb.set_message(format!("{msg}{eta}"));
        if !self.shown {
            // The first draw, with its message set.
            self.shown = true;
            pb.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// A timed run's bar: simulated time over the expected end (or the cap, the bound, while
    /// the end is unknown).
    pub fn set_timed(&mut self, p: &TimedProgress) {
        if self.pb.is_some() || self.log_at.is_some() {
            let (f, msg) = timed_fraction(p);
            self.set(f, &msg);
        }
    }

    /// Runs `f`, which reports no progress of its own (a run on the live kernel), with the bar
    /// moving by wall time over `expected` (the workload's duration: a host run takes about
    /// that long; held below the end until `f` returns).
    pub fn during<T>(&mut self, expected: Duration, f: impl FnOnce() -> T) -> T {
        if self.pb.is_none() {
            return f();
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let (bar, stop) = (&mut *self, &stop);
            s.spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let e = t0.elapsed();
                    bar.set(
                        wall_fraction(e, expected),
                        &format!("{:.0} of ~{:.0} s", e.as_secs_f64(), expected.as_secs_f64()),
                    );
                    std::thread::sleep(Duration::from_millis(200));
                }
            });
            let r = f();
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            r
        })
    }

    /// Clears the bar.
    pub fn finish(self) {
        if let Some(pb) = self.pb {
            pb.finish_and_clear();
        }
    }
}

/// A timed run's fraction done and its message: simulated time over the workload's expected
/// end when the generators can tell it, else over the duration (the cap, an upper bound: the
/// fraction is then a lower bound, and the ETA an upper one).
pub fn timed_fraction(p: &TimedProgress) -> (f64, String) {
    let s = |ns: u64| ns as f64 / 1e9;
    match p.expected_end_ns {
        Some(end) if end > 0 => (
            (p.now_ns as f64 / end as f64).min(1.0),
            format!(
                "{:.1}/~{:.1} s simulated (cap {:.0} s)",
                s(p.now_ns),
                s(end),
                s(p.cap_ns)
            ),
        ),
        _ => (
            if p.cap_ns == 0 {
                1.0
            } else {
                p.now_ns as f64 / p.cap_ns as f64
            },
            format!(
                "{:.1} s simulated, end not known yet (cap {:.0} s)",
                s(p.now_ns),
                s(p.cap_ns)
            ),
        ),
    }
}

/// The fraction of a run of known length by wall time: `elapsed / expected`, held at 99 %
/// once past it (the run has not returned yet).
pub fn wall_fraction(elapsed: Duration, expected: Duration) -> f64 {
    if expected.is_zero() {
        return 0.99;
    }
    (elapsed.as_secs_f64() / expected.as_secs_f64()).min(0.99)
}

/// `compare`'s fraction: runs done plus each running run's fraction, over all runs.
pub fn runs_fraction(done: usize, running: &[f64], total: usize) -> f64 {
    if total == 0 {
        return 1.0;
    }
    let partial: f64 = running.iter().map(|f| f.clamp(0.0, 1.0)).sum();
    ((done as f64 + partial) / total as f64).min(1.0)
}

/// The wall time left at `fraction` done after `elapsed`: elapsed × (1 − f) / f. `None` until
/// there is something to go on (1 % done and a second elapsed), so that the first estimate is
/// not a wild one.
pub fn eta(elapsed: Duration, fraction: f64) -> Option<Duration> {
    if !(0.01..=1.0).contains(&fraction) || elapsed < Duration::from_secs(1) {
        return None;
    }
    Some(elapsed.mul_f64((1.0 - fraction) / fraction))
}

/// A plain progress line (no terminal): the phase, the fraction done, the message, the wall
/// time so far and the ETA when one can be told ([`eta`]).
pub fn log_line(phase: &str, fraction: f64, msg: &str, elapsed: Duration) -> String {
    let f = fraction.clamp(0.0, 1.0);
    let eta = eta(elapsed, f).map_or(String::new(), |d| format!(", ETA {}", clock(d)));
    let phase = if phase.is_empty() {
        String::new()
    } else {
        format!("{phase}: ")
    };
    format!(
        "fraglab: {phase}{:.0} % done after {} ({msg}){eta}",
        f * 100.0,
        clock(elapsed)
    )
}

/// `H:MM:SS` or `M:SS`.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(now: u64, cap: u64, end: Option<u64>) -> TimedProgress {
        TimedProgress {
            now_ns: now * 1_000_000_000,
            cap_ns: cap * 1_000_000_000,
            expected_end_ns: end.map(|e| e * 1_000_000_000),
        }
    }

    #[test]
    fn timed_runs_go_against_the_expected_end_not_the_cap() {
        let (f, msg) = timed_fraction(&tp(30, 600, Some(120)));
        assert_eq!(f, 0.25);
        assert_eq!(msg, "30.0/~120.0 s simulated (cap 600 s)");
        // Unknown end: the cap bounds it.
        let (f, msg) = timed_fraction(&tp(30, 600, None));
        assert_eq!(f, 0.05);
        assert_eq!(msg, "30.0 s simulated, end not known yet (cap 600 s)");
        // At the end.
        assert_eq!(timed_fraction(&tp(120, 600, Some(120))).0, 1.0);
    }

    #[test]
    fn compare_counts_running_runs_by_their_share() {
        assert_eq!(runs_fraction(0, &[], 4), 0.0);
        assert_eq!(runs_fraction(1, &[0.5, 0.5], 4), 0.5);
        assert_eq!(runs_fraction(4, &[], 4), 1.0);
        // A run's fraction is clamped.
        assert_eq!(runs_fraction(3, &[7.0], 4), 1.0);
    }

    #[test]
    fn wall_clock_phases_stop_short_of_the_end() {
        let s = Duration::from_secs;
        assert_eq!(wall_fraction(s(30), s(120)), 0.25);
        assert_eq!(wall_fraction(s(300), s(120)), 0.99);
        assert_eq!(wall_fraction(s(1), Duration::ZERO), 0.99);
        let mut b = Bar::with(false);
        assert_eq!(b.during(s(1), || 7), 7);
    }

    #[test]
    fn eta_scales_the_time_so_far() {
        assert_eq!(eta(Duration::from_secs(10), 0.25), Some(Duration::from_secs(30)));
        assert_eq!(eta(Duration::from_secs(10), 1.0), Some(Duration::ZERO));
        // Too early to tell.
        assert_eq!(eta(Duration::from_secs(10), 0.001), None);
        assert_eq!(eta(Duration::from_millis(500), 0.5), None);
        assert_eq!(clock(Duration::from_secs(75)), "1:15");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
    }

    #[test]
    fn a_silent_bar_does_nothing() {
        let mut b = Bar::with(false);
        assert!(!b.active());
        b.set(0.5, "x");
        b.set_timed(&tp(1, 2, None));
        b.finish();
    }

    /// Without a terminal (issue 34, item 6): a line with the fraction and the ETA from the
    /// progress so far — for a 44 s run at 25 % after 11 s, "0:33" — where the old up-front
    /// note guessed "43–125 min" from the CPUs and the duration cap.
    #[test]
    fn a_plain_line_tells_the_measured_eta() {
        let line = log_line(
            "",
            0.25,
            "11.0/~44.0 s simulated (cap 7200 s)",
            Duration::from_secs(11),
        );
        assert_eq!(
            line,
            "fraglab: 25 % done after 0:11 (11.0/~44.0 s simulated (cap 7200 s)), ETA 0:33"
        );
        let line = log_line("simulator run", 0.001, "x", Duration::from_secs(40));
        assert_eq!(line, "fraglab: simulator run: 0 % done after 0:40 (x)");
        // A bar without a terminal logs from LOG_FIRST on, then every LOG_EVERY.
        let mut b = Bar::with(false);
        b.log_at = Some(Duration::ZERO);
        b.set(0.5, "half");
        assert_eq!(b.log_at.map(|d| d >= LOG_EVERY), Some(true));
    }
}
