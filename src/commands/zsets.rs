//! Sorted set commands: ZADD and friends, the range family (ZRANGE with BYSCORE/BYLEX/REV/LIMIT
//! and its legacy forms, ZRANGESTORE), removals by range, pops (ZPOPMIN/MAX, ZMPOP and the
//! blocking BZPOPMIN/BZPOPMAX/BZMPOP), ZRANDMEMBER, the set algebra (ZUNION/ZINTER/ZDIFF, their
//! STORE forms, ZINTERCARD) and ZSCAN. The data structure lives in `types::zset`; this module
//! parses arguments with Redis 7.0's error precedence and shapes replies.
//!
//! Every range command reduces its range (rank, score or lex) to an interval of ranks, then walks
//! it; replies that are arrays of bulk strings (or RESP2 WITHSCORES pairs) are encoded straight
//! into bytes, because big ranges are hot paths. Scores are `%.17g` in RESP2 and doubles in RESP3,
//! where WITHSCORES results become `[member, score]` pairs as Redis 7.0 sends them.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::pubsub::ev;
use crate::resp::reply::{Cursor, Deferred, Encode, Piece, PIECE_BYTES};
use crate::resp::writer::{bulk, int_line};
use crate::resp::Reply;
use crate::types::zset::{LexBound, Limits, ZSetSnapshot};
use crate::types::{Value, ZSet};
use crate::util::num::{fmt_g17, parse_i64};

pub static COMMANDS: &[CommandSpec] = &[
    spec("zadd", -4, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::SORTEDSET, zadd),
    spec("zincrby", 4, WRITE | DENYOOM | FAST, keys(1, 1, 1), acl::SORTEDSET, zincrby),
    spec("zrem", -3, WRITE | FAST, keys(1, 1, 1), acl::SORTEDSET, zrem),
    spec("zcard", 2, READONLY | FAST, keys(1, 1, 1), acl::SORTEDSET, zcard),
    spec("zscore", 3, READONLY | FAST, keys(1, 1, 1), acl::SORTEDSET, zscore),
    spec("zmscore", -3, READONLY | FAST, keys(1, 1, 1), acl::SORTEDSET, zmscore),
    spec("zrank", 3, READONLY | FAST, keys(1, 1, 1), acl::SORTEDSET, zrank),
    spec("zrevrank", 3, READONLY | FAST, keys(1, 1, 1), acl::SORTEDSET, zrevrank),
    spec("zrange", -4, READONLY, keys(1, 1, 1), acl::SORTEDSET, zrange),
    spec("zrangestore", -5, WRITE | DENYOOM, keys(1, 2, 1), acl::SORTEDSET, zrangestore),
    spec("zrevrange", -4, READONLY, keys(1, 1, 1), acl::SORTEDSET, zrevrange),
    spec("zrangebyscore", -4, READONLY, keys(1, 1, 1), acl::SORTEDSET, zrangebyscore),
    spec("zrevrangebyscore", -4, READONLY, keys(1, 1, 1), acl::SORTEDSET, zrevrangebyscore),
    spec("zrangebylex", -4, READONLY, keys(1, 1, 1), acl::SORTEDSET, zrangebylex),
    spec("zrevrangebylex", -4, READONLY, keys(1, 1, 1), acl::SORTEDSET, zrevrangebylex),
    spec("zcount", 4, READONLY | FAST, keys(1, 1, 1), acl::SORTEDSET, zcount),
    spec("zlexcount", 4, READONLY | FAST, keys(1, 1, 1), acl::SORTEDSET, zlexcount),
    spec("zremrangebyrank", 4, WRITE, keys(1, 1, 1), acl::SORTEDSET, zremrangebyrank),
    spec("zremrangebyscore", 4, WRITE, keys(1, 1, 1), acl::SORTEDSET, zremrangebyscore),
    spec("zremrangebylex", 4, WRITE, keys(1, 1, 1), acl::SORTEDSET, zremrangebylex),
    spec("zpopmin", -2, WRITE | FAST, keys(1, 1, 1), acl::SORTEDSET, zpopmin),
    spec("zpopmax", -2, WRITE | FAST, keys(1, 1, 1), acl::SORTEDSET, zpopmax),
    spec("zmpop", -4, WRITE | MOVABLEKEYS, NO_KEYS, acl::SORTEDSET, zmpop),
    spec("bzpopmin", -3, WRITE | NOSCRIPT | BLOCKING | FAST, keys(1, -2, 1), acl::SORTEDSET, bzpopmin),
    spec("bzpopmax", -3, WRITE | NOSCRIPT | BLOCKING | FAST, keys(1, -2, 1), acl::SORTEDSET, bzpopmax),
    spec("bzmpop", -5, WRITE | BLOCKING | MOVABLEKEYS, NO_KEYS, acl::SORTEDSET, bzmpop),
    spec("zrandmember", -2, READONLY, keys(1, 1, 1), acl::SORTEDSET, zrandmember),
    spec("zunion", -3, READONLY | MOVABLEKEYS, NO_KEYS, acl::SORTEDSET, zunion),
    spec("zinter", -3, READONLY | MOVABLEKEYS, NO_KEYS, acl::SORTEDSET, zinter),
    spec("zdiff", -3, READONLY | MOVABLEKEYS, NO_KEYS, acl::SORTEDSET, zdiff),
    spec("zunionstore", -4, WRITE | DENYOOM | MOVABLEKEYS, keys(1, 1, 1), acl::SORTEDSET, zunionstore),
    spec("zinterstore", -4, WRITE | DENYOOM | MOVABLEKEYS, keys(1, 1, 1), acl::SORTEDSET, zinterstore),
    spec("zdiffstore", -4, WRITE | DENYOOM | MOVABLEKEYS, keys(1, 1, 1), acl::SORTEDSET, zdiffstore),
    spec("zintercard", -3, READONLY | MOVABLEKEYS, NO_KEYS, acl::SORTEDSET, zintercard),
    spec("zscan", -3, READONLY, keys(1, 1, 1), acl::SORTEDSET, zscan),
];

// ---------------------------------------------------------------------------------------------
// shared helpers

/// Members with their scores, in the order they are to be replied or stored.
type Pairs = Vec<(Vec<u8>, f64)>;

pub(super) fn limits(ctx: &Ctx) -> Limits {
    Limits { max_entries: ctx.config().zset_max_listpack_entries, max_value: ctx.config().zset_max_listpack_value }
}

/// After a removal: publishes `event`, deletes the key when the zset became empty (a `del`
/// event after the command's own), and records the write.
fn after_removal(ctx: &mut Ctx, key: &[u8], empty: bool, event: &str) {
    ctx.notify(ev::ZSET, event, key);
    if empty {
        let now = ctx.now_ms();
        ctx.db().remove(key, now);
        ctx.notify(ev::GENERIC, "del", key);
    }
    ctx.modified(key, 1);
}

/// Appends a score in `%.17g` (integers take a fast path that prints the same digits).
fn push_score_text(out: &mut Vec<u8>, s: f64) {
    if s.fract() == 0.0 && s.abs() < 1e17 && !(s == 0.0 && s.is_sign_negative()) {
        crate::util::num::push_i64(out, s as i64);
    } else {
        out.extend_from_slice(fmt_g17(s).as_bytes());
    }
}

/// A score as Redis 7.0 writes it into a listpack (its `d2string`), which ZSCAN of a listpack
/// zset sends back verbatim: integral scores within ±2^62 as integers (`100000000000000000`, where
/// `%.17g` would print `1e+17`), everything else as `%.17g`.
fn packed_score_text(s: f64) -> Vec<u8> {
    const LIM: f64 = 4611686018427387904.0; // (double)(LLONG_MAX / 2)
    if s != 0.0 && (-LIM..=LIM).contains(&s) && s == s.trunc() {
        return (s as i64).to_string().into_bytes();
    }
    score_text(s)
}

fn score_text(s: f64) -> Vec<u8> {
    let mut v = Vec::new();
    push_score_text(&mut v, s);
    v
}

/// Builds the encoded reply of a member list, with or without scores, for the client's protocol.
struct Emitter {
    body: Vec<u8>,
    count: usize,
    withscores: bool,
    resp3: bool,
    tmp: Vec<u8>,
}

impl Emitter {
    fn new(withscores: bool, proto: u8) -> Self {
        Emitter { body: Vec::new(), count: 0, withscores, resp3: proto >= 3, tmp: Vec::new() }
    }

    fn push(&mut self, member: &[u8], score: f64) {
        self.count += 1;
        emit(&mut self.body, &mut self.tmp, self.withscores, self.resp3, member, score);
    }

    fn finish(self) -> Reply {
        let n = if self.withscores && !self.resp3 { self.count * 2 } else { self.count };
        let mut out = Vec::with_capacity(self.body.len() + 16);
        int_line(&mut out, b'*', n as i64);
        out.extend_from_slice(&self.body);
        Reply::Raw(out)
    }
}

/// One element of a member list: the member, or with scores a pair (RESP3) or the member then
/// its score (RESP2). `tmp` is scratch for the score's text.
fn emit(out: &mut Vec<u8>, tmp: &mut Vec<u8>, withscores: bool, resp3: bool, member: &[u8], score: f64) {
    if !withscores {
        bulk(out, member);
        return;
    }
    tmp.clear();
    push_score_text(tmp, score);
    if resp3 {
        out.extend_from_slice(b"*2\r\n");
        bulk(out, member);
        out.push(b',');
        out.extend_from_slice(tmp);
        out.extend_from_slice(b"\r\n");
    } else {
        bulk(out, member);
        bulk(out, tmp);
    }
}

/// A member and its score as Redis sends a pair: `[member, score]`.
fn pair(member: Vec<u8>, score: f64) -> Reply {
    Reply::Array(vec![Reply::Bulk(member), Reply::Double(score)])
}

/// A score argument (ZADD, ZINCRBY, WEIGHTS) as Redis's `string2d` reads it.
fn parse_score(s: &[u8]) -> Option<f64> {
    crate::util::num::parse_f64(s)
}

/// Parses one end of a score range: `[(]number`, read by plain strtod as Redis's zslParseRange
/// does (leading space allowed, an empty number is 0, out-of-range values saturate), NaN
/// refused. strtod reads a C string: the text ends at its first NUL (`1\0x` is 1).
fn parse_score_bound(arg: &[u8]) -> Option<(f64, bool)> {
    let arg = crate::util::c_str(arg);
    let (ex, text) = match arg.first() {
        Some(b'(') => (true, &arg[1..]),
        _ => (false, arg),
    };
    let start = text.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(text.len());
    let text = &text[start..];
    if text.is_empty() {
        return Some((0.0, ex));
    }
    let (v, _) = crate::util::num::strtod(text)?;
    (!v.is_nan()).then_some((v, ex))
}

struct ScoreRange {
    min: f64,
    minex: bool,
    max: f64,
    maxex: bool,
}

fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
    let e = || CmdError::err("min or max is not a float");
    let (min, minex) = parse_score_bound(min).ok_or_else(e)?;
    let (max, maxex) = parse_score_bound(max).ok_or_else(e)?;
    Ok(ScoreRange { min, minex, max, maxex })
}

/// A lex range bound as zslParseLexRangeItem reads it: `+` and `-` stand alone in C-string terms
/// (a NUL may follow), the text after `[` or `(` is binary.
fn parse_lex_bound(arg: &[u8]) -> Option<LexBound> {
    let alone = arg.get(1).is_none_or(|&b| b == 0);
    match arg.first()? {
        b'+' if alone => Some(LexBound::Max),
        b'-' if alone => Some(LexBound::Min),
        b'[' => Some(LexBound::Incl(arg[1..].to_vec())),
        b'(' => Some(LexBound::Excl(arg[1..].to_vec())),
        _ => None,
    }
}

fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<(LexBound, LexBound), CmdError> {
    let e = || CmdError::err("min or max not valid string range item");
    Ok((parse_lex_bound(min).ok_or_else(e)?, parse_lex_bound(max).ok_or_else(e)?))
}

/// Ascending ranks `[first, end)` of the members within a score range.
fn score_ranks(z: &ZSet, r: &ScoreRange) -> (usize, usize) {
    let first = z.count_below_score(r.min, r.minex);
    let end = z.count_below_score(r.max, !r.maxex);
    (first, end.max(first))
}

/// How a lex range is walked: from its first member up, or from its last member down
/// (ZREVRANGEBYLEX).
#[derive(Clone, Copy, PartialEq, Eq)]
enum LexWalk {
    Forward,
    Reverse,
}

fn gte_min(member: &[u8], min: &LexBound) -> bool {
    match min {
        LexBound::Min => true,
        LexBound::Max => false,
        LexBound::Incl(v) => member >= v.as_slice(),
        LexBound::Excl(v) => member > v.as_slice(),
    }
}

fn lte_max(member: &[u8], max: &LexBound) -> bool {
    match max {
        LexBound::Max => true,
        LexBound::Min => false,
        LexBound::Incl(v) => member <= v.as_slice(),
        LexBound::Excl(v) => member < v.as_slice(),
    }
}

/// Ascending ranks `[first, end)` of the members a lex range takes, `skip` members (LIMIT's
/// offset) left out from where the walk starts.
///
/// Members are in score order, which is lex order only when the scores are equal; on a
/// listpack Redis's walk is then the definition, and it is followed here exactly: the range is
/// empty unless min is below max, the last member is at least min and the first at most max
/// (zzlIsInLexRange); the first member at least min (or, walking down, the last at most max)
/// must be inside; the offset skips members whatever they are, and the walk goes on while
/// members stay inside. On a skiplist Redis finds the start by a descent whose path depends on
/// its random levels when members are out of lex order; there the ranks are the counts of
/// members below each bound, which is Redis's answer whenever the members are in lex order.
fn lex_ranks(z: &ZSet, min: &LexBound, max: &LexBound, walk: LexWalk, skip: usize) -> (usize, usize) {
    let len = z.len();
    if z.encoding_name() != "listpack" {
        let first = match min {
            LexBound::Excl(_) => z.count_below_lex(min, true),
            LexBound::Max => len,
            _ => z.count_below_lex(min, false),
        };
        let end = match max {
            LexBound::Incl(_) => z.count_below_lex(max, true),
            LexBound::Min => 0,
            _ => z.count_below_lex(max, false),
        };
        let end = end.max(first);
        return match walk {
            LexWalk::Forward => (first.saturating_add(skip).min(end), end),
            LexWalk::Reverse => (first, end.saturating_sub(skip).max(first)),
        };
    }
    let members: Vec<Vec<u8>> = {
        let mut all = Vec::with_capacity(len);
        if len > 0 {
            z.walk(0, len - 1, false, &mut |m, _| {
                all.push(m.to_vec());
                true
            });
        }
        all
    };
    let empty = (0, 0);
    let valid = match (min, max) {
        (LexBound::Max, _) | (_, LexBound::Min) => false,
        (LexBound::Min, _) | (_, LexBound::Max) => true,
        (LexBound::Incl(a), LexBound::Incl(b)) => a <= b,
        (LexBound::Incl(a) | LexBound::Excl(a), LexBound::Incl(b) | LexBound::Excl(b)) => a < b,
    };
    if !valid || len == 0 || !gte_min(&members[len - 1], min) || !lte_max(&members[0], max) {
        return empty;
    }
    match walk {
        LexWalk::Forward => {
            let Some(first) = members.iter().position(|m| gte_min(m, min)) else { return empty };
            if !lte_max(&members[first], max) {
                return empty;
            }
            let start = first.saturating_add(skip).min(len);
            let run = members[start..].iter().take_while(|m| lte_max(m, max)).count();
            (start, start + run)
        }
        LexWalk::Reverse => {
            let Some(last) = members.iter().rposition(|m| lte_max(m, max)) else { return empty };
            if !gte_min(&members[last], min) || skip > last {
                return empty;
            }
            let top = last - skip;
            let run = members[..=top].iter().rev().take_while(|m| gte_min(m, min)).count();
            (top + 1 - run, top + 1)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ZADD / ZINCRBY

#[derive(Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

enum AddOutcome {
    Added(f64),
    Updated(f64),
    /// Nothing done (NX/XX/GT/LT said no); carries the unchanged score.
    Nop,
    Same(f64),
}

/// One element of ZADD with its option semantics (Redis's zsetAdd).
fn zset_add(z: &mut ZSet, member: &[u8], score: f64, f: AddFlags, limits: Limits) -> Result<AddOutcome, CmdError> {
    match z.score(member) {
        Some(cur) => {
            if f.nx {
                return Ok(AddOutcome::Nop);
            }
            let mut new = score;
            if f.incr {
                new += cur;
                if new.is_nan() {
                    return Err(CmdError::err("resulting score is not a number (NaN)"));
                }
            }
            if (f.lt && new >= cur) || (f.gt && new <= cur) {
                return Ok(AddOutcome::Nop);
            }
            if new != cur {
                z.insert(member, new, limits);
                Ok(AddOutcome::Updated(new))
            } else {
                Ok(AddOutcome::Same(new))
            }
        }
        None => {
            if f.xx {
                return Ok(AddOutcome::Nop);
            }
            z.insert(member, score, limits);
            Ok(AddOutcome::Added(score))
        }
    }
}

fn zadd_generic(ctx: &mut Ctx, args: &Args, mut f: AddFlags) -> CmdResult {
    let mut i = 2;
    while i < args.len() {
        if args.is(i, "nx") {
            f.nx = true;
        } else if args.is(i, "xx") {
            f.xx = true;
        } else if args.is(i, "ch") {
            f.ch = true;
        } else if args.is(i, "incr") {
            f.incr = true;
        } else if args.is(i, "gt") {
            f.gt = true;
        } else if args.is(i, "lt") {
            f.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let elements = args.len() - i;
    if elements == 0 || !elements.is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if f.nx && f.xx {
        return Err(CmdError::err("XX and NX options at the same time are not compatible"));
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Err(CmdError::err("GT, LT, and/or NX options at the same time are not compatible"));
    }
    if f.incr && elements > 2 {
        return Err(CmdError::err("INCR option supports a single increment-element pair"));
    }
    let mut scores = Vec::with_capacity(elements / 2);
    for j in (i..args.len()).step_by(2) {
        scores.push(parse_score(args.get(j)).ok_or(CmdError::NotFloat)?);
    }
    let key = args.key(1);
    let lim = limits(ctx);
    if f.xx && ctx.write::<ZSet>(key)?.is_none() {
        return Ok(if f.incr { Reply::Nil } else { Reply::Int(0) });
    }
    // XX looked the key up already: not a second access stamp.
    let z = if f.xx { ctx.again_or_create::<ZSet>(key)? } else { ctx.write_or_create::<ZSet>(key)? };
    // A zset is never left empty, so an empty one is the one just created.
    let created = z.is_empty();
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut last = 0.0;
    let mut failure = None;
    for (n, j) in (i..args.len()).step_by(2).enumerate() {
        match zset_add(z, args.get(j + 1), scores[n], f, lim) {
            Ok(AddOutcome::Added(s)) => {
                added += 1;
                processed += 1;
                last = s;
            }
            Ok(AddOutcome::Updated(s)) => {
                updated += 1;
                processed += 1;
                last = s;
            }
            Ok(AddOutcome::Same(s)) => {
                processed += 1;
                last = s;
            }
            Ok(AddOutcome::Nop) => {}
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let empty = z.is_empty();
    if empty {
        // Created for nothing (INCR refused, for instance): Redis never leaves an empty zset.
        let now = ctx.now_ms();
        ctx.db().remove(key, now);
    }
    if added + updated > 0 {
        ctx.notify(ev::ZSET, if f.incr { "zincr" } else { "zadd" }, key);
        ctx.modified(key, (added + updated) as u64);
        if created {
            ctx.signal_ready(key);
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(if f.incr {
        if processed > 0 {
            Reply::Double(last)
        } else {
            Reply::Nil
        }
    } else {
        Reply::Int(if f.ch { added + updated } else { added })
    })
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
///
/// Adds members or updates their scores, creating the zset when absent. NX only adds, XX only
/// updates, GT/LT update only when the new score is greater/less; CH counts changed members too;
/// INCR adds the increment to one member's score and replies with the new score (null when the
/// options prevented it).
pub fn zadd(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zadd_generic(ctx, args, AddFlags::default())
}

/// ZINCRBY key increment member
///
/// Adds `increment` to the member's score (from 0 when absent) and replies with the new score.
pub fn zincrby(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zadd_generic(ctx, args, AddFlags { incr: true, ..Default::default() })
}

// ---------------------------------------------------------------------------------------------
// point reads and removals

/// ZREM key member [member ...]
///
/// Removes the members; replies with how many existed. The key goes when the zset empties.
pub fn zrem(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let Some(z) = ctx.write::<ZSet>(key)? else {
        return Ok(Reply::Int(0));
    };
    let mut n = 0;
    for m in args.from(2) {
        if z.remove(m).is_some() {
            n += 1;
            if z.is_empty() {
                break;
            }
        }
    }
    let empty = z.is_empty();
    if n > 0 {
        after_removal(ctx, key, empty, "zrem");
    }
    Ok(Reply::Int(n))
}

/// ZCARD key
///
/// The number of members (0 for a missing key).
pub fn zcard(ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.read::<ZSet>(args.key(1))?.map_or(0, |z| z.len() as i64)))
}

/// ZSCORE key member
///
/// The member's score, or null.
pub fn zscore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let z = ctx.read::<ZSet>(args.key(1))?;
    Ok(z.and_then(|z| z.score(args.get(2))).map_or(Reply::Nil, Reply::Double))
}

/// ZMSCORE key member [member ...]
///
/// The score of each member, null for absent ones (all null for a missing key).
pub fn zmscore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let z = ctx.read::<ZSet>(args.key(1))?;
    Ok(Reply::Array(args.from(2).map(|m| z.and_then(|z| z.score(m)).map_or(Reply::Nil, Reply::Double)).collect()))
}

fn rank_generic(ctx: &mut Ctx, args: &Args, rev: bool) -> CmdResult {
    let Some(z) = ctx.read::<ZSet>(args.key(1))? else {
        return Ok(Reply::Nil);
    };
    let len = z.len();
    Ok(match z.rank(args.get(2)) {
        Some((r, _)) => Reply::Int(if rev { len - 1 - r } else { r } as i64),
        None => Reply::Nil,
    })
}

/// ZRANK key member
///
/// The member's 0-based position in ascending score order, or null.
pub fn zrank(ctx: &mut Ctx, args: &Args) -> CmdResult {
    rank_generic(ctx, args, false)
}

/// ZREVRANK key member
///
/// The member's 0-based position in descending score order, or null.
pub fn zrevrank(ctx: &mut Ctx, args: &Args) -> CmdResult {
    rank_generic(ctx, args, true)
}

// ---------------------------------------------------------------------------------------------
// ranges

#[derive(Clone, Copy, PartialEq, Eq)]
enum RangeType {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Parses and runs a range read: ZRANGE (and ZRANGESTORE when `store` names a destination) with
/// `argv[key_idx]` the source key, or one of the legacy commands with preset type/direction.
fn zrange_generic(
    ctx: &mut Ctx,
    args: &Args,
    key_idx: usize,
    store: Option<&[u8]>,
    mut rtype: RangeType,
    mut rev: Option<bool>,
) -> CmdResult {
    let mut withscores = false;
    let mut offset: i64 = 0;
    let mut limit: i64 = -1;
    let mut j = key_idx + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        if store.is_none() && args.is(j, "withscores") {
            withscores = true;
        } else if args.is(j, "limit") && left >= 2 {
            offset = args.i64(j + 1)?;
            limit = args.i64(j + 2)?;
            j += 2;
        } else if rev.is_none() && args.is(j, "rev") {
            rev = Some(true);
        } else if rtype == RangeType::Auto && args.is(j, "bylex") {
            rtype = RangeType::Lex;
        } else if rtype == RangeType::Auto && args.is(j, "byscore") {
            rtype = RangeType::Score;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if rtype == RangeType::Auto {
        rtype = RangeType::Rank;
    }
    if limit != -1 && rtype == RangeType::Rank {
        return Err(CmdError::err("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"));
    }
    if withscores && rtype == RangeType::Lex {
        return Err(CmdError::err("syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut a, mut b) = (key_idx + 1, key_idx + 2);
    if rev && rtype != RangeType::Rank {
        std::mem::swap(&mut a, &mut b);
    }
    enum Range {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexBound, LexBound),
    }
    let range = match rtype {
        RangeType::Score => Range::Score(parse_score_range(args.get(a), args.get(b))?),
        RangeType::Lex => {
            let (min, max) = parse_lex_range(args.get(a), args.get(b))?;
            Range::Lex(min, max)
        }
        _ => Range::Rank(args.i64(a)?, args.i64(b)?),
    };
    let key = args.key(key_idx);
    let proto = ctx.proto();
    let z = ctx.read::<ZSet>(key)?;
    // The interval to walk, as positions in walking order (from the top when rev).
    let walk: Option<(usize, usize)> = z.and_then(|z| {
        let len = z.len();
        match &range {
            Range::Rank(s, e) => crate::util::num::clamp_index_range(*s, *e, len),
            Range::Score(_) | Range::Lex(..) => {
                if offset < 0 {
                    return None;
                }
                // A lex walk applies the offset itself (see `lex_ranks`).
                let (first, end, skip) = match &range {
                    Range::Score(r) => {
                        let (first, end) = score_ranks(z, r);
                        (first, end, offset as usize)
                    }
                    Range::Lex(min, max) => {
                        let walk = if rev { LexWalk::Reverse } else { LexWalk::Forward };
                        let (first, end) = lex_ranks(z, min, max, walk, offset as usize);
                        (first, end, 0)
                    }
                    Range::Rank(..) => (0, 0, 0),
                };
                let (first, end) = if rev { (len - end, len - first) } else { (first, end) };
                let first = first.saturating_add(skip);
                let end = if limit >= 0 { end.min(first.saturating_add(limit as usize)) } else { end };
                if first >= end {
                    None
                } else {
                    Some((first, end - 1))
                }
            }
        }
    });
    if let Some(dst) = store {
        let mut pairs = Vec::new();
        if let (Some(z), Some((s, e))) = (z, walk) {
            z.walk(s, e, rev, &mut |m, sc| {
                pairs.push((m.to_vec(), sc));
                true
            });
        }
        // Redis fills the destination as a listpack (from the start when the result length is
        // unknown, BYSCORE/BYLEX, or known to fit) until a limit is crossed, and a listpack keeps
        // no negative zero: members inserted before the conversion lose the sign of a -0 score.
        let lim = limits(ctx);
        let hint = if matches!(range, Range::Rank(..)) { pairs.len() } else { 0 };
        if hint <= lim.max_entries {
            for (i, (m, sc)) in pairs.iter_mut().enumerate() {
                if i + 1 > lim.max_entries || m.len() > lim.max_value {
                    break;
                }
                if *sc == 0.0 {
                    *sc = 0.0;
                }
            }
        }
        return store_result(ctx, dst, pairs, "zrangestore");
    }
    if let Some((s, e)) = walk {
        if e - s + 1 >= super::DEFER_MIN_ELEMENTS {
            // A big range: a snapshot of the zset, walked and encoded off the executor.
            let snap = match ctx.db().get_ref_mut(key) {
                Some(Value::ZSet(z)) => z.snapshot(),
                _ => return Ok(Reply::Array(Vec::new())),
            };
            return Ok(Reply::Deferred(Deferred::new(ZRangeReply { snap, start: s, end: e, rev, withscores })));
        }
    }
    let mut em = Emitter::new(withscores, proto);
    if let (Some(z), Some((s, e))) = (z, walk) {
        z.walk(s, e, rev, &mut |m, sc| {
            em.push(m, sc);
            true
        });
    }
    Ok(em.finish())
}

/// A big ZRANGE (any form: by rank, score or lex, REV, LIMIT) reduced to the ranks it walks,
/// over a snapshot of the zset: encoded wherever the reply is written.
struct ZRangeReply {
    snap: ZSetSnapshot,
    start: usize,
    end: usize,
    rev: bool,
    withscores: bool,
}

impl Encode for ZRangeReply {
    fn encode(&self, proto: u8, out: &mut Vec<u8>) {
        let n = self.end - self.start + 1;
        let resp3 = proto >= 3;
        int_line(out, b'*', if self.withscores && !resp3 { 2 * n } else { n } as i64);
        let mut tmp = Vec::new();
        self.snap.walk(self.start, self.end, self.rev, &mut |m, sc| {
            emit(out, &mut tmp, self.withscores, resp3, m, sc);
            true
        });
    }

    fn size_hint(&self) -> usize {
        let n = self.end - self.start + 1;
        16 + n * if self.withscores { 48 } else { 24 }
    }

    fn min_size(&self) -> usize {
        // A member's bulk string takes six bytes at the least, a score's text (or double) four.
        (self.end - self.start + 1) * if self.withscores { 10 } else { 6 }
    }

    fn streams(&self) -> bool {
        true
    }

    /// The cursor counts the members sent: the next piece walks on from that rank.
    fn encode_piece(&self, proto: u8, cur: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let n = self.end - self.start + 1;
        let resp3 = proto >= 3;
        let base = out.len();
        if !cur.started {
            cur.started = true;
            int_line(out, b'*', if self.withscores && !resp3 { 2 * n } else { n } as i64);
        }
        let mut tmp = Vec::new();
        let mut sent = 0;
        self.snap.walk(self.start + cur.a, self.end, self.rev, &mut |m, sc| {
            emit(out, &mut tmp, self.withscores, resp3, m, sc);
            sent += 1;
            out.len() - base < PIECE_BYTES
        });
        cur.a += sent;
        // A walk that found nothing more ends the reply (it cannot loop on an empty piece).
        if cur.a >= n || sent == 0 {
            Piece::Done(None)
        } else {
            Piece::More
        }
    }
}

/// Stores `pairs` as the zset `dst` and publishes `event` (deleting `dst` when empty, with a `del`
/// event if it existed) and replies with the count.
fn store_result(ctx: &mut Ctx, dst: &[u8], pairs: Vec<(Vec<u8>, f64)>, event: &str) -> CmdResult {
    let n = pairs.len();
    let now = ctx.now_ms();
    if n == 0 {
        if ctx.db().remove(dst, now).is_some() {
            ctx.modified(dst, 1);
            ctx.notify(ev::GENERIC, "del", dst);
        }
        return Ok(Reply::Int(0));
    }
    let z = ZSet::from_pairs(pairs, limits(ctx));
    let existed = ctx.lookup_write(dst).is_some();
    ctx.db().overwrite(dst, Value::ZSet(Box::new(z)), now);
    if !existed {
        ctx.notify(ev::NEW, "new", dst);
    }
    ctx.notify(ev::ZSET, event, dst);
    ctx.modified(dst, 1);
    ctx.signal_ready(dst);
    Ok(Reply::Int(n as i64))
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
///
/// Members in a range of ranks (negative counting from the end), scores (`(` for exclusive,
/// `-inf`/`+inf`) or members (`[`/`(`, `-`/`+`, when all scores are equal); REV walks from the
/// highest and takes the range as max then min for BYSCORE/BYLEX; LIMIT pages score and lex
/// ranges.
pub fn zrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeType::Auto, None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
///
/// ZRANGE whose result is stored in `dst` (deleted when the result is empty); replies with the
/// number of members stored.
pub fn zrangestore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let dst = args.key(1).to_vec();
    zrange_generic(ctx, args, 2, Some(&dst), RangeType::Auto, None)
}

/// ZREVRANGE key start stop [WITHSCORES]
///
/// ZRANGE ... REV on ranks.
pub fn zrevrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeType::Rank, Some(true))
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
///
/// ZRANGE ... BYSCORE.
pub fn zrangebyscore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeType::Score, Some(false))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
///
/// ZRANGE ... BYSCORE REV (the range given as max then min).
pub fn zrevrangebyscore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeType::Score, Some(true))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
///
/// ZRANGE ... BYLEX.
pub fn zrangebylex(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeType::Lex, Some(false))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
///
/// ZRANGE ... BYLEX REV (the range given as max then min).
pub fn zrevrangebylex(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeType::Lex, Some(true))
}

/// ZCOUNT key min max
///
/// The number of members within a score range.
pub fn zcount(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let r = parse_score_range(args.get(2), args.get(3))?;
    let Some(z) = ctx.read::<ZSet>(args.key(1))? else {
        return Ok(Reply::Int(0));
    };
    let (a, b) = score_ranks(z, &r);
    Ok(Reply::Int((b - a) as i64))
}

/// ZLEXCOUNT key min max
///
/// The number of members within a lex range.
pub fn zlexcount(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (min, max) = parse_lex_range(args.get(2), args.get(3))?;
    let Some(z) = ctx.read::<ZSet>(args.key(1))? else {
        return Ok(Reply::Int(0));
    };
    let (a, b) = lex_ranks(z, &min, &max, LexWalk::Forward, 0);
    Ok(Reply::Int((b - a) as i64))
}

fn remrange(ctx: &mut Ctx, key: &[u8], event: &str, ranks: impl FnOnce(&ZSet) -> Option<(usize, usize)>) -> CmdResult {
    let Some(z) = ctx.write::<ZSet>(key)? else {
        return Ok(Reply::Int(0));
    };
    let Some((s, e)) = ranks(z) else {
        return Ok(Reply::Int(0));
    };
    let n = z.remove_ranks(s, e);
    let empty = z.is_empty();
    if n > 0 {
        after_removal(ctx, key, empty, event);
    }
    Ok(Reply::Int(n as i64))
}

/// ZREMRANGEBYRANK key start stop
///
/// Removes the members in a rank range (negative counting from the end); replies with the count.
pub fn zremrangebyrank(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (s, e) = (args.i64(2)?, args.i64(3)?);
    remrange(ctx, args.key(1), "zremrangebyrank", |z| crate::util::num::clamp_index_range(s, e, z.len()))
}

/// ZREMRANGEBYSCORE key min max
///
/// Removes the members within a score range; replies with the count.
pub fn zremrangebyscore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let r = parse_score_range(args.get(2), args.get(3))?;
    remrange(ctx, args.key(1), "zremrangebyscore", |z| {
        let (a, b) = score_ranks(z, &r);
        (a < b).then(|| (a, b - 1))
    })
}

/// ZREMRANGEBYLEX key min max
///
/// Removes the members within a lex range; replies with the count.
pub fn zremrangebylex(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (min, max) = parse_lex_range(args.get(2), args.get(3))?;
    remrange(ctx, args.key(1), "zremrangebylex", |z| {
        let (a, b) = lex_ranks(z, &min, &max, LexWalk::Forward, 0);
        (a < b).then(|| (a, b - 1))
    })
}

// ---------------------------------------------------------------------------------------------
// pops

/// Pops up to `count` members from the low (or, with `max`, high) end of the zset under `key`,
/// deleting the key when it empties. None when the key is missing.
fn pop_from(ctx: &mut Ctx, key: &[u8], max: bool, count: usize) -> Result<Option<Pairs>, CmdError> {
    let Some(z) = ctx.write::<ZSet>(key)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(count.min(z.len()));
    if count == 0 {
        return Ok(Some(out));
    }
    z.walk(0, count.saturating_sub(1), max, &mut |m, s| {
        out.push((m.to_vec(), s));
        true
    });
    if out.is_empty() {
        return Ok(Some(out));
    }
    let len = z.len();
    let n = out.len();
    if max {
        z.remove_ranks(len - n, len - 1);
    } else {
        z.remove_ranks(0, n - 1);
    }
    let empty = z.is_empty();
    after_removal(ctx, key, empty, if max { "zpopmax" } else { "zpopmin" });
    Ok(Some(out))
}

fn zpop_generic(ctx: &mut Ctx, args: &Args, max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = if args.len() == 3 {
        match parse_i64(args.get(2)) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return Err(CmdError::err("value is out of range, must be positive")),
        }
    } else {
        None
    };
    let popped = pop_from(ctx, args.key(1), max, count.unwrap_or(1))?.unwrap_or_default();
    if count.is_some() && ctx.proto() >= 3 {
        return Ok(Reply::Array(popped.into_iter().map(|(m, s)| pair(m, s)).collect()));
    }
    let mut flat = Vec::with_capacity(popped.len() * 2);
    for (m, s) in popped {
        flat.push(Reply::Bulk(m));
        flat.push(Reply::Double(s));
    }
    Ok(Reply::Array(flat))
}

/// ZPOPMIN key [count]
///
/// Removes and returns the `count` (default 1) lowest-scored members with their scores.
pub fn zpopmin(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zpop_generic(ctx, args, false)
}

/// ZPOPMAX key [count]
///
/// Removes and returns the `count` (default 1) highest-scored members with their scores.
pub fn zpopmax(ctx: &mut Ctx, args: &Args) -> CmdResult {
    zpop_generic(ctx, args, true)
}

/// The parsed tail of ZMPOP/BZMPOP: keys, direction and count.
struct MpopArgs {
    keys: Vec<Vec<u8>>,
    max: bool,
    count: usize,
}

fn parse_mpop(args: &Args, numkeys_idx: usize) -> Result<MpopArgs, CmdError> {
    let numkeys = match parse_i64(args.get(numkeys_idx)) {
        Some(n) if n >= 1 => n as usize,
        _ => return Err(CmdError::err("numkeys should be greater than 0")),
    };
    let where_idx = numkeys_idx.saturating_add(numkeys).saturating_add(1);
    if where_idx >= args.len() {
        return Err(CmdError::Syntax);
    }
    let max = if args.is(where_idx, "min") {
        false
    } else if args.is(where_idx, "max") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && args.is(j, "count") && j + 1 < args.len() {
            match parse_i64(args.get(j + 1)) {
                Some(n) if n >= 1 => count = Some(n as usize),
                _ => return Err(CmdError::err("count should be greater than 0")),
            }
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let keys = (numkeys_idx + 1..where_idx).map(|i| args.key(i).to_vec()).collect();
    Ok(MpopArgs { keys, max, count: count.unwrap_or(1) })
}

/// Pops from the first non-empty key: `[key, [[member, score], ...]]`, or None. `blocking`:
/// each key is looked up once more first (see `blocking_probe`).
fn mpop_first(ctx: &mut Ctx, p: &MpopArgs, blocking: bool) -> Result<Option<Reply>, CmdError> {
    for key in &p.keys {
        if blocking && !blocking_probe(ctx, key)? {
            continue;
        }
        if let Some(popped) = pop_from(ctx, key, p.max, p.count)? {
            if popped.is_empty() {
                continue;
            }
            // ZMPOP and BZMPOP propagate as ZPOPMIN/ZPOPMAX key <number popped>.
            if ctx.propagating() {
                let count = popped.len().to_string();
                ctx.propagate_as_parts(&[pop_verb(p.max), key, count.as_bytes()]);
            }
            let items = popped.into_iter().map(|(m, s)| pair(m, s)).collect();
            return Ok(Some(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Array(items)])));
        }
    }
    Ok(None)
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
///
/// Pops up to `count` members from the first non-empty zset among the keys; replies with its
/// name and the popped pairs, or a null array when all are empty.
pub fn zmpop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let p = parse_mpop(args, 1)?;
    Ok(mpop_first(ctx, &p, false)?.unwrap_or(Reply::NilArray))
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
///
/// ZMPOP that waits up to `timeout` seconds (0 = forever) for a zset to pop from.
pub fn bzmpop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    // Unlike BLMPOP, Redis reads the timeout only after numkeys, MIN/MAX and COUNT have passed:
    // `BZMPOP -1 0 k MIN` is "numkeys should be greater than 0", not "timeout is negative".
    let p = parse_mpop(args, 2)?;
    let deadline = ctx.parse_timeout(args.get(1))?;
    if let Some(r) = mpop_first(ctx, &p, true)? {
        return Ok(r);
    }
    ctx.block(p.keys, deadline, Reply::NilArray, "zset")
}

fn pop_verb(max: bool) -> &'static [u8] {
    if max {
        b"ZPOPMAX"
    } else {
        b"ZPOPMIN"
    }
}

/// The blocking pops' own write lookup of `key`, before the pop looks it up again: Redis's
/// blockingGenericZpopCommand does both, so a served key's access time is stamped twice.
/// Whether the key holds a zset (WRONGTYPE for another type).
fn blocking_probe(ctx: &mut Ctx, key: &[u8]) -> Result<bool, CmdError> {
    Ok(ctx.write::<ZSet>(key)?.is_some())
}

fn bzpop_generic(ctx: &mut Ctx, args: &Args, max: bool) -> CmdResult {
    let deadline = ctx.parse_timeout(args.get(args.len() - 1))?;
    let keys: Vec<Vec<u8>> = (1..args.len() - 1).map(|i| args.key(i).to_vec()).collect();
    for key in &keys {
        if !blocking_probe(ctx, key)? {
            continue;
        }
        if let Some(mut popped) = pop_from(ctx, key, max, 1)? {
            if let Some((m, s)) = popped.pop() {
                ctx.propagate_as_parts(&[pop_verb(max), key]);
                return Ok(Reply::Array(vec![Reply::Bulk(key.clone()), Reply::Bulk(m), Reply::Double(s)]));
            }
        }
    }
    ctx.block(keys, deadline, Reply::NilArray, "zset")
}

/// BZPOPMIN key [key ...] timeout
///
/// Pops the lowest-scored member of the first non-empty zset, waiting up to `timeout` seconds
/// (0 = forever); replies `[key, member, score]` or a null array on timeout.
pub fn bzpopmin(ctx: &mut Ctx, args: &Args) -> CmdResult {
    bzpop_generic(ctx, args, false)
}

/// BZPOPMAX key [key ...] timeout
///
/// Pops the highest-scored member of the first non-empty zset, waiting as BZPOPMIN does.
pub fn bzpopmax(ctx: &mut Ctx, args: &Args) -> CmdResult {
    bzpop_generic(ctx, args, true)
}

// ---------------------------------------------------------------------------------------------
// ZRANDMEMBER

/// ZRANDMEMBER key [count [WITHSCORES]]
///
/// A random member; with a positive count up to that many distinct members, with a negative
/// count exactly |count| members that may repeat; WITHSCORES adds scores.
pub fn zrandmember(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() == 2 {
        let Some(z) = ctx.read::<ZSet>(args.key(1))? else {
            return Ok(Reply::Nil);
        };
        let k = fastrand::usize(..z.len().max(1));
        return Ok(z.at(k).map_or(Reply::Nil, |(m, _)| Reply::Bulk(m)));
    }
    let l = args.i64(2)?;
    if l == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let withscores = match args.len() {
        3 => false,
        4 if args.is(3, "withscores") => true,
        _ => return Err(CmdError::Syntax),
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&l) {
        return Err(CmdError::err("value is out of range"));
    }
    let proto = ctx.proto();
    let cap = ctx.reply_cap();
    let Some(z) = ctx.read::<ZSet>(args.key(1))? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let len = z.len();
    let mut em = Emitter::new(withscores, proto);
    if l == 0 || len == 0 {
        return Ok(em.finish());
    }
    if l < 0 {
        for _ in 0..l.unsigned_abs() {
            if let Some((m, s)) = z.at(fastrand::usize(..len)) {
                em.push(&m, s);
            }
            // Past the client's hard output limit the reply only closes it: stop building.
            if cap.is_some_and(|cap| em.body.len() >= cap) {
                break;
            }
        }
        return Ok(em.finish());
    }
    let count = l as usize;
    if count >= len {
        // Redis answers the whole sorted set from the highest rank down.
        z.walk(0, len - 1, true, &mut |m, s| {
            em.push(m, s);
            true
        });
        return Ok(em.finish());
    }
    // Distinct picks: a partial Fisher-Yates over rank indexes.
    let mut idx: Vec<usize> = (0..len).collect();
    for i in 0..count {
        let j = fastrand::usize(i..len);
        idx.swap(i, j);
        if let Some((m, s)) = z.at(idx[i]) {
            em.push(&m, s);
        }
    }
    Ok(em.finish())
}

// ---------------------------------------------------------------------------------------------
// ZUNION / ZINTER / ZDIFF

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(a: Aggregate, target: &mut f64, v: f64) {
    match a {
        Aggregate::Sum => {
            *target += v;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if v < *target {
                *target = v;
            }
        }
        Aggregate::Max => {
            if v > *target {
                *target = v;
            }
        }
    }
}

/// One input of the set algebra, read into memory (plain sets count with score 1).
struct Input {
    pairs: Vec<(Vec<u8>, f64)>,
    weight: f64,
}

impl Input {
    fn lookup(&self) -> std::collections::HashMap<&[u8], f64, foldhash::fast::RandomState> {
        self.pairs.iter().map(|(m, s)| (m.as_slice(), *s)).collect()
    }
}

struct AlgebraResult {
    pairs: Vec<(Vec<u8>, f64)>,
    withscores: bool,
}

/// Parses and computes ZUNION/ZINTER/ZDIFF[STORE]/ZINTERCARD; `numkeys_idx` locates numkeys,
/// `dst` marks the STORE forms, `card_limit` ZINTERCARD (Some(limit) filled in by parsing).
fn algebra(
    ctx: &mut Ctx,
    args: &Args,
    numkeys_idx: usize,
    op: SetOp,
    store: bool,
    card: bool,
) -> Result<(AlgebraResult, usize), CmdError> {
    let name = args.str(0).to_lowercase();
    let numkeys = args.i64(numkeys_idx)?;
    if numkeys < 1 {
        return Err(CmdError::err(format!("at least 1 input key is needed for '{name}' command")));
    }
    if numkeys as u64 > (args.len() - numkeys_idx - 1) as u64 {
        return Err(CmdError::Syntax);
    }
    let numkeys = numkeys as usize;
    let mut inputs = Vec::with_capacity(numkeys);
    for i in 0..numkeys {
        let key = args.key(numkeys_idx + 1 + i);
        // Counted read lookups for the STORE forms too (hits, misses and `keymiss`, as 7.0 does).
        let value = ctx.lookup_read(key);
        let pairs = match value {
            None => Vec::new(),
            Some(Value::ZSet(z)) => z.to_vec(),
            // Plain sets are valid inputs: every member scores 1.
            Some(Value::Set(s)) => set_members(s),
            Some(_) => return Err(CmdError::WrongType),
        };
        inputs.push(Input { pairs, weight: 1.0 });
    }
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = numkeys_idx + 1 + numkeys;
    while j < args.len() {
        let remaining = args.len() - j;
        if op != SetOp::Diff && !card && remaining > numkeys && args.is(j, "weights") {
            j += 1;
            for input in inputs.iter_mut() {
                input.weight = parse_score(args.get(j)).ok_or_else(|| CmdError::err("weight value is not a float"))?;
                j += 1;
            }
        } else if op != SetOp::Diff && !card && remaining >= 2 && args.is(j, "aggregate") {
            agg = if args.is(j + 1, "sum") {
                Aggregate::Sum
            } else if args.is(j + 1, "min") {
                Aggregate::Min
            } else if args.is(j + 1, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if !store && !card && args.is(j, "withscores") {
            withscores = true;
            j += 1;
        } else if card && remaining >= 2 && args.is(j, "limit") {
            limit = match parse_i64(args.get(j + 1)) {
                Some(n) if n >= 0 => n as usize,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let weighted = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() {
            0.0
        } else {
            v
        }
    };
    let mut out: Vec<(Vec<u8>, f64)> = Vec::new();
    match op {
        SetOp::Inter => {
            // Smallest input drives the walk, as Redis does; the others are probed.
            inputs.sort_by_key(|i| i.pairs.len());
            let maps: Vec<_> = inputs[1..].iter().map(|i| i.lookup()).collect();
            'outer: for (m, s) in &inputs[0].pairs {
                let mut score = weighted(*s, inputs[0].weight);
                for (k, map) in maps.iter().enumerate() {
                    let Some(&o) = map.get(m.as_slice()) else {
                        continue 'outer;
                    };
                    // Only the first input's weighted score has NaN (0 * inf) replaced by 0, as in
                    // Redis; a NaN from a later input turns a SUM into 0 and leaves MIN/MAX as is.
                    aggregate(agg, &mut score, o * inputs[k + 1].weight);
                }
                out.push((m.clone(), score));
                if card && limit > 0 && out.len() >= limit {
                    break;
                }
            }
        }
        SetOp::Union => {
            inputs.sort_by_key(|i| i.pairs.len());
            let mut acc: std::collections::HashMap<Vec<u8>, f64, foldhash::fast::RandomState> = Default::default();
            let mut order = Vec::new();
            for input in &inputs {
                for (m, s) in &input.pairs {
                    let v = weighted(*s, input.weight);
                    match acc.get_mut(m) {
                        Some(t) => aggregate(agg, t, v),
                        None => {
                            acc.insert(m.clone(), v);
                            order.push(m.clone());
                        }
                    }
                }
            }
            out = order
                .into_iter()
                .map(|m| {
                    let s = acc.get(&m).copied().unwrap_or(0.0);
                    (m, s)
                })
                .collect();
        }
        SetOp::Diff => {
            let maps: Vec<_> = inputs[1..].iter().map(|i| i.lookup()).collect();
            for (m, s) in &inputs[0].pairs {
                if !maps.iter().any(|map| map.contains_key(m.as_slice())) {
                    out.push((m.clone(), *s));
                }
            }
        }
    }
    let n = out.len();
    Ok((AlgebraResult { pairs: out, withscores }, n))
}

/// Members of a plain set as algebra input (score 1 each).
fn set_members(s: &crate::types::Set) -> Vec<(Vec<u8>, f64)> {
    let mut out = Vec::with_capacity(s.len());
    s.for_each(|e| out.push((e.to_vec(), 1.0)));
    out
}

fn algebra_reply(ctx: &mut Ctx, args: &Args, op: SetOp) -> CmdResult {
    let (mut r, _) = algebra(ctx, args, 1, op, false, false)?;
    r.pairs.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.0.cmp(&b.0)));
    let mut em = Emitter::new(r.withscores, ctx.proto());
    for (m, s) in &r.pairs {
        em.push(m, *s);
    }
    Ok(em.finish())
}

fn algebra_store(ctx: &mut Ctx, args: &Args, op: SetOp) -> CmdResult {
    let (r, _) = algebra(ctx, args, 2, op, true, false)?;
    let dst = args.key(1).to_vec();
    let event = match op {
        SetOp::Union => "zunionstore",
        SetOp::Inter => "zinterstore",
        SetOp::Diff => "zdiffstore",
    };
    store_result(ctx, &dst, r.pairs, event)
}

/// ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
///
/// The union of the inputs, each score multiplied by its weight and combined by the aggregate.
pub fn zunion(ctx: &mut Ctx, args: &Args) -> CmdResult {
    algebra_reply(ctx, args, SetOp::Union)
}

/// ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
///
/// The members present in every input, scores weighted and aggregated.
pub fn zinter(ctx: &mut Ctx, args: &Args) -> CmdResult {
    algebra_reply(ctx, args, SetOp::Inter)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
///
/// The members of the first input found in none of the others, with their scores.
pub fn zdiff(ctx: &mut Ctx, args: &Args) -> CmdResult {
    algebra_reply(ctx, args, SetOp::Diff)
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX]
///
/// ZUNION stored in `destination` (deleted when empty); replies with its size.
pub fn zunionstore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    algebra_store(ctx, args, SetOp::Union)
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX]
///
/// ZINTER stored in `destination` (deleted when empty); replies with its size.
pub fn zinterstore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    algebra_store(ctx, args, SetOp::Inter)
}

/// ZDIFFSTORE destination numkeys key [key ...]
///
/// ZDIFF stored in `destination` (deleted when empty); replies with its size.
pub fn zdiffstore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    algebra_store(ctx, args, SetOp::Diff)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
///
/// The size of the intersection, counting stopped at `limit` when it is positive.
pub fn zintercard(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (_, n) = algebra(ctx, args, 1, SetOp::Inter, false, true)?;
    Ok(Reply::Int(n as i64))
}

// ---------------------------------------------------------------------------------------------
// ZSCAN

use super::scan;

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
///
/// One step of a cursor walk over the members; replies with the next cursor (0 when done) and
/// member, score pairs (scores as strings in both protocols, as Redis sends them).
pub fn zscan(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let cursor = scan::cursor_arg(args, 2)?;
    let zset = ctx.read::<ZSet>(args.key(1))?;
    scan::collection(zset, cursor, args)
}

impl scan::Scan for &ZSet {
    const ITEMS: i64 = 2;
    fn step(&mut self, cursor: u64, visit: &mut dyn FnMut(scan::Entry<'_>)) -> u64 {
        // Scores are written as the encoding holds them (a listpack keeps a short text form).
        let packed = self.encoding_name() == "listpack";
        self.scan(cursor, &mut |m, s| {
            let text = if packed { packed_score_text(s) } else { score_text(s) };
            visit(scan::Entry { name: m, value: Some(&text), type_name: None })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::commands::harness::Harness;

    fn harness(max_entries: usize) -> Harness {
        Harness::with_config(crate::config::Config { zset_max_listpack_entries: max_entries, ..Default::default() })
    }

    #[test]
    fn replies_match_redis_bytes() {
        let mut h = harness(128);
        h.run_line(2, "zadd z 1 a 2 b 1e-7 c inf d -inf e -0 f");
        assert_eq!(
            h.run_line(3, "zrange z 0 1 withscores"),
            b"*2\r\n*2\r\n$1\r\ne\r\n,-inf\r\n*2\r\n$1\r\nf\r\n,0\r\n".to_vec()
        );
        assert_eq!(h.run_line(2, "zscore z c"), b"$22\r\n9.9999999999999995e-08\r\n".to_vec());
        assert_eq!(h.run_line(3, "zpopmin z"), b"*2\r\n$1\r\ne\r\n,-inf\r\n".to_vec());
        assert_eq!(h.run_line(3, "zpopmin z 1"), b"*1\r\n*2\r\n$1\r\nf\r\n,0\r\n".to_vec());
        assert_eq!(h.run_line(2, "zadd z incr -inf d"), b"-ERR resulting score is not a number (NaN)\r\n".to_vec());
        assert_eq!(
            h.run_line(2, "zadd z gt nx 1 a"),
            b"-ERR GT, LT, and/or NX options at the same time are not compatible\r\n".to_vec()
        );
        assert_eq!(
            h.run_line(2, "zrange z [a [b bylex withscores"),
            b"-ERR syntax error, WITHSCORES not supported in combination with BYLEX\r\n".to_vec()
        );
        assert_eq!(h.run_line(2, "zrange z 0 1 limit 0 -1"), b"*2\r\n$1\r\nc\r\n$1\r\na\r\n".to_vec());
        assert_eq!(h.run_line(2, "zmpop 1 nokey min"), b"*-1\r\n".to_vec());
        assert_eq!(h.run_line(2, "zcount z ( 5"), b":3\r\n".to_vec());
    }

    #[test]
    fn encodings_follow_redis() {
        let mut h = harness(2);
        h.run_line(2, "zadd z 1 a 2 b");
        assert_eq!(h.encoding("z"), Some("listpack"));
        h.run_line(2, "zadd z 3 c");
        assert_eq!(h.encoding("z"), Some("skiplist"));
        h.run_line(2, "zrangestore d z 0 1");
        assert_eq!(h.encoding("d"), Some("listpack"));
        h.run_line(2, "zunionstore u 1 z");
        assert_eq!(h.encoding("u"), Some("skiplist"));
        h.run_line(2, "zremrangebyrank z 0 0");
        assert_eq!(h.encoding("z"), Some("skiplist"));
        assert_eq!(h.run_line(2, "zremrangebyrank z 0 -1"), b":2\r\n".to_vec());
        assert_eq!(h.encoding("z"), None);
    }

    #[test]
    fn score_text_matches_g17() {
        for s in [0.0, -0.0, 1.0, -3.0, 1e16, 1e17, 1.5, 1e-7, f64::INFINITY, f64::NEG_INFINITY, 123456789012345.0] {
            assert_eq!(String::from_utf8(score_text(s)).unwrap(), fmt_g17(s), "{s}");
        }
    }

    #[test]
    fn strtod_like_c() {
        assert_eq!(parse_score(b"0x10"), Some(16.0));
        assert_eq!(parse_score(b"0x1.8p1"), Some(3.0));
        assert_eq!(parse_score(b"1e400"), None);
        assert_eq!(parse_score(b"1e-400"), None);
        assert_eq!(parse_score(b"0e-400"), Some(0.0));
        assert_eq!(parse_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"nan"), None);
        assert_eq!(parse_score(b" 1"), None);
        assert_eq!(parse_score(b""), None);
        assert_eq!(parse_score(b".5"), Some(0.5));
        assert_eq!(parse_score_bound(b"("), Some((0.0, true)));
        assert_eq!(parse_score_bound(b" 1"), Some((1.0, false)));
        assert_eq!(parse_score_bound(b"1e400"), Some((f64::INFINITY, false)));
        assert_eq!(parse_score_bound(b"(abc"), None);
    }

    #[test]
    fn rank_clamping() {
        assert_eq!(crate::util::num::clamp_index_range(0, -1, 3), Some((0, 2)));
        assert_eq!(crate::util::num::clamp_index_range(-10, 1, 3), Some((0, 1)));
        assert_eq!(crate::util::num::clamp_index_range(2, 1, 3), None);
        assert_eq!(crate::util::num::clamp_index_range(3, 5, 3), None);
        assert_eq!(crate::util::num::clamp_index_range(1, 100, 3), Some((1, 2)));
    }

    #[test]
    fn lex_bounds() {
        assert_eq!(parse_lex_bound(b"+"), Some(LexBound::Max));
        assert_eq!(parse_lex_bound(b"+a"), None);
        assert_eq!(parse_lex_bound(b"[a"), Some(LexBound::Incl(b"a".to_vec())));
        assert_eq!(parse_lex_bound(b"a"), None);
        assert_eq!(parse_lex_bound(b""), None);
    }
}
