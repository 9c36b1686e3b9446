//! The node (`pglist_data`) and the model's top-level state: zones, per-page state, pageblock
//! bits, tunables, counters, trace buffer and the wake-ups handed to whoever owns the clock.
//!
//! Boot-time setup follows docs/model §1.1–§1.2 (memory map), §2.2 (PCP sizes), §3.1–§3.2
//! (watermarks, lowmem reserve).

use crate::mmzone::*;
use crate::trace::{TraceEvent, TraceRecord};
use crate::types::*;
use crate::vmstat::{calculate_normal_threshold, PagesetView, Stat, ZoneView, NR_STATS};

/// `MIN_PERCPU_PAGELIST_HIGH_FRACTION`.
pub const MIN_PERCPU_PAGELIST_HIGH_FRACTION: u32 = 8;
/// `CONFIG_PCP_BATCH_SCALE_MAX` on S2.
pub const PCP_BATCH_SCALE_MAX: u32 = 5;

/// The kernel knobs the page allocator reads (§17), with the 6.18 defaults.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// `vm.min_free_kbytes`; None = computed at boot as the kernel does (§3.1.1–2).
    pub min_free_kbytes: Option<u64>,
    pub watermark_scale_factor: u64,
    pub watermark_boost_factor: u64,
    pub lowmem_reserve_ratio: [u64; MAX_NR_ZONES],
    /// `vm.defrag_mode` (§8).
    pub defrag_mode: bool,
    pub percpu_pagelist_high_fraction: u32,
    /// THP enabled ≠ never at boot: khugepaged raises min_free_kbytes (§3.1.2).
    pub thp_enabled: bool,
    /// `vm.swappiness` (0..=200).
    pub swappiness: u32,
    /// `vm.vfs_cache_pressure` (slab shrinking scale, 100 = default).
    pub vfs_cache_pressure: u32,
    /// `vm.dirty_background_ratio` and `vm.dirty_ratio`: percent of the dirtyable memory at
    /// which background writeback starts and writers are throttled (`global_dirty_limits`).
    pub dirty_background_ratio: u32,
    pub dirty_ratio: u32,
    /// `vm.dirty_expire_centisecs`: how old dirty data must be before the flusher's periodic
    /// pass writes it back (`wb_over_bg_thresh`/`wb_check_old_data_flush`).
    pub dirty_expire_centisecs: u32,
    /// `vm.dirty_writeback_centisecs`: the interval of the flusher's periodic pass; 0 disables
    /// periodic writeback (`wb_wakeup_delayed`).
    pub dirty_writeback_centisecs: u32,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            min_free_kbytes: None,
            watermark_scale_factor: 10,
            watermark_boost_factor: 15000,
            lowmem_reserve_ratio: [256, 256, 32, 0, 0],
            defrag_mode: false,
            percpu_pagelist_high_fraction: 0,
            thp_enabled: true,
            swappiness: 60,
            vfs_cache_pressure: 100,
            dirty_background_ratio: 10,
            dirty_ratio: 20,
            dirty_expire_centisecs: 3000,
            dirty_writeback_centisecs: 500,
        }
    }
}

pub use fraglab_types::switches::DefragStage;

impl Mm {
    /// §8 D1–D5 are in force: `vm.defrag_mode` as the policy reads it
    /// ([`crate::policy::Policy::nofragment_everywhere`]).
    #[inline]
    pub fn defrag_nofragment(&self) -> bool {
        self.policy.nofragment_everywhere(self.tun.defrag_mode)
    }

    /// §8 D7–D10 are in force: kswapd and kcompactd count free pageblocks against the high
    /// watermark ([`crate::policy::Policy::free_pageblock_watermarks`]).
    #[inline]
    pub fn defrag_watermarks(&self) -> bool {
        self.policy.free_pageblock_watermarks(self.tun.defrag_mode)
    }

    /// The policy in force (`[model] policy` with the model switches stacked on it).
    pub fn policy(&self) -> &dyn crate::policy::Policy {
        self.policy.as_ref()
    }

    /// Asks for the policy's [`crate::policy::Policy::deferred_work`] at the end of the next
    /// allocation that may sleep.
    pub fn request_policy_work(&mut self) {
        self.policy_work_pending = true;
    }

    /// Runs the policy's deferred work now (the policy is taken out for the call; a
    /// zero-sized placeholder stands in).
    pub(crate) fn run_policy_work(&mut self) {
        self.policy_work_pending = false;
        let mut p = std::mem::replace(&mut self.policy, Box::new(crate::policy::Kernel));
        p.deferred_work(self);
        self.policy = p;
    }

    /// Replaces the policy (a test, or a boot that builds its own).
    pub fn set_policy(&mut self, p: Box<dyn crate::policy::Policy>) {
        self.policy_fallback_hook = p.has_fallback_hook();
        self.policy = p;
    }

    /// Gives the policy back the state [`crate::policy::Policy::save_state`] saved (a
    /// checkpoint's).
    pub fn restore_policy_state(&mut self, state: &[u8]) -> Result<(), String> {
        self.policy.restore_state(state)
    }
}

/// A wake-up of a kernel thread requested by the model; the engine that owns the clock
/// schedules it (architecture.md: "mm returns the wake-up as data").
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wakeup {
    /// `wakeup_kswapd(zone, gfp, order, highest_zoneidx)`.
    Kswapd {
        nid: u32,
        zone: ZoneType,
        order: u32,
        highest_zoneidx: ZoneType,
        gfp: u32,
    },
    /// `wakeup_kcompactd(pgdat, order, highest_zoneidx)` found the node suitable and woke the
    /// thread (§9.11.2).
    Kcompactd {
        nid: u32,
        order: u32,
        highest_zoneidx: usize,
    },
    /// Free page reporting's `schedule_delayed_work(&prdev->work, PAGE_REPORTING_DELAY)`
    /// (§32.2 item 1): run [`Mm::page_reporting_process`] 2 s from now, unless a pass is already
    /// pending (a pending delayed work is not queued twice).
    PageReporting,
}

/// Fallback allocations by Weiner's classes (§6.5), indexed [requested type][fallback type]:
/// "claimer" = whole free block claimed (fallback order ≥ 9), "steal" = partially used block
/// claimed (change_ownership), "pollute" = single chunk stolen, block keeps its type. Not a
/// kernel counter: the kernel shows these only through mm_page_alloc_extfrag.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct FallbackStats {
    pub claim_whole: [[u64; MIGRATE_PCPTYPES]; MIGRATE_PCPTYPES],
    pub claim_partial: [[u64; MIGRATE_PCPTYPES]; MIGRATE_PCPTYPES],
    pub steal: [[u64; MIGRATE_PCPTYPES]; MIGRATE_PCPTYPES],
}

/// The model of one machine: its nodes' zones (`zones`, node by node), the memory map and the
/// per-node state (reclaim, compaction threads), its state grouped by mechanism as
/// the kernel groups it in `struct pglist_data` and `struct zone`: the memory map and pageblock
/// bits at the top, then reclaim, compaction, the page cache and THP each in a structure of
/// their own, the task context and trace buffer of the current operation, and the requests the
/// model hands to whoever owns the clock.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Mm {
    pub zones: Vec<Zone>,
    pub pages: PageArray,
    pub blocks: Vec<u8>,
    /// Pages of live folios in each pageblock by the folio's mobility (Unmovable, Movable,
    /// Reclaimable: `folio::folio_mobility`), kept by `account_folio`. Chunks allocated with
    /// `alloc_pages` outside the folio API are not counted.
    pub block_content: Vec<[u32; 3]>,
    pub tun: Tunables,
    /// The min_free_kbytes in force (computed or given).
    pub min_free_kbytes: u64,
    pub nr_cpus: u32,
    /// Node items, globals and events of /proc/vmstat, indexed by `Stat` (zone items live in
    /// the zones).
    #[serde(with = "serde_big_array::BigArray")]
    pub stats: [u64; NR_STATS],
    /// Fallback events by class (§6.5), counted whether or not tracing is on.
    pub fallbacks: FallbackStats,
    /// Check every invariant after each operation (architecture.md "Errors", debug-vm).
    pub debug_vm: bool,
    /// The folio registry.
    pub folios: crate::folio::FolioTable,
    /// Reclaim: the LRU lists, kswapd, swap, shadows, the slab shrinker (§10).
    pub reclaim: Reclaim,
    /// Compaction: its knobs and switches, kcompactd, the capture request, the last migration
    /// (§9, §13).
    pub compact: Compact,
    /// The page cache: its policy switches, index, mappings, xarray nodes, dirty pages (§12).
    pub cache: PageCacheState,
    /// THP knobs (§11.1) and the per-size mTHP stats.
    pub thp: crate::huge_memory::ThpConfig,
    pub mthp: crate::huge_memory::MthpStats,
    /// The deferred split queue and its shrinker (§31.3).
    pub deferred_split: crate::huge_memory::DeferredSplit,
    /// The default hstate's hugetlb pool (§28).
    pub hugetlb: crate::hugetlb::Hstate,
    /// Free page reporting's device and the host's backing of guest pages (§32); inert without
    /// a device.
    pub reporting: crate::page_reporting::PageReporting,
    /// The task the current operation runs for and the time, put on trace records and folios
    /// (set by the engine; 0 and pid 1 without a clock).
    pub cur: Current,
    /// The trace buffer and which events it records.
    pub trace: Tracing,
    /// What the model asks of whoever owns the clock and the tasks.
    pub outbox: Outbox,
    /// The work of the last allocation and the work summed since boot (the cost model's input).
    pub work: Work,
    /// The nodes: distances, zonelists, memory-policy state, `vm.zone_reclaim_mode` (`numa.rs`).
    pub numa: crate::numa::Numa,
    /// Fragmentation blame (issue 37, `blame.rs`): `None` unless turned on
    /// ([`Mm::enable_blame`]); each event point costs one branch on it when off.
    pub blame: Option<Box<crate::blame::Blame>>,
    /// The policy (issue 37, `policy.rs`): the decision points a seed or a plug-in changes.
    #[serde(skip, default = "crate::policy::kernel_policy")]
    pub(crate) policy: Box<dyn crate::policy::Policy>,
    /// Whether the policy overrides `__rmqueue`'s fallback (read on every empty free list).
    pub(crate) policy_fallback_hook: bool,
    /// The policy asked for [`crate::policy::Policy::deferred_work`].
    pub(crate) policy_work_pending: bool,
    pub(crate) end_pfn: u32,
}

/// Reclaim's node state (`pglist_data`'s lruvec, kswapd fields; the swap device; the slab
/// shrinker), §10.
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub struct Reclaim {
    /// Each node's LRU lists (§10.3), indexed by nid.
    pub lruvec: Vec<crate::vmscan::Lruvec>,
    /// Each node's kswapd state (§10.1–§10.2) and `pgdat->kswapd_failures`, indexed by nid.
    pub kswapd: Vec<crate::kswapd::KswapdState>,
    pub kswapd_failures: Vec<u32>,
    /// The swap device (none by default) and the page cache's shadow entries.
    pub swap: crate::swap::SwapDevice,
    pub workingset: crate::workingset::Workingset,
    /// Reclaimable slab folios (`set_slab_shrinkable`), oldest first, with their tokens.
    pub shrinkable_slab: std::collections::VecDeque<(crate::folio::FolioId, u64)>,
    /// The shrinker of those caches (its deferred scan work).
    pub slab_shrinker: crate::vmscan::SlabShrinker,
    /// Folios reclaimed by `shrink_folio_list` since boot (the cost model charges reclaim per
    /// folio and per page).
    pub reclaimed_folios: u64,
}

/// Compaction's node state (§9).
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub struct Compact {
    /// Model switches and compaction knobs.
    pub cfg: crate::compaction::CompactionConfig,
    /// A direct compactor's capture request (`task_capc`, §9.10), while one runs.
    pub(crate) capc: Option<crate::compaction::CaptureControl>,
    /// Each node's kcompactd state (§9.11.1), indexed by nid.
    pub kcompactd: Vec<crate::compaction::KcompactdState>,
    /// What the last `migrate_pages` call did, and how many pages it was given.
    pub last_migrate: crate::migrate::MigrateStats,
    pub last_migrate_nr_pages: u64,
}

/// The page cache (§12).
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub struct PageCacheState {
    /// Page-cache allocation policy switches (§12.5).
    pub cfg: crate::filemap::PagecacheConfig,
    /// The page cache (mapping, index) → folio.
    pub index: crate::filemap::PageCache,
    /// The page-cache mappings (`Mm::add_mapping`; id = index + 1).
    pub mappings: Vec<crate::filemap::Mapping>,
    /// The page cache's xarray nodes (`radix_tree_node` slab), when modelled.
    pub xa: crate::xa_node::XaNodes,
    /// Dirty page-cache pages (`NR_FILE_DIRTY`).
    pub nr_dirty: u64,
    /// A lower bound of `dirtied_ns` over the dirty page-cache folios (0: not known yet):
    /// `writeback_expired` skips its pass (over the dirty-tagged folios by age, `filemap.rs`)
    /// while no dirty folio can have expired. Host-side bookkeeping with no kernel counterpart (the kernel's flusher finds
    /// expired inodes on its dirtied_when-ordered b_dirty list instead of walking the cache).
    pub oldest_dirty_ns: u64,
    /// The writeback device queue (PG_writeback's timeline, `writeback.rs`).
    pub writeback: crate::writeback::WritebackQueue,
    /// The ext4 filesystems whose metadata lives in their block devices' page cache, and the
    /// `buffer_head` slab cache (`bdev.rs`, §33).
    pub bdev: crate::bdev::BdevState,
}

/// The task the current operation runs for (`current`), and the time.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct Current {
    pub now_ns: u64,
    pub pid: u32,
    pub comm: String,
    /// `pcpu_drain_mutex` is held by another CPU's `drain_all_pages` at this moment (§2.5): set
    /// by the discrete-event engine, which keeps the mutex as a resource in virtual time,
    /// before each task step; always false without a clock (one thing runs at a time).
    pub drain_mutex_held: bool,
    /// Who holds `zone->lock` and `lru_lock` when, for async compaction's trylocks (§24.5):
    /// set by the clocked engine before each task step; `None` without a clock.
    pub locks_busy: Option<crate::compaction::LocksBusy>,
    /// The task's memory policy (`set_mempolicy`), set by the engine with the task.
    pub mempolicy: crate::numa::MemPolicy,
}

impl Default for Current {
    fn default() -> Self {
        Current {
            now_ns: 0,
            pid: 1,
            comm: "fraglab".to_string(),
            drain_mutex_held: false,
            locks_busy: None,
            mempolicy: Default::default(),
        }
    }
}

/// The trace buffer.
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub struct Tracing {
    /// Recorded trace events, if tracing is on.
    pub buf: Vec<TraceRecord>,
    /// Which events are recorded (bit per `trace_kind`).
    pub mask: u32,
}

/// Requests the model hands to whoever owns the clock and the tasks.
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub struct Outbox {
    /// Wake-ups requested since the engine last took them.
    pub wakeups: Vec<Wakeup>,
    /// Tasks the OOM killer killed, in order.
    pub oom_victims: Vec<u32>,
}

/// Allocation work, for the cost model.
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub struct Work {
    /// What the last `alloc_pages` call's slow path did.
    pub last_alloc: crate::slowpath::AllocWork,
    /// Allocation work summed since boot.
    pub sum: crate::slowpath::WorkSum,
    /// The buddy-list work done under `zone->lock` since boot by the allocation and free paths
    /// (the engine's lock model; `drain_all_pages` from the slow path excluded: its caller is
    /// charged for it with the drain).
    pub zone_lock: ZoneLockWork,
}

/// `zone->lock` holds of the allocation and free paths (cumulative; an engine charges the
/// difference between two readings). Counted per call of the kernel function that takes the
/// lock: `rmqueue_bulk` (one hold for a PCP refill of `count` chunks), `rmqueue_buddy` (one
/// chunk), `free_pcppages_bulk` (one hold for the chunks it frees) and the direct buddy frees
/// of `free_one_page` / `split_large_buddy` (orders the PCP lists do not cache, Isolate
/// blocks). One counter for all zones: the engine keeps one zone lock (docs/costs.md).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneLockWork {
    /// Times the lock was taken.
    pub acquisitions: u64,
    /// Chunks moved between the buddy lists and a PCP list or a caller under it.
    pub chunks: u64,
}

impl ZoneLockWork {
    /// One hold moving `chunks` chunks.
    #[inline]
    pub(crate) fn hold(&mut self, chunks: u64) {
        self.acquisitions += 1;
        self.chunks += chunks;
    }
}

/// Bits of `mm.trace.mask`.
pub mod trace_kind {
    pub const MM_PAGE_ALLOC: u32 = 1;
    pub const MM_PAGE_FREE: u32 = 2;
    pub const MM_PAGE_ALLOC_ZONE_LOCKED: u32 = 4;
    pub const MM_PAGE_PCPU_DRAIN: u32 = 8;
    pub const MM_PAGE_ALLOC_EXTFRAG: u32 = 16;
    /// The kmem events.
    pub const KMEM: u32 = 31;
    /// compaction:mm_compaction_isolate_migratepages / _isolate_freepages.
    pub const COMPACTION_ISOLATE: u32 = 32;
    /// compaction:mm_compaction_begin / _end / _migratepages.
    pub const COMPACTION_RUN: u32 = 64;
    /// compaction:mm_compaction_suitable / _finished / _try_to_compact_pages.
    pub const COMPACTION_DECIDE: u32 = 128;
    /// compaction:mm_compaction_deferred / _defer_compaction / _defer_reset.
    pub const COMPACTION_DEFER: u32 = 256;
    /// compaction:mm_compaction_wakeup_kcompactd / _kcompactd_wake / _kcompactd_sleep.
    pub const COMPACTION_KCOMPACTD: u32 = 512;
    pub const COMPACTION: u32 = 32 | 64 | 128 | 256 | 512;
    /// migrate:mm_migrate_pages_start / mm_migrate_pages.
    pub const MIGRATE: u32 = 1 << 20;
    /// vmscan:mm_vmscan_kswapd_sleep / _kswapd_wake / _wakeup_kswapd.
    pub const VMSCAN_KSWAPD: u32 = 1 << 21;
    /// vmscan:mm_vmscan_direct_reclaim_begin / _end.
    pub const VMSCAN_DIRECT: u32 = 1 << 22;
    /// vmscan:mm_vmscan_lru_isolate / _lru_shrink_inactive / _lru_shrink_active.
    pub const VMSCAN_LRU: u32 = 1 << 23;
    /// vmscan:mm_vmscan_throttled.
    pub const VMSCAN_THROTTLED: u32 = 1 << 24;
    /// vmscan:mm_vmscan_reclaim_pages.
    pub const VMSCAN_RECLAIM_PAGES: u32 = 1 << 25;
    pub const VMSCAN: u32 =
        VMSCAN_KSWAPD | VMSCAN_DIRECT | VMSCAN_LRU | VMSCAN_THROTTLED | VMSCAN_RECLAIM_PAGES;
    /// damon:damos_before_apply.
    pub const DAMOS_BEFORE_APPLY: u32 = 1 << 26;
    /// The damon events.
    pub const DAMON: u32 = DAMOS_BEFORE_APPLY;
    pub const ALL: u32 = KMEM | COMPACTION | MIGRATE | VMSCAN | DAMON;

    /// Maps a tracepoint name (with or without the `kmem:` prefix) to its bit.
    pub fn from_name(name: &str) -> Option<u32> {
        if name == "compaction:*" {
            return Some(COMPACTION);
        }
        if name == "migrate:*" {
            return Some(MIGRATE);
        }
        if name == "vmscan:*" {
            return Some(VMSCAN);
        }
        if name == "damon:*" {
            return Some(DAMON);
        }
        let n = name
            .strip_prefix("kmem:")
            .or_else(|| name.strip_prefix("compaction:"))
            .or_else(|| name.strip_prefix("migrate:"))
            .or_else(|| name.strip_prefix("vmscan:"))
            .or_else(|| name.strip_prefix("damon:"))
            .unwrap_or(name);
        Some(match n {
            "mm_compaction_isolate_migratepages" | "mm_compaction_isolate_freepages" => COMPACTION_ISOLATE,
            "mm_compaction_begin" | "mm_compaction_end" | "mm_compaction_migratepages" => COMPACTION_RUN,
            "mm_compaction_suitable" | "mm_compaction_finished" | "mm_compaction_try_to_compact_pages" => {
                COMPACTION_DECIDE
            }
            "mm_compaction_deferred" | "mm_compaction_defer_compaction" | "mm_compaction_defer_reset" => {
                COMPACTION_DEFER
            }
            "mm_compaction_wakeup_kcompactd"
            | "mm_compaction_kcompactd_wake"
            | "mm_compaction_kcompactd_sleep" => COMPACTION_KCOMPACTD,
            "mm_migrate_pages" | "mm_migrate_pages_start" => MIGRATE,
            "mm_vmscan_kswapd_sleep" | "mm_vmscan_kswapd_wake" | "mm_vmscan_wakeup_kswapd" => VMSCAN_KSWAPD,
            "mm_vmscan_direct_reclaim_begin" | "mm_vmscan_direct_reclaim_end" => VMSCAN_DIRECT,
            "mm_vmscan_lru_isolate" | "mm_vmscan_lru_shrink_inactive" | "mm_vmscan_lru_shrink_active" => {
                VMSCAN_LRU
            }
            "mm_vmscan_throttled" => VMSCAN_THROTTLED,
            "mm_vmscan_reclaim_pages" => VMSCAN_RECLAIM_PAGES,
            "damos_before_apply" => DAMOS_BEFORE_APPLY,
            "mm_page_alloc" => MM_PAGE_ALLOC,
            "mm_page_free" => MM_PAGE_FREE,
            "mm_page_alloc_zone_locked" => MM_PAGE_ALLOC_ZONE_LOCKED,
            "mm_page_pcpu_drain" => MM_PAGE_PCPU_DRAIN,
            "mm_page_alloc_extfrag" => MM_PAGE_ALLOC_EXTFRAG,
            "*" => KMEM,
            _ => return None,
        })
    }
}

/// `int_sqrt`.
fn int_sqrt(x: u64) -> u64 {
    if x < 2 {
        return x;
    }
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

fn rounddown_pow_of_two(x: u64) -> u64 {
    if x == 0 {
        0
    } else {
        1 << (63 - x.leading_zeros())
    }
}

impl Mm {
    /// Boots `machine` with the allocator tunables `tun` and every other setting at its default
    /// ([`crate::config::MmConfig::new`]).
    pub fn new(machine: &MachineConfig, tun: Tunables) -> Result<Mm, MachineError> {
        Mm::from_config(&crate::config::MmConfig {
            tun,
            ..crate::config::MmConfig::new(machine.clone())
        })
    }

    /// Boots a machine configured by `cfg`: lays out the zones, marks every pageblock MOVABLE, hands the managed
    /// pages to the buddy allocator in naturally aligned max-order chunks (memblock_free_all →
    /// __free_pages_core, freed to the list tail), then sets up watermarks, lowmem reserves and
    /// PCP sizes as the kernel does at boot (§1.2.3, §3.1, §3.2, §2.2).
    pub fn from_config(cfg: &crate::config::MmConfig) -> Result<Mm, MachineError> {
        let machine = &cfg.machine;
        machine.validate()?;
        let mut mm = Mm::blank(cfg, machine.end_pfn());
        let mut zones = std::mem::take(&mut mm.zones);
        for zc in &machine.zones {
            let z = &mut zones[zc.nid as usize * MAX_NR_ZONES + zc.zone_type.idx()];
            z.start_pfn = zc.start_pfn;
            z.spanned = zc.spanned;
            z.present = zc.present;
            z.managed = zc.managed as u64;
            // Present pages: reserved first, then managed; the rest of the span is a hole.
            let reserved = zc.present - zc.managed;
            for pfn in zc.start_pfn..zc.start_pfn + reserved {
                mm.pages.set(pfn, PageKind::Reserved, 0);
            }
            for pfn in zc.start_pfn + reserved..zc.start_pfn + zc.present {
                mm.pages.set(pfn, PageKind::Tail, 0);
            }
        }
        mm.zones = zones;
        for zc in &machine.zones {
            let zi = zc.nid as usize * MAX_NR_ZONES + zc.zone_type.idx();
            let reserved = zc.present - zc.managed;
            let mut pfn = zc.start_pfn + reserved;
            let end = zc.start_pfn + zc.present;
            while pfn < end {
                let mut order = MAX_PAGE_ORDER;
                while order > 0 && (pfn & ((1 << order) - 1) != 0 || pfn + (1 << order) > end) {
                    order -= 1;
                }
                mm.boot_free(zi, pfn, order);
                pfn += 1 << order;
            }
        }
        mm.finish_boot(cfg);
        Ok(mm)
    }

    /// The model before its memory map is laid out: every zone empty, every page a hole, every
    /// pageblock MOVABLE, the configuration's settings in place (the first half of
    /// [`Mm::from_config`], shared with [`Mm::from_restore`](crate::restore)).
    pub(crate) fn blank(cfg: &crate::config::MmConfig, end_pfn: u32) -> Mm {
        let nr_cpus = cfg.machine.nr_cpus;
        let mut numa = crate::numa::Numa::new(&cfg.machine);
        numa.zone_reclaim_mode = cfg.zone_reclaim_mode;
        let zones: Vec<Zone> = (0..numa.nr_nodes)
            .flat_map(|nid| {
                ZoneType::ALL.iter().map(move |&t| Zone {
                    nid,
                    ..Zone::new(t, nr_cpus as usize)
                })
            })
            .collect();
        let nr_blocks = (end_pfn as usize).div_ceil(PAGEBLOCK_NR_PAGES as usize);
        let policy = cfg.policy.build();
        Mm {
            zones,
            pages: PageArray::new(end_pfn as usize),
            blocks: vec![MigrateType::Movable as u8; nr_blocks],
            block_content: vec![[0; 3]; nr_blocks],
            tun: cfg.tun.clone(),
            min_free_kbytes: 0,
            nr_cpus,
            stats: [0; NR_STATS],
            fallbacks: FallbackStats::default(),
            debug_vm: cfg.debug_vm,
            folios: Default::default(),
            reclaim: Reclaim {
                lruvec: vec![Default::default(); numa.nr_nodes as usize],
                kswapd: vec![Default::default(); numa.nr_nodes as usize],
                kswapd_failures: vec![0; numa.nr_nodes as usize],
                ..Default::default()
            },
            compact: Compact {
                cfg: cfg.compaction.clone(),
                kcompactd: vec![Default::default(); numa.nr_nodes as usize],
                ..Default::default()
            },
            cache: PageCacheState {
                cfg: cfg.pagecache,
                ..Default::default()
            },
            thp: cfg.thp.clone(),
            mthp: Default::default(),
            deferred_split: Default::default(),
            hugetlb: Default::default(),
            reporting: crate::page_reporting::PageReporting::new(cfg.page_reporting_order, end_pfn),
            cur: Current::default(),
            trace: Tracing::default(),
            outbox: Outbox::default(),
            work: Work::default(),
            numa,
            blame: None,
            policy_fallback_hook: policy.has_fallback_hook(),
            policy_work_pending: false,
            policy,
            end_pfn,
        }
    }

    /// The boot steps after the memory map is laid out (the second half of
    /// [`Mm::from_config`]): min_free_kbytes, watermarks, lowmem reserves, PCP sizes, the
    /// compaction scanners' cached positions, swap, the xarray-node model, kcompactd, and the
    /// free page reporting device's registration (§32.1: it requests the first pass).
    pub(crate) fn finish_boot(&mut self, cfg: &crate::config::MmConfig) {
        let layout: Vec<_> = self
            .zones
            .iter()
            .map(|z| (z.nid, z.zone_type, z.populated()))
            .collect();
        self.numa.build_zonelists(&layout);
        self.setup_min_free_kbytes();
        self.setup_per_zone_wmarks();
        self.setup_per_zone_lowmem_reserve();
        self.setup_pcp();
        for zi in 0..self.zones.len() {
            self.reset_cached_positions(zi);
        }
        self.reclaim.swap.total = cfg.swap_pages;
        self.set_xa_nodes(cfg.xa_nodes);
        for nid in 0..self.numa.nr_nodes {
            let k = self.kcompactd_max_zoneidx(nid);
            let timeout = (self.compact.cfg.proactiveness > 0)
                .then_some(crate::compaction::HPAGE_FRAG_CHECK_INTERVAL_MSEC);
            let kc = &mut self.compact.kcompactd[nid as usize];
            kc.highest_zoneidx = k;
            kc.next_timeout_ms = timeout;
        }
        self.page_reporting_register();
    }

    /// Changes the settings of a running model to `cfg`'s, as writes of every knob's value in
    /// `cfg` (a knob a spec leaves unset is written with its default) would (a warm fork,
    /// issue 37):
    /// - the allocator tunables, with the watermarks, lowmem reserves and PCP sizes
    ///   recomputed when what they derive from changed (`min_free_kbytes_sysctl_handler`,
    ///   `watermark_scale_factor_sysctl_handler`, `lowmem_reserve_ratio_sysctl_handler`,
    ///   `percpu_pagelist_high_fraction_sysctl_handler`; §3.1–§3.2, §2.2). `vm.min_free_kbytes`
    ///   has no fixed default: left unset it is not written, and the value in force stays;
    /// - THP switched on or off: khugepaged's `set_recommended_min_free_kbytes`
    ///   ([`Mm::thp_min_free_kbytes_update`]), then the THP knobs;
    /// - compaction's knobs (kcompactd's proactive timer re-armed per
    ///   `vm.compaction_proactiveness`); the block device's readahead sizes (files already
    ///   open keep theirs); a fresh instance of the configuration's policy.
    ///
    /// `cfg`'s machine and boot-only settings (swap size, xarray
    /// nodes, free page reporting, zone_reclaim_mode, debug-vm) are not read: the caller
    /// checks they are the model's.
    pub fn apply_settings(&mut self, cfg: &crate::config::MmConfig) {
        let old = std::mem::replace(&mut self.tun, cfg.tun.clone());
        let mut wmarks = old.watermark_scale_factor != self.tun.watermark_scale_factor;
        // `min_free_kbytes_sysctl_handler`: a written value is the user's. A configuration
        // without the knob writes nothing: the value in force stays.
        match self.tun.min_free_kbytes {
            Some(v) if old.min_free_kbytes != Some(v) => {
                self.min_free_kbytes = v;
                wmarks = true;
            }
            Some(_) => {}
            None => self.tun.min_free_kbytes = old.min_free_kbytes,
        }
        if old.thp_enabled != self.tun.thp_enabled {
            self.thp_min_free_kbytes_update();
            wmarks = true;
        }
        if wmarks {
            // `setup_per_zone_wmarks` ends with `zone_pcp_update` of every zone: the PCP high
            // limits derive from the low watermark.
            self.setup_per_zone_wmarks();
        }
        if old.lowmem_reserve_ratio != self.tun.lowmem_reserve_ratio {
            self.setup_per_zone_lowmem_reserve();
        }
        if wmarks || old.percpu_pagelist_high_fraction != self.tun.percpu_pagelist_high_fraction {
            self.setup_pcp();
        }
        self.thp = cfg.thp.clone();
        let proactive_was = self.compact.cfg.proactiveness > 0;
        self.compact.cfg = cfg.compaction.clone();
        if proactive_was != (self.compact.cfg.proactiveness > 0) {
            let timeout = (self.compact.cfg.proactiveness > 0)
                .then_some(crate::compaction::HPAGE_FRAG_CHECK_INTERVAL_MSEC);
            for kc in &mut self.compact.kcompactd {
                kc.next_timeout_ms = timeout;
            }
        }
        self.cache.cfg.ra_pages = cfg.pagecache.ra_pages;
        self.cache.cfg.io_pages = cfg.pagecache.io_pages;
        self.set_policy(cfg.policy.build());
    }

    /// khugepaged's `set_recommended_min_free_kbytes` as `start_stop_khugepaged` calls it when
    /// THP is switched at run time (§3.1.2): THP on raises min_free_kbytes to the recommended
    /// value if that is larger (a user's value included); THP off recalculates it
    /// (`calculate_min_free_kbytes`), unless the user's value is larger. Both read
    /// `nr_free_buffer_pages` as it is now (managed minus the high watermark of each zone up
    /// to Normal), not the boot-time managed count. The caller sets the watermarks.
    fn thp_min_free_kbytes_update(&mut self) {
        let free_buffer: u64 = self
            .zones
            .iter()
            .filter(|z| z.zone_type <= ZoneType::Normal)
            .map(|z| z.managed.saturating_sub(z.wmark[WMARK_HIGH]))
            .sum();
        if self.tun.thp_enabled {
            self.min_free_kbytes = self
                .min_free_kbytes
                .max(self.thp_recommended_min_free_kbytes(free_buffer));
        } else {
            let new = int_sqrt(free_buffer * (PAGE_SIZE >> 10) * 16);
            if self.tun.min_free_kbytes.is_none_or(|user| new > user) {
                self.min_free_kbytes = new.clamp(128, 262144);
            }
        }
    }

    /// Frees one boot chunk through the normal merge path (to the tail, FPI_TO_TAIL).
    fn boot_free(&mut self, zi: usize, pfn: u32, order: u32) {
        let mt = self.block_mt(pfn);
        self.pages.set(pfn, PageKind::Tail, 0);
        self.free_one_page_core(zi, pfn, order, mt, true);
    }

    /// The sum of managed pages of zones ≤ Normal (`nr_free_buffer_pages` at boot, when no page
    /// is allocated and the high watermarks are still 0).
    fn lowmem_managed(&self) -> u64 {
        self.zones
            .iter()
            .filter(|z| z.zone_type <= ZoneType::Normal)
            .map(|z| z.managed)
            .sum()
    }

    /// `calculate_min_free_kbytes` and khugepaged's `set_recommended_min_free_kbytes` (§3.1.1–2).
    fn setup_min_free_kbytes(&mut self) {
        if let Some(v) = self.tun.min_free_kbytes {
            self.min_free_kbytes = v;
            return;
        }
        let lowmem_kbytes = self.lowmem_managed() * (PAGE_SIZE >> 10);
        let mut v = int_sqrt(lowmem_kbytes * 16).clamp(128, 262144);
        if self.tun.thp_enabled {
            v = v.max(self.thp_recommended_min_free_kbytes(self.lowmem_managed()));
        }
        self.min_free_kbytes = v;
    }

    /// khugepaged's `set_recommended_min_free_kbytes` (§3.1.2): two pageblocks per populated
    /// zone up to Normal plus `MIGRATE_PCPTYPES²` more for fallbacks, at most 5 % of
    /// `free_buffer` (`nr_free_buffer_pages`), in kB.
    fn thp_recommended_min_free_kbytes(&self, free_buffer: u64) -> u64 {
        let nr_zones = self
            .zones
            .iter()
            .filter(|z| z.populated() && z.zone_type <= ZoneType::Normal)
            .count() as u64;
        let pb = PAGEBLOCK_NR_PAGES as u64;
        let rec = pb * nr_zones * 2 + pb * nr_zones * (MIGRATE_PCPTYPES as u64).pow(2);
        rec.min(free_buffer / 20) << (PAGE_SHIFT - 10)
    }

    /// `__setup_per_zone_wmarks` (§3.1.3–4).
    pub fn setup_per_zone_wmarks(&mut self) {
        let pages_min = self.min_free_kbytes >> (PAGE_SHIFT - 10);
        let lowmem: u64 = self
            .zones
            .iter()
            .filter(|z| z.zone_type != ZoneType::Movable)
            .map(|z| z.managed)
            .sum();
        let wsf = self.tun.watermark_scale_factor;
        for z in &mut self.zones {
            let mut tmp = (pages_min * z.managed).checked_div(lowmem).unwrap_or(0);
            if z.zone_type == ZoneType::Movable {
                z.wmark[WMARK_MIN] = (z.managed / 1024).clamp(32, 128);
            } else {
                z.wmark[WMARK_MIN] = tmp;
            }
            tmp = (tmp >> 2).max(z.managed * wsf / 10000);
            z.wmark[WMARK_LOW] = z.wmark[WMARK_MIN] + tmp;
            z.wmark[WMARK_HIGH] = z.wmark[WMARK_LOW] + tmp;
            z.wmark[WMARK_PROMO] = z.wmark[WMARK_HIGH] + tmp;
            z.watermark_boost = 0;
        }
    }

    /// `setup_per_zone_lowmem_reserve` (§3.2).
    pub fn setup_per_zone_lowmem_reserve(&mut self) {
        // Node by node: a zone reserves against the higher zones of its own node.
        for base in (0..self.zones.len()).step_by(MAX_NR_ZONES) {
            for i in 0..MAX_NR_ZONES {
                let ratio = self.tun.lowmem_reserve_ratio[i];
                let mut managed = 0u64;
                for j in 0..MAX_NR_ZONES {
                    if j <= i {
                        self.zones[base + i].lowmem_reserve[j] = 0;
                        continue;
                    }
                    managed += self.zones[base + j].managed;
                    // A zone without managed pages gets no reserve (the kernel's `clear`).
                    self.zones[base + i].lowmem_reserve[j] =
                        if ratio == 0 || self.zones[base + i].managed == 0 {
                            0
                        } else {
                            managed / ratio
                        };
                }
            }
        }
    }

    /// `zone_batchsize`, `zone_highsize`, `zone_set_pageset_high_and_batch` (§2.2).
    pub fn setup_pcp(&mut self) {
        let frac = self.tun.percpu_pagelist_high_fraction as u64;
        for z in &mut self.zones {
            // `zone_highsize` splits among the CPUs of the zone's node, or among all online
            // CPUs for a node without CPUs.
            let cpus = match self.numa.nr_cpus_node(z.nid) {
                0 => self.nr_cpus as u64,
                n => n,
            };
            let mut batch = (z.managed >> 10).min(256) / 4;
            if batch < 1 {
                batch = 1;
            }
            batch = rounddown_pow_of_two(batch + batch / 2).saturating_sub(1).max(1);
            let highsize = |fraction: u64| -> u64 {
                let total = z.managed.checked_div(fraction).unwrap_or(z.wmark[WMARK_LOW]);
                (total / cpus).max(batch << 2)
            };
            let (hmin, hmax) = if frac != 0 {
                let h = highsize(frac);
                (h, h)
            } else {
                (highsize(0), highsize(MIN_PERCPU_PAGELIST_HIGH_FRACTION as u64))
            };
            for p in &mut z.pcp {
                p.batch = batch;
                p.high_min = hmin;
                p.high_max = hmax;
            }
        }
    }

    // ---- lookups -------------------------------------------------------------------------

    /// The zone index of a pfn (`page_zonenum`); None for pfns outside every zone.
    #[inline]
    pub fn pfn_zone(&self, pfn: u32) -> Option<usize> {
        // At most five comparisons; zones are ordered by pfn.
        self.zones.iter().position(|z| z.spanned > 0 && z.spans(pfn))
    }

    #[inline]
    pub(crate) fn zone_of(&self, pfn: u32) -> usize {
        match self.pfn_zone(pfn) {
            Some(z) => z,
            None => panic!("pfn {pfn:#x} is in no zone"),
        }
    }

    /// The zone indices of node `nid` (`pgdat->node_zones`).
    #[inline]
    pub fn node_zones(&self, nid: u32) -> std::ops::Range<usize> {
        let base = nid as usize * MAX_NR_ZONES;
        base..base + MAX_NR_ZONES
    }

    /// The node of a pfn (`page_to_nid`); node 0 on a single-node machine.
    #[inline]
    pub fn pfn_nid(&self, pfn: u32) -> u32 {
        if !self.numa.multi() {
            return 0;
        }
        self.zones[self.zone_of(pfn)].nid
    }

    /// One past the highest pfn.
    pub fn end_pfn(&self) -> u32 {
        self.end_pfn
    }

    /// Turns fragmentation blame on (issue 37, `blame.rs`): from now on, the events that make
    /// pageblocks impure are attributed to `blame.cur`. Pages allocated before are blamed on
    /// `boot`.
    pub fn enable_blame(&mut self) {
        if self.blame.is_none() {
            self.blame = Some(Box::new(crate::blame::Blame::new(
                self.end_pfn,
                self.blocks.len(),
            )));
        }
    }

    /// `get_pfnblock_migratetype` (§1.2.2): Isolate if the isolate bit is set, else the type.
    #[inline]
    pub fn block_mt(&self, pfn: u32) -> MigrateType {
        let b = self.blocks[(pfn >> PAGEBLOCK_ORDER) as usize];
        if b & PB_MIGRATE_ISOLATE != 0 {
            MigrateType::Isolate
        } else {
            MigrateType::from_index((b & PB_MIGRATE_MASK) as usize)
        }
    }

    /// `set_pageblock_migratetype`: sets the 3-bit type (the isolate bit is separate).
    #[inline]
    pub fn set_block_mt(&mut self, pfn: u32, mt: MigrateType) {
        debug_assert!(mt != MigrateType::Isolate, "isolation is a separate bit in 6.18");
        let b = &mut self.blocks[(pfn >> PAGEBLOCK_ORDER) as usize];
        *b = (*b & !PB_MIGRATE_MASK) | mt as u8;
    }

    /// Sets or clears PB_migrate_isolate (§1.2.1, §1.7.5).
    pub fn set_block_isolate(&mut self, pfn: u32, on: bool) {
        let b = &mut self.blocks[(pfn >> PAGEBLOCK_ORDER) as usize];
        if on {
            *b |= PB_MIGRATE_ISOLATE;
        } else {
            *b &= !PB_MIGRATE_ISOLATE;
        }
    }

    /// PB_compact_skip.
    #[inline]
    pub fn block_skip(&self, pfn: u32) -> bool {
        self.blocks[(pfn >> PAGEBLOCK_ORDER) as usize] & PB_COMPACT_SKIP != 0
    }

    #[inline]
    pub fn set_block_skip(&mut self, pfn: u32, on: bool) {
        let b = &mut self.blocks[(pfn >> PAGEBLOCK_ORDER) as usize];
        if on {
            *b |= PB_COMPACT_SKIP;
        } else {
            *b &= !PB_COMPACT_SKIP;
        }
    }

    // ---- counters and trace -------------------------------------------------------------

    #[inline]
    pub fn count(&mut self, s: Stat, n: u64) {
        self.stats[s as usize] += n;
    }

    #[inline]
    pub fn stat(&self, s: Stat) -> u64 {
        self.stats[s as usize]
    }

    #[inline]
    pub(crate) fn mod_zone_stat(&mut self, zi: usize, s: Stat, delta: i64) {
        self.zones[zi].stats[s as usize] += delta;
    }

    /// Sum of a zone item over all zones.
    pub fn zone_stat_sum(&self, s: Stat) -> i64 {
        self.zones.iter().map(|z| z.stats[s as usize]).sum()
    }

    #[inline]
    pub(crate) fn trace_on(&self, kind: u32) -> bool {
        self.trace.mask & kind != 0
    }

    pub(crate) fn emit(&mut self, cpu: u32, event: TraceEvent) {
        self.trace.buf.push(
            TraceRecord::new(self.cur.now_ns, cpu, self.cur.pid, event).with_comm(self.cur.comm.clone()),
        );
    }

    /// Enables recording of the kmem events in `mask` (bits of [`trace_kind`]).
    pub fn set_trace_mask(&mut self, mask: u32) {
        self.trace.mask = mask;
    }

    /// Takes the recorded trace events.
    pub fn take_trace(&mut self) -> Vec<TraceRecord> {
        std::mem::take(&mut self.trace.buf)
    }

    /// Takes the wake-ups requested since the last call.
    pub fn take_wakeups(&mut self) -> Vec<Wakeup> {
        std::mem::take(&mut self.outbox.wakeups)
    }

    /// Host memory held by the model's per-page and per-block state, in bytes (capacity of
    /// the dense arrays; the per-zone structures are a few KiB and not counted).
    pub fn host_bytes(&self) -> usize {
        self.pages.state.capacity() + 8 * self.pages.links.capacity() + self.blocks.capacity()
    }

    // ---- views for /proc -----------------------------------------------------------------

    /// The pageblocks of zone `zi` that /proc/pagetypeinfo's "Number of blocks type" counts
    /// (`pagetypeinfo_showblockcount_print`, §16.2 item 4): the kernel steps from
    /// zone_start_pfn to zone_end_pfn by pageblock_nr_pages and counts a block when
    /// `pfn_to_online_page` finds an online memmap for its pfn and the page is in the zone. The
    /// model has no memory sections: a block counts when some pfn of it in the zone's span is not
    /// a hole, so the blocks of zone holes and of offline memory (both [`PageKind::Hole`]) are
    /// left out. Blocks in zone order, each once: the first block of a zone that starts
    /// unaligned is included (the kernel's first step lands in it). Empty for an unpopulated
    /// zone.
    pub fn counted_blocks(&self, zi: usize) -> impl Iterator<Item = u32> + '_ {
        let z = &self.zones[zi];
        let (first, last) = if z.present == 0 {
            (1, 0)
        } else {
            (
                z.start_pfn >> PAGEBLOCK_ORDER,
                (z.end_pfn() - 1) >> PAGEBLOCK_ORDER,
            )
        };
        (first..=last).filter(move |&b| {
            let pfn = b << PAGEBLOCK_ORDER;
            let start = pfn.max(z.start_pfn);
            let end = (pfn + PAGEBLOCK_NR_PAGES).min(z.end_pfn());
            // Blocks entirely in a hole have no memmap.
            (start..end).any(|p| self.pages.kind(p) != PageKind::Hole)
        })
    }

    /// Pageblocks per migratetype of zone `zi`: the [`Mm::counted_blocks`] by their type, as
    /// /proc/pagetypeinfo prints them (`pagetypeinfo_showblockcount_print`, §16.2 item 4).
    pub fn blocks_by_type(&self, zi: usize) -> [u64; MIGRATE_TYPES] {
        let mut out = [0u64; MIGRATE_TYPES];
        for b in self.counted_blocks(zi) {
            out[self.block_mt(b << PAGEBLOCK_ORDER).idx()] += 1;
        }
        out
    }

    /// Fills the plain views the /proc renderers take.
    pub fn zone_views(&self) -> Vec<ZoneView> {
        (0..self.zones.len())
            .map(|zi| {
                let z = &self.zones[zi];
                let mut zone_stats = [0u64; crate::vmstat::NR_ZONE_STATS];
                for (o, s) in zone_stats.iter_mut().zip(z.stats.iter()) {
                    *o = (*s).max(0) as u64;
                }
                ZoneView {
                    zone_type: z.zone_type,
                    start_pfn: z.start_pfn as u64,
                    spanned: z.spanned as u64,
                    present: z.present as u64,
                    managed: z.managed,
                    cma: 0,
                    free: z.nr_free_pages().max(0) as u64,
                    boost: z.watermark_boost,
                    wmark: z.wmark,
                    protection: z.lowmem_reserve.map(|v| v as i64),
                    zone_stats,
                    numa_stats: z.numa,
                    nr_free: z.area.nr_free,
                    nr_free_by_type: {
                        let mut t = [[0u64; NR_PAGE_ORDERS]; MIGRATE_TYPES];
                        for (o, row) in z.area.nr_by_type.iter().enumerate() {
                            for (mt, v) in row.iter().enumerate() {
                                t[mt][o] = *v;
                            }
                        }
                        t
                    },
                    blocks_by_type: self.blocks_by_type(zi),
                    pagesets: z
                        .pcp
                        .iter()
                        .map(|p| PagesetView {
                            count: p.count,
                            high: p.high,
                            batch: p.batch,
                            high_min: p.high_min,
                            high_max: p.high_max,
                        })
                        .collect(),
                    stat_threshold: calculate_normal_threshold(z.managed, self.nr_cpus),
                    node_unreclaimable: 0,
                }
            })
            .collect()
    }
}
