//! Big reads (SMEMBERS, HGETALL, HKEYS, HVALS, LRANGE, the ZRANGE forms, SUNION/SINTER/SDIFF)
//! whose reply is encoded off the executor from a snapshot (`Reply::Deferred`, `types::cow`): the
//! reply must be the collection as it was when the command ran, whatever writers do while it is
//! encoded and sent.
//!
//! - A pipeline that reads a big collection and then changes it in every way the storage knows
//!   (removals that mark arena entries dead and swap slab slots, a compaction, same-length value
//!   overwrites in place, growth into new chunks and segments), all in one batch so the writes
//!   run before the first reply is encoded: each read must give the state at its own position,
//!   compared with real Redis running the same pipeline (as sets: hashtable order is undefined).
//! - A writer on another connection removing and adding members in a known order while big
//!   reads run: every reply must be a point-in-time state (the removed and the added members
//!   each form a prefix of the writer's sequence, one step apart at most), never a torn mix.
//! - The same reads inside MULTI, Lua and RESP3, which encode in place.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{encode, parse_value, Client, RedisServer, TestServer, Value};

/// More than `commands::DEFER_MIN_ELEMENTS`, and several 64 Ki-element slab segments for hashes.
const N: usize = 150_000;

fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Agg(_, Some(items)) => items,
        other => panic!("not an aggregate: {other:?}"),
    }
}

fn bulk(v: &Value) -> Vec<u8> {
    match v {
        Value::Bulk(Some(b)) => b.clone(),
        other => panic!("not a bulk: {other:?}"),
    }
}

fn set_of(v: Value) -> BTreeSet<Vec<u8>> {
    items(v).iter().map(bulk).collect()
}

fn map_of(v: Value) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let it = items(v);
    it.chunks(2).map(|p| (bulk(&p[0]), bulk(&p[1]))).collect()
}

/// Sends every command in one write (one batch on our side) and reads all the replies.
fn pipeline(c: &mut Client, cmds: &[Vec<Vec<u8>>]) -> Vec<Value> {
    let mut bytes = Vec::new();
    for argv in cmds {
        bytes.extend_from_slice(&encode(argv));
    }
    c.stream.write_all(&bytes).expect("send pipeline");
    cmds.iter().map(|_| parse_value(&c.read_reply().expect("reply"))).collect()
}

fn argv(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// `verb key` followed by `prefix:i` (and `value` after each, for a hash) for `i` in `range`.
fn bulk_cmd(verb: &str, key: &str, prefix: &str, range: std::ops::Range<usize>, value: Option<&str>) -> Vec<Vec<u8>> {
    let mut a = vec![verb.as_bytes().to_vec(), key.as_bytes().to_vec()];
    for i in range {
        a.push(format!("{prefix}:{i}").into_bytes());
        if let Some(v) = value {
            a.push(format!("{v}:{i:06}").into_bytes());
        }
    }
    a
}

fn load(c: &mut Client) {
    for from in (0..N).step_by(10_000) {
        c.cmd(&bulk_cmd("SADD", "s", "m", from..from + 10_000, None));
        c.cmd(&bulk_cmd("HSET", "h", "f", from..from + 10_000, Some("v")));
    }
}

/// The read-then-write pipeline, one batch: each read's reply is the state at its position.
fn read_write_pipeline() -> Vec<Vec<Vec<u8>>> {
    vec![
        argv(&[b"SMEMBERS", b"s"]),
        argv(&[b"HGETALL", b"h"]),
        // Small writes: in the same read, so the same batch as the reads before them, and
        // run before those are encoded.
        argv(&[b"SREM", b"s", b"m:7", b"m:140000"]),
        argv(&[b"SADD", b"s", b"small:1"]),
        argv(&[b"HSET", b"h", b"f:3", b"w:000003", b"f:149999", b"w:149999"]),
        argv(&[b"HDEL", b"h", b"f:0"]),
        // Same-length overwrites in place, removals (slab swaps), growth into new chunks.
        bulk_cmd("HSET", "h", "f", 0..20_000, Some("w")),
        bulk_cmd("SREM", "s", "m", 0..30_000, None),
        bulk_cmd("HDEL", "h", "f", 40_000..70_000, None),
        bulk_cmd("SADD", "s", "n", 0..40_000, None),
        bulk_cmd("HSET", "h", "g", 0..40_000, Some("x")),
        argv(&[b"HKEYS", b"h"]),
        argv(&[b"SMEMBERS", b"s"]),
        // Most of the set goes: removed entries outweigh live ones, so the arena is compacted.
        bulk_cmd("SREM", "s", "m", 30_000..N, None),
        argv(&[b"HVALS", b"h"]),
        argv(&[b"SMEMBERS", b"s"]),
        argv(&[b"SCARD", b"s"]),
    ]
}

#[test]
fn replies_are_the_state_at_the_command_despite_later_writes_in_the_batch() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        load(&mut c);
        results.push(pipeline(&mut c, &read_write_pipeline()));
    }
    let (theirs, mine) = (&results[0], &results[1]);
    // What each read must hold, worked out independently of both servers.
    let first: BTreeSet<Vec<u8>> = (0..N).map(|i| format!("m:{i}").into_bytes()).collect();
    assert_eq!(set_of(mine[0].clone()), first);
    let h0: BTreeMap<Vec<u8>, Vec<u8>> =
        (0..N).map(|i| (format!("f:{i}").into_bytes(), format!("v:{i:06}").into_bytes())).collect();
    assert_eq!(map_of(mine[1].clone()), h0, "HGETALL saw a later write");
    for (i, (a, b)) in theirs.iter().zip(mine.iter()).enumerate() {
        match i {
            1 => assert_eq!(map_of(a.clone()), map_of(b.clone()), "reply {i}"),
            0 | 11 | 12 | 14 | 15 => {
                let (mut x, mut y) = (items(a.clone()), items(b.clone()));
                x.sort_by_key(bulk);
                y.sort_by_key(bulk);
                assert_eq!(x, y, "reply {i}");
            }
            _ => assert_eq!(a, b, "reply {i}"),
        }
    }
}

/// Lists keep their order, so LRANGE replies are compared byte for byte with Redis's: big
/// ranges read, then the list changed at both ends and in the middle in the same batch.
#[test]
fn lrange_is_the_list_at_the_command_despite_later_writes() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let cmds = vec![
        argv(&[b"LRANGE", b"l", b"0", b"-1"]),
        argv(&[b"LRANGE", b"l", b"1000", b"-1000"]),
        argv(&[b"LPOP", b"l", b"3"]),
        argv(&[b"RPUSH", b"l", b"tail", b"12345"]),
        argv(&[b"LSET", b"l", b"50000", b"changed"]),
        argv(&[b"LINSERT", b"l", b"BEFORE", b"e:70000", b"inserted"]),
        argv(&[b"LREM", b"l", b"0", b"e:90000"]),
        argv(&[b"LRANGE", b"l", b"0", b"-1"]),
        argv(&[b"LTRIM", b"l", b"5000", b"-5000"]),
        argv(&[b"LRANGE", b"l", b"-100000", b"100000"]),
        bulk_cmd("LPUSH", "l", "h", 0..20_000, None),
        argv(&[b"LRANGE", b"l", b"0", b"-1"]),
    ];
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        for from in (0..N).step_by(10_000) {
            let mut a = bulk_cmd("RPUSH", "l", "e", from..from + 10_000, None);
            // Integers too: stored in binary, formatted when encoded.
            a.extend((from..from + 100).map(|i| i.to_string().into_bytes()));
            c.cmd(&a);
        }
        results.push(pipeline(&mut c, &cmds));
    }
    for (i, (a, b)) in results[0].iter().zip(results[1].iter()).enumerate() {
        assert!(a == b, "reply {i} differs from Redis's");
    }
    assert_eq!(items(results[1][0].clone()).len(), N + N / 100);
}

#[test]
fn resp3_multi_and_lua_give_the_same_members() {
    let ours = TestServer::new();
    let mut c = ours.client();
    load(&mut c);
    let plain = set_of(parse_value(&c.line("SMEMBERS s")));
    assert_eq!(plain.len(), N);
    // Inside MULTI the read is encoded in place, still before the write queued after it.
    let replies = pipeline(
        &mut c,
        &[argv(&[b"MULTI"]), argv(&[b"SMEMBERS", b"s"]), argv(&[b"SADD", b"s", b"extra"]), argv(&[b"EXEC"])],
    );
    let exec = items(replies[3].clone());
    assert_eq!(set_of(exec[0].clone()), plain);
    let lua = parse_value(&c.cmd(&[b"EVAL" as &[u8], b"return #redis.call('smembers', KEYS[1])", b"1", b"s"]));
    assert_eq!(lua, Value::Int(N as i64 + 1));
    c.line("HELLO 3");
    let r3 = c.line("SMEMBERS s");
    assert!(r3.starts_with(format!("~{}\r\n", N + 1).as_bytes()), "RESP3 set header");
    let h3 = c.line("HGETALL h");
    assert!(h3.starts_with(format!("%{N}\r\n").as_bytes()), "RESP3 map header");
    // CLIENT REPLY SKIP drops the big reply, and only it.
    let mut bytes = encode(&[&b"CLIENT"[..], b"REPLY", b"SKIP"]);
    bytes.extend_from_slice(&encode(&[&b"SMEMBERS"[..], b"s"]));
    bytes.extend_from_slice(&encode(&[&b"PING"[..]]));
    c.stream.write_all(&bytes).expect("send");
    assert_eq!(c.read_reply().expect("reply"), b"+PONG\r\n");
    assert_eq!(c.line("PING"), b"+PONG\r\n", "nothing else was sent");
}

/// Every reply a reader gets while a writer removes `m:i` and adds `n:i` for i = 0, 1, 2, ...
/// (SREM then SADD) must be one state of that sequence.
#[test]
fn a_concurrent_writer_never_tears_a_reply() {
    let ours = TestServer::new();
    let mut c = ours.client();
    load(&mut c);
    let stop = Arc::new(AtomicBool::new(false));
    let port = ours.port;
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut w = Client::connect(port);
            let mut i = 0;
            // Up to half way: past it, the rewrites reach fields the deletions already took
            // and recreate them, which the checks below do not model.
            while !stop.load(Ordering::Relaxed) && i < N / 2 {
                w.cmd(&[&b"SREM"[..], b"s", format!("m:{i}").as_bytes()]);
                w.cmd(&[&b"SADD"[..], b"s", format!("n:{i}").as_bytes()]);
                w.cmd(&[&b"HDEL"[..], b"h", format!("f:{i}").as_bytes()]);
                w.cmd(&[
                    &b"HSET"[..],
                    b"h",
                    format!("f:{}", N - 1 - i).as_bytes(),
                    format!("w:{:06}", N - 1 - i).as_bytes(),
                ]);
                i += 1;
            }
            i
        })
    };
    for _ in 0..8 {
        let s = set_of(parse_value(&c.line("SMEMBERS s")));
        let removed = (0..N).take_while(|i| !s.contains(format!("m:{i}").as_bytes())).count();
        let added = (0..N).take_while(|i| s.contains(format!("n:{i}").as_bytes())).count();
        assert!(added == removed || added + 1 == removed, "torn SMEMBERS: {removed} removed, {added} added");
        for i in removed..N {
            assert!(s.contains(format!("m:{i}").as_bytes()), "m:{i} missing after a prefix of {removed}");
        }
        assert_eq!(s.len(), N - removed + added);
        let h = map_of(parse_value(&c.line("HGETALL h")));
        let deleted = (0..N).take_while(|i| !h.contains_key(format!("f:{i}").as_bytes())).count();
        let rewritten = (0..N)
            .take_while(|i| h.get(format!("f:{}", N - 1 - i).as_bytes()).is_some_and(|v| v.starts_with(b"w:")))
            .count();
        assert!(
            rewritten == deleted || rewritten + 1 == deleted || deleted * 2 >= N,
            "torn HGETALL: {deleted} deleted, {rewritten} rewritten"
        );
        for i in deleted..N - rewritten {
            let v = h.get(format!("f:{i}").as_bytes()).unwrap_or_else(|| panic!("f:{i} missing"));
            assert_eq!(v, format!("v:{i:06}").as_bytes(), "f:{i}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let steps = writer.join().expect("writer");
    assert!(steps > 0);
}

/// Big ZRANGE forms (by rank, REV, BYSCORE with LIMIT, BYLEX, WITHSCORES in both protocols) read,
/// then the zset changed in the same batch: each reply is the zset at its own position, byte for
/// byte as Redis sends it (a zset's order is defined, scores included).
#[test]
fn zrange_is_the_zset_at_the_command_despite_later_writes() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let reads = |out: &mut Vec<Vec<Vec<u8>>>| {
        out.push(argv(&[b"ZRANGE", b"z", b"0", b"-1", b"WITHSCORES"]));
        out.push(argv(&[b"ZRANGE", b"z", b"0", b"-1"]));
        out.push(argv(&[b"ZREVRANGE", b"z", b"100", b"-100", b"WITHSCORES"]));
        out.push(argv(&[b"ZRANGEBYSCORE", b"z", b"(10", b"+inf", b"LIMIT", b"5", b"100000"]));
        out.push(argv(&[b"ZRANGE", b"z", b"+inf", b"-inf", b"BYSCORE", b"REV", b"WITHSCORES"]));
        out.push(argv(&[b"ZRANGE", b"lex", b"-", b"+", b"BYLEX"]));
    };
    let mut cmds = Vec::new();
    reads(&mut cmds);
    cmds.push(argv(&[b"ZADD", b"z", b"-1", b"m:5", b"2.5", b"new", b"1e300", b"top"]));
    cmds.push(argv(&[b"ZREM", b"z", b"m:7", b"m:140000"]));
    cmds.push(argv(&[b"ZINCRBY", b"z", b"0.125", b"m:99"]));
    cmds.push(argv(&[b"ZREMRANGEBYRANK", b"z", b"1000", b"30000"]));
    cmds.push(bulk_cmd("ZREM", "lex", "l", 0..30_000, None));
    let mut readd = vec![b"ZADD".to_vec(), b"z".to_vec()];
    for i in 0..20_000 {
        readd.push(format!("{}", i as f64 / 3.0).into_bytes());
        readd.push(format!("q:{i}").into_bytes());
    }
    cmds.push(readd);
    reads(&mut cmds);
    cmds.push(argv(&[b"HELLO", b"3"]));
    cmds.push(argv(&[b"ZRANGE", b"z", b"0", b"-1", b"WITHSCORES"]));
    cmds.push(argv(&[b"DEL", b"z"]));
    cmds.push(argv(&[b"ZRANGE", b"lex", b"0", b"-1", b"WITHSCORES"]));
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        for from in (0..N).step_by(10_000) {
            let mut a = vec![b"ZADD".to_vec(), b"z".to_vec()];
            let mut l = vec![b"ZADD".to_vec(), b"lex".to_vec()];
            for i in from..from + 10_000 {
                // Ties (many members per score) and fractional scores.
                a.push(if i % 3 == 0 { format!("{}", i / 7) } else { format!("{}.5", i % 1000) }.into_bytes());
                a.push(format!("m:{i}").into_bytes());
                l.push(b"0".to_vec());
                l.push(format!("l:{i}").into_bytes());
            }
            c.cmd(&a);
            c.cmd(&l);
        }
        results.push(pipeline(&mut c, &cmds));
    }
    for (i, (a, b)) in results[0].iter().zip(results[1].iter()).enumerate() {
        // HELLO's reply names the server and its version.
        if cmds[i][0] != b"HELLO" {
            assert!(a == b, "reply {i} ({:?}) differs from Redis's", String::from_utf8_lossy(&cmds[i][0]));
        }
    }
    assert_eq!(items(results[1][1].clone()).len(), N);
}

/// SUNION, SINTER and SDIFF of big sets (and of a big set with an intset) read, then the sets
/// changed in the same batch: each reply is the sets at its position, compared with Redis's as
/// sets (hashtable order is undefined), and intset results in Redis's ascending order.
#[test]
fn set_algebra_is_the_sets_at_the_command_despite_later_writes() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let reads = |out: &mut Vec<Vec<Vec<u8>>>| {
        out.push(argv(&[b"SUNION", b"a", b"b", b"ints"]));
        out.push(argv(&[b"SINTER", b"a", b"b"]));
        out.push(argv(&[b"SDIFF", b"a", b"b"]));
        out.push(argv(&[b"SDIFF", b"b", b"a", b"nosuch"]));
        out.push(argv(&[b"SINTER", b"a", b"a", b"b"]));
        out.push(argv(&[b"SINTER", b"a", b"nosuch"]));
        out.push(argv(&[b"SDIFF", b"a", b"a"]));
        // Integer results: an intset while within set-max-intset-entries (sorted), so bytes match.
        out.push(argv(&[b"SINTER", b"bigints", b"ints"]));
        out.push(argv(&[b"SDIFF", b"bigints", b"bigints2", b"a"]));
    };
    let mut cmds = Vec::new();
    reads(&mut cmds);
    cmds.push(bulk_cmd("SREM", "a", "m", 0..30_000, None));
    cmds.push(bulk_cmd("SADD", "b", "m", 0..5_000, None));
    cmds.push(bulk_cmd("SADD", "a", "z", 0..20_000, None));
    cmds.push(argv(&[b"SREM", b"bigints", b"3", b"30"]));
    reads(&mut cmds);
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        c.line("CONFIG SET set-max-intset-entries 512");
        for from in (0..N).step_by(10_000) {
            c.cmd(&bulk_cmd("SADD", "a", "m", from..from + 10_000, None));
            c.cmd(&bulk_cmd("SADD", "b", "m", from + 50_000..from + 60_000, None));
            let mut ints = vec![b"SADD".to_vec(), b"bigints".to_vec()];
            ints.extend((from..from + 10_000).map(|i| (i * 3).to_string().into_bytes()));
            c.cmd(&ints);
            let mut ints = vec![b"SADD".to_vec(), b"bigints2".to_vec()];
            ints.extend((from.max(100)..from + 10_000).map(|i| (i * 3).to_string().into_bytes()));
            c.cmd(&ints);
        }
        let mut ints = vec![b"SADD".to_vec(), b"ints".to_vec()];
        ints.extend((0..300).map(|i| (i * 10).to_string().into_bytes()));
        c.cmd(&ints);
        results.push(pipeline(&mut c, &cmds));
    }
    for (i, (a, b)) in results[0].iter().zip(results[1].iter()).enumerate() {
        let verb = String::from_utf8_lossy(&cmds[i][0]).to_string();
        let small = matches!(a, Value::Agg(_, Some(v)) if v.len() <= 512);
        if (i % 13 == 7 || i % 13 == 8) && small {
            assert!(a == b, "reply {i} ({verb}) differs from Redis's");
        } else if verb.starts_with('S') && verb != "SREM" && verb != "SADD" {
            assert_eq!(set_of(a.clone()), set_of(b.clone()), "reply {i} ({verb})");
        } else {
            assert_eq!(a, b, "reply {i} ({verb})");
        }
    }
    assert_eq!(set_of(results[1][0].clone()).len(), N + 50_000 + 300);
    assert_eq!(items(results[1][8].clone()).len(), 100);
    assert_eq!(items(results[1][21].clone()).len(), 98);
}

/// Whether a reply is an array of integers in ascending order (an intset's order).
fn ascending_ints(v: &Value) -> bool {
    let Value::Agg(_, Some(items)) = v else { return false };
    let ints: Option<Vec<i64>> =
        items.iter().map(|i| std::str::from_utf8(&bulk(i)).ok().and_then(|s| s.parse().ok())).collect();
    ints.is_some_and(|v| v.windows(2).all(|w| w[0] < w[1]))
}

/// SUNION/SINTER/SDIFF over big intsets (set-max-intset-entries raised, so the inputs are
/// intset copies), a hashtable holding only integers, strings, missing keys, a key named twice
/// and a key of the wrong type, at two set-max-intset-entries settings, with the sets changed
/// later in the same batch: each reply the same set of members as Redis's, and the same bytes
/// wherever Redis's is in an intset's ascending order (the reply is streamed from the inputs
/// without a result set, so that order has to be recreated).
#[test]
fn set_algebra_of_intsets_repeated_and_missing_keys_matches_redis() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let reads = |out: &mut Vec<Vec<Vec<u8>>>| {
        for q in [
            &[&b"SUNION"[..], b"a", b"b"][..],
            &[b"SINTER", b"a", b"b", b"a"],
            &[b"SDIFF", b"a", b"b", b"b"],
            &[b"SUNION", b"a", b"a"],
            &[b"SDIFF", b"a", b"b", b"a"],
            &[b"SINTER", b"bi", b"bi2"],
            &[b"SUNION", b"bi", b"bi2"],
            &[b"SDIFF", b"bi", b"bi2"],
            &[b"SINTER", b"mix", b"bi"],
            &[b"SUNION", b"mix", b"small"],
            &[b"SDIFF", b"mix", b"bi"],
            &[b"SDIFF", b"bi", b"small", b"mix"],
            &[b"SUNION", b"bi", b"small", b"nosuch"],
            &[b"SDIFF", b"bi", b"nosuch"],
            &[b"SINTER", b"bi", b"nosuch"],
            &[b"SDIFF", b"nosuch", b"a"],
            &[b"SUNION", b"a", b"str"],
            &[b"SDIFF", b"a", b"str"],
            &[b"SDIFF", b"mix", b"mix", b"a"],
            &[b"SINTER", b"bi", b"bi"],
            &[b"SUNION", b"mix", b"mix"],
            &[b"SDIFF", b"mix", b"a", b"small"],
        ] {
            out.push(argv(q));
        }
    };
    let mut cmds = Vec::new();
    for limit in ["20000", "512"] {
        cmds.push(argv(&[b"CONFIG", b"SET", b"set-max-intset-entries", limit.as_bytes()]));
        reads(&mut cmds);
        cmds.push(bulk_cmd("SREM", "a", "m", 0..5_000, None));
        let mut add = vec![b"SADD".to_vec(), b"bi".to_vec()];
        add.extend((0..3000).map(|i| (i * 7 + 1).to_string().into_bytes()));
        cmds.push(add);
        cmds.push(argv(&[b"SREM", b"mix", b"3", b"33"]));
        reads(&mut cmds);
    }
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        c.line("CONFIG SET set-max-intset-entries 20000");
        // Big enough to be read off the executor (`DEFER_MIN_ELEMENTS`), small enough that
        // Redis, which answers the whole pipeline before writing, replies within the client's
        // timeout on a loaded machine.
        c.cmd(&bulk_cmd("SADD", "a", "m", 0..12_000, None));
        c.cmd(&bulk_cmd("SADD", "b", "m", 6_000..18_000, None));
        let mut ints = vec![b"SADD".to_vec(), b"mix".to_vec(), b"x".to_vec()];
        ints.extend((0..12_000).map(|i| i.to_string().into_bytes()));
        c.cmd(&ints);
        c.line("SREM mix x");
        // `mix` is a hashtable (it held a string once) of integers only.
        let mut ints = vec![b"SADD".to_vec(), b"bi".to_vec()];
        ints.extend((0..15_000).map(|i| (i * 3).to_string().into_bytes()));
        c.cmd(&ints);
        let mut ints = vec![b"SADD".to_vec(), b"bi2".to_vec()];
        ints.extend((0..15_000).map(|i| (i * 5).to_string().into_bytes()));
        c.cmd(&ints);
        let mut ints = vec![b"SADD".to_vec(), b"small".to_vec()];
        ints.extend((0..100).map(|i| i.to_string().into_bytes()));
        c.cmd(&ints);
        c.line("SET str v");
        results.push(pipeline(&mut c, &cmds));
    }
    let mut exact = 0;
    for (i, (a, b)) in results[0].iter().zip(results[1].iter()).enumerate() {
        let verb = String::from_utf8_lossy(&cmds[i][0]).to_string();
        if matches!(verb.as_str(), "SUNION" | "SINTER" | "SDIFF") && matches!(a, Value::Agg(..)) {
            assert_eq!(set_of(a.clone()), set_of(b.clone()), "reply {i} ({:?})", cmds[i]);
            if ascending_ints(a) && items(a.clone()).len() > 1 {
                exact += 1;
                assert!(a == b, "reply {i} ({:?}): Redis's is in ascending order, ours is not", cmds[i]);
            }
        } else {
            assert_eq!(a, b, "reply {i} ({verb})");
        }
    }
    assert!(exact >= 12, "only {exact} intset-ordered replies compared");
}

/// Everything the server sends on `c` until it closes the connection (or 5 s pass).
fn read_until_close(c: &mut Client) -> (Vec<u8>, bool) {
    use std::io::Read;
    c.stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).expect("timeout");
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match c.stream.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (got, true),
            Err(_) => return (got, false),
        }
    }
}

/// A big deferred reply counts against the client's output limit from the moment the command
/// runs: a client whose limit it breaks is closed with nothing sent (not even the replies before
/// it in the batch), as Redis closes it; under a limit it fits, the reply comes whole. Each case
/// side by side with Redis.
#[test]
fn a_big_deferred_reply_over_the_output_limit_closes_the_client_as_redis_does() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        load(&mut c);
        let mut z = vec![b"ZADD".to_vec(), b"z".to_vec()];
        for i in 0..10_000 {
            z.push(i.to_string().into_bytes());
            z.push(format!("m:{i}").into_bytes());
        }
        c.cmd(&z);
    }
    for (limit, reads) in [
        ("normal 1mb 0 0", vec![argv(&[b"SMEMBERS", b"s"])]),
        ("normal 1mb 0 0", vec![argv(&[b"PING"]), argv(&[b"HGETALL", b"h"])]),
        ("normal 100kb 0 0", vec![argv(&[b"ZRANGE", b"z", b"0", b"-1", b"WITHSCORES"])]),
        ("normal 100kb 0 0", vec![argv(&[b"SUNION", b"s", b"nosuch"])]),
        // Replies whose least size does not show the limit is broken (the executor cannot tell
        // before they are encoded): still nothing of the batch goes out.
        ("normal 1mb 0 0", vec![argv(&[b"PING"]), argv(&[b"SINTER", b"s", b"s"])]),
        ("normal 3mb 0 0", vec![argv(&[b"HGETALL", b"h"])]),
        ("normal 1mb 0 0", vec![argv(&[b"SDIFF", b"s", b"nosuch"]), argv(&[b"PING"])]),
        ("normal 1mb 0 0", vec![argv(&[b"SORT", b"s", b"BY", b"nosort"])]),
        ("normal 64mb 0 0", vec![argv(&[b"SINTER", b"s", b"s"]), argv(&[b"SDIFF", b"s", b"nosuch"])]),
        ("normal 64mb 0 0", vec![argv(&[b"SMEMBERS", b"s"]), argv(&[b"ZRANGE", b"z", b"0", b"-1"])]),
    ] {
        let mut outcomes = Vec::new();
        for server in [&redis, &ours] {
            let mut admin = server.client();
            assert_eq!(
                admin.cmd(&[&b"CONFIG"[..], b"SET", b"client-output-buffer-limit", limit.as_bytes()]),
                b"+OK\r\n"
            );
            let mut c = server.client();
            let mut bytes = Vec::new();
            for a in &reads {
                bytes.extend_from_slice(&encode(a));
            }
            c.stream.write_all(&bytes).expect("send");
            let (got, closed) = if limit == "normal 64mb 0 0" {
                let n: usize = reads.iter().map(|_| c.read_reply().expect("reply").len()).sum();
                (vec![0; n], false)
            } else {
                read_until_close(&mut c)
            };
            assert_eq!(admin.line("PING"), b"+PONG\r\n");
            assert_eq!(admin.line("CONFIG SET client-output-buffer-limit \"normal 0 0 0\""), b"+OK\r\n");
            outcomes.push((got.len(), closed));
        }
        assert_eq!(
            outcomes[1], outcomes[0],
            "{limit} {:?}: ours against Redis's (bytes received, closed)",
            reads[0][0]
        );
    }
}

/// Many clients reading big collections at once: the encodings run a few at a time on a
/// bounded number of threads (one per core), not one new thread each, and every reply is whole.
#[test]
fn concurrent_big_reads_use_a_bounded_number_of_threads() {
    let ours = TestServer::new();
    let mut c = ours.client();
    load(&mut c);
    let threads = |pid: u32| std::fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.count()).unwrap_or(0);
    let before = threads(ours.pid());
    let readers = 24;
    let port = ours.port;
    let pid = ours.pid();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut most = 0;
            while !stop.load(Ordering::Relaxed) {
                most = most.max(threads(pid));
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            most
        })
    };
    let handles: Vec<_> = (0..readers)
        .map(|i| {
            std::thread::spawn(move || {
                let mut r = Client::connect(port);
                // Several big reads pipelined per client, so they overlap.
                let cmds = vec![argv(if i % 2 == 0 { &[b"SMEMBERS", b"s"] } else { &[b"HGETALL", b"h"] }); 3];
                pipeline(&mut r, &cmds).into_iter().map(|v| items(v).len()).collect::<Vec<_>>()
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let want = if i % 2 == 0 { N } else { 2 * N };
        assert_eq!(h.join().expect("reader"), vec![want; 3]);
    }
    stop.store(true, Ordering::Relaxed);
    let most = sampler.join().expect("sampler");
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
    assert!(
        most <= before + cores + 2,
        "{most} threads at most during {readers} concurrent big reads ({before} before, {cores} cores)"
    );
}

/// Big SORTs without BY key lookups, GET or STORE (numeric, ALPHA, DESC, LIMIT, BY nosort) of a
/// list, a set and a zset, read and then changed in the same batch: each reply is the collection
/// at its position, byte for byte as Redis sends it (sets only where sorted: BY nosort keeps
/// the set's own order), the conversion error included.
#[test]
fn sort_is_the_collection_at_the_command_despite_later_writes() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let reads = |out: &mut Vec<Vec<Vec<u8>>>| {
        out.push(argv(&[b"SORT", b"l"]));
        out.push(argv(&[b"SORT", b"l", b"DESC", b"LIMIT", b"10", b"20000"]));
        out.push(argv(&[b"SORT", b"l", b"BY", b"nosort", b"DESC", b"LIMIT", b"100", b"20000"]));
        out.push(argv(&[b"SORT_RO", b"l", b"BY", b"nosort"]));
        out.push(argv(&[b"SORT", b"ns"]));
        out.push(argv(&[b"SORT", b"s", b"ALPHA", b"DESC"]));
        out.push(argv(&[b"SORT", b"s"]));
        out.push(argv(&[b"SORT", b"z", b"BY", b"nosort", b"DESC", b"LIMIT", b"5", b"10000"]));
        out.push(argv(&[b"SORT", b"z", b"ALPHA", b"LIMIT", b"0", b"7000"]));
        out.push(argv(&[b"SORT", b"s", b"BY", b"nosort"]));
    };
    let mut cmds = Vec::new();
    reads(&mut cmds);
    cmds.push(argv(&[b"LSET", b"l", b"5", b"-1.5"]));
    cmds.push(argv(&[b"LPUSH", b"l", b"100000000", b"-7"]));
    cmds.push(argv(&[b"RPOP", b"l", b"1000"]));
    cmds.push(bulk_cmd("SREM", "s", "m", 0..1_000, None));
    cmds.push(argv(&[b"SADD", b"ns", b"-3.25", b"1e10"]));
    cmds.push(argv(&[b"ZADD", b"z", b"-5", b"first", b"1e9", b"last"]));
    reads(&mut cmds);
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        load(&mut c);
        for from in (0..N).step_by(10_000) {
            let mut l = vec![b"RPUSH".to_vec(), b"l".to_vec()];
            let mut ns = vec![b"SADD".to_vec(), b"ns".to_vec()];
            let mut z = vec![b"ZADD".to_vec(), b"z".to_vec()];
            for i in from..from + 10_000 {
                l.push(((i * 7919) % 100_003).to_string().into_bytes());
                ns.push(format!("{}.25", (i * 31) % 50_000 + i).into_bytes());
                z.push((i % 100).to_string().into_bytes());
                z.push(format!("z:{i}").into_bytes());
            }
            c.cmd(&l);
            c.cmd(&ns);
            c.cmd(&z);
        }
        results.push(pipeline(&mut c, &cmds));
    }
    for (i, (a, b)) in results[0].iter().zip(results[1].iter()).enumerate() {
        if i % 16 == 9 {
            assert_eq!(set_of(a.clone()), set_of(b.clone()), "reply {i} (SORT s BY nosort)");
        } else {
            assert!(a == b, "reply {i} ({:?}) differs from Redis's", String::from_utf8_lossy(&cmds[i].concat()));
        }
    }
    assert!(matches!(&results[1][6], Value::Simple(b'-', _)), "SORT of non-numbers: {:?}", results[1][6]);
    assert_eq!(items(results[1][0].clone()).len(), N);
}

/// Big SORTs of integers, which sort in a compact form (32-bit or 64-bit values, or ALPHA over
/// short strings as packed bytes): values about 2^53, where distinct integers share a double
/// and Redis orders them by their bytes (those fall back to the general form), i64's extremes,
/// negatives, ALPHA, DESC, LIMIT and BY nosort over a list, a hashtable set and a zset of
/// integer members, compared byte for byte with Redis (the set's BY nosort as a set).
#[test]
fn big_sorts_of_integers_match_redis() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let mut cmds = Vec::new();
    for key in [&b"small"[..], b"wide", b"huge", b"si", b"zi"] {
        for opts in [
            &[][..],
            &[&b"DESC"[..]][..],
            &[b"ALPHA"],
            &[b"ALPHA", b"DESC", b"LIMIT", b"7", b"3000"],
            &[b"LIMIT", b"4000", b"-1"],
            &[b"BY", b"nosort", b"LIMIT", b"10", b"5000"],
            &[b"BY", b"nosort", b"DESC"],
        ] {
            let mut a = vec![b"SORT".to_vec(), key.to_vec()];
            a.extend(opts.iter().map(|o| o.to_vec()));
            cmds.push(a);
        }
    }
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        let mut small = vec![b"RPUSH".to_vec(), b"small".to_vec()];
        let mut wide = vec![b"RPUSH".to_vec(), b"wide".to_vec()];
        let mut huge = vec![b"RPUSH".to_vec(), b"huge".to_vec()];
        let mut si = vec![b"SADD".to_vec(), b"si".to_vec()];
        let mut zi = vec![b"ZADD".to_vec(), b"zi".to_vec()];
        for i in 0..6000i64 {
            small.push(((i * 7919) % 6007 - 3000).to_string().into_bytes());
            wide.push((((i * 7919) % 6007 - 3000) * 1_000_000_007).to_string().into_bytes());
            let h = match i % 6 {
                0 => (1i64 << 53) + i % 7,
                1 => -(1i64 << 53) - i % 5,
                2 => 99_999_999_999_999_999 + i % 3,
                3 => i64::MAX - i % 4,
                4 => i64::MIN + i % 4,
                _ => i - 3000,
            };
            huge.push(h.to_string().into_bytes());
            si.push(((i * 7919) % 60_007 - 20_000).to_string().into_bytes());
            zi.push((i % 10).to_string().into_bytes());
            zi.push(((i * 13) % 6007 - 100).to_string().into_bytes());
        }
        for a in [&small, &wide, &huge, &si, &zi] {
            c.cmd(a);
        }
        results.push(pipeline(&mut c, &cmds));
    }
    for (i, (a, b)) in results[0].iter().zip(results[1].iter()).enumerate() {
        let what = String::from_utf8_lossy(&cmds[i].join(&b' ')).to_string();
        if what.starts_with("SORT si BY nosort LIMIT") {
            // A range of the hash table's own order: only its length is Redis's.
            assert_eq!(items(a.clone()).len(), items(b.clone()).len(), "{what}");
        } else if what.starts_with("SORT si BY nosort") {
            assert!(set_of(a.clone()) == set_of(b.clone()), "{what}: not the same members");
        } else {
            assert!(a == b, "{what}: differs from Redis's");
        }
    }
    assert_eq!(items(results[1][0].clone()).len(), 6000);
}

/// Loads a stream `x` of N entries with IDs 1-0 .. N-0 and three fields (one of them numeric,
/// stored as an integer), ten thousand XADDs per pipeline.
fn load_stream(c: &mut Client) {
    for from in (0..N).step_by(10_000) {
        let cmds: Vec<Vec<Vec<u8>>> = (from..from + 10_000)
            .map(|i| {
                let id = format!("{}-0", i + 1);
                let (n, m) = (i.to_string(), format!("member:{i}"));
                argv(&[b"XADD", b"x", id.as_bytes(), b"f", n.as_bytes(), b"g", m.as_bytes(), b"h", b"abcdefghij"])
            })
            .collect();
        pipeline(c, &cmds);
    }
}

/// XRANGE and XREVRANGE of a big stream (`- +`, exclusive bounds, COUNT), then the stream
/// changed in the same batch (entries deleted inside blocks the reads share, whole blocks
/// trimmed away and a block trimmed in part, entries appended to the last block and to new
/// ones): each reply is the stream at its position, byte for byte Redis's.
#[test]
fn xrange_is_the_stream_at_the_command_despite_later_writes() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let reads = |out: &mut Vec<Vec<Vec<u8>>>| {
        out.push(argv(&[b"XRANGE", b"x", b"-", b"+"]));
        out.push(argv(&[b"XREVRANGE", b"x", b"+", b"-"]));
        out.push(argv(&[b"XRANGE", b"x", b"(1000-0", b"+", b"COUNT", b"50000"]));
        out.push(argv(&[b"XREVRANGE", b"x", b"140000", b"(200-0", b"COUNT", b"100000"]));
        out.push(argv(&[b"XRANGE", b"x", b"555", b"99999-0"]));
    };
    let mut cmds = Vec::new();
    reads(&mut cmds);
    cmds.push(argv(&[b"XDEL", b"x", b"5-0", b"140000-0", b"150000-0", b"7777-0"]));
    cmds.push(argv(&[b"XTRIM", b"x", b"MINID", b"10050"]));
    cmds.push(argv(&[b"XADD", b"x", b"200000-0", b"other", b"fields"]));
    for i in 0..5_000 {
        let id = format!("{}-1", 200_000 + i);
        cmds.push(argv(&[b"XADD", b"x", id.as_bytes(), b"f", b"late"]));
    }
    for i in (20_000..60_000).step_by(3) {
        let id = format!("{i}-0");
        cmds.push(argv(&[b"XDEL", b"x", id.as_bytes()]));
    }
    let second = cmds.len();
    reads(&mut cmds);
    cmds.push(argv(&[b"XTRIM", b"x", b"MAXLEN", b"1000"]));
    reads(&mut cmds);
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        load_stream(&mut c);
        results.push(pipeline(&mut c, &cmds));
    }
    for (i, (a, b)) in results[0].iter().zip(results[1].iter()).enumerate() {
        assert!(a == b, "reply {i} ({:?}) differs from Redis's", String::from_utf8_lossy(&cmds[i].concat()));
    }
    assert_eq!(items(results[1][0].clone()).len(), N);
    assert!(items(results[1][second].clone()).len() < N);
}

/// `MSET prefix:i v:i ...` for `i` in `range`.
fn mset(prefix: &str, range: std::ops::Range<usize>) -> Vec<Vec<u8>> {
    let mut a = bulk_cmd("MSET", "", prefix, range, Some("v"));
    a.remove(1);
    a
}

/// KEYS * and KEYS with a pattern over a big keyspace, then the keyspace changed in the same
/// batch: each reply is the keyspace at its position, logically expired keys left out (never
/// read, so still stored), compared with Redis's as sets.
#[test]
fn keys_is_the_keyspace_at_the_command_despite_later_writes() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let reads = |out: &mut Vec<Vec<Vec<u8>>>| {
        out.push(argv(&[b"KEYS", b"*"]));
        out.push(argv(&[b"KEYS", b"k:1*"]));
        out.push(argv(&[b"KEYS", b"k:?[0-4]?"]));
    };
    let mut cmds = Vec::new();
    reads(&mut cmds);
    cmds.push(bulk_cmd("DEL", "k", "k", 0..30_000, None));
    cmds.push(mset("n", 0..20_000));
    cmds.push(argv(&[b"RENAME", b"k:100000", b"renamed"]));
    // A TTL already past (deletes at once): a 1 ms TTL made the reads after it depend on how
    // long the KEYS before them took.
    cmds.push(argv(&[b"PEXPIREAT", b"k:100001", b"1"]));
    reads(&mut cmds);
    cmds.push(argv(&[b"FLUSHALL", b"ASYNC"]));
    reads(&mut cmds);
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        for from in (0..N).step_by(10_000) {
            c.cmd(&mset("k", from..from + 10_000));
        }
        // Keys whose TTL passes before the reads, never touched afterwards.
        for i in 0..2_000 {
            c.cmd(&[b"SET".as_slice(), format!("gone:{i}").as_bytes(), b"x", b"PX", b"1"]);
        }
        for i in 0..2_000 {
            c.cmd(&[b"SET".as_slice(), format!("k:1{i}:ttl").as_bytes(), b"x", b"PX", b"100000"]);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        results.push(pipeline(&mut c, &cmds));
    }
    for (i, (a, b)) in results[0].iter().zip(results[1].iter()).enumerate() {
        if cmds[i][0] == b"KEYS" {
            assert_eq!(
                set_of(a.clone()),
                set_of(b.clone()),
                "reply {i} (KEYS {:?})",
                String::from_utf8_lossy(&cmds[i][1])
            );
        } else {
            assert!(a == b, "reply {i} ({:?}) differs from Redis's", String::from_utf8_lossy(&cmds[i][0]));
        }
    }
    assert_eq!(items(results[1][0].clone()).len(), N + 2_000);
}

/// DUMP of big values of every kind, then the values changed in the same batch: each payload
/// is the value at its position. Both servers' payloads are restored into Redis and read back
/// (hashtable order differs between servers, so payloads are compared by what they hold).
#[test]
fn dump_is_the_value_at_the_command_despite_later_writes() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let keys: [&[u8]; 5] = [b"s", b"h", b"z", b"l", b"x"];
    let mut cmds = Vec::new();
    for k in keys {
        cmds.push(argv(&[b"DUMP", k]));
    }
    cmds.push(bulk_cmd("SREM", "s", "m", 0..30_000, None));
    cmds.push(bulk_cmd("SADD", "s", "n", 0..10_000, None));
    cmds.push(bulk_cmd("HSET", "h", "f", 0..20_000, Some("w")));
    cmds.push(bulk_cmd("HDEL", "h", "f", 40_000..70_000, None));
    cmds.push(argv(&[b"ZADD", b"z", b"-1", b"m:5", b"2.5", b"new"]));
    cmds.push(argv(&[b"ZREMRANGEBYRANK", b"z", b"1000", b"30000"]));
    cmds.push(argv(&[b"LSET", b"l", b"5", b"changed"]));
    cmds.push(argv(&[b"LTRIM", b"l", b"1000", b"-1000"]));
    cmds.push(argv(&[b"XDEL", b"x", b"5-0", b"140000-0"]));
    cmds.push(argv(&[b"XTRIM", b"x", b"MINID", b"10050"]));
    cmds.push(argv(&[b"XADD", b"x", b"200000-0", b"other", b"fields"]));
    for k in keys {
        cmds.push(argv(&[b"DUMP", k]));
    }
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        load(&mut c);
        load_stream(&mut c);
        for from in (0..N).step_by(10_000) {
            c.cmd(&bulk_cmd("RPUSH", "l", "e", from..from + 10_000, None));
            let mut z = vec![b"ZADD".to_vec(), b"z".to_vec()];
            for i in from..from + 10_000 {
                z.push(format!("{}.5", i % 1000).into_bytes());
                z.push(format!("m:{i}").into_bytes());
            }
            c.cmd(&z);
        }
        results.push(pipeline(&mut c, &cmds));
    }
    let mut r = redis.client();
    let dumps: Vec<usize> = (0..cmds.len()).filter(|&i| cmds[i][0] == b"DUMP").collect();
    for &i in &dumps {
        let k = cmds[i][1].clone();
        let read: Vec<Vec<u8>> = match k.as_slice() {
            b"s" => argv(&[b"SMEMBERS"]),
            b"h" => argv(&[b"HGETALL"]),
            b"z" => argv(&[b"ZRANGE", b"", b"0", b"-1", b"WITHSCORES"]),
            b"l" => argv(&[b"LRANGE", b"", b"0", b"-1"]),
            _ => argv(&[b"XRANGE", b"", b"-", b"+"]),
        };
        let mut got = Vec::new();
        for (who, res) in ["redis", "ours"].iter().zip(&results) {
            let name = format!("restored:{who}:{i}").into_bytes();
            let payload = bulk(&res[i]);
            let reply = r.cmd(&[b"RESTORE".as_slice(), &name, b"0", &payload]);
            assert_eq!(reply, b"+OK\r\n", "RESTORE of {who}'s DUMP {i}");
            let mut cmd = read.clone();
            if cmd.len() == 1 {
                cmd.push(name.clone());
            } else {
                cmd[1] = name.clone();
            }
            got.push(parse_value(&r.cmd(&cmd)));
        }
        match k.as_slice() {
            b"s" => assert_eq!(set_of(got[0].clone()), set_of(got[1].clone()), "DUMP {i} of s"),
            b"h" => assert_eq!(map_of(got[0].clone()), map_of(got[1].clone()), "DUMP {i} of h"),
            _ => assert!(got[0] == got[1], "DUMP {i} of {}", String::from_utf8_lossy(&k)),
        }
    }
    // The later DUMPs saw the writes.
    assert_ne!(bulk(&results[1][dumps[0]]), bulk(&results[1][dumps[5]]));
}

/// From INFO text: `total_error_replies`, the errorstats lines, and the calls / failed_calls /
/// rejected_calls of the SORT commands (their times differ between servers).
fn error_counts(info: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(info);
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("total_error_replies:") || line.starts_with("errorstat_") {
            out.push(line.to_string());
        } else if line.starts_with("cmdstat_sort") {
            let (name, fields) = line.split_once(':').unwrap_or((line, ""));
            let kept: Vec<&str> = fields
                .split(',')
                .filter(|f| {
                    f.starts_with("calls=") || f.starts_with("failed_calls=") || f.starts_with("rejected_calls=")
                })
                .collect();
            out.push(format!("{name}:{}", kept.join(",")));
        }
    }
    // commandstats' order is the command table's, which differs between servers.
    out.sort();
    out
}

/// A big SORT of members that are not all numbers fails with Redis's conversion error, whether
/// it was sorted off the executor (alone in its batch) or in place (followed by more commands in
/// its batch, inside MULTI): INFO's errorstats, total_error_replies and the command's
/// failed_calls count it exactly as Redis's do, on the same connection right after it and on
/// another one.
#[test]
fn a_failed_big_sort_counts_in_info_as_in_redis() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let mut results = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        let mut other = server.client();
        for from in (0..N).step_by(10_000) {
            let mut l = vec![b"RPUSH".to_vec(), b"l".to_vec()];
            for i in from..from + 10_000 {
                l.push(if i == 77_777 { b"not-a-number".to_vec() } else { (i % 1000).to_string().into_bytes() });
            }
            c.cmd(&l);
        }
        c.cmd(&[b"CONFIG".as_slice(), b"RESETSTAT"]);
        let info = argv(&[b"INFO", b"all"]);
        let mut seen = Vec::new();
        // Alone in its batch (off the executor on our side), then INFO from another client.
        let r = c.cmd(&[b"SORT".as_slice(), b"l"]);
        assert!(
            r.starts_with(b"-ERR One or more scores can't be converted into double"),
            "{}",
            String::from_utf8_lossy(&r)
        );
        seen.push(error_counts(&other.cmd(&info)));
        let r = c.cmd(&[b"SORT_RO".as_slice(), b"l", b"DESC"]);
        assert!(r.starts_with(b"-ERR"));
        seen.push(error_counts(&c.cmd(&info)));
        // Followed by INFO in the same batch.
        let replies = pipeline(&mut c, &[argv(&[b"SORT", b"l", b"LIMIT", b"0", b"10"]), info.clone()]);
        seen.push(error_counts(&bulk(&replies[1])));
        // Inside MULTI, then one that succeeds (ALPHA) and one BY nosort.
        let replies = pipeline(
            &mut c,
            &[argv(&[b"MULTI"]), argv(&[b"SORT", b"l"]), argv(&[b"EXEC"]), argv(&[b"SORT", b"l", b"ALPHA"])],
        );
        assert!(matches!(&replies[3], Value::Agg(_, Some(v)) if v.len() == N));
        c.cmd(&[b"SORT".as_slice(), b"l", b"BY", b"nosort"]);
        seen.push(error_counts(&other.cmd(&info)));
        results.push(seen);
    }
    assert_eq!(results[0], results[1]);
    assert!(
        results[1][0].iter().any(|l| l.starts_with("cmdstat_sort:calls=1,rejected_calls=0,failed_calls=1")),
        "{:?}",
        results[1][0]
    );
}

/// The `omem=` figure of the client named `name` in CLIENT LIST.
fn omem_of(admin: &mut Client, name: &str) -> Option<u64> {
    let list = admin.line("CLIENT LIST");
    let text = String::from_utf8_lossy(&list).into_owned();
    let line = text.lines().find(|l| l.contains(&format!(" name={name} ")))?;
    let field = line.split(' ').find_map(|f| f.strip_prefix("omem="))?;
    field.parse().ok()
}

/// A big reply to a client that does not read goes out piece by piece: while it waits, the
/// client's output (CLIENT LIST omem) is a few pieces, not the whole reply (some 20 MB here);
/// other clients are served meanwhile; the client may go on writing a long pipeline without
/// reading (it must not block on its own writes while the server waits for it to read); and
/// once it reads, the replies are whole and in order, the same as Redis's.
#[test]
fn a_slow_reader_of_a_big_reply_holds_a_few_pieces_and_may_keep_writing() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let value = "v".repeat(1000);
    let mut replies = Vec::new();
    for (i, server) in [&redis, &ours].into_iter().enumerate() {
        let mut c = server.client();
        for from in (0..20_000).step_by(1_000) {
            let mut a = vec![b"HSET".to_vec(), b"h".to_vec()];
            for i in from..from + 1_000 {
                a.push(format!("f:{i}").into_bytes());
                a.push(format!("{value}{i}").into_bytes());
            }
            c.cmd(&a);
        }
        let mut slow = server.client();
        assert_eq!(slow.line("CLIENT SETNAME slow"), b"+OK\r\n");
        // The big read, then 4 MB of small commands, none of their replies read yet.
        let mut bytes = encode(&argv(&[b"HGETALL", b"h"]));
        let set = encode(&argv(&[b"SET", b"k", &[b'x'; 100]]));
        for _ in 0..4 * 1024 * 1024 / set.len() {
            bytes.extend_from_slice(&set);
        }
        let sets = (bytes.len() - encode(&argv(&[b"HGETALL", b"h"])).len()) / set.len();
        bytes.extend_from_slice(&encode(&argv(&[b"HLEN", b"h"])));
        let mut writer = slow.stream.try_clone().expect("clone");
        let sender = std::thread::spawn(move || writer.write_all(&bytes).is_ok());
        std::thread::sleep(std::time::Duration::from_millis(500));
        let mut admin = server.client();
        assert_eq!(admin.line("PING"), b"+PONG\r\n");
        if i == 1 {
            let omem = omem_of(&mut admin, "slow").expect("the slow client in CLIENT LIST");
            assert!(omem < 4 << 20, "omem {omem} while a 20 MB reply waits for its reader");
        }
        let big = parse_value(&slow.read_reply().expect("HGETALL"));
        assert!(sender.join().expect("sender"), "the pipeline could not be written");
        for _ in 0..sets {
            assert_eq!(slow.read_reply().expect("SET"), b"+OK\r\n");
        }
        assert_eq!(slow.read_reply().expect("HLEN"), b":20000\r\n");
        replies.push(map_of(big));
    }
    assert_eq!(replies[0].len(), 20_000);
    assert_eq!(replies[1], replies[0]);
}
