//! `fraglab blame RESULT.json`: the sources of a result's `blame` section, ranked (issue 37,
//! docs/blame.md).

use std::path::Path;

use fraglab_spec::result::blame::{csv, ranked, table};
use fraglab_spec::result::RunResult;
use fraglab_state::textfile::{read_text, MAX_RESULT_BYTES};

/// Prints the ranked sources of the result at `path` in `format` (table, json or csv). A file
/// that is not a result (or too large for one, or not a regular file) and a result without a
/// blame section are errors naming the file and what was expected.
pub fn blame(path: &Path, format: &str) -> Result<(), String> {
    if !matches!(format, "table" | "json" | "csv") {
        return Err(format!("--format {format}: expected table, json or csv"));
    }
    let text = read_text(path, MAX_RESULT_BYTES, "result JSON").map_err(|e| e.to_string())?;
    let r: RunResult = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: not a fraglab result (`fraglab run -o RESULT.json`): {e}",
            path.display()
        )
    })?;
    let Some(sources) = r.blame.as_deref() else {
        return Err(format!(
            "{}: no blame section (run with `fraglab run --blame` or `[run] blame = true`)",
            path.display()
        ));
    };
    let v = ranked(sources);
    let out = match format {
        "json" => serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n",
        "csv" => csv(&v),
        _ => table(&v),
    };
    crate::run::print_to_stdout(&out)
}
