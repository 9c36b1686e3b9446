//! The template of a policy plug-in: copy this file to `src/NAME.rs`, rename the type, change
//! `INFO`, override the hooks your policy changes, and add `NAME` to the `policies!` list in
//! `lib.rs`. (This file itself is compiled and tested but not in the list: as written it is the
//! kernel's policy under another name.)
//!
//! Every hook you do not override keeps Linux 6.18's behaviour (`fraglab_mm::policy::Policy`'s
//! defaults). The hooks, with the kernel function each stands for:
//!
//! - `nofragment_everywhere(defrag_mode)`: ALLOC_NOFRAGMENT on every allocation (§8 D1–D5).
//! - `kswapd_wake_order(defrag_mode, order)`: the order kswapd is woken with (§8 D6).
//! - `free_pageblock_watermarks(defrag_mode)`: kswapd/kcompactd count free pageblocks (§8 D7–D10).
//! - `compaction_isolates_large_folios()`, `split_large_folios_before_migration()`,
//!   `compaction_free_page_split()`: how compaction treats large folios (§9.8.5).
//! - `pagecache_folio_gfp(base, hint, order, min_order)`: the gfp of a page-cache folio (§12.5).
//! - `costly_background()`: costly NORETRY requests do no direct work (§12.5 V4).
//! - `has_fallback_hook()` + `rmqueue_fallback(mm, req)`: where a request goes when its own
//!   free lists are empty (§6.2); the policy may use the allocator's primitives on `mm`.
//! - `deferred_work(mm)`: work asked for with `mm.request_policy_work()`, run at the end of the
//!   next allocation that may sleep.
//! - `counters()`: the policy's own counters, in the result.
//!
//! A policy must be deterministic (no clocks, no randomness of its own) and `Send`. State it
//! keeps lives in its struct: each booted model gets a fresh instance from `INFO.make`.

use fraglab_mm::policy::Policy;

use crate::PluginInfo;

/// A policy that changes nothing.
#[derive(Debug, Default)]
pub struct Template;

/// What the registry shows and builds.
pub const INFO: PluginInfo = PluginInfo {
    name: "template",
    summary: "the kernel's policy under another name (a starting point for a new policy)",
    make: || Box::new(Template),
};

impl Policy for Template {
    fn name(&self) -> String {
        INFO.name.to_string()
    }

    // Override hooks here, e.g.:
    //
    // fn kswapd_wake_order(&self, _defrag_mode: bool, order: u32) -> u32 {
    //     order.max(fraglab_mm::types::PAGEBLOCK_ORDER)
    // }
    //
    // A policy with state of its own (fields its decisions read) also implements
    // `save_state` and `restore_state` (serde + postcard, as contiguitas.rs does), so that a
    // checkpoint holds it; the defaults save nothing.
}
