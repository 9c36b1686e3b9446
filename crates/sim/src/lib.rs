//! fraglab-sim: the engines around the mm model: the timeless engine, which runs a spec's
//! explicit operations in order, and the discrete-event engine with virtual time, CPUs, tasks
//! and a cost model.

pub mod anon;
pub mod compare;
pub mod cost;
pub mod engine;
pub mod metrics;
pub mod slab;
pub mod timed;
pub mod timeless;
pub mod workload;

pub use timeless::{boot, machine_config, run_ops, tunables, RunError};
