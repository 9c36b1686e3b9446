//! The cost model: what each unit of work the mm model reports costs in simulated time.
//!
//! Every constant is a named field in nanoseconds (architecture.md "Determinism and time"). The
//! defaults are the figures of `shared/reference/live-kernel-notes.md` ("Reference cost
//! measurements", one Linux 6.18 VM) and measurements on this project's machine
//! (`tools/measure/`); `docs/costs.md` says how each one was measured, or why it could not be.
//! A spec may override any of them.

/// Nanoseconds per unit of work.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// A 4 KiB anonymous first-touch fault, excluding zeroing and the allocation (p50 1.3–1.7 µs
    /// all-in; docs/costs.md).
    pub fault_base_ns: u64,
    /// Zeroing one 4 KiB page (`clear_page_erms` 0.38–0.64 µs per page here).
    pub zero_page_ns: u64,
    /// Copying one 4 KiB page in migration (~1.8 µs per page migrated, per-cycle fit).
    pub migrate_page_ns: u64,
    /// One pfn looked at by the migration scanner (~0.003 µs).
    pub migrate_scan_pfn_ns_x1000: u64,
    /// One pfn looked at by the free scanner (~0.004 µs).
    pub free_scan_pfn_ns_x1000: u64,
    /// Fixed cost of one compaction run (compact_zone) (~60 µs, high variance).
    pub compact_run_ns: u64,
    /// One page isolated by compaction (`isolate_migratepages_block`, ~0.3 µs per page taken).
    pub isolate_page_ns: u64,
    /// The per-page part of reclaim (a page scanned, or reclaimed where the scan is not counted).
    pub reclaim_scan_page_ns: u64,
    /// The per-folio part of reclaim: one folio reclaimed (`shrink_folio_list`), any size.
    pub reclaim_clean_ns: u64,
    /// Per CPU drained by `drain_all_pages` (the caller takes that CPU's pcp lock; the name is
    /// historical: 6.18 sends no IPI).
    pub drain_ipi_ns: u64,
    /// One page returned from a PCP list to the buddy lists by `free_pcppages_bulk` when
    /// `drain_all_pages` drains a CPU.
    pub drain_page_ns: u64,
    /// A context switch between tasks on one CPU.
    pub context_switch_ns: u64,
    /// Latency of a read I/O (a page-cache miss of a kbuild job or a small-file read: vda's
    /// random 4 KiB read) and of a write I/O (writeback).
    pub read_io_ns: u64,
    pub write_io_ns: u64,
    /// The read device of `read` steps: each read request (a readahead window, or the page of
    /// a random read) costs `read_req_ns` plus `read_page_ns` per 4 KiB page it reads (this
    /// VM's virtio disk, vda; docs/costs.md).
    pub read_req_ns: u64,
    pub read_page_ns: u64,
    /// The same for files on a loop device over a file on vda (`[host] loop_images`, the
    /// suite's cold-read scenarios): the loop driver copies from vda's page cache.
    pub loop_read_req_ns: u64,
    pub loop_read_page_ns: u64,
    /// Whether `read` steps read from the loop device (`[host] loop_images`; not a `[cost]`
    /// key: `timed::cost_model` sets it from the spec).
    pub read_on_loop: bool,
    /// The fast path of one page allocation (buddy/PCP), and unmapping and freeing one page of a
    /// task's memory.
    pub alloc_fast_ns: u64,
    pub free_page_ns: u64,
    /// Creating a small file and closing it (`open(O_CREAT)` + `close`: path lookup, dentry,
    /// the filesystem's inode and directory entry, journal), excluding the data write.
    pub file_create_ns: u64,
    /// Unlinking a small file, excluding the freeing of its page cache (charged per page).
    pub file_unlink_ns: u64,
    /// Free page reporting (§32.3 item 6): the first write to a 4 KiB page whose
    /// backing the host discarded (an EPT violation the host serves by allocating and zeroing
    /// a page; invisible to the guest kernel). Charged only with `[machine]
    /// page_reporting_order`: a fault's latency includes its own (recorded apart too,
    /// `LatencyHistogram::host_fault_ns`), other writes (page-cache fills, slab, migration
    /// targets) lengthen the step that made them.
    pub host_fault_ns: u64,
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel {
            fault_base_ns: 900,
            zero_page_ns: 400,
            migrate_page_ns: 1_800,
            migrate_scan_pfn_ns_x1000: 3_000,
            free_scan_pfn_ns_x1000: 4_000,
            compact_run_ns: 60_000,
            isolate_page_ns: 300,
            reclaim_scan_page_ns: 50,
            reclaim_clean_ns: 1_400,
            drain_ipi_ns: 1_000,
            drain_page_ns: 300,
            context_switch_ns: 4_000,
            read_io_ns: 80_000,
            write_io_ns: 63_000,
            read_req_ns: 29_000,
            read_page_ns: 3_200,
            loop_read_req_ns: 18_000,
            loop_read_page_ns: 800,
            read_on_loop: false,
            alloc_fast_ns: 175,
            free_page_ns: 280,
            file_create_ns: 14_000,
            file_unlink_ns: 17_000,
            host_fault_ns: 13_000,
        }
    }
}

impl CostModel {
    /// The names of every constant, in declaration order: the `[cost]` keys of a spec.
    pub const NAMES: &'static [&'static str] = fraglab_spec::COST_KEYS;

    /// The constant called `name`, mutably.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut u64> {
        Some(match name {
            "fault_base_ns" => &mut self.fault_base_ns,
            "zero_page_ns" => &mut self.zero_page_ns,
            "migrate_page_ns" => &mut self.migrate_page_ns,
            "migrate_scan_pfn_ns_x1000" => &mut self.migrate_scan_pfn_ns_x1000,
            "free_scan_pfn_ns_x1000" => &mut self.free_scan_pfn_ns_x1000,
            "compact_run_ns" => &mut self.compact_run_ns,
            "isolate_page_ns" => &mut self.isolate_page_ns,
            "reclaim_scan_page_ns" => &mut self.reclaim_scan_page_ns,
            "reclaim_clean_ns" => &mut self.reclaim_clean_ns,
            "drain_ipi_ns" => &mut self.drain_ipi_ns,
            "drain_page_ns" => &mut self.drain_page_ns,
            "context_switch_ns" => &mut self.context_switch_ns,
            "read_io_ns" => &mut self.read_io_ns,
            "write_io_ns" => &mut self.write_io_ns,
            "read_req_ns" => &mut self.read_req_ns,
            "read_page_ns" => &mut self.read_page_ns,
            "loop_read_req_ns" => &mut self.loop_read_req_ns,
            "loop_read_page_ns" => &mut self.loop_read_page_ns,
            "alloc_fast_ns" => &mut self.alloc_fast_ns,
            "free_page_ns" => &mut self.free_page_ns,
            "file_create_ns" => &mut self.file_create_ns,
            "file_unlink_ns" => &mut self.file_unlink_ns,
            "host_fault_ns" => &mut self.host_fault_ns,
            _ => return None,
        })
    }

    /// The cost of compaction work (either a direct compactor's or kcompactd's).
    pub fn compaction(&self, st: &fraglab_mm::compaction::CompactRunStats) -> u64 {
        st.runs * self.compact_run_ns
            + st.migrate_scanned * self.migrate_scan_pfn_ns_x1000 / 1000
            + st.free_scanned * self.free_scan_pfn_ns_x1000 / 1000
            + st.isolated * self.isolate_page_ns
            + st.migrated_pages * self.migrate_page_ns
            + st.migrate_retries * self.isolate_page_ns
            + st.migrate_wait_ns
    }

    /// The cost of reclaim over `pages` pages (scanned where known, else reclaimed) that
    /// reclaimed `folios` folios: `shrink_folio_list`'s work is per folio, the LRU scan per page.
    pub fn reclaim(&self, pages: u64, folios: u64) -> u64 {
        pages * self.reclaim_scan_page_ns + folios * self.reclaim_clean_ns
    }

    /// The cost of allocation work (`MeasureWork::measure`'s `WorkSum`): the fast path of every
    /// allocation plus compaction, reclaim and drain IPIs in slow paths.
    pub fn alloc_work(&self, w: &fraglab_mm::slowpath::WorkSum) -> u64 {
        w.allocs * self.alloc_fast_ns
            + self.compaction(&w.compaction)
            + self.reclaim(w.reclaimed, w.reclaimed_folios)
            + self.drain_wait(w.drain_ipis, w.drained_pages)
    }

    /// What a `drain_all_pages` costs its caller: since Linux 6.1 `__drain_all_pages` drains
    /// every CPU's lists itself, one after the other (`drain_pages_zone` under the remote pcp
    /// lock, no IPI): a per-CPU overhead and `free_pcppages_bulk` of every page.
    pub fn drain_wait(&self, cpus: u64, pages: u64) -> u64 {
        cpus * self.drain_ipi_ns + pages * self.drain_page_ns
    }

    /// The cost of one allocation's slow-path work (`mm.work.last_alloc`), beyond the fast path.
    pub fn slowpath(&self, w: &fraglab_mm::slowpath::AllocWork) -> u64 {
        if !w.slowpath {
            return 0;
        }
        self.compaction(&w.compaction)
            + self.reclaim(w.reclaimed, w.reclaimed_folios)
            + self.drain_wait(w.drain_ipis as u64, w.drained_pages)
    }

    /// The device time of the reads that `st` sums (`filemap_read`, kernel-model.md §12.2,
    /// §23): every readahead call that added folios (`page_cache_sync_ra` or
    /// `page_cache_async_ra`, mm/readahead.c `read_pages` submits its window as one request)
    /// is one request of `read_req_ns`, and every page it brought in costs `read_page_ns`
    /// (`loop_read_req_ns` and `loop_read_page_ns` when the files are on loop images).
    /// Simplifications: a window is one request whatever the device's `max_sectors_kb`
    /// (a loop device's is 1280 KiB here, a window of 8 MiB would be split); requests of
    /// different tasks do not queue behind each other (one reader at a time in the suite's
    /// scenarios).
    pub fn read_device(&self, st: &fraglab_mm::filemap::ReadStats) -> u64 {
        let pages: u64 = st.added.iter().enumerate().map(|(o, n)| n << o).sum();
        let requests = (st.sync_ra + st.async_ra).min(pages);
        let (req, page) = if self.read_on_loop {
            (self.loop_read_req_ns, self.loop_read_page_ns)
        } else {
            (self.read_req_ns, self.read_page_ns)
        };
        requests * req + pages * page
    }

    /// How long a reader waits for the device in a step of reads (`st`) whose CPU work ends at
    /// `at`, given `ready_at`, when the requests it issued before complete (updated: the
    /// device serves one request after another). A synchronous miss (`page_cache_sync_ra`;
    /// `filemap_get_pages` then waits on the folio's lock until the read completes) issues its
    /// window and waits for it. A step that reaches a PG_readahead marker
    /// (`page_cache_async_ra`, §23.4: the marker is on the first folio of the window issued
    /// before) issues the next window and waits only for the current one, so a sequential
    /// reader copies window N while window N+1 is read: the read runs at the slower of the
    /// device and the reader. Simplifications: a step's requests are issued together, when
    /// its CPU work ends; a step that issues no request does not wait, so the last window of a
    /// read (read by steps past the last marker) is not waited for.
    pub fn read_wait(&self, st: &fraglab_mm::filemap::ReadStats, at: u64, ready_at: &mut u64) -> u64 {
        let device = self.read_device(st);
        let start = (*ready_at).max(at);
        if st.sync_ra > 0 {
            *ready_at = start + device;
            *ready_at - at
        } else if device > 0 {
            let wait = start - at;
            *ready_at = start + device;
            wait
        } else {
            0
        }
    }
}
