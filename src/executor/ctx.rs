//! `Ctx`: what a handler sees while it runs: the executor state, the calling client and the
//! command's time snapshot, with the narrow operations handlers use on them (lookups with
//! Redis's expiry and hit/miss rules, change notification, propagation rewrites, blocking).

use bytes::Bytes;

use super::clients::Client;
use super::registry::CommandSpec;
use super::State;
use crate::db::Db;
use crate::resp::Reply;
use crate::spec::{CmdError, CmdResult};
use crate::types::Value;

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
        let found = if self.client.no_touch {
            db.peek(key, now)
        } else {
            db.get_mut(key, now).map(|v| {
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

    /// Looks up `key` for writing: applies lazy expiry, no hit/miss accounting (lookupKeyWrite).
    pub fn lookup_write(&mut self, key: &[u8]) -> Option<&mut Value> {
        let now = self.now_ms;
        self.srv.dbs[self.client.db].get_mut(key, now).map(|v| {
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
