//! A short fit of the read device at the start of a host run (`HostOptions::fit_read_device`),
//! so the simulator's arm of `fraglab validate` reads at the speed this machine's device has
//! today instead of the cost model's constants (measured on another day: a virtio disk's speed
//! moves with the host's load by a factor of 2–3).
//!
//! The cost model charges a read request `req_ns` plus `page_ns` per 4 KiB page it carries
//! (`read_req_ns`/`read_page_ns`, `loop_read_*` on loop images; docs/costs.md). The fit is
//! that model's least squares over O_DIRECT preads of a freshly written file in the directory
//! the run's files live in (its loop image's mount with `[host] loop_images`): for each size of
//! 4, 16, 64, 128, 512 and 1,024 KiB, [`READS_PER_SIZE`] reads at random aligned offsets, each
//! timed; the per-size medians against the pages per read give `t = a + b × pages`. O_DIRECT
//! keeps the page cache out (no readahead, no copy): the device's time per request alone, as
//! tools/measure/loop_read.py measures it at length.
//!
//! Cost: one [`FILE_BYTES`] file written, synced and removed, and 150 reads (the unit test
//! `fits_a_real_directory` took 0.1–0.4 s on this project's VM, /tmp on its virtio disk).

use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

use rand::{Rng, SeedableRng};

use crate::HostError;

/// The size of the file the fit reads.
pub const FILE_BYTES: u64 = 128 << 20;
/// Timed reads of each size.
pub const READS_PER_SIZE: usize = 25;
/// The read sizes, KiB.
pub const SIZES_KIB: [u64; 6] = [4, 16, 64, 128, 512, 1024];

/// The fitted device.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadDeviceFit {
    /// Time per request (the intercept), ns.
    pub req_ns: u64,
    /// Time per 4 KiB page (the slope), ns.
    pub page_ns: u64,
    /// (KiB per read, median ns) for each size.
    pub medians: Vec<(u64, u64)>,
}

impl ReadDeviceFit {
    /// The line the host result keeps in `proc_start["host"]` (parsed back by [`parse_line`]).
    pub fn line(&self, dir: &Path) -> String {
        let m: Vec<String> = self.medians.iter().map(|(k, ns)| format!("{k}K:{ns}")).collect();
        format!(
            "read device: req_ns {} page_ns {} (O_DIRECT preads under {}; median ns per size {})\n",
            self.req_ns,
            self.page_ns,
            dir.display(),
            m.join(" ")
        )
    }
}

/// `(req_ns, page_ns)` from a host result's `proc_start["host"]` text, if it has a fit.
pub fn parse_line(host_facts: &str) -> Option<(u64, u64)> {
    let l = host_facts.lines().find_map(|l| l.strip_prefix("read device: "))?;
    let mut w = l.split_whitespace();
    let (k1, v1, k2, v2) = (w.next()?, w.next()?, w.next()?, w.next()?);
    (k1 == "req_ns" && k2 == "page_ns").then_some((v1.parse().ok()?, v2.parse().ok()?))
}

/// Least squares of `t = a + b x` over (x, t) points; `None` with fewer than two distinct x.
pub fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    if points.len() < 2 || sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

/// A page-aligned buffer for O_DIRECT (an anonymous mapping, unmapped on drop).
struct Aligned {
    ptr: *mut u8,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Result<Aligned, HostError> {
        // SAFETY: a fresh private anonymous mapping; checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(HostError::io(
                "mmap of the read buffer",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(Aligned { ptr: p.cast(), len })
    }

    fn slice(&mut self, n: usize) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, readable and writable, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, n.min(self.len)) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Removes the fit's file on every way out.
struct TempFile<'a>(&'a Path);

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// Fits the read device under `dir` (see the module doc). `seed` picks the offsets.
pub fn fit_read_device(dir: &Path, seed: u64) -> Result<ReadDeviceFit, HostError> {
    let path = dir.join("fraglab-read-device-fit");
    let err = |e| HostError::io(path.display().to_string(), e);
    let _remove = TempFile(&path);
    {
        let f = std::fs::File::create(&path).map_err(err)?;
        let block = vec![0x5au8; 1 << 20];
        let mut off = 0;
        while off < FILE_BYTES {
            f.write_all_at(&block, off).map_err(err)?;
            off += block.len() as u64;
        }
        f.sync_all().map_err(err)?;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .map_err(err)?;
    let max_kib = SIZES_KIB[SIZES_KIB.len() - 1];
    let mut buf = Aligned::new((max_kib << 10) as usize)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut medians = Vec::new();
    for kib in SIZES_KIB {
        let bytes = kib << 10;
        let slots = FILE_BYTES / bytes;
        let mut t = Vec::with_capacity(READS_PER_SIZE);
        for _ in 0..READS_PER_SIZE {
            let off = rng.gen_range(0..slots) * bytes;
            let b = buf.slice(bytes as usize);
            let t0 = Instant::now();
            let mut got = 0usize;
            while got < b.len() {
                match f.read_at(&mut b[got..], off + got as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(err(e)),
                }
            }
            t.push(t0.elapsed().as_nanos() as u64);
        }
        t.sort_unstable();
        medians.push((kib, t[t.len() / 2]));
    }
    let points: Vec<(f64, f64)> = medians
        .iter()
        .map(|(k, ns)| ((k / 4) as f64, *ns as f64))
        .collect();
    let (a, b) =
        least_squares(&points).ok_or_else(|| HostError::Unsafe("read device fit: no points".into()))?;
    Ok(ReadDeviceFit {
        req_ns: a.max(1.0).round() as u64,
        page_ns: b.max(1.0).round() as u64,
        medians,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_of_a_line() {
        let pts: Vec<(f64, f64)> = [1.0, 4.0, 16.0, 32.0]
            .iter()
            .map(|&x| (x, 29_000.0 + 3_200.0 * x))
            .collect();
        let (a, b) = least_squares(&pts).unwrap();
        assert!((a - 29_000.0).abs() < 1e-6 && (b - 3_200.0).abs() < 1e-9);
        assert!(least_squares(&[(1.0, 2.0)]).is_none());
        assert!(least_squares(&[(1.0, 2.0), (1.0, 3.0)]).is_none());
    }

    #[test]
    fn a_failed_fit_line_is_no_fit() {
        assert_eq!(
            parse_line("read device: not fitted under /x: Invalid argument\n"),
            None
        );
    }

    #[test]
    fn the_line_parses_back() {
        let f = ReadDeviceFit {
            req_ns: 18_000,
            page_ns: 800,
            medians: vec![(4, 19_000), (1024, 220_000)],
        };
        let facts = format!("kernel 6.18\n{}reported_kib 1\n", f.line(Path::new("/var/tmp/x")));
        assert_eq!(parse_line(&facts), Some((18_000, 800)));
        assert_eq!(parse_line("kernel 6.18\n"), None);
    }

    /// The fit on a real file system (the temporary directory): positive figures, medians for
    /// every size. Skipped where O_DIRECT is refused (tmpfs).
    #[test]
    fn fits_a_real_directory() {
        let d = std::env::temp_dir().join(format!("fraglab-readdev-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        match fit_read_device(&d, 1) {
            Ok(f) => {
                assert_eq!(f.medians.len(), SIZES_KIB.len());
                assert!(f.req_ns >= 1 && f.page_ns >= 1);
                assert!(!d.join("fraglab-read-device-fit").exists(), "the file is removed");
            }
            // Only a file system without O_DIRECT (tmpfs: EINVAL at open) may skip it.
            Err(e) => {
                assert!(e.to_string().contains("Invalid argument"), "{e}");
                eprintln!("skipped: {e}");
            }
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
