//! mlock and the unevictable LRU (docs/model §29.1; mm/mlock.c, mm/swap.c `lru_add`,
//! mm/internal.h `folio_evictable`), and what migration does to an mlocked folio (§29.2.3).
//!
//! A folio of a VM_LOCKED mapping gets PG_mlocked (`mlock_folio`, `mlock_new_folio`: NR_MLOCK
//! and `unevictable_pgs_mlocked` += its pages) and then PG_unevictable, losing PG_active
//! (`__mlock_folio`: `unevictable_pgs_culled`). An unevictable folio counts in
//! `nr_unevictable`/`nr_zone_unevictable` instead of its anon/file list (`account_folio`), so
//! reclaim never scans it and `zone_reclaimable_pages` leaves it out (§29.1.6). munlock clears
//! PG_mlocked (`unevictable_pgs_munlocked`, or `_stranded` if the folio is off the LRU and
//! still unevictable) and moves it back to an evictable list (`unevictable_pgs_rescued`).
//!
//! Simplifications:
//! * No per-CPU mlock batch: `__mlock_folio`/`__munlock_folio` run at once. The kernel's
//!   batch drains within the same call in the cases modelled (mlock(2), MAP_LOCKED population,
//!   munlock(2), munmap), except while a folio is isolated, which the model handles as the
//!   batch would (`lru_add` at putback culls or rescues it).
//! * No `mlock_count`: a model folio is mapped by one private anonymous mapping, so the count
//!   is 0 or 1 and PG_mlocked stands for it.
//! * The model links unevictable folios on `LRU_UNEVICTABLE` (the kernel links them nowhere,
//!   E23); no reclaim path walks that list, so the difference is not observable.
//! * Only anonymous folios are mlocked (the spec language mlocks anonymous mappings); SHM_LOCK,
//!   ramfs and the rmap path that mlocks a folio reclaim meets in a VM_LOCKED VMA are not
//!   modelled (every folio is marked when it is faulted or when mlock(2) runs).

use crate::folio::FolioId;
use crate::node::Mm;
use crate::vmscan::LRU_NONE;
use crate::vmstat::Stat;

impl Mm {
    /// `folio_evictable` (§29.1.1): not mlocked (the model has no unevictable mappings).
    pub fn folio_evictable(&self, id: FolioId) -> bool {
        !self.folios.folios[id as usize].mlocked()
    }

    /// `mlock_folio` / `mlock_new_folio` followed by the batch's `__mlock_folio` /
    /// `__mlock_new_folio` (§29.1.2–3): sets PG_mlocked (NR_MLOCK and
    /// `unevictable_pgs_mlocked` += pages); a folio on the LRU then moves to the unevictable
    /// list, losing PG_active (`unevictable_pgs_culled` += pages). A folio isolated at the time
    /// is culled when it is put back (`lru_add`). Already mlocked: nothing (mlock_count).
    pub fn mlock_folio(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        assert!(f.live(), "mlock of dead folio {id}");
        if f.mlocked() || !f.kind.on_lru() {
            return;
        }
        let nr = 1u64 << f.order;
        self.account_folio(id, -1);
        self.folios.folios[id as usize].set_mlocked(true);
        self.account_folio(id, 1);
        self.count(Stat::unevictable_pgs_mlocked, nr);
        let f = &self.folios.folios[id as usize];
        if !f.isolated() && f.lru != LRU_NONE && !f.unevictable() {
            self.move_to_unevictable(id, true);
            self.count(Stat::unevictable_pgs_culled, nr);
        }
    }

    /// `munlock_folio` and the batch's `__munlock_folio` (§29.1.5): clears PG_mlocked
    /// (NR_MLOCK −= pages). On the LRU: `unevictable_pgs_munlocked`, and an unevictable folio
    /// returns to its evictable list (`unevictable_pgs_rescued`). Off the LRU (isolated by
    /// compaction): `_munlocked` if it is not yet unevictable, else `_stranded`, and it stays
    /// PG_unevictable until `lru_add` at putback rescues it.
    pub fn munlock_folio(&mut self, id: FolioId) {
        let f = &self.folios.folios[id as usize];
        assert!(f.live(), "munlock of dead folio {id}");
        if !f.mlocked() {
            return;
        }
        let nr = 1u64 << f.order;
        let on_lru = !f.isolated() && f.lru != LRU_NONE;
        let unevictable = f.unevictable();
        self.account_folio(id, -1);
        self.folios.folios[id as usize].set_mlocked(false);
        self.account_folio(id, 1);
        if on_lru || !unevictable {
            self.count(Stat::unevictable_pgs_munlocked, nr);
        } else {
            self.count(Stat::unevictable_pgs_stranded, nr);
        }
        if on_lru && unevictable {
            self.move_to_unevictable(id, false);
            self.count(Stat::unevictable_pgs_rescued, nr);
        }
    }

    /// Moves an unisolated LRU folio between its evictable list and the unevictable list
    /// (`lruvec_del_folio`, PG_unevictable set or cleared, PG_active cleared when culled,
    /// `lruvec_add_folio`).
    fn move_to_unevictable(&mut self, id: FolioId, unevictable: bool) {
        self.account_folio(id, -1);
        self.lru_del(id);
        let f = &mut self.folios.folios[id as usize];
        f.set_unevictable(unevictable);
        if unevictable {
            f.set_active(false);
        }
        self.lru_add(id);
        self.account_folio(id, 1);
    }

    /// The evictability check of `lru_add` (mm/swap.c) for a folio about to go back on the
    /// LRU: an evictable folio that was unevictable is rescued (`unevictable_pgs_rescued`), an
    /// unevictable one not yet marked is culled (PG_active cleared, `unevictable_pgs_culled`).
    /// Called on an isolated folio, before its gauges move back.
    pub(crate) fn lru_add_evictable_check(&mut self, id: FolioId) {
        let evictable = self.folio_evictable(id);
        let f = &mut self.folios.folios[id as usize];
        let nr = 1u64 << f.order;
        match (evictable, f.unevictable()) {
            (true, true) => {
                f.set_unevictable(false);
                self.count(Stat::unevictable_pgs_rescued, nr);
            }
            (false, false) => {
                f.set_unevictable(true);
                f.set_active(false);
                self.count(Stat::unevictable_pgs_culled, nr);
            }
            _ => {}
        }
    }

    /// Migration of an mlocked folio (§29.2.3), around the move of its content: unmapping the
    /// source munlocks it while compaction holds it off the LRU and PG_unevictable, so the
    /// batch counts `unevictable_pgs_stranded` (the choice between `_munlocked` and
    /// `_stranded` is `__munlock_folio`'s: off the LRU and unevictable is `_stranded`; this is
    /// the case that S2's 594883 stranded pages fit); the destination inherits PG_unevictable
    /// without PG_mlocked and `lru_add` rescues it (`_rescued`); restoring the VM_LOCKED
    /// mapping re-mlocks it (`_mlocked`) and culls it (`_culled`). Net: those four counters
    /// += pages, NR_MLOCK and nr_unevictable unchanged. Returns whether the folio was mlocked
    /// (the caller re-mlocks it after the putback).
    pub(crate) fn migrate_munlock_source(&mut self, id: FolioId) -> bool {
        if !self.folios.folios[id as usize].mlocked() {
            return false;
        }
        self.munlock_folio(id);
        true
    }
}
