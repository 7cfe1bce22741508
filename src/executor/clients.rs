//! Per-client state the executor keeps: selected db, protocol, name, auth, timestamps, and the
//! handle through which the executor asks the connection task to close.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// Shared between a connection task and the executor: the executor sets `kill` (CLIENT KILL,
/// idle timeout, SHUTDOWN) and notifies; the connection task closes the socket.
#[derive(Debug, Default)]
pub struct ClientHandle {
    kill: AtomicBool,
    /// Replies produced outside the client's own batches (served blocking commands, later pushes).
    outbox: std::sync::Mutex<Vec<u8>>,
    /// Mirrors the client's auth state for the parser's unauthenticated limits.
    authenticated: AtomicBool,
    pub notify: Notify,
    /// A snapshot for the connection to stream after this batch's replies (SYNC/PSYNC).
    rdb_transfer: std::sync::Mutex<Option<crate::commands::replication::RdbTransfer>>,
}

impl ClientHandle {
    pub fn request_close(&self) {
        self.kill.store(true, Ordering::Release);
        self.notify.notify_one();
    }

    /// Queues bytes for the connection to write and wakes it.
    pub fn push_output(&self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        if outbox.is_empty() {
            *outbox = bytes;
        } else {
            outbox.extend_from_slice(&bytes);
        }
        drop(outbox);
        self.notify.notify_one();
    }

    /// Takes what was queued by `push_output`.
    pub fn take_output(&self) -> Vec<u8> {
        std::mem::take(&mut *self.outbox.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn close_requested(&self) -> bool {
        self.kill.load(Ordering::Acquire)
    }

    pub fn set_authenticated(&self, yes: bool) {
        self.authenticated.store(yes, Ordering::Relaxed);
    }

    pub fn authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Relaxed)
    }

    pub fn start_rdb_transfer(&self, t: crate::commands::replication::RdbTransfer) {
        *self.rdb_transfer.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
    }

    pub fn take_rdb_transfer(&self) -> Option<crate::commands::replication::RdbTransfer> {
        self.rdb_transfer.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// What a connection tells the executor when it registers.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub unix: bool,
    /// Whether the peer is loopback or a unix socket (protected mode).
    pub local: bool,
}

#[derive(Debug)]
pub struct Client {
    pub id: u64,
    pub info: ConnInfo,
    pub handle: Arc<ClientHandle>,
    pub name: Option<Vec<u8>>,
    pub lib_name: Option<Vec<u8>>,
    pub lib_ver: Option<Vec<u8>>,
    pub db: usize,
    pub proto: u8,
    pub authenticated: bool,
    pub created_ms: i64,
    pub last_interaction_ms: i64,
    /// Full name of the last command run (`client|list`), for CLIENT LIST's `cmd=`.
    pub last_cmd: &'static str,
    pub last_cmd_parent: &'static str,
    pub no_evict: bool,
    pub no_touch: bool,
    /// The client asked to close after this batch's replies (QUIT).
    pub close_after_reply: bool,
    /// Set by a blocking command that found nothing to serve (see `Ctx::block`).
    pub block_request: Option<crate::commands::BlockRequest>,
    /// True while a parked command runs again after a wake-up (XREADGROUP words a vanished
    /// group differently then).
    pub woken: bool,
    /// The parked command while the client is blocked.
    pub blocked: Option<Box<super::blocking::Blocked>>,
    /// Commands that arrived while the client was blocked, run once it is served.
    pub pending: std::collections::VecDeque<super::Cmd>,
    /// True while running inside MULTI/EXEC or a script: blocking commands must not block.
    pub in_exec: bool,
    /// Commands queued since MULTI; None outside a transaction.
    pub multi: Option<Vec<super::Cmd>>,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    pub dirty_exec: bool,
    /// A watched key was modified: EXEC answers a null array.
    pub dirty_cas: bool,
    /// WATCHed keys: (db, key, whether it existed at WATCH time).
    pub watched_keys: Vec<(usize, Vec<u8>, bool)>,
    /// CLIENT REPLY OFF: replies are dropped until CLIENT REPLY ON.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the next command's reply is dropped.
    pub reply_skip_next: bool,
    /// Bytes in the query buffer and argv, as last reported by the connection (CLIENT LIST).
    pub qbuf: usize,
    pub argv_mem: usize,
    /// What the client declared with REPLCONF (SYNC's framing and filter).
    pub replconf: crate::commands::replication::ReplConf,
}

impl Client {
    pub fn new(id: u64, info: ConnInfo, handle: Arc<ClientHandle>, now_ms: i64, authenticated: bool) -> Self {
        Client {
            id,
            info,
            handle,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            proto: 2,
            authenticated,
            created_ms: now_ms,
            last_interaction_ms: now_ms,
            last_cmd: "NULL",
            last_cmd_parent: "",
            no_evict: false,
            no_touch: false,
            close_after_reply: false,
            block_request: None,
            woken: false,
            blocked: None,
            pending: std::collections::VecDeque::new(),
            in_exec: false,
            multi: None,
            dirty_exec: false,
            dirty_cas: false,
            watched_keys: Vec::new(),
            reply_off: false,
            reply_skip_next: false,
            qbuf: 0,
            argv_mem: 0,
            replconf: Default::default(),
        }
    }

    /// The name of the last command as CLIENT LIST shows it (`config|get`).
    pub fn last_command_name(&self) -> String {
        if self.last_cmd_parent.is_empty() {
            self.last_cmd.to_string()
        } else {
            format!("{}|{}", self.last_cmd_parent, self.last_cmd)
        }
    }
}
