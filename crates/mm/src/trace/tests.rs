use super::*;
use crate::gfp::Gfp;
use proptest::prelude::*;

/// (raw gfp value, text) pairs captured on the live S2 kernel (6.18.44): the same trace
/// buffer of a private tracefs instance read once normally and once with `options/fields`,
/// which prints the raw `gfp_flags` field of each mm_page_alloc entry.
const LIVE_GFP: &[(u32, &str)] = &[
    (0xcc0, "GFP_KERNEL"),
    (0x2800, "GFP_NOWAIT"),
    (0x40c40, "GFP_NOFS|__GFP_COMP"),
    (0x40c48, "GFP_NOFS|__GFP_MOVABLE|__GFP_COMP"),
    (0x42800, "GFP_NOWAIT|__GFP_COMP"),
    (0x52810, "GFP_NOWAIT|__GFP_RECLAIMABLE|__GFP_NORETRY|__GFP_COMP"),
    (0x52820, "GFP_ATOMIC|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP"),
    (
        0x52830,
        "GFP_ATOMIC|__GFP_RECLAIMABLE|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP",
    ),
    (0x528c0, "GFP_NOWAIT|__GFP_IO|__GFP_FS|__GFP_NORETRY|__GFP_COMP"),
    (0x52c40, "GFP_NOFS|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP"),
    (
        0x52c50,
        "GFP_NOFS|__GFP_RECLAIMABLE|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP",
    ),
    (0x52cc0, "GFP_KERNEL|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP"),
    (
        0x52cd0,
        "GFP_KERNEL|__GFP_RECLAIMABLE|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP",
    ),
    (
        0xd2050,
        "__GFP_RECLAIMABLE|__GFP_IO|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP|__GFP_NOMEMALLOC",
    ),
    (
        0xd20c0,
        "__GFP_IO|__GFP_FS|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP|__GFP_NOMEMALLOC",
    ),
    (0x140cca, "GFP_HIGHUSER_MOVABLE|__GFP_COMP"),
    (0x140dca, "GFP_HIGHUSER_MOVABLE|__GFP_ZERO|__GFP_COMP"),
    (0x141cca, "GFP_HIGHUSER_MOVABLE|__GFP_WRITE|__GFP_COMP"),
    (0x148c40, "GFP_NOFS|__GFP_NOFAIL|__GFP_COMP|__GFP_HARDWALL"),
    (
        0x148c48,
        "GFP_NOFS|__GFP_MOVABLE|__GFP_NOFAIL|__GFP_COMP|__GFP_HARDWALL",
    ),
    (
        0x152c4a,
        "GFP_NOFS|__GFP_HIGHMEM|__GFP_MOVABLE|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP|__GFP_HARDWALL",
    ),
    (
        0x153cca,
        "GFP_HIGHUSER_MOVABLE|__GFP_WRITE|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP",
    ),
    (0x3d24ca, "GFP_TRANSHUGE|__GFP_NORETRY|__GFP_THISNODE"),
    (0x440dc0, "GFP_KERNEL_ACCOUNT|__GFP_ZERO|__GFP_COMP"),
    (0x500cc2, "GFP_HIGHUSER|__GFP_ACCOUNT"),
];

#[test]
fn show_gfp_flags_matches_live_kernel() {
    for &(raw, text) in LIVE_GFP {
        assert_eq!(show_gfp_flags(Gfp(raw)), text, "raw {raw:#x}");
        assert_eq!(parse_gfp_flags(text), Some(Gfp(raw)), "{text}");
    }
}

#[test]
fn show_gfp_flags_by_the_table() {
    // Not seen live (GFP_TRANSHUGE_LIGHT needs THP defrag=never or enabled=always, which we
    // did not change on the shared machine); these follow from the table order.
    let g = |v| show_gfp_flags(Gfp(v));
    assert_eq!(show_gfp_flags(Gfp::GFP_TRANSHUGE), "GFP_TRANSHUGE");
    assert_eq!(show_gfp_flags(Gfp::GFP_TRANSHUGE_LIGHT), "GFP_TRANSHUGE_LIGHT");
    assert_eq!(
        show_gfp_flags(Gfp::GFP_TRANSHUGE_LIGHT.union(Gfp::KSWAPD_RECLAIM)),
        "GFP_TRANSHUGE_LIGHT|__GFP_KSWAPD_RECLAIM"
    );
    assert_eq!(show_gfp_flags(Gfp::GFP_HIGHUSER_MOVABLE), "GFP_HIGHUSER_MOVABLE");
    assert_eq!(show_gfp_flags(Gfp::GFP_ATOMIC), "GFP_ATOMIC");
    assert_eq!(
        show_gfp_flags(Gfp::GFP_KERNEL.union(Gfp::ZERO)),
        "GFP_KERNEL|__GFP_ZERO"
    );
    assert_eq!(show_gfp_flags(Gfp::GFP_USER), "GFP_USER");
    assert_eq!(show_gfp_flags(Gfp::GFP_NOIO), "GFP_NOIO"); // never __GFP_RECLAIM
    assert_eq!(show_gfp_flags(Gfp::DIRECT_RECLAIM), "__GFP_DIRECT_RECLAIM");
    assert_eq!(show_gfp_flags(Gfp::DMA), "GFP_DMA");
    assert_eq!(
        show_gfp_flags(Gfp::GFP_KERNEL.union(Gfp::DMA32)),
        "GFP_KERNEL|GFP_DMA32"
    );
    assert_eq!(g(0), "none");
    assert_eq!(g(0x200), "0x200"); // the unused bit
    assert_eq!(g(0xcc0 | 0x200), "GFP_KERNEL|0x200");
    assert_eq!(g(1 << 24), "__GFP_NO_OBJ_EXT");
    assert_eq!(g(0xcc0 | 3 << 25), "GFP_KERNEL|0x6000000");
    assert_eq!(
        parse_gfp_flags("GFP_KERNEL|0x6000000"),
        Some(Gfp(0xcc0 | 3 << 25))
    );
    assert_eq!(parse_gfp_flags("none"), Some(Gfp(0)));
    assert_eq!(parse_gfp_flags("GFP_KERNAL"), None);
    assert_eq!(parse_gfp_flags("GFP_KERNEL|"), None);
}

fn rec(ts_ns: u64, cpu: u32, pid: u32, comm: &str, flags: &str, event: TraceEvent) -> TraceRecord {
    TraceRecord::new(ts_ns, cpu, pid, event)
        .with_comm(comm)
        .with_flags(LatFlags::parse(flags).unwrap())
}

fn line(r: &TraceRecord) -> String {
    let mut s = String::new();
    r.render(&mut s);
    s
}

/// Replaces the `page=` value, for comparing with hashed live lines.
fn unhash(live: &str, pfn: Option<u32>) -> String {
    let start = live.find("page=").unwrap() + 5;
    let end = start + live[start..].find(' ').unwrap();
    let page = pfn.map_or(0, page_address);
    format!("{}{page:016x}{}\n", &live[..start], &live[end..])
}

#[test]
fn mm_page_alloc_line() {
    // Live, with options/hash-ptr off (raw struct page addresses): byte-identical.
    let live = "             cat-9949    [001] .....   925.748974: mm_page_alloc: \
                    page=ffffea000411b340 pfn=0x1046cd order=0 migratetype=0 gfp_flags=GFP_KERNEL";
    let r = rec(
        925_748_974_000,
        1,
        9949,
        "cat",
        ".....",
        TraceEvent::MmPageAlloc {
            pfn: Some(0x1046cd),
            order: 0,
            gfp: Gfp::GFP_KERNEL,
            migratetype: 0,
        },
    );
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));

    let live = "             cat-9949    [001] ...1.   925.747784: mm_page_alloc: \
                    page=ffffea0004bf6280 pfn=0x12fd8a order=0 migratetype=0 gfp_flags=GFP_NOWAIT";
    let r = rec(
        925_747_784_000,
        1,
        9949,
        "cat",
        "...1.",
        TraceEvent::MmPageAlloc {
            pfn: Some(0x12fd8a),
            order: 0,
            gfp: Gfp::GFP_NOWAIT,
            migratetype: 0,
        },
    );
    assert_eq!(line(&r), format!("{live}\n"));

    // Live, hashed: a comm with a space, order 8.
    let live = "      lto cgu.00-9125    [001] .....   863.541908: mm_page_alloc: \
                    page=00000000744d9541 pfn=0x167900 order=8 migratetype=1 \
                    gfp_flags=GFP_HIGHUSER_MOVABLE|__GFP_WRITE|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP";
    let r = rec(
        863_541_908_000,
        1,
        9125,
        "lto cgu.00",
        ".....",
        TraceEvent::MmPageAlloc {
            pfn: Some(0x167900),
            order: 8,
            gfp: Gfp(0x153cca),
            migratetype: 1,
        },
    );
    assert_eq!(line(&r), unhash(live, Some(0x167900)));
    assert_eq!(parse_trace_line(live), Some(r));

    // Live, hashed: THP fault, softirq with BHs off.
    let live = "         python3-9140    [000] .....   863.488540: mm_page_alloc: \
                    page=00000000727c5f37 pfn=0x161c00 order=9 migratetype=1 \
                    gfp_flags=GFP_TRANSHUGE|__GFP_NORETRY|__GFP_THISNODE";
    let thp = Gfp::GFP_TRANSHUGE.union(Gfp::NORETRY).union(Gfp::THISNODE);
    let r = rec(
        863_488_540_000,
        0,
        9140,
        "python3",
        ".....",
        TraceEvent::MmPageAlloc {
            pfn: Some(0x161c00),
            order: 9,
            gfp: thp,
            migratetype: 1,
        },
    );
    assert_eq!(parse_trace_line(live), Some(r));
    let live = "         python3-8369    [001] b.s1.   826.083113: mm_page_alloc: \
                    page=000000000050a82b pfn=0x102eef order=0 migratetype=0 \
                    gfp_flags=GFP_ATOMIC|__GFP_NOWARN|__GFP_NORETRY|__GFP_COMP";
    let r = parse_trace_line(live).unwrap();
    assert_eq!(
        r.flags,
        LatFlags {
            irqs_off: 'b',
            need_resched: '.',
            hardsoft_irq: 's',
            preempt_depth: 1,
            migrate_disable: 0
        }
    );
    assert_eq!(line(&r), unhash(live, Some(0x102eef)));

    // Failed allocation: NULL %p prints as zeros (lib/vsprintf.c, checked live via kfree).
    let r = rec(
        12_345_678_000,
        0,
        4321,
        "stress",
        ".....",
        TraceEvent::MmPageAlloc {
            pfn: None,
            order: 10,
            gfp: Gfp::GFP_KERNEL.union(Gfp::COMP),
            migratetype: 0,
        },
    );
    let want = "          stress-4321    [000] .....    12.345678: mm_page_alloc: \
                    page=0000000000000000 pfn=0x0 order=10 migratetype=0 \
                    gfp_flags=GFP_KERNEL|__GFP_COMP\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r.clone()));
    let old = want.replace("page=0000000000000000", "page=(null)");
    assert_eq!(parse_trace_line(&old), Some(r));
}

#[test]
fn mm_page_free_line() {
    let live = "             cat-9949    [001] ...2.   925.748314: mm_page_free: \
                    page=ffffea0005b508c0 pfn=0x16d423 order=0";
    let r = rec(
        925_748_314_000,
        1,
        9949,
        "cat",
        "...2.",
        TraceEvent::MmPageFree {
            pfn: 0x16d423,
            order: 0,
        },
    );
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    let live = "         python3-9950    [001] ..s..   925.889650: mm_page_free: \
                    page=ffffea0004194400 pfn=0x106510 order=3";
    let r = rec(
        925_889_650_000,
        1,
        9950,
        "python3",
        "..s..",
        TraceEvent::MmPageFree {
            pfn: 0x106510,
            order: 3,
        },
    );
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
}

#[test]
fn mm_page_alloc_zone_locked_line() {
    let live = "           rustc-8336    [001] d..3.   825.985332: mm_page_alloc_zone_locked: \
                    page=0000000035958519 pfn=0x14bd50 order=0 migratetype=1 percpu_refill=1";
    let r = rec(
        825_985_332_000,
        1,
        8336,
        "rustc",
        "d..3.",
        TraceEvent::MmPageAllocZoneLocked {
            pfn: 0x14bd50,
            order: 0,
            migratetype: 1,
            percpu_refill: true,
        },
    );
    assert_eq!(r.flags, LatFlags::irqs_disabled(3));
    assert_eq!(line(&r), unhash(live, Some(0x14bd50)));
    assert_eq!(parse_trace_line(live), Some(r));
    let live = "      lto cgu.00-9125    [001] d..1.   863.541906: mm_page_alloc_zone_locked: \
                    page=00000000744d9541 pfn=0x167900 order=8 migratetype=1 percpu_refill=0";
    let r = rec(
        863_541_906_000,
        1,
        9125,
        "lto cgu.00",
        "d..1.",
        TraceEvent::MmPageAllocZoneLocked {
            pfn: 0x167900,
            order: 8,
            migratetype: 1,
            percpu_refill: false,
        },
    );
    assert_eq!(line(&r), unhash(live, Some(0x167900)));
    assert_eq!(parse_trace_line(live), Some(r));
}

#[test]
fn mm_page_pcpu_drain_line() {
    let live = "           rustc-9130    [001] dn.3.   863.969678: mm_page_pcpu_drain: \
                    page=000000005d5d9428 pfn=0x16d26c order=0 migratetype=1";
    let r = rec(
        863_969_678_000,
        1,
        9130,
        "rustc",
        "dn.3.",
        TraceEvent::MmPagePcpuDrain {
            pfn: 0x16d26c,
            order: 0,
            migratetype: 1,
        },
    );
    assert_eq!(line(&r), unhash(live, Some(0x16d26c)));
    assert_eq!(parse_trace_line(live), Some(r));
}

#[test]
fn mm_page_alloc_extfrag_line() {
    // Not captured live (no fallback happened on the idle 24 GiB machine): from the format.
    let r = rec(
        1_000_001_000,
        3,
        77,
        "kworker/u8:2",
        "d..3.",
        TraceEvent::MmPageAllocExtfrag {
            pfn: 0x12345,
            alloc_order: 0,
            fallback_order: 3,
            alloc_migratetype: 0,
            fallback_migratetype: 1,
            change_ownership: false,
        },
    );
    let want = "    kworker/u8:2-77      [003] d..3.     1.000001: mm_page_alloc_extfrag: \
                    page=ffffea000048d140 pfn=0x12345 alloc_order=0 fallback_order=3 \
                    pageblock_order=9 alloc_migratetype=0 fallback_migratetype=1 fragmenting=1 \
                    change_ownership=0\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    let r = rec(
        0,
        0,
        0,
        "<idle>",
        "..s..",
        TraceEvent::MmPageAllocExtfrag {
            pfn: 0x200,
            alloc_order: 9,
            fallback_order: 10,
            alloc_migratetype: 1,
            fallback_migratetype: 0,
            change_ownership: true,
        },
    );
    let want = "          <idle>-0       [000] ..s..     0.000000: mm_page_alloc_extfrag: \
                    page=ffffea0000008000 pfn=0x200 alloc_order=9 fallback_order=10 \
                    pageblock_order=9 alloc_migratetype=1 fallback_migratetype=0 fragmenting=0 \
                    change_ownership=1\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    // Derived fields must agree with what we would print.
    assert_eq!(
        parse_trace_line(&want.replace("fragmenting=0", "fragmenting=1")),
        None
    );
    assert_eq!(
        parse_trace_line(&want.replace("pageblock_order=9", "pageblock_order=10")),
        None
    );
}

#[test]
fn context_columns() {
    let ev = TraceEvent::MmPageFree { pfn: 1, order: 0 };
    // Default comm for unknown tasks; timestamps round to the nearest microsecond.
    let r = TraceRecord::new(1_999_999_500, 0, 123, ev.clone());
    assert!(line(&r).starts_with("           <...>-123     [000] .....     2.000000: "));
    let r = TraceRecord::new(1_999_999_499, 12, 1234567, ev.clone()).with_comm("a");
    assert!(line(&r).starts_with("               a-1234567 [012] .....     1.999999: "));
    let r = TraceRecord::new(123_456_789_012_345, 1, 2, ev.clone()).with_comm("comm-with-dash");
    assert!(line(&r).starts_with("  comm-with-dash-2       [001] ..... 123456.789012: "));
    assert_eq!(parse_trace_line(&line(&r)).unwrap().comm, "comm-with-dash");
    // Header, other events, garbage.
    let header = render_trace_header(3, 5, 2);
    assert!(header.lines().all(|l| parse_trace_line(l).is_none()));
    assert!(header.contains("# entries-in-buffer/entries-written: 3/5   #P:2\n"));
    let kfree = "           rustc-7174    [001] ..s..   793.901684: kfree: \
                     call_site=unwind_task_free+0x15/0x30 ptr=0000000000000000";
    assert_eq!(parse_trace_line(kfree), None);
    assert_eq!(parse_trace_line(""), None);
    assert_eq!(
        parse_trace_line("x-1 [000] ..... 1.000000: mm_page_free: page=0 pfn=0x1"),
        None
    );
    // Optional record-tgid column and irq-info off.
    let tgid = "             cat-9949    (   9949) [001] ...2.   925.748314: mm_page_free: \
                    page=ffffea0005b508c0 pfn=0x16d423 order=0";
    assert_eq!(parse_trace_line(tgid).unwrap().pid, 9949);
    let noirq = "             cat-9949    [001]    925.748314: mm_page_free: \
                     page=ffffea0005b508c0 pfn=0x16d423 order=0";
    let r = parse_trace_line(noirq).unwrap();
    assert_eq!((r.flags, r.ts_ns), (LatFlags::NONE, 925_748_314_000));
}

#[test]
fn render_trace_is_lines() {
    let a = TraceRecord::new(1000, 0, 1, TraceEvent::MmPageFree { pfn: 5, order: 1 });
    let b = a.clone().with_comm("init");
    let text = render_trace(&[a.clone(), b.clone()]);
    assert_eq!(text.lines().count(), 2);
    let back: Vec<_> = text.lines().filter_map(parse_trace_line).collect();
    assert_eq!(back, vec![a, b]);
}

/// Lines picked from one capture on the live S2 kernel (6.18.44): a private tracefs instance
/// with every compaction event and migrate:mm_migrate_pages{,_start} on, across one
/// `echo 1 > /proc/sys/vm/compact_memory` (order -1, sync, DMA then DMA32 then Normal) and
/// kcompactd's 500 ms proactive checks. No pointers: byte-exact.
const LIVE_COMPACTION: &str = r"      kcompactd0-36      [001] .....  8535.726233: mm_compaction_kcompactd_sleep: nid=0
      kcompactd0-36      [001] .....  8536.238213: mm_compaction_kcompactd_sleep: nid=0
            bash-20579   [001] .....  8536.669891: mm_compaction_begin: zone_start=0x1 migrate_pfn=0x1 free_pfn=0xe00 zone_end=0x1000, mode=sync
            bash-20579   [001] .....  8536.669893: mm_compaction_finished: node=0 zone=DMA      order=-1 ret=continue
            bash-20579   [001] .....  8536.670980: mm_compaction_isolate_migratepages: range=(0x1 ~ 0x200) nr_scanned=511 nr_taken=0
            bash-20579   [001] .....  8536.675855: mm_compaction_isolate_migratepages: range=(0xba400 ~ 0xba600) nr_scanned=512 nr_taken=0
            bash-20579   [001] .....  8536.675855: mm_compaction_finished: node=0 zone=DMA32    order=-1 ret=complete
            bash-20579   [001] .....  8536.675877: mm_compaction_end: zone_start=0x1000 migrate_pfn=0xba600 free_pfn=0xba700 zone_end=0x100000, mode=sync status=complete
            bash-20579   [001] .....  8536.675878: mm_compaction_begin: zone_start=0x100000 migrate_pfn=0x100000 free_pfn=0x63fe00 zone_end=0x640000, mode=sync
            bash-20579   [001] .....  8536.675881: mm_compaction_finished: node=0 zone=Normal   order=-1 ret=continue
            bash-20579   [001] .....  8536.676225: mm_compaction_isolate_migratepages: range=(0x100600 ~ 0x100800) nr_scanned=512 nr_taken=0
            bash-20579   [001] .....  8536.676225: mm_compaction_finished: node=0 zone=Normal   order=-1 ret=continue
            bash-20579   [001] .....  8536.676229: mm_compaction_isolate_migratepages: range=(0x100800 ~ 0x100a00) nr_scanned=512 nr_taken=0
            bash-20579   [001] .....  8536.676230: mm_compaction_finished: node=0 zone=Normal   order=-1 ret=continue
            bash-20579   [001] .....  8536.676234: mm_compaction_isolate_migratepages: range=(0x100a00 ~ 0x100c00) nr_scanned=512 nr_taken=3
            bash-20579   [001] .....  8536.676235: mm_migrate_pages_start: mode=MIGRATE_SYNC reason=compaction
            bash-20579   [001] .....  8536.676242: mm_migrate_pages: nr_succeeded=3 nr_failed=0 nr_thp_succeeded=0 nr_thp_failed=0 nr_thp_split=0 nr_split=0 mode=MIGRATE_SYNC reason=compaction
            bash-20579   [001] .....  8536.676242: mm_compaction_migratepages: nr_migrated=3 nr_failed=0
            bash-20579   [001] .....  8536.676243: mm_compaction_finished: node=0 zone=Normal   order=-1 ret=continue
            bash-20579   [001] .....  8536.676249: mm_compaction_isolate_migratepages: range=(0x100c00 ~ 0x100e00) nr_scanned=512 nr_taken=2
            bash-20579   [001] .....  8536.676249: mm_migrate_pages_start: mode=MIGRATE_SYNC reason=compaction
            bash-20579   [001] .....  8536.676256: mm_migrate_pages: nr_succeeded=1 nr_failed=1 nr_thp_succeeded=0 nr_thp_failed=0 nr_thp_split=0 nr_split=0 mode=MIGRATE_SYNC reason=compaction
            bash-20579   [001] .....  8536.676256: mm_compaction_migratepages: nr_migrated=1 nr_failed=1
            bash-20579   [001] .....  8536.675547: mm_compaction_isolate_freepages: range=(0xba800 ~ 0xbaa00) nr_scanned=17 nr_taken=4
            bash-20579   [000] .....  8536.733339: mm_compaction_isolate_freepages: range=(0x620100 ~ 0x620120) nr_scanned=32 nr_taken=16
            bash-20579   [000] .....  8536.745177: mm_migrate_pages: nr_succeeded=20 nr_failed=0 nr_thp_succeeded=0 nr_thp_failed=0 nr_thp_split=0 nr_split=0 mode=MIGRATE_SYNC reason=compaction
            bash-20579   [000] .....  8536.745177: mm_compaction_migratepages: nr_migrated=20 nr_failed=0
            bash-20579   [000] .....  8536.745177: mm_compaction_finished: node=0 zone=Normal   order=-1 ret=complete
            bash-20579   [000] .....  8536.745180: mm_compaction_end: zone_start=0x100000 migrate_pfn=0x61f400 free_pfn=0x61f5a0 zone_end=0x640000, mode=sync status=complete
      kcompactd0-36      [000] .....  8536.754212: mm_compaction_kcompactd_sleep: nid=0
            bash-20579   [001] .n...  8536.682189: mm_compaction_isolate_migratepages: range=(0x1a4200 ~ 0x1a4400) nr_scanned=512 nr_taken=0
            bash-20579   [001] .n...  8536.682189: mm_compaction_finished: node=0 zone=Normal   order=-1 ret=continue
            bash-20579   [001] .....  8536.676387: mm_migrate_pages: nr_succeeded=0 nr_failed=6 nr_thp_succeeded=0 nr_thp_failed=0 nr_thp_split=0 nr_split=0 mode=MIGRATE_SYNC reason=compaction
";

#[test]
fn live_compaction_lines_round_trip() {
    let recs: Vec<TraceRecord> = LIVE_COMPACTION
        .lines()
        .map(|l| parse_trace_line(l).unwrap_or_else(|| panic!("{l}")))
        .collect();
    assert_eq!(recs.len(), 33);
    for (r, l) in recs.iter().zip(LIVE_COMPACTION.lines()) {
        assert_eq!(line(r), format!("{l}\n"));
    }
    assert_eq!(render_trace(&recs), LIVE_COMPACTION);
    let groups: Vec<_> = recs.iter().map(|r| r.event.group()).collect();
    assert!(groups.contains(&"compaction") && groups.contains(&"migrate"));
    assert!(!groups.contains(&"kmem"));
}

#[test]
fn compaction_begin_end_lines() {
    let live = "            bash-20579   [001] .....  8536.669891: mm_compaction_begin: \
                    zone_start=0x1 migrate_pfn=0x1 free_pfn=0xe00 zone_end=0x1000, mode=sync";
    let r = rec(
        8_536_669_891_000,
        1,
        20579,
        "bash",
        ".....",
        TraceEvent::MmCompactionBeginEnd {
            zone_start: 0x1,
            migrate_pfn: 0x1,
            free_pfn: 0xe00,
            zone_end: 0x1000,
            sync: true,
            status: None,
        },
    );
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    let live = "            bash-20579   [000] .....  8536.745180: mm_compaction_end: \
                    zone_start=0x100000 migrate_pfn=0x61f400 free_pfn=0x61f5a0 zone_end=0x640000, \
                    mode=sync status=complete";
    let r = rec(
        8_536_745_180_000,
        0,
        20579,
        "bash",
        ".....",
        TraceEvent::MmCompactionBeginEnd {
            zone_start: 0x100000,
            migrate_pfn: 0x61f400,
            free_pfn: 0x61f5a0,
            zone_end: 0x640000,
            sync: true,
            status: Some(5),
        },
    );
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    // Async (kcompactd, direct at COMPACT_PRIO_ASYNC), every status: from the format.
    for (st, name) in COMPACT_STATUS.iter().enumerate() {
        let ev = TraceEvent::MmCompactionBeginEnd {
            zone_start: 0x1000,
            migrate_pfn: 0x1200,
            free_pfn: 0xffe00,
            zone_end: 0x100000,
            sync: false,
            status: Some(st as u8),
        };
        let r = rec(1_000_000, 1, 36, "kcompactd0", ".....", ev);
        let want = format!(
            "      kcompactd0-36      [001] .....     0.001000: mm_compaction_end: \
                 zone_start=0x1000 migrate_pfn=0x1200 free_pfn=0xffe00 zone_end=0x100000, \
                 mode=async status={name}\n"
        );
        assert_eq!(line(&r), want);
        assert_eq!(parse_trace_line(&want), Some(r));
    }
    let begin = "bash-1 [000] ..... 1.000000: mm_compaction_begin: zone_start=0x1 migrate_pfn=0x1 \
                     free_pfn=0xe00 zone_end=0x1000, mode=sync";
    assert!(parse_trace_line(begin).is_some());
    assert_eq!(parse_trace_line(&format!("{begin} status=complete")), None);
    assert_eq!(parse_trace_line(&begin.replace("mode=sync", "mode=Sync")), None);
    let end = begin.replace("begin", "end");
    assert_eq!(parse_trace_line(&end), None);
    assert!(parse_trace_line(&format!("{end} status=success")).is_some());
    assert_eq!(parse_trace_line(&format!("{end} status=0x8")), None);
    assert_eq!(
        parse_trace_line(&format!("{end} status=0x9"))
            .unwrap()
            .event
            .name(),
        "mm_compaction_end"
    );
}

#[test]
fn compaction_isolate_and_migrate_lines() {
    let live = "            bash-20579   [001] .....  8536.675513: mm_compaction_isolate_migratepages: \
                    range=(0xb8200 ~ 0xb8400) nr_scanned=512 nr_taken=5";
    let r = rec(
        8_536_675_513_000,
        1,
        20579,
        "bash",
        ".....",
        TraceEvent::MmCompactionIsolate {
            free: false,
            start_pfn: 0xb8200,
            end_pfn: 0xb8400,
            nr_scanned: 512,
            nr_taken: 5,
        },
    );
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    let live = "            bash-20579   [001] .....  8536.675547: mm_compaction_isolate_freepages: \
                    range=(0xba800 ~ 0xbaa00) nr_scanned=17 nr_taken=4";
    let ev = TraceEvent::MmCompactionIsolate {
        free: true,
        start_pfn: 0xba800,
        end_pfn: 0xbaa00,
        nr_scanned: 17,
        nr_taken: 4,
    };
    let r = rec(8_536_675_547_000, 1, 20579, "bash", ".....", ev);
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    // Not captured (compact_memory runs at order -1, which skips fast_isolate_freepages).
    let ev = TraceEvent::MmCompactionFastIsolateFreepages {
        start_pfn: 0x5ffe00,
        end_pfn: 0x600000,
        nr_scanned: 3,
        nr_taken: 1,
    };
    let r = rec(2_000_000_000, 0, 4242, "python3", ".....", ev);
    let want = "         python3-4242    [000] .....     2.000000: mm_compaction_fast_isolate_freepages: \
                    range=(0x5ffe00 ~ 0x600000) nr_scanned=3 nr_taken=1\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    assert_eq!(parse_trace_line(&want.replace(" ~ ", "~")), None);

    let live = "            bash-20579   [001] .....  8536.676256: mm_compaction_migratepages: \
                    nr_migrated=1 nr_failed=1";
    let ev = TraceEvent::MmCompactionMigratepages {
        nr_migrated: 1,
        nr_failed: 1,
    };
    let r = rec(8_536_676_256_000, 1, 20579, "bash", ".....", ev);
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));

    let live = "            bash-20579   [001] .....  8536.676256: mm_migrate_pages: nr_succeeded=1 \
                    nr_failed=1 nr_thp_succeeded=0 nr_thp_failed=0 nr_thp_split=0 nr_split=0 \
                    mode=MIGRATE_SYNC reason=compaction";
    let ev = TraceEvent::MmMigratePages {
        succeeded: 1,
        failed: 1,
        thp_succeeded: 0,
        thp_failed: 0,
        thp_split: 0,
        large_folio_split: 0,
        mode: 2,
        reason: MR_COMPACTION,
    };
    let r = rec(8_536_676_256_000, 1, 20579, "bash", ".....", ev);
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    let live = "            bash-20579   [001] .....  8536.675515: mm_migrate_pages_start: \
                    mode=MIGRATE_SYNC reason=compaction";
    let ev = TraceEvent::MmMigratePagesStart {
        mode: 2,
        reason: MR_COMPACTION,
    };
    let r = rec(8_536_675_515_000, 1, 20579, "bash", ".....", ev);
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    // From the format: other modes and reasons, the THP and split counters, unknown values.
    let ev = TraceEvent::MmMigratePages {
        succeeded: 1536,
        failed: 2,
        thp_succeeded: 2,
        thp_failed: 1,
        thp_split: 1,
        large_folio_split: 3,
        mode: 1,
        reason: 3,
    };
    let mut f = String::new();
    ev.render_fields(&mut f);
    assert_eq!(
        f,
        "nr_succeeded=1536 nr_failed=2 nr_thp_succeeded=2 nr_thp_failed=1 nr_thp_split=1 \
             nr_split=3 mode=MIGRATE_SYNC_LIGHT reason=syscall_or_cpuset"
    );
    let cases = [
        (0, 9, "mode=MIGRATE_ASYNC reason=damon"),
        (3, 10, "mode=0x3 reason=0xa"),
    ];
    for (mode, reason, want) in cases {
        let ev = TraceEvent::MmMigratePagesStart { mode, reason };
        let mut f = String::new();
        ev.render_fields(&mut f);
        assert_eq!(f, want);
        let l = line(&rec(0, 0, 1, "a", ".....", ev.clone()));
        assert_eq!(parse_trace_line(&l).unwrap().event, ev);
    }
    let l = "a-1 [000] ..... 0.000000: mm_migrate_pages_start: mode=MIGRATE_SYNC reason=0x0";
    assert_eq!(parse_trace_line(l), None);
    assert_eq!(
        parse_trace_line(&l.replace("0x0", "compaction"))
            .unwrap()
            .event
            .group(),
        "migrate"
    );
}

#[test]
fn compaction_zone_events_lines() {
    let live = "            bash-20579   [001] .....  8536.675855: mm_compaction_finished: \
                    node=0 zone=DMA32    order=-1 ret=complete";
    let ev = TraceEvent::MmCompactionSuitableFinished {
        finished: true,
        zone: 1,
        order: -1,
        ret: 5,
    };
    let r = rec(8_536_675_855_000, 1, 20579, "bash", ".....", ev);
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    let live = "            bash-20579   [001] .n...  8536.682189: mm_compaction_finished: \
                    node=0 zone=Normal   order=-1 ret=continue";
    let r = parse_trace_line(live).unwrap();
    assert_eq!(r.flags.need_resched, 'n');
    assert_eq!(
        r.event,
        TraceEvent::MmCompactionSuitableFinished {
            finished: true,
            zone: 2,
            order: -1,
            ret: 4
        }
    );
    assert_eq!(line(&r), format!("{live}\n"));
    // Not captured (direct compaction and kcompactd only): from the format.
    let ev = TraceEvent::MmCompactionSuitableFinished {
        finished: false,
        zone: 3,
        order: 9,
        ret: 0,
    };
    let r = rec(3_000_000_000, 1, 77, "python3", ".....", ev);
    let want = "         python3-77      [001] .....     3.000000: mm_compaction_suitable: \
                    node=0 zone=Movable  order=9 ret=not_suitable_zone\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    // ZONE_DEVICE is not in the ZONE_TYPE table: __print_symbolic falls back to 0x%lx.
    let ev = TraceEvent::MmCompactionSuitableFinished {
        finished: false,
        zone: 4,
        order: 2,
        ret: 1,
    };
    let mut f = String::new();
    ev.render_fields(&mut f);
    assert_eq!(f, "node=0 zone=0x4      order=2 ret=skipped");
    assert_eq!(
        parse_trace_line(&format!("a-1 [000] ..... 0.000000: mm_compaction_suitable: {f}"))
            .unwrap()
            .event,
        ev
    );
    // The padding must be the kernel's; a node's zones are the model's zone indices node by
    // node (node 1's Movable is 5 + 3), up to the model's 16 nodes.
    let on_node1 = parse_trace_line(&want.replace("node=0", "node=1")).expect("node 1");
    assert!(matches!(
        on_node1.event,
        TraceEvent::MmCompactionSuitableFinished { zone: 8, .. }
    ));
    let bad = [
        want.replace("Movable  order", "Movable order"),
        want.replace("node=0", "node=16"),
        want.replace("zone=Movable ", "zone=0x3     "),
        want.replace("ret=not_suitable_zone", "ret=bogus"),
    ];
    for b in &bad {
        assert_eq!(parse_trace_line(b), None, "{b}");
    }

    let cases = [
        (
            0,
            "mm_compaction_deferred",
            "node=0 zone=Normal   order=9 order_failed=9 consider=1 limit=4",
        ),
        (
            1,
            "mm_compaction_defer_compaction",
            "node=0 zone=Normal   order=9 order_failed=9 consider=0 limit=4",
        ),
        (
            2,
            "mm_compaction_defer_reset",
            "node=0 zone=Normal   order=9 order_failed=10 consider=0 limit=1",
        ),
    ];
    for (kind, name, fields) in cases {
        let ev = TraceEvent::MmCompactionDefer {
            kind,
            zone: 2,
            order: 9,
            considered: u32::from(kind == 0),
            defer_shift: if kind == 2 { 0 } else { 2 },
            order_failed: if kind == 2 { 10 } else { 9 },
        };
        let r = rec(4_000_000_000, 0, 4242, "python3", ".....", ev);
        let want = format!("         python3-4242    [000] .....     4.000000: {name}: {fields}\n");
        assert_eq!(line(&r), want);
        assert_eq!(parse_trace_line(&want), Some(r));
        assert_eq!(
            parse_trace_line(&want.replace("limit=4", "limit=3").replace("limit=1", "limit=0")),
            None
        );
    }
    let ev = TraceEvent::MmCompactionDefer {
        kind: 1,
        zone: 1,
        order: 4,
        considered: 0,
        defer_shift: 6,
        order_failed: 4,
    };
    let mut f = String::new();
    ev.render_fields(&mut f);
    assert_eq!(
        f,
        "node=0 zone=DMA32    order=4 order_failed=4 consider=0 limit=64"
    );

    // try_to_compact_pages: the madvised THP fault's gfp (seen live in mm_page_alloc), async.
    let ev = TraceEvent::MmCompactionTryToCompactPages {
        order: 9,
        gfp: Gfp(0x3d24ca),
        prio: 2,
    };
    let r = rec(5_000_000_000, 1, 9140, "python3", ".....", ev);
    let want = "         python3-9140    [001] .....     5.000000: mm_compaction_try_to_compact_pages: \
                    order=9 gfp_mask=GFP_TRANSHUGE|__GFP_NORETRY|__GFP_THISNODE priority=2\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    assert_eq!(parse_trace_line(&want.replace("priority", "prio")), None);
}

#[test]
fn kcompactd_lines() {
    let live = "      kcompactd0-36      [001] .....  8535.726233: mm_compaction_kcompactd_sleep: nid=0";
    let ev = TraceEvent::MmCompactionKcompactdSleep { nid: 0 };
    let r = rec(8_535_726_233_000, 1, 36, "kcompactd0", ".....", ev);
    assert_eq!(line(&r), format!("{live}\n"));
    assert_eq!(parse_trace_line(live), Some(r));
    assert_eq!(
        parse_trace_line(&live.replace("nid=0", "nid=1")).unwrap().event,
        TraceEvent::MmCompactionKcompactdSleep { nid: 1 }
    );
    // Not captured (needs kswapd to finish a high-order balance): from the format. %-8s
    // pads the last field, so the line ends in spaces.
    let ev = TraceEvent::MmCompactionKcompactd {
        wake: false,
        order: 9,
        highest_zoneidx: 2,
    };
    let r = rec(6_000_000_000, 0, 35, "kswapd0", ".....", ev);
    let want = "         kswapd0-35      [000] .....     6.000000: mm_compaction_wakeup_kcompactd: \
                    nid=0 order=9 classzone_idx=Normal  \n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    assert_eq!(parse_trace_line(want.trim_end()), None);
    let ev = TraceEvent::MmCompactionKcompactd {
        wake: true,
        order: 2,
        highest_zoneidx: 3,
    };
    let r = rec(6_000_100_000, 1, 36, "kcompactd0", ".....", ev);
    let want = "      kcompactd0-36      [001] .....     6.000100: mm_compaction_kcompactd_wake: \
                    nid=0 order=2 classzone_idx=Movable \n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    let on_node1 = parse_trace_line(&want.replace("nid=0", "nid=1")).expect("node 1");
    assert!(matches!(
        on_node1.event,
        TraceEvent::MmCompactionKcompactd {
            highest_zoneidx: 8,
            ..
        }
    ));
    assert_eq!(parse_trace_line(&want.replace("nid=0", "nid=16")), None);
}

#[test]
fn event_groups() {
    let free = TraceEvent::MmPageFree { pfn: 1, order: 0 };
    let sleep = TraceEvent::MmCompactionKcompactdSleep { nid: 0 };
    let start = TraceEvent::MmMigratePagesStart { mode: 0, reason: 0 };
    assert_eq!(
        [free.group(), sleep.group(), start.group()],
        ["kmem", "compaction", "migrate"]
    );
}

fn arb_comm() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("<idle>".to_string()),
        Just("<...>".to_string()),
        "[a-zA-Z0-9_/:.<>-][a-zA-Z0-9_/:. <>-]{0,14}",
    ]
}

fn arb_flags() -> impl Strategy<Value = LatFlags> {
    (
        prop::sample::select(vec!['.', 'd', 'b', 'D']),
        prop::sample::select(vec!['.', 'n', 'N', 'p', 'l', 'L', 'b', 'B']),
        prop::sample::select(vec!['.', 'h', 's', 'H', 'z', 'Z']),
        0u8..16,
        0u8..16,
    )
        .prop_map(|(a, b, c, d, e)| LatFlags {
            irqs_off: a,
            need_resched: b,
            hardsoft_irq: c,
            preempt_depth: d,
            migrate_disable: e,
        })
}

fn arb_event() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        arb_kmem_event(),
        arb_compaction_event(),
        arb_compaction_event2(),
        arb_vmscan_event(),
        arb_damon_event()
    ]
}

fn arb_damon_event() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        (any::<[u32; 5]>(), any::<[u64; 3]>()).prop_map(|(a, b)| TraceEvent::DamosBeforeApply {
            context_idx: a[0],
            scheme_idx: a[1],
            target_idx: b[0],
            nr_regions: a[2],
            start: b[1],
            end: b[2],
            nr_accesses: a[3],
            age: a[4],
        }),
        (any::<i32>(), any::<[i64; 8]>(), any::<[i32; 2]>()).prop_map(|(nid, v, nr_activate)| {
            TraceEvent::MmVmscanReclaimPages {
                nid,
                nr_scanned: v[0],
                nr_reclaimed: v[1],
                nr_dirty: v[2],
                nr_writeback: v[3],
                nr_congested: v[4],
                nr_immediate: v[5],
                nr_activate,
                nr_ref_keep: v[6],
                nr_unmap_fail: v[7],
            }
        }),
    ]
}

/// §27.2 item 6: `damon:damos_before_apply` prints `ctx_idx=%u scheme_idx=%u target_idx=%lu
/// nr_regions=%u %lu-%lu: %u %u` (include/trace/events/damon.h): the region's physical start
/// and end in decimal, then nr_accesses and age. A line as S2's kdamond (pid 83) prints it for
/// a 21 MiB region of age 80 reads back into the same record.
#[test]
fn s27_damos_before_apply_line() {
    let ev = TraceEvent::DamosBeforeApply {
        context_idx: 0,
        scheme_idx: 0,
        target_idx: 0,
        nr_regions: 1187,
        start: 9_663_676_416,
        end: 9_686_745_088,
        nr_accesses: 0,
        age: 80,
    };
    let r = rec(812_345_678_000, 1, 83, "kdamond.0", ".....", ev.clone());
    let want = "       kdamond.0-83      [001] .....   812.345678: damos_before_apply: \
                ctx_idx=0 scheme_idx=0 target_idx=0 nr_regions=1187 9663676416-9686745088: 0 80\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    assert_eq!(ev.group(), "damon");
    // Hex, a missing field or a different separator do not parse.
    for bad in [
        want.replace("9663676416-", "0x240000000-"),
        want.replace(": 0 80", ": 0"),
        want.replace("-9686745088:", " 9686745088:"),
    ] {
        assert_eq!(parse_trace_line(&bad), None, "{bad}");
    }
}

/// §27.2 item 5: `vmscan:mm_vmscan_reclaim_pages` (include/trace/events/vmscan.h) prints the
/// `reclaim_stat` of `reclaim_folio_list` with `nr_activate0/1` as `nr_activate_anon/file` and
/// no priority or flags (unlike lru_shrink_inactive).
#[test]
fn s27_mm_vmscan_reclaim_pages_line() {
    let ev = TraceEvent::MmVmscanReclaimPages {
        nid: 0,
        nr_scanned: 5376,
        nr_reclaimed: 5120,
        nr_dirty: 256,
        nr_writeback: 0,
        nr_congested: 0,
        nr_immediate: 0,
        nr_activate: [0, 256],
        nr_ref_keep: 0,
        nr_unmap_fail: 0,
    };
    let r = rec(812_345_700_000, 1, 83, "kdamond.0", ".....", ev.clone());
    let want = "       kdamond.0-83      [001] .....   812.345700: mm_vmscan_reclaim_pages: \
                nid=0 nr_scanned=5376 nr_reclaimed=5120 nr_dirty=256 nr_writeback=0 nr_congested=0 \
                nr_immediate=0 nr_activate_anon=0 nr_activate_file=256 nr_ref_keep=0 nr_unmap_fail=0\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    assert_eq!(ev.group(), "vmscan");
    assert_eq!(
        parse_trace_line(&want.replace(" nr_unmap_fail=0", " nr_unmap_fail=0 priority=12")),
        None
    );
}

fn arb_compaction_event() -> impl Strategy<Value = TraceEvent> {
    let pfns = (any::<u32>(), any::<u32>(), any::<u64>(), any::<u64>());
    prop_oneof![
        (any::<bool>(), pfns).prop_map(|(free, (s, e, n, t))| TraceEvent::MmCompactionIsolate {
            free,
            start_pfn: s,
            end_pfn: e,
            nr_scanned: n,
            nr_taken: t,
        }),
        pfns.prop_map(|(s, e, n, t)| TraceEvent::MmCompactionFastIsolateFreepages {
            start_pfn: s,
            end_pfn: e,
            nr_scanned: n,
            nr_taken: t,
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(nr_migrated, nr_failed)| {
            TraceEvent::MmCompactionMigratepages {
                nr_migrated,
                nr_failed,
            }
        }),
        (any::<[u32; 4]>(), any::<bool>(), prop::option::of(any::<u8>())).prop_map(
            |([a, b, c, d], sync, status)| TraceEvent::MmCompactionBeginEnd {
                zone_start: a,
                migrate_pfn: b,
                free_pfn: c,
                zone_end: d,
                sync,
                status,
            }
        ),
        (-1i32..11, any::<u32>(), 0i32..3).prop_map(|(order, gfp, prio)| {
            TraceEvent::MmCompactionTryToCompactPages {
                order,
                gfp: Gfp(gfp),
                prio,
            }
        }),
    ]
}

fn arb_compaction_event2() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        (any::<bool>(), 0u8..6, any::<i32>(), 0u8..11).prop_map(|(finished, zone, order, ret)| {
            TraceEvent::MmCompactionSuitableFinished {
                finished,
                zone,
                order,
                ret,
            }
        }),
        (0u8..3, 0u8..6, any::<i32>(), any::<u32>(), 0u32..64, any::<i32>()).prop_map(
            |(kind, zone, order, considered, defer_shift, order_failed)| {
                TraceEvent::MmCompactionDefer {
                    kind,
                    zone,
                    order,
                    considered,
                    defer_shift,
                    order_failed,
                }
            }
        ),
        (any::<bool>(), any::<i32>(), 0u8..80).prop_map(|(wake, order, highest_zoneidx)| {
            TraceEvent::MmCompactionKcompactd {
                wake,
                order,
                highest_zoneidx,
            }
        }),
        any::<i32>().prop_map(|nid| TraceEvent::MmCompactionKcompactdSleep { nid }),
        (any::<[u64; 6]>(), 0u8..5, 0u8..12).prop_map(|([a, b, c, d, e, f], mode, reason)| {
            TraceEvent::MmMigratePages {
                succeeded: a,
                failed: b,
                thp_succeeded: c,
                thp_failed: d,
                thp_split: e,
                large_folio_split: f,
                mode,
                reason,
            }
        }),
        (any::<u8>(), any::<u8>())
            .prop_map(|(mode, reason)| TraceEvent::MmMigratePagesStart { mode, reason }),
    ]
}

/// mm_vmscan_throttled as the S2 format prints it (`usect_delayed` is the kernel's typo);
/// the reason is the `1 << state` bit, several bits join with `|`, 0 is NONE.
#[test]
fn vmscan_throttled_line() {
    let ev = TraceEvent::MmVmscanThrottled {
        nid: 0,
        usec_timeout: 100000,
        usec_delayed: 2000,
        reason: vmscan_throttle_reason(VMSCAN_THROTTLE_ISOLATED),
    };
    let r = rec(7_000_001_000, 0, 4242, "cc1", ".....", ev.clone());
    let want = "             cc1-4242    [000] .....     7.000001: mm_vmscan_throttled: \
                    nid=0 usec_timeout=100000 usect_delayed=2000 reason=VMSCAN_THROTTLE_ISOLATED\n";
    assert_eq!(line(&r), want);
    assert_eq!(parse_trace_line(want), Some(r));
    assert_eq!(ev.group(), "vmscan");
    assert_eq!(show_throttle_flags(0), "VMSCAN_THROTTLE_NONE");
    assert_eq!(
        show_throttle_flags(0b1001 | 0x40),
        "VMSCAN_THROTTLE_WRITEBACK|VMSCAN_THROTTLE_CONGESTED|0x40"
    );
    // Only what show_throttle_flags prints parses (order and hex remainder included).
    let bad = want.replace(
        "VMSCAN_THROTTLE_ISOLATED",
        "VMSCAN_THROTTLE_ISOLATED|VMSCAN_THROTTLE_WRITEBACK",
    );
    assert_eq!(parse_trace_line(&bad), None);
    assert_eq!(
        parse_trace_line(&want.replace("usect_delayed", "usec_delayed")),
        None
    );
}

/// `__print_symbolic(lru, LRU_NAMES)` prints an unknown list as `0x%lx`, and it parses back.
#[test]
fn vmscan_lru_isolate_unknown_lru() {
    let ev = TraceEvent::MmVmscanLruIsolate {
        highest_zoneidx: 2,
        order: 0,
        nr_requested: 32,
        nr_scanned: 40,
        nr_skipped: 8,
        nr_taken: 32,
        lru: 7,
    };
    let r = rec(1_000_000, 1, 9, "kswapd0", ".....", ev);
    let l = line(&r);
    assert!(
        l.ends_with("classzone=2 order=0 nr_requested=32 nr_scanned=40 nr_skipped=8 nr_taken=32 lru=0x7\n"),
        "{l}"
    );
    assert_eq!(parse_trace_line(&l), Some(r));
}

fn arb_vmscan_event() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        any::<i32>().prop_map(|nid| TraceEvent::MmVmscanKswapdSleep { nid }),
        (any::<i32>(), any::<i32>()).prop_map(|(nid, order)| TraceEvent::MmVmscanKswapdWake { nid, order }),
        (any::<i32>(), any::<i32>(), any::<u32>()).prop_map(|(nid, order, g)| {
            TraceEvent::MmVmscanWakeupKswapd {
                nid,
                order,
                gfp: Gfp(g),
            }
        }),
        (any::<i32>(), any::<u32>())
            .prop_map(|(order, g)| TraceEvent::MmVmscanDirectReclaimBegin { order, gfp: Gfp(g) }),
        any::<u64>().prop_map(|nr_reclaimed| TraceEvent::MmVmscanDirectReclaimEnd { nr_reclaimed }),
        (any::<i32>(), any::<i32>(), any::<[u64; 4]>(), any::<u8>()).prop_map(
            |(hz, order, [a, b, c, d], lru)| {
                TraceEvent::MmVmscanLruIsolate {
                    highest_zoneidx: hz,
                    order,
                    nr_requested: a,
                    nr_scanned: b,
                    nr_skipped: c,
                    nr_taken: d,
                    lru,
                }
            }
        ),
        (
            any::<i32>(),
            any::<[i64; 8]>(),
            any::<[i32; 2]>(),
            any::<i32>(),
            any::<u32>()
        )
            .prop_map(|(nid, v, nr_activate, priority, flags)| {
                TraceEvent::MmVmscanLruShrinkInactive {
                    nid,
                    nr_scanned: v[0],
                    nr_reclaimed: v[1],
                    nr_dirty: v[2],
                    nr_writeback: v[3],
                    nr_congested: v[4],
                    nr_immediate: v[5],
                    nr_activate,
                    nr_ref_keep: v[6],
                    nr_unmap_fail: v[7],
                    priority,
                    flags,
                }
            }),
        (any::<i32>(), any::<[i32; 3]>(), any::<i32>()).prop_map(|(nid, [t, d, _], reason)| {
            TraceEvent::MmVmscanThrottled {
                nid,
                usec_timeout: t,
                usec_delayed: d,
                reason,
            }
        }),
        (any::<i32>(), any::<[i64; 4]>(), any::<i32>(), any::<u32>()).prop_map(
            |(nid, v, priority, flags)| {
                TraceEvent::MmVmscanLruShrinkActive {
                    nid,
                    nr_taken: v[0],
                    nr_active: v[1],
                    nr_deactivated: v[2],
                    nr_referenced: v[3],
                    priority,
                    flags,
                }
            }
        ),
    ]
}

fn arb_kmem_event() -> impl Strategy<Value = TraceEvent> {
    prop_oneof![
        (prop::option::of(any::<u32>()), 0u32..11, any::<u32>(), -1i32..6).prop_map(
            |(pfn, order, gfp, migratetype)| TraceEvent::MmPageAlloc {
                pfn,
                order,
                gfp: Gfp(gfp),
                migratetype
            }
        ),
        (any::<u32>(), any::<u32>()).prop_map(|(pfn, order)| TraceEvent::MmPageFree { pfn, order }),
        (any::<u32>(), any::<u32>(), any::<i32>(), any::<bool>()).prop_map(
            |(pfn, order, migratetype, percpu_refill)| TraceEvent::MmPageAllocZoneLocked {
                pfn,
                order,
                migratetype,
                percpu_refill
            }
        ),
        (any::<u32>(), 0u32..11, -1i32..6).prop_map(|(pfn, order, migratetype)| {
            TraceEvent::MmPagePcpuDrain {
                pfn,
                order,
                migratetype,
            }
        }),
        (
            any::<u32>(),
            -1i32..11,
            -1i32..11,
            -1i32..6,
            -1i32..6,
            any::<bool>()
        )
            .prop_map(|(pfn, ao, fo, amt, fmt, co)| TraceEvent::MmPageAllocExtfrag {
                pfn,
                alloc_order: ao,
                fallback_order: fo,
                alloc_migratetype: amt,
                fallback_migratetype: fmt,
                change_ownership: co,
            }),
    ]
}

proptest! {
    #[test]
    fn parse_render_roundtrip(
        us in 0u64..10_000_000_000_000,
        cpu in 0u32..2048,
        pid in 0u32..4_194_304,
        comm in arb_comm(),
        flags in arb_flags(),
        event in arb_event(),
    ) {
        let r = TraceRecord { ts_ns: us * 1000, cpu, pid, comm, flags, event };
        let l = line(&r);
        prop_assert_eq!(l.matches('\n').count(), 1);
        prop_assert_eq!(parse_trace_line(&l), Some(r));
    }

    #[test]
    fn gfp_roundtrip(g in any::<u32>()) {
        prop_assert_eq!(parse_gfp_flags(&show_gfp_flags(Gfp(g))), Some(Gfp(g)));
    }
}
