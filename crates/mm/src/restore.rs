//! Booting in a given state (issue 21 item 2, docs/model §30.5): [`Mm::from_restore`] does
//! what [`Mm::from_config`] does — min_free_kbytes, watermarks, lowmem reserves, PCP sizes, the
//! compaction scanners' cached positions — but lays out the memory map from a [`Restore`]:
//! reserved pages and holes where the machine had them, every pageblock's migratetype, free
//! chunks on the buddy lists at their orders, and allocated folios of their kinds.
//!
//! The kernel has no such boot; this is the state a running kernel is in, as read from
//! /proc/kpageflags and fitted by `fraglab_state::reconstruct` (§30.3–§30.5). What it puts where,
//! and what it simplifies:
//!
//! * **Free chunks** go on `free_area[order].free_list[block type]` at the order given,
//!   **without merging** (`__add_to_free_list`, not `__free_one_page`): the cut of §30.3 is
//!   already the buddy invariant, and a HighAtomic or Isolate pair of order-9 buddies must stay
//!   two chunks (§30.3 item 3). NR_FREE_PAGES, NR_FREE_PAGES_BLOCKS, `nr_free` per order and
//!   per type follow from `account_freepages`/`__add_to_free_list`. Chunks are added in pfn
//!   order, each at the list's tail, so a list's head is its lowest chunk (the live order of a
//!   free list is not observable).
//! * **Folios** are inserted into the folio table with their flags (PG_active, PG_referenced,
//!   PG_unevictable, PG_mlocked), LRU folios at the head of their list in pfn order (the live
//!   LRU order is not observable either), and counted by `account_folio` (nr_anon_pages,
//!   nr_file_pages, the LRU gauges, NR_MLOCK, slab reclaimable/unreclaimable by the head's
//!   allocation migratetype, page tables, the pageblock content census). Their owner is the
//!   kernel (pid 0): the model's OOM killer cannot pick a restored folio's task.
//! * **Page-cache folios** go into one synthetic mapping (ext4-like: large folios up to order
//!   9, GFP_HIGHUSER_MOVABLE) at consecutive, order-aligned indices in pfn order: kpageflags does
//!   not say which file a page caches or at which offset. They are clean (PG_dirty is noisy
//!   during a read and writeback state is not restored).
//! * **shmem/tmpfs** folios are restored as anonymous folios: the kernel keeps them on the anon
//!   LRU (swap-backed, `folio_is_file_lru` false), so reclaim treats them as the model treats
//!   anon; the model has no shmem, so they count in nr_anon_pages rather than nr_shmem /
//!   nr_file_pages.
//! * With `[model] xa_nodes`, the restored page cache's xarray nodes are allocated after boot
//!   as for any insertion (reclaimable slab on CPU 0): the snapshot's own radix_tree_node slab
//!   pages are already among its slab folios, so those nodes are counted twice.
//! * **hugetlb** pages (order 9) join the pool's free list in pfn order: kpageflags does not say
//!   whether a hugetlb page is mapped, and the model's pool has only free pages.
//! * HighAtomic blocks count in the zone's `nr_reserved_highatomic`; an Isolate block type is
//!   refused (no one would ever unisolate it).
//!
//! [`Restore`] is checked before anything is built: zones as [`MachineConfig::validate`] wants
//! them and agreeing with the reserved and hole ranges, every range, chunk and folio inside one
//! zone, chunks and folios naturally aligned and of an order ≤ `MAX_PAGE_ORDER`, nothing
//! overlapping, every managed page covered exactly once, free chunks spanning two pageblocks
//! only when both have one type.

use crate::filemap::Mapping;
use crate::folio::FolioKind;
use crate::mmzone::*;
use crate::node::Mm;
use crate::types::*;

/// An allocated folio to restore.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestoreFolio {
    pub pfn: u32,
    pub order: u8,
    pub kind: FolioKind,
    /// The migratetype its head was allocated with (`PageArray::alloc_migratetype`): decides
    /// whether a slab folio counts as reclaimable, and the block content census.
    pub alloc_mt: MigrateType,
    pub active: bool,
    pub referenced: bool,
    /// PG_unevictable (on the unevictable list, §29.1.3); LRU kinds only.
    pub unevictable: bool,
    /// PG_mlocked (counted in NR_MLOCK, §29.1.2); LRU kinds only.
    pub mlocked: bool,
    /// A page-cache folio of shmem/tmpfs (swap-backed); with `kind` File. Restored as anon
    /// (module doc).
    pub shmem: bool,
    /// PG_dirty (or PG_writeback, restored as dirty: the model's writeback needs a queued
    /// I/O) of a page-cache folio: marked dirty at boot (`folio_mark_dirty`), so the flusher
    /// writes it back after `dirty_expire` and migration meets it dirty until then (§25.1: a
    /// dirty ext4 large folio cannot be split, `Mm::try_split_folio_ok`).
    pub dirty: bool,
}

impl RestoreFolio {
    /// A folio of `kind` with the allocation migratetype its kind gets from the allocator
    /// (LRU and hugetlb movable, everything else unmovable) and no flags.
    pub fn new(pfn: u32, order: u8, kind: FolioKind) -> RestoreFolio {
        let alloc_mt = match kind {
            FolioKind::Anon | FolioKind::File | FolioKind::Hugetlb => MigrateType::Movable,
            // §33.2: directory blocks and inode-table readahead, the bdev pages a snapshot
            // finds in Unmovable blocks.
            FolioKind::Bdev => MigrateType::Unmovable,
            _ => MigrateType::Unmovable,
        };
        RestoreFolio {
            pfn,
            order,
            kind,
            alloc_mt,
            active: false,
            referenced: false,
            unevictable: false,
            mlocked: false,
            shmem: false,
            dirty: false,
        }
    }
}

/// The state to boot in: mm-native plain data (`fraglab_sim::restore` builds it from a
/// `fraglab_state::reconstruct::Reconstruction`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Restore {
    /// The zones, in kernel order; `present` and `managed` must agree with `holes` and
    /// `reserved` (present = spanned − hole pages in the span, managed = present − reserved).
    pub zones: Vec<ZoneConfig>,
    /// [start, end) pfn ranges of PG_reserved pages and of holes (no memmap), each inside one
    /// zone's span.
    pub reserved: Vec<[u32; 2]>,
    pub holes: Vec<[u32; 2]>,
    /// One migratetype per pageblock from pfn 0 (at least as many as the zones' blocks; extra
    /// entries are ignored).
    pub block_types: Vec<MigrateType>,
    /// Free chunks (pfn, order).
    pub free: Vec<(u32, u8)>,
    /// Which free chunks free page reporting had reported (§32.3), by head pfn, when the
    /// capture recorded it; `None`: not known (the boot decides, `fraglab_sim::boot`).
    pub free_reported: Option<Vec<u32>>,
    pub folios: Vec<RestoreFolio>,
    /// Mappings to register before the snapshot's page-cache mapping, so that their ids are
    /// 1..=n (the spec's files, which the engines name by position).
    pub pre_mappings: Vec<Mapping>,
}

/// What [`Mm::from_restore`] built, beyond the model itself.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreSummary {
    /// The synthetic page-cache mapping (0 when there is no page-cache folio).
    pub file_mapping: u32,
    pub free_chunks: u64,
    pub folios: u64,
}

fn err(msg: String) -> MachineError {
    MachineError(format!("restore: {msg}"))
}

impl Mm {
    /// Boots `cfg` in the state `r` (module doc): the machine's CPUs from `cfg.machine`, its
    /// zones from `r.zones` (`cfg.machine.zones` is not read), every other setting from `cfg`.
    pub fn from_restore(cfg: &crate::config::MmConfig, r: &Restore) -> Result<Mm, MachineError> {
        Mm::from_restore_summary(cfg, r, &r.pre_mappings).map(|(mm, _)| mm)
    }

    /// [`Mm::from_restore`] with `pre_mappings` in place of `r.pre_mappings`, also returning
    /// what it built.
    pub fn from_restore_summary(
        cfg: &crate::config::MmConfig,
        r: &Restore,
        pre_mappings: &[Mapping],
    ) -> Result<(Mm, RestoreSummary), MachineError> {
        let machine = MachineConfig {
            cpu_node: cfg.machine.cpu_node.clone(),
            zones: r.zones.clone(),
            nr_cpus: cfg.machine.nr_cpus,
        };
        machine.validate()?;
        let end_pfn = machine.end_pfn();
        let nr_blocks = (end_pfn as usize).div_ceil(PAGEBLOCK_NR_PAGES as usize);
        if r.block_types.len() < nr_blocks {
            return Err(err(format!(
                "{} pageblock types for {nr_blocks} pageblocks (pfns 0..{end_pfn:#x})",
                r.block_types.len()
            )));
        }
        let mut mm = Mm::blank(cfg, end_pfn);
        mm.layout_zones(&machine, r)?;
        for (b, &mt) in r.block_types.iter().take(nr_blocks).enumerate() {
            if mt == MigrateType::Isolate {
                return Err(err(format!(
                    "pageblock {b} (pfn {:#x}) is Isolate: a restored block must have a type",
                    b << PAGEBLOCK_ORDER
                )));
            }
            let pfn = (b as u32) << PAGEBLOCK_ORDER;
            mm.set_block_mt(pfn, mt);
            if mt == MigrateType::HighAtomic {
                if let Some(zi) = mm.pfn_zone(pfn) {
                    mm.zones[zi].nr_reserved_highatomic += PAGEBLOCK_NR_PAGES as u64;
                }
            }
        }
        // Every managed page must be covered once: `covered` marks the pages taken so far.
        let mut covered = vec![false; end_pfn as usize];
        let mut free = r.free.clone();
        free.sort_unstable();
        for &(pfn, order) in &free {
            let zi = mm.restore_claim(&mut covered, pfn, order as u32, "free chunk")?;
            let mt = mm.block_mt(pfn);
            if order as u32 > PAGEBLOCK_ORDER {
                for k in 1..(1u32 << (order as u32 - PAGEBLOCK_ORDER)) {
                    let other = mm.block_mt(pfn + k * PAGEBLOCK_NR_PAGES);
                    if other != mt {
                        return Err(err(format!(
                            "free chunk {pfn:#x} order {order} spans pageblocks of types {mt:?} and {other:?}"
                        )));
                    }
                }
            }
            mm.account_freepages(zi, 1i64 << order, mt);
            mm.add_to_free_list(zi, pfn, order as u32, mt, true);
        }
        if let Some(rep) = &r.free_reported {
            let rep: std::collections::HashSet<u32> = rep.iter().copied().collect();
            for &(pfn, order) in &free {
                if rep.contains(&pfn) {
                    mm.restore_reported(pfn, order as u32);
                }
            }
        }
        for m in pre_mappings {
            mm.add_mapping(*m);
        }
        let mut folios = r.folios.clone();
        folios.sort_unstable_by_key(|f| f.pfn);
        let mut summary = RestoreSummary {
            free_chunks: free.len() as u64,
            folios: folios.len() as u64,
            ..Default::default()
        };
        // With the xarray-node model, the restored page cache is logged and settled after boot
        // like any insertion (below).
        mm.cache.index.xa_log_on = cfg.xa_nodes;
        let mut next_index = 0u64;
        for f in &folios {
            mm.restore_claim(&mut covered, f.pfn, f.order as u32, "folio")?;
            if f.kind == FolioKind::Hugetlb && f.order as u32 != crate::hugetlb::HUGETLB_ORDER {
                return Err(err(format!(
                    "hugetlb folio {:#x} of order {}: the pool's pages are of order {}",
                    f.pfn,
                    f.order,
                    crate::hugetlb::HUGETLB_ORDER
                )));
            }
            let kind = if f.kind == FolioKind::File && f.shmem {
                FolioKind::Anon
            } else {
                f.kind
            };
            let index = if kind == FolioKind::File {
                if summary.file_mapping == 0 {
                    summary.file_mapping = mm.add_mapping(Mapping::ext4(4096, false));
                }
                let n = 1u64 << f.order;
                let i = next_index.div_ceil(n) * n;
                next_index = i + n;
                Some(i)
            } else {
                None
            };
            mm.restore_folio(f, kind, index.map(|i| (summary.file_mapping, i)));
        }
        for (zi, z) in mm.zones.iter().enumerate() {
            if z.spanned == 0 {
                continue;
            }
            let managed = (z.start_pfn..z.end_pfn())
                .filter(|&p| !matches!(mm.pages.kind(p), PageKind::Hole | PageKind::Reserved))
                .filter(|&p| !covered[p as usize])
                .take(1)
                .next();
            if let Some(p) = managed {
                return Err(err(format!(
                    "pfn {p:#x} of zone {} is managed but neither free nor in a folio",
                    mm.zones[zi].zone_type.name()
                )));
            }
        }
        mm.finish_boot(cfg);
        mm.xa_settle(0);
        // Dirty page cache (restored as anon when shmem: the model's anon has no dirty state).
        for f in folios
            .iter()
            .filter(|f| f.dirty && f.kind == FolioKind::File && !f.shmem)
        {
            let id = mm.folio_at(f.pfn).expect("a restored folio's head");
            mm.folio_mark_dirty(id, true);
        }
        Ok((mm, summary))
    }

    /// Lays out the zones of `machine` and the reserved and hole ranges of `r`: every page of a
    /// zone's span managed (an uncovered Tail) unless a range says otherwise; checks the zones'
    /// present and managed counts against the ranges.
    fn layout_zones(&mut self, machine: &MachineConfig, r: &Restore) -> Result<(), MachineError> {
        for zc in &machine.zones {
            let z = &mut self.zones[zc.nid as usize * MAX_NR_ZONES + zc.zone_type.idx()];
            z.start_pfn = zc.start_pfn;
            z.spanned = zc.spanned;
            z.present = zc.present;
            z.managed = zc.managed as u64;
            for pfn in zc.start_pfn..zc.start_pfn + zc.spanned {
                self.pages.set(pfn, PageKind::Tail, 0);
            }
        }
        for (what, ranges, kind) in [
            ("hole", &r.holes, PageKind::Hole),
            ("reserved", &r.reserved, PageKind::Reserved),
        ] {
            for &[start, end] in ranges.iter() {
                let zone = machine
                    .zones
                    .iter()
                    .find(|z| start >= z.start_pfn && end <= z.start_pfn + z.spanned);
                if start >= end || zone.is_none() {
                    return Err(err(format!(
                        "{what} range [{start:#x}, {end:#x}) is empty or not inside one zone"
                    )));
                }
                for pfn in start..end {
                    if self.pages.kind(pfn) != PageKind::Tail {
                        return Err(err(format!(
                            "{what} range [{start:#x}, {end:#x}) overlaps another range at pfn {pfn:#x}"
                        )));
                    }
                    self.pages.set(pfn, kind, 0);
                }
            }
        }
        for zc in &machine.zones {
            let span = zc.start_pfn..zc.start_pfn + zc.spanned;
            let holes = span
                .clone()
                .filter(|&p| self.pages.kind(p) == PageKind::Hole)
                .count() as u32;
            let reserved = span.filter(|&p| self.pages.kind(p) == PageKind::Reserved).count() as u32;
            if zc.present != zc.spanned - holes || zc.managed != zc.present - reserved {
                return Err(err(format!(
                    "zone {}: present {} and managed {} disagree with the ranges (spanned {} - {holes} hole pages, - {reserved} reserved)",
                    zc.zone_type.name(),
                    zc.present,
                    zc.managed,
                    zc.spanned
                )));
            }
        }
        Ok(())
    }

    /// Claims the pages of a chunk or folio at `pfn` of `order`: aligned, in one zone, managed
    /// and not yet covered. Returns its zone.
    fn restore_claim(
        &self,
        covered: &mut [bool],
        pfn: u32,
        order: u32,
        what: &str,
    ) -> Result<usize, MachineError> {
        if order > MAX_PAGE_ORDER {
            return Err(err(format!(
                "{what} {pfn:#x}: order {order} is above MAX_PAGE_ORDER ({MAX_PAGE_ORDER})"
            )));
        }
        if pfn & ((1 << order) - 1) != 0 {
            return Err(err(format!(
                "{what} {pfn:#x} of order {order} is not naturally aligned"
            )));
        }
        let end = pfn as u64 + (1u64 << order);
        let zi = self
            .pfn_zone(pfn)
            .filter(|&zi| end <= self.zones[zi].end_pfn() as u64)
            .ok_or_else(|| err(format!("{what} {pfn:#x} of order {order} is not inside one zone")))?;
        for p in pfn..end as u32 {
            if covered[p as usize] {
                return Err(err(format!(
                    "{what} {pfn:#x} of order {order} overlaps another chunk or folio at pfn {p:#x}"
                )));
            }
            match self.pages.kind(p) {
                PageKind::Tail => covered[p as usize] = true,
                k => {
                    return Err(err(format!(
                        "{what} {pfn:#x} of order {order} covers pfn {p:#x}, which is {}",
                        if k == PageKind::Hole { "a hole" } else { "reserved" }
                    )))
                }
            }
        }
        Ok(zi)
    }

    /// Inserts one restored folio (already claimed) as `kind`, into the page cache at
    /// `(mapping, index)` if given.
    fn restore_folio(&mut self, f: &RestoreFolio, kind: FolioKind, cache: Option<(u32, u64)>) {
        let (pfn, order) = (f.pfn, f.order as u32);
        self.pages.set(pfn, PageKind::Allocated, order);
        self.pages.set_b(pfn, f.alloc_mt as u32);
        let id = self.folios.insert(pfn, order, kind, false, None);
        self.pages.set_a(pfn, id);
        let lru = kind.on_lru();
        {
            let nf = &mut self.folios.folios[id as usize];
            nf.owner = 0;
            // PG_mlocked implies PG_unevictable once the folio is on the LRU (§29.1.2).
            let unevictable = lru && (f.unevictable || f.mlocked);
            nf.set_active(f.active && !unevictable);
            nf.set_referenced(f.referenced);
            nf.set_unevictable(unevictable);
            nf.set_mlocked(lru && f.mlocked);
        }
        if let Some((mapping, index)) = cache {
            let nf = &mut self.folios.folios[id as usize];
            nf.mapping = mapping;
            nf.index = index;
            self.cache.index.insert(mapping, index, order, id);
        }
        if lru {
            self.lru_add(id);
        }
        self.account_folio(id, 1);
        if kind == FolioKind::Hugetlb {
            self.hugetlb.restore_free(id);
        }
    }
}
