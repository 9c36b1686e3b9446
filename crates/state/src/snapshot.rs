//! A snapshot of a machine's physical memory (issue 21 item 1, docs/model §30): one
//! [`page`](crate::page) byte per pfn from pfn 0 to `end_pfn`, and the /proc texts, knobs and
//! confounders read around it.
//!
//! File: the [`container`](crate::container) layout with magic `FRAGSNAP`, the
//! [`SnapshotHeader`] as the JSON header and the page bytes in `PAGE` sections of
//! [`SECTION_CHUNK`](crate::container::SECTION_CHUNK) bytes, in pfn order.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::container::{ContainerReader, ContainerWriter, JsonKey};
use crate::procparse::{check_buddyinfo, check_pagetypeinfo, type_index};
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

impl ZoneSpan {
    /// The zone's key in the node-aware /proc tables: (node, name).
    pub fn key(&self) -> crate::procparse::ZoneKey {
        (self.node, self.name.clone())
    }

    /// The zone's name in reports: its name on node 0 ("Normal"), "node N Normal" on node N.
    pub fn label(&self) -> String {
        if self.node == 0 {
            self.name.clone()
        } else {
            format!("node {} {}", self.node, self.name)
        }
    }
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
    /// Online CPUs per NUMA node, node by node (/sys/devices/system/node/nodeN/cpulist); empty
    /// on a one-node machine and in files written before it was kept (every CPU on node 0).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_cpus: Vec<u32>,
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
    /// The mixed blocks page_owner showed, by allocation stack (`page_owner::PageOwnerBlame`,
    /// `fraglab blame SNAPSHOT`), when the kernel has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_owner_blame: Option<crate::page_owner::PageOwnerBlame>,
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
    /// The running kdamond's regions and their ages when the pages were read (docs/model
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

/// The most CPUs a snapshot header may give (`CONFIG_NR_CPUS`' largest value on x86-64).
pub const MAX_CPUS: u32 = 8192;
/// The largest `end_pfn` a snapshot header may give: 2^40 pfns, 4 PiB, the 52-bit physical
/// address space of x86-64 with 5-level paging.
pub const MAX_END_PFN: u64 = 1 << 40;
/// The memory reading and reconstructing a snapshot may need per pfn, at most: its page byte
/// and dirty bit, and in the worst case (every pfn its own order-0 folio, or free chunks
/// alternating with allocated pages) one 16-byte entry per pfn in the reconstruction's folio or
/// free list, doubled while the list grows, the slab folios' index and the per-block tables.
/// Measured as the peak resident memory of a release build above its start: the S2 fixture
/// (6.5 M pfns) 8.1 bytes per pfn; 4 M pfns of order-0 kernel pages 17.5; 4 M pfns of free and
/// kernel pages alternating (a free chunk and a folio every two pfns, the worst layout) 25.5.
/// The booted model's own memory map comes on top (the simulator's, not counted here).
pub const BYTES_PER_PFN: u64 = 48;
/// The environment variable that sets the memory budget of reading a snapshot (bytes, or with
/// a K, M, G or T suffix, powers of 1024).
pub const BUDGET_ENV: &str = "FRAGLAB_SNAPSHOT_BUDGET";

/// Limits of reading a snapshot's pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadLimits {
    /// Bytes that reading and reconstructing the snapshot may take (estimated as
    /// [`BYTES_PER_PFN`] × `end_pfn`); a larger snapshot is refused before anything is
    /// allocated for it.
    pub memory_budget: u64,
    /// Where the budget came from, for the refusal ("FRAGLAB_SNAPSHOT_BUDGET", "half of this
    /// machine's memory", ...).
    pub budget_source: String,
}

impl ReadLimits {
    /// The budget of [`BUDGET_ENV`] when set, else half of this machine's memory (MemTotal of
    /// /proc/meminfo; 8 GiB when it cannot be read).
    pub fn from_env() -> Result<ReadLimits, String> {
        if let Ok(v) = std::env::var(BUDGET_ENV) {
            let budget = parse_bytes(&v).ok_or_else(|| {
                format!("{BUDGET_ENV}={v:?} is not a size (bytes, or a number with K, M, G or T)")
            })?;
            return Ok(ReadLimits {
                memory_budget: budget,
                budget_source: format!("{BUDGET_ENV}={v}"),
            });
        }
        let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        Ok(match total {
            Some(kib) => ReadLimits {
                memory_budget: kib.saturating_mul(1024) / 2,
                budget_source: "half of this machine's memory".into(),
            },
            None => ReadLimits {
                memory_budget: 8 << 30,
                budget_source: "the default when /proc/meminfo cannot be read".into(),
            },
        })
    }
}

/// "123", "64G", "512M", "2T", "4K" as bytes (powers of 1024).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, shift) = match t.as_bytes().last()? {
        b'K' | b'k' => (&t[..t.len() - 1], 10),
        b'M' | b'm' => (&t[..t.len() - 1], 20),
        b'G' | b'g' => (&t[..t.len() - 1], 30),
        b'T' | b't' => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = num.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

/// `n` bytes in words ("1.5 GiB").
pub fn human_bytes(n: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// A header field that fails [`SnapshotHeader::check`]: where it is and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderProblem {
    /// The field's path in the header's JSON.
    pub field: Vec<JsonKey>,
    pub msg: String,
}

fn problem(field: &[JsonKey], msg: String) -> HeaderProblem {
    HeaderProblem {
        field: field.to_vec(),
        msg,
    }
}

fn key(name: &str) -> JsonKey {
    JsonKey::Field(name.to_string())
}

impl SnapshotHeader {
    /// Checks every field a reader sizes anything by or the reconstruction relies on, before
    /// anything is allocated: `end_pfn` in 1..=[`MAX_END_PFN`], `nr_cpus` in 1..=[`MAX_CPUS`],
    /// RAM ranges non-empty and within `end_pfn`, each zone's span within `end_pfn` with
    /// managed ≤ present ≤ spanned (an empty zone has no pages), populated zones not
    /// overlapping, page_owner's blocks within `end_pfn` and of a known type, and the
    /// pagetypeinfo and buddyinfo texts of both /proc reads parsed strictly
    /// ([`check_pagetypeinfo`], [`check_buddyinfo`]) with a block-count row for each populated
    /// zone.
    pub fn check(&self) -> Result<(), HeaderProblem> {
        let end = self.end_pfn;
        if !(1..=MAX_END_PFN).contains(&end) {
            return Err(problem(
                &[key("end_pfn")],
                format!("end_pfn {end} is outside 1..={MAX_END_PFN} (2^40 pfns, 4 PiB): corrupt"),
            ));
        }
        if !(1..=MAX_CPUS).contains(&self.nr_cpus) {
            return Err(problem(
                &[key("nr_cpus")],
                format!("nr_cpus {} is outside 1..={MAX_CPUS}: corrupt", self.nr_cpus),
            ));
        }
        for (i, r) in self.ram_ranges.iter().enumerate() {
            if r[0] >= r[1] || r[1] > end {
                return Err(problem(
                    &[key("ram_ranges"), JsonKey::Index(i)],
                    format!(
                        "RAM range [{}, {}) is empty or ends beyond end_pfn {end}: corrupt",
                        r[0], r[1]
                    ),
                ));
            }
        }
        self.check_zones()?;
        if let Some(po) = &self.page_owner_blocks {
            let nblocks = end.div_ceil(512);
            for (i, (b, t)) in po.iter().enumerate() {
                if *b >= nblocks || type_index(t).is_none() {
                    return Err(problem(
                        &[key("page_owner_blocks"), JsonKey::Index(i)],
                        format!("page_owner block {b} of type {t:?}: not a block below {nblocks} of a known migratetype: corrupt"),
                    ));
                }
            }
        }
        self.check_proc_texts()
    }

    fn check_zones(&self) -> Result<(), HeaderProblem> {
        let end = self.end_pfn;
        let at = |i: usize, f: &str| vec![key("zones"), JsonKey::Index(i), key(f)];
        for (i, z) in self.zones.iter().enumerate() {
            let zend = z.start_pfn.checked_add(z.spanned);
            if z.spanned > 0 && zend.is_none_or(|e| e > end) {
                return Err(problem(
                    &at(i, "spanned"),
                    format!(
                        "zone {} spans {} pages from pfn {}, beyond end_pfn {end}: corrupt",
                        z.name, z.spanned, z.start_pfn
                    ),
                ));
            }
            if z.present > z.spanned {
                return Err(problem(
                    &at(i, "present"),
                    format!(
                        "zone {} has present {} > spanned {}: corrupt",
                        z.name, z.present, z.spanned
                    ),
                ));
            }
            if z.managed > z.present {
                return Err(problem(
                    &at(i, "managed"),
                    format!(
                        "zone {} has managed {} > present {}: corrupt",
                        z.name, z.managed, z.present
                    ),
                ));
            }
        }
        let mut spans: Vec<(usize, &ZoneSpan)> = self
            .zones
            .iter()
            .enumerate()
            .filter(|(_, z)| z.spanned > 0)
            .collect();
        spans.sort_by_key(|(_, z)| z.start_pfn);
        for w in spans.windows(2) {
            let ((_, a), (j, b)) = (w[0], w[1]);
            if a.start_pfn + a.spanned > b.start_pfn {
                return Err(problem(
                    &at(j, "start_pfn"),
                    format!("zones {} and {} overlap: corrupt", a.name, b.name),
                ));
            }
        }
        Ok(())
    }

    fn check_proc_texts(&self) -> Result<(), HeaderProblem> {
        for (read, texts) in [
            ("proc_before", &self.proc_before),
            ("proc_after", &self.proc_after),
        ] {
            let at = |f: &str| vec![key(read), key(f)];
            if let Some(t) = texts.get("pagetypeinfo") {
                let pti = check_pagetypeinfo(t).map_err(|(line, why)| {
                    problem(
                        &at("pagetypeinfo"),
                        format!("{read}.pagetypeinfo line {line}: {why}"),
                    )
                })?;
                for z in self.zones.iter().filter(|z| z.spanned > 0) {
                    let Some(p) = pti.get(&z.key()) else {
                        return Err(problem(
                            &at("pagetypeinfo"),
                            format!("{read}.pagetypeinfo has no rows for zone {}", z.label()),
                        ));
                    };
                    let blocks = p.blocks.iter().fold(0u64, |a, &b| a.saturating_add(b));
                    if blocks > z.spanned.div_ceil(512) + 1 {
                        return Err(problem(
                            &at("pagetypeinfo"),
                            format!(
                                "{read}.pagetypeinfo counts {blocks} blocks in zone {}, which spans {} pages: corrupt",
                                z.label(), z.spanned
                            ),
                        ));
                    }
                }
            }
            if let Some(t) = texts.get("buddyinfo") {
                check_buddyinfo(t).map_err(|(line, why)| {
                    problem(&at("buddyinfo"), format!("{read}.buddyinfo line {line}: {why}"))
                })?;
            }
        }
        Ok(())
    }
}

/// The error of a header `p` of the file `r` reads: at the offset of the bad field (in a trace
/// file, the snapshot header is the `snapshot` member of the file's header).
fn header_error(r: &ContainerReader, p: HeaderProblem) -> StateError {
    let mut nested = vec![key("snapshot")];
    nested.extend(p.field.iter().cloned());
    let at = if !r.header_has_field(&p.field) && r.header_has_field(&nested) {
        r.header_field_offset(&nested)
    } else {
        r.header_field_offset(&p.field)
    };
    StateError::new(r.path(), Some(at), format!("snapshot header: {}", p.msg))
}

/// The snapshot header of the file `r` reads; a field of the wrong type or a missing one is an
/// error at its byte offset (serde_json's column in the one-line header).
fn parse_header(r: &ContainerReader) -> Result<SnapshotHeader, StateError> {
    let (bytes, at) = r.header_bytes();
    serde_json::from_slice(bytes).map_err(|e| {
        let col = if e.line() == 1 {
            e.column().saturating_sub(1) as u64
        } else {
            0
        };
        StateError::new(r.path(), Some(at + col), format!("snapshot header: {e}"))
    })
}

/// A snapshot in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub header: SnapshotHeader,
    /// One byte per pfn (`crate::page`), `header.end_pfn` of them.
    pub pages: Vec<u8>,
    /// PG_dirty or PG_writeback of page-cache pages (`File` and `Shmem` classes), one bit per
    /// pfn (bit `pfn % 8` of byte `pfn / 8`); empty when the snapshot has none (all clean).
    /// The page byte has no bit left for it (docs/model §30.2: tail pages carry the
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
    /// Reads only a snapshot file's header (not its pages), as stored: nothing is sized by it
    /// here; [`SnapshotHeader::check`] it before anything is ([`Snapshot::read`] does).
    pub fn read_header(path: &Path) -> Result<SnapshotHeader, StateError> {
        let r = ContainerReader::open(path, &SNAPSHOT_MAGIC, "snapshot")?;
        parse_header(&r)
    }

    /// Reads a snapshot file within the memory budget of [`ReadLimits::from_env`].
    pub fn read(path: &Path) -> Result<Snapshot, StateError> {
        let limits = ReadLimits::from_env().map_err(|e| StateError::new(path, None, e))?;
        Self::read_with(path, &limits)
    }

    /// Reads a snapshot file: its header checked ([`SnapshotHeader::check`]), its sizes
    /// checked against the file and `limits`, then its pages.
    pub fn read_with(path: &Path, limits: &ReadLimits) -> Result<Snapshot, StateError> {
        let mut r = ContainerReader::open(path, &SNAPSHOT_MAGIC, "snapshot")?;
        let header = parse_header(&r)?;
        let mut pages = Vec::new();
        let mut dirty = Vec::new();
        Self::read_pages_with(&mut r, &header, limits, &mut pages, &mut dirty, true)?;
        Ok(Snapshot { header, pages, dirty })
    }

    /// Checks `header` against the file `r` reads, before anything is allocated: the header's
    /// fields ([`SnapshotHeader::check`]); the `PAGE` sections that follow hold exactly
    /// `end_pfn` bytes and the `DIRT` sections (with `dirty_bitmap`) exactly one bit per pfn,
    /// by their section headers ([`ContainerReader::scan_sections`]); and reading and
    /// reconstructing `end_pfn` pfns fits in `limits.memory_budget`.
    pub fn check_sizes(
        r: &mut ContainerReader,
        header: &SnapshotHeader,
        limits: &ReadLimits,
    ) -> Result<(), StateError> {
        header.check().map_err(|p| header_error(r, p))?;
        let end_at = |r: &ContainerReader| header_error(r, problem(&[key("end_pfn")], String::new())).offset;
        let pages = r.scan_sections(&PAGE_TAG, r.offset())?;
        if pages.raw_bytes != header.end_pfn {
            return Err(StateError::new(
                r.path(),
                end_at(r),
                format!(
                    "snapshot header: end_pfn {} but the {} page sections from byte offset {} hold {} page bytes (the file is {} bytes): corrupt or truncated",
                    header.end_pfn,
                    pages.sections,
                    r.offset(),
                    pages.raw_bytes,
                    r.file_len()
                ),
            ));
        }
        if header.dirty_bitmap {
            let dirt = r.scan_sections(&DIRT_TAG, pages.stop_at)?;
            let want = header.end_pfn.div_ceil(8);
            if dirt.raw_bytes != want {
                return Err(StateError::new(
                    r.path(),
                    Some(pages.stop_at),
                    format!(
                        "the dirty bitmap's sections hold {} bytes, {want} expected for end_pfn {}: corrupt or truncated",
                        dirt.raw_bytes, header.end_pfn
                    ),
                ));
            }
        }
        let need = header.end_pfn.saturating_mul(BYTES_PER_PFN);
        if need > limits.memory_budget {
            return Err(StateError::new(
                r.path(),
                end_at(r),
                format!(
                    "end_pfn {} ({} of memory): reading and reconstructing it needs an estimated {} ({BYTES_PER_PFN} bytes per pfn), above the memory budget of {} ({}); set {BUDGET_ENV}=SIZE (e.g. {BUDGET_ENV}=64G) to raise it",
                    header.end_pfn,
                    human_bytes(header.end_pfn.saturating_mul(4096)),
                    human_bytes(need),
                    human_bytes(limits.memory_budget),
                    limits.budget_source
                ),
            ));
        }
        Ok(())
    }

    /// [`Snapshot::read_pages_with`] within the memory budget of [`ReadLimits::from_env`].
    pub fn read_pages(
        r: &mut ContainerReader,
        header: &SnapshotHeader,
        pages: &mut Vec<u8>,
        dirty: &mut Vec<u8>,
        to_end: bool,
    ) -> Result<(), StateError> {
        let limits = ReadLimits::from_env().map_err(|e| StateError::new(r.path(), None, e))?;
        Self::read_pages_with(r, header, &limits, pages, dirty, to_end)
    }

    /// Checks `header` against the file and `limits` ([`Snapshot::check_sizes`]), then reads
    /// `PAGE` sections from `r` into `pages` until `header.end_pfn` bytes are there, then (with
    /// `header.dirty_bitmap`) the `DIRT` sections into `dirty`. With `to_end`, the file must
    /// then end (its end marker); otherwise the reader is left at the section after them.
    pub fn read_pages_with(
        r: &mut ContainerReader,
        header: &SnapshotHeader,
        limits: &ReadLimits,
        pages: &mut Vec<u8>,
        dirty: &mut Vec<u8>,
        to_end: bool,
    ) -> Result<(), StateError> {
        Self::check_sizes(r, header, limits)?;
        let want = header.end_pfn as usize;
        pages.reserve(want);
        Self::read_tagged(r, PAGE_TAG, "page bytes", want, pages, |raw, before| {
            let i = raw
                .iter()
                .position(|&b| crate::page::PageClass::of(b).is_none())?;
            Some(format!(
                "page byte of pfn {} (in the section at this offset) has class {} (0..=11 expected): corrupt",
                before + i,
                raw[i] & 0x0f
            ))
        })?;
        if header.dirty_bitmap {
            let want = header.end_pfn.div_ceil(8) as usize;
            Self::read_tagged(r, DIRT_TAG, "dirty-bitmap bytes", want, dirty, |_, _| None)?;
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

    /// Reads consecutive `tag` sections from `r` into `buf` until it holds `want` bytes (one
    /// byte per pfn for `PAGE`, one bit per pfn for `DIRT`). Each section's bytes go through
    /// `check` (the bytes and how many were read before them) first. Refused, at the section's
    /// offset: a section of another tag, more bytes than `want`, a file that ends first.
    fn read_tagged(
        r: &mut ContainerReader,
        tag: [u8; 4],
        what: &str,
        want: usize,
        buf: &mut Vec<u8>,
        check: impl Fn(&[u8], usize) -> Option<String>,
    ) -> Result<(), StateError> {
        while buf.len() < want {
            let at = r.offset();
            let why = match r.next_section()? {
                Some((t, raw)) if t == tag => {
                    if buf.len() + raw.len() > want {
                        format!("more {what} than the header's {want}: corrupt")
                    } else if let Some(why) = check(&raw, buf.len()) {
                        why
                    } else {
                        buf.extend_from_slice(&raw);
                        continue;
                    }
                }
                Some((t, _)) => format!(
                    "section {:?} where {what} were expected ({} of {want} read): corrupt",
                    String::from_utf8_lossy(&t),
                    buf.len()
                ),
                None => format!("file ends after {} of {want} {what} (truncated)", buf.len()),
            };
            return Err(StateError::new(r.path(), Some(at), why));
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
