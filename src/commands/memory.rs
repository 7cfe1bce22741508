//! MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP, by Redis's accounting.

use super::flags::*;
use super::server::help_reply;
use super::{keys, spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::resp::Reply;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    spec("malloc-stats", 2, 0, NO_KEYS, 0, memory_malloc_stats),
    spec("doctor", 2, 0, NO_KEYS, 0, memory_doctor),
    spec("purge", 2, 0, NO_KEYS, 0, memory_purge),
    spec("usage", -3, READONLY, keys(2, 2, 1), 0, memory_usage),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, memory_help),
    spec("stats", 2, 0, NO_KEYS, 0, memory_stats),
];

/// MEMORY USAGE key [SAMPLES count]
///
/// Bytes the key and its value take, by Redis's accounting (key string, value object, hash
/// table entry); nil when the key does not exist.
pub fn memory_usage(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut i = 3;
    while i < args.len() {
        if args.is(i, "samples") && i + 1 < args.len() {
            if args.i64(i + 1)? < 0 {
                return Err(CmdError::Syntax);
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    const DICT_ENTRY: usize = 24;
    let key = args.key(2);
    let now = ctx.now_ms();
    Ok(match ctx.db().peek(key, now) {
        Some(v) => {
            Reply::Int((crate::types::value_memory(v) + crate::util::alloc::sds_alloc(key.len()) + DICT_ENTRY) as i64)
        }
        None => Reply::Nil,
    })
}

/// MEMORY STATS
///
/// The memory breakdown INFO memory summarizes, as a map.
pub fn memory_stats(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let m = crate::info::memory_figures(ctx.admin());
    let a = m.alloc;
    let int = |n: u64| Reply::Int(n as i64);
    let signed = |a: u64, b: u64| Reply::Int(a as i64 - b as i64);
    // Redis keeps these ratios as C floats.
    let ratio = |a: u64, b: u64| Reply::Double(if b == 0 { 0.0 } else { (a as f32 / b as f32) as f64 });
    let mut map = vec![
        ("peak.allocated", int(m.peak)),
        ("total.allocated", int(m.used)),
        ("startup.allocated", int(m.startup)),
        ("replication.backlog", int(0)),
        ("clients.slaves", int(m.clients_slaves)),
        ("clients.normal", int(m.clients_normal)),
        ("cluster.links", int(0)),
        ("aof.buffer", int(0)),
        ("lua.caches", int(0)),
        ("functions.caches", int(200)),
    ];
    let mut dbs = Vec::new();
    let mut total_keys = 0u64;
    for (i, db) in ctx.state().dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        total_keys += db.len() as u64;
        let table = |n: usize| (n as u64 * 24 + n.next_power_of_two() as u64 * 8) as i64;
        dbs.push((
            format!("db.{i}"),
            Reply::Map(vec![
                (Reply::bulk("overhead.hashtable.main"), Reply::Int(table(db.len()))),
                (
                    Reply::bulk("overhead.hashtable.expires"),
                    Reply::Int(if db.expires_len() == 0 { 0 } else { table(db.expires_len()) }),
                ),
                (Reply::bulk("overhead.hashtable.slot-to-keys"), Reply::Int(0)),
            ]),
        ));
    }
    let net = m.used.saturating_sub(m.startup);
    let tail = vec![
        ("overhead.total", int(m.overhead)),
        ("keys.count", int(total_keys)),
        ("keys.bytes-per-key", int(net.checked_div(total_keys).unwrap_or(0))),
        ("dataset.bytes", int(m.dataset)),
        ("dataset.percentage", ratio(m.dataset * 100, net)),
        ("peak.percentage", ratio(m.used * 100, m.peak)),
        ("allocator.allocated", int(a.allocated)),
        ("allocator.active", int(a.active)),
        ("allocator.resident", int(a.resident)),
        ("allocator-fragmentation.ratio", ratio(a.active, a.allocated)),
        ("allocator-fragmentation.bytes", signed(a.active, a.allocated)),
        ("allocator-rss.ratio", ratio(a.resident, a.active)),
        ("allocator-rss.bytes", signed(a.resident, a.active)),
        ("rss-overhead.ratio", ratio(m.rss, a.resident)),
        ("rss-overhead.bytes", signed(m.rss, a.resident)),
        ("fragmentation", ratio(m.rss, m.used)),
        ("fragmentation.bytes", signed(m.rss, m.used)),
    ];
    let mut out: Vec<(Reply, Reply)> = map.drain(..).map(|(k, v)| (Reply::bulk(k), v)).collect();
    out.extend(dbs.into_iter().map(|(k, v)| (Reply::bulk(k), v)));
    out.extend(tail.into_iter().map(|(k, v)| (Reply::bulk(k), v)));
    Ok(Reply::Map(out))
}

/// MEMORY DOCTOR
///
/// Redis's memory advice. Below 5 MB there is nothing to analyse; above, ferrodis finds no
/// issue to report (it has no eviction, replicas or big client buffers to warn about).
pub fn memory_doctor(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let used = ctx.admin().sample_memory().1;
    let text = if used < 5 * 1024 * 1024 {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in \
         these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I \
         will be back to our programming as soon as I finished rebooting.\n"
    } else {
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this \
         base.\n"
    };
    Ok(Reply::Verbatim("txt", text.as_bytes().to_vec()))
}

/// MEMORY MALLOC-STATS
///
/// jemalloc's statistics report, as Redis prints it.
pub fn memory_malloc_stats(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(Reply::Verbatim("txt", crate::alloc::stats_report()))
}

/// MEMORY PURGE
///
/// Returns jemalloc's dirty pages to the system now, as Redis does.
pub fn memory_purge(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    if crate::alloc::purge() {
        Ok(Reply::Ok)
    } else {
        Err(CmdError::Err("Error purging dirty pages".into()))
    }
}

/// MEMORY HELP
pub fn memory_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    ))
}
