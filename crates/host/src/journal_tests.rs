//! The journal on a fake machine: a temporary directory standing in for /proc/sys, /sys,
//! tracefs and /run, and a fake backend that keeps mounts, tracefs instances, loop devices and
//! processes in memory and formats sysfs files as the kernel does (choice files keep their
//! brackets, numbers end in a newline, memory blocks' state changes recompute
//! `user_reserve_kbytes` and `admin_reserve_kbytes`). Every test compares the whole fake
//! machine (every file and directory under the root, with its contents, and the backend's
//! state) before and after.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::*;
use crate::loops::Fs;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct FakeState {
    mounts: BTreeSet<PathBuf>,
    instances: BTreeSet<PathBuf>,
    /// Loop device (`/dev/loopN`) → image.
    loops: BTreeMap<PathBuf, PathBuf>,
    /// pid → start time.
    procs: BTreeMap<i32, u64>,
}

struct FakeBackend {
    root: PathBuf,
    st: Mutex<FakeState>,
}

fn einval(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

impl FakeBackend {
    /// The kernel's side effect of a memory block changing state: the reserves recomputed
    /// from the memory online (here: from the number of offline blocks).
    fn recompute_reserves(&self) {
        let dir = self.root.join("sys/devices/system/memory");
        let offline = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| std::fs::read_to_string(e.path().join("state")).is_ok_and(|s| s.trim() == "offline"))
            .count() as u64;
        let vm = self.root.join("proc/sys/vm");
        let _ = std::fs::write(
            vm.join("user_reserve_kbytes"),
            format!("{}\n", 131072 - 1024 * offline),
        );
        let _ = std::fs::write(
            vm.join("admin_reserve_kbytes"),
            format!("{}\n", 8192 - 64 * offline),
        );
    }
}

impl Backend for FakeBackend {
    fn write(&self, path: &Path, value: &str) -> io::Result<()> {
        let old = std::fs::read_to_string(path)?;
        let v = value.trim();
        let is_block = path.starts_with(self.root.join("sys/devices/system/memory"));
        let new = if is_block && path.ends_with("state") {
            match v {
                "online" | "online_kernel" | "online_movable" => "online\n".to_string(),
                "offline" => "offline\n".to_string(),
                _ => return Err(einval(format!("{v:?} to a block's state"))),
            }
        } else if old.contains('[') {
            let words: Vec<&str> = old
                .split_whitespace()
                .map(|w| w.trim_start_matches('[').trim_end_matches(']'))
                .collect();
            if !words.contains(&v) {
                return Err(einval(format!("{v:?} is not one of {words:?}")));
            }
            let shown: Vec<String> = words
                .iter()
                .map(|w| if *w == v { format!("[{w}]") } else { w.to_string() })
                .collect();
            shown.join(" ") + "\n"
        } else {
            let sep = if old.contains('\t') { "\t" } else { " " };
            v.split_whitespace().collect::<Vec<_>>().join(sep) + "\n"
        };
        std::fs::write(path, new)?;
        if is_block {
            self.recompute_reserves();
        }
        Ok(())
    }

    fn mount_tracefs(&self, dir: &Path) -> io::Result<()> {
        if !dir.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no mount point"));
        }
        self.st.lock().unwrap().mounts.insert(dir.to_path_buf());
        std::fs::create_dir(dir.join("instances"))
    }

    fn umount(&self, dir: &Path) -> io::Result<()> {
        if !self.st.lock().unwrap().mounts.remove(dir) {
            return Err(einval(format!("{} is not mounted", dir.display())));
        }
        // What was mounted there is no longer seen.
        for e in std::fs::read_dir(dir)?.flatten() {
            if e.path().is_dir() {
                std::fs::remove_dir_all(e.path())?;
            } else {
                std::fs::remove_file(e.path())?;
            }
        }
        Ok(())
    }

    fn is_mounted(&self, dir: &Path) -> bool {
        self.st.lock().unwrap().mounts.contains(dir)
    }

    fn make_instance(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir(dir)?;
        std::fs::create_dir(dir.join("events"))?;
        std::fs::write(dir.join("events/enable"), "0\n")?;
        std::fs::write(dir.join("tracing_on"), "1\n")?;
        std::fs::write(dir.join("buffer_size_kb"), "1408\n")?;
        std::fs::write(dir.join("trace_clock"), "[local] global mono\n")?;
        self.st.lock().unwrap().instances.insert(dir.to_path_buf());
        Ok(())
    }

    fn remove_instance(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(dir)?;
        self.st.lock().unwrap().instances.remove(dir);
        Ok(())
    }

    fn mkfs(&self, _fs: Fs, image: &Path) -> io::Result<()> {
        use std::os::unix::fs::FileExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .open(image)?
            .write_all_at(b"fake filesystem", 1024)
    }

    fn loop_attach(&self, image: &Path) -> io::Result<PathBuf> {
        let mut st = self.st.lock().unwrap();
        for n in 0..8 {
            let dev = PathBuf::from(format!("/dev/loop{n}"));
            let sys = self.root.join(format!("sys/block/loop{n}"));
            if sys.is_dir() && !st.loops.contains_key(&dev) {
                st.loops.insert(dev.clone(), image.to_path_buf());
                return Ok(dev);
            }
        }
        Err(io::Error::other("no free loop device"))
    }

    fn mount_fs(&self, dev: &Path, mnt: &Path, _fs: Fs) -> io::Result<()> {
        let mut st = self.st.lock().unwrap();
        if !st.loops.contains_key(dev) || !mnt.is_dir() {
            return Err(einval(format!("mount {} on {}", dev.display(), mnt.display())));
        }
        st.mounts.insert(mnt.to_path_buf());
        Ok(())
    }

    fn loop_detach(&self, image: &Path) -> io::Result<()> {
        self.st.lock().unwrap().loops.retain(|_, i| i != image);
        Ok(())
    }

    fn start_time(&self, pid: i32) -> Option<u64> {
        self.st.lock().unwrap().procs.get(&pid).copied()
    }

    fn signal(&self, pid: i32, _sig: i32) -> io::Result<()> {
        match self.st.lock().unwrap().procs.remove(&pid) {
            Some(_) => Ok(()),
            None => Err(io::Error::from_raw_os_error(libc::ESRCH)),
        }
    }
}

/// A fake machine in a temporary directory (removed on drop).
struct Fake {
    root: PathBuf,
    backend: Arc<FakeBackend>,
    machine: Machine,
}

/// Everything a test can see of the fake machine: every path under the root (a directory as
/// None, a file as its bytes) and the backend's state.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    files: BTreeMap<PathBuf, Option<Vec<u8>>>,
    backend: FakeState,
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().to_path_buf();
        if p.is_dir() {
            out.insert(rel, None);
            walk(root, &p, out);
        } else {
            out.insert(rel, Some(std::fs::read(&p).unwrap()));
        }
    }
}

const PID: u32 = 4_000_001;

impl Fake {
    fn new(tag: &str, tracefs_mounted: bool) -> Fake {
        let root = std::env::temp_dir().join(format!("fraglab-journal-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let files: &[(&str, &str)] = &[
            ("proc/sys/vm/swappiness", "60\n"),
            ("proc/sys/vm/lowmem_reserve_ratio", "256\t256\t32\t0\t0\n"),
            ("proc/sys/vm/nr_hugepages", "0\n"),
            ("proc/sys/vm/user_reserve_kbytes", "100000\n"),
            ("proc/sys/vm/admin_reserve_kbytes", "4000\n"),
            (
                "sys/kernel/mm/transparent_hugepage/enabled",
                "always [madvise] never\n",
            ),
            (
                "sys/kernel/mm/transparent_hugepage/defrag",
                "always defer defer+madvise [madvise] never\n",
            ),
            ("sys/devices/system/memory/memory8/state", "online\n"),
            ("sys/devices/system/memory/memory9/state", "online\n"),
            ("sys/devices/system/memory/memory10/state", "online\n"),
            ("sys/block/vda/queue/read_ahead_kb", "128\n"),
            ("sys/block/loop0/queue/read_ahead_kb", "128\n"),
            ("sys/block/loop1/queue/read_ahead_kb", "128\n"),
            ("sys/kernel/mm/damon/admin/kdamonds/0/state", "on\n"),
            ("sys/kernel/mm/damon/admin/kdamonds/1/state", "off\n"),
        ];
        for (p, v) in files {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, v).unwrap();
        }
        for d in ["run", "var/tmp"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        if tracefs_mounted {
            std::fs::create_dir_all(root.join("sys/kernel/tracing/instances")).unwrap();
            std::fs::write(
                root.join("proc/mounts"),
                "sysfs /sys sysfs rw 0 0\ntracefs /sys/kernel/tracing tracefs rw 0 0\n",
            )
            .unwrap();
        }
        let backend = Arc::new(FakeBackend {
            root: root.clone(),
            st: Mutex::default(),
        });
        let machine = Machine::new(root.clone(), backend.clone());
        Fake {
            root,
            backend,
            machine,
        }
    }

    fn state_file(&self) -> PathBuf {
        self.root.join(format!("run/fraglab-host-{PID}.restore"))
    }

    fn journal(&self) -> Journal {
        Journal::new(self.machine.clone(), self.state_file())
    }

    fn snapshot(&self) -> Snapshot {
        let mut files = BTreeMap::new();
        walk(&self.root, &self.root, &mut files);
        Snapshot {
            files,
            backend: self.backend.st.lock().unwrap().clone(),
        }
    }

    fn read(&self, p: &str) -> String {
        std::fs::read_to_string(self.root.join(p.trim_start_matches('/'))).unwrap()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

type Scenario = fn(&Fake, &mut Journal) -> Result<(), HostError>;

fn knobs(_: &Fake, j: &mut Journal) -> Result<(), HostError> {
    for (name, v) in [
        ("vm.swappiness", "10"),
        ("vm.lowmem_reserve_ratio", "128 128 16 0 0"),
        ("transparent_hugepage/enabled", "never"),
        ("transparent_hugepage/defrag", "defer+madvise"),
    ] {
        let c = Change::knob(j.machine(), name, v)?;
        j.apply(c)?;
    }
    Ok(())
}

fn read_ahead(_: &Fake, j: &mut Journal) -> Result<(), HostError> {
    let c = Change::read_ahead(j.machine(), "vda", 8192)?;
    j.apply(c).map(drop)
}

/// As `--fit-memory` by offlining: the reserves watched, then each block recorded and taken.
fn memory_blocks(_: &Fake, j: &mut Journal) -> Result<(), HostError> {
    for p in RECOMPUTED_BY_HOTPLUG {
        let c = Change::watch(j.machine(), p)?;
        j.record(c)?;
    }
    for index in [10, 9] {
        j.apply(Change::MemoryBlock { index })?;
    }
    Ok(())
}

fn hugetlb_pool(_: &Fake, j: &mut Journal) -> Result<(), HostError> {
    j.apply(Change::HugetlbPool { before: 0, after: 4 }).map(drop)
}

/// As `[host] damon = "off"`: the kdamonds that are on (0, not 1) turned off.
fn kdamond(fake: &Fake, j: &mut Journal) -> Result<(), HostError> {
    let off = crate::run::damon_off(j)?;
    assert_eq!(off, [0]);
    assert_eq!(fake.read("/sys/kernel/mm/damon/admin/kdamonds/1/state"), "off\n");
    Ok(())
}

/// As `host run --trace` (and `host record`) where no tracefs is mounted: a mount, then the
/// instance, written to as the session does.
fn trace(_: &Fake, j: &mut Journal) -> Result<(), HostError> {
    let inst = crate::trace::open_instance(j, "fraglab-host-tracefs-7", "fraglab-host-7")?;
    let real = j.machine().path(&inst);
    std::fs::write(real.join("buffer_size_kb"), "65536\n").unwrap();
    Ok(())
}

/// The run's directory and a file in it (the engine's files go there).
fn work_dir(_: &Fake, j: &mut Journal) -> Result<(), HostError> {
    let path = PathBuf::from("/var/tmp/fraglab-host-7-1");
    j.apply(Change::WorkDir { path: path.clone() })?;
    std::fs::write(j.machine().path(&path.join("file0")), "data").unwrap();
    Ok(())
}

/// As `[host] loop_images` with `machine.read_ahead_kb`: the run's directory, an image, the
/// loop device's read_ahead_kb.
fn loop_image(fake: &Fake, j: &mut Journal) -> Result<(), HostError> {
    work_dir(fake, j)?;
    let need = BTreeMap::from([(Fs::Xfs, 1 << 20)]);
    let images = crate::loops::LoopImages::create(j, Path::new("/var/tmp/fraglab-host-7-1"), &need)?;
    let dev = images.images[0].dev.clone().expect("a loop device");
    let name = dev.file_name().unwrap().to_str().unwrap().to_string();
    let c = Change::read_ahead(j.machine(), &name, 8192)?;
    j.apply(c).map(drop)
}

/// A process the engine started (the fake "forks" it), recorded.
fn child(fake: &Fake, j: &mut Journal) -> Result<(), HostError> {
    fake.spawn(4242, 77);
    let c = Change::child(j.machine(), 4242, Duration::from_millis(1));
    j.record(c)
}

/// Everything a run does, in its order.
fn whole_run(fake: &Fake, j: &mut Journal) -> Result<(), HostError> {
    work_dir(fake, j)?;
    knobs(fake, j)?;
    kdamond(fake, j)?;
    memory_blocks(fake, j)?;
    hugetlb_pool(fake, j)?;
    read_ahead(fake, j)?;
    let (image, mnt) = crate::loops::paths(Path::new("/var/tmp/fraglab-host-7-1"), Fs::Ext4);
    j.apply(Change::LoopImage {
        fs: Fs::Ext4,
        image,
        mnt,
        size: 1 << 20,
    })?;
    trace(fake, j)?;
    child(fake, j)
}

impl Fake {
    fn run(&self, j: &mut Journal, s: Scenario) -> Result<(), HostError> {
        s(self, j)
    }

    /// A process "started" (it exists until signalled).
    fn spawn(&self, pid: i32, start: u64) {
        self.backend.st.lock().unwrap().procs.insert(pid, start);
    }
}

/// For every step of `s` in turn: a fault injected after it, then (a) the journal undone in
/// the process (its drop, as on an error) and (b) the process "killed" there and `host
/// restore` run on its state file. Either way the fake machine is exactly as found. Returns
/// the number of steps `s` takes.
fn every_step_restores(tag: &str, tracefs_mounted: bool, s: Scenario) -> u64 {
    let mut k = 1;
    loop {
        let mut finished = false;
        for killed in [false, true] {
            let fake = Fake::new(&format!("{tag}-{k}-{killed}"), tracefs_mounted);
            let before = fake.snapshot();
            fake.machine.fail_at_step(k);
            let mut j = fake.journal();
            let r = fake.run(&mut j, s);
            finished = r.is_ok();
            if let Err(e) = &r {
                assert!(e.to_string().contains("injected fault"), "{tag} step {k}: {e}");
            }
            if killed {
                j.abandon();
                // A kill before the first state file was renamed into place leaves nothing
                // applied and no state file.
                if fake.state_file().exists() {
                    restore_state_file(&fake.state_file(), &fake.machine)
                        .unwrap_or_else(|e| panic!("{tag} step {k}: restore: {e}"));
                }
            } else {
                drop(j);
            }
            assert_eq!(
                fake.snapshot(),
                before,
                "{tag}: fault after step {k}, killed {killed}"
            );
        }
        if finished {
            // No fault was hit: every step of the scenario has had its fault.
            return k - 1;
        }
        k += 1;
    }
}

/// One test per kind of change (and the whole run): a fault after every journal step, undone
/// in the process and by `host restore`, leaves the machine as found. The steps are counted:
/// a recorded change is two (the temporary state file written, then renamed: recorded), an
/// applied one three, a tracefs mount one more (its directory) and a loop image four more
/// (file, mkfs, mount point, loop device), so a step that disappears fails the count.
macro_rules! fault_at_every_step {
    ($($name:ident: $scenario:ident, tracefs_mounted $mounted:expr, steps $steps:expr;)*) => {$(
        #[test]
        fn $name() {
            let steps = every_step_restores(stringify!($name), $mounted, $scenario);
            assert_eq!(steps, $steps, "the journal steps of {}", stringify!($name));
        }
    )*};
}

fault_at_every_step! {
    fault_at_every_step_knob: knobs, tracefs_mounted false, steps 12;
    fault_at_every_step_read_ahead: read_ahead, tracefs_mounted false, steps 3;
    fault_at_every_step_memory_block_and_watch: memory_blocks, tracefs_mounted false, steps 10;
    fault_at_every_step_hugetlb_pool: hugetlb_pool, tracefs_mounted false, steps 3;
    fault_at_every_step_kdamond: kdamond, tracefs_mounted false, steps 3;
    fault_at_every_step_trace_mount_and_instance: trace, tracefs_mounted false, steps 7;
    fault_at_every_step_trace_instance: trace, tracefs_mounted true, steps 3;
    fault_at_every_step_loop_image: loop_image, tracefs_mounted false, steps 13;
    fault_at_every_step_child: child, tracefs_mounted false, steps 2;
    fault_at_every_step_work_dir: work_dir, tracefs_mounted false, steps 3;
    fault_at_every_step_whole_run: whole_run, tracefs_mounted false, steps 50;
}

/// What each scenario changes, checked once (so that "as found" is not trivially true).
#[test]
fn the_scenarios_change_the_machine() {
    let fake = Fake::new("changes", false);
    let before = fake.snapshot();
    let mut j = fake.journal();
    fake.run(&mut j, whole_run).unwrap();
    assert_eq!(fake.read("/proc/sys/vm/swappiness"), "10\n");
    assert_eq!(
        fake.read("/proc/sys/vm/lowmem_reserve_ratio"),
        "128\t128\t16\t0\t0\n"
    );
    assert_eq!(
        fake.read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "always madvise [never]\n"
    );
    assert_eq!(fake.read("/sys/devices/system/memory/memory9/state"), "offline\n");
    assert_eq!(fake.read("/proc/sys/vm/user_reserve_kbytes"), "129024\n");
    assert_eq!(fake.read("/proc/sys/vm/nr_hugepages"), "4\n");
    assert_eq!(fake.read("/sys/kernel/mm/damon/admin/kdamonds/0/state"), "off\n");
    assert_eq!(fake.read("/sys/block/vda/queue/read_ahead_kb"), "8192\n");
    {
        let st = fake.backend.st.lock().unwrap();
        assert_eq!(st.mounts.len(), 2, "tracefs and the image: {:?}", st.mounts);
        assert_eq!(st.instances.len(), 1);
        assert_eq!(st.loops.len(), 1);
        assert_eq!(st.procs.len(), 1);
    }
    let f = read_state_file(&fake.state_file()).unwrap();
    assert_eq!(f.format, FORMAT);
    assert_eq!(f.changes.len(), j.changes().len());
    assert_ne!(fake.snapshot(), before);
    j.undo_all().unwrap();
    assert_eq!(fake.snapshot(), before);
}

/// A panic while the changes are made: the journal's drop during unwinding undoes them.
#[test]
fn a_panic_undoes_everything() {
    let fake = Fake::new("panic", false);
    let before = fake.snapshot();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut j = fake.journal();
        fake.run(&mut j, whole_run).unwrap();
        panic!("in the middle of a run");
    }));
    assert!(r.is_err());
    assert_eq!(fake.snapshot(), before);
}

/// Finding: a loop device's read_ahead_kb stayed 8192 after runs with loop images. It is a
/// change of its own now, undone while the device is still attached.
#[test]
fn a_loop_devices_read_ahead_comes_back() {
    let fake = Fake::new("loop-ra", false);
    let mut j = fake.journal();
    fake.run(&mut j, loop_image).unwrap();
    assert_eq!(fake.read("/sys/block/loop0/queue/read_ahead_kb"), "8192\n");
    assert_eq!(fake.backend.st.lock().unwrap().loops.len(), 1);
    j.undo_all().unwrap();
    assert_eq!(fake.read("/sys/block/loop0/queue/read_ahead_kb"), "128\n");
    assert!(fake.backend.st.lock().unwrap().loops.is_empty());
    assert!(!fake.state_file().exists());
}

/// Finding: `vm.user_reserve_kbytes` (and admin_reserve_kbytes), which the kernel recomputes
/// when memory blocks come back online, was not restored.
#[test]
fn user_reserve_kbytes_is_restored_after_onlining() {
    let fake = Fake::new("reserve", false);
    let mut j = fake.journal();
    fake.run(&mut j, memory_blocks).unwrap();
    j.undo_all().unwrap();
    assert_eq!(fake.read("/sys/devices/system/memory/memory10/state"), "online\n");
    assert_eq!(fake.read("/proc/sys/vm/user_reserve_kbytes"), "100000\n");
    assert_eq!(fake.read("/proc/sys/vm/admin_reserve_kbytes"), "4000\n");
    // Without the watch the kernel's recomputed value would stay.
    let fake = Fake::new("reserve-unwatched", false);
    let mut j = fake.journal();
    j.apply(Change::MemoryBlock { index: 8 }).unwrap();
    j.undo_all().unwrap();
    assert_eq!(fake.read("/proc/sys/vm/user_reserve_kbytes"), "131072\n");
}

/// Finding: a SIGKILLed `host record` left its tracefs mount (and instance), and `host
/// restore` cleaned nothing. The recorder's journal (mount, instance, command) is undone
/// from its state file.
#[test]
fn a_killed_record_is_cleaned_by_restore() {
    let fake = Fake::new("record", false);
    let before = fake.snapshot();
    let mut j = fake.journal();
    let inst = crate::trace::open_instance(&mut j, "fraglab-record-tracefs-9", "fraglab-record-9").unwrap();
    assert_eq!(
        inst,
        Path::new("/run/fraglab-record-tracefs-9/instances/fraglab-record-9")
    );
    fake.spawn(555, 3);
    j.record(Change::child(&fake.machine, 555, Duration::from_millis(1)))
        .unwrap();
    j.abandon();
    assert!(!fake.backend.st.lock().unwrap().mounts.is_empty());
    let done = leftovers_in(&fake.root.join("run")).0;
    assert_eq!(done, vec![fake.state_file()]);
    let what = restore_state_file(&fake.state_file(), &fake.machine).unwrap();
    assert_eq!(what.len(), 3, "{what:?}");
    assert_eq!(fake.snapshot(), before);
}

/// Finding: a SIGKILLed `host run` left a `.restore.tmp`. A failed state file write removes
/// its temporary file; one left by a killed process is removed by `host restore`, one of a
/// live process is not.
#[test]
fn no_restore_tmp_is_left() {
    let fake = Fake::new("tmp", false);
    let before = fake.snapshot();
    // A fault between the temporary file and the rename.
    fake.machine.fail_at_step(1);
    let mut j = fake.journal();
    let e = knobs(&fake, &mut j).unwrap_err();
    assert!(e.to_string().contains("temporary written"), "{e}");
    drop(j);
    assert_eq!(fake.snapshot(), before);
    // A rename that fails (the state file's place is a directory).
    fake.machine.fail_at_step(0);
    std::fs::create_dir(fake.state_file()).unwrap();
    let mut j = fake.journal();
    assert!(knobs(&fake, &mut j).is_err());
    drop(j);
    std::fs::remove_dir(fake.state_file()).unwrap();
    assert_eq!(fake.snapshot(), before);
    // Left by a killed process (a pid that does not exist) and by this one.
    let dead = fake.root.join("run/fraglab-host-2147483646.restore.tmp");
    let live = fake
        .root
        .join(format!("run/fraglab-host-{}.restore.tmp", std::process::id()));
    std::fs::write(&dead, "{").unwrap();
    std::fs::write(&live, "{").unwrap();
    assert_eq!(
        crate::knobs::remove_stale_tmp_files(&fake.root.join("run")),
        vec![dead.clone()]
    );
    assert!(!dead.exists());
    assert!(live.exists());
}

/// A state file of the format before the journal is read and undone in its order; an unknown
/// format, and a change the engine never makes, are refused with the file's name.
#[test]
fn old_state_files_are_read_and_bad_ones_refused() {
    let fake = Fake::new("old", false);
    let before = fake.snapshot();
    let m = &fake.machine;
    m.write(Path::new("/proc/sys/vm/swappiness"), "5").unwrap();
    m.write(Path::new("/sys/devices/system/memory/memory8/state"), "offline")
        .unwrap();
    m.write(Path::new("/sys/block/vda/queue/read_ahead_kb"), "4096")
        .unwrap();
    m.write(Path::new("/proc/sys/vm/nr_hugepages"), "3").unwrap();
    m.write(Path::new("/sys/kernel/mm/damon/admin/kdamonds/0/state"), "off")
        .unwrap();
    let wd = fake.root.join("var/tmp/fraglab-host-1-2");
    std::fs::create_dir(&wd).unwrap();
    std::fs::write(wd.join("f"), "x").unwrap();
    let old = serde_json::json!({
        "pid": std::process::id(),
        "knobs": [{"name": "vm.swappiness", "path": "/proc/sys/vm/swappiness", "value": "60"}],
        "cleanup": {
            "workdir": "/var/tmp/fraglab-host-1-2",
            "trace_instance": null,
            "trace_mount": null,
            "hugetlb_pages": 0,
            "damon_on": ["/sys/kernel/mm/damon/admin/kdamonds/0/state"],
            "offline_blocks": [8],
            "read_ahead_kb": [["/sys/block/vda/queue/read_ahead_kb", 128]]
        }
    });
    std::fs::write(fake.state_file(), old.to_string()).unwrap();
    let done = restore_state_file(&fake.state_file(), m).unwrap();
    assert_eq!(done.len(), 6, "{done:?}");
    // The kernel recomputed the reserves when memory8 went and came back (the old format had
    // no watch of them): put them back by hand before comparing.
    std::fs::write(fake.root.join("proc/sys/vm/user_reserve_kbytes"), "100000\n").unwrap();
    std::fs::write(fake.root.join("proc/sys/vm/admin_reserve_kbytes"), "4000\n").unwrap();
    assert_eq!(fake.snapshot(), before);

    let bad = fake.state_file();
    std::fs::write(
        &bad,
        r#"{"format": "fraglab-journal-9", "pid": 1, "changes": []}"#,
    )
    .unwrap();
    let e = restore_state_file(&bad, m).unwrap_err().to_string();
    assert!(
        e.contains("fraglab-journal-9") && e.contains(&bad.display().to_string()),
        "{e}"
    );
    let evil = JournalFile {
        format: FORMAT.into(),
        pid: 1,
        changes: vec![Change::Knob {
            name: "vm.swappiness".into(),
            path: "/etc/passwd".into(),
            before: "60".into(),
            after: "60".into(),
        }],
    };
    std::fs::write(&bad, serde_json::to_string(&evil).unwrap()).unwrap();
    let e = restore_state_file(&bad, m).unwrap_err().to_string();
    assert!(e.contains("change 0") && e.contains("/etc/passwd"), "{e}");
    std::fs::write(&bad, "{\"pid\": 1}").unwrap();
    let e = restore_state_file(&bad, m).unwrap_err().to_string();
    assert!(e.contains("neither a change journal"), "{e}");
    for p in [
        "/run/x-tracefs-1",
        "/tmp/fraglab-host-tracefs-1",
        "/run/fraglab-host-1",
    ] {
        assert!(Change::TraceMount { path: p.into() }.check().is_err(), "{p}");
    }
    assert!(Change::TraceMount {
        path: "/run/fraglab-record-tracefs-1".into()
    }
    .check()
    .is_ok());
    assert!(Change::WorkDir { path: "/".into() }.check().is_err());
    for p in [
        "/sys/kernel/tracing/instances/other",
        "/etc/instances/fraglab-host-1",
        "/run/other/instances/fraglab-host-1",
    ] {
        assert!(Change::TraceInstance { path: p.into() }.check().is_err(), "{p}");
    }
    for p in [
        "/sys/kernel/tracing/instances/fraglab-host-1",
        "/sys/kernel/debug/tracing/instances/fraglab-damon-1",
        "/run/fraglab-record-tracefs-9/instances/fraglab-record-9",
    ] {
        assert!(Change::TraceInstance { path: p.into() }.check().is_ok(), "{p}");
    }
}

/// A change whose undo fails stays in the state file (for `host restore`), the others are
/// undone; the error names it.
#[test]
fn a_failed_undo_keeps_its_change() {
    let fake = Fake::new("fail", false);
    let mut j = fake.journal();
    fake.run(&mut j, knobs).unwrap();
    read_ahead(&fake, &mut j).unwrap();
    // The device went away: its read_ahead_kb cannot be written back.
    std::fs::remove_dir_all(fake.root.join("sys/block/vda")).unwrap();
    let e = j.undo_all().unwrap_err().to_string();
    assert!(e.contains("read_ahead_kb"), "{e}");
    assert_eq!(fake.read("/proc/sys/vm/swappiness"), "60\n");
    let left = read_state_file(&fake.state_file()).unwrap();
    assert_eq!(left.changes.len(), 1);
    assert!(matches!(left.changes[0], Change::ReadAhead { .. }));
}

/// The live backend's process operations on a process of this test's own: its start time is
/// read while it runs, the `child` change's undo ends it (SIGTERM within the grace), a
/// process with the same pid but another start time is left alone.
#[test]
fn a_child_is_ended_only_while_it_is_the_process_started() {
    let m = Machine::new(PathBuf::from("/"), Arc::new(LiveBackend));
    let mut p = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let pid = p.id() as i32;
    let c = Change::child(&m, pid, Duration::from_secs(5));
    let Change::Child { start_time, .. } = c else {
        unreachable!()
    };
    assert!(start_time > 0);
    // Another start time: not the process started, left running.
    let other = Change::Child {
        pid,
        start_time: start_time + 1,
        grace_ms: 0,
    };
    other.undo(&m).unwrap();
    assert!(
        p.try_wait().unwrap().is_none(),
        "a process not ours was signalled"
    );
    c.undo(&m).unwrap();
    let st = p.wait().unwrap();
    use std::os::unix::process::ExitStatusExt as _;
    assert_eq!(st.signal(), Some(libc::SIGTERM), "{st:?}");
    assert_eq!(m.backend.start_time(pid), None);
}
