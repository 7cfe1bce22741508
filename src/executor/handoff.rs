//! Sockets accepted outside the accept loops. While a script is busy (see `scripting::busy`)
//! the thread that runs the accept loops is inside the script, so new connections are accepted
//! there from the listeners registered here, answered while the script runs, and handed back
//! here for the accept loops to adopt as ordinary connections when it ends.

use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Mutex, OnceLock};

/// A listening socket's descriptor and whether it is the unix socket.
static LISTENERS: Mutex<Vec<(RawFd, bool)>> = Mutex::new(Vec::new());
/// Accepted sockets waiting for an accept loop (descriptor, is unix).
static ADOPT: Mutex<Vec<(OwnedFd, bool)>> = Mutex::new(Vec::new());

fn wakeup() -> &'static tokio::sync::Notify {
    static NOTIFY: OnceLock<tokio::sync::Notify> = OnceLock::new();
    NOTIFY.get_or_init(tokio::sync::Notify::new)
}

/// Records a listener (called once per bound socket).
pub fn register_listener(fd: RawFd, unix: bool) {
    LISTENERS.lock().unwrap_or_else(|p| p.into_inner()).push((fd, unix));
}

/// Replaces the TCP listeners (CONFIG SET port or bind rebound them); returns the old ones.
pub fn replace_tcp_listeners(fds: &[RawFd]) -> Vec<RawFd> {
    let mut all = LISTENERS.lock().unwrap_or_else(|p| p.into_inner());
    let old = all.iter().filter(|&&(_, unix)| !unix).map(|&(fd, _)| fd).collect();
    all.retain(|&(_, unix)| unix);
    all.extend(fds.iter().map(|&fd| (fd, false)));
    old
}

/// Stops every listener accepting (an exit from inside a busy script: a client that sees its
/// connection close must then find the port closed, as when Redis exits).
pub fn stop_listening() {
    for (fd, _) in listeners() {
        // SAFETY: shutdown on a listening descriptor the accept loops own; it is not closed here.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }
}

pub fn listeners() -> Vec<(RawFd, bool)> {
    LISTENERS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Hands accepted sockets to the accept loops and wakes them.
pub fn hand_over(sockets: Vec<(OwnedFd, bool)>) {
    if sockets.is_empty() {
        return;
    }
    ADOPT.lock().unwrap_or_else(|p| p.into_inner()).extend(sockets);
    wakeup().notify_waiters();
}

/// Takes the handed-over sockets of one kind (TCP or unix).
pub fn take(unix: bool) -> Vec<OwnedFd> {
    let mut all = ADOPT.lock().unwrap_or_else(|p| p.into_inner());
    let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut *all).into_iter().partition(|(_, u)| *u == unix);
    *all = rest;
    mine.into_iter().map(|(fd, _)| fd).collect()
}

/// Resolves when sockets may have been handed over.
pub async fn handed_over() {
    wakeup().notified().await
}
