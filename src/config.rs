//! Typed server configuration with Redis 7.0's defaults: the directive table (every name Redis
//! 7.0.15 knows, its type, bounds, flags and default), value validation with Redis's messages,
//! redis.conf loading (includes, FATAL CONFIG FILE ERROR reports), the redis-server command line,
//! and CONFIG GET/SET/REWRITE's view of the values.
//!
//! Directives ferrodis acts on live in typed `Config` fields; the rest are validated exactly like
//! Redis and kept as their CONFIG GET text in `other`, so a stock redis.conf loads unchanged and
//! CONFIG GET answers like Redis. One table drives file loading, CONFIG SET and CONFIG GET, so the
//! three cannot disagree about names, aliases or messages.
//!
//! The stock files of later releases (Redis 7.2 and 7.4, Valkey 8) load too: the table also holds
//! every directive those releases added (flag `LATER`), their new names for 7.0 directives
//! (`LATER_ALIASES`) and new enum values (`LATER_ENUM_VALUES`). Rule: a later directive never
//! changes a reply Redis 7.0 gives. CONFIG GET patterns do not list it (7.0's `CONFIG GET *` stays
//! byte for byte), error texts stay 7.0's; asked for by exact name, or set, it answers as its
//! release does. A directive no release knows is refused with 7.0's FATAL text.
//!
//! Must not touch: sockets, the executor, logging setup (main and `daemon` do that).

use std::collections::{BTreeMap, HashMap};

/// Directive flags (Redis's IMMUTABLE_CONFIG, MULTI_ARG_CONFIG, HIDDEN_CONFIG, PROTECTED_CONFIG).
pub const IMMUTABLE: u8 = 1;
pub const MULTI_ARG: u8 = 2;
pub const HIDDEN: u8 = 4;
pub const PROTECTED: u8 = 8;
/// A directive Redis 7.0 does not know, from a later release (Redis 7.2 or 7.4, Valkey 8). It is
/// accepted wherever that release accepts it (file, command line, CONFIG SET) and CONFIG GET
/// answers it when asked by its exact name, but glob patterns (`CONFIG GET *`) never list it: a
/// 7.0 client, or a test comparing with real 7.0, sees 7.0's replies.
pub const LATER: u8 = 16;

/// How a numeric directive is written and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumFmt {
    Int,
    /// Memory units (`1gb`, `10k`); CONFIG GET shows bytes.
    Mem,
    /// Memory units or a percentage (`10%`, stored negative like Redis).
    MemPct,
    Octal,
}

#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool,
    /// Bounds are inclusive; `unsigned` selects Redis's unsigned boundary message.
    Num {
        min: i128,
        max: i128,
        fmt: NumFmt,
        unsigned: bool,
    },
    Enum(&'static [&'static str]),
    Str,
    /// Directives with their own syntax: save, bind, dir, client-output-buffer-limit, ...
    Special,
}

/// What a changed directive does to the running server beyond holding its new value: Redis's
/// apply functions. The table names each directive's hook; `commands::config` runs them (they
/// reach listeners, the ACL and the process, which sit above this module) after every value of a
/// CONFIG SET is set, once per hook, and again with the old values when one of them fails. A hook
/// makes the server match the configuration it is given, so running it twice is harmless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apply {
    /// Listen on the bind addresses (TCP and TLS ports).
    Bind,
    /// Listen on the TCP port.
    Port,
    /// Listen on the TLS port (building the TLS contexts first if there are none).
    TlsPort,
    /// Rebuild the TLS contexts when TLS is in use.
    Tls,
    /// Raise the open-files limit for the clients.
    MaxClients,
    /// Set the process's oom_score_adj.
    OomScoreAdj,
    Watchdog,
    LogLevel,
    ProcTitle,
    /// The default user's password.
    RequirePass,
}

/// One directive of the table.
#[derive(Debug, Clone, Copy)]
pub struct Desc {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub kind: Kind,
    pub flags: u8,
    /// The CONFIG GET text of the default value.
    pub default: &'static str,
    /// What CONFIG SET runs when the value changes.
    pub apply: Option<Apply>,
}

impl Desc {
    const fn alias(mut self, a: &'static str) -> Desc {
        self.alias = Some(a);
        self
    }
    const fn on_set(mut self, hook: Apply) -> Desc {
        self.apply = Some(hook);
        self
    }
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

const fn d(name: &'static str, kind: Kind, flags: u8, default: &'static str) -> Desc {
    Desc { name, alias: None, kind, flags, default, apply: None }
}
const fn yn(name: &'static str, flags: u8, default: &'static str) -> Desc {
    d(name, Kind::Bool, flags, default)
}
const fn int(name: &'static str, flags: u8, min: i128, max: i128, default: &'static str) -> Desc {
    d(name, Kind::Num { min, max, fmt: NumFmt::Int, unsigned: false }, flags, default)
}
const fn uint(name: &'static str, flags: u8, min: i128, max: i128, default: &'static str) -> Desc {
    d(name, Kind::Num { min, max, fmt: NumFmt::Int, unsigned: true }, flags, default)
}
const fn mem(name: &'static str, flags: u8, min: i128, max: i128, default: &'static str) -> Desc {
    d(name, Kind::Num { min, max, fmt: NumFmt::Mem, unsigned: false }, flags, default)
}
const fn umem(name: &'static str, flags: u8, min: i128, max: i128, default: &'static str) -> Desc {
    d(name, Kind::Num { min, max, fmt: NumFmt::Mem, unsigned: true }, flags, default)
}
const fn en(name: &'static str, flags: u8, values: &'static [&'static str], default: &'static str) -> Desc {
    d(name, Kind::Enum(values), flags, default)
}
const fn st(name: &'static str, flags: u8, default: &'static str) -> Desc {
    d(name, Kind::Str, flags, default)
}
const fn sp(name: &'static str, flags: u8, default: &'static str) -> Desc {
    d(name, Kind::Special, flags, default)
}

const I32MIN: i128 = i32::MIN as i128;
const I32MAX: i128 = i32::MAX as i128;
const U32MAX: i128 = u32::MAX as i128;
const I64MAX: i128 = i64::MAX as i128;
const U64MAX: i128 = u64::MAX as i128;
const M: u8 = 0; // modifiable

const MAXMEMORY_POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning"];
const YES_NO_LOCAL: &[&str] = &["no", "yes", "local"];

/// Every directive Redis 7.0.15 knows, in Redis's table order, then those of later releases (flag
/// `LATER`; 7.2's set-max-listpack-* sit with their 7.0 neighbours).
pub static TABLE: &[Desc] = &[
    yn("rdbchecksum", IMMUTABLE, "yes"),
    yn("daemonize", IMMUTABLE, "no"),
    yn("io-threads-do-reads", IMMUTABLE, "no"),
    yn("always-show-logo", IMMUTABLE, "no"),
    yn("protected-mode", M, "yes"),
    yn("rdbcompression", M, "yes"),
    yn("rdb-del-sync-files", M, "no"),
    // Ours: the RDB version SAVE/BGSAVE write (auto = oldest that holds the dataset, 10 or 12).
    en("rdb-version", M, &["auto", "9", "10", "11", "12"], "auto"),
    // Ours: the nap before the one-thread runtime sleeps while that raises throughput
    // (server::coalesce); 0 = never.
    uint("wakeup-coalescing-us", M, 0, 1000, "0"),
    yn("activerehashing", M, "yes"),
    yn("stop-writes-on-bgsave-error", M, "yes"),
    yn("set-proc-title", IMMUTABLE, "yes"),
    yn("dynamic-hz", M, "yes"),
    yn("lazyfree-lazy-eviction", M, "no"),
    yn("lazyfree-lazy-expire", M, "no"),
    yn("lazyfree-lazy-server-del", M, "no"),
    yn("lazyfree-lazy-user-del", M, "no"),
    yn("lazyfree-lazy-user-flush", M, "no"),
    yn("repl-disable-tcp-nodelay", M, "no"),
    yn("repl-diskless-sync", M, "yes"),
    yn("aof-rewrite-incremental-fsync", M, "yes"),
    yn("no-appendfsync-on-rewrite", M, "no"),
    yn("cluster-require-full-coverage", M, "yes"),
    yn("rdb-save-incremental-fsync", M, "yes"),
    yn("aof-load-truncated", M, "yes"),
    yn("aof-use-rdb-preamble", M, "yes"),
    yn("aof-timestamp-enabled", M, "no"),
    yn("cluster-replica-no-failover", M, "no").alias("cluster-slave-no-failover"),
    yn("replica-lazy-flush", M, "no").alias("slave-lazy-flush"),
    yn("replica-serve-stale-data", M, "yes").alias("slave-serve-stale-data"),
    yn("replica-read-only", M, "yes").alias("slave-read-only"),
    yn("replica-ignore-maxmemory", M, "yes").alias("slave-ignore-maxmemory"),
    yn("jemalloc-bg-thread", M, "yes"),
    yn("activedefrag", M, "no"),
    yn("syslog-enabled", IMMUTABLE, "no"),
    yn("cluster-enabled", IMMUTABLE, "no"),
    yn("appendonly", M, "no"),
    yn("cluster-allow-reads-when-down", M, "no"),
    yn("cluster-allow-pubsubshard-when-down", M, "yes"),
    yn("crash-log-enabled", M, "yes"),
    yn("crash-memcheck-enabled", M, "yes"),
    yn("use-exit-on-panic", HIDDEN, "no"),
    yn("disable-thp", IMMUTABLE, "yes"),
    yn("cluster-allow-replica-migration", M, "yes"),
    yn("replica-announced", M, "yes"),
    yn("latency-tracking", M, "yes"),
    yn("aof-disable-auto-gc", M, "no"),
    yn("replica-ignore-disk-write-errors", M, "no"),
    st("aclfile", IMMUTABLE, ""),
    st("unixsocket", IMMUTABLE, ""),
    st("pidfile", IMMUTABLE, ""),
    st("replica-announce-ip", M, "").alias("slave-announce-ip"),
    st("masteruser", M, ""),
    st("cluster-announce-ip", M, ""),
    st("cluster-config-file", IMMUTABLE, "nodes.conf"),
    st("cluster-announce-hostname", M, ""),
    st("syslog-ident", IMMUTABLE, "redis"),
    st("dbfilename", PROTECTED, "dump.rdb"),
    st("appendfilename", IMMUTABLE, "appendonly.aof"),
    st("appenddirname", IMMUTABLE, "appendonlydir"),
    st("server_cpulist", IMMUTABLE, ""),
    st("bio_cpulist", IMMUTABLE, ""),
    st("aof_rewrite_cpulist", IMMUTABLE, ""),
    st("bgsave_cpulist", IMMUTABLE, ""),
    st("ignore-warnings", M, ""),
    st("proc-title-template", M, "{title} {listen-addr} {server-mode}").on_set(Apply::ProcTitle),
    st("bind-source-addr", M, ""),
    st("logfile", IMMUTABLE, ""),
    st("masterauth", M, ""),
    st("requirepass", M, "").on_set(Apply::RequirePass),
    en("supervised", IMMUTABLE, &["upstart", "systemd", "auto", "no"], "no"),
    en(
        "syslog-facility",
        IMMUTABLE,
        &["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"],
        "local0",
    ),
    en("repl-diskless-load", M, &["disabled", "on-empty-db", "swapdb"], "disabled"),
    en("loglevel", M, LOGLEVELS, "notice").on_set(Apply::LogLevel),
    en("maxmemory-policy", M, MAXMEMORY_POLICIES, "noeviction"),
    en("appendfsync", M, &["everysec", "always", "no"], "everysec"),
    en("oom-score-adj", M, &["no", "yes", "relative", "absolute"], "no").on_set(Apply::OomScoreAdj),
    en("acl-pubsub-default", M, &["allchannels", "resetchannels"], "resetchannels"),
    en("sanitize-dump-payload", M, &["no", "yes", "clients"], "no"),
    en("enable-protected-configs", IMMUTABLE, YES_NO_LOCAL, "no"),
    en("enable-debug-command", IMMUTABLE, YES_NO_LOCAL, "no"),
    en("enable-module-command", IMMUTABLE, YES_NO_LOCAL, "no"),
    en("cluster-preferred-endpoint-type", M, &["ip", "hostname", "unknown-endpoint"], "ip"),
    en("propagation-error-behavior", M, &["ignore", "panic", "panic-on-replicas"], "ignore"),
    en("shutdown-on-sigint", MULTI_ARG, &["default", "save", "nosave", "now", "force"], "default"),
    en("shutdown-on-sigterm", MULTI_ARG, &["default", "save", "nosave", "now", "force"], "default"),
    int("databases", IMMUTABLE, 1, I32MAX, "16"),
    int("port", M, 0, 65535, "6379").on_set(Apply::Port),
    int("io-threads", IMMUTABLE, 1, 128, "1"),
    int("auto-aof-rewrite-percentage", M, 0, I32MAX, "100"),
    int("cluster-replica-validity-factor", M, 0, I32MAX, "10").alias("cluster-slave-validity-factor"),
    int("list-max-listpack-size", M, I32MIN, I32MAX, "-2").alias("list-max-ziplist-size"),
    int("tcp-keepalive", M, 0, I32MAX, "300"),
    int("cluster-migration-barrier", M, 0, I32MAX, "1"),
    int("active-defrag-cycle-min", M, 1, 99, "1"),
    int("active-defrag-cycle-max", M, 1, 99, "25"),
    int("active-defrag-threshold-lower", M, 0, 1000, "10"),
    int("active-defrag-threshold-upper", M, 0, 1000, "100"),
    int("lfu-log-factor", M, 0, I32MAX, "10"),
    int("lfu-decay-time", M, 0, I32MAX, "1"),
    int("replica-priority", M, 0, I32MAX, "100").alias("slave-priority"),
    int("repl-diskless-sync-delay", M, 0, I32MAX, "5"),
    int("maxmemory-samples", M, 1, I32MAX, "5"),
    int("maxmemory-eviction-tenacity", M, 0, 100, "10"),
    int("timeout", M, 0, I32MAX, "0"),
    int("replica-announce-port", M, 0, 65535, "0").alias("slave-announce-port"),
    int("tcp-backlog", IMMUTABLE, 0, I32MAX, "511"),
    int("cluster-port", IMMUTABLE, 0, 65535, "0"),
    int("cluster-announce-bus-port", M, 0, 65535, "0"),
    int("cluster-announce-port", M, 0, 65535, "0"),
    int("cluster-announce-tls-port", M, 0, 65535, "0"),
    int("repl-timeout", M, 1, I32MAX, "60"),
    int("repl-ping-replica-period", M, 1, I32MAX, "10").alias("repl-ping-slave-period"),
    int("list-compress-depth", M, 0, I32MAX, "0"),
    int("rdb-key-save-delay", HIDDEN, I32MIN, I32MAX, "0"),
    int("key-load-delay", HIDDEN, I32MIN, I32MAX, "0"),
    int("active-expire-effort", M, 1, 10, "1"),
    int("hz", M, 0, I32MAX, "10"),
    int("min-replicas-to-write", M, 0, I32MAX, "0").alias("min-slaves-to-write"),
    int("min-replicas-max-lag", M, 0, I32MAX, "10").alias("min-slaves-max-lag"),
    int("watchdog-period", HIDDEN, 0, I32MAX, "0").on_set(Apply::Watchdog),
    int("shutdown-timeout", M, 0, I32MAX, "10"),
    int("repl-diskless-sync-max-replicas", M, 0, I32MAX, "0"),
    uint("maxclients", M, 1, U32MAX, "10000").on_set(Apply::MaxClients),
    d("unixsocketperm", Kind::Num { min: 0, max: 0o777, fmt: NumFmt::Octal, unsigned: true }, IMMUTABLE, "0"),
    uint("socket-mark-id", IMMUTABLE, 0, U32MAX, "0"),
    uint("active-defrag-max-scan-fields", M, 1, I64MAX, "1000"),
    uint("slowlog-max-len", M, 0, I64MAX, "128"),
    uint("acllog-max-len", M, 0, I64MAX, "128"),
    int("busy-reply-threshold", M, 0, I64MAX, "5000").alias("lua-time-limit"),
    int("cluster-node-timeout", M, 0, I64MAX, "15000"),
    int("slowlog-log-slower-than", M, -1, I64MAX, "10000"),
    int("latency-monitor-threshold", M, 0, I64MAX, "0"),
    mem("proto-max-bulk-len", M, 1024 * 1024, I64MAX, "536870912"),
    int("stream-node-max-entries", M, 0, I64MAX, "100"),
    mem("repl-backlog-size", M, 1, I64MAX, "1048576"),
    umem("maxmemory", M, 0, U64MAX, "0"),
    umem("cluster-link-sendbuf-limit", M, 0, U64MAX, "0"),
    uint("hash-max-listpack-entries", M, 0, I64MAX, "512").alias("hash-max-ziplist-entries"),
    uint("set-max-intset-entries", M, 0, I64MAX, "512"),
    // Redis 7.2 (acted on: small sets of strings are listpacks, as in 7.2).
    uint("set-max-listpack-entries", LATER, 0, I64MAX, "128"),
    umem("set-max-listpack-value", LATER, 0, I64MAX, "64"),
    uint("zset-max-listpack-entries", M, 0, I64MAX, "128").alias("zset-max-ziplist-entries"),
    umem("active-defrag-ignore-bytes", M, 1, I64MAX, "104857600"),
    umem("hash-max-listpack-value", M, 0, I64MAX, "64").alias("hash-max-ziplist-value"),
    umem("stream-node-max-bytes", M, 0, I64MAX, "4096"),
    umem("zset-max-listpack-value", M, 0, I64MAX, "64").alias("zset-max-ziplist-value"),
    umem("hll-sparse-max-bytes", M, 0, I64MAX, "3000"),
    uint("tracking-table-max-keys", M, 0, I64MAX, "1000000"),
    umem("client-query-buffer-limit", M, 1024 * 1024, I64MAX, "1073741824"),
    d("maxmemory-clients", Kind::Num { min: -100, max: I64MAX, fmt: NumFmt::MemPct, unsigned: false }, M, "0"),
    int("repl-backlog-ttl", M, 0, I64MAX, "3600"),
    mem("auto-aof-rewrite-min-size", M, 0, I64MAX, "67108864"),
    int("loading-process-events-interval-bytes", HIDDEN, 1024, I32MAX, "2097152"),
    int("tls-port", M, 0, 65535, "0").on_set(Apply::TlsPort),
    int("tls-session-cache-size", M, 0, I32MAX, "20480").on_set(Apply::Tls),
    int("tls-session-cache-timeout", M, 0, I32MAX, "300").on_set(Apply::Tls),
    yn("tls-cluster", M, "no").on_set(Apply::Tls),
    yn("tls-replication", M, "no").on_set(Apply::Tls),
    en("tls-auth-clients", M, &["no", "yes", "optional"], "yes").on_set(Apply::Tls),
    yn("tls-prefer-server-ciphers", M, "no").on_set(Apply::Tls),
    yn("tls-session-caching", M, "yes").on_set(Apply::Tls),
    st("tls-cert-file", M, "").on_set(Apply::Tls),
    st("tls-key-file", M, "").on_set(Apply::Tls),
    st("tls-key-file-pass", M, "").on_set(Apply::Tls),
    st("tls-client-cert-file", M, "").on_set(Apply::Tls),
    st("tls-client-key-file", M, "").on_set(Apply::Tls),
    st("tls-client-key-file-pass", M, "").on_set(Apply::Tls),
    st("tls-dh-params-file", M, "").on_set(Apply::Tls),
    st("tls-ca-cert-file", M, "").on_set(Apply::Tls),
    st("tls-ca-cert-dir", M, "").on_set(Apply::Tls),
    st("tls-protocols", M, "").on_set(Apply::Tls),
    st("tls-ciphers", M, "").on_set(Apply::Tls),
    st("tls-ciphersuites", M, "").on_set(Apply::Tls),
    sp("dir", PROTECTED, ""),
    sp("save", MULTI_ARG, "3600 1 300 100 60 10000"),
    sp("client-output-buffer-limit", MULTI_ARG, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"),
    sp("oom-score-adj-values", MULTI_ARG, "0 200 800").on_set(Apply::OomScoreAdj),
    sp("notify-keyspace-events", M, ""),
    sp("bind", MULTI_ARG, "* -::*").on_set(Apply::Bind),
    sp("replicaof", IMMUTABLE | MULTI_ARG, "").alias("slaveof"),
    sp("latency-tracking-info-percentiles", MULTI_ARG, "50 99 99.9"),
    // Redis 7.2 (and Valkey 8).
    st("locale-collate", LATER, ""),
    st("cluster-announce-human-nodename", LATER, ""),
    int("cluster-ping-interval", HIDDEN | LATER, 0, I64MAX, "0"),
    // Redis 7.4 (and Valkey 8).
    yn("hide-user-data-from-log", LATER, "no"),
    uint("max-new-connections-per-cycle", LATER, 1, 1000, "10"),
    uint("max-new-tls-connections-per-cycle", LATER, 1, 1000, "1"),
    // Valkey 8.0.
    yn("extended-redis-compatibility", LATER, "no"),
    yn("enable-debug-assert", IMMUTABLE | HIDDEN | LATER, "no"),
    yn("dual-channel-replication-enabled", LATER, "no"),
    yn("cluster-slot-stats-enabled", LATER, "no"),
    st("availability-zone", LATER, ""),
    st("cluster-announce-client-ipv4", LATER, ""),
    st("cluster-announce-client-ipv6", LATER, ""),
    st("unixsocketgroup", IMMUTABLE | LATER, ""),
    int("events-per-io-thread", HIDDEN | LATER, 0, I32MAX, "2"),
    int("prefetch-batch-max-size", LATER, 0, 128, "16"),
    // Valkey 8.1.
    yn("import-mode", LATER, "no"),
];

/// Names later releases gave to 7.0 directives: (new name, 7.0's canonical name). They work like
/// aliases, but only by exact name (see `LATER`): Redis 7.4 and Valkey 8 spell the cpu lists with
/// hyphens, Valkey 8 calls masteruser and masterauth primaryuser and primaryauth.
pub const LATER_ALIASES: &[(&str, &str)] = &[
    ("server-cpulist", "server_cpulist"),
    ("bio-cpulist", "bio_cpulist"),
    ("aof-rewrite-cpulist", "aof_rewrite_cpulist"),
    ("bgsave-cpulist", "bgsave_cpulist"),
    ("primaryuser", "masteruser"),
    ("primaryauth", "masterauth"),
];

/// Enum values later releases added to 7.0 directives: accepted, but left out of the "must be one
/// of" error text, which stays 7.0's. (Redis 7.2: `loglevel nothing`.)
pub const LATER_ENUM_VALUES: &[(&str, &str)] = &[("loglevel", "nothing")];

/// Directives the server acts on; every other table entry is only stored, and a startup warning
/// says so when its value differs from Redis's default. (A few stored-only directives still have
/// typed fields, e.g. `supervised`, because startup code reads them.)
pub const IMPLEMENTED: &[&str] = &[
    "always-show-logo",
    "replicaof",
    "masterauth",
    "masteruser",
    "replica-read-only",
    "replica-serve-stale-data",
    "repl-backlog-size",
    "repl-backlog-ttl",
    "repl-ping-replica-period",
    "repl-timeout",
    "replica-announce-ip",
    "replica-announce-port",
    "replica-priority",
    "replica-announced",
    "repl-diskless-sync",
    "repl-diskless-sync-delay",
    "repl-diskless-sync-max-replicas",
    "repl-diskless-load",
    "propagation-error-behavior",
    "aclfile",
    "acl-pubsub-default",
    "acllog-max-len",
    "bind",
    "port",
    "protected-mode",
    "tcp-backlog",
    "unixsocket",
    "unixsocketperm",
    "timeout",
    "tcp-keepalive",
    "daemonize",
    "pidfile",
    "loglevel",
    "logfile",
    "databases",
    "requirepass",
    "maxclients",
    "save",
    "appendonly",
    "appendfsync",
    "appendfilename",
    "appenddirname",
    "aof-load-truncated",
    "aof-use-rdb-preamble",
    "aof-disable-auto-gc",
    "auto-aof-rewrite-percentage",
    "auto-aof-rewrite-min-size",
    "dir",
    "dbfilename",
    "io-threads",
    "slowlog-log-slower-than",
    "slowlog-max-len",
    "hz",
    "proto-max-bulk-len",
    "client-query-buffer-limit",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "list-max-listpack-size",
    "list-compress-depth",
    "set-max-intset-entries",
    "set-max-listpack-entries",
    "set-max-listpack-value",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "hll-sparse-max-bytes",
    "stream-node-max-bytes",
    "stream-node-max-entries",
    "maxmemory",
    "maxmemory-policy",
    "maxmemory-samples",
    "maxmemory-clients",
    "syslog-enabled",
    "syslog-ident",
    "syslog-facility",
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
    "notify-keyspace-events",
    "oom-score-adj",
    "oom-score-adj-values",
    "rdbcompression",
    "rdbchecksum",
    "stop-writes-on-bgsave-error",
    "activerehashing",
    "active-expire-effort",
    "no-appendfsync-on-rewrite",
    "aof-timestamp-enabled",
    "replica-lazy-flush",
    "replica-ignore-maxmemory",
    "dynamic-hz",
    "crash-log-enabled",
    "use-exit-on-panic",
    "replica-ignore-disk-write-errors",
    "rdb-del-sync-files",
    "repl-disable-tcp-nodelay",
    "rdb-save-incremental-fsync",
    "aof-rewrite-incremental-fsync",
    "set-proc-title",
    "proc-title-template",
    "jemalloc-bg-thread",
    "disable-thp",
    "bind-source-addr",
    "sanitize-dump-payload",
    "enable-module-command",
    "key-load-delay",
    "watchdog-period",
    "shutdown-timeout",
    "latency-monitor-threshold",
    "loading-process-events-interval-bytes",
    "enable-debug-command",
    "enable-protected-configs",
    "busy-reply-threshold",
    "latency-tracking",
    "supervised",
    "min-replicas-max-lag",
    "min-replicas-to-write",
    "client-output-buffer-limit",
    "latency-tracking-info-percentiles",
    "lfu-decay-time",
    "lfu-log-factor",
    "maxmemory-eviction-tenacity",
    "rdb-key-save-delay",
    "rdb-version",
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
    "tracking-table-max-keys",
    "wakeup-coalescing-us",
    "tls-port",
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-client-key-file-pass",
    "tls-dh-params-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-auth-clients",
    "tls-protocols",
    "tls-ciphers",
    "tls-ciphersuites",
    "tls-prefer-server-ciphers",
    "tls-session-caching",
    "tls-session-cache-size",
    "tls-session-cache-timeout",
    "tls-replication",
    "tls-cluster",
    // Cluster mode (issue 19).
    "cluster-enabled",
    "cluster-config-file",
    "cluster-node-timeout",
    "cluster-port",
    "cluster-announce-ip",
    "cluster-announce-port",
    "cluster-announce-tls-port",
    "cluster-announce-bus-port",
    "cluster-announce-hostname",
    "cluster-require-full-coverage",
    "cluster-allow-reads-when-down",
    "cluster-allow-pubsubshard-when-down",
    "cluster-allow-replica-migration",
    "cluster-replica-no-failover",
    "cluster-replica-validity-factor",
    "cluster-migration-barrier",
    "cluster-preferred-endpoint-type",
    "cluster-link-sendbuf-limit",
];

struct Index {
    by_name: HashMap<&'static str, usize>,
}

fn index() -> &'static Index {
    static IDX: std::sync::OnceLock<Index> = std::sync::OnceLock::new();
    IDX.get_or_init(|| {
        let mut by_name = HashMap::new();
        for (i, desc) in TABLE.iter().enumerate() {
            by_name.insert(desc.name, i);
            if let Some(a) = desc.alias {
                by_name.insert(a, i);
            }
        }
        for &(later, canonical) in LATER_ALIASES {
            if let Some(&i) = by_name.get(canonical) {
                by_name.insert(later, i);
            }
        }
        Index { by_name }
    })
}

/// The directive named `name` (canonical name or alias; case-insensitive like Redis's dict).
pub fn lookup(name: &str) -> Option<&'static Desc> {
    let lower = name.to_ascii_lowercase();
    index().by_name.get(lower.as_str()).map(|&i| &TABLE[i])
}

/// Every name a CONFIG GET pattern may report: canonical names and aliases, table order. Names of
/// later releases (`LATER`, `LATER_ALIASES`) are not among them; `lookup` finds them by name.
pub fn all_names() -> impl Iterator<Item = (&'static str, &'static Desc)> {
    TABLE.iter().filter(|d| !d.has(LATER)).flat_map(|d| std::iter::once((d.name, d)).chain(d.alias.map(|a| (a, d))))
}

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
    /// The working directory as CONFIG GET dir shows it (absolute once chdir'd).
    pub dir: String,
    pub dbfilename: String,
    pub io_threads: usize,
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: usize,
    pub hz: u32,
    pub proto_max_bulk_len: i64,
    pub client_query_buffer_limit: usize,
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub list_max_listpack_size: i32,
    pub list_compress_depth: i32,
    pub set_max_intset_entries: usize,
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
    pub hll_sparse_max_bytes: usize,
    pub stream_node_max_bytes: usize,
    pub stream_node_max_entries: i64,
    pub maxmemory: u64,
    pub maxmemory_policy: String,
    pub maxmemory_samples: i32,
    pub lazyfree_lazy_eviction: bool,
    pub lazyfree_lazy_expire: bool,
    pub lazyfree_lazy_server_del: bool,
    pub lazyfree_lazy_user_del: bool,
    pub lazyfree_lazy_user_flush: bool,
    /// Canonical class string as CONFIG GET shows it (`AKE`, `xE`, ...).
    pub notify_keyspace_events: String,
    pub rdbcompression: bool,
    pub rdbchecksum: bool,
    pub stop_writes_on_bgsave_error: bool,
    pub activerehashing: bool,
    pub active_expire_effort: i32,
    pub always_show_logo: bool,
    pub enable_debug_command: String,
    pub enable_protected_configs: String,
    pub busy_reply_threshold: i64,
    pub supervised: String,
    pub set_proc_title: bool,
    pub latency_tracking: bool,
    pub dynamic_hz: bool,
    /// min-replicas-to-write and min-replicas-max-lag: with both above 0, writes need that many
    /// replicas, and this server has none.
    pub min_replicas_to_write: i64,
    pub min_replicas_max_lag: i64,
    pub wakeup_coalescing_us: u64,
    /// Directives stored but not acted on: name → CONFIG GET text (absent = default).
    pub other: BTreeMap<&'static str, String>,
    /// The config file given on the command line (absolute path), for CONFIG REWRITE and INFO.
    pub config_file: Option<String>,
    /// `rename-command from to` directives, in file order (applied at startup).
    pub renamed_commands: Vec<(String, String)>,
    /// Startup warnings gathered while loading (logged once logging is set up).
    pub warnings: Vec<String>,
    /// `user` directives (name and rules), applied at startup.
    pub users: Vec<Vec<String>>,
    /// Tell systemd (NOTIFY_SOCKET) once the listeners are up.
    pub notify_systemd: bool,
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
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            hll_sparse_max_bytes: 3000,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
            maxmemory_samples: 5,
            lazyfree_lazy_eviction: false,
            lazyfree_lazy_expire: false,
            lazyfree_lazy_server_del: false,
            lazyfree_lazy_user_del: false,
            lazyfree_lazy_user_flush: false,
            notify_keyspace_events: String::new(),
            rdbcompression: true,
            rdbchecksum: true,
            stop_writes_on_bgsave_error: true,
            activerehashing: true,
            active_expire_effort: 1,
            always_show_logo: false,
            enable_debug_command: "no".into(),
            enable_protected_configs: "no".into(),
            busy_reply_threshold: 5000,
            supervised: "no".into(),
            set_proc_title: true,
            latency_tracking: true,
            dynamic_hz: true,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            wakeup_coalescing_us: 0,
            other: BTreeMap::new(),
            config_file: None,
            renamed_commands: Vec::new(),
            warnings: Vec::new(),
            users: Vec::new(),
            notify_systemd: false,
        }
    }
}

/// A validated value: its CONFIG GET text and, for numbers and booleans, the number.
#[derive(Debug, Clone)]
pub struct Parsed {
    pub text: String,
    pub num: i128,
}

/// Conversion between a typed field and a parsed value.
trait Field {
    fn show(&self) -> String;
    fn put(&mut self, p: &Parsed);
}

impl Field for bool {
    fn show(&self) -> String {
        if *self { "yes" } else { "no" }.into()
    }
    fn put(&mut self, p: &Parsed) {
        *self = p.num != 0;
    }
}

impl Field for String {
    fn show(&self) -> String {
        self.clone()
    }
    fn put(&mut self, p: &Parsed) {
        *self = p.text.clone();
    }
}

impl Field for Option<String> {
    fn show(&self) -> String {
        self.clone().unwrap_or_default()
    }
    fn put(&mut self, p: &Parsed) {
        *self = Some(p.text.clone()).filter(|s| !s.is_empty());
    }
}

macro_rules! num_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn show(&self) -> String {
                self.to_string()
            }
            fn put(&mut self, p: &Parsed) {
                *self = p.num as $t;
            }
        }
    )*};
}
num_field!(u16, i32, u32, u64, i64, usize);

macro_rules! typed_fields {
    ($($name:literal => $field:ident),* $(,)?) => {
        impl Config {
            fn typed_get(&self, name: &str) -> Option<String> {
                match name {
                    $($name => Some(Field::show(&self.$field)),)*
                    _ => None,
                }
            }
            fn typed_put(&mut self, name: &str, p: &Parsed) -> bool {
                match name {
                    $($name => { Field::put(&mut self.$field, p); true })*
                    _ => false,
                }
            }
        }
    };
}

typed_fields! {
    "port" => port,
    "protected-mode" => protected_mode,
    "tcp-backlog" => tcp_backlog,
    "unixsocket" => unixsocket,
    "timeout" => timeout,
    "tcp-keepalive" => tcp_keepalive,
    "daemonize" => daemonize,
    "pidfile" => pidfile,
    "loglevel" => loglevel,
    "logfile" => logfile,
    "databases" => databases,
    "maxclients" => maxclients,
    "appendonly" => appendonly,
    "dbfilename" => dbfilename,
    "io-threads" => io_threads,
    "slowlog-log-slower-than" => slowlog_log_slower_than,
    "slowlog-max-len" => slowlog_max_len,
    "hz" => hz,
    "proto-max-bulk-len" => proto_max_bulk_len,
    "client-query-buffer-limit" => client_query_buffer_limit,
    "hash-max-listpack-entries" => hash_max_listpack_entries,
    "hash-max-listpack-value" => hash_max_listpack_value,
    "list-max-listpack-size" => list_max_listpack_size,
    "list-compress-depth" => list_compress_depth,
    "set-max-intset-entries" => set_max_intset_entries,
    "set-max-listpack-entries" => set_max_listpack_entries,
    "set-max-listpack-value" => set_max_listpack_value,
    "zset-max-listpack-entries" => zset_max_listpack_entries,
    "zset-max-listpack-value" => zset_max_listpack_value,
    "hll-sparse-max-bytes" => hll_sparse_max_bytes,
    "stream-node-max-bytes" => stream_node_max_bytes,
    "stream-node-max-entries" => stream_node_max_entries,
    "maxmemory" => maxmemory,
    "maxmemory-policy" => maxmemory_policy,
    "maxmemory-samples" => maxmemory_samples,
    "lazyfree-lazy-eviction" => lazyfree_lazy_eviction,
    "lazyfree-lazy-expire" => lazyfree_lazy_expire,
    "lazyfree-lazy-server-del" => lazyfree_lazy_server_del,
    "lazyfree-lazy-user-del" => lazyfree_lazy_user_del,
    "lazyfree-lazy-user-flush" => lazyfree_lazy_user_flush,
    "notify-keyspace-events" => notify_keyspace_events,
    "rdbcompression" => rdbcompression,
    "rdbchecksum" => rdbchecksum,
    "stop-writes-on-bgsave-error" => stop_writes_on_bgsave_error,
    "activerehashing" => activerehashing,
    "active-expire-effort" => active_expire_effort,
    "always-show-logo" => always_show_logo,
    "enable-debug-command" => enable_debug_command,
    "enable-protected-configs" => enable_protected_configs,
    "busy-reply-threshold" => busy_reply_threshold,
    "supervised" => supervised,
    "set-proc-title" => set_proc_title,
    "latency-tracking" => latency_tracking,
    "dynamic-hz" => dynamic_hz,
    "min-replicas-to-write" => min_replicas_to_write,
    "min-replicas-max-lag" => min_replicas_max_lag,
    "wakeup-coalescing-us" => wakeup_coalescing_us,
}

/// Redis's memtoull: digits with an optional unit (b, k, kb, m, mb, g, gb; any case).
/// Whether a protected action (DEBUG, changing `dir`/`dbfilename`) is allowed under a
/// `yes|no|local` setting (enable-debug-command, enable-protected-configs) for a client.
pub fn protected_action_allowed(setting: &str, local_client: bool) -> bool {
    match setting {
        "yes" => true,
        "local" => local_client,
        _ => false,
    }
}

pub fn parse_memory(s: &str) -> Option<u64> {
    if s.starts_with('-') {
        return None;
    }
    let split = s.bytes().position(|c| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let mul: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    // strtoull: an empty number reads as 0 and an overflow saturates, as in Redis.
    let val: u64 = if digits.is_empty() { 0 } else { digits.parse().unwrap_or(u64::MAX) };
    Some(val.wrapping_mul(mul))
}

/// Writes bytes the way CONFIG REWRITE does: the largest exact unit among gb, mb, kb.
pub fn format_memory(bytes: i128) -> String {
    const GB: i128 = 1 << 30;
    const MB: i128 = 1 << 20;
    const KB: i128 = 1 << 10;
    if bytes != 0 && bytes % GB == 0 {
        format!("{}gb", bytes / GB)
    } else if bytes != 0 && bytes % MB == 0 {
        format!("{}mb", bytes / MB)
    } else if bytes != 0 && bytes % KB == 0 {
        format!("{}kb", bytes / KB)
    } else {
        bytes.to_string()
    }
}

/// C strtoll over the whole string in `radix` (leading blanks and a sign allowed; empty reads 0).
fn strtoll_full(s: &str, radix: u32) -> Option<i64> {
    if s.is_empty() {
        return Some(0);
    }
    // No digits after the spaces and sign: strtoll ends at the start, which is not the end.
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if body.is_empty() || body.starts_with(['+', '-']) {
        return None;
    }
    let v = i128::from_str_radix(body, radix).ok()?;
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

const KEYSPACE_CLASSES: &str = "g$lshzxetd";

/// Validates notify-keyspace-events and returns its canonical text (Redis's flags round trip:
/// `A` for the whole class set or the classes one by one followed by `n`, then K, E and m). Under
/// `A`, Redis 7.0 honours `n` but does not show it: it is then stored last and `Config::get`
/// hides it.
pub fn canonical_keyspace_events(s: &str) -> Option<String> {
    let mut have = std::collections::HashSet::new();
    for c in s.chars() {
        match c {
            'A' => have.extend(KEYSPACE_CLASSES.chars()),
            'g' | '$' | 'l' | 's' | 'h' | 'z' | 'x' | 'e' | 't' | 'd' | 'K' | 'E' | 'm' | 'n' => {
                have.insert(c);
            }
            _ => return None,
        }
    }
    let mut out = String::new();
    let all = KEYSPACE_CLASSES.chars().all(|c| have.contains(&c));
    if all {
        out.push('A');
    } else {
        out.extend(KEYSPACE_CLASSES.chars().chain(['n']).filter(|c| have.contains(c)));
    }
    out.extend("KEm".chars().filter(|c| have.contains(c)));
    if all && have.contains(&'n') {
        out.push('n');
    }
    Some(out)
}

/// `%f` with trailing zeros (and a bare dot) trimmed, as Redis prints percentiles.
fn fmt_percentile(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

/// Output-buffer limits as (class, hard, soft, seconds) for normal, slave, pubsub.
fn parse_obuf(text: &str) -> Vec<(String, u64, u64, i64)> {
    let parts: Vec<&str> = text.split(' ').collect();
    parts
        .chunks(4)
        .filter(|c| c.len() == 4)
        .map(|c| (c[0].to_string(), c[1].parse().unwrap_or(0), c[2].parse().unwrap_or(0), c[3].parse().unwrap_or(0)))
        .collect()
}

pub(crate) fn strerror(errno: i32) -> String {
    nix::errno::Errno::from_raw(errno).desc().to_string()
}

impl Config {
    /// Parses redis-server's argv (without the program name) into a Config, without reading
    /// stdin; the error is the text Redis would print. For tests and embedding.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        match parse_cli(args) {
            Cli::Run { config_file, options, .. } => {
                Config::load(config_file.as_deref(), false, &options).map_err(|Fatal(text)| text)
            }
            _ => Err("not a server command line".into()),
        }
    }

    /// Sets one directive by name, as a config-file line `name vals...` would.
    pub fn set(&mut self, name: &str, vals: &[String]) -> Result<(), String> {
        let desc = lookup(name).ok_or("Bad directive or wrong number of arguments")?;
        self.set_directive(desc, vals, &mut LoadState::default())
    }

    /// The CONFIG GET text of a directive (by canonical name).
    /// `watchdog-period` in milliseconds (0: off).
    pub fn watchdog_period(&self) -> u64 {
        self.other.get("watchdog-period").and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// A yes/no directive kept as text, with its default when unset.
    pub fn other_flag(&self, name: &str, default: bool) -> bool {
        self.other.get(name).map_or(default, |v| v == "yes")
    }

    /// The configuration names a master (`replicaof`): the server starts as a replica.
    pub fn replicaof_set(&self) -> bool {
        self.other.get("replicaof").is_some_and(|m| !m.is_empty())
    }

    pub fn replica_read_only(&self) -> bool {
        self.other_flag("replica-read-only", true)
    }

    pub fn replica_serve_stale_data(&self) -> bool {
        self.other_flag("replica-serve-stale-data", true)
    }

    pub fn get(&self, desc: &Desc) -> String {
        match desc.name {
            "bind" => self.bind.join(" "),
            "save" => self.save.iter().map(|(s, c)| format!("{s} {c}")).collect::<Vec<_>>().join(" "),
            "requirepass" => {
                self.requirepass.as_ref().map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_default()
            }
            "unixsocketperm" => format!("{:o}", self.unixsocketperm),
            "dir" => std::env::current_dir().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default(),
            "notify-keyspace-events" => {
                let v = &self.notify_keyspace_events;
                if v.starts_with('A') { v.trim_end_matches('n') } else { v }.to_string()
            }
            name => match self.typed_get(name) {
                Some(v) => v,
                None => self.other.get(name).cloned().unwrap_or_else(|| desc.default.to_string()),
            },
        }
    }

    /// Validates `args` for `desc` and stores the value. `loading` is true while reading the config
    /// file (the first `save` line there replaces the defaults, later ones add to it).
    pub fn set_directive(
        &mut self,
        desc: &'static Desc,
        args: &[String],
        loading: &mut LoadState,
    ) -> Result<(), String> {
        if !desc.has(MULTI_ARG) && args.len() != 1 {
            return Err("wrong number of arguments".into());
        }
        match desc.kind {
            Kind::Special => self.set_special(desc, args, loading),
            Kind::Enum(values) if desc.has(MULTI_ARG) => {
                // A set of flags (shutdown-on-sig*): bit i is values[i + 1]; values[0] means none.
                let mut bits = 0u32;
                if args.is_empty() {
                    return Err(format!("argument(s) must be one of the following: {}", values.join(", ")));
                }
                for a in args {
                    match values.iter().position(|e| e.eq_ignore_ascii_case(a)) {
                        Some(0) => {}
                        Some(i) => bits |= 1 << (i - 1),
                        None => return Err(format!("argument(s) must be one of the following: {}", values.join(", "))),
                    }
                }
                let names: Vec<&str> =
                    values[1..].iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, n)| *n).collect();
                let text = if names.is_empty() { values[0].to_string() } else { names.join(" ") };
                self.other.insert(desc.name, text);
                Ok(())
            }
            _ => {
                let p = parse_value(desc, &args[0])?;
                self.store(desc, p);
                Ok(())
            }
        }
    }

    fn store(&mut self, desc: &'static Desc, p: Parsed) {
        match desc.name {
            "requirepass" => self.requirepass = Some(p.text.into_bytes()).filter(|v| !v.is_empty()),
            "unixsocketperm" => self.unixsocketperm = p.num as u32,
            "hz" => self.hz = p.num.clamp(1, 500) as u32,
            // Redis never keeps a replication backlog under 16kb.
            "repl-backlog-size" => {
                self.other.insert(desc.name, p.num.max(16 * 1024).to_string());
            }
            name => {
                if !self.typed_put(name, &p) {
                    self.other.insert(desc.name, p.text);
                }
            }
        }
    }

    fn set_special(&mut self, desc: &'static Desc, args: &[String], loading: &mut LoadState) -> Result<(), String> {
        let empty = args.len() == 1 && args[0].is_empty();
        match desc.name {
            "save" => {
                let args: &[String] = if empty { &[] } else { args };
                if args.len() % 2 == 1 {
                    return Err("Invalid save parameters".into());
                }
                let mut params = Vec::new();
                for pair in args.chunks(2) {
                    let secs = strtoll_full(&pair[0], 10).filter(|&v| v >= 1);
                    let changes = strtoll_full(&pair[1], 10).filter(|&v| v >= 0);
                    match (secs, changes) {
                        (Some(s), Some(c)) => params.push((s as u64, c as u64)),
                        _ => return Err("Invalid save parameters".into()),
                    }
                }
                // In a file, later `save` lines add to earlier ones; `save ""` always clears.
                if loading.reading_file && loading.save_loaded && !empty {
                    self.save.extend(params);
                } else {
                    self.save = params;
                }
                loading.save_loaded = true;
            }
            "bind" => {
                if args.len() > 16 {
                    return Err("Too many bind addresses specified.".into());
                }
                self.bind = if empty { Vec::new() } else { args.to_vec() };
            }
            "dir" => {
                if args.len() != 1 {
                    return Err("wrong number of arguments".into());
                }
                std::env::set_current_dir(&args[0])
                    .map_err(|e| e.raw_os_error().map(strerror).unwrap_or_else(|| e.to_string()))?;
                self.dir = self.get(desc);
            }
            "notify-keyspace-events" => {
                if args.len() != 1 {
                    return Err("wrong number of arguments".into());
                }
                self.notify_keyspace_events = canonical_keyspace_events(&args[0])
                    .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?;
            }
            "oom-score-adj-values" => {
                if args.len() != 3 {
                    return Err("wrong number of arguments".into());
                }
                let mut vals = Vec::new();
                for a in args {
                    match strtoll_full(a, 10).filter(|v| (-2000..=2000).contains(v)) {
                        Some(v) => vals.push(v.to_string()),
                        None => {
                            return Err("Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into())
                        }
                    }
                }
                self.other.insert(desc.name, vals.join(" "));
            }
            "replicaof" => {
                if args.len() != 2 {
                    return Err("wrong number of arguments".into());
                }
                if args[0].eq_ignore_ascii_case("no") && args[1].eq_ignore_ascii_case("one") {
                    self.other.insert(desc.name, String::new());
                } else {
                    let port =
                        strtoll_full(&args[1], 10).filter(|p| (0..=65535).contains(p)).ok_or("Invalid master port")?;
                    self.other.insert(desc.name, format!("{} {}", args[0], port));
                }
            }
            "latency-tracking-info-percentiles" => {
                let args: &[String] = if empty { &[] } else { args };
                let mut out = Vec::new();
                for a in args {
                    let v = crate::util::num::parse_f64(a.as_bytes())
                        .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
                    if !(0.0..=100.0).contains(&v) {
                        return Err(
                            "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into()
                        );
                    }
                    out.push(fmt_percentile(v));
                }
                self.other.insert(desc.name, out.join(" "));
            }
            "client-output-buffer-limit" => {
                if !args.len().is_multiple_of(4) {
                    return Err("Wrong number of arguments in buffer limit configuration.".into());
                }
                let mut current = parse_obuf(&self.get(desc));
                let mut updates = Vec::new();
                for c in args.chunks(4) {
                    let class = match c[0].to_ascii_lowercase().as_str() {
                        "normal" => 0,
                        "slave" | "replica" => 1,
                        "pubsub" => 2,
                        _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
                    };
                    let hard = parse_memory(&c[1]);
                    let soft = parse_memory(&c[2]);
                    let secs = strtoll_full(&c[3], 10).filter(|&s| s >= 0);
                    match (hard, soft, secs) {
                        (Some(h), Some(s), Some(t)) => updates.push((class, h, s, t)),
                        _ => {
                            return Err(
                                "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into()
                            )
                        }
                    }
                }
                for (class, h, s, t) in updates {
                    if let Some(slot) = current.get_mut(class) {
                        slot.1 = h;
                        slot.2 = s;
                        slot.3 = t;
                    }
                }
                let text = current.iter().map(|(n, h, s, t)| format!("{n} {h} {s} {t}")).collect::<Vec<_>>().join(" ");
                self.other.insert(desc.name, text);
            }
            _ => return Err("Bad directive or wrong number of arguments".into()),
        }
        Ok(())
    }

    /// Names of stored-only directives whose value differs from Redis's default.
    pub fn unimplemented_in_use(&self) -> Vec<&'static str> {
        TABLE
            .iter()
            .filter(|d| !IMPLEMENTED.contains(&d.name))
            .filter(|d| self.get(d) != d.default)
            .map(|d| d.name)
            .collect()
    }
}

/// Validates a single-argument value of a Bool, Num, Enum or Str directive.
pub fn parse_value(desc: &Desc, v: &str) -> Result<Parsed, String> {
    match desc.kind {
        Kind::Bool if desc.name == "activedefrag" && v.eq_ignore_ascii_case("yes") => {
            // Like a Redis built without its patched jemalloc: we have no defragmenter.
            Err("Active defragmentation cannot be enabled: it requires a Redis server compiled with a modified Jemalloc like the one shipped by default with the Redis source distribution".into())
        }
        Kind::Bool => {
            let b = if v.eq_ignore_ascii_case("yes") {
                true
            } else if v.eq_ignore_ascii_case("no") {
                false
            } else {
                return Err("argument must be 'yes' or 'no'".into());
            };
            Ok(Parsed { text: if b { "yes" } else { "no" }.into(), num: b as i128 })
        }
        Kind::Enum(values) => {
            let Some(pos) = values.iter().position(|e| e.eq_ignore_ascii_case(v)) else {
                let later = LATER_ENUM_VALUES.iter().find(|(n, e)| *n == desc.name && e.eq_ignore_ascii_case(v));
                if let Some((_, e)) = later {
                    return Ok(Parsed { text: e.to_string(), num: values.len() as i128 });
                }
                return Err(format!("argument(s) must be one of the following: {}", values.join(", ")));
            };
            // Enum names sharing one value read back as the first of them (oom-score-adj).
            let name = if desc.name == "oom-score-adj" && values[pos] == "relative" { "yes" } else { values[pos] };
            Ok(Parsed { text: name.into(), num: pos as i128 })
        }
        Kind::Str => {
            // Redis's pathIsBaseName: neither separator, '/' nor '\\'.
            let is_path = v.contains(['/', '\\']);
            match desc.name {
                "dbfilename" if is_path => return Err("dbfilename can't be a path, just a filename".into()),
                "appendfilename" if v.is_empty() => return Err("appendfilename can't be empty".into()),
                "appendfilename" if is_path => return Err("appendfilename can't be a path, just a filename".into()),
                "appenddirname" if v.is_empty() => return Err("appenddirname can't be empty".into()),
                "appenddirname" if is_path => return Err("appenddirname can't be a path, just a dirname".into()),
                "cluster-announce-hostname" => {
                    if v.len() >= 256 {
                        return Err("Hostnames must be less than 256 characters".into());
                    }
                    if !v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
                        return Err("Hostnames may only contain alphanumeric characters, hyphens or dots".into());
                    }
                }
                "proc-title-template" if !valid_proc_title_template(v) => {
                    return Err("template format is invalid or contains unknown variables".into())
                }
                _ => {}
            }
            Ok(Parsed { text: v.to_string(), num: 0 })
        }
        Kind::Num { min, max, fmt, unsigned } => {
            let mut n = parse_number(v, fmt)?;
            if !unsigned && n > i64::MAX as i128 {
                // Redis stores memory values of signed configs through a cast: huge ones wrap.
                n = (n as u64 as i64) as i128;
            }
            let in_range = if fmt == NumFmt::MemPct && n < 0 {
                if n < min {
                    return Err(format!("percentage argument must be less or equal to {}", -min));
                }
                true
            } else if unsigned {
                // Redis compares unsigned configs after a cast: negatives become huge.
                let u = if n < 0 { n + (1i128 << 64) } else { n };
                u >= min && u <= max
            } else {
                n >= min && n <= max
            };
            if !in_range {
                return Err(if fmt == NumFmt::Octal {
                    format!("argument must be between {min:o} and {max:o} inclusive")
                } else {
                    format!("argument must be between {min} and {max} inclusive")
                });
            }
            let text = match fmt {
                NumFmt::MemPct if n < 0 => format!("{}%", -n),
                NumFmt::Octal => format!("{n:o}"),
                _ => n.to_string(),
            };
            Ok(Parsed { text, num: n })
        }
        Kind::Special => Err("Bad directive or wrong number of arguments".into()),
    }
}

/// proc-title-template: `{{` is a literal brace, `{name}` must be a known variable, and the
/// template may not be empty.
/// Redis's validateProcTitleTemplate: the template expands, with an empty title and this
/// standalone server's values, to something other than spaces.
fn valid_proc_title_template(t: &str) -> bool {
    let var = |name: &str| match name {
        "title" | "server-mode" | "unixsocket" => Some(String::new()),
        "listen-addr" | "port" | "tls-port" | "config-file" => Some("x".into()),
        _ => None,
    };
    expand_proc_title(t, var).is_some_and(|title| !title.is_empty())
}

/// A proc-title-template expanded as Redis's sdstemplate expands it (`{name}` from `var`, `{{` a
/// literal brace), then trimmed of spaces at both ends; None for an unknown variable or a brace
/// left open.
pub fn expand_proc_title(template: &str, var: impl Fn(&str) -> Option<String>) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return None;
        }
        if let Some(stripped) = after.strip_prefix('{') {
            out.push('{');
            rest = stripped;
            continue;
        }
        let close = after.find('}')?;
        out.push_str(&var(&after[..close])?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out.trim_matches(' ').to_string())
}

fn parse_number(v: &str, fmt: NumFmt) -> Result<i128, String> {
    match fmt {
        NumFmt::Int => crate::util::num::parse_i64(v.as_bytes())
            .map(i128::from)
            .ok_or_else(|| "argument couldn't be parsed into an integer".into()),
        NumFmt::Mem => parse_memory(v).map(i128::from).ok_or_else(|| "argument must be a memory value".into()),
        NumFmt::MemPct => {
            if let Some(m) = parse_memory(v) {
                return Ok(m as i128);
            }
            if v.len() > 1 && v.ends_with('%') {
                if let Some(p) = crate::util::num::parse_i64(&v.as_bytes()[..v.len() - 1]).filter(|&p| p >= 0) {
                    return Ok(-(p as i128));
                }
            }
            Err("argument must be a memory or percent value".into())
        }
        NumFmt::Octal => {
            strtoll_full(v, 8).map(i128::from).ok_or_else(|| "argument couldn't be parsed as an octal number".into())
        }
    }
}

/// Per-load state: whether we are reading the config file and whether a `save` line was seen.
#[derive(Debug, Default)]
pub struct LoadState {
    pub reading_file: bool,
    pub save_loaded: bool,
    pub module_configs: usize,
    pub loadmodules: usize,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Cli {
    Version,
    Help,
    TestMemory,
    CheckSystem,
    Run { config_file: Option<String>, from_stdin: bool, options: String },
}

/// Appends `s` quoted as Redis's sdscatrepr does (so split_args reads it back unchanged).
pub fn quote_repr(out: &mut String, s: &[u8]) {
    out.push('"');
    for &c in s {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            c if c.is_ascii_graphic() || c == b' ' => out.push(c as char),
            c => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
}

/// Parses redis-server's argv (without the program name) the way Redis 7.0's main() does.
pub fn parse_cli(args: &[String]) -> Cli {
    if let Some(first) = args.first() {
        match first.as_str() {
            "-v" | "--version" => return Cli::Version,
            "-h" | "--help" => return Cli::Help,
            "--test-memory" => return Cli::TestMemory,
            "--check-system" => return Cli::CheckSystem,
            _ => {}
        }
    }
    let mut config_file = None;
    let mut j = 0;
    if let Some(first) = args.first() {
        if !first.starts_with('-') {
            config_file = Some(first.clone());
            j = 1;
        }
    }
    let mut options = String::new();
    let mut from_stdin = false;
    let mut handled_last = true;
    let n = args.len();
    while j < n {
        let a = &args[j];
        if a == "-" && (j == 0 || j == n - 1) {
            from_stdin = true;
        } else if handled_last && a.starts_with("--") {
            if !options.is_empty() {
                options.push('\n');
            }
            options.push_str(&a[2..]);
            options.push(' ');
            let parts = crate::resp::parser::split_args(a.as_bytes()).map(|v| v.len()).unwrap_or(1);
            if parts == 1 {
                handled_last = false;
                let is_save = a.eq_ignore_ascii_case("--save");
                if is_save && j != n - 1 && args[j + 1].starts_with("--") {
                    options.push_str("\"\"");
                    handled_last = true;
                } else if is_save && j == n - 1 {
                    options.push_str("\"\"");
                }
            } else {
                handled_last = true;
            }
        } else {
            quote_repr(&mut options, a.as_bytes());
            options.push(' ');
            handled_last = true;
        }
        j += 1;
    }
    Cli::Run { config_file, from_stdin, options }
}

/// A fatal startup problem: the exact text to print on stderr before exit(1).
#[derive(Debug)]
pub struct Fatal(pub String);

fn fatal_line(linenum: usize, line: &str, reason: &str) -> Fatal {
    Fatal(format!(
        "\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\nReading the configuration file, at line {linenum}\n>>> '{line}'\n{reason}\n",
        crate::REDIS_VERSION
    ))
}

fn fatal_plain(reason: &str) -> Fatal {
    Fatal(format!("\n*** FATAL CONFIG FILE ERROR (Redis {}) ***\n{reason}\n", crate::REDIS_VERSION))
}

/// Redis logs this one before logging is set up: a log-format line on stdout, then exit(1).
fn fatal_open(path: &str, e: &std::io::Error) -> Fatal {
    let why = e.raw_os_error().map(strerror).unwrap_or_else(|| e.to_string());
    Fatal(format!(
        "{}:C {} # Fatal error, can't open config file '{path}': {why}\n",
        std::process::id(),
        crate::log::timestamp()
    ))
}

/// Reads a file (or every file a glob pattern names, in order) as Redis's loadServerConfig.
fn read_config_source(path: &str) -> Result<String, Fatal> {
    if path.contains(['*', '?', '[']) {
        let mut out = String::new();
        for p in glob_files(path) {
            out.push_str(&std::fs::read_to_string(&p).map_err(|e| fatal_open(&p, &e))?);
        }
        return Ok(out);
    }
    let bytes = std::fs::read(path).map_err(|e| fatal_open(path, &e))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The files matching a glob pattern (wildcards in the last path component only), sorted.
fn glob_files(pattern: &str) -> Vec<String> {
    let (dir, pat) = match pattern.rfind('/') {
        Some(i) => (&pattern[..i.max(1)], &pattern[i + 1..]),
        None => (".", pattern),
    };
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.') && crate::glob::glob_match(pat.as_bytes(), n.as_bytes(), false))
                .map(|n| if dir == "." && !pattern.starts_with("./") { n } else { format!("{dir}/{n}") })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

impl Config {
    /// Builds the configuration from the command line: file, stdin, then `--name value` options.
    pub fn load(config_file: Option<&str>, from_stdin: bool, options: &str) -> Result<Config, Fatal> {
        // Resolved before loading: a `dir` line changes the working directory.
        let absolute_config_path = config_file.map(|f| {
            std::fs::canonicalize(f).map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| f.to_string())
        });
        let mut text = String::new();
        if let Some(f) = config_file {
            text.push_str(&read_config_source(f)?);
        }
        if from_stdin {
            println!("{}:C {} # Reading config from stdin", std::process::id(), crate::log::timestamp());
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s);
            text.push_str(&s);
        }
        text.push('\n');
        text.push_str(options);
        let mut cfg = Config::default();
        let mut state = LoadState { reading_file: true, ..Default::default() };
        cfg.load_string(&text, &mut state)?;
        if state.module_configs > 0 && state.loadmodules == 0 {
            return Err(Fatal(format!(
                "{}:M {} # Module Configuration detected without loadmodule directive or no ApplyConfig call: aborting\n",
                std::process::id(),
                crate::log::timestamp()
            )));
        }
        if !cfg.logfile.is_empty() {
            if let Err(e) = std::fs::OpenOptions::new().create(true).append(true).open(&cfg.logfile) {
                let why = e.raw_os_error().map(strerror).unwrap_or_else(|| e.to_string());
                return Err(fatal_plain(&format!("Can't open the log file: {why}")));
            }
        }
        cfg.dir = cfg.get(lookup("dir").expect("dir is in the table"));
        cfg.config_file = absolute_config_path;
        for name in cfg.unimplemented_in_use() {
            cfg.warnings.push(format!("not implemented yet: {name} (value stored for CONFIG GET only)"));
        }
        if cfg.loglevel == "nothing" {
            cfg.warnings.push("not implemented yet: loglevel nothing (logging at notice)".into());
        }
        Ok(cfg)
    }

    /// Applies every line of a config text (Redis's loadServerConfigFromString).
    pub fn load_string(&mut self, text: &str, state: &mut LoadState) -> Result<(), Fatal> {
        for (i, raw) in text.split('\n').enumerate() {
            let line = raw.trim_matches([' ', '\t', '\r', '\n']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail = |reason: &str| fatal_line(i + 1, line, reason);
            let Some(argv) = crate::resp::parser::split_args(line.as_bytes()) else {
                return Err(fail("Unbalanced quotes in configuration line"));
            };
            if argv.is_empty() {
                continue;
            }
            let argv: Vec<String> = argv.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            let name = argv[0].to_ascii_lowercase();
            if let Some(desc) = lookup(&name) {
                // A multi-argument directive given one non-empty argument splits it again as
                // Redis's loader does, with sdssplitargs (`save "3600 1 300 100"`); unbalanced
                // quotes there leave no arguments.
                let args: Vec<String> = if desc.has(MULTI_ARG) && argv.len() == 2 && !argv[1].is_empty() {
                    crate::resp::parser::split_args(argv[1].as_bytes())
                        .unwrap_or_default()
                        .iter()
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect()
                } else {
                    argv[1..].to_vec()
                };
                self.set_directive(desc, &args, state).map_err(|e| fail(&e))?;
                continue;
            }
            let argc = argv.len();
            match name.as_str() {
                "list-max-ziplist-entries" | "list-max-ziplist-value" | "lua-replicate-commands" if argc == 2 => {}
                "include" if argc == 2 => {
                    let inner = read_config_source(&argv[1])?;
                    self.load_string(&inner, state)?;
                }
                "rename-command" if argc == 3 => {
                    self.renamed_commands.push((argv[1].clone(), argv[2].clone()));
                    if let Err(why) = check_renames(&self.renamed_commands) {
                        return Err(fail(why));
                    }
                }
                "user" if argc >= 2 => self.users.push(argv[1..].to_vec()),
                "loadmodule" if argc >= 2 => {
                    state.loadmodules += 1;
                    self.warnings.push(format!("not implemented yet: loadmodule {}", argv[1]))
                }
                n if n.contains('.') => {
                    if argc < 2 {
                        return Err(fail("Module config specified without value"));
                    }
                    state.module_configs += 1;
                }
                "sentinel" => {
                    if argc != 1 {
                        return Err(fail("sentinel directive while not in sentinel mode"));
                    }
                }
                _ => return Err(fail("Bad directive or wrong number of arguments")),
            }
        }
        Ok(())
    }

    /// CONFIG REWRITE: updates the config file in place, keeping comments and unknown lines,
    /// reusing each directive's old lines and appending the rest under Redis's signature line.
    /// `users` are the `user` lines to write (none when an aclfile holds the users).
    pub fn rewrite(&self, path: &str, users: &[String], force_all: bool) -> std::io::Result<()> {
        const SIGNATURE: &str = "# Generated by CONFIG REWRITE";
        let old = match std::fs::read(path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let mut lines: Vec<String> = Vec::new();
        let mut by_option: HashMap<String, std::collections::VecDeque<usize>> = HashMap::new();
        let mut needs_signature = true;
        let old_lines: Vec<&str> = if old.is_empty() { Vec::new() } else { old.split('\n').collect() };
        for raw in old_lines {
            let line = raw.trim_matches(['\r', '\n', '\t', ' ']);
            if line.is_empty() || line.starts_with('#') {
                if line == SIGNATURE {
                    needs_signature = false;
                }
                lines.push(line.to_string());
                continue;
            }
            let argv = crate::resp::parser::split_args(line.as_bytes());
            let name = argv.as_ref().and_then(|a| a.first()).map(|n| String::from_utf8_lossy(n).to_ascii_lowercase());
            let keep_verbatim =
                matches!(name.as_deref(), Some("include" | "rename-command" | "loadmodule" | "sentinel"));
            match name {
                Some(n) if n == "user" => {
                    by_option.entry(n).or_default().push_back(lines.len());
                    lines.push(line.to_string());
                }
                Some(n) if lookup(&n).is_some() => {
                    let canonical = n.replace("slave", "replica");
                    let canonical = lookup(&canonical).map(|d| d.name.to_string()).unwrap_or(canonical);
                    by_option.entry(canonical).or_default().push_back(lines.len());
                    lines.push(line.to_string());
                }
                Some(_) if keep_verbatim => lines.push(line.to_string()),
                _ => lines.push(format!("# ??? {line}")),
            }
        }
        let mut processed: Vec<&str> = Vec::new();
        for desc in TABLE {
            processed.push(desc.name);
            for (line, force) in self.rewrite_lines(desc) {
                match by_option.get_mut(desc.name).and_then(|q| q.pop_front()) {
                    Some(at) => lines[at] = line,
                    None if force || force_all => {
                        if needs_signature {
                            lines.push(SIGNATURE.to_string());
                            needs_signature = false;
                        }
                        lines.push(line);
                    }
                    None => {}
                }
            }
        }
        processed.push("user");
        for line in users {
            match by_option.get_mut("user").and_then(|q| q.pop_front()) {
                Some(at) => lines[at] = line.clone(),
                None => {
                    if needs_signature {
                        lines.push(SIGNATURE.to_string());
                        needs_signature = false;
                    }
                    lines.push(line.clone());
                }
            }
        }
        // Lines of processed options that were not reused (duplicates, removed values) go away.
        for name in processed {
            if let Some(q) = by_option.get(name) {
                for &at in q {
                    lines[at].clear();
                }
            }
        }
        let mut content = String::new();
        let mut was_empty = false;
        for l in &lines {
            if l.is_empty() {
                if was_empty {
                    continue;
                }
                was_empty = true;
            } else {
                was_empty = false;
            }
            content.push_str(l);
            content.push('\n');
        }
        let tmp = format!("{path}.tmp-{}", std::process::id());
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(content.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    /// The lines CONFIG REWRITE writes for one directive, each with whether it must be written
    /// even when the old file does not mention the directive (value differs from the default).
    fn rewrite_lines(&self, desc: &Desc) -> Vec<(String, bool)> {
        let name = desc.name;
        let value = self.get(desc);
        let differs = value != desc.default;
        let quoted = |v: &str| {
            let mut s = format!("{name} ");
            quote_repr(&mut s, v.as_bytes());
            s
        };
        match desc.kind {
            Kind::Bool | Kind::Enum(_) => vec![(format!("{name} {value}"), differs)],
            Kind::Num { fmt, .. } => {
                let text = match fmt {
                    NumFmt::Mem => format_memory(value.parse().unwrap_or(0)),
                    NumFmt::MemPct if !value.ends_with('%') => format_memory(value.parse().unwrap_or(0)),
                    _ => value.clone(),
                };
                vec![(format!("{name} {text}"), differs)]
            }
            Kind::Str => {
                let null_when_empty = !matches!(
                    name,
                    "aclfile"
                        | "cluster-config-file"
                        | "syslog-ident"
                        | "dbfilename"
                        | "appendfilename"
                        | "appenddirname"
                        | "ignore-warnings"
                        | "proc-title-template"
                        | "logfile"
                        | "locale-collate"
                );
                if value.is_empty() && null_when_empty {
                    return Vec::new();
                }
                vec![(quoted(&value), differs)]
            }
            Kind::Special => match name {
                "dir" => vec![(quoted(&value), true)],
                "save" => {
                    if self.save.is_empty() {
                        vec![("save \"\"".to_string(), true)]
                    } else {
                        self.save.iter().map(|(s, c)| (format!("save {s} {c}"), true)).collect()
                    }
                }
                "bind" => {
                    let line = if self.bind.is_empty() { "bind \"\"".to_string() } else { format!("bind {value}") };
                    vec![(line, differs)]
                }
                "notify-keyspace-events" => vec![(quoted(&value), differs)],
                "replicaof" if value.is_empty() => Vec::new(),
                "latency-tracking-info-percentiles" => {
                    let line = if value.is_empty() { format!("{name} \"\"") } else { format!("{name} {value}") };
                    vec![(line, true)]
                }
                "client-output-buffer-limit" => {
                    let defaults = parse_obuf(desc.default);
                    parse_obuf(&value)
                        .into_iter()
                        .zip(defaults)
                        .map(|((n, h, s, t), dflt)| {
                            let differs = (h, s, t) != (dflt.1, dflt.2, dflt.3);
                            // CONFIG GET says "slave", the rewritten file says "replica".
                            let n = if n == "slave" { "replica" } else { n.as_str() };
                            let line =
                                format!("{name} {n} {} {} {t}", format_memory(h as i128), format_memory(s as i128));
                            (line, differs)
                        })
                        .collect()
                }
                _ => vec![(format!("{name} {value}"), differs)],
            },
        }
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
    pub static WAKEUP_COALESCING_US: AtomicU64 = AtomicU64::new(25);
    /// tls-replication: the replica link dials its master over TLS.
    pub static TLS_REPLICATION: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    /// protected-mode is on and the default user has no password: non-local clients are refused.
    pub static PROTECTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

    /// Publishes the config's network-side values.
    pub fn publish(cfg: &super::Config) {
        MAXCLIENTS.store(cfg.maxclients, Ordering::Relaxed);
        PROTO_MAX_BULK_LEN.store(cfg.proto_max_bulk_len as u64, Ordering::Relaxed);
        CLIENT_QUERY_BUFFER_LIMIT.store(cfg.client_query_buffer_limit as u64, Ordering::Relaxed);
        TCP_KEEPALIVE.store(cfg.tcp_keepalive, Ordering::Relaxed);
        WAKEUP_COALESCING_US.store(cfg.wakeup_coalescing_us, Ordering::Relaxed);
        TLS_REPLICATION.store(cfg.other.get("tls-replication").is_some_and(|v| v == "yes"), Ordering::Relaxed);
        // The default user's password decides with protected-mode (users::acl_changed keeps it
        // current when ACL SETUSER changes that user).
        PROTECTED.store(cfg.protected_mode && cfg.requirepass.is_none(), Ordering::Relaxed);
    }

    /// What rebinds the TCP listeners to a config's port and bind list, installed by the server
    /// once its accept loops run.
    pub type Rebinder = fn(&super::Config) -> Result<(), String>;
    static REBINDER: std::sync::OnceLock<Rebinder> = std::sync::OnceLock::new();

    pub fn install_rebinder(f: Rebinder) {
        let _ = REBINDER.set(f);
    }

    /// Listens on `cfg`'s port and bind addresses instead of the current ones: all or nothing
    /// (on an error the old listeners stay).
    pub fn rebind_tcp(cfg: &super::Config) -> Result<(), String> {
        match REBINDER.get() {
            Some(rebind) => rebind(cfg),
            None => Err("the listeners are not running".into()),
        }
    }

    /// What builds the TLS contexts from a config, and what rebinds the TLS listeners to its
    /// tls-port and bind list, installed by the server once its accept loops run.
    /// Builds the contexts, rebinds the TLS listeners, tells whether contexts exist.
    type TlsHooks = (Rebinder, Rebinder, fn() -> bool);
    static TLS: std::sync::OnceLock<TlsHooks> = std::sync::OnceLock::new();

    pub fn install_tls(configure: Rebinder, rebind: Rebinder, configured: fn() -> bool) {
        let _ = TLS.set((configure, rebind, configured));
    }

    /// Whether TLS contexts have been built (Redis's isTlsConfigured).
    pub fn tls_configured() -> bool {
        TLS.get().is_some_and(|(_, _, configured)| configured())
    }

    /// Rebuilds the TLS contexts (certificates, CA, protocols, ciphers) for new connections; on
    /// an error the current contexts stay.
    pub fn configure_tls(cfg: &super::Config) -> Result<(), String> {
        match TLS.get() {
            Some((configure, _, _)) => configure(cfg),
            None => Err("the listeners are not running".into()),
        }
    }

    /// Listens on `cfg`'s tls-port and bind addresses instead of the current ones.
    pub fn rebind_tls(cfg: &super::Config) -> Result<(), String> {
        match TLS.get() {
            Some((_, rebind, _)) => rebind(cfg),
            None => Err("the listeners are not running".into()),
        }
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

/// Validates a `rename-command` list against the command table with Redis's errors. The table
/// sits above configuration, so the executor's registry installs this check with the table.
pub type RenameCheck = fn(&[(String, String)]) -> Result<(), &'static str>;
static RENAME_CHECK: std::sync::OnceLock<RenameCheck> = std::sync::OnceLock::new();

pub fn install_rename_check(check: RenameCheck) {
    let _ = RENAME_CHECK.set(check);
}

fn check_renames(renames: &[(String, String)]) -> Result<(), &'static str> {
    RENAME_CHECK.get().map_or(Ok(()), |check| check(renames))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        parse_cli(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn command_line_like_redis() {
        match cli(&["/etc/r.conf", "--port", "7000", "--save", "--loglevel", "verbose"]) {
            Cli::Run { config_file, from_stdin, options } => {
                assert_eq!(config_file.as_deref(), Some("/etc/r.conf"));
                assert!(!from_stdin);
                assert_eq!(options, "port \"7000\" \nsave \"\"\nloglevel \"verbose\" ");
            }
            other => panic!("{other:?}"),
        }
        match cli(&["--port 6380", "-"]) {
            Cli::Run { config_file: None, from_stdin: true, options } => assert_eq!(options, "port 6380 "),
            other => panic!("{other:?}"),
        }
        match cli(&["--save"]) {
            Cli::Run { options, .. } => assert_eq!(options, "save \"\""),
            other => panic!("{other:?}"),
        }
        assert!(matches!(cli(&["-v"]), Cli::Version));
    }

    #[test]
    fn loading_and_errors() {
        let mut c = Config::default();
        let mut st = LoadState { reading_file: true, ..Default::default() };
        c.load_string("save 10 1\nsave 20 2\nmaxmemory 1gb\nhash-max-ziplist-entries 7\n", &mut st).unwrap();
        assert_eq!(c.save, vec![(10, 1), (20, 2)]);
        assert_eq!(c.maxmemory, 1 << 30);
        assert_eq!(c.hash_max_listpack_entries, 7);
        let e = c.load_string("\nport abc", &mut st).unwrap_err().0;
        assert_eq!(
            e,
            "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line 2\n>>> 'port abc'\nargument couldn't be parsed into an integer\n"
        );
        let e = c.load_string("foo bar", &mut st).unwrap_err().0;
        assert!(e.ends_with("Bad directive or wrong number of arguments\n"));
        let e = c.load_string("port 1 2", &mut st).unwrap_err().0;
        assert!(e.ends_with("wrong number of arguments\n"));
    }

    #[test]
    fn rewrite_keeps_comments_and_reuses_lines() {
        let path = std::env::temp_dir().join(format!("ferrodis-rewrite-{}.conf", std::process::id()));
        let path = path.to_string_lossy().into_owned();
        std::fs::write(
            &path,
            "# top  \nport 6379\nsave 100 1\nsave 200 2\nhash-max-ziplist-entries 5\ninclude /x.conf\nbogus 1\n",
        )
        .unwrap();
        let mut c = Config::default();
        let mut st = LoadState::default();
        c.set_directive(lookup("port").unwrap(), &["7000".into()], &mut st).unwrap();
        c.set_directive(lookup("save").unwrap(), &["10".into(), "1".into()], &mut st).unwrap();
        c.set_directive(lookup("hash-max-listpack-entries").unwrap(), &["5".into()], &mut st).unwrap();
        c.set_directive(lookup("maxmemory").unwrap(), &["2gb".into()], &mut st).unwrap();
        c.rewrite(&path, &[], false).unwrap();
        let out = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = out.lines().collect();
        let want =
            ["# top", "port 7000", "save 10 1", "", "hash-max-listpack-entries 5", "include /x.conf", "# ??? bogus 1"];
        assert_eq!(&lines[..7], &want[..]);
        assert!(out.contains("# Generated by CONFIG REWRITE\n"));
        assert!(out.contains("\nmaxmemory 2gb\n"));
        assert!(out.contains(&format!("\ndir \"{}\"\n", std::env::current_dir().unwrap().display())));
        assert!(!out.contains("list-max-listpack-size"), "defaults not in the file stay out: {out}");
    }

    #[test]
    fn later_releases_directives() {
        // Found by exact name, aliases included, but never by CONFIG GET patterns.
        assert_eq!(lookup("LOCALE-COLLATE").map(|d| d.name), Some("locale-collate"));
        assert_eq!(lookup("server-cpulist").map(|d| d.name), Some("server_cpulist"));
        assert_eq!(lookup("primaryauth").map(|d| d.name), Some("masterauth"));
        assert!(lookup("locale-collation").is_none());
        for (name, desc) in all_names() {
            assert!(!desc.has(LATER), "{name}");
            assert!(!LATER_ALIASES.iter().any(|(a, _)| *a == name), "{name}");
        }
        let d = lookup("loglevel").unwrap();
        assert_eq!(parse_value(d, "NOTHING").unwrap().text, "nothing");
        assert_eq!(
            parse_value(d, "loud").unwrap_err(),
            "argument(s) must be one of the following: debug, verbose, notice, warning"
        );
        let mut c = Config::default();
        let mut st = LoadState { reading_file: true, ..Default::default() };
        c.load_string(
            "locale-collate \"\"\nprimaryuser repl\nmax-new-connections-per-cycle 20\nmaxmemory-clients 10%\n",
            &mut st,
        )
        .unwrap();
        assert_eq!(c.get(lookup("masteruser").unwrap()), "repl");
        assert_eq!(c.unimplemented_in_use(), vec!["max-new-connections-per-cycle"]);
        let e = c.load_string("locale-collate a b", &mut st).unwrap_err().0;
        assert!(e.ends_with(">>> 'locale-collate a b'\nwrong number of arguments\n"), "{e}");
        // CONFIG REWRITE keeps an empty locale-collate line, as 7.2 does (its empty string is a value).
        let path = std::env::temp_dir().join(format!("ferrodis-rewrite-later-{}.conf", std::process::id()));
        let path = path.to_string_lossy().into_owned();
        std::fs::write(&path, "locale-collate \"\"\n").unwrap();
        Config::default().rewrite(&path, &[], false).unwrap();
        let out = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(out.starts_with("locale-collate \"\"\n"), "{out}");
    }

    #[test]
    fn values() {
        assert_eq!(parse_memory("1K"), Some(1000));
        assert_eq!(parse_memory("1kb"), Some(1024));
        assert_eq!(parse_memory(""), Some(0));
        assert_eq!(parse_memory("-1"), None);
        assert_eq!(parse_memory("1.5gb"), None);
        assert_eq!(canonical_keyspace_events("KEA").as_deref(), Some("AKE"));
        assert_eq!(canonical_keyspace_events("lgxK").as_deref(), Some("glxK"));
        assert_eq!(canonical_keyspace_events("gsz$lhextdmn").as_deref(), Some("Amn"));
        assert_eq!(canonical_keyspace_events("Knm").as_deref(), Some("nKm"));
        assert_eq!(canonical_keyspace_events("gnl").as_deref(), Some("gln"));
        assert_eq!(canonical_keyspace_events("Z"), None);
        let d = lookup("maxclients").unwrap();
        assert_eq!(parse_value(d, "0").unwrap_err(), "argument must be between 1 and 4294967295 inclusive");
        let d = lookup("maxmemory-clients").unwrap();
        assert_eq!(parse_value(d, "10%").unwrap().text, "10%");
        assert_eq!(parse_value(d, "200%").unwrap_err(), "percentage argument must be less or equal to 100");
        assert_eq!(format_memory(256 << 20), "256mb");
        let mut c = Config::default();
        let mut st = LoadState::default();
        let cobl = lookup("client-output-buffer-limit").unwrap();
        c.set_directive(cobl, &["pubsub".into(), "1mb".into(), "2k".into(), "10".into()], &mut st).unwrap();
        assert_eq!(c.get(cobl), "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 2000 10");
    }
}
