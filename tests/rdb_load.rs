//! Startup RDB loading, end to end: every fixture in tests/fixtures/rdb (real files written by
//! Redis 2.4 to 7.4 and Valkey 8, each with its expected contents as JSON; see its README) is
//! loaded by the built server through the fixture library's own checker, and refused files must stop the server with
//! exit status 1 and a log line naming the file and offset.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

fn fixtures() -> PathBuf {
    common::rdb_fixtures()
}

#[test]
fn every_fixture_loads_with_the_expected_contents() {
    let server = env!("CARGO_BIN_EXE_ferrodis-server");
    let out = Command::new("python3")
        .arg(fixtures().join("check.py"))
        .args(["--server", server, "--timeout", "120"])
        .output()
        .expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // Group the report by fixture: "ok   name" / "FAIL name" then indented problem lines.
    let mut failures: Vec<(String, Vec<String>)> = Vec::new();
    let mut passed = 0;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("FAIL ") {
            failures.push((name.trim().to_string(), Vec::new()));
        } else if line.starts_with("ok ") {
            passed += 1;
        } else if let Some(problem) = line.strip_prefix("     ") {
            if let Some(f) = failures.last_mut() {
                f.1.push(problem.to_string());
            }
        }
    }
    assert!(passed > 20, "the checker ran too few fixtures:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    if let Some((name, problems)) = failures.first() {
        panic!("{name} failed:\n{}\n\nfull report:\n{text}", problems.join("\n"));
    }
}

/// Starts the server on `file` copied as dump.rdb; returns (exit status, log) once it exits.
fn run_on(file: &[u8], port: u16) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("ferrodis-rdbload-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dump.rdb"), file).unwrap();
    let log = dir.join("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrodis-server"))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--dir"])
        .arg(&dir)
        .arg("--logfile")
        .arg(&log)
        .spawn()
        .unwrap();
    let status = common::exit_code_within(&mut child, Duration::from_secs(20));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (status, text)
}

#[test]
fn corrupt_and_truncated_files_stop_startup() {
    let full: PathBuf = fixtures().join("redis-7.0.15-full.rdb");
    let bytes = std::fs::read(full).unwrap();
    // Truncated: cut in the middle of the keys.
    let (status, log) = run_on(&bytes[..bytes.len() / 2], common::free_port());
    assert_eq!(status, Some(1), "{log}");
    assert!(log.contains("Internal error in RDB reading offset") && log.contains("end of file"), "{log}");
    assert!(log.contains("Terminating server after rdb file reading failure."), "{log}");
    // A flipped byte in the body is caught by the checksum at the latest.
    let mut flipped = bytes.clone();
    let at = bytes.len() - 100;
    flipped[at] ^= 0x55;
    let (status, log) = run_on(&flipped, common::free_port());
    assert_eq!(status, Some(1), "{log}");
    // A newer format version.
    let mut newer = bytes.clone();
    newer[5..9].copy_from_slice(b"0013");
    let (status, log) = run_on(&newer, common::free_port());
    assert_eq!(status, Some(1), "{log}");
    assert!(log.contains("Can't handle RDB format version 13"), "{log}");
}

/// Sink that keeps nothing: the reader alone is under test.
struct Discard;

impl ferrodis::rdb::load::Sink for Discard {
    fn select_db(&mut self, _db: u64) -> Result<(), String> {
        Ok(())
    }
    fn key(
        &mut self,
        _key: &[u8],
        _value: ferrodis::rdb::load::Decoded,
        _meta: ferrodis::rdb::load::KeyMeta,
    ) -> Result<(), String> {
        Ok(())
    }
    fn function(&mut self, _lib: ferrodis::functions::Library) -> Result<(), String> {
        Ok(())
    }
}

#[test]
fn damaged_files_are_errors_never_panics() {
    use ferrodis::rdb::load::{read_file, DecodeOpts};
    let opts = DecodeOpts::default();
    for name in ["redis-7.2.6-full.rdb", "redis-2.4.18-full.rdb", "redis-7.4.1-full.rdb", "redis-5.0.14-full.rdb"] {
        let bytes = std::fs::read(fixtures().join(name)).unwrap();
        assert!(read_file(&bytes[..], &mut Discard, &opts).is_ok(), "{name} must load");
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..60 {
            let mut damaged = bytes.clone();
            if round % 3 == 0 {
                damaged.truncate(rand() as usize % bytes.len());
            } else {
                for _ in 0..1 + round % 4 {
                    let at = rand() as usize % damaged.len();
                    damaged[at] = rand() as u8;
                }
            }
            // Either outcome is fine for a flipped byte inside a string; what matters is that
            // the reader returns (the checksum catches the rest on versions that have one).
            let _ = read_file(&damaged[..], &mut Discard, &opts);
        }
    }
}

/// One RESP command over a fresh line protocol exchange; returns the first reply line (or the
/// bulk body for `$` replies).
fn ask(stream: &mut std::net::TcpStream, args: &[&str]) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut req = format!("*{}\r\n", args.len());
    for a in args {
        req.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    if let Some(n) = line.strip_prefix('$').and_then(|n| n.trim().parse::<usize>().ok()) {
        let mut body = vec![0; n + 2];
        r.read_exact(&mut body).unwrap();
        return String::from_utf8_lossy(&body[..n]).into_owned();
    }
    line.trim_end().to_string()
}

#[test]
fn clients_see_loading_until_the_dataset_is_in() {
    // A file big enough that a debug build takes a while: 600k string keys, RDB 9, no RESIZEDB.
    let mut f = b"REDIS0009".to_vec();
    f.extend_from_slice(&[0xFE, 0]);
    for i in 0..600_000u32 {
        let k = format!("key:{i:07}");
        f.push(0);
        f.push(k.len() as u8);
        f.extend_from_slice(k.as_bytes());
        f.extend_from_slice(&[0xC2]);
        f.extend_from_slice(&i.to_le_bytes());
    }
    f.push(0xFF);
    f.extend_from_slice(&[0; 8]);
    let dir = std::env::temp_dir().join(format!("ferrodis-rdbloading-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("dump.rdb"), &f).unwrap();
    let port = common::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrodis-server"))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--dir"])
        .arg(&dir)
        .arg("--logfile")
        .arg(dir.join("log"))
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut conn = loop {
        if let Ok(c) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            break c;
        }
        assert!(Instant::now() < deadline, "server never listened");
        std::thread::sleep(Duration::from_millis(5));
    };
    conn.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut saw_loading = false;
    loop {
        let reply = ask(&mut conn, &["PING"]);
        if reply == "+PONG" {
            break;
        }
        assert_eq!(reply, "-LOADING Redis is loading the dataset in memory");
        if !saw_loading {
            saw_loading = true;
            // Commands flagged `loading` still run, and INFO shows the progress fields.
            let info = ask(&mut conn, &["INFO", "persistence"]);
            assert!(info.contains("loading:1") || info.contains("loading:0"), "INFO persistence during load: {info}");
            if info.contains("loading:1") {
                assert!(info.contains(&format!("loading_total_bytes:{}", f.len())), "{info}");
                assert!(info.contains("loading_loaded_perc:"), "{info}");
            }
            assert_eq!(ask(&mut conn, &["GET", "key:0000001"]), "-LOADING Redis is loading the dataset in memory");
        }
        assert!(Instant::now() < deadline, "the load never finished");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(ask(&mut conn, &["DBSIZE"]), ":600000");
    assert_eq!(ask(&mut conn, &["GET", "key:0000042"]), "42");
    let info = ask(&mut conn, &["INFO", "persistence"]);
    assert!(info.contains("loading:0") && info.contains("rdb_last_load_keys_loaded:600000"), "{info}");
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(log.contains("Done loading RDB, keys loaded: 600000, keys expired: 0."), "{log}");
    assert!(log.contains("DB loaded from disk: "), "{log}");
    // A debug build always takes long enough to be caught loading.
    if cfg!(debug_assertions) {
        assert!(saw_loading, "never saw -LOADING");
    }
}

/// "Ready to accept connections" (and the unix socket's line) come once the dataset is loaded,
/// after "DB loaded from disk", as in Redis: the test suite and supervisors read the log for
/// them. Both servers start from the same dump with a TCP port and a unix socket.
#[test]
fn ready_is_logged_once_the_dataset_is_loaded() {
    let redis = common::redis_server_bin();
    let mut seen = Vec::new();
    for bin in [redis.as_str(), env!("CARGO_BIN_EXE_ferrodis-server")] {
        let dir = std::env::temp_dir().join(format!("ferrodis-ready-{}-{}", std::process::id(), seen.len()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(fixtures().join("redis-7.0.15-full.rdb"), dir.join("dump.rdb")).unwrap();
        let port = common::free_port().to_string();
        let log = dir.join("log");
        let mut child = Command::new(bin)
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--dir"])
            .arg(&dir)
            .arg("--unixsocket")
            .arg(dir.join("sock"))
            .arg("--logfile")
            .arg(&log)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let marks =
            ["DB loaded from disk", "Ready to accept connections", "The server is now ready to accept connections at"];
        let order = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let order: Vec<&str> =
                text.lines().filter_map(|l| marks.iter().find(|m| l.contains(*m)).copied()).collect();
            if order.len() == marks.len() || Instant::now() > deadline {
                break order.join(" / ");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        seen.push(order);
    }
    assert_eq!(seen[1], seen[0], "ferrodis (left) against redis");
    assert_eq!(
        seen[0],
        "DB loaded from disk / Ready to accept connections / The server is now ready to accept connections at"
    );
}
