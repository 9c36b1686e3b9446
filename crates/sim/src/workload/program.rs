//! `[[workload.task]]`: programs of steps (issue 5's workload primitives), `count` instances
//! each, repeated `loops` times.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use fraglab_mm::filemap::ReadaheadState;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::slowpath::MeasureWork;
use fraglab_mm::Gfp;
use fraglab_spec::result::{CensusResult, NamedSample, TaskReadResult};
use fraglab_spec::{Fadvice, FilesOp, MappingKind, TaskParams, TaskStep};
use rand::Rng;

use super::common::{alloc_file_objs, decimal_len, touch_range, write_cost, CHUNK, COMPUTE_SLICE_NS};
use super::{Generator, Run, Shared};
use crate::anon::AnonVma;
use crate::engine::{Cx, Progress, Step, TaskBody, MS};
use crate::metrics::Metrics;
use crate::slab::{Obj, SlabCache};

/// Pages of one read(2) call of a `read` or `files` step: 128 KiB, the buffer the host engine
/// reads with (crates/host worker.rs), since the request size shapes readahead (§23.3, §23.8).
const READ_CALL_PAGES: u64 = 32;

/// A task running a `[[workload.task]]` program (issue 5's workload primitives): each engine
/// step does one step of the program, or one chunk of a long one (64 pages touched, 1 MiB of
/// reads, one write chunk, 10 ms of compute).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ProgramTask {
    name: String,
    steps: Vec<TaskStep>,
    loops: u32,
    loops_left: u32,
    pc: usize,
    /// Progress inside the current step (pages touched or read, bytes written).
    progress: u64,
    order: Vec<u64>,
    vmas: BTreeMap<String, AnonVma>,
    /// File name → mapping id (shared by every task of the run) and this task's readahead state.
    #[serde(with = "crate::checkpoint::shared")]
    files: Shared<BTreeMap<String, u32>>,
    ra: BTreeMap<String, ReadaheadState>,
    /// The `slab` and `pipes` objects held, in allocation order.
    objects: Vec<HeldObj>,
    /// Pipe pages this task's `pipes` steps have allocated (the next one's place).
    pipe_seq: u64,
    /// The file sets of `files` steps and the files' sizes in pages (shared by the run).
    #[serde(with = "crate::checkpoint::shared")]
    sets: Shared<FileSets>,
    #[serde(with = "crate::checkpoint::shared")]
    metrics: Shared<Metrics>,
    /// The pool size the last `nr_hugepages` step of any task read back (shared by the run).
    #[serde(with = "crate::checkpoint::shared")]
    hugetlb_pool: Shared<Option<u64>>,
    // H7: the pool the machine holds (`machine.hugetlb_pages`), the base of `nr_hugepages`.
    hugetlb_base: u64,
    // H5: census and read throughput.
    instance: u32,
    /// When the current read step started.
    read_start: Option<u64>,
    /// When the read requests this task issued complete (cost.rs `read_wait`).
    read_ready_at: u64,
    /// The census steps' results and every instance's read bytes and time (shared by the run).
    #[serde(with = "crate::checkpoint::shared")]
    census: Shared<Vec<CensusResult>>,
    #[serde(with = "crate::checkpoint::shared")]
    reads: Shared<BTreeMap<(String, u32), (u64, u64)>>,
    /// The `sample` steps' samples, in the order taken (shared by the run).
    #[serde(with = "crate::checkpoint::shared")]
    named: Shared<Vec<NamedSample>>,
    /// The files this task's `slab` steps created on the run directory's ext4 (docs/model
    /// §33; the host engine creates [`FILES_PER_SLAB_PAGE`] empty files per slab page asked
    /// for, in a directory per step) and not yet unlinked by a `free` step: (filesystem,
    /// directory, name, inode), in creation order; and the current step's directory.
    slab_files: Vec<(u32, u32, u64, u32)>,
    slab_dir: Option<(u32, u32)>,
}

/// A `slab` or `pipes` object a task holds: its folio (valid while the token matches), whether
/// it is reclaimable slab, and for a pipe page its place in the task's pipe population (0 for
/// slab).
#[derive(serde::Serialize, serde::Deserialize)]
struct HeldObj {
    id: FolioId,
    token: u64,
    reclaimable: bool,
    seq: u64,
}

impl ProgramTask {
    pub fn new(
        p: &TaskParams,
        files: Shared<BTreeMap<String, u32>>,
        metrics: Shared<Metrics>,
    ) -> ProgramTask {
        ProgramTask {
            name: p.name.clone(),
            steps: p.steps.clone(),
            loops: p.loops,
            loops_left: p.loops,
            pc: 0,
            progress: 0,
            order: Vec::new(),
            vmas: Default::default(),
            files,
            ra: Default::default(),
            objects: Vec::new(),
            pipe_seq: 0,
            sets: Default::default(),
            metrics,
            hugetlb_pool: Default::default(),
            hugetlb_base: 0,
            instance: 0,
            read_start: None,
            read_ready_at: 0,
            census: Default::default(),
            reads: Default::default(),
            named: Default::default(),
            slab_files: Vec::new(),
            slab_dir: None,
        }
    }

    fn next(&mut self) {
        self.pc += 1;
        self.progress = 0;
        self.order.clear();
        self.slab_dir = None;
    }

    fn release(&mut self, cx: &mut Cx) -> u64 {
        let mut freed = 0;
        for (_, mut v) in std::mem::take(&mut self.vmas) {
            freed += v.unmap(cx.mm, cx.cpu);
        }
        for o in std::mem::take(&mut self.objects) {
            if cx.mm.folio_is(o.id, o.token) {
                cx.mm.free_folio(cx.cpu, o.id);
                freed += 1;
            }
        }
        freed
    }

    /// `mmap`: a new anonymous mapping (a mapping of the same name is unmapped first). With
    /// `locked` (MAP_LOCKED, docs/model §29.1.2) the mapping is VM_LOCKED and populated
    /// in `CHUNK`-page steps as `touch` does, each fault mlocking its folio.
    fn mmap(&mut self, cx: &mut Cx, vma: String, size_bytes: u64, madvise: bool, locked: bool) -> Step {
        if self.progress == 0 {
            let mut v = AnonVma::new(size_bytes.div_ceil(4096), madvise);
            v.locked = locked;
            if let Some(mut old) = self.vmas.insert(vma.clone(), v) {
                old.unmap(cx.mm, cx.cpu);
            }
        }
        if locked {
            return self.touch(cx, &vma, false, 1);
        }
        self.next();
        Step::Ran(cx.cost.context_switch_ns)
    }

    /// `mlock` (mlock(2) of the whole mapping, §29.1.2): at the step's start the mapping
    /// becomes VM_LOCKED and its present folios are mlocked; then every page is populated in
    /// `CHUNK`-page steps as `touch` does (`__mm_populate`), each fault mlocking its folio.
    fn mlock(&mut self, cx: &mut Cx, vma: &str) -> Step {
        if self.progress == 0 {
            self.vmas
                .get_mut(vma)
                .expect("validated: mapped by an earlier step")
                .mlock(cx.mm);
        }
        self.touch(cx, vma, false, 1)
    }

    /// `dontneed`: MADV_DONTNEED of one range, or with a `stride` of up to `CHUNK` of its
    /// ranges per engine step (one madvise call each: a context switch, plus the pages freed).
    /// A partial zap of a large folio frees nothing (§31.2).
    fn dontneed(&mut self, cx: &mut Cx, vma: &str, offset: u64, length: u64, stride: Option<u64>) -> Step {
        let v = self.vmas.get_mut(vma).expect("validated");
        let size = v.nr_pages * 4096;
        let (stride, calls) = match stride {
            Some(st) => (st, size.saturating_sub(offset).div_ceil(st).max(1)),
            None => (0, 1),
        };
        let mut ns = 0;
        for _ in 0..CHUNK {
            if self.progress >= calls {
                break;
            }
            let at = offset + self.progress * stride;
            let freed = v.dontneed(cx.mm, cx.cpu, at / 4096, length.div_ceil(4096));
            ns += freed * cx.cost.free_page_ns + cx.cost.context_switch_ns;
            self.progress += 1;
        }
        if self.progress >= calls {
            self.next();
        }
        Step::Ran(ns)
    }

    /// `touch`: up to `CHUNK` pages, in address order or in a random order (a shuffle of the
    /// pages drawn at the step's start); with a stride of `every` pages, only the first page
    /// of each stride.
    fn touch(&mut self, cx: &mut Cx, vma: &str, random: bool, every: u64) -> Step {
        let v = self
            .vmas
            .get_mut(vma)
            .expect("validated: mapped by an earlier step");
        let n = v.nr_pages.div_ceil(every);
        if random && self.order.is_empty() {
            let mut o: Vec<u64> = (0..n).collect();
            for i in (1..o.len()).rev() {
                o.swap(i, cx.rng.gen_range(0..=i));
            }
            self.order = o;
        }
        let mut ns = 0;
        let mut m = self.metrics.borrow_mut();
        for _ in 0..CHUNK {
            if self.progress >= n {
                break;
            }
            let p = if random {
                self.order[self.progress as usize]
            } else {
                self.progress
            } * every;
            ns += touch_range(cx, v, p, 1, &mut m).cpu_ns;
            self.progress += 1;
        }
        drop(m);
        if self.progress >= n {
            self.next();
        }
        Step::Ran(ns.max(1))
    }

    /// `compute`: in slices of at most 10 ms, as a kbuild job computes: the engine does not
    /// preempt a step, so a 300 ms step would hold its CPU against kswapd and kcompactd for
    /// 300 ms, where the kernel's scheduler runs a waking kernel thread within a slice (a few
    /// ms).
    fn compute(&mut self, ns: u64) -> Step {
        let slice = (ns - self.progress).min(COMPUTE_SLICE_NS);
        self.progress += slice;
        if self.progress >= ns {
            self.next();
        }
        Step::Ran(slice)
    }

    /// `read`: up to 256 pages (1 MiB) of buffered reads, sequential from `offset` or of
    /// random pages of the file; a miss waits for the device.
    fn read(
        &mut self,
        cx: &mut Cx,
        file: String,
        offset: u64,
        length: u64,
        file_size: u64,
        random: bool,
    ) -> Step {
        let mapping = self.files.borrow()[&file];
        let init = cx.mm.file_ra_state_init();
        let ra = self.ra.entry(file).or_insert(init);
        let pages = length.div_ceil(4096);
        let file_pages = file_size.div_ceil(4096);
        let n = (pages - self.progress).min(256);
        if self.progress == 0 {
            self.read_start = Some(cx.now);
        }
        let (rs, work) = cx.measure(|cx| {
            let mut rs = fraglab_mm::filemap::ReadStats::default();
            if random {
                for _ in 0..n {
                    let p = cx.rng.gen_range(0..file_pages.max(1));
                    let st = cx.mm.filemap_read(cx.cpu, mapping, ra, p, 1, file_pages);
                    rs.add(&st);
                }
            } else {
                // read(2) calls of READ_CALL_PAGES, the host engine's buffer: the request size
                // sets the readahead windows (docs/model §23.8). The chunk waits for the
                // device if any call read from it: a call whose pages the previous call's
                // async readahead brought in counts them as hits, but that I/O is this
                // chunk's (as when the chunk was one call).
                let first = offset / 4096 + self.progress;
                let mut p = first;
                while p < first + n {
                    let req = (first + n - p).min(READ_CALL_PAGES);
                    let st = cx.mm.filemap_read(cx.cpu, mapping, ra, p, req, file_pages);
                    rs.add(&st);
                    p += req;
                }
            }
            rs
        });
        self.progress += n;
        let ns = cx.alloc_work(&work) + n * cx.cost.free_page_ns;
        // The step's CPU work ends after its charged time and its lock waits.
        let cpu_end = cx.now + ns + cx.waited;
        // The device: the readahead requests this step issued (cost.rs `read_wait`).
        let sleep = cx.cost.read_wait(&rs, cpu_end, &mut self.read_ready_at);
        let io = sleep > 0;
        if self.progress >= pages {
            self.next();
            // The step ends when its last chunk's CPU time and device wait are over.
            let start = self.read_start.take().unwrap_or(cx.now);
            let mut reads = self.reads.borrow_mut();
            let e = reads.entry((self.name.clone(), self.instance)).or_default();
            e.0 += length;
            e.1 += cpu_end + sleep - start;
        }
        if io {
            Step::Sleep { ran: ns, sleep }
        } else {
            Step::Ran(ns)
        }
    }

    /// `write`: one `chunk`-byte buffered write; above the dirty limit the writer waits
    /// (balance_dirty_pages).
    fn write(&mut self, cx: &mut Cx, file: &str, offset: u64, length: u64, chunk: u64) -> Step {
        let mapping = self.files.borrow()[file];
        if cx.mm.dirty_exceeded() {
            return Step::Sleep {
                ran: 0,
                sleep: 10 * MS,
            };
        }
        let len = (length - self.progress).min(chunk);
        let pos = (offset + self.progress) / 4096;
        let st = cx.mm.filemap_write(cx.cpu, mapping, pos, len);
        self.progress += len;
        if self.progress >= length {
            self.next();
        }
        Step::Ran(write_cost(cx, &st, len.div_ceil(4096)))
    }

    /// `slab`: up to `CHUNK` small kernel objects (order-0 pages), reclaimable (shrinkable
    /// slab) or unmovable, held until the task ends.
    fn slab(&mut self, cx: &mut Cx, count: u64, reclaimable: bool) -> Step {
        let g = if reclaimable {
            Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)
        } else {
            Gfp::GFP_KERNEL.union(Gfp::ACCOUNT)
        };
        let kind = if reclaimable {
            FolioKind::Slab
        } else {
            FolioKind::Kernel
        };
        let n = (count - self.progress).min(CHUNK);
        let slab_fs = if reclaimable {
            self.sets.borrow().slab_fs
        } else {
            None
        };
        let first = self.progress;
        let ((), work) = cx.measure(|cx| {
            // The host's files behind the objects: a directory for the step, then
            // FILES_PER_SLAB_PAGE empty files per page, named 0, 1, ... (their metadata on the
            // run directory's ext4, docs/model §33).
            if let Some(fs) = slab_fs {
                let (_, dir) = *self
                    .slab_dir
                    .get_or_insert_with(|| (fs, cx.mm.ext4_mkdir(cx.cpu, fs, 0, false)));
                for key in first * FILES_PER_SLAB_PAGE..(first + n) * FILES_PER_SLAB_PAGE {
                    let ino = cx
                        .mm
                        .ext4_create(cx.cpu, fs, dir, key, decimal_len(key), false, false);
                    self.slab_files.push((fs, dir, key, ino));
                }
            }
            for _ in 0..n {
                if let Some(id) = cx.mm.alloc_folio(cx.cpu, g, 0, kind, false) {
                    if reclaimable {
                        cx.mm.set_slab_shrinkable(id);
                    }
                    let seq = if reclaimable {
                        0
                    } else {
                        self.pipe_seq += 1;
                        self.pipe_seq - 1
                    };
                    self.objects.push(HeldObj {
                        id,
                        token: cx.mm.folios.get(id).token(),
                        reclaimable,
                        seq,
                    });
                }
            }
        });
        self.progress += n;
        if self.progress >= count {
            self.next();
        }
        Step::Ran(cx.alloc_work(&work).max(1))
    }
}

impl ProgramTask {
    /// `nr_hugepages`: `echo count > /proc/sys/vm/nr_hugepages` (`set_max_huge_pages`,
    /// docs/model §28.1) in one step: the step's time is the sysctl write (a context
    /// switch), the allocator work of its order-9 allocations (fast path, slow path with its
    /// compaction and reclaim, §28.2) and one `free_page_ns` per page given back. The pool size
    /// read back is kept for the result. Simplified: the kernel drops the resize lock and calls
    /// `cond_resched` between pages, so a long write shares its CPU; here it holds it.
    ///
    /// `count` is the pool the workload asks for on top of the pool the machine holds
    /// (`machine.hugetlb_pages`, the base): `base + count` is written, and the pool read back
    /// minus the base is reported, as the host engine does with its base (the machine's or
    /// `--fit-memory`'s pool). Without a machine pool the base is 0 and this is the plain write.
    fn nr_hugepages(&mut self, cx: &mut Cx, count: u64) -> Step {
        let base = self.hugetlb_base;
        let (r, work) = cx.measure(|cx| cx.mm.set_max_huge_pages(cx.cpu, base + count));
        *self.hugetlb_pool.borrow_mut() = Some(r.pool.saturating_sub(base));
        self.next();
        Step::Ran(cx.cost.context_switch_ns + cx.alloc_work(&work) + r.freed * cx.cost.free_page_ns)
    }
}

impl ProgramTask {
    /// `{ measure = true }` (phases): the first time any task runs it, the measured part of
    /// the run starts now: /proc/vmstat is read (the deltas of the result are taken from
    /// here) and the latency histograms restart.
    fn measure(&mut self, cx: &mut Cx) {
        let mut m = self.metrics.borrow_mut();
        if m.measure.is_none() {
            m.start_measuring(cx.now, crate::snapshot::vmstat_values(cx.mm));
        }
    }

    /// `{ sample = "NAME" }` (issue 33): the record a periodic sample is
    /// ([`crate::snapshot::sample`]) and the pageblock census of each zone
    /// ([`crate::snapshot::zone_census`]) now, kept for the result's `named_samples`. It takes
    /// no time (the host reads /proc/buddyinfo, pagetypeinfo and vmstat; not modelled).
    fn sample(&mut self, cx: &mut Cx, name: String) {
        let sample = crate::snapshot::sample(cx.mm, cx.now);
        let zones = crate::snapshot::zone_census(cx.mm);
        self.named.borrow_mut().push(NamedSample {
            name,
            task: self.name.clone(),
            instance: self.instance,
            sample,
            zones,
        });
    }

    /// `census`: the page-cache folio orders of `file` now ([`fraglab_mm::Mm::filemap_census`]),
    /// recorded for the result; the step itself takes a context switch (the host's mincore and
    /// /proc reads are not modelled).
    fn census(&mut self, cx: &mut Cx, file: String) -> Step {
        let mapping = self.files.borrow()[&file];
        let (pages_per_order, folios_per_order) = cx.mm.filemap_census(mapping);
        self.census.borrow_mut().push(CensusResult {
            task: self.name.clone(),
            file,
            at_ns: cx.now,
            pages_per_order,
            folios_per_order,
        });
        self.next();
        Step::Ran(cx.cost.context_switch_ns)
    }
}

impl TaskBody for ProgramTask {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::Program(self))
    }

    fn comm(&self) -> &str {
        &self.name
    }

    /// Program steps done of `loops` × the program's (a coarse unit: steps differ in length).
    fn progress(&self) -> Option<Progress> {
        let n = self.steps.len() as u64;
        let done = (self.loops - self.loops_left) as u64 * n + self.pc as u64;
        Some(Progress::work(done, self.loops as u64 * n))
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        use fraglab_spec::TaskStep as S;
        loop {
            if self.pc == self.steps.len() {
                self.loops_left -= 1;
                if self.loops_left == 0 {
                    let freed = self.release(cx);
                    return Step::Exit(freed * cx.cost.free_page_ns);
                }
                self.pc = 0;
            }
            // Phases: a `measure` step takes no time and runs with the step after it, so
            // that a run with the marker is the run without it; so does a `sample` step.
            match &self.steps[self.pc] {
                S::Measure => self.measure(cx),
                S::Sample { name } => {
                    let name = name.clone();
                    self.sample(cx, name);
                }
                _ => break,
            }
            self.next();
        }
        let step = self.steps[self.pc].clone();
        match step {
            S::Mmap {
                vma,
                size_bytes,
                madvise,
                locked,
            } => self.mmap(cx, vma, size_bytes, madvise, locked),
            S::Touch { vma, random, stride } => self.touch(cx, &vma, random, stride / 4096),
            S::Dontneed {
                vma,
                offset,
                length,
                stride,
            } => self.dontneed(cx, &vma, offset, length, stride),
            S::Munmap { vma } => {
                let freed = self.vmas.remove(&vma).map_or(0, |mut v| v.unmap(cx.mm, cx.cpu));
                self.next();
                Step::Ran(freed * cx.cost.free_page_ns + cx.cost.context_switch_ns)
            }
            S::Compute { ns } => self.compute(ns),
            S::Sleep { ns } => {
                self.next();
                Step::Sleep { ran: 0, sleep: ns }
            }
            S::Read {
                file,
                offset,
                length,
                file_size,
                random,
                ..
            } => self.read(cx, file, offset, length, file_size, random),
            S::Write {
                file,
                offset,
                length,
                chunk,
                ..
            } => self.write(cx, &file, offset, length, chunk),
            S::Slab { count, reclaimable } => self.slab(cx, count, reclaimable),
            S::CompactMemory => {
                let st = cx.mm.compact_memory();
                self.next();
                Step::Ran(cx.compaction(&st))
            }
            S::Delete { file } => {
                let mapping = self.files.borrow()[&file];
                let freed = cx.mm.filemap_truncate(cx.cpu, mapping);
                self.ra.remove(&file);
                self.next();
                Step::Ran(freed * cx.cost.free_page_ns)
            }
            S::NrHugepages { count } => self.nr_hugepages(cx, count),
            // mlock (H2, docs/model §29).
            S::Mlock { vma } => self.mlock(cx, &vma),
            S::Munlock { vma } => {
                if let Some(v) = self.vmas.get_mut(&vma) {
                    v.munlock(cx.mm);
                }
                self.next();
                Step::Ran(cx.cost.context_switch_ns)
            }
            S::Measure | S::Sample { .. } => unreachable!("run with the next step"),
            S::Free { reclaimable, every } => self.free(cx, reclaimable, every),
            S::FreePipePages { every } => self.free_pipe_pages(cx, every),
            S::Files {
                set,
                size_bytes,
                op,
                random,
                count,
                every,
                ..
            } => self.files_step(cx, &set, count, size_bytes, op, random, every),
            S::Fadvise {
                file,
                advice,
                offset,
                length,
            } => self.fadvise(cx, file, advice, offset, length),
            S::DropCaches => {
                // Writing 3: the page cache, then `drop_slab` (the deferred split shrinker at
                // priority 0, §31.3 item 3).
                let freed = cx.mm.drop_caches(cx.cpu);
                cx.mm.drop_slab(cx.cpu);
                self.next();
                Step::Ran(freed * cx.cost.free_page_ns)
            }
            // H5: the page-cache census.
            S::Census { file } => self.census(cx, file),
        }
    }
}

/// The `[[workload.task]]` entries: the files their programs name (one XFS-like mapping per
/// file name, shared by every task of the run), then `count` tasks per entry, started at
/// `start`.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Programs {
    params: Vec<TaskParams>,
    #[serde(with = "crate::checkpoint::shared")]
    hugetlb_pool: Shared<Option<u64>>,
    #[serde(with = "crate::checkpoint::shared")]
    census: Shared<Vec<CensusResult>>,
    #[serde(with = "crate::checkpoint::shared")]
    reads: Shared<BTreeMap<(String, u32), (u64, u64)>>,
    #[serde(with = "crate::checkpoint::shared")]
    named: Shared<Vec<NamedSample>>,
}

impl Programs {
    pub fn new(params: &[TaskParams]) -> Programs {
        Programs {
            params: params.to_vec(),
            hugetlb_pool: Default::default(),
            census: Default::default(),
            reads: Default::default(),
            named: Default::default(),
        }
    }
}

impl Generator for Programs {
    fn saved(&self) -> Option<crate::checkpoint::GeneratorRef<'_>> {
        Some(crate::checkpoint::GeneratorRef::Programs(self))
    }

    fn spawn(&mut self, run: &mut Run<'_>) {
        let files = Rc::new(RefCell::new(BTreeMap::new()));
        let sets: Shared<FileSets> = Default::default();
        // A file's kind: the one its read, write and files steps carry (the parser made them
        // agree), XFS-like for a file only deleted or advised.
        let kind_of = |name: &str| {
            self.params
                .iter()
                .flat_map(|t| &t.steps)
                .filter_map(TaskStep::file)
                .find_map(|(f, k)| if f == name { k } else { None })
                .unwrap_or(MappingKind::Xfs)
        };
        for t in &self.params {
            for s in &t.steps {
                if let TaskStep::Read { file, .. }
                | TaskStep::Write { file, .. }
                | TaskStep::Delete { file }
                | TaskStep::Fadvise { file, .. } = s
                {
                    if !files.borrow().contains_key(file) {
                        let id = run.e.mm.add_mapping(mapping_of(kind_of(file)));
                        files.borrow_mut().insert(file.clone(), id);
                    }
                    let end = match s {
                        TaskStep::Read { file_size, .. } => file_size.div_ceil(4096),
                        TaskStep::Write { offset, length, .. } => (offset + length).div_ceil(4096),
                        _ => 0,
                    };
                    let mut sh = sets.borrow_mut();
                    let e = sh.file_pages.entry(file.clone()).or_default();
                    *e = (*e).max(end);
                }
                if let TaskStep::Files { set, count, .. } = s {
                    let mut sh = sets.borrow_mut();
                    let fs = sh.sets.entry(set.clone()).or_default();
                    // One mapping per file (each file its own address_space), made for the
                    // largest count any step names.
                    while (fs.mappings.len() as u64) < *count {
                        fs.mappings.push(run.e.mm.add_mapping(mapping_of(kind_of(set))));
                        fs.objs.push(None);
                        fs.inos.push(None);
                    }
                }
            }
        }
        // Kernel-model.md §33: the filesystems that keep the files' metadata, mounted after
        // the files' mappings are registered; each set's directory is made now, as the host
        // engine makes it before the run (crates/host run.rs `create_files`).
        for (name, fs) in sets.borrow_mut().sets.iter_mut() {
            if let Some(e) = run.ext4_for(Some(kind_of(name))) {
                fs.meta = Some((e, run.e.mm.ext4_mkdir(0, e, 0, false)));
            }
        }
        let slab_files = self.params.iter().any(|t| {
            t.steps.iter().any(|s| {
                matches!(
                    s,
                    TaskStep::Slab {
                        reclaimable: true,
                        ..
                    }
                )
            })
        });
        if slab_files {
            sets.borrow_mut().slab_fs = run.ext4_for(None);
        }
        let any_write = self.params.iter().any(|t| {
            t.steps.iter().any(|s| {
                matches!(
                    s,
                    TaskStep::Write { .. }
                        | TaskStep::Files {
                            op: FilesOp::Create,
                            ..
                        }
                )
            })
        });
        // Task ids per entry; the instances of an entry with `after` are gated on the
        // instances of every entry of that name, and start `start` after the last exits.
        let mut ids = Vec::new();
        for t in &self.params {
            let mut mine = Vec::new();
            for i in 0..t.count {
                let mut task = ProgramTask::new(t, files.clone(), run.metrics.clone());
                task.sets = sets.clone();
                task.hugetlb_pool = self.hugetlb_pool.clone();
                task.hugetlb_base = run.spec.machine.hugetlb_pages;
                task.instance = i;
                task.census = self.census.clone();
                task.reads = self.reads.clone();
                task.named = self.named.clone();
                run.bind(t.numa);
                let id = match t.after {
                    None => run.e.spawn_at(t.start_ns, Box::new(task)),
                    Some(_) => run.e.spawn_gated(Box::new(task)),
                };
                run.unbind();
                if t.background {
                    run.e.set_daemon(id);
                }
                mine.push(id);
            }
            ids.push(mine);
        }
        for (t, mine) in self.params.iter().zip(&ids) {
            let Some(after) = &t.after else { continue };
            let deps: Vec<_> = self
                .params
                .iter()
                .zip(&ids)
                .filter(|(u, _)| u.name == *after)
                .flat_map(|(_, d)| d.iter().copied())
                .collect();
            for &id in mine {
                run.e.gate(id, deps.clone(), t.start_ns);
            }
        }
        if any_write {
            run.spawn_flusher();
        }
    }

    /// After a `nr_hugepages` step ran: the pool size it read back, as the text of
    /// /proc/sys/vm/nr_hugepages in `proc_end["nr_hugepages"]` (the counters are in the
    /// vmstat delta: `htlb_buddy_alloc_success`, `htlb_buddy_alloc_fail`).
    fn result(&self, _metrics: &Metrics, r: &mut fraglab_spec::result::RunResult) {
        if let Some(pool) = *self.hugetlb_pool.borrow() {
            r.proc_end.insert("nr_hugepages".into(), format!("{pool}\n"));
        }
        // H5: census steps in the order they ran, and the read time of every instance that
        // finished a read step.
        r.census.extend(self.census.borrow().iter().cloned());
        // Issue 33: the named samples in the order they were taken.
        r.named_samples.extend(self.named.borrow().iter().cloned());
        r.task_reads
            .extend(
                self.reads
                    .borrow()
                    .iter()
                    .map(|((task, instance), (bytes, ns))| TaskReadResult {
                        task: task.clone(),
                        instance: *instance,
                        bytes: *bytes,
                        ns: *ns,
                    }),
            );
    }
}

/// The page-cache mapping of a file of this kind.
fn mapping_of(kind: MappingKind) -> fraglab_mm::filemap::Mapping {
    use fraglab_mm::filemap::Mapping;
    match kind {
        MappingKind::Xfs => Mapping::xfs_like(),
        MappingKind::LargeFolios => Mapping::large_folios(),
        MappingKind::NoLargeFolios => Mapping::no_large_folios(),
    }
}

/// Files of `files` steps a task program handles in one engine step.
const FILES_PER_STEP: u64 = 16;

/// Empty files the host engine creates per slab page a `slab` step asks for (crates/host
/// worker.rs `FILES_PER_SLAB_PAGE`: an ext4 inode and its dentry are about a third of a page):
/// the files whose metadata the simulator's `slab` step makes (docs/model §33).
const FILES_PER_SLAB_PAGE: u64 = 3;

/// Pipe-buffer pages of one pipe on the host (F_SETPIPE_SZ 1 MiB): a `free = "pipes"` step
/// frees whole pipes, every Nth group of this many of the task's pipe pages.
pub const PIPE_PAGES: u64 = 256;

/// The file sets of the run's `files` steps, their files' dentries and inodes, and the sizes of
/// the single files (for `fadvise` ranges).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FileSets {
    sets: BTreeMap<String, FileSet>,
    /// The files' dentries and inodes (unused objects of closed files on the dcache and inode
    /// LRUs, shrinkable, as fio's: `fio.rs`).
    dentry: SlabCache,
    inode: SlabCache,
    /// Single files (read, write, delete, fadvise steps): size in pages as the steps know it
    /// (a read's `file_size`, a write's end).
    file_pages: BTreeMap<String, u64>,
    /// The ext4 filesystem of the run directory, whose metadata the `slab` steps' files make
    /// (`Run::ext4_for`; `None`: not block-device page cache).
    slab_fs: Option<u32>,
}

impl Default for FileSets {
    fn default() -> Self {
        FileSets {
            sets: BTreeMap::new(),
            dentry: SlabCache::new("dentry", 0, 21, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)).shrinkable(),
            inode: SlabCache::new("xfs_inode", 3, 28, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)).shrinkable(),
            file_pages: BTreeMap::new(),
            slab_fs: None,
        }
    }
}

/// One file set: per file its mapping and, while it exists in the cache, its dentry and inode;
/// on ext4 (docs/model §33) the set's filesystem and directory, and per file its inode
/// while the file exists on disk.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct FileSet {
    mappings: Vec<u32>,
    objs: Vec<Option<(Obj, Obj)>>,
    meta: Option<(u32, u32)>,
    inos: Vec<Option<u32>>,
}

/// Issue 19 item 3: `free`, `files`, `fadvise`.
impl ProgramTask {
    /// `free`: frees every `every`th object of this task's `slab` (reclaimable) or `pipes`
    /// population now, in allocation order (the `every`th, `2·every`th, ...). A `slab` object
    /// is one page of reclaimable slab (as the `slab` step models dentries and inodes: the
    /// host unlinks every Nth of its files, `kmem_cache_free` of their dentries and inodes;
    /// simplified: here whole pages go, on the host objects go and a slab page is freed only
    /// when all its objects are); a `pipes` object is one pipe of [`PIPE_PAGES`] pages
    /// (closing a pipe frees its buffers, `free_pipe_info`), as the host closes every Nth
    /// pipe. Objects the shrinker already took count in the order but free nothing.
    fn free(&mut self, cx: &mut Cx, reclaimable: bool, every: u64) -> Step {
        let unit = if reclaimable { 1 } else { PIPE_PAGES };
        let mut k = 0u64;
        let mut freed = 0u64;
        let mut kept = Vec::with_capacity(self.objects.len());
        for o in std::mem::take(&mut self.objects) {
            if o.reclaimable == reclaimable {
                let group = k / unit;
                k += 1;
                if (group + 1).is_multiple_of(every) {
                    if cx.mm.folio_is(o.id, o.token) {
                        cx.mm.free_folio(cx.cpu, o.id);
                        freed += 1;
                    }
                    continue;
                }
            }
            kept.push(o);
        }
        self.objects = kept;
        if reclaimable {
            // The host unlinks every `every`th of the `slab` files in creation order (worker.rs
            // `free_every`): their directory entries, inodes and inode bitmap bits go
            // (docs/model §33.3 item 5; the dentry is cached, the file was just made).
            let mut k = 0u64;
            self.slab_files.retain(|&(fs, dir, key, ino)| {
                k += 1;
                if !k.is_multiple_of(every) {
                    return true;
                }
                cx.mm
                    .ext4_unlink(cx.cpu, fs, dir, key, decimal_len(key), ino, false, true);
                false
            });
        }
        self.next();
        Step::Ran(cx.cost.context_switch_ns + freed * cx.cost.free_page_ns)
    }

    /// `{ free = "pipes", every_page = N }` (issue 33): frees the pipe-buffer pages of this
    /// task whose place in its pipe population is a multiple of `every` (the `every`th,
    /// `2·every`th, ... page its `pipes` steps allocated, from 1; a page freed before keeps its
    /// place, so a second step frees only pages the first left). A pipe-buffer page is an
    /// order-0 unmovable allocation (`anon_pipe_get_page`: GFP_HIGHUSER | __GFP_ACCOUNT), and
    /// it goes back to the allocator when its pipe is closed (`free_pipe_info` releases every
    /// buffer and the cached `tmp_page`s). Reading it out would free it too, but only in
    /// order from the head of its pipe, and `anon_pipe_put_page` keeps the first two pages a
    /// pipe releases (`tmp_page[2]`) for its next writes; so the host engine does not read:
    /// it fills `TaskParams::pipe_lanes` pipes side by side (page k in lane k mod lanes) and
    /// closes the lanes whose pages are the ones to go. Simplified: the pipes' own kernel
    /// objects (inode, pipe_inode_info, the buffer ring) are not modelled, as for `pipes`.
    fn free_pipe_pages(&mut self, cx: &mut Cx, every: u64) -> Step {
        let mut freed = 0u64;
        let mut kept = Vec::with_capacity(self.objects.len());
        for o in std::mem::take(&mut self.objects) {
            if !o.reclaimable && (o.seq + 1).is_multiple_of(every) {
                if cx.mm.folio_is(o.id, o.token) {
                    cx.mm.free_folio(cx.cpu, o.id);
                    freed += 1;
                }
                continue;
            }
            kept.push(o);
        }
        self.objects = kept;
        self.next();
        Step::Ran(cx.cost.context_switch_ns + freed * cx.cost.free_page_ns)
    }

    /// `files`: up to [`FILES_PER_STEP`] files of set `set` per engine step, in order or in a
    /// random order (a shuffle drawn at the step's start). Create: a dentry and an inode
    /// (`d_alloc`, `alloc_inode`; an existing file is truncated first, O_TRUNC) and a buffered
    /// write of the file (iomap, §12.3), throttled above the dirty limit; read: the file read
    /// whole with a readahead state fresh from the open (`file_ra_state_init`, §23.1), its
    /// dentry and inode looked up if not cached; delete: unlink (its page cache truncated,
    /// dirty pages dropped, dentry and inode freed). With `every` (issue 33, delete only) the
    /// step takes the set's every `every`th file ([`TaskStep::files_selected`]), in order or
    /// shuffled.
    #[allow(clippy::too_many_arguments)]
    fn files_step(
        &mut self,
        cx: &mut Cx,
        set: &str,
        count: u64,
        size: u64,
        op: FilesOp,
        random: bool,
        every: u64,
    ) -> Step {
        if op == FilesOp::Create && cx.mm.dirty_exceeded() {
            return Step::Sleep {
                ran: 0,
                sleep: 10 * MS,
            };
        }
        // The files the step takes: all of them, or every `every`th.
        let total = count / every;
        if random && self.order.is_empty() {
            let mut o: Vec<u64> = TaskStep::files_selected(count, every).collect();
            for i in (1..o.len()).rev() {
                o.swap(i, cx.rng.gen_range(0..=i));
            }
            self.order = o;
        }
        let pages = size.div_ceil(4096);
        let mut sh = self.sets.borrow_mut();
        let FileSets {
            sets, dentry, inode, ..
        } = &mut *sh;
        let fs = sets.get_mut(set).expect("registered at spawn");
        let meta = fs.meta;
        let data = size > 0;
        let mut ns = 0;
        let mut rs = fraglab_mm::filemap::ReadStats::default();
        let (n, work) = cx.measure(|cx| {
            let mut n = 0;
            while n < FILES_PER_STEP && self.progress < total {
                let i = if random {
                    self.order[self.progress as usize]
                } else {
                    self.progress * every + every - 1
                } as usize;
                self.progress += 1;
                n += 1;
                let m = fs.mappings[i];
                let (key, name_len) = (i as u64, decimal_len(i as u64));
                match op {
                    FilesOp::Create => {
                        let cached = fs.objs[i].is_some();
                        if cached {
                            ns += cx.mm.filemap_truncate(cx.cpu, m) * cx.cost.free_page_ns;
                        } else {
                            fs.objs[i] = alloc_file_objs(dentry, inode, cx.mm, cx.cpu);
                        }
                        // §33: a new file's inode, bitmaps and directory entry; an existing
                        // one is looked up if uncached and truncated (O_TRUNC).
                        if let Some((e, dir)) = meta {
                            match fs.inos[i] {
                                Some(ino) => {
                                    if !cached {
                                        cx.mm.ext4_lookup(cx.cpu, e, dir, key, Some(ino));
                                    }
                                    cx.mm.ext4_truncate(cx.cpu, e, ino, data);
                                }
                                None => {
                                    let ino = cx.mm.ext4_create(cx.cpu, e, dir, key, name_len, data, false);
                                    fs.inos[i] = Some(ino);
                                }
                            }
                        }
                        ns += cx.cost.file_create_ns;
                        let st = cx.mm.filemap_write(cx.cpu, m, 0, size);
                        ns += write_cost(cx, &st, pages);
                    }
                    FilesOp::Read => {
                        if fs.objs[i].is_none() {
                            fs.objs[i] = alloc_file_objs(dentry, inode, cx.mm, cx.cpu);
                            // §33: the lookup reads the directory block and the inode-table
                            // block (with readahead) if uncached; a file no step created was
                            // on disk before the run (the host makes the sets read first).
                            if let Some((e, dir)) = meta {
                                let ino = match fs.inos[i] {
                                    Some(ino) => ino,
                                    None => cx.mm.ext4_create(cx.cpu, e, dir, key, name_len, data, true),
                                };
                                fs.inos[i] = Some(ino);
                                cx.mm.ext4_lookup(cx.cpu, e, dir, key, Some(ino));
                            }
                        }
                        let mut ra = cx.mm.file_ra_state_init();
                        let mut p = 0;
                        while p < pages {
                            let req = (pages - p).min(READ_CALL_PAGES);
                            let st = cx.mm.filemap_read(cx.cpu, m, &mut ra, p, req, pages);
                            rs.add(&st);
                            p += req;
                        }
                        ns += pages * cx.cost.free_page_ns;
                    }
                    FilesOp::Delete => {
                        let mut dentry_cached = false;
                        let existed = fs.objs[i].take().map(|(d, ino)| {
                            dentry_cached = dentry.free(cx.mm, cx.cpu, d);
                            inode.free(cx.mm, cx.cpu, ino);
                        });
                        // §33.3 item 5: the entry, inode and bitmaps are modified (journalled).
                        if let (Some((e, dir)), Some(ino)) = (meta, fs.inos[i].take()) {
                            cx.mm
                                .ext4_unlink(cx.cpu, e, dir, key, name_len, ino, data, dentry_cached);
                        }
                        let freed = cx.mm.filemap_truncate(cx.cpu, m);
                        if existed.is_some() || freed > 0 {
                            ns += cx.cost.file_unlink_ns + freed * cx.cost.free_page_ns;
                        }
                    }
                }
            }
            n
        });
        drop(sh);
        if self.progress >= total {
            self.next();
        }
        let ns = (ns + cx.alloc_work(&work)).max(n).max(1);
        // The device (cost.rs `read_wait`): each cold file is read by its own readahead
        // requests, as the `read` step's are; the step waits for the ones it issued.
        let sleep = cx.cost.read_wait(&rs, cx.now + ns, &mut self.read_ready_at);
        if sleep > 0 {
            Step::Sleep { ran: ns, sleep }
        } else {
            Step::Ran(ns)
        }
    }

    /// `fadvise` (mm/fadvise.c `generic_fadvise`, docs/model §23.6) on this task's open
    /// file (its readahead state, kept across its steps): SEQUENTIAL doubles the file's
    /// `ra_pages` (2 × the device's) and clears FMODE_RANDOM; RANDOM sets FMODE_RANDOM (a miss
    /// reads just the request, §23.3 item 2); NORMAL restores the device's `ra_pages` and
    /// clears it; WILLNEED reads the range at min order (`force_page_cache_ra`, capped at
    /// max(`io_pages`, `ra_pages`), no marker, the state untouched); DONTNEED starts the writeback of the
    /// range's dirty pages and invalidates the clean pages wholly in the range
    /// (`mapping_try_invalidate`; the pages just written stay: see
    /// [`fraglab_mm::Mm::fadvise_dontneed`]). `length` `None` = to the end of the
    /// file (its size as the read and write steps know it).
    fn fadvise(
        &mut self,
        cx: &mut Cx,
        file: String,
        advice: Fadvice,
        offset: u64,
        length: Option<u64>,
    ) -> Step {
        let mapping = self.files.borrow()[&file];
        let file_pages = self.sets.borrow().file_pages.get(&file).copied().unwrap_or(0);
        let bdi = cx.mm.file_ra_state_init().ra_pages;
        let init = cx.mm.file_ra_state_init();
        let ra = self.ra.entry(file).or_insert(init);
        let mut ns = cx.cost.context_switch_ns;
        match advice {
            Fadvice::Normal => {
                ra.ra_pages = bdi;
                ra.random = false;
            }
            Fadvice::Random => ra.random = true,
            Fadvice::Sequential => {
                ra.ra_pages = 2 * bdi;
                ra.random = false;
            }
            Fadvice::Willneed => {
                let first = offset / 4096;
                let nr = match length {
                    Some(l) => (offset + l - 1) / 4096 + 1 - first,
                    None => u64::MAX - first,
                };
                let ra = *ra;
                let (_, work) = cx.measure(|cx| {
                    cx.mm
                        .force_page_cache_ra(cx.cpu, mapping, &ra, first, nr, file_pages)
                });
                ns += cx.alloc_work(&work);
            }
            Fadvice::Dontneed => {
                let first = offset.div_ceil(4096);
                let end = match length {
                    Some(l) => (offset + l) / 4096,
                    None => u64::MAX,
                };
                let freed = cx
                    .mm
                    .fadvise_dontneed(cx.cpu, mapping, first, end.saturating_sub(first));
                ns += freed * cx.cost.free_page_ns;
            }
        }
        self.next();
        Step::Ran(ns)
    }
}
