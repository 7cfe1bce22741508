//! Server commands: INFO, CLIENT, SLOWLOG, DEBUG, SHUTDOWN, TIME,
//! MEMORY, LATENCY, ROLE. They read and adjust server-wide state (clients, stats, slowlog) and
//! never change keys, except DEBUG POPULATE which exists for tests.
//!
//! INFO's text is built by `crate::info`; this module only parses arguments and shapes replies.
//! Redis's HELP replies are reproduced line for line because clients and tests compare them.

use super::flags::*;
use super::{acl, container, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::clients::{client_line, Client, Current};
use crate::executor::{ShutdownRequest, State};
use crate::resp::Reply;
use crate::types::{RStr, Value};

pub static COMMANDS: &[CommandSpec] = &[
    spec("info", -1, LOADING | STALE, NO_KEYS, acl::DANGEROUS, info),
    container("client", -2, 0, CLIENT),
    container("slowlog", -2, 0, SLOWLOG),
    spec("debug", -2, ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED, NO_KEYS, 0, debug),
    spec("shutdown", -1, ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY, NO_KEYS, 0, shutdown),
    spec("time", 1, LOADING | STALE | FAST, NO_KEYS, 0, time),
    container("memory", -2, 0, MEMORY),
    container("latency", -2, 0, LATENCY),
    spec("role", 1, NOSCRIPT | LOADING | STALE | FAST, NO_KEYS, acl::ADMIN | acl::DANGEROUS, role),
];

const CONN: u64 = acl::CONNECTION;

static CLIENT: &[CommandSpec] = &[
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

static SLOWLOG: &[CommandSpec] = &[
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, slowlog_help),
    spec("len", 2, ADMIN | LOADING | STALE, NO_KEYS, 0, slowlog_len),
    spec("get", -2, ADMIN | LOADING | STALE, NO_KEYS, 0, slowlog_get),
    spec("reset", 2, ADMIN | LOADING | STALE, NO_KEYS, 0, slowlog_reset),
];

static MEMORY: &[CommandSpec] = &[
    spec("malloc-stats", 2, 0, NO_KEYS, 0, memory_malloc_stats),
    spec("doctor", 2, 0, NO_KEYS, 0, memory_doctor),
    spec("purge", 2, 0, NO_KEYS, 0, memory_purge),
    spec("usage", -3, READONLY, keys(2, 2, 1), 0, memory_usage),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, memory_help),
    spec("stats", 2, 0, NO_KEYS, 0, memory_stats),
];

const LAT: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

static LATENCY: &[CommandSpec] = &[
    spec("graph", 3, LAT, NO_KEYS, 0, latency_graph),
    spec("latest", 2, LAT, NO_KEYS, 0, latency_latest),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, latency_help),
    spec("doctor", 2, LAT, NO_KEYS, 0, latency_doctor),
    spec("reset", -2, LAT, NO_KEYS, 0, latency_reset),
    spec("histogram", -2, LAT, NO_KEYS, 0, latency_histogram),
    spec("history", 3, LAT, NO_KEYS, 0, latency_history),
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

/// C `strtod` on a whole argument, 0 when it is not a number (DEBUG SLEEP).
fn atof(s: &[u8]) -> f64 {
    crate::util::num::parse_f64(s).unwrap_or(0.0)
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
    let text = crate::info::render(ctx.srv, ctx.client, ctx.now_ms, &sections);
    Ok(Reply::Verbatim("txt", text.into_bytes()))
}

// ---------------------------------------------------------------------------------------------
// CLIENT

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
    CmdError::err(format!("Unknown client type '{}'", String::from_utf8_lossy(name)))
}

/// Redis's client classes: a subscribed client is pubsub (MONITOR clients stay normal).
fn client_type(st: &State, c: &Client) -> ClientType {
    if st.pubsub.is_subscribed(c.id) {
        ClientType::PubSub
    } else {
        ClientType::Normal
    }
}

/// CLIENT ID
pub fn client_id(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.client.id as i64))
}

/// CLIENT INFO
///
/// The calling connection's CLIENT LIST line.
pub fn client_info(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let cur = Current::of(ctx, args);
    let mut line = client_line(ctx.srv, ctx.client, ctx.now_ms, Some(&cur));
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
    let now = ctx.now_ms;
    let me = ctx.client.id;
    let mut out = String::new();
    let st: &State = ctx.srv;
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
                    emit(ctx.client, true);
                } else if let Some(c) = ctx.srv.clients.get(&id).filter(|c| live(c)) {
                    emit(c, false);
                }
            }
        }
        None => {
            let mut mine = Some(&*ctx.client);
            let mut others: Vec<&Client> = ctx.srv.clients.values().filter(|c| live(c)).map(|c| &**c).collect();
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
    ctx.client.name = if name.is_empty() { None } else { Some(name.to_vec()) };
    Ok(Reply::Ok)
}

/// CLIENT GETNAME
pub fn client_getname(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(match &ctx.client.name {
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
        return Err(CmdError::err(format!("Unrecognized option '{}'", args.str(2))));
    }
    if value.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(format!(
            "{} cannot contain spaces, newlines or special characters.",
            if is_name { "lib-name" } else { "lib-ver" }
        )));
    }
    let v = if value.is_empty() { None } else { Some(value.to_vec()) };
    if is_name {
        ctx.client.lib_name = v;
    } else {
        ctx.client.lib_ver = v;
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
    ctx.client.no_evict = on_off(args, 2)?;
    Ok(Reply::Ok)
}

/// CLIENT NO-TOUCH ON|OFF
///
/// When on, the client's reads do not update keys' access times (Redis 7.2).
pub fn client_no_touch(ctx: &mut Ctx, args: &Args) -> CmdResult {
    ctx.client.no_touch = on_off(args, 2)?;
    Ok(Reply::Ok)
}

/// CLIENT REPLY ON|OFF|SKIP
///
/// OFF silences every reply until ON; SKIP silences the next command's reply. OFF and SKIP
/// themselves get no reply, ON replies OK.
pub fn client_reply(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.is(2, "on") {
        ctx.client.reply_off = false;
        ctx.client.reply_skip_next = false;
        ctx.client.reply_skip_now = false;
        Ok(Reply::Ok)
    } else if args.is(2, "off") {
        ctx.client.reply_off = true;
        Ok(Reply::Raw(Vec::new()))
    } else if args.is(2, "skip") {
        if !ctx.client.reply_off {
            ctx.client.reply_skip_next = true;
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
    let srv = &mut *ctx.srv;
    let end = ctx.now_ms.saturating_add(timeout);
    let active = srv.pause_end_ms > ctx.now_ms;
    srv.pause_all = all || (active && srv.pause_all);
    srv.pause_end_ms = if active { srv.pause_end_ms.max(end) } else { end };
    Ok(Reply::Ok)
}

/// CLIENT UNPAUSE
pub fn client_unpause(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    ctx.srv.pause_end_ms = 0;
    ctx.srv.pause_all = false;
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
                if !ctx.srv.acl.users.contains_key(v) {
                    return Err(CmdError::err(format!("No such user '{}'", String::from_utf8_lossy(v))));
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
    let now = ctx.now_ms;
    let st: &State = ctx.srv;
    let victims: Vec<&Client> =
        st.clients.values().filter(|c| !c.handle.close_requested() && f.matches(st, c, now)).map(|c| &**c).collect();
    let mut killed = victims.len() as i64;
    for c in victims {
        c.handle.request_close();
    }
    if !f.skipme && f.matches(st, ctx.client, now) {
        ctx.client.close_after_reply = true;
        killed += 1;
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
            let exists = id > 0 && (id as u64 == ctx.client.id || ctx.srv.clients.contains_key(&(id as u64)));
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
        crate::executor::tracking::disable(&mut ctx.srv.tracking, ctx.client);
        return Ok(Reply::Ok);
    }
    if !args.is(2, "on") {
        return Err(CmdError::Syntax);
    }
    let t = &ctx.client.tracking;
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
    crate::executor::tracking::enable(&mut ctx.srv.tracking, ctx.client, opts);
    Ok(Reply::Ok)
}

/// CLIENT CACHING YES|NO
///
/// In OPTIN mode YES tracks the keys of the next command; in OPTOUT mode NO skips them.
pub fn client_caching(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let t = &mut ctx.client.tracking;
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
    let t = &ctx.client.tracking;
    Ok(Reply::Int(if t.on { t.redirect as i64 } else { -1 }))
}

/// CLIENT TRACKINGINFO
///
/// The tracking mode as a map: flags (a set), redirect (-1 when off) and the BCAST prefixes.
pub fn client_trackinginfo(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let t = &ctx.client.tracking;
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

// ---------------------------------------------------------------------------------------------
// SLOWLOG

/// SLOWLOG GET [count]
///
/// The newest `count` entries (10 by default, -1 for all), each as [id, unix time,
/// microseconds, argv, "ip:port", client name].
pub fn slowlog_get(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(sub_syntax_error(args));
    }
    let count = if args.len() == 3 {
        match crate::util::num::parse_i64(args.get(2)) {
            Some(n) if n >= -1 => n,
            _ => return Err(CmdError::err("count should be greater than or equal to -1")),
        }
    } else {
        10
    };
    let take = if count == -1 { usize::MAX } else { count as usize };
    let entries = ctx
        .srv
        .slowlog
        .entries
        .iter()
        .take(take)
        .map(|e| {
            Reply::Array(vec![
                Reply::Int(e.id as i64),
                Reply::Int(e.time),
                Reply::Int(e.duration_us as i64),
                Reply::bulks(e.argv.iter().cloned()),
                Reply::bulk(e.peer.as_bytes()),
                Reply::bulk(e.name.as_bytes()),
            ])
        })
        .collect();
    Ok(Reply::Array(entries))
}

/// SLOWLOG LEN
pub fn slowlog_len(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.srv.slowlog.entries.len() as i64))
}

/// SLOWLOG RESET
///
/// Drops every entry; ids keep counting up.
pub fn slowlog_reset(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    ctx.srv.slowlog.reset();
    Ok(Reply::Ok)
}

/// SLOWLOG HELP
pub fn slowlog_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    ))
}

// ---------------------------------------------------------------------------------------------
// DEBUG

/// DEBUG subcommand [argument ...]
///
/// Test and introspection hooks: SLEEP, SET-ACTIVE-EXPIRE, OBJECT, LOG, ERROR, PROTOCOL,
/// POPULATE, CHANGE-REPL-ID and HELP. SLEEP blocks the executor like Redis blocks its main
/// thread. A known subcommand with the wrong argument count, or an unknown one, gets Redis's
/// "unknown subcommand or wrong number of arguments" error.
/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: saves the dataset (unless NOSAVE), empties it
/// (unless NOFLUSH) and loads the RDB file back. With NOFLUSH a key already present is an error
/// unless MERGE lets the file's value replace it.
fn debug_reload(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (mut merge, mut noflush, mut nosave) = (false, false, false);
    for opt in args.from(2) {
        match &opt.to_ascii_lowercase()[..] {
            b"merge" => merge = true,
            b"noflush" => noflush = true,
            b"nosave" => nosave = true,
            _ => return Err(CmdError::err("DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.")),
        }
    }
    if !nosave && crate::executor::snapshot::save_foreground(ctx.srv).is_err() {
        return Err(CmdError::err("Error trying to save the DB"));
    }
    let path = std::path::Path::new(&ctx.srv.config.dir).join(&ctx.srv.config.dbfilename);
    let loaded = crate::rdb::load::load_path(&path, &ctx.srv.config, None);
    if !noflush {
        for idx in 0..ctx.srv.dbs.len() {
            crate::commands::keys::empty_db(ctx, idx, false);
        }
        ctx.srv.functions = Default::default();
    }
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("Failed trying to load the RDB file {}: {}", path.display(), e);
            return Err(CmdError::err("Error trying to load the RDB dump, check server logs."));
        }
    };
    let dbs = ctx.srv.dbs.len();
    if noflush && !merge {
        // Checked before anything is inserted, so a refused reload changes nothing. A library
        // already loaded clashes as a duplicate key does.
        if let Some(lib) =
            loaded.functions.libs.iter().find(|l| ctx.srv.functions.libs.iter().any(|o| o.name == l.name))
        {
            tracing::warn!("Failed loading library: Library '{}' already exists", String::from_utf8_lossy(&lib.name));
            return Err(CmdError::err("Error trying to load the RDB dump, check server logs."));
        }
        for (idx, src) in loaded.dbs.iter().enumerate().take(dbs) {
            if let Some((key, _, _)) = src.iter_all().find(|(k, _, _)| ctx.srv.dbs[idx].get_ref(k).is_some()) {
                tracing::warn!("RDB has duplicated key '{}' in DB {idx}", String::from_utf8_lossy(key));
                return Err(CmdError::err("Error trying to load the RDB dump, check server logs."));
            }
        }
    }
    let clock = crate::db::lru_clock(ctx.now_ms);
    for (idx, src) in loaded.dbs.iter().enumerate().take(dbs) {
        let db = &mut ctx.srv.dbs[idx];
        for (key, value, expire) in src.iter_all() {
            db.remove(key, ctx.now_ms);
            db.insert_new(key, value.clone(), expire, clock);
        }
    }
    for lib in loaded.functions.libs {
        ctx.srv.functions.libs.retain(|l| l.name != lib.name);
        ctx.srv.functions.libs.push(lib);
    }
    ctx.srv.functions.libs.sort_by(|a, b| a.name.cmp(&b.name));
    crate::executor::scripting::host::reload_all(ctx.srv);
    tracing::info!("DB reloaded by DEBUG RELOAD");
    Ok(Reply::Ok)
}

pub fn debug(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let n = args.len();
    let sub = args.get(1).to_ascii_lowercase();
    match (&sub[..], n) {
        (b"help", 2) => Ok(debug_help()),
        (b"sleep", 3) => {
            let secs = atof(args.get(2));
            if secs > 0.0 && secs.is_finite() {
                std::thread::sleep(std::time::Duration::from_micros((secs * 1e6) as u64));
            }
            Ok(Reply::Ok)
        }
        (b"reload", _) => debug_reload(ctx, args),
        (b"set-active-expire", 3) => {
            ctx.srv.active_expire_enabled = crate::util::num::atoi(args.get(2)) != 0;
            Ok(Reply::Ok)
        }
        (b"object", 3) => debug_object(ctx, args.get(2)),
        (b"log", 3) => {
            tracing::warn!("DEBUG LOG: {}", String::from_utf8_lossy(args.get(2)));
            Ok(Reply::Ok)
        }
        (b"error", 3) => Ok(Reply::Error(args.str(2))),
        (b"protocol", 3) => debug_protocol(ctx, args.get(2)),
        (b"populate", 3..=5) => debug_populate(ctx, args),
        (b"digest", 2) => Ok(Reply::StatusOwned(hex(&dataset_digest(ctx)))),
        (b"digest-value", _) => {
            let now = ctx.now_ms;
            let digests = args
                .from(2)
                .map(|key| {
                    let db = ctx.db();
                    let expires = db.expire_at(key, now).is_some();
                    let d = db.peek(key, now).map_or([0u8; 20], |v| value_digest(v, expires));
                    Reply::bulk(hex(&d))
                })
                .collect();
            Ok(Reply::Array(digests))
        }
        (b"aof-flush-sleep", 3) => {
            ctx.srv.aof.flush_sleep_us = crate::util::num::atoi(args.get(2)).max(0) as u64;
            Ok(Reply::Ok)
        }
        (b"set-skip-checksum-validation", 3) => {
            let skip = crate::util::num::atoi(args.get(2)) != 0;
            crate::rdb::format::SKIP_CHECKSUM_VALIDATION.store(skip, std::sync::atomic::Ordering::Relaxed);
            Ok(Reply::Ok)
        }
        (b"quicklist-packed-threshold", 3) => {
            let size = crate::config::parse_memory(&args.str(2));
            if !size.is_some_and(crate::types::list::set_packed_threshold) {
                return Err(CmdError::err("argument must be a memory value bigger than 1 and smaller than 4gb"));
            }
            Ok(Reply::Ok)
        }
        (b"set-disable-deny-scripts", 3) => {
            ctx.srv.scripts_may_call_noscript = crate::util::num::atoi(args.get(2)) != 0;
            Ok(Reply::Ok)
        }
        (b"pause-cron", 3) => {
            ctx.srv.cron_paused = crate::util::num::atoi(args.get(2)) != 0;
            Ok(Reply::Ok)
        }
        // Reply buffers here are built per batch and freed once written: there is no peak to
        // reset and no resizing job to switch, so both settings are accepted as Redis does.
        (b"replybuffer", 4) if args.is(2, "peak-reset-time") || args.is(2, "resizing") => Ok(Reply::Ok),
        (b"loadaof", 2) => {
            if !crate::executor::aof::reload_from_disk(ctx.srv) {
                std::process::exit(1);
            }
            Ok(Reply::Ok)
        }
        (b"segfault", 2) => {
            // SAFETY: raising a signal at ourselves; the crash handler reports it and the
            // default action then ends the process, as Redis's DEBUG SEGFAULT does.
            unsafe { libc::raise(libc::SIGSEGV) };
            Ok(Reply::Ok)
        }
        (b"panic", 2) | (b"assert", 2) => {
            tracing::warn!(
                "Guru Meditation: DEBUG {} called at Unix time {}",
                args.str(1).to_ascii_uppercase(),
                ctx.now_ms / 1000
            );
            std::process::abort();
        }
        (b"config-rewrite-force-all", 2) => {
            let path = ctx.srv.config.config_file.clone().unwrap_or_default();
            let result = if path.is_empty() {
                Err(std::io::Error::from_raw_os_error(libc::EFAULT))
            } else {
                super::config::rewrite_file(ctx, &path, true)
            };
            result.map(|()| Reply::Ok).map_err(|e| {
                let why = e.raw_os_error().map(crate::config::strerror).unwrap_or_else(|| e.to_string());
                CmdError::err(format!("CONFIG-REWRITE-FORCE-ALL failed: {why}"))
            })
        }
        (b"htstats", 3..) => {
            let db = args.i64(2)?;
            if db < 0 || db as usize >= ctx.srv.dbs.len() {
                return Err(CmdError::err("Out of range database"));
            }
            Ok(Reply::Verbatim("txt", ctx.srv.dbs[db as usize].table_stats().into_bytes()))
        }
        (b"htstats-key", 3..) => {
            let now = ctx.now_ms;
            let Some(value) = ctx.db().peek(args.get(2), now) else { return Err(CmdError::err("no such key")) };
            // Sets open-address one slot per member (no chains), so only the table's size and
            // fill are reported; other encodings are not hash tables here.
            match value {
                Value::Set(set) => match set.table_shape() {
                    Some((slots, members)) => Ok(Reply::Verbatim(
                        "txt",
                        format!(
                            "Hash table 0 stats (main hash table):\n table size: {slots}\n number of elements: {members}\n"
                        )
                        .into_bytes(),
                    )),
                    None => Err(CmdError::err(
                        "The value stored at the specified key is not represented using an hash table",
                    )),
                },
                _ => Err(CmdError::err("The value stored at the specified key is not represented using an hash table")),
            }
        }
        (b"mallctl", 3 | 4) => debug_mallctl(args, false),
        (b"mallctl-str", 3 | 4) => debug_mallctl(args, true),
        (b"change-repl-id", 2) => {
            ctx.srv.replid = crate::util::clock::random_hex(40);
            Ok(Reply::Ok)
        }
        _ => Err(sub_syntax_error(args)),
    }
}

/// DEBUG MALLCTL key [value] / DEBUG MALLCTL-STR key [value]: reads (and first writes, when
/// given) a jemalloc setting, an integer or a string; `VOID` as the value of MALLCTL-STR calls a
/// setting that takes nothing (thread.tcache.flush). Errors carry strerror's text, as Redis's.
fn debug_mallctl(args: &Args, string: bool) -> CmdResult {
    use std::ffi::CString;
    let name = CString::new(args.get(2).to_vec()).map_err(|_| CmdError::err("Invalid argument"))?;
    let err = |code: i32| CmdError::err(crate::config::strerror(code));
    // SAFETY: each mallctl call gets a NUL-terminated name and pointers to locals of the size
    // passed with them; jemalloc writes at most that size.
    unsafe {
        if string {
            if args.len() == 4 && args.is(3, "void") {
                let rc = tikv_jemalloc_sys::mallctl(
                    name.as_ptr(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    0,
                );
                return if rc == 0 { Ok(Reply::Ok) } else { Err(err(rc)) };
            }
            let mut old: *const std::ffi::c_char = std::ptr::null();
            let mut len = std::mem::size_of::<*const std::ffi::c_char>();
            let new_value = if args.len() == 4 {
                Some(CString::new(args.get(3).to_vec()).map_err(|_| err(libc::EINVAL))?)
            } else {
                None
            };
            let mut new_ptr = new_value.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
            let (np, nl) = if new_value.is_some() {
                (&mut new_ptr as *mut _ as *mut std::ffi::c_void, std::mem::size_of::<*const std::ffi::c_char>())
            } else {
                (std::ptr::null_mut(), 0)
            };
            let rc = tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                &mut old as *mut _ as *mut std::ffi::c_void,
                &mut len,
                np,
                nl,
            );
            if rc != 0 {
                return Err(err(rc));
            }
            let text = if old.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(old).to_string_lossy().into_owned()
            };
            return Ok(Reply::bulk(text.into_bytes()));
        }
        // Integers: the setting's width is found as Redis finds it, halving the size while
        // jemalloc answers EINVAL; a write-only setting (EPERM on read) is just written.
        let mut value: u64 = if args.len() == 4 { crate::util::num::atoi(args.get(3)) as u64 } else { 0 };
        let mut size = std::mem::size_of::<u64>();
        while size > 0 {
            let mut old: u64 = 0;
            let mut len = size;
            let (np, nl) = if args.len() == 4 {
                (&mut value as *mut u64 as *mut std::ffi::c_void, size)
            } else {
                (std::ptr::null_mut(), 0)
            };
            let rc = tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                &mut old as *mut u64 as *mut std::ffi::c_void,
                &mut len,
                np,
                nl,
            );
            match rc {
                0 => return Ok(Reply::Int(old as i64)),
                libc::EPERM if args.len() == 4 => {
                    if tikv_jemalloc_sys::mallctl(name.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), np, nl)
                        == 0
                    {
                        return Ok(Reply::Ok);
                    }
                    return Err(err(rc));
                }
                libc::EINVAL => size /= 2,
                _ => return Err(err(rc)),
            }
        }
        Err(err(libc::EINVAL))
    }
}

/// `d ^= sha1(data)`.
fn xor_digest(d: &mut [u8; 20], data: &[u8]) {
    use sha1::Digest;
    let h = sha1::Sha1::digest(data);
    for (a, b) in d.iter_mut().zip(h.iter()) {
        *a ^= b;
    }
}

/// `d = sha1(d ^ sha1(data))`: order-sensitive mixing.
fn mix_digest(d: &mut [u8; 20], data: &[u8]) {
    use sha1::Digest;
    xor_digest(d, data);
    let h = sha1::Sha1::digest(&d[..]);
    d.copy_from_slice(&h);
}

fn hex(d: &[u8; 20]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Mixes one value into `d` as Redis's DEBUG digests do: its type code, its contents, and a
/// marker when the key has a TTL. Collections add their elements here as they arrive.
fn object_digest(d: &mut [u8; 20], v: &Value, expires: bool) {
    // Redis's type codes: OBJ_STRING 0, LIST 1, SET 2, ZSET 3, HASH 4, STREAM 6.
    let type_code: u32 = match v {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    };
    mix_digest(d, &type_code.to_be_bytes());
    match v {
        Value::Str(s) => s.with_bytes(|b| mix_digest(d, b)),
        // Ordered values mix each element in; unordered ones xor a digest per element.
        Value::List(l) => {
            for e in l.iter() {
                e.with_bytes(|b| mix_digest(d, b));
            }
        }
        Value::Set(s) => s.for_each(|e| e.with_bytes(|b| xor_digest(d, b))),
        Value::ZSet(z) => z.walk(0, z.len().saturating_sub(1), false, &mut |member, score| {
            let mut e = [0u8; 20];
            mix_digest(&mut e, member);
            mix_digest(&mut e, crate::util::num::fmt_g17(score).as_bytes());
            xor_digest(d, &e);
            true
        }),
        Value::Hash(h) => {
            for (field, value) in h.iter() {
                let mut e = [0u8; 20];
                mix_digest(&mut e, field);
                mix_digest(&mut e, value);
                xor_digest(d, &e);
            }
        }
        Value::Stream(s) => {
            s.range(crate::types::stream::StreamId::MIN, crate::types::stream::StreamId::MAX, false, |entry| {
                mix_digest(d, format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes());
                entry.for_each_pair(|f, v| {
                    mix_digest(d, &f.to_vec());
                    mix_digest(d, &v.to_vec());
                });
                true
            })
        }
    }
    if expires {
        xor_digest(d, b"!!expire!!");
    }
}

/// DEBUG DIGEST-VALUE's digest of one key's value (all zeros for a missing key).
fn value_digest(v: &Value, expires: bool) -> [u8; 20] {
    let mut d = [0u8; 20];
    object_digest(&mut d, v, expires);
    d
}

/// DEBUG DIGEST: per non-empty database (in order) its index mixed in, then each key's digest
/// (name, then value) xored in, so key order does not matter. All zeros when empty.
fn dataset_digest(ctx: &mut Ctx) -> [u8; 20] {
    let now = ctx.now_ms;
    let mut total = [0u8; 20];
    for (i, db) in ctx.srv.dbs.iter_mut().enumerate() {
        if db.is_empty() {
            continue;
        }
        mix_digest(&mut total, &(i as u32).to_be_bytes());
        let keys: Vec<Vec<u8>> = db.keys(now).map(|(k, _)| k.to_vec()).collect();
        for k in keys {
            let expires = db.expire_at(&k, now).is_some();
            let Some(v) = db.peek(&k, now) else { continue };
            let mut d = [0u8; 20];
            mix_digest(&mut d, &k);
            object_digest(&mut d, v, expires);
            xor_digest(&mut total, &d);
        }
    }
    total
}

/// Redis's OBJ_SHARED_REFCOUNT: shared small integers report it as their refcount.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

fn debug_object(ctx: &mut Ctx, key: &[u8]) -> CmdResult {
    let now = ctx.now_ms;
    let shared_ints = crate::executor::evict::shares_integers(ctx.srv);
    let db = ctx.db();
    // As Redis, a direct look in the table: a key past its TTL but not yet expired is shown.
    let idle = db.idle_seconds_peek(key, now).unwrap_or(0);
    let Some(v) = db.get_ref(key) else {
        return Err(CmdError::NoSuchKey);
    };
    let shared = shared_ints && matches!(v.as_str(), Some(RStr::Int(i)) if (0..10000).contains(i));
    let refcount = if shared { SHARED_REFCOUNT } else { 1 };
    let lru = crate::db::lru_clock(now).wrapping_sub(idle as u32) & crate::db::LRU_CLOCK_MAX;
    Ok(Reply::StatusOwned(format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
        v as *const Value,
        refcount,
        v.encoding_name(),
        serialized_length(v),
        lru,
        idle
    )))
}

/// Bytes an RDB length prefix for `n` takes.
fn rdb_len_size(n: usize) -> usize {
    if n < 1 << 6 {
        1
    } else if n < 1 << 14 {
        2
    } else if n as u64 <= u32::MAX as u64 {
        5
    } else {
        9
    }
}

/// Size of a string as RDB would write it: small integers in their int encodings, long
/// compressible strings LZF-compressed, the rest as length + bytes.
fn rdb_string_size(bytes: &[u8]) -> usize {
    if bytes.len() <= 11 {
        if let Some(n) = crate::util::num::parse_i64(bytes) {
            if n.to_string().as_bytes() == bytes {
                if i8::try_from(n).is_ok() {
                    return 2;
                } else if i16::try_from(n).is_ok() {
                    return 3;
                } else if i32::try_from(n).is_ok() {
                    return 5;
                }
            }
        }
    }
    if bytes.len() > 20 {
        if let Ok(c) = lzf::compress(bytes) {
            if c.len() <= bytes.len() - 4 {
                return 1 + rdb_len_size(c.len()) + rdb_len_size(bytes.len()) + c.len();
            }
        }
    }
    rdb_len_size(bytes.len()) + bytes.len()
}

/// DEBUG OBJECT's serializedlength. Types other than strings report their element bytes.
fn serialized_length(v: &Value) -> usize {
    match v.as_str() {
        Some(s) => s.with_bytes(rdb_string_size),
        None => 0,
    }
}

fn debug_protocol(ctx: &mut Ctx, kind: &[u8]) -> CmdResult {
    let resp3 = ctx.proto() >= 3;
    let kind = kind.to_ascii_lowercase();
    Ok(match &kind[..] {
        b"string" => Reply::bulk("Hello World"),
        b"integer" => Reply::Int(12345),
        // Redis's fixed test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => Reply::Double(3.141),
        b"bignum" => Reply::BigNumber("1234567999999999999999999999999999999".into()),
        b"null" => Reply::Nil,
        b"array" => Reply::Array((0..3).map(Reply::Int).collect()),
        b"set" => Reply::Set((0..3).map(Reply::Int).collect()),
        b"map" => Reply::Map((0..3).map(|i| (Reply::Int(i), Reply::Bool(i == 1))).collect()),
        b"attrib" => {
            let mut raw = Vec::new();
            if resp3 {
                raw.extend_from_slice(b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n");
            }
            raw.extend_from_slice(b"$39\r\nSome real reply following the attribute\r\n");
            Reply::Raw(raw)
        }
        b"push" => {
            if !resp3 {
                return Err(CmdError::err("RESP2 is not supported by this command"));
            }
            Reply::Raw(
                b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n$40\r\nSome real reply following the push reply\r\n".to_vec(),
            )
        }
        b"verbatim" => Reply::Verbatim("txt", b"This is a verbatim\nstring".to_vec()),
        b"true" => Reply::Bool(true),
        b"false" => Reply::Bool(false),
        _ => {
            return Err(CmdError::err(
                "Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    })
}

/// DEBUG POPULATE count [prefix] [size]: creates `prefix:N` keys holding `value:N` (cut or
/// zero-padded to `size`), skipping names that exist.
fn debug_populate(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let positive = || CmdError::err("value is out of range, must be positive");
    let count = crate::util::num::parse_i64(args.get(2)).filter(|&n| n >= 0).ok_or_else(positive)?;
    let prefix: &[u8] = if args.len() >= 4 { args.get(3) } else { b"key" };
    let size = if args.len() == 5 {
        Some(crate::util::num::parse_i64(args.get(4)).filter(|&n| n >= 0).ok_or_else(positive)? as usize)
    } else {
        None
    };
    let now = ctx.now_ms;
    let mut key = Vec::with_capacity(prefix.len() + 21);
    for j in 0..count {
        key.clear();
        key.extend_from_slice(prefix);
        key.push(b':');
        key.extend_from_slice(j.to_string().as_bytes());
        if ctx.db().contains(&key, now) {
            continue;
        }
        let mut val = format!("value:{j}").into_bytes();
        if let Some(size) = size {
            val.resize(size, 0);
        }
        let value = RStr::from_bytes(&val);
        ctx.db().set(&key, Value::Str(value), now);
        ctx.dirty(1);
    }
    Ok(Reply::Ok)
}

fn debug_help() -> Reply {
    help_reply(
        "DEBUG",
        &[
            "AOF-FLUSH-SLEEP <microsec>",
            "    Server will sleep before flushing the AOF, this is used for testing.",
            "ASSERT",
            "    Crash by assertion failed.",
            "CHANGE-REPL-ID",
            "    Change the replication IDs of the instance.",
            "    Dangerous: should be used only for testing the replication subsystem.",
            "CONFIG-REWRITE-FORCE-ALL",
            "    Like CONFIG REWRITE but writes all configuration options, including",
            "    keywords not listed in original configuration file or default values.",
            "CRASH-AND-RECOVER [<milliseconds>]",
            "    Hard crash and restart after a <milliseconds> delay (default 0).",
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LEAK <string>",
            "    Create a memory leak of the input string.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "HTSTATS <dbid>",
            "    Return hash table statistics of the specified Redis database.",
            "HTSTATS-KEY <key>",
            "    Like HTSTATS but for the hash table stored at <key>'s value.",
            "LOADAOF",
            "    Flush the AOF buffers on disk and reload the AOF in memory.",
            "REPLICATE <string>",
            "    Replicates the provided string to replicas, allowing data divergence.",
            "MALLCTL <key> [<val>]",
            "    Get or set a malloc tuning integer.",
            "MALLCTL-STR <key> [<val>]",
            "    Get or set a malloc tuning string.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "DROP-CLUSTER-PACKET-FILTER <packet-type>",
            "    Drop all packets that match the filtered type. Set to -1 allow all packets.",
            "OOM",
            "    Crash the server simulating an out-of-memory error.",
            "PANIC",
            "    Crash the server simulating a panic.",
            "POPULATE <count> [<prefix>] [<size>]",
            "    Create <count> string keys named key:<num>. If <prefix> is specified then",
            "    it is used instead of the 'key' prefix. These are not propagated to",
            "    replicas. Cluster slots are not respected so keys not belonging to the",
            "    current node can be created in cluster mode.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "RELOAD [option ...]",
            "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
            "    * MERGE: conflicting keys will be loaded from RDB.",
            "    * NOFLUSH: the existing database will not be removed before load, but",
            "      conflicting keys will generate an exception and kill the server.",
            "    * NOSAVE: the database will be loaded from an existing RDB file.",
            "    Examples:",
            "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
            "      the database.",
            "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
            "      existing RDB file.",
            "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
            "      file to the database.",
            "RESTART [<milliseconds>]",
            "    Graceful restart: save config, db, restart after a <milliseconds> delay (default 0).",
            "SDSLEN <key>",
            "    Show low level SDS string info representing `key` and value.",
            "SEGFAULT",
            "    Crash the server with sigsegv.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "SET-SKIP-CHECKSUM-VALIDATION <0|1>",
            "    Enables or disables checksum checks for RDB files and RESTORE's payload.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "STRINGMATCH-TEST",
            "    Run a fuzz tester against the stringmatchlen() function.",
            "STRUCTSIZE",
            "    Return the size of different Redis core C structures.",
            "LISTPACK <key>",
            "    Show low level info about the listpack encoding of <key>.",
            "QUICKLIST <key> [<0|1>]",
            "    Show low level info about the quicklist encoding of <key>.",
            "    The optional argument (0 by default) sets the level of detail",
            "CLIENT-EVICTION",
            "    Show low level client eviction pools info (maxmemory-clients).",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
            "REPLYBUFFER PEAK-RESET-TIME <NEVER||RESET|time>",
            "    Sets the time (in milliseconds) to wait between client reply buffer peak resets.",
            "    In case NEVER is provided the last observed peak will never be reset",
            "    In case RESET is provided the peak reset time will be restored to the default value",
            "REPLYBUFFER RESIZING <0|1>",
            "    Enable or disable the reply buffer resize cron job",
            "CLUSTERLINK KILL <to|from|all> <node-id>",
            "    Kills the link based on the direction to/from (both) with the provided node.",
        ],
    )
}

// ---------------------------------------------------------------------------------------------
// SHUTDOWN, TIME, LASTSAVE, ROLE

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]
///
/// Asks the server to stop once this batch is answered, saving first with SAVE or when save
/// points are configured (unless NOSAVE). The caller gets no reply: the connection just closes.
/// ABORT cancels a shutdown a signal asked for that has not happened yet.
pub fn shutdown(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for i in 1..args.len() {
        if args.is(i, "nosave") {
            nosave = true;
        } else if args.is(i, "save") {
            save = true;
        } else if args.is(i, "now") || args.is(i, "force") {
            other = true;
        } else if args.is(i, "abort") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        return Err(CmdError::Syntax);
    }
    if abort {
        // A signal's shutdown waits for the cron (held by DEBUG PAUSE-CRON): that one can be
        // cancelled; a SHUTDOWN command itself never waits.
        if !std::mem::take(&mut ctx.srv.shutdown_asap) {
            return Err(CmdError::err("No shutdown in progress."));
        }
        tracing::warn!("Shutdown manually aborted.");
        return Ok(Reply::Ok);
    }
    let do_save = save || (!nosave && !ctx.srv.config.save.is_empty());
    // The save happens here, on the executor, so a failure can still refuse the shutdown.
    if crate::executor::snapshot::shutdown_save(ctx.srv, do_save).is_err() {
        tracing::warn!("Error trying to save the DB, can't exit.");
        return Err(CmdError::err("Errors trying to SHUTDOWN. Check logs."));
    }
    ctx.srv.shutdown = Some(if do_save { ShutdownRequest::Save } else { ShutdownRequest::NoSave });
    Ok(Reply::Raw(Vec::new()))
}

/// TIME
///
/// [unix seconds, microseconds] as bulk strings.
pub fn time(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let us = crate::util::clock::unix_us();
    Ok(Reply::bulks([(us / 1_000_000).to_string(), (us % 1_000_000).to_string()]))
}

/// ROLE
///
/// Always a master with replication offset 0 and no replicas.
pub fn role(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Array(vec![Reply::bulk("master"), Reply::Int(0), Reply::Array(vec![])]))
}

// ---------------------------------------------------------------------------------------------
// MEMORY

/// MEMORY USAGE key [SAMPLES count]
///
/// Bytes the key and its value take, by Redis's accounting (key string, value object, hash
/// table entry); nil when the key does not exist.
pub fn memory_usage(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut i = 3;
    while i < args.len() {
        if args.is(i, "samples") && i + 1 < args.len() {
            if args.i64(i + 1)? < 0 {
                return Err(CmdError::Syntax);
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    const DICT_ENTRY: usize = 24;
    let key = args.key(2);
    let now = ctx.now_ms;
    Ok(match ctx.db().peek(key, now) {
        Some(v) => {
            Reply::Int((crate::types::value_memory(v) + crate::util::alloc::sds_alloc(key.len()) + DICT_ENTRY) as i64)
        }
        None => Reply::Nil,
    })
}

/// MEMORY STATS
///
/// The memory breakdown INFO memory summarizes, as a map.
pub fn memory_stats(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let m = crate::info::memory_figures(ctx.srv, ctx.client);
    let a = m.alloc;
    let int = |n: u64| Reply::Int(n as i64);
    let signed = |a: u64, b: u64| Reply::Int(a as i64 - b as i64);
    // Redis keeps these ratios as C floats.
    let ratio = |a: u64, b: u64| Reply::Double(if b == 0 { 0.0 } else { (a as f32 / b as f32) as f64 });
    let mut map = vec![
        ("peak.allocated", int(m.peak)),
        ("total.allocated", int(m.used)),
        ("startup.allocated", int(m.startup)),
        ("replication.backlog", int(0)),
        ("clients.slaves", int(0)),
        ("clients.normal", int(m.clients_normal)),
        ("cluster.links", int(0)),
        ("aof.buffer", int(0)),
        ("lua.caches", int(0)),
        ("functions.caches", int(200)),
    ];
    let mut dbs = Vec::new();
    let mut total_keys = 0u64;
    for (i, db) in ctx.srv.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        total_keys += db.len() as u64;
        let table = |n: usize| (n as u64 * 24 + n.next_power_of_two() as u64 * 8) as i64;
        dbs.push((
            format!("db.{i}"),
            Reply::Map(vec![
                (Reply::bulk("overhead.hashtable.main"), Reply::Int(table(db.len()))),
                (
                    Reply::bulk("overhead.hashtable.expires"),
                    Reply::Int(if db.expires_len() == 0 { 0 } else { table(db.expires_len()) }),
                ),
                (Reply::bulk("overhead.hashtable.slot-to-keys"), Reply::Int(0)),
            ]),
        ));
    }
    let net = m.used.saturating_sub(m.startup);
    let tail = vec![
        ("overhead.total", int(m.overhead)),
        ("keys.count", int(total_keys)),
        ("keys.bytes-per-key", int(net.checked_div(total_keys).unwrap_or(0))),
        ("dataset.bytes", int(m.dataset)),
        ("dataset.percentage", ratio(m.dataset * 100, net)),
        ("peak.percentage", ratio(m.used * 100, m.peak)),
        ("allocator.allocated", int(a.allocated)),
        ("allocator.active", int(a.active)),
        ("allocator.resident", int(a.resident)),
        ("allocator-fragmentation.ratio", ratio(a.active, a.allocated)),
        ("allocator-fragmentation.bytes", signed(a.active, a.allocated)),
        ("allocator-rss.ratio", ratio(a.resident, a.active)),
        ("allocator-rss.bytes", signed(a.resident, a.active)),
        ("rss-overhead.ratio", ratio(m.rss, a.resident)),
        ("rss-overhead.bytes", signed(m.rss, a.resident)),
        ("fragmentation", ratio(m.rss, m.used)),
        ("fragmentation.bytes", signed(m.rss, m.used)),
    ];
    let mut out: Vec<(Reply, Reply)> = map.drain(..).map(|(k, v)| (Reply::bulk(k), v)).collect();
    out.extend(dbs.into_iter().map(|(k, v)| (Reply::bulk(k), v)));
    out.extend(tail.into_iter().map(|(k, v)| (Reply::bulk(k), v)));
    Ok(Reply::Map(out))
}

/// MEMORY DOCTOR
///
/// Redis's memory advice. Below 5 MB there is nothing to analyse; above, ferrodis finds no
/// issue to report (it has no eviction, replicas or big client buffers to warn about).
pub fn memory_doctor(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let used = ctx.srv.sample_memory().1;
    let text = if used < 5 * 1024 * 1024 {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in \
         these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I \
         will be back to our programming as soon as I finished rebooting.\n"
    } else {
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this \
         base.\n"
    };
    Ok(Reply::Verbatim("txt", text.as_bytes().to_vec()))
}

/// MEMORY MALLOC-STATS
///
/// Redis prints jemalloc's statistics report here. tikv-jemalloc-ctl only exposes that report
/// with its `use_std` feature, which this build does not enable, so the reply is the one Redis
/// gives when its allocator has no report.
pub fn memory_malloc_stats(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Verbatim("txt", b"Stats not supported for the current allocator".to_vec()))
}

/// MEMORY PURGE
///
/// Redis asks jemalloc to return dirty pages; jemalloc's background decay does that here.
pub fn memory_purge(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Ok)
}

/// MEMORY HELP
pub fn memory_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    ))
}

// ---------------------------------------------------------------------------------------------
// LATENCY (events are recorded by crate::latency::record; see src/latency.rs)

/// LATENCY LATEST
///
/// Per event: [name, unix time of the latest spike, its milliseconds, the worst ever].
pub fn latency_latest(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let rows = ctx.srv.latency.latest().into_iter().map(|(name, time, ms, max)| {
        Reply::Array(vec![Reply::bulk(name), Reply::Int(time), Reply::Int(ms as i64), Reply::Int(max as i64)])
    });
    Ok(Reply::Array(rows.collect()))
}

/// LATENCY HISTORY event
///
/// The event's [unix time, milliseconds] samples, oldest first; empty for an unknown event
/// (names match exactly).
pub fn latency_history(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let samples = ctx.srv.latency.history(args.get(2)).unwrap_or_default();
    let rows = samples.into_iter().map(|(t, ms)| Reply::Array(vec![Reply::Int(t), Reply::Int(ms as i64)]));
    Ok(Reply::Array(rows.collect()))
}

/// LATENCY RESET [event ...]
///
/// Drops the named events (any case), or all of them; replies with how many were dropped.
pub fn latency_reset(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let n = if args.len() == 2 {
        ctx.srv.latency.reset(None)
    } else {
        args.from(2).map(|e| ctx.srv.latency.reset(Some(e))).sum()
    };
    Ok(Reply::Int(n as i64))
}

/// LATENCY GRAPH event
///
/// An ASCII sparkline of the event's samples, each labelled with its age.
pub fn latency_graph(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let now = crate::util::clock::unix_ms() / 1000;
    match ctx.srv.latency.graph(args.get(2), now) {
        Some(text) => Ok(Reply::Verbatim("txt", text.into_bytes())),
        None => Err(CmdError::err(format!("No samples available for event '{}'", args.str(2)))),
    }
}

/// LATENCY DOCTOR
///
/// A human readable analysis of the recorded events, with advice, in Redis's words.
pub fn latency_doctor(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let st = &*ctx.srv;
    let fork_us = st.stats.persistence.latest_fork_usec;
    // Redis's stat_fork_rate: GB of used memory copied per second of fork.
    let fork_rate = if fork_us == 0 {
        0.0
    } else {
        st.stats.used_memory_now() as f64 * 1_000_000.0 / fork_us as f64 / (1024.0 * 1024.0 * 1024.0)
    };
    let inputs = crate::latency::DoctorInputs {
        now_secs: crate::util::clock::unix_ms() / 1000,
        threshold_ms: crate::executor::latency_threshold_ms(st),
        slowlog_log_slower_than: st.config.slowlog_log_slower_than,
        fork_rate_gb_per_sec: fork_rate,
        appendfsync_always: crate::config::lookup("appendfsync").is_some_and(|d| st.config.get(d) == "always"),
        hz: st.config.hz,
        anon_huge_pages: crate::latency::anon_huge_pages(),
    };
    Ok(Reply::Verbatim("txt", st.latency.doctor(&inputs).into_bytes()))
}

/// LATENCY HISTOGRAM [command ...]
///
/// Per-command cumulative latency distributions (power-of-two microsecond buckets) for the
/// named commands (`config|set` names a subcommand; a container names all its subcommands), or
/// for every command run so far. Unknown names are skipped; a name given twice answers twice.
pub fn latency_histogram(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut specs: Vec<&'static str> = Vec::new();
    let add = |specs: &mut Vec<&'static str>, top: &'static CommandSpec| {
        specs.push(top.name);
        for sub in top.subcommands {
            specs.push(crate::executor::call::full_name(top, sub));
        }
    };
    if args.len() == 2 {
        super::all().for_each(|top| add(&mut specs, top));
    } else {
        for name in args.from(2) {
            let mut parts = name.splitn(2, |&c| c == b'|');
            let Some(top) = parts.next().and_then(super::lookup) else { continue };
            match parts.next() {
                None => add(&mut specs, top),
                Some(sub_name) => {
                    if let Some(sub) = top.subcommand(sub_name) {
                        specs.push(crate::executor::call::full_name(top, sub));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for name in specs {
        let Some(stat) = ctx.srv.stats.commands.get(&crate::stats::StatName(name)) else { continue };
        if stat.latency.total() == 0 {
            continue;
        }
        let buckets =
            stat.latency.cumulative_log2().into_iter().map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)));
        out.push((
            Reply::bulk(name),
            Reply::Map(vec![
                (Reply::bulk("calls"), Reply::Int(stat.latency.total() as i64)),
                (Reply::bulk("histogram_usec"), Reply::Map(buckets.collect())),
            ]),
        ));
    }
    Ok(Reply::Map(out))
}

/// LATENCY HELP
pub fn latency_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified \
             command names.",
            "    If no commands are specified then all histograms are replied.",
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
    Ok(Reply::Int(crate::executor::blocking::unblock(ctx.srv, id as u64, with_error) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdb_sizes_match_debug_object() {
        assert_eq!(rdb_string_size(b"123"), 2);
        assert_eq!(rdb_string_size(b"10001"), 3);
        assert_eq!(rdb_string_size(b"barx"), 5);
        assert_eq!(rdb_string_size(&[b'a'; 60]), 12);
        assert_eq!(rdb_string_size(b"012"), 4);
    }

    #[test]
    fn digests_match_redis() {
        use crate::executor::clients::{ClientHandle, ConnInfo};
        let v = Value::Str(RStr::from_bytes(b"bar"));
        assert_eq!(hex(&value_digest(&v, false)), "68467c70ae30376e7ce005bcc8827f5ba7fd67dc");
        assert_eq!(hex(&value_digest(&v, true)), "8ec3828f7209dd3abdf6ee448de8b0c0bd53265f");
        let mut st = crate::executor::State::new(crate::config::Config::default());
        let info = ConnInfo { addr: String::new(), laddr: String::new(), fd: 0, unix: false, local: true };
        let mut client = Client::new(1, info, std::sync::Arc::new(ClientHandle::default()), 0, true);
        let far = i64::MAX / 2;
        st.dbs[0].set(b"foo", v, 0);
        st.dbs[0].set_expire(b"foo", far);
        st.dbs[0].set(b"n", Value::Str(RStr::from_bytes(b"123")), 0);
        let spec = &COMMANDS[0];
        let mut ctx = Ctx { srv: &mut st, client: &mut client, now_ms: 1000, spec };
        assert_eq!(hex(&dataset_digest(&mut ctx)), "7568d5279aa6c244d229b00c2026ef70e142ae1c");
        ctx.srv.dbs[1].set(b"x", Value::Str(RStr::from_bytes(b"y")), 0);
        assert_eq!(hex(&dataset_digest(&mut ctx)), "aec541f463b8302e1e5bd3726e790955ab38fa6d");
    }

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
