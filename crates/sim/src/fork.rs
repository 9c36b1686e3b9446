//! Warm forks (issue 37): run a spec's warm-up once, then continue it under several settings.
//!
//! [`run_workload_forked`] runs the first configuration up to simulated time T. At the
//! engine's first tick at or after T it `fork(2)`s one process per other configuration.
//! Each child applies its configuration's settings to the model (`Mm::apply_settings`: the
//! sysctl writes and a fresh policy) and runs on to the end; the parent runs on with the
//! first configuration unchanged. Copy-on-write makes each fork cost only the pages it
//! touches afterwards, and the children run in parallel on the machine's CPUs. Each child
//! writes its result to a file in a private temporary directory and leaves with `_exit`; the
//! parent waits for them and reads the files.
//!
//! The fork is the whole process's state, the engine's tasks, generators and random streams
//! included. So a child whose settings equal the first configuration's gives the result of
//! the uninterrupted run, byte for byte (tested on every generator by the
//! command line's `tests/fork.rs`, which runs `fraglab compare --fork-at`). A fork is not a file: nothing outlives the call, and a later call runs
//! the warm-up again.
//!
//! Limits:
//! - Linux only. The process must have one thread when the fork happens: a fork copies only
//!   the calling thread, and a lock held by another thread would stay locked in the child.
//!   The call refuses to fork otherwise.
//! - The configurations may differ only in their knobs and in the `[model]` switches that
//!   are settings of the model (`policy`, `folio_mode`, `defrag_stage`,
//!   `costly_order_policy`, `v4_position`). Everything else — machine, workload, run, cost,
//!   DAMON, the engine's own switches — must be the same, since the warm-up ran under the
//!   first configuration's.
//! - A spec that boots a snapshot forks too: each configuration's settings are its knobs, else
//!   the snapshot's, as at boot (`boot::boot_config`).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use fraglab_mm::config::MmConfig;
use fraglab_spec::result::RunResult;
use fraglab_spec::Spec;

use crate::error::RunError;

/// The `[model]` switches that are settings of the model, which a forked configuration may
/// change.
pub const FORKABLE_MODEL_KEYS: &[&str] = &[
    "policy",
    "folio_mode",
    "defrag_stage",
    "costly_order_policy",
    "v4_position",
];

/// What must be equal between a run and a warm fork or a checkpoint's continuation of it:
/// each section of `spec` (by name) as its `Debug` text without spec lines, with the
/// settings a fork may change ([`settings_fingerprint`]) and the checkpoint keys
/// (`[machine] checkpoint`, `[run] checkpoint_at`) left out.
pub fn fingerprint(spec: &Spec) -> BTreeMap<String, String> {
    let mut v = spec.clone();
    v.knobs = Default::default();
    v.model.policy = String::new();
    v.model.policy_line = 0;
    v.model.folio_mode = Default::default();
    v.model.defrag_stage = Default::default();
    v.model.costly_order_policy = Default::default();
    v.model.v4_position = Default::default();
    v.machine.checkpoint = None;
    v.run.checkpoint = None;
    let text = |a: &dyn std::fmt::Debug| without_lines(&format!("{a:?}"));
    [
        ("machine", text(&v.machine)),
        ("model", text(&v.model)),
        ("run", text(&v.run)),
        ("workload", text(&v.workload)),
        ("ops", text(&v.ops)),
        ("damon", text(&v.damon)),
        ("cost", text(&v.cost)),
        ("host", text(&v.host)),
    ]
    .into_iter()
    .map(|(k, t)| (k.to_string(), t))
    .collect()
}

/// The settings of `spec` a fork or a checkpoint's continuation may change: its knobs and
/// the model's policy switches, as text without spec lines.
pub fn settings_fingerprint(spec: &Spec) -> String {
    let m = &spec.model;
    without_lines(&format!(
        "{:?} {:?} {:?} {:?} {:?} {:?}",
        spec.knobs, m.policy, m.folio_mode, m.defrag_stage, m.costly_order_policy, m.v4_position
    ))
}

/// The first section of `have` that differs from `want`'s.
pub fn first_difference<'a>(
    want: &'a BTreeMap<String, String>,
    have: &BTreeMap<String, String>,
) -> Option<&'a str> {
    want.iter()
        .find(|(k, v)| have.get(k.as_str()) != Some(v))
        .map(|(k, _)| k.as_str())
}

/// Checks that `variant` differs from `base` only where a fork may change it (module doc);
/// the error names the variant's file and what differs.
pub fn check_forkable(base: &Spec, variant: &Spec) -> Result<(), RunError> {
    if let Some(what) = first_difference(&fingerprint(base), &fingerprint(variant)) {
        return Err(RunError(format!(
            "{}: a warm fork continues the first configuration's run: only knobs and [model] {} \
             may differ from it, not [{what}]",
            variant.file,
            FORKABLE_MODEL_KEYS.join(", ")
        )));
    }
    Ok(())
}

/// `text` (a value's `Debug` form) with the number after every field named `line` or ending in
/// `_line` replaced by `_`.
fn without_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("line: ") {
        let key_start = rest[..i]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |j| j + 1);
        let key = &rest[key_start..i + 4];
        let after = &rest[i + 6..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        out.push_str(&rest[..i + 6]);
        if (key == "line" || key.ends_with("_line")) && digits > 0 {
            out.push('_');
            rest = &after[digits..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The number of threads of this process (`/proc/self/status`).
fn threads() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A private directory for the children's results, removed when dropped.
struct ResultDir(PathBuf);

impl ResultDir {
    fn new() -> Result<ResultDir, RunError> {
        let base = std::env::temp_dir();
        for i in 0..100u32 {
            let p = base.join(format!("fraglab-fork-{}-{i}", std::process::id()));
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(ResultDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(RunError(format!("{}: {e}", p.display()))),
            }
        }
        Err(RunError(format!(
            "{}: no free name for a result directory",
            base.display()
        )))
    }

    fn file(&self, i: usize) -> PathBuf {
        self.0.join(format!("{i}.json"))
    }
}

impl Drop for ResultDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a child writes: its result, or its error.
#[derive(serde::Serialize, serde::Deserialize)]
enum ChildOutcome {
    Ok(Box<RunResult>),
    Err(String),
}

fn write_outcome(path: &Path, o: &ChildOutcome) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(o).map_err(std::io::Error::other)?)?;
    std::fs::rename(&tmp, path)
}

/// Runs `configs[0]` to `at_ns` and forks the others from there (module doc). Returns one
/// result (or error) per configuration, in order; `fork_at_ns` is set on each. The error of
/// the whole call: a configuration that may not be forked, too many threads, a run that ended
/// before `at_ns`, or the first configuration's own failure before the fork.
pub fn run_workload_forked(
    configs: &[Spec],
    at_ns: u64,
) -> Result<Vec<Result<RunResult, RunError>>, RunError> {
    let base = configs
        .first()
        .ok_or_else(|| RunError("no configuration".into()))?;
    let w = base
        .workload
        .as_ref()
        .ok_or_else(|| RunError(format!("{}: no [workload] to run", base.file)))?;
    if at_ns >= w.duration_ns {
        return Err(RunError(format!(
            "{}: the fork at {:.3} s is not before the run's end ({:.3} s)",
            base.file,
            at_ns as f64 / 1e9,
            w.duration_ns as f64 / 1e9
        )));
    }
    for v in &configs[1..] {
        check_forkable(base, v)?;
    }
    let cfgs: Vec<MmConfig> = configs
        .iter()
        .map(crate::boot::boot_config)
        .collect::<Result<_, _>>()?;
    match threads() {
        Some(1) => {}
        n => {
            return Err(RunError(format!(
                "a warm fork needs a process with one thread (this one has {}): run it from \
                 the command line (`fraglab compare --fork-at`)",
                n.map_or("an unknown number of".to_string(), |n| n.to_string())
            )))
        }
    }
    let dir = ResultDir::new()?;
    let role: Rc<Cell<Option<usize>>> = Rc::new(Cell::new(None));
    let children: Rc<RefCell<Vec<(usize, libc::pid_t)>>> = Rc::new(RefCell::new(Vec::new()));
    let fork_errors: Rc<RefCell<Vec<(usize, String)>>> = Rc::new(RefCell::new(Vec::new()));
    let n = configs.len();
    let result = {
        let (role, children, fork_errors) = (role.clone(), children.clone(), fork_errors.clone());
        let cfgs = cfgs.clone();
        let mut setup = move |e: &mut crate::engine::Engine| {
            let (role, children, fork_errors) = (role.clone(), children.clone(), fork_errors.clone());
            let cfgs = cfgs.clone();
            e.on_tick(Box::new(move |now, mm| {
                if role.get().is_some() || now < at_ns {
                    return;
                }
                use std::io::Write;
                let _ = std::io::stdout().flush();
                let _ = std::io::stderr().flush();
                for (i, cfg) in cfgs.iter().enumerate().skip(1) {
                    // SAFETY: the process has one thread (checked before the run); the child
                    // goes on with this thread's state only.
                    match unsafe { libc::fork() } {
                        0 => {
                            role.set(Some(i));
                            mm.apply_settings(cfg);
                            return;
                        }
                        pid if pid > 0 => children.borrow_mut().push((i, pid)),
                        _ => fork_errors
                            .borrow_mut()
                            .push((i, format!("fork: {}", std::io::Error::last_os_error()))),
                    }
                }
                role.set(Some(0));
            }));
        };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::timed::run_workload_hooked(base, &mut |_| {}, &mut |_| {}, &mut setup)
        }))
    };
    match role.get() {
        Some(i) if i > 0 => {
            // A child: hand the outcome over and leave without running the parent's code.
            let o = match result {
                Ok(Ok(mut r)) => {
                    r.fork_at_ns = Some(at_ns);
                    ChildOutcome::Ok(Box::new(r))
                }
                Ok(Err(e)) => ChildOutcome::Err(e.to_string()),
                Err(p) => ChildOutcome::Err(format!("the run panicked: {}", panic_text(&p))),
            };
            let code = match write_outcome(&dir.file(i), &o) {
                Ok(()) => 0,
                Err(_) => 1,
            };
            // SAFETY: `_exit` ends the child at once: no destructor of the parent's state (the
            // result directory above included) runs twice.
            unsafe { libc::_exit(code) }
        }
        _ => {}
    }
    let mut own = match result {
        Ok(r) => r,
        Err(p) => std::panic::resume_unwind(p),
    };
    let mut out: Vec<Option<Result<RunResult, RunError>>> = (0..n).map(|_| None).collect();
    for (i, pid) in children.borrow().iter() {
        let mut status = 0;
        // SAFETY: waiting for a child this call forked.
        unsafe { libc::waitpid(*pid, &mut status, 0) };
        let text = std::fs::read(dir.file(*i));
        out[*i] = Some(match text {
            Ok(t) => match serde_json::from_slice::<ChildOutcome>(&t) {
                Ok(ChildOutcome::Ok(r)) => Ok(*r),
                Ok(ChildOutcome::Err(e)) => Err(RunError(e)),
                Err(e) => Err(RunError(format!(
                    "{}: the forked run's result: {e}",
                    configs[*i].file
                ))),
            },
            Err(_) => Err(RunError(format!(
                "{}: the forked run ended without a result (wait status {status})",
                configs[*i].file
            ))),
        });
    }
    for (i, e) in fork_errors.borrow().iter() {
        out[*i] = Some(Err(RunError(format!("{}: {e}", configs[*i].file))));
    }
    if role.get().is_none() {
        let own = own?;
        return Err(RunError(format!(
            "{}: the run ended at {:.3} s, before the fork at {:.3} s",
            base.file,
            own.duration_ns as f64 / 1e9,
            at_ns as f64 / 1e9
        )));
    }
    if let Ok(r) = own.as_mut() {
        r.fork_at_ns = Some(at_ns);
    }
    out[0] = Some(own);
    Ok(out
        .into_iter()
        .map(|o| o.expect("every configuration has an outcome"))
        .collect())
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
