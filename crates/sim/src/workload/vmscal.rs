//! `[[workload.vm_scalability]]`: the vm-scalability cases seed 000 measured (seed 000's published results): small-allocs,
//! mmap-pread-seq, lru-file-readtwice, lru-file-mmap-read and msync, as simulated tasks.
//!
//! What each case does follows the suite's scripts (`case-*`, driving `usemem` or `dd`); the
//! files are sparse, so a page-cache miss costs the file system zeroing the folio, not I/O.
//! Throughput is what lkp reports as `vm-scalability.throughput`: the sum over the processes of
//! bytes processed / the process's elapsed time, in KiB/s.
//!
//! Simplifications (stated in docs/knobs.md as well):
//! * each process loops over its part until the case's `runtime` ends (usemem and dd make one
//!   pass; lkp's runs are time-bounded), except lru-file-readtwice and lru-file-mmap-read, which
//!   are use-once by design and make one pass;
//! * a read or copy of a 4 KiB page (user space reading the mapping, `copy_to_user` of a 4 KiB
//!   read) is charged `zero_page_ns` (the same memory bandwidth); system-call entry is free;
//! * fault-around (`filemap_map_pages`, 16 pages by default) maps the cached pages of the
//!   16-page window of a fault without further faults;
//! * mapped file folios are not recorded as mapped (see `Mm::filemap_fault`);
//! * msync waits `write_io_ns` per 128 KiB written back (about 1.3 GB/s with the default);
//! * small-allocs charges each VMA's mmap(2) as one `fault_base_ns`.

use std::cell::RefCell;
use std::rc::Rc;

use fraglab_mm::filemap::{FileVma, Mapping, ReadStats, ReadaheadState};
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::slowpath::MeasureWork;
use fraglab_mm::types::HPAGE_PMD_ORDER;
use fraglab_mm::{Gfp, Mm};
use fraglab_spec::result::{RunResult, VmScalabilityResult};
use fraglab_spec::{MappingKind, VmScalabilityCase, VmScalabilityParams};

use super::{pages_of, Generator, Run, Shared};
use crate::engine::{Cx, Progress, Step, TaskBody};
use crate::metrics::Metrics;

/// Pages handled per step, so that the processes interleave.
const CHUNK: u64 = 64;
/// `fault_around_bytes` (64 KiB) in pages.
const FAULT_AROUND: u64 = 16;
/// vm_area_struct objects per slab page (192-byte objects, as the suite's comment says).
const VMAS_PER_SLAB_PAGE: u64 = 21;
/// msync writes back in I/Os of this many pages, each charged `write_io_ns`.
const WRITEBACK_BATCH: u64 = 32;

/// Per-process figures.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct VmScalTaskResult {
    pub bytes: u64,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// What the processes of one case share: its parameters, the values derived from them against
/// the machine, its files and the processes' figures.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct VmScalShared {
    pub p: VmScalabilityParams,
    /// Processes (`nr_task`, default the machine's CPUs).
    pub tasks: u32,
    /// Pages each process works on.
    pub task_pages: u64,
    /// Pages of each process's file (msync: the sparse file is the size of memory).
    pub file_pages: u64,
    /// small-allocs: pages per VMA.
    pub unit_pages: u64,
    /// The mapping ids of the files (one shared file for mmap-pread-seq, one per process
    /// otherwise, none for small-allocs).
    pub files: Vec<u32>,
    pub results: Vec<VmScalTaskResult>,
}

impl VmScalShared {
    /// Builds the shared state of case `p` on a machine of `cpus` CPUs and `mem_pages` managed
    /// pages: its files as mappings of `p.mapping`'s kind.
    pub fn new(mm: &mut Mm, p: &VmScalabilityParams, cpus: u32, mem_pages: u64) -> Shared<VmScalShared> {
        use VmScalabilityCase as C;
        let tasks = p.tasks.unwrap_or(cpus).max(1);
        let cpus = cpus.max(1) as u64;
        // ROTATE_BYTES: 1.5 × memory, so that every pass reclaims page cache (§2).
        let total = p.size_bytes.map(pages_of).unwrap_or(mem_pages * 3 / 2);
        let (task_pages, file_pages) = match p.case {
            C::SmallAllocs => (total / tasks as u64, 0),
            C::MmapPreadSeq => (total / tasks as u64, total),
            C::LruFileReadtwice | C::LruFileMmapRead => (total / tasks as u64, total / tasks as u64),
            C::Msync => (
                p.size_bytes.map(pages_of).unwrap_or(mem_pages / cpus / 2),
                mem_pages,
            ),
        };
        let mapping = match p.mapping {
            MappingKind::Xfs => Mapping::xfs_like(),
            MappingKind::LargeFolios => Mapping::large_folios(),
            MappingKind::NoLargeFolios => Mapping::no_large_folios(),
        };
        let nfiles = match p.case {
            C::SmallAllocs => 0,
            C::MmapPreadSeq => 1,
            _ => tasks,
        };
        let files = (0..nfiles).map(|_| mm.add_mapping(mapping)).collect();
        Rc::new(RefCell::new(VmScalShared {
            p: p.clone(),
            tasks,
            task_pages: task_pages.max(1),
            file_pages,
            unit_pages: pages_of(p.unit_bytes).max(1),
            files,
            results: Vec::new(),
        }))
    }

    /// The processes the case spawns: for lru-file-readtwice two readers per file, otherwise
    /// one process per file (or per part).
    pub fn processes(&self) -> u32 {
        match self.p.case {
            VmScalabilityCase::LruFileReadtwice => 2 * self.tasks,
            _ => self.tasks,
        }
    }

    /// lkp's `vm-scalability.throughput`: Σ bytes / elapsed, in KiB/s.
    pub fn throughput_kib_s(&self) -> f64 {
        self.results
            .iter()
            .filter(|r| r.end_ns > r.start_ns)
            .map(|r| r.bytes as f64 / 1024.0 / ((r.end_ns - r.start_ns) as f64 / 1e9))
            .sum()
    }
}

/// One vm-scalability process.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct VmScalTask {
    #[serde(with = "crate::checkpoint::shared")]
    shared: Shared<VmScalShared>,
    /// Index of this process's result.
    slot: usize,
    mapping: u32,
    /// The page range [first, first + pages) of the file (or of the address space) it works on.
    first: u64,
    pages: u64,
    pos: u64,
    ra: ReadaheadState,
    /// Page-table pages of the current pass (one per 2 MiB touched) and small-allocs' VMA
    /// slab pages, freed at the end of the pass (munmap / exit).
    held: Vec<(FolioId, u64)>,
    pt_regions: Vec<bool>,
    /// msync: pages whose PTE is writable (write-faulted since the last writeback
    /// write-protected them).
    writable: Vec<bool>,
    prefaulted: bool,
    started: bool,
}

impl VmScalTask {
    pub fn new(shared: Shared<VmScalShared>, index: u32, ra: ReadaheadState) -> VmScalTask {
        let (mapping, first, pages, slot) = {
            let mut sh = shared.borrow_mut();
            let task_pages = sh.task_pages;
            let (mapping, first) = match sh.p.case {
                VmScalabilityCase::SmallAllocs => (0, 0),
                VmScalabilityCase::MmapPreadSeq => (sh.files[0], index as u64 * task_pages),
                VmScalabilityCase::LruFileReadtwice => (sh.files[(index / 2) as usize], 0),
                _ => (sh.files[index as usize], 0),
            };
            sh.results.push(VmScalTaskResult::default());
            (mapping, first, task_pages, sh.results.len() - 1)
        };
        VmScalTask {
            shared,
            slot,
            mapping,
            first,
            pages,
            pos: 0,
            ra,
            held: Vec::new(),
            pt_regions: vec![false; pages.div_ceil(1 << HPAGE_PMD_ORDER) as usize + 1],
            writable: Vec::new(),
            prefaulted: false,
            started: false,
        }
    }

    fn alloc_held(&mut self, cx: &mut Cx, kind: FolioKind) -> bool {
        let g = Gfp::GFP_KERNEL.union(Gfp::ACCOUNT);
        match cx.mm.alloc_folio(cx.cpu, g, 0, kind, false) {
            Some(id) => {
                self.held.push((id, cx.mm.folios.get(id).token()));
                true
            }
            None => false,
        }
    }

    /// The PTE page covering page `p` of the pass's address range, allocated at first use.
    fn page_table(&mut self, cx: &mut Cx, p: u64) -> u64 {
        let r = (p >> HPAGE_PMD_ORDER) as usize;
        if self.pt_regions[r] {
            return 0;
        }
        self.pt_regions[r] = true;
        self.alloc_held(cx, FolioKind::PageTable);
        cx.cost.zero_page_ns
    }

    /// munmap at the end of a pass: the page tables (and VMA slab) go.
    fn end_pass(&mut self, cx: &mut Cx) -> u64 {
        let mut n = 0;
        for (id, token) in std::mem::take(&mut self.held) {
            if cx.mm.folio_is(id, token) {
                cx.mm.free_folio(cx.cpu, id);
                n += 1;
            }
        }
        self.pt_regions.iter_mut().for_each(|r| *r = false);
        self.pos = 0;
        n * cx.cost.free_page_ns
    }

    /// Charge for what a file read or fault did besides the caller's copy: allocation work
    /// and the zeroing of every page readahead added (sparse file).
    fn read_cost(cx: &mut Cx, st: &ReadStats, work: &fraglab_mm::slowpath::WorkSum) -> u64 {
        let added: u64 = st.added.iter().enumerate().map(|(o, n)| n << o).sum();
        added * cx.cost.zero_page_ns + cx.alloc_work(work)
    }

    /// One mmap access of page `p` (relative to `first`). A read faults for the first page of
    /// a fault-around window or for a page not cached, and is otherwise a mapped hit. A write
    /// (shared mapping) faults unless the folio is already dirty: a clean page is mapped
    /// read-only until `page_mkwrite`, and writeback write-protects it again (no fault-around
    /// for write faults); it dirties the folio.
    fn mmap_access(&mut self, cx: &mut Cx, p: u64, write: bool, vma: FileVma) -> u64 {
        let file_pages = self.shared.borrow().file_pages;
        let index = self.first + p;
        let mut ns = self.page_table(cx, p);
        let cached = cx.mm.filemap_lookup(self.mapping, index);
        if write && self.writable.is_empty() {
            self.writable = vec![false; self.pages as usize];
        }
        let hit = match cached {
            // A write faults once per page (PTE) after writeback write-protected it, large
            // folio or not (`wp_page_shared`), and on any page no longer cached.
            Some(_) if write => std::mem::replace(&mut self.writable[p as usize], true),
            // Fault-around (`filemap_map_pages`) skips PG_readahead folios, so that their
            // fault starts the async readahead.
            Some(id) => !p.is_multiple_of(FAULT_AROUND) && !cx.mm.folios.folios[id as usize].readahead_mark(),
            None => false,
        };
        let id = if hit {
            let id = cached.expect("a hit is cached");
            let f = &mut cx.mm.folios.folios[id as usize];
            f.set_referenced(true);
            f.set_idle(false);
            // Each page fault-around maps that is not PG_workingset lowers mmap_miss.
            if !f.workingset() && !write {
                self.ra.mmap_miss = self.ra.mmap_miss.saturating_sub(1);
            }
            Some(id)
        } else {
            let (st, work) = cx.measure(|cx| {
                cx.mm
                    .filemap_fault(cx.cpu, self.mapping, &mut self.ra, vma, index, file_pages)
            });
            ns += cx.cost.fault_base_ns + Self::read_cost(cx, &st, &work);
            if write {
                self.writable[p as usize] = true;
            }
            cx.mm.filemap_lookup(self.mapping, index)
        };
        if let (true, Some(id)) = (write, id) {
            cx.mm.folio_mark_dirty(id, true);
        }
        ns + cx.cost.zero_page_ns
    }

    /// small-allocs: read-only touches of fresh anonymous VMAs map the zero page: one fault
    /// per page, no data page; a PTE page per 2 MiB of address space (adjacent VMAs share it)
    /// and a vm_area_struct per VMA (unmovable slab). Pages `[pos, pos + n)`.
    fn small_allocs(&mut self, cx: &mut Cx, n: u64, unit_pages: u64) -> u64 {
        let mut ns = 0;
        for p in self.pos..self.pos + n {
            if p % unit_pages == 0 {
                // mmap(2) of the next VMA.
                ns += cx.cost.fault_base_ns;
                if (p / unit_pages).is_multiple_of(VMAS_PER_SLAB_PAGE) {
                    let (_, work) = cx.measure(|cx| self.alloc_held(cx, FolioKind::Slab));
                    ns += cx.alloc_work(&work);
                }
            }
            let (pt_ns, work) = cx.measure(|cx| {
                let pt_ns = self.page_table(cx, p);
                cx.mm.count(fraglab_mm::vmstat::Stat::pgfault, 1);
                pt_ns
            });
            ns += pt_ns + cx.cost.fault_base_ns + cx.alloc_work(&work);
        }
        ns
    }

    /// lru-file-readtwice: dd bs=4k, one read(2) of a page at a time, sequential, own
    /// readahead state. Pages `[pos, pos + n)`.
    fn dd_read(&mut self, cx: &mut Cx, n: u64, file_pages: u64) -> u64 {
        let mut ns = 0;
        for p in self.pos..self.pos + n {
            let (st, work) = cx.measure(|cx| {
                cx.mm
                    .filemap_read(cx.cpu, self.mapping, &mut self.ra, p, 1, file_pages)
            });
            ns += cx.cost.zero_page_ns + Self::read_cost(cx, &st, &work);
        }
        ns
    }
}

impl TaskBody for VmScalTask {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::VmScal(self))
    }

    fn comm(&self) -> &str {
        match self.shared.borrow().p.case {
            VmScalabilityCase::LruFileReadtwice => "dd",
            _ => "usemem",
        }
    }

    /// The case's runtime; the use-once cases (one pass) also by pages done of the pass.
    fn progress(&self) -> Option<Progress> {
        let sh = self.shared.borrow();
        let use_once = matches!(
            sh.p.case,
            VmScalabilityCase::LruFileReadtwice | VmScalabilityCase::LruFileMmapRead
        );
        Some(Progress {
            work: use_once.then_some((self.pos.min(self.pages), self.pages)),
            until_ns: Some(sh.p.start_ns + sh.p.runtime_ns),
            ..Progress::default()
        })
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let (case, deadline, unit_pages, file_pages) = {
            let sh = self.shared.borrow();
            (
                sh.p.case,
                sh.p.start_ns + sh.p.runtime_ns,
                sh.unit_pages,
                sh.file_pages,
            )
        };
        {
            let mut sh = self.shared.borrow_mut();
            let r = &mut sh.results[self.slot];
            if !self.started {
                self.started = true;
                r.start_ns = cx.now;
            }
            // The run may end (its duration) before the process does: its elapsed time so far.
            r.end_ns = cx.now;
        }
        let use_once = matches!(
            case,
            VmScalabilityCase::LruFileReadtwice | VmScalabilityCase::LruFileMmapRead
        );
        if cx.now >= deadline || (use_once && self.pos >= self.pages) {
            let ns = self.end_pass(cx);
            self.shared.borrow_mut().results[self.slot].end_ns = cx.now;
            return Step::Exit(ns);
        }
        if self.pos >= self.pages {
            // A pass is over: munmap (and for msync, the pass's msync happened already).
            return Step::Ran(self.end_pass(cx));
        }
        let n = CHUNK.min(self.pages - self.pos);
        let mut ns = 0;
        let mut bytes = n * 4096;
        match case {
            VmScalabilityCase::SmallAllocs => ns = self.small_allocs(cx, n, unit_pages),
            VmScalabilityCase::MmapPreadSeq | VmScalabilityCase::LruFileMmapRead => {
                for p in self.pos..self.pos + n {
                    ns += self.mmap_access(cx, p, false, FileVma::default());
                }
            }
            VmScalabilityCase::Msync => {
                if !self.prefaulted {
                    // --prealloc: every page write-faulted once before the timed loop.
                    for p in self.pos..self.pos + n {
                        ns += self.mmap_access(cx, p, true, FileVma::default());
                    }
                    bytes = 0;
                    if self.pos + n >= self.pages {
                        self.prefaulted = true;
                    }
                } else {
                    for p in self.pos..self.pos + n {
                        ns += self.mmap_access(cx, p, true, FileVma::default());
                    }
                }
                if self.pos + n >= self.pages {
                    // msync(MS_SYNC) of the whole mapping.
                    let written = cx
                        .mm
                        .filemap_writeback_range(self.mapping, self.first, self.pages);
                    self.writable.iter_mut().for_each(|w| *w = false);
                    self.pos += n;
                    self.shared.borrow_mut().results[self.slot].bytes += bytes;
                    let sleep = written.div_ceil(WRITEBACK_BATCH) * cx.cost.write_io_ns;
                    return Step::Sleep { ran: ns, sleep };
                }
            }
            VmScalabilityCase::LruFileReadtwice => ns = self.dd_read(cx, n, file_pages),
        }
        self.pos += n;
        self.shared.borrow_mut().results[self.slot].bytes += bytes;
        Step::Ran(ns)
    }
}

/// Whether case `p` dirties page cache (msync's shared writable mapping).
fn dirties_page_cache(p: &VmScalabilityParams) -> bool {
    p.case == VmScalabilityCase::Msync
}

/// The `[[workload.vm_scalability]]` entries: per entry its processes, started at `start`.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct VmScalability {
    params: Vec<VmScalabilityParams>,
    #[serde(with = "crate::checkpoint::shared_vec")]
    shared: Vec<Shared<VmScalShared>>,
}

impl VmScalability {
    pub fn new(params: &[VmScalabilityParams]) -> VmScalability {
        VmScalability {
            params: params.to_vec(),
            shared: Vec::new(),
        }
    }
}

impl Generator for VmScalability {
    fn saved(&self) -> Option<crate::checkpoint::GeneratorRef<'_>> {
        Some(crate::checkpoint::GeneratorRef::VmScalability(self))
    }

    fn spawn(&mut self, run: &mut Run<'_>) {
        let mem_pages = run.managed_pages();
        for v in &self.params {
            let shared = VmScalShared::new(&mut run.e.mm, v, run.spec.machine.cpus, mem_pages);
            let processes = shared.borrow().processes();
            for i in 0..processes {
                let ra = run.e.mm.file_ra_state_init();
                run.e
                    .spawn_at(v.start_ns, Box::new(VmScalTask::new(shared.clone(), i, ra)));
            }
            self.shared.push(shared);
        }
        // msync's dirty pages: the run's flusher writes them back. With fio writers in the
        // run, the fio generator spawns it after its writers instead (the order of the tasks
        // is part of the run).
        if self.params.iter().any(dirties_page_cache) && run.w.fio_smallfiles.is_empty() {
            run.spawn_flusher();
        }
    }

    /// Each case's throughput (lkp's `vm-scalability.throughput`).
    fn result(&self, _: &Metrics, r: &mut RunResult) {
        r.vm_scalability = self
            .shared
            .iter()
            .map(|sh| {
                let sh = sh.borrow();
                VmScalabilityResult {
                    case: sh.p.case.name().to_string(),
                    processes: sh.results.len() as u32,
                    bytes: sh.results.iter().map(|r| r.bytes).sum(),
                    throughput: sh.throughput_kib_s(),
                }
            })
            .collect();
    }
}
