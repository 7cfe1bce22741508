//! Redis's software watchdog (the hidden `watchdog-period` directive, a debugging aid): when the
//! executor goes longer than the period without finishing a cron tick (one command, a script or
//! a load running all that time), the log gets Redis's `--- WATCHDOG TIMER EXPIRED ---` report
//! with the stack of the executor thread at that moment.
//!
//! Redis arms a one-shot SIGALRM timer (setitimer) from every serverCron and on CONFIG SET; the
//! signal interrupts the main thread wherever it is stuck and its handler logs the report. We
//! keep that shape with a deadline instead of the process-wide timer (which would signal any
//! thread): the cron pushes the deadline forward (`feed`), a small thread sleeps until it, and
//! on expiry sends SIGALRM to the thread that fed it last, whose handler logs the report from
//! there, so the stack trace is the executor's. Like the timer, it fires once per stall: only
//! the next `feed` arms it again.
//!
//! Owns: the deadline, the watcher thread and the SIGALRM handler. Knows nothing of the
//! executor; the executor calls `feed` from its cron, CONFIG SET and startup call `apply`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::config::Config;

/// The period in milliseconds; 0 when the watchdog is off.
static PERIOD_MS: AtomicU64 = AtomicU64::new(0);
/// When the watchdog fires, in milliseconds since `EPOCH` (plus one, so 0 means disarmed).
static DEADLINE: AtomicU64 = AtomicU64::new(0);
/// The thread that fed the watchdog last (a `pthread_t`), which the signal is sent to.
static TARGET: AtomicU64 = AtomicU64::new(0);
static EPOCH: OnceLock<Instant> = OnceLock::new();
static WATCHER: OnceLock<std::thread::Thread> = OnceLock::new();

fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// Applies `watchdog-period` from `cfg`, as Redis's applyWatchdogPeriod: 0 stops the watchdog
/// (and ignores SIGALRM, dropping one pending); a period under two cron periods is raised to
/// that, in the config too (CONFIG GET shows the raised value), since a shorter one would fire
/// between two healthy ticks. An armed watchdog gets the new period at once.
pub fn apply(cfg: &mut Config) {
    let period = cfg.watchdog_period();
    if period == 0 {
        PERIOD_MS.store(0, Ordering::Relaxed);
        DEADLINE.store(0, Ordering::Relaxed);
        set_handler(false);
        return;
    }
    let min = (1000 / cfg.hz.clamp(1, 500) as u64) * 2;
    let period = if period < min {
        let _ = cfg.set("watchdog-period", &[min.to_string()]);
        min
    } else {
        period
    };
    set_handler(true);
    PERIOD_MS.store(period, Ordering::Relaxed);
    feed();
}

/// Pushes the deadline a period ahead and records the calling thread as the one to report on.
/// Called from every cron tick; one atomic load when the watchdog is off.
pub fn feed() {
    let period = PERIOD_MS.load(Ordering::Relaxed);
    if period == 0 {
        return;
    }
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    TARGET.store(me, Ordering::Relaxed);
    let was = DEADLINE.swap(now_ms() + period, Ordering::AcqRel);
    let watcher = WATCHER.get_or_init(|| {
        std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(watch)
            .map(|h| h.thread().clone())
            .unwrap_or_else(|_| std::thread::current())
    });
    // A disarmed watcher sleeps until woken; an armed one wakes at the old deadline by itself.
    if was == 0 {
        watcher.unpark();
    }
}

/// The watcher thread: sleeps until the deadline; if no feed moved it meanwhile, disarms it and
/// signals the last feeder.
fn watch() {
    loop {
        let deadline = DEADLINE.load(Ordering::Acquire);
        if deadline == 0 {
            std::thread::park();
            continue;
        }
        let now = now_ms();
        if now < deadline {
            std::thread::park_timeout(Duration::from_millis(deadline - now));
            continue;
        }
        if DEADLINE.compare_exchange(deadline, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
            && PERIOD_MS.load(Ordering::Relaxed) > 0
        {
            let target = TARGET.load(Ordering::Relaxed) as libc::pthread_t;
            // SAFETY: target is a thread that called feed; the executor thread lives as long as
            // the process serves, and a thread gone by now makes pthread_kill fail harmlessly.
            unsafe {
                libc::pthread_kill(target, libc::SIGALRM);
            }
        }
    }
}

/// Installs (or, with false, replaces by SIG_IGN) the SIGALRM handler. SA_RESTART, unlike
/// Redis: the signal lands on the executor thread, and a system call it interrupts resumes
/// instead of surfacing EINTR in code that has no reason to expect it.
fn set_handler(on: bool) {
    // backtrace(3) was primed at startup (log::install_crash_handler).
    // SAFETY: the sigaction struct is zeroed then filled as sigaction(2) documents; the handler
    // is an `extern "C"` function of the SA_SIGINFO signature.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        if on {
            action.sa_sigaction = on_alarm as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        } else {
            action.sa_sigaction = libc::SIG_IGN;
        }
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut());
    }
}

/// Redis's watchdogSignalHandler: the report, with the interrupted instruction and the stack.
extern "C" fn on_alarm(_sig: libc::c_int, _info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    crate::log::from_handler("\n--- WATCHDOG TIMER EXPIRED ---");
    crate::log::stack_trace_from_handler(crate::log::interrupted_at(context));
    crate::log::from_handler("--------\n");
}
