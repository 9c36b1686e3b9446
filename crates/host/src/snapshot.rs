//! `fraglab host snapshot --pages` (issue 21 item 1): a snapshot of this machine's physical
//! memory, one byte per pfn (kernel-model.md §30.1–§30.2, §30.5 item 6).
//!
//! Read-only: it opens files for reading and changes nothing on the machine. It refuses a
//! machine whose memory map is not fully initialised yet (deferred struct page init:
//! `fraglab_state::procparse::uninitialised_memory`), whose state would not boot. Order:
//! 1. /proc/iomem (System RAM ranges, less the memory blocks /sys/devices/system/memory says are
//!    offline: [`offline_memory`]), /proc/zoneinfo (zones), every knob of the spec language,
//!    the confounders (free page reporting, DAMON, ...);
//! 2. /proc/{buddyinfo,pagetypeinfo,zoneinfo,vmstat,meminfo} (`proc_before`);
//! 3. /sys/kernel/debug/page_owner if the kernel has it (§30.4), streamed line by line;
//! 4. /proc/kpageflags in chunks of `chunk_pfns` pfns (pread, 8 bytes a pfn), each pfn
//!    classified by [`fraglab_state::page::classify`] into its byte;
//! 5. the same /proc files again (`proc_after`), so the reconstruction can pick the read
//!    nearer the pfn read (§30.5 item 6: bracket the read).
//!
//! /proc/kpagecount is not read: the page byte does not keep the map count (§30.2.6: it is not
//! the refcount, and nothing in the reconstruction uses it).
//!
//! Memory: the page bytes (1 byte a pfn, 6.5 MB on S2) and one chunk buffer (4 MiB).

use std::fs::File;
use std::io::BufReader;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use fraglab_state::page::classify;
use fraglab_state::procparse::{parse_iomem_ram, parse_page_owner, parse_zoneinfo};
use fraglab_state::snapshot::{Snapshot, SnapshotHeader};

use crate::{confounders, knobs, procfs, HostError};

/// The /proc files read before and after the pfn read.
pub const PROC_FILES: [&str; 5] = ["buddyinfo", "pagetypeinfo", "zoneinfo", "vmstat", "meminfo"];

/// Where page_owner is (§30.4); absent on S2 (no CONFIG_PAGE_OWNER, debugfs not mounted).
pub const PAGE_OWNER: &str = "/sys/kernel/debug/page_owner";

/// Options of [`capture`].
#[derive(Clone, Debug)]
pub struct CaptureOptions {
    /// Pfns read from /proc/kpageflags at a time (8 bytes each).
    pub chunk_pfns: u64,
    /// Read page_owner when present (it can be slow: a record per allocated page).
    pub page_owner: bool,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            chunk_pfns: 512 << 10,
            page_owner: true,
        }
    }
}

/// What `host snapshot --pages` needs, for the refusal without root.
pub const NEEDS_ROOT: &str = "fraglab host snapshot --pages needs root: /proc/kpageflags and \
/proc/pagetypeinfo are readable by root only (kernel-model.md §30.1); it only reads, changing nothing";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn proc_texts() -> Result<std::collections::BTreeMap<String, String>, HostError> {
    PROC_FILES
        .iter()
        .map(|f| Ok((f.to_string(), procfs::read(&format!("/proc/{f}"))?)))
        .collect()
}

/// Captures this machine's physical state (see the module doc). `progress(done, total)` is
/// called after each chunk of pfns.
pub fn capture(opts: &CaptureOptions, progress: &mut dyn FnMut(u64, u64)) -> Result<Snapshot, HostError> {
    if !cfg!(target_os = "linux") {
        return Err(HostError::NotLinux);
    }
    if !is_root() {
        return Err(HostError::Io {
            what: NEEDS_ROOT.into(),
            err: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
    }
    let ram_ranges = without_ranges(
        &parse_iomem_ram(&procfs::read("/proc/iomem")?),
        &offline_memory(Path::new("/sys/devices/system/memory")),
    );
    let zones = parse_zoneinfo(&procfs::read("/proc/zoneinfo")?);
    let end_pfn = zones
        .iter()
        .map(|z| z.start_pfn + z.spanned)
        .chain(ram_ranges.iter().map(|r| r[1]))
        .max()
        .unwrap_or(0);
    let knobs = knobs::read_all_knobs();
    let confounders = serde_json::to_value(confounders::read()).unwrap_or(serde_json::Value::Null);
    let text = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let proc_before = proc_texts()?;
    if let Some(why) =
        fraglab_state::procparse::uninitialised_memory(&proc_before["zoneinfo"], &proc_before["pagetypeinfo"])
    {
        return Err(HostError::Uninitialised(why));
    }

    let page_owner_blocks = if opts.page_owner && Path::new(PAGE_OWNER).exists() {
        let f = File::open(PAGE_OWNER).map_err(|e| HostError::io(PAGE_OWNER, e))?;
        let (blocks, _bad) = parse_page_owner(BufReader::with_capacity(1 << 20, f))
            .map_err(|e| HostError::io(PAGE_OWNER, e))?;
        Some(blocks)
    } else {
        None
    };

    let taken_at_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t0 = Instant::now();
    let (pages, dirty) = read_pages(
        Path::new("/proc/kpageflags"),
        end_pfn,
        &ram_ranges,
        opts.chunk_pfns,
        progress,
    )?;
    let read_ns = t0.elapsed().as_nanos() as u64;
    let proc_after = proc_texts()?;

    Ok(Snapshot {
        header: SnapshotHeader {
            taken_at_unix_s,
            hostname: text("/proc/sys/kernel/hostname"),
            kernel: text("/proc/sys/kernel/osrelease"),
            // SAFETY: sysconf has no preconditions.
            nr_cpus: unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32,
            end_pfn,
            ram_ranges,
            zones,
            proc_before,
            proc_after,
            knobs,
            confounders,
            page_owner_blocks,
            read_ns,
            dirty_bitmap: true,
        },
        pages,
        dirty,
    })
}

/// Pfn ranges [start, end) of the memory blocks that are not online, from the memory hotplug
/// sysfs directory `dir` (/sys/devices/system/memory: `block_size_bytes` in hex, a `memoryN`
/// directory per block with its `state`), merged and sorted. Offline memory stays "System RAM"
/// in /proc/iomem, but it has no online memmap: /proc/kpageflags reads it as 0
/// (`pfn_to_online_page`, kernel-model.md §30.2 item 4) and zoneinfo's `present` leaves it out
/// (`offline_pages` lowers it). Without this, a capture taken while blocks are offline
/// (`--fit-memory` runs) would read them as gigabytes of unflagged kernel pages. Empty when the
/// directory is absent (no memory hotplug).
pub fn offline_memory(dir: &Path) -> Vec<[u64; 2]> {
    let Some(block_pfns) = std::fs::read_to_string(dir.join("block_size_bytes"))
        .ok()
        .and_then(|t| u64::from_str_radix(t.trim(), 16).ok())
        .map(|b| b / 4096)
        .filter(|&b| b > 0)
    else {
        return Vec::new();
    };
    let mut v: Vec<[u64; 2]> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n: u64 = e.file_name().to_str()?.strip_prefix("memory")?.parse().ok()?;
            let state = std::fs::read_to_string(e.path().join("state")).ok()?;
            (state.trim() != "online").then_some([n * block_pfns, (n + 1) * block_pfns])
        })
        .collect();
    v.sort_unstable();
    let mut out: Vec<[u64; 2]> = Vec::new();
    for r in v {
        match out.last_mut() {
            Some(l) if l[1] >= r[0] => l[1] = l[1].max(r[1]),
            _ => out.push(r),
        }
    }
    out
}

/// `ram` (sorted, disjoint pfn ranges) without the pfns of `cut` (sorted, disjoint).
pub fn without_ranges(ram: &[[u64; 2]], cut: &[[u64; 2]]) -> Vec<[u64; 2]> {
    let mut out = Vec::new();
    for &[start, e] in ram {
        let mut s = start;
        for c in cut.iter().filter(|c| c[1] > start && c[0] < e) {
            if c[0] > s {
                out.push([s, c[0]]);
            }
            s = s.max(c[1]);
        }
        if s < e {
            out.push([s, e]);
        }
    }
    out
}

/// Reads the kpageflags-format file at `path` (8 bytes a pfn) for pfns 0..`end_pfn` in chunks
/// and classifies each pfn; a short read (past the kernel's max_pfn) reads as 0. Returns the
/// page bytes and the dirty bitmap (`fraglab_state::page::is_dirty`, one bit per pfn).
pub fn read_pages(
    path: &Path,
    end_pfn: u64,
    ram: &[[u64; 2]],
    chunk_pfns: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Vec<u8>, Vec<u8>), HostError> {
    let f = File::open(path).map_err(|e| HostError::io(path.display().to_string(), e))?;
    let mut dirty = vec![0u8; end_pfn.div_ceil(8) as usize];
    let chunk = chunk_pfns.max(1);
    let mut buf = vec![0u8; (chunk * 8) as usize];
    let mut pages = Vec::with_capacity(end_pfn as usize);
    let mut ri = 0usize;
    let mut pfn = 0u64;
    while pfn < end_pfn {
        let n = chunk.min(end_pfn - pfn);
        let want = (n * 8) as usize;
        let mut got = 0usize;
        while got < want {
            match f.read_at(&mut buf[got..want], pfn * 8 + got as u64) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(HostError::io(
                        format!("{} at pfn {}", path.display(), pfn + (got / 8) as u64),
                        e,
                    ))
                }
            }
        }
        buf[got..want].fill(0);
        for i in 0..n {
            let p = pfn + i;
            while ri < ram.len() && ram[ri][1] <= p {
                ri += 1;
            }
            let in_ram = ri < ram.len() && ram[ri][0] <= p;
            let o = (i * 8) as usize;
            let flags = u64::from_ne_bytes(buf[o..o + 8].try_into().expect("8 bytes"));
            let b = classify(flags, in_ram);
            if fraglab_state::page::is_dirty(flags, b) {
                dirty[(p / 8) as usize] |= 1 << (p % 8);
            }
            pages.push(b);
        }
        pfn += n;
        progress(pfn, end_pfn);
    }
    Ok((pages, dirty))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offline memory blocks are left out of the RAM ranges, so their pfns read as holes.
    #[test]
    fn section_30_2_offline_blocks_are_not_ram() {
        let dir = std::env::temp_dir().join(format!("fraglab-memblocks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("block_size_bytes"), "8000000\n").unwrap();
        for (n, state) in [
            (0, "online"),
            (40, "offline"),
            (41, "offline"),
            (43, "going-offline"),
            (44, "online"),
        ] {
            let d = dir.join(format!("memory{n}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("state"), format!("{state}\n")).unwrap();
        }
        let off = offline_memory(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let b = 0x8000;
        assert_eq!(off, vec![[40 * b, 42 * b], [43 * b, 44 * b]]);
        let ram = [[1, 0x9f], [0x100, 0xc0000], [0x100000, 0x640000]];
        assert_eq!(
            without_ranges(&ram, &off),
            vec![
                [1, 0x9f],
                [0x100, 0xc0000],
                [0x100000, 0x140000],
                [0x150000, 0x158000],
                [0x160000, 0x640000]
            ]
        );
        assert_eq!(without_ranges(&ram, &[]), ram.to_vec());
        assert!(offline_memory(Path::new("/nonexistent")).is_empty());
    }
}
