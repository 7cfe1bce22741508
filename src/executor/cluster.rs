//! The cluster protocol as the executor runs it (Redis 7.0's cluster.c minus the sockets): what
//! each bus message does to the cluster state, the cron's pings, failure detection and
//! replica elections, the slots configuration (config epochs, UPDATE), and what nodes.conf
//! holds (its writer thread, and what waits for a save, are `nodes_conf`). The state and codec
//! are `crate::cluster`; the sockets are `server::cluster_bus`, which hands every received
//! frame here (`on_frames`) and drains each link's channel. Everything runs on the executor,
//! between commands: a message costs microseconds, so gossip never holds a client for long.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use crate::cluster::msg::{self, Body, Ext, Gossip, Header, Message};
use crate::cluster::*;
use crate::util::clock::unix_ms;

use super::State;

/// Redis's CLUSTER_MF_TIMEOUT and its pause multiplier.
const MF_TIMEOUT: i64 = 5000;
/// Redis's CLUSTER_BLACKLIST_TTL (seconds): a forgotten node is not re-added meanwhile.
pub const BLACKLIST_TTL_S: i64 = 60;

pub fn enabled(st: &State) -> bool {
    st.cluster.is_some()
}

fn cfg_i64(st: &State, name: &str, default: i64) -> i64 {
    st.config.other.get(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}
fn cfg_bool(st: &State, name: &str, default: bool) -> bool {
    st.config.other.get(name).map_or(default, |v| v == "yes")
}
fn cfg_str<'a>(st: &'a State, name: &str) -> &'a str {
    st.config.other.get(name).map_or("", String::as_str)
}

pub fn node_timeout(st: &State) -> i64 {
    cfg_i64(st, "cluster-node-timeout", 15000).max(1)
}
pub fn require_full_coverage(st: &State) -> bool {
    cfg_bool(st, "cluster-require-full-coverage", true)
}
pub fn allow_reads_when_down(st: &State) -> bool {
    cfg_bool(st, "cluster-allow-reads-when-down", false)
}
fn announce_ip(st: &State) -> String {
    cfg_str(st, "cluster-announce-ip").to_string()
}

/// Whether the cluster speaks TLS (tls-cluster yes): its bus, and the client port nodes announce.
pub fn tls_cluster(config: &crate::config::Config) -> bool {
    config.other.get("tls-cluster").is_some_and(|v| v == "yes")
}

/// Whether a client is sent to plaintext ports (`Node::client_port`): one on plain TCP while the
/// cluster announces TLS ones.
pub fn plaintext_client(st: &State, client_tls: bool) -> bool {
    !client_tls && tls_cluster(&st.config)
}

fn config_port(config: &crate::config::Config, name: &str) -> u16 {
    config.other.get(name).and_then(|v| v.parse::<u16>().ok()).unwrap_or(0)
}

/// The client port the cluster knows this node by: the TLS port under tls-cluster.
fn base_port(config: &crate::config::Config) -> u16 {
    if tls_cluster(config) {
        config_port(config, "tls-port")
    } else {
        config.port
    }
}

/// The bus port this node listens on: cluster-port, or the client port plus 10000.
pub fn bus_port(config: &crate::config::Config) -> u16 {
    match config_port(config, "cluster-port") {
        0 => base_port(config).wrapping_add(10000),
        p => p,
    }
}

/// What this node announces (Redis's deriveAnnouncedPorts): the client port, the plaintext port
/// beside a TLS one (0 when the cluster is not TLS), and the bus port; each overridden by its
/// cluster-announce-* directive.
fn announced_ports(st: &State) -> (u16, u16, u16) {
    let config = &st.config;
    let announce = |name| config_port(config, name);
    let (mut port, mut pport) = (base_port(config), 0);
    if tls_cluster(config) {
        pport = config.port;
        if announce("cluster-announce-tls-port") != 0 {
            port = announce("cluster-announce-tls-port");
        }
        if announce("cluster-announce-port") != 0 {
            pport = announce("cluster-announce-port");
        }
    } else if announce("cluster-announce-port") != 0 {
        port = announce("cluster-announce-port");
    }
    let cport = match announce("cluster-announce-bus-port") {
        0 => bus_port(config),
        p => p,
    };
    (port, pport, cport)
}

fn cl(st: &mut State) -> &mut ClusterState {
    st.cluster.as_mut().expect("cluster mode")
}

/// Loads nodes.conf or starts a new identity (clusterInit). Err: the reason to refuse to start.
pub fn init(st: &mut State) -> Result<(), String> {
    if st.config.other.get("cluster-enabled").is_none_or(|v| v != "yes") {
        return Ok(());
    }
    let now = unix_ms();
    let path = config_path(st);
    let mut cluster = match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => {
            let c = load_config(&text, now)?;
            tracing::info!("Node configuration loaded, I'm still {}", name_str(&c.myself));
            c
        }
        _ => {
            let c = ClusterState::new(random_name(), now);
            tracing::info!("No cluster configuration found, I'm {}", name_str(&c.myself));
            c
        }
    };
    cluster.bus_port = bus_port(&st.config);
    cluster.startup_ms = now;
    st.cluster = Some(Box::new(cluster));
    update_myself_announced(st);
    // A replica from nodes.conf follows its master from the start.
    if let Some(m) = st.cluster.as_ref().and_then(|c| if c.me().is_replica() { c.me().replicaof } else { None }) {
        follow_master(st, &m);
    }
    save_config_sync(st)?;
    Ok(())
}

fn config_path(st: &State) -> String {
    let file = st.config.other.get("cluster-config-file").cloned().unwrap_or_else(|| "nodes.conf".into());
    file
}

/// Myself's announced address, ports and hostname, from the configuration (also after CONFIG
/// SET).
pub fn update_myself_announced(st: &mut State) {
    let ip = announce_ip(st);
    let (port, pport, cport) = announced_ports(st);
    let hostname = cfg_str(st, "cluster-announce-hostname").to_string();
    let nofailover = cfg_bool(st, "cluster-replica-no-failover", false);
    let c = cl(st);
    let me = c.me_mut();
    let before = (me.ip.clone(), me.port, me.cport, me.hostname.clone(), me.flags);
    if !ip.is_empty() {
        me.ip = ip;
    }
    me.port = port;
    me.pport = pport;
    me.cport = cport;
    me.hostname = hostname;
    if nofailover {
        me.flags |= NODE_NOFAILOVER;
    } else {
        me.flags &= !NODE_NOFAILOVER;
    }
    if before != (me.ip.clone(), me.port, me.cport, me.hostname.clone(), me.flags) {
        c.todo_save = true;
    }
}

/// Saves nodes.conf without waiting (the bus and the cron): the writer thread writes it, fsynced
/// when an epoch changed since the last fsynced save, as Redis fsyncs only for epochs
/// (CLUSTER_TODO_FSYNC_CONFIG); such a save holds bus output until it is on disk (see
/// `nodes_conf`).
pub fn save_config(st: &mut State) {
    if let Some(c) = st.cluster.as_mut() {
        c.todo_save = false;
    }
    post_save(st);
}

fn post_save(st: &mut State) {
    post_save_as(st, false);
}

/// `fsync`: fsynced and holding bus output whatever the epochs.
fn post_save_as(st: &mut State, fsync: bool) {
    let Some(job) = conf_job(st, fsync) else { return };
    let Some(w) = st.cluster_conf.clone() else { return };
    let hold = job.fsync;
    w.post(job, hold);
}

/// Saves nodes.conf, fsynced, and returns once it is on disk (CLUSTER SAVECONFIG, startup): its
/// caller reports the outcome.
pub fn save_config_sync(st: &mut State) -> Result<(), String> {
    if let Some(c) = st.cluster.as_mut() {
        c.todo_save = false;
    }
    let Some(job) = conf_job(st, true) else { return Ok(()) };
    let w = st.cluster_conf.get_or_insert_with(super::nodes_conf::ConfWriter::start).clone();
    w.write_and_wait(job)
}

/// The save of the current state; `fsync`: whatever the epochs.
fn conf_job(st: &mut State, fsync: bool) -> Option<super::nodes_conf::Job> {
    let path = config_path(st);
    let c = st.cluster.as_mut()?;
    let epochs = c.epochs();
    let fsync = fsync || epochs != c.synced_epochs;
    c.synced_epochs = epochs;
    Some(super::nodes_conf::Job { path, text: c.config_text(), fsync })
}

/// Waits for the config writer's saves to be written (shutdown).
pub fn flush_config(st: &State) {
    if let Some(w) = &st.cluster_conf {
        w.flush();
    }
}

/// The config writer, for the bus links to wait on (`ConfWriter::output_ready`).
pub fn conf_writer(st: &State) -> Option<Arc<super::nodes_conf::ConfWriter>> {
    st.cluster_conf.clone()
}

/// `before_sleep` for a client's CLUSTER command: its reply waits for the saves that hold bus
/// output (an epoch change, a takeover), as Redis replies after beforeSleep's fsync; other saves
/// are not waited for (see `nodes_conf`). The executor waits here; `reply_after_saves` makes
/// the client wait instead.
pub fn before_reply(st: &mut State) {
    post_due_saves(st);
    if let Some(w) = &st.cluster_conf {
        w.wait_held();
    }
}

/// `before_reply` for a client whose reply may come later: `reply` (encoded in `proto`) as it
/// stands when the saves holding bus output are written already, else a deferred reply the
/// config writer completes once they are.
pub fn reply_after_saves(st: &mut State, reply: crate::resp::Reply, proto: u8) -> crate::resp::Reply {
    post_due_saves(st);
    let Some(w) = &st.cluster_conf else { return reply };
    let mut bytes = Vec::new();
    crate::resp::writer::write_reply(&mut bytes, &reply, proto);
    match w.reply_when_held(bytes) {
        Some(later) => crate::resp::Reply::Deferred(crate::resp::reply::Deferred(later)),
        None => reply,
    }
}

fn post_due_saves(st: &mut State) {
    before_sleep(st);
    if st.cluster.as_ref().is_some_and(|c| c.epochs() != c.synced_epochs) {
        post_save(st);
    }
}

/// Work noted by message handlers, done once per pass (clusterBeforeSleep).
pub fn before_sleep(st: &mut State) {
    let Some(c) = st.cluster.as_mut() else { return };
    if !c.lost_slots.is_empty() {
        let lost = std::mem::take(&mut c.lost_slots);
        super::pubsub::unsubscribe_shard_slots(st, &lost);
    }
    let Some(c) = st.cluster.as_mut() else { return };
    if c.todo_handle_failover {
        c.todo_handle_failover = false;
        if c.me().is_replica() {
            handle_manual_failover(st);
            handle_replica_failover(st);
        }
    }
    let c = cl(st);
    if c.todo_update_state {
        c.todo_update_state = false;
        update_state(st);
    }
    if cl(st).todo_save {
        save_config(st);
    }
}

fn todo(st: &mut State, save: bool, update: bool) {
    let c = cl(st);
    c.todo_save |= save;
    c.todo_update_state |= update;
}

// -------------------------------------------------------------------------------------------
// Links

/// A new link's channel; the link is registered under the returned id.
fn new_link(
    st: &mut State,
    node: Option<Name>,
    inbound: bool,
) -> (u64, tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>, Arc<AtomicUsize>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    let c = cl(st);
    let id = c.next_link_id;
    c.next_link_id += 1;
    c.links.insert(
        id,
        Link {
            id,
            node,
            inbound,
            ctime: unix_ms(),
            tx,
            connected: false,
            queued: queued.clone(),
            events: if inbound { "r".into() } else { "w".into() },
        },
    );
    (id, rx, queued)
}

/// An accepted bus connection: registered as an inbound link; None when not in cluster mode.
pub fn accept_link(
    st: &mut State,
    peer_ip: String,
    local_ip: String,
) -> Option<(u64, tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>, Arc<AtomicUsize>)> {
    st.cluster.as_ref()?;
    let (id, rx, q) = new_link(st, None, true);
    st.cluster_link_addrs.insert(id, (peer_ip, local_ip));
    Some((id, rx, q))
}

/// The outbound link connected: its local address may tell us our own IP.
pub fn link_connected(st: &mut State, id: u64, peer_ip: String, local_ip: String) {
    let Some(c) = st.cluster.as_mut() else { return };
    if let Some(l) = c.links.get_mut(&id) {
        l.connected = true;
    }
    st.cluster_link_addrs.insert(id, (peer_ip, local_ip));
}

/// The bus side lost a link (or never connected it).
pub fn link_closed(st: &mut State, id: u64) {
    st.cluster_link_addrs.remove(&id);
    let Some(c) = st.cluster.as_mut() else { return };
    free_link(c, id);
}

fn free_link(c: &mut ClusterState, id: u64) {
    let Some(link) = c.links.remove(&id) else { return };
    if let Some(name) = link.node {
        if let Some(n) = c.nodes.get_mut(&name) {
            if n.link == Some(id) {
                n.link = None;
            }
            if n.inbound_link == Some(id) {
                n.inbound_link = None;
            }
        }
    }
}

fn send(st: &mut State, link: u64, m: &Message) {
    send_to(st, &[link], m);
}

/// Sends `m` to each of `links`, encoded once: a 64 KiB PUBLISH to five nodes is one encoding
/// whose bytes the five queues share, not five copies.
fn send_to(st: &mut State, links: &[u64], m: &Message) {
    // An epoch this message may carry (a vote, an election's epoch) is on disk before it
    // leaves: saved now, holding the bus (see `nodes_conf`). The pass's own save still follows.
    if st.cluster.as_ref().is_some_and(|c| c.epochs() != c.synced_epochs) {
        post_save(st);
    }
    let bytes = bytes::Bytes::from(msg::encode(m));
    let c = cl(st);
    for link in links {
        if let Some(l) = c.links.get(link) {
            l.queued.fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed);
            if l.tx.send(bytes.clone()).is_ok() {
                if let Some(s) = c.stats_sent.get_mut(m.hdr.typ as usize) {
                    *s += 1;
                }
            }
        }
    }
}

/// Sends `m` to every node with an outbound link, but handshake ones (clusterBroadcastMessage).
fn broadcast(st: &mut State, m: &Message) {
    let c = cl(st);
    let links: Vec<u64> =
        c.nodes.values().filter(|n| n.flags & (NODE_MYSELF | NODE_HANDSHAKE) == 0).filter_map(|n| n.link).collect();
    send_to(st, &links, m);
}

// -------------------------------------------------------------------------------------------
// Building messages

fn header(st: &State, typ: u16) -> Header {
    let c = st.cluster.as_ref().expect("cluster mode");
    let me = c.me();
    let master_name = c.my_master();
    let master = c.nodes.get(&master_name).unwrap_or(me);
    let mut h = Header::new(typ, c.myself);
    h.myip = announce_ip(st);
    (h.port, h.pport, h.cport) = announced_ports(st);
    h.myslots.copy_from_slice(&master.slots[..]);
    if me.is_replica() {
        if let Some(m) = me.replicaof {
            h.slaveof = m;
        }
    }
    h.flags = me.flags;
    h.state = c.state;
    h.current_epoch = c.current_epoch;
    h.config_epoch = master.config_epoch;
    h.offset = my_repl_offset(st).max(0) as u64;
    if me.is_master() && c.mf.end != 0 {
        h.mflags[0] |= msg::MFLAG0_PAUSED;
    }
    h
}

/// The replication offset this node reports for itself: a master's own offset, a replica's
/// offset in its master's stream (Redis's replicationGetSlaveOffset), which is 0 while a full
/// sync transfers or loads its snapshot: that is how its peers, and CLUSTER SLOTS / SHARDS
/// here, tell a replica still loading (hidden from SLOTS, `loading` in SHARDS).
pub fn my_repl_offset(st: &State) -> i64 {
    let Some(c) = st.cluster.as_ref() else { return st.repl.offset };
    if c.me().is_master() {
        return st.repl.offset;
    }
    let syncing = st.repl.master.as_ref().is_some_and(|l| l.state == super::replication::LinkState::Transfer)
        || st.repl.sync_loading.is_some();
    if syncing {
        0
    } else {
        st.repl.offset.max(0)
    }
}

fn gossip_of(n: &Node) -> Gossip {
    Gossip {
        name: n.name,
        ping_sent: (n.ping_sent / 1000) as u32,
        pong_received: (n.pong_received / 1000) as u32,
        ip: n.ip.clone(),
        port: n.port,
        cport: n.cport,
        flags: n.flags,
        pport: n.pport,
    }
}

/// PING, PONG or MEET with gossip about a tenth of the nodes (at least 3) plus every node in
/// PFAIL, as clusterSendPing.
fn send_ping(st: &mut State, link: u64, typ: u16) {
    let now = unix_ms();
    let hdr = header(st, typ);
    let c = cl(st);
    let total = c.nodes.len();
    let freshnodes = total.saturating_sub(2);
    let wanted = (total / 10).max(3).min(freshnodes);
    let link_node = c.links.get(&link).and_then(|l| l.node);
    if typ == msg::PING {
        if let Some(n) = link_node.and_then(|n| c.nodes.get_mut(&n)) {
            n.ping_sent = now;
        }
    }
    let mut gossip: Vec<Gossip> = Vec::with_capacity(wanted + c.stats_pfail_nodes);
    let candidates: Vec<&Node> = c.nodes.values().collect();
    let mut tries = wanted * 3;
    while !candidates.is_empty() && gossip.len() < wanted && tries > 0 {
        tries -= 1;
        let n = candidates[fastrand::usize(..candidates.len())];
        if n.flags & NODE_MYSELF != 0 || n.flags & NODE_PFAIL != 0 {
            continue;
        }
        if n.flags & (NODE_HANDSHAKE | NODE_NOADDR) != 0 || (n.link.is_none() && n.numslots == 0) {
            continue;
        }
        if gossip.iter().any(|g| g.name == n.name) {
            continue;
        }
        gossip.push(gossip_of(n));
    }
    for n in c.nodes.values() {
        if n.flags & NODE_PFAIL != 0
            && n.flags & (NODE_HANDSHAKE | NODE_NOADDR) == 0
            && !gossip.iter().any(|g| g.name == n.name)
        {
            gossip.push(gossip_of(n));
        }
    }
    let hostname = c.me().hostname.clone();
    let exts = if hostname.is_empty() { Vec::new() } else { vec![Ext::Hostname(hostname)] };
    send(st, link, &Message { hdr, body: Body::Ping { gossip, exts } });
}

/// PONG to every node (or only the replicas of my master), as clusterBroadcastPong.
fn broadcast_pong(st: &mut State, local_replicas_only: bool) {
    let c = cl(st);
    let my_master = c.my_master();
    let links: Vec<u64> = c
        .nodes
        .values()
        .filter(|n| n.flags & (NODE_MYSELF | NODE_HANDSHAKE) == 0)
        .filter(|n| !local_replicas_only || (n.is_replica() && n.replicaof == Some(my_master)))
        .filter_map(|n| n.link)
        .collect();
    for l in links {
        send_ping(st, l, msg::PONG);
    }
}

/// A PONG to every node (after taking a slot, so they learn it at once).
pub fn broadcast_pong_all(st: &mut State) {
    broadcast_pong(st, false);
}

fn send_fail(st: &mut State, name: Name) {
    let hdr = header(st, msg::FAIL);
    broadcast(st, &Message { hdr, body: Body::Fail { name } });
}

fn send_update(st: &mut State, link: Option<u64>, about: Name) {
    let Some(link) = link else { return };
    let c = cl(st);
    let Some(n) = c.nodes.get(&about) else { return };
    let body = Body::Update { config_epoch: n.config_epoch, name: n.name, slots: n.slots.clone() };
    let hdr = header(st, msg::UPDATE);
    send(st, link, &Message { hdr, body });
}

/// PUBLISH from a client in cluster mode reaches every node (clusterPropagatePublish).
pub fn propagate_publish(st: &mut State, channel: &[u8], message: &[u8], shard: bool) {
    if st.cluster.is_none() {
        return;
    }
    let typ = if shard { msg::PUBLISHSHARD } else { msg::PUBLISH };
    let hdr = header(st, typ);
    let m = Message { hdr, body: Body::Publish { channel: channel.to_vec(), message: message.to_vec() } };
    if shard {
        // Only the nodes of this shard.
        let c = cl(st);
        let master = c.my_master();
        let links: Vec<u64> = c
            .nodes
            .values()
            .filter(|n| n.flags & (NODE_MYSELF | NODE_HANDSHAKE) == 0)
            .filter(|n| n.name == master || n.replicaof == Some(master))
            .filter_map(|n| n.link)
            .collect();
        send_to(st, &links, &m);
    } else {
        broadcast(st, &m);
    }
}

// -------------------------------------------------------------------------------------------
// Receiving

/// Frames read from link `id`, in order.
pub fn on_frames(st: &mut State, id: u64, frames: Vec<bytes::Bytes>) {
    for f in frames {
        if st.cluster.as_ref().is_none_or(|c| !c.links.contains_key(&id)) {
            return;
        }
        match msg::decode(&f) {
            Ok(m) => process(st, id, m),
            Err(msg::DecodeError::BadFrame) => {
                tracing::warn!("Bad message length or signature received from Cluster bus.");
                free_link(cl(st), id);
                return;
            }
            Err(msg::DecodeError::Invalid(why)) => tracing::warn!("{why}"),
        }
    }
    before_sleep(st);
}

/// The address a message's sender is reached at: its announced IP, else the link's peer.
fn sender_ip(st: &State, link: u64, hdr: &Header) -> String {
    if !hdr.myip.is_empty() {
        return hdr.myip.clone();
    }
    st.cluster_link_addrs.get(&link).map(|(peer, _)| peer.clone()).unwrap_or_default()
}

fn process(st: &mut State, link: u64, m: Message) {
    let now = unix_ms();
    let hdr = &m.hdr;
    let typ = hdr.typ;
    {
        let c = cl(st);
        if let Some(s) = c.stats_received.get_mut(typ as usize) {
            *s += 1;
        }
        if typ as i64 == c.drop_packet_filter {
            tracing::warn!("Dropping packet that matches debug drop filter");
            return;
        }
    }
    let (link_node, inbound) = {
        let c = cl(st);
        let Some(l) = c.links.get(&link) else { return };
        (l.node, l.inbound)
    };
    let sender: Option<Name> = {
        let c = cl(st);
        match link_node {
            Some(n) if c.nodes.get(&n).is_some_and(|n| !n.in_handshake()) => Some(n),
            _ => c.nodes.contains_key(&hdr.sender).then_some(hdr.sender),
        }
    };
    // An inbound link is attached to its node once the node is known.
    if let (Some(s), true) = (sender, inbound) {
        let c = cl(st);
        if c.links.get(&link).is_some_and(|l| l.node.is_none()) {
            if let Some(old) = c.nodes.get(&s).and_then(|n| n.inbound_link) {
                if old != link {
                    free_link(c, old);
                }
            }
            if let Some(l) = c.links.get_mut(&link) {
                l.node = Some(s);
            }
            if let Some(n) = c.nodes.get_mut(&s) {
                n.inbound_link = Some(link);
            }
        }
    }
    let mut sender_config_epoch = 0;
    let mut sender_current_epoch = 0;
    if let Some(s) = sender {
        let repl_offset = hdr.offset as i64;
        let c = cl(st);
        let Some(n) = c.nodes.get_mut(&s) else { return };
        n.data_received = now;
        if !n.in_handshake() {
            sender_current_epoch = hdr.current_epoch;
            sender_config_epoch = hdr.config_epoch;
            let mut save = false;
            if sender_config_epoch > n.config_epoch {
                n.config_epoch = sender_config_epoch;
                save = true;
            }
            n.repl_offset = repl_offset;
            n.repl_offset_time = now;
            if sender_current_epoch > c.current_epoch {
                c.current_epoch = sender_current_epoch;
            }
            let me = c.me();
            if c.mf.end != 0
                && me.is_replica()
                && me.replicaof == Some(s)
                && hdr.mflags[0] & msg::MFLAG0_PAUSED != 0
                && c.mf.master_offset == -1
            {
                c.mf.master_offset = repl_offset;
                c.todo_handle_failover = true;
                tracing::warn!("Received replication offset for paused master manual failover: {repl_offset}");
            }
            c.todo_save |= save;
        }
    }
    if typ == msg::PING || typ == msg::MEET {
        let local_ip = st.cluster_link_addrs.get(&link).map(|(_, l)| l.clone()).unwrap_or_default();
        let announce = announce_ip(st);
        let c = cl(st);
        if (typ == msg::MEET || c.me().ip.is_empty())
            && announce.is_empty()
            && !local_ip.is_empty()
            && c.me().ip != local_ip
        {
            c.me_mut().ip = local_ip.clone();
            tracing::warn!("IP address for this node updated to {local_ip}");
            c.todo_save = true;
        }
        if sender.is_none() && typ == msg::MEET {
            let ip = sender_ip(st, link, hdr);
            let c = cl(st);
            let mut node = Node::new(random_name(), NODE_HANDSHAKE, now);
            node.ip = ip;
            node.port = hdr.port;
            node.pport = hdr.pport;
            node.cport = hdr.cport;
            c.nodes.insert(node.name, node);
            c.todo_save = true;
            process_gossip(st, link, &m, None);
        }
        send_ping(st, link, msg::PONG);
    }
    if typ == msg::PING || typ == msg::PONG || typ == msg::MEET {
        if !inbound {
            let Some(ln) = link_node else { return };
            let c = cl(st);
            let Some(lnode) = c.nodes.get(&ln) else { return };
            if lnode.in_handshake() {
                if let Some(s) = sender {
                    // A node we know by name answered a handshake: update its address and drop
                    // the handshake entry.
                    if update_address(st, s, link, hdr) {
                        todo(st, true, true);
                    }
                    let c = cl(st);
                    for l in c.del_node(&ln) {
                        free_link(c, l);
                    }
                    return;
                }
                c.rename(&ln, hdr.sender);
                let Some(n) = c.nodes.get_mut(&hdr.sender) else { return };
                n.flags &= !NODE_HANDSHAKE;
                n.flags |= hdr.flags & (NODE_MASTER | NODE_SLAVE);
                c.todo_save = true;
                tracing::debug!("Handshake with node {} completed.", name_str(&hdr.sender));
            } else if ln != hdr.sender {
                let Some(n) = c.nodes.get_mut(&ln) else { return };
                n.flags |= NODE_NOADDR;
                n.ip.clear();
                n.port = 0;
                n.pport = 0;
                n.cport = 0;
                free_link(c, link);
                c.todo_save = true;
                return;
            }
        }
        // The sender again: a handshake may have just completed.
        let sender = if sender.is_none() && !inbound {
            let c = cl(st);
            c.nodes.get(&hdr.sender).filter(|n| !n.in_handshake()).map(|n| n.name)
        } else {
            sender
        };
        if let Some(s) = sender {
            let c = cl(st);
            if let Some(n) = c.nodes.get_mut(&s) {
                n.flags = (n.flags & !NODE_NOFAILOVER) | (hdr.flags & NODE_NOFAILOVER);
            }
            if typ == msg::PING
                && !c.nodes.get(&s).is_some_and(|n| n.in_handshake())
                && update_address(st, s, link, hdr)
            {
                todo(st, true, true);
            }
        }
        if !inbound && typ == msg::PONG {
            let c = cl(st);
            if let Some(ln) = c.links.get(&link).and_then(|l| l.node) {
                if let Some(n) = c.nodes.get_mut(&ln) {
                    n.pong_received = now;
                    n.ping_sent = 0;
                    if n.timed_out() {
                        n.flags &= !NODE_PFAIL;
                        c.todo_save = true;
                        c.todo_update_state = true;
                    } else if n.failed() {
                        clear_failure_if_needed(st, ln);
                    }
                }
            }
        }
        let Some(s) = sender else { return };
        // Role switch.
        if hdr.slaveof == NULL_NAME {
            set_node_as_master(st, s);
        } else {
            let c = cl(st);
            let master = c.nodes.contains_key(&hdr.slaveof).then_some(hdr.slaveof);
            if c.nodes.get(&s).is_some_and(|n| n.is_master()) {
                c.del_node_slots(&s);
                let Some(n) = c.nodes.get_mut(&s) else { return };
                n.flags &= !(NODE_MASTER | NODE_MIGRATE_TO);
                n.flags |= NODE_SLAVE;
                c.todo_save = true;
                c.todo_update_state = true;
            }
            if let Some(m) = master {
                let old = c.nodes.get(&s).and_then(|n| n.replicaof);
                if old != Some(m) {
                    if let Some(o) = old {
                        c.remove_replica(&o, &s);
                    }
                    c.add_replica(&m, &s);
                    if let Some(n) = c.nodes.get_mut(&s) {
                        n.replicaof = Some(m);
                    }
                    c.todo_save = true;
                }
            }
        }
        // Slots.
        let c = cl(st);
        let Some(sn) = c.nodes.get(&s) else { return };
        let sender_master = if sn.is_master() { Some(s) } else { sn.replicaof };
        let dirty_slots = sender_master.and_then(|m| c.nodes.get(&m)).is_some_and(|m| m.slots[..] != hdr.myslots[..]);
        if sn.is_master() && dirty_slots {
            update_slots_config_with(st, s, sender_config_epoch, &hdr.myslots);
        }
        if dirty_slots {
            let c = cl(st);
            let mut newer: Option<Name> = None;
            // One lookup per run of an owner's slots, not per slot (see update_slots_config_with).
            let mut checked: Option<&Name> = None;
            for j in 0..SLOTS {
                if !bit(&hdr.myslots, j) {
                    continue;
                }
                let Some(owner) = c.owner_ref(j) else { continue };
                if *owner == s || checked == Some(owner) {
                    continue;
                }
                checked = Some(owner);
                if c.nodes.get(owner).is_some_and(|o| o.config_epoch > sender_config_epoch) {
                    newer = Some(*owner);
                    break;
                }
            }
            if let Some(owner) = newer {
                tracing::debug!(
                    "Node {} has old slots configuration, sending an UPDATE message about {}",
                    name_str(&s),
                    name_str(&owner)
                );
                let l = c.nodes.get(&s).and_then(|n| n.link);
                send_update(st, l, owner);
            }
        }
        let c = cl(st);
        if c.me().is_master()
            && c.nodes.get(&s).is_some_and(|n| n.is_master())
            && sender_config_epoch == c.me().config_epoch
        {
            handle_config_epoch_collision(st, s);
        }
        process_gossip(st, link, &m, Some(s));
        if let Body::Ping { exts, .. } = &m.body {
            let hostname = exts.iter().find_map(|e| match e {
                Ext::Hostname(h) => Some(h.clone()),
                _ => None,
            });
            let c = cl(st);
            if let Some(n) = c.nodes.get_mut(&s) {
                let h = hostname.unwrap_or_default();
                if n.hostname != h {
                    n.hostname = h;
                    c.todo_save = true;
                }
            }
        }
        return;
    }
    match (&m.body, typ) {
        (Body::Fail { name }, msg::FAIL) => {
            let Some(_) = sender else { return };
            let c = cl(st);
            if let Some(n) = c.nodes.get_mut(name) {
                if n.flags & (NODE_FAIL | NODE_MYSELF) == 0 {
                    tracing::info!("FAIL message received from {} about {}", name_str(&hdr.sender), name_str(name));
                    n.flags |= NODE_FAIL;
                    n.fail_time = now;
                    n.flags &= !NODE_PFAIL;
                    c.todo_save = true;
                    c.todo_update_state = true;
                }
            }
        }
        (Body::Publish { channel, message }, msg::PUBLISH | msg::PUBLISHSHARD) => {
            if sender.is_none() {
                return;
            }
            let kind = if typ == msg::PUBLISH { crate::pubsub::Kind::Channel } else { crate::pubsub::Kind::Shard };
            super::pubsub::publish_message(st, None, kind, channel, message);
        }
        (_, msg::FAILOVER_AUTH_REQUEST) => {
            let Some(s) = sender else { return };
            send_failover_auth_if_needed(st, s, hdr);
        }
        (_, msg::FAILOVER_AUTH_ACK) => {
            let Some(s) = sender else { return };
            let c = cl(st);
            let Some(n) = c.nodes.get(&s) else { return };
            if n.is_master() && n.numslots > 0 && sender_current_epoch >= c.failover_auth_epoch {
                c.failover_auth_count += 1;
                c.todo_handle_failover = true;
            }
        }
        (_, msg::MFSTART) => {
            let Some(s) = sender else { return };
            let c = cl(st);
            if c.nodes.get(&s).and_then(|n| n.replicaof) != Some(c.myself) {
                return;
            }
            c.mf = ManualFailover { end: now + MF_TIMEOUT, can_start: false, replica: Some(s), master_offset: -1 };
            tracing::warn!("Manual failover requested by replica {}.", name_str(&s));
            st.pause_held |= super::PAUSE_CLUSTER_MF;
            let l = cl(st).nodes.get(&s).and_then(|n| n.link);
            if let Some(l) = l {
                send_ping(st, l, msg::PING);
            }
        }
        (Body::Update { config_epoch, name, slots }, msg::UPDATE) => {
            if sender.is_none() {
                return;
            }
            let c = cl(st);
            let Some(n) = c.nodes.get(name) else { return };
            if n.config_epoch >= *config_epoch {
                return;
            }
            let name = *name;
            if n.is_replica() {
                set_node_as_master(st, name);
            }
            let Some(n) = cl(st).nodes.get_mut(&name) else { return };
            n.config_epoch = *config_epoch;
            todo(st, true, false);
            update_slots_config_with(st, name, *config_epoch, slots);
        }
        _ => {}
    }
}

/// nodeUpdateAddressIfNeeded: a node heard from on another link at another address.
fn update_address(st: &mut State, node: Name, link: u64, hdr: &Header) -> bool {
    let ip = sender_ip(st, link, hdr);
    let c = cl(st);
    let Some(n) = c.nodes.get(&node) else { return false };
    if n.link == Some(link) || n.flags & NODE_MYSELF != 0 {
        return false;
    }
    if n.ip == ip && n.port == hdr.port && n.cport == hdr.cport && n.pport == hdr.pport {
        return false;
    }
    if ip.is_empty() {
        return false;
    }
    let Some(n) = c.nodes.get_mut(&node) else { return false };
    n.ip = ip.clone();
    n.port = hdr.port;
    n.pport = hdr.pport;
    n.cport = hdr.cport;
    n.flags &= !NODE_NOADDR;
    let old = n.link.take();
    if let Some(l) = old {
        free_link(c, l);
    }
    tracing::warn!("Address updated for node {}, now {}:{}", name_str(&node), ip, hdr.port);
    if c.me().is_replica() && c.me().replicaof == Some(node) {
        super::replication::set_master(st, ip, hdr.port);
    }
    true
}

fn set_node_as_master(st: &mut State, n: Name) {
    let c = cl(st);
    let Some(node) = c.nodes.get(&n) else { return };
    if node.is_master() {
        return;
    }
    if let Some(m) = node.replicaof {
        c.remove_replica(&m, &n);
    }
    let myself = c.myself;
    let Some(node) = c.nodes.get_mut(&n) else { return };
    if n != myself {
        node.flags |= NODE_MIGRATE_TO;
    }
    node.flags &= !NODE_SLAVE;
    node.flags |= NODE_MASTER;
    node.replicaof = None;
    c.todo_save = true;
    c.todo_update_state = true;
}

fn clear_failure_if_needed(st: &mut State, name: Name) {
    let now = unix_ms();
    let timeout = node_timeout(st);
    let c = cl(st);
    let Some(n) = c.nodes.get_mut(&name) else { return };
    if n.is_replica() || n.numslots == 0 {
        tracing::info!(
            "Clear FAIL state for node {}: {} is reachable again.",
            name_str(&name),
            if n.is_replica() { "replica" } else { "master without slots" }
        );
        n.flags &= !NODE_FAIL;
        c.todo_save = true;
        c.todo_update_state = true;
    } else if n.is_master() && n.numslots > 0 && now - n.fail_time > timeout * 2 {
        tracing::info!(
            "Clear FAIL state for node {}: is reachable again and nobody is serving its slots after some time.",
            name_str(&name)
        );
        n.flags &= !NODE_FAIL;
        c.todo_save = true;
        c.todo_update_state = true;
    }
}

fn handle_config_epoch_collision(st: &mut State, sender: Name) {
    let c = cl(st);
    if sender <= c.myself {
        return;
    }
    c.current_epoch += 1;
    let e = c.current_epoch;
    c.me_mut().config_epoch = e;
    c.todo_save = true;
    tracing::debug!("WARNING: configEpoch collision with node {}. configEpoch set to {e}", name_str(&sender));
}

/// clusterUpdateSlotsConfigWith: `sender` claims `slots` at `epoch`; take what it wins, and
/// follow it if it took all of our shard's slots.
fn update_slots_config_with(st: &mut State, sender: Name, epoch: u64, slots: &[u8; SLOT_BYTES]) {
    if sender == cl(st).myself {
        tracing::info!("Discarding UPDATE message about myself.");
        return;
    }
    // Which of the slots claimed that we own hold keys (asked before the loop below borrows
    // the cluster state); only the claimed slots we own are looked at: every PING of a master
    // comes here, and a walk over all 16384 slots cost ~0.3 ms a message.
    let claimed_mine = cl_ref(st).mine_among(slots);
    let mut slot_has_keys = vec![false; if claimed_mine.is_empty() { 0 } else { SLOTS }];
    for j in claimed_mine {
        slot_has_keys[j] = st.dbs[0].count_keys_in_slot(j) > 0;
    }
    let c = cl(st);
    let myself = c.myself;
    let curmaster = c.my_master();
    let mut new_master: Option<Name> = None;
    let mut dirty: Vec<usize> = Vec::new();
    let mut migrated_ours = 0;
    let mut sender_slots = 0;
    // The slots to hand to the sender, moved in one go after the pass; each owner's epoch is
    // looked up once per run of its slots, not per slot (a failover's UPDATE claims thousands).
    let mut to_move: Vec<usize> = Vec::new();
    let mut last_owner: Option<(Name, Option<u64>)> = None;
    for j in 0..SLOTS {
        if !bit(slots, j) {
            continue;
        }
        sender_slots += 1;
        let owner = c.owner_ref(j);
        if owner == Some(&sender) {
            continue;
        }
        if c.importing.contains_key(&j) {
            continue;
        }
        let owner_epoch = match (owner, &last_owner) {
            (None, _) => None,
            (Some(o), Some((l, e))) if o == l => *e,
            (Some(o), _) => {
                let e = c.nodes.get(o).map(|n| n.config_epoch);
                last_owner = Some((*o, e));
                e
            }
        };
        if owner.is_none() || owner_epoch.is_some_and(|e| e < epoch) {
            if owner == Some(&myself) && slot_has_keys.get(j).copied().unwrap_or(false) {
                dirty.push(j);
            }
            if owner == Some(&curmaster) {
                new_master = Some(sender);
                migrated_ours += 1;
            }
            to_move.push(j);
        }
    }
    if !to_move.is_empty() {
        c.move_slots(&to_move, &sender);
        c.todo_save = true;
        c.todo_update_state = true;
    }
    let allow_migration = cfg_bool(st, "cluster-allow-replica-migration", true);
    let c = cl(st);
    let cur_slots = c.nodes.get(&curmaster).map_or(0, |n| n.numslots);
    if let Some(nm) = new_master.filter(|_| cur_slots == 0 && (allow_migration || sender_slots == migrated_ours)) {
        tracing::warn!("Configuration change detected. Reconfiguring myself as a replica of {}", name_str(&nm));
        set_my_master(st, nm);
    } else {
        for j in dirty {
            tracing::warn!("Deleting keys in dirty slot {j} on node {}", name_str(&myself));
            del_keys_in_slot(st, j);
        }
    }
}

fn cl_ref(st: &State) -> &ClusterState {
    st.cluster.as_ref().expect("cluster mode")
}

/// Deletes every key of `slot` (delKeysInSlot), propagating the deletions.
pub fn del_keys_in_slot(st: &mut State, slot: usize) -> usize {
    let keys = st.dbs[0].keys_in_slot(slot, usize::MAX);
    let n = keys.len();
    for k in keys {
        st.dbs[0].remove(&k, unix_ms());
        super::replication::feed(st, 0, &[bytes::Bytes::from_static(b"DEL"), bytes::Bytes::from(k.clone())]);
        super::pubsub::notify(st, None, crate::pubsub::ev::GENERIC, "del", &k, 0);
    }
    st.dirty += n as u64;
    n
}

/// Gossip sections (clusterProcessGossipSection): failure reports, pong times, new nodes.
fn process_gossip(st: &mut State, _link: u64, m: &Message, sender: Option<Name>) {
    let Body::Ping { gossip, .. } = &m.body else { return };
    let now = unix_ms();
    for g in gossip {
        let c = cl(st);
        if let Some(node) = c.nodes.get(&g.name) {
            let node_name = node.name;
            if let Some(s) = sender {
                let sender_is_master = c.nodes.get(&s).is_some_and(|n| n.is_master());
                if sender_is_master && node_name != c.myself {
                    if g.flags & (NODE_FAIL | NODE_PFAIL) != 0 {
                        let Some(n) = c.nodes.get_mut(&node_name) else { continue };
                        match n.fail_reports.iter_mut().find(|(r, _)| *r == s) {
                            Some(r) => r.1 = now,
                            None => {
                                n.fail_reports.push((s, now));
                                tracing::debug!(
                                    "Node {} reported node {} as not reachable.",
                                    name_str(&s),
                                    name_str(&node_name)
                                );
                            }
                        }
                        mark_failing_if_needed(st, node_name);
                    } else {
                        if let Some(n) = c.nodes.get_mut(&node_name) {
                            n.fail_reports.retain(|(r, _)| *r != s);
                        }
                    }
                }
            }
            let c = cl(st);
            let Some(n) = c.nodes.get_mut(&node_name) else { continue };
            if g.flags & (NODE_FAIL | NODE_PFAIL) == 0 && n.ping_sent == 0 && n.fail_reports.is_empty() {
                let pongtime = g.pong_received as i64 * 1000;
                if pongtime <= now + 500 && pongtime > n.pong_received {
                    n.pong_received = pongtime;
                }
            }
            if n.flags & (NODE_FAIL | NODE_PFAIL) != 0
                && g.flags & NODE_NOADDR == 0
                && n.link.is_none()
                && (n.ip != g.ip || n.port != g.port || n.cport != g.cport)
            {
                n.ip = g.ip.clone();
                n.port = g.port;
                n.pport = g.pport;
                n.cport = g.cport;
                n.flags &= !NODE_NOADDR;
            }
        } else if sender.is_some() && g.flags & NODE_NOADDR == 0 && !c.blacklist.contains_key(&g.name) {
            // A node we did not know: added under its name, linked by the cron.
            let mut n = Node::new(g.name, g.flags & (NODE_MASTER | NODE_SLAVE), now);
            n.ip = g.ip.clone();
            n.port = g.port;
            n.pport = g.pport;
            n.cport = g.cport;
            c.nodes.insert(g.name, n);
            c.todo_save = true;
        }
    }
}

/// markNodeAsFailingIfNeeded: PFAIL becomes FAIL once a majority of masters report it.
fn mark_failing_if_needed(st: &mut State, name: Name) {
    let now = unix_ms();
    let validity = node_timeout(st) * 2;
    let c = cl(st);
    let needed = c.size / 2 + 1;
    let me_master = c.me().is_master();
    let Some(n) = c.nodes.get_mut(&name) else { return };
    if !n.timed_out() || n.failed() {
        return;
    }
    n.fail_reports.retain(|(_, t)| now - t <= validity);
    let mut failures = n.fail_reports.len();
    if me_master {
        failures += 1;
    }
    if failures < needed {
        return;
    }
    tracing::info!("Marking node {} as failing (quorum reached).", name_str(&name));
    n.flags &= !NODE_PFAIL;
    n.flags |= NODE_FAIL;
    n.fail_time = now;
    c.todo_save = true;
    c.todo_update_state = true;
    if me_master {
        send_fail(st, name);
    }
}

// -------------------------------------------------------------------------------------------
// Cron

/// clusterCron: called about ten times a second from the executor's cron.
pub fn cron(st: &mut State) {
    if st.cluster.is_none() {
        return;
    }
    // CONFIG SET of cluster-announce-* and cluster-replica-no-failover take effect here.
    update_myself_announced(st);
    let Some(c) = st.cluster.as_mut() else { return };
    let now = unix_ms();
    c.cron_iteration += 1;
    let iteration = c.cron_iteration;
    let timeout = node_timeout(st);
    let handshake_timeout = timeout.max(1000);
    // Links whose unsent bytes passed cluster-link-sendbuf-limit are dropped (and reconnected
    // by the loop below), as clusterNodeCronFreeLinkOnBufferLimitReached.
    let limit = cfg_i64(st, "cluster-link-sendbuf-limit", 0).max(0) as usize;
    let c = cl(st);
    if limit > 0 {
        let over: Vec<(u64, usize)> = c
            .links
            .values()
            .map(|l| (l.id, l.queued.load(std::sync::atomic::Ordering::Relaxed)))
            .filter(|&(_, q)| q > limit)
            .collect();
        for (id, used) in over {
            let (dir, node) = c
                .links
                .get(&id)
                .map_or(("to", NULL_NAME), |l| (if l.inbound { "from" } else { "to" }, l.node.unwrap_or(NULL_NAME)));
            tracing::warn!(
                "Freeing cluster link({dir} node {}, used memory: {used}) due to exceeding send buffer memory limit.",
                name_str(&node)
            );
            free_link(c, id);
            c.links_buffer_limit_exceeded += 1;
        }
    }
    c.blacklist.retain(|_, until| *until > now / 1000);
    c.stats_pfail_nodes = 0;
    let names: Vec<Name> = c.nodes.keys().copied().collect();
    for name in &names {
        let c = cl(st);
        let Some(n) = c.nodes.get(name) else { continue };
        if n.flags & (NODE_MYSELF | NODE_NOADDR) != 0 {
            continue;
        }
        if n.timed_out() {
            c.stats_pfail_nodes += 1;
        }
        if n.in_handshake() && now - n.ctime > handshake_timeout {
            for l in c.del_node(name) {
                free_link(c, l);
            }
            continue;
        }
        if n.link.is_none() {
            connect(st, *name, now);
        }
    }
    // Every second, ping a random node among five, the one whose pong is oldest.
    if iteration % 10 == 0 {
        let c = cl(st);
        let all: Vec<&Node> = c.nodes.values().collect();
        let mut best: Option<(i64, u64)> = None;
        for _ in 0..5 {
            let n = all[fastrand::usize(..all.len())];
            if n.link.is_none() || n.ping_sent != 0 || n.flags & (NODE_MYSELF | NODE_HANDSHAKE) != 0 {
                continue;
            }
            if let Some(l) = n.link.filter(|_| best.is_none_or(|(t, _)| n.pong_received < t)) {
                best = Some((n.pong_received, l));
            }
        }
        if let Some((_, l)) = best {
            send_ping(st, l, msg::PING);
        }
    }
    let mut update = false;
    for name in &names {
        let c = cl(st);
        let Some(n) = c.nodes.get(name) else { continue };
        if n.flags & (NODE_MYSELF | NODE_NOADDR | NODE_HANDSHAKE) != 0 {
            continue;
        }
        let ping_delay = now - n.ping_sent;
        let data_delay = now - n.data_received;
        if let Some(l) = n.link {
            let link_age = c.links.get(&l).map_or(0, |l| now - l.ctime);
            if link_age > timeout && n.ping_sent != 0 && ping_delay > timeout / 2 && data_delay > timeout / 2 {
                // The link looks stuck: reconnect.
                free_link(c, l);
                continue;
            }
        }
        let c = cl(st);
        let Some(n) = c.nodes.get(name) else { continue };
        if let Some(l) = n.link {
            if n.ping_sent == 0 && now - n.pong_received > timeout / 2 {
                send_ping(st, l, msg::PING);
                continue;
            }
            if c.mf.end != 0 && c.me().is_master() && c.mf.replica == Some(*name) {
                send_ping(st, l, msg::PING);
                continue;
            }
        }
        let c = cl(st);
        let Some(n) = c.nodes.get_mut(name) else { continue };
        if n.ping_sent == 0 {
            continue;
        }
        let delay = ping_delay.min(data_delay);
        if delay > timeout && n.flags & (NODE_PFAIL | NODE_FAIL) == 0 {
            tracing::debug!("*** NODE {} possibly failing", name_str(name));
            n.flags |= NODE_PFAIL;
            update = true;
        }
    }
    // A replica makes sure it replicates its master.
    let c = cl(st);
    if c.me().is_replica() && c.mf.end == 0 {
        if let Some(m) = c.me().replicaof {
            if let Some(mn) = c.nodes.get(&m) {
                let target = (mn.ip.clone(), mn.port);
                let replicating = st.repl.master.as_ref().is_some_and(|l| l.host == target.0 && l.port == target.1);
                if !replicating && !target.0.is_empty() {
                    super::replication::set_master(st, target.0, target.1);
                }
            }
        }
    }
    manual_failover_check_timeout(st, now);
    if cl(st).me().is_replica() {
        handle_manual_failover(st);
        handle_replica_failover(st);
        // Orphaned masters, and whether this replica is among those of a master with the most
        // working replicas: only then may it migrate (clusterCron's orphaned master check; a
        // migration needs a master with at least two working replicas).
        let c = cl(st);
        let (mut orphaned, mut max_replicas, mut mine) = (0, 0, 0);
        let my_master = c.me().replicaof;
        for n in c.nodes.values() {
            if n.flags & (NODE_MYSELF | NODE_NOADDR | NODE_HANDSHAKE) != 0 || !n.is_master() || n.failed() {
                continue;
            }
            let ok = working_replicas(c, n);
            if ok == 0 && n.numslots > 0 && n.flags & NODE_MIGRATE_TO != 0 {
                orphaned += 1;
            }
            max_replicas = max_replicas.max(ok);
            if my_master == Some(n.name) {
                mine = ok;
            }
        }
        if orphaned > 0
            && max_replicas >= 2
            && mine == max_replicas
            && cfg_bool(st, "cluster-allow-replica-migration", true)
        {
            handle_replica_migration(st, max_replicas, now);
        }
    }
    if update || cl(st).state == STATE_FAIL {
        update_state(st);
    }
    before_sleep(st);
}

/// A master's replicas not flagged FAIL (clusterCountNonFailingSlaves).
fn working_replicas(c: &ClusterState, m: &Node) -> usize {
    m.replicas.iter().filter_map(|r| c.nodes.get(r)).filter(|r| !r.failed()).count()
}

/// How long a master must stay orphaned before a replica migrates to it, so that its own
/// replicas can first say they switched to it after a failover (CLUSTER_SLAVE_MIGRATION_DELAY).
const REPLICA_MIGRATION_DELAY_MS: i64 = 5000;

/// clusterHandleSlaveMigration: this replica moves to an orphaned master (one with slots that
/// had replicas and has no working one left) when the cluster is ok, its own master keeps more
/// than cluster-migration-barrier working replicas, and it has the smallest id among the
/// replicas of the masters with the most working replicas.
fn handle_replica_migration(st: &mut State, max_replicas: usize, now: i64) {
    let barrier = cfg_i64(st, "cluster-migration-barrier", 1).max(0) as usize;
    let c = cl(st);
    if c.state != STATE_OK {
        return;
    }
    let Some(my_master) = c.me().replicaof.and_then(|m| c.nodes.get(&m)) else { return };
    let ok_mine =
        my_master.replicas.iter().filter_map(|r| c.nodes.get(r)).filter(|r| !r.failed() && !r.timed_out()).count();
    if ok_mine <= barrier {
        return;
    }
    let mut candidate = c.myself;
    let mut target: Option<Name> = None;
    let mut orphaned_since: Vec<(Name, i64)> = Vec::new();
    for n in c.nodes.values() {
        let ok = if n.is_master() { working_replicas(c, n) } else { 0 };
        let orphaned = !n.is_replica() && !n.failed() && n.flags & NODE_MIGRATE_TO != 0 && ok == 0;
        if orphaned {
            if target.is_none() && n.numslots > 0 {
                target = Some(n.name);
            }
            if n.orphaned_time == 0 {
                orphaned_since.push((n.name, now));
            }
        } else if n.orphaned_time != 0 {
            orphaned_since.push((n.name, 0));
        }
        if ok == max_replicas {
            for r in &n.replicas {
                if *r < candidate {
                    candidate = *r;
                }
            }
        }
    }
    for (name, t) in orphaned_since {
        if let Some(n) = c.nodes.get_mut(&name) {
            n.orphaned_time = t;
        }
    }
    let Some(target) = target else { return };
    let since = c.nodes.get(&target).map_or(now, |n| n.orphaned_time);
    if candidate == c.myself && now - since > REPLICA_MIGRATION_DELAY_MS {
        tracing::info!("Migrating to orphaned master {}", name_str(&target));
        set_my_master(st, target);
    }
}

/// Opens an outbound link to `name` and queues its first PING (or MEET).
fn connect(st: &mut State, name: Name, now: i64) {
    let c = cl(st);
    let Some(n) = c.nodes.get(&name) else { return };
    let (ip, port) = (n.ip.clone(), n.cport);
    let Some(bus) = c.bus.clone() else { return };
    if ip.is_empty() {
        return;
    }
    let (id, rx, queued) = new_link(st, Some(name), false);
    let c = cl(st);
    let Some(n) = c.nodes.get_mut(&name) else {
        free_link(c, id);
        return;
    };
    n.link = Some(id);
    let old_ping_sent = n.ping_sent;
    let meet = n.flags & NODE_MEET != 0;
    if bus.send(BusRequest::Connect { link: id, ip, port, rx, queued }).is_err() {
        free_link(c, id);
        return;
    }
    send_ping(st, id, if meet { msg::MEET } else { msg::PING });
    let c = cl(st);
    let Some(n) = c.nodes.get_mut(&name) else { return };
    if old_ping_sent != 0 {
        n.ping_sent = old_ping_sent;
    } else if n.ping_sent == 0 {
        n.ping_sent = now;
    }
    n.flags &= !NODE_MEET;
}

/// clusterUpdateState: ok when every slot is served by a reachable master (or full coverage is
/// not required) and a majority of masters is reachable.
pub fn update_state(st: &mut State) {
    let now = unix_ms();
    let timeout = node_timeout(st);
    let full = require_full_coverage(st);
    let c = cl(st);
    // A master that just started waits before declaring the cluster ok (CLUSTER_WRITABLE_DELAY).
    if !c.first_update_done && c.me().is_master() && now - c.startup_ms < 2000 {
        return;
    }
    c.first_update_done = true;
    let mut new_state = STATE_OK;
    if full {
        // A slot is served when its owner is known and not failed: OR the slot bitmaps of the
        // nodes not failed (kept with `slots` by add_slot / del_slot) and look for a hole. A walk
        // of the 16384 owners with a node lookup each cost tens of microseconds per SETSLOT,
        // ADDSLOTS or gossip pass; this reads 2 KiB per node.
        let mut covered = [0u64; SLOTS / 64];
        for n in c.nodes.values().filter(|n| n.numslots > 0 && !n.failed()) {
            for (w, bytes) in covered.iter_mut().zip(n.slots.chunks_exact(8)) {
                let mut word = [0u8; 8];
                word.copy_from_slice(bytes);
                *w |= u64::from_le_bytes(word);
            }
        }
        if covered.iter().any(|&w| w != u64::MAX) {
            new_state = STATE_FAIL;
        }
    }
    let size = c.masters_with_slots();
    let reachable =
        c.nodes.values().filter(|n| n.is_master() && n.numslots > 0 && n.flags & (NODE_FAIL | NODE_PFAIL) == 0).count();
    c.size = size;
    if reachable < size / 2 + 1 {
        new_state = STATE_FAIL;
        c.among_minority_time = now;
    }
    if new_state != c.state {
        let rejoin_delay = timeout.clamp(500, 5000);
        if new_state == STATE_OK && c.me().is_master() && now - c.among_minority_time < rejoin_delay {
            return;
        }
        tracing::warn!("Cluster state changed: {}", if new_state == STATE_OK { "ok" } else { "fail" });
        c.state = new_state;
    }
}

// -------------------------------------------------------------------------------------------
// Replicas and elections

/// Makes this node a replica of `master` (clusterSetMaster): drops its slots and replicates.
pub fn set_my_master(st: &mut State, master: Name) {
    let c = cl(st);
    let myself = c.myself;
    if c.me().is_master() {
        c.del_node_slots(&myself);
        c.importing.clear();
        c.migrating.clear();
        let me = c.me_mut();
        me.flags &= !(NODE_MASTER | NODE_MIGRATE_TO);
        me.flags |= NODE_SLAVE;
    } else if let Some(old) = c.me().replicaof {
        c.remove_replica(&old, &myself);
    }
    c.me_mut().replicaof = Some(master);
    c.add_replica(&master, &myself);
    follow_master(st, &master);
    c_reset_mf(st);
    todo(st, true, true);
}

fn follow_master(st: &mut State, master: &Name) {
    let target = st.cluster.as_ref().and_then(|c| c.nodes.get(master)).map(|n| (n.ip.clone(), n.port));
    if let Some((ip, port)) = target.filter(|(ip, _)| !ip.is_empty()) {
        super::replication::set_master(st, ip, port);
    }
}

fn c_reset_mf(st: &mut State) {
    let c = cl(st);
    if c.mf.replica.is_some() || c.mf.end != 0 {
        st.pause_held &= !super::PAUSE_CLUSTER_MF;
    }
    cl(st).mf = ManualFailover { master_offset: -1, ..Default::default() };
}

fn manual_failover_check_timeout(st: &mut State, now: i64) {
    let c = cl(st);
    if c.mf.end != 0 && c.mf.end < now {
        tracing::warn!("Manual failover timed out.");
        c_reset_mf(st);
    }
}

fn handle_manual_failover(st: &mut State) {
    let offset = st.repl.offset;
    let c = cl(st);
    if c.mf.end == 0 || c.mf.can_start || c.mf.master_offset == -1 {
        return;
    }
    if c.mf.master_offset == offset {
        c.mf.can_start = true;
        tracing::warn!("All master replication stream processed, manual failover can start.");
        c.todo_handle_failover = true;
    }
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica.
pub fn start_manual_failover(st: &mut State, force: bool, takeover: bool) {
    let now = unix_ms();
    c_reset_mf(st);
    cl(st).mf.end = now + MF_TIMEOUT;
    if takeover {
        tracing::warn!("Taking over the master (user request).");
        bump_epoch_without_consensus(st);
        replace_my_master(st);
    } else if force {
        tracing::warn!("Forced failover user request accepted.");
        cl(st).mf.can_start = true;
        cl(st).todo_handle_failover = true;
    } else {
        tracing::warn!("Manual failover user request accepted.");
        let c = cl(st);
        let link = c.me().replicaof.and_then(|m| c.nodes.get(&m)).and_then(|m| m.link);
        if let Some(l) = link {
            let hdr = header(st, msg::MFSTART);
            send(st, l, &Message { hdr, body: Body::Empty });
        }
    }
}

/// clusterBumpConfigEpochWithoutConsensus; true when the epoch changed.
pub fn bump_epoch_without_consensus(st: &mut State) -> bool {
    let c = cl(st);
    // clusterGetMaxEpoch: the greatest config epoch, or the current epoch when greater.
    let max = c.nodes.values().map(|n| n.config_epoch).max().unwrap_or(0).max(c.current_epoch);
    if c.me().config_epoch == 0 || c.me().config_epoch != max {
        c.current_epoch += 1;
        let e = c.current_epoch;
        c.me_mut().config_epoch = e;
        c.todo_save = true;
        tracing::warn!("New configEpoch set to {e}");
        true
    } else {
        // Silent, as in Redis: a resharding's target comes here on every slot after its first.
        false
    }
}

fn send_failover_auth_if_needed(st: &mut State, node: Name, request: &Header) {
    let now = unix_ms();
    let timeout = node_timeout(st);
    let c = cl(st);
    if c.me().is_replica() || c.me().numslots == 0 {
        return;
    }
    let req_current = request.current_epoch;
    let req_config = request.config_epoch;
    let force_ack = request.mflags[0] & msg::MFLAG0_FORCEACK != 0;
    let nm = name_str(&node).to_string();
    if req_current < c.current_epoch {
        tracing::warn!("Failover auth denied to {nm}: reqEpoch ({req_current}) < curEpoch({})", c.current_epoch);
        return;
    }
    if c.last_vote_epoch == c.current_epoch {
        tracing::warn!("Failover auth denied to {nm}: already voted for epoch {}", c.current_epoch);
        return;
    }
    let Some(n) = c.nodes.get(&node) else { return };
    if n.is_master() {
        tracing::warn!("Failover auth denied to {nm}: it is a master node");
        return;
    }
    let Some(master) = n.replicaof.and_then(|m| c.nodes.get(&m)) else {
        tracing::warn!("Failover auth denied to {nm}: I don't know its master");
        return;
    };
    if !master.failed() && !force_ack {
        tracing::warn!("Failover auth denied to {nm}: its master is up");
        return;
    }
    if now - master.voted_time < timeout * 2 {
        tracing::warn!(
            "Failover auth denied to {nm}: can't vote about this master before {} milliseconds",
            timeout * 2 - (now - master.voted_time)
        );
        return;
    }
    // Each owner's epoch is looked up once per run of its slots: a request claims thousands, and
    // a hashed lookup per slot held the executor about a millisecond per request.
    let mut last: Option<(&Name, Option<u64>)> = None;
    for j in 0..SLOTS {
        if !bit(&request.myslots, j) {
            continue;
        }
        let Some(owner) = c.owner_ref(j) else { continue };
        let epoch = match last {
            Some((l, e)) if l == owner => e,
            _ => {
                let e = c.nodes.get(owner).map(|o| o.config_epoch);
                last = Some((owner, e));
                e
            }
        };
        let Some(epoch) = epoch else { continue };
        if epoch <= req_config {
            continue;
        }
        tracing::warn!("Failover auth denied to {nm}: slot {j} epoch ({epoch}) > reqEpoch ({req_config})");
        return;
    }
    let master_name = master.name;
    c.last_vote_epoch = c.current_epoch;
    if let Some(m) = c.nodes.get_mut(&master_name) {
        m.voted_time = now;
    }
    c.todo_save = true;
    let epoch = c.current_epoch;
    let link = c.nodes.get(&node).and_then(|n| n.link);
    if let Some(l) = link {
        let hdr = header(st, msg::FAILOVER_AUTH_ACK);
        send(st, l, &Message { hdr, body: Body::Empty });
    }
    tracing::warn!("Failover auth granted to {nm} for epoch {epoch}");
}

/// How many other replicas of my master have a larger offset (clusterGetSlaveRank).
fn replica_rank(st: &State) -> usize {
    let c = st.cluster.as_ref().expect("cluster");
    let my_offset = st.repl.offset;
    let Some(m) = c.me().replicaof.and_then(|m| c.nodes.get(&m)) else { return 0 };
    m.replicas
        .iter()
        .filter(|r| **r != c.myself)
        .filter_map(|r| c.nodes.get(r))
        .filter(|r| r.flags & NODE_NOFAILOVER == 0 && r.repl_offset > my_offset)
        .count()
}

/// clusterHandleSlaveFailover: a replica of a failed master runs an election.
fn handle_replica_failover(st: &mut State) {
    let now = unix_ms();
    let timeout = node_timeout(st);
    let validity_factor = cfg_i64(st, "cluster-replica-validity-factor", 10);
    let repl_ping_period = cfg_i64(st, "repl-ping-replica-period", 10);
    let auth_timeout = (timeout * 2).max(2000);
    let auth_retry = auth_timeout * 2;
    let c = cl(st);
    let needed = c.size / 2 + 1;
    let manual = c.mf.end != 0 && c.mf.can_start;
    let me = c.me();
    let master = me.replicaof.and_then(|m| c.nodes.get(&m));
    let Some(master) = master else { return };
    if me.is_master()
        || (!master.failed() && !manual)
        || (me.flags & NODE_NOFAILOVER != 0 && !manual)
        || master.numslots == 0
    {
        c.cant_failover_reason = 0;
        return;
    }
    // Data age: how long since the master link was last alive.
    let mut data_age = match &st.repl.master {
        Some(l) if super::replication::link_up(st) => 0,
        Some(l) => now - l.down_since_ms,
        None => 0,
    };
    if data_age > timeout {
        data_age -= timeout;
    }
    let c = cl(st);
    if validity_factor != 0 && data_age > repl_ping_period * 1000 + timeout * validity_factor && !manual {
        if c.cant_failover_reason != 1 {
            c.cant_failover_reason = 1;
            tracing::warn!("Currently unable to failover: Disconnected from master for longer than allowed. Please check the 'cluster-replica-validity-factor' configuration option.");
        }
        return;
    }
    if now - c.failover_auth_time > auth_retry {
        let rank = replica_rank(st);
        let offset = st.repl.offset;
        let c = cl(st);
        c.failover_auth_time = now + 500 + fastrand::i64(0..500) + rank as i64 * 1000;
        c.failover_auth_count = 0;
        c.failover_auth_sent = false;
        c.failover_auth_rank = rank;
        if c.mf.end != 0 {
            c.failover_auth_time = now;
            c.failover_auth_rank = 0;
            c.todo_handle_failover = true;
        }
        tracing::warn!(
            "Start of election delayed for {} milliseconds (rank #{}, offset {}).",
            c.failover_auth_time - now,
            c.failover_auth_rank,
            offset
        );
        broadcast_pong(st, true);
        return;
    }
    if !c.failover_auth_sent && c.mf.end == 0 {
        let rank = replica_rank(st);
        let c = cl(st);
        if rank > c.failover_auth_rank {
            let added = (rank - c.failover_auth_rank) as i64 * 1000;
            c.failover_auth_time += added;
            c.failover_auth_rank = rank;
            tracing::warn!("Replica rank updated to #{rank}, added {added} milliseconds of delay.");
        }
    }
    let c = cl(st);
    if now < c.failover_auth_time {
        c.cant_failover_reason = 2;
        return;
    }
    if now - c.failover_auth_time > auth_timeout {
        if c.cant_failover_reason != 3 {
            c.cant_failover_reason = 3;
            tracing::warn!("Currently unable to failover: Failover attempt expired.");
        }
        return;
    }
    if !c.failover_auth_sent {
        c.current_epoch += 1;
        c.failover_auth_epoch = c.current_epoch;
        tracing::warn!("Starting a failover election for epoch {}.", c.current_epoch);
        let mut hdr = header(st, msg::FAILOVER_AUTH_REQUEST);
        if cl(st).mf.end != 0 {
            hdr.mflags[0] |= msg::MFLAG0_FORCEACK;
        }
        broadcast(st, &Message { hdr, body: Body::Empty });
        let c = cl(st);
        c.failover_auth_sent = true;
        c.todo_save = true;
        return;
    }
    if c.failover_auth_count >= needed {
        tracing::warn!("Failover election won: I'm the new master.");
        if c.me().config_epoch < c.failover_auth_epoch {
            let e = c.failover_auth_epoch;
            c.me_mut().config_epoch = e;
            tracing::warn!("configEpoch set to {e} after successful failover");
        }
        replace_my_master(st);
    } else {
        c.cant_failover_reason = 4;
    }
}

/// clusterFailoverReplaceYourMaster: this replica takes its master's slots and tells everyone.
fn replace_my_master(st: &mut State) {
    let c = cl(st);
    let myself = c.myself;
    let Some(old) = c.me().replicaof else { return };
    if c.me().is_master() {
        return;
    }
    set_node_as_master(st, myself);
    super::replication::unset_master(st);
    let c = cl(st);
    let taken = c.slots_of(&old);
    c.move_slots(&taken, &myself);
    update_state(st);
    // Fsynced even when no epoch changed (a replica that won an epoch collision as a master
    // keeps the highest config epoch), as Redis's clusterSaveConfigOrDie(1) here.
    cl(st).todo_save = false;
    post_save_as(st, true);
    broadcast_pong(st, false);
    c_reset_mf(st);
}

// -------------------------------------------------------------------------------------------
// Helpers for CLUSTER commands

/// CLUSTER MEET: starts a handshake (clusterStartHandshake); false for a bad address.
pub fn start_handshake(st: &mut State, ip: &str, port: u16, cport: u16) -> bool {
    let Ok(addr) = ip.parse::<std::net::IpAddr>() else { return false };
    if port == 0 || cport == 0 {
        return false;
    }
    let ip = addr.to_string();
    let c = cl(st);
    if c.handshake_in_progress(&ip, port, cport) {
        return true;
    }
    let mut n = Node::new(random_name(), NODE_HANDSHAKE | NODE_MEET, unix_ms());
    n.ip = ip;
    n.port = port;
    n.cport = cport;
    c.nodes.insert(n.name, n);
    true
}

/// DEBUG CLUSTERLINK KILL: frees the node's outbound (`to`) and/or inbound (`from`) link.
pub fn kill_links(st: &mut State, name: Name, to: bool, from: bool) {
    let c = cl(st);
    let Some(n) = c.nodes.get(&name) else { return };
    let links: Vec<u64> = [n.link.filter(|_| to), n.inbound_link.filter(|_| from)].into_iter().flatten().collect();
    for l in links {
        free_link(c, l);
    }
}

/// CLUSTER FORGET's removal (the caller checked the name).
pub fn forget(st: &mut State, name: Name) {
    let now = unix_ms();
    let c = cl(st);
    c.blacklist.insert(name, now / 1000 + BLACKLIST_TTL_S);
    for l in c.del_node(&name) {
        free_link(c, l);
    }
    todo(st, true, true);
}

/// CLUSTER RESET [HARD|SOFT] (clusterReset).
pub fn reset(st: &mut State, hard: bool) {
    let c = cl(st);
    if c.me().is_replica() {
        let myself = c.myself;
        set_node_as_master(st, myself);
        super::replication::unset_master(st);
        // The dataset of a former replica goes.
        for db in st.dbs.iter_mut() {
            db.clear();
        }
    }
    let c = cl(st);
    let myself = c.myself;
    c.importing.clear();
    c.migrating.clear();
    for j in 0..SLOTS {
        c.del_slot(j);
    }
    let others: Vec<Name> = c.nodes.keys().filter(|n| **n != myself).copied().collect();
    for n in others {
        for l in c.del_node(&n) {
            free_link(c, l);
        }
    }
    if hard {
        c.current_epoch = 0;
        c.last_vote_epoch = 0;
        c.me_mut().config_epoch = 0;
        let new = random_name();
        c.rename(&myself, new);
        c.set_myself(new);
        tracing::info!("Node hard reset, now I'm {}", name_str(&new));
    }
    todo(st, true, true);
    before_reply(st);
}

// -------------------------------------------------------------------------------------------
// Key routing (getNodeByQuery)

/// Clients blocked on keys this node no longer serves (a resharding moved their slot, or the
/// cluster went down) are answered with the redirect and unblocked, as Redis's
/// clusterRedirectBlockedClientIfNeeded does from its client cron.
pub fn redirect_blocked(st: &mut State) {
    let Some(c) = st.cluster.as_ref() else { return };
    let myself = c.myself;
    let mut answers: Vec<(u64, Redirect, bool)> = Vec::new();
    for (&id, client) in &st.clients {
        let Some(blocked) = client.blocked.as_ref() else { continue };
        if blocked.request.keys.is_empty() {
            continue;
        }
        let plaintext = plaintext_client(st, client.info.tls);
        if c.state != STATE_OK {
            answers.push((id, Redirect::DownState, plaintext));
            continue;
        }
        let write = blocked.cmd.spec.is_some_and(|s| s.has_flag(crate::spec::flags::WRITE));
        for key in &blocked.request.keys {
            let slot = key_hash_slot(key);
            let mut owner = c.owner(slot);
            // A READONLY replica serves the reads of its master's slots.
            if client.cluster_readonly && !write && c.me().is_replica() && c.me().replicaof == owner {
                owner = Some(myself);
            }
            if owner != Some(myself) && !c.importing.contains_key(&slot) {
                answers.push((id, owner.map_or(Redirect::DownUnbound, |n| Redirect::Moved(slot, n)), plaintext));
                break;
            }
        }
    }
    for (id, redirect, plaintext) in answers {
        let text = redirect.text(st, plaintext);
        super::blocking::finish(st, id, crate::resp::Reply::error(text));
    }
}

/// Why a command is not served here, as clusterRedirectClient words it.
#[derive(Debug, Clone, PartialEq)]
pub enum Redirect {
    CrossSlot,
    TryAgain,
    DownState,
    DownRoState,
    DownUnbound,
    Moved(usize, Name),
    Ask(usize, Name),
}

impl Redirect {
    /// The error line (without `-`); `plaintext_client`: see `Node::client_port`.
    pub fn text(&self, st: &State, plaintext_client: bool) -> String {
        match self {
            Redirect::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Redirect::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Redirect::DownState => "CLUSTERDOWN The cluster is down".into(),
            Redirect::DownRoState => "CLUSTERDOWN The cluster is down and only accepts read commands".into(),
            Redirect::DownUnbound => "CLUSTERDOWN Hash slot not served".into(),
            Redirect::Moved(slot, n) | Redirect::Ask(slot, n) => {
                let word = if matches!(self, Redirect::Moved(..)) { "MOVED" } else { "ASK" };
                let (endpoint, port) =
                    st.cluster.as_ref().and_then(|c| c.nodes.get(n)).map_or(("?".to_string(), 0), |node| {
                        (preferred_endpoint(st, node), node.client_port(plaintext_client))
                    });
                format!("{word} {slot} {endpoint}:{port}")
            }
        }
    }
}

/// The endpoint clients are sent to (cluster-preferred-endpoint-type).
pub fn preferred_endpoint(st: &State, n: &Node) -> String {
    match cfg_str(st, "cluster-preferred-endpoint-type") {
        "hostname" if !n.hostname.is_empty() => n.hostname.clone(),
        "hostname" => "?".into(),
        // Redis's getPreferredEndpoint: an empty endpoint (CLUSTER SLOTS shows a null).
        "unknown-endpoint" => String::new(),
        _ => n.ip.clone(),
    }
}

/// One command of a request: its keys (argument indices already resolved to bytes) and flags.
pub struct Routed<'a> {
    pub keys: &'a [&'a [u8]],
    pub write: bool,
    pub is_migrate: bool,
    pub asking_cmd: bool,
    /// SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH: served by replicas too, and by the pub/sub rule
    /// when the cluster is down.
    pub pubsubshard: bool,
}

/// The slot of `key` when this node serves it without a question: it owns the slot, the
/// cluster is ok, and the slot is neither migrating nor importing. Whatever the command (read
/// or write, ASKING, READONLY, MIGRATE, shard pub/sub), `route` answers Ok(slot) for one key
/// in such a slot, so the caller may skip gathering the command's flags.
#[inline]
pub fn served_here(c: &ClusterState, key: &[u8]) -> Option<usize> {
    let slot = key_hash_slot(key);
    let quiet = (c.migrating.is_empty() || !c.migrating.contains_key(&slot))
        && (c.importing.is_empty() || !c.importing.contains_key(&slot));
    (c.slot_is_mine(slot) && c.state == STATE_OK && quiet).then_some(slot)
}

/// Decides where the keys of `cmds` (one command, or EXEC's queue) are served, as Redis's
/// getNodeByQuery: Ok(slot) to run here (None without keys), or the redirect.
pub fn route(st: &mut State, cmds: &[Routed], asking: bool, readonly: bool) -> Result<Option<usize>, Redirect> {
    let Some(c) = st.cluster.as_ref() else { return Ok(None) };
    // Every command with keys passes here: "is the slot mine" is one bit of `my_slots`, and the
    // owner's 40-byte name is read only for a redirect or a replica's read (copying and
    // comparing names for each command cost ~100 instructions of a ~5000-instruction GET).
    // The usual case, one key of a slot this node serves and is not moving, on a healthy
    // cluster, is decided at once: what follows would answer the same.
    if let [Routed { keys: [key], .. }] = cmds {
        if let Some(slot) = served_here(c, key) {
            return Ok(Some(slot));
        }
    }
    let mut first: Option<&[u8]> = None;
    let mut slot = 0usize;
    let mut mine = false;
    let mut multiple_keys = false;
    let mut migrating = false;
    let mut importing = false;
    let mut missing = 0;
    let mut existing = 0;
    let mut write = false;
    let mut migrate_cmd = false;
    let mut asking_cmd = false;
    let mut pubsubshard = false;
    for cmd in cmds {
        pubsubshard |= cmd.pubsubshard;
        write |= cmd.write;
        migrate_cmd |= cmd.is_migrate;
        asking_cmd |= cmd.asking_cmd;
        for &key in cmd.keys {
            match first {
                None => {
                    first = Some(key);
                    slot = key_hash_slot(key);
                    mine = c.slot_is_mine(slot);
                    if !mine && c.owner_ref(slot).is_none() {
                        return Err(Redirect::DownUnbound);
                    }
                    if mine && !c.migrating.is_empty() && c.migrating.contains_key(&slot) {
                        migrating = true;
                    } else if !c.importing.is_empty() && c.importing.contains_key(&slot) {
                        importing = true;
                    }
                }
                // The same key again (SET k k, MSET k v k v) needs no hash.
                Some(f) if f == key => {}
                Some(_) => {
                    if key_hash_slot(key) != slot {
                        return Err(Redirect::CrossSlot);
                    }
                    multiple_keys = true;
                }
            }
            if (migrating || importing) && !cmd.pubsubshard {
                if st.dbs[0].is_live(key, unix_ms()) {
                    existing += 1;
                } else {
                    missing += 1;
                }
            }
        }
    }
    if first.is_none() {
        return Ok(None);
    }
    if c.state != STATE_OK {
        if pubsubshard {
            if !cfg_bool(st, "cluster-allow-pubsubshard-when-down", true) {
                return Err(Redirect::DownState);
            }
        } else if !allow_reads_when_down(st) {
            return Err(Redirect::DownState);
        } else if write {
            return Err(Redirect::DownRoState);
        }
    }
    if (migrating || importing) && migrate_cmd {
        return Ok(Some(slot));
    }
    if migrating && missing > 0 {
        if existing > 0 {
            return Err(Redirect::TryAgain);
        }
        let to = c.migrating[&slot];
        return Err(Redirect::Ask(slot, to));
    }
    if importing && (asking || asking_cmd) {
        if multiple_keys && missing > 0 {
            return Err(Redirect::TryAgain);
        }
        return Ok(Some(slot));
    }
    if mine {
        return Ok(Some(slot));
    }
    let Some(&n) = c.owner_ref(slot) else { return Err(Redirect::DownUnbound) };
    if (readonly || pubsubshard) && !write && c.me().is_replica() && c.me().replicaof == Some(n) {
        return Ok(Some(slot));
    }
    Err(Redirect::Moved(slot, n))
}
