//! fraglab-types: the vocabulary shared by the spec (`fraglab-spec`) and the model
//! (`fraglab-mm`), so that neither has to link the other for it: page and pageblock constants,
//! pfns, migratetypes and zone types (`page`), gfp flags under their kernel names (`gfp`), folio
//! ids and owner kinds (`folio`), and the words of every model switch and kernel knob that the
//! configuration carries as an enum (`switches`). No behaviour beyond naming and the pure
//! derivations the kernel makes from a gfp mask (`gfp_migratetype`, `gfp_zone`).
//!
//! The layering (docs/architecture.md): `types` ← `mm` ← `sim`, and `types` ← `spec` ← `sim`,
//! `host`, `report`; `mm` imports nothing from `spec`, `sim`, `host` or `report`.

/// Defines an enum whose variants are words in a spec (`name()`, `from_name()`, `ALL` in
/// declaration order, `WORDS`), so a switch or knob value is parsed once and carried typed.
macro_rules! word_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $word:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order (the order messages and docs list them).
            pub const ALL: [$name; [$($word),+].len()] = [$($name::$variant),+];
            /// The words, in the same order.
            pub const WORDS: [&'static str; [$($word),+].len()] = [$($word),+];

            /// The word a spec (or the kernel's sysfs file) uses for this value.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $word ),+
                }
            }

            /// The value a word names, if any.
            pub fn from_name(s: &str) -> Option<$name> {
                Self::ALL.into_iter().find(|v| v.name() == s)
            }
        }

        impl $crate::Word for $name {
            const WORDS: &'static [&'static str] = &$name::WORDS;
            fn name(self) -> &'static str {
                $name::name(self)
            }
            fn from_name(s: &str) -> Option<Self> {
                $name::from_name(s)
            }
        }
    };
}

/// A value written as one word in a spec: the word enums of [`switches`], and `bool` (`true`,
/// `false`). What a registry of switches needs to parse, print and list a value generically.
pub trait Word: Copy + PartialEq + std::fmt::Debug + 'static {
    /// The accepted words, in the order messages list them.
    const WORDS: &'static [&'static str];
    /// The word of this value.
    fn name(self) -> &'static str;
    /// The value of a word, if it is one of [`Word::WORDS`].
    fn from_name(s: &str) -> Option<Self>;
}

impl Word for bool {
    const WORDS: &'static [&'static str] = &["true", "false"];
    fn name(self) -> &'static str {
        if self {
            "true"
        } else {
            "false"
        }
    }
    fn from_name(s: &str) -> Option<bool> {
        match s {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
}

pub mod blame;
pub mod folio;
pub mod gfp;
pub mod numa;
pub mod page;
pub mod switches;

pub use folio::{FolioId, FolioKind};
pub use gfp::Gfp;
pub use page::{MigrateType, Pfn, ZoneType};
pub use switches::{
    CompactPriority, CostlyOrderPolicy, DefragStage, FolioMode, FsMetadata, MappingKind, Sched, ThpDefrag,
    ThpEnabled, V4Position,
};

/// Whether `name` has the form of a policy's name (`[model] policy`): lower-case letters,
/// digits, `_`, `-` and `.`, starting with a letter, at most 64 characters.
pub fn policy_name_ok(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'))
}
