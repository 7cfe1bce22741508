//! MIGRATE: moves (or copies) keys to another server by DUMP payloads sent as RESTORE commands.
//!
//! The one handler that does network I/O itself, as Redis's does: MIGRATE is synchronous by
//! definition (the keys leave only once the target has them), so it connects, writes and reads
//! on a blocking socket bounded by the command's timeout, and the server waits meanwhile, as
//! Redis's does. Sockets are kept per target for 10 seconds (`migrate_cached_sockets` in INFO),
//! with the database last selected on each, so a run of MIGRATEs costs no new connection and no
//! SELECT. Errors carry Redis's texts: `IOERR` for the network, `ERR Target instance replied
//! with error: ...` for the target's refusals; the keys the target acknowledged are deleted here
//! (unless COPY) and propagated as one DEL.

use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

use bytes::Bytes;

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx};
use crate::executor::migrate_cache::{is_timeout, Conn};
use crate::pubsub::ev;
use crate::resp::Reply;

pub static COMMANDS: &[CommandSpec] =
    &[spec("migrate", -6, WRITE | MOVABLEKEYS, keys(3, 3, 1), acl::KEYSPACE | acl::DANGEROUS, migrate)];

/// Appends one command in RESP multibulk form.
fn encode(out: &mut Vec<u8>, argv: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
    for a in argv {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Reads one reply line (the target only answers +OK or -error to what MIGRATE sends), without
/// its CRLF; on a socket error, whether it was a timeout.
fn read_line(reader: &mut BufReader<Conn>) -> Result<Vec<u8>, bool> {
    let mut line = Vec::new();
    match reader.read_until(b'\n', &mut line) {
        Ok(0) => Err(false),
        Err(e) => Err(is_timeout(&e)),
        Ok(_) => {
            while line.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
                line.pop();
            }
            Ok(line)
        }
    }
}

/// How a transfer attempt ended.
enum Attempt {
    /// The target answered every command (some answers may be errors).
    Done,
    /// A network failure: whether it was a write or a read, whether it was a timeout, and how
    /// many key replies had arrived before it.
    SocketError { writing: bool, timed_out: bool, replies: usize },
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
///   [AUTH2 username password] [KEYS key [key ...]]
///
/// Sends the keys that exist (with their remaining TTLs) to the target as RESTORE commands,
/// after AUTH and SELECT as needed; replies OK when the target took them all, NOKEY when none
/// of the keys exists. Without COPY the keys the target acknowledged are deleted here. A failure
/// on a cached socket is retried once on a fresh connection, unless it was a timeout.
pub fn migrate(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut copy = false;
    let mut replace = false;
    let mut auth: Option<(Option<Bytes>, Bytes)> = None;
    let mut first_key = 3;
    let mut num_keys = 1;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - j - 1;
        if args.is(j, "copy") {
            copy = true;
        } else if args.is(j, "replace") {
            replace = true;
        } else if args.is(j, "auth") {
            if more == 0 {
                return Err(CmdError::Syntax);
            }
            j += 1;
            auth = Some((None, Bytes::copy_from_slice(args.get(j))));
        } else if args.is(j, "auth2") {
            if more < 2 {
                return Err(CmdError::Syntax);
            }
            auth = Some((Some(Bytes::copy_from_slice(args.get(j + 1))), Bytes::copy_from_slice(args.get(j + 2))));
            j += 2;
        } else if args.is(j, "keys") {
            if !args.get(3).is_empty() {
                return Err(CmdError::err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            first_key = j + 1;
            num_keys = args.len() - j - 1;
            break;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let timeout_ms = args.i64(5)?;
    let db = args.i64(4)?;
    let timeout = Duration::from_millis(if timeout_ms <= 0 { 1000 } else { timeout_ms as u64 });

    // The keys that exist, with their payloads and remaining TTLs (an expired one is skipped).
    let now = ctx.now_ms();
    let compress = ctx.config().rdbcompression;
    let mut found: Vec<(Bytes, Vec<u8>, i64)> = Vec::new();
    for k in first_key..first_key + num_keys {
        let key = args.get(k);
        let Some(value) = ctx.lookup_read(key) else { continue };
        let payload = super::dump::dump_payload(value, compress).map_err(|e| CmdError::err(e.to_string()))?;
        let ttl = match ctx.db().expire_at(key, now) {
            Some(at) if at - now < 0 => continue,
            Some(at) => (at - now).max(1),
            None => 0,
        };
        found.push((Bytes::copy_from_slice(key), payload, ttl));
    }
    if found.is_empty() {
        return Ok(Reply::Status("NOKEY"));
    }

    let host = args.str(1);
    let port: u16 = args.str(2).parse().unwrap_or(0);
    let target = format!("{host}:{}", args.str(2));
    // A cluster node sends RESTORE-ASKING, which the target takes on an importing slot.
    let cluster = ctx.config().other.get("cluster-enabled").is_some_and(|v| v == "yes");
    let mut may_retry = true;
    loop {
        let tls = ctx.config().other.get("tls-cluster").is_some_and(|v| v == "yes");
        let cached = match ctx.admin().migrate.get(&target, &host, port, tls, timeout, now) {
            Ok(c) => c,
            Err(true) => return Err(CmdError::Raw("IOERR error or timeout connecting to the client".into())),
            // Redis connects without waiting for the outcome: a refused connection shows as a
            // failed write, retried once like one.
            Err(false) if may_retry => {
                may_retry = false;
                continue;
            }
            Err(false) => return Err(CmdError::Raw("IOERR error or timeout writing to target instance".into())),
        };
        let select = cached.last_db != Some(db);
        let mut out = Vec::new();
        if let Some((user, pass)) = &auth {
            match user {
                Some(u) => encode(&mut out, &[b"AUTH", u, pass]),
                None => encode(&mut out, &[b"AUTH", pass]),
            }
        }
        let db_text = db.to_string();
        if select {
            encode(&mut out, &[b"SELECT", db_text.as_bytes()]);
        }
        let restore: &[u8] = if cluster { b"RESTORE-ASKING" } else { b"RESTORE" };
        for (key, payload, ttl) in &found {
            let ttl_text = ttl.to_string();
            let mut argv: Vec<&[u8]> = vec![restore, key, ttl_text.as_bytes(), payload];
            if replace {
                argv.push(b"REPLACE");
            }
            encode(&mut out, &argv);
        }

        let tcp = cached.reader.get_ref().tcp();
        let _ = tcp.set_write_timeout(Some(timeout));
        let _ = tcp.set_read_timeout(Some(timeout));
        let mut acked = Vec::new();
        let mut target_error: Option<Vec<u8>> = None;
        let conn = cached.reader.get_mut();
        let attempt = match conn.write_all(&out).and_then(|()| conn.flush()) {
            Err(e) => Attempt::SocketError { writing: true, timed_out: is_timeout(&e), replies: 0 },
            Ok(()) => {
                let ok = || Ok(b"+OK".to_vec());
                let auth_reply = if auth.is_some() { read_line(&mut cached.reader) } else { ok() };
                let select_reply = match &auth_reply {
                    Ok(_) if select => read_line(&mut cached.reader),
                    Ok(_) => ok(),
                    Err(t) => Err(*t),
                };
                match (auth_reply, select_reply) {
                    (Ok(a), Ok(s)) => {
                        let mut result = Attempt::Done;
                        for (i, (key, _, _)) in found.iter().enumerate() {
                            let reply = match read_line(&mut cached.reader) {
                                Ok(line) => line,
                                Err(timed_out) => {
                                    result = Attempt::SocketError { writing: false, timed_out, replies: i };
                                    break;
                                }
                            };
                            let refusal = [&a, &s, &reply].into_iter().find(|l| l.first() == Some(&b'-')).cloned();
                            match refusal {
                                Some(line) => {
                                    if target_error.is_none() {
                                        target_error = Some(line[1..].to_vec());
                                    }
                                }
                                None => acked.push(key.clone()),
                            }
                        }
                        result
                    }
                    (Err(timed_out), _) | (_, Err(timed_out)) => {
                        Attempt::SocketError { writing: false, timed_out, replies: 0 }
                    }
                }
            }
        };
        if target_error.is_some() {
            cached.last_db = None;
        }
        if let Attempt::SocketError { writing, timed_out, replies } = attempt {
            ctx.admin().migrate.close(&target);
            // A failure before any reply on a socket that may just have gone stale is retried
            // once on a fresh connection, unless it was a timeout.
            if target_error.is_none() && replies == 0 && acked.is_empty() && may_retry && !timed_out {
                may_retry = false;
                continue;
            }
            if target_error.is_none() {
                delete_acked(ctx, &acked, copy);
                return Err(CmdError::Raw(format!(
                    "IOERR error or timeout {} to target instance",
                    if writing { "writing" } else { "reading" }
                )));
            }
        }
        delete_acked(ctx, &acked, copy);
        return match target_error {
            Some(line) => Err(CmdError::echo(&[b"ERR Target instance replied with error: ", &line])),
            None => {
                if let Some(c) = ctx.admin().migrate.by_target.get_mut(&target) {
                    c.last_db = Some(db);
                }
                Ok(Reply::Ok)
            }
        };
    }
}

/// Without COPY, the keys the target acknowledged are deleted here and propagated as one DEL;
/// with COPY, or when none was acknowledged, nothing propagates.
fn delete_acked(ctx: &mut Ctx, acked: &[Bytes], copy: bool) {
    if copy || acked.is_empty() {
        ctx.no_propagate();
        return;
    }
    let now = ctx.now_ms();
    let mut del = Vec::with_capacity(acked.len() + 1);
    del.push(Bytes::from_static(b"DEL"));
    for key in acked {
        if ctx.db().remove(key, now).is_some() {
            ctx.modified(key, 1);
            ctx.notify(ev::GENERIC, "del", key);
        }
        del.push(key.clone());
    }
    ctx.propagate_as(del);
}
