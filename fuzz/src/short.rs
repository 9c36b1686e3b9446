// The fuzz target's run, shared (by `include!`) with the stable corpus test
// (crates/sim/tests/all/fuzz_corpus.rs): parse a spec and, when it is small enough to run in a
// fraction of a second, boot it and run it briefly. Every error must be a `SpecError` or a
// `RunError`; a panic, an abort (an allocation failure) or a hang is a bug.

/// Memory of the machines the short run boots (larger ones are only parsed).
const SHORT_MAX_MEMORY: u64 = 256 << 20;
/// CPUs of the machines the short run boots.
const SHORT_MAX_CPUS: u32 = 8;
/// The longest simulated workload a short run runs (a longer one is cut to this).
const SHORT_MAX_NS: u64 = 20_000_000;
/// The pages the timeless ops of a short run may touch (allocations, reads, writes).
const SHORT_MAX_OP_PAGES: u64 = 1 << 16;
/// The ops a short run runs.
const SHORT_MAX_OPS: usize = 64;

/// What [`short_run`] did with a spec.
#[derive(Debug, PartialEq, Eq)]
#[allow(dead_code)]
enum Short {
    /// The spec was refused with a message.
    Refused,
    /// Parsed, but too large to run briefly.
    ParsedOnly,
    /// Parsed and run (the run may have ended with a `RunError`).
    Ran,
}

/// The pages op `op` asks for (an upper bound of its work).
fn op_pages(op: &fraglab_spec::Op) -> u64 {
    use fraglab_spec::Op;
    match op {
        Op::Alloc { count, order, .. } => (*count as u64) << order,
        Op::Fault { count, .. } => *count as u64 * 512,
        Op::Write { length, .. } | Op::Read { length, .. } => length.div_ceil(4096),
        Op::NrHugepages { count, .. } => count.saturating_mul(512),
        _ => 1,
    }
}

/// Parses `text`; if it is a spec of a small machine (no snapshot), runs it: its ops (at most
/// [`SHORT_MAX_OPS`], touching at most [`SHORT_MAX_OP_PAGES`] pages) or its workload cut to
/// [`SHORT_MAX_NS`] of simulated time.
fn short_run(text: &str) -> Short {
    let Ok(mut spec) = fraglab_spec::parse_spec(text, "fuzz.toml") else {
        return Short::Refused;
    };
    let m = &spec.machine;
    let memory = match (&m.zones, m.memory_bytes) {
        (Some(z), _) => z.iter().map(|z| z.end_pfn()).max().unwrap_or(0) * 4096,
        (None, Some(b)) => b,
        (None, None) => u64::MAX,
    };
    let op_pages: u64 = spec.ops.iter().map(op_pages).fold(0, u64::saturating_add);
    if m.snapshot.is_some()
        || memory > SHORT_MAX_MEMORY
        || m.cpus > SHORT_MAX_CPUS
        || m.hugetlb_pages > 128
        || spec.ops.len() > SHORT_MAX_OPS
        || op_pages > SHORT_MAX_OP_PAGES
    {
        return Short::ParsedOnly;
    }
    match spec.workload.as_mut() {
        Some(w) => {
            w.duration_ns = w.duration_ns.min(SHORT_MAX_NS);
            let _ = fraglab_sim::timed::run_workload(&spec);
        }
        None => {
            let _ = fraglab_sim::run_ops(&spec);
        }
    }
    Short::Ran
}
