//! FUNCTION (LOAD, LIST, DELETE, FLUSH, DUMP, RESTORE, STATS, KILL, HELP) and FCALL / FCALL_RO.
//! Library code is kept in `State::functions` (what RDB files and FUNCTION DUMP carry); the
//! Lua engine holds what running that code registered. Both change together here.

use super::flags::*;
use super::{acl, container, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::scripting::host::{stats_reply, store_code, RunningFunction};
use crate::executor::scripting::script_flags;
use crate::executor::State;
use crate::resp::Reply;

const S: u64 = acl::SCRIPTING;
const FCALL_FLAGS: u32 = NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS | MAY_REPLICATE;

pub static COMMANDS: &[CommandSpec] = &[
    spec("fcall", -3, FCALL_FLAGS, keys(0, 0, 0), S, fcall),
    spec("fcall_ro", -3, READONLY | (FCALL_FLAGS & !MAY_REPLICATE), keys(0, 0, 0), S, fcall_ro),
    container("function", -2, 0, FUNCTION),
];

static FUNCTION: &[CommandSpec] = &[
    spec("load", -3, WRITE | DENYOOM | NOSCRIPT, NO_KEYS, S, function_load),
    spec("dump", 2, NOSCRIPT, NO_KEYS, S, function_dump),
    spec("restore", -3, WRITE | DENYOOM | NOSCRIPT, NO_KEYS, S, function_restore),
    spec("stats", 2, NOSCRIPT | ALLOW_BUSY, NO_KEYS, S, function_stats),
    spec("kill", 2, NOSCRIPT | ALLOW_BUSY, NO_KEYS, S, function_kill),
    spec("list", -2, NOSCRIPT, NO_KEYS, S, function_list),
    spec("delete", 3, WRITE | NOSCRIPT, NO_KEYS, S, function_delete),
    spec("flush", -2, WRITE | NOSCRIPT, NO_KEYS, S, function_flush),
    spec("help", 2, LOADING | STALE, NO_KEYS, S, function_help),
];

/// FCALL function numkeys [key ...] [arg ...]
///
/// Runs a library function with its keys and arguments tables.
pub fn fcall(ctx: &mut Ctx, args: &Args) -> CmdResult {
    fcall_generic(ctx, args, false)
}

/// FCALL_RO function numkeys [key ...] [arg ...]: only functions flagged no-writes.
pub fn fcall_ro(ctx: &mut Ctx, args: &Args) -> CmdResult {
    fcall_generic(ctx, args, true)
}

fn fcall_generic(ctx: &mut Ctx, args: &Args, read_only: bool) -> CmdResult {
    let spec = ctx.spec();
    let (srv, client) = ctx.admin_and_client();
    crate::executor::pubsub::feed_monitor_line(srv, client, spec.name, &args.argv);
    let Some(def) = ctx.state().scripting.registry().function(args.get(1)).cloned() else {
        return Err(CmdError::err("Function not found"));
    };
    let numkeys =
        crate::util::num::parse_i64(args.get(2)).ok_or_else(|| CmdError::err("Bad number of keys provided"))?;
    if numkeys > (args.len() - 3) as i64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let rules = super::scripting::prepare_run(ctx.admin(), def.flags, read_only)?;
    let (keys, argv) = args.argv[3..].split_at(numkeys as usize);
    let now = ctx.now_ms();
    let what = crate::executor::scripting::Callable::Function(&def);
    // FUNCTION STATS from another client while this one is busy shows it.
    ctx.admin().running_function = Some(RunningFunction {
        name: def.name.clone(),
        command: args.argv.clone(),
        started_us: crate::util::clock::mono_us(),
    });
    let (srv, client) = ctx.admin_and_client();
    let reply = crate::executor::scripting::run(srv, client, what, keys, argv, rules, now);
    ctx.admin().running_function = None;
    Ok(reply)
}

/// FUNCTION LOAD [REPLACE] function-code
///
/// Runs the library's code, registering its functions; replies with the library name.
pub fn function_load(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut replace = false;
    let mut i = 2;
    while i < args.len() - 1 {
        if args.is(i, "replace") {
            replace = true;
        } else {
            return Err(CmdError::echo(&[b"ERR Unknown option given: ", args.get(i)]));
        }
        i += 1;
    }
    if i != args.len() - 1 {
        return Err(CmdError::err("Function code is missing"));
    }
    let code = args.get(args.len() - 1);
    let name = ctx.admin().scripting.load_library(code, replace).map_err(CmdError::Line)?;
    store_code(ctx.admin(), &name, code);
    ctx.dirty(1);
    Ok(Reply::Bulk(name.into_bytes()))
}

/// FUNCTION DELETE library-name
///
/// Removes one library with all its functions; an unknown name is an error.
pub fn function_delete(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let name = args.str(2);
    if !ctx.admin().scripting.delete_library(&name) {
        return Err(CmdError::err("Library not found"));
    }
    ctx.admin().functions.libs.retain(|l| l.name != name.as_bytes());
    ctx.dirty(1);
    Ok(Reply::Ok)
}

/// FUNCTION FLUSH [ASYNC|SYNC]
///
/// Deletes every library.
pub fn function_flush(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(super::server::sub_syntax_error(args));
    }
    if args.len() == 3 && !args.is(2, "sync") && !args.is(2, "async") {
        return Err(CmdError::err("FUNCTION FLUSH only supports SYNC|ASYNC option"));
    }
    ctx.admin().scripting.flush_libraries();
    ctx.admin().functions.libs.clear();
    ctx.dirty(1);
    Ok(Reply::Ok)
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
///
/// Every library (or those whose name matches the pattern) with its engine, its functions
/// (name, description, flags) and, with WITHCODE, its code.
pub fn function_list(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        if !with_code && args.is(i, "withcode") {
            with_code = true;
        } else if pattern.is_none() && args.is(i, "libraryname") {
            if i + 1 >= args.len() {
                return Err(CmdError::err("library name argument was not given"));
            }
            i += 1;
            pattern = Some(&args.argv[i]);
        } else {
            return Err(CmdError::echo(&[b"ERR Unknown argument ", args.get(i)]));
        }
        i += 1;
    }
    let mut out = Vec::new();
    for (name, lib) in &ctx.state().scripting.registry().libraries {
        if pattern.is_some_and(|p| !crate::glob::glob_match(p, name.as_bytes(), true)) {
            continue;
        }
        let functions = lib
            .functions
            .iter()
            .map(|f| {
                let flags = script_flags::NAMES
                    .iter()
                    .filter(|(_, bit)| f.flags & bit != 0)
                    .map(|(n, _)| Reply::Status(n))
                    .collect();
                Reply::Map(vec![
                    (Reply::bulk("name"), Reply::bulk(f.name.clone())),
                    (Reply::bulk("description"), f.description.clone().map_or(Reply::Nil, Reply::Bulk)),
                    (Reply::bulk("flags"), Reply::Set(flags)),
                ])
            })
            .collect();
        let mut fields = vec![
            (Reply::bulk("library_name"), Reply::bulk(name.clone())),
            (Reply::bulk("engine"), Reply::bulk("LUA")),
            (Reply::bulk("functions"), Reply::Array(functions)),
        ];
        if with_code {
            let code = ctx.state().functions.libs.iter().find(|l| l.name == name.as_bytes()).map(|l| l.code.clone());
            fields.push((Reply::bulk("library_code"), Reply::bulk(code.unwrap_or_default())));
        }
        out.push(Reply::Map(fields));
    }
    Ok(Reply::Array(out))
}

/// FUNCTION STATS
///
/// The running function (never one: functions run to completion before this is read) and the
/// engine's library and function counts.
pub fn function_stats(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(stats_reply(ctx.admin()))
}

/// FUNCTION KILL
///
/// Functions run to completion on the executor thread before another command is read: there
/// is never one to stop.
pub fn function_kill(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Err(CmdError::Raw("NOTBUSY No scripts in execution right now.".into()))
}

/// FUNCTION DUMP
///
/// Every library's code as FUNCTION2 records, then the RDB version and a CRC-64, as DUMP
/// payloads end.
pub fn function_dump(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let mut payload = Vec::new();
    for lib in &ctx.state().functions.libs {
        payload.push(crate::rdb::format::op::FUNCTION2);
        crate::rdb::save::put_string(&mut payload, &lib.code, ctx.config().rdbcompression);
    }
    super::dump::seal_payload(&mut payload);
    Ok(Reply::Bulk(payload))
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]
///
/// Loads the libraries of a FUNCTION DUMP payload. APPEND (the default) fails on a library that
/// exists; REPLACE replaces it; FLUSH deletes every library first. Nothing changes on failure.
pub fn function_restore(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 4 {
        return Err(super::server::sub_syntax_error(args));
    }
    let policy = if args.len() == 4 {
        match ["flush", "append", "replace"].into_iter().find(|p| args.is(3, p)) {
            Some(p) => p,
            None => {
                return Err(CmdError::err(
                    "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                ))
            }
        }
    } else {
        "append"
    };
    let Some(body) = super::dump::verified_body(args.get(2)) else {
        return Err(CmdError::err("DUMP payload version or checksum are wrong"));
    };
    let mut codes = Vec::new();
    let mut reader = crate::rdb::load::Reader::new(body);
    while reader.offset() < body.len() as u64 {
        let mut op = [0u8; 1];
        if reader.exact(&mut op).is_err() {
            return Err(CmdError::err("can not read data type"));
        }
        if op[0] != crate::rdb::format::op::FUNCTION2 {
            return Err(CmdError::err("given type is not a function"));
        }
        match reader.string() {
            Ok(code) => codes.push(code),
            Err(_) => return Err(CmdError::err("can not read data type")),
        }
    }
    // The new set is built aside; the current libraries change only once it has loaded.
    let mut staged = if policy == "flush" { Vec::new() } else { ctx.admin().functions.libs.clone() };
    for code in codes {
        let lib = crate::functions::Library::parse(code).map_err(CmdError::Line)?;
        if staged.iter().any(|l| l.name == lib.name) {
            if policy != "replace" {
                let name = String::from_utf8_lossy(&lib.name).into_owned();
                return Err(CmdError::err(format!("Library {name} already exists")));
            }
            staged.retain(|l| l.name != lib.name);
        }
        staged.push(lib);
    }
    staged.sort_by(|a, b| a.name.cmp(&b.name));
    let saved = std::mem::replace(&mut ctx.admin().functions.libs, staged);
    if let Err(e) = rebuild(ctx.admin()) {
        ctx.admin().functions.libs = saved;
        let _ = rebuild(ctx.admin());
        return Err(CmdError::Line(e));
    }
    ctx.dirty(1);
    Ok(Reply::Ok)
}

/// Loads every library of `State::functions` into a fresh registry; the first error stops it.
fn rebuild(st: &mut State) -> Result<(), Vec<u8>> {
    st.scripting.flush_libraries();
    let codes: Vec<Vec<u8>> = st.functions.libs.iter().map(|l| l.code.clone()).collect();
    for code in codes {
        st.scripting.load_library(&code, false)?;
    }
    Ok(())
}

/// FUNCTION HELP
pub fn function_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(super::server::help_reply(
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION \
             RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    ))
}
