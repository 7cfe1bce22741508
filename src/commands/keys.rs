//! Generic keyspace and database commands: DEL, UNLINK, EXISTS, TYPE, KEYS, SCAN, RANDOMKEY,
//! DBSIZE, RENAME(NX), COPY, MOVE, SWAPDB, FLUSHDB, FLUSHALL, TOUCH, OBJECT, the EXPIRE family,
//! TTL family and PERSIST. They work on whole keys whatever their type and never look inside
//! values (type-specific commands own that).
//!
//! Lookup flavours follow Redis because they are observable: reads that Redis does with
//! `LOOKUP_NOTOUCH` (EXISTS, TYPE, TTL, OBJECT) count keyspace hits/misses without refreshing
//! the access time (`peek_read`); write-side lookups (RENAME, EXPIRE, MOVE) apply lazy expiry
//! without stats.

use super::flags::*;
use super::{acl, container, keys, scan, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::glob::glob_match;
use crate::pubsub::ev;
use crate::resp::writer::{bulk, int_line};
use crate::resp::Reply;
use crate::types::{RStr, Value};

pub static COMMANDS: &[CommandSpec] = &[
    spec("del", -2, WRITE, keys(1, -1, 1), acl::KEYSPACE, del),
    spec("unlink", -2, WRITE | FAST, keys(1, -1, 1), acl::KEYSPACE, unlink),
    spec("exists", -2, READONLY | FAST, keys(1, -1, 1), acl::KEYSPACE, exists),
    spec("type", 2, READONLY | FAST, keys(1, 1, 1), acl::KEYSPACE, type_),
    spec("keys", 2, READONLY, NO_KEYS, acl::KEYSPACE | acl::DANGEROUS, keys_),
    spec("scan", -2, READONLY, NO_KEYS, acl::KEYSPACE, scan),
    spec("randomkey", 1, READONLY, NO_KEYS, acl::KEYSPACE, randomkey),
    spec("dbsize", 1, READONLY | FAST, NO_KEYS, acl::KEYSPACE, dbsize),
    spec("rename", 3, WRITE, keys(1, 2, 1), acl::KEYSPACE, rename),
    spec("renamenx", 3, WRITE | FAST, keys(1, 2, 1), acl::KEYSPACE, renamenx),
    spec("copy", -3, WRITE | DENYOOM, keys(1, 2, 1), acl::KEYSPACE, copy),
    spec("move", 3, WRITE | FAST, keys(1, 1, 1), acl::KEYSPACE, move_),
    spec("swapdb", 3, WRITE | FAST, NO_KEYS, acl::KEYSPACE | acl::DANGEROUS, swapdb),
    spec("flushdb", -1, WRITE, NO_KEYS, acl::KEYSPACE | acl::DANGEROUS, flushdb),
    spec("flushall", -1, WRITE, NO_KEYS, acl::KEYSPACE | acl::DANGEROUS, flushall),
    spec("touch", -2, READONLY | FAST, keys(1, -1, 1), acl::KEYSPACE, touch),
    container("object", -2, 0, OBJECT_SUBCOMMANDS),
    spec("expire", -3, WRITE | FAST, keys(1, 1, 1), acl::KEYSPACE, expire),
    spec("pexpire", -3, WRITE | FAST, keys(1, 1, 1), acl::KEYSPACE, pexpire),
    spec("expireat", -3, WRITE | FAST, keys(1, 1, 1), acl::KEYSPACE, expireat),
    spec("pexpireat", -3, WRITE | FAST, keys(1, 1, 1), acl::KEYSPACE, pexpireat),
    spec("ttl", 2, READONLY | FAST, keys(1, 1, 1), acl::KEYSPACE, ttl),
    spec("pttl", 2, READONLY | FAST, keys(1, 1, 1), acl::KEYSPACE, pttl),
    spec("expiretime", 2, READONLY | FAST, keys(1, 1, 1), acl::KEYSPACE, expiretime),
    spec("pexpiretime", 2, READONLY | FAST, keys(1, 1, 1), acl::KEYSPACE, pexpiretime),
    spec("persist", 2, WRITE | FAST, keys(1, 1, 1), acl::KEYSPACE, persist),
];

static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    spec("encoding", 3, READONLY, keys(2, 2, 1), acl::KEYSPACE, object_encoding),
    spec("freq", 3, READONLY, keys(2, 2, 1), acl::KEYSPACE, object_freq),
    spec("idletime", 3, READONLY, keys(2, 2, 1), acl::KEYSPACE, object_idletime),
    spec("refcount", 3, READONLY, keys(2, 2, 1), acl::KEYSPACE, object_refcount),
    spec("help", 2, LOADING | STALE, NO_KEYS, acl::KEYSPACE, object_help),
];

/// Redis's OBJ_SHARED_REFCOUNT (INT_MAX): what REFCOUNT reports for its shared small integers.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Integers 0..OBJ_SHARED_INTEGERS are shared objects in Redis.
const SHARED_INTEGERS: i64 = 10_000;

/// A read that counts a keyspace hit or miss but leaves the access time alone (Redis's
/// `lookupKeyReadWithFlags(.., LOOKUP_NOTOUCH)`).
fn peek_read<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Option<&'a Value> {
    ctx.peek_read(key, true)
}

/// `peek_read` without the `keymiss` event: OBJECT's lookup (LOOKUP_NONOTIFY).
fn peek_read_quiet<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Option<&'a Value> {
    ctx.peek_read(key, false)
}

/// Parses a database index argument the way `getIntFromObjectOrReply` does (no custom message).
fn parse_db_index(ctx: &Ctx, arg: &[u8]) -> Result<usize, CmdError> {
    let n = crate::util::num::parse_i64(arg).ok_or(CmdError::NotInteger)?;
    if n < i32::MIN as i64 || n > i32::MAX as i64 {
        return Err(CmdError::err("value is out of range, value must between -2147483648 and 2147483647"));
    }
    if n < 0 || n as usize >= ctx.db_count() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    Ok(n as usize)
}

/// DEL key [key ...]
///
/// Removes the keys; replies with how many existed. With lazyfree-lazy-user-del, big values are
/// freed in the background as UNLINK does.
pub fn del(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let lazy = ctx.config().lazyfree_lazy_user_del;
    delete_keys(ctx, args, lazy)
}

/// UNLINK key [key ...]
///
/// DEL whose reclaiming of memory happens in the background for big values (collections of more
/// than 64 elements): the keys vanish at once either way.
pub fn unlink(ctx: &mut Ctx, args: &Args) -> CmdResult {
    delete_keys(ctx, args, true)
}

fn delete_keys(ctx: &mut Ctx, args: &Args, lazy: bool) -> CmdResult {
    let now = ctx.now_ms();
    let mut n = 0;
    for key in args.from(1) {
        if let Some(value) = ctx.db().remove(key, now) {
            n += 1;
            ctx.modified(key, 1);
            ctx.notify(ev::GENERIC, "del", key);
            if lazy {
                crate::db::lazyfree::free(value);
            }
        }
    }
    Ok(Reply::Int(n))
}

/// EXISTS key [key ...]
///
/// Counts how many of the named keys exist; a key named twice counts twice.
pub fn exists(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut n = 0;
    for key in args.from(1) {
        if peek_read(ctx, key).is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

/// TYPE key
///
/// The type name of the value as a status reply, `none` when the key is absent.
pub fn type_(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let name = peek_read(ctx, args.key(1)).map_or("none", Value::type_name);
    Ok(Reply::Status(name))
}

/// KEYS pattern
///
/// Every live key matching the glob pattern; the pattern `*` alone selects all keys, the empty
/// key included (which the glob itself would not match).
pub fn keys_(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let pattern = args.get(1);
    let all = pattern == b"*";
    let now = ctx.now_ms();
    // A big table is walked a step at a time between other clients' commands, the reply still
    // exactly the keys of this moment (see `executor::walks`), wherever the reply may come
    // later: not inside MULTI or a script, whose replies are immediate.
    if ctx.db().len() > crate::executor::walks::WALK_MIN_KEYS && ctx.client().defers_reply() {
        let (db, client) = (ctx.db_index(), ctx.client().id);
        return Ok(crate::executor::walks::start(ctx.admin(), db, client, pattern, now));
    }
    // Encoded as the table is walked, straight into one buffer (no element allocated per key),
    // the array's length spliced in front at the end. Measured on 1M keys (KEYS *, slowlog, a
    // loaded 2-core machine): 235 ms building a reply per key, 184 ms this way (Redis 596 ms).
    let db = ctx.db();
    let mut body = Vec::with_capacity(db.len().min(1 << 20) * 16);
    let mut n = 0i64;
    for (k, _) in db.keys(now) {
        if all || glob_match(pattern, k, false) {
            bulk(&mut body, k);
            n += 1;
        }
    }
    let mut head = Vec::with_capacity(24);
    int_line(&mut head, b'*', n);
    body.splice(0..0, head);
    Ok(Reply::Raw(body))
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
///
/// One step of a cursor walk over the keyspace: visits table buckets from `cursor` until about
/// COUNT keys were seen (or ten times as many steps were taken), then filters them by pattern and
/// type (compared case-insensitively; an unknown type name simply matches nothing) and replies
/// with the next cursor (0 when the walk is over) and the keys.
pub fn scan(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let cursor = scan::cursor_arg(args, 1)?;
    let opts = scan::scan_options(args, 2, true)?;
    let now = ctx.now_ms();
    let (reply, type_checks) = scan::run(Keyspace { db: ctx.db(), now }, cursor, &opts);
    // Redis looks each candidate up (a keyspace hit) to learn its type.
    ctx.count_hits(type_checks);
    Ok(reply)
}

/// What SCAN walks: one database's live keys (expired ones are skipped, as `Db::scan` does).
struct Keyspace<'a> {
    db: &'a mut crate::db::Db,
    now: i64,
}

impl scan::Scan for Keyspace<'_> {
    const ITEMS: i64 = 1;
    fn step(&mut self, cursor: u64, visit: &mut dyn FnMut(scan::Entry<'_>)) -> u64 {
        self.db
            .scan(cursor, self.now, |k, v| visit(scan::Entry { name: k, value: None, type_name: Some(v.type_name()) }))
    }
}

/// RANDOMKEY
///
/// A random live key, nil when the database is empty.
pub fn randomkey(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let now = ctx.now_ms();
    Ok(ctx.db().random_key(now).map_or(Reply::Nil, Reply::Bulk))
}

/// DBSIZE
///
/// The number of keys in the selected database (keys past their TTL but not yet collected
/// included, as in Redis).
pub fn dbsize(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.db().len() as i64))
}

/// Shared body of RENAME and RENAMENX.
fn rename_generic(ctx: &mut Ctx, args: &Args, nx: bool) -> CmdResult {
    let (src, dst) = (args.key(1), args.key(2));
    if ctx.lookup_write(src).is_none() {
        return Err(CmdError::NoSuchKey);
    }
    let done = if nx { Reply::Int(1) } else { Reply::Ok };
    if src == dst {
        return Ok(if nx { Reply::Int(0) } else { Reply::Ok });
    }
    let now = ctx.now_ms();
    let db = ctx.db();
    let expire = db.expire_at(src, now);
    // Redis looks the destination up for writing (stamping an existing one RENAMENX leaves).
    if nx && db.get_read(dst, now).is_some() {
        return Ok(Reply::Int(0));
    }
    // The value moves with the access field the lookup above stamped (Redis's dbAdd of the
    // same object).
    let clock = db.access_clock(src).unwrap_or(0);
    let Some(value) = db.remove(src, now) else {
        return Err(CmdError::NoSuchKey);
    };
    db.set_clocked(dst, value, clock);
    if let Some(at) = expire {
        db.set_expire(dst, at);
    }
    // Redis deletes the destination and adds it afresh: `new` even when it existed.
    ctx.notify(ev::NEW, "new", dst);
    ctx.modified(src, 1);
    ctx.modified(dst, 1);
    ctx.notify(ev::GENERIC, "rename_from", src);
    ctx.notify(ev::GENERIC, "rename_to", dst);
    Ok(done)
}

/// RENAME key newkey
///
/// Moves the value (and its TTL) to `newkey`, replacing whatever was there. Renaming a key to
/// itself is allowed when it exists; a missing source is `ERR no such key`.
pub fn rename(ctx: &mut Ctx, args: &Args) -> CmdResult {
    rename_generic(ctx, args, false)
}

/// RENAMENX key newkey
///
/// RENAME that only happens when `newkey` does not exist: 1 if renamed, 0 otherwise (also 0
/// when both names are the same).
pub fn renamenx(ctx: &mut Ctx, args: &Args) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// COPY source destination [DB destination-db] [REPLACE]
///
/// Copies the value and its TTL to `destination`, in another database if asked. Replies 1 when
/// copied, 0 when the source is missing or the destination exists without REPLACE. Copying a key
/// onto itself in the same database is an error.
pub fn copy(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (src, dst) = (args.key(1), args.key(2));
    let src_db = ctx.db_index();
    let mut dst_db = src_db;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if args.is(i, "replace") {
            replace = true;
        } else if args.is(i, "db") && i + 1 < args.len() {
            dst_db = parse_db_index(ctx, args.get(i + 1))?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if src_db == dst_db && src == dst {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let Some(value) = ctx.lookup_read(src).cloned() else {
        return Ok(Reply::Int(0));
    };
    let now = ctx.now_ms();
    let expire = ctx.db_at(src_db).expire_at(src, now);
    let target = ctx.db_at(dst_db);
    // Redis looks the destination up for writing, which stamps it even when it is then kept
    // or replaced; the copy is a new object with a first access field.
    if target.get_read(dst, now).is_some() && !replace {
        return Ok(Reply::Int(0));
    }
    let clock = target.access.new_key(now);
    target.set_clocked(dst, value, clock);
    if let Some(at) = expire {
        target.set_expire(dst, at);
    }
    ctx.notify_in(dst_db, ev::NEW, "new", dst);
    ctx.modified_in(dst_db, dst, 1);
    ctx.notify_in(dst_db, ev::GENERIC, "copy_to", dst);
    Ok(Reply::Int(1))
}

/// MOVE key db
///
/// Moves the key (with its TTL) to another database: 1 if moved, 0 if it is missing here or
/// already present there. Moving to the current database is an error.
pub fn move_(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let src_db = ctx.db_index();
    let dst_db = parse_db_index(ctx, args.get(2))?;
    if dst_db == src_db {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    if ctx.lookup_write(key).is_none() {
        return Ok(Reply::Int(0));
    }
    let now = ctx.now_ms();
    let expire = ctx.db_at(src_db).expire_at(key, now);
    // A write lookup, as Redis's: a key already there is stamped.
    if ctx.db_at(dst_db).get_read(key, now).is_some() {
        return Ok(Reply::Int(0));
    }
    // The value moves with the access field the lookup above stamped.
    let clock = ctx.db_at(src_db).access_clock(key).unwrap_or(0);
    let Some(value) = ctx.db_at(src_db).remove(key, now) else {
        return Ok(Reply::Int(0));
    };
    let target = ctx.db_at(dst_db);
    target.set_clocked(key, value, clock);
    if let Some(at) = expire {
        target.set_expire(key, at);
    }
    ctx.notify_in(dst_db, ev::NEW, "new", key);
    // Redis counts one change for a MOVE but signals the key in both databases.
    ctx.modified(key, 0);
    ctx.modified_in(dst_db, key, 1);
    ctx.notify_in(src_db, ev::GENERIC, "move_from", key);
    ctx.notify_in(dst_db, ev::GENERIC, "move_to", key);
    Ok(Reply::Int(1))
}

/// Parses a SWAPDB index: any parse or int-range failure answers with `msg`.
fn swapdb_index(arg: &[u8], msg: &str) -> Result<i64, CmdError> {
    crate::util::num::parse_i64(arg)
        .filter(|n| (i32::MIN as i64..=i32::MAX as i64).contains(n))
        .ok_or_else(|| CmdError::err(msg))
}

/// SWAPDB index1 index2
///
/// Exchanges the contents of two databases; clients stay on their selected index and so see the
/// other data set at once. Swapping a database with itself is a no-op that replies OK.
pub fn swapdb(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let a = swapdb_index(args.get(1), "invalid first DB index")?;
    let b = swapdb_index(args.get(2), "invalid second DB index")?;
    let n = ctx.db_count() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        return Err(CmdError::DbIndexOutOfRange);
    }
    let (a, b) = (a as usize, b as usize);
    if a != b {
        ctx.touch_watched_in_db(a, Some(b));
        ctx.touch_watched_in_db(b, Some(a));
        let srv = ctx.admin();
        srv.signal_db_waiters(a);
        srv.signal_db_waiters(b);
        let dbs = &mut srv.dbs;
        dbs.swap(a, b);
        // Only the data moves: per-index bookkeeping stays with its index.
        let (lo, hi) = dbs.split_at_mut(a.max(b));
        let (x, y) = (&mut lo[a.min(b)], &mut hi[0]);
        std::mem::swap(&mut x.counters, &mut y.counters);
        std::mem::swap(&mut x.expired_log, &mut y.expired_log);
        std::mem::swap(&mut x.log_expired, &mut y.log_expired);
    }
    // Counted even for a self-swap, as Redis does.
    ctx.dirty(1);
    Ok(Reply::Ok)
}

/// Parses the optional ASYNC|SYNC of FLUSHDB / FLUSHALL; true means free in the background,
/// which lazyfree-lazy-user-flush makes the default.
fn flush_mode(ctx: &mut Ctx, args: &Args) -> Result<bool, CmdError> {
    match args.len() {
        1 => Ok(ctx.config().lazyfree_lazy_user_flush),
        2 if args.is(1, "async") => Ok(true),
        2 if args.is(1, "sync") => Ok(false),
        _ => Err(CmdError::Syntax),
    }
}

/// What emptying a database takes out of the keyspace: its key and expire tables.
type EmptiedTables = (crate::types::table::Table<Value>, crate::types::table::Table<i64>);

/// Empties database `idx` and hands back its old tables and how many keys they held.
fn take_db(ctx: &mut Ctx, idx: usize) -> (u64, EmptiedTables) {
    ctx.touch_watched_in_db(idx, None);
    let srv = ctx.admin();
    srv.signal_db_waiters(idx);
    crate::executor::tracking::on_flush(srv);
    let removed = srv.dbs[idx].len() as u64;
    // A KEYS walk in progress keeps the tables and goes on through them; they are freed when it
    // is over (see `executor::walks`), and this command does not wait for it.
    crate::executor::walks::set_aside(srv, idx);
    (removed, srv.dbs[idx].clear())
}

/// Empties database `idx`, freeing its entries before returning; returns how many keys it held.
pub(crate) fn empty_db(ctx: &mut Ctx, idx: usize) -> u64 {
    take_db(ctx, idx).0
}

/// The tables a synchronous FLUSHALL or FLUSHDB emptied, freed off the executor before its +OK
/// is written: the flushing client finds the memory freed once it has the reply, as from Redis
/// 7.0's synchronous flush, and no other client waits for millions of entries to be freed (what
/// Redis 7.4 does for FLUSHALL SYNC by blocking only the caller). Inside MULTI or a script, or
/// for a replication link, the reply is encoded on the executor, which then frees them itself.
struct FreedThenOk(std::sync::Mutex<Vec<EmptiedTables>>);

impl crate::resp::reply::Encode for FreedThenOk {
    fn encode(&self, _proto: u8, out: &mut Vec<u8>) {
        drop(std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner())));
        crate::alloc::flush_thread_cache();
        out.extend_from_slice(b"+OK\r\n");
    }

    fn size_hint(&self) -> usize {
        5
    }
}

/// Frees what a flush took: on a helper thread for ASYNC; for SYNC, off the executor before the
/// reply (`FreedThenOk`) once there is anything to free.
fn free_emptied(emptied: Vec<EmptiedTables>, removed: u64, background: bool) -> Reply {
    if removed == 0 {
        return Reply::Ok;
    }
    if background {
        crate::db::lazyfree::free_tables(emptied, removed);
        return Reply::Ok;
    }
    Reply::Deferred(crate::resp::reply::Deferred::new(FreedThenOk(std::sync::Mutex::new(emptied))))
}

/// FLUSHDB [ASYNC|SYNC]
///
/// Deletes every key of the selected database; ASYNC frees the memory in the background.
pub fn flushdb(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let background = flush_mode(ctx, args)?;
    let idx = ctx.db_index();
    let (removed, tables) = take_db(ctx, idx);
    ctx.dirty(removed);
    // Propagated even when the database was empty (Redis's forceCommandPropagation).
    ctx.force_propagate();
    Ok(free_emptied(vec![tables], removed, background))
}

/// FLUSHALL [ASYNC|SYNC]
///
/// Deletes every key of every database; ASYNC frees the memory in the background.
pub fn flushall(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let background = flush_mode(ctx, args)?;
    let mut removed = 0;
    let mut emptied = Vec::new();
    for idx in 0..ctx.db_count() {
        let (n, tables) = take_db(ctx, idx);
        removed += n;
        emptied.push(tables);
    }
    ctx.dirty(removed);
    // As Redis: a running snapshot of the old data is abandoned (an AOF rewrite is not), and
    // with save points the empty dataset is saved at once (so a restart does not bring the
    // data back).
    let srv = ctx.admin();
    crate::executor::snapshot::kill_rdb_child(srv);
    crate::executor::replication::forget_local_expires(srv);
    if !srv.config.save.is_empty() {
        let _ = crate::executor::snapshot::save_foreground(srv);
    }
    // Always propagated, even when there was nothing to flush (a save reset the counter).
    ctx.force_propagate();
    Ok(free_emptied(emptied, removed, background))
}

/// TOUCH key [key ...]
///
/// Refreshes the access time of the keys; replies with how many exist.
pub fn touch(ctx: &mut Ctx, args: &Args) -> CmdResult {
    // TOUCH touches even for a client in CLIENT NO-TOUCH mode (Redis 7.2).
    let no_touch = ctx.set_no_touch(false);
    let mut n = 0;
    for key in args.from(1) {
        if ctx.lookup_read(key).is_some() {
            n += 1;
        }
    }
    ctx.set_no_touch(no_touch);
    Ok(Reply::Int(n))
}

/// OBJECT ENCODING key
///
/// The internal representation of the value (`int`, `embstr`, `raw`, `listpack`, ...), nil when
/// the key is absent.
pub fn object_encoding(ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(peek_read_quiet(ctx, args.key(2)).map_or(Reply::Nil, |v| Reply::bulk(v.encoding_name())))
}

/// OBJECT FREQ key
///
/// The LFU access counter, decayed by the minutes since it was stamped (lfu-decay-time). It is
/// only kept under an LFU maxmemory policy; otherwise a present key gets Redis's "policy not
/// selected" error. (RESTORE ... FREQ and RDB loading set it.)
pub fn object_freq(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(2);
    if peek_read_quiet(ctx, key).is_none() {
        return Ok(Reply::Nil);
    }
    if !ctx.config().maxmemory_policy.contains("lfu") {
        return Err(CmdError::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let db = ctx.db();
    let field = db.access_clock(key).unwrap_or(0);
    let decay = match db.access {
        crate::db::AccessClock::Lfu { decay_minutes, .. } => decay_minutes,
        crate::db::AccessClock::Lru => 1,
    };
    Ok(Reply::Int(crate::db::lfu_decayed(field, ctx.now_ms(), decay) as i64))
}

/// OBJECT IDLETIME key
///
/// Seconds since the key was last read or written, nil when absent.
pub fn object_idletime(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(2);
    if peek_read_quiet(ctx, key).is_none() {
        return Ok(Reply::Nil);
    }
    if ctx.config().maxmemory_policy.contains("lfu") {
        // The access field holds the LFU counter then, not a time.
        return Err(CmdError::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching \
             between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let now = ctx.now_ms();
    Ok(ctx.db().idle_seconds(key, now).map_or(Reply::Nil, |s| Reply::Int(s as i64)))
}

/// OBJECT REFCOUNT key
///
/// Reference count of the value as Redis would report it: its shared integers 0..9999 show
/// INT_MAX, every other value 1 (values are never shared here). Redis stops sharing integers
/// while maxmemory is set with an LRU or LFU policy (each value needs its own access clock);
/// here that is read from the configuration now, where Redis decides when the value is stored.
pub fn object_refcount(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let shared_ints = ctx.shares_integers();
    Ok(match peek_read_quiet(ctx, args.key(2)) {
        None => Reply::Nil,
        Some(Value::Str(RStr::Int(n))) if shared_ints && (0..SHARED_INTEGERS).contains(n) => {
            Reply::Int(SHARED_REFCOUNT)
        }
        Some(_) => Reply::Int(1),
    })
}

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// OBJECT HELP
pub fn object_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Array(OBJECT_HELP.iter().map(|l| Reply::Status(l)).collect()))
}

/// The NX / XX / GT / LT conditions of the EXPIRE family.
#[derive(Default, Clone, Copy)]
struct ExpireCond {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

fn parse_expire_cond(args: &Args) -> Result<ExpireCond, CmdError> {
    let mut c = ExpireCond::default();
    for i in 3..args.len() {
        if args.is(i, "nx") {
            c.nx = true;
        } else if args.is(i, "xx") {
            c.xx = true;
        } else if args.is(i, "gt") {
            c.gt = true;
        } else if args.is(i, "lt") {
            c.lt = true;
        } else {
            return Err(CmdError::echo(&[b"ERR Unsupported option ", args.get(i)]));
        }
    }
    if c.nx && (c.xx || c.gt || c.lt) {
        return Err(CmdError::err("NX and XX, GT or LT options at the same time are not compatible"));
    }
    if c.gt && c.lt {
        return Err(CmdError::err("GT and LT options at the same time are not compatible"));
    }
    Ok(c)
}

/// Shared body of EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT. `relative`: the time counts from now;
/// `seconds`: the argument is in seconds.
fn expire_generic(ctx: &mut Ctx, args: &Args, relative: bool, seconds: bool) -> CmdResult {
    let cond = parse_expire_cond(args)?;
    let mut when = args.i64(2)?;
    let invalid = || CmdError::InvalidExpire(ctx.spec().name.to_string());
    if seconds {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    if relative {
        // Redis only rejects overflow past the top; a huge negative time simply lies in the past.
        when = when.checked_add(ctx.now_ms()).ok_or_else(invalid)?;
    }
    let key = args.key(1);
    if ctx.lookup_write(key).is_none() {
        return Ok(Reply::Int(0));
    }
    let now = ctx.now_ms();
    let current = ctx.db().expire_at(key, now);
    let refused = (cond.nx && current.is_some())
        || (cond.xx && current.is_none())
        || (cond.gt && current.is_none_or(|cur| when <= cur))
        || (cond.lt && current.is_some_and(|cur| when >= cur));
    if refused {
        return Ok(Reply::Int(0));
    }
    // Replayed from the AOF, a time already past is kept as is: the key expires once loaded.
    if when <= now && !ctx.loading() {
        ctx.db().remove(key, now);
        ctx.modified(key, 1);
        ctx.notify(ev::GENERIC, "del", key);
        let verb: &[u8] = if super::strings::lazy_expire(ctx) { b"UNLINK" } else { b"DEL" };
        ctx.propagate_as_parts(&[verb, key]);
    } else {
        ctx.db().set_expire(key, when);
        ctx.modified(key, 1);
        ctx.notify(ev::GENERIC, "expire", key);
        // Propagated as PEXPIREAT with the absolute time, the condition flags kept.
        if ctx.propagating() && (relative || seconds) {
            let when = when.to_string();
            let mut parts: Vec<&[u8]> = vec![b"PEXPIREAT", key, when.as_bytes()];
            parts.extend(args.from(3));
            ctx.propagate_as_parts(&parts);
        }
    }
    Ok(Reply::Int(1))
}

/// EXPIRE key seconds [NX|XX|GT|LT]
///
/// Sets a time to live in seconds. NX: only without a TTL; XX: only with one; GT / LT: only if
/// the new expiry is later / earlier than the current one (no TTL counts as infinite). A time
/// already past deletes the key. Replies 1 if applied, 0 otherwise.
pub fn expire(ctx: &mut Ctx, args: &Args) -> CmdResult {
    expire_generic(ctx, args, true, true)
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT]
///
/// EXPIRE in milliseconds.
pub fn pexpire(ctx: &mut Ctx, args: &Args) -> CmdResult {
    expire_generic(ctx, args, true, false)
}

/// EXPIREAT key unix-time-seconds [NX|XX|GT|LT]
///
/// EXPIRE with an absolute Unix time in seconds.
pub fn expireat(ctx: &mut Ctx, args: &Args) -> CmdResult {
    expire_generic(ctx, args, false, true)
}

/// PEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT]
///
/// EXPIRE with an absolute Unix time in milliseconds.
pub fn pexpireat(ctx: &mut Ctx, args: &Args) -> CmdResult {
    expire_generic(ctx, args, false, false)
}

/// Shared body of TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 when the key is absent, -1 when it
/// has no expiry, else the remaining (or absolute) time, seconds rounded to nearest.
fn ttl_generic(ctx: &mut Ctx, args: &Args, millis: bool, absolute: bool) -> CmdResult {
    let key = args.key(1);
    if peek_read(ctx, key).is_none() {
        return Ok(Reply::Int(-2));
    }
    let now = ctx.now_ms();
    let Some(at) = ctx.db().expire_at(key, now) else {
        return Ok(Reply::Int(-1));
    };
    let t = if absolute { at } else { (at - now).max(0) };
    Ok(Reply::Int(if millis { t } else { (t + 500) / 1000 }))
}

/// TTL key
///
/// Remaining time to live in seconds (rounded), -1 without expiry, -2 when absent.
pub fn ttl(ctx: &mut Ctx, args: &Args) -> CmdResult {
    ttl_generic(ctx, args, false, false)
}

/// PTTL key
///
/// Remaining time to live in milliseconds, -1 without expiry, -2 when absent.
pub fn pttl(ctx: &mut Ctx, args: &Args) -> CmdResult {
    ttl_generic(ctx, args, true, false)
}

/// EXPIRETIME key
///
/// Absolute Unix expiry time in seconds, -1 without expiry, -2 when absent.
pub fn expiretime(ctx: &mut Ctx, args: &Args) -> CmdResult {
    ttl_generic(ctx, args, false, true)
}

/// PEXPIRETIME key
///
/// Absolute Unix expiry time in milliseconds, -1 without expiry, -2 when absent.
pub fn pexpiretime(ctx: &mut Ctx, args: &Args) -> CmdResult {
    ttl_generic(ctx, args, true, true)
}

/// PERSIST key
///
/// Removes the expiry: 1 if the key had one, 0 if it had none or is absent.
pub fn persist(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let now = ctx.now_ms();
    // Redis's write lookup: it stamps the access time, TTL or not.
    if ctx.lookup_write(key).is_none() {
        return Ok(Reply::Int(0));
    }
    if ctx.db().persist(key, now) {
        ctx.modified(key, 1);
        ctx.notify(ev::GENERIC, "persist", key);
        return Ok(Reply::Int(1));
    }
    Ok(Reply::Int(0))
}

/// lazyfree-lazy-server-del: a key a command deletes as a side effect propagates as UNLINK.
pub(crate) fn lazy_server_del(ctx: &Ctx) -> bool {
    ctx.config().lazyfree_lazy_server_del
}
