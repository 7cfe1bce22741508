//! The master side of a full synchronization, as far as `redis-cli --rdb` (and any other
//! rdb-only reader) needs it: REPLCONF, SYNC and PSYNC; and WAIT and FAILOVER as a master
//! without replicas answers them.
//!
//! SYNC/PSYNC fork a child that writes the snapshot into a pipe, exactly as BGSAVE forks, so the
//! dataset is serialized from a copy-on-write image and no other client waits for it. The
//! handler only forks and hands the pipe to the connection (through `ClientHandle`); the
//! connection task then streams it (`stream_rdb`): with the EOF-marker framing when the reader
//! said `REPLCONF capa eof` (what redis-cli does), otherwise spooled to a temp file first so the
//! `$<length>` header can be sent. After the transfer the connection closes: there is no
//! replication stream to follow (every SYNC is served as rdb-only).

use std::os::fd::OwnedFd;

use super::flags::*;
use super::{acl, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::clients::RdbTransfer;
use crate::executor::State;
use crate::rdb::save::{self, Aux, Options};
use crate::resp::Reply;
use crate::util::clock::{random_hex, unix_ms};

pub static COMMANDS: &[CommandSpec] = &[
    spec("sync", 1, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, NO_KEYS, 0, sync),
    spec("psync", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI, NO_KEYS, 0, psync),
    spec("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, NO_KEYS, 0, replconf),
    spec("wait", 3, NOSCRIPT, NO_KEYS, acl::CONNECTION, wait),
    spec("failover", -1, ADMIN | NOSCRIPT | STALE, NO_KEYS, 0, failover),
];

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT milliseconds]
///
/// Checks the arguments as Redis does; a master without connected replicas (ferrodis has no
/// replicas to hand over to) then answers that it needs them, and ABORT that none is running.
pub fn failover(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len() == 2 && args.is(1, "abort") {
        return Err(CmdError::err("No failover in progress."));
    }
    let (mut timeout, mut host, mut force) = (0i64, false, false);
    let mut j = 1;
    while j < args.len() {
        if args.is(j, "timeout") && j + 1 < args.len() && timeout == 0 {
            timeout = args.i64(j + 1)?;
            if timeout <= 0 {
                return Err(CmdError::err("FAILOVER timeout must be greater than 0"));
            }
            j += 2;
        } else if args.is(j, "to") && j + 2 < args.len() && !host {
            args.i64(j + 2)?;
            host = true;
            j += 3;
        } else if args.is(j, "force") && !force {
            force = true;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Err(CmdError::err("FAILOVER requires connected replicas."))
}

/// WAIT numreplicas timeout
///
/// How many replicas acknowledged this client's writes. No replica receives a write stream from
/// this server, so the count is 0: at once when none is asked for (or inside MULTI), otherwise
/// once the timeout (milliseconds, 0 = forever) has passed, as Redis without replicas answers.
pub fn wait(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let numreplicas = args.i64(1)?;
    let timeout = crate::util::num::parse_i64(args.get(2))
        .ok_or_else(|| CmdError::err("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if numreplicas <= 0 || !ctx.may_block() {
        return Ok(Reply::Int(0));
    }
    let deadline = if timeout == 0 { 0 } else { ctx.now_ms.saturating_add(timeout) };
    ctx.block(Vec::new(), deadline, Reply::Int(0), "")
}

/// Length of the random EOF marker of the diskless framing (Redis's RDB_EOF_MARK_SIZE).
const EOF_MARK_LEN: usize = 40;

/// REPLCONF [option value ...]
///
/// Replication settings a replica (or redis-cli) declares before SYNC: `capa`, `rdb-only`,
/// `rdb-filter-only`, `listening-port`, `ip-address`; `ack` and `getack` get no reply. Unknown
/// options and an even argument count are errors, as in Redis.
pub fn replconf(ctx: &mut Ctx, args: &Args) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let mut j = 1;
    while j < args.len() {
        let value = args.get(j + 1);
        if args.is(j, "listening-port") {
            args.i64(j + 1)?;
        } else if args.is(j, "ip-address") {
        } else if args.is(j, "capa") {
            if value.eq_ignore_ascii_case(b"eof") {
                ctx.client.replconf.capa_eof = true;
            }
        } else if args.is(j, "ack") || args.is(j, "getack") {
            // Only meaningful on a master link; Redis answers nothing.
            return Ok(Reply::Raw(Vec::new()));
        } else if args.is(j, "rdb-only") {
            let v = args.i64(j + 1)?;
            if !(0..=1).contains(&v) {
                return Err(CmdError::err("value is out of range, value must between 0 and 1"));
            }
        } else if args.is(j, "rdb-filter-only") {
            if value.eq_ignore_ascii_case(b"functions") {
                ctx.client.replconf.functions_only = true;
            } else if value.is_empty() {
                ctx.client.replconf.functions_only = false;
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
/// Sends the whole dataset as an RDB file (`$<len>` or `$EOF:<mark>` framing), produced by a
/// forked child so other clients are not held up, then closes the connection.
pub fn sync(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    full_sync(ctx, Vec::new())
}

/// PSYNC replicationid offset
///
/// Always a full resynchronization (`+FULLRESYNC <replid> 0`) followed by the snapshot, as
/// SYNC sends it; there is no backlog to continue from.
pub fn psync(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let head = format!("+FULLRESYNC {} 0\r\n", ctx.srv.replid).into_bytes();
    full_sync(ctx, head)
}

fn full_sync(ctx: &mut Ctx, mut head: Vec<u8>) -> CmdResult {
    let (pipe, pid) = fork_snapshot(ctx.srv, ctx.client.replconf.functions_only)
        .map_err(|e| CmdError::err(format!("Can't fork the snapshot for SYNC: {e}")))?;
    let mark = ctx.client.replconf.capa_eof.then(|| random_hex(EOF_MARK_LEN).into_bytes());
    if let Some(m) = &mark {
        head.extend_from_slice(b"$EOF:");
        head.extend_from_slice(m);
        head.extend_from_slice(b"\r\n");
    }
    ctx.client.handle.start_rdb_transfer(RdbTransfer { pipe, pid, mark });
    ctx.client.close_after_reply = true;
    Ok(Reply::Raw(head))
}

/// Forks a child that writes the snapshot into a pipe and exits; returns the read end and the
/// child's pid.
fn fork_snapshot(st: &mut State, functions_only: bool) -> Result<(OwnedFd, i32), String> {
    let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| e.to_string())?;
    let info = Aux { ctime: unix_ms() / 1000, used_mem: st.sample_memory().1, aof_base: false };
    let version = save::required_version(&st.dbs);
    let opts = Options {
        compress: st.config.rdbcompression,
        checksum: st.config.rdbchecksum,
        list_fill: st.config.list_max_listpack_size,
        ..Options::new(version)
    };
    // SAFETY: the child only serializes the (copy-on-write) dataset into the pipe and leaves
    // with `_exit`; it never returns into the server, never touches the runtime and logs nothing,
    // so no lock held by another thread at fork time is taken (as BGSAVE's child).
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            drop(rd);
            let _ = crate::daemon::apply_oom_score_adj(&st.config, crate::daemon::OomClass::BgChild);
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let dbs: &[crate::db::Db] = if functions_only { &[] } else { &st.dbs };
                let out = std::fs::File::from(wr);
                // The writer flushes its buffer before handing the file back.
                match save::write_snapshot(out, dbs, &st.functions, &info, &opts) {
                    Ok(_) => 0,
                    Err(_) => 1,
                }
            }))
            .unwrap_or(1);
            // SAFETY: ends the child without running the parent's atexit handlers or destructors.
            unsafe { libc::_exit(code) }
        }
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(wr);
            st.stats.persistence.total_forks += 1;
            tracing::info!("Replica asked for synchronization: snapshot streamed by pid {child}");
            Ok((rd, child.as_raw()))
        }
        Err(e) => Err(e.to_string()),
    }
}
