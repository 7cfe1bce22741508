//! ferrodis-check-rdb end to end: it accepts every fixture a correct loader accepts, refuses the
//! corrupt and module ones with an offset and a reason, survives hostile lengths without huge
//! allocations, and `--convert-to` writes files that the real Redis 7.0 loads with the expected
//! contents (checked by tests/fixtures/rdb/check.py) or refuses what the target cannot express.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/rdb");

fn present() -> bool {
    let ok = Path::new(FIXTURES).join("MANIFEST.tsv").exists();
    if !ok {
        panic!("missing: {FIXTURES} not present");
    }
    ok
}

fn tool() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferrodis-check-rdb"))
}

fn run(args: &[&str]) -> Output {
    tool().args(args).output().expect("run ferrodis-check-rdb")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrodis-check-rdb-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("mkdir");
    d
}

fn fixtures() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in [PathBuf::from(FIXTURES), Path::new(FIXTURES).join("assets")] {
        for e in std::fs::read_dir(dir).expect("read fixtures") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "rdb") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

#[test]
fn accepts_every_good_fixture_and_refuses_the_bad_ones() {
    if !present() {
        return;
    }
    let mut checked = 0;
    for f in fixtures() {
        let json = std::fs::read_to_string(f.with_extension("json")).unwrap_or_default();
        let must_fail = json.contains("\"expect_load_error\": true");
        let module = f.to_string_lossy().contains("-module.");
        let o = run(&[&f.to_string_lossy()]);
        let out = text(&o);
        if must_fail || module {
            assert_eq!(o.status.code(), Some(1), "{} must be refused:\n{out}", f.display());
            assert!(out.contains("[offset "), "{}: no offset in\n{out}", f.display());
            if module {
                assert!(out.contains("test__rdb"), "{}: the module type is not named:\n{out}", f.display());
            }
        } else {
            assert_eq!(o.status.code(), Some(0), "{} must be accepted:\n{out}", f.display());
            assert!(out.contains("RDB file is OK"), "{out}");
        }
        checked += 1;
    }
    assert!(checked >= 36, "only {checked} fixtures found");
}

#[test]
fn report_of_the_7_0_fixture() {
    if !present() {
        return;
    }
    let o = run(&[&format!("{FIXTURES}/redis-7.0.15-full.rdb")]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    for want in [
        "RDB version 10",
        "[aux] redis-ver = 7.0.15",
        "[info] 132 keys, 12 with an expire",
        "[db 0] 120 keys, 10 expires",
        "[db 1] 8 keys, 1 expires",
        "[db 15] 4 keys, 1 expires",
        "[type] stream: 8",
        "[function] rdbfixture (LUA)",
        "[largest by elements] db 0 string str:lzf:big: 112500",
        "[largest by bytes]",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
}

#[test]
fn damaged_files_are_refused_with_an_offset() {
    if !present() {
        return;
    }
    let good = std::fs::read(format!("{FIXTURES}/redis-7.0.15-full.rdb")).expect("fixture");
    let dir = scratch("damaged");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", good[..good.len() / 2].to_vec(), "unexpected end of file"),
        (
            "crc",
            {
                let mut b = good.clone();
                let n = b.len();
                b[n - 1] ^= 1;
                b
            },
            "RDB CRC error",
        ),
        (
            "signature",
            {
                let mut b = good.clone();
                b[0] = b'X';
                b
            },
            "Wrong signature",
        ),
        (
            "version",
            {
                let mut b = good.clone();
                b[8] = b'9';
                b
            },
            "Can't handle RDB format version 19",
        ),
    ];
    for (name, bytes, reason) in cases {
        let p = dir.join(format!("{name}.rdb"));
        std::fs::write(&p, bytes).expect("write");
        let o = run(&[&p.to_string_lossy()]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {out}");
        assert!(out.contains("[offset ") && out.contains(reason), "{name}: {out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A string whose 64-bit length prefix claims 2^40 bytes: the reader must run out of input, not
/// try to allocate a terabyte. Run under a 512 MiB address-space limit so an attempt would fail
/// loudly (abort) instead of being lazily backed.
#[test]
fn a_length_of_2_pow_40_allocates_nothing_big() {
    let dir = scratch("huge");
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let head = b"REDIS0010".to_vec();
    // STRING value, key "k", value length 2^40 (LEN_64), 3 bytes present.
    let mut s = head.clone();
    s.extend_from_slice(&[0, 1, b'k', 0x81]);
    s.extend_from_slice(&(1u64 << 40).to_be_bytes());
    s.extend_from_slice(b"abc");
    cases.push(("string", s));
    // A LIST (type 1) claiming 2^40 elements.
    let mut l = head.clone();
    l.extend_from_slice(&[1, 1, b'k', 0x81]);
    l.extend_from_slice(&(1u64 << 40).to_be_bytes());
    l.extend_from_slice(&[1, b'x']);
    cases.push(("list", l));
    // An LZF string claiming 2^40 uncompressed bytes from 4.
    let mut z = head.clone();
    z.extend_from_slice(&[0, 1, b'k', 0xC3, 4, 0x81]);
    z.extend_from_slice(&(1u64 << 40).to_be_bytes());
    z.extend_from_slice(&[0, b'a', b'b', b'c']);
    cases.push(("lzf", z));
    // A hash (type 4) and a set (type 2) claiming 2^40 entries.
    for (name, t) in [("hash", 4u8), ("set", 2u8), ("zset", 5u8)] {
        let mut h = head.clone();
        h.extend_from_slice(&[t, 1, b'k', 0x81]);
        h.extend_from_slice(&(1u64 << 40).to_be_bytes());
        h.extend_from_slice(&[1, b'x', 1, b'y']);
        cases.push((name, h));
    }
    for (name, bytes) in cases {
        let p = dir.join(format!("{name}.rdb"));
        std::fs::write(&p, bytes).expect("write");
        let mut cmd = tool();
        cmd.arg(&p);
        // SAFETY: only setrlimit runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit { rlim_cur: 512 << 20, rlim_max: 512 << 20 };
                libc::setrlimit(libc::RLIMIT_AS, &lim);
                Ok(())
            });
        }
        let o = cmd.output().expect("run");
        let out = text(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: expected a clean refusal, got {:?}:\n{out}", o.status);
        assert!(out.contains("[offset "), "{name}: {out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn check_py(expect_json: &str, file: &Path) -> String {
    let o = Command::new("python3")
        .arg(format!("{FIXTURES}/check.py"))
        .args(["--server", "redis-server", "--expect", expect_json])
        .arg(file)
        .output()
        .expect("run check.py");
    text(&o)
}

fn have_redis() -> bool {
    let ok = Path::new("/usr/bin/redis-server").exists();
    if !ok {
        panic!("missing: no /usr/bin/redis-server");
    }
    ok
}

#[test]
fn convert_to_10_loads_in_redis_7_0() {
    if !present() || !have_redis() {
        return;
    }
    let dir = scratch("convert");
    for (src, json) in [("redis-6.2.14-full", "redis-6.2.14-full"), ("redis-7.4.1-empty", "redis-7.4.1-empty")] {
        let out = dir.join(format!("{src}-as-10.rdb"));
        let o = run(&[&format!("{FIXTURES}/{src}.rdb"), "--convert-to", "10", &out.to_string_lossy()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(&std::fs::read(&out).expect("converted")[..9], b"REDIS0010");
        let report = check_py(&format!("{FIXTURES}/{json}.json"), &out);
        assert!(report.trim_end().ends_with("1 passed, 0 failed"), "{src}: {report}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn convert_refuses_what_the_target_cannot_hold() {
    if !present() {
        return;
    }
    let dir = scratch("refuse");
    let out = dir.join("out.rdb");
    let o = run(&[&format!("{FIXTURES}/redis-7.4.1-full.rdb"), "--convert-to", "10", &out.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("hash field TTLs"), "{}", text(&o));
    assert!(!out.exists(), "nothing may be written");
    let o = run(&[&format!("{FIXTURES}/redis-7.0.15-full.rdb"), "--convert-to", "9", &out.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("functions"), "{}", text(&o));
    assert!(!out.exists(), "nothing may be written");
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0, "no temp file left behind");
    let o = run(&[&format!("{FIXTURES}/redis-7.0.15-full.rdb"), "--convert-to", "8", &out.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // 12 holds everything: the 7.4 file converts and reads back with the same report.
    let o = run(&[&format!("{FIXTURES}/redis-7.4.1-full.rdb"), "--convert-to", "12", &out.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let again = run(&[&out.to_string_lossy()]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let keys = |s: &str| s.lines().find(|l| l.starts_with("[info] ") && l.contains(" keys, ")).map(str::to_string);
    assert_eq!(keys(&text(&again)), keys(&text(&o)));
    // 9 without functions: the 6.2 file goes back to its own version.
    let o = run(&[&format!("{FIXTURES}/redis-6.2.14-full.rdb"), "--convert-to", "9", &out.to_string_lossy()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    if have_redis() {
        let report = check_py(&format!("{FIXTURES}/redis-6.2.14-full.json"), &out);
        assert!(report.trim_end().ends_with("1 passed, 0 failed"), "{report}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
