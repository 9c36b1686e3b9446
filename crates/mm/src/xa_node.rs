//! The page cache's xarray nodes (`radix_tree_node` slab objects, lib/xarray.c and
//! lib/radix-tree.c) as a source of reclaimable slab pages: every page-cache insertion may need
//! a node, every removal may free one, so page-cache churn interleaves MIGRATE_RECLAIMABLE slab
//! pages with the movable page cache it indexes.
//!
//! What is modelled:
//! * a node covers 64 consecutive indices (`XA_CHUNK_SHIFT` = 6) of one file's xarray; a
//!   level-0 node exists while an entry smaller than the whole 64-index range (a folio or a
//!   workingset shadow entry of order < 6, or the ragged part of a split shadow) lies in it;
//! * one level-1 node per 4096 indices exists while anything lies in its range and the file's
//!   xarray is taller than one node (some entry ends beyond index 64); entries of order ≥ 6 sit
//!   in level-1 nodes only. Nodes of level 2 and above (files over 16 MiB) are not modelled;
//! * a file whose only entry is an order-0 entry at index 0 needs no node (`xa_head` holds it);
//! * shadow entries keep nodes alive as long as the model keeps them (workingset.rs bounds
//!   their number by the managed pages); in addition, level-0 nodes holding only shadows are
//!   bounded as the shadow-node shrinker bounds them without memcg (`count_shadow_nodes`:
//!   present pages >> 3), the oldest shadow's node going first (`shadow_lru_isolate`);
//! * a mapping may stand for many equal-sized files laid end to end (the kbuild source tree,
//!   the fio directory): [`Mm::xa_set_file_pages`] gives each its own xarray;
//! * nodes come from one `radix_tree_node` cache: 584-byte objects, 14 per order-1 slab, 7 per
//!   order-0 slab (the fallback), allocated with the insertion's gfp restricted to
//!   `GFP_RECLAIM_MASK` plus `__GFP_RECLAIMABLE` (the cache is SLAB_RECLAIM_ACCOUNT).
//!
//! Simplifications: the node bookkeeping is settled after each page-cache operation rather than
//! inside it (`xas_nomem` runs before the store in the kernel); when a node cannot be allocated
//! the insertion still proceeds (the kernel fails `filemap_add_folio` with −ENOMEM) and the
//! failure is counted; a later change to the same range retries. One node-wide partial list
//! (no per-CPU slabs), the most recently used partial slab first. Node pages are not on the slab
//! shrinker's list: they are freed with their last node. No memcg.

use crate::folio::{FolioId, FolioKind};
use crate::gfp::Gfp;
use crate::node::Mm;

/// `XA_CHUNK_SHIFT`: a node has 64 slots.
pub const XA_CHUNK_SHIFT: u32 = 6;
/// `sizeof(struct xa_node)` as /proc/slabinfo shows the radix_tree_node cache.
pub const RADIX_TREE_NODE_SIZE: u32 = 584;
/// The cache's preferred slab order and objects per slab: /proc/slabinfo on this project's VM
/// (6.18.44) shows `radix_tree_node` with 584-byte objects, 14 per slab of 2 pages (order 1;
/// 14 × 584 = 8,176 bytes).
pub const XA_SLAB_ORDER: u32 = 1;
pub const XA_OBJS_PER_SLAB: u32 = 14;
/// The minimum order's objects per slab (`oo_min`: one page holds 7 nodes).
pub const XA_OBJS_PER_MIN_SLAB: u32 = 4096 / RADIX_TREE_NODE_SIZE;

/// `GFP_RECLAIM_MASK` (mm/internal.h): the flags of an allocation that may be passed on to
/// the allocations it needs.
pub const GFP_RECLAIM_MASK: Gfp = Gfp(Gfp::RECLAIM.0
    | Gfp::HIGH.0
    | Gfp::IO.0
    | Gfp::FS.0
    | Gfp::NOWARN.0
    | Gfp::RETRY_MAYFAIL.0
    | Gfp::NOFAIL.0
    | Gfp::NORETRY.0
    | Gfp::MEMALLOC.0
    | Gfp::NOMEMALLOC.0);

/// The node maps: their keys are a few small integers, looked up, never iterated in an order
/// that matters (rustc-hash's FxHasher: fast and deterministic). Entries are never removed
/// (the places a workload touches are bounded by its files): removal churn would fill the
/// table with tombstones that lengthen every probe.
type XaMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// One node's place: (mapping, file within the mapping, level, range within the file).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct NodeKey {
    mapping: u32,
    file: u64,
    level: u8,
    group: u64,
}

/// Entries in a node's range (of which shadows), the node if allocated (a slab slot), and
/// whether it is a level-0 node holding only shadows (on the kernel's `shadow_nodes` list).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default)]
struct Group {
    count: i64,
    shadows: i64,
    node: Option<u32>,
    shadow_only: bool,
}

/// Per file: entries, entries that are exactly index 0 of order 0, entries ending beyond
/// index 64 (the xarray is taller than one node), and the places of range 0 of both levels
/// (all a file of at most 64 pages has: kept here so that one lookup serves an update).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default)]
struct FileAgg {
    entries: i64,
    head0: i64,
    high: i64,
    l0: Group,
    l1: Group,
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct NodeSlab {
    folio: FolioId,
    token: u64,
    live: u32,
    cap: u32,
    on_partial: bool,
}

/// Counters of the node cache.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XaNodeStats {
    /// Nodes allocated and freed since boot.
    pub allocs: u64,
    pub frees: u64,
    /// Node allocations that failed (the insertion went ahead without its node).
    pub alloc_failed: u64,
    /// Slab pages allocated at the preferred order and at the fallback order 0.
    pub slabs_high: u64,
    pub slabs_order0: u64,
    /// Live nodes and the slab pages holding them.
    pub nodes: u64,
    pub pages: u64,
    /// Live level-0 nodes that hold only shadow entries.
    pub shadow_nodes: u64,
}

/// The xarray-node model of the page cache (off unless [`Mm::set_xa_nodes`] turns it on).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct XaNodes {
    pub enabled: bool,
    /// Per mapping (`mapping - 1`): the pages of each file it stands for (0: one file).
    file_pages: Vec<u64>,
    groups: XaMap<NodeKey, Group>,
    files: XaMap<(u32, u64), FileAgg>,
    slabs: Vec<Option<NodeSlab>>,
    free_slots: Vec<u32>,
    partial: Vec<u32>,
    in_settle: bool,
    /// The gfp of the page-cache insertion being settled, if one is.
    pub(crate) add_gfp: Option<Gfp>,
    pub stats: XaNodeStats,
}

/// A change of the page cache's xarray: an entry (folio or shadow) covering `nr` pages from
/// `start` of `mapping` appeared (`delta` = 1) or went (−1).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct XaEvent {
    pub mapping: u32,
    pub start: u64,
    pub nr: u64,
    pub delta: i8,
    /// A workingset shadow entry (else a folio).
    pub shadow: bool,
}

impl XaNodes {
    /// Host bytes of the node model's maps and slab table (`host_mem.rs`).
    pub(crate) fn host_bytes(&self) -> u64 {
        use crate::host_mem::{hash_table_bytes, vec_bytes};
        vec_bytes(&self.file_pages)
            + hash_table_bytes(self.groups.capacity(), std::mem::size_of::<(NodeKey, Group)>())
            + hash_table_bytes(
                self.files.capacity(),
                std::mem::size_of::<((u32, u64), FileAgg)>(),
            )
            + vec_bytes(&self.slabs)
            + vec_bytes(&self.free_slots)
            + vec_bytes(&self.partial)
    }

    fn file_pages(&self, mapping: u32) -> u64 {
        self.file_pages
            .get((mapping as usize).wrapping_sub(1))
            .copied()
            .unwrap_or(0)
    }

    fn group_mut(&mut self, k: NodeKey) -> &mut Group {
        if k.group == 0 {
            let f = self.files.entry((k.mapping, k.file)).or_default();
            if k.level == 0 {
                &mut f.l0
            } else {
                &mut f.l1
            }
        } else {
            self.groups.entry(k).or_default()
        }
    }

    fn group(&self, k: NodeKey) -> Option<&Group> {
        if k.group == 0 {
            let f = self.files.get(&(k.mapping, k.file))?;
            Some(if k.level == 0 { &f.l0 } else { &f.l1 })
        } else {
            self.groups.get(&k)
        }
    }

    /// Every node place with its state.
    fn all_groups(&self) -> Vec<(NodeKey, Group)> {
        let mut v: Vec<(NodeKey, Group)> = self.groups.iter().map(|(k, g)| (*k, *g)).collect();
        for (&(mapping, file), f) in &self.files {
            for (level, g) in [(0, f.l0), (1, f.l1)] {
                let k = NodeKey {
                    mapping,
                    file,
                    level,
                    group: 0,
                };
                v.push((k, g));
            }
        }
        v
    }

    /// Applies one entry change to the counts (the part of `xas_store` that updates
    /// `node->count` and `xas_create`/`xas_delete_node` decide on), pushing the node places
    /// whose need may have changed onto `touched`.
    fn apply(&mut self, e: XaEvent, touched: &mut Vec<NodeKey>) {
        let fp = self.file_pages(e.mapping);
        let d = e.delta as i64;
        let (mut s, end) = (e.start, e.start + e.nr.max(1));
        while s < end {
            let (file, base, file_end) = match s.checked_div(fp) {
                None => (0, 0, u64::MAX),
                Some(f) => (f, f * fp, (f + 1) * fp),
            };
            let piece_end = end.min(file_end);
            let (rs, re) = (s - base, piece_end - base);
            let agg = self.files.entry((e.mapping, file)).or_default();
            agg.entries += d;
            if rs == 0 && re == 1 {
                agg.head0 += d;
            }
            if re > 1 << XA_CHUNK_SHIFT {
                agg.high += d;
            }
            let key = |level: u8, group: u64| NodeKey {
                mapping: e.mapping,
                file,
                level,
                group,
            };
            let chunk = 1u64 << XA_CHUNK_SHIFT;
            for g in rs >> XA_CHUNK_SHIFT..=(re - 1) >> XA_CHUNK_SHIFT {
                let whole = rs <= g * chunk && re >= (g + 1) * chunk;
                if !whole {
                    let grp = if g == 0 {
                        &mut agg.l0
                    } else {
                        self.groups.entry(key(0, g)).or_default()
                    };
                    grp.count += d;
                    if e.shadow {
                        grp.shadows += d;
                    }
                    if g != 0 {
                        touched.push(key(0, g));
                    }
                }
            }
            for g in rs >> (2 * XA_CHUNK_SHIFT)..=(re - 1) >> (2 * XA_CHUNK_SHIFT) {
                if g == 0 {
                    agg.l1.count += d;
                } else {
                    self.groups.entry(key(1, g)).or_default().count += d;
                    touched.push(key(1, g));
                }
            }
            touched.push(key(0, 0));
            touched.push(key(1, 0));
            s = piece_end;
        }
    }

    /// Whether the place `k` needs a node now (see the module documentation).
    fn required(&self, k: NodeKey) -> bool {
        let Some(agg) = self.files.get(&(k.mapping, k.file)) else {
            return false;
        };
        let count = if k.group == 0 {
            if k.level == 0 {
                agg.l0.count
            } else {
                agg.l1.count
            }
        } else {
            self.groups.get(&k).map_or(0, |g| g.count)
        };
        if count <= 0 {
            return false;
        }
        match k.level {
            0 => !(k.group == 0 && agg.entries == 1 && agg.head0 == 1),
            _ => agg.high > 0,
        }
    }
}

impl Mm {
    /// Turns the xarray-node model on or off; to be set at boot, before any page-cache
    /// insertion (the `[model] xa_nodes` switch).
    pub fn set_xa_nodes(&mut self, on: bool) {
        self.cache.xa.enabled = on;
        self.cache.index.xa_log_on = on;
    }

    /// Declares `mapping` to stand for files of `pages` pages each, laid end to end (file `k`
    /// holds indices `[k * pages, (k + 1) * pages)`), each with its own xarray; 0 = one file.
    pub fn xa_set_file_pages(&mut self, mapping: u32, pages: u64) {
        let m = (mapping - 1) as usize;
        if self.cache.xa.file_pages.len() <= m {
            self.cache.xa.file_pages.resize(m + 1, 0);
        }
        self.cache.xa.file_pages[m] = pages;
    }

    /// Brings the xarray nodes in line with the page cache and shadow entries changed since the
    /// last call: the node allocations of `xas_nomem`/`xas_alloc` (`radix_tree_node_alloc`
    /// through `kmem_cache_alloc_lru`, `radix_tree_node_ctor` is not modelled) and the frees of
    /// `xas_delete_node` / `workingset_update_node`'s shadow-node accounting. Called after every
    /// page-cache operation that has a CPU; a call made while one runs (a node allocation that
    /// entered reclaim, which evicted page cache) returns at once and the outer call settles
    /// the new changes too.
    pub(crate) fn xa_settle(&mut self, cpu: u32) {
        if !self.cache.xa.enabled || self.cache.xa.in_settle {
            return;
        }
        if self.cache.index.xa_log.is_empty() {
            return;
        }
        self.cache.xa.in_settle = true;
        let mut touched = Vec::new();
        loop {
            let ev = std::mem::take(&mut self.cache.index.xa_log);
            if ev.is_empty() {
                if self.cache.xa.stats.shadow_nodes > self.xa_max_shadow_nodes()
                    && self.xa_reclaim_shadow_node()
                {
                    continue;
                }
                break;
            }
            touched.clear();
            for e in ev {
                self.cache.xa.apply(e, &mut touched);
            }
            touched.sort_unstable();
            touched.dedup();
            for &k in &touched {
                self.xa_sync(cpu, k);
            }
        }
        self.cache.xa.in_settle = false;
    }

    /// `xas_create` / `xas_delete_node` for one node place: allocates the node it needs or
    /// frees the one it no longer needs.
    fn xa_sync(&mut self, cpu: u32, k: NodeKey) {
        let need = self.cache.xa.required(k);
        let has = self.cache.xa.group(k).and_then(|g| g.node);
        match (need, has) {
            (true, None) => {
                let base = self
                    .cache
                    .xa
                    .add_gfp
                    .unwrap_or_else(|| self.cache.mappings[(k.mapping - 1) as usize].gfp);
                match self.xa_node_alloc(cpu, base) {
                    Some(slot) => self.cache.xa.group_mut(k).node = Some(slot),
                    None => self.cache.xa.stats.alloc_failed += 1,
                }
            }
            (false, Some(slot)) => {
                self.cache.xa.group_mut(k).node = None;
                self.xa_node_free(cpu, slot);
            }
            _ => {}
        }
        if self.cache.xa.group(k).is_some() {
            let g = self.cache.xa.group_mut(k);
            debug_assert!(g.count >= 0, "xarray node place {k:?} has {} entries", g.count);
            let so = k.level == 0 && g.node.is_some() && g.count > 0 && g.count == g.shadows;
            if so != g.shadow_only {
                g.shadow_only = so;
                if so {
                    self.cache.xa.stats.shadow_nodes += 1;
                } else {
                    self.cache.xa.stats.shadow_nodes -= 1;
                }
            }
        }
    }

    /// `count_shadow_nodes` without memcg: at most `node_present_pages >> (XA_CHUNK_SHIFT - 3)`
    /// nodes holding only shadows before the shadow-node shrinker reclaims them.
    fn xa_max_shadow_nodes(&self) -> u64 {
        let present: u64 = self.zones.iter().map(|z| z.present as u64).sum();
        present >> (XA_CHUNK_SHIFT - 3)
    }

    /// `shadow_lru_isolate` (the shadow-node shrinker, mm/workingset.c), simplified: the node
    /// of the oldest shadow entry loses every shadow in its 64-index range (one
    /// `workingset_nodereclaim`) when it holds only shadows; otherwise only that shadow goes
    /// (the kernel would pick another node from its LRU of shadow-only nodes). Runs when the
    /// bound is exceeded, not only from reclaim's `shrink_slab`. Returns false with no shadow
    /// left.
    fn xa_reclaim_shadow_node(&mut self) -> bool {
        let Some((m, s, nr)) = self.cache.index.oldest_shadow() else {
            return false;
        };
        let fp = self.cache.xa.file_pages(m);
        let base = s.checked_div(fp).map_or(0, |f| f * fp);
        let chunk = 1u64 << XA_CHUNK_SHIFT;
        let g = (s - base) >> XA_CHUNK_SHIFT;
        let key = NodeKey {
            mapping: m,
            file: s.checked_div(fp).unwrap_or(0),
            level: 0,
            group: g,
        };
        let whole = self.cache.xa.group(key).is_some_and(|g| g.shadow_only);
        if whole {
            let lo = base + g * chunk;
            let hi = if fp == 0 {
                lo + chunk
            } else {
                (lo + chunk).min(base + fp)
            };
            self.cache.index.forget_shadow_range(m, lo, hi - lo);
            // WORKINGSET_NODERECLAIM counts nodes the shrinker reclaimed, not single shadows.
            self.count(crate::vmstat::Stat::workingset_nodereclaim, 1);
        } else {
            self.cache.index.forget_shadow_range(m, s, nr);
        }
        true
    }

    /// `radix_tree_node_alloc` / `xas_alloc` → `kmem_cache_alloc_lru(radix_tree_node_cachep)`:
    /// a node from the most recently used partial slab, or from a new slab (`allocate_slab`:
    /// order 1 first with __GFP_NOWARN | __GFP_NORETRY and, for a gfp that may reclaim, without
    /// reclaim at all; then order 0 with the caller's gfp). `gfp` is the insertion's, restricted
    /// to `GFP_RECLAIM_MASK`; __GFP_RECLAIMABLE is added (SLAB_RECLAIM_ACCOUNT). Returns the
    /// slab slot, or None if both page allocations failed.
    fn xa_node_alloc(&mut self, cpu: u32, gfp: Gfp) -> Option<u32> {
        while let Some(&s) = self.cache.xa.partial.last() {
            match self.cache.xa.slabs[s as usize].as_mut() {
                Some(p) if p.on_partial => {
                    p.live += 1;
                    if p.live == p.cap {
                        p.on_partial = false;
                        self.cache.xa.partial.pop();
                    }
                    self.cache.xa.stats.allocs += 1;
                    self.cache.xa.stats.nodes += 1;
                    return Some(s);
                }
                _ => {
                    self.cache.xa.partial.pop();
                }
            }
        }
        let flags = Gfp(gfp.0 & GFP_RECLAIM_MASK.0).union(Gfp::RECLAIMABLE);
        let mut high = flags.union(Gfp::NOWARN).union(Gfp::NORETRY).without(Gfp::NOFAIL);
        if high.contains(Gfp::DIRECT_RECLAIM) {
            high = high.union(Gfp::NOMEMALLOC).without(Gfp::RECLAIM);
        }
        let (folio, order, cap) = match self.alloc_folio(cpu, high, XA_SLAB_ORDER, FolioKind::Slab, false) {
            Some(f) => (f, XA_SLAB_ORDER, XA_OBJS_PER_SLAB),
            None => (
                self.alloc_folio(cpu, flags, 0, FolioKind::Slab, false)?,
                0,
                XA_OBJS_PER_MIN_SLAB,
            ),
        };
        if order == 0 {
            self.cache.xa.stats.slabs_order0 += 1;
        } else {
            self.cache.xa.stats.slabs_high += 1;
        }
        self.cache.xa.stats.pages += 1 << order;
        let token = self.folios.get(folio).token();
        let slab = NodeSlab {
            folio,
            token,
            live: 1,
            cap,
            on_partial: cap > 1,
        };
        let s = match self.cache.xa.free_slots.pop() {
            Some(s) => {
                self.cache.xa.slabs[s as usize] = Some(slab);
                s
            }
            None => {
                self.cache.xa.slabs.push(Some(slab));
                (self.cache.xa.slabs.len() - 1) as u32
            }
        };
        if cap > 1 {
            self.cache.xa.partial.push(s);
        }
        self.cache.xa.stats.allocs += 1;
        self.cache.xa.stats.nodes += 1;
        Some(s)
    }

    /// `radix_tree_node_rcu_free` → `kmem_cache_free`: the node goes back to its slab, and the
    /// slab page is freed with its last node (no RCU grace period, no empty-slab caching).
    fn xa_node_free(&mut self, cpu: u32, s: u32) {
        let p = self.cache.xa.slabs[s as usize]
            .as_mut()
            .expect("xarray node of a live slab");
        assert!(p.live > 0, "double free of an xarray node");
        p.live -= 1;
        self.cache.xa.stats.frees += 1;
        self.cache.xa.stats.nodes -= 1;
        if p.live == 0 {
            let (folio, token, cap) = (p.folio, p.token, p.cap);
            self.cache.xa.slabs[s as usize] = None;
            self.cache.xa.free_slots.push(s);
            let f = self.folios.get(folio);
            assert!(
                f.token() == token,
                "xarray node slab {folio} freed behind its back"
            );
            self.cache.xa.stats.pages -= if cap == XA_OBJS_PER_SLAB {
                1 << XA_SLAB_ORDER
            } else {
                1
            };
            self.free_folio(cpu, folio);
        } else if !p.on_partial {
            p.on_partial = true;
            self.cache.xa.partial.push(s);
        }
    }
}

impl Mm {
    /// Whether the xarray-node model is on and has nothing left to settle (so that
    /// [`Mm::xa_check`] applies).
    pub fn xa_settled(&self) -> bool {
        self.cache.xa.enabled && !self.cache.xa.in_settle && self.cache.index.xa_log.is_empty()
    }

    /// Consistency of the xarray-node model (for tests and debug-vm): recounts every node place
    /// from the page cache and the shadow entries, and checks that exactly the places that need
    /// a node hold one, failed allocations aside (`allow_missing`), and that the slab counters
    /// agree. Only meaningful when nothing is left to settle.
    pub fn xa_check(&self, allow_missing: bool) -> Result<(), String> {
        if !self.cache.xa.enabled {
            return Ok(());
        }
        if !self.cache.index.xa_log.is_empty() {
            return Err("unsettled xarray changes".into());
        }
        let mut fresh = XaNodes {
            file_pages: self.cache.xa.file_pages.clone(),
            ..Default::default()
        };
        let mut touched = Vec::new();
        for ((m, i), id) in self.cache.index.iter() {
            let nr = 1u64 << self.folios.folios[id as usize].order;
            let e = XaEvent {
                mapping: m,
                start: i,
                nr,
                delta: 1,
                shadow: false,
            };
            fresh.apply(e, &mut touched);
        }
        for ((m, s), sh) in self.cache.index.shadows() {
            let e = XaEvent {
                mapping: m,
                start: s,
                nr: sh.nr,
                delta: 1,
                shadow: true,
            };
            fresh.apply(e, &mut touched);
        }
        let mut nodes = 0;
        let mine = self.cache.xa.all_groups();
        for (k, g) in &mine {
            let want = fresh.group(*k).map_or(0, |f| f.count);
            let want_sh = fresh.group(*k).map_or(0, |f| f.shadows);
            if g.shadows != want_sh {
                return Err(format!("{k:?}: {} shadows counted, {want_sh} present", g.shadows));
            }
            if g.count != want {
                return Err(format!("{k:?}: {} entries counted, {want} present", g.count));
            }
        }
        for (k, g) in &fresh.all_groups() {
            let have = self.cache.xa.group(*k).and_then(|g| g.node);
            if g.count != 0 && self.cache.xa.group(*k).is_none() {
                return Err(format!("{k:?}: {} entries not counted", g.count));
            }
            let need = fresh.required(*k);
            if have.is_some() && !need {
                return Err(format!("{k:?}: a node nothing needs"));
            }
            if need && have.is_none() && !allow_missing {
                return Err(format!("{k:?}: needs a node and has none"));
            }
            nodes += have.is_some() as u64;
        }
        let shadow_only = mine.iter().filter(|(_, g)| g.shadow_only).count() as u64;
        if shadow_only != self.cache.xa.stats.shadow_nodes {
            return Err(format!(
                "{shadow_only} shadow-only nodes, {} counted",
                self.cache.xa.stats.shadow_nodes
            ));
        }
        let live: u64 = self.cache.xa.slabs.iter().flatten().map(|s| s.live as u64).sum();
        if nodes != self.cache.xa.stats.nodes || live != nodes {
            return Err(format!(
                "{nodes} nodes in place, {} counted, {live} live in slabs",
                self.cache.xa.stats.nodes
            ));
        }
        Ok(())
    }
}
