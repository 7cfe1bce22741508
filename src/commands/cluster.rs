//! CLUSTER and MODULE as a standalone Redis 7.0 without loadable
//! modules answers them.
//!
//! Cluster mode is issue 19's work: until it lands, the node is standalone, and Redis's
//! standalone answer to every cluster command (after its arity check) is that cluster support is
//! disabled. MODULE: no module is loaded, so LIST is empty; loading needs
//! `enable-module-command` (checked by `call()` like DEBUG's switch) and then fails as a Redis
//! that cannot load the file does, since Ferrodis runs no C modules.

use super::flags::*;
use super::{acl, container, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::resp::Reply;

const ADM: u32 = ADMIN | STALE | NO_ASYNC_LOADING;

pub static COMMANDS: &[CommandSpec] =
    &[container("cluster", -2, acl::SLOW, CLUSTER_SUBCOMMANDS), container("module", -2, acl::SLOW, MODULE_SUBCOMMANDS)];

static CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    spec("addslots", -3, ADM, NO_KEYS, 0, cluster_disabled),
    spec("addslotsrange", -4, ADM, NO_KEYS, 0, cluster_disabled),
    spec("bumpepoch", 2, ADM, NO_KEYS, 0, cluster_disabled),
    spec("count-failure-reports", 3, ADMIN | STALE, NO_KEYS, 0, cluster_disabled),
    spec("countkeysinslot", 3, STALE, NO_KEYS, 0, cluster_disabled),
    spec("delslots", -3, ADM, NO_KEYS, 0, cluster_disabled),
    spec("delslotsrange", -4, ADM, NO_KEYS, 0, cluster_disabled),
    spec("failover", -2, ADM, NO_KEYS, 0, cluster_disabled),
    spec("flushslots", 2, ADM, NO_KEYS, 0, cluster_disabled),
    spec("forget", 3, ADM, NO_KEYS, 0, cluster_disabled),
    spec("getkeysinslot", 4, STALE, NO_KEYS, 0, cluster_disabled),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, cluster_disabled),
    spec("info", 2, STALE, NO_KEYS, 0, cluster_disabled),
    spec("keyslot", 3, STALE, NO_KEYS, 0, cluster_disabled),
    spec("links", 2, STALE, NO_KEYS, 0, cluster_disabled),
    spec("meet", -4, ADM, NO_KEYS, 0, cluster_disabled),
    spec("myid", 2, STALE, NO_KEYS, 0, cluster_disabled),
    spec("nodes", 2, STALE, NO_KEYS, 0, cluster_disabled),
    spec("replicas", 3, ADMIN | STALE, NO_KEYS, 0, cluster_disabled),
    spec("replicate", 3, ADM, NO_KEYS, 0, cluster_disabled),
    spec("reset", -2, ADMIN | NOSCRIPT | STALE, NO_KEYS, 0, cluster_disabled),
    spec("saveconfig", 2, ADM, NO_KEYS, 0, cluster_disabled),
    spec("set-config-epoch", 3, ADM, NO_KEYS, 0, cluster_disabled),
    spec("setslot", -4, ADM, NO_KEYS, 0, cluster_disabled),
    spec("shards", 2, STALE, NO_KEYS, 0, cluster_disabled),
    spec("slaves", 3, ADMIN | STALE, NO_KEYS, 0, cluster_disabled),
    spec("slots", 2, STALE, NO_KEYS, 0, cluster_disabled),
];

static MODULE_SUBCOMMANDS: &[CommandSpec] = &[
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, module_help),
    spec("list", 2, ADMIN | NOSCRIPT, NO_KEYS, 0, module_list),
    spec("load", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, NO_KEYS, 0, module_load),
    spec("loadex", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, NO_KEYS, 0, module_load),
    spec("unload", 3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, NO_KEYS, 0, module_unload),
];

/// CLUSTER <subcommand> on a standalone node.
pub fn cluster_disabled(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Err(CmdError::err("This instance has cluster support disabled"))
}

/// MODULE HELP
pub fn module_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(super::server::help_reply(
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    ))
}

/// MODULE LIST: the loaded modules, none here.
pub fn module_list(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Array(Vec::new()))
}

/// MODULE LOAD path [arg ...] / MODULE LOADEX path ...: Ferrodis cannot run Redis's C modules,
/// so the load fails as Redis's does for a file it cannot load, with the reason in the log.
pub fn module_load(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    tracing::warn!(
        "Module {} failed to load: Ferrodis does not load Redis modules",
        String::from_utf8_lossy(args.get(2))
    );
    Err(CmdError::err("Error loading the extension. Please check the server logs."))
}

/// MODULE UNLOAD name: there is no module of any name.
pub fn module_unload(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Err(CmdError::err("Error unloading module: no such module with that name"))
}
