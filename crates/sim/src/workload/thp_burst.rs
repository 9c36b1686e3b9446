//! `[[workload.thp_burst]]`: the THP burst process ("Hugealloc" of seed 001).

use fraglab_spec::result::{BurstResult, RunResult};
use fraglab_spec::ThpBurstParams;

use super::common::touch_range;
use super::{pages_of, Generator, Run, Shared};
use crate::anon::AnonVma;
use crate::engine::{Cx, Engine, Progress, Step, TaskBody};
use crate::metrics::{Burst, Metrics};

#[derive(serde::Serialize, serde::Deserialize)]
enum BurstPhase {
    Idle,
    Faulting { vma: AnonVma, next: u64 },
    Holding { vma: AnonVma },
}

/// The "Hugealloc" process of seed 001: bursts of THP faults (madvised unless the spec says
/// otherwise); each 2 MiB region is
/// faulted in one step (the whole region is written, as the burst's memset does, so a fallback
/// to base pages costs 512 faults). A burst of `size` (a multiple of 2 MiB) starts every
/// `interval` from `start`, its memory held for `hold` and then unmapped, `bursts` times.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ThpBurst {
    p: ThpBurstParams,
    phase: BurstPhase,
    done: u32,
    next_start: u64,
    #[serde(with = "crate::checkpoint::shared")]
    metrics: Shared<Metrics>,
    /// A scale model's K (1 for a full-size run): see [`ThpBurst::paced`].
    pace: u64,
}

impl ThpBurst {
    pub fn new(p: ThpBurstParams, metrics: Shared<Metrics>) -> ThpBurst {
        ThpBurst {
            next_start: p.start_ns,
            p,
            phase: BurstPhase::Idle,
            done: 0,
            metrics,
            pace: 1,
        }
    }

    /// In a scale model 1/K (issue 35) the burst's region is 1/K of the full machine's, but
    /// one process faults it: unpaced it would be done K times sooner, and its faults would
    /// come K times as fast per GiB of the machine. Paced, after each 2 MiB step the process
    /// sleeps K − 1 times that step's wall time (the fault's CPU and its waits), so the region
    /// fills at about 1/K of the rate, over about the full-size burst's time, with 1/K of its
    /// CPU. The run-queue waits between the full-size burst's steps are not paced in: a sleep
    /// after each step, or after each 64 MiB, sized by the time between steps (run-queue waits
    /// included) was tried and made the bursts far slower than the full-size one (0.32–0.59
    /// and 0.12–0.64 of its rate from 1/16 to 1/4, experiments/scale/README.md), as each
    /// wake-up queues again. The bursts' Hugealloc time stays the faults' own.
    pub fn paced(mut self, k: u64) -> ThpBurst {
        self.pace = k.max(1);
        self
    }
}

impl TaskBody for ThpBurst {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::ThpBurst(self))
    }

    fn comm(&self) -> &str {
        "thp_burst"
    }

    /// The bursts' schedule: the last starts `bursts - 1` intervals after the first and is held
    /// for `hold` (its faulting time not counted: an estimate from below).
    fn progress(&self) -> Option<Progress> {
        let p = &self.p;
        let last = p.start_ns + p.interval_ns * p.bursts.saturating_sub(1) as u64;
        Some(Progress::until(last + p.hold_ns))
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        match std::mem::replace(&mut self.phase, BurstPhase::Idle) {
            BurstPhase::Idle => {
                if self.done == self.p.bursts {
                    return Step::Exit(0);
                }
                if cx.now < self.next_start {
                    return Step::Sleep {
                        ran: 0,
                        sleep: self.next_start - cx.now,
                    };
                }
                self.metrics.borrow_mut().bursts.push(Burst {
                    start_ns: cx.now,
                    ..Default::default()
                });
                self.phase = BurstPhase::Faulting {
                    vma: AnonVma::new(pages_of(self.p.size_bytes), self.p.madvised),
                    next: 0,
                };
                Step::Ran(0)
            }
            BurstPhase::Faulting { mut vma, next } => {
                let mut m = self.metrics.borrow_mut();
                let t = touch_range(
                    cx,
                    &mut vma,
                    next,
                    1u64 << fraglab_mm::types::HPAGE_PMD_ORDER,
                    &mut m,
                );
                let b = m.bursts.last_mut().expect("burst started");
                // Hugealloc time is wall time (the faults' waits included).
                b.alloc_ns += t.wall_ns;
                b.faults += 1;
                b.huge += t.huge;
                let next = next + (1u64 << fraglab_mm::types::HPAGE_PMD_ORDER);
                self.phase = if next >= vma.nr_pages {
                    BurstPhase::Holding { vma }
                } else {
                    BurstPhase::Faulting { vma, next }
                };
                if self.pace > 1 {
                    return Step::Sleep {
                        ran: t.cpu_ns,
                        sleep: t.wall_ns.max(t.cpu_ns) * (self.pace - 1),
                    };
                }
                Step::Ran(t.cpu_ns)
            }
            BurstPhase::Holding { mut vma } => {
                if cx.now < self.next_start + self.p.hold_ns {
                    let sleep = self.next_start + self.p.hold_ns - cx.now;
                    self.phase = BurstPhase::Holding { vma };
                    return Step::Sleep { ran: 0, sleep };
                }
                let freed = vma.unmap(cx.mm, cx.cpu);
                self.done += 1;
                self.next_start += self.p.interval_ns;
                Step::Ran(freed * cx.cost.free_page_ns)
            }
        }
    }
}

/// The `[[workload.thp_burst]]` entries: one burst process each.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ThpBursts {
    params: Vec<ThpBurstParams>,
}

impl ThpBursts {
    pub fn new(params: &[ThpBurstParams]) -> ThpBursts {
        ThpBursts {
            params: params.to_vec(),
        }
    }
}

impl Generator for ThpBursts {
    fn saved(&self) -> Option<crate::checkpoint::GeneratorRef<'_>> {
        Some(crate::checkpoint::GeneratorRef::ThpBursts(self))
    }

    fn spawn(&mut self, run: &mut Run<'_>) {
        // Beside a kbuild, the THP burst process is background load (seed 001's "concurrent
        // bursts"): the run ends with the builds, not with the last burst.
        let bursts_are_background = !run.w.kbuild.is_empty();
        let pace = run.spec.run.scale.as_ref().map_or(1, |s| s.k as u64);
        for b in &self.params {
            let spawn = if bursts_are_background {
                Engine::spawn_daemon
            } else {
                Engine::spawn
            };
            run.bind(b.numa);
            spawn(
                run.e,
                Box::new(ThpBurst::new(b.clone(), run.metrics.clone()).paced(pace)),
            );
            run.unbind();
        }
    }

    fn result(&self, m: &Metrics, r: &mut RunResult) {
        r.bursts = m
            .bursts
            .iter()
            .map(|b| BurstResult {
                start_ns: b.start_ns,
                alloc_ns: b.alloc_ns,
                faults: b.faults,
                huge: b.huge,
            })
            .collect();
    }
}
