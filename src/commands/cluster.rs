//! CLUSTER (Redis 7.0's subcommands, over `executor::cluster` and the state in
//! `crate::cluster`) and MODULE as Redis 7.0 without loadable modules answers it.
//!
//! Without cluster-enabled every CLUSTER subcommand (after its arity check) answers that cluster
//! support is disabled, as Redis's standalone build does. MODULE: no module is loaded, so LIST is empty; loading needs
//! `enable-module-command` (checked by `call()` like DEBUG's switch) and then fails as a Redis
//! that cannot load the file does, since Ferrodis runs no C modules.

use super::flags::*;
use super::{acl, container, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::cluster::{key_hash_slot, msg, name_str, parse_name, ClusterState, Name, Node, SLOTS};
use crate::executor::cluster;
use crate::resp::Reply;

const ADM: u32 = ADMIN | STALE | NO_ASYNC_LOADING;

pub static COMMANDS: &[CommandSpec] =
    &[container("cluster", -2, acl::SLOW, CLUSTER_SUBCOMMANDS), container("module", -2, acl::SLOW, MODULE_SUBCOMMANDS)];

static CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    spec("addslots", -3, ADM, NO_KEYS, 0, addslots),
    spec("addslotsrange", -4, ADM, NO_KEYS, 0, addslotsrange),
    spec("bumpepoch", 2, ADM, NO_KEYS, 0, bumpepoch),
    spec("count-failure-reports", 3, ADMIN | STALE, NO_KEYS, 0, count_failure_reports),
    spec("countkeysinslot", 3, STALE, NO_KEYS, 0, countkeysinslot),
    spec("delslots", -3, ADM, NO_KEYS, 0, delslots),
    spec("delslotsrange", -4, ADM, NO_KEYS, 0, delslotsrange),
    spec("failover", -2, ADM, NO_KEYS, 0, failover),
    spec("flushslots", 2, ADM, NO_KEYS, 0, flushslots),
    spec("forget", 3, ADM, NO_KEYS, 0, forget),
    spec("getkeysinslot", 4, STALE, NO_KEYS, 0, getkeysinslot),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, help),
    spec("info", 2, STALE, NO_KEYS, 0, info),
    spec("keyslot", 3, STALE, NO_KEYS, 0, keyslot),
    spec("links", 2, STALE, NO_KEYS, 0, links),
    spec("meet", -4, ADM, NO_KEYS, 0, meet),
    spec("myid", 2, STALE, NO_KEYS, 0, myid),
    spec("nodes", 2, STALE, NO_KEYS, 0, nodes),
    spec("replicas", 3, ADMIN | STALE, NO_KEYS, 0, replicas),
    spec("replicate", 3, ADM, NO_KEYS, 0, replicate),
    spec("reset", -2, ADMIN | NOSCRIPT | STALE, NO_KEYS, 0, reset),
    spec("saveconfig", 2, ADM, NO_KEYS, 0, saveconfig),
    spec("set-config-epoch", 3, ADM, NO_KEYS, 0, set_config_epoch),
    spec("setslot", -4, ADM, NO_KEYS, 0, setslot),
    spec("shards", 2, STALE, NO_KEYS, 0, shards),
    spec("slaves", 3, ADMIN | STALE, NO_KEYS, 0, replicas),
    spec("slots", 2, STALE, NO_KEYS, 0, slots),
];

static MODULE_SUBCOMMANDS: &[CommandSpec] = &[
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, module_help),
    spec("list", 2, ADMIN | NOSCRIPT, NO_KEYS, 0, module_list),
    spec("load", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, NO_KEYS, 0, module_load),
    spec("loadex", -3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, NO_KEYS, 0, module_load),
    spec("unload", 3, ADMIN | NOSCRIPT | NO_ASYNC_LOADING | PROTECTED, NO_KEYS, 0, module_unload),
];

/// CLUSTER <subcommand> on a standalone node.
pub fn cluster_disabled(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Err(CmdError::err("This instance has cluster support disabled"))
}

/// The cluster state, or the standalone refusal.
fn state<'a>(ctx: &'a mut Ctx) -> Result<&'a mut ClusterState, CmdError> {
    match ctx.admin().cluster.as_deref_mut() {
        Some(c) => Ok(c),
        None => Err(CmdError::err("This instance has cluster support disabled")),
    }
}

/// Whether the caller is sent to nodes' plaintext ports (`Node::client_port`).
fn plaintext_client(ctx: &mut Ctx) -> bool {
    let tls = ctx.client().info.tls;
    cluster::plaintext_client(ctx.admin(), tls)
}

fn lookup(c: &ClusterState, id: &[u8]) -> Option<Name> {
    parse_name(id).filter(|n| c.nodes.contains_key(n))
}

fn unknown_node(id: &[u8]) -> CmdError {
    CmdError::echo(&[b"ERR Unknown node ", id])
}

/// A slot argument (getSlotOrReply).
fn slot_arg(args: &Args, i: usize) -> Result<usize, CmdError> {
    match crate::util::num::parse_i64(args.get(i)) {
        Some(s) if (0..SLOTS as i64).contains(&s) => Ok(s as usize),
        _ => Err(CmdError::err("Invalid or out of range slot")),
    }
}

fn subcommand_syntax(name: &str) -> CmdError {
    CmdError::err(format!("unknown subcommand or wrong number of arguments for '{name}'. Try CLUSTER HELP."))
}

/// CLUSTER HELP
pub fn help(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    state(ctx)?;
    Ok(super::server::help_reply(
        "CLUSTER",
        &[
            "ADDSLOTS <slot> [<slot> ...]",
            "    Assign slots to current node.",
            "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Assign slots which are between <start-slot> and <end-slot> to current node.",
            "BUMPEPOCH",
            "    Advance the cluster config epoch.",
            "COUNT-FAILURE-REPORTS <node-id>",
            "    Return number of failure reports for <node-id>.",
            "COUNTKEYSINSLOT <slot>",
            "    Return the number of keys in <slot>.",
            "DELSLOTS <slot> [<slot> ...]",
            "    Delete slots information from current node.",
            "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
            "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
            "FAILOVER [FORCE|TAKEOVER]",
            "    Promote current replica node to being a master.",
            "FORGET <node-id>",
            "    Remove a node from the cluster.",
            "GETKEYSINSLOT <slot> <count>",
            "    Return key names stored by current node in a slot.",
            "FLUSHSLOTS",
            "    Delete current node own slots information.",
            "INFO",
            "    Return information about the cluster.",
            "KEYSLOT <key>",
            "    Return the hash slot for <key>.",
            "MEET <ip> <port> [<bus-port>]",
            "    Connect nodes into a working cluster.",
            "MYID",
            "    Return the node id.",
            "NODES",
            "    Return cluster configuration seen by node. Output format:",
            "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
            "REPLICATE <node-id>",
            "    Configure current node as replica to <node-id>.",
            "RESET [HARD|SOFT]",
            "    Reset current node (default: soft).",
            "SET-CONFIG-EPOCH <epoch>",
            "    Set config epoch of current node.",
            "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
            "    Set slot state.",
            "REPLICAS <node-id>",
            "    Return <node-id> replicas.",
            "SAVECONFIG",
            "    Force saving cluster configuration on disk.",
            "SLOTS",
            "    Return information about slots range mappings. Each range is made of:",
            "    start, end, master and replicas IP addresses, ports and ids",
            "SHARDS",
            "    Return information about slot range mappings and the nodes associated with them.",
            "LINKS",
            "    Return information about all network links between this node and its peers.",
            "    Output format is an array where each array element is a map containing attributes of a link",
        ],
    ))
}

/// CLUSTER MYID
pub fn myid(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let c = state(ctx)?;
    Ok(Reply::bulk(&c.myself[..]))
}

/// CLUSTER NODES
pub fn nodes(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let plaintext = plaintext_client(ctx);
    let c = state(ctx)?;
    Ok(Reply::Verbatim("txt", c.nodes_text(true, plaintext).into_bytes()))
}

/// CLUSTER INFO
pub fn info(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    state(ctx)?;
    Ok(Reply::Verbatim("txt", info_text(ctx.admin()).into_bytes()))
}

/// CLUSTER INFO's text.
pub fn info_text(st: &crate::executor::State) -> String {
    let Some(c) = st.cluster.as_deref() else { return String::new() };
    let (mut assigned, mut ok, mut pfail, mut fail) = (0, 0, 0, 0);
    // Owners come in long runs of slots: classify each run's owner once (a hash lookup per
    // slot made CLUSTER INFO cost a millisecond).
    let mut last = None;
    for owner in c.owners().flatten() {
        assigned += 1;
        let class = match last {
            Some((o, class)) if o == *owner => class,
            _ => {
                let class = match c.nodes.get(owner) {
                    Some(n) if n.failed() => 2,
                    Some(n) if n.timed_out() => 1,
                    _ => 0,
                };
                last = Some((*owner, class));
                class
            }
        };
        match class {
            2 => fail += 1,
            1 => pfail += 1,
            _ => ok += 1,
        }
    }
    let mut s = format!(
        "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{ok}\r\ncluster_slots_pfail:{pfail}\r\ncluster_slots_fail:{fail}\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n",
        if c.state == crate::cluster::STATE_OK { "ok" } else { "fail" },
        c.nodes.len(),
        c.size,
        c.current_epoch,
        c.node_epoch(c.me()),
    );
    let mut total = 0;
    for (i, n) in c.stats_sent.iter().enumerate() {
        if *n > 0 {
            s.push_str(&format!("cluster_stats_messages_{}_sent:{n}\r\n", msg::TYPE_NAMES[i]));
            total += n;
        }
    }
    s.push_str(&format!("cluster_stats_messages_sent:{total}\r\n"));
    let mut total = 0;
    for (i, n) in c.stats_received.iter().enumerate() {
        if *n > 0 {
            s.push_str(&format!("cluster_stats_messages_{}_received:{n}\r\n", msg::TYPE_NAMES[i]));
            total += n;
        }
    }
    s.push_str(&format!("cluster_stats_messages_received:{total}\r\n"));
    s.push_str(&format!("total_cluster_links_buffer_limit_exceeded:{}\r\n", c.links_buffer_limit_exceeded));
    s
}

/// CLUSTER KEYSLOT key
pub fn keyslot(ctx: &mut Ctx, args: &Args) -> CmdResult {
    state(ctx)?;
    Ok(Reply::Int(key_hash_slot(args.get(2)) as i64))
}

/// CLUSTER COUNTKEYSINSLOT slot
pub fn countkeysinslot(ctx: &mut Ctx, args: &Args) -> CmdResult {
    state(ctx)?;
    let slot = args.i64(2)?;
    if !(0..SLOTS as i64).contains(&slot) {
        return Err(CmdError::err("Invalid slot"));
    }
    Ok(Reply::Int(ctx.admin().dbs[0].count_keys_in_slot(slot as usize) as i64))
}

/// CLUSTER GETKEYSINSLOT slot count
pub fn getkeysinslot(ctx: &mut Ctx, args: &Args) -> CmdResult {
    state(ctx)?;
    let slot = args.i64(2)?;
    let count = args.i64(3)?;
    if !(0..SLOTS as i64).contains(&slot) || count < 0 {
        return Err(CmdError::err("Invalid slot or number of keys"));
    }
    let keys = ctx.admin().dbs[0].keys_in_slot(slot as usize, count as usize);
    Ok(Reply::Array(keys.into_iter().map(Reply::bulk).collect()))
}

/// CLUSTER MEET ip port [cport]
pub fn meet(ctx: &mut Ctx, args: &Args) -> CmdResult {
    state(ctx)?;
    if args.len() != 4 && args.len() != 5 {
        return Err(subcommand_syntax("meet"));
    }
    let Some(port) = crate::util::num::parse_i64(args.get(3)) else {
        return Err(CmdError::echo(&[b"ERR Invalid TCP base port specified: ", args.get(3)]));
    };
    let cport = if args.len() == 5 {
        match crate::util::num::parse_i64(args.get(4)) {
            Some(p) => p,
            None => return Err(CmdError::echo(&[b"ERR Invalid TCP bus port specified: ", args.get(4)])),
        }
    } else {
        port + 10000
    };
    let ip = args.str(2);
    let valid = (1..=65535).contains(&port) && (1..=65535).contains(&cport);
    if !valid || !cluster::start_handshake(ctx.admin(), &ip, port as u16, cport as u16) {
        return Err(CmdError::echo(&[b"ERR Invalid node address specified: ", args.get(2), b":", args.get(3)]));
    }
    Ok(Reply::Ok)
}

/// Slots named by ADDSLOTS/DELSLOTS (one each) or their RANGE forms (pairs), checked as Redis
/// does before any is changed.
fn slots_of(ctx: &mut Ctx, args: &Args, ranges: bool, del: bool) -> Result<Vec<usize>, CmdError> {
    let c = state(ctx)?;
    let mut wanted = Vec::new();
    if ranges {
        if args.len() % 2 == 1 {
            let sub = if del { "delslotsrange" } else { "addslotsrange" };
            return Err(CmdError::WrongArity(format!("cluster|{sub}")));
        }
        let mut i = 2;
        while i + 1 < args.len() {
            let a = slot_arg(args, i)?;
            let b = slot_arg(args, i + 1)?;
            if a > b {
                return Err(CmdError::err(format!("start slot number {a} is greater than end slot number {b}")));
            }
            wanted.extend(a..=b);
            i += 2;
        }
    } else {
        for i in 2..args.len() {
            wanted.push(slot_arg(args, i)?);
        }
    }
    let mut seen = vec![false; SLOTS];
    for &s in &wanted {
        if del && c.owner(s).is_none() {
            return Err(CmdError::err(format!("Slot {s} is already unassigned")));
        } else if !del && c.owner(s).is_some() {
            return Err(CmdError::err(format!("Slot {s} is already busy")));
        }
        if seen[s] {
            return Err(CmdError::err(format!("Slot {s} specified multiple times")));
        }
        seen[s] = true;
    }
    Ok(wanted)
}

fn change_slots(ctx: &mut Ctx, args: &Args, ranges: bool, del: bool) -> CmdResult {
    let slots = slots_of(ctx, args, ranges, del)?;
    let c = state(ctx)?;
    let me = c.myself;
    for s in slots {
        if del {
            c.del_slot(s);
        } else {
            c.importing.remove(&s);
            c.add_slot(&me, s);
        }
    }
    c.todo_save = true;
    c.todo_update_state = true;
    Ok(once_saved(ctx, Reply::Ok))
}

/// The reply of a CLUSTER command that changed the configuration: it follows the saves that hold
/// bus output (an epoch change), as Redis replies after beforeSleep's fsync. The client waits for
/// them, not the executor, unless the reply must be immediate (MULTI, scripts).
fn once_saved(ctx: &mut Ctx, reply: Reply) -> Reply {
    if ctx.client().defers_reply() {
        let proto = ctx.proto();
        cluster::reply_after_saves(ctx.admin(), reply, proto)
    } else {
        cluster::before_reply(ctx.admin());
        reply
    }
}

/// CLUSTER ADDSLOTS slot [slot ...]
pub fn addslots(ctx: &mut Ctx, args: &Args) -> CmdResult {
    change_slots(ctx, args, false, false)
}
/// CLUSTER ADDSLOTSRANGE start end [start end ...]
pub fn addslotsrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    change_slots(ctx, args, true, false)
}
/// CLUSTER DELSLOTS slot [slot ...]
pub fn delslots(ctx: &mut Ctx, args: &Args) -> CmdResult {
    change_slots(ctx, args, false, true)
}
/// CLUSTER DELSLOTSRANGE start end [start end ...]
pub fn delslotsrange(ctx: &mut Ctx, args: &Args) -> CmdResult {
    change_slots(ctx, args, true, true)
}

/// CLUSTER FLUSHSLOTS
pub fn flushslots(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    state(ctx)?;
    if !ctx.admin().dbs[0].is_empty() {
        return Err(CmdError::err("DB must be empty to perform CLUSTER FLUSHSLOTS."));
    }
    let c = state(ctx)?;
    let me = c.myself;
    c.del_node_slots(&me);
    c.todo_save = true;
    c.todo_update_state = true;
    Ok(once_saved(ctx, Reply::Ok))
}

/// CLUSTER SETSLOT slot IMPORTING node | MIGRATING node | STABLE | NODE node
pub fn setslot(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let c = state(ctx)?;
    if c.me().is_replica() {
        return Err(CmdError::err("Please use SETSLOT only with masters."));
    }
    let slot = slot_arg(args, 2)?;
    let me = c.myself;
    let action = args.get(3).to_ascii_lowercase();
    let node_arg = |c: &ClusterState, unknown: &str| -> Result<Name, CmdError> {
        let id = args.get(4);
        let n = lookup(c, id).ok_or_else(|| CmdError::echo(&[b"ERR ", unknown.as_bytes(), b" ", id]))?;
        if c.nodes[&n].is_replica() {
            return Err(CmdError::err("Target node is not a master"));
        }
        Ok(n)
    };
    match (&action[..], args.len()) {
        (b"migrating", 5) => {
            if c.owner(slot) != Some(me) {
                return Err(CmdError::err(format!("I'm not the owner of hash slot {slot}")));
            }
            let n = node_arg(c, "I don't know about node")?;
            c.migrating.insert(slot, n);
        }
        (b"importing", 5) => {
            if c.owner(slot) == Some(me) {
                return Err(CmdError::err(format!("I'm already the owner of hash slot {slot}")));
            }
            let n = node_arg(c, "I don't know about node")?;
            c.importing.insert(slot, n);
        }
        (b"stable", 4) => {
            c.importing.remove(&slot);
            c.migrating.remove(&slot);
        }
        (b"node", 5) => {
            let n = node_arg(c, "Unknown node")?;
            let keys = ctx.admin().dbs[0].count_keys_in_slot(slot);
            let allow_migration = ctx.config().other.get("cluster-allow-replica-migration").is_none_or(|v| v == "yes");
            let c = state(ctx)?;
            if c.owner(slot) == Some(me) && n != me && keys != 0 {
                return Err(CmdError::err(format!(
                    "Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                )));
            }
            if keys == 0 {
                c.migrating.remove(&slot);
            }
            let was_mine = c.owner(slot) == Some(me);
            c.del_slot(slot);
            c.add_slot(&n, slot);
            if was_mine && n != me && c.me().numslots == 0 && allow_migration {
                tracing::warn!("Configuration change detected. Reconfiguring myself as a replica of {}", name_str(&n));
                cluster::set_my_master(ctx.admin(), n);
            }
            let c = state(ctx)?;
            if n == me && c.importing.contains_key(&slot) {
                if cluster::bump_epoch_without_consensus(ctx.admin()) {
                    tracing::warn!("configEpoch updated after importing slot {slot}");
                }
                state(ctx)?.importing.remove(&slot);
                cluster::broadcast_pong_all(ctx.admin());
            }
        }
        _ => return Err(CmdError::err("Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")),
    }
    let c = state(ctx)?;
    c.todo_save = true;
    c.todo_update_state = true;
    Ok(once_saved(ctx, Reply::Ok))
}

/// CLUSTER BUMPEPOCH
pub fn bumpepoch(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    state(ctx)?;
    let bumped = cluster::bump_epoch_without_consensus(ctx.admin());
    let epoch = state(ctx)?.me().config_epoch;
    let reply = Reply::StatusOwned(format!("{} {epoch}", if bumped { "BUMPED" } else { "STILL" }));
    Ok(once_saved(ctx, reply))
}

/// CLUSTER SET-CONFIG-EPOCH epoch
pub fn set_config_epoch(ctx: &mut Ctx, args: &Args) -> CmdResult {
    state(ctx)?;
    let epoch = args.i64(2)?;
    let c = state(ctx)?;
    if epoch < 0 {
        return Err(CmdError::err(format!("Invalid config epoch specified: {epoch}")));
    }
    if c.nodes.len() > 1 {
        return Err(CmdError::err(
            "The user can assign a config epoch only when the node does not know any other node.",
        ));
    }
    if c.me().config_epoch != 0 {
        return Err(CmdError::err("Node config epoch is already non-zero"));
    }
    c.me_mut().config_epoch = epoch as u64;
    tracing::warn!("configEpoch set to {epoch} via CLUSTER SET-CONFIG-EPOCH");
    if c.current_epoch < epoch as u64 {
        c.current_epoch = epoch as u64;
    }
    c.todo_save = true;
    c.todo_update_state = true;
    Ok(once_saved(ctx, Reply::Ok))
}

/// CLUSTER FORGET node
pub fn forget(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let c = state(ctx)?;
    let Some(n) = lookup(c, args.get(2)) else { return Err(unknown_node(args.get(2))) };
    if n == c.myself {
        return Err(CmdError::err("I tried hard but I can't forget myself..."));
    }
    if c.me().is_replica() && c.me().replicaof == Some(n) {
        return Err(CmdError::err("Can't forget my master!"));
    }
    cluster::forget(ctx.admin(), n);
    Ok(once_saved(ctx, Reply::Ok))
}

/// CLUSTER REPLICATE node
pub fn replicate(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let keys = ctx.admin().dbs[0].len();
    let c = state(ctx)?;
    let Some(n) = lookup(c, args.get(2)) else { return Err(unknown_node(args.get(2))) };
    if n == c.myself {
        return Err(CmdError::err("Can't replicate myself"));
    }
    if c.nodes[&n].is_replica() {
        return Err(CmdError::err("I can only replicate a master, not a replica."));
    }
    if c.me().is_master() && (c.me().numslots != 0 || keys != 0) {
        return Err(CmdError::err("To set a master the node must be empty and without assigned slots."));
    }
    cluster::set_my_master(ctx.admin(), n);
    Ok(once_saved(ctx, Reply::Ok))
}

/// CLUSTER REPLICAS node / CLUSTER SLAVES node
pub fn replicas(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let plaintext = plaintext_client(ctx);
    let c = state(ctx)?;
    let Some(n) = lookup(c, args.get(2)) else { return Err(unknown_node(args.get(2))) };
    let node = &c.nodes[&n];
    if node.is_replica() {
        return Err(CmdError::err("The specified node is not a master"));
    }
    let lines = node
        .replicas
        .iter()
        .filter_map(|r| c.nodes.get(r))
        .map(|r| Reply::bulk(c.node_line(r, true, plaintext)))
        .collect();
    Ok(Reply::Array(lines))
}

/// CLUSTER COUNT-FAILURE-REPORTS node
pub fn count_failure_reports(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let validity = cluster::node_timeout(ctx.admin()) * 2;
    let now = ctx.now_ms();
    let c = state(ctx)?;
    let Some(n) = lookup(c, args.get(2)) else { return Err(unknown_node(args.get(2))) };
    let node = c.nodes.get_mut(&n).expect("known");
    node.fail_reports.retain(|(_, t)| now - t <= validity);
    Ok(Reply::Int(node.fail_reports.len() as i64))
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER]
pub fn failover(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let c = state(ctx)?;
    let (mut force, mut takeover) = (false, false);
    if args.len() == 3 {
        if args.is(2, "force") {
            force = true;
        } else if args.is(2, "takeover") {
            takeover = true;
            force = true;
        } else {
            return Err(CmdError::Syntax);
        }
    } else if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    if c.me().is_master() {
        return Err(CmdError::err("You should send CLUSTER FAILOVER to a replica"));
    }
    let Some(master) = c.me().replicaof.and_then(|m| c.nodes.get(&m)) else {
        return Err(CmdError::err("I'm a replica but my master is unknown to me"));
    };
    if !force && (master.failed() || master.link.is_none()) {
        return Err(CmdError::err("Master is down or failed, please use CLUSTER FAILOVER FORCE"));
    }
    cluster::start_manual_failover(ctx.admin(), force, takeover);
    Ok(once_saved(ctx, Reply::Ok))
}

/// CLUSTER RESET [HARD|SOFT]
pub fn reset(ctx: &mut Ctx, args: &Args) -> CmdResult {
    state(ctx)?;
    let hard = match args.len() {
        2 => false,
        3 if args.is(2, "hard") => true,
        3 if args.is(2, "soft") => false,
        _ => return Err(CmdError::Syntax),
    };
    let keys = ctx.admin().dbs[0].len();
    if state(ctx)?.me().is_master() && keys != 0 {
        return Err(CmdError::err("CLUSTER RESET can't be called with master nodes containing keys"));
    }
    cluster::reset(ctx.admin(), hard);
    Ok(Reply::Ok)
}

/// CLUSTER SAVECONFIG
pub fn saveconfig(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    state(ctx)?;
    cluster::save_config_sync(ctx.admin()).map_err(|e| {
        CmdError::err(format!(
            "error saving the cluster node config: {}",
            e.trim_start_matches("Could not save cluster config file: ")
        ))
    })?;
    Ok(Reply::Ok)
}

/// One node of CLUSTER SLOTS: endpoint, port, id, and the other endpoints as metadata.
fn slot_node(st: &crate::executor::State, n: &Node, plaintext_client: bool) -> Reply {
    let endpoint = cluster::preferred_endpoint(st, n);
    let pref = st.config.other.get("cluster-preferred-endpoint-type").map_or("ip", String::as_str);
    let mut meta = Vec::new();
    // The IP goes with any other preferred endpoint, even empty (Redis's addNodeToNodeReply).
    if pref != "ip" {
        meta.push((Reply::bulk("ip"), Reply::bulk(n.ip.as_bytes())));
    }
    if pref != "hostname" && !n.hostname.is_empty() {
        meta.push((Reply::bulk("hostname"), Reply::bulk(n.hostname.as_bytes())));
    }
    // An unknown endpoint is a null: the client is to use the address it reached this node at.
    let endpoint = if pref == "unknown-endpoint" { Reply::Nil } else { Reply::bulk(endpoint.into_bytes()) };
    Reply::Array(vec![
        endpoint,
        Reply::Int(n.client_port(plaintext_client) as i64),
        Reply::bulk(&n.name[..]),
        Reply::Map(meta),
    ])
}

/// CLUSTER SLOTS
pub fn slots(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let plaintext = plaintext_client(ctx);
    state(ctx)?;
    let st = ctx.admin();
    let c = st.cluster.as_deref().expect("checked");
    let mut out = Vec::new();
    let mut start = 0;
    let mut cur: Option<Name> = None;
    for i in 0..=SLOTS {
        let owner = if i < SLOTS { c.owner(i) } else { None };
        if owner != cur || i == SLOTS {
            if let Some(n) = cur.and_then(|n| c.nodes.get(&n)) {
                let mut entry = vec![Reply::Int(start as i64), Reply::Int(i as i64 - 1), slot_node(st, n, plaintext)];
                // Only replicas that are up and done with their first sync (Redis's
                // isReplicaAvailable: a replica loading reports offset 0).
                for r in n.replicas.iter().filter_map(|r| c.nodes.get(r)) {
                    let offset = if r.name == c.myself { cluster::my_repl_offset(st) } else { r.repl_offset };
                    if !r.failed() && offset != 0 {
                        entry.push(slot_node(st, r, plaintext));
                    }
                }
                out.push(Reply::Array(entry));
            }
            cur = owner;
            start = i;
        }
    }
    Ok(Reply::Array(out))
}

fn shard_node(st: &crate::executor::State, c: &ClusterState, n: &Node) -> Reply {
    let mut m = vec![(Reply::bulk("id"), Reply::bulk(&n.name[..]))];
    // A TLS cluster: the TLS port, and the plaintext one when the node has one.
    if cluster::tls_cluster(&st.config) {
        if n.pport != 0 {
            m.push((Reply::bulk("port"), Reply::Int(n.pport as i64)));
        }
        m.push((Reply::bulk("tls-port"), Reply::Int(n.port as i64)));
    } else {
        m.push((Reply::bulk("port"), Reply::Int(n.port as i64)));
    }
    m.push((Reply::bulk("ip"), Reply::bulk(n.ip.as_bytes())));
    m.push((Reply::bulk("endpoint"), Reply::bulk(cluster::preferred_endpoint(st, n).into_bytes())));
    if !n.hostname.is_empty() {
        m.push((Reply::bulk("hostname"), Reply::bulk(n.hostname.as_bytes())));
    }
    m.push((Reply::bulk("role"), Reply::bulk(if n.is_replica() { "replica" } else { "master" })));
    let offset = if n.name == c.myself { cluster::my_repl_offset(st) } else { n.repl_offset };
    m.push((Reply::bulk("replication-offset"), Reply::Int(offset)));
    let health = if n.failed() {
        "fail"
    } else if n.is_replica() && offset == 0 {
        "loading"
    } else {
        "online"
    };
    m.push((Reply::bulk("health"), Reply::bulk(health)));
    Reply::Map(m)
}

/// CLUSTER SHARDS
pub fn shards(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    state(ctx)?;
    let st = ctx.admin();
    let c = st.cluster.as_deref().expect("checked");
    let mut names: Vec<&Name> = c.nodes.keys().collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let n = &c.nodes[name];
        if !n.is_master() || n.in_handshake() {
            continue;
        }
        let slots: Vec<Reply> = crate::cluster::ranges(&n.slots)
            .into_iter()
            .flat_map(|(a, b)| [Reply::Int(a as i64), Reply::Int(b as i64)])
            .collect();
        let mut nodes = vec![shard_node(st, c, n)];
        for r in n.replicas.iter().filter_map(|r| c.nodes.get(r)) {
            nodes.push(shard_node(st, c, r));
        }
        out.push(Reply::Map(vec![
            (Reply::bulk("slots"), Reply::Array(slots)),
            (Reply::bulk("nodes"), Reply::Array(nodes)),
        ]));
    }
    Ok(Reply::Array(out))
}

/// CLUSTER LINKS
pub fn links(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let c = state(ctx)?;
    let mut ids: Vec<&u64> = c.links.keys().collect();
    ids.sort();
    let mut out = Vec::new();
    for id in ids {
        let l = &c.links[id];
        let Some(node) = l.node else { continue };
        let used = l.queued.load(std::sync::atomic::Ordering::Relaxed);
        out.push(Reply::Map(vec![
            (Reply::bulk("direction"), Reply::bulk(if l.inbound { "from" } else { "to" })),
            (Reply::bulk("node"), Reply::bulk(&node[..])),
            (Reply::bulk("create-time"), Reply::Int(l.ctime)),
            (Reply::bulk("events"), Reply::bulk(l.events.as_bytes())),
            (Reply::bulk("send-buffer-allocated"), Reply::Int(used as i64)),
            (Reply::bulk("send-buffer-used"), Reply::Int(used as i64)),
        ]));
    }
    Ok(Reply::Array(out))
}

/// MODULE HELP
pub fn module_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(super::server::help_reply(
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    ))
}

/// MODULE LIST: the loaded modules, none here.
pub fn module_list(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Array(Vec::new()))
}

/// MODULE LOAD path [arg ...] / MODULE LOADEX path ...: Ferrodis cannot run Redis's C modules,
/// so the load fails as Redis's does for a file it cannot load, with the reason in the log.
pub fn module_load(_ctx: &mut Ctx, args: &Args) -> CmdResult {
    tracing::warn!(
        "Module {} failed to load: Ferrodis does not load Redis modules",
        String::from_utf8_lossy(args.get(2))
    );
    Err(CmdError::err("Error loading the extension. Please check the server logs."))
}

/// MODULE UNLOAD name: there is no module of any name.
pub fn module_unload(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Err(CmdError::err("Error unloading module: no such module with that name"))
}
