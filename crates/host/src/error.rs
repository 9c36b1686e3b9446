//! The host engine's errors, each with its own process exit code.

use std::fmt;

/// Why the host engine refused to run, or why a run stopped.
#[derive(Debug)]
pub enum HostError {
    /// The machine is not running Linux.
    NotLinux,
    /// The engine needs root (knob writes, /proc/pagetypeinfo, /proc/self/pagemap PFNs).
    NotRoot,
    /// The running kernel is older than the engine supports.
    KernelTooOld { found: String, need: (u32, u32) },
    /// A knob the spec sets has no file at its real path on this kernel.
    MissingKnob { name: String, path: String },
    /// The spec asks for something the host engine does not do (yet).
    Unsupported(String),
    /// Running the spec would break a safety limit (memory floor, anonymous cap, slab files).
    Unsafe(String),
    /// Another host run holds the machine-wide lock.
    Busy(String),
    /// A knob could not be written, or did not read back as written.
    KnobWrite {
        name: String,
        value: String,
        why: String,
    },
    /// An I/O error on a named file.
    Io { what: String, err: std::io::Error },
    /// MemAvailable fell under the floor during the run; the workload was stopped.
    MemoryFloor { available: u64, floor: u64 },
    /// A workload process failed.
    Worker(String),
    /// The run was interrupted by this signal (SIGINT, SIGTERM); knobs were restored.
    Interrupted(i32),
    /// Some knobs could not be restored (name: why). The state file is kept.
    RestoreFailed(Vec<String>),
    /// A state file could not be parsed.
    BadStateFile(String),
    /// `[host] loop_images`: a tool is missing, the disk lacks room, or mkfs/losetup/mount
    /// failed.
    LoopImage(String),
    /// `host snapshot --pages`: the machine's memory map is not fully initialised yet
    /// (deferred struct page init); the reason says which zone and how to warm the machine.
    Uninitialised(String),
}

impl HostError {
    /// The exit code a command-line front end should use for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            HostError::NotLinux => 10,
            HostError::NotRoot => 11,
            HostError::KernelTooOld { .. } => 12,
            HostError::MissingKnob { .. } => 13,
            HostError::Unsupported(_) => 14,
            HostError::Unsafe(_) => 15,
            HostError::Busy(_) => 16,
            HostError::KnobWrite { .. } => 17,
            HostError::Io { .. } => 18,
            HostError::MemoryFloor { .. } => 19,
            HostError::Worker(_) => 20,
            HostError::RestoreFailed(_) => 21,
            HostError::BadStateFile(_) => 22,
            HostError::LoopImage(_) => 23,
            HostError::Uninitialised(_) => 24,
            HostError::Interrupted(sig) => 128 + sig,
        }
    }

    pub(crate) fn io(what: impl Into<String>, err: std::io::Error) -> HostError {
        HostError::Io {
            what: what.into(),
            err,
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::NotLinux => f.write_str("the host engine runs only on Linux"),
            HostError::NotRoot => {
                f.write_str("the host engine needs root (knobs, /proc/pagetypeinfo, pagemap)")
            }
            HostError::KernelTooOld { found, need } => {
                write!(f, "kernel {found} is older than {}.{}", need.0, need.1)
            }
            HostError::MissingKnob { name, path } => {
                write!(f, "knob {name}: {path} does not exist on this kernel")
            }
            HostError::Unsupported(s) => write!(f, "not supported by the host engine yet: {s}"),
            HostError::Unsafe(s) => write!(f, "refused, unsafe: {s}"),
            HostError::Busy(s) => write!(f, "busy: {s}"),
            HostError::KnobWrite { name, value, why } => {
                write!(f, "knob {name}: cannot set {value:?}: {why}")
            }
            HostError::Io { what, err } => write!(f, "{what}: {err}"),
            HostError::MemoryFloor { available, floor } => write!(
                f,
                "MemAvailable {} MiB fell under the floor of {} MiB: workload stopped, knobs restored",
                available >> 20,
                floor >> 20
            ),
            HostError::Worker(s) => write!(f, "workload process failed: {s}"),
            HostError::Interrupted(sig) => {
                write!(f, "interrupted by signal {sig}: workload stopped, knobs restored")
            }
            HostError::RestoreFailed(v) => write!(f, "knobs not restored: {}", v.join("; ")),
            HostError::BadStateFile(s) => write!(f, "bad state file: {s}"),
            HostError::LoopImage(s) => write!(f, "loop image: {s}"),
            HostError::Uninitialised(s) => write!(f, "refusing to snapshot: {s}"),
        }
    }
}

impl std::error::Error for HostError {}
