//! The default end-of-run check: every counter and list in full, the memory map and the
//! folios' random-access checks on a seeded sample ([`Mm::check_invariants_sampled`]).
//!
//! At a few hundred GiB the full check ([`Mm::check_invariants`]) is a large part of a short
//! run's cost, and most of it is random access: the LRU walk follows links in folio-id order
//! that is no order at all, the page-cache walk reads the xarray, and each folio's head page,
//! dirtying time and buffer are looked up. The sampled check keeps every part that is read in
//! order or is as small as the lists and counters, and does the random-access part on one
//! memory-map unit and one folio stripe in [`CheckSample::one_in`], chosen by a hash of the
//! run's seed (so a run checks the same sample every time and two seeds check different ones).
//!
//! What it checks in full (a violation anywhere is found):
//! * every buddy free list (§1.4): each listed chunk a free head of the list's order, from a
//!   block of the list's type (all of its blocks, for a chunk of order ≥ `PAGEBLOCK_ORDER`),
//!   in the list's zone, not reported without a reporting device; back links, `last`, no loop;
//!   `nr_by_type` and `nr_free` equal to the lists; NR_FREE_PAGES, NR_FREE_PAGES_BLOCKS and
//!   `nr_free_highatomic` equal to the pages the lists hold;
//! * every PCP list (§2.1): chunks of the list's order from its zone, `pcp->count` equal to the
//!   lists;
//! * the LRU list heads (an empty list has neither end; the first folio has no previous one,
//!   the last no next one);
//! * one pass over the folio table, in order, reading the folio records only (and the subpage
//!   map of the few folios that have one, a slab folio's head for its migratetype): every
//!   total the full check compares with a counter — the LRU gauges, isolated, anon, file,
//!   unevictable and mlocked pages, per-zone LRU gauges, each LRU list's size, per-owner rss,
//!   nr_dirty, every pageblock's content by mobility, the bdev folios against the buffers, the
//!   deferred-split queue (its entries, partially mapped counts, PMD-mapped THPs), the page
//!   cache's entries, dirty-tagged entries and dirty pages against the folios that say they
//!   are in it — and each folio's deferred-split state;
//! * swap, the workingset shadows and xarray nodes, the shrinkable slab entries, the buffer
//!   heads (as in the full check).
//!
//! What it checks on the sample only:
//! * the memory map, unit by unit (a unit is `1 << MAX_PAGE_ORDER` pfns, aligned, which no
//!   chunk crosses): every managed page covered by a naturally aligned chunk in its zone, a
//!   head followed by tails; a free head on the free list of its order and block type (it was
//!   met in the walk of the lists), a PCP head of a cached order on a PCP list, an allocated
//!   head that names a folio at that pfn of the folio's order;
//! * the folios, stripe by stripe (a stripe is [`FOLIO_STRIPE`] consecutive ids): a live
//!   folio's head page names it with its order, it is not isolated, PG_LRU matches its kind,
//!   its `lru` field is the list its flags say and its links agree with its neighbours' on
//!   that list (ends at the list's first and last); a dirty folio's dirtying time is not before
//!   `oldest_dirty_ns`; a bdev folio has its buffer; a folio with a mapping is the page cache's
//!   entry at its (mapping, index), tagged dirty exactly if it is dirty.
//!
//! What only the full check does: the memory map outside the sample (hence, per zone, free +
//! PCP + allocated + isolated = managed, and a free or PCP head that is on no list there); the
//! per-folio checks above for folios outside the sample; the walk of each LRU list from its
//! head (a loop cut off from its list, a folio reached twice, a dead folio on a list); the
//! page cache compared with the folio table entry by entry (by fingerprint: an entry naming a
//! folio that is not there, a dirty tag on a clean folio outside the sample) and the dirty set
//! by age compared with the folios' dirtying times.
//!
//! `[run] debug_vm = true`, `fraglab soak`, the property tests and every test that calls
//! [`Mm::check_invariants`] use the full check; so does this one on a machine of at most
//! [`CheckSample::full_up_to_pages`] pages.

use super::{Check, InvariantViolation, ZoneMapCount};
use crate::folio::{FolioId, FolioKind};
use crate::mmzone::*;
use crate::node::Mm;
use crate::types::*;

/// Folio ids per stripe of the folio table, the unit the sampled check samples folios by: 64
/// records (2 KiB) read in order.
pub const FOLIO_STRIPE: usize = 64;

/// Which part of the machine [`Mm::check_invariants_sampled`] reads page by page and folio by
/// folio.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckSample {
    /// The seed of the choice (a timed run's `[run] seed`).
    pub seed: u64,
    /// One memory-map unit in `one_in`, and one folio stripe in `one_in`, is sampled (1: all
    /// of them).
    pub one_in: u64,
    /// A machine of at most this many pages (spanned, all zones) gets the full check.
    pub full_up_to_pages: u64,
}

impl CheckSample {
    /// The end-of-run default's share: one unit and one stripe in 16.
    pub const END_OF_RUN_ONE_IN: u64 = 16;
    /// The end-of-run default checks machines of up to 16 GiB in full (4 KiB pages).
    pub const END_OF_RUN_FULL_UP_TO: u64 = 1 << 22;

    /// The default end-of-run check of a run with seed `seed`.
    pub fn end_of_run(seed: u64) -> Self {
        CheckSample {
            seed,
            one_in: Self::END_OF_RUN_ONE_IN,
            full_up_to_pages: Self::END_OF_RUN_FULL_UP_TO,
        }
    }

    fn pick(&self, salt: u64, x: u64) -> bool {
        self.one_in <= 1 || mix64(mix64(self.seed ^ salt) ^ x).is_multiple_of(self.one_in)
    }

    /// Whether the memory-map unit holding `pfn` (its `1 << MAX_PAGE_ORDER` aligned pfns) is in
    /// the sample.
    pub fn pfn_sampled(&self, pfn: u32) -> bool {
        self.pick(0x6d65_6d6d_6170, (pfn >> MAX_PAGE_ORDER) as u64)
    }

    /// Whether folio id `id`'s stripe ([`FOLIO_STRIPE`] ids) is in the sample.
    pub fn folio_sampled(&self, id: FolioId) -> bool {
        self.pick(0x666f_6c69_6f73, (id as usize / FOLIO_STRIPE) as u64)
    }
}

/// SplitMix64's finaliser.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One bit per pfn: the heads met on a free or PCP list, marked for sampled units only.
#[derive(serde::Serialize, serde::Deserialize)]
struct Listed(Vec<u64>);

impl Listed {
    fn set(&mut self, pfn: u32) {
        self.0[pfn as usize / 64] |= 1 << (pfn % 64);
    }

    fn get(&self, pfn: u32) -> bool {
        self.0[pfn as usize / 64] & (1 << (pfn % 64)) != 0
    }
}

impl Mm {
    /// The default end-of-run check (module doc): every list and counter in full, the memory
    /// map and the folios' random-access checks on the sample `s` chosen. A machine of at
    /// most `s.full_up_to_pages` pages, or `s.one_in` ≤ 1, gets [`Mm::check_invariants`].
    pub fn check_invariants_sampled(&self, s: &CheckSample) -> Result<(), InvariantViolation> {
        let spanned: u64 = self.zones.iter().map(|z| z.spanned as u64).sum();
        if s.one_in <= 1 || spanned <= s.full_up_to_pages {
            return self.check_invariants().map(|_| ());
        }
        let mut listed = Listed(vec![0u64; self.pages.state.len().div_ceil(64)]);
        for (zi, z) in self.zones.iter().enumerate() {
            if z.spanned == 0 {
                continue;
            }
            let by = self.check_free_lists(zi, z, None, |p, order| {
                self.check_listed_chunk_blocks(p, order)?;
                if s.pfn_sampled(p) {
                    listed.set(p);
                }
                Ok(())
            })?;
            self.check_free_counters(z, &listed_count(&by))?;
            self.check_pcp_lists(zi, z, None, |q| {
                if s.pfn_sampled(q) {
                    listed.set(q);
                }
            })?;
            let last = z.end_pfn() - 1;
            let mut unit = z.start_pfn >> MAX_PAGE_ORDER;
            while unit <= last >> MAX_PAGE_ORDER {
                if s.pfn_sampled(unit << MAX_PAGE_ORDER) {
                    self.check_memmap_unit(z, unit, &listed)?;
                }
                unit += 1;
            }
        }
        self.check_lru_heads()?;
        let (expect, cache) = self.check_folio_table_sampled(s)?;
        let index = &self.cache.index;
        ensure!(
            cache.entries == index.len() as u64,
            "the page cache holds {} entries, {} folios have a mapping",
            index.len(),
            cache.entries
        );
        ensure!(
            cache.dirty == index.dirty_len() as u64 && cache.dirty_pages == index.dirty_pages(),
            "the page cache's dirty set holds {} folios of {} pages, {} dirty folios of {} pages have a mapping",
            index.dirty_len(),
            index.dirty_pages(),
            cache.dirty,
            cache.dirty_pages
        );
        self.check_zone_lru_gauges(&expect)?;
        self.check_swap()?;
        self.check_workingset_and_xarray()?;
        self.check_shrinkable_slab()?;
        self.check_bdev()?;
        Ok(())
    }

    /// A listed free chunk of order ≥ `PAGEBLOCK_ORDER` lies in blocks of one type (the
    /// list walk has checked the first one against its list).
    fn check_listed_chunk_blocks(&self, pfn: u32, order: u32) -> Check {
        if order >= PAGEBLOCK_ORDER {
            let mt = self.block_mt(pfn);
            for b in 1..(1u32 << (order - PAGEBLOCK_ORDER)) {
                let bmt = self.block_mt(pfn + b * PAGEBLOCK_NR_PAGES);
                ensure!(
                    bmt == mt,
                    "free chunk {pfn:#x} order {order} spans blocks of types {mt:?} and {bmt:?}"
                );
            }
        }
        Ok(())
    }

    /// One unit of the memory map (`1 << MAX_PAGE_ORDER` aligned pfns, no chunk crosses its
    /// edges), its part in zone `z`: what `check_zone_memmap` checks of each chunk, and that a
    /// free or PCP head was met on a list (`listed`) and an allocated head that names a folio
    /// there has the folio's order.
    fn check_memmap_unit(&self, z: &Zone, unit: u32, listed: &Listed) -> Check {
        let mut pfn = (unit << MAX_PAGE_ORDER).max(z.start_pfn);
        let end = ((unit + 1) << MAX_PAGE_ORDER).min(z.end_pfn());
        while pfn < end {
            let Some((kind, order, next)) = self.chunk_at(z, pfn)? else {
                pfn += 1;
                continue;
            };
            match kind {
                PageKind::Buddy => ensure!(
                    listed.get(pfn),
                    "pfn {pfn:#x}: free chunk of order {order} is on no free list of its order and block type"
                ),
                PageKind::Pcp => {
                    ensure!(
                        pcp_allowed_order(order),
                        "pfn {pfn:#x}: PCP chunk of order {order}"
                    );
                    ensure!(
                        listed.get(pfn),
                        "pfn {pfn:#x}: PCP chunk of order {order} is on no PCP list of its zone"
                    );
                }
                PageKind::Allocated => {
                    let id = self.pages.a(pfn);
                    if let Some(f) = self.folios.folios.get(id as usize) {
                        ensure!(
                            !(f.live() && f.pfn == pfn) || f.order as u32 == order,
                            "pfn {pfn:#x}: allocated chunk of order {order} holds folio {id} of order {}",
                            f.order
                        );
                    }
                }
                _ => {}
            }
            pfn = next;
        }
        Ok(())
    }

    /// The ends of each LRU list: both or neither NIL, the first folio without a previous one
    /// and the last without a next one.
    fn check_lru_heads(&self) -> Check {
        let n = self.folios.folios.len();
        for (l, list) in self
            .reclaim
            .lruvec
            .iter()
            .flat_map(|lv| lv.lists.iter().enumerate())
        {
            ensure!(
                (list.first == NIL) == (list.last == NIL),
                "LRU list {l}: first {} and last {} (one end empty)",
                list.first,
                list.last
            );
            if list.first != NIL {
                ensure!(
                    (list.first as usize) < n && (list.last as usize) < n,
                    "LRU list {l}: ends {} and {} past the folio table ({n})",
                    list.first,
                    list.last
                );
                ensure!(
                    self.folios.lru_links[list.first as usize][1] == NIL
                        && self.folios.lru_links[list.last as usize][0] == NIL,
                    "LRU list {l}: bad first or last"
                );
            }
        }
        Ok(())
    }

    /// The pass over the folio table of the sampled check: every live folio's part of the
    /// totals, and the sampled stripes' checks of their head pages, LRU links, side tables and
    /// page-cache entries. Returns the gauges and the page-cache sums.
    fn check_folio_table_sampled(
        &self,
        s: &CheckSample,
    ) -> Result<(super::FolioGauges, super::folios::CacheSums), InvariantViolation> {
        let mut sums = self.folio_sums();
        const AHEAD: usize = 16;
        let table = &self.folios.folios;
        for (k, stripe) in table.chunks(FOLIO_STRIPE).enumerate() {
            let base = k * FOLIO_STRIPE;
            let sampled = s.folio_sampled(base as FolioId);
            for (j, f) in stripe.iter().enumerate() {
                if !f.live() {
                    continue;
                }
                let id = (base + j) as FolioId;
                if sampled {
                    if let Some(ahead) = stripe.get(j + AHEAD).filter(|a| a.live()) {
                        self.pages.prefetch(ahead.pfn);
                    }
                    self.check_folio_head(id, f, super::folios::LruSeen::Links)?;
                    self.check_folio_side(id, f, None)?;
                    self.check_page_cache_entry(id, f)?;
                }
                let alloc_mt = if f.kind == FolioKind::Slab {
                    self.pages.alloc_migratetype(f.pfn)
                } else {
                    // Unread: only a slab folio's mobility depends on it (`folio_mobility`).
                    0
                };
                self.add_folio_sums(id, f, alloc_mt, &mut sums)?;
            }
        }
        self.check_folio_sums(sums)
    }

    /// A live folio with a mapping is the page cache's entry at its (mapping, index), tagged
    /// dirty exactly if it is dirty (§12).
    fn check_page_cache_entry(&self, id: FolioId, f: &crate::folio::Folio) -> Check {
        if f.mapping == 0 {
            return Ok(());
        }
        let (m, i) = (f.mapping, f.index);
        let held = self.cache.index.get(m, i);
        ensure!(
            held == Some(id),
            "folio {id} has mapping {m} index {i} but the page cache holds {held:?} there"
        );
        ensure!(
            self.cache.index.is_dirty(m, i) == f.dirty(),
            "page cache {m}:{i}: folio {id} is {}dirty but {}tagged dirty",
            if f.dirty() { "" } else { "not " },
            if f.dirty() { "not " } else { "" }
        );
        Ok(())
    }
}

/// The counters' view of a zone's free lists, from the lists' lengths by (order, type): what
/// `check_free_counters` compares NR_FREE_PAGES, NR_FREE_PAGES_BLOCKS and
/// `nr_free_highatomic` with.
fn listed_count(by: &[[u64; MIGRATE_TYPES]; NR_PAGE_ORDERS]) -> ZoneMapCount {
    let mut c = ZoneMapCount::default();
    for (order, row) in by.iter().enumerate() {
        for (mt, &n) in row.iter().enumerate() {
            let pages = n << order;
            let mt = MigrateType::from_index(mt);
            if mt != MigrateType::Isolate {
                c.free_pages_nonisolate += pages as i64;
                if order as u32 >= PAGEBLOCK_ORDER {
                    c.blocks += pages as i64;
                }
            }
            if mt == MigrateType::HighAtomic {
                c.highatomic += pages;
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    //! The sampled check passes wherever the full one does, and finds a broken invariant in
    //! what it reads in full or in its sample; outside the sample only the full check finds the
    //! memory map's breakage.
    use super::CheckSample;
    use crate::filemap::Mapping;
    use crate::folio::{FolioId, FolioKind};
    use crate::mmzone::{MachineConfig, PageKind, ZoneConfig};
    use crate::types::{MAX_PAGE_ORDER, PAGEBLOCK_NR_PAGES};
    use crate::vmscan::LRU_INACTIVE_FILE;
    use crate::vmstat::Stat;
    use crate::{Gfp, Mm, Tunables, ZoneType};

    /// 64 pageblocks (32 memory-map units), file pages (every other one dirty) and anon folios
    /// of orders 0–3 with every third freed.
    fn machine() -> Mm {
        let pages = 64 * PAGEBLOCK_NR_PAGES;
        let cfg = MachineConfig {
            cpu_node: Vec::new(),
            zones: vec![ZoneConfig {
                zone_type: ZoneType::Dma32,
                nid: 0,
                start_pfn: 4096,
                spanned: pages,
                present: pages,
                managed: pages,
            }],
            nr_cpus: 2,
        };
        let tun = Tunables {
            min_free_kbytes: Some(128),
            ..Tunables::default()
        };
        let mut mm = Mm::new(&cfg, tun).expect("valid machine");
        mm.cur.pid = 100;
        let m = mm.add_mapping(Mapping::no_large_folios());
        mm.filemap_write(0, m, 0, 300 * 4096);
        let file: Vec<FolioId> = mm
            .folios
            .live()
            .filter(|(_, f)| f.mapping != 0)
            .map(|(id, _)| id)
            .collect();
        for id in file.into_iter().step_by(2) {
            mm.folio_mark_dirty(id, false);
        }
        let mut anon = Vec::new();
        for i in 0..2000u32 {
            if let Some(id) = mm.alloc_folio(i % 2, Gfp::GFP_HIGHUSER_MOVABLE, i % 4, FolioKind::Anon, false)
            {
                anon.push(id);
            }
        }
        for id in anon.into_iter().step_by(3) {
            mm.free_folio(0, id);
        }
        mm.check_invariants().expect("a sound machine");
        mm
    }

    /// A sample of one unit and one stripe in `one_in` that holds the first folio stripe.
    fn sample(one_in: u64) -> CheckSample {
        (0..)
            .map(|seed| CheckSample {
                seed,
                one_in,
                full_up_to_pages: 0,
            })
            .find(|s| s.folio_sampled(0))
            .unwrap()
    }

    /// The machine's one populated zone.
    fn zi(mm: &Mm) -> usize {
        mm.zones.iter().position(|z| z.spanned > 0).unwrap()
    }

    fn violation(mm: &Mm, s: &CheckSample) -> String {
        mm.check_invariants_sampled(s).expect_err("a broken invariant").0
    }

    /// Heads of free chunks of the top order: (one in a sampled unit, one in an unsampled one).
    fn free_max_order_heads(mm: &Mm, s: &CheckSample) -> (u32, u32) {
        let z = &mm.zones[zi(mm)];
        let heads: Vec<u32> = (z.start_pfn..z.end_pfn())
            .step_by(1 << MAX_PAGE_ORDER)
            .filter(|&p| mm.pages.kind(p) == PageKind::Buddy && mm.pages.order(p) == MAX_PAGE_ORDER)
            .collect();
        let inside = *heads
            .iter()
            .find(|&&p| s.pfn_sampled(p))
            .expect("a sampled free unit");
        let outside = *heads
            .iter()
            .find(|&&p| !s.pfn_sampled(p))
            .expect("an unsampled free unit");
        (inside, outside)
    }

    #[test]
    fn passes_where_the_full_check_passes() {
        let mut mm = machine();
        for seed in 0..8 {
            for one_in in [1, 2, 3, 16] {
                let s = CheckSample {
                    seed,
                    one_in,
                    full_up_to_pages: 0,
                };
                mm.check_invariants_sampled(&s).unwrap();
            }
        }
        mm.compact_memory();
        mm.check_invariants().unwrap();
        mm.check_invariants_sampled(&sample(2)).unwrap();
    }

    #[test]
    fn samples_by_seed_and_leaves_small_machines_to_the_full_check() {
        let a = CheckSample::end_of_run(1);
        let b = CheckSample::end_of_run(2);
        let units = |s: &CheckSample| {
            (0..4096u32)
                .filter(|&u| s.pfn_sampled(u << MAX_PAGE_ORDER))
                .count()
        };
        // About one in 16, and another set for another seed.
        assert!((160..360).contains(&units(&a)), "{}", units(&a));
        assert!(
            (0..4096u32).any(|u| a.pfn_sampled(u << MAX_PAGE_ORDER) != b.pfn_sampled(u << MAX_PAGE_ORDER))
        );
        // Below the threshold, the full check: it finds a stray head in any unit.
        let mut mm = machine();
        let (_, outside) = free_max_order_heads(&mm, &sample(2));
        mm.pages.set(outside + 1, PageKind::Buddy, 0);
        assert!(mm.check_invariants_sampled(&a).is_err());
    }

    #[test]
    fn a_stray_head_in_a_sampled_unit_is_found_and_outside_only_by_the_full_check() {
        let s = sample(2);
        let mut mm = machine();
        let (inside, outside) = free_max_order_heads(&mm, &s);
        mm.pages.set(inside + 8, PageKind::Buddy, 0);
        assert!(
            violation(&mm, &s).contains("inside the Buddy chunk"),
            "{}",
            violation(&mm, &s)
        );
        let mut mm = machine();
        mm.pages.set(outside + 8, PageKind::Buddy, 0);
        mm.check_invariants_sampled(&s).expect("outside the sample");
        assert!(mm.check_invariants().is_err());
    }

    #[test]
    fn a_free_or_pcp_head_on_no_list_in_a_sampled_unit_is_found() {
        let s = sample(2);
        let machine_and_page = || {
            let mm = machine();
            let pfn = mm
                .folios
                .live()
                .find(|(_, f)| f.kind == FolioKind::Anon && f.order == 0 && s.pfn_sampled(f.pfn))
                .map(|(_, f)| f.pfn)
                .expect("an anon page in a sampled unit");
            (mm, pfn)
        };
        // An allocated page marked free (or PCP) without reaching a list.
        let (mut mm, pfn) = machine_and_page();
        mm.pages.set(pfn, PageKind::Buddy, 0);
        assert!(
            violation(&mm, &s).contains("on no free list"),
            "{}",
            violation(&mm, &s)
        );
        let (mut mm, pfn) = machine_and_page();
        mm.pages.set(pfn, PageKind::Pcp, 0);
        assert!(
            violation(&mm, &s).contains("on no PCP list"),
            "{}",
            violation(&mm, &s)
        );
    }

    #[test]
    fn the_counters_are_checked_in_full() {
        let s = sample(2);
        let mut mm = machine();
        let z = zi(&mm);
        mm.zones[z].area.nr_free[3] += 1;
        assert!(violation(&mm, &s).contains("nr_free"), "{}", violation(&mm, &s));
        let mut mm = machine();
        let z = zi(&mm);
        mm.zones[z].stats[Stat::nr_free_pages as usize] += 1;
        assert!(
            violation(&mm, &s).contains("NR_FREE_PAGES"),
            "{}",
            violation(&mm, &s)
        );
        let mut mm = machine();
        mm.cache.nr_dirty += 1;
        assert!(violation(&mm, &s).contains("nr_dirty"), "{}", violation(&mm, &s));
        let mut mm = machine();
        let last = mm.block_content.len() - 1;
        mm.block_content[last][1] += 1;
        assert!(violation(&mm, &s).contains("pageblock"), "{}", violation(&mm, &s));
        let mut mm = machine();
        mm.stats[Stat::nr_active_anon as usize] += 1;
        assert!(
            violation(&mm, &s).contains("folio gauges"),
            "{}",
            violation(&mm, &s)
        );
    }

    #[test]
    fn a_sampled_folio_off_its_list_is_found() {
        let s = sample(2);
        let mut mm = machine();
        let l = LRU_INACTIVE_FILE as usize;
        // A folio of the first (sampled) stripe whose back link is cut.
        let id = mm.reclaim.lruvec[0].lists[l].first;
        let next = mm.folios.lru_links[id as usize][0];
        assert!(s.folio_sampled(id) && s.folio_sampled(next));
        mm.folios.lru_links[next as usize][1] = crate::mmzone::NIL;
        // Seen from `next` (its back link is NIL: it claims to start the list).
        assert!(
            violation(&mm, &s).contains("LRU list 2: folio"),
            "{}",
            violation(&mm, &s)
        );
    }

    #[test]
    fn a_sampled_folio_missing_from_the_page_cache_is_found() {
        let s = sample(2);
        let mut mm = machine();
        let (id, m, i) = mm
            .folios
            .live()
            .find(|(id, f)| f.mapping != 0 && s.folio_sampled(*id))
            .map(|(id, f)| (id, f.mapping, f.index))
            .unwrap();
        mm.cache.index.remove(m, i, 0, id);
        assert!(
            violation(&mm, &s).contains("but the page cache holds None"),
            "{}",
            violation(&mm, &s)
        );
    }

    #[test]
    fn a_sampled_folio_at_a_wrong_head_is_found() {
        let s = sample(2);
        let mut mm = machine();
        let id = mm
            .folios
            .live()
            .find(|(id, f)| f.kind == FolioKind::Anon && s.folio_sampled(*id))
            .map(|(id, _)| id)
            .unwrap();
        let pfn = mm.folios.folios[id as usize].pfn;
        mm.pages.set_a(pfn, id + 1);
        assert!(
            violation(&mm, &s).contains("claims pfn"),
            "{}",
            violation(&mm, &s)
        );
    }
}
