//! Blocking commands against real Redis and ferrodis side by side: FIFO wake-up order, timeouts,
//! MULTI turning a blocking pop non-blocking, a script that pushes, CLIENT UNBLOCK, and commands
//! pipelined behind a blocked one. Expected bytes come from the real server.

mod common;

use common::{RedisServer, Server, TestServer};

/// Runs one scenario against a server and returns every reply it produced, in order.
fn scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    let mut w1 = server.client();
    let mut w2 = server.client();
    out.push(ctl.cmd(&["FLUSHALL"]));

    // Two waiters on one key are served in arrival order, one element each.
    common::block(&mut ctl, &mut w1, &["BLPOP", "q", "0"]);
    common::block(&mut ctl, &mut w2, &["BLPOP", "q", "other", "0"]);
    out.push(ctl.cmd(&["RPUSH", "q", "a", "b", "c"]));
    out.push(w1.read_reply().expect("w1 served"));
    out.push(w2.read_reply().expect("w2 served"));
    out.push(ctl.cmd(&["LRANGE", "q", "0", "-1"]));

    // A timeout answers the null reply; a command pipelined behind the blocked one runs after it.
    common::send(&mut w1, &["BRPOP", "empty", "0.2"]);
    common::send(&mut w1, &["PING"]);
    out.push(w1.read_reply().expect("timeout reply"));
    out.push(w1.read_reply().expect("pipelined reply"));

    // Inside MULTI a blocking pop does not block.
    out.push(w1.cmd(&["MULTI"]));
    out.push(w1.cmd(&["BLPOP", "empty", "0"]));
    out.push(w1.cmd(&["EXEC"]));

    // A transaction that pushes wakes the waiter once, after EXEC.
    common::block(&mut ctl, &mut w2, &["BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"]);
    out.push(ctl.cmd(&["MULTI"]));
    out.push(ctl.cmd(&["LPUSH", "src", "x"]));
    out.push(ctl.cmd(&["LPUSH", "src", "y"]));
    out.push(ctl.cmd(&["EXEC"]));
    out.push(w2.read_reply().expect("blmove served"));
    out.push(ctl.cmd(&["LRANGE", "dst", "0", "-1"]));

    // A script that pushes several times wakes the waiters once it has finished, in FIFO order,
    // and each sees the list as the script left it.
    common::block(&mut ctl, &mut w1, &["BLPOP", "jobs", "0"]);
    common::block(&mut ctl, &mut w2, &["BRPOP", "jobs", "0"]);
    out.push(ctl.cmd(&[
        "EVAL",
        "redis.call('rpush', KEYS[1], 'a') redis.call('rpush', KEYS[1], 'b', 'c') \
         return redis.call('lrange', KEYS[1], 0, -1)",
        "1",
        "jobs",
    ]));
    out.push(w1.read_reply().expect("w1 served by the script"));
    out.push(w2.read_reply().expect("w2 served by the script"));
    out.push(ctl.cmd(&["LRANGE", "jobs", "0", "-1"]));
    // A script's own blocking pop is refused, not left waiting.
    out.push(ctl.cmd(&["EVAL", "return redis.pcall('blpop', KEYS[1], 0)", "1", "jobs"]));

    // A key of another type does not wake the waiter; CLIENT UNBLOCK does.
    let id = String::from_utf8_lossy(&w1.cmd(&["CLIENT", "ID"])).trim_start_matches(':').trim().to_string();
    common::block(&mut ctl, &mut w1, &["BZPOPMIN", "z", "0"]);
    out.push(ctl.cmd(&["SET", "z", "string"]));
    out.push(ctl.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]));
    out.push(w1.read_reply().expect("unblocked"));
    out.push(ctl.cmd(&["CLIENT", "UNBLOCK", &id]));
    out
}

#[test]
fn blocking_matches_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = scenario(&redis);
    let got = scenario(&ferrodis);
    for (i, (e, g)) in expected.iter().zip(&got).enumerate() {
        assert_eq!(common::show(g), common::show(e), "step {i}");
    }
    assert_eq!(expected.len(), got.len());
}

/// The `cmd=` field CLIENT LIST shows for a client blocked in BLPOP and for one whose last
/// command was refused: Redis records the command when it looks it up.
fn last_cmd_fields(server: &Server) -> Vec<String> {
    let mut blocked = server.client();
    common::send(&mut blocked, &["BLPOP", "nosuch", "5"]);
    let mut refused = server.client();
    refused.cmd(&["LPUSH", "onlyonearg"]);
    let mut c = server.client();
    common::wait_blocked(&mut c, 1, "BLPOP nosuch 5");
    let list = String::from_utf8_lossy(&c.cmd(&["CLIENT", "LIST"])).into_owned();
    let mut fields: Vec<String> = list.split_whitespace().filter(|f| f.starts_with("cmd=")).map(String::from).collect();
    fields.sort();
    fields
}

#[test]
fn client_list_names_blocked_and_refused_commands() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    assert_eq!(last_cmd_fields(&ferrodis), last_cmd_fields(&redis));
}

/// A blocked client served when its key is written stamps the key's access time as Redis's
/// serving does (once for the served key, twice for BZPOP*; BLMOVE's destination once): OBJECT
/// FREQ under allkeys-lfu with lfu-log-factor 0, where each stamp adds exactly one.
#[test]
fn served_blocked_clients_stamp_keys_as_redis_does() {
    type Case = (&'static [&'static str], &'static [&'static [&'static str]], &'static [&'static str]);
    let cases: &[Case] = &[
        (&["BLPOP", "k", "0"], &[&["RPUSH", "k", "a", "b"]], &["k"]),
        (&["BLMOVE", "k", "d", "LEFT", "RIGHT", "0"], &[&["RPUSH", "k", "a", "b"]], &["k", "d"]),
        (&["BRPOPLPUSH", "k", "d", "0"], &[&["RPUSH", "d", "x"], &["RPUSH", "k", "a", "b"]], &["k", "d"]),
        (&["BZPOPMIN", "k", "0"], &[&["ZADD", "k", "1", "a", "2", "b"]], &["k"]),
        (&["BZMPOP", "0", "1", "k", "MIN"], &[&["ZADD", "k", "1", "a", "2", "b"]], &["k"]),
        (&["XREAD", "BLOCK", "0", "STREAMS", "k", "$"], &[&["XADD", "k", "1-1", "f", "v"]], &["k"]),
        (
            &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "k", ">"],
            &[&["XGROUP", "CREATE", "k", "g", "$", "MKSTREAM"], &["XADD", "k", "2-1", "f", "v"]],
            &["k"],
        ),
    ];
    let run = |server: &Server| -> Vec<String> {
        let mut ctl = server.client();
        for (k, v) in [
            ("maxmemory", "1gb"),
            ("maxmemory-policy", "allkeys-lfu"),
            ("lfu-decay-time", "0"),
            ("lfu-log-factor", "0"),
        ] {
            ctl.cmd(&["CONFIG", "SET", k, v]);
        }
        let mut out = Vec::new();
        for (blocking, writes, keys) in cases {
            ctl.cmd(&["FLUSHALL"]);
            // A group must exist before XREADGROUP blocks on it.
            let (setup, writes) = if blocking[0] == "XREADGROUP" { writes.split_at(1) } else { writes.split_at(0) };
            for w in setup {
                ctl.cmd(w);
            }
            let mut c = server.client();
            common::block(&mut ctl, &mut c, blocking);
            for w in writes {
                ctl.cmd(w);
            }
            let reply = c.read_reply().expect("served");
            let freqs: Vec<String> = keys.iter().map(|k| common::show(&ctl.cmd(&["OBJECT", "FREQ", k]))).collect();
            out.push(format!("{} -> {} | {}", blocking.join(" "), reply[0] as char, freqs.join(" ")));
        }
        out
    };
    let Some(redis) = RedisServer::or_skip() else { return };
    assert_eq!(run(&TestServer::new()), run(&redis));
}

/// INFO clients_in_timeout_table counts the blocked clients that have a timeout (BLPOP with one,
/// WAIT), not those blocked for good (timeout 0), and drops a client once it is served.
fn timeout_table_counts(server: &Server) -> Vec<String> {
    let mut forever = server.client();
    common::send(&mut forever, &["BLPOP", "a", "0"]);
    let mut timed = server.client();
    common::send(&mut timed, &["BLPOP", "b", "100"]);
    let mut waiting = server.client();
    common::send(&mut waiting, &["WAIT", "1", "100000"]);
    let mut c = server.client();
    common::wait_blocked(&mut c, 3, "two BLPOPs and a WAIT");
    let mut out = vec![common::info_field(&mut c, "clients", "clients_in_timeout_table")];
    c.cmd(&["RPUSH", "b", "x"]);
    assert_eq!(timed.read_reply().expect("BLPOP b"), b"*2\r\n$1\r\nb\r\n$1\r\nx\r\n");
    out.push(common::info_field(&mut c, "clients", "clients_in_timeout_table"));
    out
}

#[test]
fn clients_in_timeout_table_as_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = timeout_table_counts(&redis);
    assert_eq!(timeout_table_counts(&ferrodis), expected);
    assert_eq!(expected, ["2", "1"]);
}
