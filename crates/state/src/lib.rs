//! Real state and real streams (issue 21): the files a live machine is captured into and the
//! simulator boots from or replays.
//!
//! - [`container`]: the one on-disk layout both files use: a magic, a version, a JSON header,
//!   then tagged sections, each compressed (deflate) and checksummed, read in bounded chunks.
//!   Every error names the file and the byte offset (`StateError`).
//! - [`page`]: one byte per pfn, the page's class as /proc/kpageflags and /proc/kpagecount show
//!   it (docs/model §30.2), and [`page::classify`].
//! - [`snapshot`]: a snapshot of a machine's physical memory: the per-pfn bytes and the /proc
//!   texts and knobs read around them (§30.1, §30.5 item 6).
//! - [`reconstruct`]: the initial state inferred from a snapshot (§30.3–§30.5): zones, free
//!   chunks at their orders, folios of their kinds, pageblock types fitted to pagetypeinfo, and
//!   how well the result matches the captured tables.
//! - [`damon`]: a live kdamond's monitoring regions and ages, as a snapshot carries them
//!   (docs/model §27.2 item 3), read from `damon:damon_aggregated` lines.
//! - [`trace`]: a recorded tracepoint stream (ftrace text lines, streamed) with the snapshot
//!   taken at its start.
//!
//! This crate reads and writes files and infers; it does not link the model (`fraglab-mm`) or
//! the host engine. The simulator turns a [`reconstruct::Reconstruction`] into a booted model
//! (`fraglab_sim::restore`), the host engine writes these files (`fraglab_host::snapshot`,
//! `fraglab_host::record`).

pub mod container;
pub mod damon;
pub mod error;
pub mod page;
pub mod page_owner;
pub mod procparse;
pub mod reconstruct;
pub mod snapshot;
pub mod textfile;
pub mod trace;

pub use error::StateError;
