//! fraglab-spec: the workload spec of a fraglab run — a TOML file describing the machine, kernel
//! knobs, run options and a list of explicit operations — parsed and validated, with no
//! behaviour of its own.
//!
//! Every problem is reported as one [`SpecError`] line naming the file, the 1-based line of the
//! offending key or value, the key, and the expected form:
//!
//! ```text
//! spec.toml:14: key op[2].order: 11 is out of range (expected 0..=10)
//! ```
//!
//! # Format
//!
//! ```toml
//! name = "claim-and-steal"        # optional
//! description = "..."             # optional
//!
//! [machine]
//! memory = "4GiB"      # bytes: an integer, or "<n>" + B/KiB/MiB/GiB/TiB (or K/M/G/T); 2 MiB..=1 TiB
//! cpus = 2             # 1..=256, default 2
//! dma = true           # ZONE_DMA in the default x86-64 layout, default true
//! swap = "1GiB"        # a swap device of this size; default none
//! hugetlb_pages = 0    # 2 MiB pages of the hugetlb pool (vm.nr_hugepages) taken at boot, default 0;
//!                      # the host engine reserves the same pool for the run
//! read_ahead_kb = 128  # the block device's read-ahead (ra_pages = read_ahead_kb / 4), default
//!                      # 128; the host engine sets the run directory's device only when given
//! max_sectors_kb = 128 # the device's largest request (io_pages = max_sectors_kb / 4, §23.1): a read
//!                      # larger than ra_pages may get a window up to io_pages; default 128 (a new
//!                      # bdi's io_pages, 32); the host engine records the device's value only
//! page_reporting_order = 9   # free page reporting (virtio-balloon, §32) of free chunks of this
//!                      # order and up, 0..=10, or "off" (the default: no device); simulator only
//!
//! # Instead of `memory` (and `dma`): explicit zones, in kernel zone order and increasing pfn
//! # order, without overlap. present defaults to spanned, managed to present.
//! # [[machine.zone]]
//! # name = "DMA32"     # DMA (below 16 MiB), DMA32 (below 4 GiB), Normal, Movable (empty only)
//! # start_pfn = 4096
//! # spanned = 1044480
//! # present = 782336
//! # managed = 772917
//!
//! [knobs]              # see KNOBS; `vm.x = 1`, `[knobs.vm] x = 1` and `"vm.x" = 1` are the same,
//! "vm.min_free_kbytes" = 67584   # and `.` may stand for `/` as with sysctl
//!
//! [model]              # fraglab's model switches, not kernel knobs; see MODEL_SWITCHES
//! policy = "linux-6.18"  # the policy plug-in (`fraglab policy list`); the switches below stack
//!                      # the seed series' variants on it as layers (docs/policies.md)
//! folio_mode = "migrate_free_split"   # how compaction treats large folios (Zi Yan's 2024
//!                      # series): skip_large (before it), split_large (patch 1),
//!                      # migrate_no_free_split (patch 2), migrate_free_split (6.18, default)
//! defrag_stage = "kswapd_watermarks"  # what vm.defrag_mode = 1 turns on: vanilla,
//!                      # nofragment_only, kswapd_assist, kswapd_watermarks (default)
//! costly_order_policy = "baseline"    # page-cache costly orders: baseline, v1_iomap,
//!                      # v2_filemap_costly, v3_filemap_opportunistic, v4_kcompactd_background
//! v4_position = "before_initial_compaction"   # or after_initial_compaction
//! xa_nodes = false     # page-cache xarray nodes as reclaimable slab (default false)
//! sched = "fifo"       # how simulated CPUs pick tasks: fifo (default) or fair (CFS-like)
//!
//! [run]
//! seed = 1             # default 1
//! debug_vm = false     # default false
//! debug_vm_every = 10000   # with debug_vm, a timed run checks every N task steps
//! trace = ["kmem:mm_page_alloc", "compaction:*"]   # see TRACE_EVENTS; kmem:*, compaction:*,
//!                      # migrate:*, vmscan:* and damon:* select a group; default none
//! scale = "1/8"        # a scale model: machine and workload divided by K (a power of two,
//!                      # 2..=1024) with every per-GiB pressure kept (`scale`); default none
//!
//! # Each [[op]] has exactly one action key (alloc, free, print, drain_all_pages,
//! # compact_memory, compact, kcompactd, proactive_compact, fault, kswapd, write, read,
//! # nr_hugepages, page_reporting) and only
//! # that action's other keys. A spec has either [[op]]s (a timeless run) or a [workload] (a
//! # timed run; see WorkloadSpec and the README), not both.
//!
//! [[op]]
//! alloc = "a"          # set name; appends if it exists
//! count = 100          # >= 1, default 1
//! order = 0            # 0..=10, default 0
//! gfp = "GFP_KERNEL"   # required: kernel gfp names joined by |
//! cpu = 0              # < machine.cpus, default 0
//! must_succeed = false # default false
//! kind = "kernel"      # the folios' owner: anon, file, slab, pagetable, kernel; default from
//!                      # the gfp: __GFP_MOVABLE -> anon, __GFP_RECLAIMABLE -> slab, else kernel
//! nofs = false         # kind = "file" only: the mapping's gfp lacks __GFP_FS (like XFS)
//!
//! [[op]]
//! free = "a"           # a set allocated by an earlier op
//! every = 2            # free members i with i % every == offset; default 1
//! offset = 0           # < every, default 0
//! cpu = 0
//!
//! [[op]]
//! print = "pageblocks" # buddyinfo, pagetypeinfo, zoneinfo, vmstat, pageblocks, trace, summary,
//!                      # folios, compaction, extfrag_index, unusable_index
//! zone = "Normal"      # only with pageblocks
//!
//! [[op]]
//! drain_all_pages = true   # only true
//!
//! [[op]]
//! compact_memory = true    # echo 1 > /proc/sys/vm/compact_memory; only true
//!
//! [[op]]
//! page_reporting = true    # free page reporting's pending pass, now (§32.2); only true
//!
//! [[op]]
//! compact = 9          # direct compaction (try_to_compact_pages) for order 1..=10
//! gfp = "GFP_TRANSHUGE"    # default GFP_TRANSHUGE
//! priority = "async"   # async, sync_light, sync_full; default async
//! cpu = 0              # < machine.cpus, default 0
//!
//! [[op]]
//! kcompactd = 9        # wake kcompactd for order 1..=10 and run one kcompactd_do_work
//! mode = "force"       # force (default: run it anyway) or wake (only if wakeup_kcompactd woke it)
//!
//! [[op]]
//! proactive_compact = true # one expiry of kcompactd's 500 ms timer (the proactive check)
//! mode = "timer"       # timer (default: the timeout ends now), tick (500 ms pass; honours the
//!                      # 32 s back-off), trigger (a proactiveness write), force (compact_node)
//!
//! [[op]]
//! nr_hugepages = 64    # echo 64 > /proc/sys/vm/nr_hugepages (0..=2^30): grow the 2 MiB hugetlb
//!                      # pool until it holds 64 or an allocation fails, or shrink it
//!
//! [[op]]
//! fault = "thp"        # anonymous faults on fresh 2 MiB ranges; the folios join the set
//! count = 16           # >= 1, default 1
//! madvised = true      # MADV_HUGEPAGE, default false
//! cpu = 0
//!
//! [[op]]
//! kswapd = true        # run kswapd, if awake, until it sleeps; only true
//!
//! [[op]]
//! write = "wal"        # a buffered write through iomap to file "wal"
//! length = "256KiB"    # required, >= 1 byte
//! offset = 0           # bytes, default 0
//! mapping = "xfs"      # first op naming the file: xfs (default), large_folios, no_large_folios
//! cpu = 0
//!
//! [[op]]
//! read = "data"        # a buffered read with readahead
//! length = "64KiB"     # required
//! offset = 0
//! file_size = "1GiB"   # default offset + length
//! mapping = "large_folios"
//!
//! [cost]               # cost-model overrides for timed runs, see COST_KEYS
//! read_io_ns = 100000
//! ```

use std::collections::BTreeMap;
use std::path::Path;

pub use fraglab_types::{CompactPriority, FolioKind, FolioMode, FsMetadata, Gfp, MappingKind, ZoneType};

pub mod docs;
mod error;
pub mod examples;
mod keys;
mod knobs;
mod model;
mod parse;
pub use parse::run::default_checkpoint_file;
pub mod result;
pub mod scale;
mod suggest;
mod tree;
mod workload;

pub use error::SpecError;
pub use keys::{spec_keys, KeyDef, KeyDefault, KeyKind, SpecKey};
pub use knobs::{find_knob, KnobDef, KnobKind, KnobValue, Read, INT_MAX, KNOBS};
pub use model::{
    find_model_switch, valid_policy_name, ModelSpec, ModelSwitchDef, DEFAULT_POLICY, MODEL_SWITCHES,
};
pub use parse::{
    parse_size, MAX_LFS_FILESIZE, MAX_MEMORY_BYTES, MAX_SPEC_BYTES, MIN_MEMORY_BYTES, WORK_FACTOR,
};
pub use workload::{
    parse_duration, Fadvice, FilesOp, FioSmallFilesParams, KbuildParams, PgbenchParams, TaskParams, TaskStep,
    ThpBurstParams, ThpChallengeParams, VmScalabilityCase, VmScalabilityParams, WorkloadSpec, COST_KEYS,
    MAX_PIPE_LANES,
};

/// The owner kind of an `alloc` op's folios (`kind`): the model's own [`FolioKind`] (anon, file,
/// slab, pagetable, kernel, with `name()`, `ALL` and `from_gfp()`), so the runner passes it on
/// without a conversion.
pub type FolioKindSpec = FolioKind;

/// The `priority` words of a `compact` op and the `enum compact_priority` each one selects.
pub const COMPACT_PRIORITIES: &[(&str, CompactPriority)] = &[
    ("async", CompactPriority::Async),
    ("sync_light", CompactPriority::SyncLight),
    ("sync_full", CompactPriority::SyncFull),
];

/// How a `kcompactd` op drives kcompactd (its `mode` key; docs/model §26.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KcompactdMode {
    /// Record the order and run `kcompactd_do_work` at once, whether or not `wakeup_kcompactd`
    /// would have woken the thread (the default, the op's behaviour before §26).
    Force,
    /// The kernel's `wakeup_kcompactd`: the loop runs only if the call woke kcompactd (it sleeps
    /// and `kcompactd_node_suitable` found a zone); otherwise the order stays recorded for the
    /// next timeout.
    Wake,
}

/// The `mode` words of a `kcompactd` op.
pub const KCOMPACTD_MODES: &[(&str, KcompactdMode)] =
    &[("force", KcompactdMode::Force), ("wake", KcompactdMode::Wake)];

/// How a `proactive_compact` op drives kcompactd (its `mode` key; docs/model §26.2–§26.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProactiveMode {
    /// kcompactd's wait times out now, whatever is left of its timeout (a 32 s back-off is not
    /// honoured); the loop serves a recorded order or runs the proactive check with its score
    /// thresholds (the default, the op's behaviour before §26).
    Timer,
    /// 500 ms pass: the timeout expires only once the wait has lasted its full timeout (500 ms,
    /// 32 s after a proactive run that did not lower the score, never at proactiveness 0).
    Tick,
    /// A non-zero write to `vm.compaction_proactiveness`: `proactive_compact_trigger` is set and
    /// kcompactd woken; the check still honours the score thresholds, a pending order runs after.
    Trigger,
    /// `compact_node(proactive)` now: no node-score check, no back-off (each zone still stops at
    /// its low threshold).
    Force,
}

/// The `mode` words of a `proactive_compact` op.
pub const PROACTIVE_MODES: &[(&str, ProactiveMode)] = &[
    ("timer", ProactiveMode::Timer),
    ("tick", ProactiveMode::Tick),
    ("trigger", ProactiveMode::Trigger),
    ("force", ProactiveMode::Force),
];

/// The trace events a spec may ask for in `run.trace`, with their `group:` prefix, in the order
/// `run.trace` lists them after expansion. `"kmem:*"` selects them all.
pub const TRACE_EVENTS: &[&str] = &[
    "kmem:mm_page_alloc",
    "kmem:mm_page_free",
    "kmem:mm_page_alloc_zone_locked",
    "kmem:mm_page_pcpu_drain",
    "kmem:mm_page_alloc_extfrag",
    "compaction:mm_compaction_isolate_migratepages",
    "compaction:mm_compaction_isolate_freepages",
    "compaction:mm_compaction_migratepages",
    "compaction:mm_compaction_begin",
    "compaction:mm_compaction_end",
    "compaction:mm_compaction_try_to_compact_pages",
    "compaction:mm_compaction_finished",
    "compaction:mm_compaction_suitable",
    "compaction:mm_compaction_deferred",
    "compaction:mm_compaction_defer_compaction",
    "compaction:mm_compaction_defer_reset",
    "compaction:mm_compaction_wakeup_kcompactd",
    "compaction:mm_compaction_kcompactd_wake",
    "compaction:mm_compaction_kcompactd_sleep",
    "migrate:mm_migrate_pages_start",
    "migrate:mm_migrate_pages",
    "vmscan:mm_vmscan_kswapd_sleep",
    "vmscan:mm_vmscan_kswapd_wake",
    "vmscan:mm_vmscan_wakeup_kswapd",
    "vmscan:mm_vmscan_direct_reclaim_begin",
    "vmscan:mm_vmscan_direct_reclaim_end",
    "vmscan:mm_vmscan_lru_isolate",
    "vmscan:mm_vmscan_lru_shrink_inactive",
    "vmscan:mm_vmscan_lru_shrink_active",
    "vmscan:mm_vmscan_throttled",
    "vmscan:mm_vmscan_reclaim_pages",
    "damon:damos_before_apply",
];

/// The events `fraglab trace diff` compares (issue 32), as `group:name`: what both engines
/// record when asked for a full trace (the simulator's `--trace-out` when the spec's
/// `run.trace` is empty, the host engine's `HostOptions::trace_to`). Each is in
/// [`TRACE_EVENTS`].
pub const DIFF_EVENTS: &[&str] = &[
    "compaction:mm_compaction_begin",
    "compaction:mm_compaction_end",
    "compaction:mm_compaction_isolate_migratepages",
    "compaction:mm_compaction_isolate_freepages",
    "compaction:mm_compaction_migratepages",
    "compaction:mm_compaction_finished",
    "compaction:mm_compaction_try_to_compact_pages",
    "compaction:mm_compaction_deferred",
    "compaction:mm_compaction_defer_compaction",
    "compaction:mm_compaction_defer_reset",
    "compaction:mm_compaction_kcompactd_wake",
    "compaction:mm_compaction_wakeup_kcompactd",
    "vmscan:mm_vmscan_kswapd_wake",
    "vmscan:mm_vmscan_kswapd_sleep",
    "vmscan:mm_vmscan_direct_reclaim_begin",
    "vmscan:mm_vmscan_direct_reclaim_end",
    "vmscan:mm_vmscan_lru_shrink_inactive",
    "kmem:mm_page_alloc_extfrag",
    // DAMON's pageout (§27): the regions a scheme is applied to, and what `reclaim_pages`
    // did with their folios. A kernel without DAMON's tracepoints records the others.
    "vmscan:mm_vmscan_reclaim_pages",
    "damon:damos_before_apply",
];

/// A parsed, validated spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The file name the spec was parsed under (for runtime errors, see [`Spec::op_where`]).
    pub file: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub machine: MachineSpec,
    /// The knobs the spec sets (only those; defaults are in [`KNOBS`]), under their canonical
    /// names from [`KNOBS`], values normalised to the knob's kind.
    pub knobs: BTreeMap<String, KnobValue>,
    /// `[model]`: fraglab's model switches.
    pub model: ModelSpec,
    pub run: RunSpec,
    /// `[host]`: host-engine settings (the simulator does not read them).
    pub host: HostSpec,
    /// `[damon]`: the simulator's kdamond (off unless the table is given).
    pub damon: DamonSpec,
    pub ops: Vec<Op>,
    /// `[workload]`: what a timed run executes (`None`: the spec is a list of ops).
    pub workload: Option<WorkloadSpec>,
    /// The mapping kind of every file the ops name, in first-use order.
    pub files: Vec<(String, MappingKind)>,
    /// `[cost]`: cost-model overrides, by [`COST_KEYS`] name.
    pub cost: BTreeMap<String, u64>,
    /// What the spec asks for that is valid but will not do what it seems to (a THP burst
    /// larger than memory and swap, `dontneed` past a mapping's end, `vm.min_free_kbytes` at
    /// or above the machine's memory), as `file:line: key K: message` like an error: the
    /// command line prints each on standard error as a warning; the run is unchanged.
    pub warnings: Vec<SpecError>,
}

impl Spec {
    /// `spec.toml:20: op[3]`, the prefix for a runtime error about op `index`.
    pub fn op_where(&self, index: usize) -> String {
        let line = self.ops.get(index).map_or(0, Op::line);
        format!("{}:{}: op[{}]", self.file, line, index)
    }

    /// The value of knob `name` (canonical name): the spec's, else the kernel default; `None`
    /// for an unknown knob or a computed default (vm.min_free_kbytes) the spec does not set.
    pub fn knob(&self, name: &str) -> Option<KnobValue> {
        self.knobs
            .get(name)
            .cloned()
            .or_else(|| find_knob(name)?.default_value())
    }
}

/// `[machine]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineSpec {
    /// `memory` in bytes (2 MiB..=1 TiB); `None` when the zones are given explicitly.
    pub memory_bytes: Option<u64>,
    /// 1..=256, default 2.
    pub cpus: u32,
    /// Whether the default layout includes ZONE_DMA (default true). Always true, and meaningless,
    /// with explicit zones.
    pub dma: bool,
    /// `swap`: size of the swap device in bytes (default 0: no swap, like the reference VM).
    pub swap_bytes: u64,
    /// `[[machine.zone]]`, in increasing pfn order; `None` for the default x86-64 layout.
    pub zones: Option<Vec<ZoneSpec>>,
    /// The NUMA nodes of the default layout (`nodes = N` split evenly, or `[[machine.node]]`
    /// tables), memory and CPUs of each; empty: one node with `memory_bytes` and `cpus`.
    pub nodes: Vec<NodeSpec>,
    /// `hugetlb_pages`: 2 MiB pages of the hugetlb pool (`vm.nr_hugepages`) reserved at boot,
    /// before the workload (default 0). The host engine reserves the same pool for the run.
    pub hugetlb_pages: u64,
    /// `read_ahead_kb`: the block device's read-ahead in KiB (docs/model §23.1); `None`
    /// when not given: the model uses the kernel's default for a new device (128), the host
    /// engine leaves the device as it is.
    pub read_ahead_kb: Option<u64>,
    /// `max_sectors_kb`: the block device's largest request in KiB, whose quarter is the bdi's
    /// `io_pages` (docs/model §23.1 item 2, §23.2); `None` when not given: the model uses
    /// a new bdi's `io_pages` (32, i.e. 128 KiB). The host engine does not set it.
    pub max_sectors_kb: Option<u64>,
    /// `page_reporting_order`: a free page reporting device (virtio-balloon) that reports free
    /// chunks of this order and up to the host (0..=10, §32); `None`: no device
    /// (the default, or `"off"`). Simulator only: the host engine records the machine's value
    /// among its confounders and never changes it.
    pub page_reporting_order: Option<u32>,
    /// `page_reporting_order` was given (an order or `"off"`). When it was not, a snapshot boot
    /// takes the value the snapshot recorded, and `validate`'s simulator arms the kernel's.
    pub page_reporting_given: bool,
    /// `snapshot`: boot in the state of a snapshot file (issue 21); `None` for a freshly booted
    /// machine. With a snapshot, `memory_bytes` and `zones` are `None` (the snapshot gives the
    /// zones).
    pub snapshot: Option<SnapshotSpec>,
    /// `checkpoint`: the run continues from a checkpoint file (`fraglab_sim::checkpoint`).
    pub checkpoint: Option<CheckpointIn>,
    /// The line of what sizes the machine — `memory`, the first `[[machine.zone]]` or
    /// `snapshot` — for errors found only when the machine boots ([`MachineSpec::at`]).
    pub line: usize,
    /// The line of `hugetlb_pages` (of `[machine]` when not given), for a pool the machine
    /// cannot hold.
    pub hugetlb_line: usize,
}

impl MachineSpec {
    /// `spec.toml:3: key machine.memory`, the prefix of an error about the machine's size
    /// found when it boots (`key machine.zone` with explicit zones, `machine.snapshot` with a
    /// snapshot).
    pub fn at(&self, spec_file: &str) -> String {
        let key = if self.snapshot.is_some() {
            "machine.snapshot"
        } else if self.zones.is_some() {
            "machine.zone"
        } else {
            "machine.memory"
        };
        format!("{spec_file}:{}: key {key}", self.line)
    }
}

/// One NUMA node of `[machine]`: its memory and its CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    pub memory_bytes: u64,
    pub cpus: u32,
}

/// `[machine] checkpoint`: the checkpoint a run continues from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointIn {
    /// The path as written.
    pub path: String,
    /// The path relative to the spec file's directory.
    pub resolved: std::path::PathBuf,
    /// The line of the key.
    pub line: usize,
}

/// `[run] checkpoint_at` and `checkpoint_file`: where and when a run writes a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointOut {
    /// The simulated time: the state after the first event at or after it is written.
    pub at_ns: u64,
    /// The file, relative to the spec file's directory.
    pub file: std::path::PathBuf,
    /// The line of `checkpoint_at`.
    pub line: usize,
}

/// `[machine] snapshot`: where the snapshot is and what the spec gives besides it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotSpec {
    /// The path as written.
    pub path: String,
    /// The path relative to the spec file's directory (as the spec was named to the parser).
    pub resolved: std::path::PathBuf,
    /// The line of the key, for errors found when the snapshot is read.
    pub line: usize,
    /// `cpus` was given (else the machine has the snapshot's CPUs).
    pub cpus_given: bool,
    /// `hugetlb_pages` was given (else the pool is the snapshot's).
    pub hugetlb_given: bool,
}

impl SnapshotSpec {
    /// `spec.toml:3: machine.snapshot`, the prefix of an error about the snapshot.
    pub fn at(&self, spec_file: &str) -> String {
        format!("{spec_file}:{}: machine.snapshot", self.line)
    }
}

/// One `[[machine.zone]]`, as /proc/zoneinfo describes a zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneSpec {
    /// DMA, DMA32, Normal or (empty) Movable.
    pub zone: ZoneType,
    pub start_pfn: u64,
    pub spanned: u64,
    /// <= spanned (default: spanned).
    pub present: u64,
    /// <= present (default: present).
    pub managed: u64,
}

impl ZoneSpec {
    /// One past the last pfn the zone spans.
    pub fn end_pfn(&self) -> u64 {
        self.start_pfn + self.spanned
    }
}

/// `[host]`: what the host engine does to the live machine beyond the knobs. The simulator reads
/// only `loop_images` (the filesystem of the task files' metadata).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostSpec {
    /// `damon = "off"`: every kdamond that is on is turned off for the run and back on after
    /// (default `"keep"`: DAMON is left as it is).
    pub damon_off: bool,
    /// `loop_images = true`: task files go on loop-mounted ext4/xfs images the run makes
    /// (default false: files in the run's directory). The simulator reads it too: which
    /// filesystem keeps a file set's metadata (`[model] fs_metadata`, docs/model §33).
    pub loop_images: bool,
}

/// `[damon]` (docs/model §27): the simulator's kdamond. The values given override the
/// preset's; the simulator's boot resolves them (`fraglab_sim::boot::damon_config`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DamonSpec {
    /// The table was given and `enabled` is not false.
    pub enabled: bool,
    /// `damon_reclaim` (default) or `s2`.
    pub preset: String,
    /// The integer and size keys given, by key name.
    pub values: BTreeMap<String, u64>,
    /// `wmarks_metric` if given: true for `free_mem_rate`.
    pub wmarks_free_mem_rate: Option<bool>,
    /// `filters` if given: (type, allow) in order.
    pub filters: Option<Vec<(String, bool)>>,
    /// `regions` if given: the monitored physical ranges `[start, end)` in bytes, in address
    /// order (`targets/0/regions/N/{start,end}`).
    pub regions: Option<Vec<(u64, u64)>>,
}

/// `[run]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    /// Default 1.
    pub seed: u64,
    /// Default false.
    pub debug_vm: bool,
    /// With `debug_vm`, a timed run checks every this many task steps (default
    /// `keys::DEBUG_VM_EVERY_DEFAULT`, 10,000).
    pub debug_vm_every: u64,
    /// Fragmentation blame (issue 37, docs/blame.md): attribute the events that make
    /// pageblocks impure to the workload task or kernel thread that caused them (the result's
    /// `blame`). Default false.
    pub blame: bool,
    /// The events to record, without their group (`mm_page_alloc`), each once, in
    /// [`TRACE_EVENTS`] order; `kmem:*` expanded. Empty by default.
    pub trace: Vec<String>,
    /// `scale = "1/K"` (or `fraglab run --scale`): the spec has been scaled to a model 1/K of
    /// its size ([`scale::scale_spec`]: the machine, knobs and workload here are the scaled
    /// ones). `None` (the default): the full-size run.
    /// `checkpoint_at` (with `checkpoint_file`): write a checkpoint.
    pub checkpoint: Option<CheckpointOut>,
    pub scale: Option<scale::ScaleSpec>,
}

impl Default for RunSpec {
    fn default() -> RunSpec {
        RunSpec {
            seed: 1,
            debug_vm: false,
            debug_vm_every: keys::DEBUG_VM_EVERY_DEFAULT as u64,
            blame: false,
            trace: Vec::new(),
            scale: None,
            checkpoint: None,
        }
    }
}

/// One `[[op]]`. `line` is the 1-based line of the op (its `[[op]]` header), for runtime errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Allocate `count` chunks of `order` with `gfp` on `cpu`, appending them to set `set`.
    /// `kind` is the folio's owner (default from the gfp: movable → anon, reclaimable → slab,
    /// else kernel); `nofs` marks file folios of a mapping without __GFP_FS.
    Alloc {
        line: usize,
        set: String,
        count: u32,
        order: u32,
        gfp: Gfp,
        cpu: u32,
        must_succeed: bool,
        kind: FolioKindSpec,
        nofs: bool,
    },
    /// Free the members of `set` whose index i has `i % every == offset`, on `cpu`.
    Free {
        line: usize,
        set: String,
        every: u32,
        offset: u32,
        cpu: u32,
    },
    /// Print a report; `zone` restricts `pageblocks` to one zone.
    Print {
        line: usize,
        what: PrintWhat,
        zone: Option<ZoneType>,
    },
    /// Drain every CPU's PCP lists.
    DrainAllPages { line: usize },
    /// Write 1 to /proc/sys/vm/compact_memory.
    CompactMemory { line: usize },
    /// Direct compaction for `order` (1..=10; try_to_compact_pages) with `gfp` (default
    /// GFP_TRANSHUGE) at `priority` (default async), on `cpu`.
    Compact {
        line: usize,
        order: u32,
        gfp: Gfp,
        priority: CompactPriority,
        cpu: u32,
    },
    /// Wake kcompactd for `order` (1..=10) and run one kcompactd_do_work (`mode` "force"), or
    /// only as the kernel's wake-up would (`mode` "wake").
    Kcompactd {
        line: usize,
        order: u32,
        mode: KcompactdMode,
    },
    /// One expiry of kcompactd's 500 ms timer (the proactive-compaction check), or as `mode` says.
    ProactiveCompact { line: usize, mode: ProactiveMode },
    /// `count` anonymous page faults, each on a fresh, empty, PMD-aligned 2 MiB range of a VMA
    /// with (`madvised`) or without MADV_HUGEPAGE (`do_anonymous_fault`: THP, mTHP ladder,
    /// order 0 per the THP knobs), on `cpu`; the folios join set `set`.
    Fault {
        line: usize,
        set: String,
        count: u32,
        madvised: bool,
        cpu: u32,
    },
    /// Run kswapd, if it is awake, until it sleeps (every nap runs to its end).
    Kswapd { line: usize },
    /// A buffered write through iomap (§12.3) of `length` bytes at `offset` of file `file`.
    Write {
        line: usize,
        file: String,
        offset: u64,
        length: u64,
        cpu: u32,
    },
    /// A buffered read (§12.2, with readahead) of `length` bytes at `offset` of file `file`,
    /// which is `file_size` bytes long.
    Read {
        line: usize,
        file: String,
        offset: u64,
        length: u64,
        file_size: u64,
        cpu: u32,
    },
    /// Write `count` to /proc/sys/vm/nr_hugepages: the 2 MiB hugetlb pool grows one page at a
    /// time through the allocator until it holds `count` pages or an allocation fails, or
    /// shrinks to `count` (docs/model §28.1).
    NrHugepages { line: usize, count: u64 },
    /// Free page reporting's pending pass, now (§32.2): a timeless run has no
    /// clock for the 2 s delayed work, so passes run only when this op asks.
    PageReporting { line: usize },
}

impl Op {
    pub fn line(&self) -> usize {
        match *self {
            Op::Alloc { line, .. }
            | Op::Free { line, .. }
            | Op::Print { line, .. }
            | Op::DrainAllPages { line }
            | Op::CompactMemory { line }
            | Op::Compact { line, .. }
            | Op::Kcompactd { line, .. }
            | Op::ProactiveCompact { line, .. }
            | Op::Fault { line, .. }
            | Op::Kswapd { line }
            | Op::Write { line, .. }
            | Op::Read { line, .. }
            | Op::NrHugepages { line, .. }
            | Op::PageReporting { line } => line,
        }
    }

    /// The action key: `alloc`, `free`, `print`, `drain_all_pages`, `compact_memory`, `compact`,
    /// `kcompactd`, `proactive_compact`, `fault`, `kswapd`, `write`, `read`, `nr_hugepages` or
    /// `page_reporting`.
    pub fn action(&self) -> &'static str {
        match self {
            Op::Alloc { .. } => "alloc",
            Op::Free { .. } => "free",
            Op::Print { .. } => "print",
            Op::DrainAllPages { .. } => "drain_all_pages",
            Op::CompactMemory { .. } => "compact_memory",
            Op::Compact { .. } => "compact",
            Op::Kcompactd { .. } => "kcompactd",
            Op::ProactiveCompact { .. } => "proactive_compact",
            Op::Fault { .. } => "fault",
            Op::Kswapd { .. } => "kswapd",
            Op::Write { .. } => "write",
            Op::Read { .. } => "read",
            Op::NrHugepages { .. } => "nr_hugepages",
            Op::PageReporting { .. } => "page_reporting",
        }
    }
}

/// What a `print` op prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrintWhat {
    /// /proc/buddyinfo.
    Buddyinfo,
    /// /proc/pagetypeinfo.
    Pagetypeinfo,
    /// /proc/zoneinfo.
    Zoneinfo,
    /// /proc/vmstat.
    Vmstat,
    /// A map of every pageblock's migratetype (optionally of one zone).
    Pageblocks,
    /// The trace buffer recorded so far (`run.trace`).
    Trace,
    /// fraglab's one-screen summary.
    Summary,
    /// The folio census: live folios by owner kind and order.
    Folios,
    /// Compaction and migration counters (compact_*, pgmigrate_*, thp_migration_*).
    Compaction,
    /// debugfs extfrag/extfrag_index.
    ExtfragIndex,
    /// debugfs extfrag/unusable_index.
    UnusableIndex,
}

impl PrintWhat {
    pub const ALL: [PrintWhat; 11] = [
        PrintWhat::Buddyinfo,
        PrintWhat::Pagetypeinfo,
        PrintWhat::Zoneinfo,
        PrintWhat::Vmstat,
        PrintWhat::Pageblocks,
        PrintWhat::Trace,
        PrintWhat::Summary,
        PrintWhat::Folios,
        PrintWhat::Compaction,
        PrintWhat::ExtfragIndex,
        PrintWhat::UnusableIndex,
    ];

    /// The name used in the spec.
    pub fn name(self) -> &'static str {
        match self {
            PrintWhat::Buddyinfo => "buddyinfo",
            PrintWhat::Pagetypeinfo => "pagetypeinfo",
            PrintWhat::Zoneinfo => "zoneinfo",
            PrintWhat::Vmstat => "vmstat",
            PrintWhat::Pageblocks => "pageblocks",
            PrintWhat::Trace => "trace",
            PrintWhat::Summary => "summary",
            PrintWhat::Folios => "folios",
            PrintWhat::Compaction => "compaction",
            PrintWhat::ExtfragIndex => "extfrag_index",
            PrintWhat::UnusableIndex => "unusable_index",
        }
    }

    pub fn from_name(s: &str) -> Option<PrintWhat> {
        Self::ALL.into_iter().find(|w| w.name() == s)
    }
}

/// Parses and validates the spec in `text`; `file_name` is what errors name as the file.
pub fn parse_spec(text: &str, file_name: &str) -> Result<Spec, SpecError> {
    parse::parse_spec(text, file_name)
}

/// Reads and parses the spec at `path`; errors name the file as `path` is written.
pub fn load_spec(path: &Path) -> Result<Spec, SpecError> {
    let file = path.display().to_string();
    let text = parse::read_spec_file(path, &file)?;
    parse_spec(&text, &file)
}

/// The top-level tables whose scalar keys an override may set by `TABLE.KEY`; any other
/// override key is a knob name (`vm.defrag_mode`, `transparent_hugepage/enabled`).
const OVERRIDE_TABLES: &[&str] = &["model", "run", "machine", "cost", "workload"];

/// Applies `KEY=VALUE` overrides to a spec's text, for `fraglab compare`'s variants: a key
/// `model.X`, `run.X`, `machine.X`, `cost.X` or `workload.X` sets that table's scalar key,
/// any other key is a knob under `[knobs]`. A longer path reaches into nested tables and
/// arrays of tables: `workload.kbuild.jobs_parallel` sets the key in every
/// `[[workload.kbuild]]` entry, `workload.thp_burst[1].size` in the second one only (the
/// table or entry must exist; the last key need not). A value is TOML (`1`, `true`,
/// `"madvise"`); a bare word that is not valid TOML is taken as a string. Returns the new
/// text, to be parsed by [`parse_spec`]; an override that cannot apply is an error naming it.
pub fn apply_overrides(text: &str, overrides: &[(String, String)]) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| format!("not valid TOML: {}", e.message()))?;
    for (key, raw) in overrides {
        let value: toml_edit::Value = match raw.parse::<toml_edit::Value>() {
            Ok(v) => v,
            Err(_) => raw.as_str().into(),
        };
        let (table, rest) = match key.split_once('.') {
            Some((t, k)) if OVERRIDE_TABLES.contains(&t) => (t, k),
            _ => ("knobs", key.as_str()),
        };
        if rest.is_empty() || (table != "knobs" && rest.split('.').any(str::is_empty)) {
            return Err(format!("override {key}: empty key"));
        }
        let t = doc
            .entry(table)
            .or_insert(toml_edit::table())
            .as_table_mut()
            .ok_or_else(|| format!("override {key}: `{table}` is not a table in the spec"))?;
        if table == "knobs" {
            // Knob names contain dots and slashes themselves (`vm.defrag_mode`).
            t.insert(rest, toml_edit::Item::Value(value));
            continue;
        }
        let path: Vec<&str> = rest.split('.').collect();
        let n = set_path(t, &path, &value).map_err(|m| format!("override {key}: {m}"))?;
        if n == 0 {
            return Err(format!(
                "override {key}: the spec has no `{table}` entry to set it in"
            ));
        }
    }
    Ok(doc.to_string())
}

/// Sets `path` (the last element a key, the others tables, arrays of tables, or `name[i]`
/// entries of arrays of tables) under `t` to `value`; returns how many keys were set.
fn set_path(t: &mut toml_edit::Table, path: &[&str], value: &toml_edit::Value) -> Result<usize, String> {
    let (first, rest) = path.split_first().expect("a non-empty path");
    if rest.is_empty() {
        if first.contains('[') {
            return Err(format!("`{first}`: an index needs a key after it"));
        }
        if t.get(first)
            .is_some_and(|i| i.is_table_like() || i.is_array_of_tables())
        {
            return Err(format!("`{first}` is a table, not a value"));
        }
        t.insert(first, toml_edit::Item::Value(value.clone()));
        return Ok(1);
    }
    let (name, index) = match first.split_once('[') {
        Some((n, i)) => {
            let i = i
                .strip_suffix(']')
                .and_then(|i| i.parse::<usize>().ok())
                .ok_or_else(|| format!("`{first}`: an index is `name[N]`"))?;
            (n, Some(i))
        }
        None => (*first, None),
    };
    let item = t
        .get_mut(name)
        .ok_or_else(|| format!("the spec has no `{name}`"))?;
    match item {
        toml_edit::Item::ArrayOfTables(a) => {
            let len = a.len();
            match index {
                Some(i) => {
                    let e = a
                        .get_mut(i)
                        .ok_or_else(|| format!("`{name}` has {len} entries, not an entry {i}"))?;
                    set_path(e, rest, value)
                }
                None => {
                    let mut n = 0;
                    for e in a.iter_mut() {
                        n += set_path(e, rest, value)?;
                    }
                    Ok(n)
                }
            }
        }
        toml_edit::Item::Table(sub) if index.is_none() => set_path(sub, rest, value),
        _ => Err(format!("`{first}` is not a table or an array of tables")),
    }
}

/// Reads the spec at `path` and applies `overrides` ([`apply_overrides`]); errors name the
/// file as `path [k=v,...]`, with line numbers of the overridden text.
pub fn load_spec_with(path: &Path, overrides: &[(String, String)]) -> Result<Spec, SpecError> {
    if overrides.is_empty() {
        return load_spec(path);
    }
    let file = path.display().to_string();
    let text = parse::read_spec_file(path, &file)?;
    let list: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let name = format!("{file} [{}]", list.join(","));
    let text = apply_overrides(&text, overrides).map_err(|m| SpecError::new(name.clone(), 0, None, m))?;
    let mut spec = parse_spec(&text, &name)?;
    // The display name carries the overrides (which may hold a '/', as in
    // `transparent_hugepage/enabled=never`): a relative snapshot path is relative to the real
    // file's directory.
    if let Some(snap) = spec.machine.snapshot.as_mut() {
        snap.resolved = path.parent().unwrap_or(Path::new("")).join(&snap.path);
    }
    Ok(spec)
}

#[cfg(test)]
mod diff_events_tests {
    #[test]
    fn diff_events_are_trace_events() {
        for e in super::DIFF_EVENTS {
            assert!(super::TRACE_EVENTS.contains(e), "{e} is not in TRACE_EVENTS");
        }
    }
}
