// The trace fuzz target's work, shared (by `include!`) with the stable corpus test
// (crates/cli/tests/fuzz_corpora.rs): any bytes as a trace file (FRAGTRCE or plain ftrace text)
// read line by line with `TraceReader`, then replayed on a small machine. Every error must be a
// `StateError` or a `RunError`; a panic, an abort or a hang is a bug.

/// The machine the replay runs on (small: bounded work per input).
const TRACE_FUZZ_MACHINE: &str = "[machine]\nmemory = \"64MiB\"\ncpus = 2\n";

/// The most lines read per input (fuzz inputs are at most a few hundred KiB anyway).
const TRACE_FUZZ_MAX_LINES: u64 = 1 << 16;

/// What [`trace_replay`] did with the bytes.
#[derive(Debug, PartialEq, Eq)]
#[allow(dead_code)]
enum TraceOutcome {
    /// The reader refused the file (with a message naming it).
    Refused,
    /// Read, but the replay refused it (no event it reads, a malformed line).
    ReadOnly,
    /// Read and replayed.
    Replayed,
}

/// Writes `data` to a scratch file of this process and reads and replays it.
fn trace_replay(data: &[u8]) -> TraceOutcome {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "fraglab-fuzz-trace-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed) % 4
    ));
    std::fs::write(&path, data).expect("scratch file");
    let out = trace_replay_file(&path);
    let _ = std::fs::remove_file(&path);
    out
}

fn trace_replay_file(path: &std::path::Path) -> TraceOutcome {
    // The reader alone: every line, the summary counts.
    let Ok(mut r) = fraglab_state::trace::TraceReader::open_without_snapshot(path) else {
        return TraceOutcome::Refused;
    };
    let mut n = 0u64;
    loop {
        match r.next_line() {
            Ok(Some(l)) => {
                let _ = fraglab_state::trace::event_name(&l);
                let _ = fraglab_state::trace::line_pid(&l);
                let _ = fraglab_state::trace::lost_events_line(&l);
                let _ = fraglab_mm::trace::parse_trace_line(&l);
            }
            Ok(None) => break,
            Err(e) => {
                // Errors name the file.
                assert_eq!(e.path, path, "{e}");
                return TraceOutcome::Refused;
            }
        }
        n += 1;
        if n >= TRACE_FUZZ_MAX_LINES {
            return TraceOutcome::ReadOnly;
        }
    }
    // The replay on a small machine, the embedded snapshot (the snapshot reader's own fuzz
    // target's input) ignored.
    let policy = fraglab_sim::replay::Policy {
        label: "fuzz".into(),
        spec: fraglab_spec::parse_spec(TRACE_FUZZ_MACHINE, "fuzz.toml").expect("the fuzz machine parses"),
    };
    let opts = fraglab_sim::replay::ReplayOptions {
        snapshot: None,
        ignore_embedded: true,
    };
    match fraglab_sim::replay::replay_with(path, &[policy], &opts, &mut |_, _| {}) {
        Ok(rep) => {
            let _ = fraglab_sim::replay::format_text(&rep);
            TraceOutcome::Replayed
        }
        Err(_) => TraceOutcome::ReadOnly,
    }
}
