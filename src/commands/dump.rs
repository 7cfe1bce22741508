//! DUMP and RESTORE: a key's value as Redis's serialized payload and back.
//!
//! The payload is what Redis writes: the RDB object type byte, the value in RDB encoding, the
//! 2-byte little-endian RDB version and a little-endian CRC-64 of everything before it. DUMP
//! writes RDB 10 whenever the value fits in it, so Redis 7.0 can RESTORE what we DUMP; only a hash
//! with field TTLs needs 12. RESTORE takes payloads of every version up to 12 and decodes them
//! with the RDB loader, which validates the whole value before anything is stored. Where
//! sanitize-dump-payload asks for no deep checks, a stream payload is accepted when it passes
//! Redis's shallow checks, keeping the entries before any malformed one (Redis would store it as
//! it is and assert later); everything else is always checked in full.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::db::{lfu_minutes, lru_clock, LFU_INIT_VAL, LRU_CLOCK_MAX};
use crate::pubsub::ev;
use crate::rdb::format;
use crate::rdb::load::{decode_value, DecodeOpts, Limits, Sanitize};
use crate::rdb::save::{self, SaveError};
use crate::resp::reply::{Deferred, Encode};
use crate::resp::writer::int_line;
use crate::resp::Reply;
use crate::types::Value;

pub static COMMANDS: &[CommandSpec] = &[
    spec("dump", 2, READONLY, keys(1, 1, 1), acl::KEYSPACE, dump),
    spec("restore", -4, WRITE | DENYOOM, keys(1, 1, 1), acl::KEYSPACE | acl::DANGEROUS, restore),
    // What a cluster's MIGRATE sends to the target: RESTORE, allowed on an importing slot.
    spec("restore-asking", -4, WRITE | DENYOOM | ASKING, keys(1, 1, 1), acl::KEYSPACE | acl::DANGEROUS, restore),
];

/// The version DUMP prefers: the newest Redis 7.0 reads.
pub(super) const DUMP_VERSION: u32 = 10;
/// Newest payload version RESTORE accepts (Redis 7.4's).
const MAX_PAYLOAD_VERSION: u16 = 12;
/// Bytes after the value: 2 of version, 8 of CRC-64.
const FOOTER: usize = 10;

/// The serialized payload of `value`: type, body, version, CRC-64. RDB 10 when it can express
/// the value, else 12 (hash field TTLs).
pub fn dump_payload(value: &Value, compress: bool) -> Result<Vec<u8>, SaveError> {
    match save::dump_payload(value, DUMP_VERSION, compress) {
        Err(SaveError::Unsupported(_)) => save::dump_payload(value, 12, compress),
        other => other,
    }
}

/// Checks a payload's footer: a version we read and a matching CRC-64 (Redis's
/// verifyDumpPayload; a zero CRC is not special here, as in Redis).
fn verify_payload(p: &[u8]) -> bool {
    if p.len() < FOOTER {
        return false;
    }
    let footer = &p[p.len() - FOOTER..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if version > MAX_PAYLOAD_VERSION {
        return false;
    }
    if format::skip_checksum_validation() {
        return true;
    }
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&footer[2..]);
    format::crc64(0, &p[..p.len() - 8]) == u64::from_le_bytes(stored)
}

/// The body of a payload whose footer checks out (FUNCTION RESTORE's libraries).
pub fn verified_body(p: &[u8]) -> Option<&[u8]> {
    verify_payload(p).then(|| &p[..p.len() - FOOTER])
}

/// Appends the footer DUMP payloads end with: the RDB version and a CRC-64 of everything.
pub fn seal_payload(p: &mut Vec<u8>) {
    p.extend_from_slice(&(DUMP_VERSION as u16).to_le_bytes());
    let crc = format::crc64(0, p);
    p.extend_from_slice(&crc.to_le_bytes());
}

/// Decodes a verified payload into a value ready to store (field TTLs applied); `None` for
/// anything malformed, a module type, or an empty collection (Redis refuses those too).
pub fn decode_payload(p: &[u8], limits: Limits, now_ms: i64, shallow: bool) -> Option<Value> {
    let body_end = p.len().checked_sub(FOOTER)?;
    let (&t, body) = p[..body_end].split_first()?;
    let opts = DecodeOpts { limits, drop_fields_expired_before: Some(now_ms), shallow };
    // As Redis in a RESTORE context: the reason is logged at verbose level, the client gets
    // "Bad data format".
    let (decoded, _used) = decode_value(t, body, &opts)
        .map_err(|e| tracing::debug!("Internal error in RDB reading offset 0, function at rdb.c:0 -> {}", e.reason))
        .ok()?;
    if decoded.is_empty_collection() {
        return None;
    }
    Some(decoded.into_value())
}

/// DUMP key
///
/// The value under `key` serialized as Redis does (RDB 10 when it can express the value, 12 for
/// hashes with field TTLs), or nil when the key does not exist. Strings over 20 bytes are
/// LZF-compressed when `rdbcompression` is on.
pub fn dump(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let compress = ctx.config().rdbcompression;
    let Some(value) = ctx.lookup_read(args.key(1)) else {
        return Ok(Reply::Nil);
    };
    // A big collection is serialized off the executor from a snapshot sharing its storage,
    // with the same bytes `dump_payload` gives (see `save::DumpSnapshot`).
    if value.element_count() >= super::DEFER_MIN_ELEMENTS {
        if let Some(snap) = ctx.db().get_ref_mut(args.key(1)).and_then(save::DumpSnapshot::take) {
            return Ok(Reply::Deferred(Deferred::new(DumpReply { snap, compress })));
        }
    }
    // Looked up again without counting a second hit (the borrow above ended).
    let Some(value) = ctx.db().get_ref(args.key(1)) else {
        return Ok(Reply::Nil);
    };
    let payload = dump_payload(value, compress).map_err(|e| CmdError::err(e.to_string()))?;
    Ok(Reply::Bulk(payload))
}

/// A big DUMP's reply: the payload as a bulk string, written into the output in place (the
/// length line is spliced in front once the payload's size is known: one move of the bytes,
/// rather than a second copy of the payload alive at once).
struct DumpReply {
    snap: save::DumpSnapshot,
    compress: bool,
}

impl Encode for DumpReply {
    fn encode(&self, _proto: u8, out: &mut Vec<u8>) {
        let start = out.len();
        self.snap.payload(DUMP_VERSION, self.compress, out);
        let len = out.len() - start;
        let mut head = Vec::with_capacity(24);
        int_line(&mut head, b'$', len as i64);
        out.extend_from_slice(&head);
        out.copy_within(start..start + len, start + head.len());
        out[start..start + head.len()].copy_from_slice(&head);
        out.extend_from_slice(b"\r\n");
    }

    fn size_hint(&self) -> usize {
        self.snap.size_hint() + 32
    }
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
///
/// Creates `key` from a DUMP payload. `ttl` is milliseconds from now (an absolute unix-ms time
/// with ABSTTL), 0 for none; a time already past stores nothing (and with REPLACE deletes the old
/// key). Without REPLACE an existing key is a BUSYKEY error. IDLETIME sets the access time under
/// an LRU policy, FREQ the access counter under an LFU one (they exclude each other). Errors come
/// in Redis's order: options, existing key, TTL, payload footer, payload body.
pub fn restore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut replace = false;
    let mut absttl = false;
    let mut idle: Option<i64> = None;
    let mut freq: Option<i64> = None;
    let mut j = 4;
    while j < args.len() {
        let more = args.len() - j - 1;
        if args.is(j, "replace") {
            replace = true;
        } else if args.is(j, "absttl") {
            absttl = true;
        } else if args.is(j, "idletime") && more >= 1 && freq.is_none() {
            let v = args.i64(j + 1)?;
            if v < 0 {
                return Err(CmdError::err("Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            j += 1;
        } else if args.is(j, "freq") && more >= 1 && idle.is_none() {
            let v = args.i64(j + 1)?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let key = args.key(1);
    if !replace && ctx.lookup_write(key).is_some() {
        return Err(CmdError::Raw("BUSYKEY Target key name already exists.".into()));
    }
    let ttl = args.i64(2)?;
    if ttl < 0 {
        return Err(CmdError::err("Invalid TTL value, must be >= 0"));
    }
    let payload = args.get(3);
    if !verify_payload(payload) {
        return Err(CmdError::err("DUMP payload version or checksum are wrong"));
    }
    let now = ctx.now_ms();
    let limits = Limits::from_config(ctx.config());
    let value =
        decode_payload(payload, limits, now, !deep_sanitize(ctx)).ok_or_else(|| CmdError::err("Bad data format"))?;

    let deleted = replace && ctx.db().remove(key, now).is_some();
    // Redis adds in C without an overflow check; wrapping keeps its outcome (a wrapped time is
    // in the past).
    let expire_at = if ttl == 0 {
        None
    } else if absttl {
        Some(ttl)
    } else {
        Some(ttl.wrapping_add(now))
    };
    if expire_at.is_some_and(|at| at <= now) && !ctx.loading() {
        if deleted {
            ctx.modified(key, 1);
            ctx.notify(ev::GENERIC, "del", key);
            ctx.propagate_as_parts(&[b"DEL", key]);
        }
        return Ok(Reply::Ok);
    }
    let clock = access_clock(&ctx.config().maxmemory_policy, now, idle, freq);
    ctx.db().insert_new(key, value, expire_at, clock);
    ctx.modified(key, 1);
    ctx.notify(ev::GENERIC, "restore", key);
    // A relative TTL propagates as an absolute one: argument 2 becomes the time, ABSTTL is added.
    if let (Some(at), false, true) = (expire_at, absttl, ctx.propagating()) {
        let at = at.to_string();
        let mut parts: Vec<&[u8]> = args.from(0).collect();
        parts[2] = at.as_bytes();
        parts.push(b"ABSTTL");
        ctx.propagate_as_parts(&parts);
    }
    Ok(Reply::Ok)
}

/// Whether this RESTORE validates its payload deeply (Redis's restoreCommand): always under
/// sanitize-dump-payload yes, never under no, and under clients unless the command is replayed
/// from the AOF or the client's user has skip-sanitize-payload.
fn deep_sanitize(ctx: &Ctx) -> bool {
    match Sanitize::from_config(ctx.config()) {
        Sanitize::Yes => true,
        Sanitize::No => false,
        Sanitize::Clients => {
            let skip_user = ctx.user_skips_sanitize();
            !ctx.loading() && !skip_user
        }
    }
}

/// The 24-bit access field of a restored key: under an LFU policy the minute clock and the
/// counter (FREQ, else the initial 5); otherwise the LRU clock moved back by IDLETIME seconds,
/// wrapping as Redis's does.
fn access_clock(policy: &str, now_ms: i64, idle: Option<i64>, freq: Option<i64>) -> u32 {
    if policy.contains("lfu") {
        let counter = freq.map_or(LFU_INIT_VAL, |f| f as u32);
        return (lfu_minutes(now_ms) << 8) | counter;
    }
    let now = lru_clock(now_ms) as i64;
    match idle {
        Some(idle) => {
            let mut abs = now.wrapping_sub(idle);
            if abs < 0 {
                abs = abs.wrapping_add(LRU_CLOCK_MAX as i64);
            }
            // Redis keeps the result in a 24-bit field.
            (abs as u64 & LRU_CLOCK_MAX as u64) as u32
        }
        None => now as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::RStr;

    #[test]
    fn payload_round_trip_and_footer_checks() {
        let v = Value::Str(RStr::from_bytes(b"hello world"));
        let p = dump_payload(&v, true).unwrap();
        assert_eq!(p[0], format::obj::STRING);
        assert_eq!(&p[p.len() - 10..p.len() - 8], &[10, 0]);
        assert!(verify_payload(&p));
        assert_eq!(decode_payload(&p, Limits::default(), 0, false), Some(v));
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert!(!verify_payload(&bad));
        assert!(!verify_payload(&p[..9]));
        // A version newer than 12 is refused even with a correct CRC.
        let mut newer = p[..p.len() - 10].to_vec();
        newer.extend_from_slice(&13u16.to_le_bytes());
        let crc = format::crc64(0, &newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert!(!verify_payload(&newer));
    }

    #[test]
    fn idle_and_freq_clocks() {
        let now_ms = 1_000_000_000_000;
        let now = lru_clock(now_ms);
        assert_eq!(access_clock("noeviction", now_ms, None, None), now);
        assert_eq!(access_clock("allkeys-lru", now_ms, Some(10), None), now - 10);
        assert_eq!(access_clock("allkeys-lfu", now_ms, None, Some(200)) & 0xff, 200);
        assert_eq!(access_clock("volatile-lfu", now_ms, None, None) & 0xff, 5);
        // An idle time beyond the clock's start wraps around the 24-bit clock.
        let wrapped = access_clock("noeviction", now_ms, Some(now as i64 + 1), None);
        assert_eq!(wrapped, LRU_CLOCK_MAX - 1);
    }
}
