//! `fraglab._native`: the Rust side of the `fraglab` Python package (python/fraglab). Every
//! function takes and returns plain text (spec TOML, result JSON, compare JSON); the Python side
//! turns them into pandas DataFrames. Simulations run with the GIL released, so Python threads
//! (the package's local sweeps) run them in parallel.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    fraglab,
    FraglabError,
    PyValueError,
    "An error of fraglab's: bad input (a spec, an override, a result file) or a run that could not complete. The message is fraglab's own (file, line, key where there are some)."
);
create_exception!(
    fraglab,
    SpecError,
    FraglabError,
    "A spec that could not be read, parsed or validated; `file`, `line` (0 when none) and `key` (or None) say where."
);

fn err(msg: impl Into<String>) -> PyErr {
    FraglabError::new_err(msg.into())
}

fn spec_err(py: Python<'_>, e: fraglab_spec::SpecError) -> PyErr {
    let pe = SpecError::new_err(e.to_string());
    let v = pe.value(py);
    // Attributes for programs; the message alone carries the same.
    let _ = v.setattr("file", e.file.clone());
    let _ = v.setattr("line", e.line);
    let _ = v.setattr("key", e.key.clone());
    pe
}

/// The spec of `fraglab.run`: `example:NAME`, an existing file, or TOML text (named
/// `<string>` in messages), with `KEY=VALUE` overrides as `compare`'s `@KEY=VALUE`.
fn load(py: Python<'_>, spec: &str, overrides: &[(String, String)]) -> PyResult<fraglab_spec::Spec> {
    if let Some(name) = spec.strip_prefix("example:") {
        let text = fraglab_spec::examples::example(name).map_err(err)?;
        let file = format!("examples/{name}.toml");
        return parse_text(py, text, &file, overrides);
    }
    let path = std::path::Path::new(spec);
    if !spec.contains('\n') && path.is_file() {
        return fraglab_spec::load_spec_with(path, overrides).map_err(|e| spec_err(py, e));
    }
    if !spec.contains('\n') && !spec.contains('=') && !spec.contains('[') {
        return Err(err(format!(
            "{spec}: no such file (a spec is a file, `example:NAME` or TOML text)"
        )));
    }
    parse_text(py, spec, "<string>", overrides)
}

fn parse_text(
    py: Python<'_>,
    text: &str,
    file: &str,
    overrides: &[(String, String)],
) -> PyResult<fraglab_spec::Spec> {
    if overrides.is_empty() {
        return fraglab_spec::parse_spec(text, file).map_err(|e| spec_err(py, e));
    }
    let list: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let name = format!("{file} [{}]", list.join(","));
    let text = fraglab_spec::apply_overrides(text, overrides)
        .map_err(|m| spec_err(py, fraglab_spec::SpecError::new(name.clone(), 0, None, m)))?;
    fraglab_spec::parse_spec(&text, &name).map_err(|e| spec_err(py, e))
}

/// Runs a spec. Returns `(kind, result JSON, printed text, warnings)`: for a timed run
/// (`"timed"`) the JSON `fraglab run -o` writes and the mmtests rows it prints; for a list of
/// operations (`"timeless"`) the result JSON `fraglab run -o x.json` writes
/// (`fraglab_sim::run_ops_result`) and the text its `print` operations produced. `warnings` are
/// the spec's (`Spec::warnings`: valid input that will not do what it seems to), which the
/// command line prints as `fraglab: warning: ...` lines.
#[pyfunction]
#[pyo3(signature = (spec, overrides, seed=None))]
fn run(
    py: Python<'_>,
    spec: &str,
    overrides: Vec<(String, String)>,
    seed: Option<u64>,
) -> PyResult<(String, String, String, Vec<String>)> {
    let mut spec = load(py, spec, &overrides)?;
    if let Some(s) = seed {
        spec.run.seed = s;
    }
    let warnings: Vec<String> = spec.warnings.iter().map(|w| w.to_string()).collect();
    if spec.workload.is_some() {
        let result = py
            .detach(|| fraglab_sim::timed::run_workload(&spec))
            .map_err(|e| err(e.to_string()))?;
        let json = serde_json::to_string_pretty(&result).map_err(|e| err(e.to_string()))? + "\n";
        let rows = fraglab_spec::result::rows::mmtests_rows(&result);
        Ok(("timed".into(), json, rows, warnings))
    } else {
        let result = py
            .detach(|| fraglab_sim::run_ops_result(&spec))
            .map_err(|e| err(e.to_string()))?;
        let text = result.printed.clone().unwrap_or_default();
        let json = serde_json::to_string_pretty(&result).map_err(|e| err(e.to_string()))? + "\n";
        Ok(("timeless".into(), json, text, warnings))
    }
}

/// Checks a compare configuration `[LABEL=]SPEC[@KEY=VALUE,...]` (a timed spec): its label.
#[pyfunction]
fn config_label(config: &str) -> PyResult<String> {
    let (label, spec) = fraglab_sim::compare::load_config(config).map_err(err)?;
    if spec.workload.is_none() {
        return Err(err(format!(
            "{config}: compare needs a spec with a [workload] (a timed run)"
        )));
    }
    Ok(label)
}

/// One run of a sweep: configuration `config`'s run `run` (0-based; seed = the spec's + run, as
/// `fraglab compare --runs`), as the result JSON `compare --results-dir` writes.
#[pyfunction]
fn run_config(py: Python<'_>, config: &str, run: u64) -> PyResult<String> {
    let (_, mut spec) = fraglab_sim::compare::load_config(config).map_err(err)?;
    if spec.workload.is_none() {
        return Err(err(format!(
            "{config}: compare needs a spec with a [workload] (a timed run)"
        )));
    }
    spec.run.seed = spec.run.seed.wrapping_add(run);
    let result = py
        .detach(|| fraglab_sim::timed::run_workload(&spec))
        .map_err(|e| err(e.to_string()))?;
    Ok(serde_json::to_string_pretty(&result).map_err(|e| err(e.to_string()))? + "\n")
}

/// The compare table (`fraglab compare --format json`) of result JSONs `(label, source, json)`,
/// merged as `fraglab compare --from` merges result files
/// (`fraglab_sim::compare::merge_results`).
#[pyfunction]
#[pyo3(signature = (results, baseline=None))]
fn compare_results(
    py: Python<'_>,
    results: Vec<(String, String, String)>,
    baseline: Option<String>,
) -> PyResult<String> {
    let report = py.detach(|| -> Result<String, String> {
        let mut files = Vec::with_capacity(results.len());
        for (label, source, json) in &results {
            files.push(fraglab_sim::compare::ResultSource {
                label: label.clone(),
                source: source.clone(),
                result: fraglab_sim::compare::parse_result(json, source)?,
            });
        }
        let (labels, runs) = fraglab_sim::compare::merge_results(files, baseline.as_deref())?;
        let report = fraglab_sim::compare::compare(&labels, &runs);
        Ok(serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n")
    });
    report.map_err(err)
}

/// The compare table of the result files in directories (`fraglab compare --from DIR...`).
#[pyfunction]
#[pyo3(signature = (dirs, baseline=None))]
fn compare_dirs(py: Python<'_>, dirs: Vec<std::path::PathBuf>, baseline: Option<String>) -> PyResult<String> {
    let report = py.detach(|| -> Result<String, String> {
        let files = fraglab_sim::compare::read_result_dirs(&dirs)?;
        let (labels, runs) = fraglab_sim::compare::merge_results(files, baseline.as_deref())?;
        let report = fraglab_sim::compare::compare(&labels, &runs);
        Ok(serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n")
    });
    report.map_err(err)
}

/// The built-in examples' names.
#[pyfunction]
fn examples() -> Vec<&'static str> {
    fraglab_spec::examples::EXAMPLES.iter().map(|(n, _)| *n).collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("FraglabError", m.py().get_type::<FraglabError>())?;
    m.add("SpecError", m.py().get_type::<SpecError>())?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(config_label, m)?)?;
    m.add_function(wrap_pyfunction!(run_config, m)?)?;
    m.add_function(wrap_pyfunction!(compare_results, m)?)?;
    m.add_function(wrap_pyfunction!(compare_dirs, m)?)?;
    m.add_function(wrap_pyfunction!(examples, m)?)?;
    Ok(())
}
