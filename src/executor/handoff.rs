//! Sockets accepted outside the accept loops. While a script is busy (see `scripting::busy`)
//! the thread that runs the accept loops is inside the script, so new connections are accepted
//! there from the listeners registered here, answered while the script runs, and handed back
//! here for the accept loops to adopt as ordinary connections when it ends. TLS connections
//! register their stream here too: the script cannot read ciphertext from the socket, so it
//! reaches their commands and writes their replies through the stream's TLS session.

use std::collections::BTreeMap;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Mutex, OnceLock};

/// A TLS connection's stream as a busy script uses it, on the thread its connection task runs
/// on (so the task is parked meanwhile and the stream is free).
pub trait PlainIo: Send {
    /// Takes what the socket holds now, without waiting, and returns the first run of
    /// plaintext received and not consumed (empty when there is none).
    fn peek(&mut self) -> &[u8];
    /// Drops the first `n` plaintext bytes (the commands answered).
    fn consume(&mut self, n: usize);
    /// Writes `bytes` as far as the socket takes them now; returns how many it took. A TLS
    /// session takes them all, and its connection writes the records left when it runs again.
    fn send(&mut self, bytes: &[u8]) -> usize;
    /// Writes what the session still holds as far as the socket takes it now; false while some
    /// is left for a writable socket (a plain socket holds nothing of its own).
    fn flush(&mut self) -> bool {
        true
    }
}

/// A TLS stream shared by its connection task and a busy script.
pub type SharedPlainIo = Arc<Mutex<dyn PlainIo>>;

/// The TLS streams of the connected clients, by client id.
static TLS_STREAMS: Mutex<BTreeMap<u64, SharedPlainIo>> = Mutex::new(BTreeMap::new());

/// Makes client `id`'s TLS stream reachable by a busy script (until `unregister_tls`).
pub fn register_tls(id: u64, io: SharedPlainIo) {
    TLS_STREAMS.lock().unwrap_or_else(|p| p.into_inner()).insert(id, io);
}

pub fn unregister_tls(id: u64) {
    TLS_STREAMS.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
}

/// Client `id`'s TLS stream, when it has one.
pub fn tls_stream(id: u64) -> Option<SharedPlainIo> {
    TLS_STREAMS.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
}

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

/// The TLS listeners: not accepted on by a busy script (a handshake needs the connection
/// task), only stopped by `stop_listening`.
static TLS_LISTENERS: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

/// Replaces the TLS listeners (at start, and when CONFIG SET tls-port rebound them); returns
/// the old ones.
pub fn replace_tls_listeners(fds: &[RawFd]) -> Vec<RawFd> {
    std::mem::replace(&mut *TLS_LISTENERS.lock().unwrap_or_else(|p| p.into_inner()), fds.to_vec())
}

/// Stops every listener accepting (an exit from inside a busy script: a client that sees its
/// connection close must then find the port closed, as when Redis exits).
pub fn stop_listening() {
    let tls = TLS_LISTENERS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    for fd in listeners().into_iter().map(|(fd, _)| fd).chain(tls) {
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
