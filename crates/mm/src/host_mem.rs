//! Host memory by structure (issue 22: host bytes per simulated page): an estimate of the heap
//! bytes each of the model's large structures holds, for `FRAGLAB_HOST_MEM=1 fraglab run`.
//! Host-side bookkeeping with no kernel counterpart; it reads the structures and changes
//! nothing.
//!
//! How the bytes are estimated (none of this asks the allocator):
//! * a `Vec` or `VecDeque`: its capacity × the element size (what it has reserved, used or not);
//! * a `HashMap` (hashbrown, std's and rustc-hash's): the buckets its capacity implies
//!   (capacity × 8/7 for 8 buckets or more, capacity + 1 below) × (entry size + 1 control byte),
//!   plus one 16-byte control group;
//! * a `BTreeMap`/`BTreeSet`: not knowable from outside (node fill depends on the insertion
//!   order). Estimated as leaves of 6 entries each (what ascending insertions — times, tokens —
//!   leave behind: std splits a full 11-entry leaf 6 + 5 and fills the right one; removals keep a
//!   leaf at 5 or more), a leaf being 16 bytes of header and 11 key and value slots, plus one
//!   internal node (a leaf and 12 edge pointers) per 6 leaves. Within about ±20 % of the truth
//!   for such trees;
//! * the per-node allocator overhead (malloc's 8-16 bytes per block) is counted only where a
//!   structure allocates per entry (the B-tree nodes: 16 bytes each); a `Vec` is one block.
//!
//! Not counted here: the simulator's side (anonymous regions and page tables of the tasks, task
//! state, the event queue, the slab model, DAMON, the samples and events a run records), which
//! lives in `fraglab-sim`; `FRAGLAB_HOST_MEM` also prints malloc's own count of bytes in use
//! and the peak RSS, so the difference is visible.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::node::Mm;

/// Bytes reserved by a vector.
pub fn vec_bytes<T>(v: &Vec<T>) -> u64 {
    (v.capacity() * std::mem::size_of::<T>()) as u64
}

/// Bytes reserved by a ring buffer.
pub fn deque_bytes<T>(v: &VecDeque<T>) -> u64 {
    (v.capacity() * std::mem::size_of::<T>()) as u64
}

/// Buckets of a hashbrown table of `capacity` (the inverse of its `bucket_mask_to_capacity`).
fn hash_buckets(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        c if c < 7 => (c + 1).next_power_of_two(),
        c => (c * 8 / 7).next_power_of_two(),
    }
}

/// Bytes of a hashbrown table of `capacity` with entries of `entry` bytes.
pub fn hash_table_bytes(capacity: usize, entry: usize) -> u64 {
    let b = hash_buckets(capacity);
    if b == 0 {
        0
    } else {
        (b * (entry + 1) + 16) as u64
    }
}

/// Bytes of a hash map (see [`hash_table_bytes`]).
pub fn hash_bytes<K, V, S>(m: &HashMap<K, V, S>) -> u64 {
    hash_table_bytes(m.capacity(), std::mem::size_of::<(K, V)>())
}

/// Estimated bytes of a B-tree of `len` entries of `k` + `v` bytes (module doc).
pub fn btree_bytes_of(len: usize, k: usize, v: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    const CAP: usize = 11;
    const FILL: usize = 6;
    const MALLOC: usize = 16;
    let leaf = 16 + CAP * (k + v);
    let leaf = leaf.div_ceil(8) * 8;
    let internal = leaf + (CAP + 1) * 8;
    let leaves = len.div_ceil(FILL);
    let internals = leaves.div_ceil(FILL);
    (leaves * (leaf + MALLOC) + internals * (internal + MALLOC)) as u64
}

/// Estimated bytes of a `BTreeMap`.
pub fn btree_map_bytes<K, V>(m: &BTreeMap<K, V>) -> u64 {
    btree_bytes_of(m.len(), std::mem::size_of::<K>(), std::mem::size_of::<V>())
}

/// Estimated bytes of a `BTreeSet`.
pub fn btree_set_bytes<K>(m: &BTreeSet<K>) -> u64 {
    btree_bytes_of(m.len(), std::mem::size_of::<K>(), 0)
}

impl Mm {
    /// The model's host memory by structure, in bytes (an estimate: see the module doc for
    /// how each kind of container is counted), in a fixed order: the per-pfn arrays, the folio
    /// table, the page cache, reclaim's structures, the rest. Also lists a few counts (`count.*`: entries, not bytes) that explain the bytes.
    pub fn host_mem_by_structure(&self) -> Vec<(&'static str, u64)> {
        // Per pfn.
        let mut v: Vec<(&'static str, u64)> = vec![
            ("pages.state", vec_bytes(&self.pages.state)),
            (
                "pages.links (buddy/pcp links, folio id)",
                vec_bytes(&self.pages.links),
            ),
            (
                "pageblocks (type + content)",
                vec_bytes(&self.blocks) + vec_bytes(&self.block_content),
            ),
            (
                "zones (pcp heads)",
                self.zones.iter().map(|z| vec_bytes(&z.pcp)).sum::<u64>() + vec_bytes(&self.zones),
            ),
        ];
        // The folio table.
        v.extend(self.folios.host_bytes());
        // The page cache.
        v.extend(self.cache.index.host_bytes());
        v.push(("pagecache.mappings", vec_bytes(&self.cache.mappings)));
        v.push(("xa_node model (slab accounting)", self.cache.xa.host_bytes()));
        v.push(("writeback queue", self.cache.writeback.host_bytes()));
        // Reclaim.
        v.push((
            "swap map + anon shadows",
            btree_map_bytes(&self.reclaim.swap.map) + btree_map_bytes(&self.reclaim.swap.shadows),
        ));
        v.push((
            "shrinkable slab queue",
            deque_bytes(&self.reclaim.shrinkable_slab),
        ));
        v.push((
            "deferred split queue + split records",
            self.deferred_split.host_bytes(),
        ));
        v.push((
            "count.deferred_split_entries",
            self.deferred_split.queue_entries() as u64,
        ));
        v.push((
            "trace buffer + outbox",
            vec_bytes(&self.trace.buf)
                + vec_bytes(&self.outbox.wakeups)
                + vec_bytes(&self.outbox.oom_victims),
        ));
        if self.reporting.enabled() {
            v.push((
                "page reporting (host backing, 1 bit per page)",
                self.reporting.host_bytes() as u64,
            ));
        }
        v
    }

    /// The sum of [`Mm::host_mem_by_structure`] (its `count.*` rows left out).
    pub fn host_mem_total(&self) -> u64 {
        self.host_mem_by_structure()
            .iter()
            .filter(|(k, _)| !k.starts_with("count."))
            .map(|&(_, b)| b)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_buckets_invert_hashbrowns_capacity() {
        for n in [1usize, 3, 7, 8, 14, 100, 1000, 100_000] {
            let m: HashMap<u32, u64> = (0..n as u32).map(|i| (i, 0)).collect();
            let b = hash_buckets(m.capacity());
            // hashbrown's bucket_mask_to_capacity.
            let cap = if b < 8 { b - 1 } else { b / 8 * 7 };
            assert_eq!(cap, m.capacity(), "{n}");
        }
    }

    #[test]
    fn btree_estimate_grows_with_entries() {
        assert_eq!(btree_bytes_of(0, 16, 0), 0);
        let a = btree_bytes_of(1000, 16, 0);
        // 16-byte keys: 192-byte leaves (+16 of malloc) of 6 entries, 35 bytes an entry, and
        // an internal node per 6 leaves: ~43 bytes an entry.
        assert!((40_000..46_000).contains(&a), "{a}");
    }

    #[test]
    fn host_bytes_lists_the_page_array() {
        use crate::types::PAGEBLOCK_NR_PAGES;
        let mm = crate::test_machines::dma32(4);
        let hb = mm.host_mem_by_structure();
        let links = hb.iter().find(|(k, _)| k.starts_with("pages.links")).unwrap().1;
        assert!(links >= 8 * (4096 + 4 * PAGEBLOCK_NR_PAGES as u64));
        assert!(mm.host_mem_total() >= links);
    }
}
