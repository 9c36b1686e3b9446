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

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
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

/// Reads a container section by section.
pub struct ContainerReader {
    path: PathBuf,
    inp: BufReader<File>,
    offset: u64,
    done: bool,
    /// The file's JSON header.
    pub header: serde_json::Value,
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
    pub fn open(path: &Path, magic: &[u8; 8], what: &str) -> Result<ContainerReader, StateError> {
        let f = File::open(path).map_err(|e| StateError::new(path, None, format!("cannot open: {e}")))?;
        let mut r = ContainerReader {
            path: path.to_path_buf(),
            inp: BufReader::with_capacity(1 << 20, f),
            offset: 0,
            done: false,
            header: serde_json::Value::Null,
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
        if hl > MAX_HEADER {
            return Err(StateError::new(
                path,
                Some(at),
                format!("header length {hl} is larger than {MAX_HEADER}: corrupt"),
            ));
        }
        let mut h = vec![0u8; hl as usize];
        let hat = r.offset;
        r.get(&mut h, "header")?;
        r.header = serde_json::from_slice(&h)
            .map_err(|e| StateError::new(path, Some(hat), format!("header is not valid JSON: {e}")))?;
        Ok(r)
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
