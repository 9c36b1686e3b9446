//! `--fit-memory`: run a spec on a machine larger than its `machine.memory` by taking the
//! difference out of the page allocator for the run, as a pool of 2 MiB hugetlb pages
//! (`/proc/sys/vm/nr_hugepages`; Documentation/admin-guide/mm/hugetlbpage.rst). The pool's pages
//! are allocated from the buddy allocator when the sysctl is written and stay allocated until it
//! is written back, so the workload, kswapd, kcompactd and compaction see only the rest: memory
//! pressure arrives at the spec's size, not at the machine's.
//!
//! What this does not change (written into the result as notes, and in the defrag-mode README):
//! the zone still spans the whole machine, so the watermarks (`min_free_kbytes`,
//! `watermark_scale_factor` on `managed_pages`, which count the pool) are those of the large
//! machine, and the compaction scanners walk past the pool's blocks (in-use compound pages,
//! skipped a folio at a time) — compaction's pfn counts include those steps. The pool's blocks
//! are wherever the allocator found free 2 MiB blocks when it was filled.

use std::path::Path;

use crate::{procfs, HostError};

/// The sysctl of the default-size hugetlb pool.
pub const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

/// How much to take out: the plan of a `--fit-memory` run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fit {
    /// Pages of `page_bytes` to put in the pool.
    pub pages: u64,
    /// The default hugetlb page size (`Hugepagesize` in /proc/meminfo).
    pub page_bytes: u64,
    /// `nr_hugepages` before the run (restored after it; must be 0).
    pub before: u64,
    /// MemTotal of this machine.
    pub mem_total: u64,
    /// The spec's `machine.memory`.
    pub target: u64,
}

impl Fit {
    /// The pool's size in bytes.
    pub fn bytes(&self) -> u64 {
        self.pages * self.page_bytes
    }
}

/// MemTotal and the default hugetlb page size of a machine with `meminfo` (the text of
/// /proc/meminfo), refusing a pool that is already in use (`before` pages). `who` names the
/// option in the errors.
fn machine(meminfo: &str, before: u64, who: &str) -> Result<(u64, u64), HostError> {
    let total = procfs::meminfo_bytes(meminfo, "MemTotal")
        .ok_or_else(|| HostError::Unsupported(format!("{who}: no MemTotal in /proc/meminfo")))?;
    let page_bytes = procfs::meminfo_bytes(meminfo, "Hugepagesize").ok_or_else(|| {
        HostError::Unsupported(format!("{who}: no Hugepagesize in /proc/meminfo (no hugetlbfs)"))
    })?;
    if before != 0 {
        return Err(HostError::Unsafe(format!(
            "{who}: vm.nr_hugepages is already {before}; the run would change another user's pool"
        )));
    }
    Ok((total, page_bytes))
}

/// Plans the pool for a machine with `meminfo` and `before` pages already in the pool, so that
/// MemTotal minus the pool is `target` (whole pool pages, rounded down: the memory left is at
/// most one pool page above the target).
pub fn plan(meminfo: &str, before: u64, target: u64) -> Result<Fit, HostError> {
    let (total, page_bytes) = machine(meminfo, before, "--fit-memory")?;
    if target >= total {
        return Err(HostError::Unsafe(format!(
            "--fit-memory: machine.memory ({} MiB) is not smaller than this machine's MemTotal \
             ({} MiB)",
            target >> 20,
            total >> 20
        )));
    }
    Ok(Fit {
        pages: (total - target) / page_bytes,
        page_bytes,
        before,
        mem_total: total,
        target,
    })
}

/// The pool of a mixed `--fit-memory` ([`crate::memblock::offline_best_effort`] took fewer
/// blocks than planned): planned like [`plan`] on `meminfo` read after the offlining, so that
/// MemTotal (already smaller by the blocks taken) minus the pool is `target`, in 2 MiB pages
/// (the simulator then boots the fitted zones with `machine.hugetlb_pages` = the pool).
pub fn shortfall(meminfo: &str, before: u64, target: u64) -> Result<Fit, HostError> {
    let fit = plan(meminfo, before, target)?;
    if fit.page_bytes != 2 << 20 {
        return Err(HostError::Unsupported(format!(
            "--fit-memory: the shortfall of offlining is held in 2 MiB pages; this machine's \
             Hugepagesize is {} KiB",
            fit.page_bytes >> 10
        )));
    }
    Ok(fit)
}

/// The pool of a spec's `[machine] hugetlb_pages` (2 MiB pages): the machine must use 2 MiB
/// as its default hugetlb size and have the memory.
pub fn exact(meminfo: &str, before: u64, pages: u64) -> Result<Fit, HostError> {
    let (total, page_bytes) = machine(meminfo, before, "machine.hugetlb_pages")?;
    if page_bytes != 2 << 20 {
        return Err(HostError::Unsupported(format!(
            "machine.hugetlb_pages counts 2 MiB pages; this machine's Hugepagesize is {} KiB",
            page_bytes >> 10
        )));
    }
    if pages * page_bytes >= total {
        return Err(HostError::Unsafe(format!(
            "machine.hugetlb_pages: {pages} pages of 2 MiB do not fit in MemTotal ({} MiB)",
            total >> 20
        )));
    }
    Ok(Fit {
        pages,
        page_bytes,
        before,
        mem_total: total,
        target: total - pages * page_bytes,
    })
}

/// [`Pool::reserve`]: writes in a row that add no page before it gives up.
pub const RESERVE_TRIES: u32 = 3;
/// [`Pool::reserve`]: the writes at most this long in all.
pub const RESERVE_TIME: std::time::Duration = std::time::Duration::from_secs(120);

/// The pool while the run holds it. The pool's size before is a `hugetlb_pool` change of the
/// run's journal ([`crate::journal`]), recorded before the pool is filled and written back (and
/// read back) on every way out.
pub struct Pool {
    /// Pages the kernel put in the pool.
    pub pages: u64,
}

fn read_pages(path: &Path) -> Result<u64, HostError> {
    let t = std::fs::read_to_string(path).map_err(|e| HostError::io(path.display().to_string(), e))?;
    t.trim()
        .parse()
        .map_err(|_| HostError::Unsupported(format!("{}: not a number: {:?}", path.display(), t.trim())))
}

/// The pool's current size in pages.
pub fn current_pages() -> Result<u64, HostError> {
    read_pages(Path::new(NR_HUGEPAGES))
}

fn write_pages(n: u64) -> Result<(), HostError> {
    std::fs::write(NR_HUGEPAGES, n.to_string()).map_err(|e| HostError::KnobWrite {
        name: "vm.nr_hugepages".into(),
        value: n.to_string(),
        why: e.to_string(),
    })
}

impl Pool {
    /// Fills the pool. The kernel may find fewer free 2 MiB blocks than asked for (it reclaims
    /// and compacts for them first, and `set_max_huge_pages` stops at the first allocation that
    /// fails even with most of the machine in reclaimable page cache, as on this VM): the write
    /// is repeated while it makes progress (at most [`RESERVE_TRIES`] writes in a row without
    /// progress, [`RESERVE_TIME`] in all). A pool more than 1 % short then is an error (the
    /// journal gives the pool back), a smaller shortfall is kept and recorded.
    pub fn reserve(fit: &Fit) -> Result<Pool, HostError> {
        let mut pool = Pool { pages: fit.before };
        let t = std::time::Instant::now();
        let mut idle = 0;
        while pool.pages < fit.pages && idle < RESERVE_TRIES && t.elapsed() < RESERVE_TIME {
            write_pages(fit.pages)?;
            let now = current_pages()?;
            idle = if now > pool.pages { 0 } else { idle + 1 };
            pool.pages = now;
        }
        if pool.pages * 100 < fit.pages * 99 {
            return Err(HostError::Unsafe(format!(
                "--fit-memory: the kernel put {} of {} hugetlb pages in the pool (memory too \
                 fragmented or in use); given back",
                pool.pages, fit.pages
            )));
        }
        Ok(pool)
    }

    /// Memory left to the page allocator: `mem_total` minus the pool.
    pub fn outside(&self, fit: &Fit) -> u64 {
        fit.mem_total.saturating_sub(self.pages * fit.page_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:       24684084 kB\nMemFree:        24128648 kB\n\
        MemAvailable:   24164064 kB\nHugePages_Total:       0\nHugepagesize:       2048 kB\n";

    #[test]
    fn plans_the_pool_to_leave_the_target() {
        let f = plan(MEMINFO, 0, 8 << 30).unwrap();
        assert_eq!(f.page_bytes, 2 << 20);
        // (24,684,084 KiB - 8 GiB) / 2 MiB = 7,956.7: 7,956 whole pages, 8 GiB + 1,460 KiB left.
        assert_eq!(f.pages, 7956);
        let left = f.mem_total - f.bytes();
        assert!((8 << 30..(8 << 30) + (2 << 20)).contains(&left), "{left}");
    }

    #[test]
    fn a_specs_pool_is_taken_as_given() {
        let f = exact(MEMINFO, 0, 7956).unwrap();
        assert_eq!((f.pages, f.page_bytes), (7956, 2 << 20));
        assert_eq!(f.target, 24_684_084 * 1024 - 7956 * (2 << 20));
        assert!(matches!(exact(MEMINFO, 1, 10), Err(HostError::Unsafe(_))));
        assert!(matches!(exact(MEMINFO, 0, 20_000), Err(HostError::Unsafe(_))));
        let gib_pages = MEMINFO.replace("Hugepagesize:       2048 kB", "Hugepagesize:    1048576 kB");
        assert!(matches!(exact(&gib_pages, 0, 4), Err(HostError::Unsupported(_))));
    }

    /// The shortfall of offlining: the pool leaves the target of the MemTotal read after the
    /// blocks went, in 2 MiB pages only.
    #[test]
    fn the_shortfall_pool_is_planned_on_the_fitted_memtotal() {
        // 24,684,084 KiB with 16 of 112 blocks of 128 MiB offline: 22,586,932 KiB.
        let fitted = MEMINFO.replace("24684084", "22586932");
        let f = shortfall(&fitted, 0, 10 << 30).unwrap();
        assert_eq!(f.pages, (22_586_932 * 1024 - (10u64 << 30)) / (2 << 20));
        assert!(matches!(
            shortfall(&fitted, 3, 10 << 30),
            Err(HostError::Unsafe(_))
        ));
        let gib_pages = fitted.replace("Hugepagesize:       2048 kB", "Hugepagesize:    1048576 kB");
        assert!(matches!(
            shortfall(&gib_pages, 0, 10 << 30),
            Err(HostError::Unsupported(_))
        ));
    }

    #[test]
    fn refuses_a_used_pool_and_a_target_above_the_machine() {
        assert!(matches!(plan(MEMINFO, 4, 8 << 30), Err(HostError::Unsafe(_))));
        assert!(matches!(plan(MEMINFO, 0, 32 << 30), Err(HostError::Unsafe(_))));
        assert!(matches!(
            plan("MemTotal: 1000 kB\n", 0, 1 << 20),
            Err(HostError::Unsupported(_))
        ));
    }
}
