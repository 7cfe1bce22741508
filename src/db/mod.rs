//! One logical database (SELECT n): the key table, the expire table, lazy expiry on lookup and the
//! active expiry cycle. Commands reach values only through these typed lookups, so an expired key
//! is never seen.
//!
//! Hash field TTLs (Redis 7.4) ride on the same lookups: a hash whose earliest field time has
//! passed loses its expired fields before any command sees it (and the key goes with its last
//! field), and `active_expire_fields` is the cron's pass over the hashes due, in time order.

pub mod lazyfree;
pub mod slots;
pub mod sort_watch;
pub mod walk;

pub use crate::types::table::Table;
use crate::types::Value;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// How hard active expiry works (`active-expire-effort`, 1 to 10), as Redis's activeExpireCycle
/// scales its constants: each step above 1 samples 5 more keys per loop, tolerates one point
/// less of stale keys before moving on, allows 2% more of the CPU per cron tick, and gives a
/// fast cycle 250 µs more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpireEffort {
    pub keys_per_loop: usize,
    pub acceptable_stale_percent: usize,
    pub cycle_cpu_percent: u64,
    pub fast_cycle_us: u64,
}

impl ExpireEffort {
    pub fn new(effort: i32) -> ExpireEffort {
        let step = effort.clamp(1, 10) as usize - 1;
        ExpireEffort {
            keys_per_loop: 20 + 20 / 4 * step,
            acceptable_stale_percent: 10 - step,
            cycle_cpu_percent: 25 + 2 * step as u64,
            fast_cycle_us: 1000 + 1000 / 4 * step as u64,
        }
    }
}

/// What one database's pass of the active expire cycle did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExpirePass {
    /// Keys deleted.
    pub expired: usize,
    /// Keys with a TTL looked at.
    pub sampled: usize,
    /// The deadline ended the pass (not the share of stale keys).
    pub timed_out: bool,
}

/// Counters a database bumps for INFO; the executor adds them up.
#[derive(Debug, Default, Clone, Copy)]
pub struct DbCounters {
    pub expired_keys: u64,
    /// Hash fields removed because their TTL passed (INFO's expired_hash_fields).
    pub expired_fields: u64,
}

/// When each hash with field TTLs is next due (Redis's db->hexpires): a map of the earliest time
/// scheduled per key plus a min-heap over those times. A time moved later leaves its old heap
/// entry behind (skipped when popped, as it no longer matches the map); the heap is rebuilt
/// when such leftovers outnumber the live entries. Keys renamed, deleted or overwritten stay
/// until their time comes and are dropped then: the lookup finds nothing to expire.
#[derive(Default)]
struct FieldTtlIndex {
    due: HashMap<Box<[u8]>, i64>,
    heap: BinaryHeap<Reverse<(i64, Box<[u8]>)>>,
}

impl FieldTtlIndex {
    fn schedule(&mut self, key: &[u8], at: i64) {
        if self.due.get(key).is_some_and(|&cur| cur <= at) {
            return;
        }
        self.due.insert(key.into(), at);
        self.heap.push(Reverse((at, key.into())));
        self.compact_if_sparse();
    }

    /// Rebuilds the heap from the map once leftovers outnumber live entries (amortised O(1)).
    fn compact_if_sparse(&mut self) {
        if self.heap.len() > 2 * self.due.len() + 64 {
            self.heap = self.due.iter().map(|(k, &at)| Reverse((at, k.clone()))).collect();
        }
    }

    fn forget(&mut self, key: &[u8]) {
        if self.due.remove(key).is_some() {
            self.compact_if_sparse();
        }
    }

    /// Takes the next key due at `now`, skipping leftovers.
    fn pop_due(&mut self, now: i64) -> Option<Box<[u8]>> {
        while let Some(Reverse((at, _))) = self.heap.peek() {
            if *at > now {
                return None;
            }
            let Reverse((at, key)) = self.heap.pop()?;
            if self.due.get(&key) == Some(&at) {
                self.due.remove(&key);
                return Some(key);
            }
        }
        None
    }
}

/// See `Db::slot_hint`.
#[derive(Clone, Copy)]
struct SlotHint {
    addr: usize,
    len: usize,
    slot: usize,
}

#[derive(Default)]
pub struct Db {
    keys: Table<Value>,
    /// Cluster mode: the keys of each hash slot (see `slots`), kept from the database's creation
    /// (`index_slots`), so a standalone server pays nothing.
    slot_index: Option<Box<slots::SlotIndex>>,
    /// The hash slot of the key the running command was routed by (cluster mode), with that
    /// key's address and length: the slot index takes it for that very key instead of
    /// computing the CRC again. A key slice with the same address and length as the routed
    /// argument, which lives until the command ends, is that argument; the caller clears the
    /// hint before the argument is freed (`clear_slot_hint`), so a later key at a reused
    /// address never matches.
    slot_hint: Option<SlotHint>,
    expires: Table<i64>,
    /// Where active expiry goes on reading `expires` (Redis's db->expires_cursor): a bucket
    /// index, advanced by one per bucket read, so successive passes cover the whole table.
    expires_cursor: u64,
    /// Keys removed by expiry since the caller last drained them (keyspace events, WATCH).
    pub expired_log: Vec<Vec<u8>>,
    pub counters: DbCounters,
    /// Whether expired keys are collected in `expired_log`.
    pub log_expired: bool,
    field_ttl: FieldTtlIndex,
    /// Hashes that lost fields to their TTL since the last drain, and whether the key went with
    /// them (`hexpired`, then `del`, keyspace events).
    pub field_expired_log: Vec<(Vec<u8>, bool)>,
    /// Whether `field_expired_log` is kept.
    pub log_field_expired: bool,
    /// What a read stamps in a key's access field (set from maxmemory-policy).
    pub access: AccessClock,
    /// Writes are paused (CLIENT PAUSE): expired keys read as missing but stay stored, so the
    /// dataset does not change, as Redis's expireIfNeeded does during a pause.
    pub keep_expired: bool,
    /// The AOF is being replayed: nothing expires (every key reads as live), as in Redis.
    pub loading: bool,
    /// The master's link runs the command on a replica: expired keys are still there until the
    /// master deletes them.
    pub master_view: bool,
    /// KEYS walks in progress over this table (see `walk`): told of every key added or removed.
    walks: Vec<walk::KeyWalk>,
    /// SORT walks whose BY and GET lookups read this table (see `sort_watch`): every change of
    /// a key is first offered to them (`sort_hook`).
    sort_watches: Vec<sort_watch::SortWatch>,
}

/// What a key's 24-bit access field holds, by maxmemory-policy: the LRU clock of the last access,
/// or under an LFU policy the minute of the last access and a logarithmic access counter (Redis's
/// `lru` field, packed the same way, so RDB IDLE/FREQ and OBJECT FREQ read it as Redis would).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub enum AccessClock {
    #[default]
    Lru,
    Lfu {
        /// lfu-log-factor: how many hits it takes to move the counter (higher: more).
        log_factor: u32,
        /// lfu-decay-time: minutes per point the counter loses while the key is idle (0: never).
        decay_minutes: u32,
    },
}

/// The LFU counter a new key starts with (Redis's LFU_INIT_VAL), so it is not evicted at once.
pub const LFU_INIT_VAL: u32 = 5;

/// Redis's LFU time base: minutes, 16 bits.
pub fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms / 60_000) as u32) & 0xffff
}

impl AccessClock {
    /// The field of a key just created.
    pub fn new_key(self, now_ms: i64) -> u32 {
        match self {
            AccessClock::Lru => lru_clock(now_ms),
            AccessClock::Lfu { .. } => (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL,
        }
    }

    /// The field of a key read or written now whose field was `old` (Redis's updateLFU: decay,
    /// then a logarithmic increment).
    pub fn touched(self, old: u32, now_ms: i64) -> u32 {
        match self {
            AccessClock::Lru => lru_clock(now_ms),
            AccessClock::Lfu { log_factor, decay_minutes } => {
                let mut counter = lfu_decayed(old, now_ms, decay_minutes);
                if counter < 255 {
                    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
                    let p = 1.0 / (base * log_factor as f64 + 1.0);
                    if fastrand::f64() < p {
                        counter += 1;
                    }
                }
                (lfu_minutes(now_ms) << 8) | counter
            }
        }
    }
}

/// The LFU counter of access field `field` after the decay its idle minutes call for (Redis's
/// LFUDecrAndReturn): one point per `decay_minutes` minutes, never below zero.
pub fn lfu_decayed(field: u32, now_ms: i64, decay_minutes: u32) -> u32 {
    let (stamp, counter) = (field >> 8, field & 0xff);
    let now = lfu_minutes(now_ms);
    let elapsed = if now >= stamp { now - stamp } else { 0xffff - stamp + now };
    let periods = elapsed.checked_div(decay_minutes).unwrap_or(0);
    counter.saturating_sub(periods)
}

/// Seconds between LRU clock `stamp` and now, across the 24-bit wrap.
pub fn lru_idle_seconds(stamp: u32, now_ms: i64) -> u64 {
    let now = lru_clock(now_ms);
    (if now >= stamp { now - stamp } else { LRU_CLOCK_MAX - stamp + now }) as u64
}

/// The LRU clock Redis keeps: seconds, 24 bits.
pub fn lru_clock(now_ms: i64) -> u32 {
    ((now_ms / 1000) as u32) & LRU_CLOCK_MAX
}

pub const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

/// Cluster mode (set once at start: `cluster-enabled` is immutable): database 0 keeps its slot
/// index from its creation (`Db::numbered`), through loads and flushes. Built on first use instead, the
/// index cost a full pass over the keyspace on the executor: the first COUNTKEYSINSLOT after a
/// restart with 3M keys held every client for 1.25 s. Redis 7.0 keeps its slot-to-keys index
/// always in cluster mode too.
static SLOT_INDEXED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether databases created from now on keep a slot index (cluster mode).
pub fn index_slots(on: bool) {
    SLOT_INDEXED.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn fresh_slot_index() -> Option<Box<slots::SlotIndex>> {
    SLOT_INDEXED.load(std::sync::atomic::Ordering::Relaxed).then(Box::default)
}

/// `key`'s value in `keys`, its access field stamped as a read at `now_ms` under `access` (the
/// table leaves it alone while a fork child shares the pages).
#[inline]
fn get_stamped<'t>(keys: &'t mut Table<Value>, access: AccessClock, key: &[u8], now_ms: i64) -> Option<&'t mut Value> {
    match access {
        AccessClock::Lru => keys.get_touch(key, lru_clock(now_ms)),
        access => keys.get_touch_with(key, |old| access.touched(old, now_ms)),
    }
}

impl Db {
    /// DEBUG HTSTATS: the key table's and the expiry table's bucket statistics.
    pub fn table_stats(&self) -> String {
        format!("[Dictionary HT]\n{}[Expires HT]\n{}", self.keys.stats(), self.expires.stats())
    }

    pub fn new() -> Self {
        Self::default()
    }

    /// Empty database number `id`; in cluster mode database 0 (the only one it serves) starts
    /// with its slot index, kept from then on.
    pub fn numbered(id: usize) -> Self {
        let slot_index = if id == 0 { fresh_slot_index() } else { None };
        Db { slot_index, ..Self::default() }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn expires_len(&self) -> usize {
        self.expires.len()
    }

    /// The key table's bucket slots (Redis's dictSlots: both arrays during a resize).
    pub fn buckets(&self) -> usize {
        self.keys.buckets()
    }

    /// Whether `key`'s time has passed; it is deleted then, unless expired keys are kept.
    fn expire_if_needed(&mut self, key: &[u8], now_ms: i64) -> bool {
        if self.expires.is_empty() || self.master_view {
            return false;
        }
        match self.expires.get(key) {
            Some(&at) if at <= now_ms => {
                if !self.keep_expired {
                    self.delete_expired(key);
                }
                true
            }
            _ => false,
        }
    }

    fn delete_expired(&mut self, key: &[u8]) {
        // The key goes before its TTL: a walk in progress judges it by that TTL.
        self.key_remove(key);
        self.expires.remove(key);
        self.forget_field_ttl(key);
        self.counters.expired_keys += 1;
        if self.log_expired {
            self.expired_log.push(key.to_vec());
        }
    }

    /// Removes the expired fields of the hash under `key`, and the key with its last field.
    /// Returns whether the key was deleted.
    fn expire_fields_if_needed(&mut self, key: &[u8], now_ms: i64) -> bool {
        if self.master_view {
            return false;
        }
        let Some(Value::Hash(h)) = self.keys.get(key) else {
            return false;
        };
        if !h.field_expiry_due(now_ms) {
            return false;
        }
        self.sort_hook(key);
        let Some(Value::Hash(h)) = self.keys.get_mut(key) else {
            return false;
        };
        let n = h.expire_fields(now_ms, usize::MAX);
        let emptied = h.is_empty();
        self.fields_expired(key, n, emptied);
        emptied
    }

    fn fields_expired(&mut self, key: &[u8], n: usize, emptied: bool) {
        if n == 0 {
            return;
        }
        self.counters.expired_fields += n as u64;
        if emptied {
            self.key_remove(key);
            if !self.expires.is_empty() {
                self.expires.remove(key);
            }
            self.forget_field_ttl(key);
        }
        if self.log_field_expired {
            self.field_expired_log.push((key.to_vec(), emptied));
        }
    }

    /// Applies key expiry and then field expiry to `key` (every typed lookup goes through
    /// here). Returns whether the key has expired (deleted, or kept while writes are paused).
    fn expire_key_and_fields(&mut self, key: &[u8], now_ms: i64) -> bool {
        if self.loading || self.master_view {
            return false;
        }
        if self.expire_if_needed(key, now_ms) {
            return true;
        }
        if !self.field_ttl.due.is_empty() {
            self.expire_fields_if_needed(key, now_ms);
        }
        false
    }

    /// Records that the hash under `key` has a field due at `at_ms` (HEXPIRE and friends call
    /// this after setting TTLs in place; `set` notices hashes stored with TTLs by itself).
    pub fn note_field_expire(&mut self, key: &[u8], at_ms: i64) {
        self.field_ttl.schedule(key, at_ms);
    }

    /// Drops `key`'s schedule when its value goes, so deleted hashes with far TTLs do not pile
    /// up (the heap entry left behind is skipped, and compacted away).
    fn forget_field_ttl(&mut self, key: &[u8]) {
        if !self.field_ttl.due.is_empty() {
            self.field_ttl.forget(key);
        }
    }

    fn note_value(&mut self, key: &[u8], value: &Value) {
        self.forget_field_ttl(key);
        if let Value::Hash(h) = value {
            if let Some(at) = h.field_expire_hint() {
                self.field_ttl.schedule(key, at);
            }
        }
    }

    /// Number of hashes with field TTLs scheduled for active expiry (may include a few stale).
    pub fn field_ttl_keys(&self) -> usize {
        self.field_ttl.due.len()
    }

    /// One bounded pass of active field expiry (Redis's hash-field part of activeExpireCycle):
    /// visits the hashes whose earliest field time has passed, in time order, removing up to
    /// `max_fields` fields in all, until `deadline`. Returns the number of fields removed.
    pub fn active_expire_fields(&mut self, now_ms: i64, deadline: std::time::Instant, max_fields: usize) -> usize {
        let mut left = max_fields;
        while left > 0 {
            let Some(key) = self.field_ttl.pop_due(now_ms) else {
                break;
            };
            if self.expire_if_needed(&key, now_ms) {
                continue;
            }
            self.sort_hook(&key);
            let Some(Value::Hash(h)) = self.keys.get_mut(&key) else {
                continue;
            };
            let n = h.expire_fields(now_ms, left);
            let emptied = h.is_empty();
            let next = h.field_expire_hint();
            left -= n;
            self.fields_expired(&key, n, emptied);
            if let (false, Some(at)) = (emptied, next) {
                self.field_ttl.schedule(&key, at);
            }
            if std::time::Instant::now() >= deadline {
                break;
            }
        }
        max_fields - left
    }

    /// The live value under `key`, stamping its access time.
    pub fn get(&mut self, key: &[u8], now_ms: i64) -> Option<&Value> {
        self.get_read(key, now_ms).map(|v| &*v)
    }

    /// The live value under `key` for modification, stamping its access time.
    pub fn get_mut(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Value> {
        self.sort_hook(key);
        self.get_read(key, now_ms)
    }

    /// `get_mut` leaving the access time alone (a write under CLIENT NO-TOUCH).
    pub fn get_mut_untouched(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Value> {
        self.sort_hook(key);
        if self.expire_key_and_fields(key, now_ms) {
            return None;
        }
        self.keys.get_mut(key)
    }

    /// `get_mut` for reading: the caller may do the value's own upkeep (an incremental rehash
    /// step), never change what it holds, so SORT walks are not told of it.
    pub fn get_read(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Value> {
        if self.expire_key_and_fields(key, now_ms) {
            return None;
        }
        get_stamped(&mut self.keys, self.access, key, now_ms)
    }

    /// The live value without touching the access time (OBJECT, TYPE with no-touch, SCAN TYPE).
    pub fn peek(&mut self, key: &[u8], now_ms: i64) -> Option<&Value> {
        if self.expire_key_and_fields(key, now_ms) {
            return None;
        }
        self.keys.get(key)
    }

    /// The value under `key` with no expiry check and no access stamp: for reading several keys
    /// at once (SINTER, SUNION, ...) after each was looked up with the same `now`.
    pub fn get_ref(&self, key: &[u8]) -> Option<&Value> {
        self.keys.get(key)
    }

    /// `get_ref` for taking a reply snapshot of a value the command already looked up (the
    /// snapshot changes how the value is held, never what it holds).
    pub fn get_ref_mut(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.keys.get_mut(key)
    }

    pub fn contains(&mut self, key: &[u8], now_ms: i64) -> bool {
        self.peek(key, now_ms).is_some()
    }

    /// Seconds since the key was last accessed (OBJECT IDLETIME).
    pub fn idle_seconds(&mut self, key: &[u8], now_ms: i64) -> Option<u64> {
        if self.expire_key_and_fields(key, now_ms) {
            return None;
        }
        Some(lru_idle_seconds(self.keys.clock(key)?, now_ms))
    }

    /// The raw 24-bit access field of `key` (LRU seconds, or LFU minutes and counter).
    pub fn access_clock(&self, key: &[u8]) -> Option<u32> {
        self.keys.clock(key)
    }

    /// Stores `value` under `key`, dropping any TTL (Redis's `setKey`). Returns the old value.
    pub fn set(&mut self, key: &[u8], value: Value, now_ms: i64) -> Option<Value> {
        let clock = self.clock_for_store(key, now_ms);
        self.store(key, value, clock)
    }

    /// `set` for a key the command already looked up for writing (so its access was stamped):
    /// an existing key keeps its access field, a new one gets the initial one (Redis's
    /// dbOverwrite and dbAdd after lookupKeyWrite).
    pub fn overwrite(&mut self, key: &[u8], value: Value, now_ms: i64) -> Option<Value> {
        let clock = self.clock_unstamped(key, now_ms);
        self.store(key, value, clock)
    }

    /// `overwrite` keeping an existing TTL.
    pub fn overwrite_keep_ttl(&mut self, key: &[u8], value: Value, now_ms: i64) -> Option<Value> {
        self.store_keep_ttl(key, value, now_ms, false)
    }

    /// `set` with the access field given: a value moved from another key keeps that key's
    /// (RENAME, MOVE), a copy starts afresh (COPY: `AccessClock::new_key`).
    pub fn set_clocked(&mut self, key: &[u8], value: Value, clock: u32) -> Option<Value> {
        self.store(key, value, clock)
    }

    /// The body of `set` and its variants, inlined into each: SET's path measured 30
    /// instructions a request more (callgrind) with it behind a call.
    #[inline(always)]
    fn store(&mut self, key: &[u8], value: Value, clock: u32) -> Option<Value> {
        self.sort_hook(key);
        let old_expire = if self.expires.is_empty() { None } else { self.expires.remove(key) };
        self.note_value(key, &value);
        let old = self.key_insert(key, value, clock);
        // A stale key replaced in place is a new key to a walk whose time it had passed.
        if let (Some(at), true) = (old_expire, !self.walks.is_empty() && old.is_some()) {
            self.walks_revived(key, at);
        }
        old
    }

    /// The access field a stored value gets: now under LRU; under LFU a new key's initial counter,
    /// or the counter of the key it overwrites, counting this write as an access (Redis looks
    /// the key up for writing, then dbOverwrite keeps the field).
    fn clock_for_store(&self, key: &[u8], now_ms: i64) -> u32 {
        match self.access {
            AccessClock::Lru => lru_clock(now_ms),
            access => match self.keys.clock(key) {
                // While a snapshot child runs Redis's lookup does not stamp (and the overwrite
                // keeps the field), as the table's stamping reads do not.
                Some(old) if !crate::types::table::resize_allowed() => old,
                Some(old) => access.touched(old, now_ms),
                None => access.new_key(now_ms),
            },
        }
    }

    /// The access field a value stored after a stamping lookup gets: under LFU the field as it
    /// stands (the first one when new), as Redis's dbOverwrite keeps it; under LRU now, the
    /// new object's clock (also while a snapshot child stops lookups from stamping).
    fn clock_unstamped(&self, key: &[u8], now_ms: i64) -> u32 {
        match (self.access, self.keys.clock(key)) {
            (AccessClock::Lru, _) => lru_clock(now_ms),
            (_, Some(old)) => old,
            (access, None) => access.new_key(now_ms),
        }
    }

    /// Presizes an empty database for `keys` keys and `expires` TTLs (RDB RESIZEDB hint).
    pub fn reserve_empty(&mut self, keys: usize, expires: usize) {
        self.keys.reserve_empty(keys);
        self.expires.reserve_empty(expires);
    }

    /// Adds a key read from an RDB file (or RESTORE) with its expiry and access clock. Returns
    /// false when the key already existed (its value is replaced: callers check first or abort).
    pub fn insert_new(&mut self, key: &[u8], value: Value, expire_ms: Option<i64>, clock: u32) -> bool {
        let field_due = match &value {
            Value::Hash(h) => h.field_expire_hint(),
            _ => None,
        };
        // One lookup: a duplicate aborts the whole load, so overwriting it first is harmless.
        if self.key_insert(key, value, clock).is_some() {
            return false;
        }
        if let Some(at) = expire_ms {
            self.expires.insert(key, at, 0);
        }
        if let Some(at) = field_due {
            self.field_ttl.schedule(key, at);
        }
        true
    }

    /// Stores `value` under `key`, keeping an existing TTL (SET KEEPTTL, in-place rewrites).
    pub fn set_keep_ttl(&mut self, key: &[u8], value: Value, now_ms: i64) -> Option<Value> {
        self.store_keep_ttl(key, value, now_ms, true)
    }

    /// The body of `set_keep_ttl` (`stamp`: the store counts as this command's access) and
    /// `overwrite_keep_ttl` (a lookup already counted it). The clock is read after expiry, so a
    /// key that just expired gets a new key's.
    #[inline(always)]
    fn store_keep_ttl(&mut self, key: &[u8], value: Value, now_ms: i64, stamp: bool) -> Option<Value> {
        self.sort_hook(key);
        self.expire_if_needed(key, now_ms);
        self.note_value(key, &value);
        let clock = if stamp { self.clock_for_store(key, now_ms) } else { self.clock_unstamped(key, now_ms) };
        self.key_insert(key, value, clock)
    }

    /// Removes `key` (and its TTL). Returns the removed value; an already-expired key counts as absent.
    pub fn remove(&mut self, key: &[u8], now_ms: i64) -> Option<Value> {
        if self.expire_if_needed(key, now_ms) {
            return None;
        }
        if !self.field_ttl.due.is_empty() && self.expire_fields_if_needed(key, now_ms) {
            return None;
        }
        // The key goes before its TTL: a walk in progress judges it by that TTL.
        let old = self.key_remove(key);
        if !self.expires.is_empty() {
            self.expires.remove(key);
        }
        self.forget_field_ttl(key);
        old
    }

    /// Removes `key` as eviction does: whether or not its TTL has passed, with no expiry
    /// bookkeeping (Redis's dbSyncDelete from performEvictions).
    pub fn evict(&mut self, key: &[u8]) -> Option<Value> {
        let old = self.key_remove(key);
        if !self.expires.is_empty() {
            self.expires.remove(key);
        }
        self.forget_field_ttl(key);
        old
    }

    /// Up to `n` keys sampled for eviction, with their access field and expire time: from all
    /// keys, or (`volatile`) from those with a TTL only (Redis's dictGetSomeKeys on the main or
    /// the expires dict).
    pub fn sample_for_eviction(&self, n: usize, volatile: bool, mut f: impl FnMut(&[u8], u32, Option<i64>)) {
        if volatile {
            self.expires.sample_entries(n, |key, &at, _| f(key, self.keys.clock(key).unwrap_or(0), Some(at)));
        } else {
            self.keys.sample_entries(n, |key, _, clock| f(key, clock, None));
        }
    }

    /// A random key for the random eviction policies: any key, or one with a TTL.
    pub fn random_for_eviction(&self, volatile: bool) -> Option<Vec<u8>> {
        let key = if volatile { self.expires.random()?.0 } else { self.keys.random()?.0 };
        Some(key.to_vec())
    }

    /// Whether `key` is present (TTL or not), with a TTL when `volatile`: an eviction candidate
    /// picked earlier may be gone.
    pub fn holds_for_eviction(&self, key: &[u8], volatile: bool) -> bool {
        if volatile {
            self.expires.contains_key(key)
        } else {
            self.keys.contains_key(key)
        }
    }

    /// Absolute expire time in unix ms, if the live key has one.
    pub fn expire_at(&mut self, key: &[u8], now_ms: i64) -> Option<i64> {
        if self.expire_key_and_fields(key, now_ms) {
            return None;
        }
        self.expires.get(key).copied()
    }

    /// Sets the absolute expire time of an existing key. Returns false if the key is absent.
    pub fn set_expire(&mut self, key: &[u8], at_ms: i64) -> bool {
        if self.keys.get(key).is_none() {
            return false;
        }
        // A TTL moved before a walk's time would hide the key from its lookups.
        self.sort_hook(key);
        self.expires.insert(key, at_ms, 0);
        true
    }

    /// Drops the TTL of `key`. Returns whether it had one.
    pub fn persist(&mut self, key: &[u8], now_ms: i64) -> bool {
        // A key kept past its TTL (a replica, a pause) would come back to a walk's lookups.
        self.sort_hook(key);
        !self.expire_key_and_fields(key, now_ms) && self.expires.remove(key).is_some()
    }

    /// One SCAN step over the live keys; expired keys are skipped (and deleted).
    pub fn scan(&mut self, cursor: u64, now_ms: i64, mut f: impl FnMut(&[u8], &Value)) -> u64 {
        let mut expired = Vec::new();
        let next = self.keys.scan(cursor, |k, v| match self.expires.get(k) {
            Some(&at) if at <= now_ms => expired.push(k.to_vec()),
            _ => f(k, v),
        });
        if !self.keep_expired {
            for k in expired {
                self.delete_expired(&k);
            }
        }
        next
    }

    /// A random live key (RANDOMKEY). Gives up after many expired picks like Redis does.
    pub fn random_key(&mut self, now_ms: i64) -> Option<Vec<u8>> {
        for _ in 0..100 {
            let key = self.keys.random()?.0.to_vec();
            if !self.expire_if_needed(&key, now_ms) {
                return Some(key);
            }
        }
        self.keys.random().map(|(k, _)| k.to_vec())
    }

    /// Whether `key` is stored and not past its TTL, changing nothing (no lazy expiry).
    pub fn is_live(&self, key: &[u8], now_ms: i64) -> bool {
        self.keys.contains_key(key) && !matches!(self.expires.get(key), Some(&at) if at <= now_ms)
    }

    /// Starts loading `key`'s bucket slot (see `Table::prefetch_slot`).
    pub fn prefetch_slot(&self, key: &[u8]) {
        self.keys.prefetch_slot(key);
    }

    /// Starts loading the entry `key`'s slot names; call `prefetch_slot` a little earlier (a
    /// command earlier in a batch, a chunk of lookups earlier in SORT).
    pub fn prefetch_entry(&self, key: &[u8]) {
        self.keys.prefetch_entry(key);
    }

    /// Sets the slot hint: `slot` is `key`'s, and `key` outlives the hint (see `slot_hint`).
    #[inline]
    pub fn set_slot_hint(&mut self, key: &[u8], slot: usize) {
        self.slot_hint = Some(SlotHint { addr: key.as_ptr() as usize, len: key.len(), slot });
    }

    /// Drops the slot hint; before the key it was set for is freed.
    #[inline]
    pub fn clear_slot_hint(&mut self) {
        self.slot_hint = None;
    }

    /// `key`'s hash slot: the hint's when `key` is the very slice it was set for.
    #[inline]
    fn slot_of(hint: &Option<SlotHint>, key: &[u8]) -> usize {
        match hint {
            Some(h) if h.addr == key.as_ptr() as usize && h.len == key.len() => h.slot,
            _ => crate::util::slot::key_hash_slot(key),
        }
    }

    /// Every key enters the table here (the slot index and KEYS walks follow it).
    fn key_insert(&mut self, key: &[u8], value: Value, clock: u32) -> Option<Value> {
        self.sort_hook(key);
        let old = match self.slot_index.as_mut() {
            None => self.keys.insert(key, value, clock),
            Some(index) => {
                let (old, entry) = self.keys.insert_entry(key, value, clock);
                if old.is_none() {
                    let tag = index.add(Self::slot_of(&self.slot_hint, key), entry);
                    // SAFETY: `entry` was just inserted.
                    unsafe { self.keys.set_entry_tag(entry, tag) };
                }
                old
            }
        };
        if old.is_none() && !self.walks.is_empty() {
            self.walks_added(key);
        }
        old
    }

    /// Every key leaves the table here, before its TTL leaves the expire table (a KEYS walk in
    /// progress judges a key that goes by the TTL it had).
    fn key_remove(&mut self, key: &[u8]) -> Option<Value> {
        self.sort_hook(key);
        let old = match self.slot_index.as_mut() {
            None => self.keys.remove(key)?,
            Some(index) => {
                let (old, entry, tag) = self.keys.remove_entry(key)?;
                let (_, moved) = index.remove(Self::slot_of(&self.slot_hint, key), entry, tag);
                if let Some((moved, tag)) = moved {
                    // SAFETY: the index holds only entries now in `self.keys` (see `keys_in_slot`).
                    unsafe { self.keys.set_entry_tag(moved, tag) };
                }
                old
            }
        };
        if !self.walks.is_empty() {
            self.walks_removed(key);
        }
        Some(old)
    }

    /// The per-slot index, built by one pass over the keys the first time.
    fn slot_index(&mut self) -> &slots::SlotIndex {
        if self.slot_index.is_none() {
            let mut index = Box::<slots::SlotIndex>::default();
            for (k, _) in self.keys.iter() {
                if let Some(entry) = self.keys.entry(k) {
                    index.add(crate::util::slot::key_hash_slot(k), entry);
                }
            }
            for (entry, tag) in index.positions() {
                // SAFETY: every handle was taken from `self.keys` just above.
                unsafe { self.keys.set_entry_tag(entry, tag) };
            }
            self.slot_index = Some(index);
        }
        self.slot_index.get_or_insert_with(Default::default)
    }

    /// Keys stored in hash slot `slot` (cluster mode), at most `limit`, expired ones included
    /// as Redis's slot index includes them.
    pub fn keys_in_slot(&mut self, slot: usize, limit: usize) -> Vec<Vec<u8>> {
        self.slot_index();
        let Some(index) = self.slot_index.as_deref() else { return Vec::new() };
        index
            .handles(slot)
            .take(limit)
            // SAFETY: the index holds exactly the entries now in `self.keys`: every insert and
            // removal goes through key_insert / key_remove, and `clear` drops the index with
            // the table it describes.
            .map(|entry| unsafe { self.keys.entry_key(entry) }.to_vec())
            .collect()
    }

    /// Number of keys stored in hash slot `slot`.
    pub fn count_keys_in_slot(&mut self, slot: usize) -> usize {
        self.slot_index().count(slot)
    }

    /// Every live key, in table order.
    pub fn keys(&self, now_ms: i64) -> impl Iterator<Item = (&[u8], &Value)> {
        // No key hashed a second time when no key has a TTL.
        let has_expires = !self.expires.is_empty();
        self.keys.iter().filter(move |(k, _)| !has_expires || !matches!(self.expires.get(k), Some(&at) if at <= now_ms))
    }

    /// Seconds since `key` was last accessed, without expiring or touching it (the RDB writer's
    /// IDLE opcode under an LRU maxmemory-policy).
    pub fn idle_seconds_peek(&self, key: &[u8], now_ms: i64) -> Option<u64> {
        Some(lru_idle_seconds(self.keys.clock(key)?, now_ms))
    }

    /// Every key with its value and expiry, logically expired ones included (the RDB writer
    /// saves them as Redis does; the loader decides).
    pub fn iter_all(&self) -> impl Iterator<Item = (&[u8], &Value, Option<i64>)> {
        let has_expires = !self.expires.is_empty();
        self.keys.iter().map(move |(k, v)| (k, v, if has_expires { self.expires.get(k).copied() } else { None }))
    }

    /// Removes every key; returns the old tables so the caller can free them off the hot path.
    pub fn clear(&mut self) -> (Table<Value>, Table<i64>) {
        // A KEYS walk lists the keys of its start time: it ends before they go. Flushes and
        // reloads set walks aside with the old tables first (`take_walked`); what is left is
        // rare (CLUSTER RESET of a replica), and takes as long as a KEYS took before walks.
        self.finish_walks();
        self.sort_record_all();
        self.field_ttl = FieldTtlIndex::default();
        // The index describes the table being handed away; the empty table gets an empty one.
        self.slot_index = self.slot_index.is_some().then(Box::default);
        (self.keys.take(), self.expires.take())
    }

    /// One database's pass of active expiry, as Redis 7.0's activeExpireCycle runs it: loops
    /// that each read buckets of the expire table from the cursor on until they have looked at
    /// `effort.keys_per_loop` keys (or 20 times as many buckets), deleting the expired ones,
    /// repeated while more than `effort.acceptable_stale_percent` of a loop's keys were expired
    /// (or it found none), until `deadline`. A table less than 1% full is left alone: reading
    /// it costs too much, and it shrinks soon.
    pub fn active_expire_pass(
        &mut self,
        now_ms: i64,
        deadline: std::time::Instant,
        effort: ExpireEffort,
    ) -> ExpirePass {
        /// Redis's DICT_HT_INITIAL_SIZE.
        const SMALLEST_TABLE: usize = 4;
        let mut pass = ExpirePass::default();
        // The expired keys of a bucket, end to end, copied out so they can be deleted.
        let mut due: Vec<u8> = Vec::new();
        let mut due_ends: Vec<usize> = Vec::new();
        loop {
            let keys = self.expires.len();
            if keys == 0 {
                break;
            }
            let slots = self.expires.buckets();
            if slots > SMALLEST_TABLE && keys * 100 / slots < 1 {
                break;
            }
            let wanted = keys.min(effort.keys_per_loop);
            let max_buckets = wanted * 20;
            let (mut sampled, mut expired, mut buckets) = (0, 0, 0);
            while sampled < wanted && buckets < max_buckets {
                due.clear();
                due_ends.clear();
                buckets += self.expires.visit_bucket(self.expires_cursor, |key, &at| {
                    sampled += 1;
                    if at <= now_ms {
                        due.extend_from_slice(key);
                        due_ends.push(due.len());
                    }
                });
                let mut from = 0;
                for &end in &due_ends {
                    self.delete_expired(&due[from..end]);
                    from = end;
                }
                expired += due_ends.len();
                self.expires_cursor = self.expires_cursor.wrapping_add(1);
            }
            pass.expired += expired;
            pass.sampled += sampled;
            if std::time::Instant::now() >= deadline {
                pass.timed_out = true;
                break;
            }
            if sampled > 0 && expired * 100 / sampled <= effort.acceptable_stale_percent {
                break;
            }
        }
        pass
    }

    /// Moves resize work forward in both tables until `deadline` (Redis's activerehashing slice,
    /// meant for the cron) and starts shrinking tables that became sparse. Returns whether work is
    /// left.
    pub fn rehash_until(&mut self, deadline: std::time::Instant) -> bool {
        self.keys.shrink_if_sparse();
        self.expires.shrink_if_sparse();
        let keys_left = self.keys.rehash_until(deadline);
        keys_left | self.expires.rehash_until(deadline)
    }

    /// Bytes the key table's allocations request for an entry with a key of `key_len` bytes
    /// (MEMORY USAGE); the bucket slot adds 8 bytes more.
    pub fn entry_bytes(key_len: usize) -> usize {
        Table::<Value>::entry_bytes(key_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::RStr;
    use std::time::{Duration, Instant};

    fn val() -> Value {
        Value::Str(RStr::from_bytes(b"v"))
    }

    /// The slot hint serves only the very slice it was set for: an equal key elsewhere in
    /// memory, or a hint cleared, gets its slot computed. (A hint naming a wrong slot is
    /// planted here to tell the two apart.)
    #[test]
    fn slot_hint_applies_to_its_own_slice_only() {
        let mut db = Db::new();
        let now = 1_000_000;
        assert_eq!(db.count_keys_in_slot(0), 0);
        let real = crate::util::slot::key_hash_slot(b"key:1");
        let wrong = (real + 1) % crate::util::slot::SLOTS;
        let routed = b"key:1".to_vec();
        let copy = routed.clone();
        db.set_slot_hint(&routed, wrong);
        db.set(&copy, val(), now);
        assert_eq!((db.count_keys_in_slot(real), db.count_keys_in_slot(wrong)), (1, 0));
        db.remove(&copy, now);
        db.set(&routed, val(), now);
        assert_eq!((db.count_keys_in_slot(real), db.count_keys_in_slot(wrong)), (0, 1));
        db.remove(&routed, now);
        assert_eq!(db.count_keys_in_slot(wrong), 0);
        db.clear_slot_hint();
        db.set(&routed, val(), now);
        assert_eq!((db.count_keys_in_slot(real), db.count_keys_in_slot(wrong)), (1, 0));
    }

    #[test]
    fn active_expire_reclaims_all_when_everything_is_stale() {
        let mut db = Db::new();
        let now = 1_000_000;
        for i in 0..5000 {
            let k = format!("k{i}").into_bytes();
            db.set(&k, val(), now);
            db.set_expire(&k, now - 1);
        }
        let pass = db.active_expire_pass(now, Instant::now() + Duration::from_secs(60), ExpireEffort::new(1));
        assert_eq!(pass, ExpirePass { expired: 5000, sampled: 5000, timed_out: false });
        assert_eq!(db.len(), 0);
        assert_eq!(db.expires_len(), 0);
        assert_eq!(db.counters.expired_keys, 5000);
    }

    #[test]
    fn active_expire_stops_when_few_are_stale() {
        let mut db = Db::new();
        let now = 1_000_000;
        for i in 0..5000 {
            let k = format!("k{i}").into_bytes();
            db.set(&k, val(), now);
            // One key in fifty is stale: under the 10% threshold, so one sample suffices.
            db.set_expire(&k, if i % 50 == 0 { now - 1 } else { now + 100_000 });
        }
        let pass = db.active_expire_pass(now, Instant::now() + Duration::from_secs(60), ExpireEffort::new(1));
        let deleted = pass.expired;
        assert!(deleted < 100 && pass.sampled < 100 && !pass.timed_out, "{pass:?}");
        assert_eq!(db.len(), 5000 - deleted);
        assert_eq!(db.expires_len(), 5000 - deleted);
        // Lazy expiry still hides the rest.
        let live = (0..5000).filter(|i| db.contains(format!("k{i}").as_bytes(), now)).count();
        assert_eq!(live, 4900);
        // The cursor moves on: passes that each stop after one loop still reach every key.
        let mut passes = 0;
        while db.expires_len() > 4900 {
            db.active_expire_pass(now, Instant::now() + Duration::from_secs(60), ExpireEffort::new(1));
            passes += 1;
            assert!(passes < 1000, "{} stale keys never reached", db.expires_len() - 4900);
        }
    }

    #[test]
    fn active_expire_respects_the_deadline() {
        let mut db = Db::new();
        let now = 1_000_000;
        for i in 0..5000 {
            let k = format!("k{i}").into_bytes();
            db.set(&k, val(), now);
            db.set_expire(&k, now - 1);
        }
        let pass = db.active_expire_pass(now, Instant::now(), ExpireEffort::new(1));
        // One loop: 20 keys and the rest of the last bucket's chain.
        assert!(pass.timed_out && pass.expired >= 20 && pass.expired < 40, "{pass:?}");
    }

    #[test]
    fn cron_rehash_finishes_resizes() {
        let mut db = Db::new();
        for i in 0..3000 {
            db.set(format!("k{i}").as_bytes(), val(), 0);
        }
        for i in 0..2990 {
            db.remove(format!("k{i}").as_bytes(), 0);
        }
        assert!(!db.rehash_until(Instant::now() + Duration::from_secs(10)));
        assert!(db.keys.buckets() <= 64);
        assert_eq!(db.len(), 10);
    }

    fn hash_with_ttls(now: i64, fields: &[(&str, Option<i64>)]) -> Value {
        let mut h = crate::types::Hash::new();
        for (f, at) in fields {
            h.set(f.as_bytes(), b"v", 128, 64);
            if let Some(at) = at {
                h.set_field_expire(f.as_bytes(), now + at);
            }
        }
        Value::Hash(Box::new(h))
    }

    #[test]
    fn lookups_remove_expired_fields_and_emptied_keys() {
        let mut db = Db::new();
        db.log_field_expired = true;
        let now = 1_000_000;
        db.set(b"h", hash_with_ttls(now, &[("a", Some(10)), ("b", None)]), now);
        db.set(b"e", hash_with_ttls(now, &[("a", Some(10))]), now);
        assert!(db.get(b"h", now + 9).is_some_and(|v| v.free_effort() == 2));
        assert!(db.get(b"h", now + 10).is_some_and(|v| v.free_effort() == 1));
        assert!(db.peek(b"e", now + 10).is_none());
        assert_eq!(db.len(), 1);
        assert_eq!(db.field_expired_log, [(b"h".to_vec(), false), (b"e".to_vec(), true)]);
        assert_eq!(db.counters.expired_fields, 2);
        // `e` went with its last field, so nothing is scheduled for it any more.
        assert_eq!(db.field_ttl_keys(), 1);
    }

    #[test]
    fn active_field_expiry_follows_time_order_and_quota() {
        let mut db = Db::new();
        let now = 1_000_000;
        let far = Instant::now() + Duration::from_secs(60);
        for i in 0..100 {
            let k = format!("h{i}");
            db.set(k.as_bytes(), hash_with_ttls(now, &[("a", Some(i)), ("b", Some(1000 + i)), ("c", None)]), now);
        }
        // Due at now + 49: fifty hashes, one field each; the quota stops at 20.
        assert_eq!(db.active_expire_fields(now + 49, far, 20), 20);
        assert_eq!(db.active_expire_fields(now + 49, far, 1000), 30);
        assert_eq!(db.active_expire_fields(now + 49, far, 1000), 0);
        assert_eq!(db.counters.expired_fields, 50);
        // Every hash still has `b` scheduled; after it, `c` keeps each key alive.
        assert_eq!(db.field_ttl_keys(), 100);
        assert_eq!(db.active_expire_fields(now + 5000, far, usize::MAX), 150);
        assert_eq!(db.len(), 100);
        assert_eq!(db.field_ttl_keys(), 0);
        // A deleted or overwritten hash leaves nothing behind.
        db.set(b"x", hash_with_ttls(now, &[("a", Some(1 << 40))]), now);
        db.set(b"y", hash_with_ttls(now, &[("a", Some(1 << 40))]), now);
        db.remove(b"x", now);
        db.set(b"y", val(), now);
        assert_eq!(db.field_ttl_keys(), 0);
        for i in 0..1000 {
            let k = format!("t{i}");
            db.set(k.as_bytes(), hash_with_ttls(now, &[("a", Some(1 << 40))]), now);
            db.remove(k.as_bytes(), now);
        }
        assert!(db.field_ttl.heap.len() <= 64, "{}", db.field_ttl.heap.len());
    }
}
