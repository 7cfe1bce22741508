//! Blocked clients (BLPOP, BZPOPMIN, XREAD BLOCK, ...): waiters per key in arrival order, their
//! deadlines, and serving them. A blocking handler that finds nothing calls `Ctx::block`; `call()`
//! then parks the command here instead of replying. When a write signals a key ready, the first
//! waiter's command runs again (Redis 7's re-execution model) and its reply, followed by the
//! replies of whatever it pipelined meanwhile, goes to the client's outbox. A client whose
//! deadline passes gets the command's timeout reply.

use std::collections::VecDeque;

use super::ctx::BlockRequest;
use crate::resp::writer::write_reply;

use super::call::{call, Clock};
use super::clients::Client;
use super::{Cmd, State};
use crate::util::clock::unix_ms;

/// A parked command.
#[derive(Debug)]
pub struct Blocked {
    pub cmd: Cmd,
    pub db: usize,
    pub request: BlockRequest,
    /// Microseconds the command's first run took (what Redis's stats count when it ends
    /// without running again).
    pub duration_us: u64,
}

/// Parks `client` on the keys of `request`; called by `call()` when a handler blocked.
pub fn park(st: &mut State, client: &mut Client, cmd: Cmd, request: BlockRequest, duration_us: u64) {
    let db = client.db;
    for key in &request.keys {
        let queue = st.waiters.entry((db, key.clone())).or_default();
        if !queue.contains(&client.id) {
            queue.push_back(client.id);
        }
    }
    if request.deadline_ms > 0 {
        st.blocked_deadlines.insert((request.deadline_ms, client.id));
        if st.next_block_deadline().is_none_or(|d| request.deadline_ms <= d) {
            st.timer.notify_one();
        }
    }
    st.blocked_clients += 1;
    client.blocked = Some(Box::new(Blocked { cmd, db, request, duration_us }));
}

/// Removes a parked client from every waiter queue and the deadline index.
pub fn unpark(st: &mut State, id: u64, blocked: &Blocked) {
    for key in &blocked.request.keys {
        let k = (blocked.db, key.clone());
        if let Some(queue) = st.waiters.get_mut(&k) {
            queue.retain(|&w| w != id);
            if queue.is_empty() {
                st.waiters.remove(&k);
            }
        }
    }
    if blocked.request.deadline_ms > 0 {
        st.blocked_deadlines.remove(&(blocked.request.deadline_ms, id));
    }
    st.blocked_clients = st.blocked_clients.saturating_sub(1);
}

/// Runs one command for a client, honouring CLIENT REPLY OFF/SKIP. `batch_out`: `out` is the
/// output of the connection's own batch, which may then take a big reply encoded off the
/// executor (`Reply::Deferred`); never for a master or replica link, or a reply to drop.
pub fn run_one(st: &mut State, client: &mut Client, cmd: Cmd, out: &mut Vec<u8>, clock: &mut Clock, batch_out: bool) {
    let skip = std::mem::take(&mut client.reply_skip_next);
    client.reply_skip_now = skip;
    let mark = out.len();
    client.reply_span = None;
    client.defer_reply =
        batch_out && !skip && !client.reply_off && !client.master && client.info.fd >= 0 && !client.handle.is_replica();
    // On a replica, the master's commands go on to its own replicas byte for byte, and count
    // in the offset once run.
    let relayed = client.master.then(|| super::replication::relay_from_master(st, &cmd.argv));
    call(st, client, cmd, out, clock);
    client.defer_reply = false;
    if let Some(len) = relayed {
        if client.postponed {
            // CLIENT PAUSE held it: it is relayed and counted when it runs.
            super::replication::unrelay(st, len);
            return;
        }
        super::replication::master_applied(st, len);
        if out.get(mark) == Some(&b'-') {
            super::replication::master_command_failed(st, &out[mark..], client.last_cmd);
        }
    }
    if out.len() > mark && client.handle.is_replica() && !client.master {
        super::replication::replica_replied(st, client, &out[mark..], clock.now_ms);
        out.truncate(mark);
        return;
    }
    let skip = skip && std::mem::take(&mut client.reply_skip_now);
    if client.postponed {
        // CLIENT PAUSE held the command: a SKIP still applies to it when it runs.
        client.reply_skip_next |= skip;
        return;
    }
    if skip || client.reply_off {
        // Only the reply goes: pushes around it (pub/sub, invalidations) are still delivered.
        match client.reply_span.take() {
            Some((start, end)) if start >= mark && end <= out.len() => {
                out.drain(start..end);
            }
            _ => out.truncate(mark),
        }
    }
}

/// Whether the client must stop running commands for now (blocked, closing, or shutting down).
pub fn must_stop(st: &State, client: &Client) -> bool {
    client.blocked.is_some()
        || client.postponed
        || client.close_after_reply
        || st.shutdown.is_some()
        || client.handle.close_requested()
}

/// Runs the commands a client queued while it was blocked, until it blocks again.
pub fn run_pending(st: &mut State, client: &mut Client, out: &mut Vec<u8>, clock: &mut Clock) {
    while !must_stop(st, client) {
        let Some(cmd) = client.pending.pop_front() else { break };
        run_one(st, client, cmd, out, clock, false);
        serve_ready_keys(st, clock);
    }
}

/// Sends what an unblocked client produced and asks its connection to close if it said QUIT.
fn deliver(client: &Client, out: Vec<u8>) {
    client.handle.push_output(out);
    if client.close_after_reply {
        client.handle.close_after_output();
    }
}

/// Serves waiters of every key signalled ready, repeating while serving makes more keys ready.
pub fn serve_ready_keys(st: &mut State, clock: &mut Clock) {
    while !st.ready_keys.is_empty() {
        let ready = std::mem::take(&mut st.ready_keys);
        for (db, key) in ready {
            serve_key(st, db, &key, clock);
        }
    }
}

fn serve_key(st: &mut State, db: usize, key: &[u8], clock: &mut Clock) {
    let k = (db, key.to_vec());
    loop {
        let Some(&id) = st.waiters.get(&k).and_then(VecDeque::front) else { return };
        let Some(mut client) = st.clients.remove(&id) else {
            // A waiter with no client: drop it and look at the next one.
            if let Some(q) = st.waiters.get_mut(&k) {
                q.pop_front();
            }
            continue;
        };
        let Some(blocked) = client.blocked.take() else {
            if let Some(q) = st.waiters.get_mut(&k) {
                q.pop_front();
            }
            st.clients.insert(id, client);
            continue;
        };
        let now = clock.now_ms;
        let ready = st.dbs[db].peek(key, now).is_some_and(|v| v.type_name() == blocked.request.wants_type);
        if !ready {
            // A consumer-group reader whose stream was deleted or replaced is told so (Redis 7.0);
            // every other waiter keeps waiting for a key of the right type.
            let group_reader = blocked.cmd.spec.is_some_and(|s| s.name == "xreadgroup");
            if !group_reader {
                client.blocked = Some(blocked);
                st.clients.insert(id, client);
                return;
            }
            unpark(st, id, &blocked);
            let mut out = Vec::new();
            write_reply(
                &mut out,
                &crate::resp::Reply::error("UNBLOCKED the stream key no longer exists"),
                client.proto,
            );
            run_pending(st, &mut client, &mut out, clock);
            deliver(&client, out);
            st.clients.insert(id, client);
            continue;
        }
        unpark(st, id, &blocked);
        let deadline = blocked.request.deadline_ms;
        let saved_db = client.db;
        client.db = blocked.db;
        let mut out = Vec::new();
        client.woken = true;
        call(st, &mut client, blocked.cmd, &mut out, clock);
        client.woken = false;
        client.db = saved_db;
        if let Some(again) = client.blocked.as_mut() {
            // Nothing for it after all: it keeps its deadline and its place at the head.
            if again.request.deadline_ms != deadline {
                st.blocked_deadlines.remove(&(again.request.deadline_ms, id));
                again.request.deadline_ms = deadline;
                if deadline > 0 {
                    st.blocked_deadlines.insert((deadline, id));
                }
            }
            if let Some(q) = st.waiters.get_mut(&k) {
                q.retain(|&w| w != id);
                q.push_front(id);
            }
            st.clients.insert(id, client);
            return;
        }
        run_pending(st, &mut client, &mut out, clock);
        deliver(&client, out);
        st.clients.insert(id, client);
    }
}

/// Answers every blocked client whose deadline has passed with its command's timeout reply.
pub fn expire_deadlines(st: &mut State) {
    let now = unix_ms();
    let mut clock = Clock::new(now);
    while let Some(&(deadline, id)) = st.blocked_deadlines.first() {
        if deadline > now {
            break;
        }
        st.blocked_deadlines.pop_first();
        let Some(mut client) = st.clients.remove(&id) else { continue };
        if let Some(blocked) = client.blocked.take() {
            unpark(st, id, &blocked);
            super::call::blocked_ended(st, &blocked, super::call::BlockEnd::Deadline);
            let mut out = Vec::new();
            // WAIT answers how many replicas acknowledged by now.
            let reply = super::replication::end_wait(st, id).unwrap_or_else(|| blocked.request.timeout_reply.clone());
            if !client.reply_off {
                write_reply(&mut out, &reply, client.proto);
            }
            run_pending(st, &mut client, &mut out, &mut clock);
            deliver(&client, out);
        }
        st.clients.insert(id, client);
    }
}

/// Unblocks client `id` (CLIENT UNBLOCK): with the timeout reply, or with Redis's UNBLOCKED error.
/// Returns whether it was blocked.
pub fn unblock(st: &mut State, id: u64, with_error: bool) -> bool {
    let Some(mut client) = st.clients.remove(&id) else { return false };
    let Some(blocked) = client.blocked.take() else {
        st.clients.insert(id, client);
        return false;
    };
    unpark(st, id, &blocked);
    let how = if with_error { super::call::BlockEnd::UnblockError } else { super::call::BlockEnd::UnblockTimeout };
    super::call::blocked_ended(st, &blocked, how);
    let mut out = Vec::new();
    let acked = super::replication::end_wait(st, id);
    let reply = if with_error {
        crate::resp::Reply::error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    } else {
        acked.unwrap_or_else(|| blocked.request.timeout_reply.clone())
    };
    write_reply(&mut out, &reply, client.proto);
    let mut clock = Clock::new(unix_ms());
    run_pending(st, &mut client, &mut out, &mut clock);
    deliver(&client, out);
    st.clients.insert(id, client);
    true
}

/// Ends client `id`'s block with `reply` (a WAIT whose replicas acknowledged), then runs what it
/// queued meanwhile.
pub fn finish(st: &mut State, id: u64, reply: crate::resp::Reply) {
    let Some(mut client) = st.clients.remove(&id) else { return };
    if let Some(blocked) = client.blocked.take() {
        unpark(st, id, &blocked);
        super::call::blocked_ended(st, &blocked, super::call::BlockEnd::Served);
        let mut out = Vec::new();
        if !client.reply_off {
            write_reply(&mut out, &reply, client.proto);
        }
        let mut clock = Clock::new(unix_ms());
        run_pending(st, &mut client, &mut out, &mut clock);
        deliver(&client, out);
    }
    st.clients.insert(id, client);
}

/// Ends every block with `error` and closes those clients once it is sent (Redis's
/// disconnectAllBlockedClients, when a master turns replica: what they wait for will not come
/// from this server's own writes). Clients held by a pause are not blocked in this sense: they
/// run once it ends, and are refused or served then.
pub fn disconnect_all(st: &mut State, error: &str) {
    let ids: Vec<u64> = st.clients.iter().filter(|(_, c)| c.blocked.is_some()).map(|(&id, _)| id).collect();
    for id in ids {
        let Some(mut client) = st.clients.remove(&id) else { continue };
        if let Some(blocked) = client.blocked.take() {
            unpark(st, id, &blocked);
            super::replication::end_wait(st, id);
            super::shutdown::forget(st, id);
            let mut out = Vec::new();
            write_reply(&mut out, &crate::resp::Reply::error(error), client.proto);
            client.close_after_reply = true;
            deliver(&client, out);
        }
        st.clients.insert(id, client);
    }
}
