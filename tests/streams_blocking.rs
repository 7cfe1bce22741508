//! Blocking stream reads against real Redis and ferrodis side by side: XREAD BLOCK woken by XADD
//! (with `$` and with explicit IDs), several readers served in arrival order, XREADGROUP BLOCK
//! with `>`, COUNT on wake-up, timeouts in RESP2 and RESP3, MULTI turning a blocking read
//! non-blocking, CLIENT UNBLOCK, and a stream deleted and re-created under a blocked XREAD.
//! Expected bytes come from the real server; every step is labelled so a mismatch names it.
//!
//! `destroyed_group_or_deleted_key_unblocks_xreadgroup` covers what Redis 7.0 does when a blocked
//! XREADGROUP loses its group or its key.

mod common;

use std::time::Duration;

use common::{Client, RedisServer, Server, TestServer};

/// What a client has received after a quiet spell: its bytes, or `(still blocked)`.
fn pending(c: &mut Client) -> Vec<u8> {
    let d = c.drain(Duration::from_millis(300));
    if d.bytes.is_empty() {
        b"(still blocked)".to_vec()
    } else {
        d.bytes
    }
}

/// Labelled replies of one run.
struct Log(Vec<(String, Vec<u8>)>);

impl Log {
    fn push(&mut self, label: &str, reply: Vec<u8>) {
        self.0.push((label.to_string(), reply));
    }
}

fn scenario(server: &Server) -> Log {
    let mut log = Log(Vec::new());
    let mut ctl = server.client();
    let mut r1 = server.client();
    let mut r2 = server.client();
    log.push("flushall", ctl.cmd(&["FLUSHALL"]));

    // `$` means "after the last entry when the command blocked": only the new entry comes back.
    log.push("xadd 1-1", ctl.cmd(&["XADD", "s", "1-1", "f", "v1"]));
    common::block(&mut ctl, &mut r1, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    log.push("xadd 2-1", ctl.cmd(&["XADD", "s", "2-1", "f", "v2"]));
    log.push("xread $ woken", r1.read_reply().expect("xread $ woken"));

    // An explicit ID on a key that does not exist yet: an entry not after it leaves the reader
    // waiting, the next one serves it.
    common::block(&mut ctl, &mut r1, &["XREAD", "BLOCK", "0", "STREAMS", "n", "5-0"]);
    log.push("xadd n 3-0", ctl.cmd(&["XADD", "n", "3-0", "f", "early"]));
    log.push("xread id not yet served", pending(&mut r1));
    log.push("xadd n 6-0", ctl.cmd(&["XADD", "n", "6-0", "f", "late"]));
    log.push("xread id woken", r1.read_reply().expect("xread id woken"));

    // Two plain readers on one stream: both get the new entry, in arrival order.
    common::block(&mut ctl, &mut r1, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    common::block(&mut ctl, &mut r2, &["XREAD", "BLOCK", "0", "STREAMS", "other", "s", "$", "$"]);
    log.push("xadd 3-1", ctl.cmd(&["XADD", "s", "3-1", "f", "v3"]));
    log.push("reader 1", r1.read_reply().expect("reader 1"));
    log.push("reader 2", r2.read_reply().expect("reader 2"));

    // A reader on two streams is served with the one that got data.
    common::block(&mut ctl, &mut r1, &["XREAD", "BLOCK", "0", "STREAMS", "s", "n", "$", "$"]);
    log.push("xadd n 7-0", ctl.cmd(&["XADD", "n", "7-0", "f", "x"]));
    log.push("two-stream reader", r1.read_reply().expect("two-stream reader"));

    // Without COUNT a woken XREAD gets everything a transaction added; with COUNT only that many.
    common::block(&mut ctl, &mut r1, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    common::block(&mut ctl, &mut r2, &["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", "$"]);
    log.push("multi", ctl.cmd(&["MULTI"]));
    log.push("queued 4-1", ctl.cmd(&["XADD", "s", "4-1", "f", "v4"]));
    log.push("queued 4-2", ctl.cmd(&["XADD", "s", "4-2", "f", "v5"]));
    log.push("exec", ctl.cmd(&["EXEC"]));
    log.push("no count", r1.read_reply().expect("no count"));
    log.push("count 1", r2.read_reply().expect("count 1"));

    // XREADGROUP `>`: two consumers of one group are served first come first served; the second
    // stays blocked until there is an entry for it.
    log.push("xgroup create", ctl.cmd(&["XGROUP", "CREATE", "s", "g", "$"]));
    common::block(&mut ctl, &mut r1, &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]);
    common::block(
        &mut ctl,
        &mut r2,
        &["XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", ">"],
    );
    log.push("xadd 5-1", ctl.cmd(&["XADD", "s", "5-1", "f", "g1"]));
    log.push("group reader 1", r1.read_reply().expect("group reader 1"));
    log.push("group reader 2 waits", pending(&mut r2));
    log.push("xpending after 1", ctl.cmd(&["XPENDING", "s", "g"]));
    log.push("multi 2", ctl.cmd(&["MULTI"]));
    log.push("queued 6-1", ctl.cmd(&["XADD", "s", "6-1", "f", "g2"]));
    log.push("queued 6-2", ctl.cmd(&["XADD", "s", "6-2", "f", "g3"]));
    log.push("exec 2", ctl.cmd(&["EXEC"]));
    log.push("group reader 2", r2.read_reply().expect("group reader 2"));
    log.push("xpending after 2", ctl.cmd(&["XPENDING", "s", "g"]));
    log.push("xinfo groups", ctl.cmd(&["XINFO", "GROUPS", "s"]));

    // NOACK on wake-up leaves nothing pending.
    common::send(&mut r1, &["XREADGROUP", "GROUP", "g", "c1", "NOACK", "BLOCK", "0", "STREAMS", "s", ">"]);
    log.push("noack served at once", r1.read_reply().expect("noack"));
    common::block(&mut ctl, &mut r1, &["XREADGROUP", "GROUP", "g", "c1", "NOACK", "BLOCK", "0", "STREAMS", "s", ">"]);
    log.push("xadd 7-1", ctl.cmd(&["XADD", "s", "7-1", "f", "g4"]));
    log.push("noack woken", r1.read_reply().expect("noack woken"));
    log.push("xpending noack", ctl.cmd(&["XPENDING", "s", "g"]));

    // An explicit ID in XREADGROUP reads history and never blocks.
    log.push("history no block", r1.cmd(&["XREADGROUP", "GROUP", "g", "c9", "BLOCK", "0", "STREAMS", "s", "0"]));

    // Timeouts: a null array in RESP2, a null in RESP3; a pipelined command runs after it.
    common::send(&mut r1, &["XREAD", "BLOCK", "200", "STREAMS", "s", "$"]);
    common::send(&mut r1, &["PING"]);
    log.push("xread timeout", r1.read_reply().expect("xread timeout"));
    log.push("pipelined ping", r1.read_reply().expect("ping"));
    common::send(&mut r1, &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "200", "STREAMS", "s", ">"]);
    log.push("xreadgroup timeout", r1.read_reply().expect("xreadgroup timeout"));
    let _ = r2.cmd(&["HELLO", "3"]);
    common::send(&mut r2, &["XREAD", "BLOCK", "150", "STREAMS", "s", "$"]);
    log.push("resp3 xread timeout", r2.read_reply().expect("resp3 timeout"));
    common::send(&mut r2, &["XREADGROUP", "GROUP", "g", "c2", "BLOCK", "150", "STREAMS", "s", ">"]);
    log.push("resp3 xreadgroup timeout", r2.read_reply().expect("resp3 group timeout"));
    common::block(&mut ctl, &mut r2, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    log.push("xadd 8-1", ctl.cmd(&["XADD", "s", "8-1", "f", "r3"]));
    log.push("resp3 woken", r2.read_reply().expect("resp3 woken"));
    let _ = r2.cmd(&["HELLO", "2"]);

    // Inside MULTI the blocking reads answer at once.
    log.push("multi 3", r1.cmd(&["MULTI"]));
    log.push("queued xread", r1.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]));
    log.push("queued xread id", r1.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "7-1"]));
    log.push("queued xreadgroup", r1.cmd(&["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">"]));
    log.push("exec 3", r1.cmd(&["EXEC"]));

    // A stream deleted and re-created with lower IDs does not serve a reader waiting after `$`;
    // a higher ID does.
    common::block(&mut ctl, &mut r1, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
    log.push("del s", ctl.cmd(&["DEL", "s"]));
    log.push("xadd low", ctl.cmd(&["XADD", "s", "1-0", "f", "low"]));
    log.push("plain reader waits", pending(&mut r1));
    log.push("xadd high", ctl.cmd(&["XADD", "s", "9-0", "f", "high"]));
    log.push("plain reader woken", r1.read_reply().expect("plain reader woken"));

    // A key of another type does not wake a plain reader; CLIENT UNBLOCK answers the timeout reply.
    let id = String::from_utf8_lossy(&r1.cmd(&["CLIENT", "ID"])).trim_start_matches(':').trim().to_string();
    common::block(&mut ctl, &mut r1, &["XREAD", "BLOCK", "0", "STREAMS", "str", "$"]);
    log.push("set str", ctl.cmd(&["SET", "str", "x"]));
    log.push("string does not wake", pending(&mut r1));
    log.push("client unblock", ctl.cmd(&["CLIENT", "UNBLOCK", &id]));
    log.push("unblocked reply", r1.read_reply().expect("unblocked"));
    common::send(&mut r1, &["XREADGROUP", "GROUP", "g2", "c", "BLOCK", "0", "STREAMS", "s", ">"]);
    log.push("no group, no block", r1.read_reply().expect("nogroup"));
    log.push("xgroup create g2", ctl.cmd(&["XGROUP", "CREATE", "s", "g2", "$"]));
    common::block(&mut ctl, &mut r1, &["XREADGROUP", "GROUP", "g2", "c", "BLOCK", "0", "STREAMS", "s", ">"]);
    log.push("client unblock error", ctl.cmd(&["CLIENT", "UNBLOCK", &id, "ERROR"]));
    log.push("unblocked error reply", r1.read_reply().expect("unblocked error"));
    log.push("ping after", r1.cmd(&["PING"]));
    log
}

/// Compares two runs step by step, naming the first differing step.
fn assert_same(expected: &Log, got: &Log) {
    for ((label, e), (_, g)) in expected.0.iter().zip(&got.0) {
        assert_eq!(common::show(g), common::show(e), "step `{label}`");
    }
    assert_eq!(expected.0.len(), got.0.len());
}

#[test]
fn blocking_stream_reads_match_redis() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = scenario(&redis);
    let got = scenario(&ferrodis);
    assert_same(&expected, &got);
}

/// A blocked XREADGROUP whose group is destroyed, or whose key is deleted, overwritten by another
/// type, renamed away or flushed, is answered with an error at once by Redis 7.0:
/// `-NOGROUP the consumer group this client was blocked on no longer exists` and
/// `-UNBLOCKED the stream key no longer exists`. A blocked plain XREAD keeps waiting.
fn lost_group_scenario(server: &Server) -> Log {
    let mut log = Log(Vec::new());
    let mut ctl = server.client();
    log.push("flushall", ctl.cmd(&["FLUSHALL"]));
    let cases: &[(&str, &[&[&str]])] = &[
        ("xgroup destroy", &[&["XGROUP", "DESTROY", "s", "g"]]),
        ("del", &[&["DEL", "s"]]),
        ("unlink", &[&["UNLINK", "s"]]),
        ("set over it", &[&["SET", "s", "x"]]),
        ("rename away", &[&["RENAME", "s", "t"]]),
        ("flushall", &[&["FLUSHALL"]]),
    ];
    for (name, actions) in cases {
        let mut r = server.client();
        let mut plain = server.client();
        log.push("reset", ctl.cmd(&["DEL", "s", "t"]));
        log.push("xadd", ctl.cmd(&["XADD", "s", "1-1", "f", "v"]));
        log.push("create", ctl.cmd(&["XGROUP", "CREATE", "s", "g", "$"]));
        // The readers of the previous case are gone (their connections closed) before these block.
        common::wait_blocked(&mut ctl, 0, "the previous case's readers to go");
        common::block(&mut ctl, &mut r, &["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]);
        common::block(&mut ctl, &mut plain, &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        for argv in *actions {
            log.push(name, ctl.cmd(argv));
        }
        log.push(&format!("{name}: xreadgroup reader"), pending(&mut r));
        log.push(&format!("{name}: xread reader"), pending(&mut plain));
    }
    log
}

#[test]
fn destroyed_group_or_deleted_key_unblocks_xreadgroup() {
    let redis = RedisServer::new();
    let ferrodis = TestServer::new();
    let expected = lost_group_scenario(&redis);
    let got = lost_group_scenario(&ferrodis);
    assert_same(&expected, &got);
}
