//! Per-client state the executor keeps: selected db, protocol, name, auth, timestamps, tracking
//! mode, and the handle shared with the connection task: the outbox of pushed replies, the close
//! request, and the output-buffer accounting that enforces client-output-buffer-limit.
//!
//! Output buffer limits are checked where bytes are queued (`push_output`), so one pipeline of
//! a thousand large PUBLISHes cannot grow a stalled subscriber's outbox past the hard limit
//! before anyone looks. The pending size is the outbox plus what the connection took but has
//! not yet written (`in_flight`); a client over its limit gets its outbox dropped and is closed.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::resp::reply::Deferred;
use crate::util::signal::Signal;

/// Connected clients by id.
pub type ClientTable = std::collections::HashMap<u64, Box<Client>, foldhash::fast::FixedState>;

/// Makes the next EXEC of client `id` fail: a key it watches changed. `current` is the client
/// running the command, out of `clients` while it runs; the script client stands in for its
/// caller, who is out of `clients` too.
pub fn flag_dirty_cas(clients: &mut ClientTable, current: &mut Client, id: u64) {
    if id == current.id {
        current.dirty_cas = true;
    } else if current.script_caller == Some(id) {
        current.caller_dirty_cas = true;
    } else if let Some(c) = clients.get_mut(&id) {
        c.dirty_cas = true;
    }
}

/// Shared between a connection task and the executor: the executor sets `kill` (CLIENT KILL,
/// idle timeout, SHUTDOWN) and notifies; the connection task closes the socket.
#[derive(Debug, Default)]
pub struct ClientHandle {
    kill: AtomicBool,
    /// Replies produced outside the client's own batches (served blocking commands, later pushes).
    outbox: std::sync::Mutex<Outbox>,
    /// The outbox's length, kept under its lock, so the common case (nothing queued) is read
    /// without taking the lock after every batch.
    queued: AtomicUsize,
    /// Mirrors the client's auth state for the parser's unauthenticated limits.
    authenticated: AtomicBool,
    /// Raised when output is queued or a close is requested.
    pub notify: Signal,
    /// Woken only by `request_close`, so a connection stuck writing to a peer that does not read
    /// can still be closed.
    pub killed: Signal,
    /// Bytes the connection took from the outbox (or a batch reply) and has not written yet.
    in_flight: AtomicUsize,
    /// Of those, the reply bytes themselves (`in_flight` counts the buffers' allocations).
    unsent: AtomicUsize,
    /// Bytes of the connection's output buffers that went out but are still allocated: the
    /// head of a reply being written, of the backlog. Redis frees its reply blocks as they are
    /// written, so its figures (omem, tot-mem) leave this out; client eviction counts it, or a
    /// client that stops reading holds megabytes maxmemory-clients does not see, and keys are
    /// evicted for them instead (unit/maxmemory's "many MGET clients, client eviction: true").
    written_held: AtomicUsize,
    /// The client has subscriptions: the pubsub class of client-output-buffer-limit applies.
    pubsub: AtomicBool,
    /// The client is an attached replica: the replica class applies (it wins over pubsub).
    replica: AtomicBool,
    /// Unix seconds since the pending output has been over the soft limit; 0 when under it.
    soft_since: AtomicI64,
    /// Set when the output buffer limit closed the client, until the executor logs it.
    obuf_exceeded: AtomicBool,
    /// The peer closed the connection (a read of 0 bytes): logged at verbose on disconnect.
    peer_closed: AtomicBool,
    /// The connection holds bytes of a command it has not finished reading: nothing but the
    /// connection may read from the socket then (see `scripting::busy`).
    unparsed: AtomicBool,
    /// A snapshot for the connection to stream after this batch's replies (SYNC/PSYNC).
    rdb_transfer: std::sync::Mutex<Option<RdbTransfer>>,
    /// Whether `rdb_transfer` holds one (checked after every batch without the lock).
    has_rdb_transfer: AtomicBool,
    /// Since when the connection has been waiting to write a chunk of a diskless snapshot
    /// (unix ms; 0: it is not), for repl-timeout during a full sync (Redis's
    /// repl_last_partial_write).
    pub rdb_stuck_since_ms: AtomicI64,
    /// A disk sync's file has gone out in full: the replica is online from the next cron
    /// (Redis's putSlaveOnline after the bulk transfer).
    pub disk_snapshot_sent: AtomicBool,
    /// The connection's query buffer as it last reported it: bytes held and capacity.
    qbuf_len: AtomicUsize,
    qbuf_cap: AtomicUsize,
    /// The most the query buffer needed (held bytes plus the read it made room for) since the
    /// executor's client cron last looked (Redis's querybuf_peak).
    qbuf_peak: AtomicUsize,
    /// Capacity of the output buffers the connection holds (the one being written included).
    out_held: AtomicUsize,
    /// A capacity the client cron asked the connection to trim its query buffer to, plus one;
    /// 0: none asked.
    qbuf_trim: AtomicUsize,
    /// Redis's reply buffer, modelled (see `cron_resize_reply_buffer`): its size (CLIENT LIST
    /// rbs; 0 until first set, read as 16 KiB), the most of it one reply filled since the peak
    /// was last reset (rbp), and when that was (unix ms).
    reply_buf: AtomicUsize,
    reply_peak: AtomicUsize,
    /// The connection was handed to a forked debugging session (SCRIPT DEBUG YES): it closes
    /// its descriptor without shutting the socket down, which the child still talks on.
    detached: AtomicBool,
    reply_peak_reset_ms: AtomicI64,
    /// Big replies of the running batch to encode off the executor (see `Reply::Deferred`):
    /// where each goes in the batch's output, and the protocol it is encoded for.
    deferred: std::sync::Mutex<Vec<(usize, u8, Deferred, crate::stats::StatName)>>,
    /// Whether `deferred` holds any (checked after every batch without the lock).
    has_deferred: AtomicBool,
    /// The least the queued deferred replies will take once encoded (`Encode::min_size`):
    /// pending output from the moment the command ran, as Redis counts a reply as it builds
    /// it, until the connection holds the encoded bytes.
    deferred_bytes: AtomicUsize,
    /// The output limit closed the client: nothing more is written to it.
    output_dropped: AtomicBool,
    /// The connection's socket while its connection task holds it open (see `SocketLease`), so
    /// a close can shut it down from the executor. The lock keeps the descriptor from being
    /// closed, and its number reused by another connection, while the executor uses it.
    socket: std::sync::Mutex<Option<std::os::fd::RawFd>>,
}

/// Lends a connection's socket descriptor to its handle for as long as the lease lives. Made
/// by the connection task over a socket it owns and dropped before the socket is: once the
/// lease is gone the handle no longer touches the descriptor.
pub struct SocketLease<'a>(&'a ClientHandle);

impl<'a> SocketLease<'a> {
    pub fn new(handle: &'a ClientHandle, fd: std::os::fd::RawFd) -> Self {
        if fd >= 0 {
            *handle.socket.lock().unwrap_or_else(|p| p.into_inner()) = Some(fd);
        }
        SocketLease(handle)
    }
}

impl Drop for SocketLease<'_> {
    fn drop(&mut self) {
        *self.0.socket.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Redis's PROTO_REPLY_CHUNK_BYTES (a new client's reply buffer, the most it grows to) and
/// PROTO_REPLY_MIN_BYTES (the least it shrinks to).
const REPLY_CHUNK_BYTES: usize = 16 * 1024;
pub const REPLY_MIN_BYTES: usize = 1024;

/// How the client cron resizes reply buffers (DEBUG REPLYBUFFER): the peak's reset period in
/// ms (-1: never), and whether it resizes at all.
#[derive(Debug, Clone, Copy)]
pub struct ReplyBufferPolicy {
    pub peak_reset_ms: i64,
    pub resizing: bool,
}

/// Redis's REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME.
pub const REPLY_BUFFER_PEAK_RESET_MS: i64 = 5000;

impl Default for ReplyBufferPolicy {
    fn default() -> Self {
        ReplyBufferPolicy { peak_reset_ms: REPLY_BUFFER_PEAK_RESET_MS, resizing: true }
    }
}

/// client-output-buffer-limit for normal (0), pubsub (1) and replica (2) clients: hard bytes,
/// soft bytes, soft seconds, as the executor last parsed them from the configuration (0 = no
/// limit).
static OBUF_LIMITS: [AtomicU64; 9] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(32 << 20),
    AtomicU64::new(8 << 20),
    AtomicU64::new(60),
    AtomicU64::new(256 << 20),
    AtomicU64::new(64 << 20),
    AtomicU64::new(60),
];

/// The classes of client-output-buffer-limit, as indexes into `OBUF_LIMITS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObufClass {
    Normal = 0,
    Pubsub = 1,
    Replica = 2,
}

/// Wake-ups issued by `push_slice` (a connection that just woke others yields to them).
static WAKEUPS: AtomicU64 = AtomicU64::new(0);

/// How many times pushed output has woken a connection so far.
pub fn wakeups() -> u64 {
    WAKEUPS.load(Ordering::Relaxed)
}

/// Publishes a class's limits (called by the executor when the configuration changes).
pub fn set_obuf_limits(class: ObufClass, (hard, soft, secs): (u64, u64, u64)) {
    let base = class as usize * 3;
    for (i, v) in [hard, soft, secs].into_iter().enumerate() {
        OBUF_LIMITS[base + i].store(v, Ordering::Relaxed);
    }
}

fn obuf_limits(class: ObufClass) -> (u64, u64, u64) {
    let base = class as usize * 3;
    let get = |i: usize| OBUF_LIMITS[base + i].load(Ordering::Relaxed);
    (get(0), get(1), get(2))
}

impl ClientHandle {
    /// Hands the socket to a forked child: the connection closes without a shutdown.
    pub fn detach(&self) {
        self.detached.store(true, Ordering::Release);
    }

    pub fn detached(&self) -> bool {
        self.detached.load(Ordering::Acquire)
    }

    /// Closes the client as Redis frees one (CLIENT KILL, `timeout`, the output buffer limit, a
    /// dropped replica): what it still had to receive goes at once, here, on the executor (the
    /// outbox, with its references to the shared replication stream, and the deferred replies),
    /// so its memory is back before the connection task even wakes; that task writes nothing
    /// more and closes without waiting on the peer. A replica stopped with SIGSTOP held its
    /// whole output until its TLS connection was torn down (unit/maxmemory's "slave buffer are
    /// counted correctly" over TLS).
    ///
    /// The socket is shut down here too, so the peer sees the close before the killer's reply
    /// goes out, as Redis's close in freeClient does: a replica whose link was killed inside
    /// MULTI reported its link up, with its old data, to the next INFO (unit/replication's
    /// "new database is exposed after swapping").
    pub fn request_close(&self) {
        self.output_dropped.store(true, Ordering::Release);
        self.drop_output();
        self.close_after_output();
        self.shut_socket();
    }

    /// Shuts the connection's socket down in both directions (not closing the descriptor,
    /// which stays the connection task's), unless a forked debugging session still talks on it.
    fn shut_socket(&self) {
        if self.detached() {
            return;
        }
        let socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(fd) = *socket {
            // SAFETY: the descriptor is open while the lock holds it (see `SocketLease`), and
            // shutdown touches no memory.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
    }

    /// Sets TCP_NODELAY on the connection's socket (repl-disable-tcp-nodelay turns it off for a
    /// replica). A unix socket refuses it, as Redis ignores that failure.
    pub fn set_tcp_nodelay(&self, on: bool) {
        let socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(fd) = *socket {
            let value: libc::c_int = on.into();
            // SAFETY: the descriptor is open while the lock holds it (see `SocketLease`); the
            // option value is a live c_int of the size given.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    (&value as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
    }

    /// Closes the client once what is queued for it is written (Redis's CLOSE_AFTER_REPLY: a
    /// QUIT that ran when the client was served).
    pub fn close_after_output(&self) {
        self.kill.store(true, Ordering::Release);
        self.notify.raise();
        self.killed.raise();
    }

    /// Frees the queued output and the deferred replies. The buffers are taken under their locks
    /// and freed after, so the connection is never held while megabytes are unmapped.
    fn drop_output(&self) {
        let outbox = {
            let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
            self.queued.store(0, Ordering::Release);
            std::mem::take(&mut *outbox)
        };
        drop(outbox);
        let deferred = {
            let mut deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
            self.has_deferred.store(false, Ordering::Release);
            self.deferred_bytes.store(0, Ordering::Relaxed);
            std::mem::take(&mut *deferred)
        };
        drop(deferred);
    }

    /// Queues bytes for the connection to write and wakes it. Bytes for a client that is being
    /// closed are dropped; a client whose pending output passes its buffer limit is closed.
    pub fn push_output(&self, bytes: Vec<u8>) {
        self.push_slice(&bytes);
    }

    /// `push_output` for borrowed bytes: pub/sub fan-out copies one encoded frame into many
    /// outboxes, which keep their capacity across writes (see `take_output_into`).
    pub fn push_slice(&self, bytes: &[u8]) {
        self.push(bytes, None);
    }

    /// Queues a chunk of the replication stream that the backlog and every replica share (Redis
    /// 7.0's shared replication buffer): the replica holds a reference, not a copy.
    pub fn push_shared(&self, chunk: &bytes::Bytes) {
        self.push(chunk, Some(chunk));
    }

    fn push(&self, bytes: &[u8], shared: Option<&bytes::Bytes>) {
        if bytes.is_empty() || self.close_requested() {
            return;
        }
        let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        let was_empty = outbox.is_empty();
        match shared {
            Some(chunk) => outbox.push_shared(chunk),
            None => outbox.push_copy(bytes),
        }
        self.queued.store(outbox.len, Ordering::Release);
        let pending = outbox.len + self.in_flight.load(Ordering::Relaxed);
        if self.over_limit(pending) {
            // Redis frees the reply list of a client it closes for this: nothing more is sent.
            *outbox = Outbox::default();
            self.queued.store(0, Ordering::Release);
            drop(outbox);
            self.obuf_exceeded.store(true, Ordering::Release);
            self.request_close();
            return;
        }
        drop(outbox);
        // The connection drains everything queued when it wakes: one wake-up per batch of pushes.
        if was_empty {
            WAKEUPS.fetch_add(1, Ordering::Relaxed);
            self.notify.raise();
        }
    }

    /// Checks a batch's replies (`len` bytes) against the client's limit before the connection
    /// writes them, with whatever is still queued; false means the client is being closed.
    pub fn admit_reply(&self, len: usize) -> bool {
        if self.output_dropped.load(Ordering::Acquire) {
            return false;
        }
        let pending = self.pending_output() + len;
        if self.over_limit(pending) {
            self.obuf_exceeded.store(true, Ordering::Release);
            self.request_close();
            return false;
        }
        true
    }

    /// The replies of a client that has to authenticate and has not, `len` bytes of them not
    /// yet queued: more than its reply buffer holds closes it, nothing of them sent, as Redis
    /// 7.0.15 closes it (its fix for CVE-2025-21605). Such a client can only run AUTH and HELLO,
    /// and one that pipelines without reading would grow its output without bound.
    pub fn admit_unauthenticated(&self, len: usize) -> bool {
        // Redis's reply buffer holds unwritten bytes: its allocation does not count here.
        let unwritten = self.queued.load(Ordering::Acquire) + self.unsent.load(Ordering::Relaxed) + len;
        if unwritten <= REPLY_CHUNK_BYTES {
            return true;
        }
        self.obuf_exceeded.store(true, Ordering::Release);
        self.request_close();
        false
    }

    /// A reply streamed in pieces has brought the client's output to `total` bytes, counting
    /// all it produced so far as Redis counts a reply it builds before writing any of it. False,
    /// closing the client, when that is over its output limit.
    pub fn admit_total(&self, total: usize) -> bool {
        if self.output_dropped.load(Ordering::Acquire) {
            return false;
        }
        if self.over_limit(total) {
            self.obuf_exceeded.store(true, Ordering::Release);
            self.request_close();
            return false;
        }
        true
    }

    /// The client cron's look at a client's limits (Redis checks them there too): a subscriber
    /// that stopped reading is closed once over the soft limit for longer than allowed, even if
    /// nothing more is published to it. False when the client is being closed.
    pub fn enforce_obuf_limits(&self) -> bool {
        if self.close_requested() {
            return false;
        }
        if self.over_limit(self.pending_output()) {
            self.obuf_exceeded.store(true, Ordering::Release);
            self.request_close();
            return false;
        }
        true
    }

    /// The least output (bytes) that can put the client over a limit of its class, if it has
    /// one: its hard limit, or its soft limit (which closes it only once held long enough).
    pub fn obuf_limit(&self) -> Option<usize> {
        let (hard, soft, _) = obuf_limits(self.class());
        [hard, soft].into_iter().filter(|&l| l > 0).min().map(|l| l as usize)
    }

    /// The hard output limit of the client's class (bytes), if one is set: a reply that long
    /// closes the client whatever else it holds, so a command building a huge reply may stop
    /// there (Redis's loops stop once the client is flagged to close).
    pub fn hard_limit(&self) -> Option<usize> {
        let (hard, _, _) = obuf_limits(self.class());
        (hard > 0).then_some(hard as usize)
    }

    fn class(&self) -> ObufClass {
        if self.replica.load(Ordering::Relaxed) {
            ObufClass::Replica
        } else if self.pubsub.load(Ordering::Relaxed) {
            ObufClass::Pubsub
        } else {
            ObufClass::Normal
        }
    }

    /// Whether `pending` bytes break the hard limit, or the soft limit for longer than allowed.
    fn over_limit(&self, pending: usize) -> bool {
        let (hard, soft, secs) = obuf_limits(self.class());
        let pending = pending as u64;
        if hard > 0 && pending >= hard {
            return true;
        }
        if soft > 0 && pending >= soft {
            let now = crate::util::clock::unix_ms() / 1000;
            let since = self.soft_since.load(Ordering::Relaxed);
            if since == 0 {
                self.soft_since.store(now, Ordering::Relaxed);
                return false;
            }
            return (now - since) as u64 > secs;
        }
        self.soft_since.store(0, Ordering::Relaxed);
        false
    }

    /// Takes what was queued by `push_output`; the caller reports progress with `set_in_flight`.
    pub fn take_output(&self) -> Vec<u8> {
        let mut taken = Vec::new();
        self.take_output_into(&mut taken);
        taken
    }

    /// Queues a big reply of the running batch, to go at `at` in its output, encoded later for
    /// protocol `proto` (by the connection, off the executor thread). Its least size counts as
    /// pending output at once, with the `at` bytes of the batch's replies before it: a client
    /// that this puts over its output limit is closed, as Redis closes one whose reply grows past
    /// the limit while the command builds it, and the reply is never encoded (false).
    pub fn push_deferred(&self, at: usize, proto: u8, reply: Deferred, stat: crate::stats::StatName) -> bool {
        let min = reply.0.min_size();
        if self.over_limit(self.pending_output() + at + min) {
            self.output_dropped.store(true, Ordering::Release);
            self.obuf_exceeded.store(true, Ordering::Release);
            self.request_close();
            return false;
        }
        self.deferred_bytes.fetch_add(min, Ordering::Relaxed);
        self.deferred.lock().unwrap_or_else(|p| p.into_inner()).push((at, proto, reply, stat));
        self.has_deferred.store(true, Ordering::Release);
        true
    }

    /// The connection holds the deferred replies' bytes now (counted as its output from here).
    pub fn deferred_encoded(&self) {
        self.deferred_bytes.store(0, Ordering::Relaxed);
    }

    /// The batch's deferred replies, in output order (empty when none).
    pub fn take_deferred(&self) -> Vec<(usize, u8, Deferred, crate::stats::StatName)> {
        if !self.has_deferred.load(Ordering::Acquire) {
            return Vec::new();
        }
        self.has_deferred.store(false, Ordering::Release);
        std::mem::take(&mut *self.deferred.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Swaps the outbox with `buf` (cleared first), so the connection's written buffer becomes
    /// the next outbox and fan-out appends into memory that is already there.
    pub fn take_output_into(&self, buf: &mut Vec<u8>) {
        buf.clear();
        // A push racing with this check raises `notify`, so the connection comes back for it.
        if self.queued.load(Ordering::Acquire) == 0 {
            self.in_flight.store(0, Ordering::Relaxed);
            return;
        }
        let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        outbox.take_into(buf);
        self.queued.store(0, Ordering::Release);
        self.in_flight.store(buf.len(), Ordering::Relaxed);
    }

    /// The connection's count of taken but unwritten bytes.
    pub fn set_in_flight(&self, n: usize) {
        self.in_flight.store(n, Ordering::Relaxed);
    }

    /// The connection's unwritten reply bytes (its backlog's length, not its allocation).
    pub fn set_unsent(&self, n: usize) {
        self.unsent.store(n, Ordering::Relaxed);
    }

    /// What the connection's output buffers hold that has been written (see `written_held`).
    pub fn set_written_held(&self, n: usize) {
        self.written_held.store(n, Ordering::Relaxed);
    }

    pub fn written_held(&self) -> usize {
        self.written_held.load(Ordering::Relaxed)
    }

    /// A batch's replies, not yet handed to the connection, count as output until it writes
    /// them (its next `set_in_flight` replaces the figure).
    pub fn add_in_flight(&self, n: usize) {
        self.in_flight.fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes queued for the client and not yet written (CLIENT LIST omem).
    /// What the client's output occupies: the outbox's allocation, the replies the connection
    /// holds unwritten and the buffers it writes from (a replica's share of the stream, which
    /// maxmemory does not count, as Redis's freeMemoryGetNotCountedMemory).
    pub fn output_memory(&self) -> u64 {
        let tail = self.outbox.lock().unwrap_or_else(|p| p.into_inner()).tail.capacity();
        crate::alloc::usable_size(tail)
            + self.in_flight.load(Ordering::Relaxed) as u64
            + self.out_held.load(Ordering::Relaxed) as u64
            + self.deferred_bytes.load(Ordering::Relaxed) as u64
    }

    /// Bytes of the shared replication stream the outbox references (counted once, in the
    /// backlog, not per replica).
    pub fn shared_output(&self) -> usize {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner()).shared
    }

    /// Bytes queued and not yet taken by the connection (a replica still needs them).
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    pub fn pending_output(&self) -> usize {
        self.queued.load(Ordering::Acquire)
            + self.in_flight.load(Ordering::Relaxed)
            + self.deferred_bytes.load(Ordering::Relaxed)
    }

    pub fn set_pubsub(&self, yes: bool) {
        self.pubsub.store(yes, Ordering::Relaxed);
    }

    pub fn set_replica(&self, yes: bool) {
        self.replica.store(yes, Ordering::Relaxed);
    }

    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Relaxed)
    }

    /// The connection read end-of-file: the peer closed it.
    pub fn set_peer_closed(&self) {
        self.peer_closed.store(true, Ordering::Relaxed);
    }

    pub fn peer_closed(&self) -> bool {
        self.peer_closed.load(Ordering::Relaxed)
    }

    /// True once after the output buffer limit closed the client (for the log line).
    pub fn take_obuf_exceeded(&self) -> bool {
        // A plain load first: cron asks every client ten times a second.
        self.obuf_exceeded.load(Ordering::Acquire) && self.obuf_exceeded.swap(false, Ordering::AcqRel)
    }

    /// The connection reports its query buffer: `len` bytes held in `cap`, and `need` bytes
    /// wanted for the read it waits on (raising the peak).
    pub fn report_qbuf(&self, len: usize, cap: usize, need: usize) {
        self.qbuf_len.store(len, Ordering::Relaxed);
        self.qbuf_cap.store(cap, Ordering::Relaxed);
        // A locked read-modify-write only when the peak moves (this runs before every read).
        if need > self.qbuf_peak.load(Ordering::Relaxed) {
            self.qbuf_peak.fetch_max(need, Ordering::Relaxed);
        }
    }

    /// The connection reports the capacity of the output buffers it holds.
    pub fn report_out_held(&self, cap: usize) {
        self.out_held.store(cap, Ordering::Relaxed);
    }

    /// The query buffer's bytes held and capacity (CLIENT LIST qbuf and qbuf + qbuf-free).
    pub fn qbuf(&self) -> (usize, usize) {
        (self.qbuf_len.load(Ordering::Relaxed), self.qbuf_cap.load(Ordering::Relaxed))
    }

    /// The reply buffer's size (CLIENT LIST rbs).
    pub fn reply_buffer_size(&self) -> usize {
        match self.reply_buf.load(Ordering::Relaxed) {
            0 => REPLY_CHUNK_BYTES,
            n => n,
        }
    }

    /// The reply buffer's peak (CLIENT LIST rbp).
    pub fn reply_buffer_peak(&self) -> usize {
        // Until the client cron first resets it, Redis's peak is the whole buffer.
        if self.reply_peak_reset_ms.load(Ordering::Relaxed) == 0 {
            return self.reply_buffer_size();
        }
        self.reply_peak.load(Ordering::Relaxed)
    }

    /// The connection is about to write `len` bytes of replies: in Redis they would fill the
    /// reply buffer up to its size first (the rest going to the reply list), so the peak rises
    /// to that.
    pub fn note_reply(&self, len: usize) {
        let peak = len.min(self.reply_buffer_size());
        if peak > self.reply_peak.load(Ordering::Relaxed) {
            self.reply_peak.fetch_max(peak, Ordering::Relaxed);
        }
    }

    /// Redis's clientsCronResizeOutputBuffer, on the model: a buffer whose peak stayed under
    /// half its size shrinks to the peak (1 KiB at least); one a reply filled doubles, up to
    /// 16 KiB. The peak restarts from what is pending every `peak_reset_ms`. Returns -1 for a
    /// shrink, 1 for an expansion, 0 otherwise. Redis's buffer is real memory; ours is only
    /// the figure CLIENT LIST shows, since replies are written from per-batch buffers.
    pub fn cron_resize_reply_buffer(&self, now_ms: i64, policy: ReplyBufferPolicy) -> i32 {
        if !policy.resizing {
            return 0;
        }
        let size = self.reply_buffer_size();
        let peak = self.reply_buffer_peak();
        let mut resized = 0;
        let mut new_size = size;
        if size / 2 >= REPLY_MIN_BYTES && peak < size / 2 {
            new_size = REPLY_MIN_BYTES.max(peak + 1);
            resized = -1;
        } else if size * 2 < REPLY_CHUNK_BYTES * 2 && peak == size {
            new_size = REPLY_CHUNK_BYTES.min(size * 2);
            resized = 1;
        }
        // Redis stamps a new client's last reset in seconds and compares it with milliseconds,
        // so its first cron always resets the peak (to what is pending, 0 for an idle client).
        let last = self.reply_peak_reset_ms.load(Ordering::Relaxed);
        if policy.peak_reset_ms >= 0 && (last == 0 || now_ms - last >= policy.peak_reset_ms) {
            self.reply_peak.store(self.pending_output().min(new_size), Ordering::Relaxed);
            self.reply_peak_reset_ms.store(now_ms, Ordering::Relaxed);
        }
        self.reply_buf.store(new_size, Ordering::Relaxed);
        resized
    }

    /// The capacity the client cron asked for, once.
    pub fn take_qbuf_trim(&self) -> Option<usize> {
        match self.qbuf_trim.swap(0, Ordering::AcqRel) {
            0 => None,
            n => Some(n - 1),
        }
    }

    /// Redis's clientsCronResizeQueryBuffer: a buffer wasting over 4 KiB is trimmed to what it
    /// holds once the client is idle for more than 2 seconds, or, past 32 KiB and over twice
    /// the recent peak, to that peak. The peak then restarts from what the buffer holds.
    pub fn cron_resize_qbuf(&self, idle_secs: i64) {
        const RESIZE_THRESHOLD: usize = 32 * 1024;
        let (len, cap) = self.qbuf();
        let peak = self.qbuf_peak.load(Ordering::Relaxed);
        if cap.saturating_sub(len) > 4 * 1024 {
            let target = if idle_secs > 2 {
                Some(len)
            } else if cap > RESIZE_THRESHOLD && cap / 2 > peak {
                Some(len.max(peak))
            } else {
                None
            };
            if let Some(t) = target {
                self.qbuf_trim.store(t + 1, Ordering::Release);
                self.notify.raise();
            }
        }
        self.qbuf_peak.store(len, Ordering::Relaxed);
    }

    pub fn set_unparsed(&self, pending: bool) {
        self.unparsed.store(pending, Ordering::Relaxed);
    }

    pub fn unparsed(&self) -> bool {
        self.unparsed.load(Ordering::Relaxed)
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

    /// Hands the connection a snapshot to send. What the outbox held (keepalive newlines sent
    /// while the replica waited) goes first, ahead of the transfer's head, so everything queued
    /// from now on (the stream) follows the snapshot.
    pub fn start_rdb_transfer(&self, mut t: RdbTransfer) {
        {
            let mut outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
            if !outbox.is_empty() {
                let mut head = Vec::new();
                outbox.take_into(&mut head);
                head.append(&mut t.head);
                t.head = head;
                self.queued.store(0, Ordering::Release);
            }
        }
        *self.rdb_transfer.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
        self.has_rdb_transfer.store(true, Ordering::Release);
        self.notify.raise();
    }

    /// A copy of what the outbox holds (the stream queued behind a replica's snapshot).
    pub fn outbox_copy(&self) -> Vec<u8> {
        let outbox = self.outbox.lock().unwrap_or_else(|p| p.into_inner());
        let mut copy = Vec::with_capacity(outbox.len);
        for seg in &outbox.segs {
            copy.extend_from_slice(seg);
        }
        copy.extend_from_slice(&outbox.tail);
        copy
    }

    /// Whether a snapshot waits to be sent (checked before the outbox is written).
    pub fn has_rdb_transfer(&self) -> bool {
        self.has_rdb_transfer.load(Ordering::Acquire)
    }

    pub fn take_rdb_transfer(&self) -> Option<RdbTransfer> {
        if !self.has_rdb_transfer.load(Ordering::Acquire) {
            return None;
        }
        self.has_rdb_transfer.store(false, Ordering::Release);
        self.rdb_transfer.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Output queued for the connection: chunks of the shared replication stream (a replica's),
/// then bytes copied in. Order is kept: copied bytes before a shared chunk become a segment
/// of their own first.
#[derive(Debug, Default)]
struct Outbox {
    segs: std::collections::VecDeque<bytes::Bytes>,
    tail: Vec<u8>,
    /// Bytes in both.
    len: usize,
    /// Bytes of the shared chunks in `segs` (not the copied bytes made segments).
    shared: usize,
}

impl Outbox {
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn push_copy(&mut self, bytes: &[u8]) {
        self.tail.extend_from_slice(bytes);
        self.len += bytes.len();
    }

    fn push_shared(&mut self, chunk: &bytes::Bytes) {
        if !self.tail.is_empty() {
            self.segs.push_back(bytes::Bytes::from(std::mem::take(&mut self.tail)));
        }
        self.segs.push_back(chunk.clone());
        self.len += chunk.len();
        self.shared += chunk.len();
    }

    /// Moves everything into `buf` (cleared first). Without shared chunks the buffers swap, so
    /// the connection's written buffer becomes the next tail.
    fn take_into(&mut self, buf: &mut Vec<u8>) {
        buf.clear();
        if self.segs.is_empty() {
            std::mem::swap(&mut self.tail, buf);
        } else {
            buf.reserve(self.len);
            for seg in self.segs.drain(..) {
                buf.extend_from_slice(&seg);
            }
            buf.extend_from_slice(&self.tail);
            self.tail.clear();
        }
        self.len = 0;
        self.shared = 0;
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
    /// A TLS connection: its socket carries ciphertext, so a busy script or the debugger talks
    /// through its TLS session (`handoff::tls_stream`).
    pub tls: bool,
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
    /// The ACL user the client is authenticated as; None: `default`.
    pub user: Option<Vec<u8>>,
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
    pub block_request: Option<super::ctx::BlockRequest>,
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
    /// While EXEC runs them, how many commands were queued and what they took (multi-mem):
    /// Redis's client still shows its transaction then (flags x, multi, multi-mem, cmd=exec).
    pub running_exec: Option<(usize, usize)>,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    pub dirty_exec: bool,
    /// A watched key was modified: EXEC answers a null array.
    pub dirty_cas: bool,
    /// On the script client while a script runs: the id of the client whose EVAL or FCALL it
    /// is (out of the client table meanwhile), and whether the script changed a key that client
    /// watches (its `dirty_cas` once the script returns).
    pub script_caller: Option<u64>,
    pub caller_dirty_cas: bool,
    /// The script client only: the running script already wrote, so its later writes are not
    /// refused for the server's state (disk errors, min-replicas, read-only replica), as
    /// Redis's SCRIPT_WRITE_DIRTY: a script is not failed halfway on an unpredictable state.
    pub script_dirty: bool,
    /// On the script client: the keys the script declared, remembered for its caller's
    /// client-side caching once the script runs a read-only command (None when the caller does
    /// not track its reads).
    pub caller_tracked_keys: Option<Vec<bytes::Bytes>>,
    /// WATCHed keys: (db, key, whether it existed at WATCH time).
    pub watched_keys: Vec<(usize, Vec<u8>, bool)>,
    /// CLIENT REPLY OFF: replies are dropped until CLIENT REPLY ON.
    pub reply_off: bool,
    /// CLIENT REPLY SKIP: the next command's reply is dropped.
    pub reply_skip_next: bool,
    /// The running command's reply is to be dropped (a SKIP before it); CLIENT REPLY ON clears
    /// it, so its own OK goes out, as in Redis.
    pub reply_skip_now: bool,
    /// SCRIPT DEBUG YES|SYNC: the next EVAL runs under the Lua debugger.
    pub lua_debug: Option<super::scripting::ldb::Mode>,
    /// Bytes of the arguments of a command held between calls (CLIENT LIST argv-mem).
    pub argv_mem: usize,
    /// CLIENT TRACKING state.
    pub tracking: Tracking,
    /// CLIENT PAUSE holds this client's next command (in `pending`) until the pause ends.
    pub postponed: bool,
    /// Where `call()` wrote the last command's reply in its output buffer: CLIENT REPLY OFF/SKIP
    /// drop only that span, keeping push messages written around it (as Redis 7.0 does).
    pub reply_span: Option<(usize, usize)>,
    /// What the client declared with REPLCONF (SYNC's framing and filter).
    pub replconf: ReplConf,
    /// This is the master's link on a replica: its commands are obeyed and answered to nobody.
    pub master: bool,
    /// The stream offset right after this client's last propagated write (WAIT waits for it).
    pub woff: i64,
    /// Bytes of replies its running batch produced that the connection has not taken yet:
    /// they are its output buffer already (Redis's reply list), so maxmemory-clients counts them.
    pub batch_reply: usize,
    /// The running command is the last of its connection's batch: a deferred reply that may
    /// turn out an error is encoded off the executor only then, so no later command of the
    /// batch (INFO) runs before the error is counted.
    pub batch_last: bool,
    /// The command running now may leave a big reply to be encoded off the executor: it came
    /// straight from the connection's batch, and its reply goes to the batch's output whole.
    pub defer_reply: bool,
    /// Cluster mode: ASKING was sent (for the next command, or the transaction), and READONLY.
    pub cluster_asking: bool,
    pub cluster_readonly: bool,
}

/// What CLIENT TRACKING set for one client.
#[derive(Debug, Default, Clone)]
pub struct Tracking {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING yes|no was given for the next command.
    pub caching: bool,
    /// The redirect client went away (CLIENT LIST flag R, TRACKINGINFO broken_redirect).
    pub broken_redir: bool,
    /// Client receiving the invalidations; 0 for the client itself.
    pub redirect: u64,
    /// BCAST prefixes, sorted as Redis lists them.
    pub prefixes: std::collections::BTreeSet<Vec<u8>>,
}

impl Tracking {
    /// Whether the keys of the next read-only command are remembered (tracking on, not BCAST,
    /// and OPTIN/OPTOUT's CACHING choice allowing it).
    pub fn remembers_reads(&self) -> bool {
        let wanted = if self.optin { self.caching } else { !(self.optout && self.caching) };
        self.on && wanted && !self.bcast
    }
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
            user: None,
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
            running_exec: None,
            dirty_exec: false,
            dirty_cas: false,
            script_caller: None,
            caller_tracked_keys: None,
            caller_dirty_cas: false,
            script_dirty: false,
            watched_keys: Vec::new(),
            reply_off: false,
            reply_skip_next: false,
            reply_skip_now: false,
            lua_debug: None,
            argv_mem: 0,
            tracking: Tracking::default(),
            postponed: false,
            reply_span: None,
            replconf: Default::default(),
            master: false,
            woff: 0,
            batch_reply: 0,
            batch_last: false,
            defer_reply: false,
            cluster_asking: false,
            cluster_readonly: false,
        }
    }

    /// Bytes of the commands queued since MULTI (CLIENT LIST multi-mem).
    pub fn multi_mem(&self) -> usize {
        self.multi.as_deref().map_or(0, queue_memory)
    }

    /// What the client costs, as maxmemory-clients and mem_clients_normal count it: its fixed
    /// structures, the query buffer's capacity, the output buffers the connection holds (a
    /// reply being written occupies all its buffer until it is done, unlike Redis's reply
    /// list, whose written nodes are freed) and the outbox, the arguments and the MULTI queue.
    pub fn memory(&self) -> u64 {
        const FIXED: u64 = 768;
        let (_, qbuf_cap) = self.handle.qbuf();
        let held = self.handle.out_held.load(Ordering::Relaxed).max(1024);
        FIXED
            + qbuf_cap as u64
            + held as u64
            // The outbox, and replies the peer has not taken (the connection's backlog).
            + self.handle.pending_output() as u64
            + self.argv_mem as u64
            + self.multi_mem() as u64
            + self.batch_reply as u64
    }

    /// Whether a `Reply::Deferred` of the running command goes to the connection to encode (and
    /// may be completed later, as KEYS's walk is) rather than being encoded in place: a command
    /// straight from the connection's batch, not inside MULTI or a script.
    pub fn defers_reply(&self) -> bool {
        self.defer_reply && !self.in_exec && self.script_caller.is_none()
    }

    /// The ACL user the client runs as.
    pub fn user_name(&self) -> &[u8] {
        self.user.as_deref().unwrap_or(b"default")
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

/// Re-reads client-output-buffer-limit and tracking-table-max-keys when the configuration text
/// changed (after CONFIG commands and from cron).
pub fn refresh_limits(st: &mut super::State) {
    use std::sync::Mutex;
    static LAST: Mutex<String> = Mutex::new(String::new());
    st.client_eviction_limit = compute_client_eviction_limit(st);
    apply_jemalloc_bg_thread(st);
    if let Some(desc) = crate::config::lookup("tracking-table-max-keys") {
        st.tracking.max_keys = st.config.get(desc).parse().unwrap_or(0);
    }
    let Some(desc) = crate::config::lookup("client-output-buffer-limit") else { return };
    // A replica's hard limit under repl-backlog-size is raised to it, as Redis 7.0 does: a
    // partial resync hands the replica up to a whole backlog at once, and it would be dropped
    // for what the backlog holds anyway.
    let backlog: u64 = st.config.other.get("repl-backlog-size").and_then(|v| v.parse().ok()).unwrap_or(1 << 20);
    let text = st.config.get(desc);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let seen = format!("{text} {backlog}");
    if *last == seen {
        return;
    }
    let words: Vec<&str> = text.split(' ').collect();
    for c in words.chunks(4).filter(|c| c.len() == 4) {
        let n = |s: &str| s.parse::<u64>().unwrap_or(0);
        let limits = (n(c[1]), n(c[2]), n(c[3]));
        match c[0] {
            "normal" => set_obuf_limits(ObufClass::Normal, limits),
            "pubsub" => set_obuf_limits(ObufClass::Pubsub, limits),
            "replica" | "slave" => {
                let hard = if limits.0 > 0 { limits.0.max(backlog) } else { 0 };
                set_obuf_limits(ObufClass::Replica, (hard, limits.1, limits.2))
            }
            _ => {}
        }
    }
    *last = seen;
}

/// The client cron (Redis's clientsCron). Output buffer limits are checked for every client
/// every tick; the buffers are resized, and the recent peaks noted, for the clients of this
/// tick's share of Redis's rotation (`CronRotation`). Then clients are evicted if they use
/// more than maxmemory-clients.
pub fn cron(st: &mut super::State, now_ms: i64) {
    let (mut shrinks, mut expands) = (0, 0);
    let slot = st.client_peaks.start_second(now_ms / 1000);
    for c in st.clients.values() {
        if !c.handle.enforce_obuf_limits() {
            log_if_obuf_exceeded(st, c);
        }
    }
    let visit = st.cron_rotation.next_visits(&st.clients, st.config.hz.max(1) as usize);
    for id in visit {
        let Some(c) = st.clients.get(&id) else { continue };
        if !c.handle.enforce_obuf_limits() {
            continue;
        }
        c.handle.cron_resize_qbuf((now_ms - c.last_interaction_ms).max(0) / 1000);
        match c.handle.cron_resize_reply_buffer(now_ms, st.reply_buffer) {
            -1 => shrinks += 1,
            1 => expands += 1,
            _ => {}
        }
        // After the resize, as Redis's clientsCronTrackExpansiveClients: a trimmed buffer
        // counts as trimmed.
        let input = crate::alloc::usable_size(c.handle.qbuf().1) as usize + c.argv_mem;
        st.client_peaks.note(slot, input, c.handle.pending_output());
    }
    st.stats.reply_buffer_shrinks += shrinks;
    st.stats.reply_buffer_expands += expands;
    let _ = evict_clients(st, None);
}

/// Which clients each tick of the client cron visits, as Redis's clientsCron chooses them: its
/// client list (oldest first, a new client appended) is rotated tail to head and the new head
/// visited, `clients / hz` times a tick but at least 5 (all of them when fewer), so that each
/// client is visited about once a second, and a new client at the next tick.
#[derive(Debug, Default)]
pub struct CronRotation {
    /// Redis's client list, by id: connected clients are appended once the cron sees them.
    order: std::collections::VecDeque<u64>,
    /// The highest id appended (ids only grow).
    last_appended: u64,
}

impl CronRotation {
    fn next_visits(&mut self, clients: &ClientTable, hz: usize) -> Vec<u64> {
        self.visits(clients.keys().copied(), |id| clients.contains_key(&id), hz)
    }

    /// The ids to visit this tick, of the clients `ids` (in any order; `present` says whether one
    /// is in the table now).
    fn visits(&mut self, ids: impl Iterator<Item = u64>, present: impl Fn(u64) -> bool, hz: usize) -> Vec<u64> {
        const MIN_ITERATIONS: usize = 5;
        let mut count = 0;
        let mut new: Vec<u64> = ids.inspect(|_| count += 1).filter(|&id| id > self.last_appended).collect();
        new.sort_unstable();
        if let Some(&last) = new.last() {
            self.last_appended = last;
        }
        self.order.extend(new);
        let iterations = (count / hz).max(MIN_ITERATIONS.min(count));
        let mut visits = Vec::with_capacity(iterations);
        // A client out of the table just now (one whose command is running) is passed over.
        for _ in 0..self.order.len() {
            if visits.len() == iterations {
                break;
            }
            let Some(id) = self.order.pop_back() else { break };
            self.order.push_front(id);
            if present(id) {
                visits.push(id);
            }
        }
        visits
    }

    /// A disconnected client leaves the rotation (Redis unlinks it from its list).
    pub fn forget(&mut self, id: u64) {
        if let Some(at) = self.order.iter().rposition(|&c| c == id) {
            self.order.remove(at);
        }
    }
}

/// The biggest query buffer (with the command's arguments) and output buffer of any client,
/// per second over the last eight (Redis's CLIENTS_PEAK_MEM_USAGE_SLOTS), for INFO's
/// client_recent_max_input_buffer and client_recent_max_output_buffer.
#[derive(Debug, Default)]
pub struct RecentPeaks {
    input: [usize; PEAK_SLOTS],
    output: [usize; PEAK_SLOTS],
}

const PEAK_SLOTS: usize = 8;

impl RecentPeaks {
    /// The slot of this second. The next one, the oldest, is cleared now, as Redis clears it
    /// on every cron pass, so a figure lasts seven to eight seconds.
    fn start_second(&mut self, unix_secs: i64) -> usize {
        let slot = unix_secs.rem_euclid(PEAK_SLOTS as i64) as usize;
        let oldest = (slot + 1) % PEAK_SLOTS;
        self.input[oldest] = 0;
        self.output[oldest] = 0;
        slot
    }

    fn note(&mut self, slot: usize, input: usize, output: usize) {
        self.input[slot] = self.input[slot].max(input);
        self.output[slot] = self.output[slot].max(output);
    }

    pub fn max_input(&self) -> usize {
        self.input.iter().copied().max().unwrap_or(0)
    }

    pub fn max_output(&self) -> usize {
        self.output.iter().copied().max().unwrap_or(0)
    }
}

/// jemalloc-bg-thread as configured, applied when it changes (at startup and after CONFIG SET).
fn apply_jemalloc_bg_thread(st: &super::State) {
    use std::sync::atomic::{AtomicU8, Ordering};
    /// 0: not applied yet, 1: off, 2: on.
    static APPLIED: AtomicU8 = AtomicU8::new(0);
    let on = st.config.other.get("jemalloc-bg-thread").is_none_or(|v| v == "yes");
    let want = if on { 2 } else { 1 };
    if APPLIED.swap(want, Ordering::Relaxed) != want && !crate::alloc::set_background_thread(on) {
        tracing::warn!("jemalloc background threads could not be turned {}", if on { "on" } else { "off" });
    }
}

/// maxmemory-clients in bytes (Redis's getClientEvictionLimit), as of the last CONFIG SET.
pub fn client_eviction_limit(st: &super::State) -> u64 {
    st.client_eviction_limit
}

/// maxmemory-clients in bytes: a size, or a percentage of maxmemory; never under 128 KiB, so a
/// bad setting cannot cut every client off; 0 for none.
fn compute_client_eviction_limit(st: &super::State) -> u64 {
    let text = st.config.other.get("maxmemory-clients").map_or("0", |s| s.as_str());
    let limit = match text.strip_suffix('%') {
        Some(pct) if st.config.maxmemory > 0 => {
            (st.config.maxmemory as f64 * pct.parse::<f64>().unwrap_or(0.0) / 100.0) as u64
        }
        Some(_) => 0,
        None => text.parse::<i64>().unwrap_or(0).max(0) as u64,
    };
    if limit == 0 {
        0
    } else {
        limit.max(128 * 1024)
    }
}

/// What a client's bookkeeping outside its buffers costs, as Redis's getClientMemoryUsage
/// estimates it: a list node and a watchedKey per WATCHed key, a list node per pattern, a
/// dict entry per channel and shard channel and a bucket per slot of each dict, the slots of
/// the MULTI queue, and two rax nodes per tracking prefix. maxmemory-clients counts it, so
/// WATCHing or subscribing without end ends in eviction.
pub fn bookkeeping_memory(st: &super::State, c: &Client) -> u64 {
    const LIST_NODE: usize = 24;
    const DICT_ENTRY: usize = 24;
    const MULTI_CMD: usize = 24;
    // A dict's buckets: none while empty, then a power of two of at least 4 holding every entry.
    let dict = |entries: usize| match entries {
        0 => 0,
        n => n * DICT_ENTRY + n.next_power_of_two().max(4) * std::mem::size_of::<usize>(),
    };
    let watched = c.watched_keys.len() * (LIST_NODE + 32);
    let pubsub = st.pubsub.subs(c.id).map_or(0, |s| {
        let (all, shard) = st.pubsub.counts(c.id);
        let patterns = s.patterns.len();
        patterns * LIST_NODE + dict(all - patterns) + dict(shard)
    });
    // Redis allocates queued commands two slots at first, doubling when full.
    let queued = c.running_exec.map_or_else(|| c.multi.as_ref().map_or(0, |q| q.len()), |(n, _)| n);
    let multi = if queued == 0 { 0 } else { queued.next_power_of_two().max(2) * MULTI_CMD };
    let prefixes = c.tracking.prefixes.len() * 2 * 32;
    (watched + pubsub + multi + prefixes) as u64
}

/// Redis's evictClients: while normal and pub/sub clients together use more than
/// maxmemory-clients, the biggest client not marked `no-evict` is closed (clients already
/// closing are left out). Redis takes them from its largest memory bucket
/// first; here they go strictly largest first. `caller` is the client whose batch is running
/// (out of the table meanwhile): it counts, and may be evicted itself, as Redis may evict the
/// current client before its command runs. Returns the memory of the clients closed, and of
/// those still closing.
#[inline]
pub fn evict_clients(st: &mut super::State, caller: Option<&Client>) -> u64 {
    let limit = client_eviction_limit(st);
    if limit == 0 {
        return 0;
    }
    evict_over(st, caller, limit)
}

/// `evict_clients` under a limit, out of line: called after every batch, the check alone is
/// then a load and a branch.
#[inline(never)]
fn evict_over(st: &mut super::State, caller: Option<&Client>, limit: u64) -> u64 {
    let mut total = 0u64;
    // Clients already closing still hold their buffers until their connections let go: that
    // memory is about to be freed too (maxmemory must not evict keys for it meanwhile).
    let mut closing = 0u64;
    let mut evictable: Vec<(u64, u64, u64)> = Vec::new();
    for c in st.clients.values().map(|c| &**c).chain(caller) {
        if c.handle.close_requested() {
            closing += c.memory();
            continue;
        }
        // Only normal and pub/sub clients are evicted, and only theirs counts (Redis's
        // clientEvictionAllowed): never the master link (a big transaction of its stream) nor
        // a replica.
        if c.master || c.handle.is_replica() {
            continue;
        }
        // The figure CLIENT LIST shows as tot-mem, so what is left sums to under the limit,
        // with what the connection's buffers hold beyond Redis's figures.
        let mem = total_memory(st, c) + c.handle.written_held() as u64;
        total += mem;
        if !c.no_evict {
            // What closing it gives back (its buffers' real capacities), for maxmemory.
            evictable.push((mem, c.id, c.memory().max(mem)));
        }
    }
    if total < limit {
        return closing;
    }
    evictable.sort_unstable_by(|a, b| b.cmp(a));
    let now = crate::util::clock::unix_ms();
    let mut freed = closing;
    for (mem, id, held) in evictable {
        if total < limit {
            return freed;
        }
        let Some(c) = st.clients.get(&id).map(|c| &**c).or(caller.filter(|c| c.id == id)) else { continue };
        let info = client_line(st, c, now, None);
        tracing::info!("Evicting client: {info}");
        c.handle.request_close();
        st.stats.evicted_clients += 1;
        total -= mem;
        freed += held;
    }
    if total >= limit {
        tracing::warn!("Over client maxmemory after evicting all evictable clients");
    }
    freed
}

/// Logs Redis's line for a client the output buffer limit closed (once).
pub fn log_if_obuf_exceeded(st: &super::State, c: &Client) {
    if c.handle.take_obuf_exceeded() {
        let info = client_line(st, c, crate::util::clock::unix_ms(), None);
        tracing::warn!("Client {info} scheduled to be closed ASAP for overcoming of output buffer limits.");
    }
}

/// Redis's verbose line for a client whose peer closed the connection (the line is only
/// formatted at loglevel verbose or debug).
pub fn log_if_peer_closed(st: &super::State, c: &Client) {
    if c.handle.peer_closed() {
        tracing::debug!("Client closed connection {}", client_line(st, c, crate::util::clock::unix_ms(), None));
    }
}

/// What queued commands take, as Redis's multi-mem counts them: each one's arguments and its
/// array of pointers to them.
pub fn queue_memory(queue: &[super::Cmd]) -> usize {
    queue.iter().map(|cmd| cmd.argv.iter().map(|a| a.len() + std::mem::size_of::<usize>()).sum::<usize>()).sum()
}

/// Estimated memory of one client's fixed parts, as CLIENT LIST's tot-mem reports them: Redis's
/// client structure, its reply buffer (`reply_buffer`, CLIENT LIST's rbs; 1 KiB once the client
/// cron shrank it) and the query buffer's allocation (`qbuf_alloc`).
pub fn client_memory(qbuf_alloc: usize, reply_buffer: usize) -> u64 {
    const CLIENT_STRUCT: u64 = 768;
    CLIENT_STRUCT + reply_buffer as u64 + qbuf_alloc as u64
}

/// The query buffer Redis holds for the client running a command (16 KiB read room in a 20 KiB
/// allocation).
pub const CALLER_QUERY_BUFFER: usize = 20480;
/// That buffer's room as sds counts it (sdsalloc: the allocation less its 6-byte header).
const QUERY_BUFFER_ROOM: usize = CALLER_QUERY_BUFFER - 6;
/// An empty query buffer's allocation (sdsempty, and what sdsRemoveFreeSpace leaves of an idle
/// client's), and its room.
const EMPTY_QUERY_BUFFER: usize = 8;
const EMPTY_QUERY_BUFFER_ROOM: usize = 4;

/// What only the calling client knows about itself while its command runs.
pub(crate) struct Current {
    cmd: String,
    qbuf: usize,
    argv_mem: usize,
    /// The arguments of the command running (inside EXEC, the queued one's).
    argc: usize,
}

impl Current {
    pub fn of(ctx: &super::ctx::Ctx, args: &crate::spec::Args) -> Current {
        // Redis empties its query buffer once it has run all the commands one read brought, so
        // while one runs the buffer holds that whole read (the commands before and after this
        // one, in whatever form they came), as the connection reported it before the batch.
        let qbuf = ctx.client().handle.qbuf().0;
        // Inside EXEC Redis shows EXEC itself, its argument counted: it runs the queued commands
        // without updating lastcmd or argv_len_sum.
        if ctx.client().running_exec.is_some() {
            return Current { cmd: "exec".into(), qbuf, argv_mem: "EXEC".len(), argc: args.argv.len() };
        }
        let argv_mem = args.argv.iter().map(|a| a.len()).sum();
        Current { cmd: format!("client|{}", ctx.spec().name), qbuf, argv_mem, argc: args.argv.len() }
    }
}

/// One line of CLIENT LIST / CLIENT INFO, in Redis 7.0's field order, without the newline.
pub(crate) fn client_line(st: &super::State, c: &Client, now_ms: i64, current: Option<&Current>) -> String {
    let mut flags = String::new();
    if st.pubsub.monitors.contains(&c.id) {
        flags.push('O');
    } else if c.handle.is_replica() {
        flags.push('S');
    }
    if c.master {
        flags.push('M');
    }
    if st.pubsub.is_subscribed(c.id) {
        flags.push('P');
    }
    if c.multi.is_some() || c.running_exec.is_some() {
        flags.push('x');
    }
    if c.blocked.is_some() || c.postponed {
        flags.push('b');
    }
    if c.tracking.on {
        flags.push('t');
    }
    if c.tracking.broken_redir {
        flags.push('R');
    }
    if c.tracking.bcast {
        flags.push('B');
    }
    if c.dirty_cas {
        flags.push('d');
    }
    if c.close_after_reply {
        flags.push('c');
    }
    if c.handle.close_requested() {
        flags.push('A');
    }
    if c.info.unix {
        flags.push('U');
    }
    if c.no_evict {
        flags.push('e');
    }
    if c.no_touch {
        flags.push('T');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let (cmd, argv_mem) = match current {
        Some(cur) => (cur.cmd.clone(), cur.argv_mem),
        None => (c.last_command_name(), c.argv_mem),
    };
    let (qbuf, qbuf_free, tot_mem) = query_buffer_figures(c, current);
    // Output waiting for the socket; Redis counts it in 16 KiB reply-list nodes.
    let omem = c.handle.pending_output();
    let oll = omem.div_ceil(16 * 1024);
    let (multi, multi_mem) = match c.running_exec {
        Some((queued, mem)) => (queued as i64, mem),
        None => (c.multi.as_ref().map_or(-1, |q| q.len() as i64), c.multi_mem()),
    };
    let (plain, ssub) = st.pubsub.counts(c.id);
    let psub = st.pubsub.subs(c.id).map_or(0, |s| s.patterns.len());
    let redir = if c.tracking.on { c.tracking.redirect as i64 } else { -1 };
    let name = c.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} \
         qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl=0 oll={} omem={} tot-mem={} events=r{} \
         cmd={} user={} redir={} resp={}",
        c.id,
        c.info.addr,
        c.info.laddr,
        c.info.fd,
        name,
        (now_ms - c.created_ms).max(0) / 1000,
        (now_ms - c.last_interaction_ms).max(0) / 1000,
        flags,
        c.db,
        plain - psub,
        psub,
        ssub,
        multi,
        qbuf,
        qbuf_free,
        argv_mem,
        multi_mem,
        c.handle.reply_buffer_size(),
        c.handle.reply_buffer_peak(),
        oll,
        omem,
        tot_mem + omem as u64 + multi_mem as u64 + bookkeeping_memory(st, c),
        if omem > 0 { "w" } else { "" },
        cmd,
        String::from_utf8_lossy(c.user_name()),
        redir,
        c.proto
    )
}

/// A client's tot-mem as CLIENT LIST shows it (the client not running a command).
pub fn total_memory(st: &super::State, c: &Client) -> u64 {
    let (_, _, fixed) = query_buffer_figures(c, None);
    fixed + c.handle.pending_output() as u64 + c.batch_reply as u64 + c.multi_mem() as u64 + bookkeeping_memory(st, c)
}

/// CLIENT LIST's qbuf and qbuf-free, and the client's memory before its output and MULTI
/// queue: the fixed structures and the query buffer.
fn query_buffer_figures(c: &Client, current: Option<&Current>) -> (usize, usize, u64) {
    let reply_buffer = c.handle.reply_buffer_size();
    if let Some(cur) = current {
        // Redis adds the arguments' lengths and their pointers.
        let argv = cur.argv_mem + cur.argc * std::mem::size_of::<usize>();
        return (
            cur.qbuf,
            QUERY_BUFFER_ROOM.saturating_sub(cur.qbuf),
            client_memory(CALLER_QUERY_BUFFER, reply_buffer) + argv as u64,
        );
    }
    // Another client's query buffer is what its connection last reported (trimmed by the client
    // cron when idle, as Redis's clientsCron does), counted once bytes arrived, even before the
    // first command is whole (a big first argument being read). A connection that has not sent
    // a byte has Redis's empty query buffer (it allocates the read room on the first read); one
    // whose reads fit in 16 KiB has that room (our connection's own buffer may be sized
    // otherwise); a trimmed one keeps an empty buffer's allocation.
    let (len, cap) = c.handle.qbuf();
    if c.last_cmd == "NULL" && len == 0 {
        (0, EMPTY_QUERY_BUFFER_ROOM, client_memory(EMPTY_QUERY_BUFFER, reply_buffer))
    } else if cap == 0 {
        (len, 0, client_memory(EMPTY_QUERY_BUFFER.max(len), reply_buffer))
    } else if cap <= 16 * 1024 {
        (len, QUERY_BUFFER_ROOM.saturating_sub(len), client_memory(CALLER_QUERY_BUFFER, reply_buffer))
    } else {
        (len, cap.saturating_sub(len), client_memory(cap, reply_buffer))
    }
}

/// What a client declared with REPLCONF.
#[derive(Debug, Default, Clone)]
pub struct ReplConf {
    /// `capa eof`: it reads the `$EOF:<mark>` framing.
    pub capa_eof: bool,
    /// `capa psync2`: it understands `+CONTINUE <replid>`.
    pub capa_psync2: bool,
    /// `listening-port` and `ip-address`, for INFO's slave lines.
    pub listening_port: u16,
    pub ip_address: Option<String>,
    /// `rdb-only 1`: it wants the snapshot and no stream (redis-cli --rdb).
    pub rdb_only: bool,
    /// `rdb-filter-only functions`: the snapshot holds the functions and no keys.
    pub functions_only: bool,
}

/// A snapshot for the connection to send: the reply head first, then the RDB from `source`,
/// then whatever the outbox queued meanwhile (the stream).
#[derive(Debug)]
pub struct RdbTransfer {
    pub source: RdbSource,
    /// The client wants the snapshot only: close it afterwards.
    pub rdb_only: bool,
    /// What goes before the snapshot: `+FULLRESYNC <replid> <offset>` and the `$EOF:` header.
    pub head: Vec<u8>,
}

/// Where a transfer's RDB comes from.
#[derive(Debug)]
pub enum RdbSource {
    /// Diskless: chunks of the one snapshot child's pipe, relayed to every replica of the sync
    /// (the child writes the closing EOF mark itself, so a child that dies leaves the replica
    /// without it). One transfer of the group carries the relay, which its connection starts.
    Relay { chunks: tokio::sync::mpsc::Receiver<bytes::Bytes>, relay: Option<RdbRelay> },
    /// Disk: the BGSAVE's file, once `done` says the child succeeded; sent as `$<len>` and the file.
    Disk { done: tokio::sync::oneshot::Receiver<bool>, path: std::path::PathBuf },
}

/// Chunks a replica's connection may have waiting in a diskless sync: few, so the slowest
/// replica paces the child (see `server::rdb_transfer`).
pub const RELAY_DEPTH: usize = 4;

/// The reading side of a diskless sync (Redis's rdb pipe): the child's pipe and one channel per
/// replica of the sync. Run by `server::rdb_transfer::relay`.
#[derive(Debug)]
pub struct RdbRelay {
    pub pipe: std::os::fd::OwnedFd,
    pub pid: i32,
    pub replicas: Vec<tokio::sync::mpsc::Sender<bytes::Bytes>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pubsub_hard_limit_drops_the_outbox_and_closes() {
        set_obuf_limits(ObufClass::Normal, (0, 0, 0));
        set_obuf_limits(ObufClass::Pubsub, (100, 0, 0));
        let h = ClientHandle::default();
        h.push_slice(&[b'x'; 60]);
        assert_eq!(h.pending_output(), 60, "normal clients have no limit by default");
        h.set_pubsub(true);
        h.push_slice(&[b'x'; 30]);
        assert!(!h.close_requested());
        // What the connection took but has not written counts too.
        let mut taken = Vec::new();
        h.take_output_into(&mut taken);
        assert_eq!(h.pending_output(), 90);
        h.push_slice(&[b'x'; 20]);
        assert!(h.close_requested());
        assert!(h.take_obuf_exceeded());
        assert!(!h.take_obuf_exceeded());
        h.push_slice(b"more");
        assert_eq!(h.take_output().len(), 0, "a closing client's output is dropped");
        set_obuf_limits(ObufClass::Pubsub, (32 << 20, 8 << 20, 60));
    }

    #[test]
    fn cron_rotation_visits_as_redis_rotates_its_client_list() {
        let mut rotation = CronRotation::default();
        let all = |ids: &[u64]| ids.to_vec();
        // Fewer than five clients: all of them each tick, newest first.
        let ids = all(&[1, 2, 3]);
        assert_eq!(rotation.visits(ids.iter().copied(), |_| true, 10), [3, 2, 1]);
        // 60 clients at hz 10: six a tick; a new client is visited at the next tick.
        let ids: Vec<u64> = (1..=60).collect();
        let first = rotation.visits(ids.iter().copied(), |_| true, 10);
        assert_eq!(first, [60, 59, 58, 57, 56, 55], "the list's tail first: the newest");
        let mut ids = ids;
        ids.push(61);
        let second = rotation.visits(ids.iter().copied(), |_| true, 10);
        assert_eq!(second[0], 61);
        // Every client within about a second of ticks (59 / 10: five a tick); one out of the table
        // is passed over, one disconnected forgotten.
        rotation.forget(30);
        ids.retain(|&id| id != 30 && id != 31);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..12 {
            seen.extend(rotation.visits(ids.iter().copied(), |id| id != 31, 10));
        }
        assert_eq!(seen.len(), 59);
        assert!(!seen.contains(&30) && !seen.contains(&31));
    }
}
