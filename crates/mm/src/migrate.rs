//! `migrate_pages` for folios of any order, as compaction uses it (docs/model §13), with
//! the per-folio outcomes, passes and accounting of §25 (`migrate_pages`, `migrate_pages_batch`,
//! `migrate_pages_sync`, `migrate_folio_unmap`, `migrate_folio_move`, `move_to_new_folio`).
//!
//! **Per-folio state (§25.4)** — [`MigrateKind`] from the folio's owner and its mapping's
//! filesystem; `pinned` (a GUP pin: no workload sets it yet, the flag carries the rule);
//! `dirty`; PG_writeback from the flusher's submission to the device's completion
//! (`writeback.rs`); `io_locked` (a read in flight: never set, the model's reads complete
//! within the reader's step); `unevictable`. Folios are otherwise never locked; a partially
//! mapped anon THP (#0 of §25.1) is split before it migrates (§31.3 item 7); no buffer-head state
//! but the block-device page cache's journal pin (#8/#8b: a buffer is locked only for its I/O,
//! i.e. under writeback, which #4 handles first; a journalled bdev buffer's reference makes
//! `buffer_migrate_folio_norefs` fail with −EAGAIN, §33.1 item 6, `bdev.rs`), no inaccessible mappings (#6), no PTEs that survive unmapping (#5) and no
//! `release_folio` that can fail (#9b).
//!
//! **Outcomes (§25.1)**, checked in the kernel's order after the destination is allocated
//! (`compaction_alloc` first, so −ENOMEM, #2, comes before everything else): #3 a locked
//! folio (`io_locked`) is EAGAIN in ASYNC, for a PF_MEMALLOC caller (direct compaction) and in
//! SYNC_LIGHT (a read in flight is not uptodate); SYNC from kcompactd or /proc waits. #4 under
//! writeback is permanent (−EBUSY) in ASYNC and SYNC_LIGHT; SYNC waits for the end of the
//! write (the wait is reported as `wait_ns`). #7 a pinned folio is EAGAIN. #9 a dirty folio of
//! a mapping without `migrate_folio` fails permanently in every mode; every other dirty folio
//! migrates, carrying PG_dirty.
//!
//! **Passes (§25.2, §25.4)**: nothing changes state during an instantaneous `migrate_pages`,
//! so an EAGAIN is a failure for the call; the passes only add work, counted in
//! [`MigrateStats::retries`] (one destination allocate and free per retried folio and pass):
//! ASYNC retries an EAGAIN folio for all 10 passes; SYNC_LIGHT and SYNC first run the ASYNC
//! batch with 3 passes, then retry every folio not migrated (EAGAIN and ASYNC-permanent alike,
//! so a folio under writeback gets its SYNC wait) alone in the real mode with 7 passes. Split
//! pieces (after −ENOMEM on a large folio) get one ASYNC pass. The destination of a folio that
//! fails goes back to the compactor's free lists (`compaction_free`).
//!
//! **Accounting**: `pgmigrate_fail` counts the pages whose final outcome was failure (failed
//! pieces of a split folio count; the split folio itself does not, E22);
//! [`MigrateStats::nr_failed`] is `migrate_pages`' return value (failed folios, a split
//! counting once), which makes `compact_zone` rescan the rest of the block below SYNC
//! (§25.2 item 5, `finish_pageblock`).

use crate::compaction::{CompactControl, MigrateMode};
use crate::folio::{FolioId, FolioKind};
use crate::mmzone::{PageKind, PG_LRU};
use crate::node::Mm;
use crate::types::*;
use crate::vmstat::Stat;

/// `NR_MAX_MIGRATE_PAGES_RETRY`: the passes of an ASYNC `migrate_pages` (§25.2.1).
pub const NR_MAX_MIGRATE_PAGES_RETRY: u64 = 10;

/// What one `migrate_pages` call did (the fields of the mm_migrate_pages tracepoint, and the
/// work of its passes).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MigrateStats {
    pub nr_succeeded: u64,
    pub nr_failed_pages: u64,
    pub nr_thp_succeeded: u64,
    pub nr_thp_failed: u64,
    pub nr_thp_split: u64,
    pub nr_split: u64,
    /// `migrate_pages`' return value when positive: folios that failed, a split large folio
    /// counting once (§25.2.4).
    pub nr_failed: u64,
    /// Extra attempts beyond each folio's first (§25.4: a destination allocate and free per
    /// retried folio and pass).
    pub retries: u64,
    /// Time a SYNC migration waited for the end of writeback (§25.1 #4), summed over folios.
    pub wait_ns: u64,
}

/// How a folio's owner migrates it (§25.4 "kind"): the address space operation
/// `move_to_new_folio` calls.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MigrateKind {
    /// Anonymous memory (no mapping: `migrate_folio` semantics).
    Anon,
    /// Swap cache (`swap_aops.migrate_folio`). The model's swap device is synchronous: no
    /// folio stays in the swap cache, so this kind is never produced.
    SwapCache,
    /// shmem/tmpfs (`shmem_aops.migrate_folio`): not produced (no shmem in the model).
    Shmem,
    /// A file mapping with a plain `migrate_folio` (`filemap_migrate_folio`: XFS, the model's
    /// `xfs` mappings).
    FileMigrateFolio,
    /// A file mapping with buffer heads (`buffer_migrate_folio`: ext4, the model's
    /// `large_folios` mappings).
    FileBufferHeads,
    /// Buffer heads, `buffer_migrate_folio_norefs` (ext4 data=journal, block devices: the
    /// model's `no_large_folios` mappings, which the host engine mounts data=journal, and the
    /// block-device page cache, `def_blk_aops`, §33.1 item 6).
    FileBufferHeadsNorefs,
    /// A file mapping without `migrate_folio` (`fallback_migrate_folio`): none of the model's
    /// mapping kinds (a `Mapping` with `migrate_folio = false`, built by tests).
    FileNoMigrateFolio,
    /// Non-LRU movable pages (`movable_ops`: zsmalloc, balloon): not produced.
    MovableOps,
    /// hugetlb: compaction never isolates it (§9.6.3).
    Hugetlb,
}

impl MigrateKind {
    /// Whether the mapping has a `migrate_folio` operation (dirty folios migrate without
    /// writeout, §25.1 last note).
    pub fn has_migrate_folio(self) -> bool {
        self != MigrateKind::FileNoMigrateFolio
    }
}

/// A folio's outcome in one mode (§25.1).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrateOutcome {
    /// Migrated (SYNC may first have waited for a lock or for writeback).
    Success,
    /// −EAGAIN: retried in a later pass (in the model, a failure for the call).
    Again,
    /// A permanent failure for this call (−EBUSY under writeback, −EINVAL for #9).
    Fail,
}

impl Mm {
    /// Puts an isolated folio back on the LRU (`putback_movable_pages`).
    fn putback_folio(&mut self, id: FolioId) {
        self.putback_lru_folio(id);
    }

    /// Fragmentation blame (issue 37): an isolated folio that failed to migrate (−EAGAIN or
    /// −EBUSY after every pass: locked, under writeback, busy buffers, §25) stays where it is
    /// and keeps its block from emptying, as a page the scanner could not isolate does: a
    /// `compact_blocked` event on its allocator.
    fn blame_migrate_failure(&mut self, id: FolioId) {
        if self.blame.is_some() {
            let (pfn, order) = {
                let f = &self.folios.folios[id as usize];
                (f.pfn, f.order as u32)
            };
            if let Some(b) = self.blame.as_deref_mut() {
                b.note_compact_blocked(pfn, order);
            }
        }
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
        // The copy writes the target: host faults where the host discarded it (§32.3 item 6).
        self.host_write(dst, 1 << order);
        // §29.2.3: unmapping the source munlocks it; the VM_LOCKED mapping re-mlocks the
        // destination once it is back on the LRU (mlock.rs).
        let mlocked = self.migrate_munlock_source(id);
        self.pages.set_a(dst, id);
        self.pages.set_b(dst, self.pages.b(src));
        if let Some(b) = self.blame.as_deref_mut() {
            // Issue 37: the folio keeps the source that allocated it (the target chunk came
            // from the compactor's isolated free pages, not from an allocation).
            b.moved(src, dst);
        }
        self.account_folio(id, -1);
        self.folios.folios[id as usize].pfn = dst;
        self.folios.add_migration(id);
        self.account_folio(id, 1);
        // The source page no longer belongs to the folio.
        self.pages.set_a(src, crate::mmzone::NIL);
        self.pages.set_flag(src, PG_LRU, false);
        self.putback_lru_folio(id);
        if mlocked {
            self.mlock_folio(id);
        }
        self.free_pages(cc.cpu, src, order);
    }

    /// The folio's [`MigrateKind`] (§25.4): anon; a page-cache folio by its mapping's
    /// filesystem — `xfs` mappings (no __GFP_FS) have `filemap_migrate_folio`, `large_folios`
    /// mappings are ext4 (`buffer_migrate_folio`), `no_large_folios` mappings ext4
    /// data=journal (`buffer_migrate_folio_norefs`), a mapping built with `migrate_folio =
    /// false` has none (`fallback_migrate_folio`); a file folio outside the page cache is
    /// treated as `filemap_migrate_folio`; hugetlb; anything else (never isolated) as
    /// movable_ops.
    pub fn folio_migrate_kind(&self, id: FolioId) -> MigrateKind {
        let f = &self.folios.folios[id as usize];
        match f.kind {
            FolioKind::Anon => MigrateKind::Anon,
            FolioKind::File if f.mapping == 0 => MigrateKind::FileMigrateFolio,
            FolioKind::File => {
                let m = self.mapping(f.mapping);
                if !m.migrate_folio {
                    MigrateKind::FileNoMigrateFolio
                } else if m.nofs() {
                    MigrateKind::FileMigrateFolio
                } else if m.large_folio_support() {
                    MigrateKind::FileBufferHeads
                } else {
                    MigrateKind::FileBufferHeadsNorefs
                }
            }
            // §33.1 item 6: `def_blk_aops.migrate_folio` = `buffer_migrate_folio_norefs`.
            FolioKind::Bdev => MigrateKind::FileBufferHeadsNorefs,
            FolioKind::Hugetlb => MigrateKind::Hugetlb,
            _ => MigrateKind::MovableOps,
        }
    }

    /// The isolation filters of §25.3 that depend on migration state
    /// (`isolate_migratepages_block`, §9.6.3): a pinned anon folio (refcount − 1 > mapcount)
    /// is never isolated; ASYNC and SYNC_LIGHT (ISOLATE_ASYNC_MIGRATE) do not isolate a folio
    /// under writeback, a dirty folio whose mapping has no `migrate_folio`, nor a dirty folio
    /// that is locked (the mapping test needs a trylock). The other filters (order, NOFS,
    /// unevictable, non-LRU) are compaction.rs's `folio_isolatable`.
    pub(crate) fn migrate_isolation_ok(&self, mode: MigrateMode, id: FolioId) -> bool {
        let f = &self.folios.folios[id as usize];
        if f.pinned() && f.kind == FolioKind::Anon {
            return false;
        }
        if mode == MigrateMode::Sync {
            return true;
        }
        if self.folio_test_writeback(id) {
            return false;
        }
        !(f.dirty() && (f.io_locked() || !self.folio_migrate_kind(id).has_migrate_folio()))
    }

    /// The outcome of one attempt at migrating folio `id` in `mode` (§25.1, the mode's column;
    /// `pf_memalloc`: the caller is direct compaction), once its destination is allocated.
    /// Unmap phase (`migrate_folio_unmap`): the folio lock (#3), writeback (#4); move phase
    /// (`move_to_new_folio`): the reference count (#7, pins), a dirty folio without
    /// `migrate_folio` (#9).
    pub fn migrate_folio_outcome(&self, id: FolioId, mode: MigrateMode, pf_memalloc: bool) -> MigrateOutcome {
        let f = &self.folios.folios[id as usize];
        if f.io_locked() && (mode != MigrateMode::Sync || pf_memalloc) {
            // ASYNC: no trylock; PF_MEMALLOC never sleeps on a folio lock; SYNC_LIGHT does
            // not wait for I/O (a read in flight is not uptodate).
            return MigrateOutcome::Again;
        }
        if self.folio_test_writeback(id) && mode != MigrateMode::Sync {
            return MigrateOutcome::Fail;
        }
        if f.pinned() {
            return MigrateOutcome::Again;
        }
        // §33.1 item 6 (`__buffer_migrate_folio` with check_refs): a block-device folio whose
        // buffer has a journal_head attached holds a buffer reference (`b_count` > 0), which
        // `buffer_migrate_folio_norefs` refuses with −EAGAIN in every mode.
        if f.kind == FolioKind::Bdev && self.bdev_pinned(id) {
            return MigrateOutcome::Again;
        }
        if f.dirty() && !self.folio_migrate_kind(id).has_migrate_folio() {
            return MigrateOutcome::Fail;
        }
        MigrateOutcome::Success
    }

    /// Whether `try_split_folio` (§13.3) succeeds for isolated large folio `id` after
    /// `compaction_alloc` returned NULL (migrate.c `migrate_pages_batch`, `try_split_folio`;
    /// huge_memory.c `__folio_split`, `can_split_folio`; mm/filemap.c
    /// `filemap_release_folio`; fs/ext4/inode.c `ext4_release_folio`; fs/jbd2/transaction.c
    /// `jbd2_journal_try_to_free_buffers`; fs/buffer.c `try_to_free_buffers`, `buffer_busy`).
    /// The −ENOMEM is met in the first pass, which is ASYNC in every mode (§13.2), so the split
    /// needs a folio trylock: a locked folio (`io_locked`) fails (−EAGAIN). `__folio_split`
    /// refuses a folio under writeback (−EBUSY), a folio with extra references
    /// (`can_split_folio`: a GUP pin, −EAGAIN), and a page-cache folio whose private data
    /// cannot be released (−EBUSY): an ext4 folio (buffer heads) that is dirty has dirty
    /// buffers, which `try_to_free_buffers` keeps (`buffer_busy`). Measured on the live 6.18
    /// kernel (docs/snapshot-compact.md): each `compact_memory` whose failing folio's flags were
    /// read ended its Normal zone CONTENDED at a dirty ext4 large folio with PG_private.
    /// docs/model §13.3 says a failed split ends the call but not when a split fails.
    /// Simplified: XFS/iomap folios split when dirty — a folio dirtied by whole-folio writes
    /// carries no `iomap_folio_state` (`__iomap_write_begin` skips it), so
    /// `filemap_release_folio` has nothing to release; a partially written one (which has it,
    /// and `iomap_release_folio` refuses while dirty) is not told apart by the model. A folio
    /// without `migrate_folio` (`fallback_migrate_folio`) is treated like XFS.
    pub fn try_split_folio_ok(&self, id: FolioId) -> bool {
        let f = &self.folios.folios[id as usize];
        if f.io_locked() || f.pinned() || self.folio_test_writeback(id) {
            return false;
        }
        let buffer_heads = matches!(
            self.folio_migrate_kind(id),
            MigrateKind::FileBufferHeads | MigrateKind::FileBufferHeadsNorefs
        );
        !(f.dirty() && buffer_heads)
    }

    /// `compaction_free`: a destination whose migration failed goes back to the compactor's
    /// isolated free list of its order, at the head (§9.8.6).
    fn compaction_free(&mut self, cc: &mut CompactControl, dst: u32, order: u32) {
        self.pages.set(dst, PageKind::Isolated, order);
        cc.freepages[order as usize].insert(0, dst);
        cc.nr_freepages += 1 << order;
        cc.nr_migratepages += 1 << order;
    }

    /// One folio through the passes of §25.2 in `mode`, its destination `dst` allocated:
    /// migrates it or frees `dst` and puts the folio back. Returns whether it migrated and adds
    /// its retries and waits to `st`.
    fn migrate_one(
        &mut self,
        cc: &mut CompactControl,
        id: FolioId,
        dst: u32,
        mode: MigrateMode,
        passes: u64,
        st: &mut MigrateStats,
    ) -> bool {
        let pf_memalloc = cc.direct_compaction;
        let order = self.folios.folios[id as usize].order as u32;
        // ASYNC alone, or the ASYNC phase of SYNC_LIGHT/SYNC (3 passes), then the real mode
        // alone (7 passes).
        let (first_passes, real) = if mode == MigrateMode::Async {
            (passes, None)
        } else {
            (3, Some(mode))
        };
        let mut out = self.migrate_folio_outcome(id, MigrateMode::Async, pf_memalloc);
        if out == MigrateOutcome::Again {
            st.retries += first_passes - 1;
        }
        if out != MigrateOutcome::Success {
            if let Some(m) = real {
                // A fresh attempt (and destination) for every folio not migrated.
                st.retries += 1;
                out = self.migrate_folio_outcome(id, m, pf_memalloc);
                if out == MigrateOutcome::Again {
                    st.retries += 6;
                }
                if out == MigrateOutcome::Success && m == MigrateMode::Sync {
                    // folio_wait_writeback: the compactor sleeps until the write completes.
                    let end = self.folios.writeback_end_ns(id);
                    st.wait_ns += end.saturating_sub(self.cur.now_ns);
                }
            }
        }
        if out == MigrateOutcome::Success {
            self.move_folio(cc, id, dst);
            true
        } else {
            self.compaction_free(cc, dst, order);
            self.putback_folio(id);
            false
        }
    }

    /// `split_folio` of an isolated folio for migration: through `split_anon_folio` for an anon
    /// folio with a subpage map (§31: its unmapped and zero-filled pieces are freed).
    fn split_any(&mut self, cpu: u32, id: FolioId) -> Vec<FolioId> {
        if self.folios.folios[id as usize].has_submap() {
            self.split_anon_folio(cpu, id)
        } else {
            self.split_folio(id)
        }
    }

    /// `migrate_pages(cc->migratepages, compaction_alloc, compaction_free, mode, MR_COMPACTION)`
    /// (§13, §25): each folio gets a target of its order; with none, a large folio is split
    /// (if `try_split_folio_ok`) and its pieces are migrated after the batch in one ASYNC pass,
    /// while an order-0 folio or a large folio that cannot be split ends the call with −ENOMEM
    /// (it and the rest are put back, counted whole in pgmigrate_fail). Each folio with a
    /// target then meets the outcomes of §25.1 over the passes of §25.2 (see the module doc).
    /// Returns true on −ENOMEM. Counts pgmigrate_* and thp_migration_*. With `folio_mode =
    /// split_large` every large folio is split first.
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
        let split_first = self.policy.split_large_folios_before_migration();
        for &id in &list {
            if enomem {
                self.putback_folio(id);
                continue;
            }
            let order = self.folios.folios[id as usize].order as u32;
            let f = &self.folios.folios[id as usize];
            if order > 1 && f.deferred() && f.partially_mapped() && self.try_split_folio_ok(id) {
                // §31.3 item 7 (`migrate_pages_batch`): a partially mapped folio on the
                // deferred split queue is split first (its unmapped and zero-filled pieces
                // freed, `split_anon_folio`), counted as a split, and its pieces migrated
                // after the batch. If the split fails it is migrated whole.
                pieces.extend(self.split_anon_folio(cc.cpu, id));
                st.nr_split += 1;
                st.nr_failed += 1;
                if order == HPAGE_PMD_ORDER {
                    st.nr_thp_split += 1;
                }
                continue;
            }
            if order > 0 && split_first {
                pieces.extend(self.split_any(cc.cpu, id));
                st.nr_split += 1;
                st.nr_failed += 1;
                if order == HPAGE_PMD_ORDER {
                    st.nr_thp_split += 1;
                }
                continue;
            }
            match self.compaction_alloc(cc, order) {
                Some(dst) => {
                    if self.migrate_one(cc, id, dst, cc.mode, NR_MAX_MIGRATE_PAGES_RETRY, &mut st) {
                        st.nr_succeeded += 1 << order;
                        if order == HPAGE_PMD_ORDER {
                            st.nr_thp_succeeded += 1;
                        }
                    } else {
                        st.nr_failed += 1;
                        st.nr_failed_pages += 1 << order;
                        if order == HPAGE_PMD_ORDER {
                            st.nr_thp_failed += 1;
                        }
                        self.blame_migrate_failure(id);
                    }
                }
                None if order > 0 && self.try_split_folio_ok(id) => {
                    // try_split_folio: allowed for compaction; the pieces need order-0 targets.
                    pieces.extend(self.split_any(cc.cpu, id));
                    st.nr_split += 1;
                    st.nr_failed += 1;
                    if order == HPAGE_PMD_ORDER {
                        st.nr_thp_split += 1;
                    }
                }
                None => {
                    // −ENOMEM for an order-0 folio, or for a large folio whose split failed
                    // (`try_split_folio_ok`): the call stops, the folio counts whole.
                    enomem = true;
                    st.nr_failed += 1;
                    st.nr_failed_pages += 1 << order;
                    if order == HPAGE_PMD_ORDER {
                        st.nr_thp_failed += 1;
                    }
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
                    // One ASYNC pass for split pieces (§25.2.3).
                    if self.migrate_one(cc, id, dst, MigrateMode::Async, 1, &mut st) {
                        st.nr_succeeded += 1;
                    } else {
                        st.nr_failed_pages += 1;
                        self.blame_migrate_failure(id);
                    }
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
        cc.migrate_retries += st.retries;
        cc.migrate_wait_ns += st.wait_ns;
        self.compact.last_migrate = st;
        self.compact.last_migrate_nr_pages = nr_pages;
        enomem
    }
}
