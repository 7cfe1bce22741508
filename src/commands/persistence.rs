//! Persistence commands: SAVE, BGSAVE and LASTSAVE. They only parse arguments and shape replies;
//! the saving itself (files, the forked child, save points) lives in `executor::snapshot`.

use super::flags::*;
use super::{acl, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::snapshot::{self, BgsaveError};
use crate::rdb::save::SaveError;
use crate::resp::Reply;

pub static COMMANDS: &[CommandSpec] = &[
    spec("save", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, NO_KEYS, 0, save),
    spec("bgsave", -1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING, NO_KEYS, 0, bgsave),
    spec("lastsave", 1, LOADING | STALE | FAST, NO_KEYS, acl::ADMIN | acl::DANGEROUS, lastsave),
];

const IN_PROGRESS: &str = "Background save already in progress";

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
    if ctx.srv.snapshot.child.is_some() {
        return Err(CmdError::err(IN_PROGRESS));
    }
    snapshot::save_foreground(ctx.srv).map_err(save_error)?;
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
    if ctx.srv.snapshot.child.is_some() {
        return Err(CmdError::err(IN_PROGRESS));
    }
    if ctx.client.in_exec {
        // Redis defers a BGSAVE issued inside EXEC: forking mid-transaction would snapshot
        // half of it.
        ctx.srv.snapshot.scheduled = true;
        return Ok(Reply::Status("Background saving scheduled"));
    }
    match snapshot::bgsave_start(ctx.srv) {
        Ok(_) => Ok(Reply::Status("Background saving started")),
        Err(BgsaveError::InProgress) => Err(CmdError::err(IN_PROGRESS)),
        Err(BgsaveError::Version(e)) => Err(save_error(e)),
        Err(BgsaveError::Fork(_)) => Err(CmdError::Raw("ERR".into())),
    }
}

/// LASTSAVE
///
/// Unix time of the last successful save (or of startup).
pub fn lastsave(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.srv.lastsave_unix))
}
