//! The append-only file, process side (Redis 7.0's multi-part AOF): loading it at startup,
//! appending what `propagate` emits, fsync by `appendfsync`, BGREWRITEAOF in a forked child,
//! automatic rewrites, and CONFIG SET appendonly at runtime. File formats are in `crate::aof`.
//!
//! Layout (under `dir`): `appenddirname`/ holds one base file (an RDB: the dataset when the
//! last rewrite started), incremental files (commands since), and the manifest naming them.
//! A rewrite first opens a new incremental file, so the writes that follow need no rewrite
//! buffer; the child writes the new base from its copy-on-write image; when it succeeds the
//! manifest swaps the base and turns the older files into history, which is then deleted. Every
//! manifest change is written to a temp file, fsynced and renamed, so a crash leaves one valid
//! manifest.
//!
//! Writes: `feed` appends to a buffer; `flush` writes it before the replies of the batch that
//! produced it go out (so with `appendfsync always` a client hears OK only for what is on disk),
//! and on cron. `everysec` fsyncs from a background thread once a second.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::aof::reader::{CommandReader, ReadError};
use crate::aof::{encode_command, Manifest};

use super::State;
use crate::util::clock::unix_ms;

/// Whether the AOF is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Status {
    #[default]
    Off,
    On,
    /// Turned on at runtime: writes go to a temp incremental file until the first rewrite
    /// has produced a base.
    WaitRewrite,
}

/// The file as seen by whoever fsyncs it off the executor: the everysec thread, and under
/// `appendfsync always` the runtime's before-park hook, which fsyncs once for every batch
/// written since it last ran and then lets their replies go (group commit: Redis fsyncs once per
/// event-loop iteration in beforeSleep, not once per client).
#[derive(Debug, Default)]
pub struct SyncGate {
    file: Mutex<Option<Arc<File>>>,
    /// Written since the everysec thread last synced.
    pending: AtomicBool,
    /// `no-appendfsync-on-rewrite` while a child runs: the everysec thread leaves `pending`
    /// for later (see `fsync_held`).
    held: AtomicBool,
    /// Bytes of `always` batches not written yet: the hook writes them all with one write(2)
    /// before its fsync, as Redis writes its AOF buffer once per event-loop iteration.
    unwritten: Mutex<Vec<u8>>,
    /// Batches handed over under `always` (a counter) and how many of them are fsynced.
    written: std::sync::atomic::AtomicU64,
    synced: std::sync::atomic::AtomicU64,
    synced_notify: tokio::sync::Notify,
    /// The slowest write and fsync of the hook since the cron last handed them to the latency
    /// monitor (microseconds).
    worst_write_us: std::sync::atomic::AtomicU64,
    worst_fsync_us: std::sync::atomic::AtomicU64,
}

impl SyncGate {
    /// Before the runtime parks: fsyncs what `always` batches wrote, then wakes their replies.
    pub fn sync_written(&self) -> bool {
        let written = self.written.load(Ordering::Acquire);
        if written == self.synced.load(Ordering::Acquire) {
            return false;
        }
        let file = self.file.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut unwritten = self.unwritten.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = file {
            let started = Instant::now();
            let mut result = (&*f).write_all(&unwritten);
            let wrote = Instant::now();
            if result.is_ok() {
                result = f.sync_data();
            }
            self.worst_write_us.fetch_max((wrote - started).as_micros() as u64, Ordering::Relaxed);
            self.worst_fsync_us.fetch_max(wrote.elapsed().as_micros() as u64, Ordering::Relaxed);
            if let Err(e) = result {
                tracing::warn!(
                    "Can't persist the AOF buffer to disk ({e}). Exiting, as the AOF fsync policy is 'always'."
                );
                std::process::exit(1);
            }
        }
        unwritten.clear();
        drop(unwritten);
        self.synced.store(written, Ordering::Release);
        self.synced_notify.notify_waiters();
        true
    }

    /// Waits until batch `epoch` is fsynced.
    pub async fn synced(&self, epoch: u64) {
        loop {
            let notified = self.synced_notify.notified();
            if self.synced.load(Ordering::Acquire) >= epoch {
                return;
            }
            notified.await;
        }
    }
}

/// AOF bookkeeping kept in the executor's `State`.
#[derive(Debug)]
pub struct AofState {
    pub status: Status,
    /// Commands from the AOF are being replayed: keys do not expire, nothing is propagated.
    pub loading: bool,
    buf: Vec<u8>,
    selected_db: Option<usize>,
    file: Option<Arc<File>>,
    manifest: Manifest,
    pub fsync: Arc<SyncGate>,
    fsync_thread: bool,
    /// `appendfsync always` fsyncs in the runtime's before-park hook (connections run on the
    /// executor's thread); otherwise each write is fsynced at once.
    pub group_commit: bool,
    /// The batch just handled must wait for this fsync epoch before its replies go out.
    wait_epoch: Option<u64>,
    /// The running rewrite writes an RDB base (else commands).
    rewrite_rdb: bool,
    /// The AOF is loading in the background: open it once the data is swapped in.
    open_after_load: bool,
    pub rewrite_scheduled: bool,
    /// When the running rewrite started (also set while one is in a child).
    pub rewrite_started: Option<Instant>,
    pub rewrites: u64,
    pub last_rewrite_time_sec: i64,
    pub last_rewrite_ok: bool,
    pub consecutive_failures: u64,
    /// The error of the last failed write; writes are refused while it stands.
    pub write_error: Option<String>,
    /// Bytes of the base and incremental files (INFO aof_current_size).
    pub current_size: u64,
    /// `current_size` after the last rewrite or load (INFO aof_base_size): auto-rewrite growth
    /// is measured from it.
    pub base_size: u64,
    pub last_cow_size: u64,
    /// DEBUG AOF-FLUSH-SLEEP: microseconds to sleep before each write of the buffer (tests).
    pub flush_sleep_us: u64,
    /// aof-timestamp-enabled as last read (None: read it again, after a CONFIG command).
    timestamps: Option<bool>,
    /// The second of the last `#TS:` annotation written (Redis's aof_cur_timestamp).
    cur_timestamp: i64,
    /// The hold on cron's rewrites after repeated failures.
    limit: RewriteLimit,
}

/// See `rewrite_limited`.
#[derive(Debug, Default)]
struct RewriteLimit {
    delay_minutes: u64,
    next_try: Option<Instant>,
}

impl Default for AofState {
    fn default() -> Self {
        AofState {
            status: Status::Off,
            loading: false,
            buf: Vec::new(),
            selected_db: None,
            file: None,
            manifest: Manifest::default(),
            fsync: Arc::default(),
            fsync_thread: false,
            group_commit: false,
            wait_epoch: None,
            rewrite_rdb: true,
            open_after_load: false,
            rewrite_scheduled: false,
            rewrite_started: None,
            rewrites: 0,
            last_rewrite_time_sec: -1,
            last_rewrite_ok: true,
            consecutive_failures: 0,
            write_error: None,
            current_size: 0,
            base_size: 0,
            last_cow_size: 0,
            flush_sleep_us: 0,
            timestamps: None,
            cur_timestamp: 0,
            limit: RewriteLimit::default(),
        }
    }
}

impl AofState {
    /// Whether the AOF is on (INFO aof_enabled), counting a load still running at startup.
    pub fn enabled(&self) -> bool {
        self.status != Status::Off || self.open_after_load
    }

    /// After a batch: the fsync its replies must wait for (`appendfsync always`, group commit).
    pub fn take_wait(&mut self) -> Option<(Arc<SyncGate>, u64)> {
        self.wait_epoch.take().map(|e| (self.fsync.clone(), e))
    }

    /// Bytes waiting to be written (INFO aof_buffer_length, mem_aof_buffer).
    pub fn buffer_len(&self) -> usize {
        self.buf.len()
    }
}

const TEMP_INCR: &str = "temp-appendonly.aof.incr";

fn other<'a>(st: &'a State, name: &str) -> &'a str {
    st.config.other.get(name).map(String::as_str).unwrap_or("")
}

fn prefix(st: &State) -> String {
    let name = other(st, "appendfilename");
    if name.is_empty() {
        "appendonly.aof".into()
    } else {
        name.to_string()
    }
}

fn dir(st: &State) -> PathBuf {
    let d = other(st, "appenddirname");
    PathBuf::from(if d.is_empty() { "appendonlydir" } else { d })
}

fn manifest_path(st: &State) -> PathBuf {
    dir(st).join(format!("{}.manifest", prefix(st)))
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Appends one propagated command, preceded by SELECT when the database changes.
pub fn feed(st: &mut State, db: usize, argv: &[Bytes]) {
    let aof = &mut st.aof;
    let writing = match aof.status {
        Status::On => true,
        Status::WaitRewrite => aof.file.is_some(),
        Status::Off => false,
    };
    if !writing {
        return;
    }
    // aof-timestamp-enabled: a `#TS:<unixtime>` line before the first command of each second.
    let timestamps =
        *aof.timestamps.get_or_insert_with(|| st.config.other.get("aof-timestamp-enabled").is_some_and(|v| v == "yes"));
    if timestamps {
        let now = crate::util::clock::unix_ms() / 1000;
        if aof.cur_timestamp < now {
            aof.cur_timestamp = now;
            aof.buf.extend_from_slice(format!("#TS:{now}\r\n").as_bytes());
        }
    }
    if aof.selected_db != Some(db) {
        let n = db.to_string();
        encode_command(&mut aof.buf, &[&b"SELECT"[..], n.as_bytes()]);
        aof.selected_db = Some(db);
    }
    encode_command(&mut aof.buf, argv);
}

/// Writes the buffer to the current incremental file (fsyncing under `always`). Called before
/// replies go out and from cron.
#[inline]
pub fn flush(st: &mut State) {
    if !st.aof.buf.is_empty() {
        write_buffer(st);
    }
}

fn write_buffer(st: &mut State) {
    let Some(file) = st.aof.file.clone() else {
        st.aof.buf.clear();
        return;
    };
    if st.aof.flush_sleep_us > 0 {
        std::thread::sleep(Duration::from_micros(st.aof.flush_sleep_us));
    }
    let policy = other(st, "appendfsync");
    let (always, everysec) = (policy == "always", policy == "everysec");
    let held = fsync_held(st);
    st.aof.fsync.held.store(held, Ordering::Release);
    if always && !held && st.aof.group_commit {
        // Handed to the before-park hook, which writes and fsyncs every batch of this turn.
        st.aof.fsync.unwritten.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(&st.aof.buf);
        st.aof.current_size += st.aof.buf.len() as u64;
        st.aof.buf.clear();
        let epoch = st.aof.fsync.written.fetch_add(1, Ordering::AcqRel) + 1;
        st.aof.wait_epoch = Some(epoch);
        return;
    }
    // Bytes handed over while appendfsync was `always` go first (it may have just changed).
    st.aof.fsync.sync_written();
    // The latency monitor sees the write and the fsync apart, as Redis's aof-write-* and
    // aof-fsync-always events.
    let started = Instant::now();
    let mut result = (&*file).write_all(&st.aof.buf);
    let write_us = started.elapsed().as_micros() as u64;
    if write_us >= 1000 {
        let with = if st.snapshot.child.is_some() { "aof-write-active-child" } else { "aof-write-alone" };
        crate::executor::record_latency(st, with, write_us);
        crate::executor::record_latency(st, "aof-write", write_us);
    }
    if always && !held && result.is_ok() {
        let started = Instant::now();
        result = file.sync_data();
        crate::executor::record_latency(st, "aof-fsync-always", started.elapsed().as_micros() as u64);
    }
    match result {
        Ok(()) => {
            st.aof.current_size += st.aof.buf.len() as u64;
            st.aof.buf.clear();
            if st.aof.write_error.take().is_some() {
                tracing::warn!("AOF write error looks solved, Redis can write again.");
            }
            // `appendfsync no` leaves it to the kernel. A write `always` left unsynced while
            // fsync was held is synced by the everysec thread once the child is gone.
            if everysec || (always && held) {
                st.aof.fsync.pending.store(true, Ordering::Release);
            }
        }
        Err(e) => {
            if always {
                tracing::warn!(
                    "Can't persist the AOF buffer to disk ({e}). Exiting, as the AOF fsync policy is 'always'."
                );
                std::process::exit(1);
            }
            // A partial write may have landed: cut the file back to its last complete command.
            let _ = file.set_len(st.aof.current_size);
            if st.aof.write_error.is_none() {
                tracing::warn!("Error writing to the AOF file: {e}");
            }
            st.aof.write_error = Some(e.to_string());
        }
    }
}

/// Whether fsync waits: `no-appendfsync-on-rewrite yes` while a child (BGSAVE, BGREWRITEAOF)
/// runs, as Redis's flushAppendOnlyFile returns before its fsync then, leaving the disk to the
/// child. The write itself still goes out; what it leaves unsynced is synced once the child is
/// gone (`cron` lifts the hold).
fn fsync_held(st: &State) -> bool {
    st.snapshot.child.is_some() && other(st, "no-appendfsync-on-rewrite") == "yes"
}

/// The MISCONF text refusing writes after a failed AOF write.
pub fn write_refusal(st: &State) -> Option<String> {
    let e = st.aof.write_error.as_ref()?;
    (st.aof.status != Status::Off).then(|| format!("MISCONF Errors writing to the AOF file: {e}"))
}

/// Starts the everysec fsync thread once.
fn ensure_fsync_thread(st: &mut State) {
    if st.aof.fsync_thread {
        return;
    }
    st.aof.fsync_thread = true;
    let shared = st.aof.fsync.clone();
    let _ = std::thread::Builder::new().name("aof-fsync".into()).spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        if !shared.held.load(Ordering::Acquire) && shared.pending.swap(false, Ordering::AcqRel) {
            let file = shared.file.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(f) = file {
                let _ = f.sync_data();
            }
        }
    });
}

/// Makes `file` the one appended to (and fsynced every second).
fn set_file(st: &mut State, file: Option<File>) {
    // What `always` batches handed over belongs to the old file.
    st.aof.fsync.sync_written();
    if let Some(old) = st.aof.file.take() {
        let _ = old.sync_data();
    }
    let file = file.map(Arc::new);
    *st.aof.fsync.file.lock().unwrap_or_else(|p| p.into_inner()) = file.clone();
    st.aof.file = file;
    st.aof.selected_db = None;
    if st.aof.file.is_some() {
        ensure_fsync_thread(st);
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().append(true).create(true).open(path)
}

/// Writes the manifest to a temp file, fsyncs it and renames it into place.
fn persist_manifest(st: &State) -> std::io::Result<()> {
    let d = dir(st);
    let tmp = d.join(format!("temp-{}.manifest", prefix(st)));
    let mut f = File::create(&tmp)?;
    f.write_all(st.aof.manifest.to_text().as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, manifest_path(st))?;
    if let Ok(d) = File::open(&d) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Deletes history files (unless aof-disable-auto-gc) and forgets them.
fn delete_history(st: &mut State) {
    if other(st, "aof-disable-auto-gc") == "yes" || st.aof.manifest.history.is_empty() {
        return;
    }
    let d = dir(st);
    for f in std::mem::take(&mut st.aof.manifest.history) {
        tracing::info!("Removing the history file {} in the background", f.name);
        let _ = std::fs::remove_file(d.join(&f.name));
    }
    let _ = persist_manifest(st);
}

fn sizes(st: &State) -> u64 {
    let d = dir(st);
    st.aof.manifest.load_order().map(|f| file_size(&d.join(&f.name))).sum()
}

// ---------------------------------------------------------------------------------------------
// Startup

/// Startup with `appendonly yes`: loads the AOF (upgrading an old single-file AOF first), then
/// opens it for appending, creating a base and an incremental file when there are none.
/// Errors are logged here; on false the caller exits with status 1.
pub fn start_at_boot(st: &mut State) -> bool {
    boot(st).is_ok()
}

fn boot(st: &mut State) -> Result<(), ()> {
    let d = dir(st);
    let mpath = manifest_path(st);
    if d.is_dir() && mpath.exists() {
        let text = std::fs::read(&mpath).map_err(|e| tracing::warn!("Can't open the AOF manifest file: {e}"))?;
        st.aof.manifest = Manifest::parse(&text).map_err(|e| {
            tracing::warn!("\n*** FATAL AOF MANIFEST FILE ERROR ***\n");
            tracing::warn!("{e}");
        })?;
    }
    // An `appendfilename` file in `dir` is a Redis 6 AOF to upgrade when there is no AOF
    // directory, or no manifest (or an empty one), or when the manifest names only that file as
    // its base and the file is not in the AOF directory: an upgrade interrupted between writing
    // the manifest and moving the file (Redis's three cases in loadAppendOnlyFiles).
    let name = prefix(st);
    let old_style = PathBuf::from(&name);
    if old_style.is_file() {
        let m = &st.aof.manifest;
        let interrupted =
            m.incrs.is_empty() && m.base.as_ref().is_some_and(|b| b.name == name) && !d.join(&name).is_file();
        if !d.is_dir() || (m.base.is_none() && m.incrs.is_empty()) || interrupted {
            upgrade_old_style(st, &old_style).map_err(|e| tracing::warn!("{e}"))?;
        }
    }
    if let Err(e) = std::fs::create_dir_all(&d) {
        tracing::warn!("Can't open or create append-only dir {}: {e}", d.display());
        return Err(());
    }
    if st.aof.manifest.load_order().next().is_none() {
        return open_on_start(st).map_err(|e| tracing::warn!("{e}"));
    }
    load_in_background(st);
    Ok(())
}

/// Replays the AOF on its own thread, into a state of its own, while the listener answers
/// LOADING, as the RDB load does; the executor swaps the result in (`State::poll_loading`) and
/// then opens the AOF for appending (`open_after_load`). A failed load exits with status 1.
fn load_in_background(st: &mut State) {
    let d = dir(st);
    let total = st.aof.manifest.load_order().map(|f| file_size(&d.join(&f.name))).sum();
    let job = crate::rdb::load::LoadJob::new(total);
    let (config, manifest, j) = (st.config.clone(), st.aof.manifest.clone(), job.clone());
    let spawned = std::thread::Builder::new().name("aof-load".into()).spawn(move || {
        let mut replay = State::new(config);
        replay.aof.manifest = manifest;
        if load(&mut replay).is_err() {
            std::process::exit(1);
        }
        let p = &replay.stats.persistence;
        j.finish(crate::rdb::load::Loaded {
            keys_loaded: p.last_load_keys_loaded,
            keys_expired: p.last_load_keys_expired,
            dbs: std::mem::take(&mut replay.dbs),
            functions: std::mem::take(&mut replay.functions),
            repl: None,
            expired: Vec::new(),
        });
    });
    if let Err(e) = spawned {
        tracing::warn!("Can't start the AOF loading thread: {e}");
        std::process::exit(1);
    }
    st.stats.persistence.loading = true;
    st.loading = Some(job);
    st.aof.open_after_load = true;
}

/// After the background load was swapped in: sizes from the files as loaded, then the AOF
/// opens for appending. Failing to open it is fatal, as at startup in Redis.
pub fn open_after_load(st: &mut State) {
    if !std::mem::take(&mut st.aof.open_after_load) {
        return;
    }
    let d = dir(st);
    let base = st.aof.manifest.base.as_ref().map_or(0, |b| file_size(&d.join(&b.name)));
    if let Err(e) = open_on_start(st) {
        tracing::warn!("{e}");
        std::process::exit(1);
    }
    st.aof.current_size = sizes(st);
    st.aof.base_size = base;
}

/// A Redis 6 style `appendonly.aof` in `dir`: becomes the base file of a new manifest, moved
/// into the AOF directory.
fn upgrade_old_style(st: &mut State, path: &Path) -> Result<(), String> {
    let d = dir(st);
    std::fs::create_dir_all(&d).map_err(|e| format!("Can't open or create append-only dir {}: {e}", d.display()))?;
    let name = prefix(st);
    st.aof.manifest.base_seq = 1;
    st.aof.manifest.base = Some(crate::aof::AofFile { name: name.clone(), seq: 1, kind: crate::aof::FileKind::Base });
    persist_manifest(st).map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
    std::fs::rename(path, d.join(&name)).map_err(|e| {
        format!(
            "Error trying to rename the existing AOF to old AOF file: {e}. (Also, the manifest file will be restored) {}.",
            d.join(&name).display()
        )
    })?;
    tracing::info!("Successfully migrated an old-style AOF file ({name}) into the AOF directory ({}).", d.display());
    Ok(())
}

/// DEBUG LOADAOF: what is buffered is written and synced, then the dataset is replaced by what
/// the AOF files on disk hold (the manifest read again), as Redis's debug command does. An AOF
/// that cannot be loaded (none at all included) is an error here, on which the caller exits
/// with status 1 as Redis does. False when it could not be loaded (the reason is logged).
pub fn reload_from_disk(st: &mut State) -> bool {
    reload(st).is_ok()
}

fn reload(st: &mut State) -> Result<(), ()> {
    if st.aof.status != Status::Off {
        write_buffer(st);
        st.aof.fsync.sync_written();
        if let Some(f) = &st.aof.file {
            let _ = f.sync_data();
        }
    }
    let mpath = manifest_path(st);
    let manifest = match std::fs::read(&mpath) {
        Ok(text) => Manifest::parse(&text).map_err(|e| tracing::warn!("{e}"))?,
        Err(_) => Manifest::default(),
    };
    if manifest.load_order().next().is_none() {
        tracing::warn!("The AOF directory {} doesn't exist", dir(st).display());
        return Err(());
    }
    let mut replay = State::new(st.config.clone());
    replay.aof.manifest = manifest.clone();
    // The clients (and the users they run as) go with the replay: a script of the file that
    // runs past busy-reply-threshold answers them from there, with -LOADING as Redis does
    // while it loads.
    std::mem::swap(&mut replay.clients, &mut st.clients);
    std::mem::swap(&mut replay.acl, &mut st.acl);
    replay.connections_inline = st.connections_inline;
    let loaded = load(&mut replay);
    std::mem::swap(&mut replay.clients, &mut st.clients);
    std::mem::swap(&mut replay.acl, &mut st.acl);
    loaded?;
    st.aof.manifest = manifest;
    delete_history(st);
    let count = st.dbs.len();
    super::walks::set_aside_all(st);
    st.dbs = std::mem::take(&mut replay.dbs);
    while st.dbs.len() < count {
        st.dbs.push(crate::db::Db::numbered(st.dbs.len()));
    }
    st.functions = std::mem::take(&mut replay.functions);
    crate::executor::scripting::host::reload_all(st);
    st.aof.current_size = replay.aof.current_size;
    st.aof.base_size = replay.aof.base_size;
    st.dirty = 0;
    tracing::warn!("Append Only File loaded by DEBUG LOADAOF");
    Ok(())
}

/// Replays every file of the manifest into the (empty) databases.
fn load(st: &mut State) -> Result<(), ()> {
    let files: Vec<String> = st.aof.manifest.load_order().map(|f| f.name.clone()).collect();
    if files.is_empty() {
        return Ok(());
    }
    // Every file must be there before anything loads.
    let d = dir(st);
    let mut base_size = 0;
    let mut lens = Vec::with_capacity(files.len());
    for (i, name) in files.iter().enumerate() {
        match std::fs::metadata(d.join(name)) {
            Ok(m) => {
                if i == 0 && st.aof.manifest.base.is_some() {
                    base_size = m.len();
                }
                lens.push(m.len());
            }
            Err(e) => {
                let why = e.to_string();
                let why = why.split(" (os error").next().unwrap_or(&why);
                tracing::warn!("Unable to obtain the AOF file {name} length. stat: {why}");
                return Err(());
            }
        }
    }
    let started = Instant::now();
    st.aof.loading = true;
    for db in &mut st.dbs {
        db.loading = true;
    }
    let mut result = Ok(());
    for (i, name) in files.iter().enumerate() {
        let last = i + 1 == files.len();
        let t = Instant::now();
        let is_base = i == 0 && st.aof.manifest.base.is_some();
        match load_file(st, &d, name, last) {
            // An empty incremental file loads silently, as in Redis.
            Ok(()) if !is_base && lens[i] == 0 => {}
            Ok(()) => {
                let kind = if is_base { "base" } else { "incr" };
                tracing::info!("DB loaded from {kind} file {name}: {:.3} seconds", t.elapsed().as_secs_f64());
            }
            Err(()) => {
                result = Err(());
                break;
            }
        }
    }
    for db in &mut st.dbs {
        db.loading = false;
    }
    st.aof.loading = false;
    super::propagate::discard(st);
    result?;
    crate::executor::scripting::host::reload_all(st);
    st.aof.current_size = lens.iter().sum();
    st.aof.base_size = base_size;
    tracing::info!("DB loaded from append only file: {:.3} seconds", started.elapsed().as_secs_f64());
    Ok(())
}

/// Loads one file: an RDB preamble if it starts with one, then commands.
fn load_file(st: &mut State, d: &Path, name: &str, last: bool) -> Result<(), ()> {
    let path = d.join(name);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("The AOF file {name} doesn't exist or can't be opened: {e}");
            return Err(());
        }
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len == 0 {
        return Ok(());
    }
    let mut magic = [0u8; 5];
    let has_rdb = file.read_exact(&mut magic).is_ok() && &magic == b"REDIS";
    let _ = file.seek(SeekFrom::Start(0));
    let mut start = 0;
    if has_rdb {
        if name.ends_with(".rdb") {
            tracing::info!("Reading RDB base file on AOF loading...");
        } else {
            tracing::info!("Reading RDB preamble from AOF file...");
        }
        let now = unix_ms();
        let mut sink =
            crate::rdb::load::DbSink::new(st.config.databases, now, st.config.maxmemory_policy.contains("lfu"));
        let opts = crate::rdb::load::DecodeOpts::for_load(&st.config, now);
        let read = crate::rdb::load::read_file(&mut BufReader::new(&mut file), &mut sink, &opts);
        let finished = sink.finish();
        match read.and_then(|info| finished.map(|()| info)) {
            Ok(info) => {
                start = info.bytes;
                st.stats.persistence.last_load_keys_loaded += sink.keys_loaded;
                st.stats.persistence.last_load_keys_expired += sink.keys_expired;
            }
            Err(e) => {
                tracing::warn!(
                    "Error reading the RDB base file {name}, AOF loading aborted: {} (offset {})",
                    e.reason,
                    e.offset
                );
                return Err(());
            }
        }
        for (i, db) in sink.dbs.into_iter().enumerate() {
            if let Some(slot) = st.dbs.get_mut(i) {
                *slot = db;
                slot.loading = true;
            }
        }
        st.functions = sink.functions;
        if start < len {
            tracing::info!("Reading the remaining AOF tail...");
        }
        if file.seek(SeekFrom::Start(start)).is_err() {
            return Err(());
        }
    }
    let mut reader = CommandReader::new(BufReader::with_capacity(1 << 16, file), start);
    let mut client = loader_client();
    // Offset before an open MULTI: a transaction cut short is reverted to there.
    let mut before_multi: Option<u64> = None;
    let outcome = loop {
        let at = reader.valid_up_to;
        match reader.next_command() {
            Ok(None) => break Ok(()),
            Ok(Some(argv)) => {
                if argv[0].eq_ignore_ascii_case(b"multi") {
                    before_multi = Some(at);
                    continue;
                }
                if argv[0].eq_ignore_ascii_case(b"exec") {
                    before_multi = None;
                    continue;
                }
                if let Err(()) = replay(st, &mut client, argv, name) {
                    return Err(());
                }
            }
            Err(e) => break Err(e),
        }
    };
    let valid = match (&outcome, before_multi) {
        (Ok(()), None) => return Ok(()),
        (Ok(()), Some(at)) => {
            tracing::warn!("Revert incomplete MULTI/EXEC transaction in AOF file {name}");
            at
        }
        (Err(ReadError::Truncated), multi) => multi.unwrap_or(reader.valid_up_to),
        (Err(ReadError::Format), _) => {
            tracing::warn!(
                "Bad file format reading the append only file {name}: make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>"
            );
            return Err(());
        }
        (Err(ReadError::Io(e)), _) => {
            tracing::warn!("Unrecoverable error reading the append only file {name}: {e}");
            return Err(());
        }
    };
    if !last {
        tracing::warn!("Fatal error: the truncated file is not the last file");
        return Err(());
    }
    if other(st, "aof-load-truncated") != "yes" {
        tracing::warn!(
            "Unexpected end of file reading the append only file {name}. You can: 1) Make a backup of your AOF file, then use ./redis-check-aof --fix <filename.manifest>. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
        );
        return Err(());
    }
    tracing::warn!("!!! Warning: short read while loading the AOF file {name}!!!");
    tracing::warn!("!!! Truncating the AOF {name} at offset {valid} !!!");
    match OpenOptions::new().write(true).open(&path).and_then(|f| f.set_len(valid)) {
        Ok(()) => {
            tracing::warn!("AOF {name} loaded anyway because aof-load-truncated is enabled");
            Ok(())
        }
        Err(e) => {
            tracing::warn!("Error truncating the AOF file {name}: {e}");
            Err(())
        }
    }
}

/// The client AOF commands run as.
fn loader_client() -> super::clients::Client {
    use super::clients::{Client, ClientHandle, ConnInfo};
    let info = ConnInfo { addr: String::new(), laddr: String::new(), fd: -1, unix: false, local: true, tls: false };
    let mut c = Client::new(u64::MAX - 1, info, Arc::new(ClientHandle::default()), unix_ms(), true);
    // Blocking commands answer as their non-blocking forms, as inside MULTI.
    c.in_exec = true;
    c
}

/// Runs one command from the file, its reply discarded (Redis's fake AOF client).
fn replay(st: &mut State, client: &mut super::clients::Client, argv: Vec<Vec<u8>>, name: &str) -> Result<(), ()> {
    let argv: Vec<Bytes> = argv.into_iter().map(Bytes::from).collect();
    let cmd = super::Cmd { spec: crate::executor::registry::lookup(&argv[0]), argv };
    let (spec, _) = match super::call::resolve(&cmd) {
        Ok(found) => found,
        Err(_) => {
            tracing::warn!(
                "Unknown command '{}' reading the append only file {name}",
                String::from_utf8_lossy(&cmd.argv[0])
            );
            return Err(());
        }
    };
    let args = crate::spec::Args::new(cmd.argv);
    let now_ms = unix_ms();
    let mut ctx = super::ctx::Ctx::new(st, client, now_ms, spec);
    let _ = (spec.handler)(&mut ctx, &args);
    super::propagate::discard(st);
    st.ready_keys.clear();
    Ok(())
}

/// After loading: makes sure there is a base and an incremental file, opens the incremental
/// file for appending and persists the manifest (Redis's aofOpenIfNeededOnServerStart).
fn open_on_start(st: &mut State) -> Result<(), String> {
    let d = dir(st);
    let p = prefix(st);
    if st.aof.manifest.base.is_none() && st.aof.manifest.incrs.is_empty() {
        let name = st.aof.manifest.new_base(&p, rdb_preamble(st));
        write_base_now(st, &d.join(&name)).map_err(|e| format!("Can't create the AOF base file {name}: {e}"))?;
        tracing::info!("Creating AOF base file {name} on server start");
    }
    let (name, created) = match st.aof.manifest.incrs.last() {
        Some(f) => (f.name.clone(), false),
        None => (st.aof.manifest.new_incr(&p), true),
    };
    let file = open_append(&d.join(&name)).map_err(|e| format!("Can't open the append-only file {name}: {e}"))?;
    if created {
        tracing::info!("Creating AOF incr file {name} on server start");
    } else {
        tracing::info!("Opening AOF incr file {name} on server start");
    }
    persist_manifest(st).map_err(|e| format!("Can't persist the AOF manifest: {e}"))?;
    set_file(st, Some(file));
    turn_on(st);
    delete_history(st);
    Ok(())
}

fn turn_on(st: &mut State) {
    st.aof.status = Status::On;
    st.prop.active = true;
    for db in &mut st.dbs {
        db.log_expired = true;
    }
}

/// Writes the dataset as an RDB base file in the foreground.
fn write_base_now(st: &mut State, path: &Path) -> Result<(), String> {
    if rdb_preamble(st) {
        let version = crate::rdb::save::required_version(&st.dbs);
        let (info, opts) = super::snapshot::aof_base_options(st, version);
        let incremental = incremental_fsync(st);
        super::snapshot::save_to_file(&st.dbs, &st.functions, &info, &opts, &path.to_string_lossy(), incremental)
            .map(|_| ())
            .map_err(|e| e.to_string())
    } else {
        write_resp_file(&st.dbs, &st.functions, timestamp_line(st), path, incremental_fsync(st))
            .map_err(|e| e.to_string())
    }
}

/// aof-rewrite-incremental-fsync: a new base file is synced every 4 MB as it is written.
fn incremental_fsync(st: &State) -> bool {
    st.config.other_flag("aof-rewrite-incremental-fsync", true)
}

/// aof-use-rdb-preamble: base files are RDB (yes, the default) or commands.
fn rdb_preamble(st: &State) -> bool {
    other(st, "aof-use-rdb-preamble") != "no"
}

/// With aof-timestamp-enabled, the `#TS:` line a base file of commands starts with (Redis
/// writes one whatever the time of the last).
fn timestamp_line(st: &State) -> Option<String> {
    (other(st, "aof-timestamp-enabled") == "yes").then(|| format!("#TS:{}\r\n", crate::util::clock::unix_ms() / 1000))
}

/// Writes the dataset as commands to a temp file beside `path`, fsyncs it and renames it.
fn write_resp_file(
    dbs: &[crate::db::Db],
    functions: &crate::functions::Libraries,
    timestamp: Option<String>,
    path: &Path,
    incremental_fsync: bool,
) -> std::io::Result<()> {
    let tmp = path.with_file_name(format!("temp-rewriteaof-{}.aof", std::process::id()));
    let result = (|| {
        let file = super::snapshot::IncrementalSync::new(File::create(&tmp)?, incremental_fsync);
        let mut f = std::io::BufWriter::new(file);
        if let Some(ts) = &timestamp {
            f.write_all(ts.as_bytes())?;
        }
        crate::aof::rewrite::write_dataset(&mut f, dbs, functions)?;
        let f = f.into_inner().map_err(|e| e.into_error())?.into_inner();
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

// ---------------------------------------------------------------------------------------------
// Rewrite

/// Why BGREWRITEAOF could not start.
#[derive(Debug)]
pub enum RewriteError {
    InProgress,
    OtherChild,
    Failed,
}

/// BGREWRITEAOF: opens a new incremental file for the writes that follow, then forks a child
/// that writes the new base.
pub fn rewrite_start(st: &mut State) -> Result<(), RewriteError> {
    match st.snapshot.child.as_ref().map(|c| c.kind) {
        Some(super::snapshot::ChildKind::Aof) => return Err(RewriteError::InProgress),
        Some(_) => return Err(RewriteError::OtherChild),
        None => {}
    }
    let d = dir(st);
    if let Err(e) = std::fs::create_dir_all(&d) {
        tracing::warn!("Can't open or create append-only dir {}: {e}", d.display());
        return Err(RewriteError::Failed);
    }
    flush(st);
    if let Some(f) = &st.aof.file {
        let _ = f.sync_data();
    }
    if st.aof.status == Status::On {
        let mut next = st.aof.manifest.clone();
        let name = next.new_incr(&prefix(st));
        let file = match open_append(&d.join(&name)) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!("Can't open the append-only file {name}: {e}");
                return Err(RewriteError::Failed);
            }
        };
        let before = std::mem::replace(&mut st.aof.manifest, next);
        if let Err(e) = persist_manifest(st) {
            tracing::warn!("Can't persist the AOF manifest: {e}");
            st.aof.manifest = before;
            let _ = std::fs::remove_file(d.join(&name));
            return Err(RewriteError::Failed);
        }
        tracing::info!("Creating AOF incr file {name} on background rewrite");
        set_file(st, Some(file));
    } else if st.aof.status == Status::WaitRewrite {
        match OpenOptions::new().write(true).create(true).truncate(true).open(d.join(TEMP_INCR)) {
            Ok(f) => {
                tracing::info!("Creating AOF incr file {TEMP_INCR} on background rewrite");
                set_file(st, Some(f));
            }
            Err(e) => {
                tracing::warn!("Can't open the append-only file {TEMP_INCR}: {e}");
                return Err(RewriteError::Failed);
            }
        }
    }
    let version = crate::rdb::save::required_version(&st.dbs);
    let (info, opts) = super::snapshot::aof_base_options(st, version);
    let dir_name = d.to_string_lossy().into_owned();
    let rdb = rdb_preamble(st);
    st.aof.rewrite_rdb = rdb;
    let timestamp = timestamp_line(st);
    let child = super::snapshot::fork_child(st, super::snapshot::ChildKind::Aof, move |st: &State| {
        let target = format!("{dir_name}/temp-rewriteaof-bg-{}.aof", std::process::id());
        let incremental = incremental_fsync(st);
        if rdb {
            super::snapshot::save_to_file(&st.dbs, &st.functions, &info, &opts, &target, incremental).is_ok()
        } else {
            write_resp_file(&st.dbs, &st.functions, timestamp, Path::new(&target), incremental).is_ok()
        }
    });
    match child {
        Ok(pid) => {
            st.aof.rewrite_scheduled = false;
            st.aof.rewrite_started = Some(Instant::now());
            tracing::info!("Background append only file rewriting started by pid {pid}");
            Ok(())
        }
        Err(e) => {
            tracing::warn!("Can't rewrite append only file in background: fork: {e}");
            st.aof.last_rewrite_ok = false;
            Err(RewriteError::Failed)
        }
    }
}

/// The rewrite child ended: on success the new base replaces the old one and every
/// incremental file but the newest becomes history.
/// `signal`: the signal that ended the child, if one did (SIGUSR1 is ours: a cancel, not an
/// error).
pub fn rewrite_done(st: &mut State, pid: i32, ok: bool, signal: Option<i32>, cow: u64) {
    let started = st.aof.rewrite_started.take();
    st.aof.last_rewrite_time_sec = started.map_or(-1, |s| s.elapsed().as_secs() as i64);
    st.aof.last_cow_size = cow;
    let d = dir(st);
    let temp = d.join(format!("temp-rewriteaof-bg-{pid}.aof"));
    if !ok {
        let _ = std::fs::remove_file(&temp);
        if let Some(sig) = signal {
            if sig != libc::SIGUSR1 {
                st.aof.last_rewrite_ok = false;
                st.aof.consecutive_failures += 1;
            }
            tracing::warn!("Background AOF rewrite terminated by signal {sig}");
        } else {
            tracing::warn!("Background AOF rewrite terminated with error");
            st.aof.last_rewrite_ok = false;
            st.aof.consecutive_failures += 1;
        }
        if st.aof.status == Status::WaitRewrite {
            set_file(st, None);
            tracing::info!("Removing the temp incr aof file {TEMP_INCR} in the background");
            let _ = std::fs::remove_file(d.join(TEMP_INCR));
            st.aof.buf.clear();
            st.aof.rewrite_scheduled = true;
        }
        return;
    }
    tracing::info!("Background AOF rewrite terminated with success");
    flush(st);
    let p = prefix(st);
    let mut next = st.aof.manifest.clone();
    let base = next.new_base(&p, st.aof.rewrite_rdb);
    if let Err(e) = std::fs::rename(&temp, d.join(&base)) {
        tracing::warn!("Error trying to rename the temporary AOF base file {}: {e}", temp.display());
        let _ = std::fs::remove_file(&temp);
        st.aof.last_rewrite_ok = false;
        st.aof.consecutive_failures += 1;
        return;
    }
    tracing::info!(
        "Successfully renamed the temporary AOF base file {} into {base}",
        temp.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    );
    if st.aof.status == Status::WaitRewrite {
        let incr = next.new_incr(&p);
        if let Err(e) = std::fs::rename(d.join(TEMP_INCR), d.join(&incr)) {
            tracing::warn!("Error trying to rename the temporary AOF incr file {TEMP_INCR} into {incr}: {e}");
            st.aof.last_rewrite_ok = false;
            st.aof.consecutive_failures += 1;
            return;
        }
        tracing::info!("Successfully renamed the temporary AOF incr file {TEMP_INCR} into {incr}");
    }
    next.rewritten_incrs_to_history(st.aof.file.is_some());
    let before = std::mem::replace(&mut st.aof.manifest, next);
    if let Err(e) = persist_manifest(st) {
        tracing::warn!("Can't persist the AOF manifest: {e}");
        st.aof.manifest = before;
        st.aof.last_rewrite_ok = false;
        st.aof.consecutive_failures += 1;
        return;
    }
    if st.aof.status == Status::WaitRewrite {
        turn_on(st);
        tracing::info!("AOF rewrite done, AOF is now on.");
    }
    delete_history(st);
    st.aof.current_size = sizes(st);
    st.aof.base_size = st.aof.current_size;
    st.aof.rewrites += 1;
    st.aof.last_rewrite_ok = true;
    st.aof.consecutive_failures = 0;
    tracing::info!("Background AOF rewrite finished successfully");
}

/// Cron: writes what is buffered, then starts a scheduled rewrite (BGREWRITEAOF while a child
/// ran or inside EXEC, with the AOF on or off, as Redis's serverCron) or one the growth asks for.
pub fn cron(st: &mut State) {
    if st.aof.status != Status::Off {
        flush_cron(st);
        st.aof.fsync.held.store(fsync_held(st), Ordering::Release);
    }
    if st.snapshot.child.is_some() {
        return;
    }
    if st.aof.rewrite_scheduled && !rewrite_limited(st) {
        let _ = rewrite_start(st);
        return;
    }
    if st.aof.status != Status::On {
        return;
    }
    let percentage: u64 = other(st, "auto-aof-rewrite-percentage").parse().unwrap_or(0);
    let min_size: u64 = other(st, "auto-aof-rewrite-min-size").parse().unwrap_or(64 << 20);
    let (cur, base) = (st.aof.current_size, st.aof.base_size.max(1));
    if percentage > 0 && cur > min_size && cur > base {
        let growth = (cur - base) * 100 / base;
        if growth >= percentage && !rewrite_limited(st) {
            tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
            let _ = rewrite_start(st);
        }
    }
}

/// Failed rewrites in a row after which cron's rewrites are held back (Redis's
/// AOF_REWRITE_LIMITE_THRESHOLD), and the longest hold (AOF_REWRITE_LIMITE_MAX_MINUTES).
const LIMIT_THRESHOLD: u64 = 3;
const LIMIT_MAX_MINUTES: u64 = 60;

/// Whether cron must not start a rewrite now (Redis's aofRewriteLimited): after three failures
/// in a row, the next try waits 1 minute, then 2, 4, ... up to an hour. BGREWRITEAOF by hand
/// clears the failure count, and with it the hold.
fn rewrite_limited(st: &mut State) -> bool {
    let lim = &mut st.aof.limit;
    if st.aof.consecutive_failures < LIMIT_THRESHOLD {
        *lim = RewriteLimit::default();
        return false;
    }
    if let Some(at) = lim.next_try {
        if Instant::now() < at {
            return true;
        }
        lim.next_try = None;
        return false;
    }
    lim.delay_minutes = if lim.delay_minutes == 0 { 1 } else { (lim.delay_minutes * 2).min(LIMIT_MAX_MINUTES) };
    lim.next_try = Some(Instant::now() + Duration::from_secs(lim.delay_minutes * 60));
    tracing::warn!(
        "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {} minutes",
        lim.delay_minutes
    );
    true
}

/// Cron's write of the buffer, and the latency of group commit's writes and fsyncs.
fn flush_cron(st: &mut State) {
    flush(st);
    // Group commit's writes and fsyncs ran in the runtime's park hook: their worst goes to the
    // latency monitor here.
    let write_us = st.aof.fsync.worst_write_us.swap(0, Ordering::Relaxed);
    let fsync_us = st.aof.fsync.worst_fsync_us.swap(0, Ordering::Relaxed);
    if write_us >= 1000 {
        let with = if st.snapshot.child.is_some() { "aof-write-active-child" } else { "aof-write-alone" };
        crate::executor::record_latency(st, with, write_us);
        crate::executor::record_latency(st, "aof-write", write_us);
    }
    crate::executor::record_latency(st, "aof-fsync-always", fsync_us);
}

/// CONFIG SET appendonly: starts (by a rewrite) or stops writing the AOF. `in_exec`: the
/// CONFIG SET ran inside MULTI/EXEC, where Redis (startAppendOnly) does not fork mid-transaction
/// but schedules the rewrite for cron, as it does while another kind of child runs. An AOF
/// rewrite already running (BGREWRITEAOF with the AOF off) is killed and started again, since
/// it has no incremental file to switch to.
pub fn config_changed(st: &mut State, in_exec: bool) {
    st.aof.timestamps = None;
    let want = st.config.appendonly;
    match (want, st.aof.status) {
        (true, Status::Off) => {
            if st.aof.manifest == Manifest::default() {
                if let Ok(text) = std::fs::read(manifest_path(st)) {
                    if let Ok(m) = Manifest::parse(&text) {
                        st.aof.manifest = m;
                    }
                }
            }
            st.aof.status = Status::WaitRewrite;
            st.prop.active = true;
            for db in &mut st.dbs {
                db.log_expired = true;
            }
            let child = st.snapshot.child.as_ref().map(|c| c.kind);
            if child.is_some_and(|k| k != super::snapshot::ChildKind::Aof) {
                st.aof.rewrite_scheduled = true;
                tracing::warn!(
                    "AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible."
                );
                return;
            }
            if in_exec {
                st.aof.rewrite_scheduled = true;
                tracing::warn!(
                    "AOF was enabled during a transaction. An AOF background was scheduled to start when possible."
                );
                return;
            }
            if child.is_some() {
                tracing::warn!(
                    "AOF was enabled but there is already an AOF rewriting in background. Stopping background AOF and starting a rewrite now."
                );
                kill_rewrite(st);
            }
            if rewrite_start(st).is_err() {
                tracing::warn!(
                    "Redis needs to enable the AOF but can't trigger a background AOF rewrite operation. Check the above logs for more info about the error."
                );
                st.aof.status = Status::Off;
                st.prop.active = st.repl.backlog.is_some();
                st.config.appendonly = false;
            }
        }
        (false, Status::On | Status::WaitRewrite) => stop(st),
        _ => {}
    }
    // CONFIG SET aof-disable-auto-gc no deletes the history kept meanwhile (Redis's
    // updateAofAutoGCEnabled); otherwise there is none.
    delete_history(st);
}

/// Kills the running AOF rewrite child (Redis's killAppendOnlyChild); its temp file goes too.
fn kill_rewrite(st: &mut State) {
    let Some(pid) = st.snapshot.child.as_ref().filter(|c| c.kind == super::snapshot::ChildKind::Aof).map(|c| c.pid)
    else {
        return;
    };
    tracing::info!("Killing running AOF rewrite child: {pid}");
    super::snapshot::kill_child(st);
    st.aof.rewrite_started = None;
}

/// Removes the base file a killed rewrite child was writing (it writes in the AOF directory).
pub fn remove_rewrite_temp(st: &State, pid: i32) {
    let _ = std::fs::remove_file(dir(st).join(format!("temp-rewriteaof-bg-{pid}.aof")));
}

/// Stops writing the AOF: flushes and fsyncs it and kills a running rewrite.
fn stop(st: &mut State) {
    flush(st);
    kill_rewrite(st);
    if st.aof.status == Status::WaitRewrite {
        let _ = std::fs::remove_file(dir(st).join(TEMP_INCR));
    }
    set_file(st, None);
    st.aof.buf.clear();
    st.aof.status = Status::Off;
    st.aof.rewrite_scheduled = false;
    // Replicas still consume what commands propagate.
    st.prop.active = st.repl.backlog.is_some();
}

/// SHUTDOWN and signals: everything buffered reaches the disk.
pub fn shutdown(st: &mut State) {
    if st.aof.status == Status::Off {
        return;
    }
    flush(st);
    if let Some(f) = &st.aof.file {
        tracing::info!("Calling fsync() on the AOF file.");
        let _ = f.sync_all();
    }
    st.aof.fsync.sync_written();
}
