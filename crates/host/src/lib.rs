//! fraglab-host: the host engine. It runs a spec's `[workload]` on the live Linux kernel of this
//! machine and reports the same [`RunResult`] the simulator does (`engine = "host"`), so reports
//! can put the two side by side.
//!
//! - [`preflight`] checks the machine (Linux, root, kernel ≥ 6.15, every knob the spec sets at
//!   its real path, memory and disk limits) and returns a [`Plan`] (what `--dry-run` prints).
//! - [`host_run`] makes every change to the machine (knobs, THP, read_ahead_kb, memory blocks,
//!   hugetlb pools, kdamonds, loop images, tracefs, its processes and directory) through a
//!   change journal ([`journal`]: written to the state file before each change, undone in
//!   reverse on every way out: normal end, error, panic, SIGINT/SIGTERM), forks one process per
//!   task instance and generator, samples /proc every second, and undoes everything at the end.
//! - [`restore_from_state_file`] undoes the changes of a run (or `host record`) that was killed
//!   with SIGKILL, from the state file it left.
//! - [`snapshot`] captures the /proc files and all knobs once.
//!
//! Where the host result differs from the simulator's (see the README of this crate in the
//! main docs): fault latency histograms have path `"host"` (the allocator path of a fault cannot
//! be seen from user space), order 9 = the fault mapped a PMD THP, order 0 = anything else;
//! `mixed_blocks` is 0 unless the kernel prints "Number of mixed blocks" (CONFIG_PAGE_OWNER);
//! `proc_start`/`proc_end` also hold `knobs` (`name = value` lines), `host` (kernel release,
//! free page reporting's reported_kib, DAMON threads) and, with tracing, `trace_counts` and
//! `trace`. Host results (runs and snapshots) carry [`HostConfounders`] ([`confounders`]): free
//! page reporting, DAMON's schemes, THP settings, read_ahead_kb, swap, load and CPU steal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use fraglab_spec::result::{HostConfounders, RunResult, RESULT_SCHEMA};
use fraglab_spec::{Spec, ZoneSpec, ZoneType};

pub mod census;
pub mod confounders;
pub mod damon;
mod error;
pub mod hugetlb;
pub mod journal;
pub mod knobs;
pub mod loops;
pub mod memblock;
mod preflight;
pub mod procfs;
pub mod readdev;
pub mod record;
mod run;
pub mod signals;
pub mod snapshot;
pub mod trace;
mod worker;

pub use error::HostError;
pub use journal::{Change, Journal, Machine};
pub use knobs::{
    default_state_file, find_state_files, knob_path, read_all_knobs, remove_stale_tmp_files,
    restore_from_state_file, Cleanup, SavedKnob, StateFile,
};
pub use preflight::{preflight, FileSetPlan, MemoryBudget, Plan, PlannedKnob};
pub use run::host_run;
pub use worker::FILES_PER_SLAB_PAGE;

const GIB: u64 = 1 << 30;

/// The oldest kernel the engine runs on (vm.defrag_mode and the 6.15 allocator).
pub const MIN_KERNEL: (u32, u32) = (6, 15);

/// How a host run is carried out.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// Where the run's directory (its files) is created; default `/var/tmp`. The run makes a
    /// fresh subdirectory and removes it at the end.
    pub workdir: Option<PathBuf>,
    /// Refuse to start, or stop the run, if MemAvailable would fall / falls under this
    /// (default 3 GiB).
    pub mem_floor_bytes: u64,
    /// Refuse specs whose anonymous (and pipe-buffer) memory exceeds this (default 10 GiB).
    pub anon_cap_bytes: u64,
    /// Refuse specs whose `slab` steps would create more files than this (default 2,000,000).
    pub max_slab_files: u64,
    /// Sample period (default 1 s).
    pub sample_interval: Duration,
    /// Stop the run after this long even if the spec's `duration` is longer.
    pub max_duration: Option<Duration>,
    /// Record tracepoints (spec `run.trace`, else [`trace::DEFAULT_EVENTS`]).
    pub trace: bool,
    /// Bytes of trace text kept in `proc_end["trace"]` (default 4 MiB).
    pub trace_keep_bytes: usize,
    /// Record the trace (as `trace` does, whether or not it is set) and stream its whole text
    /// to this file (plain ftrace text, `trace_clock` mono; the input of `fraglab trace diff`).
    /// The events are the spec's `run.trace` (or [`trace::DEFAULT_EVENTS`]) together with
    /// [`fraglab_spec::DIFF_EVENTS`] (a diff event this kernel lacks, such as `damon:` on a
    /// kernel without DAMON, is left out and named); the instance's buffer is
    /// [`trace::TRACE_TO_BUFFER_KB`] per CPU. The result then has
    /// `trace_counts["lost_events"]` (the instance's overrun and dropped events) and
    /// `proc_end["trace_to"]` (file, lines written, lost events, a write error if any, one
    /// `not_on_this_kernel EVENT` line per event left out). Default None.
    pub trace_to: Option<PathBuf>,
    /// The state file (default `/run/fraglab-host-<pid>.restore`).
    pub state_file: Option<PathBuf>,
    /// Write real data into the files `read` steps read before the run and drop them from the
    /// page cache (POSIX_FADV_DONTNEED), so reads do I/O; false: sparse files (default true).
    pub prefill_read_files: bool,
    /// Take the difference between this machine's MemTotal and the spec's `machine.memory`
    /// out of the machine for the run, so memory pressure comes at the spec's size (default
    /// false): memory blocks of zone Normal taken offline ([`memblock`]), or where that is
    /// unavailable a hugetlb pool ([`hugetlb`]).
    pub fit_memory: bool,
    /// With `fit_memory`: always the hugetlb pool, never offlining (default false).
    pub fit_by_hugetlb: bool,
    /// Capture this machine's page state into this snapshot file (as `fraglab host snapshot
    /// --pages`) once the run's knobs are applied and the machine is fitted, immediately
    /// before its workers start, so that the simulator can boot from the very state the
    /// kernel's run starts in (`fraglab validate`'s same-start arm). The result's
    /// `proc_start["host"]` says where and how long the capture took (default: none).
    pub capture_to: Option<PathBuf>,
    /// Capture this machine into this snapshot file at the start of the measured part (the
    /// first `{ measure = true }` step): the worker that starts it captures first, so the
    /// simulator can boot from the state the measured part starts in and run only that part
    /// (`fraglab validate`'s `capture_at = "measure"`). The result's `proc_start["host"]` says
    /// where and how long it took (default: none).
    pub capture_at_measure: Option<PathBuf>,
    /// Fit the read device under the run's files before the workers start ([`readdev`]): a
    /// `read device:` line in `proc_start["host"]` with its time per request and per page,
    /// which `fraglab validate` gives the simulator's arm (default false).
    pub fit_read_device: bool,
}

impl Default for HostOptions {
    fn default() -> HostOptions {
        HostOptions {
            workdir: None,
            mem_floor_bytes: 3 * GIB,
            anon_cap_bytes: 10 * GIB,
            max_slab_files: 2_000_000,
            sample_interval: Duration::from_secs(1),
            max_duration: None,
            trace: false,
            trace_keep_bytes: 4 << 20,
            trace_to: None,
            state_file: None,
            prefill_read_files: true,
            fit_memory: false,
            fit_by_hugetlb: false,
            capture_to: None,
            capture_at_measure: None,
            fit_read_device: false,
        }
    }
}

/// The spec the simulator's arm of `fraglab validate --fit-memory` runs: `spec` with
/// `[[machine.zone]]`s equal to the zones the host run had once it was fitted by offlining
/// memory blocks (its [`FitMemory::zones`](fraglab_spec::result::FitMemory): this VM's DMA
/// and DMA32 and the Normal zone that is left, `memory` then unset as with explicit zones).
/// A run fitted by offlining what would go and a hugetlb pool for the rest (method
/// `offline+hugetlb`) gives those zones and `machine.hugetlb_pages` = the pool's pages, so the
/// simulator boots the same zones with the same memory taken out (docs/model §28.1).
/// A host run fitted by the hugetlb pool alone (whose zones still span the whole machine) or
/// not fitted at all gives `spec` unchanged.
pub fn sim_spec_for(spec: &Spec, host: &RunResult) -> Spec {
    let mut s = spec.clone();
    let Some(fit) = host
        .fit_memory
        .as_ref()
        .filter(|f| f.method == "offline" || f.method == "offline+hugetlb")
    else {
        return s;
    };
    let zones: Vec<ZoneSpec> = fit
        .zones
        .iter()
        .filter_map(|z| {
            Some(ZoneSpec {
                zone: ZoneType::from_name(&z.name).filter(|t| *t != ZoneType::Device)?,
                start_pfn: z.start_pfn,
                spanned: z.spanned,
                present: z.present,
                managed: z.managed,
            })
        })
        .collect();
    if zones.is_empty() {
        return s;
    }
    s.machine.zones = Some(zones);
    s.machine.memory_bytes = None;
    if fit.method == "offline+hugetlb" {
        s.machine.hugetlb_pages = fit.hugetlb_pages;
    }
    s
}

/// `proc_start`/`proc_end` of a run: the /proc files, `knobs` and the `host` facts.
pub(crate) fn start_proc(knobs: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, HostError> {
    let mut m = procfs::proc_snapshot()?;
    m.insert("knobs".into(), knobs::knobs_text(knobs));
    m.insert("host".into(), procfs::host_facts());
    Ok(m)
}

/// One-shot capture: one [`Sample`](fraglab_spec::result::Sample), /proc/buddyinfo, pagetypeinfo, zoneinfo, vmstat, every
/// known knob (`proc_start["knobs"]`, `name = value` lines; [`read_all_knobs`] gives them as a
/// map), the host facts (`proc_start["host"]`) and the confounders (one reading, as both start
/// and end). `proc_end` is the same as `proc_start`.
pub fn snapshot() -> Result<RunResult, HostError> {
    let proc_start = start_proc(&read_all_knobs())?;
    let reading = confounders::read();
    Ok(RunResult {
        confounders: Some(HostConfounders::from_readings(reading.clone(), reading)),
        schema: RESULT_SCHEMA,
        engine: "host".into(),
        samples: vec![procfs::sample(0)?],
        proc_end: proc_start.clone(),
        proc_start,
        ..Default::default()
    })
}
