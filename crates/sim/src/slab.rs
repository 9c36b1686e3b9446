//! Slab caches as a workload sees them: kernel objects packed into slab pages, a page freed
//! only when its last object is (SLUB's partial slabs; docs/model §16 lists slab pages as
//! unmovable or reclaimable order-0..3 allocations). This is what pins reclaimable and
//! unmovable pages in place long after most of their objects are gone, and what the kbuild
//! generator's dentries, inodes and per-process kernel objects allocate from.
//!
//! Simplifications: one node-wide partial list per cache (no per-CPU slabs), a new object goes
//! to the most recently used partial slab. By default a cache's pages are not shrinkable by the
//! mm's slab shrinker — the owner frees objects (the kbuild dentry cache trims itself, oldest
//! first). A cache made with [`SlabCache::shrinkable`] stands for a cache of unused objects on
//! a shrinker's LRU (the dcache and inode caches of closed files: `super_cache_scan` →
//! `prune_dcache_sb`/`prune_icache_sb`, docs/model §19.1 item 8): each of its slab pages is
//! declared to the mm's shrinker when it is taken ([`Mm::set_slab_shrinkable`]), so reclaim
//! frees its pages oldest first, as the shrinkers free unused objects from the cold end of their
//! LRUs. Simplified: the shrinker frees a whole slab page at a time (the kernel frees objects,
//! and a page when its last object goes; objects of one page were allocated together and go
//! cold together, but a page whose freed slots were refilled later is freed with the newer
//! objects), and it frees objects the owner still holds: the owner learns it from
//! [`SlabCache::free`] returning false (the kernel would look the file up again).

use fraglab_mm::folio::{FolioId, FolioKind};
use fraglab_mm::{Gfp, Mm};

/// A handle to one object: the slab it lives in and that slab's generation (a slot reused by
/// a later slab page has a new one, so a handle to an object the shrinker took never aliases
/// a newer object).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Obj(u32, u32);

#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
struct SlabPage {
    folio: FolioId,
    token: u64,
    gen: u32,
    live: u32,
    /// On the partial list (entries for slabs without it are stale and skipped).
    on_partial: bool,
}

/// One kmem_cache.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct SlabCache {
    pub name: Box<str>,
    order: u32,
    per_slab: u32,
    gfp: Gfp,
    slabs: Vec<Option<SlabPage>>,
    free_slots: Vec<u32>,
    /// Slabs with room for another object (may hold stale entries, see `SlabPage`).
    partial: Vec<u32>,
    /// Live objects.
    pub objects: u64,
    /// Pages declared to the mm's slab shrinker ([`SlabCache::shrinkable`]).
    shrinkable: bool,
    next_gen: u32,
    /// Objects whose slab page the shrinker freed, found so far.
    pub shrunk_objects: u64,
}

impl SlabCache {
    /// A cache of `per_slab` objects per slab of `order`, allocated with `gfp`
    /// (`GFP_KERNEL | __GFP_RECLAIMABLE` for dentries and inodes, `GFP_KERNEL` otherwise).
    pub fn new(name: &'static str, order: u32, per_slab: u32, gfp: Gfp) -> SlabCache {
        SlabCache {
            name: name.into(),
            order,
            per_slab: per_slab.max(1),
            gfp,
            slabs: Vec::new(),
            free_slots: Vec::new(),
            partial: Vec::new(),
            objects: 0,
            shrinkable: false,
            next_gen: 0,
            shrunk_objects: 0,
        }
    }

    /// The same cache with its slab pages on the mm's slab shrinker (see the module comment).
    pub fn shrinkable(mut self) -> SlabCache {
        self.shrinkable = true;
        self
    }

    /// Forgets slab `s` if the shrinker freed its page; returns whether it did.
    fn reap_if_shrunk(&mut self, mm: &Mm, s: u32) -> bool {
        let Some(p) = self.slabs[s as usize].as_ref() else {
            return false;
        };
        if mm.folio_is(p.folio, p.token) {
            return false;
        }
        assert!(
            self.shrinkable,
            "slab page of {} freed behind its cache",
            self.name
        );
        self.objects -= p.live as u64;
        self.shrunk_objects += p.live as u64;
        self.slabs[s as usize] = None;
        self.free_slots.push(s);
        true
    }

    /// Slab pages held (in pages). For a shrinkable cache this includes pages the shrinker has
    /// freed that the cache has not come upon yet (it notices in `alloc` and `free`).
    pub fn pages(&self) -> u64 {
        self.slabs.iter().flatten().count() as u64 * (1 << self.order)
    }

    /// `kmem_cache_alloc`: an object from a partial slab, or from a new slab page. `None` if
    /// the page allocation failed.
    pub fn alloc(&mut self, mm: &mut Mm, cpu: u32) -> Option<Obj> {
        while let Some(&s) = self.partial.last() {
            if self.shrinkable && self.reap_if_shrunk(mm, s) {
                self.partial.pop();
                continue;
            }
            match self.slabs[s as usize].as_mut() {
                Some(p) if p.on_partial => {
                    p.live += 1;
                    if p.live == self.per_slab {
                        p.on_partial = false;
                        self.partial.pop();
                    }
                    self.objects += 1;
                    return Some(Obj(s, p.gen));
                }
                _ => {
                    self.partial.pop();
                }
            }
        }
        let kind = FolioKind::Slab;
        let folio = mm.alloc_folio(cpu, self.gfp, self.order, kind, false)?;
        let token = mm.folios.get(folio).token();
        if self.shrinkable {
            mm.set_slab_shrinkable(folio);
        }
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1);
        let page = SlabPage {
            folio,
            token,
            gen,
            live: 1,
            on_partial: self.per_slab > 1,
        };
        let s = match self.free_slots.pop() {
            Some(s) => {
                self.slabs[s as usize] = Some(page);
                s
            }
            None => {
                self.slabs.push(Some(page));
                (self.slabs.len() - 1) as u32
            }
        };
        if self.per_slab > 1 {
            self.partial.push(s);
        }
        self.objects += 1;
        Some(Obj(s, gen))
    }

    /// `kmem_cache_free`: the slab page is freed with its last object. Returns false, freeing
    /// nothing, if the object is already gone: a shrinkable cache's page freed by the shrinker.
    pub fn free(&mut self, mm: &mut Mm, cpu: u32, o: Obj) -> bool {
        let s = o.0;
        let per_slab = self.per_slab;
        if self.shrinkable {
            self.reap_if_shrunk(mm, s);
            if self.slabs[s as usize].as_ref().is_none_or(|p| p.gen != o.1) {
                return false;
            }
        }
        let p = self.slabs[s as usize].as_mut().expect("object of a live slab");
        assert_eq!(p.gen, o.1, "object of an earlier slab in cache {}", self.name);
        assert!(p.live > 0, "double free in slab cache {}", self.name);
        p.live -= 1;
        self.objects -= 1;
        if p.live == 0 {
            let (folio, token) = (p.folio, p.token);
            self.slabs[s as usize] = None;
            self.free_slots.push(s);
            if mm.folio_is(folio, token) {
                mm.free_folio(cpu, folio);
            }
        } else if !p.on_partial {
            p.on_partial = true;
            self.partial.push(s);
        }
        let _ = per_slab;
        true
    }
}
