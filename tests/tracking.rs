//! Client-side caching against real Redis and ferrodis side by side: CLIENT TRACKING option
//! errors, TRACKINGINFO / GETREDIR / CACHING, invalidation pushes in RESP3 (after the writer's own
//! reply), redirection to a RESP2 subscriber (`__redis__:invalidate` messages, null on flush,
//! `tracking-redir-broken`), BCAST prefixes with NOLOOP, OPTIN/OPTOUT, the INFO counters, and
//! keys tracked indirectly (a script's declared keys, eviction, a full tracking table).
//! Expected bytes come from the real server; client ids are replaced by a placeholder.

mod common;

use std::time::Duration;

use common::{Client, RedisServer, Server, TestServer};

const QUIET: Duration = Duration::from_millis(150);

/// The client's id as a number.
fn client_id(c: &mut Client) -> String {
    let reply = c.cmd(&["CLIENT", "ID"]);
    String::from_utf8_lossy(&reply[1..reply.len() - 2]).into_owned()
}

/// Replaces `:<id>\r\n` by `:ID\r\n` so replies of two servers with different ids compare.
fn mask(bytes: Vec<u8>, ids: &[&str]) -> Vec<u8> {
    let mut s = String::from_utf8_lossy(&bytes).into_owned();
    for id in ids {
        s = s.replace(&format!(":{id}\r\n"), ":ID\r\n");
    }
    s.into_bytes()
}

/// Everything the client has received by now (asynchronous pushes).
fn pending(c: &mut Client) -> Vec<u8> {
    c.drain(QUIET).bytes
}

fn scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut a = server.client();
    let mut b = server.client();
    out.push(b.cmd(&["FLUSHALL"]));

    // RESP3 tracking of the client's own reads: its own write is answered first, then invalidated.
    a.cmd(&["HELLO", "3"]);
    out.push(a.cmd(&["CLIENT", "TRACKING", "on"]));
    out.push(a.cmd(&["GET", "k"]));
    out.push(a.cmd(&["SET", "k", "1"]));
    out.push(pending(&mut a));
    // A key is invalidated once, then forgotten until read again.
    out.push(b.cmd(&["SET", "k", "2"]));
    out.push(pending(&mut a));
    out.push(a.cmd(&["MGET", "k", "j"]));
    out.push(b.cmd(&["MSET", "k", "3", "j", "4"]));
    out.push(pending(&mut a));
    // Expiry invalidates too: wait until the key is gone (a read of b expires it at the latest),
    // then the one invalidation push is read as a reply, not waited for.
    out.push(b.cmd(&["SET", "e", "v", "PX", "400"]));
    out.push(a.cmd(&["GET", "e"]));
    common::wait_until("the key with a 400 ms TTL to expire", || b.cmd(&["EXISTS", "e"]) == b":0\r\n");
    out.push(b.cmd(&["GET", "e"]));
    out.push(a.read_reply().expect("the expiry invalidation"));
    out.push(pending(&mut a));
    // FLUSHALL / FLUSHDB send a null; SWAPDB sends nothing.
    out.push(a.cmd(&["GET", "k"]));
    out.push(a.cmd(&["FLUSHALL"]));
    out.push(pending(&mut a));
    out.push(b.cmd(&["FLUSHDB"]));
    out.push(pending(&mut a));
    out.push(a.cmd(&["GET", "k"]));
    out.push(b.cmd(&["SWAPDB", "0", "1"]));
    out.push(b.cmd(&["SWAPDB", "0", "1"]));
    out.push(pending(&mut a));
    out.push(a.cmd(&["CLIENT", "TRACKINGINFO"]));
    out.push(a.cmd(&["CLIENT", "GETREDIR"]));
    out.push(
        b.cmd(&["INFO", "clients"])
            .split(|&c| c == b'\n')
            .filter(|l| l.starts_with(b"tracking"))
            .flatten()
            .copied()
            .collect(),
    );
    out.push(a.cmd(&["CLIENT", "TRACKING", "off"]));

    // Option errors and modes, in Redis's order of checks.
    let mut c = server.client();
    let c_id = client_id(&mut c);
    let lines: &[&[&str]] = &[
        &["CLIENT", "TRACKING", "on", "PREFIX", "a"],
        &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"],
        &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"],
        &["CLIENT", "TRACKING", "on", "REDIRECT", "999999"],
        &["CLIENT", "TRACKING", "on", "REDIRECT", "x"],
        &["CLIENT", "TRACKING", "on", "REDIRECT", "0"],
        &["CLIENT", "TRACKING", "on", "REDIRECT", &c_id, "REDIRECT", &c_id],
        &["CLIENT", "TRACKING", "maybe"],
        &["CLIENT", "TRACKING", "on", "FOO"],
        &["CLIENT", "TRACKING", "on", "PREFIX"],
        &["CLIENT", "TRACKING"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "CACHING", "x"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "on", "OPTIN"],
        &["CLIENT", "TRACKING", "on", "BCAST"],
        &["CLIENT", "TRACKING", "on", "OPTOUT"],
        &["CLIENT", "CACHING", "no"],
        &["CLIENT", "CACHING", "maybe"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a"],
        &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab"],
        &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "abc"],
        &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKING", "on", "OPTOUT", "NOLOOP", "REDIRECT", &c_id],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "TRACKING", "off"],
    ];
    for argv in lines {
        out.push(mask(a.cmd(argv), &[&c_id]));
    }

    // OPTIN: only reads after CACHING yes are tracked.
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "OPTIN"]));
    out.push(a.cmd(&["GET", "o1"]));
    out.push(a.cmd(&["CLIENT", "CACHING", "yes"]));
    out.push(a.cmd(&["GET", "o2"]));
    out.push(b.cmd(&["MSET", "o1", "1", "o2", "2"]));
    out.push(pending(&mut a));
    out.push(a.cmd(&["CLIENT", "TRACKING", "off"]));
    // OPTOUT: reads after CACHING no are not.
    out.push(a.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]));
    out.push(a.cmd(&["CLIENT", "CACHING", "no"]));
    out.push(a.cmd(&["GET", "o1"]));
    out.push(a.cmd(&["GET", "o2"]));
    out.push(b.cmd(&["MSET", "o1", "1", "o2", "2"]));
    out.push(pending(&mut a));
    out.push(a.cmd(&["CLIENT", "TRACKING", "off"]));

    // RESP2 tracking redirected to a subscriber of __redis__:invalidate.
    let mut r = server.client();
    let mut sub = server.client();
    let sub_id = client_id(&mut sub);
    out.push(sub.cmd(&["SUBSCRIBE", "__redis__:invalidate"]));
    out.push(r.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &sub_id]));
    out.push(r.cmd(&["GET", "foo"]));
    out.push(b.cmd(&["SET", "foo", "1"]));
    out.push(pending(&mut sub));
    out.push(r.cmd(&["GET", "foo"]));
    out.push(b.cmd(&["FLUSHALL"]));
    out.push(pending(&mut sub));
    // The redirect client goes away: a RESP3 tracking client is told, and the R flag shows.
    let clients = common::info_field(&mut b, "clients", "connected_clients");
    drop(sub);
    common::wait_until("the redirect client's disconnection", || {
        common::info_field(&mut b, "clients", "connected_clients") != clients
    });
    r.cmd(&["HELLO", "3"]);
    out.push(r.cmd(&["GET", "foo"]));
    out.push(b.cmd(&["SET", "foo", "2"]));
    out.push(mask(pending(&mut r), &[&sub_id]));
    out.push(mask(r.cmd(&["CLIENT", "TRACKINGINFO"]), &[&sub_id]));

    // BCAST with prefixes: one message per prefix, NOLOOP hides the client's own changes.
    let mut d = server.client();
    d.cmd(&["HELLO", "3"]);
    out.push(d.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b", "NOLOOP"]));
    out.push(b.cmd(&["MSET", "a1", "1", "b1", "2", "c1", "3", "a2", "x"]));
    out.push(pending(&mut d));
    out.push(d.cmd(&["SET", "a3", "1"]));
    out.push(pending(&mut d));
    out.push(d.cmd(&["CLIENT", "TRACKINGINFO"]));
    out.push(
        b.cmd(&["INFO", "stats"])
            .split(|&c| c == b'\n')
            .filter(|l| l.starts_with(b"tracking_total_prefixes"))
            .flatten()
            .copied()
            .collect(),
    );
    out
}

#[test]
fn tracking_matches_real_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = scenario(&redis);
    let got = scenario(&ferrodis);
    assert_eq!(expected.len(), got.len());
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(common::show(g), common::show(e), "step {i}");
    }
}

/// Redis's own benchmark client with --enable-tracking (RESP3 pushes interleaved with replies)
/// completes against ferrodis.
#[test]
fn redis_benchmark_with_tracking_completes() {
    let ferrodis = TestServer::new();
    // CI installs redis-tools: a missing benchmark fails the test rather than skipping it.
    let status = std::process::Command::new("redis-benchmark")
        .args(["-p", &ferrodis.port.to_string(), "--enable-tracking", "-q", "-n", "20000", "-t", "set,get"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("redis-benchmark cannot run ({e}): install redis-tools (or run `make test`)"));
    assert!(status.success(), "redis-benchmark failed: {status}");
}

/// CLIENT REPLY OFF/SKIP drop replies but not pushes (invalidations, pub/sub messages to self);
/// CACHING yes before MULTI covers the whole transaction; invalidations caused inside EXEC come
/// after EXEC's reply; NOLOOP hides the client's own writes.
fn pushes_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut a = server.client();
    let mut b = server.client();
    a.cmd(&["HELLO", "3"]);
    let steps: &[(bool, &[&str])] = &[
        (true, &["CLIENT", "TRACKING", "on"]),
        (true, &["GET", "rk"]),
        (true, &["CLIENT", "REPLY", "OFF"]),
        (false, &["SET", "rk", "1"]),
        (true, &["CLIENT", "REPLY", "ON"]),
        (true, &["GET", "rk"]),
        (true, &["CLIENT", "REPLY", "SKIP"]),
        (true, &["SET", "rk", "2"]),
        (true, &["CLIENT", "TRACKING", "off"]),
        (true, &["CLIENT", "TRACKING", "on", "OPTIN"]),
        (true, &["CLIENT", "CACHING", "yes"]),
        (true, &["MULTI"]),
        (true, &["GET", "m1"]),
        (true, &["GET", "m2"]),
        (true, &["EXEC"]),
        (true, &["GET", "m3"]),
        (false, &["MSET", "m1", "1", "m2", "2", "m3", "3"]),
        (true, &["CLIENT", "TRACKING", "off"]),
        (true, &["CLIENT", "TRACKING", "on"]),
        (true, &["GET", "q"]),
        (true, &["MULTI"]),
        (true, &["SET", "q", "1"]),
        (true, &["GET", "q"]),
        (true, &["EXEC"]),
        (true, &["CLIENT", "TRACKING", "on", "NOLOOP"]),
        (true, &["SET", "q", "3"]),
        (true, &["CLIENT", "TRACKING", "off"]),
        (true, &["SUBSCRIBE", "ch"]),
        (true, &["CLIENT", "REPLY", "OFF"]),
        (true, &["PUBLISH", "ch", "self"]),
        (false, &["PUBLISH", "ch", "other"]),
        (true, &["CLIENT", "REPLY", "ON"]),
        // (Un)subscribe confirmations are pushes in RESP3: CLIENT REPLY OFF / SKIP keep them.
        (true, &["CLIENT", "REPLY", "OFF"]),
        (true, &["SUBSCRIBE", "ch2"]),
        (true, &["PSUBSCRIBE", "p*"]),
        (true, &["SSUBSCRIBE", "sh"]),
        (true, &["PING"]),
        (true, &["UNSUBSCRIBE", "ch2"]),
        (true, &["PUNSUBSCRIBE", "p*"]),
        (true, &["SUNSUBSCRIBE", "sh"]),
        (true, &["CLIENT", "REPLY", "SKIP"]),
        (true, &["SUBSCRIBE", "ch3"]),
        (true, &["PING"]),
        (true, &["CLIENT", "REPLY", "SKIP"]),
        (true, &["UNSUBSCRIBE", "ch3"]),
        (true, &["CLIENT", "REPLY", "ON"]),
    ];
    // a's replies and pushes are one ordered stream, compared whole: a reply that comes late on a
    // loaded machine lands in a later drain, which does not matter. Before each command of b, a's
    // earlier commands are given a longer quiet spell to be processed (the order across clients).
    let mut a_stream = Vec::new();
    for (by_a, argv) in steps {
        if *by_a {
            a.send_raw(&common::encode(argv)).expect("send");
            a_stream.extend(pending(&mut a));
        } else {
            a_stream.extend(a.drain(Duration::from_millis(600)).bytes);
            out.push(b.cmd(argv));
        }
    }
    a_stream.extend(a.drain(Duration::from_millis(600)).bytes);
    out.push(a_stream);
    out
}

#[test]
fn pushes_survive_client_reply_off() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = pushes_scenario(&redis);
    let got = pushes_scenario(&ferrodis);
    assert_eq!(expected.len(), got.len());
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        if e != g {
            // The last entry is client a's whole stream: show where it diverges.
            let at = e.iter().zip(g).position(|(x, y)| x != y).unwrap_or(e.len().min(g.len()));
            let from = at.saturating_sub(120);
            panic!(
                "entry {i} differs at byte {at}:\n  redis:    ...{}\n  ferrodis: ...{}",
                common::show(&e[from..]),
                common::show(&g[from..])
            );
        }
    }
}

/// Three cases where the tracked keys are not the command's own: a script tracks the keys it
/// declared once it runs a read-only command (EVAL_RO itself is not a read), a key evicted
/// before a command runs is invalidated before that command's reply, and keys dropped because
/// the table went over tracking-table-max-keys reach a NOLOOP client through its redirection.
fn indirect_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut a = server.client();
    let mut writer = server.client();
    out.push(a.cmd(&["HELLO", "3"]).len().to_string().into_bytes());
    out.push(a.cmd(&["CLIENT", "TRACKING", "on"]));
    for script in [
        &["EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2"][..],
        &["EVAL", "redis.call('get', 'k3')", "2", "k1", "k2"],
        &["EVAL_RO", "redis.call('ping')", "2", "k1", "k2"],
        &["EVAL_RO", "redis.call('get', 'k1')", "2", "k1", "k2"],
    ] {
        out.push(a.cmd(script));
        out.push(writer.cmd(&["MSET", "k2", "2", "k1", "2", "k3", "x"]));
        out.push(pending(&mut a));
    }

    // Eviction before the command: the push comes first, then the reply.
    out.push(a.cmd(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]));
    let used: u64 = common::info_field(&mut a, "memory", "used_memory").parse().unwrap();
    out.push(a.cmd(&["CONFIG", "SET", "maxmemory", &(used + 100 * 1024).to_string()]));
    out.push(a.cmd(&["SETEX", "volatile-key", "10000", "x"]));
    out.push(a.cmd(&["GET", "volatile-key"]));
    out.push(a.cmd(&["SETBIT", "big-key", "1600000", "0"]));
    out.push(a.cmd(&["GETBIT", "big-key", "0"]));
    out.push(pending(&mut a));
    out.push(a.cmd(&["CONFIG", "SET", "maxmemory", "0"]));

    // A full table drops keys, announced even to a NOLOOP client.
    let mut redir = server.client();
    let redir_id = client_id(&mut redir);
    out.push(redir.cmd(&["SUBSCRIBE", "__redis__:invalidate"]));
    let mut b = server.client();
    out.push(b.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &redir_id, "NOLOOP"]));
    out.push(b.cmd(&["MSET", "t1", "1", "t2", "2"]));
    out.push(b.cmd(&["MGET", "t1", "t2"]));
    out.push(b.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]));
    // Which key goes is random: count the messages, and check the one named is one of the two.
    let got = redir.read_reply().expect("an invalidation for a dropped key");
    let text = String::from_utf8_lossy(&got).into_owned();
    out.push(
        format!("dropped t1 or t2: {}", text.contains("$2\r\nt1\r\n") || text.contains("$2\r\nt2\r\n")).into_bytes(),
    );
    out.push(b.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1000000"]));
    out
}

#[test]
fn indirect_invalidations_match_real_redis() {
    let expected = indirect_scenario(&RedisServer::new());
    let got = indirect_scenario(&TestServer::new());
    assert_eq!(expected.len(), got.len());
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(common::show(g), common::show(e), "step {i}");
    }
}
