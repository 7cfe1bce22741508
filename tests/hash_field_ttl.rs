//! Hash field TTLs (Redis 7.4): HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL, HPTTL,
//! HEXPIRETIME, HPEXPIRETIME and HPERSIST, and how every other hash command sees fields whose
//! time has passed (lazily removed on access, actively removed by the cron, the key going with
//! its last field).
//!
//! Redis 7.0, our oracle, has none of these commands, so the expected bytes are written by hand
//! from the documented 7.4 behaviour (redis.io command pages: "Array reply. For each field: -2
//! if no such field exists in the provided hash key, or the provided key does not exist; 0 if
//! the specified NX, XX, GT, or LT condition has not been met; 1 if the expiration time was
//! set/updated; 2 when HEXPIRE/HPEXPIRE is called with 0 seconds/milliseconds or when
//! HEXPIREAT/HPEXPIREAT is called with a past Unix time"; HTTL and friends: "-1 if the field
//! exists but has no associated expiration set"; HPERSIST: "1 the expiration was removed"),
//! and 7.4's error texts. Timing-based checks use short PX times with generous margins.

mod common;

use std::time::Duration;

use common::{show, Client, Server, TestServer};

/// Sends a redis-cli style line and checks the exact reply bytes.
#[track_caller]
fn t(c: &mut Client, line: &str, want: &str) {
    let got = c.line(line);
    assert_eq!(show(&got), show(want.as_bytes()), "{line}");
}

/// The reply to a line, as text.
fn r(c: &mut Client, line: &str) -> String {
    String::from_utf8_lossy(&c.line(line)).into_owned()
}

/// An integer reply.
fn int(c: &mut Client, line: &str) -> i64 {
    let s = r(c, line);
    s.strip_prefix(':').and_then(|s| s.trim_end().parse().ok()).unwrap_or_else(|| panic!("{line}: {s:?}"))
}

/// The integers of a flat array of integers.
fn ints(c: &mut Client, line: &str) -> Vec<i64> {
    let s = r(c, line);
    s.split("\r\n").skip(1).filter(|l| !l.is_empty()).map(|l| l[1..].parse().expect("int")).collect()
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

fn server() -> (Server, Client) {
    // DEBUG SET-ACTIVE-EXPIRE turns active expiry off below.
    let s = TestServer::with_args(&["--enable-debug-command", "local"]);
    let c = s.client();
    (s, c)
}

const HASH_SETUPS: [&str; 2] = ["CONFIG SET hash-max-listpack-entries 128", "CONFIG SET hash-max-listpack-entries 0"];

#[test]
fn hexpire_codes_and_conditions() {
    let (_s, mut c) = server();
    for setup in HASH_SETUPS {
        t(&mut c, "FLUSHALL", "+OK\r\n");
        t(&mut c, setup, "+OK\r\n");
        t(&mut c, "HSET h a 1 b 2 c 3 d 4", ":4\r\n");
        // 1 set, -2 no such field.
        t(&mut c, "HEXPIRE h 100 FIELDS 2 a zz", "*2\r\n:1\r\n:-2\r\n");
        // NX: only fields without a TTL; XX: only fields with one.
        t(&mut c, "HEXPIRE h 200 NX FIELDS 2 a b", "*2\r\n:0\r\n:1\r\n");
        t(&mut c, "HEXPIRE h 300 XX FIELDS 2 a c", "*2\r\n:1\r\n:0\r\n");
        // GT / LT: a field without TTL counts as an infinite TTL.
        t(&mut c, "HEXPIRE h 250 GT FIELDS 3 a b c", "*3\r\n:0\r\n:1\r\n:0\r\n");
        t(&mut c, "HEXPIRE h 260 LT FIELDS 3 a b c", "*3\r\n:1\r\n:0\r\n:1\r\n");
        t(&mut c, "httl h FIELDS 4 a b c d", "*4\r\n:260\r\n:250\r\n:260\r\n:-1\r\n");
        // Option words are case-insensitive; a field named twice is handled twice, in order.
        t(&mut c, "hexpire h 400 nx fields 2 d d", "*2\r\n:1\r\n:0\r\n");
        // 0 seconds (or a past unix time) deletes the field: 2, then -2 for its repeat.
        t(&mut c, "HPEXPIRE h 0 FIELDS 2 d d", "*2\r\n:2\r\n:-2\r\n");
        t(&mut c, "HEXPIREAT h 1 FIELDS 1 c", "*1\r\n:2\r\n");
        t(&mut c, "HPEXPIREAT h 1000 FIELDS 1 b", "*1\r\n:2\r\n");
        t(&mut c, "HGETALL h", "*2\r\n$1\r\na\r\n$1\r\n1\r\n");
        // The key goes with its last field.
        t(&mut c, "HEXPIRE h 0 FIELDS 2 zz a", "*2\r\n:-2\r\n:2\r\n");
        t(&mut c, "EXISTS h", ":0\r\n");
        // A missing key: every field is missing.
        t(&mut c, "HEXPIRE h 100 FIELDS 2 a b", "*2\r\n:-2\r\n:-2\r\n");
        t(&mut c, "HPEXPIREAT nokey 1 XX FIELDS 1 a", "*1\r\n:-2\r\n");
        t(&mut c, "EXISTS h nokey", ":0\r\n");
        // Absolute times in both units.
        t(&mut c, "HSET h a 1 b 2", ":2\r\n");
        t(&mut c, "HEXPIREAT h 4000000000 FIELDS 1 a", "*1\r\n:1\r\n");
        t(&mut c, "HPEXPIREAT h 4000000000123 FIELDS 1 b", "*1\r\n:1\r\n");
        t(&mut c, "HEXPIRETIME h FIELDS 2 a b", "*2\r\n:4000000000\r\n:4000000001\r\n");
        t(&mut c, "HPEXPIRETIME h FIELDS 3 a b c", "*3\r\n:4000000000000\r\n:4000000000123\r\n:-2\r\n");
    }
}

#[test]
fn errors_and_their_precedence() {
    let (_s, mut c) = server();
    t(&mut c, "HSET h a 1", ":1\r\n");
    t(&mut c, "SET s x", "+OK\r\n");
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    for cmd in ["HEXPIRE", "HPEXPIRE", "HEXPIREAT", "HPEXPIREAT"] {
        t(&mut c, &format!("{cmd} s 10 FIELDS 1 a"), wrongtype);
        // The type is checked before the time and the FIELDS block.
        t(&mut c, &format!("{cmd} s abc FIELDS 0 a"), wrongtype);
        t(&mut c, &format!("{cmd} h abc FIELDS 1 a"), "-ERR value is not an integer or out of range\r\n");
        t(&mut c, &format!("{cmd} h -1 FIELDS 1 a"), "-ERR invalid expire time, must be >= 0\r\n");
        let lower = cmd.to_lowercase();
        let too_big = if cmd.contains('P') { "70368744177664" } else { "70368744178" };
        t(
            &mut c,
            &format!("{cmd} h {too_big} FIELDS 1 a"),
            &format!("-ERR invalid expire time in '{lower}' command\r\n"),
        );
        t(
            &mut c,
            &format!("{cmd} h 9223372036854775807 FIELDS 1 a"),
            &format!("-ERR invalid expire time in '{lower}' command\r\n"),
        );
        // The time is checked before FIELDS.
        t(&mut c, &format!("{cmd} h -1 NOPE 1 a"), "-ERR invalid expire time, must be >= 0\r\n");
        t(
            &mut c,
            &format!("{cmd} h 10 NOPE 1 a"),
            "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
        );
        // One condition at most: a second one stands where FIELDS must be.
        t(
            &mut c,
            &format!("{cmd} h 10 NX XX FIELDS 1 a"),
            "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
        );
        t(&mut c, &format!("{cmd} h 10 FIELDS 0 a"), "-ERR Parameter `numFields` should be greater than 0\r\n");
        t(&mut c, &format!("{cmd} h 10 GT FIELDS -1 a"), "-ERR Parameter `numFields` should be greater than 0\r\n");
        t(&mut c, &format!("{cmd} h 10 FIELDS x a"), "-ERR Parameter `numFields` should be greater than 0\r\n");
        t(
            &mut c,
            &format!("{cmd} h 10 FIELDS 2 a"),
            "-ERR The `numfields` parameter must match the number of arguments\r\n",
        );
        t(
            &mut c,
            &format!("{cmd} h 10 FIELDS 1 a b"),
            "-ERR The `numfields` parameter must match the number of arguments\r\n",
        );
        // The FIELDS block is checked even when the key is missing.
        t(
            &mut c,
            &format!("{cmd} nokey 10 FIELDS 3 a"),
            "-ERR The `numfields` parameter must match the number of arguments\r\n",
        );
        t(
            &mut c,
            &format!("{cmd} h 10 FIELDS 1"),
            &format!("-ERR wrong number of arguments for '{lower}' command\r\n"),
        );
    }
    for cmd in ["HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME", "HPERSIST"] {
        let lower = cmd.to_lowercase();
        t(&mut c, &format!("{cmd} s FIELDS 1 a"), wrongtype);
        t(&mut c, &format!("{cmd} s NOPE 0 a"), wrongtype);
        t(
            &mut c,
            &format!("{cmd} h NOPE 1 a"),
            "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n",
        );
        t(&mut c, &format!("{cmd} h FIELDS 0 a"), "-ERR Parameter `numFields` should be greater than 0\r\n");
        t(
            &mut c,
            &format!("{cmd} h FIELDS 2 a"),
            "-ERR The `numfields` parameter must match the number of arguments\r\n",
        );
        t(
            &mut c,
            &format!("{cmd} nokey FIELDS 2 a"),
            "-ERR The `numfields` parameter must match the number of arguments\r\n",
        );
        t(&mut c, &format!("{cmd} h FIELDS 1"), &format!("-ERR wrong number of arguments for '{lower}' command\r\n"));
    }
    // Just under the limit (2^46 - 1 ms, absolute) is accepted.
    t(&mut c, "HPEXPIREAT h 70368744177663 FIELDS 1 a", "*1\r\n:1\r\n");
    t(&mut c, "HEXPIREAT h 70368744177 FIELDS 1 a", "*1\r\n:1\r\n");
    t(&mut c, "HEXPIREAT h 70368744178 FIELDS 1 a", "-ERR invalid expire time in 'hexpireat' command\r\n");
    // Nothing failed above changed the hash.
    t(&mut c, "HGETALL h", "*2\r\n$1\r\na\r\n$1\r\n1\r\n");
}

#[test]
fn ttl_queries_and_persist() {
    let (_s, mut c) = server();
    for setup in HASH_SETUPS {
        t(&mut c, "FLUSHALL", "+OK\r\n");
        t(&mut c, setup, "+OK\r\n");
        t(&mut c, "HSET h a 1 b 2", ":2\r\n");
        // A plain listpack hash: every field exists without a TTL.
        for cmd in ["HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME", "HPERSIST"] {
            t(&mut c, &format!("{cmd} h FIELDS 3 a zz b"), "*3\r\n:-1\r\n:-2\r\n:-1\r\n");
            t(&mut c, &format!("{cmd} nokey FIELDS 2 a b"), "*2\r\n:-2\r\n:-2\r\n");
        }
        t(&mut c, "HPEXPIRE h 100500 FIELDS 1 a", "*1\r\n:1\r\n");
        // Seconds round up.
        t(&mut c, "HTTL h FIELDS 2 a b", "*2\r\n:101\r\n:-1\r\n");
        let ms = ints(&mut c, "HPTTL h FIELDS 1 a")[0];
        assert!((99_000..=100_500).contains(&ms), "{ms}");
        let at = ints(&mut c, "HPEXPIRETIME h FIELDS 1 a")[0];
        let at_s = ints(&mut c, "HEXPIRETIME h FIELDS 1 a")[0];
        assert_eq!(at_s, (at + 999) / 1000);
        // HPERSIST: 1 removed, -1 none, -2 missing.
        t(&mut c, "HPERSIST h FIELDS 4 a a b zz", "*4\r\n:1\r\n:-1\r\n:-1\r\n:-2\r\n");
        t(&mut c, "HTTL h FIELDS 1 a", "*1\r\n:-1\r\n");
    }
}

#[test]
fn resp3_replies_are_the_same_arrays() {
    let (_s, mut c) = server();
    c.line("HELLO 3");
    t(&mut c, "HSET h a 1", ":1\r\n");
    t(&mut c, "HEXPIRE h 100 FIELDS 2 a b", "*2\r\n:1\r\n:-2\r\n");
    t(&mut c, "HTTL h FIELDS 2 a b", "*2\r\n:100\r\n:-2\r\n");
    t(&mut c, "HPERSIST nokey FIELDS 1 a", "*1\r\n:-2\r\n");
    t(&mut c, "HPERSIST h FIELDS 1 a", "*1\r\n:1\r\n");
}

#[test]
fn encodings_are_7_4_names() {
    let (_s, mut c) = server();
    t(&mut c, "HSET h a 1 b 2", ":2\r\n");
    t(&mut c, "OBJECT ENCODING h", "$8\r\nlistpack\r\n");
    // HTTL and HPERSIST leave a listpack alone; an HEXPIRE on an existing key makes it
    // listpackex even when no field gets a TTL, and it stays so.
    t(&mut c, "HTTL h FIELDS 1 a", "*1\r\n:-1\r\n");
    t(&mut c, "OBJECT ENCODING h", "$8\r\nlistpack\r\n");
    t(&mut c, "HEXPIRE h 100 FIELDS 1 zz", "*1\r\n:-2\r\n");
    t(&mut c, "OBJECT ENCODING h", "$10\r\nlistpackex\r\n");
    // Fields with a TTL come first, by time; then the others in insertion order.
    t(&mut c, "HSET h c 3", ":1\r\n");
    t(&mut c, "HEXPIRE h 200 FIELDS 1 c", "*1\r\n:1\r\n");
    t(&mut c, "HEXPIRE h 100 FIELDS 1 b", "*1\r\n:1\r\n");
    t(&mut c, "HKEYS h", "*3\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n");
    // HSET drops a field's TTL (and the field moves behind the ones that keep one).
    t(&mut c, "HSET h b 22", ":0\r\n");
    t(&mut c, "HTTL h FIELDS 1 b", "*1\r\n:-1\r\n");
    t(&mut c, "HKEYS h", "*3\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\nb\r\n");
    t(&mut c, "HPERSIST h FIELDS 1 c", "*1\r\n:1\r\n");
    t(&mut c, "OBJECT ENCODING h", "$10\r\nlistpackex\r\n");
    // Past the limits: hashtable, TTLs kept.
    t(&mut c, "CONFIG SET hash-max-listpack-entries 4", "+OK\r\n");
    t(&mut c, "HEXPIRE h 300 FIELDS 1 a", "*1\r\n:1\r\n");
    t(&mut c, "HSET h d 4 e 5", ":2\r\n");
    t(&mut c, "OBJECT ENCODING h", "$9\r\nhashtable\r\n");
    t(&mut c, "HTTL h FIELDS 3 a b e", "*3\r\n:300\r\n:-1\r\n:-1\r\n");
    t(&mut c, "HSET big f1 v1 f2 v2 f3 v3 f4 v4 f5 v5", ":5\r\n");
    t(&mut c, "HEXPIRE big 50 FIELDS 1 f5", "*1\r\n:1\r\n");
    t(&mut c, "OBJECT ENCODING big", "$9\r\nhashtable\r\n");
    t(&mut c, "CONFIG SET hash-max-listpack-value 3", "+OK\r\n");
    t(&mut c, "HSET s a 1", ":1\r\n");
    t(&mut c, "HEXPIRE s 50 FIELDS 1 a", "*1\r\n:1\r\n");
    t(&mut c, "HSET s b long-value", ":1\r\n");
    t(&mut c, "OBJECT ENCODING s", "$9\r\nhashtable\r\n");
    t(&mut c, "HTTL s FIELDS 2 a b", "*2\r\n:50\r\n:-1\r\n");
}

/// Every hash command sees only live fields. Active expiry is off, so what is checked here is
/// the lazy removal on access.
#[test]
fn expired_fields_are_invisible_to_every_command() {
    let (_s, mut c) = server();
    t(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    for setup in HASH_SETUPS {
        t(&mut c, "FLUSHALL", "+OK\r\n");
        t(&mut c, setup, "+OK\r\n");
        t(&mut c, "HSET h gone 1 n 10 keep v", ":3\r\n");
        t(&mut c, "HPEXPIRE h 30 FIELDS 2 gone n", "*2\r\n:1\r\n:1\r\n");
        t(&mut c, "HEXPIRE h 1000 FIELDS 1 keep", "*1\r\n:1\r\n");
        sleep_ms(80);
        t(&mut c, "HGET h gone", "$-1\r\n");
        t(&mut c, "HMGET h gone keep", "*2\r\n$-1\r\n$1\r\nv\r\n");
        t(&mut c, "HEXISTS h gone", ":0\r\n");
        t(&mut c, "HSTRLEN h gone", ":0\r\n");
        t(&mut c, "HLEN h", ":1\r\n");
        t(&mut c, "HGETALL h", "*2\r\n$4\r\nkeep\r\n$1\r\nv\r\n");
        t(&mut c, "HKEYS h", "*1\r\n$4\r\nkeep\r\n");
        t(&mut c, "HVALS h", "*1\r\n$1\r\nv\r\n");
        t(&mut c, "HRANDFIELD h", "$4\r\nkeep\r\n");
        t(&mut c, "HRANDFIELD h -3", "*3\r\n$4\r\nkeep\r\n$4\r\nkeep\r\n$4\r\nkeep\r\n");
        t(&mut c, "HSCAN h 0 COUNT 100", "*2\r\n$1\r\n0\r\n*2\r\n$4\r\nkeep\r\n$1\r\nv\r\n");
        t(&mut c, "HTTL h FIELDS 2 gone keep", "*2\r\n:-2\r\n:1000\r\n");
        t(&mut c, "HPERSIST h FIELDS 1 n", "*1\r\n:-2\r\n");
        t(&mut c, "HDEL h gone", ":0\r\n");

        // Writes over expired fields: HINCRBY starts from 0, HSETNX and HSET create.
        t(&mut c, "HSET h n 10 f 1.5 x old", ":3\r\n");
        t(&mut c, "HPEXPIRE h 30 FIELDS 3 n f x", "*3\r\n:1\r\n:1\r\n:1\r\n");
        sleep_ms(80);
        t(&mut c, "HINCRBY h n 5", ":5\r\n");
        t(&mut c, "HINCRBYFLOAT h f 2", "$1\r\n2\r\n");
        t(&mut c, "HSETNX h x new", ":1\r\n");
        t(&mut c, "HTTL h FIELDS 3 n f x", "*3\r\n:-1\r\n:-1\r\n:-1\r\n");
        // HINCRBY and HINCRBYFLOAT keep a live field's TTL; HSET drops it.
        t(&mut c, "HEXPIRE h 500 FIELDS 3 n f x", "*3\r\n:1\r\n:1\r\n:1\r\n");
        t(&mut c, "HINCRBY h n 1", ":6\r\n");
        t(&mut c, "HINCRBYFLOAT h f 1", "$1\r\n3\r\n");
        t(&mut c, "HSETNX h x other", ":0\r\n");
        t(&mut c, "HSET h x newer", ":0\r\n");
        t(&mut c, "HTTL h FIELDS 3 n f x", "*3\r\n:500\r\n:500\r\n:-1\r\n");

        // SORT BY / GET read hash fields through the same lookups.
        t(&mut c, "RPUSH l 1 2", ":2\r\n");
        t(&mut c, "HSET w_1 k 2 g a", ":2\r\n");
        t(&mut c, "HSET w_2 k 1 g b", ":2\r\n");
        t(&mut c, "HPEXPIRE w_1 30 FIELDS 1 g", "*1\r\n:1\r\n");
        sleep_ms(80);
        t(&mut c, "SORT l BY w_*->k GET w_*->g", "*2\r\n$1\r\nb\r\n$-1\r\n");

        // The last field going takes the key with it.
        t(&mut c, "HSET last a 1 b 2", ":2\r\n");
        t(&mut c, "HPEXPIRE last 30 FIELDS 2 a b", "*2\r\n:1\r\n:1\r\n");
        sleep_ms(80);
        t(&mut c, "EXISTS last", ":0\r\n");
        t(&mut c, "TYPE last", "+none\r\n");
        t(&mut c, "HSET last2 a 1", ":1\r\n");
        t(&mut c, "HPEXPIRE last2 30 FIELDS 1 a", "*1\r\n:1\r\n");
        sleep_ms(80);
        t(&mut c, "HLEN last2", ":0\r\n");
        t(&mut c, "HGETALL last2", "*0\r\n");
        t(&mut c, "HSET last3 a 1", ":1\r\n");
        t(&mut c, "HPEXPIRE last3 30 FIELDS 1 a", "*1\r\n:1\r\n");
        sleep_ms(80);
        t(&mut c, "DEL last3", ":0\r\n");
        // Nothing was removed in the background.
        t(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    }
}

/// The cron removes expired fields without any access, and the key with the last one.
#[test]
fn active_expiry_of_fields() {
    let (_s, mut c) = server();
    for setup in HASH_SETUPS {
        t(&mut c, "FLUSHALL", "+OK\r\n");
        t(&mut c, setup, "+OK\r\n");
        t(&mut c, "HSET a x 1 y 2", ":2\r\n");
        t(&mut c, "HPEXPIRE a 400 FIELDS 2 x y", "*2\r\n:1\r\n:1\r\n");
        for i in 0..300 {
            c.line(&format!("HSET b f{i} v"));
        }
        t(&mut c, "HPEXPIRE b 400 FIELDS 3 f1 f2 f3", "*3\r\n:1\r\n:1\r\n:1\r\n");
        t(&mut c, "HPEXPIRE b 100000 FIELDS 1 f4", "*1\r\n:1\r\n");
        t(&mut c, "DBSIZE", ":2\r\n");
        // DBSIZE and INFO do not look into values: only the cron can have removed `a`.
        let mut gone = false;
        for _ in 0..200 {
            sleep_ms(20);
            if int(&mut c, "DBSIZE") == 1 {
                gone = true;
                break;
            }
        }
        assert!(gone, "active expiry did not remove the emptied hash");
        let info = r(&mut c, "INFO keyspace");
        assert!(info.contains("db0:keys=1,"), "{info}");
        // `b`'s fields fall due a few milliseconds after `a`'s (its HPEXPIRE came 300 commands
        // later): the cron may take them on its next tick. HLEN counts them until it does.
        for _ in 0..50 {
            if int(&mut c, "HLEN b") == 297 {
                break;
            }
            sleep_ms(20);
        }
        t(&mut c, "HLEN b", ":297\r\n");
        t(&mut c, "HTTL b FIELDS 2 f1 f4", "*2\r\n:-2\r\n:100\r\n");
    }
}

/// Keyspace events: `hexpire`, `hdel` (a past time), `hpersist`, and `hexpired` then `del`
/// when fields expire (lazily or actively).
#[test]
fn keyspace_events() {
    let (s, mut c) = server();
    t(&mut c, "CONFIG SET notify-keyspace-events Eghx", "+OK\r\n");
    let mut sub = s.client();
    sub.line("PSUBSCRIBE __keyevent@0__:*");
    t(&mut c, "HSET h a 1 b 2 c 3", ":3\r\n");
    t(&mut c, "HEXPIRE h 100 FIELDS 2 a zz", "*2\r\n:1\r\n:-2\r\n");
    // No event when nothing changed.
    t(&mut c, "HEXPIRE h 100 NX FIELDS 2 a zz", "*2\r\n:0\r\n:-2\r\n");
    t(&mut c, "HPERSIST h FIELDS 1 b", "*1\r\n:-1\r\n");
    t(&mut c, "HPERSIST h FIELDS 1 a", "*1\r\n:1\r\n");
    t(&mut c, "HEXPIRE h 0 FIELDS 1 a", "*1\r\n:2\r\n");
    t(&mut c, "HPEXPIRE h 20 FIELDS 1 b", "*1\r\n:1\r\n");
    sleep_ms(60);
    t(&mut c, "HGET h b", "$-1\r\n");
    t(&mut c, "HEXPIRE h 0 FIELDS 1 c", "*1\r\n:2\r\n");
    t(&mut c, "HSET k a 1", ":1\r\n");
    t(&mut c, "HPEXPIRE k 20 FIELDS 1 a", "*1\r\n:1\r\n");
    sleep_ms(400);
    let got = String::from_utf8_lossy(&sub.drain(Duration::from_millis(200)).bytes).into_owned();
    let events: Vec<String> = got
        .split("*4\r\n$8\r\npmessage\r\n")
        .skip(1)
        .map(|m| {
            let parts: Vec<&str> = m.split("\r\n").collect();
            format!("{} {}", parts[3].trim_start_matches("__keyevent@0__:"), parts[5])
        })
        .collect();
    assert_eq!(
        events,
        [
            "hset h",
            "hexpire h",
            "hpersist h",
            "hdel h",
            "hexpire h",
            "hexpired h",
            "hdel h",
            "del h",
            "hset k",
            "hexpire k",
            "hexpired k",
            "del k"
        ],
        "{got}"
    );
}

/// RENAME, MOVE and COPY take the whole value: field TTLs travel with it.
#[test]
fn key_operations_keep_field_ttls() {
    let (_s, mut c) = server();
    for setup in HASH_SETUPS {
        t(&mut c, "FLUSHALL", "+OK\r\n");
        t(&mut c, setup, "+OK\r\n");
        t(&mut c, "HSET h a 1 b 2", ":2\r\n");
        t(&mut c, "HEXPIRE h 100 FIELDS 1 a", "*1\r\n:1\r\n");
        t(&mut c, "RENAME h h2", "+OK\r\n");
        t(&mut c, "HTTL h2 FIELDS 2 a b", "*2\r\n:100\r\n:-1\r\n");
        t(&mut c, "COPY h2 h3", ":1\r\n");
        t(&mut c, "HTTL h3 FIELDS 2 a b", "*2\r\n:100\r\n:-1\r\n");
        t(&mut c, "HPERSIST h3 FIELDS 1 a", "*1\r\n:1\r\n");
        t(&mut c, "HTTL h2 FIELDS 1 a", "*1\r\n:100\r\n");
        t(&mut c, "MOVE h2 1", ":1\r\n");
        t(&mut c, "SELECT 1", "+OK\r\n");
        t(&mut c, "HTTL h2 FIELDS 2 a b", "*2\r\n:100\r\n:-1\r\n");
        t(&mut c, "SELECT 0", "+OK\r\n");
        // A short TTL still fires after a rename (active expiry follows the new name).
        t(&mut c, "HSET r a 1", ":1\r\n");
        t(&mut c, "HPEXPIRE r 50 FIELDS 1 a", "*1\r\n:1\r\n");
        t(&mut c, "RENAME r r2", "+OK\r\n");
        sleep_ms(400);
        t(&mut c, "DBSIZE", ":1\r\n");
    }
}
