//! The cost model: what each unit of work the mm model reports costs in simulated time.
//!
//! Every constant is a named field in nanoseconds (architecture.md "Determinism and time"). The
//! defaults are reference cost measurements on one Linux 6.18 VM and measurements on this project's machine
//! (`tools/measure/`); `docs/costs.md` says how each one was measured, or why it could not be.
//! A spec may override any of them.

/// Nanoseconds per unit of work.
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug, PartialEq)]
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
    /// One chunk moved between the buddy lists and a PCP list or a caller under `zone->lock`
    /// by the allocation and free paths (`__rmqueue` in `rmqueue_bulk` and `rmqueue_buddy`,
    /// `__free_one_page` in `free_pcppages_bulk` and `free_one_page`): the hold time of those
    /// calls per chunk. A part of `alloc_fast_ns` and `free_page_ns`, never charged on top.
    pub zone_lock_chunk_ns: u64,
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
            zone_lock_chunk_ns: 35,
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
            "zone_lock_chunk_ns" => &mut self.zone_lock_chunk_ns,
            _ => return None,
        })
    }

    /// The time of compaction work (either a direct compactor's or kcompactd's): its CPU
    /// time ([`CostModel::compaction_phase`]) and its waits for writeback.
    pub fn compaction(&self, st: &fraglab_mm::compaction::CompactRunStats) -> u64 {
        let p = self.compaction_phase(st);
        p.cpu_ns + p.wait_ns
    }

    /// Compaction work as the timed engine charges it: CPU time — a fixed cost per
    /// `compact_zone` run, the pfns both scanners looked at, the pages isolated, moved and
    /// retried — of which two parts are lock holds, and the waits of SYNC migration for
    /// writeback (`folio_wait_writeback`, §25.2: `migrate_wait_ns`), which are not CPU.
    ///
    /// - `lruvec->lru_lock`: `isolate_migratepages_block` (mm/compaction.c) takes the lock at
    ///   the first LRU folio it isolates and drops it every `COMPACT_CLUSTER_MAX` (32) pfns and
    ///   when it returns with up to 32 pages: hold = `isolate_page_ns` per page isolated, one
    ///   lock call per 32 pages isolated. Simplified: the pfns scanned under the lock between
    ///   isolated folios are not part of the hold.
    /// - `zone->lock`: `isolate_freepages_block` takes it at the first free page of a
    ///   32-pfn cluster and keeps it to the cluster's end (`compact_unlock_should_abort`), and
    ///   `fast_isolate_freepages` holds it while it walks a free list: hold = the free
    ///   scanner's time (`free_scan_pfn_ns_x1000` per pfn, which includes isolating and
    ///   splitting the free pages), one lock call per 32 pfns. An upper bound: clusters without
    ///   a free page are scanned unlocked in the kernel.
    ///
    /// Not modelled as holds: migration's own locks (the folio lock, the mapping's i_pages),
    /// the LRU putback of migrated folios (per-CPU batches). Async compaction's trylocks
    /// (`compact_lock_irqsave`, §24.5) are decided by the model against the holds other steps
    /// laid out ([`fraglab_mm::compaction::LocksBusy`]).
    pub fn compaction_phase(&self, st: &fraglab_mm::compaction::CompactRunStats) -> Phase {
        let free_scan = st.free_scanned * self.free_scan_pfn_ns_x1000 / 1000;
        let isolate = st.isolated * self.isolate_page_ns;
        Phase {
            cpu_ns: self.compact_costs().cpu_ns(st),
            zone: Hold {
                calls: st.free_scanned.div_ceil(COMPACT_CLUSTER_MAX),
                hold_ns: free_scan,
            },
            lru: Hold {
                calls: st.isolated.div_ceil(COMPACT_CLUSTER_MAX),
                hold_ns: isolate,
            },
            wait_ns: st.migrate_wait_ns,
        }
    }

    /// The compaction figures as the model places a run's lock calls with them
    /// ([`fraglab_mm::compaction::LocksBusy`]); [`CostModel::compaction_phase`] charges a run
    /// by the same formula.
    pub fn compact_costs(&self) -> fraglab_mm::compaction::CompactCosts {
        fraglab_mm::compaction::CompactCosts {
            run_ns: self.compact_run_ns,
            migrate_scan_pfn_ns_x1000: self.migrate_scan_pfn_ns_x1000,
            free_scan_pfn_ns_x1000: self.free_scan_pfn_ns_x1000,
            isolate_page_ns: self.isolate_page_ns,
            migrate_page_ns: self.migrate_page_ns,
        }
    }

    /// Reclaim as the timed engine charges it ([`CostModel::reclaim`]): the LRU scan runs
    /// under `lruvec->lru_lock` (`shrink_inactive_list` / `shrink_active_list` take it around
    /// `isolate_lru_folios` of up to `SWAP_CLUSTER_MAX` (32) folios, mm/vmscan.c): hold =
    /// `reclaim_scan_page_ns` per page, one lock call per 32 pages; `shrink_folio_list`'s
    /// per-folio work (`reclaim_clean_ns`) runs unlocked. Simplified: the putback
    /// (`move_folios_to_lru`, a second short hold per batch) is not a hold of its own.
    pub fn reclaim_phase(&self, pages: u64, folios: u64) -> Phase {
        let scan = pages * self.reclaim_scan_page_ns;
        Phase {
            cpu_ns: scan + folios * self.reclaim_clean_ns,
            lru: Hold {
                calls: pages.div_ceil(SWAP_CLUSTER_MAX),
                hold_ns: scan,
            },
            ..Phase::default()
        }
    }

    /// Allocation work (`MeasureWork::measure`'s `WorkSum`) as the timed engine charges it:
    /// the fast paths, then the slow paths' compaction, reclaim and `drain_all_pages`, in the
    /// order the slow path first does them (§7.4). Its total is [`CostModel::alloc_work`].
    pub fn alloc_charge(&self, w: &fraglab_mm::slowpath::WorkSum) -> Charge {
        Charge {
            base: Phase {
                cpu_ns: w.allocs * self.alloc_fast_ns,
                ..Phase::default()
            },
            compaction: self.compaction_phase(&w.compaction),
            reclaim: self.reclaim_phase(w.reclaimed, w.reclaimed_folios),
            drain: self.drain(w.drains, w.drain_ipis, w.drained_pages),
        }
    }

    /// One allocation attempt (`AllocWork`, a buffered write's folio allocation) as the timed
    /// engine charges it: its fast path, then its slow path's work.
    pub fn attempt_charge(&self, w: &fraglab_mm::slowpath::AllocWork) -> Charge {
        Charge {
            base: Phase {
                cpu_ns: self.alloc_fast_ns,
                ..Phase::default()
            },
            compaction: self.compaction_phase(&w.compaction),
            reclaim: self.reclaim_phase(w.reclaimed, w.reclaimed_folios),
            drain: self.drain(w.drains as u64, w.drain_ipis as u64, w.drained_pages),
        }
    }

    /// `calls` `drain_all_pages` of `cpus` CPUs and `pages` pages in all
    /// ([`CostModel::drain_wait`]).
    pub fn drain(&self, calls: u64, cpus: u64, pages: u64) -> Drain {
        Drain {
            calls,
            cpus,
            pages,
            cpu_ns: self.drain_wait(cpus, pages),
        }
    }

    /// The cost of reclaim over `pages` pages (scanned where known, else reclaimed) that
    /// reclaimed `folios` folios: `shrink_folio_list`'s work is per folio, the LRU scan per page.
    pub fn reclaim(&self, pages: u64, folios: u64) -> u64 {
        pages * self.reclaim_scan_page_ns + folios * self.reclaim_clean_ns
    }

    /// The time of allocation work (`MeasureWork::measure`'s `WorkSum`): the fast path of
    /// every allocation plus compaction, reclaim and drains in slow paths, waits included
    /// (lock waits excluded: only the timed engine knows them, [`CostModel::alloc_charge`]).
    pub fn alloc_work(&self, w: &fraglab_mm::slowpath::WorkSum) -> u64 {
        let c = self.alloc_charge(w);
        c.cpu_ns() + c.wait_ns()
    }

    /// What a `drain_all_pages` costs its caller: since Linux 6.1 `__drain_all_pages` drains
    /// every CPU's lists itself, one after the other (`drain_pages_zone` under the remote pcp
    /// lock, no IPI): a per-CPU overhead and `free_pcppages_bulk` of every page. The cost grows
    /// with the CPUs that hold pages: `cpus` is their number.
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

    /// The device time of the reads that `st` sums (`filemap_read`, docs/model §12.2,
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

/// `COMPACT_CLUSTER_MAX` and `SWAP_CLUSTER_MAX` (32): the batch of the compaction scanners and
/// of the LRU isolation in reclaim, between which they drop their locks.
pub const COMPACT_CLUSTER_MAX: u64 = 32;
pub const SWAP_CLUSTER_MAX: u64 = 32;

/// One lock's part of a piece of work: `calls` lock calls holding it `hold_ns` in all (a part
/// of the work's CPU time).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hold {
    pub calls: u64,
    pub hold_ns: u64,
}

/// A phase of work: its CPU time, the parts of that time spent holding `zone->lock` and
/// `lruvec->lru_lock`, and its waits that are not CPU work (SYNC migration's writeback waits).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phase {
    pub cpu_ns: u64,
    pub zone: Hold,
    pub lru: Hold,
    pub wait_ns: u64,
}

impl Phase {
    /// Takes no lock and waits for nothing.
    #[inline]
    pub fn is_plain(&self) -> bool {
        self.zone.calls == 0 && self.lru.calls == 0 && self.wait_ns == 0
    }
}

/// `calls` runs of `drain_all_pages` (`__drain_all_pages`, mm/page_alloc.c; one, or none, per
/// slow path): each holds `pcpu_drain_mutex` for the whole drain and, for each CPU with pages
/// (`cpus` in all), takes `drain_ipi_ns` (its pcp lock) then returns its share of `pages` by
/// `free_pcppages_bulk` under `zone->lock` (`drain_page_ns` per page); `cpu_ns` is
/// [`CostModel::drain_wait`].
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drain {
    pub calls: u64,
    pub cpus: u64,
    pub pages: u64,
    pub cpu_ns: u64,
}

/// A piece of work as the timed engine charges it, phase after phase in the kernel's order:
/// `base` (a fault's own work, the fast paths of its allocations), the slow paths' `compaction`
/// and `reclaim`, then their `drain`. Its CPU time is the cost model's figure; the engine adds
/// the waits (`Cx::charge`): lock waits, which only it knows, and the phases' `wait_ns`. A cost
/// component added to a phase's `cpu_ns` is therefore counted in both a fault's CPU time and
/// its wall time.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Charge {
    pub base: Phase,
    pub compaction: Phase,
    pub reclaim: Phase,
    pub drain: Drain,
}

impl Charge {
    /// CPU time, the cost model's figure.
    #[inline]
    pub fn cpu_ns(&self) -> u64 {
        self.base.cpu_ns + self.compaction.cpu_ns + self.reclaim.cpu_ns + self.drain.cpu_ns
    }

    /// The waits the cost model knows (writeback), not lock waits.
    #[inline]
    pub fn wait_ns(&self) -> u64 {
        self.base.wait_ns + self.compaction.wait_ns + self.reclaim.wait_ns
    }

    /// Takes no lock and waits for nothing: its wall time is its CPU time.
    #[inline]
    pub fn is_plain(&self) -> bool {
        self.base.is_plain() && self.compaction.is_plain() && self.reclaim.is_plain() && self.drain.calls == 0
    }

    /// Only CPU time, no lock.
    pub fn cpu(ns: u64) -> Charge {
        Charge {
            base: Phase {
                cpu_ns: ns,
                ..Phase::default()
            },
            ..Charge::default()
        }
    }
}
