//! The Set value type and its two encodings, as Redis 7.0 has them (no listpack sets in 7.0):
//!
//! - `intset`: sorted distinct integers packed little-endian at one width (2, 4 or 8 bytes), the
//!   width upgraded for the whole set when a wider value arrives and never downgraded. Up to 20
//!   bytes live inline in the `Set` itself (ten 16-bit members), so a small set costs one
//!   allocation. Used while every member is a canonical integer (Redis's string2ll rules) and the
//!   count stays within set-max-intset-entries.
//! - `hashtable` (`BigSet`): members stored inline, back to back, in an arena of byte chunks
//!   (a varint header per entry, no per-member allocation), indexed by a `SlotIndex`
//!   (`types::slot_index`: open addressing over arena locations, resized incrementally as Redis's
//!   dict is, SCAN with Redis's guarantee across resizes, DEBUG HTSTATS-KEY in Redis's words).
//!   Whole-set walks (SMEMBERS) read the arena sequentially, which is what makes a
//!   2.6M-member reply fast. Removed entries are marked dead in the arena and compacted away
//!   once they outweigh the live ones. The memory per member is a slot per member at 0.4-0.8
//!   load plus the arena bytes. 7.0 never converts a hashtable set back to an intset, and
//!   neither does this.
//!
//! This module knows nothing of commands or replies; conversion limits come in as plain numbers.

use std::hash::BuildHasher;

use std::sync::Arc;

use super::cow::CowVec;
use super::slot_index::{self, SlotIndex, Slots};
use crate::util::num::parse_i64;

/// One member as the set holds it: an integer (intset) or bytes (hashtable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Elem<'_> {
    /// Calls `f` with the member's string form (integers formatted on the stack).
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Elem::Int(v) => f(itoa::Buffer::new().format(v).as_bytes()),
            Elem::Str(s) => f(s),
        }
    }

    pub fn to_vec(self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }
}

// ---------------------------------------------------------------------------------------------
// intset

// 44 bytes makes a Set 48 bytes, one jemalloc size class: ten 32-bit members (a typical set of
// ids) live in the set's own allocation instead of a second one.
const INLINE: usize = 44;

/// Sorted distinct integers at one width.
#[derive(Clone)]
enum IntSet {
    Inline { width: u8, len: u8, buf: [u8; INLINE] },
    Heap { width: u8, data: Box<[u8]> },
}

fn width_for(v: i64) -> u8 {
    if v >= i16::MIN as i64 && v <= i16::MAX as i64 {
        2
    } else if v >= i32::MIN as i64 && v <= i32::MAX as i64 {
        4
    } else {
        8
    }
}

fn read_at(bytes: &[u8], width: u8, i: usize) -> i64 {
    let w = width as usize;
    let b = &bytes[i * w..i * w + w];
    match width {
        2 => i16::from_le_bytes([b[0], b[1]]) as i64,
        4 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
        _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
    }
}

fn push_at(out: &mut Vec<u8>, width: u8, v: i64) {
    match width {
        2 => out.extend_from_slice(&(v as i16).to_le_bytes()),
        4 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        _ => out.extend_from_slice(&v.to_le_bytes()),
    }
}

impl IntSet {
    fn new() -> Self {
        IntSet::Inline { width: 2, len: 0, buf: [0; INLINE] }
    }

    fn width(&self) -> u8 {
        match self {
            IntSet::Inline { width, .. } | IntSet::Heap { width, .. } => *width,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            IntSet::Inline { len, buf, .. } => &buf[..*len as usize],
            IntSet::Heap { data, .. } => data,
        }
    }

    fn from_bytes(width: u8, bytes: Vec<u8>) -> Self {
        if bytes.len() <= INLINE {
            let mut buf = [0; INLINE];
            buf[..bytes.len()].copy_from_slice(&bytes);
            IntSet::Inline { width, len: bytes.len() as u8, buf }
        } else {
            IntSet::Heap { width, data: bytes.into_boxed_slice() }
        }
    }

    fn len(&self) -> usize {
        self.bytes().len() / self.width() as usize
    }

    fn get(&self, i: usize) -> i64 {
        read_at(self.bytes(), self.width(), i)
    }

    /// Index of `v`, or where it would go.
    fn search(&self, v: i64) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(&v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    fn contains(&self, v: i64) -> bool {
        width_for(v) <= self.width() && self.search(v).is_ok()
    }

    fn insert(&mut self, v: i64) -> bool {
        let width = self.width().max(width_for(v));
        let n = self.len();
        let pos = if width > self.width() {
            // A wider value is smaller or larger than every member.
            if v < 0 {
                0
            } else {
                n
            }
        } else {
            match self.search(v) {
                Ok(_) => return false,
                Err(p) => p,
            }
        };
        let mut out = Vec::with_capacity((n + 1) * width as usize);
        for i in 0..pos {
            push_at(&mut out, width, self.get(i));
        }
        push_at(&mut out, width, v);
        for i in pos..n {
            push_at(&mut out, width, self.get(i));
        }
        *self = IntSet::from_bytes(width, out);
        true
    }

    fn remove_at(&mut self, pos: usize) {
        let w = self.width() as usize;
        let mut out = self.bytes().to_vec();
        out.drain(pos * w..pos * w + w);
        *self = IntSet::from_bytes(self.width(), out);
    }

    fn remove(&mut self, v: i64) -> bool {
        if width_for(v) > self.width() {
            return false;
        }
        match self.search(v) {
            Ok(pos) => {
                self.remove_at(pos);
                true
            }
            Err(_) => false,
        }
    }

    fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        let (bytes, width) = (self.bytes(), self.width());
        (0..self.len()).map(move |i| read_at(bytes, width, i))
    }
}

// ---------------------------------------------------------------------------------------------
// hashtable

const CHUNK_BITS: u32 = 20;
const CHUNK: usize = 1 << CHUNK_BITS;
/// Clusters one rehash step moves (Redis moves one bucket per dict operation).
const STEPS_PER_OP: usize = 1;

/// Writes the entry header: varint of `len << 1 | dead`.
fn push_header(out: &mut Vec<u8>, len: usize) {
    let mut v = (len as u64) << 1;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a header at `off`: (member length, dead, header size).
fn read_header(chunk: &[u8], off: usize) -> (usize, bool, usize) {
    let mut v: u64 = 0;
    let mut shift = 0;
    let mut i = off;
    loop {
        let b = chunk[i];
        v |= ((b & 0x7f) as u64) << shift;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    ((v >> 1) as usize, v & 1 == 1, i - off)
}

fn header_len(len: usize) -> usize {
    let mut v = (len as u64) << 1;
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends `m` to an arena; returns its location and the bytes it took.
fn arena_append(chunks: &mut Vec<CowVec<u8>>, m: &[u8]) -> (u64, usize) {
    let need = header_len(m.len()) + m.len();
    let fits = chunks.last().is_some_and(|c| c.len() + need <= CHUNK && c.len() < CHUNK);
    if !fits {
        // A small set's first chunk grows as a Vec does; later ones are reserved whole so
        // the arena never copies itself. A member bigger than a chunk gets a chunk of its own.
        let cap = if chunks.is_empty() {
            // Most sets never need a second chunk: room for one, not Vec's first four.
            chunks.reserve_exact(1);
            need
        } else {
            need.max(CHUNK)
        };
        chunks.push(Vec::with_capacity(cap).into());
    }
    let idx = chunks.len() - 1;
    let chunk = chunks[idx].make_mut();
    let off = chunk.len();
    push_header(chunk, m.len());
    chunk.extend_from_slice(m);
    (((idx as u64) << CHUNK_BITS) | off as u64, need)
}

fn arena_member<C: std::ops::Deref<Target = Vec<u8>>>(chunks: &[C], loc: u64) -> &[u8] {
    let chunk = &chunks[(loc >> CHUNK_BITS) as usize];
    let off = (loc as usize) & (CHUNK - 1);
    let (len, _, h) = read_header(chunk, off);
    &chunk[off + h..off + h + len]
}

/// Every live member of an arena, in arena order.
fn arena_for_each<'a>(chunks: impl Iterator<Item = &'a [u8]>, mut f: impl FnMut(&'a [u8])) {
    for chunk in chunks {
        let mut off = 0;
        while off < chunk.len() {
            let (len, dead, h) = read_header(chunk, off);
            if !dead {
                f(&chunk[off + h..off + h + len]);
            }
            off += h + len;
        }
    }
}

/// A hashtable set as it was when the snapshot was taken: its arena chunks, shared with the set
/// until a writer copies one (see `types::cow`). It owns what it reads, so a reply can be
/// encoded from it on another thread while the set changes.
pub struct SetSnapshot {
    len: usize,
    bytes: usize,
    chunks: Vec<Arc<Vec<u8>>>,
}

impl SetSnapshot {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Arena bytes of the members (headers included): a capacity hint for the reply.
    pub fn data_bytes_hint(&self) -> usize {
        self.bytes
    }

    /// Every member, in the order `Set::for_each` gave them when the snapshot was taken.
    pub fn for_each<'a>(&'a self, f: impl FnMut(&'a [u8])) {
        arena_for_each(self.chunks.iter().map(|c| &c[..]), f);
    }

    /// The members from position `at` on (chunk, offset; `(0, 0)` is the first), in
    /// `for_each`'s order, until `f` returns false: then where the next member is, or None
    /// once every member was visited (a reply encoded piece by piece resumes there).
    pub fn for_each_from<'a>(
        &'a self,
        at: (usize, usize),
        mut f: impl FnMut(&'a [u8]) -> bool,
    ) -> Option<(usize, usize)> {
        let (mut ci, mut off) = at;
        while let Some(chunk) = self.chunks.get(ci) {
            while off < chunk.len() {
                let (len, dead, h) = read_header(chunk, off);
                let member = &chunk[off + h..off + h + len];
                off += h + len;
                if !dead && !f(member) {
                    return Some((ci, off));
                }
            }
            ci += 1;
            off = 0;
        }
        None
    }

    /// A lookup index over the snapshot's members, for `contains` (SINTER/SUNION/SDIFF off
    /// the executor). It holds one `u64` slot per 0.4-0.8 members (a hash tag and the member's
    /// arena location) and no copy of any member: about the set's own index, against the
    /// arena plus index that rebuilding the set took.
    pub fn build_index(&self) -> SnapshotIndex {
        let hasher = foldhash::fast::FixedState::with_seed(0x5e7_5ab5);
        let mut ix = Slots::for_entries(self.len);
        for (ci, chunk) in self.chunks.iter().enumerate() {
            let mut off = 0;
            while off < chunk.len() {
                let (len, dead, h) = read_header(chunk, off);
                if !dead {
                    let hash = hasher.hash_one(&chunk[off + h..off + h + len]);
                    let loc = ((ci as u64) << CHUNK_BITS) | off as u64;
                    let home = ix.home(hash);
                    ix.place(home, slot_index::slot_for(hash, loc));
                }
                off += h + len;
            }
        }
        SnapshotIndex { ix, hasher }
    }

    /// Whether `m` is a member, through an index `build_index` built over this snapshot.
    pub fn contains(&self, index: &SnapshotIndex, m: &[u8]) -> bool {
        index.ix.find(m, index.hasher.hash_one(m), &|loc| arena_member(&self.chunks, loc)).is_some()
    }
}

/// A lookup index over a `SetSnapshot` (see `SetSnapshot::build_index`).
pub struct SnapshotIndex {
    ix: Slots,
    hasher: foldhash::fast::FixedState,
}

/// The hashtable encoding: an arena of members plus an open-addressing index over their
/// locations that resizes incrementally (see the module header and `types::slot_index`).
#[derive(Clone)]
struct BigSet {
    index: SlotIndex,
    /// Shared with reply snapshots while they last (see `types::cow`).
    chunks: Vec<CowVec<u8>>,
    /// Arena bytes (headers included) of live and of removed entries.
    live_bytes: usize,
    dead_bytes: usize,
}

impl BigSet {
    fn with_capacity(n: usize) -> Self {
        BigSet { index: SlotIndex::with_capacity(n), chunks: Vec::new(), live_bytes: 0, dead_bytes: 0 }
    }

    fn is_rehashing(&self) -> bool {
        self.index.is_rehashing()
    }

    fn member_at(&self, loc: u64) -> &[u8] {
        arena_member(&self.chunks, loc)
    }

    /// Where `m` is in the index: (array, position).
    fn find(&self, m: &[u8]) -> Option<(usize, usize)> {
        self.index.find(m, self.index.hash(m), &|loc| arena_member(&self.chunks, loc))
    }

    fn contains(&self, m: &[u8]) -> bool {
        self.find(m).is_some()
    }

    fn rehash_step(&mut self, n: usize) -> bool {
        self.index.rehash_step(n, &|loc| arena_member(&self.chunks, loc))
    }

    /// Adds a member known to be absent, with hash `h`.
    fn add_hashed(&mut self, m: &[u8], h: u64) {
        let (loc, need) = arena_append(&mut self.chunks, m);
        self.live_bytes += need;
        self.index.insert(h, loc, &|loc| arena_member(&self.chunks, loc));
    }

    fn insert(&mut self, m: &[u8]) -> bool {
        let h = self.index.hash(m);
        if self.index.find(m, h, &|loc| arena_member(&self.chunks, loc)).is_some() {
            return false;
        }
        self.rehash_step(STEPS_PER_OP);
        self.add_hashed(m, h);
        true
    }

    /// Inserts a member known to be absent.
    fn insert_new(&mut self, m: &[u8]) {
        let h = self.index.hash(m);
        self.add_hashed(m, h);
    }

    /// Empties position `i` of index array `t`, marking its arena entry dead.
    fn remove_slot(&mut self, t: usize, i: usize) {
        let loc = self.index.remove_slot(t, i, &|loc| arena_member(&self.chunks, loc));
        let chunk = self.chunks[(loc >> CHUNK_BITS) as usize].make_mut();
        let off = (loc as usize) & (CHUNK - 1);
        let (len, _, h) = read_header(chunk, off);
        chunk[off] |= 1;
        self.live_bytes -= len + h;
        self.dead_bytes += len + h;
        self.maintain();
        self.rehash_step(STEPS_PER_OP);
    }

    /// Compacts the arena when removed entries outweigh live ones, and shrinks a sparse index.
    fn maintain(&mut self) {
        if self.dead_bytes > 4096 && self.dead_bytes > self.live_bytes {
            self.compact();
        }
        self.index.shrink_if_sparse();
    }

    /// Copies the live members into a fresh arena (in index order) and points the slots at
    /// the copies. The index, and a resize in progress, are left as they are.
    fn compact(&mut self) {
        let BigSet { index, chunks, live_bytes, dead_bytes, .. } = self;
        let mut fresh: Vec<CowVec<u8>> = Vec::new();
        let mut live = 0;
        index.relocate_all(|old| {
            let (loc, need) = arena_append(&mut fresh, arena_member(chunks, old));
            live += need;
            loc
        });
        *chunks = fresh;
        *live_bytes = live;
        *dead_bytes = 0;
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.find(m) {
            Some((t, i)) => {
                self.remove_slot(t, i);
                true
            }
            None => false,
        }
    }

    /// Every live member, in arena order.
    fn for_each<'a>(&'a self, f: impl FnMut(&'a [u8])) {
        arena_for_each(self.chunks.iter().map(|c| &c[..]), f);
    }

    /// The set as it is now, sharing its arena chunks (see `types::cow`).
    fn snapshot(&mut self) -> SetSnapshot {
        SetSnapshot {
            len: self.index.len(),
            bytes: self.live_bytes,
            chunks: self.chunks.iter_mut().map(CowVec::share).collect(),
        }
    }

    /// The member at an occupied position over both index arrays (`SlotIndex::random_pos`).
    fn member_at_pos(&self, p: usize) -> &[u8] {
        let (t, i) = self.index.split_pos(p);
        self.member_at(slot_index::loc_of(self.index.slot(t, i)))
    }

    /// One SCAN step (see `SlotIndex::scan_step`).
    fn scan_step(&self, cursor: u64, f: &mut impl FnMut(&[u8])) -> u64 {
        let key_of = |loc| arena_member(&self.chunks, loc);
        self.index.scan_step(cursor, &key_of, &mut |loc| f(key_of(loc)))
    }

    fn stats(&self) -> String {
        self.index.stats(&|loc| arena_member(&self.chunks, loc))
    }

    fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
            + self.chunks.iter().map(|c| c.capacity()).sum::<usize>()
            + self.chunks.capacity() * std::mem::size_of::<CowVec<u8>>()
    }
}

// ---------------------------------------------------------------------------------------------
// tiny hashtable

/// Member bytes (each behind a one-byte length) a `TinySet` holds.
const TINY: usize = 44;

/// A hashtable set whose members fit in `TINY` bytes: kept in the set's own allocation in
/// insertion order and searched linearly, so a set of a few short strings costs one 48-byte
/// block where a `BigSet` costs five allocations (about 250 bytes). It is still the hashtable
/// encoding to everything outside (Redis 7.0 has nothing smaller for non-integer members); a
/// member that does not fit moves the set to a `BigSet`.
#[derive(Clone)]
struct TinySet {
    len: u8,
    used: u8,
    buf: [u8; TINY],
}

impl TinySet {
    fn new() -> Self {
        TinySet { len: 0, used: 0, buf: [0; TINY] }
    }

    /// Each member with the offset of its length byte.
    fn entries(&self) -> impl Iterator<Item = (usize, &[u8])> {
        let mut pos = 0;
        std::iter::from_fn(move || {
            if pos >= self.used as usize {
                return None;
            }
            let at = pos;
            let n = self.buf[at] as usize;
            pos = at + 1 + n;
            Some((at, &self.buf[at + 1..at + 1 + n]))
        })
    }

    fn find(&self, m: &[u8]) -> Option<usize> {
        self.entries().find(|(_, e)| *e == m).map(|(at, _)| at)
    }

    /// Appends `m` (known absent) if it fits.
    fn try_push(&mut self, m: &[u8]) -> bool {
        let at = self.used as usize;
        if at + 1 + m.len() > TINY {
            return false;
        }
        self.buf[at] = m.len() as u8;
        self.buf[at + 1..at + 1 + m.len()].copy_from_slice(m);
        self.used += 1 + m.len() as u8;
        self.len += 1;
        true
    }

    fn remove_at(&mut self, at: usize) {
        let end = at + 1 + self.buf[at] as usize;
        self.buf.copy_within(end..self.used as usize, at);
        self.used -= (end - at) as u8;
        self.len -= 1;
    }

    fn nth(&self, i: usize) -> (usize, &[u8]) {
        self.entries().nth(i).expect("a position under the length")
    }

    fn to_table(&self, extra: usize) -> BigSet {
        let mut t = BigSet::with_capacity(self.len as usize + extra);
        for (_, m) in self.entries() {
            t.insert_new(m);
        }
        t
    }
}

// ---------------------------------------------------------------------------------------------
// Set

#[derive(Clone)]
enum Repr {
    Ints(IntSet),
    Tiny(TinySet),
    Table(Box<BigSet>),
}

/// A Redis set.
#[derive(Clone)]
pub struct Set {
    repr: Repr,
}

impl Default for Set {
    fn default() -> Self {
        Set::new()
    }
}

impl std::fmt::Debug for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_set();
        self.for_each(|e| {
            e.with_bytes(|b| {
                l.entry(&String::from_utf8_lossy(b));
            })
        });
        l.finish()
    }
}

impl PartialEq for Set {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let mut same = true;
        self.for_each(|e| same &= e.with_bytes(|b| other.contains(b)));
        same
    }
}

impl Set {
    /// An empty set in the intset encoding (Redis starts every set there when it can).
    pub fn new() -> Self {
        Set { repr: Repr::Ints(IntSet::new()) }
    }

    /// An empty set already in the hashtable encoding, sized for `n` members (bulk loads such as
    /// RDB, where the member count is known and the first member is not an integer).
    pub fn with_table_capacity(n: usize) -> Self {
        if n <= TINY / 4 {
            return Set { repr: Repr::Tiny(TinySet::new()) };
        }
        Set { repr: Repr::Table(Box::new(BigSet::with_capacity(n))) }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        match self.repr {
            Repr::Ints(_) => "intset",
            Repr::Tiny(_) | Repr::Table(_) => "hashtable",
        }
    }

    pub fn is_intset(&self) -> bool {
        matches!(self.repr, Repr::Ints(_))
    }

    /// An intset's width (2, 4 or 8 bytes) and its members packed at that width, ascending and
    /// little-endian: the body of Redis's intset blob. The width is the widest the set ever
    /// needed (Redis never narrows it), so the blob is the one Redis would hold.
    pub fn intset_parts(&self) -> Option<(u8, &[u8])> {
        match &self.repr {
            Repr::Ints(s) => Some((s.width(), s.bytes())),
            Repr::Tiny(_) | Repr::Table(_) => None,
        }
    }

    /// A set holding an intset as it was stored (`width` and `body` as `intset_parts` gives
    /// them, already checked to be ascending and distinct), keeping its width.
    pub fn from_intset_parts(width: u8, body: &[u8]) -> Self {
        Set { repr: Repr::Ints(IntSet::from_bytes(width, body.to_vec())) }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.len(),
            Repr::Tiny(t) => t.len as usize,
            Repr::Table(t) => t.index.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(s) => parse_i64(m).is_some_and(|v| s.contains(v)),
            Repr::Tiny(t) => t.find(m).is_some(),
            Repr::Table(t) => t.contains(m),
        }
    }

    /// Converts an intset to the hashtable encoding (tiny when its members fit), sized for
    /// `extra` more members.
    fn convert_to_table(&mut self, extra: usize) {
        if let Repr::Ints(s) = &self.repr {
            let mut tiny = TinySet::new();
            let fits = s.iter().all(|v| tiny.try_push(itoa::Buffer::new().format(v).as_bytes()));
            if fits {
                self.repr = Repr::Tiny(tiny);
                return;
            }
            let mut t = BigSet::with_capacity(s.len() + extra);
            for v in s.iter() {
                t.insert_new(itoa::Buffer::new().format(v).as_bytes());
            }
            self.repr = Repr::Table(Box::new(t));
        }
    }

    /// Adds `m`; returns whether it was new. An intset converts to a hashtable on a
    /// non-integer member or when it would hold more than `max_intset` members.
    pub fn insert(&mut self, m: &[u8], max_intset: usize) -> bool {
        if let Repr::Ints(s) = &mut self.repr {
            match parse_i64(m) {
                Some(v) => {
                    if !s.insert(v) {
                        return false;
                    }
                    if s.len() > max_intset {
                        self.convert_to_table(0);
                    }
                    return true;
                }
                None => self.convert_to_table(1),
            }
        }
        match &mut self.repr {
            Repr::Tiny(t) => {
                if t.find(m).is_some() {
                    return false;
                }
                if !t.try_push(m) {
                    let mut table = t.to_table(1);
                    table.insert_new(m);
                    self.repr = Repr::Table(Box::new(table));
                }
                true
            }
            Repr::Table(t) => t.insert(m),
            Repr::Ints(_) => false,
        }
    }

    /// Adds a member given as an `Elem` (set operations build results from other sets).
    pub fn insert_elem(&mut self, e: Elem, max_intset: usize) -> bool {
        match (e, &mut self.repr) {
            (Elem::Int(v), Repr::Ints(s)) => {
                if !s.insert(v) {
                    return false;
                }
                if s.len() > max_intset {
                    self.convert_to_table(0);
                }
                true
            }
            _ => e.with_bytes(|b| self.insert(b, max_intset)),
        }
    }

    pub fn contains_elem(&self, e: Elem) -> bool {
        match (e, &self.repr) {
            (Elem::Int(v), Repr::Ints(s)) => s.contains(v),
            _ => e.with_bytes(|b| self.contains(b)),
        }
    }

    /// Removes `m`; returns whether it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Ints(s) => parse_i64(m).is_some_and(|v| s.remove(v)),
            Repr::Tiny(t) => t.find(m).map(|at| t.remove_at(at)).is_some(),
            Repr::Table(t) => t.remove(m),
        }
    }

    /// Every member: ascending for an intset, arena (or insertion) order for a hashtable.
    pub fn for_each<'a>(&'a self, mut f: impl FnMut(Elem<'a>)) {
        match &self.repr {
            Repr::Ints(s) => s.iter().for_each(|v| f(Elem::Int(v))),
            Repr::Tiny(t) => t.entries().for_each(|(_, m)| f(Elem::Str(m))),
            Repr::Table(t) => t.for_each(|m| f(Elem::Str(m))),
        }
    }

    /// A snapshot of a hashtable set for a reply encoded elsewhere (see `types::cow`); None for
    /// an intset or a tiny hashtable, which are small and encoded in place.
    pub fn snapshot(&mut self) -> Option<SetSnapshot> {
        match &mut self.repr {
            Repr::Ints(_) | Repr::Tiny(_) => None,
            Repr::Table(t) => Some(t.snapshot()),
        }
    }

    /// DEBUG HTSTATS-KEY's text, when the set is a hash table (a tiny one shown as the table
    /// it becomes when it grows).
    pub fn table_stats(&self) -> Option<String> {
        match &self.repr {
            Repr::Ints(_) => None,
            Repr::Tiny(t) => Some(t.to_table(0).stats()),
            Repr::Table(t) => Some(t.stats()),
        }
    }

    /// Whether the hash table is resizing (DEBUG HTSTATS-KEY shows a rehashing target).
    pub fn is_rehashing(&self) -> bool {
        matches!(&self.repr, Repr::Table(t) if t.is_rehashing())
    }

    /// One rehash step, as Redis takes on each lookup of a resizing dict (commands that only
    /// read the set call this through the keyspace lookup). Returns whether a resize is still
    /// in progress.
    pub fn rehash_step(&mut self) -> bool {
        match &mut self.repr {
            Repr::Table(t) => t.rehash_step(STEPS_PER_OP),
            Repr::Ints(_) | Repr::Tiny(_) => false,
        }
    }

    /// Bytes of heap this set holds beyond its own allocation (MEMORY USAGE's figure).
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Ints(IntSet::Inline { .. }) | Repr::Tiny(_) => 0,
            Repr::Ints(IntSet::Heap { data, .. }) => data.len(),
            Repr::Table(t) => std::mem::size_of::<BigSet>() + t.heap_bytes(),
        }
    }

    /// Bytes of member data (headers excluded): a size hint for replies.
    pub fn data_bytes_hint(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.len() * 20,
            Repr::Tiny(t) => t.used as usize,
            Repr::Table(t) => t.live_bytes,
        }
    }

    /// A random position (an index for an intset or a tiny hashtable, a slot for a hashtable);
    /// the set must not be empty.
    pub fn random_pos(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => fastrand::usize(..s.len()),
            Repr::Tiny(t) => fastrand::usize(..t.len as usize),
            Repr::Table(t) => t.index.random_pos(),
        }
    }

    /// The member at a position from `random_pos`.
    pub fn elem_at(&self, pos: usize) -> Elem<'_> {
        match &self.repr {
            Repr::Ints(s) => Elem::Int(s.get(pos)),
            Repr::Tiny(t) => Elem::Str(t.nth(pos).1),
            Repr::Table(t) => Elem::Str(t.member_at_pos(pos)),
        }
    }

    /// A random member, `None` when empty.
    pub fn random(&self) -> Option<Elem<'_>> {
        if self.is_empty() {
            return None;
        }
        Some(self.elem_at(self.random_pos()))
    }

    /// Removes and returns a random member.
    pub fn pop_random(&mut self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let pos = self.random_pos();
        let out = self.elem_at(pos).to_vec();
        match &mut self.repr {
            Repr::Ints(s) => s.remove_at(pos),
            Repr::Tiny(t) => {
                let at = t.nth(pos).0;
                t.remove_at(at)
            }
            Repr::Table(t) => {
                let (ix, i) = t.index.split_pos(pos);
                t.remove_slot(ix, i)
            }
        }
        Some(out)
    }

    /// One SSCAN step. An intset is returned whole with cursor 0 (as Redis does); so is a tiny
    /// hashtable (Redis's smallest table has 4 buckets, under SSCAN's least COUNT of work: 10
    /// buckets); a hashtable visits one bucket per call and returns the next cursor (0 when done).
    pub fn scan_step(&self, cursor: u64, mut f: impl FnMut(Elem)) -> u64 {
        match &self.repr {
            Repr::Ints(s) => {
                s.iter().for_each(|v| f(Elem::Int(v)));
                0
            }
            Repr::Tiny(t) => {
                t.entries().for_each(|(_, m)| f(Elem::Str(m)));
                0
            }
            Repr::Table(t) => t.scan_step(cursor, &mut |m| f(Elem::Str(m))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn members(s: &Set) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        s.for_each(|e| v.push(e.to_vec()));
        v
    }

    /// An intset's parts are Redis's blob body: ascending, little-endian, at the narrowest
    /// width its members ever needed (a removal never narrows it), and a set built from them
    /// gives them back unchanged.
    #[test]
    fn intset_parts_keep_the_width() {
        let mut s = Set::new();
        s.insert(b"3", 512);
        s.insert(b"1", 512);
        assert_eq!(s.intset_parts(), Some((2, &[1, 0, 3, 0][..])));
        s.insert(b"70000", 512);
        assert_eq!(s.intset_parts().map(|(w, _)| w), Some(4));
        assert!(s.remove(b"70000"));
        assert_eq!(s.intset_parts(), Some((4, &[1, 0, 0, 0, 3, 0, 0, 0][..])));
        s.insert(b"-1099511627776", 512);
        let (w, body) = s.intset_parts().unwrap();
        assert_eq!((w, body.len()), (8, 24));
        let copy = Set::from_intset_parts(w, body);
        assert_eq!(copy.intset_parts(), Some((w, body)));
        assert_eq!(members(&copy), members(&s));
    }

    /// A snapshot keeps the members and their order while the set is written: removals (dead
    /// marks), growth into new chunks and a compaction each copy only what they touch.
    #[test]
    fn snapshot_is_the_set_when_taken() {
        let mut s = Set::new();
        for i in 0..200_000 {
            s.insert(format!("member:{i}").as_bytes(), 512);
        }
        let before = members(&s);
        let snap = s.snapshot().expect("a hashtable set");
        for i in 0..1000 {
            s.remove(format!("member:{i}").as_bytes());
            s.insert(format!("new:{i}").as_bytes(), 512);
        }
        let mut got = Vec::new();
        snap.for_each(|m| got.push(m.to_vec()));
        assert_eq!(got, before);
        assert_eq!(snap.len(), before.len());
        // Removing most members compacts the arena: the snapshot still reads the old one.
        for i in 1000..190_000 {
            s.remove(format!("member:{i}").as_bytes());
        }
        let mut got = Vec::new();
        snap.for_each(|m| got.push(m.to_vec()));
        assert_eq!(got, before);
        drop(snap);
        assert_eq!(s.len(), 200_000 - 190_000 + 1000);
        let now: HashSet<Vec<u8>> = members(&s).into_iter().collect();
        assert!(
            now.contains(&b"new:999"[..]) && now.contains(&b"member:199999"[..]) && !now.contains(&b"member:5"[..])
        );
    }

    #[test]
    fn intset_sorted_and_widths() {
        let mut s = Set::new();
        for m in ["5", "-3", "100", "5", "70000", "-9223372036854775808"] {
            s.insert(m.as_bytes(), 512);
        }
        assert!(s.is_intset());
        assert_eq!(members(&s), ["-9223372036854775808", "-3", "5", "100", "70000"].map(|m| m.as_bytes().to_vec()));
        assert!(s.contains(b"70000"));
        assert!(!s.contains(b"070000"));
        assert!(s.remove(b"-3"));
        assert!(!s.remove(b"-3"));
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn conversions() {
        let mut s = Set::new();
        s.insert(b"1", 3);
        s.insert(b"2", 3);
        s.insert(b"3", 3);
        assert!(s.is_intset());
        s.insert(b"4", 3);
        assert_eq!(s.encoding_name(), "hashtable");
        let mut t = Set::new();
        t.insert(b"1", 3);
        t.insert(b"a", 3);
        assert_eq!(t.encoding_name(), "hashtable");
        assert!(t.contains(b"1") && t.contains(b"a"));
        let mut u = Set::new();
        u.insert(b"+1", 3);
        assert_eq!(u.encoding_name(), "hashtable");
    }

    #[test]
    fn small_intset_is_inline() {
        assert_eq!(std::mem::size_of::<Set>(), 48);
    }

    /// Random operations against a HashSet model, under both encodings.
    #[test]
    fn model() {
        for &(max_intset, range, strings) in &[(512usize, 300u64, false), (0, 3000, false), (64, 100000, true)] {
            fastrand::seed(7);
            let mut s = Set::new();
            let mut model: HashSet<Vec<u8>> = HashSet::new();
            for step in 0..40000 {
                let n = fastrand::u64(..range);
                let m = if strings && n % 3 == 0 { format!("m:{n}") } else { n.to_string() };
                match fastrand::u8(..10) {
                    0..=4 => assert_eq!(s.insert(m.as_bytes(), max_intset), model.insert(m.clone().into_bytes())),
                    5..=7 => assert_eq!(s.remove(m.as_bytes()), model.remove(m.as_bytes())),
                    8 => assert_eq!(s.contains(m.as_bytes()), model.contains(m.as_bytes())),
                    _ => {
                        if let Some(p) = s.pop_random() {
                            assert!(model.remove(&p));
                        }
                    }
                }
                assert_eq!(s.len(), model.len());
                if step % 5000 == 0 {
                    let got: HashSet<Vec<u8>> = members(&s).into_iter().collect();
                    assert_eq!(got, model);
                }
            }
            let got: HashSet<Vec<u8>> = members(&s).into_iter().collect();
            assert_eq!(got, model);
        }
    }

    #[test]
    fn scan_visits_everything_across_resizes() {
        let mut s = Set::new();
        for i in 0..2000 {
            s.insert(format!("k{i}").as_bytes(), 0);
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = s.scan_step(cursor, |e| {
                seen.insert(e.to_vec());
            });
            steps += 1;
            if steps == 300 {
                for i in 2000..6000 {
                    s.insert(format!("k{i}").as_bytes(), 0);
                }
            }
            if steps == 900 {
                for i in 3000..6000 {
                    s.remove(format!("k{i}").as_bytes());
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..2000 {
            assert!(seen.contains(format!("k{i}").as_bytes()), "k{i} missed");
        }
    }

    /// A set of a few short strings stays in its own allocation (the tiny hashtable) and
    /// moves to a `BigSet` when a member does not fit; both are the hashtable encoding, and
    /// every operation agrees with a model on either side of the move, after it, and when an
    /// intset converts straight to a tiny table.
    #[test]
    fn tiny_hashtable_agrees_with_a_model_across_its_move() {
        fastrand::seed(7);
        for round in 0..300 {
            let mut s = Set::new();
            let mut model: HashSet<Vec<u8>> = HashSet::new();
            if round % 3 == 0 {
                for v in ["1", "22", "333"] {
                    s.insert(v.as_bytes(), 512);
                    model.insert(v.as_bytes().to_vec());
                }
                assert!(s.is_intset());
            }
            for _ in 0..40 {
                let m = match fastrand::u8(..4) {
                    0 => format!("{}", fastrand::u8(..10)).into_bytes(),
                    1 => vec![b'x'; fastrand::usize(..12)],
                    _ => format!("m{}", fastrand::u8(..12)).into_bytes(),
                };
                match fastrand::u8(..10) {
                    0..=5 => assert_eq!(s.insert(&m, 512), model.insert(m.clone())),
                    6 | 7 => assert_eq!(s.remove(&m), model.remove(&m)),
                    8 => {
                        if let Some(p) = s.pop_random() {
                            assert!(model.remove(&p));
                        }
                    }
                    _ => assert_eq!(s.contains(&m), model.contains(&m)),
                }
                assert_eq!(s.len(), model.len());
                let got: HashSet<Vec<u8>> = members(&s).into_iter().collect();
                assert_eq!(got, model);
                if matches!(s.repr, Repr::Tiny(_)) {
                    let mut scanned = HashSet::new();
                    assert_eq!(
                        s.scan_step(0, |e| {
                            scanned.insert(e.to_vec());
                        }),
                        0
                    );
                    assert_eq!(scanned, model);
                    assert_eq!(s.encoding_name(), "hashtable");
                    assert_eq!(s.heap_bytes(), 0);
                    if !s.is_empty() {
                        let stats = s.table_stats().unwrap();
                        assert!(stats.contains(&format!("number of elements: {}\n", model.len())), "{stats}");
                        let pos = s.random_pos();
                        assert!(model.contains(&s.elem_at(pos).to_vec()));
                    }
                }
            }
        }
        let mut s = Set::new();
        s.insert(b"a", 512);
        assert!(matches!(s.repr, Repr::Tiny(_)));
        s.insert(&[b'y'; 60], 512);
        assert!(matches!(s.repr, Repr::Table(_)));
        assert!(s.contains(b"a") && s.contains(&[b'y'; 60]) && s.len() == 2);
    }

    fn big(s: &Set) -> &BigSet {
        match &s.repr {
            Repr::Table(t) => t,
            Repr::Ints(_) | Repr::Tiny(_) => panic!("not a big table"),
        }
    }

    /// Internal invariants: the index's own (`SlotIndex::check`).
    fn check(s: &Set) {
        let t = big(s);
        t.index.check(&|loc| arena_member(&t.chunks, loc));
    }

    fn scan_all(s: &Set, mut between: impl FnMut(usize)) -> HashSet<Vec<u8>> {
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = s.scan_step(cursor, |e| {
                seen.insert(e.to_vec());
            });
            step += 1;
            between(step);
            if cursor == 0 {
                return seen;
            }
        }
    }

    /// Random inserts, removals and pops that grow and shrink the table many times, checked
    /// against a model and the invariants while resizes are in progress.
    #[test]
    fn resizes_incrementally_under_random_ops() {
        fastrand::seed(21);
        let mut s = Set::new();
        let mut model: HashSet<Vec<u8>> = HashSet::new();
        let (mut grows, mut shrinks, mut checked_mid) = (0, 0, 0);
        let mut was = false;
        for round in 0..200_000u32 {
            let growing = (round / 25_000) % 2 == 0;
            let m = format!("m:{}", fastrand::u32(..20_000)).into_bytes();
            let r = fastrand::u8(..100);
            if r < if growing { 60 } else { 2 } {
                assert_eq!(s.insert(&m, 0), model.insert(m.clone()));
            } else if growing && r < 90 {
                assert_eq!(s.remove(&m), model.remove(&m));
            } else if r < 95 || !growing {
                if let Some(p) = s.pop_random() {
                    assert!(model.remove(&p));
                }
            } else {
                assert_eq!(s.contains(&m), model.contains(&m));
            }
            assert_eq!(s.len(), model.len());
            if !matches!(s.repr, Repr::Table(_)) {
                continue;
            }
            let now = s.is_rehashing();
            if now && !was {
                let t = big(&s);
                if t.index.ht[1].bits() > t.index.ht[0].bits() {
                    grows += 1;
                } else {
                    shrinks += 1;
                }
            }
            was = now;
            if round % 97 == 0 {
                check(&s);
                checked_mid += usize::from(now);
            }
        }
        let got: HashSet<Vec<u8>> = members(&s).into_iter().collect();
        assert_eq!(got, model);
        assert!(grows >= 5 && shrinks >= 2 && checked_mid >= 5, "grows {grows} shrinks {shrinks} mid {checked_mid}");
    }

    /// SSCAN's guarantee while the table grows or shrinks between calls, starting mid-resize.
    #[test]
    fn scan_during_resize_keeps_the_guarantee() {
        for (seed, grow) in [(1u64, true), (2, false), (3, true), (4, false)] {
            fastrand::seed(seed);
            let mut s = Set::new();
            let stable: Vec<Vec<u8>> = (0..3000).map(|i| format!("stable:{i}").into_bytes()).collect();
            for m in &stable {
                s.insert(m, 0);
            }
            let mut extra = 0u32;
            if !grow {
                for _ in 0..40_000 {
                    s.insert(format!("x:{extra}").as_bytes(), 0);
                    extra += 1;
                }
            }
            // Run until a resize is in progress, then scan while it proceeds.
            while !s.is_rehashing() {
                if grow {
                    s.insert(format!("x:{extra}").as_bytes(), 0);
                    extra += 1;
                } else {
                    extra -= 1;
                    s.remove(format!("x:{extra}").as_bytes());
                }
            }
            let mut resizes = 0;
            let seen = {
                let s = std::cell::RefCell::new(&mut s);
                let mut seen = HashSet::new();
                let mut cursor = 0;
                loop {
                    cursor = s.borrow().scan_step(cursor, |e| {
                        seen.insert(e.to_vec());
                    });
                    let was = s.borrow().is_rehashing();
                    for _ in 0..fastrand::usize(0..40) {
                        // Bounded: a set growing without end would never let the scan finish.
                        if grow && extra < 20_000 {
                            s.borrow_mut().insert(format!("x:{extra}").as_bytes(), 0);
                            extra += 1;
                        } else if extra > 0 {
                            extra -= 1;
                            s.borrow_mut().remove(format!("x:{extra}").as_bytes());
                        }
                    }
                    resizes += usize::from(was || s.borrow().is_rehashing());
                    if cursor == 0 {
                        break seen;
                    }
                }
            };
            for m in &stable {
                assert!(seen.contains(m), "seed {seed}: {} missed", String::from_utf8_lossy(m));
            }
            assert!(resizes >= 100, "seed {seed}: only {resizes} steps during a resize");
            check(&s);
        }
    }

    /// A full scan of a set frozen mid-resize returns each member exactly once.
    #[test]
    fn scan_mid_resize_without_changes_is_exact() {
        let mut s = Set::new();
        let mut n = 0;
        while n < 5000 || !s.is_rehashing() {
            s.insert(format!("k{n}").as_bytes(), 0);
            n += 1;
        }
        let mut all = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = s.scan_step(cursor, |e| all.push(e.to_vec()));
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(all.len(), n);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        let seen = scan_all(&s, |_| {});
        assert_eq!(seen.len(), n);
    }

    /// Random picks reach every member, from both arrays, during a resize.
    #[test]
    fn random_during_resize_reaches_every_member() {
        let mut s = Set::new();
        for i in 0..200 {
            s.insert(format!("k{i}").as_bytes(), 0);
        }
        for i in 0..180 {
            s.remove(format!("k{i}").as_bytes());
        }
        assert!(s.is_rehashing());
        // Step until some members moved (the steps so far may only have skipped empty slots).
        while big(&s).index.ht[1].used == 0 {
            s.rehash_step();
        }
        let t = big(&s);
        assert!(t.index.ht[0].used > 0 && t.index.ht[1].used > 0, "{} {}", t.index.ht[0].used, t.index.ht[1].used);
        let mut seen = HashSet::new();
        for _ in 0..5000 {
            seen.insert(s.random().unwrap().to_vec());
        }
        assert_eq!(seen.len(), 20);
        assert!(s.table_stats().unwrap().contains("Hash table 1 stats (rehashing target):"));
        while s.rehash_step() {}
        let stats = s.table_stats().unwrap();
        assert!(
            stats.starts_with("Hash table 0 stats (main hash table):\n table size: 64\n number of elements: 20\n"),
            "{stats}"
        );
        assert!(!stats.contains("rehashing target"));
        check(&s);
    }

    /// No resize starts while resizing is discouraged (a fork child), except growth past 0.9.
    #[test]
    fn no_resize_while_discouraged() {
        let mut s = Set::new();
        for i in 0..1000 {
            s.insert(format!("k{i}").as_bytes(), 0);
        }
        while s.rehash_step() {}
        let size = big(&s).index.ht[0].size();
        slot_index::DISCOURAGED.set(true);
        for i in 0..990 {
            s.remove(format!("k{i}").as_bytes());
        }
        let kept = !s.is_rehashing() && big(&s).index.ht[0].size() == size;
        let mut i = 1000;
        while (big(&s).index.ht[0].used + 1) * 10 <= size * 9 {
            s.insert(format!("k{i}").as_bytes(), 0);
            i += 1;
        }
        let still = !s.is_rehashing();
        s.insert(format!("k{i}").as_bytes(), 0);
        let forced = s.is_rehashing();
        slot_index::DISCOURAGED.set(false);
        assert!(kept && still && forced, "{kept} {still} {forced}");
        check(&s);
    }

    #[test]
    fn big_members_and_compaction() {
        let mut s = Set::new();
        let big = vec![b'x'; CHUNK + 10];
        s.insert(&big, 0);
        for i in 0..10000 {
            s.insert(format!("member:{i}").as_bytes(), 0);
        }
        for i in 0..9000 {
            assert!(s.remove(format!("member:{i}").as_bytes()));
        }
        assert!(s.contains(&big));
        assert_eq!(s.len(), 1001);
        for i in 9000..10000 {
            assert!(s.contains(format!("member:{i}").as_bytes()));
        }
    }
}

/// Worst single-insert time while a set and a hash grow to 5M members, in wall and thread CPU
/// time (release-like profile: `cargo test --profile ci --lib growth_latency -- --ignored
/// --nocapture`). The CPU figure is what the structure costs; the wall figure adds preemption.
#[cfg(test)]
mod growth_latency {
    use std::time::{Duration, Instant};

    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes one timespec through a valid pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    fn worst(n: usize, mut insert: impl FnMut(&[u8])) -> (Duration, Duration, usize) {
        let (mut wall, mut cpu, mut at) = (Duration::ZERO, Duration::ZERO, 0);
        for i in 0..n {
            let m = format!("member:{i}");
            let (t0, c0) = (Instant::now(), thread_cpu());
            insert(m.as_bytes());
            let c = thread_cpu() - c0;
            wall = wall.max(t0.elapsed());
            if c > cpu {
                cpu = c;
                at = i;
            }
        }
        (wall, cpu, at)
    }

    #[test]
    #[ignore]
    fn growth_latency_5m() {
        let n = 5_000_000;
        let mut s = super::Set::new();
        let (w, c, at) = worst(n, |m| {
            s.insert(m, 0);
        });
        println!("set: worst insert {w:?} wall, {c:?} thread CPU (at {at})");
        let mut h = crate::types::Hash::new();
        let (w, c, at) = worst(n, |m| {
            h.set(m, b"v", 0, 0);
        });
        println!("hash: worst insert {w:?} wall, {c:?} thread CPU (at {at})");
    }
}
