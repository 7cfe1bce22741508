//! Stream commands: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD, XSETID and the consumer
//! group family (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO). Argument parsing
//! and error precedence follow Redis 7.0's t_stream.c; the data structure lives in
//! `types::stream`.
//!
//! Blocking: XREAD/XREADGROUP with BLOCK park through `ctx.block` (wake type "stream") and are
//! re-run on wake. Because `$` means "the last ID when I first asked", the block request carries a
//! rewritten argument list (`rerun_argv`) where every `$` is replaced by the ID it stood for, and
//! a COUNT of 1000 is added when none was given (Redis serves a woken reader at most that many).

use bytes::Bytes;

use super::{acl, flags::*, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::pubsub::ev;
use crate::resp::reply::{Cursor, Deferred, Encode, Piece, PIECE_BYTES};
use crate::resp::writer::{bulk, int_line};
use crate::resp::Reply;
use crate::types::stream::{
    AppendError, EntryRef, Group, Nack, Stream, StreamId, StreamSnapshot, INVALID_ENTRIES_READ,
};
use crate::types::Value;
use crate::util::c_str;

/// Entries served to a woken XREAD without COUNT (Redis's XREAD_BLOCKED_DEFAULT_COUNT).
const BLOCKED_DEFAULT_COUNT: &str = "1000";

const S: u64 = acl::STREAM;

static XGROUP_SUBCOMMANDS: &[CommandSpec] = &[
    spec("createconsumer", 5, WRITE | DENYOOM, keys(2, 2, 1), S, xgroup_createconsumer),
    spec("destroy", 4, WRITE, keys(2, 2, 1), S, xgroup_destroy),
    spec("delconsumer", 5, WRITE, keys(2, 2, 1), S, xgroup_delconsumer),
    spec("create", -5, WRITE | DENYOOM, keys(2, 2, 1), S, xgroup_create),
    spec("help", 2, LOADING | STALE, NO_KEYS, S, xgroup_help),
    spec("setid", -5, WRITE, keys(2, 2, 1), S, xgroup_setid),
];

static XINFO_SUBCOMMANDS: &[CommandSpec] = &[
    spec("stream", -3, READONLY, keys(2, 2, 1), S, xinfo_stream),
    spec("help", 2, LOADING | STALE, NO_KEYS, S, xinfo_help),
    spec("groups", 3, READONLY, keys(2, 2, 1), S, xinfo_groups),
    spec("consumers", 4, READONLY, keys(2, 2, 1), S, xinfo_consumers),
];

pub static COMMANDS: &[CommandSpec] = &[
    spec("xadd", -5, WRITE | DENYOOM | FAST, keys(1, 1, 1), S, xadd),
    spec("xlen", 2, READONLY | FAST, keys(1, 1, 1), S, xlen),
    spec("xrange", -4, READONLY, keys(1, 1, 1), S, xrange),
    spec("xrevrange", -4, READONLY, keys(1, 1, 1), S, xrevrange),
    spec("xdel", -3, WRITE | FAST, keys(1, 1, 1), S, xdel),
    spec("xtrim", -4, WRITE, keys(1, 1, 1), S, xtrim),
    spec("xread", -4, READONLY | BLOCKING | MOVABLEKEYS, NO_KEYS, S, xread),
    spec("xreadgroup", -7, WRITE | BLOCKING | MOVABLEKEYS, NO_KEYS, S, xreadgroup),
    spec("xsetid", -3, WRITE | DENYOOM | FAST, keys(1, 1, 1), S, xsetid),
    spec("xack", -4, WRITE | FAST, keys(1, 1, 1), S, xack),
    spec("xpending", -3, READONLY, keys(1, 1, 1), S, xpending),
    spec("xclaim", -6, WRITE | FAST, keys(1, 1, 1), S, xclaim),
    spec("xautoclaim", -6, WRITE | FAST, keys(1, 1, 1), S, xautoclaim),
    super::container("xgroup", -2, 0, XGROUP_SUBCOMMANDS),
    super::container("xinfo", -2, 0, XINFO_SUBCOMMANDS),
];

// ---------------------------------------------------------------------------------------------
// Parsing helpers

fn invalid_id() -> CmdError {
    CmdError::err("Invalid stream ID specified as stream command argument")
}

/// C's `string2ull`: Redis's strict integer rules first, then `strtoull` (leading spaces, a sign,
/// digits to the end, no overflow).
fn string2ull(s: &[u8]) -> Option<u64> {
    if let Some(v) = crate::util::num::parse_i64(s) {
        return if v < 0 { None } else { Some(v as u64) };
    }
    let mut i = 0;
    while i < s.len() && (s[i] == b' ' || (9..=13).contains(&s[i])) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add((s[i] - b'0') as u64)?;
        i += 1;
    }
    if i == start || i != s.len() {
        return None;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// Parses `ms[-seq]`, `-`, `+` (unless `strict`), and `ms-*` when `auto_seq` is allowed.
/// Returns the ID and whether the sequence was given (false for `ms-*`).
fn parse_id(arg: &[u8], strict: bool, missing_seq: u64, auto_seq: bool) -> Result<(StreamId, bool), CmdError> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    // The C code works on a NUL-terminated copy.
    let buf = c_str(arg);
    if strict && (buf == b"-" || buf == b"+") {
        return Err(invalid_id());
    }
    if buf == b"-" {
        return Ok((StreamId::MIN, true));
    }
    if buf == b"+" {
        return Ok((StreamId::MAX, true));
    }
    match memchr::memchr(b'-', buf) {
        None => {
            let ms = string2ull(buf).ok_or_else(invalid_id)?;
            Ok((StreamId::new(ms, missing_seq), true))
        }
        Some(dash) => {
            let ms = string2ull(&buf[..dash]).ok_or_else(invalid_id)?;
            let rest = &buf[dash + 1..];
            if auto_seq && rest == b"*" {
                return Ok((StreamId::new(ms, 0), false));
            }
            let seq = string2ull(rest).ok_or_else(invalid_id)?;
            Ok((StreamId::new(ms, seq), true))
        }
    }
}

fn parse_strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_id(arg, true, 0, false).map(|(id, _)| id)
}

/// A range bound: `(id` is exclusive. Returns (id, exclusive).
fn parse_interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        parse_id(&arg[1..], true, missing_seq, false).map(|(id, _)| (id, true))
    } else {
        parse_id(arg, false, missing_seq, false).map(|(id, _)| (id, false))
    }
}

fn range_start(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = parse_interval_id(arg, 0)?;
    if ex {
        id.incr().ok_or_else(|| CmdError::err("invalid start ID for the interval"))
    } else {
        Ok(id)
    }
}

fn range_end(arg: &[u8]) -> Result<StreamId, CmdError> {
    let (id, ex) = parse_interval_id(arg, u64::MAX)?;
    if ex {
        id.decr().ok_or_else(|| CmdError::err("invalid end ID for the interval"))
    } else {
        Ok(id)
    }
}

fn ll(arg: &[u8]) -> Result<i64, CmdError> {
    crate::util::num::parse_i64(arg).ok_or(CmdError::NotInteger)
}

fn ll_msg(arg: &[u8], msg: &str) -> Result<i64, CmdError> {
    crate::util::num::parse_i64(arg).ok_or_else(|| CmdError::err(msg))
}

fn eq(arg: &[u8], word: &str) -> bool {
    crate::spec::c_str_eq(arg, word)
}

fn nogroup_key_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::echo(&[b"NOGROUP No such key '", key, b"' or consumer group '", group, b"'"])
}

fn nogroup_for_key(group: &[u8], key: &[u8]) -> CmdError {
    CmdError::echo(&[b"NOGROUP No such consumer group '", group, b"' for key name '", key, b"'"])
}

fn subcommand_syntax(args: &Args) -> CmdError {
    CmdError::echo(&[
        b"ERR unknown subcommand or wrong number of arguments for '",
        crate::util::c_str_prefix(args.get(1), 128),
        b"'. Try ",
        &args.get(0).to_ascii_uppercase(),
        b" HELP.",
    ])
}

// ---------------------------------------------------------------------------------------------
// Lookups

/// XREAD's lookup of `key`: a counted read (hits, misses, `keymiss`), except when a blocked
/// XREAD is re-run to serve it: Redis serves it without looking its keys up again, stamping
/// the key's access time once when it serves it (`again`: the re-run's second lookup, which
/// does not).
fn xread_lookup<'a>(ctx: &'a mut Ctx, key: &[u8], again: bool) -> Result<Option<&'a Stream>, CmdError> {
    if !ctx.woken() {
        return ctx.read::<Stream>(key);
    }
    let now = ctx.now_ms();
    let db = ctx.db();
    let found = if again { db.peek(key, now) } else { db.get(key, now) };
    match found {
        None => Ok(None),
        Some(Value::Stream(s)) => Ok(Some(s)),
        Some(_) => Err(CmdError::WrongType),
    }
}

/// The stream under `key` for a command that found it with a counted read lookup and now
/// modifies it (XREADGROUP, XACK, XCLAIM: Redis looks these up for reading). That lookup
/// stamped the access time; this one does not (Redis modifies the object it found).
fn stream_mut<'a>(ctx: &'a mut Ctx, key: &[u8]) -> Option<&'a mut Stream> {
    ctx.again::<Stream>(key).ok().flatten()
}

// ---------------------------------------------------------------------------------------------
// Reply encoding (entries are arrays in both protocols)

fn write_id(out: &mut Vec<u8>, id: StreamId) {
    let mut b = itoa::Buffer::new();
    let ms = b.format(id.ms).len();
    let mut c = itoa::Buffer::new();
    let seq = c.format(id.seq);
    int_line(out, b'$', (ms + 1 + seq.len()) as i64);
    id.write(out);
    out.extend_from_slice(b"\r\n");
}

fn write_entry(out: &mut Vec<u8>, e: &EntryRef) {
    out.extend_from_slice(b"*2\r\n");
    write_id(out, e.id);
    int_line(out, b'*', 2 * e.num_fields() as i64);
    let mut scratch = Vec::new();
    e.for_each_pair(|f, v| {
        for x in [f, v] {
            match x {
                crate::types::stream::Elem::Bytes(b) => bulk(out, b),
                crate::types::stream::Elem::Int(_) => {
                    scratch.clear();
                    x.push_to(&mut scratch);
                    bulk(out, &scratch);
                }
            }
        }
    });
}

fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

fn null_array(proto: u8) -> &'static [u8] {
    if proto >= 3 {
        b"_\r\n"
    } else {
        b"*-1\r\n"
    }
}

fn null_bulk(proto: u8) -> &'static [u8] {
    if proto >= 3 {
        b"_\r\n"
    } else {
        b"$-1\r\n"
    }
}

// ---------------------------------------------------------------------------------------------
// XADD / XTRIM

#[derive(Default)]
struct TrimArgs {
    maxlen: Option<u64>,
    minid: Option<StreamId>,
    approx: bool,
    limit: u64,
    nomkstream: bool,
    id: Option<(StreamId, bool)>,
    /// Index of the first field (XADD).
    next: usize,
    /// Index of the MAXLEN/MINID threshold (an approximate one is propagated as exact).
    threshold_at: usize,
}

fn both_strategies() -> CmdError {
    CmdError::err("syntax error, MAXLEN and MINID options at the same time are not compatible")
}

/// Redis's streamParseAddOrTrimArgsOrReply; `node_max_entries` is stream-node-max-entries.
fn parse_add_or_trim(args: &Args, xadd: bool, node_max_entries: i64, loading: bool) -> Result<TrimArgs, CmdError> {
    let mut t = TrimArgs::default();
    let argc = args.len();
    let mut limit_given = false;
    let mut limit: i64 = -1;
    let mut i = 2;
    while i < argc {
        let more = argc - 1 - i;
        let opt = args.get(i);
        if xadd && c_str(opt) == b"*" {
            break;
        } else if (eq(opt, "maxlen") || eq(opt, "minid")) && more > 0 {
            if t.maxlen.is_some() || t.minid.is_some() {
                return Err(both_strategies());
            }
            // An optional `~` (approximate) or `=` (exact) before the threshold.
            let next = args.get(i + 1);
            let next = c_str(next);
            t.approx = next == b"~" && more >= 2;
            if (next == b"~" || next == b"=") && more >= 2 {
                i += 1;
            }
            t.threshold_at = i + 1;
            if eq(opt, "maxlen") {
                let v = ll(args.get(i + 1))?;
                if v < 0 {
                    return Err(CmdError::err("The MAXLEN argument must be >= 0."));
                }
                t.maxlen = Some(v as u64);
                t.minid = None;
            } else {
                t.minid = Some(parse_strict_id(args.get(i + 1))?);
                t.maxlen = None;
            }
            i += 1;
        } else if eq(opt, "limit") && more > 0 {
            let v = ll(args.get(i + 1))?;
            if v < 0 {
                return Err(CmdError::err("The LIMIT argument must be >= 0."));
            }
            limit = v;
            limit_given = true;
            i += 1;
        } else if xadd && eq(opt, "nomkstream") {
            t.nomkstream = true;
        } else if xadd {
            t.id = Some(parse_id(opt, true, 0, true)?);
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    t.next = i + 1;
    let strategy = t.maxlen.is_some() || t.minid.is_some();
    // Redis tests the LIMIT's value here (a LIMIT of 0 passes), its presence below.
    if limit > 0 && !strategy {
        return Err(CmdError::err("syntax error, LIMIT cannot be used without specifying a trimming strategy"));
    }
    if !xadd && !strategy {
        return Err(CmdError::err("syntax error, XTRIM must be called with a trimming strategy"));
    }
    // Redis's own propagation turns `~` into `=` and keeps LIMIT: what the AOF holds loads.
    if limit_given && !loading {
        if !t.approx {
            return Err(CmdError::err("syntax error, LIMIT cannot be used without the special ~ option"));
        }
        t.limit = limit as u64;
    } else if limit_given {
        t.limit = 0;
    } else if t.approx {
        // About 100 nodes' worth of work, capped both ways: stream-node-max-entries may be 0.
        t.limit = match node_max_entries.saturating_mul(100) {
            l if l <= 0 => 10_000,
            l => l.min(1_000_000) as u64,
        };
    } else {
        t.limit = 0;
    }
    Ok(t)
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value [field value ...]
///
/// Appends an entry (creating the stream unless NOMKSTREAM), with an automatic ID (`*`), a
/// partial one (`ms-*`) or an explicit one that must exceed the last ID; then trims as asked.
/// Replies with the new entry's ID (nil with NOMKSTREAM on a missing key).
pub fn xadd(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let t = parse_add_or_trim(args, true, ctx.config().stream_node_max_entries, ctx.loading())?;
    let field_pos = t.next;
    let nfields = args.len().saturating_sub(field_pos);
    if nfields < 2 || nfields % 2 == 1 {
        return Err(CmdError::WrongArity("xadd".into()));
    }
    if let Some((id, true)) = t.id {
        if id.is_zero() {
            return Err(CmdError::err("The ID specified in XADD must be greater than 0-0"));
        }
    }
    let key = args.key(1);
    let now = ctx.now_ms();
    let propagating = ctx.propagating();
    let node_max_bytes = ctx.config().stream_node_max_bytes;
    let node_max_entries = ctx.config().stream_node_max_entries.max(0) as usize;
    if t.nomkstream && ctx.write::<Stream>(key)?.is_none() {
        return Ok(Reply::Nil);
    }
    // NOMKSTREAM looked the key up already: not a second access stamp.
    let s = if t.nomkstream { ctx.again_or_create::<Stream>(key)? } else { ctx.write_or_create::<Stream>(key)? };
    if s.last_id == StreamId::MAX {
        return Err(CmdError::err("The stream has exhausted the last possible ID, unable to add more items"));
    }
    let too_small = || CmdError::err("The ID specified in XADD is equal or smaller than the target stream top item");
    let id = match t.id {
        None => s.next_auto_id(now.max(0) as u64).ok_or_else(too_small)?,
        Some((id, true)) => id,
        Some((id, false)) => {
            if s.last_id.ms == id.ms {
                // Redis answers a sequence overflow here with the "too large" text.
                s.last_id
                    .incr()
                    .filter(|n| n.ms == id.ms)
                    .ok_or_else(|| CmdError::err("Elements are too large to be stored"))?
            } else {
                id
            }
        }
    };
    let pairs: Vec<&[u8]> = args.argv[field_pos..].iter().map(|b| &b[..]).collect();
    match s.append(id, &pairs, node_max_bytes, node_max_entries) {
        Ok(()) => {}
        Err(AppendError::IdTooSmall) => return Err(too_small()),
        Err(AppendError::TooLarge) => return Err(CmdError::err("Elements are too large to be stored")),
    }
    let trimmed =
        if t.maxlen.is_some() || t.minid.is_some() { s.trim(t.maxlen, t.minid, t.approx, t.limit) } else { 0 };
    // Propagated with the ID actually given and, after an approximate trim, the exact threshold
    // it reached, so loading the AOF rebuilds the same stream.
    if propagating {
        let mut argv: Vec<bytes::Bytes> = args.argv.clone();
        if !matches!(t.id, Some((_, true))) {
            argv[field_pos - 1] = bytes::Bytes::from(id.to_bytes());
        }
        if t.approx {
            exact_threshold(&mut argv, &t, s);
        }
        ctx.propagate_as(argv);
    }
    ctx.notify(ev::STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(ev::STREAM, "xtrim", key);
    }
    ctx.modified(key, 1);
    ctx.signal_ready(key);
    Ok(id_reply(id))
}

/// Rewrites `~ threshold` as `= <what the trim reached>`: the length for MAXLEN; for MINID the
/// first ID still stored, a deleted entry left in the first block included (Redis's
/// streamRewriteTrimArgument reads the edge ID without skipping tombstones).
fn exact_threshold(argv: &mut [bytes::Bytes], t: &TrimArgs, s: &Stream) {
    argv[t.threshold_at - 1] = bytes::Bytes::from_static(b"=");
    argv[t.threshold_at] = if t.maxlen.is_some() {
        bytes::Bytes::from(s.len().to_string())
    } else {
        let mut first = None;
        for block in s.blocks() {
            block.for_each_entry(|e, _, _| {
                first.get_or_insert(e.id);
            });
            if first.is_some() {
                break;
            }
        }
        bytes::Bytes::from(first.unwrap_or(StreamId::MAX).to_bytes())
    };
}

/// XCLAIM and XAUTOCLAIM propagate as one XCLAIM per entry claimed (or dropped because the
/// entry is gone, under its old owner), in the form XREADGROUP uses, not as typed.
fn propagate_claims(
    ctx: &mut Ctx,
    key: &[u8],
    group: &[u8],
    last: StreamId,
    claims: Vec<(Vec<u8>, StreamId, i64, u64)>,
) {
    let last = last.to_bytes();
    for (owner, id, time, count) in claims {
        let (id, time, count) = (id.to_bytes(), time.to_string(), count.to_string());
        ctx.also_propagate(&[
            b"XCLAIM",
            key,
            group,
            &owner,
            b"0",
            &id,
            b"TIME",
            time.as_bytes(),
            b"RETRYCOUNT",
            count.as_bytes(),
            b"FORCE",
            b"JUSTID",
            b"LASTID",
            &last,
        ]);
    }
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
///
/// Evicts the oldest entries down to a length or up to an ID; with `~` only whole blocks go
/// (at most LIMIT entries). Replies with the number of entries removed; 0 on a missing key.
pub fn xtrim(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let t = parse_add_or_trim(args, false, ctx.config().stream_node_max_entries, ctx.loading())?;
    if ctx.write::<Stream>(key)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let s = ctx.again::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    let n = s.trim(t.maxlen, t.minid, t.approx, t.limit);
    let exact = t.approx.then(|| {
        let mut argv: Vec<bytes::Bytes> = args.argv.clone();
        exact_threshold(&mut argv, &t, s);
        argv
    });
    if let Some(argv) = exact {
        ctx.propagate_as(argv);
    }
    if n > 0 {
        ctx.notify(ev::STREAM, "xtrim", key);
        ctx.modified(key, n);
    }
    Ok(Reply::Int(n as i64))
}

/// XLEN key
///
/// Replies with the number of entries in the stream (0 when the key is missing).
pub fn xlen(ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.read::<Stream>(args.key(1))?.map_or(0, |s| s.len() as i64)))
}

fn range_generic(ctx: &mut Ctx, args: &Args, rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (args.get(3), args.get(2)) } else { (args.get(2), args.get(3)) };
    let start = range_start(start_arg)?;
    let end = range_end(end_arg)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if args.is(j, "count") && j + 1 < args.len() {
            count = ll(args.get(j + 1))?.max(0);
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let Some(s) = ctx.read::<Stream>(args.key(1))? else {
        return Ok(Reply::Array(Vec::new()));
    };
    if count == 0 {
        return Ok(Reply::NilArray);
    }
    // A big range is encoded off the executor from the blocks as they are now (shared, see
    // `Stream::snapshot_range`), so other clients do not wait while it is.
    if s.len() as usize >= super::DEFER_MIN_ELEMENTS && (count < 0 || count as usize >= super::DEFER_MIN_ELEMENTS) {
        let snap = s.snapshot_range(start, end);
        return Ok(Reply::Deferred(Deferred::new(StreamRange { snap, start, end, rev, count, len: s.len() })));
    }
    let mut body = Vec::new();
    let mut n = 0i64;
    s.range(start, end, rev, |e| {
        write_entry(&mut body, &e);
        n += 1;
        count < 0 || n < count
    });
    let mut out = Vec::with_capacity(body.len() + 16);
    int_line(&mut out, b'*', n);
    out.extend_from_slice(&body);
    Ok(Reply::Raw(out))
}

/// A big XRANGE/XREVRANGE: the blocks of its range, shared with the stream, encoded wherever
/// the reply is written by the same steps as `range_generic`.
struct StreamRange {
    snap: StreamSnapshot,
    start: StreamId,
    end: StreamId,
    rev: bool,
    /// COUNT, negative for none.
    count: i64,
    /// The stream's length when taken: the most entries the reply holds.
    len: u64,
}

impl Encode for StreamRange {
    fn encode(&self, _proto: u8, out: &mut Vec<u8>) {
        // Counted first, so the entries go straight into `out` (no second copy of the reply).
        let more = |n: i64| self.count < 0 || n < self.count;
        let mut n = 0i64;
        self.snap.range(self.start, self.end, self.rev, |_| {
            n += 1;
            more(n)
        });
        int_line(out, b'*', n);
        let mut written = 0i64;
        self.snap.range(self.start, self.end, self.rev, |e| {
            write_entry(out, &e);
            written += 1;
            more(written)
        });
    }

    fn size_hint(&self) -> usize {
        16 + self.max_entries() * 64
    }

    fn streams(&self) -> bool {
        true
    }

    /// The cursor holds the entries still to send and the ID the next piece walks from.
    fn encode_piece(&self, _proto: u8, cur: &mut Cursor, out: &mut Vec<u8>) -> Piece {
        let base = out.len();
        let (mut start, mut end) = (self.start, self.end);
        if !cur.started {
            cur.started = true;
            let mut n = 0i64;
            self.snap.range(self.start, self.end, self.rev, |_| {
                n += 1;
                self.count < 0 || n < self.count
            });
            int_line(out, b'*', n);
            cur.a = n as usize;
        } else {
            let next = StreamId { ms: cur.c, seq: cur.d };
            if self.rev {
                end = next;
            } else {
                start = next;
            }
        }
        let mut left = cur.a;
        let mut last = None;
        if left > 0 {
            self.snap.range(start, end, self.rev, |e| {
                write_entry(out, &e);
                left -= 1;
                last = Some(e.id);
                left > 0 && out.len() - base < PIECE_BYTES
            });
        }
        cur.a = left;
        let next = last.and_then(|id| if self.rev { id.decr() } else { id.incr() });
        match next {
            Some(id) if left > 0 => {
                (cur.c, cur.d) = (id.ms, id.seq);
                Piece::More
            }
            _ => Piece::Done(None),
        }
    }
}

impl StreamRange {
    fn max_entries(&self) -> usize {
        let len = self.len as usize;
        if self.count < 0 {
            len
        } else {
            len.min(self.count as usize)
        }
    }
}

/// XRANGE key start end [COUNT count]
///
/// Replies with the entries whose IDs lie in [start, end] (`-`/`+` for the extremes, `(` for an
/// exclusive bound), oldest first, at most COUNT of them.
pub fn xrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    range_generic(ctx, args, false)
}

/// XREVRANGE key end start [COUNT count]
///
/// Like XRANGE with the bounds swapped, newest first.
pub fn xrevrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    range_generic(ctx, args, true)
}

/// XDEL key id [id ...]
///
/// Deletes the given entries (all IDs are validated first). Replies with how many existed.
pub fn xdel(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    if ctx.write::<Stream>(key)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let ids = args.from(2).map(parse_strict_id).collect::<Result<Vec<_>, _>>()?;
    let s = ctx.again::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    let mut deleted = 0u64;
    let mut first_entry = false;
    for id in ids {
        if s.delete(id) {
            if id == s.first_id {
                first_entry = true;
            }
            if id > s.max_deleted_id {
                s.max_deleted_id = id;
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.length == 0 {
            s.first_id = StreamId::MIN;
        } else if first_entry {
            s.first_id = s.edge_id(true);
        }
        ctx.notify(ev::STREAM, "xdel", key);
        ctx.modified(key, deleted);
    }
    Ok(Reply::Int(deleted as i64))
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]
///
/// Sets the stream's last generated ID (and its counters), which may not go below its top entry.
pub fn xsetid(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let id = parse_strict_id(args.get(2))?;
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if args.is(i, "entriesadded") && more > 0 {
            entries_added = ll(args.get(i + 1))?;
            if entries_added < 0 {
                return Err(CmdError::err("entries_added must be positive"));
            }
            i += 2;
        } else if args.is(i, "maxdeletedid") && more > 0 {
            max_xdel = parse_strict_id(args.get(i + 1))?;
            if id < max_xdel {
                return Err(CmdError::err(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let key = args.key(1);
    let s = ctx.write::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    if s.length > 0 {
        let top = s.edge_id(false);
        if id < top {
            return Err(CmdError::err("The ID specified in XSETID is smaller than the target stream top item"));
        }
        if entries_added != -1 && s.length > entries_added as u64 {
            return Err(CmdError::err(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
    }
    if !max_xdel.is_zero() {
        s.max_deleted_id = max_xdel;
    }
    ctx.notify(ev::STREAM, "xsetid", key);
    ctx.modified(key, 1);
    Ok(Reply::Ok)
}

// ---------------------------------------------------------------------------------------------
// XREAD / XREADGROUP

/// What an XREADGROUP call reads with.
struct GroupRead<'a> {
    group: &'a [u8],
    consumer: &'a [u8],
    count: usize,
    noack: bool,
    now: i64,
    proto: u8,
}

/// Serves new entries (after `after`) to a group consumer, recording them as pending unless
/// `noack`, and advancing the group's last ID and read counter (Redis's streamReplyWithRange with
/// a group).
fn serve_group_new(s: &mut Stream, r: &GroupRead, after: StreamId, out: &mut Vec<u8>) -> Vec<StreamId> {
    let (group_name, consumer, count, noack, now) = (r.group, r.consumer, r.count, r.noack, r.now);
    let Some(start) = after.incr() else {
        out.extend_from_slice(b"*0\r\n");
        return Vec::new();
    };
    let mut ids = Vec::new();
    let mut body = Vec::new();
    s.range(start, StreamId::MAX, false, |e| {
        write_entry(&mut body, &e);
        ids.push(e.id);
        count == 0 || ids.len() < count
    });
    int_line(out, b'*', ids.len() as i64);
    out.extend_from_slice(&body);
    let Some(mut g) = s.groups.remove(group_name) else { return ids };
    for &id in &ids {
        if id > g.last_id {
            if g.entries_read != INVALID_ENTRIES_READ && !s.range_has_tombstones(Some(id), None) {
                g.entries_read += 1;
            } else if s.entries_added > 0 {
                g.entries_read = s.distance_from_first_ever(id).map_or(INVALID_ENTRIES_READ, |v| v as i64);
            }
            g.last_id = id;
        }
        if !noack {
            let previous =
                g.pel.insert(id, Nack { delivery_time: now, delivery_count: 1, consumer: consumer.to_vec() });
            if let Some(old) = previous {
                if let Some(c) = g.consumers.get_mut(&old.consumer) {
                    c.pel.remove(&id);
                }
            }
            if let Some(c) = g.consumers.get_mut(consumer) {
                c.pel.insert(id);
            }
        }
    }
    s.groups.insert(group_name.to_vec(), g);
    ids
}

/// Serves a consumer's own pending entries after `after` (XREADGROUP with an explicit ID).
/// Returns the IDs delivered with their entries.
fn serve_group_history(s: &mut Stream, r: &GroupRead, after: StreamId, out: &mut Vec<u8>) -> Vec<StreamId> {
    let (group_name, consumer, count, now, proto) = (r.group, r.consumer, r.count, r.now, r.proto);
    let Some(start) = after.incr() else {
        out.extend_from_slice(b"*0\r\n");
        return Vec::new();
    };
    let ids: Vec<StreamId> = match s.groups.get(group_name).and_then(|g| g.consumers.get(consumer)) {
        Some(c) => c.pel.range(start..).take(if count == 0 { usize::MAX } else { count }).copied().collect(),
        None => Vec::new(),
    };
    int_line(out, b'*', ids.len() as i64);
    let mut found = Vec::with_capacity(ids.len());
    for &id in &ids {
        match s.get(id) {
            Some(e) => {
                write_entry(out, &e);
                found.push(id);
            }
            None => {
                out.extend_from_slice(b"*2\r\n");
                write_id(out, id);
                out.extend_from_slice(null_array(proto));
            }
        }
    }
    if let Some(g) = s.groups.get_mut(group_name) {
        for id in &found {
            if let Some(n) = g.pel.get_mut(id) {
                n.delivery_time = now;
                n.delivery_count += 1;
            }
        }
    }
    found
}

/// How XREADGROUP propagates what it delivered of new entries (it never propagates itself, and
/// re-reading history propagates nothing): an XCLAIM per entry that went pending, carrying its
/// delivery time and count and the ID the group had moved to; with NOACK, an XGROUP SETID
/// moving the group on.
fn group_read_effects(s: &Stream, key: &[u8], r: &GroupRead, ids: &[StreamId], new: bool) -> Vec<Vec<Vec<u8>>> {
    let Some(g) = s.groups.get(r.group) else { return Vec::new() };
    if !new {
        return Vec::new();
    }
    let last = g.last_id.to_bytes();
    if r.noack {
        if ids.is_empty() {
            return Vec::new();
        }
        let read = g.entries_read.to_string().into_bytes();
        return vec![vec![
            b"XGROUP".to_vec(),
            b"SETID".to_vec(),
            key.to_vec(),
            r.group.to_vec(),
            last,
            b"ENTRIESREAD".to_vec(),
            read,
        ]];
    }
    ids.iter()
        .filter_map(|id| g.pel.get(id).map(|n| (id, n)))
        .map(|(id, n)| {
            vec![
                b"XCLAIM".to_vec(),
                key.to_vec(),
                r.group.to_vec(),
                r.consumer.to_vec(),
                b"0".to_vec(),
                id.to_bytes(),
                b"TIME".to_vec(),
                n.delivery_time.to_string().into_bytes(),
                b"RETRYCOUNT".to_vec(),
                n.delivery_count.to_string().into_bytes(),
                b"FORCE".to_vec(),
                b"JUSTID".to_vec(),
                b"LASTID".to_vec(),
                id.to_bytes(),
            ]
        })
        .collect()
}

fn xread_generic(ctx: &mut Ctx, args: &Args, group_mode: bool) -> CmdResult {
    let argc = args.len();
    let mut timeout: i64 = -1;
    let mut count: i64 = 0;
    let mut count_given = false;
    let mut streams_arg = 0;
    let mut streams_count = 0;
    let mut noack = false;
    let mut group: Option<(&[u8], &[u8])> = None;
    let mut i = 1;
    while i < argc {
        let more = argc - i - 1;
        let o = args.get(i);
        if eq(o, "block") && more > 0 {
            // As Redis: BLOCK makes no sense in a script, which can never wait (the name as the
            // script spelled it).
            if ctx.from_script() {
                return Err(CmdError::echo(&[
                    b"ERR ",
                    args.get(0),
                    b" command is not allowed with BLOCK option from scripts",
                ]));
            }
            i += 1;
            let v = ll_msg(args.get(i), "timeout is not an integer or out of range")?;
            if v < 0 {
                return Err(CmdError::err("timeout is negative"));
            }
            // Redis 7.0 adds without an overflow check; a deadline past the i64 range waits for good.
            timeout = if v > 0 { ctx.now_ms().saturating_add(v) } else { 0 };
        } else if eq(o, "count") && more > 0 {
            i += 1;
            count = ll(args.get(i))?.max(0);
            count_given = true;
        } else if eq(o, "streams") && more > 0 {
            streams_arg = i + 1;
            streams_count = argc - streams_arg;
            if streams_count % 2 != 0 {
                return Err(CmdError::err(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            streams_count /= 2;
            break;
        } else if eq(o, "group") && more >= 2 {
            if !group_mode {
                return Err(CmdError::err(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            group = Some((args.get(i + 1), args.get(i + 2)));
            i += 2;
        } else if eq(o, "noack") {
            if !group_mode {
                return Err(CmdError::err(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            noack = true;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if streams_arg == 0 {
        return Err(CmdError::Syntax);
    }
    if group_mode && group.is_none() {
        return Err(CmdError::err("Missing GROUP option for XREADGROUP"));
    }

    // Resolve IDs (None = ">").
    let mut ids: Vec<Option<StreamId>> = Vec::with_capacity(streams_count);
    let mut dollar: Vec<bool> = vec![false; streams_count];
    #[allow(clippy::needless_range_loop)] // k indexes keys, ids and dollar together
    for k in 0..streams_count {
        let key = args.key(streams_arg + k);
        let idarg = args.get(streams_arg + streams_count + k);
        let s = xread_lookup(ctx, key, false)?;
        if let Some((gname, _)) = group {
            if !s.is_some_and(|s| s.groups.contains_key(gname)) {
                if ctx.woken() {
                    return Err(CmdError::Raw(
                        "NOGROUP the consumer group this client was blocked on no longer exists".into(),
                    ));
                }
                return Err(CmdError::echo(&[
                    b"NOGROUP No such key '",
                    key,
                    b"' or consumer group '",
                    gname,
                    b"' in XREADGROUP with GROUP option",
                ]));
            }
        }
        if c_str(idarg) == b"$" {
            if group_mode {
                return Err(CmdError::err(
                    "The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ));
            }
            ids.push(Some(s.map_or(StreamId::MIN, |s| s.last_id)));
            dollar[k] = true;
            continue;
        }
        if c_str(idarg) == b">" {
            if !group_mode {
                return Err(CmdError::err(
                    "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ));
            }
            ids.push(None);
            continue;
        }
        let id = parse_strict_id(idarg)?;
        // Redis marks `>` as the maximum ID, so an explicit maximum ID reads like `>`.
        ids.push(if group_mode && id == StreamId::MAX { None } else { Some(id) });
    }

    // Serve synchronously what can be served.
    let now = ctx.now_ms();
    let propagating = ctx.propagating();
    let proto = ctx.proto();
    let mut served: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    #[allow(clippy::needless_range_loop)] // k indexes keys and ids together
    for k in 0..streams_count {
        let key = args.key(streams_arg + k);
        // Redis looks each stream up for reading a second time here (hits, misses, `keymiss`).
        if xread_lookup(ctx, key, true)?.is_none() {
            continue;
        }
        let Some(s) = stream_mut(ctx, key) else { continue };
        let mut out = Vec::new();
        match group {
            Some((gname, cname)) => {
                let Some(glast) = s.groups.get(gname).map(|g| g.last_id) else { continue };
                // The consumer is created (or its seen-time refreshed) only when served.
                if ids[k].is_none() && (s.length == 0 || s.edge_id(false) <= glast) {
                    continue;
                }
                let mut created = false;
                if let Some(g) = s.groups.get_mut(gname) {
                    if let Some(c) = g.consumers.get_mut(cname) {
                        c.seen_time = now;
                    } else {
                        created = g.create_consumer(cname, now);
                    }
                }
                if ids[k].is_none() {
                    // New entries are delivered (checked above): the consumer is active.
                    if let Some(c) = s.groups.get_mut(gname).and_then(|g| g.consumers.get_mut(cname)) {
                        c.active_time = now;
                    }
                }
                let r = GroupRead { group: gname, consumer: cname, count: count as usize, noack, now, proto };
                let delivered = match ids[k] {
                    Some(after) => serve_group_history(s, &r, after, &mut out),
                    None => serve_group_new(s, &r, glast, &mut out),
                };
                let mut effects =
                    if propagating { group_read_effects(s, key, &r, &delivered, ids[k].is_none()) } else { Vec::new() };
                // A consumer created by a NOACK read is announced (the XCLAIMs create it otherwise).
                if created && noack && propagating {
                    let create = [&b"XGROUP"[..], b"CREATECONSUMER", key, gname, cname];
                    effects.insert(0, create.iter().map(|a| a.to_vec()).collect());
                }
                for argv in &effects {
                    let parts: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
                    ctx.also_propagate(&parts);
                }
                if created {
                    ctx.notify(ev::STREAM, "xgroup-createconsumer", key);
                }
                ctx.dirty(1);
            }
            None => {
                let after = ids[k].unwrap_or(StreamId::MAX);
                if s.length == 0 || s.edge_id(false) <= after {
                    continue;
                }
                let Some(start) = after.incr() else { continue };
                let mut body = Vec::new();
                let mut n = 0i64;
                s.range(start, StreamId::MAX, false, |e| {
                    write_entry(&mut body, &e);
                    n += 1;
                    count == 0 || n < count
                });
                int_line(&mut out, b'*', n);
                out.extend_from_slice(&body);
            }
        }
        served.push((key.to_vec(), out));
    }
    if !served.is_empty() {
        if proto >= 3 {
            return Ok(Reply::Map(served.into_iter().map(|(k, v)| (Reply::Bulk(k), Reply::Raw(v))).collect()));
        }
        return Ok(Reply::Array(
            served.into_iter().map(|(k, v)| Reply::Array(vec![Reply::Bulk(k), Reply::Raw(v)])).collect(),
        ));
    }
    if timeout == -1 {
        return Ok(Reply::NilArray);
    }
    let keys: Vec<Vec<u8>> = (0..streams_count).map(|k| args.key(streams_arg + k).to_vec()).collect();
    let reply = ctx.block(keys, timeout, Reply::NilArray, "stream")?;
    if let Some(req) = ctx.block_request_mut() {
        let mut argv: Vec<Bytes> = Vec::with_capacity(argc + 2);
        argv.push(args.argv[0].clone());
        if !count_given {
            argv.push(Bytes::from_static(b"COUNT"));
            argv.push(Bytes::from_static(BLOCKED_DEFAULT_COUNT.as_bytes()));
        }
        for (j, a) in args.argv.iter().enumerate().skip(1) {
            let k = j.wrapping_sub(streams_arg + streams_count);
            if j >= streams_arg + streams_count && dollar[k] {
                argv.push(Bytes::from(ids[k].unwrap_or(StreamId::MIN).to_bytes()));
            } else {
                argv.push(a.clone());
            }
        }
        req.rerun_argv = Some(argv);
    }
    Ok(reply)
}

/// XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]
///
/// Replies with the entries after each given ID (`$`: after the current last one) of every stream
/// that has some, as [key, entries] pairs (a map in RESP3); with BLOCK waits for new entries.
pub fn xread(ctx: &mut Ctx, args: &Args) -> CmdResult {
    xread_generic(ctx, args, false)
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key [key ...] id [id ...]
///
/// Reads as a consumer of a group: `>` delivers entries never delivered to the group (recording
/// them as pending for this consumer unless NOACK); an explicit ID re-reads this consumer's own
/// pending entries after it.
pub fn xreadgroup(ctx: &mut Ctx, args: &Args) -> CmdResult {
    ctx.no_propagate();
    xread_generic(ctx, args, true)
}

// ---------------------------------------------------------------------------------------------
// XGROUP

struct GroupTarget {
    exists: bool,
    has_group: bool,
}

/// The common XGROUP preamble: options (CREATE/SETID), key existence and type, group existence.
fn xgroup_preamble(ctx: &mut Ctx, args: &Args, sub: &str) -> Result<(GroupTarget, bool, i64), CmdError> {
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    if sub == "create" || sub == "setid" {
        let mut i = 5;
        while i < args.len() {
            if sub == "create" && args.is(i, "mkstream") {
                mkstream = true;
                i += 1;
            } else if args.is(i, "entriesread") && i + 1 < args.len() {
                entries_read = ll(args.get(i + 1))?;
                if entries_read < 0 && entries_read != INVALID_ENTRIES_READ {
                    return Err(CmdError::err("value for ENTRIESREAD must be positive or -1"));
                }
                i += 2;
            } else {
                return Err(subcommand_syntax(args));
            }
        }
    }
    let key = args.key(2);
    let grp = args.get(3);
    let s = ctx.write::<Stream>(key)?;
    let exists = s.is_some();
    let has_group = s.is_some_and(|s| s.groups.contains_key(grp));
    if !exists && !mkstream {
        return Err(CmdError::err(
            "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
        ));
    }
    if !has_group && matches!(sub, "setid" | "createconsumer" | "delconsumer") {
        return Err(nogroup_for_key(grp, key));
    }
    Ok((GroupTarget { exists, has_group }, mkstream, entries_read))
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]
///
/// Creates a consumer group whose last delivered ID is `id` (`$`: the stream's last ID),
/// creating an empty stream with MKSTREAM.
pub fn xgroup_create(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (t, _, entries_read) = xgroup_preamble(ctx, args, "create")?;
    if args.len() > 8 {
        return Err(subcommand_syntax(args));
    }
    let key = args.key(2);
    let id = if c_str(args.get(4)) == b"$" {
        match ctx.again::<Stream>(key)? {
            Some(s) => s.last_id,
            None => StreamId::MIN,
        }
    } else {
        parse_strict_id(args.get(4))?
    };
    let now = ctx.now_ms();
    if !t.exists {
        ctx.db().set(key, Value::Stream(Box::new(Stream::new())), now);
        ctx.notify(ev::NEW, "new", key);
        // Counts the dirty change of the group creation below too (Redis counts one).
        ctx.modified(key, 1);
    }
    let s = ctx.again::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    if t.has_group {
        return Err(CmdError::Raw("BUSYGROUP Consumer Group name already exists".into()));
    }
    s.groups.insert(args.get(3).to_vec(), Group::new(id, entries_read));
    if t.exists {
        ctx.dirty(1);
    }
    ctx.notify(ev::STREAM, "xgroup-create", key);
    Ok(Reply::Ok)
}

/// XGROUP SETID key group id|$ [ENTRIESREAD entries-read]
///
/// Sets a group's last delivered ID (and its read counter).
pub fn xgroup_setid(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() != 5 && args.len() != 7 {
        xgroup_preamble(ctx, args, "setid")?;
        return Err(subcommand_syntax(args));
    }
    let (_, _, entries_read) = xgroup_preamble(ctx, args, "setid")?;
    let key = args.key(2);
    let s = ctx.again::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    let id = if c_str(args.get(4)) == b"$" { s.last_id } else { parse_id(args.get(4), false, 0, false)?.0 };
    if let Some(g) = s.groups.get_mut(args.get(3)) {
        g.last_id = id;
        g.entries_read = entries_read;
    }
    ctx.notify(ev::STREAM, "xgroup-setid", key);
    ctx.dirty(1);
    Ok(Reply::Ok)
}

/// XGROUP DESTROY key group
///
/// Deletes a consumer group. Replies 1 if it existed, else 0.
pub fn xgroup_destroy(ctx: &mut Ctx, args: &Args) -> CmdResult {
    xgroup_preamble(ctx, args, "destroy")?;
    let key = args.key(2);
    let s = ctx.again::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    if s.groups.remove(args.get(3)).is_some() {
        ctx.dirty(1);
        ctx.notify(ev::STREAM, "xgroup-destroy", key);
        // Readers blocked on the group must learn it is gone.
        ctx.signal_ready(key);
        Ok(Reply::Int(1))
    } else {
        Ok(Reply::Int(0))
    }
}

/// XGROUP CREATECONSUMER key group consumer
///
/// Creates a consumer in a group. Replies 1 if created, 0 if it existed.
pub fn xgroup_createconsumer(ctx: &mut Ctx, args: &Args) -> CmdResult {
    xgroup_preamble(ctx, args, "createconsumer")?;
    let now = ctx.now_ms();
    let s = ctx.again::<Stream>(args.key(2))?.ok_or(CmdError::NoSuchKey)?;
    let created = s.groups.get_mut(args.get(3)).is_some_and(|g| g.create_consumer(args.get(4), now));
    if created {
        ctx.dirty(1);
        ctx.notify(ev::STREAM, "xgroup-createconsumer", args.key(2));
    }
    Ok(Reply::Int(created as i64))
}

/// XGROUP DELCONSUMER key group consumer
///
/// Deletes a consumer and its pending entries. Replies with how many entries it had pending.
pub fn xgroup_delconsumer(ctx: &mut Ctx, args: &Args) -> CmdResult {
    xgroup_preamble(ctx, args, "delconsumer")?;
    let s = ctx.again::<Stream>(args.key(2))?.ok_or(CmdError::NoSuchKey)?;
    let pending = s.groups.get_mut(args.get(3)).and_then(|g| g.delete_consumer(args.get(4)));
    if pending.is_some() {
        ctx.dirty(1);
        ctx.notify(ev::STREAM, "xgroup-delconsumer", args.key(2));
    }
    Ok(Reply::Int(pending.unwrap_or(0) as i64))
}

fn help_reply(cmd: &str, lines: &[&str]) -> Reply {
    let mut out = Vec::with_capacity(lines.len() + 3);
    out.push(Reply::StatusOwned(format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")));
    out.extend(lines.iter().map(|l| Reply::StatusOwned((*l).to_string())));
    out.push(Reply::Status("HELP"));
    out.push(Reply::Status("    Prints this help."));
    Reply::Array(out)
}

/// XGROUP HELP
///
/// Replies with the XGROUP subcommands.
pub fn xgroup_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    ))
}

// ---------------------------------------------------------------------------------------------
// XACK / XPENDING / XCLAIM / XAUTOCLAIM

/// XACK key group id [id ...]
///
/// Removes the given IDs from the group's pending list. Replies with how many were pending.
pub fn xack(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let has_group = match ctx.read::<Stream>(key)? {
        Some(s) => s.groups.contains_key(args.get(2)),
        None => false,
    };
    if !has_group {
        return Ok(Reply::Int(0));
    }
    let ids = args.from(3).map(parse_strict_id).collect::<Result<Vec<_>, _>>()?;
    let s = stream_mut(ctx, key).ok_or(CmdError::NoSuchKey)?;
    let Some(g) = s.groups.get_mut(args.get(2)) else { return Ok(Reply::Int(0)) };
    let mut acked = 0u64;
    for id in ids {
        if let Some(n) = g.pel.remove(&id) {
            if let Some(c) = g.consumers.get_mut(&n.consumer) {
                c.pel.remove(&id);
            }
            acked += 1;
        }
    }
    ctx.dirty(acked);
    Ok(Reply::Int(acked as i64))
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]]
///
/// Without a range: the pending count, smallest and greatest pending IDs and per-consumer
/// counts. With one: up to `count` pending entries as [id, consumer, idle ms, deliveries].
pub fn xpending(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::Syntax);
    }
    let mut range = None;
    let mut minidle = 0i64;
    let mut consumer: Option<&[u8]> = None;
    if argc >= 6 {
        let mut at = 3;
        if args.is(3, "idle") {
            minidle = ll(args.get(4))?;
            if argc < 8 {
                return Err(CmdError::Syntax);
            }
            at += 2;
        }
        let count = ll(args.get(at + 2))?.max(0);
        let start = range_start(args.get(at))?;
        let end = range_end(args.get(at + 1))?;
        if at + 3 < argc {
            consumer = Some(args.get(at + 3));
        }
        range = Some((start, end, count));
    }
    let key = args.key(1);
    let gname = args.get(2);
    let proto = ctx.proto();
    let now = ctx.now_ms();
    let s = ctx.read::<Stream>(key)?;
    let Some(g) = s.and_then(|s| s.groups.get(gname)) else {
        return Err(nogroup_key_group(key, gname));
    };
    let mut out = Vec::new();
    match range {
        None => {
            out.extend_from_slice(b"*4\r\n");
            int_line(&mut out, b':', g.pel.len() as i64);
            match (g.pel.first_key_value(), g.pel.last_key_value()) {
                (Some((a, _)), Some((b, _))) => {
                    write_id(&mut out, *a);
                    write_id(&mut out, *b);
                    let with: Vec<_> = g.consumers.iter().filter(|(_, c)| !c.pel.is_empty()).collect();
                    int_line(&mut out, b'*', with.len() as i64);
                    for (name, c) in with {
                        out.extend_from_slice(b"*2\r\n");
                        bulk(&mut out, name);
                        bulk(&mut out, itoa::Buffer::new().format(c.pel.len()).as_bytes());
                    }
                }
                _ => {
                    out.extend_from_slice(null_bulk(proto));
                    out.extend_from_slice(null_bulk(proto));
                    out.extend_from_slice(null_array(proto));
                }
            }
        }
        Some((start, end, mut count)) => {
            let ids: Box<dyn Iterator<Item = StreamId> + '_> = match consumer {
                Some(name) => match g.consumers.get(name) {
                    Some(c) if start <= end => Box::new(c.pel.range(start..=end).copied()),
                    Some(_) => Box::new(std::iter::empty()),
                    None => return Ok(Reply::Array(Vec::new())),
                },
                None if start <= end => Box::new(g.pel.range(start..=end).map(|(k, _)| *k)),
                None => Box::new(std::iter::empty()),
            };
            let mut body = Vec::new();
            let mut n = 0;
            for id in ids {
                if count == 0 {
                    break;
                }
                let Some(nack) = g.pel.get(&id) else { continue };
                if minidle != 0 && now - nack.delivery_time < minidle {
                    continue;
                }
                n += 1;
                count -= 1;
                body.extend_from_slice(b"*4\r\n");
                write_id(&mut body, id);
                bulk(&mut body, &nack.consumer);
                int_line(&mut body, b':', (now - nack.delivery_time).max(0));
                int_line(&mut body, b':', nack.delivery_count as i64);
            }
            int_line(&mut out, b'*', n);
            out.extend_from_slice(&body);
        }
    }
    Ok(Reply::Raw(out))
}

/// Moves a pending entry to `consumer` (creating the consumer), with Redis's bookkeeping.
/// Returns whether the consumer was created (an `xgroup-createconsumer` event).
fn claim_to(g: &mut Group, id: StreamId, consumer: &[u8], now: i64) -> bool {
    let mut created = false;
    if !g.consumers.contains_key(consumer) {
        created = g.create_consumer(consumer, now);
    } else if let Some(c) = g.consumers.get_mut(consumer) {
        c.seen_time = now;
    }
    if let Some(c) = g.consumers.get_mut(consumer) {
        c.active_time = now;
    }
    let Some(nack) = g.pel.get_mut(&id) else { return created };
    if nack.consumer != consumer {
        let old = std::mem::replace(&mut nack.consumer, consumer.to_vec());
        if let Some(c) = g.consumers.get_mut(&old) {
            c.pel.remove(&id);
        }
    }
    if let Some(c) = g.consumers.get_mut(consumer) {
        c.pel.insert(id);
    }
    created
}

fn drop_pending(g: &mut Group, id: StreamId) {
    if let Some(n) = g.pel.remove(&id) {
        if let Some(c) = g.consumers.get_mut(&n.consumer) {
            c.pel.remove(&id);
        }
    }
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]
///
/// Transfers the given pending entries that have been idle at least `min-idle-time` to
/// `consumer`. Replies with the claimed entries (or only their IDs with JUSTID).
pub fn xclaim(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(1);
    let gname = args.get(2);
    let has_group = ctx.read::<Stream>(key)?.is_some_and(|s| s.groups.contains_key(gname));
    if !has_group {
        return Err(nogroup_key_group(key, gname));
    }
    let minidle = ll_msg(args.get(4), "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match parse_strict_id(args.get(j)) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms();
    let mut force = false;
    let mut justid = false;
    let mut retrycount: i64 = -1;
    let mut deliverytime: i64 = -1;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = args.get(j);
        if eq(opt, "force") {
            force = true;
        } else if eq(opt, "justid") {
            justid = true;
        } else if eq(opt, "idle") && more > 0 {
            j += 1;
            deliverytime = now.wrapping_sub(ll_msg(args.get(j), "Invalid IDLE option argument for XCLAIM")?);
        } else if eq(opt, "time") && more > 0 {
            j += 1;
            deliverytime = ll_msg(args.get(j), "Invalid TIME option argument for XCLAIM")?;
        } else if eq(opt, "retrycount") && more > 0 {
            j += 1;
            retrycount = ll_msg(args.get(j), "Invalid RETRYCOUNT option argument for XCLAIM")?;
        } else if eq(opt, "lastid") && more > 0 {
            j += 1;
            last_id = parse_strict_id(args.get(j))?;
        } else {
            return Err(CmdError::echo(&[b"ERR Unrecognized XCLAIM option '", opt, b"'"]));
        }
        j += 1;
    }
    if deliverytime == -1 || deliverytime < 0 || deliverytime > now {
        deliverytime = now;
    }
    let cname = args.get(3);
    let s = stream_mut(ctx, key).ok_or(CmdError::NoSuchKey)?;
    let Some(mut g) = s.groups.remove(gname) else { return Err(nogroup_key_group(key, gname)) };
    if last_id > g.last_id {
        g.last_id = last_id;
    }
    let mut body = Vec::new();
    let mut n = 0i64;
    let mut dirty = 0u64;
    let mut created = false;
    // What each claim propagates as: (owner, id, delivery time, delivery count).
    let mut effects: Vec<(Vec<u8>, StreamId, i64, u64)> = Vec::new();
    for id in ids {
        let exists = s.get(id).is_some();
        if !exists {
            if let Some(n) = g.pel.get(&id) {
                // The entry is gone: the pending entry is dropped, propagated under its old owner.
                effects.push((n.consumer.clone(), id, n.delivery_time, n.delivery_count));
                drop_pending(&mut g, id);
                dirty += 1;
            }
            continue;
        }
        let mut fresh = false;
        if force && !g.pel.contains_key(&id) {
            g.pel.insert(id, Nack { delivery_time: now, delivery_count: 1, consumer: Vec::new() });
            fresh = true;
        }
        let Some(nack) = g.pel.get(&id) else { continue };
        if !fresh && minidle != 0 && now - nack.delivery_time < minidle {
            continue;
        }
        created |= claim_to(&mut g, id, cname, now);
        if let Some(nack) = g.pel.get_mut(&id) {
            nack.delivery_time = deliverytime;
            if retrycount >= 0 {
                nack.delivery_count = retrycount as u64;
            } else if !justid {
                nack.delivery_count += 1;
            }
            effects.push((cname.to_vec(), id, nack.delivery_time, nack.delivery_count));
        }
        if justid {
            write_id(&mut body, id);
        } else if let Some(e) = s.get(id) {
            write_entry(&mut body, &e);
        }
        n += 1;
        dirty += 1;
    }
    let last = g.last_id;
    s.groups.insert(gname.to_vec(), g);
    ctx.dirty(dirty);
    if created {
        ctx.notify(ev::STREAM, "xgroup-createconsumer", key);
    }
    ctx.no_propagate();
    propagate_claims(ctx, key, gname, last, effects);
    let mut out = Vec::new();
    int_line(&mut out, b'*', n);
    out.extend_from_slice(&body);
    Ok(Reply::Raw(out))
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]
///
/// Claims up to COUNT pending entries idle at least `min-idle-time`, scanning the group's
/// pending list from `start`. Replies with [next cursor, claimed entries, IDs of pending entries
/// that no longer exist (and were dropped)].
pub fn xautoclaim(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let minidle = ll_msg(args.get(4), "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = range_start(args.get(5))?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if args.is(j, "count") && more > 0 {
            let max = i64::MAX / 16;
            count = match crate::util::num::parse_i64(args.get(j + 1)) {
                Some(v) if (1..=max).contains(&v) => v,
                _ => return Err(CmdError::err("COUNT must be > 0")),
            };
            j += 1;
        } else if args.is(j, "justid") {
            justid = true;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let key = args.key(1);
    let gname = args.get(2);
    let has_group = ctx.read::<Stream>(key)?.is_some_and(|s| s.groups.contains_key(gname));
    if !has_group {
        return Err(nogroup_key_group(key, gname));
    }
    let now = ctx.now_ms();
    let cname = args.get(3);
    let s = stream_mut(ctx, key).ok_or(CmdError::NoSuchKey)?;
    let Some(mut g) = s.groups.remove(gname) else { return Err(nogroup_key_group(key, gname)) };
    let mut attempts = count * 10;
    let mut body = Vec::new();
    let mut n = 0i64;
    let mut deleted = Vec::new();
    let mut cursor = start;
    let mut last_visited: Option<StreamId> = None;
    let mut dirty = 0u64;
    let mut created = false;
    let mut effects: Vec<(Vec<u8>, StreamId, i64, u64)> = Vec::new();
    loop {
        if attempts == 0 {
            break;
        }
        attempts -= 1;
        if count == 0 {
            break;
        }
        let Some((&id, nack)) = g.pel.range(cursor..).next() else {
            last_visited = None;
            cursor = StreamId::MAX;
            break;
        };
        last_visited = Some(id);
        let delivery_time = nack.delivery_time;
        match id.incr() {
            Some(next) => cursor = next,
            None => cursor = StreamId::MAX,
        }
        if s.get(id).is_none() {
            effects.push((nack.consumer.clone(), id, nack.delivery_time, nack.delivery_count));
            drop_pending(&mut g, id);
            deleted.push(id);
            dirty += 1;
            count -= 1;
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        if minidle != 0 && now - delivery_time < minidle {
            if id == StreamId::MAX {
                break;
            }
            continue;
        }
        created |= claim_to(&mut g, id, cname, now);
        if let Some(nack) = g.pel.get_mut(&id) {
            nack.delivery_time = now;
            if !justid {
                nack.delivery_count += 1;
            }
            effects.push((cname.to_vec(), id, nack.delivery_time, nack.delivery_count));
        }
        if justid {
            write_id(&mut body, id);
        } else if let Some(e) = s.get(id) {
            write_entry(&mut body, &e);
        }
        n += 1;
        count -= 1;
        dirty += 1;
        if id == StreamId::MAX {
            break;
        }
    }
    // The cursor is the first pending ID after the last one examined (0-0 at the end).
    let next = match last_visited {
        Some(v) => g.pel.range((std::ops::Bound::Excluded(v), std::ops::Bound::Unbounded)).next().map(|(k, _)| *k),
        None => None,
    };
    let _ = cursor;
    let last = g.last_id;
    s.groups.insert(gname.to_vec(), g);
    ctx.dirty(dirty);
    if created {
        ctx.notify(ev::STREAM, "xgroup-createconsumer", key);
    }
    ctx.no_propagate();
    propagate_claims(ctx, key, gname, last, effects);
    let mut out = Vec::new();
    out.extend_from_slice(b"*3\r\n");
    write_id(&mut out, next.unwrap_or(StreamId::MIN));
    int_line(&mut out, b'*', n);
    out.extend_from_slice(&body);
    int_line(&mut out, b'*', deleted.len() as i64);
    for id in deleted {
        write_id(&mut out, id);
    }
    Ok(Reply::Raw(out))
}

// ---------------------------------------------------------------------------------------------
// XINFO

fn entry_reply(e: Option<EntryRef>) -> Reply {
    match e {
        Some(e) => {
            let mut out = Vec::new();
            write_entry(&mut out, &e);
            Reply::Raw(out)
        }
        None => Reply::Nil,
    }
}

fn kv(k: &'static str, v: Reply) -> (Reply, Reply) {
    (Reply::Bulk(k.as_bytes().to_vec()), v)
}

fn opt_int(v: Option<i64>) -> Reply {
    v.map_or(Reply::Nil, Reply::Int)
}

fn entries_read_reply(v: i64) -> Reply {
    if v == INVALID_ENTRIES_READ {
        Reply::Nil
    } else {
        Reply::Int(v)
    }
}

/// XINFO STREAM key [FULL [COUNT count]]
///
/// Replies with the stream's metadata and first/last entries; FULL adds up to COUNT entries
/// (default 10, 0 = all) and every group with its pending list and consumers.
pub fn xinfo_stream(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(2);
    let proto = ctx.proto();
    let now = ctx.now_ms();
    let _ = now;
    let s = ctx.read::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    let optc = args.len() - 3;
    let mut full = false;
    let mut count: i64 = 10;
    if optc > 0 {
        if optc != 1 && optc != 3 {
            return Err(subcommand_syntax(args));
        }
        if !args.is(3, "full") {
            return Err(subcommand_syntax(args));
        }
        full = true;
        if optc == 3 {
            if !args.is(4, "count") {
                return Err(subcommand_syntax(args));
            }
            count = ll(args.get(5))?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let mut m = vec![
        kv("length", Reply::Int(s.len() as i64)),
        kv("radix-tree-keys", Reply::Int(s.node_count() as i64)),
        kv("radix-tree-nodes", Reply::Int(s.radix_nodes() as i64)),
        kv("last-generated-id", id_reply(s.last_id)),
        kv("max-deleted-entry-id", id_reply(s.max_deleted_id)),
        kv("entries-added", Reply::Int(s.entries_added as i64)),
        kv("recorded-first-entry-id", id_reply(s.first_id)),
    ];
    if !full {
        m.push(kv("groups", Reply::Int(s.groups.len() as i64)));
        let mut first = None;
        s.range(StreamId::MIN, StreamId::MAX, false, |e| {
            first = Some(e);
            false
        });
        let mut last = None;
        s.range(StreamId::MIN, StreamId::MAX, true, |e| {
            last = Some(e);
            false
        });
        m.push(kv("first-entry", entry_reply(first)));
        m.push(kv("last-entry", entry_reply(last)));
        return Ok(Reply::Map(m));
    }
    let mut body = Vec::new();
    let mut n = 0i64;
    s.range(StreamId::MIN, StreamId::MAX, false, |e| {
        write_entry(&mut body, &e);
        n += 1;
        count == 0 || n < count
    });
    let mut entries = Vec::new();
    int_line(&mut entries, b'*', n);
    entries.extend_from_slice(&body);
    m.push(kv("entries", Reply::Raw(entries)));
    let mut groups = Vec::new();
    for (name, g) in &s.groups {
        let mut pending = Vec::new();
        for (id, nack) in g.pel.iter().take(if count == 0 { usize::MAX } else { count as usize }) {
            pending.push(Reply::Array(vec![
                id_reply(*id),
                Reply::Bulk(nack.consumer.clone()),
                Reply::Int(nack.delivery_time),
                Reply::Int(nack.delivery_count as i64),
            ]));
        }
        let mut consumers = Vec::new();
        for (cname, c) in &g.consumers {
            let mut cp = Vec::new();
            for id in c.pel.iter().take(if count == 0 { usize::MAX } else { count as usize }) {
                if let Some(nack) = g.pel.get(id) {
                    cp.push(Reply::Array(vec![
                        id_reply(*id),
                        Reply::Int(nack.delivery_time),
                        Reply::Int(nack.delivery_count as i64),
                    ]));
                }
            }
            consumers.push(Reply::Map(vec![
                kv("name", Reply::Bulk(cname.clone())),
                kv("seen-time", Reply::Int(c.seen_time)),
                // A Redis 7.2 field, shown so that times restored from 7.2+ files are visible.
                kv("active-time", Reply::Int(c.active_time)),
                kv("pel-count", Reply::Int(c.pel.len() as i64)),
                kv("pending", Reply::Array(cp)),
            ]));
        }
        groups.push(Reply::Map(vec![
            kv("name", Reply::Bulk(name.clone())),
            kv("last-delivered-id", id_reply(g.last_id)),
            kv("entries-read", entries_read_reply(g.entries_read)),
            kv("lag", opt_int(s.group_lag(g))),
            kv("pel-count", Reply::Int(g.pel.len() as i64)),
            kv("pending", Reply::Array(pending)),
            kv("consumers", Reply::Array(consumers)),
        ]));
    }
    m.push(kv("groups", Reply::Array(groups)));
    let _ = proto;
    Ok(Reply::Map(m))
}

/// XINFO GROUPS key
///
/// Replies with one map per consumer group: name, consumers, pending, last-delivered-id,
/// entries-read and lag.
pub fn xinfo_groups(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let s = ctx.read::<Stream>(args.key(2))?.ok_or(CmdError::NoSuchKey)?;
    let out = s
        .groups
        .iter()
        .map(|(name, g)| {
            Reply::Map(vec![
                kv("name", Reply::Bulk(name.clone())),
                kv("consumers", Reply::Int(g.consumers.len() as i64)),
                kv("pending", Reply::Int(g.pel.len() as i64)),
                kv("last-delivered-id", id_reply(g.last_id)),
                kv("entries-read", entries_read_reply(g.entries_read)),
                kv("lag", opt_int(s.group_lag(g))),
            ])
        })
        .collect();
    Ok(Reply::Array(out))
}

/// XINFO CONSUMERS key group
///
/// Replies with one map per consumer of the group: name, pending count and idle milliseconds.
pub fn xinfo_consumers(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let key = args.key(2);
    let gname = args.get(3);
    let now = ctx.now_ms();
    let s = ctx.read::<Stream>(key)?.ok_or(CmdError::NoSuchKey)?;
    let Some(g) = s.groups.get(gname) else {
        return Err(nogroup_for_key(gname, key));
    };
    let out = g
        .consumers
        .iter()
        .map(|(name, c)| {
            Reply::Map(vec![
                kv("name", Reply::Bulk(name.clone())),
                kv("pending", Reply::Int(c.pel.len() as i64)),
                kv("idle", Reply::Int((now - c.seen_time).max(0))),
            ])
        })
        .collect();
    Ok(Reply::Array(out))
}

/// XINFO HELP
///
/// Replies with the XINFO subcommands.
pub fn xinfo_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::clients::Client;

    fn client() -> Client {
        crate::commands::harness::client(1, 1)
    }

    fn run_argv(st: &mut crate::executor::State, me: &mut Client, argv: Vec<Bytes>, now: i64) -> Vec<u8> {
        crate::commands::harness::run(st, me, argv, now)
    }

    fn run(st: &mut crate::executor::State, me: &mut Client, line: &str) -> Vec<u8> {
        let argv = line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        run_argv(st, me, argv, 5000)
    }

    #[test]
    fn blocked_xread_dollar_reruns_with_resolved_id() {
        let mut st = crate::executor::State::new(crate::config::Config::default());
        let mut me = client();
        let mut other = client();
        run(&mut st, &mut other, "XADD s 1-1 a 1");
        assert_eq!(run(&mut st, &mut me, "XREAD BLOCK 0 STREAMS s nokey $ $"), b"");
        let req = me.block_request.take().expect("blocked");
        assert_eq!(req.keys, vec![b"s".to_vec(), b"nokey".to_vec()]);
        assert_eq!(req.wants_type, "stream");
        let rerun = req.rerun_argv.expect("rewritten argv");
        let words: Vec<&[u8]> = rerun.iter().map(|b| &b[..]).collect();
        assert_eq!(
            words,
            vec![&b"XREAD"[..], b"COUNT", b"1000", b"BLOCK", b"0", b"STREAMS", b"s", b"nokey", b"1-1", b"0-0"]
        );
        run(&mut st, &mut other, "XADD s 2-1 b 2");
        let out = run_argv(&mut st, &mut me, rerun, 5000);
        assert_eq!(out, b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n".to_vec());
    }

    #[test]
    fn blocked_xreadgroup_reruns_as_is() {
        let mut st = crate::executor::State::new(crate::config::Config::default());
        let mut me = client();
        let mut other = client();
        run(&mut st, &mut other, "XGROUP CREATE s g $ MKSTREAM");
        assert_eq!(run(&mut st, &mut me, "XREADGROUP GROUP g c COUNT 5 BLOCK 100 STREAMS s >"), b"");
        let req = me.block_request.take().expect("blocked");
        assert_eq!(req.deadline_ms, 5100);
        let rerun = req.rerun_argv.expect("argv");
        assert_eq!(rerun.len(), 11);
        run(&mut st, &mut other, "XADD s 3-0 f v");
        let out = run_argv(&mut st, &mut me, rerun, 5000);
        assert!(out.starts_with(b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n3-0"));
        assert_eq!(
            run(&mut st, &mut me, "XPENDING s g"),
            b"*4\r\n:1\r\n$3\r\n3-0\r\n$3\r\n3-0\r\n*1\r\n*2\r\n$1\r\nc\r\n$1\r\n1\r\n".to_vec()
        );
        // Inside MULTI a blocking read answers at once.
        me.in_exec = true;
        assert_eq!(run(&mut st, &mut me, "XREADGROUP GROUP g c BLOCK 0 STREAMS s >"), b"*-1\r\n");
        assert!(me.block_request.is_none());
    }

    #[test]
    fn id_parsing_follows_redis() {
        assert_eq!(parse_id(b"5", false, 0, false).unwrap(), (StreamId::new(5, 0), true));
        assert_eq!(parse_id(b"5", false, u64::MAX, false).unwrap().0, StreamId::new(5, u64::MAX));
        assert_eq!(parse_id(b"5-*", true, 0, true).unwrap(), (StreamId::new(5, 0), false));
        assert!(parse_id(b"5-*", true, 0, false).is_err());
        assert!(parse_id(b"-", true, 0, false).is_err());
        assert_eq!(parse_id(b"-", false, 0, false).unwrap().0, StreamId::MIN);
        assert_eq!(parse_id(b"+", false, 0, false).unwrap().0, StreamId::MAX);
        assert_eq!(parse_id(b"18446744073709551615-1", true, 0, false).unwrap().0, StreamId::new(u64::MAX, 1));
        assert!(parse_id(b"18446744073709551616", true, 0, false).is_err());
        assert!(parse_id(b"1--1", true, 0, false).is_err());
        assert_eq!(parse_id(b" +7", true, 0, false).unwrap().0, StreamId::new(7, 0));
        assert!(parse_id(b"", true, 0, false).is_err());
        assert!(parse_id(b"abc", true, 0, false).is_err());
    }
}
