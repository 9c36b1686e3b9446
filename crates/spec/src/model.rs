//! The registry of fraglab's model switches (`[model]`): choices between modelled behaviours that
//! are not kernel knobs. One table validates `[model]` and documents the switches, like
//! [`crate::KNOBS`] for `[knobs]`.

use crate::tree::quote;
use crate::FolioMode;

/// One model switch: its key in `[model]`, the words it takes, its default and meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelSwitchDef {
    /// The key in `[model]`.
    pub name: &'static str,
    /// The accepted values, in the order they are listed in messages.
    pub choices: &'static [&'static str],
    /// The value when the spec does not set the switch (one of `choices`).
    pub default: &'static str,
    /// One line on what it selects.
    pub doc: &'static str,
}

impl ModelSwitchDef {
    /// The accepted values in words: `one of skip_large, split_large, ...`.
    pub fn expected(&self) -> String {
        format!("one of {}", self.choices.join(", "))
    }
}

/// Every model switch a spec may set, in the order `[model]` documents them.
pub const MODEL_SWITCHES: &[ModelSwitchDef] = &[
    ModelSwitchDef {
        name: "folio_mode",
        choices: &[
            "skip_large",
            "split_large",
            "migrate_no_free_split",
            "migrate_free_split",
        ],
        default: "migrate_free_split",
        doc: "How compaction treats large folios, through Zi Yan's 2024 series \"Enable >0 order folio \
          memory compaction\": skip_large = before it (large folios not isolated), split_large = \
          patch 1 (split before migration), migrate_no_free_split = patch 2 (migrate whole, target of \
          exactly the folio's order), migrate_free_split = patch 3, Linux 6.9+ and 6.18 (free-page \
          split in compaction_alloc)",
    },
    ModelSwitchDef {
        name: "defrag_stage",
        choices: &["vanilla", "nofragment_only", "kswapd_assist", "kswapd_watermarks"],
        default: "kswapd_watermarks",
        doc: "What vm.defrag_mode = 1 turns on, by the stages of Weiner's 2025 series (kernel-model.md \
              §8): vanilla = nothing, nofragment_only = patch 3/5 (D1-D5), kswapd_assist = patch 4/5 \
              (adds D6), kswapd_watermarks = patch 5/5, what 6.18 ships (adds D7-D10)",
    },
    ModelSwitchDef {
        name: "costly_order_policy",
        choices: &[
            "baseline",
            "v1_iomap",
            "v2_filemap_costly",
            "v3_filemap_opportunistic",
            "v4_kcompactd_background",
        ],
        default: "baseline",
        doc: "The page-cache costly-order policy of the 2026 thread \"iomap: avoid compaction for \
              costly folio order allocation\" (kernel-model.md §12.5; the issue calls it \
              pagecache.costly_order_policy): baseline = 6.18, v1_iomap, v2_filemap_costly, \
              v3_filemap_opportunistic, v4_kcompactd_background (system-wide, in the page allocator)",
    },
    ModelSwitchDef {
        name: "v4_position",
        choices: &["before_initial_compaction", "after_initial_compaction"],
        default: "before_initial_compaction",
        doc: "Where the v4_kcompactd_background check sits in the 6.18 slow path (§12.5): before \
              the initial async compaction (no direct work at all, the intended semantics) or after \
              it, before direct reclaim",
    },
    ModelSwitchDef {
        name: "xa_nodes",
        choices: &["true", "false"],
        default: "false",
        doc: "Whether page-cache insertions allocate xarray nodes (radix_tree_node slab: 584-byte \
              objects, 14 per order-1 reclaimable slab, one per 64 indices of a file) and removals \
              free them: page-cache churn then interleaves reclaimable slab pages with movable \
              page cache. A boolean (true or false)",
    },
    ModelSwitchDef {
        name: "sched",
        choices: &["fifo", "fair"],
        default: "fifo",
        doc: "How the simulator's CPUs pick the next task (not mm; the timed engine only): fifo = the \
              run queue's head after each step, so kswapd and kcompactd wait behind every queued \
              step; fair = the least virtual runtime, a waking task placed at most 3 ms before the \
              CPU's minimum, as CFS/EEVDF favour sleepers (kswapd and kcompactd then run next)",
    },
];

/// The model switch called `name`.
pub fn find_model_switch(name: &str) -> Option<&'static ModelSwitchDef> {
    MODEL_SWITCHES.iter().find(|s| s.name == name)
}

/// `[model]`: switches between modelled behaviours that are not kernel knobs (see
/// [`MODEL_SWITCHES`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    /// `folio_mode`: how compaction treats large folios: `skip_large` (before Zi Yan's series),
    /// `split_large` (patch 1), `migrate_no_free_split` (patch 2), `migrate_free_split`
    /// (patch 3, Linux 6.9+ and 6.18; the default).
    pub folio_mode: FolioMode,
    /// `defrag_stage`, `costly_order_policy`, `v4_position`: the chosen word (one of the
    /// switch's choices in [`MODEL_SWITCHES`]); the engines map it to their model's type.
    pub defrag_stage: &'static str,
    pub costly_order_policy: &'static str,
    pub v4_position: &'static str,
    /// `sched`: `fifo` or `fair` (sim's `engine::Sched`).
    pub sched: &'static str,
    /// `xa_nodes`: page-cache xarray nodes as reclaimable slab (mm's `xa_node.rs`).
    pub xa_nodes: bool,
}

impl Default for ModelSpec {
    fn default() -> Self {
        let d = |n: &str| find_model_switch(n).expect("registered").default;
        ModelSpec {
            folio_mode: FolioMode::default(),
            defrag_stage: d("defrag_stage"),
            costly_order_policy: d("costly_order_policy"),
            v4_position: d("v4_position"),
            sched: d("sched"),
            xa_nodes: d("xa_nodes") == "true",
        }
    }
}

impl ModelSpec {
    /// The value of switch `name` as its word (the default when the spec does not set it);
    /// `None` for an unknown switch.
    pub fn get(&self, name: &str) -> Option<&'static str> {
        match name {
            "folio_mode" => Some(self.folio_mode.name()),
            "defrag_stage" => Some(self.defrag_stage),
            "costly_order_policy" => Some(self.costly_order_policy),
            "v4_position" => Some(self.v4_position),
            "sched" => Some(self.sched),
            "xa_nodes" => Some(if self.xa_nodes { "true" } else { "false" }),
            _ => None,
        }
    }

    /// Sets switch `name` to `value`, one of its choices (as validated against
    /// [`MODEL_SWITCHES`]); `Err` with the expected form otherwise.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let def = find_model_switch(name).ok_or_else(|| format!("unknown model switch {name}"))?;
        let bad = || format!("{} is not {}", quote(value), def.expected());
        match name {
            "folio_mode" => self.folio_mode = FolioMode::from_name(value).ok_or_else(bad)?,
            "xa_nodes" => {
                self.xa_nodes = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad()),
                }
            }
            "defrag_stage" | "costly_order_policy" | "v4_position" | "sched" => {
                let word = *def.choices.iter().find(|c| **c == value).ok_or_else(bad)?;
                match name {
                    "defrag_stage" => self.defrag_stage = word,
                    "costly_order_policy" => self.costly_order_policy = word,
                    "sched" => self.sched = word,
                    _ => self.v4_position = word,
                }
            }
            _ => unreachable!("switch {name} is in MODEL_SWITCHES but not in ModelSpec::set"),
        }
        Ok(())
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
}
