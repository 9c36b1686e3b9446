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
//! (kernel-model.md §30.4): a block of one of the three mergeable types
//! (`migratetype_is_mergeable`, §1.3) holding an allocation of another.

/// The migratetypes' letters in the kernel's order (`migratetype_names`: Unmovable, Movable,
/// Reclaimable, HighAtomic, Isolate): the index is the migratetype.
pub const MIGRATETYPE_LETTERS: [char; 5] = ['U', 'M', 'R', 'H', 'I'];

/// Pages per pageblock (`pageblock_nr_pages`, order 9 on x86-64).
pub const PAGEBLOCK_PAGES: u64 = 512;

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

    #[test]
    fn mixed_only_for_mergeable_types() {
        assert!(census_mixed(1, &[1, 500, 0]));
        assert!(!census_mixed(1, &[0, 500, 0]));
        assert!(census_mixed(2, &[0, 3, 7]));
        assert!(!census_mixed(3, &[100, 100, 100]), "HighAtomic is never mixed");
        assert!(alloc_mixes(0, 1) && !alloc_mixes(0, 0) && !alloc_mixes(4, 1));
    }
}
