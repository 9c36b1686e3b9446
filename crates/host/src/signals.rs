//! SIGINT/SIGTERM as a flag a loop polls: during a host run (then it stops the workload,
//! restores the knobs and returns [`crate::HostError::Interrupted`]) and during the simulator's
//! long commands (`compare`: no further run starts, the running ones finish and are written).
//!
//! Installed with sigaction(2) and put back exactly as it was when the guard drops (signal-hook's
//! `unregister` leaves its own handler installed, which would keep ignoring SIGTERM after the
//! run). The handler only touches atomics and, escalating, calls sigaction and raise: all
//! async-signal-safe.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};

/// The last caught signal, 0 if none.
static CAUGHT: AtomicI32 = AtomicI32::new(0);
/// Signals caught since the flag was installed.
static COUNT: AtomicU32 = AtomicU32::new(0);
/// [`SignalFlag::install_escalating`]: a second signal ends the process.
static ESCALATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    CAUGHT.store(sig, Ordering::SeqCst);
    if COUNT.fetch_add(1, Ordering::SeqCst) >= 1 && ESCALATE.load(Ordering::SeqCst) {
        // SAFETY: sigaction with SIG_DFL and raise are async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
            libc::raise(sig);
        }
    }
}

/// While alive, SIGINT and SIGTERM set the flag instead of ending the process.
pub struct SignalFlag {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

const SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGTERM];

impl SignalFlag {
    /// Every signal sets the flag (a host run must restore the machine whatever comes).
    pub fn install() -> SignalFlag {
        SignalFlag::install_with(false)
    }

    /// The first signal sets the flag; a second puts the default disposition back and raises
    /// itself again, so the process ends as an interrupted process does.
    pub fn install_escalating() -> SignalFlag {
        SignalFlag::install_with(true)
    }

    fn install_with(escalate: bool) -> SignalFlag {
        CAUGHT.store(0, Ordering::SeqCst);
        COUNT.store(0, Ordering::SeqCst);
        ESCALATE.store(escalate, Ordering::SeqCst);
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

/// A signal's name for messages.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
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
