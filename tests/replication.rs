//! Replication with the real Redis 7.0 in both roles: a real replica of ferrodis, ferrodis as the
//! replica of a real master, and a chain through ferrodis; after writes of every type (and
//! expiring keys, a transaction, a script, a stream group) the datasets agree by DEBUG DIGEST
//! and the offsets meet. A dropped link and a restarted replica continue with `+CONTINUE`
//! (sync_partial_ok grows, sync_full does not). ROLE, INFO replication, WAIT, READONLY and
//! REPLCONF/REPLICAOF errors are compared with what the real Redis answers.

mod common;

use common::{info_field, show, wait_until, Client, RedisServer, Server, TestServer, Watchdog};
use std::time::Duration;

const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];
/// A master that starts a diskless full sync at once (the default waits 5 s for more replicas).
const MASTER: [&str; 4] = ["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"];

fn replica_args(master: &Server) -> Vec<String> {
    let mut args: Vec<String> = DEBUG.iter().map(|s| s.to_string()).collect();
    args.extend(["--replicaof".into(), "127.0.0.1".into(), master.port.to_string()]);
    args
}

fn start_replica(real: bool, master: &Server, extra: &[&str]) -> Server {
    let mut args = replica_args(master);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if real {
        RedisServer::with_args(&args)
    } else {
        TestServer::with_args(&args)
    }
}

fn link_up(s: &Server) -> bool {
    info_field(&mut s.client(), "replication", "master_link_status") == "up"
}

/// Whether `master` lists a replica as online. After a diskless transfer a master puts its
/// replica online at the replica's first REPLCONF ACK, up to a second after the replica's link is
/// up; until then FAILOVER TO that replica answers "target replica is not online".
fn replica_online(master: &Server) -> bool {
    String::from_utf8_lossy(&master.client().cmd(&["INFO", "replication"])).contains("state=online")
}

fn offset(s: &Server) -> i64 {
    info_field(&mut s.client(), "replication", "master_repl_offset").parse().unwrap_or(-1)
}

fn stat(s: &Server, name: &str) -> i64 {
    info_field(&mut s.client(), "stats", name).parse().unwrap_or(-1)
}

fn digest(s: &Server) -> Vec<u8> {
    s.client().cmd(&["DEBUG", "DIGEST"])
}

/// Writes of every type, expiring keys, a transaction, a script and a stream group.
fn write_mix(c: &mut Client, rounds: usize) {
    for i in 0..rounds {
        let k = |p: &str| format!("{p}:{}", i % 97);
        c.cmd(&["SET", &k("s"), &i.to_string()]);
        c.cmd(&["INCR", "counter"]);
        c.cmd(&["RPUSH", &k("l"), "a", "b"]);
        c.cmd(&["LPOP", &k("l")]);
        c.cmd(&["SADD", &k("set"), &i.to_string()]);
        c.cmd(&["HSET", &k("h"), "f", &i.to_string(), "g", "x"]);
        c.cmd(&["ZADD", &k("z"), &i.to_string(), &format!("m{i}")]);
        c.cmd(&["XADD", "stream", "*", "i", &i.to_string()]);
        c.cmd(&["SET", &k("ttl"), "v", "PX", "1"]);
        c.cmd(&["SET", &k("keep"), "v", "EX", "1000"]);
        if i % 10 == 0 {
            c.cmd(&["SELECT", "3"]);
            c.cmd(&["SET", &k("db3"), "x"]);
            c.cmd(&["SELECT", "0"]);
        }
    }
    c.cmd(&["MULTI"]);
    c.cmd(&["INCR", "tx"]);
    c.cmd(&["LPUSH", "txl", "a"]);
    c.cmd(&["EXPIRE", "txl", "100"]);
    assert_eq!(c.cmd(&["EXEC"]), b"*3\r\n:1\r\n:1\r\n:1\r\n");
    c.cmd(&["EVAL", "for i=1,20 do redis.call('set','ev'..i,i) end return 1", "0"]);
    c.cmd(&["XGROUP", "CREATE", "stream", "g", "0"]);
    c.cmd(&["XREADGROUP", "GROUP", "g", "c1", "COUNT", "3", "STREAMS", "stream", ">"]);
    c.cmd(&["SPOP", "set:1"]);
}

/// Waits until every replica's offset equals the master's and the digests agree.
fn assert_converged(master: &Server, replicas: &[&Server]) {
    wait_until("replica offsets to meet the master's", || {
        let m = offset(master);
        replicas.iter().all(|r| offset(r) == m)
    });
    // Expired keys are deleted on the master (its DEL goes down the stream) by access or by its
    // active cycle; touch them so the digest compares what the master holds.
    let mut c = master.client();
    for i in 0..97 {
        c.cmd(&["EXISTS", &format!("ttl:{i}")]);
    }
    wait_until("replica offsets to meet the master's after the expiries", || {
        let m = offset(master);
        replicas.iter().all(|r| offset(r) == m)
    });
    // The master may still be expiring a key (its active cycle) when its digest is taken, and the
    // replica gets the DEL a moment later: the datasets must agree once the stream is applied.
    for r in replicas {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let want = digest(master);
            if digest(r) == want && offset(r) == offset(master) {
                break;
            }
            if std::time::Instant::now() > deadline {
                panic!("{} replica of {} differs:\n{}", r.name, master.name, key_differences(master, r).join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The keys whose value digest or TTL differ between two servers, in every database (what a
/// DEBUG DIGEST mismatch comes from).
fn key_differences(a: &Server, b: &Server) -> Vec<String> {
    let (mut ca, mut cb) = (a.client(), b.client());
    let mut out = Vec::new();
    for db in 0..16 {
        let db = db.to_string();
        ca.cmd(&["SELECT", &db]);
        cb.cmd(&["SELECT", &db]);
        let (sa, sb) = (ca.cmd(&["DBSIZE"]), cb.cmd(&["DBSIZE"]));
        if sa != sb {
            out.push(format!("db {db}: DBSIZE {} {} / {} {}", a.name, show(&sa), b.name, show(&sb)));
        }
        let mut keys = common::keys_sorted(&mut ca);
        keys.extend(common::keys_sorted(&mut cb));
        keys.sort();
        keys.dedup();
        for key in keys {
            let probe = |c: &mut Client| {
                let digest = String::from_utf8_lossy(&c.cmd(&[&b"DEBUG"[..], b"DIGEST-VALUE", &key])).into_owned();
                (digest.replace("$40\r\n", "+"), show(&c.cmd(&[&b"PEXPIRETIME"[..], &key])))
            };
            let (va, vb) = (probe(&mut ca), probe(&mut cb));
            if va != vb {
                out.push(format!("db {db} key {}: {} {va:?} / {} {vb:?}", show(&key), a.name, b.name));
            }
        }
    }
    out
}

#[test]
fn real_replica_follows_ferrodis_and_a_chain_through_ferrodis() {
    let _w = Watchdog::new("real_replica_follows_ferrodis", Duration::from_secs(120));
    let master = TestServer::with_args(&MASTER);
    master.client().cmd(&["SET", "before", "sync"]);
    let real = start_replica(true, &master, &[]);
    let middle = start_replica(false, &master, &[]);
    wait_until("both replicas up", || link_up(&real) && link_up(&middle));
    let end = start_replica(true, &middle, &[]);
    wait_until("the chained real replica up", || link_up(&end));
    write_mix(&mut master.client(), 300);
    assert_converged(&master, &[&real, &middle, &end]);
    assert_eq!(master.client().cmd(&["GET", "before"]), b"$4\r\nsync\r\n");
    assert_eq!(info_field(&mut master.client(), "replication", "connected_slaves"), "2");
}

#[test]
fn ferrodis_follows_a_real_master() {
    let _w = Watchdog::new("ferrodis_follows_a_real_master", Duration::from_secs(120));
    let master = RedisServer::with_args(&["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"]);
    master.client().cmd(&["DEBUG", "POPULATE", "2000"]);
    let replica = start_replica(false, &master, &[]);
    wait_until("the ferrodis replica up", || link_up(&replica));
    write_mix(&mut master.client(), 300);
    assert_converged(&master, &[&replica]);
    // A read-only replica refuses writes as Redis does; expired keys read as gone there.
    let mut c = replica.client();
    assert_eq!(show(&c.cmd(&["SET", "x", "y"])), show(b"-READONLY You can't write against a read only replica.\r\n"));
    assert_eq!(c.cmd(&["GET", "ttl:1"]), b"$-1\r\n");
    let role = show(&c.cmd(&["ROLE"]));
    assert!(role.contains("slave") && role.contains("connected"), "ROLE on the replica: {role}");
}

#[test]
fn partial_resync_after_a_dropped_link_and_after_a_restart() {
    let _w = Watchdog::new("partial_resync", Duration::from_secs(120));
    for master_real in [true, false] {
        let master = if master_real {
            RedisServer::with_args(&["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"])
        } else {
            TestServer::with_args(&MASTER)
        };
        let replica = start_replica(!master_real, &master, &[]);
        wait_until("replica up", || link_up(&replica));
        write_mix(&mut master.client(), 50);
        assert_converged(&master, &[&replica]);
        let full = stat(&master, "sync_full");
        let partial = stat(&master, "sync_partial_ok");
        // The link drops; the stream goes on meanwhile, in another database.
        assert_eq!(replica.client().cmd(&["CLIENT", "KILL", "TYPE", "master"]), b":1\r\n");
        let mut m = master.client();
        m.cmd(&["SELECT", "5"]);
        m.cmd(&["SET", "while-down", "1"]);
        wait_until("the link back", || stat(&master, "sync_partial_ok") == partial + 1 && link_up(&replica));
        m.cmd(&["SET", "after", "2"]);
        assert_converged(&master, &[&replica]);
        assert_eq!(stat(&master, "sync_full"), full, "master real={master_real}: a full sync after a link drop");
        let mut r = replica.client();
        r.cmd(&["SELECT", "5"]);
        assert_eq!(r.cmd(&["GET", "after"]), b"$1\r\n2\r\n");
    }
}

#[test]
fn ferrodis_replica_restart_continues_from_its_dump() {
    let _w = Watchdog::new("replica_restart", Duration::from_secs(120));
    let master = RedisServer::with_args(&["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"]);
    write_mix(&mut master.client(), 30);
    let dir = std::env::temp_dir().join(format!("ferrodis-repl-restart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let dir_arg = dir.to_string_lossy().into_owned();
    let port = master.port.to_string();
    let args =
        ["--replicaof", "127.0.0.1", &port, "--dir", &dir_arg, "--save", "3600 1", "--enable-debug-command", "yes"];
    {
        let replica = TestServer::with_args(&args);
        wait_until("replica up", || link_up(&replica));
        assert_converged(&master, &[&replica]);
        let _ = replica.client().try_cmd(&["SHUTDOWN", "SAVE"]);
    }
    master.client().cmd(&["SET", "while-down", "1"]);
    let full = stat(&master, "sync_full");
    let partial = stat(&master, "sync_partial_ok");
    let replica = TestServer::with_args(&args);
    wait_until("replica up again", || link_up(&replica));
    assert_converged(&master, &[&replica]);
    assert_eq!(stat(&master, "sync_full"), full, "the restarted replica needed a full sync");
    assert_eq!(stat(&master, "sync_partial_ok"), partial + 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wait_counts_acknowledging_replicas() {
    let _w = Watchdog::new("wait", Duration::from_secs(60));
    let master = TestServer::with_args(&MASTER);
    let mut c = master.client();
    assert_eq!(c.cmd(&["WAIT", "1", "50"]), b":0\r\n");
    let replica = start_replica(true, &master, &[]);
    wait_until("replica up", || link_up(&replica));
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    assert_eq!(c.cmd(&["WAIT", "2", "100"]), b":1\r\n");
    assert_eq!(c.cmd(&["WAIT", "0", "0"]), b":1\r\n");
}

/// Replies that need no replica at all, byte for byte against Redis.
#[test]
fn replication_commands_answer_as_redis() {
    let redis = RedisServer::new();
    let ours = TestServer::new();
    let cases: &[&[&str]] = &[
        &["REPLICAOF", "127.0.0.1", "notaport"],
        &["REPLICAOF", "127.0.0.1", "70000"],
        &["REPLICAOF", "no", "one"],
        &["SLAVEOF", "NO", "ONE"],
        &["REPLICAOF", "a"],
        &["REPLCONF", "listening-port"],
        &["REPLCONF", "bogus", "1"],
        &["REPLCONF", "listening-port", "x"],
        &["REPLCONF", "capa", "eof", "capa", "psync2"],
        &["PSYNC", "?", "notanumber"],
        &["WAIT", "1", "notanumber"],
        &["WAIT", "x", "0"],
        &["WAIT", "0", "-1"],
        &["ROLE"],
    ];
    let (mut r, mut o) = (redis.client(), ours.client());
    for argv in cases {
        let (want, got) = (r.cmd(argv), o.cmd(argv));
        // ROLE's offset is 0 on both fresh masters; everything else is compared as is.
        assert_eq!(show(&got), show(&want), "{argv:?}");
    }
}

/// The command stream a master sends after the snapshot, byte for byte against Redis: SELECT
/// when the database changes, MULTI/EXEC around a transaction, a script's effects, a rewritten
/// INCRBYFLOAT and SPOP's SREM, nothing for commands that changed nothing.
#[test]
fn the_stream_after_sync_matches_redis() {
    let _w = Watchdog::new("the_stream_after_sync_matches_redis", Duration::from_secs(60));
    let redis = RedisServer::with_args(&["--repl-diskless-sync", "no"]);
    let ours = TestServer::new();
    let mut streams = Vec::new();
    for s in [&redis, &ours] {
        let mut replica = s.client();
        replica.send_raw(b"SYNC\r\n").expect("send SYNC");
        // Skip the keepalive newlines, read the `$<len>` header and the snapshot.
        let mut buf = Vec::new();
        wait_until("the snapshot", || {
            buf.extend(replica.drain(Duration::from_millis(50)).bytes);
            while buf.first() == Some(&b'\n') {
                buf.remove(0);
            }
            let Some(nl) = buf.windows(2).position(|w| w == b"\r\n") else { return false };
            let len: usize = std::str::from_utf8(&buf[1..nl]).ok().and_then(|t| t.parse().ok()).unwrap_or(usize::MAX);
            buf.len() >= nl + 2 + len && {
                buf.drain(..nl + 2 + len);
                true
            }
        });
        let mut c = s.client();
        for argv in [
            &["SET", "a", "1"][..],
            &["INCR", "a"],
            &["DEL", "missing"],
            &["SELECT", "2"],
            &["HSET", "h", "f", "v"],
            &["INCRBYFLOAT", "fl", "1.5"],
            &["SADD", "s", "only"],
            &["SPOP", "s"],
            &["MULTI"],
            &["LPUSH", "l", "x"],
            &["RPUSH", "l", "y"],
            &["EXEC"],
            &["EVAL", "redis.call('set','e','1') redis.call('incr','e') return 1", "0"],
            &["SELECT", "0"],
            &["FLUSHDB"],
        ] {
            c.cmd(argv);
        }
        let deadline = std::time::Instant::now() + common::WAIT_LIMIT;
        // PINGs come on the master's own clock (every repl-ping-replica-period): not compared.
        let ping = b"*1\r\n$4\r\nPING\r\n";
        let strip = |b: &[u8]| {
            let mut out = Vec::new();
            let mut i = 0;
            while i < b.len() {
                if b[i..].starts_with(ping) {
                    i += ping.len();
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            out
        };
        while !strip(&buf).ends_with(b"FLUSHDB\r\n") {
            assert!(std::time::Instant::now() < deadline, "{}: the stream stopped at {}", s.name, show(&buf));
            buf.extend(replica.drain(Duration::from_millis(100)).bytes);
        }
        streams.push(strip(&buf));
    }
    assert_eq!(show(&streams[1]), show(&streams[0]));
}

/// repl-diskless-sync-delay: a diskless replica waits (INFO shows it as wait_bgsave, with
/// keepalive newlines) and all that arrive within the delay start together.
#[test]
fn diskless_sync_waits_for_its_delay() {
    let _w = Watchdog::new("diskless_sync_waits_for_its_delay", Duration::from_secs(60));
    let master = TestServer::with_args(&["--repl-diskless-sync-delay", "2"]);
    let started = std::time::Instant::now();
    let replica = start_replica(true, &master, &[]);
    wait_until("the replica waiting for the delay", || {
        String::from_utf8_lossy(&master.client().cmd(&["INFO", "replication"])).contains("state=wait_bgsave")
    });
    assert_eq!(info_field(&mut master.client(), "replication", "connected_slaves"), "1");
    wait_until("replica up", || link_up(&replica));
    assert!(started.elapsed() >= Duration::from_millis(1500), "the sync started before its delay");
}

/// A master restarted on a dump with keys whose time passed meanwhile streams a DEL for each
/// (a SELECT first): with no replication position in the dump, the offset moves by those bytes
/// and the backlog is dropped again, as Redis 7.0's loadDataFromDisk does.
#[test]
fn a_restarted_master_streams_the_dels_of_keys_expired_while_down() {
    let figures = |real: bool| {
        let start = |args: &[&str]| if real { RedisServer::with_args(args) } else { TestServer::with_args(args) };
        let first = start(&DEBUG);
        let mut c = first.client();
        c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        c.cmd(&["SET", "keep", "v"]);
        c.cmd(&["SET", "gone:1", "v", "PX", "50"]);
        c.cmd(&["SELECT", "3"]);
        c.cmd(&["SET", "gone:2", "v", "PX", "50"]);
        std::thread::sleep(Duration::from_millis(120));
        assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
        let dir = first.dir.to_string_lossy().into_owned();
        let again = start(&["--dir", &dir]);
        let mut c = again.client();
        let f = |c: &mut Client, section: &str, name: &str| info_field(c, section, name);
        (
            f(&mut c, "replication", "master_repl_offset"),
            f(&mut c, "replication", "repl_backlog_active"),
            f(&mut c, "persistence", "rdb_last_load_keys_expired"),
            show(&c.cmd(&["DBSIZE"])),
        )
    };
    let ours = figures(false);
    assert_eq!(ours, figures(true));
    assert_eq!(ours.2, "2");
}

fn failover_state(s: &Server) -> String {
    info_field(&mut s.client(), "replication", "master_failover_state")
}

fn role(s: &Server) -> String {
    info_field(&mut s.client(), "replication", "role")
}

/// Stops (SIGSTOP) or resumes (SIGCONT) a server process: a stopped replica acknowledges
/// nothing, so a failover to it waits.
fn freeze(s: &Server, stop: bool) {
    let sig = if stop { libc::SIGSTOP } else { libc::SIGCONT };
    // SAFETY: signals a child process this test started and still owns.
    assert_eq!(unsafe { libc::kill(s.pid() as i32, sig) }, 0, "signal {} to {}", sig, s.name);
    // SIGSTOP takes effect when the process is next scheduled: until then a "frozen" replica
    // could still take the next write and answer the master's GETACK (which made a FAILOVER
    // find it caught up and hold no write).
    if stop {
        wait_until("the process to stop", || {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", s.pid())).unwrap_or_default();
            // The state follows the command name's closing parenthesis.
            stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        });
    }
}

/// FAILOVER from a ferrodis master to a real Redis replica, then back from the real Redis
/// (now master) to ferrodis: each time the old master turns replica of the new one with a
/// partial resync (`PSYNC <replid> <offset> FAILOVER` answered `+CONTINUE`), no full sync, and
/// the datasets agree before and after.
#[test]
fn failover_to_a_real_replica_and_back() {
    let _w = Watchdog::new("failover_to_a_real_replica_and_back", Duration::from_secs(120));
    let ours = TestServer::with_args(&MASTER);
    let real = start_replica(true, &ours, &["--repl-diskless-sync-delay", "0"]);
    wait_until("the real replica up", || link_up(&real));
    write_mix(&mut ours.client(), 50);
    assert_converged(&ours, &[&real]);
    for (from, to) in [(&ours, &real), (&real, &ours)] {
        let (full, partial) = (stat(to, "sync_full"), stat(to, "sync_partial_ok"));
        let port = to.port.to_string();
        assert_eq!(from.client().cmd(&["FAILOVER", "TO", "127.0.0.1", &port]), b"+OK\r\n", "{} fails over", from.name);
        wait_until("the failover to finish", || failover_state(from) == "no-failover" && link_up(from));
        assert_eq!(role(from), "slave", "{} after its failover", from.name);
        assert_eq!(role(to), "master", "{} after the failover to it", to.name);
        assert_eq!(stat(to, "sync_partial_ok"), partial + 1, "{} continued {}'s history", to.name, from.name);
        assert_eq!(stat(to, "sync_full"), full, "a full sync during the failover to {}", to.name);
        let mut c = to.client();
        for i in 0..50 {
            c.cmd(&["SET", &format!("after:{}:{i}", to.name), "v"]);
            c.cmd(&["INCR", "counter"]);
            c.cmd(&["LPUSH", "l:1", &i.to_string()]);
        }
        assert_converged(to, &[from]);
    }
    assert!(ours.log().contains("MASTER MODE enabled (failover request from '"), "{}", ours.log());
}

/// FAILOVER's argument and state errors, byte for byte against Redis: on a master without
/// replicas, then on a master with a replica (and on that replica), then while a failover
/// waits for a stopped replica (FAILOVER again, REPLICAOF, reads still served); then ABORT,
/// after which the write held meanwhile runs; then TIMEOUT without FORCE gives up, with
/// Redis's log line.
#[test]
fn failover_errors_timeout_and_abort_answer_as_redis() {
    let _w = Watchdog::new("failover_errors_timeout_and_abort", Duration::from_secs(120));
    let mut transcripts = Vec::new();
    for master_real in [true, false] {
        let master = if master_real {
            RedisServer::with_args(&["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"])
        } else {
            TestServer::with_args(&MASTER)
        };
        let mut t: Vec<(String, Vec<u8>)> = Vec::new();
        let mut m = master.client();
        fn run(c: &mut Client, argv: &[&str], t: &mut Vec<(String, Vec<u8>)>) {
            t.push((argv.join(" "), c.cmd(argv)));
        }
        for argv in [
            &["FAILOVER"][..],
            &["FAILOVER", "ABORT"],
            &["FAILOVER", "TO", "127.0.0.1"],
            &["FAILOVER", "bogus"],
            &["FAILOVER", "TIMEOUT", "0"],
            &["FAILOVER", "TIMEOUT", "-5"],
            &["FAILOVER", "TIMEOUT", "abc"],
            &["FAILOVER", "TIMEOUT", "10", "TIMEOUT", "10"],
            &["FAILOVER", "TO", "h", "abc"],
            &["FAILOVER", "TO", "h", "1", "TO", "h", "2"],
            &["FAILOVER", "FORCE", "FORCE"],
            &["FAILOVER", "ABORT", "ABORT"],
            &["FAILOVER", "FORCE"],
            &["PSYNC", "?", "-1", "FAILOVER"],
        ] {
            run(&mut m, argv, &mut t);
        }
        let replica = start_replica(true, &master, &["--repl-diskless-sync-delay", "0"]);
        wait_until("replica up", || link_up(&replica) && replica_online(&master));
        let rport = replica.port.to_string();
        let mut r = replica.client();
        for argv in [
            &["FAILOVER", "FORCE", "TIMEOUT", "100"][..],
            &["FAILOVER", "TO", "127.0.0.1", &rport, "FORCE"],
            &["FAILOVER", "TO", "127.0.0.1", "1"],
            &["FAILOVER", "TO", "127.0.0.1", "70000"],
            &["FAILOVER", "TO", "nohost", &rport],
        ] {
            run(&mut m, argv, &mut t);
        }
        run(&mut r, &["FAILOVER"], &mut t);
        run(&mut r, &["PSYNC", "0123456789012345678901234567890123456789", "1", "FAILOVER"], &mut t);
        // The replica stops: the failover waits for it, writes held, reads served.
        m.cmd(&["SET", "k", "1"]);
        freeze(&replica, true);
        m.cmd(&["SET", "k", "2"]);
        run(&mut m, &["FAILOVER", "TO", "127.0.0.1", &rport, "TIMEOUT", "60000"], &mut t);
        t.push(("state".into(), failover_state(&master).into_bytes()));
        let mut writer = master.client();
        writer.send_raw(b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n").expect("send INCR");
        common::wait_blocked(&mut m, 1, "INCR while the failover waits");
        run(&mut m, &["GET", "k"], &mut t);
        run(&mut m, &["FAILOVER"], &mut t);
        run(&mut m, &["REPLICAOF", "127.0.0.1", &rport], &mut t);
        run(&mut m, &["REPLICAOF", "NO", "ONE"], &mut t);
        run(&mut m, &["FAILOVER", "ABORT"], &mut t);
        t.push(("state".into(), failover_state(&master).into_bytes()));
        t.push(("held INCR".into(), writer.read_reply().expect("the held INCR's reply")));
        // TIMEOUT without FORCE: given up once it passes.
        run(&mut m, &["FAILOVER", "TO", "127.0.0.1", &rport, "TIMEOUT", "200"], &mut t);
        wait_until("the failover to give up", || failover_state(&master) == "no-failover");
        t.push(("role".into(), role(&master).into_bytes()));
        freeze(&replica, false);
        assert_converged(&master, &[&replica]);
        let log = master.log();
        assert!(
            log.contains(&format!("FAILOVER to 127.0.0.1:{rport} aborted: Replica never caught up before timeout")),
            "{}: {log}",
            master.name
        );
        assert!(log.contains("aborted: Failover manually aborted"), "{}: {log}", master.name);
        transcripts.push(t);
    }
    let (redis, ours) = (&transcripts[0], &transcripts[1]);
    assert_eq!(redis.len(), ours.len());
    for ((what, want), (_, got)) in redis.iter().zip(ours) {
        assert_eq!(show(got), show(want), "{what}");
    }
}

/// FAILOVER ... TIMEOUT ms FORCE from ferrodis to a real replica that stopped: at the timeout
/// ferrodis turns replica anyway (failover-in-progress until the target answers); once the
/// target runs again it takes over, with what it had received, and both agree.
#[test]
fn failover_force_to_a_stopped_real_replica() {
    let _w = Watchdog::new("failover_force_to_a_stopped_real_replica", Duration::from_secs(120));
    let ours = TestServer::with_args(&MASTER);
    let real = start_replica(true, &ours, &["--repl-diskless-sync-delay", "0"]);
    wait_until("the real replica up", || link_up(&real));
    write_mix(&mut ours.client(), 20);
    assert_converged(&ours, &[&real]);
    freeze(&real, true);
    ours.client().cmd(&["SET", "late", "1"]);
    let port = real.port.to_string();
    let reply = ours.client().cmd(&["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "100", "FORCE"]);
    assert_eq!(reply, b"+OK\r\n");
    wait_until("the forced failover to start", || failover_state(&ours) == "failover-in-progress");
    assert_eq!(role(&ours), "slave");
    freeze(&real, false);
    wait_until("the failover to finish", || failover_state(&ours) == "no-failover" && link_up(&ours));
    assert_eq!(role(&real), "master");
    assert_eq!(real.client().cmd(&["GET", "late"]), b"$1\r\n1\r\n");
    assert_converged(&real, &[&ours]);
    assert!(ours.log().contains(&format!("FAILOVER to 127.0.0.1:{port} time out exceeded, failing over.")));
}

/// A 32 MB value from the master: once applied, the replica does not keep a buffer of its size
/// for the link (Redis trims the master client's pending query buffer), so its used_memory
/// stays within 10 MB of the master's, as unit/pendingquerybuf checks.
#[test]
fn a_big_value_from_the_master_leaves_no_big_link_buffer() {
    let _w = Watchdog::new("a_big_value_from_the_master_leaves_no_big_link_buffer", Duration::from_secs(120));
    for real_master in [true, false] {
        let master = if real_master { RedisServer::with_args(&MASTER) } else { TestServer::with_args(&MASTER) };
        let replica = start_replica(false, &master, &[]);
        wait_until("the ferrodis replica up", || link_up(&replica));
        let value = "x".repeat(32 * 1024 * 1024);
        master.client().cmd(&["SET", "key", &value]);
        wait_until("the replica at the master's offset", || offset(&replica) == offset(&master));
        let used = |s: &Server| info_field(&mut s.client(), "memory", "used_memory").parse::<u64>().unwrap();
        let near = || used(&replica) <= used(&master) + 10 * 1024 * 1024;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !near() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(near(), "real master {real_master}: replica {} master {}", used(&replica), used(&master));
    }
}

/// `redis-cli --replica` (a SYNC client) against a disk-based master: once the file is sent the
/// replica is online in INFO, as Redis puts a replica online after the bulk transfer (it never
/// sends REPLCONF ACK).
#[test]
fn a_sync_client_is_online_after_a_disk_transfer() {
    let _w = Watchdog::new("a_sync_client_is_online_after_a_disk_transfer", Duration::from_secs(60));
    for real in [true, false] {
        let args = ["--repl-diskless-sync", "no"];
        let master = if real { RedisServer::with_args(&args) } else { TestServer::with_args(&args) };
        master.client().cmd(&["SET", "a", "b"]);
        let mut cli = std::process::Command::new("redis-cli")
            .args(["-p", &master.port.to_string(), "--replica"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-cli");
        wait_until("the SYNC client online", || replica_online(&master));
        let _ = cli.kill();
        let _ = cli.wait();
    }
}

/// A stream of tiny writes, one command a round trip (each its own batch), with a replica
/// attached: the master's memory grows by what its backlog keeps, about repl-backlog-size, as
/// Redis's 16 KiB blocks do, not by a buffer per write (that took 3 MB for a 1 MB backlog).
/// The same bound holds for the real Redis, so it is Redis's figure, not ours.
#[test]
fn tiny_writes_cost_the_backlog_about_its_size() {
    let _w = Watchdog::new("tiny_writes_cost_the_backlog_about_its_size", Duration::from_secs(120));
    const BACKLOG: u64 = 512 * 1024;
    let args = ["--repl-backlog-size", "512kb", "--repl-diskless-sync-delay", "0"];
    for real in [true, false] {
        let master = if real { RedisServer::with_args(&args) } else { TestServer::with_args(&args) };
        let replica = start_replica(false, &master, &[]);
        wait_until("the replica up", || link_up(&replica));
        let mut c = master.client();
        let mem = |c: &mut Client, f: &str| info_field(c, "memory", f).parse::<u64>().unwrap();
        for i in 0..100 {
            c.cmd(&["SET", &format!("key:{:012}", i % 10), "xxx"]);
        }
        wait_until("the replica at the master's offset", || offset(&replica) == offset(&master));
        let before = mem(&mut c, "used_memory");
        // 40000 commands of 45 bytes: 1.7 MB of stream, three times the backlog.
        for i in 0..40_000 {
            c.cmd(&["SET", &format!("key:{:012}", i % 10), "xxx"]);
        }
        wait_until("the replica at the master's offset", || offset(&replica) == offset(&master));
        let histlen: u64 = info_field(&mut c, "replication", "repl_backlog_histlen").parse().unwrap();
        let grown = mem(&mut c, "used_memory").saturating_sub(before);
        let buffers = mem(&mut c, "mem_total_replication_buffers");
        let who = if real { "redis" } else { "ferrodis" };
        assert!(histlen >= BACKLOG, "{who}: the backlog is full ({histlen})");
        assert!(buffers <= BACKLOG + 48 * 1024, "{who}: mem_total_replication_buffers {buffers}");
        assert!(
            grown <= BACKLOG + BACKLOG / 4 + 64 * 1024,
            "{who}: used_memory grew by {grown} for a {BACKLOG}-byte backlog"
        );
    }
}
