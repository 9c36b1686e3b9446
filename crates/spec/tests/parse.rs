//! Parsing of valid specs into the expected structure.

use std::collections::BTreeMap;

use fraglab_spec::{
    find_model_switch, load_spec, parse_spec, CompactPriority, FolioKind, FolioKindSpec, FolioMode, Gfp,
    KnobValue, MachineSpec, ModelSpec, Op, PrintWhat, RunSpec, Spec, ZoneSpec, ZoneType, COMPACT_PRIORITIES,
    MODEL_SWITCHES,
};

const FULL: &str = r#"# A full spec (line 1)
name = "claim-and-steal"
description = "fill, punch holes, ask for order-3"

[machine]
memory = "4GiB"
cpus = 4
dma = false

[knobs]
"vm.min_free_kbytes" = 67584
"vm.lowmem_reserve_ratio" = [256, 256, 32, 0, 0]
"transparent_hugepage/enabled" = "never"
"vm.percpu_pagelist_high_fraction" = 8

[run]
seed = 42
debug_vm = true
debug_vm_every = 500
trace = ["kmem:mm_page_alloc_extfrag", "kmem:mm_page_alloc"]

[[op]]
alloc = "a"
count = 100
order = 0
gfp = "GFP_KERNEL"
cpu = 3
must_succeed = true

[[op]]
alloc = "b"
gfp = "GFP_HIGHUSER_MOVABLE | __GFP_NORETRY"

[[op]]
free = "a"
every = 2
offset = 1
cpu = 1

[[op]]
print = "pageblocks"
zone = "Normal"

[[op]]
print = "buddyinfo"

[[op]]
drain_all_pages = true
"#;

#[test]
fn full_spec_parses_to_the_expected_structure() {
    let spec = parse_spec(FULL, "full.toml").unwrap();
    let knobs: BTreeMap<String, KnobValue> = [
        ("vm.min_free_kbytes", KnobValue::Int(67584)),
        (
            "vm.lowmem_reserve_ratio",
            KnobValue::List(vec![256, 256, 32, 0, 0]),
        ),
        ("transparent_hugepage/enabled", KnobValue::Str("never".into())),
        ("vm.percpu_pagelist_high_fraction", KnobValue::Int(8)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let expected = Spec {
        file: "full.toml".into(),
        name: Some("claim-and-steal".into()),
        description: Some("fill, punch holes, ask for order-3".into()),
        machine: MachineSpec {
            nodes: Vec::new(),
            memory_bytes: Some(4 << 30),
            cpus: 4,
            dma: false,
            swap_bytes: 0,
            zones: None,
            hugetlb_pages: 0,
            read_ahead_kb: None,
            max_sectors_kb: None,
            page_reporting_order: None,
            page_reporting_given: false,
            snapshot: None,
            checkpoint: None,
            line: 6,
            hugetlb_line: 5,
        },
        knobs,
        model: ModelSpec::default(),
        run: RunSpec {
            seed: 42,
            debug_vm: true,
            debug_vm_every: 500,
            blame: false,
            // In TRACE_EVENTS order, not the spec's.
            trace: vec!["mm_page_alloc".into(), "mm_page_alloc_extfrag".into()],
            scale: None,
            checkpoint: None,
        },
        host: Default::default(),
        damon: Default::default(),
        workload: None,
        warnings: vec![],
        files: Vec::new(),
        cost: Default::default(),
        ops: vec![
            Op::Alloc {
                line: 22,
                set: "a".into(),
                count: 100,
                order: 0,
                gfp: Gfp::GFP_KERNEL,
                cpu: 3,
                must_succeed: true,
                kind: FolioKind::Kernel,
                nofs: false,
            },
            Op::Alloc {
                line: 30,
                set: "b".into(),
                count: 1,
                order: 0,
                gfp: Gfp::GFP_HIGHUSER_MOVABLE.union(Gfp::NORETRY),
                cpu: 0,
                must_succeed: false,
                kind: FolioKind::Anon,
                nofs: false,
            },
            Op::Free {
                line: 34,
                set: "a".into(),
                every: 2,
                offset: 1,
                cpu: 1,
            },
            Op::Print {
                line: 40,
                what: PrintWhat::Pageblocks,
                zone: Some(ZoneType::Normal),
            },
            Op::Print {
                line: 44,
                what: PrintWhat::Buddyinfo,
                zone: None,
            },
            Op::DrainAllPages { line: 47 },
        ],
    };
    assert_eq!(spec, expected);
    assert_eq!(spec.op_where(2), "full.toml:34: op[2]");
    assert_eq!(spec.ops[5].action(), "drain_all_pages");
    // Spec::knob falls back to the kernel default.
    assert_eq!(spec.knob("vm.swappiness"), Some(KnobValue::Int(60)));
    assert_eq!(spec.knob("vm.min_free_kbytes"), Some(KnobValue::Int(67584)));
}

#[test]
fn minimal_spec_gets_the_defaults() {
    let spec = parse_spec("[machine]\nmemory = \"64MiB\"\n", "m.toml").unwrap();
    assert_eq!(spec.name, None);
    assert_eq!(spec.description, None);
    assert_eq!(
        spec.machine,
        MachineSpec {
            nodes: Vec::new(),
            memory_bytes: Some(64 << 20),
            cpus: 2,
            dma: true,
            swap_bytes: 0,
            zones: None,
            hugetlb_pages: 0,
            read_ahead_kb: None,
            max_sectors_kb: None,
            page_reporting_order: None,
            page_reporting_given: false,
            snapshot: None,
            checkpoint: None,
            line: 2,
            hugetlb_line: 1,
        }
    );
    assert!(spec.knobs.is_empty());
    assert_eq!(
        spec.run,
        RunSpec {
            seed: 1,
            debug_vm: false,
            debug_vm_every: 10_000,
            blame: false,
            trace: vec![],
            scale: None,
            checkpoint: None,
        }
    );
    assert!(spec.ops.is_empty());
    assert_eq!(spec.knob("vm.min_free_kbytes"), None);
}

#[test]
fn explicit_zones() {
    let text = r#"
[machine]
cpus = 1

[[machine.zone]]
name = "DMA"
start_pfn = 1
spanned = 4095
present = 3998
managed = 3840

[[machine.zone]]
name = "DMA32"
start_pfn = 4096
spanned = 1044480
present = 782336
managed = 772917

[[machine.zone]]
name = "Normal"
start_pfn = 1048576
spanned = 262144

[[machine.zone]]
name = "Movable"
start_pfn = 0
spanned = 0
present = 0
managed = 0

[[op]]
print = "pageblocks"
zone = "DMA32"
"#;
    let spec = parse_spec(text, "z.toml").unwrap();
    let z = |zone, start_pfn, spanned, present, managed| ZoneSpec {
        zone,
        start_pfn,
        spanned,
        present,
        managed,
    };
    assert_eq!(
        spec.machine,
        MachineSpec {
            nodes: Vec::new(),
            memory_bytes: None,
            cpus: 1,
            dma: true,
            swap_bytes: 0,
            hugetlb_pages: 0,
            read_ahead_kb: None,
            max_sectors_kb: None,
            page_reporting_order: None,
            page_reporting_given: false,
            snapshot: None,
            checkpoint: None,
            line: 5,
            hugetlb_line: 2,
            zones: Some(vec![
                z(ZoneType::Dma, 1, 4095, 3998, 3840),
                z(ZoneType::Dma32, 4096, 1044480, 782336, 772917),
                // present and managed default to spanned.
                z(ZoneType::Normal, 1048576, 262144, 262144, 262144),
                z(ZoneType::Movable, 0, 0, 0, 0),
            ]),
        }
    );
    assert_eq!(
        spec.ops,
        vec![Op::Print {
            line: 31,
            what: PrintWhat::Pageblocks,
            zone: Some(ZoneType::Dma32)
        }]
    );
}

fn knobs_of(text: &str) -> BTreeMap<String, KnobValue> {
    match parse_spec(text, "k.toml") {
        Ok(s) => s.knobs,
        Err(e) => panic!("{e}\n--- in ---\n{text}"),
    }
}

#[test]
fn dotted_and_nested_knob_forms_are_equal() {
    let quoted = knobs_of(
        r#"
[machine]
memory = "1GiB"
[knobs]
"vm.min_free_kbytes" = 67584
"vm.watermark_boost_factor" = 0
"transparent_hugepage/enabled" = "always"
"transparent_hugepage/khugepaged/defrag" = 0
"transparent_hugepage/hugepages-64kB/enabled" = "inherit"
"#,
    );
    let forms = [
        // Unquoted dotted keys.
        r#"
[machine]
memory = "1GiB"
[knobs]
vm.min_free_kbytes = 67584
vm.watermark_boost_factor = 0
"transparent_hugepage/enabled" = "always"
"transparent_hugepage/khugepaged/defrag" = 0
"transparent_hugepage/hugepages-64kB/enabled" = "inherit"
"#,
        // Nested tables; `.` stands for `/` as with sysctl.
        r#"
[machine]
memory = "1GiB"
[knobs.vm]
min_free_kbytes = 67584
watermark_boost_factor = 0
[knobs.transparent_hugepage]
enabled = "always"
khugepaged.defrag = 0
[knobs.transparent_hugepage.hugepages-64kB]
enabled = "inherit"
"#,
        // Inline tables, and dotted keys at the top level.
        r#"
knobs.vm = { min_free_kbytes = 67584, watermark_boost_factor = 0 }
knobs."transparent_hugepage/enabled" = "always"
knobs.transparent_hugepage.khugepaged = { defrag = 0 }
knobs."transparent_hugepage/hugepages-64kB/enabled" = "inherit"
[machine]
memory = "1GiB"
"#,
    ];
    assert_eq!(quoted.len(), 5);
    for f in forms {
        assert_eq!(knobs_of(f), quoted, "{f}");
    }
}

#[test]
fn lowmem_reserve_ratio_string_form_is_a_list() {
    let a =
        knobs_of("[machine]\nmemory = \"1GiB\"\n[knobs]\n\"vm.lowmem_reserve_ratio\" = \"256 256 32 0 0\"\n");
    let b = knobs_of(
        "[machine]\nmemory = \"1GiB\"\n[knobs]\n\"vm.lowmem_reserve_ratio\" = [256, 256, 32, 0, 0]\n",
    );
    assert_eq!(a, b);
    assert_eq!(
        a["vm.lowmem_reserve_ratio"],
        KnobValue::List(vec![256, 256, 32, 0, 0])
    );
}

fn memory_of(value: &str) -> Option<u64> {
    parse_spec(&format!("[machine]\nmemory = {value}\n"), "m.toml")
        .unwrap()
        .machine
        .memory_bytes
}

#[test]
fn memory_size_forms() {
    let gib4 = Some(4u64 << 30);
    for v in [
        "\"4GiB\"",
        "\"4G\"",
        "\"4g\"",
        "\"4 GiB\"",
        "\"4096MiB\"",
        "\"4096M\"",
        "4294967296",
    ] {
        assert_eq!(memory_of(v), gib4, "{v}");
    }
    assert_eq!(memory_of("\"4194304KiB\""), gib4);
    assert_eq!(memory_of("\"4194304K\""), gib4);
    assert_eq!(memory_of("\"4294967296B\""), gib4);
    assert_eq!(memory_of("\"2MiB\""), Some(2 << 20));
    assert_eq!(memory_of("2097152"), Some(2 << 20));
    assert_eq!(memory_of("\"1TiB\""), Some(1 << 40));
    assert_eq!(memory_of("\"1T\""), Some(1 << 40));
    assert_eq!(memory_of("\"1024GiB\""), Some(1 << 40));
}

#[test]
fn kmem_star_expands_to_every_event() {
    let spec = parse_spec(
        "[machine]\nmemory = \"1GiB\"\n[run]\ntrace = [\"kmem:*\"]\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(
        spec.run.trace,
        vec![
            "mm_page_alloc",
            "mm_page_free",
            "mm_page_alloc_zone_locked",
            "mm_page_pcpu_drain",
            "mm_page_alloc_extfrag"
        ]
    );
    // Duplicates collapse.
    let spec = parse_spec(
        "[machine]\nmemory = \"1GiB\"\n[run]\ntrace = [\"kmem:mm_page_free\", \"kmem:*\", \"kmem:mm_page_free\"]\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(spec.run.trace.len(), 5);
}

#[test]
fn ops_may_be_inline_tables() {
    let spec = parse_spec(
        "op = [{ alloc = \"x\", gfp = \"GFP_ATOMIC\" },\n      { free = \"x\" }]\n[machine]\nmemory = \"8M\"\n",
        "i.toml",
    )
    .unwrap();
    assert_eq!(spec.ops.len(), 2);
    assert_eq!(spec.ops[0].line(), 1);
    assert_eq!(spec.ops[1].line(), 2);
}

#[test]
fn load_spec_reads_a_file_and_names_it() {
    let dir = std::env::temp_dir().join(format!("fraglab-spec-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ok.toml");
    std::fs::write(&path, FULL).unwrap();
    assert_eq!(load_spec(&path).unwrap().ops.len(), 6);

    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[machine]\nmemory = \"1MiB\"\n").unwrap();
    let e = load_spec(&bad).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2: key machine.memory: 1MiB is smaller than one pageblock (2 MiB)",
            bad.display()
        )
    );

    let missing = dir.join("missing.toml");
    let e = load_spec(&missing).unwrap_err();
    assert_eq!(e.line, 0);
    assert!(e
        .to_string()
        .starts_with(&format!("{}: cannot read the spec: ", missing.display())));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- [model], alloc kind/nofs, compaction ops and reports ----

const COMPACTION: &str = r#"[machine]
memory = "2GiB"
cpus = 4

[model]
folio_mode = "migrate_no_free_split"

[[op]]
alloc = "anon"
gfp = "GFP_HIGHUSER_MOVABLE"
order = 4

[[op]]
alloc = "slab"
gfp = "GFP_KERNEL|__GFP_RECLAIMABLE"

[[op]]
alloc = "kern"
gfp = "GFP_KERNEL"

[[op]]
alloc = "pt"
gfp = "GFP_KERNEL"
kind = "pagetable"

[[op]]
alloc = "xfs"
gfp = "GFP_HIGHUSER_MOVABLE"
kind = "file"
nofs = true
count = 8

[[op]]
alloc = "ext4"
gfp = "GFP_HIGHUSER_MOVABLE"
kind = "file"

[[op]]
compact_memory = true

[[op]]
compact = 9

[[op]]
compact = 3
gfp = "GFP_KERNEL|__GFP_NORETRY"
priority = "sync_light"
cpu = 3

[[op]]
kcompactd = 10

[[op]]
proactive_compact = true

[[op]]
print = "folios"

[[op]]
print = "compaction"

[[op]]
print = "extfrag_index"

[[op]]
print = "unusable_index"
"#;

#[test]
fn compaction_spec_parses_to_the_expected_structure() {
    let s = parse_spec(COMPACTION, "c.toml").unwrap();
    assert_eq!(
        s.model,
        ModelSpec {
            folio_mode: FolioMode::MigrateNoFreeSplit,
            ..ModelSpec::default()
        }
    );
    assert_eq!(s.model.get("defrag_stage"), Some("kswapd_watermarks"));
    assert_eq!(s.model.get("costly_order_policy"), Some("baseline"));
    assert_eq!(s.model.get("v4_position"), Some("before_initial_compaction"));
    assert_eq!(s.model.get("folio_mode"), Some("migrate_no_free_split"));
    let alloc = |line, set: &str, count, order, gfp: &str, kind, nofs| Op::Alloc {
        line,
        set: set.into(),
        count,
        order,
        gfp: Gfp::parse(gfp).unwrap(),
        cpu: 0,
        must_succeed: false,
        kind,
        nofs,
    };
    let expected = vec![
        alloc(
            8,
            "anon",
            1,
            4,
            "GFP_HIGHUSER_MOVABLE",
            FolioKindSpec::Anon,
            false,
        ),
        alloc(
            13,
            "slab",
            1,
            0,
            "GFP_KERNEL|__GFP_RECLAIMABLE",
            FolioKindSpec::Slab,
            false,
        ),
        alloc(17, "kern", 1, 0, "GFP_KERNEL", FolioKindSpec::Kernel, false),
        alloc(21, "pt", 1, 0, "GFP_KERNEL", FolioKindSpec::PageTable, false),
        alloc(26, "xfs", 8, 0, "GFP_HIGHUSER_MOVABLE", FolioKindSpec::File, true),
        alloc(
            33,
            "ext4",
            1,
            0,
            "GFP_HIGHUSER_MOVABLE",
            FolioKindSpec::File,
            false,
        ),
        Op::CompactMemory { line: 38 },
        Op::Compact {
            line: 41,
            order: 9,
            gfp: Gfp::GFP_TRANSHUGE,
            priority: CompactPriority::Async,
            cpu: 0,
        },
        Op::Compact {
            line: 44,
            order: 3,
            gfp: Gfp::parse("GFP_KERNEL|__GFP_NORETRY").unwrap(),
            priority: CompactPriority::SyncLight,
            cpu: 3,
        },
        Op::Kcompactd {
            line: 50,
            order: 10,
            mode: fraglab_spec::KcompactdMode::Force,
        },
        Op::ProactiveCompact {
            line: 53,
            mode: fraglab_spec::ProactiveMode::Timer,
        },
        Op::Print {
            line: 56,
            what: PrintWhat::Folios,
            zone: None,
        },
        Op::Print {
            line: 59,
            what: PrintWhat::Compaction,
            zone: None,
        },
        Op::Print {
            line: 62,
            what: PrintWhat::ExtfragIndex,
            zone: None,
        },
        Op::Print {
            line: 65,
            what: PrintWhat::UnusableIndex,
            zone: None,
        },
    ];
    assert_eq!(s.ops, expected);
    let actions: Vec<&str> = s.ops[6..11].iter().map(Op::action).collect();
    assert_eq!(
        actions,
        [
            "compact_memory",
            "compact",
            "compact",
            "kcompactd",
            "proactive_compact"
        ]
    );
    assert_eq!(s.op_where(9), "c.toml:50: op[9]");
    assert_eq!(s.ops[7].line(), 41);
}

#[test]
fn model_defaults_and_every_folio_mode() {
    let none = parse_spec("[machine]\nmemory = \"1G\"\n", "s.toml").unwrap();
    assert_eq!(none.model.folio_mode, FolioMode::MigrateFreeSplit);
    let empty = parse_spec("[machine]\nmemory = \"1G\"\n[model]\n", "s.toml").unwrap();
    assert_eq!(empty.model, ModelSpec::default());
    for m in FolioMode::ALL {
        let text = format!(
            "[model]\nfolio_mode = \"{}\"\n[machine]\nmemory = \"1G\"\n",
            m.name()
        );
        assert_eq!(parse_spec(&text, "s.toml").unwrap().model.folio_mode, m);
        assert_eq!(FolioMode::from_name(m.name()), Some(m));
    }
    // Inline form.
    let text = "model = { folio_mode = \"split_large\" }\n[machine]\nmemory = \"1G\"\n";
    assert_eq!(
        parse_spec(text, "s.toml").unwrap().model.folio_mode,
        FolioMode::SplitLarge
    );
    let fm = find_model_switch("folio_mode").unwrap();
    assert_eq!(fm.default, "migrate_free_split");
    let names: Vec<&str> = MODEL_SWITCHES.iter().map(|d| d.name).collect();
    assert_eq!(
        names,
        [
            "folio_mode",
            "defrag_stage",
            "costly_order_policy",
            "v4_position",
            "xa_nodes",
            "sched",
            "fs_metadata"
        ]
    );
    // Every choice of every switch parses and reads back.
    for d in MODEL_SWITCHES {
        for c in d.choices {
            let text = format!("[model]\n{} = \"{c}\"\n[machine]\nmemory = \"1G\"\n", d.name);
            assert_eq!(parse_spec(&text, "s.toml").unwrap().model.get(d.name), Some(*c));
        }
    }
}

#[test]
fn compaction_ops_as_inline_tables_and_every_priority() {
    for (name, prio) in COMPACT_PRIORITIES {
        let text = format!(
            "op = [{{ compact = 2, priority = \"{name}\" }}, {{ kcompactd = 1 }}]\n[machine]\nmemory = \"1G\"\n"
        );
        let s = parse_spec(&text, "s.toml").unwrap();
        assert_eq!(
            s.ops,
            [
                Op::Compact {
                    line: 1,
                    order: 2,
                    gfp: Gfp::GFP_TRANSHUGE,
                    priority: *prio,
                    cpu: 0
                },
                Op::Kcompactd {
                    line: 1,
                    order: 1,
                    mode: fraglab_spec::KcompactdMode::Force
                },
            ]
        );
    }
    assert_eq!(
        COMPACT_PRIORITIES.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        ["async", "sync_light", "sync_full"]
    );
}

#[test]
fn print_names_round_trip() {
    for w in PrintWhat::ALL {
        assert_eq!(PrintWhat::from_name(w.name()), Some(w));
    }
    assert_eq!(
        PrintWhat::from_name("extfrag_index"),
        Some(PrintWhat::ExtfragIndex)
    );
    assert_eq!(
        PrintWhat::from_name("unusable_index"),
        Some(PrintWhat::UnusableIndex)
    );
    assert_eq!(PrintWhat::from_name("folios"), Some(PrintWhat::Folios));
    assert_eq!(PrintWhat::from_name("compaction"), Some(PrintWhat::Compaction));
    assert_eq!(FolioKindSpec::File.name(), "file");
    assert_eq!(
        FolioKindSpec::ALL.map(FolioKindSpec::name),
        ["anon", "file", "slab", "pagetable", "kernel", "hugetlb", "bdev"]
    );
}

#[test]
fn fault_and_kswapd_ops() {
    let text = "[machine]\nmemory = \"1G\"\ncpus = 2\n[[op]]\nfault = \"thp\"\ncount = 3\nmadvised = true\ncpu = 1\n[[op]]\nkswapd = true\n[[op]]\nfree = \"thp\"\n";
    let s = parse_spec(text, "s.toml").unwrap();
    assert_eq!(
        s.ops[..2],
        [
            Op::Fault {
                line: 4,
                set: "thp".into(),
                count: 3,
                madvised: true,
                cpu: 1
            },
            Op::Kswapd { line: 9 },
        ]
    );
    assert_eq!(s.ops[0].action(), "fault");
    assert_eq!(s.ops[1].action(), "kswapd");
    let d = parse_spec("[machine]\nmemory = \"1G\"\n[[op]]\nfault = \"a\"\n", "s.toml").unwrap();
    assert!(matches!(
        d.ops[0],
        Op::Fault {
            count: 1,
            madvised: false,
            cpu: 0,
            ..
        }
    ));
}

/// Every spec under `experiments/` loads: the experiments' READMEs give commands that run
/// them, so a spec that a key's rename or a new check breaks fails here, naming its file.
#[test]
fn every_experiment_spec_loads() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "toml")
                // The validation suite's manifest and diagnoses are not specs.
                && !p.ends_with("validation/suite.toml")
                && !p.ends_with("validation/diagnoses.toml")
            {
                out.push(p);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut specs = Vec::new();
    walk(&root, &mut specs);
    specs.sort();
    assert!(specs.len() >= 10, "found only {specs:?}");
    for p in &specs {
        if let Err(e) = load_spec(p) {
            panic!("{}: {e}", p.display());
        }
    }
}

/// `spec_keys()` lists exactly what the parser accepts: for every listed table, an unknown key
/// there is an error that names the table's keys, and they are the listed ones, in order.
#[test]
fn spec_keys_are_the_keys_the_parser_accepts() {
    let rows = fraglab_spec::spec_keys();
    let mut tables: Vec<&str> = Vec::new();
    for r in &rows {
        if !tables.contains(&r.table.as_str()) {
            tables.push(&r.table);
        }
    }
    let listed =
        |table: &str| -> Vec<&str> { rows.iter().filter(|r| r.table == table).map(|r| r.key).collect() };
    let op_keys: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for t in tables.iter().filter(|t| t.starts_with("[[op]] ")) {
            v.push(&t[7..]);
        }
        for t in tables.iter().filter(|t| t.starts_with("[[op]] ")) {
            for k in listed(t).into_iter().skip(1) {
                if !v.contains(&k) {
                    v.push(k);
                }
            }
        }
        v
    };
    let machine = "[machine]\nmemory = \"1GiB\"\n";
    let mut checked = 0;
    for table in &tables {
        let keys = listed(table);
        let (text, expected) = if let Some(action) = table.strip_prefix("[[op]] ") {
            // A key of another action: not allowed, and the message lists this action's keys.
            let other = op_keys
                .iter()
                .find(|k| !keys.contains(k) && !tables.iter().any(|t| t.strip_prefix("[[op]] ") == Some(**k)))
                .expect("a key of another action");
            let text = format!("{machine}[[op]]\n{action} = true\n{other} = 1\n");
            let others = &keys[1..];
            let msg = if others.is_empty() {
                format!("not allowed in a {action} op (it takes no other keys)")
            } else {
                let article = if action.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                format!(
                    "not allowed in {article} {action} op (allowed: {})",
                    others.join(", ")
                )
            };
            (text, msg)
        } else if let Some(action) = table.strip_prefix("[[workload.task]] steps: ") {
            let text = format!("{machine}[[workload.task]]\nsteps = [{{ {action} = 1, zzzzzz = 1 }}]\n");
            let names = match action {
                "compute" | "sleep" => vec!["compute", "sleep"],
                _ => keys.clone(),
            };
            (
                text,
                format!("unknown key (expected one of: {})", names.join(", ")),
            )
        } else {
            let text = match *table {
                "(top level)" => format!("zzzzzz = 1\n{machine}"),
                "[machine]" => format!("{machine}zzzzzz = 1\n"),
                "[[machine.zone]]" => "[[machine.zone]]\nzzzzzz = 1\n".to_string(),
                t => format!("{machine}{t}\nzzzzzz = 1\n"),
            };
            (
                text,
                format!("unknown key (expected one of: {})", keys.join(", ")),
            )
        };
        let e = parse_spec(&text, "t.toml").expect_err(&text);
        assert_eq!(e.message, expected, "{table}:\n{text}");
        checked += 1;
    }
    // The op keys as a whole: an unknown op key lists them all.
    let e = parse_spec(&format!("{machine}[[op]]\nzzzzzz = 1\n"), "t.toml").unwrap_err();
    assert_eq!(
        e.message,
        format!("unknown key (expected one of: {})", op_keys.join(", "))
    );
    assert_eq!(checked, tables.len());
    // Every table of a spec is listed.
    for t in [
        "(top level)",
        "[machine]",
        "[[machine.zone]]",
        "[run]",
        "[[op]] alloc",
        "[workload]",
        "[[workload.kbuild]]",
        "[[workload.task]]",
        "[[workload.task]] steps: mmap",
        "[cost]",
    ] {
        assert!(tables.contains(&t), "{t} is not listed");
    }
    // Each key once per table, with a form, a default and a doc.
    for r in &rows {
        assert_eq!(
            rows.iter()
                .filter(|x| x.table == r.table && x.key == r.key)
                .count(),
            1,
            "{} {}",
            r.table,
            r.key
        );
        assert!(
            !r.form.is_empty() && !r.default.is_empty() && !r.doc.is_empty(),
            "{r:?}"
        );
    }
}

/// Phases (issue 19): `after` and the `measure` step parse; without them nothing changes.
#[test]
fn phases_after_and_measure_parse() {
    let s = fraglab_spec::parse_spec(
        r#"
[machine]
memory = "1GiB"
[workload]
duration = "10s"
[[workload.task]]
name = "age"
steps = [{ compute = "1s" }]
[[workload.task]]
name = "run"
after = "age"
start = "2s"
steps = [{ measure = true }, { compute = "1s" }]
"#,
        "phases.toml",
    )
    .unwrap();
    let t = &s.workload.as_ref().unwrap().task;
    assert_eq!(t[0].after, None);
    assert_eq!(t[1].after.as_deref(), Some("age"));
    assert_eq!(t[1].start_ns, 2_000_000_000);
    assert_eq!(
        t[1].steps,
        vec![
            fraglab_spec::TaskStep::Measure,
            fraglab_spec::TaskStep::Compute { ns: 1_000_000_000 }
        ]
    );
}

/// §29.1: `locked = true` on mmap (MAP_LOCKED), and the `mlock`/`munlock` steps.
#[test]
fn s29_mlock_steps_parse() {
    use fraglab_spec::TaskStep;
    let text = "[machine]\nmemory = \"1GiB\"\n[workload]\nduration = \"1s\"\n[[workload.task]]\nsteps = [{ mmap = \"a\", size = \"8MiB\", locked = true }, { mmap = \"b\", size = \"4MiB\" }, { mlock = \"b\" }, { munlock = \"a\" }, { compact_memory = true }]\n";
    let spec = parse_spec(text, "m.toml").unwrap();
    let steps = &spec.workload.as_ref().unwrap().task[0].steps;
    assert_eq!(
        steps[..4],
        [
            TaskStep::Mmap {
                vma: "a".into(),
                size_bytes: 8 << 20,
                madvise: false,
                locked: true
            },
            TaskStep::Mmap {
                vma: "b".into(),
                size_bytes: 4 << 20,
                madvise: false,
                locked: false
            },
            TaskStep::Mlock { vma: "b".into() },
            TaskStep::Munlock { vma: "a".into() },
        ]
    );
}

/// Issue 19 item 3: the `free`, `files` and `fadvise` steps, per-file `mapping` on `read`,
/// `write` and `files`, `[machine] read_ahead_kb`, and `WorkloadSpec::task_files`.
#[test]
fn h3_free_files_fadvise_mapping_and_read_ahead_kb() {
    use fraglab_spec::{Fadvice, FilesOp, MappingKind, TaskStep};
    let text = r#"
[machine]
memory = "1GiB"
read_ahead_kb = 8192
max_sectors_kb = 4096

[[workload.task]]
steps = [
  { slab = 10 }, { free = "slab" }, { pipes = 4 }, { free = "pipes", every = 3 },
  { files = "small", count = 100, op = "create", mapping = "large_folios" },
  { files = "small", count = 100, op = "read", pattern = "random" },
  { files = "small", count = 100, op = "delete", size = "16KiB" },
  { delete = "log" },
  { write = "data", length = "1MiB", mapping = "no_large_folios" },
  { fadvise = "data", advice = "willneed" },
  { fadvise = "data", advice = "dontneed", offset = 4096, length = 8192 },
]

[[workload.task]]
steps = [{ read = "data", length = 4096 }, { write = "log", length = 4096 }]
"#;
    let s = parse_spec(text, "t.toml").unwrap();
    assert_eq!(s.machine.read_ahead_kb, Some(8192));
    assert_eq!(s.machine.max_sectors_kb, Some(4096));
    let w = s.workload.as_ref().unwrap();
    let st = &w.task[0].steps;
    assert_eq!(
        st[1],
        TaskStep::Free {
            reclaimable: true,
            every: 2
        }
    );
    assert_eq!(
        st[3],
        TaskStep::Free {
            reclaimable: false,
            every: 3
        }
    );
    assert_eq!(
        st[4],
        TaskStep::Files {
            set: "small".into(),
            count: 100,
            size_bytes: 64 << 10,
            op: FilesOp::Create,
            random: false,
            mapping: MappingKind::LargeFolios,
            every: 1,
        }
    );
    // Later steps naming the set keep its kind.
    assert!(matches!(
        st[5],
        TaskStep::Files {
            op: FilesOp::Read,
            random: true,
            mapping: MappingKind::LargeFolios,
            ..
        }
    ));
    assert!(matches!(
        st[6],
        TaskStep::Files {
            op: FilesOp::Delete,
            size_bytes: 16384,
            ..
        }
    ));
    assert_eq!(
        st[9],
        TaskStep::Fadvise {
            file: "data".into(),
            advice: Fadvice::Willneed,
            offset: 0,
            length: None
        }
    );
    assert_eq!(
        st[10],
        TaskStep::Fadvise {
            file: "data".into(),
            advice: Fadvice::Dontneed,
            offset: 4096,
            length: Some(8192)
        }
    );
    assert!(matches!(
        &w.task[1].steps[0],
        TaskStep::Read {
            mapping: MappingKind::NoLargeFolios,
            ..
        }
    ));
    assert_eq!(
        w.task_files(),
        vec![
            ("small".to_string(), MappingKind::LargeFolios),
            ("log".to_string(), MappingKind::Xfs),
            ("data".to_string(), MappingKind::NoLargeFolios),
        ]
    );
    // Not given: None (the model's 128, the host leaves the device alone).
    let s = parse_spec("[machine]\nmemory = \"1GiB\"\n", "t.toml").unwrap();
    assert_eq!(s.machine.read_ahead_kb, None);
}

/// `[damon]` (docs/model §27): off without the table; the table switches it on with its
/// preset (default damon_reclaim), keys given override it.
#[test]
fn section_27_damon_table() {
    let s = parse_spec("[machine]\nmemory = \"1GiB\"\n", "a.toml").unwrap();
    assert!(!s.damon.enabled);
    let s = parse_spec(
        "[machine]\nmemory = \"1GiB\"\n[damon]\npreset = \"s2\"\nquota_bytes = \"64MiB\"\nage_min = 6\nwmarks_metric = \"free_mem_rate\"\nfilters = \"anon:reject, unmapped:allow\"\n",
        "a.toml",
    )
    .unwrap();
    assert!(s.damon.enabled);
    assert_eq!(s.damon.preset, "s2");
    assert_eq!(s.damon.values["quota_bytes"], 64 << 20);
    assert_eq!(s.damon.values["age_min"], 6);
    assert_eq!(s.damon.values.len(), 2);
    assert_eq!(s.damon.wmarks_free_mem_rate, Some(true));
    assert_eq!(
        s.damon.filters,
        Some(vec![("anon".to_string(), false), ("unmapped".to_string(), true)])
    );
    let s = parse_spec(
        "[machine]\nmemory = \"1GiB\"\n[damon]\nenabled = false\n",
        "a.toml",
    )
    .unwrap();
    assert!(!s.damon.enabled);
    assert_eq!(s.damon.preset, "damon_reclaim");
    assert_eq!(s.damon.regions, None);
    // §27.3: the monitored ranges, as the kernel's targets/0/regions give them.
    let s = parse_spec(
        "[machine]\nmemory = \"1GiB\"\n[damon]\npreset = \"s2\"\nregions = \"16MiB-3GiB, 4GiB-25GiB\"\n",
        "a.toml",
    )
    .unwrap();
    assert_eq!(
        s.damon.regions,
        Some(vec![(16 << 20, 3 << 30), (4 << 30, 25 << 30)])
    );
}

/// Issue 33 item 7: `every_page` on a pipes free, `every` on a files delete, `sample` steps;
/// the task's pipe population and lanes.
#[test]
fn issue33_every_page_files_every_and_sample() {
    use fraglab_spec::{FilesOp, TaskStep};
    let text = r#"
[machine]
memory = "1GiB"

[[workload.task]]
loops = 3
steps = [
  { pipes = 100 }, { pipes = 28 },
  { free = "pipes", every_page = 4 },
  { free = "pipes", every_page = 6 },
  { files = "s", count = 10, op = "create" },
  { files = "s", count = 10, op = "delete", every = 3, pattern = "random" },
  { sample = "built-1_x" },
]
"#;
    let s = parse_spec(text, "t.toml").unwrap();
    assert!(s.warnings.is_empty());
    let t = &s.workload.as_ref().unwrap().task[0];
    assert_eq!(t.steps[2], TaskStep::FreePipePages { every: 4 });
    assert_eq!(t.steps[3], TaskStep::FreePipePages { every: 6 });
    assert!(matches!(
        t.steps[4],
        TaskStep::Files {
            op: FilesOp::Create,
            every: 1,
            ..
        }
    ));
    assert!(matches!(
        t.steps[5],
        TaskStep::Files {
            op: FilesOp::Delete,
            every: 3,
            random: true,
            ..
        }
    ));
    assert_eq!(
        t.steps[6],
        TaskStep::Sample {
            name: "built-1_x".into()
        }
    );
    assert_eq!(t.pipe_pages(), 3 * 128);
    assert_eq!(t.pipe_lanes(), 12);
    let sel: Vec<u64> = TaskStep::files_selected(10, 3).collect();
    assert_eq!(sel, vec![2, 5, 8]);
    assert_eq!(TaskStep::files_selected(10, 1).count(), 10);
    assert_eq!(TaskStep::files_selected(2, 3).count(), 0);
    // Without every_page: one lane.
    let plain = parse_spec(
        "[machine]\nmemory = \"1GiB\"\n[[workload.task]]\nsteps = [{ pipes = 4 }, { free = \"pipes\" }]\n",
        "t.toml",
    )
    .unwrap();
    assert_eq!(plain.workload.unwrap().task[0].pipe_lanes(), 1);
}
