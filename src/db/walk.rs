//! A KEYS walk that runs a bounded step at a time, interleaved with other clients' commands, and
//! still replies with exactly the keys that were there (and not expired) when KEYS ran.
//!
//! The walk goes through positions 0 ..= M in order, M the table's bucket mask when it began and
//! a key's position its hash's bits under M (`Table::visit_position`), so every key has a fixed
//! position and the walk only moves forward, whether the table grows or shrinks in between. (SCAN's
//! reverse-binary cursor gives the same guarantees, but jumps across the bucket array: a walk of
//! 1M keys took three times as long as reading them in bucket order.) While the walk is in progress the database tells it about every key added or removed
//! (`Db::key_insert` / `Db::key_remove`, one branch on an empty `Vec` otherwise), and the walk
//! keeps the command's point in time from what lies ahead of its cursor:
//! - a key added ahead is "born": it did not exist when KEYS ran, and is skipped when met;
//! - a key removed ahead that was not born existed then: it is emitted at once if it matches and
//!   was not expired at the command's time (a later re-add of it is born again);
//! - a key overwritten ahead while it was already expired at the command's time (SET on a stale
//!   key, which replaces it in place) is born as well;
//! - a key met is judged by its TTL against the command's time (a TTL set meanwhile is in the
//!   future of that time, so a key alive then still reads alive).
//!
//! Keys behind the cursor were dealt with when it passed them. When the database is emptied or
//! replaced, its walks keep the old tables (`Db::take_walked`, `Walked`): nothing writes there any
//! more, so the same rules go on giving the keys of the command's time. The reply's elements are kept in
//! chunks, so the walk never copies what it gathered to grow a buffer.

use crate::glob::glob_match;
use crate::types::table::Table;

/// Bytes per chunk of the gathered reply.
const CHUNK: usize = 64 * 1024;

/// Positions visited between two looks at the clock.
const POSITIONS_PER_CHECK: u64 = 64;

/// One KEYS walk over a database's table.
pub struct KeyWalk {
    pub id: u64,
    pattern: Box<[u8]>,
    all: bool,
    /// The command's time: keys whose TTL had passed by then are not listed.
    at_ms: i64,
    /// The frame of positions: the table's bucket mask when the walk began.
    mask: u64,
    /// The first position not yet visited.
    next: u64,
    done: bool,
    /// Keys added ahead of the cursor since the walk began (see the module header).
    born: std::collections::HashSet<Box<[u8]>, foldhash::fast::RandomState>,
    /// The reply's bulk strings so far.
    chunks: Vec<Vec<u8>>,
    count: u64,
}

impl KeyWalk {
    pub fn new(id: u64, pattern: &[u8], at_ms: i64, mask: u64) -> KeyWalk {
        KeyWalk {
            id,
            pattern: pattern.into(),
            all: pattern == b"*",
            at_ms,
            mask,
            next: 0,
            done: false,
            born: Default::default(),
            chunks: Vec::new(),
            count: 0,
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether a key of hash `hash` is still ahead of the walk.
    fn ahead(&self, hash: u64) -> bool {
        !self.done && hash & self.mask >= self.next
    }

    /// Adds `key` to the reply if it matches the pattern.
    fn emit(&mut self, key: &[u8]) {
        if !self.all && !glob_match(&self.pattern, key, false) {
            return;
        }
        let need = key.len() + 16;
        match self.chunks.last_mut() {
            Some(c) if c.capacity() - c.len() >= need => {}
            _ => self.chunks.push(Vec::with_capacity(CHUNK.max(need))),
        }
        if let Some(c) = self.chunks.last_mut() {
            crate::resp::writer::bulk(c, key);
        }
        self.count += 1;
    }

    /// The number of keys listed and the reply's bulk strings (the array header is the caller's).
    pub fn into_reply(self) -> (u64, Vec<Vec<u8>>) {
        (self.count, self.chunks)
    }

    /// Bytes the walk holds (its gathered reply and its born set), about.
    pub fn memory(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>() + self.born.iter().map(|k| k.len() + 16).sum::<usize>()
    }
}

/// Moves `w` on over `keys` / `expires` until it is over or `deadline` passes (None: to the
/// end); returns whether it is over.
fn step(
    keys: &Table<crate::types::Value>,
    expires: &Table<i64>,
    w: &mut KeyWalk,
    deadline: Option<std::time::Instant>,
) -> bool {
    let has_expires = !expires.is_empty();
    while !w.done {
        let (at, from, mask) = (w.at_ms, w.next, w.mask);
        let to = mask.saturating_add(1).min(from + POSITIONS_PER_CHECK);
        keys.visit_positions(from, to, mask, |k, _| {
            if !w.born.is_empty() && w.born.contains(k) {
                return;
            }
            if has_expires && matches!(expires.get(k), Some(&e) if e <= at) {
                return;
            }
            w.emit(k);
        });
        w.next = to;
        if to > mask {
            w.done = true;
            w.born = Default::default();
            break;
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            break;
        }
    }
    w.done
}

/// The tables of an emptied database (FLUSHDB, FLUSHALL) with the walks that were in progress
/// over them. Nothing writes to them any more, so each walk goes on through them as it would
/// have through the live table: what they hold is exactly the keys there were when the table
/// was emptied, and each walk's records (born keys, removed keys already listed) account for
/// what changed between its command and then. They are freed once the last walk is over.
pub struct Walked {
    keys: Table<crate::types::Value>,
    expires: Table<i64>,
    walks: Vec<KeyWalk>,
    /// SORT walks whose lookups go on here (records first, see `sort_watch`).
    sorts: Vec<super::sort_watch::SortWatch>,
}

impl Walked {
    /// Whether walk `id` runs over these tables.
    pub fn has_walk(&self, id: u64) -> bool {
        self.walks.iter().any(|w| w.id == id)
    }

    /// As `Db::walk_step`.
    pub fn walk_step(&mut self, id: u64, deadline: Option<std::time::Instant>) -> Option<bool> {
        let w = self.walks.iter_mut().find(|w| w.id == id)?;
        Some(step(&self.keys, &self.expires, w, deadline))
    }

    /// Takes walk `id` out (finished or not).
    pub fn take_walk(&mut self, id: u64) -> Option<KeyWalk> {
        let at = self.walks.iter().position(|w| w.id == id)?;
        Some(self.walks.swap_remove(at))
    }

    /// Whether no walk is left: the tables can go.
    pub fn is_idle(&self) -> bool {
        self.walks.is_empty() && self.sorts.is_empty()
    }

    /// Whether SORT walk `id` looks up here.
    pub fn has_sort(&self, id: u64) -> bool {
        self.sorts.iter().any(|w| w.id == id)
    }

    /// As `Db::sort_lookup`, over the tables as they were emptied: no key read here is one
    /// there is now, so nothing is stamped.
    pub fn sort_lookup<R>(
        &mut self,
        id: u64,
        part: usize,
        elem: &[u8],
        key: &[u8],
        f: impl FnOnce(bool, Option<super::sort_watch::Found<'_>>) -> R,
    ) -> Option<R> {
        super::sort_watch::sort_lookup(&self.sorts, &mut self.keys, &self.expires, None, id, part, elem, key, f)
    }

    /// SORT walk `id`'s registration here, to read.
    pub fn sort_watch_ref(&self, id: u64) -> Option<&super::sort_watch::SortWatch> {
        self.sorts.iter().find(|w| w.id == id)
    }

    /// SORT walk `id`'s registration here.
    pub fn sort_watch(&mut self, id: u64) -> Option<&mut super::sort_watch::SortWatch> {
        self.sorts.iter_mut().find(|w| w.id == id)
    }

    /// Takes SORT walk `id` out.
    pub fn take_sort(&mut self, id: u64) -> Option<super::sort_watch::SortWatch> {
        let at = self.sorts.iter().position(|w| w.id == id)?;
        Some(self.sorts.swap_remove(at))
    }
}

impl super::Db {
    /// Starts a KEYS walk of this database's keys at time `at_ms`.
    pub fn start_walk(&mut self, id: u64, pattern: &[u8], at_ms: i64) {
        let mask = self.keys.walk_mask();
        self.walks.push(KeyWalk::new(id, pattern, at_ms, mask));
    }

    /// Whether walk `id` runs over this database's table.
    pub fn has_walk(&self, id: u64) -> bool {
        self.walks.iter().any(|w| w.id == id)
    }

    /// Whether any walk is in progress here.
    pub fn walking(&self) -> bool {
        self.walks.iter().any(|w| !w.done)
    }

    /// Moves walk `id` on until it is over or `deadline` passes (None: to the end). Returns
    /// whether it is over, None when there is no such walk here.
    pub fn walk_step(&mut self, id: u64, deadline: Option<std::time::Instant>) -> Option<bool> {
        let super::Db { keys, expires, walks, .. } = self;
        let w = walks.iter_mut().find(|w| w.id == id)?;
        Some(step(keys, expires, w, deadline))
    }

    /// Empties the database as `clear` does, except that its walks in progress (KEYS and
    /// SORT) keep the old tables and go on through them (`Walked`); None, and nothing emptied, when no walk runs
    /// here.
    pub fn take_walked(&mut self) -> Option<Walked> {
        if self.walks.is_empty() && self.sort_watches.is_empty() {
            return None;
        }
        let walks = std::mem::take(&mut self.walks);
        let sorts = std::mem::take(&mut self.sort_watches);
        let (keys, expires) = self.clear();
        Some(Walked { keys, expires, walks, sorts })
    }

    /// Takes walk `id` out (finished or not).
    pub fn take_walk(&mut self, id: u64) -> Option<KeyWalk> {
        let at = self.walks.iter().position(|w| w.id == id)?;
        Some(self.walks.swap_remove(at))
    }

    /// Runs every walk here to its end (the table is about to be emptied or replaced). The
    /// finished walks stay until their owner takes them.
    pub fn finish_walks(&mut self) {
        let ids: Vec<u64> = self.walks.iter().filter(|w| !w.done).map(|w| w.id).collect();
        for id in ids {
            self.walk_step(id, None);
        }
    }

    /// `key` was just added: it is born for the walks it is ahead of.
    pub(super) fn walks_added(&mut self, key: &[u8]) {
        let hash = self.keys.key_hash(key);
        for w in &mut self.walks {
            if w.ahead(hash) {
                w.born.insert(key.into());
            }
        }
    }

    /// `key` was just overwritten in place, and its TTL before that was `old_expire`: for the
    /// walks whose time it had passed, it is born now.
    pub(super) fn walks_revived(&mut self, key: &[u8], old_expire: i64) {
        let hash = self.keys.key_hash(key);
        for w in &mut self.walks {
            if old_expire <= w.at_ms && w.ahead(hash) {
                w.born.insert(key.into());
            }
        }
    }

    /// `key` was just removed from the table; its TTL is still in the expire table.
    pub(super) fn walks_removed(&mut self, key: &[u8]) {
        let hash = self.keys.key_hash(key);
        let expire = self.expires.get(key).copied();
        for w in &mut self.walks {
            if !w.ahead(hash) || (!w.born.is_empty() && w.born.remove(key)) {
                continue;
            }
            if expire.is_none_or(|e| e > w.at_ms) {
                w.emit(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Db;
    use crate::types::{RStr, Value};
    use std::collections::BTreeSet;

    fn val() -> Value {
        Value::Str(RStr::from_bytes(b"v"))
    }

    /// The keys a walk's reply lists.
    fn listed(w: super::KeyWalk) -> BTreeSet<Vec<u8>> {
        let (count, chunks) = w.into_reply();
        let bytes: Vec<u8> = chunks.concat();
        let mut out = BTreeSet::new();
        let mut i = 0;
        while i < bytes.len() {
            let end = i + bytes[i..].iter().position(|&b| b == b'\r').unwrap();
            let len: usize = std::str::from_utf8(&bytes[i + 1..end]).unwrap().parse().unwrap();
            let key = bytes[end + 2..end + 2 + len].to_vec();
            assert!(out.insert(key), "a key listed twice");
            i = end + 2 + len + 2;
        }
        assert_eq!(out.len() as u64, count);
        out
    }

    /// The live keys matching `pattern` at `now`, as a synchronous KEYS sees them.
    fn expected(db: &Db, pattern: &[u8], now: i64) -> BTreeSet<Vec<u8>> {
        db.keys(now).map(|(k, _)| k.to_vec()).filter(|k| crate::glob::glob_match(pattern, k, false)).collect()
    }

    /// Random writes (adds, overwrites, deletes, TTLs past and future, expiry, eviction) between
    /// steps of a small budget, with the table growing and shrinking under the walk: the reply
    /// is what the database held when the walk began, whatever happened after.
    #[test]
    fn a_walk_lists_the_keys_of_its_start_time_under_random_writes() {
        for seed in 0..40u64 {
            let mut rng = fastrand::Rng::with_seed(seed);
            let mut db = Db::new();
            let now = 1_000_000;
            let n = 200 + rng.usize(..3000);
            for i in 0..n {
                let k = format!("k{i}");
                db.set(k.as_bytes(), val(), now);
                match rng.u8(..10) {
                    0 => {
                        db.set_expire(k.as_bytes(), now - 1);
                    }
                    1 => {
                        db.set_expire(k.as_bytes(), now + 5);
                    }
                    _ => {}
                }
            }
            let pattern: &[u8] = if seed % 2 == 0 { b"*" } else { b"k*1*" };
            let want = expected(&db, pattern, now);
            db.start_walk(7, pattern, now);
            let mut later = now;
            let mut steps = 0;
            while db.walk_step(7, Some(std::time::Instant::now())) == Some(false) {
                steps += 1;
                later += rng.i64(0..3);
                for _ in 0..rng.usize(..40) {
                    let k =
                        if rng.bool() { format!("k{}", rng.usize(..n * 2)) } else { format!("n{}", rng.usize(..500)) };
                    let k = k.as_bytes();
                    match rng.u8(..9) {
                        0 | 1 => {
                            db.set(k, val(), later);
                        }
                        2 | 3 => {
                            db.remove(k, later);
                        }
                        4 => {
                            db.set_keep_ttl(k, val(), later);
                        }
                        5 => {
                            // EXPIRE in the future of a live key.
                            if db.contains(k, later) {
                                db.set_expire(k, later + 1000);
                            }
                        }
                        6 => {
                            db.evict(k);
                        }
                        7 => {
                            db.peek(k, later);
                        }
                        _ => {
                            db.persist(k, later);
                        }
                    }
                }
                if rng.u8(..25) == 0 {
                    // Growth past a doubling or two (born keys, all of them).
                    for i in 0..n * 2 {
                        db.set(format!("g{i}:{steps}").as_bytes(), val(), later);
                    }
                }
                if rng.u8(..20) == 0 {
                    // Deletions past the shrink threshold, then the cron's rehash.
                    for i in 0..n {
                        if rng.u8(..4) != 0 {
                            db.remove(format!("k{i}").as_bytes(), later);
                        }
                    }
                    db.rehash_until(std::time::Instant::now() + std::time::Duration::from_millis(5));
                }
                db.active_expire_pass(later, std::time::Instant::now(), crate::db::ExpireEffort::new(1));
            }
            assert!(steps > 0 || n < 64);
            let w = db.take_walk(7).unwrap();
            assert_eq!(listed(w), want, "seed {seed}");
            assert!(db.walks.is_empty());
        }
    }

    /// A walk whose database is emptied with `take_walked` goes on over the old tables: it lists
    /// the keys of its start time, with what changed before the flush accounted for, and nothing
    /// written after it.
    #[test]
    fn a_walk_set_aside_goes_on_over_the_old_tables() {
        let mut db = Db::new();
        for i in 0..5000 {
            db.set(format!("k{i}").as_bytes(), val(), 0);
        }
        let want = expected(&db, b"*", 0);
        db.start_walk(1, b"*", 0);
        assert_eq!(db.walk_step(1, Some(std::time::Instant::now())), Some(false));
        for i in 0..5000 {
            if i % 3 == 0 {
                db.remove(format!("k{i}").as_bytes(), 0);
            }
        }
        db.set(b"born", val(), 0);
        let mut walked = db.take_walked().unwrap();
        assert_eq!(db.len(), 0);
        assert!(db.take_walked().is_none());
        db.set(b"after", val(), 0);
        assert_eq!(walked.walk_step(1, None), Some(true));
        let w = walked.take_walk(1).unwrap();
        assert!(walked.is_idle());
        assert_eq!(listed(w), want);
    }

    /// A database emptied under a walk finishes the walk first.
    #[test]
    fn clear_finishes_the_walk() {
        let mut db = Db::new();
        for i in 0..5000 {
            db.set(format!("k{i}").as_bytes(), val(), 0);
        }
        db.start_walk(1, b"*", 0);
        assert_eq!(db.walk_step(1, Some(std::time::Instant::now())), Some(false));
        drop(db.clear());
        db.set(b"new", val(), 0);
        let w = db.take_walk(1).unwrap();
        assert!(w.is_done());
        assert_eq!(listed(w).len(), 5000);
    }
}
