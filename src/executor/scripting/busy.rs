//! Other clients while a script runs past busy-reply-threshold (lua-time-limit). A script runs
//! on the thread that also serves the connections, so they cannot answer for themselves: a Lua
//! count hook comes here every 100,000 instructions, and once the threshold has passed this
//! module reads the other clients' complete commands straight from their sockets and answers
//! them as Redis does: `-BUSY`, except SCRIPT KILL (or FUNCTION KILL for a function), which
//! stops a script that has not written, and SHUTDOWN NOSAVE.
//!
//! Only what is safe to take is taken: a socket is peeked first and only whole commands are
//! consumed, and a client is left alone while its connection holds a partial command or replies
//! it has not written, or while it is blocked or paused (its order would break); such clients
//! wait for the script to end. New connections are accepted here (a fresh `redis-cli SCRIPT
//! KILL` is the usual way in) and handed to the accept loops afterwards (`executor::handoff`).
//! Commands Redis flags `allow_busy` (MULTI, DISCARD, WATCH, UNWATCH, AUTH, HELLO, RESET, QUIT)
//! run for clients connected before the script, through the executor's `call()`; other commands
//! inside such a client's MULTI doom the transaction, as Redis's rejection does.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use bytes::BytesMut;

use super::Run;
use crate::spec::CmdError;

/// How often (microseconds) the sockets are looked at while busy.
const POLL_EVERY_US: u64 = 5_000;

const UNKILLABLE: &str = "-UNKILLABLE Sorry the script already executed write commands against the dataset. You can \
                          either wait the script termination or kill the server in a hard way using the SHUTDOWN \
                          NOSAVE command.\r\n";

/// The message a killed script fails with.
pub const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// A run's busy state.
#[derive(Debug)]
pub struct Busy {
    /// When the run started (`executor::mono_us`).
    started_us: u64,
    /// Past the threshold (logged once).
    busy: bool,
    last_poll_us: Option<u64>,
    /// SCRIPT KILL (or SHUTDOWN NOSAVE) asked the script to stop.
    pub killed: bool,
    /// The run is an FCALL (its kill command is FUNCTION KILL).
    pub function: bool,
    /// Connections accepted while busy (descriptor, is unix), handed to the accept loops after.
    pub accepted: Vec<(OwnedFd, bool)>,
}

impl Busy {
    pub fn new(function: bool, started_us: u64) -> Busy {
        Busy { started_us, busy: false, last_poll_us: None, killed: false, function, accepted: Vec::new() }
    }
}

/// SHUTDOWN NOSAVE while a script is busy: as Redis, the server exits from inside the script,
/// once children are stopped and the AOF is written and synced, so nothing more is accepted.
fn exit_now(st: &mut crate::executor::State) -> ! {
    crate::executor::handoff::stop_listening();
    crate::executor::shutdown::announce(st);
    crate::executor::snapshot::kill_child(st);
    crate::executor::aof::shutdown(st);
    if let Some(path) = &st.config.unixsocket {
        let _ = std::fs::remove_file(path);
    }
    if let Some(path) = &st.config.pidfile {
        let _ = std::fs::remove_file(path);
    }
    tracing::warn!("Redis is now ready to exit, bye bye...");
    std::process::exit(0)
}

/// Called from the count hook: serves the other clients once the script is busy; true when the
/// script must stop.
pub(super) fn tick(run: &mut Run) -> bool {
    if run.busy.killed {
        return true;
    }
    let threshold = run.st.config.busy_reply_threshold;
    let now = crate::util::clock::mono_us();
    let elapsed_ms = now.saturating_sub(run.busy.started_us) / 1000;
    if !run.busy.busy {
        if threshold <= 0 || elapsed_ms < threshold as u64 {
            return false;
        }
        run.busy.busy = true;
        tracing::warn!(
            "Slow script detected: still in execution after {} milliseconds. You can try killing the script using \
             the {} command.",
            elapsed_ms,
            if run.busy.function { "FUNCTION KILL" } else { "SCRIPT KILL" }
        );
    }
    // With I/O threads the connections read their sockets themselves, concurrently: hands off.
    if !run.st.connections_inline || run.busy.last_poll_us.is_some_and(|t| now.saturating_sub(t) < POLL_EVERY_US) {
        return false;
    }
    run.busy.last_poll_us = Some(now);
    accept_new(run);
    let ids: Vec<u64> = run.st.clients.keys().copied().collect();
    for id in ids {
        let Some(client) = run.st.clients.get(&id) else { continue };
        // A blocked or paused client answers its next commands only after the one it waits on.
        if client.blocked.is_some() || client.postponed || !client.pending.is_empty() {
            continue;
        }
        let (fd, handle, authenticated) = (client.info.fd, client.handle.clone(), client.authenticated);
        // A peer that closed its end (a replica after REPLICAOF NO ONE) is forgotten now, as
        // Redis's event loop frees it while the script runs: INFO from the script sees it gone.
        if fd >= 0 && !client.info.tls && peer_closed(fd) || client.info.tls && tls_peer_closed(id, fd) {
            handle.request_close();
            crate::executor::disconnect_client(run.st, id);
            continue;
        }
        if fd < 0 || handle.close_requested() || handle.unparsed() || handle.pending_output() > 0 {
            continue;
        }
        if client.info.tls {
            // A TLS client's socket carries ciphertext: its stream's session reads and writes.
            let Some(stream) = crate::executor::handoff::tls_stream(id) else { continue };
            let Ok(mut io) = stream.try_lock() else { continue };
            serve_wire(run, &mut *io, authenticated, Some(id));
            drop(io);
            // Its connection reads what is left of the plaintext, and writes the records the
            // socket did not take, once it runs again.
            handle.notify.raise();
        } else if let Some(unsent) = serve_wire(run, &mut RawWire::new(fd), authenticated, Some(id)) {
            // The rest goes through the connection, in order, once it runs again.
            handle.push_output(unsent);
        }
        if run.busy.killed {
            return true;
        }
    }
    // New connections: the usual way to send SCRIPT KILL is a fresh redis-cli.
    let authenticated = run.st.acl.new_connections_authenticated();
    for i in 0..run.busy.accepted.len() {
        let fd = run.busy.accepted[i].0.as_raw_fd();
        // What cannot be sent now is dropped: the peer reads nothing more until it is adopted.
        let _ = serve_wire(run, &mut RawWire::new(fd), authenticated, None);
        if run.busy.killed {
            break;
        }
    }
    run.busy.killed
}

/// Whether the peer of a socket closed it (nothing left to read and end of stream).
fn peer_closed(fd: RawFd) -> bool {
    let mut byte = [0u8; 1];
    // SAFETY: recv writes at most one byte into the buffer we own; MSG_PEEK leaves it there.
    let n = unsafe { libc::recv(fd, byte.as_mut_ptr() as *mut libc::c_void, 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    n == 0
}

/// `peer_closed` for a TLS client: its session reads what the socket holds first (a
/// close_notify alert before the end of stream), and plaintext not read yet keeps it open.
fn tls_peer_closed(id: u64, fd: RawFd) -> bool {
    let Some(stream) = crate::executor::handoff::tls_stream(id) else { return false };
    let Ok(mut io) = stream.try_lock() else { return false };
    io.peek().is_empty() && peer_closed(fd)
}

/// Accepts what waits on the listeners (non-blocking), to be answered while busy.
fn accept_new(run: &mut Run) {
    for (listener, unix) in crate::executor::handoff::listeners() {
        loop {
            // SAFETY: accept4 on a listening descriptor the server owns; null address pointers
            // are allowed. The returned descriptor is ours alone and is wrapped at once.
            let fd = unsafe {
                libc::accept4(
                    listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                break;
            }
            // SAFETY: `fd` was just returned by accept4 and is owned by nothing else.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            run.busy.accepted.push((owned, unix));
        }
    }
}

/// A plain socket, read without consuming until whole commands are answered.
struct RawWire {
    fd: RawFd,
    peeked: Vec<u8>,
}

impl RawWire {
    fn new(fd: RawFd) -> RawWire {
        RawWire { fd, peeked: Vec::new() }
    }
}

impl crate::executor::handoff::PlainIo for RawWire {
    fn peek(&mut self) -> &[u8] {
        self.peeked.resize(64 * 1024, 0);
        // SAFETY: recv writes at most `peeked.len()` bytes into the buffer we own; MSG_PEEK
        // leaves them in the socket.
        let n = unsafe {
            libc::recv(
                self.fd,
                self.peeked.as_mut_ptr() as *mut libc::c_void,
                self.peeked.len(),
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        self.peeked.truncate(n.max(0) as usize);
        &self.peeked
    }

    fn consume(&mut self, n: usize) {
        let mut taken = 0;
        let mut sink = vec![0u8; n];
        while taken < n {
            // SAFETY: as above; these bytes were just peeked, so they are there to be consumed.
            let r =
                unsafe { libc::recv(self.fd, sink.as_mut_ptr() as *mut libc::c_void, n - taken, libc::MSG_DONTWAIT) };
            if r <= 0 {
                break;
            }
            taken += r as usize;
        }
    }

    fn send(&mut self, bytes: &[u8]) -> usize {
        // SAFETY: send reads `bytes.len()` bytes from the buffer we are given.
        let sent = unsafe {
            libc::send(
                self.fd,
                bytes.as_ptr() as *const libc::c_void,
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        sent.max(0) as usize
    }
}

/// Answers the complete commands waiting on a connection (of client `id`, None for a
/// connection made during the script); returns the replies a plain socket would not take at
/// once (a TLS session keeps those itself).
fn serve_wire(
    run: &mut Run,
    wire: &mut dyn crate::executor::handoff::PlainIo,
    authenticated: bool,
    id: Option<u64>,
) -> Option<Vec<u8>> {
    let input = wire.peek();
    if input.is_empty() {
        return None;
    }
    let total = input.len();
    let mut buf = BytesMut::from(input);
    let mut parser = crate::resp::Parser::new(512 * 1024 * 1024);
    parser.unauthenticated = !authenticated;
    let mut commands = Vec::new();
    let status = parser.parse_into(&mut buf, |argv| commands.push(argv));
    if status.error.is_some() || commands.is_empty() {
        // Malformed input is the connection's to answer once the script ends.
        return None;
    }
    let consumed = total - buf.len();
    let mut replies = Vec::new();
    for argv in commands {
        answer(run, authenticated, id, argv, &mut replies);
    }
    wire.consume(consumed);
    if run.st.shutdown == Some(crate::executor::ShutdownRequest::NoSave) && run.busy.killed {
        exit_now(run.st);
    }
    if replies.is_empty() {
        return None;
    }
    let sent = wire.send(&replies);
    (sent < replies.len()).then(|| replies[sent..].to_vec())
}

/// One command's answer while busy.
fn answer(run: &mut Run, authenticated: bool, id: Option<u64>, argv: Vec<bytes::Bytes>, out: &mut Vec<u8>) {
    let nosave = argv.iter().skip(1).any(|a| a.eq_ignore_ascii_case(b"nosave"));
    let cmd = crate::executor::Cmd { spec: crate::executor::registry::lookup(&argv[0]), argv };
    let mut client = id.and_then(|id| run.st.clients.remove(&id));
    match admit(run, client.as_deref(), authenticated, &cmd) {
        Err(e) => {
            // Refused inside MULTI: the transaction is doomed, as Redis's rejectCommand does.
            if let Some(c) = client.as_mut().filter(|c| c.multi.is_some()) {
                c.dirty_exec = true;
            }
            error_line(out, e);
        }
        // Loading (DEBUG LOADAOF replaying a slow script): what may not run while loading is
        // refused first, as processCommand checks loading before the busy script.
        Ok((spec, _)) if run.st.aof.loading && !spec.has_flag(crate::spec::flags::LOADING) => {
            if let Some(c) = client.as_mut().filter(|c| c.multi.is_some()) {
                c.dirty_exec = true;
            }
            out.extend_from_slice(b"-LOADING Redis is loading the dataset in memory\r\n");
        }
        Ok((spec, parent)) => {
            let full = (parent.map_or("", |p| p.name), spec.name);
            let function = run.busy.function;
            let passes = spec.has_flag(crate::spec::flags::ALLOW_BUSY)
                && !matches!(full, ("script", "kill") | ("function", "kill") | ("", "shutdown"))
                // FUNCTION STATS reports a running function; during EVAL Redis refuses it.
                && (function || full != ("function", "stats"));
            match (full, client.as_mut()) {
                (_, Some(c)) if passes => {
                    crate::executor::call::call(run.st, c, cmd, out, &mut run.clock);
                    if c.close_after_reply {
                        c.handle.close_after_output();
                    }
                    c.handle.set_authenticated(c.authenticated);
                }
                (("function", "stats"), None) if passes => {
                    let reply = crate::executor::scripting::host::stats_reply(run.st);
                    crate::resp::writer::write_reply(out, &reply, 2);
                }
                (("script", "kill"), _) if !function => kill(run, out),
                (("function", "kill"), _) if function => kill(run, out),
                (("", "shutdown"), _) if nosave => {
                    // Carried out once its bytes are consumed (see `serve_socket`): exiting with
                    // them unread would reset the sender's connection instead of closing it.
                    run.st.shutdown = Some(crate::executor::ShutdownRequest::NoSave);
                    run.busy.killed = true;
                }
                (("", "exec"), c) => {
                    // A refused EXEC is answered, and ends any transaction, by Redis's
                    // execCommandAbort, in MULTI or not.
                    let reason = busy_error(function).trim_start_matches('-').trim_end();
                    let line = match c {
                        Some(c) => crate::executor::multi::abort_exec(run.st, c, reason),
                        None => format!("EXECABORT Transaction discarded because of: {reason}"),
                    };
                    out.push(b'-');
                    out.extend_from_slice(line.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                (_, c) => {
                    if let Some(c) = c.filter(|c| c.multi.is_some()) {
                        c.dirty_exec = true;
                    }
                    out.extend_from_slice(busy_error(function).as_bytes());
                }
            }
        }
    }
    if let Some(c) = client {
        run.st.clients.insert(c.id, c);
    }
}

/// What processCommand checks before the busy rule: the command exists with its arity, the
/// client is authenticated, and its ACL user may run it.
fn admit(
    run: &mut Run,
    client: Option<&crate::executor::clients::Client>,
    authenticated: bool,
    cmd: &crate::executor::Cmd,
) -> Result<
    (&'static crate::executor::registry::CommandSpec, Option<&'static crate::executor::registry::CommandSpec>),
    CmdError,
> {
    let (spec, parent) = crate::executor::call::resolve(cmd)?;
    if !client.map_or(authenticated, |c| c.authenticated) && !spec.has_flag(crate::spec::flags::NO_AUTH) {
        return Err(CmdError::NoAuth);
    }
    if let Some(c) = client {
        crate::executor::access::check(run.st, c, spec, parent, &cmd.argv)
            .map_err(|r| CmdError::Raw(crate::executor::access::noperm_text(r, spec, parent, false)))?;
    }
    Ok((spec, parent))
}

fn busy_error(function: bool) -> &'static str {
    if function {
        "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n"
    } else {
        "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n"
    }
}

fn kill(run: &mut Run, out: &mut Vec<u8>) {
    if run.wrote {
        out.extend_from_slice(UNKILLABLE.as_bytes());
        return;
    }
    tracing::warn!("Lua script killed by user with SCRIPT KILL.");
    run.busy.killed = true;
    out.extend_from_slice(b"+OK\r\n");
}

fn error_line(out: &mut Vec<u8>, e: CmdError) {
    // An error line is the same in RESP2 and RESP3.
    crate::resp::writer::write_reply(out, &e.into_reply(), 2);
}
