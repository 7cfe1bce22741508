//! The RDB writer: turns `Value`s and whole databases into the bytes Redis writes, for RDB
//! versions 9 to 12. It owns the encoding decisions (which object type byte each value gets at
//! each version, string integer/LZF forms, container layouts through `pack`) and the file framing
//! (header, AUX fields, FUNCTION2, SELECTDB/RESIZEDB, expiries, EOF, CRC-64 trailer). It does no
//! file handling: callers hand it any `Write` (a temp file for SAVE/BGSAVE, a socket for SYNC,
//! a `Vec` for DUMP) and it never touches executor state.
//!
//! Two entry points are meant for reuse: `encode_value` (one value, for DUMP) and
//! `write_snapshot` (a whole dataset). `required_version` says which format a dataset needs, so
//! `rdb-version auto` can pick the oldest one that expresses everything, and a fixed version that
//! cannot express a value is refused rather than silently dropping data.

use std::io::{self, Write};

use super::format::{self, obj, op};
use super::pack::{Listpack, Packer, Ziplist};
use crate::db::Db;
use crate::functions::Libraries;
use crate::types::hash::HashSnapshot;
use crate::types::list::{Elem, ListSnapshot, NodeElems};
use crate::types::set::SetSnapshot;
use crate::types::stream::{Elem as StreamElem, Stream};
use crate::types::zset::ZSetSnapshot;
use crate::types::{Hash, List, Set, Value, ZSet};

/// Oldest and newest versions we write.
pub const MIN_WRITE_VERSION: u32 = 9;
pub const MAX_WRITE_VERSION: u32 = 12;

/// The `redis-ver` AUX value: files present themselves as written by the Redis we stand in for.
pub const REDIS_VER: &str = "7.0.15";

/// Why a save could not be written.
#[derive(Debug)]
pub enum SaveError {
    Io(io::Error),
    /// The chosen version cannot express part of the dataset.
    Unsupported(String),
}

impl std::fmt::Display for SaveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SaveError::Io(e) => write!(f, "{e}"),
            SaveError::Unsupported(why) => f.write_str(why),
        }
    }
}

impl From<io::Error> for SaveError {
    fn from(e: io::Error) -> Self {
        SaveError::Io(e)
    }
}

/// How values are encoded.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// RDB version, `MIN_WRITE_VERSION..=MAX_WRITE_VERSION`.
    pub version: u32,
    /// LZF for strings longer than 20 bytes when it saves space (rdbcompression).
    pub compress: bool,
    /// Write the CRC-64 trailer; zeros when false (rdbchecksum).
    pub checksum: bool,
    /// rdb-key-save-delay: microseconds to sleep after each key (Redis's hidden knob that tests
    /// use to keep a background save running); 0 = none.
    pub key_delay_us: u64,
    /// Write each key's idle time (IDLE opcode), as Redis does under an LRU maxmemory-policy;
    /// the value is the snapshot's clock (unix ms).
    pub lru_idle_at_ms: Option<i64>,
    /// Called with the count of keys written so far, every 1024 keys (a fork child reports its
    /// progress to the parent through it, as Redis's rdbSaveRio does).
    pub progress: Option<fn(u64)>,
}

impl Options {
    pub fn new(version: u32) -> Options {
        Options { version, compress: true, checksum: true, key_delay_us: 0, lru_idle_at_ms: None, progress: None }
    }
}

/// AUX values of the header.
#[derive(Debug, Clone, Default)]
pub struct Aux {
    /// Unix seconds the snapshot was taken.
    pub ctime: i64,
    pub used_mem: u64,
    /// The file is the base of an AOF (aux field `aof-base`).
    pub aof_base: bool,
    /// Replication info (aux fields `repl-stream-db`, `repl-id`, `repl-offset`): where in
    /// which history the dataset stands, for a partial resync after a restart.
    pub repl: Option<ReplInfo>,
}

/// The replication position a snapshot stands at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplInfo {
    pub stream_db: usize,
    pub id: String,
    pub offset: i64,
}

/// The oldest version (10 or newer) that expresses every value of `dbs`: 12 when a hash has
/// field TTLs, else 10.
///
/// A db with no hash in its field-TTL schedule has none (every hash given a field TTL is
/// scheduled for active expiry; the schedule may hold stale entries, never miss one), so the
/// common case costs nothing: the walk of every value it replaces took ~0.4 s on the executor
/// at 1M keys, before each diskless full sync's fork.
pub fn required_version(dbs: &[Db]) -> u32 {
    for db in dbs {
        if db.field_ttl_keys() == 0 {
            continue;
        }
        for (_, v, _) in db.iter_all() {
            if let Value::Hash(h) = v {
                if h.has_field_expires() {
                    return 12;
                }
            }
        }
    }
    10
}

/// Checks that `version` can hold the dataset: functions need 10+, hash field TTLs 12.
pub fn check_version(version: u32, dbs: &[Db], functions: &Libraries) -> Result<(), SaveError> {
    if !(MIN_WRITE_VERSION..=MAX_WRITE_VERSION).contains(&version) {
        return Err(SaveError::Unsupported(format!("RDB version {version} cannot be written (9 to 12 can)")));
    }
    if version < 10 && !functions.libs.is_empty() {
        return Err(SaveError::Unsupported(format!(
            "rdb-version {version} cannot store functions (they need RDB 10 or newer)"
        )));
    }
    if version < 12 && required_version(dbs) >= 12 {
        return Err(SaveError::Unsupported(format!(
            "rdb-version {version} cannot store hash field TTLs (they need RDB 12)"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Primitives

/// An RDB length: 6-bit, 14-bit, 32-bit or 64-bit form.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(format::len::LEN_32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(format::len::LEN_64);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The integer form of a string (rdbEncodeInteger), when it is a canonical decimal that fits
/// 32 bits.
fn put_int_string(out: &mut Vec<u8>, s: &[u8]) -> bool {
    if s.is_empty() || s.len() > 11 {
        return false;
    }
    let Some(v) = crate::util::num::parse_i64(s) else {
        return false;
    };
    let enc = 0xC0;
    if (i8::MIN as i64..=i8::MAX as i64).contains(&v) {
        out.push(enc | format::len::ENC_INT8);
        out.push(v as i8 as u8);
    } else if (i16::MIN as i64..=i16::MAX as i64).contains(&v) {
        out.push(enc | format::len::ENC_INT16);
        out.extend_from_slice(&(v as i16).to_le_bytes());
    } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
        out.push(enc | format::len::ENC_INT32);
        out.extend_from_slice(&(v as i32).to_le_bytes());
    } else {
        return false;
    }
    true
}

/// A string as Redis's rdbSaveRawString writes it: integer form for short canonical integers,
/// LZF when compression is on, the string is over 20 bytes and compressing saves space, else
/// length + bytes.
pub fn put_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 && put_int_string(out, s) {
        return;
    }
    if compress && s.len() > 20 {
        if let Some(packed) = super::lzf::compress(s) {
            out.push(0xC0 | format::len::ENC_LZF);
            put_len(out, packed.len() as u64);
            put_len(out, s.len() as u64);
            out.extend_from_slice(&packed);
            return;
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A score as packed containers hold it, which is Redis 7.0's `d2string`: an integer when it is
/// one within ±2^62, `0`/`-0`, `inf`/`-inf`, else `%.17g` (so 0.1 is `0.10000000000000001`).
/// DUMP payloads are compared byte for byte with Redis's, so the shortest round-trip text will
/// not do, though it would read back the same.
fn score_entry(score: f64) -> Result<i64, Vec<u8>> {
    if score.is_infinite() {
        return Err(if score > 0.0 { b"inf".to_vec() } else { b"-inf".to_vec() });
    }
    if score == 0.0 {
        return if score.is_sign_negative() { Err(b"-0".to_vec()) } else { Ok(0) };
    }
    const LIM: f64 = 4611686018427387904.0; // (double)(LLONG_MAX / 2)
    if (-LIM..=LIM).contains(&score) && score == score.trunc() {
        return Ok(score as i64);
    }
    Err(crate::util::num::fmt_g17(score).into_bytes())
}

// ---------------------------------------------------------------------------------------------
// Values

/// Encodes one value (without key or expiry) for `opts.version`; returns the object type byte
/// and appends the payload to `out`.
pub fn write_value(out: &mut Vec<u8>, value: &Value, opts: &Options) -> Result<u8, SaveError> {
    let v = opts.version;
    let c = opts.compress;
    Ok(match value {
        Value::Str(s) => {
            s.with_bytes(|b| put_string(out, b, c));
            obj::STRING
        }
        Value::List(l) => write_list(out, l, opts),
        Value::Hash(h) => write_hash(out, h, opts)?,
        Value::Set(s) => write_set(out, s, v, c),
        Value::ZSet(z) => write_zset(out, z, v, c),
        Value::Stream(s) => write_stream(out, s, v, c),
    })
}

/// One value encoded for `version` (DUMP's payload body): (type byte, bytes).
pub fn encode_value(value: &Value, version: u32, compress: bool) -> Result<(u8, Vec<u8>), SaveError> {
    if let Value::Hash(h) = value {
        if version < 12 && h.has_field_expires() {
            return Err(SaveError::Unsupported(format!(
                "rdb-version {version} cannot store hash field TTLs (they need RDB 12)"
            )));
        }
    }
    let mut out = Vec::new();
    let opts = Options { compress, ..Options::new(version) };
    let t = write_value(&mut out, value, &opts)?;
    Ok((t, out))
}

/// A DUMP payload: the value's type byte and encoding, the 2-byte RDB version it was written
/// for, then the CRC-64 of all that (both little-endian), as RESTORE expects.
pub fn dump_payload(value: &Value, version: u32, compress: bool) -> Result<Vec<u8>, SaveError> {
    let (t, body) = encode_value(value, version, compress)?;
    let mut out = Vec::with_capacity(body.len() + 11);
    out.push(t);
    out.extend_from_slice(&body);
    out.extend_from_slice(&(version as u16).to_le_bytes());
    let crc = format::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// A big value as DUMP serializes it off the executor: its storage shared with the key (see
/// `types::cow`), so the payload is the value as it was when DUMP ran whatever writers do
/// meanwhile. Only the forms `write_value` writes as one entry per element (a hashtable set or
/// hash without field TTLs, a skiplist zset, a quicklist, a stream) are taken this way.
pub enum DumpSnapshot {
    Set(SetSnapshot),
    Hash(HashSnapshot),
    ZSet(ZSetSnapshot),
    List(ListSnapshot),
    /// A clone: its blocks are shared (`Stream`'s nodes are behind `Arc`s), its consumer groups
    /// copied.
    Stream(Box<Stream>),
}

impl DumpSnapshot {
    /// The snapshot of `value` for a DUMP at `version`, or None where `dump_payload` is to run
    /// in place (a small encoding, or a hash with field TTLs).
    pub fn take(value: &mut Value) -> Option<DumpSnapshot> {
        match value {
            Value::Set(s) => s.snapshot().map(DumpSnapshot::Set),
            Value::Hash(h) if !h.has_field_expires() => h.snapshot().map(DumpSnapshot::Hash),
            // (Up to 128 members a skiplist may be written packed: `small_with_neg_zero`.)
            Value::ZSet(z) if z.encoding_name() != "listpack" && z.len() > 128 => {
                Some(DumpSnapshot::ZSet(z.snapshot()))
            }
            Value::List(l) => {
                let n = l.len();
                Some(DumpSnapshot::List(l.snapshot_range(0, n)))
            }
            Value::Stream(s) => Some(DumpSnapshot::Stream(Box::new((**s).clone()))),
            _ => None,
        }
    }

    /// About how many bytes the payload takes (a capacity hint).
    pub fn size_hint(&self) -> usize {
        match self {
            DumpSnapshot::Set(s) => s.data_bytes_hint() + s.len() * 2,
            DumpSnapshot::Hash(h) => h.data_bytes_hint() + h.len() * 4,
            DumpSnapshot::ZSet(z) => z.len() * 24,
            DumpSnapshot::List(l) => l.approx_bytes(),
            DumpSnapshot::Stream(s) => s.alloc_bytes(),
        }
    }

    /// Appends the DUMP payload (type, body, `version`, CRC-64) to `out`: the bytes
    /// `dump_payload` gives for the value as it was when the snapshot was taken.
    pub fn payload(&self, version: u32, compress: bool, out: &mut Vec<u8>) {
        let opts = Options { compress, ..Options::new(version) };
        let start = out.len();
        out.push(0);
        let t = match self {
            DumpSnapshot::Set(s) => {
                put_len(out, s.len() as u64);
                s.for_each(|m| put_string(out, m, compress));
                obj::SET
            }
            DumpSnapshot::Hash(h) => {
                put_len(out, h.len() as u64);
                h.for_each(|f, x| {
                    put_string(out, f, compress);
                    put_string(out, x, compress);
                });
                obj::HASH
            }
            DumpSnapshot::ZSet(z) => {
                let n = z.len();
                write_tree_zset(out, n, compress, |f| z.walk(0, n.saturating_sub(1), true, f))
            }
            DumpSnapshot::List(l) => write_list_nodes(out, |f| l.for_each_node(f), &opts),
            DumpSnapshot::Stream(s) => write_stream(out, s, version, compress),
        };
        out[start] = t;
        out.extend_from_slice(&(version as u16).to_le_bytes());
        let crc = format::crc64(0, &out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// A list's quicklist nodes as the list holds them (its nodes are cut where Redis's quicklist
/// cuts them): from RDB 10 on a listpack per node, or the element itself for a plain node;
/// before, a ziplist per node.
fn write_list(out: &mut Vec<u8>, list: &List, opts: &Options) -> u8 {
    write_list_nodes(out, |f| list.for_each_node(f), opts)
}

fn write_list_nodes(out: &mut Vec<u8>, each_node: impl FnOnce(&mut dyn FnMut(NodeElems<'_>)), opts: &Options) -> u8 {
    let quicklist_2 = opts.version >= 10;
    let mut nodes: Vec<(u64, Vec<u8>)> = Vec::new();
    each_node(&mut |mut elems| {
        if quicklist_2 && elems.is_plain() {
            if let Some(e) = elems.next() {
                nodes.push((format::QUICKLIST_NODE_PLAIN, e.to_vec()));
                return;
            }
        }
        let packed = if quicklist_2 { pack_node::<Listpack>(elems) } else { pack_node::<Ziplist>(elems) };
        nodes.push((format::QUICKLIST_NODE_PACKED, packed));
    });
    put_len(out, nodes.len() as u64);
    for (container, n) in &nodes {
        if quicklist_2 {
            put_len(out, *container);
        }
        put_string(out, n, opts.compress);
    }
    if quicklist_2 {
        obj::LIST_QUICKLIST_2
    } else {
        obj::LIST_QUICKLIST
    }
}

fn pack_node<P: Packer>(elems: NodeElems<'_>) -> Vec<u8> {
    let mut p = P::default();
    for e in elems {
        match e {
            Elem::Int(i) => p.push_int(i),
            Elem::Bytes(b) => p.push_str(b),
        }
    }
    p.finish()
}

/// A small hash as one packed blob of field, value, field, value...
fn pack_hash<P: Packer>(h: &Hash) -> Vec<u8> {
    let mut p = P::default();
    for (f, x) in h.iter() {
        p.push_str(f);
        p.push_str(x);
    }
    p.finish()
}

/// A small sorted set as one packed blob of member, score... in score order.
fn pack_zset<P: Packer>(z: &ZSet) -> Vec<u8> {
    let mut p = P::default();
    let n = z.len();
    if n > 0 {
        z.walk(0, n - 1, false, &mut |m, score| {
            p.push_str(m);
            match score_entry(score) {
                Ok(i) => p.push_int(i),
                Err(t) => p.push_str(&t),
            }
            true
        });
    }
    p.finish()
}

fn write_hash(out: &mut Vec<u8>, h: &Hash, opts: &Options) -> Result<u8, SaveError> {
    let (v, c) = (opts.version, opts.compress);
    if h.has_field_expires() {
        if v < 12 {
            return Err(SaveError::Unsupported(format!(
                "rdb-version {v} cannot store hash field TTLs (they need RDB 12)"
            )));
        }
        return Ok(write_hash_with_ttls(out, h, c));
    }
    if h.is_listpack() {
        if v >= 10 {
            put_string(out, &pack_hash::<Listpack>(h), c);
            return Ok(obj::HASH_LISTPACK);
        }
        put_string(out, &pack_hash::<Ziplist>(h), c);
        return Ok(obj::HASH_ZIPLIST);
    }
    put_len(out, h.len() as u64);
    for (f, x) in h.iter() {
        put_string(out, f, c);
        put_string(out, x, c);
    }
    Ok(obj::HASH)
}

/// Redis 7.4's forms for a hash whose fields carry TTLs (RDB 12), both opening with the minimum
/// field expiry as 8 little-endian bytes: HASH_LISTPACK_EX for a small one (a listpack of field,
/// value, absolute-expiry-or-0 triplets), HASH_METADATA for a big one (a count, then per field
/// its expiry minus the minimum plus one, or 0 for none, then field and value). Layout checked
/// against redis-7.4.1-full.rdb (hash:ttl:small, hash:ttl:large).
fn write_hash_with_ttls(out: &mut Vec<u8>, h: &Hash, compress: bool) -> u8 {
    let mut ttls: std::collections::HashMap<Vec<u8>, i64> = std::collections::HashMap::new();
    h.for_each_field_expire(|f, at| {
        ttls.insert(f.to_vec(), at);
    });
    let min = ttls.values().copied().min().unwrap_or(0);
    out.extend_from_slice(&(min as u64).to_le_bytes());
    if h.is_listpack() {
        // Redis keeps a listpack-ex ordered by expiry, fields without one last (its expiry
        // scan stops at the first field not yet due), so the file must be in that order.
        let mut triplets: Vec<(&[u8], &[u8], i64)> =
            h.iter().map(|(f, x)| (f, x, ttls.get(f).copied().unwrap_or(0))).collect();
        triplets.sort_by_key(|&(_, _, at)| if at == 0 { i64::MAX } else { at });
        let mut lp = Listpack::new();
        for (f, x, at) in triplets {
            lp.push_str(f);
            lp.push_str(x);
            lp.push_int(at);
        }
        put_string(out, &lp.finish(), compress);
        obj::HASH_LISTPACK_EX
    } else {
        put_len(out, h.len() as u64);
        for (f, x) in h.iter() {
            let rel = ttls.get(f).map_or(0, |&at| (at - min) as u64 + 1);
            put_len(out, rel);
            put_string(out, f, compress);
            put_string(out, x, compress);
        }
        obj::HASH_METADATA
    }
}

fn write_set(out: &mut Vec<u8>, s: &Set, version: u32, compress: bool) -> u8 {
    if let Some((width, body)) = s.intset_parts() {
        let mut blob = Vec::with_capacity(8 + body.len());
        blob.extend_from_slice(&(width as u32).to_le_bytes());
        blob.extend_from_slice(&((body.len() / width as usize) as u32).to_le_bytes());
        blob.extend_from_slice(body);
        put_string(out, &blob, compress);
        return obj::SET_INTSET;
    }
    // Redis 7.2 (RDB 11) keeps small non-integer sets as listpacks (set-max-listpack-entries 128,
    // -value 64 by default); older versions only know intset and hashtable.
    if version >= 11 && s.len() <= 128 {
        let mut small = true;
        s.for_each(|e| small &= e.with_bytes(|b| b.len() <= 64));
        if small {
            let mut lp = Listpack::new();
            s.for_each(|e| match e {
                crate::types::set::Elem::Int(i) => lp.push_int(i),
                crate::types::set::Elem::Str(b) => lp.push_str(b),
            });
            put_string(out, &lp.finish(), compress);
            return obj::SET_LISTPACK;
        }
    }
    put_len(out, s.len() as u64);
    s.for_each(|e| e.with_bytes(|b| put_string(out, b, compress)));
    obj::SET
}

/// A tree-encoded zset that only holds a -0 score (the loader keeps those out of our packed form)
/// but is small by Redis's default limits: written packed, so the "-0" text survives. Redis 7.0
/// turns a ZSET_2 -0 into 0 when it packs the set on load.
fn small_with_neg_zero(z: &ZSet) -> bool {
    let n = z.len();
    if n == 0 || n > 128 {
        return false;
    }
    let (mut neg_zero, mut short) = (false, true);
    z.walk(0, n - 1, false, &mut |m, score| {
        neg_zero |= score == 0.0 && score.is_sign_negative();
        short &= m.len() <= 64;
        true
    });
    neg_zero && short
}

fn write_zset(out: &mut Vec<u8>, z: &ZSet, version: u32, compress: bool) -> u8 {
    let n = z.len();
    if z.encoding_name() == "listpack" || small_with_neg_zero(z) {
        if version >= 10 {
            put_string(out, &pack_zset::<Listpack>(z), compress);
            return obj::ZSET_LISTPACK;
        }
        put_string(out, &pack_zset::<Ziplist>(z), compress);
        return obj::ZSET_ZIPLIST;
    }
    write_tree_zset(out, n, compress, |f| z.walk(0, n.saturating_sub(1), true, f))
}

/// A skiplist zset of `n` members as ZSET_2, from a walk of it highest score first.
fn write_tree_zset(
    out: &mut Vec<u8>,
    n: usize,
    compress: bool,
    walk_rev: impl FnOnce(&mut dyn FnMut(&[u8], f64) -> bool),
) -> u8 {
    put_len(out, n as u64);
    // Highest score first, as Redis writes a skiplist, so a loader inserting at the head of
    // its own skiplist does no walking.
    if n > 0 {
        walk_rev(&mut |m, score| {
            put_string(out, m, compress);
            out.extend_from_slice(&score.to_le_bytes());
            true
        });
    }
    obj::ZSET_2
}

fn push_stream_elem(lp: &mut Listpack, e: StreamElem<'_>) {
    match e {
        StreamElem::Int(i) => lp.push_int(i),
        StreamElem::Bytes(b) => lp.push_str(b),
    }
}

fn put_id(out: &mut Vec<u8>, id: crate::types::stream::StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

fn write_stream(out: &mut Vec<u8>, s: &Stream, version: u32, compress: bool) -> u8 {
    let blocks: Vec<_> = s.blocks().collect();
    put_len(out, blocks.len() as u64);
    for b in &blocks {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&b.master.ms.to_be_bytes());
        key[8..].copy_from_slice(&b.master.seq.to_be_bytes());
        put_string(out, &key, compress);
        // The master entry: live count, deleted count, master fields, a 0 terminator; then each
        // entry as flags, ID deltas, (field count and fields unless they are the master's),
        // values, and the entry's element count so it can be walked backwards.
        let mut lp = Listpack::new();
        lp.push_int(b.live() as i64);
        lp.push_int(b.deleted() as i64);
        let master = b.master_fields();
        lp.push_int(master.len() as i64);
        for f in &master {
            push_stream_elem(&mut lp, *f);
        }
        lp.push_int(0);
        b.for_each_entry(|e, deleted, same| {
            let flags = (deleted as i64) | ((same as i64) << 1);
            lp.push_int(flags);
            lp.push_int(e.id.ms.wrapping_sub(b.master.ms) as i64);
            lp.push_int(e.id.seq.wrapping_sub(b.master.seq) as i64);
            let n = e.num_fields();
            if !same {
                lp.push_int(n as i64);
            }
            e.for_each_pair(|f, v| {
                if !same {
                    push_stream_elem(&mut lp, f);
                }
                push_stream_elem(&mut lp, v);
            });
            let count = if same { 3 + n } else { 3 + 2 * n + 1 };
            lp.push_int(count as i64);
        });
        put_string(out, &lp.finish(), compress);
    }
    put_len(out, s.length);
    put_id(out, s.last_id);
    if version >= 10 {
        put_id(out, if s.length == 0 { Default::default() } else { s.first_id });
        put_id(out, s.max_deleted_id);
        put_len(out, s.entries_added);
    }
    put_len(out, s.groups.len() as u64);
    for (name, g) in &s.groups {
        put_string(out, name, compress);
        put_id(out, g.last_id);
        if version >= 10 {
            put_len(out, g.entries_read as u64);
        }
        put_len(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            out.extend_from_slice(&id.ms.to_be_bytes());
            out.extend_from_slice(&id.seq.to_be_bytes());
            out.extend_from_slice(&nack.delivery_time.to_le_bytes());
            put_len(out, nack.delivery_count);
        }
        put_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            put_string(out, cname, compress);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            if version >= 11 {
                out.extend_from_slice(&c.active_time.to_le_bytes());
            }
            put_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&id.ms.to_be_bytes());
                out.extend_from_slice(&id.seq.to_be_bytes());
            }
        }
    }
    match version {
        9 => obj::STREAM_LISTPACKS,
        10 => obj::STREAM_LISTPACKS_2,
        _ => obj::STREAM_LISTPACKS_3,
    }
}

// ---------------------------------------------------------------------------------------------
// Whole files

/// A writer that keeps the running CRC-64 of everything written through it.
struct CrcWriter<W: Write> {
    inner: io::BufWriter<W>,
    crc: u64,
    checksum: bool,
}

impl<W: Write> CrcWriter<W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        if self.checksum {
            self.crc = format::crc64(self.crc, b);
        }
        self.inner.write_all(b)
    }
}

fn aux(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    out.push(op::AUX);
    put_string(out, key.as_bytes(), false);
    put_string(out, value, false);
}

/// Writes a whole snapshot: header, AUX fields, functions, every non-empty database (keys with
/// their expiry, logically expired ones included as Redis does), EOF and the checksum. The
/// version must already be checked against the dataset (`check_version`); a value it cannot
/// express still fails here rather than being skipped. Returns the writer and the bytes
/// written.
pub fn write_snapshot<W: Write>(
    w: W,
    dbs: &[Db],
    functions: &Libraries,
    info: &Aux,
    opts: &Options,
) -> Result<(W, u64), SaveError> {
    check_version(opts.version, &[], functions)?;
    let mut sink = CrcWriter { inner: io::BufWriter::with_capacity(1 << 16, w), crc: 0, checksum: opts.checksum };
    let mut total = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 12);
    buf.extend_from_slice(format!("REDIS{:04}", opts.version).as_bytes());
    aux(&mut buf, "redis-ver", REDIS_VER.as_bytes());
    aux(&mut buf, "redis-bits", b"64");
    aux(&mut buf, "ctime", info.ctime.to_string().as_bytes());
    aux(&mut buf, "used-mem", info.used_mem.to_string().as_bytes());
    if let Some(r) = &info.repl {
        aux(&mut buf, "repl-stream-db", r.stream_db.to_string().as_bytes());
        aux(&mut buf, "repl-id", r.id.as_bytes());
        aux(&mut buf, "repl-offset", r.offset.to_string().as_bytes());
    }
    aux(&mut buf, "aof-base", if info.aof_base { b"1" } else { b"0" });
    for lib in &functions.libs {
        buf.push(op::FUNCTION2);
        put_string(&mut buf, &lib.code, opts.compress);
    }
    let mut keys_written = 0u64;
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        buf.push(op::SELECTDB);
        put_len(&mut buf, i as u64);
        buf.push(op::RESIZEDB);
        put_len(&mut buf, db.len() as u64);
        put_len(&mut buf, db.expires_len() as u64);
        for (key, value, expire) in db.iter_all() {
            if let Some(at) = expire {
                buf.push(op::EXPIRETIME_MS);
                buf.extend_from_slice(&at.to_le_bytes());
            }
            if let Some(now) = opts.lru_idle_at_ms {
                if let Some(idle) = db.idle_seconds_peek(key, now) {
                    buf.push(op::IDLE);
                    put_len(&mut buf, idle);
                }
            }
            let type_at = buf.len();
            buf.push(0);
            put_string(&mut buf, key, opts.compress);
            buf[type_at] = write_value(&mut buf, value, opts)?;
            if opts.key_delay_us > 0 {
                std::thread::sleep(std::time::Duration::from_micros(opts.key_delay_us));
            }
            keys_written += 1;
            if let Some(report) = opts.progress.filter(|_| keys_written.is_multiple_of(1024)) {
                report(keys_written);
            }
            if buf.len() >= 1 << 16 {
                sink.put(&buf)?;
                total += buf.len() as u64;
                buf.clear();
            }
        }
    }
    buf.push(op::EOF);
    sink.put(&buf)?;
    total += buf.len() as u64;
    let crc = if opts.checksum { sink.crc } else { 0 };
    sink.inner.write_all(&crc.to_le_bytes())?;
    total += 8;
    let inner = sink.inner.into_inner().map_err(|e| SaveError::Io(e.into_error()))?;
    Ok((inner, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::RStr;

    #[test]
    fn required_version_sees_field_ttls_in_any_db() {
        let hash = |ttl: bool| {
            let mut h = crate::types::Hash::new();
            h.set(b"f", b"v", 128, 64);
            if ttl {
                h.set_field_expire(b"f", i64::MAX / 2);
            }
            Value::Hash(Box::new(h))
        };
        let mut dbs = vec![Db::new(), Db::new()];
        dbs[0].set(b"plain", hash(false), 0);
        assert_eq!(required_version(&dbs), 10);
        dbs[1].set(b"ttl", hash(true), 0);
        assert_eq!(required_version(&dbs), 12);
        // Its TTL gone, the hash may stay in the schedule (stale): the walk then says 10.
        if let Some(Value::Hash(h)) = dbs[1].get_mut(b"ttl", 0) {
            h.persist_field(b"f");
        }
        assert_eq!(required_version(&dbs), 10);
        dbs[1].remove(b"ttl", 0);
        assert_eq!(required_version(&dbs), 10);
    }

    /// A big value's DUMP from its snapshot is byte for byte `dump_payload` of the value when
    /// the snapshot was taken, whatever is written to the value afterwards.
    #[test]
    fn dump_snapshot_is_the_payload_when_taken() {
        use crate::types::stream::StreamId;
        let n = 5000usize;
        let mut set = Set::new();
        let mut hash = Hash::new();
        let mut zset = ZSet::new();
        let mut list = List::new(-2);
        let mut stream = Stream::new();
        let lim = crate::types::zset::Limits { max_entries: 128, max_value: 64 };
        for i in 0..n {
            let m = format!("member:{i}");
            set.insert(m.as_bytes(), 512);
            hash.set(m.as_bytes(), format!("value:{i}").as_bytes(), 128, 64);
            zset.insert(m.as_bytes(), (i % 97) as f64 * 1.5, lim);
            list.push_back(if i % 3 == 0 { format!("{i}") } else { m.clone() }.as_bytes());
            let v = i.to_string();
            stream
                .append(StreamId::new(i as u64 + 1, 0), &[b"f", m.as_bytes(), b"n", v.as_bytes()], 4096, 100)
                .unwrap();
        }
        let mut values = [
            Value::Set(Box::new(set)),
            Value::Hash(Box::new(hash)),
            Value::ZSet(Box::new(zset)),
            Value::List(Box::new(list)),
            Value::Stream(Box::new(stream)),
        ];
        for v in values.iter_mut() {
            for (round, compress) in [false, true].into_iter().enumerate() {
                let before = dump_payload(v, 10, compress).unwrap();
                let snap = DumpSnapshot::take(v).expect("a big value has a snapshot");
                // Writes of every kind after the snapshot.
                match v {
                    Value::Set(s) => {
                        for i in 0..n / 2 {
                            s.remove(format!("member:{i}").as_bytes());
                            s.insert(format!("new:{round}:{i}").as_bytes(), 512);
                        }
                    }
                    Value::Hash(h) => {
                        for i in 0..n / 2 {
                            h.remove(format!("member:{i}").as_bytes());
                            h.set(format!("member:{}:{round}", n - 1 - i).as_bytes(), b"overwritten!", 128, 64);
                        }
                    }
                    Value::ZSet(z) => {
                        for i in 0..n / 2 {
                            z.remove(format!("member:{i}").as_bytes());
                            z.insert(format!("new:{round}:{i}").as_bytes(), i as f64, lim);
                        }
                    }
                    Value::List(l) => {
                        for i in 0..n / 2 {
                            l.pop_front();
                            l.push_back(format!("new:{i}").as_bytes());
                            l.set(i, b"x");
                        }
                    }
                    Value::Stream(s) => {
                        for i in 0..n / 2 {
                            s.delete(StreamId::new(i as u64 * 2 + 1, 0));
                        }
                        s.trim(Some(n as u64 / 4), None, false, 0);
                        s.append(StreamId::new(u64::MAX / 2 + round as u64, 0), &[b"f", b"late"], 4096, 100).unwrap();
                    }
                    Value::Str(_) => unreachable!(),
                }
                let mut out = b"prefix".to_vec();
                snap.payload(10, compress, &mut out);
                assert_eq!(&out[..6], b"prefix");
                assert!(out[6..] == before[..], "{} payload differs (compress {compress})", v.type_name());
                assert!(dump_payload(v, 10, compress).unwrap() != before, "{} was written", v.type_name());
            }
        }
    }

    #[test]
    fn lengths() {
        let mut v = Vec::new();
        put_len(&mut v, 63);
        put_len(&mut v, 64);
        put_len(&mut v, 16384);
        put_len(&mut v, 1 << 32);
        assert_eq!(v, [63, 0x40, 64, 0x80, 0, 0, 0x40, 0, 0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn string_forms() {
        let enc = |s: &[u8], c| {
            let mut v = Vec::new();
            put_string(&mut v, s, c);
            v
        };
        assert_eq!(enc(b"-5", true), [0xC0, 0xFB]);
        assert_eq!(enc(b"300", true), [0xC1, 0x2C, 0x01]);
        assert_eq!(enc(b"70000", true), [0xC2, 0x70, 0x11, 0x01, 0x00]);
        assert_eq!(enc(b"4294967296", true), [10, b'4', b'2', b'9', b'4', b'9', b'6', b'7', b'2', b'9', b'6']);
        assert_eq!(enc(b"007", true), [3, b'0', b'0', b'7']);
        let long = vec![b'a'; 100];
        assert_eq!(enc(&long, true)[0], 0xC3);
        assert_eq!(enc(&long, false)[..2], [0x40, 100]);
        // 20 compressible bytes stay plain: LZF only over 20.
        assert_eq!(enc(&long[..20], true)[0], 20);
    }

    #[test]
    fn scores() {
        assert_eq!(score_entry(3.0), Ok(3));
        assert_eq!(score_entry(-0.0), Err(b"-0".to_vec()));
        assert_eq!(score_entry(f64::INFINITY), Err(b"inf".to_vec()));
        assert_eq!(score_entry(0.1), Err(b"0.10000000000000001".to_vec()));
        assert_eq!(score_entry(1e-300), Err(b"1e-300".to_vec()));
        assert_eq!(score_entry(1e17), Ok(100_000_000_000_000_000));
        assert_eq!(score_entry(4611686018427387904.0), Ok(1 << 62));
        assert_eq!(score_entry(9223372036854775808.0), Err(b"9.2233720368547758e+18".to_vec()));
        let big = score_entry(f64::MAX).unwrap_err();
        assert_eq!(String::from_utf8(big).unwrap().parse::<f64>().unwrap(), f64::MAX);
    }

    #[test]
    fn empty_snapshot_layout() {
        let dbs = vec![Db::new()];
        let (out, n) = write_snapshot(Vec::new(), &dbs, &Libraries::default(), &Aux::default(), &Options::new(10))
            .expect("in memory");
        assert_eq!(n as usize, out.len());
        assert_eq!(&out[..9], b"REDIS0010");
        assert_eq!(out[out.len() - 9], op::EOF);
        let crc = format::crc64(0, &out[..out.len() - 8]);
        assert_eq!(out[out.len() - 8..], crc.to_le_bytes());
    }

    #[test]
    fn one_string_value() {
        let (t, bytes) = encode_value(&Value::Str(RStr::from_bytes(b"hello")), 10, true).unwrap();
        assert_eq!(t, obj::STRING);
        assert_eq!(bytes, b"\x05hello");
    }

    fn stream_with_group() -> Value {
        use crate::types::stream::{Group, StreamId};
        let mut st = Stream::new();
        st.append(StreamId::new(5, 1), &[b"f", b"v"], 4096, 100).unwrap();
        st.append(StreamId::new(5, 2), &[b"f", b"12"], 4096, 100).unwrap();
        let mut g = Group::new(StreamId::new(5, 1), 1);
        g.create_consumer(b"alice", 1_700_000_000_000);
        st.groups.insert(b"g".to_vec(), g);
        Value::Stream(Box::new(st))
    }

    #[test]
    fn stream_versions_differ_only_where_the_format_does() {
        let v = stream_with_group();
        let (t9, b9) = encode_value(&v, 9, false).unwrap();
        let (t10, b10) = encode_value(&v, 10, false).unwrap();
        let (t11, b11) = encode_value(&v, 11, false).unwrap();
        assert_eq!((t9, t10, t11), (obj::STREAM_LISTPACKS, obj::STREAM_LISTPACKS_2, obj::STREAM_LISTPACKS_3));
        // v10 adds first ID, max deleted ID, entries added (5 lengths) and a group's
        // entries-read (1); v11 adds each consumer's 8-byte active time.
        assert_eq!(b10.len(), b9.len() + 6);
        assert_eq!(b11.len(), b10.len() + 8);
        assert_eq!(b11[..b11.len() - 9], b10[..b10.len() - 1]);
        // The consumer's seen time, then (v11) its active time (-1: never served), then an empty PEL.
        let seen = 1_700_000_000_000i64.to_le_bytes();
        assert_eq!(b11[b11.len() - 17..b11.len() - 9], seen);
        assert_eq!(b11[b11.len() - 9..b11.len() - 1], (-1i64).to_le_bytes());
        assert_eq!(b11[b11.len() - 1], 0);
    }

    #[test]
    fn small_string_sets_are_listpacks_from_v11() {
        let mut s = Set::new();
        s.insert(b"a", 512);
        s.insert(b"b", 512);
        let v = Value::Set(Box::new(s));
        assert_eq!(encode_value(&v, 10, true).unwrap().0, obj::SET);
        assert_eq!(encode_value(&v, 11, true).unwrap().0, obj::SET_LISTPACK);
        let mut ints = Set::new();
        ints.insert(b"7", 512);
        assert_eq!(encode_value(&Value::Set(Box::new(ints)), 11, true).unwrap().0, obj::SET_INTSET);
    }

    #[test]
    fn functions_need_v10() {
        let libs = Libraries {
            libs: vec![crate::functions::Library {
                name: b"mylib".to_vec(),
                engine: b"LUA".to_vec(),
                code: b"#!lua name=mylib\nredis.register_function('f', function() return 1 end)".to_vec(),
            }],
        };
        let dbs = vec![Db::new()];
        let err = write_snapshot(Vec::new(), &dbs, &libs, &Aux::default(), &Options::new(9)).unwrap_err();
        assert_eq!(err.to_string(), "rdb-version 9 cannot store functions (they need RDB 10 or newer)");
        let (out, _) = write_snapshot(Vec::new(), &dbs, &libs, &Aux::default(), &Options::new(10)).unwrap();
        let mut rec = vec![op::FUNCTION2];
        put_string(&mut rec, &libs.libs[0].code, true);
        assert!(out.windows(rec.len()).any(|w| w == rec.as_slice()), "FUNCTION2 record missing");
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// Payloads compared with what DUMP answers on redis-server 7.0.15 for the same values.
    #[test]
    fn dump_payloads_match_redis() {
        let mut list = List::new(-2);
        for e in [&b"a"[..], b"b", b"1"] {
            list.push_back(e);
        }
        let mut hash = Hash::new();
        hash.set(b"f", b"v", 128, 64);
        hash.set(b"n", b"300", 128, 64);
        let mut set = Set::new();
        for m in [&b"3"[..], b"1", b"2"] {
            set.insert(m, 512);
        }
        let mut z = ZSet::new();
        let lim = crate::types::zset::Limits { max_entries: 128, max_value: 64 };
        z.insert(b"a", 1.0, lim);
        z.insert(b"b", 2.5, lim);
        let cases: Vec<(Value, &str)> = vec![
            (Value::Str(RStr::from_bytes(b"hello")), "000568656c6c6f0a006372df766534200a"),
            (Value::Str(RStr::from_bytes(b"12345")), "00c139300a009d94ea2793fc08b9"),
            (Value::List(Box::new(list)), "1201020f0f00000003008161028162020101ff0a00e01bab4a47ce5922"),
            (Value::Hash(Box::new(hash)), "1013130000000400816602817602816e02c12c02ff0a00b4bc2f6c5b5cb139"),
            (Value::Set(Box::new(set)), "0b0e02000000030000000100020003000a00a5025ce26d6e4d1b"),
            (Value::ZSet(Box::new(z)), "1114140000000400816102010181620283322e3504ff0a00d44c6ea4f644d9d7"),
        ];
        for (v, want) in cases {
            assert_eq!(hex(&dump_payload(&v, 10, true).unwrap()), want, "{v:?}");
        }
    }

    /// XADD x 5-1 f v, 5-2 f 12, 5-3 g 1 h 2; XDEL x 5-2; XGROUP CREATE x g 5-1 ENTRIESREAD 1:
    /// DUMP on redis-server 7.0.15 answers exactly these bytes.
    #[test]
    fn stream_dump_matches_redis() {
        use crate::types::stream::{Group, StreamId};
        let mut st = Stream::new();
        st.append(StreamId::new(5, 1), &[b"f", b"v"], 4096, 100).unwrap();
        st.append(StreamId::new(5, 2), &[b"f", b"12"], 4096, 100).unwrap();
        st.append(StreamId::new(5, 3), &[b"g", b"1", b"h", b"2"], 4096, 100).unwrap();
        assert!(st.delete(StreamId::new(5, 2)));
        st.max_deleted_id = StreamId::new(5, 2);
        st.groups.insert(b"g".to_vec(), Group::new(StreamId::new(5, 1), 1));
        let want = "130110000000000000000500000000000000013b3b0000001800020101010101816602000102010001000181\
                    760204010301000101010c0104010001000102010201816702010181680202010801ff0205030501050203\
                    01016705010100000a00c6903fb937690466";
        let got = hex(&dump_payload(&Value::Stream(Box::new(st)), 10, true).unwrap());
        assert_eq!(got, want.replace(' ', ""));
    }
}
