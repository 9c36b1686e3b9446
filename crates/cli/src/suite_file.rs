//! The files of a validation suite: DIR/suite.toml (`[[scenario]]`s) and DIR/diagnoses.toml,
//! parsed and checked before anything runs. Shared (by `#[path]`) with the fuzz target
//! `suite_toml` (fuzz/fuzz_targets/suite_toml.rs) and its stable corpus test, so it uses only
//! serde and toml.

use serde::Deserialize;

/// The most runs of one scenario (suite.toml's `runs`, `validate --runs`): compare's bound
/// (`compare::MAX_RUNS`), for the same reason — every run's result is held until the scoring.
pub const MAX_SUITE_RUNS: u32 = 10_000;

/// The largest suite.toml or diagnoses.toml read (the repository's are a few KiB).
pub const MAX_SUITE_FILE_BYTES: usize = 1 << 20;

/// DIR/suite.toml.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteFile {
    #[serde(default)]
    pub scenario: Vec<ScenarioDef>,
}

/// One `[[scenario]]` of suite.toml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDef {
    pub name: String,
    /// The spec, relative to DIR, optionally with `@KEY=VALUE,...` overrides as in compare.
    pub spec: String,
    /// `host` (default) or a glob of recorded host result JSONs relative to DIR.
    #[serde(default = "host_word")]
    pub kernel: String,
    /// Run the host arm with `--fit-memory`.
    #[serde(default)]
    pub fit_memory: bool,
    /// Part of the CI slice (`--ci`).
    #[serde(default)]
    pub ci: bool,
    /// Runs of this scenario (default `--runs`; 1 to [`MAX_SUITE_RUNS`], checked by
    /// [`parse_suite`] with the key's line).
    pub runs: Option<toml::Spanned<u32>>,
    /// What the scenario models, for the README (one line).
    #[serde(default)]
    pub about: String,
    /// The same start on both engines: each kernel run captures this machine's page state
    /// right before its workers start (`HostOptions::capture_to`), and a simulator arm boots
    /// from each capture (seed for seed), beside the clean-boot arm. For every scenario that
    /// fragments, compacts or faults THPs: the kernel starts aged (sticky pageblock types,
    /// mixed blocks, page cache, slab), a clean boot does not.
    #[serde(default)]
    pub same_start: bool,
    /// With `same_start`: `"run"` (default) captures right before the kernel run's workers
    /// start, and the simulator runs the whole spec from it; `"measure"` captures when the
    /// measured part starts (the first `{ measure = true }` step), and the simulator runs only
    /// the measured part from it ([`measured_part_spec`]) — the tasks that ran before it, or
    /// beside it holding memory, are in the capture as their pages.
    #[serde(default = "run_word")]
    pub capture_at: String,
}

pub fn run_word() -> String {
    "run".into()
}

pub fn host_word() -> String {
    "host".into()
}

/// DIR/diagnoses.toml: one-line diagnoses of rows off by more than ×3.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagnosesFile {
    #[serde(default)]
    pub diagnosis: Vec<Diagnosis>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diagnosis {
    /// A scenario name, `*` for every scenario, or a pattern as `row`'s.
    pub scenario: String,
    /// A row name, a prefix ending in `*` or a suffix after `*`.
    pub row: String,
    pub text: String,
}

impl ScenarioDef {
    /// The scenario's own run count, if it sets one.
    pub fn runs(&self) -> Option<u32> {
        self.runs.as_ref().map(|r| *r.get_ref())
    }
}

/// The 1-based line of byte `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// `--runs` and suite.toml's `runs`: 1 to [`MAX_SUITE_RUNS`].
pub fn check_runs(runs: u32) -> Result<(), String> {
    if runs == 0 {
        return Err("runs = 0: at least 1 run (a scenario with no run scores nothing)".into());
    }
    if runs > MAX_SUITE_RUNS {
        return Err(format!(
            "runs = {runs}: at most {MAX_SUITE_RUNS} runs per scenario (every run's result is held until the scoring)"
        ));
    }
    Ok(())
}

/// Parses suite.toml's text (`path` names it in errors): its scenarios, each checked — `runs`
/// in bounds (with its line), `capture_at` a known word, names unique.
pub fn parse_suite(text: &str, path: &str) -> Result<Vec<ScenarioDef>, String> {
    if text.len() > MAX_SUITE_FILE_BYTES {
        return Err(format!(
            "{path}: {} bytes, more than a suite file's {MAX_SUITE_FILE_BYTES}",
            text.len()
        ));
    }
    let f: SuiteFile = toml::from_str(text).map_err(|e| format!("{path}: {e}"))?;
    let mut seen: Vec<&String> = Vec::new();
    for d in &f.scenario {
        if let Some(r) = &d.runs {
            check_runs(*r.get_ref()).map_err(|e| {
                format!(
                    "{path}:{}: scenario {:?}: {e}",
                    line_of(text, r.span().start),
                    d.name
                )
            })?;
        }
        if d.capture_at != "run" && d.capture_at != "measure" {
            return Err(format!(
                "{path}: scenario {:?}: capture_at = {:?} (expected \"run\" or \"measure\")",
                d.name, d.capture_at
            ));
        }
        if seen.contains(&&d.name) {
            return Err(format!("{path}: two scenarios named {:?}", d.name));
        }
        seen.push(&d.name);
    }
    Ok(f.scenario)
}

/// Parses diagnoses.toml's text (`path` names it in errors).
pub fn parse_diagnoses(text: &str, path: &str) -> Result<Vec<Diagnosis>, String> {
    if text.len() > MAX_SUITE_FILE_BYTES {
        return Err(format!(
            "{path}: {} bytes, more than a suite file's {MAX_SUITE_FILE_BYTES}",
            text.len()
        ));
    }
    let f: DiagnosesFile = toml::from_str(text).map_err(|e| format!("{path}: {e}"))?;
    Ok(f.diagnosis)
}
