//! AOF persistence (Redis 7.0 multi-part AOF) compared with the real redis-server 7.0.15.
//!
//! Propagation: the same command script runs against Redis and ferrodis, both started with
//! `--appendonly yes --appendfsync always` (so every reply comes after its AOF write); then both
//! servers' current incr files (named by their manifests) are parsed into argv lists and must be
//! equal, except that absolute unix-ms timestamps (PXAT, PEXPIREAT, XCLAIM TIME, RESTORE ABSTTL)
//! may differ by a few seconds, and that members SPOP chose at random are masked. Groups: strings
//! and expiry rewrites, lazy expiry, active expiry, eviction, collections and pops, blocking
//! commands served at once and woken by another client, MULTI/EXEC and script wrapping with
//! SELECT emission, functions, streams with explicit IDs and consumer groups, keyspace commands.
//!
//! Files: manifest text and file names after start, after BGREWRITEAOF (with and without the RDB
//! preamble), after `CONFIG SET appendonly yes`; INFO persistence's AOF fields. Restarts: a mixed
//! dataset written through ferrodis, SIGKILL, restart on the same dir, DEBUG DIGEST equal to Redis
//! fed the same commands (also after a rewrite plus more writes); each server loads the other's
//! appendonlydir; truncated, garbage and dangling-manifest files (loaded or refused as Redis does,
//! same exit status, Redis's log phrase); old-style single `appendonly.aof` files (plain and with an
//! RDB preamble) migrated into appendonlydir.
//!
//! The expected side is always the real Redis at test time. With `FERRODIS_SELFCHECK=1` Redis also
//! stands in for ferrodis (every test must then pass: it checks the scripts and the harness).
//! `FERRODIS_KEEP_TEST_DIRS=1` keeps the server directories of a failing test.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{encode, parse_value, show, show_argv, split_args, Client, Value};

type Argv = Vec<Vec<u8>>;

// ---------------------------------------------------------------------------------------------
// Servers on a directory of our choosing (restarts need the same directory twice).
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Redis,
    Ferrodis,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Redis => "redis",
            Kind::Ferrodis => "ferrodis",
        }
    }

    fn binary(self) -> PathBuf {
        match self {
            Kind::Ferrodis if !selfcheck() => PathBuf::from(env!("CARGO_BIN_EXE_ferrodis-server")),
            _ => redis_binary(),
        }
    }
}

fn selfcheck() -> bool {
    std::env::var_os("FERRODIS_SELFCHECK").is_some_and(|v| v != "0")
}

fn redis_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("FERRODIS_REDIS_SERVER") {
        return PathBuf::from(p);
    }
    if Path::new(common::REDIS_SERVER).exists() {
        return PathBuf::from(common::REDIS_SERVER);
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .expect("redis-server is missing: the AOF tests need the real Redis 7.0 (apt-get install -y redis-server)")
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A temporary directory removed on drop (kept when a test fails and FERRODIS_KEEP_TEST_DIRS is set).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let p = std::env::temp_dir().join(format!("ferrodis-aof-{tag}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    /// A fresh sub-directory (a server's `dir`).
    fn sub(&self, name: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::create_dir_all(&p).expect("create sub dir");
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() && std::env::var_os("FERRODIS_KEEP_TEST_DIRS").is_some() {
            eprintln!("keeping {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server; killed (SIGKILL) on drop. Its stdout/stderr go to a log file next to `dir`.
struct Node {
    kind: Kind,
    port: u16,
    dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// What starting a server came to.
enum Launch {
    Up(Node),
    /// The process exited before answering PING.
    Exited {
        code: Option<i32>,
        log: String,
    },
}

fn cap_address_space(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only calls setrlimit.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: common::FERRODIS_MAX_ADDRESS_SPACE as libc::rlim_t,
                rlim_max: common::FERRODIS_MAX_ADDRESS_SPACE as libc::rlim_t,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
}

impl Node {
    /// Starts `kind` on `dir` with AOF on (`appendfsync always`), DEBUG enabled, no save points;
    /// `extra` is appended (later arguments win).
    fn launch(kind: Kind, dir: &Path, extra: &[&str]) -> Launch {
        for attempt in 0..5 {
            let port = common::free_port();
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let log =
                dir.with_file_name(format!("{}.{}.{n}.log", dir.file_name().unwrap().to_string_lossy(), kind.name()));
            let mut args: Vec<String> = [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--dir",
                &dir.to_string_lossy(),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--enable-debug-command",
                "yes",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(extra.iter().map(|s| s.to_string()));
            let out = std::fs::File::create(&log).expect("create log");
            let err = out.try_clone().expect("clone log");
            let mut cmd = Command::new(kind.binary());
            cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::from(out)).stderr(Stdio::from(err));
            if kind == Kind::Ferrodis && !selfcheck() {
                cap_address_space(&mut cmd);
            }
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", kind.name()));
            let mut node = Node { kind, port, dir: dir.to_path_buf(), log, child: Some(child) };
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Ok(Some(status)) = node.child.as_mut().unwrap().try_wait() {
                    node.child = None;
                    let text = node.log_text();
                    if text.contains("Address already in use") && attempt < 4 {
                        break;
                    }
                    return Launch::Exited { code: status.code(), log: text };
                }
                if let Ok(mut c) = Client::try_connect(port) {
                    if let Ok(r) = c.try_cmd(&["PING"]) {
                        if r == b"+PONG\r\n" {
                            return Launch::Up(node);
                        }
                    }
                }
                if Instant::now() > deadline {
                    panic!(
                        "{} on {} did not answer PING in time; log:\n{}",
                        kind.name(),
                        dir.display(),
                        node.log_text()
                    );
                }
                std::thread::sleep(Duration::from_millis(15));
            }
        }
        panic!("{}: no free port after 5 attempts", kind.name());
    }

    fn start(kind: Kind, dir: &Path, extra: &[&str]) -> Node {
        match Node::launch(kind, dir, extra) {
            Launch::Up(n) => n,
            Launch::Exited { code, log } => {
                panic!("{} on {} exited at startup (status {code:?}); log:\n{log}", kind.name(), dir.display())
            }
        }
    }

    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn client(&self) -> Client {
        Client::connect(self.port)
    }

    fn log_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    /// A crash: SIGKILL, then reap.
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Runs `f` for Redis and for ferrodis in parallel; returns (redis's result, ferrodis's result).
fn both<T: Send>(f: impl Fn(Kind) -> T + Sync) -> (T, T) {
    std::thread::scope(|scope| {
        let r = scope.spawn(|| f(Kind::Redis));
        let fe = scope.spawn(|| f(Kind::Ferrodis));
        let fe = fe.join();
        let r = r.join();
        match (r, fe) {
            (Ok(r), Ok(fe)) => (r, fe),
            (Err(e), _) => std::panic::resume_unwind(e),
            (_, Err(e)) => std::panic::resume_unwind(e),
        }
    })
}

// ---------------------------------------------------------------------------------------------
// AOF files.
// ---------------------------------------------------------------------------------------------

fn aof_dir(dir: &Path) -> PathBuf {
    dir.join("appendonlydir")
}

fn manifest_text(dir: &Path) -> String {
    let p = aof_dir(dir).join("appendonly.aof.manifest");
    String::from_utf8_lossy(&std::fs::read(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))).into_owned()
}

/// (file name, type) of each manifest line.
fn manifest_files(dir: &Path) -> Vec<(String, String)> {
    manifest_text(dir)
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let get = |k: &str| w.iter().position(|x| *x == k).and_then(|i| w.get(i + 1)).map(|s| s.to_string());
            (get("file").unwrap_or_default(), get("type").unwrap_or_default())
        })
        .collect()
}

/// The file names in appendonlydir, sorted (temp files included: they must not linger either).
fn aof_listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = match std::fs::read_dir(aof_dir(dir)) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => vec!["<no appendonlydir>".into()],
    };
    v.sort();
    v
}

/// The current (last) incr file named by the manifest.
fn incr_path(dir: &Path) -> PathBuf {
    let files = manifest_files(dir);
    let name = files
        .iter()
        .rev()
        .find(|(_, t)| t == "i")
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| panic!("no incr file in manifest of {}:\n{}", dir.display(), manifest_text(dir)));
    aof_dir(dir).join(name)
}

fn base_path(dir: &Path) -> PathBuf {
    let files = manifest_files(dir);
    let name = files
        .iter()
        .find(|(_, t)| t == "b")
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| panic!("no base file in manifest of {}:\n{}", dir.display(), manifest_text(dir)));
    aof_dir(dir).join(name)
}

/// Parses RESP multibulk commands; returns them and the length of the complete prefix.
fn parse_commands(bytes: &[u8]) -> (Vec<Argv>, usize) {
    fn line(b: &[u8], pos: &mut usize, lead: u8) -> Option<i64> {
        if *b.get(*pos)? != lead {
            return None;
        }
        let rel = b.get(*pos..)?.windows(2).position(|w| w == b"\r\n")?;
        let n = std::str::from_utf8(&b[*pos + 1..*pos + rel]).ok()?.parse().ok()?;
        *pos += rel + 2;
        Some(n)
    }
    fn one(b: &[u8], pos: &mut usize) -> Option<Argv> {
        let n = line(b, pos, b'*')?;
        let mut argv = Vec::new();
        for _ in 0..n {
            let len = line(b, pos, b'$')? as usize;
            let end = *pos + len;
            if b.len() < end + 2 || &b[end..end + 2] != b"\r\n" {
                return None;
            }
            argv.push(b[*pos..end].to_vec());
            *pos = end + 2;
        }
        Some(argv)
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let mut p = pos;
        match one(bytes, &mut p) {
            Some(a) => {
                out.push(a);
                pos = p;
            }
            None => break,
        }
    }
    (out, pos)
}

fn read_aof(path: &Path) -> Vec<Argv> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let (cmds, used) = parse_commands(&bytes);
    assert_eq!(
        used,
        bytes.len(),
        "{} is not a sequence of complete RESP commands after byte {used}: {}",
        path.display(),
        show(&bytes[used..])
    );
    cmds
}

fn incr_commands(dir: &Path) -> Vec<Argv> {
    read_aof(&incr_path(dir))
}

// ---------------------------------------------------------------------------------------------
// Comparison.
// ---------------------------------------------------------------------------------------------

/// Unix-ms timestamps of "now" (PXAT, PEXPIREAT, XCLAIM TIME...) generated a few ms apart on the
/// two servers compare equal within this tolerance.
const TIME_TOLERANCE_MS: i64 = 5_000;

fn as_now_ms(a: &[u8]) -> Option<i64> {
    let v: i64 = std::str::from_utf8(a).ok()?.parse().ok()?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as i64;
    ((now - 86_400_000 * 3650)..(now + 86_400_000 * 3650)).contains(&v).then_some(v)
}

fn same_arg(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    match (as_now_ms(a), as_now_ms(b)) {
        (Some(x), Some(y)) => (x - y).abs() <= TIME_TOLERANCE_MS,
        _ => false,
    }
}

fn same_argv(a: &Argv, b: &Argv) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_arg(x, y))
}

fn short_argv(a: &Argv) -> String {
    let clipped: Vec<Vec<u8>> = a
        .iter()
        .map(|x| {
            if x.len() > 120 {
                let mut v = x[..100].to_vec();
                v.extend_from_slice(format!("...({} bytes)", x.len()).as_bytes());
                v
            } else {
                x.clone()
            }
        })
        .collect();
    show_argv(&clipped)
}

fn render(cmds: &[Argv], mark: usize) -> String {
    let mut s = String::new();
    for (i, a) in cmds.iter().enumerate() {
        s.push_str(&format!("{}{i:4}: {}\n", if i == mark { ">>" } else { "  " }, short_argv(a)));
    }
    if cmds.is_empty() {
        s.push_str("      (nothing)\n");
    }
    s
}

/// A line diff (LCS) of the two command lists: `  ` both, `- ` Redis only, `+ ` ferrodis only.
fn diff(redis: &[Argv], ferrodis: &[Argv]) -> String {
    let (n, m) = (redis.len(), ferrodis.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if same_argv(&redis[i], &ferrodis[j]) {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = String::new();
    while i < n || j < m {
        if i < n && j < m && same_argv(&redis[i], &ferrodis[j]) {
            out.push_str(&format!("    {}\n", short_argv(&redis[i])));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("  + {}\n", short_argv(&ferrodis[j])));
            j += 1;
        } else {
            out.push_str(&format!("  - {}\n", short_argv(&redis[i])));
            i += 1;
        }
    }
    out
}

fn assert_same_commands(what: &str, redis: &[Argv], ferrodis: &[Argv]) {
    let same = redis.len() == ferrodis.len() && redis.iter().zip(ferrodis).all(|(a, b)| same_argv(a, b));
    if !same {
        panic!(
            "{what}: the AOF commands differ ({} from redis, {} from ferrodis; timestamps compare within \
             {TIME_TOLERANCE_MS} ms)\n`-` only in Redis's AOF, `+` only in ferrodis's:\n{}",
            redis.len(),
            ferrodis.len(),
            diff(redis, ferrodis)
        );
    }
}

/// Replaces the member of Redis-generated `SREM key member` (SPOP's propagation) with a mask:
/// SPOP picks members at random.
fn mask_spop(cmds: &[Argv]) -> Vec<Argv> {
    cmds.iter()
        .map(|a| {
            if a.len() == 3 && a[0] == b"SREM" {
                vec![a[0].clone(), a[1].clone(), b"<random member>".to_vec()]
            } else {
                a.clone()
            }
        })
        .collect()
}

fn assert_same_replies(what: &str, redis: &[(String, Vec<u8>)], ferrodis: &[(String, Vec<u8>)]) {
    assert_eq!(redis.len(), ferrodis.len(), "{what}: different numbers of recorded replies");
    for ((line, r), (_, f)) in redis.iter().zip(ferrodis) {
        assert!(r == f, "{what}: replies differ for `{line}`\n  redis:    {}\n  ferrodis: {}", show(r), show(f));
    }
}

// ---------------------------------------------------------------------------------------------
// Sessions: a script run against one node, replies recorded.
// ---------------------------------------------------------------------------------------------

struct Session<'a> {
    node: &'a Node,
    c: Client,
    replies: Vec<(String, Vec<u8>)>,
}

impl<'a> Session<'a> {
    fn new(node: &'a Node) -> Session<'a> {
        Session { node, c: node.client(), replies: Vec::new() }
    }

    /// Runs one line (split as redis-cli does) and records its reply.
    fn run(&mut self, line: &str) -> Vec<u8> {
        let r = self.c.line(line);
        self.replies.push((line.to_string(), r.clone()));
        r
    }

    /// Runs a binary argv and records its reply.
    fn cmd(&mut self, argv: &[&[u8]]) -> Vec<u8> {
        let r = self.c.cmd(argv);
        self.replies.push((show_argv(argv), r.clone()));
        r
    }

    /// Runs one line without recording the reply (random or time-dependent replies).
    fn quiet(&mut self, line: &str) -> Vec<u8> {
        self.c.line(line)
    }

    fn record(&mut self, what: &str, reply: Vec<u8>) {
        self.replies.push((what.to_string(), reply));
    }

    /// One command per line; blank lines and `#` comments skipped; `!sleep MS` sleeps;
    /// a leading `~ ` runs the line without recording its reply.
    fn script(&mut self, text: &str) {
        for raw in text.lines() {
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            if let Some(ms) = l.strip_prefix("!sleep ") {
                std::thread::sleep(Duration::from_millis(ms.trim().parse().expect("sleep ms")));
            } else if let Some(rest) = l.strip_prefix("~ ") {
                self.quiet(rest);
            } else {
                self.run(l);
            }
        }
    }

    fn other(&self) -> Client {
        self.node.client()
    }

    /// Waits until INFO clients shows `n` blocked clients.
    fn wait_blocked(&mut self, n: usize, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = info_field(&mut self.c, "clients", "blocked_clients");
            if now.parse::<usize>().ok() == Some(n) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: after `{what}` blocked_clients is {now}, never {n}",
                self.node.name()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends `line` on `client` without reading (it blocks), then waits for `n` blocked clients.
    fn block(&mut self, client: &mut Client, line: &str, n: usize) {
        let argv = split_args(line.as_bytes()).expect("balanced quotes");
        client.send_raw(&encode(&argv)).expect("send");
        self.wait_blocked(n, line);
    }

    /// Reads the reply of a client blocked earlier and records it.
    fn served(&mut self, client: &mut Client, what: &str) {
        let r = client.read_reply().unwrap_or_else(|e| panic!("{}: reply of {what}: {e}", self.node.name()));
        self.record(what, r);
    }
}

fn info_field(c: &mut Client, section: &str, field: &str) -> String {
    let r = c.cmd(&["INFO", section]);
    let text = String::from_utf8_lossy(&r).into_owned();
    text.lines().find_map(|l| l.strip_prefix(&format!("{field}:")).map(|v| v.trim().to_string())).unwrap_or_default()
}

fn bulk(reply: &[u8]) -> Vec<u8> {
    match parse_value(reply) {
        Value::Bulk(Some(b)) => b,
        _ => panic!("expected a bulk reply, got {}", show(reply)),
    }
}

/// DEBUG DIGEST's 40 hex digits (the reply type is compared in digest_matches_redis_without_aof).
fn digest(c: &mut Client) -> String {
    let r = c.cmd(&["DEBUG", "DIGEST"]);
    match parse_value(&r) {
        Value::Simple(b'+', d) | Value::Bulk(Some(d)) => String::from_utf8_lossy(&d).into_owned(),
        _ => panic!("DEBUG DIGEST replied {}", show(&r)),
    }
}

/// The dataset as text, one line per key (db, name, type, whether it has a TTL, contents read
/// back with the type's commands; streams with their groups and PELs, idle times left out).
/// ferrodis's DEBUG DIGEST covers strings only, so loads are compared with this; the digest is
/// compared on its own in digest_matches_redis_without_aof.
fn snapshot(c: &mut Client) -> Vec<String> {
    fn items(v: Value) -> Vec<Value> {
        match v {
            Value::Agg(_, Some(items)) => items,
            other => vec![other],
        }
    }
    fn text(v: &Value) -> String {
        match v {
            Value::Bulk(Some(b)) | Value::Simple(_, b) => show(b),
            Value::Bulk(None) => "nil".into(),
            Value::Int(i) => i.to_string(),
            Value::Agg(_, Some(items)) => format!("[{}]", items.iter().map(text).collect::<Vec<_>>().join(" ")),
            Value::Agg(_, None) => "nil".into(),
        }
    }
    let q = |c: &mut Client, argv: &[&[u8]]| parse_value(&c.cmd(argv));
    let mut out = Vec::new();
    for db in 0..16 {
        q(c, &[b"SELECT", db.to_string().as_bytes()]);
        let mut keys: Vec<Vec<u8>> = items(q(c, &[b"KEYS", b"*"]))
            .into_iter()
            .map(|v| match v {
                Value::Bulk(Some(k)) => k,
                other => panic!("KEYS item {other:?}"),
            })
            .collect();
        keys.sort();
        for k in keys {
            let k = k.as_slice();
            let t = text(&q(c, &[b"TYPE", k]));
            let ttl = match q(c, &[b"PTTL", k]) {
                Value::Int(-1) => "persistent",
                Value::Int(n) if n >= 0 => "volatile",
                _ => "gone",
            };
            let v = match t.as_str() {
                "\"string\"" => text(&q(c, &[b"GET", k])),
                "\"list\"" => text(&q(c, &[b"LRANGE", k, b"0", b"-1"])),
                "\"set\"" => {
                    let mut m: Vec<String> = items(q(c, &[b"SMEMBERS", k])).iter().map(text).collect();
                    m.sort();
                    m.join(" ")
                }
                "\"zset\"" => text(&q(c, &[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"])),
                "\"hash\"" => {
                    let flat = items(q(c, &[b"HGETALL", k]));
                    let mut pairs: Vec<String> =
                        flat.chunks(2).map(|p| format!("{}={}", text(&p[0]), text(&p[1]))).collect();
                    pairs.sort();
                    pairs.join(" ")
                }
                "\"stream\"" => {
                    let mut s = text(&q(c, &[b"XRANGE", k, b"-", b"+"]));
                    let info = items(q(c, &[b"XINFO", b"STREAM", k]));
                    for pair in info.chunks(2) {
                        let name = text(&pair[0]);
                        if ["last-generated-id", "max-deleted-entry-id", "entries-added", "length"]
                            .iter()
                            .any(|f| name.contains(f))
                        {
                            s.push_str(&format!(" {name}={}", text(&pair[1])));
                        }
                    }
                    for g in items(q(c, &[b"XINFO", b"GROUPS", k])) {
                        let g = items(g);
                        s.push_str(&format!(" group{}", text(&Value::Agg(b'*', Some(g.clone())))));
                        let name = match g.get(1) {
                            Some(Value::Bulk(Some(n))) => n.clone(),
                            other => panic!("XINFO GROUPS name {other:?}"),
                        };
                        for e in items(q(c, &[b"XPENDING", k, &name, b"-", b"+", b"1000"])) {
                            let e = items(e);
                            // id, consumer, idle (left out), delivery count
                            s.push_str(&format!(" pel({} {} {})", text(&e[0]), text(&e[1]), text(&e[3])));
                        }
                        for cons in items(q(c, &[b"XINFO", b"CONSUMERS", k, &name])) {
                            let cons = items(cons);
                            s.push_str(&format!(" consumer({} pending {})", text(&cons[1]), text(&cons[3])));
                        }
                    }
                    s
                }
                other => format!("<type {other}>"),
            };
            out.push(format!("db{db} {} {t} {ttl} {v}", show(k)));
        }
    }
    q(c, &[b"SELECT", b"0"]);
    out
}

fn assert_same_snapshot(what: &str, expected: &[String], got: &[String]) {
    if expected == got {
        return;
    }
    let i = expected.iter().zip(got).position(|(a, b)| a != b).unwrap_or(expected.len().min(got.len()));
    let clip = |s: Option<&String>| s.map(|s| s.chars().take(400).collect::<String>()).unwrap_or("(none)".into());
    panic!(
        "{what}: datasets differ ({} vs {} keys); first difference at key #{i}:\n  expected: {}\n  got:      {}",
        expected.len(),
        got.len(),
        clip(expected.get(i)),
        clip(got.get(i))
    );
}

/// Waits until no AOF rewrite is running or scheduled.
fn wait_rewrite_done(c: &mut Client, who: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = String::from_utf8_lossy(&c.cmd(&["INFO", "persistence"])).into_owned();
        let idle = r.contains("aof_rewrite_in_progress:0") && r.contains("aof_rewrite_scheduled:0");
        if idle {
            return;
        }
        assert!(Instant::now() < deadline, "{who}: AOF rewrite still running after 15 s:\n{r}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Result of one script run on both servers.
struct Outcome {
    redis: Vec<Argv>,
    ferrodis: Vec<Argv>,
    redis_replies: Vec<(String, Vec<u8>)>,
    ferrodis_replies: Vec<(String, Vec<u8>)>,
}

impl Outcome {
    fn assert_same(&self, what: &str) {
        assert_same_commands(what, &self.redis, &self.ferrodis);
        assert_same_replies(what, &self.redis_replies, &self.ferrodis_replies);
    }
}

/// Runs `scenario` on a fresh Redis and a fresh ferrodis (AOF on, `extra` appended) and collects
/// both incr files and the recorded replies.
fn differential(what: &str, extra: &[&str], scenario: impl Fn(&mut Session) + Sync) -> Outcome {
    let tmp = TempDir::new(what);
    let ((redis, redis_replies), (ferrodis, ferrodis_replies)) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), extra);
        let mut s = Session::new(&node);
        scenario(&mut s);
        let replies = std::mem::take(&mut s.replies);
        (incr_commands(&node.dir), replies)
    });
    Outcome { redis, ferrodis, redis_replies, ferrodis_replies }
}

// ---------------------------------------------------------------------------------------------
// Propagation tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn strings_and_expiry_rewrites() {
    let out = differential("strings", &[], |s| {
        s.script(
            r##"
            DEBUG SET-ACTIVE-EXPIRE 0
            set a 1
            SET b 2 EX 100
            SET c 3 PX 100000
            set d 4 exat 9999999999
            SET e 5 PXAT 9999999999000
            SET e 6 KEEPTTL
            SET e 7 GET
            SET e 8 EX 100 GET
            SET f 1 NX
            SET f 2 NX
            SET f 3 XX EX 50
            SET g 3 XX
            SET h 1 NX EX 10 GET
            SET h 2 KEEPTTL GET
            set x 1 pxat 9999999999000 get
            set x 1 pxat 9999999999000 nx
            set x 2 xx pxat 9999999999000
            set y 1 get get
            SET y v2 XX GET
            set y v3 get xx
            set y v4 keepttl nx
            SET y 1 EX 1 KEEPTTL
            SET y 1 ex 0
            setex se 100 v
            SETEX se2 -1 v
            psetex pse 100000 v
            set gx v
            getex gx ex 100
            getex gx px 100000
            getex gx exat 9999999999
            getex gx pxat 9999999999000
            getex gx
            getex gx persist
            getex gx persist
            getex nokey ex 10
            getex gx pxat 1000
            set gd v
            getdel gd
            getdel gd
            getset gs 1
            getset gs 2
            setnx gs 3
            setnx gs4 3
            msetnx m1 1 m2 2
            msetnx m1 1 m3 2
            mset a 1 b 2
            incrbyfloat fl 1.5
            incrbyfloat fl 1e3
            incrbyfloat fl 3.0e2
            incrbyfloat fl 1.1
            hincrbyfloat hf f 1.5
            hincrbyfloat hf f 1e2
            incr i
            incrby i 5
            decr i
            decrby i 2
            set k v
            expire k 100
            EXPIRE k 100 NX
            expire k 100 xx
            expire k 200 gt
            expire k 50 gt
            expire k 50 lt
            expire k 500 lt
            pexpire k 100000
            expireat k 9999999999
            pexpireat k 9999999999000
            expire nokey 100
            pexpireat nokey 1000
            set k2 v
            expire k2 -1
            set k3 v
            pexpireat k3 1000
            set k4 v
            expireat k4 1
            set k5 v
            expire k5 0
            set k6 v ex 100
            persist k6
            persist k6
            persist nokey
            set k7 v
            expire k7 100 nx
            expire k7 9223372036854775807
            del nokey1 nokey2
            unlink nokey1
            set d1 v
            del d1 nokey
            set d2 v
            unlink d2 nokey
            config set lazyfree-lazy-user-del yes
            set d3 v
            del d3
            config set lazyfree-lazy-user-del no
            config set lazyfree-lazy-expire yes
            set k8 v
            expire k8 -1
            set k9 v
            getex k9 pxat 1
            config set lazyfree-lazy-expire no
            set s hello
            setrange s 0 J
            setrange s 0 ""
            setrange nokey 0 ""
            setrange nokey2 2 x
            append s !
            append s ""
            setbit bits 7 1
            setbit bits 7 1
            setbit bits 100 0
            getbit bits 7
            bitfield bf set u8 0 255
            bitfield bf get u8 0
            bitfield bf incrby u8 0 1
            bitfield bf overflow fail incrby u8 0 300
            bitfield_ro bf get u8 0
            bitop and bd bits bf
            bitop or bd nokey
            bitop not bd2 nokey
            pfadd hll a b c
            pfadd hll a
            pfadd hll
            pfadd hll2
            pfcount hll
            pfcount hll
            pfadd hll d
            pfcount hll hll2
            pfmerge hm hll hll2
            pfmerge newhm
            get a
            mget a b nokey
            strlen s
            exists a
            publish ch msg
            config set maxmemory 0
            debug sleep 0
            "##,
        );
    });
    out.assert_same("strings and expiry");
}

/// The PEXPIREs give 10 ms, not 1: Redis turns an EXPIRE whose time has passed by the end of the
/// command into a DEL, and on a loaded machine 1 ms can pass inside the command.
#[test]
fn lazy_expiry_deletes() {
    let out = differential("lazy-expiry", &[], |s| {
        s.script(
            r##"
            DEBUG SET-ACTIVE-EXPIRE 0
            set le1 v px 1
            !sleep 20
            get le1
            set le2 v px 1
            !sleep 20
            set le2 w
            set le3 5 px 1
            !sleep 20
            incr le3
            rpush le4 a
            pexpire le4 10
            !sleep 20
            lpush le4 b
            sadd le5 a
            pexpire le5 10
            !sleep 20
            exists le5
            set le6 v px 1
            !sleep 20
            del le6
            set le7 v px 1
            !sleep 20
            expire le7 100
            set le8 v px 1
            !sleep 20
            ttl le8
            set le9 v px 1
            set le10 v px 1
            !sleep 20
            mget le9 le10 nokey
            set le11 v px 1
            !sleep 20
            multi
            get le11
            set x 1
            exec
            set le12 v px 1
            !sleep 20
            keys le12*
            dbsize
            set le13 v px 1
            !sleep 20
            eval "return redis.call('get','le13')" 0
            set le14 v px 1
            !sleep 20
            eval "redis.call('get','le14'); redis.call('set','q','1'); return 1" 0
            set le15 v px 1
            !sleep 20
            rename le15 newname
            set le16 v px 1
            !sleep 20
            getex le16 persist
            set le17 v px 1
            !sleep 20
            eval_ro "return redis.call('get','le17')" 0
            config set lazyfree-lazy-expire yes
            set lu1 v px 1
            !sleep 20
            get lu1
            set lu2 v px 1
            !sleep 20
            set lu2 w
            config set lazyfree-lazy-expire no
            select 4
            set ld v px 1
            !sleep 20
            get ld
            "##,
        );
    });
    out.assert_same("lazy expiry");
}

#[test]
fn active_expiry_deletes() {
    // One key per phase: the active cycle's order over several keys is hash-table order.
    let out = differential("active-expiry", &[], |s| {
        let wait_gone = |s: &mut Session| {
            let deadline = Instant::now() + Duration::from_secs(5);
            // DBSIZE counts keys the active cycle has not reclaimed yet and deletes nothing itself.
            while s.quiet("dbsize") != b":0\r\n" {
                assert!(Instant::now() < deadline, "{}: the active expire cycle never removed the key", s.node.name());
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        s.run("set ae1 v px 1");
        wait_gone(s);
        s.run("set after1 x");
        s.run("del after1");
        s.run("set ae2 v");
        // 10 ms, not 1: Redis turns an EXPIRE whose time has passed by the end of the command into
        // a DEL, and on a loaded machine 1 ms can pass inside the command.
        s.run("pexpire ae2 10");
        wait_gone(s);
        s.run("config set lazyfree-lazy-expire yes");
        s.run("set ae3 v px 1");
        wait_gone(s);
        s.run("set after2 x");
        s.run("del after2");
    });
    out.assert_same("active expiry");
}

#[test]
fn eviction_deletes() {
    let tmp = TempDir::new("eviction");
    let (redis, ferrodis) = both(|kind| {
        // Tenacity 100: no time limit on an eviction pass. Under the default 500 us, a loaded
        // machine stopped both servers' passes early (Redis kept a key; ours let the SET in as
        // eviction was still running, as Redis's EVICT_RUNNING does).
        let node = Node::start(
            kind,
            &tmp.sub(kind.name()),
            &["--maxmemory-policy", "allkeys-lru", "--maxmemory-eviction-tenacity", "100"],
        );
        let mut c = node.client();
        for i in 0..5 {
            assert_eq!(c.cmd(&["SET", &format!("ev{i}"), &"x".repeat(1000)]), b"+OK\r\n");
        }
        c.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
        // Whether eviction ran inside CONFIG SET (Redis) or before the next command, this write
        // finds everything evicted and is refused.
        let r = c.cmd(&["SET", "refused", "1"]);
        assert!(r.starts_with(b"-OOM"), "{}: expected -OOM, got {}", node.name(), show(&r));
        c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        assert_eq!(c.cmd(&["DBSIZE"]), b":0\r\n", "{}: not everything was evicted", node.name());
        c.cmd(&["SET", "after", "1"]);
        incr_commands(&node.dir)
    });
    // Eviction order is the policy's choice: compare as sorted lists.
    let sorted = |v: &[Argv]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    assert_same_commands("eviction (sorted)", &sorted(&redis), &sorted(&ferrodis));
    assert!(
        !ferrodis.iter().any(|a| a[0] == b"MULTI"),
        "ferrodis wrapped evictions:\n{}",
        render(&ferrodis, usize::MAX)
    );
    assert_eq!(ferrodis.last(), redis.last(), "the write after the evictions comes last");
}

#[test]
fn collections_and_pops() {
    let out = differential("collections", &[], |s| {
        s.script(
            r##"
            DEBUG SET-ACTIVE-EXPIRE 0
            sadd s a b c d e
            ~ spop s
            ~ spop s 2
            spop s 0
            ~ spop s 5
            spop nokey
            spop nokey 3
            sadd s2 a b c
            ~ spop s2 3
            sadd s3 a b c
            ~ spop s3 10
            sadd s4 1 2 3 4 5 6 7 8 9 10
            ~ spop s4 7
            sadd one a
            spop one
            ~ srandmember s4
            ~ srandmember s4 3
            sadd s5 1 2 3
            smove s5 s6 1
            smove s5 s6 nope
            srem s5 nope
            srem s5 2 nope
            sinterstore dst s5 s6
            sadd dst2 x
            sinterstore dst2 nokey
            sunionstore dst s5 s6
            sdiffstore dst s5 s6
            sintercard 1 s5
            rpush l a b c d e f
            lpop l
            rpop l
            lpop l 2
            rpop l 0
            rpop l 5
            lpop nokey 2
            rpush l2 a b
            lpop l2 2
            rpush l3 a b c
            lmpop 2 nokey l3 LEFT count 2
            lmpop 1 l3 right
            lmpop 1 l3 right
            rpush l3 a b c
            lmpop 1 l3 left count 10
            rpush l4 a b c
            lmove l4 l5 left right
            rpoplpush l4 l5
            lmove l4 l4 LEFT RIGHT
            lset l5 0 z
            linsert l5 before z y
            linsert l5 before nope y
            lrem l5 0 nope
            lrem l5 1 y
            ltrim l5 0 0
            ltrim l5 1 0
            lpushx nokey a
            rpushx l4 b
            lpos l4 b
            lrange l4 0 -1
            zadd z 1 a 2 b 3 c 4 d
            zpopmin z
            zpopmax z
            zpopmin z 5
            zadd z 1 a 2 b 3 c 4 d
            zmpop 1 z min count 2
            zmpop 1 z max
            zmpop 1 z max count 10
            zadd z 1 a
            zadd z incr 5 a
            zincrby z 2 a
            zadd z nx incr 1 a
            zadd z xx 3 a 4 b
            zadd z gt 1 a
            zrem z nope
            zadd z 1 a 2 b 3 c
            zremrangebyscore z 0 1
            zremrangebyrank z 0 0
            zremrangebylex z - +
            zremrangebyscore z 0 1
            zadd z 1 a 2 b 3 c
            zrangestore zd z 0 -1
            zrangestore zd z 5 6
            zunionstore zu 2 z zd
            zinterstore zi 2 z zd weights 1 2
            zdiffstore zdf 1 z
            hset h a 1 b 2
            hset h a 1
            hmset h a 1
            hsetnx h a 2
            hsetnx h c 3
            hdel h nope
            hdel h a nope
            hincrby h n 5
            hincrbyfloat h n 0.5
            geoadd geo 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
            geoadd geo 13.361389 38.115556 Palermo
            geoadd geo xx ch 13.361389 38.115556 Palermo
            geoadd geo ch 1 1 x
            GEOADD geo NX 2 2 y 3 3 x
            geoadd geo xx ch 4 4 x
            geosearchstore gdst geo fromlonlat 15 37 byradius 200 km asc
            geosearchstore gdst geo fromlonlat 15 37 byradius 200 km asc storedist
            geosearchstore gdst geo fromlonlat 0 0 byradius 1 km
            georadius geo 15 37 200 km store gd2
            georadius geo 15 37 200 km storedist gd3
            georadiusbymember geo Palermo 200 km store gd4
            georadius geo 15 37 200 km
            rpush sl 3 1 2
            sort sl
            sort sl store sdst
            sort sl limit 0 1 store sdst
            sort nokey store sdst
            sort nokey store sdst2
            sort_ro sl
            "##,
        );
    });
    assert_same_commands("collections (SPOP members masked)", &mask_spop(&out.redis), &mask_spop(&out.ferrodis));
    assert_same_replies("collections", &out.redis_replies, &out.ferrodis_replies);
}

#[test]
fn spop_propagates_the_members_it_returned() {
    // The masked comparison above checks the shape; this checks ferrodis's SREMs name exactly the
    // members its SPOP replies returned, as Redis's do.
    let tmp = TempDir::new("spop");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &[]);
        let mut c = node.client();
        c.cmd(&["SADD", "s", "a", "b", "c", "d", "e", "f", "g", "h", "1", "2"]);
        let mut popped = Vec::new();
        for argv in [vec!["SPOP", "s"], vec!["SPOP", "s", "3"], vec!["SPOP", "s", "5"]] {
            match parse_value(&c.cmd(&argv)) {
                Value::Bulk(Some(m)) => popped.push(m),
                Value::Agg(_, Some(items)) => popped.extend(items.into_iter().map(|v| match v {
                    Value::Bulk(Some(m)) => m,
                    other => panic!("{other:?}"),
                })),
                other => panic!("{}: SPOP replied {other:?}", node.name()),
            }
        }
        let cmds = incr_commands(&node.dir);
        let mut srem: Vec<Vec<u8>> = cmds.iter().filter(|a| a[0] == b"SREM").map(|a| a[2].clone()).collect();
        srem.sort();
        popped.sort();
        (srem == popped, cmds)
    });
    assert!(redis.0, "redis: SREM members differ from SPOP replies:\n{}", render(&redis.1, usize::MAX));
    assert!(ferrodis.0, "ferrodis: SREM members differ from SPOP replies:\n{}", render(&ferrodis.1, usize::MAX));
}

#[test]
fn blocking_commands_served_immediately() {
    let out = differential("blocking-now", &[], |s| {
        s.script(
            r##"
            rpush bl a b c
            blpop bl 0
            brpop bl 0
            blmove bl bl2 left right 0
            rpush bl a b c
            brpoplpush bl bl2 0
            blmpop 0 1 bl left count 5
            rpush bl a b c
            BLMOVE bl bl2 LEFT RIGHT 0
            blpop nokey bl 0
            zadd bz 1 a 2 b 3 c 4 d
            bzpopmin bz 0
            bzpopmax bz 0
            bzmpop 0 1 bz min count 5
            multi
            blpop bl2 0
            blpop nokey 0
            exec
            blpop nokey 0.01
            "##,
        );
    });
    out.assert_same("blocking commands with data present");
}

#[test]
fn blocking_commands_woken_by_another_client() {
    let out = differential("blocking-woken", &[], |s| {
        let mut b1 = s.other();
        let mut b3 = s.other();
        let cases: &[(&str, &str)] = &[
            ("blpop w1 0", "rpush w1 x"),
            ("brpop w1 0", "rpush w1 x y"),
            ("blmove w2 w3 left right 0", "rpush w2 x"),
            ("brpoplpush w4 w5 0", "lpush w4 x"),
            ("blmpop 0 1 w6 right count 3", "rpush w6 a b c d"),
            ("bzpopmin wz 0", "zadd wz 1 a 2 b"),
            ("bzpopmax wz2 0", "zadd wz2 1 a 2 b"),
            ("bzmpop 0 1 wz3 max count 5", "zadd wz3 1 a 2 b"),
            ("blpop m4 m5 0", "rpush m5 z"),
        ];
        for (blocking, push) in cases {
            s.block(&mut b1, blocking, 1);
            s.run(push);
            s.served(&mut b1, blocking);
        }
        // Two clients on one key.
        s.block(&mut b1, "blpop m1 0", 1);
        s.block(&mut b3, "blpop m1 0", 2);
        s.run("rpush m1 a b c");
        s.served(&mut b1, "blpop m1 (first)");
        s.served(&mut b3, "blpop m1 (second)");
        // The push inside MULTI and inside EVAL.
        s.block(&mut b1, "blpop m2 0", 1);
        s.script("multi\nrpush m2 a\nrpush m2 b\nexec");
        s.served(&mut b1, "blpop m2");
        s.block(&mut b1, "blpop m3 0", 1);
        s.run("eval \"redis.call('rpush','m3','x'); redis.call('set','foo','bar')\" 0");
        s.served(&mut b1, "blpop m3");
        // A chain: the BLMOVE's push wakes the second client.
        s.block(&mut b1, "blmove m6 m7 right left 0", 1);
        s.block(&mut b3, "blpop m7 0", 2);
        s.run("rpush m6 q");
        s.served(&mut b1, "blmove m6 m7");
        s.served(&mut b3, "blpop m7");
        // In another db.
        s.run("select 3");
        b1.cmd(&["SELECT", "3"]);
        s.block(&mut b1, "blpop d3 0", 1);
        s.run("rpush d3 v");
        s.served(&mut b1, "blpop d3");
        s.run("select 0");
        b1.cmd(&["SELECT", "0"]);
        // A blocked XREADGROUP woken by XADD (explicit IDs).
        s.script("xadd g 1-0 f 1\nxgroup create g grp $");
        s.block(&mut b1, "xreadgroup group grp dave block 0 streams g >", 1);
        s.run("xadd g 2-0 f 2");
        s.served(&mut b1, "xreadgroup dave");
        s.block(&mut b1, "xread block 0 streams g $", 1);
        s.run("xadd g 3-0 f 3");
        s.served(&mut b1, "xread");
        // Timed out: nothing.
        s.run("blpop nothing 0.05");
    });
    out.assert_same("blocked clients woken by a push");
}

#[test]
fn multi_exec_wrapping_and_select() {
    let out = differential("multi", &[], |s| {
        s.script(
            r##"
            multi
            exec
            multi
            get a
            exec
            multi
            set a 1
            exec
            multi
            set a 1
            get a
            exec
            multi
            set a 1
            set b 2
            incr c
            exec
            multi
            set a 1
            select 1
            set a 2
            select 0
            exec
            multi
            select 2
            set x 1
            exec
            set y 1
            select 3
            set z 1
            multi
            select 0
            set w 1
            exec
            set q 1
            select 0
            multi
            set a 1
            incr a
            lpush a x
            set b 2
            exec
            multi
            setnx a 1
            exec
            multi
            set a 1
            setnx a 2
            exec
            multi
            set a 2
            foo
            exec
            multi
            expire a 100
            incrbyfloat f 1.5
            exec
            multi
            swapdb 0 1
            set a 1
            exec
            swapdb 0 1
            "##,
        );
        // A WATCH that fails: nothing.
        s.run("watch a");
        s.other().cmd(&["SET", "a", "3"]);
        s.script("multi\nset a 4\nexec");
    });
    out.assert_same("MULTI/EXEC");
}

#[test]
fn scripts_wrapping_and_select() {
    let out = differential("scripts", &[], |s| {
        s.script(
            r##"
            eval "return 1" 0
            eval "return redis.call('get','a')" 0
            eval "return redis.call('set','a','1')" 0
            eval "redis.call('SET','a','1'); redis.call('Incr','b'); return 1" 0
            eval "redis.call('set',KEYS[1],'x','EX','100'); return 1" 1 k
            eval "redis.call('expire','a',100); return 1" 0
            eval "redis.call('select','1'); redis.call('set','a','1'); return 1" 0
            eval "redis.call('set','a','1'); redis.call('select','2'); redis.call('set','a','2'); return 1" 0
            eval "redis.call('setnx','a','1'); return 1" 0
            eval "redis.call('set','a','1'); redis.call('lpush','a','x')" 0
            eval "redis.set_repl(redis.REPL_NONE); redis.call('set','norepl','1'); return 1" 0
            eval "redis.set_repl(redis.REPL_AOF); redis.call('set','aofonly','1'); return 1" 0
            eval "redis.set_repl(redis.REPL_REPLICA); redis.call('set','replonly','1'); return 1" 0
            eval "redis.call('set','x','1'); redis.set_repl(redis.REPL_NONE); redis.call('set','y','1'); redis.set_repl(redis.REPL_ALL); redis.call('set','z','1'); return 1" 0
            sadd ss a
            eval "redis.call('spop','ss'); redis.call('incr','cnt'); return 1" 0
            eval_ro "return redis.call('get','a')" 0
            eval "#!lua flags=no-writes\nreturn redis.call('get','a')" 0
            select 6
            eval "redis.call('set','in6','1'); return 1" 0
            select 0
            "##,
        );
        // A script erroring after a write keeps the write (the error text names the sha).
        s.quiet("eval \"redis.call('set','err','1'); error('x')\" 0");
        let sha = bulk(&s.run("script load \"redis.call('set','sa','1'); redis.call('set','sb','2')\""));
        s.cmd(&[b"evalsha", &sha, b"0"]);
        s.run("script flush");
        s.run("evalsha 613bbbf25518142b6ea1a3b3380b0487d3bbb538 0");
    });
    out.assert_same("EVAL/EVALSHA");
}

#[test]
fn functions_propagate_verbatim() {
    const LIB1: &str = r##""#!lua name=lib1\nredis.register_function('f1', function(keys, args) return redis.call('set', keys[1], args[1]) end)\nredis.register_function('f2', function(keys, args) redis.call('set', keys[1], args[1]); redis.call('incr','cnt'); return 1 end)\nredis.register_function{function_name='f3', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}}""##;
    let out = differential("functions", &[], |s| {
        s.run(&format!("function load {LIB1}"));
        s.script(
            r##"
            fcall f1 1 fk v
            fcall f2 1 fk v
            fcall f3 1 fk
            fcall_ro f3 1 fk
            function load replace "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return 1 end)"
            function load "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return 1 end)"
            function delete lib1
            function delete lib1
            function flush
            function flush async
            function flush sync
            select 5
            function load "#!lua name=lib9\nredis.register_function('h', function(keys, args) return 1 end)"
            "##,
        );
        let payload = bulk(&s.run("function dump"));
        s.run("function flush");
        s.cmd(&[b"function", b"restore", &payload]);
        s.cmd(&[b"function", b"restore", &payload, b"replace"]);
        s.cmd(&[b"function", b"restore", &payload, b"FLUSH"]);
        s.run("select 0");
        s.run("set after 1");
    });
    out.assert_same("FUNCTION/FCALL");
}

#[test]
fn streams_with_explicit_ids() {
    let out = differential("streams", &[], |s| {
        s.script(
            r##"
            xadd t 5-* f v
            xadd t 5-* f v
            xadd t maxlen 2 9-0 f v
            xadd t MAXLEN ~ 2 10-0 f v
            xadd t maxlen = 2 11-0 f v
            xadd t minid ~ 10 12-0 f v
            xadd t minid 11 13-0 f v
            xadd t maxlen ~ 1 limit 10 14-0 f v
            xadd t nomkstream 15-0 f v
            xadd t 15-0 f v
            xadd nos nomkstream 1-0 f v
            config set stream-node-max-entries 2
            xadd u 1-0 f v
            xadd u 2-0 f v
            xadd u 3-0 f v
            xadd u 4-0 f v
            xadd u 5-0 f v
            xadd u maxlen ~ 2 6-0 f v
            xtrim u maxlen ~ 1
            xtrim u maxlen ~ 1 limit 1
            xadd u 7-0 f v
            xadd u 8-0 f v
            xadd u 9-0 f v
            xtrim u minid ~ 9
            xadd u MAXLEN ~ 1 LIMIT 0 10-0 f v
            xadd u 11-0 f v
            xadd u 12-0 f v
            xtrim u maxlen = 3
            xtrim u maxlen 1
            xtrim u minid 100
            config set stream-node-max-entries 100
            xadd s2 2-0 b 2
            xadd s2 3-0 b 2
            xdel s2 2-0
            xdel s2 99-0
            xadd g 1-0 f 1
            xadd g 2-0 f 2
            xadd g 3-0 f 3
            xgroup create g grp 0
            xgroup create g grp2 $
            xgroup create ng grp 0 mkstream
            xgroup create g grp3 0 entriesread 1
            xgroup setid g grp2 0
            xgroup setid g grp2 0 entriesread 0
            xgroup createconsumer g grp alice
            xgroup createconsumer g grp alice
            xreadgroup group grp alice count 1 streams g >
            xreadgroup group grp bob count 1 streams g >
            xreadgroup group grp bob noack count 1 streams g >
            xreadgroup group grp bob streams g >
            xreadgroup group grp alice streams g 0
            xreadgroup group grp carol streams g 0
            xreadgroup group grp carol streams g >
            xack g grp 1-0
            xack g grp 1-0
            xack g grp 2-0 99-0
            xadd g 4-0 f 4
            xadd g 5-0 f 5
            xreadgroup group grp alice count 2 streams g >
            xclaim g grp bob 0 4-0 justid
            xclaim g grp bob 0 4-0 justid
            xclaim g grp bob 0 99-0 force justid
            xautoclaim g grp carol 0 0-0 justid
            xautoclaim g grp carol 0 0-0 count 1 justid
            xautoclaim g grp carol 10000 0-0
            xpending g grp
            xgroup delconsumer g grp alice
            xgroup delconsumer g grp nobody
            xgroup destroy g grp3
            xgroup destroy g nogrp
            xadd h 1-0 f 1
            xadd h 2-0 f 2
            xadd h 3-0 f 3
            xgroup create h grp 0
            xreadgroup group grp c1 streams h 0
            xreadgroup group grp c2 noack streams h 0
            xreadgroup group grp c3 count 1 streams h >
            xreadgroup group grp c4 noack count 1 streams h >
            xreadgroup group grp c5 streams h >
            xadd h 4-0 f 4
            xreadgroup group grp c4 noack count 2 streams h >
            xreadgroup group grp c6 count 2 streams h >
            xdel h 1-0
            xautoclaim g grp c9 0 0-0 justid
            xautoclaim h grp c9 0 0-0 justid
            xsetid h 100-0
            xsetid h 100-0 entriesadded 10 maxdeletedid 0-0
            "##,
        );
        // XCLAIM with IDLE/TIME (TIME values compare within the tolerance).
        s.quiet("xclaim h grp c1 0 2-0 idle 5000 retrycount 3 justid");
        s.quiet("xclaim h grp c1 0 2-0 time 1000 force justid");
    });
    out.assert_same("streams");
}

/// A DUMP payload written by Redis (the same bytes go to both servers).
fn redis_dump(setup: &[&[&str]], key: &str) -> Vec<u8> {
    let tmp = TempDir::new("dump");
    let node = Node::start(Kind::Redis, &tmp.sub("redis"), &["--appendonly", "no"]);
    let mut c = node.client();
    for argv in setup {
        c.cmd(argv);
    }
    bulk(&c.cmd(&["DUMP", key]))
}

/// FLUSHALL abandons a running BGSAVE but not an AOF rewrite (Redis's flushAllDataAndResetRDB
/// kills only an RDB child): the rewrite finishes, INFO says so, and after a restart the data is
/// what the FLUSHALL left. Killing the rewrite child left aof_rewrite_in_progress at 1 for good
/// (unit/expire's writeable-replica test hung on it when its FLUSHALL arrived mid-rewrite).
#[test]
fn flushall_leaves_a_running_rewrite_alone() {
    let tmp = TempDir::new("flushall_rewrite");
    let (redis, ferrodis) = both(|kind| {
        let dir = tmp.sub(kind.name());
        // 100 ms per key: the rewrite child runs for about a second.
        let mut node = Node::start(kind, &dir, &["--rdb-key-save-delay", "100000"]);
        let mut c = node.client();
        for i in 0..10 {
            c.cmd(&["SET", &format!("k{i}"), "v"]);
        }
        let mut seen = vec![show(&c.cmd(&["BGREWRITEAOF"]))];
        seen.push(info_field(&mut c, "persistence", "aof_rewrite_in_progress"));
        seen.push(show(&c.cmd(&["FLUSHALL"])));
        seen.push(info_field(&mut c, "persistence", "aof_rewrite_in_progress"));
        wait_rewrite_done(&mut c, node.name());
        seen.push(info_field(&mut c, "persistence", "aof_last_bgrewrite_status"));
        seen.push(info_field(&mut c, "persistence", "aof_rewrites"));
        c.cmd(&["SET", "after", "1"]);
        drop(c);
        node.kill9();
        let node = Node::start(kind, &dir, &[]);
        let mut c = node.client();
        seen.push(show(&c.cmd(&["DBSIZE"])));
        seen.push(show(&c.cmd(&["GET", "after"])));
        seen
    });
    assert_eq!(redis, ferrodis);
    assert_eq!(ferrodis[1], "1", "the rewrite was running when FLUSHALL came");
}

#[test]
fn keyspace_commands() {
    let payload = redis_dump(&[&["SET", "x", "hello"]], "x");
    let out = differential("keyspace", &[], |s| {
        s.script(
            r##"
            DEBUG SET-ACTIVE-EXPIRE 0
            set a 1
            move a 1
            move a 1
            move nokey 1
            select 1
            move a 0
            select 0
            set b 2
            swapdb 0 1
            swapdb 0 0
            swapdb 0 1
            copy b c
            copy b c
            copy b c replace
            copy b c db 2
            copy b c db 2 replace
            copy nokey c
            rename b r
            rename r r
            renamenx r c
            renamenx r r2
            rename nokey x
            select 5
            swapdb 0 9
            set s5 v
            select 0
            flushdb
            flushdb async
            flushdb sync
            select 3
            set x 1
            flushall
            flushall async
            flushall sync
            set x 1
            "##,
        );
        let p: &[u8] = &payload;
        s.cmd(&[b"restore", b"r1", b"0", p]);
        s.cmd(&[b"restore", b"r1", b"0", p]);
        s.cmd(&[b"restore", b"r1", b"0", p, b"REPLACE"]);
        s.cmd(&[b"restore", b"t1", b"100000", p]);
        s.cmd(&[b"restore", b"t1", b"100000", p, b"replace"]);
        s.cmd(&[b"restore", b"t2", b"100", p, b"replace", b"IDLETIME", b"5"]);
        s.cmd(&[b"restore", b"r3", b"9999999999000", p, b"absttl"]);
        s.cmd(&[b"restore", b"r4", b"1000", p, b"ABSTTL"]);
        s.cmd(&[b"restore", b"r5", b"0", p, b"idletime", b"100"]);
        s.cmd(&[b"restore", b"r6", b"0", p, b"FREQ", b"5"]);
        s.cmd(&[b"restore", b"r1", b"5000", p, b"replace", b"absttl"]);
    });
    out.assert_same("keyspace commands");
}

// ---------------------------------------------------------------------------------------------
// Files and INFO.
// ---------------------------------------------------------------------------------------------

/// What the file tests compare at each step.
#[derive(Debug, PartialEq)]
struct Layout {
    step: String,
    listing: Vec<String>,
    manifest: String,
}

fn layout(step: &str, dir: &Path) -> Layout {
    Layout { step: step.to_string(), listing: aof_listing(dir), manifest: manifest_text(dir) }
}

fn assert_same_layouts(what: &str, redis: &[Layout], ferrodis: &[Layout]) {
    for (r, f) in redis.iter().zip(ferrodis) {
        assert!(
            r == f,
            "{what}: files differ {}\n--- redis: {:?}\n{}--- ferrodis: {:?}\n{}",
            r.step,
            r.listing,
            r.manifest,
            f.listing,
            f.manifest
        );
    }
    assert_eq!(redis.len(), ferrodis.len());
}

/// Sorted, with the members of each `SADD` sorted too (set iteration order is the encoding's).
fn canonical_rewrite(cmds: &[Argv]) -> Vec<Argv> {
    let mut v: Vec<Argv> = cmds
        .iter()
        .map(|a| {
            let mut a = a.clone();
            if a[0].eq_ignore_ascii_case(b"SADD") && a.len() > 2 {
                a[2..].sort();
            }
            a
        })
        .collect();
    v.sort();
    v
}

#[test]
fn file_layout_after_start_and_rewrites() {
    let tmp = TempDir::new("layout");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &[]);
        let mut c = node.client();
        let mut layouts = vec![layout("after start", &node.dir)];
        let base_start = std::fs::metadata(base_path(&node.dir)).map(|m| m.len() > 0).unwrap_or(false);
        c.line("set a 1");
        c.line("select 3");
        c.line("set b 2");
        let reply = c.line("bgrewriteaof");
        wait_rewrite_done(&mut c, node.name());
        layouts.push(layout("after BGREWRITEAOF", &node.dir));
        c.line("set c 3");
        let incr_after = incr_commands(&node.dir);
        (layouts, base_start, reply, incr_after)
    });
    assert_same_layouts("multi-part AOF files", &redis.0, &ferrodis.0);
    assert_eq!(redis.1, ferrodis.1, "a non-empty base file is written at start");
    assert_eq!(show(&redis.2), show(&ferrodis.2), "BGREWRITEAOF reply");
    assert_same_commands("incr file after the first rewrite", &redis.3, &ferrodis.3);
}

#[test]
fn file_layout_with_a_resp_base() {
    let tmp = TempDir::new("layout-resp");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &[]);
        let mut c = node.client();
        let mut layouts = Vec::new();
        // Plain RESP base.
        c.line("config set aof-use-rdb-preamble no");
        c.line("select 0");
        c.line("rpush l a b c");
        c.line("hset h f v g w");
        c.line("zadd z 1 a 2.5 b");
        c.line("sadd s y 1 z x");
        c.line("sadd si 3 1 2");
        c.line("set e v px 100000");
        c.line("xadd st 1-1 f v");
        c.line("xgroup create st g 0");
        c.line("xgroup createconsumer st g idle");
        c.line("function load \"#!lua name=lib\\nredis.register_function('f', function() return 1 end)\"");
        c.line("bgrewriteaof");
        wait_rewrite_done(&mut c, node.name());
        layouts.push(layout("after BGREWRITEAOF with aof-use-rdb-preamble no", &node.dir));
        let base_file = base_path(&node.dir);
        let base = if base_file.to_string_lossy().ends_with(".aof") {
            read_aof(&base_file)
        } else {
            vec![vec![format!("<not a RESP base: {}>", base_file.display()).into_bytes()]]
        };
        c.line("set d 4");
        let incr_after2 = incr_commands(&node.dir);
        (layouts, base, incr_after2)
    });
    assert_same_layouts("multi-part AOF files", &redis.0, &ferrodis.0);
    assert_same_commands(
        "plain RESP base written by the rewrite (sorted)",
        &canonical_rewrite(&redis.1),
        &canonical_rewrite(&ferrodis.1),
    );
    assert_same_commands("incr file after the second rewrite", &redis.2, &ferrodis.2);
}

#[test]
fn config_set_appendonly_at_runtime() {
    let tmp = TempDir::new("runtime");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &["--appendonly", "no"]);
        let mut c = node.client();
        c.line("set a 1");
        c.line("select 2");
        c.line("set b 2");
        let before = aof_listing(&node.dir);
        let reply = c.line("config set appendonly yes");
        wait_rewrite_done(&mut c, node.name());
        let mut layouts = vec![layout("after CONFIG SET appendonly yes", &node.dir)];
        c.line("set c 3");
        let incr = incr_commands(&node.dir);
        c.line("config set appendonly no");
        c.line("set d 4");
        layouts.push(layout("after CONFIG SET appendonly no", &node.dir));
        c.line("config set appendonly yes");
        wait_rewrite_done(&mut c, node.name());
        layouts.push(layout("after CONFIG SET appendonly yes again", &node.dir));
        let d = snapshot(&mut c);
        (before, reply, layouts, incr, d)
    });
    assert_eq!(redis.0, ferrodis.0, "appendonlydir before enabling AOF");
    assert_eq!(show(&redis.1), show(&ferrodis.1), "CONFIG SET appendonly yes reply");
    assert_same_layouts("runtime AOF enable", &redis.2, &ferrodis.2);
    assert_same_commands("incr file after enabling AOF at runtime", &redis.3, &ferrodis.3);
    assert_same_snapshot("dataset after enabling AOF at runtime", &redis.4, &ferrodis.4);
}

/// The AOF-related INFO persistence fields, in order, with the values that do not depend on
/// timing or on RDB byte sizes.
fn aof_info(c: &mut Client) -> Vec<String> {
    const STABLE: &[&str] = &[
        "aof_enabled",
        "aof_rewrite_in_progress",
        "aof_rewrite_scheduled",
        "aof_last_bgrewrite_status",
        "aof_rewrites",
        "aof_rewrites_consecutive_failures",
        "aof_last_write_status",
        "aof_pending_rewrite",
        "aof_buffer_length",
        "aof_pending_bio_fsync",
        "aof_delayed_fsync",
        "module_fork_in_progress",
    ];
    let text = String::from_utf8_lossy(&c.cmd(&["INFO", "persistence"])).into_owned();
    text.lines()
        .filter(|l| l.starts_with("aof_") || l.starts_with("module_fork"))
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap_or((l, ""));
            if STABLE.contains(&k) {
                format!("{k}:{}", v.trim())
            } else {
                k.to_string()
            }
        })
        .collect()
}

#[test]
fn info_persistence_aof_fields() {
    let tmp = TempDir::new("info");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &[]);
        let mut c = node.client();
        let mut out = vec![aof_info(&mut c)];
        let size = |c: &mut Client, f: &str| info_field(c, "persistence", f);
        // Sizes: the start-up base is not counted; then the bytes of SELECT + the command.
        out.push(vec![format!(
            "start: current {} base {}",
            size(&mut c, "aof_current_size"),
            size(&mut c, "aof_base_size")
        )]);
        c.line("set a 1");
        out.push(vec![format!(
            "set a 1: current {} base {}",
            size(&mut c, "aof_current_size"),
            size(&mut c, "aof_base_size")
        )]);
        c.line("bgrewriteaof");
        wait_rewrite_done(&mut c, node.name());
        out.push(aof_info(&mut c));
        let cur = size(&mut c, "aof_current_size");
        let base = size(&mut c, "aof_base_size");
        let base_file = std::fs::metadata(base_path(&node.dir)).map(|m| m.len().to_string()).unwrap_or_default();
        out.push(vec![format!(
            "after rewrite: current == base: {}, base == base file size: {}",
            cur == base,
            base == base_file
        )]);
        c.line("set b 2");
        let cur2: i64 = size(&mut c, "aof_current_size").parse().unwrap_or(-1);
        out.push(vec![format!("set b 2 grows current by {}", cur2 - cur.parse::<i64>().unwrap_or(0))]);
        let mut plain = Node::start(kind, &tmp.sub(&format!("{}-off", kind.name())), &["--appendonly", "no"]);
        out.push(aof_info(&mut plain.client()));
        plain.kill9();
        out
    });
    assert_eq!(redis, ferrodis, "INFO persistence AOF fields (redis left, ferrodis right)");
}

// ---------------------------------------------------------------------------------------------
// Restarts, cross-loading, damaged and legacy files.
// ---------------------------------------------------------------------------------------------

/// A deterministic mixed dataset (no SPOP, no `*` IDs): every type, several dbs, TTLs.
fn mixed_dataset(c: &mut Client, part: u32) {
    let mut run = |l: &str| {
        let r = c.line(l);
        assert!(!r.starts_with(b"-"), "`{l}` failed: {}", show(&r));
    };
    let p = part;
    run("select 0");
    run(&format!("set str{p} hello"));
    run(&format!("set int{p} 12345"));
    run(&format!("set ttl{p} v ex 1000"));
    run(&format!("incrbyfloat fl{p} 1.5"));
    run(&format!("append str{p} world"));
    run(&format!("setbit bits{p} 100 1"));
    run(&format!("rpush list{p} a b c d e"));
    let many: Vec<String> = (0..200).map(|i| format!("item{i}")).collect();
    run(&format!("rpush biglist{p} {}", many.join(" ")));
    run(&format!("lpop biglist{p} 3"));
    run(&format!("hset hash{p} f1 v1 f2 v2 n 5"));
    run(&format!("hincrby hash{p} n 3"));
    let fields: Vec<String> = (0..150).map(|i| format!("f{i} v{i}")).collect();
    run(&format!("hset bighash{p} {}", fields.join(" ")));
    run(&format!("sadd set{p} a b c 1 2 3"));
    run(&format!("sadd intset{p} 1 2 3 100000"));
    run(&format!("srem set{p} b"));
    run(&format!("zadd zset{p} 1 a 2 b 3.5 c"));
    run(&format!("zincrby zset{p} 2 a"));
    let members: Vec<String> = (0..200).map(|i| format!("{i} m{i}")).collect();
    run(&format!("zadd bigzset{p} {}", members.join(" ")));
    run(&format!("pfadd hll{p} a b c d"));
    run(&format!("xadd stream{p} 1-1 f v"));
    run(&format!("xadd stream{p} 2-0 f v g w"));
    run(&format!("xgroup create stream{p} grp 0"));
    run(&format!("xreadgroup group grp alice count 1 streams stream{p} >"));
    run(&format!("set gone{p} x"));
    run(&format!("del gone{p}"));
    run(&format!("expire hash{p} 5000"));
    run("select 1");
    run(&format!("set db1key{p} v"));
    run(&format!("lpush db1list{p} x y"));
    run("select 9");
    run(&format!("set db9key{p} v px 900000"));
    run("multi");
    run(&format!("incr counter{p}"));
    run(&format!("incr counter{p}"));
    run("exec");
    run(&format!("eval \"redis.call('set','fromscript{p}','1'); redis.call('rpush','sl{p}','a','b')\" 0"));
    run("select 0");
}

#[test]
fn digest_matches_redis_without_aof() {
    // Redis's DEBUG DIGEST (a status reply) of the dataset the restart tests use. The restart tests
    // compare snapshots across servers and each server's digest only with itself, so a digest
    // that disagrees with Redis's fails here and nowhere else.
    let tmp = TempDir::new("digest");
    let (r, f) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &["--appendonly", "no"]);
        let mut c = node.client();
        mixed_dataset(&mut c, 1);
        mixed_dataset(&mut c, 2);
        show(&c.cmd(&["DEBUG", "DIGEST"]))
    });
    assert_eq!(r, f, "DEBUG DIGEST reply for the same dataset (redis left, ferrodis right)");
}

/// (DEBUG DIGEST, snapshot) of `kind` started on `dir`.
fn start_and_read(kind: Kind, dir: &Path) -> (String, Vec<String>) {
    let node = Node::start(kind, dir, &[]);
    let mut c = node.client();
    (digest(&mut c), snapshot(&mut c))
}

/// Each server writes the mixed dataset (with a BGREWRITEAOF between the parts when `rewrite`),
/// is SIGKILLed and restarted on its own directory; Redis's restarted dataset is the expectation
/// (an AOF does not carry everything: e.g. a group's entries-read after XREADGROUP is lost).
fn restart_differential(tag: &str, extra: &[&str], rewrite: bool) {
    let tmp = TempDir::new(tag);
    let (r, f) = both(|kind| {
        let dir = tmp.sub(kind.name());
        let mut node = Node::start(kind, &dir, extra);
        let mut c = node.client();
        mixed_dataset(&mut c, 1);
        if rewrite {
            c.line("bgrewriteaof");
            wait_rewrite_done(&mut c, kind.name());
            mixed_dataset(&mut c, 2);
        }
        let before = digest(&mut c);
        drop(c);
        node.kill9();
        let (after, snap) = start_and_read(kind, &dir);
        (before, after, snap)
    });
    let what = format!("{tag} {extra:?}");
    assert_eq!(r.0, r.1, "{what}: redis's DEBUG DIGEST changed across the restart");
    assert_same_snapshot(&format!("{what}: ferrodis restarted on its AOF vs Redis restarted on its own"), &r.2, &f.2);
    assert_eq!(f.0, f.1, "{what}: ferrodis's DEBUG DIGEST before SIGKILL vs after restart on its AOF");
}

#[test]
fn restart_after_kill_restores_the_dataset() {
    restart_differential("restart", &[], false);
}

#[test]
fn restart_after_rewrite_and_more_writes() {
    restart_differential("restart-rw", &["--aof-use-rdb-preamble", "yes"], true);
    restart_differential("restart-rw", &["--aof-use-rdb-preamble", "no"], true);
}

fn copy_aof_dir(from: &Path, to: &Path) {
    let src = aof_dir(from);
    let dst = aof_dir(to);
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
}

/// `writer` builds an AOF (dataset part 1, BGREWRITEAOF, part 2, with an RDB or RESP base) in
/// `tmp/<tag>` and is killed.
fn written_by(tmp: &TempDir, tag: &str, writer: Kind, preamble: &str) -> PathBuf {
    let dir = tmp.sub(tag);
    let mut w = Node::start(writer, &dir, &["--aof-use-rdb-preamble", preamble]);
    let mut c = w.client();
    mixed_dataset(&mut c, 1);
    c.line("bgrewriteaof");
    wait_rewrite_done(&mut c, writer.name());
    mixed_dataset(&mut c, 2);
    drop(c);
    w.kill9();
    dir
}

/// The snapshot of `reader` started on a copy of the appendonlydir in `from`.
fn load_copy(tmp: &TempDir, tag: &str, reader: Kind, from: &Path) -> Vec<String> {
    let dir = tmp.sub(tag);
    copy_aof_dir(from, &dir);
    start_and_read(reader, &dir).1
}

#[test]
fn ferrodis_loads_redis_aof() {
    for preamble in ["yes", "no"] {
        let tmp = TempDir::new("cross-r");
        let files = written_by(&tmp, "writer", Kind::Redis, preamble);
        let (r, f) = both(|kind| load_copy(&tmp, &format!("reader-{}", kind.name()), kind, &files));
        let what = format!(
            "ferrodis vs redis loading an AOF Redis wrote (aof-use-rdb-preamble {preamble}; files {:?})",
            aof_listing(&files)
        );
        assert_same_snapshot(&what, &r, &f);
    }
}

#[test]
fn redis_loads_ferrodis_aof() {
    for preamble in ["yes", "no"] {
        let tmp = TempDir::new("cross-f");
        let (from_redis, from_ferrodis) = both(|writer| {
            let files = written_by(&tmp, &format!("writer-{}", writer.name()), writer, preamble);
            let listing = aof_listing(&files);
            (load_copy(&tmp, &format!("reader-of-{}", writer.name()), Kind::Redis, &files), listing)
        });
        let what = format!(
            "redis loading ferrodis's AOF (files {:?}) vs redis loading its own (files {:?}), aof-use-rdb-preamble {preamble}",
            from_ferrodis.1, from_redis.1
        );
        assert_same_snapshot(&what, &from_redis.0, &from_ferrodis.0);
    }
}

/// Both servers write the dataset (AOF incr only) and are killed; returns (tmp, redis dir, ferrodis dir).
fn killed_pair(tag: &str) -> (TempDir, PathBuf, PathBuf) {
    let tmp = TempDir::new(tag);
    let (rd, fd) = both(|kind| {
        let dir = tmp.sub(kind.name());
        let mut node = Node::start(kind, &dir, &[]);
        mixed_dataset(&mut node.client(), 1);
        node.client().cmd(&["SET", "last", "value-of-the-last-command"]);
        node.kill9();
        dir
    });
    (tmp, rd, fd)
}

/// Cuts the last `n` bytes off the current incr file.
fn truncate_incr(dir: &Path, n: u64) -> (PathBuf, u64) {
    let p = incr_path(dir);
    let len = std::fs::metadata(&p).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(len - n).unwrap();
    (p, len - n)
}

#[test]
fn truncated_incr_loads_with_aof_load_truncated_yes() {
    let (_tmp, rd, fd) = killed_pair("trunc-yes");
    let (outcome_r, outcome_f) = both(|kind| {
        let dir = if kind == Kind::Redis { &rd } else { &fd };
        let (path, cut_len) = truncate_incr(dir, 5);
        let bytes = std::fs::read(&path).unwrap();
        let (_, complete) = parse_commands(&bytes);
        let node = Node::start(kind, dir, &["--aof-load-truncated", "yes"]);
        let mut c = node.client();
        let d = snapshot(&mut c);
        let last = c.cmd(&["GET", "last"]);
        let size_now = std::fs::metadata(&path).unwrap().len();
        (d, show(&last), size_now == complete as u64, cut_len > complete as u64, node.log_text())
    });
    assert!(outcome_r.2 && outcome_r.3, "redis: the file was not truncated to its last complete command");
    assert_same_snapshot("dataset after loading a truncated AOF", &outcome_r.0, &outcome_f.0);
    assert_eq!(outcome_r.1, outcome_f.1, "the cut command is lost");
    assert!(outcome_f.2, "ferrodis did not truncate the incr file to its last complete command");
    for phrase in ["Truncating the AOF", "loaded anyway because aof-load-truncated is enabled"] {
        assert!(outcome_r.4.contains(phrase), "redis log lacks {phrase:?}");
        assert!(outcome_f.4.contains(phrase), "ferrodis log lacks {phrase:?}; log:\n{}", outcome_f.4);
    }
}

/// Starts `kind` on `dir` expecting a refusal; returns (exit code, log).
fn refused(kind: Kind, dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    match Node::launch(kind, dir, extra) {
        Launch::Up(node) => {
            panic!("{} started although Redis refuses these files; log:\n{}", kind.name(), node.log_text())
        }
        Launch::Exited { code, log } => (code, log),
    }
}

/// Damages both servers' files with `damage`, then both must refuse to start with the same exit
/// status, and ferrodis's log must contain `phrase` (which Redis's log must contain too).
fn both_refuse(tag: &str, extra: &[&str], damage: impl Fn(&Path) + Sync, phrase: &str) {
    let (_tmp, rd, fd) = killed_pair(tag);
    let (r, f) = both(|kind| {
        let dir = if kind == Kind::Redis { &rd } else { &fd };
        damage(dir);
        refused(kind, dir, extra)
    });
    assert!(r.1.contains(phrase), "redis's log lacks {phrase:?}:\n{}", r.1);
    assert_eq!(r.0, f.0, "exit status (redis left, ferrodis right); ferrodis log:\n{}", f.1);
    assert!(f.1.contains(phrase), "ferrodis's log lacks Redis's phrase {phrase:?}; log:\n{}", f.1);
}

#[test]
fn truncated_incr_refused_with_aof_load_truncated_no() {
    both_refuse(
        "trunc-no",
        &["--aof-load-truncated", "no"],
        |dir| {
            truncate_incr(dir, 5);
        },
        "Unexpected end of file reading the append only file",
    );
}

#[test]
fn garbage_in_incr_refused() {
    both_refuse(
        "garbage",
        &[],
        |dir| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(incr_path(dir)).unwrap();
            f.write_all(b"hello garbage\r\n").unwrap();
        },
        "Bad file format reading the append only file",
    );
}

#[test]
fn manifest_naming_a_missing_file_refused() {
    both_refuse(
        "missing",
        &[],
        |dir| {
            use std::io::Write;
            let p = aof_dir(dir).join("appendonly.aof.manifest");
            let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
            f.write_all(b"file appendonly.aof.9.incr.aof seq 9 type i\n").unwrap();
        },
        "Unable to obtain the AOF file appendonly.aof.9.incr.aof length",
    );
}

/// RESP commands for a legacy appendonly.aof.
fn legacy_commands() -> Vec<u8> {
    let cmds: &[&[&str]] = &[
        &["SELECT", "0"],
        &["set", "a", "1"],
        &["rpush", "l", "x", "y"],
        &["SET", "t", "v", "PXAT", "9999999999000"],
        &["SELECT", "2"],
        &["hset", "h", "f", "v"],
        &["MULTI"],
        &["incr", "n"],
        &["incr", "n"],
        &["EXEC"],
    ];
    cmds.iter().flat_map(|a| encode(a)).collect()
}

/// `contents` is written as `dir/appendonly.aof` with no appendonlydir; both servers must load
/// it, agree on the dataset, and leave the same files and manifest behind.
fn legacy_load(tag: &str, contents: &[u8]) {
    let tmp = TempDir::new(tag);
    let (r, f) = both(|kind| {
        let dir = tmp.sub(kind.name());
        std::fs::write(dir.join("appendonly.aof"), contents).unwrap();
        let node = Node::start(kind, &dir, &[]);
        let mut c = node.client();
        let d = snapshot(&mut c);
        let dbsize = show(&c.cmd(&["DBSIZE"]));
        let still_there = dir.join("appendonly.aof").exists();
        c.cmd(&["SET", "after", "1"]);
        (d, dbsize, still_there, layout("after loading a legacy appendonly.aof", &dir), incr_commands(&dir))
    });
    assert_same_snapshot("dataset after loading the legacy file", &r.0, &f.0);
    assert_eq!(r.1, f.1, "DBSIZE (db 0)");
    assert_eq!(r.2, f.2, "whether dir/appendonly.aof is still there (Redis moves it into appendonlydir)");
    assert_same_layouts("legacy migration", &[r.3], &[f.3]);
    assert_same_commands("incr file after the migration", &r.4, &f.4);
}

#[test]
fn legacy_plain_appendonly_aof_is_migrated() {
    legacy_load("legacy-plain", &legacy_commands());
}

#[test]
fn legacy_appendonly_aof_with_rdb_preamble_is_migrated() {
    // An RDB written by Redis's SAVE, followed by RESP commands.
    let tmp = TempDir::new("legacy-rdb-src");
    let dir = tmp.sub("redis");
    let node = Node::start(Kind::Redis, &dir, &["--appendonly", "no"]);
    let mut c = node.client();
    for l in ["set base 1", "hset bh f v", "rpush bl a b c", "select 3", "set base3 x", "save"] {
        let r = c.line(l);
        assert!(!r.starts_with(b"-"), "{l}: {}", show(&r));
    }
    let mut contents = std::fs::read(dir.join("dump.rdb")).expect("dump.rdb");
    contents.extend_from_slice(&legacy_commands());
    legacy_load("legacy-rdb", &contents);
}

// ---------------------------------------------------------------------------------------------
// When rewrites start: scheduled behind a BGSAVE or a transaction, the failure limit, history.
// ---------------------------------------------------------------------------------------------

fn total_forks(c: &mut Client) -> u64 {
    info_field(c, "stats", "total_forks").parse().unwrap_or(0)
}

fn wait_bgsave_done(c: &mut Client, who: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while info_field(c, "persistence", "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "{who}: BGSAVE still running after 15 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// BGREWRITEAOF while a BGSAVE runs (AOF off, as in Redis's aofrw unit) is scheduled and starts
/// once the save is over; inside MULTI/EXEC it is scheduled and starts after EXEC. Both leave
/// the same files as Redis.
#[test]
fn bgrewriteaof_scheduled_behind_bgsave_and_exec() {
    let tmp = TempDir::new("scheduled");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &["--appendonly", "no"]);
        let mut c = node.client();
        let mut out = Vec::new();
        c.line("set k v");
        c.line("config set rdb-key-save-delay 300000");
        out.push(show(&c.line("bgsave")));
        out.push(show(&c.line("bgrewriteaof")));
        out.push(format!("scheduled:{}", info_field(&mut c, "persistence", "aof_rewrite_scheduled")));
        c.line("config set rdb-key-save-delay 0");
        wait_bgsave_done(&mut c, node.name());
        wait_rewrite_done(&mut c, node.name());
        let mut layouts = vec![layout("after BGREWRITEAOF behind BGSAVE", &node.dir)];
        let forks = total_forks(&mut c);
        c.line("multi");
        c.line("set foo bar");
        c.line("bgrewriteaof");
        out.push(show(&c.line("exec")));
        wait_rewrite_done(&mut c, node.name());
        out.push(format!("forks after EXEC: +{}", total_forks(&mut c) - forks));
        layouts.push(layout("after BGREWRITEAOF inside EXEC", &node.dir));
        (out, layouts)
    });
    assert_eq!(redis.0, ferrodis.0, "replies and INFO (redis left)");
    assert_same_layouts("scheduled rewrites", &redis.1, &ferrodis.1);
}

/// CONFIG SET appendonly yes inside MULTI/EXEC, or while a BGSAVE runs, schedules the rewrite
/// (Redis logs why) and the AOF comes on once it has run.
#[test]
fn config_set_appendonly_scheduled_in_exec_and_behind_bgsave() {
    let tmp = TempDir::new("aof-on-scheduled");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &["--appendonly", "no"]);
        let mut c = node.client();
        let mut out = Vec::new();
        c.line("multi");
        c.line("set foo bar");
        c.line("config set appendonly yes");
        out.push(show(&c.line("exec")));
        wait_rewrite_done(&mut c, node.name());
        out.push(format!("aof_enabled:{}", info_field(&mut c, "persistence", "aof_enabled")));
        let mut layouts = vec![layout("after CONFIG SET appendonly yes inside EXEC", &node.dir)];
        c.line("config set appendonly no");
        c.line("set k1 v1");
        c.line("config set rdb-key-save-delay 300000");
        c.line("bgsave");
        out.push(show(&c.line("config set appendonly yes")));
        out.push(format!("scheduled:{}", info_field(&mut c, "persistence", "aof_rewrite_scheduled")));
        c.line("config set rdb-key-save-delay 0");
        wait_bgsave_done(&mut c, node.name());
        wait_rewrite_done(&mut c, node.name());
        c.line("set k2 v2");
        layouts.push(layout("after CONFIG SET appendonly yes behind BGSAVE", &node.dir));
        let log = node.log_text();
        for phrase in [
            "AOF was enabled during a transaction. An AOF background was scheduled to start when possible.",
            "AOF was enabled but there is already another background operation. An AOF background was scheduled to start when possible.",
        ] {
            out.push(format!("{phrase} logged: {}", log.contains(phrase)));
        }
        (out, layouts, incr_commands(&node.dir))
    });
    assert_eq!(redis.0, ferrodis.0, "replies, INFO and log lines (redis left)");
    assert_same_layouts("AOF enabled by a scheduled rewrite", &redis.1, &ferrodis.1);
    assert_same_commands("incr file once the AOF is on", &redis.2, &ferrodis.2);
}

/// BGREWRITEAOF with the AOF off leaves only the new base in the manifest; with
/// aof-disable-auto-gc yes the history is kept newest first, and turning gc back on deletes it.
#[test]
fn rewrite_with_aof_off_and_history_gc() {
    let tmp = TempDir::new("history");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &[]);
        let mut c = node.client();
        let mut layouts = Vec::new();
        c.line("set a 1");
        c.line("config set aof-disable-auto-gc yes");
        for _ in 0..2 {
            c.line("bgrewriteaof");
            wait_rewrite_done(&mut c, node.name());
            c.line("incr n");
        }
        layouts.push(layout("two rewrites with aof-disable-auto-gc yes", &node.dir));
        c.line("config set aof-disable-auto-gc no");
        layouts.push(layout("after CONFIG SET aof-disable-auto-gc no", &node.dir));
        c.line("config set appendonly no");
        c.line("bgrewriteaof");
        wait_rewrite_done(&mut c, node.name());
        layouts.push(layout("BGREWRITEAOF with appendonly no", &node.dir));
        c.line("debug loadaof");
        c.line("config set appendonly yes");
        wait_rewrite_done(&mut c, node.name());
        layouts.push(layout("appendonly yes again after DEBUG LOADAOF", &node.dir));
        layouts
    });
    assert_same_layouts("history and AOF-off rewrites", &redis, &ferrodis);
}

/// Three failed rewrites in a row (children killed) hold back automatic rewrites with Redis's
/// log line; the incr files opened by the failed tries stay in the manifest.
#[test]
fn repeated_rewrite_failures_trigger_the_limit() {
    let tmp = TempDir::new("limit");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &["--auto-aof-rewrite-percentage", "0"]);
        let mut c = node.client();
        c.line("set k v");
        c.line("config set rdb-key-save-delay 10000000");
        for _ in 0..3 {
            c.line("bgrewriteaof");
            let pid = child_pid(node.child.as_ref().unwrap().id());
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            wait_rewrite_done(&mut c, node.name());
        }
        let failures = info_field(&mut c, "persistence", "aof_rewrites_consecutive_failures");
        c.line("config set auto-aof-rewrite-percentage 1");
        c.line("config set auto-aof-rewrite-min-size 1kb");
        c.cmd(&["SET", "x", &"x".repeat(2048)]);
        let phrase = "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in 1 minutes";
        let deadline = Instant::now() + Duration::from_secs(5);
        while !node.log_text().contains(phrase) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let limited = node.log_text().contains(phrase);
        let running = info_field(&mut c, "persistence", "aof_rewrite_in_progress");
        c.line("config set rdb-key-save-delay 0");
        (failures, limited, running, layout("after three killed rewrites", &node.dir))
    });
    assert_eq!(redis.0, ferrodis.0, "aof_rewrites_consecutive_failures");
    assert!(redis.1, "redis logged the limit");
    assert!(ferrodis.1, "ferrodis logs Redis's limit line");
    assert_eq!(redis.2, ferrodis.2, "aof_rewrite_in_progress while limited");
    assert_same_layouts("failed rewrites", &[redis.3], &[ferrodis.3]);
}

/// The one child of `parent` (the rewrite), from /proc.
fn child_pid(parent: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        for task in std::fs::read_dir(format!("/proc/{parent}/task")).into_iter().flatten().flatten() {
            let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            if let Some(pid) = children.split_whitespace().next().and_then(|p| p.parse().ok()) {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no child of {parent}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A Redis 6 upgrade interrupted after the manifest was written but before appendonly.aof was
/// moved: the manifest names appendonly.aof as its base, the file is still in `dir`. Redis
/// finishes the upgrade at startup.
#[test]
fn interrupted_legacy_upgrade_is_completed() {
    let tmp = TempDir::new("legacy-interrupted");
    let (r, f) = both(|kind| {
        let dir = tmp.sub(kind.name());
        std::fs::write(dir.join("appendonly.aof"), legacy_commands()).unwrap();
        std::fs::create_dir_all(aof_dir(&dir)).unwrap();
        std::fs::write(aof_dir(&dir).join("appendonly.aof.manifest"), "file appendonly.aof seq 1 type b\n").unwrap();
        let node = Node::start(kind, &dir, &[]);
        let mut c = node.client();
        let d = snapshot(&mut c);
        (d, dir.join("appendonly.aof").exists(), layout("after the interrupted upgrade", &dir))
    });
    assert_same_snapshot("dataset", &r.0, &f.0);
    assert_eq!(r.1, f.1, "whether dir/appendonly.aof is still there");
    assert_same_layouts("interrupted upgrade", &[r.2], &[f.2]);
}

/// `#TS:<unixtime>` lines with aof-timestamp-enabled, as Redis writes them: one before the
/// first command of each second in the incr file, and one at the top of a base file written as
/// commands by BGREWRITEAOF. The raw files are compared with the times masked.
#[test]
fn timestamp_annotations() {
    fn masked(bytes: &[u8]) -> (String, bool) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let text = String::from_utf8_lossy(bytes).into_owned();
        let mut recent = true;
        let lines: Vec<String> = text
            .split("\r\n")
            .map(|l| match l.strip_prefix("#TS:") {
                Some(t) => {
                    recent &= t.parse::<i64>().is_ok_and(|t| (now - t).abs() < 30);
                    "#TS:<time>".to_string()
                }
                None => l.to_string(),
            })
            .collect();
        (lines.join("\r\n"), recent)
    }
    let tmp = TempDir::new("timestamps");
    let (redis, ferrodis) = both(|kind| {
        let node = Node::start(kind, &tmp.sub(kind.name()), &[]);
        let mut c = node.client();
        c.line("config set aof-timestamp-enabled yes");
        c.line("config set aof-use-rdb-preamble no");
        c.line("set foo bar");
        let incr = masked(&std::fs::read(incr_path(&node.dir)).unwrap());
        c.line("bgrewriteaof");
        wait_rewrite_done(&mut c, node.name());
        let base = std::fs::read(base_path(&node.dir)).unwrap();
        let line_end = base.iter().position(|&b| b == b'\n').map_or(base.len(), |i| i + 1);
        let first = masked(&base[..line_end]);
        (incr, first)
    });
    assert!(redis.0 .0.starts_with("#TS:<time>\r\n") && redis.0 .1, "redis incr: {:?}", redis.0);
    assert_eq!(redis.1, ("#TS:<time>\r\n".to_string(), true), "redis base");
    assert_eq!(ferrodis, redis);
}

/// DEBUG LOADAOF replaying a script that runs past lua-time-limit (an AOF holding the EVAL
/// itself, as older servers wrote it): other clients are answered while it runs, with -LOADING
/// (not -BUSY, and not made to wait), the "Slow script detected" line is logged, and the
/// script's write is there afterwards (integration/aof's "EVAL timeout with slow verbatim Lua
/// script from AOF").
#[test]
fn debug_loadaof_answers_loading_during_a_slow_script() {
    let tmp = TempDir::new("slowscript");
    let (redis, ferrodis) = both(|kind| {
        let dir = tmp.sub(kind.name());
        let aof = aof_dir(&dir);
        std::fs::create_dir_all(&aof).unwrap();
        std::fs::write(aof.join("appendonly.aof.manifest"), "file appendonly.aof.1.incr.aof seq 1 type i\n").unwrap();
        let script = "redis.call('set',KEYS[1],'y'); for i=1,1500000 do redis.call('ping') end return 'ok'";
        let mut body = encode(&["SELECT", "9"]);
        body.extend(encode(&["EVAL", script, "1", "x"]));
        std::fs::write(aof.join("appendonly.aof.1.incr.aof"), body).unwrap();
        let node = Node::start(kind, &dir, &["--lua-time-limit", "1", "--aof-use-rdb-preamble", "no"]);
        let mut loader = node.client();
        let mut other = node.client();
        other.cmd(&["PING"]);
        loader.send_raw(&encode(&["DEBUG", "LOADAOF"])).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let seen = loop {
            let reply = other.cmd(&["PING"]);
            if reply.starts_with(b"-LOADING") || Instant::now() > deadline {
                break reply;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let loaded = loader.read_reply().unwrap();
        let logged = node.log_text().contains("Slow script detected");
        other.line("select 9");
        (show(&seen), show(&loaded), logged, show(&other.cmd(&["GET", "x"])))
    });
    assert_eq!(redis.0, show(b"-LOADING Redis is loading the dataset in memory\r\n"), "redis");
    assert_eq!(redis, ferrodis, "PING during the load, DEBUG LOADAOF's reply, the log line, the key (redis left)");
}

/// The fsync(2)/fdatasync(2) calls a server's threads make while `writes` runs.
fn fsyncs_during(node: &Node, tmp: &Path, writes: impl FnOnce()) -> usize {
    syscalls_during(node, tmp, "fsync,fdatasync", writes).len()
}

fn syscalls_during(node: &Node, tmp: &Path, syscalls: &str, during: impl FnOnce()) -> Vec<String> {
    common::syscalls_during(node.child.as_ref().expect("running").id(), tmp, syscalls, during)
}

#[test]
fn fsync_follows_appendfsync_and_no_appendfsync_on_rewrite() {
    let tmp = TempDir::new("fsync_policy");
    // (appendfsync, no-appendfsync-on-rewrite, a BGSAVE child running)
    let cases = [
        ("no", "no", false),
        ("everysec", "no", false),
        ("everysec", "yes", true),
        ("always", "yes", true),
        ("always", "no", true),
        ("always", "yes", false),
    ];
    let (redis, ferrodis) = both(|kind| {
        let mut seen = Vec::new();
        for (i, (policy, on_rewrite, child)) in cases.iter().enumerate() {
            let dir = tmp.sub(&format!("{}-{i}", kind.name()));
            let node = Node::start(kind, &dir, &["--appendfsync", policy, "--no-appendfsync-on-rewrite", on_rewrite]);
            let mut c = node.client();
            if *child {
                // Ten seconds per key: the child outlives the writes below.
                c.cmd(&["SET", "slow", "1"]);
                c.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "10000000"]);
                assert_eq!(c.cmd(&["BGSAVE"]), b"+Background saving started\r\n");
            }
            let n = fsyncs_during(&node, &dir, || {
                // Over two seconds, so an everysec fsync falls in it.
                for k in 0..25 {
                    c.cmd(&["SET", &format!("k{k}"), "v"]);
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
            if *child {
                assert_eq!(
                    info_field(&mut c, "persistence", "rdb_bgsave_in_progress"),
                    "1",
                    "{} case {i}",
                    kind.name()
                );
                // FLUSHALL ends the child (Redis kills a running save).
                c.cmd(&["FLUSHALL"]);
            }
            seen.push(format!(
                "appendfsync {policy}, no-appendfsync-on-rewrite {on_rewrite}, child {child}: fsynced {}",
                n > 0
            ));
        }
        seen
    });
    assert_eq!(redis, ferrodis, "(redis left)");
    assert!(redis.iter().filter(|s| s.ends_with("true")).count() >= 3, "the traces saw fsyncs at all: {redis:?}");
}

/// rdb-save-incremental-fsync and aof-rewrite-incremental-fsync: a BGSAVE's dump and a rewrite's
/// base file are synced 4 MB at a time as they are written (each step's writeback started, the
/// one before it waited for), or only at the end. The sync_file_range calls of the children,
/// descriptors blanked, compared with Redis's.
#[test]
fn snapshots_sync_every_4mb_under_incremental_fsync() {
    let tmp = TempDir::new("incremental_fsync");
    let (redis, ferrodis) = both(|kind| {
        let mut seen = Vec::new();
        for incremental in ["yes", "no"] {
            let dir = tmp.sub(&format!("{}-{incremental}", kind.name()));
            let args = [
                "--rdb-save-incremental-fsync",
                incremental,
                "--aof-rewrite-incremental-fsync",
                incremental,
                "--rdbcompression",
                "no",
            ];
            let node = Node::start(kind, &dir, &args);
            let mut c = node.client();
            // About 22 MB of dump: five steps and a bit.
            c.cmd(&["DEBUG", "POPULATE", "200000", "k", "100"]);
            for (command, running) in
                [("BGSAVE", "rdb_bgsave_in_progress"), ("BGREWRITEAOF", "aof_rewrite_in_progress")]
            {
                let calls = syscalls_during(&node, &dir, "sync_file_range", || {
                    c.cmd(&[command]);
                    common::wait_until("the child to finish", || info_field(&mut c, "persistence", running) == "0");
                });
                let calls = calls.iter().map(|call| match call.split_once(", ") {
                    Some((_, rest)) => format!("sync_file_range(FD, {rest}"),
                    None => call.clone(),
                });
                seen.push(format!("{command} incremental {incremental}: {:?}", calls.collect::<Vec<_>>()));
            }
        }
        seen
    });
    assert_eq!(ferrodis, redis, "(ferrodis left)");
    assert!(redis[0].contains("SYNC_FILE_RANGE_WAIT_AFTER"), "redis synced the dump in steps: {redis:?}");
}
