//! The replica side's link to its master: one task for the server's life. While REPLICAOF names
//! a master it connects, does Redis 7.0's handshake (PING, AUTH, REPLCONF listening-port /
//! ip-address / capa eof psync2, PSYNC <replid> <offset>), takes the snapshot of a full sync
//! into a temp file that becomes the dump file, has it loaded off the executor and swapped in,
//! then hands the stream to the executor as the master client, batch by batch, and sends
//! `REPLCONF ACK <offset>` every second. A link that fails or goes silent for repl-timeout is
//! retried a second later; REPLICAOF to another master (or NO ONE) abandons it. What the
//! executor keeps of all this is `executor::replication`. A master that FAILOVER turned into
//! its replica's replica adds `FAILOVER` to its PSYNC, and reports the answer, which decides
//! the failover.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::tls::ClientStream;
use super::Shared;
use crate::executor::clients::{ClientHandle, ConnInfo};
use crate::executor::replication::{self, LinkShared, LinkState, LinkTarget};
use crate::executor::{BatchEnd, Cmd};
use crate::resp::Parser;
use crate::util::clock::unix_ms;

/// Why a link attempt ended.
type LinkResult = Result<(), String>;

/// Runs for the server's life.
pub async fn run(shared: Arc<Shared>) {
    let Some(link) = shared.exec.run(|e| e.state.repl.link.clone()).await else { return };
    loop {
        // The dump loading at startup may hold the history to continue: wait for it.
        let loading = |e: &mut crate::executor::Executor| {
            e.state.poll_loading();
            e.state.loading.is_some()
        };
        while shared.exec.run(loading).await == Some(true) {
            crate::util::timer::sleep(Duration::from_millis(50)).await;
        }
        let Some(target) = shared.exec.run(|e| replication::link_target(&e.state)).await else { return };
        let Some(target) = target else {
            link.changed.notified().await;
            continue;
        };
        if let Err(e) = follow(&shared, &link, &target).await {
            // A link that REPLICAOF (or a failover) abandoned ends quietly, as in Redis.
            if current(&link, &target).is_ok() {
                tracing::warn!("Master link to {}:{}: {e}", target.host, target.port);
            }
        }
        let epoch = target.epoch;
        let _ = shared.exec.run(move |e| replication::link_state(&mut e.state, epoch, LinkState::Connect)).await;
        // A link that was streaming is tried again at once, as Redis does (a second's wait may
        // cost the backlog the history to continue); a failed attempt after a second, or at
        // once for a new master.
        if link.streamed.swap(false, Ordering::AcqRel) && current(&link, &target).is_ok() {
            tracing::info!("Reconnecting to MASTER {}:{}", target.host, target.port);
            continue;
        }
        tokio::select! {
            _ = link.changed.notified() => {}
            _ = crate::util::timer::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Whether REPLICAOF still names the master this attempt is for.
fn current(link: &LinkShared, target: &LinkTarget) -> LinkResult {
    if link.epoch.load(Ordering::Acquire) == target.epoch {
        Ok(())
    } else {
        Err("the master changed".into())
    }
}

/// Returns once REPLICAOF no longer names this attempt's master. The wake-up it took is handed
/// on, so the link task's own wait for a new master does not miss it.
async fn abandoned(link: &LinkShared, target: &LinkTarget) -> String {
    loop {
        if let Err(why) = current(link, target) {
            link.changed.notify_one();
            return why;
        }
        link.changed.notified().await;
    }
}

/// The stream with the bytes read but not consumed yet.
struct Conn {
    stream: ClientStream,
    buf: BytesMut,
    timeout: Duration,
}

impl Conn {
    async fn fill(&mut self) -> LinkResult {
        self.buf.reserve(16 * 1024);
        match crate::util::timer::timeout(self.timeout, self.stream.read_buf(&mut self.buf)).await {
            Err(_) => Err("Timeout connecting to the MASTER...".into()),
            Ok(Ok(0)) => Err("the master closed the connection".into()),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(n)) => {
                crate::stats::add(&crate::stats::NET_REPL_INPUT_BYTES, n as u64);
                Ok(())
            }
        }
    }

    /// One reply line, without its CRLF; the lone newlines a master sends to keep the link
    /// alive while it prepares the snapshot are skipped.
    async fn line(&mut self) -> Result<String, String> {
        loop {
            while self.buf.first() == Some(&b'\n') {
                let _ = self.buf.split_to(1);
            }
            if let Some(at) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(at + 1);
                let text = String::from_utf8_lossy(&line[..at]).trim_end_matches('\r').to_string();
                return Ok(text);
            }
            if self.buf.len() > 64 * 1024 {
                return Err("Protocol error: reply line too long".into());
            }
            self.fill().await?;
        }
    }

    async fn send(&mut self, argv: &[&[u8]]) -> LinkResult {
        let mut out = Vec::new();
        crate::aof::encode_command(&mut out, argv);
        self.stream.write_all(&out).await.map_err(|e| e.to_string())?;
        self.stream.flush().await.map_err(|e| e.to_string())
    }

    async fn command(&mut self, argv: &[&[u8]]) -> Result<String, String> {
        self.send(argv).await?;
        self.line().await
    }
}

/// Connects to `addr` (host:port), from `source` when bind-source-addr names an address.
async fn connect(addr: &str, source: Option<&str>) -> std::io::Result<TcpStream> {
    use std::io::{Error, ErrorKind};
    let Some(source) = source else { return TcpStream::connect(addr).await };
    let ip: std::net::IpAddr =
        source.parse().map_err(|_| Error::new(ErrorKind::InvalidInput, format!("bad bind-source-addr {source}")))?;
    let mut last = Error::new(ErrorKind::AddrNotAvailable, "no address of the master's family");
    for to in tokio::net::lookup_host(addr).await?.filter(|a| a.is_ipv4() == ip.is_ipv4()) {
        let socket = if to.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.bind(std::net::SocketAddr::new(ip, 0))?;
        match socket.connect(to).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn follow(shared: &Arc<Shared>, link: &Arc<LinkShared>, target: &LinkTarget) -> LinkResult {
    let timeout = Duration::from_secs(target.timeout_s);
    let addr = format!("{}:{}", target.host, target.port);
    let source = target.config.other.get("bind-source-addr").filter(|s| !s.is_empty());
    let stream = match crate::util::timer::timeout(timeout, connect(&addr, source.map(String::as_str))).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("Error condition on socket for SYNC: {e}")),
        Err(_) => return Err("Timeout connecting to the MASTER...".into()),
    };
    let _ = stream.set_nodelay(true);
    tracing::info!("MASTER <-> REPLICA sync started");
    let epoch = target.epoch;
    // tls-replication: the TLS handshake happens while Redis's link is in its CONNECTING state.
    let tls = crate::config::live::TLS_REPLICATION.load(Ordering::Relaxed);
    let stream = match crate::util::timer::timeout(timeout, ClientStream::start(stream, &target.host, tls)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("Error condition on socket for SYNC: {e}")),
        Err(_) => return Err("Timeout connecting to the MASTER...".into()),
    };
    step(shared, epoch, LinkState::Handshake).await?;
    let mut conn = Conn { stream, buf: BytesMut::new(), timeout };
    handshake(&mut conn, target).await?;
    let next = target.next_offset.to_string();
    if target.replid == "?" {
        tracing::info!("Partial resynchronization not possible (no cached master)");
    } else {
        tracing::info!("Trying a partial resynchronization (request {}:{next}).", target.replid);
    }
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", target.replid.as_bytes(), next.as_bytes()];
    if target.failover {
        // This master is handing over to its replica: the PSYNC asks it to take over.
        psync.push(b"FAILOVER");
    }
    if let Err(e) = conn.send(&psync).await {
        if target.failover {
            failover_answered(shared, epoch, false, "Write error to failover target").await;
        }
        return Err(format!("Sending command to master in replication handshake: {e}"));
    }
    let reply = match conn.line().await {
        Ok(line) => line,
        Err(e) if target.failover => format!("-Reading from master: {e}"),
        Err(e) => return Err(e),
    };
    link.last_io_ms.store(unix_ms(), Ordering::Relaxed);
    if target.failover {
        let accepted = reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE");
        if !accepted {
            if reply.starts_with("-NOMASTERLINK") || reply.starts_with("-LOADING") {
                tracing::info!("Master is currently unable to PSYNC but should be in the future: {reply}");
            } else if reply.starts_with("-ERR") {
                tracing::info!("Master does not support PSYNC or is in error state (reply: {reply})");
            } else {
                tracing::warn!("Unexpected reply to PSYNC from master: {reply}");
            }
        }
        if !failover_answered(shared, epoch, accepted, "Failover target rejected psync request").await {
            return Err(format!("Unexpected reply to PSYNC from master: {reply}"));
        }
    }
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC") {
        let mut words = rest.split_whitespace();
        let (Some(replid), Some(offset)) = (words.next(), words.next().and_then(|o| o.parse::<i64>().ok())) else {
            return Err(format!("Master replied with wrong +FULLRESYNC syntax: {reply}"));
        };
        tracing::info!("Full resync from master: {replid}:{offset}");
        step(shared, epoch, LinkState::Transfer).await?;
        // repl-diskless-load swapdb keeps serving the old data while the snapshot arrives when
        // it continues the same history (async loading), else answers -LOADING meanwhile; the
        // old data stays until the new is loaded, so a failed transfer leaves it in place.
        let mode = target.config.other.get("repl-diskless-load").cloned().unwrap_or_default();
        let same_history = replid == target.replid;
        let diskless = mode == "swapdb" || (mode == "on-empty-db" && target.dataset_empty);
        if diskless {
            let how = Some(mode == "swapdb" && same_history);
            shared.exec.run(move |e| replication::set_sync_loading(&mut e.state, epoch, how)).await;
        }
        // REPLICAOF elsewhere (or NO ONE) ends the transfer at once, closing the connection,
        // as Redis's cancelReplicationHandshake: the master may be waiting on this replica
        // alone to stop its snapshot child.
        let loaded = if diskless {
            tokio::select! {
                r = load_while_receiving(&mut conn, link, target) => r?,
                why = abandoned(link, target) => return Err(why),
            }
        } else {
            let path = tokio::select! {
                r = receive_snapshot(&mut conn, link, None) => r?.unwrap_or_default(),
                why = abandoned(link, target) => return Err(why),
            };
            current(link, target)?;
            // Redis loads on its main thread and answers -LOADING only once it has read
            // loading-process-events-interval-bytes (2 MB by default) and serves events: a smaller snapshot
            // never shows LOADING there. Such a load takes milliseconds; the old data stays
            // served meanwhile, as if those commands had run just before the sync.
            let interval = target
                .config
                .other
                .get("loading-process-events-interval-bytes")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(2 * 1024 * 1024);
            let small = std::fs::metadata(&path).is_ok_and(|m| m.len() < interval);
            if !small {
                shared.exec.run(move |e| replication::set_sync_loading(&mut e.state, epoch, Some(false))).await;
            }
            load_snapshot(path, target).await?
        };
        current(link, target)?;
        let replid = replid.to_string();
        let swapped =
            shared.exec.run(move |e| replication::full_sync_loaded(&mut e.state, epoch, loaded, &replid, offset)).await;
        if swapped != Some(true) {
            return Err("the master changed".into());
        }
        tracing::info!("MASTER <-> REPLICA sync: Finished with success");
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new_id = rest.split_whitespace().next().map(str::to_string);
        tracing::info!("Successful partial resynchronization with master.");
        let ok = shared.exec.run(move |e| replication::continued(&mut e.state, epoch, new_id.as_deref())).await;
        if ok != Some(true) {
            return Err("the master changed".into());
        }
    } else {
        return Err(format!("Unexpected reply to PSYNC from master: {reply}"));
    }
    stream_commands(shared, link, target, conn).await
}

/// Tells the executor how the failover target answered; false when the failover (or this
/// link) is over: the target refused, and this server is a master again.
async fn failover_answered(shared: &Arc<Shared>, epoch: i64, accepted: bool, why: &'static str) -> bool {
    let answered = move |e: &mut crate::executor::Executor| {
        replication::failover_psync_answered(&mut e.state, epoch, accepted, why)
    };
    shared.exec.run(answered).await == Some(true)
}

async fn step(shared: &Arc<Shared>, epoch: i64, state: LinkState) -> LinkResult {
    match shared.exec.run(move |e| replication::link_state(&mut e.state, epoch, state)).await {
        Some(true) => Ok(()),
        _ => Err("the master changed".into()),
    }
}

/// PING, AUTH, REPLCONF, as replicationSyncHandshake sends them.
async fn handshake(conn: &mut Conn, target: &LinkTarget) -> LinkResult {
    let pong = conn.command(&[b"PING"]).await?;
    // An authentication error is fine here: AUTH comes next.
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(format!("Error reply to PING from master: '{pong}'"));
    }
    if let Some(pass) = &target.masterauth {
        let reply = match &target.masteruser {
            Some(user) => conn.command(&[b"AUTH", user.as_bytes(), pass.as_bytes()]).await?,
            None => conn.command(&[b"AUTH", pass.as_bytes()]).await?,
        };
        if reply.starts_with('-') {
            return Err(format!("Unable to AUTH to MASTER: {reply}"));
        }
    }
    let port = target.announce_port.to_string();
    let reply = conn.command(&[b"REPLCONF", b"listening-port", port.as_bytes()]).await?;
    if reply.starts_with('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF listening-port: {reply}");
    }
    if let Some(ip) = &target.announce_ip {
        let reply = conn.command(&[b"REPLCONF", b"ip-address", ip.as_bytes()]).await?;
        if reply.starts_with('-') {
            tracing::info!("(Non critical) Master does not understand REPLCONF ip-address: {reply}");
        }
    }
    let reply = conn.command(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]).await?;
    if reply.starts_with('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF capa: {reply}");
    }
    Ok(())
}

/// Where the snapshot's bytes go: a temp file (disk load) or the pipe a loader reads from
/// (diskless load).
enum Dest {
    File(std::fs::File),
    Pipe(tokio::net::unix::pipe::Sender),
}

impl Dest {
    async fn write(&mut self, bytes: &[u8]) -> LinkResult {
        match self {
            // Plain writes: they land in the page cache, and one fsync at the end makes them
            // durable.
            Dest::File(f) => f.write_all(bytes).map_err(|e| e.to_string()),
            Dest::Pipe(p) => p.write_all(bytes).await.map_err(|e| e.to_string()),
        }
    }
}

/// Receives the snapshot (`$<len>` or `$EOF:<mark>` framing): into `pipe` when given, else
/// into a temp file in the working directory, whose path it returns. Bytes after it stay in
/// the buffer: they are the stream.
async fn receive_snapshot(
    conn: &mut Conn,
    link: &LinkShared,
    pipe: Option<tokio::net::unix::pipe::Sender>,
) -> Result<Option<std::path::PathBuf>, String> {
    let header = conn.line().await?;
    if let Some(err) = header.strip_prefix('-') {
        return Err(format!("MASTER aborted replication with an error: {err}"));
    }
    let Some(spec) = header.strip_prefix('$') else {
        return Err(format!("Bad protocol from MASTER, the first byte is not '$' (we received '{header}')"));
    };
    let mark = spec.strip_prefix("EOF:").map(|m| m.as_bytes().to_vec());
    let size = match &mark {
        Some(m) if m.len() == 40 => -1,
        Some(_) => return Err("Bad EOF mark from MASTER".into()),
        None => spec.parse::<i64>().map_err(|_| format!("Bad snapshot length from MASTER: {spec}"))?,
    };
    let what = if size < 0 { "streamed RDB".to_string() } else { format!("{size} bytes") };
    link.transfer_size.store(size, Ordering::Relaxed);
    link.transfer_read.store(0, Ordering::Relaxed);
    let (mut dest, path) = match pipe {
        Some(p) => {
            tracing::info!("MASTER <-> REPLICA sync: receiving {what} from master to memory");
            (Dest::Pipe(p), None)
        }
        None => {
            tracing::info!("MASTER <-> REPLICA sync: receiving {what} from master to disk");
            let path = std::path::PathBuf::from(format!("temp-{}.{}.rdb", unix_ms() / 1000, std::process::id()));
            let file = std::fs::File::create(&path).map_err(|e| format!("Opening the temp file: {e}"))?;
            (Dest::File(file), Some(path))
        }
    };
    let mut read: i64 = 0;
    let result: LinkResult = async {
        match mark {
            None => {
                while read < size {
                    if conn.buf.is_empty() {
                        conn.fill().await?;
                    }
                    let take = conn.buf.len().min((size - read) as usize);
                    let chunk = conn.buf.split_to(take);
                    dest.write(&chunk).await?;
                    read += take as i64;
                    link.transfer_read.store(read, Ordering::Relaxed);
                    link.last_io_ms.store(unix_ms(), Ordering::Relaxed);
                }
            }
            Some(mark) => loop {
                // Everything but the last 40 bytes is surely data; the mark ends the payload.
                if let Some(at) = find(&conn.buf, &mark) {
                    let chunk = conn.buf.split_to(at);
                    let _ = conn.buf.split_to(mark.len());
                    dest.write(&chunk).await?;
                    read += chunk.len() as i64;
                    link.transfer_read.store(read, Ordering::Relaxed);
                    break;
                }
                if conn.buf.len() > mark.len() {
                    let chunk = conn.buf.split_to(conn.buf.len() - mark.len());
                    dest.write(&chunk).await?;
                    read += chunk.len() as i64;
                    link.transfer_read.store(read, Ordering::Relaxed);
                }
                conn.fill().await?;
                link.last_io_ms.store(unix_ms(), Ordering::Relaxed);
            },
        }
        match &dest {
            Dest::File(f) => f.sync_all().map_err(|e| e.to_string()),
            Dest::Pipe(_) => Ok(()),
        }
    }
    .await;
    if let Err(e) = result {
        if let Some(p) = &path {
            let _ = std::fs::remove_file(p);
        }
        return Err(e);
    }
    if path.is_some() {
        tracing::info!("MASTER <-> REPLICA sync: Flushing old data");
    }
    Ok(path)
}

/// Diskless load: the snapshot is parsed as it arrives, on a blocking thread reading a pipe the
/// link fills. A transfer cut short ends the loader's input early: the load fails and the old
/// data stays.
async fn load_while_receiving(
    conn: &mut Conn,
    link: &LinkShared,
    target: &LinkTarget,
) -> Result<crate::rdb::load::Loaded, String> {
    let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    let tx = tokio::net::unix::pipe::Sender::from_owned_fd(wr).map_err(|e| e.to_string())?;
    let cfg = target.config.clone();
    tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let loader = tokio::task::spawn_blocking(move || {
        let src = std::io::BufReader::with_capacity(1 << 16, std::fs::File::from(rd));
        crate::rdb::load::load_stream_for_replica(src, &cfg)
    });
    let received = receive_snapshot(conn, link, Some(tx)).await;
    let loaded = loader.await.map_err(|e| e.to_string())?;
    match (received, loaded) {
        (Ok(_), Ok(l)) => Ok(l),
        (_, Err(e)) => {
            tracing::warn!("Internal error in RDB reading offset {}, function at rdb.c:0 -> {}", e.offset, e.reason);
            Err("Failed trying to load the MASTER synchronization DB from socket, check server logs.".into())
        }
        (Err(e), Ok(_)) => Err(e),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Makes the temp file the dump file (as Redis renames it), then loads it on a blocking thread.
async fn load_snapshot(tmp: std::path::PathBuf, target: &LinkTarget) -> Result<crate::rdb::load::Loaded, String> {
    let cfg = target.config.clone();
    tokio::task::spawn_blocking(move || {
        let dump = std::path::PathBuf::from(&cfg.dbfilename);
        let path = match std::fs::rename(&tmp, &dump) {
            Ok(()) => dump,
            Err(e) => {
                tracing::warn!("Failed trying to rename the temp DB into {}: {e}", cfg.dbfilename);
                tmp.clone()
            }
        };
        tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
        let loaded = crate::rdb::load::load_for_replica(&path, &cfg)
            .map_err(|e| format!("Failed trying to load the MASTER synchronization DB from disk: {e}"));
        if path == tmp {
            let _ = std::fs::remove_file(&tmp);
        } else if replication::rdb_del_sync_files(&cfg) {
            tracing::info!("Removing the RDB file obtained from the master. This replica has persistence disabled");
            let _ = std::fs::remove_file(&path);
        }
        loaded
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Follows the stream: every read is one batch for the master client; its replies are dropped,
/// what it pushes (REPLCONF ACK answers to GETACK) goes to the master, and an ACK goes every
/// second.
async fn stream_commands(shared: &Arc<Shared>, link: &LinkShared, target: &LinkTarget, conn: Conn) -> LinkResult {
    let Conn { mut stream, buf: mut rbuf, timeout } = conn;
    let handle = Arc::new(ClientHandle::default());
    let (laddr, addr) = (
        stream.tcp().local_addr().map(|a| a.to_string()).unwrap_or_default(),
        stream.tcp().peer_addr().map(|a| a.to_string()).unwrap_or_default(),
    );
    let info = ConnInfo { addr, laddr, fd: -1, unix: false, local: false, tls: false };
    let Some(id) = shared.exec.connect(info, handle.clone()).await else { return Err("the server is stopping".into()) };
    let epoch = target.epoch;
    let ok = shared.exec.run(move |e| replication::master_connected(&mut e.state, epoch, id)).await;
    let result = if ok == Some(true) {
        link.streamed.store(true, Ordering::Release);
        apply_stream(shared, link, &handle, id, &mut stream, &mut rbuf, timeout).await
    } else {
        Err("the master changed".into())
    };
    shared.exec.disconnect(id);
    result
}

async fn apply_stream(
    shared: &Arc<Shared>,
    link: &LinkShared,
    handle: &Arc<ClientHandle>,
    id: u64,
    stream: &mut ClientStream,
    rbuf: &mut BytesMut,
    timeout: Duration,
) -> LinkResult {
    let mut parser = Parser::new(i64::MAX);
    let mut cmds: Vec<Cmd> = Vec::new();
    let mut out = Vec::new();
    let mut pushed = Vec::new();
    let mut last_spec = None;
    let mut ack = crate::util::timer::interval(Duration::from_secs(1));
    let mut last_io = std::time::Instant::now();
    send_ack(stream, link).await?;
    loop {
        if !rbuf.is_empty() {
            cmds.clear();
            let parsed = parser.parse_into(rbuf, |argv| {
                cmds.push(Cmd { spec: crate::commands::lookup_cached(&argv[0], &mut last_spec), argv })
            });
            if !cmds.is_empty() {
                out.clear();
                if shared.exec.batch(id, &mut cmds, &mut out).await == BatchEnd::Shutdown {
                    shared.shutdown.notify_one();
                }
            }
            if let Some(err) = parsed.error {
                return Err(format!("Protocol error from MASTER: {}", err.reply_text()));
            }
            if parsed.stopped_early {
                continue;
            }
        }
        handle.take_output_into(&mut pushed);
        if !pushed.is_empty() {
            stream.write_all(&pushed).await.map_err(|e| e.to_string())?;
            stream.flush().await.map_err(|e| e.to_string())?;
            crate::stats::add_output(false, pushed.len() as u64);
            crate::stats::add(&crate::stats::TOTAL_WRITES, 1);
        }
        if handle.close_requested() {
            return Err("the master client was closed".into());
        }
        // A big value from the master grew the buffer to its size: once it is applied, keep
        // only what is left of the stream (Redis trims the master client's pending query
        // buffer), or the replica holds that memory for good (unit/pendingquerybuf).
        if rbuf.capacity() > 1 << 20 && rbuf.len() < 64 * 1024 {
            let mut smaller = BytesMut::with_capacity(rbuf.len() + 16 * 1024);
            smaller.extend_from_slice(rbuf);
            *rbuf = smaller;
        }
        // The rest of an argument is reserved at once, as Redis makes room for a bulk (bounded
        // by proto-max-bulk-len): a buffer doubled on the way would hold up to twice its size.
        // A big one is read into its own allocation instead (`Parser::big_bulk_room`).
        let want = match parser.pending_bulk_end() {
            Some(end) if end > rbuf.len() => end - rbuf.len(),
            _ => 16 * 1024,
        };
        let limit = crate::config::live::get_u64(&crate::config::live::PROTO_MAX_BULK_LEN) as usize;
        rbuf.reserve(want.clamp(16 * 1024, limit.max(16 * 1024)));
        tokio::select! {
            r = stream.read_buf(match parser.big_bulk_room() { Some(big) => big, None => &mut *rbuf }) => {
                // Redis counts its master client's reads as any client's.
                crate::stats::add(&crate::stats::TOTAL_READS, 1);
                match r {
                    Ok(0) => return Err("the master closed the connection".into()),
                    Err(e) => return Err(e.to_string()),
                    Ok(n) => {
                        crate::stats::add(&crate::stats::NET_REPL_INPUT_BYTES, n as u64);
                        last_io = std::time::Instant::now();
                        link.last_io_ms.store(unix_ms(), Ordering::Relaxed);
                    }
                }
            }
            _ = handle.notify.wait() => {}
            _ = ack.tick() => {
                if last_io.elapsed() > timeout {
                    return Err("MASTER timeout: no data nor PING received...".into());
                }
                send_ack(stream, link).await?;
            }
        }
    }
}

async fn send_ack(stream: &mut ClientStream, link: &LinkShared) -> LinkResult {
    let offset = link.applied.load(Ordering::Relaxed).to_string();
    let mut out = Vec::new();
    crate::aof::encode_command(&mut out, &[&b"REPLCONF"[..], b"ACK", offset.as_bytes()]);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())?;
    // Output to a client (the master), as Redis counts its master client's writes.
    crate::stats::add_output(false, out.len() as u64);
    crate::stats::add(&crate::stats::TOTAL_WRITES, 1);
    Ok(())
}
