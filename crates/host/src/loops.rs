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
//! attached with `losetup --find --show` and mounted without `discard`. Each image is a
//! `loop_image` change of the run's journal ([`crate::journal`]), recorded in the state file
//! before it is created: on every way out (and by `fraglab host restore` after a SIGKILL) it is
//! unmounted, every loop device backing the image detached (`losetup -j`) and both removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fraglab_spec::{MappingKind, WorkloadSpec};

use crate::HostError;

/// A filesystem of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
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

    pub(crate) fn mkfs(self) -> &'static str {
        match self {
            Fs::Xfs => "mkfs.xfs",
            Fs::Ext4 | Fs::Ext4Journal => "mkfs.ext4",
        }
    }

    pub(crate) fn mkfs_args(self) -> &'static [&'static str] {
        match self {
            Fs::Xfs => &["-q", "-f", "-K"],
            Fs::Ext4 | Fs::Ext4Journal => &["-q", "-F", "-E", "nodiscard"],
        }
    }

    pub(crate) fn fstype(self) -> &'static str {
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

/// The run's images (undone by the run's journal).
#[derive(Default)]
pub struct LoopImages {
    pub images: Vec<Image>,
}

/// The (image, mount point) of filesystem `fs` in the run's directory `dir`.
pub fn paths(dir: &Path, fs: Fs) -> (PathBuf, PathBuf) {
    (
        dir.join(format!("img-{}.img", fs.name())),
        dir.join(format!("mnt-{}", fs.name())),
    )
}

impl LoopImages {
    /// Makes, attaches and mounts one image per entry of `need` in `dir`, each a `loop_image`
    /// change of `journal` (recorded before anything of it is created).
    pub fn create(
        journal: &mut crate::journal::Journal,
        dir: &Path,
        need: &BTreeMap<Fs, u64>,
    ) -> Result<LoopImages, HostError> {
        let mut me = LoopImages::default();
        for (&fs, &size) in need {
            let (image, mnt) = paths(dir, fs);
            let dev = journal.apply(crate::journal::Change::LoopImage {
                fs,
                image: image.clone(),
                mnt: mnt.clone(),
                size,
            })?;
            me.images.push(Image {
                fs,
                image,
                mnt,
                size,
                dev,
                mounted: true,
            });
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
}
