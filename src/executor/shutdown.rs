//! Shutting down as Redis 7.0 does it: SHUTDOWN and SIGTERM/SIGINT first give lagging replicas
//! up to `shutdown-timeout` seconds to acknowledge the whole stream, with writes paused
//! meanwhile, then stop background children, flush the AOF, save when asked, and exit; a step
//! that fails (a save, an AOF still being written for the first time) cancels the shutdown and
//! the server keeps serving. Clients that sent SHUTDOWN stay blocked while it waits and hear
//! the error if it is cancelled (SHUTDOWN ABORT, or a failure).
//!
//! A signal only raises a flag (`SIGNALLED`), as Redis's handler sets shutdown_asap; the cron
//! acts on it, so DEBUG PAUSE-CRON holds it and SHUTDOWN ABORT can cancel it. The flag lives
//! outside `State` because the thread that receives signals reads it while the executor may be
//! busy (a second SIGINT during the final save exits at once).
//!
//! This module decides; the exit itself belongs to `server`, woken through `Shutdown::exit`.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use super::State;
use crate::resp::Reply;
use crate::util::clock::unix_ms;

/// A signal asked for a shutdown that has not been carried out (Redis's shutdown_asap).
static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// The last shutdown signal received (libc's number).
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// How a shutdown was asked for: SHUTDOWN's flags, or a signal's shutdown-on-sig* directive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    pub save: bool,
    pub nosave: bool,
    /// Do not wait for lagging replicas.
    pub now: bool,
    /// Exit even when the save or the AOF fails.
    pub force: bool,
}

impl Flags {
    /// The flags of a shutdown-on-sigint / shutdown-on-sigterm value (`default` is none).
    pub fn from_directive(value: &str) -> Flags {
        let has = |w: &str| value.split_whitespace().any(|v| v.eq_ignore_ascii_case(w));
        Flags { save: has("save"), nosave: has("nosave"), now: has("now"), force: has("force") }
    }
}

/// The shutdown under way, if any.
#[derive(Debug, Default)]
pub struct Shutdown {
    /// When the wait for lagging replicas gives up (unix ms); 0 while no shutdown is under way
    /// (Redis's shutdown_mstime).
    pub deadline_ms: i64,
    pub flags: Flags,
    /// Clients blocked in SHUTDOWN, in arrival order.
    pub waiting: Vec<u64>,
    /// Woken once the server is to exit: the listeners are closed, the process ends.
    pub exit: Arc<tokio::sync::Notify>,
}

impl Shutdown {
    /// Whether a shutdown is waiting for replicas (Redis's isShutdownInitiated).
    pub fn initiated(&self) -> bool {
        self.deadline_ms != 0
    }
}

/// A SIGINT or SIGTERM arrived (called from the thread that receives them): the cron shuts
/// down.
pub fn on_signal(signal: i32) {
    LAST_SIGNAL.store(signal, Ordering::Release);
    SIGNALLED.store(true, Ordering::Release);
}

/// Whether a signal's shutdown is pending.
pub fn signalled() -> bool {
    SIGNALLED.load(Ordering::Acquire)
}

/// Seconds to wait for lagging replicas (shutdown-timeout; 0 does not wait).
fn timeout_s(st: &State) -> i64 {
    st.config.other.get("shutdown-timeout").and_then(|v| v.parse().ok()).unwrap_or(10)
}

/// Whether every replica acknowledged the whole stream (Redis's isReadyToShutdown).
fn replicas_in_sync(st: &State) -> bool {
    st.repl.replicas.iter().all(|r| r.ack_offset == st.repl.offset)
}

/// A shutdown begins: the log line, and systemd's STOPPING=1, as Redis's prepareForShutdown.
pub fn announce(st: &State) {
    tracing::warn!("User requested shutdown...");
    if st.config.notify_systemd {
        crate::daemon::notify_systemd("STOPPING=1\n");
    }
}

/// Begins a shutdown (Redis's prepareForShutdown). `Ok` when the server is to exit now; `Err`
/// when it is waiting for replicas, or another shutdown is under way (the caller stays
/// blocked), or the shutdown failed and was cancelled (`Failed`).
pub fn prepare(st: &mut State, mut flags: Flags) -> Result<(), NotYet> {
    if st.shutdown_state.initiated() {
        return Err(NotYet::Waiting);
    }
    // A half-loaded dataset must not overwrite the dump.
    if st.loading.is_some() || st.repl.sync_loading == Some(false) {
        flags.save = false;
        flags.nosave = true;
    }
    st.shutdown_state.flags = flags;
    announce(st);
    let timeout = timeout_s(st);
    if !flags.now && timeout != 0 && !replicas_in_sync(st) {
        st.shutdown_state.deadline_ms = unix_ms().saturating_add(timeout.saturating_mul(1000));
        if !st.paused(unix_ms()) {
            super::replication::request_acks(st);
        }
        st.pause_held |= super::PAUSE_SHUTDOWN;
        tracing::info!("Waiting for replicas before shutting down.");
        return Err(NotYet::Waiting);
    }
    finish(st).map_err(|()| NotYet::Failed)
}

/// Why `prepare` did not end in an exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotYet {
    /// Lagging replicas are given time (or another shutdown already waits for them).
    Waiting,
    /// A step failed: the shutdown was cancelled, and the error logged.
    Failed,
}

/// The shutdown proper (Redis's finishShutdown): reports the replicas' lag, stops background
/// children, syncs the AOF, saves if asked, closes the listeners and has the server exit. On a
/// failure it cancels the shutdown.
fn finish(st: &mut State) -> Result<(), ()> {
    let flags = st.shutdown_state.flags;
    let now_s = unix_ms() / 1000;
    let mut lagging = 0;
    for r in &st.repl.replicas {
        if r.ack_offset != st.repl.offset {
            lagging += 1;
            let online = r.state == super::replication::ReplicaState::Online;
            let lag = if online { now_s - r.ack_ms / 1000 } else { 0 };
            tracing::warn!(
                "Lagging replica {}:{} reported offset {} behind master, lag={lag}, state={}.",
                r.ip,
                r.port,
                st.repl.offset - r.ack_offset,
                r.state.name()
            );
        }
    }
    let replicas = st.repl.replicas.len();
    if replicas > 0 {
        tracing::info!("{} of {replicas} replicas are in sync when shutting down.", replicas - lagging);
    }
    if let Some(kind) = st.snapshot.child.as_ref().map(|c| c.kind) {
        match kind {
            super::snapshot::ChildKind::Rdb => {
                tracing::warn!("There is a child saving an .rdb. Killing it!");
            }
            super::snapshot::ChildKind::Aof => {
                // The first rewrite after CONFIG SET appendonly yes is the only complete AOF
                // there will be: exiting now would lose the dataset.
                if st.aof.status == super::aof::Status::WaitRewrite {
                    if flags.force {
                        tracing::warn!("Writing initial AOF. Exit anyway.");
                    } else {
                        tracing::warn!("Writing initial AOF, can't exit.");
                        return fail(st);
                    }
                }
                tracing::warn!("There is a child rewriting the AOF. Killing it!");
            }
        }
    }
    let save = flags.save || (!flags.nosave && !st.config.save.is_empty());
    if super::snapshot::shutdown_save(st, save).is_err() {
        if flags.force {
            tracing::warn!("Error trying to save the DB. Exit anyway.");
        } else {
            tracing::warn!("Error trying to save the DB, can't exit.");
            return fail(st);
        }
    }
    if let Some(path) = &st.config.pidfile {
        tracing::info!("Removing the pid file.");
        let _ = std::fs::remove_file(path);
    }
    if st.cluster.is_some() {
        // A nodes.conf save handed to its writer thread lands before the process goes.
        super::cluster::flush_config(st);
    }
    // A client that sees its connection close must find the port closed, as when Redis exits.
    super::handoff::stop_listening();
    tracing::warn!("Redis is now ready to exit, bye bye...");
    st.shutdown = Some(if save { super::ShutdownRequest::Save } else { super::ShutdownRequest::NoSave });
    st.shutdown_state.exit.notify_one();
    Ok(())
}

fn fail(st: &mut State) -> Result<(), ()> {
    tracing::warn!("Errors trying to shut down the server. Check the logs for more information.");
    cancel(st);
    Err(())
}

/// Ends the shutdown under way: the blocked SHUTDOWN callers hear the error, writes resume.
fn cancel(st: &mut State) {
    SIGNALLED.store(false, Ordering::Release);
    LAST_SIGNAL.store(0, Ordering::Release);
    st.shutdown_state.deadline_ms = 0;
    st.shutdown_state.flags = Flags::default();
    for id in std::mem::take(&mut st.shutdown_state.waiting) {
        super::blocking::finish(st, id, Reply::error("ERR Errors trying to SHUTDOWN. Check logs."));
    }
    st.pause_held &= !super::PAUSE_SHUTDOWN;
}

/// SHUTDOWN ABORT: cancels a shutdown that waits for replicas, or one a signal asked for that
/// the cron has not carried out. False when there is none.
pub fn abort(st: &mut State) -> bool {
    if st.shutdown_state.initiated() {
        cancel(st);
    } else if SIGNALLED.load(Ordering::Acquire) {
        SIGNALLED.store(false, Ordering::Release);
    } else {
        return false;
    }
    tracing::info!("Shutdown manually aborted.");
    true
}

/// A client blocked in SHUTDOWN went away, or was unblocked another way.
pub fn forget(st: &mut State, id: u64) {
    st.shutdown_state.waiting.retain(|&w| w != id);
}

/// From the cron (Redis's serverCron): carries out a signal's shutdown, and ends the wait for
/// replicas once they all caught up or shutdown-timeout passed.
pub fn cron(st: &mut State, now_ms: i64) {
    if SIGNALLED.load(Ordering::Acquire) && !st.shutdown_state.initiated() {
        let name = match LAST_SIGNAL.load(Ordering::Acquire) {
            libc::SIGINT => "shutdown-on-sigint",
            _ => "shutdown-on-sigterm",
        };
        let flags = Flags::from_directive(st.config.other.get(name).map_or("", String::as_str));
        let _ = prepare(st, flags);
    } else if st.shutdown_state.initiated() && (now_ms >= st.shutdown_state.deadline_ms || replicas_in_sync(st)) {
        let _ = finish(st);
    }
}

/// Milliseconds left before the wait for replicas gives up (INFO's shutdown_in_milliseconds),
/// None when no shutdown waits.
pub fn remaining_ms(st: &State, now_ms: i64) -> Option<i64> {
    st.shutdown_state.initiated().then(|| (st.shutdown_state.deadline_ms - now_ms).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directive_flags() {
        assert_eq!(Flags::from_directive("default"), Flags::default());
        let f = Flags::from_directive("nosave now");
        assert!(f.nosave && f.now && !f.save && !f.force);
        let f = Flags::from_directive("save force");
        assert!(f.save && f.force);
    }
}
