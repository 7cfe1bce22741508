//! Typed server configuration with Redis 7.0's defaults, and the redis-server command line.
//! (Minimal bootstrap version: to be completed with every directive, CONFIG GET/SET descriptors,
//! REWRITE and Redis's FATAL CONFIG FILE ERROR reporting.)

#[derive(Debug, Clone)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub protected_mode: bool,
    pub tcp_backlog: i32,
    pub unixsocket: Option<String>,
    pub unixsocketperm: u32,
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub daemonize: bool,
    pub pidfile: Option<String>,
    pub loglevel: String,
    pub logfile: String,
    pub databases: usize,
    pub requirepass: Option<Vec<u8>>,
    pub maxclients: usize,
    pub save: Vec<(u64, u64)>,
    pub appendonly: bool,
    pub dir: String,
    pub dbfilename: String,
    pub io_threads: usize,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: usize,
    pub hz: u32,
    pub proto_max_bulk_len: i64,
    pub client_query_buffer_limit: usize,
    /// The config file given on the command line, for CONFIG REWRITE and INFO.
    pub config_file: Option<String>,
    pub list_max_listpack_size: i64,
    pub list_compress_depth: i64,
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: vec!["*".into(), "-::*".into()],
            port: 6379,
            protected_mode: true,
            tcp_backlog: 511,
            unixsocket: None,
            unixsocketperm: 0,
            timeout: 0,
            tcp_keepalive: 300,
            daemonize: false,
            pidfile: None,
            loglevel: "notice".into(),
            logfile: String::new(),
            databases: 16,
            requirepass: None,
            maxclients: 10000,
            save: vec![(3600, 1), (300, 100), (60, 10000)],
            appendonly: false,
            dir: ".".into(),
            dbfilename: "dump.rdb".into(),
            io_threads: 1,
            slowlog_log_slower_than: 10000,
            slowlog_max_len: 128,
            hz: 10,
            proto_max_bulk_len: 512 * 1024 * 1024,
            client_query_buffer_limit: 1024 * 1024 * 1024,
            config_file: None,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            hash_max_listpack_entries: 128,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
        }
    }
}

impl Config {
    /// Parses redis-server's argv (without the program name).
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut cfg = Config::default();
        let mut i = 0;
        while i < args.len() {
            let name = args[i].trim_start_matches("--").to_lowercase();
            let mut vals = Vec::new();
            i += 1;
            while i < args.len() && !args[i].starts_with("--") {
                vals.push(args[i].clone());
                i += 1;
            }
            cfg.set(&name, &vals)?;
        }
        Ok(cfg)
    }

    /// Applies one directive.
    pub fn set(&mut self, name: &str, vals: &[String]) -> Result<(), String> {
        let one = || vals.first().cloned().unwrap_or_default();
        match name {
            "port" => self.port = one().parse().map_err(|_| "Invalid port")?,
            "bind" => self.bind = vals.to_vec(),
            "save" => self.save = Vec::new(),
            "appendonly" => self.appendonly = one() == "yes",
            "dir" => self.dir = one(),
            "io-threads" => self.io_threads = one().parse().map_err(|_| "Invalid io-threads")?,
            "requirepass" => self.requirepass = Some(one().into_bytes()).filter(|p| !p.is_empty()),
            "protected-mode" => self.protected_mode = one() == "yes",
            _ => {}
        }
        Ok(())
    }
}

/// Settings the network side reads on every connection or request, kept in atomics so CONFIG SET
/// (on the executor) reaches the connection tasks (on any thread) without a lock.
pub mod live {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    pub static MAXCLIENTS: AtomicUsize = AtomicUsize::new(10000);
    pub static PROTO_MAX_BULK_LEN: AtomicU64 = AtomicU64::new(512 * 1024 * 1024);
    pub static CLIENT_QUERY_BUFFER_LIMIT: AtomicU64 = AtomicU64::new(1024 * 1024 * 1024);
    pub static TCP_KEEPALIVE: AtomicU64 = AtomicU64::new(300);
    /// protected-mode is on and the default user has no password: non-local clients are refused.
    pub static PROTECTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

    /// Publishes the config's network-side values.
    pub fn publish(cfg: &super::Config) {
        MAXCLIENTS.store(cfg.maxclients, Ordering::Relaxed);
        PROTO_MAX_BULK_LEN.store(cfg.proto_max_bulk_len as u64, Ordering::Relaxed);
        CLIENT_QUERY_BUFFER_LIMIT.store(cfg.client_query_buffer_limit as u64, Ordering::Relaxed);
        TCP_KEEPALIVE.store(cfg.tcp_keepalive, Ordering::Relaxed);
        PROTECTED.store(cfg.protected_mode && cfg.requirepass.is_none(), Ordering::Relaxed);
    }

    pub fn get_usize(v: &AtomicUsize) -> usize {
        v.load(Ordering::Relaxed)
    }

    pub fn protected() -> bool {
        PROTECTED.load(Ordering::Relaxed)
    }

    pub fn get_u64(v: &AtomicU64) -> u64 {
        v.load(Ordering::Relaxed)
    }
}
