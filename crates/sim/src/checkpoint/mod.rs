//! Warm checkpoints (issue 37): the whole state of a timed run at a simulated time T, in a
//! file, and runs that continue from it under other knobs or another policy.
//!
//! A spec with `[run] checkpoint_at = "T"` writes, at the first event at or after T, a file
//! holding everything the run needs to go on: the model (`Mm`: page array, free lists,
//! folios, LRUs, page cache, kernel threads' state, counters), the engine (clock, event
//! queue, CPUs' run queues, every task with its random stream), the generators and the state
//! their tasks share, and what the run has recorded so far (samples, pageblock maps, trace
//! counts, fault latencies, the vmstat at the start). The run itself goes on unchanged.
//!
//! A spec with `[machine] checkpoint = "FILE"` reads it and runs on to the end. Its result is
//! the whole run's: a spec equal to the one that wrote the checkpoint gives the uninterrupted
//! run's result byte for byte (tested for every generator by the command line's `tests/fork.rs`). As with
//! a warm fork (`crate::fork`), only the knobs and the `[model]` switches that are settings
//! of the model (`policy`, `folio_mode`, `defrag_stage`, `costly_order_policy`,
//! `v4_position`) may differ from the spec that wrote it; they are applied at T as sysctl
//! writes (`Mm::apply_settings`). A policy whose name did not change gets its saved state
//! back (`Policy::restore_state`); another starts fresh.
//!
//! The file is a state file (`fraglab_state::container`): magic `FRAGCKPT`, a JSON header
//! (what wrote it, when in simulated time, the spec's fingerprint) and the state in
//! `CKPT` sections (postcard, deflate, CRC-32 each). The state's encoding follows the
//! model's Rust types, so a checkpoint is read only by a fraglab built from the same model
//! sources: the header carries a hash of them ([`LAYOUT`]) and a reader built from others
//! refuses the file with that reason.
//!
//! Limits: a task or policy that cannot be saved (a test's own task body, a Python policy)
//! makes the checkpoint fail, naming it; the streamed trace of a continued run
//! (`fraglab run --trace-out`) starts at the checkpoint (the result's trace counts and kept
//! text are the whole run's); replays and timeless runs have no checkpoints.

pub mod shared;

pub use shared::vec as shared_vec;

use std::collections::BTreeMap;
use std::path::Path;

use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use fraglab_state::container::{ContainerReader, ContainerWriter, SECTION_CHUNK};

use crate::engine::TaskBody;
use crate::error::RunError;
use crate::workload::Generator;

/// The magic of a checkpoint file.
pub const CHECKPOINT_MAGIC: [u8; 8] = *b"FRAGCKPT";
/// The tag of the sections holding the state.
pub const STATE_TAG: [u8; 4] = *b"CKPT";
/// A hash of the sources whose types a checkpoint's encoding follows (written by build.rs).
pub const LAYOUT: &str = env!("FRAGLAB_CHECKPOINT_LAYOUT");

/// Declares the kinds of a trait object a checkpoint can hold: an enum of references to
/// write (`$r`) and one of values to read (`$o`), with the same variants in the same order
/// (their index is their encoding: a new kind goes at the end).
macro_rules! saved_kinds {
    ($r:ident, $o:ident, $tr:path; $($v:ident($t:ty)),* $(,)?) => {
        /// A checkpoint's view of one object of this kind (written).
        #[derive(Serialize)]
        pub enum $r<'a> { $($v(&'a $t)),* }
        /// An object of this kind read from a checkpoint.
        #[derive(Deserialize)]
        pub enum $o { $($v($t)),* }
        impl $o {
            pub fn into_box(self) -> Box<dyn $tr> {
                match self { $($o::$v(t) => Box::new(t)),* }
            }
        }
    };
}

saved_kinds!(TaskRef, TaskOwned, TaskBody;
    Kswapd(crate::engine::KswapdTask),
    Kcompactd(crate::engine::KcompactdTask),
    Kdamond(crate::engine::KdamondTask),
    PageCacheFlusher(crate::workload::PageCacheFlusher),
    KbuildWorker(crate::workload::KbuildWorker),
    KbuildFlusher(crate::workload::Flusher),
    ThpBurst(crate::workload::ThpBurst),
    ThpChallenge(crate::workload::ThpChallenge),
    PgbenchClient(crate::workload::PgbenchClient),
    PgbenchCheckpointer(crate::workload::PgbenchCheckpointer),
    VmScal(crate::workload::VmScalTask),
    Fio(crate::workload::FioSmallFiles),
    Program(crate::workload::ProgramTask),
);

saved_kinds!(GeneratorRef, GeneratorOwned, Generator;
    Kbuild(crate::workload::kbuild::Kbuild),
    ThpBursts(crate::workload::thp_burst::ThpBursts),
    ThpChallenges(crate::workload::thpchallenge::ThpChallenges),
    Pgbench(crate::workload::pgbench::Pgbench),
    VmScalability(crate::workload::vmscal::VmScalability),
    Fio(crate::workload::fio::Fio),
    Programs(crate::workload::program::Programs),
);

/// Serde for an engine task's body (`Box<dyn TaskBody>`), through [`TaskBody::saved`].
pub mod task_body {
    use super::*;

    // serde's `with` hands the field as it is: a `&Box`.
    #[allow(clippy::borrowed_box)]
    pub fn serialize<S: Serializer>(b: &Box<dyn TaskBody>, s: S) -> Result<S::Ok, S::Error> {
        match b.saved() {
            Some(r) => r.serialize(s),
            None => Err(S::Error::custom(fail(format!(
                "task {} cannot be checkpointed (its body has no saved form)",
                b.comm()
            )))),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Box<dyn TaskBody>, D::Error> {
        TaskOwned::deserialize(d).map(TaskOwned::into_box)
    }
}

/// Serde for the generators of a run.
pub mod generators {
    use super::*;

    pub fn serialize<S: Serializer>(g: &[Box<dyn Generator>], s: S) -> Result<S::Ok, S::Error> {
        let refs = g
            .iter()
            .map(|g| {
                g.saved()
                    .ok_or_else(|| S::Error::custom("a generator cannot be checkpointed"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        refs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Box<dyn Generator>>, D::Error> {
        Ok(Vec::<GeneratorOwned>::deserialize(d)?
            .into_iter()
            .map(GeneratorOwned::into_box)
            .collect())
    }
}

thread_local! {
    /// The message of the last error this module's serde code raised: postcard keeps only
    /// that there was one.
    static LAST_ERROR: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Keeps `msg` for the checkpoint's error message and returns it (for `Error::custom`).
pub(crate) fn fail(msg: String) -> String {
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(msg.clone()));
    msg
}

fn take_last_error() -> Option<String> {
    LAST_ERROR.with(|e| e.borrow_mut().take())
}

/// The header of a checkpoint file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckpointHeader {
    /// `fraglab-checkpoint`.
    pub kind: String,
    /// The fraglab version that wrote it, and the hash of its model sources ([`LAYOUT`]).
    pub fraglab: String,
    pub layout: String,
    /// The simulated time of the state (the first event at or after `checkpoint_at`).
    pub t_ns: u64,
    /// The `checkpoint_at` asked for.
    pub at_ns: u64,
    /// The spec that wrote it: file, name and seed.
    pub spec_file: String,
    pub spec_name: Option<String>,
    pub seed: u64,
    /// What a continuing spec must equal, section by section (`crate::fork::fingerprint`).
    pub fingerprint: BTreeMap<String, String>,
    /// The settings it ran under (`crate::fork::settings_fingerprint`): a continuing spec
    /// with the same ones changes nothing at T.
    pub settings: String,
    /// The policy's name (`Policy::name`).
    pub policy: String,
}

/// postcard's output, cut into state sections of [`SECTION_CHUNK`] bytes as it comes: a
/// checkpoint never holds more than one section of its encoding in memory.
struct SectionSink {
    w: ContainerWriter,
    buf: Vec<u8>,
    err: Option<RunError>,
}

impl SectionSink {
    fn flush(&mut self) -> postcard::Result<()> {
        if self.err.is_some() {
            return Err(postcard::Error::SerializeBufferFull);
        }
        if let Err(e) = self.w.section(&STATE_TAG, &self.buf) {
            self.err = Some(RunError(e.to_string()));
            return Err(postcard::Error::SerializeBufferFull);
        }
        self.buf.clear();
        Ok(())
    }
}

impl postcard::ser_flavors::Flavor for &mut SectionSink {
    type Output = ();

    #[inline]
    fn try_push(&mut self, b: u8) -> postcard::Result<()> {
        self.buf.push(b);
        if self.buf.len() >= SECTION_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    #[inline]
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        for c in data.chunks(SECTION_CHUNK) {
            self.buf.extend_from_slice(c);
            if self.buf.len() >= SECTION_CHUNK {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        if !self.buf.is_empty() {
            self.flush()?;
        }
        Ok(())
    }
}

/// Writes `state` (postcard, streamed into sections) to `path` as a checkpoint with `header`;
/// returns the file's size. Nothing is left under `path` if it fails.
pub fn write_file<T: Serialize>(path: &Path, header: CheckpointHeader, state: &T) -> Result<u64, RunError> {
    let h = serde_json::to_value(&header).expect("a header serializes");
    let w = ContainerWriter::create(path, &CHECKPOINT_MAGIC, &h).map_err(|e| RunError(e.to_string()))?;
    let mut sink = SectionSink {
        w,
        buf: Vec::with_capacity(SECTION_CHUNK),
        err: None,
    };
    let r = {
        let _scope = shared::SharedScope::open();
        take_last_error();
        postcard::serialize_with_flavor(state, &mut sink)
    };
    if let Err(e) = r {
        let why = sink
            .err
            .take()
            .map(|e| e.0)
            .or_else(take_last_error)
            .unwrap_or_else(|| e.to_string());
        drop(sink);
        let _ = std::fs::remove_file(fraglab_state::container::partial_path(path));
        return Err(RunError(format!(
            "{}: cannot write the checkpoint: {why}",
            path.display()
        )));
    }
    sink.w.finish().map_err(|e| RunError(e.to_string()))?;
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| RunError(format!("{}: {e}", path.display())))
}

/// Reads a checkpoint's header (and checks what it can without the state).
pub fn read_header(path: &Path) -> Result<(ContainerReader, CheckpointHeader), RunError> {
    let r =
        ContainerReader::open(path, &CHECKPOINT_MAGIC, "checkpoint").map_err(|e| RunError(e.to_string()))?;
    let (bytes, at) = r.header_bytes();
    let h: CheckpointHeader = serde_json::from_slice(bytes).map_err(|e| {
        RunError(format!(
            "{}: byte {}: the checkpoint's header: {e}",
            path.display(),
            at + e.column() as u64
        ))
    })?;
    if h.layout != LAYOUT {
        return Err(RunError(format!(
            "{}: written by fraglab {} from other model sources (layout {}, this build's is {}): \
             a checkpoint is read only by the fraglab build that wrote it; run the warm-up again",
            path.display(),
            h.fraglab,
            h.layout,
            LAYOUT
        )));
    }
    Ok((r, h))
}

/// The state sections of a checkpoint, as postcard's input: one section in memory at a time.
struct SectionSource {
    r: ContainerReader,
    buf: Vec<u8>,
    pos: usize,
    /// Where the section in `buf` starts in the file.
    section_at: u64,
    /// Bytes of state read before `buf`.
    before: u64,
    /// For a read that crosses sections.
    scratch: Vec<u8>,
    err: Option<RunError>,
}

impl SectionSource {
    /// The next state section into `buf`; false at the end (or on an error, kept in `err`).
    fn refill(&mut self) -> bool {
        if self.err.is_some() {
            return false;
        }
        let at = self.r.offset();
        match self.r.next_section() {
            Ok(Some((tag, data))) if tag == STATE_TAG => {
                self.before += self.buf.len() as u64;
                self.buf = data;
                self.pos = 0;
                self.section_at = at;
                true
            }
            Ok(Some((tag, _))) => {
                self.err = Some(RunError(format!(
                    "{}: byte {at}: unexpected section {:?} in a checkpoint",
                    self.r.path().display(),
                    String::from_utf8_lossy(&tag)
                )));
                false
            }
            Ok(None) => false,
            Err(e) => {
                self.err = Some(RunError(e.to_string()));
                false
            }
        }
    }
}

impl<'de> postcard::de_flavors::Flavor<'de> for SectionSource {
    type Remainder = SectionSource;
    type Source = ();

    #[inline]
    fn pop(&mut self) -> postcard::Result<u8> {
        if self.pos == self.buf.len() && !self.refill_nonempty() {
            return Err(postcard::Error::DeserializeUnexpectedEnd);
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }

    fn try_take_n(&mut self, _ct: usize) -> postcard::Result<&'de [u8]> {
        // Every type of the state owns its data: nothing borrows from the input.
        Err(postcard::Error::WontImplement)
    }

    fn try_take_n_temp<'a>(&'a mut self, ct: usize) -> postcard::Result<&'a [u8]>
    where
        'de: 'a,
    {
        if self.buf.len() - self.pos >= ct {
            let s = &self.buf[self.pos..self.pos + ct];
            self.pos += ct;
            return Ok(s);
        }
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        while out.len() < ct {
            if self.pos == self.buf.len() && !self.refill_nonempty() {
                self.scratch = out;
                return Err(postcard::Error::DeserializeUnexpectedEnd);
            }
            let n = (ct - out.len()).min(self.buf.len() - self.pos);
            out.extend_from_slice(&self.buf[self.pos..self.pos + n]);
            self.pos += n;
        }
        self.scratch = out;
        Ok(&self.scratch)
    }

    fn finalize(self) -> postcard::Result<SectionSource> {
        Ok(self)
    }
}

impl SectionSource {
    /// [`SectionSource::refill`] past empty sections.
    fn refill_nonempty(&mut self) -> bool {
        while self.refill() {
            if !self.buf.is_empty() {
                return true;
            }
        }
        false
    }

    /// The state's byte offset reached, for an error message: the section and the byte in it.
    fn where_(&self) -> String {
        format!(
            "byte {} of the state (in the section at byte {} of the file)",
            self.before + self.pos as u64,
            self.section_at
        )
    }
}

/// Reads the state of a checkpoint whose header [`read_header`] returned, streaming its
/// sections. A state that does not decode is read a second time to name where it fails
/// (the field path); the first pass keeps no path, which would cost half the reading time.
pub fn read_state<T: serde::de::DeserializeOwned>(
    r: ContainerReader,
    _h: &CheckpointHeader,
) -> Result<T, RunError> {
    let path = r.path().to_path_buf();
    let src = |r: ContainerReader| SectionSource {
        r,
        buf: Vec::new(),
        pos: 0,
        section_at: 0,
        before: 0,
        scratch: Vec::new(),
        err: None,
    };
    let first = {
        let _scope = shared::SharedScope::open();
        take_last_error();
        let mut de = postcard::Deserializer::from_flavor(src(r));
        let v = T::deserialize(&mut de);
        (v, de.finalize())
    };
    match first {
        (Ok(v), Ok(mut rest)) => {
            if rest.pos < rest.buf.len() || rest.refill_nonempty() {
                return Err(RunError(format!(
                    "{}: {}: state continues after its end: corrupt",
                    path.display(),
                    rest.where_()
                )));
            }
            if let Some(e) = rest.err.take() {
                return Err(e);
            }
            Ok(v)
        }
        (Err(e), rest) => {
            if let Ok(mut rest) = rest {
                if let Some(err) = rest.err.take() {
                    return Err(err);
                }
                let custom = take_last_error();
                // Again with the field path, for the message.
                let (r2, _) = read_header(&path)?;
                let _scope = shared::SharedScope::open();
                let mut de = postcard::Deserializer::from_flavor(src(r2));
                let at = match serde_path_to_error::deserialize::<_, T>(&mut de) {
                    Err(pe) => format!(" at {}", pe.path()),
                    Ok(_) => String::new(),
                };
                return Err(RunError(format!(
                    "{}: {}: the checkpoint's state does not decode{at}: {}",
                    path.display(),
                    rest.where_(),
                    custom.unwrap_or_else(|| e.to_string())
                )));
            }
            Err(RunError(format!(
                "{}: the checkpoint's state: {e}",
                path.display()
            )))
        }
        (Ok(_), Err(e)) => Err(RunError(format!(
            "{}: the checkpoint's state: {e}",
            path.display()
        ))),
    }
}
