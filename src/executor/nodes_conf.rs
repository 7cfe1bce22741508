//! nodes.conf's writer: the thread that does every save's file I/O, so a save costs the executor
//! only the rendering of the text (`executor::cluster` renders it and decides when to save; this
//! module only writes).
//!
//! Redis 7.0 saves in beforeSleep on its main thread (clusterSaveConfigOrDie, fsync when an
//! epoch changed), so every client of the node waits for the disk; a replica's promotion or a
//! vote cost 2-60 ms of executor time here on a loaded disk. What Redis guarantees by that order,
//! and how it stays guaranteed without the executor waiting:
//!
//! - Saves are atomic without making or freeing a file: the text is written into a spare file
//!   beside nodes.conf (`nodes.conf.prev`, which holds the version before at rest) over its own
//!   blocks, synced, and swapped with nodes.conf in one step (RENAME_EXCHANGE), so nodes.conf is
//!   always one whole save whatever stops the process or the machine; a durable save then syncs
//!   the directory. Writing a new temp file and renaming it over nodes.conf, as this writer first
//!   did (and Redis 7.2 does), freed the old file on every save: ~0.75 ms of kernel time per save,
//!   3-5 saves per slot in a resharding, and on a disk mounted with `discard` a synchronous
//!   discard of its blocks, ~12 ms per durable save that the executor waited for on the SETSLOT
//!   NODE ending an import; the writers' I/O then delayed every node's clients
//!   (`tools/cluster_bus_stall.py`, reshard phase). Redis 7.0 rewrites nodes.conf in place, which
//!   a power loss mid-write can tear. Saves are applied in order: one thread writes them one
//!   after another. Saves handed over while one is being written
//!   coalesce into one later write of the newest text (fsynced if any of them asked).
//! - Bus messages leave only after the save that was due when they were queued is on disk: a
//!   FAILOVER_AUTH_ACK after lastVoteEpoch, a promoted replica's PONG after its new role (always
//!   fsynced, as Redis's clusterFailoverReplaceYourMaster does), an election's
//!   FAILOVER_AUTH_REQUEST after the current epoch it carries (Redis writes bus links after
//!   beforeSleep's save). A save that changes an epoch, or a promotion's, raises the bus gate
//!   (`hold`) to its sequence number before any later message is queued, and each link's writer
//!   (`server::cluster_bus`) waits for `output_ready` before it writes what it took from the
//!   channel. Only the links wait; the executor goes on serving clients.
//! - A client's CLUSTER command whose change needs an fsync (an epoch: SET-CONFIG-EPOCH,
//!   BUMPEPOCH, SETSLOT NODE bumping, RESET; FAILOVER TAKEOVER's promotion) replies once the
//!   saves holding the bus are written, as Redis replies after beforeSleep's fsync. Its reply
//!   waits, not the executor (`reply_when_held`: a `Later` this writer completes): the SETSLOT
//!   NODE that ends each slot's import in a resharding bumps the epoch on a node that does not
//!   hold the highest one, and its two syncs held every client of the node for 4-17 ms. Inside
//!   MULTI or a script, whose replies are immediate, the executor waits (`wait_held`). CLUSTER
//!   SAVECONFIG and startup wait too and report the failure as Redis does. Other client saves (ADDSLOTS,
//!   SETSLOT without a bump: 3-5 per slot in a resharding) are not waited for: they are in the
//!   file once the writer's next save is synced and swapped in, and `flush` lands them before a
//!   shutdown; the only thing lost against Redis is a kill -9 within that save (a data sync, ~4
//!   ms on this VM's disk), which leaves the previous whole nodes.conf where Redis's page cache
//!   would have kept the new one.
//! - A background save that fails ends the process, as Redis's clusterSaveConfigOrDie does:
//!   letting gated bus output go without the file would break the vote's guarantee.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::resp::reply::Later;

/// One save: the file, the text and whether it must be on disk before it counts as written.
pub struct Job {
    pub path: String,
    pub text: String,
    pub fsync: bool,
}

struct Queued {
    job: Job,
    seq: u64,
    /// A save nobody waits for is in it (`post`, perhaps coalesced with one that
    /// `write_and_wait` waits for): a failure is fatal, as Redis's beforeSleep save dies before a
    /// SAVECONFIG could report; otherwise it is reported to the waiter.
    posted: bool,
}

#[derive(Default)]
struct WriterState {
    /// The newest save not started yet.
    next: Option<Queued>,
    busy: bool,
    /// The last sequence number handed out.
    seq: u64,
    /// The last sequence number written (done or failed).
    done: u64,
    /// A reported save's failure: its sequence number and the error.
    failed: Option<(u64, String)>,
    /// Client replies waiting for saves: each completes with its bytes once `done` reaches its
    /// sequence number.
    replies: Vec<(u64, Arc<Later>, Vec<u8>)>,
}

pub struct ConfWriter {
    state: Mutex<WriterState>,
    changed: Condvar,
    /// Bus output waits until `done` reaches this.
    gate: AtomicU64,
    /// `WriterState::done`, for the links to read without the lock.
    done: AtomicU64,
    /// Raised when `done` moves.
    wrote: tokio::sync::Notify,
    /// No thread could be started: saves are written by whoever asks.
    inline: bool,
}

impl ConfWriter {
    /// A writer with its thread (or, failing that, one that writes inline).
    pub fn start() -> Arc<ConfWriter> {
        let make = |inline| ConfWriter {
            state: Mutex::new(WriterState::default()),
            changed: Condvar::new(),
            gate: AtomicU64::new(0),
            done: AtomicU64::new(0),
            wrote: tokio::sync::Notify::new(),
            inline,
        };
        let w = Arc::new(make(false));
        let runner = w.clone();
        match std::thread::Builder::new().name("nodes-conf".into()).spawn(move || runner.run()) {
            Ok(_) => w,
            Err(_) => Arc::new(make(true)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, WriterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a save nobody waits for; `hold`: bus output queued from now on waits for it.
    pub fn post(&self, job: Job, hold: bool) {
        let seq = self.enqueue(job, false);
        if hold {
            self.gate.fetch_max(seq, Ordering::AcqRel);
        }
        if self.inline {
            self.write_pending();
        }
    }

    /// Queues a save and waits until it (or a later one holding it) is written.
    pub fn write_and_wait(&self, job: Job) -> Result<(), String> {
        let seq = self.enqueue(job, true);
        if self.inline {
            self.write_pending();
        }
        let mut g = self.lock();
        while g.done < seq {
            g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        match &g.failed {
            Some((s, e)) if *s == seq => Err(e.clone()),
            _ => Ok(()),
        }
    }

    fn enqueue(&self, job: Job, report: bool) -> u64 {
        let mut g = self.lock();
        g.seq += 1;
        let seq = g.seq;
        let (mut fsync, mut posted) = (job.fsync, !report);
        if let Some(old) = g.next.take() {
            fsync |= old.job.fsync;
            posted |= old.posted;
        }
        g.next = Some(Queued { job: Job { fsync, ..job }, seq, posted });
        drop(g);
        self.changed.notify_all();
        seq
    }

    /// Waits until every queued save is written (shutdown).
    pub fn flush(&self) {
        let mut g = self.lock();
        while g.busy || g.next.is_some() {
            g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits until the saves that hold bus output are written (a client's CLUSTER command).
    pub fn wait_held(&self) {
        let need = self.gate.load(Ordering::Acquire);
        let mut g = self.lock();
        while g.done < need {
            g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A client's reply (`bytes`) that must follow the saves holding bus output, as
    /// `wait_held` waits for: None when they are written already (reply now), else a `Later`
    /// this writer completes once they are, so the client waits and the executor does not.
    pub fn reply_when_held(&self, bytes: Vec<u8>) -> Option<Arc<Later>> {
        let need = self.gate.load(Ordering::Acquire);
        let mut g = self.lock();
        if g.done >= need {
            return None;
        }
        let later = Arc::new(Later::default());
        g.replies.push((need, later.clone(), bytes));
        Some(later)
    }

    /// Returns once the saves due when it was called are on disk (see the module header).
    pub async fn output_ready(&self) {
        let need = self.gate.load(Ordering::Acquire);
        loop {
            let wrote = self.wrote.notified();
            tokio::pin!(wrote);
            wrote.as_mut().enable();
            if self.done.load(Ordering::Acquire) >= need {
                return;
            }
            wrote.await;
        }
    }

    fn run(&self) {
        loop {
            let mut g = self.lock();
            while g.next.is_none() {
                g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            drop(g);
            self.write_pending();
        }
    }

    /// Writes the queued save, if any.
    fn write_pending(&self) {
        let q = {
            let mut g = self.lock();
            let Some(q) = g.next.take() else { return };
            g.busy = true;
            q
        };
        let outcome = write(&q.job).map_err(|e| format!("Could not save cluster config file: {e}"));
        let mut g = self.lock();
        match outcome {
            Ok(()) => {}
            Err(e) if !q.posted => g.failed = Some((q.seq, e)),
            Err(e) => {
                tracing::warn!("{e}");
                tracing::warn!("Fatal: can't update cluster config file.");
                std::process::exit(1);
            }
        }
        g.busy = false;
        g.done = q.seq;
        self.done.store(q.seq, Ordering::Release);
        let mut ready = Vec::new();
        g.replies.retain_mut(|(need, later, bytes)| {
            if *need > q.seq {
                return true;
            }
            ready.push((later.clone(), std::mem::take(bytes)));
            false
        });
        drop(g);
        for (later, bytes) in ready {
            later.complete(vec![bytes]);
        }
        self.changed.notify_all();
        self.wrote.notify_waiters();
    }
}

/// The spare file beside nodes.conf: at rest it holds the version before the last save; each
/// save writes the new text into it and swaps it with nodes.conf.
pub fn spare_path(path: &str) -> String {
    format!("{path}.prev")
}

/// One save, atomic as a rename is and without making or freeing a file: the text goes into the
/// spare file over its own blocks, which is synced, then swapped with nodes.conf in one step
/// (renameat2 RENAME_EXCHANGE), so nodes.conf is always one whole save, the old or the new,
/// whatever stops the process or the machine. A durable save then syncs the directory, so the
/// swap itself survives a power loss. The first save (no spare yet) and a filesystem without
/// RENAME_EXCHANGE fall back to a plain rename over nodes.conf.
fn write(job: &Job) -> std::io::Result<()> {
    use std::io::Write;
    let spare = spare_path(&job.path);
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(&spare)?;
    f.write_all(job.text.as_bytes())?;
    // Within the file's last block (nodes.conf is a few KB), the cut frees nothing.
    f.set_len(job.text.len() as u64)?;
    f.sync_data()?;
    drop(f);
    if !exchange(&spare, &job.path)? {
        std::fs::rename(&spare, &job.path)?;
    }
    if job.fsync {
        let dir = std::path::Path::new(&job.path).parent().filter(|d| !d.as_os_str().is_empty());
        std::fs::File::open(dir.unwrap_or(std::path::Path::new(".")))?.sync_all()?;
    }
    Ok(())
}

/// Swaps the two names atomically; false when the swap cannot be done here (no `to` yet, or a
/// filesystem or kernel without RENAME_EXCHANGE), for the caller to rename instead.
fn exchange(from: &str, to: &str) -> std::io::Result<bool> {
    use std::ffi::CString;
    let (Ok(from), Ok(to)) = (CString::new(from), CString::new(to)) else {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    };
    // SAFETY: both paths are NUL-terminated and outlive the call.
    let rc =
        unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_EXCHANGE) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => Ok(false),
        _ => Err(err),
    }
}
