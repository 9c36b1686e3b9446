//! Workload generators as engine tasks, one file each: the THP burst process ("Hugealloc" of
//! seed 001, [`thp_burst`]), a parallel kernel build ([`kbuild`]), mmtests' thpchallenge
//! ([`thpchallenge`]), pgbench with its checkpointer ([`pgbench`]), the vm-scalability cases
//! ([`vmscal`]), fio's small-file writers ([`fio`]) and `[[workload.task]]` programs
//! ([`program`]). They are built from the primitives a workload has — anonymous mappings
//! ([`AnonVma`](crate::anon::AnonVma)), page-cache reads and writes, kernel stacks, reclaimable
//! slab — each charged through the [`crate::cost::CostModel`] (the shared helpers are in
//! [`common`]).
//!
//! Every generator implements [`Generator`]: given its `[[workload.*]]` entries (the spec's
//! `*Params`, read directly; values that depend on the machine are derived in the generator),
//! it registers its files and spawns its tasks on the engine, and after the run it writes its
//! figures into the [`RunResult`]. [`generators`] lists them; the timed run
//! (`crate::timed`) iterates over that list. A new generator is one new file plus one line in
//! [`generators`].
//!
//! Simplifications (until the page-cache read/write paths of docs/model §12 are wired
//! here): a source-file read allocates order-0 page-cache folios directly; object files are
//! order-0 dirty page-cache folios cleaned by a simple flusher (every 5 s, folios dirty for
//! 30 s: `dirty_writeback_centisecs` = 500, `dirty_expire_centisecs` = 3000).

use std::cell::RefCell;
use std::rc::Rc;

use fraglab_spec::result::RunResult;
use fraglab_spec::{FsMetadata, MappingKind, Spec, WorkloadSpec};

use crate::engine::Engine;
use crate::metrics::Metrics;

pub mod common;
pub mod fio;
pub mod kbuild;
pub mod pgbench;
pub mod program;
pub mod thp_burst;
pub mod thpchallenge;
pub mod vmscal;

pub use common::{fault_cost, PageCacheFlusher};
pub use fio::{FioShared, FioSmallFiles};
pub use kbuild::{Flusher, KbuildShared, KbuildWorker};
pub use pgbench::{PgbenchCheckpointer, PgbenchClient, PgbenchShared};
pub use program::ProgramTask;
pub use thp_burst::ThpBurst;
pub use thpchallenge::ThpChallenge;
pub use vmscal::{VmScalShared, VmScalTask};

pub type Shared<T> = Rc<RefCell<T>>;

/// A workload generator: the tasks of one kind of `[[workload.*]]` entry.
pub trait Generator {
    /// Registers the generator's files in the model and spawns its tasks, for each of its
    /// entries in the spec (none: nothing).
    fn spawn(&mut self, run: &mut Run<'_>);

    /// Writes the generator's own figures into the run's result (after the run).
    fn result(&self, _metrics: &Metrics, _r: &mut RunResult) {}

    /// The generator as a checkpoint holds it (`crate::checkpoint`); `None`: it cannot be
    /// checkpointed.
    fn saved(&self) -> Option<crate::checkpoint::GeneratorRef<'_>> {
        None
    }
}

/// The generators of a `[workload]`, in the order they spawn their tasks. The order is part of
/// the run (it fixes the tasks' pids, the mappings' ids and the CPUs' run queues at time 0):
/// a new generator goes at the end.
/// The source tag of each generator of [`generators`], in its order (fragmentation blame,
/// issue 37).
pub const GENERATOR_TAGS: [&str; 7] = [
    "kbuild",
    "thp_burst",
    "thpchallenge",
    "pgbench",
    "vm_scalability",
    "fio_smallfiles",
    "task",
];

pub fn generators(w: &WorkloadSpec) -> Vec<Box<dyn Generator>> {
    vec![
        Box::new(kbuild::Kbuild::new(&w.kbuild)),
        Box::new(thp_burst::ThpBursts::new(&w.thp_burst)),
        Box::new(thpchallenge::ThpChallenges::new(&w.thpchallenge)),
        Box::new(pgbench::Pgbench::new(&w.pgbench)),
        Box::new(vmscal::VmScalability::new(&w.vm_scalability)),
        Box::new(fio::Fio::new(&w.fio_smallfiles)),
        Box::new(program::Programs::new(&w.task)),
    ]
}

/// What the generators of a timed run share while they set up: the engine, the spec (its
/// machine sizes some generators' defaults; its `[workload]` says which generators run beside
/// which), the run's metrics and its writeback flusher.
pub struct Run<'a> {
    /// The engine; a generator sets `e.spawn_binding` ([`Run::bind`]) before spawning an
    /// entry's tasks and [`Run::unbind`] after.
    pub e: &'a mut Engine,
    pub spec: &'a Spec,
    pub w: &'a WorkloadSpec,
    pub metrics: Shared<Metrics>,
    flusher: bool,
    /// The ext4 filesystems mounted for the generators' files (`Run::ext4_for`), by where
    /// they are.
    ext4: Vec<(FilesOn, u32)>,
}

/// Where a generator's files are, which decides the filesystem that keeps their metadata
/// (`[model] fs_metadata`, docs/model §33).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilesOn {
    /// The run's directory (the host engine's `slab` and fio directories, every file without
    /// `[host] loop_images`).
    RunDir,
    /// With `[host] loop_images`, the image of a file set's mapping kind (crates/host
    /// loops.rs: `xfs` → XFS, `large_folios` → ext4, `no_large_folios` → ext4 data=journal,
    /// a filesystem of its own).
    Image(MappingKind),
}

impl<'a> Run<'a> {
    /// The tasks spawned from now on run and allocate as `b` says (`numa_node`,
    /// `mempolicy` of the entry).
    pub fn bind(&mut self, b: fraglab_types::numa::NumaBind) {
        self.e.spawn_binding = crate::engine::Binding {
            node: b.node,
            mempolicy: b.mempolicy,
        };
    }

    /// Back to the default binding (any CPU, local policy).
    pub fn unbind(&mut self) {
        self.e.spawn_binding = Default::default();
    }

    pub fn new(e: &'a mut Engine, spec: &'a Spec, w: &'a WorkloadSpec, metrics: Shared<Metrics>) -> Run<'a> {
        Run {
            e,
            spec,
            w,
            metrics,
            flusher: false,
            ext4: Default::default(),
        }
    }

    /// The ext4 filesystem (mm's `ext4_mount`, one per place, mounted at the first call) that
    /// keeps the metadata of files of a task file set with mapping kind `kind` (`None`: files
    /// that are always in the run directory — `slab` steps, fio, kbuild), or `None` when their
    /// metadata is not block-device page cache: `[model] fs_metadata = "off"`, a file set on
    /// an XFS loop image, or the run directory on XFS (docs/model §33.3: XFS metadata
    /// buffers are not page cache).
    pub fn ext4_for(&mut self, kind: Option<MappingKind>) -> Option<u32> {
        let on = match kind {
            Some(k) if self.spec.host.loop_images => FilesOn::Image(k),
            _ => FilesOn::RunDir,
        };
        let ext4 = match (self.spec.model.fs_metadata, on) {
            (FsMetadata::Off, _) => false,
            (_, FilesOn::Image(k)) => k != MappingKind::Xfs,
            (m, FilesOn::RunDir) => m == FsMetadata::Ext4,
        };
        if !ext4 {
            return None;
        }
        if let Some(&(_, fs)) = self.ext4.iter().find(|(o, _)| *o == on) {
            return Some(fs);
        }
        let fs = self.e.mm.ext4_mount();
        self.ext4.push((on, fs));
        Some(fs)
    }

    /// Spawns the run's writeback flusher daemon ([`PageCacheFlusher`], until the workload's
    /// duration) unless it runs already: one for the run, however many workloads dirty page
    /// cache (the kernel has one writeback worker per device, not one per writer).
    pub fn spawn_flusher(&mut self) {
        if !std::mem::replace(&mut self.flusher, true) {
            self.e.spawn_daemon(Box::new(PageCacheFlusher {
                until_ns: self.w.duration_ns,
            }));
        }
    }

    /// Pages the page allocator manages (all zones).
    pub fn managed_pages(&self) -> u64 {
        self.e.mm.zones.iter().map(|z| z.managed).sum()
    }
}

/// Bytes to pages (4 KiB), rounded up.
pub fn pages_of(bytes: u64) -> u64 {
    bytes.div_ceil(4096)
}
