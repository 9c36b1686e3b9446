//! Every error is one line `file:line: key K: message`; these tests pin the exact text, so a wrong
//! line number (or key) fails them.

use fraglab_spec::{parse_spec, SpecError};

/// The spec made of `lines`: line N of the file is `lines[N - 1]`.
fn spec(lines: &[&str]) -> String {
    lines.join("\n") + "\n"
}

fn err(lines: &[&str]) -> SpecError {
    let text = spec(lines);
    match parse_spec(&text, "spec.toml") {
        Ok(s) => panic!("expected an error, parsed {s:#?}\n--- from ---\n{text}"),
        Err(e) => e,
    }
}

/// Asserts the one-line message exactly, and that its parts are exposed as fields.
#[track_caller]
fn check(lines: &[&str], line: usize, key: &str, message: &str) {
    let e = err(lines);
    assert_eq!(e.to_string(), format!("spec.toml:{line}: key {key}: {message}"));
    assert_eq!(
        (e.file.as_str(), e.line, e.key.as_deref()),
        ("spec.toml", line, Some(key))
    );
    assert_eq!(e.message, message);
    assert!(!e.to_string().contains('\n'));
}

const MACHINE: &[&str] = &["[machine]", "memory = \"1GiB\""];

/// MACHINE followed by `rest` (which therefore starts at line 3).
fn with_machine(rest: &[&str]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = MACHINE.to_vec();
    v.extend(rest.iter().map(|s| &*Box::leak(s.to_string().into_boxed_str())));
    v
}

// ---- the cases from the brief ----

#[test]
fn op_order_out_of_range() {
    check(
        &with_machine(&[
            "",
            "[[op]]",
            "alloc = \"a\"",
            "gfp = \"GFP_KERNEL\"",
            "",
            "[[op]]",
            "free = \"a\"",
            "",
            "[[op]]",
            "alloc = \"b\"",
            "gfp = \"GFP_KERNEL\"",
            "order = 11",
        ]),
        14,
        "op[2].order",
        "11 is out of range (expected 0..=10)",
    );
}

#[test]
fn unknown_knob_with_suggestion() {
    check(
        &[
            "[knobs]",
            "\"vm.swappiness\" = 10",
            "\"vm.defrag_mod\" = 1",
            "[machine]",
            "memory = \"1G\"",
        ],
        3,
        "knobs.\"vm.defrag_mod\"",
        "unknown knob (did you mean \"vm.defrag_mode\"?)",
    );
}

#[test]
fn unknown_knob_dotted_and_nested_forms_point_at_the_leaf_key() {
    check(
        &with_machine(&["[knobs]", "vm.swappiness = 10", "vm.defrag_mod = 1"]),
        5,
        "knobs.\"vm.defrag_mod\"",
        "unknown knob (did you mean \"vm.defrag_mode\"?)",
    );
    check(
        &with_machine(&["[knobs.vm]", "swappiness = 10", "", "defrag_mod = 1"]),
        6,
        "knobs.\"vm.defrag_mod\"",
        "unknown knob (did you mean \"vm.defrag_mode\"?)",
    );
    check(
        &with_machine(&["[knobs]", "min_free_kbytes = 1024"]),
        4,
        "knobs.min_free_kbytes",
        "unknown knob (did you mean \"vm.min_free_kbytes\"?)",
    );
    check(
        &with_machine(&["[knobs]", "\"vm.foobar_baz_qux\" = 1"]),
        4,
        "knobs.\"vm.foobar_baz_qux\"",
        "unknown knob (`fraglab knobs` lists them)",
    );
}

#[test]
fn unknown_gfp_flag() {
    check(
        &with_machine(&[
            "",
            "[[op]]",
            "alloc = \"a\"",
            "count = 3",
            "order = 2",
            "",
            "gfp = \"GFP_KERNAL\"",
        ]),
        9,
        "op[0].gfp",
        "unknown gfp flag \"GFP_KERNAL\" (did you mean \"GFP_KERNEL\"?)",
    );
    check(
        &with_machine(&["[[op]]", "alloc = \"a\"", "gfp = \"GFP_KERNEL | __GFP_NORETYR\""]),
        5,
        "op[0].gfp",
        "unknown gfp flag \"__GFP_NORETYR\" (did you mean \"__GFP_NORETRY\"?)",
    );
}

#[test]
fn memory_smaller_than_a_pageblock() {
    check(
        &["[machine]", "memory = \"1MiB\""],
        2,
        "machine.memory",
        "1MiB is smaller than one pageblock (2 MiB)",
    );
    check(
        &["[machine]", "cpus = 1", "memory = 2097151"],
        3,
        "machine.memory",
        "2097151 is smaller than one pageblock (2 MiB)",
    );
}

#[test]
fn cpus_of_the_wrong_type() {
    check(
        &[
            "name = \"x\"",
            "",
            "[machine]",
            "memory = \"1GiB\"",
            "cpus = \"2\"",
        ],
        5,
        "machine.cpus",
        "expected an integer, found a string",
    );
}

// ---- machine ----

#[test]
fn memory_errors() {
    check(
        &["[machine]", "memory = \"2TiB\""],
        2,
        "machine.memory",
        "2TiB is larger than the maximum (1 TiB)",
    );
    check(
        &["[machine]", "memory = \"99999999999999T\""],
        2,
        "machine.memory",
        "99999999999999T is larger than the maximum (1 TiB)",
    );
    check(
        &["[machine]", "memory = \"4GB\""],
        2,
        "machine.memory",
        "\"4GB\" is ambiguous (expected a binary unit: did you mean \"4GiB\"?)",
    );
    check(
        &["[machine]", "memory = \"lots\""],
        2,
        "machine.memory",
        "\"lots\" is not a size (expected bytes as an integer or a string like \"4GiB\"; \
         units B, KiB, MiB, GiB, TiB or K, M, G, T)",
    );
    check(
        &["[machine]", "memory = 4.5"],
        2,
        "machine.memory",
        "expected a size (an integer or a string like \"4GiB\"), found a float",
    );
    check(
        &["[machine]", "memory = -4096"],
        2,
        "machine.memory",
        "-4096 is smaller than one pageblock (2 MiB)",
    );
}

#[test]
fn machine_missing_pieces() {
    check(
        &["name = \"x\"", "", "[machine]", "cpus = 2"],
        3,
        "machine.memory",
        "missing (expected a size such as \"4GiB\", or [[machine.zone]] tables)",
    );
    check(
        &["name = \"x\""],
        1,
        "machine",
        "missing table [machine] (expected memory = \"<size>\" or [[machine.zone]] tables)",
    );
    check(
        &["machine = \"big\""],
        1,
        "machine",
        "expected a table, found a string",
    );
}

#[test]
fn cpus_range_and_unknown_machine_key() {
    check(
        &["[machine]", "memory = \"1G\"", "cpus = 0"],
        3,
        "machine.cpus",
        "0 is out of range (expected 1..=256)",
    );
    check(
        &["[machine]", "memory = \"1G\"", "cpus = 257"],
        3,
        "machine.cpus",
        "257 is out of range (expected 1..=256)",
    );
    check(
        &["[machine]", "memory = \"1G\"", "dma = 1"],
        3,
        "machine.dma",
        "expected a boolean, found an integer",
    );
    check(
        &["[machine]", "memory = \"1G\"", "cpu = 4"],
        3,
        "machine.cpu",
        "unknown key (did you mean \"cpus\"?)",
    );
    check(
        &["[machine]", "memory = \"1G\"", "numa_nodes = 2"],
        3,
        "machine.numa_nodes",
        "unknown key (expected one of: memory, cpus, dma, nodes, node, zone, swap, hugetlb_pages, read_ahead_kb, max_sectors_kb, page_reporting_order, snapshot, checkpoint)",
    );
    // §32.1 item 2: page_reporting_order takes 0..=10 (the kernel rejects other writes) or "off".
    check(
        &["[machine]", "memory = \"1G\"", "page_reporting_order = 11"],
        3,
        "machine.page_reporting_order",
        "11 is out of range (expected 0..=10 or \"off\")",
    );
    check(
        &["[machine]", "memory = \"1G\"", "page_reporting_order = \"9\""],
        3,
        "machine.page_reporting_order",
        "\"9\" is not an order (expected 0..=10 or \"off\")",
    );
}

const DMA32: &[&str] = &[
    "[[machine.zone]]",
    "name = \"DMA32\"",
    "start_pfn = 4096",
    "spanned = 1044480",
    "present = 782336",
    "managed = 772917",
];

fn zones(extra: &[&str]) -> Vec<&'static str> {
    let mut v = vec!["[machine]", "cpus = 2", ""];
    v.extend_from_slice(DMA32);
    v.extend(extra.iter().map(|s| &*Box::leak(s.to_string().into_boxed_str())));
    v
}

/// A zone's own sizes: present within spanned, managed within present.
#[test]
fn zone_size_errors() {
    // present > spanned
    check(
        &[
            "[[machine.zone]]",
            "name = \"DMA32\"",
            "start_pfn = 4096",
            "spanned = 100",
            "present = 101",
        ],
        5,
        "machine.zone[0].present",
        "101 is larger than spanned (100)",
    );
    // managed > present
    check(
        &[
            "[[machine.zone]]",
            "name = \"DMA32\"",
            "start_pfn = 4096",
            "spanned = 1000",
            "present = 900",
            "managed = 901",
        ],
        6,
        "machine.zone[0].managed",
        "901 is larger than present (900)",
    );
}

/// The zones together: the kernel's order without overlap, each type once, known names, an
/// empty ZONE_MOVABLE.
#[test]
fn zone_layout_errors() {
    // overlap
    check(
        &zones(&[
            "",
            "[[machine.zone]]",
            "name = \"Normal\"",
            "start_pfn = 1000000",
            "spanned = 1000",
        ]),
        13,
        "machine.zone[1].start_pfn",
        "zone Normal starts at pfn 0xf4240, below the end of zone DMA32 (pfn 0x1000..0x100000); \
         zones go in increasing pfn order without overlap",
    );
    // zone type order
    check(
        &zones(&[
            "[[machine.zone]]",
            "name = \"DMA\"",
            "start_pfn = 1",
            "spanned = 4095",
        ]),
        11,
        "machine.zone[1].name",
        "zone DMA is listed after DMA32 (expected the kernel's order DMA, DMA32, Normal, Movable)",
    );
    // duplicate
    check(
        &zones(&[
            "[[machine.zone]]",
            "name = \"DMA32\"",
            "start_pfn = 4096",
            "spanned = 16",
        ]),
        11,
        "machine.zone[1].name",
        "zone DMA32 is listed twice (first as machine.zone[0])",
    );
    // unknown name
    check(
        &zones(&[
            "[[machine.zone]]",
            "name = \"Norml\"",
            "start_pfn = 1048576",
            "spanned = 16",
        ]),
        11,
        "machine.zone[1].name",
        "unknown zone \"Norml\" (did you mean \"Normal\"?)",
    );
    // Movable must be empty
    check(
        &zones(&[
            "[[machine.zone]]",
            "name = \"Movable\"",
            "start_pfn = 1048576",
            "spanned = 512",
            "present = 512",
        ]),
        14,
        "machine.zone[1].present",
        "512: ZONE_MOVABLE must be empty (expected present = 0; fraglab models no movablecore)",
    );
}

/// Limits of the machine: DMA32 below 4 GiB, at least one pageblock managed.
#[test]
fn zone_limit_errors() {
    // DMA32 above 4 GiB
    check(
        &[
            "[[machine.zone]]",
            "name = \"DMA32\"",
            "start_pfn = 4096",
            "spanned = 2000000",
        ],
        4,
        "machine.zone[0].spanned",
        "zone DMA32 would end at pfn 0x1e9480, above pfn 0x100000 (MAX_DMA32_PFN, 4 GiB)",
    );
    // too few managed pages
    check(
        &[
            "[machine]",
            "[[machine.zone]]",
            "name = \"Normal\"",
            "start_pfn = 1048576",
            "spanned = 1024",
            "managed = 511",
        ],
        2,
        "machine.zone",
        "the zones manage 511 pages in total, less than one pageblock (512 pages = 2 MiB)",
    );
}

/// The keys of a [[machine.zone]] table and what may stand beside the tables.
#[test]
fn zone_key_errors() {
    // missing field
    check(
        &[
            "[machine]",
            "",
            "[[machine.zone]]",
            "name = \"Normal\"",
            "spanned = 1024",
        ],
        3,
        "machine.zone[0].start_pfn",
        "missing (expected a number of pages)",
    );
    // unknown field
    check(
        &["[[machine.zone]]", "name = \"Normal\"", "start = 1048576"],
        3,
        "machine.zone[0].start",
        "unknown key (did you mean \"start_pfn\"?)",
    );
    // memory and zones together
    check(
        &[
            "[machine]",
            "memory = \"1G\"",
            "[[machine.zone]]",
            "name = \"Normal\"",
        ],
        3,
        "machine.zone",
        "give either machine.memory (line 2) or [[machine.zone]] tables, not both",
    );
    // dma with zones
    check(
        &[&["[machine]", "cpus = 2", "dma = false"], DMA32].concat(),
        3,
        "machine.dma",
        "only applies to the default layout (machine.memory); with [[machine.zone]] list a DMA \
         zone or leave it out",
    );
}

// ---- top level, run ----

#[test]
fn unknown_top_level_keys() {
    check(
        &with_machine(&["", "[[ops]]", "alloc = \"a\""]),
        4,
        "ops",
        "unknown key (did you mean \"op\"?)",
    );
    check(
        &["title = \"x\"", "[machine]", "memory = \"1G\""],
        1,
        "title",
        "unknown key (expected one of: name, description, machine, knobs, model, run, host, op, workload, damon, cost)",
    );
    check(
        &["name = 3", "[machine]", "memory = \"1G\""],
        1,
        "name",
        "expected a string, found an integer",
    );
    check(
        &with_machine(&["[op]", "alloc = \"a\""]),
        3,
        "op",
        "expected an array of tables ([[op]]), found a table",
    );
}

#[test]
fn run_errors() {
    check(
        &with_machine(&["[run]", "seed = -1"]),
        4,
        "run.seed",
        "-1 is out of range (expected >= 0)",
    );
    check(
        &with_machine(&["[run]", "debug-vm = true"]),
        4,
        "run.debug-vm",
        "unknown key (did you mean \"debug_vm\"?)",
    );
    check(
        &with_machine(&[
            "[run]",
            "trace = [",
            "  \"kmem:mm_page_alloc\",",
            "  \"kmem:mm_page_allocc\",",
            "]",
        ]),
        6,
        "run.trace[1]",
        "unknown trace event \"kmem:mm_page_allocc\" (did you mean \"kmem:mm_page_alloc\"?)",
    );
    check(
        &with_machine(&["[run]", "trace = \"kmem:*\""]),
        4,
        "run.trace",
        "expected an array of event names, found a string",
    );
    check(
        &with_machine(&["[run]", "trace = [\"sched:sched_switch\"]"]),
        4,
        "run.trace[0]",
        "unknown trace event \"sched:sched_switch\" (expected one of: kmem:mm_page_alloc, \
         kmem:mm_page_free, kmem:mm_page_alloc_zone_locked, kmem:mm_page_pcpu_drain, \
         kmem:mm_page_alloc_extfrag, compaction:mm_compaction_isolate_migratepages, compaction:mm_compaction_isolate_freepages, compaction:mm_compaction_migratepages, compaction:mm_compaction_begin, compaction:mm_compaction_end, compaction:mm_compaction_try_to_compact_pages, compaction:mm_compaction_finished, compaction:mm_compaction_suitable, compaction:mm_compaction_deferred, compaction:mm_compaction_defer_compaction, compaction:mm_compaction_defer_reset, compaction:mm_compaction_wakeup_kcompactd, compaction:mm_compaction_kcompactd_wake, compaction:mm_compaction_kcompactd_sleep, migrate:mm_migrate_pages_start, migrate:mm_migrate_pages, vmscan:mm_vmscan_kswapd_sleep, vmscan:mm_vmscan_kswapd_wake, vmscan:mm_vmscan_wakeup_kswapd, vmscan:mm_vmscan_direct_reclaim_begin, vmscan:mm_vmscan_direct_reclaim_end, vmscan:mm_vmscan_lru_isolate, vmscan:mm_vmscan_lru_shrink_inactive, vmscan:mm_vmscan_lru_shrink_active, vmscan:mm_vmscan_throttled, vmscan:mm_vmscan_reclaim_pages, damon:damos_before_apply, kmem:*, compaction:*, migrate:*, vmscan:*, damon:*)",
    );
}

// ---- knobs ----

#[test]
fn knob_value_errors() {
    check(
        &with_machine(&["[knobs]", "\"vm.watermark_scale_factor\" = 3001"]),
        4,
        "knobs.\"vm.watermark_scale_factor\"",
        "3001 is out of range (expected 1..=3000)",
    );
    check(
        &with_machine(&["[knobs]", "\"vm.min_free_kbytes\" = 64"]),
        4,
        "knobs.\"vm.min_free_kbytes\"",
        "64 is out of range (expected >= 128)",
    );
    check(
        &with_machine(&["[knobs]", "\"vm.percpu_pagelist_high_fraction\" = 4"]),
        4,
        "knobs.\"vm.percpu_pagelist_high_fraction\"",
        "4 is out of range (expected 0 or >= 8)",
    );
    check(
        &with_machine(&["[knobs]", "vm.swappiness = \"60\""]),
        4,
        "knobs.\"vm.swappiness\"",
        "expected an integer, found a string",
    );
    check(
        &with_machine(&["[knobs]", "\"transparent_hugepage/enabled\" = \"madvice\""]),
        4,
        "knobs.\"transparent_hugepage/enabled\"",
        "\"madvice\" is not one of always, madvise, never (did you mean \"madvise\"?)",
    );
    check(
        &with_machine(&["[knobs]", "\"transparent_hugepage/hugepages-2048kB/enabled\" = 1"]),
        4,
        "knobs.\"transparent_hugepage/hugepages-2048kB/enabled\"",
        "expected a string, found an integer",
    );
    check(
        &with_machine(&["[knobs]", "\"vm.lowmem_reserve_ratio\" = [256, 256, 32, 0]"]),
        4,
        "knobs.\"vm.lowmem_reserve_ratio\"",
        "4 values given (expected 5 integers, each >= 0)",
    );
    check(
        &with_machine(&[
            "[knobs]",
            "\"vm.lowmem_reserve_ratio\" = [",
            "  256,",
            "  -1,",
            "  32, 0, 0]",
        ]),
        6,
        "knobs.\"vm.lowmem_reserve_ratio\"[1]",
        "-1 is out of range (expected 5 integers, each >= 0)",
    );
    check(
        &with_machine(&["[knobs]", "\"vm.lowmem_reserve_ratio\" = \"256 256 x 0 0\""]),
        4,
        "knobs.\"vm.lowmem_reserve_ratio\"",
        "\"256 256 x 0 0\" is not a valid list (expected 5 integers, each >= 0, e.g. \"256 256 32 0 0\")",
    );
    check(
        &with_machine(&["[knobs]", "\"vm.swappiness\" = 10", "vm.swappiness = 20"]),
        5,
        "knobs.\"vm.swappiness\"",
        "knob vm.swappiness is set twice (first at line 4)",
    );
}

// ---- ops ----

fn alloc_a() -> Vec<&'static str> {
    with_machine(&["[[op]]", "alloc = \"a\"", "gfp = \"GFP_KERNEL\""])
}

fn plus(mut base: Vec<&'static str>, rest: &[&'static str]) -> Vec<&'static str> {
    base.extend_from_slice(rest);
    base
}

#[test]
fn op_structure_errors() {
    check(
        &with_machine(&["", "[[op]]", "count = 3"]),
        4,
        "op[0]",
        "no action (expected one of the keys alloc, free, print, drain_all_pages, compact_memory, compact, kcompactd, proactive_compact, fault, kswapd, write, read, nr_hugepages, page_reporting)",
    );
    check(
        &plus(alloc_a(), &["free = \"a\""]),
        6,
        "op[0].free",
        "an op has exactly one action, and this one already has alloc (line 4)",
    );
    check(
        &plus(alloc_a(), &["every = 2"]),
        6,
        "op[0].every",
        "not allowed in an alloc op (allowed: count, order, gfp, cpu, must_succeed, kind, nofs)",
    );
    check(
        &plus(alloc_a(), &["ordr = 2"]),
        6,
        "op[0].ordr",
        "unknown key (did you mean \"order\"?)",
    );
    check(
        &plus(alloc_a(), &["[[op]]", "drain_all_pages = true", "cpu = 1"]),
        8,
        "op[1].cpu",
        "not allowed in a drain_all_pages op (it takes no other keys)",
    );
    check(
        &plus(alloc_a(), &["[[op]]", "drain_all_pages = false"]),
        7,
        "op[1].drain_all_pages",
        "false is not allowed (expected true; leave the op out instead)",
    );
    check(
        &[
            "op = [",
            "  { alloc = \"a\", gfp = \"GFP_KERNEL\" },",
            "  \"free a\",",
            "]",
            "[machine]",
            "memory = \"1G\"",
        ],
        3,
        "op[1]",
        "expected a table, found a string",
    );
}

#[test]
fn alloc_errors() {
    check(
        &with_machine(&["[[op]]", "alloc = \"a\"", "count = 1"]),
        3,
        "op[0].gfp",
        "missing (expected a gfp mask such as \"GFP_KERNEL\")",
    );
    check(
        &plus(alloc_a(), &["count = 0"]),
        6,
        "op[0].count",
        "0 is out of range (expected >= 1)",
    );
    check(
        &plus(alloc_a(), &["order = -1"]),
        6,
        "op[0].order",
        "-1 is out of range (expected 0..=10)",
    );
    check(
        &plus(alloc_a(), &["cpu = 2"]),
        6,
        "op[0].cpu",
        "2 is out of range (expected 0..=1, machine.cpus = 2)",
    );
    check(
        &plus(alloc_a(), &["must_succeed = \"yes\""]),
        6,
        "op[0].must_succeed",
        "expected a boolean, found a string",
    );
    check(
        &with_machine(&["[[op]]", "alloc = \"a\"", "gfp = \"GFP_KERNEL|\""]),
        5,
        "op[0].gfp",
        "\"GFP_KERNEL|\" is not a gfp mask (expected kernel gfp names joined by |, e.g. \
         \"GFP_KERNEL|__GFP_NORETRY\")",
    );
    check(
        &with_machine(&["[[op]]", "alloc = \"a\"", "gfp = \"GFP_DMA|__GFP_DMA32\""]),
        5,
        "op[0].gfp",
        "\"GFP_DMA|__GFP_DMA32\" combines zone modifiers (__GFP_DMA, __GFP_DMA32, \
         __GFP_HIGHMEM), which selects no zone (GFP_ZONE_BAD)",
    );
    check(
        &with_machine(&[
            "[[op]]",
            "alloc = \"a\"",
            "gfp = \"GFP_KERNEL|__GFP_MOVABLE|__GFP_RECLAIMABLE\"",
        ]),
        5,
        "op[0].gfp",
        "\"GFP_KERNEL|__GFP_MOVABLE|__GFP_RECLAIMABLE\" has both __GFP_MOVABLE and \
         __GFP_RECLAIMABLE, which is no migratetype (the kernel warns)",
    );
    check(
        &with_machine(&["[[op]]", "alloc = \"\"", "gfp = \"GFP_KERNEL\""]),
        4,
        "op[0].alloc",
        "empty set name (expected a name such as \"a\")",
    );
}

#[test]
fn free_errors() {
    // A free before the alloc of its set.
    check(
        &with_machine(&[
            "[[op]]",
            "free = \"a\"",
            "[[op]]",
            "alloc = \"a\"",
            "gfp = \"GFP_KERNEL\"",
        ]),
        4,
        "op[0].free",
        "set \"a\" is not allocated by any earlier op (expected the name of an earlier alloc)",
    );
    check(
        &plus(alloc_a(), &["", "[[op]]", "free = \"b\""]),
        8,
        "op[1].free",
        "set \"b\" is not allocated by any earlier op (expected the name of an earlier alloc)",
    );
    check(
        &plus(alloc_a(), &["", "[[op]]", "free = \"A\""]),
        8,
        "op[1].free",
        "set \"A\" is not allocated by any earlier op (expected the name of an earlier alloc; \
         did you mean \"a\"?)",
    );
    check(
        &plus(alloc_a(), &["[[op]]", "free = \"a\"", "every = 0"]),
        8,
        "op[1].every",
        "0 is out of range (expected >= 1)",
    );
    check(
        &plus(alloc_a(), &["[[op]]", "free = \"a\"", "every = 2", "offset = 2"]),
        9,
        "op[1].offset",
        "2 is out of range (expected 0..=1, below every = 2)",
    );
    check(
        &plus(alloc_a(), &["[[op]]", "free = \"a\"", "cpu = 5"]),
        8,
        "op[1].cpu",
        "5 is out of range (expected 0..=1, machine.cpus = 2)",
    );
    check(
        &plus(alloc_a(), &["[[op]]", "free = \"a\"", "count = 5"]),
        8,
        "op[1].count",
        "not allowed in a free op (allowed: every, offset, cpu)",
    );
}

#[test]
fn print_errors() {
    check(
        &with_machine(&["[[op]]", "print = \"buddyinf\""]),
        4,
        "op[0].print",
        "unknown report \"buddyinf\" (did you mean \"buddyinfo\"?)",
    );
    check(
        &with_machine(&["[[op]]", "print = \"buddyinfo\"", "zone = \"Normal\""]),
        5,
        "op[0].zone",
        "only allowed with print = \"pageblocks\", not \"buddyinfo\"",
    );
    check(
        &with_machine(&["[[op]]", "print = \"pageblocks\"", "zone = \"Highmem\""]),
        5,
        "op[0].zone",
        "unknown zone \"Highmem\" (expected one of: DMA, DMA32, Normal, Movable)",
    );
    check(
        &[
            "[machine]",
            "memory = \"1G\"",
            "dma = false",
            "[[op]]",
            "print = \"pageblocks\"",
            "zone = \"DMA\"",
        ],
        6,
        "op[0].zone",
        "the machine has no DMA zone (machine.dma = false)",
    );
    let mut z = zones(&[]);
    z.extend(["[[op]]", "print = \"pageblocks\"", "zone = \"Normal\""]);
    check(
        &z,
        12,
        "op[0].zone",
        "zone Normal is not in [[machine.zone]] (expected one of: DMA32)",
    );
}

// ---- syntax ----

#[test]
fn toml_syntax_errors_have_file_and_line() {
    let e = err(&[
        "[machine]",
        "memory = \"1G\"",
        "",
        "[[op]]",
        "alloc = \"a",
        "gfp = \"GFP_KERNEL\"",
    ]);
    assert_eq!(e.line, 5);
    assert_eq!(e.key, None);
    assert_eq!(
        e.to_string(),
        "spec.toml:5: TOML syntax error (column 11): invalid basic string"
    );

    let e = err(&["[machine]", "memory = \"1G\"", "memory = \"2G\""]);
    assert_eq!(
        e.to_string(),
        "spec.toml:3: TOML syntax error (column 1): duplicate key `memory` in table `machine`"
    );

    let e = err(&["[machine]", "memory = \"1G\"", "[run", "seed = 1"]);
    assert_eq!(e.line, 3);
    assert!(e.to_string().starts_with("spec.toml:3: TOML syntax error"), "{e}");
    assert!(!e.to_string().contains('\n'));

    let e = err(&["[machine]", "cpus = 99999999999999999999"]);
    assert_eq!(e.line, 2);
}

#[test]
fn error_is_a_std_error() {
    let e: Box<dyn std::error::Error> = Box::new(err(&["[machine]", "memory = 1"]));
    assert_eq!(
        e.to_string(),
        "spec.toml:2: key machine.memory: 1 is smaller than one pageblock (2 MiB)"
    );
}

#[test]
fn crlf_line_endings_count_lines_the_same() {
    let text = "[machine]\r\nmemory = \"1G\"\r\n\r\n[[op]]\r\nalloc = \"a\"\r\ngfp = \"GFP_KERNEL\"\r\norder = 12\r\n";
    let e = parse_spec(text, "crlf.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "crlf.toml:7: key op[0].order: 12 is out of range (expected 0..=10)"
    );
}

#[test]
fn implicit_machine_table_from_zone_headers() {
    check(
        &[
            "name = \"tiny\"",
            "",
            "[[machine.zone]]",
            "name = \"Normal\"",
            "start_pfn = 0",
            "spanned = 100",
        ],
        3,
        "machine.zone",
        "the zones manage 100 pages in total, less than one pageblock (512 pages = 2 MiB)",
    );
}

#[test]
fn model_and_compaction_op_errors() {
    check(
        &with_machine(&["[model]", "folio_mode = \"migrate_free_splt\""]),
        4,
        "model.folio_mode",
        "\"migrate_free_splt\" is not one of skip_large, split_large, migrate_no_free_split, migrate_free_split (did you mean \"migrate_free_split\"?)",
    );
    check(
        &with_machine(&["[model]", "folio_mod = \"skip_large\""]),
        4,
        "model.folio_mod",
        "unknown key (did you mean \"folio_mode\"?)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 0"]),
        4,
        "op[0].compact",
        "compaction is for order > 0 (expected 1..=10)",
    );
    check(
        &with_machine(&["[[op]]", "kcompactd = 11"]),
        4,
        "op[0].kcompactd",
        "11 is out of range (expected 1..=10)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "priority = \"sync\""]),
        5,
        "op[0].priority",
        "unknown priority \"sync\" (did you mean \"async\"?)",
    );
    check(
        &with_machine(&[
            "[[op]]",
            "alloc = \"a\"",
            "gfp = \"GFP_KERNEL\"",
            "kind = \"anonymous\"",
        ]),
        6,
        "op[0].kind",
        "unknown folio kind \"anonymous\" (did you mean \"anon\"?)",
    );
    check(
        &with_machine(&[
            "[[op]]",
            "alloc = \"a\"",
            "gfp = \"GFP_KERNEL\"",
            "kind = \"anon\"",
            "nofs = true",
        ]),
        7,
        "op[0].nofs",
        "only allowed with kind = \"file\", not \"anon\"",
    );
    check(
        &with_machine(&["[[op]]", "compact_memory = false"]),
        4,
        "op[0].compact_memory",
        "false is not allowed (expected true; leave the op out instead)",
    );
    check(
        &with_machine(&["[[op]]", "proactive_compact = true", "cpu = 0"]),
        5,
        "op[0].cpu",
        "not allowed in a proactive_compact op (allowed: mode)",
    );
}

#[test]
fn model_and_compaction_ops_parse() {
    use fraglab_spec::{CompactPriority, FolioKind, FolioMode, Gfp, Op};
    let s = parse_spec(
        &spec(&with_machine(&[
            "[model]",
            "folio_mode = \"skip_large\"",
            "[[op]]",
            "alloc = \"f\"",
            "gfp = \"GFP_NOFS|__GFP_MOVABLE\"",
            "kind = \"file\"",
            "nofs = true",
            "[[op]]",
            "compact = 9",
            "[[op]]",
            "compact = 4",
            "gfp = \"GFP_KERNEL\"",
            "priority = \"sync_full\"",
            "[[op]]",
            "kcompactd = 9",
            "[[op]]",
            "compact_memory = true",
            "[[op]]",
            "proactive_compact = true",
            "[[op]]",
            "print = \"folios\"",
        ])),
        "spec.toml",
    )
    .unwrap();
    assert_eq!(s.model.folio_mode, FolioMode::SkipLarge);
    assert!(matches!(
        s.ops[0],
        Op::Alloc {
            kind: FolioKind::File,
            nofs: true,
            ..
        }
    ));
    assert_eq!(
        s.ops[1],
        Op::Compact {
            line: 10,
            order: 9,
            gfp: Gfp::GFP_TRANSHUGE,
            priority: CompactPriority::Async,
            cpu: 0
        }
    );
    assert!(matches!(
        s.ops[2],
        Op::Compact {
            order: 4,
            priority: CompactPriority::SyncFull,
            ..
        }
    ));
    assert_eq!(
        s.ops[3],
        Op::Kcompactd {
            line: 16,
            order: 9,
            mode: fraglab_spec::KcompactdMode::Force
        }
    );
    assert_eq!(s.ops[4], Op::CompactMemory { line: 18 });
    assert_eq!(
        s.ops[5],
        Op::ProactiveCompact {
            line: 20,
            mode: fraglab_spec::ProactiveMode::Timer
        }
    );
    assert_eq!(s.ops[5].action(), "proactive_compact");
}

// ---- [model] ----

#[test]
fn model_errors() {
    check(
        &with_machine(&["[modle]", "folio_mode = \"skip_large\""]),
        3,
        "modle",
        "unknown key (did you mean \"model\"?)",
    );
    check(
        &["model = \"skip_large\"", "[machine]", "memory = \"1GiB\""],
        1,
        "model",
        "expected a table, found a string",
    );
    check(
        &with_machine(&["[model]", "folio_mode = 2"]),
        4,
        "model.folio_mode",
        "expected a string, found an integer",
    );
    // No close choice: the choices are listed once, without a suggestion.
    check(
        &with_machine(&["[model]", "folio_mode = \"zzz\""]),
        4,
        "model.folio_mode",
        "\"zzz\" is not one of skip_large, split_large, migrate_no_free_split, migrate_free_split",
    );
    check(
        &with_machine(&["[model]", "folio_mode = \"split_larg\""]),
        4,
        "model.folio_mode",
        "\"split_larg\" is not one of skip_large, split_large, migrate_no_free_split, migrate_free_split (did you mean \"split_large\"?)",
    );
    check(
        &with_machine(&["[model]", "folio_mode = \"skip_large\"", "extfrag = 1"]),
        5,
        "model.extfrag",
        "unknown key (expected one of: policy, folio_mode, defrag_stage, costly_order_policy, v4_position, xa_nodes, sched, fs_metadata)",
    );
    // `policy`: a name of the registry's form (whether a policy has it is checked at boot).
    check(
        &with_machine(&["[model]", "policy = 3"]),
        4,
        "model.policy",
        "expected a string, found an integer",
    );
    check(
        &with_machine(&["[model]", "folio_mode = \"skip_large\"", "policy = \"Contiguitas!\""]),
        5,
        "model.policy",
        "\"Contiguitas!\" is not a policy name (lower-case letters, digits, `_`, `-`, `.`; `fraglab policy list` shows them)",
    );
    check(
        &with_machine(&["[model]", "fs_metadata = \"btrfs\""]),
        4,
        "model.fs_metadata",
        "\"btrfs\" is not one of ext4, xfs, off",
    );
    check(
        &with_machine(&["[model]", "defrag_stage = \"kswapd_asist\""]),
        4,
        "model.defrag_stage",
        "\"kswapd_asist\" is not one of vanilla, nofragment_only, kswapd_assist, kswapd_watermarks (did you mean \"kswapd_assist\"?)",
    );
    check(
        &with_machine(&["[model]", "costly_order_policy = \"v5\""]),
        4,
        "model.costly_order_policy",
        "\"v5\" is not one of baseline, v1_iomap, v2_filemap_costly, v3_filemap_opportunistic, v4_kcompactd_background",
    );
    check(
        &with_machine(&["[model]", "v4_position = true"]),
        4,
        "model.v4_position",
        "expected a string, found a boolean",
    );
    // A kernel knob put under [model] is still an unknown model key.
    check(
        &with_machine(&["[model]", "\"vm.defrag_mode\" = 1"]),
        4,
        "model.\"vm.defrag_mode\"",
        "unknown key (expected one of: policy, folio_mode, defrag_stage, costly_order_policy, v4_position, xa_nodes, sched, fs_metadata)",
    );
}

// ---- alloc kind / nofs ----

#[test]
fn alloc_kind_and_nofs_errors() {
    check(
        &plus(alloc_a(), &["kind = 1"]),
        6,
        "op[0].kind",
        "expected a string, found an integer",
    );
    check(
        &plus(alloc_a(), &["kind = \"page_table\""]),
        6,
        "op[0].kind",
        "unknown folio kind \"page_table\" (did you mean \"pagetable\"?)",
    );
    check(
        &plus(alloc_a(), &["kind = \"zzz\""]),
        6,
        "op[0].kind",
        "unknown folio kind \"zzz\" (expected one of: anon, file, slab, pagetable, kernel)",
    );
    // nofs = false is rejected too: the key only belongs to file folios.
    check(
        &plus(alloc_a(), &["kind = \"slab\"", "nofs = false"]),
        7,
        "op[0].nofs",
        "only allowed with kind = \"file\", not \"slab\"",
    );
    // Without `kind`, the message names the kind the gfp gave.
    check(
        &with_machine(&[
            "[[op]]",
            "alloc = \"a\"",
            "gfp = \"GFP_HIGHUSER_MOVABLE\"",
            "nofs = true",
        ]),
        6,
        "op[0].nofs",
        "only allowed with kind = \"file\", not \"anon\" (the default kind for gfp \"GFP_HIGHUSER_MOVABLE\")",
    );
    check(
        &plus(alloc_a(), &["kind = \"file\"", "nofs = 1"]),
        7,
        "op[0].nofs",
        "expected a boolean, found an integer",
    );
    check(
        &plus(alloc_a(), &["priority = \"async\""]),
        6,
        "op[0].priority",
        "not allowed in an alloc op (allowed: count, order, gfp, cpu, must_succeed, kind, nofs)",
    );
}

// ---- compaction ops ----

#[test]
fn compact_op_errors() {
    check(
        &with_machine(&["[[op]]", "compact = 11"]),
        4,
        "op[0].compact",
        "11 is out of range (expected 1..=10)",
    );
    check(
        &with_machine(&["[[op]]", "compact = -1"]),
        4,
        "op[0].compact",
        "-1 is out of range (expected 1..=10)",
    );
    check(
        &with_machine(&["[[op]]", "compact = \"9\""]),
        4,
        "op[0].compact",
        "expected an integer, found a string",
    );
    check(
        &with_machine(&["[[op]]", "compact = true"]),
        4,
        "op[0].compact",
        "expected an integer, found a boolean",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "gfp = \"GFP_TRANSHUGE|__GFP_NORETY\""]),
        5,
        "op[0].gfp",
        "unknown gfp flag \"__GFP_NORETY\" (did you mean \"__GFP_NORETRY\"?)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "gfp = \"GFP_KERNEL||__GFP_NORETRY\""]),
        5,
        "op[0].gfp",
        "\"GFP_KERNEL||__GFP_NORETRY\" is not a gfp mask (expected kernel gfp names joined by |, e.g. \"GFP_KERNEL|__GFP_NORETRY\")",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "gfp = \"GFP_KERNEL|__GFP_DMA|__GFP_DMA32\""]),
        5,
        "op[0].gfp",
        "\"GFP_KERNEL|__GFP_DMA|__GFP_DMA32\" combines zone modifiers (__GFP_DMA, __GFP_DMA32, __GFP_HIGHMEM), which selects no zone (GFP_ZONE_BAD)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "priority = 1"]),
        5,
        "op[0].priority",
        "expected a string, found an integer",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "priority = \"full\""]),
        5,
        "op[0].priority",
        "unknown priority \"full\" (expected one of: async, sync_light, sync_full)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "priority = \"sync-light\""]),
        5,
        "op[0].priority",
        "unknown priority \"sync-light\" (did you mean \"sync_light\"?)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "cpu = 2"]),
        5,
        "op[0].cpu",
        "2 is out of range (expected 0..=1, machine.cpus = 2)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "order = 9"]),
        5,
        "op[0].order",
        "not allowed in a compact op (allowed: gfp, priority, cpu)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "kcompactd = 9"]),
        5,
        "op[0].kcompactd",
        "an op has exactly one action, and this one already has compact (line 4)",
    );
    check(
        &with_machine(&["[[op]]", "compact = 9", "prio = \"async\""]),
        5,
        "op[0].prio",
        "unknown key (did you mean \"priority\"?)",
    );
}

#[test]
fn kcompactd_op_errors() {
    check(
        &with_machine(&["[[op]]", "kcompactd = 0"]),
        4,
        "op[0].kcompactd",
        "compaction is for order > 0 (expected 1..=10)",
    );
    check(
        &with_machine(&["[[op]]", "kcompactd = -3"]),
        4,
        "op[0].kcompactd",
        "-3 is out of range (expected 1..=10)",
    );
    check(
        &with_machine(&["[[op]]", "kcompactd = 9.0"]),
        4,
        "op[0].kcompactd",
        "expected an integer, found a float",
    );
    check(
        &with_machine(&["[[op]]", "kcompactd = 9", "gfp = \"GFP_KERNEL\""]),
        5,
        "op[0].gfp",
        "not allowed in a kcompactd op (allowed: mode)",
    );
    check(
        &with_machine(&["[[op]]", "kcompacd = 9"]),
        4,
        "op[0].kcompacd",
        "unknown key (did you mean \"kcompactd\"?)",
    );
}

#[test]
fn compact_memory_and_proactive_compact_errors() {
    check(
        &with_machine(&["[[op]]", "compact_memory = 1"]),
        4,
        "op[0].compact_memory",
        "expected true, found an integer",
    );
    check(
        &with_machine(&["[[op]]", "compact_memory = true", "order = 9"]),
        5,
        "op[0].order",
        "not allowed in a compact_memory op (it takes no other keys)",
    );
    check(
        &with_machine(&["[[op]]", "proactive_compact = false"]),
        4,
        "op[0].proactive_compact",
        "false is not allowed (expected true; leave the op out instead)",
    );
    check(
        &with_machine(&["[[op]]", "proactive_compact = \"yes\""]),
        4,
        "op[0].proactive_compact",
        "expected true, found a string",
    );
    check(
        &with_machine(&["[[op]]", "proactive_compaction = true"]),
        4,
        "op[0].proactive_compaction",
        "unknown key (did you mean \"proactive_compact\"?)",
    );
    check(
        &with_machine(&["[[op]]", "compact_memory = true", "proactive_compact = true"]),
        5,
        "op[0].proactive_compact",
        "an op has exactly one action, and this one already has compact_memory (line 4)",
    );
}

#[test]
fn new_print_target_errors() {
    check(
        &with_machine(&["[[op]]", "print = \"folio\""]),
        4,
        "op[0].print",
        "unknown report \"folio\" (did you mean \"folios\"?)",
    );
    check(
        &with_machine(&["[[op]]", "print = \"extfrag\""]),
        4,
        "op[0].print",
        "unknown report \"extfrag\" (did you mean \"extfrag_index\"?)",
    );
    check(
        &with_machine(&["[[op]]", "print = \"unusable-index\""]),
        4,
        "op[0].print",
        "unknown report \"unusable-index\" (did you mean \"unusable_index\"?)",
    );
    check(
        &with_machine(&["[[op]]", "print = \"extfrag_index\"", "zone = \"Normal\""]),
        5,
        "op[0].zone",
        "only allowed with print = \"pageblocks\", not \"extfrag_index\"",
    );
}

#[test]
fn fault_and_kswapd_op_errors() {
    check(
        &with_machine(&["[[op]]", "fault = \"\""]),
        4,
        "op[0].fault",
        "empty set name (expected a name such as \"thp\")",
    );
    check(
        &with_machine(&["[[op]]", "fault = \"t\"", "count = 0"]),
        5,
        "op[0].count",
        "0 is out of range (expected >= 1)",
    );
    check(
        &with_machine(&["[[op]]", "fault = \"t\"", "madvised = \"yes\""]),
        5,
        "op[0].madvised",
        "expected a boolean, found a string",
    );
    check(
        &with_machine(&["[[op]]", "fault = \"t\"", "order = 9"]),
        5,
        "op[0].order",
        "not allowed in a fault op (allowed: count, madvised, cpu)",
    );
    check(
        &with_machine(&["[[op]]", "kswapd = false"]),
        4,
        "op[0].kswapd",
        "false is not allowed (expected true; leave the op out instead)",
    );
    check(
        &with_machine(&["[[op]]", "kswapd = true", "cpu = 1"]),
        5,
        "op[0].cpu",
        "not allowed in a kswapd op (it takes no other keys)",
    );
}

#[test]
fn workload_and_cost_errors() {
    check(
        &with_machine(&["[workload]", "duration = \"1min\""]),
        3,
        "workload",
        "no generator (expected [[workload.kbuild]], [[workload.thp_burst]], [[workload.thpchallenge]], [[workload.pgbench]], [[workload.vm_scalability]], [[workload.fio_smallfiles]] or [[workload.task]] tables)",
    );
    check(
        &with_machine(&["[workload]", "[[workload.vm_scalability]]", "case = \"msynk\""]),
        5,
        "workload.vm_scalability[0].case",
        "unknown vm-scalability case \"msynk\" (did you mean \"msync\"?)",
    );
    check(
        &with_machine(&["[workload]", "[[workload.vm_scalability]]", "tasks = 2"]),
        4,
        "workload.vm_scalability[0].case",
        "missing (expected one of small-allocs, mmap-pread-seq, lru-file-readtwice, lru-file-mmap-read, msync)",
    );
    check(
        &with_machine(&["[workload]", "duration = \"5 weeks\"", "[[workload.thp_burst]]"]),
        4,
        "workload.duration",
        "\"5 weeks\" is not a duration (expected a duration such as \"500ms\"; units ns, us, ms, s, min, h)",
    );
    check(
        &with_machine(&["[[workload.thp_burst]]", "size = \"3MiB\""]),
        4,
        "workload.thp_burst[0].size",
        "3145728 bytes is not a multiple of 2 MiB (a burst faults whole PMD ranges)",
    );
    check(
        &with_machine(&["[[workload.kbuild]]", "jobz = 4"]),
        4,
        "workload.kbuild[0].jobz",
        "unknown key (did you mean \"jobs\"?)",
    );
    check(
        &with_machine(&["[[workload.kbuild]]", "job_cpu = 100"]),
        4,
        "workload.kbuild[0].job_cpu",
        "expected a string, found an integer",
    );
    check(
        &with_machine(&[
            "[[workload.kbuild]]",
            "source = \"1MiB\"",
            "source_file = \"2MiB\"",
        ]),
        5,
        "workload.kbuild[0].source_file",
        "2097152 bytes is larger than the tree (source = 1048576 bytes)",
    );
    check(
        &with_machine(&["[[workload.kbuild]]", "untar = 1"]),
        4,
        "workload.kbuild[0].untar",
        "expected a boolean, found an integer",
    );
    check(
        &with_machine(&["[[workload.kbuild]]", "trees = 0"]),
        4,
        "workload.kbuild[0].trees",
        "0 is out of range (expected 1..=1048576)",
    );
    check(
        &with_machine(&["[[op]]", "compact_memory = true", "[[workload.thp_burst]]"]),
        5,
        "workload",
        "a spec has either [[op]]s (line 3) or a [workload], not both",
    );
    check(
        &with_machine(&["[cost]", "fault_ns = 5"]),
        4,
        "cost.fault_ns",
        "unknown key (did you mean \"fault_base_ns\"?)",
    );
    check(
        &with_machine(&["[cost]", "zero_page_ns = -1"]),
        4,
        "cost.zero_page_ns",
        "-1 is out of range (expected 0..=2^40 ns)",
    );
}

#[test]
fn write_read_and_swap_errors() {
    check(
        &with_machine(&["[[op]]", "write = \"wal\""]),
        3,
        "op[0].length",
        "missing (expected a size in bytes such as \"64KiB\")",
    );
    check(
        &with_machine(&["[[op]]", "write = \"wal\"", "length = \"64KB\""]),
        5,
        "op[0].length",
        "\"64KB\" is ambiguous (expected a binary unit: did you mean \"64KiB\"?)",
    );
    check(
        &with_machine(&["[[op]]", "write = \"wal\"", "length = 4096", "mapping = \"xf\""]),
        6,
        "op[0].mapping",
        "unknown mapping \"xf\" (did you mean \"xfs\"?)",
    );
    check(
        &with_machine(&[
            "[[op]]",
            "write = \"wal\"",
            "length = 4096",
            "[[op]]",
            "read = \"wal\"",
            "length = 4096",
            "mapping = \"no_large_folios\"",
        ]),
        9,
        "op[1].mapping",
        "file \"wal\" already has mapping \"xfs\" (a file's mapping is set by the first op that names it)",
    );
    check(
        &with_machine(&[
            "[[op]]",
            "read = \"db\"",
            "offset = 8192",
            "length = 4096",
            "file_size = 4096",
        ]),
        7,
        "op[0].file_size",
        "4096 bytes ends before the read (offset + length = 12288)",
    );
    check(
        &with_machine(&["[[op]]", "read = \"db\"", "length = 4096", "madvised = true"]),
        6,
        "op[0].madvised",
        "not allowed in a read op (allowed: offset, length, file_size, mapping, cpu)",
    );
    check(
        &["[machine]", "memory = \"1GiB\"", "swap = \"lots\""],
        3,
        "machine.swap",
        "\"lots\" is not a size (expected bytes as an integer or a string like \"4GiB\"; units B, KiB, MiB, GiB, TiB or K, M, G, T)",
    );
}

#[test]
fn task_step_errors() {
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ touch = \"heap\" }]"]),
        4,
        "workload.task[0].steps[0].touch",
        "mapping \"heap\" is not created by an earlier mmap step",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ mmap = \"heap\", size = \"1MiB\" }, { touch = \"haep\" }]",
        ]),
        4,
        "workload.task[0].steps[1].touch",
        "mapping \"haep\" is not created by an earlier mmap step; did you mean \"heap\"?",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ mmap = \"heap\" }]"]),
        4,
        "workload.task[0].steps[0].size",
        "missing (expected a size such as \"64MiB\")",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ sleep = \"1s\", compute = \"1s\" }]",
        ]),
        4,
        "workload.task[0].steps[0].compute",
        "a step has exactly one action, and this one already has sleep",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ mmap = \"h\", size = 4096 }, { touch = \"h\", pattern = \"zigzag\" }]",
        ]),
        4,
        "workload.task[0].steps[1].pattern",
        "\"zigzag\" is not one of sequential, random",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = []"]),
        4,
        "workload.task[0].steps",
        "no steps (expected at least one)",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ drop_caches = 1 }]"]),
        4,
        "workload.task[0].steps[0].drop_caches",
        "expected true, found an integer",
    );
}

/// §29.1: `mlock`/`munlock` name a mapping of an earlier mmap step; `locked` is a boolean.
#[test]
fn s29_mlock_step_errors() {
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ mlock = \"heap\" }]"]),
        4,
        "workload.task[0].steps[0].mlock",
        "mapping \"heap\" is not created by an earlier mmap step",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ mmap = \"heap\", size = \"1MiB\" }, { munmap = \"heap\" }, { munlock = \"heap\" }]",
        ]),
        4,
        "workload.task[0].steps[2].munlock",
        "mapping \"heap\" is not created by an earlier mmap step",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ mmap = \"heap\", size = \"1MiB\", locked = \"yes\" }]",
        ]),
        4,
        "workload.task[0].steps[0].locked",
        "expected a boolean, found a string",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ mmap = \"heap\", size = \"1MiB\" }, { mlock = \"heap\", locked = true }]",
        ]),
        4,
        "workload.task[0].steps[1].locked",
        "unknown key (expected one of: mlock)",
    );
}

#[test]
fn machine_hugetlb_pages_out_of_range() {
    check(
        &["[machine]", "memory = \"1GiB\"", "hugetlb_pages = 600000"],
        3,
        "machine.hugetlb_pages",
        "600000 is out of range (expected 0..=524288)",
    );
}

/// `nr_hugepages` (op and task step, docs/model §28.1): a count 0..=2^30, nothing else.
#[test]
fn s28_1_nr_hugepages_errors() {
    check(
        &with_machine(&["[[op]]", "nr_hugepages = -1"]),
        4,
        "op[0].nr_hugepages",
        "-1 is out of range (expected 0..=2^30)",
    );
    check(
        &with_machine(&["[[op]]", "nr_hugepages = \"many\""]),
        4,
        "op[0].nr_hugepages",
        "expected an integer, found a string",
    );
    check(
        &with_machine(&["[[op]]", "nr_hugepages = 4", "cpu = 1"]),
        5,
        "op[0].cpu",
        "not allowed in a nr_hugepages op (it takes no other keys)",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ nr_hugepages = 2000000000 }]"]),
        4,
        "workload.task[0].steps[0].nr_hugepages",
        "2000000000 is out of range (expected 0..=2^30)",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ nr_hugepages = true }]"]),
        4,
        "workload.task[0].steps[0].nr_hugepages",
        "expected an integer, found a boolean",
    );
}

/// Phases (issue 19): `after` names another task, not itself, and makes no cycle; `measure`
/// is `true`.
#[test]
fn phases_after_and_measure_errors() {
    check(
        &with_machine(&[
            "[[workload.task]]",
            "name = \"age\"",
            "steps = [{ compute = \"1s\" }]",
            "[[workload.task]]",
            "name = \"run\"",
            "after = \"aeg\"",
            "steps = [{ compute = \"1s\" }]",
        ]),
        8,
        "workload.task[1].after",
        "no [[workload.task]] is named \"aeg\"; did you mean \"age\"?",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "name = \"run\"",
            "after = \"run\"",
            "steps = [{ compute = \"1s\" }]",
        ]),
        5,
        "workload.task[0].after",
        "task \"run\" cannot start after itself",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "name = \"a\"",
            "after = \"c\"",
            "steps = [{ compute = \"1s\" }]",
            "[[workload.task]]",
            "name = \"b\"",
            "after = \"a\"",
            "steps = [{ compute = \"1s\" }]",
            "[[workload.task]]",
            "name = \"c\"",
            "after = \"b\"",
            "steps = [{ compute = \"1s\" }]",
        ]),
        5,
        "workload.task[0].after",
        "a cycle: task \"a\" starts after \"c\", which waits for it",
    );
    check(
        &with_machine(&["[[workload.task]]", "after = 3", "steps = [{ compute = \"1s\" }]"]),
        4,
        "workload.task[0].after",
        "expected a string, found an integer",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ measure = \"now\" }]"]),
        4,
        "workload.task[0].steps[0].measure",
        "expected true, found a string",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ measure = true, compute = \"1s\" }]",
        ]),
        4,
        "workload.task[0].steps[0].compute",
        "a step has exactly one action, and this one already has measure",
    );
}
/// `census` task step (issue 19 item 1, docs/model §30.2): a file an earlier read or write
/// step of the same task names, nothing else.
#[test]
fn s30_2_census_errors() {
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ census = \"data\" }]"]),
        4,
        "workload.task[0].steps[0].census",
        "file \"data\" is not read or written by an earlier step of this task",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ read = \"data\", length = \"1MiB\" }, { census = \"dota\" }]",
        ]),
        4,
        "workload.task[0].steps[1].census",
        "file \"dota\" is not read or written by an earlier step of this task; did you mean \"data\"?",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ census = 3 }]"]),
        4,
        "workload.task[0].steps[0].census",
        "expected a string, found an integer",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ write = \"log\", length = \"1MiB\" }, { census = \"log\", length = 1 }]",
        ]),
        4,
        "workload.task[0].steps[1].length",
        "unknown key (expected one of: census)",
    );
    let s = parse_spec(
        &spec(&with_machine(&[
            "[[workload.task]]",
            "steps = [{ write = \"log\", length = \"1MiB\" }, { census = \"log\" }]",
        ])),
        "spec.toml",
    )
    .unwrap();
    assert_eq!(
        s.workload.unwrap().task[0].steps[1],
        fraglab_spec::TaskStep::Census { file: "log".into() }
    );
}

/// `[host] loop_images` (issue 19 item 1): a boolean, default false.
#[test]
fn host_loop_images_errors() {
    check(
        &with_machine(&["[host]", "loop_images = \"yes\""]),
        4,
        "host.loop_images",
        "expected a boolean, found a string",
    );
    let s = parse_spec(
        &spec(&with_machine(&["[host]", "loop_images = true"])),
        "spec.toml",
    )
    .unwrap();
    assert!(s.host.loop_images);
    assert!(!parse_spec(&spec(MACHINE), "spec.toml").unwrap().host.loop_images);
}

/// Issue 19 item 3: `free`, `files`, `fadvise`, per-file `mapping`, `read_ahead_kb`.
#[test]
fn h3_free_files_fadvise_mapping_errors() {
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ free = \"dentries\" }]"]),
        4,
        "workload.task[0].steps[0].free",
        "unknown object kind \"dentries\" (expected one of: slab, pipes)",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ free = \"slab\", every = 1 }]"]),
        4,
        "workload.task[0].steps[0].every",
        "1 is out of range (expected 2..=2^30)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ files = \"s\", op = \"create\" }]",
        ]),
        4,
        "workload.task[0].steps[0].count",
        "missing (expected a number of files such as 1000)",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ files = \"s\", count = 4 }]"]),
        4,
        "workload.task[0].steps[0].op",
        "missing (expected one of create, read, delete)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ files = \"s\", count = 4, op = \"append\" }]",
        ]),
        4,
        "workload.task[0].steps[0].op",
        "unknown files op \"append\" (expected one of: create, read, delete)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ files = \"s\", count = 4, op = \"read\", size = 0 }]",
        ]),
        4,
        "workload.task[0].steps[0].size",
        "0 bytes is below the minimum of 1",
    );
    check(
        &with_machine(&["[[workload.task]]", "steps = [{ fadvise = \"f\" }]"]),
        4,
        "workload.task[0].steps[0].advice",
        "missing (expected one of dontneed, sequential, willneed, random, normal)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ fadvise = \"f\", advice = \"noreuse\" }]",
        ]),
        4,
        "workload.task[0].steps[0].advice",
        "unknown advice \"noreuse\" (expected one of: dontneed, sequential, willneed, random, normal)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ fadvise = \"f\", advice = \"normal\", length = 0 }]",
        ]),
        4,
        "workload.task[0].steps[0].length",
        "0 bytes is below the minimum of 1",
    );
    // A file's mapping is set by the first step naming it, across tasks; the error names both
    // lines.
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ write = \"f\", length = 4096, mapping = \"large_folios\" }]",
            "[[workload.task]]",
            "steps = [{ read = \"f\", length = 4096, mapping = \"no_large_folios\" }]",
        ]),
        6,
        "workload.task[1].steps[0].mapping",
        "\"f\" already has mapping \"large_folios\" from the step on line 4 (the first step that names a file sets its mapping)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ write = \"f\", length = 4096 }, { read = \"f\", length = 4096, mapping = \"large_folios\" }]",
        ]),
        4,
        "workload.task[0].steps[1].mapping",
        "\"f\" already has mapping \"xfs\" from the step on line 4 (the first step that names a file sets its mapping)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ files = \"f\", count = 2, op = \"read\", mapping = \"ext4\" }]",
        ]),
        4,
        "workload.task[0].steps[0].mapping",
        "unknown mapping \"ext4\" (expected one of: xfs, large_folios, no_large_folios)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "steps = [{ files = \"f\", count = 2, op = \"create\" }, { delete = \"f\" }]",
        ]),
        4,
        "workload.task[0].steps[1].delete",
        "\"f\" names a file here but a file set in an earlier step (a name is one or the other)",
    );
    check(
        &["[machine]", "memory = \"1GiB\"", "read_ahead_kb = -1"],
        3,
        "machine.read_ahead_kb",
        "-1 is out of range (expected 0..=1048576)",
    );
    check(
        &["[machine]", "memory = \"1GiB\"", "max_sectors_kb = 2"],
        3,
        "machine.max_sectors_kb",
        "2 is out of range (expected 4..=1048576)",
    );
}

/// Issue 20 item 4 (docs/model §26): the `mode` of `kcompactd` and `proactive_compact`.
#[test]
fn section_26_op_mode_errors_and_defaults() {
    use fraglab_spec::Op;
    check(
        &with_machine(&["[[op]]", "kcompactd = 9", "mode = \"tick\""]),
        5,
        "op[0].mode",
        "unknown mode \"tick\" (expected one of: force, wake)",
    );
    check(
        &with_machine(&["[[op]]", "proactive_compact = true", "mode = \"tik\""]),
        5,
        "op[0].mode",
        "unknown mode \"tik\" (did you mean \"tick\"?)",
    );
    check(
        &with_machine(&["[[op]]", "proactive_compact = true", "mode = 1"]),
        5,
        "op[0].mode",
        "expected a string, found an integer",
    );
    let s = parse_spec(
        &spec(&with_machine(&[
            "[[op]]",
            "kcompactd = 9",
            "mode = \"wake\"",
            "[[op]]",
            "proactive_compact = true",
            "mode = \"tick\"",
            "[[op]]",
            "proactive_compact = true",
        ])),
        "spec.toml",
    )
    .unwrap();
    assert_eq!(
        s.ops[0],
        Op::Kcompactd {
            line: 3,
            order: 9,
            mode: fraglab_spec::KcompactdMode::Wake
        }
    );
    assert_eq!(
        s.ops[1],
        Op::ProactiveCompact {
            line: 6,
            mode: fraglab_spec::ProactiveMode::Tick
        }
    );
    assert_eq!(
        s.ops[2],
        Op::ProactiveCompact {
            line: 9,
            mode: fraglab_spec::ProactiveMode::Timer
        }
    );
}

/// `[damon]` (docs/model §27): a bad preset, range, order or filter names its key and line.
#[test]
fn section_27_damon_keys_bad_values() {
    check(
        &with_machine(&["[damon]", "preset = \"s3\""]),
        4,
        "damon.preset",
        "\"s3\" is not damon_reclaim or s2",
    );
    check(
        &with_machine(&["[damon]", "min_nr_regions = 2"]),
        4,
        "damon.min_nr_regions",
        "2 is out of range (expected 3..=4294967295)",
    );
    check(
        &with_machine(&["[damon]", "age_min = 9", "age_max = 3"]),
        4,
        "damon.age_min",
        "9 is above age_max = 3",
    );
    check(
        &with_machine(&["[damon]", "filters = \"anon:reject,mapped:allow\""]),
        4,
        "damon.filters",
        "\"mapped:allow\" is not type:allow or type:reject with type anon, unmapped or young (did you mean \"unmapped\"?)",
    );
    check(
        &with_machine(&["[damon]", "regions = \"16MiB-3GiB, 2GiB-4GiB\""]),
        4,
        "damon.regions",
        "\"2GiB-4GiB\" overlaps or precedes the range before it (ranges in address order)",
    );
    check(
        &with_machine(&["[damon]", "regions = \"16MiB\""]),
        4,
        "damon.regions",
        "\"16MiB\" is not START-END (two sizes)",
    );
    check(
        &with_machine(&["[damon]", "regions = \"1GiB-1GiB\""]),
        4,
        "damon.regions",
        "\"1GiB-1GiB\" is not a range of whole pages (START < END, both multiples of 4KiB)",
    );
    check(
        &with_machine(&["[damon]", "regions = \"1GiB-2Gb\""]),
        4,
        "damon.regions",
        "\"2Gb\" is ambiguous (expected a binary unit: did you mean \"2GiB\"?)",
    );
    check(
        &with_machine(&["[damon]", "sample_ms = 5"]),
        4,
        "damon.sample_ms",
        "unknown key (did you mean \"sample_us\"?)",
    );
}

/// A file that is not UTF-8 is named by line and column, with the byte (it had no line).
#[test]
fn non_utf8_bytes_have_a_line() {
    let p = std::env::temp_dir().join(format!("fraglab-nonutf8-{}.toml", std::process::id()));
    std::fs::write(&p, b"[machine]\nmemory = \"64MiB\"\nname = \"\xff\xfe\"\n").unwrap();
    let e = fraglab_spec::load_spec(&p).unwrap_err();
    std::fs::remove_file(&p).unwrap();
    assert_eq!(e.line, 3);
    assert_eq!(e.key, None);
    assert!(e.message.starts_with("not UTF-8 (column 9: byte 0xFF)"), "{e}");
    // The overrides' path reads the file the same way.
    let p2 = std::env::temp_dir().join(format!("fraglab-nonutf8-b-{}.toml", std::process::id()));
    std::fs::write(&p2, b"\xc3\n").unwrap();
    let e = fraglab_spec::load_spec_with(&p2, &[("vm.swappiness".into(), "10".into())]).unwrap_err();
    std::fs::remove_file(&p2).unwrap();
    assert_eq!(
        (e.line, e.message.starts_with("not UTF-8 (column 1: byte 0xC3)")),
        (1, true),
        "{e}"
    );
}

/// `background`: a boolean, and not on every task when no other generator ends the run.
#[test]
fn background_task_errors() {
    check(
        &with_machine(&[
            "[[workload.task]]",
            "name = \"reader\"",
            "background = \"yes\"",
            "steps = [{ compute = \"1s\" }]",
        ]),
        5,
        "workload.task[0].background",
        "expected a boolean, found a string",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            "name = \"reader\"",
            "background = true",
            "steps = [{ compute = \"1s\" }]",
        ]),
        5,
        "workload.task[0].background",
        "every task is background load: nothing would end the run but its duration (leave `background` off the task whose end ends the run)",
    );
}

/// Issue 33 item 7: `every_page`, `files` `every` and `sample` are checked, each error naming
/// the file, the line and the key.
#[test]
fn issue33_every_page_files_every_sample_errors() {
    let task = |steps: &[&str]| {
        let mut v = vec!["[[workload.task]]", "steps = ["];
        v.extend(steps);
        v.push("]");
        with_machine(&v)
    };
    // every_page: 1..=1024, pipes only, not with every.
    check(
        &task(&["{ pipes = 4 },", "{ free = \"pipes\", every_page = 0 },"]),
        6,
        "workload.task[0].steps[1].every_page",
        "0 is out of range (expected 1..=1024)",
    );
    check(
        &task(&["{ free = \"pipes\", every_page = 1025 }"]),
        5,
        "workload.task[0].steps[0].every_page",
        "1025 is out of range (expected 1..=1024)",
    );
    check(
        &task(&["{ slab = 4 },", "{ free = \"slab\", every_page = 2 }"]),
        6,
        "workload.task[0].steps[1].every_page",
        "every_page applies to free = \"pipes\" only (a slab object is one page already: use every)",
    );
    check(
        &task(&["{ free = \"pipes\", every = 2, every_page = 2 }"]),
        5,
        "workload.task[0].steps[0].every",
        "give every (whole pipes of 256 pages) or every_page (single pipe pages), not both",
    );
    check(
        &task(&["{ free = \"pipes\", every_page = \"2\" }"]),
        5,
        "workload.task[0].steps[0].every_page",
        "expected an integer, found a string",
    );
    // One way or the other per task, naming the earlier step's line.
    check(
        &task(&["{ pipes = 4 },", "{ free = \"pipes\", every = 2 },", "", "{ free = \"pipes\", every_page = 2 }"]),
        8,
        "workload.task[0].steps[2].every_page",
        "this task frees whole pipes (every) on line 6: a task frees its pipes whole or page by page (every_page), not both (the host fills its pipes for one or the other)",
    );
    check(
        &task(&["{ free = \"pipes\", every_page = 3 },", "{ free = \"pipes\" }"]),
        6,
        "workload.task[0].steps[1].free",
        "this task frees single pipe pages (every_page) on line 5: a task frees its pipes whole or page by page, not both (the host fills its pipes for one or the other)",
    );
    // Another task may free whole pipes.
    let ok = spec(&with_machine(&[
        "[[workload.task]]",
        "steps = [{ free = \"pipes\", every_page = 3 }]",
        "[[workload.task]]",
        "steps = [{ free = \"pipes\" }]",
    ]));
    parse_spec(&ok, "spec.toml").unwrap();
    // The lanes: lcm(512, 3) = 1536 > 1024.
    check(
        &task(&["{ free = \"pipes\", every_page = 512 },", "{ free = \"pipes\", every_page = 3 }"]),
        6,
        "workload.task[0].steps[1].every_page",
        "the every_page values of this task's free steps have a least common multiple of 1536, over 1024: the host fills that many pipes side by side (one per residue) to free every Nth page",
    );
    // files every: 1..=2^20, delete only.
    check(
        &task(&["{ files = \"s\", count = 4, op = \"delete\", every = 0 }"]),
        5,
        "workload.task[0].steps[0].every",
        "0 is out of range (expected 1..=1048576)",
    );
    check(
        &task(&[
            "{ files = \"s\", count = 4, op = \"create\" },",
            "{ files = \"s\", count = 4, op = \"read\", every = 2 }",
        ]),
        6,
        "workload.task[0].steps[1].every",
        "every applies to op = \"delete\" only (this step's op is \"read\")",
    );
    // sample: a non-empty name of letters, digits, _ and -.
    check(
        &task(&["{ sample = \"\" }"]),
        5,
        "workload.task[0].steps[0].sample",
        "empty sample name",
    );
    check(
        &task(&["{ compute = \"1ms\" },", "{ sample = \"after.build\" }"]),
        6,
        "workload.task[0].steps[1].sample",
        "sample name \"after.build\" has '.': a name is letters, digits, _ and - (it names rows census.NAME.ZONE.CLASS)",
    );
    check(
        &task(&["{ sample = 3 }"]),
        5,
        "workload.task[0].steps[0].sample",
        "expected a string, found an integer",
    );
    check(
        &task(&["{ sample = \"x\", every = 2 }"]),
        5,
        "workload.task[0].steps[0].every",
        "unknown key (expected one of: sample)",
    );
}

/// The `stride` of `touch` and `dontneed` steps (§31.5's transhuge-stress in the spec
/// language): a whole number of pages, and for `dontneed` at least the range's length.
#[test]
fn step_stride_errors() {
    let map = "{ mmap = \"a\", size = \"64MiB\", madvise = true }";
    check(
        &with_machine(&[
            "[[workload.task]]",
            &format!("steps = [{map}, {{ touch = \"a\", stride = 5000 }}]"),
        ]),
        4,
        "workload.task[0].steps[1].stride",
        "5000 bytes is not a multiple of 4096 (a whole number of pages)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            &format!("steps = [{map}, {{ dontneed = \"a\", length = \"2MiB\", stride = \"1MiB\" }}]"),
        ]),
        4,
        "workload.task[0].steps[1].stride",
        "1 MiB is shorter than the length 2 MiB (the ranges would overlap)",
    );
    check(
        &with_machine(&[
            "[[workload.task]]",
            &format!("steps = [{map}, {{ dontneed = \"a\", length = \"4KiB\", stride = 0 }}]"),
        ]),
        4,
        "workload.task[0].steps[1].stride",
        "0 bytes is below the minimum of 4096",
    );
    let ok = parse_spec(
        &spec(&with_machine(&[
            "[[workload.task]]",
            &format!(
                "steps = [{map}, {{ touch = \"a\", stride = \"2MiB\" }}, {{ dontneed = \"a\", length = \"2044KiB\", stride = \"2MiB\" }}, {{ touch = \"a\" }}]"
            ),
        ])),
        "spec.toml",
    )
    .unwrap();
    let steps = &ok.workload.unwrap().task[0].steps;
    use fraglab_spec::TaskStep;
    assert!(matches!(&steps[1], TaskStep::Touch { stride: 2097152, .. }));
    assert!(matches!(
        &steps[2],
        TaskStep::Dontneed {
            length: 2093056,
            stride: Some(2097152),
            ..
        }
    ));
    assert!(matches!(&steps[3], TaskStep::Touch { stride: 4096, .. }));
}

/// NUMA nodes (issue 35): `nodes`, `[[machine.node]]`, `numa_node` and `mempolicy`.
#[test]
fn numa_layouts_and_bindings_are_checked() {
    check(
        &["[machine]", "memory = \"4G\"", "cpus = 1", "nodes = 2"],
        4,
        "machine.nodes",
        "2 nodes but 1 CPUs: give every node a CPU (machine.cpus >= nodes), or lay the nodes out with [[machine.node]] tables",
    );
    check(
        &["[machine]", "memory = \"4G\"", "cpus = 4", "nodes = 17"],
        4,
        "machine.nodes",
        "17 is out of range (expected 1..=16)",
    );
    check(
        &[
            "[machine]",
            "memory = \"4G\"",
            "[[machine.node]]",
            "memory = \"1G\"",
        ],
        2,
        "machine.memory",
        "the [[machine.node]] tables (line 3) give the nodes' memory and CPUs; leave memory out",
    );
    check(
        &["[machine]", "[[machine.node]]", "memory = \"1G\"", "cpus = 0"],
        2,
        "machine.node",
        "node 0 needs a CPU (the boot CPU is on node 0)",
    );
    check(
        &[
            "[machine]",
            "memory = \"4G\"",
            "cpus = 2",
            "nodes = 2",
            "[workload]",
            "[[workload.thp_burst]]",
            "numa_node = 2",
        ],
        7,
        "workload.thp_burst[0].numa_node",
        "node 2: the machine has 2 node(s), 0..=1",
    );
    check(
        &[
            "[machine]",
            "memory = \"4G\"",
            "cpus = 2",
            "nodes = 2",
            "[workload]",
            "[[workload.thp_burst]]",
            "mempolicy = \"spread\"",
        ],
        7,
        "workload.thp_burst[0].mempolicy",
        "\"spread\": expected local, preferred:N, bind:NODES or interleave:NODES (NODES like 0,1 or 0-3 or all)",
    );
}

#[test]
fn numa_nodes_split_memory_and_cpus() {
    let text = "[machine]\nmemory = \"3GiB\"\ncpus = 5\nnodes = 2\n";
    let s = fraglab_spec::parse_spec(text, "t.toml").unwrap();
    let n = &s.machine.nodes;
    assert_eq!(n.len(), 2);
    assert_eq!((n[0].memory_bytes, n[0].cpus), (1536 << 20, 3));
    assert_eq!((n[1].memory_bytes, n[1].cpus), (1536 << 20, 2));
    let text = "[machine]\n[[machine.node]]\nmemory = \"1GiB\"\ncpus = 2\n[[machine.node]]\nmemory = \"3GiB\"\ncpus = 0\n";
    let s = fraglab_spec::parse_spec(text, "t.toml").unwrap();
    assert_eq!(s.machine.memory_bytes, Some(4 << 30));
    assert_eq!(s.machine.cpus, 2);
    assert_eq!(s.machine.nodes[1].cpus, 0);
}

/// Checkpoint keys (issue 37): paths must not be empty, `checkpoint_file` needs
/// `checkpoint_at`, and an `[[op]]` spec (no simulated clock) takes neither.
#[test]
fn checkpoint_keys_are_checked() {
    check(
        &["[machine]", "memory = \"1G\"", "checkpoint = \"\""],
        3,
        "machine.checkpoint",
        "an empty path (expected the path of a checkpoint file)",
    );
    check(
        &with_machine(&["[run]", "checkpoint_file = \"x.ckpt\""]),
        4,
        "run.checkpoint_file",
        "without run.checkpoint_at there is no checkpoint to write",
    );
    let e = err(&with_machine(&["[run]", "checkpoint_at = \"fast\""]));
    assert_eq!((e.line, e.key.as_deref()), (4, Some("run.checkpoint_at")), "{e}");
    check(
        &[
            "[machine]",
            "memory = \"1G\"",
            "checkpoint = \"w.ckpt\"",
            "[[op]]",
            "alloc = \"a\"",
            "count = 1",
            "order = 0",
            "gfp = \"GFP_KERNEL\"",
        ],
        3,
        "machine.checkpoint",
        "checkpoints are of timed runs: this spec has no [workload]",
    );
    check(
        &with_machine(&[
            "[run]",
            "checkpoint_at = \"1s\"",
            "[[op]]",
            "alloc = \"a\"",
            "count = 1",
            "order = 0",
            "gfp = \"GFP_KERNEL\"",
        ]),
        4,
        "run.checkpoint_at",
        "checkpoints are of timed runs: this spec has no [workload]",
    );
}
