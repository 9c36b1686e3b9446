//! The one-line error every bad spec is reported with.

use std::fmt;

/// A spec that could not be read, parsed or validated.
///
/// Displays as one line: `spec.toml:14: key op[2].order: 11 is out of range (expected 0..=10)`,
/// or `spec.toml:7: TOML syntax error (column 3): invalid array: expected `]`` when the problem is
/// not tied to a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The file name as given to [`crate::parse_spec`] (or the path given to [`crate::load_spec`]).
    pub file: String,
    /// 1-based line of the offending key or value; 0 only when the file could not be read.
    pub line: usize,
    /// The key in dotted form (`machine.memory`, `op[2].order`, `knobs."vm.swappiness"`,
    /// `run.trace[1]`); `None` for TOML syntax and I/O errors.
    pub key: Option<String>,
    /// What is wrong and, where it helps, the expected form.
    pub message: String,
}

impl SpecError {
    pub fn new(
        file: impl Into<String>,
        line: usize,
        key: Option<String>,
        message: impl Into<String>,
    ) -> SpecError {
        SpecError {
            file: file.into(),
            line,
            key,
            message: message.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.file)?;
        if self.line > 0 {
            write!(f, "{}:", self.line)?;
        }
        if let Some(key) = &self.key {
            write!(f, " key {key}:")?;
        }
        write!(f, " {}", self.message)
    }
}

impl std::error::Error for SpecError {}
