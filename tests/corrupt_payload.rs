//! RESTORE of the corrupt payloads from Redis 7.0's corrupt-dump suite: ferrodis must reply what
//! the real Redis 7.0 replies under the same sanitize-dump-payload setting (refusing what Redis
//! refuses, accepting what its shallow checks accept), log Redis's reason words, and stay up.
//! Startup loads of the suite's corrupt files log and exit as Redis does.

mod common;

use common::{show, RedisServer, Server, TestServer};
use std::process::Command;
use std::time::{Duration, Instant};

struct Case {
    name: &'static str,
    sanitize: &'static str,
    skip_checksum: bool,
    payload: &'static [u8],
    /// What ferrodis must have logged (Redis's words) after the reply.
    log: Option<&'static str>,
}

fn restore(s: &Server, c: &Case) -> Vec<u8> {
    let mut cl = s.client();
    cl.cmd(&[&b"CONFIG"[..], b"SET", b"sanitize-dump-payload", c.sanitize.as_bytes()]);
    if c.skip_checksum {
        cl.cmd(&[&b"DEBUG"[..], b"SET-SKIP-CHECKSUM-VALIDATION", b"1"]);
    }
    let reply = cl.cmd(&[&b"RESTORE"[..], b"key", b"0", c.payload, b"REPLACE"]);
    assert_eq!(cl.cmd(&["PING"]), b"+PONG\r\n", "{}: {} no longer answers", c.name, s.name);
    cl.cmd(&["DEL", "key"]);
    reply
}

const ARGS: &[&str] = &["--enable-debug-command", "yes", "--loglevel", "verbose"];

fn check(c: &Case) {
    let ours = TestServer::with_args(ARGS);
    let redis = RedisServer::with_args(ARGS);
    let expected = restore(&redis, c);
    let got = restore(&ours, c);
    assert_eq!(show(&got), show(&expected), "{}: RESTORE reply differs from Redis 7.0", c.name);
    if let Some(words) = c.log {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !ours.log().contains(words) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ours.log().contains(words), "{}: no '{words}' in the log:\n{}", c.name, ours.log());
    }
}

/// corrupt-dump.tcl: "corrupt payload: quicklist encoded_len is 0" (sanitize-dump-payload no).
#[test]
fn quicklist_node_of_length_0() {
    check(&Case {
        name: "quicklist_node_of_length_0",
        sanitize: "no",
        skip_checksum: false,
        payload: b"\x12\x01\x01\x00\x0a\x00\x8f\xc6\xc0\x57\x1c\x0a\xb3\x3c",
        log: None,
    });
}

/// corrupt-dump.tcl: "corrupt payload: fuzzer findings - stream bad lp_count" (sanitize-dump-payload yes).
#[test]
fn stream_bad_lp_count_sanitized() {
    check(&Case {
        name: "stream_bad_lp_count_sanitized",
        sanitize: "yes",
        skip_checksum: true,
        payload: b"\x0F\x01\x10\x00\x00\x01\x73\xDE\xDF\x7D\x9B\x00\x00\x00\x00\x00\x00\x00\x00\x40\x42\x42\x00\x00\
          \x00\x18\x00\x03\x01\x00\x01\x02\x01\x84\x69\x74\x65\x6D\x05\x85\x76\x61\x6C\x75\x65\x06\x00\x01\
          \x02\x01\x00\x01\x00\x01\x01\x01\x00\x01\x56\x01\x02\x01\x22\x01\x00\x01\x01\x01\x82\x5F\x31\x03\
          \x05\x01\x02\x01\x2C\x01\x00\x01\x01\x01\x02\x01\x05\x01\xFF\x03\x81\x00\x00\x01\x73\xDE\xDF\x7D\
          \xC7\x00\x01\x07\x6D\x79\x67\x72\x6F\x75\x70\x81\x00\x00\x01\x73\xDE\xDF\x7D\x9B\x00\x01\x00\x00\
          \x01\x73\xDE\xDF\x7D\x9B\x00\x00\x00\x00\x00\x00\x00\x00\xF9\x7D\xDF\xDE\x73\x01\x00\x00\x01\x01\
          \x05\x41\x6C\x69\x63\x65\xEB\x7D\xDF\xDE\x73\x01\x00\x00\x01\x00\x00\x01\x73\xDE\xDF\x7D\x9B\x00\
          \x00\x00\x00\x00\x00\x00\x00\x09\x00\xB2\xA8\xA7\x5F\x1B\x61\x72\xD5",
        log: Some("Stream listpack integrity check failed"),
    });
}

/// corrupt-dump.tcl: "corrupt payload: fuzzer findings - stream bad lp_count" (sanitize-dump-payload no).
#[test]
fn stream_bad_lp_count_unsanitized() {
    check(&Case {
        name: "stream_bad_lp_count_unsanitized",
        sanitize: "no",
        skip_checksum: true,
        payload: b"\x0F\x01\x10\x00\x00\x01\x73\xDE\xDF\x7D\x9B\x00\x00\x00\x00\x00\x00\x00\x00\x40\x42\x42\x00\x00\
          \x00\x18\x00\x03\x01\x00\x01\x02\x01\x84\x69\x74\x65\x6D\x05\x85\x76\x61\x6C\x75\x65\x06\x00\x01\
          \x02\x01\x00\x01\x00\x01\x01\x01\x00\x01\x56\x01\x02\x01\x22\x01\x00\x01\x01\x01\x82\x5F\x31\x03\
          \x05\x01\x02\x01\x2C\x01\x00\x01\x01\x01\x02\x01\x05\x01\xFF\x03\x81\x00\x00\x01\x73\xDE\xDF\x7D\
          \xC7\x00\x01\x07\x6D\x79\x67\x72\x6F\x75\x70\x81\x00\x00\x01\x73\xDE\xDF\x7D\x9B\x00\x01\x00\x00\
          \x01\x73\xDE\xDF\x7D\x9B\x00\x00\x00\x00\x00\x00\x00\x00\xF9\x7D\xDF\xDE\x73\x01\x00\x00\x01\x01\
          \x05\x41\x6C\x69\x63\x65\xEB\x7D\xDF\xDE\x73\x01\x00\x00\x01\x00\x00\x01\x73\xDE\xDF\x7D\x9B\x00\
          \x00\x00\x00\x00\x00\x00\x00\x09\x00\xB2\xA8\xA7\x5F\x1B\x61\x72\xD5",
        log: None,
    });
}

/// corrupt-dump.tcl: "corrupt payload: fuzzer findings - infinite loop" (sanitize-dump-payload no).
#[test]
fn stream_bad_entry_unsanitized() {
    check(&Case {
        name: "stream_bad_entry_unsanitized",
        sanitize: "no",
        skip_checksum: true,
        payload: b"\x0F\x01\x10\x00\x00\x01\x75\x3A\xA6\xD0\x93\x00\x00\x00\x00\x00\x00\x00\x00\x40\x42\x42\x00\x00\
          \x00\x18\x00\x03\x01\x00\x01\x02\x01\x84\x69\x74\x65\x6D\x05\x85\x76\x61\x6C\x75\x65\x06\x00\x01\
          \x02\x01\x00\x01\x00\x01\x01\x01\x00\x01\x05\x01\x02\x01\x00\x01\x01\x01\x01\x01\x82\x5F\x31\x03\
          \xFD\x01\x02\x01\x00\x01\x02\x01\x01\x01\x02\x01\x05\x01\xFF\x03\x81\x00\x00\x01\x75\x3A\xA6\xD0\
          \x93\x02\x01\x07\x6D\x79\x67\x72\x6F\x75\x70\x81\x00\x00\x01\x75\x3A\xA6\xD0\x93\x00\x01\x00\x00\
          \x01\x75\x3A\xA6\xD0\x93\x00\x00\x00\x00\x00\x00\x00\x00\x94\xD0\xA6\x3A\x75\x01\x00\x00\x01\x01\
          \x05\x41\x6C\x69\x63\x65\x94\xD0\xA6\x3A\x75\x01\x00\x00\x01\x00\x00\x01\x75\x3A\xA6\xD0\x93\x00\
          \x00\x00\x00\x00\x00\x00\x00\x09\x00\xC4\x09\xAD\x69\x7E\xEE\xA6\x2F",
        log: None,
    });
}

/// corrupt-dump.tcl: "corrupt payload: fuzzer findings - stream with no records" (sanitize-dump-payload no).
#[test]
fn stream_no_records_unsanitized() {
    check(&Case {
        name: "stream_no_records_unsanitized",
        sanitize: "no",
        skip_checksum: true,
        payload: b"\x0F\x01\x10\x00\x00\x01\x78\x4D\x55\x68\x09\x00\x00\x00\x00\x00\x00\x00\x00\x40\x42\x42\x00\x00\
          \x00\x18\x00\x02\x01\x01\x01\x02\x01\x84\x69\x74\x65\x6D\x05\x85\x76\x61\x6C\x75\x65\x06\x00\x01\
          \x02\x01\x00\x01\x00\x01\x01\x01\x00\x01\x05\x01\x03\x01\x3E\x01\x00\x01\x01\x01\x82\x5F\x31\x03\
          \x05\x01\x02\x01\x50\x01\x00\x01\x01\x01\x02\x01\x05\x23\xFF\x02\x81\x00\x00\x01\x78\x4D\x55\x68\
          \x59\x00\x01\x07\x6D\x79\x67\x72\x6F\x75\x70\x81\x00\x00\x01\x78\x4D\x55\x68\x47\x00\x01\x00\x00\
          \x01\x78\x4D\x55\x68\x47\x00\x00\x00\x00\x00\x00\x00\x00\x9F\x68\x55\x4D\x78\x01\x00\x00\x01\x01\
          \x05\x41\x6C\x69\x63\x65\x85\x68\x55\x4D\x78\x01\x00\x00\x01\x00\x00\x01\x78\x4D\x55\x68\x47\x00\
          \x00\x00\x00\x00\x00\x00\x00\x09\x00\xF1\xC0\x72\x70\x39\x40\x1E\xA9",
        log: None,
    });
}

/// corrupt-dump.tcl: "corrupt payload: hash empty zipmap" (sanitize-dump-payload no).
#[test]
fn hash_empty_zipmap() {
    check(&Case {
        name: "hash_empty_zipmap",
        sanitize: "no",
        skip_checksum: true,
        payload: b"\x09\x02\x00\xFF\x09\x00\xC0\xF1\xB8\x67\x4C\x16\xAC\xE3",
        log: Some("Zipmap integrity check failed"),
    });
}

/// corrupt-dump.tcl: "corrupt payload: stream with duplicate consumers" (sanitize-dump-payload no).
#[test]
fn stream_duplicate_consumers() {
    check(&Case {
        name: "stream_duplicate_consumers",
        sanitize: "no",
        skip_checksum: false,
        payload: b"\x0F\x00\x00\x00\x00\x01\x07\x6D\x79\x67\x72\x6F\x75\x70\x00\x00\x00\x02\x04\x6E\x61\x6D\x65\x2A\
          \x4C\xAA\x9A\x7D\x01\x00\x00\x00\x04\x6E\x61\x6D\x65\x2B\x4C\xAA\x9A\x7D\x01\x00\x00\x00\x0A\x00\
          \xCC\xED\x8C\xA7\x62\xEE\xC7\xC8",
        log: Some("Duplicate stream consumer detected"),
    });
}

/// corrupt-dump.tcl: "corrupt payload: fuzzer findings - lpFind invalid access" (sanitize-dump-payload no).
#[test]
fn hash_listpack_bad_entry_unsanitized() {
    check(&Case {
        name: "hash_listpack_bad_entry_unsanitized",
        sanitize: "no",
        skip_checksum: true,
        payload: b"\x10\x39\x39\x00\x00\x00\x14\x00\x06\x01\x06\x01\x03\x01\x82\x5F\x33\x03\x07\x01\x82\x5F\x37\x03\
          \x00\x01\x00\x01\x04\x01\x04\x01\x09\x01\x82\x5F\x39\x03\x05\x01\x82\x5F\x35\x03\x08\x01\x08\x01\
          \x01\x01\x82\x5F\x31\x03\x02\x01\xF0\x01\xFF\x0A\x00\x29\xD7\xE4\x52\x79\x7A\x95\x82",
        log: None,
    });
}

const ASSETS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rdb/assets");

/// Starts ferrodis on a copy of `asset` with `extra` arguments; returns (exit status or None if
/// it was still running after `wait`, stdout).
fn start_on(asset: &str, extra: &[&str], wait: Duration) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("ferrodis-corrupt-{}-{asset}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(format!("{ASSETS}/{asset}"), dir.join(asset)).unwrap();
    let out = dir.join("stdout");
    let port = common::free_port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrodis-server"))
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--loglevel", "verbose", "--dbfilename", asset])
        .args(extra)
        .arg("--dir")
        .arg(&dir)
        .stdout(std::fs::File::create(&out).unwrap())
        .spawn()
        .unwrap();
    let status = common::exit_code_within(&mut child, wait);
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    (status, text)
}

/// corrupt-dump.tcl: "load corrupted rdb with no CRC - #3505": the reason at warning level, the
/// check report, then Redis's "Terminating server after rdb file reading failure." and exit 1.
#[test]
fn corrupt_ziplist_file_terminates_the_server() {
    for sanitize in ["no", "yes"] {
        let (status, out) =
            start_on("corrupt_ziplist.rdb", &["--sanitize-dump-payload", sanitize], Duration::from_secs(20));
        assert_eq!(status, Some(1), "{out}");
        assert_eq!(out.matches("Terminating server after rdb file reading failure.").count(), 1, "{out}");
        assert!(out.lines().filter(|l| l.contains("integrity check failed")).count() > 1, "{out}");
        assert!(out.contains("Internal error in RDB reading offset"), "{out}");
    }
}

/// corrupt-dump.tcl: "load corrupted rdb with empty keys": each skipped empty key is named, and
/// the summary counts them, at warning level as in Redis.
#[test]
fn empty_keys_are_named_when_skipped() {
    for sanitize in ["no", "yes"] {
        let (status, out) =
            start_on("corrupt_empty_keys.rdb", &["--sanitize-dump-payload", sanitize], Duration::from_secs(2));
        assert_eq!(status, None, "the server exited: {out}");
        for key in [
            "set",
            "list_quicklist",
            "list_quicklist_empty_ziplist",
            "list_ziplist",
            "hash",
            "hash_ziplist",
            "zset",
            "zset_ziplist",
            "zset_listpack",
        ] {
            let line = format!("# rdbLoadObject skipping empty key: {key}\n");
            assert!(out.contains(&line), "no '{line}' in:\n{out}");
        }
        assert!(out.contains("# Done loading RDB, keys loaded: 0, keys expired: 0, empty keys skipped: 9."), "{out}");
    }
}
