//! MIGRATE's socket cache (Redis's migrate_cached_sockets): open connections to MIGRATE
//! targets, kept by the executor between commands and closed by the cron when idle.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The TLS client configuration MIGRATE uses under `tls-cluster yes` (Redis connects to the
/// target as a cluster link does), installed by the TLS module whenever it is (re)configured.
static TLS_CLIENT: RwLock<Option<Arc<rustls::ClientConfig>>> = RwLock::new(None);

pub fn set_tls_client(config: Arc<rustls::ClientConfig>) {
    *TLS_CLIENT.write().unwrap_or_else(|p| p.into_inner()) = Some(config);
}

/// A connection to a MIGRATE target: plain, or TLS when tls-cluster is on.
#[derive(Debug)]
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    /// The socket under it, for its timeouts.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// How long an unused cached socket stays open (Redis's MIGRATE_SOCKET_CACHE_TTL), seconds.
const CACHE_TTL_MS: i64 = 10_000;

/// At most this many targets keep a socket (Redis's MIGRATE_SOCKET_CACHE_ITEMS).
const CACHE_ITEMS: usize = 64;

/// Open connections to MIGRATE targets, by `host:port`.
#[derive(Debug, Default)]
pub struct MigrateSockets {
    pub by_target: HashMap<String, Cached>,
}

#[derive(Debug)]
pub struct Cached {
    pub reader: BufReader<Conn>,
    /// The database selected on this connection; None forces a SELECT.
    pub last_db: Option<i64>,
    pub last_use_ms: i64,
}

impl MigrateSockets {
    /// INFO migrate_cached_sockets.
    pub fn len(&self) -> usize {
        self.by_target.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_target.is_empty()
    }

    /// Closes the sockets unused for longer than the cache TTL (cron).
    pub fn close_idle(&mut self, now_ms: i64) {
        self.by_target.retain(|_, c| now_ms - c.last_use_ms <= CACHE_TTL_MS);
    }

    pub fn close(&mut self, target: &str) {
        self.by_target.remove(target);
    }

    /// The cached socket for `target`, or a new one connected within `timeout` (over TLS when
    /// `tls`; the handshake runs on the first write, bounded by the socket's timeouts). Err(true)
    /// when connecting timed out, Err(false) when it failed otherwise (refused, unknown host).
    pub fn get(
        &mut self,
        target: &str,
        host: &str,
        port: u16,
        tls: bool,
        timeout: Duration,
        now_ms: i64,
    ) -> Result<&mut Cached, bool> {
        if !self.by_target.contains_key(target) {
            if self.by_target.len() >= CACHE_ITEMS {
                // Full: one entry goes, whichever the map yields first (Redis picks at random).
                if let Some(k) = self.by_target.keys().next().cloned() {
                    self.by_target.remove(&k);
                }
            }
            // An address that does not resolve fails the connect itself, as in Redis (anet's
            // getaddrinfo); a connection refused later shows at the write.
            let addr = (host, port).to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or(true)?;
            let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| is_timeout(&e))?;
            let _ = stream.set_nodelay(true);
            let conn = if tls {
                let config = TLS_CLIENT.read().unwrap_or_else(|p| p.into_inner()).clone().ok_or(false)?;
                let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|_| false)?;
                let session = rustls::ClientConnection::new(config, name).map_err(|_| false)?;
                Conn::Tls(Box::new(rustls::StreamOwned::new(session, stream)))
            } else {
                Conn::Plain(stream)
            };
            self.by_target.insert(
                target.to_string(),
                Cached { reader: BufReader::new(conn), last_db: None, last_use_ms: now_ms },
            );
        }
        let cached = self.by_target.get_mut(target).ok_or(false)?;
        cached.last_use_ms = now_ms;
        Ok(cached)
    }
}

pub fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}
