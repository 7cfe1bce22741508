//! CONFIG GET / SET / RESETSTAT / REWRITE / HELP over the executor's `State.config`, the
//! authoritative copy. Names, validation and value texts come from `crate::config`'s table; this
//! module adds Redis's CONFIG SET semantics (all-or-nothing multi-set, error precedence, protected
//! and immutable directives) and publishes network-side values to `config::live`.

use super::flags::*;
use super::{acl, container, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::config::{self, Config, Desc, LoadState, IMMUTABLE, MULTI_ARG, PROTECTED};
use crate::daemon::OomClass;
use crate::resp::Reply;

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
/// Sets every pair or none: names are checked first (unknown, immutable, protected, duplicate;
/// the first problem in argument order wins), then the values are applied to a copy of the
/// config that replaces the live one only when all succeed. Multi-argument directives take their
/// arguments space-separated in one value, as Redis does.
pub fn set(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    // Each pair keeps the name it was registered under (canonical or alias): Redis registers an
    // alias as a separate entry, so errors name the alias, and an alias plus its canonical name
    // in one call do not count as a duplicate.
    let mut pairs: Vec<(&'static Desc, &'static str, String)> = Vec::new();
    for i in (2..args.len()).step_by(2) {
        let name = args.str(i);
        let Some(desc) = config::lookup(&name) else {
            return Err(CmdError::err(format!("Unknown option or number of arguments for CONFIG SET - '{name}'")));
        };
        let refuse = |why: &str| {
            Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {why}")))
        };
        if desc.has(IMMUTABLE) {
            return refuse("can't set immutable config");
        }
        if desc.has(PROTECTED) && !protected_allowed(ctx) {
            return refuse("can't set protected config");
        }
        // Redis's DENY_LOADING_CONFIG: these wait for a load in progress to end.
        let loading = ctx.admin().stats.persistence.loading || ctx.state().repl.sync_loading.is_some();
        if matches!(desc.name, "dir" | "appendonly") && loading {
            return Err(CmdError::Raw("LOADING Redis is loading the dataset in memory".into()));
        }
        let lower = name.to_ascii_lowercase();
        let registered = if desc.alias == Some(lower.as_str()) { desc.alias.unwrap_or(desc.name) } else { desc.name };
        if pairs.iter().any(|(_, n, _)| *n == registered) {
            return refuse("duplicate parameter");
        }
        pairs.push((desc, registered, args.str(i + 1)));
    }
    let old_dir = std::env::current_dir().ok();
    let mut next: Config = ctx.config().clone();
    let mut state = LoadState::default();
    for (desc, registered, value) in &pairs {
        let argv: Vec<String> = if desc.has(MULTI_ARG) { split_spaces(value) } else { vec![value.clone()] };
        if let Err(why) = next.set_directive(desc, &argv, &mut state) {
            // `dir` changes the process's working directory as it is set: undo that too.
            if let Some(d) = &old_dir {
                let _ = std::env::set_current_dir(d);
            }
            return Err(CmdError::err(format!(
                "CONFIG SET failed (possibly related to argument '{registered}') - {why}"
            )));
        }
    }
    // A new port or bind list is listened on before anything else changes; when that fails the
    // old listeners stay and nothing is set.
    let bind_changed = next.bind != ctx.config().bind;
    if bind_changed || next.port != ctx.config().port {
        if let Err(e) = crate::config::live::rebind_tcp(&next) {
            tracing::warn!("{e}");
            if let Some(d) = &old_dir {
                let _ = std::env::set_current_dir(d);
            }
            let (name, why) = if bind_changed {
                ("bind", "Failed to bind to specified addresses.")
            } else {
                ("port", "Unable to listen on this port. Check server logs.")
            };
            return Err(CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {why}")));
        }
    }
    if let Err(e) = apply_tls(&ctx.admin().config, &next, &pairs, bind_changed) {
        if let Some(d) = &old_dir {
            let _ = std::env::set_current_dir(d);
        }
        return Err(e);
    }
    if pairs.iter().any(|(d, _, _)| d.name == "maxclients") && next.maxclients != ctx.config().maxclients {
        let wanted = next.maxclients;
        let granted = crate::daemon::adjust_open_files_limit(wanted);
        if granted < wanted {
            if let Some(d) = &old_dir {
                let _ = std::env::set_current_dir(d);
            }
            return Err(CmdError::err(format!(
                "CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with {granted}"
            )));
        }
    }
    let oom = |c: &Config| ["oom-score-adj", "oom-score-adj-values"].map(|n| config::lookup(n).map(|d| c.get(d)));
    if oom(&next) != oom(&ctx.admin().config) {
        let class = if ctx.state().repl.is_replica() { OomClass::Replica } else { OomClass::Master };
        if let Err(why) = crate::daemon::apply_oom_score_adj(&next, class) {
            let name =
                pairs.iter().find(|(d, _, _)| d.name.starts_with("oom-score-adj")).map_or("oom-score-adj", |p| p.1);
            tracing::warn!("{why}");
            tracing::warn!(
                "Failed applying new configuration. Possibly related to new {name} setting. Restoring previous settings."
            );
            // Redis's rollback re-applies the old settings (which restores the old score).
            if let Err(why) = crate::daemon::apply_oom_score_adj(&ctx.admin().config, class) {
                tracing::warn!("{why}");
            }
            if let Some(d) = &old_dir {
                let _ = std::env::set_current_dir(d);
            }
            return Err(CmdError::err(format!(
                "CONFIG SET failed (possibly related to argument '{name}') - Failed to set current oom_score_adj. Check server logs."
            )));
        }
    }
    // Redis's updateWatchdogPeriod, on a changed period (it may raise the value it stores).
    if pairs.iter().any(|(d, _, _)| d.name == "watchdog-period")
        && next.watchdog_period() != ctx.config().watchdog_period()
    {
        crate::watchdog::apply(&mut next);
    }
    if next.loglevel != ctx.config().loglevel {
        crate::log::set_level(&next.loglevel);
    }
    let password_changed = next.requirepass != ctx.config().requirepass;
    let title = |c: &Config| config::lookup("proc-title-template").map(|d| c.get(d));
    let title_changed = title(&next) != title(&ctx.admin().config);
    ctx.admin().config = next;
    if title_changed {
        crate::proctitle::set(&ctx.admin().config);
    }
    if password_changed {
        let password = ctx.config().requirepass.clone();
        ctx.admin().acl.set_default_password(password.as_deref());
    }
    config::live::publish(&ctx.admin().config);
    super::users::acl_changed(ctx.admin());
    // cluster-announce-* and cluster-replica-no-failover change what this node tells its peers.
    if ctx.state().cluster.is_some() {
        crate::executor::cluster::update_myself_announced(ctx.admin());
        crate::executor::cluster::before_sleep(ctx.admin());
    }
    Ok(Reply::Ok)
}

/// TLS directives, as Redis's applyTlsCfg and applyTLSPort: a changed TLS setting rebuilds the
/// contexts new connections get (when TLS is in use: a TLS port, tls-replication or tls-cluster);
/// a new tls-port, or bind list, is listened on. Either failing fails the CONFIG SET, the old
/// contexts and listeners staying.
fn apply_tls(
    old: &Config,
    next: &Config,
    pairs: &[(&'static Desc, &'static str, String)],
    bind_changed: bool,
) -> Result<(), CmdError> {
    let value = |c: &Config, n: &str| config::lookup(n).map(|d| c.get(d)).unwrap_or_default();
    let changed = |n: &str| value(old, n) != value(next, n);
    let refuse = |name: &str, why: &str| {
        tracing::warn!(
            "Failed applying new configuration. Possibly related to new {name} setting. Restoring previous settings."
        );
        CmdError::err(format!("CONFIG SET failed (possibly related to argument '{name}') - {why}"))
    };
    let port_changed = changed("tls-port");
    let new_port = value(next, "tls-port") != "0";
    let in_use = new_port || value(next, "tls-replication") == "yes" || value(next, "tls-cluster") == "yes";
    let ctx_name = pairs.iter().find(|(d, _, _)| d.name.starts_with("tls-") && d.name != "tls-port" && changed(d.name));
    if let Some((_, name, _)) = ctx_name.filter(|_| in_use) {
        if config::live::configure_tls(next).is_err() {
            return Err(refuse(name, "Unable to update TLS configuration. Check server logs."));
        }
    } else if port_changed && new_port && config::live::configure_tls(next).is_err() {
        return Err(refuse("tls-port", "Unable to update TLS configuration. Check server logs."));
    }
    if port_changed || (bind_changed && new_port) {
        if let Err(e) = config::live::rebind_tls(next) {
            tracing::warn!("{e}");
            return Err(refuse("tls-port", "Unable to listen on this port. Check server logs."));
        }
    }
    Ok(())
}

/// Whether protected directives (dir, dbfilename) may be changed by this client.
fn protected_allowed(ctx: &Ctx) -> bool {
    config::protected_action_allowed(&ctx.config().enable_protected_configs, ctx.client().info.local)
}

/// Redis splits a multi-argument CONFIG SET value on single spaces (empty value: no arguments).
fn split_spaces(v: &str) -> Vec<String> {
    if v.is_empty() {
        return Vec::new();
    }
    v.split(' ').map(str::to_string).collect()
}

/// CONFIG RESETSTAT
///
/// Resets the INFO counters, command and error statistics. The slowlog is kept, as in Redis.
pub fn resetstat(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    ctx.admin().stats.reset();
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
        super::users::acl_file_text(ctx.admin()).lines().map(str::to_string).collect()
    };
    ctx.config().rewrite(path, &users, force_all)
}

/// CONFIG HELP
pub fn help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    const LINES: &[&str] = &[
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Reply::Array(LINES.iter().map(|l| Reply::Status(l)).collect()))
}
