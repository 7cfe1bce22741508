//! KEYS over a big database without making other clients wait: the command starts a walk of the
//! table (`db::walk`, which keeps the reply exact at the command's time whatever runs meanwhile)
//! and replies with a `Later` that its connection waits for; the executor moves every walk on a
//! bounded step at a time between other clients' batches (`step`), and keeps stepping while no
//! batch is waiting. The client's later commands of the same batch run at once (the walk still
//! lists what was there when KEYS ran) and their replies follow KEYS's on the wire, as the
//! connection writes a batch's output in order around its deferred replies.
//!
//! A walk ends when its last step completes the `Later`, or when its connection drops the reply
//! (the client went away: the executor holds it weakly). A table emptied (FLUSHDB, FLUSHALL,
//! DEBUG RELOAD) or replaced (a full resync, DEBUG LOADAOF, a finished load) under a walk does
//! not stop it: the walk keeps the old tables (`db::walk::Walked`), which hold exactly the keys
//! there were then, while its records hold what changed between its command and then, and goes
//! on stepping through them; they are freed off the executor once the walk is over. The flush
//! itself stays O(1) for the executor however big the walked table is. (Only CLUSTER RESET of a
//! replica, through `Db::clear`, still finishes a walk at once.)
//!
//! The command is accounted as Redis accounts a KEYS: one call, whose duration is the executor
//! time it took, its call and every step summed (`Account`), reported when the walk ends.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::sort_walk::{SortJob, SortSpec, Stepped};
use super::State;
use crate::db::walk::{KeyWalk, Walked};
use crate::resp::reply::{Deferred, Later};
use crate::resp::Reply;
use crate::stats::StatName;

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
    /// Tables emptied or replaced under walks, which go on through them.
    pub(super) walked: Vec<Walked>,
    /// The walk the running command started, for call() to hand its accounting to.
    started: Option<u64>,
}

struct Job {
    id: u64,
    client: u64,
    reply: Weak<Later>,
    /// Executor time the command has taken so far: its call, then its steps.
    spent: Duration,
    /// What the command's end reports (set by call() once the handler has started the walk).
    account: Option<Account>,
    /// A SORT walk's own state (None: a KEYS walk).
    sort: Option<Box<SortJob>>,
    /// The error the command turned out to reply, for its failed call.
    failed: Option<&'static str>,
}

/// How a walking command is reported when its walk ends, as call() reports a command that ran
/// in one go: one call in commandstats (counted by call() at once, so that a later command of
/// the same batch sees it as in Redis, where KEYS was over by then), and its duration, the
/// executor time the command took, its call and all its steps, in commandstats' usec, the
/// latency histogram, the latency monitor and the slowlog.
///
/// That sum is Redis's figure: its duration is the time the command held the main thread,
/// I/O excluded, and a KEYS there runs in one go, so that is its whole walk of the table. The
/// wall time from call to last step would add every other client's commands run in between,
/// which Redis would have made wait instead; the first step alone would leave out most of the
/// work.
pub struct Account {
    pub stat: StatName,
    /// The slowlog's view of the command, taken when it ran (a CLIENT SETNAME later in the
    /// batch runs before the walk ends, where Redis had logged KEYS already).
    pub argv: Vec<bytes::Bytes>,
    pub peer: String,
    pub name: String,
    /// The command's time, which stamps its slowlog entry as call() stamps every entry (Redis
    /// stamps one as it logs it, right after the command; for a walk that would be its end).
    pub at_ms: i64,
    /// slowlog-log-slower-than when the command ran; None when it skips the slowlog.
    pub slower_than: Option<i64>,
    /// The latency monitor's event for it.
    pub event: &'static str,
    /// latency-tracking when the command ran.
    pub track: bool,
    /// `Stats::epoch` when it was counted: a CONFIG RESETSTAT since took its call away, so its
    /// time goes too.
    pub epoch: u64,
}

impl Walks {
    /// Whether any walk has a step to take (not only SORT walks waiting for their thread).
    pub fn pending(&self) -> bool {
        self.jobs.iter().any(|j| j.sort.as_ref().is_none_or(|s| s.runnable()))
    }

    /// Whether a SORT walk waits for its thread (which raises `wake` once it is done).
    pub fn in_thread(&self) -> bool {
        self.jobs.iter().any(|j| j.sort.as_ref().is_some_and(|s| !s.runnable()))
    }
}

/// An id for a new walk.
pub fn next_id(st: &mut State) -> u64 {
    st.walks.next_id += 1;
    st.walks.next_id
}

/// Starts SORT walk `id` (registered on its database by the command) for `client`, whose reply
/// comes later.
pub(crate) fn start_sort(st: &mut State, id: u64, client: u64, spec: SortSpec) -> Reply {
    let job = SortJob::start(id, spec, &st.walks.wake);
    defer(st, id, client, Some(Box::new(job)))
}

/// Queues walk `id` of `client` (a SORT walk's own work in `sort`) and returns the reply its
/// connection waits for.
fn defer(st: &mut State, id: u64, client: u64, sort: Option<Box<SortJob>>) -> Reply {
    let later = Arc::new(Later::default());
    st.walks.jobs.push(Job {
        id,
        client,
        reply: Arc::downgrade(&later),
        spent: Duration::ZERO,
        account: None,
        sort,
        failed: None,
    });
    st.walks.started = Some(id);
    st.walks.wake.notify_one();
    Reply::Deferred(Deferred(later))
}

/// Takes SORT walk `id`'s registration out of tables emptied under it; they go once no walk
/// needs them.
pub(super) fn drop_sort(st: &mut State, id: u64) {
    let Some(at) = st.walks.walked.iter().position(|w| w.has_sort(id)) else { return };
    st.walks.walked[at].take_sort(id);
    free_if_idle(st, at);
}

/// Frees emptied tables `at` on a thread of their own once no walk needs them, as FLUSHALL
/// ASYNC frees them.
fn free_if_idle(st: &mut State, at: usize) {
    if st.walks.walked[at].is_idle() {
        let tables = st.walks.walked.swap_remove(at);
        std::thread::spawn(move || {
            drop(tables);
            crate::alloc::flush_thread_cache();
        });
    }
}

/// Ends walk `job`'s work wherever it runs.
fn end_job(st: &mut State, job: &Job) {
    if job.sort.is_some() {
        super::sort_walk::unregister(st, job.id);
    } else {
        take_walk(st, job.id);
    }
}

/// KEYS `pattern` on database `db` at `now_ms` for `client`, whose reply may come later: the
/// reply itself when a first step finished the walk, else a deferred reply completed by `step`.
pub fn start(st: &mut State, db: usize, client: u64, pattern: &[u8], now_ms: i64) -> Reply {
    let id = next_id(st);
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
    defer(st, id, client, None)
}

/// The walk the command call() just ran started, if it goes on after the call: call() then
/// counts the call and leaves its time to `account_later`.
pub fn take_started(st: &mut State) -> Option<u64> {
    st.walks.started.take()
}

/// The command that started walk `id` took `call_us` in call(); the rest of its report waits
/// for the walk's end.
pub fn account_later(st: &mut State, id: u64, call_us: u64, account: Account) {
    if let Some(job) = st.walks.jobs.iter_mut().find(|j| j.id == id) {
        job.spent += Duration::from_micros(call_us);
        job.account = Some(account);
    }
}

/// Reports the command of a walk that is over (see `Account`).
fn report(st: &mut State, job: Job) {
    let Some(a) = job.account else { return };
    if let Some(line) = job.failed {
        super::call::count_failed(st, a.stat, line);
    }
    let us = job.spent.as_micros() as u64;
    if a.epoch == st.stats.epoch {
        let stat = st.stats.commands.entry(a.stat).or_default();
        stat.usec += us;
        if a.track {
            stat.latency.record(us.saturating_mul(1000));
        }
    }
    super::record_latency(st, a.event, us);
    if a.slower_than.is_some_and(|t| t >= 0 && us as i64 >= t) {
        let redacted = crate::slowlog::redacted_positions(a.stat.0, &a.argv);
        let max_len = st.config.slowlog_max_len;
        st.slowlog.push(&a.argv, &redacted, us, a.at_ms / 1000, &a.peer, &a.name, max_len);
    }
}

/// Moves walk `id` on until `deadline` wherever it runs: over a database, or over tables
/// emptied under it. None when it runs nowhere.
fn walk_step(st: &mut State, id: u64, deadline: Option<Instant>) -> Option<bool> {
    if let Some(db) = st.dbs.iter_mut().find(|d| d.has_walk(id)) {
        return db.walk_step(id, deadline);
    }
    st.walks.walked.iter_mut().find(|w| w.has_walk(id))?.walk_step(id, deadline)
}

/// Takes walk `id` out wherever it runs; emptied tables that no walk needs any more are freed
/// on a thread of their own, as FLUSHALL ASYNC frees them.
fn take_walk(st: &mut State, id: u64) -> Option<KeyWalk> {
    for db in &mut st.dbs {
        if let Some(w) = db.take_walk(id) {
            return Some(w);
        }
    }
    let at = st.walks.walked.iter().position(|w| w.has_walk(id))?;
    let walk = st.walks.walked[at].take_walk(id);
    free_if_idle(st, at);
    walk
}

/// Database `db` is being emptied or replaced: its walks go on over the tables it had, which
/// it gives up (it is left empty, as `Db::clear` leaves it). Nothing happens without walks.
pub fn set_aside(st: &mut State, db: usize) {
    if let Some(walked) = st.dbs[db].take_walked() {
        st.walks.walked.push(walked);
    }
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
            let job = st.walks.jobs.remove(at);
            end_job(st, &job);
            report(st, job);
            continue;
        };
        let t0 = Instant::now();
        if let Some(mut sort) = st.walks.jobs[at].sort.take() {
            if !sort.runnable() {
                st.walks.jobs[at].sort = Some(sort);
                st.walks.turn = at + 1;
                continue;
            }
            let stepped = sort.step(st, t0 + slice);
            let job = &mut st.walks.jobs[at];
            job.spent += t0.elapsed();
            job.sort = Some(sort);
            match stepped {
                Stepped::More => st.walks.turn = at + 1,
                Stepped::Done(parts, failed) => {
                    reply.complete(parts);
                    let mut job = st.walks.jobs.remove(at);
                    job.failed = failed;
                    end_job(st, &job);
                    report(st, job);
                }
            }
            if started.elapsed() >= budget {
                break;
            }
            continue;
        }
        match walk_step(st, id, Some(t0 + slice)) {
            Some(true) => {
                let walk = take_walk(st, id).expect("the walk just stepped");
                reply.complete(reply_parts(walk));
                let mut job = st.walks.jobs.remove(at);
                job.spent += t0.elapsed();
                report(st, job);
            }
            Some(false) => {
                st.walks.jobs[at].spent += t0.elapsed();
                st.walks.turn = at + 1;
            }
            None => {
                // The walk's tables went without it (never expected): the reply never comes,
                // and the connection closes rather than wait for it.
                let job = st.walks.jobs.remove(at);
                reply.abandon();
                report(st, job);
            }
        }
        if started.elapsed() >= budget {
            break;
        }
    }
    st.walks.pending()
}

/// The databases are about to be replaced (a full resync, DEBUG LOADAOF, a finished load):
/// their walks go on over the tables they have now.
pub fn set_aside_all(st: &mut State) {
    for db in 0..st.dbs.len() {
        set_aside(st, db);
    }
}

/// Client `id` is gone: its walks stop.
pub fn client_gone(st: &mut State, id: u64) {
    while let Some(at) = st.walks.jobs.iter().position(|j| j.client == id) {
        let job = st.walks.jobs.remove(at);
        end_job(st, &job);
        report(st, job);
    }
}
