// The suite-file fuzz target's work, shared (by `include!`) with the stable corpus test
// (crates/cli/tests/fuzz_corpora.rs): any text as suite.toml and as diagnoses.toml, through
// `validate --suite`'s own parsers (crates/cli/src/suite_file.rs, a module `suite_file` in the
// including crate). A refusal is a message naming the file; a panic or an abort is a bug.

/// (suite.toml accepted, diagnoses.toml accepted).
fn suite_toml(data: &[u8]) -> (bool, bool) {
    let Ok(text) = std::str::from_utf8(data) else {
        return (false, false);
    };
    let suite = match suite_file::parse_suite(text, "suite.toml") {
        Ok(defs) => {
            for d in &defs {
                // Accepted run counts are in bounds.
                if let Some(r) = d.runs() {
                    assert!((1..=suite_file::MAX_SUITE_RUNS).contains(&r), "runs = {r} accepted");
                }
                assert!(d.capture_at == "run" || d.capture_at == "measure");
            }
            true
        }
        Err(e) => {
            assert!(e.starts_with("suite.toml"), "{e}");
            false
        }
    };
    let diagnoses = match suite_file::parse_diagnoses(text, "diagnoses.toml") {
        Ok(_) => true,
        Err(e) => {
            assert!(e.starts_with("diagnoses.toml"), "{e}");
            false
        }
    };
    (suite, diagnoses)
}
