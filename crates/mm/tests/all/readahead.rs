//! Readahead window sizing and the large-folio order ramp (docs/model §23, §12.2):
//! the §23.6 table rows, the per-request ceiling `io_pages` (§23.2), the synchronous and
//! asynchronous rules (§23.3, §23.4), `page_cache_ra_order`'s clamp and first error (§23.5),
//! and the other entry points (faults, forced readahead).

use crate::common;

use common::*;
use fraglab_mm::filemap::{FileVma, Mapping, ReadaheadState};
use fraglab_mm::Mm;

/// A machine of `mib` MiB (one DMA32 zone) with a large-folio (ext4-like) mapping.
fn machine(mib: u32) -> (Mm, u32) {
    let mut mm = dma32(mib / 2, 1, tun_kb(1024));
    let f = mm.add_mapping(Mapping::large_folios());
    (mm, f)
}

fn ra(ra_pages: u64, io_pages: u64) -> ReadaheadState {
    ReadaheadState {
        ra_pages,
        io_pages,
        ..Default::default()
    }
}

/// Reads the whole file sequentially with `req`-page read(2) calls; returns the folios of the
/// mapping per order.
fn read_sequentially(mm: &mut Mm, f: u32, ra: &mut ReadaheadState, req: u64, file: u64) -> [u64; 11] {
    let mut pos = 0;
    while pos < file {
        let st = mm.filemap_read(0, f, ra, pos, req, file);
        assert_eq!(st.failed_pages, 0, "at {pos}: {st:?}");
        pos += req;
    }
    let (pages, folios) = mm.filemap_census(f);
    assert_eq!(pages.iter().sum::<u64>(), file);
    folios
}

/// The first `n` windows (start, size, order) of `req`-page sequential reads, as
/// `page_cache_ra_order` saw them.
fn windows(
    mm: &mut Mm,
    f: u32,
    ra: &mut ReadaheadState,
    req: u64,
    file: u64,
    n: usize,
) -> Vec<(u64, u64, u32)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < file && out.len() < n {
        let st = mm.filemap_read(0, f, ra, pos, req, file);
        out.extend(st.windows);
        pos += req;
    }
    out.truncate(n);
    out
}

/// §23.6, S2's row (read_ahead_kb 8192, 128 KiB reads of a 256 MiB ext4 file): 128×o0, 64×o2,
/// 32×o4, 16×o6, 1×o7, 8×o8, 120×o9 — 93.75 % of the pages in order 9 (traced on S2).
#[test]
fn section_23_6_ra_8192_128k_reads_of_256mib() {
    let (mut mm, f) = machine(512);
    let mut ra = ra(2048, 1024);
    let folios = read_sequentially(&mut mm, f, &mut ra, 32, 65536);
    assert_eq!(folios, [128, 0, 64, 0, 32, 0, 16, 1, 8, 120, 0]);
    assert_eq!(120 * 512 * 10000 / 65536, 9375);
    check(&mm);
}

/// §23.6: the windows of that row until steady: (0,128,0) (128,256,2) (384,512,4)
/// (896,1024,6) (1920,1920,8) (3840,1280,9) (5120,1024,9) (6144,2048,9).
#[test]
fn section_23_6_ra_8192_128k_windows() {
    let (mut mm, f) = machine(128);
    let mut ra = ra(2048, 1024);
    let w = windows(&mut mm, f, &mut ra, 32, 16384, 8);
    assert_eq!(
        w,
        [
            (0, 128, 0),
            (128, 256, 2),
            (384, 512, 4),
            (896, 1024, 6),
            (1920, 1920, 8),
            (3840, 1280, 9),
            (5120, 1024, 9),
            (6144, 2048, 9)
        ]
    );
}

/// §23.6: the same reads of a 1 GiB file: 98.4 % of the pages in order 9.
#[test]
fn section_23_6_ra_8192_128k_reads_of_1gib() {
    let (mut mm, f) = machine(1400);
    let mut ra = ra(2048, 1024);
    let file = 262_144;
    let folios = read_sequentially(&mut mm, f, &mut ra, 32, file);
    let o9 = folios[9] * 512 * 1000 / file;
    assert_eq!(o9, 984, "{folios:?}");
}

/// §23.6: 1 MiB reads with read_ahead_kb 8192: (0,512,0) (512,1024,2) (1536,2048,4)
/// (3584,2048,6) (5632,2048,8) (7680,1536,9).
#[test]
fn section_23_6_ra_8192_1m_windows() {
    let (mut mm, f) = machine(128);
    let mut ra = ra(2048, 1024);
    let w = windows(&mut mm, f, &mut ra, 256, 16384, 6);
    assert_eq!(
        w,
        [
            (0, 512, 0),
            (512, 1024, 2),
            (1536, 2048, 4),
            (3584, 2048, 6),
            (5632, 2048, 8),
            (7680, 1536, 9)
        ]
    );
}

/// §23.6 and §23.5 item 2: read_ahead_kb 128 with 128 KiB reads: (0,32,0) (32,32,2)
/// (64,32,4) (96,32,5), then one order-5 folio per 32-page window forever (ilog2(32) caps the
/// order), and `ra.order` keeps the clamped 5.
#[test]
fn section_23_6_ra_128_128k_reads_one_order_5_folio_per_window() {
    let (mut mm, f) = machine(64);
    let mut ra = ra(32, 32);
    let w = windows(&mut mm, f, &mut ra, 32, 4096, 6);
    assert_eq!(
        w,
        [
            (0, 32, 0),
            (32, 32, 2),
            (64, 32, 4),
            (96, 32, 5),
            (128, 32, 5),
            (160, 32, 5)
        ]
    );
    assert_eq!(ra.order, 5, "ra.order keeps the clamped order");
    let folios = read_sequentially(&mut mm, f, &mut ra, 32, 4096);
    // 32 order-0, 8 order-2, 2 order-4 folios, then 125 order-5 ones.
    assert_eq!(folios, [32, 0, 8, 0, 2, 125, 0, 0, 0, 0, 0]);
}

/// §23.2 and §23.6: read_ahead_kb 128 with 1 MiB reads and io_pages ≥ 256: the request
/// raises the ceiling to min(req, io_pages) = 256, so 256-page windows with orders 0, 2, 4, 6,
/// 8, then one order-8 folio per window. With io_pages 32 (the bdi default) the ceiling stays 32.
#[test]
fn section_23_2_io_pages_raise_the_window_of_large_reads() {
    let (mut mm, f) = machine(128);
    let mut r = ra(32, 256);
    let w = windows(&mut mm, f, &mut r, 256, 16384, 7);
    assert_eq!(
        w,
        [
            (0, 256, 0),
            (256, 256, 2),
            (512, 256, 4),
            (768, 256, 6),
            (1024, 256, 8),
            (1280, 256, 8),
            (1536, 256, 8)
        ]
    );
    assert_eq!(r.order, 8);
    assert_eq!(r.max_pages(256), 256);
    assert_eq!(r.max_pages(128), 128);
    assert_eq!(r.max_pages(1024), 256);
    assert_eq!(r.max_pages(16), 32);
    // io_pages not above ra_pages: no exception.
    let r2 = ra(2048, 1024);
    assert_eq!(r2.max_pages(4096), 2048);
    let (mut mm, g) = machine(128);
    let mut r3 = ra(32, 32);
    let w = windows(&mut mm, g, &mut r3, 256, 4096, 1);
    assert_eq!(w[0].1 % 32, 0);
    assert!(
        mm.filemap_census(g).1[8] == 0,
        "no order 8 with a 32-page ceiling"
    );
}

/// §23.2 and §23.6: forced readahead (POSIX_FADV_WILLNEED, readahead(2)) reads
/// min(request, max(io_pages, ra_pages)) pages at min order, no mark, the state untouched.
#[test]
fn section_23_6_willneed_caps_at_io_pages_at_order_0() {
    let (mut mm, f) = machine(64);
    let r = ra(32, 1024);
    let st = mm.force_page_cache_ra(0, f, &r, 0, 4096, 4096);
    assert_eq!(st.added[0], 1024, "{st:?}");
    assert_eq!(st.added[1..].iter().sum::<u64>(), 0);
    assert_eq!(r, ra(32, 1024));
    let (pages, _) = mm.filemap_census(f);
    assert_eq!(pages[0], 1024);
    for i in 0..1024 {
        let id = mm.filemap_lookup(f, i).unwrap();
        assert!(!mm.folios.get(id).readahead_mark());
    }
}

/// §23.3 item 3 and 4: a miss right after the previous read (index − prev_index ≤ 1) starts
/// a window of init size; a miss elsewhere with no cached history reads only the request at
/// min order and leaves the state untouched; with more cached pages behind it than the
/// request (the file cached from page 0: doubled) it is a stream of min(contig + req, max)
/// pages and async size 1.
#[test]
fn section_23_3_sequential_start_and_history_probe() {
    let (mut mm, f) = machine(64);
    let mut r = ra(2048, 1024);
    // Start of file: init(8, 2048) = 32, async 24.
    mm.filemap_read(0, f, &mut r, 0, 8, 1 << 16);
    assert_eq!((r.start, r.size, r.async_size, r.order), (0, 32, 24, 0));
    // A random miss far away with nothing before it: the request only, state untouched.
    let st = mm.filemap_read(0, f, &mut r, 10_000, 4, 1 << 16);
    assert_eq!(st.added[0], 4);
    assert_eq!((r.start, r.size, r.async_size), (0, 32, 24));
    assert!(mm.filemap_lookup(f, 10_004).is_none());
    // prev_index is now 10_003: a miss at 10_004 is sequential: init(4, 2048) = 16, async 12.
    mm.filemap_read(0, f, &mut r, 10_004, 4, 1 << 16);
    assert_eq!((r.start, r.size, r.async_size), (10_004, 16, 12));
    // History: a fresh reader at page 32 (cached 0..31 behind it, from page 0): a stream of
    // min(2·32 + 4, 2048) = 68 pages, async size 1.
    let mut fresh = ra(2048, 1024);
    fresh.prev_index = 5000;
    mm.filemap_read(0, f, &mut fresh, 32, 4, 1 << 16);
    assert_eq!((fresh.start, fresh.size, fresh.async_size), (32, 68, 1));
}

/// §23.4 item 3: a marked folio hit that is not the expected one (another reader's window):
/// the window starts at the next uncached page within max, size get_next_ra_size(gap + req),
/// order +2.
#[test]
fn section_23_4_unexpected_mark_hit_starts_at_the_next_miss() {
    let (mut mm, f) = machine(64);
    let mut a = ra(32, 32);
    // init(16, 32) = 32, async 16: the mark on page 16.
    mm.filemap_read(0, f, &mut a, 0, 16, 4096);
    assert_eq!((a.start, a.size, a.async_size), (0, 32, 16));
    // Another open file reads page 16: not its expected index (its state is empty).
    let mut b = ra(32, 32);
    b.prev_index = 15;
    let st = mm.filemap_read(0, f, &mut b, 16, 1, 4096);
    assert_eq!(st.async_ra, 1);
    // next miss 32; size = next(32 − 16 + 1 = 17, 32) = 32; order 2.
    assert_eq!((b.start, b.size, b.async_size, b.order), (32, 32, 32, 2));
    assert_eq!(st.added[2], 8, "{st:?}");
    assert!(mm.filemap_lookup(f, 63).is_some() && mm.filemap_lookup(f, 64).is_none());
}

/// §23.4 item 6 and §23.8: each async window carries the mark on its first folio, and the
/// next window is read when the reader reaches it.
#[test]
fn section_23_4_mark_on_the_first_folio_of_each_async_window() {
    let (mut mm, f) = machine(128);
    let mut r = ra(2048, 1024);
    mm.filemap_read(0, f, &mut r, 0, 32, 16384);
    // (0,128,0): mark at 128 − 96 = 32.
    assert!(mm.folios.get(mm.filemap_lookup(f, 32).unwrap()).readahead_mark());
    mm.filemap_read(0, f, &mut r, 32, 32, 16384);
    // (128,256,2): mark on its first folio.
    assert_eq!((r.start, r.size, r.async_size), (128, 256, 256));
    let id = mm.filemap_lookup(f, 128).unwrap();
    assert!(mm.folios.get(id).readahead_mark());
    assert_eq!(mm.folios.get(id).order, 2);
    for i in 132..384 {
        assert!(
            !mm.folios.get(mm.filemap_lookup(f, i).unwrap()).readahead_mark(),
            "page {i}"
        );
    }
}

/// §23.5 item 4: the first error (here −EEXIST: a page of the next window is cached already)
/// ends the window's large folios — the rest is read at order 0 — and `ra.order` is kept, so
/// the following window asks for two orders more.
#[test]
fn section_23_5_first_error_finishes_at_order_0_and_keeps_the_order() {
    let (mut mm, f) = machine(128);
    let mut r = ra(2048, 1024);
    // Page 600 cached on its own (a random-access fault).
    let rand = FileVma {
        rand_read: true,
        ..FileVma::default()
    };
    mm.filemap_fault(0, f, &mut ra(2048, 1024), rand, 600, 16384);
    let w = windows(&mut mm, f, &mut r, 32, 16384, 4);
    assert_eq!(w[2].0, 384);
    // (384,512,4): order-4 folios 384..591, then 592..895 at order 0 (600 was there).
    for i in (384..592).step_by(16) {
        assert_eq!(
            mm.folios.get(mm.filemap_lookup(f, i).unwrap()).order,
            4,
            "page {i}"
        );
    }
    for i in 592..896 {
        assert_eq!(
            mm.folios.get(mm.filemap_lookup(f, i).unwrap()).order,
            0,
            "page {i}"
        );
    }
    // The mark (first folio of the window, page 384) was set before the error.
    // The next window: order 4 + 2 = 6.
    assert_eq!(w[3], (896, 1024, 6));
}

/// §23.6, plain mmap read-around on S2's device: 2048 × order 0, then 512 × o2, 128 × o4,
/// 32 × o6, 8 × o8, then order 9 (V-live on vda).
#[test]
fn section_23_6_mmap_read_around_then_the_ramp() {
    let (mut mm, f) = machine(128);
    let mut r = ra(2048, 1024);
    let file = 16384;
    for p in 0..file {
        mm.filemap_fault(0, f, &mut r, FileVma::default(), p, file);
    }
    let (_, folios) = mm.filemap_census(f);
    assert_eq!(folios, [2048, 0, 512, 0, 128, 0, 32, 0, 8, 12, 0]);
}

/// §23.6, MADV_HUGEPAGE on a file VMA: a 256 MiB file read through the mapping gives 128
/// folios, all order 9 (V-live on S2).
#[test]
fn section_23_6_madv_hugepage_reads_order_9() {
    let (mut mm, f) = machine(512);
    let mut r = ra(2048, 1024);
    let vma = FileVma {
        hugepage: true,
        ..FileVma::default()
    };
    let file = 65536;
    for p in 0..file {
        mm.filemap_fault(0, f, &mut r, vma, p, file);
    }
    let (_, folios) = mm.filemap_census(f);
    assert_eq!(folios, [0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0]);
}

/// §23.7: which regular files get large folios in 6.18, and their order range.
#[test]
fn section_23_7_large_folio_filesystems() {
    for bs in [1024, 2048, 4096] {
        let m = Mapping::ext4(bs, false);
        assert_eq!((m.min_order, m.max_order), (0, 9), "ext4 {bs}");
        assert!(!m.nofs());
    }
    assert!(
        !Mapping::ext4(4096, true).large_folio_support(),
        "ext4 data=journal"
    );
    assert_eq!(
        (Mapping::xfs(4096).min_order, Mapping::xfs(4096).max_order),
        (0, 9)
    );
    assert_eq!(
        Mapping::xfs(16384).min_order,
        2,
        "XFS block size above the page size"
    );
    assert!(Mapping::xfs(4096).nofs());
    assert!(!Mapping::btrfs().large_folio_support());
    assert!(
        !Mapping::tmpfs(true).large_folio_support(),
        "huge=never, the default"
    );
    assert_eq!(Mapping::tmpfs(false).max_order, 9);
    // A data=journal ext4 file reads the S2 row at order 0 only.
    let mut mm = dma32(64, 1, tun_kb(1024));
    let f = mm.add_mapping(Mapping::ext4(4096, true));
    let mut r = ra(2048, 1024);
    let folios = read_sequentially(&mut mm, f, &mut r, 32, 8192);
    assert_eq!(folios[0], 8192);
    assert_eq!(r.order, 0);
}
