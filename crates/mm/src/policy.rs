//! Policies as plug-ins (issue 37): the decision points where the three seed series and
//! policies that are not in the kernel differ from Linux 6.18, as one trait.
//!
//! Every hook of [`Policy`] has the kernel's 6.18 behaviour as its default. A policy overrides
//! only the hooks it changes; a *layer* ([`Policy::inner`]) wraps another policy and passes every
//! hook it does not override down to it, so the model switches of a spec stack on whatever
//! `[model] policy` names:
//!
//! | decision point | hook | kernel function (docs/model) |
//! |---|---|---|
//! | ALLOC_NOFRAGMENT everywhere and its final drop | [`Policy::nofragment_everywhere`] | `alloc_flags_nofragment`, `gfp_to_alloc_flags`, `__alloc_pages_slowpath` (§8 D1–D5) |
//! | the order kswapd is woken with | [`Policy::kswapd_wake_order`] | `wake_all_kswapds` (§8 D6) |
//! | kswapd/kcompactd count free pageblocks | [`Policy::free_pageblock_watermarks`] | `pgdat_balanced`, `kcompactd_node_suitable`, `__compact_finished` (§8 D7–D10) |
//! | compaction isolates large folios | [`Policy::compaction_isolates_large_folios`] | `isolate_migratepages_block` (§9.6.3) |
//! | large folios split before migration | [`Policy::split_large_folios_before_migration`] | `migrate_pages_batch` (§9.8.5) |
//! | free-page split for migration targets | [`Policy::compaction_free_page_split`] | `compaction_alloc` (§9.8.5) |
//! | the gfp of a page-cache folio attempt | [`Policy::pagecache_folio_gfp`] | `__filemap_get_folio` (§12.3, §12.5) |
//! | costly NORETRY requests do no direct work | [`Policy::costly_background`] | `__alloc_pages_slowpath` (§12.5 V4) |
//! | where a request goes when its own free lists are empty | [`Policy::rmqueue_fallback`] | `__rmqueue` (§6.2) |
//!
//! The three seeds' switches are layers here ([`FolioCompaction`], [`DefragStageLayer`],
//! [`CostlyOrder`]); `[model] folio_mode`, `defrag_stage`, `costly_order_policy` and
//! `v4_position` build them. Policies that are not the kernel's own live in the `fraglab-policies`
//! crate, one file each.

use std::fmt;

use crate::filemap::{write_folio_gfp, CostlyOrderPolicy, V4Position};
use crate::gfp::AllocFlags;
use crate::gfp::Gfp;
use crate::node::{DefragStage, Mm};
use crate::types::{MigrateType, PAGEBLOCK_ORDER};
use fraglab_types::switches::FolioMode;

/// What a policy's [`Policy::rmqueue_fallback`] decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallbackDecision {
    /// The kernel's fallback: claim, then steal (§6.3, §6.4).
    Kernel,
    /// The policy placed the request itself: the chunk's pfn, or `None` for a failure of this
    /// zone (the caller goes on to the next zone and the slow path, as after a failed fallback).
    Placed(Option<u32>),
}

/// The request a fallback hook sees: the zone, order and migratetype of a `__rmqueue` whose own
/// free lists were empty, and its allocation flags.
#[derive(Clone, Copy, Debug)]
pub struct FallbackRequest {
    pub cpu: u32,
    pub zi: usize,
    pub order: u32,
    pub migratetype: MigrateType,
    pub alloc_flags: AllocFlags,
}

/// A policy: the model's decision points (module docs). Each hook's default passes the call to
/// [`Policy::inner`] when the policy is a layer, and otherwise does what Linux 6.18 does.
///
/// Hooks are called on the allocator's paths; they must be deterministic (no clocks, no
/// randomness outside the model) for runs to be reproducible.
pub trait Policy: Send + fmt::Debug {
    /// The name `[model] policy` and `fraglab policy list` use; a layer's is its inner
    /// policy's with its own appended after `+`.
    fn name(&self) -> String;

    /// The policy this one wraps, if it is a layer.
    fn inner(&self) -> Option<&dyn Policy> {
        None
    }

    /// [`Policy::inner`], mutably (for the hooks that keep state).
    fn inner_mut(&mut self) -> Option<&mut dyn Policy> {
        None
    }

    /// §8 D1–D5: ALLOC_NOFRAGMENT on every allocation, in the slow path, never dropped in
    /// `get_page_from_freelist`, dropped once before OOM. Kernel: whenever `vm.defrag_mode` is
    /// set.
    fn nofragment_everywhere(&self, defrag_mode: bool) -> bool {
        match self.inner() {
            Some(p) => p.nofragment_everywhere(defrag_mode),
            None => defrag_mode,
        }
    }

    /// §8 D6 (`wake_all_kswapds`): the order kswapd is woken with for a request of `order`.
    /// Kernel: `max(order, pageblock_order)` with `vm.defrag_mode`, else `order`.
    fn kswapd_wake_order(&self, defrag_mode: bool, order: u32) -> u32 {
        match self.inner() {
            Some(p) => p.kswapd_wake_order(defrag_mode, order),
            None if defrag_mode => order.max(PAGEBLOCK_ORDER),
            None => order,
        }
    }

    /// §8 D7–D10: kswapd is balanced for order > 0 only by free pageblocks above the high
    /// watermark, and kcompactd works until there are. Kernel: with `vm.defrag_mode`.
    fn free_pageblock_watermarks(&self, defrag_mode: bool) -> bool {
        match self.inner() {
            Some(p) => p.free_pageblock_watermarks(defrag_mode),
            None => defrag_mode,
        }
    }

    /// §9.6.3: the migration scanner isolates large folios (below cc.order and pageblock
    /// order). Kernel 6.9+: yes.
    fn compaction_isolates_large_folios(&self) -> bool {
        self.inner().is_none_or(|p| p.compaction_isolates_large_folios())
    }

    /// §9.8.5: an isolated large folio is split into base pages before migration. Kernel:
    /// no, it migrates whole.
    fn split_large_folios_before_migration(&self) -> bool {
        self.inner()
            .is_some_and(|p| p.split_large_folios_before_migration())
    }

    /// §9.8.5 (`compaction_alloc`): a migration target may be split off a larger isolated
    /// free chunk. Kernel 6.9+: yes.
    fn compaction_free_page_split(&self) -> bool {
        self.inner().is_none_or(|p| p.compaction_free_page_split())
    }

    /// §12.3, §12.5: the gfp of one attempt of the page-cache folio loop at `order`: `base`
    /// is the mapping's gfp (with __GFP_WRITE for writes), `hint` the order asked for,
    /// `min_order` the mapping's minimum. Kernel: NORETRY|NOWARN above the minimum.
    fn pagecache_folio_gfp(&self, base: Gfp, hint: u32, order: u32, min_order: u32) -> Gfp {
        match self.inner() {
            Some(p) => p.pagecache_folio_gfp(base, hint, order, min_order),
            None => write_folio_gfp(CostlyOrderPolicy::Baseline, base, hint, order, min_order),
        }
    }

    /// §12.5 V4: a costly NORETRY request that may reclaim wakes kcompactd and fails in the
    /// slow path instead of compacting and reclaiming directly, checked at the returned
    /// position. Kernel: `None` (direct work as usual).
    fn costly_background(&self) -> Option<V4Position> {
        self.inner().and_then(|p| p.costly_background())
    }

    /// §6.3.2a (`find_suitable_fallback`): whether a request of `start` may take a free chunk
    /// of `fallback`'s lists — read by compaction's "would the allocation succeed by a
    /// fallback" test (`__compact_finished`, §9.5) and by the kernel's claim and steal. Only
    /// consulted when [`Policy::has_fallback_hook`] is true. Kernel: every pair of the
    /// fallback table.
    fn fallback_allowed(&self, start: MigrateType, fallback: MigrateType) -> bool {
        self.inner().is_none_or(|p| p.fallback_allowed(start, fallback))
    }

    /// Whether [`Policy::rmqueue_fallback`] (and [`Policy::fallback_allowed`]) is overridden
    /// anywhere in the stack (the allocator skips the hooks' calls otherwise).
    fn has_fallback_hook(&self) -> bool {
        self.inner().is_some_and(|p| p.has_fallback_hook())
    }

    /// §6.2 (`__rmqueue`): the request's own free lists are empty. [`FallbackDecision::Kernel`]
    /// lets the kernel's claim and steal run; a policy may instead place the request itself
    /// with the allocator's primitives (`__rmqueue_smallest`, `move_freepages_block`, ...).
    /// Called only when [`Policy::has_fallback_hook`] says so.
    fn rmqueue_fallback(&mut self, mm: &mut Mm, req: FallbackRequest) -> FallbackDecision {
        match self.inner_mut() {
            Some(p) => p.rmqueue_fallback(mm, req),
            None => FallbackDecision::Kernel,
        }
    }

    /// Work a policy asked for with [`Mm::request_policy_work`] (moving pages, resizing
    /// regions), run at the end of the next allocation that may sleep (`__GFP_DIRECT_RECLAIM`),
    /// where direct compaction may also run: no caller of the allocator holds state that
    /// migration would break there. Kernel: none.
    fn deferred_work(&mut self, mm: &mut Mm) {
        if let Some(p) = self.inner_mut() {
            p.deferred_work(mm);
        }
    }

    /// Counters of the policy's own (name, value), in the result's `policy` section.
    /// Kernel: none.
    fn counters(&self) -> Vec<(String, u64)> {
        self.inner().map(|p| p.counters()).unwrap_or_default()
    }
    /// The policy's own state (its counters and whatever its decisions depend on) as bytes,
    /// for a checkpoint (`fraglab_sim::checkpoint`): a run continued from the checkpoint gets
    /// them back with [`Policy::restore_state`] and decides as this one would have. A layer's
    /// is its inner policy's. `Err`: the policy cannot be saved (it says why). Kernel:
    /// nothing to save.
    fn save_state(&self) -> Result<Vec<u8>, String> {
        self.inner().map_or(Ok(Vec::new()), |p| p.save_state())
    }

    /// Takes back what [`Policy::save_state`] saved (from a policy of the same name).
    fn restore_state(&mut self, state: &[u8]) -> Result<(), String> {
        match self.inner_mut() {
            Some(p) => p.restore_state(state),
            None if state.is_empty() => Ok(()),
            None => Err(format!(
                "policy {} keeps no state but was given {} bytes",
                self.name(),
                state.len()
            )),
        }
    }
}

/// Linux 6.18 as it ships: every hook at its default.
#[derive(Clone, Copy, Debug, Default)]
pub struct Kernel;

/// A [`Kernel`] policy, boxed: what a model deserialized from a checkpoint holds until the
/// checkpoint's reader installs the policy of the run that continues it.
pub fn kernel_policy() -> Box<dyn Policy> {
    Box::new(Kernel)
}

/// The name of [`Kernel`].
pub const KERNEL_POLICY: &str = "linux-6.18";

impl Policy for Kernel {
    fn name(&self) -> String {
        KERNEL_POLICY.to_string()
    }
}

/// Seed 000, Zi Yan's "Enable >0 order folio memory compaction" (§9.8.5): which of its
/// patches compaction has (`[model] folio_mode`). `MigrateFreeSplit` is the kernel's.
#[derive(Debug)]
pub struct FolioCompaction {
    pub inner: Box<dyn Policy>,
    pub mode: FolioMode,
}

impl Policy for FolioCompaction {
    fn name(&self) -> String {
        format!("{}+folio_mode={}", self.inner.name(), self.mode.name())
    }
    fn inner(&self) -> Option<&dyn Policy> {
        Some(self.inner.as_ref())
    }
    fn inner_mut(&mut self) -> Option<&mut dyn Policy> {
        Some(self.inner.as_mut())
    }
    fn compaction_isolates_large_folios(&self) -> bool {
        self.mode != FolioMode::SkipLarge
    }
    fn split_large_folios_before_migration(&self) -> bool {
        self.mode == FolioMode::SplitLarge
    }
    fn compaction_free_page_split(&self) -> bool {
        self.mode != FolioMode::MigrateNoFreeSplit
    }
}

/// Seed 001, Weiner's defrag_mode series (§8): which of its patches `vm.defrag_mode = 1` turns
/// on (`[model] defrag_stage`). `KswapdWatermarks` is the kernel's.
#[derive(Debug)]
pub struct DefragStageLayer {
    pub inner: Box<dyn Policy>,
    pub stage: DefragStage,
}

impl Policy for DefragStageLayer {
    fn name(&self) -> String {
        format!("{}+defrag_stage={}", self.inner.name(), self.stage.name())
    }
    fn inner(&self) -> Option<&dyn Policy> {
        Some(self.inner.as_ref())
    }
    fn inner_mut(&mut self) -> Option<&mut dyn Policy> {
        Some(self.inner.as_mut())
    }
    fn nofragment_everywhere(&self, defrag_mode: bool) -> bool {
        self.inner
            .nofragment_everywhere(defrag_mode && self.stage >= DefragStage::NofragmentOnly)
    }
    fn kswapd_wake_order(&self, defrag_mode: bool, order: u32) -> u32 {
        self.inner
            .kswapd_wake_order(defrag_mode && self.stage >= DefragStage::KswapdAssist, order)
    }
    fn free_pageblock_watermarks(&self, defrag_mode: bool) -> bool {
        self.inner
            .free_pageblock_watermarks(defrag_mode && self.stage >= DefragStage::KswapdWatermarks)
    }
}

/// Seed 002, the 2026 thread "iomap: avoid compaction for costly folio order allocation"
/// (§12.5): the gfp of costly page-cache folio attempts (V1–V3) or V4's background-only slow
/// path (`[model] costly_order_policy`, `v4_position`). `Baseline` is the kernel's.
#[derive(Debug)]
pub struct CostlyOrder {
    pub inner: Box<dyn Policy>,
    pub variant: CostlyOrderPolicy,
    pub v4_position: V4Position,
}

impl Policy for CostlyOrder {
    fn name(&self) -> String {
        let mut n = format!(
            "{}+costly_order_policy={}",
            self.inner.name(),
            self.variant.name()
        );
        if self.variant == CostlyOrderPolicy::V4KcompactdBackground
            && self.v4_position != V4Position::default()
        {
            n.push_str(&format!("+v4_position={}", self.v4_position.name()));
        }
        n
    }
    fn inner(&self) -> Option<&dyn Policy> {
        Some(self.inner.as_ref())
    }
    fn inner_mut(&mut self) -> Option<&mut dyn Policy> {
        Some(self.inner.as_mut())
    }
    fn pagecache_folio_gfp(&self, base: Gfp, hint: u32, order: u32, min_order: u32) -> Gfp {
        match self.variant {
            // V4 changes the slow path, not the gfp.
            CostlyOrderPolicy::Baseline | CostlyOrderPolicy::V4KcompactdBackground => {
                self.inner.pagecache_folio_gfp(base, hint, order, min_order)
            }
            v => write_folio_gfp(v, base, hint, order, min_order),
        }
    }
    fn costly_background(&self) -> Option<V4Position> {
        if self.variant == CostlyOrderPolicy::V4KcompactdBackground {
            Some(self.v4_position)
        } else {
            self.inner.costly_background()
        }
    }
}

/// How a configuration names its policy: a name and a constructor, called once per booted
/// model (a policy may keep state, so each model gets its own). Two factories are equal when
/// their names are.
#[derive(Clone)]
pub struct PolicyFactory {
    name: String,
    make: std::sync::Arc<dyn Fn() -> Box<dyn Policy> + Send + Sync>,
}

impl PolicyFactory {
    /// A factory named `name` that builds with `make`.
    pub fn new(name: impl Into<String>, make: impl Fn() -> Box<dyn Policy> + Send + Sync + 'static) -> Self {
        PolicyFactory {
            name: name.into(),
            make: std::sync::Arc::new(make),
        }
    }

    /// The policy's name as [`Policy::name`] gives it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A new instance.
    pub fn build(&self) -> Box<dyn Policy> {
        (self.make)()
    }
}

impl Default for PolicyFactory {
    fn default() -> Self {
        PolicyFactory::new(KERNEL_POLICY, || Box::new(Kernel))
    }
}

impl fmt::Debug for PolicyFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PolicyFactory({})", self.name)
    }
}

impl PartialEq for PolicyFactory {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name
    }
}

impl Eq for PolicyFactory {}

impl FolioCompaction {
    /// The kernel's policy with seed 000's `mode` (`[model] folio_mode` alone).
    pub fn on_kernel(mode: FolioMode) -> Box<dyn Policy> {
        with_switches(
            Box::new(Kernel),
            mode,
            DefragStage::default(),
            CostlyOrderPolicy::default(),
            V4Position::default(),
        )
    }
}

impl DefragStageLayer {
    /// The kernel's policy with seed 001's `stage` (`[model] defrag_stage` alone).
    pub fn on_kernel(stage: DefragStage) -> Box<dyn Policy> {
        with_switches(
            Box::new(Kernel),
            FolioMode::default(),
            stage,
            CostlyOrderPolicy::default(),
            V4Position::default(),
        )
    }
}

impl CostlyOrder {
    /// The kernel's policy with seed 002's `variant` at `v4_position` (`[model]
    /// costly_order_policy` and `v4_position` alone).
    pub fn on_kernel(variant: CostlyOrderPolicy, v4_position: V4Position) -> Box<dyn Policy> {
        with_switches(
            Box::new(Kernel),
            FolioMode::default(),
            DefragStage::default(),
            variant,
            v4_position,
        )
    }
}

/// The model switches of a spec stacked on `base`: a layer for each switch not at the
/// kernel's value, so a spec that sets none runs `base` itself.
pub fn with_switches(
    base: Box<dyn Policy>,
    folio_mode: FolioMode,
    defrag_stage: DefragStage,
    costly: CostlyOrderPolicy,
    v4_position: V4Position,
) -> Box<dyn Policy> {
    let mut p = base;
    if folio_mode != FolioMode::default() {
        p = Box::new(FolioCompaction {
            inner: p,
            mode: folio_mode,
        });
    }
    if defrag_stage != DefragStage::default() {
        p = Box::new(DefragStageLayer {
            inner: p,
            stage: defrag_stage,
        });
    }
    if costly != CostlyOrderPolicy::default() {
        p = Box::new(CostlyOrder {
            inner: p,
            variant: costly,
            v4_position,
        });
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_defaults_are_618() {
        let k = Kernel;
        assert!(!k.nofragment_everywhere(false));
        assert!(k.nofragment_everywhere(true));
        assert_eq!(k.kswapd_wake_order(true, 3), PAGEBLOCK_ORDER);
        assert_eq!(k.kswapd_wake_order(false, 3), 3);
        assert!(k.free_pageblock_watermarks(true));
        assert!(k.compaction_isolates_large_folios());
        assert!(!k.split_large_folios_before_migration());
        assert!(k.compaction_free_page_split());
        assert_eq!(k.costly_background(), None);
        assert!(!k.has_fallback_hook());
    }

    #[test]
    fn layers_pass_what_they_do_not_change() {
        let p = with_switches(
            Box::new(Kernel),
            FolioMode::SkipLarge,
            DefragStage::KswapdAssist,
            CostlyOrderPolicy::V4KcompactdBackground,
            V4Position::AfterInitialCompaction,
        );
        assert_eq!(
            p.name(),
            "linux-6.18+folio_mode=skip_large+defrag_stage=kswapd_assist\
             +costly_order_policy=v4_kcompactd_background+v4_position=after_initial_compaction"
        );
        assert!(!p.compaction_isolates_large_folios());
        assert!(p.compaction_free_page_split());
        assert!(p.nofragment_everywhere(true));
        assert_eq!(p.kswapd_wake_order(true, 0), PAGEBLOCK_ORDER);
        assert!(!p.free_pageblock_watermarks(true));
        assert!(!p.free_pageblock_watermarks(false));
        assert_eq!(p.costly_background(), Some(V4Position::AfterInitialCompaction));
        let vanilla = with_switches(
            Box::new(Kernel),
            FolioMode::default(),
            DefragStage::Vanilla,
            CostlyOrderPolicy::default(),
            V4Position::default(),
        );
        assert!(!vanilla.nofragment_everywhere(true));
        assert_eq!(vanilla.kswapd_wake_order(true, 2), 2);
        assert_eq!(
            with_switches(
                Box::new(Kernel),
                FolioMode::default(),
                DefragStage::default(),
                CostlyOrderPolicy::default(),
                V4Position::default()
            )
            .name(),
            KERNEL_POLICY
        );
    }
}
