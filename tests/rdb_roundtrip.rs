//! Round trip out: every loadable fixture of tests/fixtures/rdb is loaded into ferrodis, saved
//! again with `rdb-version 10` (and 9), and the file ferrodis wrote is loaded into the real
//! redis-server 7.0 and compared with the fixture's expected contents by the fixture library's
//! checker (`check.py --expect`). `redis-check-rdb` must accept every file written at 9 and 10.
//! Fixtures holding what a version cannot express (hash field TTLs below 12, functions below 10)
//! must be refused by SAVE with the reason.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Client, TestServer};

struct Fixture {
    rdb: PathBuf,
    json: serde_like::Json,
}

/// Just enough of the fixture JSON for this test, read with plain string searches (the test
/// crate has no JSON dependency): whether the file must be refused, whether it has field TTLs or
/// functions, and its RDB version.
mod serde_like {
    pub struct Json {
        pub text: String,
    }

    impl Json {
        pub fn has(&self, needle: &str) -> bool {
            self.text.contains(needle)
        }

        pub fn rdb_version(&self) -> u32 {
            let at = self.text.find("\"rdb_version\":").expect("rdb_version");
            self.text[at + 14..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap()
        }
    }
}

fn fixtures() -> Vec<Fixture> {
    let dir = common::rdb_fixtures();
    let mut out = Vec::new();
    for sub in [dir.clone(), dir.join("assets")] {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&sub)
            .unwrap_or_else(|e| panic!("read {}: {e}", sub.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "rdb"))
            .collect();
        names.sort();
        for rdb in names {
            let Ok(text) = std::fs::read_to_string(rdb.with_extension("json")) else { continue };
            let json = serde_like::Json { text };
            if json.has("\"expect_load_error\": true") || json.has("\"module_type_name\"") {
                continue;
            }
            out.push(Fixture { rdb, json });
        }
    }
    assert!(out.len() > 20, "too few fixtures found in {}", dir.display());
    out
}

fn wait_loaded(c: &mut Client) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if c.cmd(&["PING"]) == b"+PONG\r\n" {
            return;
        }
        assert!(Instant::now() < deadline, "ferrodis did not finish loading");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn check_py(expect_json: &Path, saved: &Path) -> String {
    let out = Command::new("python3")
        .arg(common::rdb_fixtures().join("check.py"))
        .args(["--server", "redis-server", "--expect"])
        .arg(expect_json)
        .arg(saved)
        .output()
        .expect("python3 runs check.py");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn redis_check_rdb(file: &Path) -> (bool, String) {
    let out = Command::new("redis-check-rdb").arg(file).output().expect("redis-check-rdb runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Saves the loaded dataset at `version` into `out_dir/<version>.rdb`; Err(reply) when refused.
fn save_at(c: &mut Client, out_dir: &Path, version: &str) -> Result<PathBuf, String> {
    let name = format!("v{version}.rdb");
    assert_eq!(c.cmd(&["CONFIG", "SET", "rdb-version", version]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "SET", "dir", out_dir.to_str().unwrap()]), b"+OK\r\n");
    assert_eq!(c.cmd(&["CONFIG", "SET", "dbfilename", &name]), b"+OK\r\n");
    let reply = c.cmd(&["SAVE"]);
    if reply != b"+OK\r\n" {
        return Err(String::from_utf8_lossy(&reply).into_owned());
    }
    Ok(out_dir.join(name))
}

#[test]
fn fixtures_saved_at_rdb_10_load_into_redis_7_0_with_the_same_contents() {
    let mut report = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for fx in fixtures() {
        let name = fx.rdb.file_name().unwrap().to_string_lossy().into_owned();
        let load_dir = std::env::temp_dir().join(format!("ferrodis-roundtrip-{}-{name}", std::process::id()));
        let out_dir = load_dir.join("out");
        std::fs::create_dir_all(&out_dir).unwrap();
        std::fs::copy(&fx.rdb, load_dir.join("dump.rdb")).unwrap();
        let server = TestServer::with_args(&[
            "--dir",
            load_dir.to_str().unwrap(),
            "--dbfilename",
            "dump.rdb",
            "--enable-protected-configs",
            "yes",
        ]);
        let mut c = server.client();
        wait_loaded(&mut c);

        let field_ttls = fx.json.has("\"field_expire_at_ms\"");
        let functions = fx.json.has("\"library_name\"");
        for version in ["10", "9"] {
            let saved = save_at(&mut c, &out_dir, version);
            // What the version cannot express; SAVE must name one of them.
            let mut cannot = Vec::new();
            if field_ttls {
                cannot.push("hash field TTLs");
            }
            if functions && version == "9" {
                cannot.push("functions");
            }
            match (saved, cannot.is_empty()) {
                (Err(reply), false) => {
                    assert!(
                        reply.starts_with("-ERR rdb-version") && cannot.iter().any(|what| reply.contains(what)),
                        "{name}: SAVE at {version} refused with an unclear reason: {reply}"
                    );
                    continue;
                }
                (Err(reply), true) => panic!("{name}: SAVE at rdb-version {version} failed: {reply}"),
                (Ok(_), false) => panic!("{name}: SAVE at rdb-version {version} wrote a file without {cannot:?}"),
                (Ok(file), true) => {
                    let (ok, text) = redis_check_rdb(&file);
                    assert!(ok, "{name}: redis-check-rdb refuses our RDB {version} file:\n{text}");
                    if version == "10" {
                        let text = check_py(&fx.rdb.with_extension("json"), &file);
                        // Redis 7.0 has no consumer active-time (7.2): data from 7.2+ writers
                        // keeps it in our file's RDB 11+ form only.
                        let problems: Vec<&str> = text
                            .lines()
                            .filter(|l| l.starts_with("     "))
                            .filter(|l| !(fx.json.rdb_version() >= 11 && l.contains("active_time_ms: missing")))
                            .collect();
                        let passed = text.lines().any(|l| l.starts_with("ok ")) || problems.is_empty();
                        if !(passed && problems.is_empty()) {
                            failures.push(format!("{name}: Redis 7.0 loaded our file differently:\n{text}"));
                        }
                    }
                    report.push(format!("{name} v{version}"));
                }
            }
        }
        drop(server);
        let _ = std::fs::remove_dir_all(&load_dir);
    }
    println!("round-tripped: {}", report.join(", "));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
