//! docs/knobs.md, generated from the declarations: every kernel knob ([`crate::KNOBS`]) and
//! model switch ([`crate::MODEL_SWITCHES`]) with what it changes in the model, its section of
//! docs/model and whether the model reads it, then the spec keys, ops and generators that
//! exercise mechanisms directly. `cargo test -p fraglab-spec --test docs` fails when the file is
//! stale; `FRAGLAB_BLESS=1` on that test (or `fraglab knobs --markdown > docs/knobs.md`)
//! rewrites it.

use std::fmt::Write as _;

use crate::{KNOBS, MODEL_SWITCHES};

/// Spec keys that configure the model like a knob does, as (key, what it models, section, read).
const SPEC_KEY_ROWS: &[(&str, &str, &str, &str)] = &[
    (
        "`[machine] swap`",
        "a swap device of this size (default none, like the reference VM): anon reclaim swaps out \
         (`pswpout`, `thp_swpout`, split without room)",
        "§10.3.6, §19.1.10",
        "yes",
    ),
    (
        "`[machine] nodes`, `[[machine.node]]`",
        "NUMA nodes: per-node zones, LRU lists, kswapd and kcompactd; zonelists in \
         `find_next_best_node` order; `numa_*` events per zone; per-node /proc files",
        "§1.1",
        "yes",
    ),
    (
        "`numa_node`, `mempolicy` (kbuild, thp_burst, task)",
        "where a workload's tasks run (the node's CPUs) and allocate (local, preferred, bind, \
         interleave)",
        "§1.1",
        "yes (timed runs)",
    ),
    (
        "`[cost] <name>`",
        "the simulated time of each unit of work (`fault_base_ns`, `zero_page_ns`, \
         `migrate_page_ns`, …; `docs/costs.md`)",
        "architecture.md",
        "yes (timed runs)",
    ),
    (
        "`[run] debug_vm`",
        "check every invariant (buddy lists, counters, PCP, folios, LRU lists) after every operation",
        "architecture.md",
        "yes",
    ),
    (
        "`[run] trace`",
        "record kmem (`kmem:*`), compaction (`compaction:*`), migrate (`migrate:*`), vmscan \
         (`vmscan:*`) and DAMON (`damon:*`) tracepoints in ftrace text form (op specs: `print = \"trace\"`; timed runs: counted per event in the \
         result's `trace_counts`, as the host engine's `--trace` does, and the first 4 MiB of text \
         in `proc_end[\"trace\"]`)",
        "§15",
        "yes",
    ),
];

/// Ops that exercise a mechanism directly, as (op, kernel path modelled, section).
const OP_ROWS: &[(&str, &str, &str)] = &[
    (
        "`fault`",
        "`do_anonymous_fault`: PMD THP (THISNODE\\|NORETRY first), mTHP ladder, order 0",
        "§11.2–11.3",
    ),
    (
        "`write`",
        "`iomap_write_iter` → `__filemap_get_folio(FGP_WRITEBEGIN\\|FGP_NOFS)`: hint per chunk, \
         order loop, `costly_order_policy` gfp",
        "§12.3, §12.5",
    ),
    (
        "`read`",
        "`filemap_read` in read(2) calls of 128 KiB with `page_cache_sync_ra`/`async_ra` \
         (`ractl_max_pages`: `io_pages`) and `page_cache_ra_order` (ra order +2, clamp kept, \
         first-error fallback at order 0)",
        "§12.2, §23",
    ),
    (
        "`kswapd`",
        "kswapd woken and run until it sleeps: `balance_pgdat`, `kswapd_try_to_sleep`, kcompactd \
         hand-off",
        "§10.1–10.2",
    ),
    (
        "`compact`, `kcompactd`, `proactive_compact`, `compact_memory`",
        "`try_to_compact_pages`, `kcompactd_do_work`, the kcompactd loop, \
         `/proc/sys/vm/compact_memory`",
        "§9",
    ),
    (
        "`nr_hugepages`",
        "`set_max_huge_pages`: one order-9 page per iteration with `htlb_alloc_mask` \\| \
         `__GFP_THISNODE` \\| `__GFP_RETRY_MAYFAIL` through the slow path, stop at the first \
         failure, join after the loop; shrinking frees the pool's free-list heads \
         (`htlb_buddy_alloc_success`/`_fail`)",
        "§28.1–28.2",
    ),
];

/// Workload generators and task steps, as (key, what it runs, kernel paths it exercises).
const GENERATOR_ROWS: &[(&str, &str, &str)] = &[
    (
        "`[[workload.kbuild]]`",
        "a parallel build: compile jobs with private anon memory, page tables, a kernel stack, \
         source reads, dentry/inode slab, object writes; Real/User/System time per build",
        "faults §11.3, readahead §12.2, reclaim §10",
    ),
    (
        "`[[workload.thp_burst]]`",
        "seed 001's Hugealloc process: bursts of THP faults, madvised unless `madvised = false` \
         (background load beside a kbuild)",
        "§11.2, slow path §7",
    ),
    (
        "`[[workload.thpchallenge]]`",
        "mmtests' THP fault benchmark, thpchallenge; `start` delays the threads",
        "§11",
    ),
    (
        "`[[workload.fio_smallfiles]]`",
        "mmtests' fio background: `jobs` writers create `file_size` files (dentry + inode slab \
         objects, a buffered write) in a ring of `working_set` (1.5 × memory), deleting each \
         slot's old file; background load beside another generator",
        "slab (`crates/sim/src/slab.rs`), iomap writes §12.3, reclaim §10, truncate",
    ),
    (
        "`[[workload.pgbench]]`",
        "clients writing 8 KiB to an XFS-like data file and WAL per transaction, `fpw_wal_write` \
         (64 KiB) WAL writes while a checkpoint runs, checkpoints of `checkpoint_size` in \
         `checkpoint_write` writes every `checkpoint_interval`, paced over `checkpoint_spread`",
        "iomap writes §12.3, §12.5",
    ),
    (
        "`[[workload.vm_scalability]]`",
        "`case` = small-allocs (zero-page read faults, page tables, VMA slab), mmap-pread-seq, \
         lru-file-readtwice (two `dd bs=4k` per file), lru-file-mmap-read, msync (shared writable \
         mapping, write faults after writeback, `filemap_write_and_wait_range`); sparse files",
        "`filemap_fault` (read-around, VM_HUGEPAGE/SEQ/RAND, `mmap_miss`, mm/filemap.c 6.18), \
         fault-around, readahead §12.2",
    ),
    (
        "task step `delete`",
        "unlink a file: `truncate_inode_pages_final` (dirty pages dropped unwritten, shadows \
         forgotten)",
        "mm/truncate.c",
    ),
    (
        "task step `nr_hugepages`",
        "write the count to `vm.nr_hugepages` as the `nr_hugepages` op does; the step's time is \
         the slow-path work of its allocations; the pool size read back is `proc_end[\"nr_hugepages\"]` and \
         the vmstat delta has `htlb_buddy_alloc_success`/`_fail`",
        "§28.1–28.2",
    ),
    (
        "task step `census`",
        "record the page-cache folio orders of a file (pages and folios per order 0..=10) in the \
         result's `census`: the page cache's index in the simulator, mincore + pagemap + \
         /proc/kpageflags on the host",
        "§30.2",
    ),
    (
        "task step `free` with `every_page`",
        "free every Nth pipe-buffer page of the task's pipes, by place in allocation order; the \
         host fills lcm(every_page) pipes side by side (page k in pipe k mod lanes) and closes the \
         pipes holding those pages, since a read frees only at a pipe's head and the first two \
         pages a pipe releases stay cached as its `tmp_page`s",
        "fs/pipe.c `free_pipe_info`, `anon_pipe_put_page`",
    ),
    (
        "task step `files` with `every`",
        "`op = \"delete\"` of every Nth file of the set (SET/N-1, SET/2N-1, ...): each unlinked, \
         its page cache truncated, its dentry and inode freed",
        "mm/truncate.c, dentry/inode slab",
    ),
    (
        "task step `sample`",
        "a named sample where the program reaches the step: the periodic sample's record plus, \
         per zone, the pageblock census (wholly free blocks, blocks in use per type, mixed \
         blocks) from /proc/pagetypeinfo as each engine prints it; result `named_samples`, rows \
         `census.NAME.ZONE.CLASS` for `compare` and `validate`",
        "§16.2 item 4, §30.4",
    ),
];

/// The text of docs/knobs.md.
pub fn knobs_markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "# Knobs and switches: what each one changes in the model\n\
         \n\
         <!-- Generated from the declarations in crates/spec/src/knobs.rs, model.rs and docs.rs:\n\
         \x20    `fraglab knobs --markdown > docs/knobs.md`. Do not edit by hand. -->\n\
         \n\
         Every kernel knob a spec may set (`fraglab knobs` prints the same list with values and defaults)\n\
         and every model switch, with the kernel behaviour it models and the section of\n\
         `docs/model/` it follows. \"Read\" says whether this version of the model\n\
         uses it; the others are accepted (and reported by `fraglab run` as not read yet) so that specs\n\
         written for the host engine stay valid.\n\
         \n\
         | knob / switch | kernel behaviour modelled | section | read |\n\
         |---|---|---|---|\n",
    );
    // Consecutive knobs with the same behaviour, section and reading share a row (the mTHP
    // sizes, the dirty_* thresholds, khugepaged's knobs).
    let mut i = 0;
    while i < KNOBS.len() {
        let k = &KNOBS[i];
        let mut j = i + 1;
        while j < KNOBS.len()
            && KNOBS[j].models == k.models
            && KNOBS[j].section == k.section
            && KNOBS[j].read == k.read
        {
            j += 1;
        }
        let names: Vec<String> = KNOBS[i..j].iter().map(|k| format!("`{}`", k.name)).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            names.join(", "),
            k.models,
            k.section,
            k.read.text()
        );
        i = j;
    }
    for s in MODEL_SWITCHES {
        let _ = writeln!(
            out,
            "| `[model] {}` | {} | {} | {} |",
            s.name, s.models, s.section, s.read
        );
    }
    for (key, models, section, read) in SPEC_KEY_ROWS {
        let _ = writeln!(out, "| {key} | {models} | {section} | {read} |");
    }
    out.push_str(
        "\nOps that exercise a mechanism directly (timeless runs; docs/spec.md gives the syntax):\n\
         \n\
         | op | kernel path modelled | section |\n\
         |---|---|---|\n",
    );
    for (op, path, section) in OP_ROWS {
        let _ = writeln!(out, "| {op} | {path} | {section} |");
    }
    out.push_str(
        "\nWorkload generators and task steps of timed runs (`[workload]`; the engine charges each step's\n\
         work through `docs/costs.md`):\n\
         \n\
         | key | what it runs | kernel paths it exercises |\n\
         |---|---|---|\n",
    );
    for (key, what, paths) in GENERATOR_ROWS {
        let _ = writeln!(out, "| {key} | {what} | {paths} |");
    }
    out
}
