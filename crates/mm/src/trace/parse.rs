//! Reading `trace`/`trace_pipe` lines back into [`TraceRecord`]s.

use super::tables::{
    parse_flags, parse_gfp_flags, parse_reclaim_flags, parse_symbol, COMPACT_STATUS, MIGRATE_MODE_NAMES,
    MIGRATE_REASON_NAMES, VMSCAN_THROTTLE_FLAGS, ZONE_NAMES,
};
use super::{LatFlags, TraceEvent, TraceRecord, PAGEBLOCK_ORDER};

/// Parses one event line of a `trace`/`trace_pipe` file (a trailing newline is allowed) holding
/// one of the [`TraceEvent`]s. `None` for comment lines, other events, and lines that do not have
/// the layout [`TraceRecord::render`] prints.
///
/// Accepted beyond what `render` prints, for real traces: hashed `%p` values and `(null)` (the
/// page value is otherwise ignored: a NULL page with pfn 0 is a failed mm_page_alloc), a
/// `record-tgid` column, and no irq-info column (flags then read as [`LatFlags::NONE`]).
/// Timestamps come back as whole microseconds. mm_page_alloc_extfrag lines must print
/// `pageblock_order=9` and the matching `fragmenting`, since those are not stored. Compaction and
/// migrate events print no pointer, so their text must be exactly what [`TraceEvent::render_fields`]
/// prints for the parsed values (node 0 where the variant stores no node; the `%-8s` zone
/// padding; `limit` a power of two).
pub fn parse_trace_line(line: &str) -> Option<TraceRecord> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.starts_with('#') {
        return None;
    }
    // The comm may itself contain '-' or spaces: take the first '-' the rest parses after.
    line.match_indices('-').find_map(|(dash, _)| {
        let ctx = parse_after_comm(&line[dash + 1..])?;
        Some(TraceRecord {
            ts_ns: ctx.ts_ns,
            cpu: ctx.cpu,
            pid: ctx.pid,
            comm: line[..dash].trim_start_matches(' ').to_string(),
            flags: ctx.flags,
            event: parse_event(ctx.name, ctx.fields)?,
        })
    })
}

/// What follows `comm-` on an event line.
struct LineContext<'a> {
    pid: u32,
    cpu: u32,
    flags: LatFlags,
    ts_ns: u64,
    name: &'a str,
    fields: &'a str,
}

fn parse_after_comm(s: &str) -> Option<LineContext<'_>> {
    let mut c = Cursor(s);
    let pid = c.dec_u32()?;
    c.spaces1()?;
    // Optional record-tgid column: "(%7d) " or "(-------) ".
    if c.0.starts_with('(') {
        let end = c.0.find(") ")?;
        let inner = c.0[1..end].trim_start();
        if !(inner == "-------" || (!inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()))) {
            return None;
        }
        c.0 = &c.0[end + 2..];
    }
    c.lit("[")?;
    let cpu = c.dec_u32()?;
    c.lit("] ")?;
    // The irq-info column, then " %5lu": one space and the padding of the seconds.
    let flags = match c.0.get(..6).filter(|f| f.ends_with(' ')) {
        Some(f) => match LatFlags::parse(&f[..5]) {
            Some(flags) => {
                c.0 = &c.0[5..];
                flags
            }
            None => LatFlags::NONE,
        },
        None => LatFlags::NONE,
    };
    c.lit(" ")?;
    c.0 = c.0.trim_start_matches(' ');
    let secs = c.dec_u64()?;
    c.lit(".")?;
    let frac = c.0.get(..6)?;
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let usecs: u64 = frac.parse().ok()?;
    c.0 = &c.0[6..];
    c.lit(": ")?;
    let (name, fields) = c.0.split_once(": ")?;
    let ts_ns = secs
        .checked_mul(1_000_000)?
        .checked_add(usecs)?
        .checked_mul(1000)?;
    Some(LineContext {
        pid,
        cpu,
        flags,
        ts_ns,
        name,
        fields,
    })
}

fn parse_event(name: &str, fields: &str) -> Option<TraceEvent> {
    match name {
        "mm_page_alloc" => {
            let [page, pfn, order, mt, gfp] =
                kv(fields, ["page", "pfn", "order", "migratetype", "gfp_flags"])?;
            let pfn = hex_u32(pfn)?;
            let pfn = if is_null_ptr(page)? {
                if pfn != 0 {
                    return None;
                }
                None
            } else {
                Some(pfn)
            };
            Some(TraceEvent::MmPageAlloc {
                pfn,
                order: dec_i32(order)? as u32,
                gfp: parse_gfp_flags(gfp)?,
                migratetype: dec_i32(mt)?,
            })
        }
        "mm_page_free" => {
            let [page, pfn, order] = kv(fields, ["page", "pfn", "order"])?;
            is_null_ptr(page)?;
            Some(TraceEvent::MmPageFree {
                pfn: hex_u32(pfn)?,
                order: dec_i32(order)? as u32,
            })
        }
        "mm_page_alloc_zone_locked" => {
            let [page, pfn, order, mt, refill] =
                kv(fields, ["page", "pfn", "order", "migratetype", "percpu_refill"])?;
            is_null_ptr(page)?;
            Some(TraceEvent::MmPageAllocZoneLocked {
                pfn: hex_u32(pfn)?,
                order: order.parse().ok()?,
                migratetype: dec_i32(mt)?,
                percpu_refill: bool01(refill)?,
            })
        }
        "mm_page_pcpu_drain" => {
            let [page, pfn, order, mt] = kv(fields, ["page", "pfn", "order", "migratetype"])?;
            is_null_ptr(page)?;
            Some(TraceEvent::MmPagePcpuDrain {
                pfn: hex_u32(pfn)?,
                order: dec_i32(order)? as u32,
                migratetype: dec_i32(mt)?,
            })
        }
        "mm_page_alloc_extfrag" => {
            let [page, pfn, ao, fo, pbo, amt, fmt, frag, chown] = kv(
                fields,
                [
                    "page",
                    "pfn",
                    "alloc_order",
                    "fallback_order",
                    "pageblock_order",
                    "alloc_migratetype",
                    "fallback_migratetype",
                    "fragmenting",
                    "change_ownership",
                ],
            )?;
            is_null_ptr(page)?;
            let fallback_order = dec_i32(fo)?;
            if dec_i32(pbo)? != PAGEBLOCK_ORDER || bool01(frag)? != (fallback_order < PAGEBLOCK_ORDER) {
                return None;
            }
            Some(TraceEvent::MmPageAllocExtfrag {
                pfn: hex_u32(pfn)?,
                alloc_order: dec_i32(ao)?,
                fallback_order,
                alloc_migratetype: dec_i32(amt)?,
                fallback_migratetype: dec_i32(fmt)?,
                change_ownership: bool01(chown)?,
            })
        }
        _ => {
            let ev = parse_compaction_event(name, fields)?;
            let mut back = String::with_capacity(fields.len());
            ev.render_fields(&mut back);
            (back == fields).then_some(ev)
        }
    }
}

/// The compaction, vmscan, migrate and DAMON events, read leniently (the caller checks the text
/// re-renders), by trace system.
fn parse_compaction_event(name: &str, fields: &str) -> Option<TraceEvent> {
    if name.starts_with("mm_compaction_") {
        parse_compaction_fields(name, fields)
    } else if name.starts_with("mm_vmscan_") {
        parse_vmscan_fields(name, fields)
    } else if name.starts_with("mm_migrate_") {
        parse_migrate_fields(name, fields)
    } else if name.starts_with("damos_") {
        parse_damon_fields(name, fields)
    } else {
        None
    }
}

/// A `__print_symbolic` zone name (`%-8s`, so trailing spaces are dropped) as a zone index.
fn zone_symbol(s: &str) -> Option<u8> {
    u8::try_from(parse_symbol(&ZONE_NAMES, s.trim_end_matches(' '))?).ok()
}

/// A `COMPACTION_STATUS` name as a `compact_result` index.
fn compact_status(s: &str) -> Option<u8> {
    u8::try_from(parse_symbol(&COMPACT_STATUS, s)?).ok()
}

/// A `MIGRATE_MODE` name as a `migrate_mode` index.
fn migrate_mode(s: &str) -> Option<u8> {
    u8::try_from(parse_symbol(&MIGRATE_MODE_NAMES, s)?).ok()
}

/// A `MIGRATE_REASON` name as a `migrate_reason` index.
fn migrate_reason(s: &str) -> Option<u8> {
    u8::try_from(parse_symbol(&MIGRATE_REASON_NAMES, s)?).ok()
}

/// The node of events that store none: only node 0 (S2 has one node).
/// A node id of a compaction event (the model allows 16 nodes).
fn node_id(s: &str) -> Option<u8> {
    s.parse::<u8>().ok().filter(|&n| n < 16)
}

/// The model's zone index of (node, zone symbol): node × 5 + the zone type.
fn node_zone(nid: &str, z: &str) -> Option<u8> {
    Some(node_id(nid)? * 5 + zone_symbol(z)?)
}

/// The compaction events (include/trace/events/compaction.h).
fn parse_compaction_fields(name: &str, fields: &str) -> Option<TraceEvent> {
    Some(match name {
        "mm_compaction_isolate_migratepages"
        | "mm_compaction_isolate_freepages"
        | "mm_compaction_fast_isolate_freepages" => {
            let [start, end, scanned, taken] =
                scan(fields, ["range=(", " ~ ", ") nr_scanned=", " nr_taken=", ""])?;
            let (start_pfn, end_pfn) = (hex_u32(start)?, hex_u32(end)?);
            let (nr_scanned, nr_taken) = (dec_u64(scanned)?, dec_u64(taken)?);
            match name {
                "mm_compaction_fast_isolate_freepages" => TraceEvent::MmCompactionFastIsolateFreepages {
                    start_pfn,
                    end_pfn,
                    nr_scanned,
                    nr_taken,
                },
                _ => TraceEvent::MmCompactionIsolate {
                    free: name == "mm_compaction_isolate_freepages",
                    start_pfn,
                    end_pfn,
                    nr_scanned,
                    nr_taken,
                },
            }
        }
        "mm_compaction_migratepages" => {
            let [ok, failed] = kv(fields, ["nr_migrated", "nr_failed"])?;
            TraceEvent::MmCompactionMigratepages {
                nr_migrated: dec_u64(ok)?,
                nr_failed: dec_u64(failed)?,
            }
        }
        "mm_compaction_begin" | "mm_compaction_end" => parse_compaction_begin_end(name, fields)?,
        "mm_compaction_try_to_compact_pages" => {
            let [order, gfp, prio] = kv(fields, ["order", "gfp_mask", "priority"])?;
            TraceEvent::MmCompactionTryToCompactPages {
                order: dec_i32(order)?,
                gfp: parse_gfp_flags(gfp)?,
                prio: dec_i32(prio)?,
            }
        }
        "mm_compaction_suitable" | "mm_compaction_finished" => {
            let [nid, z, order, ret] = scan(fields, ["node=", " zone=", " order=", " ret=", ""])?;
            TraceEvent::MmCompactionSuitableFinished {
                finished: name == "mm_compaction_finished",
                zone: node_zone(nid, z)?,
                order: dec_i32(order)?,
                ret: compact_status(ret)?,
            }
        }
        "mm_compaction_deferred" | "mm_compaction_defer_compaction" | "mm_compaction_defer_reset" => {
            parse_compaction_defer(name, fields)?
        }
        "mm_compaction_kcompactd_sleep" => {
            let [nid] = kv(fields, ["nid"])?;
            TraceEvent::MmCompactionKcompactdSleep { nid: dec_i32(nid)? }
        }
        "mm_compaction_wakeup_kcompactd" | "mm_compaction_kcompactd_wake" => {
            let [nid, order, z] = scan(fields, ["nid=", " order=", " classzone_idx=", ""])?;
            TraceEvent::MmCompactionKcompactd {
                wake: name == "mm_compaction_kcompactd_wake",
                order: dec_i32(order)?,
                highest_zoneidx: node_zone(nid, z)?,
            }
        }
        _ => return None,
    })
}

/// compaction:mm_compaction_begin / _end (`status` only on _end).
fn parse_compaction_begin_end(name: &str, fields: &str) -> Option<TraceEvent> {
    let [zs, mig, free, ze, rest] = scan(
        fields,
        [
            "zone_start=",
            " migrate_pfn=",
            " free_pfn=",
            " zone_end=",
            ", mode=",
            "",
        ],
    )?;
    let (sync, status) = match (name, rest.split_once(" status=")) {
        ("mm_compaction_begin", None) => (rest, None),
        ("mm_compaction_end", Some((sync, st))) => (sync, Some(compact_status(st)?)),
        _ => return None,
    };
    Some(TraceEvent::MmCompactionBeginEnd {
        zone_start: hex_u32(zs)?,
        migrate_pfn: hex_u32(mig)?,
        free_pfn: hex_u32(free)?,
        zone_end: hex_u32(ze)?,
        sync: match sync {
            "sync" => true,
            "async" => false,
            _ => return None,
        },
        status,
    })
}

/// compaction:mm_compaction_deferred / _defer_compaction / _defer_reset; `limit` must be a
/// power of two (`1UL << defer_shift`).
fn parse_compaction_defer(name: &str, fields: &str) -> Option<TraceEvent> {
    let [nid, z, order, failed, considered, limit] = scan(
        fields,
        [
            "node=",
            " zone=",
            " order=",
            " order_failed=",
            " consider=",
            " limit=",
            "",
        ],
    )?;
    let zone = node_zone(nid, z)?;
    let limit = dec_u64(limit)?;
    if !limit.is_power_of_two() {
        return None;
    }
    Some(TraceEvent::MmCompactionDefer {
        kind: match name {
            "mm_compaction_deferred" => 0,
            "mm_compaction_defer_compaction" => 1,
            _ => 2,
        },
        zone,
        order: dec_i32(order)?,
        considered: considered.parse().ok()?,
        defer_shift: limit.trailing_zeros(),
        order_failed: dec_i32(failed)?,
    })
}

/// The vmscan events (include/trace/events/vmscan.h).
fn parse_vmscan_fields(name: &str, fields: &str) -> Option<TraceEvent> {
    Some(match name {
        "mm_vmscan_kswapd_sleep" => {
            let [nid] = kv(fields, ["nid"])?;
            TraceEvent::MmVmscanKswapdSleep { nid: dec_i32(nid)? }
        }
        "mm_vmscan_kswapd_wake" => {
            let [nid, order] = kv(fields, ["nid", "order"])?;
            TraceEvent::MmVmscanKswapdWake {
                nid: dec_i32(nid)?,
                order: dec_i32(order)?,
            }
        }
        "mm_vmscan_wakeup_kswapd" => {
            let [nid, order, gfp] = scan(fields, ["nid=", " order=", " gfp_flags=", ""])?;
            TraceEvent::MmVmscanWakeupKswapd {
                nid: dec_i32(nid)?,
                order: dec_i32(order)?,
                gfp: parse_gfp_flags(gfp)?,
            }
        }
        "mm_vmscan_direct_reclaim_begin" => {
            let [order, gfp] = scan(fields, ["order=", " gfp_flags=", ""])?;
            TraceEvent::MmVmscanDirectReclaimBegin {
                order: dec_i32(order)?,
                gfp: parse_gfp_flags(gfp)?,
            }
        }
        "mm_vmscan_direct_reclaim_end" => {
            let [n] = kv(fields, ["nr_reclaimed"])?;
            TraceEvent::MmVmscanDirectReclaimEnd {
                nr_reclaimed: dec_u64(n)?,
            }
        }
        "mm_vmscan_lru_isolate" => {
            let [cz, order, req, scanned, skipped, taken, lru] = kv(
                fields,
                [
                    "classzone",
                    "order",
                    "nr_requested",
                    "nr_scanned",
                    "nr_skipped",
                    "nr_taken",
                    "lru",
                ],
            )?;
            TraceEvent::MmVmscanLruIsolate {
                highest_zoneidx: dec_i32(cz)?,
                order: dec_i32(order)?,
                nr_requested: dec_u64(req)?,
                nr_scanned: dec_u64(scanned)?,
                nr_skipped: dec_u64(skipped)?,
                nr_taken: dec_u64(taken)?,
                lru: u8::try_from(parse_symbol(&crate::vmscan::LRU_NAMES, lru)?).ok()?,
            }
        }
        "mm_vmscan_lru_shrink_inactive" => parse_vmscan_lru_shrink_inactive(fields)?,
        "mm_vmscan_reclaim_pages" => parse_vmscan_reclaim_pages(fields)?,
        "mm_vmscan_throttled" => {
            let [nid, timeout, delayed, reason] =
                kv(fields, ["nid", "usec_timeout", "usect_delayed", "reason"])?;
            TraceEvent::MmVmscanThrottled {
                nid: dec_i32(nid)?,
                usec_timeout: dec_i32(timeout)?,
                usec_delayed: dec_i32(delayed)?,
                reason: parse_flags(reason, &VMSCAN_THROTTLE_FLAGS, "VMSCAN_THROTTLE_NONE")? as i32,
            }
        }
        "mm_vmscan_lru_shrink_active" => {
            let [nid, tk, ac, de, rf, pr, fl] = kv(
                fields,
                [
                    "nid",
                    "nr_taken",
                    "nr_active",
                    "nr_deactivated",
                    "nr_referenced",
                    "priority",
                    "flags",
                ],
            )?;
            TraceEvent::MmVmscanLruShrinkActive {
                nid: dec_i32(nid)?,
                nr_taken: dec_i64(tk)?,
                nr_active: dec_i64(ac)?,
                nr_deactivated: dec_i64(de)?,
                nr_referenced: dec_i64(rf)?,
                priority: dec_i32(pr)?,
                flags: parse_reclaim_flags(fl)?,
            }
        }
        _ => return None,
    })
}

/// vmscan:mm_vmscan_lru_shrink_inactive.
fn parse_vmscan_lru_shrink_inactive(fields: &str) -> Option<TraceEvent> {
    let [nid, sc, rc, d, wb, cg, im, aa, af, rk, uf, pr, fl] = kv(
        fields,
        [
            "nid",
            "nr_scanned",
            "nr_reclaimed",
            "nr_dirty",
            "nr_writeback",
            "nr_congested",
            "nr_immediate",
            "nr_activate_anon",
            "nr_activate_file",
            "nr_ref_keep",
            "nr_unmap_fail",
            "priority",
            "flags",
        ],
    )?;
    Some(TraceEvent::MmVmscanLruShrinkInactive {
        nid: dec_i32(nid)?,
        nr_scanned: dec_i64(sc)?,
        nr_reclaimed: dec_i64(rc)?,
        nr_dirty: dec_i64(d)?,
        nr_writeback: dec_i64(wb)?,
        nr_congested: dec_i64(cg)?,
        nr_immediate: dec_i64(im)?,
        nr_activate: [dec_i32(aa)?, dec_i32(af)?],
        nr_ref_keep: dec_i64(rk)?,
        nr_unmap_fail: dec_i64(uf)?,
        priority: dec_i32(pr)?,
        flags: parse_reclaim_flags(fl)?,
    })
}

/// vmscan:mm_vmscan_reclaim_pages.
fn parse_vmscan_reclaim_pages(fields: &str) -> Option<TraceEvent> {
    let [nid, sc, rc, d, wb, cg, im, aa, af, rk, uf] = kv(
        fields,
        [
            "nid",
            "nr_scanned",
            "nr_reclaimed",
            "nr_dirty",
            "nr_writeback",
            "nr_congested",
            "nr_immediate",
            "nr_activate_anon",
            "nr_activate_file",
            "nr_ref_keep",
            "nr_unmap_fail",
        ],
    )?;
    Some(TraceEvent::MmVmscanReclaimPages {
        nid: dec_i32(nid)?,
        nr_scanned: dec_i64(sc)?,
        nr_reclaimed: dec_i64(rc)?,
        nr_dirty: dec_i64(d)?,
        nr_writeback: dec_i64(wb)?,
        nr_congested: dec_i64(cg)?,
        nr_immediate: dec_i64(im)?,
        nr_activate: [dec_i32(aa)?, dec_i32(af)?],
        nr_ref_keep: dec_i64(rk)?,
        nr_unmap_fail: dec_i64(uf)?,
    })
}

/// The DAMON events (include/trace/events/damon.h).
fn parse_damon_fields(name: &str, fields: &str) -> Option<TraceEvent> {
    match name {
        "damos_before_apply" => {
            let [ctx, scheme, target, nr, start, end, acc, age] = scan(
                fields,
                [
                    "ctx_idx=",
                    " scheme_idx=",
                    " target_idx=",
                    " nr_regions=",
                    " ",
                    "-",
                    ": ",
                    " ",
                    "",
                ],
            )?;
            Some(TraceEvent::DamosBeforeApply {
                context_idx: ctx.parse().ok()?,
                scheme_idx: scheme.parse().ok()?,
                target_idx: dec_u64(target)?,
                nr_regions: nr.parse().ok()?,
                start: dec_u64(start)?,
                end: dec_u64(end)?,
                nr_accesses: acc.parse().ok()?,
                age: age.parse().ok()?,
            })
        }
        _ => None,
    }
}

/// The migrate events (include/trace/events/migrate.h).
fn parse_migrate_fields(name: &str, fields: &str) -> Option<TraceEvent> {
    Some(match name {
        "mm_migrate_pages" => {
            let [ok, failed, thp_ok, thp_failed, thp_split, split, m, r] = kv(
                fields,
                [
                    "nr_succeeded",
                    "nr_failed",
                    "nr_thp_succeeded",
                    "nr_thp_failed",
                    "nr_thp_split",
                    "nr_split",
                    "mode",
                    "reason",
                ],
            )?;
            TraceEvent::MmMigratePages {
                succeeded: dec_u64(ok)?,
                failed: dec_u64(failed)?,
                thp_succeeded: dec_u64(thp_ok)?,
                thp_failed: dec_u64(thp_failed)?,
                thp_split: dec_u64(thp_split)?,
                large_folio_split: dec_u64(split)?,
                mode: migrate_mode(m)?,
                reason: migrate_reason(r)?,
            }
        }
        "mm_migrate_pages_start" => {
            let [m, r] = kv(fields, ["mode", "reason"])?;
            TraceEvent::MmMigratePagesStart {
                mode: migrate_mode(m)?,
                reason: migrate_reason(r)?,
            }
        }
        _ => return None,
    })
}

/// Matches `s` against `lits[0] {} lits[1] {} ... {} lits[N]`, each `{}` running to the first
/// occurrence of the literal after it (to the end of `s` for an empty last literal).
fn scan<'a, const N: usize, const L: usize>(s: &'a str, lits: [&str; L]) -> Option<[&'a str; N]> {
    debug_assert_eq!(L, N + 1);
    let mut rest = s.strip_prefix(lits[0])?;
    let mut vals = [""; N];
    for (slot, lit) in vals.iter_mut().zip(&lits[1..]) {
        let end = if lit.is_empty() {
            rest.len()
        } else {
            rest.find(lit)?
        };
        *slot = &rest[..end];
        rest = &rest[end + lit.len()..];
    }
    rest.is_empty().then_some(vals)
}

/// Splits `k1=v1 k2=v2 ...` and checks the keys are exactly `keys`, in order.
fn kv<'a, const N: usize>(fields: &'a str, keys: [&str; N]) -> Option<[&'a str; N]> {
    let mut vals = [""; N];
    let mut it = fields.split(' ');
    for (slot, key) in vals.iter_mut().zip(keys) {
        let (k, v) = it.next()?.split_once('=')?;
        if k != key || v.is_empty() {
            return None;
        }
        *slot = v;
    }
    it.next().is_none().then_some(vals)
}

/// `Some(true)` for a NULL `%p` (`(null)` or all-zero hex), `Some(false)` for any other pointer
/// rendering (hex digits, or `(____ptrval____)` before the hash key is ready), `None` otherwise.
fn is_null_ptr(v: &str) -> Option<bool> {
    match v {
        "(null)" => Some(true),
        "(____ptrval____)" => Some(false),
        _ if v.bytes().all(|b| b.is_ascii_hexdigit()) => Some(v.bytes().all(|b| b == b'0')),
        _ => None,
    }
}

fn hex_u32(v: &str) -> Option<u32> {
    parse_hex_u32(v.strip_prefix("0x")?)
}

pub(super) fn parse_hex_u32(h: &str) -> Option<u32> {
    if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(h, 16).ok()
}

fn dec_i32(v: &str) -> Option<i32> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

fn dec_i64(v: &str) -> Option<i64> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

fn dec_u64(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

fn bool01(v: &str) -> Option<bool> {
    match v {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// A tiny left-to-right scanner.
struct Cursor<'a>(&'a str);

impl Cursor<'_> {
    fn digits(&mut self) -> Option<&str> {
        let n = self.0.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let (d, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(d)
    }

    fn dec_u32(&mut self) -> Option<u32> {
        self.digits()?.parse().ok()
    }

    fn dec_u64(&mut self) -> Option<u64> {
        self.digits()?.parse().ok()
    }

    fn lit(&mut self, l: &str) -> Option<()> {
        self.0 = self.0.strip_prefix(l)?;
        Some(())
    }

    fn spaces1(&mut self) -> Option<()> {
        let rest = self.0.trim_start_matches(' ');
        if rest.len() == self.0.len() {
            return None;
        }
        self.0 = rest;
        Some(())
    }
}
