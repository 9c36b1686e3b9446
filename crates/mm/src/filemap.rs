//! Page-cache folio allocation policy (docs/model §12): the seed-002 variants for costly
//! orders. The readahead and write paths build on these types.

pub use fraglab_types::switches::{CostlyOrderPolicy, V4Position};

/// The page-cache switches of a run.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagecacheConfig {
    /// The block device's `ra_pages` (`read_ahead_kb / 4`, docs/model §23.1): what every
    /// file opened on it copies into its readahead state (`file_ra_state_init`). Default 32,
    /// the kernel's `VM_READAHEAD_PAGES` (128 KiB) for a new device.
    pub ra_pages: u64,
    /// The block device's `io_pages` (`max_sectors_kb / 4`, §23.1 item 2): the per-request
    /// ceiling a large read may raise its window to (§23.2) and the cap of forced readahead.
    /// Default 32, a new bdi's value (`VM_READAHEAD_PAGES`, §23.1 item 1).
    pub io_pages: u64,
}

impl Default for PagecacheConfig {
    fn default() -> Self {
        PagecacheConfig {
            ra_pages: VM_READAHEAD_PAGES,
            io_pages: VM_READAHEAD_PAGES,
        }
    }
}

/// `VM_READAHEAD_PAGES` (include/linux/pagemap.h): 128 KiB, a new bdi's `ra_pages` (§23.1).
pub const VM_READAHEAD_PAGES: u64 = 32;

/// The page cache of every mapping (the xarrays of `struct address_space`, §12): (mapping,
/// page index of a folio's first page) → folio. Mapping 0 means "not in the page cache".
///
/// One [`XArray`](crate::xarray::XArray) radix tree per mapping: every page a folio covers
/// answers [`lookup`](PageCache::lookup) in one descent (the xarray's multi-index entries,
/// stored here as the folio id in each covered slot), and the ordered walks (readahead,
/// truncate, invalidate, writeback, drop_caches) visit folios by (mapping, first index) as the
/// `BTreeMap` this replaced did. Memory grows with the folios cached, not with file offsets.
///
/// The same trees hold the workingset's shadow entries (§10.3.8, mm/workingset.c), as the
/// kernel's `address_space->i_pages` does: a folio evicted by reclaim leaves a value entry in
/// the slots it had (`page_cache_delete` stores the shadow `workingset_eviction` packed), and a
/// folio added over a shadow consumes it (`__filemap_add_folio` hands it to
/// `workingset_refault`). The folio walks skip shadows (their own head bitmap), and the
/// shadow operations are `workingset.rs`'s ([`PageCache::take_shadows`] and the rest).
///
/// The xarray's mark is the page cache's `PAGECACHE_TAG_DIRTY` (§12; the writeback of §19.1
/// item 9 and §25.4): an entry is marked exactly while its folio is dirty
/// ([`Mm::folio_mark_dirty`] sets and clears it; an entry is inserted clean, and a split's
/// dirty pieces are marked as they are inserted), so the flusher's walks
/// ([`PageCache::iter_dirty`]) visit the dirty folios only, in the order of the full walk.
/// Simplified: the kernel also tags PAGECACHE_TAG_WRITEBACK and TOWRITE; here PG_writeback is
/// a time (`writeback.rs`) and nothing walks for it. A tagged entry must be untagged before
/// its removal (`__filemap_remove_folio` of a dirty folio cancels its dirty state first).
///
/// The tagged folios are also kept ordered by (dirtying time, folio id)
/// ([`PageCache::dirty_by_age`]): the flusher's expiry and background passes take the oldest
/// ones without visiting the younger. This stands for the kernel's per-wb `b_dirty` list of
/// inodes ordered by `dirtied_when` (`move_expired_inodes`, fs/fs-writeback.c), which the
/// model (one flusher, no inodes: §19.1 item 9) keeps per folio; host-side bookkeeping.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct PageCache {
    /// Folios (pointer entries) and shadows (value entries).
    pub(crate) xa: crate::xarray::XArray,
    /// The dirty-tagged folios: (dirtied_ns, id).
    dirty_age: DirtyAge,
    /// Pages of the dirty-tagged folios.
    dirty_pages: u64,
    /// Folio and shadow insertions and removals not yet settled by the xarray-node model
    /// (`xa_node.rs`), recorded while `xa_log_on`.
    pub(crate) xa_log: Vec<crate::xa_node::XaEvent>,
    pub(crate) xa_log_on: bool,
}

impl PageCache {
    /// Records folio `id` of `order` at `index` of `mapping`; its pages must hold neither a
    /// folio nor a shadow (a caller adding a folio takes the shadows first:
    /// [`PageCache::take_shadows`]).
    pub fn insert(&mut self, mapping: u32, index: u64, order: u32, id: crate::folio::FolioId) {
        assert_ne!(mapping, 0, "mapping 0 is not a mapping");
        self.xa.insert(mapping, index, 1u64 << order, id as u64);
        self.log_xa(mapping, index, 1u64 << order, 1, false);
    }

    /// Records an insertion (`delta` = 1) or removal (−1) of an entry for the xarray-node
    /// model.
    pub(crate) fn log_xa(&mut self, mapping: u32, start: u64, nr: u64, delta: i8, shadow: bool) {
        if self.xa_log_on {
            self.xa_log.push(crate::xa_node::XaEvent {
                mapping,
                start,
                nr,
                delta,
                shadow,
            });
        }
    }

    /// Removes folio `id` of `order` from `index` of `mapping` (untagged: panics if it is
    /// still tagged dirty).
    pub fn remove(&mut self, mapping: u32, index: u64, order: u32, id: crate::folio::FolioId) {
        let tagged = self.xa.remove(mapping, index, 1u64 << order, id as u64);
        assert!(
            !tagged,
            "folio {id} removed from the page cache while tagged dirty"
        );
        self.log_xa(mapping, index, 1u64 << order, -1, false);
    }

    /// The folio whose first page is at `index` of `mapping`.
    pub fn get(&self, mapping: u32, index: u64) -> Option<crate::folio::FolioId> {
        self.xa
            .get(mapping, index, crate::xarray::Kind::Pointer)
            .map(|e| e as crate::folio::FolioId)
    }

    /// The folio covering page `index` of `mapping` (a shadow there is no folio).
    #[inline]
    pub fn lookup(&self, mapping: u32, index: u64) -> Option<crate::folio::FolioId> {
        self.xa
            .lookup(mapping, index)
            .filter(|&e| !crate::xarray::is_value(e))
            .map(|e| e as crate::folio::FolioId)
    }

    /// The first folio of `mapping` at or after `index`: (folio, its index).
    #[inline]
    pub fn next_from(&self, mapping: u32, index: u64) -> Option<(crate::folio::FolioId, u64)> {
        self.xa
            .next_from(mapping, index, crate::xarray::Kind::Pointer)
            .map(|(i, id)| (id as crate::folio::FolioId, i))
    }

    /// Folios in (mapping, index) order.
    pub fn iter(&self) -> impl Iterator<Item = ((u32, u64), crate::folio::FolioId)> + '_ {
        self.xa
            .iter(crate::xarray::Kind::Pointer)
            .map(|(k, id)| (k, id as crate::folio::FolioId))
    }

    /// The dirty-tagged entries in (mapping, index) order (`xas_for_each_marked` with
    /// PAGECACHE_TAG_DIRTY): [`PageCache::iter`] filtered by the folios' dirty flag.
    pub fn iter_dirty(&self) -> impl Iterator<Item = ((u32, u64), crate::folio::FolioId)> + '_ {
        self.xa
            .iter_marked()
            .map(|(k, id)| (k, id as crate::folio::FolioId))
    }

    /// Tags (`__folio_mark_dirty`'s `__xa_set_mark`) or untags (`folio_clear_dirty_for_io`,
    /// `__folio_cancel_dirty`) folio `id` of `order` at `index` of `mapping` dirty;
    /// `dirtied_ns` is its dirtying time (its place in [`PageCache::dirty_by_age`]). Returns
    /// false, changing nothing, unless the folio is cached there.
    pub fn set_dirty(
        &mut self,
        mapping: u32,
        index: u64,
        id: crate::folio::FolioId,
        order: u32,
        dirty: bool,
        dirtied_ns: u64,
    ) -> bool {
        let Some(was) = self.xa.set_mark(mapping, index, id as u64, dirty) else {
            return false;
        };
        if was != dirty {
            if dirty {
                self.dirty_age.insert(dirtied_ns, id);
                self.dirty_pages += 1u64 << order;
            } else {
                let found = self.dirty_age.remove(dirtied_ns, id);
                assert!(
                    found,
                    "folio {id} tagged dirty without its dirtying time {dirtied_ns}"
                );
                self.dirty_pages -= 1u64 << order;
            }
        }
        true
    }

    /// The dirty-tagged folios, oldest first: (dirtied_ns, id) in ascending order.
    pub fn dirty_by_age(&self) -> impl Iterator<Item = (u64, crate::folio::FolioId)> + '_ {
        self.dirty_age.iter()
    }

    /// The first dirty-tagged folio after `(dirtied_ns, id)` in [`PageCache::dirty_by_age`]'s
    /// order.
    pub fn dirty_after(&self, after: (u64, crate::folio::FolioId)) -> Option<(u64, crate::folio::FolioId)> {
        self.dirty_age.after(after)
    }

    /// Host bytes of the index (folios and shadows), the dirty set and the log
    /// (`host_mem.rs`), with the counts that explain them.
    pub(crate) fn host_bytes(&self) -> Vec<(&'static str, u64)> {
        use crate::host_mem::vec_bytes;
        use crate::xarray::Kind;
        vec![
            ("pagecache.xarray (folios + shadows)", self.xa.host_bytes()),
            ("pagecache.dirty_age", self.dirty_age.host_bytes()),
            ("pagecache.xa_log", vec_bytes(&self.xa_log)),
            ("count.pagecache_entries", self.xa.len(Kind::Pointer) as u64),
            ("count.shadows", self.xa.len(Kind::Value) as u64),
            ("count.pagecache_xa_nodes", self.xa.nodes_in_use() as u64),
            ("count.pagecache_dirty", self.dirty_age.len() as u64),
        ]
    }

    /// The dirty-tagged folios held in the dirty set ([`PageCache::dirty_by_age`]).
    pub fn dirty_len(&self) -> usize {
        self.dirty_age.len()
    }

    /// Pages of the dirty-tagged folios (the dirty pages in the page cache).
    pub fn dirty_pages(&self) -> u64 {
        self.dirty_pages
    }

    /// Whether the entry at `index` of `mapping` is tagged dirty.
    pub fn is_dirty(&self, mapping: u32, index: u64) -> bool {
        self.xa.is_marked(mapping, index)
    }

    /// Folios cached.
    pub fn len(&self) -> usize {
        self.xa.len(crate::xarray::Kind::Pointer)
    }

    /// No folio cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One entry of [`DirtyAge`]'s log: a dirtying time and a folio id ([`DirtyAge::HOLE`] once
/// removed), 12 bytes.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
#[repr(C, packed(4))]
struct AgeEntry {
    t: u64,
    id: u32,
}

/// The dirty-tagged folios ordered by (dirtying time, folio id) ([`PageCache::dirty_by_age`]):
/// the set a `BTreeSet<(u64, FolioId)>` held, in less memory (12 bytes an entry instead of
/// about 35). Host-side bookkeeping (see [`PageCache`]).
///
/// Folios are dirtied at the current time, which only grows, so almost every insertion is
/// larger than every earlier one: those are appended to `log`, which stays sorted. A removal
/// (the flusher cleans the oldest; truncation any) finds its entry by binary search and leaves
/// a hole, popped at once at the front and swept out when the holes outnumber the entries. The
/// rare insertion that is not larger than the last appended key (a split's dirty pieces keep
/// their parent's older time; folios dirtied in the same nanosecond in falling id order) goes
/// to `late`, an ordered set; walks merge the two. The visiting order is that of the set.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub(crate) struct DirtyAge {
    /// Appended entries, strictly ascending by (t, id) whatever their holes.
    log: std::collections::VecDeque<AgeEntry>,
    /// Holes in `log`.
    holes: usize,
    /// The last key appended to `log` (kept when it is removed): the next appended key must be
    /// larger.
    last: Option<(u64, FolioId)>,
    /// Entries that arrived out of order.
    late: std::collections::BTreeSet<(u64, FolioId)>,
}

impl DirtyAge {
    /// The id of a removed entry of the log (no folio has it: ids index the folio table).
    const HOLE: FolioId = FolioId::MAX;

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.log.len() - self.holes + self.late.len()
    }

    /// Adds (t, id), which must not be held.
    pub(crate) fn insert(&mut self, t: u64, id: FolioId) {
        debug_assert_ne!(id, Self::HOLE);
        if self.last.is_none_or(|l| (t, id) > l) {
            self.log.push_back(AgeEntry { t, id });
            self.last = Some((t, id));
        } else {
            let fresh = self.late.insert((t, id));
            debug_assert!(fresh, "({t}, {id}) inserted twice");
        }
    }

    /// The position in `log` of the live entry (t, id).
    fn find(&self, t: u64, id: FolioId) -> Option<usize> {
        let mut i = self.log.partition_point(|e| e.t < t);
        while let Some(e) = self.log.get(i) {
            let (et, eid) = (e.t, e.id);
            if et != t {
                return None;
            }
            if eid == id {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// Removes (t, id); false if it was not held.
    pub(crate) fn remove(&mut self, t: u64, id: FolioId) -> bool {
        if !self.late.is_empty() && self.late.remove(&(t, id)) {
            return true;
        }
        let Some(i) = self.find(t, id) else {
            return false;
        };
        self.log[i].id = Self::HOLE;
        self.holes += 1;
        while self.log.front().is_some_and(|e| e.id == Self::HOLE) {
            self.log.pop_front();
            self.holes -= 1;
        }
        if self.holes > 64 && self.holes * 2 > self.log.len() {
            self.log.retain(|e| e.id != Self::HOLE);
            self.holes = 0;
        }
        true
    }

    /// The live entries of the log from position `i` on, in order.
    fn log_from(&self, i: usize) -> impl Iterator<Item = (u64, FolioId)> + '_ {
        self.log
            .range(i..)
            .filter(|e| e.id != Self::HOLE)
            .map(|e| (e.t, e.id))
    }

    /// All entries in ascending (t, id) order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, FolioId)> + '_ {
        Merge {
            a: self.log_from(0).peekable(),
            b: self.late.iter().copied().peekable(),
        }
    }

    /// The first entry larger than `after`.
    pub(crate) fn after(&self, after: (u64, FolioId)) -> Option<(u64, FolioId)> {
        use std::ops::Bound::{Excluded, Unbounded};
        let i = self.log.partition_point(|e| e.t < after.0);
        let a = self.log_from(i).find(|&k| k > after);
        let b = if self.late.is_empty() {
            None
        } else {
            self.late.range((Excluded(after), Unbounded)).next().copied()
        };
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Host bytes (`host_mem.rs`).
    pub(crate) fn host_bytes(&self) -> u64 {
        crate::host_mem::deque_bytes(&self.log) + crate::host_mem::btree_set_bytes(&self.late)
    }
}

/// The merge of two ascending sequences of distinct keys.
struct Merge<A: Iterator<Item = (u64, FolioId)>, B: Iterator<Item = (u64, FolioId)>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator<Item = (u64, FolioId)>, B: Iterator<Item = (u64, FolioId)>> Iterator for Merge<A, B> {
    type Item = (u64, FolioId);
    fn next(&mut self) -> Option<(u64, FolioId)> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) => {
                if x < y {
                    self.a.next()
                } else {
                    self.b.next()
                }
            }
            (Some(_), None) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

use crate::folio::{FolioId, FolioKind};
use crate::gfp::Gfp;
use crate::node::Mm;
use crate::slowpath::AllocWork;

/// `MAX_PAGECACHE_ORDER` on x86-64 with 4 KiB pages (§12.1): min(MAX_XAS_ORDER, HPAGE_PMD_ORDER).
pub const MAX_PAGECACHE_ORDER: u32 = 9;

/// A file's `address_space` as far as folio allocation goes (§12.1).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// `mapping_min_folio_order` / `mapping_max_folio_order` (max 0: no large folios).
    pub min_order: u32,
    pub max_order: u32,
    /// `mapping_gfp_mask`.
    pub gfp: Gfp,
    /// `a_ops->migrate_folio` exists (§25.1 #9; every kind the spec names has one).
    pub migrate_folio: bool,
}

impl Mapping {
    /// XFS: large folios [0, MAX_PAGECACHE_ORDER], and `xfs_setup_inode` clears __GFP_FS from
    /// the mapping's GFP_HIGHUSER_MOVABLE.
    pub fn xfs_like() -> Mapping {
        Mapping {
            min_order: 0,
            max_order: MAX_PAGECACHE_ORDER,
            gfp: Gfp::GFP_HIGHUSER_MOVABLE.without(Gfp::FS),
            migrate_folio: true,
        }
    }

    /// A filesystem with large folios and the default gfp (ext4 on 6.18, per
    /// measured on the reference VM).
    pub fn large_folios() -> Mapping {
        Mapping {
            min_order: 0,
            max_order: MAX_PAGECACHE_ORDER,
            gfp: Gfp::GFP_HIGHUSER_MOVABLE,
            migrate_folio: true,
        }
    }

    /// A mapping without large-folio support: order 0 only.
    pub fn no_large_folios() -> Mapping {
        Mapping {
            min_order: 0,
            max_order: 0,
            gfp: Gfp::GFP_HIGHUSER_MOVABLE,
            migrate_folio: true,
        }
    }

    /// ext4 on 6.18 (docs/model §23.7, fs/ext4/inode.c `ext4_should_enable_large_folio`,
    /// `ext4_set_inode_mapping_order`): a regular file gets orders [0, min(9, 11 + blkbits −
    /// 12)] — 9 for 1–4 KiB blocks — unless the filesystem is mounted `data=journal` (or the
    /// inode has the journal-data flag, or the filesystem has `verity`/`encrypt`): order 0.
    /// The gfp is the default GFP_HIGHUSER_MOVABLE.
    pub fn ext4(block_size: u64, data_journal: bool) -> Mapping {
        let blkbits = 63 - block_size.max(1024).leading_zeros();
        let max = if data_journal {
            0
        } else {
            MAX_PAGECACHE_ORDER.min(11 + blkbits - 12)
        };
        Mapping {
            min_order: 0,
            max_order: max,
            gfp: Gfp::GFP_HIGHUSER_MOVABLE,
            migrate_folio: true,
        }
    }

    /// XFS with a block size of `block_size` bytes (§23.7, `xfs_setup_inode` →
    /// `mapping_set_folio_min_order`): every inode, orders [min, 9] with min = log2(block size
    /// / page size) when the block is larger than a page, else 0; no __GFP_FS.
    pub fn xfs(block_size: u64) -> Mapping {
        let min = (63 - block_size.max(4096).leading_zeros()) - 12;
        Mapping {
            min_order: min.min(MAX_PAGECACHE_ORDER),
            ..Mapping::xfs_like()
        }
    }

    /// btrfs data inodes (§23.7): large folios only with CONFIG_BTRFS_EXPERIMENTAL, which a
    /// distribution kernel does not set: order 0.
    pub fn btrfs() -> Mapping {
        Mapping::no_large_folios()
    }

    /// A tmpfs file under the mount's `huge=` (§23.7): `never`, the default, gives order 0;
    /// otherwise orders up to the PMD order. Simplified: shmem chooses its orders per write and
    /// fault (`always`/`within_size`/`advise`), not through readahead, which the model does
    /// not tell apart; the mapping only records whether large folios are possible.
    pub fn tmpfs(huge_never: bool) -> Mapping {
        if huge_never {
            Mapping::no_large_folios()
        } else {
            Mapping::large_folios()
        }
    }

    /// `mapping_large_folio_support`.
    pub fn large_folio_support(&self) -> bool {
        self.max_order > 0
    }

    /// Whether its gfp lacks __GFP_FS (a NOFS compactor may not migrate its folios, §9.6.3).
    pub fn nofs(&self) -> bool {
        !self.gfp.intersects(Gfp::FS)
    }
}

/// `fgf_set_order(size)`: the folio order hinted by a write of `len` bytes (ilog2(len) − 12,
/// 0 for a page or less).
pub fn fgf_order(len: u64) -> u32 {
    if len <= 4096 {
        0
    } else {
        63 - len.leading_zeros() - 12
    }
}

/// The gfp of one attempt of the buffered-write loop at `order` (§12.3.3 and the §12.5 table):
/// `base` = mapping gfp + __GFP_WRITE, `hint` = the order the write asked for, `min_order` =
/// the mapping's minimum.
pub fn write_folio_gfp(policy: CostlyOrderPolicy, base: Gfp, hint: u32, order: u32, min_order: u32) -> Gfp {
    use crate::types::PAGE_ALLOC_COSTLY_ORDER as COSTLY;
    let light = Gfp::NORETRY.union(Gfp::NOWARN);
    match policy {
        CostlyOrderPolicy::Baseline | CostlyOrderPolicy::V4KcompactdBackground => {
            if order > min_order {
                base.union(light)
            } else {
                base
            }
        }
        // fs/iomap: the caller drops __GFP_DIRECT_RECLAIM for the whole call when the hint is
        // costly — the min-order fallback included; filemap still adds NORETRY|NOWARN above min.
        CostlyOrderPolicy::V1Iomap => {
            let g = if hint > COSTLY {
                base.without(Gfp::DIRECT_RECLAIM)
            } else {
                base
            };
            if order > min_order {
                g.union(light)
            } else {
                g
            }
        }
        CostlyOrderPolicy::V2FilemapCostly => {
            if order > COSTLY && order > min_order {
                base.without(Gfp::DIRECT_RECLAIM).union(Gfp::NOWARN)
            } else if order > min_order {
                base.union(light)
            } else {
                base
            }
        }
        CostlyOrderPolicy::V3FilemapOpportunistic => {
            if order > min_order {
                base.without(Gfp::DIRECT_RECLAIM).union(Gfp::NOWARN)
            } else {
                base
            }
        }
    }
}

/// One allocation attempt of the write path.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteAttempt {
    pub index: u64,
    /// The order this `__filemap_get_folio` call was asked for (`fgf_set_order` of the bytes
    /// left in the chunk).
    pub hint: u32,
    pub order: u32,
    pub gfp: Gfp,
    pub ok: bool,
    /// What the allocation's slow path did.
    pub work: AllocWork,
}

/// What a buffered write did.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Pages that were already in the page cache (written over, dirtied).
    pub hit_pages: u64,
    /// Folios created, per order.
    pub added: [u64; 11],
    pub attempts: Vec<WriteAttempt>,
    /// Pages that could not be given a folio at all (the write would fail with −ENOMEM).
    pub failed_pages: u64,
}

/// Readahead state of an open file (`struct file_ra_state`, §12.2).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadaheadState {
    pub start: u64,
    pub size: u64,
    pub async_size: u64,
    /// The folio order the next readahead aims for (`ra->order`).
    pub order: u32,
    /// The last page read (`prev_pos` in pages), `u64::MAX` before the first read.
    pub prev_index: u64,
    /// `ra_pages` (the bdi's read_ahead_kb / 4; default 32).
    pub ra_pages: u64,
    /// `mmap_miss`: page faults on this file that missed the page cache, less those that hit
    /// (read-around stops above `MMAP_LOTSAMISS`).
    pub mmap_miss: u32,
    /// `FMODE_RANDOM` of the open file (POSIX_FADV_RANDOM): a miss reads exactly the request
    /// at min order, no window and no marker (§23.3 item 2).
    pub random: bool,
    /// The bdi's `io_pages` (§23.1 item 2), read by `ractl_max_pages` and
    /// `force_page_cache_ra` (the kernel reads it from the bdi at each call; the model's bdi
    /// never changes during a run, so the open file keeps a copy).
    pub io_pages: u64,
}

impl Default for ReadaheadState {
    fn default() -> Self {
        ReadaheadState {
            start: 0,
            size: 0,
            async_size: 0,
            order: 0,
            prev_index: u64::MAX,
            ra_pages: VM_READAHEAD_PAGES,
            mmap_miss: 0,
            random: false,
            io_pages: VM_READAHEAD_PAGES,
        }
    }
}

impl ReadaheadState {
    /// `ractl_max_pages` (mm/readahead.c, docs/model §23.2): the window ceiling of a
    /// request of `req` pages — `ra_pages`, unless the request is larger and the device's
    /// `io_pages` is too: then `min(req, io_pages)`.
    pub fn max_pages(&self, req: u64) -> u64 {
        if req > self.ra_pages && self.io_pages > self.ra_pages {
            req.min(self.io_pages)
        } else {
            self.ra_pages
        }
    }

    /// The cap of `force_page_cache_ra` (§23.2, §23.6): `max(io_pages, ra_pages)`.
    pub fn forced_max(&self) -> u64 {
        self.io_pages.max(self.ra_pages)
    }
}

/// `get_init_ra_size` (§12.2.3).
pub fn get_init_ra_size(size: u64, max: u64) -> u64 {
    let newsize = size.max(1).next_power_of_two();
    if newsize <= max / 32 {
        newsize * 4
    } else if newsize <= max / 4 {
        newsize * 2
    } else {
        max
    }
}

/// `get_next_ra_size` (§12.2.4).
pub fn get_next_ra_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// What a read did.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Pages of the request found in the page cache, and pages that readahead had to bring in
    /// for it (read from the device).
    pub hit_pages: u64,
    pub miss_pages: u64,
    /// Folios added by readahead, per order.
    pub added: [u64; 11],
    /// Large-folio allocations that failed (each ends its window's large folios, §12.2.5).
    pub alloc_failures: u64,
    /// Synchronous and asynchronous readahead calls.
    pub sync_ra: u64,
    pub async_ra: u64,
    /// Pages that could not be read (even an order-0 folio failed).
    pub failed_pages: u64,
    /// Each `page_cache_ra_order` window of the call: (start, size, the clamped order it
    /// asked for — 0 without large-folio support), as `readahead:page_cache_ra_order` shows
    /// the window (§23.8; the tracepoint prints the order before the clamp).
    pub windows: Vec<(u64, u64, u32)>,
}

impl ReadStats {
    /// Adds the figures of a later call `o` (several read(2) calls of one step).
    pub fn add(&mut self, o: &ReadStats) {
        self.hit_pages += o.hit_pages;
        self.miss_pages += o.miss_pages;
        for (a, b) in self.added.iter_mut().zip(o.added) {
            *a += b;
        }
        self.alloc_failures += o.alloc_failures;
        self.sync_ra += o.sync_ra;
        self.async_ra += o.async_ra;
        self.failed_pages += o.failed_pages;
        self.windows.extend_from_slice(&o.windows);
    }
}

impl Mm {
    /// Registers a mapping; its id (≥ 1) names it in folios and the page cache.
    pub fn add_mapping(&mut self, m: Mapping) -> u32 {
        self.cache.mappings.push(m);
        self.cache.mappings.len() as u32
    }

    pub fn mapping(&self, id: u32) -> Mapping {
        self.cache.mappings[(id - 1) as usize]
    }

    /// The folio of `mapping` covering page `index`, if cached.
    pub fn filemap_lookup(&self, mapping: u32, index: u64) -> Option<FolioId> {
        self.cache.index.lookup(mapping, index)
    }

    /// The page cache of `mapping` by folio order (issue 19's census; on the host, the same
    /// figures come from /proc/kpageflags, docs/model §30.2): cached pages in folios of
    /// each order 0..=10, and the number of folios of each order. Walks the mapping's entries
    /// in the page cache's index (the xarray's walk in `filemap_get_folios`, without the
    /// shadow entries).
    pub fn filemap_census(&self, mapping: u32) -> ([u64; 11], [u64; 11]) {
        let (mut pages, mut folios) = ([0u64; 11], [0u64; 11]);
        let mut index = 0;
        while let Some((id, i)) = self.cache.index.next_from(mapping, index) {
            let order = (self.folios.get(id).order as usize).min(10);
            pages[order] += 1 << order;
            folios[order] += 1;
            index = i + 1;
        }
        (pages, folios)
    }

    /// Whether pages [index, index + 2^order) of `mapping` are all uncached.
    fn filemap_range_empty(&self, mapping: u32, index: u64, order: u32) -> bool {
        let end = index + (1u64 << order);
        if self.filemap_lookup(mapping, index).is_some() {
            return false;
        }
        self.cache
            .index
            .next_from(mapping, index)
            .is_none_or(|(_, i)| i >= end)
    }

    /// `filemap_alloc_folio` + `filemap_add_folio`: a page-cache folio of `order` at `index`.
    fn filemap_add(&mut self, cpu: u32, mapping: u32, index: u64, order: u32, gfp: Gfp) -> Option<FolioId> {
        self.filemap_add_kind(cpu, mapping, index, order, gfp, FolioKind::File)
    }

    /// [`Mm::filemap_add`] for a folio of owner `kind` (a file's page cache, or the block
    /// device's: `bdev.rs`).
    pub(crate) fn filemap_add_kind(
        &mut self,
        cpu: u32,
        mapping: u32,
        index: u64,
        order: u32,
        gfp: Gfp,
        kind: FolioKind,
    ) -> Option<FolioId> {
        let nofs = self.mapping(mapping).nofs();
        let id = self.alloc_folio(cpu, gfp, order, kind, nofs)?;
        let f = &mut self.folios.folios[id as usize];
        f.mapping = mapping;
        f.index = index;
        self.page_cache_insert(id);
        // `__filemap_add_folio`: the xarray nodes the store needs, with `gfp & GFP_RECLAIM_MASK`.
        self.cache.xa.add_gfp = Some(gfp);
        self.xa_settle(cpu);
        self.cache.xa.add_gfp = None;
        Some(id)
    }

    /// A buffered write of `len` bytes at page `index` of `mapping` through iomap
    /// (`iomap_write_iter` → `iomap_get_folio` → `__filemap_get_folio(FGP_WRITEBEGIN | FGP_NOFS |
    /// fgf_set_order(len))`, §12.3–§12.5): for each chunk, an existing folio is written over;
    /// otherwise the order hinted by the bytes left in this chunk (chunk = the mapping's largest
    /// folio), capped at the mapping's maximum and reduced to the index's alignment, is tried,
    /// then each lower order down to the minimum, with the gfp of `costly_order_policy`. New
    /// folios and cached ones written over are dirtied; none is marked accessed (FGP_WRITEBEGIN
    /// has no FGP_ACCESSED and `iomap_write_iter` does not call `folio_mark_accessed`).
    ///
    /// Simplification: an order whose range is partly cached is not allocated at all (the
    /// kernel allocates the folio, fails `filemap_add_folio` with −EEXIST, frees it and tries
    /// the next lower order, as the model does without the allocation).
    pub fn filemap_write(&mut self, cpu: u32, mapping: u32, index: u64, len_bytes: u64) -> WriteStats {
        let m = self.mapping(mapping);
        let base = m.gfp.union(Gfp::WRITE).without(Gfp::FS);
        let chunk_pages = 1u64 << m.max_order;
        let mut st = WriteStats::default();
        let mut pos = index;
        let end = index + len_bytes.div_ceil(4096).max(1);
        while pos < end {
            if let Some(id) = self.filemap_lookup(mapping, pos) {
                let f = &self.folios.folios[id as usize];
                let next = f.index + (1u64 << f.order);
                let n = next.min(end) - pos;
                st.hit_pages += n;
                self.folio_mark_dirty(id, true);
                pos = next;
                continue;
            }
            let in_chunk = (chunk_pages - pos % chunk_pages).min(end - pos);
            let hint = fgf_order(in_chunk * 4096);
            let mut order = hint.max(m.min_order).min(m.max_order);
            if pos & ((1u64 << order) - 1) != 0 {
                order = pos.trailing_zeros();
            }
            let mut got = None;
            loop {
                if self.filemap_range_empty(mapping, pos, order) {
                    let gfp = self.policy.pagecache_folio_gfp(base, hint, order, m.min_order);
                    let r = self.filemap_add(cpu, mapping, pos, order, gfp);
                    st.attempts.push(WriteAttempt {
                        index: pos,
                        hint,
                        order,
                        gfp,
                        ok: r.is_some(),
                        work: self.work.last_alloc,
                    });
                    if let Some(id) = r {
                        got = Some((id, order));
                        break;
                    }
                }
                if order <= m.min_order {
                    break;
                }
                order -= 1;
            }
            match got {
                Some((id, order)) => {
                    st.added[order as usize] += 1;
                    self.folio_mark_dirty(id, true);
                    pos += 1u64 << order;
                }
                None => {
                    st.failed_pages += end - pos;
                    break;
                }
            }
        }
        st
    }

    /// A read of `nr` pages at page `index` of `mapping` (`filemap_read` with
    /// `page_cache_sync_ra` on a miss and `page_cache_async_ra` on the PG_readahead marker,
    /// §12.2). `file_pages` is the file's size (readahead stops at EOF). Hits are marked
    /// accessed.
    pub fn filemap_read(
        &mut self,
        cpu: u32,
        mapping: u32,
        ra: &mut ReadaheadState,
        index: u64,
        nr: u64,
        file_pages: u64,
    ) -> ReadStats {
        let mut st = ReadStats::default();
        let first_new = self.folios.next_token();
        let end = (index + nr).min(file_pages);
        let mut pos = index;
        while pos < end {
            // `filemap_get_pages`: the request runs to `last_index` (not cut at EOF).
            let last_index = index + nr;
            let (id, _) = match self.filemap_lookup(mapping, pos) {
                Some(id) => {
                    // A host-cache hint (no effect on the model): the records of the folios
                    // in the next slots of the leaf, which the next iterations read.
                    for &e in self.cache.index.xa.leaf_slots_after(mapping, pos, 4) {
                        if e != id as u64 {
                            if let Some(f) = self.folios.folios.get(e as usize) {
                                crate::mmzone::prefetch(f);
                            }
                        }
                    }
                    if self.folios.folios[id as usize].readahead_mark() {
                        let fi = self.folios.folios[id as usize].index;
                        self.page_cache_async_ra(
                            cpu,
                            mapping,
                            ra,
                            id,
                            fi,
                            last_index - fi,
                            file_pages,
                            &mut st,
                        );
                    }
                    (id, true)
                }
                None => {
                    st.sync_ra += 1;
                    self.page_cache_sync_ra(cpu, mapping, ra, pos, last_index - pos, file_pages, &mut st);
                    match self.filemap_lookup(mapping, pos) {
                        Some(id) => (id, false),
                        None => {
                            st.failed_pages += end - pos;
                            break;
                        }
                    }
                }
            };
            self.folio_mark_accessed(id);
            let f = &self.folios.folios[id as usize];
            let next = (f.index + (1u64 << f.order)).min(end);
            // Pages of folios this call's readahead brought in are misses.
            if f.token() < first_new {
                st.hit_pages += next - pos;
            } else {
                st.miss_pages += next - pos;
            }
            pos = next;
            ra.prev_index = pos - 1;
        }
        st
    }

    /// `page_cache_sync_ra` (mm/readahead.c, docs/model §23.3), a miss at `index` for a
    /// request of `req` pages:
    /// 1. `ra_pages` 0: a forced read of the one page (cgroup congestion is not modelled);
    /// 2. FMODE_RANDOM: `force_page_cache_ra` of the request (capped at
    ///    `max(io_pages, ra_pages)`), the state untouched;
    /// 3. start of file, `req > max` (max = `ractl_max_pages`, §23.2) or `index − prev_index ≤ 1`:
    ///    `start = index`, `size = get_init_ra_size(req, max)`, `async_size = size − req` (or
    ///    `size / 2`);
    /// 4. otherwise the history probe (`page_cache_prev_miss` over at most `max` pages before
    ///    the miss, exact): no more cached pages than `req` → the request alone at min order
    ///    (`do_page_cache_ra` without a mark, state untouched); more → a stream: `contig`
    ///    doubled if the file is cached from page 0, `size = min(contig + req, max)`,
    ///    `async_size = 1`;
    /// 5. `ra.order = 0`, then §23.5. Not simplified (§23.8 would allow it).
    #[allow(clippy::too_many_arguments)]
    fn page_cache_sync_ra(
        &mut self,
        cpu: u32,
        mapping: u32,
        ra: &mut ReadaheadState,
        index: u64,
        req: u64,
        file_pages: u64,
        st: &mut ReadStats,
    ) {
        if ra.ra_pages == 0 {
            // §23.3 item 1: a forced read of the page asked for only.
            self.force_ra(cpu, mapping, ra, index, 1, file_pages, st);
            return;
        }
        if ra.random {
            // §23.3 item 2.
            self.force_ra(cpu, mapping, ra, index, req, file_pages, st);
            return;
        }
        let max = ra.max_pages(req);
        let sequential = index == 0 || req > max || index.wrapping_sub(ra.prev_index) <= 1;
        if sequential {
            ra.start = index;
            ra.size = get_init_ra_size(req, max);
            ra.async_size = if ra.size > req { ra.size - req } else { ra.size / 2 };
        } else {
            // `page_cache_prev_miss(index − 1, max)`: `contig` cached pages before `index`;
            // a full scan finds `max − 1` (the walk stops on the last cached page it loads);
            // walking off page 0 is the "cached from the start" case (miss = ULONG_MAX).
            let mut contig = max.saturating_sub(1);
            let mut from_start = false;
            for j in 1..=max {
                if j > index {
                    contig = index;
                    from_start = true;
                    break;
                }
                if self.filemap_lookup(mapping, index - j).is_none() {
                    contig = j - 1;
                    break;
                }
            }
            if contig <= req {
                self.ra_unbounded(cpu, mapping, index, req, 0, file_pages, st);
                return;
            }
            if from_start {
                contig *= 2;
            }
            ra.start = index;
            ra.size = (contig + req).min(max);
            ra.async_size = 1;
        }
        ra.order = 0;
        let start = ra.start;
        self.page_cache_ra_order(cpu, mapping, ra, start, file_pages, st);
    }

    /// `page_cache_async_ra` (mm/readahead.c, docs/model §23.4): an access at `findex`
    /// (the readahead index: the folio's first page for read(2), the faulting page for a
    /// fault) for `req` pages reached folio `folio`, which carries PG_readahead.
    /// 1. `ra_pages` 0, or the folio under writeback (PG_readahead is PG_reclaim's bit): nothing,
    ///    the mark stays. Otherwise the mark is cleared (cgroup congestion not modelled).
    /// 2. The expected hit (`start + size − async_size` rounded down to the folio's size): the
    ///    window moves on, `size = max(size, get_next_ra_size(size, max))`.
    /// 3. Any other hit (interleaved streams): `page_cache_next_miss(findex + 1, max)`; none
    ///    within `max` → nothing more; else the window starts there with
    ///    `size = get_next_ra_size(start − findex + req, max)`.
    /// 4. `ra.order += 2`; the window end is rounded down to 2^min(order, ffs(max) − 1) unless
    ///    that empties it; `async_size = size` (the mark on the first folio); then §23.5.
    #[allow(clippy::too_many_arguments)]
    fn page_cache_async_ra(
        &mut self,
        cpu: u32,
        mapping: u32,
        ra: &mut ReadaheadState,
        folio: FolioId,
        findex: u64,
        req: u64,
        file_pages: u64,
        st: &mut ReadStats,
    ) {
        if ra.ra_pages == 0 || self.folio_under_writeback(folio) {
            return;
        }
        self.folios.folios[folio as usize].set_readahead_mark(false);
        st.async_ra += 1;
        let max = ra.max_pages(req);
        let nr = 1u64 << self.folios.folios[folio as usize].order;
        let expected = (ra.start + ra.size - ra.async_size) / nr * nr;
        if findex == expected {
            ra.start += ra.size;
            ra.size = ra.size.max(get_next_ra_size(ra.size, max));
        } else {
            // `page_cache_next_miss(findex + 1, max)`: the first uncached page.
            let mut start = findex + 1 + max;
            for i in findex + 1..findex + 1 + max {
                if self.filemap_lookup(mapping, i).is_none() {
                    start = i;
                    break;
                }
            }
            if start - findex > max {
                return;
            }
            ra.start = start;
            ra.size = get_next_ra_size(start - findex + req, max);
        }
        ra.order += 2;
        let align = 1u64 << ra.order.min(max.max(1).trailing_zeros());
        let end = ra.start + ra.size;
        let aligned_end = end / align * align;
        if aligned_end > ra.start {
            ra.size -= end - aligned_end;
        }
        ra.async_size = ra.size;
        let start = ra.start;
        self.page_cache_ra_order(cpu, mapping, ra, start, file_pages, st);
    }

    /// Whether `folio` is under writeback (PG_writeback, which PG_readahead shares its bit
    /// with: §23.4 item 1): from the flusher's submission until the device completes it
    /// (`writeback.rs`, §25.4).
    fn folio_under_writeback(&self, folio: FolioId) -> bool {
        self.folio_test_writeback(folio)
    }

    /// `page_cache_ra_order` (mm/readahead.c, docs/model §23.5), a window of `ra.size`
    /// pages from `start` (the kernel's `ractl->_index`; equal to `ra.start` except on the
    /// VM_HUGEPAGE fault, which does not set `ra.start`):
    /// 1. no large-folio support: `ra.order = 0`, the window at min order;
    /// 2. `new = max(min(ra.order, mapping max, ilog2(size)), mapping min)`, stored back in
    ///    `ra.order` (the next +2 starts from it);
    /// 3. folios of `new`, smaller where the index is unaligned or the window/EOF ends; gfp =
    ///    the mapping's | __GFP_NORETRY | __GFP_NOWARN, without __GFP_FS (the memalloc_nofs
    ///    scope); the folio holding page `start + size − async_size` gets PG_readahead;
    /// 4. the first error — a failed allocation, or −EEXIST where a page of the folio's range
    ///    is already cached — ends the large folios: the rest of the window is read by
    ///    `do_page_cache_ra` at min order (skipping cached pages, the same mark); `ra.order`
    ///    is not lowered.
    fn page_cache_ra_order(
        &mut self,
        cpu: u32,
        mapping: u32,
        ra: &mut ReadaheadState,
        start: u64,
        file_pages: u64,
        st: &mut ReadStats,
    ) {
        let m = self.mapping(mapping);
        let mark = start + ra.size - ra.async_size;
        let lookahead = ra.async_size;
        let mut index = start;
        if m.large_folio_support() {
            let limit = file_pages.min(start + ra.size);
            let cap = m.max_order.min(63 - ra.size.max(1).leading_zeros());
            let new_order = ra.order.min(cap).max(m.min_order);
            ra.order = new_order;
            st.windows.push((start, ra.size, new_order));
            let gfp = m.gfp.union(Gfp::NORETRY).union(Gfp::NOWARN).without(Gfp::FS);
            let mut err = false;
            while index < limit {
                let mut order = new_order;
                if index & ((1u64 << order) - 1) != 0 {
                    order = index.trailing_zeros().min(order);
                }
                while order > m.min_order && index + (1u64 << order) > limit {
                    order -= 1;
                }
                if !self.filemap_range_empty(mapping, index, order) {
                    // −EEXIST from `filemap_add_folio`.
                    err = true;
                    break;
                }
                let Some(id) = self.filemap_add(cpu, mapping, index, order, gfp) else {
                    if order > 0 {
                        st.alloc_failures += 1;
                    }
                    err = true;
                    break;
                };
                self.read_in(st, order);
                if index == mark / (1u64 << order) * (1u64 << order) {
                    self.folios.folios[id as usize].set_readahead_mark(true);
                }
                index += 1u64 << order;
            }
            if !err {
                return;
            }
        } else {
            ra.order = 0;
            st.windows.push((start, ra.size, 0));
        }
        // `fallback:` the rest of the window (if any) at min order, with the same mark.
        if ra.size > index - start {
            self.ra_unbounded(
                cpu,
                mapping,
                index,
                ra.size - (index - start),
                lookahead,
                file_pages,
                st,
            );
        }
    }

    /// `do_page_cache_ra` → `page_cache_ra_unbounded` (mm/readahead.c): min-order folios over
    /// [index, index + n) cut at EOF, skipping cached pages; the folio at `n − lookahead` from
    /// `index` (when `lookahead ≤ n`, and 0 means none) gets PG_readahead; the first failed
    /// allocation ends the read.
    #[allow(clippy::too_many_arguments)]
    fn ra_unbounded(
        &mut self,
        cpu: u32,
        mapping: u32,
        index: u64,
        n: u64,
        lookahead: u64,
        file_pages: u64,
        st: &mut ReadStats,
    ) {
        if index >= file_pages {
            return;
        }
        // `do_page_cache_ra`: cut at EOF before the mark is placed.
        let n = n.min(file_pages - index);
        let m = self.mapping(mapping);
        let mark = if lookahead > 0 && lookahead <= n {
            Some(index + n - lookahead)
        } else {
            None
        };
        let gfp = m.gfp.union(Gfp::NORETRY).union(Gfp::NOWARN).without(Gfp::FS);
        let step = 1u64 << m.min_order;
        let mut i = index;
        while i < index + n {
            if self.filemap_lookup(mapping, i).is_some() {
                i += 1;
                continue;
            }
            let Some(id) = self.filemap_add(cpu, mapping, i, m.min_order, gfp) else {
                break;
            };
            self.read_in(st, m.min_order);
            if mark.is_some_and(|k| k >= i && k < i + step) {
                self.folios.folios[id as usize].set_readahead_mark(true);
            }
            i += step;
        }
    }

    /// `force_page_cache_ra` (mm/readahead.c, §23.2, §23.6): `min(nr, max(io_pages, ra_pages))`
    /// pages from `index`, in 2 MiB chunks, each a `do_page_cache_ra` at min order without a
    /// mark (a failed allocation ends its chunk only); the readahead state untouched.
    #[allow(clippy::too_many_arguments)]
    fn force_ra(
        &mut self,
        cpu: u32,
        mapping: u32,
        ra: &ReadaheadState,
        index: u64,
        nr: u64,
        file_pages: u64,
        st: &mut ReadStats,
    ) {
        const CHUNK: u64 = (2 << 20) / 4096;
        let mut left = nr.min(ra.forced_max());
        let mut i = index;
        while left > 0 {
            let n = left.min(CHUNK);
            if i >= file_pages {
                break;
            }
            self.ra_unbounded(cpu, mapping, i, n, 0, file_pages, st);
            i += n;
            left -= n;
        }
    }

    /// A folio of `order` a read added to the page cache (readahead, or the fault path's
    /// single-folio read): counted in `st.added` and in `pgpgin`, since it is read from the
    /// device — the block layer counts the sectors of every read bio (`submit_bio`, 512-byte
    /// sectors; /proc/vmstat prints them halved, as KiB). Simplified: only page-cache reads
    /// are counted — no metadata, swap-in or direct I/O reads.
    fn read_in(&mut self, st: &mut ReadStats, order: u32) {
        st.added[order as usize] += 1;
        self.count(crate::vmstat::Stat::pgpgin, 8 << order);
    }
}

/// `MMAP_LOTSAMISS` (mm/filemap.c): above this many net misses a file mapping gets no
/// read-around.
pub const MMAP_LOTSAMISS: u32 = 100;

/// The VMA flags of a file mapping that steer fault readahead.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileVma {
    /// VM_HUGEPAGE (MADV_HUGEPAGE): PMD-order readahead.
    pub hugepage: bool,
    /// VM_SEQ_READ (MADV_SEQUENTIAL): sync readahead as for read(2).
    pub seq_read: bool,
    /// VM_RAND_READ (MADV_RANDOM): no readahead.
    pub rand_read: bool,
}

impl Mm {
    /// A page fault on page `index` of a file mapping (`filemap_fault`, mm/filemap.c, Linux
    /// 6.18; docs/model §23.6 "other entry points"):
    /// * hit: `do_async_mmap_readahead` — `mmap_miss` decremented, and on a PG_readahead folio
    ///   (unless VM_RAND_READ) `page_cache_async_ra` (§12.2.4);
    /// * miss: `do_sync_mmap_readahead` — VM_HUGEPAGE: a window of two PMD folios
    ///   (one with VM_RAND_READ) at the PMD-aligned index, `ra->order` = 9, async size 512;
    ///   VM_RAND_READ alone: none; VM_SEQ_READ: `page_cache_sync_ra` with `ra_pages`;
    ///   otherwise `mmap_miss` counts up and, while not above `MMAP_LOTSAMISS`, *read-around*:
    ///   a window of `ra_pages` starting `ra_pages / 2` before the fault, async size
    ///   `ra_pages / 4`, order 0, through `page_cache_ra_order` (§12.2.5). If the page is still
    ///   missing, `__filemap_get_folio(FGP_CREAT | FGP_FOR_MMAP)` adds an order-0 folio with
    ///   the mapping's gfp (full reclaim allowed).
    ///
    /// The faulting access sets the PTE young bit; as for anonymous memory the model keeps it in
    /// PG_referenced (set on the folio). Simplification: the folio is not recorded as mapped,
    /// so reclaim frees it without `try_to_unmap` and without the extra pass a young PTE buys.
    /// Counts in the returned stats as a read of one page (hit or miss).
    pub fn filemap_fault(
        &mut self,
        cpu: u32,
        mapping: u32,
        ra: &mut ReadaheadState,
        vma: FileVma,
        index: u64,
        file_pages: u64,
    ) -> ReadStats {
        let mut st = ReadStats::default();
        if index >= file_pages {
            st.failed_pages = 1;
            return st;
        }
        self.count(crate::vmstat::Stat::pgfault, 1);
        if let Some(id) = self.filemap_lookup(mapping, index) {
            ra.mmap_miss = ra.mmap_miss.saturating_sub(1);
            if self.folios.folios[id as usize].readahead_mark() && !vma.rand_read {
                // `do_async_mmap_readahead`: the request is `ra_pages`, and the readahead
                // index is the faulting page (not the folio's first, as for read(2)).
                let req = ra.ra_pages;
                self.page_cache_async_ra(cpu, mapping, ra, id, index, req, file_pages, &mut st);
            }
            self.folios.folios[id as usize].set_referenced(true);
            self.folios.folios[id as usize].set_idle(false);
            st.hit_pages = 1;
            return st;
        }
        // Not in the page cache at all: a major fault.
        self.count(crate::vmstat::Stat::pgmajfault, 1);
        let first_new = self.folios.next_token();
        if vma.hugepage {
            // The window starts at the PMD-aligned index, but 6.18 sets only `ractl->_index`,
            // not `ra->start` (so a later mark hit is "expected" only if `ra.start` happens
            // to match, §23.4 item 3 otherwise).
            let nr = 1u64 << crate::types::HPAGE_PMD_ORDER;
            let start = index & !(nr - 1);
            ra.size = if vma.rand_read { nr } else { 2 * nr };
            ra.async_size = nr;
            ra.order = crate::types::HPAGE_PMD_ORDER;
            st.sync_ra += 1;
            self.page_cache_ra_order(cpu, mapping, ra, start, file_pages, &mut st);
        } else if vma.rand_read || ra.ra_pages == 0 {
            // No readahead.
        } else if vma.seq_read {
            st.sync_ra += 1;
            let req = ra.ra_pages;
            self.page_cache_sync_ra(cpu, mapping, ra, index, req, file_pages, &mut st);
        } else {
            if ra.mmap_miss < MMAP_LOTSAMISS * 10 {
                ra.mmap_miss += 1;
            }
            if ra.mmap_miss <= MMAP_LOTSAMISS {
                ra.start = index.saturating_sub(ra.ra_pages / 2);
                ra.size = ra.ra_pages;
                ra.async_size = ra.ra_pages / 4;
                ra.order = 0;
                st.sync_ra += 1;
                let start = ra.start;
                self.page_cache_ra_order(cpu, mapping, ra, start, file_pages, &mut st);
            }
        }
        let id = match self.filemap_lookup(mapping, index) {
            Some(id) => Some(id),
            None => {
                let m = self.mapping(mapping);
                let r = self.filemap_add(cpu, mapping, index, m.min_order, m.gfp);
                if r.is_some() {
                    self.read_in(&mut st, m.min_order);
                }
                r
            }
        };
        match id {
            Some(id) => {
                self.folios.folios[id as usize].set_referenced(true);
                self.folios.folios[id as usize].set_idle(false);
                if self.folios.folios[id as usize].token() < first_new {
                    st.hit_pages = 1;
                } else {
                    st.miss_pages = 1;
                }
            }
            None => st.failed_pages = 1,
        }
        ra.prev_index = index;
        st
    }

    /// `filemap_write_and_wait_range` over pages [index, index + n) of `mapping` (msync with
    /// MS_SYNC, fsync): every dirty folio starting there is written and becomes clean (the
    /// write completes at once, as for the flusher). Returns the pages written.
    pub fn filemap_writeback_range(&mut self, mapping: u32, index: u64, n: u64) -> u64 {
        let mut written = 0;
        let mut pos = index;
        while let Some((id, i)) = self.cache.index.next_from(mapping, pos) {
            if i >= index + n {
                break;
            }
            let f = &self.folios.folios[id as usize];
            pos = i + (1u64 << f.order);
            if f.dirty() {
                written += 1u64 << f.order;
                self.folio_mark_dirty(id, false);
            }
        }
        written
    }
}

impl Mm {
    /// Writing 1 to /proc/sys/vm/drop_caches (`drop_pagecache_sb` → `invalidate_mapping_pages`):
    /// every clean, unmapped page-cache folio not isolated is removed and freed (no shadow
    /// entries are left: invalidation is not eviction). Dirty folios stay, and so do block-device
    /// folios whose buffer is journalled (`try_to_free_buffers` fails on a busy buffer, §33.1
    /// item 6). Returns pages freed.
    pub fn drop_caches(&mut self, cpu: u32) -> u64 {
        let ids: Vec<FolioId> = self.cache.index.iter().map(|(_, id)| id).collect();
        let mut freed = 0;
        for id in ids {
            let f = &self.folios.folios[id as usize];
            if f.dirty() || f.isolated() || (f.kind == FolioKind::Bdev && self.bdev_pinned(id)) {
                continue;
            }
            freed += 1u64 << f.order;
            self.free_folio(cpu, id);
        }
        self.count(crate::vmstat::Stat::drop_pagecache, 1);
        freed
    }

    /// Deleting a file (`truncate_inode_pages_final` at the last iput after unlink): every
    /// folio of `mapping` is removed from the page cache and freed, dirty ones included (their
    /// dirty state is cancelled, nothing is written), and the mapping's shadow entries go.
    /// Returns the pages freed.
    pub fn filemap_truncate(&mut self, cpu: u32, mapping: u32) -> u64 {
        let freed = self.filemap_truncate_range(cpu, mapping, 0, u64::MAX);
        self.workingset_forget_mapping(mapping);
        self.xa_settle(cpu);
        freed
    }

    /// `truncate_inode_pages_range` over folios starting in [index, index + n) of `mapping`
    /// (a file of a directory modelled as one mapping: deleting it): freed, dirty ones
    /// unwritten, and the shadow entries overlapping the range removed
    /// (`truncate_folio_batch_exceptionals`), so a file created later in the same range does
    /// not see a refault.
    pub fn filemap_truncate_range(&mut self, cpu: u32, mapping: u32, index: u64, n: u64) -> u64 {
        let end = index.saturating_add(n);
        let mut freed = 0;
        while let Some((id, i)) = self.cache.index.next_from(mapping, index) {
            if i >= end {
                break;
            }
            assert!(
                !self.folios.folios[id as usize].isolated(),
                "truncate of folio {id} while compaction holds it isolated"
            );
            freed += 1u64 << self.folios.folios[id as usize].order;
            self.free_folio(cpu, id);
        }
        if end > index {
            self.cache.index.forget_shadow_range(mapping, index, end - index);
            self.xa_settle(cpu);
        }
        freed
    }
}

/// Issue 19 item 3: the device's read-ahead and `posix_fadvise` (mm/fadvise.c
/// `generic_fadvise`, docs/model §23.1 and §23.6).
impl Mm {
    /// `file_ra_state_init` (§23.1 item 4): the readahead state of a file opened now, with the
    /// device's `ra_pages` (`[machine] read_ahead_kb / 4`).
    pub fn file_ra_state_init(&self) -> ReadaheadState {
        ReadaheadState {
            ra_pages: self.cache.cfg.ra_pages,
            io_pages: self.cache.cfg.io_pages,
            ..Default::default()
        }
    }

    /// `force_page_cache_ra` (§23.6: POSIX_FADV_WILLNEED, readahead(2)): reads the uncached
    /// pages of [index, index + min(nr, max(io_pages, ra_pages))) at the mapping's min order,
    /// in 2 MiB chunks; no marker, the readahead state untouched.
    pub fn force_page_cache_ra(
        &mut self,
        cpu: u32,
        mapping: u32,
        ra: &ReadaheadState,
        index: u64,
        nr: u64,
        file_pages: u64,
    ) -> ReadStats {
        let mut st = ReadStats::default();
        self.force_ra(cpu, mapping, ra, index, nr, file_pages, &mut st);
        st.miss_pages = (0..11).map(|o| st.added[o] << o).sum();
        st
    }

    /// POSIX_FADV_DONTNEED (`generic_fadvise`) over pages [index, index + n) (the kernel
    /// rounds the byte range inward to whole pages for the invalidation): first the writeback
    /// of the range's dirty folios is started (`__filemap_fdatawrite_range`, WB_SYNC_NONE) —
    /// here it completes at once, as the flusher's does ([`Mm::filemap_writeback_range`]) —
    /// then `mapping_try_invalidate` removes and frees every folio lying wholly in the range
    /// that is clean, not under writeback and not isolated, without a shadow entry
    /// (invalidation is not eviction). The folios just written are still under writeback in
    /// the kernel when it invalidates, so they stay (clean: a second DONTNEED drops them).
    /// Simplified: mapped folios are not told apart (as `drop_caches`), and the lru_add_drain
    /// that lets the kernel invalidate folios still in a per-CPU LRU batch is implicit.
    /// Returns the pages freed.
    pub fn fadvise_dontneed(&mut self, cpu: u32, mapping: u32, index: u64, n: u64) -> u64 {
        let end = index.saturating_add(n);
        // The writeback covers every dirty folio overlapping the range.
        let mut under_writeback = Vec::new();
        let first = self
            .filemap_lookup(mapping, index)
            .map_or(index, |id| self.folios.folios[id as usize].index);
        let mut pos = first;
        while let Some((id, i)) = self.cache.index.next_from(mapping, pos) {
            let f = &self.folios.folios[id as usize];
            if i >= end {
                break;
            }
            pos = i + (1u64 << f.order);
            if pos > index && f.dirty() {
                under_writeback.push(id);
                self.folio_mark_dirty(id, false);
            }
        }
        under_writeback.sort_unstable();
        let mut freed = 0;
        let mut pos = index;
        while let Some((id, i)) = self.cache.index.next_from(mapping, pos) {
            let f = &self.folios.folios[id as usize];
            let fend = i + (1u64 << f.order);
            if i >= end {
                break;
            }
            pos = fend;
            if i < index
                || fend > end
                || f.dirty()
                || f.isolated()
                || under_writeback.binary_search(&id).is_ok()
            {
                continue;
            }
            freed += 1u64 << f.order;
            self.free_folio(cpu, id);
        }
        if freed > 0 {
            self.xa_settle(cpu);
        }
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::{DirtyAge, PageCache};
    use proptest::prelude::*;

    proptest! {
        /// `DirtyAge` answers as the `BTreeSet<(dirtied_ns, id)>` it replaced: the same
        /// removals found, the same walk in the same order, the same `after` answers — with
        /// times that mostly grow (as the clock) and sometimes repeat or go back (a split's
        /// pieces), and removals at the front (the flusher) and anywhere (truncation).
        #[test]
        fn dirty_age_matches_the_btree_set(ops in proptest::collection::vec(
            (0u8..10, 0u64..4, 0u32..40, any::<prop::sample::Index>()),
            1..400,
        )) {
            let mut new = DirtyAge::default();
            let mut old = std::collections::BTreeSet::<(u64, u32)>::new();
            let mut now = 0u64;
            for (op, dt, id, pick) in ops {
                match op {
                    // Dirty at the current time (which advances by 0-3).
                    0..=4 => {
                        now += dt;
                        if !old.iter().any(|&(_, i)| i == id) {
                            old.insert((now, id));
                            new.insert(now, id);
                        }
                    }
                    // A split piece: an older time.
                    5 => {
                        let t = now.saturating_sub(dt * 3);
                        if !old.iter().any(|&(_, i)| i == id) {
                            old.insert((t, id));
                            new.insert(t, id);
                        }
                    }
                    // Clean the oldest.
                    6 | 7 => {
                        if let Some(&k) = old.iter().next() {
                            old.remove(&k);
                            prop_assert!(new.remove(k.0, k.1));
                        }
                    }
                    // Clean any (or a key not held).
                    _ => {
                        let k = if old.is_empty() || op == 9 && dt == 0 {
                            (now, id + 1000)
                        } else {
                            *old.iter().nth(pick.index(old.len())).unwrap()
                        };
                        prop_assert_eq!(new.remove(k.0, k.1), old.remove(&k));
                    }
                }
                prop_assert_eq!(new.len(), old.len());
                let a: Vec<_> = new.iter().collect();
                let b: Vec<_> = old.iter().copied().collect();
                prop_assert_eq!(&a, &b);
                for t in 0..=now + 1 {
                    for i in [0u32, id, 39] {
                        use std::ops::Bound::{Excluded, Unbounded};
                        let want = old.range((Excluded((t, i)), Unbounded)).next().copied();
                        prop_assert_eq!(new.after((t, i)), want);
                    }
                }
            }
        }
    }

    /// Many removals leave no more holes than entries (the log is swept).
    #[test]
    fn dirty_age_sweeps_its_holes() {
        let mut d = DirtyAge::default();
        for i in 0..10_000u32 {
            d.insert(i as u64 / 3, i);
        }
        for i in (0..10_000u32).filter(|i| i % 10 != 0) {
            assert!(d.remove(i as u64 / 3, i));
        }
        assert_eq!(d.len(), 1000);
        assert!(d.holes <= 1000, "{}", d.holes);
        assert_eq!(d.iter().count(), 1000);
        assert!(!d.remove(0, 1));
    }

    /// PAGECACHE_TAG_DIRTY and the by-age order: tagging is idempotent, the tagged walk is
    /// in index order, the age order is (dirtied_ns, id), and a folio is untagged before its
    /// removal.
    #[test]
    fn dirty_tag_and_age() {
        let mut pc = PageCache::default();
        pc.insert(1, 0, 0, 10);
        pc.insert(1, 8, 3, 11);
        pc.insert(2, 512, 9, 12);
        assert!(pc.set_dirty(2, 512, 12, 9, true, 5));
        assert!(pc.set_dirty(1, 8, 11, 3, true, 7));
        assert!(
            pc.set_dirty(1, 8, 11, 3, true, 7),
            "tagging twice changes nothing"
        );
        assert!(pc.set_dirty(1, 0, 10, 0, true, 5));
        assert!(!pc.set_dirty(1, 9, 11, 3, true, 7), "not the folio's first index");
        assert!(!pc.set_dirty(1, 8, 10, 3, true, 7), "another folio");
        assert_eq!(pc.dirty_pages(), 1 + 8 + 512);
        let walk: Vec<_> = pc.iter_dirty().collect();
        assert_eq!(walk, vec![((1, 0), 10), ((1, 8), 11), ((2, 512), 12)]);
        let age: Vec<_> = pc.dirty_by_age().collect();
        assert_eq!(age, vec![(5, 10), (5, 12), (7, 11)]);
        assert_eq!(pc.dirty_after((5, 10)), Some((5, 12)));
        assert_eq!(pc.dirty_after((7, 11)), None);
        assert!(pc.set_dirty(1, 8, 11, 3, false, 7));
        assert!(!pc.is_dirty(1, 8));
        assert_eq!(pc.dirty_pages(), 1 + 512);
        pc.remove(1, 8, 3, 11);
        assert!(pc.set_dirty(1, 0, 10, 0, false, 5));
        pc.remove(1, 0, 0, 10);
        assert_eq!(pc.iter_dirty().collect::<Vec<_>>(), vec![((2, 512), 12)]);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pc.remove(2, 512, 9, 12)));
        assert!(r.is_err(), "a tagged folio's removal panics");
    }
}
