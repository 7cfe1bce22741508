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
//!   slab slot into the hole. Resizing rebuilds the bucket array from the stored hashes in one
//!   sequential pass (no key is re-read or re-hashed): a pause of a few milliseconds per million
//!   fields, paid only at each doubling, instead of Redis's incremental rehash. SCAN keeps
//!   Redis's guarantee because buckets are chained on a single power-of-two table and the cursor
//!   walks them in reverse-binary order, which stays valid when the table grows or shrinks
//!   between calls (slab moves never change a field's bucket).
//!
//! Conversion follows 7.0: listpack → hashtable when a pair would exceed
//! `hash-max-listpack-entries` or a field/value is longer than `hash-max-listpack-value`; never
//! back. The limits come in as plain numbers: this module knows nothing of config or commands.

use std::hash::BuildHasher;

/// A Redis hash.
#[derive(Clone)]
pub enum Hash {
    /// Pairs packed in one buffer (`OBJECT ENCODING` says `listpack`).
    Listpack(Box<[u8]>),
    /// The chained table (`hashtable`).
    Table(Box<Table>),
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
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

// ---------------------------------------------------------------------------------------------
// listpack helpers

fn push_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a length at `pos`; returns (length, position after it). The buffer is ours, so it is
/// well formed; a truncated one reads as an empty tail rather than panicking.
fn read_varint(buf: &[u8], mut pos: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    while let Some(&b) = buf.get(pos) {
        pos += 1;
        n |= ((b & 0x7f) as usize) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (n, pos)
}

#[cfg(test)]
fn varint_len(n: usize) -> usize {
    let mut len = 1;
    let mut n = n >> 7;
    while n > 0 {
        len += 1;
        n >>= 7;
    }
    len
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
        let (len, data) = read_varint(self.buf, start);
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
    offsets: Vec<usize>,
    /// Parallel to `offsets`: the field's hash and the next slab index in its bucket's chain.
    links: Vec<Link>,
    /// Head slab index of each bucket's chain (`NIL` when empty); the length is a power of two.
    buckets: Vec<u32>,
    state: foldhash::fast::RandomState,
}

/// Pair storage for the table: chunks that are never reallocated, so growing a big hash copies
/// nothing and frees nothing (a doubling `Vec` would leave its old buffers as dirty pages).
/// A chunk gets a quarter of the bytes stored so far (256 B to 1 MiB), so the unused tail is
/// small for hashes of any size. A position is `chunk << 32 | offset in chunk`.
#[derive(Clone, Default)]
pub struct Arena {
    chunks: Vec<Vec<u8>>,
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
            self.chunks.push(Vec::with_capacity(cap));
        }
        let ci = self.chunks.len() - 1;
        let chunk = &mut self.chunks[ci];
        let at = chunk.len();
        push_varint(chunk, field.len());
        push_varint(chunk, value.len());
        chunk.extend_from_slice(field);
        chunk.extend_from_slice(value);
        self.used += chunk.len() - at;
        (ci << 32) | at
    }

    fn chunk(&self, pos: usize) -> (&[u8], usize) {
        (self.chunks.get(pos >> 32).map_or(&[][..], |c| &c[..]), pos & 0xffff_ffff)
    }

    fn bytes_mut(&mut self, pos: usize) -> (&mut [u8], usize) {
        (self.chunks.get_mut(pos >> 32).map_or(&mut [][..], |c| &mut c[..]), pos & 0xffff_ffff)
    }

    fn capacity(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity()).sum()
    }
}

/// Decodes the pair at `pos`: (field, value, bytes the pair occupies).
fn pair_at(arena: &Arena, pos: usize) -> (&[u8], &[u8], usize) {
    let (buf, at) = arena.chunk(pos);
    let (flen, p) = read_varint(buf, at);
    let (vlen, p) = read_varint(buf, p);
    let fend = (p + flen).min(buf.len());
    let vend = (fend + vlen).min(buf.len());
    (&buf[p..fend], &buf[fend..vend], vend - at.min(vend))
}

impl Table {
    fn with_capacity(n: usize) -> Table {
        let nb = n.max(MIN_BUCKETS).next_power_of_two();
        Table {
            arena: Arena::default(),
            garbage: 0,
            offsets: Vec::with_capacity(n),
            links: Vec::with_capacity(n),
            buckets: vec![NIL; nb],
            state: foldhash::fast::RandomState::default(),
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

    fn find(&self, field: &[u8]) -> Option<usize> {
        let h = self.hash(field);
        let mut i = self.buckets[h as usize & self.mask()];
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

    /// Rebuilds the bucket array at `nb` buckets from the stored hashes.
    fn rebuild(&mut self, nb: usize) {
        self.buckets.clear();
        self.buckets.resize(nb, NIL);
        self.buckets.shrink_to_fit();
        let mask = nb - 1;
        for (i, link) in self.links.iter_mut().enumerate() {
            let b = &mut self.buckets[link.hash as usize & mask];
            link.next = *b;
            *b = i as u32;
        }
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
        let mask = self.mask();
        let b = &mut self.buckets[h as usize & mask];
        self.links.push(Link { hash: h, next: *b });
        *b = idx;
        if self.offsets.len() > self.buckets.len() {
            self.rebuild(self.buckets.len() * 2);
        }
    }

    /// Points whatever links to slab index `from` (a bucket head or a chain predecessor) at `to`.
    fn relink(&mut self, from: u32, to: u32) {
        let b = self.links[from as usize].hash as usize & self.mask();
        if self.buckets[b] == from {
            self.buckets[b] = to;
            return;
        }
        let mut p = self.buckets[b];
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
        // Shrink like Redis: when under 10% full, down to the smallest power of two that fits.
        let nb = self.buckets.len();
        if nb > MIN_BUCKETS && self.offsets.len() * 10 < nb {
            self.rebuild(self.offsets.len().max(MIN_BUCKETS).next_power_of_two());
        }
        if self.offsets.capacity() > 64 && self.offsets.len() * 4 < self.offsets.capacity() {
            self.offsets.shrink_to(self.offsets.len() * 2);
            self.links.shrink_to(self.links.len() * 2);
        }
        true
    }

    fn pair(&self, i: usize) -> (&[u8], &[u8]) {
        let (k, v, _) = pair_at(&self.arena, self.offsets[i]);
        (k, v)
    }

    /// Visits the bucket `cursor` points at and returns the next cursor (0 when the walk is over).
    fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        let mask = self.mask() as u64;
        let mut i = self.buckets[(cursor & mask) as usize];
        while i != NIL {
            let (k, v) = self.pair(i as usize);
            f(k, v);
            i = self.links[i as usize].next;
        }
        // Increment the reversed cursor over the unmasked high bits (Redis's scan order).
        let mut v = cursor | !mask;
        v = v.reverse_bits();
        v = v.wrapping_add(1);
        v.reverse_bits()
    }
}

// ---------------------------------------------------------------------------------------------
// Hash

/// Iterator over a hash's (field, value) pairs, in encoding order.
pub enum Iter<'a> {
    Listpack(LpPairs<'a>),
    Table(&'a Arena, std::slice::Iter<'a, usize>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Listpack(p) => p.next(),
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

    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    pub fn is_listpack(&self) -> bool {
        matches!(self, Hash::Listpack(_))
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(b) => lp_entries(b).count() / 2,
            Hash::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Hash::Listpack(b) => b.is_empty(),
            Hash::Table(t) => t.len() == 0,
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self {
            Hash::Listpack(b) => lp_find(b, field).map(|f| f.value),
            Hash::Table(t) => t.get(field),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    pub fn iter(&self) -> Iter<'_> {
        match self {
            Hash::Listpack(b) => Iter::Listpack(LpPairs(lp_entries(b))),
            Hash::Table(t) => Iter::Table(&t.arena, t.offsets.iter()),
        }
    }

    /// Converts to the hashtable encoding (no-op when already there).
    pub fn convert_to_table(&mut self) {
        if let Hash::Listpack(b) = self {
            let pairs: Vec<(&[u8], &[u8])> = LpPairs(lp_entries(b)).collect();
            let mut t = Table::with_capacity(pairs.len());
            for (k, v) in pairs {
                t.push_new(k, v);
            }
            *self = Hash::Table(Box::new(t));
        }
    }

    /// Redis's hashTypeTryConversion: before a write, a small hash becomes a table when any of
    /// the strings about to be written is longer than `max_value`.
    pub fn convert_for_lengths<'a>(&mut self, strings: impl IntoIterator<Item = &'a [u8]>, max_value: usize) {
        if self.is_listpack() && strings.into_iter().any(|s| s.len() > max_value) {
            self.convert_to_table();
        }
    }

    /// Sets `field` to `value`; returns true when the field is new. A small hash converts first
    /// when either string is longer than `max_value`, and after the write when it holds more than
    /// `max_entries` pairs (checked on replacements too, as Redis does: a small hash left over from
    /// a higher limit converts on its next write).
    pub fn set(&mut self, field: &[u8], value: &[u8], max_entries: usize, max_value: usize) -> bool {
        if field.len() > max_value || value.len() > max_value {
            self.convert_to_table();
        }
        match self {
            Hash::Table(t) => t.set(field, value),
            Hash::Listpack(b) => {
                let mut v = std::mem::take(b).into_vec();
                let new = match lp_find(&v, field) {
                    Some(found) => {
                        let (at, end) = (found.value_at, found.end);
                        let mut enc = Vec::with_capacity(value.len() + 2);
                        push_varint(&mut enc, value.len());
                        enc.extend_from_slice(value);
                        v.splice(at..end, enc);
                        false
                    }
                    None => {
                        v.reserve_exact(field.len() + value.len() + 4);
                        push_varint(&mut v, field.len());
                        v.extend_from_slice(field);
                        push_varint(&mut v, value.len());
                        v.extend_from_slice(value);
                        true
                    }
                };
                *b = v.into_boxed_slice();
                if lp_entries(b).count() / 2 > max_entries {
                    self.convert_to_table();
                }
                new
            }
        }
    }

    /// Removes `field`; returns whether it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Table(t) => t.remove(field),
            Hash::Listpack(b) => {
                let Some(found) = lp_find(b, field) else {
                    return false;
                };
                let (start, end) = (found.start, found.end);
                let mut v = std::mem::take(b).into_vec();
                v.drain(start..end);
                *b = v.into_boxed_slice();
                true
            }
        }
    }

    /// Random access to pairs by position: the table indexes its slab; a small hash is indexed
    /// once (offsets of each pair) so repeated picks cost O(1).
    pub fn indexed(&self) -> Indexed<'_> {
        match self {
            Hash::Table(t) => Indexed::Table(t),
            Hash::Listpack(b) => Indexed::Listpack(LpPairs(lp_entries(b)).collect()),
        }
    }

    /// One SCAN step. A small hash is returned whole with cursor 0 (as Redis does); a table
    /// visits one bucket per call.
    pub fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        match self {
            Hash::Listpack(b) => {
                for (k, v) in LpPairs(lp_entries(b)) {
                    f(k, v);
                }
                0
            }
            Hash::Table(t) => t.scan(cursor, f),
        }
    }

    /// Bytes of heap this hash holds (rough, for MEMORY USAGE style estimates).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Hash::Listpack(b) => b.len(),
            Hash::Table(t) => {
                t.arena.capacity()
                    + t.arena.chunks.capacity() * std::mem::size_of::<Vec<u8>>()
                    + t.offsets.capacity() * std::mem::size_of::<usize>()
                    + t.links.capacity() * std::mem::size_of::<Link>()
                    + t.buckets.capacity() * 4
            }
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

    #[test]
    fn enum_stays_small() {
        assert_eq!(std::mem::size_of::<Hash>(), 16);
    }

    #[test]
    fn varints_round_trip() {
        for n in [0usize, 1, 127, 128, 300, 16383, 16384, 1 << 30] {
            let mut v = Vec::new();
            push_varint(&mut v, n);
            assert_eq!(v.len(), varint_len(n));
            assert_eq!(read_varint(&v, 0), (n, v.len()));
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
        let Hash::Table(t) = &h else { panic!("expected a table") };
        let live: usize = h.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        assert!(t.arena.used - t.garbage == live);
        assert!(t.arena.used <= 2 * live + 64, "used {} live {}", t.arena.used, live);
        assert_eq!(h.len(), 300);
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
}
