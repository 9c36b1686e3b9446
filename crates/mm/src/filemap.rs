//! Page-cache folio allocation policy (`kernel-model.md` §12): the seed-002 variants for costly
//! orders. The readahead and write paths build on these types.

/// The policy for costly-order page-cache folio allocations: the 6.18 baseline and the four
/// variants of the 2026 thread "iomap: avoid compaction for costly folio order allocation"
/// (§12.4, §12.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum CostlyOrderPolicy {
    /// 6.18: every order above the mapping minimum is tried with NORETRY|NOWARN (§12.3).
    #[default]
    Baseline,
    /// V1 (fs/iomap): a hint above order 3 drops __GFP_DIRECT_RECLAIM for every attempt,
    /// the order-0 fallback included.
    V1Iomap,
    /// V2 (Ritesh, mm/filemap.c): orders above 3 drop __GFP_DIRECT_RECLAIM; orders 1..=3
    /// keep NORETRY; the minimum order uses the plain gfp.
    V2FilemapCostly,
    /// V3 (Matthew, mm/filemap.c): every attempt above the minimum order drops
    /// __GFP_DIRECT_RECLAIM (NOWARN, no NORETRY).
    V3FilemapOpportunistic,
    /// V4 (mm/page_alloc.c): a costly NORETRY request in the slow path wakes kcompactd and
    /// fails instead of direct compaction and reclaim (system-wide).
    V4KcompactdBackground,
}

impl CostlyOrderPolicy {
    pub const ALL: [CostlyOrderPolicy; 5] = [
        CostlyOrderPolicy::Baseline,
        CostlyOrderPolicy::V1Iomap,
        CostlyOrderPolicy::V2FilemapCostly,
        CostlyOrderPolicy::V3FilemapOpportunistic,
        CostlyOrderPolicy::V4KcompactdBackground,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CostlyOrderPolicy::Baseline => "baseline",
            CostlyOrderPolicy::V1Iomap => "v1_iomap",
            CostlyOrderPolicy::V2FilemapCostly => "v2_filemap_costly",
            CostlyOrderPolicy::V3FilemapOpportunistic => "v3_filemap_opportunistic",
            CostlyOrderPolicy::V4KcompactdBackground => "v4_kcompactd_background",
        }
    }

    pub fn from_name(s: &str) -> Option<CostlyOrderPolicy> {
        CostlyOrderPolicy::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Where the V4 check sits in the 6.18 slow path (§12.5 "V4 placement"): before the initial
/// async compaction of §7.4 step 4 (the intended semantics: no direct work at all) or after it
/// (a literal port of the posted diff's position).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum V4Position {
    #[default]
    BeforeInitialCompaction,
    AfterInitialCompaction,
}

impl V4Position {
    pub const ALL: [V4Position; 2] = [
        V4Position::BeforeInitialCompaction,
        V4Position::AfterInitialCompaction,
    ];

    pub fn name(self) -> &'static str {
        match self {
            V4Position::BeforeInitialCompaction => "before_initial_compaction",
            V4Position::AfterInitialCompaction => "after_initial_compaction",
        }
    }

    pub fn from_name(s: &str) -> Option<V4Position> {
        V4Position::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// The page-cache switches of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PagecacheConfig {
    pub costly_order_policy: CostlyOrderPolicy,
    pub v4_position: V4Position,
}
