//! MIGRATE's socket cache (Redis's migrate_cached_sockets): open connections to MIGRATE
//! targets, kept by the executor between commands and closed by the cron when idle.

use std::collections::HashMap;
use std::io::BufReader;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

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
    pub reader: BufReader<TcpStream>,
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

    /// The cached socket for `target`, or a new one connected within `timeout`. Err(true) when
    /// connecting timed out, Err(false) when it failed otherwise (refused, unknown host).
    pub fn get(
        &mut self,
        target: &str,
        host: &str,
        port: u16,
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
            let addr = (host, port).to_socket_addrs().ok().and_then(|mut a| a.next()).ok_or(false)?;
            let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| is_timeout(&e))?;
            let _ = stream.set_nodelay(true);
            self.by_target.insert(
                target.to_string(),
                Cached { reader: BufReader::new(stream), last_db: None, last_use_ms: now_ms },
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
