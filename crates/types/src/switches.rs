//! The words of fraglab's model switches (`[model]`), of the kernel knobs the configuration
//! carries typed, and of the spec's enumerated op parameters: each an enum parsed once from its
//! word (`from_name`) and printed back with `name()`. What each one selects is documented on
//! its variants and, for the switches, in `fraglab_spec::MODEL_SWITCHES` and docs/knobs.md.

word_enum! {
    /// `[model] folio_mode`: the large-folio compaction behaviours of Zi Yan's series "Enable >0
    /// order folio memory compaction" (seed 000, docs/model §9.8.5, §13.7, §18.1).
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub enum FolioMode {
        /// Before the series (≤ 6.8): large folios are not isolated; free chunks are handed out
        /// as order-0 pages.
        SkipLarge = "skip_large",
        /// Patch 1: large folios below cc.order are isolated and split before migration;
        /// targets are order-0 pages.
        SplitLarge = "split_large",
        /// Patch 2: folios migrate whole; isolated free chunks are kept per order, and a folio
        /// only gets a target of exactly its order (no free-page split).
        MigrateNoFreeSplit = "migrate_no_free_split",
        /// Patch 3 = Linux 6.9+ and 6.18: free-page split in `compaction_alloc`.
        #[default]
        MigrateFreeSplit = "migrate_free_split",
    }
}

word_enum! {
    /// `[model] defrag_stage`: the stages of Weiner's defrag_mode series (seed 001,
    /// docs/model §8): which rows of the §8 table `vm.defrag_mode = 1` turns on.
    /// `KswapdWatermarks` is what 6.18 ships.
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
    pub enum DefragStage {
        /// defrag_mode = 1 behaves like 0 (the baseline of the series).
        Vanilla = "vanilla",
        /// Patch 3/5: ALLOC_NOFRAGMENT everywhere and the final NOFRAGMENT drop (D1–D5).
        NofragmentOnly = "nofragment_only",
        /// Patch 4/5: also wake kswapd with pageblock order (D6).
        KswapdAssist = "kswapd_assist",
        /// Patch 5/5 (6.18): kswapd and kcompactd aim for the high watermark in free pageblocks
        /// (D7–D10).
        #[default]
        KswapdWatermarks = "kswapd_watermarks",
    }
}

word_enum! {
    /// `[model] costly_order_policy`: the policy for costly-order page-cache folio allocations:
    /// the 6.18 baseline and the four variants of the 2026 thread "iomap: avoid compaction for
    /// costly folio order allocation" (docs/model §12.4, §12.5).
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub enum CostlyOrderPolicy {
        /// 6.18: every order above the mapping minimum is tried with NORETRY|NOWARN (§12.3).
        #[default]
        Baseline = "baseline",
        /// V1 (fs/iomap): a hint above order 3 drops __GFP_DIRECT_RECLAIM for every attempt,
        /// the order-0 fallback included.
        V1Iomap = "v1_iomap",
        /// V2 (Ritesh, mm/filemap.c): orders above 3 drop __GFP_DIRECT_RECLAIM; orders 1..=3
        /// keep NORETRY; the minimum order uses the plain gfp.
        V2FilemapCostly = "v2_filemap_costly",
        /// V3 (Matthew, mm/filemap.c): every attempt above the minimum order drops
        /// __GFP_DIRECT_RECLAIM (NOWARN, no NORETRY).
        V3FilemapOpportunistic = "v3_filemap_opportunistic",
        /// V4 (mm/page_alloc.c): a costly NORETRY request in the slow path wakes kcompactd and
        /// fails instead of direct compaction and reclaim (system-wide).
        V4KcompactdBackground = "v4_kcompactd_background",
    }
}

word_enum! {
    /// `[model] v4_position`: where the V4 check sits in the 6.18 slow path (§12.5 "V4
    /// placement"): before the initial async compaction of §7.4 step 4 (the intended semantics:
    /// no direct work at all) or after it (a literal port of the posted diff's position).
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub enum V4Position {
        #[default]
        BeforeInitialCompaction = "before_initial_compaction",
        AfterInitialCompaction = "after_initial_compaction",
    }
}

word_enum! {
    /// `[model] sched`: how the timed engine's CPUs pick their next task (not mm; see
    /// `fraglab_sim::engine`).
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub enum Sched {
        /// The run queue's head after each step.
        #[default]
        Fifo = "fifo",
        /// The least virtual runtime, a waking task placed a little before the CPU's minimum
        /// (CFS/EEVDF-like).
        Fair = "fair",
    }
}

word_enum! {
    /// `[model] fs_metadata`: the filesystem whose metadata the workload generators keep in the
    /// block device's page cache for files that are not on a loop image (docs/model
    /// §33): the run directory's. With `[host] loop_images` a file set is on the image of its
    /// mapping kind's filesystem whatever this says (`xfs` → XFS, the others → ext4), unless
    /// the switch is `off`.
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub enum FsMetadata {
        /// The run directory is on ext4 (this project's VMs: the root filesystem on vda): its
        /// directory blocks, inode tables, bitmaps and journal are block-device page cache.
        #[default]
        Ext4 = "ext4",
        /// The run directory is on XFS: its metadata buffers are not page cache (§33.3), so
        /// only files on ext4 loop images make block-device pages.
        Xfs = "xfs",
        /// No filesystem metadata at all (the model before §33).
        Off = "off",
    }
}

word_enum! {
    /// The page-cache behaviour of a file's mapping (docs/model §12.1): `mapping = "..."`
    /// on the first op or step that names the file.
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum MappingKind {
        /// XFS: large folios, no __GFP_FS.
        Xfs = "xfs",
        /// Large folios with the default gfp (ext4 on 6.18).
        LargeFolios = "large_folios",
        /// Order-0 folios only.
        NoLargeFolios = "no_large_folios",
    }
}

word_enum! {
    /// `transparent_hugepage/enabled` (and the per-size `hugepages-<N>kB/enabled` values, which
    /// add `inherit`), docs/model §11.1.
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ThpEnabled {
        Always = "always",
        Inherit = "inherit",
        Madvise = "madvise",
        Never = "never",
    }
}

word_enum! {
    /// `transparent_hugepage/defrag` (§11.2).
    #[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum ThpDefrag {
        Always = "always",
        Defer = "defer",
        DeferMadvise = "defer+madvise",
        Madvise = "madvise",
        Never = "never",
    }
}

/// `enum compact_priority` (§7.1): lower is harder. The spec's `priority` of a `compact` op
/// names it by [`CompactPriority::name`].
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CompactPriority {
    SyncFull = 0,
    SyncLight = 1,
    Async = 2,
}

impl CompactPriority {
    /// The spec's words, in the order messages list them.
    pub const ALL: [CompactPriority; 3] = [
        CompactPriority::Async,
        CompactPriority::SyncLight,
        CompactPriority::SyncFull,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CompactPriority::Async => "async",
            CompactPriority::SyncLight => "sync_light",
            CompactPriority::SyncFull => "sync_full",
        }
    }

    pub fn from_name(s: &str) -> Option<CompactPriority> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_defaults_are_the_kernels() {
        for m in FolioMode::ALL {
            assert_eq!(FolioMode::from_name(m.name()), Some(m));
        }
        assert_eq!(FolioMode::default().name(), "migrate_free_split");
        assert_eq!(DefragStage::default(), DefragStage::KswapdWatermarks);
        assert!(DefragStage::Vanilla < DefragStage::NofragmentOnly);
        assert_eq!(
            ThpDefrag::from_name("defer+madvise"),
            Some(ThpDefrag::DeferMadvise)
        );
        assert_eq!(ThpEnabled::WORDS, ["always", "inherit", "madvise", "never"]);
        assert_eq!(
            CompactPriority::from_name("sync_full"),
            Some(CompactPriority::SyncFull)
        );
        assert_eq!(Sched::from_name("FIFO"), None);
    }
}
