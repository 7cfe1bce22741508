//! The unit-test harness of the command families: a scratch server state and client, commands
//! run straight through their handlers (the table row found as dispatch finds it, subcommands
//! included, without dispatch's checks), replies as RESP bytes. Differential tests against real
//! Redis live in `tests/`; these check what only the inside shows (encodings, block requests).

use std::sync::Arc;

use bytes::Bytes;

use super::{Args, CmdResult, Ctx};
use crate::config::Config;
use crate::executor::clients::{Client, ClientHandle, ConnInfo};
use crate::executor::State;

/// The time every harness command runs at, unless a test sets `now_ms`.
pub const NOW_MS: i64 = 1_700_000_000_000;

pub fn args(words: &[&str]) -> Args {
    Args::new(words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect())
}

/// A client with id `id` connected from 127.0.0.1:`port`.
pub fn client(id: u64, port: u16) -> Client {
    let info = ConnInfo {
        addr: format!("127.0.0.1:{port}"),
        laddr: "127.0.0.1:6379".into(),
        fd: id as i32 + 7,
        unix: false,
        local: true,
        tls: false,
    };
    Client::new(id, info, Arc::new(ClientHandle::default()), 0, true)
}

/// Runs `argv` for `me` on `st` at `now_ms` through its handler; the reply or error.
pub fn call(st: &mut State, me: &mut Client, argv: Vec<Bytes>, now_ms: i64) -> CmdResult {
    super::install();
    let args = Args::new(argv);
    let top = super::lookup(args.get(0)).expect("known command");
    let spec = if top.is_container() { top.subcommand(args.get(1)).expect("known subcommand") } else { top };
    let mut ctx = Ctx::new(st, me, now_ms, spec);
    (spec.handler)(&mut ctx, &args)
}

/// `call`, the reply (or error) encoded for the client's protocol.
pub fn run(st: &mut State, me: &mut Client, argv: Vec<Bytes>, now_ms: i64) -> Vec<u8> {
    let proto = me.proto;
    let reply = call(st, me, argv, now_ms).unwrap_or_else(|e| e.into_reply());
    let mut out = Vec::new();
    crate::resp::writer::write_reply(&mut out, &reply, proto);
    out
}

/// A scratch state with one client (id 1), at `NOW_MS`.
pub struct Harness {
    pub st: State,
    pub client: Client,
    pub now_ms: i64,
}

impl Default for Harness {
    fn default() -> Self {
        Self::with_config(Config::default())
    }
}

impl Harness {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_config(config: Config) -> Self {
        super::install();
        Harness { st: State::new(config), client: client(1, 1), now_ms: NOW_MS }
    }

    /// The handler's result for `words`.
    pub fn call(&mut self, words: &[&str]) -> CmdResult {
        call(&mut self.st, &mut self.client, args(words).argv, self.now_ms)
    }

    /// The reply to `words` as RESP2 bytes.
    pub fn run(&mut self, words: &[&str]) -> Vec<u8> {
        self.client.proto = 2;
        run(&mut self.st, &mut self.client, args(words).argv, self.now_ms)
    }

    /// The reply to a space-separated command line, encoded for protocol `proto`.
    pub fn run_line(&mut self, proto: u8, line: &str) -> Vec<u8> {
        self.client.proto = proto;
        let words: Vec<&str> = line.split(' ').collect();
        run(&mut self.st, &mut self.client, args(&words).argv, self.now_ms)
    }

    /// OBJECT ENCODING of `key` in database 0.
    pub fn encoding(&mut self, key: &str) -> Option<&'static str> {
        self.st.dbs[0].peek(key.as_bytes(), self.now_ms).map(|v| v.encoding_name())
    }

    /// The expiry time of `key` in database 0 (expiring it when past).
    pub fn expire_at(&mut self, key: &str) -> Option<i64> {
        self.st.dbs[0].expire_at(key.as_bytes(), self.now_ms)
    }
}
