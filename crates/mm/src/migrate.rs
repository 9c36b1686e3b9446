//! `migrate_pages` for folios of any order, as compaction uses it (`kernel-model.md` §13).
//!
//! Simplification: folios in the model are never locked, pinned, dirty or under writeback, so
//! there are no transient (−EAGAIN) failures and one pass suffices in every mode; the only
//! failure is −ENOMEM when `compaction_alloc` has no target. The batch structure (unmap all,
//! then move) is not observable without transient failures and is not modelled.

use crate::compaction::{CompactControl, FolioMode};
use crate::folio::FolioId;
use crate::mmzone::{PageKind, PG_LRU};
use crate::node::Mm;
use crate::types::*;
use crate::vmstat::Stat;

/// What one `migrate_pages` call did (the fields of the mm_migrate_pages tracepoint).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MigrateStats {
    pub nr_succeeded: u64,
    pub nr_failed_pages: u64,
    pub nr_thp_succeeded: u64,
    pub nr_thp_failed: u64,
    pub nr_thp_split: u64,
    pub nr_split: u64,
}

impl Mm {
    /// Puts an isolated folio back on the LRU (`putback_movable_pages`).
    fn putback_folio(&mut self, id: FolioId) {
        self.putback_lru_folio(id);
    }

    /// Moves folio `id` to the target chunk at `dst` (already marked allocated by
    /// `compaction_alloc`): the folio keeps its id and content token, its owner's mapping now
    /// points at `dst`, it goes back on the LRU, and the source chunk is freed by the compactor's
    /// CPU (to its PCP for cached orders, where only a drain lets it merge or be captured).
    fn move_folio(&mut self, cc: &CompactControl, id: FolioId, dst: u32) {
        let (src, order) = {
            let f = &self.folios.folios[id as usize];
            (f.pfn, f.order as u32)
        };
        debug_assert_eq!(self.pages.kind(dst), PageKind::Allocated);
        debug_assert_eq!(self.pages.order(dst), order);
        // §29.2.3: unmapping the source munlocks it; the VM_LOCKED mapping re-mlocks the
        // destination once it is back on the LRU (mlock.rs).
        let mlocked = self.migrate_munlock_source(id);
        self.pages.a[dst as usize] = id;
        self.pages.b[dst as usize] = self.pages.b[src as usize];
        self.account_folio(id, -1);
        let f = &mut self.folios.folios[id as usize];
        f.pfn = dst;
        f.migrations += 1;
        self.account_folio(id, 1);
        // The source page no longer belongs to the folio.
        self.pages.a[src as usize] = crate::mmzone::NIL;
        self.pages.set_flag(src, PG_LRU, false);
        self.putback_lru_folio(id);
        if mlocked {
            self.mlock_folio(id);
        }
        self.free_pages(cc.cpu, src, order);
    }

    /// `migrate_pages(cc->migratepages, compaction_alloc, compaction_free, mode, MR_COMPACTION)`
    /// (§13): each folio gets a target of its order; with none, a large folio is split and its
    /// pieces are migrated after the batch in one pass, an order-0 folio ends the call with
    /// −ENOMEM (the rest are put back). Returns true on −ENOMEM. Counts pgmigrate_* and
    /// thp_migration_*. With `folio_mode = split_large` every large folio is split first.
    pub(crate) fn migrate_pages(&mut self, cc: &mut CompactControl) -> bool {
        let list = std::mem::take(&mut cc.migratepages);
        let nr_pages: u64 = list
            .iter()
            .map(|&id| 1u64 << self.folios.folios[id as usize].order)
            .sum();
        let mode = cc.mode as u8;
        if self.trace_on(crate::node::trace_kind::MIGRATE) {
            self.emit(
                0,
                crate::trace::TraceEvent::MmMigratePagesStart {
                    mode,
                    reason: crate::trace::MR_COMPACTION,
                },
            );
        }
        let mut st = MigrateStats::default();
        let mut enomem = false;
        let mut pieces: Vec<FolioId> = Vec::new();
        let split_first = self.compact.cfg.folio_mode == FolioMode::SplitLarge;
        for &id in &list {
            if enomem {
                self.putback_folio(id);
                continue;
            }
            let order = self.folios.folios[id as usize].order as u32;
            if order > 0 && split_first {
                pieces.extend(self.split_folio(id));
                st.nr_split += 1;
                if order == HPAGE_PMD_ORDER {
                    st.nr_thp_split += 1;
                }
                continue;
            }
            match self.compaction_alloc(cc, order) {
                Some(dst) => {
                    self.move_folio(cc, id, dst);
                    st.nr_succeeded += 1 << order;
                    if order == HPAGE_PMD_ORDER {
                        st.nr_thp_succeeded += 1;
                    }
                }
                None if order > 0 => {
                    // try_split_folio: allowed for compaction; the pieces need order-0 targets.
                    pieces.extend(self.split_folio(id));
                    st.nr_split += 1;
                    if order == HPAGE_PMD_ORDER {
                        st.nr_thp_split += 1;
                    }
                }
                None => {
                    enomem = true;
                    st.nr_failed_pages += 1;
                    self.putback_folio(id);
                }
            }
        }
        for id in pieces {
            if enomem {
                self.putback_folio(id);
                continue;
            }
            match self.compaction_alloc(cc, 0) {
                Some(dst) => {
                    self.move_folio(cc, id, dst);
                    st.nr_succeeded += 1;
                }
                None => {
                    enomem = true;
                    st.nr_failed_pages += 1;
                    self.putback_folio(id);
                }
            }
        }
        self.count(Stat::pgmigrate_success, st.nr_succeeded);
        self.count(Stat::pgmigrate_fail, st.nr_failed_pages);
        self.count(Stat::thp_migration_success, st.nr_thp_succeeded);
        self.count(Stat::thp_migration_fail, st.nr_thp_failed);
        self.count(Stat::thp_migration_split, st.nr_thp_split);
        if self.trace_on(crate::node::trace_kind::MIGRATE) {
            self.emit(
                0,
                crate::trace::TraceEvent::MmMigratePages {
                    succeeded: st.nr_succeeded,
                    failed: st.nr_failed_pages,
                    thp_succeeded: st.nr_thp_succeeded,
                    thp_failed: st.nr_thp_failed,
                    thp_split: st.nr_thp_split,
                    large_folio_split: st.nr_split,
                    mode,
                    reason: crate::trace::MR_COMPACTION,
                },
            );
        }
        self.compact.last_migrate = st;
        self.compact.last_migrate_nr_pages = nr_pages;
        enomem
    }
}
