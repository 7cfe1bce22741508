//! SORT with BY or GET patterns over a big collection runs its lookups a step at a time between
//! other clients' commands (`executor::sort_walk`, `db::sort_watch`): the reply must still be
//! exactly what the keyspace gave when SORT ran, whatever is written while the walk goes on.
//!
//! - One pipeline, sent in one write: SORTs of every shape (BY numeric and ALPHA, `->field`,
//!   LIMIT, DESC, `BY nosort`, `GET #`, a GET without `*`, a weight that is not a number), each
//!   followed by writes of every kind to its weight and GET keys (SET, DEL, HSET, HDEL, APPEND,
//!   INCR, EXPIRE in the past and the future, PERSIST, RENAME onto and away, MOVE, SWAPDB,
//!   DEBUG RELOAD, FLUSHDB): every reply equals real Redis's, byte for byte, in RESP2 and RESP3, with the
//!   executor on the connections' thread and on its own.
//! - A writer on another connection moving weights while SORT BY ... GET runs: the BY order and
//!   the GET values are those of one point of the writer's sequence (on real Redis too).
//! - SORT inside MULTI and Lua (replied at once), accounting (one call), a client that leaves.
//! - The keys a walk's BY and GET lookups read are stamped as read, as on Redis: OBJECT FREQ
//!   under allkeys-lfu, OBJECT IDLETIME under LRU, of every key of the families read.

mod common;

use std::io::Write;

use common::{encode, parse_value, Client, RedisServer, Server, TestServer, Value};

/// Elements of the list under test: above the walk's threshold (4096) several times over.
const N: usize = 20_000;

fn argv(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|p| p.as_bytes().to_vec()).collect()
}

/// Sends every command in one write and reads all the replies.
fn pipeline(c: &mut Client, cmds: &[Vec<Vec<u8>>]) -> Vec<Vec<u8>> {
    let mut bytes = Vec::new();
    for a in cmds {
        bytes.extend_from_slice(&encode(a));
    }
    c.stream.write_all(&bytes).expect("send pipeline");
    cmds.iter().map(|_| c.read_reply().expect("reply")).collect()
}

const DEBUG: &[&str] = &["--enable-debug-command", "yes"];

fn redis() -> Option<Server> {
    drop(RedisServer::or_skip()?);
    Some(RedisServer::with_args(DEBUG))
}

/// A list `l` of N elements (repeats, so ties), a set `s` and a zset `z` of distinct ones;
/// weights `w_e` (integers, decimals, a few stale `PX 1`, some missing), hashes `h_e` with a
/// field `f`, `a_e` strings for ALPHA. Deterministic.
fn load(c: &mut Client) {
    assert_eq!(c.cmd(&argv("DEBUG SET-ACTIVE-EXPIRE 0")), b"+OK\r\n");
    let mut rng = 12345u64;
    let mut next = move |m: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % m
    };
    let mut cmds = Vec::new();
    let flush = |c: &mut Client, cmds: &mut Vec<Vec<Vec<u8>>>, force: bool| {
        if cmds.len() >= 2000 || (force && !cmds.is_empty()) {
            for r in pipeline(c, cmds) {
                assert!(!r.starts_with(b"-"), "load: {}", common::show(&r));
            }
            cmds.clear();
        }
    };
    for _ in 0..N {
        cmds.push(argv(&format!("RPUSH l {}", next(8000))));
        flush(c, &mut cmds, false);
    }
    for e in 0..8000u64 {
        if e < 6000 {
            cmds.push(argv(&format!("SADD s {e}")));
            cmds.push(argv(&format!("ZADD z {} {e}", next(100))));
        }
        match next(10) {
            0 => {}
            1 => cmds.push(argv(&format!("SET w_{e} {} PX 1", next(50)))),
            2 => cmds.push(argv(&format!("SET w_{e} {}.{}", next(50), next(1000)))),
            3 => cmds.push(argv(&format!("SET w_{e} {} EX 100000", next(50)))),
            _ => cmds.push(argv(&format!("SET w_{e} {}", next(50)))),
        }
        if next(4) != 0 {
            cmds.push(argv(&format!("HSET h_{e} f {} g x{e}", next(30))));
        }
        cmds.push(argv(&format!("SET a_{e} {}", ["b", "a", "ab", "", "zz", "a\u{1}"][next(6) as usize])));
        flush(c, &mut cmds, false);
    }
    flush(c, &mut cmds, true);
    // The `PX 1` weights are past their time from here on.
    std::thread::sleep(std::time::Duration::from_millis(20));
}

/// Writes of every kind to the keys the SORTs read, keyed off `seed` so each SORT is followed
/// by different ones.
fn writes(seed: usize) -> Vec<Vec<Vec<u8>>> {
    let mut p = Vec::new();
    for k in 0..40 {
        let e = (seed * 997 + k * 131) % 8000;
        let f = (e + 17) % 8000;
        p.push(match k % 16 {
            0 => argv(&format!("SET w_{e} 1000")),
            1 => argv(&format!("DEL w_{e}")),
            2 => argv(&format!("HSET h_{e} f -3")),
            3 => argv(&format!("HDEL h_{e} f")),
            4 => argv(&format!("APPEND w_{e} 7")),
            5 => argv(&format!("INCR w_{e}")),
            6 => argv(&format!("PEXPIREAT w_{e} 1")),
            7 => argv(&format!("EXPIRE w_{e} 100000")),
            8 => argv(&format!("PERSIST w_{e}")),
            9 => argv(&format!("RENAME w_{e} w_{f}")),
            10 => argv(&format!("RENAME h_{e} w_{f}")),
            11 => argv(&format!("MOVE w_{e} 1")),
            12 => argv(&format!("SET a_{e} zzz")),
            13 => argv(&format!("DEL h_{e}")),
            14 => argv(&format!("SET w_{e} 5 EX 100000")),
            _ => argv(&format!("HSET w_{e} f 1")),
        });
    }
    p
}

const SORTS: &[&str] = &[
    "SORT l BY w_* LIMIT 0 10",
    "SORT l BY w_* LIMIT 100 50 GET # GET w_*",
    "SORT l BY a_* ALPHA LIMIT 0 30 GET # GET a_*",
    "SORT l BY a_* ALPHA DESC LIMIT 7 13",
    "SORT l BY nosort GET w_* LIMIT 0 40",
    "SORT l BY nosort GET h_*->f GET # DESC LIMIT 5 40",
    "SORT l BY h_*->f GET h_*->f GET h_*->g LIMIT 50 50",
    "SORT s BY h_*->f GET # GET w_* LIMIT 0 60",
    "SORT z BY w_* DESC GET # GET nokey LIMIT 20 20",
    "SORT z BY nosort GET w_* LIMIT 30 30",
    "SORT l GET w_* LIMIT 0 25",
    "SORT_RO l BY w_* GET w_* LIMIT 1000 100",
    "SORT l BY w_* GET #",
    "SORT s BY a_* ALPHA GET a_*",
    "SORT l BY w_* LIMIT 0 0",
    "SORT l BY w_* LIMIT 30000 10",
];

/// The pipeline of the exactness test: each SORT, then writes to what it reads, then the same
/// SORT again; SWAPDB twice in the middle, a weight that is not a number and a FLUSHDB at the
/// end.
fn racing_pipeline() -> Vec<Vec<Vec<u8>>> {
    let mut p = Vec::new();
    for (i, s) in SORTS.iter().enumerate() {
        p.push(argv(s));
        p.extend(writes(i));
        if i == 5 {
            p.push(argv("SWAPDB 0 1"));
            p.extend(writes(99));
            p.push(argv("SWAPDB 0 1"));
        }
        if i == 8 {
            p.push(argv("DEBUG RELOAD"));
            p.extend(writes(98));
        }
        p.push(argv(s));
    }
    p.push(argv("SET w_3 notanumber"));
    p.push(argv("SORT l BY w_* LIMIT 0 5"));
    p.push(argv("SET w_3 3"));
    p.push(argv("SORT l BY w_* GET w_* LIMIT 0 5"));
    p.extend(writes(7));
    p.push(argv("SORT l BY nosort GET w_* GET a_* LIMIT 0 100"));
    p.push(argv("FLUSHDB"));
    p.push(argv("SET w_1 x"));
    p.push(argv("SORT l BY w_*"));
    p
}

fn run_racing(server: &Server, resp3: bool) -> Vec<String> {
    let mut c = server.client();
    load(&mut c);
    if resp3 {
        c.cmd(&argv("HELLO 3"));
    }
    let cmds = racing_pipeline();
    let replies = pipeline(&mut c, &cmds);
    cmds.iter().zip(replies).map(|(cmd, r)| format!("{} -> {}", common::show_argv(cmd), common::show(&r))).collect()
}

fn compare_racing(ours_args: &[&str], resp3: bool) {
    let Some(redis) = redis() else { return };
    let want = run_racing(&redis, resp3);
    let got = run_racing(&TestServer::with_args(&[DEBUG, ours_args].concat()), resp3);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "a reply differs from Redis's");
    }
}

#[test]
fn sorts_then_writes_in_one_pipeline_match_redis() {
    compare_racing(&[], false);
}

#[test]
fn sorts_then_writes_match_redis_in_resp3() {
    compare_racing(&[], true);
}

#[test]
fn sorts_then_writes_match_redis_with_io_threads() {
    compare_racing(&["--io-threads", "2"], false);
}

/// Elements 0..M in `m`, weights `w_i` = i. A second connection sets `w_j` to M + j for j = 0,
/// 1, ... while `SORT m BY w_* GET # GET w_*` runs: at a point after d of those writes the
/// order is d..M then 0..d, each element with the weight it was sorted by.
fn racing_writer(server: &Server) {
    const M: usize = 100_000;
    let mut c = server.client();
    let mut cmds = Vec::new();
    for chunk in (0..M).collect::<Vec<_>>().chunks(1000) {
        let mut push = vec![b"RPUSH".to_vec(), b"m".to_vec()];
        push.extend(chunk.iter().map(|i| i.to_string().into_bytes()));
        cmds.push(push);
        for &i in chunk {
            cmds.push(argv(&format!("SET w_{i} {i}")));
        }
        pipeline(&mut c, &cmds);
        cmds.clear();
    }
    let port = server.port;
    let go = std::sync::Arc::new(std::sync::Barrier::new(2));
    let go2 = go.clone();
    let writer = std::thread::spawn(move || {
        let mut w = Client::connect(port);
        go2.wait();
        for chunk in (0..M).collect::<Vec<_>>().chunks(100) {
            let cmds: Vec<_> = chunk.iter().map(|&j| argv(&format!("SET w_{j} {}", M + j))).collect();
            pipeline(&mut w, &cmds);
        }
    });
    go.wait();
    let got = parse_value(&c.cmd(&argv("SORT m BY w_* GET # GET w_*")));
    writer.join().expect("writer");
    let Value::Agg(_, Some(items)) = got else { panic!("{}: not an array", server.name) };
    let bytes: Vec<Vec<u8>> = items
        .into_iter()
        .map(|v| match v {
            Value::Bulk(Some(b)) => b,
            other => panic!("not a bulk: {other:?}"),
        })
        .collect();
    let d = bytes.chunks(2).filter(|p| p[1].len() >= 6).count();
    let mut want = Vec::new();
    for i in (d..M).chain(0..d) {
        want.push(i.to_string().into_bytes());
        want.push(if i < d { (M + i).to_string() } else { i.to_string() }.into_bytes());
    }
    assert!(bytes == want, "{}: not the keyspace of one point in time ({d} writes seen)", server.name);
}

#[test]
fn sort_beside_a_writer_is_one_point_in_time() {
    if let Some(redis) = redis() {
        racing_writer(&redis);
    }
    racing_writer(&TestServer::with_args(DEBUG));
}

/// SORT inside MULTI and Lua is replied at once; accounting is one call per SORT; a client that
/// leaves mid-walk leaves the server answering. Compared with Redis.
#[test]
fn sort_in_multi_lua_and_accounting_match_redis() {
    let Some(redis) = redis() else { return };
    let run = |server: &Server| -> Vec<String> {
        let mut c = server.client();
        load(&mut c);
        c.cmd(&argv("CONFIG RESETSTAT"));
        let cmds = vec![
            argv("MULTI"),
            argv("SORT l BY w_* LIMIT 0 10 GET w_*"),
            argv("SET w_1 9999"),
            argv("SORT l BY w_* LIMIT 0 10 GET w_*"),
            argv("EXEC"),
            argv("EVAL return#redis.call('sort','l','by','w_*','get','#') 0"),
            argv("SORT l BY w_* LIMIT 0 10 GET w_*"),
            argv("SET w_3 3.5"),
            argv("SORT l BY a_* ALPHA GET h_*->g LIMIT 10 10"),
            argv("PING"),
        ];
        let mut out: Vec<String> = pipeline(&mut c, &cmds).iter().map(|r| common::show(r)).collect();
        let info = c.cmd(&argv("INFO commandstats"));
        let line = String::from_utf8_lossy(&info)
            .lines()
            .find(|l| l.starts_with("cmdstat_sort:"))
            .map(|l| l.split(',').filter(|f| f.contains("calls")).collect::<Vec<_>>().join(","));
        out.push(format!("{line:?}"));
        out.push(common::show(&c.cmd(&argv("DBSIZE"))));
        out
    };
    assert_eq!(run(&TestServer::with_args(DEBUG)), run(&redis));
}

/// Clients that go away in the middle of their walks leave the server answering, and the
/// walks of the others whole.
#[test]
fn clients_that_leave_mid_walk() {
    let server = TestServer::with_args(DEBUG);
    let mut c = server.client();
    load(&mut c);
    let want = c.cmd(&argv("SORT l BY w_* GET # GET h_*->f LIMIT 0 50"));
    for _ in 0..4 {
        let mut leaver = server.client();
        leaver.send_raw(&encode(&argv("SORT l BY a_* ALPHA GET # GET w_*"))).expect("send");
        drop(leaver);
    }
    assert_eq!(c.cmd(&argv("SORT l BY w_* GET # GET h_*->f LIMIT 0 50")), want);
    assert_eq!(c.cmd(&argv("PING")), b"+PONG\r\n");
}

/// Elements of the list the access-time tests sort: above the walk's threshold, with a key of
/// each family past the list's end (never read, so a stamp that goes astray shows).
const STAMPED: usize = 5000;
const FAMILY: usize = 6000;

/// The SORTs of the access-time tests, each sent alone and its reply awaited (commands the
/// same client pipelines behind a walk run before the walk's lookups are over): BY alone, GET
/// alone, BY with a GET of a hash field; every key read once, so under LFU each read moves the
/// initial counter 5 to 6 (certain), never further (a chance).
const STAMP_SORTS: &[&str] = &[
    "SORT l BY w_* LIMIT 0 1",
    "SORT l BY nosort GET g_* LIMIT 100 50",
    "SORT_RO l BY v_* DESC GET h_*->f LIMIT 7 30",
];

/// The list `l` of 0..STAMPED in order, and key families w_, g_, v_ (strings) and h_ (hashes) of
/// FAMILY keys each; `restore_idle`: each key then re-created with an idle time of 1000 s.
fn stamp_load(c: &mut Client, restore_idle: bool) {
    let mut cmds = Vec::new();
    for chunk in (0..STAMPED).collect::<Vec<_>>().chunks(1000) {
        let mut push = vec![b"RPUSH".to_vec(), b"l".to_vec()];
        push.extend(chunk.iter().map(|i| i.to_string().into_bytes()));
        cmds.push(push);
    }
    for e in 0..FAMILY {
        // Not small integers: Redis shares one object among keys holding those (with
        // maxmemory 0), and so one access time.
        cmds.push(argv(&format!("SET w_{e} {}.5", (e * 7919) % 1000)));
        cmds.push(argv(&format!("SET g_{e} g{e}")));
        cmds.push(argv(&format!("SET v_{e} {}.25", (e * 31) % 97)));
        // A hash as COPY makes it: a new key's access field, however HSET counts its own write.
        cmds.push(argv(&format!("HSET x_{e} f {e}")));
        cmds.push(argv(&format!("COPY x_{e} h_{e}")));
        cmds.push(argv(&format!("DEL x_{e}")));
    }
    for r in pipeline(c, &cmds) {
        assert!(!r.starts_with(b"-"), "load: {}", common::show(&r));
    }
    if !restore_idle {
        return;
    }
    for fam in ["w", "g", "v", "h"] {
        let dumps: Vec<_> = (0..FAMILY).map(|e| argv(&format!("DUMP {fam}_{e}"))).collect();
        let restores: Vec<_> = pipeline(c, &dumps)
            .into_iter()
            .enumerate()
            .map(|(e, r)| {
                let Value::Bulk(Some(payload)) = parse_value(&r) else {
                    panic!("DUMP {fam}_{e}: {}", common::show(&r))
                };
                let key = format!("{fam}_{e}").into_bytes();
                vec![
                    b"RESTORE".to_vec(),
                    key,
                    b"0".to_vec(),
                    payload,
                    b"REPLACE".to_vec(),
                    b"IDLETIME".to_vec(),
                    b"1000".to_vec(),
                ]
            })
            .collect();
        for r in pipeline(c, &restores) {
            assert_eq!(r, b"+OK\r\n", "RESTORE");
        }
    }
}

/// `OBJECT <sub>` of every key of every family, as "key=reply" for the keys whose reply `keep`
/// selects, with each SORT's reply first.
fn stamp_run(c: &mut Client, sub: &str, keep: impl Fn(i64) -> bool) -> Vec<String> {
    let mut out: Vec<String> =
        STAMP_SORTS.iter().map(|s| format!("{s} -> {}", common::show(&c.cmd(&argv(s))))).collect();
    for fam in ["w", "g", "v", "h"] {
        let cmds: Vec<_> = (0..FAMILY).map(|e| argv(&format!("OBJECT {sub} {fam}_{e}"))).collect();
        for (e, r) in pipeline(c, &cmds).into_iter().enumerate() {
            let Value::Int(n) = parse_value(&r) else { panic!("OBJECT {sub} {fam}_{e}: {}", common::show(&r)) };
            if keep(n) {
                out.push(format!("{fam}_{e}={n}"));
            }
        }
    }
    out
}

/// A walk's BY and GET lookups stamp the keys they read as read (Redis's lookupKeyRead): under
/// an LFU policy the first read of a new key moves its counter from 5 to 6, as on Redis.
#[test]
fn sort_walk_lookups_count_as_lfu_accesses_as_on_redis() {
    let Some(redis) = redis() else { return };
    let run = |server: &Server| -> Vec<String> {
        let mut c = server.client();
        for set in ["maxmemory-policy allkeys-lfu", "lfu-decay-time 0"] {
            assert_eq!(c.cmd(&argv(&format!("CONFIG SET {set}"))), b"+OK\r\n");
        }
        stamp_load(&mut c, false);
        stamp_run(&mut c, "FREQ", |n| n != 5)
    };
    let want = run(&redis);
    assert!(want.len() > FAMILY, "Redis counted the reads: {} keys", want.len());
    assert_same(&run(&TestServer::with_args(DEBUG)), &want);
}

/// `got` equals `want`, or a panic listing where they differ (first few of each side).
fn assert_same(got: &[String], want: &[String]) {
    if got == want {
        return;
    }
    let only = |a: &[String], b: &[String]| -> Vec<String> {
        let b: std::collections::HashSet<&String> = b.iter().collect();
        a.iter().filter(|x| !b.contains(x)).take(12).map(|x| x.chars().take(200).collect()).collect()
    };
    panic!("ours differs from Redis's:\n only ours: {:?}\n only Redis's: {:?}", only(got, want), only(want, got));
}

/// Under an LRU policy the keys a walk reads are idle no more, as on Redis; the others stay
/// as idle as RESTORE ... IDLETIME left them.
#[test]
fn sort_walk_lookups_reset_the_idle_time_as_on_redis() {
    let Some(redis) = redis() else { return };
    let run = |server: &Server| -> Vec<String> {
        let mut c = server.client();
        stamp_load(&mut c, true);
        stamp_run(&mut c, "IDLETIME", |n| n < 100)
            .into_iter()
            // Restored 1000 s idle: under 100 it was read since (seconds may tick between the
            // read and OBJECT IDLETIME, more on a busy machine).
            .map(|s| match s.split_once('=') {
                Some((k, _)) => format!("{k} read"),
                None => s,
            })
            .collect()
    };
    let want = run(&redis);
    assert!(want.len() > FAMILY, "Redis stamped the reads: {} keys", want.len());
    assert_same(&run(&TestServer::with_args(DEBUG)), &want);
}
