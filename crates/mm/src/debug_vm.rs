//! The debug-vm invariant checker (architecture.md "Errors"): after any operation, the buddy
//! state must be self-consistent. A violation is a bug in the model and fails loudly with the
//! state that broke it.
//!
//! One check per mechanism, run in a fixed order (the first violation found is the one
//! reported): per zone the memory map, the buddy free lists and their counters, the PCP lists;
//! then the folio gauges and what hangs off folios (rss, dirty pages, pageblock content, the page
//! cache), the LRU lists, the reclaim state (swap, workingset, xarray, slab shrinkers), and
//! last every live folio's head page.

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

/// What the walk of one zone's memory map counted, for the list and counter checks after it.
#[derive(Default)]
struct ZoneMapCount {
    free: u64,
    pcp: u64,
    alloc: u64,
    isolated: u64,
    /// Free pages in chunks on non-Isolate lists (NR_FREE_PAGES).
    free_pages_nonisolate: i64,
    /// Free pages in chunks of order ≥ `PAGEBLOCK_ORDER` on non-Isolate lists
    /// (NR_FREE_PAGES_BLOCKS).
    blocks: i64,
    /// Free pages in HighAtomic chunks (`nr_free_highatomic`).
    highatomic: u64,
    /// Free chunks by (order, migratetype of their block).
    chunks_by: [[u64; MIGRATE_TYPES]; NR_PAGE_ORDERS],
}

/// The folio gauges as the folios add them up: inactive anon, active anon, inactive file, active
/// file, isolated anon, isolated file, anon pages, file pages.
type FolioGauges = [u64; 10];

type Check = Result<(), InvariantViolation>;

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
    pub fn check_invariants(&self) -> Result<PageCensus, InvariantViolation> {
        let mut census = PageCensus::default();
        for (zi, z) in self.zones.iter().enumerate() {
            if z.spanned == 0 {
                continue;
            }
            let count = self.check_zone_memmap(z)?;
            self.check_free_lists(zi, z, &count.chunks_by)?;
            self.check_free_counters(z, &count)?;
            self.check_pcp_lists(zi, z, count.pcp)?;
            census.free += count.free;
            census.pcp += count.pcp;
            census.allocated += count.alloc;
            census.isolated += count.isolated;
            census.managed += z.managed;
        }
        let expect = self.check_folio_gauges()?;
        self.check_rss()?;
        self.check_dirty()?;
        self.check_block_content()?;
        self.check_page_cache()?;
        self.check_zone_lru_gauges(&expect)?;
        self.check_lru_lists()?;
        self.check_swap()?;
        self.check_workingset_and_xarray()?;
        self.check_shrinkable_slab()?;
        self.check_deferred_split()?;
        self.check_folio_heads()?;
        self.check_bdev()?;
        Ok(census)
    }

    /// The memory map of one zone (`kernel-model.md` §1.1, §1.4): every managed page belongs
    /// to exactly one naturally aligned chunk inside the zone, head followed by tails, and
    /// free + PCP + allocated + isolated = managed.
    fn check_zone_memmap(&self, z: &Zone) -> Result<ZoneMapCount, InvariantViolation> {
        let mut count = ZoneMapCount::default();
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
            let end = self.check_chunk_extent(z, pfn, kind, order)?;
            let nr = 1u64 << order;
            match kind {
                PageKind::Buddy => self.check_buddy_chunk(pfn, order, &mut count)?,
                PageKind::Pcp => {
                    ensure!(
                        pcp_allowed_order(order),
                        "pfn {pfn:#x}: PCP chunk of order {order}"
                    );
                    count.pcp += nr;
                }
                PageKind::Allocated => {
                    count.alloc += nr;
                    self.check_allocated_chunk(pfn, order)?;
                }
                PageKind::Isolated => count.isolated += nr,
                _ => unreachable!(),
            }
            pfn = end;
        }
        let ZoneMapCount {
            free,
            pcp,
            alloc,
            isolated,
            ..
        } = count;
        ensure!(
            free + pcp + alloc + isolated == z.managed,
            "zone {}: free {free} + pcp {pcp} + allocated {alloc} + isolated {isolated} != managed {}",
            z.zone_type.name(),
            z.managed
        );
        Ok(count)
    }

    /// A chunk's head (§1.4): an order up to `MAX_PAGE_ORDER`, naturally aligned, ending inside
    /// its zone, and every page after the head a tail. Returns the chunk's end pfn.
    fn check_chunk_extent(
        &self,
        z: &Zone,
        pfn: u32,
        kind: PageKind,
        order: u32,
    ) -> Result<u32, InvariantViolation> {
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
        Ok(end)
    }

    /// A free buddy chunk (§1.4, §1.7): counted by its block's migratetype; a chunk covering
    /// several pageblocks has all of them of its type.
    fn check_buddy_chunk(&self, pfn: u32, order: u32, count: &mut ZoneMapCount) -> Check {
        let nr = 1u64 << order;
        count.free += nr;
        let mt = self.block_mt(pfn);
        count.chunks_by[order as usize][mt.idx()] += 1;
        if mt != MigrateType::Isolate {
            count.free_pages_nonisolate += nr as i64;
            if order >= PAGEBLOCK_ORDER {
                count.blocks += nr as i64;
            }
        }
        if mt == MigrateType::HighAtomic {
            count.highatomic += nr;
        }
        if order >= PAGEBLOCK_ORDER {
            // A chunk covering several blocks: all of them of its type.
            for b in 0..(1u32 << (order - PAGEBLOCK_ORDER)) {
                let bmt = self.block_mt(pfn + b * PAGEBLOCK_NR_PAGES);
                ensure!(
                    bmt == mt,
                    "free chunk {pfn:#x} order {order} spans blocks of types {mt:?} and {bmt:?}"
                );
            }
        }
        Ok(())
    }

    /// An allocated chunk that heads a live folio: the folio's order, not isolated between
    /// operations, and PageLRU set exactly for LRU kinds (§10.3).
    fn check_allocated_chunk(&self, pfn: u32, order: u32) -> Check {
        let id = self.pages.a(pfn);
        if let Some(f) = self.folios.folios.get(id as usize) {
            if f.live() && f.pfn == pfn {
                ensure!(
                    f.order as u32 == order,
                    "folio {id} at {pfn:#x}: order {} but the chunk has order {order}",
                    f.order
                );
                ensure!(
                    !f.isolated(),
                    "folio {id} at {pfn:#x} is still isolated between operations"
                );
                ensure!(
                    self.pages.flag(pfn, PG_LRU) == f.kind.on_lru(),
                    "folio {id} at {pfn:#x}: LRU flag does not match its kind"
                );
            }
        }
        Ok(())
    }

    /// The buddy free lists of one zone match the memory map (§1.4): each list
    /// `free_area[order].free_list[mt]` well linked, holding only buddies of its order from
    /// blocks of its type in this zone; `nr_by_type` and `nr_free` equal the lists.
    #[allow(clippy::needless_range_loop)]
    fn check_free_lists(
        &self,
        zi: usize,
        z: &Zone,
        chunks_by: &[[u64; MIGRATE_TYPES]; NR_PAGE_ORDERS],
    ) -> Check {
        for order in 0..NR_PAGE_ORDERS {
            let mut total = 0;
            for mt in 0..MIGRATE_TYPES {
                let n = self.check_free_list(zi, z, order, mt)?;
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
        Ok(())
    }

    /// Walks one free list `[order][mt]` of a zone; returns its length in chunks.
    fn check_free_list(
        &self,
        zi: usize,
        z: &Zone,
        order: usize,
        mt: usize,
    ) -> Result<u64, InvariantViolation> {
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
            ensure!(
                self.reporting.enabled() || !self.pages.is_reported(p),
                "free chunk {p:#x} order {order} is marked reported without a reporting device (§32.3)"
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
        Ok(n)
    }

    /// The zone's free-page counters (§1.4, §5.5): NR_FREE_PAGES, NR_FREE_PAGES_BLOCKS and
    /// `nr_free_highatomic` equal what the memory map holds.
    fn check_free_counters(&self, z: &Zone, count: &ZoneMapCount) -> Check {
        let ZoneMapCount {
            free_pages_nonisolate,
            blocks,
            highatomic,
            ..
        } = *count;
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
        Ok(())
    }

    /// The per-CPU page lists of one zone (§2.1): holding PCP chunks of the
    /// list's order (`order_to_pindex`) from this zone; each `pcp->count` equals its lists,
    /// and the lists together hold the `pcp` PCP pages the memory map counted.
    fn check_pcp_lists(&self, zi: usize, z: &Zone, pcp: u64) -> Check {
        let mut pcp_listed = 0u64;
        for (cpu, p) in z.pcp.iter().enumerate() {
            let mut n = 0u64;
            for (pindex, l) in p.lists.iter().enumerate() {
                let order = pindex_to_order(pindex);
                for q in l.iter() {
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
                    n += 1 << order;
                    ensure!(
                        n <= z.managed,
                        "pcp list of zone {} holds more than the zone",
                        z.zone_type.name()
                    );
                }
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
        Ok(())
    }

    /// The folio gauges (§10.3, §14: nr_{in,}active_{anon,file}, nr_isolated_{anon,file},
    /// nr_anon_pages, nr_file_pages) equal what the live anon and file folios add up to.
    /// Returns the sums.
    fn check_folio_gauges(&self) -> Result<FolioGauges, InvariantViolation> {
        use crate::folio::FolioKind;
        // inactive anon, active anon, inactive file, active file, isolated anon, isolated
        // file, anon pages, file pages, unevictable (§29.1.4), mlocked (NR_MLOCK)
        let mut expect = [0u64; 10];
        let mut bdev = 0u64;
        for (id, f) in self.folios.live() {
            let nr = 1u64 << f.order;
            if f.kind == FolioKind::Bdev {
                // §33 (`bdev.rs`): an order-0 page of a filesystem's device, with its buffer.
                bdev += 1;
                ensure!(
                    f.order == 0 && self.bdev_has_buf(f.mapping, f.index),
                    "bdev folio {id} (mapping {}, block {}, order {}) has no buffer",
                    f.mapping,
                    f.index,
                    f.order
                );
            }
            let anon = match f.kind {
                FolioKind::Anon => true,
                FolioKind::File | FolioKind::Bdev => false,
                _ => continue,
            };
            let i = if f.isolated() {
                4 + !anon as usize
            } else if f.unevictable() {
                8
            } else {
                2 * !anon as usize + f.active() as usize
            };
            expect[i] += nr;
            // NR_ANON_MAPPED counts the mapped subpages (§31.2 item 3).
            expect[6 + !anon as usize] += if anon { self.folios.mapped_pages(id) } else { nr };
            if f.mlocked() {
                expect[9] += nr;
            }
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
            self.stat(Stat::nr_unevictable),
            self.zone_stat_sum(Stat::nr_mlock) as u64,
        ];
        ensure!(got == expect, "folio gauges {got:?} != {expect:?} (inactive/active anon, inactive/active file, isolated anon/file, anon, file, unevictable, mlock)");
        let bufs = self.bdev_nr_bufs();
        ensure!(bdev == bufs, "{bdev} bdev folios but {bufs} buffers");
        Ok(expect)
    }

    /// Per-owner rss (§19.2 item 10): the anon and page-table pages of every owning process.
    fn check_rss(&self) -> Check {
        use crate::folio::FolioKind;
        let mut rss = std::collections::BTreeMap::new();
        for (id, f) in self.folios.live() {
            if f.owner > 1 && matches!(f.kind, FolioKind::Anon | FolioKind::PageTable) {
                // Mapped pages only (§31.2 item 3: a zapped subpage leaves the rss).
                *rss.entry(f.owner).or_insert(0u64) += self.folios.mapped_pages(id);
            }
        }
        let kept: std::collections::BTreeMap<u32, u64> = self.folios.rss.iter().collect();
        ensure!(rss == kept, "per-owner rss {kept:?} != {rss:?}");
        Ok(())
    }

    /// NR_FILE_DIRTY: `nr_dirty` equals the pages of dirty live folios; `oldest_dirty_ns` is a
    /// lower bound of every dirty folio's `dirtied_ns` (the flusher's skip is then exact).
    fn check_dirty(&self) -> Check {
        let mut dirty = 0u64;
        for (id, f) in self.folios.live().filter(|(_, f)| f.dirty()) {
            dirty += 1u64 << f.order;
            let d = self.folios.dirtied_ns(id);
            ensure!(
                d >= self.cache.oldest_dirty_ns,
                "folio {id} dirtied at {d} ns, before oldest_dirty_ns {}",
                self.cache.oldest_dirty_ns
            );
        }
        ensure!(
            dirty == self.cache.nr_dirty,
            "nr_dirty {} != {dirty} dirty pages",
            self.cache.nr_dirty
        );
        Ok(())
    }

    /// The block-device page cache (§33, `bdev.rs`), its buffer heads: each buffer's slab is a
    /// live slab folio whose live objects are the buffers pointing at it, and they add up to
    /// the cache's count. (That every bdev folio has its block's buffer and no buffer is
    /// without its folio is checked in `check_folio_gauges`' walk of the folios.)
    fn check_bdev(&self) -> Check {
        let mut per_slab: Vec<u32> = Vec::new();
        for (_, _, bh) in self.bdev_bufs() {
            if bh != u32::MAX {
                if per_slab.len() <= bh as usize {
                    per_slab.resize(bh as usize + 1, 0);
                }
                per_slab[bh as usize] += 1;
            }
        }
        let mut objects = 0u64;
        for (s, &n) in per_slab.iter().enumerate().filter(|(_, n)| **n > 0) {
            let Some((folio, live)) = self.bh_slab(s as u32) else {
                return Err(InvariantViolation(format!("buffer heads in freed slab {s}")));
            };
            ensure!(
                live == n,
                "buffer_head slab {s}: {live} live objects, {n} buffers"
            );
            ensure!(
                self.folios.folios[folio as usize].live()
                    && self.folios.folios[folio as usize].kind == crate::folio::FolioKind::Slab,
                "buffer_head slab {s}: folio {folio} is not a live slab folio"
            );
            objects += n as u64;
        }
        ensure!(
            objects == self.bh_census().0,
            "{} buffer heads counted, {objects} held",
            self.bh_census().0
        );
        Ok(())
    }

    /// Pageblock content (§1.2; `block_content`, kept by `account_folio`): the folio pages of
    /// each mobility counted per pageblock equal the unisolated live folios in it.
    fn check_block_content(&self) -> Check {
        let mut content = vec![[0u32; 3]; self.block_content.len()];
        for (_, f) in self.folios.live() {
            if f.isolated() {
                continue;
            }
            let m = crate::folio::folio_mobility(f.kind, self.pages.b(f.pfn));
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
        Ok(())
    }

    /// The page cache (§12): every (mapping, index) entry names a live folio at that index;
    /// PAGECACHE_TAG_DIRTY marks exactly the dirty ones, and the marked walk visits them in
    /// the full walk's order.
    fn check_page_cache(&self) -> Check {
        let mut dirty = Vec::new();
        for ((m, i), id) in self.cache.index.iter() {
            let f = &self.folios.folios[id as usize];
            ensure!(
                f.live() && f.mapping == m && f.index == i,
                "page cache {m}:{i} holds folio {id}, which is not live there"
            );
            if f.dirty() {
                dirty.push(((m, i), id));
            }
        }
        // Tagged exactly when dirty: the tagged walk is the full walk's dirty folios.
        ensure!(
            self.cache.index.iter_dirty().eq(dirty.iter().copied()),
            "the dirty-tagged walk differs from the dirty folios of the full walk"
        );
        // The tagged folios by age: the same folios, with their dirtying times and pages.
        let mut by_age: Vec<(u64, u32)> = dirty
            .iter()
            .map(|&(_, id)| (self.folios.dirtied_ns(id), id))
            .collect();
        by_age.sort_unstable();
        ensure!(
            self.cache.index.dirty_by_age().eq(by_age.iter().copied()),
            "the dirty page cache by age differs from the tagged folios' dirtying times"
        );
        let pages: u64 = dirty
            .iter()
            .map(|&(_, id)| 1u64 << self.folios.folios[id as usize].order)
            .sum();
        ensure!(
            pages == self.cache.index.dirty_pages(),
            "{} dirty-tagged pages counted, {pages} tagged",
            self.cache.index.dirty_pages()
        );
        Ok(())
    }

    /// The per-zone LRU gauges (NR_ZONE_{IN,}ACTIVE_{ANON,FILE}) sum to the node's unisolated
    /// LRU folio pages.
    fn check_zone_lru_gauges(&self, expect: &FolioGauges) -> Check {
        let zone_sum: i64 = [
            Stat::nr_zone_inactive_anon,
            Stat::nr_zone_active_anon,
            Stat::nr_zone_inactive_file,
            Stat::nr_zone_active_file,
            Stat::nr_zone_unevictable,
        ]
        .iter()
        .map(|&s| self.zone_stat_sum(s))
        .sum();
        ensure!(
            zone_sum as u64 == expect[..4].iter().sum::<u64>() + expect[8],
            "zone LRU gauges {zone_sum} != {:?}",
            &expect[..4]
        );
        Ok(())
    }

    /// LRU lists (§10.3): well linked, each folio on the list its flags say, sizes match, and a
    /// folio is on a list exactly when it is an unisolated LRU folio (PageLRU set).
    fn check_lru_lists(&self) -> Check {
        let mut on_lists = 0usize;
        for l in 0..crate::vmscan::NR_LRU_LISTS {
            on_lists += self.check_lru_list(l)?;
        }
        let lru_folios = self
            .folios
            .live()
            .filter(|(_, f)| f.kind.on_lru() && !f.isolated())
            .count();
        ensure!(
            on_lists == lru_folios,
            "{on_lists} folios on LRU lists, {lru_folios} unisolated LRU folios"
        );
        Ok(())
    }

    /// Walks LRU list `l` (`folio_lru_list`); returns its length in folios.
    fn check_lru_list(&self, l: usize) -> Result<usize, InvariantViolation> {
        let (mut prev, mut pages, mut n) = (NIL, 0u64, 0usize);
        let mut id = self.reclaim.lruvec.lists[l].first;
        while id != NIL {
            let f = &self.folios.folios[id as usize];
            ensure!(
                f.live() && f.lru as usize == l,
                "LRU list {l} holds folio {id} (live {}, lru {})",
                f.live(),
                f.lru
            );
            ensure!(
                self.folio_lru_list(id) as usize == l,
                "folio {id} on list {l} but belongs on {}",
                self.folio_lru_list(id)
            );
            let [next, back] = self.folios.lru_links[id as usize];
            ensure!(back == prev, "LRU list {l}: broken back link at folio {id}");
            ensure!(
                self.pages.flag(f.pfn, PG_LRU),
                "folio {id} on an LRU list without PageLRU"
            );
            pages += 1 << f.order;
            prev = id;
            id = next;
            n += 1;
            ensure!(n <= self.folios.folios.len(), "LRU list {l} loops");
        }
        ensure!(
            self.reclaim.lruvec.lists[l].last == prev,
            "LRU list {l}: bad last"
        );
        ensure!(
            self.reclaim.lruvec.pages[l] == pages,
            "LRU list {l}: size {} != {pages}",
            self.reclaim.lruvec.pages[l]
        );
        Ok(n)
    }

    /// Swap (§10.3.6): slots used = pages in the swap map, within the device, no empty entry,
    /// a shadow only for content in swap.
    fn check_swap(&self) -> Check {
        let in_map: u64 = self.reclaim.swap.map.values().sum();
        ensure!(
            in_map == self.reclaim.swap.used && self.reclaim.swap.used <= self.reclaim.swap.total,
            "swap: {} slots used of {}, {in_map} pages in the swap map",
            self.reclaim.swap.used,
            self.reclaim.swap.total
        );
        ensure!(
            self.reclaim.swap.map.values().all(|&n| n > 0),
            "swap map holds an empty entry"
        );
        ensure!(
            self.reclaim
                .swap
                .shadows
                .keys()
                .all(|t| self.reclaim.swap.map.contains_key(t)),
            "swap shadow for content not in swap"
        );
        Ok(())
    }

    /// Page-cache shadows (§10.3.8, mm/workingset.c) consistent and bounded; the xarray nodes
    /// that hold them consistent once settled.
    fn check_workingset_and_xarray(&self) -> Check {
        if let Err(e) = self.reclaim.workingset.check(self.workingset_shadow_bound()) {
            return Err(InvariantViolation(format!("workingset: {e}")));
        }
        if self.xa_settled() {
            if let Err(e) = self.xa_check(true) {
                return Err(InvariantViolation(format!("xarray nodes: {e}")));
            }
        }
        Ok(())
    }

    /// Shrinkable slab entries that are still live are slab folios declared to the shrinker,
    /// and the shrinker's live count is their number.
    fn check_shrinkable_slab(&self) -> Check {
        let mut live = 0u64;
        for &(id, token) in &self.reclaim.shrinkable_slab {
            if let Some(f) = self.folios.folios.get(id as usize) {
                if f.live() && f.token() == token {
                    ensure!(
                        f.kind == crate::folio::FolioKind::Slab && f.on_shrinker(),
                        "shrinkable entry {id} is a live {:?} folio (declared: {})",
                        f.kind,
                        f.on_shrinker()
                    );
                    live += 1;
                }
            }
        }
        ensure!(
            live == self.folios.nr_shrinkable,
            "{live} live shrinkable slab entries, count {}",
            self.folios.nr_shrinkable
        );
        Ok(())
    }

    /// The deferred split state (§31): the queue's length is the number of queued folios and
    /// each has exactly one live entry; PG_partially_mapped only on queued large anon folios,
    /// counted per size in `nr_anon_partially_mapped`; a subpage map only on large anon
    /// folios, with a subpage still mapped, not all of them on a partially mapped one; PMD
    /// splits only on PMD-size anon folios; NR_ANON_THPS = the pages of the PMD-mapped ones.
    fn check_deferred_split(&self) -> Check {
        use crate::folio::FolioKind;
        let mut queued = 0u64;
        let mut partial = [0u64; NR_PAGE_ORDERS];
        let mut thp = 0u64;
        for (id, f) in self.folios.live() {
            let nr = 1u32 << f.order;
            let anon_large = f.kind == FolioKind::Anon && f.order > 1;
            if f.deferred() {
                ensure!(
                    anon_large,
                    "folio {id} ({:?} order {}) is queued",
                    f.kind,
                    f.order
                );
                queued += 1;
            }
            if f.partially_mapped() {
                ensure!(f.deferred(), "folio {id} is partially mapped but not queued");
                partial[f.order as usize] += 1;
                let m = self.folios.submap(id);
                ensure!(
                    m.is_some_and(|m| m.mapped.count() < nr),
                    "partially mapped folio {id} has no unmapped subpage"
                );
            }
            if let Some(m) = self.folios.submap(id) {
                ensure!(
                    f.kind == FolioKind::Anon && f.order > 0,
                    "folio {id} ({:?} order {}) has a subpage map",
                    f.kind,
                    f.order
                );
                ensure!(
                    !m.mapped.is_empty()
                        && m.mapped
                            .and_not(&crate::huge_memory::Subpages::full(nr))
                            .is_empty(),
                    "folio {id}: subpage map {:?} of an order-{} folio",
                    m.mapped,
                    f.order
                );
            }
            if f.pmd_split() {
                ensure!(
                    f.kind == FolioKind::Anon && f.order as u32 == HPAGE_PMD_ORDER,
                    "folio {id} ({:?} order {}) is PMD-split",
                    f.kind,
                    f.order
                );
            } else if f.kind == FolioKind::Anon && f.order as u32 == HPAGE_PMD_ORDER {
                thp += nr as u64;
            }
        }
        let q = &self.deferred_split;
        ensure!(
            queued == q.len,
            "split_queue_len {} != {queued} queued folios",
            q.len
        );
        let live: Vec<_> = q.queued(&self.folios).collect();
        let mut uniq = live.clone();
        uniq.sort_unstable();
        uniq.dedup();
        ensure!(
            live.len() as u64 == queued && uniq.len() == live.len(),
            "{} live queue entries ({} distinct) for {queued} queued folios",
            live.len(),
            uniq.len()
        );
        ensure!(
            partial == self.mthp.nr_anon_partially_mapped,
            "nr_anon_partially_mapped {:?} != {partial:?}",
            self.mthp.nr_anon_partially_mapped
        );
        ensure!(
            thp == self.stat(Stat::nr_anon_transparent_hugepages),
            "nr_anon_transparent_hugepages {} != {thp} pages of PMD-mapped folios",
            self.stat(Stat::nr_anon_transparent_hugepages)
        );
        Ok(())
    }

    /// Every live folio sits at an allocated head of its order that names it.
    fn check_folio_heads(&self) -> Check {
        for (id, f) in self.folios.live() {
            ensure!(
                self.pages.kind(f.pfn) == PageKind::Allocated
                    && self.pages.order(f.pfn) == f.order as u32
                    && self.pages.a(f.pfn) == id,
                "folio {id} (order {}) claims pfn {:#x}, which is {:?} order {} owned by {}",
                f.order,
                f.pfn,
                self.pages.kind(f.pfn),
                self.pages.order(f.pfn),
                self.pages.a(f.pfn)
            );
        }
        Ok(())
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
