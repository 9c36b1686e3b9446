//! Kernel knobs on the live machine: where each of [`fraglab_spec::KNOBS`] lives, how to read
//! and write it, and [`KnobGuard`], which saves every knob to a state file before changing it
//! and puts the saved values back when it is dropped (normal end, error, panic unwinding).
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

/// One knob as saved in a state file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedKnob {
    pub name: String,
    pub path: PathBuf,
    /// The value before the run changed it.
    pub value: String,
}

/// The state file of a run (JSON): who wrote it and the knobs to put back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    pub pid: u32,
    pub knobs: Vec<SavedKnob>,
    /// What else a killed run leaves behind, for [`restore_from_state_file`] to clean up.
    #[serde(default)]
    pub cleanup: Cleanup,
}

/// A run's leftovers if it dies without cleaning up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cleanup {
    /// The run's directory (removed with its contents; only a `fraglab-host-*` directory).
    pub workdir: Option<PathBuf>,
    /// The private tracefs instance (rmdir; only a `fraglab-host-*` directory under
    /// `instances/`).
    pub trace_instance: Option<PathBuf>,
    /// A tracefs mount the run made (unmounted; only a `/run/fraglab-host-tracefs-*` path).
    pub trace_mount: Option<PathBuf>,
    /// `--fit-memory`: the hugetlb pool size (`vm.nr_hugepages`) to write back.
    #[serde(default)]
    pub hugetlb_pages: Option<u64>,
    /// `[host] damon = "off"`: the `state` files of the kdamonds the run turned off, to turn
    /// back on (only `/sys/kernel/mm/damon/admin/kdamonds/N/state`; [`crate::damon`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damon_on: Vec<PathBuf>,
    /// `--fit-memory` by offlining: the memory blocks (`memoryN` indices under
    /// /sys/devices/system/memory) the run may have taken offline, each recorded before
    /// `offline` was written to it; those that read offline are onlined again
    /// ([`crate::memblock::online_blocks`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offline_blocks: Vec<u64>,
    /// `[host] loop_images`: (image, mount point) of each image, recorded before it is made:
    /// unmounted, its loop devices detached (`losetup -j`), deleted ([`crate::loops`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loop_images: Vec<(PathBuf, PathBuf)>,
    /// Block devices' `queue/read_ahead_kb` files the run changed and their values before
    /// ([`KnobGuard::set_read_ahead_kb`]; only `/sys/block/DEV/queue/read_ahead_kb`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_ahead_kb: Vec<(PathBuf, u64)>,
}

/// `/sys/block/DEV/queue/read_ahead_kb` (the bdi's `ra_pages` in KiB, kernel-model.md §23.1).
pub fn read_ahead_kb_path(dev: &str) -> PathBuf {
    PathBuf::from(format!("/sys/block/{dev}/queue/read_ahead_kb"))
}

/// Whether `p` is a `/sys/block/DEV/queue/read_ahead_kb` file (guards a hand-edited state file).
fn is_read_ahead_kb(p: &Path) -> bool {
    let dev = p
        .strip_prefix("/sys/block")
        .ok()
        .and_then(|r| r.to_str())
        .and_then(|r| r.strip_suffix("/queue/read_ahead_kb"));
    dev.is_some_and(|d| !d.is_empty() && !d.contains('/') && d != "..")
}

/// Writes back saved read_ahead_kb values, last changed first; returns the failures.
fn restore_read_ahead(saved: &[(PathBuf, u64)]) -> Vec<String> {
    saved
        .iter()
        .rev()
        .filter(|(p, _)| is_read_ahead_kb(p))
        .filter_map(|(p, v)| {
            std::fs::write(p, v.to_string())
                .err()
                .map(|e| format!("{}: {e}", p.display()))
        })
        .collect()
}

fn ours(p: &Path, prefix: &str) -> bool {
    p.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
}

impl Cleanup {
    /// Removes what is listed; returns what failed.
    fn run(&self) -> Vec<String> {
        let mut failed = Vec::new();
        if let Some(i) = &self.trace_instance {
            let under_instances = i.parent().is_some_and(|p| p.ends_with("instances"));
            if i.exists() && under_instances && ours(i, "fraglab-host-") {
                // Stop recording first; rmdir of an instance frees its buffer.
                let _ = std::fs::write(i.join("tracing_on"), "0");
                if let Err(e) = std::fs::remove_dir(i) {
                    failed.push(format!("{}: {e}", i.display()));
                }
            }
        }
        if let Some(m) = &self.trace_mount {
            if m.starts_with("/run") && ours(m, "fraglab-host-tracefs-") && m.exists() {
                let c = std::ffi::CString::new(m.as_os_str().as_encoded_bytes()).expect("no NUL");
                // SAFETY: unmounting the tracefs a killed run of this engine mounted.
                unsafe { libc::umount2(c.as_ptr(), 0) };
                let _ = std::fs::remove_dir(m);
            }
        }
        failed.extend(crate::damon::turn_on(&self.damon_on));
        failed.extend(crate::memblock::online_blocks(
            Path::new(crate::memblock::MEMORY_SYSFS),
            &self.offline_blocks,
        ));
        failed.extend(restore_read_ahead(&self.read_ahead_kb));
        if let Some(n) = self.hugetlb_pages {
            if let Err(e) = std::fs::write(crate::hugetlb::NR_HUGEPAGES, n.to_string()) {
                failed.push(format!("{}: {e}", crate::hugetlb::NR_HUGEPAGES));
            }
        }
        // The images live in the run's directory: unmount and detach before it is removed.
        for (image, mnt) in self.loop_images.iter().rev() {
            failed.extend(crate::loops::teardown_one(image, mnt));
        }
        if let Some(w) = &self.workdir {
            if w.is_dir() && ours(w, "fraglab-host-") {
                if let Err(e) = std::fs::remove_dir_all(w) {
                    failed.push(format!("{}: {e}", w.display()));
                }
            }
        }
        failed
    }
}

/// The default state file of process `pid`: `/run/fraglab-host-<pid>.restore`.
pub fn default_state_file(pid: u32) -> PathBuf {
    PathBuf::from(format!("/run/fraglab-host-{pid}.restore"))
}

/// State files left in /run by runs that did not restore their knobs (killed with SIGKILL).
pub fn find_state_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/run")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        n.starts_with("fraglab-host-") && n.ends_with(".restore")
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn write_state_file(path: &Path, state: &StateFile) -> Result<(), HostError> {
    let tmp = path.with_extension("restore.tmp");
    let text = serde_json::to_string_pretty(state).expect("plain data");
    let mut f = std::fs::File::create(&tmp).map_err(|e| HostError::io(tmp.display().to_string(), e))?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| HostError::io(tmp.display().to_string(), e))?;
    std::fs::rename(&tmp, path).map_err(|e| HostError::io(path.display().to_string(), e))
}

/// Puts back the knobs saved in a state file left by a run that was killed (SIGKILL) before it
/// could restore them (and what its cleanup lists: kdamonds turned off, memory blocks taken
/// offline, the hugetlb pool, ...),
/// then removes the file. Refuses while the process that wrote it is still alive (it would
/// restore under a running workload). Returns the restored (name, value)s, a kdamond turned
/// back on as (its state file, "on"), a memory block as (its state file, "online").
pub fn restore_from_state_file(path: &Path) -> Result<Vec<(String, String)>, HostError> {
    let text = std::fs::read_to_string(path).map_err(|e| HostError::io(path.display().to_string(), e))?;
    let state: StateFile = serde_json::from_str(&text)
        .map_err(|e| HostError::BadStateFile(format!("{}: {e}", path.display())))?;
    if state.pid != std::process::id() && process_alive(state.pid) {
        return Err(HostError::Busy(format!(
            "{}: the run (pid {}) that wrote it is still alive",
            path.display(),
            state.pid
        )));
    }
    for k in &state.knobs {
        let def = fraglab_spec::find_knob(&k.name)
            .ok_or_else(|| HostError::BadStateFile(format!("unknown knob {}", k.name)))?;
        if knob_path(def.name) != k.path || !value_fits(def, &k.value) {
            return Err(HostError::BadStateFile(format!(
                "{}: {} {:?} at {} is not a valid saved knob",
                path.display(),
                k.name,
                k.value,
                k.path.display()
            )));
        }
    }
    if let Some(p) = state
        .cleanup
        .damon_on
        .iter()
        .find(|p| !crate::damon::is_state_file(p))
    {
        return Err(HostError::BadStateFile(format!(
            "{}: {} is not a kdamond state file",
            path.display(),
            p.display()
        )));
    }
    if let Some((p, _)) = state
        .cleanup
        .read_ahead_kb
        .iter()
        .find(|(p, _)| !is_read_ahead_kb(p))
    {
        return Err(HostError::BadStateFile(format!(
            "{}: {} is not a block device's read_ahead_kb",
            path.display(),
            p.display()
        )));
    }
    let mut failed = restore_list(&state.knobs);
    failed.extend(state.cleanup.run());
    if !failed.is_empty() {
        return Err(HostError::RestoreFailed(failed));
    }
    std::fs::remove_file(path).map_err(|e| HostError::io(path.display().to_string(), e))?;
    Ok(state
        .knobs
        .iter()
        .map(|k| (k.name.clone(), k.value.clone()))
        .chain(
            state
                .cleanup
                .damon_on
                .iter()
                .map(|p| (p.display().to_string(), "on".to_string())),
        )
        .chain(state.cleanup.offline_blocks.iter().map(|i| {
            (
                crate::memblock::state_path(Path::new(crate::memblock::MEMORY_SYSFS), *i)
                    .display()
                    .to_string(),
                "online".to_string(),
            )
        }))
        .collect())
}

/// Whether process `pid` exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Writes back saved knobs in reverse order; returns the failures.
fn restore_list(knobs: &[SavedKnob]) -> Vec<String> {
    let mut failed = Vec::new();
    for k in knobs.iter().rev() {
        if let Err(e) = write_knob(&k.name, &k.path, &k.value) {
            failed.push(e.to_string());
        }
    }
    failed
}

/// Records knobs, applies new values, and restores the recorded values on [`KnobGuard::restore`]
/// or on drop (also while unwinding from a panic). The state file is written before the first
/// knob changes and removed after a clean restore.
pub struct KnobGuard {
    saved: Vec<SavedKnob>,
    state_file: PathBuf,
    cleanup: Cleanup,
    restored: bool,
}

impl KnobGuard {
    /// Saves the current value of every knob in `new` (canonical name → value text), writes
    /// the state file, then writes the new values. On a failed write, what was written is put
    /// back before the error is returned.
    pub fn apply(
        new: &[(String, String)],
        state_file: &Path,
        cleanup: Cleanup,
    ) -> Result<KnobGuard, HostError> {
        let mut saved = Vec::new();
        for (name, _) in new {
            let path = knob_path(name);
            if !path.exists() {
                return Err(HostError::MissingKnob {
                    name: name.clone(),
                    path: path.display().to_string(),
                });
            }
            saved.push(SavedKnob {
                name: name.clone(),
                value: read_knob(&path)?,
                path,
            });
        }
        write_state_file(
            state_file,
            &StateFile {
                pid: std::process::id(),
                knobs: saved.clone(),
                cleanup: cleanup.clone(),
            },
        )?;
        let guard = KnobGuard {
            saved,
            state_file: state_file.to_path_buf(),
            cleanup,
            restored: false,
        };
        for (i, (name, value)) in new.iter().enumerate() {
            if guard.saved[i].value == normalise(value) {
                continue;
            }
            // The guard restores everything on drop if this fails.
            write_knob(name, &guard.saved[i].path, value)?;
        }
        Ok(guard)
    }

    /// Records more leftovers (a trace instance started after the knobs) in the state file.
    pub fn update_cleanup(&mut self, f: impl FnOnce(&mut Cleanup)) -> Result<(), HostError> {
        f(&mut self.cleanup);
        write_state_file(
            &self.state_file,
            &StateFile {
                pid: std::process::id(),
                knobs: self.saved.clone(),
                cleanup: self.cleanup.clone(),
            },
        )
    }

    /// Sets block device `dev`'s read_ahead_kb (`/sys/block/DEV/queue/read_ahead_kb`,
    /// kernel-model.md §23.1) to `kb` for the run: the value before is recorded in the state
    /// file first (once per device) and written back by [`KnobGuard::restore`], on drop, and by
    /// `fraglab host restore` after a SIGKILL. Files opened afterwards copy the new `ra_pages`.
    pub fn set_read_ahead_kb(&mut self, dev: &str, kb: u64) -> Result<(), HostError> {
        let path = read_ahead_kb_path(dev);
        if !is_read_ahead_kb(&path) || !path.exists() {
            return Err(HostError::MissingKnob {
                name: "read_ahead_kb".into(),
                path: path.display().to_string(),
            });
        }
        let old: u64 = read_knob(&path)?.trim().parse().map_err(|_| {
            HostError::io(
                path.display().to_string(),
                std::io::Error::new(std::io::ErrorKind::InvalidData, "not a number"),
            )
        })?;
        if !self.cleanup.read_ahead_kb.iter().any(|(p, _)| *p == path) {
            let p = path.clone();
            self.update_cleanup(|c| c.read_ahead_kb.push((p, old)))?;
        }
        std::fs::write(&path, kb.to_string()).map_err(|e| HostError::io(path.display().to_string(), e))
    }

    /// The saved (pre-run) values.
    pub fn saved(&self) -> &[SavedKnob] {
        &self.saved
    }

    /// Writes the saved values back, turns back on the kdamonds the run turned off
    /// ([`Cleanup::damon_on`]) and removes the state file (kept if anything failed).
    pub fn restore(&mut self) -> Result<(), HostError> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let mut failed = restore_list(&self.saved);
        failed.extend(crate::damon::turn_on(&self.cleanup.damon_on));
        failed.extend(restore_read_ahead(&self.cleanup.read_ahead_kb));
        if !failed.is_empty() {
            return Err(HostError::RestoreFailed(failed));
        }
        let _ = std::fs::remove_file(&self.state_file);
        Ok(())
    }
}

impl Drop for KnobGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!(
                "fraglab-host: {e} (state file {} kept for restore_from_state_file)",
                self.state_file.display()
            );
        }
    }
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

    /// `[machine] read_ahead_kb`: only `/sys/block/DEV/queue/read_ahead_kb` is restored from a
    /// state file; an old state file without the field still reads.
    #[test]
    fn read_ahead_kb_paths_and_state_file() {
        assert_eq!(
            read_ahead_kb_path("vda"),
            PathBuf::from("/sys/block/vda/queue/read_ahead_kb")
        );
        assert!(is_read_ahead_kb(Path::new(
            "/sys/block/loop3/queue/read_ahead_kb"
        )));
        assert!(!is_read_ahead_kb(Path::new("/sys/block/../queue/read_ahead_kb")));
        assert!(!is_read_ahead_kb(Path::new("/sys/block/a/b/queue/read_ahead_kb")));
        assert!(!is_read_ahead_kb(Path::new("/etc/passwd")));
        let old: StateFile = serde_json::from_str(r#"{"pid": 1, "knobs": []}"#).unwrap();
        assert!(old.cleanup.read_ahead_kb.is_empty());
        let mut st = old.clone();
        st.cleanup.read_ahead_kb.push((read_ahead_kb_path("vda"), 8192));
        let back: StateFile = serde_json::from_str(&serde_json::to_string(&st).unwrap()).unwrap();
        assert_eq!(back, st);
    }
}
