//! Active expiry against real Redis, side by side: how `active-expire-effort` changes what the
//! cron reclaims. Sampling is random on both sides, so the figures are compared by ratio, not
//! byte for byte: each server must show the difference Redis shows.

mod common;

use std::time::Duration;

use common::{encode, Client, RedisServer, Server, TestServer};

/// Keys active expiry reclaimed within 1.5 s (hz 10) of 20000 keys with a TTL of which 5% are
/// already expired, at `effort`.
fn reclaimed(start: impl Fn(&[&str]) -> Server, effort: &str) -> i64 {
    let server = start(&["--hz", "10", "--active-expire-effort", effort, "--enable-debug-command", "yes"]);
    let mut c = server.client();
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    let mut batch = Vec::new();
    for i in 0..19000 {
        batch.extend(encode(&["SET", &format!("long{i}"), "v", "EX", "1000"]));
    }
    for i in 0..1000 {
        batch.extend(encode(&["SET", &format!("short{i}"), "v", "PX", "1"]));
    }
    send_all(&mut c, &batch, 20000);
    std::thread::sleep(Duration::from_millis(20));
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    std::thread::sleep(Duration::from_millis(1500));
    common::info_field(&mut c, "stats", "expired_keys").parse().expect("expired_keys")
}

/// Writes a pipeline and reads its `n` replies.
fn send_all(c: &mut Client, bytes: &[u8], n: usize) {
    c.send_raw(bytes).expect("send");
    for _ in 0..n {
        c.read_reply().expect("reply");
    }
}

#[test]
fn active_expire_effort_reclaims_more_per_cycle() {
    // A sample of 20 keys (effort 1) with one or two expired is under the 10% Redis accepts, so
    // the cycle moves on; effort 10 samples 65 and goes on while over 1%.
    let redis = (reclaimed(RedisServer::with_args, "1"), reclaimed(RedisServer::with_args, "10"));
    let ferrodis = (reclaimed(TestServer::with_args, "1"), reclaimed(TestServer::with_args, "10"));
    for (who, (low, high)) in [("redis", redis), ("ferrodis", ferrodis)] {
        assert!(
            high >= 50 && high >= 4 * low.max(1),
            "{who}: effort 1 reclaimed {low}, effort 10 {high} (redis {redis:?})"
        );
        assert!(low < 200, "{who}: effort 1 reclaimed {low} (redis {redis:?})");
    }
}
