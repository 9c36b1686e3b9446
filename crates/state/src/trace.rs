//! A recorded tracepoint stream (issue 21 items 4–5): the ftrace text lines of the recorded
//! events, streamed, with the snapshot taken at the start.
//!
//! File: the [`container`](crate::container) layout with magic `FRAGTRCE`, a [`TraceHeader`] as
//! the JSON header, then (optionally) the start snapshot's `PAGE` sections, then `TEXT`
//! sections holding whole lines of ftrace text ("comm-pid [cpu] flags ts: event: fields").
//! A plain ftrace text file (`cat trace`, `trace-cmd report` without `-R`) is read too.
//!
//! Refused early, with the file (and the line and byte offset) named: what is not a regular
//! file (a FIFO, `/dev/zero`: checked before opening, so never blocking), an empty file, a line
//! longer than [`MAX_LINE_BYTES`], a line holding a NUL byte (binary data). The format is
//! sniffed through the reader that then reads the text, so no byte is lost. Traces with no
//! event line are refused by their readers (`fraglab trace info`, the replay).
//!
//! INTERFACE (issue 21): `TraceWriter` (the host's recorder writes it) and `TraceReader` (the
//! replay reads it); lines are never all in memory at once.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::container::{partial_path, ContainerReader, ContainerWriter, MAX_SECTION_RAW, SECTION_CHUNK};
use crate::snapshot::{Snapshot, SnapshotHeader, DIRT_TAG, PAGE_TAG};
use crate::StateError;

pub const TRACE_MAGIC: [u8; 8] = *b"FRAGTRCE";
pub const TEXT_TAG: [u8; 4] = *b"TEXT";

/// The trace file's header.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// The events enabled ("kmem:mm_page_alloc", ...).
    pub events: Vec<String>,
    pub started_at_unix_s: u64,
    pub duration_ns: u64,
    pub nr_cpus: u32,
    /// Per-CPU buffer size used (KiB) and events the kernel dropped (per_cpu/*/stats "overrun").
    pub buffer_size_kb: u64,
    pub lost_events: u64,
    /// Knobs at the start (sysctl/sysfs names).
    pub knobs: BTreeMap<String, String>,
    /// /proc files at the end ("pagetypeinfo", "buddyinfo", "vmstat", ...): the recorded run's
    /// end state.
    pub proc_end: BTreeMap<String, String>,
    /// Free page reporting and DAMON during the recording.
    pub confounders: serde_json::Value,
    /// The start snapshot's header when the file embeds one (its page bytes follow the header).
    pub snapshot: Option<SnapshotHeader>,
    /// What was run while recording (a command line or a spec path), for the report.
    pub workload: String,
    /// The workload command's exit status (None: no command, or killed by a signal).
    #[serde(default)]
    pub workload_status: Option<i32>,
    /// The recorder's own pid: its allocations (reading trace_pipe, writing the file) are in the
    /// trace under this pid (comm "fraglab").
    #[serde(default)]
    pub recorder_pid: Option<u32>,
    /// Lines in the file's TEXT sections (the writer sets it at `finish`).
    #[serde(default)]
    pub lines: u64,
    /// The trace clock of the timestamps ("mono": CLOCK_MONOTONIC; "" for unknown, e.g. plain
    /// text, where the kernel's default is "local").
    #[serde(default)]
    pub clock: String,
    /// When the events were enabled and disabled, on `clock` (ns).
    #[serde(default)]
    pub trace_start_ns: u64,
    #[serde(default)]
    pub trace_end_ns: u64,
    /// When the embedded snapshot's pfn read began and ended, on `clock` (ns). Events with
    /// timestamps inside this window may or may not be reflected in the snapshot's bytes.
    #[serde(default)]
    pub snapshot_window_ns: Option<[u64; 2]>,
    /// Lines whose pid is the recorder's (`recorder_pid` or its reader thread): the recording's
    /// own allocations and frees.
    #[serde(default)]
    pub recorder_lines: u64,
    /// Tids of the recorder's threads (the reader thread's lines carry its tid).
    #[serde(default)]
    pub recorder_tids: Vec<u32>,
    /// The recording was stopped early by this signal (SIGINT, SIGTERM); the lines up to then
    /// are all there.
    #[serde(default)]
    pub interrupted_by: Option<i32>,
}

/// Writes a trace file (through `PATH.partial`).
///
/// The header is at the start of the file but is only complete at the end (durations, lost
/// events, end state), so the sections go to spools as they come: the `TEXT`s to
/// `PATH.body.partial`, the snapshot's `PAGE`s to `PATH.pages.partial` (the snapshot may be
/// given after lines, [`TraceWriter::set_snapshot`]: the recorder traces while it reads the
/// snapshot). [`TraceWriter::finish`] writes the header into `PATH.partial`, copies the `PAGE`
/// spool then the `TEXT` spool after it verbatim (no recompression) and renames the result into
/// place. Memory: one section of lines (at most [`SECTION_CHUNK`] bytes) plus its compressed
/// form. A writer dropped without `finish` removes its spools and partial file.
pub struct TraceWriter {
    path: PathBuf,
    spool_path: PathBuf,
    spool: Option<ContainerWriter>,
    pages_path: PathBuf,
    /// Whole lines, each with its newline, not yet in a section.
    buf: Vec<u8>,
    snapshot: Option<SnapshotHeader>,
    lines: u64,
    text_bytes: u64,
    finished: bool,
}

/// `PATH.body.partial`: where a [`TraceWriter`] spools its `TEXT` sections.
pub fn spool_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".body.partial");
    PathBuf::from(s)
}

/// `PATH.pages.partial`: where a [`TraceWriter`] spools the snapshot's `PAGE` sections.
pub fn pages_spool_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".pages.partial");
    PathBuf::from(s)
}

impl TraceWriter {
    /// Starts a trace file at `path`. `header` is what is known at the start (its `snapshot` is
    /// replaced by `snapshot`'s header); `snapshot`, when given, is written at once, so the
    /// caller may drop it.
    pub fn create(
        path: &Path,
        header: &TraceHeader,
        snapshot: Option<&Snapshot>,
    ) -> Result<TraceWriter, StateError> {
        serde_json::to_value(header)
            .map_err(|e| StateError::new(path, None, format!("trace header: {e}")))?;
        let spool_path = spool_path(path);
        let spool = ContainerWriter::create_spool(&spool_path)?;
        let mut w = TraceWriter {
            path: path.to_path_buf(),
            spool_path,
            spool: Some(spool),
            pages_path: pages_spool_path(path),
            buf: Vec::with_capacity(SECTION_CHUNK),
            snapshot: None,
            lines: 0,
            text_bytes: 0,
            finished: false,
        };
        if let Some(s) = snapshot {
            w.set_snapshot(s)?;
        }
        Ok(w)
    }

    /// Embeds `snapshot` (written at once to the `PAGE` spool; the caller may drop it). At most
    /// one snapshot per file; it may come before or after lines.
    pub fn set_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StateError> {
        if self.snapshot.is_some() {
            return Err(StateError::new(
                &self.path,
                None,
                "a trace file embeds one snapshot; a second was given",
            ));
        }
        if snapshot.pages.len() as u64 != snapshot.header.end_pfn {
            return Err(StateError::new(
                &self.path,
                None,
                format!(
                    "the snapshot to embed has {} page bytes, its end_pfn says {}",
                    snapshot.pages.len(),
                    snapshot.header.end_pfn
                ),
            ));
        }
        let mut pages = ContainerWriter::create_spool(&self.pages_path)?;
        snapshot.write_sections(&mut pages)?;
        pages.finish_spool()?;
        self.snapshot = Some(snapshot.header.clone());
        Ok(())
    }

    /// Appends one line of ftrace text (without its newline).
    pub fn line(&mut self, line: &str) -> Result<(), StateError> {
        if line.contains('\n') {
            return Err(StateError::new(
                &self.path,
                None,
                format!("trace line {} contains a newline: {line:?}", self.lines + 1),
            ));
        }
        if line.len() >= MAX_SECTION_RAW as usize {
            return Err(StateError::new(
                &self.path,
                None,
                format!("trace line {} is {} bytes long", self.lines + 1, line.len()),
            ));
        }
        if !self.buf.is_empty() && self.buf.len() + line.len() + 1 > SECTION_CHUNK {
            self.flush_text()?;
        }
        self.buf.extend_from_slice(line.as_bytes());
        self.buf.push(b'\n');
        self.lines += 1;
        self.text_bytes += line.len() as u64 + 1;
        Ok(())
    }

    /// Lines appended so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Bytes of text appended so far (before compression).
    pub fn text_bytes(&self) -> u64 {
        self.text_bytes
    }

    /// Compressed bytes in the spool so far (the file will be about this plus the header).
    pub fn spooled_bytes(&self) -> u64 {
        self.spool.as_ref().map_or(0, |s| s.written())
    }

    fn flush_text(&mut self) -> Result<(), StateError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let spool = self.spool.as_mut().expect("spool open until finish");
        spool.section(&TEXT_TAG, &self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Completes the file; `header` replaces the one given to `create` (end-state fields). Its
    /// `snapshot` and `lines` are set from what was written.
    pub fn finish(mut self, header: &TraceHeader) -> Result<(), StateError> {
        self.flush_text()?;
        let spool = self.spool.take().expect("spool open until finish");
        spool.finish_spool()?;
        let mut h = header.clone();
        h.snapshot = self.snapshot.clone();
        h.lines = self.lines;
        let json = serde_json::to_value(&h)
            .map_err(|e| StateError::new(&self.path, None, format!("trace header: {e}")))?;
        let mut out = ContainerWriter::create(&self.path, &TRACE_MAGIC, &json)?;
        if self.snapshot.is_some() {
            out.append_spool(&self.pages_path)?;
        }
        out.append_spool(&self.spool_path)?;
        out.finish()?;
        self.finished = true;
        let _ = std::fs::remove_file(&self.pages_path);
        std::fs::remove_file(&self.spool_path)
            .map_err(|e| StateError::new(&self.spool_path, None, format!("cannot remove: {e}")))
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if !self.finished {
            drop(self.spool.take());
            let _ = std::fs::remove_file(&self.spool_path);
            let _ = std::fs::remove_file(&self.pages_path);
            let _ = std::fs::remove_file(partial_path(&self.path));
        }
    }
}

enum Source {
    /// A FRAGTRCE file: the current TEXT section and the position in it.
    Container {
        r: ContainerReader,
        text: Vec<u8>,
        pos: usize,
        /// Offset of the current section (for errors).
        at: u64,
    },
    /// Plain ftrace text (the reader that sniffed the format: no byte is lost).
    Plain {
        inp: PlainInput,
        offset: u64,
        line: Vec<u8>,
    },
}

/// Reads a trace file or a plain ftrace text file, line by line.
///
/// A FRAGTRCE file is read one section at a time (a few MB in memory whatever the file's size);
/// plain text one line at a time. Errors name the file and the byte offset of the bad section
/// (container) or the line (plain text).
pub struct TraceReader {
    path: PathBuf,
    header: TraceHeader,
    snapshot: Option<Snapshot>,
    /// The snapshot's PAGE sections are still ahead of the TEXT sections (not read at open):
    /// skipped by `next_line`.
    skip_pages: bool,
    src: Source,
    line_no: u64,
    /// Plain text: the byte offset of the last line read.
    line_start: u64,
    /// Events named by [`MISSING_EVENT_PREFIX`] comment lines read so far.
    missing_events: Vec<String>,
}

/// The comment line the host engine writes into a trace file (`HostOptions::trace_to`) for
/// each event it was to record and the kernel does not have (no DAMON: no `damon:` events),
/// followed by a space and `group:name`.
pub const MISSING_EVENT_PREFIX: &str = "# fraglab host trace: not on this kernel:";

/// The longest line of trace text a [`TraceReader`] reads (kernel event lines are a few hundred
/// bytes): a longer line is an error naming the file, the line and its byte offset, found after
/// reading at most this many bytes of it, so a file without newlines (`/dev/zero`, a binary
/// file) neither fills memory nor reads on.
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// Refuses what is not a regular file (a FIFO, a character device such as `/dev/zero`, a
/// socket, a directory) before it is opened: opening a FIFO with no writer blocks, a device may
/// never end, and the reader must know the file stays what it sniffed. The metadata is read
/// without opening the file, so this never blocks.
pub fn check_regular_file(path: &Path, what: &str) -> Result<(), StateError> {
    let m = std::fs::metadata(path).map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?;
    let ft = m.file_type();
    if ft.is_file() {
        return Ok(());
    }
    use std::os::unix::fs::FileTypeExt as _;
    let kind = if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    Err(StateError::new(
        path,
        None,
        format!("{kind}, not a regular file: a {what} is read from a file (save the stream to one first, e.g. `cat PIPE > {what}.txt`)"),
    ))
}

/// Plain text's input: the bytes read to sniff the format, then the rest of the file.
type PlainInput = BufReader<std::io::Chain<std::io::Cursor<Vec<u8>>, File>>;

/// Opens `path` and reads its first 8 bytes (fewer for a shorter file); the reader returned
/// gives them again before the rest, so sniffing the format loses no byte.
fn sniff(path: &Path) -> Result<(Vec<u8>, PlainInput), StateError> {
    let mut f = File::open(path).map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?;
    let mut m = [0u8; 8];
    let mut got = 0;
    while got < m.len() {
        match f.read(&mut m[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(StateError::new(
                    path,
                    Some(got as u64),
                    format!("read failed: {e}"),
                ))
            }
        }
    }
    let head = m[..got].to_vec();
    let inp = BufReader::with_capacity(1 << 20, std::io::Cursor::new(head.clone()).chain(f));
    Ok((head, inp))
}

impl TraceReader {
    /// Opens `path`: a FRAGTRCE file (its embedded snapshot, if any, is read now) or plain text.
    pub fn open(path: &Path) -> Result<TraceReader, StateError> {
        Self::open_with(path, true)
    }

    /// Opens `path` without keeping the embedded snapshot (its sections are skipped as the
    /// lines are read; the header still says whether there is one): for summaries.
    pub fn open_without_snapshot(path: &Path) -> Result<TraceReader, StateError> {
        Self::open_with(path, false)
    }

    fn open_with(path: &Path, keep_snapshot: bool) -> Result<TraceReader, StateError> {
        check_regular_file(path, "trace")?;
        let (head, inp) = sniff(path)?;
        if head.is_empty() {
            return Err(StateError::new(path, Some(0), "an empty file, not a trace"));
        }
        if head == TRACE_MAGIC {
            drop(inp);
            let mut r = ContainerReader::open(path, &TRACE_MAGIC, "trace")?;
            let header: TraceHeader = serde_json::from_value(r.header.clone())
                .map_err(|e| StateError::new(path, Some(16), format!("trace header: {e}")))?;
            let mut snapshot = None;
            let mut skip_pages = false;
            if let Some(sh) = &header.snapshot {
                if keep_snapshot {
                    let mut pages = Vec::new();
                    let mut dirty = Vec::new();
                    Snapshot::read_pages(&mut r, sh, &mut pages, &mut dirty, false)?;
                    snapshot = Some(Snapshot {
                        header: sh.clone(),
                        pages,
                        dirty,
                    });
                } else {
                    skip_pages = true;
                }
            }
            let at = r.offset();
            Ok(TraceReader {
                path: path.to_path_buf(),
                header,
                snapshot,
                skip_pages,
                src: Source::Container {
                    r,
                    text: Vec::new(),
                    pos: 0,
                    at,
                },
                line_no: 0,
                line_start: 0,
                missing_events: Vec::new(),
            })
        } else if head == crate::snapshot::SNAPSHOT_MAGIC {
            Err(StateError::new(
                path,
                Some(0),
                "a snapshot file (FRAGSNAP), not a trace: give it as [machine] snapshot",
            ))
        } else {
            Ok(TraceReader {
                path: path.to_path_buf(),
                header: TraceHeader::default(),
                snapshot: None,
                skip_pages: false,
                src: Source::Plain {
                    inp,
                    offset: 0,
                    line: Vec::new(),
                },
                line_no: 0,
                line_start: 0,
                missing_events: Vec::new(),
            })
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True for a FRAGTRCE file, false for plain ftrace text.
    pub fn is_container(&self) -> bool {
        matches!(self.src, Source::Container { .. })
    }

    /// The header (a plain text file gets a default header with `events` empty).
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// The embedded start snapshot, if any (read before the first line).
    pub fn take_snapshot(&mut self) -> Option<Snapshot> {
        self.snapshot.take()
    }

    /// The next line of ftrace text; `None` at the end. Comment lines (`#` in the first column)
    /// and blank lines are skipped. Bytes that are not UTF-8 (a task name can hold any) are
    /// replaced by U+FFFD.
    /// The events the file's [`MISSING_EVENT_PREFIX`] comment lines named so far (the
    /// recording kernel lacked them).
    pub fn missing_events(&self) -> &[String] {
        &self.missing_events
    }

    pub fn next_line(&mut self) -> Result<Option<String>, StateError> {
        loop {
            let Some(raw) = self.next_raw()? else {
                return Ok(None);
            };
            self.line_no += 1;
            let text = String::from_utf8_lossy(&raw);
            let text = text.strip_suffix('\r').unwrap_or(&text);
            if let Some(ev) = text.strip_prefix(MISSING_EVENT_PREFIX) {
                let ev = ev.trim();
                if !ev.is_empty() && !self.missing_events.iter().any(|e| e == ev) {
                    self.missing_events.push(ev.to_string());
                }
            }
            if text.starts_with('#') || text.trim().is_empty() {
                continue;
            }
            return Ok(Some(text.to_string()));
        }
    }

    /// The next line's bytes without its newline, comments included.
    fn next_raw(&mut self) -> Result<Option<Vec<u8>>, StateError> {
        match &mut self.src {
            Source::Plain { inp, offset, line } => {
                self.line_start = *offset;
                match read_plain_line(&self.path, inp, line, *offset, self.line_no + 1)? {
                    Some(n) => {
                        *offset += n;
                        Ok(Some(std::mem::take(line)))
                    }
                    None => Ok(None),
                }
            }
            Source::Container { r, text, pos, at } => {
                while *pos >= text.len() {
                    *at = r.offset();
                    match r.next_section()? {
                        Some((tag, raw)) if tag == TEXT_TAG => {
                            if raw.last() != Some(&b'\n') {
                                return Err(StateError::new(
                                    &self.path,
                                    Some(*at),
                                    "TEXT section does not end with a whole line: corrupt",
                                ));
                            }
                            *text = raw;
                            *pos = 0;
                        }
                        Some((tag, _)) if (tag == PAGE_TAG || tag == DIRT_TAG) && self.skip_pages => {}
                        Some((tag, _)) => {
                            return Err(StateError::new(
                                &self.path,
                                Some(*at),
                                format!(
                                    "section {:?} where trace text was expected (after line {})",
                                    String::from_utf8_lossy(&tag),
                                    self.line_no
                                ),
                            ))
                        }
                        None => return Ok(None),
                    }
                }
                self.skip_pages = false;
                let end = *pos
                    + text[*pos..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .expect("a TEXT section ends with a newline");
                let l = text[*pos..end].to_vec();
                *pos = end + 1;
                if l.len() > MAX_LINE_BYTES || l.contains(&0) {
                    return Err(StateError::new(
                        &self.path,
                        Some(*at),
                        format!(
                            "line {} (in the TEXT section at this offset) is {}: binary data, not ftrace text",
                            self.line_no + 1,
                            if l.contains(&0) { "holds a NUL byte".to_string() } else { format!("longer than {} KiB", MAX_LINE_BYTES >> 10) }
                        ),
                    ));
                }
                Ok(Some(l))
            }
        }
    }

    /// The line number (1-based) of the last line returned, for error messages. Comment and
    /// blank lines count, so for plain text it is the line in the file.
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// The byte offset of the last line read (plain text), or of the `TEXT` section it was in
    /// (a FRAGTRCE file, whose sections are compressed), for error messages.
    pub fn offset(&self) -> u64 {
        match &self.src {
            Source::Container { at, .. } => *at,
            Source::Plain { .. } => self.line_start,
        }
    }
}

/// Reads line `no` of plain text, starting at byte `at`, into `line` (cleared first, without
/// its newline); returns the bytes consumed, `None` at the end. A line longer than
/// [`MAX_LINE_BYTES`] is an error found after reading that many bytes of it, as is a NUL byte
/// (binary data); both name the file, the line and the byte offset.
fn read_plain_line(
    path: &Path,
    inp: &mut PlainInput,
    line: &mut Vec<u8>,
    at: u64,
    no: u64,
) -> Result<Option<u64>, StateError> {
    line.clear();
    let n = inp
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_until(b'\n', line)
        .map_err(|e| StateError::new(path, Some(at), format!("read failed at line {no}: {e}")))?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    } else if n > MAX_LINE_BYTES {
        return Err(StateError::new(
            path,
            Some(at),
            format!(
                "line {no} is longer than {} KiB (no newline in its first {MAX_LINE_BYTES} bytes): not ftrace text",
                MAX_LINE_BYTES >> 10
            ),
        ));
    }
    if let Some(i) = line.iter().position(|&b| b == 0) {
        return Err(StateError::new(
            path,
            Some(at + i as u64),
            format!("line {no} holds a NUL byte: binary data, not ftrace text"),
        ));
    }
    Ok(Some(n as u64))
}

/// The `[cpu]` column of an ftrace line: (byte index of its `[`, index just after its `] `).
fn cpu_column(line: &str) -> Option<(usize, usize)> {
    line.match_indices("] ").find_map(|(i, _)| {
        let open = line[..i].rfind('[')?;
        let digits = &line[open + 1..i];
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some((open, i + 2))
    })
}

/// The pid of an ftrace line (`comm-PID`, before the optional record-tgid column and `[cpu]`).
pub fn line_pid(line: &str) -> Option<u32> {
    let (open, _) = cpu_column(line)?;
    let mut head = line[..open].trim_end();
    if head.ends_with(')') {
        head = head[..head.rfind('(')?].trim_end();
    }
    head.rsplit_once('-')?.1.parse().ok()
}

/// The event name of an ftrace line ("mm_page_alloc" in
/// `"  dd-1234  [001] d..1. 123.456789: mm_page_alloc: page=..."`), `None` for a line without
/// the `comm-pid [cpu] ... ts: name:` layout (e.g. `CPU:1 [LOST 12 EVENTS]`).
pub fn event_name(line: &str) -> Option<&str> {
    // The "[cpu]" column: the first "] " preceded by "[digits".
    let (_, after_cpu) = cpu_column(line)?;
    let rest = &line[after_cpu..];
    let ts_end = rest.find(": ")?;
    let rest = &rest[ts_end + 2..];
    let name = &rest[..rest.find(':')?];
    (!name.is_empty() && !name.contains(' ')).then_some(name)
}

/// The lost-event count of a trace_pipe `CPU:N [LOST M EVENTS]` line.
pub fn lost_events_line(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("CPU:")?;
    let (_, rest) = rest.split_once(" [LOST ")?;
    rest.strip_suffix(" EVENTS]")?.parse().ok()
}

/// Events per name in the rest of a trace, the lines that are no event, and the events lost
/// by `CPU:N [LOST M EVENTS]` lines (streamed: a trace larger than memory is counted line by
/// line).
pub fn count_events(r: &mut TraceReader) -> Result<(BTreeMap<String, u64>, u64, u64), StateError> {
    let mut counts = BTreeMap::new();
    let (mut other, mut lost) = (0u64, 0u64);
    while let Some(l) = r.next_line()? {
        if let Some(n) = lost_events_line(&l) {
            lost += n;
        } else if let Some(e) = event_name(&l) {
            *counts.entry(e.to_string()).or_insert(0) += 1;
        } else {
            other += 1;
        }
    }
    Ok((counts, other, lost))
}
