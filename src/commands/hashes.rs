//! Hash commands (HSET ... HSCAN), replying as Redis 7.0 does. The data structure and its
//! encodings live in `types::hash`; this module owns argument handling, error precedence,
//! encoding-conversion limits (from config) and reply shapes.
//!
//! Replies whose bytes are the same in RESP2 and RESP3 (arrays of bulk strings: HKEYS, HVALS,
//! HSCAN) are encoded straight into bytes; HGETALL and HRANDFIELD WITHVALUES differ only in their
//! headers, so they are encoded straight too, with the header picked by protocol. HGETALL,
//! HKEYS and HVALS of a hash of `DEFER_MIN_ELEMENTS` fields or more reply with a snapshot of its
//! table encoded off the executor (`Reply::Deferred`), so other clients do not wait behind it.

use super::flags::*;
use super::{acl, int_bool, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::pubsub::ev;
use crate::resp::reply::{Cursor, Deferred, Encode, Piece, PIECE_BYTES};
use crate::resp::writer::{bulk, int_line};
use crate::resp::Reply;
use crate::types::hash::HashSnapshot;
use crate::types::{Hash, Value};
use crate::util::num::{incr_long_double, parse_i64, LdError};

pub static COMMANDS: &[CommandSpec] = &[
    spec("hset", -4, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hset),
    spec("hsetnx", 4, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hsetnx),
    spec("hget", 3, READONLY | FAST, keys(1, 1, 1), acl::HASH, hget),
    spec("hmget", -3, READONLY | FAST, keys(1, 1, 1), acl::HASH, hmget),
    spec("hmset", -4, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hset),
    spec("hdel", -3, WRITE | FAST, keys(1, 1, 1), acl::HASH, hdel),
    spec("hlen", 2, READONLY | FAST, keys(1, 1, 1), acl::HASH, hlen),
    spec("hstrlen", 3, READONLY | FAST, keys(1, 1, 1), acl::HASH, hstrlen),
    spec("hexists", 3, READONLY | FAST, keys(1, 1, 1), acl::HASH, hexists),
    spec("hkeys", 2, READONLY, keys(1, 1, 1), acl::HASH, hkeys),
    spec("hvals", 2, READONLY, keys(1, 1, 1), acl::HASH, hvals),
    spec("hgetall", 2, READONLY, keys(1, 1, 1), acl::HASH, hgetall),
    spec("hincrby", 4, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hincrby),
    spec("hincrbyfloat", 4, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hincrbyfloat),
    spec("hrandfield", -2, READONLY, keys(1, 1, 1), acl::HASH, hrandfield),
    spec("hscan", -3, READONLY, keys(1, 1, 1), acl::HASH, hscan),
    // Field TTLs (Redis 7.4).
    spec("hexpire", -6, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hexpire),
    spec("hpexpire", -6, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hpexpire),
    spec("hexpireat", -6, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hexpireat),
    spec("hpexpireat", -6, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::HASH, hpexpireat),
    spec("httl", -5, READONLY | FAST, keys(1, 1, 1), acl::HASH, httl),
    spec("hpttl", -5, READONLY | FAST, keys(1, 1, 1), acl::HASH, hpttl),
    spec("hexpiretime", -5, READONLY | FAST, keys(1, 1, 1), acl::HASH, hexpiretime),
    spec("hpexpiretime", -5, READONLY | FAST, keys(1, 1, 1), acl::HASH, hpexpiretime),
    spec("hpersist", -5, WRITE | FAST, keys(1, 1, 1), acl::HASH, hpersist),
];

/// An HRANDFIELD reply larger than this is refused instead of exhausting memory (Redis would
/// keep growing the client's output buffer).
const MAX_RANDOM_REPLY_BYTES: usize = 1 << 31;

/// The conversion limits from config: (max entries, max value length).
fn limits(ctx: &Ctx) -> (usize, usize) {
    (ctx.config().hash_max_listpack_entries, ctx.config().hash_max_listpack_value)
}

/// HSET key field value [field value ...]
///
/// Sets each field to its value, creating the hash when absent; later pairs win over earlier
/// ones with the same field. Replies with the number of fields that were new (HMSET, sharing
/// this handler, replies OK). An odd number of field/value arguments is an arity error.
pub fn hset(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() % 2 == 1 {
        return Err(CmdError::WrongArity(ctx.spec().name.to_string()));
    }
    let key = args.key(1);
    let (max_entries, max_value) = limits(ctx);
    let h = ctx.write_or_create::<Hash>(key)?;
    h.convert_for_lengths(args.from(2), max_value);
    let mut created = 0;
    for pair in args.argv[2..].chunks_exact(2) {
        created += h.set(&pair[0], &pair[1], max_entries, max_value) as i64;
    }
    let pairs = (args.len() as u64 - 2) / 2;
    ctx.notify(crate::pubsub::ev::HASH, "hset", key);
    ctx.modified(key, pairs);
    if ctx.spec().name == "hmset" {
        Ok(Reply::Ok)
    } else {
        Ok(Reply::Int(created))
    }
}

/// HSETNX key field value
///
/// Sets the field only when it does not exist yet, creating the hash when absent. Replies 1 when
/// it was set, 0 when the field was already there.
pub fn hsetnx(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let (max_entries, max_value) = limits(ctx);
    let h = ctx.write_or_create::<Hash>(key)?;
    if h.contains(args.get(2)) {
        return Ok(int_bool(false));
    }
    h.convert_for_lengths(args.from(2), max_value);
    h.set(args.get(2), args.get(3), max_entries, max_value);
    ctx.notify(crate::pubsub::ev::HASH, "hset", key);
    ctx.modified(key, 1);
    Ok(int_bool(true))
}

/// HGET key field
///
/// The value of the field, nil when the field or the key is absent.
pub fn hget(ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(match ctx.read::<Hash>(args.key(1))?.and_then(|h| h.get(args.get(2))) {
        Some(v) => Reply::Bulk(v.to_vec()),
        None => Reply::Nil,
    })
}

/// HMGET key field [field ...]
///
/// The value of each field in argument order, nil for absent fields (all nils for a missing key).
pub fn hmget(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let h = ctx.read::<Hash>(args.key(1))?;
    let out = args
        .from(2)
        .map(|f| match h.and_then(|h| h.get(f)) {
            Some(v) => Reply::Bulk(v.to_vec()),
            None => Reply::Nil,
        })
        .collect();
    Ok(Reply::Array(out))
}

/// HDEL key field [field ...]
///
/// Removes the fields; the key is deleted when its hash becomes empty. Replies with the number
/// of fields removed.
pub fn hdel(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let Some(h) = ctx.write::<Hash>(key)? else {
        return Ok(Reply::Int(0));
    };
    let mut deleted = 0u64;
    for f in args.from(2) {
        if h.remove(f) {
            deleted += 1;
            if h.is_empty() {
                break;
            }
        }
    }
    let now_empty = h.is_empty();
    if deleted > 0 {
        ctx.notify(crate::pubsub::ev::HASH, "hdel", key);
    }
    if now_empty {
        let now = ctx.now_ms();
        ctx.db().remove(key, now);
        ctx.notify(crate::pubsub::ev::GENERIC, "del", key);
    }
    if deleted > 0 {
        ctx.modified(key, deleted);
    }
    Ok(Reply::Int(deleted as i64))
}

/// HLEN key
///
/// The number of fields, 0 for a missing key.
pub fn hlen(ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.read::<Hash>(args.key(1))?.map_or(0, |h| h.len()) as i64))
}

/// HSTRLEN key field
///
/// The length of the field's value, 0 when the field or the key is absent.
pub fn hstrlen(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let len = ctx.read::<Hash>(args.key(1))?.and_then(|h| h.get(args.get(2))).map_or(0, |v| v.len());
    Ok(Reply::Int(len as i64))
}

/// HEXISTS key field
///
/// 1 when the field exists, 0 otherwise.
pub fn hexists(ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(int_bool(ctx.read::<Hash>(args.key(1))?.is_some_and(|h| h.contains(args.get(2)))))
}

/// Which parts of each pair a listing sends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Keys,
    Values,
    Both,
}

fn listing(ctx: &mut Ctx, args: &Args, parts: Parts) -> CmdResult {
    let resp3 = ctx.proto() >= 3;
    let Some(h) = ctx.read::<Hash>(args.key(1))? else {
        return Ok(Reply::Raw(if parts == Parts::Both && resp3 { b"%0\r\n".to_vec() } else { b"*0\r\n".to_vec() }));
    };
    if h.len() < super::DEFER_MIN_ELEMENTS {
        let mut out = Vec::with_capacity(16 + h.len() * 24);
        listing_header(&mut out, parts, resp3, h.len());
        for (k, v) in h.iter() {
            listing_pair(&mut out, parts, k, v);
        }
        return Ok(Reply::Raw(out));
    }
    // A big hash: its snapshot, encoded off the executor (see `types::cow`).
    let snap = match ctx.db().get_ref_mut(args.key(1)) {
        Some(Value::Hash(h)) => h.snapshot(),
        _ => None,
    };
    match snap {
        Some(snap) => Ok(Reply::Deferred(Deferred::new(HashListing(snap, parts)))),
        None => {
            // A big listpack (limits raised): encoded in place.
            let Some(Value::Hash(h)) = ctx.db().get_ref(args.key(1)) else { return Err(CmdError::WrongType) };
            let mut out = Vec::with_capacity(16 + h.len() * 24);
            listing_header(&mut out, parts, resp3, h.len());
            for (k, v) in h.iter() {
                listing_pair(&mut out, parts, k, v);
            }
            Ok(Reply::Raw(out))
        }
    }
}

fn listing_header(out: &mut Vec<u8>, parts: Parts, resp3: bool, n: usize) {
    match parts {
        Parts::Both if resp3 => int_line(out, b'%', n as i64),
        Parts::Both => int_line(out, b'*', 2 * n as i64),
        _ => int_line(out, b'*', n as i64),
    }
}

fn listing_pair(out: &mut Vec<u8>, parts: Parts, k: &[u8], v: &[u8]) {
    if parts != Parts::Values {
        bulk(out, k);
    }
    if parts != Parts::Keys {
        bulk(out, v);
    }
}

/// HGETALL / HKEYS / HVALS of a big hash, encoded from its snapshot wherever the reply is written.
struct HashListing(HashSnapshot, Parts);

impl Encode for HashListing {
    fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        listing_header(out, self.1, proto >= 3, self.0.len());
        self.0.for_each(|k, v| listing_pair(out, self.1, k, v));
    }

    fn size_hint(&self) -> usize {
        16 + self.0.data_bytes_hint() + self.0.len() * 16
    }

    fn min_size(&self) -> usize {
        // At least six bytes per bulk string (the arena's bytes may include both parts).
        self.0.len() * if self.1 == Parts::Both { 12 } else { 6 }
    }

    fn streams(&self) -> bool {
        true
    }

    fn encode_piece(&self, proto: u8, cur: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let base = out.len();
        if !cur.started {
            cur.started = true;
            listing_header(out, self.1, proto >= 3, self.0.len());
        }
        let next = self.0.for_each_from((cur.a, cur.b), |k, v| {
            listing_pair(out, self.1, k, v);
            out.len() - base < PIECE_BYTES
        });
        match next {
            Some((seg, i)) => {
                (cur.a, cur.b) = (seg, i);
                Piece::More
            }
            None => Piece::Done(None),
        }
    }
}

/// HKEYS key
///
/// Every field name (empty array for a missing key).
pub fn hkeys(ctx: &mut Ctx, args: &Args) -> CmdResult {
    listing(ctx, args, Parts::Keys)
}

/// HVALS key
///
/// Every value (empty array for a missing key).
pub fn hvals(ctx: &mut Ctx, args: &Args) -> CmdResult {
    listing(ctx, args, Parts::Values)
}

/// HGETALL key
///
/// Every field and value: a map in RESP3, a flat field, value, ... array in RESP2.
pub fn hgetall(ctx: &mut Ctx, args: &Args) -> CmdResult {
    listing(ctx, args, Parts::Both)
}

/// HINCRBY key field increment
///
/// Adds the integer increment to the field's value (0 when absent), creating the hash and the
/// field as needed, and replies with the new value. The increment is parsed before the key is
/// looked up; a stored value that is not an integer, or a result outside 64 bits, is an error.
pub fn hincrby(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let incr = args.i64(3)?;
    let key = args.key(1);
    let field = args.get(2);
    let (max_entries, max_value) = limits(ctx);
    let h = ctx.write_or_create::<Hash>(key)?;
    let current = match h.get(field) {
        Some(v) => parse_i64(v).ok_or_else(|| CmdError::err("hash value is not an integer"))?,
        None => 0,
    };
    let next = current.checked_add(incr).ok_or(CmdError::Overflow)?;
    let mut buf = itoa::Buffer::new();
    h.set_keep_ttl(field, buf.format(next).as_bytes(), max_entries, max_value);
    ctx.notify(crate::pubsub::ev::HASH, "hincrby", key);
    ctx.modified(key, 1);
    Ok(Reply::Int(next))
}

/// HINCRBYFLOAT key field increment
///
/// Adds the float increment to the field's value (0 when absent) in x87 long double arithmetic,
/// stores the result as text formatted as INCRBYFLOAT does, and replies with it. A NaN or
/// infinite increment, a stored value that is not a float, or a non-finite result are errors.
pub fn hincrbyfloat(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let incr = args.get(3);
    match incr_long_double(None, incr) {
        Ok(_) => {}
        Err(LdError::NanOrInf) => return Err(CmdError::err("value is NaN or Infinity")),
        Err(_) => return Err(CmdError::NotFloat),
    }
    let key = args.key(1);
    let field = args.get(2);
    let (max_entries, max_value) = limits(ctx);
    let h = ctx.write_or_create::<Hash>(key)?;
    let next = incr_long_double(Some(h.get(field).unwrap_or(b"0")), incr).map_err(|e| match e {
        LdError::BadCurrent => CmdError::err("hash value is not a float"),
        LdError::BadIncrement => CmdError::NotFloat,
        LdError::NanOrInf => CmdError::err("increment would produce NaN or Infinity"),
    })?;
    h.set_keep_ttl(field, &next, max_entries, max_value);
    ctx.notify(crate::pubsub::ev::HASH, "hincrbyfloat", key);
    ctx.modified(key, 1);
    ctx.propagate_as_parts(&[b"HSET", key, field, &next]);
    Ok(Reply::Bulk(next))
}

/// HRANDFIELD key [count [WITHVALUES]]
///
/// Without a count, one random field (nil for a missing key). A positive count gives up to that
/// many distinct fields; a negative one gives exactly |count| fields, possibly repeated.
/// WITHVALUES adds each value: flat in RESP2, a two-element array per pair in RESP3. The count
/// and the option are checked before the key is looked up.
pub fn hrandfield(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() >= 3 {
        let l = args.i64(2)?;
        if l == i64::MIN {
            return Err(CmdError::err(format!(
                "value is out of range, value must between {} and {}",
                -i64::MAX,
                i64::MAX
            )));
        }
        let with_values = args.len() == 4;
        if args.len() > 4 || (with_values && !c_word_is(args.get(3), "withvalues")) {
            return Err(CmdError::Syntax);
        }
        if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
            return Err(CmdError::err("value is out of range"));
        }
        return hrandfield_count(ctx, args.key(1), l, with_values);
    }
    let Some(h) = ctx.read::<Hash>(args.key(1))? else {
        return Ok(Reply::Nil);
    };
    let ix = h.indexed();
    if ix.is_empty() {
        return Ok(Reply::Nil);
    }
    Ok(Reply::Bulk(ix.pair(fastrand::usize(..ix.len())).0.to_vec()))
}

fn hrandfield_count(ctx: &mut Ctx, key: &[u8], l: i64, with_values: bool) -> CmdResult {
    let resp3 = ctx.proto() >= 3;
    // A reply past the client's hard output limit only closes it: stop building there.
    let cap = ctx.reply_cap();
    let Some(h) = ctx.read::<Hash>(key)? else {
        return Ok(Reply::Raw(b"*0\r\n".to_vec()));
    };
    let count = l.unsigned_abs();
    let unique = l >= 0;
    if count == 0 {
        return Ok(Reply::Raw(b"*0\r\n".to_vec()));
    }
    let ix = h.indexed();
    let size = ix.len() as u64;
    let mut out = Vec::new();
    let header = |out: &mut Vec<u8>, n: u64| {
        let n = if with_values && !resp3 { n * 2 } else { n };
        int_line(out, b'*', n as i64);
    };
    let emit = |out: &mut Vec<u8>, (k, v): (&[u8], &[u8])| {
        if with_values && resp3 {
            out.extend_from_slice(b"*2\r\n");
        }
        bulk(out, k);
        if with_values {
            bulk(out, v);
        }
    };
    if !unique || count == 1 {
        header(&mut out, count);
        for _ in 0..count {
            emit(&mut out, ix.pair(fastrand::usize(..ix.len())));
            if cap.is_some_and(|cap| out.len() >= cap) {
                return Ok(Reply::Raw(out));
            }
            if out.len() > MAX_RANDOM_REPLY_BYTES {
                return Err(CmdError::err("HRANDFIELD reply is too large"));
            }
        }
        return Ok(Reply::Raw(out));
    }
    if count >= size {
        header(&mut out, size);
        for (k, v) in h.iter() {
            emit(&mut out, (k, v));
        }
        return Ok(Reply::Raw(out));
    }
    // Distinct positions: a partial shuffle when most of the hash is wanted, otherwise
    // rejection sampling. Replies list them in encoding order, as Redis's listpack path does.
    let (size, count) = (size as usize, count as usize);
    let mut picked: Vec<usize> = if count * 3 > size {
        let mut all: Vec<usize> = (0..size).collect();
        for i in 0..count {
            let j = fastrand::usize(i..size);
            all.swap(i, j);
        }
        all.truncate(count);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(count);
        while seen.len() < count {
            seen.insert(fastrand::usize(..size));
        }
        seen.into_iter().collect()
    };
    picked.sort_unstable();
    header(&mut out, count as u64);
    for i in picked {
        emit(&mut out, ix.pair(i));
    }
    Ok(Reply::Raw(out))
}

use super::scan::{self, c_word_is};

/// HSCAN key cursor [MATCH pattern] [COUNT count]
///
/// One step of a cursor walk over the fields. A listpack hash is returned whole with cursor 0;
/// a table is walked bucket by bucket until about COUNT strings (fields and values both count)
/// were collected or ten times COUNT buckets were visited. MATCH filters by field name after
/// collection. The cursor is checked first, then the key, then the options.
pub fn hscan(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let cursor = scan::cursor_arg(args, 2)?;
    let hash = ctx.read::<Hash>(args.key(1))?;
    scan::collection(hash, cursor, args)
}

impl scan::Scan for &Hash {
    const ITEMS: i64 = 2;
    fn step(&mut self, cursor: u64, visit: &mut dyn FnMut(scan::Entry<'_>)) -> u64 {
        self.scan(cursor, |k, v| visit(scan::Entry { name: k, value: Some(v), type_name: None }))
    }
}

// ---------------------------------------------------------------------------------------------
// Field TTLs (Redis 7.4): HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL, HPTTL, HEXPIRETIME,
// HPEXPIRETIME, HPERSIST. Redis 7.0 has none of them, so these follow 7.4's documented replies
// and its error texts and precedence. Expired fields never reach a handler: the database's
// lookups remove them first (see `db`), so "expired" needs no case here.

/// The latest absolute field expiry 7.4 accepts, in unix ms (a quarter of its 48-bit range).
const HFE_MAX_ABS_TIME_MS: i64 = (1 << 46) - 1;

/// Per-field reply codes (7.4).
const NO_FIELD: i64 = -2;
const NO_TTL: i64 = -1;
const CONDITION_NOT_MET: i64 = 0;
const SET_OK: i64 = 1;
const DELETED: i64 = 2;

/// Where the fields of `... FIELDS numfields field ...` are, with FIELDS expected at `at`
/// (checked in 7.4's order: the keyword, a count >= 1, then the count against what follows).
fn fields_at(args: &Args, at: usize) -> Result<std::ops::Range<usize>, CmdError> {
    if !c_word_is(args.get(at), "fields") {
        return Err(CmdError::err("Mandatory argument FIELDS is missing or not at the right position"));
    }
    let n = parse_i64(args.get(at + 1))
        .filter(|&n| n >= 1)
        .ok_or_else(|| CmdError::err("Parameter `numFields` should be greater than 0"))?;
    let first = at + 2;
    if n as u64 != (args.len() - first) as u64 {
        return Err(CmdError::err("The `numfields` parameter must match the number of arguments"));
    }
    Ok(first..args.len())
}

/// An array of one code per field (a missing key: every field is missing).
fn codes(codes: impl Iterator<Item = i64>) -> Reply {
    Reply::Array(codes.map(Reply::Int).collect())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cond {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

/// The shared body of the HEXPIRE family: `unit_ms` is what one unit of the time argument is
/// worth, `relative` whether it counts from now. Checks go as in 7.4: the key's type, the time
/// (an integer, not negative, the result within the limit), the condition, then FIELDS.
fn hexpire_generic(ctx: &mut Ctx, args: &Args, unit_ms: i64, relative: bool) -> CmdResult {
    let key = args.key(1);
    let exists = ctx.write::<Hash>(key)?.is_some();
    let mut at = args.i64(2)?;
    if at < 0 {
        return Err(CmdError::err("invalid expire time, must be >= 0"));
    }
    let bad_time = || CmdError::err(format!("invalid expire time in '{}' command", ctx.spec().name));
    if unit_ms == 1000 {
        if at > HFE_MAX_ABS_TIME_MS / 1000 {
            return Err(bad_time());
        }
        at *= 1000;
    }
    let now = ctx.now_ms();
    let base = if relative { now } else { 0 };
    if at > HFE_MAX_ABS_TIME_MS - base {
        return Err(bad_time());
    }
    at += base;
    let word = args.get(3);
    let cond = [("nx", Cond::Nx), ("xx", Cond::Xx), ("gt", Cond::Gt), ("lt", Cond::Lt)]
        .into_iter()
        .find(|(name, _)| c_word_is(word, name))
        .map_or(Cond::Always, |(_, c)| c);
    let fields = fields_at(args, if cond == Cond::Always { 3 } else { 4 })?;
    if !exists {
        return Ok(codes(fields.map(|_| NO_FIELD)));
    }
    let Some(h) = ctx.write::<Hash>(key)? else {
        return Ok(codes(fields.map(|_| NO_FIELD)));
    };
    // 7.4 turns a listpack into listpackex on any call that reaches the fields.
    h.prepare_field_expires();
    let (mut updated, mut deleted) = (0u64, 0u64);
    let mut out = Vec::with_capacity(fields.len().min(1024));
    for i in fields {
        let f = args.get(i);
        let code = if !h.contains(f) {
            NO_FIELD
        } else {
            let prev = h.field_expire(f);
            // A field without a TTL counts as an infinite one for GT and LT.
            let pass = match cond {
                Cond::Always => true,
                Cond::Nx => prev.is_none(),
                Cond::Xx => prev.is_some(),
                Cond::Gt => prev.is_some_and(|p| at > p),
                Cond::Lt => prev.is_none_or(|p| at < p),
            };
            if !pass {
                CONDITION_NOT_MET
            } else if at <= now {
                h.remove(f);
                deleted += 1;
                DELETED
            } else {
                h.set_field_expire(f, at);
                updated += 1;
                SET_OK
            }
        };
        out.push(Reply::Int(code));
    }
    let emptied = h.is_empty();
    if updated + deleted > 0 {
        ctx.modified(key, updated + deleted);
        if emptied {
            ctx.db().remove(key, now);
            ctx.notify(ev::HASH, "hdel", key);
            ctx.notify(ev::GENERIC, "del", key);
        } else {
            if updated > 0 {
                ctx.db().note_field_expire(key, at);
            }
            ctx.notify(ev::HASH, if deleted > 0 { "hdel" } else { "hexpire" }, key);
        }
    }
    Ok(Reply::Array(out))
}

/// HEXPIRE key seconds [NX | XX | GT | LT] FIELDS numfields field [field ...]
///
/// Gives each field a TTL in seconds. Per field: -2 absent (or the key is), 0 when the NX / XX
/// / GT / LT condition fails (a field without TTL counts as infinite), 1 set, 2 deleted because
/// the time is not in the future (0 seconds); the key goes with its last field. Emits `hexpire`,
/// or `hdel` when fields were deleted (then `del` for the key).
pub fn hexpire(ctx: &mut Ctx, args: &Args) -> CmdResult {
    hexpire_generic(ctx, args, 1000, true)
}

/// HPEXPIRE key milliseconds [NX | XX | GT | LT] FIELDS numfields field [field ...]
///
/// HEXPIRE with the TTL in milliseconds.
pub fn hpexpire(ctx: &mut Ctx, args: &Args) -> CmdResult {
    hexpire_generic(ctx, args, 1, true)
}

/// HEXPIREAT key unix-time-seconds [NX | XX | GT | LT] FIELDS numfields field [field ...]
///
/// HEXPIRE with an absolute unix time in seconds; a time in the past deletes the field (2).
pub fn hexpireat(ctx: &mut Ctx, args: &Args) -> CmdResult {
    hexpire_generic(ctx, args, 1000, false)
}

/// HPEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT] FIELDS numfields field [field ...]
///
/// HEXPIREAT with the time in milliseconds.
pub fn hpexpireat(ctx: &mut Ctx, args: &Args) -> CmdResult {
    hexpire_generic(ctx, args, 1, false)
}

/// The shared body of HTTL and friends: per field -2 absent (or no key), -1 no TTL, else the
/// time left (`relative`) or the unix time, in seconds rounded up or in milliseconds.
fn httl_generic(ctx: &mut Ctx, args: &Args, unit_ms: i64, relative: bool) -> CmdResult {
    let now = ctx.now_ms();
    let h = ctx.read::<Hash>(args.key(1))?;
    let fields = fields_at(args, 2)?;
    let base = if relative { now } else { 0 };
    Ok(codes(fields.map(|i| {
        let f = args.get(i);
        match h {
            Some(h) if h.contains(f) => match h.field_expire(f) {
                None => NO_TTL,
                Some(at) if unit_ms == 1000 => (at + 999 - base) / 1000,
                Some(at) => at - base,
            },
            _ => NO_FIELD,
        }
    })))
}

/// HTTL key FIELDS numfields field [field ...]
///
/// The remaining TTL of each field in seconds (rounded up): -2 for a missing field or key, -1
/// for a field without TTL.
pub fn httl(ctx: &mut Ctx, args: &Args) -> CmdResult {
    httl_generic(ctx, args, 1000, true)
}

/// HPTTL key FIELDS numfields field [field ...]
///
/// HTTL in milliseconds.
pub fn hpttl(ctx: &mut Ctx, args: &Args) -> CmdResult {
    httl_generic(ctx, args, 1, true)
}

/// HEXPIRETIME key FIELDS numfields field [field ...]
///
/// The unix time in seconds (rounded up) at which each field expires; -2 / -1 as HTTL.
pub fn hexpiretime(ctx: &mut Ctx, args: &Args) -> CmdResult {
    httl_generic(ctx, args, 1000, false)
}

/// HPEXPIRETIME key FIELDS numfields field [field ...]
///
/// HEXPIRETIME in milliseconds.
pub fn hpexpiretime(ctx: &mut Ctx, args: &Args) -> CmdResult {
    httl_generic(ctx, args, 1, false)
}

/// HPERSIST key FIELDS numfields field [field ...]
///
/// Removes each field's TTL: 1 removed, -1 the field has none, -2 the field or key is missing.
/// Emits `hpersist` when some TTL was removed.
pub fn hpersist(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let h = ctx.write::<Hash>(key)?;
    let fields = fields_at(args, 2)?;
    let Some(h) = h else {
        return Ok(codes(fields.map(|_| NO_FIELD)));
    };
    let mut changed = 0u64;
    let out = codes(fields.map(|i| {
        let f = args.get(i);
        if !h.contains(f) {
            NO_FIELD
        } else if h.persist_field(f) {
            changed += 1;
            SET_OK
        } else {
            NO_TTL
        }
    }));
    if changed > 0 {
        ctx.modified(key, changed);
        ctx.notify(ev::HASH, "hpersist", key);
    }
    Ok(out)
}
