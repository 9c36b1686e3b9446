//! An optional swap device (`kernel-model.md` §10.3.6, §19.1 item 10): a number of slots, and
//! which content (folio token) occupies how many of them. Without one (the reference machine
//! has no swap) anonymous memory is not reclaimable.
//!
//! Simplifications: no swap cache, no swap readahead (`page-cluster`), no zswap; a slot is a
//! page; large folios swap out whole when there is room (no contiguous-cluster requirement).

use std::collections::BTreeMap;

use crate::folio::{FolioId, FolioKind};
use crate::gfp::Gfp;
use crate::node::Mm;
use crate::vmstat::Stat;

/// The swap device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwapDevice {
    /// Size in pages (0: no swap).
    pub total: u64,
    pub used: u64,
    /// Content token → pages of it in swap.
    pub map: BTreeMap<u64, u64>,
}

impl SwapDevice {
    pub fn free_slots(&self) -> u64 {
        self.total - self.used
    }
}

impl Mm {
    /// `can_reclaim_anon_pages` without memcg: swap has a free slot (`get_nr_swap_pages() > 0`).
    pub fn can_reclaim_anon(&self) -> bool {
        self.swap.free_slots() > 0
    }

    /// Puts `nr` pages of content `token` in swap (the folio is freed by the caller). Counts
    /// `pswpout`.
    pub(crate) fn swap_out(&mut self, token: u64, nr: u64) {
        assert!(self.swap.free_slots() >= nr, "swap_out without room");
        self.swap.used += nr;
        *self.swap.map.entry(token).or_default() += nr;
        self.count(Stat::pswpout, nr);
    }

    /// Pages of content `token` in swap.
    pub fn swapped(&self, token: u64) -> u64 {
        self.swap.map.get(&token).copied().unwrap_or(0)
    }

    /// A swap-in fault on one page of content `token` (`do_swap_page`, order 0): allocates an
    /// anonymous page with GFP_HIGHUSER_MOVABLE, frees one slot, counts `pswpin`. `None` if the
    /// content has no page in swap or the allocation fails. The new folio carries `token`.
    pub fn swap_in(&mut self, cpu: u32, token: u64) -> Option<FolioId> {
        if self.swapped(token) == 0 {
            return None;
        }
        let id = self.alloc_folio(cpu, Gfp::GFP_HIGHUSER_MOVABLE, 0, FolioKind::Anon, false)?;
        self.folios.folios[id as usize].token = token;
        self.swap_free_pages(token, 1);
        self.count(Stat::pswpin, 1);
        Some(id)
    }

    fn swap_free_pages(&mut self, token: u64, nr: u64) {
        let e = self.swap.map.get_mut(&token).expect("content in swap");
        *e -= nr;
        if *e == 0 {
            self.swap.map.remove(&token);
        }
        self.swap.used -= nr;
    }

    /// Frees every slot of content `token` (munmap or exit of swapped-out memory).
    pub fn swap_free_token(&mut self, token: u64) {
        let n = self.swapped(token);
        if n > 0 {
            self.swap_free_pages(token, n);
        }
    }
}
