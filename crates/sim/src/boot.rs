//! From a spec to a booted model, in one place: [`mm_config`] reads every knob and model switch
//! the model uses (the ones `fraglab_spec::KNOBS` declares read) into one typed
//! [`MmConfig`], [`boot`] hands it to [`Mm::from_config`], then fills the hugetlb pool, registers
//! the spec's files and starts tracing. Nothing else sets the model's configuration.
//!
//! Adding a knob or switch: its declaration in `fraglab_spec` (`KNOBS` or `model_switches!`) and
//! the line here that reads it; `knob_declarations_match_what_boot_reads` (tests below) holds
//! each declaration's `read` to what this file does.

use fraglab_mm::damon::{DamonConfig, FilterKind, OpsFilter, Watermarks};
use fraglab_mm::filemap::{Mapping, PagecacheConfig};
use fraglab_mm::huge_memory::{ThpConfig, ThpDefrag, ThpEnabled};
use fraglab_mm::mmzone::{MachineConfig, ZoneConfig};
use fraglab_mm::node::{trace_kind, Mm, Tunables};
use fraglab_mm::types::MAX_NR_ZONES;
use fraglab_mm::MmConfig;
use fraglab_spec::{KnobValue, MappingKind, Spec, KNOBS};

use crate::error::RunError;

/// The integer value of knob `name` (the spec's, else the kernel default).
fn int(spec: &Spec, name: &str) -> Option<i64> {
    match spec.knob(name) {
        Some(KnobValue::Int(v)) => Some(v),
        _ => None,
    }
}

/// The word of choice knob `name` (the spec's, else the kernel default).
fn word(spec: &Spec, name: &str) -> Option<String> {
    match spec.knob(name) {
        Some(KnobValue::Str(v)) => Some(v),
        _ => None,
    }
}

/// The THP knobs of a spec (§11.1).
pub fn thp_config(spec: &Spec) -> ThpConfig {
    let mut t = ThpConfig::default();
    let enabled = |v: &str| ThpEnabled::from_name(v).expect("validated by the spec parser");
    if let Some(v) = word(spec, "transparent_hugepage/enabled") {
        t.enabled = enabled(&v);
    }
    if let Some(v) = word(spec, "transparent_hugepage/defrag") {
        t.defrag = ThpDefrag::from_name(&v).expect("validated by the spec parser");
    }
    for order in 2..=9u32 {
        let name = format!("transparent_hugepage/hugepages-{}kB/enabled", 4u32 << order);
        if let Some(v) = word(spec, &name) {
            t.per_size[order as usize] = enabled(&v);
        }
    }
    // The deferred split (§31.3).
    if let Some(v) = int(spec, "transparent_hugepage/shrink_underused") {
        t.shrink_underused = v != 0;
    }
    if let Some(v) = int(spec, "transparent_hugepage/khugepaged/max_ptes_none") {
        t.max_ptes_none = v as u32;
    }
    t
}

/// The machine a spec describes.
pub fn machine_config(spec: &Spec) -> Result<MachineConfig, RunError> {
    let m = &spec.machine;
    let err = |e: fraglab_mm::MachineError| RunError(format!("{}: {e}", m.at(&spec.file)));
    match &m.zones {
        Some(zones) => {
            let zones = zones
                .iter()
                .map(|z| {
                    let fit = |v: u64| {
                        u32::try_from(v).map_err(|_| {
                            RunError(format!(
                                "{}: zone {} beyond 16 TiB",
                                m.at(&spec.file),
                                z.zone.name()
                            ))
                        })
                    };
                    Ok(ZoneConfig {
                        zone_type: z.zone,
                        nid: 0,
                        start_pfn: fit(z.start_pfn)?,
                        spanned: fit(z.spanned)?,
                        present: fit(z.present)?,
                        managed: fit(z.managed)?,
                    })
                })
                .collect::<Result<Vec<_>, RunError>>()?;
            let mc = MachineConfig {
                cpu_node: Vec::new(),
                zones,
                nr_cpus: m.cpus,
            };
            mc.validate().map_err(err)?;
            Ok(mc)
        }
        None => {
            if !m.nodes.is_empty() {
                let bytes: Vec<u64> = m.nodes.iter().map(|n| n.memory_bytes).collect();
                let cpus: Vec<u32> = m.nodes.iter().map(|n| n.cpus).collect();
                return MachineConfig::x86_64_nodes(&bytes, m.dma, &cpus).map_err(err);
            }
            let bytes = m
                .memory_bytes
                .ok_or_else(|| RunError(format!("{}: machine: no memory size", spec.file)))?;
            MachineConfig::x86_64(bytes, m.dma, m.cpus).map_err(err)
        }
    }
}

/// The policy of `[model] policy` (`fraglab_policies`) with the spec's model switches stacked
/// on it (`folio_mode`, `defrag_stage`, `costly_order_policy`, `v4_position`); an unknown name
/// is an error at the spec's line.
pub fn policy_factory(spec: &Spec) -> Result<fraglab_mm::policy::PolicyFactory, RunError> {
    let m = &spec.model;
    fraglab_policies::factory(
        &m.policy,
        m.folio_mode,
        m.defrag_stage,
        m.costly_order_policy,
        m.v4_position,
    )
    .map_err(|e| {
        let at = if m.policy_line > 0 {
            format!("{}:{}", spec.file, m.policy_line)
        } else {
            spec.file.clone()
        };
        RunError(format!("{at}: key model.policy: {e}"))
    })
}

/// The allocator tunables a spec's knobs set (kernel defaults for the rest).
pub fn tunables(spec: &Spec) -> Tunables {
    let mut t = Tunables::default();
    if let Some(KnobValue::Int(v)) = spec.knobs.get("vm.min_free_kbytes") {
        t.min_free_kbytes = Some(*v as u64);
    }
    if let Some(v) = int(spec, "vm.watermark_scale_factor") {
        t.watermark_scale_factor = v as u64;
    }
    if let Some(v) = int(spec, "vm.watermark_boost_factor") {
        t.watermark_boost_factor = v as u64;
    }
    if let Some(KnobValue::List(l)) = spec.knob("vm.lowmem_reserve_ratio") {
        for (i, v) in l.iter().take(MAX_NR_ZONES).enumerate() {
            t.lowmem_reserve_ratio[i] = *v as u64;
        }
    }
    if let Some(v) = int(spec, "vm.defrag_mode") {
        t.defrag_mode = v != 0;
    }
    if let Some(v) = int(spec, "vm.percpu_pagelist_high_fraction") {
        t.percpu_pagelist_high_fraction = v as u32;
    }
    if let Some(v) = word(spec, "transparent_hugepage/enabled") {
        t.thp_enabled = v != "never";
    }
    if let Some(v) = int(spec, "vm.swappiness") {
        t.swappiness = v as u32;
    }
    if let Some(v) = int(spec, "vm.vfs_cache_pressure") {
        t.vfs_cache_pressure = v as u32;
    }
    if let Some(v) = int(spec, "vm.dirty_background_ratio") {
        t.dirty_background_ratio = v as u32;
    }
    if let Some(v) = int(spec, "vm.dirty_ratio") {
        t.dirty_ratio = v as u32;
    }
    if let Some(v) = int(spec, "vm.dirty_expire_centisecs") {
        t.dirty_expire_centisecs = v as u32;
    }
    if let Some(v) = int(spec, "vm.dirty_writeback_centisecs") {
        t.dirty_writeback_centisecs = v as u32;
    }
    t
}

/// The whole configuration of the model a spec describes: machine, knobs and model switches.
pub fn mm_config(spec: &Spec) -> Result<MmConfig, RunError> {
    mm_config_with(spec, machine_config(spec)?)
}

/// [`mm_config`] for a given machine (a snapshot's, `crate::restore`).
pub fn mm_config_with(spec: &Spec, machine: MachineConfig) -> Result<MmConfig, RunError> {
    let mut cfg = MmConfig::new(machine);
    cfg.tun = tunables(spec);
    cfg.thp = thp_config(spec);
    cfg.policy = policy_factory(spec)?;
    if let Some(v) = int(spec, "vm.extfrag_threshold") {
        cfg.compaction.extfrag_threshold = v as i32;
    }
    if let Some(v) = int(spec, "vm.compaction_proactiveness") {
        cfg.compaction.proactiveness = v as u32;
    }
    // §29.2: isolation of unevictable (mlocked) folios.
    if let Some(v) = int(spec, "vm.compact_unevictable_allowed") {
        cfg.compaction.unevictable_allowed = v != 0;
    }
    cfg.pagecache = PagecacheConfig {
        // §23.1: `[machine] read_ahead_kb` (default 128 KiB, VM_READAHEAD_PAGES) / 4.
        ra_pages: spec
            .machine
            .read_ahead_kb
            .map_or(fraglab_mm::filemap::VM_READAHEAD_PAGES, |kb| kb / 4),
        // §23.1 item 2: `io_pages = max_sectors_kb / 4`; default a new bdi's 32.
        io_pages: spec
            .machine
            .max_sectors_kb
            .map_or(fraglab_mm::filemap::VM_READAHEAD_PAGES, |kb| kb / 4),
    };
    cfg.xa_nodes = spec.model.xa_nodes;
    cfg.swap_pages = spec.machine.swap_bytes / 4096;
    cfg.debug_vm = spec.run.debug_vm;
    // §32.1: a free page reporting device, if the machine has one.
    cfg.page_reporting_order = spec.machine.page_reporting_order;
    if let Some(v) = int(spec, "vm.zone_reclaim_mode") {
        cfg.zone_reclaim_mode = v as u32;
    }
    Ok(cfg)
}

/// `[damon]` (docs/model §27): the kdamond's configuration, the preset's values overridden
/// by the keys given; `None` when the table is absent or `enabled = false`. Timed runs start it
/// (`Engine::start_kdamond`); the timeless engine has no clock and ignores it.
pub fn damon_config(spec: &Spec) -> Option<DamonConfig> {
    let d = &spec.damon;
    if !d.enabled {
        return None;
    }
    let mut c = match d.preset.as_str() {
        "s2" => DamonConfig::s2(),
        _ => DamonConfig::damon_reclaim(),
    };
    let v = |k: &str| d.values.get(k).copied();
    let u32v = |k: &str| v(k).map(|x| x.min(u32::MAX as u64) as u32);
    c.sample_us = v("sample_us").unwrap_or(c.sample_us);
    c.aggr_us = v("aggr_us").unwrap_or(c.aggr_us);
    c.min_nr_regions = u32v("min_nr_regions").unwrap_or(c.min_nr_regions);
    c.max_nr_regions = u32v("max_nr_regions").unwrap_or(c.max_nr_regions);
    c.nr_accesses.0 = u32v("nr_accesses_min").unwrap_or(c.nr_accesses.0);
    c.nr_accesses.1 = u32v("nr_accesses_max").unwrap_or(c.nr_accesses.1);
    c.age.0 = u32v("age_min").unwrap_or(c.age.0);
    c.age.1 = u32v("age_max").unwrap_or(c.age.1);
    c.sz.0 = v("sz_min").unwrap_or(c.sz.0);
    c.sz.1 = v("sz_max").unwrap_or(c.sz.1);
    c.quota_ms = v("quota_ms").unwrap_or(c.quota_ms);
    c.quota_bytes = v("quota_bytes").unwrap_or(c.quota_bytes);
    c.quota_reset_interval_ms = v("quota_reset_interval_ms").unwrap_or(c.quota_reset_interval_ms);
    let wm_keys = ["wmarks_interval_us", "wmarks_high", "wmarks_mid", "wmarks_low"];
    let free_mem_rate = d
        .wmarks_free_mem_rate
        .unwrap_or(c.wmarks.is_some() || wm_keys.iter().any(|k| v(k).is_some()));
    c.wmarks = free_mem_rate.then(|| {
        // Values not given come from the preset, else from DAMON_RECLAIM's (§27.1).
        let base = c
            .wmarks
            .or(DamonConfig::damon_reclaim().wmarks)
            .expect("damon_reclaim has watermarks");
        Watermarks {
            interval_us: v("wmarks_interval_us").unwrap_or(base.interval_us),
            high: v("wmarks_high").unwrap_or(base.high),
            mid: v("wmarks_mid").unwrap_or(base.mid),
            low: v("wmarks_low").unwrap_or(base.low),
        }
    });
    if let Some(r) = &d.regions {
        let page = fraglab_mm::types::PAGE_SIZE;
        c.regions = r
            .iter()
            .map(|&(s, e)| {
                let pfn = |b: u64| (b / page).min(u32::MAX as u64) as u32;
                (pfn(s), pfn(e))
            })
            .collect();
    }
    if let Some(f) = &d.filters {
        c.filters = f
            .iter()
            .map(|(ty, allow)| OpsFilter {
                kind: match ty.as_str() {
                    "anon" => FilterKind::Anon,
                    "unmapped" => FilterKind::Unmapped,
                    _ => FilterKind::Young,
                },
                allow: *allow,
            })
            .collect();
    }
    Some(c)
}

/// The knobs a spec sets that this version of the model does not read (`Read::No` in
/// `fraglab_spec::KNOBS`), in the spec's order.
pub fn unread_knobs(spec: &Spec) -> Vec<&str> {
    spec.knobs
        .keys()
        .map(String::as_str)
        .filter(|k| KNOBS.iter().any(|d| d.name == *k && !d.read.is_read()))
        .collect()
}

/// `[machine] hugetlb_pages`: fills the hugetlb pool at boot as `echo N >
/// /proc/sys/vm/nr_hugepages` does ([`Mm::set_max_huge_pages`], docs/model §28.1), so the
/// pool's allocations count in `htlb_buddy_alloc_success` as on the kernel. Simplified: on a
/// machine that has just booted every request is served from the free lists, so the pool takes
/// whichever free pageblocks the allocator hands out first; a pool filled on a running machine
/// (as the host engine's is) takes blocks scattered among the ones in use. A pool the machine
/// cannot hold is an error (the kernel would keep what fit).
fn reserve_hugetlb(mm: &mut Mm, spec: &Spec) -> Result<(), RunError> {
    let want = spec.machine.hugetlb_pages;
    let r = mm.set_max_huge_pages(0, want);
    if r.pool < want {
        return Err(RunError(format!(
            "{}:{}: key machine.hugetlb_pages: only {} of {want} pages of 2 MiB fit on this machine",
            spec.file, spec.machine.hugetlb_line, r.pool
        )));
    }
    Ok(())
}

/// Boots the machine of a spec with its configuration ([`mm_config`]), fills the hugetlb pool,
/// registers the files its ops name, and starts recording the trace events of `run.trace` (the
/// pool's allocations are not traced: tracing starts with the run).
///
/// With `[machine] snapshot`, the machine boots in the snapshot's reconstructed state instead
/// ([`boot_restored`]).
pub fn boot(spec: &Spec) -> Result<Mm, RunError> {
    if spec.machine.snapshot.is_some() {
        let loaded = crate::restore::load(spec)?;
        return boot_restored(spec, &loaded);
    }
    let mut mm = Mm::from_config(&mm_config(spec)?)
        .map_err(|e| RunError(format!("{}: {e}", spec.machine.at(&spec.file))))?;
    reserve_hugetlb(&mut mm, spec)?;
    for m in spec_mappings(spec) {
        mm.add_mapping(m);
    }
    start_tracing(&mut mm, spec)?;
    Ok(mm)
}

/// The configuration a spec boots with, as [`boot`] builds it: [`mm_config`], or for a spec
/// that boots a snapshot the configuration of [`boot_restored`] (the spec's knobs, else the
/// snapshot's). A warm fork (`crate::fork`) applies its settings to a running model.
pub fn boot_config(spec: &Spec) -> Result<MmConfig, RunError> {
    if spec.machine.snapshot.is_none() {
        return mm_config(spec);
    }
    restored_config(spec, &*crate::restore::load(spec)?)
}

/// [`boot_config`] of a spec booting the snapshot `loaded`.
fn restored_config(spec: &Spec, loaded: &crate::restore::Loaded) -> Result<MmConfig, RunError> {
    let (eff, _) = crate::restore::effective_spec(spec, &loaded.header);
    let zones = loaded.restore.zones.clone();
    let nr_nodes = zones.iter().map(|z| z.nid + 1).max().unwrap_or(1);
    let machine = MachineConfig {
        cpu_node: restored_cpu_nodes(&loaded.header.node_cpus, nr_nodes, eff.machine.cpus),
        zones,
        nr_cpus: eff.machine.cpus,
    };
    mm_config_with(&eff, machine)
}

/// The mappings of the files a spec's ops name, in `spec.files` order (ids 1..=n).
fn spec_mappings(spec: &Spec) -> Vec<Mapping> {
    spec.files
        .iter()
        .map(|(_, kind)| match kind {
            MappingKind::Xfs => Mapping::xfs_like(),
            MappingKind::LargeFolios => Mapping::large_folios(),
            MappingKind::NoLargeFolios => Mapping::no_large_folios(),
        })
        .collect()
}

/// Boots a spec with `[machine] snapshot` in the state of `loaded` (`crate::restore`): the
/// spec's knobs, else the snapshot's, else the kernel defaults; the snapshot's zones; CPUs
/// from the spec if given, else the snapshot's; the snapshot's hugetlb pool, resized to
/// `hugetlb_pages` only if the spec gives it; the spec's files registered before the
/// snapshot's page-cache mapping (so they keep ids 1..=n); tracing as [`boot`].
pub fn boot_restored(spec: &Spec, loaded: &crate::restore::Loaded) -> Result<Mm, RunError> {
    let snap = spec
        .machine
        .snapshot
        .as_ref()
        .ok_or_else(|| RunError(format!("{}: machine: no snapshot", spec.file)))?;
    let nr_nodes = loaded.restore.zones.iter().map(|z| z.nid + 1).max().unwrap_or(1);
    check_bindings(spec, nr_nodes)?;
    let cfg = restored_config(spec, loaded)?;
    let (mut mm, _) = Mm::from_restore_summary(&cfg, &loaded.restore, &spec_mappings(spec))
        .map_err(|e| RunError(format!("{}: {}: {e}", snap.at(&spec.file), loaded.path.display())))?;
    if snap.hugetlb_given {
        reserve_hugetlb(&mut mm, spec)?;
    }
    mm.debug_check();
    start_tracing(&mut mm, spec)?;
    Ok(mm)
}

/// Every `numa_node`/`mempolicy` of the spec's workload names a node of a machine of
/// `nr_nodes` nodes. The spec parser checks them against `[machine]`'s nodes; a snapshot's
/// node count is known only here.
fn check_bindings(spec: &Spec, nr_nodes: u32) -> Result<(), RunError> {
    let Some(w) = &spec.workload else {
        return Ok(());
    };
    let bindings = (w.kbuild.iter().map(|k| ("kbuild", k.line, k.numa)))
        .chain(w.thp_burst.iter().map(|b| ("thp_burst", b.line, b.numa)))
        .chain(w.task.iter().map(|t| ("task", t.line, t.numa)));
    for (table, line, b) in bindings {
        b.check(nr_nodes).map_err(|e| {
            RunError(format!(
                "{}:{line}: workload.{table}: {e} (the snapshot's machine)",
                spec.file
            ))
        })?;
    }
    Ok(())
}

/// The node of each CPU of a machine booted from a snapshot of `nr_nodes` nodes with `cpus`
/// CPUs: the snapshot's CPUs per node (`node_cpus`) when it recorded them for this many nodes
/// and CPUs, else the CPUs spread evenly over the nodes in node order (the spec gave another CPU
/// count, or the file predates the record); empty (every CPU on node 0) on one node.
fn restored_cpu_nodes(node_cpus: &[u32], nr_nodes: u32, cpus: u32) -> Vec<u32> {
    if nr_nodes <= 1 {
        return Vec::new();
    }
    let per_node: Vec<u32> = if node_cpus.len() == nr_nodes as usize && node_cpus.iter().sum::<u32>() == cpus
    {
        node_cpus.to_vec()
    } else {
        (0..nr_nodes)
            .map(|n| cpus / nr_nodes + u32::from(n < cpus % nr_nodes))
            .collect()
    };
    per_node
        .iter()
        .enumerate()
        .flat_map(|(nid, &n)| std::iter::repeat_n(nid as u32, n as usize))
        .collect()
}

/// Starts recording the trace events of `run.trace`.
fn start_tracing(mm: &mut Mm, spec: &Spec) -> Result<(), RunError> {
    let mut mask = 0;
    for ev in &spec.run.trace {
        mask |= trace_kind::from_name(ev)
            .ok_or_else(|| RunError(format!("{}: run.trace: unknown event {ev}", spec.file)))?;
    }
    mm.set_trace_mask(mask);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use fraglab_spec::{parse_spec, KnobKind, Read};

    /// A value of knob `k` other than its default, as a TOML value.
    fn other_value(k: &fraglab_spec::KnobDef) -> String {
        match k.kind {
            KnobKind::Int { min, max } | KnobKind::ZeroOrInt { min, max } => {
                let d: i64 = k.default.parse().unwrap_or(-1);
                let v = if d == min { (min + 1).min(max) } else { min };
                v.to_string()
            }
            KnobKind::Choice(words) => {
                format!("\"{}\"", words.iter().find(|w| **w != k.default).unwrap())
            }
            KnobKind::IntList { len, .. } => {
                format!("[{}]", vec!["7"; len].join(", "))
            }
        }
    }

    fn config(knob: Option<(&str, &str)>) -> MmConfig {
        let mut text = String::from("[machine]\nmemory = \"1GiB\"\n");
        if let Some((k, v)) = knob {
            text += &format!("[knobs]\n\"{k}\" = {v}\n");
        }
        mm_config(&parse_spec(&text, "t.toml").unwrap()).unwrap()
    }

    /// Every knob declared read changes the model's configuration when set to another value, and
    /// every knob declared not read leaves it as it is: the declarations cannot drift from
    /// what [`mm_config`] reads. (A knob read only by the timed engine is read from the spec
    /// there; none is declared so yet.)
    #[test]
    fn knob_declarations_match_what_boot_reads() {
        let base = config(None);
        for k in KNOBS {
            let v = other_value(k);
            let changed = config(Some((k.name, &v))) != base;
            match k.read {
                Read::Yes | Read::Where(_) => {
                    assert!(changed, "{} = {v} is declared read but changes nothing", k.name)
                }
                Read::No(_) => assert!(
                    !changed,
                    "{} = {v} is declared not read but changes the model",
                    k.name
                ),
            }
        }
    }

    /// Every model switch that is not the timed engine's own changes the configuration (the
    /// timed engine's, `sched` and `fs_metadata`, are read from the spec by the engine and the
    /// workload generators).
    #[test]
    fn model_switches_reach_the_configuration() {
        let base = config(None);
        for s in fraglab_spec::MODEL_SWITCHES
            .iter()
            .filter(|s| s.read != "yes (timed runs)")
        {
            let other = s.choices.iter().find(|c| **c != s.default).unwrap();
            // v4_position places V4's check: it is read with costly_order_policy = V4 only.
            let with = if s.name == "v4_position" {
                "costly_order_policy = \"v4_kcompactd_background\"\n"
            } else {
                ""
            };
            let spec = |extra: &str| {
                let text = format!("[machine]\nmemory = \"1GiB\"\n[model]\n{with}{extra}");
                mm_config(&parse_spec(&text, "t.toml").unwrap()).unwrap()
            };
            let base = if with.is_empty() { base.clone() } else { spec("") };
            let cfg = spec(&format!("{} = \"{other}\"\n", s.name));
            assert_ne!(cfg, base, "[model] {} = {other} changes nothing", s.name);
        }
        let cfg = mm_config(
            &parse_spec(
                "[machine]\nmemory = \"1GiB\"\n[model]\npolicy = \"contiguitas\"\n",
                "t.toml",
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(cfg.policy.name(), "contiguitas");
        assert_ne!(cfg, base);
    }

    #[test]
    fn unread_knobs_are_listed() {
        let text = "[machine]\nmemory = \"1GiB\"\n[knobs]\n\"vm.page-cluster\" = 2\n\"vm.swappiness\" = 10\n";
        assert_eq!(
            unread_knobs(&parse_spec(text, "t.toml").unwrap()),
            ["vm.page-cluster"]
        );
    }
}
