//! Accept loops: every bind address (IPv4 and IPv6, `-` prefix = optional) on the TCP port and
//! on the TLS port (`tls-port`), and the unix socket. Applies maxclients, TCP_NODELAY and
//! keepalive, and hands each socket to a connection task; a TLS socket's task does the handshake
//! (`tls`) first. Sockets a busy script accepted (`executor::handoff`) join here as if just
//! accepted; TLS listeners are not handed to a busy script (it could not speak TLS), so their
//! new connections wait in the backlog until the script ends.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use tokio::io::AsyncWriteExt;

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use super::{connection, Shared};
use crate::config::live;
use crate::executor::clients::ConnInfo;

/// A socket bound and listening, not yet accepted on.
enum Bound {
    Tcp(std::net::TcpListener),
    Tls(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// Sockets `prebind` opened at startup, before the banner and the data load.
static PREBOUND: std::sync::Mutex<Option<Vec<Bound>>> = std::sync::Mutex::new(None);

/// Binds every configured address before the startup banner, as Redis does in initServer: a
/// client that connects while the server prints its logo or loads its data waits in the listen
/// backlog instead of being refused (Redis's test suite connects as soon as the banner's PID
/// line appears). `start` then accepts on these sockets.
pub fn prebind(cfg: &crate::config::Config) -> Result<(), String> {
    let bound = bind_all(cfg)?;
    *PREBOUND.lock().unwrap_or_else(|p| p.into_inner()) = Some(bound);
    Ok(())
}

/// Where rebound TCP listeners are started: the runtime and what the accept loops share.
static ACCEPTING: std::sync::Mutex<Option<(tokio::runtime::Handle, Arc<Shared>)>> = std::sync::Mutex::new(None);

/// The generation of the TCP listeners: a TCP accept loop ends once it is not its own.
fn tcp_generation() -> &'static tokio::sync::watch::Sender<u64> {
    static GENERATION: std::sync::OnceLock<tokio::sync::watch::Sender<u64>> = std::sync::OnceLock::new();
    GENERATION.get_or_init(|| tokio::sync::watch::Sender::new(0))
}

/// The same for the TLS listeners.
fn tls_generation() -> &'static tokio::sync::watch::Sender<u64> {
    static GENERATION: std::sync::OnceLock<tokio::sync::watch::Sender<u64>> = std::sync::OnceLock::new();
    GENERATION.get_or_init(|| tokio::sync::watch::Sender::new(0))
}

/// What the TCP or the TLS listeners are bound to: the bind list and the port (empty and 0 when
/// there are none). A rebind to what is already bound does nothing, so CONFIG SET's hooks may
/// run more than once in one call (bind and port both changed, or a rollback).
type Listening = std::sync::Mutex<Option<(Vec<String>, u16)>>;
static TCP_LISTENING: Listening = std::sync::Mutex::new(None);
static TLS_LISTENING: Listening = std::sync::Mutex::new(None);

fn listening_key(cfg: &crate::config::Config, port: u16) -> (Vec<String>, u16) {
    if port == 0 {
        (Vec::new(), 0)
    } else {
        (cfg.bind.clone(), port)
    }
}

/// What `start` listens on: TCP or TLS sockets, a unix socket.
pub struct Listeners {
    pub network: bool,
    pub unix: bool,
}

/// Binds every configured address (unless `prebind` already did) and spawns the accept loops.
pub async fn start(shared: Arc<Shared>) -> Result<Listeners, String> {
    *TCP_LISTENING.lock().unwrap_or_else(|p| p.into_inner()) = Some(listening_key(&shared.config, shared.config.port));
    *TLS_LISTENING.lock().unwrap_or_else(|p| p.into_inner()) =
        Some(listening_key(&shared.config, super::tls::port(&shared.config)));
    let prebound = PREBOUND.lock().unwrap_or_else(|p| p.into_inner()).take();
    let bound = match prebound {
        Some(b) => b,
        None => bind_all(&shared.config)?,
    };
    *ACCEPTING.lock().unwrap_or_else(|p| p.into_inner()) = Some((tokio::runtime::Handle::current(), shared.clone()));
    live::install_rebinder(rebind_tcp);
    live::install_tls(super::tls::configure, rebind_tls, super::tls::configured);
    let mut tcp = Vec::new();
    let mut tls = Vec::new();
    let mut listening = Listeners { network: false, unix: false };
    for b in bound {
        match b {
            Bound::Tcp(l) => tcp.push(l),
            Bound::Tls(l) => tls.push(l),
            Bound::Unix(l) => {
                listening.unix = true;
                crate::executor::handoff::register_listener(std::os::fd::AsRawFd::as_raw_fd(&l), true);
                let l = UnixListener::from_std(l).map_err(|e| format!("Failed opening Unix socket: {e}"))?;
                tokio::spawn(accept_unix(l, shared.clone()));
            }
        }
    }
    listening.network = !tcp.is_empty() || !tls.is_empty();
    spawn_loops(tls, &shared, 0, true).map_err(|e| format!("Failed listening on port (TLS): {e}"))?;
    spawn_loops(tcp, &shared, 0, false).map_err(|e| format!("Failed listening on port (tcp): {e}"))?;
    Ok(listening)
}

/// Starts an accept loop (a TLS one when `tls`) on each listener, as generation `mine`, and
/// registers them as the TCP (or TLS) listeners, in place of any before them.
fn spawn_loops(
    listeners: Vec<std::net::TcpListener>,
    shared: &Arc<Shared>,
    mine: u64,
    tls: bool,
) -> std::io::Result<()> {
    let fds: Vec<_> = listeners.iter().map(AsRawFd::as_raw_fd).collect();
    let generation = if tls { tls_generation() } else { tcp_generation() }.subscribe();
    for l in listeners {
        tokio::spawn(accept_tcp(TcpListener::from_std(l)?, shared.clone(), generation.clone(), mine, tls));
    }
    if tls {
        crate::executor::handoff::replace_tls_listeners(&fds);
    } else {
        crate::executor::handoff::replace_tcp_listeners(&fds);
    }
    Ok(())
}

/// CONFIG SET tls-port (or bind): as `rebind_tcp` for the TLS port. Port 0 closes TLS.
fn rebind_tls(cfg: &crate::config::Config) -> Result<(), String> {
    let port = super::tls::port(cfg);
    rebind(listening_key(cfg, port), || bind_port_all(cfg, port), true)
}

/// CONFIG SET port / bind: as `rebind`. Port 0 closes TCP.
fn rebind_tcp(cfg: &crate::config::Config) -> Result<(), String> {
    rebind(listening_key(cfg, cfg.port), || bind_tcp_all(cfg), false)
}

/// Closes the old listeners (TCP, or TLS when `tls`), then binds the new addresses, as Redis's
/// changeListenPort and changeBindAddr: closing first lets the new list overlap the old one
/// (`*` to `127.0.0.1` on the same port). On failure nothing is left listening and the error
/// goes back to CONFIG SET, whose rollback runs this again with the old addresses. Nothing
/// happens when `wanted` is what those listeners are already bound to.
fn rebind(
    wanted: (Vec<String>, u16),
    bind: impl FnOnce() -> Result<Vec<std::net::TcpListener>, String>,
    tls: bool,
) -> Result<(), String> {
    let Some((handle, shared)) = ACCEPTING.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
        return Err("the listeners are not running".into());
    };
    let (listening, generation, kind) =
        if tls { (&TLS_LISTENING, tls_generation(), "TLS") } else { (&TCP_LISTENING, tcp_generation(), "tcp") };
    let mut listening = listening.lock().unwrap_or_else(|p| p.into_inner());
    if listening.as_ref() == Some(&wanted) {
        return Ok(());
    }
    let old = if tls {
        crate::executor::handoff::replace_tls_listeners(&[])
    } else {
        crate::executor::handoff::replace_tcp_listeners(&[])
    };
    for fd in old {
        release_listener(fd);
    }
    let next = *generation.borrow() + 1;
    generation.send_replace(next);
    *listening = Some((Vec::new(), 0));
    let bound = bind()?;
    let _entered = handle.enter();
    spawn_loops(bound, &shared, next, tls).map_err(|e| format!("Failed listening on port ({kind}): {e}"))?;
    *listening = Some(wanted);
    Ok(())
}

/// Closes a retired listener's socket now, so that its address is free for the next bind, while
/// its descriptor stays open (on a placeholder) until its accept loop, which owns it, ends.
fn release_listener(fd: RawFd) {
    // SAFETY: `fd` is a listener owned by an accept loop of the old generation, which keeps the
    // descriptor open until it sees the generation change. dup3 swaps the socket behind it for
    // an unbound one atomically (the number is never free for another open to take); the
    // socket's last reference goes with it, which closes it and drops it from epoll. The
    // placeholder's own descriptor is closed here.
    unsafe {
        let placeholder = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if placeholder < 0 || libc::dup3(placeholder, fd, libc::O_CLOEXEC) < 0 {
            // Not closed: at least no connection is accepted there any more.
            libc::shutdown(fd, libc::SHUT_RDWR);
        }
        if placeholder >= 0 {
            libc::close(placeholder);
        }
    }
}

fn bind_all(cfg: &crate::config::Config) -> Result<Vec<Bound>, String> {
    // A port that cannot be bound ends startup with Redis's two lines: the socket's warning,
    // then "Failed listening on port N (TCP|TLS), aborting.", which tools (Redis's test suite
    // among them) read to retry on another port.
    let aborting = |port: u16, kind: &'static str| {
        move |why: String| {
            tracing::warn!("{why}");
            format!("Failed listening on port {port} ({kind}), aborting.")
        }
    };
    let tls_port = super::tls::port(cfg);
    let mut out: Vec<Bound> =
        bind_tcp_all(cfg).map_err(aborting(cfg.port, "TCP"))?.into_iter().map(Bound::Tcp).collect();
    out.extend(bind_port_all(cfg, tls_port).map_err(aborting(tls_port, "TLS"))?.into_iter().map(Bound::Tls));
    if let Some(path) = &cfg.unixsocket {
        let _ = std::fs::remove_file(path);
        let l = std::os::unix::net::UnixListener::bind(path).map_err(|e| format!("Failed opening Unix socket: {e}"))?;
        l.set_nonblocking(true).map_err(|e| format!("Failed opening Unix socket: {e}"))?;
        if cfg.unixsocketperm != 0 {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(cfg.unixsocketperm));
        }
        out.push(Bound::Unix(l));
    }
    if out.is_empty() {
        return Err("Configured to not listen anywhere, exiting.".into());
    }
    Ok(out)
}

/// Binds the TCP port on every bind address (none when the port is 0); an address with a `-`
/// prefix may fail, the others may not, and at least one of a non-empty list must succeed.
fn bind_tcp_all(cfg: &crate::config::Config) -> Result<Vec<std::net::TcpListener>, String> {
    bind_port_all(cfg, cfg.port)
}

/// `bind_tcp_all` for any port (the TLS port shares the bind addresses).
fn bind_port_all(cfg: &crate::config::Config, port: u16) -> Result<Vec<std::net::TcpListener>, String> {
    let mut out = Vec::new();
    if port == 0 {
        return Ok(out);
    }
    for spec in &cfg.bind {
        let (optional, addr) = match spec.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, spec.as_str()),
        };
        let ip: IpAddr = match addr {
            "*" => "0.0.0.0".parse().expect("valid literal"),
            "::*" => "::".parse().expect("valid literal"),
            other => match other.parse() {
                Ok(ip) => ip,
                Err(_) => return Err(format!("Invalid bind address '{other}'")),
            },
        };
        match bind_tcp(SocketAddr::new(ip, port), cfg.tcp_backlog) {
            Ok(l) => out.push(l),
            Err(e) if optional => {
                tracing::debug!("Skipping optional bind {addr}:{port}: {e}");
            }
            Err(e) => {
                return Err(format!("Warning: Could not create server TCP listening socket {addr}:{port}: {e}"));
            }
        }
    }
    // An empty bind list listens nowhere on TCP (the unix socket may still serve).
    if out.is_empty() && !cfg.bind.is_empty() {
        return Err("Failed listening on port (tcp), aborting.".into());
    }
    Ok(out)
}

fn bind_tcp(addr: SocketAddr, backlog: i32) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Removes what the server created on disk (unix socket, pidfile) at shutdown.
pub fn cleanup(cfg: &crate::config::Config) {
    if let Some(path) = &cfg.unixsocket {
        let _ = std::fs::remove_file(path);
    }
    if let Some(path) = &cfg.pidfile {
        let _ = std::fs::remove_file(path);
    }
}

/// Redis's reply to a connection over maxclients, before closing it.
const MAX_CLIENTS_ERR: &[u8] = b"-ERR max number of clients reached\r\n";

/// Redis 7.0's refusal of a non-loopback client in protected mode (no password set).
const PROTECTED_MODE_ERR: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and \
no password is set for the default user. In this mode connections are only accepted from the loopback interface. \
If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just \
disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting \
to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet \
if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected \
mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the \
server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. \
4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in \
order for the server to start accepting connections from the outside.\r\n";

/// Reserves a connection slot, or refuses over maxclients.
fn admit(shared: &Shared) -> bool {
    let n = shared.connections.fetch_add(1, Ordering::AcqRel);
    if n >= live::get_usize(&live::MAXCLIENTS) {
        shared.connections.fetch_sub(1, Ordering::AcqRel);
        crate::stats::add(&crate::stats::REJECTED_CONNECTIONS, 1);
        return false;
    }
    crate::stats::add(&crate::stats::TOTAL_CONNECTIONS, 1);
    true
}

/// Sockets a busy script accepted and answered, adopted as connections now (see
/// `executor::handoff`).
fn adopted<T>(unix: bool, convert: impl Fn(OwnedFd) -> std::io::Result<T>) -> Vec<T> {
    crate::executor::handoff::take(unix).into_iter().filter_map(|fd| convert(fd).ok()).collect()
}

/// After a failed accept: logs it, and waits a little when the server is out of descriptors or
/// memory, where a retry at once would fail the same way. An error of one connection (aborted
/// before it was accepted, a protocol error) says nothing of the next ones, which are accepted
/// at once: pausing for each would let one peer's failing connections starve the others (the
/// starvation of Redis's CVE-2025-48367).
async fn accept_failed(e: &std::io::Error) {
    tracing::warn!("Accepting client connection: {e}");
    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)) {
        crate::util::timer::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Accepts on a TCP listener; with `tls`, each connection does its TLS handshake first.
async fn accept_tcp(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut generation: tokio::sync::watch::Receiver<u64>,
    mine: u64,
    tls: bool,
) {
    let mut pending: Vec<TcpStream> = Vec::new();
    loop {
        let (mut stream, peer) = match pending.pop() {
            Some(stream) => match stream.peer_addr() {
                Ok(peer) => (stream, peer),
                Err(_) => continue,
            },
            None => {
                let accepted = tokio::select! {
                    r = listener.accept() => r,
                    // CONFIG SET port or bind: newer listeners took over; this one closes.
                    _ = generation.changed() => {
                        if *generation.borrow_and_update() != mine {
                            return;
                        }
                        continue;
                    }
                    _ = crate::executor::handoff::handed_over(), if !tls => {
                        pending = adopted(false, |fd| {
                            let std = std::net::TcpStream::from(fd);
                            std.set_nonblocking(true)?;
                            TcpStream::from_std(std)
                        });
                        continue;
                    }
                };
                match accepted {
                    Ok(x) => x,
                    // A retired listener (shut down by CONFIG SET port or bind): its
                    // generation change follows at once.
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
                    Err(e) => {
                        accept_failed(&e).await;
                        continue;
                    }
                }
            }
        };
        tracing::debug!("Accepted {}:{}", peer.ip(), peer.port());
        if !admit(&shared) {
            // Over TLS the refusal cannot be read before a handshake: the socket just closes.
            if !tls {
                tokio::spawn(async move {
                    let _ = stream.write_all(MAX_CLIENTS_ERR).await;
                });
            }
            continue;
        }
        let local = peer.ip().is_loopback() || is_mapped_loopback(&peer.ip());
        if tls {
            // The handshake first; protected mode then answers over TLS, as in Redis.
            configure_tcp(&stream, live::get_u64(&live::TCP_KEEPALIVE));
            tokio::spawn(serve_tls(stream, peer, local, shared.clone()));
            continue;
        }
        if !local && live::protected() {
            shared.connections.fetch_sub(1, Ordering::AcqRel);
            crate::stats::add(&crate::stats::REJECTED_CONNECTIONS, 1);
            tokio::spawn(async move {
                let _ = stream.write_all(PROTECTED_MODE_ERR).await;
            });
            continue;
        }
        configure_tcp(&stream, live::get_u64(&live::TCP_KEEPALIVE));
        let info = ConnInfo {
            addr: fmt_addr(&peer),
            laddr: stream.local_addr().map(|a| fmt_addr(&a)).unwrap_or_default(),
            fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
            unix: false,
            local,
            tls: false,
        };
        let shared = shared.clone();
        let handle = Arc::new(crate::executor::clients::ClientHandle::default());
        let registered = shared.exec.connect_now(&info, &handle).map(|id| (id, handle));
        tokio::spawn(async move {
            connection::serve(stream, info, registered, &shared).await;
            shared.connections.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

async fn accept_unix(listener: UnixListener, shared: Arc<Shared>) {
    let path = shared.config.unixsocket.clone().unwrap_or_default();
    let mut pending: Vec<UnixStream> = Vec::new();
    loop {
        let mut stream = match pending.pop() {
            Some(stream) => stream,
            None => {
                let accepted = tokio::select! {
                    r = listener.accept() => r,
                    _ = crate::executor::handoff::handed_over() => {
                        pending = adopted(true, |fd| {
                            let std = std::os::unix::net::UnixStream::from(fd);
                            std.set_nonblocking(true)?;
                            UnixStream::from_std(std)
                        });
                        continue;
                    }
                };
                match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        accept_failed(&e).await;
                        continue;
                    }
                }
            }
        };
        tracing::debug!("Accepted connection to {path}");
        if !admit(&shared) {
            tokio::spawn(async move {
                let _ = stream.write_all(MAX_CLIENTS_ERR).await;
            });
            continue;
        }
        let info = ConnInfo {
            addr: format!("{path}:0"),
            laddr: format!("{path}:0"),
            fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
            unix: true,
            local: true,
            tls: false,
        };
        let shared = shared.clone();
        let handle = Arc::new(crate::executor::clients::ClientHandle::default());
        let registered = shared.exec.connect_now(&info, &handle).map(|id| (id, handle));
        tokio::spawn(async move {
            connection::serve(stream, info, registered, &shared).await;
            shared.connections.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

/// A connection on the TLS port: registered as a client at once (as Redis creates the client
/// before the handshake: it counts in CLIENT LIST and maxclients, and `timeout` or CLIENT KILL
/// end a handshake that never completes), then the handshake, then the usual connection task.
/// A failed handshake (a plain-text client, an unknown certificate) closes the socket and is
/// logged as Redis logs it.
async fn serve_tls(stream: TcpStream, peer: SocketAddr, local: bool, shared: Arc<Shared>) {
    let info = ConnInfo {
        addr: fmt_addr(&peer),
        laddr: stream.local_addr().map(|a| fmt_addr(&a)).unwrap_or_default(),
        fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
        unix: false,
        local,
        tls: true,
    };
    let handle = Arc::new(crate::executor::clients::ClientHandle::default());
    let registered = shared.exec.connect_now(&info, &handle).map(|id| (id, handle.clone()));
    let accepted = match super::tls::acceptor() {
        Some(acceptor) => {
            let killed = std::future::poll_fn(|cx| loop {
                match handle.killed.poll_take(cx) {
                    std::task::Poll::Ready(()) if handle.close_requested() => break std::task::Poll::Ready(()),
                    std::task::Poll::Ready(()) => continue,
                    std::task::Poll::Pending => break std::task::Poll::Pending,
                }
            });
            let handshake = async {
                if !super::tls::starts_handshake(&stream).await {
                    return Err("wrong version number (not a TLS handshake)".to_string());
                }
                acceptor.accept(stream).await.map_err(|e| e.to_string())
            };
            tokio::select! {
                r = handshake => r,
                _ = killed => Err("the client was closed during the handshake".into()),
            }
        }
        None => Err("TLS is not configured".into()),
    };
    match accepted {
        Ok(mut stream) => {
            stream.get_mut().1.set_buffer_limit(Some(super::tls::SEND_BUFFER_LIMIT));
            if !local && live::protected() {
                crate::stats::add(&crate::stats::REJECTED_CONNECTIONS, 1);
                let _ = stream.write_all(PROTECTED_MODE_ERR).await;
                let _ = stream.shutdown().await;
                if let Some((id, _)) = registered {
                    shared.exec.disconnect(id);
                }
            } else {
                let shared_stream = Arc::new(std::sync::Mutex::new(stream));
                if let Some((id, _)) = &registered {
                    crate::executor::handoff::register_tls(*id, shared_stream.clone());
                }
                let id = registered.as_ref().map(|(id, _)| *id);
                connection::serve(super::tls::SharedTls(shared_stream), info, registered, &shared).await;
                if let Some(id) = id {
                    crate::executor::handoff::unregister_tls(id);
                }
            }
        }
        Err(e) => {
            tracing::warn!("Error accepting a client connection: {e} (addr={} laddr={})", info.addr, info.laddr);
            if let Some((id, _)) = registered {
                shared.exec.disconnect(id);
            }
        }
    }
    shared.connections.fetch_sub(1, Ordering::AcqRel);
}

fn configure_tcp(stream: &TcpStream, keepalive_secs: u64) {
    let _ = stream.set_nodelay(true);
    if keepalive_secs > 0 {
        let sock = socket2::SockRef::from(stream);
        let ka = socket2::TcpKeepalive::new()
            .with_time(std::time::Duration::from_secs(keepalive_secs))
            .with_interval(std::time::Duration::from_secs((keepalive_secs / 3).max(1)))
            .with_retries(3);
        let _ = sock.set_tcp_keepalive(&ka);
    }
}

fn is_mapped_loopback(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        IpAddr::V4(_) => false,
    }
}

/// `ip:port` as Redis prints it (no brackets around IPv6).
pub fn fmt_addr(a: &SocketAddr) -> String {
    format!("{}:{}", a.ip(), a.port())
}
