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

/// The page cache of every mapping (the xarrays of `struct address_space`): (mapping, page
/// index of a folio's first page) → folio. Mapping 0 means "not in the page cache".
#[derive(Clone, Debug, Default)]
pub struct PageCache {
    map: std::collections::BTreeMap<(u32, u64), crate::folio::FolioId>,
}

impl PageCache {
    /// Records folio `id` at `index` of `mapping`; the slot must be empty.
    pub fn insert(&mut self, mapping: u32, index: u64, id: crate::folio::FolioId) {
        assert_ne!(mapping, 0, "mapping 0 is not a mapping");
        let old = self.map.insert((mapping, index), id);
        assert!(
            old.is_none(),
            "page cache slot {mapping}:{index} already holds folio {old:?}"
        );
    }

    /// Removes folio `id` from `index` of `mapping`.
    pub fn remove(&mut self, mapping: u32, index: u64, id: crate::folio::FolioId) {
        let old = self.map.remove(&(mapping, index));
        assert_eq!(
            old,
            Some(id),
            "page cache slot {mapping}:{index} does not hold folio {id}"
        );
    }

    /// The folio whose first page is at `index` of `mapping`.
    pub fn get(&self, mapping: u32, index: u64) -> Option<crate::folio::FolioId> {
        self.map.get(&(mapping, index)).copied()
    }

    /// The folio covering page `index` of `mapping` (the entry at or below `index`, if its
    /// folio spans `index`; `order_of` gives a folio's order).
    pub fn lookup(
        &self,
        mapping: u32,
        index: u64,
        order_of: impl Fn(crate::folio::FolioId) -> u32,
    ) -> Option<crate::folio::FolioId> {
        let (&(m, start), &id) = self.map.range(..=(mapping, index)).next_back()?;
        (m == mapping && index < start + (1u64 << order_of(id))).then_some(id)
    }

    /// Entries in (mapping, index) order.
    pub fn iter(&self) -> impl Iterator<Item = ((u32, u64), crate::folio::FolioId)> + '_ {
        self.map.iter().map(|(&k, &v)| (k, v))
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
