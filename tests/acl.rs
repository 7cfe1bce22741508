//! ACL behaviour that needs more than one connection, a restart or a file, compared between real
//! Redis and ferrodis side by side: ACL DELUSER closing the deleted user's connections, a
//! subscriber closed when its user loses access to a channel it listens on, the `user=` field of
//! CLIENT LIST / CLIENT INFO and CLIENT KILL USER, ACL LOG entries (reason, context, object,
//! username, count; for commands, keys, channels, AUTH failures, EXEC re-checks and scripts),
//! permissions re-checked at EXEC after another connection changed them, users given with `--user`
//! at startup or in an `--aclfile` with ACL SAVE and ACL LOAD, the startup errors (both kinds of
//! configuration, a missing file, a bad directive), `requirepass` as the default user's password,
//! and rules strings whose single-command part Redis lists in hash-table order (compared as sets).
//! The single-connection surface is in tests/differential/acl.txt. Expected bytes come from the
//! real server.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{parse_value, show, Client, RedisServer, Server, TestServer, Value};

const QUIET: Duration = Duration::from_millis(300);
/// How long to wait for a connection the server should close (EOF ends the wait early).
const CLOSE_WAIT: Duration = Duration::from_millis(1000);

/// Runs `scenario` against real Redis and ferrodis and compares the collected replies step by step.
fn compare(scenario: fn(&Server) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    compare_with(&[], scenario)
}

fn compare_with(args: &[&str], scenario: fn(&Server) -> Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let expected = scenario(&RedisServer::with_args(args));
    let got = scenario(&TestServer::with_args(args));
    assert_same(&expected, &got);
    expected
}

fn assert_same(expected: &[Vec<u8>], got: &[Vec<u8>]) {
    for (i, (e, g)) in expected.iter().zip(got).enumerate() {
        assert_eq!(show(g), show(e), "step {i}: ferrodis (left) differs from redis (right)");
    }
    assert_eq!(got.len(), expected.len(), "number of steps");
}

/// A HELLO reply reduced to its type byte (the client id in it is opaque), or the error in full.
fn hello(c: &mut Client, argv: &[&str]) -> Vec<u8> {
    let r = c.cmd(argv);
    if r.starts_with(b"-") {
        r
    } else {
        r[..1].to_vec()
    }
}

/// Whether the server has closed `c`: a PING gets no reply.
fn closed(c: &mut Client) -> Vec<u8> {
    common::send(c, &["PING"]);
    let d = c.drain(CLOSE_WAIT);
    format!("closed={} {}", d.closed, show(&d.bytes)).into_bytes()
}

/// One field (`user`, `flags`, ...) of a CLIENT LIST / CLIENT INFO line.
fn field(line: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(line);
    let key = format!(" {name}=");
    text.split(&key).nth(1).and_then(|r| r.split([' ', '\n', '\r']).next()).unwrap_or("").to_string()
}

fn text(v: &Value) -> String {
    match v {
        Value::Bulk(Some(b)) | Value::Simple(_, b) => String::from_utf8_lossy(b).into_owned(),
        Value::Int(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// ACL LOG entries without the fields that differ from run to run (age-seconds, client-info): one
/// `count reason context object username` line per entry, newest first as Redis lists them.
fn log_entries(c: &mut Client, argv: &[&str]) -> Vec<u8> {
    let reply = c.cmd(argv);
    let Value::Agg(_, Some(entries)) = parse_value(&reply) else {
        return reply;
    };
    let mut out = Vec::new();
    for entry in entries {
        let Value::Agg(_, Some(items)) = entry else { return reply };
        let mut keys = Vec::new();
        let mut shown = Vec::new();
        for pair in items.chunks(2) {
            let name = text(&pair[0]);
            keys.push(name.clone());
            if name != "age-seconds" && name != "client-info" {
                shown.push(format!("{name}={}", text(&pair[1])));
            }
        }
        out.push(format!("[{}] {}", keys.join(","), shown.join(" ")));
    }
    out.join("\n").into_bytes()
}

/// (a) ACL DELUSER closes every connection authenticated as a deleted user, the caller's own too;
/// other users' connections stay.
fn deluser_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    out.push(ctl.cmd(&["ACL", "SETUSER", "alice", "on", ">pw", "~*", "&*", "+@all"]));
    out.push(ctl.cmd(&["ACL", "SETUSER", "bob", "on", ">pw", "~*", "&*", "+@all"]));
    let mut a1 = server.client();
    let mut a2 = server.client();
    let mut b = server.client();
    out.push(a1.cmd(&["AUTH", "alice", "pw"]));
    out.push(hello(&mut a2, &["HELLO", "2", "AUTH", "alice", "pw", "SETNAME", "a2"]));
    out.push(b.cmd(&["AUTH", "bob", "pw"]));
    // Disabling or changing the password does not close anything.
    out.push(ctl.cmd(&["ACL", "SETUSER", "alice", "off", "resetpass"]));
    out.push(a1.cmd(&["ACL", "WHOAMI"]));
    out.push(ctl.cmd(&["ACL", "SETUSER", "alice", "on", ">pw"]));
    out.push(ctl.cmd(&["ACL", "DELUSER", "alice", "nosuch"]));
    out.push(closed(&mut a1));
    out.push(closed(&mut a2));
    out.push(b.cmd(&["ACL", "WHOAMI"]));
    out.push(ctl.cmd(&["ACL", "USERS"]));
    // A user deleting itself: the reply comes, then the connection closes.
    common::send(&mut b, &["ACL", "DELUSER", "bob"]);
    let d = b.drain(CLOSE_WAIT);
    out.push(format!("closed={} {}", d.closed, show(&d.bytes)).into_bytes());
    out.push(ctl.cmd(&["ACL", "USERS"]));
    // Connections left that are not the default user's (the harness's readiness probe may linger).
    let list = ctl.cmd(&["CLIENT", "LIST"]);
    let others: Vec<String> = list
        .split(|&c| c == b'\n')
        .filter(|l| l.starts_with(b"id="))
        .map(|l| field(l, "user"))
        .filter(|u| u != "default")
        .collect();
    out.push(others.join(",").into_bytes());
    out
}

#[test]
fn deluser_closes_the_users_connections() {
    let r = compare(deluser_scenario);
    assert_eq!(r[8], b":1\r\n");
    assert!(r[9].starts_with(b"closed=true"), "{}", show(&r[9]));
}

/// (b) A subscriber is closed when its user loses access to a channel or pattern it listens on;
/// subscribers still covered, and connections with no subscriptions, stay.
fn channel_loss_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    for argv in [
        &["ACL", "SETUSER", "u", "on", "nopass", "~*", "resetchannels", "&news.*", "&sports", "+@all"][..],
        &["ACL", "SETUSER", "v", "on", "nopass", "~*", "resetchannels", "&a*", "&b*", "+@all"],
        &["ACL", "SETUSER", "w", "on", "nopass", "~*", "allchannels", "+@all"],
        &["ACL", "SETUSER", "x", "on", "nopass", "~*", "resetchannels", "&s1", "+@all"],
    ] {
        out.push(ctl.cmd(argv));
    }
    let mut u_sub = server.client();
    let mut u_psub = server.client();
    let mut u_idle = server.client();
    let mut v_sub = server.client();
    let mut w_sub = server.client();
    let mut x_ssub = server.client();
    out.push(u_sub.cmd(&["AUTH", "u", "x"]));
    out.push(u_sub.cmd(&["SUBSCRIBE", "sports"]));
    out.push(u_psub.cmd(&["AUTH", "u", "x"]));
    out.push(u_psub.cmd(&["PSUBSCRIBE", "news.*"]));
    out.push(u_idle.cmd(&["AUTH", "u", "x"]));
    out.push(v_sub.cmd(&["AUTH", "v", "x"]));
    out.push(v_sub.cmd(&["SUBSCRIBE", "a1"]));
    out.push(w_sub.cmd(&["AUTH", "w", "x"]));
    out.push(w_sub.cmd(&["PSUBSCRIBE", "*"]));
    out.push(x_ssub.cmd(&["AUTH", "x", "x"]));
    out.push(x_ssub.cmd(&["SSUBSCRIBE", "s1"]));

    // v keeps &a*: its subscriber stays.
    out.push(ctl.cmd(&["ACL", "SETUSER", "v", "resetchannels", "&a*"]));
    out.push(ctl.cmd(&["PUBLISH", "a1", "still"]));
    out.push(v_sub.drain(QUIET).bytes);
    // u keeps news.* but loses sports: only the SUBSCRIBE sports connection goes.
    out.push(ctl.cmd(&["ACL", "SETUSER", "u", "resetchannels", "&news.*"]));
    out.push(closed(&mut u_sub));
    out.push(ctl.cmd(&["PUBLISH", "news.1", "m"]));
    out.push(u_psub.drain(QUIET).bytes);
    // A narrower pattern does not cover PSUBSCRIBE news.* (patterns match literally).
    out.push(ctl.cmd(&["ACL", "SETUSER", "u", "resetchannels", "&news.1*"]));
    out.push(closed(&mut u_psub));
    out.push(u_idle.cmd(&["ACL", "WHOAMI"]));
    // w goes from allchannels to a list: PSUBSCRIBE * is no longer covered.
    out.push(ctl.cmd(&["ACL", "SETUSER", "w", "resetchannels", "&*x"]));
    out.push(closed(&mut w_sub));
    // Shard channels count too.
    out.push(ctl.cmd(&["ACL", "SETUSER", "x", "resetchannels"]));
    out.push(closed(&mut x_ssub));
    out.push(ctl.cmd(&["PUBLISH", "a1", "end"]));
    out.push(v_sub.drain(QUIET).bytes);
    out
}

#[test]
fn losing_channel_access_closes_subscribers() {
    let r = compare(channel_loss_scenario);
    assert!(r.iter().any(|s| s.starts_with(b"closed=true")), "redis closed no subscriber");
}

/// (c) The `user=` field of CLIENT LIST and CLIENT INFO follows AUTH and HELLO AUTH (a failed AUTH
/// leaves it), and CLIENT KILL USER closes that user's connections.
fn client_user_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    let mut a = server.client();
    let mut b = server.client();
    out.push(ctl.cmd(&["ACL", "SETUSER", "alice", "on", ">pw", "~*", "&*", "+@all"]));
    out.push(ctl.cmd(&["ACL", "SETUSER", "bob", "on", "nopass", "~*", "&*", "+@all"]));
    out.push(field(&a.cmd(&["CLIENT", "INFO"]), "user").into_bytes());
    out.push(a.cmd(&["AUTH", "alice", "pw"]));
    out.push(field(&a.cmd(&["CLIENT", "INFO"]), "user").into_bytes());
    out.push(a.cmd(&["AUTH", "alice", "wrong"]));
    out.push(field(&a.cmd(&["CLIENT", "INFO"]), "user").into_bytes());
    out.push(hello(&mut b, &["HELLO", "3", "AUTH", "bob", "x"]));
    out.push(field(&b.cmd(&["CLIENT", "INFO"]), "user").into_bytes());
    let id = b.cmd(&["CLIENT", "ID"]);
    let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
    out.push(field(&ctl.cmd(&["CLIENT", "LIST", "ID", &id]), "user").into_bytes());
    // Connections of the default user are left out: the harness's readiness probe may still be
    // listed.
    let list = ctl.cmd(&["CLIENT", "LIST"]);
    let mut users: Vec<String> = list
        .split(|&c| c == b'\n')
        .filter(|l| l.starts_with(b"id="))
        .map(|l| field(l, "user"))
        .filter(|u| u != "default")
        .collect();
    users.sort();
    out.push(users.join(",").into_bytes());
    out.push(a.cmd(&["AUTH", "default", "x"]));
    out.push(field(&a.cmd(&["CLIENT", "INFO"]), "user").into_bytes());
    out.push(ctl.cmd(&["CLIENT", "KILL", "USER", "bob"]));
    out.push(closed(&mut b));
    out.push(ctl.cmd(&["CLIENT", "KILL", "USER", "alice"]));
    out.push(ctl.cmd(&["CLIENT", "KILL", "USER", "nosuch"]));
    out
}

#[test]
fn client_list_shows_the_authenticated_user() {
    let r = compare(client_user_scenario);
    assert_eq!(r[2], b"default");
    assert_eq!(r[4], b"alice");
}

/// (d) ACL LOG: a denied command, key, channel, AUTH failure, a command refused at EXEC and one in
/// a script, with identical entries folded into one whose count grows; ACL LOG <count> and RESET.
fn log_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    let mut c = server.client();
    out.push(ctl.cmd(&[
        "ACL",
        "SETUSER",
        "lu",
        "on",
        ">pw",
        "~k*",
        "resetchannels",
        "&ch*",
        "+get",
        "+set",
        "+publish",
        "+multi",
        "+exec",
        "+eval",
        "+acl|setuser",
    ]));
    out.push(log_entries(&mut ctl, &["ACL", "LOG"]));
    out.push(c.cmd(&["AUTH", "lu", "wrong"]));
    out.push(c.cmd(&["AUTH", "nosuchuser", "x"]));
    out.push(c.cmd(&["HELLO", "2", "AUTH", "lu", "wrong2"]));
    out.push(c.cmd(&["AUTH", "lu", "pw"]));
    out.push(c.cmd(&["DEL", "k1"]));
    out.push(c.cmd(&["DEL", "k1"]));
    out.push(c.cmd(&["GET", "x1"]));
    out.push(c.cmd(&["SET", "k1", "v"]));
    out.push(c.cmd(&["PUBLISH", "other", "m"]));
    out.push(c.cmd(&["CLIENT", "ID"]));
    out.push(c.cmd(&["EVAL", "return redis.pcall('get','x2')", "0"]));
    out.push(c.cmd(&["EVAL", "return redis.call('incr','k1')", "0"]));
    out.push(c.cmd(&["EVAL", "return redis.call('publish','nope','m')", "0"]));
    out.push(c.cmd(&["EVAL", "return redis.acl_check_cmd('get','x3')", "0"]));
    // Permissions change between queueing and EXEC.
    out.push(c.cmd(&["MULTI"]));
    out.push(c.cmd(&["ACL", "SETUSER", "lu", "-get"]));
    out.push(c.cmd(&["GET", "k1"]));
    out.push(c.cmd(&["EXEC"]));
    out.push(log_entries(&mut ctl, &["ACL", "LOG"]));
    out.push(log_entries(&mut ctl, &["ACL", "LOG", "2"]));
    out.push(ctl.cmd(&["ACL", "LOG", "0"]));
    out.push(ctl.cmd(&["ACL", "LOG", "RESET"]));
    out.push(log_entries(&mut ctl, &["ACL", "LOG"]));
    out.push(c.cmd(&["GET", "k1"]));
    // RESP3: entries are maps.
    out.push(hello(&mut ctl, &["HELLO", "3"]));
    out.push(log_entries(&mut ctl, &["ACL", "LOG"]));
    out
}

#[test]
fn acl_log_entries_match_real_redis() {
    let r = compare(log_scenario);
    let log = String::from_utf8_lossy(&r[20]).into_owned();
    for want in ["reason=auth", "reason=key", "reason=channel", "context=lua", "context=multi", "count=2"] {
        assert!(log.contains(want), "redis's ACL LOG lacks {want}: {log}");
    }
}

/// Another connection narrows a user's permissions after its MULTI queued a command: EXEC refuses
/// that command with Redis's text, the others run.
fn exec_recheck_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut ctl = server.client();
    let mut c = server.client();
    out.push(ctl.cmd(&["ACL", "SETUSER", "t", "on", "nopass", "~*", "&*", "+@all"]));
    out.push(c.cmd(&["AUTH", "t", "x"]));
    out.push(c.cmd(&["MULTI"]));
    out.push(c.cmd(&["SET", "k", "1"]));
    out.push(c.cmd(&["SET", "other", "1"]));
    out.push(c.cmd(&["INCR", "k"]));
    out.push(c.cmd(&["PUBLISH", "ch", "m"]));
    out.push(c.cmd(&["GET", "k"]));
    out.push(ctl.cmd(&["ACL", "SETUSER", "t", "-incr", "resetkeys", "~k", "resetchannels"]));
    out.push(c.cmd(&["EXEC"]));
    out.push(ctl.cmd(&["MGET", "k", "other"]));
    out.push(log_entries(&mut ctl, &["ACL", "LOG"]));
    out
}

#[test]
fn exec_rechecks_permissions() {
    compare(exec_recheck_scenario);
}

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A directory for files a server reads at startup, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ferrodis-acl-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn file(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether a server given `args` starts (both kinds are tried: each must agree with Redis).
fn starts(start: fn(&[&str]) -> Server, args: &[&str]) -> bool {
    // The panic message of a failed start lands in this test's captured output.
    let Ok(mut server) = catch_unwind(AssertUnwindSafe(|| start(args))) else { return false };
    // A PING can reach another test's server that took the port meanwhile: the process must also
    // stay up.
    std::thread::sleep(Duration::from_millis(200));
    server.alive()
}

/// (e) `--user` directives on the command line: ACL LIST shows them; ACL SAVE and ACL LOAD need a file.
fn user_args_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut c = server.client();
    out.push(c.cmd(&["ACL", "LIST"]));
    out.push(c.cmd(&["ACL", "SAVE"]));
    out.push(c.cmd(&["ACL", "LOAD"]));
    let mut a = server.client();
    out.push(a.cmd(&["AUTH", "alice", "pw"]));
    out.push(a.cmd(&["ACL", "WHOAMI"]));
    out.push(a.cmd(&["AUTH", "bob", "x"]));
    out.push(a.cmd(&["GET", "k"]));
    out.push(a.cmd(&["SET", "k", "v"]));
    out.push(c.cmd(&["CONFIG", "GET", "aclfile"]));
    out
}

#[test]
fn users_from_the_command_line() {
    let args = ["--user", "alice", "on", ">pw", "~*", "+@all", "--user", "bob", "on", "nopass", "-@all", "+get"];
    let r = compare_with(&args, user_args_scenario);
    assert!(String::from_utf8_lossy(&r[0]).contains("user alice on #"), "{}", show(&r[0]));
}

/// The ACL file of `dir` as the server rewrote it, or a marker when it is missing.
fn read_file(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|_| b"(missing)".to_vec())
}

const ACL_FILE: &str = "user default on nopass ~* &* +@all\n\
user alice on >pw ~a* &c* -@all +@string\n\
user bob off #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 resetchannels -@all +get (~x +set)\n\
user carol on nopass %R~r* %W~w* resetchannels +@all -@dangerous\n";

/// (e) Users from an ACL file; ACL SAVE writes the file back, ACL LOAD rereads it (an edit, an
/// error that leaves the users unchanged, and connections of reloaded users).
fn aclfile_scenario(start: fn(&[&str]) -> Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let dir = TempDir::new("aclfile");
    let path = dir.file("users.acl");
    std::fs::write(&path, ACL_FILE).expect("write acl file");
    let server = start(&["--aclfile", &path]);
    let mut c = server.client();
    let mask = |reply: Vec<u8>| String::from_utf8_lossy(&reply).replace(&path, "PATH").into_bytes();
    out.push(c.cmd(&["ACL", "LIST"]));
    out.push(c.cmd(&["ACL", "GETUSER", "bob"]));
    out.push(mask(c.cmd(&["CONFIG", "GET", "aclfile"])));
    let mut a = server.client();
    out.push(a.cmd(&["AUTH", "alice", "pw"]));
    out.push(a.cmd(&["GET", "a1"]));
    out.push(a.cmd(&["GET", "b1"]));

    out.push(c.cmd(&["ACL", "SETUSER", "dave", "on", ">dpw", "~d*", "+@hash"]));
    out.push(c.cmd(&["ACL", "DELUSER", "carol"]));
    out.push(c.cmd(&["ACL", "SAVE"]));
    out.push(read_file(&path));

    // An edited file is loaded; alice's connection is closed by the reload.
    std::fs::write(&path, format!("{ACL_FILE}user erin on nopass ~* +ping\n")).expect("rewrite acl file");
    out.push(c.cmd(&["ACL", "LOAD"]));
    out.push(c.cmd(&["ACL", "LIST"]));
    out.push(closed(&mut a));
    out.push(c.cmd(&["ACL", "WHOAMI"]));

    // A file with an error is refused as a whole.
    for bad in [
        "user default on nopass ~* &* +@all\nuser zed on +nosuchcommand\n",
        "user default on nopass ~* &* +@all\nthis is not a user line\n",
        "user default on nopass ~* &* +@all\nuser alice on\nuser alice off\n",
        "user alice on nopass\n",
        "\n# comment\nuser default on nopass ~* &* +@all\n   \n",
        "user default on nopass ~* &* +@all\nuser a (~x +get\n",
    ] {
        std::fs::write(&path, bad).expect("write bad acl file");
        out.push(mask(c.cmd(&["ACL", "LOAD"])));
        out.push(c.cmd(&["ACL", "USERS"]));
    }
    std::fs::remove_file(&path).expect("remove acl file");
    out.push(mask(c.cmd(&["ACL", "LOAD"])));
    out.push(c.cmd(&["ACL", "SAVE"]));
    out.push(read_file(&path));
    out
}

#[test]
fn aclfile_save_and_load_round_trip() {
    let expected = aclfile_scenario(RedisServer::with_args);
    let got = aclfile_scenario(TestServer::with_args);
    assert_same(&expected, &got);
    assert!(String::from_utf8_lossy(&expected[9]).contains("user dave on #"), "{}", show(&expected[9]));
}

/// (e) Configurations Redis refuses at startup: both `user` directives and an aclfile, a missing
/// aclfile, a username with spaces (one `--user` argument holding the whole rule), a bad rule.
#[test]
fn bad_acl_configurations_refuse_to_start() {
    let dir = TempDir::new("refuse");
    let path = dir.file("users.acl");
    std::fs::write(&path, ACL_FILE).expect("write acl file");
    let missing = dir.file("missing.acl");
    let bad = dir.file("bad.acl");
    std::fs::write(&bad, "user default on nopass ~* &* +@all\nuser x on +nosuchcommand\n").expect("write bad file");
    let cases: Vec<Vec<&str>> = vec![
        vec!["--user", "alice", "on", ">pw", "--aclfile", &path],
        vec!["--aclfile", &missing],
        vec!["--aclfile", &bad],
        vec!["--user", "alice on >pw ~* +@all"],
        vec!["--user", "alice", "bogus"],
        vec!["--user", "alice", "on", ">pw", "~*", "+@all"],
        vec!["--aclfile", &path],
    ];
    for args in &cases {
        let redis = starts(RedisServer::with_args, args);
        let ours = starts(TestServer::with_args, args);
        assert_eq!(ours, redis, "ferrodis starting (left) vs redis (right) with {args:?}");
    }
    assert!(!starts(RedisServer::with_args, &cases[0]), "redis started with both user and aclfile");
    assert!(starts(RedisServer::with_args, &cases[6]), "redis did not start with a good aclfile");
}

/// (f) requirepass is the default user's password: CONFIG SET requirepass changes it (shown as a
/// hash), new connections need AUTH, and an empty requirepass makes the default user nopass again.
fn requirepass_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut c = server.client();
    out.push(c.cmd(&["ACL", "LIST"]));
    out.push(c.cmd(&["CONFIG", "SET", "requirepass", "x"]));
    out.push(c.cmd(&["ACL", "LIST"]));
    out.push(c.cmd(&["ACL", "GETUSER", "default"]));
    out.push(c.cmd(&["PING"]));
    let mut n = server.client();
    out.push(n.cmd(&["GET", "k"]));
    out.push(n.cmd(&["ACL", "WHOAMI"]));
    out.push(n.cmd(&["AUTH", "wrong"]));
    out.push(n.cmd(&["AUTH", "x"]));
    out.push(n.cmd(&["ACL", "WHOAMI"]));
    let mut m = server.client();
    out.push(m.cmd(&["AUTH", "default", "x"]));
    let mut h = server.client();
    out.push(h.cmd(&["HELLO", "2"]));
    out.push(hello(&mut h, &["HELLO", "2", "AUTH", "default", "x"]));
    // Another password through ACL SETUSER: both work; CONFIG GET still shows requirepass's.
    out.push(c.cmd(&["ACL", "SETUSER", "default", ">y"]));
    out.push(c.cmd(&["CONFIG", "GET", "requirepass"]));
    out.push(server.client().cmd(&["AUTH", "y"]));
    out.push(server.client().cmd(&["AUTH", "x"]));
    out.push(c.cmd(&["CONFIG", "SET", "requirepass", "z"]));
    out.push(c.cmd(&["ACL", "LIST"]));
    out.push(server.client().cmd(&["AUTH", "y"]));
    out.push(c.cmd(&["CONFIG", "SET", "requirepass", ""]));
    out.push(c.cmd(&["ACL", "LIST"]));
    out.push(server.client().cmd(&["GET", "k"]));
    out
}

#[test]
fn requirepass_sets_the_default_users_password() {
    let r = compare(requirepass_scenario);
    assert!(String::from_utf8_lossy(&r[2])
        .contains("user default on #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 ~* &* +@all"));
}

/// Commands and subcommands ferrodis has on purpose that Redis 7.0 lacks (Redis 7.2's CLIENT SETINFO
/// and NO-TOUCH, Redis 7.4's hash field TTLs; see tests/command_table.rs): a rules string lists them
/// as single commands when a category they belong to is only partly granted.
const NEWER_THAN_7_0: &[&str] = &[
    "client|setinfo",
    "client|no-touch",
    "hexpire",
    "hpexpire",
    "hexpireat",
    "hpexpireat",
    "httl",
    "hpttl",
    "hexpiretime",
    "hpexpiretime",
    "hpersist",
];

/// The commands part of a rules string with its single-command tail sorted: Redis lists the
/// categories in a fixed order and then single commands in command-table hash order, which is seeded
/// at random per process. Commands newer than Redis 7.0 are left out.
fn rules_as_set(rules: &str) -> String {
    let mut cats = Vec::new();
    let mut singles = Vec::new();
    for tok in rules.split(' ') {
        if tok.starts_with("+@") || tok.starts_with("-@") {
            cats.push(tok.to_string());
        } else if !NEWER_THAN_7_0.contains(&tok.trim_start_matches(['+', '-'])) {
            singles.push(tok.to_string());
        }
    }
    singles.sort();
    format!("{} | {}", cats.join(" "), singles.join(" "))
}

/// Rules strings with several single-command differences, compared as sets of single commands.
fn rules_set_scenario(server: &Server) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut c = server.client();
    let cases: &[&[&str]] = &[
        &["-@all", "+@hash", "-hset", "+@hash", "-@write"],
        &["+@set", "+@hash", "-@read", "+smembers"],
        &["+get", "+set", "+del", "+client|id", "+client|info"],
        &["+@all", "-@dangerous", "+keys", "+info", "-get", "-set"],
        &["-@all", "+multi", "+exec", "+discard", "+get"],
        &["+@all", "-client|kill", "-client|pause", "-config|set"],
        &["-@all", "+@read", "+@write", "-@keyspace", "+del"],
        &["-@all", "+@stream", "+@list", "-@blocking"],
        &["+@all", "-@fast", "+get", "+hget", "-@admin"],
    ];
    for (i, rules) in cases.iter().enumerate() {
        let name = format!("r{i}");
        let mut argv = vec!["ACL", "SETUSER", &name, "on", "nopass"];
        argv.extend_from_slice(rules);
        out.push(c.cmd(&argv));
        let reply = c.cmd(&["ACL", "GETUSER", &name]);
        let Value::Agg(_, Some(items)) = parse_value(&reply) else { panic!("GETUSER: {}", show(&reply)) };
        let commands = items.chunks(2).find(|p| text(&p[0]) == "commands").map(|p| text(&p[1])).unwrap_or_default();
        out.push(rules_as_set(&commands).into_bytes());
        // ACL LIST shows the same rules, and a user rebuilt from them has the same permissions.
        let list = c.cmd(&["ACL", "LIST"]);
        let line = String::from_utf8_lossy(&list)
            .split("\r\n")
            .find(|l| l.starts_with(&format!("user {name} ")))
            .map(str::to_string)
            .unwrap_or_default();
        let copy = format!("{name}copy");
        let mut argv: Vec<&str> = vec!["ACL", "SETUSER", &copy];
        argv.extend(line.split(' ').skip(2));
        out.push(c.cmd(&argv));
        let reply = c.cmd(&["ACL", "GETUSER", &copy]);
        let Value::Agg(_, Some(items)) = parse_value(&reply) else { panic!("GETUSER: {}", show(&reply)) };
        let again = items.chunks(2).find(|p| text(&p[0]) == "commands").map(|p| text(&p[1])).unwrap_or_default();
        out.push(rules_as_set(&again).into_bytes());
        for cmd in [&["get", "k"][..], &["hset", "k", "f", "v"], &["client", "kill", "1.1.1.1:1"], &["del", "k"]] {
            let mut argv = vec!["ACL", "DRYRUN", &name];
            argv.extend_from_slice(cmd);
            out.push(c.cmd(&argv));
        }
    }
    out
}

#[test]
fn rules_with_several_single_commands_match_as_sets() {
    let r = compare(rules_set_scenario);
    assert_eq!(String::from_utf8_lossy(&r[1]), String::from_utf8_lossy(&r[3]), "redis's rules round trip");
}
