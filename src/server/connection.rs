//! One client connection: read → parse every complete command → look each up in the table →
//! one batch to the executor → one write of all the replies. Protocol errors are answered after
//! the commands before them, then the connection closes.
//!
//! Writes give way to a close request: a peer that stopped reading must not pin the task (or
//! its buffers) once the executor decides to drop it, e.g. for its output buffer limit. While a
//! buffer is being written, its unwritten remainder is reported to the handle, which counts it
//! with the outbox against client-output-buffer-limit.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{ExecHandle, Shared};
use crate::commands;
use crate::config::live;
use crate::executor::clients::{ClientHandle, ConnInfo, RdbTransfer, SocketLease};
use crate::executor::{BatchEnd, Cmd};
use crate::resp::reply::{Cursor, Deferred, Piece, PIECE_BYTES};
use crate::resp::Parser;
use crate::stats::StatName;

const READ_CHUNK: usize = 16 * 1024;

/// Whether a stream holds output it accepted but the socket has not taken: a TLS session's
/// encrypted records. Counted as the client's output while it does (see `Backlog::tls_hold`).
pub trait Unsent {
    fn holds_unsent(&self) -> bool {
        false
    }
}

impl Unsent for tokio::net::TcpStream {}
impl Unsent for tokio::net::UnixStream {}

/// Serves one connection until it closes; `registered` is the client id and handle when the
/// accept loop registered it already (`ExecHandle::connect_now`).
pub async fn serve<S>(mut stream: S, info: ConnInfo, registered: Option<(u64, Arc<ClientHandle>)>, shared: &Shared)
where
    S: AsyncRead + AsyncWrite + Unpin + Unsent,
{
    // A TLS session keeps up to `tls::SEND_BUFFER_LIMIT` of encrypted output the socket has not
    // taken (allocated as it fills, unlike OpenSSL's buffer, which Redis allocates once per
    // connection). It is full whenever replies wait in the backlog, so it counts with them as
    // the client's output: uncounted, it made maxmemory evict keys for stalled TLS clients.
    let tls_hold = if info.tls { crate::alloc::usable_size(super::tls::SEND_BUFFER_LIMIT + 256) as usize } else { 0 };
    let fd = info.fd;
    let (id, handle) = match registered {
        Some(r) => r,
        None => {
            let handle = Arc::new(ClientHandle::default());
            let Some(id) = shared.exec.connect(info, handle.clone()).await else {
                return;
            };
            (id, handle)
        }
    };
    // Dropped before `stream` (a parameter outlives the body's bindings).
    let _lease = SocketLease::new(&handle, fd);
    // The keyspace stores key lengths in 32 bits: a bulk over 4 GiB is refused as an invalid
    // bulk length even when proto-max-bulk-len is set higher.
    let max_bulk = live::get_u64(&live::PROTO_MAX_BULK_LEN).min(u32::MAX as u64);
    let mut parser = Parser::new(max_bulk as i64);
    parser.unauthenticated = !handle.authenticated();
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    // Pushed output (pub/sub messages, served blocking commands), swapped with the outbox.
    let mut pushed: Vec<u8> = Vec::new();
    // Replies the peer has not taken yet.
    let mut backlog = Backlog { tls_hold, ..Backlog::default() };

    // Parsed commands, reused batch after batch.
    let mut cmds: Vec<Cmd> = Vec::new();
    // The last command looked up, tried first for the next one.
    let mut last_spec = None;
    let mut reparse = false;
    // The client cron trimmed the query buffer: no room is made again until data arrives (an
    // idle client holds no buffer, as in Redis).
    let mut trimmed = false;
    'conn: loop {
        if !std::mem::take(&mut reparse) {
            // Replies held back for the rest of a read (an unauthenticated client's) go now.
            if !out.is_empty() && !send_replies(&mut stream, &handle, &mut out, &mut backlog).await {
                break 'conn;
            }
            if let Some((read, size)) = parser.big_bulk() {
                // A big argument is read into its own allocation, made for all of it at once
                // (as Redis makes room in its query buffer), which CLIENT LIST's qbuf counts as
                // Redis's query buffer then holds just the argument.
                handle.report_qbuf(read, size, size);
            } else {
                // Make room for the next read, or for the rest of an argument in one go (what is
                // still missing of it: reserving its whole length again, as its bytes arrive,
                // doubled the buffer, and the client looked twice its size to maxmemory).
                let want = match parser.pending_bulk_end() {
                    Some(end) if end > rbuf.len() => end - rbuf.len(),
                    _ => READ_CHUNK,
                };
                if !trimmed && rbuf.capacity() - rbuf.len() < want.min(READ_CHUNK) {
                    rbuf.reserve(want.clamp(READ_CHUNK, READ_CHUNK * 64));
                }
                handle.report_qbuf(rbuf.len(), rbuf.capacity(), rbuf.len() + want);
            }
            handle.report_out_held(out.capacity() + pushed.capacity());
            let n = tokio::select! {
                biased;
                _ = handle.notify.wait() => {
                    // A full sync the cron started (after repl-diskless-sync-delay).
                    if let Some(t) = handle.take_rdb_transfer() {
                        if !send_snapshot(&mut stream, &mut rbuf, &handle, t).await {
                            break 'conn;
                        }
                        // What the replica sent during the transfer is parsed now.
                        reparse = !rbuf.is_empty();
                        continue 'conn;
                    }
                    if let Some(to) = handle.take_qbuf_trim() {
                        let to = to.max(rbuf.len());
                        if rbuf.capacity() > to {
                            let mut smaller = BytesMut::with_capacity(to);
                            smaller.extend_from_slice(&rbuf);
                            rbuf = smaller;
                            trimmed = true;
                        }
                    }
                    handle.take_output_into(&mut pushed);
                    handle.report_out_held(out.capacity() + pushed.capacity());
                    handle.note_reply(pushed.len());
                    if !send(&mut stream, &handle, &mut pushed, &mut backlog).await {
                        break 'conn;
                    }
                    release_large(&mut pushed);
                    if handle.close_requested() {
                        break 'conn;
                    }
                    continue 'conn;
                }
                r = poll_fn(|cx| {
                    let into = match parser.big_bulk_room() {
                        Some(big) => big,
                        None => &mut rbuf,
                    };
                    read_or_flush(&mut stream, cx, into, &mut backlog, &handle)
                }) => match r {
                    Ok(0) => {
                        handle.set_peer_closed();
                        break 'conn;
                    }
                    Err(e) => {
                        tracing::debug!("Reading from client: {}", crate::util::os_error_text(&e));
                        break 'conn;
                    }
                    Ok(n) => {
                        trimmed = false;
                        n
                    }
                },
            };
            crate::stats::add(&crate::stats::NET_INPUT_BYTES, n as u64);
            let qbuf = rbuf.len() + parser.big_bulk().map_or(0, |(read, _)| read);
            if qbuf as u64 > live::get_u64(&live::CLIENT_QUERY_BUFFER_LIMIT) {
                tracing::warn!("Closing client that reached max query buffer length (qbuf={qbuf})");
                break;
            }
            if parser.big_bulk().is_none() {
                // What the batch's commands see of their own query buffer (CLIENT INFO's qbuf):
                // all that was read, as in Redis until the batch has run.
                handle.report_qbuf(rbuf.len(), rbuf.capacity(), 0);
            }
        }
        cmds.clear();
        let parsed = parser.parse_into(&mut rbuf, |argv| {
            cmds.push(Cmd { spec: commands::lookup_cached(&argv[0], &mut last_spec), argv })
        });
        reparse = parsed.stopped_early;
        // After a big argument, Redis gives the client a fresh query buffer of its size when
        // nothing followed it ("another one is likely"), which the client cron trims later; so
        // do we, for the same qbuf figures and trimming.
        if let Some(len) = parser.take_big_done() {
            if rbuf.is_empty() && !parser.in_command() {
                rbuf.reserve(len + 2);
            }
        }
        handle.set_unparsed(!rbuf.is_empty());
        if !cmds.is_empty() {
            if cmds.len() > 1 && matches!(shared.exec, ExecHandle::Local(_)) {
                super::turns::wait().await;
            }
            let woken_before = crate::executor::clients::wakeups();
            let end = shared.exec.batch(id, &mut cmds, &mut out).await;
            let deferred = handle.take_deferred();
            if !deferred.is_empty() {
                // Replies the executor pushed earlier (a served blocking command) go first, as
                // below for a batch without deferred replies.
                handle.take_output_into(&mut pushed);
                handle.note_reply(pushed.len() + out.len().max(PIECE_BYTES));
                if !send(&mut stream, &handle, &mut pushed, &mut backlog).await {
                    break;
                }
                release_large(&mut pushed);
                let before = rbuf.len();
                let io = Io { stream: &mut stream, handle: &handle, backlog: &mut backlog, rbuf: &mut rbuf };
                if !send_with_deferred(io, &mut out, deferred, shared).await {
                    break;
                }
                // Requests read while the replies went out are parsed next, without waiting
                // for more input.
                reparse |= rbuf.len() != before;
            }
            parser.unauthenticated = !handle.authenticated();
            // SYNC/PSYNC: the reply (`+FULLRESYNC ...`), then the snapshot; the stream queued on
            // the outbox meanwhile goes after it. An rdb-only reader is closed once it has it.
            if let Some(t) = handle.take_rdb_transfer() {
                if !backlog.drain(&mut stream, &handle).await || !write_out(&mut stream, &handle, &out).await {
                    break;
                }
                out.clear();
                if !send_snapshot(&mut stream, &mut rbuf, &handle, t).await {
                    break;
                }
                reparse = !rbuf.is_empty();
                continue;
            }
            // Replies the executor pushed earlier (a served blocking command) go first.
            handle.take_output_into(&mut pushed);
            handle.report_out_held(out.capacity() + pushed.capacity());
            handle.note_reply(pushed.len() + out.len());
            if !send(&mut stream, &handle, &mut pushed, &mut backlog).await {
                break;
            }
            release_large(&mut pushed);
            // An unauthenticated client's commands run one batch each (the parser stops after
            // each, for AUTH to count), but Redis writes the replies to one read together, once
            // all its commands ran: they wait for the next batch, so that the reply limit of an
            // unauthenticated client (ClientHandle::admit_unauthenticated) sees them all. Held
            // replies go out before the next read, or before a protocol error's reply.
            let hold = reparse && !handle.authenticated() && end == BatchEnd::Continue;
            if !out.is_empty() && !hold {
                handle.report_out_held(out.capacity() + pushed.capacity());
                // Written at once, not after a yield to the other connections (Redis's
                // beforeSleep order): tokio's yield polls the driver again, one more epoll_wait
                // per request at -P 1, which cost 3-5% of the server's CPU per request.
                if !send_replies(&mut stream, &handle, &mut out, &mut backlog).await {
                    break;
                }
            }
            match end {
                BatchEnd::Continue => {
                    // A batch that queued output for others (PUBLISH) lets those connections
                    // write before this one reads more, as Redis's event loop does: outboxes
                    // stay small and in cache instead of growing over many batches.
                    if crate::executor::clients::wakeups() != woken_before {
                        tokio::task::yield_now().await;
                    }
                }
                BatchEnd::Close => {
                    let _ = backlog.drain(&mut stream, &handle).await;
                    break;
                }
                BatchEnd::Shutdown => {
                    shared.shutdown.notify_one();
                    break;
                }
            }
        }
        if let Some(err) = parsed.error {
            if !send_replies(&mut stream, &handle, &mut out, &mut backlog).await
                || !backlog.drain(&mut stream, &handle).await
            {
                break;
            }
            // Written as replies are: a peer that does not read cannot keep the task once killed.
            let line = format!("-{}\r\n", err.reply_text());
            let _ = write_out(&mut stream, &handle, line.as_bytes()).await;
            break;
        }
        // A big reply's buffer is not kept once written: Redis frees its reply blocks past the
        // static buffer as they go out, and a connection holding 100 KiB after one MGET of a
        // big value counted against maxmemory, so keys were evicted before maxmemory-clients
        // could evict the clients (unit/maxmemory's MGET client-eviction test).
        if out.is_empty() && out.capacity() > 4 * REPLY_CHUNK {
            out = Vec::with_capacity(READ_CHUNK);
        }
    }
    // What the connection holds is freed before the socket is closed, and the close does not
    // wait on the peer: Redis frees a client's buffers at once and ends a TLS session with one
    // non-blocking SSL_shutdown. A TLS shutdown waits to send its close_notify, so a peer that
    // stopped reading (a replica stopped with SIGSTOP) kept this task, and the output it never
    // took, for as long as it slept. A TCP shutdown never waits.
    drop((backlog, pushed, out, rbuf, cmds));
    handle.set_in_flight(0);
    handle.set_unsent(0);
    handle.set_written_held(0);
    handle.report_out_held(0);
    // A socket handed to a forked debugging session stays open for the child.
    if !handle.detached() {
        let _ = poll_fn(|cx| Poll::Ready(Pin::new(&mut stream).poll_shutdown(cx))).await;
    }
    shared.exec.disconnect(id);
}

/// The threads that encode deferred reply pieces: one per core (at least two). More would not
/// finish sooner; pieces past them queue, and neither the executor nor the other connections
/// wait for them. A piece is a bounded amount of work and no encoding waits for its client
/// between pieces, so a client that stopped reading holds no thread. (Tokio's blocking pool,
/// with a permit per piece, grew new threads: a thread finishing a piece was not yet idle when
/// the next piece came.)
fn encoders() -> &'static std::sync::Mutex<std::sync::mpsc::Sender<EncodeJob>> {
    static POOL: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<EncodeJob>>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<EncodeJob>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        for i in 0..cores.max(2) {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new().name(format!("encode-{i}")).spawn(move || loop {
                let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                match job {
                    // A panicking encoder drops its result's sender: that connection closes.
                    Ok(job) => drop(crate::log::caught(job)),
                    Err(_) => return,
                }
            });
            if let Err(e) = spawned {
                tracing::warn!("could not start an encoding thread: {e}");
            }
        }
        std::sync::Mutex::new(tx)
    })
}

type EncodeJob = Box<dyn FnOnce() + Send>;

/// A piece's allocation: a piece closes at the first element past `PIECE_BYTES`, so it
/// overshoots by one element (usually a few bytes).
const PIECE_CAPACITY: usize = PIECE_BYTES + PIECE_BYTES / 8;

/// What a connection writes with while it streams a reply.
struct Io<'a, S> {
    stream: &'a mut S,
    handle: &'a ClientHandle,
    backlog: &'a mut Backlog,
    rbuf: &'a mut BytesMut,
}

/// A deferred reply whose last reference is dropped on the freeing thread (`util::bgfree`), not
/// here. The snapshot behind it can own what writers copied away from under it while it was
/// sent (a zset's member chunks, one allocation per member): freeing 2M members after a ZRANGE
/// took the executor 21 ms (perf, `Arc::drop_slow` under the connection's task).
struct FreedElsewhere(Option<Deferred>);

impl std::ops::Deref for FreedElsewhere {
    type Target = Deferred;
    fn deref(&self) -> &Deferred {
        self.0.as_ref().expect("taken only by drop")
    }
}

impl Drop for FreedElsewhere {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            crate::util::bgfree::drop_elsewhere(d);
        }
    }
}

/// A deferred reply's next piece, from `cursor`, encoded by the encoding threads.
fn spawn_piece(d: Deferred, proto: u8, mut cursor: Cursor) -> tokio::sync::oneshot::Receiver<(Vec<u8>, Cursor, Piece)> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = move || {
        let hint = d.0.size_hint();
        let mut buf = Vec::with_capacity(if d.0.streams() { PIECE_CAPACITY.min(hint) } else { hint });
        let step = d.0.encode_piece(proto, &mut cursor, &mut buf);
        let _ = tx.send((buf, cursor, step));
    };
    // Sending fails only if every encoding thread is gone; the reply then never comes and
    // the connection closes (the dropped job drops `tx`).
    let _ = encoders().lock().unwrap_or_else(|p| p.into_inner()).send(Box::new(job));
    rx
}

/// The bytes a deferred reply encodes to for protocol `proto`, counted by the encoding threads
/// piece by piece into one reused buffer; the count stops once it passes `cap`. 0 when the
/// encoding threads are gone (the reply then never comes and the connection closes anyway).
async fn size_of_reply(d: Deferred, proto: u8, cap: usize) -> usize {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = move || {
        let (mut cursor, mut buf, mut total) = (Cursor::default(), Vec::new(), 0);
        loop {
            buf.clear();
            let step = d.0.encode_piece(proto, &mut cursor, &mut buf);
            total += buf.len();
            if step != Piece::More || total > cap {
                break;
            }
        }
        let _ = tx.send(total);
    };
    let _ = encoders().lock().unwrap_or_else(|p| p.into_inner()).send(Box::new(job));
    rx.await.unwrap_or(0)
}

/// Writes the batch's output `out` (emptied) with its big replies spliced in where they go.
/// The executor only took their snapshots (`Reply::Deferred`); each is encoded here on the
/// blocking pool, so neither the executor nor the other connections of this runtime wait while
/// millions of elements are encoded, and piece by piece (`Encode::encode_piece`): the next
/// piece is encoded while the one before goes out, and sent once the socket took that one, so
/// a big reply holds about two pieces of memory rather than its whole encoding, however slowly
/// its client reads. Requests arriving meanwhile are read, not run: a client that writes a
/// long pipeline before it reads a reply must not block on its own writes while we wait for it
/// to read. False when the connection must close.
async fn send_with_deferred<S>(
    io: Io<'_, S>,
    out: &mut Vec<u8>,
    deferred: Vec<(usize, u8, Deferred, StatName)>,
    shared: &Shared,
) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin + Unsent,
{
    let Io { stream, handle, backlog, rbuf } = io;
    let deferred: Vec<_> =
        deferred.into_iter().map(|(at, proto, d, stat)| (at, proto, FreedElsewhere(Some(d)), stat)).collect();
    // A client with an output limit: the batch's whole output is sized before any of it goes
    // out. Redis builds every reply of a batch before it writes any, and a client flagged over
    // its limit while they are built is closed without a byte of them written (checked with
    // 7.0.15: SINTER of two big sets under `normal 1mb 0 0` sends nothing). Streamed, the
    // pieces before the one crossing the limit would have gone out. The sizing encodes each
    // reply once more, only for clients with a limit, into one reused piece buffer.
    handle.deferred_encoded();
    if let Some(limit) = handle.obuf_limit() {
        let mut total = out.len();
        for (_, proto, d, _) in &deferred {
            total += size_of_reply(Deferred::clone(d), *proto, limit.saturating_sub(total)).await;
            if total >= limit {
                break;
            }
        }
        if !handle.admit_reply(total) {
            return false;
        }
    }
    // From here the replies count by the bytes held, not by their least sizes.
    let mut rest = std::mem::take(out);
    let mut sent = 0;
    for (at, proto, d, stat) in deferred {
        let at = at.clamp(sent, sent + rest.len());
        let tail = rest.split_off(at - sent);
        let mut head = std::mem::replace(&mut rest, tail);
        sent = at;
        if !head.is_empty() && (!handle.admit_reply(head.len()) || !send(stream, handle, &mut head, backlog).await) {
            return false;
        }
        // A reply the executor is still producing (KEYS over a big table) is waited for here,
        // reading requests meanwhile (not running them) and noticing a peer that goes away.
        if !poll_fn(|cx| poll_ready(&d, stream, cx, rbuf, backlog, handle)).await {
            return false;
        }
        // The piece in the making is the client's output too.
        handle.report_out_held(rest.capacity() + PIECE_CAPACITY);
        // Redis builds a whole reply before it writes any of it, so its output limit applies
        // to everything the reply has produced, with what was pending when it started.
        let base = handle.pending_output();
        let mut produced = 0;
        let mut next = Some(spawn_piece(Deferred::clone(&d), proto, Cursor::default()));
        while let Some(job) = next.take() {
            let Ok((mut piece, cursor, step)) = job.await else {
                return false;
            };
            match step {
                Piece::More => next = Some(spawn_piece(Deferred::clone(&d), proto, cursor)),
                // Counted before the reply goes out, so whoever sees it (and then asks INFO,
                // on any connection) finds it counted, as Redis counts it in the call. An
                // error is a whole reply (see `Encode::encode_piece`).
                Piece::Done(Some(line)) => {
                    shared.exec.run(move |e| crate::executor::call::count_failed(&mut e.state, stat, line)).await;
                }
                Piece::Done(None) => {}
            }
            produced += piece.len();
            if !handle.admit_total(base + produced) || !send(stream, handle, &mut piece, backlog).await {
                return false;
            }
            // A whole-reply piece (DUMP) can be tens of MB: freed here, it purged pages here.
            let bytes = piece.capacity();
            crate::util::bgfree::drop_sized(piece, bytes);
            if next.is_some() && !poll_fn(|cx| poll_room(stream, cx, rbuf, backlog, handle)).await {
                return false;
            }
        }
    }
    handle.report_out_held(rest.capacity());
    if !rest.is_empty() && (!handle.admit_reply(rest.len()) || !send(stream, handle, &mut rest, backlog).await) {
        return false;
    }
    // The emptied buffer is the connection's output buffer again (dropped when large).
    rest.clear();
    *out = rest;
    true
}

/// Ready once deferred reply `d` can be encoded (true), reading requests meanwhile, or once the
/// connection must close (false: closed by the peer or the executor, its query buffer over the
/// limit, or the reply abandoned).
fn poll_ready<S>(
    d: &Deferred,
    stream: &mut S,
    cx: &mut std::task::Context<'_>,
    rbuf: &mut BytesMut,
    backlog: &mut Backlog,
    handle: &ClientHandle,
) -> Poll<bool>
where
    S: AsyncRead + AsyncWrite + Unpin + Unsent,
{
    if let Poll::Ready(ready) = d.0.poll_ready(cx) {
        return Poll::Ready(ready);
    }
    loop {
        match poll_room(stream, cx, rbuf, backlog, handle) {
            Poll::Ready(false) => return Poll::Ready(false),
            Poll::Pending => return Poll::Pending,
            // Nothing to read or write now (the read registered `cx`); a close request wakes
            // it too.
            Poll::Ready(true) => match handle.killed.poll_take(cx) {
                Poll::Ready(()) => continue,
                Poll::Pending => return Poll::Pending,
            },
        }
    }
}

/// Ready once the backlog is written out (true), reading requests meanwhile, or once the
/// connection must close (false: closed by the peer or the executor, or its query buffer over
/// the limit).
fn poll_room<S>(
    stream: &mut S,
    cx: &mut std::task::Context<'_>,
    rbuf: &mut BytesMut,
    backlog: &mut Backlog,
    handle: &ClientHandle,
) -> Poll<bool>
where
    S: AsyncRead + AsyncWrite + Unpin + Unsent,
{
    loop {
        if handle.close_requested() {
            return Poll::Ready(false);
        }
        if rbuf.capacity() - rbuf.len() < 1024 {
            rbuf.reserve(READ_CHUNK);
        }
        match read_or_flush(stream, cx, rbuf, backlog, handle) {
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(false),
            Poll::Ready(Ok(n)) => {
                crate::stats::add(&crate::stats::NET_INPUT_BYTES, n as u64);
                // Requests waiting behind the reply are the client's query buffer (CLIENT
                // LIST qbuf, maxmemory-clients) as they are between batches.
                handle.report_qbuf(rbuf.len(), rbuf.capacity(), rbuf.len());
                if rbuf.len() as u64 > live::get_u64(&live::CLIENT_QUERY_BUFFER_LIMIT) {
                    tracing::warn!("Closing client that reached max query buffer length (qbuf={})", rbuf.len());
                    return Poll::Ready(false);
                }
                continue;
            }
            Poll::Pending => {}
        }
        if backlog.len() == 0 {
            return Poll::Ready(true);
        }
        // The executor may close the client while it does not read (its output limit).
        match handle.killed.poll_take(cx) {
            Poll::Ready(()) => continue,
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// Redis's static reply buffer (PROTO_REPLY_CHUNK_BYTES): what a connection may keep of its
/// pushed-output buffer once written.
const REPLY_CHUNK: usize = 16 * 1024;

/// Drops a written pushed-output buffer that grew past `REPLY_CHUNK`. Redis keeps only its
/// 16 KiB static buffer per client and frees the reply blocks beyond it once written; keeping a
/// large one here counted against maxmemory for good, so a burst of invalidation messages to
/// tracking clients (sent while evicting) made memory look higher after every eviction: each
/// pass evicted more, until the keyspace was empty.
fn release_large(buf: &mut Vec<u8>) {
    if buf.capacity() > REPLY_CHUNK {
        *buf = Vec::new();
    }
}

/// The most a connection writes before letting the other connections of its thread run: one
/// write of a big reply to a loopback peer that keeps up would otherwise hold the thread for the
/// whole reply. 256 KiB is about 0.1 ms of copying.
const WRITE_SLICE: usize = 256 * 1024;

/// Replies written in part: the peer stopped reading. Until they are out, newer replies queue
/// behind them while the connection goes on reading and running requests, as Redis keeps
/// reading a client whose replies wait in its reply list: a client that sends a whole pipeline
/// before reading any reply blocks on its own writes, and if we stopped reading while ours
/// waited on it, neither side would move. The bytes count as the client's pending output, so
/// client-output-buffer-limit applies.
#[derive(Default)]
struct Backlog {
    buf: Vec<u8>,
    pos: usize,
    /// What a TLS session's buffer takes when full (0 for a plain connection), and whether the
    /// session held unsent records after the last write.
    tls_hold: usize,
    tls_busy: bool,
}

impl Backlog {
    fn len(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// What it holds, as pending output: its allocation past what was written (Redis counts
    /// its reply list by the blocks' allocated sizes too).
    fn held(&self) -> usize {
        let tls = if self.tls_busy { self.tls_hold } else { 0 };
        if self.len() == 0 {
            tls
        } else {
            // The allocation as the allocator serves it (its size class), as used_memory counts
            // it, and the TLS session's buffer in front of it.
            crate::alloc::usable_size(self.buf.capacity()) as usize - self.pos + tls
        }
    }

    /// Reports what it holds to the client's handle: as pending output, and as reply bytes.
    fn report(&self, handle: &ClientHandle) {
        handle.set_in_flight(self.held());
        handle.set_unsent(self.len());
    }

    fn consumed(&mut self, n: usize, handle: &ClientHandle) {
        self.pos += n;
        crate::stats::add_output(handle.is_replica(), n as u64);
        if self.pos == self.buf.len() {
            // A big reply's buffer (a DUMP of millions of elements) purged its pages on this
            // thread when freed: 1-2 ms (perf, madvise under the connection).
            let written = std::mem::take(&mut self.buf);
            let bytes = written.capacity();
            crate::util::bgfree::drop_sized(written, bytes);
            self.pos = 0;
        }
        self.report(handle);
        handle.set_written_held(self.pos);
    }

    /// Writes what is left in full (before a close, a protocol error or a snapshot).
    async fn drain<S>(&mut self, stream: &mut S, handle: &ClientHandle) -> bool
    where
        S: AsyncWrite + Unpin,
    {
        if self.len() == 0 {
            return true;
        }
        let ok = write_out(stream, handle, &self.buf[self.pos..]).await;
        *self = Backlog { tls_hold: self.tls_hold, ..Backlog::default() };
        ok
    }
}

/// A batch's replies (`out`, left empty), checked against the client's output limits and
/// written as far as the socket takes them. False when the connection must close.
async fn send_replies<S>(stream: &mut S, handle: &ClientHandle, out: &mut Vec<u8>, backlog: &mut Backlog) -> bool
where
    S: AsyncWrite + Unpin + Unsent,
{
    if out.is_empty() {
        return true;
    }
    if !handle.admit_reply(out.len()) || !send(stream, handle, out, backlog).await {
        return false;
    }
    out.clear();
    true
}

/// Writes `bytes` now as far as the socket takes them; the rest joins the backlog. Behind a
/// backlog, everything queues. False when the connection must close.
async fn send<S>(stream: &mut S, handle: &ClientHandle, bytes: &mut Vec<u8>, backlog: &mut Backlog) -> bool
where
    S: AsyncWrite + Unpin + Unsent,
{
    if bytes.is_empty() {
        // Taking the outbox reset the count: the backlog is still pending.
        backlog.report(handle);
        return true;
    }
    let mut pos = 0;
    if backlog.len() == 0 {
        while pos < bytes.len() {
            let end = bytes.len().min(pos + WRITE_SLICE);
            match poll_fn(|cx| Poll::Ready(Pin::new(&mut *stream).poll_write(cx, &bytes[pos..end]))).await {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return false,
                Poll::Ready(Ok(n)) => {
                    crate::stats::add(&crate::stats::TOTAL_WRITES, 1);
                    pos += n
                }
                Poll::Pending => break,
            }
            if pos < bytes.len() {
                // A big reply to a fast reader would otherwise go out in one go while the
                // other connections of this thread wait (30 MB: tens of ms). What is unsent
                // meanwhile is the client's output, for maxmemory-clients as for CLIENT LIST.
                let unsent = bytes.len() - pos;
                handle.set_in_flight(backlog.held() + unsent);
                handle.set_unsent(backlog.len() + unsent);
                handle.set_written_held(crate::alloc::usable_size(bytes.capacity()) as usize - unsent);
                tokio::task::yield_now().await;
            }
        }
        crate::stats::add_output(handle.is_replica(), pos as u64);
    }
    if pos < bytes.len() {
        if backlog.len() == 0 && bytes.len() - pos >= 4 * REPLY_CHUNK {
            // A big reply becomes the backlog as it is: copying tens of MB here (and faulting
            // in a buffer for them) held every other connection of this thread.
            backlog.buf = std::mem::take(bytes);
            backlog.pos = pos;
        } else {
            backlog.buf.extend_from_slice(&bytes[pos..]);
        }
    }
    backlog.tls_busy = backlog.tls_hold > 0 && stream.holds_unsent();
    backlog.report(handle);
    handle.set_written_held(backlog.pos);
    true
}

/// The connection's wait: writes the backlog as the socket takes it, and reads requests
/// meanwhile. Ready with the bytes read (0 at end of input), or an error.
fn read_or_flush<S>(
    stream: &mut S,
    cx: &mut std::task::Context<'_>,
    rbuf: &mut BytesMut,
    backlog: &mut Backlog,
    handle: &ClientHandle,
) -> Poll<std::io::Result<usize>>
where
    S: AsyncRead + AsyncWrite + Unpin + Unsent,
{
    let mut written = 0;
    while backlog.len() > 0 {
        if written >= WRITE_SLICE {
            // Others on this thread go first, and so do the sockets: this task is polled again
            // once the runtime has looked for I/O (a plain wake-up would run it again before
            // that, and a request arriving meanwhile would wait for several slices).
            let _ = std::pin::pin!(tokio::task::yield_now()).poll(cx);
            break;
        }
        let end = backlog.buf.len().min(backlog.pos + WRITE_SLICE);
        match Pin::new(&mut *stream).poll_write(cx, &backlog.buf[backlog.pos..end]) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => {
                written += n;
                backlog.consumed(n, handle);
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => break,
        }
    }
    if written > 0 {
        crate::stats::add(&crate::stats::TOTAL_WRITES, 1);
    }
    // A TLS stream takes a reply's bytes as soon as it can encrypt them, and may still hold
    // records the socket refused: they go out when the socket takes them (for TCP this is a
    // no-op that returns at once).
    if backlog.len() == 0 {
        if let Poll::Ready(Err(e)) = Pin::new(&mut *stream).poll_flush(cx) {
            return Poll::Ready(Err(e));
        }
    }
    if backlog.tls_hold > 0 {
        let busy = stream.holds_unsent();
        if busy != backlog.tls_busy {
            backlog.tls_busy = busy;
            backlog.report(handle);
        }
    }
    if rbuf.capacity() == rbuf.len() {
        rbuf.reserve(64);
    }
    let mut rb = tokio::io::ReadBuf::uninit(rbuf.spare_capacity_mut());
    let read = Pin::new(&mut *stream).poll_read(cx, &mut rb);
    if read.is_ready() {
        crate::stats::add(&crate::stats::TOTAL_READS, 1);
    }
    match read {
        Poll::Ready(Ok(())) => {
            let n = rb.filled().len();
            // SAFETY: poll_read initialized the first `n` bytes of the spare capacity.
            unsafe { rbuf.set_len(rbuf.len() + n) };
            Poll::Ready(Ok(n))
        }
        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        Poll::Pending => Poll::Pending,
    }
}

/// Sends a replica its snapshot (`+FULLRESYNC`, the framing, the RDB); the stream queued on the
/// outbox meanwhile follows. False when the connection must close (a failed transfer, or an
/// rdb-only reader served).
async fn send_snapshot<S>(stream: &mut S, rbuf: &mut BytesMut, handle: &ClientHandle, mut t: RdbTransfer) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let rdb_only = t.rdb_only;
    let head = std::mem::take(&mut t.head);
    // Redis writes `+FULLRESYNC ...` straight to the socket, not through writeToClient.
    if !write_unaccounted(stream, handle, &head).await {
        return false;
    }
    crate::server::rdb_transfer::stream_rdb(stream, rbuf, t, handle).await && !rdb_only
}

/// Writes `buf` in full as `write_unaccounted` does, counted as one write of replies (INFO
/// total_writes_processed) when there was something to write.
async fn write_out<S>(stream: &mut S, handle: &ClientHandle, buf: &[u8]) -> bool
where
    S: AsyncWrite + Unpin,
{
    let ok = write_unaccounted(stream, handle, buf).await;
    if ok && !buf.is_empty() {
        crate::stats::add(&crate::stats::TOTAL_WRITES, 1);
    }
    ok
}

/// Writes `buf` in full unless the executor asks to close the connection first; returns false
/// when the connection must close. Keeps the handle's count of unwritten bytes current.
async fn write_unaccounted<S>(stream: &mut S, handle: &ClientHandle, buf: &[u8]) -> bool
where
    S: AsyncWrite + Unpin,
{
    let mut pos = 0;
    while pos < buf.len() {
        // The write is tried first: the kill signal is only waited on while the peer is not
        // reading, so the common case registers nothing.
        let written = poll_fn(|cx| match Pin::new(&mut *stream).poll_write(cx, &buf[pos..]) {
            Poll::Ready(r) => Poll::Ready(Some(r)),
            Poll::Pending => loop {
                match handle.killed.poll_take(cx) {
                    Poll::Ready(()) if handle.close_requested() => break Poll::Ready(None),
                    Poll::Ready(()) => continue,
                    Poll::Pending => break Poll::Pending,
                }
            },
        })
        .await;
        match written {
            None => {
                handle.set_in_flight(0);
                handle.set_unsent(0);
                return false;
            }
            Some(Ok(0)) | Some(Err(_)) => return false,
            Some(Ok(n)) => {
                pos += n;
                handle.set_in_flight(buf.len() - pos);
                handle.set_unsent(buf.len() - pos);
            }
        }
    }
    if buf.is_empty() {
        return true;
    }
    // A TLS stream may keep records it could not send yet; a TCP stream's flush is a no-op.
    let flushed = poll_fn(|cx| match Pin::new(&mut *stream).poll_flush(cx) {
        Poll::Ready(r) => Poll::Ready(r.is_ok()),
        Poll::Pending => loop {
            match handle.killed.poll_take(cx) {
                Poll::Ready(()) if handle.close_requested() => break Poll::Ready(false),
                Poll::Ready(()) => continue,
                Poll::Pending => break Poll::Pending,
            }
        },
    })
    .await;
    if !flushed {
        return false;
    }
    crate::stats::add_output(handle.is_replica(), buf.len() as u64);
    true
}
