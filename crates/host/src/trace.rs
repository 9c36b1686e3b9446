//! Optional tracepoint capture in a private tracefs instance (Documentation/trace/ftrace.rst,
//! "Instances"): tracefs is used where /proc/mounts shows it, else mounted at a temporary
//! directory (`mount -t tracefs nodev DIR`, mount(2)); a private instance
//! `instances/fraglab-host-<pid>` gets the events enabled and its own buffer, so other users of
//! the global buffer are not disturbed. A reader thread drains the instance's `trace_pipe`,
//! counts events by name and keeps the first bytes of the text. Stopping disables the events,
//! removes the instance and unmounts what was mounted.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::HostError;

/// The events recorded when the spec names none: `compaction:*` and
/// `kmem:mm_page_alloc_extfrag`.
pub const DEFAULT_EVENTS: &[&str] = &["compaction:*", "kmem:mm_page_alloc_extfrag"];

/// The tracefs mount point from /proc/mounts, if tracefs is mounted.
pub fn tracefs_mount() -> Option<PathBuf> {
    let m = std::fs::read_to_string("/proc/mounts").ok()?;
    m.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == "tracefs").then(|| PathBuf::from(f[1]))
    })
}

#[derive(Default)]
struct Captured {
    counts: BTreeMap<String, u64>,
    text: String,
    partial: String,
}

/// A running capture.
pub struct TraceSession {
    mounted: Option<PathBuf>,
    instance: PathBuf,
    enabled: Vec<PathBuf>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    data: Arc<Mutex<Captured>>,
    finished: bool,
}

/// The event name of one trace_pipe line (`  comm-12  [001] ..... 12.345678: mm_compaction_end: ...`).
fn event_name(line: &str) -> Option<&str> {
    // The timestamp is the token before the event; it ends with ':' and is a number.
    let mut it = line.split_whitespace();
    while let Some(tok) = it.next() {
        if let Some(ts) = tok.strip_suffix(':') {
            if !ts.is_empty() && ts.bytes().all(|b| b.is_ascii_digit() || b == b'.') && ts.contains('.') {
                return it.next().map(|e| e.trim_end_matches(':'));
            }
        }
    }
    None
}

/// Writes a tracefs control file.
pub(crate) fn write(path: &Path, v: &str) -> Result<(), HostError> {
    std::fs::write(path, v).map_err(|e| HostError::io(path.display().to_string(), e))
}

/// The tracefs root to use: the mount /proc/mounts shows, else tracefs mounted at
/// `/run/NAME` (returned second, for [`unmount_private`] when the session ends).
pub(crate) fn tracefs_root(name: &str) -> Result<(PathBuf, Option<PathBuf>), HostError> {
    if let Some(r) = tracefs_mount() {
        return Ok((r, None));
    }
    let dir = PathBuf::from("/run").join(name);
    std::fs::create_dir_all(&dir).map_err(|e| HostError::io(dir.display().to_string(), e))?;
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, tgt, ty) = (c("nodev"), c(&dir.to_string_lossy()), c("tracefs"));
    // SAFETY: valid C strings; no mount data.
    let r = unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_dir(&dir);
        return Err(HostError::io("mount tracefs", e));
    }
    Ok((dir.clone(), Some(dir)))
}

/// Unmounts a tracefs that [`tracefs_root`] mounted and removes its directory (a failure is
/// reported on standard error: this runs on the way out).
pub(crate) fn unmount_private(dir: &Path) {
    let c = std::ffi::CString::new(dir.to_string_lossy().as_bytes()).expect("no NUL");
    // SAFETY: unmounting the tracefs this process mounted.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        let _ = std::fs::remove_dir(dir);
    } else {
        eprintln!(
            "fraglab-host: cannot unmount {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
    }
}

impl TraceSession {
    /// Starts capturing `events` (`group:name` or `group:*`), keeping at most `keep_bytes` of
    /// trace text.
    pub fn start(events: &[String], keep_bytes: usize) -> Result<TraceSession, HostError> {
        let pid = std::process::id();
        let (root, mounted) = tracefs_root(&format!("fraglab-host-tracefs-{pid}"))?;
        let instance = root.join("instances").join(format!("fraglab-host-{pid}"));
        let mut s = TraceSession {
            mounted,
            instance: instance.clone(),
            enabled: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            reader: None,
            data: Arc::new(Mutex::new(Captured::default())),
            finished: false,
        };
        std::fs::create_dir(&instance).map_err(|e| HostError::io(instance.display().to_string(), e))?;
        let _ = write(&instance.join("buffer_size_kb"), "4096");
        for ev in events {
            let (group, name) = ev.split_once(':').unwrap_or(("", ev));
            let p = if name == "*" {
                instance.join("events").join(group).join("enable")
            } else {
                instance.join("events").join(group).join(name).join("enable")
            };
            write(&p, "1")?;
            s.enabled.push(p);
        }
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(instance.join("trace_pipe"))
            .map_err(|e| HostError::io("trace_pipe", e))?;
        let (stop, data) = (s.stop.clone(), s.data.clone());
        s.reader = Some(std::thread::spawn(move || reader(pipe, stop, data, keep_bytes)));
        Ok(s)
    }

    /// The instance directory and the mount point this session made (if any).
    pub fn leftovers(&self) -> (PathBuf, Option<PathBuf>) {
        (self.instance.clone(), self.mounted.clone())
    }

    /// Stops the capture and cleans up; returns the event counts and the kept text.
    pub fn finish(mut self) -> (BTreeMap<String, u64>, String) {
        self.cleanup();
        let d = std::mem::take(&mut *self.data.lock().expect("reader never panics holding it"));
        (d.counts, d.text)
    }

    fn cleanup(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        for p in &self.enabled {
            let _ = write(p, "0");
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
        if let Err(e) = std::fs::remove_dir(&self.instance) {
            eprintln!("fraglab-host: cannot remove {}: {e}", self.instance.display());
        }
        if let Some(dir) = self.mounted.take() {
            unmount_private(&dir);
        }
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        self.cleanup();
    }
}

fn reader(mut pipe: std::fs::File, stop: Arc<AtomicBool>, data: Arc<Mutex<Captured>>, keep: usize) {
    let mut buf = vec![0u8; 64 << 10];
    let mut idle_after_stop = 0;
    loop {
        match pipe.read(&mut buf) {
            Ok(n) if n > 0 => {
                let mut d = data.lock().expect("only this thread writes");
                let chunk = String::from_utf8_lossy(&buf[..n]);
                let mut text = std::mem::take(&mut d.partial);
                text.push_str(&chunk);
                let complete = text.rfind('\n').map_or(0, |i| i + 1);
                for line in text[..complete].lines() {
                    if let Some(e) = event_name(line) {
                        *d.counts.entry(e.to_string()).or_default() += 1;
                    }
                    if d.text.len() + line.len() < keep {
                        d.text.push_str(line);
                        d.text.push('\n');
                    }
                }
                d.partial = text[complete..].to_string();
                continue;
            }
            _ => {
                if stop.load(Ordering::SeqCst) {
                    idle_after_stop += 1;
                    if idle_after_stop > 2 {
                        break;
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names() {
        let l = "          <idle>-0       [001] d..2.  1234.567890: mm_compaction_begin: zone_start=0x1000 migrate_pfn=0x1000";
        assert_eq!(event_name(l), Some("mm_compaction_begin"));
        let l = " kcompactd0-35 [000] ..... 88.000001: mm_compaction_kcompactd_sleep: nid=0";
        assert_eq!(event_name(l), Some("mm_compaction_kcompactd_sleep"));
        assert_eq!(event_name("garbage"), None);
    }
}
