//! fraglab-sim: the engines around the mm model: the timeless engine, which runs a spec's
//! explicit operations in order, and the discrete-event engine with virtual time, CPUs, tasks
//! and a cost model.

pub mod anon;
pub mod boot;
pub mod checkpoint;
pub mod compare;
pub mod cost;
pub mod engine;
pub mod error;
pub mod fork;
pub mod lock;
pub mod metrics;
pub mod replay;
pub mod restore;
pub mod slab;
pub mod snapshot;
pub mod timed;
pub mod timeless;
pub mod tracediff;
pub mod workload;

pub use boot::{boot, machine_config, mm_config, tunables};
pub use error::RunError;
pub use timeless::{run_ops, run_ops_result};
