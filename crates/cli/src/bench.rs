//! `fraglab bench`: the standard performance figures in one run (issue "experiments", item 5;
//! issue 22, item 4 for the scale figures). Each figure is measured here, on this host, when the
//! command runs; nothing is cached.
//!
//! The scale figures (the whole `kbuild-thp.toml`, the 256 GiB kbuild, the 1 TiB server, the
//! growth of CPU time with memory) each run `fraglab run SPEC` in a child process (the current
//! executable) and reap it with `wait4`, whose `rusage` gives that run's own peak RSS
//! (`ru_maxrss`) and CPU time. In-process, `VmHWM` never falls: a second run's peak would be
//! hidden under the first's, and the bench's own allocations would be counted with it.
//! `ru_maxrss` has one catch: exec records the old address space's high-water mark, and the
//! child is spawned sharing the bench's (vfork-style), so the figure is at least the bench's
//! own peak at the spawn. `fraglab bench` therefore runs its children before anything
//! in-process, and a row whose peak does not exceed the bench's own says so.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use fraglab_mm::{Gfp, MachineConfig, Mm, Tunables};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One row of the table (and of `--format json`'s `rows`).
#[derive(serde::Serialize)]
pub struct Row {
    /// A stable name for scripts (`scale_256g.sim_per_wall`, ...).
    pub key: String,
    pub what: String,
    pub value: f64,
    pub unit: &'static str,
    pub how: String,
}

fn machine(bytes: u64) -> Mm {
    Mm::new(
        &MachineConfig::x86_64(bytes, true, 2).expect("a valid machine"),
        Tunables::default(),
    )
    .expect("boots")
}

/// Order-0 GFP_KERNEL allocate + free pairs through the PCP lists, and order-0/3/9 mixed
/// allocations freed in random order (buddy merges, fallbacks), on a 4 GiB machine.
fn alloc_free() -> Vec<Row> {
    let mut mm = machine(4 << 30);
    let n = 2_000_000u64;
    let t = Instant::now();
    for _ in 0..n {
        let p = mm.alloc_pages(0, Gfp::GFP_KERNEL, 0).expect("memory");
        mm.free_pages(0, p, 0);
    }
    let pcp = n as f64 / t.elapsed().as_secs_f64();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut live: Vec<(u32, u32)> = Vec::new();
    let mut ops = 0u64;
    let t = Instant::now();
    for _ in 0..400_000 {
        if live.len() < 200_000 && rng.gen_bool(0.55) {
            let (gfp, order) = match rng.gen_range(0..10) {
                0 => (Gfp::GFP_KERNEL, 0),
                1 => (Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE), 0),
                2 => (Gfp::GFP_HIGHUSER_MOVABLE, 3),
                3 => (Gfp::GFP_TRANSHUGE_LIGHT, 9),
                _ => (Gfp::GFP_HIGHUSER_MOVABLE, 0),
            };
            if let Some(p) = mm.alloc_pages(0, gfp, order) {
                live.push((p, order));
            }
        } else if !live.is_empty() {
            let i = rng.gen_range(0..live.len());
            let (p, o) = live.swap_remove(i);
            mm.free_pages(0, p, o);
        }
        ops += 1;
    }
    let mixed = ops as f64 / t.elapsed().as_secs_f64();
    vec![
        Row {
            key: "core.pcp_pairs_per_s".into(),
            what: "alloc+free, order 0, PCP".into(),
            value: pcp,
            unit: "pairs/s",
            how: format!("{n} alloc_pages/free_pages pairs, 4 GiB machine"),
        },
        Row {
            key: "core.mixed_ops_per_s".into(),
            what: "alloc or free, mixed orders".into(),
            value: mixed,
            unit: "ops/s",
            how: "400,000 random ops: orders 0/3/9, three migratetypes, random frees".into(),
        },
    ]
}

/// compact_memory on a 4 GiB machine filled with movable order-0 pages, every other one freed.
fn compaction() -> Row {
    let mut mm = machine(4 << 30);
    let mut folios = Vec::new();
    while let Some(id) = mm.alloc_folio(
        0,
        Gfp::GFP_HIGHUSER_MOVABLE.union(Gfp::NORETRY),
        0,
        fraglab_mm::folio::FolioKind::Anon,
        false,
    ) {
        folios.push(id);
        if folios.len() as u64 >= mm.end_pfn() as u64 * 8 / 10 {
            break;
        }
    }
    for id in folios.iter().step_by(2) {
        mm.free_folio(0, *id);
    }
    mm.drain_all_pages();
    let t = Instant::now();
    let st = mm.compact_memory();
    let secs = t.elapsed().as_secs_f64();
    Row {
        key: "core.compaction_pfns_per_s".into(),
        what: "compaction pfns scanned".into(),
        value: (st.migrate_scanned + st.free_scanned) as f64 / secs,
        unit: "pfns/s",
        how: format!(
            "compact_memory, 4 GiB, every other anon page freed: {} + {} pfns scanned, {} pages migrated in {:.3} s",
            st.migrate_scanned, st.free_scanned, st.migrated_pages, secs
        ),
    }
}

fn footprint() -> Row {
    let mm = machine(64 << 30);
    Row {
        key: "core.host_bytes_per_page".into(),
        what: "host memory per simulated page".into(),
        value: mm.host_bytes() as f64 / mm.end_pfn() as f64,
        unit: "bytes",
        how: "per-page arrays + pageblock bits of a 64 GiB machine (Mm::host_bytes), before any folio".into(),
    }
}

/// Simulated seconds per wall second of a spec (run once).
pub fn sim_ratio(key: &str, label: &str, spec: &fraglab_spec::Spec) -> Result<Row, String> {
    let t = Instant::now();
    let r = fraglab_sim::timed::run_workload(spec).map_err(|e| e.to_string())?;
    let wall = t.elapsed().as_secs_f64();
    let sim = r.duration_ns as f64 / 1e9;
    Ok(Row {
        key: format!("experiments.{key}.sim_per_wall"),
        what: format!("simulated/wall: {label}"),
        value: sim / wall,
        unit: "x",
        how: format!("{sim:.1} s simulated in {wall:.2} s"),
    })
}

pub fn core_rows() -> Vec<Row> {
    let mut rows = alloc_free();
    rows.push(compaction());
    rows.push(footprint());
    rows
}

pub fn format(rows: &[Row]) -> String {
    let mut out = format!("{:<52} {:>14} {:<6} {}\n", "figure", "value", "unit", "how");
    for r in rows {
        out.push_str(&format_line(r));
    }
    out
}

/// What one child `fraglab run` measured.
#[derive(Clone, Debug)]
pub struct ChildRun {
    /// Simulated seconds (the result's `duration_ns`).
    pub sim_s: f64,
    pub wall_s: f64,
    /// User + system CPU seconds of the child.
    pub cpu_s: f64,
    /// The child's peak resident set (`ru_maxrss`), bytes.
    pub peak_rss: u64,
    /// The bench's own peak (`VmHWM`) when it spawned the child: a floor under `peak_rss`.
    pub spawn_floor: u64,
}

/// Runs `fraglab run` on `spec_text` in a child process (the current executable), its result
/// JSON to a temporary file, its report discarded, its stderr (errors; a progress bar on a
/// terminal) passed through; reaps it with `wait4` for its own peak RSS and CPU time.
pub fn run_child(tag: &str, spec_text: &str) -> Result<ChildRun, String> {
    let base: PathBuf = std::env::temp_dir().join(format!("fraglab-bench-{}-{tag}", std::process::id()));
    let spec = base.with_extension("toml");
    let out = base.with_extension("json");
    std::fs::write(&spec, spec_text).map_err(|e| format!("{}: {e}", spec.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    let spawn_floor = own_hwm();
    let t = Instant::now();
    let child = Command::new(exe)
        .arg("run")
        .arg(&spec)
        .arg("-o")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("fraglab run {}: {e}", spec.display()))?;
    let (status, ru) = wait4(child.id())?;
    let wall_s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&spec);
    let json = std::fs::read_to_string(&out);
    let _ = std::fs::remove_file(&out);
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("{tag}: fraglab run failed (wait status {status:#x})"));
    }
    let json = json.map_err(|e| format!("{}: {e}", out.display()))?;
    let v: serde_json::Value = serde_json::from_str(&json).map_err(|e| format!("{tag}: {e}"))?;
    let sim_ns = v["duration_ns"]
        .as_u64()
        .ok_or_else(|| format!("{tag}: result has no duration_ns"))?;
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(ChildRun {
        sim_s: sim_ns as f64 / 1e9,
        wall_s,
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
        // Linux reports ru_maxrss in KiB.
        peak_rss: ru.ru_maxrss.max(0) as u64 * 1024,
        spawn_floor,
    })
}

/// This process's peak resident set (`VmHWM` of /proc/self/status), bytes; 0 if unreadable.
fn own_hwm() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

impl ChildRun {
    /// How the peak RSS was read, and whether it is only the bench's own floor.
    fn rss_how(&self) -> String {
        if self.peak_rss <= self.spawn_floor {
            format!(
                "ru_maxrss of the child (wait4): AT MOST this, the bench's own peak at the spawn ({:.0} MiB) hides the child's",
                self.spawn_floor as f64 / (1 << 20) as f64
            )
        } else {
            "ru_maxrss of the child (wait4)".into()
        }
    }
}

/// `wait4(pid)`: the child's wait status and resource usage (its own, not its siblings').
fn wait4(pid: u32) -> Result<(i32, libc::rusage), String> {
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it and `status` for our own child `pid`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers to the locals above.
        let r = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut ru) };
        if r == pid as libc::pid_t {
            return Ok((status, ru));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4: {e}"));
        }
    }
}

/// Sets `workload.duration` of a spec's text (the cap of a scale figure).
pub fn with_duration(text: &str, dur: &str) -> Result<String, String> {
    fraglab_spec::apply_overrides(text, &[("workload.duration".into(), format!("{dur:?}"))])
}

/// Simulated pages of a machine of `memory` bytes.
fn pages(memory: u64) -> f64 {
    (memory / 4096) as f64
}

/// The rows of one child run: simulated/wall, simulated/CPU, CPU seconds, peak RSS and bytes
/// per simulated page at peak RSS.
pub fn child_rows(key: &str, label: &str, memory: u64, r: &ChildRun) -> Vec<Row> {
    let how = format!(
        "{:.1} s simulated in {:.1} s wall, {:.1} s CPU (child fraglab run)",
        r.sim_s, r.wall_s, r.cpu_s
    );
    vec![
        Row {
            key: format!("{key}.sim_per_wall"),
            what: format!("simulated/wall: {label}"),
            value: r.sim_s / r.wall_s.max(1e-9),
            unit: "x",
            how: how.clone(),
        },
        Row {
            key: format!("{key}.sim_per_cpu"),
            what: format!("simulated/CPU: {label}"),
            value: r.sim_s / r.cpu_s.max(1e-9),
            unit: "x",
            how: "simulated seconds per CPU second of the child (wall time is what a busy host \
                  makes it; CPU time is not)"
                .into(),
        },
        Row {
            key: format!("{key}.cpu_s"),
            what: format!("CPU time: {label}"),
            value: r.cpu_s,
            unit: "s",
            how,
        },
        Row {
            key: format!("{key}.peak_rss_mib"),
            what: format!("peak RSS: {label}"),
            value: r.peak_rss as f64 / (1 << 20) as f64,
            unit: "MiB",
            how: r.rss_how(),
        },
        Row {
            key: format!("{key}.bytes_per_page"),
            what: format!("bytes per simulated page at peak RSS: {label}"),
            value: r.peak_rss as f64 / pages(memory),
            unit: "bytes",
            how: format!("peak RSS / {} pages; {}", memory / 4096, r.rss_how()),
        },
    ]
}

/// The kbuild + THP bursts of seed 001 (`experiments/defrag-mode/kbuild-thp.toml`, 2 GiB, 4
/// CPUs) scaled to `gib` GiB, as `experiments/scale/kbuild-256g.toml` is at 256: CPUs =
/// memory / 4 GiB (at least 2), make -j2×CPUs, and every per-job size scaled so that the running
/// jobs' anonymous memory stays 19 % of memory and the page operations per simulated second
/// grow in proportion to memory; `source` 1.5 × memory, swap = memory, THP bursts of 1/8 of
/// memory every 2 s. Runs for `duration`.
pub fn scaled_kbuild(gib: u64, duration: &str) -> String {
    let cpus = (gib / 4).max(2);
    let jp = 2 * cpus;
    // Per-job size factor against the seed: (memory / 2 GiB) / (jobs_parallel / 8).
    let kib = |seed_kib: u64| seed_kib * 4 * gib / jp;
    let jobs = (150 * jp).div_ceil(8);
    format!(
        r#"# kbuild-thp.toml scaled to {gib} GiB (fraglab bench's scaled_kbuild)
name = "scale-kbuild-{gib}g"

[machine]
memory = "{gib}GiB"
cpus = {cpus}
swap = "{gib}GiB"

[knobs]
"transparent_hugepage/enabled" = "madvise"
"transparent_hugepage/defrag" = "madvise"
"vm.defrag_mode" = 0

[run]
seed = 1

[workload]
duration = "{duration}"

[[workload.kbuild]]
jobs_parallel = {jp}
jobs = {jobs}
iterations = 15
job_anon = "{anon}KiB"
job_cpu = "300ms"
source = "{source}MiB"
job_read = "{read}KiB"
job_slab = "{slab}KiB"
job_obj = "{obj}KiB"

[[workload.thp_burst]]
interval = "2s"
size = "{burst}MiB"
hold = "1s"
bursts = 2000
start = "1s"
"#,
        anon = kib(48 * 1024),
        source = 1536 * gib,
        read = kib(16 * 1024),
        slab = kib(512),
        obj = kib(256),
        burst = 128 * gib,
    )
}

/// The least-squares slope of ln(y) against ln(x): the exponent `b` of `y ≈ a·x^b`. `None`
/// with fewer than two distinct x or a non-positive value.
pub fn loglog_slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.iter().any(|&(x, y)| x <= 0.0 || y <= 0.0) {
        return None;
    }
    let n = points.len() as f64;
    let (lx, ly): (Vec<f64>, Vec<f64>) = points.iter().map(|&(x, y)| (x.ln(), y.ln())).unzip();
    let mx = lx.iter().sum::<f64>() / n;
    let my = ly.iter().sum::<f64>() / n;
    let sxx: f64 = lx.iter().map(|x| (x - mx) * (x - mx)).sum();
    let sxy: f64 = lx.iter().zip(&ly).map(|(x, y)| (x - mx) * (y - my)).sum();
    (sxx > 1e-12).then(|| sxy / sxx)
}

/// Item 4: the scaled kbuild at each size for `duration` of simulated time, CPU seconds each
/// (boot included), and the fitted exponent of CPU time against memory.
pub fn growth(sizes: &[u64], duration: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let mut points = Vec::new();
    for &gib in sizes {
        eprintln!("bench: growth, {gib} GiB for {duration} simulated ...");
        let r = run_child(&format!("growth-{gib}g"), &scaled_kbuild(gib, duration))?;
        points.push((gib as f64, r.cpu_s));
        let row = Row {
            key: format!("growth.{gib}g.cpu_s"),
            what: format!("CPU time: scaled kbuild, {gib} GiB, {duration}"),
            value: r.cpu_s,
            unit: "s",
            how: format!(
                "{:.1} s wall, {:.2}x real time, peak RSS {:.0} MiB ({:.1} bytes/page){}",
                r.wall_s,
                r.sim_s / r.wall_s.max(1e-9),
                r.peak_rss as f64 / (1 << 20) as f64,
                r.peak_rss as f64 / pages(gib << 30),
                if r.peak_rss <= r.spawn_floor {
                    " AT MOST: the bench's own peak hides the child's"
                } else {
                    ""
                }
            ),
        };
        eprint!("{}", format_line(&row));
        rows.push(row);
    }
    let slope = loglog_slope(&points);
    let row = Row {
        key: "growth.exponent".into(),
        what: "CPU time growth with memory (log-log slope)".into(),
        value: slope.unwrap_or(f64::NAN),
        unit: "exp",
        how: format!("least squares of ln(CPU s) on ln(GiB) over {:?} GiB", sizes),
    };
    eprint!("{}", format_line(&row));
    rows.push(row);
    Ok(rows)
}

/// One row in the table's layout (three decimals below 10, one above).
pub fn format_line(r: &Row) -> String {
    let v = if r.value.abs() < 10.0 {
        format!("{:.3}", r.value)
    } else {
        format!("{:.1}", r.value)
    };
    format!("{:<52} {:>14} {:<6} {}\n", r.what, v, r.unit, r.how)
}

/// `--format json`: `{"version": ..., "rows": [{key, what, value, unit, how}, ...]}` (a NaN value,
/// an exponent that could not be fitted, is `null`).
pub fn json(rows: &[Row]) -> String {
    let v = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "rows": rows,
    });
    serde_json::to_string_pretty(&v).expect("rows serialize") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loglog_slope_fits_power_laws() {
        let pts: Vec<(f64, f64)> = [1.0, 16.0, 64.0, 256.0]
            .iter()
            .map(|&x: &f64| (x, 3.0 * x.powf(1.05)))
            .collect();
        assert!((loglog_slope(&pts).unwrap() - 1.05).abs() < 1e-9);
        let flat = [(1.0, 2.0), (4.0, 2.0)];
        assert!(loglog_slope(&flat).unwrap().abs() < 1e-12);
        // Noise around y = x²: the slope is the least-squares one, between the pairwise ones.
        let noisy = [(1.0, 1.1), (2.0, 3.9), (4.0, 16.5)];
        let s = loglog_slope(&noisy).unwrap();
        assert!((1.9..2.1).contains(&s), "{s}");
        assert_eq!(loglog_slope(&[(2.0, 1.0)]), None);
        assert_eq!(loglog_slope(&[(2.0, 1.0), (2.0, 3.0)]), None);
        assert_eq!(loglog_slope(&[(1.0, 0.0), (2.0, 3.0)]), None);
    }

    #[test]
    fn scaled_kbuild_at_256_gib_is_the_experiment_spec() {
        let file = fraglab_spec::parse_spec(
            include_str!("../../../experiments/scale/kbuild-256g.toml"),
            "kbuild-256g.toml",
        )
        .unwrap();
        let gen = fraglab_spec::parse_spec(&scaled_kbuild(256, "2h"), "gen.toml").unwrap();
        assert_eq!(file.machine.memory_bytes, gen.machine.memory_bytes);
        assert_eq!(file.machine.cpus, gen.machine.cpus);
        assert_eq!(file.machine.swap_bytes, gen.machine.swap_bytes);
        assert_eq!(file.knobs, gen.knobs);
        let (mut a, mut b) = (file.workload.unwrap(), gen.workload.unwrap());
        for k in a.kbuild.iter_mut().chain(b.kbuild.iter_mut()) {
            k.line = 0;
        }
        for t in a.thp_burst.iter_mut().chain(b.thp_burst.iter_mut()) {
            t.line = 0;
        }
        assert_eq!(a.kbuild, b.kbuild);
        assert_eq!(a.thp_burst, b.thp_burst);
        assert_eq!(a.duration_ns, b.duration_ns);
        // At 1 GiB: the seed's per-job sizes, half its jobs and CPUs.
        let two = fraglab_spec::parse_spec(&scaled_kbuild(1, "1s"), "one.toml").unwrap();
        let k = &two.workload.unwrap().kbuild[0];
        assert_eq!((k.jobs_parallel, k.job_anon_bytes), (4, 48 << 20));
    }
}
