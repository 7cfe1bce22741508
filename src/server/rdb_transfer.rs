//! Sending a full sync's snapshot to a SYNC/PSYNC client, and the diskless relay.
//!
//! Diskless (`$EOF:<mark>` framing): one forked child writes the snapshot, and the closing mark,
//! into one pipe for every replica of the sync (Redis 7.0's rdbSaveToSlavesSockets). `relay`
//! reads the pipe and hands each chunk to every replica's connection through a small bounded
//! channel, so the slowest replica paces the child, as Redis's parent does when it stops
//! reading the pipe until every socket took the last chunk. A replica that goes away drops its
//! channel and the others go on; when none is left the child is killed. The child writes the
//! mark itself: a child that dies leaves its replicas without one, and they retry.
//!
//! Disk (`$<len>` framing, replicas without `capa eof` or repl-diskless-sync no): the sync is a
//! BGSAVE to the dump file; once the executor reaps the child it tells each waiting connection,
//! which sends the file. Meanwhile the connection sends a newline a second, as Redis does to a
//! replica waiting for its BGSAVE, so the replica's link does not time out.
//!
//! The executor side (forking, the reply head, attaching the replicas, reaping the child, the
//! full-sync timeout) is `executor::replication`.

use std::io::Read;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::executor::clients::{ClientHandle, RdbRelay, RdbSource, RdbTransfer};

/// How much of the pipe one read takes (Redis reads PROTO_IOBUF_LEN).
const CHUNK: usize = 16 * 1024;

/// Reads the snapshot child's pipe until its end, handing every chunk to each replica still
/// there; kills the child when the last one is gone.
pub async fn relay(r: RdbRelay) {
    let RdbRelay { pipe, pid, mut replicas } = r;
    let Ok(mut rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(pipe) else { return };
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = rx.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            let up = replicas.iter().filter(|s| !s.is_closed()).count();
            tracing::info!("Diskless rdb transfer, done reading from pipe, {up} replicas still up.");
            return;
        }
        let chunk = Bytes::copy_from_slice(&buf[..n]);
        let mut alive = Vec::with_capacity(replicas.len());
        for tx in replicas {
            if tx.send(chunk.clone()).await.is_ok() {
                alive.push(tx);
            }
        }
        replicas = alive;
        if replicas.is_empty() {
            tracing::warn!("Diskless rdb transfer, last replica dropped, killing fork child.");
            // As Redis's killRDBChild: SIGUSR1 marks a child stopped on purpose; the executor
            // reaps it.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGUSR1);
            return;
        }
    }
}

/// Sends the snapshot of `t` to the client (the head went first). True when the whole snapshot
/// went out. A CLIENT KILL (or a timeout) abandons the transfer, and so does the peer closing
/// while the transfer waits (for the BGSAVE, or the next chunk): what it sends meanwhile is
/// kept in `rbuf` for the connection to parse after.
pub async fn stream_rdb<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    t: RdbTransfer,
    handle: &ClientHandle,
) -> bool {
    let sent = match t.source {
        RdbSource::Relay { chunks, relay: r } => {
            if let Some(r) = r {
                tokio::spawn(relay(r));
            }
            send_relayed(stream, rbuf, chunks, handle).await
        }
        RdbSource::Disk { done, path } => {
            let sent = send_file(stream, rbuf, done, &path, handle).await;
            if sent.is_ok() {
                handle.disk_snapshot_sent.store(true, std::sync::atomic::Ordering::Release);
            }
            sent
        }
    };
    match sent {
        Ok(n) => {
            crate::stats::add(&crate::stats::NET_REPL_OUTPUT_BYTES, n);
            true
        }
        Err(e) => {
            tracing::warn!("SYNC transfer aborted: {e}");
            false
        }
    }
}

/// Waits for the close signal (a CLIENT KILL, the full-sync timeout).
async fn killed(handle: &ClientHandle) {
    while !handle.close_requested() {
        handle.killed.wait().await;
    }
}

fn gone() -> std::io::Error {
    std::io::Error::other("the replica was disconnected")
}

/// What a read while waiting says: the peer closed, or sent bytes (kept in `rbuf`).
fn read_while_waiting(r: std::io::Result<usize>) -> std::io::Result<()> {
    match r {
        Ok(0) => Err(std::io::Error::other("the replica closed the connection")),
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn send_relayed<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    mut chunks: tokio::sync::mpsc::Receiver<Bytes>,
    handle: &ClientHandle,
) -> std::io::Result<u64> {
    let mut n = 0u64;
    loop {
        let chunk = tokio::select! {
            c = chunks.recv() => c,
            r = stream.read_buf(rbuf) => {
                read_while_waiting(r)?;
                continue;
            }
            _ = killed(handle) => return Err(gone()),
        };
        let Some(chunk) = chunk else { break };
        // Stuck from now until the chunk is written: a replica that stops reading holds every
        // other one back, and the executor drops it after repl-timeout.
        handle.rdb_stuck_since_ms.store(crate::util::clock::unix_ms(), Ordering::Relaxed);
        tokio::select! {
            r = stream.write_all(&chunk) => r?,
            _ = killed(handle) => return Err(gone()),
        }
        handle.rdb_stuck_since_ms.store(0, Ordering::Relaxed);
        n += chunk.len() as u64;
    }
    stream.flush().await?;
    Ok(n)
}

/// Waits for the BGSAVE (a newline a second meanwhile), then sends `$<len>` and the file.
async fn send_file<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    rbuf: &mut BytesMut,
    mut done: tokio::sync::oneshot::Receiver<bool>,
    path: &std::path::Path,
    handle: &ClientHandle,
) -> std::io::Result<u64> {
    let mut tick = crate::util::timer::interval(std::time::Duration::from_secs(1));
    tick.tick().await;
    let ok = loop {
        tokio::select! {
            r = &mut done => break r.unwrap_or(false),
            _ = tick.tick() => stream.write_all(b"\n").await?,
            r = stream.read_buf(rbuf) => read_while_waiting(r)?,
            _ = killed(handle) => return Err(gone()),
        }
    };
    if !ok {
        return Err(std::io::Error::other("the BGSAVE for SYNC failed"));
    }
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    stream.write_all(format!("${len}\r\n").as_bytes()).await?;
    let mut buf = vec![0u8; 1 << 16];
    let mut sent = 0u64;
    while sent < len {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        tokio::select! {
            r = stream.write_all(&buf[..n]) => r?,
            _ = killed(handle) => return Err(gone()),
        }
        sent += n as u64;
    }
    stream.flush().await?;
    Ok(sent)
}
