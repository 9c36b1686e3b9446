//! The host engine: runs a workload spec on the live Linux kernel and writes the simulator's
//! result schema (`fraglab_spec::result::RunResult`, engine "host").
//!
//! What it runs: `[[workload.task]]` programs (each instance a forked process: anonymous mmap
//! with or without MADV_HUGEPAGE, touch sequential or random, MADV_DONTNEED, munmap, compute,
//! sleep, buffered file read/write/delete in a scratch directory, populations of small files
//! and of pipes holding a page each, compact_memory, drop_caches) and `[[workload.thp_burst]]`.
//! The kbuild, pgbench, thpchallenge and vm-scalability generators are simulator-only for now
//! (a clear error). Every second it samples /proc/vmstat, /proc/buddyinfo and
//! /proc/pagetypeinfo; it keeps /proc text at the start and the end.
//!
//! Safety: preflight refuses to run where it cannot (not Linux, not root, kernel older than
//! 6.15, a knob missing) or where the spec's anonymous memory would exceed the cap or push
//! MemAvailable under the floor; the knob guard restores every knob it changed (drop, error,
//! panic unwinding, SIGINT/SIGTERM; after SIGKILL from the state file); the run stops, kills
//! its own children by pid and restores when MemAvailable falls under the floor; the scratch
//! directory is removed.

pub mod knobs;
pub mod procfs;
mod run;
pub mod trace;

pub use knobs::{knob_path, read_knob, restore_from_state_file, KnobGuard};
pub use run::{host_run, preflight, snapshot, HostOptions, Plan};

/// Why the host engine cannot run or stopped; `exit_code` is what `fraglab host` exits with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    NotLinux,
    NotRoot,
    KernelTooOld(String),
    /// A knob the spec sets does not exist on this kernel, or cannot be read or written.
    Knob(String, String),
    /// The spec would exceed a safety limit (or did, during the run).
    Unsafe(String),
    /// The spec uses something the host engine does not run.
    Unsupported(String),
    /// SIGINT or SIGTERM: the run stopped and the knobs were restored.
    Interrupted,
    Io(String),
}

impl HostError {
    pub fn exit_code(&self) -> u8 {
        match self {
            HostError::NotLinux => 10,
            HostError::NotRoot => 11,
            HostError::KernelTooOld(_) => 12,
            HostError::Knob(..) => 13,
            HostError::Unsafe(_) => 14,
            HostError::Unsupported(_) => 15,
            HostError::Interrupted => 130,
            HostError::Io(_) => 1,
        }
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostError::NotLinux => write!(f, "the host engine runs on Linux only"),
            HostError::NotRoot => write!(
                f,
                "the host engine needs root (it writes kernel knobs and /proc/sys/vm)"
            ),
            HostError::KernelTooOld(v) => write!(f, "kernel {v} is older than 6.15 (no vm.defrag_mode)"),
            HostError::Knob(n, m) => write!(f, "knob {n}: {m}"),
            HostError::Unsafe(m) => write!(f, "unsafe: {m}"),
            HostError::Unsupported(m) => write!(f, "not supported by the host engine: {m}"),
            HostError::Interrupted => write!(f, "interrupted (knobs restored)"),
            HostError::Io(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for HostError {}
