//! `[host] loop_images = true`: the run's task files on loop-mounted filesystem images it makes
//! (issue 19 item 1's first scenario), so that a file's page cache is that of the filesystem its
//! mapping kind names:
//!
//! - `xfs` → XFS (large folios, `xfs_setup_inode` clears __GFP_FS);
//! - `large_folios` → ext4 (6.18 enables large folios for regular files,
//!   `ext4_set_inode_mapping_order`);
//! - `no_large_folios` → ext4 mounted `data=journal`: 6.18's ext4 gives data-journalled inodes no
//!   folio order above the block size's (order 0 with 4 KiB blocks), checked live by a census.
//!
//! Each image is a sparse file in the run's directory sized from the files that go on it plus
//! headroom ([`image_size`]), made with `mkfs.ext4 -E nodiscard` / `mkfs.xfs -K` (no discard),
//! attached with `losetup --find --show` and mounted without `discard`. The image and its mount
//! point are recorded in the state file before they are created ([`crate::knobs::Cleanup`]), so
//! that `fraglab host restore` after a SIGKILL unmounts them, detaches every loop device backing
//! the image (`losetup -j`) and removes them; [`LoopImages`]' drop does the same on every other
//! way out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use fraglab_spec::{MappingKind, WorkloadSpec};

use crate::HostError;

/// A filesystem of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fs {
    Xfs,
    Ext4,
    /// ext4 mounted `data=journal`: no large folios.
    Ext4Journal,
}

impl Fs {
    pub fn for_mapping(m: MappingKind) -> Fs {
        match m {
            MappingKind::Xfs => Fs::Xfs,
            MappingKind::LargeFolios => Fs::Ext4,
            MappingKind::NoLargeFolios => Fs::Ext4Journal,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Fs::Xfs => "xfs",
            Fs::Ext4 => "ext4",
            Fs::Ext4Journal => "ext4-journal",
        }
    }

    fn mkfs(self) -> &'static str {
        match self {
            Fs::Xfs => "mkfs.xfs",
            Fs::Ext4 | Fs::Ext4Journal => "mkfs.ext4",
        }
    }

    fn mkfs_args(self) -> &'static [&'static str] {
        match self {
            Fs::Xfs => &["-q", "-f", "-K"],
            Fs::Ext4 | Fs::Ext4Journal => &["-q", "-F", "-E", "nodiscard"],
        }
    }

    fn fstype(self) -> &'static str {
        match self {
            Fs::Xfs => "xfs",
            Fs::Ext4 | Fs::Ext4Journal => "ext4",
        }
    }

    /// Mount options (never `discard`).
    pub fn options(self) -> &'static str {
        match self {
            Fs::Xfs | Fs::Ext4 => "nodiscard",
            Fs::Ext4Journal => "nodiscard,data=journal",
        }
    }
}

/// The filesystem of each file of the run.
pub fn file_filesystems(w: &WorkloadSpec) -> BTreeMap<String, Fs> {
    w.task_files()
        .into_iter()
        .map(|(f, m)| (f, Fs::for_mapping(m)))
        .collect()
}

/// The size of an image for `bytes` of files: 15 % more, plus 256 MiB for the journal/log and
/// metadata, at least 512 MiB (mkfs.xfs wants 300 MiB), in whole MiB.
pub fn image_size(bytes: u64) -> u64 {
    let s = (bytes + bytes / 100 * 15 + (256 << 20)).max(512 << 20);
    s.div_ceil(1 << 20) << 20
}

/// The images a run needs: bytes of each filesystem, from the files' sizes
/// (`file_bytes`: spec file name → bytes, the preflight footprint's read and write files).
pub fn images_needed(fs_of: &BTreeMap<String, Fs>, file_bytes: &BTreeMap<String, u64>) -> BTreeMap<Fs, u64> {
    let mut need: BTreeMap<Fs, u64> = BTreeMap::new();
    for (f, fs) in fs_of {
        *need.entry(*fs).or_default() += file_bytes.get(f).copied().unwrap_or(0);
    }
    need.into_iter().map(|(fs, b)| (fs, image_size(b))).collect()
}

/// Refuses when a tool is missing or the disk under `parent` lacks room for the images.
pub fn check(parent: &Path, need: &BTreeMap<Fs, u64>) -> Result<(), String> {
    for tool in need
        .keys()
        .map(|fs| fs.mkfs())
        .chain(["losetup", "mount", "umount"])
    {
        if which(tool).is_none() {
            return Err(format!(
                "[host] loop_images needs {tool}, which is not installed (not in PATH or /usr/sbin, /sbin)"
            ));
        }
    }
    let total: u64 = need.values().sum();
    let avail = disk_available(parent).map_err(|e| format!("statvfs {}: {e}", parent.display()))?;
    // The images are sparse but fill as the files are written: keep 1 GiB besides.
    if total + (1 << 30) > avail {
        return Err(format!(
            "[host] loop_images: the images need {} MiB and 1 GiB is kept free, but {} has {} MiB available",
            total >> 20,
            parent.display(),
            avail >> 20
        ));
    }
    Ok(())
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"])
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file());
    found
}

fn disk_available(p: &Path) -> std::io::Result<u64> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: statvfs fills the struct for a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail * st.f_frsize)
}

/// One image of the run.
#[derive(Clone, Debug)]
pub struct Image {
    pub fs: Fs,
    pub image: PathBuf,
    pub mnt: PathBuf,
    pub size: u64,
    /// The loop device once attached.
    pub dev: Option<PathBuf>,
    pub mounted: bool,
}

impl Image {
    /// `/sys/block/loopN/queue/read_ahead_kb` of its device.
    pub fn read_ahead_kb(&self) -> Option<u64> {
        let name = self.dev.as_ref()?.file_name()?.to_str()?.to_string();
        std::fs::read_to_string(format!("/sys/block/{name}/queue/read_ahead_kb"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// The run's images; unmounted, detached and deleted on drop.
#[derive(Default)]
pub struct LoopImages {
    pub images: Vec<Image>,
}

fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The (image, mount point) of filesystem `fs` in the run's directory `dir`.
pub fn paths(dir: &Path, fs: Fs) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("img-{}.img", fs.name())),
        dir.join(format!("mnt-{}", fs.name())),
    )
}

impl LoopImages {
    /// Makes, attaches and mounts one image per entry of `need` in `dir`; `record` is called
    /// with every (image, mount point) before anything is created (the state file).
    pub fn create(
        dir: &Path,
        need: &BTreeMap<Fs, u64>,
        record: impl FnOnce(Vec<(PathBuf, PathBuf)>) -> Result<(), HostError>,
    ) -> Result<LoopImages, HostError> {
        record(need.keys().map(|fs| paths(dir, *fs)).collect())?;
        let mut me = LoopImages::default();
        for (&fs, &size) in need {
            let (image, mnt) = paths(dir, fs);
            me.images.push(Image {
                fs,
                image: image.clone(),
                mnt: mnt.clone(),
                size,
                dev: None,
                mounted: false,
            });
            let err = |why: String| HostError::LoopImage(format!("{} image: {why}", fs.name()));
            let f = std::fs::File::create(&image).map_err(|e| err(format!("{}: {e}", image.display())))?;
            f.set_len(size)
                .map_err(|e| err(format!("{}: {e}", image.display())))?;
            drop(f);
            let img = image.to_string_lossy().into_owned();
            let mut args: Vec<&str> = fs.mkfs_args().to_vec();
            args.push(&img);
            run(fs.mkfs(), &args).map_err(err)?;
            std::fs::create_dir(&mnt).map_err(|e| err(format!("{}: {e}", mnt.display())))?;
            let dev = run("losetup", &["--find", "--show", &img]).map_err(err)?;
            let dev = PathBuf::from(dev.trim());
            me.images.last_mut().expect("pushed").dev = Some(dev.clone());
            run(
                "mount",
                &[
                    "-t",
                    fs.fstype(),
                    "-o",
                    fs.options(),
                    &dev.to_string_lossy(),
                    &mnt.to_string_lossy(),
                ],
            )
            .map_err(err)?;
            me.images.last_mut().expect("pushed").mounted = true;
        }
        Ok(me)
    }

    /// The mount point of `fs`.
    pub fn mount_of(&self, fs: Fs) -> Option<&Path> {
        self.images.iter().find(|i| i.fs == fs).map(|i| i.mnt.as_path())
    }

    /// `host` facts of the images (proc_start["host"] lines).
    pub fn facts(&self) -> String {
        let mut s = String::new();
        for i in &self.images {
            s.push_str(&format!(
                "loop_image {} dev {} size_bytes {} mount_options {} read_ahead_kb {}\n",
                i.fs.name(),
                i.dev.as_ref().map_or("-".into(), |d| d.display().to_string()),
                i.size,
                i.fs.options(),
                i.read_ahead_kb().map_or("-".into(), |k| k.to_string())
            ));
        }
        s
    }

    /// Unmounts, detaches and deletes every image; returns what failed.
    pub fn teardown(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        for i in std::mem::take(&mut self.images).into_iter().rev() {
            failed.extend(teardown_one(&i.image, &i.mnt));
        }
        failed
    }
}

impl Drop for LoopImages {
    fn drop(&mut self) {
        for e in self.teardown() {
            eprintln!("fraglab-host: loop image cleanup: {e}");
        }
    }
}

/// Whether `mnt` is a mount point now (/proc/self/mountinfo's fifth field).
fn is_mounted(mnt: &Path) -> bool {
    let m = mnt.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|t| t.lines().any(|l| l.split(' ').nth(4).is_some_and(|p| p == m)))
}

/// Unmounts `mnt`, detaches every loop device backing `image`, deletes both (only the run's
/// own `img-*.img` and `mnt-*` under a `fraglab-host-*` directory). Also used by `fraglab host
/// restore` from the state file.
pub fn teardown_one(image: &Path, mnt: &Path) -> Vec<String> {
    let ours = |p: &Path, pre: &str| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(pre))
            && p.parent()
                .and_then(|d| d.file_name())
                .is_some_and(|n| n.to_string_lossy().starts_with("fraglab-host-"))
    };
    let mut failed = Vec::new();
    if !ours(image, "img-") || !ours(mnt, "mnt-") {
        failed.push(format!(
            "{} / {}: not a loop image of a run",
            image.display(),
            mnt.display()
        ));
        return failed;
    }
    if is_mounted(mnt) {
        if let Err(e) = run("umount", &[&mnt.to_string_lossy()]) {
            failed.push(e);
            return failed;
        }
    }
    if image.exists() {
        match run("losetup", &["-j", &image.to_string_lossy()]) {
            Ok(out) => {
                for dev in out.lines().filter_map(|l| l.split(':').next()) {
                    if let Err(e) = run("losetup", &["-d", dev]) {
                        failed.push(e);
                    }
                }
            }
            Err(e) => failed.push(e),
        }
    }
    if mnt.is_dir() {
        let _ = std::fs::remove_dir(mnt);
    }
    if failed.is_empty() && image.exists() {
        if let Err(e) = std::fs::remove_file(image) {
            failed.push(format!("{}: {e}", image.display()));
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sizes_have_headroom() {
        assert_eq!(image_size(0), 512 << 20);
        assert_eq!(
            image_size(1 << 30),
            (1 << 30) + (153 << 20) + (256 << 20) + (1 << 20)
        );
        assert!(image_size(10 << 30) > (10u64 << 30) * 115 / 100);
    }

    #[test]
    fn mapping_kinds_pick_filesystems() {
        assert_eq!(Fs::for_mapping(MappingKind::Xfs), Fs::Xfs);
        assert_eq!(Fs::for_mapping(MappingKind::LargeFolios), Fs::Ext4);
        assert_eq!(Fs::for_mapping(MappingKind::NoLargeFolios), Fs::Ext4Journal);
        for fs in [Fs::Xfs, Fs::Ext4, Fs::Ext4Journal] {
            assert!(!fs.options().split(',').any(|o| o == "discard"));
        }
    }

    /// Teardown refuses paths that are not a run's images.
    #[test]
    fn teardown_only_touches_run_images() {
        let f = teardown_one(Path::new("/etc/passwd"), Path::new("/mnt"));
        assert_eq!(f.len(), 1);
        assert!(f[0].contains("not a loop image"));
    }
}
