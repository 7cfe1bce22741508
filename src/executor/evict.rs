//! maxmemory: whether memory is over the limit, and eviction by maxmemory-policy (Redis's
//! performEvictions). Keys are chosen from a pool of the best candidates seen so far, fed by
//! sampling maxmemory-samples keys of every database per round (LRU, LFU and TTL policies), or at
//! random; each is deleted and announced (`evicted` keyspace event, WATCH, client tracking)
//! until memory is back under the limit or the tenacity's time slice is spent.

use std::time::{Duration, Instant};

use crate::db::{lfu_decayed, lru_idle_seconds, AccessClock};
use crate::pubsub::ev;

use super::clients::Client;
use super::State;

/// Candidates kept between rounds (Redis's EVPOOL_SIZE).
const POOL_SIZE: usize = 16;

/// What an eviction pass achieved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Memory is under the limit (or no limit is set).
    Ok,
    /// Still over the limit, but the time slice ran out; the cron goes on evicting, and
    /// commands are not refused meanwhile.
    Running,
    /// Over the limit and nothing (more) may be evicted: commands that grow memory are refused.
    Fail,
}

/// The reply to a command refused for memory.
pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Choice {
    Lru,
    Lfu,
    Ttl,
    Random,
}

/// maxmemory-policy read as (how keys are chosen, whether only keys with a TTL qualify); None
/// for noeviction.
fn policy(name: &str) -> Option<(Choice, bool)> {
    Some(match name {
        "allkeys-lru" => (Choice::Lru, false),
        "volatile-lru" => (Choice::Lru, true),
        "allkeys-lfu" => (Choice::Lfu, false),
        "volatile-lfu" => (Choice::Lfu, true),
        "allkeys-random" => (Choice::Random, false),
        "volatile-random" => (Choice::Random, true),
        "volatile-ttl" => (Choice::Ttl, true),
        _ => return None,
    })
}

/// Whether small integer values are Redis's shared objects (OBJECT REFCOUNT, DEBUG OBJECT):
/// not while maxmemory is set with an LRU or LFU policy, where each value keeps its own access
/// clock (Redis's MAXMEMORY_FLAG_NO_SHARED_INTEGERS).
pub fn shares_integers(st: &State) -> bool {
    st.config.maxmemory == 0 || !matches!(policy(&st.config.maxmemory_policy), Some((Choice::Lru | Choice::Lfu, _)))
}

/// The access field every database stamps under the configured policy and LFU parameters.
pub fn access_clock(st: &State) -> AccessClock {
    if !st.config.maxmemory_policy.contains("lfu") {
        return AccessClock::Lru;
    }
    AccessClock::Lfu {
        log_factor: config_u32(st, "lfu-log-factor", 10),
        decay_minutes: config_u32(st, "lfu-decay-time", 1),
    }
}

/// Applies the policy's access field to every database (after CONFIG SET, a load, startup).
pub fn apply_access_clock(st: &mut State) {
    let access = access_clock(st);
    for db in &mut st.dbs {
        db.access = access;
    }
}

fn config_u32(st: &State, name: &str, default: u32) -> u32 {
    st.config.other.get(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// How long one pass may evict (Redis's evictionTimeLimitUs): 50 us per tenacity point up to
/// 10, then 15% more per point, and no limit at 100.
fn time_limit(tenacity: u32) -> Option<Duration> {
    match tenacity {
        0..=10 => Some(Duration::from_micros(50 * tenacity as u64)),
        11..=99 => Some(Duration::from_micros((500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64)),
        _ => None,
    }
}

/// One candidate: its score (higher goes first), database and key.
#[derive(Debug)]
struct Candidate {
    score: u64,
    db: usize,
    key: Box<[u8]>,
}

/// The best candidates seen, ascending by score; kept across passes as in Redis.
#[derive(Debug, Default)]
pub struct Pool {
    entries: Vec<Candidate>,
}

impl Pool {
    /// Offers a sampled key: it joins unless the pool is full of better ones, pushing out the
    /// worst when full.
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        let at = self.entries.partition_point(|c| c.score < score);
        if self.entries.len() == POOL_SIZE {
            if at == 0 {
                return;
            }
            self.entries.remove(0);
            self.entries.insert(at - 1, Candidate { score, db, key: key.into() });
        } else {
            self.entries.insert(at, Candidate { score, db, key: key.into() });
        }
    }
}

/// Bookkeeping between passes.
#[derive(Debug, Default)]
pub struct EvictState {
    pool: Pool,
    /// Where the random policies look first next time (Redis's next_db).
    next_db: usize,
    /// A pass ran out of time with memory still over the limit.
    pub running: bool,
    /// maxmemory when last looked at, to notice CONFIG SET changing it.
    limit_seen: u64,
}

impl EvictState {
    /// The state for a server starting with `limit` as maxmemory.
    pub fn with_limit(limit: u64) -> EvictState {
        crate::types::table::set_maxmemory(limit);
        EvictState { limit_seen: limit, ..Default::default() }
    }
}

/// After CONFIG: a maxmemory newly set below usage is announced and evicted down to from the
/// cron, as Redis's CONFIG SET does.
pub fn limit_changed(st: &mut State) {
    let limit = st.config.maxmemory;
    if limit == st.evict.limit_seen {
        return;
    }
    st.evict.limit_seen = limit;
    crate::types::table::set_maxmemory(limit);
    let used = st.used_memory();
    if limit > 0 && used > limit {
        tracing::warn!(
            "WARNING: the new maxmemory value set via CONFIG SET ({limit}) is smaller than the current memory \
             usage ({used}). This will result in key eviction and/or the inability to accept new write commands \
             depending on the maxmemory-policy."
        );
        st.evict.running = true;
    }
}

/// Evicts until memory is under maxmemory, as Redis does before each command. `caller` is the
/// client whose command is about to run (it may be watching an evicted key).
pub fn perform(st: &mut State, mut caller: Option<&mut Client>, now_ms: i64) -> Outcome {
    let limit = st.config.maxmemory;
    if limit == 0 || st.loading.is_some() {
        return Outcome::Ok;
    }
    let mut used = st.used_memory_for_evict();
    if used <= limit {
        finish(st, Outcome::Ok, now_ms);
        return Outcome::Ok;
    }
    // Clients over maxmemory-clients go before keys: Redis evicts them as their buffers grow,
    // before the next command runs; here a connection's query buffer is only seen when looked
    // at, so look now.
    // What evicted clients hold is freed as their connections close, a moment later.
    if super::clients::client_eviction_limit(st) > 0 {
        let freed = super::clients::evict_clients(st, caller.as_deref());
        used = st.used_memory_for_evict().saturating_sub(freed);
        if used <= limit {
            finish(st, Outcome::Ok, now_ms);
            return Outcome::Ok;
        }
    }
    // Nothing is evicted while writes are paused (Redis 7.0: no keyspace change may happen),
    // nor on a replica under replica-ignore-maxmemory (the default): its keys are the master's,
    // which sends the DELs of its own evictions (Redis's isSafeToPerformEvictions).
    let replica_ignores = st.config.other_flag("replica-ignore-maxmemory", true);
    if st.paused(now_ms) || (st.repl.is_replica() && replica_ignores) {
        return Outcome::Ok;
    }
    let Some((choice, volatile)) = policy(&st.config.maxmemory_policy) else {
        return Outcome::Fail;
    };
    let to_free = used - limit;
    let started = Instant::now();
    let limit_time = time_limit(config_u32(st, "maxmemory-eviction-tenacity", 10));
    let samples = st.config.maxmemory_samples.max(1) as usize;
    let lazy = st.config.lazyfree_lazy_eviction;
    let mut freed: u64 = 0;
    let mut keys_freed = 0u64;
    let mut outcome = Outcome::Ok;
    // The latency monitor times each deletion only when it is on (Redis's eviction-del).
    let monitor = crate::executor::latency_threshold_ms(st) > 0;
    while freed < to_free {
        let Some((db, key)) = pick(st, choice, volatile, samples, now_ms) else {
            outcome = Outcome::Fail;
            break;
        };
        let before = st.used_memory();
        let del_started = monitor.then(Instant::now);
        let Some(value) = st.dbs[db].evict(&key) else {
            // `pick` only returns keys present; a miss would be a bug, not a reason to spin.
            outcome = Outcome::Fail;
            break;
        };
        let effort = value.free_effort();
        if lazy && effort > crate::db::lazyfree::LAZYFREE_THRESHOLD {
            // Freed on another thread, out of sight of this thread's counters: count what the
            // value holds, as MEMORY USAGE estimates it.
            freed += crate::types::value_memory(&value) as u64;
            crate::db::lazyfree::free(value);
        } else {
            drop(value);
        }
        if let Some(t) = del_started {
            crate::executor::record_latency(st, "eviction-del", t.elapsed().as_micros() as u64);
        }
        freed += before.saturating_sub(st.used_memory());
        st.stats.evicted_keys += 1;
        announce(st, caller.as_deref_mut(), db, &key);
        keys_freed += 1;
        if keys_freed.is_multiple_of(16) {
            if st.used_memory_for_evict() <= limit {
                break;
            }
            if limit_time.is_some_and(|t| started.elapsed() > t) {
                outcome = Outcome::Running;
                break;
            }
        }
    }
    crate::executor::record_latency(st, "eviction-cycle", started.elapsed().as_micros() as u64);
    finish(st, outcome, now_ms);
    outcome
}

/// Records the pass's end: whether a continuation is due, and the time spent over the limit.
fn finish(st: &mut State, outcome: Outcome, now_ms: i64) {
    st.evict.running = outcome == Outcome::Running;
    let stats = &mut st.stats;
    match (outcome, stats.eviction_exceeded_since) {
        (Outcome::Ok, Some(since)) => {
            stats.eviction_exceeded_ms += (now_ms - since).max(0) as u64;
            stats.eviction_exceeded_since = None;
        }
        (Outcome::Running | Outcome::Fail, None) => stats.eviction_exceeded_since = Some(now_ms),
        _ => {}
    }
}

/// The next key to evict, or None when no key qualifies.
fn pick(st: &mut State, choice: Choice, volatile: bool, samples: usize, now_ms: i64) -> Option<(usize, Vec<u8>)> {
    let ndbs = st.dbs.len();
    if choice == Choice::Random {
        for _ in 0..ndbs {
            st.evict.next_db = (st.evict.next_db + 1) % ndbs;
            let db = st.evict.next_db;
            if let Some(key) = st.dbs[db].random_for_eviction(volatile) {
                return Some((db, key));
            }
        }
        return None;
    }
    let decay = config_u32(st, "lfu-decay-time", 1);
    loop {
        let mut total = 0;
        for (i, db) in st.dbs.iter().enumerate() {
            let size = if volatile { db.expires_len() } else { db.len() };
            if size == 0 {
                continue;
            }
            total += size;
            let pool = &mut st.evict.pool;
            db.sample_for_eviction(samples, volatile, |key, clock, expire| {
                let score = match choice {
                    Choice::Lru => lru_idle_seconds(clock, now_ms),
                    Choice::Lfu => 255 - lfu_decayed(clock, now_ms, decay) as u64,
                    // Sooner expiry goes first.
                    _ => u64::MAX - expire.unwrap_or(i64::MAX).max(0) as u64,
                };
                pool.offer(score, i, key);
            });
        }
        if total == 0 {
            return None;
        }
        // Best first; candidates deleted since they were sampled are ghosts, dropped.
        while let Some(c) = st.evict.pool.entries.pop() {
            if c.db < ndbs && st.dbs[c.db].holds_for_eviction(&c.key, volatile) {
                return Some((c.db, c.key.into_vec()));
            }
        }
    }
}

/// What deleting a key by eviction tells the rest of the server (Redis's signalModifiedKey and
/// the `evicted` event).
fn announce(st: &mut State, mut caller: Option<&mut Client>, db: usize, key: &[u8]) {
    if let Some(ids) = st.watched.get(&(db, key.to_vec())) {
        for &id in ids {
            match caller.as_deref_mut() {
                Some(c) => crate::executor::clients::flag_dirty_cas(&mut st.clients, c, id),
                None => {
                    if let Some(c) = st.clients.get_mut(&id) {
                        c.dirty_cas = true;
                    }
                }
            }
        }
    }
    if st.tracking.is_active() {
        // The running client's own invalidations are held, and sent before its reply.
        crate::executor::tracking::invalidate_key(st, caller.as_ref().map(|c| c.id), key);
    }
    crate::executor::pubsub::notify(st, caller.as_deref(), ev::EVICTED, "evicted", key, db);
    let lazy = st.config.lazyfree_lazy_eviction;
    super::propagate::deletion(st, db, key, lazy);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keeps_the_best_sixteen_in_order() {
        let mut pool = Pool::default();
        for score in [5u64, 1, 9, 3, 7, 20, 0, 11, 13, 2, 4, 6, 8, 10, 12, 14, 15, 16, 17] {
            pool.offer(score, 0, format!("k{score}").as_bytes());
        }
        let scores: Vec<u64> = pool.entries.iter().map(|c| c.score).collect();
        let mut want: Vec<u64> = (3..=17).collect();
        want.push(20);
        assert_eq!(scores, want);
        // A worse candidate than all sixteen is not taken.
        pool.offer(0, 0, b"worst");
        assert!(pool.entries.iter().all(|c| &*c.key != b"worst"));
    }

    #[test]
    fn time_limits_follow_tenacity() {
        assert_eq!(time_limit(0), Some(Duration::ZERO));
        assert_eq!(time_limit(10), Some(Duration::from_micros(500)));
        assert_eq!(time_limit(11), Some(Duration::from_micros(575)));
        assert_eq!(time_limit(100), None);
    }
}
