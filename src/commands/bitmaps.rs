//! Bitmap commands over strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO.
//! Argument parsing and error precedence follow Redis 7.0 (for instance BITCOUNT looks the key
//! up before it reads its range, BITPOS parses the bit first); the bit arithmetic lives in
//! `types::bits`. Strings written here become `raw` encoded, as Redis's in-place edits do.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::pubsub::ev;
use crate::resp::Reply;
use crate::types::bits::{self, BitOp, Overflow};
use crate::types::{RStr, Value};
use crate::util::num::parse_i64;

pub static COMMANDS: &[CommandSpec] = &[
    spec("setbit", 4, WRITE | DENYOOM, keys(1, 1, 1), acl::BITMAP, setbit),
    spec("getbit", 3, READONLY | FAST, keys(1, 1, 1), acl::BITMAP, getbit),
    spec("bitcount", -2, READONLY, keys(1, 1, 1), acl::BITMAP, bitcount),
    spec("bitpos", -3, READONLY, keys(1, 1, 1), acl::BITMAP, bitpos),
    spec("bitop", -4, WRITE | DENYOOM, keys(2, -1, 1), acl::BITMAP, bitop),
    spec("bitfield", -2, WRITE | DENYOOM, keys(1, 1, 1), acl::BITMAP, bitfield),
    spec("bitfield_ro", -2, READONLY | FAST, keys(1, 1, 1), acl::BITMAP, bitfield_ro),
];

const OFFSET_ERR: &str = "bit offset is not an integer or out of range";

/// The string behind a value, or WRONGTYPE.
fn string_of(v: &Value) -> Result<&RStr, CmdError> {
    match v {
        Value::Str(s) => Ok(s),
        #[allow(unreachable_patterns)]
        _ => Err(CmdError::WrongType),
    }
}

fn string_of_mut(v: &mut Value) -> Result<&mut RStr, CmdError> {
    match v {
        Value::Str(s) => Ok(s),
        #[allow(unreachable_patterns)]
        _ => Err(CmdError::WrongType),
    }
}

/// A new string with `raw` encoding (what Redis creates for SETBIT/BITFIELD/BITOP results).
fn raw_string(bytes: Vec<u8>) -> Value {
    let mut s = RStr::from_bytes_no_int(b"");
    *s.make_raw() = bytes;
    Value::Str(s)
}

/// Parses a bit offset. With `bits > 0` a leading `#` multiplies the number by `bits`
/// (BITFIELD's `#N` form; the product wraps as Redis's does). Offsets whose byte lies at or past
/// proto-max-bulk-len are refused.
fn bit_offset(arg: &[u8], bits: u32, max_bulk: i64) -> Result<u64, CmdError> {
    let hash = bits > 0 && arg.first() == Some(&b'#');
    let digits = if hash { &arg[1..] } else { arg };
    let mut off = parse_i64(digits).ok_or_else(|| CmdError::err(OFFSET_ERR))?;
    if hash {
        off = off.wrapping_mul(bits as i64);
    }
    if off < 0 || (off >> 3) >= max_bulk {
        return Err(CmdError::err(OFFSET_ERR));
    }
    Ok(off as u64)
}

/// Makes the string under `key` at least `min_len` bytes long (creating it when absent) and
/// returns it with whether it was created or grew. WRONGTYPE for other types.
fn string_for_write<'a>(ctx: &'a mut Ctx, key: &[u8], min_len: usize) -> Result<(&'a mut Vec<u8>, bool), CmdError> {
    let exists = match ctx.lookup_write(key) {
        Some(v) => {
            string_of(v)?;
            true
        }
        None => false,
    };
    if !exists {
        ctx.set_key(key, raw_string(vec![0u8; min_len]));
    }
    // Looked up (or created) above: no second access stamp.
    let Some(v) = ctx.db().get_ref_mut(key) else {
        return Err(CmdError::err("internal error: key vanished"));
    };
    let buf = string_of_mut(v)?.make_raw();
    let grew = buf.len() < min_len;
    if grew {
        buf.resize(min_len, 0);
    }
    Ok((buf, grew || !exists))
}

/// SETBIT key offset value
///
/// Sets or clears the bit at `offset`, growing (or creating) the string with zero bytes as
/// needed; replies with the bit's previous value. The offset must address a byte below
/// proto-max-bulk-len and the value must be 0 or 1.
pub fn setbit(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let offset = bit_offset(args.get(2), 0, ctx.config().proto_max_bulk_len)?;
    let on = match parse_i64(args.get(3)) {
        Some(v) if v & !1 == 0 => v == 1,
        _ => return Err(CmdError::err("bit is not an integer or out of range")),
    };
    let key = args.key(1);
    let (buf, dirty) = string_for_write(ctx, key, (offset >> 3) as usize + 1)?;
    let old = bits::get_bit(buf, offset);
    if old != on {
        bits::set_bit(buf, offset, on);
    }
    if dirty || old != on {
        ctx.modified(key, 1);
        ctx.notify(ev::STRING, "setbit", key);
    }
    Ok(Reply::Int(old as i64))
}

/// GETBIT key offset
///
/// The bit at `offset`; 0 past the end of the string or when the key is absent.
pub fn getbit(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let offset = bit_offset(args.get(2), 0, ctx.config().proto_max_bulk_len)?;
    match ctx.lookup_read(args.key(1)) {
        None => Ok(Reply::Int(0)),
        Some(v) => {
            let on = string_of(v)?.with_bytes(|b| bits::get_bit(b, offset));
            Ok(Reply::Int(on as i64))
        }
    }
}

/// `BYTE` / `BIT` unit argument: whether it says BIT.
fn unit_is_bit(args: &Args, i: usize) -> Result<bool, CmdError> {
    if args.is(i, "bit") {
        Ok(true)
    } else if args.is(i, "byte") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// BITCOUNT key [start end [BYTE|BIT]]
///
/// Number of set bits in the string, or in the inclusive range `start..end` (byte indexes by
/// default, bit indexes with BIT; negative ones count from the end). An absent key counts 0
/// before any argument is looked at, as in Redis 7.0.
pub fn bitcount(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let argc = args.len();
    let Some(v) = ctx.lookup_read(args.key(1)) else {
        return Ok(Reply::Int(0));
    };
    let s = string_of(v)?;
    s.with_bytes(|b| {
        let range = match argc {
            2 => bits::resolve_range(b.len(), 0, -1, false),
            4 | 5 => {
                let start = args.i64(2)?;
                let end = args.i64(3)?;
                if start < 0 && end < 0 && start > end {
                    return Ok(Reply::Int(0));
                }
                let is_bit = argc == 5 && unit_is_bit(args, 4)?;
                bits::resolve_range(b.len(), start, end, is_bit)
            }
            _ => return Err(CmdError::Syntax),
        };
        Ok(Reply::Int(range.map_or(0, |(first, last)| bits::count_bits(b, first, last)) as i64))
    })
}

/// BITPOS key bit [start [end [BYTE|BIT]]]
///
/// Position of the first bit equal to `bit` in the string or range. An absent key is all
/// zeros (0 for a clear bit, -1 for a set bit). Looking for a clear bit without an explicit
/// end treats the string as zero-padded on the right, so the answer may be the first bit past
/// the range; with an explicit end it is -1 when the range holds no clear bit.
pub fn bitpos(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let argc = args.len();
    let bit = args.i64(2)?;
    if bit != 0 && bit != 1 {
        return Err(CmdError::err("The bit argument must be 1 or 0."));
    }
    let want = bit == 1;
    let Some(v) = ctx.lookup_read(args.key(1)) else {
        return Ok(Reply::Int(if want { -1 } else { 0 }));
    };
    let s = string_of(v)?;
    s.with_bytes(|b| {
        let len = b.len();
        let (range, end_given) = match argc {
            3 => (bits::resolve_range(len, 0, -1, false), false),
            4..=6 => {
                let start = args.i64(3)?;
                let is_bit = argc == 6 && unit_is_bit(args, 5)?;
                if argc >= 5 {
                    (bits::resolve_range(len, start, args.i64(4)?, is_bit), true)
                } else {
                    (bits::resolve_range(len, start, len as i64 - 1, false), false)
                }
            }
            _ => return Err(CmdError::Syntax),
        };
        let Some((first, last)) = range else {
            return Ok(Reply::Int(-1));
        };
        let pos = match bits::find_bit(b, want, first, last) {
            Some(p) => p as i64,
            None if want || end_given => -1,
            None => last as i64 + 1,
        };
        Ok(Reply::Int(pos))
    })
}

/// BITOP AND|OR|XOR|NOT destkey key [key ...]
///
/// Stores the bytewise combination of the source strings (absent keys are empty, shorter
/// strings zero-padded) under `destkey`, dropping its TTL; NOT takes exactly one source. An
/// all-empty result deletes `destkey`. Replies with the result's length.
pub fn bitop(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let op = if args.is(1, "and") {
        BitOp::And
    } else if args.is(1, "or") {
        BitOp::Or
    } else if args.is(1, "xor") {
        BitOp::Xor
    } else if args.is(1, "not") {
        BitOp::Not
    } else {
        return Err(CmdError::Syntax);
    };
    if op == BitOp::Not && args.len() != 4 {
        return Err(CmdError::err("BITOP NOT must be called with a single source key."));
    }
    let mut srcs: Vec<Vec<u8>> = Vec::with_capacity(args.len() - 3);
    for key in args.from(3) {
        match ctx.lookup_read(key) {
            None => srcs.push(Vec::new()),
            Some(v) => srcs.push(string_of(v)?.to_vec()),
        }
    }
    let refs: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
    let out = bits::bitop(op, &refs);
    let len = out.len();
    let dest = args.key(2);
    let now = ctx.now_ms();
    if len > 0 {
        ctx.set_key(dest, raw_string(out));
        ctx.modified(dest, 1);
        ctx.notify(ev::STRING, "set", dest);
    } else if ctx.db().remove(dest, now).is_some() {
        ctx.modified(dest, 1);
        ctx.notify(ev::GENERIC, "del", dest);
    }
    Ok(Reply::Int(len as i64))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set,
    Incrby,
}

/// One parsed BITFIELD operation.
#[derive(Debug, Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    value: i64,
    overflow: Overflow,
}

const TYPE_ERR: &str = "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// Parses `i<bits>` (1..=64) or `u<bits>` (1..=63). Like Redis, only lower-case prefixes, and
/// the number ends at the first NUL byte.
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(CmdError::err(TYPE_ERR)),
    };
    let rest = &arg[1..];
    let rest = &rest[..rest.iter().position(|&c| c == 0).unwrap_or(rest.len())];
    match parse_i64(rest) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok((signed, n as u32)),
        _ => Err(CmdError::err(TYPE_ERR)),
    }
}

/// Parses every BITFIELD operation up front (errors come before any key access). Returns the
/// operations and, when some of them write, the highest bit they reach.
fn parse_fields(args: &Args, max_bulk: i64) -> Result<(Vec<Field>, Option<u64>), CmdError> {
    let argc = args.len();
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut highest: Option<u64> = None;
    let mut j = 2;
    while j < argc {
        let remaining = argc - j - 1;
        let op = if args.is(j, "get") && remaining >= 2 {
            FieldOp::Get
        } else if args.is(j, "set") && remaining >= 3 {
            FieldOp::Set
        } else if args.is(j, "incrby") && remaining >= 3 {
            FieldOp::Incrby
        } else if args.is(j, "overflow") && remaining >= 1 {
            overflow = if args.is(j + 1, "wrap") {
                Overflow::Wrap
            } else if args.is(j + 1, "sat") {
                Overflow::Sat
            } else if args.is(j + 1, "fail") {
                Overflow::Fail
            } else {
                return Err(CmdError::err("Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(CmdError::Syntax);
        };
        let (signed, bits) = field_type(args.get(j + 1))?;
        let offset = bit_offset(args.get(j + 2), bits, max_bulk)?;
        let mut value = 0;
        if op != FieldOp::Get {
            let reach = offset + bits as u64 - 1;
            highest = Some(highest.map_or(reach, |h| h.max(reach)));
            value = args.i64(j + 3)?;
        }
        fields.push(Field { op, signed, bits, offset, value, overflow });
        j += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok((fields, highest))
}

fn field_get(buf: &[u8], f: &Field) -> Reply {
    if f.signed {
        Reply::Int(bits::get_signed(buf, f.offset, f.bits))
    } else {
        Reply::Int(bits::get_unsigned(buf, f.offset, f.bits) as i64)
    }
}

/// Runs one SET/INCRBY on `buf`. Returns the reply and whether the stored bits changed.
fn field_write(buf: &mut [u8], f: &Field) -> (Reply, bool) {
    let incr = f.op == FieldOp::Incrby;
    if f.signed {
        let old = bits::get_signed(buf, f.offset, f.bits);
        let (base, delta) = if incr { (old, f.value) } else { (f.value, 0) };
        let new = match bits::signed_overflow(base, delta, f.bits, f.overflow) {
            None => base.wrapping_add(delta),
            Some(Some(limited)) => limited,
            Some(None) => return (Reply::Nil, false),
        };
        bits::set_unsigned(buf, f.offset, f.bits, new as u64);
        (Reply::Int(if incr { new } else { old }), old != new)
    } else {
        let old = bits::get_unsigned(buf, f.offset, f.bits);
        let (base, delta) = if incr { (old, f.value) } else { (f.value as u64, 0) };
        let new = match bits::unsigned_overflow(base, delta, f.bits, f.overflow) {
            None => base.wrapping_add(delta as u64),
            Some(Some(limited)) => limited,
            Some(None) => return (Reply::Nil, false),
        };
        bits::set_unsigned(buf, f.offset, f.bits, new);
        (Reply::Int(if incr { new } else { old } as i64), old != new)
    }
}

fn bitfield_generic(ctx: &mut Ctx, args: &Args, read_only_cmd: bool) -> CmdResult {
    let (fields, highest) = parse_fields(args, ctx.config().proto_max_bulk_len)?;
    let key = args.key(1);
    let Some(highest) = highest else {
        let replies = match ctx.lookup_read(key) {
            None => fields.iter().map(|f| field_get(&[], f)).collect(),
            Some(v) => string_of(v)?.with_bytes(|b| fields.iter().map(|f| field_get(b, f)).collect()),
        };
        return Ok(Reply::Array(replies));
    };
    if read_only_cmd {
        return Err(CmdError::err("BITFIELD_RO only supports the GET subcommand"));
    }
    let (buf, dirty) = string_for_write(ctx, key, (highest >> 3) as usize + 1)?;
    // Like Redis, the dirty counter grows by one per write that changed (or created) bits.
    let mut changes = 0u64;
    let mut replies = Vec::with_capacity(fields.len());
    for f in &fields {
        if f.op == FieldOp::Get {
            replies.push(field_get(buf, f));
        } else {
            let (reply, differs) = field_write(buf, f);
            changes += (differs || (dirty && !matches!(reply, Reply::Nil))) as u64;
            replies.push(reply);
        }
    }
    if changes > 0 {
        ctx.modified(key, changes);
        ctx.notify(ev::STRING, "setbit", key);
    }
    Ok(Reply::Array(replies))
}

/// BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
/// [OVERFLOW WRAP|SAT|FAIL] ...
///
/// Reads and writes integer fields of 1..64 bits (`i64` at most signed, `u63` unsigned) at bit
/// offsets (`#N` means N times the width), in argument order; replies with one entry per
/// GET/SET/INCRBY (SET gives the old value, INCRBY the new one, nil when OVERFLOW FAIL refuses).
/// Writes first grow or create the string to cover the farthest bit they touch.
pub fn bitfield(ctx: &mut Ctx, args: &Args) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

/// BITFIELD_RO key [GET type offset ...]
///
/// The read-only variant of BITFIELD: only GET is allowed.
pub fn bitfield_ro(ctx: &mut Ctx, args: &Args) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets() {
        let max = 512 * 1024 * 1024;
        assert_eq!(bit_offset(b"7", 0, max), Ok(7));
        assert_eq!(bit_offset(b"#3", 8, max), Ok(24));
        assert!(bit_offset(b"#3", 0, max).is_err());
        assert!(bit_offset(b"-1", 0, max).is_err());
        assert_eq!(bit_offset(b"4294967295", 0, max), Ok(4294967295));
        assert!(bit_offset(b"4294967296", 0, max).is_err());
        assert!(bit_offset(b"", 0, max).is_err());
    }

    #[test]
    fn types() {
        assert_eq!(field_type(b"i64"), Ok((true, 64)));
        assert_eq!(field_type(b"u63"), Ok((false, 63)));
        assert!(field_type(b"u64").is_err());
        assert!(field_type(b"I8").is_err());
        assert!(field_type(b"i0").is_err());
        assert!(field_type(b"").is_err());
        assert_eq!(field_type(b"u8\0junk"), Ok((false, 8)));
    }
}
