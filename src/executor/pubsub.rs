//! Delivery to clients: pub/sub messages (exact, pattern and shard subscribers), keyspace
//! notifications, MONITOR lines, and the subscribed-mode rules `call()` applies. The channel
//! tables themselves live in `crate::pubsub`; this side owns reaching the clients.
//!
//! Pushes for the calling client go to `PubSub::self_out`, which `call()` writes ahead of the
//! command's own reply, so a RESP3 client publishing to itself sees Redis's order even when the
//! subscription came earlier in the same pipeline.

use super::clients::Client;
use super::registry::CommandSpec;
use super::State;
use crate::pubsub::{ev, parse_events, Kind};
use crate::resp::writer::write_reply;
use crate::resp::Reply;
use crate::spec::flags::{ADMIN, SKIP_MONITOR};
use crate::spec::{Args, CmdError, CmdResult};

// ---------------------------------------------------------------------------------------------
// Frames and delivery

/// Encodes one pub/sub frame (push in RESP3, array in RESP2) for `proto`.
pub fn frame(out: &mut Vec<u8>, items: Vec<Reply>, proto: u8) {
    write_reply(out, &Reply::Push(items), proto);
}

/// Encodes a frame lazily once per protocol and queues it for client `id`.
struct Fanout<'a> {
    items: &'a dyn Fn() -> Vec<Reply>,
    enc: [Option<Vec<u8>>; 2],
}

impl Fanout<'_> {
    fn bytes(&mut self, proto: u8) -> &[u8] {
        let slot = usize::from(proto >= 3);
        if self.enc[slot].is_none() {
            let mut out = Vec::new();
            frame(&mut out, (self.items)(), proto);
            self.enc[slot] = Some(out);
        }
        self.enc[slot].as_deref().unwrap_or_default()
    }

    /// Queues the frame for `id`: on its handle, or in `self_out` when it is the caller.
    fn send(
        &mut self,
        srv_clients: &crate::executor::clients::ClientTable,
        caller: Option<&Client>,
        self_out: &mut Vec<u8>,
        id: u64,
    ) {
        match caller {
            Some(c) if c.id == id => {
                let b = self.bytes(c.proto).to_vec();
                self_out.extend_from_slice(&b);
            }
            _ => {
                if let Some(c) = srv_clients.get(&id) {
                    c.handle.push_slice(self.bytes(c.proto));
                }
            }
        }
    }
}

/// Publishes `msg` on `channel` (exact subscribers, then pattern subscribers for plain channels);
/// returns the number of deliveries, as PUBLISH replies.
pub fn publish_message(srv: &mut State, caller: Option<&Client>, kind: Kind, channel: &[u8], msg: &[u8]) -> i64 {
    if srv.pubsub.is_idle() {
        return 0;
    }
    let mut self_out = std::mem::take(&mut srv.pubsub.self_out);
    let mut n = 0;
    let exact = srv.pubsub.subscribers(kind, channel).to_vec();
    if !exact.is_empty() {
        let word: &[u8] = if kind == Kind::Shard { b"smessage" } else { b"message" };
        let items = || vec![Reply::bulk(word), Reply::bulk(channel), Reply::bulk(msg)];
        let mut f = Fanout { items: &items, enc: [None, None] };
        for id in exact {
            f.send(&srv.clients, caller, &mut self_out, id);
            n += 1;
        }
    }
    if kind == Kind::Channel && srv.pubsub.pattern_count() > 0 {
        for (pattern, ids) in srv.pubsub.matching_patterns(channel) {
            let items =
                || vec![Reply::bulk(&b"pmessage"[..]), Reply::bulk(pattern), Reply::bulk(channel), Reply::bulk(msg)];
            let mut f = Fanout { items: &items, enc: [None, None] };
            for &id in ids {
                f.send(&srv.clients, caller, &mut self_out, id);
                n += 1;
            }
        }
    }
    srv.pubsub.self_out = self_out;
    n
}

/// The shard channels of `slots` are no longer served here (the slot moved away from this
/// node or its master): every subscriber is unsubscribed from them and told so with a
/// `sunsubscribe` frame carrying its remaining shard subscriptions, as Redis's
/// pubsubShardUnsubscribeAllChannelsInSlot.
pub fn unsubscribe_shard_slots(srv: &mut State, slots: &[u16]) {
    if srv.pubsub.is_idle() {
        return;
    }
    let mut lost: Vec<Vec<u8>> = srv
        .pubsub
        .channel_names(Kind::Shard)
        .filter(|ch| slots.contains(&(crate::cluster::key_hash_slot(ch) as u16)))
        .cloned()
        .collect();
    lost.sort();
    for channel in lost {
        for id in srv.pubsub.subscribers(Kind::Shard, &channel).to_vec() {
            srv.pubsub.unsubscribe(id, Kind::Shard, &channel);
            let Some(c) = srv.clients.get(&id) else { continue };
            let left = srv.pubsub.counts(id).1;
            let mut out = Vec::new();
            let items = vec![Reply::bulk(&b"sunsubscribe"[..]), Reply::bulk(&channel[..]), Reply::Int(left as i64)];
            frame(&mut out, items, c.proto);
            c.handle.push_slice(&out);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hooks called from the executor

/// RESP2 subscribed mode (called by `call()` after the auth check): a RESP2 client with any
/// subscription may only run (P|S)(UN)SUBSCRIBE, PING, QUIT and RESET. Returns `Ok(true)` for a
/// PING that must answer in the subscribed-mode shape. RESET also drops subscriptions and
/// monitor mode here, before its handler runs.
pub fn subscribed_mode_check(
    st: &mut State,
    client: &Client,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
) -> Result<bool, CmdError> {
    if st.pubsub.is_idle() {
        return Ok(false);
    }
    let top = parent.unwrap_or(spec).name;
    if top == "reset" {
        st.pubsub.forget(client.id);
        return Ok(false);
    }
    if client.proto != 2 || !st.pubsub.is_subscribed(client.id) {
        return Ok(false);
    }
    match top {
        "ping" => Ok(true),
        "subscribe" | "ssubscribe" | "psubscribe" | "unsubscribe" | "sunsubscribe" | "punsubscribe" | "quit"
        | "reset" => Ok(false),
        _ => {
            let name = match parent {
                Some(p) => format!("{}|{}", p.name, spec.name),
                None => spec.name.to_string(),
            };
            Err(CmdError::err(format!(
                "Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
            )))
        }
    }
}

/// PING's reply in RESP2 subscribed mode: `["pong", message or ""]`.
pub fn subscribed_ping(args: &Args) -> CmdResult {
    let msg = if args.len() > 1 { args.get(1).to_vec() } else { Vec::new() };
    Ok(Reply::Array(vec![Reply::bulk(&b"pong"[..]), Reply::bulk(msg)]))
}

/// Drops everything `id` registered (disconnect).
pub fn forget_client(st: &mut State, id: u64) {
    if !st.pubsub.is_idle() {
        st.pubsub.forget(id);
    }
}

/// Feeds a finished command to every MONITOR client (called by `call()` only when one exists).
/// Admin and skip-monitor commands are not shown, nor AUTH / HELLO credentials.
pub fn feed_monitors(
    st: &mut State,
    client: &Client,
    spec: &'static CommandSpec,
    parent: Option<&'static CommandSpec>,
    argv: &[bytes::Bytes],
) {
    let top = parent.unwrap_or(spec);
    if top.has_flag(ADMIN | SKIP_MONITOR) || spec.has_flag(ADMIN | SKIP_MONITOR) {
        return;
    }
    feed_monitor_line(st, client, top.name, argv);
}

/// Shows one command to every MONITOR client, whatever its flags (EVAL feeds itself this way
/// before its script's commands, as Redis does).
pub fn feed_monitor_line(st: &mut State, client: &Client, name: &str, argv: &[bytes::Bytes]) {
    if st.pubsub.monitors.is_empty() {
        return;
    }
    let us = crate::util::clock::unix_us();
    let mut line = format!("+{}.{:06} [{} ", us / 1_000_000, us % 1_000_000, client.db).into_bytes();
    if client.info.unix {
        line.extend_from_slice(b"unix:");
        line.extend_from_slice(st.config.unixsocket.as_deref().unwrap_or("").as_bytes());
    } else {
        line.extend_from_slice(client.info.addr.as_bytes());
    }
    line.push(b']');
    // What the handler redacted (AUTH, HELLO AUTH, MIGRATE AUTH/AUTH2), as the slowlog shows it.
    let redacted = crate::slowlog::redacted_positions(name, argv);
    for (i, a) in argv.iter().enumerate() {
        line.push(b' ');
        if redacted.contains(&i) {
            repr(&mut line, b"(redacted)");
        } else {
            repr(&mut line, a);
        }
    }
    line.extend_from_slice(b"\r\n");
    for &id in &st.pubsub.monitors {
        if id == client.id {
            st.pubsub.self_out.extend_from_slice(&line);
        } else if let Some(c) = st.clients.get(&id) {
            c.handle.push_output(line.clone());
        }
    }
}

/// Quotes `s` as Redis's sdscatrepr does: `"..."` with C escapes and `\xHH` for the rest.
pub fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// Publishes a keyspace event for `key` in `db` to `__keyspace@<db>__:<key>` and
/// `__keyevent@<db>__:<event>`, as far as notify-keyspace-events enables `class`.
pub fn notify(st: &mut State, caller: Option<&Client>, class: u32, event: &str, key: &[u8], db: usize) {
    let enabled = parse_events(&st.config.notify_keyspace_events);
    if enabled & class == 0 || st.pubsub.is_idle() {
        return;
    }
    if class != ev::EXPIRED {
        drain_expired(st, caller);
    }
    if enabled & ev::KEYSPACE != 0 {
        let mut ch = format!("__keyspace@{db}__:").into_bytes();
        ch.extend_from_slice(key);
        publish_message(st, caller, Kind::Channel, &ch, event.as_bytes());
    }
    if enabled & ev::KEYEVENT != 0 {
        let ch = format!("__keyevent@{db}__:{event}").into_bytes();
        publish_message(st, caller, Kind::Channel, &ch, key);
    }
}

/// Turns expired-key logging on or off to match notify-keyspace-events and publishes the
/// `expired` events logged since the last drain (after each command and from cron).
pub fn drain_expired(st: &mut State, caller: Option<&Client>) {
    let enabled = parse_events(&st.config.notify_keyspace_events);
    let wanted = enabled & ev::EXPIRED != 0 && enabled & (ev::KEYSPACE | ev::KEYEVENT) != 0;
    // Client-side caching hook: an expired key is invalidated like any change.
    let tracking = st.tracking.is_active();
    // Propagation hook: each expired key is a DEL (UNLINK when freed lazily) in the AOF.
    let propagating = st.prop.active;
    let lazy = st.config.lazyfree_lazy_expire;
    let log_expired = wanted || tracking || propagating;
    // Hash field expiry (7.4): `hexpired` (class h), then `del` (class g) for an emptied key.
    let log_field_expired =
        tracking || (enabled & (ev::HASH | ev::GENERIC) != 0 && enabled & (ev::KEYSPACE | ev::KEYEVENT) != 0);
    // This runs after every command while the AOF or a replica is on: one tight pass over the
    // databases, and the rest only when one has something logged (it was 11% of SET's
    // instructions with appendonly yes, indexing every database the long way).
    let mut logged = false;
    for db in st.dbs.iter_mut() {
        db.log_expired = log_expired;
        db.log_field_expired = log_field_expired;
        logged |= !db.expired_log.is_empty() | !db.field_expired_log.is_empty();
    }
    if !logged {
        return;
    }
    for i in 0..st.dbs.len() {
        let db = &mut st.dbs[i];
        if !db.field_expired_log.is_empty() {
            for (key, emptied) in std::mem::take(&mut db.field_expired_log) {
                if tracking {
                    crate::executor::tracking::invalidate_key(st, caller.map(|c| c.id), &key);
                }
                notify(st, caller, ev::HASH, "hexpired", &key, i);
                if emptied {
                    notify(st, caller, ev::GENERIC, "del", &key, i);
                }
            }
        }
        let db = &mut st.dbs[i];
        if db.expired_log.is_empty() {
            continue;
        }
        let keys = std::mem::take(&mut db.expired_log);
        for key in keys {
            if propagating {
                crate::executor::propagate::deletion(st, i, &key, lazy);
            }
            if tracking {
                crate::executor::tracking::invalidate_key(st, caller.map(|c| c.id), &key);
            }
            if wanted {
                notify(st, caller, ev::EXPIRED, "expired", &key, i);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_escapes_like_sdscatrepr() {
        let mut out = Vec::new();
        repr(&mut out, b"a\"\\\n\r\t\x07\x08\x01\xff ~");
        assert_eq!(out, b"\"a\\\"\\\\\\n\\r\\t\\a\\b\\x01\\xff ~\"".to_vec());
    }

    #[test]
    fn hello_redaction() {
        let argv: Vec<bytes::Bytes> =
            ["hello", "3", "auth", "u", "p", "setname", "n"].iter().map(|s| bytes::Bytes::from(*s)).collect();
        assert_eq!(crate::slowlog::redacted_positions("hello", &argv), vec![3, 4]);
    }
}
