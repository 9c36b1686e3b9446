//! Free page reporting (§32): a virtio-balloon reporting device tells the hypervisor which free
//! chunks of order ≥ `page_reporting_order` it may discard. Models mm/page_reporting.c
//! (`page_reporting_register`, `__page_reporting_request`, `page_reporting_process`,
//! `page_reporting_process_zone`, `page_reporting_cycle`, `page_reporting_drain`) and the
//! parts of mm/page_alloc.c it calls (`__isolate_free_page`, `__putback_isolated_page`).
//!
//! * **Device and order** (§32.1): one device at most, present when `[machine]
//!   page_reporting_order` is given (`MmConfig::page_reporting_order`); it registers at the end
//!   of boot, which requests the first pass (the "initial flush of zones"). Without a device
//!   nothing here runs and no state is kept (the hot paths test one field).
//! * **Trigger** (§32.2 item 1): a free whose merge ends at order ≥ R notifies
//!   ([`Mm::page_reporting_notify_free`], called by `free_one_page_core`); from IDLE that
//!   requests a pass 2 s later, handed to the engine as [`Wakeup::PageReporting`] (the
//!   delayed work: the engine runs [`Mm::page_reporting_process`] when it expires).
//! * **Pass** (§32.2 items 2–8): zone by zone, those above `low + 32·2^R` pages; orders R..10,
//!   every migratetype but Isolate; unreported chunks are isolated (`__isolate_free_page`: the
//!   min + 2^order test, U/R blocks of chunks of order ≥ 8 retyped to Movable) into a batch of
//!   32, reported, and put back at their list's tail, marked reported unless they merged. Each
//!   list gets ⌈nr_free[order]/512⌉ + 1 report calls per pass; past that the state goes back to
//!   REQUESTED (another pass 2 s after this one) and the first unreported chunk is rotated to
//!   the list's head.
//! * **The flag** (§32.3): PG_reported is a bit of a Buddy head's state byte
//!   ([`crate::mmzone::PG_REPORTED`]), so every way a chunk leaves a free list clears it, and
//!   expand's remainders start unreported.
//! * **Host backing** (§32.3 item 6, the simulator's part of §32): one bit per 4 KiB page says
//!   whether the host backs the page. A report discards the backing of every page of its
//!   chunks; the first write to a discarded page costs a host fault (EPT violation: the host
//!   allocates and zeroes a page) and backs it again. Per 4 KiB page rather than per 2 MiB
//!   frame because the measured cost of a THP fault on reported memory (about 5–7 ms for
//!   2 MiB, against 0.1–0.2 ms on backed memory) is what 512 host faults of 4 KiB cost, not one
//!   host THP; and because reporting at an order below 9 (a settable knob) discards ranges
//!   smaller than 2 MiB.
//!
//! Simplifications (said where they apply): the pass happens at one instant (the kworker's CPU
//! time and the wait for the host's acknowledgement are not modelled, so nothing is allocated
//! or freed while chunks are isolated); the device never reports an error; at boot every page
//! is host-backed; "first write" is the allocation of a chunk by `alloc_pages` (a page a
//! compactor captured included) and a migration's copy into its target (every page the model hands out is written by its user at once: a fault
//! zeroes it, a page-cache fill or a slab allocation writes it; a hugetlb pool page, which the
//! kernel zeroes only at its fault, is counted when the pool takes it).

use crate::gfp::AllocFlags;
use crate::mmzone::*;
use crate::node::{Mm, Wakeup};
use crate::types::*;

/// `PAGE_REPORTING_CAPACITY`: chunks per report request (§32.1 item 3).
pub const PAGE_REPORTING_CAPACITY: usize = 32;
/// `PAGE_REPORTING_DELAY` (2·HZ): how long after a request a pass runs, in ms.
pub const PAGE_REPORTING_DELAY_MS: u64 = 2_000;

/// The device's state (`PAGE_REPORTING_IDLE`, `_REQUESTED`, `_ACTIVE`).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReportingState {
    #[default]
    Idle,
    /// A pass is pending (scheduled), or another one is wanted after the running one.
    Requested,
    /// A pass is running.
    Active,
}

/// What reporting did since boot. None of these is a kernel counter (6.18 has none, §32.1
/// item 4): they are the simulator's view of the device and of the host.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReportingStats {
    /// Passes run (`page_reporting_process`).
    pub passes: u64,
    /// Report requests sent to the device (`prdev->report` calls, ≤ 32 chunks each).
    pub reports: u64,
    /// Chunks and pages reported (the host discarded their backing).
    pub chunks: u64,
    pub pages: u64,
    /// Pageblocks `__isolate_free_page` retyped to Movable for the pass (no counter, no
    /// tracepoint in the kernel).
    pub retyped_blocks: u64,
    /// Zones a pass skipped at the watermark test (§32.2 item 2).
    pub zones_skipped: u64,
    /// Lists left because `__isolate_free_page` refused a chunk (min + 2^order).
    pub isolate_refused: u64,
    /// Lists left with their budget spent (state set back to REQUESTED).
    pub budget_spent: u64,
    /// Pages first written while the host did not back them (host faults), since boot.
    pub host_fault_pages: u64,
}

/// What one pass did ([`Mm::page_reporting_process`]).
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassSummary {
    pub reports: u64,
    pub chunks: u64,
    pub pages: u64,
    pub retyped_blocks: u64,
    /// Another pass was requested (it runs 2 s after this one).
    pub again: bool,
}

/// The reporting device and the host's backing of guest memory (module doc).
#[derive(serde::Serialize, serde::Deserialize, Clone, Debug)]
pub struct PageReporting {
    /// `page_reporting_order` once the device registered; `None`: no device.
    order: Option<u32>,
    /// The order a free must reach to notify: `order`, or `u32::MAX` before registration and
    /// without a device (the static key `page_reporting_enabled` off).
    notify_order: u32,
    /// The device is configured (tracks host backing from boot).
    on: bool,
    pub state: ReportingState,
    /// One bit per pfn, set when the host does not back the page (the inverse of
    /// `host_backed`, so that a fresh machine is all zeros); empty without a device.
    discarded: Vec<u64>,
    /// Host faults recorded but not yet charged by an engine (see [`Mm::take_host_faults`]).
    uncharged: u64,
    pub stats: ReportingStats,
}

impl PageReporting {
    /// The device for `order` (None: no device), on a machine of `end_pfn` pfns.
    pub fn new(order: Option<u32>, end_pfn: u32) -> PageReporting {
        assert!(
            !matches!(order, Some(o) if o > MAX_PAGE_ORDER),
            "page_reporting_order {order:?}: expected 0..=10"
        );
        PageReporting {
            order,
            notify_order: u32::MAX,
            on: order.is_some(),
            state: ReportingState::Idle,
            discarded: if order.is_some() {
                vec![0; (end_pfn as usize).div_ceil(64)]
            } else {
                Vec::new()
            },
            uncharged: 0,
            stats: ReportingStats::default(),
        }
    }

    /// `page_reporting_order` (None: no device).
    #[inline]
    pub fn order(&self) -> Option<u32> {
        self.order
    }

    /// Whether there is a reporting device.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.on
    }

    /// Host bytes of the host-backing bitmap.
    pub fn host_bytes(&self) -> usize {
        self.discarded.capacity() * 8
    }

    /// Host faults recorded and not yet charged ([`Mm::take_host_faults`]).
    #[inline]
    pub fn pending_host_faults(&self) -> u64 {
        self.uncharged
    }

    /// Takes the host faults recorded since `pending_host_faults` read `since`: the caller
    /// charges them (a fault's latency includes its own host faults).
    #[inline]
    pub fn claim_host_faults(&mut self, since: u64) -> u64 {
        let n = self.uncharged.saturating_sub(since);
        self.uncharged -= n;
        n
    }
}

impl Mm {
    // ---- configuration (§32.1) -------------------------------------------------------------

    /// `page_reporting_register` (§32.1 items 1–2): at the end of boot, the device (if any)
    /// enables notification and requests the initial pass over every zone.
    pub(crate) fn page_reporting_register(&mut self) {
        if let Some(order) = self.reporting.order {
            self.reporting.notify_order = order;
            self.page_reporting_request();
        }
    }

    /// A write of `page_reporting_order` (0..=10) through sysfs: it takes effect from the next
    /// pass, and for notifications at once (§32.1 item 2). Without a device nothing reads it
    /// (the model keeps no "unset" value to hand a later registration).
    pub fn set_page_reporting_order(&mut self, order: u32) {
        assert!(
            order <= MAX_PAGE_ORDER,
            "page_reporting_order {order}: expected 0..=10"
        );
        if self.reporting.on {
            self.reporting.order = Some(order);
            self.reporting.notify_order = order;
        }
    }

    /// A restored free chunk the capture saw reported (§30, §32.3): PG_reported on its head,
    /// the host's backing of its pages discarded, and the chunk at the tail of its free list,
    /// as a report leaves them (a pass puts reported chunks back at the tail, and frees since
    /// went to the head, so allocations take unreported memory first) — if the device reports
    /// chunks of this order (a chunk below the order, or no device: nothing).
    pub(crate) fn restore_reported(&mut self, pfn: u32, order: u32) {
        if self.reporting.order.is_some_and(|r| order >= r) && self.pages.is_buddy_of_order(pfn, order) {
            self.pages.set_flag(pfn, PG_REPORTED, true);
            self.host_discard(pfn, 1 << order);
            let (zi, mt) = (self.zone_of(pfn), self.block_mt(pfn));
            self.move_to_free_list(zi, pfn, order, mt, mt);
        }
    }

    // ---- trigger (§32.2 item 1) ------------------------------------------------------------

    /// `page_reporting_notify_free` (include/linux/page_reporting.h): called by
    /// `__free_one_page` with the order a free merged to, except for reporting's own put-backs
    /// (FPI_SKIP_REPORT_NOTIFY). One comparison when there is no device.
    #[inline(always)]
    pub(crate) fn page_reporting_notify_free(&mut self, order: u32) {
        if order >= self.reporting.notify_order {
            self.page_reporting_request();
        }
    }

    /// `__page_reporting_request`: REQUESTED already — nothing; else REQUESTED, and from IDLE
    /// the pass is scheduled 2 s later (`schedule_delayed_work`, handed to the engine). From
    /// ACTIVE the running pass schedules the next one when it ends.
    fn page_reporting_request(&mut self) {
        let old = std::mem::replace(&mut self.reporting.state, ReportingState::Requested);
        if old == ReportingState::Idle {
            self.outbox.wakeups.push(Wakeup::PageReporting);
        }
    }

    // ---- the pass (§32.2 items 2–8) --------------------------------------------------------

    /// `page_reporting_process`: the delayed work. ACTIVE, every zone in order, then IDLE, or,
    /// if something asked for more (a notification, a spent budget), another pass 2 s later
    /// ([`Wakeup::PageReporting`]). Without a device, nothing.
    pub fn page_reporting_process(&mut self) -> PassSummary {
        let Some(order) = self.reporting.order else {
            return PassSummary::default();
        };
        let before = self.reporting.stats;
        self.reporting.state = ReportingState::Active;
        self.reporting.stats.passes += 1;
        for zi in 0..self.zones.len() {
            // An empty zone fails the watermark test below (no free page); not counted.
            if self.zones[zi].populated() {
                self.page_reporting_process_zone(zi, order);
            }
        }
        let again = self.reporting.state == ReportingState::Requested;
        if again {
            self.outbox.wakeups.push(Wakeup::PageReporting);
        } else {
            self.reporting.state = ReportingState::Idle;
        }
        let s = &self.reporting.stats;
        PassSummary {
            reports: s.reports - before.reports,
            chunks: s.chunks - before.chunks,
            pages: s.pages - before.pages,
            retyped_blocks: s.retyped_blocks - before.retyped_blocks,
            again,
        }
    }

    /// `page_reporting_process_zone`: a zone whose order-0 watermark test at `low + 32·2^R`
    /// (with ALLOC_CMA; the low mark includes the boost) fails is skipped; otherwise each list
    /// of orders R..=10 and every migratetype but Isolate in turn, with one batch carried across
    /// lists, and a partial batch reported at the end.
    fn page_reporting_process_zone(&mut self, zi: usize, order: u32) {
        let mark = self.zones[zi].wmark_pages(WMARK_LOW) + ((PAGE_REPORTING_CAPACITY as u64) << order);
        if !self.zone_watermark_ok(zi, 0, mark, ZoneType::Dma, AllocFlags(AllocFlags::CMA)) {
            self.reporting.stats.zones_skipped += 1;
            return;
        }
        let mut batch: Vec<(u32, u32)> = Vec::with_capacity(PAGE_REPORTING_CAPACITY);
        for o in order..=MAX_PAGE_ORDER {
            for mt in MigrateType::ALL {
                if mt == MigrateType::Isolate {
                    continue;
                }
                self.page_reporting_cycle(zi, o, mt, &mut batch);
            }
        }
        if !batch.is_empty() {
            self.page_reporting_report(zi, &mut batch);
        }
    }

    /// `page_reporting_cycle`: walks free_list[order][mt] from its head, skipping reported
    /// chunks and isolating the others into `batch`; when the batch is full, the chunk at hand
    /// is rotated to the list's head, the batch reported and drained, and the walk resumes at
    /// the head. The budget allows ⌈nr_free[order]/512⌉ + 1 reports for this list (nr_free of
    /// every migratetype, read once); with it spent, the next unreported chunk sets the state
    /// to REQUESTED and ends the walk, as a refused isolation does; the chunk it stopped at is
    /// rotated to the head (`list_rotate_to_front`: the chunks before it go to the tail, in
    /// order).
    fn page_reporting_cycle(&mut self, zi: usize, order: u32, mt: MigrateType, batch: &mut Vec<(u32, u32)>) {
        let Some(first) = self.zones[zi].free_list_first(order, mt) else {
            return;
        };
        let nr_free = self.zones[zi].area.nr_free[order as usize];
        let mut budget = nr_free.div_ceil((PAGE_REPORTING_CAPACITY * 16) as u64) as i64;
        let mut page = first;
        let mut stop = NIL;
        while page != NIL {
            let next = self.list_next(page);
            if self.pages.is_reported(page) {
                page = next;
                continue;
            }
            if budget < 0 {
                self.reporting.state = ReportingState::Requested;
                self.reporting.stats.budget_spent += 1;
                stop = page;
                break;
            }
            if batch.len() < PAGE_REPORTING_CAPACITY {
                if !self.page_reporting_isolate(zi, page, order) {
                    self.reporting.stats.isolate_refused += 1;
                    stop = page;
                    break;
                }
                batch.push((page, order));
                page = next;
                continue;
            }
            self.free_list_rotate_to_front(zi, order, mt, page);
            self.page_reporting_report(zi, batch);
            budget -= 1;
            page = self.zones[zi].free_list_first(order, mt).unwrap_or(NIL);
        }
        if stop != NIL {
            self.free_list_rotate_to_front(zi, order, mt, stop);
        }
    }

    /// `__isolate_free_page` as the pass calls it ([`Mm::isolate_free_page`], shared with
    /// compaction's free scanner), counting the blocks it retypes.
    fn page_reporting_isolate(&mut self, zi: usize, pfn: u32, order: u32) -> bool {
        match self.isolate_free_page(zi, pfn, order) {
            Some(retyped) => {
                self.reporting.stats.retyped_blocks += retyped as u64;
                true
            }
            None => false,
        }
    }

    /// `prdev->report` and `page_reporting_drain`: the host discards the backing of every page
    /// of the batch; then each chunk goes back with `__putback_isolated_page` — freed to the
    /// tail of its list, in its block's current type, without notifying — in the kernel's
    /// order (the scatter list is filled from its end, so the chunk isolated last comes back
    /// first), and is marked reported if it is still a free chunk of its order (it did not
    /// merge). Empties `batch`.
    fn page_reporting_report(&mut self, zi: usize, batch: &mut Vec<(u32, u32)>) {
        self.reporting.stats.reports += 1;
        for &(pfn, order) in batch.iter() {
            self.host_discard(pfn, 1 << order);
            self.reporting.stats.chunks += 1;
            self.reporting.stats.pages += 1 << order;
        }
        for (pfn, order) in batch.drain(..).rev() {
            let mt = self.block_mt(pfn);
            self.pages.set(pfn, PageKind::Tail, 0);
            self.free_one_page_inner(zi, pfn, order, mt, true);
            if self.pages.is_buddy_of_order(pfn, order) {
                self.pages.set_flag(pfn, PG_REPORTED, true);
            }
        }
    }

    // ---- host backing (§32.3 item 6) -------------------------------------------------------

    /// Whether the host backs page `pfn` (always, without a device).
    pub fn host_backed(&self, pfn: u32) -> bool {
        match self.reporting.discarded.get((pfn / 64) as usize) {
            Some(w) => w & (1 << (pfn % 64)) == 0,
            None => true,
        }
    }

    /// The host discards the backing of `[pfn, pfn + nr)` (a report).
    fn host_discard(&mut self, pfn: u32, nr: u32) {
        let d = &mut self.reporting.discarded;
        let (mut p, end) = (pfn, pfn + nr);
        while p < end {
            let (w, b) = ((p / 64) as usize, p % 64);
            let n = (64 - b).min(end - p);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << b };
            d[w] |= mask;
            p += n;
        }
    }

    /// The first write to `[pfn, pfn + nr)`: every page the host does not back takes a host
    /// fault and is backed again. Returns how many; they are added to the stats and to the
    /// faults an engine has yet to charge ([`Mm::take_host_faults`]). Nothing without a device.
    #[inline]
    pub fn host_write(&mut self, pfn: u32, nr: u32) -> u64 {
        if !self.reporting.on {
            return 0;
        }
        let d = &mut self.reporting.discarded;
        let (mut p, end) = (pfn, pfn + nr);
        let mut faults = 0u64;
        while p < end {
            let (w, b) = ((p / 64) as usize, p % 64);
            let n = (64 - b).min(end - p);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << b };
            faults += (d[w] & mask).count_ones() as u64;
            d[w] &= !mask;
            p += n;
        }
        self.reporting.stats.host_fault_pages += faults;
        self.reporting.uncharged += faults;
        faults
    }

    /// Takes every host fault not yet charged: the engine charges them to the step that wrote
    /// the pages (faults charge their own first, `PageReporting::claim_host_faults`).
    #[inline]
    pub fn take_host_faults(&mut self) -> u64 {
        std::mem::take(&mut self.reporting.uncharged)
    }

    /// Pages the host does not back (discarded and not written since).
    pub fn host_discarded_pages(&self) -> u64 {
        self.reporting
            .discarded
            .iter()
            .map(|w| w.count_ones() as u64)
            .sum()
    }

    /// Free pages in chunks marked reported, over all zones (a walk of the free lists).
    pub fn reported_free_pages(&self) -> u64 {
        let mut n = 0;
        for z in &self.zones {
            for (o, lists) in z.area.lists.iter().enumerate() {
                for l in lists {
                    let mut p = l.first;
                    while p != NIL {
                        if self.pages.is_reported(p) {
                            n += 1u64 << o;
                        }
                        p = self.list_next(p);
                    }
                }
            }
        }
        n
    }
}
