//! Fuzz target: `@KEY=VALUE,...` overrides on a built-in example, as compare, validate and
//! replay take them (`src/overrides.rs`). A panic, an abort or a timeout is a crash.
#![no_main]

include!("../src/overrides.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = overrides(data);
});
