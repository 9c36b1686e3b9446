//! fraglab-mm: a deterministic model of the physical memory manager of Linux 6.18.
//!
//! Each module models the kernel file of the same name; every modelled function names the kernel
//! function it follows and the section of `shared/reference/kernel-model.md` it implements.
//! Pure and deterministic: no clock, no threads, no I/O.

pub mod gfp;
pub mod trace;
pub mod types;
pub mod vmstat;
mod vmstat_items;
