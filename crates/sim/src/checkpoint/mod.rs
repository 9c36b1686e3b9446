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

use fraglab_state::container::{ContainerReader, ContainerWriter};

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
            None => Err(S::Error::custom(format!(
                "task {} cannot be checkpointed (its body has no saved form)",
                b.comm()
            ))),
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
    /// The policy's name (`Policy::name`) and the size of its saved state.
    pub policy: String,
    /// Bytes of encoded state.
    pub state_bytes: u64,
}

/// Writes `state` (postcard) to `path` as a checkpoint with `header` (its `state_bytes` set
/// here). Nothing is left under `path` if it fails.
pub fn write_file<T: Serialize>(
    path: &Path,
    mut header: CheckpointHeader,
    state: &T,
) -> Result<u64, RunError> {
    let _scope = shared::SharedScope::open();
    let bytes = postcard::to_stdvec(state)
        .map_err(|e| RunError(format!("{}: cannot write the checkpoint: {e}", path.display())))?;
    header.state_bytes = bytes.len() as u64;
    let h = serde_json::to_value(&header).expect("a header serializes");
    let mut w = ContainerWriter::create(path, &CHECKPOINT_MAGIC, &h).map_err(|e| RunError(e.to_string()))?;
    w.sections(&STATE_TAG, &bytes)
        .map_err(|e| RunError(e.to_string()))?;
    w.finish().map_err(|e| RunError(e.to_string()))?;
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

/// Reads the state of a checkpoint whose header [`read_header`] returned.
pub fn read_state<T: serde::de::DeserializeOwned>(
    mut r: ContainerReader,
    h: &CheckpointHeader,
) -> Result<T, RunError> {
    let path = r.path().to_path_buf();
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        let at = r.offset();
        match r.next_section().map_err(|e| RunError(e.to_string()))? {
            None => break,
            Some((tag, data)) if tag == STATE_TAG => {
                if bytes.len() as u64 + data.len() as u64 > h.state_bytes {
                    return Err(RunError(format!(
                        "{}: byte {at}: more state than the header's {} bytes",
                        path.display(),
                        h.state_bytes
                    )));
                }
                bytes.extend_from_slice(&data)
            }
            Some((tag, _)) => {
                return Err(RunError(format!(
                    "{}: byte {at}: unexpected section {:?} in a checkpoint",
                    path.display(),
                    String::from_utf8_lossy(&tag)
                )))
            }
        }
    }
    if bytes.len() as u64 != h.state_bytes {
        return Err(RunError(format!(
            "{}: {} bytes of state, the header says {}",
            path.display(),
            bytes.len(),
            h.state_bytes
        )));
    }
    let _scope = shared::SharedScope::open();
    let mut de = postcard::Deserializer::from_bytes(&bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        RunError(format!(
            "{}: the checkpoint's state, at {}: {}",
            path.display(),
            e.path(),
            e.inner()
        ))
    })
}
