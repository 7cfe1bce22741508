//! Black-box tests of malformed and hostile input. Each case goes to a fresh connection on ferrodis
//! and on the real redis-server; what comes back (bytes, and whether the connection was closed or
//! left waiting) must be the same, and afterwards another client must still get PONG.
//! Expected bytes come only from the real server.

mod common;

use common::{show, Client, Drained, RedisServer, Server, TestServer};
use std::io::Write;
use std::time::{Duration, Instant};

/// How long a quiet connection is watched before it counts as "waiting".
const QUIET: Duration = Duration::from_millis(300);

struct Pair {
    redis: Server,
    ferro: Server,
}

impl Pair {
    fn new() -> Pair {
        Pair { redis: RedisServer::new(), ferro: TestServer::new() }
    }

    /// Sends `bytes` on a fresh connection to each server and compares what comes back. A
    /// disagreement is retried once with a long quiet period, so a server slowed by a loaded machine
    /// is not mistaken for one that waits.
    fn same(&self, what: &str, bytes: &[u8]) {
        self.compare(what, bytes);
        self.both_alive(what);
    }

    /// `same` without the PING afterwards (which a server requiring a password refuses).
    fn compare(&self, what: &str, bytes: &[u8]) {
        let (mut r, mut f) = self.both(bytes, QUIET);
        if r != f {
            (r, f) = self.both(bytes, Duration::from_secs(3));
        }
        assert_eq!(
            (show(&f.bytes), f.closed),
            (show(&r.bytes), r.closed),
            "{what}: ferrodis (left) and redis (right) differ after sending {}",
            show(bytes)
        );
    }

    /// Both at once: a case that leaves the connection waiting costs `quiet` once, not twice.
    fn both(&self, bytes: &[u8], quiet: Duration) -> (Drained, Drained) {
        std::thread::scope(|s| {
            let r = s.spawn(|| exchange(&self.redis, bytes, quiet));
            let f = exchange(&self.ferro, bytes, quiet);
            (r.join().expect("redis exchange"), f)
        })
    }

    fn both_alive(&self, what: &str) {
        for s in [&self.redis, &self.ferro] {
            let mut c = s.client();
            assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{what}: {} no longer answers PING", s.name);
        }
    }
}

fn exchange(server: &Server, bytes: &[u8], quiet: Duration) -> Drained {
    let mut c = server.client();
    // The server may close before everything is written; that is part of what is compared.
    let _ = c.send_raw(bytes);
    c.drain(quiet)
}

#[test]
fn protocol_errors_close_the_connection() {
    let p = Pair::new();
    let cases: &[(&str, &[u8])] = &[
        ("huge bulk length", b"*1\r\n$2147483648\r\n"),
        ("negative bulk length", b"*1\r\n$-1\r\n"),
        ("bulk length not a number", b"*1\r\n$abc\r\n"),
        ("bulk longer than proto-max-bulk-len", b"*1\r\n$536870913\r\n"),
        ("multibulk count not a number", b"*abc\r\n"),
        ("multibulk count too big", b"*2147483648\r\n"),
        ("no dollar", b"*1\r\nPING\r\n"),
        ("unbalanced double quote", b"set \"abc\r\n"),
        ("unbalanced single quote", b"set 'abc\r\n"),
        ("closing quote followed by text", b"set \"a\"b c\r\n"),
        ("command before an error runs", b"PING\r\n*x\r\n"),
        ("pipeline then bad frame", b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n*1\r\n!4\r\n"),
    ];
    for (what, bytes) in cases {
        p.same(what, bytes);
    }
}

#[test]
fn incomplete_frames_wait() {
    let p = Pair::new();
    let cases: &[(&str, &[u8])] = &[
        ("truncated count", b"*2"),
        ("truncated count with CR", b"*2\r"),
        ("truncated bulk header", b"*2\r\n$3"),
        ("truncated bulk data", b"*2\r\n$3\r\nGET\r\n$3\r\nke"),
        ("bulk without trailing CRLF", b"*1\r\n$4\r\nPING"),
        ("inline without newline", b"PING"),
        ("max bulk len exactly waits", b"*1\r\n$536870912\r\n"),
        ("zero and negative counts are skipped", b"*0\r\n*-1\r\n\r\n\n"),
        ("empty inline lines", b"\r\n\r\n   \r\n"),
        ("inline with quotes", b"ECHO \"a\\x41\\n\" 'b\\'c'\r\n"),
        ("inline ping then partial", b"PING\r\n*1\r\n$4\r\nPI"),
        // Redis finds an inline line's newline with strchr, which stops at a NUL.
        ("a NUL before an inline newline", b"PING\0\r\nPING\r\n"),
        ("a NUL in a quoted inline line", b"ECHO \"a\" \0\r\n"),
    ];
    for (what, bytes) in cases {
        p.same(what, bytes);
    }
}

#[test]
fn completing_a_split_frame_gets_the_reply() {
    let p = Pair::new();
    let frame = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    for s in [&p.redis, &p.ferro] {
        for cut in 1..frame.len() {
            let mut c = s.client();
            c.send_raw(&frame[..cut]).expect("send");
            std::thread::sleep(Duration::from_millis(1));
            c.send_raw(&frame[cut..]).expect("send");
            assert_eq!(c.read_reply().expect("reply"), b"+OK\r\n", "{} cut {cut}", s.name);
            assert_eq!(c.read_reply().expect("reply"), b"$5\r\nhello\r\n", "{} cut {cut}", s.name);
        }
    }
}

#[test]
fn long_pipelines() {
    let p = Pair::new();
    let mut mixed = Vec::new();
    for i in 0..3000 {
        match i % 3 {
            0 => mixed.extend_from_slice(b"PING\r\n"),
            1 => mixed.extend_from_slice(format!("*3\r\n$3\r\nSET\r\n$5\r\nk{:04}\r\n$1\r\nv\r\n", i % 7).as_bytes()),
            _ => mixed.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n$5\r\nk{:04}\r\n", i % 5).as_bytes()),
        }
    }
    p.same("3000 mixed pipelined commands", &mixed);
    p.same("10000 inline PINGs", &b"PING\r\n".repeat(10_000));
}

#[test]
fn random_bytes() {
    let p = Pair::new();
    let mut rng = fastrand::Rng::with_seed(0x5EED);
    for i in 0..40 {
        let len = rng.usize(1..200);
        // Mostly printable with some line breaks, spaces and quotes; sometimes any byte at all.
        let any = i % 4 == 3;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if any {
                    rng.u8(..)
                } else {
                    match rng.u8(..20) {
                        0 => b'\n',
                        1 => b'\r',
                        2 => b' ',
                        3 => b'"',
                        4 => b'*',
                        5 => b'$',
                        _ => rng.u8(b'0'..=b'z'),
                    }
                }
            })
            .collect();
        p.same(&format!("random blob {i}"), &bytes);
    }
}

#[test]
fn huge_multibulk_count_waits_without_allocating() {
    let p = Pair::new();
    let before = p.ferro.rss_kb().unwrap_or(0);
    let mut conns = Vec::new();
    for s in [&p.redis, &p.ferro] {
        let mut c = s.client();
        c.send_raw(b"*10000000\r\n$1\r\na\r\n").expect("send");
        conns.push(c);
    }
    for c in &mut conns {
        let d = c.drain(QUIET);
        assert_eq!(d, Drained { bytes: Vec::new(), closed: false }, "a huge multibulk count must be waited for");
    }
    let after = p.ferro.rss_kb().unwrap_or(0);
    assert!(after < before + 50 * 1024, "ferrodis RSS grew from {before} kB to {after} kB on a 10^7 argument header");
    p.both_alive("after *10000000");
}

/// An inline line held by a NUL waits until it is too big, then gets Redis's error.
#[test]
fn an_inline_line_held_by_a_nul_is_refused_when_too_big() {
    let p = Pair::new();
    let mut line = b"PING \0".to_vec();
    line.extend(std::iter::repeat_n(b'a', 70 * 1024));
    line.extend_from_slice(b"\r\n");
    p.same("a NUL, then 70 KiB, then a newline", &line);
}

#[test]
fn huge_inline_request_is_refused() {
    let p = Pair::new();
    let mut results = Vec::new();
    for s in [&p.redis, &p.ferro] {
        let mut c = s.client();
        let mut writer = c.stream.try_clone().expect("clone stream");
        // Write 100 MB of one inline line from another thread while this one reads; the server
        // should answer and close long before it has all of it.
        let sender = std::thread::spawn(move || {
            let chunk = vec![b'a'; 64 * 1024];
            let mut sent = 0usize;
            while sent < 100 * 1024 * 1024 {
                if writer.write_all(&chunk).is_err() {
                    break;
                }
                sent += chunk.len();
            }
            sent
        });
        let start = Instant::now();
        let d = c.drain(Duration::from_secs(5));
        let sent = sender.join().expect("sender thread");
        assert!(start.elapsed() < Duration::from_secs(30));
        results.push((s.name, d, sent));
    }
    let (_, rd, _) = &results[0];
    let (_, fd, fsent) = &results[1];
    assert!(rd.closed && fd.closed, "both must close: redis {rd:?} ferrodis closed={}", fd.closed);
    assert_eq!(show(&fd.bytes), show(&rd.bytes), "reply to a 100 MB inline line (ferrodis left)");
    assert!(*fsent < 100 * 1024 * 1024, "ferrodis read the whole 100 MB line instead of refusing it");
    p.both_alive("after a huge inline request");
}

#[test]
fn many_idle_connections() {
    const WANT: usize = 2000;
    let limit = common::raise_nofile(WANT as u64 * 3 + 200) as usize;
    // Both this process and the servers hold one descriptor per connection.
    let n = WANT.min(limit.saturating_sub(200));
    if n < WANT {
        eprintln!("many_idle_connections: open-files limit {limit} allows only {n} connections");
    }
    let ferro = TestServer::new();
    let start = Instant::now();
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        match Client::try_connect(ferro.port) {
            Ok(c) => conns.push(c),
            Err(e) => panic!("connection {i} of {n} failed: {e}"),
        }
    }
    let mut fresh = ferro.client();
    assert_eq!(fresh.cmd(&["PING"]), b"+PONG\r\n");
    // Some of the idle ones still work, first, middle and last.
    for i in [0, n / 2, n - 1] {
        assert_eq!(conns[i].cmd(&["ECHO", "hi"]), b"$2\r\nhi\r\n", "idle connection {i}");
    }
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "{n} connections took {took:?}");
    drop(conns);
    assert_eq!(fresh.cmd(&["PING"]), b"+PONG\r\n");
}

/// A client that sends a whole pipeline before reading any reply (8 MB of SETs here) is still
/// served: while its replies wait for it, the server goes on reading and running its requests,
/// as Redis does, instead of both sides waiting on each other's writes.
fn pipeline_before_reading(server: &Server) -> (usize, Vec<u8>) {
    let mut c = server.client();
    c.stream.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    let n = 200_000;
    let mut bytes = Vec::new();
    for i in 0..n {
        bytes.extend_from_slice(&common::encode(&["SET", &format!("key:{i}"), &"v".repeat(16)]));
    }
    c.stream.write_all(&bytes).expect("the server stopped reading the pipeline");
    let mut replies = 0;
    while replies < n {
        assert_eq!(c.read_reply().expect("reply"), b"+OK\r\n");
        replies += 1;
    }
    (replies, c.cmd(&["DBSIZE"]))
}

#[test]
fn a_pipeline_sent_before_reading_is_served() {
    let expected = pipeline_before_reading(&RedisServer::new());
    assert_eq!(expected, (200_000, b":200000\r\n".to_vec()));
    assert_eq!(pipeline_before_reading(&TestServer::new()), expected);
}

/// A client that has to authenticate and has not is closed once its replies outgrow the reply
/// buffer (16 KiB), none of them sent: Redis 7.0.15's fix for CVE-2025-21605, without which a
/// client pipelining commands it never reads the replies of grows its output without bound.
/// The replies to one read count together although the commands run one at a time; after
/// AUTH the limit is gone. (Each case is one write, so that each server gets it in one read.)
#[test]
fn unauthenticated_replies_are_limited_to_the_reply_buffer() {
    let pair = Pair::new();
    for s in [&pair.redis, &pair.ferro] {
        assert_eq!(s.client().cmd(&["CONFIG", "SET", "requirepass", "secret"]), b"+OK\r\n");
    }
    let pings = |n: usize, then: &[u8]| [b"PING\r\n".repeat(n), then.to_vec()].concat();
    // 481 -NOAUTH replies are 16354 bytes: they fit; 482 do not.
    for n in [1, 481, 482, 600, 5000] {
        pair.compare(&format!("{n} PINGs before AUTH"), &pings(n, b""));
    }
    pair.compare("AUTH after 10", &pings(10, &[&b"AUTH secret\r\n"[..], &b"PING\r\n".repeat(1000)].concat()));
    pair.compare("AUTH after 500", &pings(500, b"AUTH secret\r\nPING\r\n"));
    pair.compare("a protocol error", &pings(5, b"*-x\r\n"));
    for s in [&pair.redis, &pair.ferro] {
        let mut c = s.client();
        assert_eq!(c.cmd(&["AUTH", "secret"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{} still answers", s.name);
    }
}
