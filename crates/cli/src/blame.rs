//! `fraglab blame RESULT.json`: the sources of a result's `blame` section, ranked (issue 37,
//! docs/blame.md). `fraglab blame SNAPSHOT` or `fraglab blame PAGE_OWNER_DUMP`: the live
//! kernel's mixed pageblocks by allocation stack, from page_owner (`fraglab_state::page_owner`).

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
    use fraglab_state::{container::has_magic, page_owner, snapshot};
    // The live side: a snapshot taken where the kernel has page_owner, or its dump itself.
    let live = if path.is_file() && has_magic(path, &snapshot::SNAPSHOT_MAGIC).map_err(|e| e.to_string())? {
        let h = snapshot::Snapshot::read_header(path).map_err(|e| e.to_string())?;
        Some(h.page_owner_blame.ok_or_else(|| {
            format!(
                "{}: a snapshot without page_owner (the kernel needs CONFIG_PAGE_OWNER, booted \
                 with page_owner=on, and debugfs mounted when `fraglab host snapshot` ran)",
                path.display()
            )
        })?)
    } else if starts_with(path, b"Page allocated via order ") {
        Some(page_owner::read_page_owner(path).map_err(|e| e.to_string())?)
    } else {
        None
    };
    if let Some(b) = live {
        let out = match format {
            "json" => serde_json::to_string_pretty(&b).map_err(|e| e.to_string())? + "\n",
            "csv" => page_owner::csv(&b),
            _ => page_owner::table(&b),
        };
        return crate::run::print_to_stdout(&out);
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

/// Whether the file at `path` begins with `prefix` (false if it cannot be read).
fn starts_with(path: &Path, prefix: &[u8]) -> bool {
    use std::io::Read;
    let mut buf = vec![0u8; prefix.len()];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok()
        && buf == prefix
}
