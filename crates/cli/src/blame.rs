//! `fraglab blame RESULT.json`: the sources of a result's `blame` section, ranked (issue 37,
//! docs/blame.md).

use std::path::Path;

use fraglab_spec::result::blame::{csv, ranked, table};
use fraglab_spec::result::RunResult;

pub fn blame(path: &Path, format: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let r: RunResult = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
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
        "table" => table(&v),
        f => return Err(format!("--format {f}: expected table, json or csv")),
    };
    crate::run::print_to_stdout(&out)
}
