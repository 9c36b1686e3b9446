//! Specs several test files run.

/// A 512 MiB, 2-CPU machine running a small kernel build (two iterations of 30 jobs, three at
/// a time) beside eight 32 MiB bursts of madvised THP faults. Placeholders: `SEED`, `RUN` (a
/// line of extra `[run]` keys, or empty) and `DURATION`.
pub const SMALL_BUILD: &str = r#"
name = "t"
[machine]
memory = "512MiB"
cpus = 2
[knobs]
"transparent_hugepage/enabled" = "madvise"
[run]
seed = SEED
RUN
[workload]
duration = "DURATION"
[[workload.kbuild]]
jobs_parallel = 3
jobs = 30
iterations = 2
job_anon = "8MiB"
job_cpu = "50ms"
source = "1GiB"
job_read = "24MiB"
[[workload.thp_burst]]
interval = "500ms"
size = "32MiB"
hold = "200ms"
bursts = 8
"#;

/// [`SMALL_BUILD`] with the given seed, extra `[run]` line and duration.
pub fn small_build(seed: &str, run: &str, duration: &str) -> String {
    SMALL_BUILD
        .replace("SEED", seed)
        .replace("RUN", run)
        .replace("DURATION", duration)
}
