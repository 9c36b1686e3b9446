//! Workload generators as engine tasks: the THP burst process ("Hugealloc" of seed 001) and a
//! parallel kernel build (`kbuild`), built from the primitives a workload has — anonymous
//! mappings ([`AnonVma`]), page-cache reads and writes, kernel stacks, reclaimable slab — each
//! charged through the [`crate::cost::CostModel`].
//!
//! Simplifications (until the page-cache read/write paths of kernel-model.md §12 are wired
//! here): a source-file read allocates order-0 page-cache folios directly; object files are
//! order-0 dirty page-cache folios cleaned by a simple flusher (every 5 s, folios dirty for
//! 30 s: `dirty_writeback_centisecs` = 500, `dirty_expire_centisecs` = 3000).

use std::cell::RefCell;
use std::rc::Rc;

use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::slowpath::WorkSum;
use fraglab_mm::{Gfp, Mm};
use rand::Rng;

use crate::anon::{AllocPath, AnonVma, Touch};
use crate::cost::CostModel;
use crate::engine::{Cx, Step, TaskBody, MS, SEC};
use crate::metrics::{Build, Burst, Metrics};
use crate::slab::{Obj, SlabCache};

pub type Shared<T> = Rc<RefCell<T>>;

fn still_ours(mm: &Mm, id: FolioId, token: u64) -> bool {
    mm.folios
        .folios
        .get(id as usize)
        .is_some_and(|f| f.live && f.token == token)
}

/// The cost of a fault that mapped an order-`order` folio (zeroed) after `work`.
pub fn fault_cost(cost: &CostModel, order: u32, pt: bool, work: &WorkSum) -> u64 {
    cost.fault_base_ns
        + (1u64 << order) * cost.zero_page_ns
        + (pt as u64) * cost.zero_page_ns
        + cost.alloc_work(work)
}

/// Touches every page of `[start, start+n)` of `vma`, recording each fault. Returns the time
/// charged and whether any fault mapped a PMD THP.
fn touch_range(cx: &mut Cx, vma: &mut AnonVma, start: u64, n: u64, metrics: &mut Metrics) -> (u64, u64) {
    let mut ns = 0;
    let mut huge = 0;
    for p in start..(start + n).min(vma.nr_pages) {
        match vma.touch(cx.mm, cx.cpu, p) {
            Touch::Hit => {}
            Touch::Fault { order, pt, work } => {
                let c = fault_cost(cx.cost, order, pt, &work);
                metrics.fault(order, AllocPath::of(&work), c);
                ns += c;
                huge += (order == fraglab_mm::types::HPAGE_PMD_ORDER) as u64;
            }
            Touch::Failed { work } => {
                metrics.failed_faults += 1;
                ns += cx.cost.fault_base_ns + cx.cost.alloc_work(&work);
            }
        }
    }
    (ns, huge)
}

/// Parameters of the THP burst process.
#[derive(Clone, Debug, PartialEq)]
pub struct ThpBurstSpec {
    /// Time between the starts of two bursts.
    pub interval_ns: u64,
    /// Memory faulted in per burst (pages; a multiple of 512).
    pub pages: u64,
    /// How long a burst's memory is held before it is unmapped.
    pub hold_ns: u64,
    /// Number of bursts.
    pub bursts: u32,
    /// Delay before the first burst.
    pub start_ns: u64,
    /// Whether the burst's region is madvised (`MADV_HUGEPAGE`).
    pub madvised: bool,
}

enum BurstPhase {
    Idle,
    Faulting { vma: AnonVma, next: u64 },
    Holding { vma: AnonVma },
}

/// The "Hugealloc" process of seed 001: bursts of THP faults (madvised unless the spec says
/// otherwise); each 2 MiB region is
/// faulted in one step (the whole region is written, as the burst's memset does, so a fallback
/// to base pages costs 512 faults).
pub struct ThpBurst {
    spec: ThpBurstSpec,
    phase: BurstPhase,
    done: u32,
    next_start: u64,
    metrics: Shared<Metrics>,
}

impl ThpBurst {
    pub fn new(spec: ThpBurstSpec, metrics: Shared<Metrics>) -> ThpBurst {
        ThpBurst {
            next_start: spec.start_ns,
            spec,
            phase: BurstPhase::Idle,
            done: 0,
            metrics,
        }
    }
}

impl TaskBody for ThpBurst {
    fn comm(&self) -> &str {
        "thp_burst"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        match std::mem::replace(&mut self.phase, BurstPhase::Idle) {
            BurstPhase::Idle => {
                if self.done == self.spec.bursts {
                    return Step::Exit(0);
                }
                if cx.now < self.next_start {
                    return Step::Sleep {
                        ran: 0,
                        sleep: self.next_start - cx.now,
                    };
                }
                self.metrics.borrow_mut().bursts.push(Burst {
                    start_ns: cx.now,
                    ..Default::default()
                });
                self.phase = BurstPhase::Faulting {
                    vma: AnonVma::new(self.spec.pages, self.spec.madvised),
                    next: 0,
                };
                Step::Ran(0)
            }
            BurstPhase::Faulting { mut vma, next } => {
                let mut m = self.metrics.borrow_mut();
                let (ns, huge) = touch_range(
                    cx,
                    &mut vma,
                    next,
                    1u64 << fraglab_mm::types::HPAGE_PMD_ORDER,
                    &mut m,
                );
                let b = m.bursts.last_mut().expect("burst started");
                b.alloc_ns += ns;
                b.faults += 1;
                b.huge += huge;
                let next = next + (1u64 << fraglab_mm::types::HPAGE_PMD_ORDER);
                self.phase = if next >= vma.nr_pages {
                    BurstPhase::Holding { vma }
                } else {
                    BurstPhase::Faulting { vma, next }
                };
                Step::Ran(ns)
            }
            BurstPhase::Holding { mut vma } => {
                if cx.now < self.next_start + self.spec.hold_ns {
                    let sleep = self.next_start + self.spec.hold_ns - cx.now;
                    self.phase = BurstPhase::Holding { vma };
                    return Step::Sleep { ran: 0, sleep };
                }
                let freed = vma.unmap(cx.mm, cx.cpu);
                self.done += 1;
                self.next_start += self.spec.interval_ns;
                Step::Ran(freed * cx.cost.free_page_ns)
            }
        }
    }
}

/// Parameters of a parallel kernel build (make -jN).
#[derive(Clone, Debug, PartialEq)]
pub struct KbuildSpec {
    /// Parallel compile jobs (make -j).
    pub jobs_parallel: u32,
    /// Compile jobs per build.
    pub jobs: u32,
    /// Builds run one after the other (mmtests iterations).
    pub iterations: u32,
    /// Private anonymous memory a compile job touches (pages; each job draws 50–150 %).
    pub job_anon_pages: u64,
    /// CPU time of a compile job's own work.
    pub job_cpu_ns: u64,
    /// Pages of the source tree (shared page cache) and pages a job reads from it.
    pub source_pages: u64,
    pub job_read_pages: u64,
    /// Reclaimable slab (dentries, inodes) a job allocates, and the object file it writes.
    pub job_slab_pages: u64,
    pub job_obj_pages: u64,
    /// Pages of one source file (the tree is `source_pages / source_file_pages` files).
    pub source_file_pages: u64,
    /// Each build first unpacks its tree afresh (`KbuildParams::untar`), keeping the trees of
    /// the last `trees` builds.
    pub untar: bool,
    pub trees: u32,
}

/// A source tree on disk: its page cache (one large-folio mapping, ext4 on 6.18), the dentry
/// and inode of each file (created at the file's first lookup, or by the untar), and, with
/// `untar`, the object files built in it (their pages and dentries/inodes, deleted with it).
struct Tree {
    mapping: u32,
    objs: Vec<Option<(Obj, Obj)>>,
    objects: Vec<(FolioId, u64, u64)>,
    obj_file_objs: Vec<(Obj, Obj)>,
}

/// A new file's dentry and inode (`d_alloc` and the filesystem's `alloc_inode`), or neither:
/// when one of the two slab allocations fails the other object is freed again, as the
/// kernel's error path does before the create or lookup fails.
fn alloc_file_objs(
    dentry: &mut SlabCache,
    inode: &mut SlabCache,
    mm: &mut Mm,
    cpu: u32,
) -> Option<(Obj, Obj)> {
    let d = dentry.alloc(mm, cpu);
    let i = inode.alloc(mm, cpu);
    match (d, i) {
        (Some(d), Some(i)) => return Some((d, i)),
        (Some(d), None) => {
            dentry.free(mm, cpu, d);
        }
        (None, Some(i)) => {
            inode.free(mm, cpu, i);
        }
        (None, None) => {}
    }
    None
}

/// State shared by a build's workers.
pub struct KbuildShared {
    spec: KbuildSpec,
    next_job: u32,
    iteration: u32,
    running: u32,
    /// The source trees (one, or `trees` with `untar`) and the one this build uses.
    trees: Vec<Tree>,
    cur: usize,
    /// With `untar`: the tarball (a file as large as the tree, read sequentially) and its
    /// readahead state; whether this build's tree is unpacked, or being unpacked.
    tarball: Option<u32>,
    tar_ra: fraglab_mm::filemap::ReadaheadState,
    untarred: bool,
    untarring: bool,
    /// Each CPU's cached kernel stacks (`cached_stacks`), by CPU.
    stack_cache: std::collections::BTreeMap<u32, Vec<Vec<(FolioId, u64)>>>,
    /// Object-file pages written: (folio, token, dirtied at).
    objects: Vec<(FolioId, u64, u64)>,
    /// Dentry/inode slab kept as cache (freed oldest first beyond a bound).
    slab: std::collections::VecDeque<(FolioId, u64)>,
    /// Kernel objects in slab caches (`crate::slab`): the source tree's dentries and inodes
    /// (created at a file's first read, kept for the run: the tree stays hot), each job's
    /// process objects (task_struct, vm_area_structs and the like, unmovable) and the object
    /// files' dentries and inodes (deleted by "make clean" after each build).
    pub dentry: SlabCache,
    pub inode: SlabCache,
    pub task: SlabCache,
    pub vma: SlabCache,
    obj_file_objs: Vec<(Obj, Obj)>,
    metrics: Shared<Metrics>,
}

impl KbuildShared {
    /// Registers the source tree's mapping in `mm`.
    pub fn new(mm: &mut Mm, spec: KbuildSpec, metrics: Shared<Metrics>) -> Shared<KbuildShared> {
        let files = (spec.source_pages / spec.source_file_pages.max(1)).max(1) as usize;
        let n = if spec.untar { spec.trees.max(1) } else { 1 };
        let trees = (0..n)
            .map(|_| {
                let mapping = mm.add_mapping(fraglab_mm::filemap::Mapping::large_folios());
                // Each source file has its own xarray.
                mm.xa_set_file_pages(mapping, spec.source_file_pages.max(1));
                Tree {
                    mapping,
                    objs: vec![None; files],
                    objects: Vec::new(),
                    obj_file_objs: Vec::new(),
                }
            })
            .collect();
        let tarball = spec
            .untar
            .then(|| mm.add_mapping(fraglab_mm::filemap::Mapping::large_folios()));
        Rc::new(RefCell::new(KbuildShared {
            trees,
            cur: 0,
            tarball,
            tar_ra: Default::default(),
            untarred: false,
            untarring: false,
            stack_cache: Default::default(),
            next_job: 0,
            iteration: 0,
            running: 0,
            objects: Vec::new(),
            slab: Default::default(),
            // dentry: 192-byte objects, 21 per order-0 slab; ext4_inode_cache: ~1.1 KiB,
            // 28 per order-3 slab; task_struct: ~10 KiB, 3 per order-3 slab; vm_area_struct:
            // 192 bytes, 21 per order-0 slab (the sizes of a 6.18 x86-64 /proc/slabinfo).
            dentry: SlabCache::new("dentry", 0, 21, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)),
            inode: SlabCache::new("ext4_inode_cache", 3, 28, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)),
            task: SlabCache::new("task_struct", 3, 3, Gfp::GFP_KERNEL.union(Gfp::ACCOUNT)),
            vma: SlabCache::new("vm_area_struct", 0, 21, Gfp::GFP_KERNEL.union(Gfp::ACCOUNT)),
            obj_file_objs: Vec::new(),
            spec,
            metrics,
        }))
    }

    /// Whether every build has finished.
    pub fn finished(&self) -> bool {
        self.iteration == self.spec.iterations
    }

    /// `rm -rf` of tree `t` before a new one is unpacked in its place: its page cache is
    /// truncated (dirty pages unwritten) and its files' and object files' dentries and inodes
    /// are freed (`evict` at the last `iput`; simplified: at once, not via the LRU).
    fn delete_tree(&mut self, mm: &mut fraglab_mm::Mm, cpu: u32, t: usize) {
        let tree = &mut self.trees[t];
        mm.filemap_truncate(cpu, tree.mapping);
        for (id, tok, _) in std::mem::take(&mut tree.objects) {
            if still_ours(mm, id, tok) {
                mm.free_folio(cpu, id);
            }
        }
        let objs: Vec<(Obj, Obj)> = tree
            .objs
            .iter_mut()
            .filter_map(Option::take)
            .chain(std::mem::take(&mut tree.obj_file_objs))
            .collect();
        for (d, i) in objs {
            self.dentry.free(mm, cpu, d);
            self.inode.free(mm, cpu, i);
        }
    }
}

enum JobPhase {
    /// Waiting for a job (or for the other workers to finish the build).
    Take,
    /// Unpacking this build's tree (`untar`): the next file to create.
    Untar {
        file: u64,
    },
    Start,
    Touch {
        vma: AnonVma,
        next: u64,
    },
    Read {
        vma: AnonVma,
        left: u64,
    },
    Slab {
        vma: AnonVma,
        left: u64,
    },
    Write {
        vma: AnonVma,
        left: u64,
    },
    Compute {
        vma: AnonVma,
        left_ns: u64,
    },
    Exit {
        vma: AnonVma,
    },
}

/// One `make -jN` worker: runs compile jobs one after the other.
pub struct KbuildWorker {
    shared: Shared<KbuildShared>,
    phase: JobPhase,
    /// This job's kernel stack: its pages (folio, token).
    stack: Vec<(FolioId, u64)>,
    /// This job's process objects (task_struct, vm_area_structs), freed at exit.
    kobjs: Vec<(bool, Obj)>,
}

impl KbuildWorker {
    pub fn new(shared: Shared<KbuildShared>) -> KbuildWorker {
        KbuildWorker {
            shared,
            phase: JobPhase::Take,
            stack: Vec::new(),
            kobjs: Vec::new(),
        }
    }
}

/// Pages touched, read or written per step, so that workers interleave.
const CHUNK: u64 = 64;
/// Small unmovable kernel objects of one compile process (vm_area_structs, anon_vmas, files,
/// signal and mm state), from 192-byte slabs.
const JOB_KERNEL_OBJECTS: u32 = 40;
/// Pages of a kernel stack (THREAD_SIZE 16 KiB on x86-64).
const STACK_PAGES: usize = 4;
/// `NR_CACHED_STACKS` (kernel/fork.c): freed vmap stacks each CPU keeps for the next fork.
const NR_CACHED_STACKS: usize = 2;

impl TaskBody for KbuildWorker {
    fn comm(&self) -> &str {
        "cc1"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let shared = self.shared.clone();
        let mut sh = shared.borrow_mut();
        let spec = sh.spec.clone();
        let sys = |work: &WorkSum, cx: &Cx| cx.cost.alloc_work(work);
        match std::mem::replace(&mut self.phase, JobPhase::Take) {
            JobPhase::Take => {
                if sh.finished() {
                    return Step::Exit(0);
                }
                if sh.next_job == spec.jobs {
                    if sh.running == 0 {
                        // The build is over: record it and start the next one ("make clean"
                        // deletes the objects; with `untar` they stay in their tree until it
                        // is deleted).
                        let mut m = sh.metrics.borrow_mut();
                        let b = m.builds.last_mut().expect("build started");
                        b.end_ns = cx.now;
                        b.stats_delta = cx
                            .mm
                            .stats
                            .iter()
                            .zip(&b.stats_start)
                            .map(|(a, s)| *a as i64 - *s as i64)
                            .collect();
                        drop(m);
                        let objs = std::mem::take(&mut sh.objects);
                        let files = std::mem::take(&mut sh.obj_file_objs);
                        if spec.untar {
                            let cur = sh.cur;
                            sh.trees[cur].objects.extend(objs);
                            sh.trees[cur].obj_file_objs.extend(files);
                            sh.cur = (cur + 1) % sh.trees.len();
                            sh.untarred = false;
                        } else {
                            for (id, t, _) in objs {
                                if still_ours(cx.mm, id, t) {
                                    cx.mm.free_folio(cx.cpu, id);
                                }
                            }
                            for (d, i) in files {
                                sh.dentry.free(cx.mm, cx.cpu, d);
                                sh.inode.free(cx.mm, cx.cpu, i);
                            }
                        }
                        sh.iteration += 1;
                        sh.next_job = 0;
                        return Step::Ran(0);
                    }
                    return Step::Sleep { ran: 0, sleep: MS };
                }
                if spec.untar && !sh.untarred {
                    // One worker unpacks the tree (the build's first step, so its time and
                    // counters are the build's), the others wait for it.
                    if sh.untarring {
                        return Step::Sleep { ran: 0, sleep: MS };
                    }
                    sh.untarring = true;
                    sh.metrics.borrow_mut().builds.push(Build {
                        start_ns: cx.now,
                        stats_start: cx.mm.stats.to_vec(),
                        ..Default::default()
                    });
                    let before = cx.mm.work_sum;
                    let cur = sh.cur;
                    sh.delete_tree(cx.mm, cx.cpu, cur);
                    sh.tar_ra = Default::default();
                    let ns = sys(&cx.mm.work_sum.since(&before), cx);
                    sh.metrics.borrow_mut().builds.last_mut().unwrap().system_ns += ns;
                    self.phase = JobPhase::Untar { file: 0 };
                    return Step::Ran(ns + cx.cost.context_switch_ns);
                }
                if sh.next_job == 0 && !spec.untar {
                    sh.metrics.borrow_mut().builds.push(Build {
                        start_ns: cx.now,
                        stats_start: cx.mm.stats.to_vec(),
                        ..Default::default()
                    });
                }
                sh.next_job += 1;
                sh.running += 1;
                self.phase = JobPhase::Start;
                Step::Ran(cx.cost.context_switch_ns)
            }
            JobPhase::Untar { file } => {
                // `tar x`: for each file in turn, its part of the tarball is read (sequential
                // readahead), then the file is created (a dentry and an inode, and the cost of
                // creating a file) and written (dirty page cache, cleaned by the flusher).
                let before = cx.mm.work_sum;
                let fp = spec.source_file_pages.max(1);
                let files = (spec.source_pages / fp).max(1);
                let tarball = sh.tarball.expect("untar has a tarball");
                let cur = sh.cur;
                let mapping = sh.trees[cur].mapping;
                let (mut f, mut pages, mut io, mut created) = (file, 0, 0, 0);
                while f < files && pages < CHUNK {
                    let KbuildShared { tar_ra, .. } = &mut *sh;
                    let st = cx
                        .mm
                        .filemap_read(cx.cpu, tarball, tar_ra, f * fp, fp, files * fp);
                    io += st.miss_pages;
                    let KbuildShared {
                        dentry, inode, trees, ..
                    } = &mut *sh;
                    trees[cur].objs[f as usize] = alloc_file_objs(dentry, inode, cx.mm, cx.cpu);
                    cx.mm.filemap_write(cx.cpu, mapping, f * fp, fp * 4096);
                    created += 1;
                    pages += fp;
                    f += 1;
                }
                let ns = sys(&cx.mm.work_sum.since(&before), cx) + created * cx.cost.file_create_ns;
                sh.metrics.borrow_mut().builds.last_mut().unwrap().system_ns += ns;
                if f == files {
                    sh.untarred = true;
                    sh.untarring = false;
                } else {
                    self.phase = JobPhase::Untar { file: f };
                }
                if io > 0 {
                    Step::Sleep {
                        ran: ns,
                        sleep: cx.cost.read_io_ns,
                    }
                } else {
                    Step::Ran(ns)
                }
            }
            JobPhase::Start => {
                // fork: a kernel stack (THREAD_SIZE 16 KiB). With CONFIG_VMAP_STACK (x86-64
                // distribution kernels, and this VM's 6.18: /proc/config.gz) it is four
                // order-0 unmovable pages from vmalloc (`alloc_thread_stack_node`), or a stack
                // freed lately on this CPU (`NR_CACHED_STACKS`). Simplified: vmalloc's own
                // vmap_area objects are not allocated.
                let before = cx.mm.work_sum;
                let g = Gfp::GFP_KERNEL.union(Gfp::ACCOUNT);
                self.stack = match sh.stack_cache.entry(cx.cpu).or_default().pop() {
                    Some(stack) => stack,
                    None => (0..STACK_PAGES)
                        .filter_map(|_| {
                            let id = cx.mm.alloc_folio(cx.cpu, g, 0, FolioKind::Kernel, false)?;
                            Some((id, cx.mm.folios.get(id).token))
                        })
                        .collect(),
                };
                let pages = spec.job_anon_pages / 2 + cx.rng.gen_range(0..=spec.job_anon_pages);
                // fork + exec: the process's kernel objects (a task_struct and, for its
                // mappings, files and signal state, about 40 small objects).
                if let Some(o) = sh.task.alloc(cx.mm, cx.cpu) {
                    self.kobjs.push((true, o));
                }
                for _ in 0..JOB_KERNEL_OBJECTS {
                    if let Some(o) = sh.vma.alloc(cx.mm, cx.cpu) {
                        self.kobjs.push((false, o));
                    }
                }
                let ns = sys(&cx.mm.work_sum.since(&before), cx);
                sh.metrics.borrow_mut().builds.last_mut().unwrap().system_ns += ns;
                self.phase = JobPhase::Touch {
                    vma: AnonVma::new(pages.max(1), false),
                    next: 0,
                };
                Step::Ran(ns)
            }
            JobPhase::Touch { mut vma, next } => {
                let (ns, _) = touch_range(cx, &mut vma, next, CHUNK, &mut sh.metrics.borrow_mut());
                sh.metrics.borrow_mut().builds.last_mut().unwrap().system_ns += ns;
                let next = next + CHUNK;
                self.phase = if next >= vma.nr_pages {
                    JobPhase::Read {
                        vma,
                        left: spec.job_read_pages,
                    }
                } else {
                    JobPhase::Touch { vma, next }
                };
                Step::Ran(ns)
            }
            JobPhase::Read { vma, left } => {
                // Source and header files (`source_file`), each opened and read sequentially
                // (`filemap_read` with a fresh readahead state), at random places in the tree.
                let mut io = 0;
                let before = cx.mm.work_sum;
                let fp = spec.source_file_pages.max(1);
                let files = spec.source_pages / fp;
                let cur = sh.cur;
                let source = sh.trees[cur].mapping;
                for _ in 0..(left.min(CHUNK) / fp).max(1) {
                    if files == 0 {
                        break;
                    }
                    let fi = cx.rng.gen_range(0..files);
                    let f = fi * fp;
                    // The path lookup creates the file's dentry and inode the first time.
                    if sh.trees[cur].objs[fi as usize].is_none() {
                        let KbuildShared {
                            dentry, inode, trees, ..
                        } = &mut *sh;
                        trees[cur].objs[fi as usize] = alloc_file_objs(dentry, inode, cx.mm, cx.cpu);
                    }
                    let mut ra = fraglab_mm::filemap::ReadaheadState::default();
                    let st = cx
                        .mm
                        .filemap_read(cx.cpu, source, &mut ra, f, fp, spec.source_pages);
                    io += st.miss_pages;
                }
                let ns = sys(&cx.mm.work_sum.since(&before), cx);
                sh.metrics.borrow_mut().builds.last_mut().unwrap().system_ns += ns;
                let left = left.saturating_sub(CHUNK);
                self.phase = if left == 0 {
                    JobPhase::Slab {
                        vma,
                        left: spec.job_slab_pages,
                    }
                } else {
                    JobPhase::Read { vma, left }
                };
                // Misses wait for the device (one read I/O per missing page, issued together:
                // the latency of one), off the CPU.
                if io > 0 {
                    Step::Sleep {
                        ran: ns,
                        sleep: cx.cost.read_io_ns,
                    }
                } else {
                    Step::Ran(ns)
                }
            }
            JobPhase::Slab { vma, left } => {
                let before = cx.mm.work_sum;
                let g = Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE);
                for _ in 0..left.min(CHUNK) {
                    if let Some(id) = cx.mm.alloc_folio(cx.cpu, g, 0, FolioKind::Slab, false) {
                        let t = cx.mm.folios.get(id).token;
                        cx.mm.set_slab_shrinkable(id);
                        sh.slab.push_back((id, t));
                    }
                }
                // The dentry cache is also bounded by the source tree's size (besides the slab
                // shrinker): the oldest entries are dropped.
                while sh.slab.len() as u64 > spec.source_pages {
                    let (id, t) = sh.slab.pop_front().unwrap();
                    if still_ours(cx.mm, id, t) {
                        cx.mm.free_folio(cx.cpu, id);
                    }
                }
                let ns = sys(&cx.mm.work_sum.since(&before), cx);
                sh.metrics.borrow_mut().builds.last_mut().unwrap().system_ns += ns;
                let left = left.saturating_sub(CHUNK);
                self.phase = if left == 0 {
                    JobPhase::Compute {
                        vma,
                        left_ns: spec.job_cpu_ns,
                    }
                } else {
                    JobPhase::Slab { vma, left }
                };
                Step::Ran(ns)
            }
            JobPhase::Compute { vma, left_ns } => {
                let slice = left_ns.min(COMPUTE_SLICE_NS);
                sh.metrics.borrow_mut().builds.last_mut().unwrap().user_ns += slice;
                let left_ns = left_ns - slice;
                self.phase = if left_ns == 0 {
                    JobPhase::Write {
                        vma,
                        left: spec.job_obj_pages,
                    }
                } else {
                    JobPhase::Compute { vma, left_ns }
                };
                Step::Ran(slice)
            }
            JobPhase::Write { vma, left } => {
                let before = cx.mm.work_sum;
                if left == spec.job_obj_pages {
                    // Creating the object file: its dentry and inode, until "make clean".
                    let KbuildShared { dentry, inode, .. } = &mut *sh;
                    if let Some(objs) = alloc_file_objs(dentry, inode, cx.mm, cx.cpu) {
                        sh.obj_file_objs.push(objs);
                    }
                }
                for _ in 0..left.min(CHUNK) {
                    let g = Gfp::GFP_HIGHUSER_MOVABLE;
                    if let Some(id) = cx.mm.alloc_folio(cx.cpu, g, 0, FolioKind::File, false) {
                        cx.mm.folio_mark_dirty(id, true);
                        let t = cx.mm.folios.get(id).token;
                        sh.objects.push((id, t, cx.now));
                    }
                }
                let mut ns = sys(&cx.mm.work_sum.since(&before), cx);
                if left == spec.job_obj_pages {
                    // The cost of creating the file (docs/costs.md `file_create_ns`).
                    ns += cx.cost.file_create_ns;
                }
                sh.metrics.borrow_mut().builds.last_mut().unwrap().system_ns += ns;
                let left = left.saturating_sub(CHUNK);
                self.phase = if left == 0 {
                    JobPhase::Exit { vma }
                } else {
                    JobPhase::Write { vma, left }
                };
                Step::Ran(ns)
            }
            JobPhase::Exit { mut vma } => {
                let freed = vma.unmap(cx.mm, cx.cpu);
                for (task, o) in std::mem::take(&mut self.kobjs) {
                    if task {
                        sh.task.free(cx.mm, cx.cpu, o);
                    } else {
                        sh.vma.free(cx.mm, cx.cpu, o);
                    }
                }
                // The stack goes to this CPU's cache if it has room
                // (`try_release_thread_stack_to_cache`), else back to the allocator.
                let stack = std::mem::take(&mut self.stack);
                let cache = sh.stack_cache.entry(cx.cpu).or_default();
                if stack.len() == STACK_PAGES && cache.len() < NR_CACHED_STACKS {
                    cache.push(stack);
                } else {
                    for (id, t) in stack {
                        if still_ours(cx.mm, id, t) {
                            cx.mm.free_folio(cx.cpu, id);
                        }
                    }
                }
                let ns = freed * cx.cost.free_page_ns;
                let mut m = sh.metrics.borrow_mut();
                let b = m.builds.last_mut().unwrap();
                b.system_ns += ns;
                b.jobs += 1;
                drop(m);
                sh.running -= 1;
                Step::Ran(ns)
            }
        }
    }
}

/// The writeback flusher: every 5 s, writes back (cleans) object-file pages dirty for 30 s.
pub struct Flusher {
    pub shared: Shared<KbuildShared>,
}

impl TaskBody for Flusher {
    fn comm(&self) -> &str {
        "kworker/u4:flush"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let sh = self.shared.borrow();
        if sh.finished() {
            return Step::Exit(0);
        }
        let mut n = 0;
        for &(id, t, at) in &sh.objects {
            if cx.now >= at + 30 * SEC && still_ours(cx.mm, id, t) && cx.mm.folios.get(id).dirty {
                cx.mm.folio_mark_dirty(id, false);
                n += 1;
            }
        }
        Step::Sleep {
            ran: n * cx.cost.free_page_ns,
            sleep: 5 * SEC,
        }
    }
}

/// Parameters of one thpchallenge thread (published-results.md §5.4).
#[derive(Clone, Debug, PartialEq)]
pub struct ThpChallengeSpec {
    /// The mapping's size (pages; a multiple of 512).
    pub pages: u64,
    /// MADV_HUGEPAGE on the mapping.
    pub madvised: bool,
    /// How long the memory is held after the last step before it is unmapped.
    pub hold_ns: u64,
}

/// mmtests' thpchallenge thread: mmap, then per 2 MiB step write one byte (the fault tells huge
/// from base, as mincore() does), memset the 2 MiB, and record the step's latency in µs.
/// Simplification: the memset's own cost (writing 2 MiB) is not charged; the latency is the
/// faults' cost (a THP fault zeroes 512 pages, a base-page step takes 512 faults).
pub struct ThpChallenge {
    spec: ThpChallengeSpec,
    vma: Option<AnonVma>,
    next: u64,
    metrics: Shared<Metrics>,
}

impl ThpChallenge {
    pub fn new(spec: ThpChallengeSpec, metrics: Shared<Metrics>) -> ThpChallenge {
        ThpChallenge {
            vma: Some(AnonVma::new(spec.pages, spec.madvised)),
            spec,
            next: 0,
            metrics,
        }
    }
}

impl TaskBody for ThpChallenge {
    fn comm(&self) -> &str {
        "thpchallenge"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let Some(vma) = self.vma.as_mut() else {
            return Step::Exit(0);
        };
        if self.next >= vma.nr_pages {
            if self.next == vma.nr_pages {
                self.next += 1;
                return Step::Sleep {
                    ran: 0,
                    sleep: self.spec.hold_ns,
                };
            }
            let freed = vma.unmap(cx.mm, cx.cpu);
            self.vma = None;
            return Step::Exit(freed * cx.cost.free_page_ns);
        }
        let region = 1u64 << fraglab_mm::types::HPAGE_PMD_ORDER;
        let mut m = self.metrics.borrow_mut();
        let (ns, huge) = touch_range(cx, vma, self.next, region, &mut m);
        if huge > 0 {
            m.thpchallenge_huge.record(ns);
        } else {
            m.thpchallenge_base.record(ns);
        }
        self.next += region;
        Step::Ran(ns)
    }
}

/// Parameters of the pgbench workload (seed 002, published-results.md §3).
#[derive(Clone, Debug, PartialEq)]
pub struct PgbenchSpec {
    pub clients: u32,
    /// Private anonymous memory of each backend process (pages; its page tables come with it).
    pub client_private_pages: u64,
    /// The shared data file (pages) and the WAL segment size (pages, written sequentially).
    pub data_pages: u64,
    pub wal_pages: u64,
    /// CPU time of one transaction, and the bytes it writes to the data file and to the WAL.
    pub tx_cpu_ns: u64,
    pub tx_data_bytes: u64,
    pub tx_wal_bytes: u64,
    /// WAL bytes per transaction while a checkpoint runs (full-page writes after the redo
    /// point, larger group-commit flushes).
    pub fpw_wal_bytes: u64,
    /// Checkpoint period and what a checkpoint writes: `checkpoint_bytes` in writes of
    /// `checkpoint_write_bytes` (large buffered writes: costly folio orders).
    pub checkpoint_ns: u64,
    pub checkpoint_bytes: u64,
    pub checkpoint_write_bytes: u64,
    /// Spread a checkpoint's writes over this long (0: as fast as possible).
    pub checkpoint_spread_ns: u64,
    /// How long the benchmark runs.
    pub duration_ns: u64,
}

/// The files and counters the pgbench tasks share.
pub struct PgbenchShared {
    pub spec: PgbenchSpec,
    pub data: u32,
    pub wal: u32,
    pub ckpt: u32,
    wal_pos: u64,
    ckpt_pos: u64,
    /// Transactions completed per simulated second.
    pub tps: Vec<u64>,
    /// Seconds during which a checkpoint was running.
    pub checkpoint_secs: std::collections::BTreeSet<u64>,
    /// A checkpoint is being written.
    pub checkpointing: bool,
    metrics: Shared<Metrics>,
}

impl PgbenchShared {
    /// Registers the data, WAL and checkpoint files (XFS-like mappings).
    pub fn new(mm: &mut Mm, spec: PgbenchSpec, metrics: Shared<Metrics>) -> Shared<PgbenchShared> {
        use fraglab_mm::filemap::Mapping;
        let data = mm.add_mapping(Mapping::xfs_like());
        let wal = mm.add_mapping(Mapping::xfs_like());
        let ckpt = mm.add_mapping(Mapping::xfs_like());
        Rc::new(RefCell::new(PgbenchShared {
            spec,
            data,
            wal,
            ckpt,
            wal_pos: 0,
            ckpt_pos: 0,
            tps: Vec::new(),
            checkpoint_secs: Default::default(),
            checkpointing: false,
            metrics,
        }))
    }
}

/// The charged cost of a buffered write: the faults' zeroing of new folios' pages is the copy
/// from user space (one page copy each), plus the allocations' work.
fn write_cost(cx: &Cx, st: &fraglab_mm::filemap::WriteStats, pages: u64) -> u64 {
    let work: u64 = st
        .attempts
        .iter()
        .map(|a| {
            cx.cost.alloc_fast_ns
                + cx.cost.compaction(&a.work.compaction)
                + cx.cost.reclaim(a.work.reclaimed, a.work.reclaimed_folios)
                + cx.cost.drain_wait(a.work.drain_ipis as u64, a.work.drained_pages)
        })
        .sum();
    work + pages * cx.cost.zero_page_ns
}

/// One pgbench client (a PostgreSQL backend): faults its private memory in, then runs
/// transactions until the benchmark's end: CPU, a random data-page write, a WAL append.
pub struct PgbenchClient {
    shared: Shared<PgbenchShared>,
    vma: AnonVma,
    touched: u64,
}

impl PgbenchClient {
    pub fn new(shared: Shared<PgbenchShared>) -> PgbenchClient {
        let pages = shared.borrow().spec.client_private_pages;
        PgbenchClient {
            shared,
            vma: AnonVma::new(pages.max(1), false),
            touched: 0,
        }
    }
}

impl TaskBody for PgbenchClient {
    fn comm(&self) -> &str {
        "postgres"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let shared = self.shared.clone();
        let mut sh = shared.borrow_mut();
        if cx.now >= sh.spec.duration_ns {
            let freed = self.vma.unmap(cx.mm, cx.cpu);
            return Step::Exit(freed * cx.cost.free_page_ns);
        }
        if self.touched < self.vma.nr_pages {
            let metrics = sh.metrics.clone();
            let (ns, _) = touch_range(cx, &mut self.vma, self.touched, CHUNK, &mut metrics.borrow_mut());
            self.touched += CHUNK;
            return Step::Ran(ns);
        }
        let spec = sh.spec.clone();
        // balance_dirty_pages: above the dirty limit, the writer waits for writeback.
        if cx.mm.nr_dirty > cx.mm.dirty_thresholds().1 {
            return Step::Sleep {
                ran: 0,
                sleep: 10 * MS,
            };
        }
        let page = cx.rng.gen_range(0..spec.data_pages.max(1));
        let (data, wal) = (sh.data, sh.wal);
        let st = cx.mm.filemap_write(cx.cpu, data, page & !1, spec.tx_data_bytes);
        let mut ns = spec.tx_cpu_ns + write_cost(cx, &st, spec.tx_data_bytes.div_ceil(4096));
        // During a checkpoint every transaction's first change to a page logs the full page
        // (full_page_writes): the commit's WAL write is larger.
        let wal_bytes = if sh.checkpointing {
            spec.fpw_wal_bytes
        } else {
            spec.tx_wal_bytes
        };
        let pos = sh.wal_pos;
        sh.wal_pos = (pos + wal_bytes.div_ceil(4096)) % spec.wal_pages.max(1);
        let st = cx.mm.filemap_write(cx.cpu, wal, pos, wal_bytes);
        ns += write_cost(cx, &st, wal_bytes.div_ceil(4096));
        let sec = ((cx.now + ns) / SEC) as usize;
        if sh.tps.len() <= sec {
            sh.tps.resize(sec + 1, 0);
        }
        sh.tps[sec] += 1;
        Step::Ran(ns)
    }
}

/// The checkpointer: every `checkpoint_ns`, writes `checkpoint_bytes` in large buffered writes
/// (the seed's checkpoint bursts: costly folio orders), then sleeps.
pub struct PgbenchCheckpointer {
    shared: Shared<PgbenchShared>,
    left: u64,
    next: u64,
}

impl PgbenchCheckpointer {
    pub fn new(shared: Shared<PgbenchShared>) -> PgbenchCheckpointer {
        let next = shared.borrow().spec.checkpoint_ns;
        PgbenchCheckpointer {
            shared,
            left: 0,
            next,
        }
    }
}

impl TaskBody for PgbenchCheckpointer {
    fn comm(&self) -> &str {
        "postgres: checkpointer"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let mut sh = self.shared.borrow_mut();
        let spec = sh.spec.clone();
        if cx.now >= spec.duration_ns {
            return Step::Exit(0);
        }
        if self.left == 0 {
            sh.checkpointing = false;
            if cx.now < self.next {
                return Step::Sleep {
                    ran: 0,
                    sleep: (self.next - cx.now).min(spec.duration_ns - cx.now),
                };
            }
            self.left = spec.checkpoint_bytes;
            self.next += spec.checkpoint_ns;
        }
        if cx.mm.nr_dirty > cx.mm.dirty_thresholds().1 {
            return Step::Sleep {
                ran: 0,
                sleep: 10 * MS,
            };
        }
        let len = self.left.min(spec.checkpoint_write_bytes);
        let pages = len.div_ceil(4096);
        let pos = sh.ckpt_pos;
        let ckpt = sh.ckpt;
        // The checkpoint file is overwritten in place as a ring of the data file's size.
        sh.ckpt_pos = (pos + pages) % spec.data_pages.max(pages);
        let st = cx.mm.filemap_write(cx.cpu, ckpt, pos, len);
        let ns = write_cost(cx, &st, pages);
        self.left -= len;
        sh.checkpointing = true;
        sh.checkpoint_secs.insert(cx.now / SEC);
        if spec.checkpoint_spread_ns > 0 && self.left > 0 {
            // Paced: one write per spread / number of writes.
            let writes = spec.checkpoint_bytes.div_ceil(spec.checkpoint_write_bytes).max(1);
            let gap = spec.checkpoint_spread_ns / writes;
            return Step::Sleep {
                ran: ns,
                sleep: gap.saturating_sub(ns),
            };
        }
        Step::Ran(ns)
    }
}

/// The writeback flusher for page-cache workloads (until `until_ns`): every 100 ms it writes
/// back folios dirty for 30 s (`dirty_expire_centisecs` 3000) and, above the background
/// threshold (10 %), the oldest dirty folios down to it. Simplification: writeback completes
/// at once and costs the flusher, not the device.
pub struct PageCacheFlusher {
    pub until_ns: u64,
}

impl TaskBody for PageCacheFlusher {
    fn comm(&self) -> &str {
        "kworker/u4:flush"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        if cx.now >= self.until_ns {
            return Step::Exit(0);
        }
        // Every 100 ms: expired folios, then background writeback down to the background
        // threshold.
        let mut n = cx.mm.writeback_expired(30 * SEC);
        let (bg, _) = cx.mm.dirty_thresholds();
        n += cx.mm.writeback_oldest(bg);
        Step::Sleep {
            ran: n * cx.cost.free_page_ns,
            sleep: 100 * MS,
        }
    }
}

/// A task running a `[[workload.task]]` program (issue 5's workload primitives): each engine
/// step does one step of the program, or one chunk of a long one (64 pages touched, 1 MiB of
/// reads, one write chunk, 10 ms of compute).
pub struct ProgramTask {
    name: String,
    steps: Vec<fraglab_spec::TaskStep>,
    loops_left: u32,
    pc: usize,
    /// Progress inside the current step (pages touched or read, bytes written).
    progress: u64,
    order: Vec<u64>,
    vmas: std::collections::BTreeMap<String, AnonVma>,
    /// File name → mapping id (shared by every task of the run) and this task's readahead state.
    files: Shared<std::collections::BTreeMap<String, u32>>,
    ra: std::collections::BTreeMap<String, fraglab_mm::filemap::ReadaheadState>,
    objects: Vec<(FolioId, u64)>,
    metrics: Shared<Metrics>,
}

impl ProgramTask {
    pub fn new(
        p: &fraglab_spec::TaskParams,
        files: Shared<std::collections::BTreeMap<String, u32>>,
        metrics: Shared<Metrics>,
    ) -> ProgramTask {
        ProgramTask {
            name: p.name.clone(),
            steps: p.steps.clone(),
            loops_left: p.loops,
            pc: 0,
            progress: 0,
            order: Vec::new(),
            vmas: Default::default(),
            files,
            ra: Default::default(),
            objects: Vec::new(),
            metrics,
        }
    }

    fn next(&mut self) {
        self.pc += 1;
        self.progress = 0;
        self.order.clear();
    }

    fn release(&mut self, cx: &mut Cx) -> u64 {
        let mut freed = 0;
        for (_, mut v) in std::mem::take(&mut self.vmas) {
            freed += v.unmap(cx.mm, cx.cpu);
        }
        for (id, t) in std::mem::take(&mut self.objects) {
            if still_ours(cx.mm, id, t) {
                cx.mm.free_folio(cx.cpu, id);
                freed += 1;
            }
        }
        freed
    }
}

impl TaskBody for ProgramTask {
    fn comm(&self) -> &str {
        &self.name
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        use fraglab_spec::TaskStep as S;
        if self.pc == self.steps.len() {
            self.loops_left -= 1;
            if self.loops_left == 0 {
                let freed = self.release(cx);
                return Step::Exit(freed * cx.cost.free_page_ns);
            }
            self.pc = 0;
        }
        let step = self.steps[self.pc].clone();
        match step {
            S::Mmap {
                vma,
                size_bytes,
                madvise,
            } => {
                if let Some(mut old) = self
                    .vmas
                    .insert(vma, AnonVma::new(size_bytes.div_ceil(4096), madvise))
                {
                    old.unmap(cx.mm, cx.cpu);
                }
                self.next();
                Step::Ran(cx.cost.context_switch_ns)
            }
            S::Touch { vma, random } => {
                let v = self
                    .vmas
                    .get_mut(&vma)
                    .expect("validated: mapped by an earlier step");
                let n = v.nr_pages;
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
                    };
                    ns += touch_range(cx, v, p, 1, &mut m).0;
                    self.progress += 1;
                }
                drop(m);
                if self.progress >= n {
                    self.next();
                }
                Step::Ran(ns.max(1))
            }
            S::Dontneed { vma, offset, length } => {
                let v = self.vmas.get_mut(&vma).expect("validated");
                let freed = v.dontneed(cx.mm, cx.cpu, offset / 4096, length.div_ceil(4096));
                self.next();
                Step::Ran(freed * cx.cost.free_page_ns + cx.cost.context_switch_ns)
            }
            S::Munmap { vma } => {
                let freed = self.vmas.remove(&vma).map_or(0, |mut v| v.unmap(cx.mm, cx.cpu));
                self.next();
                Step::Ran(freed * cx.cost.free_page_ns + cx.cost.context_switch_ns)
            }
            S::Compute { ns } => {
                // In slices of at most 10 ms, as a kbuild job computes: the engine does not
                // preempt a step, so a 300 ms step would hold its CPU against kswapd and
                // kcompactd for 300 ms, where the kernel's scheduler runs a waking kernel
                // thread within a slice (a few ms).
                let slice = (ns - self.progress).min(COMPUTE_SLICE_NS);
                self.progress += slice;
                if self.progress >= ns {
                    self.next();
                }
                Step::Ran(slice)
            }
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
            } => {
                let mapping = self.files.borrow()[&file];
                let ra = self.ra.entry(file).or_default();
                let pages = length.div_ceil(4096);
                let file_pages = file_size.div_ceil(4096);
                let before = cx.mm.work_sum;
                let mut io = false;
                let n = (pages - self.progress).min(256);
                if random {
                    for _ in 0..n {
                        let p = cx.rng.gen_range(0..file_pages.max(1));
                        io |= cx
                            .mm
                            .filemap_read(cx.cpu, mapping, ra, p, 1, file_pages)
                            .miss_pages
                            > 0;
                    }
                } else {
                    let first = offset / 4096 + self.progress;
                    io = cx
                        .mm
                        .filemap_read(cx.cpu, mapping, ra, first, n, file_pages)
                        .miss_pages
                        > 0;
                }
                self.progress += n;
                if self.progress >= pages {
                    self.next();
                }
                let ns = cx.cost.alloc_work(&cx.mm.work_sum.since(&before)) + n * cx.cost.free_page_ns;
                if io {
                    Step::Sleep {
                        ran: ns,
                        sleep: cx.cost.read_io_ns,
                    }
                } else {
                    Step::Ran(ns)
                }
            }
            S::Write {
                file,
                offset,
                length,
                chunk,
            } => {
                let mapping = self.files.borrow()[&file];
                if cx.mm.nr_dirty > cx.mm.dirty_thresholds().1 {
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
            S::Slab { count, reclaimable } => {
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
                let before = cx.mm.work_sum;
                let n = (count - self.progress).min(CHUNK);
                for _ in 0..n {
                    if let Some(id) = cx.mm.alloc_folio(cx.cpu, g, 0, kind, false) {
                        if reclaimable {
                            cx.mm.set_slab_shrinkable(id);
                        }
                        self.objects.push((id, cx.mm.folios.get(id).token));
                    }
                }
                self.progress += n;
                if self.progress >= count {
                    self.next();
                }
                Step::Ran(cx.cost.alloc_work(&cx.mm.work_sum.since(&before)).max(1))
            }
            S::CompactMemory => {
                let st = cx.mm.compact_memory();
                self.next();
                Step::Ran(cx.cost.compaction(&st))
            }
            S::Delete { file } => {
                let mapping = self.files.borrow()[&file];
                let freed = cx.mm.filemap_truncate(cx.cpu, mapping);
                self.ra.remove(&file);
                self.next();
                Step::Ran(freed * cx.cost.free_page_ns)
            }
            S::DropCaches => {
                let freed = cx.mm.drop_caches(cx.cpu);
                self.next();
                Step::Ran(freed * cx.cost.free_page_ns)
            }
        }
    }
}

/// What the fio small-file writers share: the directory (one mapping whose page ranges are the
/// files), the dentry and inode caches, and each file slot's objects.
pub struct FioShared {
    pub dir: u32,
    pub file_pages: u64,
    /// File slots per job (the working set divided among the jobs).
    pub slots: u64,
    pub dentry: SlabCache,
    pub inode: SlabCache,
    files: Vec<Option<(Obj, Obj)>>,
    pub until_ns: u64,
    pub start_ns: u64,
    pub created: u64,
}

impl FioShared {
    pub fn new(
        mm: &mut Mm,
        jobs: u32,
        file_pages: u64,
        working_set_pages: u64,
        until_ns: u64,
    ) -> Shared<FioShared> {
        let slots = (working_set_pages / file_pages.max(1) / jobs.max(1) as u64).max(1);
        let dir = mm.add_mapping(fraglab_mm::filemap::Mapping::xfs_like());
        // Each file of the directory has its own xarray.
        mm.xa_set_file_pages(dir, file_pages.max(1));
        Rc::new(RefCell::new(FioShared {
            dir,
            file_pages: file_pages.max(1),
            slots,
            // Closed files' dentries and inodes are unused objects on the dcache and inode
            // LRUs: the superblock shrinker frees them under memory pressure.
            dentry: SlabCache::new("dentry", 0, 21, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)).shrinkable(),
            inode: SlabCache::new("xfs_inode", 3, 28, Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE)).shrinkable(),
            files: vec![None; (slots * jobs.max(1) as u64) as usize],
            until_ns,
            start_ns: 0,
            created: 0,
        }))
    }
}

/// One fio job "inefficiently creating many small files" (published-results.md §5.4): per step
/// a few files are created — a dentry and an inode from their slab caches, then a buffered write
/// of the file — in a ring of slots; a slot's previous file is deleted first (truncated, its
/// objects freed), so the working set stays constant while reclaim evicts the older page cache.
pub struct FioSmallFiles {
    shared: Shared<FioShared>,
    job: u64,
    next: u64,
}

impl FioSmallFiles {
    pub fn new(shared: Shared<FioShared>, job: u32) -> FioSmallFiles {
        FioSmallFiles {
            shared,
            job: job as u64,
            next: 0,
        }
    }
}

/// The longest step a `compute` step of a `[[workload.task]]` takes at once (a kbuild job's
/// compile slice is the same).
const COMPUTE_SLICE_NS: u64 = 10 * MS;

/// Files a fio job creates per step.
const FIO_FILES_PER_STEP: u64 = 8;

impl TaskBody for FioSmallFiles {
    fn comm(&self) -> &str {
        "fio"
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let mut sh = self.shared.borrow_mut();
        if cx.now >= sh.until_ns {
            return Step::Exit(0);
        }
        if cx.now < sh.start_ns {
            return Step::Sleep {
                ran: 0,
                sleep: sh.start_ns - cx.now,
            };
        }
        // balance_dirty_pages: above the dirty limit, the writer waits for writeback.
        if cx.mm.nr_dirty > cx.mm.dirty_thresholds().1 {
            return Step::Sleep {
                ran: 0,
                sleep: 10 * MS,
            };
        }
        let before = cx.mm.work_sum;
        let mut ns = 0;
        for _ in 0..FIO_FILES_PER_STEP {
            let slot = self.job * sh.slots + self.next % sh.slots;
            self.next += 1;
            let index = slot * sh.file_pages;
            let (dir, pages) = (sh.dir, sh.file_pages);
            if let Some((d, i)) = sh.files[slot as usize].take() {
                let freed = cx.mm.filemap_truncate_range(cx.cpu, dir, index, pages);
                let cached_d = sh.dentry.free(cx.mm, cx.cpu, d);
                let cached_i = sh.inode.free(cx.mm, cx.cpu, i);
                // The shrinker took the old file's dentry or inode: unlink looks the file up
                // again (d_alloc, iget), and the new objects go with the unlink. Simplified: the
                // inode read (its inode-table block may be out of the page cache) is not charged.
                if !cached_d {
                    if let Some(d) = sh.dentry.alloc(cx.mm, cx.cpu) {
                        sh.dentry.free(cx.mm, cx.cpu, d);
                    }
                }
                if !cached_i {
                    if let Some(i) = sh.inode.alloc(cx.mm, cx.cpu) {
                        sh.inode.free(cx.mm, cx.cpu, i);
                    }
                }
                ns += cx.cost.file_unlink_ns + freed * cx.cost.free_page_ns;
            }
            // The per-file cost varies (measured p10–p90 11–22 µs around a 14 µs median,
            // docs/costs.md): drawn uniformly within ±40 % of the mean, so the runs of
            // different seeds take different paths, as repeated runs of fio do.
            ns += cx.cost.file_create_ns * cx.rng.gen_range(60..=140) / 100;
            let FioShared {
                dentry, inode, files, ..
            } = &mut *sh;
            files[slot as usize] = alloc_file_objs(dentry, inode, cx.mm, cx.cpu);
            let st = cx.mm.filemap_write(cx.cpu, dir, index, pages * 4096);
            ns += write_cost(cx, &st, pages);
            sh.created += 1;
        }
        ns += cx.cost.alloc_work(&cx.mm.work_sum.since(&before)).min(ns);
        Step::Ran(ns.max(1))
    }
}
