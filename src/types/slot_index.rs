//! An incrementally resizing open-addressing hash index over entries stored elsewhere: the set's
//! hashtable encoding indexes its member arena with it, the zset's skiplist encoding its treap's
//! nodes, so neither keeps a key twice. The index holds no key: every call that compares keys or
//! needs an entry's full hash takes the owner's `key_of` (location → key bytes).
//!
//! Slots are `u64`s (linear probing, backward-shift deletion, no tombstones): 0 is empty, else
//! the top `TAG_BITS` of the key's hash over `location + 1` (locations below 2^`LOC_BITS`). The
//! bucket index is the *top* bits of the hash, so a table that doubles splits bucket `b` into
//! `2b` and `2b+1`: a SCAN cursor is simply a position in a 32-bit hash-prefix space, increasing
//! (Redis's reverse-binary cursor with the bit order mirrored).
//!
//! It resizes incrementally, as Redis's dict does: growing past a load of 0.8 or shrinking under
//! 10% allocates a second slot array, and every insert and removal (and the owner's lookups,
//! through `rehash_step`) then moves one *cluster* (a maximal run of occupied slots) from the old
//! array to the new one, skipping at most ten empty slots, so no operation pays for the whole
//! table. Moving whole clusters keeps the clusters left behind intact, so the old array is still
//! probed the usual way; new entries go to the new array. SCAN visits the covering buckets of
//! both arrays, keeping Redis's guarantee (every entry present for the whole scan is returned at
//! least once) across resizes. Resizes do not start while a fork child shares the pages (growth
//! is then forced only past a load of 0.9). A resize in progress holds both arrays until it
//! finishes. DEBUG HTSTATS-KEY reports each array in Redis's words, counting the entries that
//! share a home bucket as that bucket's chain.

use std::hash::BuildHasher;

const LOC_BITS: u32 = 40;
const LOC_MASK: u64 = (1 << LOC_BITS) - 1;
const TAG_BITS: u32 = 64 - LOC_BITS;
const MIN_BITS: u32 = 2;
/// Resolution of SCAN cursors: positions in a 2^32 hash-prefix space.
const CURSOR_BITS: u32 = 32;
/// Empty slots a rehash step may skip per cluster of budget (Redis's `empty_visits = n * 10`).
const EMPTY_VISITS_PER_STEP: usize = 10;

/// The slot value for a key hashing to `hash` stored at `loc`.
pub fn slot_for(hash: u64, loc: u64) -> u64 {
    ((hash >> LOC_BITS) << LOC_BITS) | (loc + 1)
}

/// The location a slot points at.
pub fn loc_of(slot: u64) -> u64 {
    (slot & LOC_MASK) - 1
}

/// One open-addressing slot array. An empty array (no allocation) has size 0.
#[derive(Clone)]
pub struct Slots {
    /// A power of two long (the size is `1 << bits()`), or empty.
    pub slots: Box<[u64]>,
    pub used: usize,
}

impl Slots {
    pub fn empty() -> Self {
        Slots { slots: Box::new([]), used: 0 }
    }

    pub fn with_bits(bits: u32) -> Self {
        // `vec![0; n]` comes from zeroed memory: no writing pass over a big array.
        Slots { slots: vec![0u64; 1 << bits].into_boxed_slice(), used: 0 }
    }

    /// The smallest array holding `n` entries at a load of at most 0.8.
    pub fn for_entries(n: usize) -> Self {
        let mut bits = MIN_BITS;
        while (1usize << bits) * 4 < n * 5 {
            bits += 1;
        }
        Slots::with_bits(bits)
    }

    /// log2 of the size; 0 when empty (the mask keeps 0's 64 trailing zeros to 0).
    pub fn bits(&self) -> u32 {
        self.slots.len().trailing_zeros() & 63
    }

    pub fn size(&self) -> usize {
        self.slots.len()
    }

    pub fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// The home bucket of a key hashing to `hash`.
    pub fn home(&self, hash: u64) -> usize {
        (hash >> (64 - self.bits())) as usize
    }

    /// Whether one more entry keeps the load at most 0.8.
    fn fits_one_more(&self) -> bool {
        (self.used + 1) * 5 <= self.size() * 4
    }

    /// Places a slot value at the first free position from `home` (the key is known absent).
    pub fn place(&mut self, home: usize, slot: u64) {
        debug_assert!(self.used + 1 < self.size(), "a slot array left without an empty slot");
        let mask = self.mask();
        let mut i = home;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
        self.used += 1;
    }

    /// The first slot holding a key equal to `key` (hashing to `hash`), probing from its home.
    pub fn find<'k>(&self, key: &[u8], hash: u64, key_of: &impl Fn(u64) -> &'k [u8]) -> Option<usize> {
        if self.size() == 0 {
            return None;
        }
        let tag = hash >> LOC_BITS;
        let mask = self.mask();
        let mut i = self.home(hash);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s >> LOC_BITS == tag && key_of(loc_of(s)) == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }
}

/// Whether an index may start a resize now (not while a fork child shares the pages).
#[cfg(not(test))]
fn resize_allowed() -> bool {
    super::table::resize_allowed()
}

#[cfg(test)]
thread_local! {
    /// Lets a test discourage resizing on its own thread only (the flag is process-wide).
    pub static DISCOURAGED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn resize_allowed() -> bool {
    super::table::resize_allowed() && !DISCOURAGED.get()
}

/// The smallest index size (in bits) holding `n` entries at a load of at most 0.4, so a table
/// that just shrank does not grow again on the next few inserts.
fn bits_with_headroom(n: usize) -> u32 {
    let mut bits = MIN_BITS;
    while (1usize << bits) * 4 < n * 5 * 2 {
        bits += 1;
    }
    bits
}

/// The index: a live slot array and, while resizing, the array it moves to.
#[derive(Clone)]
pub struct SlotIndex {
    /// `ht[0]` is the live array; `ht[1]` the target of a resize in progress (empty otherwise).
    pub ht: [Slots; 2],
    /// While resizing: the next position of `ht[0]` to move. It is always an empty slot or the
    /// first slot of a cluster (the slot before it is empty), because whole clusters move at
    /// once: the clusters left behind stay intact, so probing `ht[0]` stays correct.
    rehash_pos: Option<usize>,
    hasher: foldhash::fast::FixedState,
}

impl SlotIndex {
    /// An index sized for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        SlotIndex {
            ht: [Slots::for_entries(n), Slots::empty()],
            rehash_pos: None,
            hasher: foldhash::fast::FixedState::with_seed(fastrand::u64(..)),
        }
    }

    pub fn len(&self) -> usize {
        self.ht[0].used + self.ht[1].used
    }

    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn is_rehashing(&self) -> bool {
        self.rehash_pos.is_some()
    }

    /// The array new entries go to: the resize target while resizing.
    fn insert_array(&self) -> usize {
        usize::from(self.is_rehashing())
    }

    /// The slot value at position `i` of array `t`.
    pub fn slot(&self, t: usize, i: usize) -> u64 {
        self.ht[t].slots[i]
    }

    /// Points the entry at position `i` of array `t` to a new location.
    pub fn relocate(&mut self, t: usize, i: usize, loc: u64) {
        let s = &mut self.ht[t].slots[i];
        *s = (*s & !LOC_MASK) | (loc + 1);
    }

    /// Points every entry at the location `new_loc` gives for its current one (an owner
    /// compacting its arena), in slot order.
    pub fn relocate_all(&mut self, mut new_loc: impl FnMut(u64) -> u64) {
        for s in self.ht.iter_mut().flat_map(|ix| ix.slots.iter_mut()).filter(|s| **s != 0) {
            *s = (*s & !LOC_MASK) | (new_loc(loc_of(*s)) + 1);
        }
    }

    /// The full hash's top `bits` bits for the entry in `slot`, for an array of `bits`.
    pub fn home_of<'k>(&self, slot: u64, bits: u32, key_of: &impl Fn(u64) -> &'k [u8]) -> usize {
        if bits <= TAG_BITS {
            ((slot >> LOC_BITS) >> (TAG_BITS - bits)) as usize
        } else {
            (self.hash(key_of(loc_of(slot))) >> (64 - bits)) as usize
        }
    }

    /// Where the entry with `key` (hashing to `hash`) is: (array, position).
    pub fn find<'k>(&self, key: &[u8], hash: u64, key_of: &impl Fn(u64) -> &'k [u8]) -> Option<(usize, usize)> {
        (0..2).find_map(|t| self.ht[t].find(key, hash, key_of).map(|i| (t, i)))
    }

    /// Starts moving every entry to an array of `bits` (or switches at once when `ht[0]` is
    /// empty).
    fn start_resize(&mut self, bits: u32) {
        debug_assert!(!self.is_rehashing());
        if self.ht[0].used == 0 {
            let emptied = std::mem::replace(&mut self.ht[0], Slots::with_bits(bits));
            crate::util::bgfree::drop_big(emptied.slots);
            return;
        }
        // Start at an empty slot (one exists: the load is below 1), so no cluster is split
        // between the first and the last position the walk reaches.
        let Some(start) = self.ht[0].slots.iter().position(|&s| s == 0) else {
            return;
        };
        self.ht[1] = Slots::with_bits(bits);
        self.rehash_pos = Some(start);
    }

    /// Moves up to `n` clusters of `ht[0]` to `ht[1]`, skipping at most `10 * n` empty slots
    /// (Redis's dictRehash budget). Returns whether the resize is still in progress.
    pub fn rehash_step<'k>(&mut self, n: usize, key_of: &impl Fn(u64) -> &'k [u8]) -> bool {
        let Some(mut p) = self.rehash_pos else { return false };
        let mask = self.ht[0].mask();
        let bits = self.ht[1].bits();
        let mut empty_visits = n.saturating_mul(EMPTY_VISITS_PER_STEP);
        let mut clusters = n;
        while clusters > 0 && self.ht[0].used > 0 {
            if self.ht[0].slots[p] == 0 {
                p = (p + 1) & mask;
                empty_visits -= 1;
                if empty_visits == 0 {
                    break;
                }
                continue;
            }
            while self.ht[0].slots[p] != 0 {
                let s = std::mem::replace(&mut self.ht[0].slots[p], 0);
                self.ht[0].used -= 1;
                let home = self.home_of(s, bits, key_of);
                self.ht[1].place(home, s);
                p = (p + 1) & mask;
            }
            clusters -= 1;
        }
        if self.ht[0].used == 0 {
            // A big array's free purges its pages right there (`util::bgfree`).
            let grown = std::mem::replace(&mut self.ht[1], Slots::empty());
            let emptied = std::mem::replace(&mut self.ht[0], grown);
            crate::util::bgfree::drop_big(emptied.slots);
            self.rehash_pos = None;
            return false;
        }
        self.rehash_pos = Some(p);
        true
    }

    /// Makes room for one more entry, growing like Redis: not while a fork child shares the
    /// pages, unless the load passes 0.9. During a resize new entries go to the target, which
    /// must keep room for every entry the old array still holds: the steps move them there.
    fn expand_if_needed<'k>(&mut self, key_of: &impl Fn(u64) -> &'k [u8]) {
        if self.is_rehashing() {
            if (self.len() + 1) * 5 <= self.ht[1].size() * 4 {
                return;
            }
            // Inserts outran a resize (a shrink, in practice).
            self.regroup(key_of);
        }
        let ix = &self.ht[0];
        if ix.fits_one_more() || (!resize_allowed() && (ix.used + 1) * 10 <= ix.size() * 9) {
            return;
        }
        self.start_resize(ix.bits() + 1);
    }

    /// Ends a resize in progress whose target is too small for every entry: the target's
    /// entries move back to the old array when it has room for one more (a shrink: it is the
    /// bigger one), else both arrays move to a new one of twice the room needed.
    fn regroup<'k>(&mut self, key_of: &impl Fn(u64) -> &'k [u8]) {
        let target = std::mem::replace(&mut self.ht[1], Slots::empty());
        let total = self.len() + target.used;
        if (total + 1) * 5 > self.ht[0].size() * 4 {
            let old = std::mem::replace(&mut self.ht[0], Slots::for_entries(2 * (total + 1)));
            self.move_all(&old, key_of);
            crate::util::bgfree::drop_big(old.slots);
        }
        self.move_all(&target, key_of);
        crate::util::bgfree::drop_big(target.slots);
        self.rehash_pos = None;
    }

    /// Places every entry of `from` in `ht[0]`.
    fn move_all<'k>(&mut self, from: &Slots, key_of: &impl Fn(u64) -> &'k [u8]) {
        let bits = self.ht[0].bits();
        for &s in from.slots.iter().filter(|&&s| s != 0) {
            let home = self.home_of(s, bits, key_of);
            self.ht[0].place(home, s);
        }
    }

    /// Adds the entry at `loc`, whose key (known absent) hashes to `hash`.
    pub fn insert<'k>(&mut self, hash: u64, loc: u64, key_of: &impl Fn(u64) -> &'k [u8]) {
        self.expand_if_needed(key_of);
        let ix = &mut self.ht[self.insert_array()];
        let home = ix.home(hash);
        ix.place(home, slot_for(hash, loc));
    }

    /// Empties position `i` of array `t` and closes the gap (backward shift); returns the
    /// location it pointed at.
    pub fn remove_slot<'k>(&mut self, t: usize, i: usize, key_of: &impl Fn(u64) -> &'k [u8]) -> u64 {
        let loc = loc_of(self.ht[t].slots[i]);
        let (mask, bits) = (self.ht[t].mask(), self.ht[t].bits());
        let mut j = i;
        let mut k = (i + 1) & mask;
        // The shift stays inside the cluster, so during a resize `rehash_pos` (an empty slot or
        // a cluster's first) keeps its meaning.
        while self.ht[t].slots[k] != 0 {
            let home = self.home_of(self.ht[t].slots[k], bits, key_of);
            if (k.wrapping_sub(home) & mask) >= (k.wrapping_sub(j) & mask) {
                self.ht[t].slots[j] = self.ht[t].slots[k];
                j = k;
            }
            k = (k + 1) & mask;
        }
        self.ht[t].slots[j] = 0;
        self.ht[t].used -= 1;
        loc
    }

    /// Starts shrinking an array under 10% full (Redis's HASHTABLE_MIN_FILL), never while a
    /// fork child runs or a resize is in progress.
    pub fn shrink_if_sparse(&mut self) {
        if self.is_rehashing() || !resize_allowed() {
            return;
        }
        let (len, ix) = (self.len(), &self.ht[0]);
        if ix.bits() > MIN_BITS && len * 10 < ix.size() {
            let bits = bits_with_headroom(len);
            if bits < ix.bits() {
                self.start_resize(bits);
            }
        }
    }

    /// A uniformly random occupied position over both arrays (`ht[0]`'s slots first, then
    /// `ht[1]`'s). The index must not be empty.
    pub fn random_pos(&self) -> usize {
        let (s0, s1) = (self.ht[0].size(), self.ht[1].size());
        loop {
            let p = fastrand::usize(..s0 + s1);
            let (t, i) = self.split_pos(p);
            if self.ht[t].slots[i] != 0 {
                return p;
            }
        }
    }

    /// Splits a position over both arrays into (array, position).
    pub fn split_pos(&self, p: usize) -> (usize, usize) {
        let s0 = self.ht[0].size();
        if p < s0 {
            (0, p)
        } else {
            (1, p - s0)
        }
    }

    /// Buckets of array `t` whose hash prefixes fall in the 32-bit cursor range `[from, to)`.
    fn buckets_in(&self, t: usize, from: u64, to: u64) -> std::ops::Range<usize> {
        let bits = self.ht[t].bits();
        if bits <= CURSOR_BITS {
            let shift = CURSOR_BITS - bits;
            ((from >> shift) as usize)..(((to - 1) >> shift) as usize + 1)
        } else {
            let shift = bits - CURSOR_BITS;
            ((from as usize) << shift)..((to as usize) << shift)
        }
    }

    /// One SCAN step from `cursor` (a 32-bit hash-prefix position), handing `f` each location:
    /// visits one home bucket of the smaller array and, during a resize, every bucket of the
    /// bigger one covering the same hash prefixes (Redis's dictScan over two tables, with the
    /// bit order mirrored), so an entry present throughout a scan is returned whichever array
    /// holds it at each call. Returns the next cursor, 0 when done.
    pub fn scan_step<'k>(&self, cursor: u64, key_of: &impl Fn(u64) -> &'k [u8], f: &mut impl FnMut(u64)) -> u64 {
        let cursor = cursor & 0xffff_ffff;
        let small = if self.is_rehashing() && self.ht[1].bits() < self.ht[0].bits() { 1 } else { 0 };
        let bits = self.ht[small].bits();
        let (from, to) = if bits <= CURSOR_BITS {
            let shift = CURSOR_BITS - bits;
            let b = cursor >> shift;
            (b << shift, (b + 1) << shift)
        } else {
            // Tables beyond 2^32 slots: one cursor unit covers several buckets.
            (cursor, cursor + 1)
        };
        for t in 0..=usize::from(self.is_rehashing()) {
            for b in self.buckets_in(t, from, to) {
                self.visit_bucket(t, b, key_of, f);
            }
        }
        if to >> CURSOR_BITS != 0 {
            0
        } else {
            to
        }
    }

    /// Calls `f` on every location in array `t` whose home is bucket `b`: they all sit in the
    /// run of occupied slots starting at `b`.
    fn visit_bucket<'k>(&self, t: usize, b: usize, key_of: &impl Fn(u64) -> &'k [u8], f: &mut impl FnMut(u64)) {
        let ix = &self.ht[t];
        if ix.size() == 0 {
            return;
        }
        let mask = ix.mask();
        let mut i = b;
        while ix.slots[i] != 0 {
            if self.home_of(ix.slots[i], ix.bits(), key_of) == b {
                f(loc_of(ix.slots[i]));
            }
            i = (i + 1) & mask;
            if i == b {
                break;
            }
        }
    }

    /// DEBUG HTSTATS-KEY: each array in Redis's dictGetStats words, a "chain" being the entries
    /// that share a home bucket (what Redis would chain in that bucket).
    pub fn stats<'k>(&self, key_of: &impl Fn(u64) -> &'k [u8]) -> String {
        let mut out = String::new();
        for t in 0..=usize::from(self.is_rehashing()) {
            let ix = &self.ht[t];
            let mut counts = vec![0u32; ix.size()];
            for &s in ix.slots.iter() {
                if s != 0 {
                    counts[self.home_of(s, ix.bits(), key_of)] += 1;
                }
            }
            super::table::write_stats(&mut out, t, counts.iter().map(|&c| c as usize));
        }
        out
    }

    /// Bytes of the slot arrays.
    pub fn heap_bytes(&self) -> usize {
        (self.ht[0].size() + self.ht[1].size()) * std::mem::size_of::<u64>()
    }

    /// Test invariant: counts match, every entry is found from its home without crossing an
    /// empty slot, and a resize's position is an empty slot or a cluster's first slot.
    #[cfg(test)]
    pub fn check<'k>(&self, key_of: &impl Fn(u64) -> &'k [u8]) {
        for (ti, ix) in self.ht.iter().enumerate() {
            assert_eq!(ix.slots.iter().filter(|&&x| x != 0).count(), ix.used);
            assert!(ix.used * 10 <= ix.size() * 9, "{} of {}", ix.used, ix.size());
            let mask = ix.mask();
            for (i, &slot) in ix.slots.iter().enumerate() {
                if slot == 0 {
                    continue;
                }
                let key = key_of(loc_of(slot));
                assert_eq!(self.find(key, self.hash(key), key_of), Some((ti, i)));
                let mut j = self.home_of(slot, ix.bits(), key_of);
                while j != i {
                    assert_ne!(ix.slots[j], 0);
                    j = (j + 1) & mask;
                }
            }
        }
        match self.rehash_pos {
            Some(p) => {
                let ix = &self.ht[0];
                assert!(ix.slots[p] == 0 || ix.slots[p.wrapping_sub(1) & ix.mask()] == 0);
            }
            None => assert_eq!(self.ht[1].size(), 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An owner for tests: keys stored in a Vec, a location being the position.
    struct Owner {
        keys: Vec<Vec<u8>>,
        index: SlotIndex,
    }

    impl Owner {
        fn insert(&mut self, key: Vec<u8>) {
            let Owner { keys, index } = self;
            let hash = index.hash(&key);
            let key_of = |loc: u64| keys[loc as usize].as_slice();
            assert!(index.find(&key, hash, &key_of).is_none());
            index.rehash_step(1, &key_of);
            keys.push(key);
            let key_of = |loc: u64| keys[loc as usize].as_slice();
            index.insert(hash, (keys.len() - 1) as u64, &key_of);
        }

        fn remove(&mut self, key: &[u8]) {
            let Owner { keys, index } = self;
            let key_of = |loc: u64| keys[loc as usize].as_slice();
            let (t, i) = index.find(key, index.hash(key), &key_of).expect("present");
            index.remove_slot(t, i, &key_of);
            index.shrink_if_sparse();
            index.rehash_step(1, &key_of);
        }

        /// Removes a key with no rehash step and no shrink (as a bulk removal does until its end).
        fn remove_quietly(&mut self, key: &[u8]) {
            let Owner { keys, index } = self;
            let key_of = |loc: u64| keys[loc as usize].as_slice();
            let (t, i) = index.find(key, index.hash(key), &key_of).expect("present");
            index.remove_slot(t, i, &key_of);
        }

        fn check(&self) {
            self.index.check(&|loc: u64| self.keys[loc as usize].as_slice());
        }
    }

    /// Inserts right after a shrink starts, into a target that must also take what the old
    /// array still holds: the target never passes its load limit (a 4-slot target once got
    /// three inserts, then the old array's last entry, and probes for absent keys never ended).
    #[test]
    fn inserts_that_outrun_a_shrink_do_not_overfill_its_target() {
        // (keys, keys kept, whether they go at once): one at a time a shrink starts when the
        // load falls under 10%; at once (ZREMRANGEBYRANK) it starts with far fewer.
        for (n, keep, at_once) in
            [(100, 1, true), (300, 2, true), (5000, 3, true), (1000, 0, false), (20_000, 0, false)]
        {
            let mut o = Owner { keys: Vec::new(), index: SlotIndex::with_capacity(0) };
            for i in 0..n {
                o.insert(format!("k{i}").into_bytes());
            }
            while o.index.is_rehashing() {
                o.index.rehash_step(1, &|loc: u64| o.keys[loc as usize].as_slice());
            }
            let mut removed = 0;
            if at_once {
                while n - removed > keep {
                    o.remove_quietly(format!("k{removed}").as_bytes());
                    removed += 1;
                }
                o.index.shrink_if_sparse();
            } else {
                while !o.index.is_rehashing() && removed < n {
                    o.remove(format!("k{removed}").as_bytes());
                    removed += 1;
                }
            }
            assert!(o.index.is_rehashing(), "{n}");
            let added = (2 * (n - removed)).max(8);
            for i in n..n + added {
                o.insert(format!("k{i}").into_bytes());
                if i % 7 == 0 {
                    o.check();
                }
            }
            o.check();
            assert_eq!(o.index.len(), n - removed + added);
            for i in removed..n + added {
                let key = format!("k{i}").into_bytes();
                let key_of = |loc: u64| o.keys[loc as usize].as_slice();
                assert!(o.index.find(&key, o.index.hash(&key), &key_of).is_some(), "{i}");
            }
        }
    }
}
