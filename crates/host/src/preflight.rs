//! The preflight checks of a host run ([`preflight`]) and the [`Plan`] they produce (what
//! `--dry-run` prints).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fraglab_spec::{Spec, TaskParams, TaskStep, WorkloadSpec};

use crate::{
    hugetlb, knob_path, knobs, memblock, procfs, trace, HostError, HostOptions, FILES_PER_SLAB_PAGE, GIB,
    MIN_KERNEL,
};

/// One knob as the run will change it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedKnob {
    pub name: String,
    pub path: PathBuf,
    pub current: String,
    pub new: String,
}

/// One file set of `files` steps: its files `0..count` in a directory of the run's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileSetPlan {
    /// The largest count and size any step names.
    pub count: u64,
    pub size: u64,
    /// The first step naming the set reads it: its files are created (on disk) before the run,
    /// as the files of `read` steps are.
    pub prefill: bool,
}

/// What [`host_run`](crate::host_run) would do: the `--dry-run` output.
#[derive(Clone, Debug)]
pub struct Plan {
    pub spec_name: Option<String>,
    pub kernel_release: String,
    pub knobs: Vec<PlannedKnob>,
    /// Processes forked: task instances, thp_burst generators, thpchallenge threads.
    pub processes: u32,
    /// Peak anonymous memory of the workload (all processes at their peaks), bytes.
    pub planned_anon_bytes: u64,
    /// Pipe-buffer pages (`pipes` steps) held, bytes.
    pub planned_pipe_bytes: u64,
    /// Empty files created by `slab` steps.
    pub planned_slab_files: u64,
    /// Files `read` steps read (name, size) and files `write` steps write (name, end offset).
    pub read_files: BTreeMap<String, u64>,
    pub write_files: BTreeMap<String, u64>,
    /// fio small-file rings: (jobs, file size, files per job), one per `[[workload.fio_smallfiles]]`.
    pub fio: Vec<(u32, u64, u64)>,
    /// File sets of `files` steps, by name.
    pub file_sets: BTreeMap<String, FileSetPlan>,
    /// `[machine] read_ahead_kb`: written to the run directory's device for the run.
    pub read_ahead_kb: Option<u64>,
    /// MemAvailable left to the workload: [`MemoryBudget::for_workload`] of `memory`.
    pub mem_available_bytes: u64,
    /// MemAvailable as measured and what the run takes from it before the workload starts.
    pub memory: MemoryBudget,
    pub mem_floor_bytes: u64,
    pub anon_cap_bytes: u64,
    /// The parent of the run's directory.
    pub workdir_parent: PathBuf,
    pub duration: Duration,
    /// `--fit-memory` by the hugetlb pool (the fallback), or `machine.hugetlb_pages`: the pool
    /// the run will hold.
    pub fit: Option<hugetlb::Fit>,
    /// `--fit-memory` by offlining: the memory blocks the run will take offline.
    pub offline: Option<memblock::OfflinePlan>,
    /// `--fit-memory` by the hugetlb pool: why offlining was not used.
    pub fit_fallback: Option<String>,
    /// §28.1: the largest `nr_hugepages` step of any task (2 MiB pages), when the spec has one:
    /// the run records the pool's size before it in the state file and writes it back after.
    pub hugetlb_step_pages: Option<u64>,
    /// Things to know about this machine (free page reporting, DAMON, tracefs).
    pub notes: Vec<String>,
    /// `[host] loop_images`: the filesystem of each task file and the size of each image (empty
    /// without it).
    pub file_fs: BTreeMap<String, crate::loops::Fs>,
    pub loop_images: BTreeMap<crate::loops::Fs, u64>,
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / GIB as f64)
}

/// MemAvailable as the preflight counts it: measured once, minus what the run takes before its
/// workload starts — the `--fit-memory` or `machine.hugetlb_pages` pool, the blocks taken
/// offline (their pages migrate into the rest of the machine), the largest `nr_hugepages` step's
/// pool — and then the workload's anonymous memory and pipe buffers. `--dry-run` prints this
/// same value, and the run's refusal and its check after set-up
/// ([`MemoryBudget::check_after_setup`]) name the same terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryBudget {
    /// /proc/meminfo's MemAvailable when the preflight ran.
    pub measured: u64,
    /// The hugetlb pool the run holds for `--fit-memory` or `machine.hugetlb_pages`.
    pub pool: u64,
    /// Memory blocks taken offline for `--fit-memory`.
    pub offline: u64,
    /// The largest `nr_hugepages` step's pool.
    pub step_pool: u64,
    /// The workload's anonymous memory and pipe buffers at their peak.
    pub workload: u64,
}

impl MemoryBudget {
    /// What is left to the workload once the run has set the machine up.
    pub fn for_workload(&self) -> u64 {
        self.measured
            .saturating_sub(self.pool)
            .saturating_sub(self.offline)
            .saturating_sub(self.step_pool)
    }

    /// What is left once the workload holds its peak: checked against the floor.
    pub fn after_workload(&self) -> u64 {
        self.for_workload().saturating_sub(self.workload)
    }

    /// Right before the workload starts, MemAvailable measured again (`now`; the pools and
    /// offlined blocks are then in place, so only the workload is taken from it): refused under
    /// `floor`, naming the preflight's projection so a difference is explained, not hidden (the
    /// run's files, page cache that is not reclaimable, other processes).
    pub fn check_after_setup(&self, now: u64, floor: u64) -> Result<(), HostError> {
        let step = self.step_pool;
        if now.saturating_sub(step + self.workload) >= floor {
            return Ok(());
        }
        Err(HostError::Unsafe(format!(
            "after set-up MemAvailable is {} (the preflight projected {}: {}); minus the \
             workload's {}{} it is under the floor of {}",
            gib(now),
            gib(self.for_workload() + step),
            self,
            gib(self.workload),
            if step > 0 {
                format!(" and the nr_hugepages step's {}", gib(step))
            } else {
                String::new()
            },
            gib(floor)
        )))
    }
}

impl MemoryBudget {
    /// A note when MemAvailable after set-up (`now`) is more than 5 % off the projection
    /// (`measured - pool - offline`): the kernel does not give back exactly what the run took
    /// (an offlined block's struct pages stay in the rest of the machine, watermarks and
    /// reserves change with the zone's size, the run's files are page cache).
    pub fn setup_note(&self, now: u64) -> Option<String> {
        let projected = self.for_workload() + self.step_pool;
        let off = now.abs_diff(projected);
        (off * 20 > projected).then(|| {
            format!(
                "MemAvailable after set-up is {}, the preflight projected {} ({}; {} {})",
                gib(now),
                gib(projected),
                self,
                gib(off),
                if now < projected { "less" } else { "more" }
            )
        })
    }
}

impl fmt::Display for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemAvailable {} measured", gib(self.measured))?;
        for (what, b) in [
            ("hugetlb pool", self.pool),
            ("blocks offline", self.offline),
            ("nr_hugepages step", self.step_pool),
        ] {
            if b > 0 {
                write!(f, " - {what} {}", gib(b))?;
            }
        }
        if self.pool + self.offline + self.step_pool > 0 {
            write!(f, " = {} for the workload", gib(self.for_workload()))?;
        }
        Ok(())
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "host run of {} on Linux {}",
            self.spec_name.as_deref().unwrap_or("(unnamed spec)"),
            self.kernel_release
        )?;
        self.fmt_knobs(f)?;
        writeln!(
            f,
            "workload: {} processes, duration at most {:.1} s",
            self.processes,
            self.duration.as_secs_f64()
        )?;
        writeln!(
            f,
            "memory: anonymous {} + pipe buffers {} (cap {}); {} (floor {})",
            gib(self.planned_anon_bytes),
            gib(self.planned_pipe_bytes),
            gib(self.anon_cap_bytes),
            self.memory,
            gib(self.mem_floor_bytes)
        )?;
        self.fmt_fit(f)?;
        self.fmt_files(f)?;
        writeln!(
            f,
            "files under a fresh directory in {} (removed at the end)",
            self.workdir_parent.display()
        )?;
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

impl Plan {
    fn fmt_knobs(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.knobs.is_empty() {
            writeln!(f, "knobs: none set by the spec")?;
        } else {
            writeln!(f, "knobs (restored at the end):")?;
            let w = self.knobs.iter().map(|k| k.name.len()).max().unwrap_or(0);
            for k in &self.knobs {
                let same = if k.current == k.new { "  (unchanged)" } else { "" };
                writeln!(
                    f,
                    "  {:<w$}  {} -> {}{same}    [{}]",
                    k.name,
                    k.current,
                    k.new,
                    k.path.display()
                )?;
            }
        }
        Ok(())
    }

    /// `--fit-memory` and the hugetlb pool of the steps.
    fn fmt_fit(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(o) = &self.offline {
            writeln!(
                f,
                "fit: {}, each recorded in the state file before it goes offline and onlined again at the end; best effort: the blocks that refuse are made up by a hugetlb pool of 2 MiB pages, recorded in the state file before it is filled and given back at the end",
                o.describe()
            )?;
        }
        if let Some(why) = &self.fit_fallback {
            writeln!(f, "fit: offlining unavailable ({why}): hugetlb pool instead")?;
        }
        if let Some(fit) = &self.fit {
            writeln!(
                f,
                "fit: hugetlb pool: {} hugetlb pages ({}) held for the run, leaving {} of {} to the \
                 page allocator (vm.nr_hugepages {} -> {}, restored at the end)",
                fit.pages,
                gib(fit.bytes()),
                gib(fit.mem_total - fit.bytes()),
                gib(fit.mem_total),
                fit.before,
                fit.pages
            )?;
        }
        if let Some(n) = self.hugetlb_step_pages {
            writeln!(
                f,
                "nr_hugepages steps: the hugetlb pool resized by the tasks, up to {n} pages ({}){}; \
                 vm.nr_hugepages 0 restored at the end",
                gib(n << 21),
                if self.fit.is_some() || self.offline.is_some() {
                    " on top of the run's pool (base + count written, the pool minus the base reported)"
                } else {
                    ""
                }
            )?;
        }
        Ok(())
    }

    /// The run's files, read_ahead_kb and fio.
    fn fmt_files(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.planned_slab_files > 0 {
            writeln!(f, "slab: {} empty files", self.planned_slab_files)?;
        }
        for (n, s) in &self.read_files {
            writeln!(f, "file {n}: {} read", gib(*s))?;
        }
        for (n, s) in &self.write_files {
            writeln!(f, "file {n}: {} written", gib(*s))?;
        }
        for (n, fs) in &self.file_sets {
            writeln!(
                f,
                "file set {n}: {} files of {} bytes ({} on disk, {} inodes and dentries){}",
                fs.count,
                fs.size,
                gib(fs.count * fs.size),
                fs.count,
                if fs.prefill {
                    ", created before the run"
                } else {
                    ""
                }
            )?;
        }
        if let Some(kb) = self.read_ahead_kb {
            writeln!(
                f,
                "read_ahead_kb: {kb} on the device of the run's directory (restored at the end)"
            )?;
        }
        for (jobs, size, per_job) in &self.fio {
            writeln!(
                f,
                "fio: {jobs} jobs, each cycling through {per_job} files of {size} bytes ({} on disk)",
                gib(*jobs as u64 * per_job * size)
            )?;
        }
        Ok(())
    }
}

impl Plan {
    pub(crate) fn knob_changes(&self) -> Vec<(String, String)> {
        self.knobs
            .iter()
            .map(|k| (k.name.clone(), k.new.clone()))
            .collect()
    }
}

/// `6.18.44-fc-v657` → (6, 18).
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Peak anonymous bytes, pipe pages and slab files of one instance of a task program. Locked
/// mappings (`locked = true`, `mlock` steps, docs/model §29) count as anonymous memory
/// like any other mapping: their whole size, in the footprint and the anonymous cap.
fn task_footprint(t: &TaskParams) -> (u64, u64, u64) {
    let mut live: BTreeMap<&str, u64> = BTreeMap::new();
    let (mut peak, mut pipes, mut files) = (0u64, 0u64, 0u64);
    // Two passes: mappings persist from one loop into the next.
    for pass in 0..2u32.min(t.loops) {
        for s in &t.steps {
            match s {
                TaskStep::Mmap { vma, size_bytes, .. } => {
                    live.insert(vma, size_bytes.next_multiple_of(4096));
                }
                TaskStep::Munmap { vma } => {
                    live.remove(vma.as_str());
                }
                TaskStep::Slab { count, reclaimable } if pass == 0 => {
                    if *reclaimable {
                        files += count * FILES_PER_SLAB_PAGE;
                    } else {
                        pipes += count;
                    }
                }
                _ => {}
            }
            peak = peak.max(live.values().sum());
        }
    }
    (peak, pipes * t.loops as u64, files * t.loops as u64)
}

/// The fio rings of a spec: (jobs, file size, files per job). The ring holds the working set
/// (default 1.5 × the spec's `machine.memory`, as in the simulator: on the host the workload
/// runs at the spec's absolute sizes, so a spec meant to fragment this machine sets its memory).
pub(crate) fn fio_rings(spec: &Spec) -> Vec<(u32, u64, u64)> {
    let Some(w) = spec.workload.as_ref() else {
        return Vec::new();
    };
    // 1.5 × the memory outside the hugetlb pool, as the simulator sizes it.
    let mem = spec
        .machine
        .memory_bytes
        .unwrap_or(0)
        .saturating_sub(spec.machine.hugetlb_pages << 21);
    w.fio_smallfiles
        .iter()
        .map(|f| {
            let ws = f.working_set_bytes.unwrap_or(mem / 2 * 3);
            let files = (ws / f.file_size_bytes.max(1)).max(f.jobs as u64);
            (f.jobs, f.file_size_bytes, files / f.jobs.max(1) as u64)
        })
        .collect()
}

fn statvfs(p: &Path) -> Option<(u64, u64)> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: zeroed statvfs is valid; c is a valid path string.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut s) == 0)
            .then(|| (s.f_bavail as u64 * s.f_frsize as u64, s.f_favail as u64))
    }
}

/// What the workload needs, added up over its generators.
#[derive(Default)]
struct Footprint {
    /// Peak anonymous bytes of all processes.
    anon: u64,
    /// Pipe-buffer bytes.
    pipes: u64,
    /// Empty files of `slab` steps.
    files: u64,
    procs: u32,
    read_files: BTreeMap<String, u64>,
    write_files: BTreeMap<String, u64>,
    fio: Vec<(u32, u64, u64)>,
    file_sets: BTreeMap<String, FileSetPlan>,
    /// Bytes and files of the fio rings on disk.
    fio_disk: u64,
    fio_files: u64,
}

/// Checks that `spec` can run on this machine and says what the run would do. Errors: not
/// Linux, not root, kernel older than [`MIN_KERNEL`], a knob missing at its real path, a
/// generator the host engine does not run (kbuild, pgbench, `[[op]]` specs), or a safety limit
/// (anonymous cap, MemAvailable floor, slab files, disk space).
pub fn preflight(spec: &Spec, opts: &HostOptions) -> Result<Plan, HostError> {
    if let Some(sc) = &spec.run.scale {
        return Err(HostError::Unsupported(format!(
            "{}:{}: key run.scale: a {} is the simulator's: the host engine runs the live \
             machine at its own size (leave the scale out, or run the scaled spec with `fraglab run`)",
            spec.file,
            sc.line,
            sc.label()
        )));
    }
    let release = check_machine()?;
    let w = supported_workload(spec)?;
    let knobs = planned_knobs(spec)?;
    let fp = footprint(spec, w);
    let meminfo = procfs::read("/proc/meminfo")?;
    let (fit, offline, fit_fallback) = fit_memory(spec, opts, &meminfo)?;
    let step = nr_hugepages_step(w);
    let step_pages = match step {
        Some(_) => {
            let before = hugetlb::current_pages()?;
            check_nr_hugepages_step(spec, step, before)?
        }
        None => None,
    };
    let budget = MemoryBudget {
        measured: procfs::mem_available()?,
        pool: fit.as_ref().map_or(0, |f| f.bytes()),
        offline: offline.as_ref().map_or(0, |o| o.bytes()),
        step_pool: step_pages.unwrap_or(0) << 21,
        workload: fp.anon + fp.pipes,
    };
    if let Some(o) = &offline {
        check_offline_floor(
            o,
            budget.measured.saturating_sub(budget.pool),
            opts.mem_floor_bytes,
        )?;
    }
    if let (Some((t, count)), Some(_)) = (step, step_pages) {
        let before_step = budget.measured.saturating_sub(budget.pool + budget.offline);
        check_step_floor(spec, t, count, before_step, opts.mem_floor_bytes)?;
    }
    check_memory_limits(opts, &fp, &budget)?;
    let parent = opts.workdir.clone().unwrap_or_else(|| PathBuf::from("/var/tmp"));
    check_disk(&parent, &fp)?;
    let (file_fs, loop_images) = if spec.host.loop_images {
        let file_fs = crate::loops::file_filesystems(w);
        let mut bytes = fp.read_files.clone();
        for (f, b) in &fp.write_files {
            let e = bytes.entry(f.clone()).or_default();
            *e = (*e).max(*b);
        }
        // File sets: count files of size each (whole 4 KiB blocks).
        for (n, s) in &fp.file_sets {
            *bytes.entry(n.clone()).or_default() += s.count * s.size.div_ceil(4096) * 4096;
        }
        let need = crate::loops::images_needed(&file_fs, &bytes);
        crate::loops::check(&parent, &need).map_err(HostError::LoopImage)?;
        (file_fs, need)
    } else {
        Default::default()
    };
    let notes = machine_notes(spec, w, opts, &parent, fit.is_some(), offline.is_some());
    let mut duration = Duration::from_nanos(w.duration_ns);
    if let Some(m) = opts.max_duration {
        duration = duration.min(m);
    }
    Ok(Plan {
        spec_name: spec.name.clone(),
        kernel_release: release,
        knobs,
        processes: fp.procs,
        planned_anon_bytes: fp.anon,
        planned_pipe_bytes: fp.pipes,
        planned_slab_files: fp.files,
        read_files: fp.read_files,
        write_files: fp.write_files,
        fio: fp.fio,
        file_sets: fp.file_sets,
        read_ahead_kb: spec.machine.read_ahead_kb,
        mem_available_bytes: budget.for_workload(),
        memory: budget,
        mem_floor_bytes: opts.mem_floor_bytes,
        anon_cap_bytes: opts.anon_cap_bytes,
        workdir_parent: parent,
        duration,
        fit,
        offline,
        fit_fallback,
        hugetlb_step_pages: step_pages,
        notes,
        file_fs,
        loop_images,
    })
}

/// §28.1's `nr_hugepages` task step (`set_max_huge_pages` through /proc/sys/vm/nr_hugepages):
/// the task with the largest step and that count, if any task has one.
fn nr_hugepages_step(w: &WorkloadSpec) -> Option<(&TaskParams, u64)> {
    let mut best: Option<(&TaskParams, u64)> = None;
    for t in &w.task {
        for s in &t.steps {
            if let TaskStep::NrHugepages { count } = s {
                if best.is_none_or(|(_, c)| *count > c) {
                    best = Some((t, *count));
                }
            }
        }
    }
    best
}

/// The step resizes the machine's one default-size pool, which the run must own: refused when
/// the pool is already in use (`before` pages), since the run writes its old size back at the
/// end. With `--fit-memory`'s pool or `machine.hugetlb_pages` the step's count is the pool
/// the workload asks for on top of the run's pool (the run writes base + count and reports
/// the pool minus the base). Returns the largest step's page count.
fn check_nr_hugepages_step(
    spec: &Spec,
    step: Option<(&TaskParams, u64)>,
    before: u64,
) -> Result<Option<u64>, HostError> {
    let Some((t, count)) = step else {
        return Ok(None);
    };
    let at = format!(
        "{}:{}: workload.task {:?}: the nr_hugepages step",
        spec.file, t.line, t.name
    );
    if before != 0 {
        return Err(HostError::Unsafe(format!(
            "{at}: vm.nr_hugepages is already {before}; the run would change another user's pool"
        )));
    }
    Ok(Some(count))
}

/// The largest step's pool (`count` 2 MiB pages) comes out of MemAvailable (`avail`): refused
/// when that would leave less than the floor.
fn check_step_floor(
    spec: &Spec,
    t: &TaskParams,
    count: u64,
    avail: u64,
    floor: u64,
) -> Result<(), HostError> {
    let bytes = count << 21;
    if avail.saturating_sub(bytes) < floor {
        return Err(HostError::Unsafe(format!(
            "{}:{}: workload.task {:?}: nr_hugepages = {count} ({}) would leave MemAvailable {} \
             under the floor of {}",
            spec.file,
            t.line,
            t.name,
            gib(bytes),
            gib(avail),
            gib(floor)
        )));
    }
    Ok(())
}

/// Linux, root, a kernel of at least [`MIN_KERNEL`]; returns the kernel release.
fn check_machine() -> Result<String, HostError> {
    if !cfg!(target_os = "linux")
        || std::fs::read_to_string("/proc/sys/kernel/ostype")
            .map(|s| s.trim().to_string())
            .ok()
            != Some("Linux".into())
    {
        return Err(HostError::NotLinux);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(HostError::NotRoot);
    }
    let release = procfs::read("/proc/sys/kernel/osrelease")?.trim().to_string();
    match kernel_version(&release) {
        Some(v) if v >= MIN_KERNEL => {}
        _ => {
            return Err(HostError::KernelTooOld {
                found: release,
                need: MIN_KERNEL,
            })
        }
    }
    Ok(release)
}

/// The spec's `[workload]`, if it has one and no generator the host engine does not run
/// (kbuild, pgbench, vm_scalability).
fn supported_workload(spec: &Spec) -> Result<&WorkloadSpec, HostError> {
    let Some(w) = spec.workload.as_ref() else {
        return Err(HostError::Unsupported(format!(
            "{}: a list of [[op]]s (the host engine runs a [workload])",
            spec.file
        )));
    };
    if let Some(k) = w.kbuild.first() {
        return Err(HostError::Unsupported(format!(
            "{}:{}: [[workload.kbuild]]",
            spec.file, k.line
        )));
    }
    if let Some(p) = w.pgbench.first() {
        return Err(HostError::Unsupported(format!(
            "{}:{}: [[workload.pgbench]]",
            spec.file, p.line
        )));
    }
    if let Some(v) = w.vm_scalability.first() {
        return Err(HostError::Unsupported(format!(
            "{}:{}: [[workload.vm_scalability]]",
            spec.file, v.line
        )));
    }
    if !spec.machine.nodes.is_empty() {
        return Err(HostError::Unsupported(format!(
            "{}:{}: a machine of {} NUMA nodes (the host engine runs on the machine it is on)",
            spec.file,
            spec.machine.line,
            spec.machine.nodes.len()
        )));
    }
    let bound = w
        .thp_burst
        .iter()
        .map(|b| (b.line, b.numa))
        .chain(w.task.iter().map(|t| (t.line, t.numa)));
    for (line, numa) in bound {
        if numa != Default::default() {
            return Err(HostError::Unsupported(format!(
                "{}:{line}: numa_node or mempolicy (tasks are not bound to nodes yet)",
                spec.file
            )));
        }
    }
    Ok(w)
}

/// Every knob the spec sets, at its real path, with its current value.
fn planned_knobs(spec: &Spec) -> Result<Vec<PlannedKnob>, HostError> {
    let mut knobs = Vec::new();
    for (name, value) in &spec.knobs {
        let path = knob_path(name);
        if !path.exists() {
            return Err(HostError::MissingKnob {
                name: name.clone(),
                path: path.display().to_string(),
            });
        }
        knobs.push(PlannedKnob {
            name: name.clone(),
            current: knobs::read_knob(&path)?,
            new: value.to_string(),
            path,
        });
    }
    Ok(knobs)
}

/// The workload's processes, memory, files and fio rings.
fn footprint(spec: &Spec, w: &WorkloadSpec) -> Footprint {
    let mut fp = Footprint::default();
    for t in &w.task {
        let (a, p, f) = task_footprint(t);
        fp.anon += a * t.count as u64;
        fp.pipes += p * 4096 * t.count as u64;
        fp.files += f * t.count as u64;
        fp.procs += t.count;
        for s in &t.steps {
            match s {
                TaskStep::Read { file, file_size, .. } => {
                    let e = fp.read_files.entry(file.clone()).or_default();
                    *e = (*e).max(*file_size);
                }
                TaskStep::Write {
                    file, offset, length, ..
                } => {
                    let e = fp.write_files.entry(file.clone()).or_default();
                    *e = (*e).max(offset + length);
                }
                TaskStep::Files {
                    set,
                    count,
                    size_bytes,
                    op,
                    ..
                } => {
                    let new = !fp.file_sets.contains_key(set);
                    let e = fp.file_sets.entry(set.clone()).or_default();
                    e.prefill |= new && *op == fraglab_spec::FilesOp::Read;
                    e.count = e.count.max(*count);
                    e.size = e.size.max(*size_bytes);
                }
                _ => {}
            }
        }
    }
    for b in &w.thp_burst {
        fp.anon += b.size_bytes;
        fp.procs += 1;
    }
    for c in &w.thpchallenge {
        fp.anon += c.size_bytes * c.threads as u64;
        fp.procs += c.threads;
    }
    fp.fio = fio_rings(spec);
    for (jobs, size, per_job) in &fp.fio {
        fp.procs += jobs;
        fp.fio_files += *jobs as u64 * per_job;
        fp.fio_disk += *jobs as u64 * per_job * size;
    }
    fp
}

/// The fitting of the run, as (pool, blocks to offline, why the pool instead of offlining):
/// the spec's `machine.hugetlb_pages` (a pool), or with `--fit-memory` the difference between
/// MemTotal and the spec's `machine.memory` taken out by offlining memory blocks
/// ([`memblock::plan`]), or where that is unavailable (or `fit_by_hugetlb`) held in a hugetlb
/// pool ([`hugetlb::plan`]).
type Fitting = (
    Option<hugetlb::Fit>,
    Option<memblock::OfflinePlan>,
    Option<String>,
);

fn fit_memory(spec: &Spec, opts: &HostOptions, meminfo: &str) -> Result<Fitting, HostError> {
    if spec.machine.hugetlb_pages > 0 {
        if opts.fit_memory {
            return Err(HostError::Unsupported(format!(
                "{}: --fit-memory with machine.hugetlb_pages (the spec already sets the pool)",
                spec.file
            )));
        }
        let pool = hugetlb::exact(meminfo, hugetlb::current_pages()?, spec.machine.hugetlb_pages)?;
        return Ok((Some(pool), None, None));
    }
    if !opts.fit_memory {
        return Ok((None, None, None));
    }
    let target = spec
        .machine
        .memory_bytes
        .ok_or_else(|| HostError::Unsupported(format!("{}: --fit-memory needs machine.memory", spec.file)))?;
    let why = if opts.fit_by_hugetlb {
        "the hugetlb pool asked for".to_string()
    } else {
        match memblock::plan(Path::new(memblock::MEMORY_SYSFS), meminfo, target)? {
            memblock::Availability::Offline(p) => return Ok((None, Some(p), None)),
            memblock::Availability::Unavailable(why) => why,
        }
    };
    let pool = hugetlb::plan(meminfo, hugetlb::current_pages()?, target)?;
    Ok((Some(pool), None, Some(why)))
}

/// Offlining migrates what the blocks hold into the rest of the machine: refused when
/// MemAvailable (`avail`) minus the memory taken would go under the floor.
fn check_offline_floor(o: &memblock::OfflinePlan, avail: u64, floor: u64) -> Result<(), HostError> {
    if avail.saturating_sub(o.bytes()) < floor {
        return Err(HostError::Unsafe(format!(
            "--fit-memory: taking {} offline ({} blocks) would leave MemAvailable {} under the \
             floor of {} (--floor)",
            gib(o.bytes()),
            o.blocks,
            gib(avail.saturating_sub(o.bytes())),
            gib(floor)
        )));
    }
    Ok(())
}

/// The anonymous cap, the MemAvailable floor ([`MemoryBudget::after_workload`]) and the
/// slab-file limit.
fn check_memory_limits(opts: &HostOptions, fp: &Footprint, budget: &MemoryBudget) -> Result<(), HostError> {
    let (anon, pipes, files) = (fp.anon, fp.pipes, fp.files);
    if anon + pipes > opts.anon_cap_bytes {
        return Err(HostError::Unsafe(format!(
            "the workload maps {} of anonymous memory and pipe buffers, over the cap of {}",
            gib(anon + pipes),
            gib(opts.anon_cap_bytes)
        )));
    }
    if budget.after_workload() < opts.mem_floor_bytes {
        return Err(HostError::Unsafe(format!(
            "{} minus the workload's {} is under the floor of {}",
            budget,
            gib(anon + pipes),
            gib(opts.mem_floor_bytes)
        )));
    }
    if files > opts.max_slab_files {
        return Err(HostError::Unsafe(format!(
            "slab steps would create {files} files, over the limit of {}",
            opts.max_slab_files
        )));
    }
    // The files of `files` steps: a dentry and an inode each, like the slab steps' files.
    let set_files: u64 = fp.file_sets.values().map(|s| s.count).sum();
    if files + set_files > opts.max_slab_files {
        return Err(HostError::Unsafe(format!(
            "slab and files steps would create {} files, over the limit of {}",
            files + set_files,
            opts.max_slab_files
        )));
    }
    Ok(())
}

/// The run directory's parent exists and its filesystem has room (bytes with 1 GiB to spare,
/// inodes with 10,000) for the run's files.
fn check_disk(parent: &Path, fp: &Footprint) -> Result<(), HostError> {
    if !parent.is_dir() {
        return Err(HostError::io(
            parent.display().to_string(),
            std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        ));
    }
    let sets = || fp.file_sets.values();
    let disk: u64 = fp.read_files.values().sum::<u64>()
        + fp.write_files.values().sum::<u64>()
        + fp.fio_disk
        + sets()
            .map(|s| s.count * s.size.next_multiple_of(4096))
            .sum::<u64>();
    let set_files: u64 = sets().map(|s| s.count).sum();
    if let Some((bytes, inodes)) = statvfs(parent) {
        if disk + GIB > bytes {
            return Err(HostError::Unsafe(format!(
                "the run's files need {} but {} has {} free",
                gib(disk),
                parent.display(),
                gib(bytes)
            )));
        }
        if fp.files + fp.fio_files + set_files + 10_000 > inodes {
            return Err(HostError::Unsafe(format!(
                "slab steps, files steps and fio need {} inodes, {} has {inodes} free",
                fp.files + fp.fio_files + set_files,
                parent.display()
            )));
        }
    }
    Ok(())
}

/// Things to know about this machine and how the run fits it (the plan's `note:` lines), in
/// order: the run directory's filesystem, the host's features, then the spec against the machine.
fn machine_notes(
    spec: &Spec,
    w: &WorkloadSpec,
    opts: &HostOptions,
    parent: &Path,
    fit: bool,
    offline: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    let facts = procfs::host_facts();
    if !fio_rings(spec).is_empty()
        && procfs::mount_options(parent).is_some_and(|o| o.split(',').any(|x| x == "discard"))
    {
        notes.push(format!(
            "{} is on a filesystem mounted with `discard`: every unlink waits for a discard \
             (370 to 1,800 a second on this VM's ext4), so fio's deletes and the removal of the \
             run's files at the end are slow",
            parent.display()
        ));
    }
    if facts.contains("page_reporting_reported_kib") {
        notes.push(
            "free page reporting is active: THP faults on memory reported to the hypervisor cost \
             ~5 ms instead of ~0.2 ms (reported_kib is recorded in proc_start/proc_end[\"host\"])"
                .into(),
        );
    }
    if facts
        .lines()
        .any(|l| l.starts_with("kdamond_threads ") && l != "kdamond_threads 0")
    {
        notes.push("DAMON (kdamond) runs: idle page cache may be reclaimed behind the workload".into());
    }
    if !std::fs::read_to_string("/proc/pagetypeinfo").is_ok_and(|t| t.contains("Number of mixed blocks")) {
        notes.push(
            "no \"Number of mixed blocks\" in /proc/pagetypeinfo: samples report mixed_blocks = 0".into(),
        );
    }
    if opts.trace {
        notes.push(match trace::tracefs_mount() {
            Some(m) => format!("tracing in a private instance under {}", m.display()),
            None => "tracefs not mounted: it will be mounted for the run and unmounted after".into(),
        });
    }
    notes.extend(spec_vs_machine_notes(spec, w, opts, fit, offline));
    notes
}

/// Where the spec and this machine differ (memory, CPUs), steps that act on the whole machine,
/// and a `run.trace` that tracing off will not record.
fn spec_vs_machine_notes(
    spec: &Spec,
    w: &WorkloadSpec,
    opts: &HostOptions,
    fit: bool,
    offline: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    let total = procfs::read("/proc/meminfo")
        .ok()
        .and_then(|t| procfs::meminfo_bytes(&t, "MemTotal"))
        .unwrap_or(0);
    if fit {
        notes.push(format!(
            "with the pool the zones still span {}: their watermarks (min {} pages in all) are \
             the large machine's, and compaction scans past the pool's blocks",
            gib(total),
            procfs::read("/proc/zoneinfo")
                .ok()
                .and_then(|z| procfs::zone_min_pages(&z))
                .map_or("?".to_string(), |p| p.to_string())
        ));
    } else if offline {
        notes.push(
            "the blocks taken offline leave the zones: watermarks and compaction are those of the \
             smaller machine (the result records the zones once fitted)"
                .into(),
        );
    } else if let Some(m) = spec.machine.memory_bytes {
        if m.abs_diff(total) > total / 10 {
            notes.push(format!(
                "the spec's machine.memory ({}) is the simulator's; this machine has {} \
                 (MemTotal), and the workload runs at the spec's absolute sizes \
                 (--fit-memory takes the difference offline)",
                gib(m),
                gib(total)
            ));
        }
    }
    if spec.machine.page_reporting_given {
        // §32: the simulator's device; the host engine never touches page reporting.
        let here = crate::confounders::read()
            .page_reporting
            .and_then(|p| p.order)
            .filter(|&o| o <= 10);
        if here != spec.machine.page_reporting_order {
            let word = |o: Option<u32>| o.map_or("off".to_string(), |o| o.to_string());
            notes.push(format!(
                "the spec's machine.page_reporting_order ({}) is the simulator's; this machine's                  free page reporting is {} and the run leaves it so",
                word(spec.machine.page_reporting_order),
                match here {
                    Some(o) => format!("at order {o}"),
                    None => "off (no device)".to_string(),
                }
            ));
        }
    }
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if cpus > 0 && cpus as u32 != spec.machine.cpus {
        notes.push(format!(
            "the spec's machine.cpus is {}; this machine has {cpus} online CPUs",
            spec.machine.cpus
        ));
    }
    let global: Vec<&str> = w
        .task
        .iter()
        .flat_map(|t| &t.steps)
        .filter_map(|s| match s {
            TaskStep::CompactMemory => Some("compact_memory"),
            TaskStep::DropCaches => Some("drop_caches"),
            _ => None,
        })
        .collect();
    if !global.is_empty() {
        notes.push(format!(
            "{} step(s) act on the whole machine, not only on this workload",
            global.join(", ")
        ));
    }
    if !spec.run.trace.is_empty() && !opts.trace {
        notes.push("the spec's run.trace is recorded only with tracing on (HostOptions::trace)".into());
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions() {
        assert_eq!(kernel_version("6.18.44-fc-v657"), Some((6, 18)));
        assert_eq!(kernel_version("5.15.0"), Some((5, 15)));
        assert!(kernel_version("6.9") < Some(MIN_KERNEL));
        assert!(kernel_version("6.15-rc1") >= Some(MIN_KERNEL));
        assert_eq!(kernel_version("x"), None);
    }

    #[test]
    fn footprint_peak_and_loops() {
        let spec = fraglab_spec::parse_spec(
            r#"
[machine]
memory = "1GiB"
[workload]
duration = "10s"
[[workload.task]]
loops = 3
steps = [
  { mmap = "a", size = "64MiB" },
  { mmap = "b", size = "32MiB" },
  { munmap = "a" },
  { pipes = 10 },
  { slab = 5 },
]
"#,
            "t.toml",
        )
        .unwrap();
        let t = &spec.workload.unwrap().task[0];
        let (a, p, f) = task_footprint(t);
        // Peak: a + b live at once; second pass: b (kept) + a again.
        assert_eq!(a, 96 << 20);
        assert_eq!(p, 30);
        assert_eq!(f, 15 * FILES_PER_SLAB_PAGE);
    }

    const POOL: &str = "[machine]\nmemory = \"1GiB\"\n[workload]\nduration = \"10s\"\n\
                        [[workload.task]]\nname = \"pool\"\nsteps = [{ nr_hugepages = 4 }, \
                        { nr_hugepages = 64 }, { nr_hugepages = 0 }]\n";

    fn step_check(text: &str, _opts: &HostOptions, before: u64) -> Result<Option<u64>, HostError> {
        let spec = fraglab_spec::parse_spec(text, "t.toml").unwrap();
        let w = supported_workload(&spec)?;
        let step = nr_hugepages_step(w);
        check_nr_hugepages_step(&spec, step, before)
    }

    /// §28.1: the `nr_hugepages` step runs on the host; the largest count is the one planned.
    #[test]
    fn s28_1_nr_hugepages_step_is_planned_at_its_largest_count() {
        assert_eq!(step_check(POOL, &HostOptions::default(), 0).unwrap(), Some(64));
        let none = POOL
            .replace("nr_hugepages = 64", "compute = \"1ms\"")
            .replace("{ nr_hugepages = 4 }, ", "");
        let none = none.replace(", { nr_hugepages = 0 }", "");
        assert_eq!(step_check(&none, &HostOptions::default(), 0).unwrap(), None);
    }

    /// §28.1: with --fit-memory the step is accepted (its count is on top of the fit's pool).
    #[test]
    fn s28_1_nr_hugepages_step_is_accepted_with_fit_memory() {
        let opts = HostOptions {
            fit_memory: true,
            ..HostOptions::default()
        };
        assert_eq!(step_check(POOL, &opts, 0).unwrap(), Some(64));
    }

    /// §28.1: with `[machine] hugetlb_pages` the step is accepted (on top of the machine's pool).
    #[test]
    fn s28_1_nr_hugepages_step_is_accepted_with_hugetlb_pages() {
        let text = POOL.replace("memory = \"1GiB\"\n", "memory = \"1GiB\"\nhugetlb_pages = 8\n");
        assert_eq!(step_check(&text, &HostOptions::default(), 0).unwrap(), Some(64));
    }

    /// §28.1: a pool already in use is refused (the run writes the old size back).
    #[test]
    fn s28_1_nr_hugepages_step_is_refused_with_a_pool_in_use() {
        let e = step_check(POOL, &HostOptions::default(), 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("vm.nr_hugepages is already 3"), "{e}");
    }

    /// §28.1: the largest step's pool must leave MemAvailable above the floor.
    #[test]
    fn s28_1_nr_hugepages_step_is_refused_under_the_memory_floor() {
        let spec = fraglab_spec::parse_spec(POOL, "t.toml").unwrap();
        let t = &spec.workload.as_ref().unwrap().task[0];
        let floor = 3 * GIB;
        assert!(check_step_floor(&spec, t, 64, floor + (128 << 20), floor).is_ok());
        let e = check_step_floor(&spec, t, 64, floor + (127 << 20), floor)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t.toml:5: workload.task \"pool\": nr_hugepages = 64"),
            "{e}"
        );
    }

    /// Issue 34: `--dry-run` prints MemAvailable as the run's preflight counts it — measured,
    /// minus the pool, the offlined blocks and the step's pool — and the refusal and the check
    /// after set-up use the same terms.
    #[test]
    fn the_dry_run_counts_memory_as_the_run_does() {
        let g = GIB;
        let b = MemoryBudget {
            measured: 20 * g,
            pool: 4 * g,
            offline: 3 * g,
            step_pool: g,
            workload: 6 * g,
        };
        assert_eq!(b.for_workload(), 12 * g);
        assert_eq!(b.after_workload(), 6 * g);
        assert_eq!(
            b.to_string(),
            "MemAvailable 20.00 GiB measured - hugetlb pool 4.00 GiB - blocks offline 3.00 GiB - \
             nr_hugepages step 1.00 GiB = 12.00 GiB for the workload"
        );
        // Nothing taken: the measured value alone.
        let plain = MemoryBudget {
            measured: 9 * g,
            ..Default::default()
        };
        assert_eq!(plain.to_string(), "MemAvailable 9.00 GiB measured");
        // After set-up the pool and blocks are gone from MemAvailable already: 13 GiB as
        // projected leaves 13 - 1 - 6 = 6 GiB, above a 3 GiB floor…
        assert!(b.check_after_setup(13 * g, 3 * g).is_ok());
        // …but 2.2 GiB less than projected (files, pinned cache, another process) is refused,
        // with the projection beside the measurement.
        let e = b
            .check_after_setup(10 * g + g / 2, 7 * g)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("after set-up MemAvailable is 10.50 GiB (the preflight projected 13.00 GiB"),
            "{e}"
        );
        assert!(
            e.contains("workload's 6.00 GiB and the nr_hugepages step's 1.00 GiB"),
            "{e}"
        );
        // Within 5 % of the projection: no note; 2.5 GiB under it: a note saying so.
        assert_eq!(b.setup_note(13 * g - g / 2), None);
        let n = b.setup_note(10 * g + g / 2).expect("a note");
        assert!(n.ends_with("2.50 GiB less)"), "{n}");
    }

    /// The refusal of the preflight names the measured value and each deduction.
    #[test]
    fn the_floor_refusal_shows_the_budget() {
        let fp = Footprint {
            anon: 6 * GIB,
            ..Default::default()
        };
        let b = MemoryBudget {
            measured: 9 * GIB,
            pool: GIB,
            workload: 6 * GIB,
            ..Default::default()
        };
        let e = check_memory_limits(&HostOptions::default(), &fp, &b)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("MemAvailable 9.00 GiB measured - hugetlb pool 1.00 GiB = 8.00 GiB for the workload minus the workload's 6.00 GiB is under the floor of 3.00 GiB"),
            "{e}"
        );
    }
}
