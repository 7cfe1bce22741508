//! Connection commands: PING, ECHO, QUIT, RESET, SELECT, AUTH, HELLO. They change the
//! calling client's state (protocol, database, authentication) and never touch keys.

use super::flags::*;
use super::{acl, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::resp::Reply;

pub static COMMANDS: &[CommandSpec] = &[
    spec("ping", -1, FAST | SENTINEL, NO_KEYS, acl::CONNECTION, ping),
    spec("echo", 2, LOADING | STALE | FAST, NO_KEYS, acl::CONNECTION, echo),
    spec("quit", -1, ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH, NO_KEYS, acl::CONNECTION, quit),
    spec(
        "reset",
        1,
        ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL,
        NO_KEYS,
        acl::CONNECTION,
        reset,
    ),
    spec("select", 2, LOADING | STALE | FAST, NO_KEYS, acl::CONNECTION, select),
    spec("readonly", 1, LOADING | STALE | FAST, NO_KEYS, acl::CONNECTION, readonly),
    spec("readwrite", 1, LOADING | STALE | FAST, NO_KEYS, acl::CONNECTION, readwrite),
    spec("asking", 1, FAST, NO_KEYS, acl::CONNECTION, asking),
    spec(
        "auth",
        -2,
        ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL,
        NO_KEYS,
        acl::CONNECTION,
        auth,
    ),
    spec(
        "hello",
        -1,
        ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL,
        NO_KEYS,
        acl::CONNECTION,
        hello,
    ),
];

/// PING [message]
///
/// PONG, or the message as a bulk string.
pub fn ping(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    match args.len() {
        1 => Ok(Reply::Status("PONG")),
        2 => Ok(Reply::bulk(args.get(1))),
        _ => Err(CmdError::WrongArity("ping".into())),
    }
}

/// ECHO message
pub fn echo(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    Ok(Reply::bulk(args.get(1)))
}

/// QUIT
///
/// Replies OK, then the connection closes once the reply is written.
pub fn quit(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    ctx.client_mut().close_after_reply = true;
    Ok(Reply::Ok)
}

/// RESET
///
/// Returns the connection to its initial state: db 0, RESP2, no name, unauthenticated when a
/// password is required.
pub fn reset(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    // Runs even inside MULTI: the transaction, WATCHes, tracking and CLIENT REPLY modes go too.
    super::transactions::unwatch_all(ctx);
    let (srv, c) = ctx.admin_and_client();
    crate::executor::tracking::disable(&mut srv.tracking, c);
    c.multi = None;
    c.dirty_exec = false;
    c.dirty_cas = false;
    c.reply_off = false;
    c.reply_skip_next = false;
    c.db = 0;
    c.proto = 2;
    c.name = None;
    c.no_evict = false;
    c.no_touch = false;
    c.user = None;
    c.authenticated = srv.acl.new_connections_authenticated();
    c.handle.set_authenticated(c.authenticated);
    Ok(Reply::Status("RESET"))
}

/// SELECT index
pub fn select(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let idx = args.i64(1)?;
    if ctx.state().cluster.is_some() && idx != 0 {
        return Err(CmdError::err("SELECT is not allowed in cluster mode"));
    }
    if idx < 0 || idx as usize >= ctx.state().dbs.len() {
        return Err(CmdError::DbIndexOutOfRange);
    }
    ctx.client_mut().db = idx as usize;
    Ok(Reply::Ok)
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// AUTH [username] password
pub fn auth(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let (user, pass): (&[u8], &[u8]) =
        if args.len() == 2 { (b"default", args.get(1)) } else { (args.get(1), args.get(2)) };
    if args.len() == 2 && ctx.admin().acl.default_user().nopass {
        return Err(CmdError::err(
            "AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        ));
    }
    let (srv, client) = ctx.admin_and_client();
    if super::users::authenticate(srv, client, args.get(0), user, pass) {
        Ok(Reply::Ok)
    } else {
        Err(CmdError::Raw(WRONGPASS.into()))
    }
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
///
/// Switches the protocol, optionally authenticating and naming the client in the same call, and
/// replies with the server's handshake map.
pub fn hello(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut proto = None;
    if args.len() >= 2 {
        let v = crate::util::num::parse_i64(args.get(1))
            .ok_or_else(|| CmdError::err("Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::Raw("NOPROTO unsupported protocol version".into()));
        }
        proto = Some(v as u8);
    }
    // Each option takes effect as it is read, as in Redis: AUTH authenticates (a later bad
    // option leaves the client authenticated), SETNAME names the client (authenticated or not).
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - i - 1;
        if args.is(i, "auth") && more >= 2 {
            let (srv, client) = ctx.admin_and_client();
            if !super::users::authenticate(srv, client, args.get(0), args.get(i + 1), args.get(i + 2)) {
                return Err(CmdError::Raw(WRONGPASS.into()));
            }
            i += 3;
        } else if args.is(i, "setname") && more >= 1 {
            let name = args.get(i + 1);
            super::validate_client_name(name)?;
            ctx.client_mut().name = Some(name.to_vec()).filter(|n| !n.is_empty());
            i += 2;
        } else {
            return Err(CmdError::echo(&[b"ERR Syntax error in HELLO option '", args.get(i), b"'"]));
        }
    }
    if !ctx.client().authenticated {
        return Err(CmdError::Raw(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> \
             <pass> option can be used to authenticate the client and select the RESP protocol version at \
             the same time"
                .into(),
        ));
    }
    if let Some(p) = proto {
        ctx.client_mut().proto = p;
    }
    Ok(Reply::Map(vec![
        (Reply::bulk("server"), Reply::bulk("redis")),
        (Reply::bulk("version"), Reply::bulk(crate::REDIS_VERSION)),
        (Reply::bulk("proto"), Reply::Int(ctx.client().proto as i64)),
        (Reply::bulk("id"), Reply::Int(ctx.client().id as i64)),
        (Reply::bulk("mode"), Reply::bulk(if ctx.state().cluster.is_some() { "cluster" } else { "standalone" })),
        (Reply::bulk("role"), Reply::bulk(if ctx.state().repl.is_replica() { "replica" } else { "master" })),
        (Reply::bulk("modules"), Reply::Array(vec![])),
    ]))
}

/// READONLY, READWRITE, ASKING
///
/// Cluster-mode connection states; a standalone server refuses them, as Redis does without
/// cluster-enabled.
fn cluster_only(ctx: &mut Ctx) -> Result<(), CmdError> {
    if ctx.state().cluster.is_none() {
        return Err(CmdError::err("This instance has cluster support disabled"));
    }
    Ok(())
}

/// READONLY: this connection may read from a replica the slots its master serves.
pub fn readonly(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    cluster_only(ctx)?;
    ctx.client_mut().cluster_readonly = true;
    Ok(Reply::Ok)
}

/// READWRITE: back to redirections for every key on a replica.
pub fn readwrite(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    cluster_only(ctx)?;
    ctx.client_mut().cluster_readonly = false;
    Ok(Reply::Ok)
}

/// ASKING: the next command (or transaction) may use a slot this node is importing.
pub fn asking(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    cluster_only(ctx)?;
    ctx.client_mut().cluster_asking = true;
    Ok(Reply::Ok)
}
