//! Anonymous mappings as a workload sees them: a VMA of `nr_pages` pages, populated by page
//! faults (`do_anonymous_fault_upto`, docs/model §11.3), with the page tables the faults
//! imply, and unmapped or MADV_DONTNEED'd in part.
//!
//! Model: the VMA starts PMD-aligned; each 2 MiB region has a bitmap of populated pages, the
//! folios mapped in it, and its page-table page. The first fault in a region allocates the PTE
//! page (GFP_KERNEL | __GFP_ACCOUNT order 0, unmovable; a PMD THP fault also allocates it, to
//! deposit — `pgtable_trans_huge_deposit`). A fault tries the largest order whose naturally
//! aligned range around the address is wholly empty and inside the VMA (PMD only for a whole,
//! empty 2 MiB region).
//!
//! Partial unmapping (docs/model §31): MADV_DONTNEED of part of a large folio unmaps its
//! pages in the range and leaves the folio whole and allocated (`Mm::zap_anon_folio`: the PMD
//! split, the deferred split queue); the region keeps the folio among its `partial` entries
//! with the pages still mapped, and frees it whole when the last of them goes. The pages of
//! large folios written since their fault are kept (`Region::written`), so that the model
//! knows which subpages are zero-filled when the deferred split shrinker splits the folio.
//! A split inside the model (that shrinker, reclaim, migration) of a folio with a subpage map
//! leaves its mapped pieces in a record (`Mm::take_split_pieces`) that the region takes the
//! next time it looks at the folio (`AnonVma::resolve`), mapping the pieces where the folio
//! was.
//!
//! Simplifications: upper page-table levels (PMD/PUD pages) are not allocated; a subpage the
//! split maps to the shared zero page (zero-filled, §31.3 item 6) counts as unpopulated: a
//! later write faults it as an empty PTE (the kernel copies the zero page into an order-0
//! folio, `do_wp_page`, and the zero-page PTE keeps mTHP faults from covering it); VMAs start
//! and end PMD-aligned for THPs, so munmap never splits a PMD at a VMA boundary (§31.2 item 1,
//! second way in).

use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::huge_memory::{Subpages, Zap};
use fraglab_mm::slowpath::{MeasureWork, WorkSum};

use crate::cost::CostModel;
use fraglab_mm::types::HPAGE_PMD_ORDER;
use fraglab_mm::{Gfp, Mm};

const REGION: u64 = 1 << HPAGE_PMD_ORDER;

/// How many folios ahead `unmap` prefetches the folio record.
const UNMAP_PREFETCH: usize = 12;

/// A region with more folios than this keeps an index by page offset (`Region::index`).
const INDEX_MIN_FOLIOS: usize = 8;

/// `Region::index`: no folio at this page offset.
const NO_FOLIO: u16 = u16::MAX;

/// Where the time of an allocation went (for latency histograms).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AllocPath {
    /// Served by the fast path (at the low watermark).
    Fast,
    /// Served by the slow path without direct work: after waking kswapd, at the min watermark
    /// (or with reserves).
    AfterKswapd,
    /// Direct reclaim ran (and perhaps compaction too).
    DirectReclaim,
    /// Direct compaction ran, no reclaim.
    DirectCompaction,
}

impl AllocPath {
    pub fn name(self) -> &'static str {
        match self {
            AllocPath::Fast => "fast",
            AllocPath::AfterKswapd => "after_kswapd",
            AllocPath::DirectReclaim => "direct_reclaim",
            AllocPath::DirectCompaction => "direct_compaction",
        }
    }

    /// The path of the work `MeasureWork::measure` returned.
    pub fn of(w: &WorkSum) -> AllocPath {
        if w.reclaim_calls > 0 {
            AllocPath::DirectReclaim
        } else if w.compact_stalls > 0 {
            AllocPath::DirectCompaction
        } else if w.slowpaths > 0 {
            AllocPath::AfterKswapd
        } else {
            AllocPath::Fast
        }
    }
}

/// The allocation work of one fault (what `MeasureWork::measure` would return), kept small
/// for the common case: when no allocation of the fault entered the slow path, every counter
/// of the `WorkSum` but `allocs` is zero (`WorkSum::fast_allocs_since`), so only that is kept;
/// the full sum is built (and boxed) only when a slow path ran.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum FaultWork {
    /// Fast-path allocations only: `WorkSum { allocs, ..Default::default() }`.
    Fast { allocs: u64 },
    /// A slow path ran: the whole sum.
    Slow(Box<WorkSum>),
}

impl FaultWork {
    /// The `WorkSum` this stands for.
    pub fn sum(&self) -> WorkSum {
        match self {
            FaultWork::Fast { allocs } => WorkSum {
                allocs: *allocs,
                ..Default::default()
            },
            FaultWork::Slow(w) => **w,
        }
    }

    /// `AllocPath::of` the sum.
    #[inline]
    pub fn path(&self) -> AllocPath {
        match self {
            FaultWork::Fast { .. } => AllocPath::Fast,
            FaultWork::Slow(w) => AllocPath::of(w),
        }
    }

    /// `CostModel::alloc_work` of the sum (fast path only: `allocs` × `alloc_fast_ns`, the
    /// other terms being zero).
    #[inline]
    pub fn cost(&self, cost: &CostModel) -> u64 {
        match self {
            FaultWork::Fast { allocs } => allocs * cost.alloc_fast_ns,
            FaultWork::Slow(w) => cost.alloc_work(w),
        }
    }

    /// `CostModel::alloc_charge` of the sum (fast path only: CPU time, no lock).
    #[inline]
    pub fn charge(&self, cost: &CostModel) -> crate::cost::Charge {
        match self {
            FaultWork::Fast { allocs } => crate::cost::Charge::cpu(allocs * cost.alloc_fast_ns),
            FaultWork::Slow(w) => cost.alloc_charge(w),
        }
    }
}

/// What one touch did.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Touch {
    /// Already populated: no fault.
    Hit,
    /// A fault mapped a folio of `order` (plus a page-table page if `pt`), doing `work`; `host`
    /// of the pages it wrote (folio and page table) took host faults (free page reporting,
    /// §32.3 item 6; always 0 without a reporting device).
    Fault {
        order: u32,
        pt: bool,
        work: FaultWork,
        host: u64,
    },
    /// The fault could not be served (the task would be killed or loop; the model reports it).
    Failed { work: FaultWork, host: u64 },
}

/// One folio mapped in a region: 16 bytes (the first page's offset in the region fits a u16).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct Mapped {
    token: u64,
    id: FolioId,
    /// First page offset in the region.
    off: u16,
    order: u8,
}

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
struct Region {
    pt: Option<(FolioId, u64)>,
    /// The folios mapped, in the order they were mapped (the order unmap frees them in). Their
    /// page ranges never overlap.
    folios: Vec<Mapped>,
    populated: [u64; 8],
    /// Pages of large folios written since the folio's fault (the faulting page, then every
    /// touch): the others are zero-filled (§31.3 item 6). Not kept for order-0 folios.
    written: [u64; 8],
    /// Large folios partially unmapped (§31.2), with their pages still mapped (folio-relative,
    /// never empty): apart from `folios`, whose entries may cover their unmapped pages.
    partial: Vec<(Mapped, Subpages)>,
    /// A large folio was mapped here since the region was last emptied (only such a region
    /// can hold a folio split inside the model: `AnonVma::resolve` looks at no other).
    has_large: bool,
    /// Host-side lookup only (no kernel counterpart; the kernel finds the folio through the
    /// PTE): with more than `INDEX_MIN_FOLIOS` folios, for every page offset the position in
    /// `folios` of the first entry covering it (`NO_FOLIO` if none), so that a touch of a
    /// populated page finds its folio in O(1) instead of scanning `folios`.
    #[serde(with = "region_index")]
    index: Option<Box<[u16; REGION as usize]>>,
}

/// The bits of word `w` (of the region bitmap) that lie in pages [`off`, `off + n`).
#[inline]
fn word_mask(w: u32, off: u32, n: u32) -> u64 {
    let (lo, hi) = (off.max(w * 64), (off + n).min(w * 64 + 64));
    if lo >= hi {
        return 0;
    }
    let len = hi - lo;
    let bits = if len == 64 { u64::MAX } else { (1u64 << len) - 1 };
    bits << (lo - w * 64)
}

impl Region {
    fn is_set(&self, off: u32) -> bool {
        self.populated[(off / 64) as usize] & (1 << (off % 64)) != 0
    }

    fn set(&mut self, off: u32, n: u32, on: bool) {
        if n == 0 {
            return;
        }
        for w in off / 64..=(off + n - 1) / 64 {
            let m = word_mask(w, off, n);
            if on {
                self.populated[w as usize] |= m;
            } else {
                self.populated[w as usize] &= !m;
            }
        }
    }

    fn empty_range(&self, off: u32, n: u32) -> bool {
        n == 0
            || (off / 64..=(off + n - 1) / 64).all(|w| self.populated[w as usize] & word_mask(w, off, n) == 0)
    }

    /// Marks pages [`off`, `off + n`) written.
    fn set_written(&mut self, off: u32, n: u32) {
        for w in off / 64..=(off + n - 1) / 64 {
            self.written[w as usize] |= word_mask(w, off, n);
        }
    }

    /// Marks pages [`off`, `off + n`) zero-filled (a new large folio).
    fn clear_written(&mut self, off: u32, n: u32) {
        for w in off / 64..=(off + n - 1) / 64 {
            self.written[w as usize] &= !word_mask(w, off, n);
        }
    }

    fn full_range(&self, off: u32, n: u32) -> bool {
        n == 0
            || (off / 64..=(off + n - 1) / 64).all(|w| {
                let m = word_mask(w, off, n);
                self.populated[w as usize] & m == m
            })
    }

    /// The position in `folios` of the first entry whose pages include `off`.
    #[inline]
    fn find(&self, off: u32) -> Option<usize> {
        match &self.index {
            Some(ix) => {
                let i = ix[off as usize];
                (i != NO_FOLIO).then_some(i as usize)
            }
            None => self
                .folios
                .iter()
                .position(|m| off >= m.off as u32 && off < m.off as u32 + (1u32 << m.order)),
        }
    }

    /// Records `folios[i]` in the index (where no earlier entry is recorded).
    fn index_entry(ix: &mut [u16; REGION as usize], i: usize, m: &Mapped) {
        let start = m.off as usize;
        for slot in &mut ix[start..start + (1usize << m.order)] {
            if *slot == NO_FOLIO {
                *slot = i as u16;
            }
        }
    }

    /// Builds the index from `folios` if there are enough of them, else drops it.
    fn reindex(&mut self) {
        if self.folios.len() <= INDEX_MIN_FOLIOS {
            self.index = None;
            return;
        }
        let mut ix = self
            .index
            .take()
            .unwrap_or_else(|| Box::new([NO_FOLIO; REGION as usize]));
        ix.fill(NO_FOLIO);
        for (i, m) in self.folios.iter().enumerate() {
            Region::index_entry(&mut ix, i, m);
        }
        self.index = Some(ix);
    }

    /// The zap of pages [`start`, `end`) (mapping page numbers) in this region, whose first
    /// page is `base` (`AnonVma::dontneed`): wholly covered folios are unmapped and pushed on
    /// `run` to be freed; a large folio covered in part is zapped in place (`Mm::zap_anon_folio`)
    /// and kept among `partial`, and a partial one whose last mapped pages go is pushed on
    /// `run`, whole. Returns the pages freed and the pages unmapped.
    fn zap(&mut self, mm: &mut Mm, base: u64, start: u64, end: u64, run: &mut Vec<FolioId>) -> (u64, u64) {
        let (lo, hi) = (
            (start.max(base) - base) as u32,
            (end.min(base + REGION) - base) as u32,
        );
        let (mut freed, mut unmapped) = (0u64, 0u64);
        let folios = std::mem::take(&mut self.folios);
        let mut keep = Vec::with_capacity(folios.len());
        let mut new_partial = Vec::new();
        for m in folios {
            let (fo, nr) = (m.off as u32, 1u32 << m.order);
            let alive = mm.folio_is(m.id, m.token);
            if fo + nr <= lo || fo >= hi {
                if alive {
                    keep.push(m);
                }
                continue;
            }
            if !alive {
                self.set(fo, nr, false);
                continue;
            }
            if fo >= lo && fo + nr <= hi {
                run.push(m.id);
                self.set(fo, nr, false);
                freed += nr as u64;
                unmapped += nr as u64;
                continue;
            }
            // Part of a large folio (§31.2).
            let (a, b) = (lo.max(fo) - fo, hi.min(fo + nr) - fo);
            let written = Subpages::extract(&self.written, fo, nr);
            self.set(fo + a, b - a, false);
            match mm.zap_anon_folio(m.id, a, b - a, &written) {
                Zap::Whole => {
                    run.push(m.id);
                    freed += nr as u64;
                    unmapped += (b - a) as u64;
                }
                Zap::Partial { unmapped: k } => {
                    unmapped += k as u64;
                    let mapped = Subpages::full(nr).and_not(&Subpages::range(a, b - a));
                    new_partial.push((m, mapped));
                }
            }
        }
        self.folios = keep;
        let partial = std::mem::take(&mut self.partial);
        for (m, mapped) in partial {
            let (fo, nr) = (m.off as u32, 1u32 << m.order);
            if fo + nr <= lo || fo >= hi {
                self.partial.push((m, mapped));
                continue;
            }
            let (a, b) = (lo.max(fo) - fo, hi.min(fo + nr) - fo);
            let range = Subpages::range(a, b - a);
            let hit = mapped.and(&range);
            if hit.is_empty() {
                self.partial.push((m, mapped));
                continue;
            }
            for sub in hit.ones() {
                self.set(fo + sub, 1, false);
            }
            let rest = mapped.and_not(&range);
            if !mm.folio_is(m.id, m.token) {
                // Freed meanwhile (reclaimed, killed): only the mapping goes.
                if !rest.is_empty() {
                    self.partial.push((m, rest));
                }
                continue;
            }
            match mm.zap_anon_folio(m.id, a, b - a, &Subpages::default()) {
                Zap::Whole => {
                    // The last mapped pages: the folio is freed whole (§31.2 item 6).
                    run.push(m.id);
                    freed += nr as u64;
                    unmapped += hit.count() as u64;
                }
                Zap::Partial { unmapped: k } => {
                    unmapped += k as u64;
                    self.partial.push((m, rest));
                }
            }
        }
        self.partial.append(&mut new_partial);
        self.reindex();
        (freed, unmapped)
    }

    /// Appends `m` to `folios`, keeping the index.
    fn push(&mut self, m: Mapped) {
        self.has_large |= m.order > 0;
        self.folios.push(m);
        let i = self.folios.len() - 1;
        match &mut self.index {
            Some(ix) => Region::index_entry(ix, i, &m),
            None if self.folios.len() > INDEX_MIN_FOLIOS => self.reindex(),
            None => {}
        }
    }
}

/// An anonymous VMA.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct AnonVma {
    pub nr_pages: u64,
    /// MADV_HUGEPAGE (VM_HUGEPAGE).
    pub madvised: bool,
    regions: Vec<Region>,
    /// Pages currently populated.
    pub rss: u64,
    /// VM_LOCKED (mlock(2) or MAP_LOCKED, docs/model §29.1.2): its folios are mlocked,
    /// new faults included (`mlock_new_folio`).
    pub locked: bool,
    /// `fault_run`'s buffer of new folios (host-side only, reused).
    run_buf: Vec<FolioId>,
    /// Tests: no `fault_run`, every fault the ordinary way (the reference).
    #[cfg(test)]
    per_page: bool,
}

impl AnonVma {
    pub fn new(nr_pages: u64, madvised: bool) -> AnonVma {
        AnonVma {
            nr_pages,
            madvised,
            regions: vec![Region::default(); nr_pages.div_ceil(REGION) as usize],
            rss: 0,
            locked: false,
            run_buf: Vec::new(),
            #[cfg(test)]
            per_page: false,
        }
    }

    /// The live folios of the mapping.
    fn live_folios(&mut self, mm: &mut Mm) -> Vec<FolioId> {
        for ri in 0..self.regions.len() {
            self.resolve(mm, ri);
        }
        self.regions
            .iter()
            .flat_map(|r| r.folios.iter().chain(r.partial.iter().map(|(m, _)| m)))
            .filter(|m| mm.folio_is(m.id, m.token))
            .map(|m| m.id)
            .collect()
    }

    /// Whether entry `m` of region `ri` still maps its folio as it was mapped (live, same
    /// content, same order); false if it was freed or split inside the model.
    #[inline]
    fn whole(mm: &Mm, m: &Mapped) -> bool {
        mm.folio_is(m.id, m.token) && mm.folios.folios[m.id as usize].order == m.order
    }

    /// Region `ri`'s large folios that a split inside the model (the deferred split shrinker,
    /// reclaim, migration: `Mm::split_anon_folio`) turned into order-0 pieces: the pieces it
    /// left mapped take the folio's place (its record, `Mm::take_split_pieces`), and the pages
    /// it freed or mapped to the zero page become unpopulated (module doc). A folio freed
    /// (reclaimed to swap, killed) or split without a record stays as it was.
    fn resolve(&mut self, mm: &mut Mm, ri: usize) {
        let r = &mut self.regions[ri];
        if !r.has_large {
            return;
        }
        let split = |mm: &Mm, m: &Mapped| m.order > 0 && !AnonVma::whole(mm, m);
        if !r.folios.iter().any(|m| split(mm, m)) && !r.partial.iter().any(|(m, _)| split(mm, m)) {
            return;
        }
        let mut gone = 0u64;
        let mut adopt = |r: &mut Region, mm: &mut Mm, m: &Mapped, mapped: Subpages| -> bool {
            let Some(pieces) = mm.take_split_pieces(m.token) else {
                return false;
            };
            let mut kept = Subpages::default();
            for &(sub, id) in &pieces {
                kept.set_range(sub as u32, 1, true);
                r.push(Mapped {
                    token: m.token,
                    id,
                    off: m.off + sub,
                    order: 0,
                });
            }
            for sub in mapped.and_not(&kept).ones() {
                r.set(m.off as u32 + sub, 1, false);
                gone += 1;
            }
            true
        };
        let folios = std::mem::take(&mut r.folios);
        let mut keep = Vec::with_capacity(folios.len());
        for m in folios {
            if !(split(mm, &m) && adopt(r, mm, &m, Subpages::full(1 << m.order))) {
                keep.push(m);
            }
        }
        // The adopted pieces were pushed after the folios taken out: put those first again.
        keep.append(&mut r.folios);
        r.folios = keep;
        let partial = std::mem::take(&mut r.partial);
        for (m, mapped) in partial {
            if !(split(mm, &m) && adopt(r, mm, &m, mapped)) {
                r.partial.push((m, mapped));
            }
        }
        r.reindex();
        self.rss -= gone;
    }

    /// The VM_LOCKED half of mlock(2) (`mlock_fixup`, §29.1.2): the mapping becomes locked
    /// and its present folios are mlocked (`mlock_folio`). The caller populates the rest
    /// (`__mm_populate`) by touching every page. Already locked: nothing.
    pub fn mlock(&mut self, mm: &mut Mm) {
        if self.locked {
            return;
        }
        self.locked = true;
        for id in self.live_folios(mm) {
            mm.mlock_folio(id);
        }
    }

    /// munlock(2) of the whole mapping (§29.1.5): VM_LOCKED cleared, every folio munlocked.
    pub fn munlock(&mut self, mm: &mut Mm) {
        if !self.locked {
            return;
        }
        self.locked = false;
        for id in self.live_folios(mm) {
            mm.munlock_folio(id);
        }
    }

    /// The largest order whose aligned range around `vpage` is empty and inside the VMA (0 if
    /// none). The orders that qualify are downward closed (a smaller aligned range around
    /// `vpage` lies inside a larger one), so the search goes up from order 1 and stops at the
    /// first that fails: a page among populated ones costs one check, not ten.
    fn max_order(&self, vpage: u64) -> u32 {
        let r = &self.regions[(vpage / REGION) as usize];
        let off = (vpage % REGION) as u32;
        let base = (vpage / REGION) * REGION;
        let mut best = 0;
        for order in 1..=HPAGE_PMD_ORDER {
            let n = 1u32 << order;
            let start = off & !(n - 1);
            if base + start as u64 + n as u64 > self.nr_pages || !r.empty_range(start, n) {
                break;
            }
            best = order;
        }
        best
    }

    /// Touches page `vpage` (write access): a fault if it is not populated.
    pub fn touch(&mut self, mm: &mut Mm, cpu: u32, vpage: u64) -> Touch {
        self.touch_run(mm, cpu, vpage, vpage + 1).0
    }

    /// Touches page `vpage` like `touch`, and with it the pages after it up to `end` that
    /// would do the same: when it is a hit, the pages the same folio maps (touching them would
    /// be the same hit again: the same folio marked referenced); when it is a fault that
    /// `Mm::anon_fault_run` can serve, the unpopulated pages after it in the same region for as
    /// long as it can (each an order-0 fault with one fast-path allocation, as `fault` would
    /// do one by one). Returns what the touch of `vpage` did and how many pages from `vpage`
    /// on were touched (at least 1), each of which did the same.
    pub fn touch_run(&mut self, mm: &mut Mm, cpu: u32, vpage: u64, end: u64) -> (Touch, u64) {
        assert!(vpage < self.nr_pages, "touch beyond the VMA");
        let ri = (vpage / REGION) as usize;
        let off = (vpage % REGION) as u32;
        let r = &mut self.regions[ri];
        if r.is_set(off) {
            let mut run = 1;
            // The access sets the PTE young bit: PG_referenced stands in for it (reclaim keeps
            // referenced anonymous folios, §10.3.5).
            let Some(i) = r.find(off) else {
                return self.touch_partial(mm, cpu, vpage, end);
            };
            let Mapped {
                id,
                token,
                off: fo,
                order,
            } = r.folios[i];
            let mut submap = false;
            if mm.folio_is(id, token) {
                let f = &mut mm.folios.folios[id as usize];
                if f.order != order {
                    // Split inside the model since it was mapped (§31.3): its pieces first.
                    return self.touch_partial(mm, cpu, vpage, end);
                }
                f.set_referenced(true);
                f.set_idle(false);
                submap = f.has_submap();
            }
            // The rest of this folio's pages (populated, and found in this same entry, as
            // entries never overlap) within [vpage, end).
            let fend = (fo as u32 + (1u32 << order)) as u64 + ri as u64 * REGION;
            let n = (fend.min(end).min(self.nr_pages) - vpage) as u32;
            if n > 1 && r.full_range(off, n) {
                run = n as u64;
            }
            if order > 0 {
                // A write to a large folio: its subpages are no longer zero-filled (§31.3).
                r.set_written(off, run as u32);
                if submap {
                    mm.anon_folio_written(id, off - fo as u32, run as u32);
                }
            }
            return (Touch::Hit, run);
        }
        if let Some(run) = self.fault_run(mm, cpu, vpage, end) {
            // `anon_fault_run` serves no fault with a reporting device: no host faults here.
            let t = Touch::Fault {
                order: 0,
                pt: false,
                work: FaultWork::Fast { allocs: 1 },
                host: 0,
            };
            return (t, run);
        }
        let before = mm.work_sum();
        let host_before = mm.reporting.pending_host_faults();
        let fault = self.fault(mm, cpu, vpage);
        // The fault's own host faults: charged with it, not left to the engine.
        let host = mm.reporting.claim_host_faults(host_before);
        let after = &mm.work.sum;
        let work = match after.fast_allocs_since(&before) {
            Some(allocs) => FaultWork::Fast { allocs },
            None => FaultWork::Slow(Box::new(after.since(&before))),
        };
        let t = match fault {
            Some((order, pt)) => Touch::Fault {
                order,
                pt,
                work,
                host,
            },
            None => Touch::Failed { work, host },
        };
        (t, 1)
    }

    /// A touch of populated page `vpage` that no entry of `folios` maps as it was mapped: a
    /// page of a partially unmapped folio, or of a folio split inside the model (taken over
    /// by `resolve` first, then touched as any page).
    fn touch_partial(&mut self, mm: &mut Mm, cpu: u32, vpage: u64, end: u64) -> (Touch, u64) {
        let ri = (vpage / REGION) as usize;
        let off = (vpage % REGION) as u32;
        self.resolve(mm, ri);
        let r = &mut self.regions[ri];
        if !r.is_set(off) {
            // The split freed it or mapped it to the zero page: a fault.
            return self.touch_run(mm, cpu, vpage, end);
        }
        if let Some(i) = r.find(off) {
            let m = r.folios[i];
            if AnonVma::whole(mm, &m) || !mm.folio_is(m.id, m.token) {
                return self.touch_run(mm, cpu, vpage, end);
            }
            // Split without a record (by a path that knew no subpage map): its first piece
            // keeps the id and the content, and takes the hit as before §31.
            let f = &mut mm.folios.folios[m.id as usize];
            f.set_referenced(true);
            f.set_idle(false);
            return (Touch::Hit, 1);
        }
        let hit = r.partial.iter().find(|(m, mapped)| {
            let fo = m.off as u32;
            off >= fo && off < fo + (1 << m.order) && mapped.test(off - fo)
        });
        if let Some(&(m, _)) = hit {
            if mm.folio_is(m.id, m.token) {
                let f = &mut mm.folios.folios[m.id as usize];
                f.set_referenced(true);
                f.set_idle(false);
                r.set_written(off, 1);
                mm.anon_folio_written(m.id, off - m.off as u32, 1);
            }
        } else {
            debug_assert!(false, "populated page {vpage} without a mapping");
        }
        (Touch::Hit, 1)
    }

    /// The faults of unpopulated pages from `vpage` on (before `end`, in `vpage`'s region),
    /// as many as `Mm::anon_fault_run` serves: None if it serves none (then the ordinary
    /// `fault` runs). Only where `fault` would allocate nothing but one order-0 folio per
    /// page: the region has its page-table page, the mapping is not VM_LOCKED (whose faults
    /// mlock each folio) and its faults try no large order. Maps each folio as `fault` does.
    fn fault_run(&mut self, mm: &mut Mm, cpu: u32, vpage: u64, end: u64) -> Option<u64> {
        let ri = (vpage / REGION) as usize;
        #[cfg(test)]
        if self.per_page {
            return None;
        }
        if self.locked || self.regions[ri].pt.is_none() {
            return None;
        }
        let off = (vpage % REGION) as u32;
        let stop = (end.min(self.nr_pages).min((ri as u64 + 1) * REGION) - vpage) as u32;
        let r = &self.regions[ri];
        // Unpopulated pages from `off` on: up to the next populated one.
        let mut n = 0;
        while n < stop {
            let o = off + n;
            let w = r.populated[(o / 64) as usize] >> (o % 64);
            if w != 0 {
                n += w.trailing_zeros();
                break;
            }
            n += 64 - o % 64;
        }
        let n = n.min(stop);
        let mut out = std::mem::take(&mut self.run_buf);
        out.clear();
        let k = mm.anon_fault_run(cpu, self.madvised, n as usize, &mut out);
        let r = &mut self.regions[ri];
        r.set(off, k as u32, true);
        for (i, &id) in out.iter().enumerate() {
            let token = mm.folios.folios[id as usize].token();
            r.push(Mapped {
                token,
                id,
                off: (off + i as u32) as u16,
                order: 0,
            });
        }
        self.run_buf = out;
        self.rss += k as u64;
        (k > 0).then_some(k as u64)
    }

    /// The fault of `touch` at unpopulated `vpage`: the region's page-table page if it has
    /// none, then `do_anonymous_fault_upto` of the largest order that fits. Returns the folio's
    /// order and whether a page-table page was allocated, or None if an allocation failed.
    fn fault(&mut self, mm: &mut Mm, cpu: u32, vpage: u64) -> Option<(u32, bool)> {
        let ri = (vpage / REGION) as usize;
        let off = (vpage % REGION) as u32;
        let mut pt = false;
        if self.regions[ri].pt.is_none() {
            let g = Gfp::GFP_KERNEL.union(Gfp::ACCOUNT);
            let id = mm.alloc_folio(cpu, g, 0, FolioKind::PageTable, false)?;
            self.regions[ri].pt = Some((id, mm.folios.get(id).token()));
            pt = true;
        }
        let max = self.max_order(vpage);
        let id = mm.do_anonymous_fault_upto(cpu, self.madvised, max)?;
        if self.locked {
            // A fault in a VM_LOCKED mapping: `mlock_new_folio` (§29.1.2).
            mm.mlock_folio(id);
        }
        let f = mm.folios.get(id);
        let (order, token) = (f.order as u32, f.token());
        let n = 1u32 << order;
        let start = off & !(n - 1);
        let r = &mut self.regions[ri];
        r.set(start, n, true);
        if order > 0 {
            // The folio comes zeroed and the fault writes one subpage (§31.3 item 6).
            r.clear_written(start, n);
            r.set_written(off, 1);
            if order == HPAGE_PMD_ORDER && mm.thp_tracks_underused() {
                mm.anon_track_written(id, &Subpages::range(off - start, 1));
            }
        }
        r.push(Mapped {
            token,
            id,
            off: start as u16,
            order: order as u8,
        });
        self.rss += n as u64;
        Some((order, pt))
    }

    /// MADV_DONTNEED of pages [`start`, `start + n`) (`zap_page_range_single`, §31.1–§31.2):
    /// folios wholly inside are freed; a large folio the range covers in part has those pages
    /// unmapped (`Mm::zap_anon_folio`: the PMD split, the deferred split queue) and stays
    /// allocated, whole, among the region's `partial` entries, until a zap takes its last
    /// mapped page and frees it whole. Page tables stay. Returns the pages freed. On a locked
    /// mapping madvise(MADV_DONTNEED) fails with EINVAL (`madvise_dontneed_free_valid_vma`):
    /// nothing is freed.
    ///
    /// The frees are gathered and done by `Mm::free_folio_run` in the order met (per region,
    /// the wholly mapped folios, then the partially mapped ones): the same state as
    /// `free_folio` on each as met (a partial zap frees nothing and changes no buddy state).
    pub fn dontneed(&mut self, mm: &mut Mm, cpu: u32, start: u64, n: u64) -> u64 {
        if self.locked {
            return 0;
        }
        let end = (start + n).min(self.nr_pages);
        if start >= end {
            return 0;
        }
        let (mut freed, mut unmapped) = (0, 0);
        let mut run: Vec<FolioId> = Vec::new();
        for ri in (start / REGION) as usize..end.div_ceil(REGION) as usize {
            self.resolve(mm, ri);
            let (f, u) = self.regions[ri].zap(mm, ri as u64 * REGION, start, end, &mut run);
            freed += f;
            unmapped += u;
        }
        mm.free_folio_run(cpu, &run);
        self.rss -= unmapped;
        freed
    }

    /// munmap: frees every folio and page table still owned (a locked mapping's folios are
    /// munlocked first, as unmapping them does, §29.1.5). Returns the pages freed.
    ///
    /// The folios are freed region by region: each region's folios in the order they were
    /// mapped and then its page-table page, in one `Mm::free_folio_run` (the same state as
    /// `free_folio` on each in that order). The swap slots of the region's folios reclaimed to
    /// swap are released as they are met, before its run: the swap map and the free path
    /// share no state.
    pub fn unmap(&mut self, mm: &mut Mm, cpu: u32) -> u64 {
        self.munlock(mm);
        for ri in 0..self.regions.len() {
            self.resolve(mm, ri);
        }
        let mut freed = 0;
        let mut ids = Vec::new();
        for r in &mut self.regions {
            ids.clear();
            for (i, &Mapped { id, token, order, .. }) in r.folios.iter().enumerate() {
                // Host-cache hint: the folio record a few entries ahead (freeing is a chain of
                // dependent misses otherwise), both lines it may span, and its LRU links.
                if let Some(ahead) = r.folios.get(i + UNMAP_PREFETCH) {
                    mm.prefetch_folio(ahead.id);
                }
                if mm.folio_is(id, token) {
                    ids.push(id);
                    freed += 1u64 << order;
                } else {
                    // Reclaimed to swap (or killed): release its slots.
                    mm.swap_free_token(token);
                }
            }
            // Partially unmapped folios: the last PTEs go and each is freed whole (§31.2
            // item 6).
            for &(Mapped { id, token, order, .. }, _) in &r.partial {
                if mm.folio_is(id, token) {
                    ids.push(id);
                    freed += 1u64 << order;
                } else {
                    mm.swap_free_token(token);
                }
            }
            if let Some((id, token)) = r.pt {
                if mm.folio_is(id, token) {
                    ids.push(id);
                }
            }
            mm.free_folio_run(cpu, &ids);
            *r = Region::default();
        }
        self.rss = 0;
        freed
    }

    /// Folios mapped per folio order (a partially unmapped one at its order).
    pub fn folio_orders(&self) -> [u64; 11] {
        let mut out = [0; 11];
        for r in &self.regions {
            for m in r.folios.iter().chain(r.partial.iter().map(|(m, _)| m)) {
                out[m.order as usize] += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-bit definitions the word-mask versions replace.
    fn naive_empty(r: &Region, off: u32, n: u32) -> bool {
        (off..off + n).all(|o| !r.is_set(o))
    }

    fn naive_set(bits: &mut [u64; 8], off: u32, n: u32, on: bool) {
        for o in off..off + n {
            let (w, b) = ((o / 64) as usize, o % 64);
            if on {
                bits[w] |= 1 << b;
            } else {
                bits[w] &= !(1 << b);
            }
        }
    }

    fn machine() -> Mm {
        use fraglab_mm::mmzone::{MachineConfig, ZoneConfig};
        use fraglab_mm::types::ZoneType;
        let pages = 64 * 256;
        let z = ZoneConfig {
            zone_type: ZoneType::Dma32,
            nid: 0,
            start_pfn: 4096,
            spanned: pages,
            present: pages,
            managed: pages,
        };
        let m = MachineConfig {
            cpu_node: Vec::new(),
            zones: vec![z],
            nr_cpus: 2,
        };
        Mm::new(&m, fraglab_mm::Tunables::default()).unwrap()
    }

    fn flags(mm: &Mm) -> Vec<(bool, bool)> {
        mm.folios
            .folios
            .iter()
            .map(|f| (f.referenced(), f.idle()))
            .collect()
    }

    /// `touch_run` over a range does what `touch` page by page did (the per-page loop with a
    /// linear scan of `folios`, the code it replaces): same results, same folio flags; and
    /// every region's offset index answers as the linear scan, through faults (THP and base),
    /// MADV_DONTNEED with splits, and reference clearing in between.
    #[test]
    fn touch_run_and_index_match_per_page_touch() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..6 {
            let (mut ma, mut mb) = (machine(), machine());
            let nr = 3 * REGION + 77;
            let madvised = round % 2 == 0;
            let (mut va, mut vb) = (AnonVma::new(nr, madvised), AnonVma::new(nr, madvised));
            for _ in 0..150 {
                let start = rnd() % nr;
                let n = 1 + rnd() % 700;
                match rnd() % 4 {
                    0 => {
                        let (a, b) = (
                            va.dontneed(&mut ma, 0, start, n),
                            vb.dontneed(&mut mb, 0, start, n),
                        );
                        assert_eq!(a, b);
                    }
                    1 => {
                        // Reference clearing (reclaim's aging) on the same folios of both.
                        for i in 0..ma.folios.folios.len() {
                            if rnd() % 2 == 0 {
                                ma.folios.folios[i].set_referenced(false);
                                mb.folios.folios[i].set_referenced(false);
                                ma.folios.folios[i].set_idle(true);
                                mb.folios.folios[i].set_idle(true);
                            }
                        }
                    }
                    _ => {
                        let end = (start + n).min(nr);
                        let mut want = Vec::new();
                        for p in start..end {
                            // The replaced hit path: a linear scan of the folios.
                            let (ri, off) = ((p / REGION) as usize, (p % REGION) as u32);
                            if va.regions[ri].is_set(off) {
                                let lin = va.regions[ri].folios.iter().position(|m| {
                                    off >= m.off as u32 && off < m.off as u32 + (1u32 << m.order)
                                });
                                assert_eq!(va.regions[ri].find(off), lin);
                            }
                            want.push(va.touch(&mut ma, 0, p));
                        }
                        let mut got = Vec::new();
                        let mut p = start;
                        while p < end {
                            let (t, run) = vb.touch_run(&mut mb, 0, p, end);
                            assert!(run >= 1 && p + run <= end);
                            let again = match t {
                                Touch::Fault { .. } => t.clone(),
                                _ => Touch::Hit,
                            };
                            got.push(t);
                            got.extend((1..run).map(|_| again.clone()));
                            p += run;
                        }
                        assert_eq!(want, got);
                    }
                }
                assert_eq!(flags(&ma), flags(&mb));
                assert_eq!(va.rss, vb.rss);
                for r in va.regions.iter().chain(&vb.regions) {
                    for off in 0..REGION as u32 {
                        let lin = r
                            .folios
                            .iter()
                            .position(|m| off >= m.off as u32 && off < m.off as u32 + (1u32 << m.order));
                        assert_eq!(r.find(off), lin);
                    }
                }
            }
            va.unmap(&mut ma, 0);
            vb.unmap(&mut mb, 0);
            assert_eq!(flags(&ma), flags(&mb));
        }
    }

    /// The per-folio `dontneed` that `free_folio_run` replaced (a `free_folio` as each folio
    /// is met). Since §31 a large folio the range covers in part is not split and freed in
    /// pieces any more: its pages in the range are unmapped (`Mm::zap_anon_folio`) and it
    /// stays whole among the region's `partial` entries until a zap takes its last mapped
    /// pages, when it is freed whole; the reference does the same, freeing at once.
    fn dontneed_per_folio(v: &mut AnonVma, mm: &mut Mm, cpu: u32, start: u64, n: u64) -> u64 {
        if v.locked {
            return 0;
        }
        let end = (start + n).min(v.nr_pages);
        if start >= end {
            return 0;
        }
        let (mut freed, mut unmapped) = (0u64, 0u64);
        for ri in (start / REGION) as usize..end.div_ceil(REGION) as usize {
            v.resolve(mm, ri);
            let base = ri as u64 * REGION;
            let (lo, hi) = (
                (start.max(base) - base) as u32,
                (end.min(base + REGION) - base) as u32,
            );
            let r = &mut v.regions[ri];
            let folios = std::mem::take(&mut r.folios);
            let mut keep = Vec::with_capacity(folios.len());
            let mut new_partial = Vec::new();
            for m in folios {
                let (fo, nr) = (m.off as u32, 1u32 << m.order);
                let alive = mm.folio_is(m.id, m.token);
                if fo + nr <= lo || fo >= hi {
                    if alive {
                        keep.push(m);
                    }
                    continue;
                }
                if !alive {
                    r.set(fo, nr, false);
                    continue;
                }
                if fo >= lo && fo + nr <= hi {
                    mm.free_folio(cpu, m.id);
                    r.set(fo, nr, false);
                    freed += nr as u64;
                    unmapped += nr as u64;
                    continue;
                }
                let (a, b) = (lo.max(fo) - fo, hi.min(fo + nr) - fo);
                let written = Subpages::extract(&r.written, fo, nr);
                r.set(fo + a, b - a, false);
                match mm.zap_anon_folio(m.id, a, b - a, &written) {
                    Zap::Whole => unreachable!("a wholly mapped folio covered in part"),
                    Zap::Partial { unmapped: k } => {
                        unmapped += k as u64;
                        new_partial.push((m, Subpages::full(nr).and_not(&Subpages::range(a, b - a))));
                    }
                }
            }
            r.folios = keep;
            for (m, mapped) in std::mem::take(&mut r.partial) {
                let (fo, nr) = (m.off as u32, 1u32 << m.order);
                let (a, b) = (lo.max(fo).min(fo + nr) - fo, hi.min(fo + nr).max(fo) - fo);
                let range = Subpages::range(a, b.saturating_sub(a));
                let hit = mapped.and(&range);
                if hit.is_empty() {
                    r.partial.push((m, mapped));
                    continue;
                }
                for sub in hit.ones() {
                    r.set(fo + sub, 1, false);
                }
                let rest = mapped.and_not(&range);
                if !mm.folio_is(m.id, m.token) {
                    if !rest.is_empty() {
                        r.partial.push((m, rest));
                    }
                    continue;
                }
                match mm.zap_anon_folio(m.id, a, b - a, &Subpages::default()) {
                    Zap::Whole => {
                        mm.free_folio(cpu, m.id);
                        freed += nr as u64;
                        unmapped += hit.count() as u64;
                    }
                    Zap::Partial { unmapped: k } => {
                        unmapped += k as u64;
                        r.partial.push((m, rest));
                    }
                }
            }
            r.partial.append(&mut new_partial);
            r.reindex();
        }
        v.rss -= unmapped;
        freed
    }

    /// The per-folio `unmap` that `free_folio_run` replaced (partially unmapped folios freed
    /// whole after the region's other folios, §31.2 item 6).
    fn unmap_per_folio(v: &mut AnonVma, mm: &mut Mm, cpu: u32) -> u64 {
        v.munlock(mm);
        for ri in 0..v.regions.len() {
            v.resolve(mm, ri);
        }
        let mut freed = 0;
        for r in &mut v.regions {
            for &Mapped { id, token, order, .. } in r.folios.iter().chain(r.partial.iter().map(|(m, _)| m)) {
                if mm.folio_is(id, token) {
                    mm.free_folio(cpu, id);
                    freed += 1u64 << order;
                } else {
                    mm.swap_free_token(token);
                }
            }
            if let Some((id, token)) = r.pt {
                if mm.folio_is(id, token) {
                    mm.free_folio(cpu, id);
                }
            }
            *r = Region::default();
        }
        v.rss = 0;
        freed
    }

    /// Everything faults may touch in the model, for comparison.
    fn mm_state(mm: &Mm) -> String {
        let mut rss: Vec<_> = mm.folios.rss.iter().collect();
        rss.sort();
        // The deferred split queue by its live entries in order (the stale entries it keeps
        // until met depend on when folios were freed, not on what the model does).
        let queued: Vec<_> = mm.deferred_split.queued(&mm.folios).collect();
        let submaps: Vec<_> = mm
            .folios
            .live()
            .map(|(id, _)| mm.folios.submap(id).copied())
            .collect();
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?} {} {}\n{:?}",
            mm.zones,
            mm.pages,
            mm.block_content,
            mm.stats,
            mm.folios.folios,
            rss,
            mm.folios.census,
            mm.reclaim.lruvec,
            mm.work.sum,
            mm.mthp,
            mm.trace.buf,
            queued,
            mm.deferred_split.len,
            mm.deferred_split.nr_deferred,
            submaps,
        )
    }

    /// Fault runs (`fault_run`, `Mm::anon_fault_run`) leave the machine and the mappings as
    /// the same faults one by one: same touch results page by page, same buddy and PCP state,
    /// folio table, LRU order, pageblock contents, vmstat, rss, work sum and trace events —
    /// with several mappings (THP-madvised, locked) filling a small machine until the OOM
    /// killer runs, MADV_DONTNEED and unmaps in between.
    #[test]
    fn fault_runs_match_per_page_faults() {
        let mut x = 0x5eed_f00d_1234_abcdu64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut ma, mut mb) = (machine(), machine());
        ma.set_trace_mask(fraglab_mm::node::trace_kind::MM_PAGE_ALLOC);
        mb.set_trace_mask(fraglab_mm::node::trace_kind::MM_PAGE_ALLOC);
        let nr = 3 * REGION + 77;
        let new = |i: usize| {
            let mut v = AnonVma::new(nr, i % 5 == 4);
            v.locked = i % 7 == 6;
            v
        };
        let mut va: Vec<AnonVma> = (0..16).map(new).collect();
        let mut vb: Vec<AnonVma> = (0..16).map(new).collect();
        for v in &mut va {
            v.per_page = true;
        }
        let mut runs = 0;
        for step in 0..300 {
            let i = (rnd() % 16) as usize;
            let cpu = (rnd() % 2) as u32;
            ma.cur.pid = 2 + i as u32;
            mb.cur.pid = 2 + i as u32;
            let start = rnd() % nr;
            let n = 1 + rnd() % 600;
            match rnd() % 12 {
                0 => assert_eq!(
                    va[i].dontneed(&mut ma, cpu, start, n),
                    vb[i].dontneed(&mut mb, cpu, start, n)
                ),
                1 if step % 4 == 0 => {
                    va[i].unmap(&mut ma, cpu);
                    vb[i].unmap(&mut mb, cpu);
                    va[i] = new(i);
                    va[i].per_page = true;
                    vb[i] = new(i);
                }
                _ => {
                    let end = (start + n).min(nr);
                    let want: Vec<Touch> = (start..end).map(|p| va[i].touch(&mut ma, cpu, p)).collect();
                    let mut got = Vec::new();
                    let mut p = start;
                    while p < end {
                        let (t, run) = vb[i].touch_run(&mut mb, cpu, p, end);
                        assert!(run >= 1 && p + run <= end);
                        let again = match t {
                            Touch::Fault { .. } => {
                                runs += (run > 1) as u32;
                                t.clone()
                            }
                            _ => Touch::Hit,
                        };
                        got.push(t);
                        got.extend((1..run).map(|_| again.clone()));
                        p += run;
                    }
                    assert_eq!(want, got, "step {step}");
                }
            }
            assert_eq!(va[i].rss, vb[i].rss);
            assert_eq!(va[i].regions.len(), vb[i].regions.len());
            for (ra, rb) in va[i].regions.iter().zip(&vb[i].regions) {
                assert_eq!(ra.populated, rb.populated);
                assert_eq!(format!("{:?}", ra.folios), format!("{:?}", rb.folios));
            }
            if step % 5 == 0 {
                assert!(mm_state(&ma) == mm_state(&mb), "step {step}");
            }
        }
        assert!(mm_state(&ma) == mm_state(&mb));
        assert!(runs > 50, "only {runs} runs");
        // The machine filled up: slow paths, OOM kills (which free the victim's folios, so
        // that faults rarely fail).
        assert!(mb.work.sum.slowpaths > 0 && mb.work.sum.oom_kills > 0);
    }

    /// `dontneed` and `unmap` through `free_folio_run` leave the machine as the per-folio
    /// versions do (the faults after get the same folios), over random faults, MADV_DONTNEED
    /// of whole folios and of parts of large ones (since §31 a partial zap keeps the folio
    /// whole: PMD split, deferred split queue, freed whole later), mlock and unmaps of several
    /// mappings; every invariant holds throughout, and the partial paths were taken.
    #[test]
    fn dontneed_and_unmap_runs_match_per_folio_frees() {
        let mut x = 0x5151_7e57_0ddb_a11du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut partial_zaps = 0;
        for round in 0..8 {
            let (mut ma, mut mb) = (machine(), machine());
            let nr = 2 * REGION + 129;
            let mut va: Vec<AnonVma> = (0..3).map(|i| AnonVma::new(nr, (round + i) % 2 == 0)).collect();
            let mut vb = va.clone();
            for step in 0..120 {
                let k = (rnd() % 3) as usize;
                let start = rnd() % nr;
                let n = 1 + rnd() % 600;
                ma.cur.pid = 2 + k as u32;
                mb.cur.pid = 2 + k as u32;
                match rnd() % 8 {
                    0 | 1 => {
                        let a = dontneed_per_folio(&mut va[k], &mut ma, 1, start, n);
                        assert_eq!(a, vb[k].dontneed(&mut mb, 1, start, n));
                    }
                    2 if step % 3 == 0 => {
                        let a = unmap_per_folio(&mut va[k], &mut ma, 0);
                        assert_eq!(a, vb[k].unmap(&mut mb, 0));
                    }
                    3 if step % 7 == 0 => {
                        va[k].mlock(&mut ma);
                        vb[k].mlock(&mut mb);
                    }
                    _ => {
                        for p in start..(start + n).min(nr) {
                            assert_eq!(va[k].touch(&mut ma, 0, p), vb[k].touch(&mut mb, 0, p));
                        }
                    }
                }
                if step % 8 == 7 {
                    assert_eq!(mm_state(&ma), mm_state(&mb), "round {round} step {step}");
                    if let Err(e) = mb.check_invariants() {
                        panic!("round {round} step {step}: {e}");
                    }
                }
            }
            partial_zaps += mb.stat(fraglab_mm::vmstat::Stat::thp_split_pmd);
            for k in 0..3 {
                assert_eq!(unmap_per_folio(&mut va[k], &mut ma, 0), vb[k].unmap(&mut mb, 0));
            }
            assert_eq!(mm_state(&ma), mm_state(&mb));
            mb.check_invariants().unwrap();
            // Everything unmapped: nothing queued, nothing partially mapped.
            assert_eq!(mb.deferred_split.len, 0);
            assert_eq!(mb.mthp.nr_anon_partially_mapped, [0; 11]);
        }
        assert!(partial_zaps > 5, "only {partial_zaps} PMD splits");
    }

    /// `max_order`'s upward search answers as the downward one it replaced, for every
    /// unpopulated page of random bitmaps (VMA ends inside the region included).
    #[test]
    fn max_order_matches_downward_search() {
        let mut x = 0x0bad_cafe_dead_beefu64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..300 {
            let nr = REGION + 1 + rnd() % REGION;
            let mut v = AnonVma::new(nr, false);
            let density = rnd() % 6;
            for ri in 0..2 {
                for w in 0..8 {
                    let mut b = rnd();
                    for _ in 0..density {
                        b &= rnd();
                    }
                    v.regions[ri].populated[w] = b;
                }
            }
            for vpage in 0..nr {
                let r = &v.regions[(vpage / REGION) as usize];
                let off = (vpage % REGION) as u32;
                if r.is_set(off) {
                    continue;
                }
                let old = (0..=HPAGE_PMD_ORDER)
                    .rev()
                    .find(|&order| {
                        let n = 1u32 << order;
                        let start = off & !(n - 1);
                        let abs = (vpage / REGION) * REGION + start as u64;
                        abs + n as u64 <= nr && r.empty_range(start, n)
                    })
                    .unwrap_or(0);
                assert_eq!(v.max_order(vpage), old, "vpage {vpage}");
            }
        }
    }

    /// Word-mask `set` and `empty_range` agree with the per-bit loops on every naturally
    /// aligned range (the ones faults use) and on random unaligned ones, over random bitmaps.
    #[test]
    fn bitmap_ops_match_per_bit_loops() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..300 {
            let mut r = Region::default();
            let density = rnd() % 4;
            for w in 0..8 {
                let mut v = rnd();
                for _ in 0..density {
                    v &= rnd();
                }
                r.populated[w] = v;
            }
            let mut ranges: Vec<(u32, u32)> = (0..=9u32)
                .flat_map(|order| (0..512 >> order).map(move |i| (i << order, 1 << order)))
                .collect();
            for _ in 0..200 {
                let off = (rnd() % 512) as u32;
                let n = (rnd() % (512 - off as u64 + 1)) as u32;
                ranges.push((off, n));
            }
            for (off, n) in ranges {
                assert_eq!(r.empty_range(off, n), naive_empty(&r, off, n), "empty {off} {n}");
            }
            for _ in 0..50 {
                let off = (rnd() % 512) as u32;
                let n = (rnd() % (512 - off as u64 + 1)) as u32;
                let on = rnd() % 2 == 0;
                let mut want = r.populated;
                naive_set(&mut want, off, n, on);
                r.set(off, n, on);
                assert_eq!(r.populated, want, "set {off} {n} {on}");
            }
        }
    }
}

/// Serde for [`Region`]'s index (an array too long for serde's own impls): as a slice.
mod region_index {
    use super::REGION;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    type Index = Option<Box<[u16; REGION as usize]>>;

    pub fn serialize<S: Serializer>(v: &Index, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().map(|a| &a[..]).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Index, D::Error> {
        match Option::<Vec<u16>>::deserialize(d)? {
            None => Ok(None),
            Some(v) => {
                let n = v.len();
                let a: Box<[u16; REGION as usize]> = v.into_boxed_slice().try_into().map_err(|_| {
                    serde::de::Error::custom(format!("a region index of {n} entries, not {REGION}"))
                })?;
                Ok(Some(a))
            }
        }
    }
}
