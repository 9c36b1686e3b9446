//! The error of a run that could not complete.

/// A run that could not complete: names the spec file, line and op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunError(pub String);

impl RunError {
    /// The error of a run stopped by its cancellation flag
    /// ([`crate::timed::run_workload_cancellable`], [`crate::timeless::run_ops_result_cancellable`]):
    /// `FILE: interrupted`.
    pub fn interrupted(file: &str) -> RunError {
        RunError(format!("{file}: interrupted"))
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RunError {}
