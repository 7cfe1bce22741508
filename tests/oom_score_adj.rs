//! oom-score-adj: the same CONFIG SET steps go to real Redis and to ferrodis, and after each the
//! reply and the score the kernel holds for the process (/proc/<pid>/oom_score_adj) must agree.
//!
//! The steps only raise the score above the one the process started with, then restore it, so they
//! need no privilege; a step that lowers it below the start shows the refusal (the error and the
//! rollback) where the test runs without CAP_SYS_RESOURCE, and works where it runs with it: either
//! way both servers must do the same.

mod common;

use common::{show, RedisServer, TestServer};

fn score(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).expect("read oom_score_adj").trim().to_string()
}

#[test]
fn oom_score_adj_is_applied_like_redis() {
    let redis = RedisServer::new();
    let ferro = TestServer::new();
    let mut rc = redis.client();
    let mut fc = ferro.client();
    assert_eq!(score(redis.pid()), score(ferro.pid()), "starting scores");
    let steps: &[&[&str]] = &[
        &["CONFIG", "SET", "oom-score-adj-values", "100 200 800"],
        &["CONFIG", "SET", "oom-score-adj", "absolute"],
        &["CONFIG", "SET", "oom-score-adj-values", "300 400 900"],
        &["CONFIG", "SET", "oom-score-adj", "yes"],
        &["CONFIG", "SET", "oom-score-adj-values", "1500 1600 1700"],
        &["CONFIG", "SET", "oom-score-adj-values", "-1999 0 0"],
        &["CONFIG", "SET", "oom-score-adj-values", "2001 0 0"],
        &["CONFIG", "SET", "oom-score-adj", "relative", "oom-score-adj-values", "50 60 70"],
        &["CONFIG", "SET", "oom-score-adj", "no"],
        &["CONFIG", "SET", "oom-score-adj-values", "500 600 700"],
        &["CONFIG", "SET", "oom-score-adj", "maybe"],
    ];
    for argv in steps {
        let expected = rc.cmd(argv);
        let actual = fc.cmd(argv);
        assert_eq!(show(&actual), show(&expected), "{argv:?}: reply");
        assert_eq!(score(ferro.pid()), score(redis.pid()), "{argv:?}: score after");
        for name in ["oom-score-adj", "oom-score-adj-values"] {
            let get = ["CONFIG", "GET", name];
            assert_eq!(show(&fc.cmd(&get)), show(&rc.cmd(&get)), "{argv:?}: CONFIG GET {name}");
        }
    }
}

/// Started with the settings on its command line, the server takes its score at startup.
#[test]
fn oom_score_adj_from_the_command_line() {
    let args = ["--oom-score-adj", "absolute", "--oom-score-adj-values", "250 300 400"];
    let redis = RedisServer::with_args(&args);
    let ferro = TestServer::with_args(&args);
    // A reply means the event loop runs, which Redis enters only after setting the score.
    assert_eq!(redis.client().cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(ferro.client().cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(score(redis.pid()), "250");
    assert_eq!(score(ferro.pid()), "250");
}
