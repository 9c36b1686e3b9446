//! Kernel knobs on the live system: their real paths, reading and writing them, and a guard
//! that restores every knob it changed — on drop (normal end, error, panic unwinding), and, for
//! a run killed with SIGKILL, from a state file written before anything is changed.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::HostError;

/// The file behind a knob name of the spec: `vm.x` → /proc/sys/vm/x, `transparent_hugepage/...`
/// → /sys/kernel/mm/transparent_hugepage/...
pub fn knob_path(name: &str) -> PathBuf {
    match name.strip_prefix("vm.") {
        Some(rest) => PathBuf::from("/proc/sys/vm").join(rest),
        None => PathBuf::from("/sys/kernel/mm").join(name),
    }
}

/// A knob's current value as the spec writes it: sysfs choice files print every choice with the
/// active one in brackets (`always [madvise] never`); sysctl lists are whitespace-separated.
pub fn read_knob(name: &str) -> Result<String, HostError> {
    let path = knob_path(name);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| HostError::Knob(name.into(), format!("{}: {e}", path.display())))?;
    let text = text.trim();
    if let (Some(a), Some(b)) = (text.find('['), text.find(']')) {
        if a < b {
            return Ok(text[a + 1..b].to_string());
        }
    }
    Ok(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

pub fn write_knob(name: &str, value: &str) -> Result<(), HostError> {
    let path = knob_path(name);
    std::fs::write(&path, value).map_err(|e| {
        HostError::Knob(
            name.into(),
            format!("writing {value:?} to {}: {e}", path.display()),
        )
    })
}

/// Every knob changed by a run, with its value before; restores them when dropped.
pub struct KnobGuard {
    saved: Vec<(String, String)>,
    state_file: PathBuf,
    restored: bool,
}

impl KnobGuard {
    /// Records the current value of every knob in `wanted` into `state_file` (created before
    /// any change), then applies `wanted`.
    pub fn apply(wanted: &[(String, String)], state_file: &Path) -> Result<KnobGuard, HostError> {
        let mut saved = Vec::new();
        for (name, _) in wanted {
            saved.push((name.clone(), read_knob(name)?));
        }
        let mut f = std::fs::File::create(state_file)
            .map_err(|e| HostError::Io(format!("{}: {e}", state_file.display())))?;
        for (n, v) in &saved {
            writeln!(f, "{n}\t{v}").map_err(|e| HostError::Io(e.to_string()))?;
        }
        f.sync_all().map_err(|e| HostError::Io(e.to_string()))?;
        let guard = KnobGuard {
            saved,
            state_file: state_file.to_path_buf(),
            restored: false,
        };
        for (name, value) in wanted {
            write_knob(name, value)?;
        }
        Ok(guard)
    }

    pub fn saved(&self) -> &[(String, String)] {
        &self.saved
    }

    /// Writes every saved value back (in reverse order) and removes the state file. Errors are
    /// collected, and every knob is tried.
    pub fn restore(&mut self) -> Result<(), HostError> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let mut errors = Vec::new();
        for (n, v) in self.saved.iter().rev() {
            if let Err(e) = write_knob(n, v) {
                errors.push(e.to_string());
            }
        }
        if errors.is_empty() {
            std::fs::remove_file(&self.state_file).ok();
            Ok(())
        } else {
            Err(HostError::Knob("restore".into(), errors.join("; ")))
        }
    }
}

impl Drop for KnobGuard {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!(
                "fraglab host: {e} (the values before are in {})",
                self.state_file.display()
            );
        }
    }
}

/// Restores the knobs recorded in a state file left by a run that was killed (SIGKILL), then
/// removes it. Returns the knobs restored.
pub fn restore_from_state_file(path: &Path) -> Result<Vec<(String, String)>, HostError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| HostError::Io(format!("{}: {e}", path.display())))?;
    let mut done = Vec::new();
    for line in text.lines().rev() {
        if let Some((n, v)) = line.split_once('\t') {
            write_knob(n, v)?;
            done.push((n.to_string(), v.to_string()));
        }
    }
    std::fs::remove_file(path).map_err(|e| HostError::Io(format!("{}: {e}", path.display())))?;
    Ok(done)
}
