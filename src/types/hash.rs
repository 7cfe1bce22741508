//! The Hash value type: field → value, in one of Redis 7.0's two encodings.
//!
//! - `listpack` (small hashes): every field and value in one exact-size heap buffer, each entry a
//!   LEB128 length followed by its bytes, pairs in insertion order. No header and no back-lengths:
//!   every operation walks forward, and a small hash holds at most `hash-max-listpack-entries`
//!   pairs, so a walk is short. Values are kept as bytes (Redis stores integer-looking strings as
//!   integers, but replies always give back the same text, so nothing observable differs).
//! - `hashtable` (big hashes): a chained hash table over a dense slab. The pairs themselves
//!   are packed back to back in an arena of never-reallocated chunks (`[len][len][field][value]`,
//!   see `Arena`); the slab holds each
//!   pair's arena offset, its 32-bit hash and its chain link, and the bucket array holds slab
//!   indices. Why not Redis's dict: no per-field allocation (a 14-byte field with a 3-byte value
//!   costs ~19 arena bytes + 20 bytes of slab and bucket, against Redis's dictEntry, two sds
//!   and a bucket, each rounded up to a malloc size class), iteration (HGETALL, HKEYS) is a
//!   sequential walk, and a random field (HRANDFIELD) is one uniform index. A replaced value of
//!   the same length is overwritten in place; otherwise the old bytes become garbage and the
//!   arena is compacted when garbage passes half of it (amortised O(1)). Deleting swaps the last
//!   slab slot into the hole. The bucket array resizes incrementally, as Redis's dict: growing
//!   past one pair per bucket or shrinking under 10% allocates a second array, and every insert,
//!   removal and keyspace lookup then moves one chain (skipping at most ten empty buckets), so no
//!   command pays a pause proportional to the hash. A pair's array is known from its hash (the
//!   old one while its bucket has not moved), so a lookup still walks one chain. Resizes do not
//!   start while a fork child shares the pages (growth is forced at five pairs per bucket).
//!   SCAN keeps Redis's guarantee with Redis's reverse-binary cursor, visiting the matching
//!   buckets of both arrays during a resize (slab moves never change a field's bucket).
//!
//! Conversion follows 7.0: listpack → hashtable when a pair would exceed
//! `hash-max-listpack-entries` or a field/value is longer than `hash-max-listpack-value`; never
//! back. The limits come in as plain numbers: this module knows nothing of config or commands.

use std::sync::Arc;

use crate::types::cow::CowVec;
use crate::types::segvec::SegVec;
use crate::util::varint;
use std::hash::BuildHasher;

/// A Redis hash.
#[derive(Clone)]
pub enum Hash {
    /// Pairs packed in one buffer (`OBJECT ENCODING` says `listpack`).
    Listpack(Box<[u8]>),
    /// `listpackex` or `hashtable`, behind one more pointer (see `Boxed`).
    Boxed(Box<Boxed>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Box::default())
    }
}

impl std::fmt::Debug for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))))
            .finish()
    }
}

impl PartialEq for Hash {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self.iter().all(|(k, v)| other.get(k) == Some(v) && self.field_expire(k) == other.field_expire(k))
    }
}

// ---------------------------------------------------------------------------------------------
// listpack helpers

/// Reads a length at `pos`; returns (length, position after it). The buffer is ours, so it is
/// well formed; a truncated one reads as an empty tail rather than panicking.
fn read_len(buf: &[u8], mut pos: usize) -> (usize, usize) {
    let n = varint::get(buf, &mut pos) as usize;
    (n, pos)
}

fn push_len(out: &mut Vec<u8>, n: usize) {
    varint::put(out, n as u64);
}

/// Entries of a listpack buffer, in order, with the offset each one starts at.
struct LpEntries<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for LpEntries<'a> {
    /// (offset of the entry's header, entry bytes, offset after the entry)
    type Item = (usize, &'a [u8], usize);

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let start = self.pos;
        let (len, data) = read_len(self.buf, start);
        let end = (data + len).min(self.buf.len());
        self.pos = end;
        Some((start, &self.buf[data..end], end))
    }
}

fn lp_entries(buf: &[u8]) -> LpEntries<'_> {
    LpEntries { buf, pos: 0 }
}

/// A located pair in a listpack: where the field starts, where the value's header starts, where
/// the pair ends, and the value bytes.
struct LpFound<'a> {
    start: usize,
    value_at: usize,
    end: usize,
    value: &'a [u8],
}

fn lp_find<'a>(buf: &'a [u8], field: &[u8]) -> Option<LpFound<'a>> {
    let mut it = lp_entries(buf);
    while let Some((start, f, value_at)) = it.next() {
        let (_, v, end) = it.next()?;
        if f == field {
            return Some(LpFound { start, value_at, end, value: v });
        }
    }
    None
}

/// Pairs of a listpack buffer.
pub struct LpPairs<'a>(LpEntries<'a>);

impl<'a> Iterator for LpPairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let (_, f, _) = self.0.next()?;
        let (_, v, _) = self.0.next()?;
        Some((f, v))
    }
}

// ---------------------------------------------------------------------------------------------
// hashtable encoding

const NIL: u32 = u32::MAX;
const MIN_BUCKETS: usize = 4;

#[derive(Clone, Copy)]
struct Link {
    hash: u32,
    next: u32,
}

/// The `hashtable` encoding: pairs packed in an arena, chained into power-of-two buckets.
#[derive(Clone)]
pub struct Table {
    /// Pairs back to back, each `[LEB128 field length][LEB128 value length][field][value]`.
    /// Replaced and removed pairs leave garbage behind until a compaction.
    arena: Arena,
    /// Bytes of `arena` no pair uses any more.
    garbage: usize,
    /// Slab: where each live pair starts in `arena`.
    offsets: SegVec<usize>,
    /// Parallel to `offsets`: the field's hash and the next slab index in its bucket's chain.
    links: SegVec<Link>,
    /// Head slab index of each bucket's chain, stored as its bitwise NOT (0 when empty, see
    /// `empty_buckets`); the length is a power of two.
    /// During a resize this is the target array (Redis's `ht[1]`).
    buckets: Box<[u32]>,
    /// A resize in progress, behind a pointer so a table stays in its 128-byte size class.
    rehash: Option<Box<Rehash>>,
    state: foldhash::fast::RandomState,
    /// Field expiry times, only once some field has one (a hash without field TTLs pays one
    /// null pointer).
    ttl: Option<Box<TableTtl>>,
}

/// A resize in progress: the array being drained (Redis's `ht[0]`; `Table::buckets` is the
/// target). Its buckets below `idx` have moved, the others still chain their pairs.
#[derive(Clone)]
struct Rehash {
    old: Box<[u32]>,
    idx: usize,
}

/// A bucket array with every bucket empty. Buckets store the bitwise NOT of their head's slab
/// index, so an empty one (`NIL`) is 0 and the array comes from zeroed memory: a fresh array of
/// millions of buckets costs no writing pass (filling 2^23 buckets with `NIL` took 10 ms).
fn empty_buckets(n: usize) -> Box<[u32]> {
    vec![0u32; n].into_boxed_slice()
}

/// Per-field expiry times of a table, parallel to its slab.
#[derive(Clone)]
struct TableTtl {
    /// Unix ms for each slab slot, `NO_TTL` when the field has none.
    at: Vec<i64>,
    /// Slots whose time is not `NO_TTL`.
    count: usize,
    /// A lower bound of the earliest time (exact after each expiry pass), so a lookup can tell
    /// in O(1) that nothing is due; removing or persisting a field leaves it low, which only
    /// costs one needless pass.
    min_hint: i64,
}

/// Pair storage for the table: chunks that are never reallocated, so growing a big hash copies
/// nothing and frees nothing (a doubling `Vec` would leave its old buffers as dirty pages).
/// A chunk gets a quarter of the bytes stored so far (256 B to 1 MiB), so the unused tail is
/// small for hashes of any size. A position is `chunk << 32 | offset in chunk`.
#[derive(Clone, Default)]
pub struct Arena {
    /// Shared with reply snapshots while they last (see `types::cow`).
    chunks: Vec<CowVec<u8>>,
    /// Bytes written so far (live and garbage).
    used: usize,
}

const MAX_CHUNK: usize = 1 << 20;

impl Arena {
    fn push_pair(&mut self, field: &[u8], value: &[u8]) -> usize {
        let need = field.len() + value.len() + 20;
        let fits = self.chunks.last().is_some_and(|c| c.capacity() - c.len() >= need);
        if !fits {
            let cap = need.max((self.used / 4).clamp(256, MAX_CHUNK));
            self.chunks.push(Vec::with_capacity(cap).into());
        }
        let ci = self.chunks.len() - 1;
        let chunk = self.chunks[ci].make_mut();
        let at = chunk.len();
        push_len(chunk, field.len());
        push_len(chunk, value.len());
        chunk.extend_from_slice(field);
        chunk.extend_from_slice(value);
        self.used += chunk.len() - at;
        (ci << 32) | at
    }

    fn chunk(&self, pos: usize) -> (&[u8], usize) {
        (self.chunks.get(pos >> 32).map_or(&[][..], |c| &c[..]), pos & 0xffff_ffff)
    }

    fn bytes_mut(&mut self, pos: usize) -> (&mut [u8], usize) {
        (self.chunks.get_mut(pos >> 32).map_or(&mut [][..], |c| &mut c.make_mut()[..]), pos & 0xffff_ffff)
    }

    fn capacity(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity()).sum()
    }
}

/// Decodes the pair at `pos`: (field, value, bytes the pair occupies).
fn pair_at(arena: &Arena, pos: usize) -> (&[u8], &[u8], usize) {
    let (buf, at) = arena.chunk(pos);
    pair_in(buf, at)
}

/// Decodes the pair at offset `at` of an arena chunk.
fn pair_in(buf: &[u8], at: usize) -> (&[u8], &[u8], usize) {
    let (flen, p) = read_len(buf, at);
    let (vlen, p) = read_len(buf, p);
    let fend = (p + flen).min(buf.len());
    let vend = (fend + vlen).min(buf.len());
    (&buf[p..fend], &buf[fend..vend], vend - at.min(vend))
}

/// A hashtable hash as it was when the snapshot was taken: its slab and arena, shared with the
/// hash until a writer copies a segment or chunk (see `types::cow`). It owns what it reads, so
/// a reply can be encoded from it on another thread while the hash changes.
pub struct HashSnapshot {
    len: usize,
    bytes: usize,
    offsets: Vec<Arc<Vec<usize>>>,
    chunks: Vec<Arc<Vec<u8>>>,
}

impl HashSnapshot {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Arena bytes of the live pairs: a capacity hint for the reply.
    pub fn data_bytes_hint(&self) -> usize {
        self.bytes
    }

    /// Every pair, in the order `Hash::iter` gave them when the snapshot was taken.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        for &pos in self.offsets.iter().flat_map(|seg| seg.iter()) {
            let buf = self.chunks.get(pos >> 32).map_or(&[][..], |c| &c[..]);
            let (k, v, _) = pair_in(buf, pos & 0xffff_ffff);
            f(k, v);
        }
    }

    /// The pairs from position `at` on (segment, index; `(0, 0)` is the first), in
    /// `for_each`'s order, until `f` returns false: then where the next pair is, or None once
    /// every pair was visited (a reply encoded piece by piece resumes there).
    pub fn for_each_from(&self, at: (usize, usize), mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Option<(usize, usize)> {
        let (mut si, mut i) = at;
        while let Some(seg) = self.offsets.get(si) {
            while let Some(&pos) = seg.get(i) {
                i += 1;
                let buf = self.chunks.get(pos >> 32).map_or(&[][..], |c| &c[..]);
                let (k, v, _) = pair_in(buf, pos & 0xffff_ffff);
                if !f(k, v) {
                    return Some((si, i));
                }
            }
            si += 1;
            i = 0;
        }
        None
    }
}

impl Table {
    /// The table as it is now, sharing its slab segments and arena chunks.
    fn snapshot(&mut self) -> HashSnapshot {
        HashSnapshot {
            len: self.len(),
            bytes: self.arena.used.saturating_sub(self.garbage),
            offsets: self.offsets.share(),
            chunks: self.arena.chunks.iter_mut().map(CowVec::share).collect(),
        }
    }

    fn with_capacity(n: usize) -> Table {
        let nb = n.max(MIN_BUCKETS).next_power_of_two();
        Table {
            arena: Arena::default(),
            garbage: 0,
            offsets: SegVec::with_capacity(n),
            links: SegVec::with_capacity(n),
            buckets: empty_buckets(nb),
            rehash: None,
            state: foldhash::fast::RandomState::default(),
            ttl: None,
        }
    }

    fn hash(&self, field: &[u8]) -> u32 {
        self.state.hash_one(field) as u32
    }

    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    fn len(&self) -> usize {
        self.offsets.len()
    }

    fn is_rehashing(&self) -> bool {
        self.rehash.is_some()
    }

    /// The chain head (decoded: a slab index or `NIL`) that holds pairs of hash `h`: the old
    /// array's bucket while it has not moved yet, else the live array's. A pair's array is thus
    /// known from its hash, so a lookup walks one chain even during a resize.
    fn head(&self, h: u32) -> u32 {
        !*self.head_ref(h)
    }

    /// The stored (encoded) bucket `head` reads.
    fn head_ref(&self, h: u32) -> &u32 {
        if let Some(r) = &self.rehash {
            let ob = h as usize & (r.old.len() - 1);
            if ob >= r.idx {
                return &r.old[ob];
            }
        }
        &self.buckets[h as usize & self.mask()]
    }

    /// The stored (encoded, see `empty_buckets`) bucket for hash `h`.
    fn head_mut(&mut self, h: u32) -> &mut u32 {
        let mask = self.mask();
        if let Some(r) = &mut self.rehash {
            let ob = h as usize & (r.old.len() - 1);
            if ob >= r.idx {
                return &mut r.old[ob];
            }
        }
        &mut self.buckets[h as usize & mask]
    }

    fn find(&self, field: &[u8]) -> Option<usize> {
        let h = self.hash(field);
        let mut i = self.head(h);
        while i != NIL {
            let link = self.links[i as usize];
            if link.hash == h && self.pair(i as usize).0 == field {
                return Some(i as usize);
            }
            i = link.next;
        }
        None
    }

    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|i| self.pair(i).1)
    }

    /// Starts moving every chain to a new array of `nb` buckets (finishing a resize still in
    /// progress first, which only happens when inserts outrun the steps).
    fn start_resize(&mut self, nb: usize) {
        while self.rehash_step(usize::MAX / 10) {}
        let old = std::mem::replace(&mut self.buckets, empty_buckets(nb));
        if !self.offsets.is_empty() {
            self.rehash = Some(Box::new(Rehash { old, idx: 0 }));
        }
    }

    /// Moves up to `n` non-empty buckets of the old array to the new one, skipping at most
    /// `10 * n` empty ones (Redis's dictRehash). Returns whether the resize is still going.
    fn rehash_step(&mut self, n: usize) -> bool {
        let mask = self.mask();
        let Some(r) = &mut self.rehash else { return false };
        let mut empty_visits = n.saturating_mul(10);
        let mut n = n;
        while n > 0 && r.idx < r.old.len() {
            let mut i = !std::mem::replace(&mut r.old[r.idx], !NIL);
            r.idx += 1;
            if i == NIL {
                empty_visits -= 1;
                if empty_visits == 0 {
                    break;
                }
                continue;
            }
            while i != NIL {
                let link = &mut self.links[i as usize];
                let next = link.next;
                let b = &mut self.buckets[link.hash as usize & mask];
                link.next = !*b;
                *b = !i;
                i = next;
            }
            n -= 1;
        }
        if r.idx >= r.old.len() {
            // A big array's free purges its pages right there (`util::bgfree`).
            if let Some(done) = self.rehash.take() {
                crate::util::bgfree::drop_big(done.old);
            }
            return false;
        }
        true
    }

    /// Rewrites the arena without garbage once garbage is more than half of it.
    fn maybe_compact(&mut self) {
        if self.garbage <= 64 || self.garbage * 2 <= self.arena.used {
            return;
        }
        let mut arena = Arena::default();
        for at in self.offsets.iter_mut() {
            let (k, v, _) = pair_at(&self.arena, *at);
            *at = arena.push_pair(k, v);
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Sets `field`; returns true when it is new.
    fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Some(i) = self.find(field) {
            self.clear_expire(i);
            let at = self.offsets[i];
            let (_, old, n) = pair_at(&self.arena, at);
            if old.len() == value.len() {
                // Same length: overwrite in place (HINCRBY and fixed-width updates).
                let (buf, off) = self.arena.bytes_mut(at);
                buf[off + n - value.len()..off + n].copy_from_slice(value);
            } else {
                self.garbage += n;
                self.offsets[i] = self.arena.push_pair(field, value);
                self.maybe_compact();
            }
            return false;
        }
        self.push_new(field, value);
        true
    }

    /// Adds a field known to be absent.
    fn push_new(&mut self, field: &[u8], value: &[u8]) {
        let h = self.hash(field);
        let idx = self.offsets.len() as u32;
        let at = self.arena.push_pair(field, value);
        self.offsets.push(at);
        if let Some(t) = &mut self.ttl {
            t.at.push(NO_TTL);
        }
        let b = self.head_mut(h);
        let next = !*b;
        *b = !idx;
        self.links.push(Link { hash: h, next });
        // Grow like Redis: at one pair per bucket, to the next power of two, not during a resize
        // nor, unless five pairs per bucket, while a fork child shares the pages.
        let (len, nb) = (self.offsets.len(), self.buckets.len());
        if !self.is_rehashing()
            && len > nb
            && (crate::types::table::resize_allowed() || len / nb > crate::types::table::FORCE_RESIZE_RATIO)
        {
            self.start_resize(len.next_power_of_two());
        }
        self.rehash_step(1);
    }

    /// Points whatever links to slab index `from` (a bucket head or a chain predecessor) at `to`.
    fn relink(&mut self, from: u32, to: u32) {
        let h = self.links[from as usize].hash;
        let head = self.head_mut(h);
        if !*head == from {
            *head = !to;
            return;
        }
        let mut p = !*head;
        while p != NIL {
            if self.links[p as usize].next == from {
                self.links[p as usize].next = to;
                return;
            }
            p = self.links[p as usize].next;
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        let Some(i) = self.find(field) else {
            return false;
        };
        self.remove_at(i);
        true
    }

    /// Removes the pair in slab slot `i`; the last slot moves into the hole.
    fn remove_at(&mut self, i: usize) {
        self.clear_expire(i);
        if let Some(t) = &mut self.ttl {
            t.at.swap_remove(i);
        }
        let next = self.links[i].next;
        self.relink(i as u32, next);
        let last = self.offsets.len() - 1;
        if i != last {
            self.relink(last as u32, i as u32);
        }
        self.garbage += pair_at(&self.arena, self.offsets[i]).2;
        self.offsets.swap_remove(i);
        self.links.swap_remove(i);
        self.maybe_compact();
        // Shrink like Redis: when under 10% full, down to the smallest power of two that fits,
        // not during a resize nor while a fork child shares the pages.
        let nb = self.buckets.len();
        if nb > MIN_BUCKETS
            && self.offsets.len() * 10 < nb
            && !self.is_rehashing()
            && crate::types::table::resize_allowed()
        {
            self.start_resize(self.offsets.len().max(MIN_BUCKETS).next_power_of_two());
        }
        self.rehash_step(1);
        if self.offsets.capacity() > 64 && self.offsets.len() * 4 < self.offsets.capacity() {
            self.offsets.shrink_to(self.offsets.len() * 2);
            self.links.shrink_to(self.links.len() * 2);
            if let Some(t) = &mut self.ttl {
                t.at.shrink_to(self.offsets.len() * 2);
            }
        }
    }

    fn expire_of(&self, i: usize) -> i64 {
        self.ttl.as_ref().map_or(NO_TTL, |t| t.at[i])
    }

    fn set_expire(&mut self, i: usize, at: i64) {
        let len = self.offsets.len();
        let t =
            self.ttl.get_or_insert_with(|| Box::new(TableTtl { at: vec![NO_TTL; len], count: 0, min_hint: i64::MAX }));
        if t.at[i] == NO_TTL {
            t.count += 1;
        }
        t.at[i] = at;
        t.min_hint = t.min_hint.min(at);
    }

    /// Drops slot `i`'s expiry; returns whether it had one. The metadata goes with the last one.
    fn clear_expire(&mut self, i: usize) -> bool {
        let Some(t) = &mut self.ttl else {
            return false;
        };
        if t.at[i] == NO_TTL {
            return false;
        }
        t.at[i] = NO_TTL;
        t.count -= 1;
        if t.count == 0 {
            self.ttl = None;
        }
        true
    }

    fn min_expire(&self) -> Option<i64> {
        self.ttl.as_ref().and_then(|t| t.at.iter().copied().filter(|&a| a != NO_TTL).min())
    }

    /// Removes up to `max` fields whose time is `<= now`; returns how many went.
    fn expire_fields(&mut self, now: i64, max: usize) -> usize {
        let Some(t) = &self.ttl else {
            return 0;
        };
        if t.min_hint > now {
            return 0;
        }
        let doomed: Vec<Vec<u8>> =
            t.at.iter()
                .enumerate()
                .filter(|&(_, &a)| a != NO_TTL && a <= now)
                .take(max)
                .map(|(i, _)| self.pair(i).0.to_vec())
                .collect();
        for f in &doomed {
            self.remove(f);
        }
        let min = self.min_expire();
        if let Some(t) = &mut self.ttl {
            t.min_hint = min.unwrap_or(i64::MAX);
        }
        doomed.len()
    }

    fn pair(&self, i: usize) -> (&[u8], &[u8]) {
        let (k, v, _) = pair_at(&self.arena, self.offsets[i]);
        (k, v)
    }

    /// Calls `f` on each pair chained from `head`.
    fn visit_chain<'a>(&'a self, mut i: u32, f: &mut impl FnMut(&'a [u8], &'a [u8])) {
        while i != NIL {
            let (k, v) = self.pair(i as usize);
            f(k, v);
            i = self.links[i as usize].next;
        }
    }

    /// Visits the bucket `cursor` points at and returns the next cursor (0 when the walk is
    /// over), as Redis's dictScan: the reverse-binary cursor stays valid when the table grows or
    /// shrinks between calls, and during a resize the bucket of the smaller array is visited
    /// with every bucket of the bigger one that expands it.
    fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        fn next(v: u64, mask: u64) -> u64 {
            (v | !mask).reverse_bits().wrapping_add(1).reverse_bits()
        }
        let mut v = cursor;
        if !self.is_rehashing() {
            let mask = self.mask() as u64;
            self.visit_chain(!self.buckets[(v & mask) as usize], &mut f);
            return next(v, mask);
        }
        // Buckets of `old` below `rehash_idx` are empty (moved), so visiting both arrays covers
        // every pair wherever it is.
        let old: &[u32] = self.rehash.as_ref().map_or(&[], |r| &r.old);
        let new: &[u32] = &self.buckets;
        let (small, big) = if old.len() <= new.len() { (old, new) } else { (new, old) };
        let (m0, m1) = (small.len() as u64 - 1, big.len() as u64 - 1);
        self.visit_chain(!small[(v & m0) as usize], &mut f);
        loop {
            self.visit_chain(!big[(v & m1) as usize], &mut f);
            v = next(v, m1);
            if v & (m0 ^ m1) == 0 {
                return v;
            }
        }
    }

    /// DEBUG HTSTATS-KEY: each bucket array in Redis's dictGetStats words.
    fn stats(&self) -> String {
        let chain_len = |mut i: u32| {
            let mut n = 0;
            while i != NIL {
                n += 1;
                i = self.links[i as usize].next;
            }
            n
        };
        let mut out = String::new();
        if let Some(r) = &self.rehash {
            crate::types::table::write_stats(&mut out, 0, r.old.iter().map(|&h| chain_len(!h)));
            crate::types::table::write_stats(&mut out, 1, self.buckets.iter().map(|&h| chain_len(!h)));
        } else {
            crate::types::table::write_stats(&mut out, 0, self.buckets.iter().map(|&h| chain_len(!h)));
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// listpackex: the small encoding once a field TTL was set

/// The expiry entry of a field without one.
const NO_TTL: i64 = 0;

fn push_entry(out: &mut Vec<u8>, bytes: &[u8]) {
    push_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// A TTL entry: empty for none (one byte in all), else the unix ms as 8 little-endian bytes.
fn push_ttl(out: &mut Vec<u8>, at: i64) {
    if at == NO_TTL {
        out.push(0);
    } else {
        out.push(8);
        out.extend_from_slice(&at.to_le_bytes());
    }
}

fn ttl_from(entry: &[u8]) -> i64 {
    entry.try_into().map_or(NO_TTL, i64::from_le_bytes)
}

/// One (field, value, ttl) triple of a listpackex buffer with its offsets.
struct LpxTriple<'a> {
    start: usize,
    field: &'a [u8],
    value_at: usize,
    value: &'a [u8],
    ttl_at: usize,
    at: i64,
    end: usize,
}

struct LpxTriples<'a>(LpEntries<'a>);

impl<'a> Iterator for LpxTriples<'a> {
    type Item = LpxTriple<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let (start, field, value_at) = self.0.next()?;
        let (_, value, ttl_at) = self.0.next()?;
        let (_, ttl, end) = self.0.next()?;
        Some(LpxTriple { start, field, value_at, value, ttl_at, at: ttl_from(ttl), end })
    }
}

fn lpx_triples(buf: &[u8]) -> LpxTriples<'_> {
    LpxTriples(lp_entries(buf))
}

fn lpx_find<'a>(buf: &'a [u8], field: &[u8]) -> Option<LpxTriple<'a>> {
    lpx_triples(buf).find(|t| t.field == field)
}

/// Inserts a triple where 7.4 keeps it: fields with a TTL first, by ascending time (a new one
/// goes before the first equal or later one), then fields without one in insertion order.
fn lpx_insert(v: &mut Vec<u8>, field: &[u8], value: &[u8], at: i64) {
    let pos = if at == NO_TTL {
        v.len()
    } else {
        lpx_triples(v).find(|t| t.at == NO_TTL || t.at >= at).map_or(v.len(), |t| t.start)
    };
    let mut enc = Vec::with_capacity(field.len() + value.len() + 14);
    push_entry(&mut enc, field);
    push_entry(&mut enc, value);
    push_ttl(&mut enc, at);
    v.splice(pos..pos, enc);
}

/// Moves `field`'s triple to the position for expiry `at` (the value is kept).
fn lpx_reinsert(v: &mut Vec<u8>, field: &[u8], at: i64) -> bool {
    let Some(t) = lpx_find(v, field) else {
        return false;
    };
    let (start, end, value) = (t.start, t.end, t.value.to_vec());
    v.drain(start..end);
    lpx_insert(v, field, &value, at);
    true
}

/// Pairs of a listpackex buffer.
pub struct LpxPairs<'a>(LpxTriples<'a>);

impl<'a> Iterator for LpxPairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|t| (t.field, t.value))
    }
}

// ---------------------------------------------------------------------------------------------
// Hash

/// The encodings that live behind one more pointer, so that `Hash` stays two words: a plain
/// small hash (the common case) pays nothing for field TTLs.
#[derive(Clone)]
pub enum Boxed {
    /// Triples `[field][value][ttl]`, ordered as `lpx_insert` says (`listpackex`).
    ListpackEx(Box<[u8]>),
    /// The chained table (`hashtable`), with or without field TTLs.
    Table(Table),
}

/// Iterator over a hash's (field, value) pairs, in encoding order.
pub enum Iter<'a> {
    Listpack(LpPairs<'a>),
    ListpackEx(LpxPairs<'a>),
    Table(&'a Arena, std::iter::Flatten<std::slice::Iter<'a, CowVec<usize>>>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Listpack(p) => p.next(),
            Iter::ListpackEx(p) => p.next(),
            Iter::Table(arena, offsets) => offsets.next().map(|&at| {
                let (k, v, _) = pair_at(arena, at);
                (k, v)
            }),
        }
    }
}

impl Hash {
    /// An empty hash in the small encoding.
    pub fn new() -> Hash {
        Hash::default()
    }

    fn table(&self) -> Option<&Table> {
        match self {
            Hash::Boxed(b) => match &**b {
                Boxed::Table(t) => Some(t),
                Boxed::ListpackEx(_) => None,
            },
            Hash::Listpack(_) => None,
        }
    }

    /// DEBUG HTSTATS-KEY's text, when the hash is a hash table.
    pub fn table_stats(&self) -> Option<String> {
        self.table().map(Table::stats)
    }

    /// One rehash step of a resizing table, as Redis takes on each lookup of a resizing dict.
    /// Returns whether a resize is still in progress.
    pub fn rehash_step(&mut self) -> bool {
        match self {
            Hash::Boxed(b) => match &mut **b {
                Boxed::Table(t) => t.rehash_step(1),
                Boxed::ListpackEx(_) => false,
            },
            Hash::Listpack(_) => false,
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::Boxed(b) => match &**b {
                Boxed::ListpackEx(_) => "listpackex",
                Boxed::Table(_) => "hashtable",
            },
        }
    }

    /// Whether the hash is in one of the small encodings (`listpack` or `listpackex`).
    pub fn is_listpack(&self) -> bool {
        self.table().is_none()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(b) => lp_entries(b).count() / 2,
            Hash::Boxed(b) => match &**b {
                Boxed::ListpackEx(b) => lp_entries(b).count() / 3,
                Boxed::Table(t) => t.len(),
            },
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Hash::Listpack(b) => b.is_empty(),
            Hash::Boxed(b) => match &**b {
                Boxed::ListpackEx(b) => b.is_empty(),
                Boxed::Table(t) => t.len() == 0,
            },
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Listpack(b) => lp_find(b, field).map(|f| f.value),
            Hash::Boxed(b) => match &**b {
                Boxed::ListpackEx(b) => lpx_find(b, field).map(|t| t.value),
                Boxed::Table(t) => t.get(field),
            },
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// A snapshot of a hashtable hash for a reply encoded elsewhere (see `types::cow`); None
    /// for the listpack encodings, which are small and encoded in place.
    pub fn snapshot(&mut self) -> Option<HashSnapshot> {
        match self {
            Hash::Boxed(b) => match &mut **b {
                Boxed::Table(t) => Some(t.snapshot()),
                Boxed::ListpackEx(_) => None,
            },
            Hash::Listpack(_) => None,
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        match self {
            Hash::Listpack(b) => Iter::Listpack(LpPairs(lp_entries(b))),
            Hash::Boxed(b) => match &**b {
                Boxed::ListpackEx(b) => Iter::ListpackEx(LpxPairs(lpx_triples(b))),
                Boxed::Table(t) => Iter::Table(&t.arena, t.offsets.iter()),
            },
        }
    }

    /// Converts to the hashtable encoding (no-op when already there); field TTLs come along.
    pub fn convert_to_table(&mut self) {
        let t = match self {
            Hash::Listpack(b) => {
                let pairs: Vec<(&[u8], &[u8])> = LpPairs(lp_entries(b)).collect();
                let mut t = Table::with_capacity(pairs.len());
                for (k, v) in pairs {
                    t.push_new(k, v);
                }
                t
            }
            Hash::Boxed(b) => match &**b {
                Boxed::Table(_) => return,
                Boxed::ListpackEx(b) => {
                    let triples: Vec<LpxTriple> = lpx_triples(b).collect();
                    let mut t = Table::with_capacity(triples.len());
                    for (i, tr) in triples.iter().enumerate() {
                        t.push_new(tr.field, tr.value);
                        if tr.at != NO_TTL {
                            t.set_expire(i, tr.at);
                        }
                    }
                    t
                }
            },
        };
        *self = Hash::Boxed(Box::new(Boxed::Table(t)));
    }

    /// A `listpack` hash becomes `listpackex` (as 7.4 does on the first HEXPIRE-family call, even
    /// when no field ends up with a TTL); other encodings are left alone.
    pub fn prepare_field_expires(&mut self) {
        if let Hash::Listpack(b) = self {
            let mut v = Vec::with_capacity(b.len() + b.len() / 4 + 1);
            for (k, val) in LpPairs(lp_entries(b)) {
                push_entry(&mut v, k);
                push_entry(&mut v, val);
                push_ttl(&mut v, NO_TTL);
            }
            *self = Hash::Boxed(Box::new(Boxed::ListpackEx(v.into_boxed_slice())));
        }
    }

    /// Redis's hashTypeTryConversion: before a write, a small hash becomes a table when any of
    /// the strings about to be written is longer than `max_value`.
    pub fn convert_for_lengths<'a>(&mut self, strings: impl IntoIterator<Item = &'a [u8]>, max_value: usize) {
        if self.is_listpack() && strings.into_iter().any(|s| s.len() > max_value) {
            self.convert_to_table();
        }
    }

    /// Sets `field` to `value`; returns true when the field is new. Writing a field drops its
    /// TTL (7.4's HSET, HINCRBY...). A small hash converts first when either string is longer
    /// than `max_value`, and after the write when it holds more than `max_entries` pairs
    /// (checked on replacements too, as Redis does: a small hash left over from a higher limit
    /// converts on its next write).
    pub fn set(&mut self, field: &[u8], value: &[u8], max_entries: usize, max_value: usize) -> bool {
        if field.len() > max_value || value.len() > max_value {
            self.convert_to_table();
        }
        let (new, len) = match self {
            Hash::Listpack(b) => {
                let mut v = std::mem::take(b).into_vec();
                let new = match lp_find(&v, field) {
                    Some(found) => {
                        let (at, end) = (found.value_at, found.end);
                        let mut enc = Vec::with_capacity(value.len() + 2);
                        push_entry(&mut enc, value);
                        v.splice(at..end, enc);
                        false
                    }
                    None => {
                        v.reserve_exact(field.len() + value.len() + 4);
                        push_entry(&mut v, field);
                        push_entry(&mut v, value);
                        true
                    }
                };
                *b = v.into_boxed_slice();
                (new, lp_entries(b).count() / 2)
            }
            Hash::Boxed(bx) => match &mut **bx {
                Boxed::Table(t) => return t.set(field, value),
                Boxed::ListpackEx(b) => {
                    let mut v = std::mem::take(b).into_vec();
                    let new = match lpx_find(&v, field) {
                        Some(t) if t.at == NO_TTL => {
                            let (at, end) = (t.value_at, t.ttl_at);
                            let mut enc = Vec::with_capacity(value.len() + 2);
                            push_entry(&mut enc, value);
                            v.splice(at..end, enc);
                            false
                        }
                        Some(t) => {
                            // Losing its TTL moves the field behind the ones that keep one.
                            let (start, end) = (t.start, t.end);
                            v.drain(start..end);
                            lpx_insert(&mut v, field, value, NO_TTL);
                            false
                        }
                        None => {
                            lpx_insert(&mut v, field, value, NO_TTL);
                            true
                        }
                    };
                    *b = v.into_boxed_slice();
                    (new, lp_entries(b).count() / 3)
                }
            },
        };
        if len > max_entries {
            self.convert_to_table();
        }
        new
    }

    /// `set` that keeps the field's TTL (7.4's HINCRBY and HINCRBYFLOAT).
    pub fn set_keep_ttl(&mut self, field: &[u8], value: &[u8], max_entries: usize, max_value: usize) -> bool {
        let prev = self.field_expire(field);
        let new = self.set(field, value, max_entries, max_value);
        if let Some(at) = prev {
            self.set_field_expire(field, at);
        }
        new
    }

    /// Removes `field`; returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let (buf, range) = match self {
            Hash::Listpack(b) => {
                let Some(found) = lp_find(b, field) else {
                    return false;
                };
                let range = found.start..found.end;
                (b, range)
            }
            Hash::Boxed(bx) => match &mut **bx {
                Boxed::Table(t) => return t.remove(field),
                Boxed::ListpackEx(b) => {
                    let Some(t) = lpx_find(b, field) else {
                        return false;
                    };
                    let range = t.start..t.end;
                    (b, range)
                }
            },
        };
        let mut v = std::mem::take(buf).into_vec();
        v.drain(range);
        *buf = v.into_boxed_slice();
        true
    }

    /// Random access to pairs by position: the table indexes its slab; a small hash is indexed
    /// once (offsets of each pair) so repeated picks cost O(1).
    pub fn indexed(&self) -> Indexed<'_> {
        match self.table() {
            Some(t) => Indexed::Table(t),
            None => Indexed::Listpack(self.iter().collect()),
        }
    }

    /// One SCAN step. A small hash is returned whole with cursor 0 (as Redis does); a table
    /// visits one bucket per call.
    pub fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        match self.table() {
            Some(t) => t.scan(cursor, f),
            None => {
                for (k, v) in self.iter() {
                    f(k, v);
                }
                0
            }
        }
    }

    /// Bytes of heap this hash holds (rough, for MEMORY USAGE style estimates).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Hash::Listpack(b) => b.len(),
            Hash::Boxed(bx) => {
                std::mem::size_of::<Boxed>()
                    + match &**bx {
                        Boxed::ListpackEx(b) => b.len(),
                        Boxed::Table(t) => {
                            t.arena.capacity()
                                + t.arena.chunks.capacity() * std::mem::size_of::<CowVec<u8>>()
                                + t.offsets.capacity() * std::mem::size_of::<usize>()
                                + t.links.capacity() * std::mem::size_of::<Link>()
                                + (t.buckets.len() + t.rehash.as_ref().map_or(0, |r| r.old.len())) * 4
                                + t.ttl.as_ref().map_or(0, |x| {
                                    std::mem::size_of::<TableTtl>() + x.at.capacity() * std::mem::size_of::<i64>()
                                })
                        }
                    }
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Field TTLs (Redis 7.4). Times are unix ms; a field whose time is `<= now` is expired and
    // must be removed (`expire_fields`) before any command looks at the hash.

    /// Sets the absolute expiry (unix ms) of an existing field; false if the field is absent.
    /// May change the encoding (listpack → listpackex, hashtable keeps per-field metadata).
    /// A time `<= 0` is stored as 1 ms (already past).
    pub fn set_field_expire(&mut self, field: &[u8], at_ms: i64) -> bool {
        let at = at_ms.max(1);
        if let Hash::Listpack(b) = self {
            if lp_find(b, field).is_none() {
                return false;
            }
            self.prepare_field_expires();
        }
        match self {
            Hash::Listpack(_) => false,
            Hash::Boxed(bx) => match &mut **bx {
                Boxed::Table(t) => match t.find(field) {
                    Some(i) => {
                        t.set_expire(i, at);
                        true
                    }
                    None => false,
                },
                Boxed::ListpackEx(b) => {
                    let mut v = std::mem::take(b).into_vec();
                    let found = lpx_reinsert(&mut v, field, at);
                    *b = v.into_boxed_slice();
                    found
                }
            },
        }
    }

    /// The field's absolute expiry, if it has one.
    pub fn field_expire(&self, field: &[u8]) -> Option<i64> {
        let at = match self {
            Hash::Listpack(_) => NO_TTL,
            Hash::Boxed(bx) => match &**bx {
                Boxed::ListpackEx(b) => lpx_find(b, field).map_or(NO_TTL, |t| t.at),
                Boxed::Table(t) => t.find(field).map_or(NO_TTL, |i| t.expire_of(i)),
            },
        };
        (at != NO_TTL).then_some(at)
    }

    /// Removes a field's expiry; false if it had none (or the field is absent).
    pub fn persist_field(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(_) => false,
            Hash::Boxed(bx) => match &mut **bx {
                Boxed::Table(t) => t.find(field).is_some_and(|i| t.clear_expire(i)),
                Boxed::ListpackEx(b) => {
                    if lpx_find(b, field).is_none_or(|t| t.at == NO_TTL) {
                        return false;
                    }
                    let mut v = std::mem::take(b).into_vec();
                    lpx_reinsert(&mut v, field, NO_TTL);
                    *b = v.into_boxed_slice();
                    true
                }
            },
        }
    }

    /// Whether any field carries an expiry (decides HASH_METADATA/LISTPACK_EX on save).
    pub fn has_field_expires(&self) -> bool {
        match self {
            Hash::Listpack(_) => false,
            Hash::Boxed(bx) => match &**bx {
                // Sorted: a TTL anywhere means one on the first triple.
                Boxed::ListpackEx(b) => lpx_triples(b).next().is_some_and(|t| t.at != NO_TTL),
                Boxed::Table(t) => t.ttl.is_some(),
            },
        }
    }

    /// Every (field, at_ms) with an expiry, in no particular order.
    pub fn for_each_field_expire(&self, mut f: impl FnMut(&[u8], i64)) {
        match self {
            Hash::Listpack(_) => {}
            Hash::Boxed(bx) => match &**bx {
                Boxed::ListpackEx(b) => {
                    for t in lpx_triples(b).take_while(|t| t.at != NO_TTL) {
                        f(t.field, t.at);
                    }
                }
                Boxed::Table(t) => {
                    if let Some(x) = &t.ttl {
                        for (i, &at) in x.at.iter().enumerate() {
                            if at != NO_TTL {
                                f(t.pair(i).0, at);
                            }
                        }
                    }
                }
            },
        }
    }

    /// The earliest field expiry, for active expiry. O(1) for a small hash, a pass over the
    /// times for a table.
    pub fn min_field_expire(&self) -> Option<i64> {
        match self {
            Hash::Listpack(_) => None,
            Hash::Boxed(bx) => match &**bx {
                Boxed::ListpackEx(b) => lpx_triples(b).next().map(|t| t.at).filter(|&at| at != NO_TTL),
                Boxed::Table(t) => t.min_expire(),
            },
        }
    }

    /// O(1): a time no later than the earliest field expiry (exact for a small hash; for a
    /// table exact after an expiry pass), for scheduling active expiry.
    pub fn field_expire_hint(&self) -> Option<i64> {
        match self {
            Hash::Listpack(_) => None,
            Hash::Boxed(bx) => match &**bx {
                Boxed::ListpackEx(_) => self.min_field_expire(),
                Boxed::Table(t) => t.ttl.as_ref().map(|x| x.min_hint),
            },
        }
    }

    /// O(1): whether some field may be due at `now` (exact for a small hash; a table may answer
    /// true once after a persist or a delete, and a pass then makes it exact again).
    pub fn field_expiry_due(&self, now_ms: i64) -> bool {
        match self {
            Hash::Listpack(_) => false,
            Hash::Boxed(bx) => match &**bx {
                Boxed::ListpackEx(b) => lpx_triples(b).next().is_some_and(|t| t.at != NO_TTL && t.at <= now_ms),
                Boxed::Table(t) => t.ttl.as_ref().is_some_and(|x| x.min_hint <= now_ms),
            },
        }
    }

    /// Removes up to `max` fields whose expiry is `<= now_ms`; returns how many were removed.
    /// The hash may be left empty (the caller deletes the key).
    pub fn expire_fields(&mut self, now_ms: i64, max: usize) -> usize {
        if !self.field_expiry_due(now_ms) {
            return 0;
        }
        match self {
            Hash::Listpack(_) => 0,
            Hash::Boxed(bx) => match &mut **bx {
                Boxed::Table(t) => t.expire_fields(now_ms, max),
                Boxed::ListpackEx(b) => {
                    // Sorted by time: the expired ones are a prefix.
                    let mut n = 0;
                    let mut cut = 0;
                    for t in lpx_triples(b) {
                        if n == max || t.at == NO_TTL || t.at > now_ms {
                            break;
                        }
                        n += 1;
                        cut = t.end;
                    }
                    let mut v = std::mem::take(b).into_vec();
                    v.drain(..cut);
                    *b = v.into_boxed_slice();
                    n
                }
            },
        }
    }
}

/// Pairs addressable by position (see `Hash::indexed`).
pub enum Indexed<'a> {
    Listpack(Vec<(&'a [u8], &'a [u8])>),
    Table(&'a Table),
}

impl Indexed<'_> {
    pub fn len(&self) -> usize {
        match self {
            Indexed::Listpack(v) => v.len(),
            Indexed::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pair at position `i < len()`.
    pub fn pair(&self, i: usize) -> (&[u8], &[u8]) {
        match self {
            Indexed::Listpack(v) => v[i],
            Indexed::Table(t) => t.pair(i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    /// A snapshot keeps the pairs and their order while the hash is written: same-length
    /// overwrites in place, removals (slab swaps), growth and a compaction.
    #[test]
    fn snapshot_is_the_hash_when_taken() {
        let mut h = Hash::default();
        for i in 0..150_000 {
            h.set(format!("f:{i}").as_bytes(), format!("v:{i:06}").as_bytes(), 128, 64);
        }
        let pairs = |h: &Hash| h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect::<Vec<_>>();
        let before = pairs(&h);
        let snap = h.snapshot().expect("a table");
        let read = |snap: &HashSnapshot| {
            let mut v = Vec::new();
            snap.for_each(|k, val| v.push((k.to_vec(), val.to_vec())));
            v
        };
        for i in 0..70_000 {
            h.set(format!("f:{i}").as_bytes(), format!("w:{i:06}").as_bytes(), 128, 64);
            h.remove(format!("f:{}", 149_999 - i).as_bytes());
            h.set(format!("g:{i}").as_bytes(), b"x", 128, 64);
        }
        assert_eq!(read(&snap), before);
        // Longer values leave garbage until the arena is compacted.
        for i in 0..70_000 {
            h.set(format!("f:{i}").as_bytes(), format!("longer-value:{i}").as_bytes(), 128, 64);
        }
        assert_eq!(read(&snap), before);
        assert_eq!(snap.len(), 150_000);
        drop(snap);
        assert_eq!(h.get(b"f:5"), Some(&b"longer-value:5"[..]));
        assert_eq!(h.get(b"f:149999"), None);
        assert_eq!(h.len(), 150_000);
    }

    #[test]
    fn enum_stays_small() {
        // Field TTLs cost a plain hash nothing: the small encoding is still one boxed slice,
        // and a table pays one pointer (`ttl`) until a field gets a TTL.
        assert_eq!(std::mem::size_of::<Hash>(), 16);
        assert_eq!(std::mem::size_of::<Boxed>(), std::mem::size_of::<Table>());
        assert_eq!(std::mem::size_of::<Option<Box<TableTtl>>>(), 8);
        // 120 bytes before field TTLs, 128 now: the same jemalloc size class.
        assert!(std::mem::size_of::<Table>() <= 128);
    }

    #[test]
    fn varints_round_trip() {
        for n in [0usize, 1, 127, 128, 300, 16383, 16384, 1 << 30] {
            let mut v = Vec::new();
            push_len(&mut v, n);
            assert_eq!(v.len(), varint::len(n as u64));
            assert_eq!(read_len(&v, 0), (n, v.len()));
        }
    }

    #[test]
    fn converts_at_limits() {
        let mut h = Hash::new();
        for i in 0..4 {
            assert!(h.set(format!("f{i}").as_bytes(), b"v", 4, 8));
        }
        assert_eq!(h.encoding_name(), "listpack");
        assert!(h.set(b"f4", b"v", 4, 8));
        assert_eq!(h.encoding_name(), "hashtable");
        let mut h = Hash::new();
        h.set(b"a", b"12345678", 4, 8);
        assert_eq!(h.encoding_name(), "listpack");
        h.set(b"a", b"123456789", 4, 8);
        assert_eq!(h.encoding_name(), "hashtable");
        assert_eq!(h.get(b"a"), Some(&b"123456789"[..]));
        // Replacing never counts as a new pair.
        let mut h = Hash::new();
        for _ in 0..10 {
            h.set(b"x", b"y", 1, 8);
        }
        assert_eq!(h.encoding_name(), "listpack");
        // A hash over a since-lowered limit converts on a replacement too.
        h.set(b"z", b"y", 2, 8);
        assert_eq!(h.encoding_name(), "listpack");
        assert!(!h.set(b"x", b"w", 1, 8));
        assert_eq!(h.encoding_name(), "hashtable");
        assert_eq!(h.get(b"x"), Some(&b"w"[..]));
    }

    /// Random operations under both encodings, compared with a HashMap.
    #[test]
    fn model_check() {
        for &(entries, limit) in &[(1000usize, 1000usize), (0, 0), (16, 300)] {
            let mut rng = fastrand::Rng::with_seed(7);
            let mut h = Hash::new();
            let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            for step in 0..20000 {
                let k = format!("k{}", rng.usize(..400)).into_bytes();
                match rng.u8(..10) {
                    0..=5 => {
                        let vlen = rng.usize(..200);
                        let v: Vec<u8> = (0..vlen).map(|_| rng.u8(..)).collect();
                        let new = h.set(&k, &v, entries, limit);
                        assert_eq!(new, model.insert(k, v).is_none());
                    }
                    6..=8 => assert_eq!(h.remove(&k), model.remove(&k).is_some()),
                    _ => assert_eq!(h.get(&k), model.get(&k).map(|v| &v[..])),
                }
                if step % 997 == 0 {
                    assert_eq!(h.len(), model.len());
                    let seen: HashMap<Vec<u8>, Vec<u8>> = h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
                    assert_eq!(seen, model);
                    let ix = h.indexed();
                    assert_eq!(ix.len(), model.len());
                    for i in 0..ix.len() {
                        let (k, v) = ix.pair(i);
                        assert_eq!(model.get(k).map(|v| &v[..]), Some(v));
                    }
                }
            }
            assert_eq!(h.len(), model.len());
        }
    }

    #[test]
    fn rewrites_keep_the_arena_bounded() {
        let mut h = Hash::new();
        for i in 0..300 {
            h.set(format!("f{i}").as_bytes(), b"v", 128, 64);
        }
        for round in 0..20000usize {
            let v = vec![b'x'; 1 + round % 40];
            h.set(format!("f{}", round % 300).as_bytes(), &v, 128, 64);
        }
        let Some(t) = h.table() else { panic!("expected a table") };
        let live: usize = h.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        assert!(t.arena.used - t.garbage == live);
        assert!(t.arena.used <= 2 * live + 64, "used {} live {}", t.arena.used, live);
        assert_eq!(h.len(), 300);
    }

    fn is_rehashing(h: &Hash) -> bool {
        h.table().is_some_and(Table::is_rehashing)
    }

    /// Internal invariants: every slab index sits in exactly the chain its hash selects (the old
    /// array's bucket until that bucket moved) and moved old buckets are empty.
    fn check_table(h: &Hash) {
        let t = h.table().unwrap();
        let mut seen = vec![false; t.len()];
        let (old, idx): (&[u32], usize) = t.rehash.as_ref().map_or((&[], 0), |r| (&r.old, r.idx));
        for (ai, arr) in [old, &t.buckets].into_iter().enumerate() {
            for (b, &stored) in arr.iter().enumerate() {
                let head = !stored;
                if ai == 0 && b < idx {
                    assert_eq!(head, NIL);
                }
                let mut i = head;
                while i != NIL {
                    assert!(std::ptr::eq(t.head_ref(t.links[i as usize].hash), &arr[b]));
                    assert!(!std::mem::replace(&mut seen[i as usize], true));
                    i = t.links[i as usize].next;
                }
            }
        }
        assert!(seen.iter().all(|&x| x));
    }

    /// Random sets and removals that grow and shrink the table many times, checked against a
    /// model and the invariants while resizes are in progress.
    #[test]
    fn resizes_incrementally_under_random_ops() {
        fastrand::seed(21);
        let mut h = Hash::new();
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let (mut mid, mut resizes, mut was) = (0, 0, false);
        for round in 0..150_000u32 {
            let growing = (round / 20_000) % 2 == 0;
            let f = format!("f:{}", fastrand::u32(..15_000)).into_bytes();
            let v = format!("{round}").into_bytes();
            if fastrand::u8(..100) < if growing { 70 } else { 15 } {
                assert_eq!(h.set(&f, &v, 0, 0), model.insert(f.clone(), v).is_none());
            } else {
                assert_eq!(h.remove(&f), model.remove(&f).is_some());
            }
            if fastrand::u8(..4) == 0 {
                h.rehash_step();
            }
            assert_eq!(h.len(), model.len());
            let now = is_rehashing(&h);
            resizes += usize::from(now && !was);
            was = now;
            if round % 499 == 0 && !h.is_listpack() {
                check_table(&h);
                mid += usize::from(now);
                let f = format!("f:{}", fastrand::u32(..15_000)).into_bytes();
                assert_eq!(h.get(&f), model.get(&f).map(|v| &v[..]));
            }
        }
        let got: HashMap<Vec<u8>, Vec<u8>> = h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(got, model);
        assert!(resizes >= 8 && mid >= 5, "resizes {resizes} checked mid-resize {mid}");
    }

    /// HSCAN from a table frozen mid-resize returns each field exactly once, and the stats show
    /// both arrays in Redis's words.
    #[test]
    fn scan_and_stats_mid_resize() {
        let mut h = Hash::new();
        let mut n = 0;
        while n < 3000 || !is_rehashing(&h) {
            h.set(format!("k{n}").as_bytes(), b"v", 0, 0);
            n += 1;
        }
        let mut all = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = h.scan(cursor, |k, _| all.push(k.to_vec()));
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(all.len(), n);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        let stats = h.table_stats().unwrap();
        // Grown at 2049 fields, the move from 2048 to 4096 buckets is still going at 3000.
        assert!(stats.starts_with("Hash table 0 stats (main hash table):\n table size: 2048\n"), "{stats}");
        assert!(stats.contains("Hash table 1 stats (rehashing target):\n table size: 4096\n"), "{stats}");
        while h.rehash_step() {}
        let stats = h.table_stats().unwrap();
        assert!(stats.starts_with(&format!(
            "Hash table 0 stats (main hash table):\n table size: 4096\n number of elements: {n}\n"
        )));
        assert!(!stats.contains("rehashing target"));
    }

    #[test]
    fn scan_visits_every_stable_field_across_resizes() {
        let mut h = Hash::new();
        for i in 0..1000 {
            h.set(format!("s{i}").as_bytes(), b"v", 0, 0);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = h.scan(cursor, |k, _| {
                seen.insert(k.to_vec());
            });
            // Grow and shrink the table while the walk is in progress.
            step += 1;
            if step == 50 {
                for i in 0..5000 {
                    h.set(format!("t{i}").as_bytes(), b"v", 0, 0);
                }
            }
            if step == 400 {
                for i in 0..5000 {
                    h.remove(format!("t{i}").as_bytes());
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000 {
            assert!(seen.contains(format!("s{i}").as_bytes()), "missed s{i}");
        }
    }

    /// Random operations including field TTLs, under every encoding path, against a model
    /// field → (value, expiry). Expiry passes run at a moving "now".
    #[test]
    fn model_check_with_field_ttls() {
        type Model = HashMap<Vec<u8>, (Vec<u8>, Option<i64>)>;
        for &(entries, limit) in &[(1000usize, 1000usize), (0, 0), (16, 300), (128, 64)] {
            let mut rng = fastrand::Rng::with_seed(11);
            let mut h = Hash::new();
            let mut model: Model = HashMap::new();
            let mut now = 1_000i64;
            for step in 0..30000 {
                let k = format!("k{}", rng.usize(..300)).into_bytes();
                match rng.u8(..16) {
                    0..=4 => {
                        let vlen = rng.usize(..100);
                        let v: Vec<u8> = (0..vlen).map(|_| rng.u8(..)).collect();
                        let new = h.set(&k, &v, entries, limit);
                        assert_eq!(new, model.insert(k, (v, None)).is_none());
                    }
                    5..=6 => assert_eq!(h.remove(&k), model.remove(&k).is_some()),
                    7..=9 => {
                        let at = now + rng.i64(1..200);
                        let had = model.get_mut(&k).map(|e| e.1 = Some(at)).is_some();
                        assert_eq!(h.set_field_expire(&k, at), had);
                    }
                    10 => {
                        let had = model.get_mut(&k).and_then(|e| e.1.take()).is_some();
                        assert_eq!(h.persist_field(&k), had);
                    }
                    11 => {
                        now += rng.i64(0..20);
                        let before = model.len();
                        model.retain(|_, e| e.1.is_none_or(|at| at > now));
                        let n = h.expire_fields(now, usize::MAX);
                        assert_eq!(n, before - model.len(), "step {step}");
                        assert!(!h.field_expiry_due(now));
                    }
                    12 => h.prepare_field_expires(),
                    13 => assert_eq!(h.field_expire(&k), model.get(&k).and_then(|e| e.1)),
                    _ => assert_eq!(h.get(&k), model.get(&k).map(|e| &e.0[..])),
                }
                if step % 499 == 0 {
                    assert_eq!(h.len(), model.len());
                    let seen: Model = h.iter().map(|(k, v)| (k.to_vec(), (v.to_vec(), h.field_expire(k)))).collect();
                    assert_eq!(seen, model);
                    let mut ttls = HashMap::new();
                    h.for_each_field_expire(|f, at| {
                        ttls.insert(f.to_vec(), at);
                    });
                    let want: HashMap<Vec<u8>, i64> =
                        model.iter().filter_map(|(k, e)| e.1.map(|at| (k.clone(), at))).collect();
                    assert_eq!(ttls, want);
                    assert_eq!(h.has_field_expires(), !want.is_empty());
                    assert_eq!(h.min_field_expire(), want.values().min().copied());
                    let ix = h.indexed();
                    assert_eq!(ix.len(), model.len());
                    let mut n = 0;
                    let mut cursor = 0;
                    loop {
                        cursor = h.scan(cursor, |_, _| n += 1);
                        if cursor == 0 {
                            break;
                        }
                    }
                    assert_eq!(n, model.len());
                }
            }
        }
    }

    /// listpackex keeps 7.4's order: fields with a TTL by ascending time, then the rest in
    /// insertion order; HSET on a field with a TTL drops it and moves the field to the end.
    #[test]
    fn listpackex_order_and_encoding() {
        let mut h = Hash::new();
        for f in ["a", "b", "c", "d"] {
            h.set(f.as_bytes(), b"v", 128, 64);
        }
        assert_eq!(h.encoding_name(), "listpack");
        assert!(!h.set_field_expire(b"zz", 5));
        assert_eq!(h.encoding_name(), "listpack");
        h.prepare_field_expires();
        assert_eq!(h.encoding_name(), "listpackex");
        assert!(!h.has_field_expires());
        assert!(h.set_field_expire(b"c", 300));
        assert!(h.set_field_expire(b"d", 200));
        assert!(h.set_field_expire(b"b", 300));
        let order = |h: &Hash| h.iter().map(|(k, _)| String::from_utf8_lossy(k).into_owned()).collect::<Vec<_>>();
        assert_eq!(order(&h), ["d", "b", "c", "a"]);
        assert!(!h.set(b"b", b"w", 128, 64));
        assert_eq!(order(&h), ["d", "c", "a", "b"]);
        assert_eq!(h.field_expire(b"b"), None);
        assert!(h.persist_field(b"d"));
        assert!(!h.persist_field(b"d"));
        assert_eq!(order(&h), ["c", "a", "b", "d"]);
        assert_eq!(h.min_field_expire(), Some(300));
        assert_eq!(h.expire_fields(299, usize::MAX), 0);
        assert_eq!(h.expire_fields(300, usize::MAX), 1);
        assert_eq!(h.len(), 3);
        // Still listpackex without TTLs, as in 7.4; a long value converts with TTLs kept.
        assert_eq!(h.encoding_name(), "listpackex");
        h.set_field_expire(b"a", 500);
        h.set(b"x", &[b'y'; 100], 128, 64);
        assert_eq!(h.encoding_name(), "hashtable");
        assert_eq!(h.field_expire(b"a"), Some(500));
        assert_eq!(h.get(b"x"), Some(&[b'y'; 100][..]));
        // Entry-count conversion too.
        let mut h = Hash::new();
        h.set(b"a", b"1", 2, 64);
        h.set_field_expire(b"a", 42);
        h.set(b"b", b"2", 2, 64);
        h.set(b"c", b"3", 2, 64);
        assert_eq!(h.encoding_name(), "hashtable");
        assert_eq!(h.field_expire(b"a"), Some(42));
        assert_eq!(h.expire_fields(42, 1), 1);
        assert!(!h.has_field_expires());
    }

    /// A table drops its TTL metadata with the last TTL, and the common case pays nothing.
    #[test]
    fn table_ttl_metadata_is_lazy() {
        let mut h = Hash::new();
        for i in 0..200 {
            h.set(format!("f{i}").as_bytes(), b"v", 128, 64);
        }
        let plain = h.heap_bytes();
        h.set_field_expire(b"f3", 1000);
        assert!(h.heap_bytes() > plain);
        assert!(h.field_expiry_due(1000));
        h.persist_field(b"f3");
        assert!(!h.has_field_expires());
        assert_eq!(h.heap_bytes(), plain);
        // Removing a field with a TTL keeps the slab and the times in step.
        h.set_field_expire(b"f0", 10);
        h.set_field_expire(b"f199", 20);
        h.remove(b"f0");
        assert_eq!(h.field_expire(b"f199"), Some(20));
        assert_eq!(h.expire_fields(15, usize::MAX), 0);
        assert_eq!(h.expire_fields(20, usize::MAX), 1);
        assert_eq!(h.len(), 198);
    }
}
