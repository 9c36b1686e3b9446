//! Basic types and constants of the model (docs/model §0.3, §1.1–§1.3): defined in the
//! vocabulary crate (`fraglab_types::page`) and used here under their old path.

pub use fraglab_types::page::*;
