//! The pub/sub registry: who listens to which channel, pattern and shard channel, plus the set of
//! MONITOR clients. Pure data keyed by client id; delivering messages (encoding, pushing to a
//! connection) is `commands::pubsub`'s job.

use std::collections::{BTreeSet, HashMap};

/// Keyspace-notification classes (notify-keyspace-events flags), as bits.
pub mod ev {
    pub const KEYSPACE: u32 = 1 << 0; // K
    pub const KEYEVENT: u32 = 1 << 1; // E
    pub const GENERIC: u32 = 1 << 2; // g
    pub const STRING: u32 = 1 << 3; // $
    pub const LIST: u32 = 1 << 4; // l
    pub const SET: u32 = 1 << 5; // s
    pub const HASH: u32 = 1 << 6; // h
    pub const ZSET: u32 = 1 << 7; // z
    pub const EXPIRED: u32 = 1 << 8; // x
    pub const EVICTED: u32 = 1 << 9; // e
    pub const STREAM: u32 = 1 << 10; // t
    pub const KEY_MISS: u32 = 1 << 11; // m
    pub const MODULE: u32 = 1 << 12; // d
    pub const NEW: u32 = 1 << 13; // n
    /// What `A` stands for: every class except m and n.
    pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// Parses a notify-keyspace-events value into `ev` bits; unknown characters are ignored (the
/// config layer has already rejected them).
pub fn parse_events(flags: &str) -> u32 {
    let mut bits = 0;
    for c in flags.bytes() {
        bits |= match c {
            b'A' => ev::ALL,
            b'g' => ev::GENERIC,
            b'$' => ev::STRING,
            b'l' => ev::LIST,
            b's' => ev::SET,
            b'h' => ev::HASH,
            b'z' => ev::ZSET,
            b'x' => ev::EXPIRED,
            b'e' => ev::EVICTED,
            b'K' => ev::KEYSPACE,
            b'E' => ev::KEYEVENT,
            b't' => ev::STREAM,
            b'm' => ev::KEY_MISS,
            b'd' => ev::MODULE,
            b'n' => ev::NEW,
            _ => 0,
        };
    }
    bits
}

/// What one client listens to. Sorted sets keep "unsubscribe from everything" deterministic.
#[derive(Debug, Default, Clone)]
pub struct ClientSubs {
    pub channels: BTreeSet<Vec<u8>>,
    pub patterns: BTreeSet<Vec<u8>>,
    pub shard: BTreeSet<Vec<u8>>,
}

impl ClientSubs {
    /// The count SUBSCRIBE / PSUBSCRIBE confirmations report (channels plus patterns).
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }
}

/// Which kind of subscription an operation concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

/// The registry. Subscriber lists keep subscription order, which is delivery order (as Redis).
#[derive(Debug, Default)]
pub struct PubSub {
    channels: HashMap<Vec<u8>, Vec<u64>>,
    patterns: HashMap<Vec<u8>, Vec<u64>>,
    shard: HashMap<Vec<u8>, Vec<u64>>,
    clients: HashMap<u64, ClientSubs>,
    /// MONITOR clients, in the order they entered monitor mode.
    pub monitors: Vec<u64>,
    /// Encoded pushes for the client whose command is running; `call()` writes them before
    /// that command's reply.
    pub self_out: Vec<u8>,
}

impl PubSub {
    /// Whether nothing at all is registered (the per-command fast path).
    pub fn is_idle(&self) -> bool {
        self.clients.is_empty() && self.monitors.is_empty()
    }

    /// Whether `id` has any subscription (Redis's CLIENT_PUBSUB flag).
    pub fn is_subscribed(&self, id: u64) -> bool {
        !self.clients.is_empty() && self.clients.contains_key(&id)
    }

    pub fn subs(&self, id: u64) -> Option<&ClientSubs> {
        self.clients.get(&id)
    }

    fn index(&mut self, kind: Kind) -> &mut HashMap<Vec<u8>, Vec<u64>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Subscribes `id` to `name`; returns whether it was new.
    pub fn subscribe(&mut self, id: u64, kind: Kind, name: &[u8]) -> bool {
        let subs = self.clients.entry(id).or_default();
        let set = match kind {
            Kind::Channel => &mut subs.channels,
            Kind::Pattern => &mut subs.patterns,
            Kind::Shard => &mut subs.shard,
        };
        if !set.insert(name.to_vec()) {
            return false;
        }
        self.index(kind).entry(name.to_vec()).or_default().push(id);
        true
    }

    /// Unsubscribes `id` from `name`; returns whether it was subscribed.
    pub fn unsubscribe(&mut self, id: u64, kind: Kind, name: &[u8]) -> bool {
        let Some(subs) = self.clients.get_mut(&id) else {
            return false;
        };
        let set = match kind {
            Kind::Channel => &mut subs.channels,
            Kind::Pattern => &mut subs.patterns,
            Kind::Shard => &mut subs.shard,
        };
        if !set.remove(name) {
            return false;
        }
        if subs.is_empty() {
            self.clients.remove(&id);
        }
        let index = self.index(kind);
        if let Some(ids) = index.get_mut(name) {
            ids.retain(|&c| c != id);
            if ids.is_empty() {
                index.remove(name);
            }
        }
        true
    }

    /// The names `id` is subscribed to of one kind (for "unsubscribe from all").
    pub fn names_of(&self, id: u64, kind: Kind) -> Vec<Vec<u8>> {
        self.clients
            .get(&id)
            .map(|s| {
                let set = match kind {
                    Kind::Channel => &s.channels,
                    Kind::Pattern => &s.patterns,
                    Kind::Shard => &s.shard,
                };
                set.iter().cloned().collect()
            })
            .unwrap_or_default()
    }

    /// (channels + patterns, shard channels) counts of `id`.
    pub fn counts(&self, id: u64) -> (usize, usize) {
        self.clients.get(&id).map_or((0, 0), |s| (s.count(), s.shard.len()))
    }

    /// Drops every subscription and the monitor flag of `id` (disconnect, RESET).
    pub fn forget(&mut self, id: u64) {
        if let Some(subs) = self.clients.remove(&id) {
            for (kind, set) in
                [(Kind::Channel, subs.channels), (Kind::Pattern, subs.patterns), (Kind::Shard, subs.shard)]
            {
                let index = self.index(kind);
                for name in set {
                    if let Some(ids) = index.get_mut(&name) {
                        ids.retain(|&c| c != id);
                        if ids.is_empty() {
                            index.remove(&name);
                        }
                    }
                }
            }
        }
        self.monitors.retain(|&m| m != id);
    }

    /// Subscribers of an exact channel (or shard channel).
    pub fn subscribers(&self, kind: Kind, name: &[u8]) -> &[u64] {
        let index = match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        };
        index.get(name).map_or(&[], |v| v.as_slice())
    }

    /// Every (pattern, subscriber) whose pattern matches `channel`.
    pub fn pattern_matches(&self, channel: &[u8]) -> Vec<(Vec<u8>, u64)> {
        let mut out = Vec::new();
        for (pattern, ids) in &self.patterns {
            if crate::glob::glob_match(pattern, channel, false) {
                out.extend(ids.iter().map(|&id| (pattern.clone(), id)));
            }
        }
        out
    }

    /// Every pattern matching `channel` with its subscribers, borrowed (the PUBLISH hot path
    /// encodes one pmessage frame per pattern, not per subscriber).
    pub fn matching_patterns(&self, channel: &[u8]) -> Vec<(&[u8], &[u64])> {
        self.patterns
            .iter()
            .filter(|(pattern, _)| crate::glob::glob_match(pattern, channel, false))
            .map(|(pattern, ids)| (pattern.as_slice(), ids.as_slice()))
            .collect()
    }

    /// Active channel names of one kind (at least one subscriber).
    pub fn channel_names(&self, kind: Kind) -> impl Iterator<Item = &Vec<u8>> {
        match kind {
            Kind::Shard => self.shard.keys(),
            _ => self.channels.keys(),
        }
    }

    /// Number of distinct patterns with a subscriber (PUBSUB NUMPAT).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// Total subscriptions (INFO's pubsub_channels is distinct channels: see `channel_count`).
    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribe_unsubscribe_and_forget() {
        let mut ps = PubSub::default();
        assert!(ps.subscribe(1, Kind::Channel, b"a"));
        assert!(!ps.subscribe(1, Kind::Channel, b"a"));
        assert!(ps.subscribe(2, Kind::Channel, b"a"));
        assert!(ps.subscribe(1, Kind::Pattern, b"a*"));
        assert!(ps.subscribe(1, Kind::Shard, b"s"));
        assert_eq!(ps.counts(1), (2, 1));
        assert_eq!(ps.subscribers(Kind::Channel, b"a"), &[1, 2]);
        assert_eq!(ps.pattern_matches(b"abc"), vec![(b"a*".to_vec(), 1)]);
        assert!(ps.unsubscribe(2, Kind::Channel, b"a"));
        assert!(!ps.is_subscribed(2));
        ps.forget(1);
        assert!(ps.is_idle());
        assert_eq!(ps.subscribers(Kind::Channel, b"a"), &[] as &[u64]);
        assert_eq!(ps.pattern_count(), 0);
    }

    #[test]
    fn event_flags() {
        assert_eq!(parse_events(""), 0);
        assert_eq!(parse_events("KEA") & ev::KEY_MISS, 0);
        assert_ne!(parse_events("Ex") & ev::EXPIRED, 0);
    }
}
