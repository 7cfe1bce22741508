//! Process plumbing done before the tokio runtime exists: daemonizing exactly like Redis (one
//! fork, setsid, stdin/stdout/stderr onto /dev/null, working directory kept), the pidfile, and
//! raising RLIMIT_NOFILE to maxclients + 32, lowering maxclients with Redis's log lines when the
//! OS refuses, and the process's OOM-killer score (oom-score-adj). Forking is only sound while
//! the process has a single thread: call `daemonize` before anything spawns one.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// File descriptors Redis keeps for itself beyond one per client (CONFIG_MIN_RESERVED_FDS).
pub const RESERVED_FDS: u64 = 32;

/// Where the pidfile goes when daemonized without a `pidfile` directive (Redis's rule).
pub const DEFAULT_PIDFILE: &str = "/var/run/redis.pid";

/// Detaches from the terminal: the parent exits 0, the child continues in a new session.
pub fn daemonize() {
    // SAFETY: called from main before any other thread exists, so the child inherits a
    // consistent address space; the parent only calls _exit.
    unsafe {
        match libc::fork() {
            -1 => return,
            0 => {}
            _ => libc::_exit(0),
        }
        libc::setsid();
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR, 0);
        if fd != -1 {
            libc::dup2(fd, libc::STDIN_FILENO);
            libc::dup2(fd, libc::STDOUT_FILENO);
            libc::dup2(fd, libc::STDERR_FILENO);
            if fd > libc::STDERR_FILENO {
                libc::close(fd);
            }
        }
    }
}

/// Writes our pid to `path` (followed by a newline, as Redis does); failure is only logged.
pub fn write_pidfile(path: &str) {
    if let Err(e) = std::fs::write(path, format!("{}\n", std::process::id())) {
        tracing::warn!("Failed to write PID file: {}", crate::util::os_error_text(&e));
    }
}

/// Which of the three `oom-score-adj-values` a process takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OomClass {
    Master = 0,
    Replica = 1,
    BgChild = 2,
}

/// Whether the score was set by us, and the score the process had before that: switching
/// oom-score-adj off restores it, and `relative` values are added to it.
static OOM_ADJUSTED: AtomicBool = AtomicBool::new(false);
static OOM_BASE: AtomicI64 = AtomicI64::new(0);

const OOM_SCORE_ADJ: &str = "/proc/self/oom_score_adj";

/// Redis's setOOMScoreAdj. `mode` is oom-score-adj (`no`, `yes`/`relative`, `absolute`) and
/// `values` oom-score-adj-values. With the setting on, writes this class's value (relative: plus
/// the score found before the first adjustment), clamped to -1000..=1000; switched off after an
/// adjustment, writes the old score back; otherwise does nothing. A failure returns the line
/// Redis logs for it (a forked child must not log: another thread may hold the log's lock).
pub fn set_oom_score_adj(mode: &str, values: &str, class: OomClass) -> Result<(), String> {
    let value = if mode != "no" {
        if !OOM_ADJUSTED.swap(true, Ordering::Relaxed) {
            match std::fs::read_to_string(OOM_SCORE_ADJ) {
                Ok(text) => OOM_BASE.store(crate::util::num::atoi(text.as_bytes()), Ordering::Relaxed),
                Err(e) => return Err(format!("Unable to read oom_score_adj: {}", crate::util::os_error_text(&e))),
            }
        }
        let configured = values.split(' ').nth(class as usize).map_or(0, |v| crate::util::num::atoi(v.as_bytes()));
        let relative = if mode == "absolute" { 0 } else { OOM_BASE.load(Ordering::Relaxed) };
        (configured + relative).clamp(-1000, 1000)
    } else if OOM_ADJUSTED.swap(false, Ordering::Relaxed) {
        OOM_BASE.load(Ordering::Relaxed)
    } else {
        return Ok(());
    };
    std::fs::write(OOM_SCORE_ADJ, format!("{value}\n"))
        .map_err(|e| format!("Unable to write oom_score_adj: {}", crate::util::os_error_text(&e)))
}

/// `set_oom_score_adj` with the running configuration's settings.
pub fn apply_oom_score_adj(cfg: &crate::config::Config, class: OomClass) -> Result<(), String> {
    let get = |name| crate::config::lookup(name).map(|d| cfg.get(d)).unwrap_or_default();
    set_oom_score_adj(&get("oom-score-adj"), &get("oom-score-adj-values"), class)
}

/// Redis's warnings about the kernel's memory settings, after "Server initialized" (Linux):
/// overcommit_memory other than 1 (a snapshot's fork may fail), and Transparent Huge Pages
/// set to `always`, which disable-thp turns off for this process (PR_SET_THP_DISABLE) and
/// which is reported only when that fails or disable-thp is no.
pub fn linux_memory_warnings(disable_thp: bool) {
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").ok();
    if overcommit.is_some_and(|v| v.trim().parse::<i64>().unwrap_or(0) != 1) {
        tracing::warn!(
            "WARNING Memory overcommit must be enabled! Without it, a background save or replication may fail under \
             low memory condition. Being disabled, it can can also cause failures without low memory condition, see \
             https://github.com/jemalloc/jemalloc/issues/1328. To fix this issue add 'vm.overcommit_memory = 1' to \
             /etc/sysctl.conf and then reboot or run the command 'sysctl vm.overcommit_memory=1' for this to take \
             effect."
        );
    }
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if thp.contains("[always]") {
        // SAFETY: prctl with integer arguments only.
        let disabled = disable_thp && unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } == 0;
        if !disabled {
            tracing::warn!(
                "WARNING You have Transparent Huge Pages (THP) support enabled in your kernel. This will create \
                 latency and memory usage issues with Redis. To fix this issue run the command 'echo madvise > \
                 /sys/kernel/mm/transparent_hugepage/enabled' as root, and add it to your /etc/rc.local in order to \
                 retain the setting after a reboot. Redis must be restarted after THP is disabled (set to 'madvise' \
                 or 'never')."
            );
        }
    }
}

/// Raises the open-files limit so `maxclients` clients fit, stepping down 16 at a time as Redis
/// does when the OS refuses. Returns the maxclients the limit allows (`maxclients` itself when
/// it fits; 0 when not even the reserved descriptors are available).
pub fn adjust_open_files_limit(maxclients: usize) -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let maxfiles = maxclients as u64 + RESERVED_FDS;
    let (old, _hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(
                "Unable to obtain the current NOFILE limit ({}), assuming 1024 and setting the max clients configuration accordingly.",
                e.desc()
            );
            return (1024 - RESERVED_FDS) as usize;
        }
    };
    if old >= maxfiles {
        return maxclients;
    }
    let mut best = maxfiles;
    let mut last_err = nix::errno::Errno::UnknownErrno;
    while best > old {
        match setrlimit(Resource::RLIMIT_NOFILE, best, best) {
            Ok(()) => break,
            Err(e) => last_err = e,
        }
        if best < 16 {
            best = old;
            break;
        }
        best -= 16;
    }
    best = best.max(old);
    if best < maxfiles {
        if best <= RESERVED_FDS {
            tracing::warn!(
                "Your current 'ulimit -n' of {old} is not enough for the server to start. Please increase your open file limit to at least {maxfiles}. Exiting."
            );
            return 0;
        }
        let reduced = best - RESERVED_FDS;
        tracing::warn!("You requested maxclients of {maxclients} requiring at least {maxfiles} max file descriptors.");
        tracing::warn!("Server can't set maximum open files to {maxfiles} because of OS error: {}.", last_err.desc());
        tracing::warn!(
            "Current maximum open files is {best}. maxclients has been reduced to {reduced} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
        );
        reduced as usize
    } else {
        tracing::info!("Increased maximum number of open files to {maxfiles} (it was originally set to {old}).");
        maxclients
    }
}

/// How the process is supervised, after checking the environment as Redis does: `systemd` and
/// `auto` need NOTIFY_SOCKET, `upstart` needs UPSTART_JOB; otherwise it is unsupervised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervisor {
    None,
    Systemd,
    Upstart,
}

/// Resolves the `supervised` directive against the environment, logging like Redis.
pub fn detect_supervisor(mode: &str) -> Supervisor {
    let has = |var: &str| std::env::var_os(var).is_some();
    match mode {
        "upstart" if has("UPSTART_JOB") => Supervisor::Upstart,
        "upstart" => {
            tracing::warn!("Upstart supervision requested, but UPSTART_JOB not found!");
            Supervisor::None
        }
        "systemd" | "auto" if has("NOTIFY_SOCKET") => {
            tracing::info!(
                "Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."
            );
            Supervisor::Systemd
        }
        "systemd" => {
            tracing::warn!("systemd supervision requested or auto-detected, but NOTIFY_SOCKET not found!");
            Supervisor::None
        }
        "auto" if has("UPSTART_JOB") => Supervisor::Upstart,
        _ => Supervisor::None,
    }
}

/// Tells systemd (Type=notify units) that the server is ready, as Redis does: its status line
/// (a replica's says it waits for its sync), then `READY=1`.
pub fn notify_systemd_ready(replica: bool) {
    notify_systemd(if replica {
        "STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync\n"
    } else {
        "STATUS=Ready to accept connections\n"
    });
    notify_systemd("READY=1\n");
}

/// One sd_notify datagram to NOTIFY_SOCKET, which may name an abstract socket (`@name`);
/// nothing without it.
pub fn notify_systemd(msg: &str) {
    use std::os::unix::net::UnixDatagram;
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let path = path.to_string_lossy().into_owned();
    let Ok(sock) = UnixDatagram::unbound() else { return };
    let msg = msg.as_bytes();
    let sent = if let Some(name) = path.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| sock.send_to_addr(msg, &addr))
    } else {
        sock.send_to(msg, &path)
    };
    if let Err(e) = sent {
        tracing::warn!("Failed to notify systemd: {}", crate::util::os_error_text(&e));
    }
}
