//! Replication commands, both sides: SYNC/PSYNC/REPLCONF from a replica (or `redis-cli
//! --replica/--rdb`), REPLICAOF/SLAVEOF and ROLE, WAIT, FAILOVER. The state they act on and the
//! stream itself are `executor::replication`; the link to a master is `server::replica_link`.
//!
//! A full sync forks a child that writes the snapshot into a pipe, exactly as BGSAVE forks, so
//! the dataset is serialized from a copy-on-write image and no other client waits for it. The
//! handler forks, attaches the replica (the stream from the fork on queues on its outbox) and
//! hands the pipe to the connection (through `ClientHandle`), which sends `+FULLRESYNC`, then the
//! snapshot (`stream_rdb`: with the EOF-marker framing when the replica said `REPLCONF capa
//! eof`, otherwise spooled to a temp file first so the `$<length>` header can be sent), then the
//! queued stream. An `rdb-only` reader (redis-cli --rdb) is closed after the snapshot.

use super::flags::*;
use super::{acl, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::replication::{self, FailoverState, LinkState};
use crate::resp::Reply;

pub static COMMANDS: &[CommandSpec] = &[
    spec("sync", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, NO_KEYS, 0, sync),
    spec("psync", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, NO_KEYS, 0, psync),
    spec("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, NO_KEYS, 0, replconf),
    spec("replicaof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, NO_KEYS, 0, replicaof),
    spec("slaveof", 3, ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING, NO_KEYS, 0, replicaof),
    spec("role", 1, NOSCRIPT | LOADING | STALE | FAST, NO_KEYS, acl::ADMIN | acl::DANGEROUS, role),
    spec("wait", 3, NOSCRIPT, NO_KEYS, acl::CONNECTION, wait),
    spec("failover", -1, ADMIN | NOSCRIPT | STALE, NO_KEYS, 0, failover),
];

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT milliseconds]
///
/// A coordinated switch of roles with a replica: writes pause until the target (given with
/// TO, else the first replica in sync) acknowledges the whole stream, then this server
/// becomes its replica and asks it, with `PSYNC <replid> <offset> FAILOVER`, to take over
/// (`executor::replication::failover_cron`). TIMEOUT bounds the wait: the failover is then
/// given up, or with FORCE carried out anyway. ABORT, alone, gives up a failover under way.
/// The reply comes at once; INFO's master_failover_state follows the progress. Arguments are
/// checked first, then the server's state, in Redis's order.
pub fn failover(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() == 2 && args.is(1, "abort") {
        if ctx.admin().repl.failover.state == FailoverState::None {
            return Err(CmdError::err("No failover in progress."));
        }
        replication::abort_failover(ctx.admin(), "Failover manually aborted");
        return Ok(Reply::Ok);
    }
    let (mut timeout, mut target, mut force) = (0i64, None, false);
    let mut j = 1;
    while j < args.len() {
        if args.is(j, "timeout") && j + 1 < args.len() && timeout == 0 {
            timeout = args.i64(j + 1)?;
            if timeout <= 0 {
                return Err(CmdError::err("FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if args.is(j, "to") && j + 2 < args.len() && target.is_none() {
            let port = args.i64(j + 2)?;
            target = Some((String::from_utf8_lossy(args.get(j + 1)).into_owned(), port));
            j += 3;
        } else if args.is(j, "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let now = ctx.now_ms();
    let st = ctx.admin();
    if st.repl.failover.state != FailoverState::None {
        return Err(CmdError::err("FAILOVER already in progress."));
    }
    if st.repl.is_replica() {
        return Err(CmdError::err("FAILOVER is not valid when server is a replica."));
    }
    if st.repl.replicas.is_empty() {
        return Err(CmdError::err("FAILOVER requires connected replicas."));
    }
    if force && (timeout == 0 || target.is_none()) {
        return Err(CmdError::err("FAILOVER with force option requires both a timeout and target HOST and IP."));
    }
    let target = match target {
        Some((host, port)) => {
            // A port no replica can listen on matches none.
            let replica = u16::try_from(port).ok().and_then(|p| replication::find_replica(st, &host, p));
            let Some(replica) = replica else {
                return Err(CmdError::err("FAILOVER target HOST and PORT is not a replica."));
            };
            if replica.state != replication::ReplicaState::Online {
                return Err(CmdError::err("FAILOVER target replica is not online."));
            }
            Some((host, replica.port))
        }
        None => None,
    };
    replication::start_failover(st, target, timeout, force, now);
    Ok(Reply::Ok)
}

/// WAIT numreplicas timeout
///
/// How many replicas acknowledged this client's last write: at once when enough did (or the
/// client may not block), otherwise when enough do or the timeout (milliseconds, 0 = forever)
/// passes; the replicas are asked for an acknowledgement when the batch ends.
pub fn wait(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if ctx.state().repl.is_replica() {
        return Err(CmdError::err(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is \
             configured to be writable (which is not the default) writes to replicas are just local and are not \
             propagated.",
        ));
    }
    let numreplicas = args.i64(1)?;
    let timeout = crate::util::num::parse_i64(args.get(2))
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let target = ctx.client().woff;
    let acked = replication::acked(ctx.admin(), target);
    if acked >= numreplicas || !ctx.may_block() {
        return Ok(Reply::Int(acked));
    }
    let deadline = if timeout == 0 { 0 } else { ctx.now_ms().saturating_add(timeout) };
    let (srv, client) = ctx.admin_and_client();
    replication::wait_for(srv, client.id, target, numreplicas);
    ctx.block(Vec::new(), deadline, Reply::Int(0), "")
}

/// REPLCONF [option value ...]
///
/// Replication settings a replica (or redis-cli) declares before SYNC: `capa`, `rdb-only`,
/// `rdb-filter-only`, `listening-port`, `ip-address`; `ack` (from an attached replica) and
/// `getack` (from the master) get no reply. Unknown options and an even argument count are
/// errors, as in Redis.
pub fn replconf(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut j = 1;
    while j < args.len() {
        let value = args.get(j + 1);
        if args.is(j, "listening-port") {
            ctx.client_mut().replconf.listening_port = args.i64(j + 1)? as u16;
        } else if args.is(j, "ip-address") {
            if value.len() >= 46 {
                return Err(CmdError::err(format!(
                    "REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                )));
            }
            ctx.client_mut().replconf.ip_address = Some(String::from_utf8_lossy(value).into_owned());
        } else if args.is(j, "capa") {
            if value.eq_ignore_ascii_case(b"eof") {
                ctx.client_mut().replconf.capa_eof = true;
            } else if value.eq_ignore_ascii_case(b"psync2") {
                ctx.client_mut().replconf.capa_psync2 = true;
            }
        } else if args.is(j, "ack") {
            if ctx.client().handle.is_replica() {
                if let Some(offset) = crate::util::num::parse_i64(value) {
                    let now_ms = ctx.now_ms();
                    let (srv, client) = ctx.admin_and_client();
                    replication::ack(srv, client.id, offset, now_ms);
                }
            }
            return Ok(Reply::Raw(Vec::new()));
        } else if args.is(j, "getack") {
            if ctx.client().master {
                let offset = ctx.admin().repl.offset.to_string();
                let mut ack = Vec::new();
                crate::aof::encode_command(&mut ack, &[&b"REPLCONF"[..], b"ACK", offset.as_bytes()]);
                ctx.client().handle.push_output(ack);
            }
            return Ok(Reply::Raw(Vec::new()));
        } else if args.is(j, "rdb-only") {
            let v = args.i64(j + 1)?;
            if !(0..=1).contains(&v) {
                return Err(CmdError::err("value is out of range, value must between 0 and 1"));
            }
            ctx.client_mut().replconf.rdb_only = v == 1;
        } else if args.is(j, "rdb-filter-only") {
            if value.eq_ignore_ascii_case(b"functions") {
                ctx.client_mut().replconf.functions_only = true;
            } else if value.is_empty() {
                ctx.client_mut().replconf.functions_only = false;
            } else {
                return Err(CmdError::err(format!(
                    "Unsupported rdb-filter-only option: {}",
                    String::from_utf8_lossy(value)
                )));
            }
        } else {
            return Err(CmdError::err(format!(
                "Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(args.get(j))
            )));
        }
        j += 2;
    }
    Ok(Reply::Ok)
}

/// SYNC
///
/// The pre-PSYNC protocol: the snapshot (no `+FULLRESYNC` line), then the stream.
pub fn sync(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    if let Some(refusal) = sync_refusal(ctx) {
        return refusal;
    }
    full_sync(ctx, false)
}

/// PSYNC replicationid offset
///
/// `+CONTINUE` with the missing stream when the ID is this server's current one (or its
/// previous one, up to where that history ended) and the backlog still holds `offset`;
/// otherwise `+FULLRESYNC <replid> <offset>` and a full sync.
pub fn psync(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if ctx.client().handle.is_replica() {
        // Already a replica: ignored without a reply.
        return Ok(Reply::Raw(Vec::new()));
    }
    if args.len() > 3 && args.is(3, "failover") {
        failover_request(ctx, args)?;
    }
    if let Some(refusal) = sync_refusal(ctx) {
        return refusal;
    }
    tracing::info!("Replica {} asks for synchronization", replica_name(ctx));
    let from = args.i64(2).inspect_err(|_| {
        tracing::warn!("Replica {} asks for synchronization but with a wrong offset", replica_name(ctx));
    })?;
    let replid = args.get(1);
    let psync2 = ctx.client().replconf.capa_psync2;
    let (srv, client) = ctx.admin_and_client();
    if !client.replconf.rdb_only && replication::try_partial(srv, &client.handle, replid, from, psync2) {
        ctx.admin().repl.sync_partial_ok += 1;
        let (ip, port) = announced(ctx);
        let (srv, client) = ctx.admin_and_client();
        replication::attach(srv, client.id, client.handle.clone(), ip, port, true);
        return Ok(Reply::Raw(Vec::new()));
    }
    if replid != b"?" {
        ctx.admin().repl.sync_partial_err += 1;
    }
    full_sync(ctx, true)
}

/// `PSYNC <replid> <offset> FAILOVER`: this replica's master hands over (its FAILOVER). The
/// replica becomes a master, its master's history now its previous one, so the PSYNC that
/// follows continues partially from the old master's offset; the answer `+CONTINUE <new
/// replid>` tells the old master, now a replica, that the failover is done.
fn failover_request(ctx: &mut Ctx, args: &Args) -> Result<(), CmdError> {
    let replid = String::from_utf8_lossy(args.get(1)).into_owned();
    tracing::warn!("Failover request received for replid {replid}.");
    if !ctx.state().repl.is_replica() {
        return Err(CmdError::err("PSYNC FAILOVER can't be sent to a master."));
    }
    if replid != ctx.admin().repl.replid {
        return Err(CmdError::err("PSYNC FAILOVER replid must match my replid."));
    }
    replication::unset_master(ctx.admin());
    let now_ms = ctx.now_ms();
    let (srv, client) = ctx.admin_and_client();
    let info = crate::executor::clients::client_line(srv, client, now_ms, None);
    tracing::info!("MASTER MODE enabled (failover request from '{info}')");
    Ok(())
}

/// Why SYNC/PSYNC cannot be served now, as Redis checks it.
fn sync_refusal(ctx: &mut Ctx) -> Option<CmdResult> {
    if ctx.client().handle.is_replica() {
        // Already a replica: ignored without a reply.
        return Some(Ok(Reply::Raw(Vec::new())));
    }
    if ctx.admin().repl.failover.state != FailoverState::None {
        return Some(Err(CmdError::Raw("NOMASTERLINK Can't SYNC while failing over".into())));
    }
    if ctx.state().repl.is_replica() && !replication::link_up(ctx.admin()) {
        return Some(Err(CmdError::Raw("NOMASTERLINK Can't SYNC while not connected with my master".into())));
    }
    if ctx.client().handle.pending_output() > 0 {
        return Some(Err(CmdError::err("SYNC and PSYNC are invalid with pending output")));
    }
    None
}

/// The address a replica announced (REPLCONF ip-address), else its peer IP; and its port.
fn announced(ctx: &Ctx) -> (String, u16) {
    let ip = ctx.client().replconf.ip_address.clone().unwrap_or_else(|| {
        let addr = &ctx.client().info.addr;
        addr.rsplit_once(':').map_or(addr.as_str(), |(ip, _)| ip).to_string()
    });
    (ip, ctx.client().replconf.listening_port)
}

fn replica_name(ctx: &Ctx) -> String {
    match announced(ctx) {
        // REPLCONF listening-port never came (redis-cli, a bare SYNC), as Redis words it.
        (ip, 0) => format!("{ip}:<unknown-replica-port>"),
        (ip, port) => format!("{ip}:{port}"),
    }
}

/// A full sync (see `replication::request_full_sync`). `psync` says whether the replica gets a
/// `+FULLRESYNC` line.
fn full_sync(ctx: &mut Ctx, psync: bool) -> CmdResult {
    replication::before_full_sync(ctx.admin());
    // Fewer, bigger packets to the replica from now on, at the cost of its lag (Redis does this
    // for a full sync only; a partial one keeps the option as it was).
    if ctx.config().other_flag("repl-disable-tcp-nodelay", false) {
        ctx.client().handle.set_tcp_nodelay(false);
    }
    let (ip, port) = announced(ctx);
    let replica = replication::Waiting {
        id: ctx.client().id,
        handle: ctx.client().handle.clone(),
        conf: ctx.client().replconf.clone(),
        psync,
        ip,
        port,
        since_ms: ctx.now_ms(),
    };
    replication::request_full_sync(ctx.admin(), replica)
        .map_err(|e| CmdError::err(format!("Can't fork the snapshot for SYNC: {e}")))?;
    Ok(Reply::Raw(Vec::new()))
}

/// REPLICAOF host port | NO ONE (and SLAVEOF)
pub fn replicaof(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if ctx.admin().repl.failover.state != FailoverState::None {
        return Err(CmdError::err("REPLICAOF not allowed while failing over."));
    }
    if args.is(1, "no") && args.is(2, "one") {
        if ctx.state().repl.is_replica() {
            replication::unset_master(ctx.admin());
            let now_ms = ctx.now_ms();
            let (srv, client) = ctx.admin_and_client();
            let info = crate::executor::clients::client_line(srv, client, now_ms, None);
            tracing::info!("MASTER MODE enabled (user request from '{info}')");
        }
        return Ok(Reply::Ok);
    }
    if ctx.client().handle.is_replica() {
        return Err(CmdError::err("Command is not valid when client is a replica."));
    }
    let port = crate::util::num::parse_i64(args.get(2))
        .filter(|p| (0..=65535).contains(p))
        .ok_or_else(|| CmdError::err("Invalid master port"))? as u16;
    let host = String::from_utf8_lossy(args.get(1)).into_owned();
    if let Some(m) = &ctx.admin().repl.master {
        if m.host.eq_ignore_ascii_case(&host) && m.port == port {
            tracing::info!(
                "REPLICAOF would result into synchronization with the master we are already connected with. No \
                 operation performed."
            );
            return Ok(Reply::Status("OK Already connected to specified master"));
        }
    }
    replication::set_master(ctx.admin(), host, port);
    let host = &ctx.admin().repl.master.as_ref().map_or(String::new(), |m| m.host.clone());
    let now_ms = ctx.now_ms();
    let (srv, client) = ctx.admin_and_client();
    let info = crate::executor::clients::client_line(srv, client, now_ms, None);
    tracing::info!("REPLICAOF {host}:{port} enabled (user request from '{info}')");
    Ok(Reply::Ok)
}

/// ROLE
///
/// `master`, its offset and its online replicas (ip, port, acknowledged offset as strings), or
/// `slave`, its master, the link state and the offset applied.
pub fn role(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let r = &ctx.admin().repl;
    match &r.master {
        None => {
            let replicas = r
                .replicas
                .iter()
                .filter(|x| x.state == replication::ReplicaState::Online)
                .map(|x| {
                    Reply::Array(vec![
                        Reply::bulk(x.ip.as_bytes()),
                        Reply::bulk(x.port.to_string().into_bytes()),
                        Reply::bulk(x.ack_offset.to_string().into_bytes()),
                    ])
                })
                .collect();
            Ok(Reply::Array(vec![Reply::bulk("master"), Reply::Int(r.offset), Reply::Array(replicas)]))
        }
        Some(m) => {
            let state = match m.state {
                LinkState::Connect => "connect",
                LinkState::Handshake => "handshake",
                LinkState::Transfer => "sync",
                LinkState::Connected => "connected",
            };
            let offset = if m.client_id.is_some() { r.offset } else { -1 };
            Ok(Reply::Array(vec![
                Reply::bulk("slave"),
                Reply::bulk(m.host.as_bytes()),
                Reply::Int(m.port as i64),
                Reply::bulk(state),
                Reply::Int(offset),
            ]))
        }
    }
}
