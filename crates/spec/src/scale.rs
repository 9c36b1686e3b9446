//! Scale models (issue 35, item 3): a spec's machine and workload divided by K, so a large
//! machine can be simulated as a K-times smaller one with every per-GiB pressure kept.
//!
//! `fraglab run --scale 1/K`, `fraglab compare --scale 1/K` and `[run] scale = "1/K"` give K; it
//! is never the default. K is a power of two from 2 to [`MAX_SCALE`]: the specs' sizes are
//! binary multiples (GiB, MiB), so a power of two divides memory, swap and the workloads' sizes
//! exactly, where K = 3 would round almost every figure and the pressure would only
//! approximately be kept. A figure K does not divide exactly is refused, naming it.
//!
//! What [`scale_spec`] does, per parameter (anything not listed stays as it is: times,
//! durations, per-process and per-request sizes, ratios and modes):
//!
//! | what | how |
//! |---|---|
//! | `machine.memory` (default layout) | ÷K; the scaled machine is booted normally, so the kernel's derived settings (zone layout, `min_free_kbytes` by its square root rule, watermarks, `lowmem_reserve`, PCP batch and high) are recomputed from the scaled memory as the kernel would |
//! | `[[machine.zone]]` | spanned, present, managed ÷K (present and managed rounded down: under a page per zone); the first zone keeps its start pfn, the gaps between zones ÷K |
//! | `machine.cpus`, `machine.swap`, `machine.hugetlb_pages` | ÷K (exactly) |
//! | `machine.nodes`, `[[machine.node]]` | each node's memory and CPUs ÷K (exactly; a node without CPUs keeps none) |
//! | `machine.snapshot` | refused: the snapshot is a captured state of the full machine |
//! | `[[op]]`s (a timeless run) | refused: the ops are absolute, one by one |
//! | `vm.min_free_kbytes` (given) | ÷K, at least 128 (the knob's minimum) |
//! | `transparent_hugepage/khugepaged/pages_to_scan` (given) | ÷K: khugepaged's scan rate per GiB kept |
//! | other knobs | kept: ratios, fractions, times and modes |
//! | `[cost] write_io_ns` (given or the default) | ×K: the writeback device is one queue the whole machine shares, so its bandwidth per GiB is kept |
//! | other `[cost]` keys | kept: CPU times per operation and per-request latencies |
//! | `[damon]` `quota_bytes`, `sz_min`, `sz_max` | ÷K; `regions` (physical addresses) refused |
//! | kbuild | `jobs_parallel`, `jobs`, `source` ÷K; per-job sizes and `job_cpu` kept |
//! | thp_burst | `size` ÷K (a multiple of 2 MiB); interval, hold, bursts, start kept; the one burst process is paced (the simulator sleeps it K − 1 times each 2 MiB fault's wall time, `ThpBurst::paced`), so its smaller region fills over about the full burst's time (the run-queue waits between the full burst's faults are not paced in); unpaced, one process would fault 1/K of the region K times sooner |
//! | thpchallenge | `threads` ÷K; each thread's `size` kept |
//! | pgbench | `clients`, `data`, `wal`, `checkpoint_size` ÷K; per-client, per-transaction sizes and times kept |
//! | vm_scalability | `tasks` (given) ÷K, `size` (given, not msync) ÷K; msync's per-task size, `unit` kept; the defaults follow the scaled machine |
//! | fio_smallfiles | `jobs` ÷K, `working_set` (given) ÷K; `file_size` kept; the default follows the scaled machine |
//! | `[[workload.task]]` | refused: a program's mappings, files (shared by every instance), slab and pool counts are absolute, and nothing says which of them stand for the machine's size |

use fraglab_types::page::PAGE_SIZE;

use crate::{KnobValue, Spec, SpecError};

/// The largest K of a scale model.
pub const MAX_SCALE: u32 = 1024;

/// The form of a scale, for messages.
pub const SCALE_FORM: &str = "\"1/K\" with K a power of two from 2 to 1024, such as \"1/8\"";

/// `[run] scale` / `--scale`: the spec was scaled to 1/`k` of the machine in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleSpec {
    /// K.
    pub k: u32,
    /// The line of `[run] scale` (0 when `--scale` asked for it).
    pub line: usize,
    /// The full-size machine's memory in bytes (`memory`, or the zones' managed pages).
    pub full_memory_bytes: u64,
    /// The full-size machine's CPUs.
    pub full_cpus: u32,
}

impl ScaleSpec {
    /// `scale model 1/K`, as every result and report of a scaled run says.
    pub fn label(&self) -> String {
        label(self.k)
    }
}

/// `scale model 1/K`.
pub fn label(k: u32) -> String {
    format!("scale model 1/{k}")
}

/// Parses a scale, `"1/K"`: K is a power of two from 2 to [`MAX_SCALE`].
pub fn parse_scale(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let bad = || format!("{s:?} is not a scale (expected {SCALE_FORM})");
    let k = t.strip_prefix("1/").ok_or_else(bad)?;
    let k: u32 = k.trim().parse().map_err(|_| bad())?;
    if !(2..=MAX_SCALE).contains(&k) {
        return Err(format!(
            "{s:?}: K = {k} is out of range (expected {SCALE_FORM}; 1/1 is the full-size run, \
             which needs no scale)"
        ));
    }
    if !k.is_power_of_two() {
        return Err(format!(
            "{s:?}: K = {k} is not a power of two (expected {SCALE_FORM}: the specs' binary sizes \
             divide exactly only by powers of two)"
        ));
    }
    Ok(k)
}

/// The spec scaled to 1/`k` (see the module's table); `line` is the line of `[run] scale` (0
/// for `--scale`). A parameter that cannot be scaled faithfully is an error naming it and its
/// line; so is a spec that is already scaled.
pub fn scale_spec(spec: &Spec, k: u32, line: usize) -> Result<Spec, SpecError> {
    let s = Scaler { spec, k, line };
    s.scale()
}

struct Scaler<'a> {
    spec: &'a Spec,
    k: u32,
    line: usize,
}

impl Scaler<'_> {
    fn err(&self, line: usize, key: &str, msg: impl std::fmt::Display) -> SpecError {
        SpecError::new(
            self.spec.file.clone(),
            line,
            Some(key.to_string()),
            format!("{msg} ({})", label(self.k)),
        )
    }

    /// `v` ÷ K, refused unless K divides it; `what` says what the count is.
    fn count(&self, v: u64, line: usize, key: &str, what: &str) -> Result<u64, SpecError> {
        let k = self.k as u64;
        if !v.is_multiple_of(k) || v / k == 0 {
            return Err(self.err(
                line,
                key,
                format!("{v} is not a multiple of {k}: {what} must divide by K exactly to keep the pressure per GiB"),
            ));
        }
        Ok(v / k)
    }

    /// Bytes ÷ K, refused unless K divides them into at least `min` bytes, a multiple of
    /// `align`.
    fn bytes(&self, v: u64, line: usize, key: &str, min: u64, align: u64) -> Result<u64, SpecError> {
        let k = self.k as u64;
        let show = crate::parse::show_bytes;
        if !v.is_multiple_of(k) {
            return Err(self.err(line, key, format!("{} is not divisible by {k}", show(v))));
        }
        let r = v / k;
        if r < min {
            return Err(self.err(
                line,
                key,
                format!(
                    "{} / {k} = {} is below the key's minimum {}",
                    show(v),
                    show(r),
                    show(min)
                ),
            ));
        }
        if !r.is_multiple_of(align) {
            return Err(self.err(
                line,
                key,
                format!(
                    "{} / {k} = {} is not a multiple of {}",
                    show(v),
                    show(r),
                    show(align)
                ),
            ));
        }
        Ok(r)
    }

    fn scale(&self) -> Result<Spec, SpecError> {
        let spec = self.spec;
        let k = self.k as u64;
        let m = &spec.machine;
        if let Some(prev) = &spec.run.scale {
            return Err(self.err(
                prev.line,
                "run.scale",
                format!(
                    "the spec is already scaled to 1/{} ([run] scale); give the scale once",
                    prev.k
                ),
            ));
        }
        if let Some(snap) = &m.snapshot {
            return Err(self.err(
                snap.line,
                "machine.snapshot",
                "a snapshot-booted machine cannot be scaled: its free lists, pageblocks and folios \
                 are a captured state of the full machine, which has no 1/K counterpart",
            ));
        }
        if spec.workload.is_none() {
            return Err(self.err(
                self.line,
                "run.scale",
                "a scale model needs a timed run ([workload]); [[op]]s are absolute, one by one",
            ));
        }
        let mut out = spec.clone();
        // The machine.
        let full_memory_bytes;
        match (&m.zones, m.memory_bytes) {
            (Some(zones), _) => {
                full_memory_bytes = zones.iter().map(|z| z.managed).sum::<u64>() * PAGE_SIZE;
                let mut scaled = Vec::new();
                let mut next_start: Option<u64> = None;
                let mut prev_end = 0;
                for z in zones {
                    let mut n = *z;
                    n.spanned = z.spanned / k;
                    n.present = z.present / k;
                    n.managed = z.managed / k;
                    if z.spanned > 0 {
                        n.start_pfn = match next_start {
                            None => z.start_pfn,
                            Some(s) => s + z.start_pfn.saturating_sub(prev_end) / k,
                        };
                        next_start = Some(n.start_pfn + n.spanned);
                        prev_end = z.end_pfn();
                    }
                    scaled.push(n);
                }
                let pages: u64 = scaled.iter().map(|z| z.managed).sum();
                if pages * PAGE_SIZE < crate::MIN_MEMORY_BYTES {
                    return Err(self.err(
                        m.line,
                        "machine.zone",
                        format!(
                            "the zones' {} managed pages / {k} = {pages} pages, below one pageblock \
                             (512 pages), the smallest machine",
                            full_memory_bytes / PAGE_SIZE
                        ),
                    ));
                }
                out.machine.zones = Some(scaled);
            }
            (None, Some(mem)) => {
                full_memory_bytes = mem;
                let r = self.bytes(mem, m.line, "machine.memory", 0, PAGE_SIZE)?;
                if r < crate::MIN_MEMORY_BYTES {
                    return Err(self.err(
                        m.line,
                        "machine.memory",
                        format!(
                            "{} / {k} = {} is smaller than one pageblock (2 MiB), the smallest machine",
                            crate::parse::show_bytes(mem),
                            crate::parse::show_bytes(r)
                        ),
                    ));
                }
                out.machine.memory_bytes = Some(r);
            }
            (None, None) => unreachable!("a machine without a snapshot has memory or zones"),
        }
        out.machine.cpus = self.count(m.cpus as u64, m.line, "machine.cpus", "the CPUs")? as u32;
        // NUMA nodes: each node's memory and CPUs ÷K (a node without CPUs keeps none).
        for (i, n) in m.nodes.iter().enumerate() {
            let on = &mut out.machine.nodes[i];
            let key = format!("machine.node[{i}]");
            on.memory_bytes = self.bytes(n.memory_bytes, m.line, &key, crate::MIN_MEMORY_BYTES, PAGE_SIZE)?;
            if n.cpus > 0 {
                on.cpus = self.count(n.cpus as u64, m.line, &key, "the node's CPUs")? as u32;
            }
        }
        if m.swap_bytes > 0 {
            out.machine.swap_bytes = self.bytes(m.swap_bytes, m.line, "machine.swap", 1, PAGE_SIZE)?;
        }
        if m.hugetlb_pages > 0 {
            out.machine.hugetlb_pages = self.count(
                m.hugetlb_pages,
                m.hugetlb_line,
                "machine.hugetlb_pages",
                "the hugetlb pool",
            )?;
        }
        // Knobs in absolute units.
        for (name, min) in [
            ("vm.min_free_kbytes", 128),
            ("transparent_hugepage/khugepaged/pages_to_scan", 1),
        ] {
            if let Some(KnobValue::Int(v)) = spec.knobs.get(name) {
                let v = *v as u64;
                let key = format!("knobs.{name}");
                let r = self.count(v, self.line, &key, "an absolute amount")?;
                if r < min {
                    return Err(self.err(
                        self.line,
                        &key,
                        format!("{v} / {k} = {r} is below the knob's minimum {min}"),
                    ));
                }
                out.knobs.insert(name.to_string(), KnobValue::Int(r as i64));
            }
        }
        // DAMON.
        if spec.damon.enabled {
            if spec.damon.regions.is_some() {
                return Err(self.err(
                    self.line,
                    "damon.regions",
                    "DAMON's monitored regions are physical addresses of the full machine; \
                     leave them out (the scaled machine's memory is monitored) or scale them by hand",
                ));
            }
            for key in ["quota_bytes", "sz_min", "sz_max"] {
                if let Some(v) = spec.damon.values.get(key) {
                    let r = self.bytes(*v, self.line, &format!("damon.{key}"), 0, 1)?;
                    out.damon.values.insert(key.to_string(), r);
                }
            }
        }
        // The workload.
        let w = spec.workload.as_ref().expect("checked");
        let ow = out.workload.as_mut().expect("cloned");
        if let Some(t) = w.task.first() {
            return Err(self.err(
                t.line,
                "workload.task",
                "a task program cannot be scaled faithfully: its mappings, files (shared by every \
                 instance), slab and pool counts are absolute, and nothing says which of them stand \
                 for the machine's size; scale the spec by hand",
            ));
        }
        let mib2 = 2 << 20;
        for (i, (p, o)) in w.kbuild.iter().zip(&mut ow.kbuild).enumerate() {
            let key = |s: &str| format!("workload.kbuild[{i}].{s}");
            o.jobs_parallel = self.count(
                p.jobs_parallel as u64,
                p.line,
                &key("jobs_parallel"),
                "the parallel jobs (per CPU)",
            )? as u32;
            o.jobs = self.count(p.jobs as u64, p.line, &key("jobs"), "a build's jobs")? as u32;
            o.source_bytes = self.bytes(p.source_bytes, p.line, &key("source"), 4096, 1)?;
        }
        for (i, (p, o)) in w.thp_burst.iter().zip(&mut ow.thp_burst).enumerate() {
            o.size_bytes = self.bytes(
                p.size_bytes,
                p.line,
                &format!("workload.thp_burst[{i}].size"),
                mib2,
                mib2,
            )?;
        }
        for (i, (p, o)) in w.thpchallenge.iter().zip(&mut ow.thpchallenge).enumerate() {
            o.threads = self.count(
                p.threads as u64,
                p.line,
                &format!("workload.thpchallenge[{i}].threads"),
                "the threads (each faults its own region)",
            )? as u32;
        }
        for (i, (p, o)) in w.pgbench.iter().zip(&mut ow.pgbench).enumerate() {
            let key = |s: &str| format!("workload.pgbench[{i}].{s}");
            o.clients =
                self.count(p.clients as u64, p.line, &key("clients"), "the clients (per CPU)")? as u32;
            o.data_bytes = self.bytes(p.data_bytes, p.line, &key("data"), 4096, 1)?;
            o.wal_bytes = self.bytes(p.wal_bytes, p.line, &key("wal"), 4096, 1)?;
            o.checkpoint_bytes = self.bytes(p.checkpoint_bytes, p.line, &key("checkpoint_size"), 4096, 1)?;
        }
        for (i, (p, o)) in w.vm_scalability.iter().zip(&mut ow.vm_scalability).enumerate() {
            let key = |s: &str| format!("workload.vm_scalability[{i}].{s}");
            if let Some(t) = p.tasks {
                o.tasks = Some(self.count(t as u64, p.line, &key("tasks"), "the processes")? as u32);
            }
            if let Some(sz) = p.size_bytes {
                if p.case != crate::VmScalabilityCase::Msync {
                    o.size_bytes = Some(self.bytes(sz, p.line, &key("size"), 1 << 20, 1)?);
                }
            }
        }
        for (i, (p, o)) in w.fio_smallfiles.iter().zip(&mut ow.fio_smallfiles).enumerate() {
            let key = |s: &str| format!("workload.fio_smallfiles[{i}].{s}");
            o.jobs = self.count(p.jobs as u64, p.line, &key("jobs"), "the writers")? as u32;
            if let Some(ws) = p.working_set_bytes {
                o.working_set_bytes = Some(self.bytes(ws, p.line, &key("working_set"), 1 << 20, 1)?);
            }
        }
        out.run.scale = Some(ScaleSpec {
            k: self.k,
            line: self.line,
            full_memory_bytes,
            full_cpus: m.cpus,
        });
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_spec;

    const KBUILD_256G: &str = include_str!("../../../experiments/scale/kbuild-256g.toml");

    #[test]
    fn parses_powers_of_two_only() {
        assert_eq!(parse_scale("1/8"), Ok(8));
        assert_eq!(parse_scale(" 1/1024 "), Ok(1024));
        for bad in ["8", "1/1", "1/0", "1/3", "1/2048", "2/8", "1/x", ""] {
            assert!(parse_scale(bad).is_err(), "{bad}");
        }
        assert!(parse_scale("1/12").unwrap_err().contains("power of two"));
    }

    #[test]
    fn kbuild_256g_at_one_sixteenth() {
        let full = parse_spec(KBUILD_256G, "kb.toml").unwrap();
        let s = scale_spec(&full, 16, 0).unwrap();
        assert_eq!(s.machine.memory_bytes, Some(16 << 30));
        assert_eq!(s.machine.cpus, 4);
        assert_eq!(s.machine.swap_bytes, 16 << 30);
        let (f, k) = (
            &full.workload.as_ref().unwrap().kbuild[0],
            &s.workload.as_ref().unwrap().kbuild[0],
        );
        assert_eq!((k.jobs_parallel, k.jobs), (8, 150));
        assert_eq!(k.source_bytes, 24 << 30);
        // Per job: kept.
        assert_eq!(
            (k.job_anon_bytes, k.job_read_bytes, k.job_cpu_ns),
            (f.job_anon_bytes, f.job_read_bytes, f.job_cpu_ns)
        );
        let b = &s.workload.as_ref().unwrap().thp_burst[0];
        assert_eq!((b.size_bytes, b.interval_ns), (2 << 30, 2_000_000_000));
        let sc = s.run.scale.as_ref().unwrap();
        assert_eq!((sc.k, sc.full_memory_bytes, sc.full_cpus), (16, 256 << 30, 64));
        assert_eq!(sc.label(), "scale model 1/16");
        // The same as the spec key, which names its line.
        let keyed = KBUILD_256G.replace("[run]\nseed = 1", "[run]\nseed = 1\nscale = \"1/16\"");
        let k2 = parse_spec(&keyed, "kb.toml").unwrap();
        assert_eq!(k2.machine.memory_bytes, s.machine.memory_bytes);
        assert_eq!(k2.machine.cpus, s.machine.cpus);
        let (w2, w) = (k2.workload.as_ref().unwrap(), s.workload.as_ref().unwrap());
        assert_eq!(
            (w2.kbuild[0].jobs, w2.kbuild[0].source_bytes),
            (w.kbuild[0].jobs, w.kbuild[0].source_bytes)
        );
        assert_eq!(w2.thp_burst[0].size_bytes, w.thp_burst[0].size_bytes);
        assert_eq!(k2.run.scale.as_ref().unwrap().k, 16);
        assert!(k2.run.scale.as_ref().unwrap().line > 0);
        // Scaling twice is refused.
        let e = scale_spec(&k2, 2, 0).unwrap_err().to_string();
        assert!(e.contains("already scaled"), "{e}");
    }

    #[test]
    fn refusals_name_the_parameter() {
        let full = parse_spec(KBUILD_256G, "kb.toml").unwrap();
        // 64 CPUs do not divide by 128.
        let e = scale_spec(&full, 128, 0).unwrap_err().to_string();
        assert!(
            e.contains("machine.cpus") && e.contains("scale model 1/128"),
            "{e}"
        );
        let spec = |body: &str| {
            parse_spec(
                &format!("[machine]\nmemory = \"64MiB\"\ncpus = 4\n{body}"),
                "t.toml",
            )
        };
        // Too small a machine.
        let s = spec(
            "[workload]\nduration = \"1s\"\n[[workload.thp_burst]]\nsize = \"4MiB\"\ninterval = \"1s\"\n",
        )
        .unwrap();
        let e = scale_spec(&s, 64, 0).unwrap_err().to_string();
        assert!(e.contains("machine.cpus") || e.contains("machine.memory"), "{e}");
        let e = scale_spec(&s, 4, 0).unwrap_err().to_string();
        assert!(
            e.contains("workload.thp_burst[0].size") && e.contains("2 MiB"),
            "{e}"
        );
        // Task programs and [[op]]s.
        let s = spec("[workload]\nduration = \"1s\"\n[[workload.task]]\nname = \"a\"\nsteps = [{ compute = \"1ms\" }]\n").unwrap();
        let e = scale_spec(&s, 2, 0).unwrap_err().to_string();
        assert!(e.contains("workload.task") && e.contains("t.toml:"), "{e}");
        let s = spec("[[op]]\ndrain_all_pages = true\n").unwrap();
        assert!(scale_spec(&s, 2, 0)
            .unwrap_err()
            .to_string()
            .contains("[workload]"));
        // An explicit min_free_kbytes is scaled, down to the knob's minimum.
        let s = spec("[knobs]\n\"vm.min_free_kbytes\" = 1024\n[workload]\nduration = \"1s\"\n[[workload.thp_burst]]\nsize = \"8MiB\"\ninterval = \"1s\"\n").unwrap();
        let t = scale_spec(&s, 4, 0).unwrap();
        assert_eq!(t.knobs["vm.min_free_kbytes"], KnobValue::Int(256));
        let s = parse_spec(
            "[machine]\nmemory = \"64MiB\"\ncpus = 16\n[knobs]\n\"vm.min_free_kbytes\" = 1024\n[workload]\nduration = \"1s\"\n[[workload.thp_burst]]\nsize = \"64MiB\"\ninterval = \"1s\"\n",
            "t.toml",
        )
        .unwrap();
        let e = scale_spec(&s, 16, 0).unwrap_err().to_string();
        assert!(
            e.contains("vm.min_free_kbytes") && e.contains("below the knob's minimum 128"),
            "{e}"
        );
    }

    #[test]
    fn zones_are_divided_in_place() {
        let text = "[machine]\ncpus = 4\n\
            [[machine.zone]]\nname = \"DMA\"\nstart_pfn = 1\nspanned = 4095\npresent = 3998\nmanaged = 3840\n\
            [[machine.zone]]\nname = \"DMA32\"\nstart_pfn = 4096\nspanned = 1044480\npresent = 782336\nmanaged = 772917\n\
            [[machine.zone]]\nname = \"Normal\"\nstart_pfn = 1048576\nspanned = 1310720\n\
            [workload]\nduration = \"1s\"\n[[workload.thp_burst]]\nsize = \"64MiB\"\ninterval = \"1s\"\n";
        let s = parse_spec(text, "z.toml").unwrap();
        let t = scale_spec(&s, 4, 0).unwrap();
        let z = t.machine.zones.as_ref().unwrap();
        assert_eq!((z[0].start_pfn, z[0].spanned, z[0].managed), (1, 1023, 960));
        // The gap between the zones (none here) divided too: DMA32 follows DMA.
        assert_eq!(
            (z[1].start_pfn, z[1].spanned, z[1].present, z[1].managed),
            (1024, 261120, 195584, 193229)
        );
        assert_eq!((z[2].start_pfn, z[2].spanned), (1024 + 261120, 327680));
        // The scaled zones parse as a spec of their own.
        let mut again = String::from("[machine]\ncpus = 1\n");
        for z in z {
            again += &format!(
                "[[machine.zone]]\nname = \"{}\"\nstart_pfn = {}\nspanned = {}\npresent = {}\nmanaged = {}\n",
                z.zone.name(),
                z.start_pfn,
                z.spanned,
                z.present,
                z.managed
            );
        }
        parse_spec(&again, "again.toml").unwrap();
    }
}
