//! `fraglab tune`: the Python package's knob search (`python3 -m fraglab.tune`), run with the
//! arguments as given and its exit code passed through. The search itself (Ray Tune or local
//! threads) is in crates/py/python/fraglab/_tune.py.

use std::process::{Command, ExitCode};

/// The Python to run: `$FRAGLAB_PYTHON`, else `python3` on PATH.
fn python() -> String {
    std::env::var("FRAGLAB_PYTHON").unwrap_or_else(|_| "python3".into())
}

pub fn tune(args: &[String]) -> ExitCode {
    let py = python();
    let probe = Command::new(&py).args(["-c", "import fraglab.tune"]).output();
    match probe {
        Err(e) => {
            eprintln!(
                "fraglab tune: cannot run {py} ({e}): tune needs Python 3 with the fraglab package \
                 (pip install ./crates/py; FRAGLAB_PYTHON names another interpreter)"
            );
            return ExitCode::FAILURE;
        }
        Ok(o) if !o.status.success() => {
            eprintln!(
                "fraglab tune: `{py} -c \"import fraglab.tune\"` failed: install the Python package \
                 (pip install ./crates/py, and 'ray[tune]' for the Ray backend), or set \
                 FRAGLAB_PYTHON to a Python that has it\n{}",
                String::from_utf8_lossy(&o.stderr).trim_end()
            );
            return ExitCode::FAILURE;
        }
        Ok(_) => {}
    }
    // Ctrl-C goes to the whole foreground group: the search stops and says so itself (exit 130),
    // this process waits for it. A handled signal is reset to its default in the child at exec,
    // where an ignored one would stay ignored.
    extern "C" fn ignore(_: libc::c_int) {}
    // SAFETY: installs a handler that does nothing (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, ignore as *const () as libc::sighandler_t);
    }
    match Command::new(&py).args(["-m", "fraglab.tune"]).args(args).status() {
        Ok(st) => match st.code() {
            Some(c) => ExitCode::from(c.clamp(0, 255) as u8),
            // Killed by a signal (Ctrl-C reaches the child too): 128 + the signal, as a shell says.
            None => {
                use std::os::unix::process::ExitStatusExt;
                ExitCode::from(128u8.wrapping_add(st.signal().unwrap_or(0) as u8))
            }
        },
        Err(e) => {
            eprintln!("fraglab tune: cannot run {py} -m fraglab.tune: {e}");
            ExitCode::FAILURE
        }
    }
}
