//! Pub/Sub and MONITOR commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PUBLISH, SPUBLISH, PUBSUB,
//! MONITOR. The channel tables are `crate::pubsub`; delivery to the receiving clients (and
//! keyspace notifications) is `crate::executor::pubsub`.

use super::{acl, container, flags::*, keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::executor::pubsub::{frame, publish_message};
use crate::pubsub::Kind;
use crate::resp::Reply;

const SUB: u32 = PUBSUB | NOSCRIPT | LOADING | STALE;

pub static COMMANDS: &[CommandSpec] = &[
    spec("subscribe", -2, SUB, NO_KEYS, 0, subscribe),
    spec("unsubscribe", -1, SUB, NO_KEYS, 0, unsubscribe),
    spec("psubscribe", -2, SUB, NO_KEYS, 0, psubscribe),
    spec("punsubscribe", -1, SUB, NO_KEYS, 0, punsubscribe),
    spec("ssubscribe", -2, SUB, keys(1, -1, 1), 0, ssubscribe),
    spec("sunsubscribe", -1, SUB, keys(1, -1, 1), 0, sunsubscribe),
    spec("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, NO_KEYS, 0, publish),
    spec("spublish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, keys(1, 1, 1), 0, spublish),
    container("pubsub", -2, acl::SLOW, PUBSUB_SUBCOMMANDS),
    spec("monitor", 1, ADMIN | NOSCRIPT | LOADING | STALE, NO_KEYS, 0, monitor),
];

static PUBSUB_SUBCOMMANDS: &[CommandSpec] = &[
    spec("shardchannels", -2, PUBSUB | LOADING | STALE, NO_KEYS, 0, pubsub_shardchannels),
    spec("channels", -2, PUBSUB | LOADING | STALE, NO_KEYS, 0, pubsub_channels),
    spec("numsub", -2, PUBSUB | LOADING | STALE, NO_KEYS, 0, pubsub_numsub),
    spec("shardnumsub", -2, PUBSUB | LOADING | STALE, NO_KEYS, 0, pubsub_shardnumsub),
    spec("numpat", 2, PUBSUB | LOADING | STALE, NO_KEYS, 0, pubsub_numpat),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, pubsub_help),
];

/// Confirmation frames for (un)subscriptions, concatenated as one raw reply.
fn confirm(out: &mut Vec<u8>, word: &'static [u8], name: Option<&[u8]>, count: usize, proto: u8) {
    let name = name.map_or(Reply::Nil, Reply::bulk);
    frame(out, vec![Reply::bulk(word), name, Reply::Int(count as i64)], proto);
}

/// The confirmations go out as pushes (arrays in RESP2), which Redis delivers whatever CLIENT
/// REPLY OFF/SKIP says: the command itself has no reply to silence.
fn confirmations(ctx: &mut Ctx, out: Vec<u8>) -> CmdResult {
    ctx.admin().pubsub.self_out.extend_from_slice(&out);
    Ok(Reply::Raw(Vec::new()))
}

fn do_subscribe(ctx: &mut Ctx, args: &Args, kind: Kind, word: &'static [u8]) -> CmdResult {
    let id = ctx.client().id;
    let proto = ctx.client().proto;
    let mut out = Vec::new();
    for name in args.from(1) {
        ctx.admin().pubsub.subscribe(id, kind, name);
        let (plain, shard) = ctx.state().pubsub.counts(id);
        confirm(&mut out, word, Some(name), if kind == Kind::Shard { shard } else { plain }, proto);
    }
    confirmations(ctx, out)
}

fn do_unsubscribe(ctx: &mut Ctx, args: &Args, kind: Kind, word: &'static [u8]) -> CmdResult {
    let id = ctx.client().id;
    let proto = ctx.client().proto;
    let names: Vec<Vec<u8>> =
        if args.len() > 1 { args.from(1).map(<[u8]>::to_vec).collect() } else { ctx.state().pubsub.names_of(id, kind) };
    let count = |ctx: &Ctx| {
        let (plain, shard) = ctx.state().pubsub.counts(id);
        if kind == Kind::Shard {
            shard
        } else {
            plain
        }
    };
    let mut out = Vec::new();
    if names.is_empty() {
        confirm(&mut out, word, None, count(ctx), proto);
    }
    for name in names {
        ctx.admin().pubsub.unsubscribe(id, kind, &name);
        confirm(&mut out, word, Some(&name), count(ctx), proto);
    }
    confirmations(ctx, out)
}

/// SUBSCRIBE channel [channel ...]
///
/// Subscribes to each channel, answering one confirmation frame per channel with the client's
/// count of channel and pattern subscriptions.
pub fn subscribe(ctx: &mut Ctx, args: &Args) -> CmdResult {
    do_subscribe(ctx, args, Kind::Channel, b"subscribe")
}

/// UNSUBSCRIBE [channel ...]
///
/// Unsubscribes from the channels (all of them without arguments); with nothing to unsubscribe
/// from it answers a single frame with a null channel.
pub fn unsubscribe(ctx: &mut Ctx, args: &Args) -> CmdResult {
    do_unsubscribe(ctx, args, Kind::Channel, b"unsubscribe")
}

/// PSUBSCRIBE pattern [pattern ...]
///
/// Subscribes to glob patterns; messages on matching channels arrive as `pmessage` frames.
pub fn psubscribe(ctx: &mut Ctx, args: &Args) -> CmdResult {
    do_subscribe(ctx, args, Kind::Pattern, b"psubscribe")
}

/// PUNSUBSCRIBE [pattern ...]
///
/// UNSUBSCRIBE for patterns.
pub fn punsubscribe(ctx: &mut Ctx, args: &Args) -> CmdResult {
    do_unsubscribe(ctx, args, Kind::Pattern, b"punsubscribe")
}

/// SSUBSCRIBE shardchannel [shardchannel ...]
///
/// Subscribes to shard channels; the count in each confirmation is of shard channels only.
pub fn ssubscribe(ctx: &mut Ctx, args: &Args) -> CmdResult {
    do_subscribe(ctx, args, Kind::Shard, b"ssubscribe")
}

/// SUNSUBSCRIBE [shardchannel ...]
///
/// UNSUBSCRIBE for shard channels.
pub fn sunsubscribe(ctx: &mut Ctx, args: &Args) -> CmdResult {
    do_unsubscribe(ctx, args, Kind::Shard, b"sunsubscribe")
}

/// PUBLISH channel message
///
/// Delivers the message to the channel's subscribers and to every matching pattern
/// subscription; replies with the number of deliveries.
pub fn publish(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (srv, client) = ctx.admin_and_client();
    let n = publish_message(srv, Some(client), Kind::Channel, args.get(1), args.get(2));
    // Replicas publish it to their own subscribers (the AOF does not keep it); in cluster mode
    // every node gets it over the bus instead.
    if ctx.state().cluster.is_some() {
        crate::executor::cluster::propagate_publish(ctx.admin(), args.get(1), args.get(2), false);
    } else {
        ctx.force_replicate();
    }
    Ok(Reply::Int(n))
}

/// SPUBLISH shardchannel message
///
/// PUBLISH for shard channels (no pattern matching).
pub fn spublish(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let (srv, client) = ctx.admin_and_client();
    let n = publish_message(srv, Some(client), Kind::Shard, args.get(1), args.get(2));
    if ctx.state().cluster.is_some() {
        crate::executor::cluster::propagate_publish(ctx.admin(), args.get(1), args.get(2), true);
    } else {
        ctx.force_replicate();
    }
    Ok(Reply::Int(n))
}

/// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try PUBSUB HELP.`
fn sub_syntax_error(args: &Args) -> CmdError {
    CmdError::echo(&[
        b"ERR unknown subcommand or wrong number of arguments for '",
        crate::util::c_str_prefix(args.get(1), 128),
        b"'. Try PUBSUB HELP.",
    ])
}

fn list_channels(ctx: &mut Ctx, args: &Args, kind: Kind) -> CmdResult {
    if args.len() > 3 {
        return Err(sub_syntax_error(args));
    }
    let pattern = if args.len() == 3 { Some(args.get(2)) } else { None };
    let names = ctx
        .state()
        .pubsub
        .channel_names(kind)
        .filter(|n| pattern.is_none_or(|p| crate::glob::glob_match(p, n, false)))
        .map(|n| Reply::bulk(n.clone()))
        .collect();
    Ok(Reply::Array(names))
}

/// PUBSUB CHANNELS [pattern]
///
/// The channels with at least one subscriber, optionally filtered by a glob pattern.
pub fn pubsub_channels(ctx: &mut Ctx, args: &Args) -> CmdResult {
    list_channels(ctx, args, Kind::Channel)
}

/// PUBSUB SHARDCHANNELS [pattern]
///
/// PUBSUB CHANNELS for shard channels.
pub fn pubsub_shardchannels(ctx: &mut Ctx, args: &Args) -> CmdResult {
    list_channels(ctx, args, Kind::Shard)
}

fn numsub(ctx: &mut Ctx, args: &Args, kind: Kind) -> CmdResult {
    // A flat array in RESP3 too, as Redis 7.0 answers.
    let mut items = Vec::new();
    for name in args.from(2) {
        let n = ctx.state().pubsub.subscribers(kind, name).len() as i64;
        items.push(Reply::bulk(name));
        items.push(Reply::Int(n));
    }
    Ok(Reply::Array(items))
}

/// PUBSUB NUMSUB [channel ...]
///
/// Each channel with its number of subscribers (pattern subscriptions not counted).
pub fn pubsub_numsub(ctx: &mut Ctx, args: &Args) -> CmdResult {
    numsub(ctx, args, Kind::Channel)
}

/// PUBSUB SHARDNUMSUB [shardchannel ...]
///
/// PUBSUB NUMSUB for shard channels.
pub fn pubsub_shardnumsub(ctx: &mut Ctx, args: &Args) -> CmdResult {
    numsub(ctx, args, Kind::Shard)
}

/// PUBSUB NUMPAT
///
/// The number of distinct patterns subscribed to.
pub fn pubsub_numpat(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Int(ctx.state().pubsub.pattern_count() as i64))
}

/// PUBSUB HELP
pub fn pubsub_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    const LINES: &[&str] = &[
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Reply::Array(LINES.iter().map(|l| Reply::Status(l)).collect()))
}

/// MONITOR
///
/// Puts the connection in monitor mode: every command any client runs from now on (admin
/// commands excepted) is streamed to it as one status line.
pub fn monitor(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let id = ctx.client().id;
    if !ctx.state().pubsub.monitors.contains(&id) {
        ctx.admin().pubsub.monitors.push(id);
    }
    Ok(Reply::Ok)
}
