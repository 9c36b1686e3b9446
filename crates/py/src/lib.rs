//! `fraglab._native`: the Rust side of the `fraglab` Python package (python/fraglab). Every
//! function takes and returns plain text (spec TOML, result JSON, compare JSON); the Python side
//! turns them into pandas DataFrames. Simulations run with the GIL released, so Python threads
//! (the package's local sweeps) run them in parallel, and are interruptible: each runs on a
//! thread of its own while the calling thread checks for signals (Ctrl-C) every 50 ms and stops
//! it through its cancellation flag ([`interruptible`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
    "A spec that could not be read, parsed or validated; `file`, `line` and `key` (None where unknown) say where, `message` what is wrong."
);

fn err(msg: impl Into<String>) -> PyErr {
    FraglabError::new_err(msg.into())
}

/// A [`SpecError`] with the attributes `file`, `line` (None for 0: no line), `key` (None when
/// none; for an override that cannot apply, the override's key) and `message`; its text is
/// `shown`, else the spec error's own (`FILE:LINE: key KEY: MESSAGE`).
fn spec_err_shown(py: Python<'_>, e: fraglab_spec::SpecError, shown: Option<String>) -> PyErr {
    let pe = SpecError::new_err(shown.unwrap_or_else(|| e.to_string()));
    let key = e.key.clone().or_else(|| {
        // `apply_overrides`'s errors: "override KEY: why".
        let rest = e.message.strip_prefix("override ")?;
        rest.split_once(": ").map(|(k, _)| k.to_string())
    });
    let v = pe.value(py);
    // Attributes for programs; the message alone carries the same.
    let _ = v.setattr("file", e.file.clone());
    let _ = v.setattr("line", (e.line > 0).then_some(e.line));
    let _ = v.setattr("key", key);
    let _ = v.setattr("message", e.message.clone());
    pe
}

fn spec_err(py: Python<'_>, e: fraglab_spec::SpecError) -> PyErr {
    spec_err_shown(py, e, None)
}

fn config_err(py: Python<'_>, e: fraglab_sim::compare::ConfigError) -> PyErr {
    match e {
        fraglab_sim::compare::ConfigError::Spec { error, shown } => spec_err_shown(py, error, shown),
        fraglab_sim::compare::ConfigError::Config(m) => err(m),
    }
}

/// A cancellation flag for simulations started from other threads than the main one (the
/// package's local sweeps): `set()` stops every run it was given within milliseconds.
#[pyclass(frozen, module = "fraglab._native")]
struct Cancel {
    flag: Arc<AtomicBool>,
}

#[pymethods]
impl Cancel {
    #[new]
    fn new() -> Self {
        Cancel {
            flag: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Stops the runs given this flag (they end with an "interrupted" FraglabError).
    fn set(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }

    /// Whether `set()` was called.
    fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }
}

/// Runs `work` (a simulation given its cancellation flag) with the GIL released, on a thread of
/// its own, while this thread checks for signals every 50 ms. A signal handler that raises
/// (Ctrl-C: KeyboardInterrupt) sets the flag, waits for the simulation to stop (it reads the
/// flag after every event) and returns the handler's exception. `cancel` is the caller's flag
/// (for runs on threads other than the main one, where Python delivers no signal), else a new one.
/// Signals are only seen on the main thread; elsewhere only `cancel` stops the run.
fn interruptible<T: Send>(
    py: Python<'_>,
    cancel: Option<&Cancel>,
    work: impl FnOnce(&AtomicBool) -> T + Send,
) -> PyResult<T> {
    let flag = cancel.map_or_else(|| Arc::new(AtomicBool::new(false)), |c| c.flag.clone());
    py.detach(|| {
        std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            let f: &AtomicBool = &flag;
            // The stack the main thread gives a run that is called there (8 MiB).
            let handle = std::thread::Builder::new()
                .name("fraglab-run".into())
                .stack_size(8 << 20)
                .spawn_scoped(s, move || {
                    let _ = tx.send(work(f));
                })
                .map_err(|e| err(format!("cannot start the simulation's thread: {e}")))?;
            loop {
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(v) => return Ok(v),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        // The simulation panicked: go on panicking here, as it did when it ran on
                        // this thread (PyO3 turns it into a PanicException).
                        match handle.join() {
                            Err(p) => std::panic::resume_unwind(p),
                            Ok(()) => return Err(err("the simulation's thread ended without a result")),
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            flag.store(true, Ordering::Relaxed);
                            let _ = handle.join();
                            return Err(e);
                        }
                    }
                }
            }
        })
    })
}

/// The spec of `fraglab.run`: `example:NAME`, an existing file, or TOML text (named
/// `<string>` in messages), with `KEY=VALUE` overrides as `compare`'s `@KEY=VALUE`.
fn load(py: Python<'_>, spec: &str, overrides: &[(String, String)]) -> PyResult<fraglab_spec::Spec> {
    if let Some(name) = spec.strip_prefix("example:") {
        let file = format!("examples/{name}.toml");
        let text = fraglab_spec::examples::example(name).map_err(|m| {
            spec_err_shown(
                py,
                fraglab_spec::SpecError::new(&file, 0, None, m.clone()),
                Some(m),
            )
        })?;
        return parse_text(py, text, &file, overrides);
    }
    let path = std::path::Path::new(spec);
    if !spec.contains('\n') && path.is_file() {
        return fraglab_spec::load_spec_with(path, overrides).map_err(|e| spec_err(py, e));
    }
    if !spec.contains('\n') && !spec.contains('=') && !spec.contains('[') {
        let m = "no such file (a spec is a file, `example:NAME` or TOML text)";
        return Err(spec_err(py, fraglab_spec::SpecError::new(spec, 0, None, m)));
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
/// command line prints as `fraglab: warning: ...` lines. Interruptible ([`interruptible`]).
#[pyfunction]
#[pyo3(signature = (spec, overrides, seed=None, cancel=None))]
fn run(
    py: Python<'_>,
    spec: &str,
    overrides: Vec<(String, String)>,
    seed: Option<u64>,
    cancel: Option<PyRef<'_, Cancel>>,
) -> PyResult<(String, String, String, Vec<String>)> {
    let mut spec = load(py, spec, &overrides)?;
    if let Some(s) = seed {
        spec.run.seed = s;
    }
    let warnings: Vec<String> = spec.warnings.iter().map(|w| w.to_string()).collect();
    let cancel = cancel.as_deref();
    if spec.workload.is_some() {
        let result = interruptible(py, cancel, |c| {
            fraglab_sim::timed::run_workload_cancellable(&spec, &mut |_| {}, c)
        })?
        .map_err(|e| err(e.to_string()))?;
        let json = serde_json::to_string_pretty(&result).map_err(|e| err(e.to_string()))? + "\n";
        let rows = fraglab_spec::result::rows::mmtests_rows(&result);
        Ok(("timed".into(), json, rows, warnings))
    } else {
        let result = interruptible(py, cancel, |c| {
            fraglab_sim::timeless::run_ops_result_cancellable(&spec, &mut |_, _| {}, c)
        })?
        .map_err(|e| err(e.to_string()))?;
        let text = result.printed.clone().unwrap_or_default();
        let json = serde_json::to_string_pretty(&result).map_err(|e| err(e.to_string()))? + "\n";
        Ok(("timeless".into(), json, text, warnings))
    }
}

/// A compare configuration (a timed spec) loaded, or the error: a [`SpecError`] where the spec
/// is at fault.
fn load_timed_config(py: Python<'_>, config: &str) -> PyResult<(String, fraglab_spec::Spec)> {
    let (label, spec) = fraglab_sim::compare::load_config_detailed(config).map_err(|e| config_err(py, e))?;
    if spec.workload.is_none() {
        return Err(err(format!(
            "{config}: compare needs a spec with a [workload] (a timed run)"
        )));
    }
    Ok((label, spec))
}

/// Checks a compare configuration `[LABEL=]SPEC[@KEY=VALUE,...]` (a timed spec): its label and
/// the spec's warnings.
#[pyfunction]
fn config_label(py: Python<'_>, config: &str) -> PyResult<(String, Vec<String>)> {
    let (label, spec) = load_timed_config(py, config)?;
    Ok((label, spec.warnings.iter().map(|w| w.to_string()).collect()))
}

/// One run of a sweep: configuration `config`'s run `run` (0-based; seed = the spec's + run, as
/// `fraglab compare --runs`): the result JSON `compare --results-dir` writes, the mmtests rows
/// `fraglab run` prints, and the seed. Interruptible ([`interruptible`]).
#[pyfunction]
#[pyo3(signature = (config, run, cancel=None))]
fn run_config(
    py: Python<'_>,
    config: &str,
    run: u64,
    cancel: Option<PyRef<'_, Cancel>>,
) -> PyResult<(String, String, u64)> {
    let (_, mut spec) = load_timed_config(py, config)?;
    spec.run.seed = spec.run.seed.wrapping_add(run);
    let result = interruptible(py, cancel.as_deref(), |c| {
        fraglab_sim::timed::run_workload_cancellable(&spec, &mut |_| {}, c)
    })?
    .map_err(|e| err(e.to_string()))?;
    let json = serde_json::to_string_pretty(&result).map_err(|e| err(e.to_string()))? + "\n";
    let rows = fraglab_spec::result::rows::mmtests_rows(&result);
    Ok((json, rows, spec.run.seed))
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

/// The hooks a Python-defined policy may give, with their arguments (docs/policies.md).
const PY_HOOKS: &[&str] = &[
    "nofragment_everywhere",
    "kswapd_wake_order",
    "free_pageblock_watermarks",
    "compaction_isolates_large_folios",
    "split_large_folios_before_migration",
    "compaction_free_page_split",
    "pagecache_folio_gfp",
];

/// A policy whose hooks are Python callables (issue 37): each hook given calls its callable
/// (taking the GIL: slow, meant for prototypes on small machines); the others keep Linux
/// 6.18's behaviour. A hook that raises, or returns a value of the wrong type, ends the run
/// with a panic naming the policy and the hook (a `PanicException` in Python).
#[derive(Debug)]
struct PyPolicy {
    name: String,
    hooks: Arc<Vec<(&'static str, Py<PyAny>)>>,
}

impl PyPolicy {
    fn hook(&self, name: &str) -> Option<&Py<PyAny>> {
        self.hooks.iter().find(|(n, _)| *n == name).map(|(_, f)| f)
    }

    fn call<T: for<'a, 'py> pyo3::FromPyObject<'a, 'py>>(
        &self,
        hook: &str,
        f: &Py<PyAny>,
        args: impl for<'py> pyo3::call::PyCallArgs<'py>,
    ) -> T {
        Python::attach(|py| {
            let r = f
                .call1(py, args)
                .and_then(|v| v.extract::<T>(py).map_err(Into::into));
            match r {
                Ok(v) => v,
                Err(e) => panic!("policy {:?}: hook {hook} failed: {e}", self.name),
            }
        })
    }
}

impl fraglab_mm::policy::Policy for PyPolicy {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn save_state(&self) -> Result<Vec<u8>, String> {
        Err(format!(
            "policy {}: a Python policy keeps its state in Python objects, which a checkpoint cannot hold",
            self.name
        ))
    }
    fn nofragment_everywhere(&self, defrag_mode: bool) -> bool {
        match self.hook("nofragment_everywhere") {
            Some(f) => self.call("nofragment_everywhere", f, (defrag_mode,)),
            None => defrag_mode,
        }
    }
    fn kswapd_wake_order(&self, defrag_mode: bool, order: u32) -> u32 {
        match self.hook("kswapd_wake_order") {
            Some(f) => self.call("kswapd_wake_order", f, (defrag_mode, order)),
            None => fraglab_mm::policy::Kernel.kswapd_wake_order(defrag_mode, order),
        }
    }
    fn free_pageblock_watermarks(&self, defrag_mode: bool) -> bool {
        match self.hook("free_pageblock_watermarks") {
            Some(f) => self.call("free_pageblock_watermarks", f, (defrag_mode,)),
            None => defrag_mode,
        }
    }
    fn compaction_isolates_large_folios(&self) -> bool {
        match self.hook("compaction_isolates_large_folios") {
            Some(f) => self.call("compaction_isolates_large_folios", f, ()),
            None => true,
        }
    }
    fn split_large_folios_before_migration(&self) -> bool {
        match self.hook("split_large_folios_before_migration") {
            Some(f) => self.call("split_large_folios_before_migration", f, ()),
            None => false,
        }
    }
    fn compaction_free_page_split(&self) -> bool {
        match self.hook("compaction_free_page_split") {
            Some(f) => self.call("compaction_free_page_split", f, ()),
            None => true,
        }
    }
    fn pagecache_folio_gfp(
        &self,
        base: fraglab_mm::Gfp,
        hint: u32,
        order: u32,
        min_order: u32,
    ) -> fraglab_mm::Gfp {
        match self.hook("pagecache_folio_gfp") {
            Some(f) => fraglab_mm::Gfp(self.call("pagecache_folio_gfp", f, (base.0, hint, order, min_order))),
            None => fraglab_mm::policy::Kernel.pagecache_folio_gfp(base, hint, order, min_order),
        }
    }
}

/// Registers a policy whose hooks are the Python callables in `hooks` (hook name → callable)
/// under `name`, for `[model] policy = name` in this process. Unknown hook names and
/// non-callables are a `TypeError`; a bad or built-in name a `FraglabError`.
#[pyfunction]
#[pyo3(signature = (name, hooks, summary=""))]
fn register_policy(name: &str, hooks: Bound<'_, pyo3::types::PyDict>, summary: &str) -> PyResult<()> {
    let mut v: Vec<(&'static str, Py<PyAny>)> = Vec::new();
    for (k, f) in hooks.iter() {
        let k: String = k.extract()?;
        let Some(h) = PY_HOOKS.iter().find(|h| **h == k) else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "unknown policy hook {k:?}: one of {}",
                PY_HOOKS.join(", ")
            )));
        };
        if !f.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "hook {k}: not callable"
            )));
        }
        v.push((h, f.unbind()));
    }
    let hooks = Arc::new(v);
    let owned = name.to_string();
    fraglab_policies::register(name, summary, move || {
        Box::new(PyPolicy {
            name: owned.clone(),
            hooks: hooks.clone(),
        })
    })
    .map_err(err)
}

/// The mmtests rows of a timed run's result JSON (what `fraglab run` prints for it).
#[pyfunction]
fn result_rows(json: &str, source: &str) -> PyResult<String> {
    let r = fraglab_sim::compare::parse_result(json, source).map_err(err)?;
    Ok(fraglab_spec::result::rows::mmtests_rows(&r))
}

/// Every policy a spec may name: (name, origin, summary).
#[pyfunction]
fn policies() -> Vec<(String, String, String)> {
    fraglab_policies::list()
        .into_iter()
        .map(|p| (p.name, p.origin.to_string(), p.summary))
        .collect()
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
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<Cancel>()?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(config_label, m)?)?;
    m.add_function(wrap_pyfunction!(run_config, m)?)?;
    m.add_function(wrap_pyfunction!(compare_results, m)?)?;
    m.add_function(wrap_pyfunction!(compare_dirs, m)?)?;
    m.add_function(wrap_pyfunction!(examples, m)?)?;
    m.add_function(wrap_pyfunction!(register_policy, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(result_rows, m)?)?;
    m.add(
        "GFP",
        [
            ("DIRECT_RECLAIM", fraglab_mm::Gfp::DIRECT_RECLAIM.0),
            ("KSWAPD_RECLAIM", fraglab_mm::Gfp::KSWAPD_RECLAIM.0),
            ("NORETRY", fraglab_mm::Gfp::NORETRY.0),
            ("NOWARN", fraglab_mm::Gfp::NOWARN.0),
            ("RETRY_MAYFAIL", fraglab_mm::Gfp::RETRY_MAYFAIL.0),
            ("FS", fraglab_mm::Gfp::FS.0),
            ("IO", fraglab_mm::Gfp::IO.0),
            ("COMP", fraglab_mm::Gfp::COMP.0),
        ]
        .into_iter()
        .collect::<std::collections::BTreeMap<_, _>>(),
    )?;
    Ok(())
}
