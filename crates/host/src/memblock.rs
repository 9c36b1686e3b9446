//! `--fit-memory` by memory hot-unplug: the machine is shrunk to the spec's `machine.memory` by
//! taking memory blocks of zone Normal offline for the run (Documentation/admin-guide/mm/
//! memory-hotplug.rst; /sys/devices/system/memory/memoryN/state). Unlike the hugetlb pool
//! ([`crate::hugetlb`], the fallback), an offline block leaves the zone: `present` and `managed`
//! shrink, and `spanned` too when the block is at the zone's end, so the watermarks, the
//! compaction scanners and MemTotal are those of the smaller machine, and what is left starts
//! as unfragmented as it was.
//!
//! The plan ([`plan`]): the blocks that are online, `removable` and in zone Normal
//! (`valid_zones` of an online block names its zone), from the highest `phys_index` down. The
//! number taken is `(MemTotal - target) / block_size_bytes`, rounded down: MemTotal during the
//! run is the target plus less than one block (128 MiB on this VM), as the hugetlb pool leaves
//! it at most one pool page above.
//!
//! Offlining ([`offline`]) migrates what the block holds (the kernel's `offline_pages`), which
//! can fail (EBUSY at once when the block holds an unmovable page: slab, page tables; most of
//! Normal's blocks on a VM that has run for a while) or take long; each write is bounded
//! ([`Limits::per_block`]: the write runs in a forked child that is killed, which interrupts
//! the kernel's migration loop, when it takes longer), the next lower candidate is tried when
//! one refuses, and the whole is bounded in attempts and time: a target that cannot be reached
//! onlines what was taken and fails. Every block is recorded (the `record` callback: the run's
//! `memory_block` change of the run's journal, [`crate::journal`]) before `offline` is written
//! to it, and the journal onlines it again on every way out (and `fraglab host restore` after
//! a SIGKILL); [`Offlined::release`] onlines the blocks taken when the target cannot be
//! reached.
//!
//! A run uses [`offline_best_effort`]: on this VM most blocks of Normal refuse, so instead of
//! failing when the candidates (or the limits) run out it keeps the blocks that went, and the
//! run holds the rest of the difference ([`Offlined::shortfall`]) as a hugetlb pool of 2 MiB
//! pages ([`crate::hugetlb::shortfall`]; result method `offline+hugetlb`).

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{procfs, HostError};

/// Where the kernel lists the memory blocks.
pub const MEMORY_SYSFS: &str = "/sys/devices/system/memory";

/// One memory block as sysfs shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// N of `memoryN`.
    pub index: u64,
    /// `state`: online, offline, going-offline.
    pub state: String,
    /// `removable` (1: the kernel may offline it; absent counts as removable).
    pub removable: bool,
    /// `valid_zones`: the zone of an online block ("none" when it spans two zones).
    pub valid_zones: String,
    /// `phys_index` (hexadecimal): the block's number in physical address order.
    pub phys_index: u64,
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// `block_size_bytes` and every `memoryN` under `root`, by index.
pub fn read_blocks(root: &Path) -> Result<(u64, Vec<Block>), String> {
    let size_file = root.join("block_size_bytes");
    let size = read_trim(&size_file).ok_or_else(|| format!("no {}", size_file.display()))?;
    let block_bytes = u64::from_str_radix(&size, 16)
        .map_err(|_| format!("{}: not a hexadecimal size: {size:?}", size_file.display()))?;
    let dir = std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut blocks = Vec::new();
    for e in dir.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(index) = name.strip_prefix("memory").and_then(|n| n.parse::<u64>().ok()) else {
            continue;
        };
        let d = e.path();
        let Some(state) = read_trim(&d.join("state")) else {
            continue;
        };
        blocks.push(Block {
            index,
            state,
            removable: read_trim(&d.join("removable")).is_none_or(|r| r == "1"),
            valid_zones: read_trim(&d.join("valid_zones")).unwrap_or_default(),
            phys_index: read_trim(&d.join("phys_index"))
                .and_then(|p| u64::from_str_radix(&p, 16).ok())
                .unwrap_or(index),
        });
    }
    blocks.sort_by_key(|b| b.index);
    Ok((block_bytes, blocks))
}

/// How many blocks to take, and which to try, for one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfflinePlan {
    /// The sysfs directory (`/sys/devices/system/memory`; a fake tree in tests).
    pub root: PathBuf,
    pub block_bytes: u64,
    /// Blocks to take offline.
    pub blocks: u64,
    /// The blocks that may be taken, in the order tried: online, removable, zone Normal, from
    /// the top of the zone down.
    pub candidates: Vec<u64>,
    /// MemTotal before the run.
    pub mem_total: u64,
    /// The spec's `machine.memory`.
    pub target: u64,
}

impl OfflinePlan {
    /// The memory taken out of the machine.
    pub fn bytes(&self) -> u64 {
        self.blocks * self.block_bytes
    }

    /// The plan line: `offline N blocks of 128 MiB (…)`.
    pub fn describe(&self) -> String {
        format!(
            "offline {} blocks of {} MiB ({:.2} GiB from the top of zone Normal, MemTotal {:.2} -> {:.2} GiB for machine.memory {:.2} GiB)",
            self.blocks,
            self.block_bytes >> 20,
            self.bytes() as f64 / (1u64 << 30) as f64,
            self.mem_total as f64 / (1u64 << 30) as f64,
            (self.mem_total - self.bytes()) as f64 / (1u64 << 30) as f64,
            self.target as f64 / (1u64 << 30) as f64
        )
    }
}

/// Whether offlining can fit this machine, and if not why (the hugetlb pool is then used).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Availability {
    Offline(OfflinePlan),
    Unavailable(String),
}

/// Plans the blocks to offline under `root` for a machine with `meminfo` (/proc/meminfo's text)
/// and the spec's `target` bytes. A target at or above MemTotal is an error; no sysfs tree, no
/// removable Normal block, too few of them, or a `state` file root cannot write is
/// [`Availability::Unavailable`].
pub fn plan(root: &Path, meminfo: &str, target: u64) -> Result<Availability, HostError> {
    let total = procfs::meminfo_bytes(meminfo, "MemTotal")
        .ok_or_else(|| HostError::Unsupported("--fit-memory: no MemTotal in /proc/meminfo".into()))?;
    if target >= total {
        return Err(HostError::Unsafe(format!(
            "--fit-memory: machine.memory ({} MiB) is not smaller than this machine's MemTotal \
             ({} MiB)",
            target >> 20,
            total >> 20
        )));
    }
    let (block_bytes, all) = match read_blocks(root) {
        Ok(b) => b,
        Err(why) => return Ok(Availability::Unavailable(why)),
    };
    if block_bytes == 0 {
        return Ok(Availability::Unavailable("block_size_bytes is 0".into()));
    }
    let mut cands: Vec<&Block> = all
        .iter()
        .filter(|b| b.state == "online" && b.removable && b.valid_zones == "Normal")
        .collect();
    cands.sort_by_key(|b| std::cmp::Reverse(b.phys_index));
    let blocks = (total - target) / block_bytes;
    if cands.is_empty() {
        return Ok(Availability::Unavailable(format!(
            "no online removable block in zone Normal under {}",
            root.display()
        )));
    }
    if (cands.len() as u64) < blocks {
        return Ok(Availability::Unavailable(format!(
            "{blocks} blocks needed, {} online removable blocks in zone Normal",
            cands.len()
        )));
    }
    let state = root.join(format!("memory{}", cands[0].index)).join("state");
    if !writable(&state) {
        return Ok(Availability::Unavailable(format!(
            "{} is not writable (offlining not permitted)",
            state.display()
        )));
    }
    Ok(Availability::Offline(OfflinePlan {
        root: root.to_path_buf(),
        block_bytes,
        blocks,
        candidates: cands.iter().map(|b| b.index).collect(),
        mem_total: total,
        target,
    }))
}

fn writable(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: access(2) on a valid path string.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// The bounds of [`offline`].
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// One write of `offline` (the kernel's migration of the block) at most this long.
    pub per_block: Duration,
    /// All the writes at most this long.
    pub total: Duration,
    /// Blocks tried at most (taken and refused).
    pub max_attempts: u64,
}

impl Limits {
    /// 10 s per block, 5 minutes in all, every candidate tried once. On this VM after a day
    /// of builds most blocks of Normal hold an unmovable page (slab, page tables) and refuse
    /// at once with EBUSY (one in six went offline), so every candidate is worth a try.
    pub fn for_plan(plan: &OfflinePlan) -> Limits {
        Limits {
            per_block: Duration::from_secs(10),
            total: Duration::from_secs(300),
            max_attempts: plan.candidates.len() as u64,
        }
    }
}

/// The `state` file of block `index` under `root`.
pub fn state_path(root: &Path, index: u64) -> PathBuf {
    root.join(format!("memory{index}")).join("state")
}

/// Writes `value` to `path` in a forked child that is SIGKILLed after `limit` (a signal ends
/// the kernel's offline loop with EINTR); the child's exit status carries the write's errno.
/// Timing out gives [`io::ErrorKind::TimedOut`].
pub fn write_bounded(path: &Path, value: &str, limit: Duration) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let v = value.as_bytes().to_vec();
    // SAFETY: the child only makes async-signal-safe calls (prctl, open, write, _exit) on
    // memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let fd = libc::open(c.as_ptr(), libc::O_WRONLY);
            if fd < 0 {
                libc::_exit(*libc::__errno_location());
            }
            let n = libc::write(fd, v.as_ptr().cast(), v.len());
            libc::_exit(if n < 0 { *libc::__errno_location() } else { 0 });
        }
    }
    let t = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waiting for the child forked above.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break;
        }
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if t.elapsed() > limit {
            // SAFETY: killing and reaping the child forked above, by its pid.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no answer in {:.0} s", limit.as_secs_f64()),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if libc::WIFEXITED(status) {
        match libc::WEXITSTATUS(status) {
            0 => Ok(()),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    } else {
        Err(io::Error::other(format!("the writer died (status {status})")))
    }
}

/// Whether the kernel refused this one block (try the next): EBUSY, EAGAIN, EINTR, a timeout.
fn refused(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::TimedOut
        || matches!(
            e.raw_os_error(),
            Some(libc::EBUSY) | Some(libc::EAGAIN) | Some(libc::EINTR)
        )
}

/// The blocks a run holds offline (onlined again by the run's journal, or [`Offlined::release`]).
#[derive(Debug)]
pub struct Offlined {
    root: PathBuf,
    /// Indices of the blocks taken, in the order taken.
    pub blocks: Vec<u64>,
    /// Blocks that refused (`memoryN: why`).
    pub refused: Vec<String>,
    pub block_bytes: u64,
    /// Best effort ([`offline_best_effort`]): blocks the plan asked for.
    pub asked: u64,
    /// Best effort: why fewer than asked were taken (None when all were).
    pub stopped: Option<String>,
    released: bool,
}

/// Takes `plan.blocks` blocks offline, trying the candidates in order; `record(index)` is
/// called before `offline` is written to a block (a failing record stops). `write` does the
/// writes ([`write_bounded`] on the live kernel). When the target cannot be reached (too many
/// refusals, the limits, or a write error other than a refusal) the blocks taken are onlined
/// again and the error says why.
pub fn offline(
    plan: &OfflinePlan,
    limits: Limits,
    write: &mut dyn FnMut(&Path, &str) -> io::Result<()>,
    record: &mut dyn FnMut(u64) -> Result<(), HostError>,
) -> Result<Offlined, HostError> {
    take(plan, limits, write, record, false)
}

/// [`offline`] as best effort, what `--fit-memory` uses: the candidates are tried in order
/// within the same `limits`, and when they run out (every other block refusing with EBUSY, as
/// on this VM after a day of builds) the blocks that did go are kept rather than onlined:
/// [`Offlined::shortfall`] is what is left to take out another way (the run holds it in a
/// hugetlb pool, [`crate::hugetlb`]). A write error other than a refusal, or a failing
/// `record`, still onlines what was taken and fails.
pub fn offline_best_effort(
    plan: &OfflinePlan,
    limits: Limits,
    write: &mut dyn FnMut(&Path, &str) -> io::Result<()>,
    record: &mut dyn FnMut(u64) -> Result<(), HostError>,
) -> Result<Offlined, HostError> {
    take(plan, limits, write, record, true)
}

fn take(
    plan: &OfflinePlan,
    limits: Limits,
    write: &mut dyn FnMut(&Path, &str) -> io::Result<()>,
    record: &mut dyn FnMut(u64) -> Result<(), HostError>,
    best_effort: bool,
) -> Result<Offlined, HostError> {
    let mut held = Offlined {
        root: plan.root.clone(),
        blocks: Vec::new(),
        refused: Vec::new(),
        block_bytes: plan.block_bytes,
        asked: plan.blocks,
        stopped: None,
        released: false,
    };
    let t = Instant::now();
    let mut attempts = 0u64;
    let mut cands = plan.candidates.iter();
    while (held.blocks.len() as u64) < plan.blocks {
        let out_of_bounds = attempts >= limits.max_attempts || t.elapsed() > limits.total || cands.len() == 0;
        if best_effort && out_of_bounds {
            held.stopped = Some(if cands.len() == 0 {
                "no candidate block left".to_string()
            } else if attempts >= limits.max_attempts {
                format!("{} attempts", limits.max_attempts)
            } else {
                format!("over {:.0} s", limits.total.as_secs_f64())
            });
            break;
        }
        let Some(&i) = cands.next() else {
            return Err(give_up(
                &mut held,
                plan,
                attempts,
                t,
                "no candidate block left".into(),
            ));
        };
        if attempts >= limits.max_attempts {
            return Err(give_up(
                &mut held,
                plan,
                attempts,
                t,
                format!("{} attempts", limits.max_attempts),
            ));
        }
        if t.elapsed() > limits.total {
            let why = format!("over {:.0} s", limits.total.as_secs_f64());
            return Err(give_up(&mut held, plan, attempts, t, why));
        }
        attempts += 1;
        if let Err(e) = record(i) {
            let _ = give_up(&mut held, plan, attempts, t, e.to_string());
            return Err(e);
        }
        // Recorded before the write: a block that did go offline is onlined on every path.
        held.blocks.push(i);
        let state = state_path(&plan.root, i);
        match write(&state, "offline") {
            Ok(()) => {}
            // A write killed at its limit just after the kernel finished: the block is taken.
            Err(e) if refused(&e) && read_trim(&state).as_deref() == Some("offline") => {}
            Err(e) if refused(&e) => {
                held.blocks.pop();
                held.refused.push(format!("memory{i}: {e}"));
            }
            Err(e) => {
                if read_trim(&state).as_deref() != Some("offline") {
                    held.blocks.pop();
                }
                let why = format!("memory{i}: {e}");
                return Err(give_up(&mut held, plan, attempts, t, why));
            }
        }
    }
    Ok(held)
}

/// Onlines the blocks taken and says why the target cannot be reached.
fn give_up(held: &mut Offlined, plan: &OfflinePlan, attempts: u64, t: Instant, why: String) -> HostError {
    let taken = held.blocks.len();
    let back = match held.release() {
        Ok(()) => "onlined again".to_string(),
        Err(e) => format!("onlining them again failed: {e}"),
    };
    HostError::Unsafe(format!(
        "--fit-memory: {taken} of {} blocks of {} MiB offlined ({attempts} tried in {:.1} s; \
         refused: {}): {why}; MemTotal {} MiB cannot reach machine.memory {} MiB; the blocks \
         taken were {back}",
        plan.blocks,
        plan.block_bytes >> 20,
        t.elapsed().as_secs_f64(),
        if held.refused.is_empty() {
            "none".to_string()
        } else {
            held.refused.join(", ")
        },
        plan.mem_total >> 20,
        plan.target >> 20,
    ))
}

/// Onlines one block (as zone Normal: `online_kernel`) if it reads offline.
fn write_online(state: &Path) -> Result<(), String> {
    match read_trim(state).as_deref() {
        Some("online") => Ok(()),
        Some(_) => std::fs::write(state, "online_kernel")
            .or_else(|_| std::fs::write(state, "online"))
            .map_err(|e| format!("{}: {e}", state.display())),
        None => Err(format!("{}: cannot read", state.display())),
    }
}

/// Onlines the blocks `indices` under `root` that read offline (a killed run's state file);
/// returns what failed.
pub fn online_blocks(root: &Path, indices: &[u64]) -> Vec<String> {
    indices
        .iter()
        .rev()
        .filter_map(|i| write_online(&state_path(root, *i)).err())
        .collect()
}

impl Offlined {
    /// Onlines every block taken; idempotent.
    pub fn release(&mut self) -> Result<(), HostError> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        let failed: Vec<String> = self
            .blocks
            .iter()
            .rev()
            .filter_map(|i| write_online(&state_path(&self.root, *i)).err())
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(HostError::RestoreFailed(failed))
        }
    }

    /// Bytes held offline.
    pub fn bytes(&self) -> u64 {
        self.blocks.len() as u64 * self.block_bytes
    }

    /// The blocks asked for that did not go offline, in bytes (0 when the target was reached).
    pub fn shortfall(&self) -> u64 {
        self.asked.saturating_sub(self.blocks.len() as u64) * self.block_bytes
    }

    /// The result's line: `offline N blocks of 128 MiB (…)`.
    pub fn describe(&self, plan: &OfflinePlan) -> String {
        format!(
            "offline {} blocks of {} MiB (memory{}..memory{} from the top of zone Normal, {} \
             refused{}; MemTotal {} -> {} MiB for machine.memory {} MiB)",
            if (self.blocks.len() as u64) < self.asked {
                format!("{} of {}", self.blocks.len(), self.asked)
            } else {
                self.blocks.len().to_string()
            },
            self.block_bytes >> 20,
            self.blocks.iter().min().copied().unwrap_or(0),
            self.blocks.iter().max().copied().unwrap_or(0),
            self.refused.len(),
            match &self.stopped {
                Some(why) => format!(", stopped: {why}"),
                None => String::new(),
            },
            plan.mem_total >> 20,
            (plan.mem_total - self.bytes()) >> 20,
            plan.target >> 20
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB128: u64 = 128 << 20;

    /// A fake /sys/devices/system/memory: (index, state, removable, zone) per block.
    struct Fake(PathBuf);

    impl Fake {
        fn new(tag: &str, blocks: &[(u64, &str, u8, &str)]) -> Fake {
            let root = std::env::temp_dir().join(format!("fraglab-memblock-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            std::fs::create_dir_all(&root).unwrap();
            std::fs::write(root.join("block_size_bytes"), "8000000\n").unwrap();
            std::fs::write(root.join("auto_online_blocks"), "offline\n").unwrap();
            for (i, state, rem, zone) in blocks {
                let d = root.join(format!("memory{i}"));
                std::fs::create_dir(&d).unwrap();
                std::fs::write(d.join("state"), format!("{state}\n")).unwrap();
                std::fs::write(d.join("removable"), format!("{rem}\n")).unwrap();
                std::fs::write(d.join("valid_zones"), format!("{zone}\n")).unwrap();
                std::fs::write(d.join("phys_index"), format!("{i:08x}\n")).unwrap();
            }
            Fake(root)
        }

        fn state(&self, i: u64) -> String {
            read_trim(&state_path(&self.0, i)).unwrap()
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn meminfo(total: u64) -> String {
        format!("MemTotal: {} kB\nMemAvailable: {} kB\n", total >> 10, total >> 10)
    }

    /// A machine like this VM in miniature: block 0 spans DMA and DMA32 ("none"), 1..=3 DMA32,
    /// 4..=11 Normal with 9 not removable and 10 already offline.
    fn machine(tag: &str) -> Fake {
        let mut b: Vec<(u64, &str, u8, &str)> = vec![(0, "online", 1, "none")];
        b.extend((1..=3).map(|i| (i, "online", 1, "DMA32")));
        for i in 4..=11 {
            let (state, rem) = match i {
                9 => ("online", 0),
                10 => ("offline", 1),
                _ => ("online", 1),
            };
            b.push((
                i,
                state,
                rem,
                if state == "offline" {
                    "Normal Movable"
                } else {
                    "Normal"
                },
            ));
        }
        Fake::new(tag, &b)
    }

    fn plan_of(f: &Fake, total: u64, target: u64) -> OfflinePlan {
        match plan(&f.0, &meminfo(total), target).unwrap() {
            Availability::Offline(p) => p,
            Availability::Unavailable(why) => panic!("unavailable: {why}"),
        }
    }

    /// A writer that writes into the fake tree, refusing the blocks in `refuse` with `errno`.
    fn writer(refuse: Vec<u64>, errno: i32) -> impl FnMut(&Path, &str) -> io::Result<()> {
        move |p: &Path, v: &str| {
            let i: u64 = p
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .strip_prefix("memory")
                .unwrap()
                .parse()
                .unwrap();
            if refuse.contains(&i) {
                return Err(io::Error::from_raw_os_error(errno));
            }
            std::fs::write(p, v)
        }
    }

    #[test]
    fn plan_picks_the_top_of_normal_and_skips_the_others() {
        let f = machine("plan");
        // 11 online blocks' worth of MemTotal; a target 3.5 blocks under it: 3 blocks.
        let total = 11 * MIB128;
        let p = plan_of(&f, total, total - 3 * MIB128 - MIB128 / 2);
        assert_eq!(p.blocks, 3);
        assert_eq!(p.block_bytes, MIB128);
        // Not 10 (offline), not 9 (not removable), not 0..=3 (DMA, DMA32): 11, 8, 7, ... 4.
        assert_eq!(p.candidates, vec![11, 8, 7, 6, 5, 4]);
        assert!(
            p.describe().starts_with("offline 3 blocks of 128 MiB ("),
            "{}",
            p.describe()
        );
        // Rounded down: MemTotal stays within one block above the target.
        let left = total - p.bytes();
        assert!(left >= p.target && left < p.target + MIB128);
    }

    #[test]
    fn plan_is_unavailable_without_sysfs_or_normal_blocks_and_refuses_a_large_target() {
        let none = std::env::temp_dir().join("fraglab-memblock-no-such-dir");
        let total = 11 * MIB128;
        assert!(matches!(
            plan(&none, &meminfo(total), MIB128).unwrap(),
            Availability::Unavailable(_)
        ));
        let dma_only = Fake::new("dma", &[(1, "online", 1, "DMA32"), (2, "online", 0, "Normal")]);
        match plan(&dma_only.0, &meminfo(total), total - 2 * MIB128).unwrap() {
            Availability::Unavailable(why) => assert!(why.contains("no online removable block"), "{why}"),
            a => panic!("{a:?}"),
        }
        let f = machine("few");
        match plan(&f.0, &meminfo(total), MIB128).unwrap() {
            Availability::Unavailable(why) => assert!(why.contains("10 blocks needed, 6"), "{why}"),
            a => panic!("{a:?}"),
        }
        assert!(matches!(
            plan(&f.0, &meminfo(total), total),
            Err(HostError::Unsafe(_))
        ));
    }

    #[test]
    fn offline_records_each_block_before_writing_and_onlines_on_release() {
        let f = machine("take");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut recorded = Vec::new();
        let mut w = writer(Vec::new(), 0);
        let mut record = |i: u64| {
            // The block is still online when it is recorded.
            assert_eq!(f.state(i), "online");
            recorded.push(i);
            Ok(())
        };
        let mut held = offline(&p, Limits::for_plan(&p), &mut w, &mut record).unwrap();
        assert_eq!(held.blocks, vec![11, 8, 7]);
        assert_eq!(recorded, vec![11, 8, 7]);
        assert_eq!(f.state(11), "offline");
        held.release().unwrap();
        assert_eq!(f.state(11), "online_kernel");
        assert_eq!(f.state(10), "offline", "a block offline before the run stays so");
    }

    #[test]
    fn a_refusing_block_is_skipped_for_the_next_lower_one() {
        let f = machine("retry");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(vec![8, 6], libc::EBUSY);
        let mut held = offline(&p, Limits::for_plan(&p), &mut w, &mut |_| Ok(())).unwrap();
        assert_eq!(held.blocks, vec![11, 7, 5]);
        assert_eq!(held.refused.len(), 2);
        assert_eq!(f.state(8), "online");
        held.release().unwrap();
        for i in [11, 7, 5] {
            assert_eq!(f.state(i), "online_kernel", "memory{i} not onlined on release");
        }
    }

    #[test]
    fn an_unreachable_target_onlines_what_was_taken_and_says_why() {
        let f = machine("fail");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(vec![8, 7, 6, 5], libc::EAGAIN);
        let e = offline(&p, Limits::for_plan(&p), &mut w, &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 of 3 blocks of 128 MiB offlined"), "{e}");
        assert!(e.contains("no candidate block left"), "{e}");
        assert!(e.contains("onlined again"), "{e}");
        // 11 and 4 were taken, and given back.
        assert_eq!(f.state(11), "online_kernel");
        assert_eq!(f.state(4), "online_kernel");

        // The attempts are bounded.
        let f = machine("bound");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(vec![11, 8, 7, 6], libc::EBUSY);
        let limits = Limits {
            max_attempts: 4,
            ..Limits::for_plan(&p)
        };
        let e = offline(&p, limits, &mut w, &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("0 of 3 blocks") && e.contains("4 attempts"), "{e}");

        // A write error other than a refusal stops at once.
        let f = machine("perm");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(vec![8], libc::EPERM);
        let e = offline(&p, Limits::for_plan(&p), &mut w, &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("1 of 3 blocks") && e.contains("memory8"), "{e}");
        assert_eq!(f.state(11), "online_kernel");
    }

    /// Best effort: the blocks that refuse are skipped, those that go are kept (not onlined)
    /// when the candidates run out, and the shortfall is what is left to hold another way.
    #[test]
    fn best_effort_keeps_the_blocks_that_went_and_reports_the_shortfall() {
        let f = machine("best");
        // 3 blocks asked; 8, 7, 6 and 5 refuse: 11 and 4 go, one block short.
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(vec![8, 7, 6, 5], libc::EBUSY);
        let mut recorded = Vec::new();
        let mut record = |i: u64| {
            recorded.push(i);
            Ok(())
        };
        let mut held = offline_best_effort(&p, Limits::for_plan(&p), &mut w, &mut record).unwrap();
        assert_eq!(held.blocks, vec![11, 4]);
        assert_eq!(recorded, vec![11, 8, 7, 6, 5, 4]);
        assert_eq!(held.refused.len(), 4);
        assert_eq!(held.shortfall(), MIB128);
        assert_eq!(held.stopped.as_deref(), Some("no candidate block left"));
        assert_eq!(f.state(11), "offline");
        assert_eq!(f.state(4), "offline");
        assert!(
            held.describe(&p)
                .starts_with("offline 2 of 3 blocks of 128 MiB (memory4..memory11"),
            "{}",
            held.describe(&p)
        );
        held.release().unwrap();
        assert_eq!(f.state(11), "online_kernel");
        assert_eq!(f.state(4), "online_kernel");

        // Within the limits: the attempts bound stops it too, keeping what went.
        let f = machine("best-bound");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(vec![8, 7], libc::EBUSY);
        let limits = Limits {
            max_attempts: 3,
            ..Limits::for_plan(&p)
        };
        let held = offline_best_effort(&p, limits, &mut w, &mut |_| Ok(())).unwrap();
        assert_eq!(held.blocks, vec![11]);
        assert_eq!(held.shortfall(), 2 * MIB128);
        assert_eq!(held.stopped.as_deref(), Some("3 attempts"));

        // Every block refusing: nothing taken, the whole difference is the shortfall.
        let f = machine("best-none");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(vec![11, 8, 7, 6, 5, 4], libc::EBUSY);
        let held = offline_best_effort(&p, Limits::for_plan(&p), &mut w, &mut |_| Ok(())).unwrap();
        assert!(held.blocks.is_empty());
        assert_eq!(held.shortfall(), 3 * MIB128);

        // All taken: no shortfall, the plan's line.
        let f = machine("best-all");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(Vec::new(), 0);
        let held = offline_best_effort(&p, Limits::for_plan(&p), &mut w, &mut |_| Ok(())).unwrap();
        assert_eq!((held.blocks.len(), held.shortfall()), (3, 0));
        assert!(held.describe(&p).starts_with("offline 3 blocks of 128 MiB ("));

        // A write error other than a refusal still fails and onlines what was taken.
        let f = machine("best-perm");
        let p = plan_of(&f, 11 * MIB128, 8 * MIB128);
        let mut w = writer(vec![8], libc::EPERM);
        let e = offline_best_effort(&p, Limits::for_plan(&p), &mut w, &mut |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory8"), "{e}");
        assert_eq!(f.state(11), "online_kernel");
    }

    #[test]
    fn online_blocks_of_a_state_file_touches_only_offline_ones() {
        let f = machine("restore");
        std::fs::write(state_path(&f.0, 11), "offline").unwrap();
        assert!(online_blocks(&f.0, &[11, 8]).is_empty());
        assert_eq!(f.state(11), "online_kernel");
        assert_eq!(f.state(8), "online", "an online block is left alone");
        assert_eq!(online_blocks(&f.0, &[99]).len(), 1);
    }

    #[test]
    fn bounded_writes_report_errno_and_time_out() {
        let f = machine("write");
        let p = state_path(&f.0, 4);
        write_bounded(&p, "offline", Duration::from_secs(5)).unwrap();
        assert_eq!(f.state(4), "offline");
        let e = write_bounded(&f.0.join("memory99/state"), "offline", Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        // A FIFO without a reader blocks the open: the child is killed at the limit.
        let fifo = f.0.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo on a path in our temp tree.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = write_bounded(&fifo, "offline", Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(refused(&e));
    }
}
