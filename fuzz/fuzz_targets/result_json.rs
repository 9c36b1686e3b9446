//! Fuzz target: any bytes as a run result JSON (`compare --from`, `report`) and as a compare
//! report (`report --compare`), merged, compared and rendered (`src/result_json.rs`). A panic,
//! an abort or a timeout is a crash.
#![no_main]

include!("../src/result_json.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = result_json(data);
});
