//! Redis Cluster's state as one node sees it (Redis 7.0's clusterState): who this node is, the
//! nodes it knows with their flags, addresses, epochs, slots and failure reports, who serves
//! each of the 16384 slots, slots being imported or migrated, the bus links' bookkeeping, and
//! the text of nodes.conf / CLUSTER NODES. The bus codec is `msg`. No I/O here: the executor
//! owns this state (`executor::cluster` runs the protocol and writes nodes.conf), and the bus
//! sockets are `server::cluster_bus`, which only move bytes through the links' channels.

pub mod msg;

use std::collections::{BTreeMap, HashMap};

pub use crate::util::slot::{key_hash_slot, SLOTS};

/// A node's 40-character hex name.
pub type Name = [u8; 40];
/// The all-zero name: "no node" on the wire (slaveof of a master).
pub const NULL_NAME: Name = [0; 40];
/// Bytes of a slots bitmap.
pub const SLOT_BYTES: usize = SLOTS / 8;

pub const NODE_MASTER: u16 = 1;
pub const NODE_SLAVE: u16 = 2;
pub const NODE_PFAIL: u16 = 4;
pub const NODE_FAIL: u16 = 8;
pub const NODE_MYSELF: u16 = 16;
pub const NODE_HANDSHAKE: u16 = 32;
pub const NODE_NOADDR: u16 = 64;
pub const NODE_MEET: u16 = 128;
pub const NODE_MIGRATE_TO: u16 = 256;
pub const NODE_NOFAILOVER: u16 = 512;

/// Flag names in CLUSTER NODES order.
const FLAG_NAMES: &[(u16, &str)] = &[
    (NODE_MYSELF, "myself"),
    (NODE_MASTER, "master"),
    (NODE_SLAVE, "slave"),
    (NODE_PFAIL, "fail?"),
    (NODE_FAIL, "fail"),
    (NODE_HANDSHAKE, "handshake"),
    (NODE_NOADDR, "noaddr"),
    (NODE_NOFAILOVER, "nofailover"),
];

pub const STATE_OK: u8 = 0;
pub const STATE_FAIL: u8 = 1;

/// The text form of a name.
pub fn name_str(n: &Name) -> &str {
    std::str::from_utf8(n).unwrap_or("????????????????????????????????????????")
}

/// A name from 40 bytes of text, if it is that long.
pub fn parse_name(s: &[u8]) -> Option<Name> {
    s.try_into().ok()
}

/// A fresh random node name.
pub fn random_name() -> Name {
    let hex = crate::util::clock::random_hex(40);
    let mut n = NULL_NAME;
    n.copy_from_slice(&hex.as_bytes()[..40]);
    n
}

#[inline]
pub fn bit(bitmap: &[u8; SLOT_BYTES], slot: usize) -> bool {
    bitmap[slot >> 3] & (1 << (slot & 7)) != 0
}
pub fn set_bit(bitmap: &mut [u8; SLOT_BYTES], slot: usize) {
    bitmap[slot >> 3] |= 1 << (slot & 7);
}
pub fn clear_bit(bitmap: &mut [u8; SLOT_BYTES], slot: usize) {
    bitmap[slot >> 3] &= !(1 << (slot & 7));
}

/// Ranges of set bits, in order.
pub fn ranges(bitmap: &[u8; SLOT_BYTES]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    // A word at a time: slots come in long runs, and nodes.conf is written (and CLUSTER NODES
    // built) for every SETSLOT, so whole words of 0s outside a run or 1s inside one are skipped
    // instead of testing 16384 bits per node.
    for (w, bytes) in bitmap.chunks_exact(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        let word = u64::from_le_bytes(word);
        if (start.is_none() && word == 0) || (start.is_some() && word == u64::MAX) {
            continue;
        }
        for b in 0..64 {
            let j = w * 64 + b;
            match (word & (1 << b) != 0, start) {
                (true, None) => start = Some(j),
                (false, Some(s)) => {
                    out.push((s, j - 1));
                    start = None;
                }
                _ => {}
            }
        }
    }
    if let Some(s) = start {
        out.push((s, SLOTS - 1));
    }
    out
}

/// Who serves each slot (clusterState.slots): a 2-byte entry per slot indexing a small table of
/// owner names, instead of 16384 inline 41-byte `Option<Name>` (672 KiB, more than the whole
/// keys-per-slot index of 100k keys: issue 19 allows the cluster 8 bytes per key over
/// standalone). An owner's entry lives while it owns a slot; at most 16384 owners, so an index
/// (plus one for "none") fits in u16.
#[derive(Debug)]
pub struct SlotOwners {
    /// Per slot: 0 for none, else 1 + the owner's index in `names`.
    of: Box<[u16; SLOTS]>,
    /// Owner names with the number of slots each owns (0: a free entry).
    names: Vec<(Name, u32)>,
    /// Name -> its index in `names`.
    index: HashMap<Name, u16>,
}

impl Default for SlotOwners {
    fn default() -> Self {
        SlotOwners { of: Box::new([0; SLOTS]), names: Vec::new(), index: HashMap::new() }
    }
}

impl SlotOwners {
    /// The owner of `slot`.
    #[inline]
    pub fn get(&self, slot: usize) -> Option<&Name> {
        let i = *self.of.get(slot)? as usize;
        (i != 0).then(|| &self.names[i - 1].0)
    }

    /// The per-slot entry of `name`, if it serves a slot (loops over slots then compare u16s).
    fn id(&self, name: &Name) -> Option<u16> {
        self.index.get(name).map(|&i| i + 1)
    }

    /// Makes `owner` serve `slot` (which nobody serves).
    fn set(&mut self, slot: usize, owner: &Name) {
        let i = match self.index.get(owner) {
            Some(&i) => i as usize,
            None => {
                let i = match self.names.iter().position(|(_, refs)| *refs == 0) {
                    Some(free) => {
                        self.names[free] = (*owner, 0);
                        free
                    }
                    None => {
                        self.names.push((*owner, 0));
                        self.names.len() - 1
                    }
                };
                self.index.insert(*owner, i as u16);
                i
            }
        };
        self.names[i].1 += 1;
        self.of[slot] = i as u16 + 1;
    }

    /// Makes `owner` serve each of `slots` (which nobody serves), its entry looked up once.
    fn set_many(&mut self, slots: &[usize], owner: &Name) {
        let Some((&first, rest)) = slots.split_first() else { return };
        self.set(first, owner);
        let id = self.of[first];
        for &j in rest {
            self.of[j] = id;
        }
        self.names[id as usize - 1].1 += rest.len() as u32;
    }

    /// Unassigns `slot`; its former owner.
    fn take(&mut self, slot: usize) -> Option<Name> {
        let i = std::mem::take(&mut self.of[slot]) as usize;
        if i == 0 {
            return None;
        }
        let (name, refs) = &mut self.names[i - 1];
        *refs -= 1;
        let name = *name;
        if *refs == 0 {
            self.index.remove(&name);
        }
        Some(name)
    }

    /// The slots `name` serves, in order.
    fn slots_of(&self, name: &Name) -> impl Iterator<Item = usize> + '_ {
        let id = self.id(name);
        self.of.iter().enumerate().filter(move |(_, &o)| Some(o) == id).map(|(j, _)| j)
    }

    /// Every slot's owner, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = Option<&Name>> + '_ {
        self.of.iter().map(|&i| (i != 0).then(|| &self.names[i as usize - 1].0))
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: Name,
    pub flags: u16,
    pub ctime: i64,
    pub config_epoch: u64,
    pub slots: Box<[u8; SLOT_BYTES]>,
    pub numslots: usize,
    pub replicas: Vec<Name>,
    pub replicaof: Option<Name>,
    pub ping_sent: i64,
    pub pong_received: i64,
    pub data_received: i64,
    pub fail_time: i64,
    pub voted_time: i64,
    pub repl_offset_time: i64,
    pub orphaned_time: i64,
    pub repl_offset: i64,
    pub ip: String,
    pub hostname: String,
    pub port: u16,
    pub pport: u16,
    pub cport: u16,
    /// Our outbound link to it, and its inbound link to us.
    pub link: Option<u64>,
    pub inbound_link: Option<u64>,
    /// Masters that reported it failing: (reporter, when).
    pub fail_reports: Vec<(Name, i64)>,
}

impl Node {
    /// The port a client is sent to. Under tls-cluster a node announces its TLS port and, beside
    /// it, its plaintext one (pport): clients on plain TCP get the latter when there is one
    /// (Redis's getNodeClientPort).
    pub fn client_port(&self, plaintext_client: bool) -> u16 {
        if plaintext_client && self.pport != 0 {
            self.pport
        } else {
            self.port
        }
    }

    pub fn new(name: Name, flags: u16, now: i64) -> Node {
        Node {
            name,
            flags,
            ctime: now,
            config_epoch: 0,
            slots: Box::new([0; SLOT_BYTES]),
            numslots: 0,
            replicas: Vec::new(),
            replicaof: None,
            ping_sent: 0,
            pong_received: 0,
            data_received: 0,
            fail_time: 0,
            voted_time: 0,
            repl_offset_time: 0,
            orphaned_time: 0,
            repl_offset: 0,
            ip: String::new(),
            hostname: String::new(),
            port: 0,
            pport: 0,
            cport: 0,
            link: None,
            inbound_link: None,
            fail_reports: Vec::new(),
        }
    }
    pub fn is_master(&self) -> bool {
        self.flags & NODE_MASTER != 0
    }
    pub fn is_replica(&self) -> bool {
        self.flags & NODE_SLAVE != 0
    }
    pub fn in_handshake(&self) -> bool {
        self.flags & NODE_HANDSHAKE != 0
    }
    pub fn failed(&self) -> bool {
        self.flags & NODE_FAIL != 0
    }
    pub fn timed_out(&self) -> bool {
        self.flags & NODE_PFAIL != 0
    }
    pub fn has_addr(&self) -> bool {
        self.flags & NODE_NOADDR == 0
    }

    /// Flags as CLUSTER NODES lists them.
    pub fn flags_text(&self) -> String {
        let names: Vec<&str> = FLAG_NAMES.iter().filter(|(f, _)| self.flags & f != 0).map(|(_, n)| *n).collect();
        if names.is_empty() {
            "noflags".into()
        } else {
            names.join(",")
        }
    }
}

/// A bus connection as the state knows it: the socket itself lives in `server::cluster_bus`,
/// which drains `tx`.
#[derive(Debug)]
pub struct Link {
    pub id: u64,
    pub node: Option<Name>,
    pub inbound: bool,
    pub ctime: i64,
    /// Encoded messages; one broadcast is encoded once and shared by every link's queue.
    pub tx: tokio::sync::mpsc::UnboundedSender<bytes::Bytes>,
    /// Whether the outbound connection is established (messages queue meanwhile).
    pub connected: bool,
    /// Bytes queued on the channel and not yet written (CLUSTER LINKS send-buffer-*).
    pub queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    pub events: String,
}

/// What the bus side is asked to do.
#[derive(Debug)]
pub enum BusRequest {
    /// Open an outbound link to `ip:cport` whose messages come from `rx`.
    Connect {
        link: u64,
        ip: String,
        port: u16,
        rx: tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>,
        queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    },
}

/// Manual failover state (CLUSTER FAILOVER).
#[derive(Debug, Default, Clone)]
pub struct ManualFailover {
    /// When it times out (0: none running).
    pub end: i64,
    pub can_start: bool,
    /// On the master: the replica asking.
    pub replica: Option<Name>,
    /// On the replica: the master's offset once it paused (-1: unknown yet).
    pub master_offset: i64,
}

#[derive(Debug)]
pub struct ClusterState {
    pub myself: Name,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
    pub state: u8,
    pub size: usize,
    pub nodes: HashMap<Name, Node>,
    /// Forgotten names (CLUSTER FORGET) and until when they stay ignored.
    pub blacklist: HashMap<Name, i64>,
    /// Who serves each slot: read through `owner`, changed through add_slot / del_slot.
    slots: SlotOwners,
    /// The slots `myself` owns, as a bitmap (2 KiB) beside `slots` (32 KiB): the command path
    /// asks "is this key's slot mine" for every command, and a random entry of `slots` is
    /// more likely a cache miss. Kept by add_slot / del_slot / set_myself.
    my_slots: Box<[u8; SLOT_BYTES]>,
    pub migrating: BTreeMap<usize, Name>,
    pub importing: BTreeMap<usize, Name>,
    pub links: HashMap<u64, Link>,
    pub next_link_id: u64,
    pub bus: Option<tokio::sync::mpsc::UnboundedSender<BusRequest>>,
    pub stats_sent: [u64; msg::TYPE_COUNT],
    pub stats_received: [u64; msg::TYPE_COUNT],
    pub stats_pfail_nodes: usize,
    pub links_buffer_limit_exceeded: u64,
    /// Election state of a replica (clusterState failover_auth_*).
    pub failover_auth_time: i64,
    pub failover_auth_count: usize,
    pub failover_auth_sent: bool,
    pub failover_auth_rank: usize,
    pub failover_auth_epoch: u64,
    pub cant_failover_reason: u8,
    pub lastlog_time: i64,
    pub mf: ManualFailover,
    /// Work left for the executor's next pass (clusterBeforeSleep): save, update state, fsync.
    pub todo_save: bool,
    /// The epochs (current, my config epoch, last vote) of the last save handed to the writer
    /// fsynced: a save fsyncs only when one changed, as Redis fsyncs nodes.conf only for epoch
    /// changes (CLUSTER_TODO_FSYNC_CONFIG).
    pub synced_epochs: (u64, u64, u64),
    /// Slots this node (or its master) stopped serving since the executor's last pass: their
    /// shard channels' subscribers are to be unsubscribed (Redis's removeChannelsInSlot).
    pub lost_slots: Vec<u16>,
    pub todo_update_state: bool,
    pub todo_handle_failover: bool,
    pub among_minority_time: i64,
    pub first_update_done: bool,
    pub startup_ms: i64,
    pub cron_iteration: u64,
    /// This node's own bus port, as it listens (cluster-port or port + 10000).
    pub bus_port: u16,
    /// DEBUG DROP-CLUSTER-PACKET-FILTER: received messages of this type are dropped (-1: none).
    pub drop_packet_filter: i64,
}

impl ClusterState {
    pub fn new(myself: Name, now: i64) -> ClusterState {
        let mut me = Node::new(myself, NODE_MYSELF | NODE_MASTER, now);
        me.ctime = now;
        let mut nodes = HashMap::new();
        nodes.insert(myself, me);
        ClusterState {
            myself,
            current_epoch: 0,
            last_vote_epoch: 0,
            state: STATE_FAIL,
            size: 1,
            nodes,
            blacklist: HashMap::new(),
            slots: SlotOwners::default(),
            my_slots: Box::new([0; SLOT_BYTES]),
            migrating: BTreeMap::new(),
            importing: BTreeMap::new(),
            links: HashMap::new(),
            next_link_id: 1,
            bus: None,
            stats_sent: [0; msg::TYPE_COUNT],
            stats_received: [0; msg::TYPE_COUNT],
            stats_pfail_nodes: 0,
            links_buffer_limit_exceeded: 0,
            failover_auth_time: 0,
            failover_auth_count: 0,
            failover_auth_sent: false,
            failover_auth_rank: 0,
            failover_auth_epoch: 0,
            cant_failover_reason: 0,
            lastlog_time: 0,
            mf: ManualFailover::default(),
            todo_save: false,
            synced_epochs: (0, 0, 0),
            lost_slots: Vec::new(),
            todo_update_state: false,
            todo_handle_failover: false,
            among_minority_time: 0,
            first_update_done: false,
            startup_ms: now,
            cron_iteration: 0,
            bus_port: 0,
            drop_packet_filter: -1,
        }
    }

    pub fn me(&self) -> &Node {
        &self.nodes[&self.myself]
    }
    pub fn me_mut(&mut self) -> &mut Node {
        self.nodes.get_mut(&self.myself).expect("myself is always known")
    }
    pub fn node(&self, name: &Name) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// The master of this node's shard: itself, or the master it replicates.
    pub fn my_master(&self) -> Name {
        let me = self.me();
        if me.is_replica() {
            me.replicaof.unwrap_or(self.myself)
        } else {
            self.myself
        }
    }

    /// A node's epoch as CLUSTER NODES shows it: its own for masters, its master's otherwise.
    pub fn node_epoch(&self, n: &Node) -> u64 {
        if n.is_replica() {
            n.replicaof.and_then(|m| self.nodes.get(&m)).map_or(0, |m| m.config_epoch)
        } else {
            n.config_epoch
        }
    }

    /// Who serves `slot` (a copy of the name).
    #[inline]
    pub fn owner(&self, slot: usize) -> Option<Name> {
        self.slots.get(slot).copied()
    }

    /// Who serves `slot`, borrowed.
    #[inline]
    pub fn owner_ref(&self, slot: usize) -> Option<&Name> {
        self.slots.get(slot)
    }

    /// Every slot's owner, in slot order.
    pub fn owners(&self) -> impl Iterator<Item = Option<&Name>> + '_ {
        self.slots.iter()
    }

    /// Assigns `slot` to `node` (clusterAddSlot); false when it is taken.
    pub fn add_slot(&mut self, node: &Name, slot: usize) -> bool {
        if slot >= SLOTS || self.slots.get(slot).is_some() {
            return false;
        }
        let Some(n) = self.nodes.get_mut(node) else { return false };
        if !bit(&n.slots, slot) {
            set_bit(&mut n.slots, slot);
            n.numslots += 1;
        }
        self.slots.set(slot, node);
        if *node == self.myself {
            set_bit(&mut self.my_slots, slot);
        }
        true
    }

    /// Whether `myself` owns `slot` (`slots[slot] == Some(myself)`, without touching `slots`).
    #[inline]
    pub fn slot_is_mine(&self, slot: usize) -> bool {
        bit(&self.my_slots, slot)
    }

    /// The slots of `bitmap` that `myself` owns, a bitmap byte at a time (a PING's claim is
    /// checked against ours on every message; most bytes have nothing in common).
    pub fn mine_among(&self, bitmap: &[u8; SLOT_BYTES]) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, (&a, &b)) in bitmap.iter().zip(self.my_slots.iter()).enumerate() {
            let both = a & b;
            if both != 0 {
                out.extend((0..8).filter(|k| both & (1 << k) != 0).map(|k| i * 8 + k));
            }
        }
        out
    }

    /// Changes `myself` (a hard CLUSTER RESET's new name), keeping `my_slots` in step.
    pub fn set_myself(&mut self, name: Name) {
        self.myself = name;
        *self.my_slots = [0; SLOT_BYTES];
        for j in self.slots.slots_of(&name) {
            set_bit(&mut self.my_slots, j);
        }
    }

    /// Unassigns `slot` (clusterDelSlot); false when nobody served it.
    pub fn del_slot(&mut self, slot: usize) -> bool {
        if slot >= SLOTS {
            return false;
        }
        let Some(owner) = self.slots.take(slot) else { return false };
        clear_bit(&mut self.my_slots, slot);
        // The nodes serving the slot were its owner and the owner's replicas: for them the
        // slot's shard channels are gone (clusterDelSlot's removeChannelsInSlot).
        let me = self.nodes.get(&self.myself);
        if owner == self.myself || me.is_some_and(|m| m.replicaof == Some(owner)) {
            self.lost_slots.push(slot as u16);
        }
        if let Some(n) = self.nodes.get_mut(&owner) {
            if bit(&n.slots, slot) {
                clear_bit(&mut n.slots, slot);
                n.numslots -= 1;
            }
        }
        true
    }

    /// The slots `node` serves, in order.
    pub fn slots_of(&self, node: &Name) -> Vec<usize> {
        self.slots.slots_of(node).collect()
    }

    /// Gives each of `slots` to `node` (clusterDelSlot then clusterAddSlot for each, as a
    /// failover's promotion and the UPDATE or PING that tells the others do), with each node
    /// looked up once per run of slots instead of three hashed 40-byte lookups per slot: moving
    /// a third of 16384 slots in one bus message took about a millisecond of the executor.
    pub fn move_slots(&mut self, slots: &[usize], node: &Name) {
        let my_master = self.nodes.get(&self.myself).and_then(|m| m.replicaof);
        // Former owners with the slots each lost (a few owners, in long runs).
        let mut lost: Vec<(Name, Vec<usize>)> = Vec::new();
        for &j in slots {
            if j >= SLOTS {
                continue;
            }
            let Some(owner) = self.slots.take(j) else { continue };
            clear_bit(&mut self.my_slots, j);
            if owner == self.myself || Some(owner) == my_master {
                self.lost_slots.push(j as u16);
            }
            match lost.iter_mut().rev().find(|(o, _)| *o == owner) {
                Some((_, list)) => list.push(j),
                None => lost.push((owner, vec![j])),
            }
        }
        for (owner, list) in lost {
            if let Some(n) = self.nodes.get_mut(&owner) {
                for j in list {
                    if bit(&n.slots, j) {
                        clear_bit(&mut n.slots, j);
                        n.numslots -= 1;
                    }
                }
            }
        }
        let Some(n) = self.nodes.get_mut(node) else { return };
        let slots: Vec<usize> = slots.iter().copied().filter(|&j| j < SLOTS).collect();
        for &j in &slots {
            if !bit(&n.slots, j) {
                set_bit(&mut n.slots, j);
                n.numslots += 1;
            }
        }
        if *node == self.myself {
            for &j in &slots {
                set_bit(&mut self.my_slots, j);
            }
        }
        self.slots.set_many(&slots, node);
    }

    /// Unassigns every slot of `node`; the number removed.
    pub fn del_node_slots(&mut self, node: &Name) -> usize {
        let mine: Vec<usize> = self.slots.slots_of(node).collect();
        for &j in &mine {
            self.del_slot(j);
        }
        mine.len()
    }

    /// Links `replica` under `master` (clusterNodeAddSlave); the replica's own field is the
    /// caller's.
    pub fn add_replica(&mut self, master: &Name, replica: &Name) {
        if let Some(m) = self.nodes.get_mut(master) {
            if !m.replicas.contains(replica) {
                m.replicas.push(*replica);
                m.replicas.sort();
            }
            if m.replicas.len() == 1 || !m.replicas.is_empty() {
                m.flags |= NODE_MIGRATE_TO;
            }
        }
    }

    pub fn remove_replica(&mut self, master: &Name, replica: &Name) {
        if let Some(m) = self.nodes.get_mut(master) {
            m.replicas.retain(|r| r != replica);
            if m.replicas.is_empty() {
                m.flags &= !NODE_MIGRATE_TO;
            }
        }
    }

    /// Removes `name` from the table (clusterDelNode): its slots, importing/migrating marks, the
    /// failure reports it made, its place under its master. Returns the links to close.
    pub fn del_node(&mut self, name: &Name) -> Vec<u64> {
        self.del_node_slots(name);
        self.importing.retain(|_, n| n != name);
        self.migrating.retain(|_, n| n != name);
        for n in self.nodes.values_mut() {
            n.fail_reports.retain(|(r, _)| r != name);
        }
        let Some(node) = self.nodes.remove(name) else { return Vec::new() };
        if let Some(m) = node.replicaof {
            self.remove_replica(&m, name);
        }
        for r in &node.replicas {
            if let Some(rn) = self.nodes.get_mut(r) {
                if rn.replicaof == Some(*name) {
                    rn.replicaof = None;
                }
            }
        }
        node.link.into_iter().chain(node.inbound_link).collect()
    }

    /// Masters serving at least one slot (cluster_size).
    pub fn masters_with_slots(&self) -> usize {
        self.nodes.values().filter(|n| n.is_master() && n.numslots > 0).count()
    }

    /// Renames a node met in handshake to the name it answered with (clusterRenameNode).
    pub fn rename(&mut self, old: &Name, new: Name) {
        let Some(mut node) = self.nodes.remove(old) else { return };
        node.name = new;
        for link in [node.link, node.inbound_link].into_iter().flatten() {
            if let Some(l) = self.links.get_mut(&link) {
                l.node = Some(new);
            }
        }
        self.nodes.insert(new, node);
    }

    /// Whether a node of this address is in handshake already.
    pub fn handshake_in_progress(&self, ip: &str, port: u16, cport: u16) -> bool {
        self.nodes
            .values()
            .any(|n| n.in_handshake() && n.ip.eq_ignore_ascii_case(ip) && n.port == port && n.cport == cport)
    }

    /// (currentEpoch, myself's configEpoch, lastVoteEpoch): what a save fsyncs for.
    pub fn epochs(&self) -> (u64, u64, u64) {
        (self.current_epoch, self.me().config_epoch, self.last_vote_epoch)
    }

    /// One CLUSTER NODES line (also a nodes.conf line), without the newline; `plaintext_client`:
    /// see `Node::client_port` (false for nodes.conf).
    pub fn node_line(&self, n: &Node, with_hostname: bool, plaintext_client: bool) -> String {
        let mut s = format!("{} {}:{}@{}", name_str(&n.name), n.ip, n.client_port(plaintext_client), n.cport);
        if with_hostname && !n.hostname.is_empty() {
            s.push(',');
            s.push_str(&n.hostname);
        }
        s.push(' ');
        s.push_str(&n.flags_text());
        match n.replicaof {
            Some(m) if n.is_replica() => {
                s.push(' ');
                s.push_str(name_str(&m));
            }
            _ => s.push_str(" -"),
        }
        let connected =
            n.flags & NODE_MYSELF != 0 || n.link.is_some_and(|l| self.links.get(&l).is_some_and(|l| l.connected));
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = write!(
            s,
            " {} {} {} {}",
            n.ping_sent,
            n.pong_received,
            self.node_epoch(n),
            if connected { "connected" } else { "disconnected" }
        );
        if n.is_master() && n.numslots > 0 {
            for (a, b) in ranges(&n.slots) {
                let _ = if a == b { write!(s, " {a}") } else { write!(s, " {a}-{b}") };
            }
        }
        if n.flags & NODE_MYSELF != 0 {
            for (slot, to) in &self.migrating {
                let _ = write!(s, " [{slot}->-{}]", name_str(to));
            }
            for (slot, from) in &self.importing {
                let _ = write!(s, " [{slot}-<-{}]", name_str(from));
            }
        }
        s
    }

    /// CLUSTER NODES: every node, one line each (order: the table's, as Redis's dict).
    pub fn nodes_text(&self, include_handshake: bool, plaintext_client: bool) -> String {
        let mut names: Vec<&Name> = self.nodes.keys().collect();
        names.sort();
        let mut out = String::new();
        for name in names {
            let n = &self.nodes[name];
            if !include_handshake && n.in_handshake() {
                continue;
            }
            out.push_str(&self.node_line(n, true, plaintext_client));
            out.push('\n');
        }
        out
    }

    /// nodes.conf's content: the nodes (no handshake ones) and the epochs.
    pub fn config_text(&self) -> String {
        let mut out = self.nodes_text(false, false);
        out.push_str(&format!("vars currentEpoch {} lastVoteEpoch {}\n", self.current_epoch, self.last_vote_epoch));
        out
    }
}

/// Parses nodes.conf (Redis's clusterLoadConfig). Err carries the log line Redis writes for a
/// file it cannot take.
pub fn load_config(text: &str, now: i64) -> Result<ClusterState, String> {
    let mut myself: Option<Name> = None;
    let mut nodes: HashMap<Name, Node> = HashMap::new();
    let mut slots: Vec<Option<Name>> = vec![None; SLOTS];
    let mut importing = BTreeMap::new();
    let mut migrating = BTreeMap::new();
    let mut current_epoch = 0u64;
    let mut last_vote_epoch = 0u64;
    let bad = |line: &str| format!("Unrecoverable error: corrupted cluster config file \"{line}\".");
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let argv: Vec<&str> = line.split(' ').filter(|s| !s.is_empty()).collect();
        if argv[0] == "vars" {
            let mut i = 1;
            while i + 1 < argv.len() {
                let v: u64 = argv[i + 1].parse().map_err(|_| bad(line))?;
                match argv[i] {
                    "currentEpoch" => current_epoch = v,
                    "lastVoteEpoch" => last_vote_epoch = v,
                    _ => {}
                }
                i += 2;
            }
            continue;
        }
        if argv.len() < 8 {
            return Err(bad(line));
        }
        let name = parse_name(argv[0].as_bytes()).ok_or_else(|| bad(line))?;
        let node = nodes.entry(name).or_insert_with(|| Node::new(name, 0, now));
        // ip:port@cport[,hostname]
        let (addr, hostname) = argv[1].split_once(',').unwrap_or((argv[1], ""));
        let (hostport, cport) = addr.split_once('@').ok_or_else(|| bad(line))?;
        let colon = hostport.rfind(':').ok_or_else(|| bad(line))?;
        node.ip = hostport[..colon].to_string();
        node.port = hostport[colon + 1..].parse().map_err(|_| bad(line))?;
        node.cport = cport.parse().map_err(|_| bad(line))?;
        node.hostname = hostname.to_string();
        for f in argv[2].split(',') {
            match f {
                "myself" => {
                    node.flags |= NODE_MYSELF;
                    myself = Some(name);
                }
                "master" => node.flags |= NODE_MASTER,
                "slave" => node.flags |= NODE_SLAVE,
                "fail?" => node.flags |= NODE_PFAIL,
                "fail" => {
                    node.flags |= NODE_FAIL;
                    node.fail_time = now;
                }
                "handshake" => node.flags |= NODE_HANDSHAKE,
                "noaddr" => node.flags |= NODE_NOADDR,
                "nofailover" => node.flags |= NODE_NOFAILOVER,
                "noflags" => {}
                _ => return Err(bad(line)),
            }
        }
        if argv[3] != "-" {
            let m = parse_name(argv[3].as_bytes()).ok_or_else(|| bad(line))?;
            node.replicaof = Some(m);
        }
        // Fresh times: the node is pinged soon and reports come fresh.
        node.ping_sent = if argv[4].parse::<i64>().unwrap_or(0) != 0 { now } else { 0 };
        node.pong_received = if argv[5].parse::<i64>().unwrap_or(0) != 0 { now } else { 0 };
        node.config_epoch = argv[6].parse().map_err(|_| bad(line))?;
        for arg in &argv[8..] {
            if let Some(inner) = arg.strip_prefix('[') {
                let inner = inner.strip_suffix(']').ok_or_else(|| bad(line))?;
                if let Some((slot, to)) = inner.split_once("->-") {
                    let s: usize = slot.parse().map_err(|_| bad(line))?;
                    let t = parse_name(to.as_bytes()).ok_or_else(|| bad(line))?;
                    if s < SLOTS {
                        migrating.insert(s, t);
                    }
                } else if let Some((slot, from)) = inner.split_once("-<-") {
                    let s: usize = slot.parse().map_err(|_| bad(line))?;
                    let f = parse_name(from.as_bytes()).ok_or_else(|| bad(line))?;
                    if s < SLOTS {
                        importing.insert(s, f);
                    }
                } else {
                    return Err(bad(line));
                }
                continue;
            }
            let (a, b) = match arg.split_once('-') {
                Some((a, b)) => (a.parse::<usize>(), b.parse::<usize>()),
                None => (arg.parse::<usize>(), arg.parse::<usize>()),
            };
            let (Ok(a), Ok(b)) = (a, b) else { return Err(bad(line)) };
            if a > b || b >= SLOTS {
                return Err(bad(line));
            }
            for owner in &mut slots[a..=b] {
                *owner = Some(name);
            }
        }
    }
    let Some(me) = myself else { return Err("Unrecoverable error: corrupted cluster config file.".into()) };
    let mut st = ClusterState::new(me, now);
    st.nodes = nodes;
    st.current_epoch = current_epoch;
    st.last_vote_epoch = last_vote_epoch;
    st.importing = importing;
    st.migrating = migrating;
    // Replica lists from the replicas' fields.
    let pairs: Vec<(Name, Name)> = st.nodes.values().filter_map(|n| n.replicaof.map(|m| (m, n.name))).collect();
    for (m, r) in pairs {
        st.nodes.entry(m).or_insert_with(|| Node::new(m, NODE_MASTER | NODE_NOADDR, now));
        st.add_replica(&m, &r);
    }
    for (slot, owner) in slots.into_iter().enumerate() {
        if let Some(o) = owner {
            st.add_slot(&o, slot);
        }
    }
    // The epoch is at least every config epoch seen.
    let max_epoch = st.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0);
    st.current_epoch = st.current_epoch.max(max_epoch);
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ranges` (word at a time) lists the same runs as a bit-by-bit walk, for bitmaps of long
    /// runs, single bits, runs ending on word boundaries and the last slot, and random ones.
    #[test]
    fn ranges_match_a_bit_walk() {
        fn walk(b: &[u8; SLOT_BYTES]) -> Vec<(usize, usize)> {
            let mut out: Vec<(usize, usize)> = Vec::new();
            for j in (0..SLOTS).filter(|&j| bit(b, j)) {
                match out.last_mut() {
                    Some((_, e)) if *e + 1 == j => *e = j,
                    _ => out.push((j, j)),
                }
            }
            out
        }
        let mut rng = fastrand::Rng::with_seed(19);
        let mut cases: Vec<Vec<(usize, usize)>> = vec![
            vec![],
            vec![(0, SLOTS - 1)],
            vec![(0, 63), (128, 191), (SLOTS - 1, SLOTS - 1)],
            vec![(5, 5), (63, 64), (4000, 9000), (16320, 16383)],
        ];
        for _ in 0..200 {
            let mut c = Vec::new();
            let mut at = rng.usize(..200);
            while at < SLOTS {
                let len = if rng.bool() { 3 } else { 3000 };
                let end = (at + rng.usize(..len)).min(SLOTS - 1);
                c.push((at, end));
                let gap = if rng.bool() { 3 } else { 500 };
                at = end + 2 + rng.usize(..gap);
            }
            cases.push(c);
        }
        for c in cases {
            let mut b = [0u8; SLOT_BYTES];
            for &(a, e) in &c {
                (a..=e).for_each(|j| set_bit(&mut b, j));
            }
            assert_eq!(ranges(&b), walk(&b));
            assert_eq!(ranges(&b), c);
        }
    }

    /// Every view of slot ownership agrees: the owner table, each node's bitmap and count, the
    /// `my_slots` bitmap and the lost-slot list.
    fn check_owners(st: &ClusterState) {
        for j in 0..SLOTS {
            let owner = st.owner(j);
            assert_eq!(st.slot_is_mine(j), owner == Some(st.myself), "slot {j}");
            for n in st.nodes.values() {
                assert_eq!(bit(&n.slots, j), owner == Some(n.name), "slot {j}");
            }
        }
        for n in st.nodes.values() {
            assert_eq!(n.numslots, st.slots_of(&n.name).len());
        }
    }

    /// A node's slots handed over in one go (a failover's promotion, an UPDATE) leave the same
    /// state as slot-by-slot deletes and adds, owner entries are reused once freed, and
    /// unknown targets leave the slots unassigned, as clusterAddSlot does.
    #[test]
    fn moving_slots_matches_slot_by_slot() {
        let names: Vec<Name> = (0..4).map(|_| random_name()).collect();
        let build = || {
            let mut st = ClusterState::new(names[0], 1);
            for n in &names[1..] {
                st.nodes.insert(*n, Node::new(*n, NODE_MASTER, 1));
            }
            for j in 0..SLOTS {
                st.add_slot(&names[j * 3 / SLOTS], j);
            }
            st
        };
        let (mut bulk, mut single) = (build(), build());
        check_owners(&bulk);
        // The first master's slots and a few of the second's go to the fourth node.
        let mut moving = bulk.slots_of(&names[0]);
        moving.extend([6000, 6001, 9000]);
        bulk.move_slots(&moving, &names[3]);
        for &j in &moving {
            single.del_slot(j);
            single.add_slot(&names[3], j);
        }
        check_owners(&bulk);
        assert_eq!(bulk.owners().collect::<Vec<_>>(), single.owners().collect::<Vec<_>>());
        assert_eq!(bulk.lost_slots, single.lost_slots);
        assert_eq!(bulk.me().numslots, 0);
        assert_eq!(bulk.node(&names[3]).map(|n| n.numslots), Some(moving.len()));
        // Owner entries: the first master's was freed and is reused by the next new owner.
        assert_eq!(bulk.slots.names.iter().filter(|(_, refs)| *refs > 0).count(), 3);
        bulk.move_slots(&[1, 2], &names[0]);
        assert_eq!(bulk.slots.names.len(), 4);
        check_owners(&bulk);
        // An unknown node gets nothing: the slots end unassigned.
        let ghost = random_name();
        bulk.move_slots(&[1, 7000], &ghost);
        assert_eq!((bulk.owner(1), bulk.owner(7000)), (None, None));
        check_owners(&bulk);
        // Forgetting a node frees its slots and its entry.
        bulk.del_node(&names[3]);
        assert!(bulk.owners().flatten().all(|o| *o != names[3]));
        check_owners(&bulk);
    }

    #[test]
    fn config_round_trips() {
        let text = "fe8107ac0852d83ba0fce802298f26d35a3dcf1c 127.0.0.1:20002@30002 master - 0 1796429929988 2 connected 5-10\n\
                    e37a9c27217bf22a6fcf09b634e73bf58d092f30 127.0.0.1:20001@30001 myself,master - 0 0 1 connected 0-4 11 [12->-fe8107ac0852d83ba0fce802298f26d35a3dcf1c]\n\
                    vars currentEpoch 3 lastVoteEpoch 1\n";
        let st = load_config(text, 1).expect("loads");
        assert_eq!(name_str(&st.myself), "e37a9c27217bf22a6fcf09b634e73bf58d092f30");
        assert_eq!(st.current_epoch, 3);
        assert_eq!(st.me().numslots, 6);
        let line = st.node_line(st.me(), true, false);
        assert_eq!(
            line,
            "e37a9c27217bf22a6fcf09b634e73bf58d092f30 127.0.0.1:20001@30001 myself,master - 0 0 1 disconnected 0-4 11 [12->-fe8107ac0852d83ba0fce802298f26d35a3dcf1c]".replace(" disconnected", " connected")
        );
        assert!(load_config("garbage line\n", 1).is_err());
    }
}
