//! The Set value type and its two encodings, as Redis 7.0 has them (no listpack sets in 7.0):
//!
//! - `intset`: sorted distinct integers packed little-endian at one width (2, 4 or 8 bytes), the
//!   width upgraded for the whole set when a wider value arrives and never downgraded. Up to 20
//!   bytes live inline in the `Set` itself (ten 16-bit members), so a small set costs one
//!   allocation. Used while every member is a canonical integer (Redis's string2ll rules) and the
//!   count stays within set-max-intset-entries.
//! - `hashtable` (`BigSet`): members stored inline, back to back, in an arena of byte chunks
//!   (a varint header per entry, no per-member allocation), indexed by an open-addressing table of
//!   `u64` slots (linear probing, backward-shift deletion, no tombstones). A slot packs 24 bits of
//!   the member's hash with the entry's arena location. The bucket index is the *top* bits of the
//!   hash, so a table that doubles splits bucket `b` into `2b` and `2b+1`: a SCAN cursor is simply
//!   a position in a 32-bit hash-prefix space, increasing, and keeps Redis's guarantee (every
//!   member present for the whole scan is returned at least once) across resizes. Whole-set walks
//!   (SMEMBERS) read the arena sequentially, which is what makes a 2.6M-member reply fast.
//!   Removed entries are marked dead in the arena and compacted away once they outweigh the live
//!   ones. 7.0 never converts a hashtable set back to an intset, and neither does this.
//!
//! This module knows nothing of commands or replies; conversion limits come in as plain numbers.

use std::hash::BuildHasher;

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
const LOC_BITS: u32 = 40;
const LOC_MASK: u64 = (1 << LOC_BITS) - 1;
const TAG_BITS: u32 = 64 - LOC_BITS;
const MIN_BITS: u32 = 2;
/// Resolution of SCAN cursors: positions in a 2^32 hash-prefix space.
const CURSOR_BITS: u32 = 32;

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

/// The hashtable encoding: an arena of members plus an open-addressing index.
#[derive(Clone)]
struct BigSet {
    /// 0 = empty; else `tag << LOC_BITS | (location + 1)`.
    slots: Box<[u64]>,
    bits: u32,
    len: usize,
    chunks: Vec<Vec<u8>>,
    /// Arena bytes (headers included) of live and of removed entries.
    live_bytes: usize,
    dead_bytes: usize,
    hasher: foldhash::fast::FixedState,
}

impl BigSet {
    fn with_capacity(n: usize) -> Self {
        let mut bits = MIN_BITS;
        while (1usize << bits) * 4 < n * 5 {
            bits += 1;
        }
        BigSet {
            slots: vec![0; 1 << bits].into_boxed_slice(),
            bits,
            len: 0,
            chunks: Vec::new(),
            live_bytes: 0,
            dead_bytes: 0,
            hasher: foldhash::fast::FixedState::with_seed(fastrand::u64(..)),
        }
    }

    fn hash(&self, m: &[u8]) -> u64 {
        self.hasher.hash_one(m)
    }

    fn mask(&self) -> usize {
        (1 << self.bits) - 1
    }

    fn loc(slot: u64) -> u64 {
        (slot & LOC_MASK) - 1
    }

    fn member_at(&self, loc: u64) -> &[u8] {
        let chunk = &self.chunks[(loc >> CHUNK_BITS) as usize];
        let off = (loc as usize) & (CHUNK - 1);
        let (len, _, h) = read_header(chunk, off);
        &chunk[off + h..off + h + len]
    }

    /// The full hash's top `bits` bits for the entry in `slot`, for a table of `bits`.
    fn home_of(&self, slot: u64, bits: u32) -> usize {
        if bits <= TAG_BITS {
            ((slot >> LOC_BITS) >> (TAG_BITS - bits)) as usize
        } else {
            (self.hash(self.member_at(Self::loc(slot))) >> (64 - bits)) as usize
        }
    }

    fn find(&self, m: &[u8]) -> Option<usize> {
        self.find_hashed(m, self.hash(m))
    }

    fn find_hashed(&self, m: &[u8], h: u64) -> Option<usize> {
        let tag = h >> LOC_BITS;
        let mask = self.mask();
        let mut i = (h >> (64 - self.bits)) as usize;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s >> LOC_BITS == tag && self.member_at(Self::loc(s)) == m {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn contains(&self, m: &[u8]) -> bool {
        self.find(m).is_some()
    }

    /// Appends `m` to the arena; returns its location.
    fn append(&mut self, m: &[u8]) -> u64 {
        let need = header_len(m.len()) + m.len();
        let fits = self.chunks.last().is_some_and(|c| c.len() + need <= CHUNK && c.len() < CHUNK);
        if !fits {
            // A small set's first chunk grows as a Vec does; later ones are reserved whole so
            // the arena never copies itself. A member bigger than a chunk gets a chunk of its own.
            let cap = if self.chunks.is_empty() { need } else { need.max(CHUNK) };
            self.chunks.push(Vec::with_capacity(cap));
        }
        let idx = self.chunks.len() - 1;
        let chunk = &mut self.chunks[idx];
        let off = chunk.len();
        push_header(chunk, m.len());
        chunk.extend_from_slice(m);
        self.live_bytes += need;
        ((idx as u64) << CHUNK_BITS) | off as u64
    }

    /// Places a slot value into a table without comparing (the member is known absent).
    fn place(slots: &mut [u64], bits: u32, home: usize, slot: u64) {
        let mask = (1 << bits) - 1;
        let mut i = home;
        while slots[i] != 0 {
            i = (i + 1) & mask;
        }
        slots[i] = slot;
    }

    fn insert(&mut self, m: &[u8]) -> bool {
        let h = self.hash(m);
        if self.find_hashed(m, h).is_some() {
            return false;
        }
        if (self.len + 1) * 5 > (1usize << self.bits) * 4 {
            self.resize(self.bits + 1);
        }
        let loc = self.append(m);
        let slot = ((h >> LOC_BITS) << LOC_BITS) | (loc + 1);
        Self::place(&mut self.slots, self.bits, (h >> (64 - self.bits)) as usize, slot);
        self.len += 1;
        true
    }

    fn resize(&mut self, bits: u32) {
        let mut slots = vec![0u64; 1 << bits].into_boxed_slice();
        for &s in self.slots.iter() {
            if s != 0 {
                let home = self.home_of(s, bits);
                Self::place(&mut slots, bits, home, s);
            }
        }
        self.slots = slots;
        self.bits = bits;
    }

    /// Empties slot `i` and closes the gap (backward shift), marking its arena entry dead.
    fn remove_slot(&mut self, i: usize) {
        let loc = Self::loc(self.slots[i]);
        let chunk = &mut self.chunks[(loc >> CHUNK_BITS) as usize];
        let off = (loc as usize) & (CHUNK - 1);
        let (len, _, h) = read_header(chunk, off);
        chunk[off] |= 1;
        self.live_bytes -= len + h;
        self.dead_bytes += len + h;
        self.len -= 1;
        let mask = self.mask();
        let mut j = i;
        let mut k = (i + 1) & mask;
        while self.slots[k] != 0 {
            let home = self.home_of(self.slots[k], self.bits);
            if (k.wrapping_sub(home) & mask) >= (k.wrapping_sub(j) & mask) {
                self.slots[j] = self.slots[k];
                j = k;
            }
            k = (k + 1) & mask;
        }
        self.slots[j] = 0;
        self.maintain();
    }

    /// Compacts the arena when removed entries outweigh live ones, and shrinks a sparse index.
    fn maintain(&mut self) {
        if self.dead_bytes > 4096 && self.dead_bytes > self.live_bytes {
            self.rebuild();
        } else if self.bits > MIN_BITS && self.len * 8 < (1 << self.bits) {
            let mut bits = MIN_BITS;
            while (1usize << bits) * 4 < self.len * 5 * 2 {
                bits += 1;
            }
            if bits < self.bits {
                self.resize(bits);
            }
        }
    }

    /// Copies the live entries into a fresh arena and index.
    fn rebuild(&mut self) {
        let mut fresh = BigSet::with_capacity(self.len);
        fresh.hasher = self.hasher.clone();
        self.for_each(|m| {
            fresh.insert_new(m);
        });
        *self = fresh;
    }

    /// Inserts a member known to be absent.
    fn insert_new(&mut self, m: &[u8]) {
        if (self.len + 1) * 5 > (1usize << self.bits) * 4 {
            self.resize(self.bits + 1);
        }
        let h = self.hash(m);
        let loc = self.append(m);
        let slot = ((h >> LOC_BITS) << LOC_BITS) | (loc + 1);
        Self::place(&mut self.slots, self.bits, (h >> (64 - self.bits)) as usize, slot);
        self.len += 1;
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.find(m) {
            Some(i) => {
                self.remove_slot(i);
                true
            }
            None => false,
        }
    }

    /// Every live member, in arena (insertion) order.
    fn for_each<'a>(&'a self, mut f: impl FnMut(&'a [u8])) {
        for chunk in &self.chunks {
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

    fn random_slot(&self) -> usize {
        loop {
            let i = fastrand::usize(..self.slots.len());
            if self.slots[i] != 0 {
                return i;
            }
        }
    }

    /// One SCAN step from `cursor` (a 32-bit hash-prefix position): visits one home bucket.
    fn scan_step(&self, cursor: u64, f: &mut impl FnMut(&[u8])) -> u64 {
        let shift = CURSOR_BITS.saturating_sub(self.bits);
        let (b, next) = if self.bits <= CURSOR_BITS {
            let b = ((cursor & 0xffff_ffff) >> shift) as usize;
            (b, ((b as u64) + 1) << shift)
        } else {
            // Tables beyond 2^32 slots: walk in steps of 2^(bits-32) buckets per cursor unit.
            let per = 1usize << (self.bits - CURSOR_BITS);
            let b = ((cursor & 0xffff_ffff) as usize) * per;
            for bb in b..b + per {
                self.visit_bucket(bb, f);
            }
            let next = (cursor & 0xffff_ffff) + 1;
            return if next >> CURSOR_BITS != 0 { 0 } else { next };
        };
        self.visit_bucket(b, f);
        if next >> CURSOR_BITS != 0 {
            0
        } else {
            next
        }
    }

    fn visit_bucket(&self, b: usize, f: &mut impl FnMut(&[u8])) {
        let mask = self.mask();
        let mut i = b;
        while self.slots[i] != 0 {
            if self.home_of(self.slots[i], self.bits) == b {
                f(self.member_at(Self::loc(self.slots[i])));
            }
            i = (i + 1) & mask;
            if i == b {
                break;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Set

#[derive(Clone)]
enum Repr {
    Ints(IntSet),
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
        Set { repr: Repr::Table(Box::new(BigSet::with_capacity(n))) }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        match self.repr {
            Repr::Ints(_) => "intset",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn is_intset(&self) -> bool {
        matches!(self.repr, Repr::Ints(_))
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.len(),
            Repr::Table(t) => t.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Ints(s) => parse_i64(m).is_some_and(|v| s.contains(v)),
            Repr::Table(t) => t.contains(m),
        }
    }

    /// Converts an intset to the hashtable encoding, sized for `extra` more members.
    fn convert_to_table(&mut self, extra: usize) {
        if let Repr::Ints(s) = &self.repr {
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
            Repr::Table(t) => t.remove(m),
        }
    }

    /// Every member: ascending for an intset, arena order for a hashtable.
    pub fn for_each<'a>(&'a self, mut f: impl FnMut(Elem<'a>)) {
        match &self.repr {
            Repr::Ints(s) => s.iter().for_each(|v| f(Elem::Int(v))),
            Repr::Table(t) => t.for_each(|m| f(Elem::Str(m))),
        }
    }

    /// Slots and members of the hash table, when the set is one (DEBUG HTSTATS-KEY).
    pub fn table_shape(&self) -> Option<(usize, usize)> {
        match &self.repr {
            Repr::Ints(_) => None,
            Repr::Table(t) => Some((t.slots.len(), t.len)),
        }
    }

    /// Bytes of heap this set holds beyond its own allocation (MEMORY USAGE's figure).
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Ints(IntSet::Inline { .. }) => 0,
            Repr::Ints(IntSet::Heap { data, .. }) => data.len(),
            Repr::Table(t) => {
                std::mem::size_of::<BigSet>()
                    + t.slots.len() * std::mem::size_of::<u64>()
                    + t.chunks.iter().map(Vec::capacity).sum::<usize>()
                    + t.chunks.capacity() * std::mem::size_of::<Vec<u8>>()
            }
        }
    }

    /// Bytes of member data (headers excluded): a size hint for replies.
    pub fn data_bytes_hint(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => s.len() * 20,
            Repr::Table(t) => t.live_bytes,
        }
    }

    /// A random position (an index for an intset, a slot for a hashtable); the set must not be empty.
    pub fn random_pos(&self) -> usize {
        match &self.repr {
            Repr::Ints(s) => fastrand::usize(..s.len()),
            Repr::Table(t) => t.random_slot(),
        }
    }

    /// The member at a position from `random_pos`.
    pub fn elem_at(&self, pos: usize) -> Elem<'_> {
        match &self.repr {
            Repr::Ints(s) => Elem::Int(s.get(pos)),
            Repr::Table(t) => Elem::Str(t.member_at(BigSet::loc(t.slots[pos]))),
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
            Repr::Table(t) => t.remove_slot(pos),
        }
        Some(out)
    }

    /// One SSCAN step. An intset is returned whole with cursor 0 (as Redis does); a hashtable
    /// visits one bucket per call and returns the next cursor (0 when done).
    pub fn scan_step(&self, cursor: u64, mut f: impl FnMut(Elem)) -> u64 {
        match &self.repr {
            Repr::Ints(s) => {
                s.iter().for_each(|v| f(Elem::Int(v)));
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
