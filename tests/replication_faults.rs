//! Replication faults, with ferrodis and the real Redis 7.0 in the roles each scenario names: a
//! master killed in the middle of a full sync, a replica killed while it loads the snapshot, the
//! link cut again and again while writes go on, and a replica that stops reading until the
//! master drops it for its output buffer. Each ends with the link back up, the offsets met and
//! the datasets equal by DEBUG DIGEST; while the fault lasts, a replica serves its old dataset or
//! nothing, never a half-loaded one.

mod common;

use common::{info_field, show, wait_until, Client, RedisServer, Server, TestServer, Watchdog};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const DEBUG: [&str; 2] = ["--enable-debug-command", "yes"];

fn start(real: bool, args: &[&str]) -> Server {
    let mut all: Vec<&str> = DEBUG.to_vec();
    all.extend_from_slice(args);
    if real {
        RedisServer::with_args(&all)
    } else {
        TestServer::with_args(&all)
    }
}

fn name(real: bool) -> &'static str {
    if real {
        "redis"
    } else {
        "ferrodis"
    }
}

fn repl(s: &Server, field: &str) -> String {
    info_field(&mut s.client(), "replication", field)
}

fn link_up(s: &Server) -> bool {
    repl(s, "master_link_status") == "up"
}

fn stat(s: &Server, name: &str) -> i64 {
    info_field(&mut s.client(), "stats", name).parse().unwrap_or(-1)
}

fn dbsize(s: &Server) -> Vec<u8> {
    s.client().cmd(&["DBSIZE"])
}

fn signal(s: &Server, sig: &str) {
    let status = std::process::Command::new("kill").args([sig, &s.pid().to_string()]).status().expect("run kill");
    assert!(status.success(), "kill {sig} {}", s.pid());
}

/// A directory that outlives a killed server (the harness removes its own on drop).
struct KeptDir(PathBuf);

impl KeptDir {
    fn new(tag: &str) -> KeptDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("ferrodis-repl-fault-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        KeptDir(dir)
    }

    fn arg(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }
}

impl Drop for KeptDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Offsets met and DEBUG DIGEST equal on the master and the replica.
fn assert_converged(master: &Server, replica: &Server, what: &str) {
    wait_until(&format!("{what}: the replica's offset to meet the master's"), || {
        link_up(replica) && repl(master, "master_repl_offset") == repl(replica, "master_repl_offset")
    });
    // The master may be expiring a key as its digest is taken, the replica's DEL a moment away.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let want = master.client().cmd(&["DEBUG", "DIGEST"]);
        let got = replica.client().cmd(&["DEBUG", "DIGEST"]);
        if got == want {
            break;
        }
        assert!(Instant::now() < deadline, "{what}: datasets differ: {} / {}", show(&want), show(&got));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// While `fault_lasts`, every DBSIZE the replica answers is one of `allowed` (its old dataset, or
/// the whole new one), never a count in between.
fn watch_dbsize(replica: &Server, allowed: &[Vec<u8>], what: &str, fault_lasts: Duration) {
    let end = Instant::now() + fault_lasts;
    let mut c = replica.client();
    while Instant::now() < end {
        let size = c.cmd(&["DBSIZE"]);
        assert!(
            size.starts_with(b"-LOADING") || allowed.contains(&size),
            "{what}: the replica served DBSIZE {} (allowed {:?})",
            show(&size),
            allowed.iter().map(|a| show(a)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The master dies (kill -9) while it streams the snapshot to a ferrodis replica: the replica
/// drops the partial transfer, keeps serving its old data, and syncs in full once a master is
/// back on the same port.
#[test]
fn master_killed_mid_transfer() {
    let _w = Watchdog::new("master_killed_mid_transfer", Duration::from_secs(180));
    for master_real in [false, true] {
        let what = format!("{} master killed mid-transfer", name(master_real));
        let dir = KeptDir::new("master");
        let dir_arg = dir.arg();
        // 2,000 keys at 1 ms each: a transfer of about two seconds.
        let master =
            start(master_real, &["--dir", &dir_arg, "--repl-diskless-sync-delay", "0", "--rdb-key-save-delay", "1000"]);
        let port = master.port.to_string();
        master.client().cmd(&["DEBUG", "POPULATE", "2000", "key", "50"]);
        let replica = start(false, &[]);
        let mut r = replica.client();
        r.cmd(&["SET", "old", "1"]);
        let old = dbsize(&replica);
        r.cmd(&["REPLICAOF", "127.0.0.1", &port]);
        // The master's child takes about two seconds over its keys: a sync in progress is one
        // in mid-transfer.
        wait_until(&format!("{what}: transfer started"), || repl(&replica, "master_sync_in_progress") == "1");
        signal(&master, "-9");
        drop(master);
        // The snapshot child may outlive its master for a while; it must not keep the port.
        let free = std::net::TcpListener::bind(("127.0.0.1", port.parse::<u16>().expect("port")));
        assert!(free.is_ok(), "{what}: the port is still held after the master died: {free:?}");
        drop(free);
        watch_dbsize(&replica, std::slice::from_ref(&old), &what, Duration::from_millis(700));
        assert_eq!(r.cmd(&["GET", "old"]), b"$1\r\n1\r\n", "{what}: old data gone");
        assert_ne!(repl(&replica, "master_link_status"), "up");

        let master = start(master_real, &["--port", &port, "--dir", &dir_arg, "--repl-diskless-sync-delay", "0"]);
        master.client().cmd(&["DEBUG", "POPULATE", "2000", "key", "50"]);
        master.client().cmd(&["SET", "after-restart", "1"]);
        assert_converged(&master, &replica, &what);
        assert_eq!(replica.client().cmd(&["EXISTS", "old", "after-restart"]), b":1\r\n", "{what}");
    }
}

/// A replica dies (kill -9) while it loads the snapshot from disk: nothing it left in its
/// directory is a broken dump, and restarted it syncs with the master and converges.
#[test]
fn replica_killed_mid_load() {
    let _w = Watchdog::new("replica_killed_mid_load", Duration::from_secs(180));
    for (master_real, replica_real) in [(false, false), (true, false), (false, true)] {
        let what = format!("{} replica of {} killed mid-load", name(replica_real), name(master_real));
        let master = start(master_real, &["--repl-diskless-sync-delay", "0"]);
        let port = master.port.to_string();
        master.client().cmd(&["DEBUG", "POPULATE", "3000", "key", "50"]);
        let dir = KeptDir::new("replica");
        let dir_arg = dir.arg();
        let base = ["--dir", &dir_arg, "--repl-diskless-load", "disabled"];
        let mut slow = base.to_vec();
        // 3,000 keys at 1 ms each: a load of about three seconds. Redis answers clients during a
        // load only every so many bytes read: every key here.
        slow.extend(["--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024"]);
        // REPLICAOF after the start, so the start itself does not wait out the load.
        let replica = start(replica_real, &slow);
        replica.client().cmd(&["REPLICAOF", "127.0.0.1", &port]);
        wait_until(&format!("{what}: loading"), || info_field(&mut replica.client(), "persistence", "loading") == "1");
        signal(&replica, "-9");
        drop(replica);
        for entry in std::fs::read_dir(&dir.0).expect("read dir").flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "rdb") && path.file_name().is_some_and(|n| n == "dump.rdb") {
                let out = std::process::Command::new("redis-check-rdb").arg(&path).output().expect("redis-check-rdb");
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(text.contains("RDB looks OK"), "{what}: {path:?} left broken:\n{text}");
            }
        }
        master.client().cmd(&["SET", "while-down", "1"]);
        let mut again = base.to_vec();
        again.extend(["--replicaof", "127.0.0.1", &port]);
        let replica = start(replica_real, &again);
        assert_converged(&master, &replica, &what);
        assert_eq!(replica.client().cmd(&["EXISTS", "while-down"]), b":1\r\n", "{what}");
    }
}

/// The link is cut again and again (CLIENT KILL on either side) while a client writes to the
/// master: every reconnection continues from the backlog, and the datasets end equal.
#[test]
fn link_cut_mid_stream_under_writes() {
    let _w = Watchdog::new("link_cut_mid_stream", Duration::from_secs(180));
    for (master_real, replica_real) in [(false, false), (true, false), (false, true)] {
        let what = format!("{} replica of {}, link cut under writes", name(replica_real), name(master_real));
        let master = start(master_real, &["--repl-diskless-sync-delay", "0"]);
        let port = master.port.to_string();
        let replica = start(replica_real, &["--replicaof", "127.0.0.1", &port]);
        wait_until(&format!("{what}: link up"), || link_up(&replica));
        let (full, partial) = (stat(&master, "sync_full"), stat(&master, "sync_partial_ok"));
        let writer_port = master.port;
        let writer = std::thread::spawn(move || {
            let mut c = Client::connect(writer_port);
            for i in 0..4000 {
                c.cmd(&["SET", &format!("k:{}", i % 500), &i.to_string()]);
                c.cmd(&["RPUSH", "list", &i.to_string()]);
                c.cmd(&["HINCRBY", "h", &format!("f{}", i % 7), "1"]);
                if i % 100 == 0 {
                    c.cmd(&["EXPIRE", &format!("k:{}", i % 500), "1000"]);
                }
            }
        });
        for cut in 0..4 {
            std::thread::sleep(Duration::from_millis(100));
            wait_until(&format!("{what}: link up before cut {cut}"), || link_up(&replica));
            if cut % 2 == 0 {
                master.client().cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
            } else {
                replica.client().cmd(&["CLIENT", "KILL", "TYPE", "master"]);
            }
        }
        writer.join().expect("writer");
        assert_converged(&master, &replica, &what);
        assert_eq!(stat(&master, "sync_full"), full, "{what}: a cut link needed a full sync");
        assert!(stat(&master, "sync_partial_ok") >= partial + 4, "{what}: partial resyncs");
    }
}

/// A replica stops reading (SIGSTOP) while the master writes: past the replica output buffer
/// limit the master drops it, and once the replica runs again it reconnects, syncs in full (the
/// backlog no longer covers it) and converges.
#[test]
fn replica_over_its_output_buffer_limit_is_dropped_and_resyncs() {
    let _w = Watchdog::new("replica_obuf", Duration::from_secs(180));
    for (master_real, replica_real) in [(false, false), (false, true), (true, false)] {
        let what = format!("{} replica of {} over its output buffer", name(replica_real), name(master_real));
        let master = start(
            master_real,
            &[
                "--repl-diskless-sync-delay",
                "0",
                "--client-output-buffer-limit",
                "replica 1mb 0 0",
                "--repl-backlog-size",
                "1mb",
            ],
        );
        let port = master.port.to_string();
        let replica = start(replica_real, &["--replicaof", "127.0.0.1", &port]);
        wait_until(&format!("{what}: link up"), || link_up(&replica));
        let full = stat(&master, "sync_full");
        signal(&replica, "-STOP");
        let mut c = master.client();
        let value = "x".repeat(20_000);
        let mut written = 0;
        // Loopback socket buffers take several megabytes before the master's own buffer grows.
        while repl(&master, "connected_slaves") != "0" {
            for _ in 0..100 {
                c.cmd(&["SET", &format!("big:{}", written % 3000), &value]);
                written += 1;
            }
            assert!(written < 20_000, "{what}: the master never dropped the stalled replica");
        }
        signal(&replica, "-CONT");
        c.cmd(&["SET", "after", "1"]);
        assert_converged(&master, &replica, &what);
        assert!(stat(&master, "sync_full") > full, "{what}: no full sync after the drop");
        if !master_real {
            assert!(
                master.log().contains("scheduled to be closed ASAP for overcoming of output buffer limits"),
                "{what}: master log:\n{}",
                master.log()
            );
        }
    }
}
