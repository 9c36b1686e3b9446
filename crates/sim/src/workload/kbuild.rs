//! `[[workload.kbuild]]`: a parallel kernel build (make -jN), `iterations` builds in a row —
//! its workers (compile jobs: fork, anonymous memory, source reads, slab, compute, an object
//! file), the source trees (optionally unpacked afresh per build) and the object files'
//! flusher.

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use fraglab_mm::filemap::ReadaheadState;
use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::slowpath::{MeasureWork, WorkSum};
use fraglab_mm::vmstat::Stat;
use fraglab_mm::{Gfp, Mm};
use fraglab_spec::result::{BuildResult, RunResult};
use fraglab_spec::KbuildParams;
use rand::Rng;

use super::common::{alloc_file_objs, touch_range, CHUNK, COMPUTE_SLICE_NS};
use super::{pages_of, Generator, Run, Shared};
use crate::anon::AnonVma;
use crate::engine::{Cx, Progress, Step, TaskBody, MS};
use crate::metrics::{Build, Metrics};
use crate::slab::{Obj, SlabCache};

/// Pages of one source file (at least one).
fn file_pages(p: &KbuildParams) -> u64 {
    pages_of(p.source_file_bytes).max(1)
}

/// A source tree on disk: its page cache (one large-folio mapping, ext4 on 6.18), the dentry
/// and inode of each file (created at the file's first lookup, or by the untar), and, with
/// `untar`, the object files built in it (their pages and dentries/inodes, deleted with it).
#[derive(serde::Serialize, serde::Deserialize)]
struct Tree {
    mapping: u32,
    objs: Vec<Option<(Obj, Obj)>>,
    objects: Vec<(FolioId, u64, u64)>,
    obj_file_objs: Vec<(Obj, Obj)>,
    /// On ext4 (docs/model §33): a tree on disk before the run (its layout gives each
    /// file's directory and inode), or an unpacked tree's directories and each file's inode
    /// while it exists; and the object files built in it (directory, name, inode).
    on_disk: Option<fraglab_mm::bdev::Ext4Tree>,
    dirs: Vec<u32>,
    inos: Vec<Option<u32>>,
    obj_inos: Vec<(u32, u64, u32)>,
}

impl Tree {
    /// File `f`'s directory and inode, while it exists.
    fn meta_of(&self, f: u64) -> Option<(u32, u32)> {
        match &self.on_disk {
            Some(t) => Some((t.dir_of(f), t.ino_of(f))),
            None => {
                let ino = (*self.inos.get(f as usize)?)?;
                Some((self.dirs[(f / FILES_PER_DIR) as usize], ino))
            }
        }
    }

    /// The directory an object file of job `job` goes in (none before the tree exists).
    fn obj_dir(&self, job: u32) -> Option<u32> {
        match &self.on_disk {
            Some(t) => Some(t.first_dir + (job as u64 % t.dirs) as u32),
            None => (!self.dirs.is_empty()).then(|| self.dirs[job as usize % self.dirs.len()]),
        }
    }
}

/// Files per directory of a source tree [I: a kernel tree has some 15–20 files per directory;
/// the model's tree is flat files of `source_file`], for its directory blocks (§33.3 item 2:
/// one per mkdir; 16 entries fit in it).
const FILES_PER_DIR: u64 = 16;

/// The length of a source or object file's name [I: `page_alloc.c`-like names], for the size
/// of its directory entry (§33.3 item 1: 20 bytes).
const NAME_LEN: u32 = 12;

/// The names of object files start here (a source file's name is its index).
const OBJ_KEY_BASE: u64 = 1 << 40;

/// State shared by a build's workers. The parameters (`KbuildParams`): `jobs_parallel` workers
/// (make -j) run `jobs` compile jobs per build, `iterations` builds one after the other
/// (mmtests iterations); a job touches private anonymous memory (`job_anon`, each job draws
/// 50–150 %), reads `job_read` of the source tree (`source`, shared page cache, in files of
/// `source_file`: the tree is `source / source_file` files), allocates `job_slab` of
/// reclaimable slab (dentries, inodes), computes `job_cpu` and writes an object file of
/// `job_obj`. With `untar`, each build first unpacks its tree afresh, keeping the trees of the
/// last `trees` builds.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct KbuildShared {
    p: KbuildParams,
    next_job: u32,
    iteration: u32,
    running: u32,
    /// The source trees (one, or `trees` with `untar`) and the one this build uses.
    trees: Vec<Tree>,
    cur: usize,
    /// With `untar`: the tarball (a file as large as the tree, read sequentially) and its
    /// readahead state; whether this build's tree is unpacked, or being unpacked.
    tarball: Option<u32>,
    tar_ra: ReadaheadState,
    untarred: bool,
    untarring: bool,
    /// Each CPU's cached kernel stacks (`cached_stacks`), by CPU.
    stack_cache: BTreeMap<u32, Vec<Vec<(FolioId, u64)>>>,
    /// Object-file pages written: (folio, token, dirtied at).
    objects: Vec<(FolioId, u64, u64)>,
    /// Dentry/inode slab kept as cache (freed oldest first beyond a bound).
    slab: VecDeque<(FolioId, u64)>,
    /// Kernel objects in slab caches (`crate::slab`): the source tree's dentries and inodes
    /// (created at a file's first read, kept for the run: the tree stays hot), each job's
    /// process objects (task_struct, vm_area_structs and the like, unmovable) and the object
    /// files' dentries and inodes (deleted by "make clean" after each build).
    pub dentry: SlabCache,
    pub inode: SlabCache,
    pub task: SlabCache,
    pub vma: SlabCache,
    obj_file_objs: Vec<(Obj, Obj)>,
    #[serde(with = "crate::checkpoint::shared")]
    metrics: Shared<Metrics>,
    /// The flusher's next wake and its pass interval, as it last slept (for its progress
    /// estimate only: it exits at the first wake after the builds).
    flusher_wakes: (u64, u64),
    /// The ext4 filesystem of the trees (docs/model §33; `None`: metadata not modelled),
    /// this build's object files (directory, name, inode) and the next object file's name.
    ext4: Option<u32>,
    obj_inos: Vec<(u32, u64, u32)>,
    next_obj_key: u64,
}

impl KbuildShared {
    /// Registers the source tree's mapping in `mm`; with `ext4`, the trees' metadata lives on
    /// that filesystem (a tree that is not unpacked is on disk before the run: its directories
    /// and inodes exist, nothing of them is cached).
    pub fn new(
        mm: &mut Mm,
        p: KbuildParams,
        metrics: Shared<Metrics>,
        ext4: Option<u32>,
    ) -> Shared<KbuildShared> {
        let files = (pages_of(p.source_bytes) / file_pages(&p)).max(1) as usize;
        let n = if p.untar { p.trees.max(1) } else { 1 };
        let mut trees: Vec<Tree> = (0..n)
            .map(|_| {
                let mapping = mm.add_mapping(fraglab_mm::filemap::Mapping::large_folios());
                // Each source file has its own xarray.
                mm.xa_set_file_pages(mapping, file_pages(&p));
                Tree {
                    mapping,
                    objs: vec![None; files],
                    objects: Vec::new(),
                    obj_file_objs: Vec::new(),
                    on_disk: None,
                    dirs: Vec::new(),
                    inos: if p.untar && ext4.is_some() {
                        vec![None; files]
                    } else {
                        Vec::new()
                    },
                    obj_inos: Vec::new(),
                }
            })
            .collect();
        let tarball = p
            .untar
            .then(|| mm.add_mapping(fraglab_mm::filemap::Mapping::large_folios()));
        if let (Some(e), false) = (ext4, p.untar) {
            trees[0].on_disk = Some(mm.ext4_tree(e, files as u64, FILES_PER_DIR, NAME_LEN));
        }
        Rc::new(RefCell::new(KbuildShared {
            trees,
            cur: 0,
            tarball,
            tar_ra: mm.file_ra_state_init(),
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
            flusher_wakes: (0, 0),
            p,
            metrics,
            ext4,
            obj_inos: Vec::new(),
            next_obj_key: OBJ_KEY_BASE,
        }))
    }

    /// Creates an object file in the current tree's directory for job `job` (§33: its inode,
    /// bitmaps and directory entry), recorded for "make clean" or the tree's deletion.
    fn create_obj_file(&mut self, mm: &mut Mm, cpu: u32, job: u32) {
        let Some(e) = self.ext4 else { return };
        let Some(dir) = self.trees[self.cur].obj_dir(job) else {
            return;
        };
        let key = self.next_obj_key;
        self.next_obj_key += 1;
        let ino = mm.ext4_create(cpu, e, dir, key, NAME_LEN, true, false);
        self.obj_inos.push((dir, key, ino));
    }

    /// Unlinks object files (§33.3 item 5; their dentries are cached).
    fn unlink_obj_files(&self, mm: &mut Mm, cpu: u32, files: Vec<(u32, u64, u32)>) {
        let Some(e) = self.ext4 else { return };
        for (dir, key, ino) in files {
            mm.ext4_unlink(cpu, e, dir, key, NAME_LEN, ino, true, true);
        }
    }

    /// Adds `ns` to the current build's system time.
    fn charge_system(&self, ns: u64) {
        self.metrics.borrow_mut().builds.last_mut().unwrap().system_ns += ns;
    }

    /// Starts a build's record: its start time and the counters it starts from.
    fn start_build(&self, cx: &Cx) {
        self.metrics.borrow_mut().builds.push(Build {
            start_ns: cx.now,
            stats_start: cx.mm.stats.to_vec(),
            ..Default::default()
        });
    }

    /// Whether every build has finished.
    pub fn finished(&self) -> bool {
        self.iteration == self.p.iterations
    }

    /// The build's progress: compile jobs finished of every build's (`iterations` × `jobs`).
    fn progress(&self) -> Progress {
        let jobs = self.p.jobs as u64;
        let done = self.iteration as u64 * jobs + (self.next_job - self.running) as u64;
        Progress::work(done, self.p.iterations as u64 * jobs)
    }

    /// `rm -rf` of tree `t` before a new one is unpacked in its place: its page cache is
    /// truncated (dirty pages unwritten) and its files' and object files' dentries and inodes
    /// are freed (`evict` at the last `iput`; simplified: at once, not via the LRU).
    fn delete_tree(&mut self, mm: &mut Mm, cpu: u32, t: usize) {
        // §33.3 item 5: every file's entry, inode and bitmaps (a lookup first for a source
        // file whose dentry is not cached); the directories stay on disk, uncached once
        // reclaimed (simplified: rmdir is not modelled, the next tree gets new ones).
        if let Some(e) = self.ext4 {
            let tree = &mut self.trees[t];
            for f in 0..tree.inos.len() {
                if let Some(ino) = tree.inos[f].take() {
                    let dir = tree.dirs[f / FILES_PER_DIR as usize];
                    let cached = tree.objs[f].is_some();
                    mm.ext4_unlink(cpu, e, dir, f as u64, NAME_LEN, ino, true, cached);
                }
            }
            tree.dirs.clear();
            let objs = std::mem::take(&mut tree.obj_inos);
            self.unlink_obj_files(mm, cpu, objs);
        }
        let tree = &mut self.trees[t];
        mm.filemap_truncate(cpu, tree.mapping);
        for (id, tok, _) in std::mem::take(&mut tree.objects) {
            if mm.folio_is(id, tok) {
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

#[derive(serde::Serialize, serde::Deserialize)]
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
#[derive(serde::Serialize, serde::Deserialize)]
pub struct KbuildWorker {
    #[serde(with = "crate::checkpoint::shared")]
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

/// Small unmovable kernel objects of one compile process (vm_area_structs, anon_vmas, files,
/// signal and mm state), from 192-byte slabs.
const JOB_KERNEL_OBJECTS: u32 = 40;
/// Pages of a kernel stack (THREAD_SIZE 16 KiB on x86-64).
const STACK_PAGES: usize = 4;
/// `NR_CACHED_STACKS` (kernel/fork.c): freed vmap stacks each CPU keeps for the next fork.
const NR_CACHED_STACKS: usize = 2;

/// The CPU time of a job's kernel work, charged at the step's clock (its waits go to
/// `cx.waited`: System time counts the cost model's CPU time, not lock spinning).
fn sys(work: &WorkSum, cx: &mut Cx) -> u64 {
    cx.alloc_work(work)
}

/// The step after reading, writing or faulting: a wait for the device (one read I/O per
/// missing page, issued together: the latency of one), off the CPU, if anything missed.
fn ran_then_io(cx: &Cx, ns: u64, io: u64) -> Step {
    if io > 0 {
        Step::Sleep {
            ran: ns,
            sleep: cx.cost.read_io_ns,
        }
    } else {
        Step::Ran(ns)
    }
}

impl KbuildWorker {
    /// Waiting for a job: the next job of this build, the build's end (the last worker to
    /// finish records it), or its tree to unpack first (`untar`).
    fn take(&mut self, sh: &mut KbuildShared, cx: &mut Cx) -> Step {
        if sh.finished() {
            return Step::Exit(0);
        }
        if sh.next_job == sh.p.jobs {
            if sh.running == 0 {
                return Self::end_build(sh, cx);
            }
            return Step::Sleep { ran: 0, sleep: MS };
        }
        if sh.p.untar && !sh.untarred {
            return self.start_untar(sh, cx);
        }
        if sh.next_job == 0 && !sh.p.untar {
            sh.start_build(cx);
        }
        sh.next_job += 1;
        sh.running += 1;
        self.phase = JobPhase::Start;
        Step::Ran(cx.cost.context_switch_ns)
    }

    /// The build is over: record it and start the next one ("make clean" deletes the objects;
    /// with `untar` they stay in their tree until it is deleted).
    fn end_build(sh: &mut KbuildShared, cx: &mut Cx) -> Step {
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
        let obj_inos = std::mem::take(&mut sh.obj_inos);
        if sh.p.untar {
            let cur = sh.cur;
            sh.trees[cur].objects.extend(objs);
            sh.trees[cur].obj_file_objs.extend(files);
            sh.trees[cur].obj_inos.extend(obj_inos);
            sh.cur = (cur + 1) % sh.trees.len();
            sh.untarred = false;
        } else {
            for (id, t, _) in objs {
                if cx.mm.folio_is(id, t) {
                    cx.mm.free_folio(cx.cpu, id);
                }
            }
            for (d, i) in files {
                sh.dentry.free(cx.mm, cx.cpu, d);
                sh.inode.free(cx.mm, cx.cpu, i);
            }
            // "make clean": the object files are unlinked.
            sh.unlink_obj_files(cx.mm, cx.cpu, obj_inos);
        }
        sh.iteration += 1;
        sh.next_job = 0;
        Step::Ran(0)
    }

    /// One worker unpacks the tree (the build's first step, so its time and counters are the
    /// build's), the others wait for it: the tree that was there is deleted first.
    fn start_untar(&mut self, sh: &mut KbuildShared, cx: &mut Cx) -> Step {
        if sh.untarring {
            return Step::Sleep { ran: 0, sleep: MS };
        }
        sh.untarring = true;
        sh.start_build(cx);
        let ((), work) = cx.measure(|cx| {
            let cur = sh.cur;
            sh.delete_tree(cx.mm, cx.cpu, cur);
            sh.tar_ra = cx.mm.file_ra_state_init();
        });
        let ns = sys(&work, cx);
        sh.charge_system(ns);
        self.phase = JobPhase::Untar { file: 0 };
        Step::Ran(ns + cx.cost.context_switch_ns)
    }

    /// `tar x`: for each file in turn, its part of the tarball is read (sequential
    /// readahead), then the file is created (a dentry and an inode, and the cost of creating a
    /// file) and written (dirty page cache, cleaned by the flusher).
    fn untar(&mut self, sh: &mut KbuildShared, cx: &mut Cx, file: u64) -> Step {
        let fp = file_pages(&sh.p);
        let files = (pages_of(sh.p.source_bytes) / fp).max(1);
        let tarball = sh.tarball.expect("untar has a tarball");
        let cur = sh.cur;
        let mapping = sh.trees[cur].mapping;
        let ((f, io, created), work) = cx.measure(|cx| {
            let (mut f, mut pages, mut io, mut created) = (file, 0, 0, 0);
            while f < files && pages < CHUNK {
                let KbuildShared { tar_ra, .. } = &mut *sh;
                let st = cx
                    .mm
                    .filemap_read(cx.cpu, tarball, tar_ra, f * fp, fp, files * fp);
                io += st.miss_pages;
                let KbuildShared {
                    dentry,
                    inode,
                    trees,
                    ext4,
                    ..
                } = &mut *sh;
                trees[cur].objs[f as usize] = alloc_file_objs(dentry, inode, cx.mm, cx.cpu);
                // §33: `tar x` makes each directory, then creates its files in it.
                if let Some(e) = *ext4 {
                    let t = &mut trees[cur];
                    if f % FILES_PER_DIR == 0 {
                        t.dirs.push(cx.mm.ext4_mkdir(cx.cpu, e, 0, false));
                    }
                    let dir = t.dirs[(f / FILES_PER_DIR) as usize];
                    t.inos[f as usize] = Some(cx.mm.ext4_create(cx.cpu, e, dir, f, NAME_LEN, true, false));
                }
                cx.mm.filemap_write(cx.cpu, mapping, f * fp, fp * 4096);
                created += 1;
                pages += fp;
                f += 1;
            }
            (f, io, created)
        });
        let ns = sys(&work, cx) + created * cx.cost.file_create_ns;
        sh.charge_system(ns);
        if f == files {
            sh.untarred = true;
            sh.untarring = false;
        } else {
            self.phase = JobPhase::Untar { file: f };
        }
        ran_then_io(cx, ns, io)
    }

    /// fork: a kernel stack (THREAD_SIZE 16 KiB). With CONFIG_VMAP_STACK (x86-64 distribution
    /// kernels, and this VM's 6.18: /proc/config.gz) it is four order-0 unmovable pages from
    /// vmalloc (`alloc_thread_stack_node`), or a stack freed lately on this CPU
    /// (`NR_CACHED_STACKS`). Simplified: vmalloc's own vmap_area objects are not allocated.
    fn start(&mut self, sh: &mut KbuildShared, cx: &mut Cx) -> Step {
        let (pages, work) = cx.measure(|cx| {
            let g = Gfp::GFP_KERNEL.union(Gfp::ACCOUNT);
            self.stack = match sh.stack_cache.entry(cx.cpu).or_default().pop() {
                Some(stack) => stack,
                None => (0..STACK_PAGES)
                    .filter_map(|_| {
                        let id = cx.mm.alloc_folio(cx.cpu, g, 0, FolioKind::Kernel, false)?;
                        Some((id, cx.mm.folios.get(id).token()))
                    })
                    .collect(),
            };
            let anon = pages_of(sh.p.job_anon_bytes);
            let pages = anon / 2 + cx.rng.gen_range(0..=anon);
            // fork + exec: the process's kernel objects (a task_struct and, for its mappings,
            // files and signal state, about 40 small objects).
            if let Some(o) = sh.task.alloc(cx.mm, cx.cpu) {
                self.kobjs.push((true, o));
            }
            for _ in 0..JOB_KERNEL_OBJECTS {
                if let Some(o) = sh.vma.alloc(cx.mm, cx.cpu) {
                    self.kobjs.push((false, o));
                }
            }
            pages
        });
        let ns = sys(&work, cx);
        sh.charge_system(ns);
        self.phase = JobPhase::Touch {
            vma: AnonVma::new(pages.max(1), false),
            next: 0,
        };
        Step::Ran(ns)
    }

    /// The job's private memory, `CHUNK` pages per step.
    fn touch(&mut self, sh: &mut KbuildShared, cx: &mut Cx, mut vma: AnonVma, next: u64) -> Step {
        let ns = touch_range(cx, &mut vma, next, CHUNK, &mut sh.metrics.borrow_mut()).cpu_ns;
        sh.charge_system(ns);
        let next = next + CHUNK;
        self.phase = if next >= vma.nr_pages {
            JobPhase::Read {
                vma,
                left: pages_of(sh.p.job_read_bytes),
            }
        } else {
            JobPhase::Touch { vma, next }
        };
        Step::Ran(ns)
    }

    /// Source and header files (`source_file`), each opened and read sequentially
    /// (`filemap_read` with a fresh readahead state), at random places in the tree.
    fn read(&mut self, sh: &mut KbuildShared, cx: &mut Cx, vma: AnonVma, left: u64) -> Step {
        let fp = file_pages(&sh.p);
        let source_pages = pages_of(sh.p.source_bytes);
        let files = source_pages / fp;
        let cur = sh.cur;
        let source = sh.trees[cur].mapping;
        let (io, work) = cx.measure(|cx| {
            let mut io = 0;
            for _ in 0..(left.min(CHUNK) / fp).max(1) {
                if files == 0 {
                    break;
                }
                let fi = cx.rng.gen_range(0..files);
                let f = fi * fp;
                // The path lookup creates the file's dentry and inode the first time.
                if sh.trees[cur].objs[fi as usize].is_none() {
                    let KbuildShared {
                        dentry,
                        inode,
                        trees,
                        ext4,
                        ..
                    } = &mut *sh;
                    trees[cur].objs[fi as usize] = alloc_file_objs(dentry, inode, cx.mm, cx.cpu);
                    // §33: the lookup reads the directory block and the inode-table block
                    // (with its readahead) if they are not cached.
                    if let (Some(e), Some((dir, ino))) = (*ext4, trees[cur].meta_of(fi)) {
                        cx.mm.ext4_lookup(cx.cpu, e, dir, fi, Some(ino));
                    }
                }
                let mut ra = cx.mm.file_ra_state_init();
                let st = cx.mm.filemap_read(cx.cpu, source, &mut ra, f, fp, source_pages);
                io += st.miss_pages;
            }
            io
        });
        let ns = sys(&work, cx);
        sh.charge_system(ns);
        let left = left.saturating_sub(CHUNK);
        self.phase = if left == 0 {
            JobPhase::Slab {
                vma,
                left: pages_of(sh.p.job_slab_bytes),
            }
        } else {
            JobPhase::Read { vma, left }
        };
        ran_then_io(cx, ns, io)
    }

    /// Reclaimable slab (dentries, inodes) the job allocates, kept as cache.
    fn slab(&mut self, sh: &mut KbuildShared, cx: &mut Cx, vma: AnonVma, left: u64) -> Step {
        let ((), work) = cx.measure(|cx| {
            let g = Gfp::GFP_KERNEL.union(Gfp::RECLAIMABLE);
            for _ in 0..left.min(CHUNK) {
                if let Some(id) = cx.mm.alloc_folio(cx.cpu, g, 0, FolioKind::Slab, false) {
                    let t = cx.mm.folios.get(id).token();
                    cx.mm.set_slab_shrinkable(id);
                    sh.slab.push_back((id, t));
                }
            }
            // The dentry cache is also bounded by the source tree's size (besides the slab
            // shrinker): the oldest entries are dropped.
            while sh.slab.len() as u64 > pages_of(sh.p.source_bytes) {
                let (id, t) = sh.slab.pop_front().unwrap();
                if cx.mm.folio_is(id, t) {
                    cx.mm.free_folio(cx.cpu, id);
                }
            }
        });
        let ns = sys(&work, cx);
        sh.charge_system(ns);
        let left = left.saturating_sub(CHUNK);
        self.phase = if left == 0 {
            JobPhase::Compute {
                vma,
                left_ns: sh.p.job_cpu_ns,
            }
        } else {
            JobPhase::Slab { vma, left }
        };
        Step::Ran(ns)
    }

    /// The compile itself, in slices of `COMPUTE_SLICE_NS` (user time).
    fn compute(&mut self, sh: &mut KbuildShared, vma: AnonVma, left_ns: u64) -> Step {
        let slice = left_ns.min(COMPUTE_SLICE_NS);
        sh.metrics.borrow_mut().builds.last_mut().unwrap().user_ns += slice;
        let left_ns = left_ns - slice;
        self.phase = if left_ns == 0 {
            JobPhase::Write {
                vma,
                left: pages_of(sh.p.job_obj_bytes),
            }
        } else {
            JobPhase::Compute { vma, left_ns }
        };
        Step::Ran(slice)
    }

    /// The object file: created (a dentry and an inode, until "make clean") at the first
    /// step, then written as order-0 dirty page-cache folios.
    fn write(&mut self, sh: &mut KbuildShared, cx: &mut Cx, vma: AnonVma, left: u64) -> Step {
        let first = left == pages_of(sh.p.job_obj_bytes);
        let ((), work) = cx.measure(|cx| {
            if first {
                // Creating the object file: its dentry and inode, until "make clean", and its
                // metadata (§33).
                let KbuildShared { dentry, inode, .. } = &mut *sh;
                if let Some(objs) = alloc_file_objs(dentry, inode, cx.mm, cx.cpu) {
                    sh.obj_file_objs.push(objs);
                }
                let job = sh.next_job;
                sh.create_obj_file(cx.mm, cx.cpu, job);
            }
            for _ in 0..left.min(CHUNK) {
                let g = Gfp::GFP_HIGHUSER_MOVABLE;
                if let Some(id) = cx.mm.alloc_folio(cx.cpu, g, 0, FolioKind::File, false) {
                    cx.mm.folio_mark_dirty(id, true);
                    let t = cx.mm.folios.get(id).token();
                    sh.objects.push((id, t, cx.now));
                }
            }
        });
        let mut ns = sys(&work, cx);
        if first {
            // The cost of creating the file (docs/costs.md `file_create_ns`).
            ns += cx.cost.file_create_ns;
        }
        sh.charge_system(ns);
        let left = left.saturating_sub(CHUNK);
        self.phase = if left == 0 {
            JobPhase::Exit { vma }
        } else {
            JobPhase::Write { vma, left }
        };
        Step::Ran(ns)
    }

    /// exit: the job's memory, kernel objects and stack go.
    fn exit(&mut self, sh: &mut KbuildShared, cx: &mut Cx, mut vma: AnonVma) -> Step {
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
                if cx.mm.folio_is(id, t) {
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

impl TaskBody for KbuildWorker {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::KbuildWorker(self))
    }

    fn comm(&self) -> &str {
        "cc1"
    }

    fn progress(&self) -> Option<Progress> {
        Some(self.shared.borrow().progress())
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let shared = self.shared.clone();
        let mut sh = shared.borrow_mut();
        let sh = &mut *sh;
        match std::mem::replace(&mut self.phase, JobPhase::Take) {
            JobPhase::Take => self.take(sh, cx),
            JobPhase::Untar { file } => self.untar(sh, cx, file),
            JobPhase::Start => self.start(sh, cx),
            JobPhase::Touch { vma, next } => self.touch(sh, cx, vma, next),
            JobPhase::Read { vma, left } => self.read(sh, cx, vma, left),
            JobPhase::Slab { vma, left } => self.slab(sh, cx, vma, left),
            JobPhase::Compute { vma, left_ns } => self.compute(sh, vma, left_ns),
            JobPhase::Write { vma, left } => self.write(sh, cx, vma, left),
            JobPhase::Exit { vma } => self.exit(sh, cx, vma),
        }
    }
}

/// The writeback flusher: every `vm.dirty_writeback_centisecs` (default 5 s), submits for
/// writeback the object-file pages dirty for longer than `vm.dirty_expire_centisecs` (default
/// 30 s): they are clean at once and under writeback until the device has written them
/// (`write_io_ns` per 128 KiB, `fraglab_mm::writeback`); in between it wakes when the device
/// queue drains, to retire the completed writes from `nr_writeback`. With periodic writeback
/// off (`dirty_writeback_centisecs` = 0) it never runs.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Flusher {
    #[serde(with = "crate::checkpoint::shared")]
    pub shared: Shared<KbuildShared>,
    /// When the next periodic pass is due (0: at the first step).
    pub next_pass_ns: u64,
}

impl TaskBody for Flusher {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::KbuildFlusher(self))
    }

    fn comm(&self) -> &str {
        "kworker/u4:flush"
    }

    /// It exits at its first wake after the builds' end.
    fn progress(&self) -> Option<Progress> {
        let sh = self.shared.borrow();
        Some(Progress {
            wakes: Some(sh.flusher_wakes),
            ..sh.progress()
        })
    }

    fn step(&mut self, cx: &mut Cx) -> Step {
        let mut sh = self.shared.borrow_mut();
        let (expire, interval) = (cx.mm.dirty_expire_ns(), cx.mm.dirty_writeback_ns());
        if sh.finished() || interval == 0 {
            return Step::Exit(0);
        }
        // jbd2's due commits (docs/model §33.3 item 4).
        cx.mm.jbd2_tick(cx.cpu);
        cx.mm.cache.writeback.io_ns = cx.cost.write_io_ns;
        cx.mm.writeback_settle();
        let mut n = 0;
        if cx.now >= self.next_pass_ns {
            self.next_pass_ns = cx.now + interval;
            for &(id, t, at) in &sh.objects {
                if cx.now >= at + expire && cx.mm.folio_is(id, t) && cx.mm.folios.get(id).dirty() {
                    n += cx.mm.folio_start_writeback(id);
                }
            }
        }
        // Wake for the pass, or earlier when the queue has drained.
        let busy = cx.mm.cache.writeback.busy_until_ns;
        let wake = if busy > cx.now {
            self.next_pass_ns.min(busy)
        } else {
            self.next_pass_ns
        };
        let (ran, sleep) = (n * cx.cost.free_page_ns, wake.saturating_sub(cx.now).max(1));
        sh.flusher_wakes = (cx.now + ran + sleep, interval);
        Step::Sleep { ran, sleep }
    }
}

/// The `[[workload.kbuild]]` entries: per entry its workers and its object-file flusher.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Kbuild {
    params: Vec<KbuildParams>,
}

impl Kbuild {
    pub fn new(params: &[KbuildParams]) -> Kbuild {
        Kbuild {
            params: params.to_vec(),
        }
    }
}

impl Generator for Kbuild {
    fn saved(&self) -> Option<crate::checkpoint::GeneratorRef<'_>> {
        Some(crate::checkpoint::GeneratorRef::Kbuild(self))
    }

    fn spawn(&mut self, run: &mut Run<'_>) {
        for k in &self.params {
            let ext4 = run.ext4_for(None);
            let shared = KbuildShared::new(&mut run.e.mm, k.clone(), run.metrics.clone(), ext4);
            run.bind(k.numa);
            for _ in 0..k.jobs_parallel {
                run.e.spawn(Box::new(KbuildWorker::new(shared.clone())));
            }
            run.e.spawn(Box::new(Flusher {
                shared,
                next_pass_ns: 0,
            }));
            run.unbind();
            if k.untar {
                // The unpacked trees are dirty page cache of their own: the general flusher
                // writes them back (expired after 30 s, or above the background threshold).
                run.spawn_flusher();
            }
        }
    }

    /// The builds: their times and per-build vmstat deltas.
    fn result(&self, m: &Metrics, r: &mut RunResult) {
        let stat_delta = |d: &[i64]| -> BTreeMap<String, i64> {
            d.iter()
                .enumerate()
                .filter(|(i, _)| Stat::ALL[*i].name() != "")
                .map(|(i, v)| (Stat::ALL[i].name().to_string(), *v))
                .collect()
        };
        r.builds = m
            .builds
            .iter()
            .map(|b| BuildResult {
                start_ns: b.start_ns,
                end_ns: b.end_ns,
                user_ns: b.user_ns,
                system_ns: b.system_ns,
                jobs: b.jobs,
                vmstat_delta: stat_delta(&b.stats_delta),
            })
            .collect();
    }
}
