//! The result of a timed run (`fraglab run` of a spec with a `[workload]`), as written to JSON.
//! Both engines (simulator, and later the host engine) produce this schema; reports read it
//! without knowing which engine wrote it. Field names are the kernel's where one exists.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod blame;
pub mod confounders;
pub mod hist;
pub mod pageblock;
pub mod rows;
pub mod scoreboard;

pub use confounders::HostConfounders;
pub use hist::Histogram;

/// Version of this schema; bumped on any incompatible change.
pub const RESULT_SCHEMA: u32 = 1;

/// The schema of a scale model's result (issue 35): schema 1 plus [`RunResult::scale`]. Only a
/// scaled run writes it (a full-size result stays schema 1, byte for byte), so a fraglab that
/// does not know scale models refuses a scaled result instead of reading its counters as a
/// full-size machine's; this one reads both ([`RESULT_SCHEMAS`]).
pub const RESULT_SCHEMA_SCALED: u32 = 2;

/// The result schemas this fraglab reads.
pub const RESULT_SCHEMAS: std::ops::RangeInclusive<u32> = RESULT_SCHEMA..=RESULT_SCHEMA_SCALED;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: u32,
    /// "sim" or "host".
    pub engine: String,
    pub spec_name: Option<String>,
    pub seed: u64,
    /// Simulated (or, on the host, real) time the run covered.
    pub duration_ns: u64,
    /// /proc/vmstat deltas over the run, by kernel name (items whose delta is 0 included).
    pub vmstat_delta: BTreeMap<String, i64>,
    /// One sample per `sample_ns`.
    pub samples: Vec<Sample>,
    /// Fault latency histograms by folio order and path: the time from the fault's start to
    /// its return (the host engine's clock; the simulator's wall time in virtual time, waits
    /// included: docs/costs.md "Fault latency").
    pub fault_latency: Vec<LatencyHistogram>,
    /// Simulator only: the same faults' CPU time (the cost model's figure, without the waits),
    /// by folio order and path. Absent from host results and from older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fault_latency_cpu: Vec<LatencyHistogram>,
    /// Simulator timed runs: the contended kernel locks of the engine's lock model (`zone->lock`,
    /// `lruvec->lru_lock`, `pcpu_drain_mutex`) with the figures /proc/lock_stat reports, over
    /// the whole run (as `sim_work`). Absent from host results and from older files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lock_stat: Vec<LockStatResult>,
    /// The generators' own figures.
    pub builds: Vec<BuildResult>,
    pub bursts: Vec<BurstResult>,
    /// thpchallenge: per-2 MiB-step latency, huge and base (absent without the generator).
    pub thpchallenge: Option<ThpChallengeResult>,
    /// pgbench: transactions per simulated second (absent without the generator).
    pub pgbench: Option<PgbenchResult>,
    /// vm-scalability cases, one per `[[workload.vm_scalability]]`.
    #[serde(default)]
    pub vm_scalability: Vec<VmScalabilityResult>,
    /// Host engine with tracing: events recorded per tracepoint name over the run.
    #[serde(default)]
    pub trace_counts: BTreeMap<String, u64>,
    /// The pageblock map at evenly spaced points of the run (at most 240; fraglab-sim
    /// `timed::MapCadence`), and at its end.
    #[serde(default)]
    pub pageblock_maps: Vec<PageblockMap>,
    /// Simulator only: work of the allocator that /proc/vmstat does not count, over the run —
    /// `drain_all_pages` (calls from allocation slow paths), `pcp_pages_drained` (pages they
    /// returned from per-CPU lists), `alloc_slowpaths`, `direct_reclaim_calls` — and, for timed
    /// runs, kswapd's and kcompactd's CPU time, run-queue wait and steps (`kswapd_cpu_ns`,
    /// `kswapd_runq_wait_ns`, `kswapd_steps`, the same for `kcompactd_`). Empty for host runs.
    #[serde(default)]
    pub sim_work: BTreeMap<String, u64>,
    /// /proc text at the start and the end (buddyinfo, pagetypeinfo, zoneinfo, vmstat).
    pub proc_start: BTreeMap<String, String>,
    pub proc_end: BTreeMap<String, String>,
    /// Simulator only: host wall time of the run (not deterministic, so not in the
    /// byte-identical part: written as 0 unless asked for).
    pub wall_ns: u64,
    /// Host only: free page reporting, DAMON, THP settings, read_ahead_kb, swap, load and CPU
    /// steal at the start and end of the run ([`confounders`]). Absent from simulator results
    /// (and from their JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confounders: Option<HostConfounders>,
    /// Phases (a task's `{ measure = true }` step): when the measured part of the run started,
    /// on the run's clock. When set, `vmstat_delta`, `fault_latency`, `bursts`, `thpchallenge`
    /// (and so the mmtests rows) cover the measured part only, from this moment to the end;
    /// `samples`, `pageblock_maps`, `trace_counts`, `sim_work` and `duration_ns` keep the whole
    /// run (their time axis unchanged). Absent when no task has the step (or none reached it):
    /// then the whole run is measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure_start_ns: Option<u64>,
    /// Phases: the part of the run before the measured part (the prelude), with its own
    /// vmstat deltas. Absent with `measure_start_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prelude: Option<Prelude>,
    /// Host only, `--fit-memory`: how the machine was fitted to the spec's `machine.memory`
    /// and the zones it had once fitted. Absent otherwise (and from the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_memory: Option<FitMemory>,
    /// `census` task steps: the page-cache folio orders of a file at that point, in the order
    /// the steps ran (absent from the JSON when no step took one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub census: Vec<CensusResult>,
    /// Per task instance with `read` steps: bytes read and time spent in them, for the read
    /// throughput rows (absent from the JSON when no task reads).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_reads: Vec<TaskReadResult>,
    /// Simulator runs of a spec with `[machine] snapshot` (issue 21): the snapshot booted from
    /// and how well its reconstruction matched the captured tables. Absent otherwise (and from
    /// the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotMatch>,
    /// `sample` task steps (issue 33): a sample at each named point of a task program, with
    /// the pageblock census of each zone, in the order they were taken (absent from the JSON
    /// when no step took one). Rows `census.NAME.ZONE.CLASS` read the last of each name
    /// ([`rows::named_census_rows`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named_samples: Vec<NamedSample>,
    /// Timeless runs (`[[op]]`s, `fraglab run -o x.json`): the text their `print` operations
    /// produced, with a `#` line per op — what `fraglab run` prints without `-o`. Absent from
    /// timed runs (and from their JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printed: Option<String>,
    /// A scale model's run (`--scale 1/K`, `[run] scale`; issue 35): K, the label and the
    /// counters scaled back up. `vmstat_delta` and everything else stay the scaled machine's
    /// own (raw). Absent from full-size results (and from their JSON, schema 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<ScaleResult>,
    /// `[run] blame` (issue 37, docs/blame.md): per source (a generator's task, a kernel
    /// thread, boot) the events that made pageblocks impure and the blocks compaction could
    /// not empty because of its pages, in source order. Absent when blame is off (and from the
    /// JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blame: Option<Vec<BlameSource>>,
    /// The policy the run used when it is not the kernel's own (`[model] policy` or a model
    /// switch's layer; issue 37, docs/policies.md): its full name and its own counters.
    /// Absent for Linux 6.18 (and from the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyResult>,
    /// A run forked warm (`fraglab compare --fork-at`, issue 37): the simulated time at which
    /// it left the first configuration's run and took its own settings. Everything before it
    /// ran under the first configuration's settings; the counters cover the whole run. Absent
    /// for a run of its own (and from the JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_at_ns: Option<u64>,
    /// `[run] checkpoint_at` (issue 37, docs/checkpoints.md): the checkpoint this run wrote.
    /// Absent when none was asked for or the run ended before its time (and from the JSON).
    /// A run continued from a checkpoint does not say so: its result is the whole run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointWritten>,
}

/// [`RunResult::checkpoint`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointWritten {
    /// The file, as the run named it.
    pub file: String,
    /// The simulated time of the state it holds (the first event at or after `at_ns`).
    pub t_ns: u64,
    /// `checkpoint_at`.
    pub at_ns: u64,
    /// The file's size.
    pub bytes: u64,
}

/// [`RunResult::policy`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyResult {
    /// The policy's name with its layers (`contiguitas`, `linux-6.18+defrag_stage=vanilla`).
    pub name: String,
    /// The policy's own counters (`fraglab_mm::policy::Policy::counters`), by name.
    #[serde(default)]
    pub counters: std::collections::BTreeMap<String, u64>,
}

/// One source of [`RunResult::blame`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlameSource {
    /// `GENERATOR COMM` (`kbuild cc1`, `thp_burst thp_burst`), `kernel kswapd0`, or `boot`.
    pub source: String,
    /// Events by kind: `steal`, `claim_partial`, `claim_whole`, `no_fallback`,
    /// `pagecache_unmovable`, `compact_blocked`.
    pub events: BTreeMap<String, u64>,
    /// Pages the events involved, by the same kinds.
    pub pages: BTreeMap<String, u64>,
    /// Events (compaction failures excepted) by the allocation's migratetype.
    pub by_migratetype: BTreeMap<String, u64>,
    /// Distinct pageblocks its events made mixed.
    pub mixed_blocks: u64,
    /// Distinct pageblocks the migrate scanner could not empty because of its pages.
    pub compact_blocked_blocks: u64,
    /// PMD THP faults that failed after their direct compaction met its pages in a block it
    /// could not empty (0 in results of a fraglab from before it was counted).
    #[serde(default)]
    pub thp_fault_fail: u64,
}

/// [`RunResult::scale`]: what a scale model ran and its counters ×K.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScaleResult {
    /// `scale model 1/K`.
    pub label: String,
    /// K.
    pub factor: u32,
    /// The scaled machine's memory (bytes: `memory`, or the zones' managed pages) and CPUs.
    pub memory_bytes: u64,
    pub cpus: u32,
    /// The full-size machine's, as the spec gives it.
    pub full_memory_bytes: u64,
    pub full_cpus: u32,
    /// `vmstat_delta` × K: the counters (and gauge deltas) scaled up to the full-size machine.
    pub vmstat_delta_scaled_up: BTreeMap<String, i64>,
}

/// How well a snapshot's reconstruction matches what the kernel printed (docs/model §30.5;
/// `fraglab_state::reconstruct::MatchReport`, copied here because the result schema does not
/// link the state crate).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotMatch {
    /// The snapshot file as the spec names it.
    pub file: String,
    /// Blocks per (zone, type), free chunks per (zone, type, order) and per (zone, order):
    /// (what, captured, reconstructed).
    pub blocks: Vec<(String, i64, i64)>,
    pub free_by_type: Vec<(String, i64, i64)>,
    pub free_by_order: Vec<(String, i64, i64)>,
    pub mixed_blocks: u64,
    pub content_disagrees: u64,
    /// The fit's local-search swaps and its L1 error before and after.
    pub swaps: u64,
    pub l1_before: u64,
    pub l1_after: u64,
}

/// How a host run fitted the machine to the spec's `machine.memory` (`--fit-memory`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FitMemory {
    /// "offline" (memory blocks taken offline) or "hugetlb" (a hugetlb pool held, the fallback).
    pub method: String,
    /// The plan's line, as printed: `offline N blocks of 128 MiB (…)` or `hugetlb pool …`.
    pub description: String,
    /// The spec's `machine.memory`.
    pub target_bytes: u64,
    /// MemTotal before fitting and once fitted.
    pub mem_total_before: u64,
    pub mem_total_fitted: u64,
    /// "offline": the memory blocks taken (`memoryN` indices) and their size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<u64>,
    #[serde(default)]
    pub block_bytes: u64,
    /// "hugetlb": the pages held in the pool.
    #[serde(default)]
    pub hugetlb_pages: u64,
    /// Node 0's populated zones from /proc/zoneinfo once fitted, in pfn order.
    pub zones: Vec<ZoneLayout>,
}

/// One zone as /proc/zoneinfo describes it (pages).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneLayout {
    /// DMA, DMA32, Normal, Movable.
    pub name: String,
    pub start_pfn: u64,
    pub spanned: u64,
    pub present: u64,
    pub managed: u64,
}

/// The part of a run before its measured part (`RunResult::prelude`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Prelude {
    /// From the run's start to the measured part's (= `measure_start_ns`).
    pub duration_ns: u64,
    /// /proc/vmstat deltas over the prelude, by kernel name (every item of `vmstat_delta`).
    pub vmstat_delta: BTreeMap<String, i64>,
}

/// Phases: `end - start` for every item of `end` (an item missing from `start` counts from 0),
/// as both engines take the vmstat deltas of a run and of its prelude.
pub fn vmstat_delta_between(
    start: &BTreeMap<String, i64>,
    end: &BTreeMap<String, i64>,
) -> BTreeMap<String, i64> {
    end.iter()
        .map(|(k, v)| (k.clone(), v - start.get(k).copied().unwrap_or(0)))
        .collect()
}

/// One `census` step: the page cache of `file` in folios of each order 0..=10.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CensusResult {
    /// The task's name (instances of one task share it).
    pub task: String,
    /// The spec's name for the file.
    pub file: String,
    /// When the step ran, from the start of the run.
    pub at_ns: u64,
    /// Cached pages of the file in folios of each order.
    pub pages_per_order: [u64; 11],
    /// Folios of each order.
    pub folios_per_order: [u64; 11],
}

impl CensusResult {
    /// Cached pages of the file.
    pub fn pages(&self) -> u64 {
        self.pages_per_order.iter().sum()
    }

    /// Percent of the cached pages in folios of order `min` or more (0 when nothing is cached).
    pub fn pct_at_least(&self, min: usize) -> f64 {
        let all = self.pages();
        if all == 0 {
            return 0.0;
        }
        self.pages_per_order[min.min(11)..].iter().sum::<u64>() as f64 * 100.0 / all as f64
    }
}

/// One `{ sample = "NAME" }` task step (issue 33): the record a periodic sample is, taken
/// where the task's program reached the step, and the pageblock census of each populated zone
/// at the same moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedSample {
    /// The step's name.
    pub name: String,
    /// The task and instance that took it.
    pub task: String,
    pub instance: u32,
    /// The sample (its `t_ns` is when the step ran, from the start of the run).
    pub sample: Sample,
    /// Per populated zone, in pfn order.
    pub zones: Vec<pageblock::ZoneCensus>,
}

/// The `read` steps of one task instance: bytes read and the time they took.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskReadResult {
    pub task: String,
    pub instance: u32,
    pub bytes: u64,
    /// Time from each read step's start to its end, summed (simulated time in the simulator,
    /// wall time on the host).
    pub ns: u64,
}

impl TaskReadResult {
    /// MiB/s over the read steps (0 when they took no time).
    pub fn mib_per_s(&self) -> f64 {
        if self.ns == 0 {
            0.0
        } else {
            self.bytes as f64 / (1u64 << 20) as f64 / (self.ns as f64 / 1e9)
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t_ns: u64,
    /// Free pages per order (all zones).
    pub free_by_order: Vec<u64>,
    /// Free pages per migratetype (Unmovable, Movable, Reclaimable, HighAtomic, Isolate).
    pub free_by_type: Vec<u64>,
    /// Pageblocks per migratetype, as /proc/pagetypeinfo's "Number of blocks type" counts
    /// them (summed over zones): present, online blocks, not those of zone holes or offline
    /// memory.
    pub blocks_by_type: Vec<u64>,
    /// Pageblocks holding pages of a mobility other than their type.
    pub mixed_blocks: u64,
    pub thp_fault_alloc: u64,
    pub thp_fault_fallback: u64,
}

/// One lock's contention over a run, as /proc/lock_stat reports it (in nanoseconds where it
/// reports microseconds). A contention is an acquisition that had to wait.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockStatResult {
    /// The lock class as lock_stat names it (`&zone->lock`, `&lruvec->lru_lock`,
    /// `pcpu_drain_mutex`).
    pub name: String,
    #[serde(default)]
    pub acquisitions: u64,
    #[serde(default)]
    pub contentions: u64,
    /// lock_stat's waittime-min, -max, -total.
    #[serde(default)]
    pub waittime_min_ns: u64,
    #[serde(default)]
    pub waittime_max_ns: u64,
    #[serde(default)]
    pub waittime_total_ns: u64,
    /// lock_stat's holdtime-max and -total.
    #[serde(default)]
    pub holdtime_max_ns: u64,
    #[serde(default)]
    pub holdtime_total_ns: u64,
    /// Try-locks that failed and did not wait (`pcpu_drain_mutex`: `drain_all_pages(NULL)`
    /// calls that returned because another CPU was draining).
    #[serde(default)]
    pub trylock_failed: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyHistogram {
    pub order: u32,
    /// "fast", "after_kswapd", "direct_compaction" or "direct_reclaim".
    pub path: String,
    pub count: u64,
    pub sum_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Bucket i counts latencies in [2^i, 2^(i+1)) ns (bucket 0 also 0): the coarse histogram
    /// every fraglab writes and reads.
    pub log2_buckets: Vec<u64>,
    /// The same latencies in log-linear buckets (16 per power of two), from which the reports
    /// take their quantiles ([`LatencyHistogram::histogram`]). Absent from the results of
    /// fraglab before issue 36 (read back from `log2_buckets` alone) and from a histogram
    /// without values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_linear_buckets: Option<LogLinearBuckets>,
    /// Simulator, free page reporting (§32.3 item 6): of `count`, the faults
    /// that wrote pages whose backing the host had discarded, and the time their host faults
    /// added (included in `sum_ns` and the buckets: real latencies are bimodal, these say how
    /// much of the distribution is the slow mode). Absent (0) without a reporting device.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_faults: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_fault_ns: u64,
}

/// Log-linear latency buckets (HdrHistogram's layout): `sub_buckets` (a power of two, 2^k)
/// per power of two. Bucket i of the full sequence holds, for i + 1 < 2^k, the value i + 1
/// (bucket 0 also 0); above, with j = i + 1, s = j / 2^k − 1 and m = j − s·2^k, the values
/// [m·2^s, (m + 1)·2^s). `counts` holds buckets `first` to the last non-empty one
/// (`fraglab_spec::result::hist::bucket_range` computes the bounds).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogLinearBuckets {
    pub sub_buckets: u32,
    pub first: u32,
    pub counts: Vec<u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildResult {
    pub start_ns: u64,
    pub end_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
    pub jobs: u64,
    /// vmstat deltas over this build (the mmtests per-iteration rows).
    pub vmstat_delta: BTreeMap<String, i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BurstResult {
    pub start_ns: u64,
    /// Time spent faulting the burst in ("Hugealloc Time").
    pub alloc_ns: u64,
    pub faults: u64,
    pub huge: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThpChallengeResult {
    pub huge: LatencyHistogram,
    pub base: LatencyHistogram,
    /// huge × 100 / (huge + base).
    pub huge_pct: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PgbenchResult {
    /// Transactions completed in each simulated second.
    pub tps: Vec<u64>,
    /// Mean TPS over the run, and over the seconds with and without a checkpoint running.
    pub mean_tps: f64,
    pub checkpoint_tps: f64,
    pub steady_tps: f64,
    /// The seconds (indices into `tps`) in which a checkpoint was being written.
    #[serde(default)]
    pub checkpoint_secs: Vec<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VmScalabilityResult {
    /// The case's name ("small-allocs", "mmap-pread-seq", ...).
    pub case: String,
    /// Processes that ran.
    pub processes: u32,
    /// Bytes the processes read, wrote or touched.
    pub bytes: u64,
    /// lkp's `vm-scalability.throughput`: Σ over processes of bytes / elapsed, in KiB/s.
    pub throughput: f64,
}

/// Every pageblock of the populated zones that /proc/pagetypeinfo counts (present, online
/// blocks: not those of zone holes or offline memory) at one time, in pfn order, zone after zone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PageblockMap {
    pub t_ns: u64,
    /// One char per block: its migratetype, U/M/R/H/I (Unmovable, Movable, Reclaimable,
    /// HighAtomic, Isolate); lower case when the block holds pages of another mobility ("mixed").
    pub types: String,
    /// One digit per block: pages in use × 10 / 512, capped at 9 (0 = empty, 9 = ≥ 90 % used).
    pub fill: String,
    /// (zone name, index of its first block in the strings).
    pub zones: Vec<(String, usize)>,
}

/// What `fraglab compare` computes (its `--format json`), and what `fraglab report` renders as
/// the compare table: per row and configuration the summary statistic over the runs, the
/// relative change against the first configuration and whether Welch's t-test finds the
/// difference significant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// Column labels; the first is the baseline.
    pub configs: Vec<String>,
    /// Runs per configuration.
    pub runs: u32,
    pub rows: Vec<CompareRow>,
    /// Per configuration, `scale model 1/K` for a scale model's runs (their values are the
    /// scaled machine's own, raw) and "" for full-size ones; empty (and absent from the JSON)
    /// when no configuration is scaled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale: Vec<String>,
}

impl CompareReport {
    /// The `# scale model 1/K: LABEL ...` lines the tables print under their header, one per
    /// scale; empty without a scale model.
    pub fn scale_note(&self) -> String {
        let mut out = String::new();
        let mut seen: Vec<&str> = Vec::new();
        for s in self.scale.iter().filter(|s| !s.is_empty()) {
            if seen.contains(&s.as_str()) {
                continue;
            }
            seen.push(s);
            let labels: Vec<&str> = self
                .configs
                .iter()
                .zip(&self.scale)
                .filter(|(_, t)| *t == s)
                .map(|(c, _)| c.as_str())
                .collect();
            out.push_str(&format!(
                "# {s}: {} (values are the scaled machine's own, raw; each result's scale.vmstat_delta_scaled_up has the counters x K)\n",
                labels.join(", ")
            ));
        }
        out
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CompareRow {
    /// The metric ("THP fault alloc", "Hugealloc Time", "vm-scalability.throughput msync", ...).
    pub metric: String,
    /// The summary statistic: "Min", "Amean", "Hmean", "Stddev", "CoeffVar", "Max", or "" for a
    /// single derived value.
    pub stat: String,
    /// One value per configuration.
    pub values: Vec<f64>,
    /// Relative change against the baseline in percent, (new − base) / base × 100 (None for the
    /// baseline itself or a zero base).
    pub change_pct: Vec<Option<f64>>,
    /// Welch's t-test at p < 0.05 against the baseline's per-run values (false for the baseline).
    pub significant: Vec<bool>,
    /// The per-run values behind the row, per configuration (empty for derived rows).
    #[serde(default)]
    pub per_run: Vec<Vec<f64>>,
    /// The configurations that do not measure this metric (their `values` hold 0 and the
    /// tables print `n/a`): a host result has no allocator work counters, a configuration
    /// without bursts no Hugealloc rows. Empty when every configuration measures it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unmeasured: Vec<usize>,
}

impl CompareRow {
    /// Whether configuration `i` measures this metric.
    pub fn measured(&self, i: usize) -> bool {
        !self.unmeasured.contains(&i)
    }

    /// The change shown in column `i`: 0 for the baseline, `None` (shown "n/a") where there is
    /// none (a zero base).
    pub fn shown_change(&self, i: usize) -> Option<f64> {
        if i == 0 {
            Some(0.0)
        } else {
            self.change_pct.get(i).copied().flatten()
        }
    }
}
