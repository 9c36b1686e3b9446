//! A snapshot of a machine's physical memory (issue 21 item 1, kernel-model.md §30): one
//! [`page`](crate::page) byte per pfn from pfn 0 to `end_pfn`, and the /proc texts, knobs and
//! confounders read around it.
//!
//! File: the [`container`](crate::container) layout with magic `FRAGSNAP`, the
//! [`SnapshotHeader`] as the JSON header and the page bytes in `PAGE` sections of
//! [`SECTION_CHUNK`](crate::container::SECTION_CHUNK) bytes, in pfn order.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::container::{ContainerReader, ContainerWriter};
use crate::StateError;

pub const SNAPSHOT_MAGIC: [u8; 8] = *b"FRAGSNAP";
pub const PAGE_TAG: [u8; 4] = *b"PAGE";
/// The dirty bitmap's sections (after the page bytes, when `SnapshotHeader::dirty_bitmap`).
pub const DIRT_TAG: [u8; 4] = *b"DIRT";

/// One zone as /proc/zoneinfo gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSpan {
    pub node: u32,
    /// "DMA", "DMA32", "Normal", "Movable", ...
    pub name: String,
    pub start_pfn: u64,
    pub spanned: u64,
    pub present: u64,
    pub managed: u64,
    /// Watermarks (pages): min, low, high.
    pub min: u64,
    pub low: u64,
    pub high: u64,
    /// Pages on the zone's PCP lists summed over CPUs (`count:` lines): free pages that show no
    /// flags (§30.2.3).
    pub pcp_count: u64,
}

/// Everything but the page bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotHeader {
    /// Seconds since the epoch when the pfn read began.
    pub taken_at_unix_s: u64,
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    pub nr_cpus: u32,
    /// Number of pfns covered (the page bytes' length).
    pub end_pfn: u64,
    /// System RAM as [start_pfn, end_pfn) ranges (/proc/iomem).
    pub ram_ranges: Vec<[u64; 2]>,
    pub zones: Vec<ZoneSpan>,
    /// /proc files read just before the pfn read, by name ("buddyinfo", "pagetypeinfo",
    /// "zoneinfo", "vmstat", "meminfo").
    pub proc_before: BTreeMap<String, String>,
    /// The same files read just after (§30.5 item 6: bracket the read).
    pub proc_after: BTreeMap<String, String>,
    /// Every knob the spec language names, by its sysctl/sysfs name, as read.
    pub knobs: BTreeMap<String, String>,
    /// Free page reporting and DAMON at the time (the host engine's confounders record).
    pub confounders: serde_json::Value,
    /// Block types from page_owner (§30.4) when the kernel has it: (pageblock index, type name).
    pub page_owner_blocks: Option<Vec<(u64, String)>>,
    /// How long the pfn read took (ns).
    pub read_ns: u64,
    /// The file has a dirty bitmap after the page bytes (`DIRT` sections; files written before
    /// it existed lack it and read as all clean).
    #[serde(default)]
    pub dirty_bitmap: bool,
    /// Free pages carry free page reporting's mark (`page::REPORTED`; files written before it
    /// existed lack it: which chunks were reported is unknown).
    #[serde(default)]
    pub reported_bits: bool,
    /// The running kdamond's regions and their ages when the pages were read (kernel-model.md
    /// §27.2 item 3), so that a booted model's kdamond starts where the kernel's was; `None`
    /// in files written before it existed, and when the capture did not ask for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damon: Option<crate::damon::DamonCapture>,
}

impl SnapshotHeader {
    /// The machine's free page reporting order when the snapshot was taken (§32.1):
    /// `page_reporting_order` from the recorded confounders
    /// (`confounders.page_reporting.order`, the sysfs value, which reads −1 — recorded as null —
    /// until a reporting device registers). `None` when no device had registered, when the
    /// value is not an order 0..=10, and for files without the record (written before it, or
    /// on a machine without the page_reporting module): such a snapshot boots without
    /// reporting.
    pub fn page_reporting_order(&self) -> Option<u32> {
        let order = self.confounders.get("page_reporting")?.get("order")?.as_u64()?;
        (order <= 10).then_some(order as u32)
    }
}

/// A snapshot in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub header: SnapshotHeader,
    /// One byte per pfn (`crate::page`), `header.end_pfn` of them.
    pub pages: Vec<u8>,
    /// PG_dirty or PG_writeback of page-cache pages (`File` and `Shmem` classes), one bit per
    /// pfn (bit `pfn % 8` of byte `pfn / 8`); empty when the snapshot has none (all clean).
    /// The page byte has no bit left for it (kernel-model.md §30.2: tail pages carry the
    /// head's flags, so the head's bit is the folio's).
    pub dirty: Vec<u8>,
}

impl Snapshot {
    /// Writes the snapshot to `path` (through `PATH.partial`, renamed when complete).
    pub fn write(&self, path: &Path) -> Result<(), StateError> {
        let mut w = ContainerWriter::create(path, &SNAPSHOT_MAGIC, &self.header_json())?;
        self.write_sections(&mut w)?;
        w.finish()
    }

    pub fn header_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.header).expect("the header serializes")
    }

    /// Writes the page bytes as `PAGE` sections (a trace file embeds its snapshot this way).
    pub fn write_sections(&self, w: &mut ContainerWriter) -> Result<(), StateError> {
        w.sections(&PAGE_TAG, &self.pages)?;
        if self.header.dirty_bitmap {
            assert_eq!(
                self.dirty.len() as u64,
                self.header.end_pfn.div_ceil(8),
                "the dirty bitmap covers every pfn"
            );
            w.sections(&DIRT_TAG, &self.dirty)?;
        }
        Ok(())
    }

    /// Whether the page at `pfn` was dirty or under writeback (page cache only).
    pub fn is_dirty(&self, pfn: u64) -> bool {
        self.dirty
            .get((pfn / 8) as usize)
            .is_some_and(|b| b & (1 << (pfn % 8)) != 0)
    }

    /// Reads only a snapshot file's header (not its pages).
    pub fn read_header(path: &Path) -> Result<SnapshotHeader, StateError> {
        let r = ContainerReader::open(path, &SNAPSHOT_MAGIC, "snapshot")?;
        serde_json::from_value(r.header.clone())
            .map_err(|e| StateError::new(path, Some(16), format!("snapshot header: {e}")))
    }

    /// Reads a snapshot file.
    pub fn read(path: &Path) -> Result<Snapshot, StateError> {
        let mut r = ContainerReader::open(path, &SNAPSHOT_MAGIC, "snapshot")?;
        let header: SnapshotHeader = serde_json::from_value(r.header.clone())
            .map_err(|e| StateError::new(path, Some(16), format!("snapshot header: {e}")))?;
        let mut pages = Vec::new();
        let mut dirty = Vec::new();
        Self::read_pages(&mut r, &header, &mut pages, &mut dirty, true)?;
        Ok(Snapshot { header, pages, dirty })
    }

    /// Reads `PAGE` sections from `r` into `pages` until `header.end_pfn` bytes are there, then
    /// (with `header.dirty_bitmap`) the `DIRT` sections into `dirty`. With `to_end`, the file
    /// must then end (its end marker); otherwise the reader is left at the section after them.
    pub fn read_pages(
        r: &mut ContainerReader,
        header: &SnapshotHeader,
        pages: &mut Vec<u8>,
        dirty: &mut Vec<u8>,
        to_end: bool,
    ) -> Result<(), StateError> {
        let want = header.end_pfn as usize;
        pages.reserve(want);
        while pages.len() < want {
            let at = r.offset();
            match r.next_section()? {
                Some((tag, raw)) if tag == PAGE_TAG => {
                    if pages.len() + raw.len() > want {
                        return Err(StateError::new(
                            r.path(),
                            Some(at),
                            format!("more page bytes than end_pfn {want}: corrupt"),
                        ));
                    }
                    pages.extend_from_slice(&raw);
                }
                Some((tag, _)) => {
                    return Err(StateError::new(
                        r.path(),
                        Some(at),
                        format!(
                            "section {:?} where page bytes were expected ({} of {want} read)",
                            String::from_utf8_lossy(&tag),
                            pages.len()
                        ),
                    ))
                }
                None => {
                    return Err(StateError::new(
                        r.path(),
                        Some(at),
                        format!("file ends after {} of {want} page bytes (truncated)", pages.len()),
                    ))
                }
            }
        }
        if let Some(bad) = pages
            .iter()
            .position(|&b| crate::page::PageClass::of(b).is_none())
        {
            return Err(StateError::new(
                r.path(),
                None,
                format!(
                    "page byte of pfn {bad} has class {} (0..=11 expected): corrupt",
                    pages[bad] & 0x0f
                ),
            ));
        }
        if header.dirty_bitmap {
            let want = header.end_pfn.div_ceil(8) as usize;
            while dirty.len() < want {
                let at = r.offset();
                match r.next_section()? {
                    Some((tag, raw)) if tag == DIRT_TAG && dirty.len() + raw.len() <= want => {
                        dirty.extend_from_slice(&raw)
                    }
                    Some((tag, _)) => {
                        return Err(StateError::new(
                            r.path(),
                            Some(at),
                            format!(
                                "section {:?} where the dirty bitmap was expected ({} of {want} bytes read): corrupt",
                                String::from_utf8_lossy(&tag),
                                dirty.len()
                            ),
                        ))
                    }
                    None => {
                        return Err(StateError::new(
                            r.path(),
                            Some(at),
                            format!("file ends after {} of {want} dirty-bitmap bytes (truncated)", dirty.len()),
                        ))
                    }
                }
            }
        }
        if to_end {
            let at = r.offset();
            if let Some((tag, _)) = r.next_section()? {
                return Err(StateError::new(
                    r.path(),
                    Some(at),
                    format!(
                        "unexpected section {:?} after the page bytes",
                        String::from_utf8_lossy(&tag)
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod page_reporting_tests {
    use super::*;

    /// §32.1: the order a snapshot boot takes is the recorded sysfs value when a device had
    /// registered; a header without the record (or with −1, recorded as null) has none.
    #[test]
    fn s32_page_reporting_order_of_a_snapshot() {
        let h = |c: serde_json::Value| SnapshotHeader {
            confounders: c,
            ..Default::default()
        };
        let pr = |o: serde_json::Value| serde_json::json!({"page_reporting": {"order": o}, "damon": null});
        assert_eq!(h(pr(serde_json::json!(9))).page_reporting_order(), Some(9));
        assert_eq!(h(pr(serde_json::json!(0))).page_reporting_order(), Some(0));
        assert_eq!(h(pr(serde_json::Value::Null)).page_reporting_order(), None);
        assert_eq!(h(pr(serde_json::json!(11))).page_reporting_order(), None);
        assert_eq!(
            h(serde_json::json!({"page_reporting": null})).page_reporting_order(),
            None
        );
        assert_eq!(h(serde_json::Value::Null).page_reporting_order(), None);
        // A header written before any of this (its JSON as an older writer left it) still reads.
        let old = serde_json::json!({
            "taken_at_unix_s": 1, "hostname": "h", "kernel": "6.18", "nr_cpus": 2, "end_pfn": 8,
            "ram_ranges": [], "zones": [], "proc_before": {}, "proc_after": {}, "knobs": {},
            "confounders": {"damon": null}, "page_owner_blocks": null, "read_ns": 0
        });
        let old: SnapshotHeader = serde_json::from_value(old).unwrap();
        assert_eq!(old.page_reporting_order(), None);
    }
}
