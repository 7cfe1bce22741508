//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. Queueing itself happens in `call()` (a
//! client in MULTI gets +QUEUED for every command but these); EXEC runs the queue through the same
//! `call()` with one time snapshot, so stats, slowlog and key signals behave as for single commands.

use super::flags::*;
use super::{acl, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::multi::unwatch_client;
use crate::resp::writer::int_line;
use crate::resp::Reply;

const T: u64 = acl::TRANSACTION;

pub static COMMANDS: &[CommandSpec] = &[
    spec("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, T, multi),
    spec("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG, NO_KEYS, T, exec),
    spec("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, T, discard),
    spec("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, keys(1, -1, 1), T, watch),
    spec("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, NO_KEYS, T, unwatch),
];

/// MULTI
///
/// Starts queueing commands until EXEC or DISCARD.
pub fn multi(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    if ctx.client().multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.client_mut().multi = Some(Vec::new());
    Ok(Reply::Ok)
}

/// Forgets the client's watched keys.
pub fn unwatch_all(ctx: &mut Ctx) {
    let (srv, client) = ctx.admin_and_client();
    unwatch_client(srv, client);
}

/// EXEC
///
/// Runs the queued commands atomically and replies with their replies in one array; a null array
/// when a watched key changed (or expired) since WATCH; EXECABORT when queueing hit an error.
pub fn exec(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let Some(queued) = ctx.client_mut().multi.take() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    let aborted = std::mem::take(&mut ctx.client_mut().dirty_exec);
    let now = ctx.now_ms();
    // A watched key that existed at WATCH time and is gone now has expired meanwhile.
    let (srv, client) = ctx.admin_and_client();
    let expired = client.watched_keys.iter().any(|(db, key, existed)| *existed && !srv.dbs[*db].contains(key, now));
    let dirty = ctx.client().dirty_cas || expired;
    unwatch_all(ctx);
    if aborted {
        return Err(CmdError::Raw("EXECABORT Transaction discarded because of previous errors.".into()));
    }
    if dirty {
        return Ok(Reply::NilArray);
    }
    let mut out = Vec::new();
    int_line(&mut out, b'*', queued.len() as i64);
    ctx.client_mut().in_exec = true;
    ctx.client_mut().running_exec = Some((queued.len(), crate::executor::clients::queue_memory(&queued)));
    let mut clock = crate::executor::call::Clock::new(now);
    for cmd in queued {
        let (srv, client) = ctx.admin_and_client();
        crate::executor::call::call(srv, client, cmd, &mut out, &mut clock);
    }
    ctx.client_mut().in_exec = false;
    ctx.client_mut().running_exec = None;
    Ok(Reply::Raw(out))
}

/// DISCARD
///
/// Drops the queued commands and the watched keys.
pub fn discard(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    if ctx.client_mut().multi.take().is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.client_mut().dirty_exec = false;
    unwatch_all(ctx);
    Ok(Reply::Ok)
}

/// WATCH key [key ...]
///
/// Makes the next EXEC fail if any of the keys is modified before it.
pub fn watch(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if ctx.client().multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    let db = ctx.client().db;
    let now = ctx.now_ms();
    for key in args.from(1) {
        if ctx.client().watched_keys.iter().any(|(d, k, _)| *d == db && k == key) {
            continue;
        }
        let existed = ctx.admin().dbs[db].contains(key, now);
        ctx.client_mut().watched_keys.push((db, key.to_vec(), existed));
        let id = ctx.client().id;
        ctx.admin().watched.entry((db, key.to_vec())).or_default().push(id);
    }
    Ok(Reply::Ok)
}

/// UNWATCH
pub fn unwatch(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    unwatch_all(ctx);
    Ok(Reply::Ok)
}
