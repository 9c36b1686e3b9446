//! A recorded tracepoint stream (issue 21 items 4–5): the ftrace text lines of the recorded
//! events, streamed, with the snapshot taken at the start.
//!
//! File: the [`container`](crate::container) layout with magic `FRAGTRCE`, a [`TraceHeader`] as
//! the JSON header, then (optionally) the start snapshot's `PAGE` sections, then `TEXT`
//! sections holding whole lines of ftrace text ("comm-pid [cpu] flags ts: event: fields").
//! A plain ftrace text file (`cat trace`, `trace-cmd report` without `-R`) is read too.
//!
//! INTERFACE (issue 21): `TraceWriter` (the host's recorder writes it) and `TraceReader` (the
//! replay reads it); lines are never all in memory at once.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::snapshot::{Snapshot, SnapshotHeader};
use crate::StateError;

pub const TRACE_MAGIC: [u8; 8] = *b"FRAGTRCE";
pub const TEXT_TAG: [u8; 4] = *b"TEXT";

/// The trace file's header.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// The events enabled ("kmem:mm_page_alloc", ...).
    pub events: Vec<String>,
    pub started_at_unix_s: u64,
    pub duration_ns: u64,
    pub nr_cpus: u32,
    /// Per-CPU buffer size used (KiB) and events the kernel dropped (per_cpu/*/stats "overrun").
    pub buffer_size_kb: u64,
    pub lost_events: u64,
    /// Knobs at the start (sysctl/sysfs names).
    pub knobs: BTreeMap<String, String>,
    /// /proc files at the end ("pagetypeinfo", "buddyinfo", "vmstat", ...): the recorded run's
    /// end state.
    pub proc_end: BTreeMap<String, String>,
    /// Free page reporting and DAMON during the recording.
    pub confounders: serde_json::Value,
    /// The start snapshot's header when the file embeds one (its page bytes follow the header).
    pub snapshot: Option<SnapshotHeader>,
    /// What was run while recording (a command line or a spec path), for the report.
    pub workload: String,
}

/// Writes a trace file (through `PATH.partial`).
pub struct TraceWriter {
    _private: (),
}

impl TraceWriter {
    pub fn create(
        _path: &Path,
        _header: &TraceHeader,
        _snapshot: Option<&Snapshot>,
    ) -> Result<TraceWriter, StateError> {
        todo!("issue 21 helper C")
    }
    /// Appends one line of ftrace text (without its newline).
    pub fn line(&mut self, _line: &str) -> Result<(), StateError> {
        todo!("issue 21 helper C")
    }
    /// Completes the file; `header` replaces the one given to `create` (end-state fields).
    pub fn finish(self, _header: &TraceHeader) -> Result<(), StateError> {
        todo!("issue 21 helper C")
    }
}

/// Reads a trace file or a plain ftrace text file, line by line.
pub struct TraceReader {
    _private: (),
}

impl TraceReader {
    pub fn open(_path: &Path) -> Result<TraceReader, StateError> {
        todo!("issue 21 helper C")
    }
    /// The header (a plain text file gets a default header with `events` empty).
    pub fn header(&self) -> &TraceHeader {
        todo!("issue 21 helper C")
    }
    /// The embedded start snapshot, if any (read before the first line).
    pub fn take_snapshot(&mut self) -> Option<Snapshot> {
        todo!("issue 21 helper C")
    }
    /// The next line of ftrace text; `None` at the end. Comment lines (`#`) are skipped.
    pub fn next_line(&mut self) -> Result<Option<String>, StateError> {
        todo!("issue 21 helper C")
    }
    /// The line number (1-based) of the last line returned, for error messages.
    pub fn line_no(&self) -> u64 {
        todo!("issue 21 helper C")
    }
}
