//! `[[op]]`: the operations of a timeless run, each with exactly one action.

use super::*;
use crate::{
    FolioKindSpec, KcompactdMode, MappingKind, Op, PrintWhat, ProactiveMode, COMPACT_PRIORITIES,
    KCOMPACTD_MODES, PROACTIVE_MODES,
};
use fraglab_types::page::MAX_PAGE_ORDER;
use fraglab_types::switches::CompactPriority;

/// What the ops before the current one named: the sets allocated or faulted, the files.
#[derive(Default)]
struct Named {
    sets: Vec<String>,
    files: Files,
}

impl Named {
    fn add_set(&mut self, set: &str) {
        if !self.sets.iter().any(|s| s == set) {
            self.sets.push(set.to_string());
        }
    }
}

impl Cx<'_> {
    pub(super) fn ops(&self, node: &Node, machine: &MachineSpec) -> R<(Vec<Op>, Files)> {
        let items = self.tables(node, "op")?;
        let mut named = Named::default();
        let mut ops = Vec::with_capacity(items.len());
        let all_keys = keys::all_op_keys();
        let actions = keys::actions(keys::OPS);
        for (i, (pos, entries)) in items.into_iter().enumerate() {
            let mut t = Tbl {
                path: format!("op[{i}]"),
                pos,
                entries,
                keys: &[],
            };
            self.check_keys_in(&t, &all_keys)?;
            let action = self.action(&t, &actions)?;
            t.keys = keys::OPS
                .iter()
                .find(|k| k[0].name == action.key)
                .expect("an action");
            self.op_keys(&t, &action.key)?;
            let op = self.op(&t, action, machine, &mut named)?;
            ops.push(op);
        }
        Ok((ops, named.files))
    }

    /// The one action of op `t`.
    fn action<'n>(&self, t: &Tbl<'n>, actions: &[&str]) -> R<&'n Entry> {
        let mut found = t.entries.iter().filter(|e| actions.contains(&e.key.as_str()));
        let Some(action) = found.next() else {
            return Err(self.err(
                t.pos,
                &t.path,
                format!("no action (expected one of the keys {})", actions.join(", ")),
            ));
        };
        if let Some(second) = found.next() {
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
        Ok(action)
    }

    /// Every key of op `t` is one its action takes.
    fn op_keys(&self, t: &Tbl, action: &str) -> R<()> {
        let Some(e) = t.entries.iter().find(|e| !t.keys.iter().any(|k| k.name == e.key)) else {
            return Ok(());
        };
        let others: Vec<&str> = t.keys[1..].iter().map(|k| k.name).collect();
        let msg = if others.is_empty() {
            format!("not allowed in a {action} op (it takes no other keys)")
        } else {
            format!(
                "not allowed in {} {action} op (allowed: {})",
                article(action),
                others.join(", ")
            )
        };
        Err(self.err(e.key_pos, &t.key(&e.key), msg))
    }

    fn op(&self, t: &Tbl, action: &Entry, machine: &MachineSpec, named: &mut Named) -> R<Op> {
        let line = self.lines.line(t.pos);
        Ok(match action.key.as_str() {
            "alloc" => self.op_alloc(t, action, line, machine, named)?,
            "write" | "read" => self.op_file(t, action, line, machine, named)?,
            "fault" => {
                let set = self.set_name(t, action, "thp")?;
                named.add_set(set);
                Op::Fault {
                    line,
                    set: set.to_string(),
                    count: self.op_count(t, 0, "faults (each takes at least a page)", machine)?,
                    madvised: self.bool_key(t, "madvised")?,
                    cpu: self.cpu(t, machine)?,
                }
            }
            "compact" | "kcompactd" => self.op_compact(t, action, line, machine)?,
            "free" => self.op_free(t, action, line, machine, named)?,
            "print" => self.op_print(t, action, line, machine)?,
            "nr_hugepages" => Op::NrHugepages {
                line,
                count: self.int_key(t, "nr_hugepages")? as u64,
            },
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
                    "page_reporting" => Op::PageReporting { line },
                    _ => Op::ProactiveCompact {
                        line,
                        mode: self
                            .opt_word(t, "mode", "mode", PROACTIVE_MODES)?
                            .unwrap_or(ProactiveMode::Timer),
                    },
                }
            }
        })
    }

    /// The machine's pages plus its swap's, when the spec gives its size (not a snapshot's).
    fn machine_pages(machine: &MachineSpec) -> Option<u64> {
        let ram = match (&machine.zones, machine.memory_bytes) {
            (Some(zones), _) => zones.iter().map(|z| z.present).sum(),
            (None, Some(bytes)) => bytes / PAGE_SIZE,
            (None, None) => return None,
        };
        Some(ram + machine.swap_bytes / PAGE_SIZE)
    }

    /// The `count` of an `alloc` or `fault` op (`what` names its items, each at least
    /// `1 << order` pages): at most [`WORK_FACTOR`] times the machine's pages plus swap (see
    /// there why), and at most `u32::MAX`.
    fn op_count(&self, t: &Tbl, order: u32, what: &str, machine: &MachineSpec) -> R<u32> {
        let count = self.int_key(t, "count")? as u64;
        let Some(e) = t.get("count") else {
            return Ok(count as u32);
        };
        let key = t.key("count");
        if let Some(pages) = Self::machine_pages(machine) {
            let max = ((WORK_FACTOR * pages) >> order).max(1);
            if count > max && max < u32::MAX as u64 {
                return Err(self.err(
                    e.node.pos,
                    &key,
                    format!(
                        "{count} {what} is more than the machine can hold {WORK_FACTOR} times over \
                         ({pages} pages of memory and swap): past them every allocation fails \
                         after a full slow path, minutes to hours of work with no new result \
                         (at most {max} here; a larger machine takes more)"
                    ),
                ));
            }
        }
        if count > u32::MAX as u64 {
            return Err(self.err(
                e.node.pos,
                &key,
                format!("{count} is out of range (expected >= 1, at most {})", u32::MAX),
            ));
        }
        Ok(count as u32)
    }

    /// The `length` of a `read` or `write` op: at most [`WORK_FACTOR`] times the machine's
    /// memory plus swap (see there why).
    fn op_length(&self, t: &Tbl, action: &str, length: u64, machine: &MachineSpec) -> R<()> {
        let Some(pages) = Self::machine_pages(machine) else {
            return Ok(());
        };
        let max = WORK_FACTOR * pages * PAGE_SIZE;
        if length <= max {
            return Ok(());
        }
        let e = t.get("length").expect("a required length");
        Err(self.err(
            e.node.pos,
            &t.key("length"),
            format!(
                "a {action} of {length} bytes is more than {WORK_FACTOR} times the machine's memory \
                 and swap ({} bytes): past them every page {action} evicts another, minutes to \
                 hours of work with no new result (at most {max} bytes here; a larger machine \
                 takes more)",
                pages * PAGE_SIZE
            ),
        ))
    }

    /// The `cpu` key of op `t`: a CPU of the machine, default 0.
    fn cpu(&self, t: &Tbl, machine: &MachineSpec) -> R<u32> {
        // Declared in keys::OPS; its range depends on machine.cpus, so it is checked here.
        let _ = t.def("cpu");
        let hi = machine.cpus as i64 - 1;
        let range = format!("0..={hi}, machine.cpus = {}", machine.cpus);
        Ok(self.opt_int(t, "cpu", 0, hi, &range, 0)? as u32)
    }

    /// The non-empty set name of an alloc or fault `action`; `example` is the error's example.
    fn set_name<'n>(&self, t: &Tbl, action: &'n Entry, example: &str) -> R<&'n str> {
        let key = t.key(&action.key);
        let set = self.str(&action.node, &key)?;
        if set.is_empty() {
            return Err(self.err(
                action.node.pos,
                &key,
                format!("empty set name (expected a name such as \"{example}\")"),
            ));
        }
        Ok(set)
    }

    fn op_alloc(
        &self,
        t: &Tbl,
        action: &Entry,
        line: usize,
        machine: &MachineSpec,
        named: &mut Named,
    ) -> R<Op> {
        let set = self.set_name(t, action, "a")?;
        let order = self.int_key(t, "order")? as u32;
        let count = self.op_count(t, order, &format!("allocations of order {order}"), machine)?;
        let g = self.need_key(t, "gfp")?;
        let gfp = self.gfp(&g.node, &t.key("gfp"))?;
        let must_succeed = self.bool_key(t, "must_succeed")?;
        let cpu = self.cpu(t, machine)?;
        // The hugetlb pool is `[machine] hugetlb_pages`, not an op's folio; block-device page
        // cache is made by the filesystem model (its buffers and journal), not by an op.
        let kinds: Vec<(&str, FolioKindSpec)> = FolioKindSpec::ALL
            .into_iter()
            .filter(|x| !matches!(x, FolioKindSpec::Hugetlb | FolioKindSpec::Bdev))
            .map(|x| (x.name(), x))
            .collect();
        let kind = self
            .opt_word(t, "kind", "folio kind", &kinds)?
            .unwrap_or_else(|| FolioKindSpec::from_gfp(gfp));
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
            _ => self.bool_key(t, "nofs")?,
        };
        named.add_set(set);
        Ok(Op::Alloc {
            line,
            set: set.to_string(),
            count,
            order,
            gfp,
            cpu,
            must_succeed,
            kind,
            nofs,
        })
    }

    /// A `write` or `read` op; the first op that names a file sets its mapping.
    fn op_file(
        &self,
        t: &Tbl,
        action: &Entry,
        line: usize,
        machine: &MachineSpec,
        named: &mut Named,
    ) -> R<Op> {
        let key = t.key(&action.key);
        let file = self.str(&action.node, &key)?;
        if file.is_empty() {
            return Err(self.err(
                action.node.pos,
                &key,
                "empty file name (expected a name such as \"wal\")",
            ));
        }
        let kind = self.opt_mapping(t)?;
        match (named.files.iter().find(|(f, _)| f == file), kind) {
            (None, k) => named
                .files
                .push((file.to_string(), k.map_or(MappingKind::Xfs, |(m, _)| m))),
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
        let offset = self.size_key(t, "offset")?;
        let length = self.size_key(t, "length")?;
        self.file_range(t, &action.key, offset, length)?;
        self.op_length(t, &action.key, length, machine)?;
        if action.key == "write" {
            return Ok(Op::Write {
                line,
                file: file.to_string(),
                offset,
                length,
                cpu: self.cpu(t, machine)?,
            });
        }
        let file_size = self.opt_size_key(t, "file_size")?.unwrap_or(offset + length);
        self.max_file_size(t, file_size)?;
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
        Ok(Op::Read {
            line,
            file: file.to_string(),
            offset,
            length,
            file_size,
            cpu: self.cpu(t, machine)?,
        })
    }

    /// A `compact` or `kcompactd` op.
    fn op_compact(&self, t: &Tbl, action: &Entry, line: usize, machine: &MachineSpec) -> R<Op> {
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
            let mode = self
                .opt_word(t, "mode", "mode", KCOMPACTD_MODES)?
                .unwrap_or(KcompactdMode::Force);
            return Ok(Op::Kcompactd { line, order, mode });
        }
        let gfp = match t.get("gfp") {
            Some(g) => self.gfp(&g.node, &t.key("gfp"))?,
            None => Gfp::GFP_TRANSHUGE,
        };
        let priority = self
            .opt_word(t, "priority", "priority", COMPACT_PRIORITIES)?
            .unwrap_or(CompactPriority::Async);
        Ok(Op::Compact {
            line,
            order,
            gfp,
            priority,
            cpu: self.cpu(t, machine)?,
        })
    }

    fn op_free(&self, t: &Tbl, action: &Entry, line: usize, machine: &MachineSpec, named: &Named) -> R<Op> {
        let key = t.key("free");
        let set = self.str(&action.node, &key)?;
        if !named.sets.iter().any(|s| s == set) {
            let dym = did_you_mean(set, named.sets.iter().map(String::as_str))
                .map(|c| format!("; did you mean {}?", quote(c)))
                .unwrap_or_default();
            return Err(self.err(
                action.node.pos,
                &key,
                format!(
                    "set {} is not allocated by any earlier op (expected the name of an earlier alloc{dym})",
                    quote(set)
                ),
            ));
        }
        let every = self.int_key(t, "every")?;
        // Declared in keys::OP_FREE; its range depends on `every`, so it is checked here.
        let _ = t.def("offset");
        let range = format!("0..={}, below every = {every}", every - 1);
        let offset = self.opt_int(t, "offset", 0, every - 1, &range, 0)? as u32;
        Ok(Op::Free {
            line,
            set: set.to_string(),
            every: every as u32,
            offset,
            cpu: self.cpu(t, machine)?,
        })
    }

    fn op_print(&self, t: &Tbl, action: &Entry, line: usize, machine: &MachineSpec) -> R<Op> {
        let key = t.key("print");
        let s = self.str(&action.node, &key)?;
        let Some(what) = PrintWhat::from_name(s) else {
            let names: Vec<&str> = PrintWhat::ALL.iter().map(|p| p.name()).collect();
            return Err(self.err(
                action.node.pos,
                &key,
                format!("unknown report {}{}", quote(s), hint(s, &names)),
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
        Ok(Op::Print { line, what, zone })
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
}
