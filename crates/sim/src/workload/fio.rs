//! `[[workload.fio_smallfiles]]`: mmtests' fio background for thpchallenge, "inefficiently
//! creating many small files" (mmtests' thpchallenge).

use std::cell::RefCell;
use std::rc::Rc;

use fraglab_mm::slowpath::MeasureWork;
use fraglab_mm::types::PAGEBLOCK_ORDER;
use fraglab_mm::{Gfp, Mm};
use fraglab_spec::FioSmallFilesParams;
use rand::Rng;

use super::common::{alloc_file_objs, decimal_len, write_cost};
use super::{pages_of, Generator, Run, Shared};
use crate::engine::{Cx, Progress, Step, TaskBody, MS};
use crate::slab::{Obj, SlabCache};

/// What the fio small-file writers share: the directory (one mapping whose page ranges are the
/// files), the dentry and inode caches, and each file slot's objects.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FioShared {
    pub dir: u32,
    pub file_pages: u64,
    /// File slots per job (the working set divided among the jobs).
    pub slots: u64,
    pub dentry: SlabCache,
    pub inode: SlabCache,
    files: Vec<Option<(Obj, Obj)>>,
    /// On ext4 (docs/model §33): the filesystem and the jobs' directory, and each slot's
    /// file's inode while it exists.
    meta: Option<(u32, u32)>,
    inos: Vec<Option<u32>>,
    pub until_ns: u64,
    pub start_ns: u64,
    pub created: u64,
}

impl FioShared {
    /// The directory of `p`'s jobs: files of `file_size`, `working_set_pages` in all, written
    /// from `start` until `until_ns`; with `ext4`, their metadata on that filesystem (the
    /// directory made now, as the host engine makes it before the run).
    pub fn new(
        mm: &mut Mm,
        p: &FioSmallFilesParams,
        working_set_pages: u64,
        until_ns: u64,
        ext4: Option<u32>,
    ) -> Shared<FioShared> {
        let (jobs, file_pages) = (p.jobs, pages_of(p.file_size_bytes));
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
            meta: ext4.map(|e| (e, mm.ext4_mkdir(0, e, 0, false))),
            inos: vec![None; (slots * jobs.max(1) as u64) as usize],
            until_ns,
            start_ns: p.start_ns,
            created: 0,
        }))
    }
}

/// One fio job "inefficiently creating many small files" (mmtests' thpchallenge): per step
/// a few files are created — a dentry and an inode from their slab caches, then a buffered write
/// of the file — in a ring of slots; a slot's previous file is deleted first (truncated, its
/// objects freed), so the working set stays constant while reclaim evicts the older page cache.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FioSmallFiles {
    #[serde(with = "crate::checkpoint::shared")]
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

/// Files a fio job creates per step.
const FIO_FILES_PER_STEP: u64 = 8;

impl TaskBody for FioSmallFiles {
    fn saved(&self) -> Option<crate::checkpoint::TaskRef<'_>> {
        Some(crate::checkpoint::TaskRef::Fio(self))
    }

    fn comm(&self) -> &str {
        "fio"
    }

    /// Writes files until `until`.
    fn progress(&self) -> Option<Progress> {
        Some(Progress::until(self.shared.borrow().until_ns))
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
        if cx.mm.dirty_exceeded() {
            return Step::Sleep {
                ran: 0,
                sleep: 10 * MS,
            };
        }
        let (mut ns, work) = cx.measure(|cx| {
            let mut ns = 0;
            for _ in 0..FIO_FILES_PER_STEP {
                let slot = self.job * sh.slots + self.next % sh.slots;
                self.next += 1;
                let index = slot * sh.file_pages;
                let (dir, pages) = (sh.dir, sh.file_pages);
                // The host's name, `job{J}-{slot}` (crates/host worker.rs `run_fio`), for the
                // size of its directory entry (docs/model §33.3 item 1).
                let name_len = 4 + decimal_len(self.job) + 1 + decimal_len(slot - self.job * sh.slots);
                let meta = sh.meta;
                if let Some((d, i)) = sh.files[slot as usize].take() {
                    let freed = cx.mm.filemap_truncate_range(cx.cpu, dir, index, pages);
                    let cached_d = sh.dentry.free(cx.mm, cx.cpu, d);
                    let cached_i = sh.inode.free(cx.mm, cx.cpu, i);
                    // §33.3 item 5: the unlink's entry, inode and bitmaps (a lookup first if
                    // the shrinker took the dentry).
                    if let (Some((e, d)), Some(ino)) = (meta, sh.inos[slot as usize].take()) {
                        cx.mm
                            .ext4_unlink(cx.cpu, e, d, slot, name_len, ino, true, cached_d && cached_i);
                    }
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
                if let Some((e, d)) = meta {
                    let ino = cx.mm.ext4_create(cx.cpu, e, d, slot, name_len, true, false);
                    sh.inos[slot as usize] = Some(ino);
                }
                let st = cx.mm.filemap_write(cx.cpu, dir, index, pages * 4096);
                ns += write_cost(cx, &st, pages);
                sh.created += 1;
            }
            ns
        });
        // `work` includes the writes' allocations, charged with their locks by `write_cost`:
        // this remainder is CPU time only (on the step's clock, no lock holds of its own).
        let rest = cx.cost.alloc_work(&work).min(ns);
        ns += cx.cpu(rest).cpu;
        Step::Ran(ns.max(1))
    }
}

/// The `[[workload.fio_smallfiles]]` entries: `jobs` writers each.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Fio {
    params: Vec<FioSmallFilesParams>,
}

impl Fio {
    pub fn new(params: &[FioSmallFilesParams]) -> Fio {
        Fio {
            params: params.to_vec(),
        }
    }
}

impl Generator for Fio {
    fn saved(&self) -> Option<crate::checkpoint::GeneratorRef<'_>> {
        Some(crate::checkpoint::GeneratorRef::Fio(self))
    }

    fn spawn(&mut self, run: &mut Run<'_>) {
        let w = run.w;
        for f in &self.params {
            // 1.5 × the memory the page allocator manages outside the hugetlb pool.
            let usable = run
                .managed_pages()
                .saturating_sub(run.spec.machine.hugetlb_pages << PAGEBLOCK_ORDER);
            let ws = f.working_set_bytes.map(pages_of).unwrap_or(usable * 3 / 2);
            let until = f.runtime_ns.map_or(w.duration_ns, |r| f.start_ns + r);
            let ext4 = run.ext4_for(None);
            let shared = FioShared::new(&mut run.e.mm, f, ws, until, ext4);
            // Beside another generator fio is background load (mmtests' thpchallenge-fio): the
            // run ends with the others.
            let background = !(w.kbuild.is_empty() && w.thpchallenge.is_empty() && w.task.is_empty());
            for j in 0..f.jobs {
                let body = Box::new(FioSmallFiles::new(shared.clone(), j));
                if background {
                    run.e.spawn_daemon(body);
                } else {
                    run.e.spawn(body);
                }
            }
        }
        // The files are dirty page cache: the run's flusher writes them back.
        if !self.params.is_empty() {
            run.spawn_flusher();
        }
    }
}
