//! Kernel knobs on the live machine: where each of [`fraglab_spec::KNOBS`] lives, how to read
//! and write it. A run changes knobs through the change journal ([`crate::journal`]); the
//! state file format before it ([`StateFile`]) is still read by `fraglab host restore`.
//!
//! Interfaces: sysctls under `/proc/sys/vm/` (`vm.x` → `/proc/sys/vm/x`;
//! Documentation/admin-guide/sysctl/vm.rst) and the THP files under
//! `/sys/kernel/mm/transparent_hugepage/` (`enabled`, `defrag`, `hugepages-<N>kB/enabled`,
//! `khugepaged/*`; Documentation/admin-guide/mm/transhuge.rst). The THP choice files read as
//! `always [madvise] never` (the active word in brackets) and take the bare word on write.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use fraglab_spec::{KnobDef, KnobKind, KNOBS};
use serde::{Deserialize, Serialize};

use crate::HostError;

/// The real file of a knob (`vm.page-cluster` → `/proc/sys/vm/page-cluster`,
/// `transparent_hugepage/enabled` → `/sys/kernel/mm/transparent_hugepage/enabled`).
pub fn knob_path(name: &str) -> PathBuf {
    if let Some(rest) = name.strip_prefix("vm.") {
        PathBuf::from("/proc/sys/vm").join(rest)
    } else {
        PathBuf::from("/sys/kernel/mm").join(name)
    }
}

/// Normalises a knob file's text: the bracketed word of a choice file (`always [madvise]
/// never` → `madvise`), otherwise the whitespace-separated fields joined by one space
/// (`256\t256\t32\t0\t0` → `256 256 32 0 0`).
pub fn normalise(text: &str) -> String {
    if let (Some(a), Some(b)) = (text.find('['), text.find(']')) {
        if a < b {
            return text[a + 1..b].to_string();
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The current value of the knob at `path`, normalised.
pub fn read_knob(path: &Path) -> Result<String, HostError> {
    std::fs::read_to_string(path)
        .map(|t| normalise(&t))
        .map_err(|e| HostError::io(path.display().to_string(), e))
}

/// Writes `value` to the knob file `path` and checks that it reads back as written.
pub fn write_knob(name: &str, path: &Path, value: &str) -> Result<(), HostError> {
    let err = |why: String| HostError::KnobWrite {
        name: name.to_string(),
        value: value.to_string(),
        why,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| err(format!("{}: {e}", path.display())))?;
    f.write_all(value.as_bytes())
        .map_err(|e| err(format!("{}: {e}", path.display())))?;
    drop(f);
    let now = read_knob(path)?;
    if now != normalise(value) {
        return Err(err(format!("{} reads back {now:?}", path.display())));
    }
    Ok(())
}

/// The current values of every knob of [`KNOBS`] that exists on this kernel (name → value).
pub fn read_all_knobs() -> BTreeMap<String, String> {
    KNOBS
        .iter()
        .filter_map(|k| Some((k.name.to_string(), read_knob(&knob_path(k.name)).ok()?)))
        .collect()
}

/// `name = value` lines of [`read_all_knobs`], the text the engine keeps in
/// `RunResult::proc_start["knobs"]` and `proc_end["knobs"]`.
pub fn knobs_text(knobs: &BTreeMap<String, String>) -> String {
    knobs.iter().map(|(k, v)| format!("{k} = {v}\n")).collect()
}

/// Whether a knob's text value is of the knob's kind (guards a hand-edited state file).
pub(crate) fn value_fits(def: &KnobDef, value: &str) -> bool {
    match def.kind {
        KnobKind::Choice(words) => words.contains(&value),
        KnobKind::IntList { len, .. } => {
            let v: Vec<_> = value.split_whitespace().collect();
            v.len() == len && v.iter().all(|x| x.parse::<i64>().is_ok())
        }
        _ => value.parse::<i64>().is_ok(),
    }
}

/// One knob as saved in a state file of the format before the change journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedKnob {
    pub name: String,
    pub path: PathBuf,
    /// The value before the run changed it.
    pub value: String,
}

/// The state file of a run before the change journal (JSON `{pid, knobs, cleanup}`): still
/// read by `fraglab host restore`, which turns it into the journal's changes
/// ([`StateFile::into_changes`]). Runs now write [`crate::journal::JournalFile`]s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    pub pid: u32,
    pub knobs: Vec<SavedKnob>,
    /// What else a killed run leaves behind.
    #[serde(default)]
    pub cleanup: Cleanup,
}

/// A run's leftovers as the format before the change journal listed them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cleanup {
    /// The run's directory.
    pub workdir: Option<PathBuf>,
    /// The private tracefs instance.
    pub trace_instance: Option<PathBuf>,
    /// A tracefs mount the run made.
    pub trace_mount: Option<PathBuf>,
    /// `--fit-memory`: the hugetlb pool size (`vm.nr_hugepages`) to write back.
    #[serde(default)]
    pub hugetlb_pages: Option<u64>,
    /// `[host] damon = "off"`: the `state` files of the kdamonds the run turned off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damon_on: Vec<PathBuf>,
    /// `--fit-memory` by offlining: the memory blocks the run may have taken offline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline_blocks: Vec<u64>,
    /// `[host] loop_images`: (image, mount point) of each image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loop_images: Vec<(PathBuf, PathBuf)>,
    /// Block devices' `queue/read_ahead_kb` files the run changed and their values before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_ahead_kb: Vec<(PathBuf, u64)>,
}

/// `/sys/block/DEV/queue/read_ahead_kb` (the bdi's `ra_pages` in KiB, docs/model §23.1).
pub fn read_ahead_kb_path(dev: &str) -> PathBuf {
    crate::journal::read_ahead_path(dev)
}

/// The device of a `/sys/block/DEV/queue/read_ahead_kb` path (None for any other path).
fn read_ahead_dev(p: &Path) -> Option<String> {
    let dev = p
        .strip_prefix("/sys/block")
        .ok()
        .and_then(|r| r.to_str())
        .and_then(|r| r.strip_suffix("/queue/read_ahead_kb"))?;
    (!dev.is_empty() && !dev.contains('/') && dev != "..").then(|| dev.to_string())
}

impl StateFile {
    /// The journal's changes of an old state file, ordered so that undoing them last first
    /// restores in the order the old format did: the knobs, the trace instance and mount,
    /// the kdamonds, the memory blocks, read_ahead_kb, the hugetlb pool, the loop images, the
    /// run's directory. A read_ahead_kb path that is not a block device's becomes a change
    /// [`Change::check`](crate::journal::Change::check) refuses.
    pub fn into_changes(self) -> Vec<crate::journal::Change> {
        use crate::journal::Change;
        let c = self.cleanup;
        let mut v = Vec::new();
        v.extend(c.workdir.map(|path| Change::WorkDir { path }));
        for (image, mnt) in c.loop_images {
            let name = image
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let fs = [
                crate::loops::Fs::Ext4Journal,
                crate::loops::Fs::Ext4,
                crate::loops::Fs::Xfs,
            ]
            .into_iter()
            .find(|f| name == format!("img-{}.img", f.name()))
            .unwrap_or(crate::loops::Fs::Xfs);
            v.push(Change::LoopImage {
                fs,
                image,
                mnt,
                size: 0,
            });
        }
        v.extend(
            c.hugetlb_pages
                .map(|n| Change::HugetlbPool { before: n, after: n }),
        );
        for (p, before) in c.read_ahead_kb {
            let dev = read_ahead_dev(&p).unwrap_or_else(|| p.display().to_string());
            v.push(Change::ReadAhead {
                dev,
                before,
                after: before,
            });
        }
        v.extend(
            c.offline_blocks
                .into_iter()
                .map(|index| Change::MemoryBlock { index }),
        );
        v.extend(
            c.damon_on
                .into_iter()
                .rev()
                .map(|state| Change::Kdamond { state }),
        );
        v.extend(c.trace_mount.map(|path| Change::TraceMount { path }));
        v.extend(c.trace_instance.map(|path| Change::TraceInstance { path }));
        v.extend(self.knobs.into_iter().map(|k| Change::Knob {
            after: k.value.clone(),
            name: k.name,
            path: k.path,
            before: k.value,
        }));
        v
    }
}

/// The default state file of process `pid`: `/run/fraglab-host-<pid>.restore`.
pub fn default_state_file(pid: u32) -> PathBuf {
    PathBuf::from(format!("/run/fraglab-host-{pid}.restore"))
}

/// State files left in /run by processes that did not undo their changes (killed with
/// SIGKILL).
pub fn find_state_files() -> Vec<PathBuf> {
    crate::journal::leftovers_in(Path::new("/run")).0
}

/// Removes the `fraglab-host-PID.restore.tmp` files in `dir` whose process is gone: a state
/// file half-written when its process was killed. Its change was never applied (a change is
/// applied only after its state file is renamed into place), so there is nothing to undo.
/// Returns the files removed.
pub fn remove_stale_tmp_files(dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for p in crate::journal::leftovers_in(dir).1 {
        let pid = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("fraglab-host-"))
            .and_then(|n| n.split(['.', '-']).next())
            .and_then(|n| n.parse::<u32>().ok());
        let alive = pid.is_some_and(|pid| pid == std::process::id() || process_alive(pid));
        if !alive && std::fs::remove_file(&p).is_ok() {
            removed.push(p);
        }
    }
    removed
}

/// Undoes the changes of a state file left by a process that was killed (SIGKILL) before it
/// could undo them ([`crate::journal::restore_state_file`] on this machine), then removes the
/// file; also removes half-written state files of dead processes beside it. Refuses while the
/// process that wrote it is still alive. Returns what was put back as (what, value).
pub fn restore_from_state_file(path: &Path) -> Result<Vec<(String, String)>, HostError> {
    if let Some(dir) = path.parent() {
        remove_stale_tmp_files(dir);
    }
    crate::journal::restore_state_file(path, &crate::journal::Machine::live())
}

/// Whether process `pid` exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    use crate::journal::Backend as _;
    crate::journal::LiveBackend.start_time(pid as i32).is_some()
}

/// The machine-wide lock of host runs (`flock` on `/run/fraglab-host.lock`): two runs changing
/// the same knobs would restore each other's values.
pub struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    pub fn acquire() -> Result<RunLock, HostError> {
        use std::os::fd::AsRawFd;
        let path = "/run/fraglab-host.lock";
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| HostError::io(path, e))?;
        // SAFETY: flock on an open descriptor we own.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            return Err(HostError::Busy(format!("another host run holds {path}")));
        }
        Ok(RunLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            knob_path("vm.page-cluster"),
            PathBuf::from("/proc/sys/vm/page-cluster")
        );
        assert_eq!(
            knob_path("transparent_hugepage/hugepages-64kB/enabled"),
            PathBuf::from("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled")
        );
    }

    #[test]
    fn normalising() {
        assert_eq!(normalise("always [madvise] never\n"), "madvise");
        assert_eq!(normalise("256\t256\t32\t0\t0\n"), "256 256 32 0 0");
        assert_eq!(normalise("60\n"), "60");
    }

    #[test]
    fn values_fit_kinds() {
        let f = |n| fraglab_spec::find_knob(n).unwrap();
        assert!(value_fits(f("transparent_hugepage/enabled"), "madvise"));
        assert!(!value_fits(f("transparent_hugepage/enabled"), "rm -rf"));
        assert!(value_fits(f("vm.lowmem_reserve_ratio"), "256 256 32 0 0"));
        assert!(!value_fits(f("vm.lowmem_reserve_ratio"), "256 256"));
        assert!(value_fits(f("vm.swappiness"), "60"));
    }

    /// `[machine] read_ahead_kb`: only `/sys/block/DEV/queue/read_ahead_kb` is restored from an
    /// old state file; an old state file without the field still reads.
    #[test]
    fn read_ahead_kb_paths_and_old_state_file() {
        assert_eq!(
            read_ahead_kb_path("vda"),
            PathBuf::from("/sys/block/vda/queue/read_ahead_kb")
        );
        assert_eq!(
            read_ahead_dev(Path::new("/sys/block/loop3/queue/read_ahead_kb")).as_deref(),
            Some("loop3")
        );
        assert!(read_ahead_dev(Path::new("/sys/block/../queue/read_ahead_kb")).is_none());
        assert!(read_ahead_dev(Path::new("/sys/block/a/b/queue/read_ahead_kb")).is_none());
        assert!(read_ahead_dev(Path::new("/etc/passwd")).is_none());
        let old: StateFile = serde_json::from_str(r#"{"pid": 1, "knobs": []}"#).unwrap();
        assert!(old.cleanup.read_ahead_kb.is_empty());
        let mut st = old.clone();
        st.cleanup.read_ahead_kb.push((read_ahead_kb_path("vda"), 8192));
        st.cleanup.read_ahead_kb.push((PathBuf::from("/etc/passwd"), 1));
        let back: StateFile = serde_json::from_str(&serde_json::to_string(&st).unwrap()).unwrap();
        assert_eq!(back, st);
        let changes = back.into_changes();
        assert!(changes[0].check().is_ok());
        assert!(changes[1].check().is_err(), "{:?}", changes[1]);
    }
}
