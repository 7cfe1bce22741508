//! Server-assisted client-side caching (CLIENT TRACKING): the table of keys tracking clients
//! have read, the BCAST prefix table, and the invalidation messages.
//!
//! Like Redis, the table is keyed by key name alone (not by database): a change to `k` in any
//! database invalidates `k` for everyone who read a `k`. A key is forgotten as soon as it is
//! invalidated; a client reading it again registers again. BCAST clients are not in the key table:
//! changed keys are collected per matching prefix and broadcast once per batch (`broadcast`),
//! as Redis does before it sleeps.
//!
//! Messages to the client whose command is running are held (`pending`) and written after that
//! command's reply (Redis 7.0 orders them so); every other client gets them on its outbox at once.
//! This module owns the table only; the per-client flags live in `Client::tracking`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::executor::clients::Client;
use crate::executor::State;

/// What an invalidation message carries.
#[derive(Debug, Clone)]
enum Payload {
    Keys(Vec<Vec<u8>>),
    /// FLUSHALL / FLUSHDB: a null in place of the key array.
    Flush,
}

#[derive(Debug, Default)]
struct Prefix {
    /// BCAST clients registered for the prefix.
    clients: BTreeSet<u64>,
    /// Keys changed since the last broadcast, with the client that changed them (NOLOOP), 0 for
    /// the server itself (expiry).
    changed: BTreeMap<Vec<u8>, u64>,
}

/// The tracking table (one per server).
#[derive(Debug, Default)]
pub struct Table {
    keys: HashMap<Vec<u8>, Vec<u64>>,
    items: usize,
    prefixes: BTreeMap<Vec<u8>, Prefix>,
    /// Clients with tracking on (INFO tracking_clients).
    pub clients: usize,
    /// Invalidations for the running client or through it, sent after its reply: (original
    /// tracking client, payload).
    pending: Vec<(u64, Payload)>,
    /// A flush happened during the running command: every tracking client gets a null message.
    flushed: bool,
    /// tracking-table-max-keys (0: no limit), refreshed by the executor with the configuration.
    pub max_keys: usize,
}

impl Table {
    /// Whether any key or prefix is tracked (the per-write fast path).
    pub fn is_active(&self) -> bool {
        self.clients > 0 || !self.keys.is_empty()
    }

    /// INFO: tracking_total_keys, tracking_total_items, tracking_total_prefixes.
    pub fn totals(&self) -> (usize, usize, usize) {
        (self.keys.len(), self.items, self.prefixes.len())
    }

    /// Whether anything waits for the running client's reply to be written.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.flushed
    }

    fn add_prefix(&mut self, id: u64, prefix: &[u8]) {
        self.prefixes.entry(prefix.to_vec()).or_default().clients.insert(id);
    }

    fn remove_client_prefixes(&mut self, id: u64, prefixes: &BTreeSet<Vec<u8>>) {
        for p in prefixes {
            if let Some(entry) = self.prefixes.get_mut(p) {
                entry.clients.remove(&id);
                if entry.clients.is_empty() {
                    self.prefixes.remove(p);
                }
            }
        }
    }

    /// Records that client `id` read `keys` (non-BCAST tracking).
    pub fn remember<'a>(&mut self, id: u64, keys: impl Iterator<Item = &'a [u8]>) {
        for key in keys {
            let ids = self.keys.entry(key.to_vec()).or_default();
            if !ids.contains(&id) {
                ids.push(id);
                self.items += 1;
            }
        }
    }
}

/// The options of one CLIENT TRACKING ON.
#[derive(Debug, Default)]
pub struct Options {
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Vec<u8>>,
}

/// Turns tracking on for `client` (already validated by the CLIENT TRACKING handler). Turning it
/// on again keeps BCAST prefixes registered earlier and adds the new ones, as Redis does.
pub fn enable(table: &mut Table, client: &mut Client, opts: Options) {
    let t = &mut client.tracking;
    if !t.on {
        table.clients += 1;
    }
    t.on = true;
    t.broken_redir = false;
    t.redirect = opts.redirect;
    t.bcast = opts.bcast;
    t.optin = opts.optin;
    t.optout = opts.optout;
    t.noloop = opts.noloop;
    if opts.bcast {
        let prefixes = if opts.prefixes.is_empty() { vec![Vec::new()] } else { opts.prefixes };
        for p in prefixes {
            table.add_prefix(client.id, &p);
            t.prefixes.insert(p);
        }
    }
}

/// Turns tracking off. Keys the client read stay in the table until they change (Redis forgets
/// them lazily too); its BCAST prefixes go at once.
pub fn disable(table: &mut Table, client: &mut Client) {
    let t = &mut client.tracking;
    if !t.on {
        return;
    }
    table.remove_client_prefixes(client.id, &t.prefixes);
    table.clients = table.clients.saturating_sub(1);
    client.tracking = Default::default();
}

/// Forgets a disconnected client (its prefixes; its keys are skipped when they change).
pub fn forget(table: &mut Table, client: &mut Client) {
    disable(table, client);
}

/// The first of `prefixes` that overlaps another (one is a prefix of the other): Redis's
/// "Prefix '..' overlaps with ..." errors, checked against the client's registered prefixes
/// first, then among the new ones.
pub fn prefix_collision(existing: &BTreeSet<Vec<u8>>, new: &[Vec<u8>]) -> Option<String> {
    let overlaps = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlaps(p, e)) {
            return Some(format!(
                "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                s(p),
                s(e)
            ));
        }
        if let Some(o) = new.iter().enumerate().find(|&(j, o)| j != i && overlaps(p, o)).map(|(_, o)| o) {
            return Some(format!(
                "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                s(p),
                s(o)
            ));
        }
    }
    None
}

/// A key changed (any write, expiry, eviction): invalidates it for every client that read it and
/// notes it for matching BCAST prefixes. `current` is the client whose command caused it.
pub fn invalidate_key(st: &mut State, current: Option<u64>, key: &[u8]) {
    let table = &mut st.tracking;
    if !table.prefixes.is_empty() {
        for (p, entry) in
            table.prefixes.range_mut::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(key)))
        {
            if key.starts_with(p) {
                entry.changed.insert(key.to_vec(), current.unwrap_or(0));
            }
        }
    }
    let Some(ids) = table.keys.remove(key) else { return };
    table.items = table.items.saturating_sub(ids.len());
    for id in ids {
        send_or_defer(st, current, id, Payload::Keys(vec![key.to_vec()]));
    }
}

/// FLUSHALL / FLUSHDB: every tracking client is told to drop everything (once per command,
/// however many databases were emptied) and the table is reclaimed.
pub fn on_flush(st: &mut State) {
    if st.tracking.clients > 0 {
        st.tracking.flushed = true;
    }
    let table = &mut st.tracking;
    table.keys = HashMap::new();
    table.items = 0;
}

/// Sends an invalidation for tracking client `orig` now, or holds it for after the running
/// command's reply when the running client is involved.
fn send_or_defer(st: &mut State, current: Option<u64>, orig: u64, payload: Payload) {
    if current == Some(orig) {
        st.tracking.pending.push((orig, payload));
        return;
    }
    let Some(c) = st.clients.get(&orig) else { return };
    let t = &c.tracking;
    if !t.on || t.bcast {
        return;
    }
    if t.redirect != 0 && Some(t.redirect) == current {
        st.tracking.pending.push((orig, payload));
        return;
    }
    deliver(st, None, orig, &payload);
}

/// Encodes and queues one message for tracking client `orig` (to its redirect client when it
/// has one). `cur` is the running client and the buffer its messages go to.
fn deliver(st: &mut State, mut cur: Option<(&mut Client, &mut Vec<u8>)>, orig: u64, payload: &Payload) {
    let cur_id = cur.as_ref().map(|(c, _)| c.id);
    let (orig_proto, redirect) = match cur.as_ref() {
        Some((c, _)) if c.id == orig => (c.proto, c.tracking.redirect),
        _ => match st.clients.get(&orig) {
            Some(c) => (c.proto, c.tracking.redirect),
            None => return,
        },
    };
    // Where the message goes and how it is framed.
    let target = if redirect == 0 { orig } else { redirect };
    let target_info = if Some(target) == cur_id {
        cur.as_ref().map(|(c, _)| c.proto)
    } else {
        st.clients.get(&target).filter(|c| !c.handle.close_requested()).map(|c| c.proto)
    };
    let mut msg = Vec::new();
    let Some(target_proto) = target_info else {
        // The redirect client is gone: flag the tracking client, and tell it if it can hear us.
        let flag = |c: &mut Client| c.tracking.broken_redir = true;
        match cur.as_mut() {
            Some((c, _)) if c.id == orig => flag(c),
            _ => {
                if let Some(c) = st.clients.get_mut(&orig) {
                    flag(c)
                }
            }
        }
        if orig_proto >= 3 {
            msg.extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n:");
            msg.extend_from_slice(redirect.to_string().as_bytes());
            msg.extend_from_slice(b"\r\n");
            queue(st, cur, orig, msg);
        }
        return;
    };
    if target_proto >= 3 {
        msg.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else if redirect != 0 && st.pubsub.is_subscribed(target) {
        msg.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    } else {
        // RESP2 without a subscribed redirect client: nothing can carry the message.
        return;
    }
    match payload {
        // The null is the tracking client's own protocol's, even through a redirect (as Redis).
        Payload::Flush => msg.extend_from_slice(if orig_proto >= 3 { b"_\r\n" } else { b"$-1\r\n" }),
        Payload::Keys(keys) => {
            msg.push(b'*');
            msg.extend_from_slice(keys.len().to_string().as_bytes());
            msg.extend_from_slice(b"\r\n");
            for k in keys {
                msg.push(b'$');
                msg.extend_from_slice(k.len().to_string().as_bytes());
                msg.extend_from_slice(b"\r\n");
                msg.extend_from_slice(k);
                msg.extend_from_slice(b"\r\n");
            }
        }
    }
    queue(st, cur, target, msg);
}

fn queue(st: &State, cur: Option<(&mut Client, &mut Vec<u8>)>, to: u64, msg: Vec<u8>) {
    match cur {
        Some((c, out)) if c.id == to => out.extend_from_slice(&msg),
        _ => {
            if let Some(c) = st.clients.get(&to) {
                c.handle.push_output(msg);
            }
        }
    }
}

/// After a command's reply: sends what was held for the running client (its own invalidations,
/// those redirected through it, and the flush notices).
pub fn after_command(st: &mut State, client: &mut Client, out: &mut Vec<u8>) {
    deliver_pending(st, client, out, true);
}

/// Delivers the held invalidations; `by_client` when they come from the client's own changes,
/// which NOLOOP keeps from it (not those of keys dropped from a full table).
fn deliver_pending(st: &mut State, client: &mut Client, out: &mut Vec<u8>, by_client: bool) {
    let pending = std::mem::take(&mut st.tracking.pending);
    let me = client.id;
    for (orig, payload) in pending {
        if orig == me {
            let t = &client.tracking;
            if !t.on || t.bcast || (t.noloop && by_client) {
                continue;
            }
        }
        deliver(st, Some((client, out)), orig, &payload);
    }
    if std::mem::take(&mut st.tracking.flushed) {
        let ids: Vec<u64> = st.clients.values().filter(|c| c.tracking.on).map(|c| c.id).collect();
        for id in ids {
            deliver(st, Some((client, out)), id, &Payload::Flush);
        }
        if client.tracking.on {
            deliver(st, Some((client, out)), me, &Payload::Flush);
        }
    }
}

/// Sends each BCAST client the keys changed under its prefixes since the last call, one
/// message per prefix (NOLOOP clients skip their own changes), and trims the key table to
/// tracking-table-max-keys. `cur` is the client whose batch just ran, with its reply buffer.
#[inline]
pub fn broadcast(st: &mut State, cur: Option<(&mut Client, &mut Vec<u8>)>) {
    if st.tracking.prefixes.is_empty() && (st.tracking.max_keys == 0 || st.tracking.keys.len() <= st.tracking.max_keys)
    {
        return;
    }
    broadcast_work(st, cur)
}

/// `broadcast` once there may be something to do: kept out of line, so that the call made after
/// every batch is a few instructions when nothing is tracked (its frame set-up alone was 40
/// instructions a request at -P 1).
#[inline(never)]
fn broadcast_work(st: &mut State, mut cur: Option<(&mut Client, &mut Vec<u8>)>) {
    if st.tracking.prefixes.values().any(|p| !p.changed.is_empty()) {
        let mut work = Vec::new();
        for entry in st.tracking.prefixes.values_mut() {
            if !entry.changed.is_empty() {
                work.push((entry.clients.iter().copied().collect::<Vec<u64>>(), std::mem::take(&mut entry.changed)));
            }
        }
        for (clients, changed) in work {
            for id in clients {
                let noloop = match cur.as_ref() {
                    Some((c, _)) if c.id == id => c.tracking.noloop,
                    _ => st.clients.get(&id).is_some_and(|c| c.tracking.noloop),
                };
                let keys: Vec<Vec<u8>> =
                    changed.iter().filter(|&(_, &by)| !(noloop && by == id)).map(|(k, _)| k.clone()).collect();
                if keys.is_empty() {
                    continue;
                }
                let reborrow = cur.as_mut().map(|(c, o)| (&mut **c, &mut **o));
                deliver(st, reborrow, id, &Payload::Keys(keys));
            }
        }
    }
    let max = st.tracking.max_keys;
    if max > 0 && st.tracking.keys.len() > max {
        // Redis evicts random keys; the table's iteration order is as arbitrary.
        let cur_id = cur.as_ref().map(|(c, _)| c.id);
        let excess: Vec<Vec<u8>> = st.tracking.keys.keys().take(st.tracking.keys.len() - max).cloned().collect();
        for key in excess {
            invalidate_key(st, cur_id, &key);
        }
        if let Some((c, out)) = cur {
            deliver_pending(st, c, out, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_collisions_are_reported_like_redis() {
        let existing: BTreeSet<Vec<u8>> = [b"ab".to_vec()].into_iter().collect();
        let e = prefix_collision(&existing, &[b"abc".to_vec()]).unwrap();
        assert!(e.starts_with("Prefix 'abc' overlaps with an existing prefix 'ab'"));
        let e = prefix_collision(&BTreeSet::new(), &[b"ab".to_vec(), b"a".to_vec()]).unwrap();
        assert!(e.starts_with("Prefix 'ab' overlaps with another provided prefix 'a'"));
        assert!(prefix_collision(&existing, &[b"x".to_vec(), b"y".to_vec()]).is_none());
    }

    #[test]
    fn remember_counts_items_once_per_client() {
        let mut t = Table::default();
        t.remember(1, [&b"a"[..], b"b"].into_iter());
        t.remember(1, [&b"a"[..]].into_iter());
        t.remember(2, [&b"a"[..]].into_iter());
        assert_eq!(t.totals(), (2, 3, 0));
    }
}
