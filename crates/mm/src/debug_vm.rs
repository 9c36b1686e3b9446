//! The debug-vm invariant checker (architecture.md "Errors"): after any operation, the buddy
//! state must be self-consistent. A violation is a bug in the model and fails loudly with the
//! state that broke it.
//!
//! One check per mechanism, run in a fixed order (the first violation found is the one
//! reported): per zone the memory map, the buddy free lists and their counters, the PCP lists;
//! then the links of the LRU lists; then one pass over the folio table for everything a folio
//! says of itself (its head page, its LRU list, the gauges, rss, dirty pages, pageblock
//! content, the deferred split: `folios.rs`); then the page cache and the reclaim state
//! (swap, workingset, xarray, slab shrinkers, buffer heads).
//!
//! Two entry points:
//! * [`Mm::check_invariants`], the full check: everything above, every page and every folio.
//!   `[run] debug_vm` (after every operation of a timeless run, every `debug_vm_every` task
//!   steps of a timed run and at its end), `fraglab soak`, the property and rule tests use it.
//! * [`Mm::check_invariants_sampled`] (`sampled.rs`), the default end-of-run check of a timed
//!   run without `debug_vm`: the full check on a machine of up to 16 GiB; above, every list and
//!   every counter in full (one in-order pass over the folio table for the folio totals) and
//!   the memory map and the per-folio checks that read at random on a seeded sample of one unit
//!   and one folio stripe in 16. `sampled.rs` lists exactly what each covers.

use crate::mmzone::*;
use crate::node::Mm;
use crate::types::*;
use crate::vmstat::Stat;

/// A broken invariant: what, and where.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
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
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCensus {
    pub free: u64,
    pub pcp: u64,
    pub allocated: u64,
    /// Free chunks isolated by a running compaction (zero between operations).
    pub isolated: u64,
    pub managed: u64,
}

/// What the walk of one zone's memory map counted, for the list and counter checks after it.
#[derive(serde::Serialize, serde::Deserialize, Default)]
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

mod folios;
mod sampled;

pub use sampled::{CheckSample, FOLIO_STRIPE};

impl Mm {
    /// Checks every invariant (the full check: every page of the memory map, every folio, every
    /// list walked from its head); returns the page census on success.
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
            self.check_free_lists(zi, z, Some(&count.chunks_by), |_, _| Ok(()))?;
            self.check_free_counters(z, &count)?;
            self.check_pcp_lists(zi, z, Some(count.pcp), |_| {})?;
            census.free += count.free;
            census.pcp += count.pcp;
            census.allocated += count.alloc;
            census.isolated += count.isolated;
            census.managed += z.managed;
        }
        let (expect, cache) = self.check_folio_table(&self.check_lru_links()?)?;
        self.check_page_cache(cache)?;
        self.check_zone_lru_gauges(&expect)?;
        self.check_swap()?;
        self.check_workingset_and_xarray()?;
        self.check_shrinkable_slab()?;
        self.check_bdev()?;
        Ok(census)
    }

    /// The memory map of one zone (docs/model §1.1, §1.4): every managed page belongs
    /// to exactly one naturally aligned chunk inside the zone, head followed by tails, and
    /// free + PCP + allocated + isolated = managed.
    fn check_zone_memmap(&self, z: &Zone) -> Result<ZoneMapCount, InvariantViolation> {
        let mut count = ZoneMapCount::default();
        let mut pfn = z.start_pfn;
        while pfn < z.end_pfn() {
            let Some((kind, order, end)) = self.chunk_at(z, pfn)? else {
                pfn += 1;
                continue;
            };
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
                // The folio a head names is checked from the folio's side, in one pass over
                // the folio table (`check_folios`): a walk of the memory map that read each
                // head's folio would touch the table in random order.
                PageKind::Allocated => count.alloc += nr,
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
    /// The chunk whose head is `pfn`, as the memory-map walks meet it: `None` for a hole or a
    /// reserved page (the walk steps one page), a violation for a managed page no chunk
    /// covers, else its kind, order and end (its extent checked by `check_chunk_extent`).
    pub(super) fn chunk_at(
        &self,
        z: &Zone,
        pfn: u32,
    ) -> Result<Option<(PageKind, u32, u32)>, InvariantViolation> {
        let kind = self.pages.kind(pfn);
        match kind {
            PageKind::Hole | PageKind::Reserved => return Ok(None),
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
        Ok(Some((kind, order, end)))
    }

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

    /// The buddy free lists of one zone match the memory map (§1.4): each list
    /// `free_area[order].free_list[mt]` well linked, holding only buddies of its order from
    /// blocks of its type in this zone; `nr_by_type` and `nr_free` equal the lists, and (given
    /// `chunks_by`, what the walk of the memory map counted) the memory map's free chunks.
    /// `visit(pfn, order)` sees every listed chunk after its own checks. Returns the chunks
    /// listed by (order, migratetype).
    #[allow(clippy::needless_range_loop)]
    fn check_free_lists(
        &self,
        zi: usize,
        z: &Zone,
        chunks_by: Option<&[[u64; MIGRATE_TYPES]; NR_PAGE_ORDERS]>,
        mut visit: impl FnMut(u32, u32) -> Check,
    ) -> Result<[[u64; MIGRATE_TYPES]; NR_PAGE_ORDERS], InvariantViolation> {
        let mut listed = [[0u64; MIGRATE_TYPES]; NR_PAGE_ORDERS];
        for order in 0..NR_PAGE_ORDERS {
            let mut total = 0;
            for mt in 0..MIGRATE_TYPES {
                let n = self.check_free_list(zi, z, order, mt, &mut visit)?;
                listed[order][mt] = n;
                ensure!(
                    n == z.area.nr_by_type[order][mt],
                    "free list [{order}][{mt}] of zone {}: {n} chunks, count says {}",
                    z.zone_type.name(),
                    z.area.nr_by_type[order][mt]
                );
                if let Some(chunks_by) = chunks_by {
                    ensure!(
                        n == chunks_by[order][mt],
                        "free list [{order}][{mt}] of zone {}: {n} chunks on the list, {} in the memory map",
                        z.zone_type.name(),
                        chunks_by[order][mt]
                    );
                }
                total += n;
            }
            ensure!(
                total == z.area.nr_free[order],
                "zone {} order {order}: nr_free {} != {total}",
                z.zone_type.name(),
                z.area.nr_free[order]
            );
        }
        Ok(listed)
    }

    /// Walks one free list `[order][mt]` of a zone, calling `visit(pfn, order)` for each chunk
    /// after its checks; returns its length in chunks.
    fn check_free_list(
        &self,
        zi: usize,
        z: &Zone,
        order: usize,
        mt: usize,
        visit: &mut impl FnMut(u32, u32) -> Check,
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
            visit(p, order as u32)?;
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
    /// and (given `pcp`) the lists together hold the `pcp` PCP pages the memory map counted.
    /// `visit(pfn)` sees every listed chunk. Returns the pages listed.
    fn check_pcp_lists(
        &self,
        zi: usize,
        z: &Zone,
        pcp: Option<u64>,
        mut visit: impl FnMut(u32),
    ) -> Result<u64, InvariantViolation> {
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
                    visit(q);
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
        if let Some(pcp) = pcp {
            ensure!(
                pcp_listed == pcp,
                "zone {}: {pcp} PCP pages in the memory map, {pcp_listed} on lists",
                z.zone_type.name()
            );
        }
        Ok(pcp_listed)
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

    /// The page cache (§12): its entries are exactly the live folios that have a mapping, each
    /// at its (mapping, index); PAGECACHE_TAG_DIRTY marks exactly the dirty ones, the marked
    /// walk visits them in key order, and the dirty set by age holds them with their dirtying
    /// times.
    ///
    /// The index is walked in key order and the folio table (the pass, `cache`) in id order:
    /// they are compared by count and fingerprint ([`folios::entry_fp`]), so neither walk
    /// reads the other's items at random. On a mismatch [`Mm::find_page_cache_violation`]
    /// names the entry or folio that breaks it.
    fn check_page_cache(&self, cache: folios::CacheSums) -> Check {
        let (mut n, mut fp) = (0u64, 0u64);
        let len = self.folios.folios.len();
        for ((m, i), id) in self.cache.index.iter() {
            ensure!(
                (id as usize) < len,
                "page cache {m}:{i} holds folio {id}, past the folio table ({len})"
            );
            n += 1;
            fp = fp.wrapping_add(folios::entry_fp(m, i, id));
        }
        let (mut nd, mut fpd, mut prev) = (0u64, 0u64, None);
        for ((m, i), id) in self.cache.index.iter_dirty() {
            ensure!(
                prev < Some((m, i)),
                "the dirty-tagged walk visits {m}:{i} after {prev:?}"
            );
            prev = Some((m, i));
            nd += 1;
            fpd = fpd.wrapping_add(folios::entry_fp(m, i, id));
        }
        if (n, fp, nd, fpd) != (cache.entries, cache.fp, cache.dirty, cache.dirty_fp) {
            return Err(self.find_page_cache_violation());
        }
        let mut by_age = cache.by_age;
        by_age.sort_unstable();
        ensure!(
            self.cache.index.dirty_by_age().eq(by_age.iter().copied()),
            "the dirty page cache by age differs from the tagged folios' dirtying times"
        );
        ensure!(
            cache.dirty_pages == self.cache.index.dirty_pages(),
            "{} dirty-tagged pages counted, {} tagged",
            self.cache.index.dirty_pages(),
            cache.dirty_pages
        );
        Ok(())
    }

    /// The slow half of [`Mm::check_page_cache`], run only when its fingerprints disagree:
    /// the entry that names a folio not live at its key, the tag that differs from its folio's
    /// dirty flag, or the folio with a mapping that is not in the index.
    fn find_page_cache_violation(&self) -> InvariantViolation {
        let found = || -> Check {
            for ((m, i), id) in self.cache.index.iter() {
                let f = &self.folios.folios[id as usize];
                ensure!(
                    f.live() && f.mapping == m && f.index == i,
                    "page cache {m}:{i} holds folio {id}, which is not live there"
                );
                ensure!(
                    self.cache.index.is_dirty(m, i) == f.dirty(),
                    "page cache {m}:{i}: folio {id} is {}dirty but {}tagged dirty",
                    if f.dirty() { "" } else { "not " },
                    if f.dirty() { "not " } else { "" }
                );
            }
            for (id, f) in self.folios.live().filter(|(_, f)| f.mapping != 0) {
                ensure!(
                    self.cache.index.get(f.mapping, f.index) == Some(id),
                    "folio {id} has mapping {} index {} but the page cache holds {:?} there",
                    f.mapping,
                    f.index,
                    self.cache.index.get(f.mapping, f.index)
                );
            }
            Ok(())
        };
        match found() {
            Err(e) => e,
            Ok(()) => InvariantViolation(
                "the page cache and the folio table differ (fingerprints), but no single entry was found"
                    .into(),
            ),
        }
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

    /// LRU lists (§10.3), their links: each list well linked (back links, `last`) and free of
    /// loops, no folio on two lists or twice on one. Returns each folio's list as a tag
    /// (list + 1, 0 for none), which `check_folio_table` compares with the folio's own state
    /// in its pass over the folio table: the walk reads only the links, not the folios, whose random order
    /// made it the dearest part of the check.
    fn check_lru_links(&self) -> Result<Vec<u8>, InvariantViolation> {
        let n = self.folios.folios.len();
        let mut tags = vec![0u8; n];
        for (nid, lv) in self.reclaim.lruvec.iter().enumerate() {
            for l in 0..crate::vmscan::NR_LRU_LISTS {
                let mut prev = NIL;
                let mut id = lv.lists[l].first;
                let mut pages = 0u64;
                while id != NIL {
                    ensure!(
                        (id as usize) < n,
                        "LRU list {l} holds folio {id}, past the folio table ({n})"
                    );
                    let tag = tags[id as usize];
                    ensure!(
                        tag == 0,
                        "LRU list {l} reaches folio {id} a second time (it is on list {}): a loop or a shared folio",
                        tag - 1
                    );
                    tags[id as usize] = l as u8 + 1;
                    let f = &self.folios.folios[id as usize];
                    pages += 1u64 << f.order;
                    if self.numa.multi() {
                        let fnid = self.pfn_nid(f.pfn) as usize;
                        ensure!(
                            fnid == nid,
                            "folio {id} of node {fnid} is on node {nid}'s LRU list {l}"
                        );
                    }
                    let [next, back] = self.folios.lru_links[id as usize];
                    ensure!(back == prev, "LRU list {l}: broken back link at folio {id}");
                    prev = id;
                    id = next;
                }
                ensure!(lv.lists[l].last == prev, "LRU list {l}: bad last");
                ensure!(
                    lv.pages[l] == pages,
                    "node {nid} LRU list {l}: size {} != {pages} on the list",
                    lv.pages[l]
                );
            }
        }
        Ok(tags)
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
        if let Err(e) = self.cache.index.check_shadows(self.workingset_shadow_bound()) {
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

    /// Panics with the violation if debug-vm is on and an invariant is broken.
    pub fn debug_check(&self) {
        if self.debug_vm {
            if let Err(e) = self.check_invariants() {
                panic!("{e}");
            }
        }
    }
}
