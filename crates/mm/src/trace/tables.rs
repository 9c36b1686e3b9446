//! The flag and symbol tables of the trace output (`__print_flags`, `__print_symbolic`:
//! include/trace/events/mmflags.h, vmscan.h, migrate.h) with their printers and parsers.

use std::fmt::Write as _;

use super::parse::parse_hex_u32;
use crate::gfp::Gfp;

/// The names table `show_gfp_flags()` walks on S2, in the kernel's order
/// (include/trace/events/mmflags.h: the composites, `__GFP_RECLAIM`, then one entry per gfp bit;
/// no KASAN or LOCKDEP entries on S2, `__GFP_NO_OBJ_EXT` present because `CONFIG_SLAB_OBJ_EXT=y`).
/// Some entries can never print (`__GFP_RECLAIM` after `GFP_NOIO`, `__GFP_DMA` after `GFP_DMA`...)
/// but are kept so the table reads like the kernel's.
pub const GFP_TRACE_NAMES: &[(Gfp, &str)] = &[
    (Gfp::GFP_TRANSHUGE, "GFP_TRANSHUGE"),
    (Gfp::GFP_TRANSHUGE_LIGHT, "GFP_TRANSHUGE_LIGHT"),
    (Gfp::GFP_HIGHUSER_MOVABLE, "GFP_HIGHUSER_MOVABLE"),
    (Gfp::GFP_HIGHUSER, "GFP_HIGHUSER"),
    (Gfp::GFP_USER, "GFP_USER"),
    (Gfp::GFP_KERNEL_ACCOUNT, "GFP_KERNEL_ACCOUNT"),
    (Gfp::GFP_KERNEL, "GFP_KERNEL"),
    (Gfp::GFP_NOFS, "GFP_NOFS"),
    (Gfp::GFP_ATOMIC, "GFP_ATOMIC"),
    (Gfp::GFP_NOIO, "GFP_NOIO"),
    (Gfp::GFP_NOWAIT, "GFP_NOWAIT"),
    (Gfp::GFP_DMA, "GFP_DMA"),
    (Gfp::GFP_DMA32, "GFP_DMA32"),
    (Gfp::RECLAIM, "__GFP_RECLAIM"),
    (Gfp::DMA, "__GFP_DMA"),
    (Gfp::HIGHMEM, "__GFP_HIGHMEM"),
    (Gfp::DMA32, "__GFP_DMA32"),
    (Gfp::MOVABLE, "__GFP_MOVABLE"),
    (Gfp::RECLAIMABLE, "__GFP_RECLAIMABLE"),
    (Gfp::HIGH, "__GFP_HIGH"),
    (Gfp::IO, "__GFP_IO"),
    (Gfp::FS, "__GFP_FS"),
    (Gfp::ZERO, "__GFP_ZERO"),
    (Gfp::DIRECT_RECLAIM, "__GFP_DIRECT_RECLAIM"),
    (Gfp::KSWAPD_RECLAIM, "__GFP_KSWAPD_RECLAIM"),
    (Gfp::WRITE, "__GFP_WRITE"),
    (Gfp::NOWARN, "__GFP_NOWARN"),
    (Gfp::RETRY_MAYFAIL, "__GFP_RETRY_MAYFAIL"),
    (Gfp::NOFAIL, "__GFP_NOFAIL"),
    (Gfp::NORETRY, "__GFP_NORETRY"),
    (Gfp::MEMALLOC, "__GFP_MEMALLOC"),
    (Gfp::COMP, "__GFP_COMP"),
    (Gfp::NOMEMALLOC, "__GFP_NOMEMALLOC"),
    (Gfp::HARDWALL, "__GFP_HARDWALL"),
    (Gfp::THISNODE, "__GFP_THISNODE"),
    (Gfp::ACCOUNT, "__GFP_ACCOUNT"),
    (Gfp::ZEROTAGS, "__GFP_ZEROTAGS"),
    (Gfp::NO_OBJ_EXT, "__GFP_NO_OBJ_EXT"),
];

/// `show_gfp_flags()` as printed in `gfp_flags=%s`: `none` for 0; otherwise every table entry
/// whose whole mask is still present, in table order, each taking its bits away, then whatever
/// bits no entry covered as `0x%lx`, all joined by `|` (`trace_print_flags_seq`).
pub fn show_gfp_flags(gfp: Gfp) -> String {
    let mut out = String::new();
    write_gfp_flags(&mut out, gfp);
    out
}

pub(super) fn write_gfp_flags(out: &mut String, gfp: Gfp) {
    if gfp.0 == 0 {
        out.push_str("none");
        return;
    }
    let mut left = gfp.0;
    let mut sep = "";
    for &(mask, name) in GFP_TRACE_NAMES {
        if left == 0 {
            break;
        }
        if left & mask.0 == mask.0 {
            left &= !mask.0;
            out.push_str(sep);
            out.push_str(name);
            sep = "|";
        }
    }
    if left != 0 {
        let _ = write!(out, "{sep}{left:#x}");
    }
}

/// Inverse of [`show_gfp_flags`]: `none`, or `|`-joined names of [`GFP_TRACE_NAMES`] and `0x`
/// hex remainders. `None` on an unknown name or a malformed number.
pub fn parse_gfp_flags(s: &str) -> Option<Gfp> {
    if s == "none" {
        return Some(Gfp(0));
    }
    let mut g = 0u32;
    for part in s.split('|') {
        if let Some(hex) = part.strip_prefix("0x") {
            g |= parse_hex_u32(hex)?;
        } else {
            let &(mask, _) = GFP_TRACE_NAMES.iter().find(|(_, n)| *n == part)?;
            g |= mask.0;
        }
    }
    Some(Gfp(g))
}

/// `enum vmscan_throttle_state` (include/linux/mmzone.h): the reasons `reclaim_throttle` takes.
pub const VMSCAN_THROTTLE_WRITEBACK: u32 = 0;
pub const VMSCAN_THROTTLE_ISOLATED: u32 = 1;
pub const VMSCAN_THROTTLE_NOPROGRESS: u32 = 2;
pub const VMSCAN_THROTTLE_CONGESTED: u32 = 3;

/// The `reason` field of mm_vmscan_throttled for a `vmscan_throttle_state` (`1U << reason`).
pub const fn vmscan_throttle_reason(state: u32) -> i32 {
    (1u32 << state) as i32
}

/// `show_throttle_flags` table (include/trace/events/vmscan.h), in the kernel's order.
pub const VMSCAN_THROTTLE_FLAGS: [(u32, &str); 4] = [
    (1 << VMSCAN_THROTTLE_WRITEBACK, "VMSCAN_THROTTLE_WRITEBACK"),
    (1 << VMSCAN_THROTTLE_ISOLATED, "VMSCAN_THROTTLE_ISOLATED"),
    (1 << VMSCAN_THROTTLE_NOPROGRESS, "VMSCAN_THROTTLE_NOPROGRESS"),
    (1 << VMSCAN_THROTTLE_CONGESTED, "VMSCAN_THROTTLE_CONGESTED"),
];

/// `__print_flags(flags, "|", table)` or `none_name` for 0 (`trace_print_flags_seq`: table
/// entries in order while bits remain, then the rest as `0x%lx`).
pub(super) fn show_flags(flags: u32, table: &[(u32, &str)], none_name: &str) -> String {
    if flags == 0 {
        return none_name.into();
    }
    let mut parts = Vec::new();
    let mut left = flags;
    for &(bit, name) in table {
        if left == 0 {
            break;
        }
        if left & bit == bit {
            parts.push(name.to_string());
            left &= !bit;
        }
    }
    if left != 0 {
        parts.push(format!("0x{left:x}"));
    }
    parts.join("|")
}

/// Inverse of [`show_flags`]; only texts [`show_flags`] prints are accepted.
pub(super) fn parse_flags(s: &str, table: &[(u32, &str)], none_name: &str) -> Option<u32> {
    if s == none_name {
        return Some(0);
    }
    let mut flags = 0;
    for p in s.split('|') {
        match table.iter().find(|(_, n)| *n == p) {
            Some((bit, _)) => flags |= bit,
            None => flags |= parse_hex_u32(p.strip_prefix("0x")?)?,
        }
    }
    (flags != 0 && show_flags(flags, table, none_name) == s).then_some(flags)
}

/// `show_throttle_flags`: VMSCAN_THROTTLE_NONE for 0.
pub fn show_throttle_flags(reason: i32) -> String {
    show_flags(reason as u32, &VMSCAN_THROTTLE_FLAGS, "VMSCAN_THROTTLE_NONE")
}

/// `RECLAIM_WB_*` (include/trace/events/vmscan.h), as `show_reclaim_flags` prints them.
pub const RECLAIM_WB_FLAGS: [(u32, &str); 5] = [
    (0x1, "RECLAIM_WB_ANON"),
    (0x2, "RECLAIM_WB_FILE"),
    (0x10, "RECLAIM_WB_MIXED"),
    (0x4, "RECLAIM_WB_SYNC"),
    (0x8, "RECLAIM_WB_ASYNC"),
];

/// `trace_reclaim_flags(file)`: FILE or ANON, always ASYNC.
pub fn trace_reclaim_flags(file: bool) -> u32 {
    (if file { 0x2 } else { 0x1 }) | 0x8
}

/// `show_reclaim_flags`: `__print_flags(flags, "|", ...)`, or RECLAIM_WB_NONE for 0; bits left
/// over print in hex as `__print_flags` does.
pub fn show_reclaim_flags(flags: u32) -> String {
    show_flags(flags, &RECLAIM_WB_FLAGS, "RECLAIM_WB_NONE")
}

pub(super) fn parse_reclaim_flags(s: &str) -> Option<u32> {
    parse_flags(s, &RECLAIM_WB_FLAGS, "RECLAIM_WB_NONE")
}

/// `migrate_reason` `MR_COMPACTION`, the reason compaction passes to `migrate_pages()`.
pub const MR_COMPACTION: u8 = 0;

/// `MIGRATE_MODE` names (include/trace/events/migrate.h), indexed by `enum migrate_mode`.
pub const MIGRATE_MODE_NAMES: [&str; 3] = ["MIGRATE_ASYNC", "MIGRATE_SYNC_LIGHT", "MIGRATE_SYNC"];

/// `MIGRATE_REASON` names (include/trace/events/migrate.h), indexed by `enum migrate_reason`.
pub const MIGRATE_REASON_NAMES: [&str; 10] = [
    "compaction",
    "memory_failure",
    "memory_hotplug",
    "syscall_or_cpuset",
    "mempolicy_mbind",
    "numa_misplaced",
    "contig_range",
    "longterm_pin",
    "demotion",
    "damon",
];

/// `COMPACTION_STATUS` names (mmflags.h), indexed by `enum compact_result` =
/// `compaction::CompactResult`.
pub const COMPACT_STATUS: [&str; 9] = [
    "not_suitable_zone",
    "skipped",
    "deferred",
    "no_suitable_page",
    "continue",
    "complete",
    "partial_skipped",
    "contended",
    "success",
];

/// `ZONE_TYPE` names (mmflags.h) on S2, indexed by `enum zone_type` = `types::ZoneType`.
/// `ZONE_DEVICE` (4) has no entry and prints `0x4`.
pub const ZONE_NAMES: [&str; 4] = ["DMA", "DMA32", "Normal", "Movable"];

/// `__print_symbolic`: the name of `val` in `names`, or `0x%lx` of it.
pub(super) fn symbol(names: &[&'static str], val: u64) -> std::borrow::Cow<'static, str> {
    match usize::try_from(val).ok().and_then(|i| names.get(i)) {
        Some(&n) => n.into(),
        None => format!("{val:#x}").into(),
    }
}

/// Inverse of [`symbol`]: the index of `name` in `names`, or a `0x` hex value.
pub(super) fn parse_symbol(names: &[&str], s: &str) -> Option<u64> {
    match names.iter().position(|n| *n == s) {
        Some(i) => Some(i as u64),
        None => {
            let h = s.strip_prefix("0x")?;
            if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u64::from_str_radix(h, 16).ok()
        }
    }
}
