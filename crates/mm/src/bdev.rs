//! The block device's page cache and the ext4/jbd2 metadata it holds (docs/model §33):
//! block/bdev.c (`bdev_alloc`: the mapping's gfp is GFP_USER, without __GFP_MOVABLE), fs/buffer.c
//! (`bdev_getblk`, `__getblk_slow`, `grow_dev_folio`, `folio_alloc_buffers`, `__breadahead`,
//! `try_to_free_buffers`), the ext4 paths that read and create metadata blocks (fs/ext4/namei.c
//! `ext4_append`, `__ext4_read_dirblock`, `dx_probe`, `do_split`; fs/ext4/ialloc.c
//! `__ext4_new_inode`, `find_inode_bit`, `ext4_free_inode`; fs/ext4/inode.c
//! `__ext4_get_inode_loc`, `ext4_getblk`) and jbd2's commit (fs/jbd2/commit.c, journal.c
//! `jbd2_journal_get_descriptor_buffer`, `jbd2_journal_add_journal_head`).
//!
//! **Why it matters.** ext4 reads and creates its directory blocks through `getblk_unmovable`
//! (and inode-table readahead through `ext4_sb_breadahead_unmovable`): page-cache folios on the
//! file LRU, allocated UNMOVABLE, so they are served from the UNMOVABLE lists, inside Unmovable
//! pageblocks, next to unmovable slab and page tables, with no fallback event (§33.1 item 3).
//! A census by content (/proc/kpageflags, §30.2) counts those blocks as mixed (slab and LRU
//! pages); the model's census does the same (`folio::folio_mobility`: a bdev page is an LRU
//! page whatever it was allocated as). Unlike the kernel's slab + LRU census, the model's also
//! counts an Unmovable block holding bdev pages and nothing else.
//!
//! **What is modelled.** One ext4 filesystem per [`Mm::ext4_mount`] (mkfs defaults: 4 KiB
//! blocks, 256-byte inodes, 8192 inodes and 32768 blocks per group, `dir_index`,
//! `metadata_csum`, an internal journal), each with its block device's mapping. Its metadata
//! pages are folios of kind [`FolioKind::Bdev`] (order 0, file LRU), with the migratetype of
//! §33.2's table:
//!
//! | metadata | helper | migratetype |
//! |---|---|---|
//! | directory blocks, read or new | `ext4_getblk` → `getblk_unmovable` | UNMOVABLE |
//! | inode-table readahead | `ext4_sb_breadahead_unmovable` (GFP_NOWAIT) | UNMOVABLE |
//! | inode-table blocks | `sb_getblk` | MOVABLE |
//! | inode and block bitmaps | `sb_getblk` | MOVABLE |
//! | jbd2 descriptor and commit blocks | `__getblk` on the journal | MOVABLE |
//!
//! Every bdev folio carries one buffer head, an object of the `buffer_head` slab cache
//! (SLAB_RECLAIM_ACCOUNT: RECLAIMABLE slab pages, [`BH_PER_SLAB`] objects a page), freed with
//! the folio (`try_to_free_buffers`, §33.1 item 4).
//!
//! **Pins (§33.1 item 6).** A buffer modified in a transaction gets a journal_head, which
//! holds a buffer reference from the modification until the buffer is checkpointed: the
//! transaction commits at most [`JBD2_COMMIT_INTERVAL_NS`] after it started, the flusher writes
//! the buffer back `vm.dirty_expire_centisecs` later, and the next commit drops it from the
//! checkpoint list. While pinned the folio is neither reclaimable (`try_to_free_buffers` fails:
//! reclaim activates it) nor migratable (`buffer_migrate_folio_norefs`: −EAGAIN), and
//! `drop_caches` leaves it. Simplified: the pin ends at a time computed when the buffer is
//! journalled (commit + expiry + one commit interval), which assumes a later commit comes
//! within one interval — true while the workload keeps modifying metadata; without later
//! commits the kernel's journal_head stays until the jbd2 checkpoint shrinker or a full log
//! releases it. The pinned buffer's dirtiness is not in `nr_dirty` and its write is not
//! charged (a few pages against the files' data).
//!
//! **Layout** (block numbers are the page indices of the device's mapping): group g holds its
//! block bitmap at g·32768 + 1, its inode bitmap at + 2 and its inode table at + 32 … + 544
//! (aligned to [`INODE_READAHEAD_BLKS`], so readahead windows are table-relative); directory
//! blocks are taken in order from the groups' data areas ([`DATA_START`] on), and the journal
//! is the second half of group 0 ([`JOURNAL_START`] + log position). Only identity and the
//! inode table's adjacency matter to the model (the real filesystem's mballoc places
//! directory blocks near their inode and mkfs the journal mid-device); the indices stay
//! within the groups used, so the mapping's radix tree stays shallow.
//!
//! **Simplified** (named where they apply): no extent, xattr, symlink, quota or orphan-file
//! blocks; the superblock, group descriptors and journal superblock, pinned since mount, are
//! history and not allocated; the parent of a directory the model makes is not modelled; no
//! atime updates (a read modifies nothing); a filesystem grows groups on demand (no size
//! limit); `buffer_heads_over_limit` is not modelled; the buffer heads ext4 attaches to file
//! data folios are not modelled (only the block device's); metadata reads are not charged
//! device time.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use crate::filemap::Mapping;
use crate::folio::{FolioId, FolioKind};
use crate::gfp::Gfp;
use crate::node::Mm;

/// Filesystem block size (mkfs.ext4's default, §33.3): one block a page.
pub const BLOCK_SIZE: u64 = 4096;
/// Inodes per inode-table block: 256-byte inodes in 4 KiB blocks (§33.3, mkfs default).
pub const INODES_PER_BLOCK: u32 = 16;
/// Inodes per block group [I: mkfs.ext4's default `inode_ratio` 16384 over a 32768-block group
/// of 4 KiB blocks].
pub const INODES_PER_GROUP: u32 = 8192;
/// Blocks per block group (4 KiB blocks: 8 × 4096 bits of block bitmap).
pub const BLOCKS_PER_GROUP: u64 = 32768;
/// Inode-table blocks per group (`INODES_PER_GROUP / INODES_PER_BLOCK`).
pub const INODE_TABLE_BLOCKS: u64 = (INODES_PER_GROUP / INODES_PER_BLOCK) as u64;
/// `inode_readahead_blks` (default 32, §33.2): the window `__ext4_get_inode_loc` reads ahead
/// around an inode-table block it must read.
pub const INODE_READAHEAD_BLKS: u64 = 32;
/// The first inode a file may get: inodes 1–10 are reserved and 11 is lost+found
/// (`EXT4_FIRST_INO`), so bits 0–10 of group 0's bitmap are set by mkfs.
pub const FIRST_INO: u32 = 11;
/// Bytes of a directory block that hold entries: 4096 − the 12-byte checksum tail of
/// `metadata_csum` (§33.3 item 1).
pub const DIR_BLOCK_PAYLOAD: u64 = 4096 - 12;
/// Bytes the `.` and `..` entries take in a directory's first block (12 each).
pub const DOT_ENTRIES: u64 = 24;
/// The mean fill of an htree leaf, in percent [I: §33.3 gives 50–100 % — a leaf is split in
/// half when full (`do_split`); with hash-ordered, i.e. random, insertions B-tree leaves settle
/// at ln 2 ≈ 69 % (Yao's result for random insertions)].
pub const HTREE_FILL_PERCENT: u64 = 69;
/// `JBD2_DEFAULT_MAX_COMMIT_AGE`: a running transaction commits 5 s after it started (§33.3
/// item 4).
pub const JBD2_COMMIT_INTERVAL_NS: u64 = 5_000_000_000;
/// Block tags a descriptor block holds (§33.3 item 4: 16-byte csum-v3 tags after the 12-byte
/// header, the 16-byte UUID and a 4-byte tail).
pub const JBD2_TAGS_PER_DESCRIPTOR: u64 = 254;
/// The journal's length in blocks [I: mkfs chooses it from the filesystem's size, 64 MiB–1 GiB
/// (§33.3 item 4); 64 MiB, the smallest of that range].
pub const JOURNAL_BLOCKS: u64 = 16384;
/// `buffer_head` objects per slab page [I: the struct is ≈ 104 bytes on x86-64 (§33.1 item 4);
/// 4096 / 104 = 39].
pub const BH_PER_SLAB: u32 = 39;
/// A group's data area starts after its inode table (layout, see the module comment).
pub const DATA_START: u64 = INODE_READAHEAD_BLKS + INODE_TABLE_BLOCKS;
/// The journal's log positions: the second half of group 0 (64 MiB, [`JOURNAL_BLOCKS`]).
pub const JOURNAL_START: u64 = BLOCKS_PER_GROUP - JOURNAL_BLOCKS;

/// What block `block` of the layout holds: a bitmap, the inode table (read or read ahead),
/// the journal, or a directory block.
pub fn meta_of_block(block: u64) -> Meta {
    let (g, b) = (block / BLOCKS_PER_GROUP, block % BLOCKS_PER_GROUP);
    match b {
        1 | 2 => Meta::Bitmap,
        _ if (INODE_READAHEAD_BLKS..DATA_START).contains(&b) => Meta::InodeTable,
        _ if g == 0 && b >= JOURNAL_START => Meta::Journal,
        _ => Meta::Dir,
    }
}

/// `EXT4_DIR_REC_LEN(name_len)`: a directory entry's length, (name + 8) rounded up to 4 bytes.
pub fn dirent_rec_len(name_len: u32) -> u64 {
    (name_len as u64 + 8 + 3) & !3
}

/// The blocks a directory whose entries take `bytes` needs (§33.3 items 1–2): one while the
/// entries and `.`/`..` fit in its first block (linear); beyond, an htree — the first block
/// becomes the index root (`make_indexed_dir`) and the entries fill leaves at
/// [`HTREE_FILL_PERCENT`], at least two (the conversion splits the old block).
pub fn dir_blocks_needed(bytes: u64) -> u64 {
    if bytes + DOT_ENTRIES <= DIR_BLOCK_PAYLOAD {
        1
    } else {
        1 + bytes
            .div_ceil(DIR_BLOCK_PAYLOAD * HTREE_FILL_PERCENT / 100)
            .max(2)
    }
}

/// What a metadata page is, for the migratetype (§33.2) and the counts.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Meta {
    /// A directory block (`ext4_getblk` → `getblk_unmovable`): UNMOVABLE.
    Dir = 0,
    /// An inode-table block read ahead (`ext4_sb_breadahead_unmovable`): UNMOVABLE.
    InodeReadahead = 1,
    /// An inode-table block (`sb_getblk` in `__ext4_get_inode_loc`): MOVABLE.
    InodeTable = 2,
    /// An inode or block bitmap (`sb_getblk`): MOVABLE.
    Bitmap = 3,
    /// A jbd2 descriptor or commit block (`__getblk` on the journal): MOVABLE.
    Journal = 4,
}

impl Meta {
    pub const ALL: [Meta; 5] = [
        Meta::Dir,
        Meta::InodeReadahead,
        Meta::InodeTable,
        Meta::Bitmap,
        Meta::Journal,
    ];

    /// Allocated without __GFP_MOVABLE (§33.2).
    pub fn unmovable(self) -> bool {
        matches!(self, Meta::Dir | Meta::InodeReadahead)
    }

    pub fn name(self) -> &'static str {
        match self {
            Meta::Dir => "dir",
            Meta::InodeReadahead => "inode_readahead",
            Meta::InodeTable => "inode_table",
            Meta::Bitmap => "bitmap",
            Meta::Journal => "journal",
        }
    }

    /// The gfp of the page-cache folio (§33.2's table): GFP_USER without __GFP_FS (the
    /// buffer-head helpers' `mapping_gfp_constraint(…, ~__GFP_FS)`) and with __GFP_NOFAIL,
    /// plus __GFP_MOVABLE for `sb_getblk`/`__getblk`; readahead is GFP_NOWAIT.
    pub fn gfp(self) -> Gfp {
        let base = Gfp::GFP_USER.without(Gfp::FS).union(Gfp::NOFAIL);
        match self {
            Meta::Dir => base,
            Meta::InodeReadahead => Gfp::GFP_NOWAIT,
            Meta::InodeTable | Meta::Bitmap | Meta::Journal => base.union(Gfp::MOVABLE),
        }
    }
}

/// What an ext4 filesystem's metadata did since mount.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Ext4Stats {
    /// Bdev folios allocated, by [`Meta`] (its index).
    pub pages: [u64; 5],
    /// Of those, blocks read from the device (the rest were zeroed or created: a new
    /// directory block, an inode-table block whose other inodes are free, a log block).
    pub reads: u64,
    /// Cold inode-table reads (each with its readahead window).
    pub itable_reads: u64,
    /// Allocations that failed (a readahead page under GFP_NOWAIT; a __GFP_NOFAIL request the
    /// model's slow path gave up on).
    pub failed: u64,
    /// Transactions committed and buffers journalled in them.
    pub commits: u64,
    pub journalled: u64,
}

impl Ext4Stats {
    /// Bdev folios allocated UNMOVABLE.
    pub fn unmovable(&self) -> u64 {
        Meta::ALL
            .iter()
            .filter(|m| m.unmovable())
            .map(|&m| self.pages[m as usize])
            .sum()
    }

    /// Bdev folios allocated MOVABLE.
    pub fn movable(&self) -> u64 {
        self.pages.iter().sum::<u64>() - self.unmovable()
    }
}

/// One cached block's buffer: its buffer head's slab slot and the end of its journal pin.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
struct Buf {
    /// The slab of [`BhCache`] holding its buffer head (`u32::MAX`: none, the allocation
    /// failed).
    bh: u32,
    /// A journal_head is attached until then (`mm.cur.now_ns`; 0: never journalled).
    pinned_until: u64,
}

/// A hasher for block numbers: one multiply, no per-process seed (the tables it serves are
/// looked up, and iterated only by `debug_vm`, whose checks do not depend on the order).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default)]
pub struct BlockHasher(u64);

impl std::hash::Hasher for BlockHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (i ^ (i >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type BlockMap<V> = HashMap<u64, V, BuildHasherDefault<BlockHasher>>;
type BlockSet = HashSet<u64, BuildHasherDefault<BlockHasher>>;

/// One block group: its inode bitmap and the high-water mark of allocated inodes (the used
/// part of its inode table, `EXT4_INODES_PER_GROUP − itable_unused`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
struct Group {
    bitmap: Vec<u64>,
    used_hw: u32,
    free: u32,
    /// Every bitmap word below this one is full (host-side: where the search for the lowest
    /// free inode starts).
    first_word: usize,
}

impl Group {
    fn new() -> Group {
        Group {
            bitmap: vec![0; (INODES_PER_GROUP / 64) as usize],
            used_hw: 0,
            free: INODES_PER_GROUP,
            first_word: 0,
        }
    }

    fn test(&self, i: u32) -> bool {
        self.bitmap[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, i: u32, v: bool) {
        let w = &mut self.bitmap[(i / 64) as usize];
        let was = *w & (1 << (i % 64)) != 0;
        if v {
            *w |= 1 << (i % 64);
        } else {
            *w &= !(1 << (i % 64));
        }
        match (was, v) {
            (false, true) => {
                self.free -= 1;
                self.used_hw = self.used_hw.max(i + 1);
            }
            (true, false) => {
                self.free += 1;
                self.first_word = self.first_word.min((i / 64) as usize);
            }
            _ => {}
        }
    }

    /// Marks inodes [lo, hi) of the group used (all free before).
    fn set_range(&mut self, lo: u32, hi: u32) {
        for i in lo..hi {
            debug_assert!(!self.test(i));
            self.bitmap[(i / 64) as usize] |= 1 << (i % 64);
        }
        self.free -= hi - lo;
        self.used_hw = self.used_hw.max(hi);
    }

    /// `find_inode_bit` with a journal: the lowest free inode (no recently-deleted check).
    fn lowest_free(&mut self) -> Option<u32> {
        if self.free == 0 {
            return None;
        }
        while self.bitmap[self.first_word] == u64::MAX {
            self.first_word += 1;
        }
        let bits = self.bitmap[self.first_word];
        Some(self.first_word as u32 * 64 + (!bits).trailing_zeros())
    }
}

/// A directory: its inode and its blocks on disk (the first is the linear block or the htree
/// root; the others, the leaves, apart so that a one-block directory allocates nothing), and
/// the bytes its live entries take.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
struct Dir {
    ino: u32,
    first: u64,
    leaves: Vec<u64>,
    bytes: u64,
}

impl Dir {
    fn nblocks(&self) -> u64 {
        1 + self.leaves.len() as u64
    }

    /// The block holding the entry of `key` (§33.2: `dx_probe` finds the leaf by the name's
    /// hash): the linear block, or the leaf at the hash's position among the leaves (leaves
    /// cover hash ranges in order; the hash here is the model's own of the key).
    fn leaf_of(&self, key: u64) -> u64 {
        if self.leaves.is_empty() {
            return self.first;
        }
        let n = self.leaves.len() as u64;
        let h = mix64(self.ino as u64 ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 32;
        self.leaves[((h * n) >> 32) as usize]
    }
}

/// A directory tree on disk from before the run ([`Mm::ext4_tree`]): `dirs` directories of
/// `per_dir` files each (the last may have fewer), each directory's inode followed by its
/// files' — the order an untar made them in.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ext4Tree {
    pub first_dir: u32,
    pub first_ino: u32,
    pub per_dir: u64,
    pub dirs: u64,
}

impl Ext4Tree {
    /// The directory of file `f`.
    pub fn dir_of(&self, f: u64) -> u32 {
        self.first_dir + (f / self.per_dir) as u32
    }

    /// The inode of file `f`.
    pub fn ino_of(&self, f: u64) -> u32 {
        self.first_ino + ((f / self.per_dir) * (self.per_dir + 1) + 1 + f % self.per_dir) as u32
    }
}

/// splitmix64's finaliser: the model's stand-in for ext4's name hash (half_md4).
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The running jbd2 transaction: when it commits, and the buffers it journals.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
struct Txn {
    expires_ns: u64,
    blocks: BlockSet,
}

/// One mounted ext4 filesystem (§33.2–§33.3).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct Ext4 {
    /// The block device's mapping (`bdev->bd_mapping`).
    pub mapping: u32,
    groups: Vec<Group>,
    dirs: Vec<Dir>,
    /// The cached blocks' buffers, by block.
    bufs: BlockMap<Buf>,
    txn: Option<Txn>,
    /// The journal's next log position (blocks written since mount).
    log_head: u64,
    next_dir_block: u64,
    pub stats: Ext4Stats,
}

impl Ext4 {
    fn block_bitmap(g: u32) -> u64 {
        g as u64 * BLOCKS_PER_GROUP + 1
    }

    fn inode_bitmap(g: u32) -> u64 {
        g as u64 * BLOCKS_PER_GROUP + 2
    }

    fn inode_table(g: u32) -> u64 {
        g as u64 * BLOCKS_PER_GROUP + INODE_READAHEAD_BLKS
    }

    /// The inode-table block of inode `ino` (0-based: group × 8192 + index).
    fn itable_block(ino: u32) -> u64 {
        Self::inode_table(ino / INODES_PER_GROUP) + ((ino % INODES_PER_GROUP) / INODES_PER_BLOCK) as u64
    }

    fn group(&mut self, g: u32) -> &mut Group {
        while self.groups.len() <= g as usize {
            self.groups.push(Group::new());
        }
        &mut self.groups[g as usize]
    }

    /// `find_group_other` + `find_inode_bit`: the lowest free inode of the first group with
    /// one, from `goal`'s group on (the parent directory's; new groups as needed).
    fn alloc_inode(&mut self, goal: u32) -> u32 {
        let mut g = goal / INODES_PER_GROUP;
        loop {
            let grp = self.group(g);
            if let Some(i) = grp.lowest_free() {
                grp.set(i, true);
                return g * INODES_PER_GROUP + i;
            }
            g += 1;
        }
    }

    /// Whether every inode of `ino`'s table block other than `ino` is free (the test that
    /// lets `__ext4_get_inode_loc` zero the block instead of reading it).
    fn block_otherwise_free(&self, ino: u32) -> bool {
        let (g, i) = (ino / INODES_PER_GROUP, ino % INODES_PER_GROUP);
        let Some(grp) = self.groups.get(g as usize) else {
            return true;
        };
        let start = i & !(INODES_PER_BLOCK - 1);
        (start..start + INODES_PER_BLOCK).all(|j| j == i || !grp.test(j))
    }

    /// The journal block at log position `pos` (the log wraps after [`JOURNAL_BLOCKS`]).
    fn log_block(pos: u64) -> u64 {
        JOURNAL_START + pos % JOURNAL_BLOCKS
    }

    /// The next directory block: the next block of the data areas, group after group
    /// (group 0's ends where the journal starts).
    fn new_dir_block(&mut self) -> u64 {
        let b = self.next_dir_block;
        let (g, off) = (b / BLOCKS_PER_GROUP, b % BLOCKS_PER_GROUP);
        let end = if g == 0 { JOURNAL_START } else { BLOCKS_PER_GROUP };
        if off >= end {
            self.next_dir_block = (g + 1) * BLOCKS_PER_GROUP + DATA_START;
            return self.new_dir_block();
        }
        self.next_dir_block += 1;
        b
    }
}

/// A `buffer_head` slab page: its folio and live objects.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct BhSlab {
    folio: FolioId,
    live: u32,
    on_partial: bool,
}

/// The `buffer_head` slab cache (fs/buffer.c `bh_cachep`, SLAB_RECLAIM_ACCOUNT): order-0
/// RECLAIMABLE slab pages of [`BH_PER_SLAB`] objects, a page freed with its last object; a new
/// object goes to the most recently used slab with room (as `crate`'s other slab caches, SLUB
/// without per-CPU slabs). Not on the slab shrinker: buffer heads go with their folios.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct BhCache {
    slabs: Vec<Option<BhSlab>>,
    free_slots: Vec<u32>,
    partial: Vec<u32>,
    /// Live buffer heads.
    pub objects: u64,
}

impl BhCache {
    /// Slab pages held.
    pub fn pages(&self) -> u64 {
        self.slabs.iter().flatten().count() as u64
    }
}

/// The filesystems whose metadata the model keeps, and the buffer-head cache they share.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct BdevState {
    pub fs: Vec<Ext4>,
    pub bh: BhCache,
}

impl BdevState {
    /// The filesystem whose block device has mapping `mapping`.
    fn fs_of(&self, mapping: u32) -> Option<usize> {
        self.fs.iter().position(|f| f.mapping == mapping)
    }
}

/// How a block is brought into the cache.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    /// Read from the device.
    Read,
    /// Created without a read (a new directory block, a zeroed inode-table block, a log
    /// block).
    New,
}

impl Mm {
    /// Mounts a new ext4 filesystem: its block device's mapping (gfp GFP_USER, order 0 for
    /// 4 KiB blocks, `def_blk_aops` with `migrate_folio`, §33.1 item 1) and mkfs's reserved
    /// inodes. Returns its id for the other `ext4_*` calls.
    pub fn ext4_mount(&mut self) -> u32 {
        let mapping = self.add_mapping(Mapping {
            min_order: 0,
            max_order: 0,
            gfp: Gfp::GFP_USER,
            migrate_folio: true,
        });
        let mut fs = Ext4 {
            mapping,
            groups: Vec::new(),
            dirs: Vec::new(),
            bufs: BlockMap::default(),
            txn: None,
            log_head: 0,
            next_dir_block: DATA_START,
            stats: Ext4Stats::default(),
        };
        for i in 0..FIRST_INO {
            fs.group(0).set(i, true);
        }
        self.cache.bdev.fs.push(fs);
        (self.cache.bdev.fs.len() - 1) as u32
    }

    /// Filesystem `fs`'s metadata counts.
    pub fn ext4_stats(&self, fs: u32) -> &Ext4Stats {
        &self.cache.bdev.fs[fs as usize].stats
    }

    /// The folio caching block `block` of filesystem `fs`, if cached.
    pub fn bdev_lookup(&self, fs: u32, block: u64) -> Option<FolioId> {
        self.filemap_lookup(self.cache.bdev.fs[fs as usize].mapping, block)
    }

    /// Whether bdev folio `id`'s buffer has a journal_head attached now (§33.1 item 6).
    pub fn bdev_pinned(&self, id: FolioId) -> bool {
        let f = &self.folios.folios[id as usize];
        let Some(fs) = self.cache.bdev.fs_of(f.mapping) else {
            return false;
        };
        self.cache.bdev.fs[fs]
            .bufs
            .get(&f.index)
            .is_some_and(|b| b.pinned_until > self.cur.now_ns)
    }

    /// `bdev_getblk`: the folio of block `block` of `fs`, found (`touch_buffer`: marked
    /// accessed) or created (`__getblk_slow` → `grow_dev_folio`: an order-0 page-cache folio
    /// of kind [`FolioKind::Bdev`] with `meta`'s gfp, FGP_ACCESSED so it starts referenced,
    /// then its buffer head from the `buffer_head` cache, §33.1 items 2 and 4). `None` when
    /// the allocation failed.
    fn bdev_getblk(&mut self, cpu: u32, fs: u32, block: u64, meta: Meta, fill: Fill) -> Option<FolioId> {
        let mapping = self.cache.bdev.fs[fs as usize].mapping;
        if let Some(id) = self.filemap_lookup(mapping, block) {
            self.folio_mark_accessed(id);
            return Some(id);
        }
        self.bdev_create(cpu, fs, block, meta, fill)
    }

    /// The creating half of [`Mm::bdev_getblk`], for a block known to be uncached.
    fn bdev_create(&mut self, cpu: u32, fs: u32, block: u64, meta: Meta, fill: Fill) -> Option<FolioId> {
        let mapping = self.cache.bdev.fs[fs as usize].mapping;
        let gfp = meta.gfp();
        let Some(id) = self.filemap_add_kind(cpu, mapping, block, 0, gfp, FolioKind::Bdev) else {
            self.cache.bdev.fs[fs as usize].stats.failed += 1;
            return None;
        };
        self.folios.folios[id as usize].set_referenced(true);
        if self.blame.is_some() {
            // Issue 37, §33.1 item 3: page cache in a non-Movable block, no fallback event.
            let pfn = self.folios.folios[id as usize].pfn;
            let bmt = self.block_mt(pfn);
            if bmt != crate::types::MigrateType::Movable {
                if let Some(b) = self.blame.as_deref_mut() {
                    b.note_pagecache_unmovable(pfn, 0, crate::types::MigrateType::Unmovable.idx());
                }
            }
        }
        // `folio_alloc_buffers(folio, size, gfp | __GFP_ACCOUNT)`: slab keeps the reclaim
        // bits, drops __GFP_MOVABLE and adds the cache's __GFP_RECLAIMABLE (§33.1 item 4).
        let bh_gfp = gfp
            .without(Gfp::MOVABLE)
            .union(Gfp::RECLAIMABLE)
            .union(Gfp::ACCOUNT);
        let bh = self.bh_alloc(cpu, bh_gfp);
        let st = &mut self.cache.bdev.fs[fs as usize];
        st.bufs.insert(block, Buf { bh, pinned_until: 0 });
        st.stats.pages[meta as usize] += 1;
        if fill == Fill::Read {
            st.stats.reads += 1;
        }
        Some(id)
    }

    /// `kmem_cache_alloc(bh_cachep, gfp)`: a slot of the most recent slab with room, or a new
    /// slab page. Returns the slab's index (`u32::MAX` if the page allocation failed).
    fn bh_alloc(&mut self, cpu: u32, gfp: Gfp) -> u32 {
        let c = &mut self.cache.bdev.bh;
        while let Some(&s) = c.partial.last() {
            match c.slabs[s as usize].as_mut() {
                Some(p) if p.on_partial => {
                    p.live += 1;
                    if p.live == BH_PER_SLAB {
                        p.on_partial = false;
                        c.partial.pop();
                    }
                    c.objects += 1;
                    return s;
                }
                _ => {
                    c.partial.pop();
                }
            }
        }
        let Some(folio) = self.alloc_folio(cpu, gfp, 0, FolioKind::Slab, false) else {
            return u32::MAX;
        };
        let c = &mut self.cache.bdev.bh;
        let slab = BhSlab {
            folio,
            live: 1,
            on_partial: true,
        };
        let s = match c.free_slots.pop() {
            Some(s) => {
                c.slabs[s as usize] = Some(slab);
                s
            }
            None => {
                c.slabs.push(Some(slab));
                (c.slabs.len() - 1) as u32
            }
        };
        c.partial.push(s);
        c.objects += 1;
        s
    }

    /// Called by `free_folio` for a bdev folio leaving the page cache (reclaim,
    /// `drop_caches`): `try_to_free_buffers` frees its buffer head (`free_buffer_head`), and
    /// the slab page goes with its last object.
    pub(crate) fn bdev_release(&mut self, cpu: u32, mapping: u32, block: u64) {
        let Some(fs) = self.cache.bdev.fs_of(mapping) else {
            return;
        };
        let Some(buf) = self.cache.bdev.fs[fs].bufs.remove(&block) else {
            return;
        };
        if buf.bh == u32::MAX {
            return;
        }
        let c = &mut self.cache.bdev.bh;
        let p = c.slabs[buf.bh as usize]
            .as_mut()
            .expect("buffer head of a live slab");
        p.live -= 1;
        c.objects -= 1;
        if p.live == 0 {
            let folio = p.folio;
            c.slabs[buf.bh as usize] = None;
            c.free_slots.push(buf.bh);
            self.free_folio(cpu, folio);
        } else if !p.on_partial {
            p.on_partial = true;
            c.partial.push(buf.bh);
        }
    }

    /// The buffer of cached block `block` is modified under a journal handle
    /// (`jbd2_journal_get_write_access` → `jbd2_journal_add_journal_head`): it joins the running
    /// transaction (started now if none runs) and is pinned until that transaction's commit,
    /// the writeback `vm.dirty_expire_centisecs` later and the next commit (§33.1 item 6).
    fn journal_buffer(&mut self, fs: u32, block: u64) {
        let now = self.cur.now_ns;
        let expire = self.tun.dirty_expire_centisecs as u64 * 10_000_000;
        let st = &mut self.cache.bdev.fs[fs as usize];
        let Some(buf) = st.bufs.get_mut(&block) else {
            // The folio could not be allocated: nothing to pin.
            return;
        };
        let txn = st.txn.get_or_insert_with(|| Txn {
            expires_ns: now + JBD2_COMMIT_INTERVAL_NS,
            blocks: BlockSet::default(),
        });
        txn.blocks.insert(block);
        buf.pinned_until = buf
            .pinned_until
            .max(txn.expires_ns + expire + JBD2_COMMIT_INTERVAL_NS);
    }

    /// kjournald2's commit timer: commits every filesystem's running transaction that is
    /// due. Called from each metadata operation and by the engine's flusher (every 100 ms).
    pub fn jbd2_tick(&mut self, cpu: u32) {
        for fs in 0..self.cache.bdev.fs.len() as u32 {
            self.jbd2_commit_due(cpu, fs);
        }
    }

    /// `jbd2_journal_commit_transaction` of `fs`'s running transaction if it is due (§33.3
    /// item 4): ⌈N / [`JBD2_TAGS_PER_DESCRIPTOR`]⌉ descriptor blocks and one commit block,
    /// MOVABLE bdev pages at their log positions (a position wrapped onto a cached page reuses
    /// it); the N journalled metadata blocks take log positions too, but their copies point at
    /// the original folios (`jbd2_journal_write_metadata_buffer`: no page-cache page). The log
    /// blocks are written and released at once: clean and unpinned.
    fn jbd2_commit_due(&mut self, cpu: u32, fs: u32) {
        let now = self.cur.now_ns;
        let st = &mut self.cache.bdev.fs[fs as usize];
        if st.txn.as_ref().is_none_or(|t| now < t.expires_ns) {
            return;
        }
        let txn = st.txn.take().expect("checked");
        let n = txn.blocks.len() as u64;
        let desc = n.div_ceil(JBD2_TAGS_PER_DESCRIPTOR).max(1);
        let head = st.log_head;
        st.log_head += desc + n + 1;
        st.stats.commits += 1;
        st.stats.journalled += n;
        // Positions: each descriptor before its ≤ 254 blocks, the commit block after them all.
        let mut positions: Vec<u64> = (0..desc)
            .map(|d| head + d * (JBD2_TAGS_PER_DESCRIPTOR + 1))
            .collect();
        positions.push(head + desc + n);
        for pos in positions {
            self.bdev_getblk(cpu, fs, Ext4::log_block(pos), Meta::Journal, Fill::New);
        }
    }

    /// Brings block `block` into the cache (reading it if uncached) and journals it.
    fn modify(&mut self, cpu: u32, fs: u32, block: u64, meta: Meta) {
        self.bdev_getblk(cpu, fs, block, meta, Fill::Read);
        self.journal_buffer(fs, block);
    }

    /// `__ext4_get_inode_loc` for inode `ino` (§33.2, §33.3 item 1): a cached inode-table
    /// block is a hit; an uncached one whose other inodes are all free is zeroed (`new`: an
    /// inode just allocated, with its bitmap cached) — one MOVABLE page, no I/O; otherwise it
    /// is read (MOVABLE, `sb_getblk`) and the blocks of its [`INODE_READAHEAD_BLKS`]-aligned
    /// window within the group's used inode table, to `min(start + 32, table + used)`
    /// inclusive as the loop reads them, are read ahead, each one not cached becoming an
    /// UNMOVABLE page (`ext4_sb_breadahead_unmovable`, GFP_NOWAIT: it may fail).
    fn inode_loc(&mut self, cpu: u32, fs: u32, ino: u32, new: bool) -> u64 {
        let block = Ext4::itable_block(ino);
        if let Some(id) = self.bdev_lookup(fs, block) {
            // `sb_getblk` finds it (`touch_buffer`).
            self.folio_mark_accessed(id);
            return block;
        }
        if new && self.cache.bdev.fs[fs as usize].block_otherwise_free(ino) {
            self.bdev_create(cpu, fs, block, Meta::InodeTable, Fill::New);
            return block;
        }
        self.bdev_create(cpu, fs, block, Meta::InodeTable, Fill::Read);
        let g = ino / INODES_PER_GROUP;
        let table = Ext4::inode_table(g);
        let used = self.cache.bdev.fs[fs as usize]
            .groups
            .get(g as usize)
            .map_or(0, |grp| grp.used_hw);
        let mut b = (block & !(INODE_READAHEAD_BLKS - 1)).max(table);
        let end = (b + INODE_READAHEAD_BLKS).min(table + (used / INODES_PER_BLOCK) as u64);
        self.cache.bdev.fs[fs as usize].stats.itable_reads += 1;
        while b <= end {
            // `bdev_getblk(…, GFP_NOWAIT)`: a cached block is found and touched, an uncached
            // one created (and read).
            if b != block {
                self.bdev_getblk(cpu, fs, b, Meta::InodeReadahead, Fill::Read);
            }
            b += 1;
        }
        block
    }

    /// A directory block read (`ext4_bread` → `ext4_getblk` → `getblk_unmovable`, UNMOVABLE).
    fn dir_read(&mut self, cpu: u32, fs: u32, block: u64) {
        self.bdev_getblk(cpu, fs, block, Meta::Dir, Fill::Read);
    }

    /// Makes a directory (`ext4_mkdir`, §33.3 item 2): an inode (in group `goal`'s group or
    /// later) and its first block. A new directory's block comes from `ext4_append` (a new
    /// UNMOVABLE page, not read) and is journalled with the inode's table block and the inode
    /// bitmap; a directory that `existed` before the run (a tree on disk) has its block on
    /// disk, uncached. Returns its id.
    pub fn ext4_mkdir(&mut self, cpu: u32, fs: u32, goal_group: u32, existed: bool) -> u32 {
        self.jbd2_commit_due(cpu, fs);
        let st = &mut self.cache.bdev.fs[fs as usize];
        let ino = st.alloc_inode(goal_group * INODES_PER_GROUP);
        let first = st.new_dir_block();
        st.dirs.push(Dir {
            ino,
            first,
            leaves: Vec::new(),
            bytes: 0,
        });
        let dir = (st.dirs.len() - 1) as u32;
        if !existed {
            self.bdev_getblk(cpu, fs, first, Meta::Dir, Fill::New);
            self.journal_buffer(fs, first);
            self.modify(cpu, fs, Ext4::inode_bitmap(ino / INODES_PER_GROUP), Meta::Bitmap);
            let b = self.inode_loc(cpu, fs, ino, true);
            self.journal_buffer(fs, b);
        }
        dir
    }

    /// A directory tree that is on disk before the run (a source tree): `files` files with
    /// names of `name_len` bytes in directories of `per_dir`, each directory's inode followed
    /// by its files' in one range of inodes after every inode in use (the order an untar made
    /// them in: an inode-table block holds a directory and its neighbours), its directory
    /// blocks on disk; nothing of it cached or journalled. Equivalent to [`Mm::ext4_mkdir`] and
    /// [`Mm::ext4_create`] with `existed` for each, in bulk (no per-file state: the tree's
    /// arithmetic gives a file's directory and inode).
    pub fn ext4_tree(&mut self, fs: u32, files: u64, per_dir: u64, name_len: u32) -> Ext4Tree {
        let per_dir = per_dir.max(1);
        let dirs = files.div_ceil(per_dir).max(1);
        let st = &mut self.cache.bdev.fs[fs as usize];
        let first_ino = st
            .groups
            .iter()
            .enumerate()
            .rev()
            .find(|(_, g)| g.used_hw > 0)
            .map_or(0, |(gi, g)| gi as u32 * INODES_PER_GROUP + g.used_hw);
        let end = first_ino + (dirs + files) as u32;
        let mut i = first_ino;
        while i < end {
            let g = i / INODES_PER_GROUP;
            let hi = end.min((g + 1) * INODES_PER_GROUP);
            st.group(g)
                .set_range(i % INODES_PER_GROUP, hi - g * INODES_PER_GROUP);
            i = hi;
        }
        let first_dir = st.dirs.len() as u32;
        for d in 0..dirs {
            let entries = per_dir.min(files - d * per_dir);
            let bytes = entries * dirent_rec_len(name_len);
            let first = st.new_dir_block();
            let leaves = (1..dir_blocks_needed(bytes))
                .map(|_| st.new_dir_block())
                .collect();
            st.dirs.push(Dir {
                ino: first_ino + (d * (per_dir + 1)) as u32,
                first,
                leaves,
                bytes,
            });
        }
        Ext4Tree {
            first_dir,
            first_ino,
            per_dir,
            dirs,
        }
    }

    /// Adds an entry of `name_len` bytes for `key` to `dir` (`ext4_add_entry`, §33.3 items
    /// 1–2): the leaf is read if uncached (`dx_probe` reads the root first), the entry goes in
    /// and the leaf is journalled; when the directory needs another block (the first overflow
    /// converts it to an htree — `make_indexed_dir` — and each later full leaf is split,
    /// `do_split`), the new blocks come from `ext4_append` (new UNMOVABLE pages) and the root
    /// and the new blocks are journalled. With `existed` the entry is on disk already: the
    /// directory's size grows, nothing is cached or journalled. A directory never shrinks.
    fn dir_add(&mut self, cpu: u32, fs: u32, dir: u32, key: u64, name_len: u32, existed: bool) {
        let st = &mut self.cache.bdev.fs[fs as usize];
        st.dirs[dir as usize].bytes += dirent_rec_len(name_len);
        let need = dir_blocks_needed(st.dirs[dir as usize].bytes);
        let mut new_blocks = Vec::new();
        while st.dirs[dir as usize].nblocks() < need {
            let b = st.new_dir_block();
            new_blocks.push(b);
            st.dirs[dir as usize].leaves.push(b);
        }
        if existed {
            return;
        }
        let d = &st.dirs[dir as usize];
        let (root, leaf) = (d.first, d.leaf_of(key));
        let htree = d.nblocks() > 1;
        if htree && new_blocks.is_empty() {
            self.dir_read(cpu, fs, root);
        }
        for &b in &new_blocks {
            self.bdev_getblk(cpu, fs, b, Meta::Dir, Fill::New);
            self.journal_buffer(fs, b);
        }
        if !new_blocks.is_empty() {
            // The root's index (or the linear block turned root) changes.
            self.dir_read(cpu, fs, root);
            self.journal_buffer(fs, root);
        }
        self.dir_read(cpu, fs, leaf);
        self.journal_buffer(fs, leaf);
    }

    /// Creates a file of `name_len` bytes' name, `key` in `dir` (`ext4_create` →
    /// `__ext4_new_inode`, `ext4_add_nondir`; §33.3 item 1): the lowest free inode from the
    /// directory's group on, its bitmap (read if uncached) and inode-table block
    /// ([`Mm`]'s `inode_loc`: a hit, a zeroed block, or a read with readahead) journalled;
    /// with `data`, the block bitmap of the inode's group (mballoc's goal; delayed allocation
    /// takes it at writeback, simplified: now); the directory entry; the directory's inode
    /// (mtime). `existed`: the file is on disk from before the run (its inode and entry
    /// allocated, nothing cached). Returns the inode.
    #[allow(clippy::too_many_arguments)]
    pub fn ext4_create(
        &mut self,
        cpu: u32,
        fs: u32,
        dir: u32,
        key: u64,
        name_len: u32,
        data: bool,
        existed: bool,
    ) -> u32 {
        if !existed {
            self.jbd2_commit_due(cpu, fs);
        }
        let st = &mut self.cache.bdev.fs[fs as usize];
        let dir_ino = st.dirs[dir as usize].ino;
        let ino = st.alloc_inode(dir_ino);
        self.dir_add(cpu, fs, dir, key, name_len, existed);
        if existed {
            return ino;
        }
        let g = ino / INODES_PER_GROUP;
        self.modify(cpu, fs, Ext4::inode_bitmap(g), Meta::Bitmap);
        let b = self.inode_loc(cpu, fs, ino, true);
        self.journal_buffer(fs, b);
        if data {
            self.modify(cpu, fs, Ext4::block_bitmap(g), Meta::Bitmap);
        }
        let db = self.inode_loc(cpu, fs, dir_ino, false);
        self.journal_buffer(fs, db);
        ino
    }

    /// Truncating an existing file, inode `ino` (`O_TRUNC`: `ext4_truncate`, §33.3 item 5): its
    /// inode-table block and, with `data`, its group's block bitmap (the blocks freed, the
    /// write's new ones taken near them) are journalled. No new page unless one had to be read.
    pub fn ext4_truncate(&mut self, cpu: u32, fs: u32, ino: u32, data: bool) {
        self.jbd2_commit_due(cpu, fs);
        let b = self.inode_loc(cpu, fs, ino, false);
        self.journal_buffer(fs, b);
        if data {
            self.modify(cpu, fs, Ext4::block_bitmap(ino / INODES_PER_GROUP), Meta::Bitmap);
        }
    }

    /// A lookup that misses the dentry cache (`ext4_lookup` → `__ext4_find_entry`): the
    /// directory's blocks on the way to `key`'s entry are read if uncached (the htree root and
    /// the leaf, or the linear block; UNMOVABLE). With `ino` the inode is not cached either
    /// (`ext4_iget` → `__ext4_get_inode_loc`): its table block is read with readahead if
    /// uncached.
    pub fn ext4_lookup(&mut self, cpu: u32, fs: u32, dir: u32, key: u64, ino: Option<u32>) {
        self.jbd2_commit_due(cpu, fs);
        let d = &self.cache.bdev.fs[fs as usize].dirs[dir as usize];
        let (root, leaf, htree) = (d.first, d.leaf_of(key), d.nblocks() > 1);
        if htree {
            self.dir_read(cpu, fs, root);
        }
        self.dir_read(cpu, fs, leaf);
        if let Some(ino) = ino {
            self.inode_loc(cpu, fs, ino, false);
        }
    }

    /// Unlinks file `key` (inode `ino`, name of `name_len`) from `dir` (`ext4_unlink`, then
    /// `ext4_evict_inode` → `ext4_free_inode` at the last iput; §33.3 item 5): a lookup if the
    /// dentry (`dentry_cached` false) or inode is not cached, then the leaf, the inode's table
    /// block, the inode bitmap, with `data` the block bitmap, and the directory's inode are
    /// journalled; the inode is freed. No new metadata page unless a block had to be read.
    #[allow(clippy::too_many_arguments)]
    pub fn ext4_unlink(
        &mut self,
        cpu: u32,
        fs: u32,
        dir: u32,
        key: u64,
        name_len: u32,
        ino: u32,
        data: bool,
        dentry_cached: bool,
    ) {
        if !dentry_cached {
            self.ext4_lookup(cpu, fs, dir, key, Some(ino));
        } else {
            self.jbd2_commit_due(cpu, fs);
        }
        let st = &mut self.cache.bdev.fs[fs as usize];
        let d = &mut st.dirs[dir as usize];
        d.bytes = d.bytes.saturating_sub(dirent_rec_len(name_len));
        let (leaf, dir_ino) = (d.leaf_of(key), d.ino);
        self.dir_read(cpu, fs, leaf);
        self.journal_buffer(fs, leaf);
        let b = self.inode_loc(cpu, fs, ino, false);
        self.journal_buffer(fs, b);
        let g = ino / INODES_PER_GROUP;
        self.modify(cpu, fs, Ext4::inode_bitmap(g), Meta::Bitmap);
        self.cache.bdev.fs[fs as usize]
            .group(g)
            .set(ino % INODES_PER_GROUP, false);
        if data {
            self.modify(cpu, fs, Ext4::block_bitmap(g), Meta::Bitmap);
        }
        let db = self.inode_loc(cpu, fs, dir_ino, false);
        self.journal_buffer(fs, db);
    }

    /// The buffer heads of the bdev folios: (live objects, slab pages).
    pub fn bh_census(&self) -> (u64, u64) {
        (self.cache.bdev.bh.objects, self.cache.bdev.bh.pages())
    }

    /// Cached bdev blocks of every filesystem with their buffer-head slab slot (for
    /// `debug_vm`): (mapping, block, slab).
    pub(crate) fn bdev_bufs(&self) -> impl Iterator<Item = (u32, u64, u32)> + '_ {
        self.cache
            .bdev
            .fs
            .iter()
            .flat_map(|f| f.bufs.iter().map(move |(&b, buf)| (f.mapping, b, buf.bh)))
    }

    /// Cached bdev blocks of every filesystem (for `debug_vm`).
    pub(crate) fn bdev_nr_bufs(&self) -> u64 {
        self.cache.bdev.fs.iter().map(|f| f.bufs.len() as u64).sum()
    }

    /// Whether block `block` of the device with mapping `mapping` has a buffer (for
    /// `debug_vm`).
    pub(crate) fn bdev_has_buf(&self, mapping: u32, block: u64) -> bool {
        self.cache
            .bdev
            .fs_of(mapping)
            .is_some_and(|fs| self.cache.bdev.fs[fs].bufs.contains_key(&block))
    }

    /// The slab folio and live objects of buffer-head slab `s` (for `debug_vm`).
    pub(crate) fn bh_slab(&self, s: u32) -> Option<(FolioId, u32)> {
        self.cache
            .bdev
            .bh
            .slabs
            .get(s as usize)
            .copied()
            .flatten()
            .map(|p| (p.folio, p.live))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s33_3_entry_sizes_and_directory_growth() {
        // EXT4_DIR_REC_LEN: (name + 8) rounded up to 4.
        assert_eq!(
            [1, 4, 5, 8, 12, 15, 16].map(dirent_rec_len),
            [12, 12, 16, 16, 20, 24, 24]
        );
        // A linear directory: one block while the entries and . / .. fit in 4084 bytes.
        assert_eq!(dir_blocks_needed(4084 - 24), 1);
        // The first overflow converts it: a root and two leaves.
        assert_eq!(dir_blocks_needed(4084 - 23), 3);
        // 24-byte entries (§33.3's 12–15-character names): 117 a leaf at 69 % fill, inside
        // §33.3's 85–170.
        let per_leaf = 4084 * HTREE_FILL_PERCENT / 100 / 24;
        assert!((85..=170).contains(&per_leaf), "{per_leaf}");
        assert_eq!(
            dir_blocks_needed(10_000 * 24),
            1 + (10_000 * 24u64).div_ceil(2817)
        );
    }

    #[test]
    fn lowest_free_inode_and_bitmap_counts() {
        let mut g = Group::new();
        for i in 0..70 {
            g.set(i, true);
        }
        g.set(3, false);
        assert_eq!(g.lowest_free(), Some(3));
        assert_eq!((g.free, g.used_hw), (INODES_PER_GROUP - 69, 70));
        g.set(3, true);
        assert_eq!(g.lowest_free(), Some(70));
    }
}
