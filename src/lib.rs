//! Ferrodis: a drop-in replacement for redis-server.
//!
//! - `resp`: request parser, `Reply`, RESP2/RESP3 writer (imports nothing of ours).
//! - `types`: value types and their compact encodings (imports nothing of ours but `util`).
//! - `db`: one database: key table, expiry; uses `types`.
//! - `commands`: the command table and one module per command family.
//! - `executor`: the single owner of all databases; `call()` runs each command.
//! - `scripting`: the Lua engine of EVAL (its VM, script cache and sandbox).
//! - `server`: listeners and connection tasks (nothing imports it).
//! - `config`, `log`, `stats`, `slowlog`, `latency`, `proctitle`, `util`: configuration, logging,
//!   counters, the slow log and latency monitor, the process title, helpers.

pub mod acl;
pub mod alloc;
pub mod aof;
pub mod commands;
pub mod config;
pub mod daemon;
pub mod db;
pub mod executor;
pub mod functions;
pub mod glob;
pub mod info;
pub mod latency;
pub mod log;
pub mod proctitle;
pub mod pubsub;
pub mod rdb;
pub mod resp;
pub mod server;
pub mod slowlog;
pub mod spec;
pub mod stats;
pub mod types;
pub mod util;

/// The Redis version whose behaviour we match; reported as redis_version.
pub const REDIS_VERSION: &str = "7.0.15";
/// Our own version (INFO ferrodis_version).
pub const FERRODIS_VERSION: &str = env!("CARGO_PKG_VERSION");
