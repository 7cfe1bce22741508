//! A master's full syncs and replica buffers, each scenario run against real Redis 7.0 and
//! against ferrodis with the same expectations: replicas arriving within
//! repl-diskless-sync-delay share one snapshot child and its pipe; a disk sync's BGSAVE is
//! stopped when no replica waits for it any more (without save points); a replica whose command
//! produces a reply is disconnected; a stopped replica's piling output buffer is not counted for
//! maxmemory (no eviction; INFO mem_not_counted_for_evict and mem_clients_slaves show it).
//! A writable replica expires the TTL keys its own clients wrote.

mod common;

use common::{info_field, wait_until, RedisServer, Server, TestServer, Watchdog};
use std::time::Duration;

fn start(real: bool, args: &[&str]) -> Server {
    if real {
        RedisServer::with_args(args)
    } else {
        TestServer::with_args(args)
    }
}

fn replica_of(real: bool, master: &Server) -> Server {
    let port = master.port.to_string();
    start(real, &["--enable-debug-command", "yes", "--replicaof", "127.0.0.1", &port])
}

fn link_up(s: &Server) -> bool {
    info_field(&mut s.client(), "replication", "master_link_status") == "up"
}

fn field(s: &Server, section: &str, name: &str) -> i64 {
    info_field(&mut s.client(), section, name).parse().unwrap_or(-1)
}

/// Two replicas within the delay: one "Starting BGSAVE for SYNC" with target replicas
/// sockets, one child relayed to both ("done reading from pipe, 2 replicas still up"), and
/// both end with the master's dataset.
#[test]
fn replicas_within_the_delay_share_one_snapshot_child() {
    let _w = Watchdog::new("replicas_within_the_delay_share_one_snapshot_child", Duration::from_secs(120));
    for real in [true, false] {
        let master = start(real, &["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "3"]);
        let mut c = master.client();
        c.cmd(&["DEBUG", "POPULATE", "20000", "k", "100"]);
        // Real Redis replicas: only the master is under test.
        let a = replica_of(true, &master);
        let b = replica_of(true, &master);
        wait_until("both replicas up", || link_up(&a) && link_up(&b));
        let log = master.log();
        let what = if real { "redis" } else { "ferrodis" };
        assert_eq!(log.matches("Starting BGSAVE for SYNC with target: replicas sockets").count(), 1, "{what}: {log}");
        assert!(log.contains("Diskless rdb transfer, done reading from pipe, 2 replicas still up."), "{what}: {log}");
        assert_eq!(field(&master, "stats", "sync_full"), 2, "{what}");
        let digest = c.cmd(&["DEBUG", "DIGEST"]);
        assert_eq!(a.client().cmd(&["DEBUG", "DIGEST"]), digest, "{what}");
        assert_eq!(b.client().cmd(&["DEBUG", "DIGEST"]), digest, "{what}");
    }
}

/// A disk sync is a BGSAVE (INFO rdb_bgsave_in_progress, the replica in wait_bgsave); when its
/// only replica leaves and there are no save points, the child is killed.
#[test]
fn a_disk_sync_child_nobody_waits_for_is_killed() {
    let _w = Watchdog::new("a_disk_sync_child_nobody_waits_for_is_killed", Duration::from_secs(120));
    for real in [true, false] {
        let what = if real { "redis" } else { "ferrodis" };
        let master = start(real, &["--repl-diskless-sync", "no", "--rdb-key-save-delay", "1000000"]);
        let mut c = master.client();
        for i in 0..10 {
            c.cmd(&["SET", &i.to_string(), "v"]);
        }
        let replica = replica_of(true, &master);
        wait_until("the sync's BGSAVE", || {
            field(&master, "persistence", "rdb_bgsave_in_progress") == 1
                && info_field(&mut master.client(), "replication", "slave0").contains("wait_bgsave")
        });
        replica.client().cmd(&["REPLICAOF", "NO", "ONE"]);
        wait_until(&format!("{what}: the BGSAVE killed"), || {
            field(&master, "persistence", "rdb_bgsave_in_progress") == 0
        });
        assert_eq!(field(&master, "replication", "connected_slaves"), 0, "{what}");
    }
}

/// A client turned replica (PSYNC) that sends a command with a reply is disconnected, the reply
/// withheld, and the master logs it as Redis does.
#[test]
fn a_replica_whose_command_replies_is_disconnected() {
    let _w = Watchdog::new("a_replica_whose_command_replies_is_disconnected", Duration::from_secs(60));
    for real in [true, false] {
        let what = if real { "redis" } else { "ferrodis" };
        let master = start(real, &["--repl-diskless-sync-delay", "0"]);
        let mut r = master.client();
        r.send_raw(b"PSYNC replicationid -1\r\n").expect("send");
        let head = r.read_reply().expect("FULLRESYNC");
        assert!(head.starts_with(b"+FULLRESYNC"), "{what}: {}", common::show(&head));
        r.send_raw(b"SLOWLOG GET\r\n").expect("send");
        let rest = r.drain(Duration::from_secs(2));
        assert!(rest.closed, "{what}: the replica was not disconnected");
        assert!(!rest.bytes.windows(4).any(|w| w == b"*0\r\n"), "{what}: the reply was sent");
        wait_until("the log line", || {
            master.log().contains("Replica generated a reply to command 'slowlog|get', disconnecting it: ")
        });
        assert_eq!(master.client().cmd(&["PING"]), b"+PONG\r\n");
    }
}

/// A stopped replica's output buffer grows past maxmemory's margin: no key is evicted, and INFO
/// shows the buffer in mem_clients_slaves and mem_not_counted_for_evict.
#[test]
fn replica_buffers_are_not_counted_for_eviction() {
    let _w = Watchdog::new("replica_buffers_are_not_counted_for_eviction", Duration::from_secs(120));
    for real in [true, false] {
        let what = if real { "redis" } else { "ferrodis" };
        let master = start(real, &["--repl-diskless-sync-delay", "0", "--maxmemory-policy", "allkeys-random"]);
        let mut c = master.client();
        for j in 0..100 {
            c.cmd(&["SETRANGE", &format!("key:{j}"), "100000", "asdf"]);
        }
        c.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "replica 100000000 100000000 300"]);
        c.cmd(&["CONFIG", "SET", "repl-backlog-size", "10240"]);
        let replica = replica_of(true, &master);
        wait_until("replica up", || link_up(&replica));
        let used = field(&master, "memory", "used_memory");
        let not_counted = field(&master, "memory", "mem_not_counted_for_evict");
        c.cmd(&["CONFIG", "SET", "maxmemory", &(used - not_counted + 256 * 1024).to_string()]);
        // SAFETY: stops a child process this test started and still owns.
        unsafe { libc::kill(replica.pid() as i32, libc::SIGSTOP) };
        let payload = "A".repeat(100);
        for _ in 0..50_000 {
            c.cmd(&["SETRANGE", "key:0", "0", &payload]);
        }
        let slaves = field(&master, "memory", "mem_clients_slaves");
        let not_counted = field(&master, "memory", "mem_not_counted_for_evict");
        let dbsize = c.cmd(&["DBSIZE"]);
        let evicted = field(&master, "stats", "evicted_keys");
        // SAFETY: resumes the process stopped above.
        unsafe { libc::kill(replica.pid() as i32, libc::SIGCONT) };
        assert_eq!(dbsize, b":100\r\n", "{what}: keys were evicted");
        assert_eq!(evicted, 0, "{what}");
        assert!(slaves > 2 * 1024 * 1024, "{what}: mem_clients_slaves {slaves}");
        assert!(not_counted > 2 * 1024 * 1024, "{what}: mem_not_counted_for_evict {not_counted}");
    }
}

/// An idle replica costs nothing in mem_clients_slaves: Redis 7.0 counts there only what the
/// shared replication buffer holds beyond the backlog's size, not the replica clients
/// themselves.
#[test]
fn an_idle_replica_shows_no_replica_buffer_memory() {
    let _w = Watchdog::new("an_idle_replica_shows_no_replica_buffer_memory", Duration::from_secs(60));
    for real in [true, false] {
        let what = if real { "redis" } else { "ferrodis" };
        let master = start(real, &["--repl-diskless-sync-delay", "0"]);
        master.client().cmd(&["SET", "k", "v"]);
        let replica = replica_of(true, &master);
        wait_until("replica up", || link_up(&replica));
        assert_eq!(field(&master, "replication", "connected_slaves"), 1, "{what}");
        assert_eq!(field(&master, "memory", "mem_clients_slaves"), 0, "{what}");
    }
}

/// replica-lazy-flush: a replica's old dataset, dropped for a full sync, counts in
/// lazyfreed_objects (one per key) when the flush is lazy and not at all otherwise, as on a
/// Redis replica. The master is real Redis; the replica is each server in turn.
#[test]
fn replica_lazy_flush_counts_the_dropped_keys() {
    let _w = Watchdog::new("replica_lazy_flush_counts_the_dropped_keys", Duration::from_secs(60));
    let master = RedisServer::with_args(&["--repl-diskless-sync-delay", "0"]);
    let mut m = master.client();
    m.cmd(&["MSET", "m1", "v", "m2", "v", "m3", "v"]);
    let port = master.port.to_string();
    let mut seen = Vec::new();
    for real in [true, false] {
        for lazy in ["yes", "no"] {
            let replica = start(real, &["--replica-lazy-flush", lazy]);
            let mut c = replica.client();
            c.cmd(&["MSET", "r1", "v", "r2", "v", "r3", "v", "r4", "v"]);
            c.cmd(&["REPLICAOF", "127.0.0.1", &port]);
            wait_until("the replica's link up", || link_up(&replica));
            wait_until("pending lazy frees done", || field(&replica, "memory", "lazyfree_pending_objects") == 0);
            assert_eq!(c.cmd(&["DBSIZE"]), b":3\r\n", "the master's keys replaced the replica's");
            seen.push((lazy, field(&replica, "memory", "lazyfreed_objects")));
        }
    }
    let (redis, ferrodis) = seen.split_at(2);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis: (replica-lazy-flush, lazyfreed_objects)");
    assert_eq!(redis[0].1, 4, "redis counts the four keys it dropped");
}

/// A replica with maxmemory under its master's dataset: with replica-ignore-maxmemory yes (the
/// default) it evicts nothing, however it is read, and keeps every key of its master; with no,
/// the master's stream makes it evict down to its limit. The master is real Redis; the replica
/// is each server in turn.
#[test]
fn replica_ignore_maxmemory_decides_whether_a_replica_evicts() {
    let _w = Watchdog::new("replica_ignore_maxmemory_decides_whether_a_replica_evicts", Duration::from_secs(120));
    let mut seen = Vec::new();
    for real in [true, false] {
        for ignore in ["yes", "no"] {
            let master = RedisServer::with_args(&["--repl-diskless-sync-delay", "0"]);
            let port = master.port.to_string();
            let replica = start(
                real,
                &[
                    "--replicaof",
                    "127.0.0.1",
                    &port,
                    "--maxmemory",
                    "3mb",
                    "--maxmemory-policy",
                    "allkeys-random",
                    "--replica-ignore-maxmemory",
                    ignore,
                ],
            );
            wait_until("the replica's link up", || link_up(&replica));
            // About 10 MB of keys through the stream.
            let mut m = master.client();
            let value = "x".repeat(100);
            let mut batch = Vec::new();
            for i in 0..60_000 {
                batch.extend(common::encode(&["SET", &format!("key:{i}"), &value]));
            }
            m.send_raw(&batch).unwrap();
            for _ in 0..60_000 {
                m.read_reply().unwrap();
            }
            let offset = field(&master, "replication", "master_repl_offset");
            wait_until("the replica caught up", || field(&replica, "replication", "slave_repl_offset") == offset);
            // Reads on the replica run Redis's eviction check before each command.
            let mut r = replica.client();
            for i in 0..100 {
                r.cmd(&["GET", &format!("key:{i}")]);
            }
            let evicted = field(&replica, "stats", "evicted_keys");
            let used = field(&replica, "memory", "used_memory");
            let keys: i64 = String::from_utf8_lossy(&r.cmd(&["DBSIZE"]))[1..].trim().parse().unwrap();
            let what = if real { "redis" } else { "ferrodis" };
            seen.push(format!(
                "ignore {ignore}: evicted {}, all keys {}, under 3.3 MB {}",
                evicted > 0,
                keys == 60_000,
                used < 3_300_000
            ));
            eprintln!("{what}, replica-ignore-maxmemory {ignore}: evicted {evicted}, keys {keys}, used_memory {used}");
        }
    }
    let (redis, ferrodis) = seen.split_at(2);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
}

/// repl-disable-tcp-nodelay: a master turns TCP_NODELAY off on a replica's socket when its full
/// sync starts (fewer, bigger packets), and leaves it on otherwise. The TCP_NODELAY calls the
/// master makes while a real Redis replica connects and syncs, compared with Redis's.
#[test]
fn repl_disable_tcp_nodelay_turns_nagle_on_for_replicas() {
    let _w = Watchdog::new("repl_disable_tcp_nodelay_turns_nagle_on_for_replicas", Duration::from_secs(60));
    let tmp = std::env::temp_dir().join(format!("ferrodis-nodelay-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let mut seen = Vec::new();
    for real in [true, false] {
        for disable in ["yes", "no"] {
            let master = start(real, &["--repl-diskless-sync-delay", "0", "--repl-disable-tcp-nodelay", disable]);
            let mut replica = None;
            let calls = common::syscalls_during(master.pid(), &tmp, "setsockopt", || {
                let r = replica_of(true, &master);
                wait_until("the replica's link up", || link_up(&r));
                replica = Some(r);
            });
            let nodelay: Vec<String> = calls
                .iter()
                .filter(|c| c.contains("TCP_NODELAY"))
                .map(|c| c.split_once(", ").map_or(c.clone(), |(_, rest)| format!("setsockopt(FD, {rest}")))
                .collect();
            seen.push(format!("repl-disable-tcp-nodelay {disable}: {nodelay:?}"));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let (redis, ferrodis) = seen.split_at(2);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
    assert!(redis[0].contains("[0]"), "redis turned TCP_NODELAY off: {redis:?}");
}

/// rdb-del-sync-files with persistence off: the master deletes the dump it wrote for a disk
/// sync once its replica has it, and a replica deletes the dump it received once loaded; with
/// the option off, or with save points, both stay. Each server in turn as the master (a real
/// Redis replica) and as the replica (a real Redis master), compared with Redis.
#[test]
fn rdb_del_sync_files_removes_the_dumps_of_a_persistence_less_sync() {
    let _w = Watchdog::new("rdb_del_sync_files_removes_the_dumps_of_a_persistence_less_sync", Duration::from_secs(120));
    let options = |del: &'static str, save: &'static str| {
        ["--repl-diskless-sync", "no", "--repl-diskless-load", "disabled", "--rdb-del-sync-files", del, "--save", save]
    };
    let mut seen = Vec::new();
    for real in [true, false] {
        for (del, save) in [("yes", ""), ("no", ""), ("yes", "3600 1")] {
            // This server as the master.
            let master = start(real, &options(del, save));
            master.client().cmd(&["SET", "k", "v"]);
            let port = master.port.to_string();
            let mut args = options("no", "").to_vec();
            args.extend(["--replicaof", "127.0.0.1", &port]);
            let replica = RedisServer::with_args(&args);
            wait_until("the replica's link up", || link_up(&replica));
            // The master's cron looks once a second.
            std::thread::sleep(Duration::from_millis(1500));
            let master_dump = master.dir.join("dump.rdb").exists();
            // This server as the replica.
            let master = RedisServer::with_args(&options("no", ""));
            master.client().cmd(&["SET", "k", "v"]);
            let port = master.port.to_string();
            let mut args = options(del, save).to_vec();
            args.extend(["--replicaof", "127.0.0.1", &port]);
            let replica = start(real, &args);
            wait_until("the replica's link up", || link_up(&replica));
            let replica_dump = replica.dir.join("dump.rdb").exists();
            assert_eq!(replica.client().cmd(&["GET", "k"]), b"$1\r\nv\r\n");
            seen.push(format!("del {del}, save '{save}': master keeps its dump {master_dump}, replica {replica_dump}"));
        }
    }
    let (redis, ferrodis) = seen.split_at(3);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
    assert!(redis[0].ends_with("master keeps its dump false, replica false"), "{redis:?}");
    assert!(redis[1].ends_with("master keeps its dump true, replica true"), "{redis:?}");
}

/// maxmemory-clients never evicts the master link: a script's 50000 writes reach a replica as
/// one MULTI/EXEC of about 6 MB, over a 1 MB limit, and the replica applies it without dropping
/// its master (no second full sync). The master is real Redis; the replica each server in turn.
#[test]
fn client_eviction_spares_the_master_link() {
    let _w = Watchdog::new("client_eviction_spares_the_master_link", Duration::from_secs(60));
    let mut seen = Vec::new();
    for real in [true, false] {
        let master = RedisServer::with_args(&["--repl-diskless-sync-delay", "0"]);
        let port = master.port.to_string();
        let replica =
            start(real, &["--maxmemory", "200mb", "--maxmemory-clients", "1mb", "--replicaof", "127.0.0.1", &port]);
        wait_until("the replica's link up", || link_up(&replica));
        let mut m = master.client();
        m.cmd(&["EVAL", "for i=1,50000 do redis.call('set','k'..i,string.rep('x',100)) end", "0"]);
        let offset = field(&master, "replication", "master_repl_offset");
        wait_until("the replica caught up", || {
            link_up(&replica) && field(&replica, "replication", "slave_repl_offset") == offset
        });
        seen.push(format!(
            "evicted_clients {}, sync_full {}, keys {}",
            field(&replica, "stats", "evicted_clients"),
            field(&master, "stats", "sync_full"),
            String::from_utf8_lossy(&replica.client().cmd(&["DBSIZE"])).trim()
        ));
    }
    assert_eq!(seen[1], seen[0], "ferrodis (left) against redis");
    assert_eq!(seen[0], "evicted_clients 0, sync_full 1, keys :50000");
}

/// A replica whose BGSAVE failed (its dir removed, stop-writes-on-bgsave-error with a save
/// point), fed a SET by its master: with replica-ignore-disk-write-errors no it panics
/// ("Guru Meditation: Replica was unable to write command to disk.") and ends by abort(), or
/// with exit status 1 under use-exit-on-panic; with yes it applies the SET and warns. The
/// master is real Redis; the replica each server in turn.
#[test]
fn a_replica_that_cannot_persist_panics_unless_told_to_go_on() {
    use std::os::unix::process::ExitStatusExt;
    let _w = Watchdog::new("a_replica_that_cannot_persist_panics_unless_told_to_go_on", Duration::from_secs(120));
    let mut seen = Vec::new();
    let mut ferrodis_signals = Vec::new();
    for real in [true, false] {
        for (ignore, exit_on_panic) in [("no", "no"), ("no", "yes"), ("yes", "no")] {
            let master = RedisServer::with_args(&["--repl-diskless-sync-delay", "0"]);
            let port = master.port.to_string();
            let data = std::env::temp_dir()
                .join(format!("ferrodis-disk-error-{}-{ignore}-{exit_on_panic}", std::process::id()));
            std::fs::create_dir_all(&data).unwrap();
            let mut replica = start(
                real,
                &[
                    "--dir",
                    data.to_str().unwrap(),
                    "--save",
                    "3600 1",
                    "--replica-ignore-disk-write-errors",
                    ignore,
                    "--use-exit-on-panic",
                    exit_on_panic,
                    "--replicaof",
                    "127.0.0.1",
                    &port,
                ],
            );
            wait_until("the replica's link up", || link_up(&replica));
            std::fs::remove_dir_all(&data).unwrap();
            assert_eq!(replica.client().cmd(&["BGSAVE"]), b"+Background saving started\r\n");
            wait_until("the replica's BGSAVE failed", || {
                info_field(&mut replica.client(), "persistence", "rdb_last_bgsave_status") == "err"
            });
            assert_eq!(master.client().cmd(&["SET", "k", "v"]), b"+OK\r\n");
            wait_until("the replica applied the SET or ended", || {
                let applied = || common::Client::try_connect(replica.port)?.try_cmd(&["GET", "k"]);
                applied().is_ok_and(|reply| reply == b"$1\r\nv\r\n") || !replica.alive()
            });
            let outcome = match replica.wait_exit(Duration::from_millis(100)) {
                None => "applied the SET".to_string(),
                Some(status) => {
                    if !real {
                        ferrodis_signals.push(status.signal());
                    }
                    // Redis's panic ends in abort(), but on some machines its crash report
                    // itself faults first and it dies by SIGSEGV instead (seen in CI): both
                    // are "killed by a signal"; ferrodis's own signal is checked below.
                    let signal = status.signal().map(|s| if s == 11 { 6 } else { s });
                    format!("ended: exit code {:?}, signal {:?}", status.code(), signal)
                }
            };
            let log = replica.log();
            seen.push(format!(
                "ignore {ignore}, use-exit-on-panic {exit_on_panic}: {outcome}; panic logged {}, warning logged {}",
                log.contains("Guru Meditation: Replica was unable to write command to disk."),
                log.contains("Replica is applying a command even though it is unable to write to disk.")
            ));
        }
    }
    let (redis, ferrodis) = seen.split_at(3);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
    assert_eq!(redis[0], "ignore no, use-exit-on-panic no: ended: exit code None, signal Some(6); panic logged true, warning logged false");
    assert_eq!(redis[1], "ignore no, use-exit-on-panic yes: ended: exit code Some(1), signal None; panic logged true, warning logged false");
    assert_eq!(redis[2], "ignore yes, use-exit-on-panic no: applied the SET; panic logged false, warning logged true");
    assert_eq!(ferrodis_signals, [Some(6), None], "ferrodis aborts, or exits 1 under use-exit-on-panic");
}

/// INFO's replication traffic, apart and within the totals as Redis 7.0 counts it: a write's
/// propagation adds its bytes to the master's total_net_repl_output_bytes and to the replica's
/// total_net_repl_input_bytes, and to each side's total_net_*_bytes too; the replica's ACKs to
/// its master count in its total_net_output_bytes. Both servers of a pair are of the same kind.
#[test]
fn replication_traffic_is_counted_as_redis_counts_it() {
    let _w = Watchdog::new("replication_traffic_is_counted_as_redis_counts_it", Duration::from_secs(60));
    let mut seen = Vec::new();
    for real in [true, false] {
        let master = start(real, &["--repl-ping-replica-period", "60"]);
        let replica = replica_of(real, &master);
        wait_until("the replica's link up", || link_up(&replica));
        let mut m = master.client();
        let caught_up = || {
            let offset = field(&master, "replication", "master_repl_offset");
            wait_until("the replica caught up", || field(&replica, "replication", "slave_repl_offset") == offset);
        };
        // The first write brings the stream's SELECT.
        m.cmd(&["SET", "warm", "1"]);
        caught_up();
        let counters = || {
            (
                field(&master, "replication", "master_repl_offset"),
                field(&master, "stats", "total_net_output_bytes"),
                field(&master, "stats", "total_net_repl_output_bytes"),
                field(&replica, "stats", "total_net_input_bytes"),
                field(&replica, "stats", "total_net_repl_input_bytes"),
            )
        };
        let before = counters();
        let value = "x".repeat(10_000);
        assert_eq!(m.cmd(&["SET", "k", &value]), b"+OK\r\n");
        caught_up();
        let after = counters();
        let stream = after.0 - before.0;
        let (out, repl_out) = (after.1 - before.1, after.2 - before.2);
        let (input, repl_in) = (after.3 - before.3, after.4 - before.4);
        // The stream's bytes (the offset's growth): the SET's 10030, or more if something else
        // was propagated meanwhile.
        seen.push(format!(
            "stream holds the SET {}; master: repl output = stream {}, in the total {}; replica: repl input = \
             stream {}, in the total {}",
            stream >= 10_030,
            repl_out == stream,
            out >= repl_out + 5,
            repl_in == stream,
            input >= repl_in
        ));
        // The replica's REPLCONF ACKs (one a second) are output to a client, its master: they
        // count in its total_net_output_bytes. Read on one connection, less the first INFO's reply.
        let mut r = replica.client();
        let output = |reply: &[u8]| -> i64 {
            let text = String::from_utf8_lossy(reply);
            text.lines().find_map(|l| l.strip_prefix("total_net_output_bytes:")).unwrap().trim().parse().unwrap()
        };
        let first = r.cmd(&["INFO", "stats"]);
        std::thread::sleep(Duration::from_millis(2500));
        let acks = output(&r.cmd(&["INFO", "stats"])) - output(&first) - first.len() as i64;
        // An ACK is 37 bytes or more ("*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$N\r\nOFFSET\r\n").
        seen.push(format!("replica's ACKs in its output: {}", acks >= 37));
    }
    let (redis, ferrodis) = seen.split_at(2);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
    assert_eq!(
        redis,
        [
            "stream holds the SET true; master: repl output = stream true, in the total true; replica: repl input = \
             stream true, in the total true",
            "replica's ACKs in its output: true"
        ]
    );
}

/// A writable replica expires the TTL keys its own clients wrote, as nobody else will (Redis's
/// slaveKeysWithExpire): INFO slave_expires_tracked_keys counts their names (one name in two
/// databases once), a key whose TTL passed is deleted, a PERSISTed one forgotten, and FLUSHALL
/// forgets them all. The master is real Redis; the replica each server in turn.
#[test]
fn a_writable_replica_expires_what_its_clients_wrote() {
    let _w = Watchdog::new("a_writable_replica_expires_what_its_clients_wrote", Duration::from_secs(60));
    let master = RedisServer::new();
    master.client().cmd(&["SET", "from-master", "v", "EX", "1000"]);
    let port = master.port.to_string();
    let mut seen = Vec::new();
    for real in [true, false] {
        let replica = start(real, &["--replica-read-only", "no", "--replicaof", "127.0.0.1", &port]);
        wait_until("the replica's link up", || link_up(&replica));
        let tracked = || field(&replica, "stats", "slave_expires_tracked_keys");
        let mut c = replica.client();
        let mut out = Vec::new();
        for argv in [
            &["SET", "a", "1", "EX", "100"][..],
            &["SET", "b", "1", "PX", "100000"],
            &["SET", "c", "1"],
            &["SET", "short", "1", "PX", "300"],
            &["SELECT", "1"],
            &["SET", "a", "1", "EX", "100"],
            &["SET", "c", "1"],
            &["SELECT", "0"],
        ] {
            c.cmd(argv);
        }
        out.push(format!("tracked: {}", tracked()));
        wait_until("short expired on the replica", || c.cmd(&["DBSIZE"]) == b":4\r\n");
        wait_until("short forgotten", || tracked() == 2);
        out.push(format!("after short expired: {}", tracked()));
        c.cmd(&["PERSIST", "b"]);
        wait_until("b forgotten", || tracked() == 1);
        out.push(format!("after PERSIST b: {} keys {}", tracked(), String::from_utf8_lossy(&c.cmd(&["DBSIZE"]))));
        c.cmd(&["FLUSHALL"]);
        out.push(format!("after FLUSHALL: {}", tracked()));
        seen.push(out);
    }
    assert_eq!(seen[1], seen[0], "ferrodis (left) against redis");
    assert_eq!(seen[0][0], "tracked: 3", "redis counts a, b and short once each");
}
