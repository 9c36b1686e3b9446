//! Small machines for the crate's unit tests (one definition instead of one per module).

use crate::types::PAGEBLOCK_NR_PAGES;
use crate::{MachineConfig, Mm, Tunables, ZoneConfig, ZoneType};

fn zone(zone_type: ZoneType, start_pfn: u32, pages: u32) -> ZoneConfig {
    ZoneConfig {
        zone_type,
        nid: 0,
        start_pfn,
        spanned: pages,
        present: pages,
        managed: pages,
    }
}

/// One DMA32 zone of `blocks` pageblocks from pfn 4096, one CPU, default tunables.
pub(crate) fn dma32(blocks: u32) -> Mm {
    let m = MachineConfig {
        cpu_node: Vec::new(),
        zones: vec![zone(ZoneType::Dma32, 4096, blocks * PAGEBLOCK_NR_PAGES)],
        nr_cpus: 1,
    };
    Mm::new(&m, Tunables::default()).unwrap()
}

/// DMA32 (8,192 pages from pfn 4096) and Normal (16,384 pages after it), two CPUs: small, so
/// that frees cross PCP `high` and reach `free_pcppages_bulk` often, runs cross zones, and
/// allocations run the buddy lists low. Traces the events of `trace_mask`.
pub(crate) fn dma32_normal(trace_mask: u32) -> Mm {
    let m = MachineConfig {
        cpu_node: Vec::new(),
        zones: vec![
            zone(ZoneType::Dma32, 4096, 8192),
            zone(ZoneType::Normal, 4096 + 8192, 16384),
        ],
        nr_cpus: 2,
    };
    let mut mm = Mm::new(&m, Tunables::default()).unwrap();
    mm.set_trace_mask(trace_mask);
    mm
}
