//! Where the replay's lines come from: [`open`], a [`fraglab_state::trace::TraceReader`] (a
//! FRAGTRCE trace file — header, embedded start snapshot, compressed text sections — or a plain
//! ftrace text file), read line by line, never all in memory. Comment and blank lines are
//! skipped but counted in line numbers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_state::snapshot::Snapshot;
use fraglab_state::trace::TraceReader;

use crate::error::RunError;

/// What the recording says about itself (from a trace file's header; empty for plain text).
#[derive(Clone, Debug, Default)]
pub struct RecordingInfo {
    /// The events enabled ("kmem:mm_page_alloc", ...); empty when unknown.
    pub events: Vec<String>,
    /// /proc files at the end of the recording ("pagetypeinfo", "buddyinfo").
    pub proc_end: BTreeMap<String, String>,
    /// Events the kernel dropped (per-CPU buffer overruns), from the header.
    pub lost_events: u64,
    /// The file embeds a start snapshot.
    pub has_snapshot: bool,
}

/// A stream of trace lines.
pub struct Lines {
    path: PathBuf,
    reader: TraceReader,
    line: String,
    info: RecordingInfo,
}

/// Opens a trace for reading; with `keep_snapshot`, the embedded start snapshot is read too
/// ([`Lines::take_snapshot`]), otherwise its sections are skipped.
pub fn open(path: &Path, keep_snapshot: bool) -> Result<Lines, RunError> {
    let reader = if keep_snapshot {
        TraceReader::open(path)
    } else {
        TraceReader::open_without_snapshot(path)
    }
    .map_err(|e| RunError(e.to_string()))?;
    let h = reader.header();
    let info = RecordingInfo {
        events: h.events.clone(),
        proc_end: h.proc_end.clone(),
        lost_events: h.lost_events,
        has_snapshot: h.snapshot.is_some(),
    };
    Ok(Lines {
        path: path.to_path_buf(),
        reader,
        line: String::new(),
        info,
    })
}

impl Lines {
    pub fn info(&self) -> &RecordingInfo {
        &self.info
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The embedded start snapshot (once; `None` without one or when opened without it).
    pub fn take_snapshot(&mut self) -> Option<Snapshot> {
        self.reader.take_snapshot()
    }

    /// The next non-comment line (without its newline) with its line number; `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>, RunError> {
        match self.reader.next_line().map_err(|e| RunError(e.to_string()))? {
            Some(l) => {
                self.line = l;
                Ok(Some((self.reader.line_no(), &self.line)))
            }
            None => Ok(None),
        }
    }
}
