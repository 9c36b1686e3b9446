//! The whole configuration of a model at boot: the machine, the allocator tunables, the THP,
//! compaction and page-cache settings and the model switches, built in one place by whoever
//! reads a spec (`fraglab_sim::boot`) and handed to [`crate::Mm::from_config`]. After boot a setting
//! changes only as a sysctl write would change it on the kernel (a test may write one).

use crate::compaction::CompactionConfig;
use crate::filemap::PagecacheConfig;
use crate::huge_memory::ThpConfig;
use crate::mmzone::MachineConfig;
use crate::node::Tunables;
use crate::policy::PolicyFactory;

/// Everything that configures an [`crate::Mm`] at boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MmConfig {
    /// Zones and CPUs (§1.1).
    pub machine: MachineConfig,
    /// The page allocator's knobs (§17).
    pub tun: Tunables,
    /// The THP knobs (§11.1).
    pub thp: ThpConfig,
    /// `vm.extfrag_threshold`, `vm.compaction_proactiveness`,
    /// `vm.compact_unevictable_allowed` (§9, §29.2).
    pub compaction: CompactionConfig,
    /// The block device's readahead sizes (§23.1).
    pub pagecache: PagecacheConfig,
    /// `[model] xa_nodes`: page-cache xarray nodes as reclaimable slab (`xa_node.rs`).
    pub xa_nodes: bool,
    /// The swap device's size in pages (0: none, §10.3.6).
    pub swap_pages: u64,
    /// Check every invariant after each operation (`debug_vm.rs`).
    pub debug_vm: bool,
    /// `page_reporting_order` of a free page reporting device (0..=10, §32.1); `None`: no
    /// device (the default, a machine without virtio-balloon reporting).
    pub page_reporting_order: Option<u32>,
    /// `vm.zone_reclaim_mode` (0..=7; node reclaim, `numa.rs`); inert on one node.
    pub zone_reclaim_mode: u32,
    /// `[model] policy` with the model switches stacked on it (`policy.rs`); the kernel's by
    /// default.
    pub policy: PolicyFactory,
}

impl MmConfig {
    /// `machine` with every other setting at the kernel's default (the model's defaults for
    /// the switches): 6.18 as it boots.
    pub fn new(machine: MachineConfig) -> MmConfig {
        MmConfig {
            machine,
            tun: Tunables::default(),
            thp: ThpConfig::default(),
            compaction: CompactionConfig::default(),
            pagecache: PagecacheConfig::default(),
            xa_nodes: false,
            swap_pages: 0,
            debug_vm: false,
            page_reporting_order: None,
            zone_reclaim_mode: 0,
            policy: PolicyFactory::default(),
        }
    }
}
