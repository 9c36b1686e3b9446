//! Fuzz target: any bytes as a spec file, parsed and (when small) booted and run briefly
//! (`src/short.rs`). A panic, an abort or a timeout is a crash.
#![no_main]

include!("../src/short.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The spec loader reads bytes as UTF-8 (`load_spec` refuses other bytes with a message).
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = short_run(text);
    }
});
