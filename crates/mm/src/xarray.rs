//! A dense, xarray-like index (`struct xarray`, lib/xarray.c; kernel-model.md §12 for the page
//! cache it holds, §10.3 item 8 for the workingset shadow entries): per key (a page-cache
//! mapping), a radix tree of 64-slot nodes (`XA_CHUNK_SHIFT` = 6, as the kernel's `xa_node`)
//! from page index to a 32-bit value (a folio id, or a shadow record's slot), each entry
//! covering a range of consecutive indices.
//!
//! Every index an entry covers holds the entry's value, and the entry's first index is marked
//! as its head: [`XArray::lookup`] answers "what covers this page" in one descent, and the
//! ordered walks ([`XArray::next_from`], [`XArray::iter`]) visit heads only, in index order —
//! the order of a `BTreeMap` keyed by (key, first index), which this structure replaced.
//!
//! Each node keeps two bitmaps: occupied slots (leaf: a covered index; interior: a child
//! present) and slots holding or leading to a head, so that a walk skips empty ranges and
//! entry tails 64 slots at a time (as the kernel's `xas_find` skips by the node's mark
//! bitmaps). A tree grows upward to cover the highest index stored (`xas_expand`) and nodes are
//! freed when their last slot empties (`xas_delete_node`), so memory is bounded by the entries
//! held times the tree's height (at most 11 for 64-bit indices), not by the largest index: one
//! entry at a 64 TiB offset costs 6 nodes.
//!
//! One mark per entry, as the kernel's `XA_MARK_0` (the page cache's `PAGECACHE_TAG_DIRTY`,
//! include/linux/fs.h; kernel-model.md §12 for the page cache, §19.1 item 9 and §25.4 for the
//! writeback that reads it): a third bitmap per node, leaf: the entry starting at the slot is
//! marked; interior: the child's subtree holds a marked entry (the kernel's `node->marks[0]`,
//! propagated up by `node_set_mark`/`node_clear_mark`). [`XArray::iter_marked`] visits the
//! marked entries only, in the index order of [`XArray::iter`] (`xas_find_marked`), skipping
//! unmarked subtrees 64 slots at a time. An entry is inserted unmarked and its mark goes with
//! it on removal.
//!
//! Simplifications against the kernel's xarray: no multi-index (order ≥ 6) entries in interior
//! nodes and no sibling entries — an entry writes its value into every leaf slot it covers (an
//! order-9 folio fills 8 leaves); one mark instead of three, no RCU; a tree only shrinks when it empties (the
//! kernel's `xas_shrink` also lowers the height). The nodes live in one arena per index with a
//! free list (no allocation per entry). The *accounting* of the kernel's xarray nodes as slab
//! memory is `xa_node.rs`, which does not depend on this representation.

/// `XA_CHUNK_SHIFT`: 64 slots per node.
const SHIFT: u32 = 6;
const MASK: u64 = (1 << SHIFT) - 1;
const NIL: u32 = u32::MAX;

/// One node: its three bitmaps and 64 slots (leaf: values; interior: child node numbers).
///
/// Laid out (`repr(C)`) with the bitmaps first: every descent and every removal reads a
/// node's bitmaps before its slots; after the slots they sat 256 bytes in, a cache miss of
/// their own. 280 bytes, 8-aligned: a cache-line alignment (320 bytes) or a 32-byte one (288)
/// that keeps the bitmaps in one line cost 3-5 MiB of peak RSS on the kbuild experiment for no
/// measurable speed.
#[derive(Clone, Debug)]
#[repr(C)]
struct Node {
    /// Leaf: the slot's index is covered. Interior: the child exists.
    occ: u64,
    /// Leaf: an entry starts at the slot. Interior: the child's subtree holds a head.
    heads: u64,
    /// Leaf: the entry starting at the slot is marked. Interior: the child's subtree holds a
    /// marked entry. Always a subset of `heads`.
    marks: u64,
    slots: [u32; 64],
}

/// One key's tree: its root node (or none) and the shift of the root's slots (the root covers
/// indices `[0, 64 << shift)`).
#[derive(Clone, Copy, Debug)]
struct Root {
    node: u32,
    shift: u32,
}

const EMPTY_ROOT: Root = Root { node: NIL, shift: 0 };

/// The deepest tree: shifts 60, 54, …, 0.
const MAX_DEPTH: usize = 11;

/// A set of radix trees, one per `u32` key, sharing one node arena.
#[derive(Clone, Debug, Default)]
pub struct XArray {
    roots: Vec<Root>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// Entries (heads) held.
    len: usize,
}

impl XArray {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Nodes in use (for tests of the memory bound).
    pub fn nodes_in_use(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// Host bytes: the node arena, the roots and the free list (`host_mem.rs`).
    pub(crate) fn host_bytes(&self) -> u64 {
        use crate::host_mem::vec_bytes;
        vec_bytes(&self.roots) + vec_bytes(&self.nodes) + vec_bytes(&self.free)
    }

    fn alloc_node(&mut self) -> u32 {
        match self.free.pop() {
            Some(n) => {
                let node = &mut self.nodes[n as usize];
                node.occ = 0;
                node.heads = 0;
                node.marks = 0;
                n
            }
            None => {
                self.nodes.push(Node {
                    slots: [0; 64],
                    occ: 0,
                    heads: 0,
                    marks: 0,
                });
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
            n = node.slots[j as usize];
            shift -= SHIFT;
        }
    }

    /// The value of the entry covering `index` of `key`.
    #[inline]
    pub fn lookup(&self, key: u32, index: u64) -> Option<u32> {
        let node = self.leaf(key, index)?;
        let j = index & MASK;
        (node.occ & (1 << j) != 0).then(|| node.slots[j as usize])
    }

    /// The value of the entry whose first index is `index` of `key`.
    #[inline]
    pub fn get(&self, key: u32, index: u64) -> Option<u32> {
        let node = self.leaf(key, index)?;
        let j = index & MASK;
        (node.heads & (1 << j) != 0).then(|| node.slots[j as usize])
    }

    /// The value of the entry covering `index` of `key`, else of the first entry starting in
    /// `(index, end)`: one descent when the leaf of `index` answers.
    pub fn first_in(&self, key: u32, index: u64, end: u64) -> Option<u32> {
        if let Some(node) = self.leaf(key, index) {
            let j = index & MASK;
            if node.occ & (1 << j) != 0 {
                return Some(node.slots[j as usize]);
            }
            let m = node.heads & ((!0u64 << j) << 1);
            if m != 0 {
                let j = m.trailing_zeros() as u64;
                return ((index & !MASK) + j < end).then(|| node.slots[j as usize]);
            }
        }
        let next = (index | MASK).checked_add(1)?;
        if next >= end {
            return None;
        }
        let (start, v) = self.next_from(key, next)?;
        (start < end).then_some(v)
    }

    /// The first entry of `key` starting at or after `index`: (its first index, its value).
    pub fn next_from(&self, key: u32, index: u64) -> Option<(u64, u32)> {
        let r = self.root(key);
        if r.node == NIL || (index >> r.shift) > MASK {
            return None;
        }
        self.find(r.node, r.shift, 0, index)
    }

    /// The first head at or after `index` in the subtree of node `n` (slot shift `shift`,
    /// first index `base`; `index` lies in the subtree's range or before it).
    fn find(&self, n: u32, shift: u32, base: u64, index: u64) -> Option<(u64, u32)> {
        let node = &self.nodes[n as usize];
        let j0 = if index <= base { 0 } else { (index - base) >> shift };
        let mut m = node.heads & (!0u64 << j0);
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
            if let Some(r) = self.find(node.slots[j as usize], shift - SHIFT, child_base, index) {
                return Some(r);
            }
            m &= m - 1;
        }
        None
    }

    /// Entries in (key, first index) order: ((key, first index), value).
    pub fn iter(&self) -> impl Iterator<Item = ((u32, u64), u32)> + '_ {
        (0..self.roots.len() as u32).flat_map(move |k| self.iter_key(k).map(move |(i, v)| ((k, i), v)))
    }

    /// Entries of `key` in index order: (first index, value). One depth-first walk of the
    /// tree (`xas_for_each`): each node is read once, not one root-to-leaf descent per entry —
    /// a whole-cache walk (`writeback_expired`) on a deep tree (a 2 TiB file) was dominated by
    /// those descents.
    pub fn iter_key(&self, key: u32) -> impl Iterator<Item = (u64, u32)> + '_ {
        KeyIter::<false>::new(self, key)
    }

    /// The marked entries in (key, first index) order, as [`XArray::iter`] filtered by the
    /// mark: ((key, first index), value). Each key's walk (`xas_for_each_marked`) descends only
    /// into subtrees whose mark bit is set.
    pub fn iter_marked(&self) -> impl Iterator<Item = ((u32, u64), u32)> + '_ {
        (0..self.roots.len() as u32).flat_map(move |k| self.iter_key_marked(k).map(move |(i, v)| ((k, i), v)))
    }

    /// The marked entries of `key` in index order: (first index, value).
    pub fn iter_key_marked(&self, key: u32) -> impl Iterator<Item = (u64, u32)> + '_ {
        KeyIter::<true>::new(self, key)
    }

    /// Whether the entry starting at `index` of `key` is marked (`xa_get_mark`).
    pub fn is_marked(&self, key: u32, index: u64) -> bool {
        self.leaf(key, index)
            .is_some_and(|node| node.marks & (1 << (index & MASK)) != 0)
    }

    /// Sets (`xa_set_mark`) or clears (`xa_clear_mark`) the mark of the entry of `value`
    /// starting at `index` of `key`, propagating it up the tree. Returns whether it was
    /// marked before, or None, changing nothing, unless that entry is there.
    pub fn set_mark(&mut self, key: u32, index: u64, value: u32, on: bool) -> Option<bool> {
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
            n = node.slots[j as usize];
            shift -= SHIFT;
        }
        let j = index & MASK;
        let leaf = &mut self.nodes[n as usize];
        if leaf.heads & (1 << j) == 0 || leaf.slots[j as usize] != value {
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

    /// Stores an entry of `value` covering `[index, index + nr)` of `key`; every index of the
    /// range must be free (panics otherwise).
    pub fn insert(&mut self, key: u32, index: u64, nr: u64, value: u32) {
        assert!(nr > 0, "an entry covers at least one index");
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
                let old_heads = self.nodes[old as usize].heads != 0;
                let old_marks = self.nodes[old as usize].marks != 0;
                let n = self.alloc_node();
                let node = &mut self.nodes[n as usize];
                node.slots[0] = old;
                node.occ = 1;
                node.heads = old_heads as u64;
                node.marks = old_marks as u64;
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
                    self.nodes[n as usize].slots[j as usize]
                } else {
                    let c = self.alloc_node();
                    let node = &mut self.nodes[n as usize];
                    node.slots[j as usize] = c;
                    node.occ |= bit;
                    c
                };
                if head {
                    self.nodes[n as usize].heads |= bit;
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
            leaf.slots[lo as usize..=hi as usize].fill(value);
            if head {
                leaf.heads |= 1 << lo;
            }
            if chunk == last >> SHIFT {
                break;
            }
            chunk += 1;
        }
        self.len += 1;
    }

    /// Removes the entry of `value` covering `[index, index + nr)` of `key` (panics unless
    /// exactly that entry is there). Returns whether it was marked.
    pub fn remove(&mut self, key: u32, index: u64, nr: u64, value: u32) -> bool {
        assert!(nr > 0, "an entry covers at least one index");
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
                n = node.slots[j as usize];
                shift -= SHIFT;
            }
            let mask = (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
            let leaf = &mut self.nodes[n as usize];
            assert!(
                leaf.occ & mask == mask && leaf.slots[lo as usize..=hi as usize].iter().all(|&v| v == value),
                "{key}:{index} (+{nr}) does not hold entry {value} throughout"
            );
            // The entry's mark goes with it.
            let mut unmarked = false;
            if head {
                assert!(
                    leaf.heads & (1 << lo) != 0,
                    "{key}:{index} is not an entry's start"
                );
                leaf.heads &= !(1 << lo);
                unmarked = leaf.marks & (1 << lo) != 0;
                was_marked = unmarked;
                leaf.marks &= !(1 << lo);
            }
            leaf.occ &= !mask;
            // `xas_delete_node`: free emptied nodes upward; clear head (mark) bits that no
            // longer lead to a head (a marked entry).
            let (mut emptied, mut headless) = (leaf.occ == 0, leaf.heads == 0);
            let mut markless = unmarked && leaf.marks == 0;
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
                    node.heads &= !(1 << j);
                }
                if markless {
                    node.marks &= !(1 << j);
                }
                emptied = node.occ == 0;
                headless = node.heads == 0;
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
        self.len -= 1;
        was_marked
    }

    /// Consistency of the bitmaps and the node arena (for tests): every node reachable once,
    /// interior bitmaps agree with their children, heads counted match `len`.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = vec![false; self.nodes.len()];
        for &f in &self.free {
            if std::mem::replace(&mut seen[f as usize], true) {
                return Err(format!("node {f} twice on the free list"));
            }
        }
        let mut heads = 0usize;
        for (key, r) in self.roots.iter().enumerate() {
            if r.node == NIL {
                continue;
            }
            let (_, _, h) = self.check_node(key as u32, r.node, r.shift, &mut seen)?;
            heads += h;
        }
        if heads != self.len {
            return Err(format!("{heads} heads, {} counted", self.len));
        }
        if let Some(n) = seen.iter().position(|&s| !s) {
            return Err(format!("node {n} neither reachable nor free"));
        }
        Ok(())
    }

    fn check_node(
        &self,
        key: u32,
        n: u32,
        shift: u32,
        seen: &mut [bool],
    ) -> Result<(u64, u64, usize), String> {
        if std::mem::replace(&mut seen[n as usize], true) {
            return Err(format!("key {key}: node {n} reachable twice or free"));
        }
        let node = &self.nodes[n as usize];
        if node.occ == 0 {
            return Err(format!("key {key}: empty node {n}"));
        }
        if node.heads & !node.occ != 0 {
            return Err(format!("key {key}: node {n} has heads in empty slots"));
        }
        if node.marks & !node.heads != 0 {
            return Err(format!("key {key}: node {n} has marks without heads"));
        }
        if shift == 0 {
            return Ok((node.heads, node.marks, node.heads.count_ones() as usize));
        }
        let mut total = 0;
        let mut m = node.occ;
        while m != 0 {
            let j = m.trailing_zeros();
            let (child_heads, child_marks, h) =
                self.check_node(key, node.slots[j as usize], shift - SHIFT, seen)?;
            if (child_heads != 0) != (node.heads & (1 << j) != 0) {
                return Err(format!("key {key}: node {n} slot {j}: head bit wrong"));
            }
            if (child_marks != 0) != (node.marks & (1 << j) != 0) {
                return Err(format!("key {key}: node {n} slot {j}: mark bit wrong"));
            }
            total += h;
            m &= m - 1;
        }
        Ok((node.heads, node.marks, total))
    }
}

/// The walk of [`XArray::iter_key`] (`MARKED`: of [`XArray::iter_key_marked`]): a stack of
/// (node, slot shift, first index, heads (marks) not yet visited), root first.
struct KeyIter<'a, const MARKED: bool> {
    xa: &'a XArray,
    stack: [(u32, u32, u64, u64); MAX_DEPTH],
    depth: usize,
}

impl<'a, const MARKED: bool> KeyIter<'a, MARKED> {
    fn new(xa: &'a XArray, key: u32) -> Self {
        let mut it = KeyIter {
            xa,
            stack: [(NIL, 0, 0, 0); MAX_DEPTH],
            depth: 0,
        };
        let r = xa.root(key);
        if r.node != NIL {
            it.stack[0] = (r.node, r.shift, 0, Self::bits(&xa.nodes[r.node as usize]));
            it.depth = 1;
        }
        it
    }

    /// The bitmap the walk follows.
    #[inline]
    fn bits(node: &Node) -> u64 {
        if MARKED {
            node.marks
        } else {
            node.heads
        }
    }
}

impl<const MARKED: bool> Iterator for KeyIter<'_, MARKED> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
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
            self.stack[self.depth] = (
                slot,
                shift - SHIFT,
                base + (j << shift),
                Self::bits(&self.xa.nodes[slot as usize]),
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

    /// The structure this one replaced: (key, first index) → (pages, value), with a dense
    /// per-index view derived from it.
    #[derive(Default)]
    struct Reference {
        map: BTreeMap<(u32, u64), (u64, u32)>,
        /// The marked entries' (key, first index).
        marked: std::collections::BTreeSet<(u32, u64)>,
    }

    impl Reference {
        fn lookup(&self, key: u32, index: u64) -> Option<u32> {
            let (&(k, s), &(nr, v)) = self.map.range(..=(key, index)).next_back()?;
            (k == key && index < s + nr).then_some(v)
        }
        fn free(&self, key: u32, index: u64, nr: u64) -> bool {
            (index..index + nr).all(|i| self.lookup(key, i).is_none())
        }
        fn next_from(&self, key: u32, index: u64) -> Option<(u64, u32)> {
            let (&(k, s), &(_, v)) = self.map.range((key, index)..).next()?;
            (k == key).then_some((s, v))
        }
    }

    /// The bitmaps lead the node (a descent's first read) and the node stays 280 bytes.
    #[test]
    fn node_layout_bitmaps_first() {
        assert_eq!(std::mem::offset_of!(Node, occ), 0);
        assert_eq!(std::mem::offset_of!(Node, heads), 8);
        assert_eq!(std::mem::offset_of!(Node, marks), 16);
        assert_eq!(std::mem::offset_of!(Node, slots), 24);
        assert_eq!(std::mem::size_of::<Node>(), 280);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert {
            key: u32,
            index: u64,
            nr: u64,
        },
        Remove {
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
            4 => (0u32..3, index(), prop_oneof![Just(1u64), 1u64..4, Just(64), Just(512), 1u64..300])
                .prop_map(|(key, index, nr)| Op::Insert { key, index, nr }),
            3 => any::<usize>().prop_map(|pick| Op::Remove { pick }),
            2 => (0u32..3, index()).prop_map(|(key, index)| Op::Next { key, index }),
            4 => (any::<usize>(), prop_oneof![3 => Just(true), 2 => Just(false)], prop_oneof![9 => Just(false), 1 => Just(true)])
                .prop_map(|(pick, on, wrong)| Op::Mark { pick, on, wrong }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Same operations on the xarray and on the BTreeMap it replaced: same answers, same
        /// iteration order, and the nodes freed when it empties.
        #[test]
        fn matches_btreemap(ops in proptest::collection::vec(op(), 1..120)) {
            let mut xa = XArray::default();
            let mut rf = Reference::default();
            let mut next_value = 0u32;
            for op in ops {
                match op {
                    Op::Insert { key, index, nr } => {
                        let nr = nr.min(u64::MAX - index).max(1);
                        if rf.free(key, index, nr) {
                            xa.insert(key, index, nr, next_value);
                            rf.map.insert((key, index), (nr, next_value));
                            next_value += 1;
                        }
                    }
                    Op::Remove { pick } => {
                        if !rf.map.is_empty() {
                            let (&(k, s), &(nr, v)) = rf.map.iter().nth(pick % rf.map.len()).unwrap();
                            prop_assert_eq!(xa.remove(k, s, nr, v), rf.marked.remove(&(k, s)));
                            rf.map.remove(&(k, s));
                        }
                    }
                    Op::Mark { pick, on, wrong } => {
                        if !rf.map.is_empty() {
                            let (&(k, s), &(_, v)) = rf.map.iter().nth(pick % rf.map.len()).unwrap();
                            if wrong {
                                prop_assert_eq!(xa.set_mark(k, s, v + 1, on), None);
                                // Not an entry's start (values are unique).
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
                        prop_assert_eq!(xa.next_from(key, index), rf.next_from(key, index));
                        prop_assert_eq!(xa.lookup(key, index), rf.lookup(key, index));
                        for len in [1, 2, 63, 64, 65, 700] {
                            let end = index.saturating_add(len);
                            let want = rf.lookup(key, index).or_else(|| {
                                rf.next_from(key, index.saturating_add(1))
                                    .filter(|&(s, _)| s > index && s < end)
                                    .map(|(_, v)| v)
                            });
                            prop_assert_eq!(xa.first_in(key, index, end), want);
                        }
                        prop_assert_eq!(
                            xa.get(key, index),
                            rf.map.get(&(key, index)).map(|&(_, v)| v)
                        );
                    }
                }
                prop_assert_eq!(xa.check(), Ok(()));
                prop_assert_eq!(xa.len(), rf.map.len());
                // The marked walk is the full walk filtered by the mark: same entries, same order.
                let marked: Vec<_> = xa.iter_marked().collect();
                let filtered: Vec<_> = xa.iter().filter(|&(k, _)| rf.marked.contains(&k)).collect();
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
            let mine: Vec<_> = xa.iter().collect();
            let theirs: Vec<_> = rf.map.iter().map(|(&k, &(_, v))| (k, v)).collect();
            prop_assert_eq!(mine, theirs);
            for key in 0..3 {
                let mine: Vec<_> = xa.iter_key(key).collect();
                let theirs: Vec<_> =
                    rf.map.range((key, 0)..=(key, u64::MAX)).map(|(&(_, s), &(_, v))| (s, v)).collect();
                prop_assert_eq!(mine, theirs);
            }
            for ((k, s), v) in xa.iter().collect::<Vec<_>>() {
                let nr = rf.map[&(k, s)].0;
                xa.remove(k, s, nr, v);
            }
            prop_assert_eq!(xa.nodes_in_use(), 0);
        }
    }

    #[test]
    fn far_offset_costs_a_path_not_a_range() {
        let mut xa = XArray::default();
        // 64 TiB into a file: index 2^34.
        xa.insert(1, 1 << 34, 1, 7);
        assert_eq!(xa.nodes_in_use(), 6);
        assert_eq!(xa.lookup(1, 1 << 34), Some(7));
        assert_eq!(xa.next_from(1, 0), Some((1 << 34, 7)));
        xa.insert(1, 0, 512, 8);
        assert_eq!(xa.lookup(1, 511), Some(8));
        assert_eq!(xa.get(1, 511), None);
        assert_eq!(xa.next_from(1, 1), Some((1 << 34, 7)));
        xa.remove(1, 1 << 34, 1, 7);
        xa.remove(1, 0, 512, 8);
        assert_eq!(xa.nodes_in_use(), 0);
        assert!(xa.is_empty());
    }
}
