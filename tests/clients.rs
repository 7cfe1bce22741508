//! Client management against real Redis and ferrodis side by side: CLIENT PAUSE holding commands
//! in order until the pause ends (WRITE and ALL), CLIENT REPLY OFF/SKIP, CLIENT KILL filters and
//! their errors, CLIENT LIST pub/sub fields, RESET inside MULTI, and the pubsub output buffer
//! limit closing a subscriber that stops reading, and who may run DEBUG (enable-debug-command);
//! the caller's own query buffer and a transaction's fields in CLIENT LIST, and INFO's recent
//! input-buffer peak.
//! Expected bytes come from the real server.

mod common;

use std::time::Duration;

use common::{show, Client, RedisServer, Server, TestServer};

const QUIET: Duration = Duration::from_millis(250);

/// One field (`flags`, `sub`, ...) of a CLIENT LIST / CLIENT INFO line.
fn field(line: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(line);
    let key = format!(" {name}=");
    text.split(&key).nth(1).and_then(|r| r.split(' ').next()).unwrap_or("").to_string()
}

fn pause_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut a = server.client();
    let mut b = server.client();
    let mut c = server.client();
    out.push(a.cmd(&["FLUSHALL"]));

    // WRITE: reads go on, a write waits and so does everything behind it, in order.
    out.push(a.cmd(&["CLIENT", "PAUSE", "2000", "WRITE"]));
    common::send(&mut b, &["GET", "x"]);
    common::send(&mut b, &["SET", "x", "1"]);
    common::send(&mut b, &["GET", "x"]);
    out.push(b.drain(QUIET).bytes);
    out.push(c.cmd(&["GET", "x"]));
    common::send(&mut c, &["PUBLISH", "ch", "m"]);
    out.push(c.drain(QUIET).bytes);
    out.push(a.cmd(&["MULTI"]));
    out.push(a.cmd(&["GET", "x"]));
    out.push(a.cmd(&["EXEC"]));
    let info = a.cmd(&["CLIENT", "LIST"]);
    let flags: Vec<String> =
        info.split(|&ch| ch == b'\n').filter(|l| l.starts_with(b"id=")).map(|l| field(l, "flags")).collect();
    out.push(flags.join(",").into_bytes());
    std::thread::sleep(Duration::from_millis(2000));
    out.push(b.drain(QUIET).bytes);
    out.push(c.drain(QUIET).bytes);

    // UNPAUSE releases at once.
    out.push(a.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]));
    common::send(&mut b, &["INCR", "x"]);
    out.push(b.drain(QUIET).bytes);
    out.push(a.cmd(&["CLIENT", "UNPAUSE"]));
    out.push(b.drain(QUIET).bytes);

    // ALL holds every client, the pausing one included.
    out.push(a.cmd(&["CLIENT", "PAUSE", "1200"]));
    common::send(&mut b, &["PING"]);
    common::send(&mut a, &["PING"]);
    out.push(b.drain(QUIET).bytes);
    out.push(a.drain(QUIET).bytes);
    std::thread::sleep(Duration::from_millis(1300));
    out.push(b.drain(QUIET).bytes);
    out.push(a.drain(QUIET).bytes);

    // Argument errors.
    for argv in [
        &["CLIENT", "PAUSE", "abc"][..],
        &["CLIENT", "PAUSE", "-1"],
        &["CLIENT", "PAUSE", "10", "MAYBE"],
        &["CLIENT", "PAUSE", "10", "WRITE", "x"],
        &["CLIENT", "UNPAUSE", "x"],
    ] {
        out.push(a.cmd(argv));
    }
    out
}

/// CLIENT REPLY SKIP / OFF / ON: every command is pipelined, then an ECHO marker after CLIENT REPLY
/// ON; the whole byte stream up to the marker's reply is compared (no timing: what is dropped is
/// simply absent from the stream).
fn reply_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut a = server.client();
    for argv in [
        &["CLIENT", "REPLY", "SKIP"][..],
        &["SET", "r", "1"],
        &["GET", "r"],
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "r", "2"],
        &["CLIENT", "REPLY", "SKIP"],
        &["GET", "r"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "r"],
        &["CLIENT", "REPLY", "maybe"],
        &["CLIENT", "REPLY", "OFF"],
        &["CLIENT", "REPLY", "maybe"],
        &["CLIENT", "REPLY", "ON"],
        &["ECHO", "end-of-scenario"],
    ] {
        common::send(&mut a, argv);
    }
    let mut out = Vec::new();
    loop {
        let reply = a.read_reply().expect("a reply before the end marker");
        let end = reply == b"$15\r\nend-of-scenario\r\n";
        out.push(reply);
        if end {
            return out;
        }
    }
}

fn kill_and_list_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut a = server.client();
    let mut b = server.client();
    let mut victim = server.client();

    // Pub/sub counts and flags in CLIENT LIST, and the pubsub type.
    out.push(b.cmd(&["PSUBSCRIBE", "a*", "b*"]));
    out.push(b.cmd(&["SUBSCRIBE", "c"]));
    out.push(b.cmd(&["SSUBSCRIBE", "s"]));
    let line = a.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    for f in ["flags", "sub", "psub", "ssub", "multi", "cmd"] {
        out.push(field(&line, f).into_bytes());
    }
    let stats = a.cmd(&["INFO", "stats"]);
    out.push(stats.split(|&c| c == b'\n').filter(|l| l.starts_with(b"pubsub")).flatten().copied().collect());
    let aid = a.cmd(&["CLIENT", "ID"]);
    let aid = String::from_utf8_lossy(&aid[1..aid.len() - 2]).into_owned();
    out.push(a.cmd(&["MULTI"]));
    out.push(a.cmd(&["SET", "k", "v"]));
    let line = victim.cmd(&["CLIENT", "LIST", "ID", &aid]);
    out.push(format!("{} {}", field(&line, "flags"), field(&line, "multi")).into_bytes());
    out.push(a.cmd(&["EXEC"]));

    // Filter errors.
    for argv in [
        &["CLIENT", "KILL", "ID", "abc"][..],
        &["CLIENT", "KILL", "ID", "0"],
        &["CLIENT", "KILL", "USER", "nobody"],
        &["CLIENT", "KILL", "USER", "default", "SKIPME", "maybe"],
        &["CLIENT", "KILL", "ID", "1", "TYPE"],
        &["CLIENT", "KILL", "1.2.3.4:5"],
        &["CLIENT", "KILL", "TYPE", "master"],
        &["CLIENT", "KILL", "TYPE", "bogus"],
        &["CLIENT", "KILL", "LADDR", "1.1.1.1:1"],
        &["CLIENT", "KILL", "ADDR", "1.1.1.1:1"],
        &["CLIENT", "KILL", "FOO", "bar"],
    ] {
        out.push(a.cmd(argv));
    }
    // Kill by type, by id, by address (old form), and the caller itself with SKIPME no.
    out.push(a.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]));
    out.push(vec![b.drain(QUIET).closed as u8]);
    let vid = victim.cmd(&["CLIENT", "ID"]);
    let vid = String::from_utf8_lossy(&vid[1..vid.len() - 2]).into_owned();
    out.push(a.cmd(&["CLIENT", "KILL", "ID", &vid]));
    out.push(vec![victim.drain(QUIET).closed as u8]);
    let mut v2 = server.client();
    let addr = field(&v2.cmd(&["CLIENT", "INFO"]), "addr");
    out.push(a.cmd(&["CLIENT", "KILL", &addr]));
    out.push(vec![v2.drain(QUIET).closed as u8]);
    out.push(a.cmd(&["CLIENT", "KILL", &addr]));
    let mut v3 = server.client();
    let laddr = field(&v3.cmd(&["CLIENT", "INFO"]), "laddr");
    out.push(a.cmd(&["CLIENT", "KILL", "LADDR", &laddr, "SKIPME", "yes"]));
    out.push(vec![v3.drain(QUIET).closed as u8]);
    out.push(a.cmd(&["CLIENT", "KILL", "USER", "default", "SKIPME", "no"]));
    out.push(vec![a.drain(QUIET).closed as u8]);

    // RESET inside MULTI ends the transaction and tracking.
    let mut r = server.client();
    for argv in [
        &["MULTI"][..],
        &["SET", "a", "1"],
        &["RESET"],
        &["EXEC"],
        &["GET", "a"],
        &["CLIENT", "TRACKING", "on"],
        &["MULTI"],
        &["RESET"],
        &["CLIENT", "TRACKINGINFO"],
        &["SUBSCRIBE", "x"],
        &["RESET"],
        &["PING"],
    ] {
        out.push(r.cmd(argv));
    }
    out
}

#[test]
fn pause_matches_real_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = pause_scenario(&redis);
    let got = pause_scenario(&ferrodis);
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(common::show(g), common::show(e), "step {i}");
    }
    assert_eq!(expected.len(), got.len());
}

#[test]
fn client_reply_matches_real_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    assert_eq!(reply_scenario(&ferrodis), reply_scenario(&redis));
}

#[test]
fn kill_list_reset_match_real_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = kill_and_list_scenario(&redis);
    let got = kill_and_list_scenario(&ferrodis);
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(common::show(g), common::show(e), "step {i}");
    }
    assert_eq!(expected.len(), got.len());
}

/// A subscriber that stops reading is closed at the pubsub hard limit (Redis logs it); the
/// publisher sees the subscriber count drop to 0.
fn obuf_scenario(server: &Server) -> (bool, bool) {
    let mut ctl = server.client();
    assert_eq!(ctl.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 512kb 1"]), b"+OK\r\n");
    let mut sub = server.client();
    sub.cmd(&["SUBSCRIBE", "ch"]);
    let msg = "x".repeat(100_000);
    let mut dropped = false;
    // Loopback socket buffers absorb several MB before the server's own buffer grows.
    for _ in 0..2000 {
        if ctl.cmd(&["PUBLISH", "ch", &msg]) == b":0\r\n" {
            dropped = true;
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let listed = ctl.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    (dropped, listed.len() <= 8)
}

#[test]
fn pubsub_output_buffer_limit_closes_a_stalled_subscriber() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    assert_eq!(obuf_scenario(&redis), (true, true), "real redis");
    assert_eq!(obuf_scenario(&ferrodis), (true, true), "ferrodis");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        ferrodis.log().contains("scheduled to be closed ASAP for overcoming of output buffer limits"),
        "log: {}",
        ferrodis.log()
    );
}

/// The soft limit is enforced without traffic too: a subscriber left over it (and no longer
/// published to) is closed by the client cron once the soft seconds pass, not before.
fn soft_limit_idle_scenario(server: &Server) -> (bool, bool) {
    let mut ctl = server.client();
    assert_eq!(ctl.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 100000 1"]), b"+OK\r\n");
    let mut sub = server.client();
    sub.cmd(&["CLIENT", "SETNAME", "stalled"]);
    sub.cmd(&["SUBSCRIBE", "ch"]);
    let msg = "x".repeat(100_000);
    let omem = |ctl: &mut Client| {
        let list = ctl.cmd(&["CLIENT", "LIST"]);
        let line =
            list.split(|&b| b == b'\n').find(|l| l.windows(12).any(|w| w == b"name=stalled")).map(<[u8]>::to_vec);
        line.map(|l| field(&l, "omem").parse::<u64>().unwrap_or(0))
    };
    // Loopback socket buffers take several MB before the server holds any of it.
    for _ in 0..2000 {
        ctl.cmd(&["PUBLISH", "ch", &msg]);
        if omem(&mut ctl).is_some_and(|m| m > 100_000) {
            break;
        }
    }
    let over_at = std::time::Instant::now();
    let mut early = false;
    while over_at.elapsed() < Duration::from_secs(4) {
        match omem(&mut ctl) {
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
            None => {
                early = over_at.elapsed() < Duration::from_millis(900);
                return (true, early);
            }
        }
    }
    (false, early)
}

#[test]
fn soft_output_limit_closes_an_idle_subscriber_like_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    assert_eq!(soft_limit_idle_scenario(&redis), (true, false), "real redis");
    assert_eq!(soft_limit_idle_scenario(&ferrodis), (true, false), "ferrodis");
}

/// A random-members reply with a huge negative count (HRANDFIELD, SRANDMEMBER, ZRANDMEMBER)
/// is stopped at the client's hard output limit: the client is closed with nothing sent, at
/// once, and the server goes on serving.
fn huge_random_reply_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    out.push(ctl.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "normal 1000000 0 0"]));
    out.push(ctl.cmd(&["HSET", "h", "a", "b"]));
    out.push(ctl.cmd(&["SADD", "s", "a"]));
    out.push(ctl.cmd(&["ZADD", "z", "1", "a"]));
    for argv in
        [["HRANDFIELD", "h", "-999999999"], ["SRANDMEMBER", "s", "-999999999"], ["ZRANDMEMBER", "z", "-999999999"]]
    {
        let mut a = server.client();
        let started = std::time::Instant::now();
        common::send(&mut a, &argv);
        let d = a.drain(Duration::from_millis(300));
        let quick = started.elapsed() < Duration::from_secs(5);
        out.push(format!("{}: {} bytes, closed {}, quick {quick}", argv[0], d.bytes.len(), d.closed).into_bytes());
    }
    out.push(ctl.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0"]));
    out.push(ctl.cmd(&["PING"]));
    out
}

#[test]
fn huge_random_replies_stop_at_the_output_limit_like_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = huge_random_reply_scenario(&redis);
    for (i, (e, g)) in expected.iter().zip(&huge_random_reply_scenario(&ferrodis)).enumerate() {
        assert_eq!(show(g), show(e), "step {i}");
    }
}

/// Fan-out: exact and pattern subscribers, RESP2 and RESP3, each receive every message once,
/// framed as real Redis frames them; PUBLISH counts every delivery.
fn fanout_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut publisher = server.client();
    let mut subs: Vec<Client> = Vec::new();
    for i in 0..6 {
        let mut c = server.client();
        if i % 2 == 1 {
            c.cmd(&["HELLO", "3"]);
        }
        if i < 3 {
            out.push(c.cmd(&["SUBSCRIBE", "news.sport"]));
        } else {
            out.push(c.cmd(&["PSUBSCRIBE", "news.*"]));
        }
        subs.push(c);
    }
    out.push(publisher.cmd(&["PUBLISH", "news.sport", "goal"]));
    out.push(publisher.cmd(&["PUBLISH", "news.weather", "rain"]));
    out.push(publisher.cmd(&["PUBLISH", "other", "x"]));
    for s in &mut subs {
        out.push(s.drain(QUIET).bytes);
    }
    let stats = publisher.cmd(&["INFO", "stats"]);
    out.push(stats.split(|&c| c == b'\n').filter(|l| l.starts_with(b"pubsub")).flatten().copied().collect());
    out
}

#[test]
fn fanout_matches_real_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = fanout_scenario(&redis);
    let got = fanout_scenario(&ferrodis);
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(common::show(g), common::show(e), "step {i}");
    }
    assert_eq!(expected.len(), got.len());
}

/// The normal class limit applies to a command's own reply: a reply over the hard limit closes
/// the client instead of being sent.
fn normal_limit_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    let mut a = server.client();
    out.push(ctl.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "normal 100kb 0 0"]));
    out.push(a.cmd(&["SET", "big", &"x".repeat(200_000)]));
    out.push(a.cmd(&["SET", "small", "x"]));
    out.push(a.cmd(&["GET", "small"]));
    common::send(&mut a, &["GET", "big"]);
    let d = a.drain(Duration::from_millis(300));
    out.push(format!("{} bytes, closed {}", d.bytes.len(), d.closed).into_bytes());
    out.push(ctl.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "normal 0 0 0"]));
    out
}

#[test]
fn normal_output_buffer_limit_matches_real_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    assert_eq!(normal_limit_scenario(&ferrodis), normal_limit_scenario(&redis));
}

/// A killed connection is closed by the time the killer has its reply, as Redis closes it
/// in freeClient: plain and inside MULTI (unit/replication kills a replica's link in a
/// transaction, then reads the replica's link status at once). Counts, over 40 kills of each
/// kind, the victims whose socket already read as closed when the killer's reply arrived.
fn kill_closes_before_reply_scenario(server: &Server) -> Vec<usize> {
    let mut killer = server.client();
    let mut closed_at_reply = vec![0, 0];
    for (kind, in_multi) in [false, true].into_iter().enumerate() {
        for _ in 0..40 {
            let mut victim = server.client();
            let id = String::from_utf8_lossy(&victim.cmd(&["CLIENT", "ID"])).trim()[1..].to_string();
            if in_multi {
                assert_eq!(killer.cmd(&["MULTI"]), b"+OK\r\n");
                assert_eq!(killer.cmd(&["CLIENT", "KILL", "ID", &id]), b"+QUEUED\r\n");
                assert_eq!(killer.cmd(&["EXEC"]), b"*1\r\n:1\r\n");
            } else {
                assert_eq!(killer.cmd(&["CLIENT", "KILL", "ID", &id]), b":1\r\n");
            }
            victim.stream.set_nonblocking(true).unwrap();
            let mut byte = [0u8; 1];
            if matches!(std::io::Read::read(&mut victim.stream, &mut byte), Ok(0)) {
                closed_at_reply[kind] += 1;
            }
        }
    }
    closed_at_reply
}

#[test]
fn killed_connection_is_closed_before_the_killer_is_answered() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = kill_closes_before_reply_scenario(&redis);
    assert_eq!(expected, vec![40, 40], "real Redis closes at once");
    assert_eq!(kill_closes_before_reply_scenario(&ferrodis), expected);
}

/// CLIENT KILL MAXAGE (Redis 7.4, documented: closes connections at least that many seconds
/// old): an old connection goes, a new one and the caller (SKIPME default) stay.
#[test]
fn kill_maxage_closes_only_old_connections() {
    let ferrodis = TestServer::new();
    let mut ctl = ferrodis.client();
    let mut old = ferrodis.client();
    old.cmd(&["PING"]);
    std::thread::sleep(Duration::from_millis(2100));
    let mut young = ferrodis.client();
    young.cmd(&["PING"]);
    assert_eq!(ctl.cmd(&["CLIENT", "KILL", "MAXAGE", "2"]), b":1\r\n");
    assert!(old.drain(QUIET).closed);
    assert_eq!(young.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(ctl.cmd(&["CLIENT", "KILL", "MAXAGE", "x"]), b"-ERR value is not an integer or out of range\r\n");
}

fn debug_scenario(start: fn(&[&str]) -> Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for setting in ["no", "local", "yes"] {
        let server = start(&["--enable-debug-command", setting]);
        out.push(server.client().cmd(&["CONFIG", "SET", "requirepass", "pw"]));
        let mut c = server.client();
        // The protected check comes before authentication.
        out.push(c.cmd(&["DEBUG", "SLEEP", "0"]));
        out.push(c.cmd(&["AUTH", "pw"]));
        out.push(c.cmd(&["DEBUG", "SLEEP", "0"]));
        out.push(c.cmd(&["DEBUG"]));
        out.push(c.cmd(&["CONFIG", "SET", "enable-debug-command", "yes"]));
        out.push(c.cmd(&["CONFIG", "GET", "enable-debug-command"]));
        out.push(
            c.cmd(&["INFO", "commandstats"])
                .split(|&b| b == b'\n')
                .filter(|l| l.starts_with(b"cmdstat_debug"))
                .map(|l| {
                    // usec figures differ; the call counts must not.
                    let text = String::from_utf8_lossy(l);
                    text.split(',')
                        .filter(|f| f.starts_with("cmdstat") || f.contains("calls"))
                        .collect::<Vec<_>>()
                        .join(",")
                        .into_bytes()
                })
                .next()
                .unwrap_or_default(),
        );
    }
    out
}

#[test]
fn debug_is_allowed_as_enable_debug_command_says() {
    let ours = debug_scenario(TestServer::with_args);
    let theirs = debug_scenario(RedisServer::with_args);
    assert_eq!(
        ours.iter().map(|r| common::show(r)).collect::<Vec<_>>(),
        theirs.iter().map(|r| common::show(r)).collect::<Vec<_>>()
    );
    // The loopback client counts as local: "local" allows it.
    assert_eq!(ours[11], b"+OK\r\n");
}

/// Keys whose TTL passes during CLIENT PAUSE WRITE read as missing but stay stored (DBSIZE and
/// INFO keyspace still count them) until the pause ends, as Redis keeps the dataset unchanged.
fn expiry_during_pause_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut c = server.client();
    out.push(c.cmd(&["SET", "k", "v", "PX", "100"]));
    out.push(c.cmd(&["SET", "k2", "v", "PX", "100"]));
    out.push(c.cmd(&["CLIENT", "PAUSE", "1000", "WRITE"]));
    std::thread::sleep(Duration::from_millis(300));
    for argv in [
        &["GET", "k"][..],
        &["DBSIZE"],
        &["TTL", "k"],
        &["EXISTS", "k", "k2"],
        &["KEYS", "*"],
        &["SCAN", "0"],
        &["TYPE", "k2"],
        &["DBSIZE"],
        &["OBJECT", "ENCODING", "k"],
    ] {
        out.push(c.cmd(argv));
    }
    let keyspace = c.cmd(&["INFO", "keyspace"]);
    out.push(
        String::from_utf8_lossy(&keyspace).lines().filter(|l| l.starts_with("db0")).collect::<String>().into_bytes(),
    );
    out.push(c.cmd(&["CLIENT", "UNPAUSE"]));
    out.push(c.cmd(&["GET", "k"]));
    out.push(c.cmd(&["DBSIZE"]));
    out
}

#[test]
fn expired_keys_stay_during_a_pause_like_redis() {
    let ours = expiry_during_pause_scenario(&TestServer::new());
    let theirs = expiry_during_pause_scenario(&RedisServer::new());
    assert_eq!(ours.iter().map(|r| show(r)).collect::<Vec<_>>(), theirs.iter().map(|r| show(r)).collect::<Vec<_>>());
    assert_eq!(ours[4], b":2\r\n", "both keys still stored during the pause");
}

/// maxmemory-clients: a client part-way through a big argument shows the argument's bytes as
/// qbuf (Redis keeps a big argument alone in its query buffer) and stays while under the limit;
/// one whose partial argument reaches the limit is evicted before anyone sees it in CLIENT LIST;
/// WATCHing keys without end ends in eviction too (the watch list counts).
fn client_eviction_scenario(server: &Server) -> Vec<String> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    ctl.cmd(&["CONFIG", "SET", "maxmemory", "6291456"]);
    ctl.cmd(&["CONFIG", "SET", "maxmemory-clients", "7%"]);
    let limit = 6291456 * 7 / 100;
    let line_of = |ctl: &mut Client, name: &str| {
        let list = ctl.cmd(&["CLIENT", "LIST"]);
        let tag = format!("name={name} ");
        list.split(|&b| b == b'\n').find(|l| String::from_utf8_lossy(l).contains(&tag)).map(<[u8]>::to_vec)
    };
    for (name, n) in [("half", limit / 2), ("full", limit)] {
        let mut c = server.client();
        c.cmd(&["CLIENT", "SETNAME", name]);
        let mut bytes = format!("*1\r\n${n}\r\n").into_bytes();
        bytes.resize(bytes.len() + n, b'v');
        let _ = c.send_raw(&bytes);
        let mut seen = String::from("gone");
        for _ in 0..100 {
            match line_of(&mut ctl, name) {
                Some(l) if field(&l, "qbuf") == n.to_string() => {
                    seen = format!("qbuf {}", field(&l, "qbuf"));
                    break;
                }
                Some(l) => seen = format!("qbuf {}", field(&l, "qbuf")),
                None => break,
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        out.push(format!("{name}: {seen}"));
    }
    ctl.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    ctl.cmd(&["CONFIG", "SET", "maxmemory-clients", "200000"]);
    let mut w = server.client();
    let mut evicted = false;
    for j in 0..200_000 {
        match w.try_cmd(&["WATCH", &j.to_string()]) {
            Ok(r) if r == b"+OK\r\n" => {}
            _ => {
                evicted = true;
                break;
            }
        }
    }
    out.push(format!("watcher evicted {evicted}"));
    out.push(String::from_utf8_lossy(&ctl.cmd(&["CONFIG", "SET", "maxmemory-clients", "0"])).into_owned());
    out
}

#[test]
fn client_eviction_matches_real_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = client_eviction_scenario(&redis);
    assert_eq!(expected[..3], ["half: qbuf 220200", "full: gone", "watcher evicted true"], "real redis");
    assert_eq!(client_eviction_scenario(&ferrodis), expected);
}

/// The reply buffer CLIENT LIST shows (rbs, rbp) follows Redis's client cron: a new client's
/// 16 KiB buffer shrinks to 1 KiB once it idles, and doubles back to 16 KiB (no further) while
/// replies fill it, counted in INFO's reply_buffer_shrinks/expands, its peak (rbp) reset by the
/// first cron; DEBUG REPLYBUFFER sets the peak's reset period and switches resizing.
fn reply_buffer_scenario(server: &Server) -> Vec<String> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    let mut c = server.client();
    c.cmd(&["CLIENT", "SETNAME", "probe"]);
    let probe_field = |ctl: &mut Client, name: &str| {
        let list = ctl.cmd(&["CLIENT", "LIST"]);
        let line = list.split(|&b| b == b'\n').find(|l| String::from_utf8_lossy(l).contains("name=probe ")).unwrap();
        field(line, name).parse::<usize>().unwrap()
    };
    let rbs = |ctl: &mut Client| probe_field(ctl, "rbs");
    out.push(String::from_utf8_lossy(&ctl.cmd(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"])).into_owned());
    out.push(String::from_utf8_lossy(&ctl.cmd(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "soon"])).into_owned());
    let mut waited = 0;
    while rbs(&mut ctl) != 1024 && waited < 30 {
        std::thread::sleep(Duration::from_millis(100));
        waited += 1;
    }
    // The first cron reset the peak (the +OK of SETNAME) to what was pending: nothing.
    out.push(format!("idle rbs {} rbp {}", rbs(&mut ctl), probe_field(&mut ctl, "rbp")));
    ctl.cmd(&["SET", "big", &"x".repeat(32768)]);
    ctl.cmd(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "never"]);
    let mut seen = Vec::new();
    for _ in 0..30 {
        c.cmd(&["GET", "big"]);
        let n = rbs(&mut ctl);
        if seen.last() != Some(&n) {
            seen.push(n);
        }
        if n == 16384 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    out.push(format!("busy rbs {seen:?}"));
    std::thread::sleep(Duration::from_millis(300));
    out.push(format!("stays {}", rbs(&mut ctl)));
    let info = String::from_utf8_lossy(&ctl.cmd(&["INFO", "stats"])).into_owned();
    for name in ["reply_buffer_shrinks", "reply_buffer_expands"] {
        let n: u64 = info.lines().find_map(|l| l.strip_prefix(&format!("{name}:"))).unwrap().trim().parse().unwrap();
        out.push(format!("{name} counted {}", n > 0));
    }
    out.push(String::from_utf8_lossy(&ctl.cmd(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset"])).into_owned());
    out
}

#[test]
fn reply_buffer_sizes_follow_redis() {
    let redis = RedisServer::with_args(&["--enable-debug-command", "yes"]);
    let ferrodis = TestServer::with_args(&["--enable-debug-command", "yes"]);
    let expected = reply_buffer_scenario(&redis);
    assert_eq!(expected[2], "idle rbs 1024 rbp 0", "real redis");
    assert_eq!(reply_buffer_scenario(&ferrodis), expected);
}

/// maxmemory-clients and a client whose first command carries an argument over the limit: Redis
/// evicts it while it reads, so the command never runs. Both servers: the key is not set, one
/// client evicted, the victim's connection closed without a reply.
fn oversized_first_command_scenario(server: &Server) -> Vec<String> {
    let mut ctl = server.client();
    ctl.cmd(&["CONFIG", "SET", "maxmemory-clients", "1mb"]);
    let mut victim = server.client();
    let value = "x".repeat(3_000_000);
    // The server may close the connection before all of it is sent.
    let _ = victim.send_raw(&common::encode(&["SET", "big", &value]));
    let answered = victim.read_reply().ok().map(|r| show(&r));
    vec![
        format!("victim answered: {answered:?}"),
        show(&ctl.cmd(&["EXISTS", "big"])),
        common::info_field(&mut ctl, "stats", "evicted_clients"),
    ]
}

#[test]
fn an_evicted_client_runs_none_of_its_commands() {
    let redis = oversized_first_command_scenario(&RedisServer::new());
    let ferrodis = oversized_first_command_scenario(&TestServer::new());
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
    assert_eq!(redis[1], show(b":0\r\n"));
}

/// The caller's own CLIENT INFO / CLIENT LIST line: qbuf is the whole query buffer as Redis holds
/// it while the command runs (everything that one read brought, the commands before and after it
/// included, inline or multibulk), and argv-mem the command's arguments (EXEC's inside EXEC).
fn own_query_buffer_scenario(server: &Server) -> Vec<String> {
    let writes: [&[u8]; 5] = [
        b"CLIENT INFO\r\n",
        b"PING\r\nCLIENT INFO\r\nPING\r\n",
        b"*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n*1\r\n$4\r\nPING\r\n",
        b"MULTI\r\nCLIENT INFO\r\nEXEC\r\n",
        b"*1\r\n$4\r\nPING\r\n*2\r\n$6\r\nCLIENT\r\n$4\r\nLIST\r\n",
    ];
    let mut out = Vec::new();
    for bytes in writes {
        let mut c = server.client();
        c.send_raw(bytes).unwrap();
        // Replies up to the one holding the caller's line (EXEC's array holds it inside MULTI).
        let line = loop {
            let reply = c.read_reply().unwrap_or_else(|e| panic!("{}: {} {e}", server.name, show(bytes)));
            let mine = reply.split(|&b| b == b'\n').find(|l| {
                let l = String::from_utf8_lossy(l);
                l.contains(" cmd=client|") || l.contains(" cmd=exec ")
            });
            if let Some(line) = mine {
                break line.to_vec();
            }
        };
        let fields =
            ["flags", "multi", "qbuf", "argv-mem", "multi-mem", "cmd"].map(|f| format!("{f}={}", field(&line, f)));
        out.push(format!("{} {}", show(bytes), fields.join(" ")));
    }
    out
}

#[test]
fn own_query_buffer_is_what_redis_shows() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = own_query_buffer_scenario(&redis);
    assert!(expected[0].contains(" qbuf=13 argv-mem=10 "), "real redis: {expected:?}");
    assert_eq!(own_query_buffer_scenario(&ferrodis), expected);
}

/// INFO's client_recent_max_input_buffer is the biggest query buffer the client cron saw in the
/// last eight seconds: a client part-way through a 100 KB argument shows there (in both servers
/// a little over 100 KB, each counting its own allocation's size class), it stays for seconds
/// after the client has gone, then drops.
#[test]
fn recent_max_input_buffer_holds_the_peak_for_seconds() {
    for server in [RedisServer::new(), TestServer::new()] {
        let mut ctl = server.client();
        let recent = |ctl: &mut Client| {
            common::info_field(ctl, "clients", "client_recent_max_input_buffer").parse::<u64>().unwrap()
        };
        assert!(recent(&mut ctl) < 100_000, "{}", server.name);
        let mut big = server.client();
        let mut bytes = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n".to_vec();
        bytes.resize(bytes.len() + 50_000, b'x');
        big.send_raw(&bytes).unwrap();
        common::wait_until("the cron sees the big query buffer", || recent(&mut ctl) >= 100_000);
        let seen = recent(&mut ctl);
        assert!(seen < 131_072, "{}: {seen}", server.name);
        drop(big);
        std::thread::sleep(Duration::from_secs(4));
        assert_eq!(recent(&mut ctl), seen, "{}: kept for seconds after the client left", server.name);
        let gone = std::time::Instant::now();
        while recent(&mut ctl) >= 100_000 {
            assert!(gone.elapsed() < Duration::from_secs(10), "{}: the peak never expires", server.name);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Another client's view of a transaction, as CLIENT LIST shows it: while queueing, multi-mem
/// counts each queued command's arguments and its pointer array; after EXEC, cmd is exec (the
/// queued commands are not the client's last command), and inside EXEC the client still shows
/// its transaction.
fn transaction_fields_scenario(server: &Server) -> Vec<String> {
    let fields = |line: &[u8]| {
        ["flags", "multi", "argv-mem", "multi-mem", "cmd"].map(|f| format!("{f}={}", field(line, f))).join(" ")
    };
    let line_of = |ctl: &mut Client| {
        let list = ctl.cmd(&["CLIENT", "LIST"]);
        list.split(|&b| b == b'\n').find(|l| String::from_utf8_lossy(l).contains(" name=tx ")).unwrap().to_vec()
    };
    let mut out = Vec::new();
    let mut ctl = server.client();
    let mut tx = server.client();
    tx.cmd(&["CLIENT", "SETNAME", "tx"]);
    tx.cmd(&["WATCH", "k1", "k2"]);
    tx.cmd(&["MULTI"]);
    tx.cmd(&["SET", "foo", "bar"]);
    tx.cmd(&["CLIENT", "INFO"]);
    out.push(format!("queued: {}", fields(&line_of(&mut ctl))));
    let exec = tx.cmd(&["EXEC"]);
    out.push(format!("inside: {}", fields(&exec)));
    out.push(format!("after: {}", fields(&line_of(&mut ctl))));
    tx.cmd(&["MULTI"]);
    tx.cmd(&["NOSUCHCOMMAND"]);
    tx.cmd(&["DISCARD"]);
    out.push(format!("discarded: {}", fields(&line_of(&mut ctl))));
    out
}

#[test]
fn transaction_fields_match_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = transaction_fields_scenario(&redis);
    assert!(expected[0].ends_with("multi-mem=59 cmd=client|info"), "real redis: {expected:?}");
    assert_eq!(transaction_fields_scenario(&ferrodis), expected);
}

/// CLIENT LIST's memory figures of one client, the reply buffer left out of tot-mem (its size,
/// rbs, changes on the client cron's schedule, which `reply_buffer_sizes_follow_redis` checks).
fn memory_fields(line: &[u8]) -> String {
    let num = |name: &str| field(line, name).parse::<i64>().unwrap_or(-1);
    format!(
        "qbuf={} qbuf-free={} argv-mem={} multi-mem={} tot-mem-less-rbs={}",
        num("qbuf"),
        num("qbuf-free"),
        num("argv-mem"),
        num("multi-mem"),
        num("tot-mem") - num("rbs")
    )
}

/// tot-mem as Redis's getClientMemoryUsage adds it up: the client's structure, its reply and
/// query buffers (Redis's allocations: 20 KiB for a read, 8 bytes once an idle client's is
/// trimmed or before its first read), the running command's arguments and their pointers, the
/// MULTI queue's slots, the channels' dict with its buckets, the patterns' list nodes.
fn tot_mem_scenario(server: &Server) -> Vec<String> {
    let mut out = Vec::new();
    let line_of = |bytes: &[u8]| -> String {
        let mut c = server.client();
        c.send_raw(bytes).unwrap();
        let reply = c.drain(QUIET).bytes;
        let at = reply.windows(3).position(|w| w == b"id=").expect("a client line");
        memory_fields(&reply[at..])
    };
    out.push(line_of(b"CLIENT INFO\r\n"));
    out.push(line_of(b"*2\r\n$6\r\nCLIENT\r\n$4\r\nINFO\r\n"));
    out.push(line_of(b"PING\r\nCLIENT INFO\r\nPING\r\n"));
    out.push(line_of(b"MULTI\r\nSET a b\r\nCLIENT INFO\r\nEXEC\r\n"));
    out.push(line_of(b"MULTI\r\nSET a b\r\nSET a b\r\nSET a b\r\nCLIENT INFO\r\nEXEC\r\n"));

    let mut ctl = server.client();
    let other = |ctl: &mut Client, setup: &[u8], name: &str| -> (Client, String) {
        let mut c = server.client();
        c.send_raw(&[format!("CLIENT SETNAME {name}\r\n").as_bytes(), setup].concat()).unwrap();
        let _ = c.drain(QUIET);
        let list = ctl.cmd(&["CLIENT", "LIST"]);
        let line = list.split(|&b| b == b'\n').find(|l| field(l, "name") == name).expect("listed").to_vec();
        (c, format!("{name}: {}", memory_fields(&line)))
    };
    let mut keep = Vec::new();
    for (setup, name) in [
        (&b""[..], "idle"),
        (b"SUBSCRIBE a b", "sub2"),
        (b"SUBSCRIBE a b c d", "sub4"),
        (b"SUBSCRIBE a\r\nPSUBSCRIBE p1 p2\r\nSSUBSCRIBE s", "mixed"),
        (b"MULTI\r\nSET a b", "queued1"),
        (b"MULTI\r\nSET a b\r\nSET a b\r\nSET a b", "queued3"),
        (b"WATCH a b", "watching"),
    ] {
        let setup = if setup.is_empty() { Vec::new() } else { [setup, b"\r\n"].concat() };
        let (c, shown) = other(&mut ctl, &setup, name);
        out.push(shown);
        keep.push(c);
    }
    // A connection that never sent a byte, then the idle one once the client cron trimmed its
    // query buffer (after two seconds idle).
    let _silent = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    std::thread::sleep(QUIET);
    let list = ctl.cmd(&["CLIENT", "LIST"]);
    let line = list.split(|&b| b == b'\n').find(|l| field(l, "cmd") == "NULL").expect("listed").to_vec();
    out.push(format!("silent: {}", memory_fields(&line)));
    let idle_line = |ctl: &mut Client| {
        let list = ctl.cmd(&["CLIENT", "LIST"]);
        list.split(|&b| b == b'\n').find(|l| field(l, "name") == "idle").expect("listed").to_vec()
    };
    for _ in 0..80 {
        if field(&idle_line(&mut ctl), "qbuf-free") == "0" {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    out.push(format!("idle, trimmed: {}", memory_fields(&idle_line(&mut ctl))));
    out
}

#[test]
fn tot_mem_adds_up_like_redis() {
    let expected = tot_mem_scenario(&RedisServer::new());
    assert_eq!(expected[0], "qbuf=13 qbuf-free=20461 argv-mem=10 multi-mem=0 tot-mem-less-rbs=21274", "real redis");
    assert_eq!(tot_mem_scenario(&TestServer::new()), expected);
}
