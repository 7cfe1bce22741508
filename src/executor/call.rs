//! `call()`: the one path every command takes. It resolves subcommands and checks arity and auth
//! with Redis's error precedence, takes the command's time snapshot, runs the handler, encodes the
//! reply, and feeds commandstats, errorstats and the slowlog from one measurement.

use super::ctx::Ctx;
use super::registry::CommandSpec;
use crate::resp::writer::write_reply;
use crate::resp::Reply;
use crate::spec::{flags, Args, CmdError};
use crate::stats::StatName;
use crate::util::{c_str, c_str_prefix};

use super::clients::Client;
use super::{Cmd, State};
use crate::util::clock::unix_ms;

/// Resolves the spec to run (the subcommand for containers) or the rejection error.
pub(crate) fn resolve(cmd: &Cmd) -> Result<(&'static CommandSpec, Option<&'static CommandSpec>), CmdError> {
    let argv = &cmd.argv;
    let Some(top) = cmd.spec else {
        // Redis formats this with %.128s / %.*s: client bytes verbatim, cut at a NUL.
        let mut line = b"ERR unknown command '".to_vec();
        line.extend_from_slice(c_str_prefix(&argv[0], 128));
        line.extend_from_slice(b"', with args beginning with: ");
        let mut args: Vec<u8> = Vec::new();
        for a in argv.iter().skip(1) {
            if args.len() >= 128 {
                break;
            }
            let room = 128 - args.len();
            args.push(b'\'');
            args.extend_from_slice(c_str_prefix(a, room));
            args.extend_from_slice(b"' ");
        }
        line.extend_from_slice(&args);
        return Err(CmdError::Line(line));
    };
    if top.is_container() && argv.len() >= 2 {
        let Some(sub) = top.subcommand(&argv[1]) else {
            let mut line = b"ERR unknown subcommand '".to_vec();
            line.extend_from_slice(c_str_prefix(&argv[1], 128));
            line.extend_from_slice(b"'. Try ");
            line.extend(c_str(&argv[0]).iter().map(u8::to_ascii_uppercase));
            line.extend_from_slice(b" HELP.");
            return Err(CmdError::Line(line));
        };
        if !sub.arity_ok(argv.len()) {
            return Err(CmdError::WrongArity(format!("{}|{}", top.name, sub.name)));
        }
        return Ok((sub, Some(top)));
    }
    if !top.arity_ok(argv.len()) {
        return Err(CmdError::WrongArity(top.name.to_string()));
    }
    Ok((top, None))
}

const DEBUG_NOT_ALLOWED: &str =
    "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", \
                                 you can run it from a local connection, otherwise you need to set this option in the \
                                 configuration file, and then restart the server.";

const MODULE_NOT_ALLOWED: &str =
    "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a \
     local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// Refusal of a write while min-replicas-to-write is not met.
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Refusal of a write on a read-only replica.
const READONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";

/// Refusal while the master link is down and replica-serve-stale-data is no.
pub const MASTERDOWN: &str = "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// A replica whose master link is down, with replica-serve-stale-data no: only commands flagged
/// stale run.
pub fn running_stale(st: &State) -> bool {
    st.repl.is_replica() && !super::replication::link_up(st) && !st.config.replica_serve_stale_data()
}

/// Why a script's first write is refused now, in Redis's scriptVerifyWriteCommandAllow order:
/// a read-only replica, failed persistence (MISCONF), too few good replicas. Lines carry their
/// code (`-READONLY ...`).
pub fn write_refusal(st: &State) -> Option<std::borrow::Cow<'static, str>> {
    if st.repl.is_replica() && st.config.replica_read_only() {
        return Some(format!("-{READONLY_REPLICA}").into());
    }
    if let Some(error) = super::snapshot::disk_error(st) {
        return Some(match error {
            super::snapshot::DiskError::Rdb => format!("-{MISCONF}").into(),
            super::snapshot::DiskError::Aof(text) => format!("-{text}").into(),
        });
    }
    if !good_replicas(st) {
        return Some(format!("-{NOREPLICAS}").into());
    }
    None
}

/// Redis's checkGoodReplicasStatus: met on a replica, when either setting is 0, or when enough
/// replicas acknowledged within min-replicas-max-lag.
pub fn good_replicas(st: &State) -> bool {
    st.repl.is_replica()
        || st.config.min_replicas_to_write == 0
        || st.config.min_replicas_max_lag == 0
        || super::replication::good_replicas(st, unix_ms()) >= st.config.min_replicas_to_write
}

/// Time for a batch of commands: the wall-clock snapshot commands see, and the monotonic instant
/// the previous command ended, so each command costs one clock read.
pub struct Clock {
    pub now_ms: i64,
    /// `mono_us` when the previous command ended.
    pub last_us: u64,
}

impl Clock {
    pub fn new(now_ms: i64) -> Clock {
        Clock { now_ms, last_us: crate::util::clock::mono_us() }
    }
}

/// Runs one command for `client` and appends its encoded reply to `out`.
pub fn call(st: &mut State, client: &mut Client, cmd: Cmd, out: &mut Vec<u8>, clock: &mut Clock) {
    call_inner(st, client, cmd, out, clock);
    // Only cluster mode (fixed at startup) sets a slot hint or ASKING: a standalone server
    // pays one test here.
    if st.cluster.is_some() {
        // The command's arguments are gone: a hint left would name a freed address.
        if let Some(db) = st.dbs.first_mut() {
            db.clear_slot_hint();
        }
        // ASKING lasts for one command, or for the whole transaction it precedes (resetClient).
        if client.cluster_asking && client.last_cmd != "asking" && client.multi.is_none() {
            client.cluster_asking = false;
        }
    }
}

/// The argument positions of a command's keys: from the table, or for a command with movable
/// keys (ZUNION, SINTERCARD, XREAD ...) from its key specs, as COMMAND GETKEYS finds them.
pub(crate) fn key_positions(
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    argv: &[bytes::Bytes],
) -> Vec<usize> {
    if !spec.has_flag(flags::MOVABLEKEYS) {
        return spec.key_positions(argv.len());
    }
    let full = parent.map_or_else(|| spec.name.to_string(), |p| format!("{}|{}", p.name, spec.name));
    let doc = crate::spec::docs::find(&full);
    crate::spec::getkeys::extract_keys(spec, doc, &full, argv).into_iter().map(|(i, _)| i).collect()
}

/// Cluster mode's routing of a command with keys (or EXEC's queue): Err with the redirect line.
fn cluster_route(
    st: &mut State,
    client: &Client,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    argv: &[bytes::Bytes],
) -> Result<(), String> {
    fn keys_of<'a>(
        spec: &'static CommandSpec,
        parent: Option<&'static CommandSpec>,
        argv: &'a [bytes::Bytes],
    ) -> Vec<&'a [u8]> {
        key_positions(spec, parent, argv).iter().filter_map(|&i| argv.get(i)).map(|a| &a[..]).collect()
    }
    fn routed_of<'a>(keys: &'a [&'a [u8]], f: u32, name: &str) -> super::cluster::Routed<'a> {
        super::cluster::Routed {
            keys,
            write: f & flags::WRITE != 0,
            is_migrate: name == "migrate",
            asking_cmd: f & flags::ASKING != 0,
            pubsubshard: matches!(name, "ssubscribe" | "sunsubscribe" | "spublish"),
        }
    }
    st.cluster_caller_flags = (client.cluster_asking, client.cluster_readonly);
    let k = spec.keys;
    let one_key = k.first == 1 && k.last == 1 && !spec.has_flag(flags::MOVABLEKEYS);
    // The usual command (GET, SET, HSET ...) on a key this node serves, nothing moving: no
    // flags, names or lists to gather (they cost a third of the routing).
    if one_key {
        if let (Some(c), Some(key)) = (st.cluster.as_ref(), argv.get(1)) {
            if let Some(slot) = super::cluster::served_here(c, key) {
                st.cluster_caller_slot = Some(slot);
                // The slot index takes the slot from here if the command adds or deletes
                // this key; `call` clears it before the arguments go. Cluster mode has db 0
                // only (SELECT, MOVE and SWAPDB are refused).
                if client.db == 0 {
                    if let Some(db) = st.dbs.first_mut() {
                        db.set_slot_hint(key, slot);
                    }
                }
                return Ok(());
            }
        }
    }
    st.cluster_caller_slot = None;
    let is_exec = spec.name == "exec" && parent.is_none();
    let route = |st: &mut State, routed: &[super::cluster::Routed]| match super::cluster::route(
        st,
        routed,
        client.cluster_asking,
        client.cluster_readonly,
    ) {
        Ok(slot) => {
            st.cluster_caller_slot = slot;
            Ok(())
        }
        Err(r) => Err(r.text(st, super::cluster::plaintext_client(st, client.info.tls))),
    };
    if is_exec {
        let Some(queue) = &client.multi else { return Ok(()) };
        let mut owned: Vec<(Vec<&[u8]>, u32, &'static str)> = Vec::new();
        for c in queue {
            let Ok((s, p)) = resolve(c) else { continue };
            owned.push((keys_of(s, p, &c.argv), effective_flags(st, s, &c.argv), s.name));
        }
        let many: Vec<super::cluster::Routed> = owned.iter().map(|(keys, f, name)| routed_of(keys, *f, name)).collect();
        return route(st, &many);
    }
    // One command (the usual case) routes from the stack: its keys when the table gives their
    // positions and there are a few, and no list of commands.
    // Set only where used: an 8-entry array's initialisation is a tenth of this path's cost.
    let mut stack: [&[u8]; 8];
    let mut n = 0;
    let heap: Vec<&[u8]>;
    let one: [&[u8]; 1];
    let keys: &[&[u8]] = if spec.has_flag(flags::MOVABLEKEYS) {
        heap = keys_of(spec, parent, argv);
        &heap
    } else if one_key {
        // One key, the first argument (GET, SET, INCR, HSET ...): no position walk.
        match argv.get(1) {
            Some(a) => {
                one = [&a[..]];
                &one
            }
            None => &[],
        }
    } else {
        stack = [&[]; 8];
        let mut positions = spec.key_positions_iter(argv.len());
        for (slot, i) in stack.iter_mut().zip(positions.by_ref()) {
            *slot = &argv[i][..];
            n += 1;
        }
        if n == stack.len() && positions.next().is_some() {
            heap = keys_of(spec, parent, argv);
            &heap
        } else {
            &stack[..n]
        }
    };
    if keys.is_empty() {
        return Ok(());
    }
    let f = effective_flags(st, spec, argv);
    route(st, &[routed_of(keys, f, spec.name)])
}

fn call_inner(st: &mut State, client: &mut Client, cmd: Cmd, out: &mut Vec<u8>, clock: &mut Clock) {
    let proto = client.proto;
    let cmd_spec = cmd.spec;
    let (spec, parent) = match resolve(&cmd) {
        Ok(found) => found,
        Err(e) => {
            // Redis counts the refusal on what its lookup found: the subcommand when it exists
            // (an arity error of CONFIG RESETSTAT is config|resetstat's), else the command.
            // An unknown subcommand is found as nothing, and counted nowhere.
            let found = match cmd.spec {
                Some(top) if top.is_container() && cmd.argv.len() >= 2 => {
                    top.subcommand(&cmd.argv[1]).map(|sub| stat_key(sub, Some(top)))
                }
                Some(top) => Some(StatName(top.name)),
                None => None,
            };
            if let Some(name) = found {
                st.stats.commands.entry(name).or_default().rejected_calls += 1;
            }
            // What Redis's lookup found: the command, or its subcommand; NULL for an unknown one.
            // Inside EXEC it stays EXEC (Redis runs the queued commands without a lookup).
            let looked_up = match cmd.spec {
                Some(top) if top.is_container() && cmd.argv.len() >= 2 => {
                    top.subcommand(&cmd.argv[1]).map_or(("NULL", ""), |sub| (sub.name, top.name))
                }
                Some(top) => (top.name, ""),
                None => ("NULL", ""),
            };
            if client.running_exec.is_none() {
                (client.last_cmd, client.last_cmd_parent) = looked_up;
            }
            reject(st, client, e, out, proto);
            return;
        }
    };
    let stat_name = stat_key(spec, parent);
    // As processCommand sets lastcmd at lookup: a refused or blocked command shows in CLIENT LIST.
    // EXEC's queued commands are not looked up again: it stays EXEC, as in Redis.
    if client.running_exec.is_none() {
        client.last_cmd = spec.name;
        client.last_cmd_parent = parent.map_or("", |p| p.name);
    }
    let mut flags_now = effective_flags(st, spec, &cmd.argv);
    // EXEC is checked as a write, a command refused while stale, ... when a queued command is
    // (Redis's mstate.cmd_flags and cmd_inv_flags): a state that changed since the queueing
    // (the server became a read-only or stale replica, replicas went missing) refuses the whole
    // transaction, and nothing inside it is checked again.
    if spec.name == "exec" && parent.is_none() {
        if let Some(queue) = &client.multi {
            for c in queue {
                let Some(s) = c.spec else { continue };
                let f = effective_flags(st, s, &c.argv);
                flags_now |= f & (flags::WRITE | flags::DENYOOM | flags::MAY_REPLICATE);
                if f & flags::STALE == 0 {
                    flags_now &= !flags::STALE;
                }
            }
        }
    }
    // Protected commands (DEBUG, MODULE LOAD) come before authentication, as in Redis's
    // processCommand, each behind its own enable-*-command switch.
    if spec.has_flag(flags::PROTECTED) {
        let module = parent.is_some_and(|p| p.name == "module");
        let setting = if module {
            st.config.other.get("enable-module-command").map_or("no", String::as_str)
        } else {
            st.config.enable_debug_command.as_str()
        };
        if !crate::config::protected_action_allowed(setting, client.info.local) {
            st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
            let text = if module { MODULE_NOT_ALLOWED } else { DEBUG_NOT_ALLOWED };
            refuse(st, client, spec, parent, CmdError::Raw(text.into()), out, proto);
            return;
        }
    }
    if !client.authenticated && !spec.has_flag(flags::NO_AUTH) {
        st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
        refuse(st, client, spec, parent, CmdError::NoAuth, out, proto);
        return;
    }
    // ACL; a script's commands were checked with the script's own wording
    // (scripting::run_command).
    // The master's commands are obeyed: no ACL, memory, persistence or read-only refusal.
    let obey = client.master;
    // A script's commands run with in_exec set too, but are checked as Redis's scriptCall
    // checks them; only a transaction's commands skip what EXEC was checked for.
    let script = client.id == crate::executor::scripting::SCRIPT_CLIENT_ID;
    let exec_body = client.in_exec && !script;
    // A script that already wrote is not refused later writes for the server's state.
    let exec_body = exec_body || (script && client.script_dirty);
    if !script && !obey {
        if let Err(refusal) = crate::executor::access::check(st, client, spec, parent, &cmd.argv) {
            st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
            let text = crate::executor::access::noperm_text(refusal, spec, parent, client.in_exec);
            refuse(st, client, spec, parent, CmdError::Raw(text), out, proto);
            return;
        }
    }
    // Cluster mode: keys served elsewhere get -MOVED / -ASK, or the cluster's refusal
    // (processCommand's getNodeByQuery step, right after ACL). The master's stream is obeyed.
    if st.cluster.is_some() && !obey && !script && !exec_body {
        if let Err(text) = cluster_route(st, client, spec, parent, &cmd.argv) {
            st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
            if spec.name == "exec" && parent.is_none() && client.multi.is_some() {
                client.multi = None;
                client.dirty_exec = false;
                crate::executor::multi::unwatch_client(st, client);
            }
            reject(st, client, CmdError::Raw(text), out, proto);
            return;
        }
    }
    // maxmemory: evict first; when that cannot get under the limit, commands that may grow
    // memory are refused, and inside MULTI everything but EXEC/DISCARD/QUIT/RESET (a queue may
    // grow without bound), as Redis's processCommand does. Commands inside EXEC and woken
    // blocked commands were admitted already. The master's stream evicts too (on a replica
    // with replica-ignore-maxmemory no) but is never refused.
    if st.config.maxmemory > 0 && !client.in_exec && !client.woken {
        let out_of_memory = super::evict::perform(st, Some(client), clock.now_ms) == super::evict::Outcome::Fail;
        st.pre_command_oom = out_of_memory && !obey;
        if client.handle.close_requested() {
            // maxmemory-clients evicted the caller itself: its command does not run.
            return;
        }
        // Keys evicted before the command runs: their invalidations precede its reply (Redis
        // sends them at once, the command not executing yet).
        if st.tracking.has_pending() {
            crate::executor::tracking::after_command(st, client, out);
        }
        if out_of_memory && !obey && refused_on_oom(client, spec, flags_now, parent) {
            st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
            refuse(st, client, spec, parent, CmdError::Raw(super::evict::OOM_ERROR.into()), out, proto);
            return;
        }
    }
    // stop-writes-on-bgsave-error and AOF write errors: while persistence fails, writes (and
    // PING, as in Redis) are refused; inside MULTI this also dooms the transaction. The
    // master's writes are not refused: the replica panics, or applies them.
    if let Some(error) = super::snapshot::disk_error(st).filter(|_| !exec_body) {
        let ping = parent.unwrap_or(spec).name == "ping";
        if flags_now & flags::WRITE != 0 || ping {
            if obey {
                obey_despite_disk_error(st, ping, clock.now_ms);
            } else {
                let text = match error {
                    super::snapshot::DiskError::Rdb => MISCONF.to_string(),
                    super::snapshot::DiskError::Aof(text) => text,
                };
                st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
                refuse(st, client, spec, parent, CmdError::Raw(text), out, proto);
                return;
            }
        }
    }
    // min-replicas-to-write: there are no replicas, so with the check on every write is refused.
    if flags_now & flags::WRITE != 0 && !obey && !exec_body && !good_replicas(st) {
        st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
        refuse(st, client, spec, parent, CmdError::Raw(NOREPLICAS.into()), out, proto);
        return;
    }
    // A script's commands are checked for staleness by the script (scripting::run_command).
    if st.repl.is_replica() && !obey && !exec_body {
        if flags_now & flags::WRITE != 0 && st.config.replica_read_only() {
            st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
            refuse(st, client, spec, parent, CmdError::Raw(READONLY_REPLICA.into()), out, proto);
            return;
        }
        if flags_now & flags::STALE == 0 && !script && running_stale(st) {
            st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
            refuse(st, client, spec, parent, CmdError::Raw(MASTERDOWN.into()), out, proto);
            return;
        }
    }
    // pub/sub hook: RESP2 subscribed mode allows only a few commands (PING answers differently).
    let subscribed_ping = match crate::executor::pubsub::subscribed_mode_check(st, client, spec, parent) {
        Ok(ping) => ping,
        Err(e) => {
            st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
            refuse(st, client, spec, parent, e, out, proto);
            return;
        }
    };
    // A replica (and MONITOR, a replica in Redis's eyes) may not touch the keyspace.
    if flags_now & (flags::READONLY | flags::WRITE | flags::MAY_REPLICATE) != 0
        && (client.handle.is_replica() || (!st.pubsub.monitors.is_empty() && st.pubsub.monitors.contains(&client.id)))
    {
        st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
        refuse(st, client, spec, parent, CmdError::err("Replica can't interact with the keyspace"), out, proto);
        return;
    }
    // A replica loading its master's snapshot: -LOADING, or, while it still serves the old
    // data (async loading), only for commands flagged no-async-loading.
    let sync_loading = st.repl.sync_loading.filter(|_| !obey);
    let loading_refused = match sync_loading {
        Some(true) => {
            spec.has_flag(flags::NO_ASYNC_LOADING) || parent.is_some_and(|p| p.has_flag(flags::NO_ASYNC_LOADING))
        }
        Some(false) => !spec.has_flag(flags::LOADING),
        None => false,
    };
    if (st.loading.is_some() && !spec.has_flag(flags::LOADING)) || loading_refused {
        st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
        refuse(
            st,
            client,
            spec,
            parent,
            CmdError::Raw("LOADING Redis is loading the dataset in memory".into()),
            out,
            proto,
        );
        return;
    }
    // CLIENT PAUSE: the command (and everything after it) waits for the pause to end; commands
    // that do run meanwhile see expired keys as gone without deleting them.
    // A replica expires nothing itself: other clients see expired keys as gone, the master
    // still finds them, until its DEL comes.
    let paused = st.paused(clock.now_ms);
    let db = &mut st.dbs[client.db];
    db.keep_expired = paused || st.repl.master.is_some();
    db.master_view = obey;
    // The master's commands wait too (its stream is read, not applied: slave_repl_offset stays),
    // as Redis pauses every client but its own replicas.
    if paused && !client.in_exec && paused_for(st, flags_now, clock.now_ms) {
        client.pending.push_front(cmd);
        if !client.postponed {
            client.postponed = true;
            st.postponed.push_back(client.id);
        }
        return;
    }
    if let Some(queue) = client.multi.as_mut() {
        let top_name = parent.unwrap_or(spec).name;
        if !crate::executor::multi::runs_inside_multi(top_name) {
            if spec.has_flag(flags::NO_MULTI) {
                st.stats.commands.entry(stat_name).or_default().rejected_calls += 1;
                reject(st, client, CmdError::err("Command not allowed inside a transaction"), out, proto);
                return;
            }
            queue.push(cmd);
            write_reply(out, &Reply::Status("QUEUED"), proto);
            return;
        }
    }

    // The previous command's end is this one's start: one clock read per command. A command
    // that took a millisecond or more moves the wall-clock snapshot forward for the next one.
    let started_us = clock.last_us;
    let now_ms = clock.now_ms;
    let args = Args::new(cmd.argv);
    let frame = super::propagate::enter(st);
    let stream_before = st.repl.offset;
    let result = {
        let mut ctx = Ctx::new(st, client, now_ms, spec);
        if subscribed_ping {
            crate::executor::pubsub::subscribed_ping(&args)
        } else {
            (spec.handler)(&mut ctx, &args)
        }
    };
    // pub/sub hooks: MONITOR feed, pending `expired` events, and pushes for the caller itself
    // (written ahead of its reply; inside EXEC that is inside EXEC's array, as Redis 7.0 does).
    // A woken blocked command was shown when it first ran; Redis serves it without a new call.
    if !st.pubsub.monitors.is_empty() && !client.woken {
        crate::executor::pubsub::feed_monitors(st, client, spec, parent, &args.argv);
    }
    if !st.config.notify_keyspace_events.is_empty() || st.tracking.is_active() || st.prop.active {
        crate::executor::pubsub::drain_expired(st, Some(client));
    }
    if let Some(frame) = frame {
        super::propagate::leave(st, frame, client.db, spec.name, &args.argv);
        if st.repl.offset != stream_before {
            client.woff = st.repl.offset;
        }
    }
    if st.repl.master.is_some() && !obey && flags_now & flags::WRITE != 0 {
        super::replication::note_local_write(st, client.db, spec.key_positions(args.argv.len()), &args.argv);
    }
    if !st.pubsub.self_out.is_empty() {
        out.append(&mut st.pubsub.self_out);
    }
    let finished_us = crate::util::clock::mono_us();
    clock.last_us = finished_us;
    let duration_us = finished_us.saturating_sub(started_us);
    if let Some(mut request) = client.block_request.take() {
        // The handler parked the command: no reply now (see executor::blocking). A handler may
        // ask for a rewritten command to run on wake-up (XREAD's `$` resolved to an ID).
        let argv = request.rerun_argv.take().unwrap_or(args.argv);
        super::blocking::park(st, client, Cmd { spec: cmd_spec, argv }, request, duration_us);
        return;
    }
    // A slow command moves the clock on for the next, except inside a transaction or script,
    // whose commands all see the time it started (Redis's command time snapshot).
    if duration_us >= 1000 && !client.in_exec {
        clock.now_ms = unix_ms();
    }

    // A KEYS that goes on walking the table after this call is timed when its walk ends.
    let walk = super::walks::take_started(st);
    // The latency monitor: a woken blocked command counts as unblocking work, as in Redis.
    let event = if client.woken {
        "command-unblocking"
    } else if spec.has_flag(flags::FAST) {
        "fast-command"
    } else {
        "command"
    };
    if duration_us >= 1000 && walk.is_none() {
        crate::executor::record_latency(st, event, duration_us);
    }
    st.stats.total_commands_processed += 1;
    let track = st.config.latency_tracking;
    let stat = st.stats.commands.entry(stat_name).or_default();
    if walk.is_some() {
        stat.calls += 1;
    } else {
        stat.record(duration_us, track);
    }
    let reply = match result {
        Ok(reply) => {
            if let Reply::Error(line) = &reply {
                stat.failed_calls += 1;
                // A script's error that errorstats counted where it happened is not counted again.
                if !crate::executor::scripting::take_error_counted() {
                    st.stats.count_error(line);
                }
            }
            reply
        }
        Err(e) => {
            stat.failed_calls += 1;
            let line = e.into_line();
            st.stats.count_error(&line);
            Reply::Error(line)
        }
    };
    let reply_start = out.len();
    match &reply {
        // Encoded by the connection, off this thread, at this point of the batch's output.
        Reply::Deferred(d) if client.defers_reply() && (client.batch_last || !d.0.may_fail()) => {
            // Refused when it puts the client over its output limit: the client is being
            // closed and the reply goes nowhere.
            let _ = client.handle.push_deferred(reply_start, client.proto, d.clone(), stat_name);
        }
        // Encoded here: an error it turns out to be counts as a failed call's error does.
        Reply::Deferred(d) => {
            if let Some(line) = d.0.encode_checked(client.proto, out) {
                count_failed(st, stat_name, line);
            }
        }
        _ => write_reply(out, &reply, client.proto),
    }
    client.reply_span = Some((reply_start, out.len()));
    after_reply(st, client, spec, parent, &args, out);

    let slower_than = st.config.slowlog_log_slower_than;
    if let Some(id) = walk {
        let account = super::walks::Account {
            stat: stat_name,
            argv: args.argv,
            peer: client.info.addr.clone(),
            name: client.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned(),
            at_ms: now_ms,
            slower_than: Some(slower_than).filter(|_| !spec.has_flag(flags::SKIP_SLOWLOG)),
            event,
            track,
            epoch: st.stats.epoch,
        };
        super::walks::account_later(st, id, duration_us, account);
    } else if slower_than >= 0 && duration_us as i64 >= slower_than && !spec.has_flag(flags::SKIP_SLOWLOG) {
        let name = client.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default();
        let max_len = st.config.slowlog_max_len;
        let redacted = crate::slowlog::redacted_positions(stat_name.0, &args.argv);
        st.slowlog.push(&args.argv, &redacted, duration_us, now_ms / 1000, &client.info.addr, &name, max_len);
    }
}

/// A call whose reply turned out an error once encoded (a deferred SORT): counted in
/// commandstats' failed_calls and in errorstats as the error reply of a call is.
pub fn count_failed(st: &mut State, stat: StatName, line: &str) {
    st.stats.commands.entry(stat).or_default().failed_calls += 1;
    st.stats.count_error(line);
}

/// How a parked command ended without running again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockEnd {
    /// Its timeout passed.
    Deadline,
    /// What it waited for happened without it running again (WAIT's acknowledgements).
    Served,
    /// CLIENT UNBLOCK id TIMEOUT.
    UnblockTimeout,
    /// CLIENT UNBLOCK id ERROR: the client got an UNBLOCKED error.
    UnblockError,
}

/// Stats for a blocked command that ends without running again, as Redis 7.0 keeps them: the
/// call counts (with its first run's time) whichever way it ends; CLIENT UNBLOCK, with either
/// reason, also counts it failed and adds that time again to its total and its latency
/// histogram; ERROR's reply counts under errorstat UNBLOCKED. (A woken command runs again
/// through call(), which counts it there.)
pub fn blocked_ended(st: &mut State, blocked: &super::blocking::Blocked, how: BlockEnd) {
    let Ok((spec, parent)) = resolve(&blocked.cmd) else { return };
    let track = st.config.latency_tracking;
    let us = blocked.duration_us;
    st.stats.total_commands_processed += 1;
    let stat = st.stats.commands.entry(stat_key(spec, parent)).or_default();
    stat.calls += 1;
    stat.usec += us;
    if matches!(how, BlockEnd::UnblockTimeout | BlockEnd::UnblockError) {
        stat.failed_calls += 1;
        stat.usec += us;
        if track {
            stat.latency.record(us.saturating_mul(1000));
        }
    }
    if how == BlockEnd::UnblockError {
        st.stats.count_error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
    }
}

/// Whether a command is refused while memory is over maxmemory with nothing left to evict.
fn refused_on_oom(
    client: &Client,
    spec: &'static CommandSpec,
    flags_now: u32,
    parent: Option<&'static CommandSpec>,
) -> bool {
    if flags_now & flags::DENYOOM != 0 {
        return true;
    }
    if parent.is_some() {
        return client.multi.is_some();
    }
    match spec.name {
        "exec" => {
            client.multi.as_ref().is_some_and(|q| q.iter().any(|c| c.spec.is_some_and(|s| s.has_flag(flags::DENYOOM))))
        }
        "discard" | "quit" | "reset" => false,
        _ => client.multi.is_some(),
    }
}

/// Whether CLIENT PAUSE holds this command: every command under ALL; under WRITE, commands that
/// write or may replicate (PUBLISH, EVAL), and an EXEC whose queue holds one.
/// An EXEC is held for a script queued in it by the script's declared flags, as Redis adds each
/// queued command's flags to the transaction's: EXEC's `flags_now` carries them (`call`).
fn paused_for(st: &State, flags_now: u32, now_ms: i64) -> bool {
    // Only CLIENT PAUSE holds every command; the held pauses (FAILOVER, SHUTDOWN) hold writes.
    if st.pause_all && st.pause_end_ms > now_ms {
        return true;
    }
    flags_now & (flags::WRITE | flags::MAY_REPLICATE) != 0
}

/// The flags a command runs under: its table flags, except that a script with a shebang, or a
/// function, declares its own (write, denyoom, may-replicate), which then decide the checks.
fn effective_flags(st: &State, spec: &'static CommandSpec, argv: &[bytes::Bytes]) -> u32 {
    if spec.acl & crate::spec::acl::SCRIPTING == 0 {
        spec.flags
    } else if spec.name.starts_with("eval") {
        crate::executor::scripting::host::script_command_flags(st, spec, argv)
    } else if spec.name.starts_with("fcall") {
        crate::executor::scripting::host::function_command_flags(st, spec, argv)
    } else {
        spec.flags
    }
}

/// Per-client bookkeeping once a command has replied: client-side caching (remember what a
/// tracking client read, send invalidations held for it), the CACHING one-shot, and the output
/// buffer class and limits that subscriptions and CONFIG SET may have changed.
fn after_reply(
    st: &mut State,
    client: &mut Client,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    args: &Args,
    out: &mut Vec<u8>,
) {
    // Inside a script, a read makes the caller remember the keys the script declared.
    if let (Some(caller), Some(keys)) = (client.script_caller, &client.caller_tracked_keys) {
        if spec.has_flag(flags::READONLY) {
            st.tracking.remember(caller, keys.iter().map(|k| &k[..]));
        }
    }
    let t = &mut client.tracking;
    if t.on {
        // A read-only script command is not tracked itself: the commands its script runs decide.
        let reads = spec.has_flag(flags::READONLY) && !matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro");
        if reads && t.remembers_reads() {
            let positions = key_positions(spec, parent, &args.argv);
            let keys = positions.iter().filter_map(|&i| args.argv.get(i)).map(|a| &a[..]);
            st.tracking.remember(client.id, keys);
        }
        // CLIENT CACHING lasts for the next command (a whole transaction when given before it).
        if t.caching && !client.in_exec && client.multi.is_none() && parent.is_none_or(|p| p.name != "client") {
            t.caching = false;
        }
    }
    if !client.in_exec && st.tracking.has_pending() {
        crate::executor::tracking::after_command(st, client, out);
    }
    match parent.unwrap_or(spec).name {
        "config" => {
            super::aof::config_changed(st, client.in_exec);
            super::clients::refresh_limits(st);
            super::evict::apply_access_clock(st);
            super::evict::limit_changed(st);
            // CONFIG SET hz takes effect at once, as Redis's updateHZ (dynamic-hz adapts it
            // from the next cron tick).
            st.hz = st.config.hz.clamp(1, 500);
            crate::log::set_crash_options(
                st.config.other_flag("crash-log-enabled", true),
                st.config.other_flag("use-exit-on-panic", false),
            );
        }
        _ if spec.has_flag(flags::PUBSUB) || spec.name == "reset" => {
            client.handle.set_pubsub(st.pubsub.is_subscribed(client.id))
        }
        _ => {}
    }
}

/// A replica that cannot persist, fed a write by its master: it panics, unless
/// replica-ignore-disk-write-errors, and then (or for the master's PING) warns at most every
/// 10 s that it applies the stream anyway, as Redis's processCommand.
fn obey_despite_disk_error(st: &State, ping: bool, now_ms: i64) {
    if !ping && !st.config.other_flag("replica-ignore-disk-write-errors", false) {
        crate::log::server_panic("Replica was unable to write command to disk.");
    }
    /// When the warning was last logged (unix ms); Redis keeps it in a static too.
    static LAST_WARNING_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    if now_ms > LAST_WARNING_MS.load(std::sync::atomic::Ordering::Relaxed) + 10_000 {
        LAST_WARNING_MS.store(now_ms, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!("Replica is applying a command even though it is unable to write to disk.");
    }
}

/// Runs the commands of clients held by a pause once it has ended (CLIENT PAUSE by timeout or
/// CLIENT UNPAUSE, FAILOVER or a shutdown when they finish), in the order they were stopped;
/// their replies go to their outboxes. When a CLIENT PAUSE ALL ends while a held pause of
/// writes lasts, the held reads run and the writes are held again, as Redis reprocesses its
/// paused clients whenever the pause becomes less strict.
pub fn resume_postponed(st: &mut State) {
    let now = unix_ms();
    if st.postponed.is_empty() || st.pause_end_ms > now {
        return;
    }
    let was_all = st.pause_all && st.pause_end_ms != 0;
    st.pause_end_ms = 0;
    st.pause_all = false;
    if st.pause_held != 0 && !was_all {
        return;
    }
    let mut clock = Clock::new(now);
    let mut held = std::mem::take(&mut st.postponed);
    while let Some(id) = held.pop_front() {
        if st.pause_end_ms > clock.now_ms {
            // One of them paused the server again: the rest keep waiting, in their order.
            st.postponed.push_back(id);
            st.postponed.extend(held.drain(..));
            break;
        }
        let Some(mut client) = st.clients.remove(&id) else { continue };
        client.postponed = false;
        let mut out = Vec::new();
        super::blocking::run_pending(st, &mut client, &mut out, &mut clock);
        crate::executor::tracking::broadcast(st, Some((&mut client, &mut out)));
        client.handle.push_output(out);
        if client.close_after_reply {
            client.handle.close_after_output();
        }
        st.clients.insert(id, client);
    }
}

/// Refuses a command found in the table: an EXEC refused (OOM, MISCONF, NOREPLICAS, ACL...)
/// discards its transaction and answers EXECABORT with the reason, as Redis's rejectCommand.
fn refuse(
    st: &mut State,
    client: &mut Client,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    e: CmdError,
    out: &mut Vec<u8>,
    proto: u8,
) {
    if spec.name == "exec" && parent.is_none() && client.multi.is_some() {
        let reason = e.text();
        let text = crate::executor::multi::abort_exec(st, client, &reason);
        return reject(st, client, CmdError::Raw(text), out, proto);
    }
    reject(st, client, e, out, proto)
}

/// Answers a command refused before running; inside MULTI it also dooms the transaction.
fn reject(st: &mut State, client: &mut Client, e: CmdError, out: &mut Vec<u8>, proto: u8) {
    if client.multi.is_some() {
        client.dirty_exec = true;
    }
    let line = e.into_line();
    st.stats.count_error(&line);
    write_reply(out, &Reply::Error(line), proto);
}

/// The commandstats name: `get`, or `config|get` for a subcommand (interned once per spec).
pub(crate) fn stat_key(spec: &'static CommandSpec, parent: Option<&'static CommandSpec>) -> StatName {
    match parent {
        None => StatName(spec.name),
        Some(p) => StatName(full_name(p, spec)),
    }
}

/// `parent|sub`, leaked once per subcommand so stats can key on `&'static str`.
pub fn full_name(parent: &'static CommandSpec, sub: &'static CommandSpec) -> &'static str {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashMap<usize, &'static str>>> = OnceLock::new();
    let map = NAMES.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(sub as *const CommandSpec as usize)
        .or_insert_with(|| Box::leak(format!("{}|{}", parent.name, sub.name).into_boxed_str()))
}
