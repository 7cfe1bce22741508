//! One client connection: read → parse every complete command → look each up in the table →
//! one batch to the executor → one write of all the replies. Protocol errors are answered after
//! the commands before them, then the connection closes.

use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Shared;
use crate::commands;
use crate::config::live;
use crate::executor::clients::{ClientHandle, ConnInfo};
use crate::executor::{BatchEnd, Cmd};
use crate::resp::Parser;

const READ_CHUNK: usize = 16 * 1024;

/// Serves one connection until it closes.
pub async fn serve<S>(mut stream: S, info: ConnInfo, shared: &Shared)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let handle = Arc::new(ClientHandle::default());
    let Some(id) = shared.exec.connect(info, handle.clone()).await else {
        return;
    };
    // The keyspace stores key lengths in 32 bits: a bulk over 4 GiB is refused as an invalid
    // bulk length even when proto-max-bulk-len is set higher.
    let max_bulk = live::get_u64(&live::PROTO_MAX_BULK_LEN).min(u32::MAX as u64);
    let mut parser = Parser::new(max_bulk as i64);
    parser.unauthenticated = !handle.authenticated();
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK);

    let mut reparse = false;
    'conn: loop {
        if !std::mem::take(&mut reparse) {
            // Make room for the next read, or for the rest of a large argument in one go.
            let want = match parser.pending_bulk() {
                Some(len) if len + 2 > READ_CHUNK => len + 2,
                _ => READ_CHUNK,
            };
            if rbuf.capacity() - rbuf.len() < want.min(READ_CHUNK) {
                rbuf.reserve(want.min(READ_CHUNK * 64));
            }
            let n = tokio::select! {
                biased;
                _ = handle.notify.notified() => {
                    let pushed = handle.take_output();
                    if !pushed.is_empty() {
                        if stream.write_all(&pushed).await.is_err() {
                            break 'conn;
                        }
                        crate::stats::add(&crate::stats::NET_OUTPUT_BYTES, pushed.len() as u64);
                    }
                    if handle.close_requested() {
                        break 'conn;
                    }
                    continue 'conn;
                }
                r = stream.read_buf(&mut rbuf) => match r {
                    Ok(0) | Err(_) => break 'conn,
                    Ok(n) => n,
                },
            };
            crate::stats::add(&crate::stats::NET_INPUT_BYTES, n as u64);
            if rbuf.len() as u64 > live::get_u64(&live::CLIENT_QUERY_BUFFER_LIMIT) {
                tracing::warn!("Closing client that reached max query buffer length (qbuf={})", rbuf.len());
                break;
            }
        }
        let mut cmds: Vec<Cmd> = Vec::new();
        let parsed = parser.parse_into(&mut rbuf, |argv| cmds.push(Cmd { spec: commands::lookup(&argv[0]), argv }));
        reparse = parsed.stopped_early;
        if !cmds.is_empty() {
            let end = shared.exec.batch(id, cmds, &mut out).await;
            parser.unauthenticated = !handle.authenticated();
            // Replies the executor pushed earlier (a served blocking command) go first.
            let pushed = handle.take_output();
            if !pushed.is_empty() {
                if stream.write_all(&pushed).await.is_err() {
                    break;
                }
                crate::stats::add(&crate::stats::NET_OUTPUT_BYTES, pushed.len() as u64);
            }
            if !out.is_empty() {
                if stream.write_all(&out).await.is_err() {
                    break;
                }
                crate::stats::add(&crate::stats::NET_OUTPUT_BYTES, out.len() as u64);
                out.clear();
            }
            // SYNC/PSYNC: the snapshot follows the reply, then the connection closes.
            if let Some(t) = handle.take_rdb_transfer() {
                commands::replication::stream_rdb(&mut stream, t).await;
                break;
            }
            match end {
                BatchEnd::Continue => {}
                BatchEnd::Close => break,
                BatchEnd::Shutdown => {
                    shared.shutdown.notify_one();
                    break;
                }
            }
        }
        if let Some(err) = parsed.error {
            let line = format!("-{}\r\n", err.reply_text());
            let _ = stream.write_all(line.as_bytes()).await;
            crate::stats::add(&crate::stats::NET_OUTPUT_BYTES, line.len() as u64);
            break;
        }
        if out.capacity() > 1024 * 1024 {
            out = Vec::with_capacity(READ_CHUNK);
        }
    }
    let _ = stream.shutdown().await;
    shared.exec.disconnect(id);
}
