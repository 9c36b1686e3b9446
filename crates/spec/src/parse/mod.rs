//! Validation of the spanned tree into a [`Spec`].

use std::collections::BTreeMap;

use fraglab_mm::gfp::Gfp;
use fraglab_mm::types::{ZoneType, MAX_PAGE_ORDER, PAGEBLOCK_NR_PAGES, PAGE_SIZE};

use crate::knobs::{find_knob, KnobKind, KnobValue, KNOBS};
use crate::model::{find_model_switch, MODEL_SWITCHES};
use crate::suggest::{did_you_mean, hint};
use crate::tree::{self, join, quote, Entry, Lines, Node, Val};
use crate::{
    FolioKindSpec, MachineSpec, ModelSpec, Op, PrintWhat, RunSpec, Spec, SpecError, ZoneSpec,
    COMPACT_PRIORITIES, TRACE_EVENTS,
};
use fraglab_mm::compaction::CompactPriority;

/// The smallest machine: one pageblock (2 MiB).
pub const MIN_MEMORY_BYTES: u64 = PAGEBLOCK_NR_PAGES as u64 * PAGE_SIZE;
/// The largest machine: 1 TiB.
pub const MAX_MEMORY_BYTES: u64 = 1 << 40;
/// `MAX_DMA_PFN` on x86-64: ZONE_DMA lies below 16 MiB.
const MAX_DMA_PFN: u64 = (16 << 20) / PAGE_SIZE;
/// `MAX_DMA32_PFN` on x86-64: ZONE_DMA32 lies below 4 GiB.
const MAX_DMA32_PFN: u64 = (4 << 30) / PAGE_SIZE;
/// Pfns are 32-bit in fraglab (`fraglab_mm::types::Pfn`).
const MAX_PFN: u64 = 1 << 32;

const TOP_KEYS: &[&str] = &[
    "name",
    "description",
    "machine",
    "knobs",
    "model",
    "run",
    "op",
    "workload",
    "cost",
];
const WORKLOAD_KEYS: &[&str] = &[
    "duration",
    "kbuild",
    "thp_burst",
    "thpchallenge",
    "pgbench",
    "vm_scalability",
    "fio_smallfiles",
    "task",
];
const TASK_KEYS: &[&str] = &["name", "count", "start", "loops", "steps"];
const STEP_ACTIONS: &[&str] = &[
    "mmap",
    "touch",
    "dontneed",
    "munmap",
    "compute",
    "sleep",
    "read",
    "write",
    "delete",
    "slab",
    "pipes",
    "compact_memory",
    "drop_caches",
];
const PGBENCH_KEYS: &[&str] = &[
    "clients",
    "client_private",
    "data",
    "wal",
    "tx_cpu",
    "tx_data_write",
    "tx_wal_write",
    "fpw_wal_write",
    "checkpoint_interval",
    "checkpoint_size",
    "checkpoint_write",
    "checkpoint_spread",
    "duration",
];
const THPCHALLENGE_KEYS: &[&str] = &["threads", "size", "madvised", "hold", "start"];
const FIO_KEYS: &[&str] = &["jobs", "file_size", "working_set", "start", "runtime"];
const VMSCAL_KEYS: &[&str] = &["case", "tasks", "size", "unit", "runtime", "start", "mapping"];
const KBUILD_KEYS: &[&str] = &[
    "jobs_parallel",
    "jobs",
    "iterations",
    "job_anon",
    "job_cpu",
    "source",
    "job_read",
    "job_slab",
    "job_obj",
    "source_file",
    "untar",
    "trees",
];
const THP_BURST_KEYS: &[&str] = &["interval", "size", "hold", "bursts", "start", "madvised"];
const MACHINE_KEYS: &[&str] = &["memory", "cpus", "dma", "zone", "swap", "hugetlb_pages"];
const ZONE_KEYS: &[&str] = &["name", "start_pfn", "spanned", "present", "managed"];
const ZONE_NAMES: &[&str] = &["DMA", "DMA32", "Normal", "Movable"];
const RUN_KEYS: &[&str] = &["seed", "debug_vm", "trace"];
const ACTIONS: &[&str] = &[
    "alloc",
    "free",
    "print",
    "drain_all_pages",
    "compact_memory",
    "compact",
    "kcompactd",
    "proactive_compact",
    "fault",
    "kswapd",
    "write",
    "read",
];
const WRITE_KEYS: &[&str] = &["write", "offset", "length", "mapping", "cpu"];
const READ_KEYS: &[&str] = &["read", "offset", "length", "file_size", "mapping", "cpu"];
const FAULT_KEYS: &[&str] = &["fault", "count", "madvised", "cpu"];
const ALLOC_KEYS: &[&str] = &[
    "alloc",
    "count",
    "order",
    "gfp",
    "cpu",
    "must_succeed",
    "kind",
    "nofs",
];
const COMPACT_KEYS: &[&str] = &["compact", "gfp", "priority", "cpu"];
const KCOMPACTD_KEYS: &[&str] = &["kcompactd"];
const FREE_KEYS: &[&str] = &["free", "every", "offset", "cpu"];
const PRINT_KEYS: &[&str] = &["print", "zone"];
const DRAIN_KEYS: &[&str] = &["drain_all_pages"];
const ALL_OP_KEYS: &[&str] = &[
    "alloc",
    "free",
    "print",
    "drain_all_pages",
    "compact_memory",
    "compact",
    "kcompactd",
    "proactive_compact",
    "fault",
    "kswapd",
    "write",
    "read",
    "offset",
    "length",
    "file_size",
    "mapping",
    "madvised",
    "kind",
    "nofs",
    "priority",
    "count",
    "order",
    "gfp",
    "cpu",
    "must_succeed",
    "every",
    "offset",
    "zone",
];
const PRINT_NAMES: &[&str] = &[
    "buddyinfo",
    "pagetypeinfo",
    "zoneinfo",
    "vmstat",
    "pageblocks",
    "trace",
    "summary",
    "folios",
    "compaction",
    "extfrag_index",
    "unusable_index",
];
const SIZE_FORM: &str =
    "expected bytes as an integer or a string like \"4GiB\"; units B, KiB, MiB, GiB, TiB or K, M, G, T";

type R<T> = Result<T, SpecError>;

/// The files the ops name, with their mapping kinds, in first-use order.
type Files = Vec<(String, crate::MappingKind)>;

/// Parses a memory size: `"<n>"` or `"<n><unit>"` with unit B, KiB, MiB, GiB, TiB or K, M, G, T
/// (case-insensitive; binary multiples; spaces allowed before the unit). The error is a message
/// that quotes `s`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim_start();
    if num.is_empty() {
        return Err(format!("{} is not a size ({SIZE_FORM})", quote(s)));
    }
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        "kb" | "mb" | "gb" | "tb" => {
            let fixed = format!("{num}{}iB", unit[..1].to_ascii_uppercase());
            return Err(format!(
                "{} is ambiguous (expected a binary unit: did you mean {}?)",
                quote(s),
                quote(&fixed)
            ));
        }
        _ => return Err(format!("{} is not a size ({SIZE_FORM})", quote(s))),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{} is too large", quote(s)))
}

pub(crate) fn parse_spec(text: &str, file: &str) -> R<Spec> {
    let cx = Cx {
        file,
        lines: Lines::new(text),
    };
    let root = tree::parse(text).map_err(|(pos, msg)| {
        SpecError::new(
            file,
            cx.lines.line(pos),
            None,
            format!("TOML syntax error (column {}): {msg}", cx.lines.column(pos)),
        )
    })?;
    let Val::Table(entries) = &root.val else {
        unreachable!("the root is a table")
    };
    let top = Tbl {
        path: String::new(),
        pos: 0,
        entries,
    };
    cx.check_keys(&top, TOP_KEYS)?;

    let name = cx.opt_str(&top, "name")?;
    let description = cx.opt_str(&top, "description")?;
    let machine = cx.machine(&top)?;
    let knobs = match top.get("knobs") {
        Some(e) => cx.knobs(cx.table(&e.node, "knobs")?)?,
        None => BTreeMap::new(),
    };
    let model = match top.get("model") {
        Some(e) => cx.model(&Tbl {
            path: "model".into(),
            pos: e.node.pos,
            entries: cx.table(&e.node, "model")?,
        })?,
        None => ModelSpec::default(),
    };
    let run = match top.get("run") {
        Some(e) => cx.run(&Tbl {
            path: "run".into(),
            pos: e.node.pos,
            entries: cx.table(&e.node, "run")?,
        })?,
        None => RunSpec::default(),
    };
    let (ops, files) = match top.get("op") {
        Some(e) => cx.ops(&e.node, &machine)?,
        None => (Vec::new(), Vec::new()),
    };
    let workload = match top.get("workload") {
        Some(e) => {
            if let Some(op) = top.get("op") {
                return Err(cx.err(
                    e.key_pos,
                    "workload",
                    format!(
                        "a spec has either [[op]]s (line {}) or a [workload], not both",
                        cx.lines.line(op.key_pos)
                    ),
                ));
            }
            Some(cx.workload(&Tbl {
                path: "workload".into(),
                pos: e.node.pos,
                entries: cx.table(&e.node, "workload")?,
            })?)
        }
        None => None,
    };
    let cost = match top.get("cost") {
        Some(e) => cx.cost(&Tbl {
            path: "cost".into(),
            pos: e.node.pos,
            entries: cx.table(&e.node, "cost")?,
        })?,
        None => BTreeMap::new(),
    };
    Ok(Spec {
        file: file.to_string(),
        name,
        description,
        machine,
        knobs,
        model,
        run,
        ops,
        workload,
        files,
        cost,
    })
}

struct Cx<'a> {
    file: &'a str,
    lines: Lines,
}

/// A table being validated: its key path for messages, position and entries.
struct Tbl<'n> {
    path: String,
    pos: usize,
    entries: &'n [Entry],
}

impl<'n> Tbl<'n> {
    fn get(&self, key: &str) -> Option<&'n Entry> {
        self.entries.iter().find(|e| e.key == key)
    }

    fn key(&self, key: &str) -> String {
        join(&self.path, key)
    }
}

impl Cx<'_> {
    fn err(&self, pos: usize, key: &str, msg: impl Into<String>) -> SpecError {
        SpecError::new(self.file, self.lines.line(pos), Some(key.to_string()), msg)
    }

    fn type_err(&self, node: &Node, key: &str, expected: &str) -> SpecError {
        self.err(
            node.pos,
            key,
            format!("expected {expected}, found {}", node.val.type_name()),
        )
    }

    /// The first key of `t` not in `allowed` is an error with a did-you-mean.
    fn check_keys(&self, t: &Tbl, allowed: &[&str]) -> R<()> {
        match t.entries.iter().find(|e| !allowed.contains(&e.key.as_str())) {
            Some(e) => Err(self.err(
                e.key_pos,
                &t.key(&e.key),
                format!("unknown key{}", hint(&e.key, allowed)),
            )),
            None => Ok(()),
        }
    }

    fn table<'n>(&self, node: &'n Node, key: &str) -> R<&'n [Entry]> {
        match &node.val {
            Val::Table(e) => Ok(e),
            _ => Err(self.type_err(node, key, "a table")),
        }
    }

    fn int(&self, node: &Node, key: &str) -> R<i64> {
        match node.val {
            Val::Int(v) => Ok(v),
            _ => Err(self.type_err(node, key, "an integer")),
        }
    }

    /// An integer in `lo..=hi`; `range` describes the range in the error.
    fn int_in(&self, node: &Node, key: &str, lo: i64, hi: i64, range: &str) -> R<i64> {
        let v = self.int(node, key)?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(self.err(node.pos, key, format!("{v} is out of range (expected {range})")))
        }
    }

    /// Optional integer key of `t` in `lo..=hi`, else `default`.
    fn opt_int(&self, t: &Tbl, k: &str, lo: i64, hi: i64, range: &str, default: i64) -> R<i64> {
        match t.get(k) {
            Some(e) => self.int_in(&e.node, &t.key(k), lo, hi, range),
            None => Ok(default),
        }
    }

    fn opt_bool(&self, t: &Tbl, k: &str, default: bool) -> R<bool> {
        match t.get(k) {
            Some(e) => match e.node.val {
                Val::Bool(b) => Ok(b),
                _ => Err(self.type_err(&e.node, &t.key(k), "a boolean")),
            },
            None => Ok(default),
        }
    }

    fn str<'n>(&self, node: &'n Node, key: &str) -> R<&'n str> {
        match &node.val {
            Val::Str(s) => Ok(s),
            _ => Err(self.type_err(node, key, "a string")),
        }
    }

    fn opt_str(&self, t: &Tbl, k: &str) -> R<Option<String>> {
        t.get(k)
            .map(|e| self.str(&e.node, &t.key(k)).map(str::to_string))
            .transpose()
    }

    /// Required entry `k` of `t`; `what` describes the expected value.
    fn need<'n>(&self, t: &Tbl<'n>, k: &str, what: &str) -> R<&'n Entry> {
        t.get(k)
            .ok_or_else(|| self.err(t.pos, &t.key(k), format!("missing (expected {what})")))
    }

    /// Items of an array of tables (`[[x]]` or `x = [{...}, ...]`), each checked to be a table.
    fn tables<'n>(&self, node: &'n Node, key: &str) -> R<Vec<(usize, &'n [Entry])>> {
        let Val::Array { items, .. } = &node.val else {
            let form = format!("an array of tables ([[{key}]])");
            return Err(self.type_err(node, key, &form));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, n)| Ok((n.pos, self.table(n, &format!("{key}[{i}]"))?)))
            .collect()
    }

    fn machine(&self, top: &Tbl) -> R<MachineSpec> {
        let Some(e) = top.get("machine") else {
            return Err(self.err(
                0,
                "machine",
                "missing table [machine] (expected memory = \"<size>\" or [[machine.zone]] tables)",
            ));
        };
        let m = Tbl {
            path: "machine".into(),
            pos: e.node.pos,
            entries: self.table(&e.node, "machine")?,
        };
        self.check_keys(&m, MACHINE_KEYS)?;
        let cpus = self.opt_int(&m, "cpus", 1, 256, "1..=256", 2)? as u32;
        let dma = self.opt_bool(&m, "dma", true)?;
        let swap_bytes = self.opt_size(&m, "swap", 0, 0)?;
        let hugetlb_pages = self.opt_int(&m, "hugetlb_pages", 0, 1 << 19, "0..=524288", 0)? as u64;
        match (m.get("memory"), m.get("zone")) {
            (Some(mem), Some(z)) => Err(self.err(
                z.key_pos,
                "machine.zone",
                format!(
                    "give either machine.memory (line {}) or [[machine.zone]] tables, not both",
                    self.lines.line(mem.key_pos)
                ),
            )),
            (None, None) => Err(self.err(
                m.pos,
                "machine.memory",
                "missing (expected a size such as \"4GiB\", or [[machine.zone]] tables)",
            )),
            (Some(mem), None) => {
                let memory = self.memory(&mem.node)?;
                Ok(MachineSpec {
                    memory_bytes: Some(memory),
                    cpus,
                    dma,
                    swap_bytes,
                    zones: None,
                    hugetlb_pages,
                })
            }
            (None, Some(z)) => {
                if let Some(d) = m.get("dma") {
                    return Err(self.err(
                        d.key_pos,
                        "machine.dma",
                        "only applies to the default layout (machine.memory); with \
                         [[machine.zone]] list a DMA zone or leave it out",
                    ));
                }
                let zones = self.zones(&z.node, z.key_pos)?;
                Ok(MachineSpec {
                    memory_bytes: None,
                    cpus,
                    dma: true,
                    swap_bytes,
                    zones: Some(zones),
                    hugetlb_pages,
                })
            }
        }
    }

    fn memory(&self, node: &Node) -> R<u64> {
        let key = "machine.memory";
        let (bytes, shown) = match &node.val {
            Val::Int(v) => (u64::try_from(*v).ok(), v.to_string()),
            Val::Str(s) => match parse_size(s) {
                Ok(b) => (Some(b), s.trim().to_string()),
                Err(msg) if msg.ends_with("too large") => (None, s.trim().to_string()),
                Err(msg) => return Err(self.err(node.pos, key, msg)),
            },
            _ => return Err(self.type_err(node, key, "a size (an integer or a string like \"4GiB\")")),
        };
        match bytes {
            Some(b) if b < MIN_MEMORY_BYTES => Err(self.err(
                node.pos,
                key,
                format!("{shown} is smaller than one pageblock (2 MiB)"),
            )),
            None if shown.starts_with('-') => Err(self.err(
                node.pos,
                key,
                format!("{shown} is smaller than one pageblock (2 MiB)"),
            )),
            Some(b) if b <= MAX_MEMORY_BYTES => Ok(b),
            _ => Err(self.err(
                node.pos,
                key,
                format!("{shown} is larger than the maximum (1 TiB)"),
            )),
        }
    }

    fn zones(&self, node: &Node, key_pos: usize) -> R<Vec<ZoneSpec>> {
        let items = self.tables(node, "machine.zone")?;
        if items.is_empty() {
            return Err(self.err(
                key_pos,
                "machine.zone",
                "no zones (expected at least one [[machine.zone]])",
            ));
        }
        let mut zones: Vec<(ZoneSpec, Tbl)> = Vec::new();
        for (i, (pos, entries)) in items.into_iter().enumerate() {
            let t = Tbl {
                path: format!("machine.zone[{i}]"),
                pos,
                entries,
            };
            self.check_keys(&t, ZONE_KEYS)?;
            let name = self.need(&t, "name", "a zone name: DMA, DMA32, Normal or Movable")?;
            let zname = self.str(&name.node, &t.key("name"))?;
            let zone = match ZoneType::from_name(zname) {
                Some(ZoneType::Device) => {
                    return Err(self.err(
                        name.node.pos,
                        &t.key("name"),
                        "ZONE_DEVICE cannot be configured (expected DMA, DMA32, Normal or Movable)",
                    ));
                }
                Some(z) => z,
                None => {
                    return Err(self.err(
                        name.node.pos,
                        &t.key("name"),
                        format!("unknown zone {}{}", quote(zname), hint(zname, ZONE_NAMES)),
                    ))
                }
            };
            let pfn_range = format!("0..={}", MAX_PFN - 1);
            let pfn = |k: &str| -> R<u64> {
                let e = self.need(&t, k, "a number of pages")?;
                Ok(self.int_in(&e.node, &t.key(k), 0, (MAX_PFN - 1) as i64, &pfn_range)? as u64)
            };
            let start_pfn = pfn("start_pfn")?;
            let spanned = pfn("spanned")?;
            let present = match t.get("present") {
                Some(_) => pfn("present")?,
                None => spanned,
            };
            let managed = match t.get("managed") {
                Some(_) => pfn("managed")?,
                None => present,
            };
            let at = |k: &str| t.get(k).map_or(t.pos, |e| e.node.pos);
            let z = ZoneSpec {
                zone,
                start_pfn,
                spanned,
                present,
                managed,
            };
            if z.end_pfn() > MAX_PFN {
                return Err(self.err(
                    at("spanned"),
                    &t.key("spanned"),
                    format!(
                        "the zone ends at pfn {:#x}, beyond the 32-bit pfn limit",
                        z.end_pfn()
                    ),
                ));
            }
            if present > spanned {
                return Err(self.err(
                    at("present"),
                    &t.key("present"),
                    format!("{present} is larger than spanned ({spanned})"),
                ));
            }
            if managed > present {
                return Err(self.err(
                    at("managed"),
                    &t.key("managed"),
                    format!("{managed} is larger than present ({present})"),
                ));
            }
            let limit = match zone {
                ZoneType::Dma => Some((MAX_DMA_PFN, "MAX_DMA_PFN, 16 MiB")),
                ZoneType::Dma32 => Some((MAX_DMA32_PFN, "MAX_DMA32_PFN, 4 GiB")),
                _ => None,
            };
            if let Some((max, what)) = limit {
                if spanned > 0 && z.end_pfn() > max {
                    return Err(self.err(
                        at("spanned"),
                        &t.key("spanned"),
                        format!(
                            "zone {} would end at pfn {:#x}, above pfn {max:#x} ({what})",
                            zone.name(),
                            z.end_pfn()
                        ),
                    ));
                }
            }
            if zone == ZoneType::Movable && present > 0 {
                return Err(self.err(at("present"), &t.key("present"), format!(
                    "{present}: ZONE_MOVABLE must be empty (expected present = 0; fraglab models no movablecore)"
                )));
            }
            for (prev, pt) in &zones {
                if prev.zone == zone {
                    return Err(self.err(
                        name.node.pos,
                        &t.key("name"),
                        format!("zone {} is listed twice (first as {})", zone.name(), pt.path),
                    ));
                }
                if prev.zone > zone {
                    return Err(self.err(name.node.pos, &t.key("name"), format!(
                        "zone {} is listed after {} (expected the kernel's order DMA, DMA32, Normal, Movable)",
                        zone.name(), prev.zone.name()
                    )));
                }
                if prev.spanned > 0 && spanned > 0 && start_pfn < prev.end_pfn() {
                    return Err(self.err(at("start_pfn"), &t.key("start_pfn"), format!(
                        "zone {} starts at pfn {start_pfn:#x}, below the end of zone {} (pfn {:#x}..{:#x}); zones go in increasing pfn order without overlap",
                        zone.name(), prev.zone.name(), prev.start_pfn, prev.end_pfn()
                    )));
                }
            }
            zones.push((z, t));
        }
        let managed: u64 = zones.iter().map(|(z, _)| z.managed).sum();
        if managed < PAGEBLOCK_NR_PAGES as u64 {
            return Err(self.err(key_pos, "machine.zone", format!(
                "the zones manage {managed} pages in total, less than one pageblock ({PAGEBLOCK_NR_PAGES} pages = 2 MiB)"
            )));
        }
        let present: u64 = zones.iter().map(|(z, _)| z.present).sum();
        if present * PAGE_SIZE > MAX_MEMORY_BYTES {
            return Err(self.err(
                key_pos,
                "machine.zone",
                format!("the zones have {present} present pages in total, more than the maximum (1 TiB)"),
            ));
        }
        Ok(zones.into_iter().map(|(z, _)| z).collect())
    }

    fn knobs(&self, entries: &[Entry]) -> R<BTreeMap<String, KnobValue>> {
        let mut flat = Vec::new();
        flatten(entries, "", &mut flat);
        let mut out = BTreeMap::new();
        let mut first_line: BTreeMap<&str, usize> = BTreeMap::new();
        for (name, key_pos, node) in flat {
            let key = join("knobs", &name);
            let Some(def) = find_knob(&name) else {
                let msg = match did_you_mean(&name, KNOBS.iter().map(|k| k.name)) {
                    Some(c) => format!("unknown knob (did you mean {}?)", quote(c)),
                    None => "unknown knob (`fraglab knobs` lists them)".to_string(),
                };
                return Err(self.err(key_pos, &key, msg));
            };
            if let Some(line) = first_line.insert(def.name, self.lines.line(key_pos)) {
                return Err(self.err(
                    key_pos,
                    &key,
                    format!("knob {} is set twice (first at line {line})", def.name),
                ));
            }
            let value = match def.kind {
                KnobKind::Int { .. } | KnobKind::ZeroOrInt { .. } => {
                    let v = self.int(node, &key)?;
                    if !def.kind.int_ok(v) {
                        return Err(self.err(
                            node.pos,
                            &key,
                            format!("{v} is out of range (expected {})", def.kind.expected()),
                        ));
                    }
                    KnobValue::Int(v)
                }
                KnobKind::Choice(words) => {
                    let s = self.str(node, &key)?;
                    if !words.contains(&s) {
                        let dym = did_you_mean(s, words.iter().copied())
                            .map(|c| format!(" (did you mean {}?)", quote(c)))
                            .unwrap_or_default();
                        return Err(self.err(
                            node.pos,
                            &key,
                            format!("{} is not {}{dym}", quote(s), def.kind.expected()),
                        ));
                    }
                    KnobValue::Str(s.to_string())
                }
                KnobKind::IntList { len, .. } => {
                    let values: Vec<i64> = match &node.val {
                        Val::Array { items, tables: false } => items
                            .iter()
                            .enumerate()
                            .map(|(i, n)| {
                                let k = format!("{key}[{i}]");
                                let v = self.int(n, &k)?;
                                if def.kind.int_ok(v) {
                                    Ok(v)
                                } else {
                                    Err(self.err(
                                        n.pos,
                                        &k,
                                        format!("{v} is out of range (expected {})", def.kind.expected()),
                                    ))
                                }
                            })
                            .collect::<R<_>>()?,
                        Val::Str(s) => {
                            let parsed: Option<Vec<i64>> =
                                s.split_whitespace().map(|w| w.parse().ok()).collect();
                            match parsed {
                                Some(v) if v.iter().all(|&x| def.kind.int_ok(x)) => v,
                                _ => {
                                    return Err(self.err(
                                        node.pos,
                                        &key,
                                        format!(
                                            "{} is not a valid list (expected {}, e.g. {})",
                                            quote(s),
                                            def.kind.expected(),
                                            quote(def.default)
                                        ),
                                    ))
                                }
                            }
                        }
                        _ => {
                            return Err(self.type_err(node, &key, "an array of integers or a string of them"))
                        }
                    };
                    if values.len() != len {
                        return Err(self.err(
                            node.pos,
                            &key,
                            format!("{} values given (expected {})", values.len(), def.kind.expected()),
                        ));
                    }
                    KnobValue::List(values)
                }
            };
            out.insert(def.name.to_string(), value);
        }
        Ok(out)
    }

    fn run(&self, t: &Tbl) -> R<RunSpec> {
        self.check_keys(t, RUN_KEYS)?;
        let seed = self.opt_int(t, "seed", 0, i64::MAX, ">= 0", 1)? as u64;
        let debug_vm = self.opt_bool(t, "debug_vm", false)?;
        let mut on = [false; TRACE_EVENTS.len()];
        if let Some(e) = t.get("trace") {
            let key = t.key("trace");
            let Val::Array { items, tables: false } = &e.node.val else {
                return Err(self.type_err(&e.node, &key, "an array of event names"));
            };
            let mut groups: Vec<String> = Vec::new();
            for ev in TRACE_EVENTS {
                let g = format!("{}*", &ev[..=ev.find(':').expect("group:event")]);
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
            let mut choices: Vec<&str> = TRACE_EVENTS.to_vec();
            choices.extend(groups.iter().map(String::as_str));
            for (i, n) in items.iter().enumerate() {
                let k = format!("{key}[{i}]");
                let name = self.str(n, &k)?;
                if let Some(group) = name
                    .strip_suffix('*')
                    .filter(|_| groups.iter().any(|g| g == name))
                {
                    for (j, ev) in TRACE_EVENTS.iter().enumerate() {
                        if ev.starts_with(group) {
                            on[j] = true;
                        }
                    }
                } else if let Some(j) = TRACE_EVENTS.iter().position(|&ev| ev == name) {
                    on[j] = true;
                } else {
                    return Err(self.err(
                        n.pos,
                        &k,
                        format!("unknown trace event {}{}", quote(name), hint(name, &choices)),
                    ));
                }
            }
        }
        let trace = TRACE_EVENTS
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(ev, _)| ev.split_once(':').map_or(*ev, |(_, n)| n).to_string())
            .collect();
        Ok(RunSpec {
            seed,
            debug_vm,
            trace,
        })
    }

    fn ops(&self, node: &Node, machine: &MachineSpec) -> R<(Vec<Op>, Files)> {
        let items = self.tables(node, "op")?;
        let mut sets: Vec<String> = Vec::new();
        let mut files: Vec<(String, crate::MappingKind)> = Vec::new();
        let mut ops = Vec::with_capacity(items.len());
        for (i, (pos, entries)) in items.into_iter().enumerate() {
            let t = Tbl {
                path: format!("op[{i}]"),
                pos,
                entries,
            };
            let line = self.lines.line(pos);
            self.check_keys(&t, ALL_OP_KEYS)?;
            let mut actions = entries.iter().filter(|e| ACTIONS.contains(&e.key.as_str()));
            let Some(action) = actions.next() else {
                return Err(self.err(
                    pos,
                    &t.path,
                    format!("no action (expected one of the keys {})", ACTIONS.join(", ")),
                ));
            };
            if let Some(second) = actions.next() {
                return Err(self.err(
                    second.key_pos,
                    &t.key(&second.key),
                    format!(
                        "an op has exactly one action, and this one already has {} (line {})",
                        action.key,
                        self.lines.line(action.key_pos)
                    ),
                ));
            }
            let allowed = match action.key.as_str() {
                "alloc" => ALLOC_KEYS,
                "free" => FREE_KEYS,
                "print" => PRINT_KEYS,
                "compact" => COMPACT_KEYS,
                "kcompactd" => KCOMPACTD_KEYS,
                "drain_all_pages" => DRAIN_KEYS,
                "compact_memory" => &["compact_memory"],
                "fault" => FAULT_KEYS,
                "write" => WRITE_KEYS,
                "read" => READ_KEYS,
                "kswapd" => &["kswapd"],
                _ => &["proactive_compact"],
            };
            if let Some(e) = entries.iter().find(|e| !allowed.contains(&e.key.as_str())) {
                let others: Vec<&str> = allowed.iter().copied().filter(|k| *k != action.key).collect();
                let msg = if others.is_empty() {
                    format!("not allowed in a {} op (it takes no other keys)", action.key)
                } else {
                    format!(
                        "not allowed in {} {} op (allowed: {})",
                        article(&action.key),
                        action.key,
                        others.join(", ")
                    )
                };
                return Err(self.err(e.key_pos, &t.key(&e.key), msg));
            }
            let cpu = || -> R<u32> {
                let hi = machine.cpus as i64 - 1;
                let range = format!("0..={hi}, machine.cpus = {}", machine.cpus);
                Ok(self.opt_int(&t, "cpu", 0, hi, &range, 0)? as u32)
            };
            let op = match action.key.as_str() {
                "alloc" => {
                    let key = t.key("alloc");
                    let set = self.str(&action.node, &key)?;
                    if set.is_empty() {
                        return Err(self.err(
                            action.node.pos,
                            &key,
                            "empty set name (expected a name such as \"a\")",
                        ));
                    }
                    let count = self.opt_int(&t, "count", 1, u32::MAX as i64, ">= 1", 1)? as u32;
                    let max = MAX_PAGE_ORDER as i64;
                    let order = self.opt_int(&t, "order", 0, max, &format!("0..={max}"), 0)? as u32;
                    let g = self.need(&t, "gfp", "a gfp mask such as \"GFP_KERNEL\"")?;
                    let gfp = self.gfp(&g.node, &t.key("gfp"))?;
                    let must_succeed = self.opt_bool(&t, "must_succeed", false)?;
                    let cpu = cpu()?;
                    let kind = match t.get("kind") {
                        None => FolioKindSpec::from_gfp(gfp),
                        Some(e) => {
                            let key = t.key("kind");
                            let k = self.str(&e.node, &key)?;
                            // The hugetlb pool is `[machine] hugetlb_pages`, not an op's folio.
                            let op_kinds = FolioKindSpec::ALL
                                .into_iter()
                                .filter(|x| *x != FolioKindSpec::Hugetlb);
                            let Some(x) = op_kinds.clone().find(|x| x.name() == k) else {
                                let kinds: Vec<&str> = op_kinds.map(|x| x.name()).collect();
                                return Err(self.err(
                                    e.node.pos,
                                    &key,
                                    format!("unknown folio kind {}{}", quote(k), hint(k, &kinds)),
                                ));
                            };
                            x
                        }
                    };
                    let nofs = match t.get("nofs") {
                        Some(e) if kind != FolioKindSpec::File => {
                            let why = match t.get("kind") {
                                Some(_) => String::new(),
                                None => format!(
                                    " (the default kind for gfp {})",
                                    quote(self.str(&g.node, "gfp")?.trim())
                                ),
                            };
                            return Err(self.err(
                                e.key_pos,
                                &t.key("nofs"),
                                format!(
                                    "only allowed with kind = \"file\", not {}{why}",
                                    quote(kind.name())
                                ),
                            ));
                        }
                        _ => self.opt_bool(&t, "nofs", false)?,
                    };
                    if !sets.iter().any(|s| s == set) {
                        sets.push(set.to_string());
                    }
                    Op::Alloc {
                        line,
                        set: set.to_string(),
                        count,
                        order,
                        gfp,
                        cpu,
                        must_succeed,
                        kind,
                        nofs,
                    }
                }
                "write" | "read" => {
                    let key = t.key(&action.key);
                    let file = self.str(&action.node, &key)?;
                    if file.is_empty() {
                        return Err(self.err(
                            action.node.pos,
                            &key,
                            "empty file name (expected a name such as \"wal\")",
                        ));
                    }
                    let kind = match t.get("mapping") {
                        None => None,
                        Some(e) => {
                            let k = t.key("mapping");
                            let v = self.str(&e.node, &k)?;
                            let names: Vec<&str> = crate::MappingKind::ALL.iter().map(|m| m.name()).collect();
                            match crate::MappingKind::ALL.into_iter().find(|m| m.name() == v) {
                                Some(m) => Some((m, e)),
                                None => {
                                    return Err(self.err(
                                        e.node.pos,
                                        &k,
                                        format!("unknown mapping {}{}", quote(v), hint(v, &names)),
                                    ))
                                }
                            }
                        }
                    };
                    match (files.iter().find(|(f, _)| f == file), kind) {
                        (None, k) => files.push((file.to_string(), k.map_or(crate::MappingKind::Xfs, |(m, _)| m))),
                        (Some((_, have)), Some((m, e))) if *have != m => {
                            return Err(self.err(
                                e.node.pos,
                                &t.key("mapping"),
                                format!(
                                    "file {} already has mapping {} (a file's mapping is set by the first op that names it)",
                                    quote(file),
                                    quote(have.name())
                                ),
                            ))
                        }
                        _ => {}
                    }
                    let offset = self.opt_size(&t, "offset", 0, 0)?;
                    self.need(&t, "length", "a size in bytes such as \"64KiB\"")?;
                    let length = self.opt_size(&t, "length", 1, 0)?;
                    if action.key == "write" {
                        Op::Write {
                            line,
                            file: file.to_string(),
                            offset,
                            length,
                            cpu: cpu()?,
                        }
                    } else {
                        let file_size = self.opt_size(&t, "file_size", 1, offset + length)?;
                        if file_size < offset + length {
                            let e = t.get("file_size").expect("an explicit file_size");
                            return Err(self.err(
                                e.node.pos,
                                &t.key("file_size"),
                                format!(
                                    "{file_size} bytes ends before the read (offset + length = {})",
                                    offset + length
                                ),
                            ));
                        }
                        Op::Read {
                            line,
                            file: file.to_string(),
                            offset,
                            length,
                            file_size,
                            cpu: cpu()?,
                        }
                    }
                }
                "fault" => {
                    let key = t.key("fault");
                    let set = self.str(&action.node, &key)?;
                    if set.is_empty() {
                        return Err(self.err(
                            action.node.pos,
                            &key,
                            "empty set name (expected a name such as \"thp\")",
                        ));
                    }
                    let count = self.opt_int(&t, "count", 1, u32::MAX as i64, ">= 1", 1)? as u32;
                    let madvised = self.opt_bool(&t, "madvised", false)?;
                    if !sets.iter().any(|s| s == set) {
                        sets.push(set.to_string());
                    }
                    Op::Fault {
                        line,
                        set: set.to_string(),
                        count,
                        madvised,
                        cpu: cpu()?,
                    }
                }
                "compact" | "kcompactd" => {
                    let key = t.key(&action.key);
                    let max = MAX_PAGE_ORDER as i64;
                    let order = self.int(&action.node, &key)?;
                    if order == 0 {
                        return Err(self.err(
                            action.node.pos,
                            &key,
                            "compaction is for order > 0 (expected 1..=10)",
                        ));
                    }
                    let order = self.int_in(&action.node, &key, 1, max, &format!("1..={max}"))? as u32;
                    if action.key == "kcompactd" {
                        Op::Kcompactd { line, order }
                    } else {
                        let gfp = match t.get("gfp") {
                            Some(g) => self.gfp(&g.node, &t.key("gfp"))?,
                            None => Gfp::GFP_TRANSHUGE,
                        };
                        let priority = match t.get("priority") {
                            None => CompactPriority::Async,
                            Some(e) => self.priority(&e.node, &t.key("priority"))?,
                        };
                        Op::Compact {
                            line,
                            order,
                            gfp,
                            priority,
                            cpu: cpu()?,
                        }
                    }
                }
                "free" => {
                    let key = t.key("free");
                    let set = self.str(&action.node, &key)?;
                    if !sets.iter().any(|s| s == set) {
                        let dym = did_you_mean(set, sets.iter().map(String::as_str))
                            .map(|c| format!("; did you mean {}?", quote(c)))
                            .unwrap_or_default();
                        return Err(self.err(action.node.pos, &key, format!(
                            "set {} is not allocated by any earlier op (expected the name of an earlier alloc{dym})",
                            quote(set)
                        )));
                    }
                    let every = self.opt_int(&t, "every", 1, u32::MAX as i64, ">= 1", 1)?;
                    let range = format!("0..={}, below every = {every}", every - 1);
                    let offset = self.opt_int(&t, "offset", 0, every - 1, &range, 0)? as u32;
                    Op::Free {
                        line,
                        set: set.to_string(),
                        every: every as u32,
                        offset,
                        cpu: cpu()?,
                    }
                }
                "print" => {
                    let key = t.key("print");
                    let s = self.str(&action.node, &key)?;
                    let Some(what) = PrintWhat::from_name(s) else {
                        return Err(self.err(
                            action.node.pos,
                            &key,
                            format!("unknown report {}{}", quote(s), hint(s, PRINT_NAMES)),
                        ));
                    };
                    let zone = match t.get("zone") {
                        None => None,
                        Some(e) if what != PrintWhat::Pageblocks => {
                            return Err(self.err(
                                e.key_pos,
                                &t.key("zone"),
                                format!("only allowed with print = \"pageblocks\", not {}", quote(s)),
                            ));
                        }
                        Some(e) => Some(self.print_zone(&e.node, &t.key("zone"), machine)?),
                    };
                    Op::Print { line, what, zone }
                }
                flag => {
                    match action.node.val {
                        Val::Bool(true) => {}
                        Val::Bool(false) => {
                            return Err(self.err(
                                action.node.pos,
                                &t.key(flag),
                                "false is not allowed (expected true; leave the op out instead)",
                            ))
                        }
                        _ => return Err(self.type_err(&action.node, &t.key(flag), "true")),
                    }
                    match flag {
                        "drain_all_pages" => Op::DrainAllPages { line },
                        "compact_memory" => Op::CompactMemory { line },
                        "kswapd" => Op::Kswapd { line },
                        _ => Op::ProactiveCompact { line },
                    }
                }
            };
            ops.push(op);
        }
        Ok((ops, files))
    }

    /// An optional size key (bytes, like machine.memory) of `t`, at least `min` bytes.
    fn opt_size(&self, t: &Tbl, k: &str, min: u64, default: u64) -> R<u64> {
        let Some(e) = t.get(k) else { return Ok(default) };
        let key = t.key(k);
        let v = match &e.node.val {
            Val::Int(v) if *v >= 0 => *v as u64,
            Val::Str(s) => parse_size(s).map_err(|m| self.err(e.node.pos, &key, m))?,
            _ => return Err(self.type_err(&e.node, &key, "a size (an integer or a string like \"4MiB\")")),
        };
        if v < min {
            return Err(self.err(
                e.node.pos,
                &key,
                format!("{v} bytes is below the minimum of {min}"),
            ));
        }
        Ok(v)
    }

    /// An optional duration key of `t` (a string like "500ms").
    fn opt_duration(&self, t: &Tbl, k: &str, min: u64, default: u64) -> R<u64> {
        let Some(e) = t.get(k) else { return Ok(default) };
        let key = t.key(k);
        let s = self.str(&e.node, &key)?;
        let v = crate::workload::parse_duration(s).map_err(|m| self.err(e.node.pos, &key, m))?;
        if v < min {
            return Err(self.err(
                e.node.pos,
                &key,
                format!("{} is below the minimum of {min} ns", quote(s)),
            ));
        }
        Ok(v)
    }

    fn workload(&self, t: &Tbl) -> R<crate::WorkloadSpec> {
        self.check_keys(t, WORKLOAD_KEYS)?;
        let duration_ns = self.opt_duration(t, "duration", 1, 3_600_000_000_000)?;
        let mut kbuild = Vec::new();
        if let Some(e) = t.get("kbuild") {
            for (i, (pos, entries)) in self.tables(&e.node, &t.key("kbuild"))?.into_iter().enumerate() {
                let k = Tbl {
                    path: format!("workload.kbuild[{i}]"),
                    pos,
                    entries,
                };
                self.check_keys(&k, KBUILD_KEYS)?;
                let n = |key: &str, d: i64| self.opt_int(&k, key, 1, 1 << 20, "1..=1048576", d);
                let source_bytes = self.opt_size(&k, "source", 4096, 256 << 20)?;
                // The default file size is 64 KiB, or the whole tree if it is smaller.
                let source_file_bytes = self.opt_size(&k, "source_file", 4096, source_bytes.min(64 << 10))?;
                if let Some(e) = k.get("source_file").filter(|_| source_file_bytes > source_bytes) {
                    return Err(self.err(
                        e.node.pos,
                        &k.key("source_file"),
                        format!("{source_file_bytes} bytes is larger than the tree (source = {source_bytes} bytes)"),
                    ));
                }
                kbuild.push(crate::KbuildParams {
                    line: self.lines.line(pos),
                    jobs_parallel: n("jobs_parallel", 4)? as u32,
                    jobs: n("jobs", 400)? as u32,
                    iterations: n("iterations", 1)? as u32,
                    job_anon_bytes: self.opt_size(&k, "job_anon", 4096, 8 << 20)?,
                    job_cpu_ns: self.opt_duration(&k, "job_cpu", 1, 200_000_000)?,
                    source_bytes,
                    job_read_bytes: self.opt_size(&k, "job_read", 0, 4 << 20)?,
                    job_slab_bytes: self.opt_size(&k, "job_slab", 0, 256 << 10)?,
                    job_obj_bytes: self.opt_size(&k, "job_obj", 0, 128 << 10)?,
                    source_file_bytes,
                    untar: self.opt_bool(&k, "untar", false)?,
                    trees: n("trees", 1)? as u32,
                });
            }
        }
        let mut thp_burst = Vec::new();
        if let Some(e) = t.get("thp_burst") {
            for (i, (pos, entries)) in self.tables(&e.node, &t.key("thp_burst"))?.into_iter().enumerate() {
                let b = Tbl {
                    path: format!("workload.thp_burst[{i}]"),
                    pos,
                    entries,
                };
                self.check_keys(&b, THP_BURST_KEYS)?;
                let size = self.opt_size(&b, "size", 2 << 20, 64 << 20)?;
                if size % (2 << 20) != 0 {
                    let e = b.get("size").expect("a size other than the default");
                    return Err(self.err(
                        e.node.pos,
                        &b.key("size"),
                        format!("{size} bytes is not a multiple of 2 MiB (a burst faults whole PMD ranges)"),
                    ));
                }
                thp_burst.push(crate::ThpBurstParams {
                    line: self.lines.line(pos),
                    interval_ns: self.opt_duration(&b, "interval", 1, 10_000_000_000)?,
                    size_bytes: size,
                    hold_ns: self.opt_duration(&b, "hold", 0, 1_000_000_000)?,
                    bursts: self.opt_int(&b, "bursts", 1, 1 << 20, "1..=1048576", 10)? as u32,
                    start_ns: self.opt_duration(&b, "start", 0, 0)?,
                    madvised: self.opt_bool(&b, "madvised", true)?,
                });
            }
        }
        let mut thpchallenge = Vec::new();
        if let Some(e) = t.get("thpchallenge") {
            for (i, (pos, entries)) in self
                .tables(&e.node, &t.key("thpchallenge"))?
                .into_iter()
                .enumerate()
            {
                let c = Tbl {
                    path: format!("workload.thpchallenge[{i}]"),
                    pos,
                    entries,
                };
                self.check_keys(&c, THPCHALLENGE_KEYS)?;
                let size = self.opt_size(&c, "size", 2 << 20, 256 << 20)?;
                if size % (2 << 20) != 0 {
                    let e = c.get("size").expect("a size other than the default");
                    return Err(self.err(
                        e.node.pos,
                        &c.key("size"),
                        format!("{size} bytes is not a multiple of 2 MiB (thpchallenge steps in whole PMD ranges)"),
                    ));
                }
                thpchallenge.push(crate::ThpChallengeParams {
                    line: self.lines.line(pos),
                    threads: self.opt_int(&c, "threads", 1, 4096, "1..=4096", 1)? as u32,
                    size_bytes: size,
                    madvised: self.opt_bool(&c, "madvised", true)?,
                    hold_ns: self.opt_duration(&c, "hold", 0, 0)?,
                    start_ns: self.opt_duration(&c, "start", 0, 0)?,
                });
            }
        }
        let mut pgbench = Vec::new();
        if let Some(e) = t.get("pgbench") {
            for (i, (pos, entries)) in self.tables(&e.node, &t.key("pgbench"))?.into_iter().enumerate() {
                let p = Tbl {
                    path: format!("workload.pgbench[{i}]"),
                    pos,
                    entries,
                };
                self.check_keys(&p, PGBENCH_KEYS)?;
                pgbench.push(crate::PgbenchParams {
                    line: self.lines.line(pos),
                    clients: self.opt_int(&p, "clients", 1, 65536, "1..=65536", 32)? as u32,
                    client_private_bytes: self.opt_size(&p, "client_private", 0, 4 << 20)?,
                    data_bytes: self.opt_size(&p, "data", 4096, 1 << 30)?,
                    wal_bytes: self.opt_size(&p, "wal", 4096, 64 << 20)?,
                    tx_cpu_ns: self.opt_duration(&p, "tx_cpu", 1, 200_000)?,
                    tx_data_bytes: self.opt_size(&p, "tx_data_write", 1, 8 << 10)?,
                    tx_wal_bytes: self.opt_size(&p, "tx_wal_write", 1, 8 << 10)?,
                    fpw_wal_bytes: self.opt_size(&p, "fpw_wal_write", 1, 64 << 10)?,
                    checkpoint_ns: self.opt_duration(&p, "checkpoint_interval", 1, 300_000_000_000)?,
                    checkpoint_bytes: self.opt_size(&p, "checkpoint_size", 4096, 256 << 20)?,
                    checkpoint_write_bytes: self.opt_size(&p, "checkpoint_write", 4096, 1 << 20)?,
                    checkpoint_spread_ns: self.opt_duration(&p, "checkpoint_spread", 0, 0)?,
                    duration_ns: self.opt_duration(&p, "duration", 1, 600_000_000_000)?,
                });
            }
        }
        let mut vm_scalability = Vec::new();
        if let Some(e) = t.get("vm_scalability") {
            for (i, (pos, entries)) in self
                .tables(&e.node, &t.key("vm_scalability"))?
                .into_iter()
                .enumerate()
            {
                let v = Tbl {
                    path: format!("workload.vm_scalability[{i}]"),
                    pos,
                    entries,
                };
                self.check_keys(&v, VMSCAL_KEYS)?;
                let names: Vec<&str> = crate::VmScalabilityCase::ALL.iter().map(|c| c.name()).collect();
                let ce = self.need(&v, "case", &format!("one of {}", names.join(", ")))?;
                let cs = self.str(&ce.node, &v.key("case"))?;
                let Some(case) = crate::VmScalabilityCase::ALL.into_iter().find(|c| c.name() == cs) else {
                    return Err(self.err(
                        ce.node.pos,
                        &v.key("case"),
                        format!("unknown vm-scalability case {}{}", quote(cs), hint(cs, &names)),
                    ));
                };
                let mapping = match v.get("mapping") {
                    None => crate::MappingKind::LargeFolios,
                    Some(e) => {
                        let k = v.key("mapping");
                        let m = self.str(&e.node, &k)?;
                        let names: Vec<&str> = crate::MappingKind::ALL.iter().map(|m| m.name()).collect();
                        crate::MappingKind::ALL
                            .into_iter()
                            .find(|x| x.name() == m)
                            .ok_or_else(|| {
                                self.err(
                                    e.node.pos,
                                    &k,
                                    format!("unknown mapping {}{}", quote(m), hint(m, &names)),
                                )
                            })?
                    }
                };
                vm_scalability.push(crate::VmScalabilityParams {
                    line: self.lines.line(pos),
                    case,
                    tasks: match v.get("tasks") {
                        Some(e) => Some(self.int_in(&e.node, &v.key("tasks"), 1, 4096, "1..=4096")? as u32),
                        None => None,
                    },
                    size_bytes: match v.get("size") {
                        Some(_) => Some(self.opt_size(&v, "size", 1 << 20, 0)?),
                        None => None,
                    },
                    unit_bytes: self.opt_size(&v, "unit", 4096, 10 * 4096)?,
                    runtime_ns: self.opt_duration(&v, "runtime", 1, 300_000_000_000)?,
                    start_ns: self.opt_duration(&v, "start", 0, 0)?,
                    mapping,
                });
            }
        }
        let mut fio_smallfiles = Vec::new();
        if let Some(e) = t.get("fio_smallfiles") {
            for (i, (pos, entries)) in self
                .tables(&e.node, &t.key("fio_smallfiles"))?
                .into_iter()
                .enumerate()
            {
                let f = Tbl {
                    path: format!("workload.fio_smallfiles[{i}]"),
                    pos,
                    entries,
                };
                self.check_keys(&f, FIO_KEYS)?;
                fio_smallfiles.push(crate::FioSmallFilesParams {
                    line: self.lines.line(pos),
                    jobs: self.opt_int(&f, "jobs", 1, 1024, "1..=1024", 2)? as u32,
                    file_size_bytes: self.opt_size(&f, "file_size", 4096, 16 << 10)?,
                    working_set_bytes: match f.get("working_set") {
                        Some(_) => Some(self.opt_size(&f, "working_set", 1 << 20, 0)?),
                        None => None,
                    },
                    start_ns: self.opt_duration(&f, "start", 0, 0)?,
                    runtime_ns: match f.get("runtime") {
                        Some(_) => Some(self.opt_duration(&f, "runtime", 1, 0)?),
                        None => None,
                    },
                });
            }
        }
        let mut task = Vec::new();
        if let Some(e) = t.get("task") {
            for (i, (pos, entries)) in self.tables(&e.node, &t.key("task"))?.into_iter().enumerate() {
                let k = Tbl {
                    path: format!("workload.task[{i}]"),
                    pos,
                    entries,
                };
                task.push(self.task(&k)?);
            }
        }
        if kbuild.is_empty()
            && thp_burst.is_empty()
            && thpchallenge.is_empty()
            && pgbench.is_empty()
            && vm_scalability.is_empty()
            && fio_smallfiles.is_empty()
            && task.is_empty()
        {
            return Err(self.err(
                t.pos,
                "workload",
                "no generator (expected [[workload.kbuild]], [[workload.thp_burst]], [[workload.thpchallenge]], [[workload.pgbench]], [[workload.vm_scalability]], [[workload.fio_smallfiles]] or [[workload.task]] tables)",
            ));
        }
        Ok(crate::WorkloadSpec {
            duration_ns,
            kbuild,
            thp_burst,
            thpchallenge,
            pgbench,
            vm_scalability,
            fio_smallfiles,
            task,
        })
    }

    /// One `[[workload.task]]`: its program of steps, each with exactly one action.
    fn task(&self, k: &Tbl) -> R<crate::TaskParams> {
        use crate::TaskStep;
        self.check_keys(k, TASK_KEYS)?;
        let name = self.opt_str(k, "name")?.unwrap_or_else(|| "task".into());
        let count = self.opt_int(k, "count", 1, 4096, "1..=4096", 1)? as u32;
        let start_ns = self.opt_duration(k, "start", 0, 0)?;
        let loops = self.opt_int(k, "loops", 1, 1 << 20, "1..=1048576", 1)? as u32;
        let se = self.need(
            k,
            "steps",
            "an array of steps such as [{ mmap = \"a\", size = \"64MiB\" }]",
        )?;
        let mut steps = Vec::new();
        let mut vmas: Vec<String> = Vec::new();
        for (j, (pos, entries)) in self.tables(&se.node, &k.key("steps"))?.into_iter().enumerate() {
            let s = Tbl {
                path: format!("{}.steps[{j}]", k.path),
                pos,
                entries,
            };
            let mut actions = entries.iter().filter(|e| STEP_ACTIONS.contains(&e.key.as_str()));
            let Some(a) = actions.next() else {
                return Err(self.err(
                    pos,
                    &s.path,
                    format!("no action (expected one of the keys {})", STEP_ACTIONS.join(", ")),
                ));
            };
            if let Some(b) = actions.next() {
                return Err(self.err(
                    b.key_pos,
                    &s.key(&b.key),
                    format!(
                        "a step has exactly one action, and this one already has {}",
                        a.key
                    ),
                ));
            }
            let allowed: &[&str] = match a.key.as_str() {
                "mmap" => &["mmap", "size", "madvise"],
                "touch" => &["touch", "pattern"],
                "dontneed" => &["dontneed", "offset", "length"],
                "read" => &["read", "offset", "length", "file_size", "pattern"],
                "write" => &["write", "offset", "length", "chunk"],
                "compute" | "sleep" => &["compute", "sleep"],
                other => std::slice::from_ref(STEP_ACTIONS.iter().find(|x| **x == other).expect("an action")),
            };
            self.check_keys(&s, allowed)?;
            let vma = |this: &Self, vmas: &[String]| -> R<String> {
                let v = this.str(&a.node, &s.key(&a.key))?;
                if !vmas.iter().any(|x| x == v) {
                    let dym = did_you_mean(v, vmas.iter().map(String::as_str))
                        .map(|c| format!("; did you mean {}?", quote(c)))
                        .unwrap_or_default();
                    return Err(this.err(
                        a.node.pos,
                        &s.key(&a.key),
                        format!("mapping {} is not created by an earlier mmap step{dym}", quote(v)),
                    ));
                }
                Ok(v.to_string())
            };
            let random = |this: &Self| -> R<bool> {
                match s.get("pattern") {
                    None => Ok(false),
                    Some(e) => match this.str(&e.node, &s.key("pattern"))? {
                        "sequential" => Ok(false),
                        "random" => Ok(true),
                        v => Err(this.err(
                            e.node.pos,
                            &s.key("pattern"),
                            format!("{} is not one of sequential, random", quote(v)),
                        )),
                    },
                }
            };
            let step = match a.key.as_str() {
                "mmap" => {
                    let v = self.str(&a.node, &s.key("mmap"))?.to_string();
                    if v.is_empty() {
                        return Err(self.err(a.node.pos, &s.key("mmap"), "empty mapping name"));
                    }
                    self.need(&s, "size", "a size such as \"64MiB\"")?;
                    let size_bytes = self.opt_size(&s, "size", 4096, 0)?;
                    vmas.push(v.clone());
                    TaskStep::Mmap {
                        vma: v,
                        size_bytes,
                        madvise: self.opt_bool(&s, "madvise", false)?,
                    }
                }
                "touch" => TaskStep::Touch {
                    vma: vma(self, &vmas)?,
                    random: random(self)?,
                },
                "dontneed" => {
                    let v = vma(self, &vmas)?;
                    self.need(&s, "length", "a size in bytes")?;
                    TaskStep::Dontneed {
                        vma: v,
                        offset: self.opt_size(&s, "offset", 0, 0)?,
                        length: self.opt_size(&s, "length", 1, 0)?,
                    }
                }
                "munmap" => {
                    let v = vma(self, &vmas)?;
                    vmas.retain(|x| *x != v);
                    TaskStep::Munmap { vma: v }
                }
                "compute" | "sleep" => {
                    let ns = self.opt_duration(&s, &a.key, 1, 0)?;
                    if a.key == "compute" {
                        TaskStep::Compute { ns }
                    } else {
                        TaskStep::Sleep { ns }
                    }
                }
                "read" | "write" => {
                    let file = self.str(&a.node, &s.key(&a.key))?.to_string();
                    if file.is_empty() {
                        return Err(self.err(a.node.pos, &s.key(&a.key), "empty file name"));
                    }
                    self.need(&s, "length", "a size in bytes such as \"1MiB\"")?;
                    let offset = self.opt_size(&s, "offset", 0, 0)?;
                    let length = self.opt_size(&s, "length", 1, 0)?;
                    if a.key == "read" {
                        TaskStep::Read {
                            file,
                            offset,
                            length,
                            file_size: self
                                .opt_size(&s, "file_size", 1, offset + length)?
                                .max(offset + length),
                            random: random(self)?,
                        }
                    } else {
                        TaskStep::Write {
                            file,
                            offset,
                            length,
                            chunk: self.opt_size(&s, "chunk", 4096, 1 << 20)?,
                        }
                    }
                }
                "delete" => {
                    let file = self.str(&a.node, &s.key("delete"))?.to_string();
                    if file.is_empty() {
                        return Err(self.err(a.node.pos, &s.key("delete"), "empty file name"));
                    }
                    TaskStep::Delete { file }
                }
                "slab" | "pipes" => {
                    let n = self.int_in(&a.node, &s.key(&a.key), 1, 1 << 30, "1..=2^30")? as u64;
                    TaskStep::Slab {
                        count: n,
                        reclaimable: a.key == "slab",
                    }
                }
                "compact_memory" | "drop_caches" => {
                    match a.node.val {
                        Val::Bool(true) => {}
                        _ => return Err(self.type_err(&a.node, &s.key(&a.key), "true")),
                    }
                    if a.key == "compact_memory" {
                        TaskStep::CompactMemory
                    } else {
                        TaskStep::DropCaches
                    }
                }
                _ => unreachable!("STEP_ACTIONS"),
            };
            steps.push(step);
        }
        if steps.is_empty() {
            return Err(self.err(se.key_pos, &k.key("steps"), "no steps (expected at least one)"));
        }
        Ok(crate::TaskParams {
            line: self.lines.line(k.pos),
            name,
            count,
            start_ns,
            loops,
            steps,
        })
    }

    fn cost(&self, t: &Tbl) -> R<BTreeMap<String, u64>> {
        self.check_keys(t, crate::COST_KEYS)?;
        let mut out = BTreeMap::new();
        for e in t.entries {
            let v = self.int_in(&e.node, &t.key(&e.key), 0, 1 << 40, "0..=2^40 ns")?;
            out.insert(e.key.clone(), v as u64);
        }
        Ok(out)
    }

    fn model(&self, t: &Tbl) -> R<ModelSpec> {
        let mut m = ModelSpec::default();
        for e in t.entries {
            let key = t.key(&e.key);
            let Some(def) = find_model_switch(&e.key) else {
                let names: Vec<&str> = MODEL_SWITCHES.iter().map(|d| d.name).collect();
                return Err(self.err(e.key_pos, &key, format!("unknown key{}", hint(&e.key, &names))));
            };
            // A switch whose choices are true and false takes a TOML boolean (or the word).
            let v = match e.node.val {
                Val::Bool(b) if def.choices == ["true", "false"] => {
                    if b {
                        "true"
                    } else {
                        "false"
                    }
                }
                _ => self.str(&e.node, &key)?,
            };
            if !def.choices.contains(&v) {
                let dym = did_you_mean(v, def.choices.iter().copied())
                    .map(|c| format!(" (did you mean {}?)", quote(c)))
                    .unwrap_or_default();
                return Err(self.err(
                    e.node.pos,
                    &key,
                    format!("{} is not {}{dym}", quote(v), def.expected()),
                ));
            }
            m.set(def.name, v)
                .expect("every choice in MODEL_SWITCHES is accepted by ModelSpec::set");
        }
        Ok(m)
    }

    fn priority(&self, node: &Node, key: &str) -> R<CompactPriority> {
        let p = self.str(node, key)?;
        match COMPACT_PRIORITIES.iter().find(|(n, _)| *n == p) {
            Some(&(_, prio)) => Ok(prio),
            None => {
                let names: Vec<&str> = COMPACT_PRIORITIES.iter().map(|(n, _)| *n).collect();
                Err(self.err(
                    node.pos,
                    key,
                    format!("unknown priority {}{}", quote(p), hint(p, &names)),
                ))
            }
        }
    }

    fn gfp(&self, node: &Node, key: &str) -> R<Gfp> {
        let s = self.str(node, key)?;
        if s.split('|').any(|p| p.trim().is_empty()) {
            return Err(self.err(node.pos, key, format!(
                "{} is not a gfp mask (expected kernel gfp names joined by |, e.g. \"GFP_KERNEL|__GFP_NORETRY\")",
                quote(s)
            )));
        }
        let gfp = Gfp::parse(s).map_err(|bad| {
            let names: Vec<&str> = Gfp::NAMES.iter().map(|(n, _)| *n).collect();
            let dym = match did_you_mean(&bad, names.iter().copied()) {
                Some(c) => format!(" (did you mean {}?)", quote(c)),
                None => {
                    " (expected kernel gfp names such as GFP_KERNEL, GFP_HIGHUSER_MOVABLE, __GFP_NORETRY)"
                        .to_string()
                }
            };
            self.err(node.pos, key, format!("unknown gfp flag {}{dym}", quote(&bad)))
        })?;
        let zone_bits = [Gfp::DMA, Gfp::DMA32, Gfp::HIGHMEM]
            .iter()
            .filter(|&&b| gfp.intersects(b))
            .count();
        if zone_bits > 1 {
            return Err(self.err(node.pos, key, format!(
                "{} combines zone modifiers (__GFP_DMA, __GFP_DMA32, __GFP_HIGHMEM), which selects no zone (GFP_ZONE_BAD)",
                quote(s)
            )));
        }
        if gfp.contains(Gfp(Gfp::MOVABLE.0 | Gfp::RECLAIMABLE.0)) {
            return Err(self.err(
                node.pos,
                key,
                format!(
                "{} has both __GFP_MOVABLE and __GFP_RECLAIMABLE, which is no migratetype (the kernel warns)",
                quote(s)
            ),
            ));
        }
        Ok(gfp)
    }

    fn print_zone(&self, node: &Node, key: &str, machine: &MachineSpec) -> R<ZoneType> {
        let s = self.str(node, key)?;
        let zone = match ZoneType::from_name(s) {
            Some(z) if z != ZoneType::Device => z,
            _ => {
                return Err(self.err(
                    node.pos,
                    key,
                    format!("unknown zone {}{}", quote(s), hint(s, ZONE_NAMES)),
                ))
            }
        };
        match &machine.zones {
            Some(zones) if !zones.iter().any(|z| z.zone == zone) => {
                let listed: Vec<&str> = zones.iter().map(|z| z.zone.name()).collect();
                Err(self.err(
                    node.pos,
                    key,
                    format!(
                        "zone {} is not in [[machine.zone]] (expected one of: {})",
                        zone.name(),
                        listed.join(", ")
                    ),
                ))
            }
            None if zone == ZoneType::Dma && !machine.dma => {
                Err(self.err(node.pos, key, "the machine has no DMA zone (machine.dma = false)"))
            }
            _ => Ok(zone),
        }
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// Knob names from nested tables: `vm = { swappiness = 1 }`, `vm.swappiness = 1` and
/// `[knobs.vm]` all become `vm.swappiness`.
fn flatten<'n>(entries: &'n [Entry], prefix: &str, out: &mut Vec<(String, usize, &'n Node)>) {
    for e in entries {
        let name = if prefix.is_empty() {
            e.key.clone()
        } else {
            format!("{prefix}.{}", e.key)
        };
        match &e.node.val {
            Val::Table(sub) => flatten(sub, &name, out),
            _ => out.push((name, e.key_pos, &e.node)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("4 gib"), Ok(4 << 30));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("3M"), Ok(3 << 20));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("4GB").unwrap_err().contains("did you mean \"4GiB\""));
        assert!(parse_size("GiB").unwrap_err().contains("not a size"));
        assert!(parse_size("1.5GiB").unwrap_err().contains("not a size"));
        assert!(parse_size("4 PiB").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999T").unwrap_err().contains("too large"));
    }
}
