//! Validation of the spanned tree into a [`Spec`]: the top level here, each table in a module of
//! its own. Every key's form, range and default come from its declaration in `crate::keys`.

mod damon;
mod knobs;
mod machine;
mod ops;
pub(crate) mod run;
mod task;
mod workload;

use std::collections::BTreeMap;

use fraglab_types::gfp::Gfp;
use fraglab_types::page::{ZoneType, MAX_PAGE_ORDER, PAGEBLOCK_NR_PAGES, PAGE_SIZE};

use crate::keys::{self, KeyDef, KeyDefault, KeyKind};
use crate::suggest::{did_you_mean, hint};
use crate::tree::{self, join, quote, Entry, Lines, Node, Val};
use crate::{DamonSpec, HostSpec, MachineSpec, ModelSpec, RunSpec, Spec, SpecError};

/// The smallest machine: one pageblock (2 MiB).
pub const MIN_MEMORY_BYTES: u64 = PAGEBLOCK_NR_PAGES as u64 * PAGE_SIZE;
/// The largest machine: 1 TiB.
pub const MAX_MEMORY_BYTES: u64 = 1 << 40;

/// The largest file size, and so the end of the furthest byte a `read` or `write` may touch:
/// the kernel's `MAX_LFS_FILESIZE` on 64-bit (include/linux/fs.h: `LLONG_MAX`, 8 EiB - 1). A
/// write at or past it fails with EFBIG in the kernel (`generic_write_check_limits`), a read
/// returns nothing (`filemap_read`); a spec asking for either is refused. The page cache holds
/// any page index below it at a cost bounded by the pages cached (mm's `xarray.rs`).
pub const MAX_LFS_FILESIZE: u64 = i64::MAX as u64;

/// How much work one op may ask for, relative to the machine: an `alloc` of `count` folios of
/// order `o` (`count << o` pages), a `fault` of `count` THPs (at least a page each) or a `read`
/// or `write` of `length` bytes may cover at most this many times the machine's pages plus its
/// swap. Past memory and swap the rest only repeats: every further allocation fails after a
/// full slow path (reclaim, compaction: ~7.6 µs each measured on a 256 MiB machine, so
/// 2^32 - 1 of them would run ~9 h) and every further page read or written evicts another
/// (~2.9 µs per page measured, a 1 TiB read on a 1 GiB machine ~13 min) — minutes to hours without a
/// new result. The bound scales with the machine, so a large run on a large machine is still
/// possible; not checked when the machine is a snapshot (its size is known only at boot).
pub const WORK_FACTOR: u64 = 16;

const ZONE_NAMES: &[&str] = &["DMA", "DMA32", "Normal", "Movable"];
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

/// Reads a spec file: an I/O error has line 0 (no line to name); bytes that are not UTF-8 (a
/// TOML file is UTF-8) are named by line and column, with the offending byte.
pub(crate) fn read_spec_file(path: &std::path::Path, file: &str) -> R<String> {
    let bytes = std::fs::read(path)
        .map_err(|e| SpecError::new(file, 0, None, format!("cannot read the spec: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        let line_start = bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
        // The column in characters, as TOML syntax errors count it.
        let column = 1 + String::from_utf8_lossy(&bytes[line_start..at]).chars().count();
        SpecError::new(
            file,
            line,
            None,
            format!(
                "not UTF-8 (column {column}: byte 0x{:02X}); a spec is a TOML file, which is UTF-8",
                bytes[at]
            ),
        )
    })
}

/// The largest spec file: 8 MiB, 60 times the largest in the repository (experiments/
/// validation/thpscale.toml, 130 KiB). Parsing keeps toml_edit's document (every key and value
/// with its span and formatting) and the spanned tree built from it (`tree.rs`) side by side,
/// about 40 bytes of memory per byte of spec: a 50 MB spec of 1 M small ops peaked at 2.0 GB
/// (`/usr/bin/time -v fraglab run`, refused at its last op, 27 s), a 5 MB one at 205 MB
/// including its run.
pub const MAX_SPEC_BYTES: usize = 8 << 20;

pub(crate) fn parse_spec(text: &str, file: &str) -> R<Spec> {
    let cx = Cx {
        file,
        lines: Lines::new(text),
        task_files: Default::default(),
        warnings: Default::default(),
        memory: Default::default(),
        nodes: std::cell::Cell::new(1),
    };
    if text.len() > MAX_SPEC_BYTES {
        return Err(SpecError::new(
            file,
            cx.lines.line(MAX_SPEC_BYTES),
            None,
            format!(
                "the spec is {} bytes, more than the {MAX_SPEC_BYTES} (8 MiB) a spec may be: parsing \
                 needs about 40 bytes of memory per byte (this line is where the limit falls)",
                text.len()
            ),
        ));
    }
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
        keys: keys::TOP,
    };
    cx.check_keys(&top)?;

    let name = cx.opt_str(&top, "name")?;
    let description = cx.opt_str(&top, "description")?;
    let machine = cx.machine(&top)?;
    cx.memory.set(machine_bytes(&machine));
    // A snapshot's node count is known when it boots (the boot checks the bindings then).
    cx.nodes.set(if machine.snapshot.is_some() {
        fraglab_types::numa::MAX_NODES
    } else {
        machine.nodes.len().max(1) as u32
    });
    let knobs = match top.get("knobs") {
        Some(e) => cx.knobs(cx.table(&e.node, "knobs")?)?,
        None => BTreeMap::new(),
    };
    let model = match cx.sub(&top, "model", &[])? {
        Some(t) => cx.model(&t)?,
        None => ModelSpec::default(),
    };
    let (run, scale) = match cx.sub(&top, "run", keys::RUN)? {
        Some(t) => cx.run(&t)?,
        None => (RunSpec::default(), None),
    };
    let host = match cx.sub(&top, "host", keys::HOST)? {
        Some(t) => cx.host(&t)?,
        None => HostSpec::default(),
    };
    let damon = match cx.sub(&top, "damon", keys::DAMON)? {
        Some(t) => cx.damon(&t)?,
        None => DamonSpec::default(),
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
            let t = cx.sub(&top, "workload", keys::WORKLOAD)?.expect("present");
            Some(cx.workload(&t)?)
        }
        None => None,
    };
    if workload.is_none() {
        // A checkpoint is the state of a timed run at a simulated time: a spec of [[op]]s has
        // neither.
        let given = [
            machine
                .checkpoint
                .as_ref()
                .map(|c| (c.line, "machine.checkpoint")),
            run.checkpoint.as_ref().map(|c| (c.line, "run.checkpoint_at")),
        ];
        if let Some((line, key)) = given.into_iter().flatten().next() {
            return Err(SpecError::new(
                file,
                line,
                Some(key.to_string()),
                "checkpoints are of timed runs: this spec has no [workload]",
            ));
        }
    }
    let cost = match cx.sub(&top, "cost", &[])? {
        Some(t) => cx.cost(&t)?,
        None => BTreeMap::new(),
    };
    let spec = Spec {
        file: file.to_string(),
        name,
        description,
        machine,
        knobs,
        model,
        run,
        host,
        damon,
        ops,
        workload,
        files,
        cost,
        warnings: cx.warnings.into_inner(),
    };
    match scale {
        None => Ok(spec),
        Some((k, line)) => crate::scale::scale_spec(&spec, k, line),
    }
}

/// What the machine holds, for warnings: (memory in bytes — `memory`, or the zones' managed
/// pages —, swap in bytes); `None` with a snapshot (its size is known only once read).
fn machine_bytes(m: &MachineSpec) -> Option<(u64, u64)> {
    let mem = match (&m.zones, m.memory_bytes) {
        (Some(zones), _) => zones.iter().map(|z| z.managed).sum::<u64>() * PAGE_SIZE,
        (None, Some(b)) => b,
        (None, None) => return None,
    };
    Some((mem, m.swap_bytes))
}

/// `n` bytes in the largest binary unit that divides it, for warnings (`3 GiB`, `1536 KiB`).
pub(crate) fn show_bytes(n: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

struct Cx<'a> {
    file: &'a str,
    lines: Lines,
    /// The files and file sets task steps have named so far: name, whether a set (`files`
    /// steps), its mapping kind once a read, write or files step set it, and that step's line.
    task_files: std::cell::RefCell<Vec<task::NamedFile>>,
    /// What the spec asks for that is accepted but will not do what it seems to ([`Spec::warnings`]).
    warnings: std::cell::RefCell<Vec<SpecError>>,
    /// The machine's memory and swap in bytes ([`machine_bytes`]), once `[machine]` is read.
    memory: std::cell::Cell<Option<(u64, u64)>>,
    /// The machine's NUMA nodes, once `[machine]` is read (1 until then).
    nodes: std::cell::Cell<u32>,
}

/// A table being validated: its key path for messages, position, entries and declared keys.
struct Tbl<'n> {
    path: String,
    pos: usize,
    entries: &'n [Entry],
    keys: &'static [KeyDef],
}

impl<'n> Tbl<'n> {
    fn get(&self, key: &str) -> Option<&'n Entry> {
        self.entries.iter().find(|e| e.key == key)
    }

    fn key(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The declaration of key `k` (which the parser only asks for if it is declared).
    fn def(&self, k: &str) -> &'static KeyDef {
        keys::find(self.keys, k)
    }
}

impl Cx<'_> {
    fn err(&self, pos: usize, key: &str, msg: impl Into<String>) -> SpecError {
        SpecError::new(self.file, self.lines.line(pos), Some(key.to_string()), msg)
    }

    /// Records a warning about the key at `pos` (printed by the command line, one line each).
    fn warn(&self, pos: usize, key: &str, msg: impl Into<String>) {
        self.warnings.borrow_mut().push(self.err(pos, key, msg));
    }

    fn type_err(&self, node: &Node, key: &str, expected: &str) -> SpecError {
        self.err(
            node.pos,
            key,
            format!("expected {expected}, found {}", node.val.type_name()),
        )
    }

    /// The first key of `t` not declared for it is an error with a did-you-mean.
    fn check_keys(&self, t: &Tbl) -> R<()> {
        self.check_keys_in(t, &keys::names(t.keys))
    }

    /// The first key of `t` not in `allowed` is an error with a did-you-mean.
    fn check_keys_in(&self, t: &Tbl, allowed: &[&str]) -> R<()> {
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

    /// The table under key `k` of `top`, if given, with the keys declared for it.
    fn sub<'n>(&self, top: &Tbl<'n>, k: &str, keys: &'static [KeyDef]) -> R<Option<Tbl<'n>>> {
        let Some(e) = top.get(k) else { return Ok(None) };
        Ok(Some(Tbl {
            path: top.key(k),
            pos: e.node.pos,
            entries: self.table(&e.node, k)?,
            keys,
        }))
    }

    /// The items of the array of tables under key `k` of `t` (none if absent), each with the
    /// keys declared for it (the caller checks them, item by item).
    fn items<'n>(&self, t: &Tbl<'n>, k: &str, keys: &'static [KeyDef]) -> R<Vec<Tbl<'n>>> {
        let Some(e) = t.get(k) else { return Ok(Vec::new()) };
        let path = t.key(k);
        let mut out = Vec::new();
        for (i, (pos, entries)) in self.tables(&e.node, &path)?.into_iter().enumerate() {
            let item = Tbl {
                path: format!("{path}[{i}]"),
                pos,
                entries,
                keys,
            };
            out.push(item);
        }
        Ok(out)
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
        } else if v > hi && !range.contains("..=") && !range.contains(&hi.to_string()) {
            // A range such as ">= 1" does not say where it ends: name the real limit.
            Err(self.err(
                node.pos,
                key,
                format!("{v} is out of range (expected {range}, at most {hi})"),
            ))
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

    /// Required entry `k` of `t`, with the "missing" message of its declaration.
    fn need_key<'n>(&self, t: &Tbl<'n>, k: &str) -> R<&'n Entry> {
        match t.def(k).default {
            KeyDefault::Required(what) => self.need(t, k, what),
            d => panic!("spec key {k} is declared with default {d:?}, not as required"),
        }
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

    /// The value of declared key `k` if given, or its declared default; a required key's
    /// absence is its "missing" error. `pick` takes the default of the key's kind.
    fn or_default<T>(&self, t: &Tbl, k: &str, v: Option<T>, pick: fn(KeyDefault) -> Option<T>) -> R<T> {
        match (v, t.def(k).default) {
            (Some(v), _) => Ok(v),
            (None, KeyDefault::Required(what)) => {
                Err(self.err(t.pos, &t.key(k), format!("missing (expected {what})")))
            }
            (None, d) => Ok(pick(d).unwrap_or_else(|| panic!("spec key {k}: default {d:?} is not a value"))),
        }
    }

    /// Declared integer key `k` of `t`, if given, checked against its range.
    fn opt_int_key(&self, t: &Tbl, k: &str) -> R<Option<i64>> {
        let KeyKind::Int { lo, hi, range } = t.def(k).kind else {
            panic!("spec key {k} is not declared as an integer")
        };
        t.get(k)
            .map(|e| self.int_in(&e.node, &t.key(k), lo, hi, range))
            .transpose()
    }

    /// Declared integer key `k` of `t`, or its default.
    fn int_key(&self, t: &Tbl, k: &str) -> R<i64> {
        let v = self.opt_int_key(t, k)?;
        self.or_default(t, k, v, |d| match d {
            KeyDefault::Int(v) => Some(v),
            _ => None,
        })
    }

    /// Declared boolean key `k` of `t`, or its default.
    fn bool_key(&self, t: &Tbl, k: &str) -> R<bool> {
        assert_eq!(
            t.def(k).kind,
            KeyKind::Bool,
            "spec key {k} is not declared as a boolean"
        );
        let v = match t.get(k) {
            Some(e) => match e.node.val {
                Val::Bool(b) => Some(b),
                _ => return Err(self.type_err(&e.node, &t.key(k), "a boolean")),
            },
            None => None,
        };
        self.or_default(t, k, v, |d| match d {
            KeyDefault::Bool(b) => Some(b),
            _ => None,
        })
    }

    /// Declared size key `k` of `t` (bytes, like machine.memory), if given, checked against its
    /// minimum.
    fn opt_size_key(&self, t: &Tbl, k: &str) -> R<Option<u64>> {
        let KeyKind::Size { min } = t.def(k).kind else {
            panic!("spec key {k} is not declared as a size")
        };
        let Some(e) = t.get(k) else { return Ok(None) };
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
        Ok(Some(v))
    }

    /// The byte range `offset..offset + length` that a read or write of `t` (keys `offset`
    /// and `length`) touches ends at or before [`MAX_LFS_FILESIZE`]; `what` names the access.
    fn file_range(&self, t: &Tbl, what: &str, offset: u64, length: u64) -> R<()> {
        let limit = "MAX_LFS_FILESIZE = 2^63 - 1 bytes (include/linux/fs.h), the largest file offset the model supports";
        if offset >= MAX_LFS_FILESIZE {
            let e = t.get("offset").expect("an offset past 0 is given");
            return Err(self.err(
                e.node.pos,
                &t.key("offset"),
                format!("a {what} at byte {offset} starts at or past the end of the largest file, {limit}"),
            ));
        }
        if length > MAX_LFS_FILESIZE - offset {
            let e = t.get("length").expect("a length past 0 is given");
            return Err(self.err(
                e.node.pos,
                &t.key("length"),
                format!(
                    "a {what} of {length} bytes at byte {offset} ends past {limit} (at most {} bytes here)",
                    MAX_LFS_FILESIZE - offset
                ),
            ));
        }
        Ok(())
    }

    /// A `file_size` of `t` is at most [`MAX_LFS_FILESIZE`].
    fn max_file_size(&self, t: &Tbl, size: u64) -> R<()> {
        if size <= MAX_LFS_FILESIZE {
            return Ok(());
        }
        let e = t
            .get("file_size")
            .expect("only an explicit file_size can be that large");
        Err(self.err(
            e.node.pos,
            &t.key("file_size"),
            format!(
                "{size} bytes is past MAX_LFS_FILESIZE = 2^63 - 1 bytes (include/linux/fs.h), the largest file the model supports"
            ),
        ))
    }

    /// Declared size key `k` of `t`, or its default.
    fn size_key(&self, t: &Tbl, k: &str) -> R<u64> {
        let v = self.opt_size_key(t, k)?;
        self.or_default(t, k, v, |d| match d {
            KeyDefault::Bytes(b) => Some(b),
            _ => None,
        })
    }

    /// Declared duration key `k` of `t` (a string like "500ms"), if given, checked against its
    /// minimum.
    fn opt_duration_key(&self, t: &Tbl, k: &str) -> R<Option<u64>> {
        let KeyKind::Duration { min } = t.def(k).kind else {
            panic!("spec key {k} is not declared as a duration")
        };
        let Some(e) = t.get(k) else { return Ok(None) };
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
        Ok(Some(v))
    }

    /// A file path under key `key` (`e` its entry): not empty, and resolved relative to the
    /// spec file's directory. Returns (as written, resolved).
    fn path_value(&self, e: &Entry, key: &str, what: &str) -> R<(String, std::path::PathBuf)> {
        let path = self.str(&e.node, key)?;
        if path.trim().is_empty() {
            return Err(self.err(
                e.node.pos,
                key,
                format!("an empty path (expected the path of {what})"),
            ));
        }
        let dir = std::path::Path::new(self.file)
            .parent()
            .unwrap_or(std::path::Path::new(""));
        Ok((path.to_string(), dir.join(path)))
    }

    /// Declared duration key `k` of `t`, or its default.
    fn duration_key(&self, t: &Tbl, k: &str) -> R<u64> {
        let v = self.opt_duration_key(t, k)?;
        self.or_default(t, k, v, |d| match d {
            KeyDefault::Ns(ns) => Some(ns),
            _ => None,
        })
    }

    /// A word of `choices` under declared key `k` of `t`, if given; an unknown word is
    /// "unknown `what` ..." with a did-you-mean.
    fn opt_word<T: Copy>(&self, t: &Tbl, k: &str, what: &str, choices: &[(&str, T)]) -> R<Option<T>> {
        let _ = t.def(k); // a declared key
        let Some(e) = t.get(k) else { return Ok(None) };
        let key = t.key(k);
        let v = self.str(&e.node, &key)?;
        match choices.iter().find(|(n, _)| *n == v) {
            Some(&(_, x)) => Ok(Some(x)),
            None => {
                let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                Err(self.err(
                    e.node.pos,
                    &key,
                    format!("unknown {what} {}{}", quote(v), hint(v, &names)),
                ))
            }
        }
    }

    /// The `mapping` key of `t` (a [`crate::MappingKind`] name), if given.
    fn opt_mapping<'n>(&self, t: &Tbl<'n>) -> R<Option<(crate::MappingKind, &'n Entry)>> {
        let kinds: Vec<(&str, crate::MappingKind)> =
            crate::MappingKind::ALL.iter().map(|m| (m.name(), *m)).collect();
        let v = self.opt_word(t, "mapping", "mapping", &kinds)?;
        Ok(v.map(|m| (m, t.get("mapping").expect("given"))))
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
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
