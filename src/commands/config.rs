//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP over the executor's `State.config`, the
//! authoritative copy. Names, validation and value texts come from `crate::config`'s table; this
//! module adds Redis's CONFIG SET semantics (validate all, apply all, one rollback; error
//! precedence; protected and immutable directives), runs the table's apply hooks
//! (`config::Apply`) and publishes network-side values to `config::live`.

use super::flags::*;
use super::{acl, container, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::config::{self, Apply, Config, Desc, Kind, LoadState, NumFmt, IMMUTABLE, MULTI_ARG, PROTECTED};
use crate::daemon::OomClass;
use crate::executor::State;
use crate::resp::Reply;
use crate::util::c_str;

const SUBCOMMANDS: &[CommandSpec] = &[
    spec("get", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, 0, get),
    spec("set", -4, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, 0, set),
    spec("resetstat", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, 0, resetstat),
    spec("rewrite", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, 0, rewrite),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, help),
];

pub static COMMANDS: &[CommandSpec] = &[container("config", -2, acl::SLOW, SUBCOMMANDS)];

/// CONFIG GET parameter [parameter ...]
///
/// Replies with a map of every directive matching any of the patterns (case-insensitive glob;
/// a name without glob characters is looked up directly and may name a hidden directive), each
/// reported once, under the name that matched (aliases included).
pub fn get(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let cfg = &ctx.admin().config;
    let mut found: Vec<(String, &'static Desc)> = Vec::new();
    for pat in args.from(2) {
        let pat_str = String::from_utf8_lossy(pat);
        if !pat.iter().any(|c| matches!(c, b'[' | b'*' | b'?')) {
            // An exact name is reported as the client spelled it, as Redis does.
            if let Some(desc) = config::lookup(&pat_str) {
                if !found.iter().any(|(n, _)| n.eq_ignore_ascii_case(&pat_str)) {
                    found.push((pat_str.into_owned(), desc));
                }
            }
            continue;
        }
        for (name, desc) in config::all_names() {
            if desc.has(config::HIDDEN) || found.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                continue;
            }
            if crate::glob::glob_match(pat, name.as_bytes(), true) {
                found.push((name.to_string(), desc));
            }
        }
    }
    let pairs = found.into_iter().map(|(name, desc)| (Reply::bulk(name), Reply::bulk(cfg.get(desc)))).collect();
    Ok(Reply::Map(pairs))
}

/// CONFIG SET parameter value [parameter value ...]
///
/// Sets every pair or none, as Redis's configSetCommand: names are checked first (unknown,
/// immutable, protected, duplicate; the first problem in argument order wins); then every value
/// is validated and set on a copy of the config; the copy is committed and the apply hooks of
/// the directives whose value changed run (each hook once, in argument order). A value that does
/// not validate leaves the config as it was; a hook that fails restores every old value and runs
/// the hooks again with them. Multi-argument directives take their arguments space-separated in
/// one value, as Redis does.
pub fn set(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let pairs = named_pairs(ctx, args)?;
    let old: Config = ctx.config().clone();
    // `dir` changes the process's working directory as it is set (its validation is the chdir).
    let old_dir = std::env::current_dir().ok();
    let restore_dir = || {
        if let Some(d) = &old_dir {
            let _ = std::env::set_current_dir(d);
        }
    };
    let mut next = old.clone();
    let mut state = LoadState::default();
    for (desc, registered, value) in &pairs {
        let argv = set_arguments(desc, value);
        if let Err(why) = next.set_directive(desc, &argv, &mut state) {
            restore_dir();
            return Err(set_failed(registered, &why));
        }
    }
    // Each hook runs once, named in errors after the first changed directive that asks for it.
    let mut hooks: Vec<(Apply, &str)> = Vec::new();
    for (desc, registered, _) in &pairs {
        if let Some(hook) = desc.apply {
            if !hooks.iter().any(|(h, _)| *h == hook) && old.get(desc) != next.get(desc) {
                hooks.push((hook, registered));
            }
        }
    }
    ctx.admin().config = next;
    for (hook, name) in &hooks {
        if let Err(why) = run_hook(*hook, ctx.admin()) {
            tracing::warn!(
                "Failed applying new configuration. Possibly related to new {name} setting. Restoring previous settings."
            );
            ctx.admin().config = old;
            restore_dir();
            for (hook, _) in &hooks {
                if let Err(e) = run_hook(*hook, ctx.admin()) {
                    tracing::warn!("Failed applying restored failed CONFIG SET command: {e}");
                }
            }
            return Err(set_failed(name, &why));
        }
    }
    config::live::publish(&ctx.admin().config);
    super::users::acl_changed(ctx.admin());
    // cluster-announce-* and cluster-replica-no-failover change what this node tells its peers.
    if ctx.state().cluster.is_some() {
        crate::executor::cluster::update_myself_announced(ctx.admin());
        crate::executor::cluster::before_reply(ctx.admin());
    }
    Ok(Reply::Ok)
}

fn set_failed(name: &str, why: &str) -> CmdError {
    CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {why}"))
}

/// A directive, the name CONFIG SET gave it, and its value as sent.
type NamedPair<'a> = (&'static Desc, &'static str, &'a [u8]);

/// CONFIG SET's pairs, each with the name it was registered under (canonical or alias): Redis
/// registers an alias as a separate entry, so errors name the alias, and an alias plus its
/// canonical name in one call do not count as a duplicate.
fn named_pairs<'a>(ctx: &mut Ctx, args: &'a Args) -> Result<Vec<NamedPair<'a>>, CmdError> {
    if args.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    let mut pairs: Vec<NamedPair<'a>> = Vec::new();
    for i in (2..args.len()).step_by(2) {
        let name = args.str(i);
        let Some(desc) = config::lookup(&name) else {
            return Err(CmdError::echo(&[
                b"ERR Unknown option or number of arguments for CONFIG SET - '",
                args.get(i),
                b"'",
            ]));
        };
        if desc.has(IMMUTABLE) {
            return Err(set_failed(&name, "can't set immutable config"));
        }
        if desc.has(PROTECTED) && !protected_allowed(ctx) {
            return Err(set_failed(&name, "can't set protected config"));
        }
        // Redis's DENY_LOADING_CONFIG: these wait for a load in progress to end.
        let loading = ctx.admin().stats.persistence.loading || ctx.state().repl.sync_loading.is_some();
        if matches!(desc.name, "dir" | "appendonly") && loading {
            return Err(CmdError::Raw("LOADING Redis is loading the dataset in memory".into()));
        }
        let lower = name.to_ascii_lowercase();
        let registered = if desc.alias == Some(lower.as_str()) { desc.alias.unwrap_or(desc.name) } else { desc.name };
        if pairs.iter().any(|(_, n, _)| *n == registered) {
            return Err(set_failed(&name, "duplicate parameter"));
        }
        pairs.push((desc, registered, args.get(i + 1)));
    }
    Ok(pairs)
}

/// Runs one apply hook (`config::Apply`, named by the table) against the committed `st.config`:
/// Redis's apply functions, with their error texts. Each makes the server match the config it
/// finds, so the rollback can run them again with the old values.
fn run_hook(hook: Apply, st: &mut State) -> Result<(), String> {
    let cfg = &st.config;
    let value = |n: &str| config::lookup(n).map(|d| cfg.get(d)).unwrap_or_default();
    let listen = |result: Result<(), String>, why: &str| {
        result.map_err(|e| {
            tracing::warn!("{e}");
            why.to_string()
        })
    };
    const TLS_FAILED: &str = "Unable to update TLS configuration. Check server logs.";
    const LISTEN_FAILED: &str = "Unable to listen on this port. Check server logs.";
    match hook {
        // The bind list is shared by the TCP and TLS listeners (Redis's changeBindAddr).
        Apply::Bind => {
            const WHY: &str = "Failed to bind to specified addresses.";
            listen(config::live::rebind_tcp(cfg), WHY)?;
            listen(config::live::rebind_tls(cfg), WHY)
        }
        Apply::Port => listen(config::live::rebind_tcp(cfg), LISTEN_FAILED),
        Apply::TlsPort => {
            if value("tls-port") != "0" && !config::live::tls_configured() && config::live::configure_tls(cfg).is_err()
            {
                return Err(TLS_FAILED.into());
            }
            listen(config::live::rebind_tls(cfg), LISTEN_FAILED)
        }
        Apply::Tls => {
            let in_use = value("tls-port") != "0" || value("tls-replication") == "yes" || value("tls-cluster") == "yes";
            if in_use && config::live::configure_tls(cfg).is_err() {
                return Err(TLS_FAILED.into());
            }
            Ok(())
        }
        Apply::MaxClients => {
            let wanted = cfg.maxclients;
            let granted = crate::daemon::adjust_open_files_limit(wanted);
            if granted < wanted {
                return Err(format!(
                    "The operating system is not able to handle the specified number of clients, try with {granted}"
                ));
            }
            Ok(())
        }
        Apply::OomScoreAdj => {
            let class = if st.repl.is_replica() { OomClass::Replica } else { OomClass::Master };
            crate::daemon::apply_oom_score_adj(cfg, class).map_err(|why| {
                tracing::warn!("{why}");
                "Failed to set current oom_score_adj. Check server logs.".to_string()
            })
        }
        // Redis's updateWatchdogPeriod (it may raise the value it stores).
        Apply::Watchdog => {
            crate::watchdog::apply(&mut st.config);
            Ok(())
        }
        Apply::LogLevel => {
            crate::log::set_level(&cfg.loglevel);
            Ok(())
        }
        Apply::ProcTitle => {
            crate::proctitle::set(cfg);
            Ok(())
        }
        Apply::RequirePass => {
            let password = cfg.requirepass.clone();
            st.acl.set_default_password(password.as_deref());
            Ok(())
        }
    }
}

/// Whether protected directives (dir, dbfilename) may be changed by this client.
fn protected_allowed(ctx: &Ctx) -> bool {
    config::protected_action_allowed(&ctx.config().enable_protected_configs, ctx.client().info.local)
}

/// A CONFIG SET value as the directive's setter reads it, as Redis's: a multi-argument value is
/// split on single spaces (an empty value is no arguments). Most setters then read an argument
/// as a C string, up to a NUL (strtoll, memtoull, strcasecmp, a copied string); those that take
/// its whole length (string2ll of a plain integer, string2d of a percentile, the two sds
/// directives) see the bytes after it too.
fn set_arguments(desc: &Desc, value: &[u8]) -> Vec<String> {
    let whole_length = matches!(desc.kind, Kind::Num { fmt: NumFmt::Int, .. })
        || matches!(desc.name, "masterauth" | "requirepass" | "latency-tracking-info-percentiles");
    let text = |arg: &[u8]| String::from_utf8_lossy(if whole_length { arg } else { c_str(arg) }).into_owned();
    if !desc.has(MULTI_ARG) {
        return vec![text(value)];
    }
    if value.is_empty() {
        return Vec::new();
    }
    value.split(|&c| c == b' ').map(text).collect()
}

/// CONFIG RESETSTAT
///
/// Resets the INFO counters, command and error statistics. The slowlog is kept, as in Redis.
pub fn resetstat(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    ctx.admin().stats.reset();
    for db in &mut ctx.admin().dbs {
        db.counters = Default::default();
    }
    // The sync counters live with the replication state; Redis's resetServerStats clears them too.
    let r = &mut ctx.admin().repl;
    (r.sync_full, r.sync_partial_ok, r.sync_partial_err) = (0, 0, 0);
    Ok(Reply::Ok)
}

/// CONFIG REWRITE
///
/// Rewrites the config file the server was started with so that it reflects the running
/// configuration, keeping comments and the order of existing lines.
pub fn rewrite(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let Some(path) = ctx.config().config_file.clone() else {
        return Err(CmdError::err("The server is running without a config file"));
    };
    match rewrite_file(ctx, &path, false) {
        Ok(()) => {
            tracing::warn!("CONFIG REWRITE executed with success.");
            Ok(Reply::Ok)
        }
        Err(e) => {
            let why =
                e.raw_os_error().map(|n| nix::errno::Errno::from_raw(n).desc().to_string()).unwrap_or(e.to_string());
            tracing::warn!("CONFIG REWRITE failed: {why}");
            Err(CmdError::err(format!("Rewriting config file: {why}")))
        }
    }
}

/// Rewrites the config file with the running configuration and users; `force_all` writes
/// every directive, defaults included (DEBUG CONFIG-REWRITE-FORCE-ALL).
pub fn rewrite_file(ctx: &mut Ctx, path: &str, force_all: bool) -> std::io::Result<()> {
    let has_aclfile = crate::config::lookup("aclfile").is_some_and(|d| !ctx.config().get(d).is_empty());
    let users: Vec<String> = if has_aclfile {
        Vec::new()
    } else {
        // The config file is text: a user whose rules are not UTF-8 is written lossily there (an
        // aclfile keeps the bytes).
        String::from_utf8_lossy(&super::users::acl_file_text(ctx.admin())).lines().map(str::to_string).collect()
    };
    ctx.config().rewrite(path, &users, force_all)
}

/// CONFIG HELP
pub fn help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(super::server::help_reply(
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    ))
}
