//! The debug-vm invariant checker (architecture.md "Errors"): after any operation, the buddy
//! state must be self-consistent. A violation is a bug in the model and fails loudly with the
//! state that broke it.

use crate::mmzone::*;
use crate::node::Mm;
use crate::types::*;
use crate::vmstat::Stat;

/// A broken invariant: what, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvariantViolation(pub String);

impl std::fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "debug-vm invariant violated: {}", self.0)
    }
}

impl std::error::Error for InvariantViolation {}

macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(InvariantViolation(format!($($arg)*)));
        }
    };
}

/// Page totals of the node, as the checker counted them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCensus {
    pub free: u64,
    pub pcp: u64,
    pub allocated: u64,
    /// Free chunks isolated by a running compaction (zero between operations).
    pub isolated: u64,
    pub managed: u64,
}

impl Mm {
    /// Checks every invariant; returns the page census on success.
    ///
    /// * Every free chunk is naturally aligned, inside its zone, on exactly the list of its
    ///   order and of its block's migratetype; lists are well linked; per-(order, type) counts
    ///   and `nr_free` equal the list contents.
    /// * NR_FREE_PAGES = pages on non-Isolate lists; NR_FREE_PAGES_BLOCKS = pages in chunks of
    ///   order ≥ 9 on non-Isolate lists; nr_free_highatomic = pages on HighAtomic lists.
    /// * PCP counts equal their lists; PCP chunks are of cached orders.
    /// * Chunks do not overlap; free + PCP + allocated = managed for every zone.
    #[allow(clippy::needless_range_loop)]
    pub fn check_invariants(&self) -> Result<PageCensus, InvariantViolation> {
        let mut census = PageCensus::default();
        // Walk the memory map: every managed page belongs to exactly one chunk.
        for (zi, z) in self.zones.iter().enumerate() {
            if z.spanned == 0 {
                continue;
            }
            let (mut free, mut pcp, mut alloc, mut isolated) = (0u64, 0u64, 0u64, 0u64);
            let (mut free_pages_nonisolate, mut blocks, mut highatomic) = (0i64, 0i64, 0u64);
            let mut chunks_by = [[0u64; MIGRATE_TYPES]; NR_PAGE_ORDERS];
            let mut pfn = z.start_pfn;
            while pfn < z.end_pfn() {
                let kind = self.pages.kind(pfn);
                match kind {
                    PageKind::Hole | PageKind::Reserved => {
                        pfn += 1;
                        continue;
                    }
                    PageKind::Tail => {
                        return Err(InvariantViolation(format!(
                            "zone {} pfn {pfn:#x}: managed page not covered by any chunk",
                            z.zone_type.name()
                        )));
                    }
                    _ => {}
                }
                let order = self.pages.order(pfn);
                ensure!(order <= MAX_PAGE_ORDER, "pfn {pfn:#x}: order {order}");
                ensure!(
                    pfn & ((1 << order) - 1) == 0,
                    "pfn {pfn:#x}: {kind:?} chunk of order {order} is not aligned"
                );
                let end = pfn + (1 << order);
                ensure!(
                    end <= z.end_pfn(),
                    "pfn {pfn:#x}: {kind:?} chunk of order {order} crosses the end of zone {}",
                    z.zone_type.name()
                );
                for p in pfn + 1..end {
                    let k = self.pages.kind(p);
                    ensure!(
                        k == PageKind::Tail,
                        "pfn {p:#x}: {k:?} inside the {kind:?} chunk at {pfn:#x} order {order}"
                    );
                }
                let nr = 1u64 << order;
                match kind {
                    PageKind::Buddy => {
                        free += nr;
                        let mt = self.block_mt(pfn);
                        chunks_by[order as usize][mt.idx()] += 1;
                        if mt != MigrateType::Isolate {
                            free_pages_nonisolate += nr as i64;
                            if order >= PAGEBLOCK_ORDER {
                                blocks += nr as i64;
                            }
                        }
                        if mt == MigrateType::HighAtomic {
                            highatomic += nr;
                        }
                        if order >= PAGEBLOCK_ORDER {
                            // A chunk covering several blocks: all of them of its type.
                            for b in 0..(1u32 << (order - PAGEBLOCK_ORDER)) {
                                let bmt = self.block_mt(pfn + b * PAGEBLOCK_NR_PAGES);
                                ensure!(bmt == mt, "free chunk {pfn:#x} order {order} spans blocks of types {mt:?} and {bmt:?}");
                            }
                        }
                    }
                    PageKind::Pcp => {
                        ensure!(
                            pcp_allowed_order(order),
                            "pfn {pfn:#x}: PCP chunk of order {order}"
                        );
                        pcp += nr;
                    }
                    PageKind::Allocated => {
                        alloc += nr;
                        let id = self.pages.a[pfn as usize];
                        if let Some(f) = self.folios.folios.get(id as usize) {
                            if f.live && f.pfn == pfn {
                                ensure!(
                                    f.order as u32 == order,
                                    "folio {id} at {pfn:#x}: order {} but the chunk has order {order}",
                                    f.order
                                );
                                ensure!(
                                    !f.isolated,
                                    "folio {id} at {pfn:#x} is still isolated between operations"
                                );
                                ensure!(
                                    self.pages.flag(pfn, PG_LRU) == f.kind.on_lru(),
                                    "folio {id} at {pfn:#x}: LRU flag does not match its kind"
                                );
                            }
                        }
                    }
                    PageKind::Isolated => isolated += nr,
                    _ => unreachable!(),
                }
                pfn = end;
            }
            ensure!(
                free + pcp + alloc + isolated == z.managed,
                "zone {}: free {free} + pcp {pcp} + allocated {alloc} + isolated {isolated} != managed {}",
                z.zone_type.name(),
                z.managed
            );
            // Lists match the memory map.
            for order in 0..NR_PAGE_ORDERS {
                let mut total = 0;
                for mt in 0..MIGRATE_TYPES {
                    let l = z.area.lists[order][mt];
                    let mut n = 0u64;
                    let mut prev = NIL;
                    let mut p = l.first;
                    while p != NIL {
                        ensure!(
                            self.pages.is_buddy_of_order(p, order as u32),
                            "free list [{order}][{mt}] of zone {} holds {p:#x} which is {:?} order {}",
                            z.zone_type.name(),
                            self.pages.kind(p),
                            self.pages.order(p)
                        );
                        ensure!(
                            self.block_mt(p).idx() == mt,
                            "free chunk {p:#x} order {order} on list {:?} but its block is {:?}",
                            MigrateType::from_index(mt),
                            self.block_mt(p)
                        );
                        ensure!(
                            self.zone_of(p) == zi,
                            "free chunk {p:#x} on a list of zone {}",
                            z.zone_type.name()
                        );
                        ensure!(
                            self.list_prev(p) == prev,
                            "free list [{order}][{mt}]: broken back link at {p:#x}"
                        );
                        prev = p;
                        p = self.list_next(p);
                        n += 1;
                        ensure!(
                            n <= z.managed,
                            "free list [{order}][{mt}] of zone {} loops",
                            z.zone_type.name()
                        );
                    }
                    ensure!(
                        l.last == prev,
                        "free list [{order}][{mt}]: last is {:#x}, walk ended at {prev:#x}",
                        l.last
                    );
                    ensure!(
                        n == z.area.nr_by_type[order][mt],
                        "free list [{order}][{mt}] of zone {}: {n} chunks, count says {}",
                        z.zone_type.name(),
                        z.area.nr_by_type[order][mt]
                    );
                    ensure!(
                        n == chunks_by[order][mt],
                        "free list [{order}][{mt}] of zone {}: {n} chunks on the list, {} in the memory map",
                        z.zone_type.name(),
                        chunks_by[order][mt]
                    );
                    total += n;
                }
                ensure!(
                    total == z.area.nr_free[order],
                    "zone {} order {order}: nr_free {} != {total}",
                    z.zone_type.name(),
                    z.area.nr_free[order]
                );
            }
            ensure!(
                z.stat(Stat::nr_free_pages) == free_pages_nonisolate,
                "zone {}: NR_FREE_PAGES {} != {free_pages_nonisolate} pages on non-isolate lists",
                z.zone_type.name(),
                z.stat(Stat::nr_free_pages)
            );
            ensure!(
                z.stat(Stat::nr_free_pages_blocks) == blocks,
                "zone {}: NR_FREE_PAGES_BLOCKS {} != {blocks}",
                z.zone_type.name(),
                z.stat(Stat::nr_free_pages_blocks)
            );
            ensure!(
                z.nr_free_highatomic == highatomic,
                "zone {}: nr_free_highatomic {} != {highatomic}",
                z.zone_type.name(),
                z.nr_free_highatomic
            );
            // PCP lists.
            let mut pcp_listed = 0u64;
            for (cpu, p) in z.pcp.iter().enumerate() {
                let mut n = 0u64;
                for (pindex, l) in p.lists.iter().enumerate() {
                    let order = pindex_to_order(pindex);
                    let mut prev = NIL;
                    let mut q = l.first;
                    while q != NIL {
                        ensure!(
                            self.pages.kind(q) == PageKind::Pcp && self.pages.order(q) == order,
                            "pcp list {pindex} of cpu {cpu} holds {q:#x} ({:?} order {})",
                            self.pages.kind(q),
                            self.pages.order(q)
                        );
                        ensure!(
                            self.zone_of(q) == zi,
                            "pcp chunk {q:#x} on a list of zone {}",
                            z.zone_type.name()
                        );
                        ensure!(
                            self.list_prev(q) == prev,
                            "pcp list {pindex}: broken back link at {q:#x}"
                        );
                        prev = q;
                        q = self.list_next(q);
                        n += 1 << order;
                        ensure!(n <= z.managed, "pcp list of zone {} loops", z.zone_type.name());
                    }
                    ensure!(l.last == prev, "pcp list {pindex} of cpu {cpu}: bad last");
                }
                ensure!(
                    n == p.count,
                    "zone {} cpu {cpu}: pcp count {} != {n} listed",
                    z.zone_type.name(),
                    p.count
                );
                pcp_listed += n;
            }
            ensure!(
                pcp_listed == pcp,
                "zone {}: {pcp} PCP pages in the memory map, {pcp_listed} on lists",
                z.zone_type.name()
            );
            census.free += free;
            census.pcp += pcp;
            census.allocated += alloc;
            census.isolated += isolated;
            census.managed += z.managed;
        }
        // The folio gauges equal what the folios add up to.
        {
            use crate::folio::FolioKind;
            // inactive anon, active anon, inactive file, active file, isolated anon, isolated
            // file, anon pages, file pages
            let mut expect = [0u64; 8];
            for (_, f) in self.folios.live() {
                let nr = 1u64 << f.order;
                let anon = match f.kind {
                    FolioKind::Anon => true,
                    FolioKind::File => false,
                    _ => continue,
                };
                let i = if f.isolated {
                    4 + !anon as usize
                } else {
                    2 * !anon as usize + f.active as usize
                };
                expect[i] += nr;
                expect[6 + !anon as usize] += nr;
            }
            let got = [
                self.stat(Stat::nr_inactive_anon),
                self.stat(Stat::nr_active_anon),
                self.stat(Stat::nr_inactive_file),
                self.stat(Stat::nr_active_file),
                self.stat(Stat::nr_isolated_anon),
                self.stat(Stat::nr_isolated_file),
                self.stat(Stat::nr_anon_pages),
                self.stat(Stat::nr_file_pages),
            ];
            ensure!(got == expect, "folio gauges {got:?} != {expect:?} (inactive/active anon, inactive/active file, isolated anon/file, anon, file)");
            let mut rss = std::collections::BTreeMap::new();
            for (_, f) in self.folios.live() {
                if f.owner > 1 && matches!(f.kind, FolioKind::Anon | FolioKind::PageTable) {
                    *rss.entry(f.owner).or_insert(0u64) += 1u64 << f.order;
                }
            }
            ensure!(
                rss == self.folios.rss,
                "per-owner rss {:?} != {rss:?}",
                self.folios.rss
            );
            let dirty: u64 = self
                .folios
                .live()
                .filter(|(_, f)| f.dirty)
                .map(|(_, f)| 1u64 << f.order)
                .sum();
            ensure!(
                dirty == self.nr_dirty,
                "nr_dirty {} != {dirty} dirty pages",
                self.nr_dirty
            );
            let mut content = vec![[0u32; 3]; self.block_content.len()];
            for (_, f) in self.folios.live() {
                if f.isolated {
                    continue;
                }
                let m = crate::folio::folio_mobility(f.kind, self.pages.b[f.pfn as usize]);
                let n = 1u32 << f.order;
                for k in 0..n.div_ceil(PAGEBLOCK_NR_PAGES) {
                    content[((f.pfn >> PAGEBLOCK_ORDER) + k) as usize][m] += n.min(PAGEBLOCK_NR_PAGES);
                }
            }
            if let Some(b) = (0..content.len()).find(|&b| content[b] != self.block_content[b]) {
                ensure!(
                    false,
                    "pageblock {b}: folio pages by mobility {:?} != {:?}",
                    self.block_content[b],
                    content[b]
                );
            }
            for ((m, i), id) in self.page_cache.iter() {
                let f = &self.folios.folios[id as usize];
                ensure!(
                    f.live && f.mapping == m && f.index == i,
                    "page cache {m}:{i} holds folio {id}, which is not live there"
                );
            }
            let zone_sum: i64 = [
                Stat::nr_zone_inactive_anon,
                Stat::nr_zone_active_anon,
                Stat::nr_zone_inactive_file,
                Stat::nr_zone_active_file,
            ]
            .iter()
            .map(|&s| self.zone_stat_sum(s))
            .sum();
            ensure!(
                zone_sum as u64 == expect[..4].iter().sum::<u64>(),
                "zone LRU gauges {zone_sum} != {:?}",
                &expect[..4]
            );
        }
        // LRU lists: well linked, each folio on the list its flags say, sizes match, and a folio
        // is on a list exactly when it is an unisolated LRU folio (PageLRU set).
        {
            let mut on_lists = 0usize;
            for l in 0..crate::vmscan::NR_LRU_LISTS {
                let (mut prev, mut pages, mut n) = (NIL, 0u64, 0usize);
                let mut id = self.lruvec.lists[l].first;
                while id != NIL {
                    let f = &self.folios.folios[id as usize];
                    ensure!(
                        f.live && f.lru as usize == l,
                        "LRU list {l} holds folio {id} (live {}, lru {})",
                        f.live,
                        f.lru
                    );
                    ensure!(
                        self.folio_lru_list(id) as usize == l,
                        "folio {id} on list {l} but belongs on {}",
                        self.folio_lru_list(id)
                    );
                    ensure!(f.lru_prev == prev, "LRU list {l}: broken back link at folio {id}");
                    ensure!(
                        self.pages.flag(f.pfn, PG_LRU),
                        "folio {id} on an LRU list without PageLRU"
                    );
                    pages += 1 << f.order;
                    prev = id;
                    id = f.lru_next;
                    n += 1;
                    ensure!(n <= self.folios.folios.len(), "LRU list {l} loops");
                }
                ensure!(self.lruvec.lists[l].last == prev, "LRU list {l}: bad last");
                ensure!(
                    self.lruvec.pages[l] == pages,
                    "LRU list {l}: size {} != {pages}",
                    self.lruvec.pages[l]
                );
                on_lists += n;
            }
            let lru_folios = self
                .folios
                .live()
                .filter(|(_, f)| f.kind.on_lru() && !f.isolated)
                .count();
            ensure!(
                on_lists == lru_folios,
                "{on_lists} folios on LRU lists, {lru_folios} unisolated LRU folios"
            );
        }
        // Reclaim state: swap slots used = pages in the swap map, within the device, a shadow
        // only for content in swap; page-cache shadows consistent and bounded; shrinkable slab
        // entries that are still live are slab folios.
        {
            let in_map: u64 = self.swap.map.values().sum();
            ensure!(
                in_map == self.swap.used && self.swap.used <= self.swap.total,
                "swap: {} slots used of {}, {in_map} pages in the swap map",
                self.swap.used,
                self.swap.total
            );
            ensure!(
                self.swap.map.values().all(|&n| n > 0),
                "swap map holds an empty entry"
            );
            ensure!(
                self.swap.shadows.keys().all(|t| self.swap.map.contains_key(t)),
                "swap shadow for content not in swap"
            );
            if let Err(e) = self.workingset.check(self.workingset_shadow_bound()) {
                return Err(InvariantViolation(format!("workingset: {e}")));
            }
            if self.xa_settled() {
                if let Err(e) = self.xa_check(true) {
                    return Err(InvariantViolation(format!("xarray nodes: {e}")));
                }
            }
            for &(id, token) in &self.shrinkable_slab {
                if let Some(f) = self.folios.folios.get(id as usize) {
                    ensure!(
                        !(f.live && f.token == token) || f.kind == crate::folio::FolioKind::Slab,
                        "shrinkable entry {id} is a live {:?} folio",
                        f.kind
                    );
                }
            }
        }
        // Every live folio sits at an allocated head of its order that names it.
        for (id, f) in self.folios.live() {
            ensure!(
                self.pages.kind(f.pfn) == PageKind::Allocated
                    && self.pages.order(f.pfn) == f.order as u32
                    && self.pages.a[f.pfn as usize] == id,
                "folio {id} (order {}) claims pfn {:#x}, which is {:?} order {} owned by {}",
                f.order,
                f.pfn,
                self.pages.kind(f.pfn),
                self.pages.order(f.pfn),
                self.pages.a[f.pfn as usize]
            );
        }
        Ok(census)
    }

    /// Panics with the violation if debug-vm is on and an invariant is broken.
    pub fn debug_check(&self) {
        if self.debug_vm {
            if let Err(e) = self.check_invariants() {
                panic!("{e}");
            }
        }
    }
}
