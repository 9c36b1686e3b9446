//! fraglab-mm: a deterministic model of the physical memory manager of Linux 6.18.
//!
//! Each module models the kernel file of the same name; every modelled function names the kernel
//! function it follows and the section of the model reference (docs/model/) it implements.
//! Pure and deterministic: no clock, no threads, no I/O.

pub mod bdev;
pub mod blame;
pub mod buddy;
pub mod compaction;
pub mod config;
pub mod damon;
pub mod debug_vm;
pub mod fault_run;
pub mod filemap;
pub mod folio;
pub mod free_run;
pub mod gfp;
pub mod host_mem;
pub mod huge_memory;
pub mod hugetlb;
pub mod kcompactd;
pub mod kswapd;
pub mod migrate;
pub mod mlock;
pub mod mmzone;
pub mod node;
pub mod numa;
pub mod page_alloc;
pub mod page_reporting;
pub mod policy;
pub mod restore;
pub mod slowpath;
pub mod swap;
#[cfg(test)]
mod test_machines;
pub mod trace;
pub mod types;
pub mod vmscan;
pub mod vmstat;
mod vmstat_items;
pub mod workingset;
pub mod writeback;
pub mod xa_node;
pub mod xarray;

pub use config::MmConfig;
pub use gfp::{AllocFlags, Gfp};
pub use mmzone::{MachineConfig, MachineError, ZoneConfig};
pub use node::{DefragStage, Mm, Tunables, Wakeup};
pub use restore::{Restore, RestoreFolio};
pub use types::{MigrateType, Pfn, ZoneType};
