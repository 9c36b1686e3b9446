//! Anonymous mappings as a workload sees them: a VMA of `nr_pages` pages, populated by page
//! faults (`do_anonymous_fault_upto`, kernel-model.md §11.3), with the page tables the faults
//! imply, and unmapped or MADV_DONTNEED'd in part.
//!
//! Model: the VMA starts PMD-aligned; each 2 MiB region has a bitmap of populated pages, the
//! folios mapped in it, and its page-table page. The first fault in a region allocates the PTE
//! page (GFP_KERNEL | __GFP_ACCOUNT order 0, unmovable; a PMD THP fault also allocates it, to
//! deposit — `pgtable_trans_huge_deposit`). A fault tries the largest order whose naturally
//! aligned range around the address is wholly empty and inside the VMA (PMD only for a whole,
//! empty 2 MiB region).
//!
//! Simplifications: upper page-table levels (PMD/PUD pages) are not allocated; partial
//! MADV_DONTNEED of a large folio splits it at once (the kernel splits the PMD and defers the
//! folio split to the deferred-split shrinker).

use fraglab_mm::folio::{FolioId, FolioKind};
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
#[derive(Clone, Debug, PartialEq, Eq)]
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Touch {
    /// Already populated: no fault.
    Hit,
    /// A fault mapped a folio of `order` (plus a page-table page if `pt`), doing `work`.
    Fault { order: u32, pt: bool, work: FaultWork },
    /// The fault could not be served (the task would be killed or loop; the model reports it).
    Failed { work: FaultWork },
}

/// One folio mapped in a region: 16 bytes (the first page's offset in the region fits a u16).
#[derive(Clone, Copy, Debug)]
struct Mapped {
    token: u64,
    id: FolioId,
    /// First page offset in the region.
    off: u16,
    order: u8,
}

#[derive(Clone, Debug, Default)]
struct Region {
    pt: Option<(FolioId, u64)>,
    /// The folios mapped, in the order they were mapped (the order unmap frees them in).
    folios: Vec<Mapped>,
    populated: [u64; 8],
    /// Host-side lookup only (no kernel counterpart; the kernel finds the folio through the
    /// PTE): with more than `INDEX_MIN_FOLIOS` folios, for every page offset the position in
    /// `folios` of the first entry covering it (`NO_FOLIO` if none), so that a touch of a
    /// populated page finds its folio in O(1) instead of scanning `folios`.
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

    /// Appends `m` to `folios`, keeping the index.
    fn push(&mut self, m: Mapped) {
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
#[derive(Clone, Debug)]
pub struct AnonVma {
    pub nr_pages: u64,
    /// MADV_HUGEPAGE (VM_HUGEPAGE).
    pub madvised: bool,
    regions: Vec<Region>,
    /// Pages currently populated.
    pub rss: u64,
    /// VM_LOCKED (mlock(2) or MAP_LOCKED, kernel-model.md §29.1.2): its folios are mlocked,
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
    fn live_folios(&self, mm: &Mm) -> Vec<FolioId> {
        self.regions
            .iter()
            .flat_map(|r| &r.folios)
            .filter(|m| mm.folio_is(m.id, m.token))
            .map(|m| m.id)
            .collect()
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
        let r = &self.regions[ri];
        if r.is_set(off) {
            let mut run = 1;
            // The access sets the PTE young bit: PG_referenced stands in for it (reclaim keeps
            // referenced anonymous folios, §10.3.5).
            if let Some(i) = r.find(off) {
                let Mapped {
                    id,
                    token,
                    off: fo,
                    order,
                } = r.folios[i];
                if mm.folio_is(id, token) {
                    mm.folios.folios[id as usize].set_referenced(true);
                    mm.folios.folios[id as usize].set_idle(false);
                }
                // The rest of this folio's pages (populated, and found in this same entry, as
                // entries never overlap) within [vpage, end).
                let fend = (fo as u32 + (1u32 << order)) as u64 + ri as u64 * REGION;
                let n = (fend.min(end).min(self.nr_pages) - vpage) as u32;
                if n > 1 && r.full_range(off, n) {
                    run = n as u64;
                }
            }
            return (Touch::Hit, run);
        }
        if let Some(run) = self.fault_run(mm, cpu, vpage, end) {
            let t = Touch::Fault {
                order: 0,
                pt: false,
                work: FaultWork::Fast { allocs: 1 },
            };
            return (t, run);
        }
        let before = mm.work_sum();
        let fault = self.fault(mm, cpu, vpage);
        let after = &mm.work.sum;
        let work = match after.fast_allocs_since(&before) {
            Some(allocs) => FaultWork::Fast { allocs },
            None => FaultWork::Slow(Box::new(after.since(&before))),
        };
        let t = match fault {
            Some((order, pt)) => Touch::Fault { order, pt, work },
            None => Touch::Failed { work },
        };
        (t, 1)
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
        r.push(Mapped {
            token,
            id,
            off: start as u16,
            order: order as u8,
        });
        self.rss += n as u64;
        Some((order, pt))
    }

    /// MADV_DONTNEED of pages [`start`, `start + n`): folios wholly inside are freed, large
    /// folios straddling the range are split and their pieces inside freed. Page tables stay.
    /// Returns the pages freed. On a locked mapping madvise(MADV_DONTNEED) fails with EINVAL
    /// (`madvise_dontneed_free_valid_vma`): nothing is freed.
    ///
    /// The frees are gathered and done by `Mm::free_folio_run` in the order met, the run cut
    /// before each split (a split inserts folios, so the frees before it must have happened
    /// for the folio table's reusable ids to be the same): the same state as `free_folio` on
    /// each as met.
    pub fn dontneed(&mut self, mm: &mut Mm, cpu: u32, start: u64, n: u64) -> u64 {
        if self.locked {
            return 0;
        }
        let end = (start + n).min(self.nr_pages);
        let mut freed = 0;
        let mut run: Vec<FolioId> = Vec::new();
        for ri in (start / REGION) as usize..end.div_ceil(REGION) as usize {
            let base = ri as u64 * REGION;
            let (lo, hi) = (start.max(base) - base, end.min(base + REGION) - base);
            let folios = std::mem::take(&mut self.regions[ri].folios);
            let mut keep = Vec::with_capacity(folios.len());
            for m in folios {
                let Mapped { id, token, order, .. } = m;
                let off = m.off as u32;
                let (fo, fn_) = (off as u64, 1u64 << order);
                let alive = mm.folio_is(id, token);
                if fo + fn_ <= lo || fo >= hi {
                    if alive {
                        keep.push(m);
                    }
                    continue;
                }
                if !alive {
                    self.regions[ri].set(off, fn_ as u32, false);
                    continue;
                }
                if fo >= lo && fo + fn_ <= hi {
                    run.push(id);
                    self.regions[ri].set(off, fn_ as u32, false);
                    freed += fn_;
                    continue;
                }
                mm.free_folio_run(cpu, &run);
                run.clear();
                for (i, piece) in mm.split_folio(id).into_iter().enumerate() {
                    let p = fo + i as u64;
                    let t = mm.folios.get(piece).token();
                    if p >= lo && p < hi {
                        run.push(piece);
                        self.regions[ri].set(p as u32, 1, false);
                        freed += 1;
                    } else {
                        keep.push(Mapped {
                            token: t,
                            id: piece,
                            off: p as u16,
                            order: 0,
                        });
                    }
                }
            }
            self.regions[ri].folios = keep;
            self.regions[ri].reindex();
        }
        mm.free_folio_run(cpu, &run);
        self.rss -= freed;
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

    /// Pages populated per folio order.
    pub fn folio_orders(&self) -> [u64; 11] {
        let mut out = [0; 11];
        for r in &self.regions {
            for m in &r.folios {
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
            start_pfn: 4096,
            spanned: pages,
            present: pages,
            managed: pages,
        };
        let m = MachineConfig {
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
    /// or piece is met).
    fn dontneed_per_folio(v: &mut AnonVma, mm: &mut Mm, cpu: u32, start: u64, n: u64) -> u64 {
        if v.locked {
            return 0;
        }
        let end = (start + n).min(v.nr_pages);
        let mut freed = 0;
        for ri in (start / REGION) as usize..end.div_ceil(REGION) as usize {
            let base = ri as u64 * REGION;
            let (lo, hi) = (start.max(base) - base, end.min(base + REGION) - base);
            let folios = std::mem::take(&mut v.regions[ri].folios);
            let mut keep = Vec::with_capacity(folios.len());
            for m in folios {
                let Mapped { id, token, order, .. } = m;
                let off = m.off as u32;
                let (fo, fn_) = (off as u64, 1u64 << order);
                let alive = mm.folio_is(id, token);
                if fo + fn_ <= lo || fo >= hi {
                    if alive {
                        keep.push(m);
                    }
                    continue;
                }
                if !alive {
                    v.regions[ri].set(off, fn_ as u32, false);
                    continue;
                }
                if fo >= lo && fo + fn_ <= hi {
                    mm.free_folio(cpu, id);
                    v.regions[ri].set(off, fn_ as u32, false);
                    freed += fn_;
                    continue;
                }
                for (i, piece) in mm.split_folio(id).into_iter().enumerate() {
                    let p = fo + i as u64;
                    let t = mm.folios.get(piece).token();
                    if p >= lo && p < hi {
                        mm.free_folio(cpu, piece);
                        v.regions[ri].set(p as u32, 1, false);
                        freed += 1;
                    } else {
                        keep.push(Mapped {
                            token: t,
                            id: piece,
                            off: p as u16,
                            order: 0,
                        });
                    }
                }
            }
            v.regions[ri].folios = keep;
            v.regions[ri].reindex();
        }
        v.rss -= freed;
        freed
    }

    /// The per-folio `unmap` that `free_folio_run` replaced.
    fn unmap_per_folio(v: &mut AnonVma, mm: &mut Mm, cpu: u32) -> u64 {
        v.munlock(mm);
        let mut freed = 0;
        for r in &mut v.regions {
            for &Mapped { id, token, order, .. } in &r.folios {
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
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
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
    /// versions did (the run cut before each split keeps the reused ids' order: the faults
    /// after get the same folios), over random faults, MADV_DONTNEED with splits, mlock and
    /// unmaps of several mappings.
    #[test]
    fn dontneed_and_unmap_runs_match_per_folio_frees() {
        let mut x = 0x5151_7e57_0ddb_a11du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
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
                }
            }
            for k in 0..3 {
                assert_eq!(unmap_per_folio(&mut va[k], &mut ma, 0), vb[k].unmap(&mut mb, 0));
            }
            assert_eq!(mm_state(&ma), mm_state(&mb));
        }
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
