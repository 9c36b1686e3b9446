//! The checks that read every live folio, made in one pass over the folio table.
//!
//! At a few hundred GiB the table holds tens of millions of folios, and the end-of-run check
//! is a large part of a short run's cost. Each folio's record is read once here, and the
//! memory map at its head (random order) once, for what each mechanism says of it: its head
//! page and LRU list (§1.4, §10.3), the gauges (§10.3, §14), per-owner rss (§19.2), dirty
//! pages (§12), pageblock content (§1.2), the deferred-split queue (§31), buffer heads (§33).
//! The totals are then compared with the kernel-side counters, in that order.

use super::{Check, FolioGauges, InvariantViolation};
use crate::folio::{folio_mobility, Folio, FolioId, FolioKind};
use crate::mmzone::*;
use crate::node::Mm;
use crate::types::*;
use crate::vmscan::NR_LRU_LISTS;
use crate::vmstat::Stat;
use std::collections::BTreeMap;

/// How a folio's LRU membership is known to `check_folio_head`.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy)]
pub(super) enum LruSeen {
    /// The walk of the LRU lists found it on this list (list + 1; 0: on none).
    Walked(u8),
    /// No walk: its links and its neighbours' are read (`check_lru_neighbours`).
    Links,
}

/// What the pass adds up, for the comparisons after it.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct FolioSums {
    /// Inactive anon, active anon, inactive file, active file, isolated anon, isolated file,
    /// anon pages, file pages, unevictable (§29.1.4), mlocked (NR_MLOCK).
    gauges: FolioGauges,
    bdev: u64,
    rss: crate::folio::Rss,
    dirty: u64,
    /// Folio pages by mobility per pageblock.
    content: Vec<[u32; 3]>,
    /// Pages of each LRU list's folios.
    lru_pages: [u64; NR_LRU_LISTS],
    queued: u64,
    partial: [u64; NR_PAGE_ORDERS],
    /// Pages of PMD-mapped anon THPs.
    thp: u64,
    cache: CacheSums,
}

/// The page-cache folios as the pass saw them (a folio with a mapping is in the page cache at
/// its mapping and index), for `check_page_cache`: their number and a fingerprint of their
/// (mapping, index, folio) triples, the same of the dirty ones, and the dirty ones by age.
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub(super) struct CacheSums {
    pub(super) entries: u64,
    pub(super) fp: u64,
    pub(super) dirty: u64,
    pub(super) dirty_fp: u64,
    pub(super) dirty_pages: u64,
    /// (dirtied_ns, folio) of the dirty ones.
    pub(super) by_age: Vec<(u64, FolioId)>,
}

/// One page-cache entry's term of a fingerprint: a multiset of entries is summarised by the
/// wrapping sum of its terms, so two walks in different orders (the index's key order, the
/// folio table's id order) can be compared without reading one's items in the other's order.
/// Two different sets agree with probability about 2⁻⁶⁴.
pub(super) fn entry_fp(mapping: u32, index: u64, id: FolioId) -> u64 {
    fn mix64(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    mix64(mix64((mapping as u64) << 32 | id as u64) ^ index)
}

impl Mm {
    /// Empty totals, for a pass over the folio table.
    pub(super) fn folio_sums(&self) -> FolioSums {
        FolioSums {
            gauges: [0; 10],
            bdev: 0,
            rss: Default::default(),
            dirty: 0,
            content: vec![[0u32; 3]; self.block_content.len()],
            lru_pages: [0; NR_LRU_LISTS],
            queued: 0,
            partial: [0; NR_PAGE_ORDERS],
            thp: 0,
            cache: CacheSums::default(),
        }
    }

    /// The pass: every folio record once. `lru_tags` gives each folio's LRU list as the walk of
    /// the lists found it (list + 1, 0 for none; `check_lru_links`). Returns the gauges.
    pub(super) fn check_folio_table(
        &self,
        lru_tags: &[u8],
    ) -> Result<(FolioGauges, CacheSums), InvariantViolation> {
        let mut sums = self.folio_sums();
        // The memory map at each folio's head is read in the folio table's order, at random
        // pfns: start loading it this many folios ahead (a host-cache hint only).
        const AHEAD: usize = 16;
        let table = &self.folios.folios;
        for (id, f) in table.iter().enumerate() {
            if let Some(ahead) = table.get(id + AHEAD).filter(|a| a.live()) {
                self.pages.prefetch(ahead.pfn);
            }
            let id = id as FolioId;
            let tag = lru_tags[id as usize];
            if !f.live() {
                ensure!(
                    tag == 0,
                    "LRU list {} holds folio {id}, which is not live",
                    tag - 1
                );
                continue;
            }
            self.check_folio_head(id, f, LruSeen::Walked(tag))?;
            self.check_folio_side(id, f, Some(&mut sums.cache.by_age))?;
            self.add_folio_sums(id, f, self.pages.b(f.pfn), &mut sums)?;
        }
        self.check_folio_sums(sums)
    }

    /// A live folio sits at an allocated head of its order that names it, is not isolated
    /// between operations, has PG_LRU exactly if its kind is on the LRU, and is on the LRU
    /// list its flags say (`folio_lru_list`, with its `lru` field agreeing) or on none: as the
    /// walk of the lists found it, or (`LruSeen::Links`) as its own links and its neighbours'
    /// say.
    pub(super) fn check_folio_head(&self, id: FolioId, f: &Folio, seen: LruSeen) -> Check {
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
        ensure!(
            !f.isolated(),
            "folio {id} at {:#x} is still isolated between operations",
            f.pfn
        );
        let lru = f.kind.on_lru();
        ensure!(
            self.pages.flag(f.pfn, PG_LRU) == lru,
            "folio {id} at {:#x}: LRU flag does not match its kind",
            f.pfn
        );
        match seen {
            LruSeen::Walked(tag) if lru => {
                let l = self.folio_lru_list(id);
                ensure!(
                    f.lru == l && tag == l + 1,
                    "folio {id} belongs on LRU list {l} (its lru field says {}) but is on {}",
                    f.lru,
                    if tag == 0 {
                        "none".to_string()
                    } else {
                        format!("list {}", tag - 1)
                    }
                );
            }
            LruSeen::Walked(tag) => {
                ensure!(
                    tag == 0,
                    "LRU list {} holds folio {id}, of kind {:?}",
                    tag - 1,
                    f.kind
                );
            }
            LruSeen::Links if lru => {
                let l = self.folio_lru_list(id);
                ensure!(
                    f.lru == l,
                    "folio {id} belongs on LRU list {l} but its lru field says {}",
                    f.lru
                );
                self.check_lru_neighbours(id, l)?;
            }
            LruSeen::Links => {}
        }
        Ok(())
    }

    /// The LRU links of folio `id`, which belongs on list `l`, seen from its side (the local
    /// part of `check_lru_links`, for a folio the default end-of-run check samples): its next
    /// folio links back to it, its previous folio forward to it, both are live LRU folios of
    /// list `l`, and where a link is NIL the folio is the list's last or first. What it cannot
    /// see is whether the list reaches the folio from its head (a loop cut off from the list).
    fn check_lru_neighbours(&self, id: FolioId, l: u8) -> Check {
        let n = self.folios.folios.len();
        let nid = self.pfn_nid(self.folios.folios[id as usize].pfn) as usize;
        let list = &self.reclaim.lruvec[nid].lists[l as usize];
        let [next, back] = self.folios.lru_links[id as usize];
        let on_list = |x: FolioId| {
            (x as usize) < n && {
                let g = &self.folios.folios[x as usize];
                g.live() && g.kind.on_lru() && g.lru == l
            }
        };
        if next == NIL {
            ensure!(
                list.last == id,
                "LRU list {l}: folio {id} ends the list but is not its last"
            );
        } else {
            ensure!(
                on_list(next) && self.folios.lru_links[next as usize][1] == id,
                "LRU list {l}: broken back link at folio {next} (after folio {id})"
            );
        }
        if back == NIL {
            ensure!(
                list.first == id,
                "LRU list {l}: folio {id} starts the list but is not its first"
            );
        } else {
            ensure!(
                on_list(back) && self.folios.lru_links[back as usize][0] == id,
                "LRU list {l}: broken forward link at folio {back} (before folio {id})"
            );
        }
        Ok(())
    }

    /// What a live folio says that is kept beside the table, read at random: a dirty folio's
    /// dirtying time is not before `oldest_dirty_ns` (§12; with `by_age`, kept for the
    /// comparison with the page cache's dirty set), a bdev folio (§33) is an order-0 page with
    /// its block's buffer.
    pub(super) fn check_folio_side(
        &self,
        id: FolioId,
        f: &Folio,
        by_age: Option<&mut Vec<(u64, FolioId)>>,
    ) -> Check {
        if f.dirty() {
            let d = self.folios.dirtied_ns(id);
            ensure!(
                d >= self.cache.oldest_dirty_ns,
                "folio {id} dirtied at {d} ns, before oldest_dirty_ns {}",
                self.cache.oldest_dirty_ns
            );
            if let Some(by_age) = by_age.filter(|_| f.mapping != 0) {
                by_age.push((d, id));
            }
        }
        if f.kind == FolioKind::Bdev {
            ensure!(
                f.order == 0 && self.bdev_has_buf(f.mapping, f.index),
                "bdev folio {id} (mapping {}, block {}, order {}) has no buffer",
                f.mapping,
                f.index,
                f.order
            );
        }
        Ok(())
    }

    /// A live folio's part of the totals: its block content (§1.2, kept by `account_folio`, of
    /// the folio's own mobility; `alloc_mt` is its head's allocation migratetype, read only for
    /// a slab folio), its LRU list's pages (§10.3), the gauges (§10.3, §14), rss (§19.2 item
    /// 10: mapped anon and page-table pages per owner), dirty pages (§12), the page cache's
    /// entries as the folios see them, the bdev folios (§33); and its deferred-split state
    /// (§31). Reads the folio record, and side tables only for the folios with a subpage map.
    pub(super) fn add_folio_sums(
        &self,
        id: FolioId,
        f: &Folio,
        alloc_mt: u32,
        sums: &mut FolioSums,
    ) -> Check {
        let m = folio_mobility(f.kind, alloc_mt);
        let block = (f.pfn >> PAGEBLOCK_ORDER) as usize;
        if (f.order as u32) < PAGEBLOCK_ORDER {
            sums.content[block][m] += 1 << f.order;
        } else {
            for k in 0..1usize << (f.order as u32 - PAGEBLOCK_ORDER) {
                sums.content[block + k][m] += PAGEBLOCK_NR_PAGES;
            }
        }
        if f.kind.on_lru() {
            sums.lru_pages[self.folio_lru_list(id) as usize] += 1 << f.order;
        }
        self.add_folio_gauges(id, f, sums);
        self.check_folio_split_state(id, f, sums)
    }

    /// A live folio's part of the gauges, rss, dirty pages, page-cache entries and bdev
    /// folios (see [`Mm::add_folio_sums`]).
    fn add_folio_gauges(&self, id: FolioId, f: &Folio, sums: &mut FolioSums) {
        let nr = 1u64 << f.order;
        if f.dirty() {
            sums.dirty += nr;
        }
        if f.mapping != 0 {
            let c = &mut sums.cache;
            let fp = entry_fp(f.mapping, f.index, id);
            c.entries += 1;
            c.fp = c.fp.wrapping_add(fp);
            if f.dirty() {
                c.dirty += 1;
                c.dirty_fp = c.dirty_fp.wrapping_add(fp);
                c.dirty_pages += nr;
            }
        }
        if f.owner > 1 && matches!(f.kind, FolioKind::Anon | FolioKind::PageTable) {
            // Mapped pages only (§31.2 item 3: a zapped subpage leaves the rss).
            sums.rss.add(f.owner, self.folios.mapped_pages(id) as i64);
        }
        if f.kind == FolioKind::Bdev {
            sums.bdev += 1;
        }
        let anon = match f.kind {
            FolioKind::Anon => true,
            FolioKind::File | FolioKind::Bdev => false,
            _ => return,
        };
        let i = if f.isolated() {
            4 + !anon as usize
        } else if f.unevictable() {
            8
        } else {
            2 * !anon as usize + f.active() as usize
        };
        sums.gauges[i] += nr;
        // NR_ANON_MAPPED counts the mapped subpages (§31.2 item 3).
        sums.gauges[6 + !anon as usize] += if anon { self.folios.mapped_pages(id) } else { nr };
        if f.mlocked() {
            sums.gauges[9] += nr;
        }
    }

    /// The deferred split (§31): only large anon folios are queued; a partially mapped folio
    /// is queued and has an unmapped subpage; a subpage map belongs to a large anon folio and
    /// maps some but not more than its pages; only PMD-order anon folios are PMD-split.
    fn check_folio_split_state(&self, id: FolioId, f: &Folio, sums: &mut FolioSums) -> Check {
        let nr = 1u32 << f.order;
        if f.deferred() {
            ensure!(
                f.kind == FolioKind::Anon && f.order > 1,
                "folio {id} ({:?} order {}) is queued",
                f.kind,
                f.order
            );
            sums.queued += 1;
        }
        if f.partially_mapped() {
            ensure!(f.deferred(), "folio {id} is partially mapped but not queued");
            sums.partial[f.order as usize] += 1;
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
            sums.thp += nr as u64;
        }
        Ok(())
    }

    /// The pass's totals against the counters the model keeps.
    pub(super) fn check_folio_sums(
        &self,
        sums: FolioSums,
    ) -> Result<(FolioGauges, CacheSums), InvariantViolation> {
        let expect = sums.gauges;
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
        ensure!(sums.bdev == bufs, "{} bdev folios but {bufs} buffers", sums.bdev);
        if sums.rss != self.folios.rss {
            let kept: BTreeMap<u32, u64> = self.folios.rss.iter().collect();
            let counted: BTreeMap<u32, u64> = sums.rss.iter().collect();
            ensure!(false, "per-owner rss {kept:?} != {counted:?}");
        }
        ensure!(
            sums.dirty == self.cache.nr_dirty,
            "nr_dirty {} != {} dirty pages",
            self.cache.nr_dirty,
            sums.dirty
        );
        if let Some(b) = (0..sums.content.len()).find(|&b| sums.content[b] != self.block_content[b]) {
            ensure!(
                false,
                "pageblock {b}: folio pages by mobility {:?} != {:?}",
                self.block_content[b],
                sums.content[b]
            );
        }
        self.check_split_queue(sums.queued, &sums.partial, sums.thp)?;
        for (l, &p) in sums.lru_pages.iter().enumerate() {
            let size: u64 = self.reclaim.lruvec.iter().map(|lv| lv.pages[l]).sum();
            ensure!(size == p, "LRU list {l}: size {size} != {p}");
        }
        Ok((expect, sums.cache))
    }

    /// The deferred-split queue holds exactly the `queued` folios, once each, and the
    /// partially-mapped and PMD-mapped counters match the pass's.
    fn check_split_queue(&self, queued: u64, partial: &[u64; NR_PAGE_ORDERS], thp: u64) -> Check {
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
            *partial == self.mthp.nr_anon_partially_mapped,
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
}

#[cfg(test)]
mod tests {
    //! The checker finds what it is for: each test breaks one invariant of a small machine with
    //! file pages (half of them dirty) and expects the violation that names it.
    use crate::filemap::Mapping;
    use crate::folio::FolioId;
    use crate::mmzone::{MachineConfig, ZoneConfig, NIL};
    use crate::vmscan::LRU_INACTIVE_FILE;
    use crate::{Mm, Tunables, ZoneType};

    fn machine() -> (Mm, u32) {
        let blocks = 16 * crate::types::PAGEBLOCK_NR_PAGES;
        let cfg = MachineConfig {
            cpu_node: Vec::new(),
            zones: vec![ZoneConfig {
                zone_type: ZoneType::Dma32,
                nid: 0,
                start_pfn: 4096,
                spanned: blocks,
                present: blocks,
                managed: blocks,
            }],
            nr_cpus: 1,
        };
        let tun = Tunables {
            min_free_kbytes: Some(128),
            ..Tunables::default()
        };
        let mut mm = Mm::new(&cfg, tun).expect("valid machine");
        let m = mm.add_mapping(Mapping::no_large_folios());
        mm.filemap_write(0, m, 0, 100 * 4096);
        for id in file_folios(&mm).into_iter().step_by(2) {
            mm.folio_mark_dirty(id, false);
        }
        mm.check_invariants().expect("a sound machine");
        (mm, m)
    }

    fn file_folios(mm: &Mm) -> Vec<FolioId> {
        mm.folios
            .live()
            .filter(|(_, f)| f.mapping != 0)
            .map(|(id, _)| id)
            .collect()
    }

    fn violation(mm: &Mm) -> String {
        mm.check_invariants().expect_err("a broken invariant").0
    }

    #[test]
    fn a_broken_lru_back_link_is_found() {
        let (mut mm, _) = machine();
        let l = LRU_INACTIVE_FILE as usize;
        let first = mm.reclaim.lruvec[0].lists[l].first;
        let second = mm.folios.lru_links[first as usize][0];
        mm.folios.lru_links[second as usize][1] = NIL;
        assert!(violation(&mm).contains("broken back link"), "{}", violation(&mm));
    }

    #[test]
    fn an_lru_loop_is_found() {
        let (mut mm, _) = machine();
        let l = LRU_INACTIVE_FILE as usize;
        let (first, last) = (
            mm.reclaim.lruvec[0].lists[l].first,
            mm.reclaim.lruvec[0].lists[l].last,
        );
        mm.folios.lru_links[last as usize][0] = first;
        assert!(violation(&mm).contains("a second time"), "{}", violation(&mm));
    }

    #[test]
    fn a_folio_on_the_wrong_list_is_found() {
        let (mut mm, _) = machine();
        let id = file_folios(&mm)[3];
        let f = &mut mm.folios.folios[id as usize];
        f.set_active(!f.active());
        assert!(
            violation(&mm).contains("belongs on LRU list"),
            "{}",
            violation(&mm)
        );
    }

    #[test]
    fn a_cache_entry_naming_a_folio_elsewhere_is_found() {
        let (mut mm, _) = machine();
        let id = file_folios(&mm)[5];
        mm.folios.folios[id as usize].index += 1000;
        assert!(
            violation(&mm).contains("which is not live there"),
            "{}",
            violation(&mm)
        );
    }

    #[test]
    fn a_dirty_tag_on_a_clean_folio_is_found() {
        let (mut mm, m) = machine();
        let id = file_folios(&mm)[0];
        assert!(!mm.folios.folios[id as usize].dirty());
        let i = mm.folios.folios[id as usize].index;
        assert!(mm.cache.index.set_dirty(m, i, id, 0, true, 0));
        assert!(violation(&mm).contains("tagged dirty"), "{}", violation(&mm));
    }

    #[test]
    fn a_folio_missing_from_the_cache_is_found() {
        let (mut mm, m) = machine();
        let id = file_folios(&mm)[0];
        let i = mm.folios.folios[id as usize].index;
        mm.cache.index.remove(m, i, 0, id);
        assert!(
            violation(&mm).contains("but the page cache holds None"),
            "{}",
            violation(&mm)
        );
    }
}
