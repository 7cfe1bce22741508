//! The server family's table (INFO, CLIENT, SLOWLOG, DEBUG, SHUTDOWN, TIME, MEMORY, LATENCY,
//! ROLE), the small ones among them (INFO, SHUTDOWN, TIME, ROLE), and the HELP and subcommand
//! error helpers the containers share. CLIENT, SLOWLOG, DEBUG, MEMORY and LATENCY have their own
//! modules. They read and adjust server-wide state and never change keys, except DEBUG
//! POPULATE, which exists for tests.
//!
//! INFO's text is built by `crate::info`; this module only parses arguments and shapes replies.
//! Redis's HELP replies are reproduced line for line because clients and tests compare them.

use super::flags::*;
use super::{acl, container, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::shutdown;
use crate::resp::Reply;

pub static COMMANDS: &[CommandSpec] = &[
    spec("info", -1, LOADING | STALE, NO_KEYS, acl::DANGEROUS, info),
    container("client", -2, 0, super::client::SUBCOMMANDS),
    container("slowlog", -2, 0, super::slowlog::SUBCOMMANDS),
    spec("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED, NO_KEYS, 0, super::debug::debug),
    spec("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, NO_KEYS, 0, shutdown),
    spec("time", 1, LOADING | STALE | FAST, NO_KEYS, 0, time),
    container("memory", -2, 0, super::memory::SUBCOMMANDS),
    container("latency", -2, 0, super::latency::SUBCOMMANDS),
];

// ---------------------------------------------------------------------------------------------
// Shared helpers

/// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try <CMD> HELP.`, the error
/// Redis gives when a subcommand exists but its argument count does not fit.
pub(super) fn sub_syntax_error(args: &Args) -> CmdError {
    let sub = if args.len() > 1 { args.str(1) } else { String::new() };
    CmdError::err(format!(
        "unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        super::error::truncate(&sub, 128),
        args.str(0).to_uppercase()
    ))
}

/// A HELP reply: Redis's header line, the command's lines, then HELP's own entry.
pub(super) fn help_reply(cmd: &str, lines: &[&str]) -> Reply {
    let mut out = Vec::with_capacity(lines.len() + 3);
    out.push(Reply::StatusOwned(format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")));
    out.extend(lines.iter().map(|l| Reply::StatusOwned((*l).to_string())));
    out.push(Reply::Status("HELP"));
    out.push(Reply::Status("    Prints this help."));
    Reply::Array(out)
}

// ---------------------------------------------------------------------------------------------
// INFO

/// INFO [section [section ...]]
///
/// The server report for the named sections (`default` when none, `all`, `everything`), as a
/// bulk string (a verbatim `txt` string in RESP3). Unknown section names are ignored.
pub fn info(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let names: Vec<&[u8]> = args.from(1).collect();
    let sections = crate::info::select_sections(&names);
    let now_ms = ctx.now_ms();
    let text = crate::info::render(ctx.admin(), now_ms, &sections);
    Ok(Reply::Verbatim("txt", text.into_bytes()))
}

// ---------------------------------------------------------------------------------------------
// SHUTDOWN, TIME, LASTSAVE, ROLE

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]
///
/// Stops the server, saving first with SAVE or when save points are configured (unless
/// NOSAVE). Unless NOW, lagging replicas first get up to shutdown-timeout seconds to catch up,
/// writes paused, while the caller stays blocked; the caller gets no reply when the server
/// exits, and an error when the shutdown fails (FORCE exits despite a failed save) or is
/// aborted. ABORT, alone, cancels a shutdown that waits, or one a signal asked for.
pub fn shutdown(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut flags = shutdown::Flags::default();
    let mut abort = false;
    for i in 1..args.len() {
        if args.is(i, "nosave") {
            flags.nosave = true;
        } else if args.is(i, "save") {
            flags.save = true;
        } else if args.is(i, "now") {
            flags.now = true;
        } else if args.is(i, "force") {
            flags.force = true;
        } else if args.is(i, "abort") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (abort && flags != shutdown::Flags::default()) || (flags.save && flags.nosave) {
        return Err(CmdError::Syntax);
    }
    if abort {
        if !shutdown::abort(ctx.admin()) {
            return Err(CmdError::err("No shutdown in progress."));
        }
        return Ok(Reply::Ok);
    }
    if !flags.now && !ctx.may_block() {
        return Err(CmdError::err("SHUTDOWN without NOW or ABORT isn't allowed for DENY BLOCKING client"));
    }
    match shutdown::prepare(ctx.admin(), flags) {
        // The server exits once this batch is answered; the connection just closes.
        Ok(()) => Ok(Reply::Raw(Vec::new())),
        Err(shutdown::NotYet::Failed) => Err(CmdError::err("Errors trying to SHUTDOWN. Check logs.")),
        Err(shutdown::NotYet::Waiting) => {
            let id = ctx.client().id;
            ctx.admin().shutdown_state.waiting.push(id);
            ctx.block(Vec::new(), 0, Reply::Raw(Vec::new()), "")
        }
    }
}

/// TIME
///
/// [unix seconds, microseconds] as bulk strings.
pub fn time(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let us = crate::util::clock::unix_us();
    Ok(Reply::bulks([(us / 1_000_000).to_string(), (us % 1_000_000).to_string()]))
}

#[cfg(test)]
mod tests {
    use crate::executor::clients::Client;

    use crate::commands::harness::client;

    fn run(st: &mut crate::executor::State, me: &mut Client, argv: &[&str]) -> Vec<u8> {
        crate::commands::harness::run(st, me, crate::commands::harness::args(argv).argv, 5000)
    }

    #[test]
    fn slowlog_get_shape() {
        let mut st = crate::executor::State::new(crate::config::Config::default());
        let mut me = client(1, 1000);
        let argv = |a: &[&str]| a.iter().map(|x| bytes::Bytes::copy_from_slice(x.as_bytes())).collect::<Vec<_>>();
        st.slowlog.push(&argv(&["ping"]), &[], 3, 100, "127.0.0.1:1", "", 128);
        st.slowlog.push(&argv(&["get", "k"]), &[], 7, 101, "127.0.0.1:1", "me", 128);
        assert_eq!(
            run(&mut st, &mut me, &["slowlog", "get", "1"]),
            b"*1\r\n*6\r\n:1\r\n:101\r\n:7\r\n*2\r\n$3\r\nget\r\n$1\r\nk\r\n$11\r\n127.0.0.1:1\r\n$2\r\nme\r\n"
        );
        assert_eq!(run(&mut st, &mut me, &["slowlog", "len"]), b":2\r\n");
        assert_eq!(run(&mut st, &mut me, &["slowlog", "get", "0"]), b"*0\r\n");
        assert_eq!(run(&mut st, &mut me, &["slowlog", "reset"]), b"+OK\r\n");
        assert_eq!(run(&mut st, &mut me, &["slowlog", "get"]), b"*0\r\n");
    }

    #[test]
    fn client_list_orders_by_id_and_kills() {
        let mut st = crate::executor::State::new(crate::config::Config::default());
        st.clients.insert(1, Box::new(client(1, 1001)));
        st.clients.insert(3, Box::new(client(3, 1003)));
        let mut me = client(2, 1002);
        // The connection read the command (26 bytes in multibulk form) into its query buffer.
        me.handle.report_qbuf(26, 16384, 0);
        let out = String::from_utf8(run(&mut st, &mut me, &["client", "list"])).unwrap_or_default();
        let ids: Vec<&str> =
            out.split('\n').filter_map(|l| l.split(' ').next()).filter(|s| s.contains("id=")).collect();
        assert_eq!(ids, vec!["id=1", "id=2", "id=3"]);
        assert!(out.contains(
            "id=2 addr=127.0.0.1:1002 laddr=127.0.0.1:6379 fd=9 name= age=5 idle=5 flags=N db=0 \
                              sub=0 psub=0 ssub=0 multi=-1 qbuf=26 qbuf-free=20448 argv-mem=10"
        ));
        assert!(out.contains("cmd=client|list user=default redir=-1 resp=2\n"));
        assert_eq!(run(&mut st, &mut me, &["client", "kill", "127.0.0.1:1003"]), b"+OK\r\n");
        assert!(st.clients[&3].handle.close_requested());
        assert_eq!(run(&mut st, &mut me, &["client", "kill", "type", "normal"]), b":1\r\n");
        assert!(!me.close_after_reply);
        assert_eq!(run(&mut st, &mut me, &["client", "kill", "id", "2", "skipme", "no"]), b":1\r\n");
        assert!(me.close_after_reply);
    }
}
