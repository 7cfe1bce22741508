//! `Ctx`: what a handler sees while it runs: the executor state, the calling client and the
//! command's time snapshot, with the narrow operations handlers use on them (typed lookups with
//! Redis's expiry and hit/miss rules, change notification, propagation rewrites, blocking).
//!
//! The state and the client are private: a data-type handler (strings, lists, sets, ...) reaches
//! the keyspace only through the calls below (`read::<Set>`, `write_or_create::<Hash>`,
//! `modified`, `config`), so what a write must do (expiry, WATCH, keyspace events, blocked
//! clients, the dirty count) is done in one place. The families that manage the server itself
//! (CLIENT, CONFIG, DEBUG, replication, cluster, ACL, scripting, ...) say so by taking the admin
//! handle, `admin()` / `admin_and_client()`, which is the whole `State`.

use bytes::Bytes;

use super::clients::Client;
use super::registry::CommandSpec;
use super::State;
use crate::config::Config;
use crate::db::Db;
use crate::resp::Reply;
use crate::spec::{CmdError, CmdResult};
use crate::types::{Hash, List, RStr, Set, Stream, Value, ZSet};

/// A type a key can hold, for the typed lookups (`ctx.read::<Set>(key)`): how to see it inside
/// a `Value`, and the empty value a write creates.
pub trait Typed: Sized {
    fn of(v: &Value) -> Option<&Self>;
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
    fn empty() -> Value;
}

macro_rules! typed {
    ($ty:ty, $variant:ident, $empty:expr) => {
        impl Typed for $ty {
            fn of(v: &Value) -> Option<&Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn of_mut(v: &mut Value) -> Option<&mut Self> {
                match v {
                    Value::$variant(x) => Some(x),
                    _ => None,
                }
            }
            fn empty() -> Value {
                $empty
            }
        }
    };
}

typed!(RStr, Str, Value::Str(RStr::from_bytes(b"")));
typed!(List, List, Value::List(Box::default()));
typed!(Hash, Hash, Value::Hash(Box::default()));
typed!(Set, Set, Value::Set(Box::default()));
typed!(ZSet, ZSet, Value::ZSet(Box::default()));
typed!(Stream, Stream, Value::Stream(Box::new(Stream::new())));

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
    srv: &'a mut State,
    client: &'a mut Client,
    /// Unix milliseconds, fixed for the whole command (and a whole MULTI/EXEC).
    now_ms: i64,
    /// The spec being run (the subcommand's, for containers).
    spec: &'static CommandSpec,
}

impl<'a> Ctx<'a> {
    /// The context for running `spec` for `client` at `now_ms` (the executor, and unit tests).
    pub fn new(srv: &'a mut State, client: &'a mut Client, now_ms: i64, spec: &'static CommandSpec) -> Self {
        Ctx { srv, client, now_ms, spec }
    }
}

impl Ctx<'_> {
    /// Unix milliseconds, fixed for the whole command (and a whole MULTI/EXEC): lazy expiry, TTL
    /// replies and every time a command stores see this one "now".
    pub fn now_ms(&self) -> i64 {
        self.now_ms
    }

    /// The spec being run (the subcommand's, for containers).
    pub fn spec(&self) -> &'static CommandSpec {
        self.spec
    }

    /// The admin handle: the whole server state, for the families that manage the server
    /// (CLIENT, CONFIG, DEBUG, replication, cluster, ACL, scripting, persistence, ...). Data-type
    /// handlers use the narrow calls instead.
    pub fn admin(&mut self) -> &mut State {
        self.srv
    }

    /// The admin handle, read-only (INFO-like reports that also look at the calling client).
    pub fn state(&self) -> &State {
        self.srv
    }

    /// The admin handle together with the calling client, for calls that need both at once.
    pub fn admin_and_client(&mut self) -> (&mut State, &mut Client) {
        (self.srv, self.client)
    }

    /// The calling client (read-only).
    pub fn client(&self) -> &Client {
        self.client
    }

    /// The calling client, to change its own connection state (SELECT, CLIENT SETNAME, MULTI, ...).
    pub fn client_mut(&mut self) -> &mut Client {
        self.client
    }

    /// The configuration in force (read-only; CONFIG SET goes through the admin handle).
    pub fn config(&self) -> &Config {
        &self.srv.config
    }

    /// The index of the client's selected database.
    pub fn db_index(&self) -> usize {
        self.client.db
    }

    /// The value under `key` as a `T`, for reading (lookup_read's expiry and hit/miss rules);
    /// None when absent, WRONGTYPE when it holds another type.
    pub fn read<T: Typed>(&mut self, key: &[u8]) -> Result<Option<&T>, CmdError> {
        match self.lookup_read(key) {
            None => Ok(None),
            Some(v) => T::of(v).map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// The value under `key` as a `T`, for writing (lookup_write); None when absent, WRONGTYPE
    /// when it holds another type.
    pub fn write<T: Typed>(&mut self, key: &[u8]) -> Result<Option<&mut T>, CmdError> {
        match self.lookup_write(key) {
            None => Ok(None),
            Some(v) => T::of_mut(v).map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// The value under `key` as a `T`, created empty when absent (publishing the `new` event, as
    /// Redis's dbAdd does); WRONGTYPE when it holds another type.
    pub fn write_or_create<T: Typed>(&mut self, key: &[u8]) -> Result<&mut T, CmdError> {
        let absent = match self.lookup_write(key) {
            Some(v) if T::of(v).is_none() => return Err(CmdError::WrongType),
            Some(_) => false,
            None => true,
        };
        self.create_if_absent(key, absent)
    }

    /// The tail of `write_or_create` and `again_or_create`: creates the value empty when
    /// `absent` (the `new` event, a new key's access field), then probes again. Returning the
    /// lookup's own borrow from one arm is what the borrow checker cannot accept yet; the
    /// second probe must not stamp: the lookup counted this command's access, or `set` gave a
    /// new key its initial clock, as Redis's dbAdd does.
    #[inline(always)]
    fn create_if_absent<T: Typed>(&mut self, key: &[u8], absent: bool) -> Result<&mut T, CmdError> {
        if absent {
            let now = self.now_ms;
            self.srv.dbs[self.client.db].set(key, T::empty(), now);
            self.notify(crate::pubsub::ev::NEW, "new", key);
        }
        self.srv.dbs[self.client.db].get_ref_mut(key).and_then(T::of_mut).ok_or(CmdError::WrongType)
    }

    /// The value under `key` as a `T`, for writing again after this command's own lookup of it
    /// (which applied expiry and stamped the access time): no expiry check and no second stamp,
    /// where Redis keeps the object it looked up. None when absent, WRONGTYPE for another type.
    pub fn again<T: Typed>(&mut self, key: &[u8]) -> Result<Option<&mut T>, CmdError> {
        match self.srv.dbs[self.client.db].get_ref_mut(key) {
            None => Ok(None),
            Some(v) => T::of_mut(v).map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// `again`, creating the value empty when absent (with the `new` event and a new key's
    /// access field, as `write_or_create`).
    pub fn again_or_create<T: Typed>(&mut self, key: &[u8]) -> Result<&mut T, CmdError> {
        let absent = self.srv.dbs[self.client.db].get_ref(key).is_none();
        self.create_if_absent(key, absent)
    }

    /// Deletes `key` from the client's database (a collection left empty), returning its value.
    pub fn remove(&mut self, key: &[u8]) -> Option<Value> {
        let now = self.now_ms;
        self.srv.dbs[self.client.db].remove(key, now)
    }

    /// The client's selected database, read-only (values already looked up, so expiry was applied).
    pub fn db_ref(&self) -> &Db {
        &self.srv.dbs[self.client.db]
    }

    /// Whether the running command is a blocked one re-run because a key it waits on became ready.
    pub fn woken(&self) -> bool {
        self.client.woken
    }

    /// Whether the command runs from a Lua script or function (the scripting client).
    pub fn from_script(&self) -> bool {
        self.client.id == crate::executor::scripting::SCRIPT_CLIENT_ID
    }

    /// Whether the command was called by a script (the caller a script runs for is set).
    pub fn script_caller(&self) -> bool {
        self.client.script_caller.is_some()
    }

    /// The wait `block` just requested, for a handler that adjusts it (XREAD's re-run argv).
    pub fn block_request_mut(&mut self) -> Option<&mut BlockRequest> {
        self.client.block_request.as_mut()
    }

    /// Whether the calling user may read every key with this command (SORT's BY and GET patterns
    /// reach keys that are not its arguments, so they need full key access).
    pub fn user_reads_any_key(&self, argv: &[Bytes]) -> bool {
        self.client.user.is_none() && self.srv.acl.default_unrestricted || {
            let user = self.srv.acl.users.get(self.client.user_name());
            user.is_some_and(|u| u.reads_any_key(self.spec, self.spec.name, argv))
        }
    }

    /// Whether the calling user has skip-sanitize-payload (RESTORE's deep validation).
    pub fn user_skips_sanitize(&self) -> bool {
        self.client
            .user
            .as_deref()
            .map_or(self.srv.acl.users.get(&b"default"[..]), |u| self.srv.acl.users.get(u))
            .is_some_and(|u| u.skips_sanitize_payload())
    }

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
        let found = if self.client.no_touch {
            db.peek(key, now)
        } else {
            db.get_read(key, now).map(|v| {
                v.rehash_step();
                &*v
            })
        };
        if found.is_some() {
            self.srv.stats.keyspace_hits += 1;
        } else {
            self.srv.stats.keyspace_misses += 1;
        }
        found
    }

    /// Where a command building a reply of unbounded size may stop: the calling connection's
    /// hard output limit, past which it is closed with no reply at all (admitted replies are
    /// checked whole). None for clients no limit closes (scripts, the master link).
    pub fn reply_cap(&self) -> Option<usize> {
        if self.client.info.fd < 0 || self.client.master || self.client.script_caller.is_some() {
            return None;
        }
        self.client.handle.hard_limit()
    }

    /// A read that counts a keyspace hit or miss but leaves the access time alone (Redis's
    /// `lookupKeyReadWithFlags(.., LOOKUP_NOTOUCH)`); `notify_miss` false also skips the
    /// `keymiss` event (LOOKUP_NONOTIFY, OBJECT's lookup).
    pub fn peek_read(&mut self, key: &[u8], notify_miss: bool) -> Option<&Value> {
        let now = self.now_ms;
        if self.srv.dbs[self.client.db].peek(key, now).is_none() {
            self.srv.stats.keyspace_misses += 1;
            if notify_miss {
                self.notify(crate::pubsub::ev::KEY_MISS, "keymiss", key);
            }
            return None;
        }
        self.srv.stats.keyspace_hits += 1;
        self.srv.dbs[self.client.db].peek(key, now)
    }

    /// Counts `n` keyspace hits for lookups done without `lookup_read` (SCAN's TYPE filter).
    pub fn count_hits(&mut self, n: u64) {
        self.srv.stats.keyspace_hits += n;
    }

    /// How many databases there are (`databases`).
    pub fn db_count(&self) -> usize {
        self.srv.dbs.len()
    }

    /// Database `idx` (COPY ... DB, MOVE); the caller checked `idx < db_count()`.
    pub fn db_at(&mut self, idx: usize) -> &mut Db {
        &mut self.srv.dbs[idx]
    }

    /// Sets CLIENT NO-TOUCH for the calling client, returning what it was (TOUCH touches anyway).
    pub fn set_no_touch(&mut self, on: bool) -> bool {
        std::mem::replace(&mut self.client.no_touch, on)
    }

    /// Whether small integers count as shared values now (OBJECT REFCOUNT; see evict).
    pub fn shares_integers(&self) -> bool {
        crate::executor::evict::shares_integers(self.srv)
    }

    /// Looks up `key` for writing: applies lazy expiry, no hit/miss accounting (lookupKeyWrite).
    /// Under CLIENT NO-TOUCH the access time stays, for writes as for reads (Redis 7.2's
    /// lookupKey leaves it alone for every lookup of such a client but TOUCH's).
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<&mut Value> {
        let now = self.now_ms;
        let db = &mut self.srv.dbs[self.client.db];
        let found = if self.client.no_touch { db.get_mut_untouched(key, now) } else { db.get_mut(key, now) };
        found.map(|v| {
            v.rehash_step();
            &mut *v
        })
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
        crate::executor::propagate::force(self.srv, crate::executor::propagate::ALL);
    }

    /// The command goes to the replicas (not the AOF) even though it changed nothing (PUBLISH).
    pub fn force_replicate(&mut self) {
        crate::executor::propagate::force(self.srv, crate::executor::propagate::REPL);
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

    /// Records that a write changed the dataset by `n` changes not tied to one key (FLUSHALL,
    /// FUNCTION LOAD): the dirty count that save points read.
    pub fn dirty(&mut self, n: u64) {
        self.srv.dirty += n;
    }

    /// Records a keyspace modification of `key` in the client's database that counts `changes`
    /// changes for save points (SADD of three new members: 3; LTRIM that trimmed nothing: 0),
    /// fails the EXEC of clients watching the key, invalidates tracking and wakes clients
    /// blocked on it.
    pub fn modified(&mut self, key: &[u8], changes: u64) {
        let db = self.client.db;
        self.modified_in(db, key, changes);
    }

    /// `modified` for a key of another database (MOVE, COPY ... DB n).
    pub fn modified_in(&mut self, db: usize, key: &[u8], changes: u64) {
        self.srv.dirty += changes;
        if !self.srv.watched.is_empty() {
            if let Some(ids) = self.srv.watched.get(&(db, key.to_vec())) {
                for &id in ids {
                    crate::executor::clients::flag_dirty_cas(&mut self.srv.clients, self.client, id);
                }
            }
        }
        self.srv.signal_ready(db, key);
        if self.srv.tracking.is_active() {
            crate::executor::tracking::invalidate_key(self.srv, Some(self.client.id), key);
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
            crate::executor::pubsub::notify(self.srv, Some(&*self.client), class, event, key, db);
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
            crate::executor::pubsub::notify(self.srv, Some(&*self.client), class, event, key, db);
        }
    }

    /// The client's RESP protocol version.
    pub fn proto(&self) -> u8 {
        self.client.proto
    }
}
