//! `fraglab host snapshot --pages` (issue 21 item 1): a snapshot of this machine's physical
//! memory, one byte per pfn (docs/model §30.1–§30.2, §30.5 item 6).
//!
//! Read-only: it opens files for reading and changes nothing on the machine (with
//! [`CaptureOptions::damon_regions`], the same-start captures of `host run`, it also makes a
//! private tracefs instance for a few seconds: [`crate::damon::capture_regions`]). It refuses a
//! machine whose memory map is not fully initialised yet (deferred struct page init:
//! `fraglab_state::procparse::uninitialised_memory`), whose state would not boot. Order:
//! 1. /proc/iomem (System RAM ranges, less the memory blocks /sys/devices/system/memory says are
//!    offline: [`offline_pfn_ranges`]), /proc/zoneinfo (zones), every knob of the spec language,
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
use fraglab_state::procparse::{parse_iomem_ram, parse_zoneinfo};
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
    /// Record the running kdamond's regions and ages first (`SnapshotHeader::damon`,
    /// [`crate::damon::capture_regions`]): a private tracefs instance for up to two of its
    /// aggregation intervals (S2: 5 s each; one on average), then the pfn read at once. Off by
    /// default (`host snapshot --pages` only reads); the same-start captures of `host run`
    /// turn it on.
    pub damon_regions: bool,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions {
            chunk_pfns: 512 << 10,
            page_owner: true,
            damon_regions: false,
        }
    }
}

/// What `host snapshot --pages` needs, for the refusal without root.
pub const NEEDS_ROOT: &str = "fraglab host snapshot --pages needs root: /proc/kpageflags and \
/proc/pagetypeinfo are readable by root only (docs/model §30.1); it only reads, changing nothing";

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
    // The kdamond's regions come first, the pfn read right after them: the regions are then at
    // most the instance's set-up and the /proc reads older than the pages.
    let mut damon = if opts.damon_regions {
        crate::damon::capture_regions(Path::new("/"))
    } else {
        None
    };
    // Offline memory blocks stay System RAM in /proc/iomem, and /proc/kpageflags reads 0 for
    // their pfns — the same as an online page with no flag — so they are cut out of the RAM
    // ranges here and read as holes (a block offlined by `host run --fit-memory` is not
    // present in its zone: zoneinfo's `present` leaves it out).
    let ram_ranges = without_offline_blocks(
        parse_iomem_ram(&procfs::read("/proc/iomem")?),
        &offline_pfn_ranges(Path::new(crate::memblock::MEMORY_SYSFS)),
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

    // page_owner's block types (for the reconstruction) and its mixed blocks by stack (for
    // `fraglab blame SNAPSHOT`), in one pass over the dump.
    let (page_owner_blocks, page_owner_blame) = if opts.page_owner && Path::new(PAGE_OWNER).exists() {
        let f = File::open(PAGE_OWNER).map_err(|e| HostError::io(PAGE_OWNER, e))?;
        let mut b =
            fraglab_state::page_owner::read_from(Path::new(PAGE_OWNER), BufReader::with_capacity(1 << 20, f))
                .map_err(|e| HostError::io(PAGE_OWNER, std::io::Error::other(e.to_string())))?;
        (Some(std::mem::take(&mut b.block_types)), Some(b))
    } else {
        (None, None)
    };

    let taken_at_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t0 = Instant::now();
    if let Some(d) = damon.as_mut() {
        d.pages_at_ns = crate::damon::mono_ns();
    }
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
            node_cpus: node_cpu_counts(Path::new("/sys/devices/system/node")),
            end_pfn,
            ram_ranges,
            zones,
            proc_before,
            proc_after,
            knobs,
            confounders,
            page_owner_blocks,
            page_owner_blame,
            read_ns,
            dirty_bitmap: true,
            reported_bits: true,
            damon,
        },
        pages,
        dirty,
    })
}

/// Online CPUs per NUMA node under `root` (a /sys/devices/system/node tree): the length of each
/// `nodeN/cpulist` ("0-3,8-11"), node by node from node 0. Empty on a one-node machine (the
/// snapshot then boots every CPU on node 0), where the tree is absent, and where the node ids
/// are not 0..N without gaps (a gap would renumber the nodes the zones name).
pub fn node_cpu_counts(root: &Path) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut nodes: Vec<(u32, u32)> = Vec::new();
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("node")?.parse::<u32>().ok())
        else {
            continue;
        };
        let list = std::fs::read_to_string(e.path().join("cpulist")).unwrap_or_default();
        nodes.push((id, cpu_list_len(list.trim())));
    }
    nodes.sort_unstable();
    let contiguous = nodes.iter().enumerate().all(|(i, &(id, _))| id == i as u32);
    if nodes.len() <= 1 || !contiguous {
        return Vec::new();
    }
    nodes.into_iter().map(|(_, n)| n).collect()
}

/// The number of CPUs in a sysfs CPU list ("0-3,8,10-11" is 7; "" is 0; a malformed part
/// counts 0).
fn cpu_list_len(list: &str) -> u32 {
    list.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => match (a.parse::<u32>(), b.parse::<u32>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 0,
            },
            None => u32::from(p.parse::<u32>().is_ok()),
        })
        .sum()
}

/// The pfn ranges `[start, end)` of the memory blocks under `root` (a
/// /sys/devices/system/memory tree) that are not online, in pfn order; none where the tree is
/// absent (no memory hotplug).
pub fn offline_pfn_ranges(root: &Path) -> Vec<[u64; 2]> {
    let Ok((block_bytes, blocks)) = crate::memblock::read_blocks(root) else {
        return Vec::new();
    };
    let pages = block_bytes / 4096;
    let mut v: Vec<[u64; 2]> = blocks
        .iter()
        .filter(|b| b.state != "online")
        .map(|b| [b.phys_index * pages, (b.phys_index + 1) * pages])
        .collect();
    v.sort_unstable();
    v
}

/// `ram` (sorted, disjoint `[start, end)` pfn ranges) less the `holes` (sorted, disjoint).
pub fn without_offline_blocks(ram: Vec<[u64; 2]>, holes: &[[u64; 2]]) -> Vec<[u64; 2]> {
    if holes.is_empty() {
        return ram;
    }
    let mut out = Vec::new();
    for [mut a, b] in ram {
        let (start, end) = (a, b);
        for h in holes.iter().filter(|h| h[1] > start && h[0] < end) {
            if h[0] > a {
                out.push([a, h[0]]);
            }
            a = a.max(h[1]);
        }
        if a < b {
            out.push([a, b]);
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
mod offline_tests {
    use super::*;

    #[test]
    fn offline_blocks_are_cut_out_of_the_ram_ranges() {
        let ram = vec![[1, 159], [256, 1000], [1024, 5000]];
        assert_eq!(without_offline_blocks(ram.clone(), &[]), ram);
        // One block inside a range, one straddling the end of another, one past everything.
        let holes = [[300, 400], [900, 1100], [6000, 7000]];
        assert_eq!(
            without_offline_blocks(ram, &holes),
            vec![[1, 159], [256, 300], [400, 900], [1100, 5000]]
        );
    }

    #[test]
    fn offline_ranges_come_from_the_block_states() {
        let d = std::env::temp_dir().join(format!("fraglab-offline-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("block_size_bytes"), "8000000\n").unwrap();
        for (i, state) in [(0, "online"), (1, "offline"), (2, "online"), (3, "offline")] {
            let b = d.join(format!("memory{i}"));
            std::fs::create_dir_all(&b).unwrap();
            std::fs::write(b.join("state"), format!("{state}\n")).unwrap();
            std::fs::write(b.join("phys_index"), format!("{i:08x}\n")).unwrap();
        }
        // 128 MiB blocks: 32768 pfns each.
        assert_eq!(offline_pfn_ranges(&d), vec![[32768, 65536], [98304, 131072]]);
        assert!(offline_pfn_ranges(&d.join("absent")).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[cfg(test)]
mod node_tests {
    use super::*;

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(cpu_list_len("0-3,8,10-11"), 7);
        assert_eq!(cpu_list_len(""), 0);
        assert_eq!(cpu_list_len("5"), 1);
        assert_eq!(cpu_list_len("3-1,x"), 0);
    }

    #[test]
    fn node_cpus_are_read_node_by_node_and_only_for_several_nodes() {
        let dir = std::env::temp_dir().join(format!("fraglab-nodes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let node = |id: u32, cpus: &str| {
            let d = dir.join(format!("node{id}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
        };
        node(0, "0-1");
        assert_eq!(
            node_cpu_counts(&dir),
            Vec::<u32>::new(),
            "one node: nothing recorded"
        );
        node(1, "2-5");
        node(2, "");
        std::fs::create_dir_all(dir.join("power")).unwrap();
        assert_eq!(node_cpu_counts(&dir), vec![2, 4, 0]);
        // A gap in the ids (node 3 missing) makes the record unusable.
        node(4, "6");
        assert_eq!(node_cpu_counts(&dir), Vec::<u32>::new());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(node_cpu_counts(&dir), Vec::<u32>::new(), "no tree");
    }
}
