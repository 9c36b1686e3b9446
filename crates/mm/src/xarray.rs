//! A dense, xarray-like index (`struct xarray`, lib/xarray.c; docs/model §12 for the page
//! cache it holds, §10.3 item 8 for the workingset shadow entries): per key (a page-cache
//! mapping), a radix tree of 64-slot nodes (`XA_CHUNK_SHIFT` = 6, as the kernel's `xa_node`)
//! from page index to a 64-bit entry, each entry covering a range of consecutive indices.
//!
//! Two kinds of entries share a tree, as in the kernel: *pointer* entries (a folio id) and
//! *value* entries (`xa_mk_value`: a workingset shadow, `mm/workingset.c`, packed into the
//! slot the evicted folio had). A value entry has [`VALUE_TAG`] set ([`is_value`] is
//! `xa_is_value`); its other 63 bits are the caller's.
//!
//! Every index an entry covers holds the entry, and the entry's first index is marked as its
//! head, in one head bitmap per kind: [`XArray::lookup`] answers "what covers this page" in one
//! descent, and the ordered walks ([`XArray::next_from`], [`XArray::iter`]) visit the heads of
//! one kind only, in index order — the order of a `BTreeMap` keyed by (key, first index), which
//! this structure replaced. An entry's extent is not stored: it runs from its head to the next
//! head or hole ([`XArray::entry_len`]), and the head of the entry covering an index is the
//! nearest head at or below it ([`XArray::entry_start`]).
//!
//! Each node keeps four bitmaps: occupied slots (leaf: a covered index; interior: a child
//! present), the two head bitmaps (leaf: an entry of that kind starts at the slot; interior:
//! the child's subtree holds such a head), so that a walk skips empty ranges, entry tails and
//! entries of the other kind 64 slots at a time (as the kernel's `xas_find` skips by the node's
//! bitmaps); and one mark. A tree grows upward to cover the highest index stored
//! (`xas_expand`) and nodes are freed when their last slot empties (`xas_delete_node`), so
//! memory is bounded by the entries held times the tree's height (at most 11 for 64-bit
//! indices), not by the largest index: one entry at a 64 TiB offset costs 6 nodes.
//!
//! One mark per pointer entry, as the kernel's `XA_MARK_0` (the page cache's
//! `PAGECACHE_TAG_DIRTY`, include/linux/fs.h; docs/model §12 for the page cache, §19.1
//! item 9 and §25.4 for the writeback that reads it): leaf: the entry starting at the slot is
//! marked; interior: the child's subtree holds a marked entry (the kernel's `node->marks[0]`,
//! propagated up by `node_set_mark`/`node_clear_mark`). [`XArray::iter_marked`] visits the
//! marked entries only, in the index order of [`XArray::iter`] (`xas_find_marked`), skipping
//! unmarked subtrees 64 slots at a time. An entry is inserted unmarked and its mark goes with
//! it on removal. Value entries are never marked.
//!
//! The age order of the value entries (the shadow-node shrinker's LRU, §10.3 item 8): the
//! leaves holding value heads sit in a binary heap keyed by their least value head (then key,
//! then the leaf's first index), so [`XArray::least_value`] is the least value entry of the
//! whole array, in (value, key, first index) order, read at the heap's top. The caller packs
//! its value so that this is the order it needs (workingset: the eviction stamp in the high
//! bits). This stands for the kernel's `shadow_nodes` list_lru of xarray nodes (one node per
//! heap item, as there) but orders them by their oldest shadow rather than by when they became
//! shadow-only: see `workingset.rs` for why.
//!
//! Simplifications against the kernel's xarray: no multi-index (order ≥ 6) entries in interior
//! nodes and no sibling entries — an entry writes itself into every leaf slot it covers (an
//! order-9 folio fills 8 leaves); one mark instead of three, no RCU; a tree only shrinks when
//! it empties (the kernel's `xas_shrink` also lowers the height). The nodes live in one arena
//! per index with a free list (no allocation per entry). The *accounting* of the kernel's
//! xarray nodes as slab memory is `xa_node.rs`, which does not depend on this representation.

/// `XA_CHUNK_SHIFT`: 64 slots per node.
const SHIFT: u32 = 6;
const MASK: u64 = (1 << SHIFT) - 1;
const NIL: u32 = u32::MAX;

/// The tag of a value entry (`xa_mk_value` sets the low bit; here the top one, so that a
/// pointer entry is the folio id itself).
pub const VALUE_TAG: u64 = 1 << 63;

/// `xa_is_value`.
#[inline]
pub fn is_value(entry: u64) -> bool {
    entry & VALUE_TAG != 0
}

/// The kind of an entry, selecting its head bitmap: pointer entries (folios) or value entries
/// (shadows).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pointer = 0,
    Value = 1,
}

impl Kind {
    #[inline]
    fn of(entry: u64) -> Kind {
        if is_value(entry) {
            Kind::Value
        } else {
            Kind::Pointer
        }
    }
}

/// One node: its four bitmaps and 64 slots (leaf: entries; interior: child node numbers).
///
/// Laid out (`repr(C)`) with the bitmaps first: every descent and every removal reads a
/// node's bitmaps before its slots; after the slots they sat 512 bytes in, a cache miss of
/// their own. 544 bytes, 8-aligned (the kernel's `xa_node` is 576).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
#[repr(C)]
struct Node {
    /// Leaf: the slot's index is covered. Interior: the child exists.
    occ: u64,
    /// Per [`Kind`]: leaf: an entry of that kind starts at the slot. Interior: the child's
    /// subtree holds such a head.
    heads: [u64; 2],
    /// Leaf: the entry starting at the slot is marked. Interior: the child's subtree holds a
    /// marked entry. Always a subset of the pointer heads.
    marks: u64,
    #[serde(with = "serde_big_array::BigArray")]
    slots: [u64; 64],
}

impl Node {
    /// Heads of either kind.
    #[inline]
    fn any_heads(&self) -> u64 {
        self.heads[0] | self.heads[1]
    }

    /// The bitmap a walk follows.
    #[inline]
    fn bits(&self, sel: Sel) -> u64 {
        match sel {
            Sel::Heads(k) => self.heads[k as usize],
            Sel::Marks => self.marks,
        }
    }
}

/// What a walk visits: the heads of one kind, or the marked entries.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
enum Sel {
    Heads(Kind),
    Marks,
}

/// One key's tree: its root node (or none) and the shift of the root's slots (the root covers
/// indices `[0, 64 << shift)`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug)]
struct Root {
    node: u32,
    shift: u32,
}

const EMPTY_ROOT: Root = Root { node: NIL, shift: 0 };

/// The deepest tree: shifts 60, 54, …, 0.
const MAX_DEPTH: usize = 11;

/// One item of the value-age heap: a leaf holding value heads, its least value head, and where
/// the leaf is (key, first index): the heap orders by (value, key, first index).
///
/// `value` is a lower bound of the leaf's least value head, exact unless `stale`: removing the
/// least head only marks the item stale (no scan of the leaf, no sift), and the item is made
/// exact when it reaches the top ([`XArray::least_value`]). A lower bound keeps the heap's
/// answer exact: every other item's true key is at least its stored key, so an exact top is
/// the least of all.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
struct HeapItem {
    value: u64,
    base: u64,
    key: u32,
    node: u32,
    stale: bool,
}

impl HeapItem {
    #[inline]
    fn ord(&self) -> (u64, u32, u64) {
        (self.value, self.key, self.base)
    }
}

/// A set of radix trees, one per `u32` key, sharing one node arena.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default)]
pub struct XArray {
    roots: Vec<Root>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Entries (heads) held, per [`Kind`].
    len: [usize; 2],
    /// The leaves holding value heads, a binary min-heap by [`HeapItem::ord`].
    heap: Vec<HeapItem>,
    /// Per node: its place in `heap`, `NIL` if it is not there.
    heap_pos: Vec<u32>,
}

/// One leaf of an entry's span ([`XArray::span_leaf`]): the leaf node, the path's depth to
/// it, the entry's first and last slots in it, whether the entry starts there, the slots' mask and the
/// leaf's first index.
#[derive(serde::Serialize, serde::Deserialize)]
struct SpanLeaf {
    n: u32,
    depth: usize,
    lo: u64,
    hi: u64,
    head: bool,
    mask: u64,
    cidx: u64,
}

impl XArray {
    /// Entries of `kind` held.
    pub fn len(&self, kind: Kind) -> usize {
        self.len[kind as usize]
    }

    /// No entry of either kind.
    pub fn is_empty(&self) -> bool {
        self.len == [0, 0]
    }

    /// Nodes in use (for tests of the memory bound).
    pub fn nodes_in_use(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// Host bytes: the node arena, the roots, the free list and the value-age heap
    /// (`host_mem.rs`).
    pub(crate) fn host_bytes(&self) -> u64 {
        use crate::host_mem::vec_bytes;
        vec_bytes(&self.roots)
            + vec_bytes(&self.nodes)
            + vec_bytes(&self.free)
            + vec_bytes(&self.heap)
            + vec_bytes(&self.heap_pos)
    }

    fn alloc_node(&mut self) -> u32 {
        match self.free.pop() {
            Some(n) => {
                let node = &mut self.nodes[n as usize];
                node.occ = 0;
                node.heads = [0, 0];
                node.marks = 0;
                n
            }
            None => {
                self.nodes.push(Node {
                    occ: 0,
                    heads: [0, 0],
                    marks: 0,
                    slots: [0; 64],
                });
                self.heap_pos.push(NIL);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    #[inline]
    fn root(&self, key: u32) -> Root {
        self.roots.get(key as usize).copied().unwrap_or(EMPTY_ROOT)
    }

    /// The leaf holding `index` of `key`, if any.
    #[inline]
    fn leaf(&self, key: u32, index: u64) -> Option<&Node> {
        let r = self.root(key);
        if r.node == NIL || (index >> r.shift) > MASK {
            return None;
        }
        let (mut n, mut shift) = (r.node, r.shift);
        loop {
            let node = &self.nodes[n as usize];
            if shift == 0 {
                return Some(node);
            }
            let j = (index >> shift) & MASK;
            if node.occ & (1 << j) == 0 {
                return None;
            }
            n = node.slots[j as usize] as u32;
            shift -= SHIFT;
        }
    }

    /// The entry covering `index` of `key`, of either kind.
    #[inline]
    pub fn lookup(&self, key: u32, index: u64) -> Option<u64> {
        let node = self.leaf(key, index)?;
        let j = index & MASK;
        (node.occ & (1 << j) != 0).then(|| node.slots[j as usize])
    }

    /// The entries of the slots after `index` in its leaf, up to `n` of them (stale values in
    /// uncovered slots included: for host-cache hints only, a caller checks nothing with them).
    #[inline]
    pub fn leaf_slots_after(&self, key: u32, index: u64, n: usize) -> &[u64] {
        let Some(node) = self.leaf(key, index) else {
            return &[];
        };
        let j = (index & MASK) as usize + 1;
        &node.slots[j.min(64)..(j + n).min(64)]
    }

    /// The entry of `kind` whose first index is `index` of `key`.
    #[inline]
    pub fn get(&self, key: u32, index: u64, kind: Kind) -> Option<u64> {
        let node = self.leaf(key, index)?;
        let j = index & MASK;
        (node.heads[kind as usize] & (1 << j) != 0).then(|| node.slots[j as usize])
    }

    /// The first index of the entry covering `index` of `key`: the nearest head at or below
    /// it (leaves wholly inside the entry are passed backwards).
    pub fn entry_start(&self, key: u32, index: u64) -> Option<u64> {
        let node = self.leaf(key, index)?;
        let j = index & MASK;
        if node.occ & (1 << j) == 0 {
            return None;
        }
        let mut m = node.any_heads() & (u64::MAX >> (63 - j));
        let mut base = index & !MASK;
        while m == 0 {
            // The entry began in an earlier leaf, which it fills from some head to its end.
            base = base.checked_sub(1 << SHIFT).expect("an entry without a head");
            let node = self.leaf(key, base).expect("an entry's leaves are present");
            debug_assert!(node.occ >> MASK != 0, "a gap inside an entry");
            m = node.any_heads();
        }
        Some(base + (63 - m.leading_zeros()) as u64)
    }

    /// Indices the entry starting at `start` of `key` covers: up to the next head or
    /// uncovered index (0 if no entry starts there).
    pub fn entry_len(&self, key: u32, start: u64) -> u64 {
        let Some(node) = self.leaf(key, start) else {
            return 0;
        };
        let j = start & MASK;
        if node.any_heads() & (1 << j) == 0 {
            return 0;
        }
        let stop = (!node.occ | node.any_heads()) & ((u64::MAX << j) << 1);
        if stop != 0 {
            return stop.trailing_zeros() as u64 - j;
        }
        let mut nr = 64 - j;
        let mut idx = start | MASK;
        loop {
            let Some(next) = idx.checked_add(1) else {
                return nr;
            };
            idx = next;
            let Some(node) = self.leaf(key, idx) else {
                return nr;
            };
            let stop = !node.occ | node.any_heads();
            if stop != 0 {
                return nr + stop.trailing_zeros() as u64;
            }
            nr += 64;
            idx |= MASK;
        }
    }

    /// The first index of the value entry covering `index` of `key`, else of the first value
    /// entry starting in `(index, end)`: one descent when the leaf of `index` answers.
    pub fn first_value_in(&self, key: u32, index: u64, end: u64) -> Option<u64> {
        if let Some(node) = self.leaf(key, index) {
            let j = index & MASK;
            if node.occ & (1 << j) != 0 && is_value(node.slots[j as usize]) {
                if node.heads[Kind::Value as usize] & (1 << j) != 0 {
                    return Some(index);
                }
                return self.entry_start(key, index);
            }
            let m = node.heads[Kind::Value as usize] & ((u64::MAX << j) << 1);
            if m != 0 {
                let s = (index & !MASK) + m.trailing_zeros() as u64;
                return (s < end).then_some(s);
            }
        }
        let next = (index | MASK).checked_add(1)?;
        if next >= end {
            return None;
        }
        let (start, _) = self.next_from(key, next, Kind::Value)?;
        (start < end).then_some(start)
    }

    /// The first entry of `kind` of `key` starting at or after `index`: (its first index, the
    /// entry).
    pub fn next_from(&self, key: u32, index: u64, kind: Kind) -> Option<(u64, u64)> {
        let r = self.root(key);
        if r.node == NIL || (index >> r.shift) > MASK {
            return None;
        }
        self.find(r.node, r.shift, 0, index, kind as usize)
    }

    /// The first head of `kind` at or after `index` in the subtree of node `n` (slot shift
    /// `shift`, first index `base`; `index` lies in the subtree's range or before it).
    fn find(&self, n: u32, shift: u32, base: u64, index: u64, kind: usize) -> Option<(u64, u64)> {
        let node = &self.nodes[n as usize];
        let j0 = if index <= base { 0 } else { (index - base) >> shift };
        let mut m = node.heads[kind] & (!0u64 << j0);
        if shift == 0 {
            if m == 0 {
                return None;
            }
            let j = m.trailing_zeros() as u64;
            return Some((base + j, node.slots[j as usize]));
        }
        while m != 0 {
            let j = m.trailing_zeros() as u64;
            let child_base = base + (j << shift);
            let child = node.slots[j as usize] as u32;
            if let Some(r) = self.find(child, shift - SHIFT, child_base, index, kind) {
                return Some(r);
            }
            m &= m - 1;
        }
        None
    }

    /// Entries of `kind` in (key, first index) order: ((key, first index), entry).
    pub fn iter(&self, kind: Kind) -> impl Iterator<Item = ((u32, u64), u64)> + '_ {
        (0..self.roots.len() as u32).flat_map(move |k| self.iter_key(k, kind).map(move |(i, v)| ((k, i), v)))
    }

    /// Entries of `kind` of `key` in index order: (first index, entry). One depth-first walk
    /// of the tree (`xas_for_each`): each node is read once, not one root-to-leaf descent per
    /// entry — a whole-cache walk (`writeback_expired`) on a deep tree (a 2 TiB file) was
    /// dominated by those descents.
    pub fn iter_key(&self, key: u32, kind: Kind) -> impl Iterator<Item = (u64, u64)> + '_ {
        KeyIter::new(self, key, Sel::Heads(kind))
    }

    /// The marked entries in (key, first index) order, as [`XArray::iter`] of the pointer
    /// entries filtered by the mark: ((key, first index), entry). Each key's walk
    /// (`xas_for_each_marked`) descends only into subtrees whose mark bit is set.
    pub fn iter_marked(&self) -> impl Iterator<Item = ((u32, u64), u64)> + '_ {
        (0..self.roots.len() as u32).flat_map(move |k| self.iter_key_marked(k).map(move |(i, v)| ((k, i), v)))
    }

    /// The marked entries of `key` in index order: (first index, entry).
    pub fn iter_key_marked(&self, key: u32) -> impl Iterator<Item = (u64, u64)> + '_ {
        KeyIter::new(self, key, Sel::Marks)
    }

    /// Whether the entry starting at `index` of `key` is marked (`xa_get_mark`).
    pub fn is_marked(&self, key: u32, index: u64) -> bool {
        self.leaf(key, index)
            .is_some_and(|node| node.marks & (1 << (index & MASK)) != 0)
    }

    /// Sets (`xa_set_mark`) or clears (`xa_clear_mark`) the mark of the pointer entry `entry`
    /// starting at `index` of `key`, propagating it up the tree. Returns whether it was
    /// marked before, or None, changing nothing, unless that entry is there.
    pub fn set_mark(&mut self, key: u32, index: u64, entry: u64, on: bool) -> Option<bool> {
        let r = self.root(key);
        if r.node == NIL || (index >> r.shift) > MASK {
            return None;
        }
        let mut path = [(NIL, 0u32); MAX_DEPTH];
        let (mut n, mut shift, mut depth) = (r.node, r.shift, 0);
        while shift > 0 {
            let j = (index >> shift) & MASK;
            let node = &self.nodes[n as usize];
            if node.occ & (1 << j) == 0 {
                return None;
            }
            path[depth] = (n, j as u32);
            depth += 1;
            n = node.slots[j as usize] as u32;
            shift -= SHIFT;
        }
        let j = index & MASK;
        let leaf = &mut self.nodes[n as usize];
        if leaf.heads[Kind::Pointer as usize] & (1 << j) == 0 || leaf.slots[j as usize] != entry {
            return None;
        }
        let marked = leaf.marks & (1 << j) != 0;
        let was = leaf.marks != 0;
        if on {
            leaf.marks |= 1 << j;
            // `node_set_mark` upward until a node already led to a mark.
            let mut up = !was;
            while up && depth > 0 {
                depth -= 1;
                let (p, j) = path[depth];
                let node = &mut self.nodes[p as usize];
                up = node.marks == 0;
                node.marks |= 1 << j;
            }
        } else {
            leaf.marks &= !(1 << j);
            // `node_clear_mark` upward while the node has no mark left.
            let mut up = was && leaf.marks == 0;
            while up && depth > 0 {
                depth -= 1;
                let (p, j) = path[depth];
                let node = &mut self.nodes[p as usize];
                node.marks &= !(1 << j);
                up = node.marks == 0;
            }
        }
        Some(marked)
    }

    /// Stores `entry` over `[index, index + nr)` of `key`; every index of the range must be
    /// free (panics otherwise). Its kind is [`is_value`]'s.
    pub fn insert(&mut self, key: u32, index: u64, nr: u64, entry: u64) {
        assert!(nr > 0, "an entry covers at least one index");
        let kind = Kind::of(entry) as usize;
        let last = index.checked_add(nr - 1).expect("entry range overflows");
        if self.roots.len() <= key as usize {
            self.roots.resize(key as usize + 1, EMPTY_ROOT);
        }
        // `xas_expand`: raise the tree until the root covers `last`.
        let mut r = self.roots[key as usize];
        if r.node == NIL {
            r.shift = 0;
            while (last >> r.shift) > MASK {
                r.shift += SHIFT;
            }
        } else {
            while (last >> r.shift) > MASK {
                let old = r.node;
                let o = &self.nodes[old as usize];
                let old_heads = [(o.heads[0] != 0) as u64, (o.heads[1] != 0) as u64];
                let old_marks = (o.marks != 0) as u64;
                let n = self.alloc_node();
                let node = &mut self.nodes[n as usize];
                node.slots[0] = old as u64;
                node.occ = 1;
                node.heads = old_heads;
                node.marks = old_marks;
                r.node = n;
                r.shift += SHIFT;
            }
        }
        if r.node == NIL {
            r.node = self.alloc_node();
        }
        self.roots[key as usize] = r;
        let mut chunk = index >> SHIFT;
        loop {
            let lo = if chunk == index >> SHIFT { index & MASK } else { 0 };
            let hi = if chunk == last >> SHIFT { last & MASK } else { MASK };
            let head = chunk == index >> SHIFT;
            // Descend to the leaf, creating what is missing.
            let cidx = chunk << SHIFT;
            let (mut n, mut shift) = (r.node, r.shift);
            while shift > 0 {
                let j = (cidx >> shift) & MASK;
                let bit = 1u64 << j;
                let child = if self.nodes[n as usize].occ & bit != 0 {
                    self.nodes[n as usize].slots[j as usize] as u32
                } else {
                    let c = self.alloc_node();
                    let node = &mut self.nodes[n as usize];
                    node.slots[j as usize] = c as u64;
                    node.occ |= bit;
                    c
                };
                if head {
                    self.nodes[n as usize].heads[kind] |= bit;
                }
                n = child;
                shift -= SHIFT;
            }
            let mask = (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
            let leaf = &mut self.nodes[n as usize];
            assert!(
                leaf.occ & mask == 0,
                "index {key}:{} is already covered",
                cidx + (leaf.occ & mask).trailing_zeros() as u64
            );
            leaf.occ |= mask;
            leaf.slots[lo as usize..=hi as usize].fill(entry);
            if head {
                leaf.heads[kind] |= 1 << lo;
                if kind == Kind::Value as usize {
                    self.heap_added(n, key, cidx, entry);
                }
            }
            if chunk == last >> SHIFT {
                break;
            }
            chunk += 1;
        }
        self.len[kind] += 1;
    }

    /// The leaf of chunk `chunk` (64 indices) of an entry `entry` covering `[index, index + nr)`
    /// of `key`, for [`remove`](XArray::remove) and [`replace`](XArray::replace): descends from
    /// the root, recording the path in `path`, and checks (panics otherwise) that the
    /// leaf's slots of the entry hold `entry` throughout and that no other entry starts inside.
    #[inline]
    fn span_leaf(
        &self,
        key: u32,
        index: u64,
        nr: u64,
        chunk: u64,
        entry: u64,
        path: &mut [(u32, u32); MAX_DEPTH],
    ) -> SpanLeaf {
        let r = self.root(key);
        let last = index + nr - 1;
        let lo = if chunk == index >> SHIFT { index & MASK } else { 0 };
        let hi = if chunk == last >> SHIFT { last & MASK } else { MASK };
        let head = chunk == index >> SHIFT;
        let cidx = chunk << SHIFT;
        let (mut n, mut shift, mut depth) = (r.node, r.shift, 0);
        while shift > 0 {
            let j = (cidx >> shift) & MASK;
            let node = &self.nodes[n as usize];
            assert!(node.occ & (1 << j) != 0, "no entry at {key}:{cidx}");
            path[depth] = (n, j as u32);
            depth += 1;
            n = node.slots[j as usize] as u32;
            shift -= SHIFT;
        }
        let mask = (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
        let leaf = &self.nodes[n as usize];
        assert!(
            leaf.occ & mask == mask && leaf.slots[lo as usize..=hi as usize].iter().all(|&v| v == entry),
            "{key}:{index} (+{nr}) does not hold entry {entry:#x} throughout"
        );
        assert!(
            leaf.any_heads() & mask & !(1 << lo) == 0 && (head || leaf.any_heads() & (1 << lo) == 0),
            "{key}:{index} (+{nr}) spans another entry's start"
        );
        SpanLeaf {
            n,
            depth,
            lo,
            hi,
            head,
            mask,
            cidx,
        }
    }

    /// Removes `entry` covering `[index, index + nr)` of `key` (panics unless exactly that
    /// entry is there). Returns whether it was marked.
    pub fn remove(&mut self, key: u32, index: u64, nr: u64, entry: u64) -> bool {
        assert!(nr > 0, "an entry covers at least one index");
        let kind = Kind::of(entry) as usize;
        let mut was_marked = false;
        let last = index.checked_add(nr - 1).expect("entry range overflows");
        let r = self.root(key);
        assert!(
            r.node != NIL && (last >> r.shift) <= MASK,
            "no entry at {key}:{index}"
        );
        let mut path = [(NIL, 0u32); MAX_DEPTH];
        let mut chunk = index >> SHIFT;
        loop {
            let SpanLeaf {
                n,
                mut depth,
                lo,
                head,
                mask,
                ..
            } = self.span_leaf(key, index, nr, chunk, entry, &mut path);
            let leaf = &mut self.nodes[n as usize];
            // The entry's mark goes with it.
            let mut unmarked = false;
            if head {
                assert!(
                    leaf.heads[kind] & (1 << lo) != 0,
                    "{key}:{index} is not an entry's start"
                );
                leaf.heads[kind] &= !(1 << lo);
                unmarked = leaf.marks & (1 << lo) != 0;
                was_marked = unmarked;
                leaf.marks &= !(1 << lo);
            }
            leaf.occ &= !mask;
            // `xas_delete_node`: free emptied nodes upward; clear head (mark) bits that no
            // longer lead to a head (a marked entry).
            let (mut emptied, mut headless) = (leaf.occ == 0, leaf.heads[kind] == 0);
            let mut markless = unmarked && leaf.marks == 0;
            if head && kind == Kind::Value as usize {
                self.heap_removed(n, entry);
            }
            if emptied {
                self.free.push(n);
            }
            while depth > 0 && (emptied || headless || markless) {
                depth -= 1;
                let (p, j) = path[depth];
                let node = &mut self.nodes[p as usize];
                if emptied {
                    node.occ &= !(1 << j);
                }
                if headless {
                    node.heads[kind] &= !(1 << j);
                }
                if markless {
                    node.marks &= !(1 << j);
                }
                emptied = node.occ == 0;
                headless = node.heads[kind] == 0;
                markless = markless && node.marks == 0;
                if emptied {
                    self.free.push(p);
                }
            }
            if depth == 0 && emptied {
                self.roots[key as usize] = EMPTY_ROOT;
            }
            if chunk == last >> SHIFT {
                break;
            }
            chunk += 1;
        }
        self.len[kind] -= 1;
        was_marked
    }

    /// The value entry starting at `index` of `key` if it covers exactly `nr` indices: the
    /// common refault, a folio added where a shadow of its size was, which can then
    /// [`replace`](XArray::replace) it. One descent when the entry ends inside its leaf.
    pub fn value_exactly(&self, key: u32, index: u64, nr: u64) -> Option<u64> {
        let node = self.leaf(key, index)?;
        let j = index & MASK;
        if node.heads[Kind::Value as usize] & (1 << j) == 0 {
            return None;
        }
        let entry = node.slots[j as usize];
        if j + nr < 64 {
            // The entry covers [j, j + nr) of this leaf and stops at j + nr.
            let span = (u64::MAX >> (64 - nr)) << j;
            let stop = !node.occ | node.any_heads();
            return (stop & span == 1 << j && stop & (1 << (j + nr)) != 0).then_some(entry);
        }
        (self.entry_len(key, index) == nr).then_some(entry)
    }

    /// Replaces entry `old`, covering exactly `[index, index + nr)` of `key`, by `new` in the
    /// same slots (`xas_store` over an existing entry: the page cache's folio → shadow on
    /// eviction, shadow → folio on refault), in one descent per leaf: no node is freed or
    /// allocated. Panics unless exactly that entry is there. Returns whether `old` was marked
    /// (its mark goes; `new` is unmarked).
    pub fn replace(&mut self, key: u32, index: u64, nr: u64, old: u64, new: u64) -> bool {
        assert!(nr > 0, "an entry covers at least one index");
        let (ko, kn) = (Kind::of(old) as usize, Kind::of(new) as usize);
        let last = index.checked_add(nr - 1).expect("entry range overflows");
        let r = self.root(key);
        assert!(
            r.node != NIL && (last >> r.shift) <= MASK,
            "no entry at {key}:{index}"
        );
        let mut path = [(NIL, 0u32); MAX_DEPTH];
        let mut was_marked = false;
        let mut chunk = index >> SHIFT;
        loop {
            let SpanLeaf {
                n,
                mut depth,
                lo,
                hi,
                head,
                cidx,
                ..
            } = self.span_leaf(key, index, nr, chunk, old, &mut path);
            let leaf = &mut self.nodes[n as usize];
            leaf.slots[lo as usize..=hi as usize].fill(new);
            if head {
                assert!(
                    leaf.heads[ko] & (1 << lo) != 0,
                    "{key}:{index} is not an entry's start"
                );
                was_marked = leaf.marks & (1 << lo) != 0;
                leaf.marks &= !(1 << lo);
                leaf.heads[ko] &= !(1 << lo);
                leaf.heads[kn] |= 1 << lo;
                let (mut headless, mut markless) = (leaf.heads[ko] == 0, was_marked && leaf.marks == 0);
                if ko == Kind::Value as usize {
                    self.heap_removed(n, old);
                }
                if kn == Kind::Value as usize {
                    self.heap_added(n, key, cidx, new);
                }
                // Upward: the new kind's head bit set on the whole path; the old kind's (and
                // the mark) cleared while no such head (mark) is left below.
                while depth > 0 {
                    depth -= 1;
                    let (p, j) = path[depth];
                    let node = &mut self.nodes[p as usize];
                    node.heads[kn] |= 1 << j;
                    if headless {
                        node.heads[ko] &= !(1 << j);
                        headless = node.heads[ko] == 0;
                    }
                    if markless {
                        node.marks &= !(1 << j);
                        markless = node.marks == 0;
                    }
                }
            }
            if chunk == last >> SHIFT {
                break;
            }
            chunk += 1;
        }
        self.len[ko] -= 1;
        self.len[kn] += 1;
        was_marked
    }

    /// Removes the value entry starting at `start` of `key` (panics unless one does); returns
    /// (indices it covered, the entry).
    pub fn remove_value(&mut self, key: u32, start: u64) -> (u64, u64) {
        let entry = self
            .get(key, start, Kind::Value)
            .unwrap_or_else(|| panic!("no value entry starts at {key}:{start}"));
        let nr = self.entry_len(key, start);
        self.remove(key, start, nr, entry);
        (nr, entry)
    }

    // ---- the value-age heap -----------------------------------------------------------------

    /// The least value entry, in (value, key, first index) order: (key, first index, entry).
    /// The heap's top leaf, and in it the lowest slot holding the leaf's least value head.
    pub fn least_value(&mut self) -> Option<(u32, u64, u64)> {
        while self.heap.first()?.stale {
            let n = self.heap[0].node;
            self.heap[0].value = self.leaf_least_value(n).expect("a heap leaf has value heads");
            self.heap[0].stale = false;
            self.sift_down(0);
        }
        let top = self.heap[0];
        let node = &self.nodes[top.node as usize];
        let mut m = node.heads[Kind::Value as usize];
        while m != 0 {
            let j = m.trailing_zeros() as usize;
            if node.slots[j] == top.value {
                return Some((top.key, top.base + j as u64, top.value));
            }
            m &= m - 1;
        }
        unreachable!("value heap item without its value in the leaf")
    }

    /// [`XArray::least_value`] without settling the heap (for checks): the least of the
    /// leaves' exact keys.
    pub(crate) fn least_value_peek(&self) -> Option<(u32, u64, u64)> {
        let best = if self.heap.first()?.stale {
            self.heap
                .iter()
                .map(|h| HeapItem {
                    value: self.leaf_least_value(h.node).expect("value heads"),
                    stale: false,
                    ..*h
                })
                .min_by_key(|h| h.ord())?
        } else {
            self.heap[0]
        };
        let node = &self.nodes[best.node as usize];
        let mut m = node.heads[Kind::Value as usize];
        while m != 0 {
            let j = m.trailing_zeros() as usize;
            if node.slots[j] == best.value {
                return Some((best.key, best.base + j as u64, best.value));
            }
            m &= m - 1;
        }
        None
    }

    /// The least value head of leaf `n`, if it has any.
    fn leaf_least_value(&self, n: u32) -> Option<u64> {
        let node = &self.nodes[n as usize];
        let mut m = node.heads[Kind::Value as usize];
        let mut least = None;
        while m != 0 {
            let v = node.slots[m.trailing_zeros() as usize];
            least = Some(least.map_or(v, |l: u64| l.min(v)));
            m &= m - 1;
        }
        least
    }

    /// A value head `entry` was stored in leaf `n` (of `key`, first index `base`).
    fn heap_added(&mut self, n: u32, key: u32, base: u64, entry: u64) {
        let p = self.heap_pos[n as usize];
        if p == NIL {
            let i = self.heap.len();
            self.heap.push(HeapItem {
                value: entry,
                base,
                key,
                node: n,
                stale: false,
            });
            self.heap_pos[n as usize] = i as u32;
            self.sift_up(i);
        } else if entry < self.heap[p as usize].value {
            // Below the lower bound: the leaf's least head now, exactly.
            self.heap[p as usize].value = entry;
            self.heap[p as usize].stale = false;
            self.sift_up(p as usize);
        }
    }

    /// The value head `entry` left leaf `n`: a leaf with no value head left leaves the heap
    /// (at once: its node may be freed and reused); if `entry` was its least, its key is
    /// marked stale, to be raised when it reaches the top.
    fn heap_removed(&mut self, n: u32, entry: u64) {
        let p = self.heap_pos[n as usize] as usize;
        debug_assert!(p != NIL as usize, "a leaf with value heads not in the heap");
        if self.nodes[n as usize].heads[Kind::Value as usize] == 0 {
            self.heap_pos[n as usize] = NIL;
            let last = self.heap.pop().expect("heap item");
            if p < self.heap.len() {
                self.heap[p] = last;
                self.heap_pos[last.node as usize] = p as u32;
                self.sift_down(p);
                self.sift_up(p);
            }
        } else if self.heap[p].value == entry {
            self.heap[p].stale = true;
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        let item = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].ord() <= item.ord() {
                break;
            }
            self.heap[i] = self.heap[parent];
            self.heap_pos[self.heap[i].node as usize] = i as u32;
            i = parent;
        }
        self.heap[i] = item;
        self.heap_pos[item.node as usize] = i as u32;
    }

    fn sift_down(&mut self, mut i: usize) {
        let item = self.heap[i];
        let n = self.heap.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let c = if l + 1 < n && self.heap[l + 1].ord() < self.heap[l].ord() {
                l + 1
            } else {
                l
            };
            if item.ord() <= self.heap[c].ord() {
                break;
            }
            self.heap[i] = self.heap[c];
            self.heap_pos[self.heap[i].node as usize] = i as u32;
            i = c;
        }
        self.heap[i] = item;
        self.heap_pos[item.node as usize] = i as u32;
    }

    // ---- consistency --------------------------------------------------------------------

    /// Consistency of the bitmaps, the node arena and the value heap (for tests and
    /// debug-vm): every node reachable once, interior bitmaps agree with their children, heads
    /// counted match `len`, every entry holds the same value in each slot it covers and only
    /// value entries are value-tagged heads; the heap holds exactly the leaves with value
    /// heads, each under its least value head, in heap order.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = vec![false; self.nodes.len()];
        for &f in &self.free {
            if std::mem::replace(&mut seen[f as usize], true) {
                return Err(format!("node {f} twice on the free list"));
            }
        }
        let mut heads = [0usize; 2];
        let mut leaves = Vec::new();
        for (key, r) in self.roots.iter().enumerate() {
            if r.node == NIL {
                continue;
            }
            let mut run = None;
            let (_, _, h) =
                self.check_node(key as u32, r.node, r.shift, 0, &mut seen, &mut run, &mut leaves)?;
            heads[0] += h[0];
            heads[1] += h[1];
        }
        if heads != self.len {
            return Err(format!("{heads:?} heads, {:?} counted", self.len));
        }
        if let Some(n) = seen.iter().position(|&s| !s) {
            return Err(format!("node {n} neither reachable nor free"));
        }
        // The heap.
        if self.heap_pos.len() != self.nodes.len() {
            return Err("heap positions do not cover the nodes".into());
        }
        if leaves.len() != self.heap.len() {
            return Err(format!(
                "{} leaves with value heads, {} in the heap",
                leaves.len(),
                self.heap.len()
            ));
        }
        for (key, base, n) in leaves {
            let p = self.heap_pos[n as usize];
            let least = self.leaf_least_value(n).expect("value heads");
            let Some(h) = self.heap.get(p as usize) else {
                return Err(format!("leaf {key}:{base}: not in the heap"));
            };
            if (h.key, h.base, h.node) != (key, base, n) {
                return Err(format!("leaf {key}:{base}: heap item {p} is {h:?}"));
            }
            if h.value > least || (!h.stale && h.value != least) {
                return Err(format!(
                    "leaf {key}:{base}: heap key {h:?}, least value head {least:#x}"
                ));
            }
        }
        for (i, item) in self.heap.iter().enumerate().skip(1) {
            if self.heap[(i - 1) / 2].ord() > item.ord() {
                return Err(format!("value heap out of order at {i}"));
            }
        }
        for (n, &p) in self.heap_pos.iter().enumerate() {
            if p != NIL && self.heap.get(p as usize).is_none_or(|h| h.node != n as u32) {
                return Err(format!("node {n}: heap position {p} names another leaf"));
            }
        }
        Ok(())
    }

    /// Checks node `n`'s subtree; returns its head bitmaps, marks and head counts per kind.
    /// `run` is the entry whose slots the walk is inside (carried across leaves, in index
    /// order); `leaves` collects the leaves with value heads: (key, first index, node).
    #[allow(clippy::too_many_arguments)]
    fn check_node(
        &self,
        key: u32,
        n: u32,
        shift: u32,
        base: u64,
        seen: &mut [bool],
        run: &mut Option<u64>,
        leaves: &mut Vec<(u32, u64, u32)>,
    ) -> Result<([u64; 2], u64, [usize; 2]), String> {
        if std::mem::replace(&mut seen[n as usize], true) {
            return Err(format!("key {key}: node {n} reachable twice or free"));
        }
        let node = &self.nodes[n as usize];
        if node.occ == 0 {
            return Err(format!("key {key}: empty node {n}"));
        }
        if node.any_heads() & !node.occ != 0 {
            return Err(format!("key {key}: node {n} has heads in empty slots"));
        }
        if node.marks & !node.heads[Kind::Pointer as usize] != 0 {
            return Err(format!("key {key}: node {n} has marks without pointer heads"));
        }
        if shift == 0 {
            if node.heads[0] & node.heads[1] != 0 {
                return Err(format!("key {key}: leaf {n} has heads of both kinds in a slot"));
            }
            for j in 0..64u64 {
                let bit = 1u64 << j;
                if node.occ & bit == 0 {
                    *run = None;
                    continue;
                }
                let v = node.slots[j as usize];
                if node.any_heads() & bit != 0 {
                    let kind = if node.heads[1] & bit != 0 { 1 } else { 0 };
                    if Kind::of(v) as usize != kind {
                        return Err(format!(
                            "key {key}: {} holds {v:#x} under a head of kind {kind}",
                            base + j
                        ));
                    }
                    *run = Some(v);
                } else if *run != Some(v) {
                    return Err(format!("key {key}: {} holds {v:#x} outside its entry", base + j));
                }
            }
            if node.heads[1] != 0 {
                leaves.push((key, base, n));
            }
            let h = [
                node.heads[0].count_ones() as usize,
                node.heads[1].count_ones() as usize,
            ];
            return Ok((node.heads, node.marks, h));
        }
        let mut total = [0, 0];
        for j in 0..64u64 {
            if node.occ & (1 << j) == 0 {
                // A gap of a whole subtree ends any entry.
                *run = None;
                continue;
            }
            let child_base = base + (j << shift);
            let (child_heads, child_marks, h) = self.check_node(
                key,
                node.slots[j as usize] as u32,
                shift - SHIFT,
                child_base,
                seen,
                run,
                leaves,
            )?;
            for k in 0..2 {
                if (child_heads[k] != 0) != (node.heads[k] & (1 << j) != 0) {
                    return Err(format!("key {key}: node {n} slot {j}: head bit {k} wrong"));
                }
                total[k] += h[k];
            }
            if (child_marks != 0) != (node.marks & (1 << j) != 0) {
                return Err(format!("key {key}: node {n} slot {j}: mark bit wrong"));
            }
        }
        Ok((node.heads, node.marks, total))
    }
}

/// The walk of [`XArray::iter_key`] and [`XArray::iter_key_marked`]: a stack of (node, slot
/// shift, first index, heads (marks) not yet visited), root first.
struct KeyIter<'a> {
    xa: &'a XArray,
    sel: Sel,
    stack: [(u32, u32, u64, u64); MAX_DEPTH],
    depth: usize,
}

impl<'a> KeyIter<'a> {
    fn new(xa: &'a XArray, key: u32, sel: Sel) -> Self {
        let mut it = KeyIter {
            xa,
            sel,
            stack: [(NIL, 0, 0, 0); MAX_DEPTH],
            depth: 0,
        };
        let r = xa.root(key);
        if r.node != NIL {
            it.stack[0] = (r.node, r.shift, 0, xa.nodes[r.node as usize].bits(sel));
            it.depth = 1;
        }
        it
    }
}

impl Iterator for KeyIter<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        while self.depth > 0 {
            let top = &mut self.stack[self.depth - 1];
            let (n, shift, base, m) = *top;
            if m == 0 {
                self.depth -= 1;
                continue;
            }
            let j = m.trailing_zeros() as u64;
            top.3 = m & (m - 1);
            let slot = self.xa.nodes[n as usize].slots[j as usize];
            if shift == 0 {
                return Some((base + j, slot));
            }
            // An interior head (mark) bit: the child's subtree holds a head (a marked one).
            let child = slot as u32;
            self.stack[self.depth] = (
                child,
                shift - SHIFT,
                base + (j << shift),
                self.xa.nodes[child as usize].bits(self.sel),
            );
            self.depth += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// The structure this one replaced: (key, first index) → (indices, entry), with a dense
    /// per-index view derived from it.
    #[derive(Default)]
    struct Reference {
        map: BTreeMap<(u32, u64), (u64, u64)>,
        /// The marked entries' (key, first index).
        marked: std::collections::BTreeSet<(u32, u64)>,
    }

    impl Reference {
        fn covering(&self, key: u32, index: u64) -> Option<(u64, u64, u64)> {
            let (&(k, s), &(nr, v)) = self.map.range(..=(key, index)).next_back()?;
            (k == key && index - s < nr).then_some((s, nr, v))
        }
        fn lookup(&self, key: u32, index: u64) -> Option<u64> {
            self.covering(key, index).map(|(_, _, v)| v)
        }
        fn free(&self, key: u32, index: u64, nr: u64) -> bool {
            self.lookup(key, index).is_none()
                && self
                    .map
                    .range((key, index)..)
                    .next()
                    .is_none_or(|(&(k, s), _)| k != key || s - index >= nr)
        }
        fn next_from(&self, key: u32, index: u64, kind: Kind) -> Option<(u64, u64)> {
            self.map
                .range((key, index)..=(key, u64::MAX))
                .find(|(_, &(_, v))| Kind::of(v) == kind)
                .map(|(&(_, s), &(_, v))| (s, v))
        }
        fn least_value(&self) -> Option<(u32, u64, u64)> {
            self.map
                .iter()
                .filter(|(_, &(_, v))| is_value(v))
                .map(|(&(k, s), &(_, v))| (v, k, s))
                .min()
                .map(|(v, k, s)| (k, s, v))
        }
    }

    /// The bitmaps lead the node (a descent's first read) and the node stays 544 bytes.
    #[test]
    fn node_layout_bitmaps_first() {
        assert_eq!(std::mem::offset_of!(Node, occ), 0);
        assert_eq!(std::mem::offset_of!(Node, heads), 8);
        assert_eq!(std::mem::offset_of!(Node, marks), 24);
        assert_eq!(std::mem::offset_of!(Node, slots), 32);
        assert_eq!(std::mem::size_of::<Node>(), 544);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert {
            key: u32,
            index: u64,
            nr: u64,
            value: bool,
            /// For a value entry: the value repeats an earlier one (pieces of one shadow).
            repeat: Option<usize>,
        },
        Remove {
            pick: usize,
        },
        /// Replaces an entry in place by a new one of the other kind.
        Replace {
            pick: usize,
        },
        Next {
            key: u32,
            index: u64,
        },
        /// Sets or clears the mark of an entry (or of a wrong value / no entry: refused).
        Mark {
            pick: usize,
            on: bool,
            wrong: bool,
        },
    }

    fn index() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..200,
            0u64..5000,
            (0u64..4).prop_map(|k| (1u64 << 34) + k * 70),
            Just(u64::MAX - 3),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..3, index(), prop_oneof![Just(1u64), 1u64..4, Just(64), Just(512), 1u64..300], any::<bool>(), proptest::option::of(any::<usize>()))
                .prop_map(|(key, index, nr, value, repeat)| Op::Insert { key, index, nr, value, repeat }),
            3 => any::<usize>().prop_map(|pick| Op::Remove { pick }),
            2 => any::<usize>().prop_map(|pick| Op::Replace { pick }),
            2 => (0u32..3, index()).prop_map(|(key, index)| Op::Next { key, index }),
            4 => (any::<usize>(), prop_oneof![3 => Just(true), 2 => Just(false)], prop_oneof![9 => Just(false), 1 => Just(true)])
                .prop_map(|(pick, on, wrong)| Op::Mark { pick, on, wrong }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Same operations on the xarray and on the BTreeMap it replaced, pointer and value
        /// entries mixed: same answers, same iteration order per kind, same least value entry,
        /// and the nodes freed when it empties.
        #[test]
        fn matches_btreemap(ops in proptest::collection::vec(op(), 1..120)) {
            let mut xa = XArray::default();
            let mut rf = Reference::default();
            let mut next_value = 0u64;
            let mut values: Vec<u64> = Vec::new();
            for op in ops {
                match op {
                    Op::Insert { key, index, nr, value, repeat } => {
                        let nr = nr.min(u64::MAX - index).max(1);
                        if rf.free(key, index, nr) {
                            let v = if value {
                                match repeat {
                                    Some(p) if !values.is_empty() => values[p % values.len()],
                                    _ => {
                                        // Value entries come in rising order, as evictions.
                                        let v = VALUE_TAG | (next_value << 1);
                                        values.push(v);
                                        v
                                    }
                                }
                            } else {
                                next_value
                            };
                            next_value += 1;
                            xa.insert(key, index, nr, v);
                            rf.map.insert((key, index), (nr, v));
                        }
                    }
                    Op::Remove { pick } => {
                        if !rf.map.is_empty() {
                            let (&(k, s), &(nr, v)) = rf.map.iter().nth(pick % rf.map.len()).unwrap();
                            if is_value(v) {
                                prop_assert_eq!(xa.remove_value(k, s), (nr, v));
                            } else {
                                prop_assert_eq!(xa.remove(k, s, nr, v), rf.marked.remove(&(k, s)));
                            }
                            rf.map.remove(&(k, s));
                        }
                    }
                    Op::Replace { pick } => {
                        if !rf.map.is_empty() {
                            let (&(k, s), &(nr, v)) = rf.map.iter().nth(pick % rf.map.len()).unwrap();
                            let new = if is_value(v) {
                                next_value
                            } else {
                                let n = VALUE_TAG | (next_value << 1);
                                values.push(n);
                                n
                            };
                            next_value += 1;
                            prop_assert_eq!(xa.replace(k, s, nr, v, new), rf.marked.remove(&(k, s)));
                            rf.map.insert((k, s), (nr, new));
                        }
                    }
                    Op::Mark { pick, on, wrong } => {
                        if !rf.map.is_empty() {
                            let (&(k, s), &(_, v)) = rf.map.iter().nth(pick % rf.map.len()).unwrap();
                            if wrong || is_value(v) {
                                prop_assert_eq!(xa.set_mark(k, s, v ^ 1, on), None);
                                // Not an entry's start (pointer entries are unique).
                                prop_assert_eq!(xa.set_mark(k, s.wrapping_add(1), v, on), None);
                            } else {
                                prop_assert_eq!(xa.set_mark(k, s, v, on), Some(rf.marked.contains(&(k, s))));
                                if on {
                                    rf.marked.insert((k, s));
                                } else {
                                    rf.marked.remove(&(k, s));
                                }
                            }
                        }
                    }
                    Op::Next { key, index } => {
                        for kind in [Kind::Pointer, Kind::Value] {
                            prop_assert_eq!(xa.next_from(key, index, kind), rf.next_from(key, index, kind));
                            prop_assert_eq!(
                                xa.get(key, index, kind),
                                rf.map.get(&(key, index)).map(|&(_, v)| v).filter(|&v| Kind::of(v) == kind)
                            );
                        }
                        prop_assert_eq!(xa.lookup(key, index), rf.lookup(key, index));
                        let cov = rf.covering(key, index);
                        prop_assert_eq!(xa.entry_start(key, index), cov.map(|(s, _, _)| s));
                        if let Some((s, nr, v)) = cov {
                            prop_assert_eq!(xa.entry_len(key, s), nr);
                            for n in [nr - 1, nr, nr + 1] {
                                let want = (n == nr && is_value(v)).then_some(v);
                                if n > 0 {
                                    prop_assert_eq!(xa.value_exactly(key, s, n), want);
                                }
                            }
                        }
                        if cov.is_none_or(|(s, _, _)| s != index) {
                            prop_assert_eq!(xa.value_exactly(key, index, 1), None);
                        }
                        for len in [1, 2, 63, 64, 65, 700] {
                            let end = index.saturating_add(len);
                            let want = cov.filter(|&(_, _, v)| is_value(v)).map(|(s, _, _)| s).or_else(|| {
                                rf.next_from(key, index.saturating_add(1), Kind::Value)
                                    .filter(|&(s, _)| s > index && s < end)
                                    .map(|(s, _)| s)
                            });
                            prop_assert_eq!(xa.first_value_in(key, index, end), want);
                        }
                    }
                }
                prop_assert_eq!(xa.check(), Ok(()));
                prop_assert_eq!(xa.len(Kind::Pointer) + xa.len(Kind::Value), rf.map.len());
                prop_assert_eq!(xa.least_value_peek(), rf.least_value());
                prop_assert_eq!(xa.least_value(), rf.least_value());
                prop_assert_eq!(xa.check(), Ok(()));
                // The marked walk is the full walk filtered by the mark: same entries, same order.
                let marked: Vec<_> = xa.iter_marked().collect();
                let filtered: Vec<_> = xa.iter(Kind::Pointer).filter(|&(k, _)| rf.marked.contains(&k)).collect();
                prop_assert_eq!(marked, filtered);
            }
            for &(k, s) in rf.map.keys() {
                prop_assert_eq!(xa.is_marked(k, s), rf.marked.contains(&(k, s)));
            }
            for key in 0..3 {
                let mine: Vec<_> = xa.iter_key_marked(key).map(|(i, _)| (key, i)).collect();
                let theirs: Vec<_> = rf.marked.range((key, 0)..=(key, u64::MAX)).copied().collect();
                prop_assert_eq!(mine, theirs);
            }
            for kind in [Kind::Pointer, Kind::Value] {
                let mine: Vec<_> = xa.iter(kind).collect();
                let theirs: Vec<_> = rf.map.iter().filter(|(_, &(_, v))| Kind::of(v) == kind).map(|(&k, &(_, v))| (k, v)).collect();
                prop_assert_eq!(mine, theirs);
                for key in 0..3 {
                    let mine: Vec<_> = xa.iter_key(key, kind).collect();
                    let theirs: Vec<_> = rf
                        .map
                        .range((key, 0)..=(key, u64::MAX))
                        .filter(|(_, &(_, v))| Kind::of(v) == kind)
                        .map(|(&(_, s), &(_, v))| (s, v))
                        .collect();
                    prop_assert_eq!(mine, theirs);
                }
            }
            // Empty it, least value first, then the pointers.
            while let Some((k, s, v)) = xa.least_value() {
                prop_assert_eq!(rf.least_value(), Some((k, s, v)));
                let (nr, _) = xa.remove_value(k, s);
                prop_assert_eq!(rf.map.remove(&(k, s)).map(|e| e.0), Some(nr));
                prop_assert_eq!(xa.check(), Ok(()));
            }
            for ((k, s), v) in xa.iter(Kind::Pointer).collect::<Vec<_>>() {
                let nr = rf.map[&(k, s)].0;
                xa.remove(k, s, nr, v);
            }
            prop_assert_eq!(xa.nodes_in_use(), 0);
            prop_assert!(xa.is_empty());
        }
    }

    #[test]
    fn far_offset_costs_a_path_not_a_range() {
        let mut xa = XArray::default();
        // 64 TiB into a file: index 2^34.
        xa.insert(1, 1 << 34, 1, 7);
        assert_eq!(xa.nodes_in_use(), 6);
        assert_eq!(xa.lookup(1, 1 << 34), Some(7));
        assert_eq!(xa.next_from(1, 0, Kind::Pointer), Some((1 << 34, 7)));
        xa.insert(1, 0, 512, 8);
        assert_eq!(xa.lookup(1, 511), Some(8));
        assert_eq!(xa.get(1, 511, Kind::Pointer), None);
        assert_eq!(xa.entry_start(1, 511), Some(0));
        assert_eq!(xa.entry_len(1, 0), 512);
        assert_eq!(xa.next_from(1, 1, Kind::Pointer), Some((1 << 34, 7)));
        xa.remove(1, 1 << 34, 1, 7);
        xa.remove(1, 0, 512, 8);
        assert_eq!(xa.nodes_in_use(), 0);
        assert!(xa.is_empty());
    }
}
