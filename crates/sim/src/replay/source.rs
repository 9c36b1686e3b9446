//! Where the replay's lines come from: one function, [`open`], behind which the trace file is
//! read line by line (never all in memory).
//!
//! Reads a plain ftrace text file (`cat /sys/kernel/tracing/trace`, `trace-cmd report`); comment
//! lines (`#`) are skipped but counted for line numbers.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::error::RunError;

/// What the recording says about itself (from a trace file's header; empty for plain text).
#[derive(Clone, Debug, Default)]
pub struct RecordingInfo {
    /// The events enabled ("kmem:mm_page_alloc", ...); empty when unknown.
    pub events: Vec<String>,
    /// /proc files at the end of the recording ("pagetypeinfo", "buddyinfo").
    pub proc_end: BTreeMap<String, String>,
}

/// A stream of trace lines.
pub struct Lines {
    path: PathBuf,
    reader: Box<dyn BufRead>,
    buf: Vec<u8>,
    line_no: u64,
    info: RecordingInfo,
}

/// Opens a trace for reading.
pub fn open(path: &Path) -> Result<Lines, RunError> {
    let f = std::fs::File::open(path).map_err(|e| RunError(format!("{}: {e}", path.display())))?;
    Ok(Lines {
        path: path.to_path_buf(),
        reader: Box::new(std::io::BufReader::with_capacity(1 << 20, f)),
        buf: Vec::with_capacity(256),
        line_no: 0,
        info: RecordingInfo::default(),
    })
}

impl Lines {
    pub fn info(&self) -> &RecordingInfo {
        &self.info
    }

    /// The line number (1-based) of the last line returned.
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next non-comment line (without its newline) with its line number; `None` at the end.
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>, RunError> {
        loop {
            self.buf.clear();
            let n = self
                .reader
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| RunError(format!("{}:{}: {e}", self.path.display(), self.line_no + 1)))?;
            if n == 0 {
                return Ok(None);
            }
            self.line_no += 1;
            while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
                self.buf.pop();
            }
            if self.buf.first() == Some(&b'#') || self.buf.is_empty() {
                continue;
            }
            break;
        }
        let n = self.line_no;
        std::str::from_utf8(&self.buf).map(|l| Some((n, l))).map_err(|_| {
            RunError(format!(
                "{}:{}: not UTF-8 text",
                self.path.display(),
                self.line_no
            ))
        })
    }
}
