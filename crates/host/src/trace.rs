//! Optional tracepoint capture during a host run: compaction:* and kmem:mm_page_alloc_extfrag
//! (kernel-model.md §15) in a tracefs instance of our own, so that other users of the global
//! buffer are not disturbed; tracefs is mounted if it is not, and unmounted after.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::HostError;

const EVENTS: &[&str] = &["compaction", "kmem/mm_page_alloc_extfrag"];

pub struct Tracing {
    root: PathBuf,
    instance: PathBuf,
    mounted: bool,
}

fn tracefs_mount() -> Option<PathBuf> {
    std::fs::read_to_string("/proc/mounts")
        .ok()?
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && f[2] == "tracefs").then(|| PathBuf::from(f[1]))
        })
}

impl Tracing {
    pub fn start() -> Result<Tracing, HostError> {
        let (root, mounted) = match tracefs_mount() {
            Some(p) => (p, false),
            None => {
                let d = std::env::temp_dir().join(format!("fraglab-tracefs-{}", std::process::id()));
                std::fs::create_dir_all(&d).map_err(|e| HostError::Io(e.to_string()))?;
                let ok = std::process::Command::new("mount")
                    .args(["-t", "tracefs", "nodev"])
                    .arg(&d)
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    let _ = std::fs::remove_dir(&d);
                    return Err(HostError::Io("cannot mount tracefs".into()));
                }
                (d, true)
            }
        };
        let instance = root
            .join("instances")
            .join(format!("fraglab-{}", std::process::id()));
        std::fs::create_dir(&instance).map_err(|e| HostError::Io(format!("{}: {e}", instance.display())))?;
        let _ = std::fs::write(instance.join("buffer_size_kb"), "16384");
        for e in EVENTS {
            std::fs::write(instance.join("events").join(e).join("enable"), "1")
                .map_err(|err| HostError::Io(format!("enabling {e}: {err}")))?;
        }
        let _ = std::fs::write(instance.join("tracing_on"), "1");
        Ok(Tracing {
            root,
            instance,
            mounted,
        })
    }

    /// Stops, counts the recorded events per name, removes the instance and unmounts what was
    /// mounted.
    pub fn stop(self) -> BTreeMap<String, u64> {
        let _ = std::fs::write(self.instance.join("tracing_on"), "0");
        let text = std::fs::read_to_string(self.instance.join("trace")).unwrap_or_default();
        let mut counts = BTreeMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            if let Some(ev) = line.split(": ").nth(1) {
                if ev.starts_with("mm_") {
                    *counts.entry(ev.to_string()).or_insert(0) += 1;
                }
            }
        }
        for e in EVENTS {
            let _ = std::fs::write(self.instance.join("events").join(e).join("enable"), "0");
        }
        let _ = std::fs::remove_dir(&self.instance);
        if self.mounted {
            let _ = std::process::Command::new("umount").arg(&self.root).status();
            let _ = std::fs::remove_dir(&self.root);
        }
        counts
    }
}
