//! Folios as first-class owners of allocated memory (issue "compaction", deliverable 1): each
//! allocation made through [`Mm::alloc_folio`] is a folio with a stable id, an order, an owner
//! kind, LRU state and a content token. Migration moves the folio and keeps its id and token, so
//! the identity of every folio's content is checkable after any number of migrations.
//!
//! The head page's link word `a` holds the folio id (`PageArray`), so a pfn scan finds the folio
//! of any allocated head in O(1), as the kernel finds `page_folio()`.

use crate::gfp::Gfp;
use crate::mmzone::{PageKind, PG_LRU};
use crate::node::Mm;
use crate::types::*;
use crate::vmstat::Stat;

pub use fraglab_types::folio::{FolioId, FolioKind};

// `FolioTable::kind_idx` indexes the census by discriminant.
const _: () = {
    let mut i = 0;
    while i < FolioKind::ALL.len() {
        assert!(FolioKind::ALL[i] as usize == i);
        i += 1;
    }
};

/// One folio: the hot part of the record, which every allocation, free, LRU walk and
/// accounting touches (32 bytes, asserted below, two to a host cache line; `struct folio` is 64
/// bytes of `struct page`s in the kernel). The rarely set fields are in [`FolioCold`], kept
/// only for the folios that have them; the LRU list links in [`FolioTable::lru_links`].
///
/// The page flags (PG_active, PG_dirty, ...) and the model's own booleans are bits of one word,
/// as the kernel packs page flags in `page->flags`: read and set them with the accessors of
/// the same name (`f.dirty()`, `f.set_dirty(true)`). The content token is 40 bits (a
/// million million allocations; [`FolioTable::insert`] refuses more).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Folio {
    pub pfn: u32,
    pub order: u8,
    pub kind: FolioKind,
    /// The LRU list the folio is on (`vmscan::LRU_*`), or `vmscan::LRU_NONE`; its links on
    /// that list are in [`FolioTable::lru_links`].
    pub lru: u8,
    /// Bits 32..40 of the content token ([`Folio::token`]).
    token_hi: u8,
    /// The flags, one bit each (`Folio::F_*`; read and set with the accessors of the same
    /// name).
    flags: u32,
    /// Bits 0..32 of the content token.
    token_lo: u32,
    /// The page-cache mapping of a file folio in the page cache (`filemap::PageCache`), 0 for
    /// none, and the page index of its first page there.
    pub mapping: u32,
    /// The task that allocated the folio (`mm.cur.pid` at allocation; 0 = the kernel): the
    /// OOM killer's unit.
    pub owner: u32,
    pub index: u64,
}

const _: () = assert!(std::mem::size_of::<Folio>() == 32);

macro_rules! folio_flag {
    ($get:ident, $set:ident, $bit:ident, $vis:vis) => {
        #[inline]
        $vis fn $get(&self) -> bool {
            self.flags & Self::$bit != 0
        }
        #[inline]
        $vis fn $set(&mut self, v: bool) {
            if v {
                self.flags |= Self::$bit;
            } else {
                self.flags &= !Self::$bit;
            }
        }
    };
}

impl Folio {
    /// A file folio of a mapping whose gfp lacks __GFP_FS (XFS-like): a NOFS compactor may not
    /// migrate it (§9.6.3).
    pub const F_NOFS_MAPPING: u32 = 1 << 0;
    /// PG_mlocked: mapped by a VM_LOCKED mapping (§29.1.2, `mlock.rs`).
    pub const F_MLOCKED: u32 = 1 << 1;
    /// PG_unevictable: on the unevictable LRU (§29.1.3); never scanned by reclaim, isolated by
    /// compaction only with `vm.compact_unevictable_allowed` = 1 (§29.2).
    pub const F_UNEVICTABLE: u32 = 1 << 2;
    /// A GUP pin (`folio_maybe_dma_pinned`, §25.4): compaction does not isolate a pinned anon
    /// folio (§25.3) and migration fails at the reference count for any other (§25.1 #7). No
    /// workload of the model pins memory yet (no O_DIRECT, io_uring or vfio generator): the
    /// flag exists for the rule and its tests.
    pub const F_PINNED: u32 = 1 << 3;
    /// Locked for a read in flight (PG_locked and not PG_uptodate, §25.4). Nothing sets it: the
    /// model's reads complete within the reading task's step (the read's latency is charged to
    /// the reader as `read_io_ns`, the folio is uptodate as soon as another task can see it), so
    /// no compaction ever meets a folio with its read in flight.
    pub const F_IO_LOCKED: u32 = 1 << 4;
    /// Declared to the slab shrinker ([`Mm::set_slab_shrinkable`]): the folio's entry in
    /// `reclaim.shrinkable_slab` is live and counted in [`FolioTable::nr_shrinkable`].
    pub const F_ON_SHRINKER: u32 = 1 << 5;
    /// The folio has an entry in `FolioTable::cold` (it was split from another).
    pub const F_HAS_COLD: u32 = 1 << 6;
    /// Isolated from the LRU by compaction (on a migrate list).
    pub const F_ISOLATED: u32 = 1 << 7;
    /// The record holds a folio (it is not on the free-id list).
    pub const F_LIVE: u32 = 1 << 8;
    /// PG_active: on (or returns to) the active list.
    pub const F_ACTIVE: u32 = 1 << 9;
    /// PG_referenced.
    pub const F_REFERENCED: u32 = 1 << 10;
    /// PG_dirty (file folios).
    pub const F_DIRTY: u32 = 1 << 11;
    /// PG_readahead: reading this page-cache folio triggers asynchronous readahead (§12.2.4).
    pub const F_READAHEAD_MARK: u32 = 1 << 12;
    /// PG_workingset: the folio was deactivated from an active list (`shrink_active_list`)
    /// or restored on refault; its shadow entry remembers it (`workingset_restore_*`, §10.3.8).
    pub const F_WORKINGSET: u32 = 1 << 13;
    /// PG_idle (`damon.rs`, §27.2 item 2): set when DAMON samples the folio, cleared by every
    /// access the model records (`folio_mark_accessed`, the fault and touch paths).
    pub const F_IDLE: u32 = 1 << 14;
    /// The folio has an entry in `FolioTable::dirtied` (its dirtying time: set while dirty).
    pub const F_HAS_DIRTIED: u32 = 1 << 15;
    /// The folio has an entry in `FolioTable::wb_end` (its writeback's end).
    pub const F_HAS_WB_END: u32 = 1 << 16;
    /// On the deferred split queue (`!list_empty(&folio->_deferred_list)`, §31.2 item 4,
    /// §31.3): an entry of `Mm::deferred_split` is live for it and counted in its `len`.
    pub const F_DEFERRED: u32 = 1 << 17;
    /// PG_partially_mapped (§31.2 item 4): some subpages of this large anon folio were
    /// unmapped while others stay mapped; counted in `MthpStats::nr_anon_partially_mapped`.
    pub const F_PARTIALLY_MAPPED: u32 = 1 << 18;
    /// A PMD-size anon folio whose PMD was split (`__split_huge_pmd`, §31.2 item 2): mapped
    /// by PTEs, no longer counted in NR_ANON_THPS (nr_anon_transparent_hugepages).
    pub const F_PMD_SPLIT: u32 = 1 << 19;
    /// The folio has an entry in `FolioTable::submaps` (its mapped and written subpages:
    /// partially unmapped, or tracked for `thp_underused`, §31.3 item 5).
    pub const F_HAS_SUBMAP: u32 = 1 << 20;
    /// The folio has been migrated: its count in `FolioTable::migrations` is nonzero (read and
    /// reset only then, so a free need not touch that vector).
    pub const F_MIGRATED: u32 = 1 << 21;
    /// The flags whose folios `free_folio_run`'s fast path leaves to `free_folio` (§31).
    pub const F_SPLIT_STATE: u32 =
        Self::F_DEFERRED | Self::F_PARTIALLY_MAPPED | Self::F_PMD_SPLIT | Self::F_HAS_SUBMAP;

    /// The largest content token a folio can carry (40 bits).
    pub const MAX_TOKEN: u64 = (1 << 40) - 1;

    folio_flag!(nofs_mapping, set_nofs_mapping, F_NOFS_MAPPING, pub);
    folio_flag!(mlocked, set_mlocked, F_MLOCKED, pub);
    folio_flag!(unevictable, set_unevictable, F_UNEVICTABLE, pub);
    folio_flag!(pinned, set_pinned, F_PINNED, pub);
    folio_flag!(io_locked, set_io_locked, F_IO_LOCKED, pub);
    folio_flag!(on_shrinker, set_on_shrinker, F_ON_SHRINKER, pub(crate));
    folio_flag!(has_cold, set_has_cold, F_HAS_COLD, pub(crate));
    folio_flag!(has_dirtied, set_has_dirtied, F_HAS_DIRTIED, pub(crate));
    folio_flag!(has_wb_end, set_has_wb_end, F_HAS_WB_END, pub(crate));
    folio_flag!(migrated, set_migrated, F_MIGRATED, pub(crate));
    folio_flag!(isolated, set_isolated, F_ISOLATED, pub);
    folio_flag!(live, set_live, F_LIVE, pub);
    folio_flag!(active, set_active, F_ACTIVE, pub);
    folio_flag!(referenced, set_referenced, F_REFERENCED, pub);
    folio_flag!(dirty, set_dirty, F_DIRTY, pub);
    folio_flag!(readahead_mark, set_readahead_mark, F_READAHEAD_MARK, pub);
    folio_flag!(workingset, set_workingset, F_WORKINGSET, pub);
    folio_flag!(idle, set_idle, F_IDLE, pub);
    folio_flag!(deferred, set_deferred, F_DEFERRED, pub);
    folio_flag!(partially_mapped, set_partially_mapped, F_PARTIALLY_MAPPED, pub);
    folio_flag!(pmd_split, set_pmd_split, F_PMD_SPLIT, pub);
    folio_flag!(has_submap_bit, set_has_submap, F_HAS_SUBMAP, pub(crate));

    /// Whether the folio has a subpage map (`FolioTable::submap`, §31).
    #[inline]
    pub fn has_submap(&self) -> bool {
        self.has_submap_bit()
    }

    /// Whether any of the §31 split-state flags is set (`F_SPLIT_STATE`).
    #[inline]
    pub fn split_state(&self) -> bool {
        self.flags & Self::F_SPLIT_STATE != 0
    }

    /// The content's identity: set at allocation, carried by every migration and split piece.
    #[inline]
    pub fn token(&self) -> u64 {
        (self.token_hi as u64) << 32 | self.token_lo as u64
    }

    /// Sets the content token (at most [`Folio::MAX_TOKEN`]).
    #[inline]
    pub fn set_token(&mut self, t: u64) {
        assert!(
            t <= Self::MAX_TOKEN,
            "content token {t} beyond the folio's 40 bits"
        );
        self.token_hi = (t >> 32) as u8;
        self.token_lo = t as u32;
    }
}

/// The cold part of a folio record: fields that most folios never set, kept in side tables
/// for the folios that set them, so that the record every LRU walk and allocation touches
/// stays small (`FolioTable::cold` for the split origin and the migration count,
/// `FolioTable::dirtied` and `FolioTable::wb_end` for the two times, 12-byte entries each:
/// a dirty folio or one under writeback, the common case under a writing workload, pays for
/// its one time only). A folio without an entry has the default (zero/None). This struct is
/// the view [`FolioTable::cold`] assembles.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FolioCold {
    /// The folio this one was split from (None if allocated whole).
    pub split_from: Option<FolioId>,
    /// Number of times this folio was migrated.
    pub migrations: u32,
    /// When the folio last became dirty (`mm.cur.now_ns`), for the flusher's expiry. Kept
    /// while the folio is dirty ([`FolioTable::clear_dirtied_ns`] when it is cleaned: nothing
    /// reads a clean folio's dirtying time), 0 otherwise.
    pub dirtied_ns: u64,
    /// PG_writeback lasts until this time (`mm.cur.now_ns`; 0 = never under writeback): set by
    /// the flusher when it submits the folio to the device queue, the I/O completing at the
    /// queue's service time (`writeback.rs`, §25.4). `Mm::folio_test_writeback` compares it with
    /// the current time.
    pub writeback_end_ns: u64,
}

/// A hasher for folio ids and pids (small integers): one multiply, no per-process seed. The
/// cold table is only looked up, never iterated, so its order is irrelevant; the sparse part of
/// [`Rss`] is iterated only for a maximum (see [`FolioTable::rss`]).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Per-owner rss ([`FolioTable::rss`]): pages per pid, an owner with none having no entry
/// (`get` = 0). The engine's pids count up from 100, one per task, so the pids below
/// [`Rss::DENSE_PIDS`] are counted in a vector indexed by pid (every anon fault and unmap
/// updates its owner's count: one indexed add, no hashing or probing); larger pids (a replayed
/// trace's or a restored page_owner's) in a hash map.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct Rss {
    dense: Vec<u64>,
    sparse: std::collections::HashMap<u32, u64, std::hash::BuildHasherDefault<IdHasher>>,
}

impl Rss {
    /// Pids below this are counted in the dense vector (at most 512 KiB of it).
    pub const DENSE_PIDS: u32 = 1 << 16;

    /// Adds `nr` pages (negative: removes) to `pid`'s count.
    #[inline]
    pub fn add(&mut self, pid: u32, nr: i64) {
        if pid < Self::DENSE_PIDS {
            let i = pid as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, 0);
            }
            let e = &mut self.dense[i];
            *e = (*e as i64 + nr) as u64;
        } else {
            let e = self.sparse.entry(pid).or_default();
            *e = (*e as i64 + nr) as u64;
            if *e == 0 {
                self.sparse.remove(&pid);
            }
        }
    }

    /// `pid`'s pages (0 for an owner with none).
    pub fn get(&self, pid: u32) -> u64 {
        if pid < Self::DENSE_PIDS {
            self.dense.get(pid as usize).copied().unwrap_or(0)
        } else {
            self.sparse.get(&pid).copied().unwrap_or(0)
        }
    }

    /// The owners with pages and their counts: the dense ones by pid, then the sparse ones in
    /// no particular order (its readers take a maximum under a total order or sort).
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.dense
            .iter()
            .enumerate()
            .filter(|(_, &n)| n != 0)
            .map(|(p, &n)| (p as u32, n))
            .chain(self.sparse.iter().map(|(&p, &n)| (p, n)))
    }
}

impl PartialEq for Rss {
    /// The same owners with the same counts (however the dense vector grew).
    fn eq(&self, other: &Rss) -> bool {
        let a: std::collections::BTreeMap<u32, u64> = self.iter().collect();
        let b: std::collections::BTreeMap<u32, u64> = other.iter().collect();
        a == b
    }
}

impl Eq for Rss {}

/// A side table keyed by folio id: a time's two 32-bit halves (low, high) in `dirtied` and
/// `wb_end` — 12-byte entries.
type ColdMap = std::collections::HashMap<FolioId, [u32; 2], std::hash::BuildHasherDefault<IdHasher>>;

#[inline]
fn join(t: [u32; 2]) -> u64 {
    (t[1] as u64) << 32 | t[0] as u64
}

#[inline]
fn halves(t: u64) -> [u32; 2] {
    [t as u32, (t >> 32) as u32]
}

/// The folio registry, indexed by [`FolioId`]; freed ids are reused (lowest first is not
/// needed: reuse is LIFO, deterministic).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct FolioTable {
    pub folios: Vec<Folio>,
    /// `[next, prev]` of each folio on an LRU list (`folio->lru`, docs/model §10.3;
    /// `mmzone::NIL` at the list ends and for a folio on no list), indexed by id like
    /// `folios`. Kept beside the records rather than in them: the list walks of reclaim
    /// (`isolate_lru_folios`) chase these links from folio to folio, and eight of them share
    /// a host cache line where one 40-byte record may span two; the record loads the walk
    /// also needs then no longer wait on one another.
    pub(crate) lru_links: Vec<[FolioId; 2]>,
    pub(crate) free_ids: Vec<FolioId>,
    next_token: u64,
    /// Live folios per kind and order (the folio-order census).
    pub census: [[u64; NR_PAGE_ORDERS]; FolioKind::ALL.len()],
    /// Anonymous and page-table pages per killable owner (pid > 1): the OOM killer's badness.
    /// Its only reader that iterates, the OOM killer, takes a maximum under a total order
    /// (pages, then lowest pid), so the iteration order changes nothing.
    pub rss: Rss,
    /// Live folios declared to the slab shrinker (`on_shrinker`): the shrinker's
    /// `count_objects` (§19.1 item 8), kept as folios are declared and freed so that
    /// `shrink_slab` need not re-check every declared folio on every call.
    pub(crate) nr_shrinkable: u64,
    /// The split origin of the live folios split from another (`Folio::has_cold`).
    cold: std::collections::HashMap<FolioId, FolioId, std::hash::BuildHasherDefault<IdHasher>>,
    /// Migrations of each folio, indexed by id (grown only to the highest id migrated; read
    /// and reset on free only for a folio with `Folio::migrated`, 0 for the others). A vector rather than a side map: a full
    /// compaction counts a migration for most of the folios it moves, and each count is then
    /// one indexed add where a map paid a hash, a probe and its growth (4 bytes a folio record
    /// once migrations reach it, against the map's ~16 bytes an entry).
    migrations: Vec<u32>,
    /// The dirtying time of the dirty folios that have one (`Folio::has_dirtied`).
    dirtied: ColdMap,
    /// The writeback end of the folios ever submitted for writeback (`Folio::has_wb_end`).
    wb_end: ColdMap,
    /// The mapped and written subpages of the large anon folios that have them
    /// (`Folio::has_submap`, §31: partially unmapped, or tracked for `thp_underused`).
    submaps: std::collections::HashMap<
        FolioId,
        crate::huge_memory::SubpageMap,
        std::hash::BuildHasherDefault<IdHasher>,
    >,
}

impl FolioTable {
    pub fn get(&self, id: FolioId) -> &Folio {
        let f = &self.folios[id as usize];
        assert!(f.live(), "folio {id} is not live");
        f
    }

    /// The cold fields of folio `id` (defaults if it never set any).
    #[inline]
    pub fn cold(&self, id: FolioId) -> FolioCold {
        FolioCold {
            split_from: self.split_from(id),
            migrations: self.migrations(id),
            dirtied_ns: self.dirtied_ns(id),
            writeback_end_ns: self.writeback_end_ns(id),
        }
    }

    /// The folio `id` was split from (None if allocated whole).
    pub fn split_from(&self, id: FolioId) -> Option<FolioId> {
        if !self.folios[id as usize].has_cold() {
            return None;
        }
        Some(self.cold[&id])
    }

    /// Number of times folio `id` was migrated.
    pub fn migrations(&self, id: FolioId) -> u32 {
        if self.folios[id as usize].migrated() {
            self.migrations[id as usize]
        } else {
            0
        }
    }

    /// Records that folio `id` was split from `parent`.
    pub(crate) fn set_split_from(&mut self, id: FolioId, parent: FolioId) {
        self.folios[id as usize].set_has_cold(true);
        self.cold.insert(id, parent);
    }

    /// Counts a migration of folio `id`.
    pub(crate) fn add_migration(&mut self, id: FolioId) {
        let i = id as usize;
        if i >= self.migrations.len() {
            self.migrations.resize(i + 1, 0);
        }
        self.folios[i].set_migrated(true);
        self.migrations[i] += 1;
    }

    /// When folio `id` last became dirty (0 for a clean folio).
    #[inline]
    pub fn dirtied_ns(&self, id: FolioId) -> u64 {
        if self.folios[id as usize].has_dirtied() {
            join(self.dirtied[&id])
        } else {
            0
        }
    }

    /// Sets folio `id`'s dirtying time.
    pub(crate) fn set_dirtied_ns(&mut self, id: FolioId, t: u64) {
        self.folios[id as usize].set_has_dirtied(true);
        self.dirtied.insert(id, halves(t));
    }

    /// Forgets folio `id`'s dirtying time (it was cleaned).
    pub(crate) fn clear_dirtied_ns(&mut self, id: FolioId) {
        let f = &mut self.folios[id as usize];
        if f.has_dirtied() {
            f.set_has_dirtied(false);
            self.dirtied.remove(&id);
        }
    }

    /// When folio `id`'s PG_writeback ends (0: never under writeback).
    #[inline]
    pub fn writeback_end_ns(&self, id: FolioId) -> u64 {
        if self.folios[id as usize].has_wb_end() {
            join(self.wb_end[&id])
        } else {
            0
        }
    }

    /// Forgets folio `id`'s writeback end (its I/O completed).
    pub(crate) fn clear_writeback_end_ns(&mut self, id: FolioId) {
        let f = &mut self.folios[id as usize];
        if f.has_wb_end() {
            f.set_has_wb_end(false);
            self.wb_end.remove(&id);
        }
    }

    /// Sets when folio `id`'s PG_writeback ends.
    pub(crate) fn set_writeback_end_ns(&mut self, id: FolioId, t: u64) {
        self.folios[id as usize].set_has_wb_end(true);
        self.wb_end.insert(id, halves(t));
    }

    /// Folio `id`'s subpage map, if it has one.
    #[inline]
    pub fn submap(&self, id: FolioId) -> Option<&crate::huge_memory::SubpageMap> {
        if self.folios[id as usize].has_submap() {
            self.submaps.get(&id)
        } else {
            None
        }
    }

    pub(crate) fn submap_mut(&mut self, id: FolioId) -> Option<&mut crate::huge_memory::SubpageMap> {
        if self.folios[id as usize].has_submap() {
            self.submaps.get_mut(&id)
        } else {
            None
        }
    }

    pub(crate) fn set_submap(&mut self, id: FolioId, m: crate::huge_memory::SubpageMap) {
        self.folios[id as usize].set_has_submap(true);
        self.submaps.insert(id, m);
    }

    /// The pages of anon folio `id` that are mapped: its subpage map's count, or all.
    #[inline]
    pub(crate) fn mapped_pages(&self, id: FolioId) -> u64 {
        let f = &self.folios[id as usize];
        if f.has_submap() {
            self.submaps[&id].mapped.count() as u64
        } else {
            1u64 << f.order
        }
    }

    #[inline]
    fn kind_idx(kind: FolioKind) -> usize {
        kind as usize
    }

    pub(crate) fn insert(
        &mut self,
        pfn: u32,
        order: u32,
        kind: FolioKind,
        nofs: bool,
        token: Option<u64>,
    ) -> FolioId {
        let token = token.unwrap_or_else(|| {
            self.next_token += 1;
            self.next_token
        });
        let mut f = Folio {
            pfn,
            order: order as u8,
            kind,
            lru: crate::vmscan::LRU_NONE,
            token_hi: 0,
            flags: Folio::F_LIVE | if nofs { Folio::F_NOFS_MAPPING } else { 0 },
            token_lo: 0,
            mapping: 0,
            owner: 0,
            index: 0,
        };
        f.set_token(token);
        self.census[Self::kind_idx(kind)][order as usize] += 1;
        match self.free_ids.pop() {
            Some(id) => {
                self.folios[id as usize] = f;
                // A folio leaves the table off every list (`lru_del` resets the links).
                debug_assert_eq!(self.lru_links[id as usize], [crate::mmzone::NIL; 2]);
                // A host-cache hint: the record the next insert will write (a freed record
                // is usually out of cache by the time it is reused), both lines it may span,
                // and its LRU links, which `lru_add` writes.
                if let Some(&next) = self.free_ids.last() {
                    let n = &self.folios[next as usize];
                    crate::mmzone::prefetch(n);
                    crate::mmzone::prefetch(&n.index);
                    crate::mmzone::prefetch(&self.lru_links[next as usize]);
                }
                id
            }
            None => {
                self.folios.push(f);
                self.lru_links.push([crate::mmzone::NIL; 2]);
                (self.folios.len() - 1) as FolioId
            }
        }
    }

    pub(crate) fn remove(&mut self, id: FolioId) {
        let f = &mut self.folios[id as usize];
        assert!(f.live(), "double free of folio {id}");
        f.set_live(false);
        if f.on_shrinker() {
            f.set_on_shrinker(false);
            self.nr_shrinkable -= 1;
        }
        if f.has_cold() {
            f.set_has_cold(false);
            self.cold.remove(&id);
        }
        if f.migrated() {
            f.set_migrated(false);
            self.migrations[id as usize] = 0;
        }
        if f.has_dirtied() {
            f.set_has_dirtied(false);
            self.dirtied.remove(&id);
        }
        if f.has_wb_end() {
            f.set_has_wb_end(false);
            self.wb_end.remove(&id);
        }
        if f.has_submap() {
            f.set_has_submap(false);
            self.submaps.remove(&id);
        }
        debug_assert!(
            !f.deferred() && !f.partially_mapped(),
            "folio {id} leaves the table queued"
        );
        f.set_pmd_split(false);
        self.census[Self::kind_idx(f.kind)][f.order as usize] -= 1;
        self.free_ids.push(id);
    }

    /// The token the next new content will get: every folio allocated later has a larger one.
    pub fn next_token(&self) -> u64 {
        self.next_token + 1
    }

    /// Live folios.
    pub fn live(&self) -> impl Iterator<Item = (FolioId, &Folio)> {
        self.folios
            .iter()
            .enumerate()
            .filter(|(_, f)| f.live())
            .map(|(i, f)| (i as FolioId, f))
    }

    /// Host bytes of the table's parts (`host_mem.rs`), with the counts that explain them.
    pub(crate) fn host_bytes(&self) -> Vec<(&'static str, u64)> {
        use crate::host_mem::{hash_bytes, vec_bytes};
        vec![
            ("folios (hot records)", vec_bytes(&self.folios)),
            ("folios.lru_links", vec_bytes(&self.lru_links)),
            ("folios.free_ids", vec_bytes(&self.free_ids)),
            ("folios.cold (split)", hash_bytes(&self.cold)),
            ("folios.migrations", vec_bytes(&self.migrations)),
            ("folios.dirtied", hash_bytes(&self.dirtied)),
            ("folios.wb_end", hash_bytes(&self.wb_end)),
            ("folios.submaps", hash_bytes(&self.submaps)),
            (
                "folios.rss",
                vec_bytes(&self.rss.dense) + hash_bytes(&self.rss.sparse),
            ),
            ("count.folio_records", self.folios.len() as u64),
            (
                "count.folios_live",
                (self.folios.len() - self.free_ids.len()) as u64,
            ),
            ("count.folios_cold", self.cold.len() as u64),
            ("count.folios_dirtied", self.dirtied.len() as u64),
            ("count.folios_wb_end", self.wb_end.len() as u64),
            ("count.folios_submaps", self.submaps.len() as u64),
        ]
    }

    /// Census of live folios for a kind (index of `FolioKind::ALL`), per order.
    pub fn census_of(&self, kind: FolioKind) -> [u64; NR_PAGE_ORDERS] {
        self.census[Self::kind_idx(kind)]
    }
}

/// The mobility of a folio's pages, as an index into `Mm::block_content`: LRU folios are
/// movable (1), slab allocated from a RECLAIMABLE request reclaimable (2), the rest unmovable
/// (0). `alloc_mt` is the migratetype the folio's head page was allocated with (`PageArray::b`).
///
/// Block-device page cache (`Bdev`, §33) counts as movable whatever its allocation
/// migratetype: the content census classifies a page by what it is, as the kernel's census
/// of /proc/kpageflags does (§30.2: an LRU page), so an Unmovable block holding directory
/// blocks next to its slab is mixed although every allocation in it asked for UNMOVABLE
/// (docs/pageblock-mixing.md rule 5). The allocator sees the same: `try_to_claim_block`
/// counts PageLRU pages as movable (`prep_move_freepages_block`, §6.3.2c).
pub fn folio_mobility(kind: FolioKind, alloc_mt: u32) -> usize {
    match kind {
        // A hugetlb page is allocated movable and fills its movable block: not pollution.
        FolioKind::Anon | FolioKind::File | FolioKind::Bdev | FolioKind::Hugetlb => 1,
        FolioKind::Slab if alloc_mt == MigrateType::Reclaimable as u32 => 2,
        _ => 0,
    }
}

impl Mm {
    /// Adds (`sign` = 1) or removes (−1) a folio's pages to/from the gauges of /proc/vmstat and
    /// /proc/zoneinfo (§14.2): LRU list sizes by the folio's active flag (isolated folios count as
    /// nr_isolated_*), nr_anon_pages,
    /// nr_file_pages, the THP-sized items (kept in pages, printed in THP units), slab and page
    /// tables.
    pub(crate) fn account_folio(&mut self, id: FolioId, sign: i64) {
        let f = &self.folios.folios[id as usize];
        let (pfn, order, kind, isolated, active, unevictable, mlocked, owner) = (
            f.pfn,
            f.order as u32,
            f.kind,
            f.isolated(),
            f.active(),
            f.unevictable(),
            f.mlocked(),
            f.owner,
        );
        let nr = sign << order;
        // §31.2: a partially unmapped anon folio counts its mapped subpages in NR_ANON_MAPPED
        // and rss, and a PMD-split one no longer in NR_ANON_THPS.
        let (mapped, pmd_mapped) = if f.split_state() {
            (sign * self.folios.mapped_pages(id) as i64, !f.pmd_split())
        } else {
            (nr, true)
        };
        if !isolated {
            let m = folio_mobility(kind, self.pages.b(pfn));
            let per_block = (1i64 << order).min(PAGEBLOCK_NR_PAGES as i64);
            let first = (pfn >> PAGEBLOCK_ORDER) as usize;
            let nblocks = ((1u32 << order) >> PAGEBLOCK_ORDER).max(1) as usize;
            for b in first..first + nblocks {
                let c = &mut self.block_content[b][m];
                *c = (*c as i64 + sign * per_block) as u32;
            }
        }
        if owner > 1 && matches!(kind, FolioKind::Anon | FolioKind::PageTable) {
            self.folios.rss.add(owner, mapped);
        }
        let zi = self.zone_of(pfn);
        let mut node = |s: Stat| {
            let v = &mut self.stats[s as usize];
            *v = (*v as i64 + nr) as u64;
        };
        match kind {
            FolioKind::Anon | FolioKind::File | FolioKind::Bdev => {
                let anon = kind == FolioKind::Anon;
                let (list, zone_list) = lru_gauges(anon, active, unevictable);
                if isolated {
                    node(if anon {
                        Stat::nr_isolated_anon
                    } else {
                        Stat::nr_isolated_file
                    });
                } else {
                    node(list);
                }
                if anon {
                    let v = &mut self.stats[Stat::nr_anon_pages as usize];
                    *v = (*v as i64 + mapped) as u64;
                    if order == HPAGE_PMD_ORDER && pmd_mapped {
                        let v = &mut self.stats[Stat::nr_anon_transparent_hugepages as usize];
                        *v = (*v as i64 + nr) as u64;
                    }
                } else {
                    node(Stat::nr_file_pages);
                    if order == HPAGE_PMD_ORDER {
                        node(Stat::nr_file_hugepages);
                    }
                }
                if !isolated {
                    self.mod_zone_stat(zi, zone_list, nr);
                }
                if mlocked {
                    // NR_MLOCK is a zone item (meminfo Mlocked); `stat` sums it.
                    self.mod_zone_stat(zi, Stat::nr_mlock, nr);
                }
            }
            FolioKind::Slab => {
                let s = if self.pages.b(pfn) == MigrateType::Reclaimable as u32 {
                    Stat::nr_slab_reclaimable
                } else {
                    Stat::nr_slab_unreclaimable
                };
                node(s);
            }
            FolioKind::PageTable => node(Stat::nr_page_table_pages),
            // The pool's pages are not in nr_hugetlb (checked on 6.18: a pool of 4 pages leaves
            // /proc/vmstat nr_hugetlb at 0; it counts charged, mapped hugetlb folios).
            FolioKind::Kernel | FolioKind::Hugetlb => {}
        }
    }

    /// The gauges' part of `folio_isolate_lru` for an LRU folio not yet isolated: what
    /// `account_folio(id, -1)`, setting `isolated` and `account_folio(id, 1)` do together, with
    /// the terms that cancel (nr_anon/file_pages, THP items, NR_MLOCK, rss) left out. The pages
    /// leave their pageblocks' content and their list's node and zone gauges and join
    /// nr_isolated_anon/file. Sets `isolated`.
    pub(crate) fn account_isolate(&mut self, id: FolioId) {
        debug_assert!(
            !self.folios.folios[id as usize].isolated(),
            "folio {id} is isolated"
        );
        self.account_isolation(id, -1);
    }

    /// The reverse of [`Mm::account_isolate`], for the putback of an isolated LRU folio (after
    /// `lru_add_evictable_check`, whose flags choose the list gauge): what
    /// `account_folio(id, -1)`, clearing `isolated` and `account_folio(id, 1)` do together.
    /// Clears `isolated`.
    pub(crate) fn account_putback(&mut self, id: FolioId) {
        debug_assert!(
            self.folios.folios[id as usize].isolated(),
            "folio {id} is not isolated"
        );
        self.account_isolation(id, 1);
    }

    /// `sign` = −1: into isolation; 1: out of it (see the two callers).
    fn account_isolation(&mut self, id: FolioId, sign: i64) {
        let f = &mut self.folios.folios[id as usize];
        debug_assert!(f.kind.on_lru(), "folio {id} is not an LRU folio");
        f.set_isolated(sign < 0);
        let (pfn, order, anon, active, unevictable) = (
            f.pfn,
            f.order as u32,
            f.kind == FolioKind::Anon,
            f.active(),
            f.unevictable(),
        );
        let nr = sign << order;
        // LRU folios are movable (`folio_mobility`).
        let per_block = sign * (1i64 << order).min(PAGEBLOCK_NR_PAGES as i64);
        let first = (pfn >> PAGEBLOCK_ORDER) as usize;
        let nblocks = ((1u32 << order) >> PAGEBLOCK_ORDER).max(1) as usize;
        for b in first..first + nblocks {
            let c = &mut self.block_content[b][1];
            *c = (*c as i64 + per_block) as u32;
        }
        let (list, zone_list) = lru_gauges(anon, active, unevictable);
        let isolated = if anon {
            Stat::nr_isolated_anon
        } else {
            Stat::nr_isolated_file
        };
        let v = &mut self.stats[list as usize];
        *v = (*v as i64 + nr) as u64;
        let v = &mut self.stats[isolated as usize];
        *v = (*v as i64 - nr) as u64;
        let zi = self.zone_of(pfn);
        self.mod_zone_stat(zi, zone_list, nr);
    }

    /// Allocates a folio of `order` for an owner of `kind` (`__alloc_pages` + folio setup; LRU
    /// folios are added to the LRU at once — the model has no LRU-add batches yet).
    pub fn alloc_folio(
        &mut self,
        cpu: u32,
        gfp: Gfp,
        order: u32,
        kind: FolioKind,
        nofs: bool,
    ) -> Option<FolioId> {
        let pfn = self.alloc_pages(cpu, gfp, order)?;
        let id = self.folios.insert(pfn, order, kind, nofs, None);
        self.folios.folios[id as usize].owner = self.cur.pid;
        self.pages.set_a(pfn, id);
        self.pages.set_flag(pfn, PG_LRU, kind.on_lru());
        if kind.on_lru() {
            self.lru_add(id);
        }
        self.account_folio(id, 1);
        Some(id)
    }

    /// Frees a folio (`folio_put` of the last reference). A folio on the deferred split queue
    /// leaves it first (`folio_unqueue_deferred_split` in `__folio_put`, §31.2 item 6). A
    /// page-cache folio leaves the page cache (`page_cache_delete`) with no shadow.
    pub fn free_folio(&mut self, cpu: u32, id: FolioId) {
        self.free_folio_inner(cpu, id, true);
    }

    /// [`Mm::free_folio`] of a page-cache folio already out of the page cache's index (reclaim's
    /// eviction left its shadow in its slots: `PageCache::evict_folio`): the rest of the
    /// freeing, the xarray-node settling included.
    pub(crate) fn free_deleted_folio(&mut self, cpu: u32, id: FolioId) {
        self.free_folio_inner(cpu, id, false);
    }

    /// `page_cache_delete`'s removal of page-cache folio `id` from its mapping's index (a
    /// dirty folio's tag cancelled first, as truncation's `__folio_cancel_dirty`). The folio
    /// keeps its mapping and index.
    fn page_cache_delete(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        let (mapping, index, order, dirty) = (f.mapping, f.index, f.order as u32, f.dirty());
        if dirty {
            let d = self.folios.dirtied_ns(id);
            self.cache.index.set_dirty(mapping, index, id, order, false, d);
        }
        self.cache.index.remove(mapping, index, order, id);
    }

    fn free_folio_inner(&mut self, cpu: u32, id: FolioId, in_index: bool) {
        let f = self.folios.get(id).clone();
        if f.deferred() {
            self.unqueue_deferred_split(id);
        }
        if f.lru != crate::vmscan::LRU_NONE {
            // A host-cache hint: the folio's LRU links, which `lru_del` reads, loaded while
            // the gauges are updated.
            crate::mmzone::prefetch(&self.folios.lru_links[id as usize]);
        }
        assert!(
            !f.isolated(),
            "free of folio {id} while it is isolated for migration"
        );
        self.account_folio(id, -1);
        if f.mlocked() {
            // __page_cache_release: freed still mlocked (NR_MLOCK fell with the gauges above).
            self.count(Stat::unevictable_pgs_cleared, 1u64 << f.order);
        }
        if f.lru != crate::vmscan::LRU_NONE {
            self.lru_del(id);
        }
        if f.mapping != 0 && in_index {
            self.page_cache_delete(id);
        }
        if f.dirty() {
            self.cache.nr_dirty -= 1u64 << f.order;
            self.stats[crate::vmstat::Stat::nr_dirty as usize] = self.cache.nr_dirty;
        }
        self.folios.remove(id);
        self.free_pages(cpu, f.pfn, f.order as u32);
        if f.mapping != 0 {
            self.xa_settle(cpu);
        }
        if f.kind == FolioKind::Bdev {
            // `try_to_free_buffers`: the buffer head goes with the folio (§33.1 item 4).
            self.bdev_release(cpu, f.mapping, f.index);
        }
    }

    /// A host-cache hint for a caller about to free or otherwise touch folio `id` (an unmap
    /// loop a few folios ahead): starts loading both host cache lines its record may span and
    /// its LRU links (which `free_folio`'s `lru_del` reads). No effect on the model; an id
    /// out of range is ignored.
    #[inline]
    pub fn prefetch_folio(&self, id: FolioId) {
        if let Some(f) = self.folios.folios.get(id as usize) {
            crate::mmzone::prefetch(f);
            crate::mmzone::prefetch(&f.index);
            crate::mmzone::prefetch(&self.folios.lru_links[id as usize]);
        }
    }

    /// The folio whose head is at `pfn`, if `pfn` is the head of an allocated folio.
    #[inline]
    pub fn folio_at(&self, pfn: u32) -> Option<FolioId> {
        if self.pages.kind(pfn) != PageKind::Allocated {
            return None;
        }
        let id = self.pages.a(pfn);
        let f = self.folios.folios.get(id as usize)?;
        (f.live() && f.pfn == pfn).then_some(id)
    }

    /// Splits a large folio into order-0 folios in place (`split_folio`): each piece is a new
    /// folio of the same kind carrying the parent's token. Returns the pieces in pfn order.
    /// Counts `thp_split_page` for PMD-size folios and the per-size `split` (orders 1..=9,
    /// `__folio_split`'s `count_mthp_stat`, §31.3 item 5). A folio on the deferred split
    /// queue leaves it (§31.3 item 2). A large anon folio with a subpage map (§31) is split by
    /// `Mm::split_anon_folio`, which frees its unmapped pieces: callers go through it.
    pub fn split_folio(&mut self, id: FolioId) -> Vec<FolioId> {
        let f = self.folios.get(id).clone();
        let cold = self.folios.cold(id);
        assert!(f.order > 0, "split of an order-0 folio");
        if f.deferred() {
            self.unqueue_deferred_split(id);
        }
        // Its pieces carry its token and the first reuses its id: a declared slab folio's
        // shrinker entry would come back to life (the shrinker's count assumes it cannot).
        assert!(!f.on_shrinker(), "split of a shrinkable slab folio");
        self.account_folio(id, -1);
        if f.lru != crate::vmscan::LRU_NONE {
            self.lru_del(id);
        }
        self.folios.remove(id);
        let lru = f.kind.on_lru();
        let mut pieces = Vec::with_capacity(1 << f.order);
        for i in 0..(1u32 << f.order) {
            let pfn = f.pfn + i;
            let pid = self
                .folios
                .insert(pfn, 0, f.kind, f.nofs_mapping(), Some(f.token()));
            self.folios.set_split_from(pid, id);
            if cold.dirtied_ns != 0 {
                self.folios.set_dirtied_ns(pid, cold.dirtied_ns);
            }
            if cold.writeback_end_ns != 0 {
                // §25.4: a split keeps the pieces' writeback state.
                self.folios.set_writeback_end_ns(pid, cold.writeback_end_ns);
            }
            let nf = &mut self.folios.folios[pid as usize];
            nf.set_isolated(f.isolated());
            nf.set_active(f.active());
            nf.set_referenced(f.referenced());
            nf.set_dirty(f.dirty());
            nf.mapping = f.mapping;
            nf.owner = f.owner;
            nf.set_workingset(f.workingset());
            // The pieces keep PG_mlocked and PG_unevictable (§29.1; no counter moves).
            nf.set_mlocked(f.mlocked());
            nf.set_unevictable(f.unevictable());
            // §25.4: a split keeps the pieces' pin and lock state.
            nf.set_pinned(f.pinned());
            nf.set_io_locked(f.io_locked());
            nf.index = f.index + i as u64;
            if f.mapping != 0 {
                if i == 0 {
                    let (d, o) = (cold.dirtied_ns, f.order as u32);
                    self.cache.index.set_dirty(f.mapping, f.index, id, o, false, d);
                    self.cache.index.remove(f.mapping, f.index, o, id);
                }
                self.cache.index.insert(f.mapping, f.index + i as u64, 0, pid);
                if f.dirty() {
                    let d = cold.dirtied_ns;
                    self.cache
                        .index
                        .set_dirty(f.mapping, f.index + i as u64, pid, 0, true, d);
                }
            }
            self.pages.set(pfn, PageKind::Allocated, 0);
            self.pages.set_a(pfn, pid);
            self.pages.set_b(pfn, self.pages.b(f.pfn));
            self.pages.set_flag(pfn, PG_LRU, lru && !f.isolated());
            if lru && !f.isolated() {
                // Simplification: pieces go to the list head (the kernel threads them in
                // right after the head's position, lru_add_split_folio).
                self.lru_add(pid);
            }
            self.account_folio(pid, 1);
            pieces.push(pid);
        }
        if f.order as u32 == HPAGE_PMD_ORDER {
            self.count(Stat::thp_split_page, 1);
        }
        if f.order as u32 <= HPAGE_PMD_ORDER {
            self.mthp.split[f.order as usize] += 1;
        }
        pieces
    }
}

/// The node and zone gauges an LRU folio's pages count in (§14.2): its list's
/// `nr_{in,}active_{anon,file}` and `nr_zone_*` pair, or, for an unevictable folio,
/// nr_unevictable (§29.1.4: it counts there, not in its list).
fn lru_gauges(anon: bool, active: bool, unevictable: bool) -> (Stat, Stat) {
    match (anon, active) {
        _ if unevictable => (Stat::nr_unevictable, Stat::nr_zone_unevictable),
        (true, false) => (Stat::nr_inactive_anon, Stat::nr_zone_inactive_anon),
        (true, true) => (Stat::nr_active_anon, Stat::nr_zone_active_anon),
        (false, false) => (Stat::nr_inactive_file, Stat::nr_zone_inactive_file),
        (false, true) => (Stat::nr_active_file, Stat::nr_zone_active_file),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `Rss` answers as the hash map it replaced (an entry per owner with pages, removed
        /// at zero): the same counts, the same owners, the same OOM victim.
        #[test]
        fn rss_matches_the_hash_map(ops in proptest::collection::vec(
            (prop_oneof![2u32..300, 65_530u32..65_545, 4_000_000u32..4_000_010], 0u32..4, any::<bool>()),
            1..300,
        )) {
            let mut new = Rss::default();
            let mut old: std::collections::HashMap<u32, u64> = Default::default();
            for (pid, order, up) in ops {
                // Never below zero, as the gauges never are.
                let have = old.get(&pid).copied().unwrap_or(0) as i64;
                let nr = if up || have < (1 << order) { 1i64 << order } else { -(1i64 << order) };
                new.add(pid, nr);
                let e = old.entry(pid).or_default();
                *e = (*e as i64 + nr) as u64;
                if *e == 0 {
                    old.remove(&pid);
                }
                prop_assert_eq!(new.get(pid), old.get(&pid).copied().unwrap_or(0));
                let a: std::collections::BTreeMap<u32, u64> = new.iter().collect();
                let b: std::collections::BTreeMap<u32, u64> = old.iter().map(|(&k, &v)| (k, v)).collect();
                prop_assert_eq!(&a, &b);
                let victim_new = new.iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
                let victim_old = old
                    .iter()
                    .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(&k, &v)| (k, v));
                prop_assert_eq!(victim_new, victim_old);
            }
        }
    }

    proptest! {
        /// The LRU lists threaded through `FolioTable::lru_links` keep the order of a plain
        /// list model (head = newest) under any sequence of adds and deletes, for both walking
        /// directions, and a folio off every list has NIL links.
        #[test]
        fn lru_links_match_a_list_model(ops in proptest::collection::vec((0usize..12, any::<bool>()), 1..200)) {
            use crate::mmzone::NIL;
            use crate::vmscan::{LRU_INACTIVE_FILE, LRU_NONE};
            let mut mm = crate::test_machines::dma32(4);
            let ids: Vec<FolioId> = (0..12)
                .map(|_| mm.alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::File, false).unwrap())
                .collect();
            // alloc_folio adds each at the head.
            let mut model: Vec<FolioId> = ids.iter().rev().copied().collect();
            for (i, add) in ops {
                let id = ids[i];
                let on = mm.folios.folios[id as usize].lru != LRU_NONE;
                if add && !on {
                    mm.lru_add(id);
                    model.insert(0, id);
                } else if !add && on {
                    mm.lru_del(id);
                    model.retain(|&x| x != id);
                    prop_assert_eq!(mm.folios.lru_links[id as usize], [NIL, NIL]);
                }
                prop_assert_eq!(mm.lru_folios(LRU_INACTIVE_FILE), model.clone());
                let mut back = Vec::new();
                let mut at = mm.reclaim.lruvec[0].lists[LRU_INACTIVE_FILE as usize].last;
                while at != NIL {
                    back.push(at);
                    at = mm.folios.lru_links[at as usize][1];
                }
                back.reverse();
                prop_assert_eq!(back, model.clone());
            }
        }
    }

    /// The cold side table behaves as the former in-record fields did: defaults for a new
    /// folio, kept while it lives, gone with it (a reused id starts from the defaults).
    #[test]
    fn cold_fields_live_and_die_with_their_folio() {
        let mut t = FolioTable::default();
        let a = t.insert(0, 0, FolioKind::File, false, None);
        let b = t.insert(1, 0, FolioKind::File, false, None);
        assert_eq!(t.cold(a), FolioCold::default());
        t.add_migration(a);
        t.add_migration(a);
        t.set_writeback_end_ns(a, 7 << 40 | 3);
        t.set_dirtied_ns(b, 5);
        t.set_split_from(b, 9);
        assert_eq!(
            (t.migrations(a), t.writeback_end_ns(a), t.dirtied_ns(a)),
            (2, 7 << 40 | 3, 0)
        );
        assert_eq!(
            (t.migrations(b), t.dirtied_ns(b), t.split_from(b)),
            (0, 5, Some(9))
        );
        t.clear_dirtied_ns(b);
        assert_eq!(t.dirtied_ns(b), 0);
        t.set_dirtied_ns(b, 5);
        t.remove(a);
        assert_eq!((t.cold.len(), t.wb_end.len(), t.dirtied.len()), (1, 0, 1));
        assert_eq!(t.migrations(a), 0, "freed with its folio");
        let c = t.insert(2, 0, FolioKind::Anon, false, None);
        assert_eq!(c, a, "ids are reused");
        assert_eq!(t.cold(c), FolioCold::default());
        t.remove(b);
        t.remove(c);
        assert!(t.cold.is_empty() && t.dirtied.is_empty() && t.wb_end.is_empty());
    }
    /// `account_isolate` / `account_putback` leave every gauge, pageblock content and rss
    /// exactly as `account_folio(-1)`, flipping `isolated`, `account_folio(1)` did, for anon
    /// and file folios of several orders, active or not, mlocked and unevictable or not.
    #[test]
    fn isolation_accounting_matches_the_double_account() {
        let make = || {
            let mut mm = crate::test_machines::dma32(8);
            mm.cur.pid = 7;
            let mut ids = Vec::new();
            for (i, (kind, order)) in [
                (FolioKind::Anon, 0),
                (FolioKind::File, 0),
                (FolioKind::Anon, 2),
                (FolioKind::File, 3),
                (FolioKind::Anon, HPAGE_PMD_ORDER),
                (FolioKind::File, 0),
                (FolioKind::Anon, 0),
            ]
            .into_iter()
            .enumerate()
            {
                let id = mm
                    .alloc_folio(0, Gfp::GFP_HIGHUSER_MOVABLE, order, kind, false)
                    .unwrap();
                let f = &mut mm.folios.folios[id as usize];
                f.set_active(i % 2 == 1);
                if i >= 5 {
                    f.set_mlocked(true);
                    f.set_unevictable(true);
                }
                ids.push(id);
            }
            (mm, ids)
        };
        let (mut mm, ids) = make();
        let (mut old, _) = make();
        let gauges = |mm: &Mm| {
            (
                mm.stats,
                mm.zones.iter().map(|z| z.stats).collect::<Vec<_>>(),
                mm.block_content.clone(),
                mm.folios.rss.clone(),
                mm.folios.folios.clone(),
            )
        };
        assert_eq!(mm.stats, old.stats);
        for id in ids {
            old.account_folio(id, -1);
            old.folios.folios[id as usize].set_isolated(true);
            old.account_folio(id, 1);
            mm.account_isolate(id);
            assert_eq!(gauges(&mm), gauges(&old), "isolate {id}");
            old.account_folio(id, -1);
            old.folios.folios[id as usize].set_isolated(false);
            old.account_folio(id, 1);
            mm.account_putback(id);
            assert_eq!(gauges(&mm), gauges(&old), "putback {id}");
        }
    }
}
