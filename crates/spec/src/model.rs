//! The registry of fraglab's model switches (`[model]`): choices between modelled behaviours that
//! are not kernel knobs. Each switch is declared once, in [`model_switches!`] below: its key, its
//! typed value (a word enum of `fraglab_types::switches`, or a boolean), its one-line doc, what
//! it models and the section it follows. From that one declaration come the [`ModelSpec`] field,
//! its default, parsing and the validation message, `fraglab knobs` and docs/knobs.md. Adding a
//! switch is one entry here plus the code that reads it (`fraglab_sim::boot`).

use fraglab_types::switches::{CostlyOrderPolicy, DefragStage, FolioMode, FsMetadata, Sched, V4Position};
use fraglab_types::Word;

use crate::tree::quote;

/// One model switch: its key in `[model]`, the words it takes, its default and meaning.
#[derive(Clone, Copy, Debug)]
pub struct ModelSwitchDef {
    /// The key in `[model]`.
    pub name: &'static str,
    /// The accepted values, in the order they are listed in messages.
    pub choices: &'static [&'static str],
    /// The value when the spec does not set the switch (one of `choices`).
    pub default: &'static str,
    /// One line on what it selects.
    pub doc: &'static str,
    /// What it changes in the model, for docs/knobs.md (longer than `doc`).
    pub models: &'static str,
    /// The section of docs/model it follows (or where the behaviour was checked).
    pub section: &'static str,
    /// Which runs read it: `yes`, or `yes (timed runs)` and the like.
    pub read: &'static str,
    get: fn(&ModelSpec) -> &'static str,
    set: fn(&mut ModelSpec, &str) -> Option<()>,
}

impl PartialEq for ModelSwitchDef {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for ModelSwitchDef {}

impl ModelSwitchDef {
    /// The accepted values in words: `one of skip_large, split_large, ...`.
    pub fn expected(&self) -> String {
        format!("one of {}", self.choices.join(", "))
    }
}

/// Declares every switch: the [`ModelSpec`] struct, its `Default`, and [`MODEL_SWITCHES`].
macro_rules! model_switches {
    ($(
        $(#[$meta:meta])*
        $field:ident: $ty:ty = $default:literal,
            doc $doc:literal,
            models $models:literal,
            section $section:literal,
            read $read:literal;
    )+) => {
        /// `[model]`: switches between modelled behaviours that are not kernel knobs (see
        /// [`MODEL_SWITCHES`]), each typed.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct ModelSpec {
            $( $(#[$meta])* pub $field: $ty, )+
            /// `policy`: the policy the model runs (`fraglab policy list`), the switches above
            /// stacked on it. Any name of the policy registry's form; whether it names a
            /// policy is checked at boot, where plug-ins and Python-defined policies are known.
            pub policy: String,
            /// The line of `policy` in the spec (0: not given).
            pub policy_line: usize,
        }

        impl Default for ModelSpec {
            fn default() -> Self {
                ModelSpec {
                    $( $field: <$ty as Word>::from_name($default)
                        .expect("a switch's default is one of its words (tested)"), )+
                    policy: DEFAULT_POLICY.to_string(),
                    policy_line: 0,
                }
            }
        }

        /// Every model switch a spec may set, in the order `[model]` documents them.
        pub const MODEL_SWITCHES: &[ModelSwitchDef] = &[
            $(
                ModelSwitchDef {
                    name: stringify!($field),
                    choices: <$ty as Word>::WORDS,
                    default: $default,
                    doc: $doc,
                    models: $models,
                    section: $section,
                    read: $read,
                    get: |m| Word::name(m.$field),
                    set: |m, w| {
                        m.$field = <$ty as Word>::from_name(w)?;
                        Some(())
                    },
                },
            )+
        ];
    };
}

model_switches! {
    /// `folio_mode`: how compaction treats large folios (Zi Yan's series); 6.18's is the default.
    folio_mode: FolioMode = "migrate_free_split",
        doc "How compaction treats large folios, through Zi Yan's 2024 series \"Enable >0 order folio \
          memory compaction\": skip_large = before it (large folios not isolated), split_large = \
          patch 1 (split before migration), migrate_no_free_split = patch 2 (migrate whole, target of \
          exactly the folio's order), migrate_free_split = patch 3, Linux 6.9+ and 6.18 (free-page \
          split in compaction_alloc)",
        models "compaction of large folios before/through Zi Yan's series: `skip_large` (≤ 6.8: large \
          folios not isolated), `split_large` (patch 1: split before migration), \
          `migrate_no_free_split` (patch 2: per-order targets, exact order only), \
          `migrate_free_split` (patch 3, 6.9+/6.18: free-page split in compaction_alloc); also \
          `--folio-mode`",
        section "§9.8.5, §13.7, §18.1",
        read "yes";
    /// `defrag_stage`: which of seed 001's patches `vm.defrag_mode = 1` turns on.
    defrag_stage: DefragStage = "kswapd_watermarks",
        doc "What vm.defrag_mode = 1 turns on, by the stages of Weiner's 2025 series (docs/model \
              §8): vanilla = nothing, nofragment_only = patch 3/5 (D1-D5), kswapd_assist = patch 4/5 \
              (adds D6), kswapd_watermarks = patch 5/5, what 6.18 ships (adds D7-D10)",
        models "what `vm.defrag_mode = 1` turns on, by seed 001's patches: `vanilla` (nothing), \
          `nofragment_only` (3/5: D1–D5), `kswapd_assist` (4/5: + D6, kswapd woken with pageblock \
          order), `kswapd_watermarks` (5/5 = 6.18: + D7–D10); default `kswapd_watermarks`",
        section "§8",
        read "yes";
    /// `costly_order_policy`: the page-cache costly-order policy of the 2026 thread.
    costly_order_policy: CostlyOrderPolicy = "baseline",
        doc "The page-cache costly-order policy of the 2026 thread \"iomap: avoid compaction for \
              costly folio order allocation\" (docs/model §12.5; the issue calls it \
              pagecache.costly_order_policy): baseline = 6.18, v1_iomap, v2_filemap_costly, \
              v3_filemap_opportunistic, v4_kcompactd_background (system-wide, in the page allocator)",
        models "the 2026 thread's policies for costly-order page-cache folios (the issue's \
          `pagecache.costly_order_policy`): `baseline` (6.18: NORETRY\\|NOWARN above the minimum \
          order), `v1_iomap`, `v2_filemap_costly`, `v3_filemap_opportunistic` (the gfp of each \
          write attempt, `filemap::write_folio_gfp`), `v4_kcompactd_background` (in the page \
          allocator: a costly NORETRY request that could reclaim wakes kcompactd and fails — \
          system-wide)",
        section "§12.5",
        read "yes";
    /// `v4_position`: where the V4 check sits in the slow path.
    v4_position: V4Position = "before_initial_compaction",
        doc "Where the v4_kcompactd_background check sits in the 6.18 slow path (§12.5): before \
              the initial async compaction (no direct work at all, the intended semantics) or after \
              it, before direct reclaim",
        models "where the V4 check sits in the 6.18 slow path: `before_initial_compaction` (default: \
          no direct work at all) or `after_initial_compaction` (one async compaction first)",
        section "§12.5",
        read "yes";
    /// `xa_nodes`: page-cache xarray nodes as reclaimable slab (mm's `xa_node.rs`).
    xa_nodes: bool = "false",
        doc "Whether page-cache insertions allocate xarray nodes (radix_tree_node slab: 584-byte \
              objects, 14 per order-1 reclaimable slab, one per 64 indices of a file) and removals \
              free them: page-cache churn then interleaves reclaimable slab pages with movable \
              page cache. A boolean (true or false)",
        models "page-cache xarray nodes as reclaimable slab: a `radix_tree_node` (584 B, 14 per \
          order-1 slab — 2 pages — order-0 fallback; `__GFP_RECLAIMABLE`) per 64-index range \
          holding a folio or shadow entry below order 6, one level-1 node per 4096 indices of a \
          file with entries beyond 64, shadow-only nodes bounded as `count_shadow_nodes` without \
          memcg; `true` or `false` (default `false`: the probe's measurements did not settle \
          whether it brings the model closer, experiments/defrag-mode/README.md)",
        section "not in docs/model (checked against `/proc/slabinfo` here: `radix_tree_node` \
          objsize 584, 14 objects per slab, 2 pages per slab)",
        read "yes";
    /// `sched`: how the timed engine's CPUs pick tasks (sim's `engine::Sched`).
    sched: Sched = "fifo",
        doc "How the simulator's CPUs pick the next task (not mm; the timed engine only): fifo = the \
              run queue's head after each step, so kswapd and kcompactd wait behind every queued \
              step; fair = the least virtual runtime, a waking task placed at most 3 ms before the \
              CPU's minimum, as CFS/EEVDF favour sleepers (kswapd and kcompactd then run next)",
        models "how the timed engine's CPUs pick the next task (not mm): `fifo` (default: the run \
          queue's head after every step, so kswapd and kcompactd wait behind each queued step, up \
          to 10 ms for a compile job's slice) or `fair` (the least virtual runtime; a waking task \
          placed at most 3 ms before its CPU's minimum, as CFS/EEVDF favour sleepers: kswapd and \
          kcompactd run as soon as the current step ends and get a fair share of the CPU when they \
          stay runnable). Steps are never preempted; a CPU out of work takes a task waiting on \
          another CPU's queue (idle balancing), and a task moves when it wakes",
        section "not in docs/model (the scheduler is outside mm; `SLEEPER_CREDIT_NS` 3 ms is \
          EEVDF's base slice on 4 CPUs, 0.75 ms × (1 + log2 4), rounded)",
        read "yes (timed runs)";
    /// `fs_metadata`: which files' filesystem metadata the generators keep in the block
    /// device's page cache (mm's `bdev.rs`).
    fs_metadata: FsMetadata = "ext4",
        doc "The filesystem of the run directory, whose metadata the file workloads (task `files` \
              and `slab` steps, fio small files, kbuild) keep in the block device's page cache: \
              ext4 = directory blocks and inode-table readahead as UNMOVABLE LRU pages, inode \
              tables, bitmaps and journal blocks as MOVABLE ones (§33); xfs = none for the run \
              directory (XFS metadata buffers are not page cache); off = none at all. Files on \
              `[host] loop_images` follow their image's filesystem",
        models "the block-device page cache of ext4 metadata (mm's `bdev.rs`, §33): for every file \
          created, looked up or unlinked by a `files` or `slab` step, fio or kbuild on an ext4 \
          filesystem, its directory blocks (UNMOVABLE: `getblk_unmovable`), inode-table block \
          (MOVABLE; a cold read adds up to 32 UNMOVABLE readahead pages), bitmaps and jbd2 log \
          blocks (MOVABLE), each with a RECLAIMABLE buffer_head, pinned while journalled. `ext4` \
          (default: the run directory of this project's VMs is the root ext4 on vda), `xfs` (the \
          run directory makes none; ext4 loop images still do), `off` (none: the model before \
          §33). With `[host] loop_images` a file set is on the image its mapping kind names \
          (`xfs` → XFS, none; the others → ext4)",
        section "§33",
        read "yes (timed runs)";
}

/// The policy a spec runs when `[model] policy` is not given: the kernel's own.
pub const DEFAULT_POLICY: &str = "linux-6.18";

/// Whether `name` has the form of a policy name: lower-case letters, digits, `_`, `-` and `.`,
/// starting with a letter, at most 64 characters.
pub fn valid_policy_name(name: &str) -> bool {
    fraglab_types::policy_name_ok(name)
}

/// The model switch called `name`.
pub fn find_model_switch(name: &str) -> Option<&'static ModelSwitchDef> {
    MODEL_SWITCHES.iter().find(|s| s.name == name)
}

impl ModelSpec {
    /// The value of switch `name` as its word (the default when the spec does not set it);
    /// `None` for an unknown switch.
    pub fn get(&self, name: &str) -> Option<&'static str> {
        find_model_switch(name).map(|d| (d.get)(self))
    }

    /// Sets switch `name` to `value`, one of its choices (as validated against
    /// [`MODEL_SWITCHES`]); `Err` with the expected form otherwise.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let def = find_model_switch(name).ok_or_else(|| format!("unknown model switch {name}"))?;
        (def.set)(self, value).ok_or_else(|| format!("{} is not {}", quote(value), def.expected()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_matches_the_model() {
        let names: Vec<&str> = FolioMode::ALL.iter().map(|m| m.name()).collect();
        let fm = find_model_switch("folio_mode").unwrap();
        assert_eq!(fm.choices, names.as_slice());
        assert_eq!(fm.default, FolioMode::default().name());
        let d = ModelSpec::default();
        for (i, s) in MODEL_SWITCHES.iter().enumerate() {
            assert!(
                MODEL_SWITCHES[..i].iter().all(|o| o.name != s.name),
                "{} listed twice",
                s.name
            );
            assert_eq!(d.get(s.name), Some(s.default), "{}", s.name);
            assert!(s.choices.contains(&s.default), "{}", s.name);
            for c in s.choices {
                let mut m = ModelSpec::default();
                m.set(s.name, c).unwrap();
                assert_eq!(m.get(s.name), Some(*c));
            }
        }
        assert!(ModelSpec::default().set("folio_mode", "split").is_err());
        assert!(ModelSpec::default().set("nope", "x").is_err());
        assert_eq!(d.get("nope"), None);
    }

    #[test]
    fn defaults_are_the_types_defaults() {
        let d = ModelSpec::default();
        assert_eq!(d.folio_mode, FolioMode::default());
        assert_eq!(d.defrag_stage, DefragStage::default());
        assert_eq!(d.costly_order_policy, CostlyOrderPolicy::default());
        assert_eq!(d.v4_position, V4Position::default());
        assert_eq!(d.sched, Sched::default());
        assert!(!d.xa_nodes);
    }
}
