//! One byte per pfn: what /proc/kpageflags (and /proc/kpagecount) say a page is, in the terms the
//! reconstruction needs (docs/model §30.2, §30.5 item 3).
//!
//! ```text
//! bits 0..=3  class (PageClass)
//! bit  4      TAIL         KPF_COMPOUND_TAIL: a tail page of a large folio; its head is the
//!                          nearest lower pfn without TAIL, and the run of tails gives the order
//! bit  5      ACTIVE       KPF_ACTIVE
//! bit  6      REFERENCED   KPF_REFERENCED
//! bit  7      UNEVICTABLE  KPF_UNEVICTABLE or KPF_MLOCKED
//! ```
//!
//! A free page (class Free) keeps one bit: [`REPORTED`] (bit 5), KPF_UPTODATE. Linux 6.18
//! aliases PG_reported to PG_uptodate on buddy pages (include/linux/page-flags.h), and freeing a
//! page clears every flag it had (`free_pages_prepare`), so KPF_UPTODATE on a free page is
//! free page reporting's mark: the chunk's head was reported to the hypervisor (§32.3).
//!
//! DIRTY and WRITEBACK of page-cache pages go to the snapshot's dirty bitmap ([`is_dirty`],
//! `Snapshot::dirty`). What is dropped (a documented simplification): LOCKED, IDLE, MMAP and the
//! map count; SWAPCACHE and KSM; dirty state of anon pages; which file a page-cache page belongs
//! to (kpageflags does not say).

/// kpageflags bits (include/uapi/linux/kernel-page-flags.h; kernel-internal bits from 32 on,
/// fs/proc/page.c). §30.2.
pub mod kpf {
    pub const LOCKED: u64 = 1 << 0;
    pub const REFERENCED: u64 = 1 << 2;
    pub const UPTODATE: u64 = 1 << 3;
    pub const DIRTY: u64 = 1 << 4;
    pub const LRU: u64 = 1 << 5;
    pub const ACTIVE: u64 = 1 << 6;
    pub const SLAB: u64 = 1 << 7;
    pub const WRITEBACK: u64 = 1 << 8;
    pub const RECLAIM: u64 = 1 << 9;
    pub const BUDDY: u64 = 1 << 10;
    pub const MMAP: u64 = 1 << 11;
    pub const ANON: u64 = 1 << 12;
    pub const SWAPCACHE: u64 = 1 << 13;
    pub const SWAPBACKED: u64 = 1 << 14;
    pub const COMPOUND_HEAD: u64 = 1 << 15;
    pub const COMPOUND_TAIL: u64 = 1 << 16;
    pub const HUGE: u64 = 1 << 17;
    pub const UNEVICTABLE: u64 = 1 << 18;
    pub const HWPOISON: u64 = 1 << 19;
    pub const NOPAGE: u64 = 1 << 20;
    pub const KSM: u64 = 1 << 21;
    pub const THP: u64 = 1 << 22;
    pub const OFFLINE: u64 = 1 << 23;
    pub const ZERO_PAGE: u64 = 1 << 24;
    pub const IDLE: u64 = 1 << 25;
    pub const PGTABLE: u64 = 1 << 26;
    pub const RESERVED: u64 = 1 << 32;
    pub const MLOCKED: u64 = 1 << 33;
    pub const PRIVATE: u64 = 1 << 35;
}

/// What a page is (bits 0..=3 of its byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PageClass {
    /// No memmap here (kpageflags 0 outside the machine's System RAM ranges, §30.2.4).
    Hole = 0,
    /// PG_reserved: memblock-reserved (firmware, the kernel image, memmap) or a driver's page;
    /// also the zero page.
    Reserved = 1,
    /// Part of a free buddy chunk (BUDDY, §30.2.2).
    Free = 2,
    /// An anonymous page (ANON, not SLAB).
    Anon = 3,
    /// A page-cache page (LRU or page-cache bits without ANON or SWAPBACKED).
    File = 4,
    /// A shmem/tmpfs page (SWAPBACKED without ANON).
    Shmem = 5,
    /// A slab page (SLAB; the reused ANON/KSM/MMAP bits are ignored, §30.2.5).
    Slab = 6,
    /// A page table (PGTABLE).
    PageTable = 7,
    /// A hugetlb page, in use or in the pool (HUGE).
    Hugetlb = 8,
    /// Offline, e.g. taken by a balloon driver (OFFLINE).
    Offline = 9,
    /// Allocated by the kernel with some flags but none of the above (buffers, vmalloc, ...).
    Kernel = 10,
    /// In System RAM but no flag at all (§30.2.3): a kernel allocation without flags, a free
    /// page on a PCP list, a chunk held by free page reporting or compaction's free scanner.
    Unflagged = 11,
}

impl PageClass {
    pub const ALL: [PageClass; 12] = [
        PageClass::Hole,
        PageClass::Reserved,
        PageClass::Free,
        PageClass::Anon,
        PageClass::File,
        PageClass::Shmem,
        PageClass::Slab,
        PageClass::PageTable,
        PageClass::Hugetlb,
        PageClass::Offline,
        PageClass::Kernel,
        PageClass::Unflagged,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PageClass::Hole => "hole",
            PageClass::Reserved => "reserved",
            PageClass::Free => "free",
            PageClass::Anon => "anon",
            PageClass::File => "file",
            PageClass::Shmem => "shmem",
            PageClass::Slab => "slab",
            PageClass::PageTable => "pagetable",
            PageClass::Hugetlb => "hugetlb",
            PageClass::Offline => "offline",
            PageClass::Kernel => "kernel",
            PageClass::Unflagged => "unflagged",
        }
    }

    /// The class in bits 0..=3 of a page byte; `None` for the unused values 12..=15 (a corrupt
    /// file).
    pub fn of(byte: u8) -> Option<PageClass> {
        PageClass::ALL.get((byte & CLASS_MASK) as usize).copied()
    }
}

pub const CLASS_MASK: u8 = 0x0f;
pub const TAIL: u8 = 1 << 4;
pub const ACTIVE: u8 = 1 << 5;
pub const REFERENCED: u8 = 1 << 6;
pub const UNEVICTABLE: u8 = 1 << 7;
/// On a free page: PG_reported (KPF_UPTODATE, module doc). The same bit as [`ACTIVE`], which a
/// free page never has.
pub const REPORTED: u8 = 1 << 5;

/// The byte of a page with kpageflags `flags` (§30.2, §30.5 item 3). `in_ram`: the pfn lies in
/// a System RAM range, so a 0 means "no flags" rather than "no memmap".
pub fn classify(flags: u64, in_ram: bool) -> u8 {
    use kpf::*;
    let class = if flags == 0 || flags == NOPAGE {
        if in_ram {
            PageClass::Unflagged
        } else {
            PageClass::Hole
        }
    } else if flags & BUDDY != 0 {
        PageClass::Free
    } else if flags & HUGE != 0 {
        PageClass::Hugetlb
    } else if flags & SLAB != 0 {
        PageClass::Slab
    } else if flags & PGTABLE != 0 {
        PageClass::PageTable
    } else if flags & OFFLINE != 0 {
        PageClass::Offline
    } else if flags & (RESERVED | ZERO_PAGE) != 0 {
        PageClass::Reserved
    } else if flags & ANON != 0 {
        PageClass::Anon
    } else if flags & SWAPBACKED != 0 {
        PageClass::Shmem
    } else if flags & (LRU | MMAP | UPTODATE | DIRTY | WRITEBACK | UNEVICTABLE) != 0 {
        PageClass::File
    } else {
        PageClass::Kernel
    };
    let mut b = class as u8;
    if class == PageClass::Free {
        // Other bits on free pages are stale (§30.2.5), but for PG_reported (module doc).
        if flags & UPTODATE != 0 {
            b |= self::REPORTED;
        }
        return b;
    }
    if class == PageClass::Hole || class == PageClass::Unflagged {
        return b;
    }
    if flags & COMPOUND_TAIL != 0 {
        b |= self::TAIL;
    }
    if flags & ACTIVE != 0 {
        b |= self::ACTIVE;
    }
    if flags & REFERENCED != 0 {
        b |= self::REFERENCED;
    }
    if flags & (UNEVICTABLE | MLOCKED) != 0 && class != PageClass::Slab {
        b |= self::UNEVICTABLE;
    }
    b
}

/// Whether a page with kpageflags `flags` and byte `byte` goes into the snapshot's dirty
/// bitmap: a page-cache page (File or Shmem) with PG_dirty or PG_writeback. Migration treats
/// both specially (§25.1: a dirty ext4 folio's buffers block its split, a folio under writeback
/// waits or fails), which the page byte cannot say.
pub fn is_dirty(flags: u64, byte: u8) -> bool {
    matches!(PageClass::of(byte), Some(PageClass::File | PageClass::Shmem))
        && flags & (kpf::DIRTY | kpf::WRITEBACK) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_30_2_classes() {
        use kpf::*;
        assert_eq!(classify(0, false), PageClass::Hole as u8);
        assert_eq!(classify(0, true), PageClass::Unflagged as u8);
        assert_eq!(classify(BUDDY, true), PageClass::Free as u8);
        // A reported free page (PG_reported = PG_uptodate on buddy pages); only that bit.
        assert_eq!(
            classify(BUDDY | UPTODATE | REFERENCED | ACTIVE, true),
            PageClass::Free as u8 | super::REPORTED
        );
        assert_eq!(
            PageClass::of(PageClass::Free as u8 | super::REPORTED),
            Some(PageClass::Free)
        );
        // SLAB pages show reused ANON and KSM bits (§30.2.5).
        assert_eq!(classify(SLAB | ANON | KSM, true), PageClass::Slab as u8);
        assert_eq!(
            classify(LRU | ANON | SWAPBACKED | COMPOUND_TAIL | THP | ACTIVE, true),
            PageClass::Anon as u8 | super::TAIL | super::ACTIVE
        );
        assert_eq!(
            classify(LRU | UPTODATE | REFERENCED, true),
            PageClass::File as u8 | super::REFERENCED
        );
        assert_eq!(
            classify(LRU | SWAPBACKED | UPTODATE, true),
            PageClass::Shmem as u8
        );
        assert_eq!(classify(RESERVED, true), PageClass::Reserved as u8);
        assert_eq!(classify(PGTABLE, true), PageClass::PageTable as u8);
        assert_eq!(classify(HUGE | COMPOUND_HEAD, true), PageClass::Hugetlb as u8);
        assert_eq!(classify(PRIVATE, true), PageClass::Kernel as u8);
        assert_eq!(
            classify(LRU | ANON | MLOCKED | UNEVICTABLE, true),
            PageClass::Anon as u8 | super::UNEVICTABLE
        );
    }
}
