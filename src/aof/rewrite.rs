//! The dataset as commands: what an AOF base file holds with `aof-use-rdb-preamble no`, in
//! the forms Redis 7.0's rewriteAppendOnlyFile writes (FUNCTION LOAD first, then per database
//! SELECT and each key: SET, RPUSH, SADD, ZADD, HMSET in batches of 64, streams as XADD per
//! entry then XSETID and their groups, PEXPIREAT after a key with a TTL).

use std::io::{self, Write};

use super::encode_command;
use crate::db::Db;
use crate::functions::Libraries;
use crate::types::stream::{Stream, StreamId};
use crate::types::Value;

/// Items (or pairs) per variadic command (AOF_REWRITE_ITEMS_PER_CMD).
const ITEMS_PER_CMD: usize = 64;

/// Writes every library and key of `dbs` as commands to `out`.
pub fn write_dataset<W: Write>(out: &mut W, dbs: &[Db], functions: &Libraries) -> io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    for lib in &functions.libs {
        encode_command(&mut buf, &[&b"FUNCTION"[..], b"LOAD", &lib.code]);
    }
    for (i, db) in dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        encode_command(&mut buf, &[&b"SELECT"[..], i.to_string().as_bytes()]);
        for (key, value, expire) in db.iter_all() {
            write_key(&mut buf, key, value);
            if let Some(at) = expire {
                encode_command(&mut buf, &[&b"PEXPIREAT"[..], key, at.to_string().as_bytes()]);
            }
            if buf.len() >= 1 << 16 {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
    }
    out.write_all(&buf)
}

/// Emits `items` (already flattened) as `verb key item...` commands of at most `per_cmd` items.
fn batched(buf: &mut Vec<u8>, verb: &[u8], key: &[u8], items: &[Vec<u8>], per_cmd: usize) {
    for chunk in items.chunks(per_cmd) {
        let mut argv: Vec<&[u8]> = Vec::with_capacity(chunk.len() + 2);
        argv.push(verb);
        argv.push(key);
        argv.extend(chunk.iter().map(Vec::as_slice));
        encode_command(buf, &argv);
    }
}

fn write_key(buf: &mut Vec<u8>, key: &[u8], value: &Value) {
    match value {
        Value::Str(s) => s.with_bytes(|v| encode_command(buf, &[&b"SET"[..], key, v])),
        Value::List(l) => {
            let items: Vec<Vec<u8>> = l.iter().map(|e| e.with_bytes(<[u8]>::to_vec)).collect();
            batched(buf, b"RPUSH", key, &items, ITEMS_PER_CMD);
        }
        Value::Set(s) => {
            let mut items = Vec::new();
            s.for_each(|e| items.push(e.with_bytes(<[u8]>::to_vec)));
            batched(buf, b"SADD", key, &items, ITEMS_PER_CMD);
        }
        Value::ZSet(z) => {
            let mut items = Vec::new();
            z.walk(0, z.len().saturating_sub(1), false, &mut |member, score| {
                items.push(crate::util::num::fmt_g17(score).into_bytes());
                items.push(member.to_vec());
                true
            });
            batched(buf, b"ZADD", key, &items, ITEMS_PER_CMD * 2);
        }
        Value::Hash(h) => {
            let mut items = Vec::new();
            for (f, v) in h.iter() {
                items.push(f.to_vec());
                items.push(v.to_vec());
            }
            batched(buf, b"HMSET", key, &items, ITEMS_PER_CMD * 2);
        }
        Value::Stream(s) => write_stream(buf, key, s),
    }
}

fn write_stream(buf: &mut Vec<u8>, key: &[u8], s: &Stream) {
    let mut any = false;
    s.range(StreamId::MIN, StreamId::MAX, false, |e| {
        any = true;
        let id = e.id.to_bytes();
        let mut argv: Vec<Vec<u8>> = vec![b"XADD".to_vec(), key.to_vec(), id];
        e.for_each_pair(|f, v| {
            argv.push(f.to_vec());
            argv.push(v.to_vec());
        });
        encode_command(buf, &argv);
        true
    });
    if !any {
        // An empty stream still exists: created by an entry trimmed away at once.
        encode_command(buf, &[&b"XADD"[..], key, b"MAXLEN", b"0", b"0-1", b"x", b"y"]);
    }
    let (last, added, max_deleted) = (s.last_id.to_bytes(), s.entries_added.to_string(), s.max_deleted_id.to_bytes());
    encode_command(
        buf,
        &[&b"XSETID"[..], key, &last, b"ENTRIESADDED", added.as_bytes(), b"MAXDELETEDID", &max_deleted],
    );
    for (name, g) in &s.groups {
        let (last, read) = (g.last_id.to_bytes(), g.entries_read.to_string());
        encode_command(buf, &[&b"XGROUP"[..], b"CREATE", key, name, &last, b"ENTRIESREAD", read.as_bytes()]);
        for (cname, c) in &g.consumers {
            if c.pel.is_empty() {
                encode_command(buf, &[&b"XGROUP"[..], b"CREATECONSUMER", key, name, cname]);
                continue;
            }
            for id in &c.pel {
                let Some(n) = g.pel.get(id) else { continue };
                let (id, time, count) = (id.to_bytes(), n.delivery_time.to_string(), n.delivery_count.to_string());
                encode_command(
                    buf,
                    &[
                        &b"XCLAIM"[..],
                        key,
                        name,
                        cname,
                        b"0",
                        &id,
                        b"TIME",
                        time.as_bytes(),
                        b"RETRYCOUNT",
                        count.as_bytes(),
                        b"JUSTID",
                        b"FORCE",
                    ],
                );
            }
        }
    }
}
