//! Replication state, both sides, as Redis 7.0 keeps it.
//!
//! Master side: the replication ID pair and offset, the backlog, the attached replicas and what
//! each acknowledged, and the clients waiting in WAIT. Every execution unit's propagated
//! commands (see `propagate`) are encoded once into `pending` (with a `SELECT` when the database
//! changes) and, when the batch ends (`flush`), copied once into the backlog's blocks, which
//! every replica's outbox shares (Redis 7.0's shared replication buffer, see `Backlog`). A
//! replica that asked for a full sync is attached at the moment its snapshot child forks, so
//! what it misses from the snapshot is exactly what is queued after; its connection sends the
//! snapshot first and the queue after it (`server::connection`).
//!
//! Full syncs as Redis 7.0 starts them: one snapshot child (the server's RDB child) for every
//! replica waiting at that moment; diskless, it writes one pipe that `server::rdb_transfer`
//! relays to all of them, after repl-diskless-sync-delay (or once
//! repl-diskless-sync-max-replicas wait); on disk, it is a BGSAVE whose file each replica gets,
//! later replicas joining it. Nothing starts while another child runs.
//!
//! The backlog appends each batch to its last 16 KiB block rather than keeping a buffer per
//! batch: with one tiny write a batch, per-batch buffers cost their handles and allocation
//! headers for every few dozen bytes of stream, about 3 MB for a 1 MB backlog against Redis's
//! 1.15 MB (see `repl_block`; tests/replication.rs bounds it through INFO).
//!
//! Replica side: where the master is, the link's state as the link task (`server::replica_link`)
//! reports it, and which client is the master. Commands from the master run as that client: no
//! replies, no expiry of their own, and their exact bytes go on to this server's own replicas
//! under the master's replication ID, so a chain of replicas shares one offset space.
//!
//! FAILOVER (Redis 6.2's coordinated failover) is a small state machine here: writes pause
//! while the master waits for its target's acknowledged offset to reach its own (checked after
//! every batch and from the cron, as Redis's beforeSleep and replicationCron do); then the
//! master becomes the target's replica, offering its own history, and its link's
//! `PSYNC <replid> <offset> FAILOVER` asks the target to promote itself. The target's answer
//! ends the failover: `+CONTINUE` (or `+FULLRESYNC`) and it is done, anything else and the
//! master takes its role back with a new history its replicas continue.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::clients::ClientHandle;
use super::repl_block::{BlockWriter, Sealed};
use super::State;
use crate::rdb::save::{self, Aux};
use crate::resp::Reply;
use crate::util::clock::unix_ms;

/// The all-zeros ID of `master_replid2` when there is no previous history.
pub const NULL_REPLID: &str = "0000000000000000000000000000000000000000";

/// The replication backlog, as Redis 7.0's shared replication buffer: the stream in blocks of
/// `BACKLOG_BLOCK` bytes (see `repl_block`), each batch appended to the last one, which the
/// replicas' outboxes reference too, so the stream's memory is held once however many replicas
/// still have it to send. It keeps at least `size` bytes, and more while a replica still holds
/// older blocks (a slow one, or one waiting for its snapshot): then another replica can
/// continue from there too. Whole blocks go from the front once neither applies (`trim`).
#[derive(Debug)]
pub struct Backlog {
    /// Full blocks, oldest first.
    sealed: std::collections::VecDeque<Sealed>,
    /// The block being appended to.
    tail: Option<BlockWriter>,
    /// Capacity of a new block.
    block: usize,
    /// Bytes held.
    histlen: usize,
    /// Allocated bytes of the blocks (mem_total_replication_buffers).
    mem: u64,
    /// repl-backlog-size.
    size: usize,
    /// Offset of the first byte held (Redis's repl_backlog->offset).
    pub first_offset: i64,
}

impl Backlog {
    /// An empty backlog whose next byte has offset `next_offset`.
    fn new(size: usize, next_offset: i64) -> Backlog {
        Backlog::with_blocks(size, next_offset, BACKLOG_BLOCK)
    }

    fn with_blocks(size: usize, next_offset: i64, block: usize) -> Backlog {
        Backlog {
            sealed: Default::default(),
            tail: None,
            block: block.max(1),
            histlen: 0,
            mem: 0,
            size: size.max(1),
            first_offset: next_offset,
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn histlen(&self) -> usize {
        self.histlen
    }

    /// What the blocks occupy (Redis's repl_buffer_mem).
    pub fn memory(&self) -> u64 {
        self.mem
    }

    fn end(&self) -> i64 {
        self.first_offset + self.histlen as i64
    }

    /// Appends `data`, handing `share` (if any) a view of each block's part of it (the
    /// replicas' outboxes queue those).
    fn append(&mut self, mut data: &[u8], mut share: Option<&mut dyn FnMut(Bytes)>) {
        while !data.is_empty() {
            if self.tail.as_ref().is_some_and(|t| t.len() == t.capacity()) {
                if let Some(full) = self.tail.take() {
                    self.sealed.push_back(full.seal());
                }
            }
            let block = self.block;
            let mem = &mut self.mem;
            let tail = self.tail.get_or_insert_with(|| {
                *mem += crate::alloc::usable_size(block);
                BlockWriter::new(block)
            });
            let start = tail.len();
            let n = tail.append(data);
            if let Some(share) = share.as_mut() {
                share(tail.slice(start, start + n));
            }
            self.histlen += n;
            data = &data[n..];
        }
    }

    /// Drops full blocks from the front while what stays is more than `size` bytes and starts
    /// no later than `keep_from` (the oldest byte a replica still has to send).
    fn trim(&mut self, keep_from: i64) {
        while let Some(front) = self.sealed.front() {
            let len = front.len();
            if self.histlen - len <= self.size || self.first_offset + len as i64 > keep_from {
                break;
            }
            self.mem -= crate::alloc::usable_size(front.capacity());
            self.histlen -= len;
            self.first_offset += len as i64;
            self.sealed.pop_front();
        }
    }

    /// The bytes from stream offset `from` to the end; None when `from` is not held (nor the
    /// next byte to come).
    fn since(&self, from: i64) -> Option<Vec<u8>> {
        if from < self.first_offset || from > self.end() {
            return None;
        }
        let mut skip = (from - self.first_offset) as usize;
        let mut out = Vec::with_capacity(self.histlen - skip);
        let blocks = self.sealed.iter().map(Sealed::bytes).chain(self.tail.as_ref().map(BlockWriter::written));
        for bytes in blocks {
            if skip >= bytes.len() {
                skip -= bytes.len();
                continue;
            }
            out.extend_from_slice(&bytes[skip..]);
            skip = 0;
        }
        Some(out)
    }

    /// CONFIG SET repl-backlog-size: the next trims keep that much.
    fn resize(&mut self, size: usize) {
        self.size = size.max(1);
    }
}

/// Where an attached replica is in its synchronization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaState {
    /// Its snapshot is being produced and sent; the stream queues behind it.
    SendBulk,
    /// It acknowledged: it follows the stream.
    Online,
}

impl ReplicaState {
    pub fn name(self) -> &'static str {
        match self {
            // As Redis names a replica whose snapshot child is still writing.
            ReplicaState::SendBulk => "wait_bgsave",
            ReplicaState::Online => "online",
        }
    }
}

/// A replica attached to this server.
#[derive(Debug)]
pub struct Replica {
    pub id: u64,
    pub handle: Arc<ClientHandle>,
    pub state: ReplicaState,
    /// The offset it last acknowledged (REPLCONF ACK), 0 before any.
    pub ack_offset: i64,
    /// When it last acknowledged (unix ms).
    pub ack_ms: i64,
    /// The address it announced (REPLCONF ip-address, else its peer address) and listening-port.
    pub ip: String,
    pub port: u16,
    /// A disk sync's replica waiting for the BGSAVE: told when it ends (`sync_child_done`).
    pub disk_wait: Option<tokio::sync::oneshot::Sender<bool>>,
}

/// The replica side's link to its master, as the link task reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected; the link task (re)connects.
    Connect,
    /// Connected, in the handshake.
    Handshake,
    /// Receiving the snapshot.
    Transfer,
    /// Following the stream.
    Connected,
}

/// The master this server replicates (REPLICAOF host port).
#[derive(Debug)]
pub struct MasterLink {
    pub host: String,
    pub port: u16,
    pub state: LinkState,
    /// The master client while the link follows the stream.
    pub client_id: Option<u64>,
    /// When the link last went down (unix ms), for master_link_down_since_seconds.
    pub down_since_ms: i64,
}

/// What the link task needs to connect and ask for the stream.
#[derive(Debug, Clone)]
pub struct LinkTarget {
    pub epoch: i64,
    pub host: String,
    pub port: u16,
    /// The history to continue: this server's replication ID and the next offset it wants.
    pub replid: String,
    pub next_offset: i64,
    pub masteruser: Option<String>,
    pub masterauth: Option<String>,
    /// What REPLCONF announces: listening-port (replica-announce-port, else port) and
    /// ip-address (replica-announce-ip, if set).
    pub announce_port: u16,
    pub announce_ip: Option<String>,
    pub timeout_s: u64,
    pub config: crate::config::Config,
    /// No key in any database (repl-diskless-load on-empty-db loads from the socket then).
    pub dataset_empty: bool,
    /// FAILOVER made this master a replica of its target: PSYNC says FAILOVER, and the
    /// answer decides the failover (`failover_psync_answered`).
    pub failover: bool,
}

/// What the replica link task needs to know, shared with it.
#[derive(Debug, Default)]
pub struct LinkShared {
    /// Snapshot bytes received so far and expected (-1: EOF-marked, size unknown).
    pub transfer_read: AtomicI64,
    pub transfer_size: AtomicI64,
    /// When the master last sent something (unix ms).
    pub last_io_ms: AtomicI64,
    /// The applied offset, for the link task's REPLCONF ACK.
    pub applied: AtomicI64,
    /// Bumped by every REPLICAOF: a link task working for an older one gives up.
    pub epoch: AtomicI64,
    /// Woken when the master changes.
    pub changed: tokio::sync::Notify,
    /// The link reached the master's stream (the link task reconnects at once when it breaks).
    pub streamed: std::sync::atomic::AtomicBool,
}

/// Replication state kept in the executor's `State`.
#[derive(Debug)]
pub struct ReplState {
    pub replid: String,
    pub replid2: String,
    /// master_repl_offset: bytes of stream produced (or, on a replica, applied) so far.
    pub offset: i64,
    /// The first offset that replid2 no longer covers (-1 without a replid2).
    pub second_offset: i64,
    pub backlog: Option<Backlog>,
    /// Stream bytes of this batch, not yet in the backlog nor queued to the replicas.
    pending: Vec<u8>,
    /// The database the stream last selected (None: the next command selects).
    selected_db: Option<usize>,
    pub replicas: Vec<Replica>,
    last_ping_ms: i64,
    /// When the last replica went away (unix ms; 0 while some are attached), for repl-backlog-ttl.
    no_replicas_since_ms: i64,
    /// A WAIT asked the replicas for an acknowledgement.
    getack_wanted: bool,
    /// Clients blocked in WAIT: (client id, offset to reach, replicas wanted).
    pub waiting: Vec<(u64, i64, i64)>,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// A full sync from the master is being loaded: Some(true) while the old data is still
    /// served (async_loading: repl-diskless-load swapdb with the same history), Some(false)
    /// while clients get -LOADING.
    pub sync_loading: Option<bool>,
    /// Keys a client (not the master) gave a TTL on this writable replica: the replica expires
    /// these itself, as nobody else will (Redis's slaveKeysWithExpire).
    local_expires: std::collections::HashSet<(usize, Vec<u8>)>,
    /// Replicas waiting for their full sync to start (a diskless delay, or a child running).
    pub wait_start: Vec<Waiting>,
    /// rdb-only readers (redis-cli --rdb) of a disk sync, told when its BGSAVE ends.
    rdb_only_disk: Vec<tokio::sync::oneshot::Sender<bool>>,
    /// The offset a running disk sync's BGSAVE forked at (its replicas' `+FULLRESYNC`).
    disk_sync_offset: Option<i64>,
    /// The dump file was written for a disk sync (Redis's RDBGeneratedByReplication): with
    /// rdb-del-sync-files and no persistence it is deleted once every replica has it.
    sync_rdb_on_disk: bool,
    /// The second the waiting replicas last got a keepalive newline.
    last_newline_s: i64,
    /// The master, on a replica.
    pub master: Option<MasterLink>,
    /// The database the master's stream has selected, kept across links (Redis's cached
    /// master): a partial resync continues in it without a new SELECT.
    pub master_stream_db: usize,
    /// No history to offer the master: the first PSYNC asks `? -1` (a replica started with
    /// `replicaof` and no replication info in its dump).
    pub psync_fresh: bool,
    pub link: Arc<LinkShared>,
    /// A coordinated failover under way (FAILOVER).
    pub failover: Failover,
}

/// Where a FAILOVER stands (Redis's failover_state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FailoverState {
    #[default]
    None,
    /// Writes are paused until the target (or, without TO, any replica) acknowledges the whole
    /// stream.
    WaitForSync,
    /// This server is a replica of the target and waits for its answer to `PSYNC ... FAILOVER`.
    InProgress,
}

impl FailoverState {
    /// INFO replication's master_failover_state.
    pub fn name(self) -> &'static str {
        match self {
            FailoverState::None => "no-failover",
            FailoverState::WaitForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

/// A FAILOVER's parameters and progress.
#[derive(Debug, Default)]
pub struct Failover {
    pub state: FailoverState,
    /// The replica to promote: given with TO, or the first found in sync.
    pub target: Option<(String, u16)>,
    /// When the wait for the target ends (unix ms; 0: TIMEOUT not given).
    pub end_ms: i64,
    /// FORCE: fail over at the timeout even if the target did not catch up.
    pub force: bool,
}

impl Default for ReplState {
    fn default() -> Self {
        ReplState {
            replid: crate::util::clock::random_hex(40),
            replid2: NULL_REPLID.to_string(),
            offset: 0,
            second_offset: -1,
            backlog: None,
            pending: Vec::new(),
            selected_db: None,
            replicas: Vec::new(),
            last_ping_ms: 0,
            no_replicas_since_ms: 0,
            getack_wanted: false,
            waiting: Vec::new(),
            sync_full: 0,
            sync_partial_ok: 0,
            sync_partial_err: 0,
            sync_loading: None,
            local_expires: Default::default(),
            wait_start: Vec::new(),
            rdb_only_disk: Vec::new(),
            disk_sync_offset: None,
            sync_rdb_on_disk: false,
            last_newline_s: 0,
            master: None,
            master_stream_db: 0,
            psync_fresh: false,
            link: Arc::default(),
            failover: Failover::default(),
        }
    }
}

impl ReplState {
    pub fn is_replica(&self) -> bool {
        self.master.is_some()
    }

    /// Whether this server's own writes go to the stream: on a master with a backlog. A
    /// replica's stream is its master's, byte for byte; its own writes (a writable replica) go
    /// nowhere but its AOF, as in Redis 4.0 and later.
    #[inline]
    pub fn streams_own_writes(&self) -> bool {
        self.backlog.is_some() && self.master.is_none()
    }

    /// A new history: a new replication ID, the old one forgotten (Redis's changeReplicationId
    /// plus clearReplicationId2).
    pub fn new_history(&mut self) {
        self.replid = crate::util::clock::random_hex(40);
        self.clear_replid2();
    }

    pub fn mark_no_replicas_since(&mut self, now_ms: i64) {
        self.no_replicas_since_ms = now_ms;
    }

    pub fn clear_replid2(&mut self) {
        self.replid2 = NULL_REPLID.to_string();
        self.second_offset = -1;
    }

    /// The master's ID takes over (a promotion or a master's new history): the current one
    /// becomes replid2, valid up to the current offset (Redis's shiftReplicationId).
    pub fn shift_replid(&mut self, new_id: &str) {
        self.replid2 = std::mem::replace(&mut self.replid, new_id.to_string());
        self.second_offset = self.offset + 1;
    }
}

fn config_i64(st: &State, name: &str, default: i64) -> i64 {
    st.config.other.get(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn backlog_size(st: &State) -> usize {
    config_i64(st, "repl-backlog-size", 1 << 20).max(16 * 1024) as usize
}

/// Creates the backlog if there is none (the first replica attaching), starting at the current
/// offset; propagation is switched on for it.
pub fn ensure_backlog(st: &mut State) {
    if st.repl.backlog.is_none() {
        let size = backlog_size(st);
        st.repl.backlog = Some(Backlog::new(size, st.repl.offset + 1));
        st.prop.active = true;
        // Keys that expire on the way are deleted in the stream too.
        for db in &mut st.dbs {
            db.log_expired = true;
        }
    }
}

/// Queues one command of this server's own stream (see `propagate::flush_unit`).
#[inline]
pub fn feed(st: &mut State, db: usize, argv: &[Bytes]) {
    let r = &mut st.repl;
    let before = r.pending.len();
    if r.selected_db != Some(db) {
        let n = db.to_string();
        crate::aof::encode_command(&mut r.pending, &[&b"SELECT"[..], n.as_bytes()]);
        r.selected_db = Some(db);
    }
    crate::aof::encode_command(&mut r.pending, argv);
    r.offset += (r.pending.len() - before) as i64;
}

/// DEBUG REPLICATE: `argv` goes to the replicas as it is, in no database of its own.
pub fn feed_raw(st: &mut State, argv: &[Bytes]) {
    if st.repl.streams_own_writes() {
        let r = &mut st.repl;
        let before = r.pending.len();
        crate::aof::encode_command(&mut r.pending, argv);
        r.offset += (r.pending.len() - before) as i64;
    }
}

/// The master client's command failed here: the datasets may have diverged. Logged as Redis
/// logs it, and with propagation-error-behavior panic the replica stops.
pub fn master_command_failed(st: &State, reply: &[u8], command: &str) {
    let line = reply.split(|&b| b == b'\r').next().unwrap_or_default();
    let text = String::from_utf8_lossy(line.strip_prefix(b"-").unwrap_or(line));
    let command = if command == "NULL" { "<unknown>" } else { command };
    tracing::warn!(
        "== CRITICAL == This replica is sending an error to its master: '{text}' after processing the command '{command}'"
    );
    let behavior = st.config.other.get("propagation-error-behavior").map_or("ignore", String::as_str);
    // A writable replica may hold data its master does not know of (a library loaded on it, say):
    // an error there is no sign of divergence, and Redis panics only on a read-only one.
    if behavior.starts_with("panic") && st.config.replica_read_only() {
        tracing::warn!("This replica panicked sending an error to its master after processing the command '{command}'");
        std::process::exit(1);
    }
}

/// A replica's command produced a reply: the link carries the stream one way only, so the
/// reply is dropped and the replica disconnected, logged as Redis logs it (an error first as
/// the error a master sends its replica).
pub fn replica_replied(st: &State, client: &super::clients::Client, reply: &[u8], now_ms: i64) {
    let command = match client.last_cmd_parent {
        "" => client.last_cmd.to_string(),
        parent => format!("{parent}|{}", client.last_cmd),
    };
    if let Some(err) = reply.strip_prefix(b"-") {
        let line = err.split(|&b| b == b'\r').next().unwrap_or_default();
        tracing::warn!(
            "== CRITICAL == This master is sending an error to its replica: '{}' after processing the command '{command}'",
            String::from_utf8_lossy(line)
        );
    }
    let info = super::clients::client_line(st, client, now_ms, None);
    tracing::warn!("Replica generated a reply to command '{command}', disconnecting it: {info}");
    client.handle.request_close();
}

/// Queues a command outside any database (PING, REPLCONF GETACK).
fn feed_dbless(st: &mut State, argv: &[&[u8]]) {
    let r = &mut st.repl;
    let before = r.pending.len();
    crate::aof::encode_command(&mut r.pending, argv);
    r.offset += (r.pending.len() - before) as i64;
}

/// A command the master client is about to run: its bytes, exactly as the master sent them
/// (commands arrive canonically encoded), go on to this server's replicas. The offset moves
/// once it has run (`master_applied`).
pub fn relay_from_master(st: &mut State, argv: &[Bytes]) -> i64 {
    let r = &mut st.repl;
    let before = r.pending.len();
    crate::aof::encode_command(&mut r.pending, argv);
    let len = (r.pending.len() - before) as i64;
    if r.backlog.is_none() {
        // Nobody to relay to and no backlog to keep: only the offset counts.
        r.pending.truncate(before);
    }
    len
}

/// Takes back the last `relay_from_master` (of `len` bytes): the command was held, not run.
pub fn unrelay(st: &mut State, len: i64) {
    if st.repl.backlog.is_some() {
        let keep = st.repl.pending.len().saturating_sub(len as usize);
        st.repl.pending.truncate(keep);
    }
}

/// Stream bytes received from the master but not applied yet: its commands held by CLIENT
/// PAUSE (INFO's slave_read_repl_offset counts them, slave_repl_offset does not).
pub fn unapplied(st: &State) -> i64 {
    let Some(c) = st.repl.master.as_ref().and_then(|m| m.client_id).and_then(|id| st.clients.get(&id)) else {
        return 0;
    };
    let mut buf = Vec::new();
    for cmd in &c.pending {
        crate::aof::encode_command(&mut buf, &cmd.argv);
    }
    buf.len() as i64
}

/// The master client ran a command of `len` stream bytes.
pub fn master_applied(st: &mut State, len: i64) {
    st.repl.offset += len;
    st.repl.link.applied.store(st.repl.offset, Ordering::Relaxed);
}

/// Appends the batch's stream to the backlog and queues it on every replica's outbox.
#[inline]
pub fn flush(st: &mut State) {
    if !st.repl.pending.is_empty() {
        flush_pending(st);
    }
    // Not while a pause holds writes: the GETACK would move the offset that FAILOVER and a
    // shutdown wait for the replicas to reach (it goes once the pause ends).
    if st.repl.getack_wanted && !st.paused(unix_ms()) {
        st.repl.getack_wanted = false;
        request_acks(st);
    }
}

/// Asks every replica for an acknowledgement now (REPLCONF GETACK *).
pub fn request_acks(st: &mut State) {
    if !st.repl.replicas.is_empty() {
        feed_dbless(st, &[b"REPLCONF", b"GETACK", b"*"]);
        flush_pending(st);
    }
}

fn flush_pending(st: &mut State) {
    let r = &mut st.repl;
    let Some(backlog) = r.backlog.as_mut() else {
        r.pending.clear();
        release_large(&mut r.pending);
        return;
    };
    // One copy of the batch's stream, appended to the backlog's blocks of 16 KiB (Redis's
    // PROTO_REPLY_CHUNK_BYTES blocks) and shared by every replica: the backlog trims block by
    // block, and each block is an allocation of its own, so the last megabyte of a 32 MB
    // command does not keep all of it alive. Without replicas no view of it is made.
    let replicas = &r.replicas;
    let mut share = |part: Bytes| {
        for replica in replicas {
            replica.handle.push_shared(&part);
        }
    };
    backlog.append(&r.pending, (!replicas.is_empty()).then_some(&mut share as &mut dyn FnMut(Bytes)));
    r.pending.clear();
    release_large(&mut r.pending);
    trim_backlog(st);
}

/// The most one backlog block holds.
const BACKLOG_BLOCK: usize = 16 * 1024;

/// Lets the backlog drop what no replica still has to send (beyond repl-backlog-size).
fn trim_backlog(st: &mut State) {
    if st.repl.backlog.is_none() {
        return;
    }
    // CONFIG SET repl-backlog-size takes effect at once (a MULTI that shrinks the backlog and
    // then writes past it leaves nothing older for a partial resync, as in Redis).
    let size = backlog_size(st);
    let Some(backlog) = st.repl.backlog.as_mut() else { return };
    backlog.resize(size);
    let end = backlog.end();
    // The chunks a replica's outbox still references are the end of the stream (its
    // connection copies what it takes); a replica being closed holds nothing any more.
    let keep_from = st
        .repl
        .replicas
        .iter()
        .filter(|r| !r.handle.close_requested())
        .map(|r| end - r.handle.shared_output() as i64)
        .min()
        .unwrap_or(end);
    backlog.trim(keep_from);
}

/// Drops a stream buffer a big command grew: kept, it would count in used_memory for good (a
/// replica relaying a 32 MB value held 64 MB more than its master, unit/pendingquerybuf).
fn release_large(buf: &mut Vec<u8>) {
    if buf.capacity() > 1 << 20 {
        *buf = Vec::new();
    }
}

/// PSYNC's partial resynchronization, if the backlog allows it: `+CONTINUE` and the missing
/// stream, queued on the client's outbox ahead of what follows. Returns false when a full
/// resynchronization is needed (and says why in the log, as Redis does).
pub fn try_partial(st: &mut State, handle: &Arc<ClientHandle>, replid: &[u8], from: i64, psync2: bool) -> bool {
    flush(st);
    let r = &st.repl;
    let ours = replid == r.replid.as_bytes();
    let previous = replid == r.replid2.as_bytes() && from <= r.second_offset;
    if !ours && !previous {
        if replid != b"?" {
            tracing::info!(
                "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{}', my \
                 replication IDs are '{}' and '{}')",
                String::from_utf8_lossy(replid),
                r.replid,
                r.replid2
            );
        } else {
            tracing::info!("Full resync requested by replica");
        }
        return false;
    }
    let Some(data) = r.backlog.as_ref().and_then(|b| b.since(from)) else {
        tracing::info!("Unable to partial resync with replica: lack of backlog (Replica request was: {from}).");
        return false;
    };
    let mut head = if psync2 { format!("+CONTINUE {}\r\n", r.replid).into_bytes() } else { b"+CONTINUE\r\n".to_vec() };
    head.extend_from_slice(&data);
    handle.push_output(head);
    tracing::info!(
        "Partial resynchronization request accepted. Sending {} bytes of backlog starting from offset {from}.",
        data.len()
    );
    true
}

/// Attaches a replica; `online` for a partial resync, else it waits for its snapshot.
pub fn attach(st: &mut State, id: u64, handle: Arc<ClientHandle>, ip: String, port: u16, online: bool) {
    st.repl.replicas.retain(|r| r.id != id);
    if st.repl.replicas.is_empty() {
        // The first PING comes a period after the first replica, not at once.
        st.repl.last_ping_ms = crate::util::clock::unix_ms();
    }
    handle.set_replica(true);
    st.repl.replicas.push(Replica {
        id,
        handle,
        state: if online { ReplicaState::Online } else { ReplicaState::SendBulk },
        ack_offset: 0,
        ack_ms: crate::util::clock::unix_ms(),
        ip,
        port,
        disk_wait: None,
    });
    st.repl.no_replicas_since_ms = 0;
}

/// Before a full sync's fork: what is pending belongs to the snapshot, and the stream selects
/// its database again for the new replica (whose snapshot says nothing of it).
pub fn before_full_sync(st: &mut State) {
    flush(st);
    if st.repl.backlog.is_none() {
        // A backlog created from scratch starts a new history (Redis's syncCommand).
        if st.repl.master.is_none() {
            st.repl.new_history();
        }
        ensure_backlog(st);
    }
    st.repl.sync_full += 1;
}

/// A replica went away.
pub fn detach(st: &mut State, id: u64) {
    st.repl.wait_start.retain(|w| w.id != id);
    let before = st.repl.replicas.len();
    let waited_disk = st.repl.replicas.iter().any(|r| r.id == id && r.disk_wait.is_some());
    st.repl.replicas.retain(|r| r.id != id);
    if before != st.repl.replicas.len() && st.repl.replicas.is_empty() {
        st.repl.no_replicas_since_ms = crate::util::clock::unix_ms();
    }
    // What only it still had to send is let go now.
    trim_backlog(st);
    // The last replica waiting for a disk sync's BGSAVE is gone: without save points nobody
    // needs the dump, so the child stops now and frees its memory, and the next sync may fork
    // at once (as Redis's freeClient).
    if waited_disk
        && st.config.save.is_empty()
        && st.repl.disk_sync_offset.is_some()
        && !st.repl.replicas.iter().any(|r| r.disk_wait.is_some())
    {
        super::snapshot::kill_rdb_child(st);
    }
}

/// REPLCONF ACK from replica `id`: records its offset, puts it online, serves WAITs.
pub fn ack(st: &mut State, id: u64, offset: i64, now_ms: i64) {
    if let Some(r) = st.repl.replicas.iter_mut().find(|r| r.id == id) {
        r.ack_offset = r.ack_offset.max(offset);
        r.ack_ms = now_ms;
        r.state = ReplicaState::Online;
    }
    if !st.repl.waiting.is_empty() {
        serve_waits(st);
    }
}

/// A client disconnected: a replica is detached; the master's link goes down.
pub fn client_gone(st: &mut State, client: &super::clients::Client) {
    if client.handle.is_replica() || !st.repl.wait_start.is_empty() {
        detach(st, client.id);
    }
    if client.master {
        st.repl.master_stream_db = client.db;
        if let Some(m) = st.repl.master.as_mut() {
            if m.client_id == Some(client.id) {
                m.client_id = None;
                m.state = LinkState::Connect;
                m.down_since_ms = crate::util::clock::unix_ms();
                tracing::info!("Connection with master lost.");
            }
        }
    }
}

/// CLIENT KILL closed the master client: the link is down from this moment, as Redis's
/// freeClient of its master (repl_down_since is set then), not from when the link task sees
/// the connection close, which a DEBUG SLEEP in the same transaction delays (a cluster
/// replica's data age, cluster test 06-slave-stop-cond).
pub fn master_client_killed(st: &mut State, id: u64) {
    if let Some(m) = st.repl.master.as_mut() {
        if m.client_id == Some(id) {
            m.client_id = None;
            m.state = LinkState::Connect;
            m.down_since_ms = crate::util::clock::unix_ms();
            tracing::info!("Connection with master lost.");
        }
    }
}

/// Whether a replica follows its master's stream now.
pub fn link_up(st: &State) -> bool {
    st.repl.master.as_ref().is_some_and(|m| m.state == LinkState::Connected)
}

/// How many replicas acknowledged `offset`.
pub fn acked(st: &State, offset: i64) -> i64 {
    st.repl.replicas.iter().filter(|r| r.state == ReplicaState::Online && r.ack_offset >= offset).count() as i64
}

/// A WAIT parks: the replicas are asked for an acknowledgement when the batch ends.
pub fn wait_for(st: &mut State, id: u64, offset: i64, wanted: i64) {
    st.repl.waiting.push((id, offset, wanted));
    st.repl.getack_wanted = true;
}

fn serve_waits(st: &mut State) {
    let waiting = std::mem::take(&mut st.repl.waiting);
    let mut still = Vec::with_capacity(waiting.len());
    for (id, offset, wanted) in waiting {
        let n = acked(st, offset);
        if n >= wanted {
            super::blocking::finish(st, id, Reply::Int(n));
        } else {
            still.push((id, offset, wanted));
        }
    }
    // Clients that blocked meanwhile (none can: this runs between batches) keep their place.
    still.append(&mut st.repl.waiting);
    st.repl.waiting = still;
}

/// A WAIT ended another way (timeout, CLIENT UNBLOCK): its reply, the replicas acknowledged
/// so far; None when `id` was not waiting in WAIT.
pub fn end_wait(st: &mut State, id: u64) -> Option<Reply> {
    if st.repl.waiting.is_empty() {
        return None;
    }
    let at = st.repl.waiting.iter().position(|w| w.0 == id)?;
    let (_, offset, _) = st.repl.waiting.remove(at);
    Some(Reply::Int(acked(st, offset)))
}

/// The number of replicas lagging at most min-replicas-max-lag seconds (min_slaves_good_slaves).
pub fn good_replicas(st: &State, now_ms: i64) -> i64 {
    let max_lag = st.config.min_replicas_max_lag;
    st.repl.replicas.iter().filter(|r| r.state == ReplicaState::Online && (now_ms - r.ack_ms) / 1000 <= max_lag).count()
        as i64
}

/// Once a second or so: PING the replicas every repl-ping-replica-period, drop those silent
/// for repl-timeout, let the backlog go after repl-backlog-ttl without replicas, follow
/// CONFIG SET repl-backlog-size.
pub fn cron(st: &mut State, now_ms: i64) {
    if !st.repl.local_expires.is_empty() {
        expire_local_keys(st, now_ms);
    }
    if st.repl.sync_rdb_on_disk {
        remove_sync_rdb(st);
    }
    if !st.repl.wait_start.is_empty() {
        start_waiting(st, now_ms);
    }
    if st.repl.backlog.is_none() {
        return;
    }
    trim_backlog(st);
    if st.repl.master.is_none() && !st.repl.replicas.is_empty() {
        let period = config_i64(st, "repl-ping-replica-period", 10).max(1) * 1000;
        // A FAILOVER with a timeout waits for the target to reach an offset that a PING would
        // move (Redis skips the PING then, as during a manual cluster failover).
        let failing_over = st.repl.failover.end_ms != 0 && st.paused(now_ms);
        if now_ms - st.repl.last_ping_ms >= period && !failing_over {
            st.repl.last_ping_ms = now_ms;
            feed_dbless(st, &[b"PING"]);
        }
    }
    let timeout = config_i64(st, "repl-timeout", 60).max(1) * 1000;
    let diskless_child = st.snapshot.child.as_ref().is_some_and(|c| c.to_replicas);
    for r in &mut st.repl.replicas {
        if r.state == ReplicaState::SendBulk && r.handle.disk_snapshot_sent.swap(false, Ordering::AcqRel) {
            r.state = ReplicaState::Online;
            r.ack_ms = now_ms;
            tracing::info!("Synchronization with replica {}:{} succeeded", r.ip, r.port);
        }
    }
    for r in &st.repl.replicas {
        if r.state == ReplicaState::Online && now_ms - r.ack_ms > timeout {
            tracing::warn!("Disconnecting timedout replica (streaming sync): {}:{}", r.ip, r.port);
            r.handle.request_close();
        }
        // A replica that stopped taking its diskless snapshot holds every other one back.
        let stuck = r.handle.rdb_stuck_since_ms.load(Ordering::Relaxed);
        if r.state == ReplicaState::SendBulk && diskless_child && stuck != 0 && now_ms - stuck > timeout {
            tracing::warn!("Disconnecting timedout replica (full sync): {}:{}", r.ip, r.port);
            r.handle.request_close();
        }
    }
    let ttl = config_i64(st, "repl-backlog-ttl", 3600);
    if st.repl.master.is_none()
        && st.repl.replicas.is_empty()
        && ttl > 0
        && st.repl.no_replicas_since_ms > 0
        && now_ms - st.repl.no_replicas_since_ms > ttl * 1000
    {
        // As Redis: a new ID, so no replica continues from a history this server forgot.
        st.repl.new_history();
        st.repl.backlog = None;
        st.prop.active = st.aof.status != super::aof::Status::Off;
        tracing::info!("Replication backlog freed after {ttl} seconds without connected replicas.");
    }
    flush(st);
}

/// INFO replication's lines for the attached replicas (`slaveN:`) and the backlog figures.
pub fn info_replicas(st: &State, now_ms: i64) -> Vec<(String, String)> {
    let attached = st.repl.replicas.iter().map(|r| (&r.ip, r.port, r.state.name(), r.ack_offset, r.ack_ms));
    let waiting = st.repl.wait_start.iter().map(|w| (&w.ip, w.port, "wait_bgsave", 0, w.since_ms));
    attached
        .chain(waiting)
        .enumerate()
        .map(|(i, (ip, port, state, offset, ack_ms))| {
            let lag = (now_ms - ack_ms) / 1000;
            (format!("slave{i}"), format!("ip={ip},port={port},state={state},offset={offset},lag={lag}"))
        })
        .collect()
}

/// Memory the replication stream holds (INFO's mem_total_replication_buffers): Redis 7.0
/// keeps one buffer that the backlog and every replica's unsent part share, so it is the
/// larger of the backlog's contents and the longest queue of a replica still to be written.
pub fn buffers_memory(st: &State) -> u64 {
    // The shared chunks, and what each replica's connection took from them and has not
    // written yet (a stopped replica's share grows there).
    let own: u64 = st
        .repl
        .replicas
        .iter()
        .map(|r| r.handle.pending_output().saturating_sub(r.handle.shared_output()) as u64)
        .sum();
    st.repl.backlog.as_ref().map_or(0, |b| b.memory()) + own
}

/// The part of the shared replication buffer beyond repl-backlog-size while replicas are
/// attached: theirs, not the backlog's (Redis's getMemoryOverheadData splits it so).
pub fn buffers_beyond_backlog(st: &State) -> u64 {
    let Some(b) = st.repl.backlog.as_ref() else { return 0 };
    if st.repl.replicas.is_empty() {
        return 0;
    }
    b.memory().saturating_sub(b.size() as u64)
}

/// Replicas attached or waiting for their sync to start (connected_slaves).
pub fn replica_count(st: &State) -> usize {
    st.repl.replicas.len() + st.repl.wait_start.len()
}

/// The link task's view of what to do: None when this server is no replica.
pub fn link_target(st: &State) -> Option<LinkTarget> {
    let m = st.repl.master.as_ref()?;
    let text = |name: &str| st.config.other.get(name).filter(|v| !v.is_empty()).cloned();
    // As Redis: the announced port, else the TLS port when replicating over TLS, else the port.
    let port = |name: &str| text(name).and_then(|p| p.parse::<u16>().ok()).filter(|&p| p != 0);
    let tls_port = port("tls-port").filter(|_| text("tls-replication").is_some_and(|v| v == "yes"));
    let announce_port = port("replica-announce-port").or(tls_port).unwrap_or(st.config.port);
    Some(LinkTarget {
        epoch: st.repl.link.epoch.load(Ordering::Acquire),
        host: m.host.clone(),
        port: m.port,
        replid: if st.repl.psync_fresh { "?".into() } else { st.repl.replid.clone() },
        next_offset: if st.repl.psync_fresh { -1 } else { st.repl.offset + 1 },
        masteruser: text("masteruser"),
        masterauth: text("masterauth"),
        announce_port,
        announce_ip: text("replica-announce-ip"),
        timeout_s: config_i64(st, "repl-timeout", 60).max(1) as u64,
        config: st.config.clone(),
        dataset_empty: st.dbs.iter().all(|d| d.is_empty()),
        failover: st.repl.failover.state == FailoverState::InProgress,
    })
}

/// The link for REPLICAOF `epoch`, if that is still the master wanted.
fn current_link(st: &mut State, epoch: i64) -> Option<&mut MasterLink> {
    if st.repl.link.epoch.load(Ordering::Acquire) != epoch {
        return None;
    }
    st.repl.master.as_mut()
}

/// The link task moved on (connecting, handshake, transfer); false when its REPLICAOF is stale.
pub fn link_state(st: &mut State, epoch: i64, state: LinkState) -> bool {
    if state != LinkState::Transfer {
        st.repl.sync_loading = None;
    }
    match current_link(st, epoch) {
        Some(m) => {
            m.state = state;
            if state == LinkState::Connect && m.down_since_ms == 0 {
                m.down_since_ms = crate::util::clock::unix_ms();
            }
            true
        }
        None => false,
    }
}

/// Disconnects this server's own replicas: their history changed under them.
fn disconnect_replicas(st: &mut State) {
    for r in &st.repl.replicas {
        r.handle.request_close();
    }
}

/// A full sync's snapshot is loaded: it replaces the dataset, and this server continues the
/// master's history `replid` from `offset` (its replicas must sync again). False when its
/// REPLICAOF is stale (the loaded data is dropped).
pub fn full_sync_loaded(
    st: &mut State,
    epoch: i64,
    loaded: crate::rdb::load::Loaded,
    replid: &str,
    offset: i64,
) -> bool {
    if current_link(st, epoch).is_none() {
        return false;
    }
    // Clients watching keys of the old dataset see their EXEC fail; waiters and tracking
    // clients learn that everything changed, as for FLUSHALL.
    let hit: Vec<u64> = st
        .watched
        .iter()
        .filter(|((d, key), _)| st.dbs.get(*d).is_some_and(|db| db.get_ref(key).is_some()))
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    for id in hit {
        if let Some(c) = st.clients.get_mut(&id) {
            c.dirty_cas = true;
        }
    }
    for idx in 0..st.dbs.len() {
        st.signal_db_waiters(idx);
    }
    crate::executor::tracking::on_flush(st);
    let mut dbs = loaded.dbs;
    dbs.resize_with(st.dbs.len(), crate::db::Db::new);
    super::walks::set_aside_all(st);
    let old = std::mem::replace(&mut st.dbs, dbs);
    // Freed off the executor either way: a large old dataset must not stall the clients. With
    // replica-lazy-flush it counts as Redis's asynchronous emptyData does (lazyfreed_objects).
    if st.config.other_flag("replica-lazy-flush", false) {
        let keys = old.iter().map(|db| db.len() as u64).sum();
        crate::db::lazyfree::free_tables(old, keys);
    } else {
        std::thread::spawn(move || drop(old));
    }
    super::evict::apply_access_clock(st);
    st.functions = loaded.functions;
    super::scripting::host::reload_all(st);
    st.dirty += 1;
    disconnect_replicas(st);
    st.repl.replid = replid.to_string();
    st.repl.clear_replid2();
    st.repl.offset = offset;
    st.repl.sync_loading = None;
    st.repl.local_expires.clear();
    st.repl.psync_fresh = false;
    st.repl.master_stream_db = 0;
    st.repl.link.applied.store(offset, Ordering::Relaxed);
    st.repl.backlog = None;
    ensure_backlog(st);
    st.repl.selected_db = None;
    true
}

/// PSYNC continued; `new_id` is the master's ID when it announced one. A changed ID is
/// adopted (the old one kept as replid2) and this server's replicas reconnect to learn it.
pub fn continued(st: &mut State, epoch: i64, new_id: Option<&str>) -> bool {
    if current_link(st, epoch).is_none() {
        return false;
    }
    if let Some(id) = new_id.filter(|id| *id != st.repl.replid) {
        st.repl.shift_replid(id);
        disconnect_replicas(st);
    }
    ensure_backlog(st);
    true
}

/// The link follows the stream as client `id`.
pub fn master_connected(st: &mut State, epoch: i64, id: u64) -> bool {
    let Some(m) = current_link(st, epoch) else { return false };
    m.state = LinkState::Connected;
    m.client_id = Some(id);
    m.down_since_ms = 0;
    st.repl.link.applied.store(st.repl.offset, Ordering::Relaxed);
    let db = st.repl.master_stream_db.min(st.dbs.len().saturating_sub(1));
    if let Some(c) = st.clients.get_mut(&id) {
        c.master = true;
        c.db = db;
        c.authenticated = true;
        c.handle.set_authenticated(true);
    }
    tracing::info!("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization or finished a full one.");
    true
}

/// The replication position a snapshot records (Redis's rdbPopulateSaveInfo): a master with a
/// backlog stands at its own offset in the database its stream selected; a replica at what it
/// applied, in its master's database. None when there is no history to continue.
pub fn rdb_info(st: &State) -> Option<crate::rdb::save::ReplInfo> {
    let stream_db = match &st.repl.master {
        None if st.repl.backlog.is_some() => st.repl.selected_db.unwrap_or(0),
        None => return None,
        Some(m) => match m.client_id.and_then(|id| st.clients.get(&id)) {
            Some(c) => c.db,
            None => st.repl.master_stream_db,
        },
    };
    Some(crate::rdb::save::ReplInfo { stream_db, id: st.repl.replid.clone(), offset: st.repl.offset })
}

/// The dump loaded at startup recorded a replication position: a replica continues that
/// history with its master; a master keeps it as its previous history, so its replicas can
/// continue after its restart. A master also streams a DEL (UNLINK under lazyfree-lazy-expire)
/// for each key it dropped as expired while loading, after that position: its replicas, which
/// kept those keys, delete them too, and a partial resync hands them the DELs. As Redis 7.0's
/// loadDataFromDisk, without a position the backlog is dropped again, the offset moved.
pub fn after_load(st: &mut State, info: Option<crate::rdb::save::ReplInfo>, expired: Vec<(usize, Vec<u8>)>) {
    if st.repl.master.is_some() {
        let Some(info) = info else { return };
        st.repl.replid = info.id;
        st.repl.offset = info.offset;
        st.repl.master_stream_db = info.stream_db;
        st.repl.psync_fresh = false;
        st.repl.link.applied.store(info.offset, Ordering::Relaxed);
        return;
    }
    if let Some(info) = &info {
        st.repl.replid2 = info.id.clone();
        st.repl.second_offset = info.offset + 1;
        st.repl.offset = info.offset;
    }
    if info.is_none() && expired.is_empty() {
        return;
    }
    ensure_backlog(st);
    st.repl.selected_db = None;
    let verb = Bytes::from_static(if st.config.lazyfree_lazy_expire { b"UNLINK" } else { b"DEL" });
    for (db, key) in expired {
        feed(st, db, &[verb.clone(), Bytes::from(key)]);
    }
    flush(st);
    if info.is_some() {
        st.repl.mark_no_replicas_since(crate::util::clock::unix_ms());
    } else {
        st.repl.backlog = None;
        st.repl.selected_db = None;
        st.prop.active = st.aof.status != super::aof::Status::Off;
    }
}

/// Makes this server a replica of `host:port` (Redis's replicationSetMaster): clients blocked
/// on keys are let go with an error, the link task connects, and replicas of this server stay,
/// to continue with the new history if they can. A master offers its own history to the new
/// master (PSYNC with its ID and offset), which may continue it partially.
pub fn set_master(st: &mut State, host: String, port: u16) {
    link_to_master(st, host, port, true);
}

/// The `replicaof` directive at startup: a replica from the start, whose first PSYNC offers
/// the history its dump recorded, if any (`after_load`).
pub fn set_master_from_config(st: &mut State, host: String, port: u16) {
    link_to_master(st, host, port, false);
    st.repl.psync_fresh = true;
}

fn link_to_master(st: &mut State, host: String, port: u16, by_command: bool) {
    let was_master = match st.repl.master.take() {
        Some(old) => {
            drop_master_client(st, &old);
            false
        }
        None => true,
    };
    super::blocking::disconnect_all(
        st,
        "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
    );
    st.config.other.insert("replicaof", format!("{host} {port}"));
    crate::log::set_role('S');
    if was_master && by_command {
        tracing::info!(
            "Before turning into a replica, using my own master parameters to synthesize a cached master: I may be \
             able to synchronize with the new master with just a partial transfer."
        );
    }
    tracing::info!("Connecting to MASTER {host}:{port}");
    st.repl.master = Some(MasterLink { host, port, state: LinkState::Connect, client_id: None, down_since_ms: 0 });
    // The replica class of oom-score-adj-values from now on (Redis's setOOMScoreAdj(-1)).
    if let Err(why) = crate::daemon::apply_oom_score_adj(&st.config, crate::daemon::OomClass::Replica) {
        tracing::warn!("{why}");
    }
    st.repl.link.epoch.fetch_add(1, Ordering::AcqRel);
    st.repl.link.changed.notify_one();
}

/// REPLICAOF NO ONE (Redis's replicationUnsetMaster): the inherited ID becomes the previous
/// one up to here, a new history starts, and replicas reconnect to learn of it (they continue
/// partially). Nothing when this server is a master.
pub fn unset_master(st: &mut State) {
    let Some(old) = st.repl.master.take() else { return };
    drop_master_client(st, &old);
    st.config.other.insert("replicaof", String::new());
    crate::log::set_role('M');
    if let Err(why) = crate::daemon::apply_oom_score_adj(&st.config, crate::daemon::OomClass::Master) {
        tracing::warn!("{why}");
    }
    let new_id = crate::util::clock::random_hex(40);
    st.repl.shift_replid(&new_id);
    tracing::warn!(
        "Setting secondary replication ID to {}, valid up to offset: {}. New replication ID is {}",
        st.repl.replid2,
        st.repl.second_offset,
        st.repl.replid
    );
    disconnect_replicas(st);
    ensure_backlog(st);
    st.repl.selected_db = None;
    st.repl.mark_no_replicas_since(unix_ms());
    st.repl.link.epoch.fetch_add(1, Ordering::AcqRel);
    st.repl.link.changed.notify_one();
}

fn drop_master_client(st: &mut State, old: &MasterLink) {
    if let Some(id) = old.client_id {
        if let Some(c) = st.clients.get(&id) {
            c.handle.request_close();
        }
    }
}

/// The attached replica that announced `host` (compared without case, as Redis does) and
/// listening port `port`.
pub fn find_replica<'a>(st: &'a State, host: &str, port: u16) -> Option<&'a Replica> {
    st.repl.replicas.iter().find(|r| r.ip.eq_ignore_ascii_case(host) && r.port == port)
}

/// FAILOVER's start: writes pause until the target catches up (see `failover_cron`).
pub fn start_failover(st: &mut State, target: Option<(String, u16)>, timeout_ms: i64, force: bool, now_ms: i64) {
    match &target {
        Some((host, port)) => tracing::info!("FAILOVER requested to {host}:{port}."),
        None => tracing::info!("FAILOVER requested to any replica."),
    }
    let f = &mut st.repl.failover;
    f.target = target;
    f.end_ms = if timeout_ms > 0 { now_ms.saturating_add(timeout_ms) } else { 0 };
    f.force = force;
    f.state = FailoverState::WaitForSync;
    st.pause_held |= super::PAUSE_FAILOVER;
}

/// Ends the failover, whatever became of it: writes resume (Redis's clearFailoverState).
fn clear_failover(st: &mut State) {
    st.repl.failover = Failover::default();
    st.pause_held &= !super::PAUSE_FAILOVER;
}

/// Gives the failover up, logging why; a server already turned replica of its target becomes
/// a master again, with a new history its replicas continue (Redis's abortFailover).
pub fn abort_failover(st: &mut State, why: &str) {
    if st.repl.failover.state == FailoverState::None {
        return;
    }
    match &st.repl.failover.target {
        Some((host, port)) => tracing::info!("FAILOVER to {host}:{port} aborted: {why}"),
        None => tracing::info!("FAILOVER to any replica aborted: {why}"),
    }
    if st.repl.failover.state == FailoverState::InProgress {
        unset_master(st);
    }
    clear_failover(st);
}

/// Before each sleep and from the cron (Redis's updateFailoverStatus): while FAILOVER waits,
/// gives up or forces at its timeout, and once the target (or any replica, without TO)
/// acknowledged the whole stream, turns this server into the target's replica; its PSYNC
/// then asks the target to take over.
#[inline]
pub fn failover_cron(st: &mut State) {
    if st.repl.failover.state == FailoverState::WaitForSync {
        failover_progress(st);
    }
}

fn failover_progress(st: &mut State) {
    let now = unix_ms();
    let f = &st.repl.failover;
    if f.end_ms != 0 && f.end_ms <= now {
        if f.force {
            if let Some((host, port)) = f.target.clone() {
                tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                st.repl.failover.state = FailoverState::InProgress;
                set_master(st, host, port);
                return;
            }
        }
        abort_failover(st, "Replica never caught up before timeout");
        return;
    }
    let offset = st.repl.offset;
    let (host, port) = match f.target.clone() {
        Some((host, port)) => {
            if find_replica(st, &host, port).is_none_or(|r| r.ack_offset != offset) {
                return;
            }
            (host, port)
        }
        // Without TO, the first replica found in sync is the target.
        None => match st.repl.replicas.iter().find(|r| r.ack_offset == offset) {
            Some(r) => {
                let target = (r.ip.clone(), r.port);
                st.repl.failover.target = Some(target.clone());
                target
            }
            None => return,
        },
    };
    st.repl.failover.state = FailoverState::InProgress;
    tracing::info!("Failover target {host}:{port} is synced, failing over.");
    set_master(st, host, port);
}

/// The failover target answered `PSYNC ... FAILOVER` (or the link could not send it): it took
/// over (`+CONTINUE` or `+FULLRESYNC`) and the failover is done, or it refused and this server
/// is a master again. False when the link is stale or the failover was refused.
pub fn failover_psync_answered(st: &mut State, epoch: i64, accepted: bool, why: &str) -> bool {
    if current_link(st, epoch).is_none() || st.repl.failover.state != FailoverState::InProgress {
        return current_link(st, epoch).is_some();
    }
    if accepted {
        clear_failover(st);
        true
    } else {
        abort_failover(st, why);
        false
    }
}

/// rdb-del-sync-files: with no persistence (no save points, AOF off) a dump written only to feed
/// replicas is deleted once none is waiting for it or still reading it (Redis's
/// removeRDBUsedToSyncReplicas). A replica deletes the one it loaded (`rdb_del_sync_files`).
fn remove_sync_rdb(st: &mut State) {
    if !rdb_del_sync_files(&st.config) {
        st.repl.sync_rdb_on_disk = false;
        return;
    }
    let in_use = st.snapshot.child.is_some()
        || !st.repl.wait_start.is_empty()
        || st.repl.replicas.iter().any(|r| r.state == ReplicaState::SendBulk);
    if in_use {
        return;
    }
    if std::fs::symlink_metadata(&st.config.dbfilename).is_ok() {
        st.repl.sync_rdb_on_disk = false;
        tracing::info!("Removing the RDB file used to feed replicas in a persistence-less instance");
        let path = st.config.dbfilename.clone();
        // Unlinked off the executor: a big file's blocks take time to free (Redis's bg_unlink).
        std::thread::spawn(move || std::fs::remove_file(path));
    }
}

/// Whether rdb-del-sync-files applies: it is on and nothing else persists the dataset.
pub fn rdb_del_sync_files(config: &crate::config::Config) -> bool {
    config.other_flag("rdb-del-sync-files", false) && config.save.is_empty() && !config.appendonly
}

/// Length of the random EOF marker of the diskless framing (Redis's RDB_EOF_MARK_SIZE).
const EOF_MARK_LEN: usize = 40;

/// A replica whose full sync has not started yet (diskless, within repl-diskless-sync-delay).
#[derive(Debug)]
pub struct Waiting {
    pub id: u64,
    pub handle: Arc<ClientHandle>,
    pub conf: super::clients::ReplConf,
    /// It asked with PSYNC: it gets `+FULLRESYNC <replid> <offset>` first.
    pub psync: bool,
    pub ip: String,
    pub port: u16,
    pub since_ms: i64,
}

/// A replica needs a full sync (Redis's syncCommand): a disk one joins a BGSAVE already
/// running for another replica; one starts at once when no child runs and no diskless delay
/// applies; otherwise it waits for the cron (`start_waiting`).
pub fn request_full_sync(st: &mut State, replica: Waiting) -> Result<(), String> {
    replica.handle.set_replica(true);
    let to_socket = socket_target(st, std::slice::from_ref(&replica));
    if !to_socket
        && st.snapshot.child.as_ref().is_some_and(|c| c.kind == super::snapshot::ChildKind::Rdb && !c.to_replicas)
    {
        if let Some(offset) = st.repl.disk_sync_offset {
            if let Some(other) = st.repl.replicas.iter().find(|r| r.disk_wait.is_some()) {
                tracing::info!("Waiting for end of BGSAVE for SYNC");
                join_disk_sync(st, replica, other.handle.clone(), offset);
                return Ok(());
            }
        }
        tracing::info!("Can't attach the replica to the current BGSAVE. Waiting for next BGSAVE for SYNC");
    }
    let delay = config_i64(st, "repl-diskless-sync-delay", 5);
    if st.snapshot.child.is_some() || (to_socket && delay > 0 && !replica.conf.rdb_only) {
        wait_for_start(st, replica);
        return Ok(());
    }
    start_full_sync(st, vec![replica])
}

/// Attaches a disk replica to the BGSAVE another one (`other`) waits for: it gets the same
/// `+FULLRESYNC` offset and a copy of the stream queued for `other` since the fork (Redis's
/// copyReplicaOutputBuffer), behind the file.
fn join_disk_sync(st: &mut State, w: Waiting, other: Arc<ClientHandle>, offset: i64) {
    flush(st);
    let mut head = Vec::new();
    if w.psync {
        head.extend_from_slice(format!("+FULLRESYNC {} {}\r\n", st.repl.replid, offset).as_bytes());
    }
    let (tx, done) = tokio::sync::oneshot::channel();
    let path = std::path::PathBuf::from(&st.config.dbfilename);
    let source = super::clients::RdbSource::Disk { done, path };
    let rdb_only = w.conf.rdb_only;
    w.handle.start_rdb_transfer(super::clients::RdbTransfer { source, rdb_only, head });
    w.handle.push_slice(&other.outbox_copy());
    if rdb_only {
        st.repl.rdb_only_disk.push(tx);
        return;
    }
    attach(st, w.id, w.handle, w.ip, w.port, false);
    if let Some(r) = st.repl.replicas.last_mut() {
        r.disk_wait = Some(tx);
    }
}

/// Parks a replica until its delayed full sync starts (`cron`).
pub fn wait_for_start(st: &mut State, replica: Waiting) {
    // A replica from its SYNC on, as Redis flags it: its commands may not touch the keyspace
    // nor reply.
    replica.handle.set_replica(true);
    st.repl.wait_start.push(replica);
    st.repl.no_replicas_since_ms = 0;
}

/// Starts the full sync the waiting replicas need (Redis's replicationStartPendingFork): none
/// while a child runs; then at once for a disk target, and for a diskless one once the
/// longest-waiting replica waited repl-diskless-sync-delay, or as soon as
/// repl-diskless-sync-max-replicas are waiting. Every waiting replica of the same kind shares
/// the one snapshot. Meanwhile they get a newline a second, which keeps their link alive (as
/// Redis's replicationCron).
fn start_waiting(st: &mut State, now_ms: i64) {
    st.repl.wait_start.retain(|w| !w.handle.close_requested());
    let Some(first) = st.repl.wait_start.iter().map(|w| w.since_ms).min() else { return };
    let delay = config_i64(st, "repl-diskless-sync-delay", 5) * 1000;
    let max = config_i64(st, "repl-diskless-sync-max-replicas", 0);
    let diskless = st.config.other.get("repl-diskless-sync").is_none_or(|v| v == "yes");
    let full = max > 0 && st.repl.wait_start.len() as i64 >= max;
    if st.snapshot.child.is_some() || (diskless && now_ms - first < delay && !full) {
        if now_ms / 1000 != st.repl.last_newline_s {
            st.repl.last_newline_s = now_ms / 1000;
            for w in &st.repl.wait_start {
                w.handle.push_slice(b"\n");
            }
        }
        return;
    }
    // One snapshot serves replicas asking for the same content (keys, or functions only).
    let functions_only = st.repl.wait_start[0].conf.functions_only;
    let (group, rest): (Vec<Waiting>, Vec<Waiting>) =
        std::mem::take(&mut st.repl.wait_start).into_iter().partition(|w| w.conf.functions_only == functions_only);
    st.repl.wait_start = rest;
    let handles: Vec<_> = group.iter().map(|w| w.handle.clone()).collect();
    if let Err(e) = start_full_sync(st, group) {
        tracing::warn!("BGSAVE for replication failed: {e}");
        for h in handles {
            h.request_close();
        }
    }
}

/// Whether a full sync for these replicas goes to their sockets (Redis's socket target: every
/// one reads the `$EOF:` framing, and diskless sync is on or one wants the snapshot only).
fn socket_target(st: &State, group: &[Waiting]) -> bool {
    let diskless = st.config.other.get("repl-diskless-sync").is_none_or(|v| v == "yes");
    group.iter().all(|w| w.conf.capa_eof) && (diskless || group.iter().any(|w| w.conf.rdb_only))
}

/// Starts one snapshot child for `group` and attaches them: the stream from this moment on
/// queues on their outboxes, behind the snapshot their connections send first. Diskless, the
/// child writes into one pipe that the server relays to every replica; on disk it is a BGSAVE
/// whose file each replica gets once the child ends (`sync_child_done`).
pub fn start_full_sync(st: &mut State, group: Vec<Waiting>) -> Result<(), String> {
    if group.is_empty() {
        return Ok(());
    }
    flush(st);
    st.repl.selected_db = None;
    let to_socket = socket_target(st, &group);
    tracing::info!("Starting BGSAVE for SYNC with target: {}", if to_socket { "replicas sockets" } else { "disk" });
    let head = |st: &State, w: &Waiting| {
        let mut head = Vec::new();
        if w.psync {
            head.extend_from_slice(format!("+FULLRESYNC {} {}\r\n", st.repl.replid, st.repl.offset).as_bytes());
        }
        head
    };
    if to_socket {
        let mark = crate::util::clock::random_hex(EOF_MARK_LEN).into_bytes();
        let (pipe, pid) = fork_snapshot(st, group[0].conf.functions_only, mark.clone())?;
        tracing::info!("Background RDB transfer started by pid {pid}");
        let mut senders = Vec::with_capacity(group.len());
        let mut transfers = Vec::with_capacity(group.len());
        for w in &group {
            let (tx, rx) = tokio::sync::mpsc::channel(super::clients::RELAY_DEPTH);
            senders.push(tx);
            let mut h = head(st, w);
            h.extend_from_slice(b"$EOF:");
            h.extend_from_slice(&mark);
            h.extend_from_slice(b"\r\n");
            transfers.push((rx, h));
        }
        let mut relay = Some(super::clients::RdbRelay { pipe, pid, replicas: senders });
        for (w, (chunks, head)) in group.into_iter().zip(transfers) {
            let source = super::clients::RdbSource::Relay { chunks, relay: relay.take() };
            let rdb_only = w.conf.rdb_only;
            w.handle.rdb_stuck_since_ms.store(0, Ordering::Relaxed);
            w.handle.start_rdb_transfer(super::clients::RdbTransfer { source, rdb_only, head });
            if !rdb_only {
                attach(st, w.id, w.handle, w.ip, w.port, false);
            }
        }
        return Ok(());
    }
    super::snapshot::bgsave_start(st).map_err(|e| format!("{e:?}"))?;
    st.repl.disk_sync_offset = Some(st.repl.offset);
    st.repl.sync_rdb_on_disk = true;
    let path = std::path::PathBuf::from(&st.config.dbfilename);
    for w in group {
        let (tx, done) = tokio::sync::oneshot::channel();
        let source = super::clients::RdbSource::Disk { done, path: path.clone() };
        let rdb_only = w.conf.rdb_only;
        let h = head(st, &w);
        w.handle.start_rdb_transfer(super::clients::RdbTransfer { source, rdb_only, head: h });
        if rdb_only {
            st.repl.rdb_only_disk.push(tx);
        } else {
            attach(st, w.id, w.handle, w.ip, w.port, false);
            if let Some(r) = st.repl.replicas.last_mut() {
                r.disk_wait = Some(tx);
            }
        }
    }
    Ok(())
}

/// The sync's snapshot child ended (or was killed): a disk sync's replicas get the file, or
/// are dropped when it failed; a diskless sync's replicas, already fed from the pipe, wait for
/// their first ACK, or are dropped when it failed (Redis's updateSlavesWaitingBgsave).
pub fn sync_child_done(st: &mut State, ok: bool, to_replicas: bool) {
    st.repl.disk_sync_offset = None;
    for tx in std::mem::take(&mut st.repl.rdb_only_disk) {
        let _ = tx.send(ok);
    }
    for r in &mut st.repl.replicas {
        if r.state != ReplicaState::SendBulk {
            continue;
        }
        let waited = match r.disk_wait.take() {
            Some(tx) => {
                let _ = tx.send(ok);
                true
            }
            None => to_replicas,
        };
        if !waited {
            continue;
        }
        if !ok {
            tracing::warn!("SYNC failed. BGSAVE child returned an error");
            r.handle.request_close();
        } else if to_replicas {
            tracing::info!(
                "Streamed RDB transfer with replica {}:{} succeeded (socket). Waiting for REPLCONF ACK from replica \
                 to enable streaming",
                r.ip,
                r.port
            );
        }
    }
}

/// Forks a child that writes the snapshot and then `mark` into a pipe and exits; returns the
/// read end and the child's pid. It is the server's RDB child (INFO rdb_bgsave_in_progress).
fn fork_snapshot(st: &mut State, functions_only: bool, mark: Vec<u8>) -> Result<(OwnedFd, i32), String> {
    let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    let repl = rdb_info(st);
    let info = Aux { ctime: unix_ms() / 1000, used_mem: st.sample_memory().1, aof_base: false, repl };
    // The same options as BGSAVE (rdb-key-save-delay included, which tests use to slow it).
    let opts = super::snapshot::options(st, save::required_version(&st.dbs));
    // The child closes its copy of the read end: once the parent is gone nobody reads, and
    // its next write fails, so it exits rather than outlive a killed master.
    let rd_raw = std::os::fd::AsRawFd::as_raw_fd(&rd);
    let work = move |st: &State| {
        // SAFETY: the child's own copy of the pipe's read end, used by nothing in the child.
        unsafe { libc::close(rd_raw) };
        let dbs: &[crate::db::Db] = if functions_only { &[] } else { &st.dbs };
        let out = std::fs::File::from(wr);
        // The writer flushes its buffer before handing the file back; the mark closes the
        // framing only when the whole snapshot went out.
        match save::write_snapshot(out, dbs, &st.functions, &info, &opts) {
            Ok((mut out, _)) => std::io::Write::write_all(&mut out, &mark).is_ok(),
            Err(_) => false,
        }
    };
    let pid = super::snapshot::fork_child_titled(st, super::snapshot::ChildKind::Rdb, "redis-rdb-to-slaves", work)?;
    super::snapshot::mark_to_replicas(st);
    Ok((rd, pid))
}

/// A write by a client other than the master on a (writable) replica: its keys with a TTL are
/// remembered, to be expired here.
pub fn note_local_write(st: &mut State, db: usize, positions: Vec<usize>, argv: &[Bytes]) {
    for key in positions.into_iter().filter_map(|i| argv.get(i)) {
        // A time of 0 sees every TTL, past or not, and expires nothing.
        if st.dbs[db].expire_at(key, 0).is_some() {
            st.repl.local_expires.insert((db, key.to_vec()));
        }
    }
}

/// How many key names this writable replica expires itself (INFO slave_expires_tracked_keys):
/// Redis counts a name once whatever number of databases hold it.
pub fn local_expire_count(st: &State) -> usize {
    let names: std::collections::HashSet<&[u8]> = st.repl.local_expires.iter().map(|(_, k)| k.as_slice()).collect();
    names.len()
}

/// Every database was emptied (FLUSHALL): nothing is left to expire locally.
pub fn forget_local_expires(st: &mut State) {
    st.repl.local_expires.clear();
}

/// Deletes the replica-written keys whose TTL has passed (Redis's expireSlaveKeys); forgets
/// those that lost their TTL or went away.
fn expire_local_keys(st: &mut State, now_ms: i64) {
    let keys: Vec<(usize, Vec<u8>)> = st.repl.local_expires.iter().cloned().collect();
    for (idx, key) in keys {
        let Some(db) = st.dbs.get_mut(idx) else { continue };
        let (keep, view) = (std::mem::take(&mut db.keep_expired), std::mem::take(&mut db.master_view));
        match db.expire_at(&key, 0) {
            Some(at) if at <= now_ms => {
                db.remove(&key, now_ms);
                st.repl.local_expires.remove(&(idx, key));
            }
            Some(_) => {}
            None => {
                st.repl.local_expires.remove(&(idx, key));
            }
        }
        let db = &mut st.dbs[idx];
        (db.keep_expired, db.master_view) = (keep, view);
    }
}

/// A full sync's loading phase begins or ends (see `ReplState::sync_loading`).
pub fn set_sync_loading(st: &mut State, epoch: i64, loading: Option<bool>) -> bool {
    if current_link(st, epoch).is_none() {
        return false;
    }
    st.repl.sync_loading = loading;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backlog_keeps_its_size_and_what_replicas_still_hold() {
        // Blocks of 5 bytes, so that each 5-byte write below fills one.
        let mut b = Backlog::with_blocks(8, 1, 5);
        b.append(b"abcde", None);
        assert_eq!(b.since(1).as_deref(), Some(&b"abcde"[..]));
        assert_eq!(b.since(6).as_deref(), Some(&b""[..]));
        assert_eq!(b.since(7), None);
        b.append(b"fghij", None);
        // 10 bytes held: dropping "abcde" would leave 5, under the size.
        b.trim(i64::MAX);
        assert_eq!((b.first_offset, b.histlen()), (1, 10));
        assert_eq!(b.since(3).as_deref(), Some(&b"cdefghij"[..]));
        let mut parts = Vec::new();
        b.append(b"0123456789", Some(&mut |p: Bytes| parts.push(p)));
        assert_eq!(parts, [&b"01234"[..], &b"56789"[..]], "one view per block it spans");
        assert_eq!(b.memory(), 4 * crate::alloc::usable_size(5));
        // A replica still has to send from offset 4: "abcde" stays.
        b.trim(4);
        assert_eq!((b.first_offset, b.histlen()), (1, 20));
        assert_eq!(b.since(4).as_deref(), Some(&b"defghij0123456789"[..]));
        // Nobody holds it: the front goes while more than the size stays.
        b.trim(i64::MAX);
        assert_eq!((b.first_offset, b.histlen()), (11, 10));
        assert_eq!(b.memory(), 2 * crate::alloc::usable_size(5));
        assert_eq!(b.since(10), None);
        assert_eq!(b.since(11).as_deref(), Some(&b"0123456789"[..]));
        b.resize(4);
        b.append(b"xy", None);
        b.trim(i64::MAX);
        assert_eq!(b.since(16).as_deref(), Some(&b"56789xy"[..]), "the block being written stays whole");
        assert_eq!(&parts[0][..], b"01234", "a view outlives its block's trim");
    }

    #[test]
    fn tiny_writes_share_blocks() {
        let mut b = Backlog::new(1 << 20, 1);
        for _ in 0..100_000 {
            b.append(b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$1\r\nv\r\n", None);
            b.trim(i64::MAX);
        }
        assert!(b.histlen() >= 1 << 20);
        let blocks = b.memory() / crate::alloc::usable_size(BACKLOG_BLOCK);
        assert_eq!(blocks as usize, b.histlen().div_ceil(BACKLOG_BLOCK));
        assert!(b.memory() <= (1 << 20) + 2 * BACKLOG_BLOCK as u64, "{}", b.memory());
    }
}
