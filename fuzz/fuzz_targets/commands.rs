//! cargo-fuzz target: command sequences run through the executor as connections hand them over
//! (dispatch's checks, `call()`, blocking, MULTI, keyspace side effects), on a fresh server state
//! per input. No command may panic, hang or allocate out of proportion to what it was sent.
//!
//! Input: lines (`\n`); a line's words (` `) are one command. The first word names it, or, when
//! it names nothing runnable here, its first byte picks one from `RUNNABLE`. A line starting with
//! `@` runs as a second client (WATCH, blocking and tracking need two); `~` runs the cron.
//! Commands that touch the process or the outside world (files, fork, sockets, sleeps, exit)
//! are left out. Scripts are ours, not the fuzzer's (a Lua loop may run forever, as in Redis):
//! `eval` runs one of `SCRIPTS`, picked by the first byte of its next word, on the fuzzer's
//! numkeys, keys and arguments, so the data reaches our Lua libraries (cjson, cmsgpack, struct,
//! bit) and the redis.call/pcall bridge (its command checked as a line's would be).
#![no_main]

use std::sync::Arc;

use bytes::Bytes;
use ferrodis::config::Config;
use ferrodis::executor::clients::{ClientHandle, ConnInfo};
use ferrodis::executor::{Cmd, Executor};

const RUNNABLE: &[&str] = &[
    "append", "bitcount", "bitfield", "bitfield_ro", "bitop", "bitpos", "blmove", "blmpop", "blpop", "brpop",
    "brpoplpush", "bzmpop", "bzpopmax", "bzpopmin", "client", "command", "config", "copy", "dbsize", "debug",
    "decr", "decrby", "del", "discard", "dump", "echo", "exec", "exists", "expire", "expireat", "expiretime",
    "flushall", "flushdb", "geoadd", "geodist", "geohash", "geopos", "georadius", "georadius_ro",
    "georadiusbymember", "georadiusbymember_ro", "geosearch", "geosearchstore", "get", "getbit", "getdel",
    "getex", "getrange", "getset", "hdel", "hello", "hexists", "hexpire", "hexpireat", "hexpiretime", "hget",
    "hgetall", "hincrby", "hincrbyfloat", "hkeys", "hlen", "hmget", "hmset", "hpersist", "hpexpire",
    "hpexpireat", "hpexpiretime", "hpttl", "hrandfield", "hscan", "hset", "hsetnx", "hstrlen", "httl", "hvals",
    "incr", "incrby", "incrbyfloat", "info", "keys", "lcs", "lindex", "linsert", "llen", "lmove", "lmpop",
    "lolwut", "lpop", "lpos", "lpush", "lpushx", "lrange", "lrem", "lset", "ltrim", "memory", "mget", "mset",
    "msetnx", "multi", "move", "object", "persist", "pexpire", "pexpireat", "pexpiretime", "pfadd", "pfcount",
    "pfdebug", "pfmerge", "ping", "psetex", "psubscribe", "pttl", "publish", "pubsub", "punsubscribe",
    "randomkey", "rename", "renamenx", "reset", "restore", "role", "rpop", "rpoplpush", "rpush", "rpushx",
    "sadd", "scan", "scard", "sdiff", "sdiffstore", "select", "set", "setbit", "setex", "setnx", "setrange",
    "sinter", "sintercard", "sinterstore", "sismember", "slowlog", "smembers", "smismember", "smove", "sort",
    "sort_ro", "spop", "spublish", "srandmember", "srem", "sscan", "ssubscribe", "strlen", "subscribe",
    "substr", "sunion", "sunionstore", "sunsubscribe", "swapdb", "time", "touch", "ttl", "type", "unlink",
    "unsubscribe", "unwatch", "wait", "watch", "xack", "xadd", "xautoclaim", "xclaim", "xdel", "xgroup",
    "xinfo", "xlen", "xpending", "xrange", "xread", "xreadgroup", "xrevrange", "xsetid", "xtrim", "zadd",
    "zcard", "zcount", "zdiff", "zdiffstore", "zincrby", "zinter", "zintercard", "zinterstore", "zlexcount",
    "zmpop", "zmscore", "zpopmax", "zpopmin", "zrandmember", "zrange", "zrangebylex", "zrangebyscore",
    "zrangestore", "zrank", "zrem", "zremrangebylex", "zremrangebyrank", "zremrangebyscore", "zrevrange",
    "zrevrangebylex", "zrevrangebyscore", "zrevrank", "zscan", "zscore", "zunion", "zunionstore", "latency",
    "acl", "lastsave", "quit", "auth", "eval",
];

/// The scripts `eval` runs.
const SCRIPTS: &[&str] = &[
    "return cjson.decode(ARGV[1])",
    "return cjson.encode(cjson.decode(ARGV[1]))",
    "return cmsgpack.unpack(ARGV[1])",
    "return cmsgpack.pack(cmsgpack.unpack(ARGV[1]))",
    "return {struct.unpack(ARGV[1], ARGV[2] or '')}",
    "return struct.pack(ARGV[1], ARGV[2], ARGV[3])",
    "return struct.size(ARGV[1])",
    "return redis.call(unpack(ARGV))",
    "return redis.pcall(unpack(ARGV))",
    "redis.setresp(3); return redis.pcall(unpack(ARGV))",
    "return redis.sha1hex(ARGV[1])",
    "return {bit.tohex(tonumber(ARGV[1]) or 0, tonumber(ARGV[2]) or 8), bit.band(tonumber(ARGV[1]) or 0, -1)}",
    "return string.format(ARGV[1], ARGV[2], ARGV[3])",
    "return {tonumber(ARGV[1]), tostring(tonumber(ARGV[1]))}",
    "return cjson.encode(cmsgpack.unpack(ARGV[1]))",
    "return cmsgpack.pack(cjson.decode(ARGV[1]))",
    "return redis.status_reply(ARGV[1])",
    "return redis.error_reply(ARGV[1])",
    "return {KEYS[1], redis.call('get', KEYS[1])}",
    "return redis.call('setrange', KEYS[1], 0, cmsgpack.pack(cjson.decode(ARGV[1])))",
];

/// DEBUG subcommands that stay inside the keyspace.
const DEBUG_RUNNABLE: &[&str] = &[
    "object", "stringmatch-len", "listpack", "quicklist-packed-threshold", "set-active-expire", "protocol",
    "change-repl-id", "digest", "digest-value", "htstats", "htstats-key", "sdslen", "ziplist",
    "set-skip-checksum-validation", "replybuffer", "pause-cron",
];

/// Directives CONFIG SET may change here: encodings, limits and policies, not files or sockets.
const CONFIG_SETTABLE: &[&str] = &[
    "maxmemory", "maxmemory-policy", "maxmemory-samples", "maxmemory-clients", "hash-max-listpack-entries",
    "hash-max-listpack-value", "hash-max-ziplist-entries", "hash-max-ziplist-value", "set-max-intset-entries",
    "set-max-listpack-entries", "set-max-listpack-value", "zset-max-listpack-entries", "zset-max-listpack-value",
    "zset-max-ziplist-entries", "zset-max-ziplist-value", "list-max-listpack-size", "list-max-ziplist-size",
    "list-compress-depth", "hll-sparse-max-bytes", "stream-node-max-bytes", "stream-node-max-entries",
    "notify-keyspace-events", "lazyfree-lazy-eviction", "lazyfree-lazy-expire", "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush", "lazyfree-lazy-server-del", "active-expire-effort", "lfu-log-factor",
    "lfu-decay-time", "slowlog-log-slower-than", "slowlog-max-len", "latency-tracking",
    "latency-tracking-info-percentiles", "latency-monitor-threshold", "activerehashing", "hz",
    "client-output-buffer-limit", "tracking-table-max-keys", "acllog-max-len", "sanitize-dump-payload",
    "replica-read-only", "min-replicas-to-write", "lua-time-limit", "busy-reply-threshold",
];

/// A count argument whose reply would be as long as its value, not as the data (SRANDMEMBER
/// with a negative count repeats members): Redis builds such replies too, so a huge one is
/// not a finding.
fn repeats_by_count(name: &str) -> bool {
    matches!(name, "srandmember" | "zrandmember" | "hrandfield")
}

fn runnable(name: &str, args: &[Bytes]) -> bool {
    let word = |i: usize| args.get(i).map(|a| String::from_utf8_lossy(a).to_ascii_lowercase());
    match name {
        // What redis.call would run: ARGV, the arguments after numkeys and the keys.
        "eval" if args[1].ends_with(b"unpack(ARGV))") => {
            let keys = word(2).and_then(|n| n.parse::<usize>().ok()).unwrap_or(0);
            let argv = args.get(3 + keys..).unwrap_or_default();
            argv.first().is_none_or(|c| {
                let c = String::from_utf8_lossy(c).to_ascii_lowercase();
                RUNNABLE.contains(&c.as_str()) && c != "eval" && runnable(&c, argv)
            })
        }
        "debug" => word(1).is_some_and(|s| DEBUG_RUNNABLE.contains(&s.as_str())),
        "config" => match word(1).as_deref() {
            Some("set") => args[2..].chunks(2).all(|p| {
                CONFIG_SETTABLE.contains(&String::from_utf8_lossy(&p[0]).to_ascii_lowercase().as_str())
            }),
            Some("rewrite") => false,
            _ => true,
        },
        "acl" => !matches!(word(1).as_deref(), Some("save" | "load")),
        _ if repeats_by_count(name) => {
            word(2).is_none_or(|c| c.parse::<i64>().map_or(true, |n| n.unsigned_abs() <= 100_000))
        }
        _ => true,
    }
}

fn command(line: &[u8]) -> Option<Vec<Bytes>> {
    let mut args: Vec<Bytes> = line.split(|&b| b == b' ').map(Bytes::copy_from_slice).collect();
    let first = args.first()?.clone();
    let named = String::from_utf8_lossy(&first).to_ascii_lowercase();
    let name = if RUNNABLE.contains(&named.as_str()) {
        named
    } else {
        let pick = RUNNABLE[*first.first()? as usize % RUNNABLE.len()];
        args[0] = Bytes::from_static(pick.as_bytes());
        pick.to_string()
    };
    if name == "eval" {
        let pick = args.get(1).and_then(|w| w.first()).map_or(0, |&b| b as usize % SCRIPTS.len());
        if args.len() < 3 {
            args.resize(3, Bytes::from_static(b"0"));
        }
        args[1] = Bytes::from_static(SCRIPTS[pick].as_bytes());
    }
    runnable(&name, &args).then_some(args)
}

fn conn(port: u16) -> ConnInfo {
    ConnInfo { addr: format!("127.0.0.1:{port}"), laddr: "127.0.0.1:6379".into(), fd: port as i32, unix: false, local: true, tls: false }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ferrodis::commands::install();
    let mut config = Config::default();
    for (name, value) in [("save", ""), ("proto-max-bulk-len", "1mb"), ("appendonly", "no")] {
        config.set(name, &[value.to_string()]).expect("a valid directive");
    }
    let mut exec = Executor::new(config);
    let clients = [exec.connect(conn(40001), Arc::new(ClientHandle::default())), exec.connect(conn(40002), Arc::new(ClientHandle::default()))];
    let mut open = [true, true];
    let mut out = Vec::new();
    let mut cmds = Vec::new();
    for line in data.split(|&b| b == b'\n').take(200) {
        let (who, line) = match line.first() {
            Some(b'@') => (1, &line[1..]),
            Some(b'~') => {
                exec.cron();
                continue;
            }
            _ => (0, line),
        };
        let Some(argv) = command(line) else { continue };
        if !open[who] {
            continue;
        }
        cmds.push(Cmd { spec: ferrodis::executor::registry::lookup(&argv[0]), argv });
        out.clear();
        if exec.handle_batch(clients[who], &mut cmds, &mut out) != ferrodis::executor::BatchEnd::Continue {
            exec.disconnect(clients[who]);
            open[who] = false;
        }
    }
});
