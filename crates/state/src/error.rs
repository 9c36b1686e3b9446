//! Errors reading or writing a state file: they name the file and, for a bad byte, its offset.

use std::fmt;
use std::path::{Path, PathBuf};

/// A state or trace file could not be read or written.
#[derive(Debug)]
pub struct StateError {
    pub path: PathBuf,
    /// Byte offset in the file where the problem is (None: the file as a whole, e.g. open).
    pub offset: Option<u64>,
    pub msg: String,
}

impl StateError {
    pub fn new(path: &Path, offset: Option<u64>, msg: impl Into<String>) -> StateError {
        StateError {
            path: path.to_path_buf(),
            offset,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{}: at byte offset {o}: {}", self.path.display(), self.msg),
            None => write!(f, "{}: {}", self.path.display(), self.msg),
        }
    }
}

impl std::error::Error for StateError {}
