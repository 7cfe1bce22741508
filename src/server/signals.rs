//! What SIGINT and SIGTERM do inside the signal handler, as Redis's sigShutdownHandler: log the
//! arrival (in the handler's own line shape, `log::from_handler`) and raise `SHUTDOWN_ASAP`; the
//! shutdown itself runs later, from the runtime (`serve`'s signal loop). A SIGINT that arrives
//! while a shutdown is pending, typically during its final save, which holds the only thread
//! in io-threads 1 mode, means "now": the temp RDB file is removed and the process exits 1
//! from the handler, so a user's second Ctrl+C is never stuck behind a long save.
//!
//! Only async-signal-safe calls here: atomics, getpid, unlink, _exit and `log::from_handler`.

use std::sync::atomic::Ordering;

use crate::executor::SHUTDOWN_ASAP;

/// Registers the handlers (next to tokio's, which wake the runtime's signal loop).
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the action only makes async-signal-safe calls (see the module header).
        let registered = unsafe { signal_hook_registry::register(sig, move || on_signal(sig)) };
        if let Err(e) = registered {
            tracing::warn!("Failed installing the handler of signal {sig}: {e}");
        }
    }
}

fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGINT && SHUTDOWN_ASAP.load(Ordering::Acquire) {
        crate::log::from_handler("You insist... exiting now.");
        remove_temp_rdb();
        // SAFETY: _exit is async-signal-safe; nothing else may run after this point.
        unsafe { libc::_exit(1) };
    }
    crate::log::from_handler(if sig == libc::SIGINT {
        "Received SIGINT scheduling shutdown..."
    } else {
        "Received SIGTERM scheduling shutdown..."
    });
    SHUTDOWN_ASAP.store(true, Ordering::Release);
}

/// Unlinks `temp-<pid>.rdb` in the working directory (the foreground save's file), building
/// the name on the stack.
fn remove_temp_rdb() {
    let mut name = [0u8; 40];
    let mut pid = itoa::Buffer::new();
    // SAFETY: getpid is async-signal-safe.
    let pid = pid.format(unsafe { libc::getpid() });
    let mut len = 0;
    for part in [b"temp-".as_slice(), pid.as_bytes(), b".rdb"] {
        name[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    // SAFETY: `name` is NUL-terminated (zeroed past `len`, which is at most 5 + 11 + 4 bytes).
    unsafe { libc::unlink(name.as_ptr() as *const libc::c_char) };
}
