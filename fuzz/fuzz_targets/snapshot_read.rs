//! Fuzz target: any bytes as a snapshot file (verbatim, or built from a header, page bytes and
//! a dirty bitmap: `src/snapshot.rs`), read with the reader's checks and a memory budget, and
//! small ones reconstructed and checked. A panic, an abort or a timeout is a crash.
#![no_main]

include!("../src/snapshot.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = snapshot_run(data);
});
