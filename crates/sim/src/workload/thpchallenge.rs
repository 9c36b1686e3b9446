//! `[[workload.thpchallenge]]`: mmtests' THP fault benchmark, thpchallenge.

use fraglab_spec::result::{RunResult, ThpChallengeResult};
use fraglab_spec::ThpChallengeParams;

use super::common::touch_range;
use super::{pages_of, Generator, Run, Shared};
use crate::anon::AnonVma;
use crate::engine::{Cx, Progress, Step, TaskBody};
use crate::metrics::Metrics;

/// mmtests' thpchallenge thread: mmap, then per 2 MiB step write one byte (the fault tells huge
/// from base, as mincore() does), memset the 2 MiB, and record the step's latency in µs.
/// Simplification: the memset's own cost (writing 2 MiB) is not charged; the latency is the
/// faults' wall time (a THP fault zeroes 512 pages, a base-page step takes 512 faults; their
/// lock and writeback waits included). The mapping
/// is `size` (a multiple of 2 MiB), MADV_HUGEPAGE if `madvised`, held for `hold` after the last
/// step before it is unmapped.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ThpChallenge {
    p: ThpChallengeParams,
    vma: Option<AnonVma>,
    next: u64,
    #[serde(with = "crate::checkpoint::shared")]
    metrics: Shared<Metrics>,
}

impl ThpChallenge {
    pub fn new(p: ThpChallengeParams, metrics: Shared<Metrics>) -> ThpChallenge {
        ThpChallenge {
            vma: Some(AnonVma::new(pages_of(p.size_bytes), p.madvised)),
            p,
            next: 0,
            metrics,
        }
    }
}

impl TaskBody for ThpChallenge {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::ThpChallenge(self))
    }

    fn comm(&self) -> &str {
        "thpchallenge"
    }

    /// Pages faulted of the mapping's (the hold that follows is not counted).
    fn progress(&self) -> Option<Progress> {
        let pages = self.vma.as_ref().map_or(self.next, |v| v.nr_pages);
        Some(Progress::work(self.next.min(pages), pages))
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let Some(vma) = self.vma.as_mut() else {
            return Step::Exit(0);
        };
        if self.next >= vma.nr_pages {
            if self.next == vma.nr_pages {
                self.next += 1;
                return Step::Sleep {
                    ran: 0,
                    sleep: self.p.hold_ns,
                };
            }
            let freed = vma.unmap(cx.mm, cx.cpu);
            self.vma = None;
            return Step::Exit(freed * cx.cost.free_page_ns);
        }
        let region = 1u64 << fraglab_mm::types::HPAGE_PMD_ORDER;
        let mut m = self.metrics.borrow_mut();
        let t = touch_range(cx, vma, self.next, region, &mut m);
        // The step's latency as mmtests times it: wall time, the faults' waits included.
        if t.huge > 0 {
            m.thpchallenge_huge.record(t.wall_ns);
        } else {
            m.thpchallenge_base.record(t.wall_ns);
        }
        self.next += region;
        Step::Ran(t.cpu_ns)
    }
}

/// The `[[workload.thpchallenge]]` entries: `threads` threads each, started at `start`.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ThpChallenges {
    params: Vec<ThpChallengeParams>,
}

impl ThpChallenges {
    pub fn new(params: &[ThpChallengeParams]) -> ThpChallenges {
        ThpChallenges {
            params: params.to_vec(),
        }
    }
}

impl Generator for ThpChallenges {
    fn saved(&self) -> Option<crate::checkpoint::GeneratorRef<'_>> {
        Some(crate::checkpoint::GeneratorRef::ThpChallenges(self))
    }

    fn spawn(&mut self, run: &mut Run<'_>) {
        for c in &self.params {
            for _ in 0..c.threads {
                let task = ThpChallenge::new(c.clone(), run.metrics.clone());
                run.e.spawn_at(c.start_ns, Box::new(task));
            }
        }
    }

    /// The steps' latencies, huge and base, and the share of huge steps.
    fn result(&self, m: &Metrics, r: &mut RunResult) {
        if self.params.is_empty() {
            return;
        }
        r.thpchallenge = Some(ThpChallengeResult::from_histograms(
            &m.thpchallenge_huge,
            &m.thpchallenge_base,
        ));
    }
}
