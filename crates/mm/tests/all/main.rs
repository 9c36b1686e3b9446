//! Every integration test of fraglab-mm in one test binary: each file of this directory is a module
//! named as the file, so `cargo test -p fraglab-mm --test all numa::` runs the tests of numa.rs.
//! One binary links once and compiles the shared generic code once, where a binary per file
//! did it 26 times (most of the first `cargo test --workspace`'s build time).

mod bdev;
mod common;
mod compaction;
mod compaction_fast_paths;
mod compaction_props;
mod compaction_sections;
mod damon;
mod hugetlb;
mod kcompactd;
mod kswapd;
mod lru;
mod migration_failures;
mod mlock;
mod numa;
mod page_reporting;
mod pageblock_mixing;
mod pagecache;
mod policy_primitives;
mod props;
mod readahead;
mod reclaim;
mod rules;
mod scenarios;
mod section_30_restore;
mod slab_shrinker_props;
mod slowpath;
mod thp;
mod xa_node;
