//! KEYS over a big database walks the table a step at a time between other clients' commands
//! (`executor::walks`, `db::walk`): the reply must still be exactly the keys that matched and were
//! not expired when KEYS ran, whatever runs while the walk is in progress.
//!
//! - One pipeline, sent in one write: KEYS, then writes of every kind (DEL, SET of new keys and of
//!   stale expired ones, RENAME, MOVE, EXPIRE, PEXPIREAT in the past, PERSIST, FLUSHDB of another
//!   database, SWAPDB, FLUSHDB of its own), then KEYS again: every reply, KEYS's as a sorted set,
//!   equals real Redis's for the same pipeline.
//! - A writer on another connection deleting and adding keys in a known order while KEYS runs:
//!   the reply is the state after some prefix of the writer's sequence, never a torn mix (on
//!   real Redis too).
//! - KEYS inside MULTI and Lua (replied at once), RESP3, many concurrent walks, and a client
//!   that goes away mid-walk.
//! - KEYS then FLUSHDB / FLUSHALL (SYNC, ASYNC) in one pipeline, compared with Redis; a flush does
//!   not wait for the walk (the slowlog's figures), and the flushed tables are freed after it.
//! - The walk is accounted as one command, as Redis accounts KEYS: one call, one slowlog entry
//!   (compared with Redis), and a duration that is the sum of its steps.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Duration;

use common::{encode, parse_value, wait_until, Client, RedisServer, Server, TestServer, Value};

/// Keys in the database under test: well above `walks::WALK_MIN_KEYS`, so the walk spans many
/// steps (about 0.2 µs a key, 250 µs a step).
const N: usize = 50_000;

fn argv(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|p| p.as_bytes().to_vec()).collect()
}

fn key_set(v: &Value) -> BTreeSet<Vec<u8>> {
    match v {
        Value::Agg(_, Some(items)) => items
            .iter()
            .map(|i| match i {
                Value::Bulk(Some(b)) => b.clone(),
                other => panic!("not a bulk: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
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

/// `N` keys in database 0 (`k:i`), some with a far TTL, some stale (expired, still stored: active
/// expiry is off), and a few keys in database 1.
fn load(c: &mut Client) {
    assert_eq!(c.cmd(&argv("DEBUG SET-ACTIVE-EXPIRE 0")), b"+OK\r\n");
    let mut cmds = Vec::new();
    for i in 0..N {
        let mut a = argv(&format!("SET k:{i} v{i}"));
        match i % 10 {
            0 => a.extend(argv("EX 100000")),
            1 => a.extend(argv("PX 1")),
            _ => {}
        }
        cmds.push(a);
        if cmds.len() == 5000 {
            pipeline(c, &cmds);
            cmds.clear();
        }
    }
    pipeline(c, &cmds);
    let mut one = Vec::new();
    for i in 0..2000 {
        one.push(argv(&format!("SET o:{i} x")));
    }
    pipeline(c, &[argv("SELECT 1")]);
    pipeline(c, &one);
    pipeline(c, &[argv("SELECT 0")]);
    // The `PX 1` keys are past their time from here on.
    std::thread::sleep(Duration::from_millis(20));
}

/// The pipeline of the exactness test: KEYS first, then writes that touch keys ahead of and
/// behind the walk's cursor, in every way a key enters or leaves the table.
fn racing_pipeline(pattern: &str) -> Vec<Vec<Vec<u8>>> {
    let mut p = vec![argv(&format!("KEYS {pattern}"))];
    for i in (0..N).step_by(7) {
        p.push(argv(&format!("DEL k:{i}")));
    }
    for i in 0..3000 {
        p.push(argv(&format!("SET new:{i} x")));
    }
    // Stale keys overwritten: they did not exist when KEYS ran.
    for i in (1..N).step_by(40) {
        p.push(argv(&format!("SET k:{i} again")));
    }
    for i in (2..N).step_by(53) {
        p.push(argv(&format!("RENAME k:{i} renamed:{i}")));
    }
    // Onto an existing key, and onto a stale one.
    for i in (3..N).step_by(97) {
        p.push(argv(&format!("RENAME k:{i} k:{}", i + 1)));
        p.push(argv(&format!("RENAME k:{} k:{}", i + 2, i + 8)));
    }
    for i in (4..N).step_by(61) {
        p.push(argv(&format!("PEXPIREAT k:{i} 1")));
        p.push(argv(&format!("EXPIRE k:{} 100000", i + 1)));
        p.push(argv(&format!("PERSIST k:{}", i + 6)));
        p.push(argv(&format!("MOVE k:{} 1", i + 2)));
    }
    // Deleted and then added again, and added and then deleted.
    for i in (5..N).step_by(89) {
        p.push(argv(&format!("DEL k:{i}")));
        p.push(argv(&format!("SET k:{i} back")));
        p.push(argv(&format!("SET tmp:{i} x")));
        p.push(argv(&format!("DEL tmp:{i}")));
    }
    p.push(argv("SELECT 1"));
    p.push(argv("FLUSHDB"));
    p.push(argv("SELECT 0"));
    p.push(argv(&format!("KEYS {pattern}")));
    // The walk's data moves to database 1 and goes on there; then it is emptied under it.
    p.push(argv("SWAPDB 0 1"));
    p.push(argv("SELECT 1"));
    for i in (9..N).step_by(13) {
        p.push(argv(&format!("DEL k:{i}")));
    }
    p.push(argv(&format!("KEYS {pattern}")));
    p.push(argv("FLUSHDB"));
    p.push(argv("SELECT 0"));
    p.push(argv("DBSIZE"));
    p
}

/// Runs the pipeline on `server` and returns each reply, KEYS replies as sorted sets.
fn run_racing(server: &Server, pattern: &str) -> Vec<String> {
    let mut c = server.client();
    load(&mut c);
    let cmds = racing_pipeline(pattern);
    let replies = pipeline(&mut c, &cmds);
    summaries(&cmds, replies)
}

/// Each reply of `cmds` in a form to compare: a KEYS reply as its key set's size and digest (the
/// order of KEYS is the table's), any other as its bytes.
fn summaries(cmds: &[Vec<Vec<u8>>], replies: Vec<Vec<u8>>) -> Vec<String> {
    cmds.iter()
        .zip(replies)
        .map(|(cmd, r)| {
            if cmd[0] == b"KEYS" {
                let set = key_set(&parse_value(&r));
                format!("{} keys, digest {:x}", set.len(), digest(&set))
            } else {
                common::show(&r)
            }
        })
        .collect()
}

/// Ours against Redis's, reply by reply.
fn assert_same(got: &[String], want: &[String], context: &str) {
    assert_eq!(got.len(), want.len(), "{context}: reply count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{context}: reply {i} differs from Redis's");
    }
}

const DEBUG: &[&str] = &["--enable-debug-command", "yes"];

/// Real Redis with DEBUG allowed; None where it is missing and a skip is allowed.
fn redis() -> Option<Server> {
    drop(RedisServer::or_skip()?);
    Some(RedisServer::with_args(DEBUG))
}

/// A digest of a key set, so a mismatch report stays short.
fn digest(set: &BTreeSet<Vec<u8>>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    set.hash(&mut h);
    h.finish()
}

fn compare_racing(pattern: &str, ours_args: &[&str]) {
    let Some(redis) = redis() else { return };
    let ours = TestServer::with_args(&[DEBUG, ours_args].concat());
    let want = run_racing(&redis, pattern);
    let got = run_racing(&ours, pattern);
    assert_same(&got, &want, &format!("pattern {pattern}"));
}

#[test]
fn keys_then_writes_in_one_pipeline_match_redis() {
    compare_racing("*", &[]);
}

#[test]
fn keys_with_a_pattern_then_writes_match_redis() {
    compare_racing("k:1*", &[]);
}

/// The same with the executor on its own thread (io-threads 2), which steps walks between
/// the batches it receives.
#[test]
fn keys_then_writes_match_redis_with_io_threads() {
    compare_racing("*", &["--io-threads", "2"]);
}

/// A second connection deletes `k:i` and adds `n:i` alternately while KEYS runs on the first:
/// the reply is the state after some prefix of that sequence.
fn racing_writer(server: &Server) {
    let mut c = server.client();
    load(&mut c);
    let before = key_set(&parse_value(&c.cmd(&argv("KEYS *"))));
    // Deletions of `k:2`, `k:12`, ... up to the last such key (none has a TTL).
    let n_writes = 2 * (N / 10);
    let port = server.port;
    let go = std::sync::Arc::new(std::sync::Barrier::new(2));
    let go2 = go.clone();
    let writer = std::thread::spawn(move || {
        let mut w = Client::connect(port);
        go2.wait();
        for chunk in (0..n_writes).collect::<Vec<_>>().chunks(50) {
            let cmds: Vec<_> = chunk
                .iter()
                .map(|&j| {
                    if j % 2 == 0 {
                        argv(&format!("DEL k:{}", 2 + j / 2 * 10))
                    } else {
                        argv(&format!("SET n:{} x", j / 2))
                    }
                })
                .collect();
            pipeline(&mut w, &cmds);
        }
    });
    go.wait();
    let got = key_set(&parse_value(&c.cmd(&argv("KEYS *"))));
    writer.join().expect("writer");
    // Which prefix: the number of deletions and additions seen.
    let deleted: Vec<usize> =
        (0..n_writes / 2).filter(|j| !got.contains(format!("k:{}", 2 + j * 10).as_bytes())).collect();
    let added: Vec<usize> = (0..n_writes / 2).filter(|j| got.contains(format!("n:{j}").as_bytes())).collect();
    let (d, a) = (deleted.len(), added.len());
    assert_eq!(deleted, (0..d).collect::<Vec<_>>(), "deletions seen are not a prefix");
    assert_eq!(added, (0..a).collect::<Vec<_>>(), "additions seen are not a prefix");
    assert!(d == a || d == a + 1, "{d} deletions and {a} additions: not one point of the sequence");
    let mut want = before.clone();
    for j in 0..d {
        want.remove(format!("k:{}", 2 + j * 10).as_bytes());
    }
    for j in 0..a {
        want.insert(format!("n:{j}").into_bytes());
    }
    assert_eq!(got, want, "{} ({} deletions, {} additions seen)", server.name, d, a);
}

#[test]
fn keys_beside_a_writer_is_one_point_in_time() {
    if let Some(redis) = redis() {
        racing_writer(&redis);
    }
    racing_writer(&TestServer::with_args(DEBUG));
}

/// KEYS inside MULTI and Lua is replied at once (the walk is synchronous there); a RESP3 client
/// gets the same array. Compared with Redis.
#[test]
fn keys_in_multi_lua_and_resp3_match_redis() {
    let Some(redis) = redis() else { return };
    let ours = TestServer::with_args(DEBUG);
    let run = |server: &Server| -> Vec<String> {
        let mut c = server.client();
        load(&mut c);
        let cmds = vec![
            argv("MULTI"),
            argv("KEYS k:2*"),
            argv("DEL k:2 k:20 k:200 k:2000"),
            argv("SET k:2x y"),
            argv("KEYS k:2*"),
            argv("EXEC"),
            argv("EVAL return#redis.call('keys','k:3*') 0"),
            argv("HELLO 3"),
            argv("KEYS k:4*"),
        ];
        let replies = pipeline(&mut c, &cmds);
        let mut out = Vec::new();
        for (cmd, r) in cmds.iter().zip(replies) {
            let v = parse_value(&r);
            match (cmd[0].as_slice(), v) {
                (b"EXEC", Value::Agg(_, Some(items))) => {
                    out.push(format!("{:?}", key_set(&items[0]).len()));
                    out.push(format!("{:?}", key_set(&items[3])));
                }
                (b"KEYS", v @ Value::Agg(..)) => out.push(format!("{:?}", key_set(&v))),
                (b"HELLO", _) => {}
                _ => out.push(common::show(&r)),
            }
        }
        out
    };
    assert_eq!(run(&ours), run(&redis));
}

/// Several clients walk at once, one goes away in the middle of its walk: each of the others
/// gets the whole reply, and the server goes on answering.
#[test]
fn concurrent_walks_and_a_client_that_leaves() {
    let server = TestServer::with_args(DEBUG);
    let mut c = server.client();
    assert_eq!(c.cmd(&argv("DEBUG POPULATE 200000")), b"+OK\r\n");
    let mut leaver = server.client();
    leaver.send_raw(&encode(&argv("KEYS *"))).expect("send");
    drop(leaver);
    let port = server.port;
    let walkers: Vec<_> = (0..6)
        .map(|i| {
            std::thread::spawn(move || {
                let mut w = Client::connect(port);
                let pattern = if i % 2 == 0 { "*".to_string() } else { format!("key:{i}*") };
                let mut n = Vec::new();
                for _ in 0..2 {
                    n.push(key_set(&parse_value(&w.cmd(&argv(&format!("KEYS {pattern}"))))).len());
                }
                (i, n)
            })
        })
        .collect();
    for h in walkers {
        let (i, n) = h.join().expect("walker");
        // key:0 .. key:199999: those starting with key:i (i in 1..6) are 1 + 10 + 100 + 1000 +
        // 10000 + 100000 / ... counted directly.
        let want = if i % 2 == 0 {
            200_000
        } else {
            (0..200_000).filter(|k| format!("{k}").starts_with(&i.to_string())).count()
        };
        assert_eq!(n, vec![want, want], "walker {i}");
    }
    assert_eq!(c.cmd(&argv("PING")), b"+PONG\r\n");
    assert_eq!(c.cmd(&argv("DBSIZE")), b":200000\r\n");
}

/// A slowlog entry: duration (µs), argv, peer, client name.
type Logged = (i64, Vec<Vec<u8>>, Vec<u8>, Vec<u8>);

/// The SLOWLOG GET entries, newest first.
fn slowlog(c: &mut Client) -> Vec<Logged> {
    let Value::Agg(_, Some(entries)) = parse_value(&c.cmd(&argv("SLOWLOG GET -1"))) else { panic!("SLOWLOG GET") };
    entries
        .into_iter()
        .map(|e| {
            let Value::Agg(_, Some(f)) = e else { panic!("a slowlog entry: {e:?}") };
            let (Value::Int(us), Value::Agg(_, Some(args)), Value::Bulk(Some(peer)), Value::Bulk(Some(name))) =
                (&f[2], &f[3], &f[4], &f[5])
            else {
                panic!("a slowlog entry: {f:?}")
            };
            let args = args.iter().map(|a| if let Value::Bulk(Some(b)) = a { b.clone() } else { panic!("{a:?}") });
            (*us, args.collect(), peer.clone(), name.clone())
        })
        .collect()
}

/// One `field=value` of an INFO commandstats line (`cmdstat_keys:calls=1,usec=...`), from an
/// INFO reply.
fn cmdstat(info: &[u8], cmd: &str, field: &str) -> Option<String> {
    let info = String::from_utf8_lossy(info);
    let line = info.lines().find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:")))?;
    line.split(',').find_map(|kv| kv.strip_prefix(&format!("{field}="))).map(str::to_string)
}

/// With slowlog-log-slower-than 0, a KEYS over 10k keys (a walk here, several steps) is one
/// slowlog entry with its own arguments, the client's address and the name it had when KEYS
/// ran, and one call in commandstats, already counted for the next command of its pipeline; with
/// a threshold out of reach, nothing is logged. The same figures as Redis's, with the executor
/// on the connections' thread and on its own.
#[test]
fn a_walking_keys_is_accounted_once_as_in_redis() {
    let Some(redis) = redis() else { return };
    let run = |server: &Server| -> Vec<String> {
        let mut c = server.client();
        let me = c.stream.local_addr().expect("local address").to_string().into_bytes();
        let mut out = Vec::new();
        for cmd in ["DEBUG POPULATE 10000", "CLIENT SETNAME walker", "CONFIG SET slowlog-log-slower-than 0"] {
            out.push(common::show(&c.cmd(&argv(cmd))));
        }
        out.push(common::show(&c.cmd(&argv("SLOWLOG RESET"))));
        out.push(common::show(&c.cmd(&argv("CONFIG RESETSTAT"))));
        let replies =
            pipeline(&mut c, &[argv("KEYS *"), argv("INFO commandstats"), argv("CLIENT SETNAME later"), argv("PING")]);
        out.push(format!("{} keys", key_set(&parse_value(&replies[0])).len()));
        out.push(format!("calls seen by the next command: {:?}", cmdstat(&replies[1], "keys", "calls")));
        out.push(common::show(&replies[2]));
        let keys: Vec<_> = slowlog(&mut c).into_iter().filter(|e| e.1[0] == b"KEYS").collect();
        out.push(format!("{} KEYS entries", keys.len()));
        for (us, args, peer, name) in keys {
            out.push(format!("{} {} own peer: {}", common::show_argv(&args), common::show(&name), peer == me));
            assert!(us > 0, "{}: a KEYS of 10000 keys logged as {us} µs", server.name);
        }
        let info = c.cmd(&argv("INFO commandstats"));
        out.push(format!("calls {:?}", cmdstat(&info, "keys", "calls")));
        out.push(format!("processed {}", common::info_field(&mut c, "stats", "total_commands_processed")));
        // Out of reach: nothing logged, still one more call.
        c.cmd(&argv("CONFIG SET slowlog-log-slower-than 1000000000"));
        c.cmd(&argv("SLOWLOG RESET"));
        out.push(format!("{} keys", key_set(&parse_value(&c.cmd(&argv("KEYS *")))).len()));
        out.push(common::show(&c.cmd(&argv("SLOWLOG LEN"))));
        out.push(format!("calls {:?}", cmdstat(&c.cmd(&argv("INFO commandstats")), "keys", "calls")));
        out
    };
    let want = run(&redis);
    assert_eq!(run(&TestServer::with_args(DEBUG)), want);
    assert_eq!(run(&TestServer::with_args(&[DEBUG, &["--io-threads", "2"]].concat())), want);
}

/// The duration KEYS is recorded with is the executor time of its whole walk, not of its first
/// step: the slowlog, commandstats' usec and the latency monitor's `command` event show the
/// same figure, and it is more than ten steps' worth (every step but the last runs for a whole
/// `walks::STEP`, 250 µs, and listing 300k keys takes several times that even on a fast
/// machine, while a first step alone stops at one STEP). Timing only bounds it from below, so
/// a loaded machine cannot make this fail.
#[test]
fn the_duration_of_a_walking_keys_is_all_its_steps() {
    let server = TestServer::with_args(DEBUG);
    let mut c = server.client();
    c.cmd(&argv("DEBUG POPULATE 300000"));
    c.cmd(&argv("CONFIG SET slowlog-log-slower-than 0"));
    c.cmd(&argv("CONFIG SET latency-monitor-threshold 1"));
    c.cmd(&argv("SLOWLOG RESET"));
    c.cmd(&argv("LATENCY RESET"));
    c.cmd(&argv("CONFIG RESETSTAT"));
    assert_eq!(key_set(&parse_value(&c.cmd(&argv("KEYS *")))).len(), 300_000);
    let log = slowlog(&mut c);
    let keys: Vec<_> = log.iter().filter(|e| e.1[0] == b"KEYS").collect();
    assert_eq!(keys.len(), 1);
    let us = keys[0].0;
    assert!(us > 2500, "KEYS over 300k keys recorded as {us} µs: one step's worth, not the walk's");
    let info = c.cmd(&argv("INFO commandstats"));
    assert_eq!(cmdstat(&info, "keys", "usec"), Some(us.to_string()));
    assert_eq!(cmdstat(&info, "keys", "calls").as_deref(), Some("1"));
    // LATENCY LATEST: name, time, latest ms, max ms.
    let Value::Agg(_, Some(events)) = parse_value(&c.cmd(&argv("LATENCY LATEST"))) else { panic!("LATENCY LATEST") };
    let command = events
        .iter()
        .find_map(|e| match e {
            Value::Agg(_, Some(f)) if f[0] == Value::Bulk(Some(b"command".to_vec())) => Some(f[2].clone()),
            _ => None,
        })
        .expect("a `command` latency event");
    assert_eq!(command, Value::Int(us / 1000));
}

/// KEYS, then a flush of its database in the same pipeline, then new keys and KEYS again: the
/// first KEYS lists the keys of its time (the walk goes on through the flushed table), the
/// rest sees the flush, as in Redis; every flush form, and DEBUG RELOAD (which empties the
/// databases before loading the saved ones), the executor on the connections' thread and on
/// its own.
#[test]
fn keys_then_a_flush_in_one_pipeline_match_redis() {
    let Some(redis) = redis() else { return };
    let run = |server: &Server, flush: &str| -> Vec<String> {
        let mut c = server.client();
        // One Redis serves every case: the last one's keys go.
        assert_eq!(c.cmd(&argv("FLUSHALL")), b"+OK\r\n");
        load(&mut c);
        let mut cmds = vec![argv("KEYS *"), argv("KEYS k:1*"), argv("DEL k:5 k:6"), argv("SET late x"), argv(flush)];
        for i in 0..100 {
            cmds.push(argv(&format!("SET new:{i} x")));
        }
        cmds.extend([argv("KEYS *"), argv("DBSIZE"), argv("SELECT 1"), argv("DBSIZE"), argv("SELECT 0")]);
        let replies = pipeline(&mut c, &cmds);
        summaries(&cmds, replies)
    };
    for flush in ["FLUSHDB", "FLUSHALL", "FLUSHALL ASYNC", "FLUSHDB ASYNC", "FLUSHALL SYNC", "DEBUG RELOAD"] {
        let want = run(&redis, flush);
        for threads in ["1", "2"] {
            let ours = TestServer::with_args(&[DEBUG, &["--io-threads", threads]].concat());
            let got = run(&ours, flush);
            assert_same(&got, &want, &format!("{flush}, io-threads {threads}"));
        }
    }
}

/// A FLUSHALL while a big database is being walked does not finish the walk first: its own
/// duration (the slowlog's, the executor time it took) is a small part of the walk's. The
/// flushed tables are freed once the walk is over, and a client that leaves mid-walk after the
/// flush frees them as well.
#[test]
fn a_flush_during_a_walk_does_not_wait_for_it() {
    let server = TestServer::with_args(DEBUG);
    let mut c = server.client();
    let used = |c: &mut Client| common::info_field(c, "memory", "used_memory").parse::<u64>().expect("used_memory");
    let empty = used(&mut c);
    c.cmd(&argv("DEBUG POPULATE 500000"));
    c.cmd(&argv("CONFIG SET slowlog-log-slower-than 0"));
    c.cmd(&argv("SLOWLOG RESET"));
    let replies = pipeline(&mut c, &[argv("KEYS *"), argv("FLUSHALL"), argv("DBSIZE")]);
    assert_eq!(key_set(&parse_value(&replies[0])).len(), 500_000);
    assert_eq!(replies[1], b"+OK\r\n");
    assert_eq!(replies[2], b":0\r\n");
    let log = slowlog(&mut c);
    let took = |name: &[u8]| log.iter().find(|e| e.1[0] == name).map(|e| e.0).expect("logged");
    let (keys, flush) = (took(b"KEYS"), took(b"FLUSHALL"));
    assert!(flush * 4 < keys, "FLUSHALL took {flush} µs of a walk of {keys} µs: it waited for the walk");
    wait_until("the walked tables freed", || used(&mut c) < empty + 16 * 1024 * 1024);
    // The same with a client that leaves while its walk goes through the flushed tables.
    c.cmd(&argv("DEBUG POPULATE 500000"));
    let mut leaver = server.client();
    leaver.send_raw(&[encode(&argv("KEYS *")), encode(&argv("FLUSHALL"))].concat()).expect("send");
    wait_until("the flush", || c.cmd(&argv("DBSIZE")) == b":0\r\n");
    drop(leaver);
    wait_until("the walked tables freed after the client left", || used(&mut c) < empty + 16 * 1024 * 1024);
    assert_eq!(c.cmd(&argv("PING")), b"+PONG\r\n");
}
