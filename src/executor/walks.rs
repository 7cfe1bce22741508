//! KEYS over a big database without making other clients wait: the command starts a walk of the
//! table (`db::walk`, which keeps the reply exact at the command's time whatever runs meanwhile)
//! and replies with a `Later` that its connection waits for; the executor moves every walk on a
//! bounded step at a time between other clients' batches (`step`), and keeps stepping while no
//! batch is waiting. The client's later commands of the same batch run at once (the walk still
//! lists what was there when KEYS ran) and their replies follow KEYS's on the wire, as the
//! connection writes a batch's output in order around its deferred replies.
//!
//! A walk ends when its last step completes the `Later`, when its connection drops the reply
//! (the client went away: the executor holds it weakly), or when the table under it is emptied
//! or replaced (it is then finished at once, see `Db::clear` and `finish_all`).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::State;
use crate::resp::reply::{Deferred, Later};
use crate::resp::Reply;

/// A database this small is walked at once, inside the command: about 0.2 µs a key.
pub const WALK_MIN_KEYS: usize = 4096;

/// How long one step may hold the executor, all walks together. A PING waits at most about this
/// much behind a walk (plus the batch before it).
pub const STEP: Duration = Duration::from_micros(250);

/// The least share of a step one walk gets, however many are in progress.
const MIN_SLICE: Duration = Duration::from_micros(25);

/// Walks in progress, in the order they started.
#[derive(Default)]
pub struct Walks {
    jobs: Vec<Job>,
    next_id: u64,
    /// Where the next step starts among `jobs`, so each gets its turn however many there are.
    turn: usize,
    /// Raised when a walk starts: with io-threads 1 the stepping task waits on it.
    pub wake: Arc<tokio::sync::Notify>,
}

struct Job {
    id: u64,
    client: u64,
    reply: Weak<Later>,
}

impl Walks {
    /// Whether any walk is in progress.
    pub fn pending(&self) -> bool {
        !self.jobs.is_empty()
    }
}

/// KEYS `pattern` on database `db` at `now_ms` for `client`, whose reply may come later: the
/// reply itself when a first step finished the walk, else a deferred reply completed by `step`.
pub fn start(st: &mut State, db: usize, client: u64, pattern: &[u8], now_ms: i64) -> Reply {
    st.walks.next_id += 1;
    let id = st.walks.next_id;
    let table = &mut st.dbs[db];
    table.start_walk(id, pattern, now_ms);
    if table.walk_step(id, Some(Instant::now() + STEP)) == Some(true) {
        let walk = table.take_walk(id).expect("the walk just stepped");
        let mut out = Vec::new();
        for part in reply_parts(walk) {
            out.extend_from_slice(&part);
        }
        return Reply::Raw(out);
    }
    let later = Arc::new(Later::default());
    st.walks.jobs.push(Job { id, client, reply: Arc::downgrade(&later) });
    st.walks.wake.notify_one();
    Reply::Deferred(Deferred(later))
}

/// The reply of a finished walk: the array header, then its bulk strings.
fn reply_parts(walk: crate::db::walk::KeyWalk) -> Vec<Vec<u8>> {
    let (count, chunks) = walk.into_reply();
    let mut head = Vec::with_capacity(24);
    crate::resp::writer::int_line(&mut head, b'*', count as i64);
    let mut parts = Vec::with_capacity(chunks.len() + 1);
    parts.push(head);
    parts.extend(chunks);
    parts
}

/// Moves the walks on for about `budget` in all, each its share; returns whether any is left.
pub fn step(st: &mut State, budget: Duration) -> bool {
    let n = st.walks.jobs.len();
    if n == 0 {
        return false;
    }
    let started = Instant::now();
    let slice = (budget / n as u32).max(MIN_SLICE);
    let mut visited = 0;
    while visited < n && !st.walks.jobs.is_empty() {
        visited += 1;
        let at = st.walks.turn % st.walks.jobs.len();
        let job = &st.walks.jobs[at];
        let id = job.id;
        let Some(reply) = job.reply.upgrade() else {
            // The client went away (its connection dropped the reply): the walk stops.
            st.walks.jobs.remove(at);
            for db in &mut st.dbs {
                db.take_walk(id);
            }
            continue;
        };
        let Some(db) = st.dbs.iter_mut().find(|d| d.has_walk(id)) else {
            // The table went without finishing the walk (never expected): the reply never
            // comes, and the connection closes rather than wait for it.
            st.walks.jobs.remove(at);
            reply.abandon();
            continue;
        };
        if db.walk_step(id, Some(Instant::now() + slice)) == Some(true) {
            let walk = db.take_walk(id).expect("the walk just stepped");
            st.walks.jobs.remove(at);
            reply.complete(reply_parts(walk));
        } else {
            st.walks.turn = at + 1;
        }
        if started.elapsed() >= budget {
            break;
        }
    }
    !st.walks.jobs.is_empty()
}

/// Runs every walk to its end and delivers it: the databases are about to be replaced (a full
/// resync, DEBUG LOADAOF, a finished load). Emptied ones finish their walks themselves.
pub fn finish_all(st: &mut State) {
    if !st.walks.pending() {
        return;
    }
    for db in &mut st.dbs {
        db.finish_walks();
    }
    step(st, Duration::from_secs(3600));
}

/// Client `id` is gone: its walks stop.
pub fn client_gone(st: &mut State, id: u64) {
    if !st.walks.jobs.iter().any(|j| j.client == id) {
        return;
    }
    let gone: Vec<u64> = st.walks.jobs.iter().filter(|j| j.client == id).map(|j| j.id).collect();
    st.walks.jobs.retain(|j| j.client != id);
    for walk in gone {
        for db in &mut st.dbs {
            db.take_walk(walk);
        }
    }
}
