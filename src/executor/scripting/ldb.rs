//! LDB, Redis 7.0's Lua debugger (SCRIPT DEBUG YES|SYNC, then EVAL): one debugging session at a
//! time, talking to the debugging client over its own socket from inside a Lua line hook, as
//! Redis does: the hook stops at each line while stepping (or at a breakpoint, `redis.breakpoint()`
//! or a timeout), sends its log lines as an array of status replies, and reads debugger commands
//! (step, continue, list, whole, print, break, trace, eval, redis, maxlen, abort, help) with
//! Redis's own forgiving multi-bulk parser. When the script ends, `<endsession>` goes out, the
//! EVAL reply follows and the connection closes.
//!
//! SYNC runs the session in the server itself: nothing else is served until it ends and the
//! script's writes stay, as in Redis. YES forks, as Redis does: the child runs the script on its
//! copy-on-write image of the dataset and talks to the client, the parent forgets the connection
//! (closing its descriptor without a shutdown, so the child's copy keeps it open) and goes on;
//! whatever the script writes is lost with the child. Forking was chosen over running on a copy
//! in-process because the copy fork gives is exact (every db, the script cache, the config) and
//! costs page tables, not a walk of the dataset, and the server keeps serving while a user
//! steps through a script, which is the point of YES. The child never returns into the server:
//! it writes the reply itself and `_exit`s (the parent reaps it from cron). Its commands run
//! through `call()`, which may queue AOF and replica output, and keyspace notifications for
//! other clients, that the child never sends.
//!
//! The socket is the connection task's: while the EVAL runs, that task waits for the batch's
//! replies and does not read, so the session may read and write the descriptor directly (what
//! the connection had already read past the EVAL stays there, as Redis leaves its query
//! buffer). The descriptor stays non-blocking (its flags are the task's): reads and writes here
//! wait with poll, a write for at most 5 s as Redis's send timeout. A TLS connection's bytes go
//! through its TLS session (`handoff::tls_stream`), free while its task waits; a forked child
//! uses its copy of the session, as Redis's child uses its copy of the SSL object.
//! While a SYNC session waits for the client, a SIGTERM/SIGINT ends the wait, as the signal's
//! EINTR ends Redis's blocking read.
//!
//! The hook is a raw C hook (not mlua's): stack level 0 is then the script's own frame, as the
//! `print` and `trace` commands expect. Everything it does that can raise runs in protected calls,
//! except the final raise, made from a frame that owns nothing.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};
use std::os::fd::RawFd;

use mlua::ffi;

use crate::executor::clients::Client;
use crate::executor::handoff::SharedPlainIo;
use crate::executor::State;
use crate::resp::Reply;

/// How SCRIPT DEBUG asked the client's next EVAL to be debugged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// YES: a forked session; the dataset is left as it was.
    Fork,
    /// SYNC: the server blocks, changes are kept.
    Sync,
}

const MAX_BREAKPOINTS: usize = 64;
const MAX_LEN_DEFAULT: i64 = 256;
/// Values nested deeper than this print as a marker (Redis's LUA_MINSTACK/2).
const MAX_VALUE_DEPTH: u32 = 10;
/// Instructions between two count events, which check the timeout.
const COUNT_EVERY: c_int = 100_000;
/// Bytes a client may send without completing a command.
const MAX_CLIENT_BUFFER: usize = 1 << 20;
/// How long a log write may wait for the client (Redis's connSendTimeout of 5 s).
const SEND_TIMEOUT_MS: i32 = 5000;

struct Session {
    fd: RawFd,
    /// The TLS session of a TLS client: the debugger's bytes go through it.
    tls: Option<SharedPlainIo>,
    forked: bool,
    logs: Vec<Vec<u8>>,
    bp: Vec<i32>,
    /// Stop at the next line regardless of breakpoints.
    step: bool,
    /// `redis.breakpoint()` was called.
    luabp: bool,
    src: Vec<Vec<u8>>,
    currentline: i32,
    /// Debugger command bytes read and not parsed yet.
    cbuf: Vec<u8>,
    /// Reply and value logs are cut at this many bytes (0: unlimited).
    maxlen: i64,
    maxlen_hint_sent: bool,
    /// When the script (re)started running: the timeout counts from here.
    started_us: u64,
    /// busy-reply-threshold in ms, 0 for the 5 s default.
    threshold_ms: i64,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
    /// Forked sessions not reaped yet.
    static CHILDREN: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

fn with<R>(f: impl FnOnce(&mut Session) -> R) -> Option<R> {
    SESSION.with(|s| s.borrow_mut().as_mut().map(f))
}

/// A session is running (the script being run is debugged).
pub fn active() -> bool {
    SESSION.with(|s| s.borrow().is_some())
}

/// The session is stepping: redis.call logs its commands and replies (ldbIsEnabled).
pub fn enabled() -> bool {
    with(|s| s.step).unwrap_or(false)
}

/// Adds a log line when a session is stepping.
pub fn log_if_enabled(entry: impl FnOnce() -> Vec<u8>) {
    with(|s| {
        if s.step {
            s.logs.push(entry());
        }
    });
}

/// Logs a command's reply (its encoded bytes) when stepping, as `<reply> ...`.
pub fn log_reply_if_enabled(reply: &[u8]) {
    with(|s| {
        if s.step {
            let mut line = b"<reply> ".to_vec();
            let mut pos = 0;
            human_reply(reply, &mut pos, &mut line);
            s.log_max_len(line);
        }
    });
}

/// Logs the `<redis> cmd args` line of a command a stepping script runs.
pub fn log_command_if_enabled(argv: &[bytes::Bytes]) {
    log_if_enabled(|| {
        let mut line = b"<redis>".to_vec();
        for (j, arg) in argv.iter().enumerate() {
            if j == 10 {
                line.extend_from_slice(format!(" ... ({} more)", argv.len() - j - 1).as_bytes());
                break;
            }
            line.push(b' ');
            line.extend_from_slice(arg);
        }
        line
    });
}

impl Session {
    fn log(&mut self, entry: impl Into<Vec<u8>>) {
        self.logs.push(entry.into());
    }

    /// Logs `entry` cut at maxlen, with a hint the first time one is cut.
    fn log_max_len(&mut self, mut entry: Vec<u8>) {
        let mut trimmed = false;
        if self.maxlen > 0 && entry.len() as i64 > self.maxlen {
            entry.truncate(self.maxlen as usize);
            entry.extend_from_slice(b" ...");
            trimmed = true;
        }
        self.logs.push(entry);
        if trimmed && !self.maxlen_hint_sent {
            self.maxlen_hint_sent = true;
            self.log("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.");
        }
    }

    /// Sends the logs as an array of status replies (line breaks become spaces) and empties them.
    fn send_logs(&mut self) {
        let mut proto = format!("*{}\r\n", self.logs.len()).into_bytes();
        for entry in self.logs.drain(..) {
            proto.push(b'+');
            proto.extend(entry.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
            proto.extend_from_slice(b"\r\n");
        }
        // Errors are left to the next read, which ends the session.
        write_all(self.fd, self.tls.as_ref(), &proto);
    }

    fn source_line(&self, line: i32) -> &[u8] {
        match usize::try_from(line - 1).ok().and_then(|i| self.src.get(i)) {
            Some(l) => l,
            None => b"<out of range source code line>",
        }
    }

    fn is_breakpoint(&self, line: i32) -> bool {
        self.bp.contains(&line)
    }

    fn log_source_line(&mut self, line: i32) {
        let bp = self.is_breakpoint(line);
        let prefix = match (self.currentline == line, bp) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut entry = format!("{prefix}{line:<3} ").into_bytes();
        entry.extend_from_slice(self.source_line(line));
        self.logs.push(entry);
    }

    /// Lists the source, all of it (`around` 0) or `context` lines either side of `around`.
    fn list(&mut self, around: i32, context: i32) {
        for j in 1..=self.src.len() as i32 {
            if around != 0 && (around as i64 - j as i64).abs() > context as i64 {
                continue;
            }
            self.log_source_line(j);
        }
    }

    fn break_command(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 1 {
            if self.bp.is_empty() {
                self.log("No breakpoints set. Use 'b <line>' to add one.");
            } else {
                self.log(format!("{} breakpoints set:", self.bp.len()));
                for line in self.bp.clone() {
                    self.log_source_line(line);
                }
            }
            return;
        }
        for arg in &argv[1..] {
            let Some(line) = crate::util::num::parse_i64(arg) else {
                let mut entry = b"Invalid argument:'".to_vec();
                entry.extend_from_slice(arg);
                entry.push(b'\'');
                self.log(entry);
                continue;
            };
            if line == 0 {
                self.bp.clear();
                self.log("All breakpoints removed.");
            } else if line > 0 {
                if self.bp.len() == MAX_BREAKPOINTS {
                    self.log("Too many breakpoints set.");
                } else if line <= self.src.len() as i64 && !self.is_breakpoint(line as i32) {
                    self.bp.push(line as i32);
                    self.list(line as i32, 1);
                } else {
                    self.log("Wrong line number.");
                }
            } else {
                let line = line.unsigned_abs().min(i32::MAX as u64) as i32;
                match self.bp.iter().position(|&l| l == line) {
                    Some(i) => {
                        self.bp.remove(i);
                        self.log("Breakpoint removed.");
                    }
                    None => self.log("No breakpoint in the specified line."),
                }
            }
        }
    }

    fn maxlen_command(&mut self, argv: &[Vec<u8>]) {
        if argv.len() == 2 {
            let mut value = atoi(&argv[1]);
            self.maxlen_hint_sent = true;
            if value != 0 && value <= 60 {
                value = 60;
            }
            self.maxlen = value;
        }
        if self.maxlen != 0 {
            self.log(format!("<value> replies are truncated at {} bytes.", self.maxlen));
        } else {
            self.log("<value> replies are unlimited.");
        }
    }
}

/// Starts a session for the client on `fd` running `body`; `threshold_ms` is
/// busy-reply-threshold.
pub fn start(fd: RawFd, tls: Option<SharedPlainIo>, forked: bool, body: &[u8], threshold_ms: i64) {
    let mut src = body;
    while let [rest @ .., b'\n' | b'\r'] = src {
        src = rest;
    }
    let src = if src.is_empty() { Vec::new() } else { src.split(|&c| c == b'\n').map(|l| l.to_vec()).collect() };
    SESSION.with(|s| {
        *s.borrow_mut() = Some(Session {
            fd,
            tls,
            forked,
            logs: Vec::new(),
            bp: Vec::new(),
            step: true,
            luabp: false,
            src,
            currentline: 0,
            cbuf: Vec::new(),
            maxlen: MAX_LEN_DEFAULT,
            maxlen_hint_sent: false,
            started_us: crate::util::clock::mono_us(),
            threshold_ms,
        })
    });
}

/// Ends the session: the remaining logs and `<endsession>` go out.
pub fn end() {
    let session = SESSION.with(|s| s.borrow_mut().take());
    if let Some(mut s) = session {
        s.log("<endsession>");
        s.send_logs();
    }
}

/// Notes a forked session's child, to be reaped from cron.
fn add_child(pid: i32) {
    CHILDREN.with(|c| c.borrow_mut().push(pid));
}

/// Reaps forked sessions that ended (cron).
pub fn reap_children() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    CHILDREN.with(|c| {
        c.borrow_mut().retain(|&pid| {
            !matches!(
                waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)),
                Ok(WaitStatus::Exited(..)) | Ok(WaitStatus::Signaled(..)) | Err(_)
            )
        })
    });
}

/// Kills the forked sessions (at shutdown).
pub fn kill_children() {
    CHILDREN.with(|c| {
        for pid in c.borrow_mut().drain(..) {
            tracing::warn!("Killing debugging session {pid}");
            // SAFETY: a signal to a child of ours, not reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
}

/// Where a debugged EVAL goes on after `begin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// SYNC: this server runs the session.
    Sync,
    /// YES, in the child: it runs the session, then exits.
    Child,
    /// YES, in the parent: the child has the connection; this client goes, silently.
    Parent,
}

/// Starts the session of `client`'s debugged EVAL of `body` (ldbStartSession): forks for YES.
/// `Err` when the fork failed.
pub fn begin(st: &mut State, client: &mut Client, mode: Mode, body: &[u8]) -> Result<Side, String> {
    let side = match mode {
        Mode::Sync => {
            tracing::warn!("Redis synchronous debugging eval session started");
            Side::Sync
        }
        Mode::Fork => {
            // SAFETY: the child runs the script and `_exit`s from `finish`; it never returns to
            // the event loop or touches the runtime (see the module header for what it shares).
            match unsafe { nix::unistd::fork() } {
                Err(e) => return Err(e.desc().to_string()),
                Ok(nix::unistd::ForkResult::Child) => {
                    crate::executor::snapshot::become_child(st, "redis-server");
                    // The parent's SIGTERM/SIGINT are not the child's business.
                    // SAFETY: plain signal dispositions for this process.
                    unsafe {
                        libc::signal(libc::SIGTERM, libc::SIG_IGN);
                        libc::signal(libc::SIGINT, libc::SIG_IGN);
                    }
                    tracing::warn!("Redis forked for debugging eval");
                    Side::Child
                }
                Ok(nix::unistd::ForkResult::Parent { child }) => {
                    add_child(child.as_raw());
                    st.stats.persistence.total_forks += 1;
                    client.lua_debug = None;
                    client.reply_off = true;
                    client.close_after_reply = true;
                    client.handle.detach();
                    return Ok(Side::Parent);
                }
            }
        }
    };
    let tls = client.info.tls.then(|| crate::executor::handoff::tls_stream(client.id)).flatten();
    start(client.info.fd, tls, side == Side::Child, body, st.config.busy_reply_threshold);
    Ok(side)
}

/// Ends the session (ldbEndSession): `<endsession>`, then the reply; the connection closes after
/// it. A forked child writes the reply itself and exits here.
pub fn finish(client: &mut Client, side: Side, reply: Reply) -> Reply {
    end();
    if side == Side::Child {
        let mut out = Vec::new();
        crate::resp::writer::write_reply(&mut out, &reply, client.proto);
        let tls = client.info.tls.then(|| crate::executor::handoff::tls_stream(client.id)).flatten();
        write_all(client.info.fd, tls.as_ref(), &out);
        tracing::warn!("Lua debugging session child exiting");
        // SAFETY: ends the child without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(0) }
    }
    tracing::warn!("Redis synchronous debugging eval session ended");
    client.close_after_reply = true;
    reply
}

/// Installs the debugger's line and count hook on the VM's main state for the run.
pub fn install_hook(lua: &mlua::Lua) -> mlua::Result<()> {
    // SAFETY: a protected call that only sets the hook of the state it runs on, which is the
    // state scripts run on.
    unsafe {
        lua.exec_raw::<()>((), |state| {
            ffi::lua_sethook(state, Some(line_hook), ffi::LUA_MASKLINE | ffi::LUA_MASKCOUNT, COUNT_EVERY);
        })
    }
}

/// What the hook decided: go on, or raise this message as the script's error.
type Verdict = Option<&'static str>;

/// The hook: Redis's luaLdbLineHook.
unsafe extern "C-unwind" fn line_hook(state: *mut ffi::lua_State, ar: *mut ffi::lua_Debug) {
    // SAFETY (whole function): `ar` is the activation record Lua passes the hook; level 0 is the
    // function that is running. Rust values live only inside `decide`, which has returned before
    // the raise.
    let event = (*ar).event;
    ffi::lua_getstack(state, 0, ar);
    ffi::lua_getinfo(state, c"Sl".as_ptr(), ar);
    let line = (*ar).currentline;
    let short_src = CStr::from_ptr((*ar).short_src.as_ptr());
    let in_script = memchr::memmem::find(short_src.to_bytes(), b"user_script").is_some();
    if let Some(message) = decide(state, event, line, in_script) {
        super::stack::push_error(state, message.as_bytes());
        ffi::lua_error(state);
    }
}

unsafe fn decide(state: *mut ffi::lua_State, event: c_int, line: i32, in_script: bool) -> Verdict {
    let stop = with(|s| {
        s.currentline = line;
        let bp = s.is_breakpoint(line) || s.luabp;
        if !in_script {
            return None;
        }
        let mut timeout = false;
        if event == ffi::LUA_HOOKCOUNT && !s.step && !bp {
            let limit = if s.threshold_ms > 0 { s.threshold_ms as u64 } else { 5000 };
            if crate::util::clock::mono_us().saturating_sub(s.started_us) / 1000 >= limit {
                timeout = true;
                s.step = true;
            } else {
                return None;
            }
        }
        if !(s.step || bp) {
            return None;
        }
        let reason = if bp {
            if s.luabp {
                "redis.breakpoint() called"
            } else {
                "break point"
            }
        } else if timeout {
            "timeout reached, infinite loop?"
        } else {
            "step over"
        };
        s.step = false;
        s.luabp = false;
        s.log(format!("* Stopped at {line}, stop reason = {reason}"));
        s.log_source_line(line);
        s.send_logs();
        Some(timeout)
    })
    .flatten();
    let timeout = stop?;
    let verdict = match repl(state) {
        Err(Some(message)) => Some(message),
        Err(None) if timeout => Some("timeout during Lua debugging with client closing connection"),
        _ => None,
    };
    with(|s| s.started_us = crate::util::clock::mono_us());
    verdict
}

/// Reads and runs debugger commands until one resumes the script. `Err(None)`: the client is
/// gone (the script then runs on without stopping); `Err(Some(msg))`: the script must fail.
unsafe fn repl(state: *mut ffi::lua_State) -> Result<(), Option<&'static str>> {
    loop {
        let argv = loop {
            let parsed = with(|s| {
                let parsed = parse_command(&s.cbuf);
                if let Parsed::Command(_) = parsed {
                    // Redis drops the whole buffer once a command is parsed.
                    s.cbuf.clear();
                }
                parsed
            })
            .ok_or(None)?;
            match parsed {
                Parsed::Command(argv) => break argv,
                Parsed::Error => return Err(Some("protocol error")),
                Parsed::More => {}
            }
            let Some((fd, tls, forked)) = with(|s| (s.fd, s.tls.clone(), s.forked)) else { return Err(None) };
            let mut buf = [0u8; 1024];
            let n = read_some(fd, tls.as_ref(), &mut buf, !forked);
            if n == 0 {
                with(|s| {
                    s.step = false;
                    s.bp.clear();
                });
                return Err(None);
            }
            let overflow = with(|s| {
                s.cbuf.extend_from_slice(&buf[..n]);
                if s.cbuf.len() > MAX_CLIENT_BUFFER {
                    s.cbuf = Vec::new();
                    true
                } else {
                    false
                }
            });
            if overflow == Some(true) {
                return Err(Some("max client buffer reached"));
            }
        };
        let name = argv[0].to_ascii_lowercase();
        let is = |short: &str, long: &str| name == short.as_bytes() || name == long.as_bytes();
        if is("h", "help") {
            with(|s| {
                for line in HELP {
                    s.log(*line);
                }
                s.send_logs();
            });
        } else if is("s", "step") || is("n", "next") {
            with(|s| s.step = true);
            return Ok(());
        } else if is("c", "continue") {
            return Ok(());
        } else if is("t", "trace") {
            trace(state);
            with(|s| s.send_logs());
        } else if is("m", "maxlen") {
            with(|s| {
                s.maxlen_command(&argv);
                s.send_logs();
            });
        } else if is("b", "break") {
            with(|s| {
                s.break_command(&argv);
                s.send_logs();
            });
        } else if is("e", "eval") {
            eval(state, &argv);
            with(|s| s.send_logs());
        } else if is("a", "abort") {
            return Err(Some("script aborted for user request"));
        } else if argv.len() > 1 && is("r", "redis") {
            redis(state, &argv);
            with(|s| s.send_logs());
        } else if is("p", "print") {
            if argv.len() == 2 {
                print_var(state, &argv[1]);
            } else {
                print_all(state);
            }
            with(|s| s.send_logs());
        } else if is("l", "list") {
            with(|s| {
                let mut around = s.currentline;
                let mut context = 5;
                if argv.len() > 1 {
                    let n = atoi(&argv[1]);
                    if n > 0 {
                        around = n.min(i32::MAX as i64) as i32;
                    }
                }
                if argv.len() > 2 {
                    context = atoi(&argv[2]).clamp(i32::MIN as i64, i32::MAX as i64) as i32;
                }
                s.list(around, context);
                s.send_logs();
            });
        } else if is("w", "whole") {
            with(|s| {
                s.list(1, 1_000_000);
                s.send_logs();
            });
        } else {
            with(|s| {
                s.log("<error> Unknown Redis Lua debugger command or wrong number of arguments.");
                s.send_logs();
            });
        }
    }
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// `trace`: the script's frames from the current one out.
unsafe fn trace(state: *mut ffi::lua_State) {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(state, level, &mut ar) != 0 {
        ffi::lua_getinfo(state, c"Snl".as_ptr(), &mut ar);
        let short_src = CStr::from_ptr(ar.short_src.as_ptr());
        if memchr::memmem::find(short_src.to_bytes(), b"user_script").is_some() {
            let name = if ar.name.is_null() {
                "top level".to_string()
            } else {
                CStr::from_ptr(ar.name).to_string_lossy().into_owned()
            };
            let line = ar.currentline;
            with(|s| {
                s.log(format!("{} {}:", if level == 0 { "In" } else { "From" }, name));
                s.log_source_line(line);
            });
        }
        level += 1;
    }
    if level == 0 {
        with(|s| s.log("<error> Can't retrieve Lua stack."));
    }
}

/// `print <var>`: the first local of that name from the current frame out, else KEYS or ARGV.
unsafe fn print_var(state: *mut ffi::lua_State, name: &[u8]) {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    let mut level = 0;
    while ffi::lua_getstack(state, level, &mut ar) != 0 {
        level += 1;
        let mut i = 1;
        loop {
            let local = ffi::lua_getlocal(state, &ar, i);
            if local.is_null() {
                break;
            }
            i += 1;
            if CStr::from_ptr(local).to_bytes() == name {
                log_top_value(state, b"<value> ".to_vec());
                ffi::lua_settop(state, -2);
                return;
            }
            ffi::lua_settop(state, -2);
        }
    }
    if name == b"ARGV" || name == b"KEYS" {
        let cname = if name == b"ARGV" { c"ARGV" } else { c"KEYS" };
        ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, cname.as_ptr());
        log_top_value(state, b"<value> ".to_vec());
        ffi::lua_settop(state, -2);
    } else {
        with(|s| s.log("No such variable."));
    }
}

/// `print`: every local of the current frame.
unsafe fn print_all(state: *mut ffi::lua_State) {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    let mut vars = 0;
    if ffi::lua_getstack(state, 0, &mut ar) != 0 {
        let mut i = 1;
        loop {
            let local = ffi::lua_getlocal(state, &ar, i);
            if local.is_null() {
                break;
            }
            i += 1;
            let name = CStr::from_ptr(local).to_bytes();
            if memchr::memmem::find(name, b"(*temporary)").is_none() {
                let mut prefix = b"<value> ".to_vec();
                prefix.extend_from_slice(name);
                prefix.extend_from_slice(b" = ");
                log_top_value(state, prefix);
                vars += 1;
            }
            ffi::lua_settop(state, -2);
        }
    }
    if vars == 0 {
        with(|s| s.log("No local variables in the current context."));
    }
}

/// `eval <code>`: the code as an expression (`return ...`), else as a statement, in the
/// scripts' environment, in a frame of its own.
unsafe fn eval(state: *mut ffi::lua_State, argv: &[Vec<u8>]) {
    let code = argv[1..].join(&b' ');
    let mut expr = b"return ".to_vec();
    expr.extend_from_slice(&code);
    let load =
        |text: &[u8]| ffi::luaL_loadbuffer(state, text.as_ptr() as *const c_char, text.len(), c"@ldb_eval".as_ptr());
    if load(&expr) != 0 {
        ffi::lua_settop(state, -2);
        if load(&code) != 0 {
            log_error_on_top(state);
            return;
        }
    }
    // The scripts' environment (the sandbox), so `redis`, KEYS and ARGV are there and globals
    // stay protected.
    if push_script_env(state) {
        ffi::lua_setfenv(state, -2);
    }
    if ffi::lua_pcall(state, 0, 1, 0) != 0 {
        log_error_on_top(state);
        return;
    }
    log_top_value(state, b"<retval> ".to_vec());
    ffi::lua_settop(state, -2);
}

/// Pushes the environment of the running script (its function's), true if there is one.
unsafe fn push_script_env(state: *mut ffi::lua_State) -> bool {
    let mut ar: ffi::lua_Debug = std::mem::zeroed();
    if ffi::lua_getstack(state, 0, &mut ar) == 0 || ffi::lua_getinfo(state, c"f".as_ptr(), &mut ar) == 0 {
        return false;
    }
    ffi::lua_getfenv(state, -1);
    ffi::lua_remove(state, -2);
    true
}

unsafe fn log_error_on_top(state: *mut ffi::lua_State) {
    let mut entry = b"<error> ".to_vec();
    let mut len = 0;
    let ptr = ffi::lua_tolstring(state, -1, &mut len);
    if !ptr.is_null() {
        entry.extend_from_slice(std::slice::from_raw_parts(ptr as *const u8, len));
    } else {
        // A non-string error (a table from redis.call): its `err` field, if any.
        ffi::lua_getfield(state, -1, c"err".as_ptr());
        let ptr = ffi::lua_tolstring(state, -1, &mut len);
        if !ptr.is_null() {
            entry.extend_from_slice(std::slice::from_raw_parts(ptr as *const u8, len));
        }
        ffi::lua_settop(state, -2);
    }
    with(|s| s.log(entry));
    ffi::lua_settop(state, -2);
}

/// `redis <cmd> ...`: runs the command through redis.call with logging on, so the command and
/// its reply are logged.
unsafe fn redis(state: *mut ffi::lua_State, argv: &[Vec<u8>]) {
    if ffi::lua_checkstack(state, argv.len() as c_int + 1) == 0 {
        with(|s| {
            let mut line = b"<reply> ".to_vec();
            let mut pos = 0;
            human_reply(b"max lua stack reached", &mut pos, &mut line);
            s.log_max_len(line);
        });
        return;
    }
    ffi::lua_getfield(state, ffi::LUA_GLOBALSINDEX, c"redis".as_ptr());
    ffi::lua_getfield(state, -1, c"call".as_ptr());
    for arg in &argv[1..] {
        ffi::lua_pushlstring(state, arg.as_ptr() as *const c_char, arg.len());
    }
    with(|s| s.step = true);
    ffi::lua_pcall(state, argv.len() as c_int - 1, 1, 0);
    with(|s| s.step = false);
    ffi::lua_settop(state, -3);
}

/// Logs the value on top of the stack (not popped), cut at maxlen.
unsafe fn log_top_value(state: *mut ffi::lua_State, mut entry: Vec<u8>) {
    cat_value(state, ffi::lua_gettop(state), 0, &mut entry);
    with(|s| s.log_max_len(entry));
}

/// redis.debug(...): logs its arguments, when a session runs.
pub(super) unsafe extern "C-unwind" fn redis_debug(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: reads the C function's own arguments; the pushes of `cat_value` are checked.
    let Some(line) = with(|s| s.currentline) else { return 0 };
    let argc = ffi::lua_gettop(state);
    let mut entry = format!("<debug> line {line}: ").into_bytes();
    for i in 1..=argc {
        cat_value(state, i, 0, &mut entry);
        if i != argc {
            entry.extend_from_slice(b", ");
        }
    }
    with(|s| s.log(entry));
    0
}

/// redis.breakpoint(): stops at the next line when a session runs; true if so.
pub(super) unsafe extern "C-unwind" fn redis_breakpoint(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: one push, within the C function's minimum stack.
    let on = with(|s| s.luabp = true).is_some();
    ffi::lua_pushboolean(state, on as c_int);
    1
}

/// Appends a readable form of the value at `idx` (absolute) to `out` (ldbCatStackValue).
unsafe fn cat_value(state: *mut ffi::lua_State, idx: c_int, level: u32, out: &mut Vec<u8>) {
    if level == MAX_VALUE_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    let t = ffi::lua_type(state, idx);
    match t {
        ffi::LUA_TSTRING => {
            let mut len = 0;
            let ptr = ffi::lua_tolstring(state, idx, &mut len);
            repr(std::slice::from_raw_parts(ptr as *const u8, len), out);
        }
        ffi::LUA_TBOOLEAN => {
            out.extend_from_slice(if ffi::lua_toboolean(state, idx) != 0 { b"true" } else { b"false" })
        }
        ffi::LUA_TNUMBER => out.extend_from_slice(crate::util::num::fmt_g(ffi::lua_tonumber(state, idx), 6).as_bytes()),
        ffi::LUA_TNIL => out.extend_from_slice(b"nil"),
        ffi::LUA_TTABLE => {
            if ffi::lua_checkstack(state, 3) == 0 {
                out.extend_from_slice(b"<max recursion level reached! Nested table?>");
                return;
            }
            let mut expected = 1.0;
            let mut is_array = true;
            let (mut as_array, mut as_map) = (Vec::new(), Vec::new());
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, idx) != 0 {
                let top = ffi::lua_gettop(state);
                if is_array
                    && (ffi::lua_type(state, top - 1) != ffi::LUA_TNUMBER
                        || ffi::lua_tonumber(state, top - 1) != expected)
                {
                    is_array = false;
                }
                cat_value(state, top, level + 1, &mut as_array);
                as_array.extend_from_slice(b"; ");
                as_map.push(b'[');
                cat_value(state, top - 1, level + 1, &mut as_map);
                as_map.extend_from_slice(b"]=");
                cat_value(state, top, level + 1, &mut as_map);
                as_map.extend_from_slice(b"; ");
                ffi::lua_settop(state, -2);
                expected += 1.0;
            }
            for r in [&mut as_array, &mut as_map] {
                if !r.is_empty() {
                    r.truncate(r.len() - 2);
                }
            }
            out.push(b'{');
            out.extend_from_slice(if is_array { &as_array } else { &as_map });
            out.push(b'}');
        }
        ffi::LUA_TFUNCTION | ffi::LUA_TUSERDATA | ffi::LUA_TTHREAD | ffi::LUA_TLIGHTUSERDATA => {
            let name = match t {
                ffi::LUA_TFUNCTION => "function",
                ffi::LUA_TUSERDATA => "userdata",
                ffi::LUA_TTHREAD => "thread",
                _ => "light-userdata",
            };
            let p = ffi::lua_topointer(state, idx);
            out.extend_from_slice(format!("\"{name}@{p:p}\"").as_bytes());
        }
        _ => out.extend_from_slice(b"\"<unknown-lua-type>\""),
    }
}

/// A quoted, escaped string (sdscatrepr).
fn repr(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', c]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// Appends an encoded reply in the debugger's readable form (ldbRedisProtocolToHuman); stops
/// at anything it does not know.
fn human_reply(reply: &[u8], pos: &mut usize, out: &mut Vec<u8>) -> bool {
    let Some(rest) = reply.get(*pos..) else { return false };
    let Some(&kind) = rest.first() else { return false };
    let end = memchr::memmem::find(rest, b"\r\n").unwrap_or(rest.len());
    let line = &rest[..end];
    let body = &line[1..];
    let next = *pos + end + 2;
    let count = || crate::util::num::parse_i64(body).unwrap_or(0);
    match kind {
        b':' => {
            out.extend_from_slice(body);
            *pos = next;
        }
        b'$' => {
            let n = count();
            *pos = next;
            if n < 0 {
                out.extend_from_slice(b"NULL");
            } else {
                let data = reply.get(next..next.saturating_add(n as usize).min(reply.len())).unwrap_or_default();
                repr(data, out);
                *pos = next + n as usize + 2;
            }
        }
        b'+' | b'-' => {
            repr(line, out);
            *pos = next;
        }
        b'*' | b'~' => {
            let n = count();
            *pos = next;
            if kind == b'*' && n < 0 {
                out.extend_from_slice(b"NULL");
                return true;
            }
            out.extend_from_slice(if kind == b'*' { b"[" } else { b"~(" });
            for j in 0..n {
                if !human_reply(reply, pos, out) {
                    return false;
                }
                if j != n - 1 {
                    out.push(b',');
                }
            }
            out.push(if kind == b'*' { b']' } else { b')' });
        }
        b'%' => {
            let n = count();
            *pos = next;
            out.push(b'{');
            for j in 0..n {
                if !human_reply(reply, pos, out) {
                    return false;
                }
                out.extend_from_slice(b" => ");
                if !human_reply(reply, pos, out) {
                    return false;
                }
                if j != n - 1 {
                    out.push(b',');
                }
            }
            out.push(b'}');
        }
        b'_' => {
            out.extend_from_slice(b"(null)");
            *pos = next;
        }
        b'#' => {
            out.extend_from_slice(if body.first() == Some(&b't') { b"#true" } else { b"#false" });
            *pos = next;
        }
        b',' => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(body);
            *pos = next;
        }
        _ => return false,
    }
    true
}

enum Parsed {
    Command(Vec<Vec<u8>>),
    More,
    Error,
}

/// C's atoi: optional blanks and sign, then digits, 0 when there are none.
fn atoi(s: &[u8]) -> i64 {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'-' || s[i] == b'+') {
        neg = s[i] == b'-';
        i += 1;
    }
    let mut v: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.saturating_mul(10).saturating_add((s[i] - b'0') as i64);
        i += 1;
    }
    let v = if neg { -v } else { v };
    v.clamp(i32::MIN as i64, i32::MAX as i64)
}

/// Where `pat` starts at or after `from`, searching as C's strstr does (a NUL ends the text).
fn find_c(buf: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
    let text = buf.get(from..)?;
    let text = &text[..memchr::memchr(0, text).unwrap_or(text.len())];
    memchr::memmem::find(text, pat).map(|i| from + i)
}

/// Redis's debugger command parser (ldbReplParseCommand): one multi-bulk command of 1 to 1024
/// arguments of 1 to 1024 bytes each; anything else is a protocol error.
fn parse_command(buf: &[u8]) -> Parsed {
    if buf.is_empty() {
        return Parsed::More;
    }
    let head = &buf[..memchr::memchr(0, buf).unwrap_or(buf.len())];
    let Some(star) = memchr::memchr(b'*', head) else { return Parsed::Error };
    let Some(crlf) = find_c(buf, star, b"\r\n") else { return Parsed::More };
    let argc = atoi(&buf[star + 1..crlf]);
    if !(1..=1024).contains(&argc) {
        return Parsed::Error;
    }
    let mut p = crlf + 2;
    let mut argv = Vec::with_capacity(argc as usize);
    while argv.len() < argc as usize {
        match buf.get(p) {
            None | Some(0) => return Parsed::More,
            Some(b'$') => {}
            Some(_) => return Parsed::Error,
        }
        let Some(crlf) = find_c(buf, p, b"\r\n") else { return Parsed::More };
        let len = atoi(&buf[p + 1..crlf]);
        if !(1..=1024).contains(&len) {
            return Parsed::Error;
        }
        let start = crlf + 2;
        let len = len as usize;
        if start + len + 2 > buf.len() {
            return Parsed::More;
        }
        argv.push(buf[start..start + len].to_vec());
        p = start + len;
        if &buf[p..p + 2] != b"\r\n" {
            return Parsed::Error;
        }
        p += 2;
    }
    Parsed::Command(argv)
}

/// Reads what the client sent, waiting for it; 0 when the connection is gone (or, when
/// `interruptible`, a shutdown signal arrived, as EINTR ends Redis's blocking read).
fn read_some(fd: RawFd, tls: Option<&SharedPlainIo>, buf: &mut [u8], interruptible: bool) -> usize {
    loop {
        if interruptible && crate::executor::shutdown::signalled() {
            return 0;
        }
        if let Some(tls) = tls {
            let mut io = tls.lock().unwrap_or_else(|p| p.into_inner());
            let plain = io.peek();
            if !plain.is_empty() {
                let n = plain.len().min(buf.len());
                buf[..n].copy_from_slice(&plain[..n]);
                io.consume(n);
                crate::stats::add(&crate::stats::NET_INPUT_BYTES, n as u64);
                return n;
            }
        }
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd we own.
        let ready = unsafe { libc::poll(&mut pfd, 1, 100) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return 0;
        }
        if ready == 0 {
            continue;
        }
        // A TLS session took what was there; a socket still readable with nothing to peek is closed.
        let flags = if tls.is_some() { libc::MSG_DONTWAIT | libc::MSG_PEEK } else { libc::MSG_DONTWAIT };
        // SAFETY: recv writes at most `buf.len()` bytes into the buffer we own.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), flags) };
        if n > 0 && tls.is_some() {
            continue;
        }
        if n > 0 {
            crate::stats::add(&crate::stats::NET_INPUT_BYTES, n as u64);
            return n as usize;
        }
        if n == 0 {
            return 0;
        }
        match std::io::Error::last_os_error().kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => continue,
            _ => return 0,
        }
    }
}

/// Writes all of `bytes`, waiting up to the send timeout for the client to take them.
fn write_all(fd: RawFd, tls: Option<&SharedPlainIo>, mut bytes: &[u8]) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(SEND_TIMEOUT_MS as u64);
    if let Some(tls) = tls {
        // The session takes every byte; its records then go out as the socket takes them.
        tls.lock().unwrap_or_else(|p| p.into_inner()).send(bytes);
        crate::stats::add(&crate::stats::NET_OUTPUT_BYTES, bytes.len() as u64);
        while !tls.lock().unwrap_or_else(|p| p.into_inner()).flush() {
            let left = deadline.saturating_duration_since(std::time::Instant::now()).as_millis() as i32;
            if left <= 0 {
                return false;
            }
            let mut pfd = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
            // SAFETY: one pollfd we own.
            unsafe { libc::poll(&mut pfd, 1, left) };
        }
        return true;
    }
    while !bytes.is_empty() {
        // SAFETY: send reads `bytes.len()` bytes from a slice we hold.
        let n = unsafe {
            libc::send(fd, bytes.as_ptr() as *const libc::c_void, bytes.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if n > 0 {
            crate::stats::add(&crate::stats::NET_OUTPUT_BYTES, n as u64);
            bytes = &bytes[n as usize..];
            continue;
        }
        let err = std::io::Error::last_os_error().kind();
        if n < 0 && !matches!(err, std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) {
            return false;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now()).as_millis() as i32;
        if left <= 0 {
            return false;
        }
        let mut pfd = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
        // SAFETY: one pollfd we own.
        unsafe { libc::poll(&mut pfd, 1, left) };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(buf: &[u8]) -> Option<Vec<Vec<u8>>> {
        match parse_command(buf) {
            Parsed::Command(a) => Some(a),
            _ => None,
        }
    }

    #[test]
    fn parses_as_redis_does() {
        assert_eq!(cmd(b"*2\r\n$1\r\nb\r\n$1\r\n3\r\n"), Some(vec![b"b".to_vec(), b"3".to_vec()]));
        assert!(matches!(parse_command(b"*2\r\n$1\r\nb\r\n"), Parsed::More));
        assert!(matches!(parse_command(b"*2\r\n$1\r\nb\r"), Parsed::More));
        assert!(matches!(parse_command(b"step\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*0\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*1\r\n$0\r\n\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*1\r\n$2\r\nabc\r\n"), Parsed::Error));
        assert!(matches!(parse_command(b"*1\r\n+x\r\n"), Parsed::Error));
        // A NUL inside an argument is data.
        assert_eq!(cmd(b"*1\r\n$3\r\na\0b\r\n"), Some(vec![b"a\0b".to_vec()]));
    }

    #[test]
    fn readable_replies() {
        let mut out = Vec::new();
        let mut pos = 0;
        human_reply(b"*3\r\n$1\r\na\r\n:1\r\n$-1\r\n", &mut pos, &mut out);
        assert_eq!(out, b"[\"a\",1,NULL]");
        let mut out = Vec::new();
        let mut pos = 0;
        human_reply(b"-ERR x\r\n", &mut pos, &mut out);
        assert_eq!(out, b"\"-ERR x\"");
    }
}
