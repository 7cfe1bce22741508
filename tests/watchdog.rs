//! Redis's software watchdog (`watchdog-period`), side by side with real redis-server: the
//! period's floor of two cron periods (CONFIG GET shows the raised value, set at startup or by
//! CONFIG SET), one `--- WATCHDOG TIMER EXPIRED ---` report with a stack trace per stall of the
//! executor, none while it is healthy, none once the period is 0, and a server that goes on
//! serving. The report's lines are compared in shape (pid, time and addresses differ). Also
//! crash-log-enabled: the crash report on a fatal signal, or none; a daemon's pidfile removed
//! when it crashes or panics.

mod common;

use std::time::Duration;

use common::{info_field, wait_until, RedisServer, Server, TestServer};

const EXPIRED: &str = "--- WATCHDOG TIMER EXPIRED ---";

fn reports(s: &Server) -> usize {
    s.log().matches(EXPIRED).count()
}

/// The report's skeleton: the lines that are not stack frames, with the pid and time taken out.
fn report_shape(log: &str) -> Vec<String> {
    let start = log.find(EXPIRED).expect("a report");
    // The report opens on the line before (the handler's prefix, then the message's newline).
    let start = log[..start - 1].rfind('\n').map_or(0, |i| i + 1);
    let mut out = Vec::new();
    for line in log[start..].lines() {
        let frame = line.ends_with(']') && line.contains("[0x");
        if frame {
            continue;
        }
        let line = match line.find(":signal-handler (") {
            Some(i) => {
                assert!(line[..i].bytes().all(|b| b.is_ascii_digit()), "{line:?}");
                let rest = &line[i..];
                let close = rest.find(") ").expect("time closes");
                assert!(rest[":signal-handler (".len()..close].bytes().all(|b| b.is_ascii_digit()), "{line:?}");
                format!("PID:signal-handler (TIME){}", &rest[close + 1..])
            }
            None => line.to_string(),
        };
        let last = line.ends_with("--------");
        out.push(line);
        if last {
            break;
        }
    }
    out
}

#[test]
fn period_floor_is_two_cron_periods() {
    for s in common::both_servers(&["--watchdog-period", "50"]) {
        let mut c = s.client();
        assert_eq!(
            c.cmd(&["CONFIG", "GET", "watchdog-period"]),
            b"*2\r\n$15\r\nwatchdog-period\r\n$3\r\n200\r\n",
            "{}",
            s.name
        );
        assert_eq!(c.cmd(&["CONFIG", "SET", "hz", "100"]), b"+OK\r\n");
        // Redis reads the hz its cron last applied (INFO's hz): wait for a tick to apply it.
        wait_until("hz 100 applied", || info_field(&mut c, "server", "hz") == "100");
        assert_eq!(c.cmd(&["CONFIG", "SET", "watchdog-period", "10"]), b"+OK\r\n");
        assert_eq!(
            c.cmd(&["CONFIG", "GET", "watchdog-period"]),
            b"*2\r\n$15\r\nwatchdog-period\r\n$2\r\n20\r\n",
            "{}",
            s.name
        );
        assert_eq!(c.cmd(&["CONFIG", "SET", "watchdog-period", "0"]), b"+OK\r\n");
        assert_eq!(
            c.cmd(&["CONFIG", "GET", "watchdog-period"]),
            b"*2\r\n$15\r\nwatchdog-period\r\n$1\r\n0\r\n",
            "{}",
            s.name
        );
    }
}

#[test]
fn a_stalled_executor_is_reported_once_per_stall() {
    let servers = common::both_servers(&["--enable-debug-command", "yes"]);
    let mut shapes = Vec::new();
    for s in &servers {
        let mut c = s.client();
        // A period well above the cron's, so a loaded machine's scheduling delays are no stall.
        assert_eq!(c.cmd(&["CONFIG", "SET", "watchdog-period", "1000"]), b"+OK\r\n");
        // Healthy: the cron feeds the watchdog, nothing is reported.
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(reports(s), 0, "{}: a report with no stall:\n{}", s.name, s.log());
        // One command of 2.5 s: one report (the timer is one-shot until the next cron tick).
        assert_eq!(c.cmd(&["DEBUG", "SLEEP", "2.5"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(reports(s), 1, "{}:\n{}", s.name, s.log());
        shapes.push(report_shape(&s.log()));
        // A second stall, a second report.
        assert_eq!(c.cmd(&["DEBUG", "SLEEP", "1.5"]), b"+OK\r\n");
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(reports(s), 2, "{}:\n{}", s.name, s.log());
        // Period 0: off.
        assert_eq!(c.cmd(&["CONFIG", "SET", "watchdog-period", "0"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["DEBUG", "SLEEP", "1.5"]), b"+OK\r\n");
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(reports(s), 2, "{}:\n{}", s.name, s.log());
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    }
    let expected = [
        "PID:signal-handler (TIME) ",
        EXPIRED,
        "",
        "------ STACK TRACE ------",
        "EIP:",
        "",
        "Backtrace:",
        "PID:signal-handler (TIME) --------",
    ];
    for shape in &shapes {
        assert_eq!(shape, &expected);
    }
}

/// A replica loading a slow master's snapshot from the socket (repl-diskless-load on-empty-db)
/// runs no cron tick until the load ends, as Redis's blocking load: the watchdog reports it,
/// after the load began, while INFO still says loading (integration/replication's "replica can
/// handle EINTR if use diskless load").
#[test]
fn a_replica_stuck_in_a_diskless_load_is_reported() {
    for real in [true, false] {
        let args = ["--enable-debug-command", "yes"];
        let (master, replica) = if real {
            (RedisServer::with_args(&args), RedisServer::with_args(&args))
        } else {
            (TestServer::with_args(&args), TestServer::with_args(&args))
        };
        let mut m = master.client();
        let mut r = replica.client();
        for cmd in [
            // 10 MB: Redis answers clients every 2 MB it loads (INFO below).
            &["DEBUG", "POPULATE", "100000", "key", "100"][..],
            &["CONFIG", "SET", "rdbcompression", "no"],
            &["CONFIG", "SET", "repl-diskless-sync", "yes"],
            &["CONFIG", "SET", "repl-diskless-sync-delay", "0"],
            // 100 us a key: the snapshot takes 10 s to arrive.
            &["CONFIG", "SET", "rdb-key-save-delay", "100"],
        ] {
            assert_eq!(m.cmd(cmd), b"+OK\r\n", "{}", master.name);
        }
        assert_eq!(r.cmd(&["CONFIG", "SET", "repl-diskless-load", "on-empty-db"]), b"+OK\r\n");
        assert_eq!(r.cmd(&["CONFIG", "SET", "watchdog-period", "1000"]), b"+OK\r\n");
        let port = master.port.to_string();
        assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
        let loading_at = |log: &str| log.find("MASTER <-> REPLICA sync: Loading DB in memory");
        let name = replica.name;
        wait_until(&format!("{name}: the replica loads"), || loading_at(&replica.log()).is_some());
        wait_until(&format!("{name}: a watchdog report after the load began"), || {
            let log = replica.log();
            loading_at(&log).is_some_and(|at| log[at..].contains(EXPIRED))
        });
        let mut r = replica.client();
        assert_eq!(info_field(&mut r, "persistence", "loading"), "1", "{}", replica.name);
        assert_eq!(m.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]), b"+OK\r\n");
    }
}

/// crash-log-enabled: DEBUG SEGFAULT writes Redis's crash report ("crashed by signal") to the
/// log, or with the option off (at startup or by CONFIG SET) none, the process dying of the
/// signal either way. Compared with Redis.
#[test]
fn crash_log_enabled_decides_whether_a_crash_is_reported() {
    let mut seen = Vec::new();
    for real in [true, false] {
        for (start, set) in [("yes", None), ("no", None), ("yes", Some("no")), ("no", Some("yes"))] {
            let args = ["--enable-debug-command", "yes", "--crash-log-enabled", start];
            let mut server = if real { RedisServer::with_args(&args) } else { TestServer::with_args(&args) };
            let mut c = server.client();
            if let Some(v) = set {
                c.cmd(&["CONFIG", "SET", "crash-log-enabled", v]);
            }
            let _ = c.send_raw(b"DEBUG SEGFAULT\r\n");
            let status = server.wait_exit(Duration::from_secs(10)).expect("the server died");
            let signal = std::os::unix::process::ExitStatusExt::signal(&status);
            let reported = server.log().contains("crashed by signal: 11");
            seen.push(format!("start {start}, set {set:?}: signal {signal:?}, reported {reported}"));
        }
    }
    let (redis, ferrodis) = seen.split_at(4);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
    assert!(redis[0].ends_with("reported true") && redis[1].ends_with("reported false"), "{redis:?}");
}

/// A daemonized server that crashes (DEBUG SEGFAULT, with the crash report) or panics (DEBUG
/// PANIC) removes its pidfile on the way down, as Redis's bugReportEnd does; compared with Redis.
#[test]
fn a_daemon_that_crashes_removes_its_pidfile() {
    let redis = common::redis_server_bin();
    let mut seen = Vec::new();
    for bin in [redis.as_str(), env!("CARGO_BIN_EXE_ferrodis-server")] {
        for command in ["DEBUG SEGFAULT", "DEBUG PANIC"] {
            let dir = std::env::temp_dir().join(format!("ferrodis-daemon-crash-{}-{}", std::process::id(), seen.len()));
            std::fs::create_dir_all(&dir).unwrap();
            let pidfile = dir.join("server.pid");
            let port = common::free_port().to_string();
            let d = dir.to_string_lossy().into_owned();
            let status = std::process::Command::new(bin)
                .args(["--port", &port, "--bind", "127.0.0.1", "--dir", &d, "--save", ""])
                .args(["--daemonize", "yes", "--pidfile", &pidfile.to_string_lossy()])
                .args(["--logfile", &format!("{d}/server.log"), "--enable-debug-command", "yes"])
                .status()
                .expect("start the server");
            assert!(status.success(), "{bin}: daemonize");
            wait_until("the pidfile", || std::fs::read_to_string(&pidfile).is_ok_and(|p| p.ends_with('\n')));
            let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
            // Running, and not a zombie its parent (not us: it daemonized) has yet to reap.
            let alive = || {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
            };
            let mut c = common::Client::connect(port.parse().unwrap());
            let _ = c.send_raw(format!("{command}\r\n").as_bytes());
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while alive() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if alive() {
                // SAFETY: kill(2) takes no pointers.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("{bin}: still running after {command}");
            }
            seen.push(format!("{command}: pidfile left {}", pidfile.exists()));
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let (redis, ferrodis) = seen.split_at(2);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
    assert!(redis.iter().all(|s| s.ends_with("false")), "{redis:?}");
}

/// The lines of the first bug report in `log` that are not stack frames or stack words, with
/// the pid and time taken out and `fd=`, addresses and register values masked.
fn bug_report_shape(log: &str) -> Vec<String> {
    let start = log.find("=== REDIS BUG REPORT START").expect("a bug report");
    // Redis's report may fault part-way on some machines (its handler is reset by then, so the
    // process dies without the end line): the shape is taken up to where the log stops.
    let end = log[start..].find("=== REDIS BUG REPORT END").map_or(log.len(), |i| start + i);
    let mut out = Vec::new();
    for line in log[start..end].lines() {
        let frame = line.ends_with(']') && line.contains("[0x");
        let stack_word = line.contains(") -> ");
        if frame || stack_word || line.is_empty() {
            continue;
        }
        // `pid:M dd Mon yyyy hh:mm:ss.mmm # message` keeps the mark and the message.
        let line = match line.split_once(" # ") {
            Some((head, msg)) if head.contains(':') => format!("# {msg}"),
            _ => line.to_string(),
        };
        // Hex words (addresses, registers) and descriptor numbers differ run to run.
        let mut masked = String::new();
        let mut rest = line.as_str();
        while let Some(i) = rest.find(|c: char| c.is_ascii_alphanumeric()) {
            let (head, tail) = rest.split_at(i);
            let len = tail.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(tail.len());
            let word = &tail[..len];
            let hex = word.len() >= 8 && word.chars().all(|c| c.is_ascii_hexdigit());
            let descriptor = (masked.clone() + head).ends_with("fd=");
            masked.push_str(head);
            masked.push_str(if hex || word.starts_with("0x") || descriptor { "N" } else { word });
            rest = &tail[len..];
        }
        masked.push_str(rest);
        out.push(masked);
    }
    out
}

/// The crash report on DEBUG SEGFAULT, as Redis writes it: a real fault (si_code 2, the
/// faulting address, no "Killed by PID"), the instruction it ran, the stack trace and the
/// registers. Redis's extra sections (INFO, CLIENT LIST, CONFIG DEBUG, the memory test, the
/// code around EIP) are left out of the comparison: Ferrodis's handler does not write them.
#[test]
fn a_crash_report_shows_the_fault_the_stack_and_the_registers() {
    let mut seen = Vec::new();
    for real in [true, false] {
        let args = ["--enable-debug-command", "yes", "--crash-memcheck-enabled", "no"];
        let mut server = if real { RedisServer::with_args(&args) } else { TestServer::with_args(&args) };
        let _ = server.client().send_raw(b"DEBUG SEGFAULT\r\n");
        server.wait_exit(Duration::from_secs(10)).expect("the server died");
        let shape = bug_report_shape(&server.log());
        let upto = shape.iter().position(|l| l.starts_with("# (") || l == "------ INFO OUTPUT ------");
        let shape: Vec<String> =
            shape[..upto.unwrap_or(shape.len())].iter().filter(|l| !l.starts_with("# ferrodis ")).cloned().collect();
        seen.push(shape);
    }
    assert_eq!(seen[1], seen[0], "ferrodis (left) against redis");
    assert!(seen[0].contains(&"------ REGISTERS ------".to_string()), "{:?}", seen[0]);
    assert!(seen[0].iter().any(|l| l == "# Redis 7.0.15 crashed by signal: 11, si_code: 2"), "{:?}", seen[0]);
}

/// DEBUG ASSERT: serverAssertWithInfo's report (the client and object context, the failed
/// expression) and the end by abort(); compared with Redis line by line, the source file and
/// line of the assertion aside.
#[test]
fn debug_assert_reports_the_client_context_like_redis() {
    use std::os::unix::process::ExitStatusExt;
    let mut seen = Vec::new();
    for real in [true, false] {
        let args = ["--enable-debug-command", "yes", "--crash-memcheck-enabled", "no"];
        let mut server = if real { RedisServer::with_args(&args) } else { TestServer::with_args(&args) };
        let _ = server.client().send_raw(b"*2\r\n$5\r\ndebug\r\n$6\r\nassert\r\n");
        let status = server.wait_exit(Duration::from_secs(10)).expect("the server died");
        // Redis's abort() becomes SIGSEGV on machines where its crash report faults first
        // (see replication_sync's panicking replica).
        let signal = status.signal().map(|s| if real && s == 11 { 6 } else { s });
        let mut shape = bug_report_shape(&server.log());
        shape.retain(|l| !l.starts_with("------") && l != "Backtrace:" && l != "EIP:");
        let upto = shape.iter().position(|l| l.starts_with("# ==> ")).expect("the failed expression");
        let expr = shape[upto].rsplit_once(' ').map(|_| shape[upto].split_once('\'').unwrap().1.to_string());
        shape.truncate(upto);
        seen.push(format!("signal {signal:?}; {shape:?}; '{}", expr.unwrap()));
    }
    assert_eq!(seen[1], seen[0], "ferrodis (left) against redis");
    assert!(seen[0].contains("client->argv[1] = \\\"assert\\\" (refcount: 1)"), "{}", seen[0]);
}

/// A panic ends the server with Redis's panic report whichever thread runs the commands (the
/// I/O thread with io-threads 1, the executor's own with 4): by abort(), or with exit status 1
/// under use-exit-on-panic. DEBUG PANIC is a Rust panic in Ferrodis, so this is the panic hook's
/// path (`log::caught` tells it which panics are handled instead). Compared with Redis.
#[test]
fn a_panic_ends_the_server_with_a_report() {
    use std::os::unix::process::ExitStatusExt;
    let mut seen = Vec::new();
    for real in [true, false] {
        for (threads, exit_on_panic) in [("1", "no"), ("4", "no"), ("4", "yes")] {
            let args = ["--enable-debug-command", "yes", "--io-threads", threads, "--use-exit-on-panic", exit_on_panic];
            let mut server = if real { RedisServer::with_args(&args) } else { TestServer::with_args(&args) };
            let _ = server.client().send_raw(b"DEBUG PANIC\r\n");
            let status = server.wait_exit(Duration::from_secs(10)).expect("the server ended");
            let signal = status.signal().map(|s| if real && s == 11 { 6 } else { s });
            let log = server.log();
            seen.push(format!(
                "io-threads {threads}, use-exit-on-panic {exit_on_panic}: code {:?}, signal {signal:?}, report {}, stack {}",
                status.code(),
                log.contains("Guru Meditation: DEBUG PANIC called at Unix time"),
                log.contains("------ STACK TRACE ------"),
            ));
        }
    }
    let (redis, ferrodis) = seen.split_at(3);
    assert_eq!(ferrodis, redis, "ferrodis (left) against redis");
    assert!(redis[0].ends_with("code None, signal Some(6), report true, stack true"), "{redis:?}");
    assert!(redis[2].ends_with("code Some(1), signal None, report true, stack true"), "{redis:?}");
}
