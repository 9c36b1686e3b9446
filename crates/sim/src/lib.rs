//! fraglab-sim: the engines around the mm model. This version has the timeless engine, which
//! runs a spec's explicit operations in order; the virtual-time engine arrives later.

pub mod timeless;

pub use timeless::{boot, machine_config, run_ops, tunables, RunError};
