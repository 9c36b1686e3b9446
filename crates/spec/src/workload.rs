//! `[workload]` and `[cost]`: what a timed run (the discrete-event engine) executes, and the
//! cost-model overrides.

/// `[workload]`.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// The run stops at this simulated time even if the workload has not finished
    /// (`duration`, default 1 h).
    pub duration_ns: u64,
    pub kbuild: Vec<KbuildParams>,
    pub thp_burst: Vec<ThpBurstParams>,
    pub thpchallenge: Vec<ThpChallengeParams>,
    pub pgbench: Vec<PgbenchParams>,
    pub vm_scalability: Vec<VmScalabilityParams>,
    pub fio_smallfiles: Vec<FioSmallFilesParams>,
    pub task: Vec<TaskParams>,
}

/// `[[workload.fio_smallfiles]]`: mmtests' fio background for thpchallenge ("inefficiently
/// creating many small files", mmtests' thpchallenge): `jobs` writers each create files of
/// `file_size` in turn (a dentry and an inode, then a buffered write), deleting the oldest so
/// that all files together stay at `working_set` (default 1.5 × memory) — slab and page cache
/// allocated interleaved, the page cache reclaimed as it goes.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FioSmallFilesParams {
    pub line: usize,
    pub jobs: u32,
    pub file_size_bytes: u64,
    /// `None` = 1.5 × the machine's memory.
    pub working_set_bytes: Option<u64>,
    pub start_ns: u64,
    /// Stop after this long (default: the workload's duration).
    pub runtime_ns: Option<u64>,
}

/// The vm-scalability cases seed 000 measured (seed 000's published results).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VmScalabilityCase {
    /// `usemem -n N --readonly --unit 40KiB SIZE/N`: many small anonymous VMAs, read-only
    /// touch (zero-page mappings: page tables and VMA slab, no data pages).
    SmallAllocs,
    /// `usemem -n N -f FILE --readonly SIZE`: N processes read one sparse file through mmap.
    MmapPreadSeq,
    /// Per task a sparse file of SIZE/N, read twice concurrently by two `dd bs=4k`.
    LruFileReadtwice,
    /// Per task a sparse file of SIZE/N, read once through mmap.
    LruFileMmapRead,
    /// Per task a shared writable mapping of SIZE (default memory / cpus / 2) of a sparse file,
    /// prefaulted, then written and msync'ed repeatedly.
    Msync,
}

impl VmScalabilityCase {
    pub const ALL: [VmScalabilityCase; 5] = [
        VmScalabilityCase::SmallAllocs,
        VmScalabilityCase::MmapPreadSeq,
        VmScalabilityCase::LruFileReadtwice,
        VmScalabilityCase::LruFileMmapRead,
        VmScalabilityCase::Msync,
    ];

    pub fn name(self) -> &'static str {
        match self {
            VmScalabilityCase::SmallAllocs => "small-allocs",
            VmScalabilityCase::MmapPreadSeq => "mmap-pread-seq",
            VmScalabilityCase::LruFileReadtwice => "lru-file-readtwice",
            VmScalabilityCase::LruFileMmapRead => "lru-file-mmap-read",
            VmScalabilityCase::Msync => "msync",
        }
    }
}

/// `[[workload.vm_scalability]]`: one vm-scalability case.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct VmScalabilityParams {
    pub line: usize,
    pub case: VmScalabilityCase,
    /// Processes (`nr_task`); `None` = the machine's CPUs.
    pub tasks: Option<u32>,
    /// Total bytes (`ROTATE_BYTES`, or per task for msync); `None` = the case's default
    /// (1.5 × memory for the file cases and small-allocs, memory / cpus / 2 for msync).
    pub size_bytes: Option<u64>,
    /// small-allocs' VMA size (10 pages).
    pub unit_bytes: u64,
    /// How long the case runs (vm-scalability's `runtime`, 300 s).
    pub runtime_ns: u64,
    pub start_ns: u64,
    /// The file system's mapping kind for the file cases.
    pub mapping: crate::MappingKind,
}

/// `[[workload.pgbench]]`: seed 002's pgbench simple-update (seed 002's published results).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PgbenchParams {
    pub line: usize,
    pub clients: u32,
    pub client_private_bytes: u64,
    pub data_bytes: u64,
    pub wal_bytes: u64,
    pub tx_cpu_ns: u64,
    pub tx_data_bytes: u64,
    pub tx_wal_bytes: u64,
    /// WAL bytes a transaction writes while a checkpoint runs (`fpw_wal_write`): full-page
    /// images of the pages it modifies first after the checkpoint's redo point, flushed by
    /// group commit in larger writes (default 64 KiB: a costly folio order).
    pub fpw_wal_bytes: u64,
    pub checkpoint_ns: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_write_bytes: u64,
    /// Spread each checkpoint's writes over this long (PostgreSQL's
    /// checkpoint_completion_target × checkpoint_timeout); 0 = write as fast as possible.
    pub checkpoint_spread_ns: u64,
    pub duration_ns: u64,
}

/// `[[workload.thpchallenge]]`: mmtests' THP fault benchmark (mmtests' thpchallenge):
/// `threads` threads each map `size` and fault it in 2 MiB steps.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ThpChallengeParams {
    pub line: usize,
    pub threads: u32,
    pub size_bytes: u64,
    pub madvised: bool,
    pub hold_ns: u64,
    /// When the threads start (e.g. after a background load has warmed up).
    pub start_ns: u64,
}

/// `[[workload.kbuild]]`: a parallel kernel build (make -jN), `iterations` builds in a row.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct KbuildParams {
    pub line: usize,
    pub jobs_parallel: u32,
    pub jobs: u32,
    pub iterations: u32,
    pub job_anon_bytes: u64,
    pub job_cpu_ns: u64,
    pub source_bytes: u64,
    pub job_read_bytes: u64,
    pub job_slab_bytes: u64,
    pub job_obj_bytes: u64,
    /// The size of one file of the source tree (`source_file`, default 64 KiB): the tree is
    /// `source / source_file` files, each with a dentry and an inode once looked up.
    pub source_file_bytes: u64,
    /// `untar = true`: each build starts by unpacking its source tree afresh (a sequential
    /// read of the tarball, a dentry, an inode and dirty page cache for every file) instead of
    /// reading one tree that is on disk from the start.
    pub untar: bool,
    /// With `untar`, the trees of the last `trees` builds are kept (default 1); the oldest is
    /// deleted (its page cache, dentries and inodes freed) before the next is unpacked.
    pub trees: u32,
    /// `numa_node` and `mempolicy`: where the tasks run and allocate.
    pub numa: fraglab_types::numa::NumaBind,
}

/// `[[workload.thp_burst]]`: the seed-001 "Hugealloc" process, bursts of THP faults (madvised
/// unless `madvised = false`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ThpBurstParams {
    pub line: usize,
    pub interval_ns: u64,
    pub size_bytes: u64,
    pub hold_ns: u64,
    pub bursts: u32,
    pub start_ns: u64,
    /// `MADV_HUGEPAGE` on the burst's region (default true): under THP `defrag = madvise`
    /// the faults may then reclaim and compact directly; without it they take a THP only
    /// from the free lists (`vma_thp_gfp_mask`, docs/model §11.2).
    pub madvised: bool,
    /// `numa_node` and `mempolicy`: where the tasks run and allocate.
    pub numa: fraglab_types::numa::NumaBind,
}

/// The cost-model constants a `[cost]` table may override (nanoseconds; the `_x1000` ones in
/// thousandths of a nanosecond). The simulator's `CostModel` has exactly these.
pub const COST_KEYS: &[&str] = &[
    "fault_base_ns",
    "zero_page_ns",
    "migrate_page_ns",
    "migrate_scan_pfn_ns_x1000",
    "free_scan_pfn_ns_x1000",
    "compact_run_ns",
    "isolate_page_ns",
    "reclaim_scan_page_ns",
    "reclaim_clean_ns",
    "drain_ipi_ns",
    "drain_page_ns",
    "context_switch_ns",
    "read_io_ns",
    "write_io_ns",
    "read_req_ns",
    "read_page_ns",
    "loop_read_req_ns",
    "loop_read_page_ns",
    "alloc_fast_ns",
    "free_page_ns",
    "file_create_ns",
    "file_unlink_ns",
    "host_fault_ns",
    "zone_lock_chunk_ns",
];

const DURATION_FORM: &str = "expected a duration such as \"500ms\"; units ns, us, ms, s, min, h";

/// Parses a duration: `"<n><unit>"` with unit ns, us, ms, s, min or h (spaces allowed before the
/// unit). The error quotes `s`.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim_start() {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(format!("\"{s}\" is not a duration ({DURATION_FORM})")),
    };
    if num.is_empty() {
        return Err(format!("\"{s}\" is not a duration ({DURATION_FORM})"));
    }
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("\"{s}\" is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration("2 s"), Ok(2_000_000_000));
        assert_eq!(parse_duration("3min"), Ok(180_000_000_000));
        assert_eq!(parse_duration("7us"), Ok(7_000));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("5 days").is_err());
        assert!(parse_duration("99999999999999h")
            .unwrap_err()
            .ends_with("too large"));
    }
}

/// `[[workload.task]]`: `count` instances of a program of steps, repeated `loops` times, started
/// at `start` (the workload primitives of issue 5).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TaskParams {
    pub line: usize,
    pub name: String,
    pub count: u32,
    pub start_ns: u64,
    pub loops: u32,
    pub steps: Vec<TaskStep>,
    /// `after = "NAME"`: the instances start when every instance of the task(s) named NAME
    /// has finished its program, `start_ns` after that moment (phases, issue 19).
    pub after: Option<String>,
    /// `background = true`: background load. The run ends when every task without it has
    /// finished (or at the duration); background instances still running are stopped then
    /// (the simulator's daemon tasks, SIGKILL on the host).
    pub background: bool,
    /// `numa_node` and `mempolicy`: where the tasks run and allocate.
    pub numa: fraglab_types::numa::NumaBind,
}

/// One step of a task program (`steps = [{ mmap = "a", size = "64MiB" }, ...]`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum TaskStep {
    /// An anonymous mapping named `vma` of `size_bytes`, MADV_HUGEPAGE if `madvise`;
    /// MAP_LOCKED if `locked` (populated and mlocked at mmap, docs/model §29.1.2).
    Mmap {
        vma: String,
        size_bytes: u64,
        madvise: bool,
        locked: bool,
    },
    /// Write-touch every page of `vma` (in address order, or in a random order); with a
    /// `stride` above 4 KiB only the first page of every `stride` bytes.
    Touch {
        vma: String,
        random: bool,
        stride: u64,
    },
    /// MADV_DONTNEED of [`offset`, `offset + length`) of `vma`; with a `stride`, of every
    /// [`offset + k·stride`, `+ length`) inside the mapping, in address order, one call each.
    Dontneed {
        vma: String,
        offset: u64,
        length: u64,
        stride: Option<u64>,
    },
    Munmap {
        vma: String,
    },
    /// Run on the CPU for this long.
    Compute {
        ns: u64,
    },
    Sleep {
        ns: u64,
    },
    /// Buffered read of `length` bytes of `file` (sequential from `offset`, or random 4 KiB
    /// pages of the file when `random`), the file being `file_size` long.
    Read {
        file: String,
        offset: u64,
        length: u64,
        file_size: u64,
        random: bool,
        /// The file's mapping kind (the first step naming the file set it; default XFS).
        mapping: crate::MappingKind,
    },
    /// Buffered write (iomap) of `length` bytes at `offset` of `file`, in `chunk`-byte writes.
    Write {
        file: String,
        offset: u64,
        length: u64,
        chunk: u64,
        /// The file's mapping kind (the first step naming the file set it; default XFS).
        mapping: crate::MappingKind,
    },
    /// Allocate `count` small kernel objects (order-0 pages) held until the task ends:
    /// reclaimable slab (dentries/inodes, shrinkable) or unmovable (pipe buffers).
    Slab {
        count: u64,
        reclaimable: bool,
    },
    /// Unlink `file`: its page cache is truncated (dirty pages dropped unwritten).
    Delete {
        file: String,
    },
    CompactMemory,
    DropCaches,
    /// Write `count` to /proc/sys/vm/nr_hugepages (the 2 MiB hugetlb pool, docs/model
    /// §28.1): the pool grows until it holds `count` pages or an allocation fails, or shrinks.
    NrHugepages {
        count: u64,
    },
    // mlock (H2, docs/model §29).
    /// mlock(2) of the whole of `vma`: VM_LOCKED, every page populated (faulted like a
    /// touch) and mlocked (§29.1.2). Later faults in the mapping are mlocked too; munmap
    /// munlocks (§29.1.5).
    Mlock {
        vma: String,
    },
    /// munlock(2) of the whole of `vma` (§29.1.5).
    Munlock {
        vma: String,
    },
    /// `{ measure = true }`: the measured part of the run starts the first time any task runs
    /// this step (at most once per run); before it is the prelude (phases, issue 19).
    Measure,
    // H5: the page-cache census (issue 19 item 1).
    /// Record the page-cache folio order distribution of `file` now (pages and folios per order
    /// 0..=10, docs/model §30.2 on the host, the page cache's index in the simulator) into
    /// the result's `census`.
    Census {
        file: String,
    },
    // Issue 19 item 3 (H3): free, files, fadvise.
    /// Free every `every`th object (the `every`th, `2·every`th, ...) of this task's population
    /// of `slab` (reclaimable, `reclaimable = true`) or `pipes` objects now.
    Free {
        reclaimable: bool,
        every: u64,
    },
    /// `{ free = "pipes", every_page = N }` (issue 33): free the pipe-buffer pages of this
    /// task's `pipes` population whose place in it is a multiple of `every` — the `every`th,
    /// `2·every`th, ... page the task's `pipes` steps ever allocated, counted from 1 in
    /// allocation order (pages freed before keep their place) — single pages, not whole pipes.
    /// A task frees its pipes either whole ([`TaskStep::Free`]) or by page, not both (the host
    /// lays its pipes out for one or the other: [`TaskParams::pipe_lanes`]).
    FreePipePages {
        every: u64,
    },
    /// A set of `count` small files `set/0..count-1` of `size_bytes` each: created (a dentry, an
    /// inode and a buffered write each), read whole (in order, or in a seeded random order) or
    /// deleted (unlinked).
    Files {
        set: String,
        count: u64,
        size_bytes: u64,
        op: FilesOp,
        random: bool,
        /// The set's mapping kind (the first step naming the set set it; default XFS).
        mapping: crate::MappingKind,
        /// `op = "delete"` only (issue 33; 1 for the other ops): the step takes every `every`th
        /// file of the set, `set/{every-1}`, `set/{2·every-1}`, ... ([`TaskStep::files_selected`]).
        every: u64,
    },
    /// `posix_fadvise(file, offset, length, advice)`; `length` `None` = to the end of the file.
    Fadvise {
        file: String,
        advice: Fadvice,
        offset: u64,
        length: Option<u64>,
    },
    /// `{ sample = "NAME" }` (issue 33): a named sample now — the record the periodic samples
    /// are (`result::Sample`) plus the pageblock census of each zone
    /// (`result::pageblock::ZoneCensus`) — into the result's `named_samples`. Like `measure`
    /// it takes no time: it is taken where the task's program reaches it.
    Sample {
        name: String,
    },
}

/// What a `files` step does to its set.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilesOp {
    Create,
    Read,
    Delete,
}

impl FilesOp {
    pub const ALL: [FilesOp; 3] = [FilesOp::Create, FilesOp::Read, FilesOp::Delete];

    pub fn name(self) -> &'static str {
        match self {
            FilesOp::Create => "create",
            FilesOp::Read => "read",
            FilesOp::Delete => "delete",
        }
    }
}

/// `POSIX_FADV_*` (mm/fadvise.c `generic_fadvise`, docs/model §23.6).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fadvice {
    Normal,
    Random,
    Sequential,
    Willneed,
    Dontneed,
}

impl Fadvice {
    pub const ALL: [Fadvice; 5] = [
        Fadvice::Dontneed,
        Fadvice::Sequential,
        Fadvice::Willneed,
        Fadvice::Random,
        Fadvice::Normal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fadvice::Normal => "normal",
            Fadvice::Random => "random",
            Fadvice::Sequential => "sequential",
            Fadvice::Willneed => "willneed",
            Fadvice::Dontneed => "dontneed",
        }
    }
}

impl TaskStep {
    /// The files of a set of `count` a `files` step with `every` takes, in set order: those
    /// whose number plus one is a multiple of `every` (all of them for 1).
    pub fn files_selected(count: u64, every: u64) -> impl Iterator<Item = u64> {
        let every = every.max(1);
        (1..=count / every).map(move |k| k * every - 1)
    }

    /// The file or file set this step names with its mapping kind, if it sets one (`read`,
    /// `write`, `files`); `delete` and `fadvise` name a file without a kind.
    pub fn file(&self) -> Option<(&str, Option<crate::MappingKind>)> {
        match self {
            TaskStep::Read { file, mapping, .. } | TaskStep::Write { file, mapping, .. } => {
                Some((file, Some(*mapping)))
            }
            TaskStep::Files { set, mapping, .. } => Some((set, Some(*mapping))),
            TaskStep::Delete { file } | TaskStep::Fadvise { file, .. } => Some((file, None)),
            _ => None,
        }
    }
}

impl TaskParams {
    /// Pipe-buffer pages this task's `pipes` steps allocate over its whole program (every loop):
    /// its pipe population, which stays until the task ends unless freed.
    pub fn pipe_pages(&self) -> u64 {
        let per_loop: u64 = self
            .steps
            .iter()
            .map(|s| match s {
                TaskStep::Slab {
                    count,
                    reclaimable: false,
                } => *count,
                _ => 0,
            })
            .sum();
        per_loop.saturating_mul(self.loops as u64)
    }

    /// The pipes a host task fills side by side (issue 33): the least common multiple of its
    /// `every_page` values ([`TaskStep::FreePipePages`]), 1 without. Page `k` (from 0) of the
    /// task's pipe population goes to lane `k mod lanes`, so a lane holds pages of one residue
    /// modulo every `every_page`, and freeing every Nth page is closing whole lanes' pipes. The
    /// parser keeps it at most [`MAX_PIPE_LANES`].
    pub fn pipe_lanes(&self) -> u64 {
        self.steps
            .iter()
            .filter_map(|s| match s {
                TaskStep::FreePipePages { every } => Some(*every),
                _ => None,
            })
            .fold(1, lcm)
    }
}

/// The most pipes a host task fills side by side for its `every_page` frees
/// ([`TaskParams::pipe_lanes`]): two descriptors each, held for the task's life.
pub const MAX_PIPE_LANES: u64 = 1024;

/// Least common multiple (saturating).
pub(crate) fn lcm(a: u64, b: u64) -> u64 {
    fn gcd(mut a: u64, mut b: u64) -> u64 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    if a == 0 || b == 0 {
        return 0;
    }
    (a / gcd(a, b)).saturating_mul(b)
}

impl WorkloadSpec {
    /// Every file and file set the tasks' steps name, in the order first named, with its
    /// mapping kind (a file named only by `delete` or `fadvise` steps is XFS-like, as the
    /// simulator makes it). A file set is listed by its name (its files are `SET/0`, ...).
    pub fn task_files(&self) -> Vec<(String, crate::MappingKind)> {
        let steps = || self.task.iter().flat_map(|t| &t.steps).filter_map(TaskStep::file);
        let mut out: Vec<(String, crate::MappingKind)> = Vec::new();
        for (f, _) in steps() {
            if !out.iter().any(|(n, _)| n == f) {
                // The parser gave every read, write and files step naming `f` the same kind.
                let kind = steps()
                    .find_map(|(g, k)| if g == f { k } else { None })
                    .unwrap_or(crate::MappingKind::Xfs);
                out.push((f.to_string(), kind));
            }
        }
        out
    }
}
