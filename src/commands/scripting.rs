//! Scripting commands: EVAL, EVALSHA, their read-only forms, and SCRIPT. Argument checks, the
//! script cache and the rules a run starts under (read-only, OOM, failed saves) are decided here
//! in Redis's order; the Lua engine itself is `crate::executor::scripting`.

use super::flags::*;
use super::{acl, container, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::scripting::{ldb, script_flags, RunRules};
use crate::executor::State;
use crate::resp::Reply;

const EVAL_FLAGS: u32 = NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS | MAY_REPLICATE;
const S: u64 = acl::SCRIPTING;

pub static COMMANDS: &[CommandSpec] = &[
    spec("eval", -3, EVAL_FLAGS, keys(0, 0, 0), S, eval),
    spec("evalsha", -3, EVAL_FLAGS, keys(0, 0, 0), S, evalsha),
    spec("eval_ro", -3, READONLY | (EVAL_FLAGS & !MAY_REPLICATE), keys(0, 0, 0), S, eval_ro),
    spec("evalsha_ro", -3, READONLY | (EVAL_FLAGS & !MAY_REPLICATE), keys(0, 0, 0), S, evalsha_ro),
    container("script", -2, 0, SCRIPT),
];

static SCRIPT: &[CommandSpec] = &[
    spec("load", 3, NOSCRIPT | STALE, NO_KEYS, S, script_load),
    spec("exists", -3, NOSCRIPT, NO_KEYS, S, script_exists),
    spec("flush", -2, NOSCRIPT, NO_KEYS, S, script_flush),
    spec("kill", 2, NOSCRIPT | ALLOW_BUSY, NO_KEYS, S, script_kill),
    spec("debug", 3, NOSCRIPT, NO_KEYS, S, script_debug),
    spec("help", 2, LOADING | STALE, NO_KEYS, S, script_help),
];

const NOSCRIPT_ERROR: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// EVAL script numkeys [key ...] [arg ...]
///
/// Runs the script (compiling and caching it first) with KEYS and ARGV.
pub fn eval(ctx: &mut Ctx, args: &Args) -> CmdResult {
    eval_generic(ctx, args, false, false)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
pub fn evalsha(ctx: &mut Ctx, args: &Args) -> CmdResult {
    eval_generic(ctx, args, true, false)
}

/// EVAL_RO script numkeys [key ...] [arg ...]: the script may not write.
pub fn eval_ro(ctx: &mut Ctx, args: &Args) -> CmdResult {
    eval_generic(ctx, args, false, true)
}

/// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
pub fn evalsha_ro(ctx: &mut Ctx, args: &Args) -> CmdResult {
    eval_generic(ctx, args, true, true)
}

fn eval_generic(ctx: &mut Ctx, args: &Args, by_sha: bool, read_only: bool) -> CmdResult {
    // EVAL skips the usual feed (after the command) and shows itself first, so that MONITOR
    // lists the script's commands after it.
    let spec = ctx.spec();
    let (srv, client) = ctx.admin_and_client();
    crate::executor::pubsub::feed_monitor_line(srv, client, spec.name, &args.argv);
    // A digest of the wrong length cannot match: NOSCRIPT before anything else is looked at.
    if by_sha && args.get(1).len() != 40 {
        return Err(CmdError::Raw(NOSCRIPT_ERROR.into()));
    }
    if let Some(mode) = ctx.client().lua_debug {
        if by_sha {
            return Err(CmdError::err("Please use EVAL instead of EVALSHA for debugging"));
        }
        // The session starts before anything is checked, so even an argument error is
        // answered after `<endsession>`, and the connection closes (evalGenericCommandWithDebugging).
        let (srv, client) = ctx.admin_and_client();
        let side = match ldb::begin(srv, client, mode, args.get(1)) {
            Ok(side) => side,
            Err(e) => {
                ctx.client_mut().lua_debug = None;
                return Err(CmdError::err(format!("Fork() failed: can't run EVAL in debugging mode: {e}")));
            }
        };
        if side == ldb::Side::Parent {
            // The child answers; this side sends nothing (its reply is switched off).
            return Ok(Reply::Ok);
        }
        let reply = run_checked(ctx, args, by_sha, read_only).unwrap_or_else(CmdError::into_reply);
        return Ok(ldb::finish(ctx.client_mut(), side, reply));
    }
    run_checked(ctx, args, by_sha, read_only)
}

/// EVAL's checks and run, once MONITOR has seen it.
fn run_checked(ctx: &mut Ctx, args: &Args, by_sha: bool, read_only: bool) -> CmdResult {
    let numkeys = args.i64(2)?;
    if numkeys > (args.len() - 3) as i64 {
        return Err(CmdError::err("Number of keys can't be greater than number of args"));
    }
    if numkeys < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    let script = if by_sha {
        let sha = String::from_utf8_lossy(args.get(1)).to_ascii_lowercase();
        match ctx.state().scripting.get(&sha) {
            Some(script) => script.clone(),
            None => return Err(CmdError::Raw(NOSCRIPT_ERROR.into())),
        }
    } else {
        ctx.admin().scripting.create(args.get(1)).map_err(CmdError::Line)?
    };
    let rules = prepare_run(ctx.admin(), script.flags, read_only)?;
    let (keys, argv) = args.argv[3..].split_at(numkeys as usize);
    let now = ctx.now_ms();
    let (srv, client) = ctx.admin_and_client();
    Ok(crate::executor::scripting::run(
        srv,
        client,
        crate::executor::scripting::Callable::Script(&script),
        keys,
        argv,
        rules,
        now,
    ))
}

/// The checks Redis makes before a run (scriptPrepareForRun), and the rules the run gets.
pub(super) fn prepare_run(st: &State, flags: u32, read_only: bool) -> Result<RunRules, CmdError> {
    let compat = flags & script_flags::EVAL_COMPAT_MODE != 0;
    let no_writes = flags & script_flags::NO_WRITES != 0;
    let allow_oom = flags & script_flags::ALLOW_OOM != 0;
    let oom = st.config.maxmemory > 0 && st.pre_command_oom;
    // A script without a shebang may not start on a stale replica at all; one with flags got
    // here only with allow-stale, and its commands are checked one by one.
    if compat && crate::executor::call::running_stale(st) {
        return Err(CmdError::Raw(crate::executor::call::MASTERDOWN.into()));
    }
    if !compat {
        if flags & script_flags::NO_CLUSTER != 0 && st.cluster.is_some() {
            return Err(CmdError::err("Can not run script on cluster, 'no-cluster' flag is set."));
        }
        if !allow_oom && oom && !no_writes {
            return Err(CmdError::Raw(
                "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'".into(),
            ));
        }
        if !no_writes {
            match crate::executor::snapshot::disk_error(st) {
                Some(crate::executor::snapshot::DiskError::Rdb) => return Err(CmdError::Raw(
                    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. \
                         Writable scripts are blocked. Use 'no-writes' flag for read only scripts."
                        .into(),
                )),
                Some(crate::executor::snapshot::DiskError::Aof(text)) => return Err(CmdError::Raw(text)),
                None => {}
            }
            if read_only {
                return Err(CmdError::err("Can not execute a script with write flag using *_ro command."));
            }
            if !crate::executor::call::good_replicas(st) {
                return Err(CmdError::Raw(crate::executor::call::NOREPLICAS.into()));
            }
        }
    }
    Ok(RunRules {
        read_only: read_only || (!compat && no_writes),
        allow_oom: !compat && allow_oom,
        oom_at_start: oom,
        allow_cross_slot: compat || flags & script_flags::ALLOW_CROSS_SLOT_KEYS != 0,
    })
}

/// SCRIPT LOAD script
///
/// Compiles the script into the cache without running it; replies with its SHA1.
pub fn script_load(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let script = ctx.admin().scripting.create(args.get(2)).map_err(CmdError::Line)?;
    Ok(Reply::Bulk(script.sha.clone().into_bytes()))
}

/// SCRIPT EXISTS sha1 [sha1 ...]
///
/// 1 or 0 for each digest (any case) by whether the cache holds it.
pub fn script_exists(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let found = args.from(2).map(|sha| {
        Reply::Int(ctx.state().scripting.contains(&String::from_utf8_lossy(sha).to_ascii_lowercase()) as i64)
    });
    Ok(Reply::Array(found.collect()))
}

/// SCRIPT FLUSH [ASYNC|SYNC]
///
/// Empties the script cache. Both modes free at once: the cache is small next to a keyspace.
pub fn script_flush(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let ok = args.len() == 2 || (args.len() == 3 && (args.is(2, "sync") || args.is(2, "async")));
    if !ok {
        return Err(CmdError::err("SCRIPT FLUSH only support SYNC|ASYNC option"));
    }
    // As Redis, the scripts' Lua VM starts afresh (its memory with it); function libraries, which
    // share the VM here (Redis gives them their own), are loaded into the new one again.
    ctx.admin().scripting = crate::executor::scripting::Engine::default();
    if !ctx.state().functions.libs.is_empty() {
        crate::executor::scripting::host::reload_all(ctx.admin());
    }
    Ok(Reply::Ok)
}

/// SCRIPT KILL
///
/// Scripts run to completion on the executor thread before any other command is read, so there
/// is never a running script to stop when this command is served.
pub fn script_kill(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Err(CmdError::Raw("NOTBUSY No scripts in execution right now.".into()))
}

/// SCRIPT DEBUG YES|SYNC|NO
///
/// Sets how the client's next EVAL runs: under the Lua debugger in a forked session (YES), in
/// this server (SYNC), or normally (NO). See `executor::scripting::ldb`.
pub fn script_debug(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if ctx.client().handle.pending_output() > 0 {
        return Err(CmdError::err("SCRIPT DEBUG must be called outside a pipeline"));
    }
    let mode = if args.is(2, "no") {
        None
    } else if args.is(2, "yes") {
        Some(ldb::Mode::Fork)
    } else if args.is(2, "sync") {
        Some(ldb::Mode::Sync)
    } else {
        return Err(CmdError::err("Use SCRIPT DEBUG YES/SYNC/NO"));
    };
    ctx.client_mut().lua_debug = mode;
    Ok(Reply::Ok)
}

/// SCRIPT HELP
pub fn script_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(super::server::help_reply(
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    ))
}
