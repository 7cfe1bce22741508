//! What a SORT walk (`executor::sort_walk`) needs from the database to keep its BY and GET
//! lookups at the command's point in time while other clients write between its steps.
//!
//! The walk reads weight and GET keys a step at a time, long after its command ran. Rather than
//! copying every key it will read up front (a 1M-element SORT BY reads 1M keys), the database
//! tells it of a change before the change happens: every path that changes a key's value or its
//! TTL, adds or removes a key (`Db::sort_hook`, one branch on an empty `Vec` otherwise) first
//! records, for each registered walk whose pattern names that key, what the pattern's lookup
//! gave then, keyed by the element the key stands for. Only the first change counts: what the
//! key held before it is what it held when the command ran, as no change went unrecorded
//! between the two. A key never recorded is unchanged since, so a live lookup gives the
//! command's answer, provided its TTL is judged at the command's time, not now.
//!
//! A lookup served by the live table is a read of the key now, as Redis's lookupKeyRead is: it
//! stamps the key's access field (LRU clock, or LFU counter under an LFU policy) at the time
//! the walk reads it, unless the command's client had CLIENT NO-TOUCH on; while a fork child
//! shares the pages the table leaves the field alone (`Table::get_touch_with`), as Redis does.
//! A lookup served by a record, or through tables emptied under the walk, reads no key there is
//! now, so stamps nothing.
//!
//! When the database is emptied or replaced under a walk, the walk keeps the old tables
//! (`walk::Walked`, as KEYS walks do): nothing writes there any more, so looking there (records
//! first) still answers at the command's time. Only `Db::clear` outside those paths (CLUSTER
//! RESET of a replica) records every key a pattern names first, which takes as long as the
//! keyspace is big.

use std::collections::HashMap;

use super::AccessClock;
use crate::types::table::Table;
use crate::types::{RStr, Value};

/// A pattern's key part: the key for element `e` is `prefix e postfix`, read as a string, or
/// with `field` as that field of a hash.
#[derive(Clone)]
pub struct KeyPart {
    pub prefix: Box<[u8]>,
    pub postfix: Box<[u8]>,
    pub field: Option<Box<[u8]>>,
}

impl KeyPart {
    /// The element `key` stands for under this part, if the part names it.
    fn element<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        let (p, s) = (self.prefix.len(), self.postfix.len());
        if key.len() >= p + s && key.starts_with(&self.prefix) && key.ends_with(&self.postfix) {
            Some(&key[p..key.len() - s])
        } else {
            None
        }
    }
}

/// What a lookup found: whether the key existed (for keyspace hits and misses, counted as
/// Redis's lookupKeyRead counts them) and the bytes it gave.
pub enum Found<'a> {
    Str(&'a RStr),
    Bytes(&'a [u8]),
}

impl Found<'_> {
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Found::Str(s) => s.with_bytes(f),
            Found::Bytes(b) => f(b),
        }
    }
}

/// A recorded lookup: whether the key existed then, and what the pattern gave.
struct Record {
    existed: bool,
    value: Option<Box<[u8]>>,
}

type Records = HashMap<Box<[u8]>, Record, foldhash::fast::RandomState>;

/// One SORT walk registered on a database.
pub struct SortWatch {
    pub id: u64,
    /// The command's time: TTLs are judged against it.
    at_ms: i64,
    parts: Vec<KeyPart>,
    /// Per part: which parts still need recording (a BY part no GET uses stops after the BY
    /// lookups).
    live: Vec<bool>,
    records: Vec<Records>,
    /// Whether live lookups stamp the keys they read (off under CLIENT NO-TOUCH).
    touch: bool,
}

/// How a lookup in a live table stamps the key it reads: as a read at `now_ms` under the
/// database's access clock.
#[derive(Clone, Copy)]
pub(super) struct Stamp {
    pub access: AccessClock,
    pub now_ms: i64,
}

/// Whether `key`'s TTL had passed by `at_ms`.
fn expired_at(expires: &Table<i64>, key: &[u8], at_ms: i64) -> bool {
    !expires.is_empty() && matches!(expires.get(key), Some(&at) if at <= at_ms)
}

/// The lookup of `key` (with `field`) in `keys` / `expires` judged at `at_ms`: whether the key
/// existed, and what it gave.
fn lookup_in<'t>(
    keys: &'t Table<Value>,
    expires: &Table<i64>,
    key: &[u8],
    field: Option<&[u8]>,
    at_ms: i64,
) -> (bool, Option<Found<'t>>) {
    if expired_at(expires, key, at_ms) {
        return (false, None);
    }
    judge(keys.get(key), field, at_ms)
}

/// `lookup_in` that also stamps the key read, when it existed at `at_ms`, as `stamp` says.
fn lookup_stamping<'t>(
    keys: &'t mut Table<Value>,
    expires: &Table<i64>,
    key: &[u8],
    field: Option<&[u8]>,
    at_ms: i64,
    stamp: Stamp,
) -> (bool, Option<Found<'t>>) {
    if expired_at(expires, key, at_ms) {
        return (false, None);
    }
    let value = super::get_stamped(keys, stamp.access, key, stamp.now_ms);
    judge(value.map(|v| &*v), field, at_ms)
}

/// What a pattern reading `value` (the key's, alive at `at_ms`) with `field` gives.
fn judge<'t>(value: Option<&'t Value>, field: Option<&[u8]>, at_ms: i64) -> (bool, Option<Found<'t>>) {
    match (value, field) {
        (None, _) => (false, None),
        (Some(Value::Str(s)), None) => (true, Some(Found::Str(s))),
        // A field whose TTL had passed by then was gone for a lookup then.
        (Some(Value::Hash(h)), Some(f)) if h.has_field_expires() && h.field_expire(f).is_some_and(|t| t <= at_ms) => {
            (true, None)
        }
        (Some(Value::Hash(h)), Some(f)) => (true, h.get(f).map(Found::Bytes)),
        (Some(_), _) => (true, None),
    }
}

impl SortWatch {
    /// Walk `id` of a command run at `at_ms`, whose lookups stamp the keys they read when
    /// `touch`.
    pub fn new(id: u64, at_ms: i64, parts: Vec<KeyPart>, touch: bool) -> SortWatch {
        let n = parts.len();
        let records = (0..n).map(|_| Records::default()).collect();
        SortWatch { id, at_ms, parts, live: vec![true; n], records, touch }
    }

    /// Part `part` of the patterns.
    pub fn part(&self, part: usize) -> Option<&KeyPart> {
        self.parts.get(part)
    }

    /// Part `part` is done with: it records nothing more, and its records go.
    pub fn retire(&mut self, part: usize) {
        self.live[part] = false;
        self.records[part] = Records::default();
    }

    /// `key` is about to change in `keys` / `expires`: records, for every part that names it
    /// and has no record of it yet, what its lookup gives now.
    fn record(&mut self, keys: &Table<Value>, expires: &Table<i64>, key: &[u8]) {
        for (i, part) in self.parts.iter().enumerate() {
            if !self.live[i] {
                continue;
            }
            let Some(elem) = part.element(key) else { continue };
            if self.records[i].contains_key(elem) {
                continue;
            }
            let (existed, found) = lookup_in(keys, expires, key, part.field.as_deref(), self.at_ms);
            let value = found.map(|f| f.with_bytes(|b| Box::<[u8]>::from(b)));
            self.records[i].insert(elem.into(), Record { existed, value });
        }
    }

    /// Looks part `part` up for element `elem`, whose key is `key`, in `keys` / `expires` as
    /// of the command's time, stamping the key read as `stamp` says (None: tables nobody reads
    /// any more): `f` gets whether the key existed and what it gave.
    #[allow(clippy::too_many_arguments)]
    fn lookup<R>(
        &self,
        keys: &mut Table<Value>,
        expires: &Table<i64>,
        stamp: Option<Stamp>,
        part: usize,
        elem: &[u8],
        key: &[u8],
        f: impl FnOnce(bool, Option<Found<'_>>) -> R,
    ) -> R {
        if let Some(r) = self.records[part].get(elem) {
            return f(r.existed, r.value.as_deref().map(Found::Bytes));
        }
        let field = self.parts[part].field.as_deref();
        let (existed, found) = match stamp {
            Some(stamp) if self.touch => lookup_stamping(keys, expires, key, field, self.at_ms, stamp),
            _ => lookup_in(keys, expires, key, field, self.at_ms),
        };
        f(existed, found)
    }

    /// Bytes the records hold, about.
    pub fn memory(&self) -> usize {
        self.records
            .iter()
            .flat_map(|r| r.iter())
            .map(|(k, v)| k.len() + v.value.as_ref().map_or(0, |b| b.len()) + 64)
            .sum()
    }
}

/// Looks part `part` of walk `id` up among `watches`, registered on `keys` / `expires` (see
/// `SortWatch::lookup`): the one lookup behind `Db::sort_lookup` and `Walked::sort_lookup`.
#[allow(clippy::too_many_arguments)]
pub(super) fn sort_lookup<R>(
    watches: &[SortWatch],
    keys: &mut Table<Value>,
    expires: &Table<i64>,
    stamp: Option<Stamp>,
    id: u64,
    part: usize,
    elem: &[u8],
    key: &[u8],
    f: impl FnOnce(bool, Option<Found<'_>>) -> R,
) -> Option<R> {
    let w = watches.iter().find(|w| w.id == id)?;
    Some(w.lookup(keys, expires, stamp, part, elem, key, f))
}

impl super::Db {
    /// Registers SORT walk `watch` here: from now on every change of a key its patterns name is
    /// recorded first.
    pub fn watch_sort(&mut self, watch: SortWatch) {
        self.sort_watches.push(watch);
    }

    /// Whether SORT walk `id` is registered here.
    pub fn has_sort(&self, id: u64) -> bool {
        self.sort_watches.iter().any(|w| w.id == id)
    }

    /// The SORT walk `id` registered here, to read.
    pub fn sort_watch_ref(&self, id: u64) -> Option<&SortWatch> {
        self.sort_watches.iter().find(|w| w.id == id)
    }

    /// The SORT walk `id` registered here.
    pub fn sort_watch(&mut self, id: u64) -> Option<&mut SortWatch> {
        self.sort_watches.iter_mut().find(|w| w.id == id)
    }

    /// Deregisters SORT walk `id`, dropping its records.
    pub fn unwatch_sort(&mut self, id: u64) -> Option<SortWatch> {
        let at = self.sort_watches.iter().position(|w| w.id == id)?;
        Some(self.sort_watches.swap_remove(at))
    }

    /// Looks part `part` of SORT walk `id` up here for element `elem`, whose key is `key`, as
    /// of the command's time, a read at `now_ms` of the key it finds (see the module header):
    /// `f` gets whether the key existed and what it gave. None when the walk is not registered
    /// here.
    pub fn sort_lookup<R>(
        &mut self,
        id: u64,
        part: usize,
        elem: &[u8],
        key: &[u8],
        now_ms: i64,
        f: impl FnOnce(bool, Option<Found<'_>>) -> R,
    ) -> Option<R> {
        let stamp = Stamp { access: self.access, now_ms };
        sort_lookup(&self.sort_watches, &mut self.keys, &self.expires, Some(stamp), id, part, elem, key, f)
    }

    /// `key` is about to change: the SORT walks registered here record what their patterns
    /// read there first. Every write path calls it before it changes anything.
    #[inline]
    pub(super) fn sort_hook(&mut self, key: &[u8]) {
        if !self.sort_watches.is_empty() {
            self.sort_record(key);
        }
    }

    #[cold]
    fn sort_record(&mut self, key: &[u8]) {
        let super::Db { keys, expires, sort_watches, .. } = self;
        for w in sort_watches.iter_mut() {
            w.record(keys, expires, key);
        }
    }

    /// Every key is about to go with no later lookup possible here (`clear`): records them all.
    pub(super) fn sort_record_all(&mut self) {
        if self.sort_watches.is_empty() {
            return;
        }
        let super::Db { keys, expires, sort_watches, .. } = self;
        for (k, _) in keys.iter() {
            for w in sort_watches.iter_mut() {
                w.record(keys, expires, k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;

    fn s(b: &str) -> Value {
        Value::Str(RStr::from_bytes(b.as_bytes()))
    }

    fn look(db: &mut Db, elem: &str) -> Option<Vec<u8>> {
        let key = format!("w_{elem}");
        let f = |_, f: Option<Found<'_>>| f.map(|f| f.with_bytes(|b| b.to_vec()));
        db.sort_lookup(1, 0, elem.as_bytes(), key.as_bytes(), 0, f).unwrap()
    }

    /// Writes of every kind after the registration leave the lookups as they were then.
    #[test]
    fn lookups_stay_at_the_registration_time() {
        let mut db = Db::new();
        let now = 1_000;
        for i in 0..10 {
            db.set(format!("w_{i}").as_bytes(), s(&format!("v{i}")), now);
        }
        db.set_expire(b"w_8", now + 10);
        db.set_expire(b"w_9", now - 1);
        let part = KeyPart { prefix: b"w_"[..].into(), postfix: b""[..].into(), field: None };
        db.watch_sort(SortWatch::new(1, now, vec![part], true));
        let later = now + 100;
        db.set(b"w_0", s("new"), later);
        db.remove(b"w_1", later);
        db.set(b"w_new", s("x"), later);
        if let Some(Value::Str(v)) = db.get_mut(b"w_2", later) {
            *v = RStr::from_bytes(b"changed");
        }
        db.set_keep_ttl(b"w_3", s("kept"), later);
        db.evict(b"w_4");
        db.set_expire(b"w_5", now - 5);
        db.persist(b"w_9", later);
        db.set(b"w_9", s("revived"), later);
        db.remove(b"w_8", later);
        assert_eq!(look(&mut db, "0").as_deref(), Some(&b"v0"[..]));
        assert_eq!(look(&mut db, "1").as_deref(), Some(&b"v1"[..]));
        assert_eq!(look(&mut db, "new"), None);
        assert_eq!(look(&mut db, "2").as_deref(), Some(&b"v2"[..]));
        assert_eq!(look(&mut db, "3").as_deref(), Some(&b"v3"[..]));
        assert_eq!(look(&mut db, "4").as_deref(), Some(&b"v4"[..]));
        assert_eq!(look(&mut db, "5").as_deref(), Some(&b"v5"[..]));
        assert_eq!(look(&mut db, "6").as_deref(), Some(&b"v6"[..]));
        assert_eq!(look(&mut db, "8").as_deref(), Some(&b"v8"[..]), "alive at the command's time");
        assert_eq!(look(&mut db, "9"), None, "expired at the command's time");
        assert!(db.unwatch_sort(1).is_some());
    }

    /// Emptied under a walk, by a flush (the walk keeps the old tables) or by `clear` (every
    /// key recorded first), the lookups still give what was there.
    #[test]
    fn lookups_survive_the_table_being_emptied() {
        for flush in [true, false] {
            let mut db = Db::new();
            for i in 0..100 {
                db.set(format!("w_{i}").as_bytes(), s(&format!("v{i}")), 0);
            }
            let part = KeyPart { prefix: b"w_"[..].into(), postfix: b""[..].into(), field: None };
            db.watch_sort(SortWatch::new(1, 0, vec![part], true));
            db.set(b"w_5", s("changed"), 0);
            let mut walked = if flush {
                db.take_walked()
            } else {
                drop(db.clear());
                None
            };
            db.set(b"w_7", s("after"), 0);
            db.set(b"w_100", s("new"), 0);
            let mut look = |elem: &str| -> Option<Vec<u8>> {
                let key = format!("w_{elem}");
                let f = |_, f: Option<Found<'_>>| f.map(|f| f.with_bytes(|b| b.to_vec()));
                match &mut walked {
                    Some(w) => w.sort_lookup(1, 0, elem.as_bytes(), key.as_bytes(), f),
                    None => db.sort_lookup(1, 0, elem.as_bytes(), key.as_bytes(), 0, f),
                }
                .unwrap()
            };
            for i in 0..100 {
                assert_eq!(look(&i.to_string()), Some(format!("v{i}").into_bytes()), "flush {flush}");
            }
            assert_eq!(look("100"), None, "flush {flush}");
        }
    }

    /// A live lookup stamps the key it reads as a read at the lookup's time, under LRU and LFU;
    /// a lookup served by a record, of a key expired at the command's time, or of a walk under
    /// CLIENT NO-TOUCH stamps nothing.
    #[test]
    fn live_lookups_stamp_the_keys_they_read() {
        use crate::db::{lfu_minutes, lru_clock, AccessClock};
        for lfu in [false, true] {
            let mut db = Db::new();
            if lfu {
                db.access = AccessClock::Lfu { log_factor: 10, decay_minutes: 0 };
            }
            let t0 = 1_700_000_000_000;
            for i in 0..5 {
                db.set(format!("w_{i}").as_bytes(), s("1.5"), t0);
            }
            db.set_expire(b"w_3", t0 + 10);
            let at = t0 + 20;
            let part = KeyPart { prefix: b"w_"[..].into(), postfix: b""[..].into(), field: None };
            db.watch_sort(SortWatch::new(1, at, vec![part.clone()], true));
            db.watch_sort(SortWatch::new(2, at, vec![part], false));
            db.set(b"w_2", s("2.5"), at);
            let clocks = |db: &Db| -> Vec<u32> {
                (0..5).map(|i| db.access_clock(format!("w_{i}").as_bytes()).unwrap()).collect()
            };
            let before = clocks(&db);
            let now = t0 + 3_600_000;
            let read_all = |db: &mut Db, id: u64| {
                for i in 0..5 {
                    let key = format!("w_{i}");
                    db.sort_lookup(id, 0, i.to_string().as_bytes(), key.as_bytes(), now, |_, _| ()).unwrap();
                }
            };
            read_all(&mut db, 2);
            assert_eq!(clocks(&db), before, "NO-TOUCH, lfu {lfu}");
            read_all(&mut db, 1);
            let after = clocks(&db);
            let stamped = if lfu { (lfu_minutes(now) << 8) | 6 } else { lru_clock(now) };
            for i in [0, 1, 4] {
                assert_eq!(after[i], stamped, "w_{i}, lfu {lfu}");
            }
            assert_eq!(after[2], before[2], "recorded, lfu {lfu}");
            assert_eq!(after[3], before[3], "expired at the command's time, lfu {lfu}");
            let mut walked = db.take_walked().unwrap();
            assert_eq!(walked.sort_lookup(1, 0, b"0", b"w_0", |existed, _| existed), Some(true));
        }
    }
}
