//! The master side of SYNC for rdb-only readers: `redis-cli --rdb` against ferrodis produces a
//! file that the real Redis 7.0 loads with the same contents (checked by check.py against the
//! fixture's JSON), the `$<len>` and `$EOF:<mark>` framings are well formed, PSYNC answers
//! FULLRESYNC, REPLCONF's replies match Redis, and other clients are served during a transfer.

mod common;

use common::{show, Client, RedisServer, TestServer};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rdb");

/// ferrodis started on a copy of a fixture; killed on drop. (The shared harness treats the
/// LOADING replies of a background load as a failed start, so this waits for PONG itself.)
struct Loaded {
    child: std::process::Child,
    port: u16,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture_server(name: &str) -> Option<(Loaded, PathBuf)> {
    let src = Path::new(FIXTURES).join(format!("{name}.rdb"));
    if !src.exists() {
        panic!("missing: {} not present", src.display());
    }
    let dir = std::env::temp_dir().join(format!("ferrodis-sync-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::copy(&src, dir.join("dump.rdb")).expect("copy");
    for _ in 0..5 {
        let port = common::free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_ferrodis-server"))
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--dir"])
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn ferrodis");
        let mut s = Loaded { child, port };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = s.child.try_wait() {
                break;
            }
            if let Ok(mut c) = Client::try_connect(port) {
                if c.try_cmd(&[b"PING".as_slice()]).is_ok_and(|r| r == b"+PONG\r\n") {
                    return Some((s, dir));
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = s.child.kill();
    }
    panic!("ferrodis did not start on {name}");
}

fn check_py(json: &str, file: &Path) -> String {
    let o = Command::new("python3")
        .arg(format!("{FIXTURES}/check.py"))
        .args(["--server", "redis-server", "--expect", json])
        .arg(file)
        .output()
        .expect("run check.py");
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn redis_cli_rdb_gives_a_file_redis_loads() {
    if !Path::new("/usr/bin/redis-cli").exists() {
        panic!("missing: no redis-cli");
    }
    for name in ["redis-7.0.15-full", "redis-6.2.14-full"] {
        let Some((s, dir)) = fixture_server(name) else { return };
        let out = dir.join("got.rdb");
        let o = Command::new("redis-cli")
            .args(["-p", &s.port.to_string(), "--rdb"])
            .arg(&out)
            .output()
            .expect("run redis-cli");
        let log = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "redis-cli --rdb failed: {log}");
        assert!(log.contains("Transfer finished with success"), "{log}");
        let report = check_py(&format!("{FIXTURES}/{name}.json"), &out);
        assert!(report.trim_end().ends_with("1 passed, 0 failed"), "{name}: {report}");
        // The server is still fine, and left no temp file or child behind.
        assert!(Client::connect(s.port).cmd(&[b"DBSIZE".as_slice()]).starts_with(b":"));
        drop(s);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn read_all(c: &mut Client) -> Vec<u8> {
    let mut v = Vec::new();
    let _ = c.stream.read_to_end(&mut v);
    v
}

#[test]
fn framings_and_psync() {
    let s = TestServer::new();
    let mut c = s.client();
    c.cmd(&[b"SET".as_slice(), b"k", b"v"]);
    c.cmd(&[b"RPUSH".as_slice(), b"l", b"a", b"b"]);

    // No capa eof: `$<len>` then exactly that many bytes, then an rdb-only reader is closed.
    let mut c = s.client();
    assert_eq!(c.cmd(&[b"REPLCONF".as_slice(), b"rdb-only", b"1"]), b"+OK\r\n");
    c.send_raw(b"SYNC\r\n").expect("send");
    let d = read_all(&mut c);
    let nl = d.windows(2).position(|w| w == b"\r\n").expect("header");
    let len: usize = std::str::from_utf8(&d[1..nl]).expect("utf8").parse().expect("length");
    assert_eq!(d[0], b'$');
    assert_eq!(d.len(), nl + 2 + len, "{}", show(&d[..nl]));
    assert_eq!(&d[nl + 2..nl + 11], b"REDIS0010");
    let rdb = &d[nl + 2..];
    let crc = ferrodis::rdb::format::crc64(0, &rdb[..rdb.len() - 8]);
    assert_eq!(u64::from_le_bytes(rdb[rdb.len() - 8..].try_into().unwrap()), crc);
    let leftovers: Vec<_> = std::fs::read_dir(&s.dir)
        .expect("server dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
        .collect();
    assert!(leftovers.is_empty(), "spool file left behind: {leftovers:?}");

    // PSYNC: +FULLRESYNC <40 hex> 0, then the same framing.
    let mut c = s.client();
    assert_eq!(c.cmd(&[b"REPLCONF".as_slice(), b"rdb-only", b"1"]), b"+OK\r\n");
    c.send_raw(&common::encode(&[b"PSYNC".as_slice(), b"?", b"-1"])).expect("send");
    let d = read_all(&mut c);
    let line_end = d.windows(2).position(|w| w == b"\r\n").expect("line");
    let line = std::str::from_utf8(&d[..line_end]).expect("utf8");
    let parts: Vec<&str> = line.split(' ').collect();
    assert_eq!(parts.len(), 3, "{line}");
    assert_eq!(parts[0], "+FULLRESYNC");
    assert_eq!(parts[1].len(), 40);
    assert_eq!(parts[2], "0");
    assert_eq!(d[line_end + 2], b'$');

    // capa eof: `$EOF:<40 chars>` ... the same 40 chars at the very end. Functions only: no keys.
    let mut c = s.client();
    assert_eq!(c.cmd(&[b"REPLCONF".as_slice(), b"capa", b"eof"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"REPLCONF".as_slice(), b"rdb-filter-only", b"functions"]), b"+OK\r\n");
    assert_eq!(c.cmd(&[b"REPLCONF".as_slice(), b"rdb-only", b"1"]), b"+OK\r\n");
    c.send_raw(b"SYNC\r\n").expect("send");
    let d = read_all(&mut c);
    assert_eq!(&d[..5], b"$EOF:");
    let mark = &d[5..45];
    assert_eq!(&d[45..47], b"\r\n");
    assert_eq!(&d[d.len() - 40..], mark);
    let rdb = &d[47..d.len() - 40];
    assert_eq!(&rdb[..9], b"REDIS0010");
    let (dbs, keys, _functions) = walk(rdb);
    assert_eq!((dbs, keys), (0, 0), "a functions-only snapshot holds no db and no key");

    // Meanwhile the server keeps serving.
    assert_eq!(s.client().cmd(&[b"GET".as_slice(), b"k"]), b"$1\r\nv\r\n");
}

#[test]
fn replconf_replies_match_redis() {
    let r = RedisServer::new();
    let f = TestServer::new();
    let cases: &[&[&[u8]]] = &[
        &[b"REPLCONF"],
        &[b"REPLCONF", b"a"],
        &[b"REPLCONF", b"foo", b"bar"],
        &[b"REPLCONF", b"listening-port", b"abc"],
        &[b"REPLCONF", b"listening-port", b"6380"],
        &[b"REPLCONF", b"rdb-only", b"2"],
        &[b"REPLCONF", b"rdb-only", b"abc"],
        &[b"REPLCONF", b"rdb-only", b"1"],
        &[b"REPLCONF", b"RDB-ONLY", b"0"],
        &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
        &[b"REPLCONF", b"ip-address", b"1.2.3.4"],
        &[b"REPLCONF", b"rdb-filter-only", b"functions"],
        &[b"REPLCONF", b"rdb-filter-only", b"keys"],
        &[b"REPLCONF", b"rdb-filter-only", b""],
        &[b"SYNC", b"x"],
        &[b"PSYNC", b"a"],
        &[b"MULTI"],
        &[b"SYNC"],
        &[b"DISCARD"],
    ];
    let (mut rc, mut fc) = (r.client(), f.client());
    for argv in cases {
        assert_eq!(show(&fc.cmd(argv)), show(&rc.cmd(argv)), "{}", common::show_argv(argv));
    }
}

/// Walks a snapshot with ferrodis's own RDB reader: (SELECTDB records, keys, function libraries).
fn walk(rdb: &[u8]) -> (usize, usize, usize) {
    use ferrodis::rdb::load::{read_file, DecodeOpts, Decoded, KeyMeta, Limits, Sink};
    #[derive(Default)]
    struct Count(usize, usize, usize);
    impl Sink for Count {
        fn select_db(&mut self, _db: u64) -> Result<(), String> {
            self.0 += 1;
            Ok(())
        }
        fn key(&mut self, _key: &[u8], _value: Decoded, _meta: KeyMeta) -> Result<(), String> {
            self.1 += 1;
            Ok(())
        }
        fn function(&mut self, _lib: ferrodis::functions::Library) -> Result<(), String> {
            self.2 += 1;
            Ok(())
        }
    }
    let mut count = Count::default();
    let opts = DecodeOpts { limits: Limits::default(), drop_fields_expired_before: None, shallow: false };
    read_file(rdb, &mut count, &opts).expect("the snapshot reads back");
    (count.0, count.1, count.2)
}
