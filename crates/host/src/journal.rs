//! The change journal: every change the host engine makes to the machine is a typed [`Change`],
//! written to the run's state file (write to a temporary file, fsync, rename, fsync the
//! directory) *before* it is applied, and undone in reverse order on every way out: a normal
//! end ([`Journal::undo_all`]), an error or a panic (the [`Journal`]'s drop), SIGINT/SIGTERM
//! (the run loops see [`crate::signals`]' flag and return an error, which drops the journal),
//! and after a SIGKILL by `fraglab host restore` ([`restore_state_file`], which reads the
//! state file the killed process left).
//!
//! Every undo is idempotent and looks at the machine first (a knob is written back only when it
//! differs from the value before; a memory block is onlined only when it reads offline; a
//! tracefs instance is removed only when it exists), so a change that was recorded but never
//! applied (the process died between the two) is undone as a no-op. The kinds:
//!
//! | kind | change | undo |
//! |---|---|---|
//! | `knob` | a sysctl or sysfs knob (incl. THP settings) | the value before |
//! | `read_ahead` | a block device's `queue/read_ahead_kb` (loop devices too) | the value before |
//! | `memory_block` | a memory block taken offline | onlined (as zone Normal) |
//! | `hugetlb_pool` | `vm.nr_hugepages` | the size before, read back |
//! | `watch` | a value the kernel recomputes as a side effect (`vm.user_reserve_kbytes` and `vm.admin_reserve_kbytes` when memory blocks go offline and come back) | the value before, read back |
//! | `kdamond` | a kdamond turned off | turned on |
//! | `trace_mount` | tracefs mounted at `/run/fraglab-*-tracefs-PID` | unmounted, directory removed |
//! | `trace_instance` | a tracefs instance `instances/fraglab-*` | events off, removed |
//! | `loop_image` | a filesystem image, its loop device and mount | unmounted, detached, deleted |
//! | `child` | a process the engine started | SIGTERM (with a grace) then SIGKILL, if it is still that process |
//! | `work_dir` | the run's directory `fraglab-host-*` | removed with its contents |
//!
//! The engine makes no cgroup. Memory it maps, pipes and files under the run's directory go
//! with its processes and the directory.
//!
//! All paths in a journal are the machine's real paths (`/proc/sys/vm/...`); a [`Machine`]
//! maps them under its root (`/` on the live machine, a temporary directory standing in for
//! /proc/sys, /sys and tracefs in tests), and the operations that need system calls (mount,
//! loop devices, signals) go through its [`Backend`]: [`LiveBackend`] on the machine, a fake
//! in the tests.
//!
//! The state file of a run before this journal (`{"pid", "knobs", "cleanup"}`) is still read:
//! [`crate::knobs::StateFile::into_changes`] turns it into the same changes.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::knobs::{knob_path, normalise, value_fits};
use crate::loops::Fs;
use crate::HostError;

/// The `format` of a journal state file.
pub const FORMAT: &str = "fraglab-journal-1";

/// The values the kernel recomputes when memory blocks go offline or come back online
/// (`reserve_mem_notifier`): recorded before the first block goes and checked at the end.
pub const RECOMPUTED_BY_HOTPLUG: [&str; 2] = [
    "/proc/sys/vm/user_reserve_kbytes",
    "/proc/sys/vm/admin_reserve_kbytes",
];

/// One change to the machine, with what it takes to undo it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A knob of [`fraglab_spec::KNOBS`] at its real path.
    Knob {
        name: String,
        path: PathBuf,
        before: String,
        after: String,
    },
    /// `/sys/block/DEV/queue/read_ahead_kb`.
    ReadAhead { dev: String, before: u64, after: u64 },
    /// `/sys/devices/system/memory/memoryN/state` written `offline`.
    MemoryBlock { index: u64 },
    /// `/proc/sys/vm/nr_hugepages`: `before` is written back.
    HugetlbPool { before: u64, after: u64 },
    /// A value the kernel recomputes as a side effect of other changes (one of
    /// [`RECOMPUTED_BY_HOTPLUG`]); nothing is applied, the value before is put back.
    Watch { path: PathBuf, before: String },
    /// A kdamond's `state` file written `off`.
    Kdamond { state: PathBuf },
    /// tracefs mounted at this directory (made for it).
    TraceMount { path: PathBuf },
    /// A tracefs instance directory.
    TraceInstance { path: PathBuf },
    /// A filesystem image in the run's directory, attached to a loop device and mounted.
    LoopImage {
        fs: Fs,
        image: PathBuf,
        mnt: PathBuf,
        size: u64,
    },
    /// A process the engine started; `start_time` (field 22 of /proc/PID/stat) tells it from a
    /// later process with the same pid. `grace_ms`: how long it has after SIGTERM before
    /// SIGKILL (0: SIGKILL at once).
    Child {
        pid: i32,
        start_time: u64,
        grace_ms: u64,
    },
    /// The run's directory.
    WorkDir { path: PathBuf },
}

/// `/sys/block/DEV/queue/read_ahead_kb`.
pub fn read_ahead_path(dev: &str) -> PathBuf {
    PathBuf::from(format!("/sys/block/{dev}/queue/read_ahead_kb"))
}

/// `/sys/devices/system/memory/memoryN/state`.
pub fn memory_block_path(index: u64) -> PathBuf {
    crate::memblock::state_path(Path::new(crate::memblock::MEMORY_SYSFS), index)
}

fn named(p: &Path, prefix: &str) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(prefix) && !n.contains('/'))
}

/// Where tracefs is mounted on a machine (the engine uses the first tracefs of /proc/mounts).
const TRACEFS_ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A tracefs mount point of the engine's own: `/run/fraglab-*-tracefs-*`.
fn private_tracefs(path: &Path) -> bool {
    path.parent() == Some(Path::new("/run"))
        && named(path, "fraglab-")
        && path.to_string_lossy().contains("-tracefs-")
}

/// Whether `root` is where the engine makes instances: a known tracefs place, a private
/// mount, or a tracefs mount point /proc/mounts lists now.
fn tracefs_root_ok(root: &Path) -> bool {
    private_tracefs(root)
        || TRACEFS_ROOTS.iter().any(|r| root == Path::new(r))
        || crate::trace::tracefs_mount().is_some_and(|m| m == root)
}

/// A loop image's paths: `img-*.img` and `mnt-*` in a `fraglab-host-*` directory.
fn loop_paths_ok(image: &Path, mnt: &Path) -> bool {
    let in_run = |p: &Path| p.parent().is_some_and(|d| named(d, "fraglab-host-"));
    named(image, "img-") && named(mnt, "mnt-") && in_run(image) && in_run(mnt)
}

impl Change {
    /// A knob change: its value now read under `m`'s root.
    pub fn knob(m: &Machine, name: &str, after: &str) -> Result<Change, HostError> {
        let path = knob_path(name);
        let real = m.path(&path);
        if !real.exists() {
            return Err(HostError::MissingKnob {
                name: name.to_string(),
                path: path.display().to_string(),
            });
        }
        Ok(Change::Knob {
            name: name.to_string(),
            before: m.read(&path)?,
            path,
            after: after.to_string(),
        })
    }

    /// A read_ahead_kb change of block device `dev`: its value now.
    pub fn read_ahead(m: &Machine, dev: &str, after: u64) -> Result<Change, HostError> {
        let path = read_ahead_path(dev);
        if !m.path(&path).exists() {
            return Err(HostError::MissingKnob {
                name: "read_ahead_kb".into(),
                path: path.display().to_string(),
            });
        }
        Ok(Change::ReadAhead {
            dev: dev.to_string(),
            before: m.read_u64(&path)?,
            after,
        })
    }

    /// A value the kernel recomputes: its value now.
    pub fn watch(m: &Machine, path: &str) -> Result<Change, HostError> {
        Ok(Change::Watch {
            before: m.read(Path::new(path))?,
            path: PathBuf::from(path),
        })
    }

    /// A process this one started, identified by its start time.
    pub fn child(m: &Machine, pid: i32, grace: Duration) -> Change {
        Change::Child {
            pid,
            start_time: m.backend.start_time(pid).unwrap_or(0),
            grace_ms: grace.as_millis() as u64,
        }
    }

    /// Whether the change is one the engine makes (guards a hand-edited or corrupt state
    /// file: nothing else is ever written, unmounted or removed); the error says why not.
    pub fn check(&self) -> Result<(), String> {
        let ok = match self {
            Change::Knob {
                name, path, before, ..
            } => fraglab_spec::find_knob(name)
                .is_some_and(|d| knob_path(d.name) == *path && value_fits(d, before)),
            Change::ReadAhead { dev, .. } => {
                !dev.is_empty() && dev != ".." && dev != "." && !dev.contains('/')
            }
            Change::MemoryBlock { .. } | Change::HugetlbPool { .. } => true,
            Change::Watch { path, before } => {
                RECOMPUTED_BY_HOTPLUG.iter().any(|p| Path::new(p) == path) && before.parse::<u64>().is_ok()
            }
            Change::Kdamond { state } => crate::damon::is_state_file(state),
            Change::TraceMount { path } => private_tracefs(path),
            Change::TraceInstance { path } => {
                named(path, "fraglab-")
                    && path.parent().and_then(|p| p.file_name()) == Some("instances".as_ref())
                    && path.parent().and_then(Path::parent).is_some_and(tracefs_root_ok)
            }
            Change::LoopImage { image, mnt, .. } => loop_paths_ok(image, mnt),
            Change::Child { pid, .. } => *pid > 1,
            Change::WorkDir { path } => path.is_absolute() && named(path, "fraglab-host-"),
        };
        if ok {
            Ok(())
        } else {
            Err(format!("{self:?} is not a change the host engine makes"))
        }
    }

    /// What the undo puts back, as `(what, value)` (the lines `host restore` prints).
    pub fn describe(&self) -> (String, String) {
        let d = |p: &Path| p.display().to_string();
        match self {
            Change::Knob { name, before, .. } => (name.clone(), before.clone()),
            Change::ReadAhead { dev, before, .. } => (d(&read_ahead_path(dev)), before.to_string()),
            Change::MemoryBlock { index } => (d(&memory_block_path(*index)), "online".into()),
            Change::HugetlbPool { before, .. } => ("vm.nr_hugepages".into(), before.to_string()),
            Change::Watch { path, before } => (d(path), before.clone()),
            Change::Kdamond { state } => (d(state), "on".into()),
            Change::TraceMount { path } => (d(path), "unmounted".into()),
            Change::TraceInstance { path } => (d(path), "removed".into()),
            Change::LoopImage { image, .. } => (d(image), "unmounted, detached, removed".into()),
            Change::Child { pid, .. } => (format!("process {pid}"), "ended".into()),
            Change::WorkDir { path } => (d(path), "removed".into()),
        }
    }

    /// Applies the change on `m`. Returns the loop device of a `loop_image`. `child` and
    /// `watch` apply nothing (the process is started, the value recomputed, by others).
    pub fn apply(&self, m: &Machine) -> Result<Option<PathBuf>, HostError> {
        match self {
            Change::Knob {
                name,
                path,
                before,
                after,
            } => {
                if *before != normalise(after) {
                    m.write_checked(name, path, after)?;
                }
            }
            Change::ReadAhead { dev, after, .. } => m.write(&read_ahead_path(dev), &after.to_string())?,
            Change::MemoryBlock { index } => m.write(&memory_block_path(*index), "offline")?,
            Change::HugetlbPool { after, .. } => m.write(Path::new(NR_HUGEPAGES), &after.to_string())?,
            Change::Watch { .. } | Change::Child { .. } => {}
            Change::Kdamond { state } => m.write(state, "off")?,
            Change::TraceMount { path } => {
                let dir = m.path(path);
                std::fs::create_dir_all(&dir).map_err(|e| HostError::io(path.display().to_string(), e))?;
                m.step("trace mount: directory made")?;
                m.backend
                    .mount_tracefs(&dir)
                    .map_err(|e| HostError::io(format!("mount tracefs at {}", path.display()), e))?;
            }
            Change::TraceInstance { path } => m
                .backend
                .make_instance(&m.path(path))
                .map_err(|e| HostError::io(path.display().to_string(), e))?,
            Change::LoopImage { fs, image, mnt, size } => {
                return apply_loop(m, *fs, image, mnt, *size).map(Some)
            }
            Change::WorkDir { path } => {
                std::fs::create_dir(m.path(path)).map_err(|e| HostError::io(path.display().to_string(), e))?
            }
        }
        Ok(None)
    }

    /// Undoes the change on `m` (idempotent; a no-op when there is nothing to undo). The error
    /// says what was left.
    pub fn undo(&self, m: &Machine) -> Result<(), String> {
        let e = |p: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", p.display());
        match self {
            Change::Knob {
                name, path, before, ..
            } => m.put_back(name, path, before),
            Change::ReadAhead { dev, before, .. } => {
                m.put_back("read_ahead_kb", &read_ahead_path(dev), &before.to_string())
            }
            Change::MemoryBlock { index } => undo_block(m, &memory_block_path(*index)),
            Change::HugetlbPool { before, .. } => {
                m.put_back("vm.nr_hugepages", Path::new(NR_HUGEPAGES), &before.to_string())
            }
            Change::Watch { path, before } => m.put_back(&path.display().to_string(), path, before),
            Change::Kdamond { state } => match m.read(state) {
                Ok(s) if s == "on" => Ok(()),
                Ok(_) => m.write(state, "on").map_err(|x| x.to_string()),
                // The kdamond's directory is gone (DAMON reconfigured): nothing to turn on.
                Err(_) if !m.path(state).exists() => Ok(()),
                Err(x) => Err(x.to_string()),
            },
            Change::TraceMount { path } => {
                let dir = m.path(path);
                if m.backend.is_mounted(&dir) {
                    m.backend.umount(&dir).map_err(|x| e(path, &x))?;
                }
                match std::fs::remove_dir(&dir) {
                    Err(x) if x.kind() != std::io::ErrorKind::NotFound => Err(e(path, &x)),
                    _ => Ok(()),
                }
            }
            Change::TraceInstance { path } => {
                let dir = m.path(path);
                if !dir.exists() {
                    return Ok(());
                }
                // Recording off first; removing the instance frees its buffer.
                let _ = m.backend.write(&dir.join("events/enable"), "0");
                let _ = m.backend.write(&dir.join("tracing_on"), "0");
                m.backend.remove_instance(&dir).map_err(|x| e(path, &x))
            }
            Change::LoopImage { image, mnt, .. } => undo_loop(m, image, mnt),
            Change::Child {
                pid,
                start_time,
                grace_ms,
            } => {
                end_child(m, *pid, *start_time, Duration::from_millis(*grace_ms));
                Ok(())
            }
            Change::WorkDir { path } => {
                let dir = m.path(path);
                match std::fs::remove_dir_all(&dir) {
                    Err(x) if x.kind() != std::io::ErrorKind::NotFound => Err(e(path, &x)),
                    _ => Ok(()),
                }
            }
        }
    }
}

const NR_HUGEPAGES: &str = crate::hugetlb::NR_HUGEPAGES;

fn undo_block(m: &Machine, state: &Path) -> Result<(), String> {
    match m.read(state) {
        Ok(s) if s == "online" => Ok(()),
        Ok(_) => m
            .write(state, "online_kernel")
            .or_else(|_| m.write(state, "online"))
            .map_err(|x| x.to_string()),
        Err(x) => Err(x.to_string()),
    }
}

/// Makes the image (sparse file, mkfs), its mount point, attaches and mounts it.
fn apply_loop(m: &Machine, fs: Fs, image: &Path, mnt: &Path, size: u64) -> Result<PathBuf, HostError> {
    let err = |why: String| HostError::LoopImage(format!("{} image: {why}", fs.name()));
    let img = m.path(image);
    let f = std::fs::File::create(&img).map_err(|e| err(format!("{}: {e}", image.display())))?;
    f.set_len(size)
        .map_err(|e| err(format!("{}: {e}", image.display())))?;
    drop(f);
    m.step("loop image: file made")?;
    m.backend.mkfs(fs, &img).map_err(|e| err(e.to_string()))?;
    m.step("loop image: mkfs")?;
    std::fs::create_dir(m.path(mnt)).map_err(|e| err(format!("{}: {e}", mnt.display())))?;
    m.step("loop image: mount point made")?;
    let dev = m.backend.loop_attach(&img).map_err(|e| err(e.to_string()))?;
    m.step("loop image: attached")?;
    m.backend
        .mount_fs(&dev, &m.path(mnt), fs)
        .map_err(|e| err(e.to_string()))?;
    Ok(dev)
}

fn undo_loop(m: &Machine, image: &Path, mnt: &Path) -> Result<(), String> {
    let (img, dir) = (m.path(image), m.path(mnt));
    if m.backend.is_mounted(&dir) {
        m.backend
            .umount(&dir)
            .map_err(|e| format!("umount {}: {e}", mnt.display()))?;
    }
    if img.exists() {
        m.backend
            .loop_detach(&img)
            .map_err(|e| format!("detach {}: {e}", image.display()))?;
    }
    if dir.is_dir() {
        std::fs::remove_dir(&dir).map_err(|e| format!("{}: {e}", mnt.display()))?;
    }
    match std::fs::remove_file(&img) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("{}: {e}", image.display())),
        _ => Ok(()),
    }
}

/// SIGTERM, up to `grace` for it to go, then SIGKILL; only while `pid` is the process that was
/// started (same start time).
fn end_child(m: &Machine, pid: i32, start: u64, grace: Duration) {
    let ours = || m.backend.start_time(pid) == Some(start);
    if !ours() {
        return;
    }
    if !grace.is_zero() {
        let _ = m.backend.signal(pid, libc::SIGTERM);
        let t = Instant::now();
        while t.elapsed() < grace && ours() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if ours() {
        let _ = m.backend.signal(pid, libc::SIGKILL);
    }
}

/// The system calls the journal needs, on the live machine or a fake. Paths are already
/// mapped under the [`Machine`]'s root.
pub trait Backend: Send + Sync {
    /// Writes a sysfs/procfs file (never creates it).
    fn write(&self, path: &Path, value: &str) -> std::io::Result<()>;
    fn mount_tracefs(&self, dir: &Path) -> std::io::Result<()>;
    fn umount(&self, dir: &Path) -> std::io::Result<()>;
    fn is_mounted(&self, dir: &Path) -> bool;
    /// mkdir of a tracefs instance (the kernel fills it).
    fn make_instance(&self, dir: &Path) -> std::io::Result<()>;
    /// rmdir of a tracefs instance (the kernel removes its files).
    fn remove_instance(&self, dir: &Path) -> std::io::Result<()>;
    fn mkfs(&self, fs: Fs, image: &Path) -> std::io::Result<()>;
    /// Attaches `image` to a free loop device; its path (`/dev/loopN`).
    fn loop_attach(&self, image: &Path) -> std::io::Result<PathBuf>;
    fn mount_fs(&self, dev: &Path, mnt: &Path, fs: Fs) -> std::io::Result<()>;
    /// Detaches every loop device backing `image`.
    fn loop_detach(&self, image: &Path) -> std::io::Result<()>;
    /// The start time of process `pid` (None when it is gone or a zombie).
    fn start_time(&self, pid: i32) -> Option<u64>;
    fn signal(&self, pid: i32, sig: i32) -> std::io::Result<()>;
}

/// The live machine's system calls.
pub struct LiveBackend;

fn run_tool(cmd: &str, args: &[&str]) -> std::io::Result<String> {
    let out = std::process::Command::new(cmd).args(args).output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!(
            "{cmd} {}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn cstr(p: &Path) -> std::io::Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)
}

impl Backend for LiveBackend {
    fn write(&self, path: &Path, value: &str) -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.write_all(value.as_bytes())
    }

    fn mount_tracefs(&self, dir: &Path) -> std::io::Result<()> {
        let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
        let (src, tgt, ty) = (c("nodev"), cstr(dir)?, c("tracefs"));
        // SAFETY: valid C strings; no mount data.
        let r = unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn umount(&self, dir: &Path) -> std::io::Result<()> {
        let c = cstr(dir)?;
        // SAFETY: unmounting a mount point this engine made.
        if unsafe { libc::umount2(c.as_ptr(), 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn is_mounted(&self, dir: &Path) -> bool {
        let m = dir.to_string_lossy();
        std::fs::read_to_string("/proc/self/mountinfo")
            .is_ok_and(|t| t.lines().any(|l| l.split(' ').nth(4).is_some_and(|p| p == m)))
    }

    fn make_instance(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir(dir)
    }

    fn remove_instance(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::remove_dir(dir)
    }

    fn mkfs(&self, fs: Fs, image: &Path) -> std::io::Result<()> {
        let img = image.to_string_lossy();
        let mut args: Vec<&str> = fs.mkfs_args().to_vec();
        args.push(&img);
        run_tool(fs.mkfs(), &args).map(drop)
    }

    fn loop_attach(&self, image: &Path) -> std::io::Result<PathBuf> {
        let dev = run_tool("losetup", &["--find", "--show", &image.to_string_lossy()])?;
        Ok(PathBuf::from(dev.trim()))
    }

    fn mount_fs(&self, dev: &Path, mnt: &Path, fs: Fs) -> std::io::Result<()> {
        let (d, m) = (dev.to_string_lossy(), mnt.to_string_lossy());
        run_tool("mount", &["-t", fs.fstype(), "-o", fs.options(), &d, &m]).map(drop)
    }

    fn loop_detach(&self, image: &Path) -> std::io::Result<()> {
        let out = run_tool("losetup", &["-j", &image.to_string_lossy()])?;
        for dev in out.lines().filter_map(|l| l.split(':').next()) {
            run_tool("losetup", &["-d", dev])?;
        }
        Ok(())
    }

    fn start_time(&self, pid: i32) -> Option<u64> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (_, rest) = s.rsplit_once(')')?;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] is field 3 (state); field 22 (starttime) is f[19].
        if f.first() == Some(&"Z") {
            return None;
        }
        f.get(19)?.parse().ok()
    }

    fn signal(&self, pid: i32, sig: i32) -> std::io::Result<()> {
        // SAFETY: kill(2) on a pid the journal recorded and checked by start time.
        if unsafe { libc::kill(pid, sig) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Where the journal's changes happen: a root the real paths are mapped under, and the
/// backend of its system calls.
#[derive(Clone)]
pub struct Machine {
    pub root: PathBuf,
    pub backend: Arc<dyn Backend>,
    /// Test hook: the journal step that fails (0: none) and the steps taken.
    fail_at: Arc<AtomicU64>,
    steps: Arc<AtomicU64>,
}

impl Machine {
    /// This machine: root `/`, [`LiveBackend`].
    pub fn live() -> Machine {
        Machine::new(PathBuf::from("/"), Arc::new(LiveBackend))
    }

    pub fn new(root: PathBuf, backend: Arc<dyn Backend>) -> Machine {
        Machine {
            root,
            backend,
            fail_at: Arc::new(AtomicU64::new(0)),
            steps: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The file of real path `p` under the root.
    pub fn path(&self, p: &Path) -> PathBuf {
        if self.root == Path::new("/") {
            return p.to_path_buf();
        }
        self.root.join(p.strip_prefix("/").unwrap_or(p))
    }

    /// The normalised value of the file of real path `p` ([`normalise`]).
    pub fn read(&self, p: &Path) -> Result<String, HostError> {
        let f = self.path(p);
        std::fs::read_to_string(&f)
            .map(|t| normalise(&t))
            .map_err(|e| HostError::io(p.display().to_string(), e))
    }

    fn read_u64(&self, p: &Path) -> Result<u64, HostError> {
        let v = self.read(p)?;
        v.parse().map_err(|_| {
            HostError::io(
                p.display().to_string(),
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not a number: {v:?}")),
            )
        })
    }

    /// Writes the file of real path `p`.
    pub fn write(&self, p: &Path, value: &str) -> Result<(), HostError> {
        self.backend
            .write(&self.path(p), value)
            .map_err(|e| HostError::io(format!("writing {value:?} to {}", p.display()), e))
    }

    /// Writes and checks that it reads back as written.
    fn write_checked(&self, name: &str, p: &Path, value: &str) -> Result<(), HostError> {
        let err = |why: String| HostError::KnobWrite {
            name: name.to_string(),
            value: value.to_string(),
            why,
        };
        self.backend
            .write(&self.path(p), value)
            .map_err(|e| err(format!("{}: {e}", p.display())))?;
        let now = self.read(p)?;
        if now != normalise(value) {
            return Err(err(format!("{} reads back {now:?}", p.display())));
        }
        Ok(())
    }

    /// Writes `before` back when the value differs, and checks it.
    fn put_back(&self, name: &str, p: &Path, before: &str) -> Result<(), String> {
        match self.read(p) {
            Ok(now) if now == normalise(before) => Ok(()),
            _ => self.write_checked(name, p, before).map_err(|e| e.to_string()),
        }
    }

    /// One step of the journal: fails at the step a test chose ([`Machine::fail_at_step`]).
    pub(crate) fn step(&self, what: &str) -> Result<(), HostError> {
        let n = self.steps.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_at.load(Ordering::SeqCst) == n {
            return Err(HostError::io(
                format!("injected fault after step {n} ({what})"),
                std::io::Error::other("failpoint"),
            ));
        }
        Ok(())
    }

    /// Test hook: the `n`th journal step (counted from now, 1-based) fails; 0 turns it off.
    #[cfg(test)]
    pub(crate) fn fail_at_step(&self, n: u64) {
        self.steps.store(0, Ordering::SeqCst);
        self.fail_at.store(n, Ordering::SeqCst);
    }
}

/// The state file's contents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalFile {
    pub format: String,
    /// The process that wrote it.
    pub pid: u32,
    /// In the order made; undone last first.
    pub changes: Vec<Change>,
}

/// The changes of one process, in its state file; undone on drop (see the module doc).
pub struct Journal {
    machine: Machine,
    state_file: PathBuf,
    changes: Vec<Change>,
    /// After [`Journal::undo_all`] (or a test's abandon): nothing left to do on drop.
    closed: bool,
}

/// Writes `text` to `path` atomically: `PATH.tmp` written and fsynced, renamed over `path`, the
/// directory fsynced. The temporary file is removed on every failure.
pub fn write_atomic(path: &Path, text: &str, m: &Machine) -> Result<(), HostError> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let r = (|| {
        let io = |e| HostError::io(tmp.display().to_string(), e);
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(text.as_bytes())
            .and_then(|_| f.sync_all())
            .map_err(io)?;
        m.step("state file: temporary written")?;
        std::fs::rename(&tmp, path).map_err(|e| HostError::io(path.display().to_string(), e))
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return r;
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| HostError::io(dir.display().to_string(), e))
}

impl Journal {
    /// A journal with no change yet; the state file is written with the first.
    pub fn new(machine: Machine, state_file: PathBuf) -> Journal {
        Journal {
            machine,
            state_file,
            changes: Vec::new(),
            closed: false,
        }
    }

    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    pub fn state_file(&self) -> &Path {
        &self.state_file
    }

    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// How many changes there are now: a mark for [`Journal::undo_to`].
    pub fn mark(&self) -> usize {
        self.changes.len()
    }

    fn persist(&self) -> Result<(), HostError> {
        let f = JournalFile {
            format: FORMAT.into(),
            pid: std::process::id(),
            changes: self.changes.clone(),
        };
        let text = serde_json::to_string_pretty(&f).expect("plain data");
        write_atomic(&self.state_file, &text, &self.machine)
    }

    /// Writes `c` to the state file; the caller then applies it (the engine's own way: bounded
    /// offlining, a pool filled in retries, a process spawned). Until the state file is written
    /// the change is not in the journal.
    ///
    /// A change that could not be recorded is undone at once (a no-op for one not yet
    /// applied; a process recorded after it was started is ended).
    pub fn record(&mut self, c: Change) -> Result<(), HostError> {
        self.changes.push(c);
        if let Err(e) = self.persist() {
            let c = self.changes.pop().expect("pushed");
            if let Err(u) = c.undo(&self.machine) {
                eprintln!("fraglab-host: {u}");
            }
            return Err(e);
        }
        self.machine.step("recorded")
    }

    /// [`Journal::record`]s `c`, then applies it ([`Change::apply`]).
    pub fn apply(&mut self, c: Change) -> Result<Option<PathBuf>, HostError> {
        self.record(c.clone())?;
        let r = c.apply(&self.machine)?;
        self.machine.step("applied")?;
        Ok(r)
    }

    /// Undoes the changes made since `mark`, last first; those that failed stay in the
    /// journal (and its state file).
    pub fn undo_to(&mut self, mark: usize) -> Result<(), HostError> {
        let mut failed = Vec::new();
        let mut kept = Vec::new();
        while self.changes.len() > mark {
            let c = self.changes.pop().expect("len > mark");
            if let Err(e) = c.undo(&self.machine) {
                failed.push(e);
                kept.push(c);
            }
        }
        self.changes.extend(kept.into_iter().rev());
        if self.changes.is_empty() {
            remove_state_file(&self.state_file)?;
        } else {
            self.persist()?;
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(HostError::RestoreFailed(failed))
        }
    }

    /// Undoes every change, last first, and removes the state file (kept, with what could not
    /// be undone, if anything failed).
    pub fn undo_all(&mut self) -> Result<(), HostError> {
        self.closed = true;
        self.undo_to(0)
    }

    /// Test hook: as if the process were killed now (nothing undone, the state file left).
    #[cfg(test)]
    pub(crate) fn abandon(mut self) {
        self.closed = true;
    }
}

fn remove_state_file(p: &Path) -> Result<(), HostError> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(HostError::io(p.display().to_string(), e)),
        _ => Ok(()),
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        if let Err(e) = self.undo_all() {
            eprintln!(
                "fraglab-host: {e} (state file {} kept for `fraglab host restore`)",
                self.state_file.display()
            );
        }
    }
}

/// The changes of a state file: a journal, or the format before it (turned into changes);
/// anything else is refused with what was found. Every change is checked ([`Change::check`]).
pub fn read_state_file(path: &Path) -> Result<JournalFile, HostError> {
    let bad = |why: String| HostError::BadStateFile(format!("{}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| HostError::io(path.display().to_string(), e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let f = match v.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => serde_json::from_value::<JournalFile>(v).map_err(|e| bad(e.to_string()))?,
        Some(other) => {
            return Err(bad(format!(
                "format {other:?} is not one this fraglab reads ({FORMAT:?}, or the older \
                 {{pid, knobs, cleanup}}); restore it with the fraglab that wrote it"
            )))
        }
        None if v.get("knobs").is_some() => {
            let old: crate::knobs::StateFile = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
            JournalFile {
                format: FORMAT.into(),
                pid: old.pid,
                changes: old.into_changes(),
            }
        }
        None => {
            return Err(bad(
                "neither a change journal nor the older state file format".into()
            ))
        }
    };
    for (i, c) in f.changes.iter().enumerate() {
        c.check().map_err(|why| bad(format!("change {i}: {why}")))?;
    }
    Ok(f)
}

/// `fraglab host restore` of one state file on `m`: refuses while the process that wrote it
/// is alive, undoes every change last first, removes the file. Returns what was put back
/// ([`Change::describe`]). A failure keeps the file with the changes not undone.
pub fn restore_state_file(path: &Path, m: &Machine) -> Result<Vec<(String, String)>, HostError> {
    let f = read_state_file(path)?;
    if f.pid != std::process::id() && m.backend.start_time(f.pid as i32).is_some() {
        return Err(HostError::Busy(format!(
            "{}: the process (pid {}) that wrote it is still alive",
            path.display(),
            f.pid
        )));
    }
    let done = f.changes.iter().rev().map(Change::describe).collect();
    let mut j = Journal::new(m.clone(), path.to_path_buf());
    j.changes = f.changes;
    j.undo_all()?;
    Ok(done)
}

/// State files left by processes that did not undo their changes (killed with SIGKILL), and
/// temporary files a kill left half-written (`*.restore.tmp`), in `dir`.
pub fn leftovers_in(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut files = Vec::new();
    let mut tmps = Vec::new();
    for p in std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
    {
        let Some(n) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !n.starts_with("fraglab-host-") {
            continue;
        }
        if n.ends_with(".restore") {
            files.push(p);
        } else if n.ends_with(".restore.tmp") {
            tmps.push(p);
        }
    }
    files.sort();
    tmps.sort();
    (files, tmps)
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
