//! RDB files written by ferrodis, loaded back by the real redis-server 7.0.15.
//!
//! A dataset covering every type and encoding is built in ferrodis (strings at every integer
//! width and length-prefix edge, LZF-able and incompressible, binary; lists, hashes, sets and
//! zsets small and big, integers of every packed width; streams with deleted entries, groups,
//! PELs and consumers; expiries; three databases). ferrodis SAVEs it with rdb-version 10 and 9
//! (and BGSAVEs it); `redis-check-rdb` must accept each file, and a real redis-server started
//! on a copy must hold exactly what ferrodis held: key by key TYPE, PEXPIRETIME, OBJECT ENCODING
//! of collections and the value (GET, LRANGE, HGETALL and SMEMBERS sorted, ZRANGE WITHSCORES,
//! XINFO STREAM FULL; for RDB 9, which lacks the 7.0 stream counters, XRANGE, groups, consumers
//! and XPENDING). A FUNCTION2 record written through the library API must show in FUNCTION LIST.
//!
//! Also: BGSAVE's replies and INFO persistence while and after a child runs, busy-BGSAVE and
//! MISCONF replies compared byte for byte with Redis (a failed background save, then SAVE),
//! save points firing from cron, SHUTDOWN SAVE/NOSAVE and SIGTERM (with and without save
//! points), a child killed by SHUTDOWN leaving no temp file, IDLE opcodes under an LRU policy,
//! and a version that cannot hold the data being refused with its reason (field TTLs at RDB 10).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{parse_value, show, show_argv, Client, RedisServer, Server, TestServer, Value};

fn ok(c: &mut Client, argv: &[&str]) {
    let r = c.cmd(argv);
    assert!(!r.starts_with(b"-"), "{argv:?} failed: {}", show(&r));
}

fn bytes_cmd(c: &mut Client, argv: &[Vec<u8>]) {
    let r = c.cmd(argv);
    assert!(!r.starts_with(b"-"), "command failed: {}", show(&r));
}

/// Incompressible bytes of length `n` (a simple xorshift stream).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The dataset: every type, every encoding, in dbs 0, 1 and 15.
fn build_dataset(c: &mut Client) {
    // Strings: integers on both sides of every int8/16/32 boundary and beyond, look-alikes that
    // must stay strings, LZF edges, length-prefix edges, binary, empty.
    let ints: [i64; 16] = [
        0,
        1,
        -1,
        127,
        128,
        -128,
        -129,
        32767,
        32768,
        -32769,
        2147483647,
        2147483648,
        -2147483649,
        i64::MAX,
        i64::MIN,
        12,
    ];
    for v in ints {
        ok(c, &["SET", &format!("str:int:{v}"), &v.to_string()]);
    }
    for s in ["00", "-0", "+5", " 7", "0x1f", "1.0", "9223372036854775808", "007"] {
        ok(c, &["SET", &format!("str:like:{s}"), s]);
    }
    ok(c, &["SET", "str:plain:20", &"a".repeat(20)]);
    ok(c, &["SET", "str:lzf:21", &"a".repeat(21)]);
    ok(c, &["SET", "str:lzf:big", &"hello world ".repeat(1000)]);
    for n in [63usize, 64, 16383, 16384, 70000] {
        bytes_cmd(c, &[b"SET".to_vec(), format!("str:random:{n}").into_bytes(), noise(n, n as u64)]);
    }
    bytes_cmd(c, &[b"SET".to_vec(), b"str:binary\x00\xff\r\n".to_vec(), b"\x00\x01\xfe\xff\r\n".to_vec()]);
    ok(c, &["SET", "", "empty key"]);
    ok(c, &["SET", "str:empty", ""]);
    ok(c, &["SET", &"k".repeat(1000), "long key"]);
    ok(c, &["SET", "ключ:🔑", "unicode"]);
    ok(c, &["PFADD", "str:hll:sparse", "a", "b", "c"]);
    let many: Vec<String> = (0..3000).map(|i| format!("e{i}")).collect();
    let mut pf = vec!["PFADD", "str:hll:dense"];
    pf.extend(many.iter().map(|s| s.as_str()));
    ok(c, &pf);
    ok(c, &["SETBIT", "str:bitmap", "1000", "1"]);
    ok(c, &["APPEND", "str:append", "abc"]);
    ok(c, &["APPEND", "str:append", "def"]);
    ok(c, &["INCRBY", "str:incr", "41"]);
    ok(c, &["INCRBYFLOAT", "str:float", "3.25"]);

    // Lists: small, integers of every listpack width, binary and empty elements, big elements,
    // many nodes.
    ok(c, &["RPUSH", "list:small", "a", "b", "c"]);
    let widths = [
        "0",
        "127",
        "128",
        "-1",
        "4095",
        "-4096",
        "4096",
        "32767",
        "-32768",
        "32768",
        "8388607",
        "-8388608",
        "8388608",
        "2147483647",
        "-2147483648",
        "2147483648",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "-0",
        "01",
    ];
    let mut l = vec!["RPUSH", "list:ints"];
    l.extend(widths);
    ok(c, &l);
    bytes_cmd(c, &[b"RPUSH".to_vec(), b"list:binary".to_vec(), b"\x00\xff".to_vec(), Vec::new(), b"x".to_vec()]);
    bytes_cmd(
        c,
        &[b"RPUSH".to_vec(), b"list:bigvals".to_vec(), noise(70000, 7), vec![b'z'; 5000], noise(100, 3), b"s".to_vec()],
    );
    let big: Vec<String> = (0..1500).map(|i| format!("element-{i}")).collect();
    let mut l = vec!["RPUSH", "list:large"];
    l.extend(big.iter().map(|s| s.as_str()));
    ok(c, &l);
    let big: Vec<String> = (0..2000).map(|i| (i * 7919 - 5000).to_string()).collect();
    let mut l = vec!["RPUSH", "list:large:ints"];
    l.extend(big.iter().map(|s| s.as_str()));
    ok(c, &l);

    // Hashes: listpack (small, integer values of every width, binary) and hashtable (many
    // fields, a long value).
    ok(c, &["HSET", "hash:small", "f1", "v1", "f2", "v2", "n", "3"]);
    let mut h = vec!["HSET", "hash:ints"];
    for w in widths.iter() {
        h.push(w);
        h.push(w);
    }
    ok(c, &h);
    bytes_cmd(c, &[b"HSET".to_vec(), b"hash:binary".to_vec(), b"\x00f".to_vec(), b"\xff\x00v".to_vec()]);
    let fields: Vec<String> = (0..600).map(|i| format!("field:{i}")).collect();
    let mut h = vec!["HSET", "hash:large"];
    for f in &fields {
        h.push(f);
        h.push(f);
    }
    ok(c, &h);
    ok(c, &["HSET", "hash:longvalue", "f", &"v".repeat(100), "g", "1"]);

    // Sets: intsets of each width, 500 ints (still intset), 600 ints (hashtable), strings.
    ok(c, &["SADD", "set:int16", "1", "2", "-3"]);
    ok(c, &["SADD", "set:int32", "1", "70000"]);
    ok(c, &["SADD", "set:int64", "1", "5000000000"]);
    for (key, n) in [("set:ints:500", 500), ("set:ints:600", 600)] {
        let m: Vec<String> = (0..n).map(|i| (i * 3).to_string()).collect();
        let mut s = vec!["SADD", key];
        s.extend(m.iter().map(|x| x.as_str()));
        ok(c, &s);
    }
    ok(c, &["SADD", "set:strings", "a", "b", "c", "1"]);
    let m: Vec<String> = (0..1000).map(|i| format!("member:{i}")).collect();
    let mut s = vec!["SADD", "set:large"];
    s.extend(m.iter().map(|x| x.as_str()));
    ok(c, &s);
    bytes_cmd(c, &[b"SADD".to_vec(), b"set:binary".to_vec(), b"\x00".to_vec(), b"\xff\xfe".to_vec()]);

    // Sorted sets: listpack with special scores, integer members, equal scores; skiplist.
    ok(
        c,
        &[
            "ZADD",
            "zset:small",
            "inf",
            "pinf",
            "-inf",
            "ninf",
            "-0",
            "negzero",
            "1e-300",
            "tiny",
            "1.7976931348623157e308",
            "max",
            "0.1",
            "tenth",
            "3.141592653589793",
            "pi",
            "5",
            "five",
            "-70000",
            "neg",
            "4503599627370497",
            "big",
        ],
    );
    ok(c, &["ZADD", "zset:intmembers", "1", "100", "2", "-5", "3", "70000"]);
    ok(c, &["ZADD", "zset:equal", "1", "b", "1", "a", "1", "c"]);
    let mut z: Vec<String> = vec!["ZADD".into(), "zset:large".into()];
    for i in 0..300 {
        z.push(format!("{}", i as f64 * 1.5 - 100.0));
        z.push(format!("m{i}"));
    }
    z.extend(["inf".into(), "top".into(), "-inf".into(), "bottom".into()]);
    let zr: Vec<&str> = z.iter().map(|s| s.as_str()).collect();
    ok(c, &zr);
    ok(c, &["ZADD", "zset:longmember", "1", &"m".repeat(100), "2", "short"]);

    // Streams: several nodes, deleted entries (including a node's first), differing fields,
    // groups with PELs, acks, XCLAIM, an empty consumer, NOACK; an emptied stream with a group;
    // XSETID with ENTRIESADDED/MAXDELETEDID; a trimmed one.
    for i in 1..=250u64 {
        let fields: Vec<String> = if i % 17 == 0 {
            vec!["other".into(), i.to_string()]
        } else {
            vec!["name".into(), format!("n{i}"), "num".into(), (i * 1000).to_string()]
        };
        let mut x: Vec<String> = vec!["XADD".into(), "stream:basic".into(), format!("1700000000000-{i}")];
        x.extend(fields);
        let xr: Vec<&str> = x.iter().map(|s| s.as_str()).collect();
        ok(c, &xr);
    }
    ok(c, &["XDEL", "stream:basic", "1700000000000-1", "1700000000000-50", "1700000000000-101"]);
    ok(c, &["XGROUP", "CREATE", "stream:basic", "g1", "0"]);
    ok(c, &["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "5", "STREAMS", "stream:basic", ">"]);
    ok(c, &["XREADGROUP", "GROUP", "g1", "bob", "COUNT", "3", "STREAMS", "stream:basic", ">"]);
    ok(c, &["XACK", "stream:basic", "g1", "1700000000000-2"]);
    ok(c, &["XCLAIM", "stream:basic", "g1", "bob", "0", "1700000000000-3", "TIME", "1700000500000", "RETRYCOUNT", "7"]);
    ok(c, &["XGROUP", "CREATE", "stream:basic", "g2", "$"]);
    ok(c, &["XGROUP", "CREATECONSUMER", "stream:basic", "g2", "idle"]);
    ok(c, &["XGROUP", "CREATE", "stream:basic", "g3", "0", "ENTRIESREAD", "3"]);
    ok(c, &["XREADGROUP", "GROUP", "g3", "noack", "NOACK", "COUNT", "2", "STREAMS", "stream:basic", ">"]);
    ok(c, &["XADD", "stream:empty", "5-1", "f", "v"]);
    ok(c, &["XGROUP", "CREATE", "stream:empty", "g", "0"]);
    ok(c, &["XDEL", "stream:empty", "5-1"]);
    ok(c, &["XADD", "stream:setid", "10-1", "a", "1"]);
    ok(c, &["XSETID", "stream:setid", "20-5", "ENTRIESADDED", "9", "MAXDELETEDID", "15-0"]);
    for i in 1..=30 {
        ok(c, &["XADD", "stream:trimmed", "MAXLEN", "10", &format!("{i}-0"), "v", &i.to_string()]);
    }
    ok(c, &["XADD", "stream:bigvalues", "1-1", "big", &"x".repeat(5000), "n", "12"]);

    // Expiries: one key of each type, far in the future and just past 2038.
    for (k, t) in [
        ("ttl:str", "string"),
        ("ttl:list", "list"),
        ("ttl:hash", "hash"),
        ("ttl:set", "set"),
        ("ttl:zset", "zset"),
        ("ttl:stream", "stream"),
    ] {
        match t {
            "string" => ok(c, &["SET", k, "v"]),
            "list" => ok(c, &["RPUSH", k, "v"]),
            "hash" => ok(c, &["HSET", k, "f", "v"]),
            "set" => ok(c, &["SADD", k, "v"]),
            "zset" => ok(c, &["ZADD", k, "1", "v"]),
            _ => ok(c, &["XADD", k, "1-1", "f", "v"]),
        }
        ok(c, &["PEXPIREAT", k, "4102444800123"]);
    }
    ok(c, &["SET", "ttl:2038", "v", "PXAT", "2147483648500"]);

    // Other databases.
    ok(c, &["SET", "str:short", "db0"]);
    ok(c, &["SELECT", "1"]);
    ok(c, &["SET", "str:short", "db1"]);
    ok(c, &["RPUSH", "db1:list", "x", "y"]);
    ok(c, &["SET", "db1:ttl", "v", "PXAT", "4102444800999"]);
    ok(c, &["SELECT", "15"]);
    ok(c, &["SET", "str:short", "db15"]);
    ok(c, &["HSET", "db15:hash", "a", "b"]);
    ok(c, &["SELECT", "0"]);
}

fn flat(v: Value) -> Vec<Vec<u8>> {
    match v {
        Value::Agg(_, Some(items)) => items
            .into_iter()
            .map(|i| match i {
                Value::Bulk(Some(b)) => b,
                other => panic!("unexpected element {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// Every key of the current database, sorted.
fn keys(c: &mut Client) -> Vec<Vec<u8>> {
    let mut k = flat(parse_value(&c.cmd(&["KEYS", "*"])));
    k.sort();
    k
}

/// What a key holds, as comparable bytes.
/// `legacy`: the file was RDB 9, which has no stream counters (entries-added, max-deleted-id,
/// entries-read), so streams are compared on what RDB 9 carries: entries, groups' last IDs,
/// consumers and pending entries.
fn describe(c: &mut Client, key: &[u8], legacy: bool) -> Vec<Vec<u8>> {
    let k = key.to_vec();
    let t = c.cmd(&[b"TYPE".to_vec(), k.clone()]);
    let mut out = vec![t.clone(), c.cmd(&[b"PEXPIRETIME".to_vec(), k.clone()])];
    // Collections come back in the encoding they had (strings may legitimately change between
    // embstr and raw on a reload, so theirs is not compared).
    if t != b"+string\r\n" {
        out.push(c.cmd(&[b"OBJECT".to_vec(), b"ENCODING".to_vec(), k.clone()]));
    }
    match &t[..] {
        b"+string\r\n" => out.push(c.cmd(&[b"GET".to_vec(), k])),
        b"+list\r\n" => out.push(c.cmd(&[b"LRANGE".to_vec(), k, b"0".to_vec(), b"-1".to_vec()])),
        b"+zset\r\n" => {
            out.push(c.cmd(&[b"ZRANGE".to_vec(), k, b"0".to_vec(), b"-1".to_vec(), b"WITHSCORES".to_vec()]))
        }
        b"+set\r\n" => {
            let mut m = flat(parse_value(&c.cmd(&[b"SMEMBERS".to_vec(), k])));
            m.sort();
            out.extend(m);
        }
        b"+hash\r\n" => {
            let all = flat(parse_value(&c.cmd(&[b"HGETALL".to_vec(), k])));
            let mut pairs: Vec<Vec<u8>> =
                all.chunks(2).map(|p| [p[0].clone(), b"=".to_vec(), p[1].clone()].concat()).collect();
            pairs.sort();
            out.extend(pairs);
        }
        b"+stream\r\n" if !legacy => {
            out.push(common::without_active_time(c.cmd(&[b"XINFO".to_vec(), b"STREAM".to_vec(), k, b"FULL".to_vec()])))
        }
        b"+stream\r\n" => {
            out.push(c.cmd(&[b"XRANGE".to_vec(), k.clone(), b"-".to_vec(), b"+".to_vec()]));
            out.push(c.cmd(&[b"XLEN".to_vec(), k.clone()]));
            let Value::Agg(_, Some(groups)) = parse_value(&c.cmd(&[b"XINFO".to_vec(), b"GROUPS".to_vec(), k.clone()]))
            else {
                panic!("XINFO GROUPS");
            };
            for g in groups {
                let Value::Agg(_, Some(fields)) = g else { panic!("group") };
                let mut name = Vec::new();
                for pair in fields.chunks(2) {
                    let Value::Bulk(Some(field)) = &pair[0] else { continue };
                    if field == b"name" {
                        if let Value::Bulk(Some(n)) = &pair[1] {
                            name = n.clone();
                        }
                    }
                    if [&b"name"[..], b"consumers", b"pending", b"last-delivered-id"].contains(&&field[..]) {
                        out.push([field.clone(), format!("={:?}", pair[1]).into_bytes()].concat());
                    }
                }
                assert!(!name.is_empty(), "group without a name");
                out.push(c.cmd(&[b"XPENDING".to_vec(), k.clone(), name.clone()]));
                // Consumer names and pending counts (idle times differ by the load delay).
                let Value::Agg(_, Some(consumers)) =
                    parse_value(&c.cmd(&[b"XINFO".to_vec(), b"CONSUMERS".to_vec(), k.clone(), name]))
                else {
                    panic!("XINFO CONSUMERS");
                };
                for cons in consumers {
                    let Value::Agg(_, Some(f)) = cons else { panic!("consumer") };
                    out.push(format!("{:?} {:?}", f.get(1), f.get(3)).into_bytes());
                }
            }
        }
        other => panic!("unexpected TYPE {}", show(other)),
    }
    out
}

/// Asserts that `b` holds exactly what `a` holds, in every database.
fn assert_same_dataset(a: &Server, b: &Server, legacy: bool) {
    let (mut ca, mut cb) = (a.client(), b.client());
    let mut total = 0;
    for db in 0..16 {
        ok(&mut ca, &["SELECT", &db.to_string()]);
        ok(&mut cb, &["SELECT", &db.to_string()]);
        let (ka, kb) = (keys(&mut ca), keys(&mut cb));
        assert_eq!(
            ka.iter().map(|k| show(k)).collect::<Vec<_>>(),
            kb.iter().map(|k| show(k)).collect::<Vec<_>>(),
            "db {db}: key sets differ"
        );
        for k in &ka {
            let (da, dbb) = (describe(&mut ca, k, legacy), describe(&mut cb, k, legacy));
            for (x, y) in da.iter().zip(&dbb) {
                assert_eq!(show(x), show(y), "db {db} key {}", show(k));
            }
            assert_eq!(da.len(), dbb.len(), "db {db} key {}", show(k));
            total += 1;
        }
    }
    assert!(total > 80, "dataset too small: {total} keys");
}

fn info_field(c: &mut Client, section: &str, name: &str) -> String {
    let r = c.cmd(&["INFO", section]);
    let text = String::from_utf8_lossy(&r).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("INFO {section} has no {name}: {text}"))
}

fn wait_bgsave_done(c: &mut Client) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(c, "persistence", "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "BGSAVE did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `redis-check-rdb` accepts the file.
fn check_rdb(path: &Path) {
    // CI installs redis-tools: a missing checker fails the test rather than skipping the check.
    let out = std::process::Command::new("redis-check-rdb").arg(path).output().unwrap_or_else(|e| {
        panic!("redis-check-rdb cannot run ({e}): install redis-tools (apt-get install -y redis-tools, or `make test`)")
    });
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("RDB looks OK"), "redis-check-rdb {path:?}:\n{text}");
}

/// Starts the real redis-server on a copy of `rdb`.
fn redis_on(rdb: &Path) -> (Server, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "ferrodis-rdbsave-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::copy(rdb, dir.join("dump.rdb")).expect("copy rdb");
    let d = dir.to_string_lossy().into_owned();
    (RedisServer::with_args(&["--dir", &d, "--dbfilename", "dump.rdb"]), dir)
}

fn save_and_compare(version: &str) {
    let f = TestServer::new();
    let mut c = f.client();
    build_dataset(&mut c);
    ok(&mut c, &["CONFIG", "SET", "rdb-version", version]);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let path = f.dir.join("dump.rdb");
    let header = std::fs::read(&path).expect("dump.rdb written");
    assert_eq!(&header[..9], format!("REDIS{:0>4}", version).as_bytes());
    check_rdb(&path);
    let (r, dir) = redis_on(&path);
    assert_same_dataset(&f, &r, version == "9");
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn save_v10_loads_into_redis() {
    save_and_compare("10");
}

#[test]
fn save_v9_loads_into_redis() {
    save_and_compare("9");
}

#[test]
fn save_without_compression_or_checksum() {
    let f = TestServer::with_args(&["--rdbchecksum", "no", "--rdbcompression", "no"]);
    let mut c = f.client();
    build_dataset(&mut c);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let path = f.dir.join("dump.rdb");
    let bytes = std::fs::read(&path).expect("dump.rdb");
    assert_eq!(&bytes[bytes.len() - 8..], &[0u8; 8], "rdbchecksum no writes a zero trailer");
    check_rdb(&path);
    let (r, dir) = redis_on(&path);
    assert_same_dataset(&f, &r, false);
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bgsave_replies_info_and_file() {
    let f = TestServer::new();
    let mut c = f.client();
    build_dataset(&mut c);
    assert_eq!(c.cmd(&["BGSAVE", "now"]), b"-ERR syntax error\r\n");
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    // The dataset is small: the child may already be done, so a second BGSAVE either starts
    // again or is refused with Redis's text.
    let again = c.cmd(&["BGSAVE", "SCHEDULE"]);
    assert!(
        again == b"+Background saving started\r\n" || again == b"-ERR Background save already in progress\r\n",
        "{}",
        show(&again)
    );
    wait_bgsave_done(&mut c);
    assert_eq!(info_field(&mut c, "persistence", "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "persistence", "rdb_changes_since_last_save"), "0");
    assert!(info_field(&mut c, "stats", "total_forks").parse::<u64>().unwrap() >= 1);
    assert!(info_field(&mut c, "stats", "latest_fork_usec").parse::<u64>().unwrap() > 0);
    let log = f.log();
    assert!(log.contains("Background saving started by pid"), "{log}");
    assert!(log.contains("Background saving terminated with success"), "{log}");
    let path = f.dir.join("dump.rdb");
    check_rdb(&path);
    assert!(!std::fs::read_dir(&f.dir).unwrap().any(|e| e.unwrap().file_name().to_string_lossy().starts_with("temp-")));
    let (r, dir) = redis_on(&path);
    assert_same_dataset(&f, &r, false);
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bgsave_inside_exec_is_scheduled() {
    let f = TestServer::new();
    let mut c = f.client();
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["MULTI"]);
    c.cmd(&["BGSAVE"]);
    let r = c.cmd(&["EXEC"]);
    assert_eq!(r, b"*1\r\n+Background saving scheduled\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f.dir.join("dump.rdb").exists() {
        assert!(Instant::now() < deadline, "scheduled BGSAVE never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn save_points_fire_from_cron() {
    let f = TestServer::new();
    let mut c = f.client();
    ok(&mut c, &["CONFIG", "SET", "save", "1 1"]);
    ok(&mut c, &["SET", "a", "1"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f.log().contains("Background saving terminated with success") {
        assert!(Instant::now() < deadline, "no save point fired; log:\n{}", f.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(f.log().contains("1 changes in 1 seconds. Saving..."), "{}", f.log());
    assert_eq!(info_field(&mut c, "persistence", "rdb_changes_since_last_save"), "0");
    assert_eq!(c.cmd(&["CONFIG", "GET", "save"]), b"*2\r\n$4\r\nsave\r\n$3\r\n1 1\r\n");
    ok(&mut c, &["CONFIG", "SET", "save", "900 1 300 10"]);
    assert_eq!(c.cmd(&["CONFIG", "GET", "save"]), b"*2\r\n$4\r\nsave\r\n$12\r\n900 1 300 10\r\n");
    ok(&mut c, &["CONFIG", "SET", "save", ""]);
    assert_eq!(c.cmd(&["CONFIG", "GET", "save"]), b"*2\r\n$4\r\nsave\r\n$0\r\n\r\n");
}

/// After a background save fails (its directory vanished), writes get Redis's MISCONF error,
/// byte for byte as Redis sends it; reads still work; a successful SAVE clears it.
#[test]
fn misconf_after_failed_bgsave_matches_redis() {
    fn provoke(s: &Server) -> Vec<Vec<u8>> {
        let mut c = s.client();
        let gone = s.dir.join("gone");
        std::fs::create_dir_all(&gone).unwrap();
        ok(&mut c, &["CONFIG", "SET", "save", "900 1"]);
        ok(&mut c, &["CONFIG", "SET", "dir", &gone.to_string_lossy()]);
        std::fs::remove_dir_all(&gone).unwrap();
        ok(&mut c, &["SET", "k", "v"]);
        assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
        wait_bgsave_done(&mut c);
        let out = vec![
            info_field(&mut c, "persistence", "rdb_last_bgsave_status").into_bytes(),
            c.cmd(&["SET", "k", "v2"]),
            c.cmd(&["GET", "k"]),
            c.cmd(&["PING"]),
            c.cmd(&["MULTI"]),
            c.cmd(&["INCR", "n"]),
            c.cmd(&["EXEC"]),
            c.cmd(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"]),
            c.cmd(&["SET", "k", "v3"]),
            c.cmd(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"]),
            c.cmd(&["DEL", "k"]),
            c.cmd(&["SAVE"]),
            info_field(&mut c, "persistence", "rdb_last_bgsave_status").into_bytes(),
        ];
        std::fs::create_dir_all(&gone).unwrap();
        let mut rest = vec![c.cmd(&["SAVE"]), c.cmd(&["SET", "k", "v4"])];
        let mut out = out;
        out.append(&mut rest);
        out
    }
    let args = ["--enable-protected-configs", "yes"];
    let ours = provoke(&TestServer::with_args(&args));
    let theirs = provoke(&RedisServer::with_args(&args));
    assert_eq!(ours[0], b"err");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(show(a), show(b), "step {i}");
    }
}

#[test]
fn shutdown_save_and_nosave() {
    let mut f = TestServer::new();
    let mut c = f.client();
    ok(&mut c, &["SET", "a", "1"]);
    let _ = c.try_cmd(&["SHUTDOWN", "NOSAVE"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.alive() {
        assert!(Instant::now() < deadline, "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!f.dir.join("dump.rdb").exists(), "NOSAVE wrote a file");

    let mut f = TestServer::new();
    let mut c = f.client();
    ok(&mut c, &["SET", "a", "1"]);
    ok(&mut c, &["RPUSH", "l", "x"]);
    let _ = c.try_cmd(&["SHUTDOWN", "SAVE"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.alive() {
        assert!(Instant::now() < deadline, "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let path = f.dir.join("dump.rdb");
    check_rdb(&path);
    assert!(f.log().contains("DB saved on disk"), "{}", f.log());
}

/// A fixed version that cannot hold the data is refused with the reason, never written lossily.
#[test]
fn version_that_cannot_hold_field_ttls_is_refused() {
    let f = TestServer::new();
    let mut c = f.client();
    ok(&mut c, &["HSET", "h", "f", "v", "g", "w"]);
    assert_eq!(c.cmd(&["HPEXPIRE", "h", "100000", "FIELDS", "1", "f"]), b"*1\r\n:1\r\n");
    ok(&mut c, &["CONFIG", "SET", "rdb-version", "10"]);
    let expect = b"-ERR rdb-version 10 cannot store hash field TTLs (they need RDB 12)\r\n".to_vec();
    assert_eq!(show(&c.cmd(&["SAVE"])), show(&expect));
    assert_eq!(show(&c.cmd(&["BGSAVE"])), show(&expect));
    assert!(!f.dir.join("dump.rdb").exists());
    ok(&mut c, &["CONFIG", "SET", "rdb-version", "auto"]);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let bytes = std::fs::read(f.dir.join("dump.rdb")).unwrap();
    assert_eq!(&bytes[..9], b"REDIS0012");
}

#[test]
fn rdb_version_config() {
    let f = TestServer::new();
    let mut c = f.client();
    assert_eq!(c.cmd(&["CONFIG", "GET", "rdb-version"]), b"*2\r\n$11\r\nrdb-version\r\n$4\r\nauto\r\n");
    assert!(c.cmd(&["CONFIG", "SET", "rdb-version", "8"]).starts_with(b"-ERR"));
    ok(&mut c, &["CONFIG", "SET", "rdb-version", "11"]);
    ok(&mut c, &["SADD", "s", "a", "b"]);
    ok(&mut c, &["XADD", "x", "1-1", "f", "v"]);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let bytes = std::fs::read(f.dir.join("dump.rdb")).unwrap();
    assert_eq!(&bytes[..9], b"REDIS0011");
    // Redis 7.0 reads up to 10, so the v11 file is checked structurally only by our own unit
    // tests; auto goes back to 10.
    ok(&mut c, &["CONFIG", "SET", "rdb-version", "auto"]);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let bytes = std::fs::read(f.dir.join("dump.rdb")).unwrap();
    assert_eq!(&bytes[..9], b"REDIS0010");
    assert_eq!(c.cmd(&["LASTSAVE"])[0], b':');
}

/// SIGTERM saves when save points are configured (Redis's default shutdown), and not without.
#[test]
fn sigterm_saves_with_save_points() {
    for (save, expect_file) in [("900 1", true), ("", false)] {
        let mut f = TestServer::with_args(&["--save", save]);
        let mut c = f.client();
        ok(&mut c, &["SET", "a", "1"]);
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(f.pid() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while f.alive() {
            assert!(Instant::now() < deadline, "did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(f.dir.join("dump.rdb").exists(), expect_file, "save {save:?}; log:\n{}", f.log());
        if expect_file {
            check_rdb(&f.dir.join("dump.rdb"));
            assert!(f.log().contains("Saving the final RDB snapshot before exiting."), "{}", f.log());
        }
    }
}

/// A second SIGINT during the shutdown's final save ends the process at once, as Redis's signal
/// handler does: exit status 1, the temp file removed, no dump written, and the two lines the
/// handler logs (`pid:signal-handler (unixtime) ...`) in Redis's shape.
#[test]
fn second_sigint_during_shutdown_save_exits_now() {
    fn run(mut s: Server) -> (Option<i32>, Vec<String>) {
        let mut c = s.client();
        for i in 0..20 {
            ok(&mut c, &["SET", &i.to_string(), "v"]);
        }
        ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
        let pid = s.pid();
        let temp = s.dir.join(format!("temp-{pid}.rdb"));
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(pid as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !temp.exists() {
            assert!(Instant::now() < deadline, "{}: no shutdown save started; log:\n{}", s.name, s.log());
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGINT) };
        let status = s.wait_exit(Duration::from_secs(1));
        assert!(status.is_some(), "{}: still running after the second SIGINT", s.name);
        assert!(!temp.exists(), "{}: temp file left behind", s.name);
        assert!(!s.dir.join("dump.rdb").exists(), "{}: the save completed", s.name);
        // The handler's lines, pid and time masked.
        let lines = s
            .log()
            .lines()
            .filter_map(|l| l.split_once(":signal-handler (").and_then(|(_, rest)| rest.split_once(") ")))
            .map(|(_, msg)| msg.to_string())
            .collect();
        (status.and_then(|st| st.code()), lines)
    }
    let redis = run(RedisServer::with_args(&["--save", "900 1"]));
    let ours = run(TestServer::with_args(&["--save", "900 1"]));
    assert_eq!(
        redis,
        (Some(1), vec!["Received SIGINT scheduling shutdown...".into(), "You insist... exiting now.".into()])
    );
    assert_eq!(ours, redis);
}

/// While a background save runs (kept running by rdb-key-save-delay), BGSAVE, BGSAVE SCHEDULE,
/// SAVE and BGSAVE inside EXEC answer as Redis does, byte for byte.
#[test]
fn busy_bgsave_replies_match_redis() {
    fn run(s: &Server) -> Vec<Vec<u8>> {
        let mut c = s.client();
        for i in 0..10 {
            ok(&mut c, &["SET", &format!("k{i}"), "v"]);
        }
        ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]);
        let mut out = vec![c.cmd(&["BGSAVE"]), c.cmd(&["BGSAVE"]), c.cmd(&["BGSAVE", "SCHEDULE"]), c.cmd(&["SAVE"])];
        out.push(info_field(&mut c, "persistence", "rdb_bgsave_in_progress").into_bytes());
        out.push(c.cmd(&["MULTI"]));
        out.push(c.cmd(&["BGSAVE"]));
        out.push(c.cmd(&["EXEC"]));
        ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        wait_bgsave_done(&mut c);
        out.push(info_field(&mut c, "persistence", "rdb_last_bgsave_status").into_bytes());
        out
    }
    let ours = run(&TestServer::new());
    let theirs = run(&RedisServer::new());
    assert_eq!(ours[0], b"+Background saving started\r\n");
    assert_eq!(ours[4], b"1");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(show(a), show(b), "step {i}");
    }
}

/// SHUTDOWN while a background save runs stops the child and leaves no temp file behind.
#[test]
fn shutdown_kills_running_child() {
    let mut f = TestServer::new();
    let mut c = f.client();
    for i in 0..20 {
        ok(&mut c, &["SET", &format!("k{i}"), "v"]);
    }
    ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "200000"]);
    assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
    std::thread::sleep(Duration::from_millis(200));
    let _ = c.try_cmd(&["SHUTDOWN", "NOSAVE"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.alive() {
        assert!(Instant::now() < deadline, "did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<String> = std::fs::read_dir(&f.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rdb"))
        .collect();
    assert!(left.is_empty(), "files left: {left:?}");
}

/// Under an LRU maxmemory-policy each key carries its idle time (IDLE opcode before the type
/// byte, seconds, as redis-7.2.6-lru.rdb has it) and Redis loads the file.
#[test]
fn lru_idle_times_are_written() {
    let f = TestServer::with_args(&["--maxmemory-policy", "allkeys-lru"]);
    let mut c = f.client();
    ok(&mut c, &["SET", "old", "1"]);
    std::thread::sleep(Duration::from_millis(2200));
    ok(&mut c, &["SET", "new", "1"]);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let path = f.dir.join("dump.rdb");
    check_rdb(&path);
    let bytes = std::fs::read(&path).unwrap();
    let has = |rec: &[u8]| bytes.windows(rec.len()).any(|w| w == rec);
    assert!(has(b"\xf8\x00\x00\x03new"), "no IDLE 0 before new");
    assert!(has(b"\xf8\x02\x00\x03old") || has(b"\xf8\x03\x00\x03old"), "no IDLE 2 before old");
    let (r, dir) = redis_on(&path);
    let mut rc = r.client();
    assert_eq!(rc.cmd(&["DBSIZE"]), b":2\r\n");
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

/// A function library (FUNCTION2 record) written through the library API is loaded by Redis:
/// FUNCTION LIST shows it and FCALL runs it.
#[test]
fn functions_load_into_redis() {
    use ferrodis::db::Db;
    use ferrodis::functions::{Libraries, Library};
    use ferrodis::rdb::save::{write_snapshot, Aux, Options};
    use ferrodis::types::{RStr, Value as V};
    let code = b"#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 42 end)".to_vec();
    let libs = Libraries { libs: vec![Library { name: b"mylib".to_vec(), engine: b"LUA".to_vec(), code }] };
    let mut dbs: Vec<Db> = (0..16).map(|_| Db::new()).collect();
    dbs[0].set(b"k", V::Str(RStr::from_bytes(b"v")), 0);
    let dir = std::env::temp_dir().join(format!("ferrodis-rdbsave-fn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fn.rdb");
    let file = std::fs::File::create(&path).unwrap();
    write_snapshot(file, &dbs, &libs, &Aux::default(), &Options::new(10)).unwrap();
    check_rdb(&path);
    let (r, rdir) = redis_on(&path);
    let mut c = r.client();
    let list = c.cmd(&["FUNCTION", "LIST"]);
    assert!(show(&list).contains("mylib") && show(&list).contains("myfunc"), "{}", show(&list));
    assert_eq!(c.cmd(&["FCALL", "myfunc", "0"]), b":42\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
    drop(r);
    let _ = std::fs::remove_dir_all(rdir);
    let _ = std::fs::remove_dir_all(dir);
}

/// The replies of DEBUG RELOAD and its options, with real Redis the oracle: bad options, MERGE
/// and NOFLUSH keeping a key added after the save, NOSAVE loading the file as it was.
fn debug_reload_replies(server: &Server) -> Vec<String> {
    let mut c = server.client();
    let mut out = Vec::new();
    for argv in [
        &["SET", "kept", "1"][..],
        &["SAVE"],
        &["DEBUG", "RELOAD", "FOO"],
        &["DEBUG", "RELOAD", "NOSAVE", "FOO"],
        &["DEBUG", "RELOAD", "MERGE", "NOSAVE", "x"],
        &["DEBUG", "RELOAD"],
        &["GET", "kept"],
        &["SET", "added-after-save", "1"],
        &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"],
        &["GET", "added-after-save"],
        &["GET", "kept"],
        &["DEBUG", "RELOAD", "NOSAVE"],
        &["EXISTS", "added-after-save"],
        &["DBSIZE"],
        &["DEBUG", "RELOAD", "nosave", "merge"],
        &["DBSIZE"],
    ] {
        out.push(format!("{} -> {}", show_argv(argv), show(&c.cmd(argv))));
    }
    out
}

#[test]
fn debug_reload_replies_match_redis() {
    let theirs = debug_reload_replies(&RedisServer::with_args(&["--enable-debug-command", "yes"]));
    let ours = debug_reload_replies(&TestServer::with_args(&["--enable-debug-command", "yes"]));
    assert_eq!(ours, theirs);
}

/// DEBUG RELOAD saves, empties and loads the file back: the dataset is unchanged (compared with
/// Redis 7.0 loading the same file), bad options are refused with Redis's text, and NOFLUSH
/// without MERGE refuses a key already present.
#[test]
fn debug_reload_keeps_the_dataset() {
    let f = TestServer::with_args(&["--enable-debug-command", "yes"]);
    let mut c = f.client();
    build_dataset(&mut c);
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    let (r, dir) = redis_on(&f.dir.join("dump.rdb"));
    assert_eq!(c.cmd(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_same_dataset(&f, &r, false);
    // NOFLUSH without MERGE over keys still present: real Redis 7.0 panics ("Duplicated key found
    // in RDB file") and so cannot be the oracle; ferrodis refuses with an error and lives on.
    assert!(c.cmd(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"]).starts_with(b"-ERR "));
    ok(&mut c, &["SELECT", "0"]);
    ok(&mut c, &["SET", "added-after-save", "1"]);
    assert_eq!(c.cmd(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "added-after-save"]), b"$1\r\n1\r\n");
    assert_eq!(c.cmd(&["DEBUG", "RELOAD", "NOSAVE"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["EXISTS", "added-after-save"]), b":0\r\n");
    assert_same_dataset(&f, &r, false);
    drop(r);
    let _ = std::fs::remove_dir_all(dir);
}

/// A background save reports its progress while it runs, as Redis's child does once a second:
/// INFO's current_save_keys_total is the dataset's size from the fork, current_save_keys_processed
/// and current_fork_perc grow, current_cow_size shows pages the parent's writes copied; all
/// are zero again once the child is done.
#[test]
fn bgsave_child_reports_progress() {
    fn run(s: &Server) -> Vec<String> {
        let mut c = s.client();
        let value = "A".repeat(500);
        for k in 0..4000 {
            ok(&mut c, &["SET", &format!("key{k}"), &value]);
        }
        ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "1000"]);
        ok(&mut c, &["BGSAVE"]);
        let mut out = vec![format!("total {}", info_field(&mut c, "persistence", "current_save_keys_total"))];
        let deadline = Instant::now() + Duration::from_secs(4);
        let mut k = 0;
        let reported = loop {
            // Writes copy pages the child shares.
            for _ in 0..16 {
                ok(&mut c, &["SETRANGE", &format!("key{k}"), "0", &"B".repeat(500)]);
                k += 1;
            }
            let processed: u64 = info_field(&mut c, "persistence", "current_save_keys_processed").parse().unwrap();
            let cow: u64 = info_field(&mut c, "persistence", "current_cow_size").parse().unwrap();
            let perc: f64 = info_field(&mut c, "persistence", "current_fork_perc").parse().unwrap();
            if processed > 0 && cow >= 4096 && perc > 0.0 {
                break true;
            }
            if Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        out.push(format!("reported {reported}"));
        ok(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
        wait_bgsave_done(&mut c);
        for f in ["current_cow_size", "current_save_keys_processed", "current_save_keys_total", "current_fork_perc"] {
            out.push(format!("{f} {}", info_field(&mut c, "persistence", f)));
        }
        out
    }
    let redis = run(&RedisServer::new());
    assert_eq!(redis[..2], ["total 4000", "reported true"], "real redis");
    assert_eq!(run(&TestServer::new()), redis);
}
