//! The page-cache census of a file on the live kernel (the `census` task step, issue 19 item 1):
//! the cached pages of a file in folios of each order, read through /proc/kpageflags
//! (docs/model §30.2).
//!
//! How ([`file_census`]): mmap the file `PROT_READ`, `MAP_SHARED`, with `MADV_RANDOM`; mincore(2)
//! says which pages are in the page cache; only those are touched (one byte read each), so the
//! faults find their folios cached and never start I/O, and `MADV_RANDOM` (VM_RAND_READ) keeps
//! `filemap_fault` from starting the asynchronous readahead a `PG_readahead` folio would
//! trigger; /proc/self/pagemap gives each touched page's PFN, /proc/kpageflags its flags; then
//! munmap. [`decode`] turns (file index, PFN, flags) into folios: a page with COMPOUND_HEAD
//! starts a folio whose order is the length of the run of COMPOUND_TAIL PFNs after it (§30.2.1:
//! tail pages carry the head's flags, the tail count gives the order); a page with neither bit
//! is an order-0 folio; a tail whose head was not seen is traced back to its head by PFN.
//!
//! What it cannot see:
//! - pages evicted between mincore and the touch (they are not counted; a touch of one that was
//!   evicted meanwhile reads it back, as an order-0 or readahead-sized folio, without
//!   readahead beyond the page because of MADV_RANDOM);
//! - folios being split or migrated while it reads (flags are a snapshot per PFN, not of the
//!   whole folio at once);
//! - shadow entries (evicted pages' workingset entries) and folios under I/O that mincore does
//!   not report as resident;
//! - PFNs read as 0 without CAP_SYS_ADMIN: the census then fails rather than guess.
//!
//! The touch itself maps the pages (kpageflags then shows MMAP on them) and marks them
//! accessed; it does not change a folio's order.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// kpageflags bits (docs/model §30.2; include/uapi/linux/kernel-page-flags.h).
pub const KPF_LRU: u64 = 1 << 5;
pub const KPF_BUDDY: u64 = 1 << 10;
pub const KPF_COMPOUND_HEAD: u64 = 1 << 15;
pub const KPF_COMPOUND_TAIL: u64 = 1 << 16;
pub const KPF_HUGE: u64 = 1 << 17;
pub const KPF_THP: u64 = 1 << 22;

/// The largest order counted (MAX_PAGE_ORDER); a longer run of tails is counted as order 10.
pub const MAX_ORDER: usize = 10;

/// Per-PFN flags, as /proc/kpageflags gives them (`None`: unreadable PFN).
pub trait PageFlags {
    fn flags(&mut self, pfn: u64) -> Option<u64>;
}

/// /proc/kpageflags itself (root only, §30.1).
pub struct Kpageflags(File);

impl Kpageflags {
    pub fn open() -> Result<Kpageflags, String> {
        File::open("/proc/kpageflags")
            .map(Kpageflags)
            .map_err(|e| format!("/proc/kpageflags: {e}"))
    }
}

impl PageFlags for Kpageflags {
    fn flags(&mut self, pfn: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.0.read_exact_at(&mut b, pfn * 8).ok()?;
        Some(u64::from_ne_bytes(b))
    }
}

/// A fixed table of flags (fixtures and tests): PFN → flags.
impl PageFlags for BTreeMap<u64, u64> {
    fn flags(&mut self, pfn: u64) -> Option<u64> {
        self.get(&pfn).copied()
    }
}

/// The order of the folio whose head is at `head`: log2 of 1 + the run of COMPOUND_TAIL PFNs
/// after it (§30.2.1), at most [`MAX_ORDER`].
fn order_from_head(head: u64, kpf: &mut impl PageFlags) -> usize {
    let mut n = 1u64;
    while n < 1 << MAX_ORDER {
        match kpf.flags(head + n) {
            Some(f) if f & KPF_COMPOUND_TAIL != 0 && f & KPF_COMPOUND_HEAD == 0 => n += 1,
            _ => break,
        }
    }
    (n.ilog2() as usize).min(MAX_ORDER)
}

/// Folios of a file from its cached pages: `pages` are (file page index, PFN) in index order;
/// returns (pages in folios of each order, folios of each order). Each folio is counted once,
/// all of its pages with it (a large folio is cached whole).
pub fn decode(pages: &[(u64, u64)], kpf: &mut impl PageFlags) -> ([u64; 11], [u64; 11]) {
    let (mut per_order, mut folios) = ([0u64; 11], [0u64; 11]);
    // The file index the last counted folio ends at.
    let mut covered_to = 0u64;
    let mut first = true;
    for &(index, pfn) in pages {
        if !first && index < covered_to {
            continue;
        }
        first = false;
        let f = kpf.flags(pfn).unwrap_or(0);
        let (start, order) = if f & KPF_COMPOUND_HEAD != 0 {
            (index, order_from_head(pfn, kpf))
        } else if f & KPF_COMPOUND_TAIL != 0 {
            // The head is the nearest COMPOUND_HEAD PFN below (a folio is PFN-contiguous).
            let mut k = 1u64;
            while k < 1 << MAX_ORDER
                && pfn >= k
                && kpf.flags(pfn - k).is_some_and(|g| g & KPF_COMPOUND_HEAD == 0)
            {
                k += 1;
            }
            if pfn >= k && kpf.flags(pfn - k).is_some_and(|g| g & KPF_COMPOUND_HEAD != 0) {
                (index.saturating_sub(k), order_from_head(pfn - k, kpf))
            } else {
                (index, 0)
            }
        } else {
            (index, 0)
        };
        per_order[order] += 1 << order;
        folios[order] += 1;
        covered_to = start + (1u64 << order);
    }
    (per_order, folios)
}

/// The census of the file at `path` now (see the module doc). Needs root (pagemap PFNs and
/// /proc/kpageflags).
pub fn file_census(path: &Path) -> Result<([u64; 11], [u64; 11]), String> {
    let err = |what: &str, e: std::io::Error| format!("census of {}: {what}: {e}", path.display());
    let f = File::open(path).map_err(|e| err("open", e))?;
    let len = f.metadata().map_err(|e| err("stat", e))?.len() as usize;
    if len == 0 {
        return Ok(([0; 11], [0; 11]));
    }
    let npages = len.div_ceil(4096);
    let mut kpf = Kpageflags::open()?;
    let pagemap = File::open("/proc/self/pagemap").map_err(|e| err("/proc/self/pagemap", e))?;
    // SAFETY: a fresh read-only shared mapping of our open file, unmapped below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(err("mmap", std::io::Error::last_os_error()));
    }
    let r = (|| {
        // SAFETY: madvise and mincore on our own mapping of `len` bytes; `vec` has a byte per page.
        let mut vec = vec![0u8; npages];
        unsafe {
            if libc::madvise(base, len, libc::MADV_RANDOM) != 0 {
                return Err(err("madvise", std::io::Error::last_os_error()));
            }
            if libc::mincore(base, len, vec.as_mut_ptr()) != 0 {
                return Err(err("mincore", std::io::Error::last_os_error()));
            }
        }
        let mut pages = Vec::new();
        let mut entries = vec![0u8; npages * 8];
        for (i, v) in vec.iter().enumerate() {
            if v & 1 != 0 {
                // SAFETY: page i lies inside the mapping; a volatile read faults it in.
                unsafe { std::ptr::read_volatile((base as *const u8).add(i * 4096)) };
            }
        }
        let vaddr = base as u64;
        pagemap
            .read_exact_at(&mut entries, vaddr / 4096 * 8)
            .map_err(|e| err("/proc/self/pagemap", e))?;
        for (i, v) in vec.iter().enumerate() {
            if v & 1 == 0 {
                continue;
            }
            let e = u64::from_ne_bytes(entries[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            if e >> 63 & 1 == 0 {
                continue; // evicted between mincore and the touch
            }
            let pfn = e & ((1 << 55) - 1);
            if pfn == 0 {
                return Err(format!(
                    "census of {}: /proc/self/pagemap gives no PFNs (needs CAP_SYS_ADMIN)",
                    path.display()
                ));
            }
            pages.push((i as u64, pfn));
        }
        Ok(decode(&pages, &mut kpf))
    })();
    // SAFETY: unmapping the mapping made above.
    unsafe { libc::munmap(base, len) };
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(u64, u64)]) -> BTreeMap<u64, u64> {
        entries.iter().copied().collect()
    }

    /// §30.2.1: a head and its run of tails make one folio of order log2(run); bare pages are
    /// order 0; each folio counted once.
    #[test]
    fn s30_2_head_and_tails_give_the_order() {
        let h = KPF_COMPOUND_HEAD | KPF_LRU | KPF_THP;
        let t = KPF_COMPOUND_TAIL | KPF_LRU | KPF_THP;
        // File pages 0..4 an order-2 folio at PFN 100, page 4 a bare page at PFN 7, pages
        // 6..8 an order-1 folio at PFN 200 (page 5 not cached).
        let mut k = table(&[
            (100, h),
            (101, t),
            (102, t),
            (103, t),
            (104, h), // another folio's head right after: ends the run
            (7, KPF_LRU),
            (200, h),
            (201, t),
        ]);
        let pages = [(0, 100), (1, 101), (2, 102), (3, 103), (4, 7), (6, 200), (7, 201)];
        let (p, f) = decode(&pages, &mut k);
        assert_eq!(p[..3], [1, 2, 4]);
        assert_eq!(f[..3], [1, 1, 1]);
        assert_eq!(p.iter().sum::<u64>(), 7);
    }

    /// A tail seen before its head (the census starts mid-folio) is traced back to the head.
    #[test]
    fn s30_2_a_tail_finds_its_head() {
        let h = KPF_COMPOUND_HEAD | KPF_LRU;
        let t = KPF_COMPOUND_TAIL | KPF_LRU;
        let mut k = table(&[(512, h), (513, t), (514, t), (515, t)]);
        let (p, f) = decode(&[(2, 514), (3, 515)], &mut k);
        assert_eq!((p[2], f[2]), (4, 1));
    }
}
