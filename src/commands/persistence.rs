//! Persistence commands: SAVE, BGSAVE, BGREWRITEAOF and LASTSAVE. They only parse arguments and
//! shape replies; the saving itself (files, the forked child, save points) lives in
//! `executor::snapshot` and `executor::aof`.

use super::flags::*;
use super::{acl, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::aof::RewriteError;
use crate::executor::snapshot::{self, BgsaveError, ChildKind};
use crate::rdb::save::SaveError;
use crate::resp::Reply;

pub static COMMANDS: &[CommandSpec] = &[
    spec("save", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, NO_KEYS, 0, save),
    spec("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, NO_KEYS, 0, bgsave),
    spec("bgrewriteaof", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, NO_KEYS, 0, bgrewriteaof),
    spec("lastsave", 1, LOADING | STALE | FAST, NO_KEYS, acl::ADMIN | acl::DANGEROUS, lastsave),
];

const IN_PROGRESS: &str = "Background save already in progress";
const OTHER_CHILD: &str = "Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.";

fn save_error(e: SaveError) -> CmdError {
    match e {
        // The version cannot express the data: say why (Redis has no such case).
        SaveError::Unsupported(why) => CmdError::err(why),
        // An I/O failure is logged; the client gets Redis's bare `-ERR`.
        SaveError::Io(_) => CmdError::Raw("ERR".into()),
    }
}

/// SAVE
///
/// Writes the dataset to `dir`/`dbfilename` in the foreground, blocking every client until the
/// file is on disk. Refused while a background save runs. Replies OK, or a bare ERR when the
/// write failed (the reason goes to the log).
pub fn save(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    if ctx.state().snapshot.child.is_some() {
        return Err(CmdError::err(IN_PROGRESS));
    }
    snapshot::save_foreground(ctx.admin()).map_err(save_error)?;
    // Counted here, not in the save itself: FLUSHALL's save does not count in Redis.
    ctx.admin().stats.persistence.rdb_saves += 1;
    Ok(Reply::Ok)
}

/// BGSAVE [SCHEDULE]
///
/// Forks a child that writes the snapshot while the server keeps serving. While one runs, a
/// second BGSAVE is an error; inside MULTI/EXEC it is instead scheduled to start once possible.
/// SCHEDULE asks for the same when another kind of child would block the save (there is none
/// here, so it starts at once).
pub fn bgsave(ctx: &mut Ctx, args: &Args) -> CmdResult {
    // SCHEDULE only matters when a child of another kind (AOF rewrite) runs; there is none.
    if args.len() > 2 || (args.len() == 2 && !args.is(1, "schedule")) {
        return Err(CmdError::Syntax);
    }
    match ctx.admin().snapshot.child.as_ref().map(|c| c.kind) {
        Some(ChildKind::Rdb) => return Err(CmdError::err(IN_PROGRESS)),
        Some(ChildKind::Aof) if args.len() == 2 => {
            ctx.admin().snapshot.scheduled = true;
            return Ok(Reply::Status("Background saving scheduled"));
        }
        Some(ChildKind::Aof) => return Err(CmdError::err(OTHER_CHILD)),
        None => {}
    }
    if ctx.client().in_exec {
        // Redis defers a BGSAVE issued inside EXEC: forking mid-transaction would snapshot
        // half of it.
        ctx.admin().snapshot.scheduled = true;
        return Ok(Reply::Status("Background saving scheduled"));
    }
    match snapshot::bgsave_start(ctx.admin()) {
        Ok(_) => Ok(Reply::Status("Background saving started")),
        Err(BgsaveError::InProgress) => Err(CmdError::err(IN_PROGRESS)),
        Err(BgsaveError::Version(e)) => Err(save_error(e)),
        Err(BgsaveError::Fork(_)) => Err(CmdError::Raw("ERR".into())),
    }
}

/// BGREWRITEAOF
///
/// Starts a rewrite of the append-only file: a forked child writes the dataset as a new base
/// file while new writes go to a fresh incremental file. While a background save runs (or
/// inside MULTI/EXEC) the rewrite is scheduled to start as soon as possible.
pub fn bgrewriteaof(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    match ctx.admin().snapshot.child.as_ref().map(|c| c.kind) {
        Some(ChildKind::Aof) => return Err(CmdError::err("Background append only file rewriting already in progress")),
        // Started by cron once the child is gone or the transaction is over; asking by hand
        // clears the failure count, so a rewrite held back after failures may run at once.
        Some(ChildKind::Rdb) => return Ok(schedule_rewrite(ctx)),
        None if ctx.client().in_exec => return Ok(schedule_rewrite(ctx)),
        None => {}
    }
    match crate::executor::aof::rewrite_start(ctx.admin()) {
        Ok(()) => Ok(Reply::Status("Background append only file rewriting started")),
        Err(RewriteError::InProgress) => {
            Err(CmdError::err("Background append only file rewriting already in progress"))
        }
        Err(RewriteError::OtherChild) => Ok(schedule_rewrite(ctx)),
        Err(RewriteError::Failed) => Err(CmdError::err(
            "Can't execute an AOF background rewriting. Please check the server logs for more information.",
        )),
    }
}

fn schedule_rewrite(ctx: &mut Ctx) -> Reply {
    ctx.admin().aof.rewrite_scheduled = true;
    ctx.admin().aof.consecutive_failures = 0;
    Reply::Status("Background append only file rewriting scheduled")
}

/// LASTSAVE
///
/// Unix time of the last successful save (or of startup).
pub fn lastsave(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.admin().lastsave_unix))
}
