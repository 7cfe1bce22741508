//! CLIENT and its subcommands: connection introspection (ID, INFO, LIST, GETNAME, SETNAME,
//! SETINFO), control (KILL, PAUSE, UNPAUSE, UNBLOCK, REPLY, NO-EVICT, NO-TOUCH) and client-side
//! caching (TRACKING, CACHING, GETREDIR, TRACKINGINFO). The lines of CLIENT LIST are built by
//! `executor::clients::client_line`.

use super::flags::*;
use super::server::{help_reply, sub_syntax_error};
use super::{acl, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::clients::{client_line, Client, Current};
use crate::executor::State;
use crate::resp::Reply;

const CONN: u64 = acl::CONNECTION;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    spec("reply", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_reply),
    spec("info", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_info),
    spec("unpause", 2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_unpause),
    spec("help", 2, LOADING | STALE, NO_KEYS, CONN, client_help),
    spec("list", -2, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_list),
    spec("kill", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_kill),
    spec("no-evict", 3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_no_evict),
    spec("setname", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_setname),
    spec("id", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_id),
    spec("getname", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_getname),
    spec("pause", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_pause),
    // Redis 7.2 additions.
    spec("setinfo", 4, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_setinfo),
    spec("no-touch", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_no_touch),
    spec("unblock", -3, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_unblock),
    spec("tracking", -3, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_tracking),
    spec("caching", 3, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_caching),
    spec("getredir", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_getredir),
    spec("trackinginfo", 2, NOSCRIPT | LOADING | STALE, NO_KEYS, CONN, client_trackinginfo),
];

/// The kinds CLIENT LIST TYPE and CLIENT KILL TYPE filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    PubSub,
    Master,
}

fn client_type_by_name(name: &[u8]) -> Option<ClientType> {
    let n = name.to_ascii_lowercase();
    match &n[..] {
        b"normal" => Some(ClientType::Normal),
        b"slave" | b"replica" => Some(ClientType::Replica),
        b"pubsub" => Some(ClientType::PubSub),
        b"master" => Some(ClientType::Master),
        _ => None,
    }
}

fn unknown_type(name: &[u8]) -> CmdError {
    CmdError::echo(&[b"ERR Unknown client type '", name, b"'"])
}

/// Redis's client classes: the master link, attached replicas, subscribed clients (MONITOR
/// clients stay normal), the rest.
fn client_type(st: &State, c: &Client) -> ClientType {
    if c.master {
        ClientType::Master
    } else if c.handle.is_replica() {
        ClientType::Replica
    } else if st.pubsub.is_subscribed(c.id) {
        ClientType::PubSub
    } else {
        ClientType::Normal
    }
}

/// CLIENT ID
pub fn client_id(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.client().id as i64))
}

/// CLIENT INFO
///
/// The calling connection's CLIENT LIST line.
pub fn client_info(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let cur = Current::of(ctx, args);
    let now_ms = ctx.now_ms();
    let (srv, client) = ctx.admin_and_client();
    let mut line = client_line(srv, client, now_ms, Some(&cur));
    line.push('\n');
    Ok(Reply::Verbatim("txt", line.into_bytes()))
}

/// CLIENT LIST [TYPE NORMAL|MASTER|REPLICA|PUBSUB] [ID client-id [client-id ...]]
///
/// One line per connection, by id, or only those of a type, or only the listed ids in the
/// order given. Connections already being closed are left out, as Redis has freed them.
pub fn client_list(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut type_filter = None;
    let mut ids: Option<Vec<u64>> = None;
    if args.len() == 4 && args.is(2, "type") {
        type_filter = Some(client_type_by_name(args.get(3)).ok_or_else(|| unknown_type(args.get(3)))?);
    } else if args.len() > 3 && args.is(2, "id") {
        let mut list = Vec::new();
        for a in args.from(3) {
            let id = crate::util::num::parse_i64(a).ok_or_else(|| CmdError::err("Invalid client ID"))?;
            list.push(id);
        }
        ids = Some(list.into_iter().filter(|&id| id > 0).map(|id| id as u64).collect());
    } else if args.len() != 2 {
        return Err(CmdError::Syntax);
    }
    let cur = Current::of(ctx, args);
    let now = ctx.now_ms();
    let me = ctx.client().id;
    let mut out = String::new();
    let st: &State = ctx.state();
    let client_type = |c: &Client| client_type(st, c);
    let mut emit = |c: &Client, is_me: bool| {
        out.push_str(&client_line(st, c, now, if is_me { Some(&cur) } else { None }));
        out.push('\n');
    };
    let live = |c: &Client| !c.handle.close_requested();
    match ids {
        Some(ids) => {
            for id in ids {
                if id == me {
                    emit(ctx.client(), true);
                } else if let Some(c) = ctx.state().clients.get(&id).filter(|c| live(c)) {
                    emit(c, false);
                }
            }
        }
        None => {
            let mut mine = Some(ctx.client());
            let mut others: Vec<&Client> = ctx.state().clients.values().filter(|c| live(c)).map(|c| &**c).collect();
            others.sort_unstable_by_key(|c| c.id);
            for c in others {
                if let Some(m) = mine.filter(|m| m.id < c.id) {
                    if type_filter.is_none_or(|t| t == client_type(m)) {
                        emit(m, true);
                    }
                    mine = None;
                }
                if type_filter.is_none_or(|t| t == client_type(c)) {
                    emit(c, false);
                }
            }
            if let Some(m) = mine {
                if type_filter.is_none_or(|t| t == client_type(m)) {
                    emit(m, true);
                }
            }
        }
    }
    Ok(Reply::Verbatim("txt", out.into_bytes()))
}

/// CLIENT SETNAME connection-name
///
/// Names the connection; an empty name removes it.
pub fn client_setname(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let name = args.get(2);
    super::validate_client_name(name)?;
    ctx.client_mut().name = if name.is_empty() { None } else { Some(name.to_vec()) };
    Ok(Reply::Ok)
}

/// CLIENT GETNAME
pub fn client_getname(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(match &ctx.client().name {
        Some(n) => Reply::bulk(n.clone()),
        None => Reply::Nil,
    })
}

/// CLIENT SETINFO LIB-NAME libname | LIB-VER libver
///
/// Records the client library's name or version (Redis 7.2); an empty value clears it.
pub fn client_setinfo(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let value = args.get(3);
    let is_name = args.is(2, "lib-name");
    if !is_name && !args.is(2, "lib-ver") {
        return Err(CmdError::echo(&[b"ERR Unrecognized option '", args.get(2), b"'"]));
    }
    if value.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(format!(
            "{} cannot contain spaces, newlines or special characters.",
            if is_name { "lib-name" } else { "lib-ver" }
        )));
    }
    let v = if value.is_empty() { None } else { Some(value.to_vec()) };
    if is_name {
        ctx.client_mut().lib_name = v;
    } else {
        ctx.client_mut().lib_ver = v;
    }
    Ok(Reply::Ok)
}

fn on_off(args: &Args, i: usize) -> Result<bool, CmdError> {
    if args.is(i, "on") {
        Ok(true)
    } else if args.is(i, "off") {
        Ok(false)
    } else {
        Err(CmdError::Syntax)
    }
}

/// CLIENT NO-EVICT ON|OFF
pub fn client_no_evict(ctx: &mut Ctx, args: &Args) -> CmdResult {
    ctx.client_mut().no_evict = on_off(args, 2)?;
    Ok(Reply::Ok)
}

/// CLIENT NO-TOUCH ON|OFF
///
/// When on, the client's reads do not update keys' access times (Redis 7.2).
pub fn client_no_touch(ctx: &mut Ctx, args: &Args) -> CmdResult {
    ctx.client_mut().no_touch = on_off(args, 2)?;
    Ok(Reply::Ok)
}

/// CLIENT REPLY ON|OFF|SKIP
///
/// OFF silences every reply until ON; SKIP silences the next command's reply. OFF and SKIP
/// themselves get no reply, ON replies OK.
pub fn client_reply(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.is(2, "on") {
        ctx.client_mut().reply_off = false;
        ctx.client_mut().reply_skip_next = false;
        ctx.client_mut().reply_skip_now = false;
        Ok(Reply::Ok)
    } else if args.is(2, "off") {
        ctx.client_mut().reply_off = true;
        Ok(Reply::Raw(Vec::new()))
    } else if args.is(2, "skip") {
        if !ctx.client().reply_off {
            ctx.client_mut().reply_skip_next = true;
        }
        Ok(Reply::Raw(Vec::new()))
    } else {
        Err(CmdError::Syntax)
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL]
///
/// Records a pause of all (default) or only write commands for `timeout` milliseconds. A
/// pause already in force is only ever extended or widened, as in Redis.
pub fn client_pause(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 4 {
        return Err(sub_syntax_error(args));
    }
    let timeout = crate::util::num::parse_i64(args.get(2))
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let all = if args.len() == 4 {
        if args.is(3, "all") {
            true
        } else if args.is(3, "write") {
            false
        } else {
            return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL"));
        }
    } else {
        true
    };
    let now = ctx.now_ms();
    let srv = ctx.admin();
    let end = now.saturating_add(timeout);
    let active = srv.pause_end_ms > now;
    srv.pause_all = all || (active && srv.pause_all);
    srv.pause_end_ms = if active { srv.pause_end_ms.max(end) } else { end };
    Ok(Reply::Ok)
}

/// CLIENT UNPAUSE
pub fn client_unpause(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    // Ended now rather than forgotten: the clients it held run when this batch ends, even
    // those held under ALL while FAILOVER or a shutdown still holds writes (see
    // `call::resume_postponed`). Those pauses are not CLIENT UNPAUSE's to lift.
    let now = ctx.now_ms();
    let srv = ctx.admin();
    srv.pause_end_ms = srv.pause_end_ms.min(now);
    Ok(Reply::Ok)
}

/// Filters of the CLIENT KILL option form.
#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    kind: Option<ClientType>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    user: Option<Vec<u8>>,
    /// Redis 7.4: only connections at least this many seconds old.
    max_age: Option<i64>,
    skipme: bool,
}

impl KillFilter {
    fn matches(&self, st: &State, c: &Client, now_ms: i64) -> bool {
        self.id.is_none_or(|id| id == c.id)
            && self.kind.is_none_or(|t| t == client_type(st, c))
            && self.addr.as_ref().is_none_or(|a| a[..] == *c.info.addr.as_bytes())
            && self.laddr.as_ref().is_none_or(|a| a[..] == *c.info.laddr.as_bytes())
            && self.user.as_ref().is_none_or(|u| u[..] == *c.user_name())
            && self.max_age.is_none_or(|age| (now_ms - c.created_ms) / 1000 >= age)
    }
}

/// CLIENT KILL ip:port | CLIENT KILL [ID id] [TYPE type] [USER user] [ADDR ip:port]
/// [LADDR ip:port] [SKIPME yes|no] [MAXAGE seconds] ...
///
/// Closes matching connections. The old form closes the one connection from `ip:port` (even
/// the caller) and replies OK or an error; the filter form replies with the number closed and
/// skips the caller unless SKIPME no. The caller, when killed, is closed after this reply.
pub fn client_kill(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let old_form = args.len() == 3;
    let mut f = KillFilter { skipme: !old_form, ..Default::default() };
    if old_form {
        f.addr = Some(args.get(2).to_vec());
    } else {
        let mut i = 2;
        while i < args.len() {
            if i + 1 >= args.len() {
                return Err(CmdError::Syntax);
            }
            let v = args.get(i + 1);
            if args.is(i, "id") {
                match crate::util::num::parse_i64(v) {
                    Some(id) if id > 0 => f.id = Some(id as u64),
                    _ => return Err(CmdError::err("client-id should be greater than 0")),
                }
            } else if args.is(i, "type") {
                f.kind = Some(client_type_by_name(v).ok_or_else(|| unknown_type(v))?);
            } else if args.is(i, "addr") {
                f.addr = Some(v.to_vec());
            } else if args.is(i, "laddr") {
                f.laddr = Some(v.to_vec());
            } else if args.is(i, "user") {
                if !ctx.state().acl.users.contains_key(v) {
                    return Err(CmdError::echo(&[b"ERR No such user '", v, b"'"]));
                }
                f.user = Some(v.to_vec());
            } else if args.is(i, "skipme") {
                f.skipme = if args.is(i + 1, "yes") {
                    true
                } else if args.is(i + 1, "no") {
                    false
                } else {
                    return Err(CmdError::Syntax);
                };
            } else if args.is(i, "maxage") {
                f.max_age = Some(crate::util::num::parse_i64(v).ok_or(CmdError::NotInteger)?);
            } else {
                return Err(CmdError::Syntax);
            }
            i += 2;
        }
    }
    let now = ctx.now_ms();
    let st: &State = ctx.state();
    let victims: Vec<&Client> =
        st.clients.values().filter(|c| !c.handle.close_requested() && f.matches(st, c, now)).map(|c| &**c).collect();
    let mut killed = victims.len() as i64;
    let masters: Vec<u64> = victims.iter().filter(|c| c.master).map(|c| c.id).collect();
    let replicas: Vec<u64> = victims.iter().filter(|c| c.handle.is_replica() && !c.master).map(|c| c.id).collect();
    for c in victims {
        c.handle.request_close();
    }

    if !f.skipme && f.matches(st, ctx.client(), now) {
        ctx.client_mut().close_after_reply = true;
        killed += 1;
    }
    for id in masters {
        crate::executor::replication::master_client_killed(ctx.admin(), id);
    }
    // Redis frees a killed replica at once: it leaves the replica list, and what only it still
    // had to send leaves the backlog, before the connection itself is torn down (a TLS one takes
    // a while).
    for id in replicas {
        crate::executor::replication::detach(ctx.admin(), id);
    }
    if old_form {
        return if killed == 0 { Err(CmdError::err("No such client")) } else { Ok(Reply::Ok) };
    }
    Ok(Reply::Int(killed))
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX prefix ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]
///
/// Turns server-assisted client-side caching on or off for this connection. Options are parsed
/// in full first (syntax errors, an unknown redirect client), then checked against each other and
/// against the mode already on, in Redis's order; turning BCAST on again adds prefixes.
pub fn client_tracking(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut opts = crate::executor::tracking::Options::default();
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if args.is(i, "redirect") && more {
            i += 1;
            if opts.redirect != 0 {
                return Err(CmdError::err("A client can only redirect to a single other client"));
            }
            let id = args.i64(i)?;
            let exists = id > 0 && (id as u64 == ctx.client().id || ctx.state().clients.contains_key(&(id as u64)));
            if !exists {
                return Err(CmdError::err("The client ID you want redirect to does not exist"));
            }
            opts.redirect = id as u64;
        } else if args.is(i, "bcast") {
            opts.bcast = true;
        } else if args.is(i, "optin") {
            opts.optin = true;
        } else if args.is(i, "optout") {
            opts.optout = true;
        } else if args.is(i, "noloop") {
            opts.noloop = true;
        } else if args.is(i, "prefix") && more {
            i += 1;
            opts.prefixes.push(args.get(i).to_vec());
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if args.is(2, "off") {
        let (srv, client) = ctx.admin_and_client();
        crate::executor::tracking::disable(&mut srv.tracking, client);
        return Ok(Reply::Ok);
    }
    if !args.is(2, "on") {
        return Err(CmdError::Syntax);
    }
    let t = &ctx.client().tracking;
    if !opts.bcast && !opts.prefixes.is_empty() {
        return Err(CmdError::err("PREFIX option requires BCAST mode to be enabled"));
    }
    if t.on && t.bcast != opts.bcast {
        return Err(CmdError::err(
            "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if opts.bcast && (opts.optin || opts.optout) {
        return Err(CmdError::err("OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if opts.optin && opts.optout {
        return Err(CmdError::err("You can't specify both OPTIN mode and OPTOUT mode"));
    }
    if (opts.optin && t.optout) || (opts.optout && t.optin) {
        return Err(CmdError::err(
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if opts.bcast {
        if let Some(e) = crate::executor::tracking::prefix_collision(&t.prefixes, &opts.prefixes) {
            return Err(CmdError::err(e));
        }
    }
    let (srv, client) = ctx.admin_and_client();
    crate::executor::tracking::enable(&mut srv.tracking, client, opts);
    Ok(Reply::Ok)
}

/// CLIENT CACHING YES|NO
///
/// In OPTIN mode YES tracks the keys of the next command; in OPTOUT mode NO skips them.
pub fn client_caching(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let t = &mut ctx.client_mut().tracking;
    if !t.on {
        return Err(CmdError::err(
            "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    }
    if args.is(2, "yes") {
        if !t.optin {
            return Err(CmdError::err("CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."));
        }
    } else if args.is(2, "no") {
        if !t.optout {
            return Err(CmdError::err("CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    t.caching = true;
    Ok(Reply::Ok)
}

/// CLIENT GETREDIR
///
/// The id invalidations are redirected to: 0 for none, -1 when tracking is off.
pub fn client_getredir(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let t = &ctx.client().tracking;
    Ok(Reply::Int(if t.on { t.redirect as i64 } else { -1 }))
}

/// CLIENT TRACKINGINFO
///
/// The tracking mode as a map: flags (a set), redirect (-1 when off) and the BCAST prefixes.
pub fn client_trackinginfo(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let t = &ctx.client().tracking;
    let mut flags: Vec<&'static str> = Vec::new();
    if !t.on {
        flags.push("off");
    } else {
        flags.push("on");
        let named = [
            (t.bcast, "bcast"),
            (t.optin, "optin"),
            (t.optout, "optout"),
            (t.caching && t.optin, "caching-yes"),
            (t.caching && t.optout, "caching-no"),
            (t.noloop, "noloop"),
            (t.broken_redir, "broken_redirect"),
        ];
        flags.extend(named.iter().filter(|(on, _)| *on).map(|&(_, n)| n));
    }
    let redirect = if t.on { t.redirect as i64 } else { -1 };
    Ok(Reply::Map(vec![
        (Reply::bulk(&b"flags"[..]), Reply::Set(flags.into_iter().map(|f| Reply::bulk(f.as_bytes())).collect())),
        (Reply::bulk(&b"redirect"[..]), Reply::Int(redirect)),
        (Reply::bulk(&b"prefixes"[..]), Reply::Array(t.prefixes.iter().map(|p| Reply::bulk(p.clone())).collect())),
    ]))
}

/// CLIENT HELP
pub fn client_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    ))
}

/// CLIENT UNBLOCK client-id [TIMEOUT|ERROR]
///
/// Wakes a client blocked in BLPOP-like commands: with the command's timeout reply (TIMEOUT, the
/// default) or with an UNBLOCKED error. Replies 1 if the client was blocked, else 0.
pub fn client_unblock(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let id = args.i64(2)?;
    let with_error = match args.len() {
        3 => false,
        4 if args.is(3, "timeout") => false,
        4 if args.is(3, "error") => true,
        _ => return Err(CmdError::err("CLIENT UNBLOCK reason should be TIMEOUT or ERROR")),
    };
    if id <= 0 {
        return Ok(Reply::Int(0));
    }
    Ok(Reply::Int(crate::executor::blocking::unblock(ctx.admin(), id as u64, with_error) as i64))
}
