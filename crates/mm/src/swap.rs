//! An optional swap device (docs/model §10.3.6, §19.1 item 10): a number of slots, and
//! which content (folio token) occupies how many of them. Without one (the reference machine
//! has no swap) anonymous memory is not reclaimable.
//!
//! Simplifications: the device is synchronous (zram-like: a write completes at once, so
//! reclaim frees the folio in the same pass); no swap cache, no swap readahead (`page-cluster`),
//! no zswap; a slot is a page; large folios swap out whole when there are enough free slots
//! (no contiguous-cluster requirement); one anon shadow (eviction age, PG_workingset) per
//! content token, that of its latest swap-out.

use std::collections::BTreeMap;

use crate::folio::{FolioId, FolioKind};
use crate::gfp::Gfp;
use crate::node::Mm;
use crate::vmstat::Stat;

/// The swap device.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SwapDevice {
    /// Size in pages (0: no swap, the default).
    pub total: u64,
    /// Slots in use: always the sum of `map`.
    pub used: u64,
    /// Content token → pages of it in swap.
    pub map: BTreeMap<u64, u64>,
    /// Content token → (non-resident age at its latest swap-out, PG_workingset then): the
    /// shadow entry the swap cache keeps for a refault (`workingset_eviction`).
    pub shadows: BTreeMap<u64, (u64, bool)>,
}

impl SwapDevice {
    pub fn free_slots(&self) -> u64 {
        self.total - self.used
    }
}

impl Mm {
    /// `can_reclaim_anon_pages` without memcg: swap has a free slot (`get_nr_swap_pages() > 0`).
    pub fn can_reclaim_anon(&self) -> bool {
        self.reclaim.swap.free_slots() > 0
    }

    /// Puts `nr` pages of content `token` in swap with its shadow (the folio is freed by the
    /// caller). Counts `pswpout` (pages).
    pub(crate) fn swap_out(&mut self, token: u64, nr: u64, eviction: u64, workingset: bool) {
        assert!(self.reclaim.swap.free_slots() >= nr, "swap_out without room");
        self.reclaim.swap.used += nr;
        *self.reclaim.swap.map.entry(token).or_default() += nr;
        self.reclaim.swap.shadows.insert(token, (eviction, workingset));
        self.count(Stat::pswpout, nr);
    }

    /// Pages of content `token` in swap.
    pub fn swapped(&self, token: u64) -> u64 {
        self.reclaim.swap.map.get(&token).copied().unwrap_or(0)
    }

    /// A swap-in fault on one page of content `token` (`do_swap_page`, order 0): allocates an
    /// anonymous page with GFP_HIGHUSER_MOVABLE (which may reclaim), frees one slot, counts
    /// `pswpin`, and runs the anon refault check against the content's shadow
    /// (`workingset_refault_anon`, possibly activating the page). `None` if the content has no
    /// page in swap or the allocation fails (the slot then stays). The new folio carries
    /// `token`, so the content stays identifiable.
    pub fn swap_in(&mut self, cpu: u32, token: u64) -> Option<FolioId> {
        if self.swapped(token) == 0 {
            return None;
        }
        let id = self.alloc_folio(cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::Anon, false)?;
        self.folios.folios[id as usize].set_token(token);
        // The allocation may have reclaimed (even freed this content's other slots): re-check.
        if self.swapped(token) == 0 {
            self.free_folio(cpu, id);
            return None;
        }
        let shadow = self.reclaim.swap.shadows.get(&token).copied();
        self.swap_free_pages(token, 1);
        self.count(Stat::pswpin, 1);
        if let Some((eviction, workingset)) = shadow {
            self.workingset_refault_anon(id, eviction, workingset);
        }
        Some(id)
    }

    fn swap_free_pages(&mut self, token: u64, nr: u64) {
        let e = self.reclaim.swap.map.get_mut(&token).expect("content in swap");
        *e -= nr;
        if *e == 0 {
            self.reclaim.swap.map.remove(&token);
            self.reclaim.swap.shadows.remove(&token);
        }
        self.reclaim.swap.used -= nr;
    }

    /// Frees every slot of content `token` (munmap or exit of swapped-out memory:
    /// `swap_free`). Returns the pages freed.
    pub fn swap_free_token(&mut self, token: u64) -> u64 {
        let n = self.swapped(token);
        if n > 0 {
            self.swap_free_pages(token, n);
        }
        n
    }
}
