//! Snapshots to disk: SAVE in the foreground, BGSAVE in a forked child, save points from cron,
//! and the state INFO persistence reports. The RDB bytes come from `rdb::save`; this module owns
//! the process and file side: temp file, fsync, atomic rename, directory fsync, child bookkeeping.
//!
//! Why fork (ARCHITECTURE.md section 7): the child gets a copy-on-write image of every database
//! for the cost of copying page tables, so the executor pauses for the fork only (measured in
//! INFO latest_fork_usec) and memory grows only by the pages written while the child runs (its
//! Private_Dirty at exit, INFO rdb_last_cow_size). The child runs nothing of the server: it
//! serializes, writes, renames, reports its COW size through a pipe and `_exit`s, touching no
//! tokio state and no logger (the logger's locks may be held by a thread that does not exist in
//! the child). The parent reaps it with `waitpid(WNOHANG)` from cron. While the child runs, the
//! parent avoids copying shared pages for nothing, as Redis does: tables do not resize, cron does
//! not rehash, and reads do not stamp the LRU clock (`types::table::set_resize_allowed`).
//!
//! A resize already in progress pauses too (it would move, and so copy, every entry).
//!
//! Measured (release build, 1M keys of 100 bytes from DEBUG POPULATE, BGSAVE while
//! redis-benchmark runs SET on random new keys with 20 clients, on a shared 2-core machine at
//! load 3-8, so single runs are noisy; four runs of ours, two of redis-server 7.0.15): fork
//! 6.8-30 ms (Redis 40-41 ms; idle, 4.3-5.5 ms against 4.1-8.2 ms); `redis-cli --latency` max
//! during the save 29, 40, 68, 103 ms (Redis 40, 48 ms; earlier runs saw Redis at 187-229:
//! noise dominates); save 2-3 s (Redis 3-4 s); child Private_Dirty at exit 29-36 MB (Redis
//! 15-22 MB; ours was 92-94 MB before resizes paused); peak parent RSS + child Private_Dirty
//! 273-301 MB (Redis 248-267 MB). With SET overwriting 200k existing keys both children end
//! at 39.3 MB; under GET or PING load both stay under 1 MB.

use std::fs::File;

use std::os::fd::OwnedFd;
use std::time::Instant;

use crate::rdb::save::{self, Aux, Options, SaveError};

use super::State;
use crate::util::clock::unix_ms;

/// Seconds before a failed BGSAVE is retried by save points or a schedule (CONFIG_BGSAVE_RETRY_DELAY).
const RETRY_DELAY_S: i64 = 5;

/// What a forked child is writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildKind {
    /// BGSAVE: dump.rdb.
    Rdb,
    /// BGREWRITEAOF: a new AOF base file.
    Aof,
}

/// The running background save.
#[derive(Debug)]
pub struct Child {
    pub pid: i32,
    pub kind: ChildKind,
    started: Instant,
    /// `dirty` when the child forked: what the child's file covers.
    dirty_before: u64,
    /// Read end of the pipe the child reports its COW size on.
    report: OwnedFd,
    /// An RDB child writing to replicas' sockets (a diskless full sync), not to a file
    /// (Redis's RDB_CHILD_TYPE_SOCKET).
    pub to_replicas: bool,
}

/// Snapshot bookkeeping kept in the executor's `State`.
#[derive(Debug, Default)]
pub struct SnapshotState {
    pub child: Option<Child>,
    /// BGSAVE SCHEDULE (or BGSAVE inside EXEC while a child runs): start one when possible.
    pub scheduled: bool,
    /// Unix seconds of the last BGSAVE attempt (for the retry delay after a failure).
    pub last_try_unix: i64,
    /// Private_Dirty of the last child at exit (INFO rdb_last_cow_size).
    pub last_cow_size: u64,
    /// The running child's reports.
    pub progress: ChildProgress,
    /// A FINAL report the cron read before the child was reaped.
    early_final: Option<u64>,
}

/// Keys in every database (current_save_keys_total).
fn total_keys(st: &State) -> u64 {
    st.dbs.iter().map(|d| d.len() as u64).sum()
}

/// The rdb-version setting: None = auto.
fn version_setting(st: &State) -> Option<u32> {
    st.config.other.get("rdb-version").and_then(|v| v.parse().ok())
}

pub fn options(st: &State, version: u32) -> Options {
    Options {
        version,
        compress: st.config.rdbcompression,
        checksum: st.config.rdbchecksum,
        key_delay_us: st.config.other.get("rdb-key-save-delay").and_then(|v| v.parse::<i64>().ok()).unwrap_or(0).max(0)
            as u64,
        lru_idle_at_ms: st.config.maxmemory_policy.contains("lru").then(unix_ms),
        progress: Some(report_progress),
    }
}

// ---------------------------------------------------------------------------------------------
// Child reports. The child writes fixed 24-byte messages (kind, keys, COW bytes; each write is
// atomic on a pipe) to the parent: `CURRENT` at most once a second while it saves (Redis's
// CHILD_INFO_TYPE_CURRENT_INFO, which INFO's current_* fields show), `FINAL` before it exits
// (rdb_last_cow_size / aof_last_cow_size).

const REPORT_CURRENT: u64 = 1;
const REPORT_FINAL: u64 = 0;

/// The child's end of its report pipe; -1 in the parent (and in children that do not report).
static REPORT_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
/// Monotonic ms of the child's last CURRENT report.
static LAST_REPORT_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn send_report(kind: u64, keys: u64, cow: u64) {
    let fd = REPORT_FD.load(std::sync::atomic::Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let mut msg = [0u8; 24];
    for (i, v) in [kind, keys, cow].into_iter().enumerate() {
        msg[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    // SAFETY: write(2) of a buffer we own to the pipe descriptor this child holds open.
    let n = unsafe { libc::write(fd, msg.as_ptr() as *const libc::c_void, msg.len()) };
    // Nobody reads the reports any more: the server is gone (killed), and a child must not
    // outlive it (as Redis's child, which closed its copy of the read end to learn this).
    if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPIPE) {
        // SAFETY: ends the child at once, running nothing of the parent's.
        unsafe { libc::_exit(1) };
    }
}

/// The RDB writer's progress hook: in a reporting child, a CURRENT report (keys written and
/// Private_Dirty) once a second at most; reading smaps costs too much to do more often.
fn report_progress(keys: u64) {
    use std::sync::atomic::Ordering;
    if REPORT_FD.load(Ordering::Relaxed) < 0 {
        return;
    }
    let now = crate::util::clock::mono_us() / 1000;
    let last = LAST_REPORT_MS.load(Ordering::Relaxed);
    if last != 0 && now.saturating_sub(last) < 1000 {
        return;
    }
    LAST_REPORT_MS.store(now, Ordering::Relaxed);
    send_report(REPORT_CURRENT, keys, private_dirty_bytes().unwrap_or(0));
}

/// In the child, right after fork: reports go to `fd`.
fn start_reporting(fd: &OwnedFd) {
    use std::os::fd::AsRawFd;
    LAST_REPORT_MS.store(crate::util::clock::mono_us() / 1000, std::sync::atomic::Ordering::Relaxed);
    REPORT_FD.store(fd.as_raw_fd(), std::sync::atomic::Ordering::Relaxed);
}

/// What the running child last reported (INFO current_*); reset when it ends.
#[derive(Debug, Default, Clone, Copy)]
pub struct ChildProgress {
    /// Keys in the dataset when the child forked (current_save_keys_total).
    pub keys_total: u64,
    pub keys_processed: u64,
    pub cow: u64,
    pub cow_peak: u64,
    /// When the last COW figure arrived (current_cow_size_age).
    pub cow_at: Option<Instant>,
}

impl ChildProgress {
    /// current_fork_perc: keys written as a share of the total, in percent.
    pub fn percent(&self) -> f64 {
        if self.keys_total == 0 {
            0.0
        } else {
            self.keys_processed as f64 * 100.0 / self.keys_total as f64
        }
    }
}

/// Reads every report waiting on the pipe: CURRENT ones update `progress`; returns the COW of a
/// FINAL one, if it came.
fn read_reports(fd: &OwnedFd, progress: &mut ChildProgress) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut last_final = None;
    let mut msg = [0u8; 24];
    loop {
        // SAFETY: read(2) into a buffer we own from the (non-blocking) pipe we hold.
        let n = unsafe { libc::read(fd.as_raw_fd(), msg.as_mut_ptr() as *mut libc::c_void, msg.len()) };
        if n != msg.len() as isize {
            return last_final;
        }
        let field = |i: usize| u64::from_le_bytes(msg[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        match field(0) {
            REPORT_CURRENT => {
                progress.keys_processed = field(1);
                progress.cow = field(2);
                progress.cow_peak = progress.cow_peak.max(progress.cow);
                progress.cow_at = Some(Instant::now());
            }
            _ => last_final = Some(field(2)),
        }
    }
}

fn aux(st: &mut State) -> Aux {
    let repl = super::replication::rdb_info(st);
    Aux { ctime: unix_ms() / 1000, used_mem: st.sample_memory().1, aof_base: false, repl }
}

/// What an AOF base file is written with: an RDB of `version` marked `aof-base`.
pub fn aof_base_options(st: &mut State, version: u32) -> (Aux, Options) {
    let mut info = aux(st);
    info.aof_base = true;
    (info, options(st, version))
}

/// How often a file being saved is synced as it is written (Redis's REDIS_AUTOSYNC_BYTES):
/// rdb-save-incremental-fsync and aof-rewrite-incremental-fsync keep the kernel from piling up
/// gigabytes of dirty pages that one final fsync would then flush in a single long stall.
const INCREMENTAL_SYNC_BYTES: u64 = 4 << 20;

/// A file written in 4 MB steps, each step's writeback started as it completes and the one
/// before it waited for (Redis 7.0's rioFileWrite with autosync, by sync_file_range), when on.
pub struct IncrementalSync {
    file: File,
    written: u64,
    on: bool,
}

impl IncrementalSync {
    pub fn new(file: File, on: bool) -> IncrementalSync {
        IncrementalSync { file, written: 0, on }
    }

    pub fn into_inner(self) -> File {
        self.file
    }

    /// At a step boundary: starts writing out the step just completed and waits for the one
    /// before it, so at most two steps are ever dirty.
    fn sync_steps(&self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let fd = self.file.as_raw_fd();
        let step = INCREMENTAL_SYNC_BYTES as i64;
        let end = self.written as i64;
        // SAFETY: sync_file_range on a descriptor this struct owns, with in-file offsets.
        let started = unsafe { libc::sync_file_range(fd, end - step, step, libc::SYNC_FILE_RANGE_WRITE) };
        if started == -1 {
            return Err(std::io::Error::last_os_error());
        }
        if end >= 2 * step {
            let flags =
                libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
            // SAFETY: as above.
            if unsafe { libc::sync_file_range(fd, end - 2 * step, step, flags) } == -1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl std::io::Write for IncrementalSync {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.on {
            return self.file.write(buf);
        }
        // No write crosses a step boundary, so each step is synced whole.
        let room = INCREMENTAL_SYNC_BYTES - self.written % INCREMENTAL_SYNC_BYTES;
        let n = self.file.write(&buf[..buf.len().min(room as usize)])?;
        self.written += n as u64;
        if n > 0 && self.written.is_multiple_of(INCREMENTAL_SYNC_BYTES) {
            self.sync_steps()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Writes the dataset to `temp-<pid>.rdb` in the working directory (the server chdir'd to
/// `dir`), fsyncs it, renames it over `filename` and fsyncs the directory, so a crash leaves
/// either the old file or the new one. `incremental_fsync`: synced every 4 MB on the way as
/// well (`IncrementalSync`). Returns the bytes written.
pub fn save_to_file(
    dbs: &[crate::db::Db],
    functions: &crate::functions::Libraries,
    info: &Aux,
    opts: &Options,
    filename: &str,
    incremental_fsync: bool,
) -> Result<u64, SaveError> {
    let tmp = format!("temp-{}.rdb", std::process::id());
    let result = (|| {
        let file = IncrementalSync::new(File::create(&tmp)?, incremental_fsync);
        let (file, n) = save::write_snapshot(file, dbs, functions, info, opts)?;
        let file = file.into_inner();
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, filename)?;
        let dir = std::path::Path::new(filename).parent().filter(|p| !p.as_os_str().is_empty());
        if let Ok(d) = File::open(dir.unwrap_or(std::path::Path::new("."))) {
            let _ = d.sync_all();
        }
        Ok(n)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Checks a fixed rdb-version against the dataset; for `auto`, the oldest version that holds
/// everything.
fn resolve_version(st: &State) -> Result<u32, SaveError> {
    match version_setting(st) {
        Some(v) => {
            save::check_version(v, &st.dbs, &st.functions)?;
            Ok(v)
        }
        None => Ok(save::required_version(&st.dbs)),
    }
}

/// SAVE: writes the snapshot in the foreground. On success the dirty counter resets and
/// LASTSAVE moves, as after a successful BGSAVE.
pub fn save_foreground(st: &mut State) -> Result<(), SaveError> {
    let version = resolve_version(st)?;
    let opts = options(st, version);
    let info = aux(st);
    let incremental = st.config.other_flag("rdb-save-incremental-fsync", true);
    match save_to_file(&st.dbs, &st.functions, &info, &opts, &st.config.dbfilename, incremental) {
        Ok(_) => {
            tracing::info!("DB saved on disk");
            st.dirty = 0;
            st.lastsave_unix = unix_ms() / 1000;
            st.stats.persistence.last_bgsave_ok = true;
            Ok(())
        }
        Err(e) => {
            tracing::warn!("Failed saving the DB: {e}");
            Err(e)
        }
    }
}

/// Why BGSAVE could not start.
#[derive(Debug)]
pub enum BgsaveError {
    InProgress,
    Version(SaveError),
    Fork(String),
}

/// Starts a background save. Returns the child's pid.
pub fn bgsave_start(st: &mut State) -> Result<i32, BgsaveError> {
    if st.snapshot.child.is_some() {
        return Err(BgsaveError::InProgress);
    }
    // A fixed version is checked here so the client hears why; `auto` is decided in the child,
    // so the parent never walks the keyspace before forking.
    let fixed = version_setting(st);
    if let Some(v) = fixed {
        save::check_version(v, &st.dbs, &st.functions).map_err(BgsaveError::Version)?;
    }
    let now_unix = unix_ms() / 1000;
    st.snapshot.last_try_unix = now_unix;
    let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| BgsaveError::Fork(e.to_string()))?;
    let info = aux(st);
    let filename = st.config.dbfilename.clone();
    let base = options(st, fixed.unwrap_or(10));
    let started = Instant::now();
    // SAFETY: the child only runs `child_main`, which serializes the (copy-on-write) dataset,
    // writes files and exits with `_exit`; it never returns into the server, never touches the
    // runtime and logs nothing, so no lock held by another thread at fork time is taken.
    let fork = unsafe { nix::unistd::fork() };
    match fork {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(rd);
            become_child(st, "redis-rdb-bgsave");
            let code = crate::log::caught(|| child_main(st, fixed.is_none(), base, &info, &filename, wr)).unwrap_or(1);
            // SAFETY: ends the child without running the parent's atexit handlers or destructors.
            unsafe { libc::_exit(code) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            let fork_us = started.elapsed().as_micros() as u64;
            drop(wr);
            let _ = nix::fcntl::fcntl(&rd, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK));
            let pid = child.as_raw();
            let p = &mut st.stats.persistence;
            p.latest_fork_usec = fork_us;
            p.total_forks += 1;
            p.bgsave_in_progress = true;
            p.bgsave_started_unix = now_unix;
            p.rdb_saves += 1;
            st.snapshot.child = Some(Child {
                pid,
                kind: ChildKind::Rdb,
                started,
                dirty_before: st.dirty,
                report: rd,
                to_replicas: false,
            });
            st.snapshot.progress = ChildProgress { keys_total: total_keys(st), ..Default::default() };
            crate::executor::record_latency(st, "fork", fork_us);
            // Moving entries between bucket arrays now would only copy pages the child shares.
            crate::types::table::set_resize_allowed(false);
            st.snapshot.scheduled = false;
            tracing::info!("Background saving started by pid {pid}");
            Ok(pid)
        }
        Err(e) => {
            st.stats.persistence.last_bgsave_ok = false;
            tracing::warn!("Can't save in background: fork: {e}");
            Err(BgsaveError::Fork(e.to_string()))
        }
    }
}

/// What a fork child does first, as Redis's child setup: it stops listening (the listening
/// sockets are the parent's; a child outliving a killed parent must not hold the port), takes the
/// background child's OOM score and its process title.
pub(super) fn become_child(st: &State, title: &str) {
    for (fd, _) in super::handoff::listeners() {
        // SAFETY: the child's copies of the listening descriptors; nothing in the child uses them.
        unsafe { libc::close(fd) };
    }
    let _ = crate::daemon::apply_oom_score_adj(&st.config, crate::daemon::OomClass::BgChild);
    crate::proctitle::set_as(&st.config, title);
}

/// Forks a child of `kind` that runs `work` on its copy-on-write image of the dataset, reports
/// its COW size and exits (0 when `work` succeeded). Returns the child's pid.
pub fn fork_child(st: &mut State, kind: ChildKind, work: impl FnOnce(&State) -> bool) -> Result<i32, String> {
    let title = if kind == ChildKind::Rdb { "redis-rdb-bgsave" } else { "redis-aof-rewrite" };
    fork_child_titled(st, kind, title, work)
}

/// `fork_child` with the child's process title given.
pub fn fork_child_titled(
    st: &mut State,
    kind: ChildKind,
    title: &str,
    work: impl FnOnce(&State) -> bool,
) -> Result<i32, String> {
    let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    let started = Instant::now();
    // SAFETY: as in `bgsave_start`: the child only runs `work` (serializing and writing files),
    // reports its COW size and `_exit`s; it never returns into the server or touches the runtime.
    let fork = unsafe { nix::unistd::fork() };
    match fork {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(rd);
            become_child(st, title);
            start_reporting(&wr);
            let ok = crate::log::caught(|| work(st)).unwrap_or(false);
            send_report(REPORT_FINAL, 0, private_dirty_bytes().unwrap_or(0));
            drop(wr);
            // SAFETY: ends the child without running the parent's atexit handlers or destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(wr);
            let _ = nix::fcntl::fcntl(&rd, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK));
            let pid = child.as_raw();
            let p = &mut st.stats.persistence;
            p.latest_fork_usec = started.elapsed().as_micros() as u64;
            p.total_forks += 1;
            let fork_us = p.latest_fork_usec;
            st.snapshot.child =
                Some(Child { pid, kind, started, dirty_before: st.dirty, report: rd, to_replicas: false });
            st.snapshot.progress = ChildProgress { keys_total: total_keys(st), ..Default::default() };
            crate::executor::record_latency(st, "fork", fork_us);
            crate::types::table::set_resize_allowed(false);
            Ok(pid)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The child's whole life: save, report COW, return the exit code.
fn child_main(st: &State, auto: bool, mut opts: Options, info: &Aux, filename: &str, report: OwnedFd) -> i32 {
    start_reporting(&report);
    if auto {
        opts.version = save::required_version(&st.dbs);
    }
    let incremental = st.config.other_flag("rdb-save-incremental-fsync", true);
    let ok = save_to_file(&st.dbs, &st.functions, info, &opts, filename, incremental).is_ok();
    send_report(REPORT_FINAL, 0, private_dirty_bytes().unwrap_or(0));
    drop(report);
    if ok {
        0
    } else {
        1
    }
}

/// Private_Dirty of this process (bytes), from /proc/self/smaps_rollup: in a forked child that
/// is the pages copied because one side wrote them, plus the child's own buffers.
fn private_dirty_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = text.lines().find(|l| l.starts_with("Private_Dirty:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Reaps a finished child (cron): updates LASTSAVE, dirty, status and COW figures.
pub fn bgsave_poll(st: &mut State) {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    let Some(child) = st.snapshot.child.as_ref() else {
        return;
    };
    let pid = nix::unistd::Pid::from_raw(child.pid);
    let status = match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => return,
        Ok(s) => s,
        Err(nix::errno::Errno::EINTR) => return,
        // ECHILD: someone else reaped it; count it as failed.
        Err(_) => WaitStatus::Exited(pid, 1),
    };
    let Some(Child { pid, kind, started, dirty_before, report, to_replicas }) = st.snapshot.child.take() else {
        return;
    };
    crate::types::table::set_resize_allowed(true);
    let cow = read_reports(&report, &mut st.snapshot.progress).or(st.snapshot.early_final.take()).unwrap_or(0);
    st.snapshot.progress = ChildProgress::default();
    if kind == ChildKind::Aof {
        let ok = matches!(status, WaitStatus::Exited(_, 0));
        let signal = match status {
            WaitStatus::Signaled(_, sig, _) => Some(sig as i32),
            _ => None,
        };
        super::aof::rewrite_done(st, pid, ok, signal, cow);
        return;
    }
    st.snapshot.last_cow_size = cow;
    let p = &mut st.stats.persistence;
    p.bgsave_in_progress = false;
    if to_replicas {
        // A diskless sync's child: no file, so LASTSAVE, dirty and the bgsave status stay
        // (Redis's backgroundSaveDoneHandlerSocket).
        let ok = matches!(status, WaitStatus::Exited(_, 0));
        match status {
            WaitStatus::Exited(_, 0) => tracing::info!("Background RDB transfer terminated with success"),
            WaitStatus::Signaled(_, sig, _) if sig != nix::sys::signal::Signal::SIGUSR1 => {
                tracing::warn!("Background transfer terminated by signal {}", sig as i32)
            }
            WaitStatus::Signaled(..) => {}
            _ => tracing::warn!("Background transfer error"),
        }
        super::replication::sync_child_done(st, ok, true);
        return;
    }
    p.last_bgsave_time_sec = started.elapsed().as_secs() as i64;
    let ok = matches!(status, WaitStatus::Exited(_, 0));
    match status {
        WaitStatus::Exited(_, 0) => {
            tracing::info!("Background saving terminated with success");
            st.dirty = st.dirty.saturating_sub(dirty_before);
            st.lastsave_unix = unix_ms() / 1000;
            p.last_bgsave_ok = true;
        }
        WaitStatus::Signaled(_, sig, _) => {
            tracing::warn!("Background saving terminated by signal {}", sig as i32);
            remove_temp(pid);
            // SIGUSR1 is how we (and Redis) cancel a child on purpose: not an error.
            if sig != nix::sys::signal::Signal::SIGUSR1 {
                p.last_bgsave_ok = false;
            }
        }
        _ => {
            tracing::warn!("Background saving error");
            p.last_bgsave_ok = false;
        }
    }
    super::replication::sync_child_done(st, ok, false);
}

fn remove_temp(pid: i32) {
    let _ = std::fs::remove_file(format!("temp-{pid}.rdb"));
}

/// Kills a running RDB child (a BGSAVE's or a sync's), as Redis's killRDBChild: FLUSHALL
/// abandons a snapshot of the old data, but an AOF rewrite goes on (its base is followed by the
/// FLUSHALL in the new incr file).
pub fn kill_rdb_child(st: &mut State) {
    if st.snapshot.child.as_ref().is_some_and(|c| c.kind == ChildKind::Rdb) {
        kill_child(st);
    }
}

/// Kills a running child of either kind (SHUTDOWN), waits for it and removes its temp file.
pub fn kill_child(st: &mut State) {
    if let Some(child) = st.snapshot.child.take() {
        let pid = nix::unistd::Pid::from_raw(child.pid);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGUSR1);
        let _ = nix::sys::wait::waitpid(pid, None);
        remove_temp(child.pid);
        if child.kind == ChildKind::Aof {
            super::aof::remove_rewrite_temp(st, child.pid);
        }
        st.stats.persistence.bgsave_in_progress = false;
        crate::types::table::set_resize_allowed(true);
        if child.kind == ChildKind::Rdb {
            // Replicas waiting for this snapshot sync again (Redis's updateSlavesWaitingBgsave
            // with an error).
            super::replication::sync_child_done(st, false, child.to_replicas);
        }
    }
}

/// Marks the running RDB child as a diskless sync's (see `Child::to_replicas`), which INFO
/// shows as a background save in progress.
pub fn mark_to_replicas(st: &mut State) {
    if let Some(c) = st.snapshot.child.as_mut() {
        c.to_replicas = true;
        let p = &mut st.stats.persistence;
        p.bgsave_in_progress = true;
        p.bgsave_started_unix = unix_ms() / 1000;
    }
}

/// Cron: reap a finished child, then start a scheduled BGSAVE or one a save point asks for.
pub fn cron(st: &mut State) {
    if let Some(child) = &st.snapshot.child {
        // A FINAL report stays unread until the child is reaped (it is only ever the last).
        let mut progress = st.snapshot.progress;
        let early_final = read_reports(&child.report, &mut progress);
        st.snapshot.progress = progress;
        st.snapshot.early_final = st.snapshot.early_final.or(early_final);
        bgsave_poll(st);
        return;
    }
    let now = unix_ms() / 1000;
    let may_retry = now - st.snapshot.last_try_unix > RETRY_DELAY_S || st.stats.persistence.last_bgsave_ok;
    if st.snapshot.scheduled && may_retry {
        let _ = bgsave_start(st);
        return;
    }
    if !may_retry {
        return;
    }
    let due = st
        .config
        .save
        .iter()
        .copied()
        .find(|&(secs, changes)| st.dirty >= changes && now - st.lastsave_unix > secs as i64);
    if let Some((secs, changes)) = due {
        tracing::info!("{changes} changes in {secs} seconds. Saving...");
        let _ = bgsave_start(st);
    }
}

/// Why writes are refused (Redis's writeCommandsDeniedByDiskError).
pub enum DiskError {
    /// The last background save failed (stop-writes-on-bgsave-error with save points).
    Rdb,
    /// The last AOF write failed: its MISCONF text.
    Aof(String),
}

/// Whether writes are refused because persistence is failing: a failed BGSAVE first, then a
/// failed AOF write.
#[inline]
pub fn disk_error(st: &State) -> Option<DiskError> {
    if st.config.stop_writes_on_bgsave_error && !st.config.save.is_empty() && !st.stats.persistence.last_bgsave_ok {
        return Some(DiskError::Rdb);
    }
    st.aof.write_error.as_ref()?;
    super::aof::write_refusal(st).map(DiskError::Aof)
}

/// SHUTDOWN's save: kills a running child, then saves in the foreground when asked to.
pub fn shutdown_save(st: &mut State, save: bool) -> Result<(), SaveError> {
    kill_child(st);
    super::scripting::ldb::kill_children();
    super::aof::shutdown(st);
    if save {
        tracing::info!("Saving the final RDB snapshot before exiting.");
        save_foreground(st)?;
    }
    Ok(())
}
