//! Active expiry as Redis 7.0's activeExpireCycle runs it: a slow cycle each cron tick (up to
//! 25% of the tick's period, more with active-expire-effort) and, while cycles keep running out
//! of time, fast cycles (1 ms, at most every 2 ms) after the executor has served clients, as
//! Redis runs one from beforeSleep. Each cycle goes on with the database where the last one
//! stopped and reads each database's expire table at its cursor (`Db::active_expire_pass`).
//!
//! A cycle runs a slice at a time (`run_slice`), with the clients' turns in between on the
//! one-thread runtime, so its limit is the time it spent, not the time since it began. A slow
//! cycle the next tick finds unfinished counts as one that ran out of time.

use std::time::{Duration, Instant};

use super::State;
use crate::db::ExpireEffort;
use crate::util::clock::unix_ms;

/// Redis's CRON_DBS_PER_CALL: the databases a cycle looks at, unless the last one ran out of
/// time (then all of them).
const DBS_PER_CYCLE: usize = 16;

/// What carries over from one cycle to the next (Redis keeps it in activeExpireCycle's statics).
#[derive(Debug, Default)]
pub struct ExpireCycle {
    /// The database the next cycle looks at first.
    next_db: usize,
    /// The last cycle ran out of time: the next looks at every database, and fast cycles run.
    timelimit_exit: bool,
    /// When the last fast cycle began.
    last_fast: Option<Instant>,
    /// Clients were served (or the cron ran) since the last fast cycle: Redis looks for one
    /// after each turn of its event loop, so an idle server runs none between ticks.
    served: bool,
    /// The cycle in progress, if any.
    run: Option<ExpireRun>,
}

/// A cycle in progress.
#[derive(Debug)]
struct ExpireRun {
    now_ms: i64,
    /// Databases still to look at, from `ExpireCycle::next_db` on.
    dbs_left: usize,
    /// The cycle's time limit less what it has spent.
    left: Duration,
    spent: Duration,
    sampled: usize,
    expired: usize,
}

/// Whether active expiry may run now: not while disabled (DEBUG SET-ACTIVE-EXPIRE 0), while
/// clients are paused (Redis 7.0 keeps the dataset still), nor on a replica, whose master sends
/// the deletions.
fn allowed(st: &State) -> bool {
    st.active_expire_enabled && !st.paused(unix_ms()) && st.repl.master.is_none()
}

/// Starts the tick's slow cycle; one still unfinished from the last tick ends first, as out of
/// time.
pub fn start_slow(st: &mut State, now_ms: i64) {
    if st.expire_cycle.run.is_some() {
        finish(st, true);
    }
    st.expire_cycle.served = true;
    if !allowed(st) {
        return;
    }
    let percent = ExpireEffort::new(st.config.active_expire_effort).cycle_cpu_percent;
    let limit = Duration::from_micros((1_000_000 / st.hz as u64 * percent / 100).max(1));
    begin(st, now_ms, limit);
}

/// When a fast cycle is next due, if one is wanted: the last cycle ran out of time, clients
/// were served since the last fast cycle, and expiry may run (else the cron would wake for a
/// cycle it may not start, again and again).
pub fn fast_due(st: &State) -> Option<Instant> {
    let cycle = &st.expire_cycle;
    if cycle.run.is_some() || !cycle.served || !fast_wanted(st) || !allowed(st) {
        return None;
    }
    let period = 2 * Duration::from_micros(ExpireEffort::new(st.config.active_expire_effort).fast_cycle_us);
    Some(cycle.last_fast.map_or_else(Instant::now, |at| at + period))
}

/// Clients were served: a fast cycle may follow. The cron task sleeps until the next tick
/// unless woken, so it is woken when one is wanted.
#[inline]
pub fn note_served(st: &mut State) {
    if !st.expire_cycle.served {
        st.expire_cycle.served = true;
        if st.expire_cycle.run.is_none() && fast_wanted(st) {
            st.timer.notify_one();
        }
    }
}

/// Redis's test for a fast cycle. It compares the stale share (a fraction) with the acceptable
/// stale percentage, so in effect only a cycle that ran out of time calls for one.
fn fast_wanted(st: &State) -> bool {
    let acceptable = ExpireEffort::new(st.config.active_expire_effort).acceptable_stale_percent;
    st.expire_cycle.timelimit_exit || st.stats.expired_stale_perc >= acceptable as f64
}

/// Starts a fast cycle when one is due (Redis's beforeSleep); returns whether it did.
pub fn start_fast(st: &mut State) -> bool {
    let Some(due) = fast_due(st) else { return false };
    let now = Instant::now();
    if now < due {
        return false;
    }
    st.expire_cycle.last_fast = Some(now);
    st.expire_cycle.served = false;
    let limit = Duration::from_micros(ExpireEffort::new(st.config.active_expire_effort).fast_cycle_us);
    begin(st, unix_ms(), limit);
    true
}

fn begin(st: &mut State, now_ms: i64, limit: Duration) {
    let dbnum = st.dbs.len();
    let dbs = if st.expire_cycle.timelimit_exit { dbnum } else { dbnum.min(DBS_PER_CYCLE) };
    st.expire_cycle.timelimit_exit = false;
    st.expire_cycle.run =
        Some(ExpireRun { now_ms, dbs_left: dbs, left: limit, spent: Duration::ZERO, sampled: 0, expired: 0 });
}

/// Whether a cycle is in progress.
pub fn running(st: &State) -> bool {
    st.expire_cycle.run.is_some()
}

/// Goes on with the cycle in progress until `slice_end` (one step at least); returns whether
/// some of it is left.
pub fn run_slice(st: &mut State, slice_end: Instant) -> bool {
    let Some(mut run) = st.expire_cycle.run.take() else { return false };
    // What stops expiry when a cycle starts stops it between slices too: a CLIENT PAUSE,
    // becoming a replica, DEBUG SET-ACTIVE-EXPIRE 0.
    if !allowed(st) {
        run.dbs_left = 0;
    }
    let effort = ExpireEffort::new(st.config.active_expire_effort);
    let mut stepped = false;
    while run.dbs_left > 0 && !run.left.is_zero() {
        let started = Instant::now();
        if stepped && started >= slice_end {
            st.expire_cycle.run = Some(run);
            return true;
        }
        let index = st.expire_cycle.next_db % st.dbs.len();
        let db = &mut st.dbs[index];
        let deadline = slice_end.min(started + run.left);
        let pass = db.active_expire_pass(run.now_ms, deadline, effort);
        if !pass.timed_out {
            // Hash field TTLs (7.4): the hashes due, earliest first, a bounded number of fields.
            db.active_expire_fields(run.now_ms, deadline, 1000);
        }
        stepped = true;
        let used = started.elapsed();
        run.spent += used;
        run.left = run.left.saturating_sub(used);
        run.sampled += pass.sampled;
        run.expired += pass.expired;
        // A database is done when its pass is, or when the cycle's time is: the next cycle
        // begins with the database after it, as Redis's.
        if !pass.timed_out || run.left.is_zero() {
            st.expire_cycle.next_db = (index + 1) % st.dbs.len();
            run.dbs_left -= 1;
        }
        // pub/sub hook: `expired` keyspace events from active expiry.
        crate::executor::pubsub::drain_expired(st, None);
        st.stats.expired_keys = st.dbs.iter().map(|d| d.counters.expired_keys).sum();
    }
    let out_of_time = run.left.is_zero();
    st.expire_cycle.run = Some(run);
    finish(st, out_of_time);
    false
}

/// Ends the cycle in progress: its time, its stale share in the running average, and whether it
/// ran out of time.
fn finish(st: &mut State, out_of_time: bool) {
    let Some(run) = st.expire_cycle.run.take() else { return };
    st.expire_cycle.timelimit_exit = out_of_time;
    if out_of_time {
        st.stats.expired_time_cap_reached += 1;
    }
    let spent_us = run.spent.as_micros() as u64;
    st.stats.expire_cycle_us += spent_us;
    crate::executor::record_latency(st, "expire-cycle", spent_us);
    let current = if run.sampled > 0 { run.expired as f64 / run.sampled as f64 } else { 0.0 };
    st.stats.expired_stale_perc = current * 0.05 + st.stats.expired_stale_perc * 0.95;
}
