//! The latency monitor, latency tracking, errorstats of blocked commands and slow log redaction,
//! against real redis-server: the same commands to both, the replies compared with the timing
//! parts (durations, timestamps, ids) taken out. What a reply should be comes only from the real
//! server. Fixed replies are in tests/differential/latency.txt.

mod common;

use std::time::Duration;

use common::{parse_value, show, Client, RedisServer, Server, TestServer, Value};

fn both(extra: &[&str]) -> (Server, Server) {
    (RedisServer::with_args(extra), TestServer::with_args(extra))
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn bulk(v: &Value) -> Vec<u8> {
    match v {
        Value::Bulk(Some(b)) => b.clone(),
        Value::Simple(_, b) => b.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Agg(_, Some(items)) => items,
        other => panic!("not an aggregate: {other:?}"),
    }
}

fn cmd(c: &mut Client, line: &str) -> Vec<u8> {
    c.line(line)
}

/// Digits replaced by `#`: latencies and ages differ by a millisecond or a second between runs.
fn without_digits(b: &[u8]) -> Vec<u8> {
    b.iter().map(|&c| if c.is_ascii_digit() { b'#' } else { c }).collect()
}

/// The argument lists of SLOWLOG GET -1, newest first, each as one line.
fn slowlog_argvs(c: &mut Client) -> Vec<String> {
    let reply = parse_value(&cmd(c, "SLOWLOG GET -1"));
    let line = |argv: Value| {
        let words: Vec<String> = items(argv).iter().map(|a| String::from_utf8_lossy(&bulk(a)).into_owned()).collect();
        words.join(" ")
    };
    items(reply).into_iter().map(|e| line(items(e).swap_remove(3))).collect()
}

#[test]
fn slowlog_redacts_what_redis_redacts() {
    let (redis, ferro) = both(&[]);
    let script: &[&[&str]] = &[
        &["AUTH", "foo"],
        &["AUTH", "a", "b", "c"],
        &["HELLO", "3", "AUTH", "default", "x", "SETNAME", "n"],
        &["HELLO", "2", "SETNAME", "y", "AUTH", "u"],
        &["HELLO", "9", "AUTH", "a", "b"],
        &["ACL", "SETUSER", "slowlog test user", "+get", "+set"],
        &["ACL", "SETUSER", "slowlog-test-user", "+get", "+set"],
        &["ACL", "SETUSER", "ok"],
        &["CONFIG", "SET", "masterauth", ""],
        &["CONFIG", "SET", "requirepass", "", "masteruser", "u"],
        &["CONFIG", "SET", "nosuch", "x", "masterauth", "y"],
        &["CONFIG", "SET", "MASTERAUTH", ""],
        &["CONFIG", "SET", "masterauth", "a", "masterauth", "b"],
        &["CONFIG", "SET", "tls-key-file-pass", "x"],
        &["CONFIG", "SET", "slowlog-max-len", "128"],
    ];
    let mut logs = Vec::new();
    for server in [&redis, &ferro] {
        let mut c = server.client();
        cmd(&mut c, "CONFIG SET slowlog-log-slower-than 0");
        cmd(&mut c, "SLOWLOG RESET");
        for argv in script {
            c.cmd(argv);
        }
        // The HELLO 3 above switched the connection to RESP3; back to RESP2 for the parse.
        cmd(&mut c, "HELLO 2");
        cmd(&mut c, "CONFIG SET slowlog-log-slower-than -1");
        logs.push(slowlog_argvs(&mut c));
    }
    assert_eq!(logs[1], logs[0], "ferrodis's slow log (left) differs from redis-server's (right)");
}

#[test]
fn latency_events_from_slow_commands() {
    let (redis, ferro) = both(&["--enable-debug-command", "yes", "--latency-monitor-threshold", "100"]);
    let mut out: Vec<Vec<(String, Vec<u8>)>> = Vec::new();
    for server in [&redis, &ferro] {
        let mut c = server.client();
        let mut seen = Vec::new();
        cmd(&mut c, "DEBUG SLEEP 0.2");
        let latest = items(parse_value(&cmd(&mut c, "LATENCY LATEST")));
        assert_eq!(latest.len(), 1, "{}: one event: {latest:?}", server.name);
        let row = items(latest.into_iter().next().unwrap_or(Value::Int(0)));
        seen.push(("event".into(), bulk(&row[0])));
        let ms = int(&row[2]);
        assert!((200..260).contains(&ms), "{}: latency {ms}", server.name);
        assert_eq!(int(&row[3]), ms, "{}: worst = latest", server.name);
        let history = items(parse_value(&cmd(&mut c, "LATENCY HISTORY command")));
        seen.push(("history length".into(), history.len().to_string().into_bytes()));
        seen.push(("graph".into(), without_digits(&cmd(&mut c, "LATENCY GRAPH command"))));
        seen.push(("doctor".into(), without_digits(&cmd(&mut c, "LATENCY DOCTOR"))));
        cmd(&mut c, "CONFIG SET slowlog-log-slower-than -1");
        seen.push(("doctor, slowlog off".into(), without_digits(&cmd(&mut c, "LATENCY DOCTOR"))));
        cmd(&mut c, "CONFIG SET slowlog-log-slower-than 10000000");
        seen.push(("doctor, slowlog high".into(), without_digits(&cmd(&mut c, "LATENCY DOCTOR"))));
        seen.push(("history, other case".into(), cmd(&mut c, "LATENCY HISTORY COMMAND")));
        seen.push(("reset other".into(), cmd(&mut c, "LATENCY RESET fork")));
        seen.push(("reset, any case".into(), cmd(&mut c, "LATENCY RESET COMMAND COMMAND")));
        seen.push(("latest after reset".into(), cmd(&mut c, "LATENCY LATEST")));
        cmd(&mut c, "DEBUG SLEEP 0.15");
        seen.push(("reset all".into(), cmd(&mut c, "LATENCY RESET")));
        // A command below the threshold records nothing.
        cmd(&mut c, "DEBUG SLEEP 0.05");
        seen.push(("below threshold".into(), cmd(&mut c, "LATENCY LATEST")));
        out.push(seen);
    }
    for ((what, r), (_, f)) in out[0].iter().zip(&out[1]) {
        assert_eq!(show(f), show(r), "{what}: ferrodis (left) vs redis-server (right)");
    }
}

/// The (name, calls) pairs of a LATENCY HISTOGRAM reply, in reply order.
fn histogram_calls(reply: &[u8]) -> Vec<(String, i64)> {
    let flat = items(parse_value(reply));
    flat.chunks(2)
        .map(|pair| {
            let fields = items(pair[1].clone());
            (String::from_utf8_lossy(&bulk(&pair[0])).into_owned(), int(&fields[1]))
        })
        .collect()
}

#[test]
fn latency_histogram_of_subcommands() {
    let (redis, ferro) = both(&[]);
    let mut out = Vec::new();
    for server in [&redis, &ferro] {
        let mut c = server.client();
        cmd(&mut c, "CONFIG RESETSTAT");
        cmd(&mut c, "CLIENT ID");
        cmd(&mut c, "CLIENT ID");
        cmd(&mut c, "SET a b");
        let mut seen = Vec::new();
        for q in [
            "LATENCY HISTOGRAM client|id",
            "LATENCY HISTOGRAM CLIENT|ID",
            "LATENCY HISTOGRAM client|id client|id",
            "LATENCY HISTOGRAM set SET",
            "LATENCY HISTOGRAM config|resetstat client|nosuch blabla",
        ] {
            seen.push((q, histogram_calls(&cmd(&mut c, q))));
        }
        // A container names its subcommands that ran (in no particular order).
        let mut all = histogram_calls(&cmd(&mut c, "LATENCY HISTOGRAM client config"));
        all.sort();
        seen.push(("LATENCY HISTOGRAM client config", all));
        out.push(seen);
    }
    assert_eq!(out[1], out[0], "ferrodis (left) vs redis-server (right)");
}

/// cmdstat_blpop without its timings, and the error figures of INFO.
fn blocked_stats(c: &mut Client) -> Vec<String> {
    let info = String::from_utf8_lossy(&cmd(c, "INFO everything")).into_owned();
    let mut out = Vec::new();
    for line in info.lines() {
        if let Some(rest) = line.strip_prefix("cmdstat_blpop:") {
            let kept: Vec<&str> = rest.split(',').filter(|f| !f.starts_with("usec")).collect();
            out.push(format!("blpop {}", kept.join(",")));
        }
        if line.starts_with("errorstat_") || line.starts_with("total_error_replies:") {
            out.push(line.to_string());
        }
        if line.starts_with("latency_percentiles_usec_blpop:") {
            out.push("blpop has latency percentiles".into());
        }
    }
    out
}

#[test]
fn errorstats_of_unblocked_clients() {
    let (redis, ferro) = both(&[]);
    let mut out = Vec::new();
    for server in [&redis, &ferro] {
        let mut c = server.client();
        let mut blocked = server.client();
        let id = int(&parse_value(&cmd(&mut blocked, "CLIENT ID")));
        let mut seen = Vec::new();
        let block = |b: &mut Client, c: &mut Client| {
            b.send_raw(&common::encode(&["BLPOP", "list1{t}", "0"])).expect("send BLPOP");
            // Until the server has parked it.
            for _ in 0..200 {
                let info = String::from_utf8_lossy(&cmd(c, "INFO clients")).into_owned();
                if info.contains("blocked_clients:1") {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!("BLPOP did not block");
        };
        for how in ["ERROR", "TIMEOUT"] {
            cmd(&mut c, "CONFIG RESETSTAT");
            block(&mut blocked, &mut c);
            seen.push(cmd(&mut c, &format!("CLIENT UNBLOCK {id} {how}")));
            seen.push(blocked.read_reply().expect("unblocked reply"));
            seen.push(blocked_stats(&mut c).join("\n").into_bytes());
        }
        // Its own timeout: counted, but neither failed nor in the latency histogram.
        cmd(&mut c, "CONFIG RESETSTAT");
        seen.push(cmd(&mut blocked, "BLPOP list1{t} 0.05"));
        seen.push(blocked_stats(&mut c).join("\n").into_bytes());
        // Served by a push.
        cmd(&mut c, "CONFIG RESETSTAT");
        block(&mut blocked, &mut c);
        cmd(&mut c, "LPUSH list1{t} a");
        seen.push(blocked.read_reply().expect("served reply"));
        seen.push(blocked_stats(&mut c).join("\n").into_bytes());
        out.push(seen);
    }
    for (i, (r, f)) in out[0].iter().zip(&out[1]).enumerate() {
        assert_eq!(show(f), show(r), "step {i}: ferrodis (left) vs redis-server (right)");
    }
}
