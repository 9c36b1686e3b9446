//! The words of fragmentation blame (issue 37, docs/blame.md) shared by the model, which counts
//! the events, and the result schema, which names them.

/// The event kinds' names in the result JSON, in the model's kind order (`BlameKind as usize`
/// in `fraglab_mm::blame`) and the tables' column order.
pub const BLAME_KIND_NAMES: [&str; 6] = [
    "steal",
    "claim_partial",
    "claim_whole",
    "no_fallback",
    "pagecache_unmovable",
    "compact_blocked",
];
