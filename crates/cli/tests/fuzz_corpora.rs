//! The stable half of issue 34's fuzz targets: every file of each target's corpus
//! (fuzz/corpus/<target>) through the target's own entry point (fuzz/src/<target>.rs, included
//! here as the target includes it), asserting each ends in Ok or a clean refusal — no panic,
//! no abort — in bounded time, and that the hostile seeds are refused.

use std::path::PathBuf;
use std::time::{Duration, Instant};

#[path = "../src/suite_file.rs"]
#[allow(dead_code)]
mod suite_file;

include!("../../../fuzz/src/trace_replay.rs");
include!("../../../fuzz/src/result_json.rs");
include!("../../../fuzz/src/suite_toml.rs");
include!("../../../fuzz/src/overrides.rs");

/// The corpus files of `target`, sorted, with their bytes.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{}: {} files", dir.display(), files.len());
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// Runs `f` on every corpus file of `target`, each within 20 s; returns (name, outcome).
fn each<T: std::fmt::Debug>(target: &str, f: impl Fn(&[u8]) -> T) -> Vec<(String, T)> {
    corpus(target)
        .into_iter()
        .map(|(name, bytes)| {
            let t = Instant::now();
            let out = f(&bytes);
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "{target}/{name}: {:?}",
                t.elapsed()
            );
            (name, out)
        })
        .collect()
}

#[test]
fn trace_replay_corpus() {
    let outs = each("trace_replay", trace_replay);
    for (name, out) in &outs {
        if name.starts_with("hostile-") {
            assert_ne!(*out, TraceOutcome::Replayed, "{name} was replayed");
        }
    }
    let replayed = outs.iter().filter(|(_, o)| *o == TraceOutcome::Replayed).count();
    assert!(replayed >= 5, "{replayed} replayed: {outs:?}");
    // The reader alone refuses the files that are no trace.
    for (name, out) in &outs {
        if [
            "hostile-empty",
            "hostile-nul",
            "hostile-long-line",
            "hostile-container-binary",
        ]
        .iter()
        .any(|p| name.starts_with(p))
        {
            assert_eq!(*out, TraceOutcome::Refused, "{name}");
        }
    }
}

#[test]
fn result_json_corpus() {
    let outs = each("result_json", result_json);
    for (name, out) in &outs {
        match name.as_str() {
            n if n.starts_with("hostile-") => assert_eq!(*out, JsonOutcome::Refused, "{n}"),
            n if n.starts_with("compare-") => assert_eq!(*out, JsonOutcome::Compare, "{n}"),
            n => assert_eq!(*out, JsonOutcome::Result, "{n}"),
        }
    }
}

#[test]
fn suite_toml_corpus() {
    let outs = each("suite_toml", suite_toml);
    for (name, (suite, diagnoses)) in &outs {
        match name.as_str() {
            "validation-suite.toml" | "minimal-runs-1.toml" => assert!(*suite, "{name}"),
            "validation-diagnoses.toml" | "diagnosis-one.toml" => assert!(*diagnoses, "{name}"),
            "hostile-empty.toml" => assert!(*suite && *diagnoses, "an empty file is no scenario"),
            n if n.starts_with("hostile-") => assert!(!*suite && !*diagnoses, "{n}"),
            _ => {}
        }
    }
}

#[test]
fn overrides_corpus() {
    let outs = each("overrides", overrides);
    for (name, ok) in &outs {
        if name.starts_with("hostile-") {
            assert!(!*ok, "{name} was accepted");
        } else {
            assert!(*ok, "{name} was refused");
        }
    }
}
