//! The command families: one module per family, each exporting its rows of the command table
//! (`&[CommandSpec]`) and their handlers. This is the top of the command stack: the row type and
//! its flags live in `spec`, what handlers see (`Ctx`) and dispatch in `executor`, which gets
//! the table from `install()` at startup and so never imports a family.
//!
//! Handlers: `fn(&mut Ctx, &Args) -> CmdResult`, synchronous, no I/O.

pub mod bitmaps;
pub mod client;
pub mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
pub mod dump;
pub mod functions;
pub mod geo;
#[cfg(test)]
pub mod harness;
pub mod hashes;
pub mod hyperloglog;
pub mod keys;
pub mod latency;
pub mod lists;
pub mod lolwut;
pub mod memory;
pub mod migrate;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scan;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod slowlog;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod transactions;
pub mod users;
pub mod zsets;

pub use crate::executor::ctx::{BlockRequest, Ctx};
pub use crate::executor::registry::{all, container, families, lookup, lookup_cached, CommandSpec, Handler};
pub use crate::spec::{acl, docs, error, flags, keys, spec, Args, CmdError, CmdResult, KeyRange, NO_KEYS};

use crate::resp::Reply;

/// From this many elements, a whole-collection read (SMEMBERS, HGETALL, ...) replies with a
/// snapshot encoded off the executor (`Reply::Deferred`, see `types::cow`) rather than encoding
/// in place: around 100 us of encoding, where the hop to the blocking pool starts to pay.
pub const DEFER_MIN_ELEMENTS: usize = 4096;

/// Every command family's table, in one list.
static FAMILIES: &[&[CommandSpec]] = &[
    transactions::COMMANDS,
    strings::COMMANDS,
    lists::COMMANDS,
    hashes::COMMANDS,
    sets::COMMANDS,
    zsets::COMMANDS,
    geo::COMMANDS,
    bitmaps::COMMANDS,
    hyperloglog::COMMANDS,
    keys::COMMANDS,
    server::COMMANDS,
    lolwut::COMMANDS,
    config::COMMANDS,
    command::COMMANDS,
    connection::COMMANDS,
    streams::COMMANDS,
    pubsub::COMMANDS,
    sort::COMMANDS,
    persistence::COMMANDS,
    dump::COMMANDS,
    migrate::COMMANDS,
    cluster::COMMANDS,
    replication::COMMANDS,
    scripting::COMMANDS,
    functions::COMMANDS,
    users::COMMANDS,
];

/// Puts the table into effect for dispatch (idempotent; called at startup, before any client).
pub fn install() {
    crate::executor::registry::install(FAMILIES);
}

/// Reply helper: the integer 1 or 0 for a boolean outcome (Redis's shared.cone / czero).
pub fn int_bool(b: bool) -> Reply {
    Reply::Int(b as i64)
}

/// Client names may not contain spaces, newlines or other special characters (CLIENT SETNAME, HELLO).
pub fn validate_client_name(name: &[u8]) -> Result<(), CmdError> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err("Client names cannot contain spaces, newlines or special characters."));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_cached_matches_lookup() {
        install();
        let mut last = None;
        for name in ["GET", "get", "GeT", "set", "nosuchcommand", "SET", "lpush", "LPUSH", "lpushx", "config"] {
            let expected = lookup(name.as_bytes()).map(|s| s.name);
            assert_eq!(lookup_cached(name.as_bytes(), &mut last).map(|s| s.name), expected, "{name}");
        }
        assert_eq!(last.map(|s| s.name), Some("config"));
    }
}
