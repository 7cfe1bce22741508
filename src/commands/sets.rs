//! The set family: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SMOVE SINTER
//! SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE SSCAN, as redis-server 7.0 answers
//! them (error texts and precedence checked byte for byte against 7.0.15).
//!
//! Replies listing a whole set (SMEMBERS, SINTER, SUNION, SDIFF, SPOP with a count) are RESP3
//! sets (`~`) and are encoded straight into one byte buffer (`Reply::Raw`) with no allocation per
//! member: a 2.6M-member SMEMBERS is one sequential walk of the set's arena. SMEMBERS of a set
//! of `DEFER_MIN_ELEMENTS` or more takes a snapshot of the arena instead (microseconds) and the
//! walk runs off the executor (`Reply::Deferred`), so other clients do not wait behind it. So do
//! SUNION and SDIFF whose inputs (the union's, the difference's first set) have that many members
//! and SINTER whose smallest set has: the sets are snapshotted (an intset copied) and the reply
//! is streamed off the executor without building the result (`SetAlgebra`: a counting pass,
//! then pieces; lookups through an index over each snapshot looked up in). 1M-member sets
//! with a writer running: peak RSS above steady 0.43-0.44 of the two sets' size, where
//! rebuilding the looked-up sets and the result took 1.3-1.5 (Redis 0.31-0.98). SRANDMEMBER with a
//! count and SMISMEMBER are arrays in both protocols, as in 7.0. Result sets of the *STORE
//! commands (and of SUNION/SDIFF, which Redis also builds as a set before replying) start as
//! intsets and convert exactly where Redis's would, so OBJECT ENCODING and the ascending order of
//! intset replies match. The data structure lives in `types::set`; this module owns no state.

use std::collections::HashSet;

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::pubsub::ev;
use crate::resp::reply::{Cursor, Deferred, Encode, Piece, PIECE_BYTES};
use crate::resp::writer::{bulk, int_line};
use crate::resp::Reply;
use crate::types::set::{Elem, Set, SetSnapshot, SnapshotIndex};
use crate::types::Value;
use crate::util::num::parse_i64;

pub static COMMANDS: &[CommandSpec] = &[
    spec("sadd", -3, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::SET, sadd),
    spec("srem", -3, WRITE | FAST, keys(1, 1, 1), acl::SET, srem),
    spec("smembers", 2, READONLY, keys(1, 1, 1), acl::SET, smembers),
    spec("sismember", 3, READONLY | FAST, keys(1, 1, 1), acl::SET, sismember),
    spec("smismember", -3, READONLY | FAST, keys(1, 1, 1), acl::SET, smismember),
    spec("scard", 2, READONLY | FAST, keys(1, 1, 1), acl::SET, scard),
    spec("spop", -2, WRITE | FAST, keys(1, 1, 1), acl::SET, spop),
    spec("srandmember", -2, READONLY, keys(1, 1, 1), acl::SET, srandmember),
    spec("smove", 4, WRITE | FAST, keys(1, 2, 1), acl::SET, smove),
    spec("sinter", -2, READONLY, keys(1, -1, 1), acl::SET, sinter),
    spec("sintercard", -3, READONLY | MOVABLEKEYS, NO_KEYS, acl::SET, sintercard),
    spec("sinterstore", -3, WRITE | DENYOOM, keys(1, -1, 1), acl::SET, sinterstore),
    spec("sunion", -2, READONLY, keys(1, -1, 1), acl::SET, sunion),
    spec("sunionstore", -3, WRITE | DENYOOM, keys(1, -1, 1), acl::SET, sunionstore),
    spec("sdiff", -2, READONLY, keys(1, -1, 1), acl::SET, sdiff),
    spec("sdiffstore", -3, WRITE | DENYOOM, keys(1, -1, 1), acl::SET, sdiffstore),
    spec("sscan", -3, READONLY, keys(1, 1, 1), acl::SET, sscan),
];

fn max_intset(ctx: &Ctx) -> usize {
    ctx.config().set_max_intset_entries
}

/// Appends a member as a bulk string.
fn push_elem(out: &mut Vec<u8>, e: Elem) {
    e.with_bytes(|b| bulk(out, b));
}

/// The header of a set reply of `n` members: `~n` in RESP3, `*n` in RESP2.
fn set_header(out: &mut Vec<u8>, proto: u8, n: usize) {
    int_line(out, if proto >= 3 { b'~' } else { b'*' }, n as i64);
}

/// A whole set as a set reply, encoded in one buffer.
fn set_reply(proto: u8, s: &Set) -> Reply {
    let mut out = Vec::with_capacity(16 + s.data_bytes_hint() + s.len() * 8);
    set_header(&mut out, proto, s.len());
    s.for_each(|e| push_elem(&mut out, e));
    Reply::Raw(out)
}

fn empty_set(proto: u8) -> Reply {
    Reply::Raw(if proto >= 3 { b"~0\r\n".to_vec() } else { b"*0\r\n".to_vec() })
}

/// SADD key member [member ...]
///
/// Adds the members, creating the set when absent (an intset while every member is an integer
/// and the count stays within set-max-intset-entries). Replies with the number of members that
/// were new.
pub fn sadd(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let limit = max_intset(ctx);
    let key = args.key(1);
    let set = ctx.write_or_create::<Set>(key)?;
    let added = args.from(2).filter(|m| set.insert(m, limit)).count();
    if added > 0 {
        ctx.notify(ev::SET, "sadd", key);
        ctx.modified(key, added as u64);
    }
    Ok(Reply::Int(added as i64))
}

/// SREM key member [member ...]
///
/// Removes the members; a set left empty is deleted (and the remaining arguments are not looked
/// at). Replies with the number removed.
pub fn srem(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let (removed, empty) = match ctx.write::<Set>(key)? {
        None => return Ok(Reply::Int(0)),
        Some(v) => {
            let set = v;
            let mut removed = 0;
            for m in args.from(2) {
                if set.remove(m) {
                    removed += 1;
                    if set.is_empty() {
                        break;
                    }
                }
            }
            (removed, set.is_empty())
        }
    };
    if empty {
        let now = ctx.now_ms();
        ctx.db().remove(key, now);
    }
    if removed > 0 {
        ctx.notify(ev::SET, "srem", key);
        if empty {
            ctx.notify(ev::GENERIC, "del", key);
        }
        ctx.modified(key, removed as u64);
    }
    Ok(Reply::Int(removed))
}

/// SMEMBERS key
///
/// Every member, as a set reply (empty when the key is absent). Intsets list in ascending order.
pub fn smembers(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let proto = ctx.proto();
    match ctx.read::<Set>(args.key(1))? {
        None => return Ok(empty_set(proto)),
        Some(s) if s.len() < super::DEFER_MIN_ELEMENTS => return Ok(set_reply(proto, s)),
        Some(_) => {}
    }
    // A big set: its snapshot, encoded off the executor (see `types::cow`).
    match ctx.db().get_ref_mut(args.key(1)) {
        Some(Value::Set(s)) => match s.snapshot() {
            Some(snap) => Ok(Reply::Deferred(Deferred::new(SetMembers(snap)))),
            None => Ok(set_reply(proto, s)),
        },
        _ => Ok(empty_set(proto)),
    }
}

/// SMEMBERS of a big set, encoded from its snapshot wherever the reply is written.
struct SetMembers(SetSnapshot);

impl Encode for SetMembers {
    fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        set_header(out, proto, self.0.len());
        self.0.for_each(|m| bulk(out, m));
    }

    fn size_hint(&self) -> usize {
        16 + self.0.data_bytes_hint() + self.0.len() * 8
    }

    fn min_size(&self) -> usize {
        // Each member is a bulk string: `$len\r\n` and `\r\n` around its bytes. The arena's
        // bytes count a length header per member, never longer than the length's digits, so
        // five bytes a member more is a least size (six overstated it by a byte a member).
        self.0.data_bytes_hint() + self.0.len() * 5
    }

    fn streams(&self) -> bool {
        true
    }

    fn encode_piece(&self, proto: u8, cur: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let base = out.len();
        if !cur.started {
            cur.started = true;
            set_header(out, proto, self.0.len());
        }
        let next = self.0.for_each_from((cur.a, cur.b), |m| {
            bulk(out, m);
            out.len() - base < PIECE_BYTES
        });
        match next {
            Some((chunk, off)) => {
                (cur.a, cur.b) = (chunk, off);
                Piece::More
            }
            None => Piece::Done(None),
        }
    }
}

/// SISMEMBER key member
///
/// 1 when `member` is in the set, else 0 (also for an absent key).
pub fn sismember(ctx: &mut Ctx, args: &Args) -> CmdResult {
    match ctx.read::<Set>(args.key(1))? {
        None => Ok(Reply::Int(0)),
        Some(v) => Ok(Reply::Int(v.contains(args.get(2)) as i64)),
    }
}

/// SMISMEMBER key member [member ...]
///
/// An array of 1/0, one per member, telling whether each is in the set.
pub fn smismember(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let set = ctx.read::<Set>(args.key(1))?;
    let mut out = Vec::new();
    int_line(&mut out, b'*', (args.len() - 2) as i64);
    for m in args.from(2) {
        let hit = set.is_some_and(|s| s.contains(m));
        out.extend_from_slice(if hit { b":1\r\n" } else { b":0\r\n" });
    }
    Ok(Reply::Raw(out))
}

/// SCARD key
///
/// The number of members, 0 for an absent key.
pub fn scard(ctx: &mut Ctx, args: &Args) -> CmdResult {
    match ctx.read::<Set>(args.key(1))? {
        None => Ok(Reply::Int(0)),
        Some(v) => Ok(Reply::Int(v.len() as i64)),
    }
}

/// SPOP key [count]
///
/// Removes and returns a random member (nil when absent); with a count, up to that many distinct
/// members as a set reply. A set left empty is deleted.
pub fn spop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let proto = ctx.proto();
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    if args.len() == 2 {
        let (popped, empty) = match ctx.write::<Set>(key)? {
            None => return Ok(Reply::Nil),
            Some(v) => {
                let set = v;
                (set.pop_random(), set.is_empty())
            }
        };
        ctx.notify(ev::SET, "spop", key);
        if empty {
            let now = ctx.now_ms();
            ctx.db().remove(key, now);
            ctx.notify(ev::GENERIC, "del", key);
        }
        ctx.modified(key, 1);
        if let Some(member) = &popped {
            ctx.propagate_as_parts(&[b"SREM", key, member]);
        }
        return Ok(popped.map_or(Reply::Nil, Reply::Bulk));
    }
    let count = parse_i64(args.get(2))
        .filter(|&c| c >= 0)
        .ok_or_else(|| CmdError::err("value is out of range, must be positive"))? as u64;
    let reply = match ctx.write::<Set>(key)? {
        None => return Ok(empty_set(proto)),
        Some(v) => {
            let set = v;
            if count == 0 {
                return Ok(empty_set(proto));
            }
            if count >= set.len() as u64 {
                let r = set_reply(proto, set);
                let now = ctx.now_ms();
                ctx.db().remove(key, now);
                ctx.notify(ev::SET, "spop", key);
                ctx.notify(ev::GENERIC, "del", key);
                ctx.modified(key, 1);
                let verb: &[u8] = if super::keys::lazy_server_del(ctx) { b"UNLINK" } else { b"DEL" };
                ctx.propagate_as_parts(&[verb, key]);
                return Ok(r);
            }
            let mut out = Vec::new();
            let mut popped = Vec::new();
            set_header(&mut out, proto, count as usize);
            for _ in 0..count {
                if let Some(m) = set.pop_random() {
                    bulk(&mut out, &m);
                    popped.push(m);
                }
            }
            // One SREM per member, as Redis 7.0 propagates a counted SPOP.
            for m in &popped {
                ctx.also_propagate(&[b"SREM", key, m]);
            }
            ctx.no_propagate();
            Reply::Raw(out)
        }
    };
    ctx.notify(ev::SET, "spop", key);
    ctx.modified(key, 1);
    Ok(reply)
}

/// SRANDMEMBER key [count]
///
/// A random member (nil when absent). With a positive count, up to that many distinct members;
/// with a negative one, exactly |count| members that may repeat. Arrays in both protocols.
pub fn srandmember(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    if args.len() == 2 {
        return match ctx.read::<Set>(args.key(1))? {
            None => Ok(Reply::Nil),
            Some(v) => Ok(v.random().map_or(Reply::Nil, |e| Reply::Bulk(e.to_vec()))),
        };
    }
    let count = args.i64(2)?;
    if count == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let cap = ctx.reply_cap();
    let set = match ctx.read::<Set>(args.key(1))? {
        None => return Ok(Reply::Raw(b"*0\r\n".to_vec())),
        Some(v) => v,
    };
    let mut out = Vec::new();
    if count == 0 || set.is_empty() {
        return Ok(Reply::Raw(b"*0\r\n".to_vec()));
    }
    let len = set.len();
    if count < 0 {
        let n = count.unsigned_abs();
        int_line(&mut out, b'*', n as i64);
        for _ in 0..n {
            if let Some(e) = set.random() {
                push_elem(&mut out, e);
            }
            // Past the client's hard output limit the reply only closes it: stop building.
            if cap.is_some_and(|cap| out.len() >= cap) {
                break;
            }
        }
        return Ok(Reply::Raw(out));
    }
    let n = count as u64;
    if n >= len as u64 {
        int_line(&mut out, b'*', len as i64);
        set.for_each(|e| push_elem(&mut out, e));
        return Ok(Reply::Raw(out));
    }
    let n = n as usize;
    int_line(&mut out, b'*', n as i64);
    if n * 3 > len {
        // Many of the members: shuffle the front of all of them.
        let mut all: Vec<Elem> = Vec::with_capacity(len);
        set.for_each(|e| all.push(e));
        for i in 0..n {
            let j = fastrand::usize(i..all.len());
            all.swap(i, j);
            push_elem(&mut out, all[i]);
        }
    } else {
        let mut seen = HashSet::with_capacity(n);
        while seen.len() < n {
            let pos = set.random_pos();
            if seen.insert(pos) {
                push_elem(&mut out, set.elem_at(pos));
            }
        }
    }
    Ok(Reply::Raw(out))
}

/// SMOVE source destination member
///
/// Moves `member` from `source` to `destination` (created when absent); 1 when it was moved, 0
/// when `source` lacks it. A source left empty is deleted.
pub fn smove(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (src, dst, m) = (args.key(1), args.key(2), args.get(3));
    let limit = max_intset(ctx);
    let src_is_set = ctx.lookup_write(src).map(|v| matches!(v, Value::Set(_)));
    let dst_is_set = ctx.lookup_write(dst).map(|v| matches!(v, Value::Set(_)));
    match (src_is_set, dst_is_set) {
        (None, _) => return Ok(Reply::Int(0)),
        (Some(false), _) | (_, Some(false)) => return Err(CmdError::WrongType),
        _ => {}
    }
    // Both keys were looked up (and stamped) once each above, as Redis does; no more stamps.
    let Some(set) = ctx.again::<Set>(src)? else {
        return Ok(Reply::Int(0));
    };
    if src == dst {
        return Ok(Reply::Int(set.contains(m) as i64));
    }
    if !set.remove(m) {
        return Ok(Reply::Int(0));
    }
    let empty = set.is_empty();
    let now = ctx.now_ms();
    ctx.notify(ev::SET, "srem", src);
    if empty {
        ctx.db().remove(src, now);
        ctx.notify(ev::GENERIC, "del", src);
    }
    let added = ctx.again_or_create::<Set>(dst)?.insert(m, limit);
    ctx.modified(src, 1);
    // A member already in the destination changes only the source (no `sadd`, one change).
    if added {
        ctx.modified(dst, 1);
        ctx.notify(ev::SET, "sadd", dst);
    }
    Ok(Reply::Int(1))
}

/// Looks up every key as a set, in order (a wrong type anywhere is an error, missing keys are
/// `None`). The *STORE forms count these read lookups too (hits, misses, `keymiss`), as 7.0 does.
fn lookup_sets(ctx: &mut Ctx, keys: &[&[u8]]) -> Result<Vec<bool>, CmdError> {
    let mut present = Vec::with_capacity(keys.len());
    for k in keys {
        present.push(ctx.read::<Set>(k)?.is_some());
    }
    Ok(present)
}

/// Shared references to the sets under `keys` (already looked up, so expiry was applied).
fn borrow_sets<'a>(ctx: &'a Ctx, keys: &[&[u8]]) -> Vec<Option<&'a Set>> {
    let db = ctx.db_ref();
    keys.iter()
        .map(|k| match db.get_ref(k) {
            Some(Value::Set(s)) => Some(&**s),
            _ => None,
        })
        .collect()
}

/// Visits the members of the intersection, smallest set first (the order Redis replies in),
/// stopping after `limit` members when `limit > 0`.
fn intersect(sets: &[Option<&Set>], limit: usize, mut f: impl FnMut(Elem)) -> usize {
    let mut sets: Vec<&Set> = match sets.iter().copied().collect::<Option<Vec<_>>>() {
        Some(s) => s,
        None => return 0,
    };
    sets.sort_by_key(|s| s.len());
    let (first, rest) = match sets.split_first() {
        Some(x) => x,
        None => return 0,
    };
    let mut n = 0;
    let mut done = false;
    first.for_each(|e| {
        if done {
            return;
        }
        if rest.iter().all(|s| std::ptr::eq(*s, *first) || s.contains_elem(e)) {
            n += 1;
            f(e);
            if limit > 0 && n >= limit {
                done = true;
            }
        }
    });
    n
}

fn key_list(args: &Args, from: usize, to: usize) -> Vec<&[u8]> {
    (from..to).map(|i| args.key(i)).collect()
}

/// SINTER key [key ...]
///
/// The members common to every set, as a set reply; empty when any key is absent.
pub fn sinter(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let keys = key_list(args, 1, args.len());
    let present = lookup_sets(ctx, &keys)?;
    let proto = ctx.proto();
    if present.contains(&false) {
        return Ok(empty_set(proto));
    }
    let smallest = borrow_sets(ctx, &keys).iter().flatten().map(|s| s.len()).min().unwrap_or(0);
    if smallest >= super::DEFER_MIN_ELEMENTS {
        // Every member of the smallest set is looked up in the others: worked out off the
        // executor, over snapshots.
        let (sets, same) = snapshot_sets(ctx, &keys);
        let op = AlgebraOp::Inter;
        return Ok(Reply::Deferred(Deferred::new(SetAlgebra {
            sets,
            same,
            op,
            max_intset: 0,
            plan: Default::default(),
        })));
    }
    let sets = borrow_sets(ctx, &keys);
    let mut body = Vec::new();
    let n = intersect(&sets, 0, |e| push_elem(&mut body, e));
    let mut out = Vec::with_capacity(body.len() + 16);
    set_header(&mut out, proto, n);
    out.extend_from_slice(&body);
    Ok(Reply::Raw(out))
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]
///
/// The size of the intersection, counting stops at LIMIT when it is non-zero.
pub fn sintercard(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let numkeys = parse_i64(args.get(1))
        .filter(|&n| n > 0)
        .ok_or_else(|| CmdError::err("numkeys should be greater than 0"))? as u64;
    if numkeys > (args.len() - 2) as u64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0usize;
    let mut i = end;
    while i < args.len() {
        if args.is(i, "limit") && i + 1 < args.len() {
            limit = parse_i64(args.get(i + 1))
                .filter(|&l| l >= 0)
                .ok_or_else(|| CmdError::err("LIMIT can't be negative"))? as usize;
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let keys = key_list(args, 2, end);
    let present = lookup_sets(ctx, &keys)?;
    if present.contains(&false) {
        return Ok(Reply::Int(0));
    }
    let sets = borrow_sets(ctx, &keys);
    Ok(Reply::Int(intersect(&sets, limit, |_| {}) as i64))
}

/// Stores `result` under `dst` (replacing whatever was there, TTL dropped) and publishes `event`,
/// or deletes `dst` when the result is empty (a `del` event if it existed); replies with the
/// result's size.
fn store(ctx: &mut Ctx, dst: &[u8], result: Set, event: &str) -> CmdResult {
    let now = ctx.now_ms();
    let n = result.len();
    if n == 0 {
        if ctx.db().remove(dst, now).is_some() {
            ctx.modified(dst, 1);
            ctx.notify(ev::GENERIC, "del", dst);
        }
    } else {
        let existed = ctx.lookup_write(dst).is_some();
        ctx.db().overwrite(dst, Value::Set(Box::new(result)), now);
        if !existed {
            ctx.notify(ev::NEW, "new", dst);
        }
        ctx.notify(ev::SET, event, dst);
        ctx.modified(dst, 1);
    }
    Ok(Reply::Int(n as i64))
}

/// SINTERSTORE destination key [key ...]
///
/// Stores the intersection in `destination` (deleting it when empty); replies with its size.
pub fn sinterstore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let keys = key_list(args, 2, args.len());
    let present = lookup_sets(ctx, &keys)?;
    let limit = max_intset(ctx);
    let mut result = Set::new();
    if !present.contains(&false) {
        let sets = borrow_sets(ctx, &keys);
        intersect(&sets, 0, |e| {
            result.insert_elem(e, limit);
        });
    }
    store(ctx, args.key(1), result, "sinterstore")
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Diff,
}

/// The union or difference of the sets under `keys`, built as Redis builds it (a fresh set that
/// starts as an intset).
fn union_diff(ctx: &mut Ctx, keys: &[&[u8]], op: Op) -> Result<Set, CmdError> {
    lookup_sets(ctx, keys)?;
    union_diff_of(ctx, keys, op)
}

/// `union_diff` of keys already looked up with `lookup_sets` (each lookup stamps the access
/// time and counts a hit or miss, so it is done once per command, as in Redis).
fn union_diff_of(ctx: &mut Ctx, keys: &[&[u8]], op: Op) -> Result<Set, CmdError> {
    let limit = max_intset(ctx);
    let sets = borrow_sets(ctx, keys);
    let mut result = Set::new();
    match op {
        Op::Union => {
            for s in sets.iter().flatten() {
                s.for_each(|e| {
                    result.insert_elem(e, limit);
                });
            }
        }
        Op::Diff => {
            if let Some(Some(first)) = sets.first() {
                let others: Vec<&Set> = sets[1..].iter().flatten().copied().collect();
                if others.iter().any(|o| std::ptr::eq(*o, *first)) {
                    return Ok(result);
                }
                first.for_each(|e| {
                    if !others.iter().any(|o| o.contains_elem(e)) {
                        result.insert_elem(e, limit);
                    }
                });
            }
        }
    }
    Ok(result)
}

/// SUNION key [key ...]
///
/// The members of any of the sets, as a set reply (absent keys count as empty sets).
pub fn sunion(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let keys = key_list(args, 1, args.len());
    lookup_sets(ctx, &keys)?;
    if let Some(r) = deferred_union_diff(ctx, &keys, AlgebraOp::Union)? {
        return Ok(r);
    }
    let result = union_diff_of(ctx, &keys, Op::Union)?;
    Ok(set_reply(ctx.proto(), &result))
}

/// SUNION or SDIFF of big sets (the union's inputs, or the difference's first set, of
/// `DEFER_MIN_ELEMENTS` or more members): built off the executor from snapshots of the sets, as
/// `union_diff` builds it, of keys already looked up. None when the sets are small enough to
/// answer in place.
fn deferred_union_diff(ctx: &mut Ctx, keys: &[&[u8]], op: AlgebraOp) -> Result<Option<Reply>, CmdError> {
    let sets = borrow_sets(ctx, keys);
    let work = match op {
        AlgebraOp::Union => sets.iter().flatten().map(|s| s.len()).sum(),
        _ => sets.first().copied().flatten().map_or(0, |s| s.len()),
    };
    if work < super::DEFER_MIN_ELEMENTS {
        return Ok(None);
    }
    let max_intset = max_intset(ctx);
    let (sets, same) = snapshot_sets(ctx, keys);
    Ok(Some(Reply::Deferred(Deferred::new(SetAlgebra { sets, same, op, max_intset, plan: Default::default() }))))
}

/// A set as a deferred set operation reads it: a hashtable's snapshot, a copy of an intset
/// (small: at most set-max-intset-entries), or nothing for a missing key.
enum SetView {
    Snap(SetSnapshot),
    Small(Set),
    Missing,
}

impl SetView {
    fn len(&self) -> usize {
        match self {
            SetView::Snap(s) => s.len(),
            SetView::Small(s) => s.len(),
            SetView::Missing => 0,
        }
    }

    fn for_each<'a>(&'a self, mut f: impl FnMut(Elem<'a>)) {
        match self {
            SetView::Snap(s) => s.for_each(|m| f(Elem::Str(m))),
            SetView::Small(s) => s.for_each(f),
            SetView::Missing => {}
        }
    }
}

/// Snapshots of the sets under `keys` (already looked up, so of the right type), and for each
/// the first position holding the same key (a key named twice is one set: SDIFF a a is empty,
/// SINTER a a b looks in `a` once).
fn snapshot_sets(ctx: &mut Ctx, keys: &[&[u8]]) -> (Vec<SetView>, Vec<usize>) {
    let views = keys
        .iter()
        .map(|k| match ctx.db().get_ref_mut(k) {
            Some(Value::Set(s)) => match s.snapshot() {
                Some(snap) => SetView::Snap(snap),
                None => SetView::Small((**s).clone()),
            },
            _ => SetView::Missing,
        })
        .collect();
    let same = (0..keys.len()).map(|i| (0..=i).find(|&j| keys[j] == keys[i]).unwrap_or(i)).collect();
    (views, same)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum AlgebraOp {
    Union,
    Inter,
    Diff,
}

/// SUNION/SINTER/SDIFF of big sets, worked out and encoded wherever the reply is written, from
/// the sets as they were when the command ran, in pieces and without building the result:
/// a counting pass finds the reply's length, then each piece emits the next members that pass
/// the operation's test. SINTER walks the smallest set (first of the smallest, as the in-place
/// form and Redis do) keeping what every other set holds; SUNION walks each distinct set keeping
/// what no earlier one holds; SDIFF walks the first keeping what no other holds. Lookups in a
/// hashtable's snapshot go through an index built over it (`SetSnapshot::build_index`: a slot
/// per member, no copy of the members); an intset copy answers by itself. Memory above the
/// sets: those indexes (about each looked-up set's own index), two pieces, and the pages
/// writers copy meanwhile; the result, which Redis builds whole for SUNION/SDIFF and a reply
/// of for all three, is never held.
///
/// Order: Redis replies a union or difference in its result set's order: ascending when that
/// set is an intset (every member an integer, at most set-max-intset-entries of them), its
/// hash table's order otherwise (random per process, so any order is Redis's). An intset
/// result is therefore sorted here (at most set-max-intset-entries integers, in one piece).
struct SetAlgebra {
    sets: Vec<SetView>,
    /// For each set, the first position holding the same key.
    same: Vec<usize>,
    op: AlgebraOp,
    max_intset: usize,
    /// Worked out by the first piece (the counting pass), off the executor.
    plan: std::sync::OnceLock<Plan>,
}

/// What the counting pass found, for the pieces that emit.
struct Plan {
    /// The sets walked to emit members, in order.
    walk: Vec<usize>,
    /// The sets a walked member is looked up in (SINTER: it must be in all; SDIFF: in none;
    /// SUNION: in no set walked before its own, so this is unused).
    checks: Vec<usize>,
    /// Per set, the index over its snapshot where lookups need one.
    indexes: Vec<Option<SnapshotIndex>>,
    count: usize,
    /// The members, ascending, of a union or difference Redis would hold as an intset.
    ints: Option<Vec<i64>>,
}

impl SetAlgebra {
    fn contains(&self, plan: &Plan, set: usize, e: Elem) -> bool {
        match (&self.sets[set], &plan.indexes[set]) {
            (SetView::Snap(s), Some(ix)) => e.with_bytes(|b| s.contains(ix, b)),
            (SetView::Small(s), _) => s.contains_elem(e),
            _ => false,
        }
    }

    /// Whether a member of the set walked at position `pos` of `plan.walk` is in the reply.
    fn keep(&self, plan: &Plan, pos: usize, e: Elem) -> bool {
        match self.op {
            AlgebraOp::Inter => plan.checks.iter().all(|&c| self.contains(plan, c, e)),
            AlgebraOp::Diff => !plan.checks.iter().any(|&c| self.contains(plan, c, e)),
            AlgebraOp::Union => !plan.walk[..pos].iter().any(|&c| self.contains(plan, c, e)),
        }
    }

    /// Which sets are walked and looked up in, their indexes, and the counting pass.
    fn plan(&self) -> Plan {
        let n = self.sets.len();
        let distinct = |i: &usize| self.same[*i] == *i && !matches!(self.sets[*i], SetView::Missing);
        let (walk, checks): (Vec<usize>, Vec<usize>) = match self.op {
            AlgebraOp::Inter => {
                let smallest = (0..n).min_by_key(|&i| self.sets[i].len());
                match smallest {
                    Some(first) if !self.sets.iter().any(|s| matches!(s, SetView::Missing)) => {
                        let own = self.same[first];
                        (vec![first], (0..n).filter(distinct).filter(|&i| i != own).collect())
                    }
                    _ => (Vec::new(), Vec::new()),
                }
            }
            AlgebraOp::Union => ((0..n).filter(distinct).collect(), Vec::new()),
            AlgebraOp::Diff => {
                if n == 0 || matches!(self.sets[0], SetView::Missing) || (1..n).any(|i| self.same[i] == 0) {
                    (Vec::new(), Vec::new())
                } else {
                    (vec![0], (1..n).filter(distinct).collect())
                }
            }
        };
        let looked_up: Vec<usize> = match self.op {
            AlgebraOp::Union => walk[..walk.len().saturating_sub(1)].to_vec(),
            _ => checks.clone(),
        };
        let indexes = (0..n)
            .map(|i| match &self.sets[i] {
                SetView::Snap(s) if looked_up.contains(&i) => Some(s.build_index()),
                _ => None,
            })
            .collect();
        let mut plan = Plan { walk, checks, indexes, count: 0, ints: None };
        // The counting pass; a union or difference also notes whether Redis's result would be
        // an intset, collecting its integers while it may be.
        let may_be_intset = self.op != AlgebraOp::Inter;
        let (mut count, mut ints, mut all_int) = (0usize, Vec::new(), may_be_intset);
        for pos in 0..plan.walk.len() {
            self.sets[plan.walk[pos]].for_each(|e| {
                if !self.keep(&plan, pos, e) {
                    return;
                }
                count += 1;
                if all_int {
                    let v = match e {
                        Elem::Int(v) => Some(v),
                        Elem::Str(b) => parse_i64(b),
                    };
                    match v {
                        Some(v) if count <= self.max_intset => ints.push(v),
                        Some(_) => ints = Vec::new(),
                        None => {
                            all_int = false;
                            ints = Vec::new();
                        }
                    }
                }
            });
        }
        plan.count = count;
        if all_int && count <= self.max_intset {
            ints.sort_unstable();
            plan.ints = Some(ints);
        }
        plan
    }
}

impl Encode for SetAlgebra {
    fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        let mut cursor = Cursor::default();
        while self.encode_piece(proto, &mut cursor, out) == Piece::More {}
    }

    fn size_hint(&self) -> usize {
        // Members average about 16 bytes on the wire; the union's bound, the others' at most.
        16 + self.sets.iter().map(SetView::len).sum::<usize>() * 24
    }

    fn min_size(&self) -> usize {
        // Only a union is known to hold at least its biggest input.
        match self.op {
            AlgebraOp::Union => self.sets.iter().map(SetView::len).max().unwrap_or(0) * 6,
            _ => 0,
        }
    }

    fn streams(&self) -> bool {
        true
    }

    /// The cursor: `a` the position in `plan.walk`, `b` and `c` the place in that set (a
    /// snapshot's chunk and offset, or an intset's index in `b`).
    fn encode_piece(&self, proto: u8, cur: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let plan = self.plan.get_or_init(|| self.plan());
        let base = out.len();
        if !cur.started {
            cur.started = true;
            set_header(out, proto, plan.count);
            if let Some(ints) = &plan.ints {
                for &v in ints {
                    push_elem(out, Elem::Int(v));
                }
                return Piece::Done(None);
            }
        }
        while let Some(&set) = plan.walk.get(cur.a) {
            let pos = cur.a;
            match &self.sets[set] {
                SetView::Snap(s) => {
                    let next = s.for_each_from((cur.b, cur.c as usize), |m| {
                        if self.keep(plan, pos, Elem::Str(m)) {
                            bulk(out, m);
                        }
                        out.len() - base < PIECE_BYTES
                    });
                    if let Some((chunk, off)) = next {
                        (cur.b, cur.c) = (chunk, off as u64);
                        return Piece::More;
                    }
                }
                SetView::Small(s) => {
                    while cur.b < s.len() {
                        let e = s.elem_at(cur.b);
                        cur.b += 1;
                        if self.keep(plan, pos, e) {
                            push_elem(out, e);
                        }
                        if out.len() - base >= PIECE_BYTES {
                            return Piece::More;
                        }
                    }
                }
                SetView::Missing => {}
            }
            (cur.a, cur.b, cur.c) = (cur.a + 1, 0, 0);
        }
        Piece::Done(None)
    }
}

/// SUNIONSTORE destination key [key ...]
///
/// Stores the union in `destination` (deleting it when empty); replies with its size.
pub fn sunionstore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let keys = key_list(args, 2, args.len());
    let result = union_diff(ctx, &keys, Op::Union)?;
    store(ctx, args.key(1), result, "sunionstore")
}

/// SDIFF key [key ...]
///
/// The members of the first set that are in none of the others, as a set reply.
pub fn sdiff(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let keys = key_list(args, 1, args.len());
    lookup_sets(ctx, &keys)?;
    if let Some(r) = deferred_union_diff(ctx, &keys, AlgebraOp::Diff)? {
        return Ok(r);
    }
    let result = union_diff_of(ctx, &keys, Op::Diff)?;
    Ok(set_reply(ctx.proto(), &result))
}

/// SDIFFSTORE destination key [key ...]
///
/// Stores the difference in `destination` (deleting it when empty); replies with its size.
pub fn sdiffstore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let keys = key_list(args, 2, args.len());
    let result = union_diff(ctx, &keys, Op::Diff)?;
    store(ctx, args.key(1), result, "sdiffstore")
}

use super::scan;

/// SSCAN key cursor [MATCH pattern] [COUNT count]
///
/// One step of a cursor walk over the set: an intset is returned whole with cursor 0; a
/// hashtable visits buckets until about COUNT members were seen (at most ten times COUNT
/// steps). Members present for the whole walk are returned at least once.
pub fn sscan(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let cursor = scan::cursor_arg(args, 2)?;
    let set = ctx.read::<Set>(args.key(1))?;
    scan::collection(set, cursor, args)
}

impl scan::Scan for &Set {
    const ITEMS: i64 = 1;
    fn step(&mut self, cursor: u64, visit: &mut dyn FnMut(scan::Entry<'_>)) -> u64 {
        self.scan_step(cursor, |e| e.with_bytes(|b| visit(scan::Entry { name: b, value: None, type_name: None })))
    }
}
