//! The registry of kernel knobs a spec may set: one table that both validates `[knobs]` and
//! documents them (`fraglab knobs`).

use std::fmt;

/// `INT_MAX`: the kernel stores these sysctls as `int`.
pub const INT_MAX: i64 = i32::MAX as i64;

/// What values a knob takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    /// An integer in `min..=max` (`max` = [`INT_MAX`] when the kernel sets no upper bound).
    Int { min: i64, max: i64 },
    /// 0, or an integer in `min..=max`.
    ZeroOrInt { min: i64, max: i64 },
    /// One of these words.
    Choice(&'static [&'static str]),
    /// Exactly `len` integers, each in `min..=max`; written as a TOML array or as a string of
    /// space-separated integers (the form `sysctl` prints).
    IntList { len: usize, min: i64, max: i64 },
}

impl KnobKind {
    /// The accepted values in words: `0..=100`, `>= 128`, `0 or >= 8`, `one of always, never`,
    /// `5 integers >= 0`.
    pub fn expected(&self) -> String {
        match *self {
            KnobKind::Int { min, max } => range_text(min, max),
            KnobKind::ZeroOrInt { min, max } => format!("0 or {}", range_text(min, max)),
            KnobKind::Choice(words) => format!("one of {}", words.join(", ")),
            KnobKind::IntList { len, min, max } => {
                format!("{len} integers, each {}", range_text(min, max))
            }
        }
    }

    /// Whether `v` is an accepted integer (for `Int` and `ZeroOrInt`; list elements for `IntList`).
    pub fn int_ok(&self, v: i64) -> bool {
        match *self {
            KnobKind::Int { min, max } | KnobKind::IntList { min, max, .. } => (min..=max).contains(&v),
            KnobKind::ZeroOrInt { min, max } => v == 0 || (min..=max).contains(&v),
            KnobKind::Choice(_) => false,
        }
    }
}

fn range_text(min: i64, max: i64) -> String {
    if max == INT_MAX {
        format!(">= {min}")
    } else {
        format!("{min}..={max}")
    }
}

/// One knob: its kernel name (sysctl or `/sys/kernel/mm/` path), values, default and meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnobDef {
    /// `vm.*` for sysctls (as `sysctl` names them), `transparent_hugepage/...` for files under
    /// `/sys/kernel/mm/`.
    pub name: &'static str,
    pub kind: KnobKind,
    /// The kernel's default as text (`"computed"` when it is derived at boot).
    pub default: &'static str,
    /// One line on what it does (`fraglab knobs`).
    pub doc: &'static str,
    /// The kernel behaviour the model follows for it, for docs/knobs.md (function names).
    pub models: &'static str,
    /// The section of docs/model it follows.
    pub section: &'static str,
    /// Whether this version of the model reads it (`fraglab_sim::boot` builds the model's
    /// configuration from the ones it reads; a test there checks each declaration).
    pub read: Read,
}

/// Whether the model reads a knob. The ones it does not read are accepted (so that specs written
/// for the host engine stay valid) and reported as not read by `fraglab run` and `fraglab knobs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// Every engine reads it.
    Yes,
    /// Read where this says (`timed runs`, `fault ops, thp_burst and kbuild workloads`).
    Where(&'static str),
    /// Not read, for this reason (`no unevictable folios yet`).
    No(&'static str),
}

impl Read {
    /// Whether the model reads the knob at all.
    pub fn is_read(self) -> bool {
        !matches!(self, Read::No(_))
    }

    /// The docs/knobs.md cell: `yes`, `yes (timed runs)`, `no (no unevictable folios yet)`.
    pub fn text(self) -> String {
        match self {
            Read::Yes => "yes".into(),
            Read::Where(w) => format!("yes ({w})"),
            Read::No(why) => format!("no ({why})"),
        }
    }
}

impl KnobDef {
    /// The default as a value, `None` when the kernel computes it (vm.min_free_kbytes).
    pub fn default_value(&self) -> Option<KnobValue> {
        match self.kind {
            KnobKind::Int { .. } | KnobKind::ZeroOrInt { .. } => {
                self.default.parse().ok().map(KnobValue::Int)
            }
            KnobKind::Choice(_) => Some(KnobValue::Str(self.default.to_string())),
            KnobKind::IntList { .. } => self
                .default
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<Vec<i64>, _>>()
                .ok()
                .map(KnobValue::List),
        }
    }
}

/// A knob's value as given in the spec, normalised to its kind: `Int` for integer knobs, `Str`
/// for choices, `List` for `vm.lowmem_reserve_ratio` (also when written as a string).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KnobValue {
    Int(i64),
    Str(String),
    List(Vec<i64>),
}

impl fmt::Display for KnobValue {
    /// The form `sysctl`/sysfs would print: `60`, `madvise`, `256 256 32 0 0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobValue::Int(v) => write!(f, "{v}"),
            KnobValue::Str(s) => f.write_str(s),
            KnobValue::List(l) => {
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" ")?;
                    }
                    write!(f, "{v}")?;
                }
                Ok(())
            }
        }
    }
}

const fn int(min: i64, max: i64) -> KnobKind {
    KnobKind::Int { min, max }
}

const THP_ENABLED: &[&str] = &["always", "madvise", "never"];
const THP_DEFRAG: &[&str] = &["always", "defer", "defer+madvise", "madvise", "never"];
const MTHP_ENABLED: &[&str] = &["always", "inherit", "madvise", "never"];

macro_rules! mthp {
    ($kb:literal, $order:literal, $default:literal) => {
        KnobDef {
            name: concat!("transparent_hugepage/hugepages-", $kb, "kB/enabled"),
            kind: KnobKind::Choice(MTHP_ENABLED),
            default: $default,
            doc: concat!(
                "Policy for anonymous ",
                $kb,
                " KiB (order-",
                $order,
                ") mTHP faults; inherit = follow transparent_hugepage/enabled"
            ),
            models: "the mTHP order ladder of a fault (`inherit` follows `enabled`), limited to the \
                     empty aligned range around the address",
            section: "§11.1, §11.3",
            read: Read::Yes,
        }
    };
}

/// Every knob a spec may set, sysctls first, in the order `fraglab knobs` prints them.
pub const KNOBS: &[KnobDef] = &[
    KnobDef {
        name: "vm.min_free_kbytes",
        kind: int(128, INT_MAX),
        default: "computed",
        doc: "KiB kept free below the min watermarks, split over zones by size; default computed at \
              boot (calculate_min_free_kbytes, raised by khugepaged's recommended value)",
        models: "min watermark per zone (`__setup_per_zone_wmarks`); default computed like `calculate_min_free_kbytes` and raised for THP like `set_recommended_min_free_kbytes`",
        section: "§3.1",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.watermark_scale_factor",
        kind: int(1, 3000),
        default: "10",
        doc: "Gap between the min, low and high watermarks, in 1/10000 of a zone's managed pages",
        models: "gap between min, low, high and promo watermarks",
        section: "§3.1.4",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.watermark_boost_factor",
        kind: int(0, INT_MAX),
        default: "15000",
        doc: "Watermark boost after a fragmenting fallback, in 1/10000 of the high watermark; \
              0 disables boosting",
        models: "`boost_watermark` on partial-block claims; 0 disables",
        section: "§3.4",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.lowmem_reserve_ratio",
        kind: KnobKind::IntList {
            len: 5,
            min: 0,
            max: INT_MAX,
        },
        default: "256 256 32 0 0",
        doc: "Per-zone divisors (DMA DMA32 Normal Movable Device) of the reserve that keeps \
              higher-zone allocations out of lower zones; 0 = no reserve",
        models: "`lowmem_reserve[]` of each zone against allocations that may use higher zones",
        section: "§3.2",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.defrag_mode",
        kind: int(0, 1),
        default: "0",
        doc: "1: reclaim and compact before falling back to pageblocks of another migratetype, \
              to keep higher orders available",
        models: "ALLOC_NOFRAGMENT everywhere (D1–D4), slow-path NOFRAGMENT and its final drop (D3, D5), kswapd woken at max(order, 9) (D6), kswapd balanced only by free pageblocks for order > 0 (D7, `pgdat_balanced`), kcompactd at the high watermark counted in free pageblocks (D8–D10); which of these are on is `[model] defrag_stage`",
        section: "§8",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.percpu_pagelist_high_fraction",
        kind: KnobKind::ZeroOrInt { min: 8, max: INT_MAX },
        default: "0",
        doc: "0: default per-CPU list sizing; n: a zone's per-CPU lists may hold up to \
              managed/n pages in total",
        models: "PCP `high_min`/`high_max` from managed/fraction instead of the low watermark",
        section: "§2.2",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.compaction_proactiveness",
        kind: int(0, 100),
        default: "20",
        doc: "How hard kcompactd compacts in the background (0 disables proactive compaction)",
        models: "proactive compaction thresholds (low = 100 − p, high = low + min(10, low/2)); 0 disables",
        section: "§9.12",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.extfrag_threshold",
        kind: int(0, 1000),
        default: "500",
        doc: "Compaction is tried for a costly-order failure only if the fragmentation index \
              (x1000) is above this; below it, reclaim is used",
        models: "compaction_suitable rejects costly orders whose fragmentation index is ≤ threshold",
        section: "§9.2.4",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.compact_unevictable_allowed",
        kind: int(0, 1),
        default: "1",
        doc: "1: compaction may migrate unevictable (mlocked) pages",
        models: "isolate_migratepages_block takes PG_unevictable (mlocked) folios only at 1; at 0 they pin their pageblocks and, in async direct compaction, abandon their cc.order sub-block",
        section: "§29.2",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.swappiness",
        kind: int(0, 200),
        default: "60",
        doc: "Relative cost of reclaiming anonymous (swap) versus file pages",
        models: "anon/file scan balance in `get_scan_count` (fractional split with the recent reclaim costs; anon only scanned when a swap device has room)",
        section: "§10.4.2",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.vfs_cache_pressure",
        kind: int(0, INT_MAX),
        default: "100",
        doc: "Reclaim pressure on dentry and inode caches relative to the page cache (100 = fair)",
        models: "scale of `shrink_slab` on shrinkable (reclaimable) slab",
        section: "§10.4.5, §19.1.8",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.dirty_ratio",
        kind: int(0, 100),
        default: "20",
        doc: "Percent of available memory dirty at which writers are throttled",
        models: "writers wait for writeback while the dirty pages plus those under writeback exceed this share of the dirtyable memory (free + file LRU pages, `global_dirty_limits`) (`balance_dirty_pages`: the pgbench, fio and task-program writers)",
        section: "§19.1 item 9",
        read: Read::Where("timed runs"),
    },
    KnobDef {
        name: "vm.dirty_background_ratio",
        kind: int(0, 100),
        default: "10",
        doc: "Percent of available memory dirty at which background writeback starts",
        models: "the flusher writes back the oldest dirty folios down to this share of the dirtyable memory (halved from `dirty_ratio` when not below it)",
        section: "§19.1 item 9",
        read: Read::Where("timed runs"),
    },
    KnobDef {
        name: "vm.dirty_expire_centisecs",
        kind: int(0, INT_MAX),
        default: "3000",
        doc: "Age in centiseconds after which dirty data is written back",
        models: "the flushers write back page cache dirty for longer than this (`wb_check_old_data_flush`)",
        section: "§19.1 item 9",
        read: Read::Where("timed runs"),
    },
    KnobDef {
        name: "vm.dirty_writeback_centisecs",
        kind: int(0, INT_MAX),
        default: "500",
        doc: "Interval in centiseconds of the periodic writeback wakeup (0 disables it)",
        models: "the period of the kbuild object-file flusher; 0 turns periodic writeback off (the page-cache flusher checks every 100 ms, as background writeback reacts at once)",
        section: "§19.1 item 9",
        read: Read::Where("timed runs"),
    },
    KnobDef {
        name: "vm.zone_reclaim_mode",
        kind: int(0, 7),
        default: "0",
        doc: "Bits: 1 reclaim on the local node before going off-node, 2 write out dirty pages, \
              4 swap pages",
        models: "node reclaim (`node_reclaim`): on a multi-node machine a zone failing its watermark is reclaimed on its own node before the allocation goes to the next node; bit 4 lets it reclaim mapped (anonymous) folios; inert on one node",
        section: "§10, §17",
        read: Read::Yes,
    },
    KnobDef {
        name: "vm.page-cluster",
        kind: int(0, 10),
        default: "3",
        doc: "log2 of the number of pages read from swap at once",
        models: "swap readahead",
        section: "§10, §17",
        read: Read::No("no swap-in readahead"),
    },
    KnobDef {
        name: "transparent_hugepage/enabled",
        kind: KnobKind::Choice(THP_ENABLED),
        default: "madvise",
        doc: "THP policy for PMD-sized anonymous faults (and for mTHP sizes set to inherit)",
        models: "whether khugepaged raises min_free_kbytes at boot (≠ never); which VMAs get PMD THPs (`do_anonymous_fault`)",
        section: "§3.1.2, §11.1",
        read: Read::Yes,
    },
    KnobDef {
        name: "transparent_hugepage/defrag",
        kind: KnobKind::Choice(THP_DEFRAG),
        default: "madvise",
        doc: "Whether THP faults reclaim and compact directly, wake kswapd/kcompactd, or neither",
        models: "the fault gfp (`vma_thp_gfp_mask`): direct compaction/reclaim, kswapd wake or neither; the PMD attempt first with THISNODE\\|NORETRY (`alloc_pages_mpol`)",
        section: "§11.2",
        read: Read::Where("`fault` ops, `thp_burst` and `kbuild` workloads"),
    },
    mthp!("16", "2", "never"),
    mthp!("32", "3", "never"),
    mthp!("64", "4", "never"),
    mthp!("128", "5", "never"),
    mthp!("256", "6", "never"),
    mthp!("512", "7", "never"),
    mthp!("1024", "8", "never"),
    mthp!("2048", "9", "inherit"),
    KnobDef {
        name: "transparent_hugepage/shrink_underused",
        kind: int(0, 1),
        default: "1",
        doc: "1: every PMD THP a fault maps is queued for the deferred split shrinker, which splits it if underused (see khugepaged/max_ptes_none)",
        models: "kind (b) entries of the deferred split queue (`deferred_split_folio(folio, false)` at `__do_huge_pmd_anonymous_page`), dropped or split (`thp_underused`) by `deferred_split_scan`",
        section: "§31.3",
        read: Read::Yes,
    },
    KnobDef {
        name: "transparent_hugepage/khugepaged/defrag",
        kind: int(0, 1),
        default: "1",
        doc: "1: khugepaged may reclaim and compact directly to allocate huge pages",
        models: "khugepaged collapse",
        section: "§11.4",
        read: Read::No("no khugepaged"),
    },
    KnobDef {
        name: "transparent_hugepage/khugepaged/max_ptes_none",
        kind: int(0, 511),
        default: "511",
        doc: "How many unpopulated PTEs khugepaged may fill in when collapsing a PMD range; below 511, also how many zero-filled subpages make a THP underused for the deferred split shrinker",
        models: "`thp_underused` of the deferred split shrinker (false at 511; split once more subpages than this are zero-filled); khugepaged collapse is not modelled",
        section: "§11.4, §31.3",
        read: Read::Yes,
    },
    KnobDef {
        name: "transparent_hugepage/khugepaged/pages_to_scan",
        kind: int(1, INT_MAX),
        default: "4096",
        doc: "Pages khugepaged scans per pass",
        models: "khugepaged collapse",
        section: "§11.4",
        read: Read::No("no khugepaged"),
    },
    KnobDef {
        name: "transparent_hugepage/khugepaged/scan_sleep_millisecs",
        kind: int(0, INT_MAX),
        default: "10000",
        doc: "Milliseconds khugepaged sleeps between passes",
        models: "khugepaged collapse",
        section: "§11.4",
        read: Read::No("no khugepaged"),
    },
    KnobDef {
        name: "transparent_hugepage/khugepaged/alloc_sleep_millisecs",
        kind: int(0, INT_MAX),
        default: "60000",
        doc: "Milliseconds khugepaged sleeps after failing to allocate a huge page",
        models: "khugepaged collapse",
        section: "§11.4",
        read: Read::No("no khugepaged"),
    },
];

/// The knob called `name`. As with `sysctl`, `.` and `/` are interchangeable separators, so
/// `vm/swappiness` and `transparent_hugepage.enabled` (what nested TOML tables produce) are found.
pub fn find_knob(name: &str) -> Option<&'static KnobDef> {
    KNOBS.iter().find(|k| k.name == name).or_else(|| {
        let norm = name.replace('/', ".");
        KNOBS.iter().find(|k| k.name.replace('/', ".") == norm)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_consistent() {
        for (i, k) in KNOBS.iter().enumerate() {
            assert!(
                KNOBS[..i]
                    .iter()
                    .all(|o| o.name.replace('/', ".") != k.name.replace('/', ".")),
                "{} listed twice",
                k.name
            );
            assert_eq!(find_knob(k.name), Some(k));
            match k.default_value() {
                None => assert_eq!(k.name, "vm.min_free_kbytes"),
                Some(KnobValue::Int(v)) => assert!(k.kind.int_ok(v), "{}", k.name),
                Some(KnobValue::Str(s)) => match k.kind {
                    KnobKind::Choice(c) => assert!(c.contains(&s.as_str()), "{}", k.name),
                    _ => panic!("{}", k.name),
                },
                Some(KnobValue::List(l)) => match k.kind {
                    KnobKind::IntList { len, .. } => {
                        assert_eq!(l.len(), len);
                        assert!(l.iter().all(|&v| k.kind.int_ok(v)));
                    }
                    _ => panic!("{}", k.name),
                },
            }
        }
        // 17 sysctls, enabled and defrag, 8 mTHP sizes, shrink_underused, 5 khugepaged.
        assert_eq!(KNOBS.len(), 17 + 2 + 8 + 1 + 5);
    }

    #[test]
    fn separators_are_interchangeable() {
        assert_eq!(find_knob("vm/swappiness").unwrap().name, "vm.swappiness");
        assert_eq!(
            find_knob("transparent_hugepage.khugepaged.defrag").unwrap().name,
            "transparent_hugepage/khugepaged/defrag"
        );
        assert_eq!(
            find_knob("transparent_hugepage.hugepages-64kB.enabled")
                .unwrap()
                .name,
            "transparent_hugepage/hugepages-64kB/enabled"
        );
        assert!(find_knob("vm.swapiness").is_none());
    }

    #[test]
    fn expected_forms() {
        assert_eq!(find_knob("vm.min_free_kbytes").unwrap().kind.expected(), ">= 128");
        assert_eq!(find_knob("vm.defrag_mode").unwrap().kind.expected(), "0..=1");
        assert_eq!(
            find_knob("vm.percpu_pagelist_high_fraction")
                .unwrap()
                .kind
                .expected(),
            "0 or >= 8"
        );
        assert_eq!(
            find_knob("vm.lowmem_reserve_ratio").unwrap().default_value(),
            Some(KnobValue::List(vec![256, 256, 32, 0, 0]))
        );
        assert_eq!(
            KnobValue::List(vec![256, 256, 32, 0, 0]).to_string(),
            "256 256 32 0 0"
        );
    }
}
