//! Fuzz target: any bytes as a trace file (FRAGTRCE or plain ftrace text), read by
//! `TraceReader` and replayed on a small machine (`src/trace_replay.rs`). A panic, an abort or
//! a timeout is a crash.
#![no_main]

include!("../src/trace_replay.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = trace_replay(data);
});
