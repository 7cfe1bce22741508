//! The string family: GET, SET and its variants (SETNX SETEX PSETEX GETSET GETDEL GETEX), MGET,
//! MSET, MSETNX, APPEND, STRLEN, SETRANGE, GETRANGE/SUBSTR, the INCR family, INCRBYFLOAT and LCS.
//!
//! Behaviour, error texts and error precedence follow redis-server 7.0 (checked byte for byte
//! against it). Values are stored through `RStr` so OBJECT ENCODING matches Redis: whole-value
//! writes choose int/embstr/raw as Redis's `tryObjectEncoding` does, in-place edits (APPEND,
//! SETRANGE) go through `make_raw()` and report `raw`, INCR results are `int`, INCRBYFLOAT results
//! are plain strings. This module owns no state; it must not touch other value types beyond
//! answering WRONGTYPE.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::pubsub::ev;
use crate::resp::Reply;
use crate::types::{RStr, Value};
use crate::util::num::{incr_long_double, parse_i64, LdError};
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    spec("get", 2, READONLY | FAST, keys(1, 1, 1), acl::STRING, get),
    spec("set", -3, WRITE | DENYOOM, keys(1, 1, 1), acl::STRING, set),
    spec("setnx", 3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::STRING, setnx),
    spec("setex", 4, WRITE | DENYOOM, keys(1, 1, 1), acl::STRING, setex),
    spec("psetex", 4, WRITE | DENYOOM, keys(1, 1, 1), acl::STRING, psetex),
    spec("getset", 3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::STRING, getset),
    spec("getdel", 2, WRITE | FAST, keys(1, 1, 1), acl::STRING, getdel),
    spec("getex", -2, WRITE | FAST, keys(1, 1, 1), acl::STRING, getex),
    spec("mget", -2, READONLY | FAST, keys(1, -1, 1), acl::STRING, mget),
    spec("mset", -3, WRITE | DENYOOM, keys(1, -1, 2), acl::STRING, mset),
    spec("msetnx", -3, WRITE | DENYOOM, keys(1, -1, 2), acl::STRING, msetnx),
    spec("append", 3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::STRING, append),
    spec("strlen", 2, READONLY | FAST, keys(1, 1, 1), acl::STRING, strlen),
    spec("setrange", 4, WRITE | DENYOOM, keys(1, 1, 1), acl::STRING, setrange),
    spec("getrange", 4, READONLY, keys(1, 1, 1), acl::STRING, getrange),
    spec("substr", 4, READONLY, keys(1, 1, 1), acl::STRING, getrange),
    spec("incr", 2, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::STRING, incr),
    spec("decr", 2, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::STRING, decr),
    spec("incrby", 3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::STRING, incrby),
    spec("decrby", 3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::STRING, decrby),
    spec("incrbyfloat", 3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::STRING, incrbyfloat),
    spec("lcs", -3, READONLY, keys(1, 2, 1), acl::STRING, lcs),
];

/// The string inside `v`, or WRONGTYPE once other value types exist.
#[allow(unreachable_patterns)]
fn as_rstr(v: &Value) -> Result<&RStr, CmdError> {
    match v {
        Value::Str(s) => Ok(s),
        _ => Err(CmdError::WrongType),
    }
}

/// An option word as Redis compares it: C string semantics, so the word ends at the first NUL.
fn word(arg: &[u8]) -> &[u8] {
    match memchr::memchr(0, arg) {
        Some(end) => &arg[..end],
        None => arg,
    }
}

/// Whether option `arg` is `name`, case-insensitively (with C string semantics).
fn opt_is(arg: &[u8], name: &str) -> bool {
    word(arg).eq_ignore_ascii_case(name.as_bytes())
}

/// How an expire argument is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpireKind {
    /// Relative seconds (EX, SETEX).
    Ex,
    /// Relative milliseconds (PX, PSETEX).
    Px,
    /// Absolute unix seconds (EXAT).
    ExAt,
    /// Absolute unix milliseconds (PXAT).
    PxAt,
}

impl ExpireKind {
    fn seconds(self) -> bool {
        matches!(self, ExpireKind::Ex | ExpireKind::ExAt)
    }

    fn relative(self) -> bool {
        matches!(self, ExpireKind::Ex | ExpireKind::Px)
    }
}

/// The options of SET and GETEX after parsing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ExtOpts<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    persist: bool,
    expire: Option<(ExpireKind, &'a [u8])>,
}

/// Parses SET's (`for_set`) or GETEX's options from `args[start..]`. Any unknown word, a
/// conflicting combination or a missing expire value is a syntax error; repeating the same
/// option is allowed and the last value wins, as in Redis. The expire value itself is validated
/// later, so a syntax error anywhere takes precedence over a bad number.
fn parse_ext_opts(args: &Args, start: usize, for_set: bool) -> Result<ExtOpts<'_>, CmdError> {
    let mut o = ExtOpts::default();
    let mut j = start;
    let argc = args.len();
    while j < argc {
        let opt = word(args.get(j));
        let has_next = j + 1 < argc;
        let kind_ok = |k: ExpireKind, o: &ExtOpts| {
            !o.keepttl && !o.persist && has_next && o.expire.is_none_or(|(cur, _)| cur == k)
        };
        let expire_kind = if opt.eq_ignore_ascii_case(b"ex") {
            Some(ExpireKind::Ex)
        } else if opt.eq_ignore_ascii_case(b"px") {
            Some(ExpireKind::Px)
        } else if opt.eq_ignore_ascii_case(b"exat") {
            Some(ExpireKind::ExAt)
        } else if opt.eq_ignore_ascii_case(b"pxat") {
            Some(ExpireKind::PxAt)
        } else {
            None
        };
        if for_set && opt.eq_ignore_ascii_case(b"nx") && !o.xx {
            o.nx = true;
        } else if for_set && opt.eq_ignore_ascii_case(b"xx") && !o.nx {
            o.xx = true;
        } else if for_set && opt.eq_ignore_ascii_case(b"get") {
            o.get = true;
        } else if for_set && opt.eq_ignore_ascii_case(b"keepttl") && !o.persist && o.expire.is_none() {
            o.keepttl = true;
        } else if !for_set && opt.eq_ignore_ascii_case(b"persist") && !o.keepttl && o.expire.is_none() {
            o.persist = true;
        } else if let Some(kind) = expire_kind.filter(|&k| kind_ok(k, &o)) {
            o.expire = Some((kind, args.get(j + 1)));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// Turns an expire argument into an absolute unix-ms time. Zero, negative and overflowing
/// values are `invalid expire time in '<cmd>' command`; non-integers are "not an integer".
fn expire_at_ms(ctx: &Ctx, kind: ExpireKind, raw: &[u8]) -> Result<i64, CmdError> {
    let invalid = || CmdError::InvalidExpire(ctx.spec().name.to_string());
    let mut ms = parse_i64(raw).ok_or(CmdError::NotInteger)?;
    if ms <= 0 || (kind.seconds() && ms > i64::MAX / 1000) {
        return Err(invalid());
    }
    if kind.seconds() {
        ms *= 1000;
    }
    if kind.relative() {
        // Redis adds without an overflow check and then refuses a non-positive result; a
        // wrapping add reproduces exactly which values it accepts.
        ms = ms.wrapping_add(ctx.now_ms());
    }
    if ms <= 0 {
        return Err(invalid());
    }
    Ok(ms)
}

/// The error for a string that would outgrow proto-max-bulk-len (Redis's checkStringLength).
fn check_string_length(max: i64, size: u64, append: u64) -> Result<(), CmdError> {
    let total = size as u128 + append as u128;
    if max < 0 || total > max as u128 {
        return Err(CmdError::StringTooLong);
    }
    Ok(())
}

/// The current string under `key` as a bulk reply (nil when absent), counting a keyspace hit or
/// miss: Redis's getGenericCommand, shared by GET, GETSET, GETDEL and SET ... GET.
fn get_reply(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    match ctx.read::<RStr>(key)? {
        None => Ok(Reply::Nil),
        Some(v) => Ok(Reply::Bulk(v.to_vec())),
    }
}

/// GET key
///
/// The string under `key`, nil when absent, WRONGTYPE for other types.
pub fn get(ctx: &mut Ctx, args: &Args) -> CmdResult {
    get_reply(ctx, args.key(1))
}

/// Argument `arg` as a stored string. A big one keeps its own allocation instead of being copied:
/// every argument of `BIG_ARG` bytes or more has one (the parser reads it into one, and scripts,
/// functions and the AOF loader build theirs by copying), so keeping it pins nothing else.
fn stored_value(arg: &Bytes) -> RStr {
    if arg.len() >= crate::resp::parser::BIG_ARG {
        RStr::adopt(arg.clone())
    } else {
        RStr::from_bytes(arg)
    }
}

/// What a SET-like command does once its arguments are parsed.
struct SetPlan<'a> {
    key: &'a [u8],
    value: &'a Bytes,
    nx: bool,
    xx: bool,
    get: bool,
    keepttl: bool,
    /// Absolute unix-ms expire time.
    expire_at: Option<i64>,
    /// Propagate as `SET key value PXAT <ms>` (every expire form, PXAT included), so the AOF
    /// holds an absolute time.
    propagate_pxat: bool,
}

/// The shared body of SET, SETNX, SETEX and PSETEX (Redis's setGenericCommand). Returns whether
/// the value was stored and, with GET, the old value's reply.
fn set_generic(ctx: &mut Ctx, plan: &SetPlan) -> Result<(bool, Reply), CmdError> {
    let old = if plan.get { get_reply(ctx, plan.key)? } else { Reply::Nil };
    let now = ctx.now_ms();
    let looked_up = plan.nx || plan.xx;
    if looked_up {
        let found = ctx.lookup_write(plan.key).is_some();
        if (plan.nx && found) || (plan.xx && !found) {
            return Ok((false, old));
        }
    } else {
        // Redis looks the key up before overwriting it, which expires (and counts) a stale key;
        // only that side effect matters here, and it is free when no key has a TTL.
        let db = ctx.db();
        if db.expires_len() > 0 {
            db.expire_at(plan.key, now);
        }
    }
    let value = Value::Str(stored_value(plan.value));
    let db = ctx.db();
    // After the write lookup the store must not stamp the access time a second time.
    let replaced = match (plan.keepttl, looked_up) {
        (false, false) => db.set(plan.key, value, now),
        (true, false) => db.set_keep_ttl(plan.key, value, now),
        (false, true) => db.overwrite(plan.key, value, now),
        (true, true) => db.overwrite_keep_ttl(plan.key, value, now),
    };
    if replaced.is_none() {
        ctx.notify(ev::NEW, "new", plan.key);
    }
    let db = ctx.db();
    if let Some(at) = plan.expire_at {
        // An absolute time already past still stores the key, as Redis 7.0 does: it is expired
        // lazily (and counted in expired_keys) on the next access.
        db.set_expire(plan.key, at);
    }
    ctx.modified(plan.key, 1);
    ctx.notify(ev::STRING, "set", plan.key);
    if let Some(at) = plan.expire_at {
        ctx.notify(ev::GENERIC, "expire", plan.key);
        if plan.propagate_pxat && ctx.propagating() {
            ctx.propagate_as_parts(&[b"SET", plan.key, &plan.value[..], b"PXAT", at.to_string().as_bytes()]);
        }
    }
    Ok((true, old))
}

/// SET key value [NX | XX] [GET] [EX seconds | PX milliseconds | EXAT unix-time-seconds |
/// PXAT unix-time-milliseconds | KEEPTTL]
///
/// Stores `value` under `key`, dropping any TTL unless KEEPTTL, and sets the given expire time.
/// NX only stores when the key is absent, XX only when present; an aborted SET answers nil.
/// With GET the reply is the old value (nil if absent) whether or not the store happened, and a
/// non-string old value is WRONGTYPE with nothing stored.
pub fn set(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() == 3 {
        // The benchmark hot path: no options to parse.
        let plan = SetPlan {
            key: args.key(1),
            value: &args.argv[2],
            nx: false,
            xx: false,
            get: false,
            keepttl: false,
            expire_at: None,
            propagate_pxat: false,
        };
        set_generic(ctx, &plan)?;
        return Ok(Reply::Ok);
    }
    let opts = parse_ext_opts(args, 3, true)?;
    let expire_at = match opts.expire {
        Some((kind, raw)) => Some(expire_at_ms(ctx, kind, raw)?),
        None => None,
    };
    let plan = SetPlan {
        key: args.key(1),
        value: &args.argv[2],
        nx: opts.nx,
        xx: opts.xx,
        get: opts.get,
        keepttl: opts.keepttl,
        expire_at,
        propagate_pxat: true,
    };
    let (stored, old) = set_generic(ctx, &plan)?;
    // Propagated without GET (an expire rewrote the whole command already), as Redis does.
    if opts.get && stored && expire_at.is_none() && ctx.propagating() {
        let parts: Vec<&[u8]> = args
            .from(0)
            .enumerate()
            .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"))
            .map(|(_, a)| a)
            .collect();
        ctx.propagate_as_parts(&parts);
    }
    Ok(match (opts.get, stored) {
        (true, _) => old,
        (false, true) => Reply::Ok,
        (false, false) => Reply::Nil,
    })
}

/// SETNX key value
///
/// Stores `value` only when `key` does not exist. Replies 1 when stored, else 0.
pub fn setnx(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let plan = SetPlan {
        key: args.key(1),
        value: &args.argv[2],
        nx: true,
        xx: false,
        get: false,
        keepttl: false,
        expire_at: None,
        propagate_pxat: false,
    };
    let (stored, _) = set_generic(ctx, &plan)?;
    Ok(Reply::Int(stored as i64))
}

/// SETEX key seconds value
///
/// SET with a relative expire in seconds; a non-positive or overflowing time is refused.
pub fn setex(ctx: &mut Ctx, args: &Args) -> CmdResult {
    set_with_expire(ctx, args, ExpireKind::Ex)
}

/// PSETEX key milliseconds value
///
/// SET with a relative expire in milliseconds; a non-positive or overflowing time is refused.
pub fn psetex(ctx: &mut Ctx, args: &Args) -> CmdResult {
    set_with_expire(ctx, args, ExpireKind::Px)
}

fn set_with_expire(ctx: &mut Ctx, args: &Args, kind: ExpireKind) -> CmdResult {
    let at = expire_at_ms(ctx, kind, args.get(2))?;
    let plan = SetPlan {
        key: args.key(1),
        value: &args.argv[3],
        nx: false,
        xx: false,
        get: false,
        keepttl: false,
        expire_at: Some(at),
        propagate_pxat: true,
    };
    set_generic(ctx, &plan)?;
    Ok(Reply::Ok)
}

/// GETSET key value
///
/// Stores `value` (dropping any TTL) and replies with the old value, nil if there was none.
pub fn getset(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let old = get_reply(ctx, args.key(1))?;
    ctx.set_key(args.key(1), Value::Str(stored_value(&args.argv[2])));
    ctx.modified(args.key(1), 1);
    ctx.notify(ev::STRING, "set", args.key(1));
    ctx.propagate_as_parts(&[b"SET", args.key(1), args.get(2)]);
    Ok(old)
}

/// GETDEL key
///
/// Replies with the value under `key` (nil if absent) and deletes the key.
pub fn getdel(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let reply = get_reply(ctx, args.key(1))?;
    if !matches!(reply, Reply::Nil) {
        let now = ctx.now_ms();
        ctx.db().remove(args.key(1), now);
        ctx.modified(args.key(1), 1);
        ctx.notify(ev::GENERIC, "del", args.key(1));
        ctx.propagate_as_parts(&[b"DEL", args.key(1)]);
    }
    Ok(reply)
}

/// GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT
/// unix-time-milliseconds | PERSIST]
///
/// Replies with the value under `key` (nil if absent) and changes its TTL: a new expire time, or
/// none with PERSIST. An absolute time already past deletes the key after replying. A missing key
/// answers nil before the expire value is even checked, as in Redis.
pub fn getex(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let opts = parse_ext_opts(args, 2, false)?;
    let key = args.key(1);
    let reply = match ctx.read::<RStr>(key)? {
        None => return Ok(Reply::Nil),
        Some(v) => v.to_vec(),
    };
    let expire_at = match opts.expire {
        Some((kind, raw)) => Some((kind, expire_at_ms(ctx, kind, raw)?)),
        None => None,
    };
    let now = ctx.now_ms();
    match expire_at {
        Some((kind, at)) if !kind.relative() && at <= now && !ctx.loading() => {
            ctx.db().remove(key, now);
            ctx.modified(key, 1);
            ctx.notify(ev::GENERIC, "del", key);
            let verb: &[u8] = if lazy_expire(ctx) { b"UNLINK" } else { b"DEL" };
            ctx.propagate_as_parts(&[verb, key]);
        }
        Some((_, at)) => {
            ctx.db().set_expire(key, at);
            ctx.modified(key, 1);
            ctx.notify(ev::GENERIC, "expire", key);
            ctx.propagate_as_parts(&[b"PEXPIREAT", key, at.to_string().as_bytes()]);
        }
        None if opts.persist && ctx.db().persist(key, now) => {
            ctx.modified(key, 1);
            ctx.notify(ev::GENERIC, "persist", key);
            ctx.propagate_as_parts(&[b"PERSIST", key]);
        }
        None => {}
    }
    Ok(Reply::Bulk(reply))
}

/// MGET key [key ...]
///
/// The value of each key in order; nil for keys that are absent or do not hold a string.
pub fn mget(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut out = Vec::with_capacity(args.len() - 1);
    for key in args.from(1) {
        out.push(match ctx.lookup_read(key) {
            Some(v) => match as_rstr(v) {
                Ok(s) => Reply::Bulk(s.to_vec()),
                Err(_) => Reply::Nil,
            },
            None => Reply::Nil,
        });
    }
    Ok(Reply::Array(out))
}

/// MSET key value [key value ...]
///
/// Stores every pair in order (a repeated key ends with its last value), dropping TTLs.
pub fn mset(ctx: &mut Ctx, args: &Args) -> CmdResult {
    mset_generic(ctx, args, false)
}

/// MSETNX key value [key value ...]
///
/// Stores every pair only if none of the keys exists. Replies 1 when stored, else 0.
pub fn msetnx(ctx: &mut Ctx, args: &Args) -> CmdResult {
    mset_generic(ctx, args, true)
}

fn mset_generic(ctx: &mut Ctx, args: &Args, nx: bool) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(ctx.spec().name.to_string()));
    }
    if nx {
        for j in (1..args.len()).step_by(2) {
            if ctx.lookup_write(args.key(j)).is_some() {
                return Ok(Reply::Int(0));
            }
        }
    }
    for j in (1..args.len()).step_by(2) {
        ctx.set_key(args.key(j), Value::Str(stored_value(&args.argv[j + 1])));
        ctx.modified(args.key(j), 1);
        ctx.notify(ev::STRING, "set", args.key(j));
    }
    Ok(if nx { Reply::Int(1) } else { Reply::Ok })
}

/// APPEND key value
///
/// Appends `value` to the string under `key` (creating it when absent) and replies with the new
/// length. The grown string is edited in place with spare capacity, so repeated appends are
/// amortized O(1); its encoding becomes `raw`.
pub fn append(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let tail = args.get(2);
    let max = ctx.config().proto_max_bulk_len;
    let total = match ctx.write::<RStr>(key)? {
        None => {
            ctx.set_key(key, Value::Str(stored_value(&args.argv[2])));
            tail.len()
        }
        Some(s) => {
            check_string_length(max, s.len() as u64, tail.len() as u64)?;
            let buf = s.make_raw();
            buf.extend_from_slice(tail);
            buf.len()
        }
    };
    ctx.modified(key, 1);
    ctx.notify(ev::STRING, "append", key);
    Ok(Reply::Int(total as i64))
}

/// STRLEN key
///
/// The length of the string under `key`, 0 when absent.
pub fn strlen(ctx: &mut Ctx, args: &Args) -> CmdResult {
    match ctx.read::<RStr>(args.key(1))? {
        None => Ok(Reply::Int(0)),
        Some(v) => Ok(Reply::Int(v.len() as i64)),
    }
}

/// SETRANGE key offset value
///
/// Overwrites the string under `key` from byte `offset` with `value`, zero-padding when the
/// string is shorter, and replies with the new length. An empty `value` changes nothing (and
/// creates nothing). The result may not exceed proto-max-bulk-len.
pub fn setrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let value = args.get(3);
    let offset = args.i64(2)?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    let max = ctx.config().proto_max_bulk_len;
    let len = match ctx.write::<RStr>(key)? {
        None => {
            if value.is_empty() {
                return Ok(Reply::Int(0));
            }
            check_string_length(max, offset as u64, value.len() as u64)?;
            let mut buf = vec![0u8; offset as usize + value.len()];
            buf[offset as usize..].copy_from_slice(value);
            let len = buf.len();
            // Redis builds a fresh sds here, so the new key is `raw` whatever its content.
            ctx.set_key(key, Value::Str(RStr::Raw(Box::new(buf))));
            len
        }
        Some(s) => {
            if value.is_empty() {
                return Ok(Reply::Int(s.len() as i64));
            }
            check_string_length(max, offset as u64, value.len() as u64)?;
            let (start, end) = (offset as usize, offset as usize + value.len());
            let buf = s.make_raw();
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[start..end].copy_from_slice(value);
            buf.len()
        }
    };
    ctx.modified(key, 1);
    ctx.notify(ev::STRING, "setrange", key);
    Ok(Reply::Int(len as i64))
}

/// The byte range `start..=end` (Redis GETRANGE rules: negative indexes count from the end, both
/// ends are clamped) of a string of length `len`, or None when empty.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let n = len as i64;
    let mut start = if start < 0 { n.wrapping_add(start) } else { start };
    let mut end = if end < 0 { n.wrapping_add(end) } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= n {
        end = n - 1;
    }
    if start > end || len == 0 {
        return None;
    }
    Some((start as usize, end as usize))
}

/// GETRANGE key start end
///
/// The substring of the value under `key` between byte offsets `start` and `end` inclusive
/// (negative offsets count from the end); an empty string when absent or out of range.
/// SUBSTR is the same command under its old name.
pub fn getrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let start = args.i64(2)?;
    let end = args.i64(3)?;
    let Some(v) = ctx.lookup_read(args.key(1)) else {
        return Ok(Reply::Bulk(Vec::new()));
    };
    let s = as_rstr(v)?;
    Ok(s.with_bytes(|bytes| match clamp_range(start, end, bytes.len()) {
        Some((a, b)) => Reply::Bulk(bytes[a..=b].to_vec()),
        None => Reply::Bulk(Vec::new()),
    }))
}

/// Adds `delta` to the integer under `key` (0 when absent), keeping its TTL, and replies with the
/// result, stored with `int` encoding.
fn incr_by(ctx: &mut Ctx, key: &[u8], delta: i64) -> CmdResult {
    let result = match ctx.write::<RStr>(key)? {
        Some(s) => {
            let cur = s.as_i64().ok_or(CmdError::NotInteger)?;
            let next = cur.checked_add(delta).ok_or(CmdError::Overflow)?;
            *s = RStr::from_i64(next);
            next
        }
        None => {
            ctx.set_key(key, Value::Str(RStr::from_i64(delta)));
            delta
        }
    };
    ctx.modified(key, 1);
    ctx.notify(ev::STRING, "incrby", key);
    Ok(Reply::Int(result))
}

/// INCR key
///
/// Adds one to the integer under `key` (absent counts as 0) and replies with the result.
pub fn incr(ctx: &mut Ctx, args: &Args) -> CmdResult {
    incr_by(ctx, args.key(1), 1)
}

/// DECR key
///
/// Subtracts one from the integer under `key` (absent counts as 0) and replies with the result.
pub fn decr(ctx: &mut Ctx, args: &Args) -> CmdResult {
    incr_by(ctx, args.key(1), -1)
}

/// INCRBY key increment
///
/// Adds `increment` to the integer under `key` (absent counts as 0); overflow is refused.
pub fn incrby(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let delta = args.i64(2)?;
    incr_by(ctx, args.key(1), delta)
}

/// DECRBY key decrement
///
/// Subtracts `decrement` from the integer under `key` (absent counts as 0); overflow is refused,
/// including a decrement whose negation does not fit.
pub fn decrby(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let delta = args.i64(2)?;
    if delta == i64::MIN {
        return Err(CmdError::err("decrement would overflow"));
    }
    incr_by(ctx, args.key(1), -delta)
}

/// INCRBYFLOAT key increment
///
/// Adds `increment` to the number under `key` (absent counts as 0) in long double precision,
/// keeping the TTL, and replies with the result in Redis's human-friendly format, which is also
/// what gets stored (as a plain string, never `int`).
pub fn incrbyfloat(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let incr = args.get(2);
    let result = match ctx.write::<RStr>(key)? {
        Some(s) => {
            let next = s.with_bytes(|cur| incr_long_double(Some(cur), incr)).map_err(ld_error)?;
            *s = RStr::from_bytes_no_int(&next);
            next
        }
        None => {
            let next = incr_long_double(None, incr).map_err(ld_error)?;
            ctx.set_key(key, Value::Str(RStr::from_bytes_no_int(&next)));
            next
        }
    };
    ctx.modified(key, 1);
    ctx.notify(ev::STRING, "incrbyfloat", key);
    ctx.propagate_as_parts(&[b"SET", key, &result, b"KEEPTTL"]);
    Ok(Reply::Bulk(result))
}

/// lazyfree-lazy-expire: a key deleted for a time already past propagates as UNLINK.
pub(crate) fn lazy_expire(ctx: &Ctx) -> bool {
    ctx.config().lazyfree_lazy_expire
}

fn ld_error(e: LdError) -> CmdError {
    match e {
        LdError::BadCurrent | LdError::BadIncrement => CmdError::NotFloat,
        LdError::NanOrInf => CmdError::err("increment would produce NaN or Infinity"),
    }
}

/// One matching range of LCS IDX: positions in the first and second string, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LcsMatch {
    a: (u32, u32),
    b: (u32, u32),
}

/// What LCS computed: the length, and (when walked) the subsequence and its matching ranges.
struct LcsResult {
    len: u32,
    string: Vec<u8>,
    matches: Vec<LcsMatch>,
}

/// The longest common subsequence of `a` and `b` (the classic dynamic programming table), with
/// its contiguous matching ranges from the end of the strings backwards, as Redis reports them.
/// Without `walk` only the length is computed. None when the table cannot be allocated.
fn lcs_compute(a: &[u8], b: &[u8], walk: bool) -> Option<LcsResult> {
    let (alen, blen) = (a.len(), b.len());
    let width = blen + 1;
    let cells = (alen + 1).checked_mul(width)?;
    let mut dp: Vec<u32> = Vec::new();
    dp.try_reserve_exact(cells).ok()?;
    dp.resize(cells, 0);
    for i in 1..=alen {
        let (prev, cur) = dp[(i - 1) * width..(i + 1) * width].split_at_mut(width);
        for j in 1..=blen {
            cur[j] = if a[i - 1] == b[j - 1] { prev[j - 1] + 1 } else { prev[j].max(cur[j - 1]) };
        }
    }
    let at = |i: usize, j: usize| dp[i * width + j];
    let total = at(alen, blen);
    let mut result = LcsResult { len: total, string: Vec::new(), matches: Vec::new() };
    if !walk {
        return Some(result);
    }
    let mut string = vec![0u8; total as usize];
    let mut idx = total as usize;
    // The range being grown backwards: (a_start, a_end, b_start, b_end).
    let mut range: Option<(usize, usize, usize, usize)> = None;
    let (mut i, mut j) = (alen, blen);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            string[idx - 1] = a[i - 1];
            range = match range {
                None => Some((i - 1, i - 1, j - 1, j - 1)),
                // A match right after a match always extends the current range backwards.
                Some((_, ae, _, be)) => Some((i - 1, ae, j - 1, be)),
            };
            if let Some((as_, _, bs, _)) = range {
                if as_ == 0 || bs == 0 {
                    emit = true;
                }
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = range.is_some();
        }
        if emit {
            if let Some((as_, ae, bs, be)) = range.take() {
                result.matches.push(LcsMatch { a: (as_ as u32, ae as u32), b: (bs as u32, be as u32) });
            }
        }
    }
    result.string = string;
    Some(result)
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]
///
/// The longest common subsequence of the two strings (absent keys count as empty). LEN replies
/// with its length only; IDX with a map of the matching ranges (from the end backwards, those
/// shorter than MINMATCHLEN left out, each with its length under WITHMATCHLEN) and the length.
pub fn lcs(ctx: &mut Ctx, args: &Args) -> CmdResult {
    // Both keys are looked up before the options are read, so a type error comes first.
    let a = ctx.lookup_read(args.key(1)).map(|v| as_rstr(v).map(RStr::to_vec));
    let b = ctx.lookup_read(args.key(2)).map(|v| as_rstr(v).map(RStr::to_vec));
    let (a, b) = match (a, b) {
        (Some(Err(_)), _) | (_, Some(Err(_))) => {
            return Err(CmdError::err("The specified keys must contain string values"));
        }
        (a, b) => (a.and_then(Result::ok).unwrap_or_default(), b.and_then(Result::ok).unwrap_or_default()),
    };

    let (mut getlen, mut getidx, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let opt = args.get(j);
        let more = j + 1 < args.len();
        if opt_is(opt, "idx") {
            getidx = true;
        } else if opt_is(opt, "len") {
            getlen = true;
        } else if opt_is(opt, "withmatchlen") {
            withmatchlen = true;
        } else if opt_is(opt, "minmatchlen") && more {
            minmatchlen = args.i64(j + 1)?.max(0);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if getidx && getlen {
        return Err(CmdError::err("If you want both the length and indexes, please just use IDX."));
    }
    if a.len() as u64 >= u32::MAX as u64 - 1 || b.len() as u64 >= u32::MAX as u64 - 1 {
        return Err(CmdError::err("String too long for LCS"));
    }
    // The table is (len(a)+1) x (len(b)+1) u32 cells: bounded by proto-max-bulk-len, as Redis
    // bounds it, so two big strings cannot make the server allocate without limit.
    let table_bytes = (a.len() as u128 + 1) * (b.len() as u128 + 1) * 4;
    if table_bytes > ctx.config().proto_max_bulk_len.max(0) as u128 {
        return Err(CmdError::err("Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len"));
    }
    let walk = getidx || !getlen;
    let Some(res) = lcs_compute(&a, &b, walk) else {
        return Err(CmdError::err("Insufficient memory, failed allocating transient memory for LCS"));
    };
    if getidx {
        let matches = res
            .matches
            .iter()
            .filter_map(|m| {
                let len = m.a.1 - m.a.0 + 1;
                if minmatchlen != 0 && (len as i64) < minmatchlen {
                    return None;
                }
                let mut item = vec![
                    Reply::Array(vec![Reply::Int(m.a.0 as i64), Reply::Int(m.a.1 as i64)]),
                    Reply::Array(vec![Reply::Int(m.b.0 as i64), Reply::Int(m.b.1 as i64)]),
                ];
                if withmatchlen {
                    item.push(Reply::Int(len as i64));
                }
                Some(Reply::Array(item))
            })
            .collect();
        return Ok(Reply::Map(vec![
            (Reply::Bulk(b"matches".to_vec()), Reply::Array(matches)),
            (Reply::Bulk(b"len".to_vec()), Reply::Int(res.len as i64)),
        ]));
    }
    if getlen {
        return Ok(Reply::Int(res.len as i64));
    }
    Ok(Reply::Bulk(res.string))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Args {
        Args::new(words.iter().map(|w| bytes::Bytes::copy_from_slice(w.as_bytes())).collect())
    }

    use crate::commands::harness::Harness;

    #[test]
    fn encodings_after_writes_match_redis() {
        let mut h = Harness::new();
        h.call(&["set", "n", "123"]).unwrap();
        assert_eq!(h.encoding("n"), Some("int"));
        h.call(&["append", "n", ""]).unwrap();
        assert_eq!(h.encoding("n"), Some("raw"));
        h.call(&["incr", "n"]).unwrap();
        assert_eq!(h.encoding("n"), Some("int"));
        h.call(&["setrange", "r", "0", "1"]).unwrap();
        assert_eq!(h.encoding("r"), Some("raw"));
        assert_eq!(h.call(&["incrbyfloat", "f", "1"]), Ok(Reply::Bulk(b"1".to_vec())));
        assert_eq!(h.encoding("f"), Some("embstr"));
        h.call(&["append", "a", "12"]).unwrap();
        assert_eq!(h.encoding("a"), Some("int"));
        for _ in 0..1000 {
            h.call(&["append", "a", "xyz"]).unwrap();
        }
        assert_eq!(h.call(&["strlen", "a"]), Ok(Reply::Int(3002)));
    }

    #[test]
    fn ttl_is_kept_or_dropped_like_redis() {
        let mut h = Harness::new();
        h.call(&["set", "k", "1", "ex", "100"]).unwrap();
        let at = h.now_ms + 100_000;
        for cmd in [&["incr", "k"][..], &["incrbyfloat", "k", "1"], &["append", "k", "0"], &["setrange", "k", "0", "5"]]
        {
            h.call(cmd).unwrap();
            assert_eq!(h.expire_at("k"), Some(at), "{cmd:?}");
        }
        h.call(&["set", "k", "v", "keepttl"]).unwrap();
        assert_eq!(h.expire_at("k"), Some(at));
        h.call(&["getset", "k", "v"]).unwrap();
        assert_eq!(h.expire_at("k"), None);
        h.call(&["set", "k", "v", "px", "5"]).unwrap();
        h.call(&["mset", "k", "v"]).unwrap();
        assert_eq!(h.expire_at("k"), None);
    }

    #[test]
    fn past_absolute_expire_set_keeps_key_until_access_getex_deletes() {
        let mut h = Harness::new();
        assert_eq!(h.call(&["set", "k", "v", "pxat", "1"]), Ok(Reply::Ok));
        assert_eq!(h.st.dbs[0].len(), 1);
        assert_eq!(h.call(&["get", "k"]), Ok(Reply::Nil));
        assert_eq!(h.st.dbs[0].counters.expired_keys, 1);
        h.call(&["set", "k", "v"]).unwrap();
        assert_eq!(h.call(&["getex", "k", "pxat", "1"]), Ok(Reply::Bulk(b"v".to_vec())));
        assert_eq!(h.st.dbs[0].len(), 0);
        assert_eq!(h.st.dbs[0].counters.expired_keys, 1);
    }

    #[test]
    fn error_precedence() {
        let mut h = Harness::new();
        assert_eq!(h.call(&["set", "k", "v", "ex", "abc", "nx", "xx"]), Err(CmdError::Syntax));
        assert_eq!(h.call(&["set", "k", "v", "ex", "0"]), Err(CmdError::InvalidExpire("set".into())));
        assert_eq!(h.call(&["set", "k", "v", "ex", "9223372036854775"]), Err(CmdError::InvalidExpire("set".into())));
        assert_eq!(h.call(&["setex", "k", "-1", "v"]), Err(CmdError::InvalidExpire("setex".into())));
        assert_eq!(h.call(&["getex", "k", "ex", "abc"]), Ok(Reply::Nil));
        assert_eq!(h.call(&["decrby", "k", "-9223372036854775808"]), Err(CmdError::err("decrement would overflow")));
        assert_eq!(h.call(&["mset", "a", "1", "b"]), Err(CmdError::WrongArity("mset".into())));
        assert_eq!(h.call(&["setrange", "k", "-1", ""]), Err(CmdError::err("offset is out of range")));
        h.call(&["set", "k", "9223372036854775807"]).unwrap();
        assert_eq!(h.call(&["incr", "k"]), Err(CmdError::Overflow));
    }

    #[test]
    fn set_options_follow_redis_conflict_rules() {
        let ok = |w: &[&str]| parse_ext_opts(&args(w), 3, true).is_ok();
        assert!(ok(&["set", "k", "v", "EX", "10", "ex", "20"]));
        assert!(ok(&["set", "k", "v", "nx", "NX", "get", "GET"]));
        assert!(ok(&["set", "k", "v", "keepttl", "xx"]));
        assert!(!ok(&["set", "k", "v", "nx", "xx"]));
        assert!(!ok(&["set", "k", "v", "ex", "1", "px", "1"]));
        assert!(!ok(&["set", "k", "v", "ex", "1", "keepttl"]));
        assert!(!ok(&["set", "k", "v", "keepttl", "pxat", "1"]));
        assert!(!ok(&["set", "k", "v", "ex"]));
        assert!(!ok(&["set", "k", "v", "persist"]));
        assert!(!ok(&["set", "k", "v", "nxx"]));
        let a = args(&["set", "k", "v", "EX", "abc", "NX"]);
        let o = parse_ext_opts(&a, 3, true).unwrap();
        assert_eq!(o.expire, Some((ExpireKind::Ex, &b"abc"[..])));
        assert!(o.nx);
    }

    #[test]
    fn getex_options_follow_redis_conflict_rules() {
        let ok = |w: &[&str]| parse_ext_opts(&args(w), 2, false).is_ok();
        assert!(ok(&["getex", "k", "persist"]));
        assert!(ok(&["getex", "k", "pxat", "1", "pxat", "2"]));
        assert!(!ok(&["getex", "k", "persist", "ex", "1"]));
        assert!(!ok(&["getex", "k", "ex", "1", "persist"]));
        assert!(!ok(&["getex", "k", "nx"]));
        assert!(!ok(&["getex", "k", "keepttl"]));
        assert!(!ok(&["getex", "k", "get"]));
    }

    #[test]
    fn option_words_end_at_nul_like_c_strings() {
        assert!(opt_is(b"NX\0junk", "nx"));
        assert!(!opt_is(b"NXjunk", "nx"));
    }

    #[test]
    fn ranges_clamp_like_getrange() {
        assert_eq!(clamp_range(0, -1, 5), Some((0, 4)));
        assert_eq!(clamp_range(-3, -1, 5), Some((2, 4)));
        assert_eq!(clamp_range(-1, -3, 5), None);
        assert_eq!(clamp_range(3, 1, 5), None);
        assert_eq!(clamp_range(0, 100, 5), Some((0, 4)));
        assert_eq!(clamp_range(-100, 1, 5), Some((0, 1)));
        assert_eq!(clamp_range(i64::MIN, i64::MAX, 5), Some((0, 4)));
        assert_eq!(clamp_range(0, 0, 0), None);
        assert_eq!(clamp_range(5, 10, 5), None);
    }

    #[test]
    fn lcs_matches_redis_example() {
        let r = lcs_compute(b"ohmytext", b"mynewtext", true).unwrap();
        assert_eq!(r.len, 6);
        assert_eq!(r.string, b"mytext");
        assert_eq!(r.matches, vec![LcsMatch { a: (4, 7), b: (5, 8) }, LcsMatch { a: (2, 3), b: (0, 1) }]);
        let empty = lcs_compute(b"", b"abc", true).unwrap();
        assert_eq!((empty.len, empty.string.len(), empty.matches.len()), (0, 0, 0));
    }
}
