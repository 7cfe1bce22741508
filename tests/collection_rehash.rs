//! Collections whose hash tables resize while clients use them, side by side with real Redis:
//! a full SSCAN / HSCAN / ZSCAN running while the collection grows or shrinks must return every
//! member present throughout (Redis's SCAN guarantee), random picks and pops during a resize
//! must return members, the final contents must equal Redis's, and DEBUG HTSTATS-KEY must print
//! Redis 7.0's blocks (table sizes and counts where both servers size the same way; chain
//! figures depend on the hash function and are only checked for shape).

mod common;

use std::collections::BTreeSet;

use common::{parse_value, Client, RedisServer, TestServer, Value};

fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Agg(_, Some(items)) => items,
        other => panic!("not an array: {other:?}"),
    }
}

fn bulk(v: &Value) -> Vec<u8> {
    match v {
        Value::Bulk(Some(b)) => b.clone(),
        Value::Int(i) => i.to_string().into_bytes(),
        other => panic!("not a bulk: {other:?}"),
    }
}

/// Both servers, with DEBUG allowed; None where Redis is missing and the tests may skip.
fn servers() -> Option<(common::Server, common::Server)> {
    drop(RedisServer::or_skip()?);
    let debug = ["--enable-debug-command", "yes"];
    Some((RedisServer::with_args(&debug), TestServer::with_args(&debug)))
}

fn cmd(c: &mut Client, argv: &[&[u8]]) -> Value {
    parse_value(&c.cmd(argv))
}

/// The members (or fields: every other element when `pairs`) of an array reply.
fn members(v: Value, pairs: bool) -> BTreeSet<Vec<u8>> {
    items(v).iter().step_by(if pairs { 2 } else { 1 }).map(bulk).collect()
}

/// Adds `n` members (or fields) named `prefix:i` from `from`.
fn add(c: &mut Client, kind: &str, key: &[u8], prefix: &str, from: usize, n: usize) {
    let mut argv: Vec<Vec<u8>> = vec![
        if kind == "set" {
            b"SADD".to_vec()
        } else if kind == "hash" {
            b"HSET".to_vec()
        } else {
            b"ZADD".to_vec()
        },
        key.to_vec(),
    ];
    for i in from..from + n {
        let m = format!("{prefix}:{i}").into_bytes();
        match kind {
            "set" => argv.push(m),
            "hash" => {
                argv.push(m);
                argv.push(b"v".to_vec());
            }
            _ => {
                argv.push(i.to_string().into_bytes());
                argv.push(m);
            }
        }
    }
    let refs: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
    c.cmd(&refs);
}

fn remove(c: &mut Client, kind: &str, key: &[u8], prefix: &str, from: usize, n: usize) {
    let verb: &[u8] = match kind {
        "set" => b"SREM",
        "hash" => b"HDEL",
        _ => b"ZREM",
    };
    let mut argv: Vec<Vec<u8>> = vec![verb.to_vec(), key.to_vec()];
    argv.extend((from..from + n).map(|i| format!("{prefix}:{i}").into_bytes()));
    let refs: Vec<&[u8]> = argv.iter().map(|a| &a[..]).collect();
    c.cmd(&refs);
}

/// Runs a full scan of `key`, calling `between(step)` after each call; returns what it saw.
fn full_scan(c: &mut Client, kind: &str, key: &[u8], mut between: impl FnMut(&mut Client, usize)) -> BTreeSet<Vec<u8>> {
    let verb: &[u8] = match kind {
        "set" => b"SSCAN",
        "hash" => b"HSCAN",
        _ => b"ZSCAN",
    };
    let mut seen = BTreeSet::new();
    let mut cursor = b"0".to_vec();
    let mut step = 0;
    loop {
        let mut reply = items(cmd(c, &[verb, key, &cursor, b"COUNT", b"10"]));
        let found = reply.pop().unwrap();
        cursor = bulk(&reply[0]);
        seen.extend(members(found, kind != "set"));
        step += 1;
        between(c, step);
        if cursor == b"0" {
            return seen;
        }
    }
}

/// The same workload on both servers: build, scan while growing, scan while shrinking.
/// Members seen, as a sorted set.
type Members = BTreeSet<Vec<u8>>;

/// Returns what the growing scan saw, what the shrinking scan saw, and the contents after.
fn scan_while_resizing(kind: &str, c: &mut Client) -> (Members, Members, Members) {
    let key = kind.as_bytes();
    add(c, kind, key, "stable", 0, 3000);
    // Growth from 3000 to 23000 members during the scan.
    let mut next = 0;
    let grown = full_scan(c, kind, key, |c, _| {
        if next < 20_000 {
            add(c, kind, key, "extra", next, 50);
            next += 50;
        }
    });
    // Shrinking back to the stable members during another scan.
    let mut left = next;
    let shrunk = full_scan(c, kind, key, |c, _| {
        let n = left.min(400);
        left -= n;
        remove(c, kind, key, "extra", left, n);
    });
    let range: &[&[u8]] = match kind {
        "set" => &[b"SMEMBERS", key],
        "hash" => &[b"HKEYS", key],
        _ => &[b"ZRANGE", key, b"0", b"-1"],
    };
    let after = members(cmd(c, range), false);
    (grown, shrunk, after)
}

#[test]
fn scans_keep_their_guarantee_while_tables_resize() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let stable: BTreeSet<Vec<u8>> = (0..3000).map(|i| format!("stable:{i}").into_bytes()).collect();
    for kind in ["set", "hash", "zset"] {
        let (mut r, mut o) = (redis.client(), ours.client());
        let (rg, rs, rafter) = scan_while_resizing(kind, &mut r);
        let (og, os, oafter) = scan_while_resizing(kind, &mut o);
        for (what, r, o) in [("grow", &rg, &og), ("shrink", &rs, &os)] {
            assert!(stable.is_subset(r), "{kind} {what}: redis missed stable members");
            let missed: Vec<_> =
                stable.difference(o).take(5).map(|m| String::from_utf8_lossy(m).into_owned()).collect();
            assert!(missed.is_empty(), "{kind} {what}: ferrodis missed {missed:?}");
        }
        assert_eq!(oafter, rafter, "{kind}: contents after the resizes differ");
        assert_eq!(oafter, stable);
    }
}

/// A shrink that starts late, with few members left (tables do not resize while a fork child
/// writes a snapshot), then inserts: new members go to the small target, which must also take
/// what the old array still holds. Ferrodis's open addressing once overfilled such a target,
/// and the next probe for an absent member never ended: the server hung on the fourth SADD.
/// Redis chains, so it has no such limit; the contents after must equal Redis's.
#[test]
fn inserts_after_a_shrink_that_a_snapshot_delayed() {
    let Some(redis) = RedisServer::or_skip() else { return };
    let ours = TestServer::new();
    let mut after = Vec::new();
    for server in [&redis, &ours] {
        let mut c = server.client();
        for kind in ["set", "zset"] {
            add(&mut c, kind, kind.as_bytes(), "m", 0, 1000);
        }
        c.cmd(&[&b"CONFIG"[..], b"SET", b"rdb-key-save-delay", b"300000"]);
        assert_eq!(c.cmd(&[&b"BGSAVE"[..]]), b"+Background saving started\r\n");
        for kind in ["set", "zset"] {
            remove(&mut c, kind, kind.as_bytes(), "m", 0, 998);
        }
        c.cmd(&[&b"CONFIG"[..], b"SET", b"rdb-key-save-delay", b"0"]);
        common::wait_until("the background save to end", || {
            common::info_field(&mut c, "persistence", "rdb_bgsave_in_progress") == "0"
        });
        let mut replies = Vec::new();
        for kind in ["set", "zset"] {
            remove(&mut c, kind, kind.as_bytes(), "m", 998, 1);
            for i in 0..8 {
                add(&mut c, kind, kind.as_bytes(), "new", i, 1);
                replies.push(cmd(
                    &mut c,
                    &[if kind == "set" { &b"SISMEMBER"[..] } else { b"ZSCORE" }, kind.as_bytes(), b"absent"],
                ));
            }
        }
        replies.push(cmd(&mut c, &[&b"SMEMBERS"[..], b"set"]));
        replies.push(cmd(&mut c, &[&b"ZRANGE"[..], b"zset", b"0", b"-1", b"WITHSCORES"]));
        after.push(replies);
    }
    let (ours_after, redis_after) = (after.pop().unwrap(), after.pop().unwrap());
    let sorted = |v: &Value| members(v.clone(), false);
    assert_eq!(ours_after.len(), redis_after.len());
    assert_eq!(sorted(&ours_after[16]), sorted(&redis_after[16]), "SMEMBERS");
    assert_eq!(ours_after[17], redis_after[17], "ZRANGE");
    assert_eq!(ours_after[..16], redis_after[..16]);
}

/// Random picks and pops while a set's table shrinks return members, and leave what Redis
/// leaves (counts; the members popped are random).
#[test]
fn random_picks_during_a_resize() {
    let Some((redis, ours)) = servers() else { return };
    for c in [&mut redis.client(), &mut ours.client()] {
        add(c, "set", b"s", "m", 0, 20_000);
        remove(c, "set", b"s", "m", 0, 19_000);
    }
    let (mut r, mut o) = (redis.client(), ours.client());
    let stats = bulk(&cmd(&mut o, &[b"DEBUG", b"HTSTATS-KEY", b"s"]));
    assert!(String::from_utf8_lossy(&stats).contains("Hash table 1 stats (rehashing target):"), "not resizing");
    let all: BTreeSet<Vec<u8>> = (19_000..20_000).map(|i| format!("m:{i}").into_bytes()).collect();
    for c in [&mut r, &mut o] {
        let got = members(cmd(c, &[b"SRANDMEMBER", b"s", b"-300"]), false);
        assert!(got.is_subset(&all));
        let got = items(cmd(c, &[b"SRANDMEMBER", b"s", b"300"]));
        assert_eq!(got.len(), 300);
        let popped = members(cmd(c, &[b"SPOP", b"s", b"100"]), false);
        assert_eq!(popped.len(), 100);
        assert!(popped.is_subset(&all));
        let rest = members(cmd(c, &[b"SMEMBERS", b"s"]), false);
        assert!(rest.is_disjoint(&popped));
        assert_eq!(rest.len() + popped.len(), all.len());
    }
    assert_eq!(cmd(&mut o, &[b"SCARD", b"s"]), cmd(&mut r, &[b"SCARD", b"s"]));
}

/// DEBUG HTSTATS-KEY: the same errors as Redis for encodings that are not hash tables, Redis's
/// block layout for those that are, and for hashes (sized as Redis sizes its dict) the same
/// table size and element count.
#[test]
fn htstats_key_reads_as_redis() {
    let Some((redis, ours)) = servers() else { return };
    let (mut r, mut o) = (redis.client(), ours.client());
    for c in [&mut r, &mut o] {
        c.cmd(&[&b"SADD"[..], b"ints", b"1", b"2"]);
        c.cmd(&[&b"HSET"[..], b"small", b"f", b"v"]);
        c.cmd(&[&b"SET"[..], b"str", b"v"]);
        add(c, "hash", b"h", "f", 0, 1000);
        add(c, "set", b"s", "m", 0, 300);
        add(c, "zset", b"z", "m", 0, 300);
        // Lookups step a resize to its end on both servers.
        for _ in 0..2000 {
            c.cmd(&[&b"HEXISTS"[..], b"h", b"f:1"]);
            c.cmd(&[&b"SISMEMBER"[..], b"s", b"m:1"]);
            c.cmd(&[&b"ZSCORE"[..], b"z", b"m:1"]);
        }
    }
    for key in [&b"ints"[..], b"small", b"str", b"nokey"] {
        let argv: &[&[u8]] = &[b"DEBUG", b"HTSTATS-KEY", key];
        assert_eq!(o.cmd(argv), r.cmd(argv), "DEBUG HTSTATS-KEY {}", String::from_utf8_lossy(key));
    }
    let shape = |text: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(text)
            .lines()
            .map(|l| l.split(':').next().unwrap_or("").to_string())
            .filter(|l| !l.starts_with("   "))
            .collect()
    };
    for key in [&b"h"[..], b"s", b"z"] {
        let argv: &[&[u8]] = &[b"DEBUG", b"HTSTATS-KEY", key];
        let (rt, ot) = (bulk(&parse_value(&r.cmd(argv))), bulk(&parse_value(&o.cmd(argv))));
        assert_eq!(
            shape(&ot),
            shape(&rt),
            "{}:\nours:\n{}\nredis:\n{}",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(&ot),
            String::from_utf8_lossy(&rt)
        );
        let head = |t: &[u8]| String::from_utf8_lossy(t).lines().take(3).map(String::from).collect::<Vec<_>>();
        if key == b"h" {
            assert_eq!(head(&ot), head(&rt), "{}", String::from_utf8_lossy(key));
        }
    }
}
