//! Ferrodis: a drop-in replacement for redis-server.
//!
//! The modules stand in layers, each importing only those below (README "Project layout";
//! `tests/layers.rs` enforces it), from the bottom:
//! - `util`, `glob`; `resp`, `alloc`, `log`: helpers, the protocol, the allocator, logging.
//! - `types`, then `db`: values and their encodings; one database with expiry.
//! - `spec`: what a command is (flags, key specs, `CommandSpec`, `Args`, `CmdError`, docs).
//! - `config`, then the services `stats`, `slowlog`, `latency`, `proctitle`, `daemon`,
//!   `pubsub`, `acl`, `functions`, `cluster` (cluster state, bus codec, nodes.conf), `watchdog`; then the
//!   persistence formats `rdb`, `aof`.
//! - `executor`: the single owner of all state; `call()` runs each command; scripts, tracking.
//! - `info`, then `commands` (one module per family), then `server` (listeners, connections).

pub mod acl;
pub mod alloc;
pub mod aof;
pub mod cluster;
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
pub mod watchdog;

/// The Redis version whose behaviour we match; reported as redis_version.
pub const REDIS_VERSION: &str = "7.0.15";
/// Our own version (INFO ferrodis_version).
pub const FERRODIS_VERSION: &str = env!("CARGO_PKG_VERSION");
