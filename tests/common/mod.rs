//! Test support shared by the black-box tests: spawning ferrodis (the binary cargo built for this test
//! run) or the real `/usr/bin/redis-server` on a free port with a throw-away directory, and a tiny raw
//! RESP client that returns each reply's exact bytes, so tests compare wire bytes and nothing else.
//!
//! The client parses only the framing (RESP2 and RESP3 type bytes) to know where one reply ends; it
//! never interprets a reply, except through `parse_frame` (a reply kept close to the wire, which
//! writes back byte for byte) and `parse_value` (its contents) for tests that look inside.
//!
//! `seeded` holds the driver of the seeded random differential tests.

#![allow(dead_code)]

pub mod seeded;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The real Redis used as the oracle (Debian's 7.0.15; `make test` installs it). Another binary can
/// be named with `FERRODIS_REDIS_SERVER`; otherwise `redis-server` is looked up on PATH.
pub const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// Real Redis, then ferrodis, started with the same `extra` arguments.
pub fn both_servers(extra: &[&str]) -> Vec<Server> {
    vec![RedisServer::with_args(extra), TestServer::with_args(extra)]
}

/// The real redis-server's path, for tests that run it themselves (panics when it is missing).
pub fn redis_server_bin() -> String {
    let Some(bin) = redis_server_path() else {
        panic!(
            "redis-server is missing: the differential tests need the real Redis 7.0 \
             (apt-get install -y redis-server redis-tools, or run `make test`, which installs it)"
        )
    };
    bin.to_string_lossy().into_owned()
}

fn redis_server_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FERRODIS_REDIS_SERVER") {
        return Some(PathBuf::from(p));
    }
    if std::path::Path::new(REDIS_SERVER).exists() {
        return Some(PathBuf::from(REDIS_SERVER));
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("redis-server")).find(|p| p.is_file())
}

/// How long a single reply may take before a test fails instead of hanging.
pub const READ_TIMEOUT: Duration = Duration::from_secs(20);

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A server process on 127.0.0.1, killed (and its directory removed) on drop.
pub struct Server {
    pub name: &'static str,
    pub port: u16,
    pub dir: PathBuf,
    child: Child,
}

/// ferrodis, the binary under test.
pub struct TestServer;
/// The real redis-server.
pub struct RedisServer;

impl TestServer {
    /// Starts ferrodis with persistence off.
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Server {
        Self::with_args(&[])
    }

    /// Starts ferrodis with extra `--name value` arguments appended.
    ///
    /// With `FERRODIS_SELFCHECK=1` in the environment the real redis-server stands in for ferrodis:
    /// every differential test must then pass, which checks the scripts and the harness for
    /// flakiness independently of ferrodis.
    pub fn with_args(extra: &[&str]) -> Server {
        if selfcheck() {
            return RedisServer::with_args(extra);
        }
        Server::start("ferrodis", env!("CARGO_BIN_EXE_ferrodis-server"), None, extra)
    }

    /// Starts ferrodis with `config` as its config file (the first argument, as redis-server takes
    /// it), then the usual arguments and `extra`.
    pub fn with_config(config: &Path, extra: &[&str]) -> Server {
        if selfcheck() {
            return RedisServer::with_config(config, extra);
        }
        Server::start("ferrodis", env!("CARGO_BIN_EXE_ferrodis-server"), Some(config), extra)
    }
}

/// Whether `FERRODIS_SELFCHECK` asks for the real redis-server in place of ferrodis (see
/// `TestServer::with_args`).
pub fn selfcheck() -> bool {
    std::env::var_os("FERRODIS_SELFCHECK").is_some_and(|v| v != "0")
}

/// Address-space cap for the ferrodis under test: a runaway allocation (a parser bug fed hostile
/// input) then fails inside ferrodis instead of driving the CI machine into the OOM killer.
pub const FERRODIS_MAX_ADDRESS_SPACE: u64 = 4 << 30;

fn cap_address_space(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and calls only setrlimit, which is
    // async-signal-safe; it touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: FERRODIS_MAX_ADDRESS_SPACE as libc::rlim_t,
                rlim_max: FERRODIS_MAX_ADDRESS_SPACE as libc::rlim_t,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
}

impl RedisServer {
    /// Starts the real redis-server with persistence off. Panics with a clear message when it is
    /// not installed (`make test` installs it).
    #[allow(clippy::new_ret_no_self)]
    pub fn new() -> Server {
        Self::with_args(&[])
    }

    pub fn with_args(extra: &[&str]) -> Server {
        Server::start("redis", &redis_server_bin(), None, extra)
    }

    /// Starts the real redis-server, or returns None (after saying so) where it is missing and
    /// `FERRODIS_ALLOW_NO_REDIS=1` lets a test pass without its oracle.
    pub fn or_skip() -> Option<Server> {
        if redis_server_path().is_none() && std::env::var("FERRODIS_ALLOW_NO_REDIS").as_deref() == Ok("1") {
            eprintln!("SKIPPED: redis-server not found and FERRODIS_ALLOW_NO_REDIS=1");
            return None;
        }
        Some(Self::new())
    }

    /// Starts the real redis-server with `config` as its config file.
    pub fn with_config(config: &Path, extra: &[&str]) -> Server {
        Server::start("redis", &redis_server_bin(), Some(config), extra)
    }
}

/// Waits up to `limit` for `child` to exit; its status, or None if it still runs.
pub fn wait_child(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits up to `limit` for `child` to exit and returns its exit code; a child still running
/// then is killed, and None stands for that as for an exit by signal.
pub fn exit_code_within(child: &mut std::process::Child, limit: Duration) -> Option<i32> {
    match wait_child(child, limit) {
        Some(status) => status.code(),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    }
}

/// A port that was free a moment ago (the OS picks it; the listener is dropped before returning).
/// A port nothing listens on now, and that this test process has not handed out before: the
/// tests of one binary run in parallel, and the kernel may give a port that one of them got and
/// has not bound yet to another.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0").local_addr().expect("local addr").port();
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

/// CONFIG SET of a listening-port directive (`port`, `tls-port`) to `first`, or to a free port.
/// Another test may bind the port between free_port() and the server's bind; the server then
/// refuses it with "Unable to listen" and a fresh port is tried. Returns the reply and the port.
pub fn config_set_port(c: &mut Client, directive: &str, first: Option<u16>) -> (Vec<u8>, u16) {
    let mut port = first.unwrap_or_else(free_port);
    for _ in 0..5 {
        let reply = c.cmd(&["CONFIG", "SET", directive, &port.to_string()]);
        if !String::from_utf8_lossy(&reply).contains("Unable to listen") {
            return (reply, port);
        }
        port = free_port();
    }
    panic!("CONFIG SET {directive}: no free port was accepted in 5 tries")
}

fn fresh_dir(name: &str) -> PathBuf {
    let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("ferrodis-test-{name}-{}-{n}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create test dir");
    dir
}

impl Server {
    fn start(name: &'static str, bin: &str, config: Option<&Path>, extra: &[&str]) -> Server {
        // The port can be taken between free_port() and the server's bind: retry with another one.
        let mut last_err = String::new();
        // A `--port` among the extra arguments (a restart on the same port) is the port to use.
        let fixed_port = extra.iter().position(|a| *a == "--port").and_then(|i| extra.get(i + 1)?.parse::<u16>().ok());
        for _ in 0..5 {
            let port = fixed_port.unwrap_or_else(free_port);
            let dir = fresh_dir(name);
            let mut args: Vec<String> = config.map(|c| c.to_string_lossy().into_owned()).into_iter().collect();
            args.extend::<Vec<String>>(vec![
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
                "--save".into(),
                "".into(),
                "--appendonly".into(),
                "no".into(),
                "--dir".into(),
                dir.to_string_lossy().into_owned(),
            ]);
            args.extend(extra.iter().map(|s| s.to_string()));
            let log = std::fs::File::create(dir.join("server.log")).expect("create log");
            let log2 = log.try_clone().expect("clone log");
            let mut cmd = Command::new(bin);
            cmd.args(&args).stdin(Stdio::null()).stdout(Stdio::from(log)).stderr(Stdio::from(log2));
            if name == "ferrodis" {
                cap_address_space(&mut cmd);
            }
            let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
            let mut server = Server { name, port, dir, child };
            match server.wait_ready(Duration::from_secs(15)) {
                Ok(()) => return server,
                Err(e) => {
                    last_err = format!("{e}; log:\n{}", server.log());
                }
            }
        }
        panic!("{name} ({bin}) did not start: {last_err}");
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited with {status}"));
            }
            if let Ok(mut c) = Client::try_connect(self.port) {
                if let Ok(reply) = c.try_cmd(&[b"PING"]) {
                    if reply == b"+PONG\r\n" {
                        return Ok(());
                    }
                    // A server that loads a dump at startup answers -LOADING until it is done:
                    // not ready yet (a loaded machine can take a while), not a failure.
                    if !reply.starts_with(b"-LOADING") {
                        return Err(format!("PING answered {}", show(&reply)));
                    }
                }
            }
            if Instant::now() > deadline {
                return Err("no PONG in time".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A new connection to this server.
    pub fn client(&self) -> Client {
        Client::connect(self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `limit` for the process to exit; its status, or None if it still runs.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        wait_child(&mut self.child, limit)
    }

    /// Resident set size in kB, from /proc (Linux).
    pub fn rss_kb(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// What the server wrote to stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A raw RESP connection.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

/// What reading until the server stops talking found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained {
    pub bytes: Vec<u8>,
    /// The server closed (EOF or reset) rather than going quiet.
    pub closed: bool,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        Self::try_connect(port).unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"))
    }

    pub fn try_connect(port: u16) -> std::io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(READ_TIMEOUT))?;
        Ok(Client { stream, buf: Vec::new() })
    }

    /// Sends `argv` as one multibulk request and returns the exact bytes of one reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> Vec<u8> {
        self.try_cmd(argv).unwrap_or_else(|e| panic!("command {}: {e}", show_argv(argv)))
    }

    pub fn try_cmd<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> std::io::Result<Vec<u8>> {
        self.stream.write_all(&encode(argv))?;
        self.read_reply()
    }

    /// Splits `line` as redis-cli does and sends it.
    pub fn line(&mut self, line: &str) -> Vec<u8> {
        let argv = split_args(line.as_bytes()).unwrap_or_else(|| panic!("unbalanced quotes in {line:?}"));
        self.cmd(&argv)
    }

    /// Writes bytes as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads one complete reply (an attribute `|` is returned together with the reply it annotates).
    pub fn read_reply(&mut self) -> std::io::Result<Vec<u8>> {
        loop {
            if let Some(n) = reply_len(&self.buf) {
                let rest = self.buf.split_off(n);
                return Ok(std::mem::replace(&mut self.buf, rest));
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        ErrorKind::UnexpectedEof,
                        format!("connection closed; partial reply {}", show(&self.buf)),
                    ))
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                    return Err(std::io::Error::new(
                        ErrorKind::TimedOut,
                        format!("no complete reply in time; have {}", show(&self.buf)),
                    ))
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads whatever arrives until the server closes, or until it has been quiet for `quiet`.
    pub fn drain(&mut self, quiet: Duration) -> Drained {
        let mut bytes = std::mem::take(&mut self.buf);
        let _ = self.stream.set_read_timeout(Some(quiet));
        let mut closed = false;
        let mut chunk = [0u8; 65536];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    closed = true;
                    break;
                }
            }
        }
        let _ = self.stream.set_read_timeout(Some(READ_TIMEOUT));
        Drained { bytes, closed }
    }

    /// Half-closes the writing side (the server sees EOF after what was sent).
    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

/// `argv` as a RESP multibulk request.
pub fn encode<A: AsRef<[u8]>>(argv: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", argv.len()).into_bytes();
    for a in argv {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Length of the first complete reply in `buf`, or None if it is not complete yet (or the bytes are
/// not RESP, in which case the caller's read times out and shows them).
pub fn reply_len(buf: &[u8]) -> Option<usize> {
    let mut pos = 0;
    skip_reply(buf, &mut pos)?;
    Some(pos)
}

fn read_line<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let start = *pos;
    let rel = buf.get(start..)?.windows(2).position(|w| w == b"\r\n")?;
    *pos = start + rel + 2;
    Some(&buf[start..start + rel])
}

fn line_int(line: &[u8]) -> Option<i64> {
    std::str::from_utf8(line).ok()?.parse().ok()
}

fn skip_reply(buf: &[u8], pos: &mut usize) -> Option<()> {
    let kind = *buf.get(*pos)?;
    *pos += 1;
    let line = read_line(buf, pos)?;
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Some(()),
        b'$' | b'=' | b'!' => {
            let n = line_int(line)?;
            if n < 0 {
                return Some(());
            }
            let end = *pos + n as usize + 2;
            if buf.len() < end {
                return None;
            }
            *pos = end;
            Some(())
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = line_int(line)?;
            let items = if kind == b'%' || kind == b'|' { n.max(0) * 2 } else { n.max(0) };
            for _ in 0..items {
                skip_reply(buf, pos)?;
            }
            if kind == b'|' {
                // An attribute precedes the reply it describes.
                skip_reply(buf, pos)?;
            }
            Some(())
        }
        _ => {
            // Not RESP: treat as an (unparseable) line so the bytes are still reported.
            Some(())
        }
    }
}

/// One reply as it came over the wire, so that it writes back byte for byte (tests that compare
/// parts of replies and show them as RESP, or spell out an expected reply frame by frame).
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `+`, `-`, `:`, `_`, `,`, `#`, `(`, a null bulk or aggregate, and anything not RESP: the type
    /// byte and the rest of the line.
    Line(u8, Vec<u8>),
    /// `$`, `=` (verbatim) and `!` (blob error): the type byte and the payload.
    Blob(u8, Vec<u8>),
    /// `*`, `~`, `>` and `%` (a map's keys and values alternate): the type byte and the elements.
    Agg(u8, Vec<Frame>),
}

impl Frame {
    /// Decodes the first reply in `buf`: the frame and how many bytes it took, or None while
    /// `buf` holds no complete reply (or holds a length that is not a number).
    pub fn parse(buf: &[u8]) -> Option<(Frame, usize)> {
        let mut pos = 0;
        let frame = frame_at(buf, &mut pos)?;
        Some((frame, pos))
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Line(p, l) => {
                out.push(*p);
                out.extend_from_slice(l);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Blob(p, b) => {
                out.push(*p);
                out.extend_from_slice(format!("{}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Frame::Agg(p, items) => {
                let n = if *p == b'%' { items.len() / 2 } else { items.len() };
                out.push(*p);
                out.extend_from_slice(format!("{n}\r\n").as_bytes());
                for i in items {
                    i.write(out);
                }
            }
        }
    }

    /// The frame as RESP bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write(&mut v);
        v
    }

    /// The payload of a blob; None for any other frame.
    pub fn blob(&self) -> Option<&[u8]> {
        match self {
            Frame::Blob(_, b) => Some(b),
            _ => None,
        }
    }

    /// The elements of an aggregate; none for any other frame.
    pub fn items(&self) -> &[Frame] {
        match self {
            Frame::Agg(_, items) => items,
            _ => &[],
        }
    }

    /// The contents without the wire details (which blob or null type carried them).
    pub fn into_value(self) -> Option<Value> {
        Some(match self {
            Frame::Line(b':', l) => Value::Int(line_int(&l)?),
            Frame::Line(b'$' | b'=' | b'!' | b'_', _) => Value::Bulk(None),
            Frame::Line(k @ (b'*' | b'~' | b'>' | b'%'), _) => Value::Agg(k, None),
            Frame::Line(k, l) => Value::Simple(k, l),
            Frame::Blob(_, b) => Value::Bulk(Some(b)),
            Frame::Agg(k, items) => {
                Value::Agg(k, Some(items.into_iter().map(Frame::into_value).collect::<Option<Vec<_>>>()?))
            }
        })
    }
}

fn frame_at(buf: &[u8], pos: &mut usize) -> Option<Frame> {
    let kind = *buf.get(*pos)?;
    *pos += 1;
    let line = read_line(buf, pos)?;
    match kind {
        b'$' | b'=' | b'!' => {
            let n = line_int(line)?;
            if n < 0 {
                return Some(Frame::Line(kind, line.to_vec()));
            }
            let start = *pos;
            let end = start.checked_add(n as usize)?;
            if buf.len() < end.checked_add(2)? {
                return None;
            }
            *pos = end + 2;
            Some(Frame::Blob(kind, buf[start..end].to_vec()))
        }
        b'*' | b'~' | b'>' | b'%' => {
            let n = line_int(line)?;
            if n < 0 {
                return Some(Frame::Line(kind, line.to_vec()));
            }
            let count = if kind == b'%' { n.checked_mul(2)? } else { n };
            let mut items = Vec::new();
            for _ in 0..count {
                items.push(frame_at(buf, pos)?);
            }
            Some(Frame::Agg(kind, items))
        }
        _ => Some(Frame::Line(kind, line.to_vec())),
    }
}

/// Decodes one complete reply (as returned by `read_reply`) as it came over the wire.
pub fn parse_frame(bytes: &[u8]) -> Frame {
    Frame::parse(bytes).map(|(f, _)| f).unwrap_or_else(|| panic!("not a RESP reply: {}", show(bytes)))
}

/// A decoded reply, for tests that look inside (dataset comparison).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Simple(u8, Vec<u8>),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Agg(u8, Option<Vec<Value>>),
}

/// Decodes one complete reply (as returned by `read_reply`).
pub fn parse_value(bytes: &[u8]) -> Value {
    Frame::parse(bytes).and_then(|(f, _)| f.into_value()).unwrap_or_else(|| panic!("not a RESP reply: {}", show(bytes)))
}

/// Bytes as a readable escaped string (like redis-cli's quoting), truncated when very long.
pub fn show(bytes: &[u8]) -> String {
    const MAX: usize = 600;
    let mut s = String::from("\"");
    for &b in bytes.iter().take(MAX) {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    if bytes.len() > MAX {
        s.push_str(&format!("... ({} bytes)", bytes.len()));
    }
    s
}

/// An argument vector as one readable line.
pub fn show_argv<A: AsRef<[u8]>>(argv: &[A]) -> String {
    argv.iter()
        .map(|a| {
            let a = a.as_ref();
            let plain =
                !a.is_empty() && a.iter().all(|&b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\');
            if plain {
                String::from_utf8_lossy(a).into_owned()
            } else {
                show(a)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits a line into arguments the way redis-cli does (sdssplitargs): spaces separate; `"..."`
/// takes `\n \r \t \b \a \xHH` escapes; `'...'` takes only `\'`; a closing quote must be followed by a
/// space or the end of the line. None on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let n = line.len();
    let mut i = 0;
    let space = |c: u8| matches!(c, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c);
    loop {
        while i < n && space(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut cur = Vec::new();
        let (mut dq, mut sq) = (false, false);
        loop {
            if dq {
                let c = *line.get(i)?;
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    let h = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                    cur.push(u8::from_str_radix(h, 16).ok()?);
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        o => o,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if sq {
                let c = *line.get(i)?;
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                match line.get(i) {
                    None => break,
                    Some(&c) if space(c) => break,
                    Some(b'"') => dq = true,
                    Some(b'\'') => sq = true,
                    Some(&c) => cur.push(c),
                }
            }
            i += 1;
        }
        args.push(cur);
    }
}

/// One `name:value` field of an INFO section, as text (panics naming the field when absent).
pub fn info_field(c: &mut Client, section: &str, name: &str) -> String {
    let reply = String::from_utf8_lossy(&c.cmd(&["INFO", section])).into_owned();
    let prefix = format!("{name}:");
    reply
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}: {reply}"))
        .trim()
        .to_string()
}

/// Sends `argv` without waiting for a reply (the client is expected to block, or the reply is
/// read later).
pub fn send(c: &mut Client, argv: &[&str]) {
    c.send_raw(&encode(argv)).expect("send");
}

/// Sends `argv` on `c` (which is expected to block) and waits, on `ctl`, until the server counts
/// one more blocked client: the order of the steps rests on that condition, not on a sleep.
pub fn block(ctl: &mut Client, c: &mut Client, argv: &[&str]) {
    let before: usize = info_field(ctl, "clients", "blocked_clients").parse().expect("blocked_clients");
    send(c, argv);
    wait_blocked(ctl, before + 1, &show_argv(argv));
}

/// How long a condition may take to come true before the test fails (a condition, not a sleep,
/// orders the steps of a test: on a loaded machine a sleep is too short, a bound is just slow).
pub const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// Polls `cond` every few milliseconds until it holds; fails naming `what` after WAIT_LIMIT.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_LIMIT;
    while !cond() {
        assert!(Instant::now() < deadline, "waited {WAIT_LIMIT:?} for {what}: it never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until INFO clients shows exactly `n` blocked clients (a client sent a blocking command
/// and the server has parked it); `what` names the step in the failure.
pub fn wait_blocked(c: &mut Client, n: usize, what: &str) {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let last = info_field(c, "clients", "blocked_clients");
        if last.parse::<usize>().ok() == Some(n) {
            return;
        }
        assert!(Instant::now() < deadline, "after `{what}` blocked_clients is {last}, never {n} within {WAIT_LIMIT:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until a probe connection to `port` is answered -BUSY (a script or function has run past
/// lua-time-limit and the server answers other clients meanwhile). One probe connection per wait:
/// a PING that is never answered fails the wait, naming `what`.
pub fn wait_busy(port: u16, what: &str) {
    let mut probe = Client::connect(port);
    wait_until(&format!("-BUSY for other clients during {what} (port {port})"), || match probe.try_cmd(&["PING"]) {
        Ok(reply) => reply.starts_with(b"-BUSY"),
        Err(e) => panic!("port {port}: a PING sent while waiting for -BUSY during {what} got no reply: {e}"),
    });
}

/// A per-test bound: if the test is still running after `limit`, the whole test process exits
/// with a message naming the test and the last step it reached (so a hang fails, and says where,
/// instead of stalling CI). Dropping the watchdog disarms it.
pub struct Watchdog {
    step: std::sync::Arc<std::sync::Mutex<String>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    pub fn new(test: &str, limit: Duration) -> Watchdog {
        let step = std::sync::Arc::new(std::sync::Mutex::new(String::from("(start)")));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, d, test) = (step.clone(), done.clone(), test.to_string());
        std::thread::spawn(move || {
            let deadline = Instant::now() + limit;
            while Instant::now() < deadline {
                if d.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if !d.load(Ordering::Relaxed) {
                let at = s.lock().map(|g| g.clone()).unwrap_or_default();
                eprintln!("WATCHDOG: test {test} still running after {limit:?}; last step: {at}");
                std::process::exit(124);
            }
        });
        Watchdog { step, done }
    }

    /// Records the step the test is at (shown if the watchdog fires).
    pub fn step(&self, what: impl Into<String>) {
        if let Ok(mut g) = self.step.lock() {
            *g = what.into();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// The mix of replies a random test's generator produced, per command: a generator that drifted
/// into producing mostly errors (bad arguments, wrong types) would still see both servers agree,
/// so the tests assert a minimum share of non-error replies overall and for each command.
#[derive(Default)]
pub struct ReplyMix {
    /// Command name (upper case) -> (replies, error replies).
    per_command: std::collections::BTreeMap<String, (usize, usize)>,
}

impl ReplyMix {
    /// Counts Redis's reply to `argv` (a script wrapping a command, `EVAL body 0 CMD ...`, counts
    /// for the command it wraps).
    pub fn record<A: AsRef<[u8]>>(&mut self, argv: &[A], reply: &[u8]) {
        let name = |a: &A| String::from_utf8_lossy(a.as_ref()).to_uppercase();
        let mut cmd = argv.first().map(name).unwrap_or_default();
        if cmd == "EVAL" && argv.len() > 3 {
            cmd = name(&argv[3]);
        }
        let e = self.per_command.entry(cmd).or_default();
        e.0 += 1;
        if reply.first() == Some(&b'-') || reply.starts_with(b"!") {
            e.1 += 1;
        }
    }

    /// Fails unless at least `overall` of all replies, and `per_command` of the replies of each
    /// command seen at least `min_samples` times, are not errors (shares between 0 and 1).
    /// `exempt` names commands the generator sends to be refused (wrong-type fodder).
    pub fn assert_mostly_non_errors(
        &self,
        what: &str,
        overall: f64,
        per_command: f64,
        min_samples: usize,
        exempt: &[&str],
    ) {
        let (total, errors) = self.per_command.values().fold((0, 0), |(t, e), (ct, ce)| (t + ct, e + ce));
        assert!(total > 0, "{what}: no replies recorded");
        let share = |t: usize, e: usize| (t - e) as f64 / t as f64;
        let mut problems = Vec::new();
        if share(total, errors) < overall {
            problems.push(format!(
                "only {:.0}% of {total} replies are not errors (want {:.0}%)",
                100.0 * share(total, errors),
                100.0 * overall
            ));
        }
        for (cmd, &(t, e)) in &self.per_command {
            if t >= min_samples && share(t, e) < per_command && !exempt.contains(&cmd.as_str()) {
                problems.push(format!(
                    "{cmd}: {e} of its {t} replies are errors (want at least {:.0}% non-errors)",
                    100.0 * per_command
                ));
            }
        }
        assert!(problems.is_empty(), "{what}: the generator produces too many errors:\n  {}", problems.join("\n  "));
    }

    /// One line per command: replies and errors (for the test's output).
    pub fn summary(&self) -> String {
        self.per_command.iter().map(|(c, (t, e))| format!("{c} {t}/{e}err")).collect::<Vec<_>>().join(", ")
    }
}

/// Raises the soft open-files limit towards `want` (up to the hard limit); returns the new soft limit.
pub fn raise_nofile(want: u64) -> u64 {
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        let (cur, max): (u64, u64) = (lim.rlim_cur as _, lim.rlim_max as _);
        if cur < want {
            let target = want.min(max);
            let new = libc::rlimit { rlim_cur: target as libc::rlim_t, rlim_max: lim.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &new) == 0 {
                return target;
            }
        }
        cur
    }
}

/// Every key of the selected database (KEYS *), sorted: the datasets of two servers compare
/// key by key.
#[allow(dead_code)]
pub fn keys_sorted(c: &mut Client) -> Vec<Vec<u8>> {
    match parse_value(&c.cmd(&["KEYS", "*"])) {
        Value::Agg(_, Some(items)) => {
            let mut keys: Vec<Vec<u8>> = items
                .into_iter()
                .map(|v| match v {
                    Value::Bulk(Some(b)) => b,
                    other => panic!("KEYS element {other:?}"),
                })
                .collect();
            keys.sort();
            keys
        }
        other => panic!("KEYS * answered {other:?}"),
    }
}

/// Extra seeds a seeded random test runs from the environment variable `var`, for bug hunts and
/// replays: `100-140`, `5,9`, and with an `r` for RESP3 `r7`, `r100-130` or `r100-r130`. Each
/// seed comes with its protocol (2 or 3); nothing when the variable is unset.
#[allow(dead_code)]
pub fn env_seeds(var: &str) -> Vec<(u64, u8)> {
    let Ok(spec) = std::env::var(var) else { return Vec::new() };
    let seed = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("{var}: bad seed {s:?}"));
    let mut seeds = Vec::new();
    for part in spec.split(',').filter(|p| !p.is_empty()) {
        let (proto, part) = match part.strip_prefix('r') {
            Some(rest) => (3, rest),
            None => (2, part),
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (seed(a), seed(b.strip_prefix('r').unwrap_or(b))),
            None => (seed(part), seed(part)),
        };
        seeds.extend((lo..=hi).map(|s| (s, proto)));
    }
    seeds
}

/// The RDB fixture library (real dump files with their expected contents): the copy kept in
/// tests/fixtures/rdb, or the folder FERRODIS_RDB_FIXTURES names (e.g. one with the big fixture).
#[allow(dead_code)]
pub fn rdb_fixtures() -> PathBuf {
    match std::env::var_os("FERRODIS_RDB_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rdb"),
    }
}

#[allow(dead_code)]
/// XINFO STREAM FULL (RESP2) without Redis 7.2's consumer `active-time`, which ferrodis shows and
/// Redis 7.0 does not: each consumer's flat map shrinks from 10 to 8 elements.
pub fn without_active_time(reply: Vec<u8>) -> Vec<u8> {
    const FIELD: &[u8] = b"$11\r\nactive-time\r\n:";
    let mut out = Vec::with_capacity(reply.len());
    let mut i = 0;
    while i < reply.len() {
        if reply[i..].starts_with(b"*10\r\n$4\r\nname\r\n") {
            out.extend_from_slice(b"*8\r\n");
            i += 5;
        } else if reply[i..].starts_with(FIELD) {
            let end = reply[i + FIELD.len()..].windows(2).position(|w| w == b"\r\n").unwrap();
            i += FIELD.len() + end + 2;
        } else {
            out.push(reply[i]);
            i += 1;
        }
    }
    out
}

/// The `syscalls` (strace's trace= list) process `pid` makes while `during` runs, as strace prints
/// them without the pid: strace attaches to the running process, so a child forked before the
/// attach (a BGSAVE's) is not traced, and one forked during `during` is.
pub fn syscalls_during(pid: u32, tmp: &std::path::Path, syscalls: &str, during: impl FnOnce()) -> Vec<String> {
    let trace = tmp.join(format!("strace.{pid}"));
    let attached = tmp.join(format!("strace.{pid}.err"));
    let mut strace = std::process::Command::new("strace")
        .args(["-f", "-e", &format!("trace={syscalls}"), "-o"])
        .arg(&trace)
        .args(["-p", &pid.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::from(std::fs::File::create(&attached).expect("create strace log")))
        .spawn()
        .expect("strace is missing: this test needs it (apt-get install -y strace)");
    wait_until("strace to attach", || std::fs::read_to_string(&attached).is_ok_and(|t| t.contains("attached")));
    during();
    // SIGINT: strace detaches and writes out what it saw.
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    unsafe { libc::kill(strace.id() as i32, libc::SIGINT) };
    strace.wait().expect("strace exit");
    let text = std::fs::read_to_string(&trace).expect("strace's output");
    // `PID name(args) = result`; exit and signal lines (`+++`, `---`) are not calls.
    text.lines()
        .filter_map(|l| l.split_once(' ').map(|(_, call)| call.trim().to_string()))
        .filter(|call| call.contains('('))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn env_seeds_reads_ranges_and_resp3() {
        std::env::set_var("FERRODIS_TEST_ENV_SEEDS", "5,9-10,r7,r1-r2,r3-3");
        assert_eq!(
            super::env_seeds("FERRODIS_TEST_ENV_SEEDS"),
            vec![(5, 2), (9, 2), (10, 2), (7, 3), (1, 3), (2, 3), (3, 3)]
        );
        assert!(super::env_seeds("FERRODIS_TEST_ENV_SEEDS_UNSET").is_empty());
    }

    use super::*;

    #[test]
    fn reply_mix_refuses_a_generator_of_errors() {
        let mut mix = ReplyMix::default();
        for _ in 0..30 {
            mix.record(&["GET", "k"], b"$1\r\nv\r\n");
            mix.record(&["SET", "k"], b"-ERR wrong number of arguments for 'set' command\r\n");
        }
        let refused = std::panic::catch_unwind(|| mix.assert_mostly_non_errors("t", 0.4, 0.1, 20, &[]));
        assert!(refused.is_err(), "SET answered only errors: must fail");
        mix.assert_mostly_non_errors("t", 0.4, 0.1, 20, &["SET"]);
        let only_errors = std::panic::catch_unwind(|| {
            let mut m = ReplyMix::default();
            m.record(&["EVAL", "body", "0", "ZADD"], b"-ERR x\r\n");
            m.assert_mostly_non_errors("t", 0.5, 0.0, 20, &["ZADD"]);
        });
        assert!(only_errors.is_err(), "an all-error mix fails overall");
    }

    #[test]
    fn frames_write_back_and_decode() {
        for wire in [
            &b"*3\r\n$1\r\na\r\n:-7\r\n$-1\r\n"[..],
            b"%2\r\n+k\r\n~1\r\n,1.5\r\n=8\r\ntxt:abcd\r\n_\r\n",
            b"*-1\r\n",
            b"!3\r\nERR\r\n",
            b"$0\r\n\r\n",
        ] {
            let (f, n) = Frame::parse(wire).expect("complete");
            assert_eq!((show(&f.bytes()), n), (show(wire), wire.len()));
        }
        assert_eq!(Frame::parse(b"*2\r\n:1\r\n"), None);
        assert_eq!(Frame::parse(b"$3\r\nab"), None);
        assert_eq!(Frame::parse(b"$x\r\n"), None);
        assert_eq!(
            parse_value(b"%1\r\n=8\r\ntxt:abcd\r\n*3\r\n_\r\n$-1\r\n*-1\r\n"),
            Value::Agg(
                b'%',
                Some(vec![
                    Value::Bulk(Some(b"txt:abcd".to_vec())),
                    Value::Agg(b'*', Some(vec![Value::Bulk(None), Value::Bulk(None), Value::Agg(b'*', None)]))
                ])
            )
        );
        assert_eq!(parse_value(b":12\r\n"), Value::Int(12));
        assert_eq!(parse_value(b"-ERR x\r\n"), Value::Simple(b'-', b"ERR x".to_vec()));
        assert!(std::panic::catch_unwind(|| parse_value(b":x\r\n")).is_err());
    }

    #[test]
    fn framing() {
        assert_eq!(reply_len(b"+OK\r\n+x"), Some(5));
        assert_eq!(reply_len(b"$3\r\nab"), None);
        assert_eq!(reply_len(b"$-1\r\n"), Some(5));
        assert_eq!(reply_len(b"*2\r\n$1\r\na\r\n:1\r\n"), Some(15));
        assert_eq!(reply_len(b"%1\r\n+a\r\n"), None);
        assert_eq!(reply_len(b"%1\r\n+a\r\n_\r\n"), Some(11));
        assert_eq!(reply_len(b"|1\r\n+a\r\n+b\r\n:3\r\n"), Some(16));
        assert_eq!(reply_len(b"=8\r\ntxt:abcd\r\n"), Some(14));
        assert_eq!(
            split_args(b"set \"a b\" 'c\\'d' \"\\x41\\n\""),
            Some(vec![b"set".to_vec(), b"a b".to_vec(), b"c'd".to_vec(), b"A\n".to_vec()])
        );
        assert_eq!(split_args(b"get \"abc"), None);
        assert_eq!(split_args(b"set \"\" x"), Some(vec![b"set".to_vec(), b"".to_vec(), b"x".to_vec()]));
    }
}
