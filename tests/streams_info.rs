//! XINFO and XPENDING replies of ferrodis compared with real Redis field by field.
//!
//! Both servers get the same stream state, built with explicit IDs only: entries added with fixed
//! IDs, two consumer groups, reads by several consumers, XACK, XCLAIM (plain, with IDLE and
//! RETRYCOUNT, with JUSTID), XDEL of entries still pending, XSETID with ENTRIESADDED and
//! MAXDELETEDID, XGROUP CREATECONSUMER. Then XINFO STREAM (plain, FULL, FULL COUNT), XINFO GROUPS,
//! XINFO CONSUMERS and XPENDING (summary, extended, per consumer, IDLE, exclusive range) are asked of
//! both, in RESP2 and in RESP3, and the replies are decoded into trees (keeping every wire type
//! byte) and compared recursively.
//!
//! Every element must be equal exactly, except the fields that are times, which are located by
//! their map key or position (see `Time`) and must be integers within `TOLERANCE_MS`:
//! * idle times (XPENDING's extended entries, XINFO CONSUMERS `idle`/`inactive`) are compared as
//!   they are;
//! * absolute Unix times in ms (XINFO STREAM FULL's PEL delivery times, consumers' `seen-time` and
//!   `active-time`) are first turned into ages by subtracting them from the server's own clock
//!   (TIME asked on the same connection right after the command).
//!
//! A failure lists every differing field with its path in the reply, e.g.
//! `XINFO STREAM s FULL (RESP3) groups[0].pending[1][2]`.
//!
//! With `FERRODIS_SELFCHECK=1` real Redis is on both sides, which checks the test itself.

mod common;

use std::time::Duration;

use common::{Client, RedisServer, Server, TestServer};

/// How far two time fields may be apart (after normalising absolute times by each server's clock).
const TOLERANCE_MS: i64 = 2000;

/// How long the state rests before the queries, so idle times are not all zero.
const REST: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------------------------------------
// Replies as trees

/// A reply decoded with every wire type byte kept (so `$-1` and RESP3's `_` differ, as on the wire).
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// `+ - : , # ( _` (and any other one-line type): the type byte and the line.
    Line(u8, Vec<u8>),
    /// `$ = !`: the type byte and the payload (None for a null bulk string).
    Blob(u8, Option<Vec<u8>>),
    /// `* ~ > %`: the type byte and the items, a map's keys and values alternating (None: null).
    Agg(u8, Option<Vec<Node>>),
}

fn parse(bytes: &[u8]) -> Node {
    let mut pos = 0;
    let node = parse_at(bytes, &mut pos).unwrap_or_else(|| panic!("not a RESP reply: {}", common::show(bytes)));
    assert_eq!(pos, bytes.len(), "bytes after the reply: {}", common::show(bytes));
    node
}

fn parse_at(buf: &[u8], pos: &mut usize) -> Option<Node> {
    let kind = *buf.get(*pos)?;
    *pos += 1;
    let rel = buf.get(*pos..)?.windows(2).position(|w| w == b"\r\n")?;
    let line = buf[*pos..*pos + rel].to_vec();
    *pos += rel + 2;
    let int = || -> Option<i64> { std::str::from_utf8(&line).ok()?.parse().ok() };
    match kind {
        b'$' | b'=' | b'!' => {
            let n = int()?;
            if n < 0 {
                return Some(Node::Blob(kind, None));
            }
            let n = n as usize;
            let data = buf.get(*pos..*pos + n)?.to_vec();
            if buf.get(*pos + n..*pos + n + 2)? != b"\r\n" {
                return None;
            }
            *pos += n + 2;
            Some(Node::Blob(kind, Some(data)))
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = int()?;
            if n < 0 {
                return Some(Node::Agg(kind, None));
            }
            let items = if kind == b'%' { n * 2 } else { n };
            let mut v = Vec::with_capacity(items as usize);
            for _ in 0..items {
                v.push(parse_at(buf, pos)?);
            }
            Some(Node::Agg(kind, Some(v)))
        }
        _ => Some(Node::Line(kind, line)),
    }
}

/// A node as one short readable line.
fn render(n: &Node) -> String {
    let mut s = String::new();
    render_into(n, &mut s);
    const MAX: usize = 240;
    if s.chars().count() > MAX {
        s = s.chars().take(MAX).collect::<String>() + "...";
    }
    s
}

fn render_into(n: &Node, out: &mut String) {
    match n {
        Node::Line(k, l) => {
            out.push(*k as char);
            out.push_str(&String::from_utf8_lossy(l));
        }
        Node::Blob(b'$', Some(d)) => out.push_str(&common::show(d)),
        Node::Blob(k, Some(d)) => {
            out.push(*k as char);
            out.push_str(&common::show(d));
        }
        Node::Blob(k, None) | Node::Agg(k, None) => {
            out.push(*k as char);
            out.push_str("-1");
        }
        Node::Agg(k, Some(items)) => {
            out.push(*k as char);
            if *k == b'%' {
                out.push('{');
                for (i, kv) in items.chunks(2).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    render_into(&kv[0], out);
                    out.push_str(": ");
                    if let Some(v) = kv.get(1) {
                        render_into(v, out);
                    }
                }
                out.push('}');
            } else {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    render_into(item, out);
                }
                out.push(']');
            }
        }
    }
}

/// The text of a map key.
fn key_text(n: &Node) -> String {
    match n {
        Node::Line(_, l) | Node::Blob(_, Some(l)) => String::from_utf8_lossy(l).into_owned(),
        other => render(other),
    }
}

fn int_of(n: &Node) -> Option<i64> {
    match n {
        Node::Line(b':', l) => std::str::from_utf8(l).ok()?.parse().ok(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Paths

#[derive(Clone)]
enum Seg {
    Idx(usize),
    Key(String),
}

/// `groups[0].pending[1][2]`.
fn path_str(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Idx(i) => s.push_str(&format!("[{i}]")),
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
        }
    }
    s
}

/// Whether a path (`groups[0].pending[1][2]`) matches a pattern, where `[*]` stands for any index
/// (`groups[*].pending[*][2]`).
fn path_matches(pattern: &str, path: &str) -> bool {
    let (p, c) = (pattern.as_bytes(), path.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < p.len() {
        if p[i..].starts_with(b"[*]") {
            if c.get(j) != Some(&b'[') {
                return false;
            }
            j += 1;
            let digits = j;
            while c.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            if j == digits || c.get(j) != Some(&b']') {
                return false;
            }
            j += 1;
            i += 3;
        } else {
            if c.get(j) != Some(&p[i]) {
                return false;
            }
            i += 1;
            j += 1;
        }
    }
    j == c.len()
}

fn shown_path(path: &[Seg]) -> String {
    let s = path_str(path);
    if s.is_empty() {
        "(reply)".into()
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------------
// Queries and their time fields

#[derive(Clone, Copy, PartialEq)]
enum TimeKind {
    /// A duration in ms (idle time): compared as it is.
    Idle,
    /// A Unix time in ms: compared as its age by the server's own clock.
    Absolute,
}

#[derive(Clone, Copy)]
struct Time {
    /// Where the field is: map keys and indexes, `[*]` for any index.
    path: &'static str,
    kind: TimeKind,
    /// Whether Redis 7.0's reply to this query must have at least one such field (a field of a
    /// later Redis version, like 7.2's `active-time`, is checked only if present).
    required: bool,
}

const fn idle(path: &'static str) -> Time {
    Time { path, kind: TimeKind::Idle, required: true }
}
const fn absolute(path: &'static str) -> Time {
    Time { path, kind: TimeKind::Absolute, required: true }
}
const fn optional(t: Time) -> Time {
    Time { required: false, ..t }
}

struct Query {
    argv: &'static [&'static str],
    /// The arrays that are maps (keys and values alternating) in RESP2, as path patterns, `""`
    /// being the reply itself. In RESP3 maps are known by their `%` type.
    resp2_maps: &'static [&'static str],
    times: &'static [Time],
}

const FULL_MAPS: &[&str] = &["", "groups[*]", "groups[*].consumers[*]"];
const FULL_TIMES: &[Time] = &[
    absolute("groups[*].pending[*][2]"),
    absolute("groups[*].consumers[*].seen-time"),
    optional(absolute("groups[*].consumers[*].active-time")),
    absolute("groups[*].consumers[*].pending[*][1]"),
];
const CONSUMERS_TIMES: &[Time] = &[idle("[*].idle"), optional(idle("[*].inactive"))];
const XPENDING_TIMES: &[Time] = &[idle("[*][2]")];

const QUERIES: &[Query] = &[
    Query { argv: &["XINFO", "STREAM", "s"], resp2_maps: &[""], times: &[] },
    Query { argv: &["XINFO", "STREAM", "s", "FULL"], resp2_maps: FULL_MAPS, times: FULL_TIMES },
    Query { argv: &["XINFO", "STREAM", "s", "FULL", "COUNT", "2"], resp2_maps: FULL_MAPS, times: FULL_TIMES },
    Query { argv: &["XINFO", "GROUPS", "s"], resp2_maps: &["[*]"], times: &[] },
    Query { argv: &["XINFO", "CONSUMERS", "s", "g1"], resp2_maps: &["[*]"], times: CONSUMERS_TIMES },
    Query { argv: &["XINFO", "CONSUMERS", "s", "g2"], resp2_maps: &["[*]"], times: CONSUMERS_TIMES },
    Query { argv: &["XPENDING", "s", "g1"], resp2_maps: &[], times: &[] },
    Query { argv: &["XPENDING", "s", "g2"], resp2_maps: &[], times: &[] },
    Query { argv: &["XPENDING", "s", "g1", "-", "+", "10"], resp2_maps: &[], times: XPENDING_TIMES },
    Query { argv: &["XPENDING", "s", "g1", "-", "+", "10", "bob"], resp2_maps: &[], times: XPENDING_TIMES },
    Query { argv: &["XPENDING", "s", "g1", "IDLE", "0", "-", "+", "10"], resp2_maps: &[], times: XPENDING_TIMES },
    // Only 5-0 (claimed with IDLE 5000) has been idle that long.
    Query { argv: &["XPENDING", "s", "g1", "IDLE", "4000", "-", "+", "10"], resp2_maps: &[], times: XPENDING_TIMES },
    Query { argv: &["XPENDING", "s", "g1", "(2-0", "+", "2"], resp2_maps: &[], times: XPENDING_TIMES },
    Query { argv: &["XPENDING", "s", "g2", "-", "+", "10"], resp2_maps: &[], times: XPENDING_TIMES },
    Query { argv: &["XPENDING", "s", "g2", "-", "+", "10", "dave"], resp2_maps: &[], times: &[] },
];

// ---------------------------------------------------------------------------------------------
// The stream state

/// Builds the stream (explicit IDs everywhere) and returns each step's reply, labelled.
fn setup(c: &mut Client) -> Vec<(String, Vec<u8>)> {
    let steps: &[&[&str]] = &[
        &["FLUSHALL"],
        &["XADD", "s", "1-1", "f", "v1"],
        &["XADD", "s", "1-2", "f", "v2"],
        &["XADD", "s", "2-0", "a", "1", "b", "2"],
        &["XADD", "s", "3-5", "f", "v4"],
        &["XADD", "s", "4-0", "f", "v5"],
        &["XADD", "s", "5-0", "f", "v6"],
        &["XADD", "s", "6-0", "f", "v7"],
        &["XADD", "s", "7-0", "f", "v8"],
        &["XGROUP", "CREATE", "s", "g1", "0"],
        &["XGROUP", "CREATE", "s", "g2", "3-5"],
        &["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "2", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g1", "bob", "COUNT", "3", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g1", "carol", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g2", "alice", "COUNT", "1", "STREAMS", "s", ">"],
        &["XREADGROUP", "GROUP", "g2", "bob", "STREAMS", "s", ">"],
        &["XACK", "s", "g1", "1-2", "4-0", "9-9"],
        &["XACK", "s", "g2", "5-0"],
        // bob's 2-0 goes to carol (delivery count 2).
        &["XCLAIM", "s", "g1", "carol", "0", "2-0"],
        // carol's 5-0 goes to alice, made 5 s idle, delivery count set to 3.
        &["XCLAIM", "s", "g1", "alice", "0", "5-0", "IDLE", "5000", "RETRYCOUNT", "3"],
        // bob's own 3-5 and carol's 7-0 to bob, delivery counts unchanged.
        &["XCLAIM", "s", "g1", "bob", "0", "3-5", "7-0", "JUSTID"],
        // Deleted entries stay pending: 1-1 (alice in g1), 6-0 (carol in g1, bob in g2).
        &["XDEL", "s", "6-0", "1-1", "8-0"],
        &["XSETID", "s", "9-0", "ENTRIESADDED", "12", "MAXDELETEDID", "8-0"],
        &["XADD", "s", "10-0", "f", "v9"],
        &["XREADGROUP", "GROUP", "g2", "carol", "STREAMS", "s", ">"],
        // An explicit ID: dave is created and served his (empty) history.
        &["XREADGROUP", "GROUP", "g2", "dave", "STREAMS", "s", "0"],
        &["XGROUP", "CREATECONSUMER", "s", "g1", "erin"],
        &["XLEN", "s"],
    ];
    steps.iter().map(|argv| (common::show_argv(argv), c.cmd(argv))).collect()
}

/// The server's clock in ms, by TIME.
fn server_ms(c: &mut Client) -> i64 {
    let reply = c.cmd(&["TIME"]);
    let node = parse(&reply);
    let num = |n: &Node| -> Option<i64> {
        match n {
            Node::Blob(_, Some(d)) => std::str::from_utf8(d).ok()?.parse().ok(),
            _ => None,
        }
    };
    match &node {
        Node::Agg(_, Some(v)) if v.len() == 2 => {
            let (Some(s), Some(us)) = (num(&v[0]), num(&v[1])) else {
                panic!("TIME answered {}", common::show(&reply))
            };
            s * 1000 + us / 1000
        }
        _ => panic!("TIME answered {}", common::show(&reply)),
    }
}

// ---------------------------------------------------------------------------------------------
// Comparison

struct Side<'a> {
    node: &'a Node,
    /// The server's TIME in ms taken right after the reply.
    now: i64,
}

struct Cmp<'a> {
    query: &'a Query,
    resp3: bool,
    label: String,
    now_expected: i64,
    now_got: i64,
    diffs: Vec<String>,
    /// Patterns of the time fields met in the expected reply.
    times_seen: Vec<&'static str>,
}

impl Cmp<'_> {
    fn diff(&mut self, path: &[Seg], msg: String) {
        self.diffs.push(format!("{} {}: {msg}", self.label, shown_path(path)));
    }

    fn walk(&mut self, path: &mut Vec<Seg>, e: &Node, g: &Node) {
        let query = self.query;
        let here = path_str(path);
        if let Some(t) = query.times.iter().find(|t| path_matches(t.path, &here)) {
            self.times_seen.push(t.path);
            self.time(path, t.kind, e, g);
            return;
        }
        match (e, g) {
            (Node::Agg(ke, Some(ve)), Node::Agg(kg, Some(vg))) if ke == kg => {
                let is_map =
                    if self.resp3 { *ke == b'%' } else { query.resp2_maps.iter().any(|m| path_matches(m, &here)) };
                let is_map = is_map && ve.len() % 2 == 0 && vg.len() % 2 == 0;
                if ve.len() != vg.len() {
                    let (n, m, what) =
                        if is_map { (ve.len() / 2, vg.len() / 2, "fields") } else { (ve.len(), vg.len(), "elements") };
                    self.diff(path, format!("expected {n} {what}, got {m}: expected {}, got {}", render(e), render(g)));
                }
                if is_map {
                    for (i, (pe, pg)) in ve.chunks(2).zip(vg.chunks(2)).enumerate() {
                        if pe[0] != pg[0] {
                            self.diff(
                                path,
                                format!("key of field #{i}: expected {}, got {}", render(&pe[0]), render(&pg[0])),
                            );
                        }
                        path.push(Seg::Key(key_text(&pe[0])));
                        self.walk(path, &pe[1], &pg[1]);
                        path.pop();
                    }
                } else {
                    for (i, (ie, ig)) in ve.iter().zip(vg).enumerate() {
                        path.push(Seg::Idx(i));
                        self.walk(path, ie, ig);
                        path.pop();
                    }
                }
            }
            _ => {
                if e != g {
                    self.diff(path, format!("expected {}, got {}", render(e), render(g)));
                }
            }
        }
    }

    fn time(&mut self, path: &[Seg], kind: TimeKind, e: &Node, g: &Node) {
        let (Some(ve), Some(vg)) = (int_of(e), int_of(g)) else {
            self.diff(
                path,
                format!("expected an integer time on both sides, expected {}, got {}", render(e), render(g)),
            );
            return;
        };
        match kind {
            TimeKind::Idle => {
                if (ve - vg).abs() > TOLERANCE_MS {
                    self.diff(path, format!("idle time {vg} ms is not within {TOLERANCE_MS} ms of expected {ve} ms"));
                }
            }
            TimeKind::Absolute => {
                let (age_e, age_g) = (self.now_expected - ve, self.now_got - vg);
                if (age_e - age_g).abs() > TOLERANCE_MS {
                    self.diff(
                        path,
                        format!(
                            "time {vg} is {age_g} ms before the server's TIME {}, expected about {age_e} ms \
                             (expected {ve} against TIME {}; tolerance {TOLERANCE_MS} ms)",
                            self.now_got, self.now_expected
                        ),
                    );
                }
            }
        }
    }
}

/// Compares one query's replies; returns the differences (empty when they agree).
fn compare(query: &Query, resp3: bool, expected: Side, got: Side) -> Vec<String> {
    let label = format!("`{}` (RESP{})", query.argv.join(" "), if resp3 { 3 } else { 2 });
    let mut cmp = Cmp {
        query,
        resp3,
        label,
        now_expected: expected.now,
        now_got: got.now,
        diffs: Vec::new(),
        times_seen: Vec::new(),
    };
    cmp.walk(&mut Vec::new(), expected.node, got.node);
    // A time field the expected reply lacks would mean the pattern is wrong and the field was
    // compared exactly (or not at all): the test itself is then broken.
    for t in query.times.iter().filter(|t| t.required) {
        assert!(
            cmp.times_seen.contains(&t.path),
            "{}: the expected reply has no time field at `{}`: {}",
            cmp.label,
            t.path,
            render(expected.node)
        );
    }
    cmp.diffs
}

fn hello3(server: &Server) -> Client {
    let mut c = server.client();
    let reply = c.cmd(&["HELLO", "3"]);
    assert!(reply.starts_with(b"%"), "{}: HELLO 3 answered {}", server.name, common::show(&reply));
    c
}

/// Redis 7.2's consumer `active-time` in XINFO STREAM FULL: ferrodis shows it (times restored
/// from 7.2+ RDB files must be visible); 7.0's reply has no such field, so it is left out of the
/// comparison when the expected reply lacks it.
const LATER_FIELD: &[u8] = b"active-time";

/// Whether some map (or RESP2 flat map) in the tree has the key `name`.
fn has_field(n: &Node, name: &[u8]) -> bool {
    match n {
        Node::Agg(_, Some(items)) => {
            items.chunks(2).any(|p| matches!(&p[0], Node::Blob(_, Some(k)) if k == name))
                || items.iter().any(|i| has_field(i, name))
        }
        _ => false,
    }
}

/// Removes every `name` key with its value from the maps in the tree.
fn drop_field(n: &mut Node, name: &[u8]) {
    if let Node::Agg(_, Some(items)) = n {
        if items.len() % 2 == 0 {
            if let Some(i) =
                (0..items.len()).step_by(2).find(|&i| matches!(&items[i], Node::Blob(_, Some(k)) if k == name))
            {
                items.drain(i..i + 2);
            }
        }
        for item in items.iter_mut() {
            drop_field(item, name);
        }
    }
}

#[test]
fn xinfo_and_xpending_match_redis_field_by_field() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let mut diffs = Vec::new();

    let mut r2 = redis.client();
    let mut f2 = ferrodis.client();
    let expected_setup = setup(&mut r2);
    let got_setup = setup(&mut f2);
    for ((label, e), (_, g)) in expected_setup.iter().zip(&got_setup) {
        if e != g {
            diffs.push(format!("setup `{label}`: expected {}, got {}", common::show(e), common::show(g)));
        }
    }
    std::thread::sleep(REST);

    let mut r3 = hello3(&redis);
    let mut f3 = hello3(&ferrodis);
    for query in QUERIES {
        for resp3 in [false, true] {
            let (rc, fc) = if resp3 { (&mut r3, &mut f3) } else { (&mut r2, &mut f2) };
            let e = parse(&rc.cmd(query.argv));
            let now_e = server_ms(rc);
            let mut g = parse(&fc.cmd(query.argv));
            let now_g = server_ms(fc);
            if !has_field(&e, LATER_FIELD) {
                drop_field(&mut g, LATER_FIELD);
            }
            diffs.extend(compare(query, resp3, Side { node: &e, now: now_e }, Side { node: &g, now: now_g }));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} difference(s) between {} and redis-server:\n{}",
        diffs.len(),
        ferrodis.name,
        diffs.join("\n")
    );
}

/// The comparison itself: a time field out of tolerance and a plain field that differs are both
/// reported with their path; time fields within tolerance are accepted.
#[test]
fn comparison_names_the_differing_field() {
    let full = &QUERIES[1];
    let reply = |delivery: i64, count: i64, seen: i64| {
        format!(
            "%2\r\n$6\r\nlength\r\n:1\r\n$6\r\ngroups\r\n*1\r\n%3\r\n$4\r\nname\r\n$2\r\ng1\r\n\
             $7\r\npending\r\n*1\r\n*4\r\n$3\r\n1-1\r\n$5\r\nalice\r\n:{delivery}\r\n:{count}\r\n\
             $9\r\nconsumers\r\n*1\r\n%4\r\n$4\r\nname\r\n$5\r\nalice\r\n$9\r\nseen-time\r\n:{seen}\r\n\
             $9\r\npel-count\r\n:1\r\n$7\r\npending\r\n*1\r\n*3\r\n$3\r\n1-1\r\n:{delivery}\r\n:{count}\r\n"
        )
        .into_bytes()
    };
    let e = parse(&reply(1_000_000, 1, 1_000_100));
    // Same ages on a clock 10 s later: equal.
    let g = parse(&reply(1_010_000, 1, 1_010_100));
    let same = compare(full, true, Side { node: &e, now: 1_000_500 }, Side { node: &g, now: 1_010_500 });
    assert!(same.is_empty(), "{same:?}");
    // A delivery time 3 s off and a different delivery count.
    let g = parse(&reply(1_007_000, 2, 1_010_100));
    let d = compare(full, true, Side { node: &e, now: 1_000_500 }, Side { node: &g, now: 1_010_500 });
    assert_eq!(d.len(), 4, "{d:#?}");
    assert!(d[0].contains("groups[0].pending[0][2]:"), "{d:#?}");
    assert!(d[1].contains("groups[0].pending[0][3]: expected :1, got :2"), "{d:#?}");
    assert!(d[2].contains("groups[0].consumers[0].pending[0][1]:"), "{d:#?}");
    assert!(d[3].contains("groups[0].consumers[0].pending[0][2]: expected :1, got :2"), "{d:#?}");
}
