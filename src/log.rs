//! Logging in Redis's line format, `pid:R dd Mon yyyy HH:MM:SS.mmm <mark> message`, through
//! tracing with our own `FormatEvent`. Levels map as Redis's: debug (`.`, tracing TRACE),
//! verbose (`-`, DEBUG), notice (`*`, INFO), warning (`#`, WARN and ERROR). Output goes to the
//! `logfile` (appended) or stdout when it is empty. The level is an atomic checked per event so
//! CONFIG SET loglevel takes effect at once; the role letter (`C` until the server is
//! initialized, then `M`) is an atomic too. With syslog-enabled, lines also go to syslog(3).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::{format::Writer, FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// 0 = debug, 1 = verbose, 2 = notice, 3 = warning.
static LEVEL: AtomicU8 = AtomicU8::new(2);
static ROLE: AtomicU8 = AtomicU8::new(b'C');

/// Formats events as Redis's serverLog does.
pub struct RedisFormat;

impl<S, N> FormatEvent<S, N> for RedisFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let mark = match *event.metadata().level() {
            Level::ERROR | Level::WARN => '#',
            Level::INFO => '*',
            Level::DEBUG => '-',
            Level::TRACE => '.',
        };
        let role = ROLE.load(Ordering::Relaxed) as char;
        write!(w, "{}:{} {} {} ", std::process::id(), role, timestamp(), mark)?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

fn level_rank(level: &Level) -> u8 {
    match *level {
        Level::TRACE => 0,
        Level::DEBUG => 1,
        Level::INFO => 2,
        Level::WARN | Level::ERROR => 3,
    }
}

/// Sets the level from a loglevel name (debug, verbose, notice, warning).
pub fn set_level(loglevel: &str) {
    let rank = match loglevel {
        "debug" => 0,
        "verbose" => 1,
        "warning" => 3,
        _ => 2,
    };
    if LEVEL.swap(rank, Ordering::Relaxed) != rank {
        // Each log line's call site caches whether the filter passes it (tracing's Interest):
        // without a rebuild, lines already logged kept logging at a higher level, and lines
        // first reached while filtered out stayed silent after a lower one.
        tracing::callsite::rebuild_interest_cache();
    }
}

/// Sets the role letter of later lines (`M` once the server is initialized).
pub fn set_role(role: char) {
    ROLE.store(role as u8, Ordering::Relaxed);
}

/// `30 Nov 2026 16:00:12.345` in local time.
pub fn timestamp() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    let millis = now.subsec_millis();
    // SAFETY: localtime_r writes into the tm we own; the pointers are valid for the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&secs, &mut tm) };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MONTHS[(tm.tm_mon.clamp(0, 11)) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        millis
    )
}

/// The pidfile a daemonized server removes when it crashes or panics, as Redis's bugReportEnd
/// does (a supervisor or init script would otherwise see a server that is gone).
static CRASH_PIDFILE: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// Names the pidfile to remove on a crash or panic (a daemonized, unsupervised server's).
pub fn remove_pidfile_on_crash(path: &str) {
    if let Ok(path) = std::ffi::CString::new(path) {
        let _ = CRASH_PIDFILE.set(path);
    }
}

/// unlink(2) of the crash pidfile, if any (async-signal-safe).
fn remove_crash_pidfile() {
    if let Some(path) = CRASH_PIDFILE.get() {
        // SAFETY: unlink of a NUL-terminated path that lives as long as the process.
        unsafe { libc::unlink(path.as_ptr()) };
    }
}

/// Applies the crash options and installs the panic hook (see `caught` and
/// `end_in_bug_report`); reports go where `init` sent the log.
pub fn install_crash_handler(crash_log: bool, exit_on_panic: bool) {
    // glibc's backtrace loads libgcc on its first call, which allocates: do it here, not first
    // in a signal handler.
    let mut frames = [std::ptr::null_mut::<libc::c_void>(); 1];
    // SAFETY: the buffer holds the one frame asked for.
    unsafe { libc::backtrace(frames.as_mut_ptr(), 1) };
    set_crash_options(crash_log, exit_on_panic);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if CAUGHT.with(|c| c.get()) > 0 {
            return default_hook(info);
        }
        let payload = info.payload();
        let msg = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
            (Some(s), _) => s,
            (_, Some(s)) => s.as_str(),
            _ => "(no message)",
        };
        let at = info.location().map_or_else(|| "?:0".to_string(), |l| format!("{}:{}", l.file(), l.line()));
        panic_report(msg, &at);
    }));
}

/// crash-log-enabled and use-exit-on-panic, at startup and after CONFIG SET.
pub fn set_crash_options(crash_log: bool, exit_on_panic: bool) {
    EXIT_ON_PANIC.store(exit_on_panic, Ordering::Relaxed);
    set_crash_log(crash_log);
}

/// use-exit-on-panic: a panic ends the process with exit status 1 instead of abort().
static EXIT_ON_PANIC: AtomicBool = AtomicBool::new(false);

/// crash-log-enabled as applied to the signal handlers: 0 not yet (Rust's runtime has its own
/// SIGSEGV handler then), 1 off, 2 on.
static CRASH_LOG_APPLIED: AtomicU8 = AtomicU8::new(0);

thread_local! {
    /// How many `caught` calls this thread is inside: their panics unwind to the caller.
    static CAUGHT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs `f`, catching a panic as `catch_unwind` does: for work whose failure its caller
/// handles (a snapshot child, an encoding thread). Any other panic is a bug that may have left
/// the keyspace half-changed, so the panic hook ends the process with Redis's bug report, as
/// Redis's serverAssert does, instead of letting the runtime drop one task and go on.
pub fn caught<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    CAUGHT.with(|c| c.set(c.get() + 1));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CAUGHT.with(|c| c.set(c.get() - 1));
    result
}

/// crash-log-enabled: with it, SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT go to the handler
/// that writes Redis's crash report ("crashed by signal") to the log and then lets the signal
/// kill the process with its default action (a core dump where enabled), as Redis's
/// sigsegvHandler does; without it they take their default action at once, as Redis removes its
/// handlers. Panics log their stack trace only with it.
fn set_crash_log(enabled: bool) {
    let want = if enabled { 2 } else { 1 };
    if CRASH_LOG_APPLIED.swap(want, Ordering::Relaxed) == want {
        return;
    }
    // SAFETY: the sigaction struct is zeroed then filled as sigaction(2) documents; the handler
    // is an `extern "C"` function of the expected SA_SIGINFO signature.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        if enabled {
            action.sa_sigaction = crash_handler as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND | libc::SA_NODEFER | libc::SA_ONSTACK;
        } else {
            action.sa_sigaction = libc::SIG_DFL;
        }
        libc::sigemptyset(&mut action.sa_mask);
        for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGABRT] {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

fn crash_log_on() -> bool {
    CRASH_LOG_APPLIED.load(Ordering::Relaxed) == 2
}

extern "C" fn crash_handler(sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // The process is going down: formatting allocates, which a signal handler should not, but a
    // report is worth the risk (Redis's own handler logs the same way).
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO handlers.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    let eip = interrupted_at(context);
    let prefix = |mark: char| {
        format!("{}:{} {} {} ", std::process::id(), ROLE.load(Ordering::Relaxed) as char, timestamp(), mark)
    };
    let mut head = String::new();
    head.push_str("\n\n=== REDIS BUG REPORT START: Cut & paste starting from here ===\n");
    head.push_str(&format!(
        "{}Redis {} crashed by signal: {sig}, si_code: {code}\n",
        prefix('#'),
        crate::REDIS_VERSION
    ));
    if matches!(sig, libc::SIGSEGV | libc::SIGBUS) {
        head.push_str(&format!("{}Accessing address: {addr:#x}\n", prefix('#')));
    }
    if code == libc::SI_USER || code == libc::SI_TKILL {
        // SAFETY: as above.
        let (pid, uid) = unsafe { ((*info).si_pid(), (*info).si_uid()) };
        head.push_str(&format!("{}Killed by PID: {pid}, UID: {uid}\n", prefix('#')));
    }
    if !eip.is_null() {
        head.push_str(&format!("{}Crashed running the instruction at: {:#x}\n", prefix('#'), eip as usize));
    }
    head.push_str(&format!("{}ferrodis {}\n", prefix('#'), crate::FERRODIS_VERSION));
    with_handler_log(|fd| write_all_fd(fd, head.as_bytes()));
    stack_trace_from_handler(eip);
    let registers = registers(context, &prefix('#'));
    with_handler_log(|fd| {
        write_all_fd(fd, registers.as_bytes());
        write_all_fd(fd, b"\n=== REDIS BUG REPORT END. Make sure to include from START to END. ===\n\n");
    });
    remove_crash_pidfile();
    // SAFETY: SA_RESETHAND restored the default action; raising the signal again ends the
    // process as the signal would have.
    unsafe {
        libc::raise(sig);
    }
}

/// The instruction a signal interrupted, from an SA_SIGINFO handler's ucontext (null when
/// unknown).
pub fn interrupted_at(context: *mut libc::c_void) -> *mut libc::c_void {
    if context.is_null() {
        return std::ptr::null_mut();
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        // SAFETY: for an SA_SIGINFO handler the kernel passes a valid ucontext_t.
        let uc = unsafe { &*(context as *const libc::ucontext_t) };
        uc.uc_mcontext.gregs[libc::REG_RIP as usize] as *mut libc::c_void
    }
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    {
        // SAFETY: as above.
        let uc = unsafe { &*(context as *const libc::ucontext_t) };
        uc.uc_mcontext.pc as *mut libc::c_void
    }
    #[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
        std::ptr::null_mut()
    }
}

/// Redis's logRegisters for x86-64 Linux: the `------ REGISTERS ------` block, then the 16
/// words at the stack pointer, highest first, each as `(address) -> word` (Redis adds the
/// index to the address as a byte count, and so do we). Empty elsewhere.
fn registers(context: *mut libc::c_void, prefix: &str) -> String {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    if !context.is_null() {
        use libc::*;
        // SAFETY: for an SA_SIGINFO handler the kernel passes a valid ucontext_t.
        let g = unsafe { &(*(context as *const ucontext_t)).uc_mcontext.gregs };
        let r = |i: c_int| g[i as usize] as u64;
        let mut out = format!(
            "\n------ REGISTERS ------\n{prefix}\n\
             RAX:{:016x} RBX:{:016x}\nRCX:{:016x} RDX:{:016x}\n\
             RDI:{:016x} RSI:{:016x}\nRBP:{:016x} RSP:{:016x}\n\
             R8 :{:016x} R9 :{:016x}\nR10:{:016x} R11:{:016x}\n\
             R12:{:016x} R13:{:016x}\nR14:{:016x} R15:{:016x}\n\
             RIP:{:016x} EFL:{:016x}\nCSGSFS:{:016x}\n",
            r(REG_RAX),
            r(REG_RBX),
            r(REG_RCX),
            r(REG_RDX),
            r(REG_RDI),
            r(REG_RSI),
            r(REG_RBP),
            r(REG_RSP),
            r(REG_R8),
            r(REG_R9),
            r(REG_R10),
            r(REG_R11),
            r(REG_R12),
            r(REG_R13),
            r(REG_R14),
            r(REG_R15),
            r(REG_RIP),
            r(REG_EFL),
            r(REG_CSGSFS),
        );
        let sp = r(REG_RSP) as *const u64;
        for i in (0..16).rev() {
            // SAFETY: the 16 words at the interrupted stack pointer are the live stack.
            let word = unsafe { std::ptr::read_volatile(sp.add(i)) };
            out.push_str(&format!("{prefix}({:016x}) -> {word:016x}\n", sp as u64 + i as u64));
        }
        return out;
    }
    let _ = (context, prefix);
    String::new()
}

/// Redis's serverPanic: the bug report's opening lines with `Guru Meditation: {msg}
/// #{file}:{line}` (the caller's location), then as `end_in_bug_report`.
#[track_caller]
pub fn server_panic(msg: &str) -> ! {
    let at = std::panic::Location::caller();
    panic_report(msg, &format!("{}:{}", at.file(), at.line()))
}

/// The report of a panic (serverPanic, or a Rust panic outside `caught`).
fn panic_report(msg: &str, at: &str) -> ! {
    end_in_bug_report(&[
        "------------------------------------------------".into(),
        "!!! Software Failure. Press left mouse button to continue".into(),
        format!("Guru Meditation: {msg} #{at}"),
    ])
}

/// Redis's serverAssert: `=== ASSERTION FAILED ===` and `==> {file}:{line} '{expr}' is not
/// true` after the `context` lines (serverAssertWithInfo's client and object context), then as
/// `end_in_bug_report`.
#[track_caller]
pub fn server_assert(context: &[String], expr: &str) -> ! {
    let at = std::panic::Location::caller();
    let mut lines = context.to_vec();
    lines.push("=== ASSERTION FAILED ===".into());
    lines.push(format!("==> {}:{} '{expr}' is not true", at.file(), at.line()));
    end_in_bug_report(&lines)
}

/// The bug report's frame around `lines` (logged as warnings): the start line, the stack trace
/// when crash-log-enabled, the end line; then, as Redis's bugReportEnd, the pidfile is removed
/// and the process ends with exit status 1 under use-exit-on-panic, else by abort() with the
/// crash handler removed first (so one report, not two).
fn end_in_bug_report(lines: &[String]) -> ! {
    with_handler_log(|fd| write_all_fd(fd, b"\n\n=== REDIS BUG REPORT START: Cut & paste starting from here ===\n"));
    for line in lines {
        tracing::warn!("{line}");
    }
    if crash_log_on() {
        stack_trace_from_handler(std::ptr::null_mut());
    }
    with_handler_log(|fd| {
        write_all_fd(fd, b"\n=== REDIS BUG REPORT END. Make sure to include from START to END. ===\n\n")
    });
    remove_crash_pidfile();
    if EXIT_ON_PANIC.load(Ordering::Relaxed) {
        // SAFETY: _exit ends the process at once; nothing of ours is left to run.
        unsafe { libc::_exit(1) };
    }
    set_crash_log(false);
    std::process::abort()
}

/// write(2) of all of `bytes` to `fd`, giving up on an error (async-signal-safe).
fn write_all_fd(fd: libc::c_int, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: write(2) of a buffer valid for its length.
        let n = unsafe { libc::write(fd, bytes.as_ptr() as *const libc::c_void, bytes.len()) };
        if n <= 0 {
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// The log file's path for `from_handler`, which may not allocate; unset or empty: stdout.
static HANDLER_LOG: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// Writes a warning from inside a signal handler in Redis's serverLogFromHandler shape,
/// `pid:signal-handler (unixtime) message`: only async-signal-safe calls (open, write, close,
/// getpid, time), no allocation, no lock, no local time.
pub fn from_handler(msg: &str) {
    let mut pid = itoa::Buffer::new();
    let mut now = itoa::Buffer::new();
    // SAFETY: getpid and time(NULL) are async-signal-safe and take no pointers we own.
    let (pid, now) = unsafe { (pid.format(libc::getpid()), now.format(libc::time(std::ptr::null_mut()))) };
    let parts: [&[u8]; 6] = [pid.as_bytes(), b":signal-handler (", now.as_bytes(), b") ", msg.as_bytes(), b"\n"];
    with_handler_log(|fd| {
        for part in parts {
            write_all_fd(fd, part);
        }
    });
}

/// Runs `f` with a descriptor of the log (Redis's openDirectLogFiledes): the log file opened
/// for appending, or stdout. Async-signal-safe: open and close only.
fn with_handler_log(f: impl FnOnce(libc::c_int)) {
    // SAFETY: open/close with a NUL-terminated path we own; both are async-signal-safe.
    let fd = match HANDLER_LOG.get().filter(|p| !p.as_bytes().is_empty()) {
        Some(path) => unsafe { libc::open(path.as_ptr(), libc::O_APPEND | libc::O_CREAT | libc::O_WRONLY, 0o644) },
        None => libc::STDOUT_FILENO,
    };
    if fd < 0 {
        return;
    }
    f(fd);
    if fd != libc::STDOUT_FILENO {
        // SAFETY: fd is the descriptor opened above.
        unsafe { libc::close(fd) };
    }
}

/// Writes Redis's logStackTrace block from a signal handler: `------ STACK TRACE ------`, the
/// interrupted instruction `eip` (when known) and the calling thread's frames, through glibc's
/// backtrace and backtrace_symbols_fd (which write without allocating once backtrace has been
/// called once outside the handler). The frames of this function and of the handler are left
/// out, so the list starts at the signal trampoline, as Redis's does.
#[inline(never)]
pub fn stack_trace_from_handler(eip: *mut libc::c_void) {
    let mut trace = [std::ptr::null_mut::<libc::c_void>(); 100];
    // SAFETY: the buffer holds the 100 frames asked for.
    let n = unsafe { libc::backtrace(trace.as_mut_ptr(), trace.len() as libc::c_int) }.max(0) as usize;
    let skip = 2.min(n);
    with_handler_log(|fd| {
        let put = |text: &[u8]| write_all_fd(fd, text);
        put(b"\n------ STACK TRACE ------\n");
        if !eip.is_null() {
            put(b"EIP:\n");
            // SAFETY: one pointer, read from a valid array.
            unsafe { libc::backtrace_symbols_fd(&eip, 1, fd) };
        }
        put(b"\nBacktrace:\n");
        // SAFETY: trace[skip..n] are frames backtrace filled in.
        unsafe { libc::backtrace_symbols_fd(trace.as_ptr().add(skip), (n - skip) as libc::c_int, fd) };
    });
}

/// syslog-enabled: lines also go to syslog(3).
static SYSLOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// openlog(3)'s ident, kept for the process's life as openlog keeps the pointer.
static SYSLOG_IDENT: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// Sends every later line to syslog too (syslog-enabled). Until `open_syslog` they go with the
/// C library's defaults (the program's name, facility user), as Redis's first lines do: it
/// opens the log in initServer, after "Configuration loaded".
pub fn enable_syslog() {
    SYSLOG.store(true, Ordering::Relaxed);
}

/// Opens the system log as Redis's initServer does (`LOG_PID | LOG_NDELAY | LOG_NOWAIT`, the
/// syslog-ident and syslog-facility given).
pub fn open_syslog(ident: &str, facility: &str) {
    let facility = match facility {
        "user" => libc::LOG_USER,
        "local1" => libc::LOG_LOCAL1,
        "local2" => libc::LOG_LOCAL2,
        "local3" => libc::LOG_LOCAL3,
        "local4" => libc::LOG_LOCAL4,
        "local5" => libc::LOG_LOCAL5,
        "local6" => libc::LOG_LOCAL6,
        "local7" => libc::LOG_LOCAL7,
        _ => libc::LOG_LOCAL0,
    };
    let ident = std::ffi::CString::new(ident.replace('\0', "")).unwrap_or_default();
    let ident = SYSLOG_IDENT.get_or_init(|| ident);
    // SAFETY: the ident lives in a static for the rest of the process, as openlog needs.
    unsafe { libc::openlog(ident.as_ptr(), libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT, facility) };
}

/// syslog(3) of one line at the priority of Redis's level `rank` (0 debug .. 3 warning).
fn to_syslog(rank: u8, msg: &str) {
    if !SYSLOG.load(Ordering::Relaxed) {
        return;
    }
    let priority = [libc::LOG_DEBUG, libc::LOG_INFO, libc::LOG_NOTICE, libc::LOG_WARNING][rank.min(3) as usize];
    let Ok(msg) = std::ffi::CString::new(msg.replace('\0', "")) else { return };
    // SAFETY: a "%s" format with one NUL-terminated string argument.
    unsafe { libc::syslog(priority, c"%s".as_ptr(), msg.as_ptr()) };
}

/// Sends each event that passes the level to syslog (see `enable_syslog`).
struct SyslogLayer;

impl<S: Subscriber> Layer<S> for SyslogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                use std::fmt::Write as _;
                if field.name() == "message" {
                    let _ = write!(self.0, "{value:?}");
                } else {
                    let _ = write!(self.0, " {}={value:?}", field.name());
                }
            }
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        to_syslog(level_rank(event.metadata().level()), &message.0);
    }
}

/// The syslog layer when `enable_syslog` ran.
fn syslog_layer<S: Subscriber + for<'a> LookupSpan<'a>>() -> Option<impl Layer<S>> {
    SYSLOG.load(Ordering::Relaxed).then(|| SyslogLayer.with_filter(tracing_subscriber::filter::filter_fn(level_passes)))
}

fn level_passes(meta: &tracing::Metadata<'_>) -> bool {
    level_rank(meta.level()) >= LEVEL.load(Ordering::Relaxed)
}

/// Installs the global subscriber: `loglevel`, and `logfile` (appended) or stdout when empty,
/// and syslog after `enable_syslog`. A logfile that cannot be opened falls back to stdout (the
/// config loader already checked it).
pub fn init(loglevel: &str, logfile: &str) {
    set_level(loglevel);
    if let Ok(path) = std::ffi::CString::new(logfile) {
        let _ = HANDLER_LOG.set(path);
    }
    let filter = tracing_subscriber::filter::filter_fn(level_passes);
    let result = match logfile {
        "" => {
            let layer = tracing_subscriber::fmt::layer()
                .event_format(RedisFormat)
                .with_writer(std::io::stdout)
                .with_filter(filter);
            tracing_subscriber::registry().with(layer).with(syslog_layer()).try_init()
        }
        path => {
            let layer = tracing_subscriber::fmt::layer()
                .event_format(RedisFormat)
                .with_writer(AppendFile(path.to_string()))
                .with_filter(filter);
            tracing_subscriber::registry().with(layer).with(syslog_layer()).try_init()
        }
    };
    let _ = result;
    let _ = std::io::stdout().flush();
}

/// Writes `text` as it is, with no line prefix (Redis's serverLogRaw), at notice level: to the
/// `logfile` when set, else stdout.
pub fn raw(logfile: &str, text: &str) {
    if LEVEL.load(Ordering::Relaxed) > 2 {
        return;
    }
    to_syslog(2, text);
    let _ = match logfile {
        "" => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|_| out.flush())
        }
        path => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes())),
    };
}

/// Opens the log file for every line, as Redis does, so a log rotated away by renaming is
/// followed by a fresh file at the configured path. Lines that cannot be written are dropped.
struct AppendFile(String);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for AppendFile {
    type Writer = Box<dyn Write + 'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match std::fs::OpenOptions::new().create(true).append(true).open(&self.0) {
            Ok(f) => Box::new(f),
            Err(_) => Box::new(std::io::sink()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamp_shape() {
        let t = super::timestamp();
        // "30 Nov 2026 16:00:12.345"
        assert_eq!(t.len(), 24, "{t}");
        assert_eq!(&t[2..3], " ");
        assert_eq!(&t[20..21], ".");
    }
}
