//! SLOWLOG GET / LEN / RESET / HELP over the executor's slow log (`crate::slowlog`).

use super::flags::*;
use super::server::{help_reply, sub_syntax_error};
use super::{spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::resp::Reply;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, slowlog_help),
    spec("len", 2, ADMIN | LOADING | STALE, NO_KEYS, 0, slowlog_len),
    spec("get", -2, ADMIN | LOADING | STALE, NO_KEYS, 0, slowlog_get),
    spec("reset", 2, ADMIN | LOADING | STALE, NO_KEYS, 0, slowlog_reset),
];

/// SLOWLOG GET [count]
///
/// The newest `count` entries (10 by default, -1 for all), each as [id, unix time,
/// microseconds, argv, "ip:port", client name].
pub fn slowlog_get(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(sub_syntax_error(args));
    }
    let count = if args.len() == 3 {
        match crate::util::num::parse_i64(args.get(2)) {
            Some(n) if n >= -1 => n,
            _ => return Err(CmdError::err("count should be greater than or equal to -1")),
        }
    } else {
        10
    };
    let take = if count == -1 { usize::MAX } else { count as usize };
    let entries = ctx
        .state()
        .slowlog
        .entries
        .iter()
        .take(take)
        .map(|e| {
            Reply::Array(vec![
                Reply::Int(e.id as i64),
                Reply::Int(e.time),
                Reply::Int(e.duration_us as i64),
                Reply::bulks(e.argv.iter().cloned()),
                Reply::bulk(e.peer.as_bytes()),
                Reply::bulk(e.name.as_bytes()),
            ])
        })
        .collect();
    Ok(Reply::Array(entries))
}

/// SLOWLOG LEN
pub fn slowlog_len(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.state().slowlog.entries.len() as i64))
}

/// SLOWLOG RESET
///
/// Drops every entry; ids keep counting up.
pub fn slowlog_reset(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    ctx.admin().slowlog.reset();
    Ok(Reply::Ok)
}

/// SLOWLOG HELP
pub fn slowlog_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    ))
}
