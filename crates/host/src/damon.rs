//! `[host] damon = "off"`: DAMON switched off for a run through its sysfs interface
//! (`/sys/kernel/mm/damon/admin/kdamonds/N/state`, Documentation/admin-guide/mm/damon/usage.rst)
//! and switched back on at its end. kernel-model.md §27.3 says why: on these VMs a sysfs-made
//! kdamond pages out cold unmapped page cache behind the kernel's own reclaim.
//!
//! Writing `off` stops the kdamond thread; writing `on` starts a new one from the parameters
//! still in the sysfs tree (checked on this machine: the tree reads the same before, while off
//! and after, and a new kdamond pid appears). The monitoring state is not kept: regions and their
//! ages start afresh, so an aged scheme (age ≥ 60 s on S2) acts again only that long after the
//! restore. The state files turned off are recorded in the run's state file before the first is
//! written ([`crate::Cleanup::damon_on`]), so `fraglab host restore` turns them back on after a
//! SIGKILL.

use std::path::{Path, PathBuf};

/// The directory of the kdamonds.
pub const KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";

/// Whether `p` is a kdamond's `state` file (`KDAMONDS/<N>/state`): the only paths a state file
/// may ask to write.
pub fn is_state_file(p: &Path) -> bool {
    p.file_name().is_some_and(|n| n == "state")
        && p.parent().is_some_and(|d| {
            d.parent() == Some(Path::new(KDAMONDS))
                && d.file_name()
                    .is_some_and(|n| !n.is_empty() && n.to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        })
}

fn read_state(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// The `state` files of the kdamonds that are on, in index order.
pub fn running() -> Vec<PathBuf> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(KDAMONDS)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| {
                    Some((
                        e.file_name().to_string_lossy().parse().ok()?,
                        e.path().join("state"),
                    ))
                })
                .filter(|(_, p)| read_state(p).as_deref() == Some("on"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// Writes `word` (`on`/`off`) to a kdamond's state file and checks it reads back.
pub fn set_state(p: &Path, word: &str) -> Result<(), String> {
    if !is_state_file(p) {
        return Err(format!("{} is not a kdamond state file", p.display()));
    }
    if read_state(p).as_deref() == Some(word) {
        return Ok(());
    }
    std::fs::write(p, word).map_err(|e| format!("{}: {e}", p.display()))?;
    match read_state(p) {
        Some(s) if s == word => Ok(()),
        s => Err(format!("{} reads back {s:?} after writing {word}", p.display())),
    }
}

/// Turns the kdamonds of `states` back on; returns the failures.
pub fn turn_on(states: &[PathBuf]) -> Vec<String> {
    states.iter().filter_map(|p| set_state(p, "on").err()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kdamond_state_files() {
        assert!(is_state_file(Path::new(
            "/sys/kernel/mm/damon/admin/kdamonds/0/state"
        )));
        assert!(is_state_file(Path::new(
            "/sys/kernel/mm/damon/admin/kdamonds/12/state"
        )));
        for bad in [
            "/sys/kernel/mm/damon/admin/kdamonds/x/state",
            "/sys/kernel/mm/damon/admin/kdamonds/0/pid",
            "/sys/kernel/mm/damon/admin/kdamonds/0/contexts/0/state",
            "/proc/sys/vm/state",
            "/tmp/0/state",
        ] {
            assert!(!is_state_file(Path::new(bad)), "{bad}");
        }
        assert!(set_state(Path::new("/tmp/0/state"), "on").is_err());
    }
}
