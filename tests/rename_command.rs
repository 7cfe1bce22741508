//! `rename-command` against real Redis 7.0: a renamed command answers only to its new name, a
//! command renamed to "" is gone, and COMMAND INFO / MULTI see the table as Redis's does.

mod common;
use common::{show, RedisServer, Server, TestServer};

fn session(server: &mut Server) -> Vec<String> {
    let mut c = server.client();
    let mut out = Vec::new();
    for argv in [
        &["SET", "k", "v"][..],
        &["FLUSHDB"],
        &["DBSIZE"],
        &["BADGER"],
        &["DBSIZE"],
        &["CONFIG", "GET", "port"],
        &["MULTI"],
        &["FLUSHDB"],
        &["BADGER"],
        &["EXEC"],
        &["COMMAND", "INFO", "flushdb"],
    ] {
        out.push(format!("{} -> {}", argv.join(" "), show(&c.cmd(argv))));
    }
    out
}

#[test]
fn renamed_and_removed_commands_behave_as_in_redis() {
    let args = ["--rename-command", "flushdb", "badger", "--rename-command", "config", ""];
    let theirs = session(&mut RedisServer::with_args(&args));
    let ours = session(&mut TestServer::with_args(&args));
    assert_eq!(ours, theirs);
}
