//! Memory accounting and client buffers, each check run against real Redis and ferrodis alike:
//! used_memory stays within maxmemory while keys are written, an idle client's query buffer is
//! trimmed, maxmemory-clients closes the client with the biggest buffer, small integers are not
//! shared under an LRU policy, UNLINK's background free shows in used_memory and in the lazyfree
//! counters, and a freed oversize value leaves RSS at once.

mod common;

use std::time::{Duration, Instant};

use common::{Client, RedisServer, Server, TestServer};

fn info_u64(c: &mut Client, section: &str, name: &str) -> u64 {
    common::info_field(c, section, name).parse().unwrap()
}

fn int(reply: &[u8]) -> i64 {
    let text = String::from_utf8_lossy(reply);
    text.trim_start_matches(':').trim().parse().unwrap_or_else(|_| panic!("not an integer: {text}"))
}

fn servers() -> Vec<(&'static str, Server)> {
    vec![("redis", RedisServer::new()), ("ferrodis", TestServer::new())]
}

/// Waits up to `secs` for `f` to hold.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// CLIENT LIST's qbuf + qbuf-free for the client named `name`.
fn query_buffer(c: &mut Client, name: &str) -> Option<u64> {
    let list = String::from_utf8_lossy(&c.cmd(&["CLIENT", "LIST"])).into_owned();
    let line = list.lines().find(|l| l.contains(&format!(" name={name} ")))?;
    let field = |f: &str| -> u64 {
        line.split(' ').find_map(|w| w.strip_prefix(&format!("{f}="))).and_then(|v| v.parse().ok()).unwrap()
    };
    Some(field("qbuf") + field("qbuf-free"))
}

#[test]
fn used_memory_stays_within_maxmemory_while_writing() {
    for (who, s) in servers() {
        for policy in ["allkeys-lru", "volatile-ttl", "allkeys-random"] {
            let mut c = s.client();
            c.cmd(&["FLUSHALL"]);
            let limit = info_u64(&mut c, "memory", "used_memory") + 100 * 1024;
            c.cmd(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
            c.cmd(&["CONFIG", "SET", "maxmemory-policy", policy]);
            let mut worst = 0i64;
            for i in 0..4000 {
                c.cmd(&["SETEX", &format!("key:{i}"), "10000", "x"]);
                worst = worst.max(info_u64(&mut c, "memory", "used_memory") as i64 - limit as i64);
            }
            assert!(info_u64(&mut c, "stats", "evicted_keys") > 0, "{who} {policy}: nothing evicted");
            assert!(worst < 4096, "{who} {policy}: used_memory went {worst} bytes over maxmemory");
            c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        }
    }
}

#[test]
fn idle_query_buffer_is_trimmed() {
    for (who, s) in servers() {
        let mut c = s.client();
        let mut idle = s.client();
        idle.cmd(&["CLIENT", "SETNAME", "idle"]);
        let first = query_buffer(&mut c, "idle").unwrap();
        assert!((16384..32768).contains(&first), "{who}: a fresh query buffer of {first}");
        assert!(eventually(6, || query_buffer(&mut c, "idle") == Some(0)), "{who}: the idle buffer was not trimmed");
        // A big argument grows it past 32 KiB; small commands after it let it shrink back.
        let mut busy = s.client();
        busy.cmd(&["CLIENT", "SETNAME", "busy"]);
        busy.cmd(&["SET", "x", &"A".repeat(400_000)]);
        let big = query_buffer(&mut c, "busy").unwrap();
        assert!(big > 32768, "{who}: {big}");
        assert!(
            eventually(3, || {
                busy.cmd(&["SET", "x", "small"]);
                query_buffer(&mut c, "busy").is_some_and(|n| n > 0 && n < big)
            }),
            "{who}: the query buffer did not shrink below {big}"
        );
    }
}

#[test]
fn maxmemory_clients_closes_the_biggest_client() {
    for (who, s) in servers() {
        let mut c = s.client();
        c.cmd(&["CONFIG", "SET", "maxmemory-clients", "1mb"]);
        c.cmd(&["CLIENT", "NO-EVICT", "on"]);
        let mut hog = s.client();
        hog.cmd(&["CLIENT", "SETNAME", "hog"]);
        // Half a command, 2 MB of it, that never ends: all of it waits in the query buffer.
        let mut partial = b"*2\r\n$3\r\nset\r\n$3000000\r\n".to_vec();
        partial.extend(std::iter::repeat_n(b'x', 2_000_000));
        let _ = hog.send_raw(&partial);
        assert!(
            eventually(5, || info_u64(&mut c, "stats", "evicted_clients") == 1),
            "{who}: evicted_clients {}",
            common::info_field(&mut c, "stats", "evicted_clients")
        );
        assert!(query_buffer(&mut c, "hog").is_none(), "{who}: the hog is still listed");
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{who}: a no-evict client stays");
    }
}

/// Clients that pipeline MGETs of a 100 KB value and never read: their replies are output
/// buffer. Without maxmemory-clients, maxmemory evicts keys for them; with it, clients are
/// closed and no key is evicted (the replies of a running pipeline count too, and a written
/// reply's buffer is not kept), as unit/maxmemory's MGET tests run it, one after the other.
#[test]
fn pipelined_replies_evict_clients_before_keys() {
    for (who, s) in servers() {
        let mut c = s.client();
        c.cmd(&["CONFIG", "SET", "maxmemory", "11mb"]);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        c.cmd(&["CLIENT", "NO-EVICT", "on"]);
        for client_eviction in [false, true] {
            c.cmd(&["FLUSHDB"]);
            c.cmd(&["CONFIG", "SET", "maxmemory-clients", if client_eviction { "3mb" } else { "0" }]);
            c.cmd(&["CONFIG", "RESETSTAT"]);
            for j in 0..50 {
                c.cmd(&["SETRANGE", &j.to_string(), "100000", "x"]);
            }
            let mut readers: Vec<_> = (0..20).map(|_| s.client()).collect();
            let mget = common::encode(&["MGET", "1"]);
            let evicted = eventually(20, || {
                for r in readers.iter_mut() {
                    let _ = r.send_raw(&mget);
                }
                let (keys, clients) =
                    (info_u64(&mut c, "stats", "evicted_keys"), info_u64(&mut c, "stats", "evicted_clients"));
                if client_eviction {
                    clients > 0
                } else {
                    keys > 0
                }
            });
            assert!(evicted, "{who} client_eviction={client_eviction}: nothing evicted");
            if client_eviction {
                assert_eq!(info_u64(&mut c, "stats", "evicted_keys"), 0, "{who}: keys evicted before clients");
                assert_eq!(int(&c.cmd(&["DBSIZE"])), 50, "{who}");
            } else {
                assert_eq!(info_u64(&mut c, "stats", "evicted_clients"), 0, "{who}");
            }
        }
    }
}

#[test]
fn integers_are_not_shared_under_lru_or_lfu() {
    for (who, s) in servers() {
        let mut c = s.client();
        c.cmd(&["SET", "a", "1"]);
        assert_eq!(int(&c.cmd(&["OBJECT", "REFCOUNT", "a"])), i32::MAX as i64, "{who}");
        c.cmd(&["CONFIG", "SET", "maxmemory", "1gb"]);
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
        c.cmd(&["SET", "a", "1"]);
        assert_eq!(int(&c.cmd(&["OBJECT", "REFCOUNT", "a"])), i32::MAX as i64, "{who}");
        for policy in ["allkeys-lru", "volatile-lfu"] {
            c.cmd(&["CONFIG", "SET", "maxmemory-policy", policy]);
            c.cmd(&["SET", "b", "1"]);
            assert_eq!(int(&c.cmd(&["OBJECT", "REFCOUNT", "b"])), 1, "{who} {policy}");
        }
    }
}

#[test]
fn unlink_frees_in_the_background_and_counts_it() {
    for (who, s) in servers() {
        let mut c = s.client();
        c.cmd(&["CONFIG", "RESETSTAT"]);
        let before = info_u64(&mut c, "memory", "used_memory");
        let mut argv: Vec<String> = vec!["SADD".into(), "big".into()];
        argv.extend((0..100_000).map(|i| i.to_string()));
        c.cmd(&argv);
        let peak = info_u64(&mut c, "memory", "used_memory");
        assert!(peak > before + 1_000_000, "{who}: {before} -> {peak}");
        assert_eq!(c.cmd(&["UNLINK", "big"]), b":1\r\n");
        assert!(
            eventually(5, || info_u64(&mut c, "memory", "used_memory") < before * 2),
            "{who}: used_memory stayed at {} (from {before})",
            common::info_field(&mut c, "memory", "used_memory")
        );
        assert!(eventually(5, || info_u64(&mut c, "memory", "lazyfree_pending_objects") == 0), "{who}");
        assert_eq!(info_u64(&mut c, "memory", "lazyfreed_objects"), 1, "{who}");
        // A small value is freed on the spot, uncounted.
        c.cmd(&["SADD", "small", "a", "b"]);
        c.cmd(&["UNLINK", "small"]);
        assert_eq!(info_u64(&mut c, "memory", "lazyfreed_objects"), 1, "{who}");
        c.cmd(&["CONFIG", "RESETSTAT"]);
        assert_eq!(info_u64(&mut c, "memory", "lazyfreed_objects"), 0, "{who}");
    }
}

/// The lazy-free switches as Redis counts them in lazyfreed_objects: DEL under
/// lazyfree-lazy-user-del frees a big value as UNLINK does; FLUSHALL/FLUSHDB ASYNC, and a plain
/// one under lazyfree-lazy-user-flush, count every key they flushed; SYNC and small values count
/// nothing. Compared with real Redis step by step.
#[test]
fn lazy_free_switches_count_as_redis() {
    let script: &[&[&str]] = &[
        &["DEL", "big"],
        &["UNLINK", "big"],
        &["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"],
        &["DEL", "big"],
        &["FLUSHALL"],
        &["FLUSHALL", "ASYNC"],
        &["FLUSHDB", "ASYNC"],
        &["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"],
        &["FLUSHDB"],
        &["FLUSHALL"],
        &["FLUSHALL", "SYNC"],
    ];
    let mut seen = Vec::new();
    for (who, s) in servers() {
        let mut c = s.client();
        let mut counts = Vec::new();
        for argv in script {
            // A big set (a hashtable of 1000 members) and two small keys before each step.
            c.cmd(&["EVAL", "for i=1,1000 do redis.call('sadd',KEYS[1],i) end", "1", "big"]);
            c.cmd(&["SET", "small", "1"]);
            c.cmd(&["RPUSH", "list", "a"]);
            c.cmd(argv);
            assert!(eventually(5, || info_u64(&mut c, "memory", "lazyfree_pending_objects") == 0), "{who}");
            counts.push(format!("{}: {}", argv.join(" "), info_u64(&mut c, "memory", "lazyfreed_objects")));
        }
        seen.push(counts);
    }
    assert_eq!(seen[1], seen[0], "ferrodis (left) against redis");
}

/// A synchronous FLUSHALL or FLUSHDB has freed the keyspace by the time its caller reads +OK
/// (ferrodis frees it off the executor and holds only the caller's reply for it), while FLUSHALL
/// ASYNC may answer first; in MULTI the reply is still +OK in its place.
#[test]
fn sync_flushes_have_freed_the_memory_when_they_reply() {
    for (who, s) in servers() {
        let mut c = s.client();
        let before = info_u64(&mut c, "memory", "used_memory");
        for flush in [&["FLUSHALL"][..], &["FLUSHDB", "SYNC"], &["FLUSHALL", "SYNC"]] {
            for chunk in 0..20 {
                let mut argv: Vec<String> = vec!["MSET".into()];
                for i in 0..5_000 {
                    argv.push(format!("key:{chunk}:{i}"));
                    argv.push(format!("value:{i}"));
                }
                c.cmd(&argv);
            }
            let full = info_u64(&mut c, "memory", "used_memory");
            assert!(full > before + 5_000_000, "{who}: {before} -> {full}");
            assert_eq!(c.cmd(flush), b"+OK\r\n", "{who}");
            let after = info_u64(&mut c, "memory", "used_memory");
            assert!(
                after < before + 1_000_000,
                "{who} {flush:?}: used_memory {after} right after (from {before}, {full} full)"
            );
            assert_eq!(c.cmd(&["DBSIZE"]), b":0\r\n", "{who}");
        }
        c.cmd(&["SET", "k", "v"]);
        assert_eq!(c.cmd(&["MULTI"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["FLUSHALL"]), b"+QUEUED\r\n");
        assert_eq!(c.cmd(&["DBSIZE"]), b"+QUEUED\r\n");
        assert_eq!(c.cmd(&["EXEC"]), b"*2\r\n+OK\r\n:0\r\n", "{who}");
    }
}

/// Names of a server's threads.
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok()).collect())
        .unwrap_or_default();
    names.iter_mut().for_each(|n| *n = n.trim().to_string());
    names
}

/// jemalloc-bg-thread (yes by default) runs jemalloc's purging threads, as in Redis, so dirty
/// pages are returned off the main thread; `no` and CONFIG SET turn them off and on again.
#[test]
fn jemalloc_background_threads_follow_the_setting() {
    let purgers = |pid: u32| thread_names(pid).iter().filter(|n| n.as_str() == "jemalloc_bg_thd").count();
    for (who, s) in servers() {
        let mut c = s.client();
        assert!(eventually(5, || purgers(s.pid()) > 0), "{who}: no jemalloc_bg_thd in {:?}", thread_names(s.pid()));
        assert_eq!(c.cmd(&["CONFIG", "SET", "jemalloc-bg-thread", "no"]), b"+OK\r\n", "{who}");
        assert!(eventually(5, || purgers(s.pid()) == 0), "{who}: {:?}", thread_names(s.pid()));
        assert_eq!(c.cmd(&["CONFIG", "SET", "jemalloc-bg-thread", "yes"]), b"+OK\r\n", "{who}");
        assert!(eventually(5, || purgers(s.pid()) > 0), "{who}: {:?}", thread_names(s.pid()));
    }
    let s = TestServer::with_args(&["--jemalloc-bg-thread", "no"]);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(purgers(s.pid()), 0, "{:?}", thread_names(s.pid()));
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A freed value of tens of MiB leaves the resident set at once, as in Redis, whose jemalloc
/// purges its oversize arena eagerly; a 10 s dirty decay kept it resident.
#[test]
fn freed_oversize_values_leave_rss_at_once() {
    let value = "x".repeat(64 << 20);
    for (who, s) in servers() {
        let mut c = s.client();
        let before = rss_kib(s.pid());
        assert_eq!(c.cmd(&["SET", "big", &value]), b"+OK\r\n", "{who}");
        let loaded = rss_kib(s.pid());
        assert!(loaded > before + (60 << 10), "{who}: rss {before} KiB -> {loaded} KiB");
        assert_eq!(c.cmd(&["DEL", "big"]), b":1\r\n", "{who}");
        assert!(
            eventually(2, || rss_kib(s.pid()) < before + (16 << 10)),
            "{who}: rss {before} KiB, {loaded} KiB with the value, {} KiB 2 s after DEL",
            rss_kib(s.pid())
        );
    }
}

/// MEMORY MALLOC-STATS is jemalloc's report and MEMORY PURGE returns dirty pages, as in Redis.
#[test]
fn malloc_stats_and_purge_reach_jemalloc() {
    for (who, s) in servers() {
        let mut c = s.client();
        let report = c.cmd(&["MEMORY", "MALLOC-STATS"]);
        let text = String::from_utf8_lossy(&report);
        assert!(text.starts_with('$'), "{who}: {text:.80}");
        assert!(text.contains("___ Begin jemalloc statistics ___"), "{who}: {text:.200}");
        assert!(text.contains("--- End jemalloc statistics ---"), "{who}");
        assert_eq!(c.cmd(&["MEMORY", "PURGE"]), b"+OK\r\n", "{who}");
    }
}
