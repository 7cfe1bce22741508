//! The ACL command family (SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, GENPASS, DRYRUN,
//! LOG, LOAD, SAVE, HELP), AUTH's password check and the ACL file. The permission check before
//! each command is `crate::executor::access`; users and rules live in `crate::acl`.

use bytes::Bytes;

use super::flags::*;
use super::{container, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::acl::{Denied, User};
use crate::executor::access::log_denied;
use crate::executor::clients::Client;
use crate::executor::State;
use crate::resp::Reply;

const ADMIN_SUB: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const PLAIN_SUB: u32 = NOSCRIPT | LOADING | STALE;

static ACL: &[CommandSpec] = &[
    spec("cat", -2, PLAIN_SUB, NO_KEYS, 0, cat),
    spec("deluser", -3, ADMIN_SUB, NO_KEYS, 0, deluser),
    spec("dryrun", -4, ADMIN_SUB, NO_KEYS, 0, dryrun),
    spec("genpass", -2, PLAIN_SUB, NO_KEYS, 0, genpass),
    spec("getuser", 3, ADMIN_SUB, NO_KEYS, 0, getuser),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, help),
    spec("list", 2, ADMIN_SUB, NO_KEYS, 0, list),
    spec("load", 2, ADMIN_SUB, NO_KEYS, 0, load),
    spec("log", -2, ADMIN_SUB, NO_KEYS, 0, log),
    spec("save", 2, ADMIN_SUB, NO_KEYS, 0, save),
    spec("setuser", -3, ADMIN_SUB, NO_KEYS, 0, setuser),
    spec("users", 2, ADMIN_SUB, NO_KEYS, 0, users),
    spec("whoami", 2, PLAIN_SUB, NO_KEYS, 0, whoami),
];

pub static COMMANDS: &[CommandSpec] = &[container("acl", -2, 0, ACL)];

const NO_ACLFILE: &str = "This Redis instance is not configured to use an ACL file. You may want to specify users via \
                          the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis \
                          configuration file set) in order to store users in the Redis configuration.";

/// Whether new users and selectors start with every channel (acl-pubsub-default).
pub fn pubsub_default_all(st: &State) -> bool {
    crate::config::lookup("acl-pubsub-default").is_some_and(|d| st.config.get(d) == "allchannels")
}

/// After a change to the users: the fast-path flag, and protected mode, which Redis applies
/// only while the default user needs no password.
pub fn acl_changed(st: &mut State) {
    st.acl.refresh();
    let open = st.acl.default_user().nopass;
    crate::config::live::PROTECTED.store(st.config.protected_mode && open, std::sync::atomic::Ordering::Relaxed);
}

/// AUTH / HELLO AUTH: switches `client` to the user when the password is right; a failure is
/// logged (object: the command name as sent).
pub fn authenticate(st: &mut State, client: &mut Client, command: &[u8], user: &[u8], password: &[u8]) -> bool {
    let ok = st.acl.users.get(user).is_some_and(|u| u.password_ok(password));
    if ok {
        client.user = (user != b"default").then(|| user.to_vec());
        client.authenticated = true;
        client.handle.set_authenticated(true);
    } else {
        log_denied(st, client, Denied::Auth, command, Some(user));
    }
    ok
}

/// ACL SETUSER username [rule ...]
pub fn setuser(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let name = args.get(2);
    if name.iter().any(|&b| b == b' ' || b == 0) {
        return Err(CmdError::err("Usernames can't contain spaces or null characters"));
    }
    let words: Vec<&[u8]> = args.from(3).collect();
    let rules = crate::acl::merge_selector_args(&words).map_err(|start| {
        CmdError::echo(&[b"ERR Unmatched parenthesis in acl selector starting at '", &start, b"'."])
    })?;
    let pubsub_all = pubsub_default_all(ctx.admin());
    let mut user = ctx.state().acl.users.get(name).cloned().unwrap_or_else(|| User::new(name, pubsub_all));
    for rule in &rules {
        user.apply(rule, pubsub_all).map_err(|e| {
            CmdError::echo(&[b"ERR Error in ACL SETUSER modifier '", rule, b"': ", e.text().as_bytes()])
        })?;
    }
    ctx.admin().acl.users.insert(name.to_vec(), user);
    acl_changed(ctx.admin());
    drop_lost_subscribers(ctx, name);
    Ok(Reply::Ok)
}

/// Closes the connections of `name` subscribed to a channel or pattern the user no longer
/// allows (Redis 7.0 does this when channel permissions shrink).
fn drop_lost_subscribers(ctx: &mut Ctx, name: &[u8]) {
    let st: &State = ctx.state();
    let Some(user) = st.acl.users.get(name) else { return };
    let lost = |c: &Client| {
        c.user_name() == name
            && st.pubsub.subs(c.id).is_some_and(|s| {
                s.channels.iter().chain(&s.shard).any(|ch| !user.may_subscribe(ch, false))
                    || s.patterns.iter().any(|p| !user.may_subscribe(p, true))
            })
    };
    for c in st.clients.values().filter(|c| lost(c)) {
        c.handle.request_close();
    }
    if lost(ctx.client()) {
        ctx.client_mut().close_after_reply = true;
    }
}

fn wrong_subcommand_arity(args: &Args) -> CmdError {
    CmdError::echo(&[b"ERR unknown subcommand or wrong number of arguments for '", args.get(1), b"'. Try ACL HELP."])
}

/// ACL GETUSER username
pub fn getuser(ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(ctx.state().acl.users.get(args.get(2)).map_or(Reply::Nil, User::getuser_reply))
}

/// ACL DELUSER username [username ...]
pub fn deluser(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let names: Vec<&[u8]> = args.from(2).collect();
    if names.iter().any(|n| *n == b"default") {
        return Err(CmdError::err("The 'default' user cannot be removed"));
    }
    let mut deleted = 0;
    for name in names {
        if ctx.admin().acl.users.remove(name).is_none() {
            continue;
        }
        deleted += 1;
        for c in ctx.state().clients.values().filter(|c| c.user_name() == name) {
            c.handle.request_close();
        }
        if ctx.client().user_name() == name {
            ctx.client_mut().close_after_reply = true;
        }
    }
    acl_changed(ctx.admin());
    Ok(Reply::Int(deleted))
}

/// ACL LIST
pub fn list(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Array(ctx.state().acl.users.values().map(|u| Reply::Bulk(u.line())).collect()))
}

/// ACL USERS
pub fn users(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Array(ctx.state().acl.users.keys().map(|n| Reply::Bulk(n.clone())).collect()))
}

/// ACL WHOAMI
pub fn whoami(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Bulk(ctx.client().user_name().to_vec()))
}

/// ACL CAT [category]
pub fn cat(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(wrong_subcommand_arity(args));
    }
    if args.len() == 2 {
        return Ok(Reply::Array(super::acl::NAMES.iter().map(|(_, n)| Reply::bulk(*n)).collect()));
    }
    let Some(bit) = crate::acl::category(args.get(2)) else {
        return Err(CmdError::echo(&[b"ERR Unknown category '", args.get(2), b"'"]));
    };
    Ok(Reply::Array(crate::acl::category_commands(bit).into_iter().map(Reply::bulk).collect()))
}

/// ACL GENPASS [bits]
pub fn genpass(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(wrong_subcommand_arity(args));
    }
    let bits =
        if args.len() == 3 {
            match args.i64(2)? {
                b if (1..=4096).contains(&b) => b as usize,
                _ => return Err(CmdError::err(
                    "ACL GENPASS argument must be the number of bits for the output password, a positive number up \
                     to 4096",
                )),
            }
        } else {
            256
        };
    let chars = bits.div_ceil(4);
    let mut random = vec![0u8; chars.div_ceil(2)];
    fill_random(&mut random);
    let mut hex = String::with_capacity(random.len() * 2);
    for b in &random {
        hex.push_str(&format!("{b:02x}"));
    }
    hex.truncate(chars);
    Ok(Reply::Bulk(hex.into_bytes()))
}

/// Fills `buf` from the kernel's CSPRNG (passwords must not be guessable).
fn fill_random(buf: &mut [u8]) {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: getrandom writes at most `len - filled` bytes into the part of `buf` not yet filled.
        let n = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n <= 0 {
            // No kernel randomness (should not happen on Linux): fall back rather than loop.
            buf[filled..].iter_mut().for_each(|b| *b = fastrand::u8(..));
            return;
        }
        filled += n as usize;
    }
}

/// ACL DRYRUN username command [arg ...]
pub fn dryrun(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let name = args.get(2);
    let Some(user) = ctx.state().acl.users.get(name) else {
        return Err(CmdError::echo(&[b"ERR User '", name, b"' not found"]));
    };
    let argv: Vec<Bytes> = args.argv[3..].to_vec();
    let command_not_found = || CmdError::echo(&[b"ERR Command '", &argv[0], b"' not found"]);
    let Some(top) = super::lookup(&argv[0]) else {
        return Err(command_not_found());
    };
    let (spec, parent) = match (top.is_container(), argv.get(1)) {
        (true, Some(sub)) => match top.subcommand(sub) {
            Some(s) => (s, Some(top)),
            None => return Err(command_not_found()),
        },
        _ => (top, None),
    };
    let full = parent.map_or(spec.name, |p| crate::executor::call::full_name(p, spec));
    if !spec.arity_ok(argv.len()) || (top.is_container() && argv.len() < 2) {
        return Err(CmdError::WrongArity(full.to_string()));
    }
    Ok(match user.check(spec, full, &argv) {
        Ok(()) => Reply::Ok,
        Err(r) => {
            let what = crate::util::c_str(&argv[r.pos]);
            Reply::Bulk(match r.reason {
                Denied::Command => format!("This user has no permissions to run the '{full}' command").into_bytes(),
                Denied::Key => [b"This user has no permissions to access the '", what, b"' key"].concat(),
                Denied::Channel => [b"This user has no permissions to access the '", what, b"' channel"].concat(),
                Denied::Auth => b"This user has no permissions".to_vec(),
            })
        }
    })
}

/// ACL LOG [count | RESET]
pub fn log(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(wrong_subcommand_arity(args));
    }
    let mut count = 10usize;
    if args.len() == 3 {
        if args.is(2, "reset") {
            ctx.admin().acl.log.clear();
            return Ok(Reply::Ok);
        }
        count = args.i64(2)?.max(0) as usize;
    }
    let now = crate::util::clock::unix_ms();
    Ok(Reply::Array(ctx.state().acl.log.iter().take(count).map(|e| e.reply(now)).collect()))
}

/// ACL LOAD
pub fn load(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let Some(path) = aclfile(ctx.admin()) else {
        return Err(CmdError::err(NO_ACLFILE));
    };
    let users = read_acl_file(&path, pubsub_default_all(ctx.admin())).map_err(CmdError::err)?;
    ctx.admin().acl.users = users;
    acl_changed(ctx.admin());
    // The old users are gone, and their connections with them (the default user's stay), as
    // in Redis.
    for c in ctx.state().clients.values().filter(|c| c.user.is_some()) {
        c.handle.request_close();
    }
    if ctx.client().user.is_some() {
        ctx.client_mut().close_after_reply = true;
    }
    Ok(Reply::Ok)
}

/// ACL SAVE
pub fn save(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let Some(path) = aclfile(ctx.admin()) else {
        return Err(CmdError::err(NO_ACLFILE));
    };
    let text = acl_file_text(ctx.admin());
    let tmp = format!("{path}.tmp-{}", std::process::id());
    let written = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!("Failed to save the ACL file '{path}': {e}");
        return Err(CmdError::err(
            "There was an error trying to save the ACLs. Please check the server logs for more information",
        ));
    }
    Ok(Reply::Ok)
}

fn aclfile(st: &State) -> Option<String> {
    crate::config::lookup("aclfile").map(|d| st.config.get(d)).filter(|p| !p.is_empty())
}

/// The users as `user name rules` lines (ACL SAVE, CONFIG REWRITE), bytes as the clients gave
/// them.
pub fn acl_file_text(st: &State) -> Vec<u8> {
    let mut text = Vec::new();
    for u in st.acl.users.values() {
        text.extend_from_slice(&u.line());
        text.push(b'\n');
    }
    text
}

/// Reads and parses the aclfile (the default user exists even when the file does not define
/// it); errors worded as Redis's.
fn read_acl_file(path: &str, pubsub_all: bool) -> Result<std::collections::BTreeMap<Vec<u8>, User>, String> {
    const ROLLBACK: &str = "WARNING: ACL errors detected, no change to the previously active ACL rules was performed";
    let text = std::fs::read(path).map_err(|e| {
        let why = e.raw_os_error().map(crate::config::strerror).unwrap_or_else(|| e.to_string());
        format!("Error loading ACLs, opening file '{path}': {why}")
    })?;
    let mut users = std::collections::BTreeMap::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // Blank lines are skipped; there are no comment lines in an ACL file.
        let words: Vec<&[u8]> = line.split(|&b| b == b' ' || b == b'\t').filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            continue;
        }
        let linenum = i + 1;
        if words[0] != b"user" || words.len() < 2 {
            return Err(format!(
                "{path}:{linenum} should start with user keyword followed by the username. {ROLLBACK}"
            ));
        }
        let name = words[1];
        if users.contains_key(name) {
            return Err(format!(
                "WARNING: Duplicate user '{}' found on line {linenum}. {ROLLBACK}",
                String::from_utf8_lossy(name)
            ));
        }
        let rules = crate::acl::merge_selector_args(&words[2..])
            .map_err(|_| format!("{path}:{linenum}: Unmatched parenthesis in selector definition.{ROLLBACK}"))?;
        let mut user = User::new(name, pubsub_all);
        for rule in &rules {
            user.apply(rule, pubsub_all).map_err(|e| {
                format!(
                    "{path}:{linenum}: Error in applying operation '{}': {}. {ROLLBACK}",
                    String::from_utf8_lossy(rule),
                    e.text()
                )
            })?;
        }
        users.insert(name.to_vec(), user);
    }
    users.entry(b"default".to_vec()).or_insert_with(User::default_user);
    Ok(users)
}

/// The users of `user` directives or the aclfile, at startup (not both, as Redis refuses).
pub fn load_at_startup(st: &mut State) -> Result<(), String> {
    let pubsub_all = pubsub_default_all(st);
    let file = aclfile(st);
    if !st.config.users.is_empty() && file.is_some() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is \
                    invalid. This setup is very likely to lead to configuration errors and security holes, please \
                    define either an ACL file or declare users directly in your redis.conf, but not both."
            .into());
    }
    if let Some(path) = file {
        st.acl.users = read_acl_file(&path, pubsub_all)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
    }
    let directives = std::mem::take(&mut st.config.users);
    let mut seen = std::collections::HashSet::new();
    for words in &directives {
        let name = words[0].as_bytes();
        if name.iter().any(|&b| b == b' ' || b == 0) {
            return Err(format!("Error in user declaration '{}': Spaces not allowed in ACL usernames", words[0]));
        }
        if !seen.insert(name.to_vec()) {
            return Err(format!("Duplicate user '{}' found in the configuration", words[0]));
        }
        // Only `default` exists already: it is reset first, as Redis's ACLLoadConfiguredUsers does.
        let (mut user, reset) = match st.acl.users.remove(name) {
            Some(u) => (u, Some(&b"reset"[..])),
            None => (User::new(name, pubsub_all), None),
        };
        let rules: Vec<&[u8]> = words[1..].iter().map(|w| w.as_bytes()).collect();
        let rules = crate::acl::merge_selector_args(&rules)
            .map_err(|_| format!("Error in user declaration '{}': Unmatched parenthesis", words[0]))?;
        for rule in reset.into_iter().chain(rules.iter().map(|r| &r[..])) {
            user.apply(rule, pubsub_all)
                .map_err(|e| format!("Error in user declaration '{}': {}", words[0], e.text()))?;
        }
        st.acl.users.insert(name.to_vec(), user);
    }
    st.config.users = directives;
    acl_changed(st);
    Ok(())
}

/// ACL HELP
pub fn help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(super::server::help_reply(
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    ))
}
