//! LATENCY LATEST / HISTORY / GRAPH / DOCTOR / RESET / HISTOGRAM / HELP over the latency monitor
//! (`crate::latency`; spikes are recorded by `executor::record_latency`).

use super::flags::*;
use super::server::help_reply;
use super::{spec, Args, CmdError, CmdResult, CommandSpec, Ctx, NO_KEYS};
use crate::resp::Reply;

const LAT: u32 = ADMIN | NOSCRIPT | LOADING | STALE;

pub static SUBCOMMANDS: &[CommandSpec] = &[
    spec("graph", 3, LAT, NO_KEYS, 0, latency_graph),
    spec("latest", 2, LAT, NO_KEYS, 0, latency_latest),
    spec("help", 2, LOADING | STALE, NO_KEYS, 0, latency_help),
    spec("doctor", 2, LAT, NO_KEYS, 0, latency_doctor),
    spec("reset", -2, LAT, NO_KEYS, 0, latency_reset),
    spec("histogram", -2, LAT, NO_KEYS, 0, latency_histogram),
    spec("history", 3, LAT, NO_KEYS, 0, latency_history),
];

/// LATENCY LATEST
///
/// Per event: [name, unix time of the latest spike, its milliseconds, the worst ever].
pub fn latency_latest(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let rows = ctx.state().latency.latest().into_iter().map(|(name, time, ms, max)| {
        Reply::Array(vec![Reply::bulk(name), Reply::Int(time), Reply::Int(ms as i64), Reply::Int(max as i64)])
    });
    Ok(Reply::Array(rows.collect()))
}

/// LATENCY HISTORY event
///
/// The event's [unix time, milliseconds] samples, oldest first; empty for an unknown event
/// (names match exactly).
pub fn latency_history(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let samples = ctx.state().latency.history(args.get(2)).unwrap_or_default();
    let rows = samples.into_iter().map(|(t, ms)| Reply::Array(vec![Reply::Int(t), Reply::Int(ms as i64)]));
    Ok(Reply::Array(rows.collect()))
}

/// LATENCY RESET [event ...]
///
/// Drops the named events (any case), or all of them; replies with how many were dropped.
pub fn latency_reset(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let n = if args.len() == 2 {
        ctx.admin().latency.reset(None)
    } else {
        args.from(2).map(|e| ctx.admin().latency.reset(Some(e))).sum()
    };
    Ok(Reply::Int(n as i64))
}

/// LATENCY GRAPH event
///
/// An ASCII sparkline of the event's samples, each labelled with its age.
pub fn latency_graph(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let now = crate::util::clock::unix_ms() / 1000;
    match ctx.state().latency.graph(args.get(2), now) {
        Some(text) => Ok(Reply::Verbatim("txt", text.into_bytes())),
        None => Err(CmdError::echo(&[b"ERR No samples available for event '", args.get(2), b"'"])),
    }
}

/// LATENCY DOCTOR
///
/// A human readable analysis of the recorded events, with advice, in Redis's words.
pub fn latency_doctor(ctx: &mut Ctx, _args: &Args) -> CmdResult {
    let st = ctx.admin();
    let fork_us = st.stats.persistence.latest_fork_usec;
    // Redis's stat_fork_rate: GB of used memory copied per second of fork.
    let fork_rate = if fork_us == 0 {
        0.0
    } else {
        st.stats.used_memory_now() as f64 * 1_000_000.0 / fork_us as f64 / (1024.0 * 1024.0 * 1024.0)
    };
    let inputs = crate::latency::DoctorInputs {
        now_secs: crate::util::clock::unix_ms() / 1000,
        threshold_ms: crate::executor::latency_threshold_ms(st),
        slowlog_log_slower_than: st.config.slowlog_log_slower_than,
        fork_rate_gb_per_sec: fork_rate,
        appendfsync_always: crate::config::lookup("appendfsync").is_some_and(|d| st.config.get(d) == "always"),
        hz: st.hz,
        anon_huge_pages: crate::latency::anon_huge_pages(),
    };
    Ok(Reply::Verbatim("txt", st.latency.doctor(&inputs).into_bytes()))
}

/// LATENCY HISTOGRAM [command ...]
///
/// Per-command cumulative latency distributions (power-of-two microsecond buckets) for the
/// named commands (`config|set` names a subcommand; a container names all its subcommands), or
/// for every command run so far. Unknown names are skipped; a name given twice answers twice.
pub fn latency_histogram(ctx: &mut Ctx, args: &Args) -> CmdResult {
    let mut specs: Vec<&'static str> = Vec::new();
    let add = |specs: &mut Vec<&'static str>, top: &'static CommandSpec| {
        specs.push(top.name);
        for sub in top.subcommands {
            specs.push(crate::executor::call::full_name(top, sub));
        }
    };
    if args.len() == 2 {
        super::all().for_each(|top| add(&mut specs, top));
    } else {
        for name in args.from(2) {
            let mut parts = name.splitn(2, |&c| c == b'|');
            let Some(top) = parts.next().and_then(super::lookup) else { continue };
            match parts.next() {
                None => add(&mut specs, top),
                Some(sub_name) => {
                    if let Some(sub) = top.subcommand(sub_name) {
                        specs.push(crate::executor::call::full_name(top, sub));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for name in specs {
        let Some(stat) = ctx.state().stats.commands.get(&crate::stats::StatName(name)) else { continue };
        if stat.latency.total() == 0 {
            continue;
        }
        let buckets =
            stat.latency.cumulative_log2().into_iter().map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)));
        out.push((
            Reply::bulk(name),
            Reply::Map(vec![
                (Reply::bulk("calls"), Reply::Int(stat.latency.total() as i64)),
                (Reply::bulk("histogram_usec"), Reply::Map(buckets.collect())),
            ]),
        ));
    }
    Ok(Reply::Map(out))
}

/// LATENCY HELP
pub fn latency_help(_ctx: &mut Ctx, _args: &Args) -> CmdResult {
    Ok(help_reply(
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified \
             command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    ))
}
