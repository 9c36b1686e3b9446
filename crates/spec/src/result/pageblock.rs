//! The pageblock classification, defined once: how a pageblock's state becomes a character of
//! the result schema's [`PageblockMap`](super::PageblockMap) (fraglab-sim's timed snapshots,
//! read back by fraglab-report) and of the `print = "pageblocks"` text map of the timeless
//! engine. The input is neutral ([`BlockState`], built by the simulator from its page array or
//! its per-block folio census), so readers need neither the model nor its types.
//!
//! The two maps show different things and say so with the letter case:
//! - the result map ([`BlockState::type_char`]): the block's migratetype, **lower case when the
//!   block is mixed** (holds pages of another mobility), plus a fill digit
//!   ([`BlockState::fill_char`]);
//! - the text map ([`BlockState::map_char`]): the block's migratetype, **upper case when the
//!   block is entirely free**, lower case when in use, `!` when mixed, blank without pages.
//!
//! "Mixed" is the kernel's "Number of mixed blocks" of /proc/pagetypeinfo with page_owner
//! (docs/model §30.4): a block of one of the three mergeable types
//! (`migratetype_is_mergeable`, §1.3) holding an allocation of another.

use serde::{Deserialize, Serialize};

/// The migratetypes' letters in the kernel's order (`migratetype_names`: Unmovable, Movable,
/// Reclaimable, HighAtomic, Isolate): the index is the migratetype.
pub const MIGRATETYPE_LETTERS: [char; 5] = ['U', 'M', 'R', 'H', 'I'];

/// Pages per pageblock (`pageblock_nr_pages`, order 9 on x86-64).
pub const PAGEBLOCK_PAGES: u64 = 512;

/// The migratetypes' names as /proc/pagetypeinfo prints them (`migratetype_names`), in the
/// order of [`MIGRATETYPE_LETTERS`].
pub const MIGRATETYPE_NAMES: [&str; 5] = ["Unmovable", "Movable", "Reclaimable", "HighAtomic", "Isolate"];

/// `pageblock_order`: [`PAGEBLOCK_PAGES`] = 2^9.
pub const PAGEBLOCK_ORDER: usize = 9;
const _: () = assert!(1 << PAGEBLOCK_ORDER == PAGEBLOCK_PAGES);

/// `migratetype_is_mergeable`: Unmovable, Movable, Reclaimable (the PCP types).
pub fn is_mergeable(migratetype: usize) -> bool {
    migratetype < 3
}

/// Whether a block of `migratetype` is mixed, from the pages of live allocations in it by
/// mobility (Unmovable, Movable, Reclaimable): any pages of a mobility other than its own.
/// Blocks of the other types (HighAtomic, Isolate) are never mixed.
pub fn census_mixed(migratetype: usize, content: &[u32; 3]) -> bool {
    is_mergeable(migratetype)
        && content
            .iter()
            .enumerate()
            .any(|(k, n)| k != migratetype && *n > 0)
}

/// Whether an allocation made with migratetype `alloc_mt` (page_owner's gfp migratetype) makes
/// a block of `block_mt` mixed.
pub fn alloc_mixes(block_mt: usize, alloc_mt: usize) -> bool {
    is_mergeable(block_mt) && alloc_mt != block_mt
}

/// One pageblock as the maps see it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockState {
    /// The block's migratetype (`get_pageblock_migratetype`), an index into
    /// [`MIGRATETYPE_LETTERS`].
    pub migratetype: usize,
    /// The block has pages in its zone (not only holes).
    pub present: bool,
    /// Free pages (in the buddy allocator) and pages in use (allocated, PCP-cached, reserved).
    pub free_pages: u32,
    pub used_pages: u32,
    /// The block holds allocations of another mobility than its type.
    pub mixed: bool,
}

impl BlockState {
    /// The migratetype's upper-case letter (`?` for an index out of range).
    pub fn letter(&self) -> char {
        MIGRATETYPE_LETTERS.get(self.migratetype).copied().unwrap_or('?')
    }

    /// The result map's type character: the migratetype's letter, lower case when mixed.
    pub fn type_char(&self) -> char {
        if self.mixed {
            self.letter().to_ascii_lowercase()
        } else {
            self.letter()
        }
    }

    /// The result map's fill digit: pages in use × 10 / [`PAGEBLOCK_PAGES`], capped at 9.
    pub fn fill_char(&self) -> char {
        let digit = (self.used_pages as u64 * 10 / PAGEBLOCK_PAGES).min(9) as u8;
        (b'0' + digit) as char
    }

    /// The text map's character: blank without pages, `!` when mixed, the migratetype's letter
    /// in upper case when the block is entirely free, lower case when anything is in use.
    pub fn map_char(&self) -> char {
        if !self.present {
            return ' ';
        }
        if self.mixed {
            return '!';
        }
        if self.used_pages == 0 && self.free_pages > 0 {
            self.letter()
        } else {
            self.letter().to_ascii_lowercase()
        }
    }
}

/// Reads a result map's type character back: (migratetype, mixed); `None` for a character that
/// is not one of [`MIGRATETYPE_LETTERS`] in either case.
pub fn decode_type_char(c: char) -> Option<(usize, bool)> {
    let mt = MIGRATETYPE_LETTERS
        .iter()
        .position(|l| *l == c.to_ascii_uppercase())?;
    Some((mt, c.is_ascii_lowercase()))
}

/// The classes of a zone's pageblock census ([`ZoneCensus::class`]), in the order of its rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockClass {
    /// Wholly free: the block's pages are one free chunk of pageblock order or more.
    Free,
    /// Blocks of this migratetype that are not wholly free.
    Unmovable,
    Movable,
    Reclaimable,
    /// Blocks holding allocations of another mobility than their type (any type).
    Mixed,
}

impl BlockClass {
    pub const ALL: [BlockClass; 5] = [
        BlockClass::Free,
        BlockClass::Unmovable,
        BlockClass::Movable,
        BlockClass::Reclaimable,
        BlockClass::Mixed,
    ];

    /// The class's name in the rows (`census.NAME.ZONE.CLASS`).
    pub fn name(self) -> &'static str {
        match self {
            BlockClass::Free => "free",
            BlockClass::Unmovable => "unmovable",
            BlockClass::Movable => "movable",
            BlockClass::Reclaimable => "reclaimable",
            BlockClass::Mixed => "mixed",
        }
    }
}

/// The pageblock census of one zone at one moment (issue 33's named samples), from what
/// /proc/pagetypeinfo prints for it, so that both engines count the same way: the simulator
/// from the text it renders in the kernel's format, the host from the kernel's
/// ([`ZoneCensus::from_pagetypeinfo`]).
///
/// - Blocks per migratetype: "Number of blocks type" (`pagetypeinfo_showblockcount_print`:
///   present, online blocks, by `get_pageblock_migratetype`).
/// - Wholly free blocks per migratetype: the free chunks of order ≥ `pageblock_order` on that
///   type's free lists ("Free pages count per migrate type at order", columns 9 and 10), a chunk
///   of order o covering 2^(o − 9) blocks. A pageblock all of whose pages are free in the buddy
///   allocator is such a chunk or part of one (`__free_one_page` merges the buddies up to the
///   pageblock; a page on a per-CPU list is not free here, as it is not in the kernel's count).
///   When two blocks merge into an order-10 chunk the kernel gives the buddy block the chunk's
///   type (`__free_one_page`, 6.18), so both blocks count under the list's type.
/// - Mixed blocks: "Number of mixed blocks" summed over the types (§30.4: printed only with
///   CONFIG_PAGE_OWNER and page_owner on; `None` without). The simulator counts them from its
///   per-block folio census, as its periodic samples do.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneCensus {
    /// The zone's name (DMA, DMA32, Normal, Movable).
    pub zone: String,
    /// Pageblocks per migratetype, in the order of [`MIGRATETYPE_NAMES`].
    pub blocks_by_type: Vec<u64>,
    /// Wholly free pageblocks per migratetype of their free list.
    pub free_blocks_by_type: Vec<u64>,
    /// Mixed blocks (`None`: not counted, a kernel without page_owner).
    pub mixed_blocks: Option<u64>,
}

impl ZoneCensus {
    /// Wholly free blocks of the zone.
    pub fn free_blocks(&self) -> u64 {
        self.free_blocks_by_type.iter().sum()
    }

    /// The number of blocks of class `c` (`None`: mixed blocks not counted). Free, unmovable,
    /// movable and reclaimable blocks do not overlap (with the HighAtomic and Isolate blocks
    /// in use they are every block of the zone); mixed blocks are among the blocks in use.
    pub fn class(&self, c: BlockClass) -> Option<u64> {
        let in_use = |t: usize| {
            let all = self.blocks_by_type.get(t).copied().unwrap_or(0);
            all.saturating_sub(self.free_blocks_by_type.get(t).copied().unwrap_or(0))
        };
        match c {
            BlockClass::Free => Some(self.free_blocks()),
            BlockClass::Unmovable => Some(in_use(0)),
            BlockClass::Movable => Some(in_use(1)),
            BlockClass::Reclaimable => Some(in_use(2)),
            BlockClass::Mixed => self.mixed_blocks,
        }
    }

    /// The census of every zone /proc/pagetypeinfo prints, in the order it prints them (the
    /// zones of all nodes summed by name; types the kernel prints beyond [`MIGRATETYPE_NAMES`],
    /// CMA, ignored).
    pub fn from_pagetypeinfo(text: &str) -> Vec<ZoneCensus> {
        fn zone(zones: &mut Vec<ZoneCensus>, name: &str) -> usize {
            if let Some(i) = zones.iter().position(|z| z.zone == name) {
                return i;
            }
            zones.push(ZoneCensus {
                zone: name.to_string(),
                blocks_by_type: vec![0; MIGRATETYPE_NAMES.len()],
                free_blocks_by_type: vec![0; MIGRATETYPE_NAMES.len()],
                mixed_blocks: None,
            });
            zones.len() - 1
        }
        let type_index = |name: &str| MIGRATETYPE_NAMES.iter().position(|t| *t == name);
        let mut zones: Vec<ZoneCensus> = Vec::new();
        // The table being read: (mixed, its columns' types).
        let mut table: Option<(bool, Vec<Option<usize>>)> = None;
        for line in text.lines() {
            for (head, mixed) in [("Number of blocks type", false), ("Number of mixed blocks", true)] {
                if let Some(rest) = line.strip_prefix(head) {
                    table = Some((mixed, rest.split_whitespace().map(type_index).collect()));
                }
            }
            if line.trim().is_empty() {
                table = None;
                continue;
            }
            let Some((_, rest)) = line.strip_prefix("Node").and_then(|r| r.split_once("zone")) else {
                continue;
            };
            if let Some((name, typed)) = rest.split_once(", type") {
                // A free-list row: the type, then free chunks per order.
                let mut it = typed.split_whitespace();
                let Some(t) = it.next().and_then(type_index) else {
                    continue;
                };
                let blocks: u64 = it
                    .enumerate()
                    .skip(PAGEBLOCK_ORDER)
                    .map(|(o, n)| {
                        n.trim_start_matches('>').parse::<u64>().unwrap_or(0) << (o - PAGEBLOCK_ORDER)
                    })
                    .sum();
                let i = zone(&mut zones, name.trim());
                zones[i].free_blocks_by_type[t] += blocks;
            } else if let Some((mixed, cols)) = &table {
                let mut it = rest.split_whitespace();
                let Some(name) = it.next() else { continue };
                let i = zone(&mut zones, name);
                let z = &mut zones[i];
                for (c, n) in it.enumerate() {
                    let n: u64 = n.parse().unwrap_or(0);
                    match (mixed, cols.get(c).copied().flatten()) {
                        (false, Some(t)) => z.blocks_by_type[t] += n,
                        (true, Some(_)) => *z.mixed_blocks.get_or_insert(0) += n,
                        _ => {}
                    }
                }
            }
        }
        zones
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(migratetype: usize, free: u32, used: u32, mixed: bool) -> BlockState {
        BlockState {
            migratetype,
            present: true,
            free_pages: free,
            used_pages: used,
            mixed,
        }
    }

    #[test]
    fn result_map_lowers_mixed_blocks() {
        assert_eq!(block(1, 0, 512, false).type_char(), 'M');
        assert_eq!(block(0, 0, 10, true).type_char(), 'u');
        assert_eq!(block(4, 512, 0, false).type_char(), 'I');
        for c in "UMRHIumrhi".chars() {
            let (mt, mixed) = decode_type_char(c).unwrap();
            assert_eq!(block(mt, 0, 0, mixed).type_char(), c);
        }
        assert_eq!(decode_type_char('!'), None);
    }

    #[test]
    fn text_map_uppers_free_blocks() {
        assert_eq!(block(1, 512, 0, false).map_char(), 'M');
        assert_eq!(block(1, 511, 1, false).map_char(), 'm');
        assert_eq!(block(2, 0, 512, true).map_char(), '!');
        assert_eq!(block(3, 0, 0, false).map_char(), 'h');
        assert_eq!(BlockState::default().map_char(), ' ');
    }

    #[test]
    fn fill_digit_in_tenths_capped_at_nine() {
        let fill = |used| block(1, 0, used, false).fill_char();
        assert_eq!(
            [fill(0), fill(51), fill(52), fill(460), fill(461), fill(512)],
            ['0', '0', '1', '8', '9', '9']
        );
    }

    /// Issue 33: the zone census from /proc/pagetypeinfo text in the kernel's format (6.18,
    /// mm/vmstat.c; the mixed table as `pagetypeinfo_showmixedcount` prints it with page_owner):
    /// free chunks of order 9 and 10 are wholly free blocks (one and two each), the types'
    /// blocks in use are their blocks less those, mixed blocks are summed over the types.
    #[test]
    fn zone_census_from_pagetypeinfo() {
        let text = "Page block order: 9\nPages per block:  512\n\n\
Free pages count per migrate type at order       0      1      2      3      4      5      6      7      8      9     10 \n\
Node    0, zone      DMA, type    Unmovable      0      0      0      0      0      0      0      0      1      0      0 \n\
Node    0, zone      DMA, type      Movable      0      0      0      0      0      0      0      0      0      1      3 \n\
Node    0, zone   Normal, type    Unmovable    406    380    178     12      2     43     19     10      4      1      0 \n\
Node    0, zone   Normal, type      Movable    156     28     20     16     10      7      3      5      6      4 >100000 \n\
Node    0, zone   Normal, type  Reclaimable      1      1      2      0      0      3      7      5      4      0      0 \n\
\n\
Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n\
Node 0, zone      DMA            1            7            0            0            0 \n\
Node 0, zone   Normal           45       200560           35            2            0 \n\
\n\
Number of mixed blocks    Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n\
Node 0, zone      DMA            0            0            0            0            0 \n\
Node 0, zone   Normal            3           11            2            0            0 \n";
        let z = ZoneCensus::from_pagetypeinfo(text);
        assert_eq!(z.len(), 2);
        assert_eq!(z[0].zone, "DMA");
        assert_eq!(z[0].free_blocks_by_type, vec![0, 1 + 2 * 3, 0, 0, 0]);
        assert_eq!(z[0].class(BlockClass::Free), Some(7));
        assert_eq!(z[0].class(BlockClass::Movable), Some(0));
        assert_eq!(z[0].class(BlockClass::Unmovable), Some(1));
        assert_eq!(z[0].class(BlockClass::Mixed), Some(0));
        let n = &z[1];
        assert_eq!(n.blocks_by_type, vec![45, 200560, 35, 2, 0]);
        // A capped cell counts its cap.
        assert_eq!(n.free_blocks_by_type, vec![1, 4 + 200000, 0, 0, 0]);
        assert_eq!(n.class(BlockClass::Free), Some(200005));
        assert_eq!(n.class(BlockClass::Unmovable), Some(44));
        assert_eq!(n.class(BlockClass::Movable), Some(556));
        assert_eq!(n.class(BlockClass::Reclaimable), Some(35));
        assert_eq!(n.class(BlockClass::Mixed), Some(16));
        // Without page_owner's table: no mixed count.
        let cut = &text[..text.find("\nNumber of mixed").unwrap()];
        assert!(ZoneCensus::from_pagetypeinfo(cut)
            .iter()
            .all(|z| z.mixed_blocks.is_none()));
        // Two nodes' zones of one name are summed.
        let two =
            "Number of blocks type     Unmovable      Movable  Reclaimable   HighAtomic      Isolate \n\
Node 0, zone   Normal            1            2            3            0            0 \n\
Node 1, zone   Normal            1            2            3            0            0 \n";
        assert_eq!(
            ZoneCensus::from_pagetypeinfo(two)[0].blocks_by_type,
            vec![2, 4, 6, 0, 0]
        );
        let names: Vec<&str> = BlockClass::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["free", "unmovable", "movable", "reclaimable", "mixed"]);
    }

    #[test]
    fn mixed_only_for_mergeable_types() {
        assert!(census_mixed(1, &[1, 500, 0]));
        assert!(!census_mixed(1, &[0, 500, 0]));
        assert!(census_mixed(2, &[0, 3, 7]));
        assert!(!census_mixed(3, &[100, 100, 100]), "HighAtomic is never mixed");
        assert!(alloc_mixes(0, 1) && !alloc_mixes(0, 0) && !alloc_mixes(4, 1));
    }
}
