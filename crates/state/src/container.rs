//! The on-disk layout of snapshot and trace files.
//!
//! ```text
//! magic      8 bytes   b"FRAGSNAP" (snapshot) or b"FRAGTRCE" (trace)
//! version    u32 LE    FORMAT_VERSION
//! header_len u32 LE    then that many bytes of JSON (the file kind's header)
//! sections   until end of file, each:
//!   tag      4 bytes   e.g. b"PAGE", b"TEXT", b"SNAP"
//!   raw_len  u32 LE    bytes after decompression (at most MAX_SECTION_RAW)
//!   comp_len u32 LE    bytes of deflate data that follow
//!   crc32    u32 LE    CRC-32 (IEEE) of the decompressed bytes
//!   data     comp_len bytes (raw deflate)
//! end        4 bytes   b"END\0" with raw_len = comp_len = crc32 = 0: a file without it was
//!                      cut short (a crash or a full disk while writing)
//! ```
//!
//! Sections are read one at a time, so a reader holds at most one section (a few MB) besides
//! what it keeps. Every error names the file and the offset of the bad field.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use flate2::Compression;

use crate::StateError;

/// The version written; readers refuse other versions with a clear error.
pub const FORMAT_VERSION: u32 = 1;
/// The largest decompressed section a reader accepts (64 MiB): a corrupt length never makes it
/// allocate gigabytes.
pub const MAX_SECTION_RAW: u32 = 64 << 20;
/// The largest JSON header accepted (16 MiB).
pub const MAX_HEADER: u32 = 16 << 20;
/// What writers put in one section of bulk data (4 MiB).
pub const SECTION_CHUNK: usize = 4 << 20;

pub const END_TAG: [u8; 4] = *b"END\0";

/// The most bytes deflate data can decompress to per compressed byte (a run of one byte is
/// coded as 258-byte copies of at least two bits each: 1032 to one), with room to spare. A
/// section header claiming more than this many raw bytes for its compressed length is corrupt:
/// checked before anything is allocated for it.
pub const MAX_DEFLATE_RATIO: u64 = 1040;

/// Writes a container. The file is written to `PATH.partial` and renamed on
/// [`ContainerWriter::finish`], so nothing half-written is ever left under the final name.
pub struct ContainerWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: BufWriter<File>,
    offset: u64,
}

impl ContainerWriter {
    pub fn create(
        path: &Path,
        magic: &[u8; 8],
        header: &serde_json::Value,
    ) -> Result<ContainerWriter, StateError> {
        let tmp = partial_path(path);
        let f = File::create(&tmp).map_err(|e| StateError::new(&tmp, None, format!("cannot create: {e}")))?;
        let mut w = ContainerWriter {
            path: path.to_path_buf(),
            tmp,
            out: BufWriter::new(f),
            offset: 0,
        };
        let h = serde_json::to_vec(header).expect("a JSON value serializes");
        w.put(magic)?;
        w.put(&FORMAT_VERSION.to_le_bytes())?;
        w.put(&(h.len() as u32).to_le_bytes())?;
        w.put(&h)?;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> Result<(), StateError> {
        self.out
            .write_all(b)
            .map_err(|e| StateError::new(&self.tmp, Some(self.offset), format!("write failed: {e}")))?;
        self.offset += b.len() as u64;
        Ok(())
    }

    /// Appends one section (`raw` at most [`MAX_SECTION_RAW`] bytes).
    pub fn section(&mut self, tag: &[u8; 4], raw: &[u8]) -> Result<(), StateError> {
        assert!(
            raw.len() <= MAX_SECTION_RAW as usize,
            "section larger than MAX_SECTION_RAW"
        );
        let mut enc = DeflateEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(raw).expect("writing to a Vec");
        let comp = enc.finish().expect("writing to a Vec");
        let crc = crc32fast::hash(raw);
        self.put(tag)?;
        self.put(&(raw.len() as u32).to_le_bytes())?;
        self.put(&(comp.len() as u32).to_le_bytes())?;
        self.put(&crc.to_le_bytes())?;
        self.put(&comp)
    }

    /// Appends `data` as sections of [`SECTION_CHUNK`] bytes.
    pub fn sections(&mut self, tag: &[u8; 4], data: &[u8]) -> Result<(), StateError> {
        for c in data.chunks(SECTION_CHUNK) {
            self.section(tag, c)?;
        }
        Ok(())
    }

    /// A writer of sections only, to `path` itself (no magic, no header, no rename): a spool a
    /// writer fills while the header is not known yet, then copies into the real file with
    /// [`ContainerWriter::append_spool`] (the trace recorder's lines). Finish it with
    /// [`ContainerWriter::finish_spool`].
    pub fn create_spool(path: &Path) -> Result<ContainerWriter, StateError> {
        let f = File::create(path).map_err(|e| StateError::new(path, None, format!("cannot create: {e}")))?;
        Ok(ContainerWriter {
            path: path.to_path_buf(),
            tmp: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, f),
            offset: 0,
        })
    }

    /// Flushes a spool (no end marker); returns its length in bytes.
    pub fn finish_spool(self) -> Result<u64, StateError> {
        let mut f = self
            .out
            .into_inner()
            .map_err(|e| StateError::new(&self.tmp, None, format!("write failed: {}", e.error())))?;
        f.flush()
            .map_err(|e| StateError::new(&self.tmp, None, format!("write failed: {e}")))?;
        Ok(self.offset)
    }

    /// Appends a finished spool's sections verbatim (streamed, no recompression).
    pub fn append_spool(&mut self, spool: &Path) -> Result<(), StateError> {
        let f = File::open(spool).map_err(|e| StateError::new(spool, None, format!("cannot open: {e}")))?;
        let mut inp = BufReader::with_capacity(1 << 20, f);
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        loop {
            let n = inp
                .read(&mut buf)
                .map_err(|e| StateError::new(spool, Some(at), format!("read failed: {e}")))?;
            if n == 0 {
                return Ok(());
            }
            at += n as u64;
            self.put(&buf[..n])?;
        }
    }

    /// The number of bytes written so far.
    pub fn written(&self) -> u64 {
        self.offset
    }

    /// Writes the end marker, flushes and renames the file into place.
    pub fn finish(mut self) -> Result<(), StateError> {
        self.put(&END_TAG)?;
        self.put(&[0u8; 12])?;
        let f = self
            .out
            .into_inner()
            .map_err(|e| StateError::new(&self.tmp, None, format!("write failed: {}", e.error())))?;
        f.sync_all()
            .map_err(|e| StateError::new(&self.tmp, None, format!("sync failed: {e}")))?;
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| StateError::new(&self.path, None, format!("cannot rename into place: {e}")))
    }
}

/// `PATH.partial`, where a writer puts the file until it is complete.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".partial");
    PathBuf::from(s)
}

/// What kind of file `t` is, in words, for a refusal.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading when it is a regular file (symbolic links followed), with its
/// length. A directory, FIFO, device or socket is refused before it is opened for reading (its
/// type read with `stat`, which never blocks), so a FIFO without a writer cannot hang the
/// reader, and a device such as /dev/zero cannot feed it without end. The file is opened
/// non-blocking and its type checked again on the open handle (a file replaced between the two
/// looks is refused too); reads of a regular file never block, so the flag changes nothing
/// after that.
pub fn open_regular(path: &Path) -> Result<(File, u64), StateError> {
    let refuse = |t: &std::fs::FileType| {
        StateError::new(
            path,
            None,
            format!(
                "{}, not a regular file: fraglab reads snapshot and trace containers from regular files only (copy the data to a file first)",
                file_kind(t)
            ),
        )
    };
    let meta =
        std::fs::metadata(path).map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?;
    if !meta.is_file() {
        return Err(refuse(&meta.file_type()));
    }
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?;
    let meta = f
        .metadata()
        .map_err(|e| StateError::new(path, None, format!("cannot stat: {e}")))?;
    if !meta.is_file() {
        return Err(refuse(&meta.file_type()));
    }
    Ok((f, meta.len()))
}

/// One step of a path to a value inside a JSON document: a member name or an array index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonKey {
    Field(String),
    Index(usize),
}

/// The byte offset in `json` (a valid JSON document) where the value at `path` begins (for a
/// member, where its name begins), or None when there is no such value. Used to name the byte
/// offset of a bad header field.
pub fn json_offset(json: &[u8], path: &[JsonKey]) -> Option<usize> {
    let mut at = skip_ws(json, 0);
    let mut found = at;
    for key in path {
        match (json.get(at)?, key) {
            (b'{', JsonKey::Field(name)) => {
                at = skip_ws(json, at + 1);
                loop {
                    if json.get(at)? != &b'"' {
                        return None;
                    }
                    let name_at = at;
                    let end = skip_value(json, at)?;
                    let hit = &json[name_at + 1..end - 1] == name.as_bytes();
                    at = skip_ws(json, end);
                    if json.get(at)? != &b':' {
                        return None;
                    }
                    at = skip_ws(json, at + 1);
                    if hit {
                        found = name_at;
                        break;
                    }
                    at = skip_ws(json, skip_value(json, at)?);
                    match json.get(at)? {
                        b',' => at = skip_ws(json, at + 1),
                        _ => return None,
                    }
                }
            }
            (b'[', JsonKey::Index(i)) => {
                at = skip_ws(json, at + 1);
                for _ in 0..*i {
                    at = skip_ws(json, skip_value(json, at)?);
                    match json.get(at)? {
                        b',' => at = skip_ws(json, at + 1),
                        _ => return None,
                    }
                }
                if json.get(at)? == &b']' {
                    return None;
                }
                found = at;
            }
            _ => return None,
        }
    }
    Some(found)
}

fn skip_ws(json: &[u8], mut at: usize) -> usize {
    while json.get(at).is_some_and(|b| b.is_ascii_whitespace()) {
        at += 1;
    }
    at
}

/// The offset just past the JSON value starting at `at`.
fn skip_value(json: &[u8], at: usize) -> Option<usize> {
    match *json.get(at)? {
        b'"' => {
            let mut i = at + 1;
            loop {
                match *json.get(i)? {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
        }
        b'{' | b'[' => {
            // Nesting counted outside strings.
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match *json.get(i)? {
                    b'"' => {
                        i = skip_value(json, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = at;
            while json
                .get(i)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']') && !b.is_ascii_whitespace())
            {
                i += 1;
            }
            (i > at).then_some(i)
        }
    }
}

/// What [`ContainerReader::scan_sections`] found: consecutive sections of one tag, by their
/// headers only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionScan {
    /// Sections of the tag in a row from the reader's position.
    pub sections: u64,
    /// Their decompressed bytes, as their headers claim.
    pub raw_bytes: u64,
    /// The offset where the run stops (the next section's header, or the end of the file).
    pub stop_at: u64,
}

/// Reads a container section by section.
pub struct ContainerReader {
    path: PathBuf,
    inp: BufReader<File>,
    offset: u64,
    /// The file's length when it was opened.
    len: u64,
    done: bool,
    /// The file's JSON header.
    pub header: serde_json::Value,
    /// The header's bytes as the file has them (for the offsets of its fields).
    header_bytes: Vec<u8>,
    header_at: u64,
}

/// True when the file at `path` starts with `magic` (false for a shorter or other file).
pub fn has_magic(path: &Path, magic: &[u8; 8]) -> Result<bool, StateError> {
    let mut f = File::open(path).map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?;
    let mut m = [0u8; 8];
    let mut got = 0;
    while got < 8 {
        match f.read(&mut m[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) => {
                return Err(StateError::new(
                    path,
                    Some(got as u64),
                    format!("read failed: {e}"),
                ))
            }
        }
    }
    Ok(&m == magic)
}

impl ContainerReader {
    /// Opens `path`, checks the magic and version and reads the header.
    /// A path that is not a regular file is refused ([`open_regular`]).
    pub fn open(path: &Path, magic: &[u8; 8], what: &str) -> Result<ContainerReader, StateError> {
        let (f, len) = open_regular(path)?;
        let mut r = ContainerReader {
            path: path.to_path_buf(),
            inp: BufReader::with_capacity(1 << 20, f),
            offset: 0,
            len,
            done: false,
            header: serde_json::Value::Null,
            header_bytes: Vec::new(),
            header_at: 0,
        };
        let mut m = [0u8; 8];
        r.get(&mut m, "magic")?;
        if &m != magic {
            return Err(StateError::new(
                path,
                Some(0),
                format!(
                    "not a fraglab {what} file (magic {:?}, expected {:?})",
                    String::from_utf8_lossy(&m),
                    String::from_utf8_lossy(magic)
                ),
            ));
        }
        let v = r.u32("version")?;
        if v != FORMAT_VERSION {
            return Err(StateError::new(
                path,
                Some(8),
                format!("format version {v}, this fraglab reads version {FORMAT_VERSION}"),
            ));
        }
        let at = r.offset;
        let hl = r.u32("header length")?;
        if hl > MAX_HEADER || hl as u64 > len.saturating_sub(r.offset) {
            return Err(StateError::new(
                path,
                Some(at),
                format!(
                    "header length {hl} is larger than the {} bytes left in the file (or than {MAX_HEADER}): corrupt or truncated",
                    len.saturating_sub(r.offset)
                ),
            ));
        }
        let mut h = vec![0u8; hl as usize];
        let hat = r.offset;
        r.get(&mut h, "header")?;
        r.header = serde_json::from_slice(&h).map_err(|e| {
            // serde_json's column is the byte within the (one-line) header.
            let col = if e.line() == 1 {
                e.column().saturating_sub(1) as u64
            } else {
                0
            };
            StateError::new(path, Some(hat + col), format!("header is not valid JSON: {e}"))
        })?;
        r.header_bytes = h;
        r.header_at = hat;
        Ok(r)
    }

    /// The file's length when it was opened.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The offset in the file of the header's field at `path` (where its name begins); the
    /// header's first byte when there is no such field.
    pub fn header_field_offset(&self, path: &[JsonKey]) -> u64 {
        self.header_at + json_offset(&self.header_bytes, path).unwrap_or(0) as u64
    }

    /// The header's bytes as the file has them, and the offset where they begin.
    pub fn header_bytes(&self) -> (&[u8], u64) {
        (&self.header_bytes, self.header_at)
    }

    /// Whether the header has a field at `path`.
    pub fn header_has_field(&self, path: &[JsonKey]) -> bool {
        json_offset(&self.header_bytes, path).is_some()
    }

    /// Reads the headers of the sections tagged `tag` that follow in a row from offset `from`
    /// (seeking over their data, nothing decompressed, nothing allocated), then goes back to
    /// the reader's position: how many there are and
    /// the bytes they claim. Each header is checked against the file: its compressed length must
    /// fit in what is left of the file, its raw length within [`MAX_SECTION_RAW`] and within
    /// [`MAX_DEFLATE_RATIO`] times its compressed length (an error names the section's offset).
    /// The run stops at another tag, the end marker or the end of the file.
    pub fn scan_sections(&mut self, tag: &[u8; 4], from: u64) -> Result<SectionScan, StateError> {
        let start = self.offset;
        let mut scan = SectionScan {
            sections: 0,
            raw_bytes: 0,
            stop_at: from,
        };
        let mut at = from;
        let io = |e: std::io::Error, at: u64, path: &Path| {
            StateError::new(path, Some(at), format!("read failed: {e}"))
        };
        while !self.done && at + 16 <= self.len {
            self.inp
                .seek(SeekFrom::Start(at))
                .map_err(|e| io(e, at, &self.path))?;
            let mut h = [0u8; 16];
            self.inp.read_exact(&mut h).map_err(|e| io(e, at, &self.path))?;
            if &h[..4] != tag {
                break;
            }
            let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]) as u64;
            let (raw, comp) = (word(4), word(8));
            let left = self.len - (at + 16);
            let name = String::from_utf8_lossy(tag);
            if comp > left {
                return Err(StateError::new(
                    &self.path,
                    Some(at),
                    format!("section {name:?} claims {comp} compressed bytes, the file has {left} after its header: truncated or corrupt"),
                ));
            }
            if raw > MAX_SECTION_RAW as u64 || raw > comp * MAX_DEFLATE_RATIO + 64 {
                return Err(StateError::new(
                    &self.path,
                    Some(at),
                    format!("section {name:?} claims {raw} bytes from {comp} compressed (at most {MAX_DEFLATE_RATIO} to one, and {MAX_SECTION_RAW}): corrupt"),
                ));
            }
            scan.sections += 1;
            scan.raw_bytes += raw;
            at += 16 + comp;
        }
        scan.stop_at = at;
        self.inp
            .seek(SeekFrom::Start(start))
            .map_err(|e| io(e, start, &self.path))?;
        Ok(scan)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn get(&mut self, buf: &mut [u8], what: &str) -> Result<(), StateError> {
        let at = self.offset;
        self.inp.read_exact(buf).map_err(|e| {
            let msg = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                format!("file ends inside the {what} (truncated)")
            } else {
                format!("read failed in the {what}: {e}")
            };
            StateError::new(&self.path, Some(at), msg)
        })?;
        self.offset += buf.len() as u64;
        Ok(())
    }

    fn u32(&mut self, what: &str) -> Result<u32, StateError> {
        let mut b = [0u8; 4];
        self.get(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    /// The next section as (tag, decompressed bytes), `None` at the end marker. A file that
    /// ends without the end marker is an error (truncated).
    #[allow(clippy::type_complexity)]
    pub fn next_section(&mut self) -> Result<Option<([u8; 4], Vec<u8>)>, StateError> {
        if self.done {
            return Ok(None);
        }
        let at = self.offset;
        let mut tag = [0u8; 4];
        self.get(&mut tag, "section tag (no end marker: truncated?)")?;
        let raw_len = self.u32("section length")?;
        let comp_len = self.u32("section length")?;
        let crc = self.u32("section checksum")?;
        if tag == END_TAG {
            self.done = true;
            return Ok(None);
        }
        if raw_len > MAX_SECTION_RAW || comp_len > MAX_SECTION_RAW + (MAX_SECTION_RAW >> 4) {
            return Err(StateError::new(
                &self.path,
                Some(at),
                format!(
                    "section {:?} claims {raw_len} bytes ({comp_len} compressed): corrupt",
                    String::from_utf8_lossy(&tag)
                ),
            ));
        }
        let data_at = self.offset;
        if comp_len as u64 > self.len.saturating_sub(data_at) {
            return Err(StateError::new(
                &self.path,
                Some(at),
                format!(
                    "section {:?} claims {comp_len} compressed bytes, the file has {} after its header: truncated",
                    String::from_utf8_lossy(&tag),
                    self.len.saturating_sub(data_at)
                ),
            ));
        }
        let mut comp = vec![0u8; comp_len as usize];
        self.get(&mut comp, "section data")?;
        let mut raw = Vec::with_capacity(raw_len as usize);
        DeflateDecoder::new(&comp[..])
            .take(raw_len as u64 + 1)
            .read_to_end(&mut raw)
            .map_err(|e| {
                StateError::new(
                    &self.path,
                    Some(data_at),
                    format!("section data does not decompress: {e}"),
                )
            })?;
        if raw.len() != raw_len as usize {
            return Err(StateError::new(
                &self.path,
                Some(data_at),
                format!(
                    "section decompresses to {} bytes, its length field says {raw_len}: corrupt",
                    raw.len()
                ),
            ));
        }
        if crc32fast::hash(&raw) != crc {
            return Err(StateError::new(
                &self.path,
                Some(at),
                "section checksum mismatch: corrupt",
            ));
        }
        Ok(Some((tag, raw)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offset of a header field: members by name (nested, after strings holding braces and
    /// escaped quotes), array elements by index; None for what is not there.
    #[test]
    fn json_offsets_of_fields() {
        let j = br#"{"a": "x{\"[", "zones": [ {"n": 1}, {"n": 2, "m": [3, 4]} ], "end_pfn":7}"#;
        let f = |k: &str| JsonKey::Field(k.into());
        let at =
            |p: &[JsonKey]| json_offset(j, p).map(|o| std::str::from_utf8(&j[o..o + 6]).unwrap().to_string());
        assert_eq!(at(&[f("end_pfn")]).as_deref(), Some("\"end_p"));
        assert_eq!(
            at(&[f("zones"), JsonKey::Index(1), f("m")]).as_deref(),
            Some("\"m\": [")
        );
        assert_eq!(
            at(&[f("zones"), JsonKey::Index(1), f("m"), JsonKey::Index(1)]).as_deref(),
            Some("4]} ],")
        );
        assert_eq!(at(&[f("zones"), JsonKey::Index(0)]).as_deref(), Some("{\"n\": "));
        assert_eq!(json_offset(j, &[f("zones"), JsonKey::Index(2)]), None);
        assert_eq!(json_offset(j, &[f("nope")]), None);
        assert_eq!(json_offset(j, &[f("a"), f("b")]), None);
        assert_eq!(json_offset(b"{\"a\":", &[f("a"), f("b")]), None);
    }
}
