//! Access control at dispatch: the permission check `call()` (and a script's redis.call) makes
//! before each command, its NOPERM wording, and the ACL LOG entry a refusal leaves. Users and
//! rules themselves are `crate::acl`; the ACL command family is `commands::users`.

use bytes::Bytes;

use super::clients::Client;
use super::registry::CommandSpec;
use super::State;
use crate::acl::{Denied, Refusal};

/// The check before a command: the client's user must allow it. Refusals are logged. While
/// the client is the default user and that user allows everything (the common case), this is
/// two loads.
#[inline]
pub fn check(
    st: &mut State,
    client: &Client,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    argv: &[Bytes],
) -> Result<(), Refusal> {
    if client.user.is_none() && st.acl.default_unrestricted {
        return Ok(());
    }
    check_user(st, client, spec, parent, argv)
}

fn check_user(
    st: &mut State,
    client: &Client,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    argv: &[Bytes],
) -> Result<(), Refusal> {
    let full = parent.map_or(spec.name, |p| crate::executor::call::full_name(p, spec));
    let result = match st.acl.users.get(client.user_name()) {
        Some(user) => user.check(spec, full, argv),
        None => Err(Refusal { reason: Denied::Command, pos: 0 }),
    };
    if let Err(r) = result {
        let object = if r.reason == Denied::Command { full.as_bytes() } else { &argv[r.pos][..] };
        log_denied(st, client, r.reason, object, None);
    }
    result
}

/// The NOPERM reply for a refusal; inside EXEC, Redis's "rules changed" wording.
pub fn noperm_text(
    r: Refusal,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    in_exec: bool,
) -> String {
    let full = parent.map_or(spec.name, |p| crate::executor::call::full_name(p, spec));
    if in_exec {
        let reason = match r.reason {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key => "no permission to touch the specified keys",
            Denied::Channel => "no permission to access one of the channels used as arguments",
            Denied::Auth => "no permission",
        };
        return format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This \
             command is no longer allowed for the following reason: {reason}"
        );
    }
    match r.reason {
        Denied::Command => format!("NOPERM this user has no permissions to run the '{full}' command"),
        Denied::Key => "NOPERM this user has no permissions to access one of the keys used as arguments".into(),
        Denied::Channel => "NOPERM this user has no permissions to access one of the channels used as arguments".into(),
        Denied::Auth => "NOPERM".into(),
    }
}

/// The script's wording of a refusal (scriptCall's errors).
pub fn script_refusal_text(r: Refusal) -> &'static str {
    match r.reason {
        Denied::Command => "The user executing the script can't run this command or subcommand",
        Denied::Key => {
            "The user executing the script can't access at least one of the keys mentioned in the command arguments"
        }
        Denied::Channel => "The user executing the script can't publish to the channel mentioned in the command",
        Denied::Auth => "The user executing the script is lacking the permissions for the command",
    }
}

/// Adds an ACL LOG entry for `client` (`username` overrides its user: a failed AUTH's name).
pub fn log_denied(st: &mut State, client: &Client, reason: Denied, object: &[u8], username: Option<&[u8]>) {
    let context = if client.id == crate::executor::scripting::SCRIPT_CLIENT_ID {
        "lua"
    } else if client.multi.is_some() || client.in_exec {
        "multi"
    } else {
        "toplevel"
    };
    let now = crate::util::clock::unix_ms();
    let info = crate::executor::clients::client_line(st, client, now, None);
    let max_len = crate::config::lookup("acllog-max-len").and_then(|d| st.config.get(d).parse().ok()).unwrap_or(128);
    let username = username.unwrap_or(client.user_name()).to_vec();
    st.acl.log(reason, context, object, &username, info, now, max_len);
}
