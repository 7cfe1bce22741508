//! Stock config files of the releases users come from start ferrodis-server unchanged: Redis 7.0.15,
//! 7.2, 7.4 and Valkey 8.0 (issue 17, item 6). Each file is rebuilt from the directive lists under
//! tests/fixtures/conf (see the README there) and run with port, dir, daemonize, pidfile and logfile
//! overridden on the command line, never by editing the file. Directives Redis 7.0 lacks answer
//! CONFIG GET by exact name but stay out of `CONFIG GET *`, and a directive no release knows is
//! refused with the same bytes real redis-server 7.0.15 prints.

mod common;

use common::{parse_value, show, Client, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RELEASES: &[&str] = &["redis-7.0", "redis-7.2", "redis-7.4", "valkey-8.0"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/conf")
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixtures().join(name)).unwrap_or_else(|e| panic!("read fixture {name}: {e}"))
}

/// The stock file of a release: a comment header (the stock files open with comments too), then
/// its uncommented lines with blank lines and comments between sections, as the real files have.
fn stock_file(release: &str) -> String {
    let mut out = format!("# {release} configuration file example.\n#\n# ./server /path/to/this.conf\n\n");
    for line in fixture(&format!("{release}.directives")).lines() {
        out.push_str("# A comment line, as before every directive of a stock file.\n");
        out.push_str(line);
        out.push_str("\n\n");
    }
    out
}

/// The `later-directives` lines as (release, directive line).
fn later_directives() -> Vec<(String, String)> {
    fixture("later-directives")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (release, line) = l.split_once(' ').expect("release and directive");
            (release.to_string(), line.to_string())
        })
        .collect()
}

fn scratch_dir(tag: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ferrodis-config-compat-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The real redis-server, when installed (the FATAL texts are compared with it).
fn real_redis() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FERRODIS_REDIS_SERVER") {
        return Some(PathBuf::from(p));
    }
    Some(PathBuf::from(common::REDIS_SERVER)).filter(|p| p.exists())
}

/// A server started from a config file, killed on drop.
struct Running {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Running {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn client(&self) -> Client {
        Client::connect(self.port)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The command-line overrides that make a stock file runnable here.
fn overrides(port: u16, dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy().into_owned();
    [
        "--port",
        &port.to_string(),
        "--dir",
        &d,
        "--daemonize",
        "no",
        "--pidfile",
        &format!("{d}/server.pid"),
        "--logfile",
        "",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Starts `bin` with the config text written to a file, and waits for PONG.
fn start_with_config(bin: &Path, tag: &str, config: &str) -> Running {
    let mut last = String::new();
    for _ in 0..5 {
        let dir = scratch_dir(tag);
        let conf = dir.join("stock.conf");
        std::fs::write(&conf, config).expect("write config");
        let port = common::free_port();
        let log = std::fs::File::create(dir.join("server.log")).expect("create log");
        let child = Command::new(bin)
            .arg(&conf)
            .args(overrides(port, &dir))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("clone log")))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let mut running = Running { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = running.child.try_wait() {
                last = format!("exited with {status}; log:\n{}", running.log());
                break;
            }
            if let Ok(mut c) = Client::try_connect(port) {
                if let Ok(reply) = c.try_cmd(&[b"PING"]) {
                    assert_eq!(reply, b"+PONG\r\n", "{tag}: PING answered {}", show(&reply));
                    return running;
                }
            }
            if Instant::now() > deadline {
                last = format!("no PONG in time; log:\n{}", running.log());
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // A port taken between free_port() and the bind: try another one.
        if !last.contains("Address already in use") {
            break;
        }
    }
    panic!("{tag}: {} did not start: {last}", bin.display());
}

fn ferrodis() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ferrodis-server"))
}

/// CONFIG GET's reply as (name, value) pairs.
fn config_get(c: &mut Client, pattern: &str) -> Vec<(String, String)> {
    let reply = c.cmd(&[b"CONFIG".as_slice(), b"GET", pattern.as_bytes()]);
    let Value::Agg(_, Some(items)) = parse_value(&reply) else { panic!("CONFIG GET {pattern}: {}", show(&reply)) };
    let text = |v: &Value| match v {
        Value::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("CONFIG GET {pattern}: not a bulk string: {other:?}"),
    };
    items.chunks(2).map(|p| (text(&p[0]), text(&p[1]))).collect()
}

/// A directive line's name and value as CONFIG GET shows it (quotes, where the line has them,
/// surround the whole value and hold no escapes).
fn shown_value(line: &str) -> (String, String) {
    let (name, value) = line.split_once(' ').expect("name and value");
    let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
    (name.to_string(), value.to_string())
}

#[test]
fn stock_files_of_every_release_start_and_serve() {
    let later: Vec<String> = later_directives().into_iter().map(|(_, l)| shown_value(&l).0).collect();
    for release in RELEASES {
        let server = start_with_config(&ferrodis(), release, &stock_file(release));
        let mut c = server.client();
        assert_eq!(c.cmd(&[b"SET".as_slice(), b"k", b"v"]), b"+OK\r\n", "{release}");
        assert_eq!(c.cmd(&[b"GET".as_slice(), b"k"]), b"$1\r\nv\r\n", "{release}");
        // Every stock line reads back as the file says (the overridden ones aside).
        let overridden = ["port", "dir", "daemonize", "pidfile", "logfile"];
        for line in fixture(&format!("{release}.directives")).lines() {
            let (name, value) = line.split_once(' ').expect("name and value");
            if overridden.contains(&name) || name == "client-output-buffer-limit" {
                continue;
            }
            let got = config_get(&mut c, name);
            let want = shown_value(line).1;
            let want = match name {
                "auto-aof-rewrite-min-size" => "67108864".to_string(),
                _ => want,
            };
            assert_eq!(got, vec![(name.to_string(), want)], "{release}: {line} ({value})");
        }
        // Names 7.0 lacks stay out of glob patterns, so `CONFIG GET *` is 7.0's.
        let all = config_get(&mut c, "*");
        for name in &later {
            assert!(!all.iter().any(|(n, _)| n == name), "{release}: CONFIG GET * lists {name}");
        }
        // Defaults everywhere (Valkey's replica-lazy-flush yes is acted on): nothing to warn about.
        let log = server.log();
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("not implemented yet")).collect();
        assert!(warnings.is_empty(), "{release}: warnings {warnings:?}");
    }
}

#[test]
fn debian_etc_redis_conf_starts() {
    // Debian's edited copy of 7.0.15's file, as `apt-get install redis-server` leaves it.
    let Ok(text) = std::fs::read_to_string("/etc/redis/redis.conf") else {
        eprintln!("skipped: /etc/redis/redis.conf is not installed");
        return;
    };
    let server = start_with_config(&ferrodis(), "debian", &text);
    assert_eq!(server.client().cmd(&[b"PING"]), b"+PONG\r\n");
}

#[test]
fn later_directives_answer_by_exact_name_only() {
    let mut config = stock_file("redis-7.2");
    let later = later_directives();
    for (_, line) in &later {
        config.push_str(line);
        config.push('\n');
    }
    config.push_str("loglevel nothing\n");
    let server = start_with_config(&ferrodis(), "later", &config);
    let mut c = server.client();
    for (release, line) in &later {
        let (name, value) = shown_value(line);
        assert_eq!(config_get(&mut c, &name), vec![(name.clone(), value)], "{release}: {line}");
        // Asked in another case, the reply keeps the client's spelling, as Redis does.
        let upper = name.to_ascii_uppercase();
        assert_eq!(config_get(&mut c, &upper).len(), 1, "{release}: {upper}");
    }
    assert_eq!(config_get(&mut c, "loglevel"), vec![("loglevel".into(), "nothing".into())]);
    // Patterns list none of them, and the 7.0 names they alias are still listed under 7.0's name.
    let cpu = config_get(&mut c, "*cpulist");
    let names: Vec<&str> = cpu.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["server_cpulist", "bio_cpulist", "aof_rewrite_cpulist", "bgsave_cpulist"]);
    assert!(config_get(&mut c, "locale-*").is_empty());
    assert!(config_get(&mut c, "set-max-*").iter().all(|(n, _)| n == "set-max-intset-entries"));
    // A bad loglevel still gets 7.0's list of values.
    assert_eq!(
        c.cmd(&[b"CONFIG".as_slice(), b"SET", b"loglevel", b"loud"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning\r\n"
    );
    // Modifiable ones can be set, as in their release; the value reads back.
    assert_eq!(c.cmd(&[b"CONFIG".as_slice(), b"SET", b"locale-collate", b"C"]), b"+OK\r\n");
    assert_eq!(config_get(&mut c, "locale-collate"), vec![("locale-collate".into(), "C".into())]);
    assert_eq!(
        c.cmd(&[b"CONFIG".as_slice(), b"SET", b"max-new-connections-per-cycle", b"0"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'max-new-connections-per-cycle') - argument must be between 1 and 1000 inclusive\r\n"
    );
    assert!(server.log().contains("not implemented yet: loglevel nothing"), "{}", server.log());
}

#[test]
fn non_default_later_directive_is_logged_once() {
    let config = format!("{}locale-collate C\nhide-user-data-from-log yes\n", stock_file("redis-7.4"));
    let server = start_with_config(&ferrodis(), "logged", &config);
    let log = server.log();
    for name in ["locale-collate", "hide-user-data-from-log"] {
        let n = log.matches(&format!("not implemented yet: {name} ")).count();
        assert_eq!(n, 1, "{name} warned {n} times; log:\n{log}");
    }
}

/// Runs a binary on a config that must be refused; returns (exit code, stdout, stderr).
fn refused(bin: &Path, config: &str) -> (Option<i32>, String, String) {
    let dir = scratch_dir("refused");
    let conf = dir.join("bad.conf");
    std::fs::write(&conf, config).expect("write config");
    let out = Command::new(bin)
        .arg(&conf)
        .args(overrides(common::free_port(), &dir))
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_directive_is_refused_like_redis() {
    let stock = fixture("redis-7.0.directives");
    let cases = [
        // No release knows these.
        "no-such-directive yes",
        "locale-collation \"\"",
        "hide-user-data-from-logs no",
        // A 7.0 directive with a bad value is untouched by the later additions.
        "loglevel loud",
    ];
    for bad in cases {
        let config = format!("{stock}{bad}\n");
        let line = stock.lines().count() + 1;
        let (code, _, err) = refused(&ferrodis(), &config);
        assert_eq!(code, Some(1), "{bad}: exit code; stderr:\n{err}");
        let reason = if bad.starts_with("loglevel") {
            "argument(s) must be one of the following: debug, verbose, notice, warning"
        } else {
            "Bad directive or wrong number of arguments"
        };
        let want = format!(
            "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line {line}\n>>> '{bad}'\n{reason}\n"
        );
        assert_eq!(err, want, "{bad}");
        if let Some(redis) = real_redis() {
            let (rcode, _, rerr) = refused(&redis, &config);
            assert_eq!((code, &err), (rcode, &rerr), "{bad}: ferrodis and {} differ", redis.display());
        }
    }
}

#[test]
fn real_redis_7_0_refuses_what_later_releases_added() {
    // Why this file exists: 7.0 itself stops at 7.2's first new line. Ferrodis accepts it.
    let Some(redis) = real_redis() else {
        eprintln!("skipped: redis-server is not installed");
        return;
    };
    let (code, _, err) = refused(&redis, &stock_file("redis-7.2"));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(">>> 'locale-collate \"\"'\nBad directive or wrong number of arguments\n"), "{err}");
}

/// The startup logo's fields that tools read (the art around them is each server's own), with
/// numbers blanked: Redis's test suite waits for "PID: n" in the log of a server it started.
fn logo_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| ["Running in ", "Port: ", "PID: "].iter().find_map(|f| l.find(f).map(|i| &l[i..])))
        .map(|field| field.chars().map(|c| if c.is_ascii_digit() { '9' } else { c }).collect())
        .collect()
}

#[test]
fn always_show_logo_prints_pid_and_port_like_redis() {
    let Some(redis) = real_redis() else { return };
    let config = "always-show-logo yes\n";
    let expected = logo_lines(&start_with_config(&redis, "logo-redis", config).log());
    assert!(expected.iter().any(|l| l.contains("PID: 9")), "redis log has no PID line: {expected:?}");
    let got = logo_lines(&start_with_config(&ferrodis(), "logo-ferrodis", config).log());
    assert_eq!(got, expected);
}

/// Values in a config file are read as Redis's loader reads them: a multi-argument directive
/// given one argument splits it again with sdssplitargs (unbalanced quotes there leave no
/// arguments), strtoll takes leading blanks but not a lone one, a base name has neither '/' nor
/// '\', a proc-title-template must expand to more than spaces. Each line is followed by an
/// unknown directive, so that both servers stop either at it (the line was taken) or at the line.
#[test]
fn directive_values_are_read_like_redis() {
    let Some(redis) = real_redis() else {
        eprintln!("skipped: redis-server is not installed");
        return;
    };
    let cases = [
        r#"save "\"unterminated""#,
        r#"save "3600 1""#,
        r#"save "\t900 1""#,
        r#"save "900 1\t""#,
        r#"latency-tracking-info-percentiles "\"50\" 99""#,
        r#"client-output-buffer-limit "\"normal\" 0 0 0""#,
        r#"dbfilename "a\\b.rdb""#,
        r#"appendfilename "a\\b.aof""#,
        r#"unixsocketperm " ""#,
        r#"unixsocketperm " 700""#,
        r#"proc-title-template " {title}""#,
        r#"proc-title-template "x {title} ""#,
        r#"proc-title-template "{server-mode}""#,
    ];
    for line in cases {
        let config = format!("{line}\nzzz-unknown 1\n");
        let ours = refused(&ferrodis(), &config);
        let theirs = refused(&redis, &config);
        assert_eq!((ours.0, &ours.2), (theirs.0, &theirs.2), "{line}: ferrodis and {} differ", redis.display());
    }
}
