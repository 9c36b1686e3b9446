//! Every integration test of fraglab-sim in one test binary: each file of this directory is a module
//! named as the file, so `cargo test -p fraglab-sim --test all numa::` runs the tests of numa.rs.
//! One binary links once and compiles the shared generic code once, where a binary per file
//! did it 34 times (most of the first `cargo test --workspace`'s build time).

mod bdev;
mod blame;
mod block_census;
mod cancel;
mod census;
mod claim_steal_merge;
mod compare;
mod contention;
mod costs;
mod damon;
mod deferred_split;
mod defrag_mode_snapshot;
mod engine;
mod fio;
mod fixtures;
mod fuzz_corpus;
mod hostile;
mod hugetlb;
mod mlock;
mod numa;
mod ops;
mod page_reporting;
mod phases;
mod policy;
mod program_steps;
mod progress_debug_vm;
mod replay;
mod restore;
mod scale;
mod shapes;
mod slab;
mod snapshot_hostile_boot;
mod timed;
mod timeless_result;
mod tracediff;
mod vmscal;
mod workload;
