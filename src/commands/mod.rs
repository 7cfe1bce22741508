//! The command table and what handlers see. One declarative `CommandSpec` per command (and per
//! subcommand of a container such as CONFIG) drives dispatch, arity errors, COMMAND INFO/DOCS,
//! key extraction and commandstats. Families live in their own modules and export a `&[CommandSpec]`.
//!
//! Handlers: `fn(&mut Ctx, &Args) -> CmdResult`, synchronous, no I/O. They reach executor state
//! (databases, clients, config, stats) through `Ctx`; that state's types live in `executor` and are
//! the one place `commands` looks upward (the executor owns them, handlers borrow them per call).

pub mod bitmaps;
pub mod cluster;
pub mod command;
pub mod config;
pub mod connection;
pub mod docs;
pub mod dump;
pub mod error;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod keys;
pub mod lists;
pub mod migrate;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod streams;
pub mod strings;
pub mod transactions;
pub mod users;
pub mod zsets;

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

pub use error::{CmdError, CmdResult};

use crate::db::Db;
use crate::executor::clients::Client;
use crate::executor::State;
use crate::resp::Reply;
use crate::types::Value;

pub type Handler = fn(&mut Ctx, &Args) -> CmdResult;

/// Command flags, as COMMAND INFO names them.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const SENTINEL: u32 = 1 << 14;
    pub const ONLY_SENTINEL: u32 = 1 << 15;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 16;
    pub const PROTECTED: u32 = 1 << 17;
    pub const NO_ASYNC_LOADING: u32 = 1 << 18;
    pub const NO_MULTI: u32 = 1 << 19;
    pub const MOVABLEKEYS: u32 = 1 << 20;
    pub const ALLOW_BUSY: u32 = 1 << 21;
    pub const ASKING: u32 = 1 << 22;

    /// Names in the order Redis 7.0 lists them in COMMAND INFO. MAY_REPLICATE, SENTINEL,
    /// ONLY_SENTINEL and PROTECTED are deliberately absent: Redis never shows them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// ACL categories (the explicit ones; @read @write @fast @slow @admin @dangerous @pubsub
/// @blocking are derived from flags as Redis does).
pub mod acl {
    pub const KEYSPACE: u64 = 1 << 0;
    pub const READ: u64 = 1 << 1;
    pub const WRITE: u64 = 1 << 2;
    pub const SET: u64 = 1 << 3;
    pub const SORTEDSET: u64 = 1 << 4;
    pub const LIST: u64 = 1 << 5;
    pub const HASH: u64 = 1 << 6;
    pub const STRING: u64 = 1 << 7;
    pub const BITMAP: u64 = 1 << 8;
    pub const HYPERLOGLOG: u64 = 1 << 9;
    pub const GEO: u64 = 1 << 10;
    pub const STREAM: u64 = 1 << 11;
    pub const PUBSUB: u64 = 1 << 12;
    pub const ADMIN: u64 = 1 << 13;
    pub const FAST: u64 = 1 << 14;
    pub const SLOW: u64 = 1 << 15;
    pub const BLOCKING: u64 = 1 << 16;
    pub const DANGEROUS: u64 = 1 << 17;
    pub const CONNECTION: u64 = 1 << 18;
    pub const TRANSACTION: u64 = 1 << 19;
    pub const SCRIPTING: u64 = 1 << 20;

    /// Names in Redis's category order (ACL CAT).
    pub const NAMES: &[(u64, &str)] = &[
        (KEYSPACE, "keyspace"),
        (READ, "read"),
        (WRITE, "write"),
        (SET, "set"),
        (SORTEDSET, "sortedset"),
        (LIST, "list"),
        (HASH, "hash"),
        (STRING, "string"),
        (BITMAP, "bitmap"),
        (HYPERLOGLOG, "hyperloglog"),
        (GEO, "geo"),
        (STREAM, "stream"),
        (PUBSUB, "pubsub"),
        (ADMIN, "admin"),
        (FAST, "fast"),
        (SLOW, "slow"),
        (BLOCKING, "blocking"),
        (DANGEROUS, "dangerous"),
        (CONNECTION, "connection"),
        (TRANSACTION, "transaction"),
        (SCRIPTING, "scripting"),
    ];
}

/// Key positions: first, last (negative counts from the end), step. (0, 0, 0) = no keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRange {
    pub first: i32,
    pub last: i32,
    pub step: i32,
}

pub const NO_KEYS: KeyRange = KeyRange { first: 0, last: 0, step: 0 };

pub const fn keys(first: i32, last: i32, step: i32) -> KeyRange {
    KeyRange { first, last, step }
}

/// One command (or subcommand) of the table.
pub struct CommandSpec {
    /// Lower-case name; subcommands carry their own name only (`get` under `config`).
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    pub keys: KeyRange,
    /// Explicit ACL categories (the derived ones are added by `acl_categories`).
    pub acl: u64,
    pub handler: Handler,
    /// Subcommands of a container command (CONFIG, CLIENT, OBJECT, ...); empty otherwise.
    pub subcommands: &'static [CommandSpec],
}

impl std::fmt::Debug for CommandSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandSpec").field("name", &self.name).field("arity", &self.arity).finish()
    }
}

/// Table row constructor: `spec("get", 2, READONLY | FAST, keys(1, 1, 1), acl::STRING, get)`.
pub const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: KeyRange,
    acl: u64,
    handler: Handler,
) -> CommandSpec {
    CommandSpec { name, arity, flags, keys, acl, handler, subcommands: &[] }
}

/// A container command whose work is done by its subcommands.
pub const fn container(name: &'static str, arity: i32, acl: u64, subcommands: &'static [CommandSpec]) -> CommandSpec {
    CommandSpec { name, arity, flags: 0, keys: NO_KEYS, acl, handler: container_without_subcommand, subcommands }
}

fn container_without_subcommand(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    Err(CmdError::WrongArity(String::from_utf8_lossy(args.get(0)).to_lowercase()))
}

impl CommandSpec {
    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    pub fn is_container(&self) -> bool {
        !self.subcommands.is_empty()
    }

    /// The subcommand named `name` (case-insensitive).
    pub fn subcommand(&self, name: &[u8]) -> Option<&'static CommandSpec> {
        self.subcommands.iter().find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
    }

    /// Whether `argc` (command name included) satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = self.arity as i64;
        (a > 0 && argc == a) || (a < 0 && argc >= -a)
    }

    /// All ACL categories, explicit and derived from flags (Redis's setImplicitACLCategories).
    pub fn acl_categories(&self) -> u64 {
        let mut c = self.acl;
        if self.has_flag(flags::WRITE) {
            c |= acl::WRITE;
        }
        if self.has_flag(flags::READONLY) && c & acl::SCRIPTING == 0 {
            c |= acl::READ;
        }
        if self.has_flag(flags::ADMIN) {
            c |= acl::ADMIN | acl::DANGEROUS;
        }
        if self.has_flag(flags::PUBSUB) {
            c |= acl::PUBSUB;
        }
        if self.has_flag(flags::FAST) {
            c |= acl::FAST;
        }
        if self.has_flag(flags::BLOCKING) {
            c |= acl::BLOCKING;
        }
        if c & acl::FAST == 0 {
            c |= acl::SLOW;
        }
        c
    }

    /// Positions of the key arguments in `argv` by the key range (movable-key commands refine this).
    pub fn key_positions(&self, argc: usize) -> Vec<usize> {
        let k = self.keys;
        if k.first <= 0 || k.step <= 0 || argc == 0 {
            return Vec::new();
        }
        let last = if k.last < 0 { argc as i32 + k.last } else { k.last };
        let mut out = Vec::new();
        let mut i = k.first;
        while i <= last && (i as usize) < argc {
            out.push(i as usize);
            i += k.step;
        }
        out
    }
}

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

/// Every command family's table.
pub fn families() -> &'static [&'static [CommandSpec]] {
    FAMILIES
}

struct Registry {
    by_name: HashMap<Vec<u8>, &'static CommandSpec, foldhash::fast::FixedState>,
}

fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut by_name = HashMap::with_hasher(foldhash::fast::FixedState::default());
        for family in families() {
            for spec in family.iter() {
                let previous = by_name.insert(spec.name.as_bytes().to_vec(), spec);
                assert!(previous.is_none(), "command {} defined twice", spec.name);
            }
        }
        Registry { by_name }
    })
}

/// `rename-command` directives in effect: lowercased name → the command it now names, or None
/// for a name renamed away (or to ""). Installed once at startup, before any client.
pub type Renames = HashMap<Vec<u8>, Option<&'static CommandSpec>>;
static RENAMES: OnceLock<Renames> = OnceLock::new();

/// Applies `rename-command from to` directives in order, as Redis's config loader does on its
/// command table (a later directive sees the earlier renames): the errors are Redis's.
pub fn renamed_table(renames: &[(String, String)]) -> Result<Renames, &'static str> {
    let mut table = Renames::new();
    for (from, to) in renames {
        let from = from.to_ascii_lowercase().into_bytes();
        let current = match table.get(&from) {
            Some(entry) => *entry,
            None => registry().by_name.get(&from).copied(),
        };
        let Some(spec) = current else { return Err("No such command in rename-command") };
        table.insert(from, None);
        if !to.is_empty() {
            let to = to.to_ascii_lowercase().into_bytes();
            let taken = match table.get(&to) {
                Some(entry) => entry.is_some(),
                None => registry().by_name.contains_key(&to),
            };
            if taken {
                return Err("Target command name already exists");
            }
            table.insert(to, Some(spec));
        }
    }
    Ok(table)
}

/// Puts the renames into effect for the process's lifetime (called once, at startup).
pub fn install_renames(renames: Renames) {
    let _ = RENAMES.set(renames);
}

/// Finds a top-level command by name, case-insensitively, under `rename-command`.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut lower = [0u8; 32];
    if name.len() > lower.len() {
        return None;
    }
    for (dst, src) in lower.iter_mut().zip(name) {
        *dst = src.to_ascii_lowercase();
    }
    let key = &lower[..name.len()];
    if let Some(renames) = RENAMES.get() {
        if let Some(entry) = renames.get(key) {
            return *entry;
        }
    }
    registry().by_name.get(key).copied()
}

/// `lookup` with a one-entry memo: a connection usually sends the same command again (a
/// pipeline, a job loop, a benchmark), and comparing one name is cheaper than hashing it.
pub fn lookup_cached(name: &[u8], last: &mut Option<&'static CommandSpec>) -> Option<&'static CommandSpec> {
    if let Some(spec) = *last {
        // Under rename-command a command's own name may no longer reach it.
        if RENAMES.get().is_none() && spec.name.as_bytes().eq_ignore_ascii_case(name) {
            return Some(spec);
        }
    }
    let found = lookup(name);
    if found.is_some() {
        *last = found;
    }
    found
}

/// Every top-level command.
pub fn all() -> impl Iterator<Item = &'static CommandSpec> {
    families().iter().flat_map(|f| f.iter())
}

/// The arguments of one command, name included at index 0.
#[derive(Debug, Clone, Default)]
pub struct Args {
    pub argv: Vec<Bytes>,
}

impl Args {
    pub fn new(argv: Vec<Bytes>) -> Self {
        Args { argv }
    }

    pub fn len(&self) -> usize {
        self.argv.len()
    }

    pub fn is_empty(&self) -> bool {
        self.argv.is_empty()
    }

    pub fn get(&self, i: usize) -> &[u8] {
        &self.argv[i]
    }

    /// Argument `i` as a key (same as `get`, named for readability).
    pub fn key(&self, i: usize) -> &[u8] {
        &self.argv[i]
    }

    /// Arguments from `i` on.
    pub fn from(&self, i: usize) -> impl Iterator<Item = &[u8]> {
        self.argv[i.min(self.argv.len())..].iter().map(|b| &b[..])
    }

    /// Argument `i` compared case-insensitively with an ASCII word.
    pub fn is(&self, i: usize, word: &str) -> bool {
        self.argv.get(i).is_some_and(|a| a.eq_ignore_ascii_case(word.as_bytes()))
    }

    pub fn i64(&self, i: usize) -> Result<i64, CmdError> {
        crate::util::num::parse_i64(&self.argv[i]).ok_or(CmdError::NotInteger)
    }

    pub fn f64(&self, i: usize) -> Result<f64, CmdError> {
        crate::util::num::parse_f64(&self.argv[i]).ok_or(CmdError::NotFloat)
    }

    /// Argument `i` as lossy UTF-8 (for error messages and names).
    pub fn str(&self, i: usize) -> String {
        String::from_utf8_lossy(&self.argv[i]).into_owned()
    }
}

/// A blocking command's request to wait (BLPOP, BZPOPMIN, XREAD BLOCK, ...), made through `Ctx::block`.
#[derive(Debug, Clone)]
pub struct BlockRequest {
    /// Keys (in the client's database) whose readiness wakes the client.
    pub keys: Vec<Vec<u8>>,
    /// Absolute unix-ms deadline; 0 waits forever.
    pub deadline_ms: i64,
    /// The reply sent when the deadline passes (a null array for BLPOP, a null bulk for BLMOVE, ...).
    pub timeout_reply: Reply,
    /// The TYPE name a key must have for a wake-up to re-run the command ("list", "zset", "stream");
    /// a key of another type leaves the client waiting, as Redis 7.0 does.
    pub wants_type: &'static str,
    /// The argument list to run on wake instead of the original one (XREAD rewrites `$` into the
    /// ID it stood for when the client blocked, so a re-run reads only newer entries).
    pub rerun_argv: Option<Vec<Bytes>>,
}

/// What a handler sees: the executor state, the calling client, and the command's time snapshot.
pub struct Ctx<'a> {
    pub srv: &'a mut State,
    pub client: &'a mut Client,
    /// Unix milliseconds, fixed for the whole command (and a whole MULTI/EXEC).
    pub now_ms: i64,
    /// The spec being run (the subcommand's, for containers).
    pub spec: &'static CommandSpec,
}

impl Ctx<'_> {
    /// The client's selected database.
    pub fn db(&mut self) -> &mut Db {
        &mut self.srv.dbs[self.client.db]
    }

    /// Looks up `key` for reading: applies lazy expiry, stamps the access time and counts a
    /// keyspace hit or miss (Redis's lookupKeyRead).
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<&Value> {
        let now = self.now_ms;
        // pub/sub hook: the `keymiss` keyspace event (class m), only looked for when enabled.
        if !self.srv.config.notify_keyspace_events.is_empty() && self.srv.dbs[self.client.db].peek(key, now).is_none() {
            self.srv.stats.keyspace_misses += 1;
            self.notify(crate::pubsub::ev::KEY_MISS, "keymiss", key);
            return None;
        }
        let db = &mut self.srv.dbs[self.client.db];
        // CLIENT NO-TOUCH (7.2): reads leave the access time alone.
        let found = if self.client.no_touch { db.peek(key, now) } else { db.get_mut(key, now).map(|v| &*v) };
        if found.is_some() {
            self.srv.stats.keyspace_hits += 1;
        } else {
            self.srv.stats.keyspace_misses += 1;
        }
        found
    }

    /// Looks up `key` for writing: applies lazy expiry, no hit/miss accounting (lookupKeyWrite).
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<&mut Value> {
        let now = self.now_ms;
        self.srv.dbs[self.client.db].get_mut(key, now)
    }

    /// The running command propagates (to the AOF) as `argv` instead of what the client sent
    /// (Redis's rewriteClientCommandVector); only takes effect if the command changed the data.
    pub fn propagate_as(&mut self, argv: Vec<bytes::Bytes>) {
        crate::executor::propagate::rewrite(self.srv, argv);
    }

    /// `propagate_as` with static and dynamic parts mixed: each item is copied once.
    pub fn propagate_as_parts(&mut self, parts: &[&[u8]]) {
        if self.srv.prop.active {
            let argv = parts.iter().map(|p| bytes::Bytes::copy_from_slice(p)).collect();
            crate::executor::propagate::rewrite(self.srv, argv);
        }
    }

    /// Adds an operation to propagate in the client's database, before the command's own.
    pub fn also_propagate(&mut self, parts: &[&[u8]]) {
        if self.srv.prop.active {
            let argv = parts.iter().map(|p| bytes::Bytes::copy_from_slice(p)).collect();
            let db = self.client.db;
            crate::executor::propagate::also(self.srv, db, argv);
        }
    }

    /// The running command is not propagated itself (what it added with `also_propagate` is).
    pub fn force_propagate(&mut self) {
        crate::executor::propagate::force(self.srv);
    }

    pub fn no_propagate(&mut self) {
        crate::executor::propagate::prevent(self.srv);
    }

    /// Whether propagation is being collected (so handlers can skip building rewrites).
    pub fn propagating(&self) -> bool {
        self.srv.prop.active
    }

    /// Whether the command is replayed from the AOF: times already past do not delete keys then,
    /// as Redis keeps them until loading ends.
    pub fn loading(&self) -> bool {
        self.srv.aof.loading
    }

    /// Records that a write changed the dataset (`dirty` for save points, WATCH later).
    pub fn dirty(&mut self, n: u64) {
        self.srv.dirty += n;
    }

    /// Records a keyspace modification of `key` in the client's database: counts a change for
    /// save points, fails the EXEC of clients watching the key, and wakes clients blocked on it.
    pub fn modified(&mut self, key: &[u8]) {
        let db = self.client.db;
        self.modified_in(db, key);
    }

    /// `modified` for a key of another database (MOVE, COPY ... DB n).
    pub fn modified_in(&mut self, db: usize, key: &[u8]) {
        self.srv.dirty += 1;
        if !self.srv.watched.is_empty() {
            if let Some(ids) = self.srv.watched.get(&(db, key.to_vec())) {
                for &id in ids {
                    crate::executor::clients::flag_dirty_cas(&mut self.srv.clients, self.client, id);
                }
            }
        }
        self.srv.signal_ready(db, key);
        if self.srv.tracking.is_active() {
            crate::tracking::invalidate_key(self.srv, Some(self.client.id), key);
        }
    }

    /// Fails the EXEC of every client watching a key of database `db` that exists there or in
    /// `replacement`, the database whose data takes its place (FLUSHDB and FLUSHALL call this
    /// with none, SWAPDB with the other index, both before changing anything), as Redis's
    /// touchAllWatchedKeysInDb does.
    pub fn touch_watched_in_db(&mut self, db: usize, replacement: Option<usize>) {
        if self.srv.watched.is_empty() {
            return;
        }
        let now = self.now_ms;
        let dbs = &self.srv.dbs;
        let exists = |key: &[u8]| dbs[db].is_live(key, now) || replacement.is_some_and(|r| dbs[r].is_live(key, now));
        let hit: Vec<u64> = self
            .srv
            .watched
            .iter()
            .filter(|((d, key), _)| *d == db && exists(key))
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect();
        for id in hit {
            crate::executor::clients::flag_dirty_cas(&mut self.srv.clients, self.client, id);
        }
    }

    /// Whether a blocking command may wait now: not inside MULTI/EXEC or a script, where it must
    /// answer as its non-blocking form (with its timeout reply when there is nothing to serve).
    pub fn may_block(&self) -> bool {
        !self.client.in_exec
    }

    /// Parks the client until one of `keys` is signalled ready (then the executor runs the same
    /// command again) or `deadline_ms` passes (then the client gets `timeout_reply`). The handler
    /// returns what this returns; nothing is written to the client until then.
    pub fn block(
        &mut self,
        keys: Vec<Vec<u8>>,
        deadline_ms: i64,
        timeout_reply: Reply,
        wants_type: &'static str,
    ) -> CmdResult {
        if !self.may_block() {
            return Ok(timeout_reply);
        }
        self.client.block_request =
            Some(BlockRequest { keys, deadline_ms, timeout_reply, wants_type, rerun_argv: None });
        Ok(Reply::Raw(Vec::new()))
    }

    /// Signals that `key` in the client's database may now serve blocked clients (a push, ZADD,
    /// XADD, a rename or a MOVE onto it). Cheap when nobody waits.
    pub fn signal_ready(&mut self, key: &[u8]) {
        let db = self.client.db;
        self.srv.signal_ready(db, key);
    }

    /// Parses a blocking timeout in seconds (a float, as Redis 7.0 accepts) into an absolute unix-ms
    /// deadline, 0 meaning forever, with Redis's errors.
    pub fn parse_timeout(&self, arg: &[u8]) -> Result<i64, CmdError> {
        let ms =
            crate::util::num::timeout_ms(arg).ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
        if ms < 0 {
            return Err(CmdError::err("timeout is negative"));
        }
        if ms == 0 {
            return Ok(0);
        }
        // Redis 7.0 has no "out of range" error here: a deadline past the end of time serves at
        // once when it can and otherwise waits for good.
        Ok(self.now_ms.saturating_add(ms))
    }

    /// Keyspace notification (pub/sub hook): publishes `event` for `key` in the client's database
    /// when notify-keyspace-events enables `class` (a `crate::pubsub::ev` bit). Free when disabled.
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        if !self.srv.config.notify_keyspace_events.is_empty() {
            let db = self.client.db;
            pubsub::notify(self.srv, Some(&*self.client), class, event, key, db);
        }
    }

    /// Stores `value` under `key` in the client's database, dropping any TTL, and publishes the
    /// `new` event when the key did not exist, as Redis's dbAdd does (before the command's own
    /// event). A key whose time has passed is expired first, as Redis's write lookup would.
    pub fn set_key(&mut self, key: &[u8], value: Value) -> Option<Value> {
        let now = self.now_ms;
        let db = self.db();
        if db.expires_len() > 0 {
            db.expire_at(key, now);
        }
        let old = db.set(key, value, now);
        if old.is_none() {
            self.notify(crate::pubsub::ev::NEW, "new", key);
        }
        old
    }

    /// `notify` for a key of another database (MOVE's move_to, COPY ... DB's copy_to).
    pub fn notify_in(&mut self, db: usize, class: u32, event: &str, key: &[u8]) {
        if !self.srv.config.notify_keyspace_events.is_empty() {
            pubsub::notify(self.srv, Some(&*self.client), class, event, key, db);
        }
    }

    /// The client's RESP protocol version.
    pub fn proto(&self) -> u8 {
        self.client.proto
    }
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
        let mut last = None;
        for name in ["GET", "get", "GeT", "set", "nosuchcommand", "SET", "lpush", "LPUSH", "lpushx", "config"] {
            let expected = lookup(name.as_bytes()).map(|s| s.name);
            assert_eq!(lookup_cached(name.as_bytes(), &mut last).map(|s| s.name), expected, "{name}");
        }
        assert_eq!(last.map(|s| s.name), Some("config"));
    }
}
