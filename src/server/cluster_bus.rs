//! The cluster bus's sockets: a listener on the bus port (cluster-port, or the client port plus
//! 10000) on the configured bind addresses, a task per link that frames what it reads into
//! whole messages (by the length in their first 8 bytes) and hands them to the executor
//! (`executor::cluster::on_frames`), and writes what the executor queued on the link's channel.
//! Outbound links are opened on the executor's request (`BusRequest::Connect`). Under
//! `tls-cluster yes` links are TLS both ways, with the contexts of `tls`. The protocol itself is
//! the executor's; nothing here looks inside a message.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::UnboundedReceiver;

use super::{ExecHandle, Shared};
use crate::cluster::msg;
use crate::cluster::BusRequest;
use crate::executor::cluster;
use crate::executor::nodes_conf::ConfWriter;

/// A frame larger than this closes the link: no peer sends one (a PUBLISH is bounded by
/// proto-max-bulk-len on its origin), and a corrupt length must not make us allocate without
/// bound. The buffer grows only as bytes arrive.
const MAX_FRAME: usize = 1 << 30;

/// Binds the bus port and starts the accept loops and the connector; nothing without
/// cluster-enabled. Err: the line Redis logs before exiting.
pub async fn start(shared: Arc<Shared>) -> Result<(), String> {
    let Some(true) = shared.exec.run(|e| e.state.cluster.is_some()).await else { return Ok(()) };
    let port = cluster::bus_port(&shared.config);
    let mut listeners = Vec::new();
    for entry in &shared.config.bind {
        let optional = entry.starts_with('-');
        let addr = entry.trim_start_matches('-');
        let ip: IpAddr = match addr {
            "*" => IpAddr::from([0, 0, 0, 0]),
            "::*" => "::".parse().expect("literal"),
            a => match a.parse() {
                Ok(ip) => ip,
                Err(_) if optional => continue,
                Err(_) => return Err(format!("Invalid bind address '{a}'")),
            },
        };
        match bind(ip, port) {
            Ok(l) => listeners.push(l),
            Err(e) if optional || e.kind() == std::io::ErrorKind::AddrNotAvailable && ip.is_ipv6() => {}
            Err(e) => {
                return Err(format!(
                    "Warning: Could not create server TCP listening socket {addr}:{port}: {e}\nFailed listening on port {port} (cluster), aborting."
                ))
            }
        }
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    shared
        .exec
        .run(move |e| {
            if let Some(c) = e.state.cluster.as_mut() {
                c.bus = Some(tx);
            }
        })
        .await;
    let conf = shared.exec.run(|e| cluster::conf_writer(&e.state)).await.flatten();
    for l in listeners {
        tokio::spawn(accept_loop(shared.exec.clone(), l, conf.clone()));
    }
    tokio::spawn(connector(shared.exec.clone(), rx, conf));
    Ok(())
}

fn bind(ip: IpAddr, port: u16) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let domain = if ip.is_ipv6() { Domain::IPV6 } else { Domain::IPV4 };
    let s = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if ip.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&std::net::SocketAddr::new(ip, port).into())?;
    s.listen(511)?;
    s.set_nonblocking(true)?;
    TcpListener::from_std(s.into())
}

fn ip_text(ip: IpAddr) -> String {
    ip.to_canonical().to_string()
}

async fn accept_loop(exec: ExecHandle, listener: TcpListener, conf: Option<Arc<ConfWriter>>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            crate::util::timer::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().map(|a| ip_text(a.ip())).unwrap_or_default();
        let peer_ip = ip_text(peer.ip());
        let accepted = exec
            .run(move |e| {
                let transport = (cluster::tls_cluster(&e.state.config), cluster::node_timeout(&e.state));
                cluster::accept_link(&mut e.state, peer_ip, local).map(|link| (link, transport))
            })
            .await;
        let Some(Some(((id, rx, queued), (tls, timeout)))) = accepted else { continue };
        let (exec, conf) = (exec.clone(), conf.clone());
        tokio::spawn(async move {
            if !tls {
                return serve_link(exec, stream, id, rx, queued, conf).await;
            }
            // Under tls-cluster the bus is TLS, the peer presenting its client certificate as
            // tls-auth-clients asks; a handshake that does not finish within the node timeout
            // drops the link as a silent peer would.
            let handshake = async {
                let acceptor = super::tls::acceptor().ok_or("TLS is not configured")?;
                acceptor.accept(stream).await.map_err(|e| e.to_string())
            };
            match crate::util::timer::timeout(handshake_timeout(timeout), handshake).await {
                Ok(Ok(stream)) => serve_link(exec, stream, id, rx, queued, conf).await,
                failed => {
                    let why = failed.map_or_else(|_| "handshake timeout".to_string(), |r| r.err().unwrap_or_default());
                    tracing::debug!("Error accepting cluster node connection: {why}");
                    exec.run(move |e| cluster::link_closed(&mut e.state, id)).await;
                }
            }
        });
    }
}

fn handshake_timeout(node_timeout_ms: i64) -> Duration {
    Duration::from_millis(node_timeout_ms.max(100) as u64)
}

async fn connector(exec: ExecHandle, mut rx: UnboundedReceiver<BusRequest>, conf: Option<Arc<ConfWriter>>) {
    while let Some(req) = rx.recv().await {
        let BusRequest::Connect { link, ip, port, rx, queued } = req;
        let (exec, conf) = (exec.clone(), conf.clone());
        tokio::spawn(async move {
            let transport =
                exec.run(|e| (cluster::node_timeout(&e.state), cluster::tls_cluster(&e.state.config))).await;
            let (timeout, tls) = transport.unwrap_or((15000, false));
            // The TCP connect and, under tls-cluster, the TLS handshake (the client certificate is
            // tls-client-cert-file's, else the server's), both within the node timeout.
            let attempt = async {
                let stream = TcpStream::connect((ip.as_str(), port)).await.map_err(|e| e.to_string())?;
                let _ = stream.set_nodelay(true);
                let local = stream.local_addr().map(|a| ip_text(a.ip())).unwrap_or_default();
                let peer = stream.peer_addr().map(|a| ip_text(a.ip())).unwrap_or_default();
                let stream = super::tls::ClientStream::start(stream, &ip, tls).await?;
                Ok::<_, String>((stream, local, peer))
            };
            match crate::util::timer::timeout(handshake_timeout(timeout), attempt).await {
                Ok(Ok((stream, local, peer))) => {
                    exec.run(move |e| cluster::link_connected(&mut e.state, link, peer, local)).await;
                    serve_link(exec, stream, link, rx, queued, conf).await;
                }
                failed => {
                    let why = failed.map_or_else(|_| "timeout".to_string(), |r| r.err().unwrap_or_default());
                    tracing::debug!("Connection with Node at {ip}:{port} failed: {why}");
                    exec.run(move |e| cluster::link_closed(&mut e.state, link)).await;
                }
            }
        });
    }
}

/// Messages gathered into one write: their buffers go to the kernel as they are (a broadcast's
/// bytes are shared by every link's queue), not copied into one buffer first, which cost a
/// memcpy of each 64 KiB PUBLISH per link.
const WRITE_IOVECS: usize = 64;

/// Writes every buffer of `bufs` in order, as few `writev`s as the socket takes, and empties it.
async fn write_all_vectored<W: AsyncWrite + Unpin>(wr: &mut W, bufs: &mut Vec<bytes::Bytes>) -> std::io::Result<()> {
    let mut first = 0;
    loop {
        while first < bufs.len() && bufs[first].is_empty() {
            first += 1;
        }
        if first == bufs.len() {
            bufs.clear();
            return Ok(());
        }
        let slices: Vec<std::io::IoSlice<'_>> = bufs[first..].iter().map(|b| std::io::IoSlice::new(b)).collect();
        let mut written = wr.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while written > 0 {
            let take = written.min(bufs[first].len());
            bytes::Buf::advance(&mut bufs[first], take);
            written -= take;
            if bufs[first].is_empty() {
                first += 1;
            }
        }
    }
}

/// Moves bytes both ways until either side ends; then tells the executor (unless it closed the
/// link itself, which it learns of by the channel ending).
async fn serve_link<S: AsyncRead + AsyncWrite + Send + 'static>(
    exec: ExecHandle,
    stream: S,
    id: u64,
    mut rx: UnboundedReceiver<bytes::Bytes>,
    queued: Arc<AtomicUsize>,
    conf: Option<Arc<ConfWriter>>,
) {
    let (mut rd, mut wr) = tokio::io::split(stream);
    let writer = async {
        let mut out: Vec<bytes::Bytes> = Vec::new();
        while let Some(first) = rx.recv().await {
            let mut total = first.len();
            out.push(first);
            while total < 1 << 20 && out.len() < WRITE_IOVECS {
                match rx.try_recv() {
                    Ok(more) => {
                        total += more.len();
                        out.push(more);
                    }
                    Err(_) => break,
                }
            }
            // What was queued after a save that must be on disk first waits for it (a vote,
            // a new epoch: see `executor::nodes_conf`).
            if let Some(conf) = &conf {
                conf.output_ready().await;
            }
            if write_all_vectored(&mut wr, &mut out).await.is_err() {
                return;
            }
            queued.fetch_sub(total.min(queued.load(Ordering::Relaxed)), Ordering::Relaxed);
        }
    };
    /// Bytes of bus frames handed to the executor in one hop.
    const HOP_BYTES: usize = 64 * 1024;
    let reader = async {
        let mut buf = BytesMut::with_capacity(16 * 1024);
        loop {
            match rd.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let mut frames = Vec::new();
            let mut batched = 0;
            let mut bad = false;
            while buf.len() >= 8 {
                match msg::frame_len(&buf[..8]) {
                    Ok(len) if len <= MAX_FRAME => {
                        if buf.len() < len {
                            buf.reserve((len - buf.len()).min(1 << 20));
                            break;
                        }
                        // Frozen, not copied: a 64 KiB PUBLISH reaches the executor in the bytes it
                        // was read into.
                        frames.push(buf.split_to(len).freeze());
                        batched += len;
                        // One read can hold many big messages (PUBLISH fan-out): the executor
                        // takes them HOP_BYTES at a time, so clients' commands run in between
                        // (6 PUBLISH of 64 KiB in one hop held the executor ~2 ms).
                        if batched >= HOP_BYTES {
                            let batch = std::mem::take(&mut frames);
                            batched = 0;
                            if exec.run(move |e| cluster::on_frames(&mut e.state, id, batch)).await.is_none() {
                                return;
                            }
                        }
                    }
                    _ => {
                        // The executor logs and drops the link on this frame.
                        frames.push(bytes::Bytes::copy_from_slice(&buf[..8]));
                        bad = true;
                        break;
                    }
                }
            }
            if !frames.is_empty() && exec.run(move |e| cluster::on_frames(&mut e.state, id, frames)).await.is_none() {
                return;
            }
            if bad {
                return;
            }
        }
    };
    tokio::select! {
        _ = writer => {}
        _ = reader => {}
    }
    exec.run(move |e| cluster::link_closed(&mut e.state, id)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// Takes at most `step` bytes a call, from as many buffers as it is handed.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[std::io::IoSlice<'_>],
        ) -> Poll<std::io::Result<usize>> {
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.step - n);
                self.got.extend_from_slice(&b[..take]);
                n += take;
                if n == self.step {
                    break;
                }
            }
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn vectored_writes_send_every_byte_in_order_across_partial_writes() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let pieces: Vec<bytes::Bytes> =
            ["", "abc", "", "defghij", "k", "", "lmnopqrstuvwxyz"].iter().map(|s| bytes::Bytes::from(*s)).collect();
        let want: Vec<u8> = pieces.iter().flat_map(|b| b.to_vec()).collect();
        for step in [1, 2, 3, 5, 8, 64] {
            let mut w = Trickle { got: Vec::new(), step };
            let mut bufs = pieces.clone();
            rt.block_on(write_all_vectored(&mut w, &mut bufs)).unwrap();
            assert_eq!(w.got, want, "step {step}");
            assert!(bufs.is_empty());
        }
        // Only empty buffers: nothing to write, and no WriteZero.
        let mut w = Trickle { got: Vec::new(), step: 4 };
        let mut bufs = vec![bytes::Bytes::new(), bytes::Bytes::new()];
        rt.block_on(write_all_vectored(&mut w, &mut bufs)).unwrap();
        assert!(w.got.is_empty() && bufs.is_empty());
    }
}
