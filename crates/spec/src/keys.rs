//! One declaration per spec key: its name, the form of its value (with the range or minimum the
//! parser checks and states in its messages), its default and a line of documentation. The parser
//! (`parse/`) takes each table's allowed keys, value checks and defaults from here; [`spec_keys`]
//! lists them all (for docs/knobs.md). `[knobs]` and `[model]` have their own registries
//! ([`crate::KNOBS`], [`crate::MODEL_SWITCHES`]); `[cost]` is [`crate::COST_KEYS`].
//!
//! Adding a key to a table is one line here plus the line of the parser that stores its value.

/// The form of a key's value, as the parser checks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// An integer in `lo..=hi`; `range` is how messages state the range.
    Int { lo: i64, hi: i64, range: &'static str },
    /// A TOML boolean.
    Bool,
    /// Bytes: an integer or a size string such as `"4MiB"`, at least `min`.
    Size { min: u64 },
    /// A duration string such as `"500ms"`, at least `min` nanoseconds.
    Duration { min: u64 },
    /// A string (a name).
    Str,
    /// `true` (an action that takes no value).
    True,
    /// A value the parser checks itself (a gfp mask, a zone name, ...); the text states its form.
    Form(&'static str),
    /// A table, or an array of tables, with keys of its own (the text names it).
    Table(&'static str),
}

/// What an absent key means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyDefault {
    /// The key must be given; the text is what the "missing" message expects.
    Required(&'static str),
    /// The key is the table's action (an `[[op]]`'s or a task step's), present by definition.
    Action,
    Int(i64),
    Bool(bool),
    Bytes(u64),
    Ns(u64),
    /// A string value.
    Str(&'static str),
    /// Stated in words: derived from other values, or nothing at all.
    Text(&'static str),
}

/// One spec key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyDef {
    pub name: &'static str,
    pub kind: KeyKind,
    pub default: KeyDefault,
    pub doc: &'static str,
}

const fn key(name: &'static str, kind: KeyKind, default: KeyDefault, doc: &'static str) -> KeyDef {
    KeyDef {
        name,
        kind,
        default,
        doc,
    }
}

const fn int(
    name: &'static str,
    lo: i64,
    hi: i64,
    range: &'static str,
    default: i64,
    doc: &'static str,
) -> KeyDef {
    key(
        name,
        KeyKind::Int { lo, hi, range },
        KeyDefault::Int(default),
        doc,
    )
}

const fn boolean(name: &'static str, default: bool, doc: &'static str) -> KeyDef {
    key(name, KeyKind::Bool, KeyDefault::Bool(default), doc)
}

const fn size(name: &'static str, min: u64, default: u64, doc: &'static str) -> KeyDef {
    key(name, KeyKind::Size { min }, KeyDefault::Bytes(default), doc)
}

const fn duration(name: &'static str, min: u64, default: u64, doc: &'static str) -> KeyDef {
    key(name, KeyKind::Duration { min }, KeyDefault::Ns(default), doc)
}

const fn action(name: &'static str, kind: KeyKind, doc: &'static str) -> KeyDef {
    key(name, kind, KeyDefault::Action, doc)
}

/// The range of `count`-like keys.
const AT_LEAST_1: KeyKind = KeyKind::Int {
    lo: 1,
    hi: u32::MAX as i64,
    range: ">= 1",
};
/// The range of an `alloc` or `fault` op's `count`: its real bound depends on the machine
/// (`parse::WORK_FACTOR`) and is checked by the op's parser.
const OP_COUNT: KeyKind = KeyKind::Int {
    lo: 1,
    hi: i64::MAX,
    range: ">= 1",
};
/// The range of the generators' counts.
const MAX_2_20: (i64, &str) = (1 << 20, "1..=1048576");
const PFN: KeyKind = KeyKind::Int {
    lo: 0,
    hi: (1 << 32) - 1,
    range: "0..=4294967295",
};
const ORDER: KeyKind = KeyKind::Int {
    lo: 0,
    hi: fraglab_types::page::MAX_PAGE_ORDER as i64,
    range: "0..=10",
};
const CPU: KeyDef = key(
    "cpu",
    KeyKind::Form("an integer 0..=machine.cpus - 1"),
    KeyDefault::Int(0),
    "the CPU the op runs on",
);
const MAPPING_FORM: KeyKind = KeyKind::Form("a mapping kind: xfs, large_folios or no_large_folios");

/// The top level of a spec.
pub(crate) const TOP: &[KeyDef] = &[
    key(
        "name",
        KeyKind::Str,
        KeyDefault::Text("none"),
        "the experiment's name",
    ),
    key(
        "description",
        KeyKind::Str,
        KeyDefault::Text("none"),
        "a line about the experiment",
    ),
    key(
        "machine",
        KeyKind::Table("[machine]"),
        KeyDefault::Required("memory = \"<size>\" or [[machine.zone]] tables"),
        "the simulated machine",
    ),
    key(
        "knobs",
        KeyKind::Table("[knobs]"),
        KeyDefault::Text("the kernel's defaults"),
        "kernel tunables (`fraglab knobs` lists them)",
    ),
    key(
        "model",
        KeyKind::Table("[model]"),
        KeyDefault::Text("the kernel's behaviour"),
        "model switches (MODEL_SWITCHES)",
    ),
    key(
        "run",
        KeyKind::Table("[run]"),
        KeyDefault::Text("seed 1"),
        "how the run is made",
    ),
    key(
        "host",
        KeyKind::Table("[host]"),
        KeyDefault::Text("the machine as it is"),
        "settings of the host engine only (the simulator ignores them)",
    ),
    key(
        "op",
        KeyKind::Table("[[op]]"),
        KeyDefault::Text("none"),
        "a timeless run's operations, in order (not with [workload])",
    ),
    key(
        "workload",
        KeyKind::Table("[workload]"),
        KeyDefault::Text("none"),
        "a timed run's generators (not with [[op]])",
    ),
    key(
        "damon",
        KeyKind::Table("[damon]"),
        KeyDefault::Text("off"),
        "the simulator's kdamond: one DAMOS pageout scheme over physical memory (docs/model §27); timed runs only",
    ),
    key(
        "cost",
        KeyKind::Table("[cost]"),
        KeyDefault::Text("the cost model's"),
        "cost-model overrides for timed runs (COST_KEYS)",
    ),
];

/// `[machine]`.
pub(crate) const MACHINE: &[KeyDef] = &[
    key(
        "memory",
        KeyKind::Form("a size (an integer or a string like \"4GiB\"), 2 MiB..=1 TiB"),
        KeyDefault::Required("a size such as \"4GiB\", or [[machine.zone]] tables"),
        "the memory of the default zone layout (not with [[machine.zone]])",
    ),
    int("cpus", 1, 256, "1..=256", 2, "CPUs"),
    boolean("dma", true, "a 16 MiB ZONE_DMA in the default layout"),
    int(
        "nodes",
        1,
        16,
        "1..=16",
        1,
        "NUMA nodes: memory and CPUs split evenly (node 0 is the default layout of its share: DMA, DMA32, Normal from 4 GiB; later nodes one Normal zone each)",
    ),
    key(
        "node",
        KeyKind::Table("[[machine.node]]"),
        KeyDefault::Text("nodes equal nodes"),
        "uneven NUMA nodes, one table each: memory and cpus (not with memory, cpus or nodes)",
    ),
    key(
        "zone",
        KeyKind::Table("[[machine.zone]]"),
        KeyDefault::Text("the default layout from memory"),
        "explicit zones (not with memory)",
    ),
    size("swap", 0, 0, "swap space"),
    int(
        "hugetlb_pages",
        0,
        1 << 19,
        "0..=524288",
        0,
        "the hugetlb pool (2 MiB pages)",
    ),
    key(
        "read_ahead_kb",
        KeyKind::Int {
            lo: 0,
            hi: 1 << 20,
            range: "0..=1048576",
        },
        KeyDefault::Int(128),
        "the block device's read_ahead_kb (every file's ra_pages = read_ahead_kb / 4, docs/model §23.1); the host engine sets it only when given",
    ),
    key(
        "max_sectors_kb",
        KeyKind::Int {
            lo: 4,
            hi: 1 << 20,
            range: "4..=1048576",
        },
        KeyDefault::Int(128),
        "the block device's max_sectors_kb (io_pages = max_sectors_kb / 4: a read larger than ra_pages may get a window of up to io_pages, forced readahead reads up to max(io_pages, ra_pages), docs/model §23.1–§23.2); default 128, a new bdi's io_pages (32); the host engine records the device's value and does not set it",
    ),
    key(
        "page_reporting_order",
        KeyKind::Form("an order 0..=10, or \"off\""),
        KeyDefault::Text("off: no free page reporting device (a snapshot boot takes the snapshot's value, validate's simulator arms the kernel's)"),
        "free page reporting (virtio-balloon, §32): 2 s after a free merges to this order or more, a pass reports the unreported free chunks of orders page_reporting_order..10 to the host (at most ⌈nr_free/512⌉ + 1 batches of 32 per list and pass), retyping free Unmovable/Reclaimable blocks to Movable; the host discards their backing, and the first write to such a page costs [cost] host_fault_ns; simulator only (the host engine records the machine's value and never changes it)",
    ),
    key(
        "snapshot",
        KeyKind::Str,
        KeyDefault::Text("none: a freshly booted machine"),
        "boot in the state of a snapshot file (`fraglab host snapshot`), relative to the spec's directory: zones, free chunks, folios and pageblock types from the snapshot's reconstruction (docs/model §30.5); not with memory, dma or [[machine.zone]]; cpus default to the snapshot's; a knob the spec does not set takes the snapshot's value, else the kernel default; hugetlb_pages, if given, resizes the snapshot's pool",
    ),
    key(
        "checkpoint",
        KeyKind::Str,
        KeyDefault::Text("none: the run starts at time 0"),
        "continue from a checkpoint file (`[run] checkpoint_at`, docs/checkpoints.md), relative to the spec's directory: the run goes on from the checkpoint's simulated time to the end, and its result is the whole run's. The rest of the spec must be the one that wrote the checkpoint, except the knobs and [model] policy, folio_mode, defrag_stage, costly_order_policy and v4_position, which are applied at the checkpoint's time as sysctl writes",
    ),
];

/// `[[machine.node]]`.
pub(crate) const NODE: &[KeyDef] = &[
    key(
        "memory",
        KeyKind::Form("a size, 2 MiB..=1 TiB"),
        KeyDefault::Required("a size such as \"256GiB\""),
        "the node's memory",
    ),
    int(
        "cpus",
        0,
        256,
        "0..=256",
        1,
        "the node's CPUs (0: a memory-only node)",
    ),
];

/// `[[machine.zone]]`.
pub(crate) const ZONE: &[KeyDef] = &[
    key(
        "name",
        KeyKind::Form("a zone name: DMA, DMA32, Normal or Movable"),
        KeyDefault::Required("a zone name: DMA, DMA32, Normal or Movable"),
        "the zone (in the kernel's order, each once)",
    ),
    key(
        "start_pfn",
        PFN,
        KeyDefault::Required("a number of pages"),
        "zone_start_pfn",
    ),
    key(
        "spanned",
        PFN,
        KeyDefault::Required("a number of pages"),
        "spanned_pages",
    ),
    key("present", PFN, KeyDefault::Text("spanned"), "present_pages"),
    key("managed", PFN, KeyDefault::Text("present"), "managed_pages"),
];

/// `[run] debug_vm_every`'s default. A check walks every page and folio: about 0.1 s for 1 GiB
/// (kbuild-thp-burst, 20 s simulated, about 3,000 task steps per simulated second: 4.7 s
/// without checks, 11.3 s checking every 1,000 steps, 6.1 s every 10,000), so every 10,000
/// steps costs a debug run about a third more.
pub const DEBUG_VM_EVERY_DEFAULT: i64 = 10_000;

/// `[run]`.
pub(crate) const RUN: &[KeyDef] = &[
    int(
        "seed",
        0,
        i64::MAX,
        ">= 0",
        1,
        "the seed of the run's random choices",
    ),
    boolean(
        "debug_vm",
        false,
        "check the model's invariants (CONFIG_DEBUG_VM): after every operation of a timeless run; every `debug_vm_every` task steps and at the end of a timed run (the count is the result's `sim_work.debug_vm_checks`)",
    ),
    int(
        "debug_vm_every",
        1,
        i64::MAX,
        ">= 1",
        DEBUG_VM_EVERY_DEFAULT,
        "with `debug_vm`, a timed run checks the invariants every this many task steps (kernel threads' included); 1 checks after every step",
    ),
    key(
        "checkpoint_at",
        KeyKind::Duration { min: 0 },
        KeyDefault::Text("none: no checkpoint"),
        "write a checkpoint (docs/checkpoints.md): the whole simulated state after the first event at or after this simulated time, to `checkpoint_file`; the run goes on unchanged. A spec with [machine] checkpoint continues from the file under other knobs or another policy",
    ),
    key(
        "checkpoint_file",
        KeyKind::Str,
        KeyDefault::Text("the spec's file name with .ckpt for .toml, beside it"),
        "where `checkpoint_at` writes its checkpoint, relative to the spec's directory",
    ),
    boolean(
        "blame",
        false,
        "fragmentation blame (docs/blame.md): attribute every steal, claim, mismatched placement and compaction failure to the task or kernel thread that caused it; the result gets a `blame` section (`fraglab blame RESULT.json`)",
    ),
    key(
        "trace",
        KeyKind::Form("an array of event names (TRACE_EVENTS) or group:* patterns"),
        KeyDefault::Text("none"),
        "the trace events to record",
    ),
    key(
        "scale",
        KeyKind::Form("\"1/K\", K a power of two from 2 to 1024"),
        KeyDefault::Text("none: the full-size run"),
        "a scale model (issue 35): the machine's memory, CPUs and swap and the workload's sizes and parallelism divided by K so every per-GiB pressure is kept (times stay), the kernel's derived settings recomputed at boot; what scales how and what is refused: `fraglab_spec::scale`. The result's `scale` says so, with the vmstat deltas x K",
    ),
];

/// `[host]`: what the host engine changes on the live machine beyond the knobs. Declared here
/// and parsed like every key; the simulator reads only `loop_images`, for the filesystem of the
/// task files' metadata (docs/model §33; the model has no DAMON).
pub(crate) const HOST: &[KeyDef] = &[
    key(
        "damon",
        KeyKind::Form("keep or off"),
        KeyDefault::Str("keep"),
        "host engine: \"off\" turns every running kdamond off for the run (through DAMON's sysfs `state`) and back on at its end or by `fraglab host restore`; the simulator ignores it",
    ),
    // H5: loop-mounted filesystem images.
    boolean(
        "loop_images",
        false,
        "host engine: put each task file on a loop-mounted filesystem image made by the run (xfs for xfs mappings, ext4 for large_folios, ext4 data=journal for no_large_folios; mkfs without discard, mounted without discard), unmounted, detached and deleted on every exit path; the simulator keeps the metadata of files on an ext4 image in the block device's page cache and makes none for files on an xfs image ([model] fs_metadata)",
    ),
];

/// A `[damon]` parameter that overrides its preset's value.
const fn damon_int(name: &'static str, lo: i64, hi: i64, range: &'static str, doc: &'static str) -> KeyDef {
    key(
        name,
        KeyKind::Int { lo, hi, range },
        KeyDefault::Text("the preset's"),
        doc,
    )
}

/// `[damon]` (docs/model §27): the simulator's kdamond, named after DAMON's sysfs files
/// (`/sys/kernel/mm/damon/admin/kdamonds/N/contexts/0/...`). The table switches it on; each key
/// overrides its preset's value. The host engine ignores it.
pub(crate) const DAMON: &[KeyDef] = &[
    boolean("enabled", true, "run the kdamond (the table's presence switches it on; false keeps it off)"),
    key(
        "preset",
        KeyKind::Form("damon_reclaim or s2"),
        KeyDefault::Str("damon_reclaim"),
        "the parameters the keys below override: damon_reclaim = DAMON_RECLAIM's module defaults (§27.1), s2 = the S2 VM's sysfs kdamond (§27.3)",
    ),
    damon_int("sample_us", 1, 1 << 40, "1..=2^40", "monitoring_attrs/intervals/sample_us: the sampling interval, µs"),
    damon_int("aggr_us", 1, 1 << 40, "1..=2^40", "monitoring_attrs/intervals/aggr_us: the aggregation interval, µs (schemes apply at each)"),
    damon_int("min_nr_regions", 3, u32::MAX as i64, "3..=4294967295", "monitoring_attrs/nr_regions/min"),
    damon_int("max_nr_regions", 3, u32::MAX as i64, "3..=4294967295", "monitoring_attrs/nr_regions/max"),
    damon_int("nr_accesses_min", 0, u32::MAX as i64, "0..=4294967295", "schemes/0/access_pattern/nr_accesses/min: samples per aggregation"),
    damon_int("nr_accesses_max", 0, u32::MAX as i64, "0..=4294967295", "schemes/0/access_pattern/nr_accesses/max"),
    damon_int("age_min", 0, u32::MAX as i64, "0..=4294967295", "schemes/0/access_pattern/age/min: aggregation intervals"),
    damon_int("age_max", 0, u32::MAX as i64, "0..=4294967295", "schemes/0/access_pattern/age/max"),
    key(
        "sz_min",
        KeyKind::Size { min: 0 },
        KeyDefault::Text("the preset's"),
        "schemes/0/access_pattern/sz/min: the smallest region the scheme applies to, bytes",
    ),
    key(
        "sz_max",
        KeyKind::Size { min: 0 },
        KeyDefault::Text("the preset's"),
        "schemes/0/access_pattern/sz/max: the largest region the scheme applies to, bytes",
    ),
    damon_int("quota_ms", 0, 1 << 40, "0..=2^40", "schemes/0/quotas/ms: time quota per window (0: none)"),
    key(
        "quota_bytes",
        KeyKind::Size { min: 0 },
        KeyDefault::Text("the preset's"),
        "schemes/0/quotas/bytes: bytes of region span charged per window (0: none)",
    ),
    damon_int("quota_reset_interval_ms", 0, 1 << 40, "0..=2^40", "schemes/0/quotas/reset_interval_ms: the charge window"),
    key(
        "wmarks_metric",
        KeyKind::Form("none or free_mem_rate"),
        KeyDefault::Text("the preset's"),
        "schemes/0/watermarks/metric: none = always active; free_mem_rate = free pages per thousand of RAM",
    ),
    damon_int("wmarks_interval_us", 1, 1 << 40, "1..=2^40", "schemes/0/watermarks/interval_us: how long an inactive scheme waits before checking again"),
    damon_int("wmarks_high", 0, 1000, "0..=1000", "schemes/0/watermarks/high: above it the scheme is deactivated"),
    damon_int("wmarks_mid", 0, 1000, "0..=1000", "schemes/0/watermarks/mid: an inactive scheme activates below it"),
    damon_int("wmarks_low", 0, 1000, "0..=1000", "schemes/0/watermarks/low: below it the scheme is deactivated (left to kswapd)"),
    key(
        "filters",
        KeyKind::Form("a comma-separated list of type:allow|reject, types anon, unmapped, young (\"\" for none)"),
        KeyDefault::Text("the preset's"),
        "schemes/0/ops_filters, in order (matching = Y); the first match decides",
    ),
    key(
        "regions",
        KeyKind::Form("a comma-separated list of START-END physical ranges, sizes (\"16MiB-3GiB, 4GiB-25GiB\")"),
        KeyDefault::Text("the preset's"),
        "targets/0/regions: the monitored physical ranges, clipped to the machine; damon_reclaim: the largest System RAM range (§27.1), s2: 16MiB-3GiB, 4GiB-end (§27.3)",
    ),
];

/// `[[op]]` with `alloc`.
pub(crate) const OP_ALLOC: &[KeyDef] = &[
    action("alloc", KeyKind::Str, "allocate into this named set"),
    key(
        "count",
        OP_COUNT,
        KeyDefault::Int(1),
        "how many allocations (at most 16 x the machine's pages and swap)",
    ),
    key("order", ORDER, KeyDefault::Int(0), "the order of each allocation"),
    key(
        "gfp",
        KeyKind::Form("kernel gfp names joined by |"),
        KeyDefault::Required("a gfp mask such as \"GFP_KERNEL\""),
        "the gfp mask",
    ),
    CPU,
    boolean(
        "must_succeed",
        false,
        "a failed allocation ends the run with an error",
    ),
    key(
        "kind",
        KeyKind::Form("a folio kind: anon, file, slab, pagetable or kernel"),
        KeyDefault::Text("from the gfp mask"),
        "the owner of the folios",
    ),
    boolean(
        "nofs",
        false,
        "file folios the reclaim of a GFP_NOFS context cannot write back",
    ),
];
/// `[[op]]` with `free`.
pub(crate) const OP_FREE: &[KeyDef] = &[
    action(
        "free",
        KeyKind::Str,
        "free from this set (allocated by an earlier op)",
    ),
    key(
        "every",
        AT_LEAST_1,
        KeyDefault::Int(1),
        "free every n-th folio of the set",
    ),
    key(
        "offset",
        KeyKind::Form("an integer 0..=every - 1"),
        KeyDefault::Int(0),
        "the first folio freed",
    ),
    CPU,
];
/// `[[op]]` with `print`.
pub(crate) const OP_PRINT: &[KeyDef] = &[
    action(
        "print",
        KeyKind::Form("a report: buddyinfo, pagetypeinfo, zoneinfo, vmstat, pageblocks, trace, summary, folios, compaction, extfrag_index or unusable_index"),
        "print a report",
    ),
    key(
        "zone",
        KeyKind::Form("a zone name of the machine"),
        KeyDefault::Text("every zone"),
        "only this zone (print = \"pageblocks\")",
    ),
];
/// `[[op]]` with `drain_all_pages`.
pub(crate) const OP_DRAIN: &[KeyDef] = &[action("drain_all_pages", KeyKind::True, "drain_all_pages()")];
/// `[[op]]` with `compact_memory`.
pub(crate) const OP_COMPACT_MEMORY: &[KeyDef] = &[action(
    "compact_memory",
    KeyKind::True,
    "write 1 to /proc/sys/vm/compact_memory",
)];
/// The value of `nr_hugepages` (op and task step).
const NR_HUGEPAGES: KeyKind = KeyKind::Int {
    lo: 0,
    hi: 1 << 30,
    range: "0..=2^30",
};
/// `[[op]]` with `nr_hugepages`.
pub(crate) const OP_NR_HUGEPAGES: &[KeyDef] = &[action(
    "nr_hugepages",
    NR_HUGEPAGES,
    "write this count to /proc/sys/vm/nr_hugepages: grow or shrink the 2 MiB hugetlb pool (docs/model §28)",
)];
/// `[[op]]` with `compact`.
pub(crate) const OP_COMPACT: &[KeyDef] = &[
    action(
        "compact",
        KeyKind::Form("an order 1..=10"),
        "direct compaction for this order",
    ),
    key(
        "gfp",
        KeyKind::Form("kernel gfp names joined by |"),
        KeyDefault::Text("GFP_TRANSHUGE"),
        "the gfp mask of the allocation compacted for",
    ),
    key(
        "priority",
        KeyKind::Form("async, sync_light or sync_full"),
        KeyDefault::Str("async"),
        "enum compact_priority",
    ),
    CPU,
];
/// `[[op]]` with `kcompactd`.
pub(crate) const OP_KCOMPACTD: &[KeyDef] = &[
    action(
        "kcompactd",
        KeyKind::Form("an order 1..=10"),
        "wake kcompactd for this order and run it",
    ),
    key(
        "mode",
        KeyKind::Form("force or wake"),
        KeyDefault::Str("force"),
        "force: record the order and run kcompactd_do_work at once; wake: the kernel's wakeup_kcompactd, the loop runs only if it woke kcompactd (docs/model §26.1)",
    ),
];
/// `[[op]]` with `proactive_compact`.
pub(crate) const OP_PROACTIVE: &[KeyDef] = &[
    action(
        "proactive_compact",
        KeyKind::True,
        "one round of proactive compaction",
    ),
    key(
        "mode",
        KeyKind::Form("timer, tick, trigger or force"),
        KeyDefault::Str("timer"),
        "timer: kcompactd's wait times out now (a 32 s back-off is not honoured); tick: 500 ms pass, honouring the back-off; trigger: a compaction_proactiveness write; force: compact_node(proactive) regardless of the node score (docs/model §26.2-§26.3)",
    ),
];
/// `[[op]]` with `fault`.
pub(crate) const OP_FAULT: &[KeyDef] = &[
    action("fault", KeyKind::Str, "THP faults into this named set"),
    key(
        "count",
        OP_COUNT,
        KeyDefault::Int(1),
        "how many faults (at most 16 x the machine's pages and swap)",
    ),
    boolean("madvised", false, "the VMA is MADV_HUGEPAGE"),
    CPU,
];
/// `[[op]]` with `kswapd`.
pub(crate) const OP_KSWAPD: &[KeyDef] = &[action("kswapd", KeyKind::True, "wake kswapd and run it")];
/// `[[op]]` with `page_reporting`.
pub(crate) const OP_PAGE_REPORTING: &[KeyDef] = &[action(
    "page_reporting",
    KeyKind::True,
    "run free page reporting's pending pass now, as its delayed work would 2 s after the request (§32.2; needs machine.page_reporting_order; a timeless run runs passes only when this op asks)",
)];
/// `[[op]]` with `write`.
pub(crate) const OP_WRITE: &[KeyDef] = &[
    action("write", KeyKind::Str, "buffered write to this file"),
    size("offset", 0, 0, "where the write starts"),
    key(
        "length",
        KeyKind::Size { min: 1 },
        KeyDefault::Required("a size in bytes such as \"64KiB\""),
        "bytes written",
    ),
    key(
        "mapping",
        MAPPING_FORM,
        KeyDefault::Str("xfs"),
        "the file's mapping kind (set by the first op that names the file)",
    ),
    CPU,
];
/// `[[op]]` with `read`.
pub(crate) const OP_READ: &[KeyDef] = &[
    action("read", KeyKind::Str, "buffered read of this file"),
    size("offset", 0, 0, "where the read starts"),
    key(
        "length",
        KeyKind::Size { min: 1 },
        KeyDefault::Required("a size in bytes such as \"64KiB\""),
        "bytes read",
    ),
    key(
        "file_size",
        KeyKind::Size { min: 1 },
        KeyDefault::Text("offset + length"),
        "the file's size (readahead stops at its end)",
    ),
    key(
        "mapping",
        MAPPING_FORM,
        KeyDefault::Str("xfs"),
        "the file's mapping kind (set by the first op that names the file)",
    ),
    CPU,
];

/// The `[[op]]` actions, each with its keys (the action first), in the order messages list them.
pub(crate) const OPS: &[&[KeyDef]] = &[
    OP_ALLOC,
    OP_FREE,
    OP_PRINT,
    OP_DRAIN,
    OP_COMPACT_MEMORY,
    OP_COMPACT,
    OP_KCOMPACTD,
    OP_PROACTIVE,
    OP_FAULT,
    OP_KSWAPD,
    OP_WRITE,
    OP_READ,
    OP_NR_HUGEPAGES,
    OP_PAGE_REPORTING,
];

/// `[workload]`.
pub(crate) const WORKLOAD: &[KeyDef] = &[
    duration(
        "duration",
        1,
        3_600_000_000_000,
        "the run stops at this simulated time",
    ),
    key(
        "kbuild",
        KeyKind::Table("[[workload.kbuild]]"),
        KeyDefault::Text("none"),
        "kernel builds",
    ),
    key(
        "thp_burst",
        KeyKind::Table("[[workload.thp_burst]]"),
        KeyDefault::Text("none"),
        "THP fault bursts",
    ),
    key(
        "thpchallenge",
        KeyKind::Table("[[workload.thpchallenge]]"),
        KeyDefault::Text("none"),
        "mmtests' thpchallenge",
    ),
    key(
        "pgbench",
        KeyKind::Table("[[workload.pgbench]]"),
        KeyDefault::Text("none"),
        "pgbench simple-update",
    ),
    key(
        "vm_scalability",
        KeyKind::Table("[[workload.vm_scalability]]"),
        KeyDefault::Text("none"),
        "vm-scalability cases",
    ),
    key(
        "fio_smallfiles",
        KeyKind::Table("[[workload.fio_smallfiles]]"),
        KeyDefault::Text("none"),
        "mmtests' fio small-file writers",
    ),
    key(
        "task",
        KeyKind::Table("[[workload.task]]"),
        KeyDefault::Text("none"),
        "programs of steps",
    ),
];

/// `numa_node` of a workload table (kbuild, thp_burst, task).
const NUMA_NODE: KeyDef = key(
    "numa_node",
    KeyKind::Int {
        lo: 0,
        hi: 15,
        range: "0..=15, a node of the machine",
    },
    KeyDefault::Text("none: any CPU"),
    "run the tasks on this node's CPUs (numactl --cpunodebind); their memory is bound to it too unless mempolicy says otherwise",
);

/// `mempolicy` of a workload table (kbuild, thp_burst, task).
const MEMPOLICY: KeyDef = key(
    "mempolicy",
    KeyKind::Form("local, preferred:N, bind:NODES or interleave:NODES (NODES like 0,1, 0-3 or all)"),
    KeyDefault::Text("bind:numa_node with numa_node, else local"),
    "the tasks' memory policy (set_mempolicy, numactl --membind/--interleave/--preferred)",
);

/// `[[workload.kbuild]]`.
pub(crate) const KBUILD: &[KeyDef] = &[
    int(
        "jobs_parallel",
        1,
        MAX_2_20.0,
        MAX_2_20.1,
        4,
        "make -jN: jobs running at once",
    ),
    int("jobs", 1, MAX_2_20.0, MAX_2_20.1, 400, "compile jobs per build"),
    int("iterations", 1, MAX_2_20.0, MAX_2_20.1, 1, "builds in a row"),
    size("job_anon", 4096, 8 << 20, "a job's anonymous memory"),
    duration("job_cpu", 1, 200_000_000, "a job's CPU time"),
    size("source", 4096, 256 << 20, "the source tree"),
    size("job_read", 0, 4 << 20, "source a job reads"),
    size("job_slab", 0, 256 << 10, "reclaimable slab a job allocates"),
    size("job_obj", 0, 128 << 10, "the object file a job writes"),
    key(
        "source_file",
        KeyKind::Size { min: 4096 },
        KeyDefault::Text("64 KiB, or source if smaller"),
        "one file of the tree (at most source)",
    ),
    boolean("untar", false, "each build unpacks its tree afresh"),
    int(
        "trees",
        1,
        MAX_2_20.0,
        MAX_2_20.1,
        1,
        "with untar, the trees kept",
    ),
    NUMA_NODE,
    MEMPOLICY,
];

/// `[[workload.thp_burst]]`.
pub(crate) const THP_BURST: &[KeyDef] = &[
    duration("interval", 1, 10_000_000_000, "from one burst to the next"),
    size(
        "size",
        2 << 20,
        64 << 20,
        "a burst's region (a multiple of 2 MiB)",
    ),
    duration("hold", 0, 1_000_000_000, "how long a burst holds its memory"),
    int("bursts", 1, MAX_2_20.0, MAX_2_20.1, 10, "how many bursts"),
    duration("start", 0, 0, "when the first burst starts"),
    boolean("madvised", true, "MADV_HUGEPAGE on the region"),
    NUMA_NODE,
    MEMPOLICY,
];

/// `[[workload.thpchallenge]]`.
pub(crate) const THPCHALLENGE: &[KeyDef] = &[
    int("threads", 1, 4096, "1..=4096", 1, "fault threads"),
    size(
        "size",
        2 << 20,
        256 << 20,
        "each thread's region (a multiple of 2 MiB)",
    ),
    boolean("madvised", true, "MADV_HUGEPAGE on the regions"),
    duration("hold", 0, 0, "how long the threads hold their memory"),
    duration("start", 0, 0, "when the threads start"),
];

/// `[[workload.pgbench]]`.
pub(crate) const PGBENCH: &[KeyDef] = &[
    int("clients", 1, 65536, "1..=65536", 32, "client backends"),
    size("client_private", 0, 4 << 20, "a backend's private memory"),
    size("data", 4096, 1 << 30, "the database"),
    size("wal", 4096, 64 << 20, "the WAL"),
    duration("tx_cpu", 1, 200_000, "a transaction's CPU time"),
    size("tx_data_write", 1, 8 << 10, "data a transaction dirties"),
    size("tx_wal_write", 1, 8 << 10, "WAL a transaction writes"),
    size(
        "fpw_wal_write",
        1,
        64 << 10,
        "WAL a transaction writes during a checkpoint (full-page images)",
    ),
    duration(
        "checkpoint_interval",
        1,
        300_000_000_000,
        "from one checkpoint to the next",
    ),
    size("checkpoint_size", 4096, 256 << 20, "data a checkpoint writes"),
    size("checkpoint_write", 4096, 1 << 20, "a checkpoint's write size"),
    duration(
        "checkpoint_spread",
        0,
        0,
        "spread a checkpoint's writes over this long (0: at once)",
    ),
    duration("duration", 1, 600_000_000_000, "how long the clients run"),
];

/// `[[workload.vm_scalability]]`.
pub(crate) const VM_SCALABILITY: &[KeyDef] = &[
    key(
        "case",
        KeyKind::Form(
            "a case: small-allocs, mmap-pread-seq, lru-file-readtwice, lru-file-mmap-read or msync",
        ),
        KeyDefault::Required(
            "one of small-allocs, mmap-pread-seq, lru-file-readtwice, lru-file-mmap-read, msync",
        ),
        "the vm-scalability case",
    ),
    key(
        "tasks",
        KeyKind::Int {
            lo: 1,
            hi: 4096,
            range: "1..=4096",
        },
        KeyDefault::Text("the machine's CPUs"),
        "processes (nr_task)",
    ),
    key(
        "size",
        KeyKind::Size { min: 1 << 20 },
        KeyDefault::Text("the case's (1.5 x memory; memory / cpus / 2 for msync)"),
        "total bytes (per task for msync)",
    ),
    size("unit", 4096, 10 * 4096, "small-allocs' VMA size"),
    duration("runtime", 1, 300_000_000_000, "how long the case runs"),
    duration("start", 0, 0, "when the case starts"),
    key(
        "mapping",
        MAPPING_FORM,
        KeyDefault::Str("large_folios"),
        "the file cases' mapping kind",
    ),
];

/// `[[workload.fio_smallfiles]]`.
pub(crate) const FIO_SMALLFILES: &[KeyDef] = &[
    int("jobs", 1, 1024, "1..=1024", 2, "writers"),
    size("file_size", 4096, 16 << 10, "each file"),
    key(
        "working_set",
        KeyKind::Size { min: 1 << 20 },
        KeyDefault::Text("1.5 x memory"),
        "all files together",
    ),
    duration("start", 0, 0, "when the writers start"),
    key(
        "runtime",
        KeyKind::Duration { min: 1 },
        KeyDefault::Text("the workload's duration"),
        "stop after this long",
    ),
];

/// `[[workload.task]]`.
pub(crate) const TASK: &[KeyDef] = &[
    key("name", KeyKind::Str, KeyDefault::Str("task"), "the task's name"),
    int("count", 1, 4096, "1..=4096", 1, "instances"),
    NUMA_NODE,
    MEMPOLICY,

    duration("start", 0, 0, "when the instances start"),
    int("loops", 1, MAX_2_20.0, MAX_2_20.1, 1, "times the program runs"),
    key(
        "steps",
        KeyKind::Table("steps = [{ <action> = ..., ... }]"),
        KeyDefault::Required("an array of steps such as [{ mmap = \"a\", size = \"64MiB\" }]"),
        "the program: one action per step",
    ),
    // Phases (issue 19).
    key(
        "after",
        KeyKind::Form("the name of another [[workload.task]]"),
        KeyDefault::Text("none (start at `start`)"),
        "start when every instance of that task has finished its program; `start` then counts from that moment",
    ),
    boolean(
        "background",
        false,
        "background load (as mmtests runs fio beside thpchallenge): the run ends when every task without it has finished, and background tasks still running are stopped then (killed on the host); at least one task must be without it",
    ),
];

const VMA: KeyKind = KeyKind::Form("the name of a mapping of an earlier mmap step");
/// `mapping` of the steps that name a file or file set: the first such step sets the kind.
const STEP_MAPPING: KeyDef = key(
    "mapping",
    MAPPING_FORM,
    KeyDefault::Str("xfs"),
    "the file's mapping kind (set by the first step that names the file)",
);
const PATTERN: KeyDef = key(
    "pattern",
    KeyKind::Form("sequential or random"),
    KeyDefault::Str("sequential"),
    "the order of the pages",
);

/// The task steps' actions, each with its keys (the action first), in the order messages list
/// them.
pub(crate) const STEPS: &[&[KeyDef]] = &[
    &[
        action("mmap", KeyKind::Str, "an anonymous mapping with this name"),
        key(
            "size",
            KeyKind::Size { min: 4096 },
            KeyDefault::Required("a size such as \"64MiB\""),
            "the mapping's size",
        ),
        boolean("madvise", false, "MADV_HUGEPAGE"),
        boolean(
            "locked",
            false,
            "MAP_LOCKED: populate and mlock the mapping at mmap (docs/model §29.1.2)",
        ),
    ],
    &[
        action("touch", VMA, "write-touch every page of the mapping"),
        PATTERN,
        size(
            "stride",
            4096,
            4096,
            "touch only the first page of every STRIDE bytes (a multiple of 4 KiB), as a program that writes one word per 2 MiB does",
        ),
    ],
    &[
        action("dontneed", VMA, "MADV_DONTNEED a range of the mapping"),
        size("offset", 0, 0, "where the range starts"),
        key(
            "length",
            KeyKind::Size { min: 1 },
            KeyDefault::Required("a size in bytes"),
            "the range's length",
        ),
        key(
            "stride",
            KeyKind::Size { min: 4096 },
            KeyDefault::Text("none (one range)"),
            "repeat the range every STRIDE bytes (a multiple of 4 KiB, at least the length) to the end of the mapping: one madvise call per range, in address order",
        ),
    ],
    &[action("munmap", VMA, "unmap the mapping")],
    &[action(
        "compute",
        KeyKind::Duration { min: 1 },
        "run on the CPU this long",
    )],
    &[action("sleep", KeyKind::Duration { min: 1 }, "sleep this long")],
    &[
        action("read", KeyKind::Str, "buffered read of this file"),
        size("offset", 0, 0, "where the read starts"),
        key(
            "length",
            KeyKind::Size { min: 1 },
            KeyDefault::Required("a size in bytes such as \"1MiB\""),
            "bytes read",
        ),
        key(
            "file_size",
            KeyKind::Size { min: 1 },
            KeyDefault::Text("offset + length (at least)"),
            "the file's size",
        ),
        PATTERN,
        STEP_MAPPING,
    ],
    &[
        action("write", KeyKind::Str, "buffered write to this file"),
        size("offset", 0, 0, "where the write starts"),
        key(
            "length",
            KeyKind::Size { min: 1 },
            KeyDefault::Required("a size in bytes such as \"1MiB\""),
            "bytes written",
        ),
        size("chunk", 4096, 1 << 20, "the size of each write"),
        STEP_MAPPING,
    ],
    &[action("delete", KeyKind::Str, "unlink this file")],
    &[action(
        "slab",
        KeyKind::Int {
            lo: 1,
            hi: 1 << 30,
            range: "1..=2^30",
        },
        "allocate this many reclaimable slab objects (dentries, inodes)",
    )],
    &[action(
        "pipes",
        KeyKind::Int {
            lo: 1,
            hi: 1 << 30,
            range: "1..=2^30",
        },
        "allocate this many unmovable objects (pipe buffers)",
    )],
    &[action(
        "compact_memory",
        KeyKind::True,
        "write 1 to /proc/sys/vm/compact_memory",
    )],
    &[action(
        "drop_caches",
        KeyKind::True,
        "write 3 to /proc/sys/vm/drop_caches",
    )],
    &[action(
        "nr_hugepages",
        NR_HUGEPAGES,
        "the 2 MiB hugetlb pool the workload asks for on top of the pool the machine holds (machine.hugetlb_pages, or --fit-memory's pool on the host): base + count is written to /proc/sys/vm/nr_hugepages, growing or shrinking the pool, and the pool minus the base is reported (docs/model §28)",
    )],
    // mlock (H2, docs/model §29).
    &[action(
        "mlock",
        VMA,
        "mlock(2) the whole mapping: populate it (every page faulted) and mlock it (docs/model §29.1)",
    )],
    &[action(
        "munlock",
        VMA,
        "munlock(2) the whole mapping (docs/model §29.1.5)",
    )],
    // Phases (issue 19).
    &[action(
        "measure",
        KeyKind::True,
        "the measured part of the run starts here (the first time any task runs this step): vmstat deltas, latency histograms and rows cover it only",
    )],
    // H5: the page-cache census.
    &[action(
        "census",
        KeyKind::Form("the name of a file an earlier read or write step of the task names"),
        "record the page-cache folio orders of this file now (pages and folios per order; /proc/kpageflags on the host, docs/model §30.2)",
    )],
    // Issue 19 item 3 (H3): free, files, fadvise.
    &[
        action(
            "free",
            KeyKind::Form("slab or pipes"),
            "free every Nth object this task's slab or pipes steps allocated",
        ),
        int("every", 2, 1 << 30, "2..=2^30", 2, "free one object in every N"),
        // Issue 33: single pipe pages.
        key(
            "every_page",
            KeyKind::Int {
                lo: 1,
                hi: crate::workload::MAX_PIPE_LANES as i64,
                range: "1..=1024",
            },
            KeyDefault::Text("none (every: whole pipes)"),
            "free = \"pipes\" only, instead of every: free every Nth pipe-buffer page of the task's pipes (the Nth, 2Nth, ... page they allocated; pages, not whole pipes); a task frees its pipes by page or whole, not both, and its every_page values have a least common multiple of at most 1024 (the host fills that many pipes side by side)",
        ),
    ],
    &[
        action("files", KeyKind::Str, "a set of small files SET/0..count-1"),
        key(
            "count",
            KeyKind::Int {
                lo: 1,
                hi: 1 << 20,
                range: "1..=1048576",
            },
            KeyDefault::Required("a number of files such as 1000"),
            "files in the set",
        ),
        size("size", 1, 64 << 10, "each file's size"),
        key(
            "op",
            KeyKind::Form("create, read or delete"),
            KeyDefault::Required("one of create, read, delete"),
            "create (a buffered write each), read (each file whole) or delete (unlink all)",
        ),
        key(
            "pattern",
            KeyKind::Form("sequential or random"),
            KeyDefault::Str("sequential"),
            "the order of the files (random: a seeded shuffle)",
        ),
        STEP_MAPPING,
        // Issue 33.
        int(
            "every",
            1,
            1 << 20,
            "1..=1048576",
            1,
            "op = \"delete\" only: delete every Nth file of the set (SET/N-1, SET/2N-1, ...)",
        ),
    ],
    &[
        action("fadvise", KeyKind::Str, "posix_fadvise on this file"),
        key(
            "advice",
            KeyKind::Form("dontneed, sequential, willneed, random or normal"),
            KeyDefault::Required("one of dontneed, sequential, willneed, random, normal"),
            "POSIX_FADV_* (docs/model §23.6)",
        ),
        size("offset", 0, 0, "where the range starts"),
        key(
            "length",
            KeyKind::Size { min: 1 },
            KeyDefault::Text("the whole file"),
            "the range's length",
        ),
    ],
    // Issue 33: named sample points.
    &[action(
        "sample",
        KeyKind::Form("a name: letters, digits, _ and -"),
        "record a named sample now (no time): the periodic samples' record plus the pageblock census of each zone (free, unmovable, movable, reclaimable, mixed blocks), result named_samples, rows census.NAME.ZONE.CLASS (the last sample of the name)",
    )],
];

/// The keys of `[cost]` (all `COST_KEYS`, in that order).
const COST: KeyKind = KeyKind::Int {
    lo: 0,
    hi: 1 << 40,
    range: "0..=2^40 ns",
};

/// The actions' names of `tables` (each table's first key), in order.
pub(crate) fn actions(tables: &[&[KeyDef]]) -> Vec<&'static str> {
    tables.iter().map(|t| t[0].name).collect()
}

/// The keys an `[[op]]` may have: every action, then the other keys of each action in turn,
/// each once.
pub(crate) fn all_op_keys() -> Vec<&'static str> {
    let mut keys = actions(OPS);
    for k in OPS.iter().flat_map(|t| &t[1..]) {
        if !keys.contains(&k.name) {
            keys.push(k.name);
        }
    }
    keys
}

/// The names of `keys`, in order.
pub(crate) fn names(keys: &[KeyDef]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

/// `name`'s declaration in `keys`; a name the parser asks for is always declared.
pub(crate) fn find(keys: &'static [KeyDef], name: &str) -> &'static KeyDef {
    keys.iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("spec key {name} is not declared in src/keys.rs"))
}

/// One row of [`spec_keys`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecKey {
    /// The table, as a spec writes it: `[machine]`, `[[op]] alloc`, `[[workload.task]] steps: mmap`,
    /// or `(top level)`.
    pub table: String,
    pub key: &'static str,
    /// The expected form of the value.
    pub form: String,
    /// The default, in words: `required`, `(the action)`, or a value.
    pub default: String,
    pub doc: &'static str,
}

impl KeyKind {
    /// The form of the value, in words.
    pub fn describe(&self) -> String {
        match *self {
            KeyKind::Int { range, .. } => format!("an integer {range}"),
            KeyKind::Bool => "a boolean".into(),
            KeyKind::Size { min } => {
                format!("a size in bytes (an integer or a string like \"4MiB\"), >= {min}")
            }
            KeyKind::Duration { min } => format!("a duration such as \"500ms\", >= {min} ns"),
            KeyKind::Str => "a string".into(),
            KeyKind::True => "true".into(),
            KeyKind::Form(s) => s.into(),
            KeyKind::Table(s) => format!("the table {s}"),
        }
    }
}

impl KeyDefault {
    /// The default, in words.
    pub fn describe(&self) -> String {
        match *self {
            KeyDefault::Required(_) => "required".into(),
            KeyDefault::Action => "(the action)".into(),
            KeyDefault::Int(v) => v.to_string(),
            KeyDefault::Bool(b) => b.to_string(),
            KeyDefault::Bytes(b) => bytes(b),
            KeyDefault::Ns(ns) => nanos(ns),
            KeyDefault::Str(s) => crate::tree::quote(s),
            KeyDefault::Text(s) => s.into(),
        }
    }
}

fn bytes(b: u64) -> String {
    let units = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    match units.iter().find(|(s, _)| b != 0 && b.is_multiple_of(1 << s)) {
        Some((s, u)) => format!("\"{}{u}\"", b >> s),
        None => b.to_string(),
    }
}

fn nanos(ns: u64) -> String {
    let units = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "min"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ];
    match units.iter().find(|(m, _)| ns != 0 && ns.is_multiple_of(*m)) {
        Some((m, u)) => format!("\"{}{u}\"", ns / m),
        None if ns == 0 => "0".into(),
        None => format!("\"{ns}ns\""),
    }
}

/// Every spec key the parser accepts, table by table: `[knobs]` and `[model]` are listed by their
/// own registries (`fraglab knobs`, [`crate::MODEL_SWITCHES`]) and appear here as table keys only.
pub fn spec_keys() -> Vec<SpecKey> {
    let mut tables: Vec<(String, &[KeyDef])> = vec![
        ("(top level)".into(), TOP),
        ("[machine]".into(), MACHINE),
        ("[[machine.zone]]".into(), ZONE),
        ("[[machine.node]]".into(), NODE),
        ("[run]".into(), RUN),
        ("[host]".into(), HOST),
        ("[damon]".into(), DAMON),
    ];
    tables.extend(OPS.iter().map(|t| (format!("[[op]] {}", t[0].name), *t)));
    tables.extend([
        ("[workload]".into(), WORKLOAD),
        ("[[workload.kbuild]]".into(), KBUILD),
        ("[[workload.thp_burst]]".into(), THP_BURST),
        ("[[workload.thpchallenge]]".into(), THPCHALLENGE),
        ("[[workload.pgbench]]".into(), PGBENCH),
        ("[[workload.vm_scalability]]".into(), VM_SCALABILITY),
        ("[[workload.fio_smallfiles]]".into(), FIO_SMALLFILES),
        ("[[workload.task]]".into(), TASK),
    ]);
    tables.extend(
        STEPS
            .iter()
            .map(|t| (format!("[[workload.task]] steps: {}", t[0].name), *t)),
    );
    let mut rows: Vec<SpecKey> = tables
        .into_iter()
        .flat_map(|(table, keys)| {
            keys.iter().map(move |k| SpecKey {
                table: table.clone(),
                key: k.name,
                form: k.kind.describe(),
                default: k.default.describe(),
                doc: k.doc,
            })
        })
        .collect();
    rows.extend(crate::COST_KEYS.iter().map(|&k| SpecKey {
        table: "[cost]".into(),
        key: k,
        form: COST.describe(),
        default: "the cost model's".into(),
        doc: "a cost-model constant (sim's CostModel)",
    }));
    rows
}

/// The value range of every `[cost]` key.
pub(crate) fn cost_kind() -> KeyKind {
    COST
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts that spell out a vocabulary say what the code accepts.
    #[test]
    fn stated_forms_match_the_vocabularies() {
        let order = format!("0..={}", fraglab_types::page::MAX_PAGE_ORDER);
        assert!(matches!(ORDER, KeyKind::Int { range, .. } if range == order));
        let cases: Vec<&str> = crate::VmScalabilityCase::ALL.iter().map(|c| c.name()).collect();
        let case = find(VM_SCALABILITY, "case");
        let want = format!("one of {}", cases.join(", "));
        assert!(matches!(case.default, KeyDefault::Required(w) if w == want));
        for m in crate::MappingKind::ALL {
            assert!(matches!(MAPPING_FORM, KeyKind::Form(f) if f.contains(m.name())));
        }
        for p in crate::PrintWhat::ALL {
            assert!(matches!(find(OP_PRINT, "print").kind, KeyKind::Form(f) if f.contains(p.name())));
        }
        for (m, _) in crate::KCOMPACTD_MODES {
            assert!(matches!(find(OP_KCOMPACTD, "mode").kind, KeyKind::Form(f) if f.contains(m)));
        }
        for (m, _) in crate::PROACTIVE_MODES {
            assert!(matches!(find(OP_PROACTIVE, "mode").kind, KeyKind::Form(f) if f.contains(m)));
        }
        for (p, _) in crate::COMPACT_PRIORITIES {
            assert!(matches!(find(OP_COMPACT, "priority").kind, KeyKind::Form(f) if f.contains(p)));
        }
    }

    #[test]
    fn defaults_in_words() {
        assert_eq!(KeyDefault::Bytes(256 << 20).describe(), "\"256MiB\"");
        assert_eq!(KeyDefault::Bytes(10 * 4096).describe(), "\"40KiB\"");
        assert_eq!(KeyDefault::Ns(200_000).describe(), "\"200us\"");
        assert_eq!(KeyDefault::Ns(3_600_000_000_000).describe(), "\"1h\"");
        assert_eq!(KeyDefault::Ns(0).describe(), "0");
    }
}
