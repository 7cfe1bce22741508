//! The list family: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX LSET LINSERT LREM LTRIM
//! LPOS LMOVE RPOPLPUSH LMPOP and the blocking BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP.
//!
//! Behaviour, error texts and error precedence follow redis-server 7.0.15 (checked byte for byte
//! against it, RESP2 and RESP3): arguments are validated in the order Redis validates them, which
//! is why some commands parse before the key lookup and others after. Replies made of bulk strings
//! (LRANGE, counted pops, LMPOP) are encoded straight into bytes, identical in both protocols.
//! Every command that adds elements signals the key ready for blocked clients; a list emptied by a
//! command is deleted.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::pubsub::ev;
use crate::resp::reply::{Cursor, Deferred, Encode, Piece, PIECE_BYTES};
use crate::resp::Reply;
use crate::types::list::{Elem, ListSnapshot};
use crate::types::{List, Value};
use crate::util::num::parse_i64;

pub static COMMANDS: &[CommandSpec] = &[
    spec("lpush", -3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::LIST, lpush),
    spec("rpush", -3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::LIST, rpush),
    spec("lpushx", -3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::LIST, lpushx),
    spec("rpushx", -3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::LIST, rpushx),
    spec("lpop", -2, WRITE | FAST, keys(1, 1, 1), acl::LIST, lpop),
    spec("rpop", -2, WRITE | FAST, keys(1, 1, 1), acl::LIST, rpop),
    spec("llen", 2, READONLY | FAST, keys(1, 1, 1), acl::LIST, llen),
    spec("lrange", 4, READONLY, keys(1, 1, 1), acl::LIST, lrange),
    spec("lindex", 3, READONLY, keys(1, 1, 1), acl::LIST, lindex),
    spec("lset", 4, WRITE | DENYOOM, keys(1, 1, 1), acl::LIST, lset),
    spec("linsert", 5, WRITE | DENYOOM, keys(1, 1, 1), acl::LIST, linsert),
    spec("lrem", 4, WRITE, keys(1, 1, 1), acl::LIST, lrem),
    spec("ltrim", 4, WRITE, keys(1, 1, 1), acl::LIST, ltrim),
    spec("lpos", -3, READONLY, keys(1, 1, 1), acl::LIST, lpos),
    spec("lmove", 5, WRITE | DENYOOM, keys(1, 2, 1), acl::LIST, lmove),
    spec("rpoplpush", 3, WRITE | DENYOOM, keys(1, 2, 1), acl::LIST, rpoplpush),
    spec("lmpop", -4, WRITE | MOVABLEKEYS, NO_KEYS, acl::LIST, lmpop),
    spec("blpop", -3, WRITE | NOSCRIPT | BLOCKING, keys(1, -2, 1), acl::LIST, blpop),
    spec("brpop", -3, WRITE | NOSCRIPT | BLOCKING, keys(1, -2, 1), acl::LIST, brpop),
    spec("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, keys(1, 2, 1), acl::LIST, blmove),
    spec("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, keys(1, 2, 1), acl::LIST, brpoplpush),
    spec("blmpop", -5, WRITE | BLOCKING | MOVABLEKEYS, NO_KEYS, acl::LIST, blmpop),
];

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Head,
    Tail,
}

/// LEFT / RIGHT, or a syntax error.
fn parse_end(arg: &[u8]) -> Result<End, CmdError> {
    if crate::spec::c_str_eq(arg, "left") {
        Ok(End::Head)
    } else if crate::spec::c_str_eq(arg, "right") {
        Ok(End::Tail)
    } else {
        Err(CmdError::Syntax)
    }
}

/// A non-negative integer, or `ERR <msg>` for anything else (Redis's getPositiveLong...OrReply).
fn parse_non_negative(arg: &[u8], msg: &str) -> Result<i64, CmdError> {
    match parse_i64(arg) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(CmdError::err(msg)),
    }
}

/// A positive integer, or `ERR <msg>` for anything else.
fn parse_positive(arg: &[u8], msg: &str) -> Result<i64, CmdError> {
    match parse_i64(arg) {
        Some(n) if n >= 1 => Ok(n),
        _ => Err(CmdError::err(msg)),
    }
}

fn fill(ctx: &Ctx) -> i64 {
    ctx.config().list_max_listpack_size as i64
}

/// Records `n` changed elements of `key` and publishes `event` (class l), deleting the key when
/// its list became empty (a `del` event after the command's own, as Redis orders them).
fn after_write(ctx: &mut Ctx, key: &[u8], n: usize, emptied: bool, event: &str) {
    ctx.notify(ev::LIST, event, key);
    if emptied {
        let now = ctx.now_ms();
        ctx.db().remove(key, now);
        ctx.notify(ev::GENERIC, "del", key);
    }
    // At least one change even when nothing moved, as Redis counts it.
    ctx.modified(key, n.max(1) as u64);
}

/// The keyspace event a push (`lpush`/`rpush`) or pop (`lpop`/`rpop`) at `end` publishes.
fn push_event(end: End) -> &'static str {
    match end {
        End::Head => "lpush",
        End::Tail => "rpush",
    }
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Head => "lpop",
        End::Tail => "rpop",
    }
}

/// Appends `$len\r\n<data>\r\n`, with the common short lengths written without formatting.
#[inline]
fn put_bulk(out: &mut Vec<u8>, data: &[u8]) {
    let n = data.len();
    if n < 10 {
        out.extend_from_slice(&[b'$', b'0' + n as u8, b'\r', b'\n']);
    } else if n < 100 {
        out.extend_from_slice(&[b'$', b'0' + (n / 10) as u8, b'0' + (n % 10) as u8, b'\r', b'\n']);
    } else {
        crate::resp::writer::int_line(out, b'$', n as i64);
    }
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

#[inline]
fn put_elem(out: &mut Vec<u8>, e: Elem<'_>) {
    match e {
        Elem::Bytes(b) => put_bulk(out, b),
        Elem::Int(_) => e.with_bytes(|b| put_bulk(out, b)),
    }
}

fn array_header(out: &mut Vec<u8>, n: usize) {
    crate::resp::writer::int_line(out, b'*', n as i64);
}

/// `*n` followed by `n` elements from `start`, head to tail.
fn encode_range(out: &mut Vec<u8>, list: &List, start: usize, n: usize) {
    out.reserve(list.approx_bytes(n) + 6 * n + 16);
    array_header(out, n);
    list.for_each_range(start, n, |e| put_elem(out, e));
}

/// Encodes the `n` elements a counted pop from `end` takes, in pop order, and removes them.
fn pop_range(out: &mut Vec<u8>, list: &mut List, end: End, n: usize) {
    let n = n.min(list.len());
    match end {
        End::Head => {
            encode_range(out, list, 0, n);
            list.remove_front(n);
        }
        End::Tail => {
            out.reserve(list.approx_bytes(n) + 6 * n + 16);
            array_header(out, n);
            for e in list.iter_rev().take(n) {
                put_elem(out, e);
            }
            list.remove_back(n);
        }
    }
}

fn pop_one(list: &mut List, end: End) -> Option<Vec<u8>> {
    match end {
        End::Head => list.pop_front(),
        End::Tail => list.pop_back(),
    }
}

fn push_one(list: &mut List, end: End, data: &[u8]) {
    match end {
        End::Head => list.push_front(data),
        End::Tail => list.push_back(data),
    }
}

fn push_generic(ctx: &mut Ctx, args: &Args, end: End, only_existing: bool) -> CmdResult {
    let key = args.key(1);
    let fill = fill(ctx);
    let now = ctx.now_ms();
    let len = match ctx.write::<List>(key)? {
        Some(list) => {
            for elem in args.from(2) {
                push_one(list, end, elem);
            }
            list.len()
        }
        None if only_existing => return Ok(Reply::Int(0)),
        None => {
            let mut list = List::new(fill);
            for elem in args.from(2) {
                push_one(&mut list, end, elem);
            }
            let len = list.len();
            ctx.db().set(key, Value::List(Box::new(list)), now);
            ctx.notify(ev::NEW, "new", key);
            len
        }
    };
    after_write(ctx, key, args.len() - 2, false, push_event(end));
    ctx.signal_ready(key);
    Ok(Reply::Int(len as i64))
}

/// LPUSH key element [element ...]
///
/// Inserts each element at the head in argument order (`LPUSH l a b` leaves `b a`), creating the
/// list when absent. Replies with the new length.
pub fn lpush(ctx: &mut Ctx, args: &Args) -> CmdResult {
    push_generic(ctx, args, End::Head, false)
}

/// RPUSH key element [element ...]
///
/// Appends each element at the tail in argument order, creating the list when absent. Replies
/// with the new length.
pub fn rpush(ctx: &mut Ctx, args: &Args) -> CmdResult {
    push_generic(ctx, args, End::Tail, false)
}

/// LPUSHX key element [element ...]
///
/// LPUSH that only acts on an existing list; replies 0 when the key is absent.
pub fn lpushx(ctx: &mut Ctx, args: &Args) -> CmdResult {
    push_generic(ctx, args, End::Head, true)
}

/// RPUSHX key element [element ...]
///
/// RPUSH that only acts on an existing list; replies 0 when the key is absent.
pub fn rpushx(ctx: &mut Ctx, args: &Args) -> CmdResult {
    push_generic(ctx, args, End::Tail, true)
}

fn pop_generic(ctx: &mut Ctx, args: &Args, end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::WrongArity(ctx.spec().name.to_string()));
    }
    let key = args.key(1);
    let count = if args.len() == 3 {
        Some(parse_non_negative(args.get(2), "value is out of range, must be positive")?)
    } else {
        None
    };
    let Some(list) = ctx.write::<List>(key)? else {
        return Ok(if count.is_some() { Reply::NilArray } else { Reply::Nil });
    };
    let (reply, n) = match count {
        Some(0) => return Ok(Reply::Array(Vec::new())),
        Some(c) => {
            let n = (c as u64).min(list.len() as u64) as usize;
            let mut out = Vec::new();
            pop_range(&mut out, list, end, n);
            (Reply::Raw(out), n)
        }
        None => match pop_one(list, end) {
            Some(v) => (Reply::Bulk(v), 1),
            None => (Reply::Nil, 0),
        },
    };
    let emptied = list.is_empty();
    after_write(ctx, key, n, emptied, pop_event(end));
    Ok(reply)
}

/// LPOP key [count]
///
/// Removes and returns the head element, or with `count` an array of up to that many head
/// elements (a null array when the key is absent, an empty array for a count of 0).
pub fn lpop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    pop_generic(ctx, args, End::Head)
}

/// RPOP key [count]
///
/// Removes and returns the tail element, or with `count` an array of up to that many tail
/// elements, tail first.
pub fn rpop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    pop_generic(ctx, args, End::Tail)
}

/// LLEN key
///
/// The length of the list, 0 when the key is absent.
pub fn llen(ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.read::<List>(args.key(1))?.map_or(0, |l| l.len() as i64)))
}

/// LRANGE key start stop
///
/// The elements from `start` to `stop` inclusive; negative indices count from the tail. Out of
/// range bounds are clamped; an empty or absent list gives an empty array.
pub fn lrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let start = args.i64(2)?;
    let stop = args.i64(3)?;
    let Some(list) = ctx.read::<List>(args.key(1))? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let Some((s, e)) = crate::util::num::clamp_index_range(start, stop, list.len()) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let n = e - s + 1;
    if n < super::DEFER_MIN_ELEMENTS {
        let mut out = Vec::new();
        encode_range(&mut out, list, s, n);
        return Ok(Reply::Raw(out));
    }
    // A big range: a snapshot of its nodes, encoded off the executor (see `types::cow`).
    match ctx.db().get_ref_mut(args.key(1)) {
        Some(Value::List(l)) => Ok(Reply::Deferred(Deferred::new(ListRange(l.snapshot_range(s, n))))),
        _ => Err(CmdError::WrongType),
    }
}

/// LRANGE of a big range, encoded from its snapshot wherever the reply is written.
struct ListRange(ListSnapshot);

impl Encode for ListRange {
    fn encode(&self, _proto: u8, out: &mut Vec<u8>) {
        array_header(out, self.0.len());
        self.0.for_each(|e| put_elem(out, e));
    }

    fn size_hint(&self) -> usize {
        self.0.approx_bytes() + 6 * self.0.len() + 16
    }

    fn min_size(&self) -> usize {
        6 * self.0.len()
    }

    fn streams(&self) -> bool {
        true
    }

    fn encode_piece(&self, _proto: u8, cur: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let base = out.len();
        let at = if cur.started {
            (cur.a, cur.b, cur.c as usize)
        } else {
            cur.started = true;
            array_header(out, self.0.len());
            self.0.start()
        };
        let next = self.0.for_each_from(at, |e| {
            put_elem(out, e);
            out.len() - base < PIECE_BYTES
        });
        match next {
            Some((node, off, left)) => {
                (cur.a, cur.b, cur.c) = (node, off, left as u64);
                Piece::More
            }
            None => Piece::Done(None),
        }
    }
}

/// Element index `i` (negative from the tail) as a position, if in range.
fn resolve_index(i: i64, len: usize) -> Option<usize> {
    let i = if i < 0 { (len as i64).checked_add(i)? } else { i };
    (0..len as i64).contains(&i).then_some(i as usize)
}

/// LINDEX key index
///
/// The element at `index` (negative from the tail), or null when out of range or absent.
pub fn lindex(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let Some(list) = ctx.read::<List>(args.key(1))? else {
        return Ok(Reply::Nil);
    };
    let index = parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?;
    Ok(match resolve_index(index, list.len()).and_then(|i| list.get(i)) {
        Some(e) => Reply::Bulk(e.to_vec()),
        None => Reply::Nil,
    })
}

/// LSET key index element
///
/// Replaces the element at `index`. Errors on an absent key or an index out of range.
pub fn lset(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let Some(list) = ctx.write::<List>(key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let index = parse_i64(args.get(2)).ok_or(CmdError::NotInteger)?;
    let Some(i) = resolve_index(index, list.len()) else {
        return Err(CmdError::err("index out of range"));
    };
    list.set(i, args.get(3));
    after_write(ctx, key, 1, false, "lset");
    Ok(Reply::Ok)
}

/// LINSERT key BEFORE|AFTER pivot element
///
/// Inserts `element` next to the first occurrence of `pivot`. Replies with the new length, -1
/// when the pivot is not found, 0 when the key is absent.
pub fn linsert(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let after = if args.is(2, "after") {
        true
    } else if args.is(2, "before") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    let key = args.key(1);
    let Some(list) = ctx.write::<List>(key)? else {
        return Ok(Reply::Int(0));
    };
    let Some(pos) = list.position(args.get(3)) else {
        return Ok(Reply::Int(-1));
    };
    list.insert_beside(pos, after, args.get(4));
    let len = list.len();
    after_write(ctx, key, 1, false, "linsert");
    Ok(Reply::Int(len as i64))
}

/// LREM key count element
///
/// Removes occurrences of `element`: the first `count` from the head when positive, the last
/// `-count` from the tail when negative, all when 0. Replies with the number removed.
pub fn lrem(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let count = args.i64(2)?;
    let key = args.key(1);
    let Some(list) = ctx.write::<List>(key)? else {
        return Ok(Reply::Int(0));
    };
    let removed = list.remove_matching(args.get(3), count);
    let emptied = list.is_empty();
    if removed > 0 {
        after_write(ctx, key, removed, emptied, "lrem");
    }
    Ok(Reply::Int(removed as i64))
}

/// LTRIM key start stop
///
/// Keeps only the elements from `start` to `stop` inclusive (LRANGE's index rules); an empty
/// range deletes the key.
pub fn ltrim(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let start = args.i64(2)?;
    let stop = args.i64(3)?;
    let key = args.key(1);
    let Some(list) = ctx.write::<List>(key)? else {
        return Ok(Reply::Ok);
    };
    let len = list.len();
    let (front, back) = match crate::util::num::clamp_index_range(start, stop, len) {
        Some((s, e)) => (s, len - 1 - e),
        None => (len, 0),
    };
    list.remove_back(back);
    list.remove_front(front);
    let emptied = list.is_empty();
    // Redis counts the trimmed elements as dirty and signals the key even when nothing went.
    ctx.modified(key, (front + back) as u64);
    ctx.notify(ev::LIST, "ltrim", key);
    if emptied {
        let now = ctx.now_ms();
        ctx.db().remove(key, now);
        ctx.notify(ev::GENERIC, "del", key);
    }
    Ok(Reply::Ok)
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
///
/// The index of matches of `element`: RANK picks the nth match (negative scans from the tail),
/// COUNT returns up to that many matches as an array (0 = all), MAXLEN bounds the elements
/// compared. Null (or an empty array with COUNT) when nothing matches.
pub fn lpos(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut rank: i64 = 1;
    let mut count: i64 = -1;
    let mut maxlen: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        if args.is(j, "rank") && more {
            rank = args.i64(j + 1)?;
            if rank == 0 {
                return Err(CmdError::err(
                    "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use \
                     negative to start from the end of the list",
                ));
            }
        } else if args.is(j, "count") && more {
            count = parse_non_negative(args.get(j + 1), "COUNT can't be negative")?;
        } else if args.is(j, "maxlen") && more {
            maxlen = parse_non_negative(args.get(j + 1), "MAXLEN can't be negative")?;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 2;
    }
    let Some(list) = ctx.read::<List>(args.key(1))? else {
        return Ok(if count != -1 { Reply::Array(Vec::new()) } else { Reply::Nil });
    };
    let elem = args.get(2);
    let len = list.len() as i64;
    let from_tail = rank < 0;
    // Redis negates the rank in C long arithmetic: i64::MIN stays negative, so every match then
    // qualifies; wrapping keeps that behaviour.
    let rank = if from_tail { rank.wrapping_neg() } else { rank };
    let iter: Box<dyn Iterator<Item = Elem<'_>>> =
        if from_tail { Box::new(list.iter_rev()) } else { Box::new(list.iter()) };
    let mut found = Vec::new();
    let mut matches: i64 = 0;
    for (index, e) in iter.enumerate() {
        let index = index as i64;
        if maxlen != 0 && index >= maxlen {
            break;
        }
        if !e.eq_bytes(elem) {
            continue;
        }
        matches += 1;
        if matches >= rank {
            let at = if from_tail { len - index - 1 } else { index };
            if count == -1 {
                return Ok(Reply::Int(at));
            }
            found.push(Reply::Int(at));
            if count != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= count {
                break;
            }
        }
    }
    Ok(if count == -1 { Reply::Nil } else { Reply::Array(found) })
}

/// Moves one element from `src`'s `from` end to `dst`'s `to` end (LMOVE's core, after argument
/// parsing). Replies null when `src` is absent.
fn move_generic(ctx: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End) -> CmdResult {
    let fill = fill(ctx);
    let now = ctx.now_ms();
    if ctx.write::<List>(src)?.is_none() {
        return Ok(Reply::Nil);
    }
    if src == dst {
        let Some(list) = ctx.write::<List>(src)? else { return Ok(Reply::Nil) };
        let Some(v) = pop_one(list, from) else { return Ok(Reply::Nil) };
        push_one(list, to, &v);
        ctx.notify(ev::LIST, push_event(to), dst);
        ctx.notify(ev::LIST, pop_event(from), src);
        ctx.modified(src, 1);
        ctx.signal_ready(dst);
        return Ok(Reply::Bulk(v));
    }
    // The destination's type is checked before anything is popped.
    let dst_exists = ctx.write::<List>(dst)?.is_some();
    // Both keys were looked up (and stamped) once each, as Redis does; these probes do not stamp.
    let Some(list) = ctx.again::<List>(src)? else { return Ok(Reply::Nil) };
    let Some(v) = pop_one(list, from) else { return Ok(Reply::Nil) };
    let emptied = list.is_empty();
    if dst_exists {
        if let Some(d) = ctx.again::<List>(dst)? {
            push_one(d, to, &v);
        }
    } else {
        let mut d = List::new(fill);
        push_one(&mut d, to, &v);
        ctx.db().set(dst, Value::List(Box::new(d)), now);
        ctx.notify(ev::NEW, "new", dst);
    }
    ctx.notify(ev::LIST, push_event(to), dst);
    // LMOVE counts one change for its two keys (the source's, below).
    ctx.modified(dst, 0);
    ctx.signal_ready(dst);
    after_write(ctx, src, 1, emptied, pop_event(from));
    Ok(Reply::Bulk(v))
}

/// LMOVE source destination LEFT|RIGHT LEFT|RIGHT
///
/// Pops an element from one end of `source` and pushes it onto one end of `destination`
/// (created when absent; the same key rotates). Replies with the element, null when `source` is
/// absent.
pub fn lmove(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let from = parse_end(args.get(3))?;
    let to = parse_end(args.get(4))?;
    move_generic(ctx, args.key(1), args.key(2), from, to)
}

/// RPOPLPUSH source destination
///
/// LMOVE source destination RIGHT LEFT.
pub fn rpoplpush(ctx: &mut Ctx, args: &Args) -> CmdResult {
    move_generic(ctx, args.key(1), args.key(2), End::Tail, End::Head)
}

/// Parsed LMPOP / BLMPOP arguments after numkeys.
struct Mpop {
    keys_at: usize,
    numkeys: usize,
    end: End,
    count: i64,
}

/// Parses `numkeys key [key ...] LEFT|RIGHT [COUNT count]` from argument `at`, with Redis's
/// errors and their order.
fn parse_mpop(args: &Args, at: usize) -> Result<Mpop, CmdError> {
    let numkeys = parse_positive(args.get(at), "numkeys should be greater than 0")?;
    let where_at = (at as u64).checked_add(numkeys as u64).and_then(|x| x.checked_add(1));
    let where_at = match where_at {
        Some(w) if w < args.len() as u64 => w as usize,
        _ => return Err(CmdError::Syntax),
    };
    let end = parse_end(args.get(where_at))?;
    let mut count = -1;
    let mut j = where_at + 1;
    while j < args.len() {
        if count == -1 && args.is(j, "count") && j + 1 < args.len() {
            count = parse_positive(args.get(j + 1), "count should be greater than 0")?;
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(Mpop { keys_at: at + 1, numkeys: numkeys as usize, end, count: if count == -1 { 1 } else { count } })
}

/// Pops up to `count` elements from the first non-empty list among the keys; replies
/// `[key, [elements]]`, or None when every key is absent.
fn mpop_serve(ctx: &mut Ctx, args: &Args, m: &Mpop) -> Result<Option<Reply>, CmdError> {
    for k in m.keys_at..m.keys_at + m.numkeys {
        let key = args.key(k);
        let Some(list) = ctx.write::<List>(key)? else { continue };
        let n = (m.count as u64).min(list.len() as u64) as usize;
        let mut out = Vec::new();
        array_header(&mut out, 2);
        put_bulk(&mut out, key);
        pop_range(&mut out, list, m.end, n);
        let emptied = list.is_empty();
        after_write(ctx, key, n, emptied, pop_event(m.end));
        // LMPOP and BLMPOP propagate as LPOP/RPOP key count.
        if ctx.propagating() {
            let count = n.to_string();
            ctx.propagate_as_parts(&[end_pop_verb(m.end), key, count.as_bytes()]);
        }
        return Ok(Some(Reply::Raw(out)));
    }
    Ok(None)
}

/// LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]
///
/// Pops up to `count` (default 1) elements from one end of the first non-empty list among the
/// keys. Replies `[key, [elements]]`, or a null array when all are empty.
pub fn lmpop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    Ok(mpop_serve(ctx, args, &m)?.unwrap_or(Reply::NilArray))
}

fn bpop_generic(ctx: &mut Ctx, args: &Args, end: End) -> CmdResult {
    let deadline = ctx.parse_timeout(args.get(args.len() - 1))?;
    let last = args.len() - 1;
    for k in 1..last {
        let key = args.key(k);
        let Some(list) = ctx.write::<List>(key)? else { continue };
        let Some(v) = pop_one(list, end) else { continue };
        let emptied = list.is_empty();
        let mut out = Vec::with_capacity(v.len() + key.len() + 32);
        array_header(&mut out, 2);
        put_bulk(&mut out, key);
        put_bulk(&mut out, &v);
        after_write(ctx, key, 1, emptied, pop_event(end));
        ctx.propagate_as_parts(&[end_pop_verb(end), key]);
        return Ok(Reply::Raw(out));
    }
    let keys = (1..last).map(|k| args.key(k).to_vec()).collect();
    ctx.block(keys, deadline, Reply::NilArray, "list")
}

fn end_pop_verb(end: End) -> &'static [u8] {
    match end {
        End::Head => b"LPOP",
        End::Tail => b"RPOP",
    }
}

/// BLPOP key [key ...] timeout
///
/// LPOP on the first non-empty list among the keys, replying `[key, element]`; when all are
/// empty, waits up to `timeout` seconds (0 = forever) and replies a null array on timeout.
pub fn blpop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    bpop_generic(ctx, args, End::Head)
}

/// BRPOP key [key ...] timeout
///
/// BLPOP popping from the tail.
pub fn brpop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    bpop_generic(ctx, args, End::Tail)
}

fn bmove_generic(ctx: &mut Ctx, args: &Args, from: End, to: End, timeout_at: usize) -> CmdResult {
    let deadline = ctx.parse_timeout(args.get(timeout_at))?;
    let src = args.key(1);
    // BLMOVE looks the source up here and again in move_generic (two stamps); a woken re-run
    // stands for Redis serving the blocked client, which looks it up once: no stamp here.
    let found = if ctx.woken() {
        let now = ctx.now_ms();
        match ctx.db().peek(src, now) {
            None => false,
            Some(Value::List(_)) => true,
            Some(_) => return Err(CmdError::WrongType),
        }
    } else {
        ctx.write::<List>(src)?.is_some()
    };
    if found {
        let reply = move_generic(ctx, src, args.key(2), from, to)?;
        // Propagated as the non-blocking form: RPOPLPUSH, or LMOVE with the client's end words.
        if timeout_at == 3 {
            ctx.propagate_as_parts(&[b"RPOPLPUSH", src, args.key(2)]);
        } else {
            ctx.propagate_as_parts(&[b"LMOVE", src, args.key(2), args.get(3), args.get(4)]);
        }
        return Ok(reply);
    }
    // Redis answers a null bulk inside MULTI but a null array on timeout.
    if !ctx.may_block() {
        return Ok(Reply::Nil);
    }
    ctx.block(vec![src.to_vec()], deadline, Reply::NilArray, "list")
}

/// BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout
///
/// LMOVE that waits up to `timeout` seconds for `source` to exist; a null array on timeout (as
/// Redis 7.0 sends for every list blocking command), a null bulk inside MULTI.
pub fn blmove(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let from = parse_end(args.get(3))?;
    let to = parse_end(args.get(4))?;
    bmove_generic(ctx, args, from, to, 5)
}

/// BRPOPLPUSH source destination timeout
///
/// BLMOVE source destination RIGHT LEFT timeout.
pub fn brpoplpush(ctx: &mut Ctx, args: &Args) -> CmdResult {
    bmove_generic(ctx, args, End::Tail, End::Head, 3)
}

/// BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]
///
/// LMPOP that waits up to `timeout` seconds when every list is empty; null array on timeout.
pub fn blmpop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let m = parse_mpop(args, 2)?;
    let deadline = ctx.parse_timeout(args.get(1))?;
    if let Some(reply) = mpop_serve(ctx, args, &m)? {
        return Ok(reply);
    }
    let keys = (m.keys_at..m.keys_at + m.numkeys).map(|k| args.key(k).to_vec()).collect();
    ctx.block(keys, deadline, Reply::NilArray, "list")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::commands::harness::Harness;

    fn harness(fill: i32) -> Harness {
        Harness::with_config(crate::config::Config { list_max_listpack_size: fill, ..Default::default() })
    }

    #[test]
    fn pushes_pops_and_ranges_across_nodes() {
        let mut h = harness(2);
        assert_eq!(h.run(&["rpush", "l", "a", "b", "c", "d", "e"]), b":5\r\n");
        assert_eq!(h.run(&["lpush", "l", "z"]), b":6\r\n");
        assert_eq!(h.run(&["lrange", "l", "1", "-2"]), b"*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n");
        assert_eq!(h.run(&["rpop", "l", "2"]), b"*2\r\n$1\r\ne\r\n$1\r\nd\r\n");
        assert_eq!(h.run(&["lpop", "l", "0"]), b"*0\r\n");
        assert_eq!(h.run(&["linsert", "l", "after", "b", "x"]), b":5\r\n");
        assert_eq!(h.run(&["lindex", "l", "-3"]), b"$1\r\nb\r\n");
        assert_eq!(
            h.run(&["lmpop", "2", "nokey", "l", "left", "count", "9"]),
            b"*2\r\n$1\r\nl\r\n*5\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nx\r\n$1\r\nc\r\n"
        );
        assert_eq!(h.run(&["exists", "l"]), b":0\r\n");
        assert_eq!(h.run(&["lpop", "l", "3"]), b"*-1\r\n");
        assert_eq!(h.run(&["lset", "l", "0", "x"]), b"-ERR no such key\r\n");
    }

    #[test]
    fn blocking_serves_or_requests_a_wait() {
        let mut h = harness(-2);
        assert_eq!(h.run(&["blpop", "a", "b", "0"]), b"");
        let req = h.client.block_request.take().expect("block requested");
        assert_eq!(req.keys, vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(req.timeout_reply, Reply::NilArray);
        h.run(&["rpush", "b", "1", "2"]);
        assert_eq!(h.run(&["brpop", "a", "b", "0"]), b"*2\r\n$1\r\nb\r\n$1\r\n2\r\n");
        assert_eq!(h.run(&["blmove", "b", "c", "left", "right", "1"]), b"$1\r\n1\r\n");
        assert_eq!(h.run(&["blmove", "b", "c", "left", "right", "1"]), b"");
        assert_eq!(h.client.block_request.take().map(|r| r.timeout_reply), Some(Reply::NilArray));
        h.client.in_exec = true;
        assert_eq!(h.run(&["blmove", "b", "c", "left", "right", "0"]), b"$-1\r\n");
        assert_eq!(h.run(&["blmpop", "0", "1", "b", "left"]), b"*-1\r\n");
        assert!(h.client.block_request.is_none());
    }

    #[test]
    fn range_normalization() {
        assert_eq!(crate::util::num::clamp_index_range(0, -1, 3), Some((0, 2)));
        assert_eq!(crate::util::num::clamp_index_range(-100, 100, 3), Some((0, 2)));
        assert_eq!(crate::util::num::clamp_index_range(1, 0, 3), None);
        assert_eq!(crate::util::num::clamp_index_range(5, 10, 3), None);
        assert_eq!(crate::util::num::clamp_index_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(crate::util::num::clamp_index_range(0, 0, 0), None);
    }

    #[test]
    fn bulk_encoding() {
        let mut out = Vec::new();
        put_bulk(&mut out, b"");
        put_bulk(&mut out, b"0123456789");
        put_bulk(&mut out, &[b'x'; 100]);
        let mut want = b"$0\r\n\r\n$10\r\n0123456789\r\n$100\r\n".to_vec();
        want.extend_from_slice(&[b'x'; 100]);
        want.extend_from_slice(b"\r\n");
        assert_eq!(out, want);
    }

    #[test]
    fn index_resolution() {
        assert_eq!(resolve_index(-1, 3), Some(2));
        assert_eq!(resolve_index(-4, 3), None);
        assert_eq!(resolve_index(3, 3), None);
        assert_eq!(resolve_index(i64::MIN, 3), None);
    }
}
