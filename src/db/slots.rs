//! The cluster's keys-per-hash-slot index (Redis's slots_to_keys): for each of the 16384 slots, a
//! handle to every key table entry whose key hashes there. CLUSTER COUNTKEYSINSLOT and
//! GETKEYSINSLOT, SETSLOT NODE's "do I still hold keys" check and the deletion of a lost slot's
//! keys read one slot's list instead of walking the whole keyspace (a walk cost ~50 ms per
//! GETKEYSINSLOT with a million keys, and a resharding calls it for every slot).
//!
//! Memory (issue 19: at most 8 bytes per key over standalone; Redis 7.0 pays 16 for its two
//! list pointers): a handle is the entry's address in 6 bytes (user-space addresses fit in 48
//! bits, see `types::table`). A slot's handles sit in blocks sized to an allocator size class
//! exactly: full blocks of `CHUNK` handles (4 KiB each), then one tail block that grows and
//! shrinks one size class at a time, so what a slot wastes is under one class step of its tail.
//! An empty slot costs its 16-byte header and nothing else.
//!
//! Removal is O(1): each entry's position in its slot's list is kept in the entry's tag (spare
//! bits of the key table's node, `Table::entry_tag`), so a removal reads the position, moves the
//! slot's last handle into the hole and retags the moved entry. Positions from `NO_POS` on do
//! not fit the tag's 24 bits (a slot of over 16M keys, only possible with hash tags); those
//! entries are found by a scan of that part of the list.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::types::table::{EntryRef, TAG_BITS};
use crate::types::Value;
use crate::util::slot::SLOTS;

type Handle = EntryRef<Value>;

/// Bytes of one stored handle.
const H: usize = 6;
/// Bytes of a block's header: its length and capacity in handles, two u16.
const HEADER: usize = 4;
/// Handles in a full block: the most a 4096-byte block holds.
pub const CHUNK: usize = (4096 - HEADER) / H;
/// The tag of an entry whose position does not fit in the tag.
pub const NO_POS: usize = (1 << TAG_BITS) - 1;

fn pack(h: Handle) -> [u8; H] {
    let b = (h.addr() as u64).to_le_bytes();
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}

fn unpack(b: &[u8]) -> Option<Handle> {
    let mut w = [0u8; 8];
    w[..H].copy_from_slice(&b[..H]);
    Handle::from_addr(u64::from_le_bytes(w) as usize)
}

/// The most handles a block of the allocator size class holding `n` handles can take.
fn capacity_for(n: usize) -> usize {
    ((crate::util::alloc::size_class(HEADER + n * H) - HEADER) / H).min(CHUNK)
}

fn layout(cap: usize) -> Layout {
    // A few KiB at most, alignment 2: always a valid layout.
    Layout::from_size_align(HEADER + cap * H, 2).unwrap_or(Layout::new::<[u16; 2]>())
}

/// A thin pointer to `[len: u16, cap: u16, cap handles]`.
struct Block(NonNull<u8>);

// SAFETY: a block exclusively owns its allocation (plain bytes), like a `Box<[u8]>`.
unsafe impl Send for Block {}
// SAFETY: as above; `&Block` only reads.
unsafe impl Sync for Block {}

impl Block {
    fn new(cap: usize) -> Block {
        let l = layout(cap);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc(l) };
        let Some(p) = NonNull::new(raw) else { alloc::handle_alloc_error(l) };
        let b = Block(p);
        b.set_len(0);
        // SAFETY: the header is inside the allocation; cap <= CHUNK fits in u16.
        unsafe { (p.as_ptr().add(2) as *mut u16).write_unaligned(cap as u16) };
        b
    }

    fn len(&self) -> usize {
        // SAFETY: a block always starts with its header.
        unsafe { (self.0.as_ptr() as *const u16).read_unaligned() as usize }
    }

    fn set_len(&self, n: usize) {
        // SAFETY: as above; n <= cap <= CHUNK fits in u16.
        unsafe { (self.0.as_ptr() as *mut u16).write_unaligned(n as u16) }
    }

    fn cap(&self) -> usize {
        // SAFETY: as above.
        unsafe { (self.0.as_ptr().add(2) as *const u16).read_unaligned() as usize }
    }

    /// The stored handles' bytes.
    fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` handles after the header are initialised.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(HEADER), self.len() * H) }
    }

    fn get(&self, i: usize) -> Option<Handle> {
        self.bytes().get(i * H..i * H + H).and_then(unpack)
    }

    /// Writes handle `h` at `i` (< cap).
    fn put(&mut self, i: usize, h: [u8; H]) {
        debug_assert!(i < self.cap());
        // SAFETY: `i < cap`, so the handle lies inside the allocation.
        unsafe { std::ptr::copy_nonoverlapping(h.as_ptr(), self.0.as_ptr().add(HEADER + i * H), H) }
    }

    /// Moves the handles into a block of capacity `cap` (>= len).
    fn resize(&mut self, cap: usize) {
        let len = self.len();
        debug_assert!(cap >= len);
        let old = layout(self.cap());
        // SAFETY: the block was allocated with `old`; the new size is non-zero and small.
        let raw = unsafe { alloc::realloc(self.0.as_ptr(), old, HEADER + cap * H) };
        let Some(p) = NonNull::new(raw) else { alloc::handle_alloc_error(layout(cap)) };
        self.0 = p;
        // SAFETY: the header is inside the allocation; cap <= CHUNK fits in u16.
        unsafe { (p.as_ptr().add(2) as *mut u16).write_unaligned(cap as u16) };
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout (the capacity in the header is the allocated one).
        unsafe { alloc::dealloc(self.0.as_ptr(), layout(self.cap())) }
    }
}

/// One slot's handles: full blocks of `CHUNK`, then a non-empty tail (or none).
#[derive(Default)]
struct SlotKeys {
    tail: Option<Block>,
    // Boxed on purpose: 8 bytes in each of the 16384 headers instead of a `Vec`'s 24, for a
    // list only slots of over `CHUNK` keys have.
    #[allow(clippy::box_collection)]
    full: Option<Box<Vec<Block>>>,
}

impl SlotKeys {
    fn full_len(&self) -> usize {
        self.full.as_ref().map_or(0, |f| f.len())
    }

    fn len(&self) -> usize {
        self.full_len() * CHUNK + self.tail.as_ref().map_or(0, Block::len)
    }

    /// The block and index of position `pos`.
    fn at(&mut self, pos: usize) -> Option<(&mut Block, usize)> {
        let full = self.full_len();
        if pos < full * CHUNK {
            let f = self.full.as_mut()?;
            return Some((&mut f[pos / CHUNK], pos % CHUNK));
        }
        let t = self.tail.as_mut()?;
        let i = pos - full * CHUNK;
        (i < t.len()).then_some((t, i))
    }

    fn get(&self, pos: usize) -> Option<Handle> {
        let full = self.full_len();
        if pos < full * CHUNK {
            return self.full.as_ref()?.get(pos / CHUNK)?.get(pos % CHUNK);
        }
        self.tail.as_ref()?.get(pos - full * CHUNK)
    }

    /// Appends `h`; returns its position.
    fn push(&mut self, h: Handle) -> usize {
        let pos = self.len();
        let tail = self.tail.get_or_insert_with(|| Block::new(capacity_for(1)));
        let len = tail.len();
        if len == tail.cap() {
            // Only below CHUNK: a full tail moved to `full` right away.
            tail.resize(capacity_for(len + 1));
        }
        tail.put(len, pack(h));
        tail.set_len(len + 1);
        if len + 1 == CHUNK {
            if let Some(t) = self.tail.take() {
                self.full.get_or_insert_with(Default::default).push(t);
            }
        }
        pos
    }

    /// Removes the handle at `pos`; returns the handle moved into its place and that place (none
    /// when `pos` was the last).
    fn remove_at(&mut self, pos: usize) -> Option<(Handle, usize)> {
        if self.tail.is_none() {
            let f = self.full.as_mut()?;
            self.tail = f.pop();
            if f.is_empty() {
                self.full = None;
            }
        }
        let tail = self.tail.as_mut()?;
        let last_i = tail.len() - 1;
        let last_pos = self.full_len() * CHUNK + last_i;
        let tail = self.tail.as_mut()?;
        let moved = if pos == last_pos {
            None
        } else {
            let mut h = [0u8; H];
            h.copy_from_slice(&tail.bytes()[last_i * H..last_i * H + H]);
            let moved = unpack(&h);
            let (block, i) = self.at(pos)?;
            block.put(i, h);
            moved.map(|m| (m, pos))
        };
        let tail = self.tail.as_mut()?;
        tail.set_len(last_i);
        if last_i == 0 {
            self.tail = None;
        } else if last_i <= tail.cap() / 2 {
            // Shrink once half empty: growing back takes as many pushes as it took removals.
            tail.resize(capacity_for(last_i));
        }
        moved
    }

    /// The position of `h`, by a scan of the positions from `from` on.
    fn find(&self, h: Handle, from: usize) -> Option<usize> {
        let want = pack(h);
        (from..self.len()).find(|&p| self.get(p).map(pack) == Some(want))
    }

    fn iter(&self) -> impl Iterator<Item = Handle> + '_ {
        self.full
            .iter()
            .flat_map(|f| f.iter())
            .chain(self.tail.iter())
            .flat_map(|b| b.bytes().chunks_exact(H).filter_map(unpack))
    }
}

/// Every slot's handles.
pub struct SlotIndex {
    slots: Box<[SlotKeys]>,
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex { slots: (0..SLOTS).map(|_| SlotKeys::default()).collect() }
    }
}

impl SlotIndex {
    /// Adds `h`; returns the tag its entry must get (its position, or `NO_POS`).
    pub fn add(&mut self, slot: usize, h: Handle) -> u32 {
        let Some(s) = self.slots.get_mut(slot) else { return NO_POS as u32 };
        s.push(h).min(NO_POS) as u32
    }

    /// Removes `h`, whose entry had tag `tag`. Returns whether it was there, and the entry moved
    /// into its place with the tag that entry must get now.
    pub fn remove(&mut self, slot: usize, h: Handle, tag: u32) -> (bool, Option<(Handle, u32)>) {
        let Some(s) = self.slots.get_mut(slot) else { return (false, None) };
        let tag = tag as usize;
        let pos = if tag < NO_POS && s.get(tag) == Some(h) {
            Some(tag)
        } else {
            // Past the tag's range; or (never, if the tags are kept) a stale tag.
            debug_assert!(tag == NO_POS, "slot index: entry tag {tag} does not point at it");
            s.find(h, if tag == NO_POS { NO_POS } else { 0 }).or_else(|| s.find(h, 0))
        };
        let Some(pos) = pos else { return (false, None) };
        (true, s.remove_at(pos).map(|(m, p)| (m, p.min(NO_POS) as u32)))
    }

    pub fn count(&self, slot: usize) -> usize {
        self.slots.get(slot).map_or(0, SlotKeys::len)
    }

    /// The handles of `slot`.
    pub fn handles(&self, slot: usize) -> impl Iterator<Item = Handle> + '_ {
        self.slots.get(slot).into_iter().flat_map(SlotKeys::iter)
    }

    /// Every slot's handles with the tag each entry must have (to tag a freshly built index).
    pub fn positions(&self) -> impl Iterator<Item = (Handle, u32)> + '_ {
        self.slots.iter().flat_map(|s| s.iter().enumerate().map(|(p, h)| (h, p.min(NO_POS) as u32)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::table::Table;
    use crate::types::RStr;

    fn val() -> Value {
        Value::Str(RStr::from_bytes(b"v"))
    }

    fn add(table: &mut Table<Value>, idx: &mut SlotIndex, slot: usize, k: &[u8]) {
        let (old, h) = table.insert_entry(k, val(), 0);
        assert!(old.is_none());
        let tag = idx.add(slot, h);
        unsafe { table.set_entry_tag(h, tag) };
    }

    fn del(table: &mut Table<Value>, idx: &mut SlotIndex, slot: usize, k: &[u8]) {
        let (_, h, tag) = table.remove_entry(k).expect("present");
        let (found, moved) = idx.remove(slot, h, tag);
        assert!(found);
        if let Some((m, t)) = moved {
            unsafe { table.set_entry_tag(m, t) };
        }
    }

    /// The index lists exactly `present`, and every entry's tag is its position.
    fn check(table: &Table<Value>, idx: &SlotIndex, slot: usize, present: &[Vec<u8>]) {
        let mut listed: Vec<Vec<u8>> = idx.handles(slot).map(|h| unsafe { table.entry_key(h) }.to_vec()).collect();
        for (p, h) in idx.handles(slot).enumerate() {
            assert_eq!(unsafe { table.entry_tag(h) } as usize, p.min(NO_POS));
        }
        listed.sort();
        let mut want = present.to_vec();
        want.sort();
        assert_eq!(listed, want);
        assert_eq!(idx.count(slot), present.len());
    }

    /// Adds and removes keys of one slot in a shuffled order across block boundaries (tail
    /// growth and shrinking, full blocks coming and going) and checks the index lists exactly
    /// the keys present, with each entry tagged with its position.
    #[test]
    fn index_follows_inserts_and_removes_across_blocks() {
        let mut table: Table<Value> = Table::new();
        let mut idx = SlotIndex::default();
        let slot = 7;
        let mut present: Vec<Vec<u8>> = Vec::new();
        let mut rng = fastrand::Rng::with_seed(19);
        let rounds = 3 * CHUNK * 4;
        for round in 0..rounds {
            // Grow for the first half, then shrink.
            let grow = if round < rounds / 2 { 3 } else { 1 };
            if present.is_empty() || rng.u32(..4) < grow {
                let k = format!("k{round}").into_bytes();
                add(&mut table, &mut idx, slot, &k);
                present.push(k);
            } else {
                let k = present.swap_remove(rng.usize(..present.len()));
                del(&mut table, &mut idx, slot, &k);
            }
            if round % 211 == 0 || present.len() % CHUNK <= 1 {
                check(&table, &idx, slot, &present);
            }
        }
        check(&table, &idx, slot, &present);
        // Drain everything: the slot ends empty and holds no block.
        for k in std::mem::take(&mut present) {
            del(&mut table, &mut idx, slot, &k);
        }
        assert_eq!(idx.count(slot), 0);
        assert!(idx.slots[slot].full.is_none() && idx.slots[slot].tail.is_none());
    }

    /// Entries whose position is past the tag's range are still found and removed (by a scan
    /// from NO_POS), and removing an entry whose tag was lost still works.
    #[test]
    fn untagged_positions_are_found() {
        let mut table: Table<Value> = Table::new();
        let mut idx = SlotIndex::default();
        let keys: Vec<Vec<u8>> = (0..50).map(|i| format!("u{i}").into_bytes()).collect();
        for k in &keys {
            add(&mut table, &mut idx, 3, k);
        }
        // Pretend the last entries sit past the tag range.
        let s = &idx.slots[3];
        let h = s.get(49).unwrap();
        let (_, h2, _) = table.remove_entry(&keys[49]).unwrap();
        assert_eq!(h, h2);
        let (found, moved) = idx.remove(3, h, NO_POS as u32);
        assert!(found && moved.is_none());
        check(&table, &idx, 3, &keys[..49]);
    }

    /// A handle survives the 6-byte packing.
    #[test]
    fn handles_pack_into_six_bytes() {
        let mut table: Table<Value> = Table::new();
        let (_, h) = table.insert_entry(b"a", val(), 0);
        assert_eq!(unpack(&pack(h)), Some(h));
        const { assert!(CHUNK * H + HEADER <= 4096 && (CHUNK + 1) * H + HEADER > 4096) };
    }
}
