//! Tracepoint events in ftrace text form (docs/model §15).
//!
//! What this module produces is the text of `/sys/kernel/tracing/trace` (and `trace_pipe`) for
//! the five kmem page-allocator events, the fifteen `compaction:` events, the two
//! `migrate:mm_migrate_pages*` events, the `vmscan:` events and `damon:damos_before_apply`, byte for byte as the S2 kernel (Linux 6.18, x86-64, KASAN
//! and LOCKDEP off, `CONFIG_SLAB_OBJ_EXT=y`) prints them with the default trace options
//! (`irq-info` on, `record-tgid` off, `trace_clock` = `local`), with one documented exception:
//!
//! * **`%p`.** The kernel hashes `%p` by default (`page=000000003a2b1c4d`: a 32-bit siphash of the
//!   address, zero-padded to 16 digits), which cannot be reproduced. We print what the kernel prints
//!   with `options/hash-ptr` cleared: the raw `struct page` address, `%px` style (16 lower-case hex
//!   digits, no `0x`), faked as [`VMEMMAP_BASE`]` + pfn * 64`. On the live S2 machine, with
//!   hash-ptr off, every captured line satisfied `page == 0xffffea0000000000 + pfn * 64`, so our lines
//!   are identical to the kernel's in that mode. A NULL page (failed `mm_page_alloc`) prints
//!   `0000000000000000`: since 2019 vsprintf prints NULL `%p` unhashed as zeros, not `(null)`
//!   (verified live with `kmem:kfree` on a NULL pointer). The parser accepts `(null)` as well.
//!
//! Line layout (`trace_print_context` + `trace_print_lat_fmt` + `trace_print_time` +
//! `trace_raw_output_prep`):
//!
//! ```text
//! {comm:>16}-{pid:<7} [{cpu:03}] {5 latency flags} {secs:>5}.{usecs:06}: {event}: {fields}
//! ```
//!
//! The timestamp is the ns clock rounded to the nearest microsecond (`ns2usecs` adds 500 ns), so
//! [`parse_trace_line`] gives back `ts_ns` as a whole number of microseconds.
//!
//! Symbolic fields (`__print_symbolic`: zone names, compaction results, migrate modes and
//! reasons) print the kernel's name for a value in its table and `0x%lx` of the value otherwise,
//! as `trace_print_symbols_seq` does. The zone table (`ZONE_TYPE` in mmflags.h) has no entry for
//! `ZONE_DEVICE`, so zone index 4 prints `0x4`. The compaction and migrate events print no
//! pointer, so their lines are the kernel's exactly. The compaction variants other than
//! [`TraceEvent::MmCompactionKcompactdSleep`] carry no node id and print node 0 (S2 has one node).

mod event;
mod parse;
mod record;
mod render;
mod tables;
#[cfg(test)]
mod tests;

pub use event::TraceEvent;
pub use parse::parse_trace_line;
pub use record::{render_trace, render_trace_header, LatFlags, TraceRecord};
pub use tables::{
    parse_gfp_flags, show_gfp_flags, show_reclaim_flags, show_throttle_flags, trace_reclaim_flags,
    vmscan_throttle_reason, COMPACT_STATUS, GFP_TRACE_NAMES, MIGRATE_MODE_NAMES, MIGRATE_REASON_NAMES,
    MR_COMPACTION, RECLAIM_WB_FLAGS, VMSCAN_THROTTLE_CONGESTED, VMSCAN_THROTTLE_FLAGS,
    VMSCAN_THROTTLE_ISOLATED, VMSCAN_THROTTLE_NOPROGRESS, VMSCAN_THROTTLE_WRITEBACK, ZONE_NAMES,
};

/// `pageblock_order` on S2 (x86-64, 4 KiB pages, no hugetlb override): printed by
/// mm_page_alloc_extfrag, and the threshold of its `fragmenting` field.
pub const PAGEBLOCK_ORDER: i32 = 9;

/// The fixed `vmemmap_base` we fake `struct page` addresses with (x86-64 default without KASLR of
/// the memory map; also what the live S2 machine uses).
pub const VMEMMAP_BASE: u64 = 0xffff_ea00_0000_0000;

/// `sizeof(struct page)` on S2.
pub const STRUCT_PAGE_SIZE: u64 = 64;

/// The fake `struct page *` of a pfn: `vmemmap_base + pfn * sizeof(struct page)`.
#[inline]
pub const fn page_address(pfn: u32) -> u64 {
    VMEMMAP_BASE.wrapping_add(pfn as u64 * STRUCT_PAGE_SIZE)
}
