//! Tracepoint events in ftrace text form (`kernel-model.md` §15).

use crate::gfp::Gfp;

/// One tracepoint event with the fields of its format file (samples/tracefs-formats).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// kmem:mm_page_alloc. `pfn` None = failed allocation (prints page=(null) pfn=0x0).
    MmPageAlloc {
        pfn: Option<u32>,
        order: u32,
        gfp: Gfp,
        migratetype: i32,
    },
    /// kmem:mm_page_free.
    MmPageFree { pfn: u32, order: u32 },
    /// kmem:mm_page_alloc_zone_locked.
    MmPageAllocZoneLocked {
        pfn: u32,
        order: u32,
        migratetype: i32,
        percpu_refill: bool,
    },
    /// kmem:mm_page_pcpu_drain.
    MmPagePcpuDrain { pfn: u32, order: u32, migratetype: i32 },
    /// kmem:mm_page_alloc_extfrag.
    MmPageAllocExtfrag {
        pfn: u32,
        alloc_order: i32,
        fallback_order: i32,
        alloc_migratetype: i32,
        fallback_migratetype: i32,
        change_ownership: bool,
    },
}

/// An event with its context: when, on which CPU, in which task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    pub ts_ns: u64,
    pub cpu: u32,
    pub pid: u32,
    pub event: TraceEvent,
}
