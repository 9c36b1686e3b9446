//! SIGINT/SIGTERM for the simulator's long commands (`compare`): the first signal asks the
//! command to stop starting work and finish what runs (a flag it polls); a second one abandons
//! the running work — the default disposition is put back and the signal raised again, so the
//! process ends as an interrupted process does.
//!
//! Installed with sigaction(2) and put back exactly as it was by the guard's drop. The handler
//! only touches atomics and calls sigaction/raise, which are async-signal-safe.

use std::sync::atomic::{AtomicU32, Ordering};

/// Signals caught since [`Interrupts::install`].
static COUNT: AtomicU32 = AtomicU32::new(0);
/// The last one (its number), 0 if none.
static LAST: AtomicU32 = AtomicU32::new(0);

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

extern "C" fn on_signal(sig: libc::c_int) {
    LAST.store(sig as u32, Ordering::SeqCst);
    if COUNT.fetch_add(1, Ordering::SeqCst) >= 1 {
        // SAFETY: sigaction with SIG_DFL and raise are async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
            libc::raise(sig);
        }
    }
}

/// While alive, the first SIGINT or SIGTERM sets a flag instead of ending the process.
pub struct Interrupts {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl Interrupts {
    pub fn install() -> Interrupts {
        COUNT.store(0, Ordering::SeqCst);
        LAST.store(0, Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in SIGNALS {
            // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
                libc::sigemptyset(&mut sa.sa_mask);
                sa.sa_flags = libc::SA_RESTART;
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &sa, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Interrupts { old }
    }

    /// The signal caught since [`Interrupts::install`], if any.
    pub fn caught(&self) -> Option<i32> {
        match COUNT.load(Ordering::SeqCst) {
            0 => None,
            _ => Some(LAST.load(Ordering::SeqCst) as i32),
        }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restoring the disposition saved by install().
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
    }
}

/// A signal's name for messages.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}
