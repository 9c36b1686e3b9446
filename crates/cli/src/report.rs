//! `fraglab report`: one self-contained HTML report of run results and a compare table.

use std::path::PathBuf;

use fraglab_state::textfile::{read_text, MAX_RESULT_BYTES};

use crate::write_via_tmp;

/// Reads the result JSONs (labelled by file stem) and the optional compare report, and writes
/// the HTML to `output`.
pub fn report(results: Vec<PathBuf>, compare: Option<PathBuf>, output: PathBuf) -> Result<(), String> {
    crate::check_output("-o", &output)?;
    let mut runs = Vec::new();
    for p in &result_files(&results)? {
        let text = read_text(p, MAX_RESULT_BYTES, "result JSON").map_err(|e| e.to_string())?;
        let r: fraglab_spec::result::RunResult =
            serde_json::from_str(&text).map_err(|e| format!("{}: not a fraglab result: {e}", p.display()))?;
        let label = p
            .file_stem()
            .map_or(p.display().to_string(), |s| s.to_string_lossy().into_owned());
        runs.push((label, r));
    }
    let cmp = match &compare {
        Some(p) => {
            let text = read_text(p, MAX_RESULT_BYTES, "result JSON").map_err(|e| e.to_string())?;
            Some(
                serde_json::from_str::<fraglab_spec::result::CompareReport>(&text)
                    .map_err(|e| format!("{}: not a compare report (--format json): {e}", p.display()))?,
            )
        }
        None => None,
    };
    let html = fraglab_report::render_html(&runs, cmp.as_ref());
    write_via_tmp(&output, html)
}

/// The result files named on the command line: a file as given; a directory (as `fraglab compare
/// --results-dir` writes one) stands for its `*.json` files but `compare.json`, in name order.
/// A directory without one is an error that says what was expected.
fn result_files(args: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in args {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|e| format!("{}: {e}", p.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| {
                f.is_file()
                    && f.extension().is_some_and(|x| x == "json")
                    && f.file_name().is_some_and(|n| n != "compare.json")
            })
            .collect();
        if found.is_empty() {
            return Err(format!(
                "{}: a directory without result files: expected result JSONs (`fraglab run SPEC -o \
                 RESULT.json`, or the LABEL-runN.json files of `fraglab compare --results-dir {}`), \
                 named one by one or by their directory",
                p.display(),
                p.display()
            ));
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}
