//! `[machine]` and `[[machine.zone]]`.

use super::*;
use crate::{NodeSpec, ZoneSpec};

/// `MAX_DMA_PFN` on x86-64: ZONE_DMA lies below 16 MiB.
const MAX_DMA_PFN: u64 = (16 << 20) / PAGE_SIZE;
/// `MAX_DMA32_PFN` on x86-64: ZONE_DMA32 lies below 4 GiB.
const MAX_DMA32_PFN: u64 = (4 << 30) / PAGE_SIZE;
/// Pfns are 32-bit in fraglab (`fraglab_types::Pfn`).
pub(super) const MAX_PFN: u64 = 1 << 32;

impl Cx<'_> {
    pub(super) fn machine(&self, top: &Tbl) -> R<MachineSpec> {
        let Some(e) = top.get("machine") else {
            let KeyDefault::Required(what) = top.def("machine").default else {
                unreachable!("[machine] is declared required")
            };
            return Err(self.err(0, "machine", format!("missing table [machine] (expected {what})")));
        };
        let m = Tbl {
            path: "machine".into(),
            pos: e.node.pos,
            entries: self.table(&e.node, "machine")?,
            keys: keys::MACHINE,
        };
        self.check_keys(&m)?;
        let cpus = self.int_key(&m, "cpus")? as u32;
        let dma = self.bool_key(&m, "dma")?;
        let swap_bytes = self.size_key(&m, "swap")?;
        let hugetlb_pages = self.int_key(&m, "hugetlb_pages")? as u64;
        let hugetlb_line = self
            .lines
            .line(m.get("hugetlb_pages").map_or(e.key_pos, |h| h.key_pos));
        let read_ahead_kb = self.opt_int_key(&m, "read_ahead_kb")?.map(|v| v as u64);
        let max_sectors_kb = self.opt_int_key(&m, "max_sectors_kb")?.map(|v| v as u64);
        let page_reporting = self.page_reporting_order(&m)?;
        let nodes_n = self.int_key(&m, "nodes")? as u32;
        let checkpoint = match m.get("checkpoint") {
            None => None,
            Some(e) => {
                let (path, resolved) = self.path_value(e, "machine.checkpoint", "a checkpoint file")?;
                Some(crate::CheckpointIn {
                    path,
                    resolved,
                    line: self.lines.line(e.key_pos),
                })
            }
        };
        // What every layout shares; each branch sets the layout and the line that sizes it.
        let common = MachineSpec {
            memory_bytes: None,
            cpus,
            dma,
            swap_bytes,
            zones: None,
            nodes: Vec::new(),
            hugetlb_pages,
            read_ahead_kb,
            max_sectors_kb,
            page_reporting_order: page_reporting.0,
            page_reporting_given: page_reporting.1,
            snapshot: None,
            checkpoint,
            line: 0,
            hugetlb_line,
        };
        if m.get("snapshot").is_some() || m.get("zone").is_some() {
            // Explicit zones give one node; a snapshot gives the nodes it recorded.
            for k in ["nodes", "node"] {
                if let Some(e) = m.get(k) {
                    let other = if m.get("snapshot").is_some() {
                        "machine.snapshot"
                    } else {
                        "[[machine.zone]]"
                    };
                    return Err(self.err(
                        e.key_pos,
                        &m.key(k),
                        if m.get("snapshot").is_some() {
                            "the snapshot gives the machine's nodes (machine.snapshot); leave them out"
                                .to_string()
                        } else {
                            format!(
                                "NUMA nodes apply to the default layout (machine.memory); not with {other}"
                            )
                        },
                    ));
                }
            }
        }
        if let Some(snap) = m.get("snapshot") {
            return self.snapshot_machine(&m, snap, common);
        }
        if let Some(nt) = m.get("node") {
            return self.node_tables(&m, nt, common);
        }
        match (m.get("memory"), m.get("zone")) {
            (Some(mem), Some(z)) => Err(self.err(
                z.key_pos,
                "machine.zone",
                format!(
                    "give either machine.memory (line {}) or [[machine.zone]] tables, not both",
                    self.lines.line(mem.key_pos)
                ),
            )),
            (None, None) => Err(self.need_key(&m, "memory").expect_err("absent")),
            (Some(mem), None) => {
                let memory = self.memory(&mem.node)?;
                let nodes = self.even_nodes(&m, memory, cpus, nodes_n)?;
                Ok(MachineSpec {
                    memory_bytes: Some(memory),
                    nodes,
                    line: self.lines.line(mem.key_pos),
                    ..common
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
                    dma: true,
                    zones: Some(zones),
                    line: self.lines.line(z.key_pos),
                    ..common
                })
            }
        }
    }

    /// `[machine]` with `snapshot`: the snapshot gives the zones (and, unless given, the CPUs
    /// and the hugetlb pool), so `memory`, `dma` and `[[machine.zone]]` are errors.
    fn snapshot_machine(&self, m: &Tbl, snap: &Entry, common: MachineSpec) -> R<MachineSpec> {
        let line = self.lines.line(snap.key_pos);
        for k in ["memory", "zone", "dma"] {
            if let Some(e) = m.get(k) {
                return Err(self.err(
                    e.key_pos,
                    &m.key(k),
                    format!(
                        "the snapshot (machine.snapshot, line {line}) gives the machine's zones; leave {} out",
                        if k == "zone" { "[[machine.zone]]" } else { k }
                    ),
                ));
            }
        }
        let (path, resolved) = self.path_value(snap, "machine.snapshot", "a snapshot file")?;
        Ok(MachineSpec {
            dma: true,
            snapshot: Some(crate::SnapshotSpec {
                path,
                resolved,
                line,
                cpus_given: m.get("cpus").is_some(),
                hugetlb_given: m.get("hugetlb_pages").is_some(),
            }),
            line,
            ..common
        })
    }

    /// `page_reporting_order`: an order 0..=10 (`page_order_update_notify` rejects others,
    /// §32.1 item 2) or `"off"` (no reporting device); absent is "off" too, but
    /// not given. Returns (order, given).
    fn page_reporting_order(&self, m: &Tbl) -> R<(Option<u32>, bool)> {
        const K: &str = "page_reporting_order";
        let Some(e) = m.get(K) else {
            return Ok((None, false));
        };
        let key = m.key(K);
        match &e.node.val {
            Val::Int(_) => {
                let v = self.int_in(&e.node, &key, 0, MAX_PAGE_ORDER as i64, "0..=10 or \"off\"")?;
                Ok((Some(v as u32), true))
            }
            Val::Str(s) if s.trim() == "off" => Ok((None, true)),
            Val::Str(s) => Err(self.err(
                e.node.pos,
                &key,
                format!("{} is not an order (expected 0..=10 or \"off\")", quote(s)),
            )),
            _ => Err(self.type_err(&e.node, &key, "an order 0..=10 or \"off\"")),
        }
    }

    /// `nodes = N` with `memory` and `cpus`: N nodes of memory / N each (in whole 2 MiB
    /// pageblocks; node 0 takes what is left over) and cpus / N CPUs each (the first nodes
    /// one more each while CPUs are left). Empty for one node.
    fn even_nodes(&self, m: &Tbl, memory: u64, cpus: u32, n: u32) -> R<Vec<NodeSpec>> {
        if n <= 1 {
            return Ok(Vec::new());
        }
        let e = m.get("nodes").expect("nodes > 1 was given");
        let block = PAGEBLOCK_NR_PAGES as u64 * PAGE_SIZE;
        let each = memory / n as u64 / block * block;
        if each < block {
            return Err(self.err(
                e.node.pos,
                "machine.nodes",
                format!(
                    "{n} nodes of {} each: a node needs at least one pageblock (2 MiB)",
                    show_bytes(memory / n as u64)
                ),
            ));
        }
        if cpus < n {
            return Err(self.err(e.node.pos, "machine.nodes", format!(
                "{n} nodes but {cpus} CPUs: give every node a CPU (machine.cpus >= nodes), or lay the nodes out with [[machine.node]] tables"
            )));
        }
        Ok((0..n)
            .map(|k| NodeSpec {
                memory_bytes: if k == 0 {
                    memory - each * (n as u64 - 1)
                } else {
                    each
                },
                cpus: cpus / n + u32::from(k < cpus % n),
            })
            .collect())
    }

    /// `[[machine.node]]` tables: each node's memory and CPUs; not with `memory`, `cpus`,
    /// `nodes` or zones.
    fn node_tables(&self, m: &Tbl, nt: &Entry, common: MachineSpec) -> R<MachineSpec> {
        let line = self.lines.line(nt.key_pos);
        let items = self.tables(&nt.node, "machine.node")?;
        if items.is_empty() || items.len() > 16 {
            return Err(self.err(
                nt.key_pos,
                "machine.node",
                format!("{} node tables (expected 1..=16)", items.len()),
            ));
        }
        let tables: Vec<Tbl> = items
            .into_iter()
            .enumerate()
            .map(|(i, (pos, entries))| Tbl {
                path: format!("machine.node[{i}]"),
                pos,
                entries,
                keys: keys::NODE,
            })
            .collect();
        for t in &tables {
            self.check_keys(t)?;
        }
        for k in ["memory", "cpus", "nodes"] {
            if let Some(e) = m.get(k) {
                return Err(self.err(
                    e.key_pos,
                    &m.key(k),
                    format!("the [[machine.node]] tables (line {line}) give the nodes' memory and CPUs; leave {k} out"),
                ));
            }
        }
        let mut nodes = Vec::new();
        for t in &tables {
            let mem = self.need_key(t, "memory")?;
            let memory_bytes = self.memory(&mem.node)?;
            let cpus = self.int_key(t, "cpus")? as u32;
            nodes.push(NodeSpec { memory_bytes, cpus });
        }
        let memory: u64 = nodes.iter().map(|n| n.memory_bytes).sum();
        if memory > MAX_MEMORY_BYTES {
            return Err(self.err(
                nt.key_pos,
                "machine.node",
                format!("the nodes hold {} together, more than 1 TiB", show_bytes(memory)),
            ));
        }
        if nodes[0].cpus == 0 {
            return Err(self.err(
                nt.key_pos,
                "machine.node",
                "node 0 needs a CPU (the boot CPU is on node 0)",
            ));
        }
        let cpus: u32 = nodes.iter().map(|n| n.cpus).sum();
        if cpus > 256 {
            return Err(self.err(
                nt.key_pos,
                "machine.node",
                format!("the nodes have {cpus} CPUs together (expected at most 256)"),
            ));
        }
        Ok(MachineSpec {
            memory_bytes: Some(memory),
            cpus,
            nodes: if nodes.len() > 1 { nodes } else { Vec::new() },
            line,
            ..common
        })
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
                keys: keys::ZONE,
            };
            let z = self.zone(&t)?;
            self.zone_after(&z, &t, &zones)?;
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

    /// One `[[machine.zone]]` on its own: its name, pfns and the limits of its zone type.
    fn zone(&self, t: &Tbl) -> R<ZoneSpec> {
        self.check_keys(t)?;
        let name = self.need_key(t, "name")?;
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
        let start_pfn = self.int_key(t, "start_pfn")? as u64;
        let spanned = self.int_key(t, "spanned")? as u64;
        let present = self.opt_int_key(t, "present")?.map_or(spanned, |v| v as u64);
        let managed = self.opt_int_key(t, "managed")?.map_or(present, |v| v as u64);
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
            return Err(self.err(
                at("present"),
                &t.key("present"),
                format!(
                "{present}: ZONE_MOVABLE must be empty (expected present = 0; fraglab models no movablecore)"
            ),
            ));
        }
        Ok(z)
    }

    /// Zone `z` (table `t`) after the zones before it: each zone type once, in the kernel's
    /// order, in increasing pfn order without overlap.
    fn zone_after(&self, z: &ZoneSpec, t: &Tbl, zones: &[(ZoneSpec, Tbl)]) -> R<()> {
        let name_pos = t.get("name").expect("a zone's name").node.pos;
        let zone = z.zone;
        for (prev, pt) in zones {
            if prev.zone == zone {
                return Err(self.err(
                    name_pos,
                    &t.key("name"),
                    format!("zone {} is listed twice (first as {})", zone.name(), pt.path),
                ));
            }
            if prev.zone > zone {
                return Err(self.err(
                    name_pos,
                    &t.key("name"),
                    format!(
                    "zone {} is listed after {} (expected the kernel's order DMA, DMA32, Normal, Movable)",
                    zone.name(), prev.zone.name()
                ),
                ));
            }
            if prev.spanned > 0 && z.spanned > 0 && z.start_pfn < prev.end_pfn() {
                let at = t.get("start_pfn").map_or(t.pos, |e| e.node.pos);
                return Err(self.err(at, &t.key("start_pfn"), format!(
                    "zone {} starts at pfn {:#x}, below the end of zone {} (pfn {:#x}..{:#x}); zones go in increasing pfn order without overlap",
                    zone.name(), z.start_pfn, prev.zone.name(), prev.start_pfn, prev.end_pfn()
                )));
            }
        }
        Ok(())
    }

    pub(super) fn print_zone(&self, node: &Node, key: &str, machine: &MachineSpec) -> R<ZoneType> {
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
