//! SIGINT/SIGTERM during a run: a flag the run loop checks (then it stops the workload, restores
//! the knobs and returns [`crate::HostError::Interrupted`]).
//!
//! Installed with sigaction(2) and put back exactly as it was when the run ends (signal-hook's
//! `unregister` leaves its own handler installed, which would keep ignoring SIGTERM after the
//! run). The handler only stores to an atomic, which is async-signal-safe.

use std::sync::atomic::{AtomicI32, Ordering};

/// The last caught signal, 0 if none.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    CAUGHT.store(sig, Ordering::SeqCst);
}

/// While alive, SIGINT and SIGTERM set the flag instead of killing the process.
pub struct SignalFlag {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

impl SignalFlag {
    pub fn install() -> SignalFlag {
        CAUGHT.store(0, Ordering::SeqCst);
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
        SignalFlag { old }
    }

    /// The signal caught since [`SignalFlag::install`], if any.
    pub fn caught(&self) -> Option<i32> {
        match CAUGHT.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

impl Drop for SignalFlag {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restoring the disposition saved by install().
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
    }
}

/// In a forked workload process: the default dispositions again (a terminal's Ctrl-C then ends
/// the workers directly; the parent sees its flag and restores).
pub(crate) fn reset_in_child() {
    for sig in SIGNALS {
        // SAFETY: plain signal(2) call with SIG_DFL.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}
