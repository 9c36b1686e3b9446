//! Fuzz target: any text as a validation suite's suite.toml and diagnoses.toml, through the
//! CLI's own parsers (crates/cli/src/suite_file.rs; `src/suite_toml.rs`). A panic, an abort or
//! a timeout is a crash.
#![no_main]

#[path = "../../crates/cli/src/suite_file.rs"]
#[allow(dead_code)]
mod suite_file;

include!("../src/suite_toml.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = suite_toml(data);
});
