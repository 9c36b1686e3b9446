//! Zones, pageblocks, per-page state and the buddy free lists (docs/model §1.1–§1.4).
//!
//! Models include/linux/mmzone.h and include/linux/pageblock-flags.h. The per-page state is kept
//! as dense arrays (struct of arrays): one state byte and two u32 link words (side by side) per page, so a
//! simulated page costs 9 bytes of host memory plus 1/512 byte of pageblock bits.

use crate::types::*;
use crate::vmstat::{Stat, NR_NUMA_STATS, NR_ZONE_STATS};
use std::collections::VecDeque;

/// "No page": the end of an intrusive list.
pub const NIL: u32 = u32::MAX;

/// What a page frame is, from the allocator's point of view.
///
/// Only the first page of a chunk (the "head") says what the chunk is; the other pages of a
/// chunk are [`PageKind::Tail`], as in the kernel where only the head of a free chunk carries
/// PageBuddy and its order, so merging and splitting touch O(1) pages per step.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PageKind {
    /// No memory at this pfn (a hole in the zone span, or outside every zone).
    Hole = 0,
    /// Present but never given to the buddy allocator (memblock-reserved; present − managed).
    Reserved = 1,
    /// Not the head of anything (a tail page of some chunk).
    Tail = 2,
    /// Head of a free chunk on a buddy free list (PageBuddy).
    Buddy = 3,
    /// Head of a chunk sitting on a per-CPU page list.
    Pcp = 4,
    /// Head of an allocated chunk.
    Allocated = 5,
    /// Head of a free chunk isolated by compaction's free scanner (on `cc.freepages`, off the
    /// buddy lists and out of NR_FREE_PAGES, §9.8).
    Isolated = 6,
}

const KIND_SHIFT: u8 = 4;
const ORDER_MASK: u8 = 0x0f;
const KIND_MASK: u8 = 0x70;
/// The allocated chunk is on an LRU list (PageLRU of the head; tails read the head).
pub const PG_LRU: u8 = 0x80;
/// The free chunk has been reported to the hypervisor (PageReported of a Buddy head, §32.3
/// item 1). The kernel's PG_reported shares its bit with PG_uptodate, which a free page never
/// carries; here it shares the bit with [`PG_LRU`], which a free chunk never carries. Every
/// [`PageArray::set`] clears it, so a chunk loses it whenever it leaves a free list (allocation,
/// absorption by a merge, compaction's isolation: `del_from_free_list` marks the head a tail),
/// while moving it between lists (`move_to_free_list`) keeps it, as in the kernel.
pub const PG_REPORTED: u8 = 0x80;

/// Per-page state, struct of arrays (architecture.md "Data structures").
///
/// Each page has two u32 link words, `a` and `b`, kept side by side in one array (`links`), so
/// that an intrusive-list operation, which reads or writes both words of a page, touches one
/// host cache line per page instead of two. `a`/`b` are the list links (next/prev) of Buddy
/// heads (the kernel's `page->buddy_list`, docs/model §1.4.1); Pcp heads do not use them
/// (NIL: a PCP list is a ring buffer of pfns, [`PcpList`]); for Allocated heads `a` is the
/// owner id given by the caller (folio id) and `b` the migratetype the chunk was allocated
/// with (what page_owner records, docs/model §30.4; read it with
/// [`PageArray::alloc_migratetype`]).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct PageArray {
    pub state: Vec<u8>,
    /// `[a, b]` per page.
    pub links: Vec<[u32; 2]>,
}

impl PageArray {
    pub fn new(nr: usize) -> Self {
        PageArray {
            state: vec![0; nr],
            links: vec![[NIL, NIL]; nr],
        }
    }

    /// Link word `a` of `pfn` (list next; owner id of an allocated head).
    #[inline]
    pub fn a(&self, pfn: u32) -> u32 {
        self.links[pfn as usize][0]
    }

    /// Link word `b` of `pfn` (list prev; allocation migratetype of an allocated head).
    #[inline]
    pub fn b(&self, pfn: u32) -> u32 {
        self.links[pfn as usize][1]
    }

    #[inline]
    pub fn set_a(&mut self, pfn: u32, v: u32) {
        self.links[pfn as usize][0] = v;
    }

    #[inline]
    pub fn set_b(&mut self, pfn: u32, v: u32) {
        self.links[pfn as usize][1] = v;
    }

    /// Both link words at once.
    #[inline]
    pub fn set_ab(&mut self, pfn: u32, a: u32, b: u32) {
        self.links[pfn as usize] = [a, b];
    }

    /// A host-cache hint: starts loading `pfn`'s link words and state byte, which a list
    /// operation on it is about to touch. No effect on the model.
    #[inline]
    pub fn prefetch(&self, pfn: u32) {
        if let (Some(l), Some(st)) = (self.links.get(pfn as usize), self.state.get(pfn as usize)) {
            prefetch(l);
            prefetch(st);
        }
    }

    /// The migratetype an allocated chunk's head was allocated with (the gfp's, or the one
    /// compaction or a claim gave it); meaningless for other pages.
    #[inline]
    pub fn alloc_migratetype(&self, head: u32) -> u32 {
        self.b(head)
    }

    #[inline]
    pub fn kind(&self, pfn: u32) -> PageKind {
        match (self.state[pfn as usize] & KIND_MASK) >> KIND_SHIFT {
            0 => PageKind::Hole,
            1 => PageKind::Reserved,
            2 => PageKind::Tail,
            3 => PageKind::Buddy,
            4 => PageKind::Pcp,
            5 => PageKind::Allocated,
            6 => PageKind::Isolated,
            k => panic!("corrupt page state {k} at pfn {pfn:#x}"),
        }
    }

    #[inline]
    pub fn order(&self, pfn: u32) -> u32 {
        (self.state[pfn as usize] & ORDER_MASK) as u32
    }

    #[inline]
    pub fn is_buddy(&self, pfn: u32) -> bool {
        self.state[pfn as usize] & KIND_MASK == (PageKind::Buddy as u8) << KIND_SHIFT
    }

    /// PageBuddy() && buddy_order() == order (reported or not).
    #[inline]
    pub fn is_buddy_of_order(&self, pfn: u32, order: u32) -> bool {
        self.state[pfn as usize] & !PG_REPORTED == ((PageKind::Buddy as u8) << KIND_SHIFT) | order as u8
    }

    /// PageReported: `pfn` is the head of a free chunk reported to the hypervisor (§32.3).
    #[inline]
    pub fn is_reported(&self, pfn: u32) -> bool {
        self.is_buddy(pfn) && self.flag(pfn, PG_REPORTED)
    }

    #[inline]
    pub fn set(&mut self, pfn: u32, kind: PageKind, order: u32) {
        self.state[pfn as usize] = ((kind as u8) << KIND_SHIFT) | order as u8;
    }

    #[inline]
    pub fn set_flag(&mut self, pfn: u32, flag: u8, on: bool) {
        if on {
            self.state[pfn as usize] |= flag;
        } else {
            self.state[pfn as usize] &= !flag;
        }
    }

    #[inline]
    pub fn flag(&self, pfn: u32, flag: u8) -> bool {
        self.state[pfn as usize] & flag != 0
    }
}

/// A host-cache hint: asks the CPU to start loading the cache line of `p`. No effect on any
/// value (a prefetch never faults), only on how long the next access to `p` takes.
#[inline]
pub fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint: it reads nothing the program can observe and cannot
    // fault; `p` is a valid reference anyway. SSE is part of the x86-64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const T as *const i8)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Pageblock bits (`enum pageblock_bits`, §1.2): 3 bits migratetype, PB_compact_skip and the
/// separate PB_migrate_isolate bit. One byte per pageblock.
pub const PB_MIGRATE_MASK: u8 = 0x07;
pub const PB_COMPACT_SKIP: u8 = 0x08;
pub const PB_MIGRATE_ISOLATE: u8 = 0x10;

/// One doubly linked list head/tail pair of pfns.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListHead {
    pub first: u32,
    pub last: u32,
}

impl Default for ListHead {
    fn default() -> Self {
        ListHead {
            first: NIL,
            last: NIL,
        }
    }
}

impl ListHead {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.first == NIL
    }
}

/// `struct free_area` for all orders (§1.4.1): a list per (order, migratetype), `nr_free` per
/// order, and a count per (order, migratetype) so pagetypeinfo and the invariants need no walk.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct FreeArea {
    pub lists: [[ListHead; MIGRATE_TYPES]; NR_PAGE_ORDERS],
    pub nr_by_type: [[u64; MIGRATE_TYPES]; NR_PAGE_ORDERS],
    pub nr_free: [u64; NR_PAGE_ORDERS],
}

/// PCP list count: 3 types × orders 0..=3, plus two THP lists (§2.1.2).
pub const NR_PCP_LISTS: usize = 14;

/// `order_to_pindex` (§2.1.2): 3·order + mt for orders 0..3; THP lists 12 (non-movable) and 13.
#[inline]
pub fn order_to_pindex(mt: MigrateType, order: u32) -> usize {
    if order > PAGE_ALLOC_COSTLY_ORDER {
        debug_assert_eq!(order, HPAGE_PMD_ORDER);
        12 + (mt == MigrateType::Movable) as usize
    } else {
        (MIGRATE_PCPTYPES as u32 * order + mt as u32) as usize
    }
}

/// `pindex_to_order`.
#[inline]
pub fn pindex_to_order(pindex: usize) -> u32 {
    if pindex >= 12 {
        HPAGE_PMD_ORDER
    } else {
        (pindex / MIGRATE_PCPTYPES) as u32
    }
}

/// `pcp_allowed_order` (§2.1.1): orders 0..=3 and the THP order.
#[inline]
pub fn pcp_allowed_order(order: u32) -> bool {
    order <= PAGE_ALLOC_COSTLY_ORDER || order == HPAGE_PMD_ORDER
}

pub const PCPF_PREV_FREE_HIGH_ORDER: u8 = 1;
pub const PCPF_FREE_HIGH_BATCH: u8 = 2;

/// One per-CPU page list, `pcp->lists[pindex]` (docs/model §2.1): the chunk heads on
/// it, head first.
///
/// The kernel links them through `page->pcp_list`; the model keeps them in a ring buffer of
/// pfns instead of intrusive links through the page array. That suffices because every
/// operation on a PCP list is at one of its ends (a free pushes at the head, a refill appends
/// at the tail, an allocation takes the head, a drain takes the tail, §2.1.4, §2.3, §2.4), and
/// it lets a drain read the chunks it takes next from one buffer instead of chasing a page's
/// link words for each. What it simplifies: the link words of a page on a PCP list are unused
/// (NIL); the order of the list is the buffer's.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct PcpList(VecDeque<u32>);

impl PcpList {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Chunks on the list.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The head (NIL if empty).
    #[inline]
    pub fn first(&self) -> u32 {
        self.0.front().copied().unwrap_or(NIL)
    }

    /// The tail (NIL if empty).
    #[inline]
    pub fn last(&self) -> u32 {
        self.0.back().copied().unwrap_or(NIL)
    }

    /// The chunk heads, head first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// The `i`-th chunk from the tail (0 = the tail), NIL past the head.
    #[inline]
    pub fn nth_from_tail(&self, i: usize) -> u32 {
        let n = self.0.len();
        if i < n {
            self.0[n - 1 - i]
        } else {
            NIL
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, pfn: u32, tail: bool) {
        if tail {
            self.0.push_back(pfn);
        } else {
            self.0.push_front(pfn);
        }
    }

    /// Takes `pfn` off the list; it is at the head or the tail.
    #[inline]
    pub(crate) fn remove_end(&mut self, pfn: u32) {
        if self.0.front() == Some(&pfn) {
            self.0.pop_front();
        } else {
            let last = self.0.pop_back();
            assert_eq!(last, Some(pfn), "pcp list: {pfn:#x} is at neither end");
        }
    }
}

/// `struct per_cpu_pages` (§2).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct PerCpuPages {
    /// Pages (not chunks) on all lists.
    pub count: u64,
    pub high: u64,
    pub high_min: u64,
    pub high_max: u64,
    pub batch: u64,
    pub flags: u8,
    pub alloc_factor: u32,
    pub free_count: u64,
    pub lists: [PcpList; NR_PCP_LISTS],
}

/// Zone flags (§1.1.3).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneFlags {
    pub boosted_watermark: bool,
    pub reclaim_active: bool,
    pub below_high: bool,
}

pub const WMARK_MIN: usize = 0;
pub const WMARK_LOW: usize = 1;
pub const WMARK_HIGH: usize = 2;
pub const WMARK_PROMO: usize = 3;

/// `struct zone` (§1.1.3): one zone of one node.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct Zone {
    pub zone_type: ZoneType,
    /// The node the zone belongs to (`zone_to_nid`); the zone's index in `Mm::zones` is
    /// `nid * MAX_NR_ZONES + zone_type` (the kernel's `pgdat->node_zones[]`, node by node).
    pub nid: u32,
    pub start_pfn: u32,
    pub spanned: u32,
    pub present: u32,
    pub managed: u64,
    /// `_watermark[min, low, high, promo]`, without boost.
    pub wmark: [u64; 4],
    pub watermark_boost: u64,
    pub lowmem_reserve: [u64; MAX_NR_ZONES],
    pub nr_reserved_highatomic: u64,
    pub nr_free_highatomic: u64,
    pub area: FreeArea,
    /// Zone items of /proc/vmstat (NR_FREE_PAGES, NR_FREE_PAGES_BLOCKS, …), signed while
    /// updating so an underflow is caught by the invariant checker rather than wrapped.
    pub stats: [i64; NR_ZONE_STATS],
    pub numa: [u64; NR_NUMA_STATS],
    pub flags: ZoneFlags,
    pub pcp: Vec<PerCpuPages>,
    /// Compaction state that persists across runs (§9.1).
    pub compact: ZoneCompact,
}

/// Per-zone compaction state (§9.1, §9.3): cached scanner positions and deferral.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneCompact {
    /// `compact_cached_migrate_pfn[0]` (async) and `[1]` (sync).
    pub cached_migrate_pfn: [u32; 2],
    pub cached_free_pfn: u32,
    pub init_migrate_pfn: u32,
    pub init_free_pfn: u32,
    pub considered: u32,
    pub defer_shift: u32,
    pub order_failed: u32,
    pub blockskip_flush: bool,
}

impl Zone {
    pub fn new(zone_type: ZoneType, nr_cpus: usize) -> Zone {
        Zone {
            zone_type,
            nid: 0,
            start_pfn: 0,
            spanned: 0,
            present: 0,
            managed: 0,
            wmark: [0; 4],
            watermark_boost: 0,
            lowmem_reserve: [0; MAX_NR_ZONES],
            nr_reserved_highatomic: 0,
            nr_free_highatomic: 0,
            area: FreeArea::default(),
            stats: [0; NR_ZONE_STATS],
            numa: [0; NR_NUMA_STATS],
            flags: ZoneFlags::default(),
            pcp: vec![PerCpuPages::default(); nr_cpus],
            compact: ZoneCompact::default(),
        }
    }

    #[inline]
    pub fn end_pfn(&self) -> u32 {
        self.start_pfn + self.spanned
    }

    /// `zone_spans_pfn`.
    #[inline]
    pub fn spans(&self, pfn: u32) -> bool {
        pfn >= self.start_pfn && pfn < self.end_pfn()
    }

    /// `populated_zone`.
    #[inline]
    pub fn populated(&self) -> bool {
        self.present > 0
    }

    /// `wmark_pages(z, i)`: the stored watermark plus the boost (§3.1.5).
    #[inline]
    pub fn wmark_pages(&self, i: usize) -> u64 {
        self.wmark[i] + self.watermark_boost
    }

    #[inline]
    pub fn stat(&self, s: Stat) -> i64 {
        self.stats[s as usize]
    }

    #[inline]
    pub fn nr_free_pages(&self) -> i64 {
        self.stats[Stat::nr_free_pages as usize]
    }

    /// `free_area_empty(area, mt)` at an order.
    #[inline]
    pub fn free_list_empty(&self, order: u32, mt: MigrateType) -> bool {
        self.area.lists[order as usize][mt as usize].is_empty()
    }

    /// Head of free_list[order][mt] (`get_page_from_free_area`), allocations take the head.
    #[inline]
    pub fn free_list_first(&self, order: u32, mt: MigrateType) -> Option<u32> {
        let f = self.area.lists[order as usize][mt as usize].first;
        (f != NIL).then_some(f)
    }
}

/// One zone of the machine to build: where it is and how much of it the buddy allocator gets.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ZoneConfig {
    pub zone_type: ZoneType,
    /// The NUMA node the zone belongs to (0 on a single-node machine).
    pub nid: u32,
    pub start_pfn: u32,
    pub spanned: u32,
    pub present: u32,
    pub managed: u32,
}

/// The machine: its nodes' zones and its CPUs (§1.1). Zones are listed node by node, each
/// node's in kernel order, at rising pfns; the nodes are the nids the zones name (0..N, each
/// with at least one populated zone).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MachineConfig {
    pub zones: Vec<ZoneConfig>,
    pub nr_cpus: u32,
    /// The node of each CPU (`cpu_to_node`); empty: every CPU is on node 0.
    pub cpu_node: Vec<u32>,
}

/// The most nodes a machine may have (the model's nodemasks are 64-bit words).
pub const MAX_NUMNODES: u32 = fraglab_types::numa::MAX_NODES;

/// Where later nodes start: node boundaries are aligned to a memory section (128 MiB on
/// x86-64, `SECTION_SIZE_BITS` = 27), as firmware lays out NUMA memory ranges.
const SECTION_PAGES: u32 = 1 << (27 - 12);

/// Errors in a machine description.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct MachineError(pub String);

impl std::fmt::Display for MachineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MachineError {}

/// DMA zone of the reference VM (S2 zoneinfo): start_pfn 1, spanned 4095, present 3998,
/// managed 3840.
const DMA_START: u32 = 1;
const DMA_SPANNED: u32 = 4095;
const DMA_PRESENT: u32 = 3998;
const DMA_MANAGED: u32 = 3840;
/// x86-64: DMA32 ends at 4 GiB; the PCI hole takes [3 GiB, 4 GiB) (S2: DMA32 present ends at
/// pfn 786432 = 3 GiB, spanned ends at 1048576).
const DMA32_END: u32 = 1 << 20;
const PCI_HOLE_START: u32 = 3 << 18;

impl MachineConfig {
    /// An x86-64 layout for `bytes` of RAM, like the reference VM (§1.1.2): DMA below 16 MiB
    /// (optional), DMA32 up to the 3 GiB PCI hole, Normal from 4 GiB on.
    ///
    /// Simplification (documented): present − managed pages (memblock reservations: memmap,
    /// kernel image, firmware) are 1/64 of each zone's present pages (the 64-byte struct page per
    /// 4 KiB page) and are placed at the start of the zone's present range; the DMA zone copies
    /// the reference VM's figures. Holes are at the end of a zone's span. On real machines both
    /// are scattered; a spec can give exact zones instead.
    pub fn x86_64(bytes: u64, dma: bool, nr_cpus: u32) -> Result<MachineConfig, MachineError> {
        let pages = bytes / PAGE_SIZE;
        if pages < PAGEBLOCK_NR_PAGES as u64 {
            return Err(MachineError(format!(
                "{bytes} bytes is smaller than one pageblock ({} KiB)",
                PAGEBLOCK_NR_PAGES as u64 * PAGE_SIZE / 1024
            )));
        }
        if pages > (1u64 << 28) {
            return Err(MachineError(format!("{bytes} bytes is larger than 1 TiB")));
        }
        let pages = pages as u32;
        let mut zones = Vec::new();
        let reserve = |present: u32| present / 64;
        let mut next = 0u32;
        let mut left = pages;
        if dma && pages > 2 * DMA32_END / 256 {
            // DMA is only laid out when there is memory above it (≥ 32 MiB).
            zones.push(ZoneConfig {
                zone_type: ZoneType::Dma,
                nid: 0,
                start_pfn: DMA_START,
                spanned: DMA_SPANNED,
                present: DMA_PRESENT,
                managed: DMA_MANAGED,
            });
            next = DMA_START + DMA_SPANNED;
            left -= next;
        }
        let dma32_present = left.min(PCI_HOLE_START - next);
        let has_normal = left > dma32_present;
        let dma32_spanned = if has_normal {
            DMA32_END - next
        } else {
            dma32_present
        };
        zones.push(ZoneConfig {
            zone_type: ZoneType::Dma32,
            nid: 0,
            start_pfn: next,
            spanned: dma32_spanned,
            present: dma32_present,
            managed: dma32_present - reserve(dma32_present),
        });
        left -= dma32_present;
        if has_normal {
            zones.push(ZoneConfig {
                zone_type: ZoneType::Normal,
                nid: 0,
                start_pfn: DMA32_END,
                spanned: left,
                present: left,
                managed: left - reserve(left),
            });
        }
        let m = MachineConfig {
            zones,
            nr_cpus,
            cpu_node: Vec::new(),
        };
        m.validate()?;
        Ok(m)
    }

    /// A multi-node x86-64 layout: node 0 is [`MachineConfig::x86_64`] of `node_bytes[0]`
    /// (DMA, DMA32 below the PCI hole, Normal from 4 GiB); each later node is one Normal zone of
    /// `node_bytes[k]`, starting at the next memory-section boundary after the previous node
    /// (and not below 4 GiB), with the same 1/64 of its pages reserved. CPUs are numbered node
    /// by node: `node_cpus[0]` CPUs on node 0, then node 1's, and so on (the layout of a
    /// two-socket server with SMT numbering per socket; firmware may interleave them instead,
    /// which changes nothing the model reads but the names).
    pub fn x86_64_nodes(
        node_bytes: &[u64],
        dma: bool,
        node_cpus: &[u32],
    ) -> Result<MachineConfig, MachineError> {
        if node_bytes.is_empty() || node_bytes.len() != node_cpus.len() {
            return Err(MachineError(format!(
                "{} node sizes and {} CPU counts: expected one of each per node",
                node_bytes.len(),
                node_cpus.len()
            )));
        }
        if node_bytes.len() > MAX_NUMNODES as usize {
            return Err(MachineError(format!(
                "{} nodes: at most {MAX_NUMNODES}",
                node_bytes.len()
            )));
        }
        let nr_cpus: u32 = node_cpus.iter().sum();
        let mut m = MachineConfig::x86_64(node_bytes[0], dma, nr_cpus.max(1))?;
        for (nid, &bytes) in node_bytes.iter().enumerate().skip(1) {
            let pages = bytes / PAGE_SIZE;
            if pages < PAGEBLOCK_NR_PAGES as u64 || pages > (1u64 << 28) {
                return Err(MachineError(format!(
                    "node {nid}: {bytes} bytes: expected one pageblock (2 MiB) to 1 TiB"
                )));
            }
            let start = m
                .end_pfn()
                .div_ceil(SECTION_PAGES)
                .saturating_mul(SECTION_PAGES)
                .max(DMA32_END);
            let pages = pages as u32;
            if start as u64 + pages as u64 > u32::MAX as u64 {
                return Err(MachineError("nodes end beyond 16 TiB".into()));
            }
            m.zones.push(ZoneConfig {
                zone_type: ZoneType::Normal,
                nid: nid as u32,
                start_pfn: start,
                spanned: pages,
                present: pages,
                managed: pages - pages / 64,
            });
        }
        m.cpu_node = node_cpus
            .iter()
            .enumerate()
            .flat_map(|(nid, &n)| std::iter::repeat_n(nid as u32, n as usize))
            .collect();
        if node_bytes.len() == 1 {
            m.cpu_node.clear();
        }
        m.validate()?;
        Ok(m)
    }

    /// The number of nodes: one more than the highest nid of any zone.
    pub fn nr_nodes(&self) -> u32 {
        self.zones.iter().map(|z| z.nid + 1).max().unwrap_or(1)
    }

    /// `cpu_to_node`.
    pub fn cpu_to_node(&self, cpu: u32) -> u32 {
        self.cpu_node.get(cpu as usize).copied().unwrap_or(0)
    }

    /// Checks zones are ordered, non-overlapping, and present ≤ spanned, managed ≤ present.
    pub fn validate(&self) -> Result<(), MachineError> {
        if self.nr_cpus == 0 || self.nr_cpus > 256 {
            return Err(MachineError(format!("{} CPUs: expected 1..=256", self.nr_cpus)));
        }
        let mut end = 0u64;
        let mut last: Option<(u32, ZoneType)> = None;
        let mut managed = 0u64;
        let nr_nodes = self.nr_nodes();
        if nr_nodes > MAX_NUMNODES {
            return Err(MachineError(format!("{nr_nodes} nodes: at most {MAX_NUMNODES}")));
        }
        for nid in 0..nr_nodes {
            if !self.zones.iter().any(|z| z.nid == nid && z.present > 0) {
                return Err(MachineError(format!(
                    "node {nid} has no memory: every node from 0 to {} needs a populated zone",
                    nr_nodes - 1
                )));
            }
        }
        if !self.cpu_node.is_empty() {
            if self.cpu_node.len() != self.nr_cpus as usize {
                return Err(MachineError(format!(
                    "{} CPU nodes given for {} CPUs",
                    self.cpu_node.len(),
                    self.nr_cpus
                )));
            }
            if let Some(&n) = self.cpu_node.iter().find(|&&n| n >= nr_nodes) {
                return Err(MachineError(format!("a CPU is on node {n}, which has no memory")));
            }
        }
        for z in &self.zones {
            if let Some((ln, l)) = last {
                if z.nid < ln {
                    return Err(MachineError(format!(
                        "a zone of node {} follows node {ln}: list the zones node by node",
                        z.nid
                    )));
                }
                if z.nid == ln && z.zone_type <= l {
                    return Err(MachineError(format!(
                        "zone {} follows {}: zones must be in kernel order, each once",
                        z.zone_type.name(),
                        l.name()
                    )));
                }
            }
            if (z.start_pfn as u64) < end {
                return Err(MachineError(format!(
                    "zone {} overlaps the previous zone",
                    z.zone_type.name()
                )));
            }
            if z.present > z.spanned || z.managed > z.present {
                return Err(MachineError(format!(
                    "zone {}: expected managed ≤ present ≤ spanned",
                    z.zone_type.name()
                )));
            }
            if matches!(z.zone_type, ZoneType::Movable | ZoneType::Device) && z.present > 0 {
                return Err(MachineError(format!("zone {} must be empty", z.zone_type.name())));
            }
            end = z.start_pfn as u64 + z.spanned as u64;
            managed += z.managed as u64;
            last = Some((z.nid, z.zone_type));
        }
        if end > u32::MAX as u64 {
            return Err(MachineError("zones end beyond 16 TiB".into()));
        }
        if managed < PAGEBLOCK_NR_PAGES as u64 {
            return Err(MachineError(format!(
                "{managed} managed pages is smaller than one pageblock ({PAGEBLOCK_NR_PAGES} pages)"
            )));
        }
        Ok(())
    }

    /// One past the highest pfn of any zone.
    pub fn end_pfn(&self) -> u32 {
        self.zones
            .iter()
            .map(|z| z.start_pfn + z.spanned)
            .max()
            .unwrap_or(0)
    }
}
