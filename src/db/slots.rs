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
//! An empty slot costs its 8-byte header and nothing else; a slot of under `CHUNK` keys, its
//! header and one block.
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
#[repr(transparent)]
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

/// The handles of a slot of `CHUNK` or more: its full blocks, then a non-empty tail (or none).
struct Big {
    full: Vec<Block>,
    tail: Option<Block>,
}

/// A slot's storage, taken out of its 8-byte `SlotKeys` to be changed.
enum Parts {
    Empty,
    Small(Block),
    Big(Box<Big>),
}

/// One slot's handles in 8 bytes (the index holds 16384 of them whatever the key count: at 16
/// bytes they were 2.6 of the ~8 bytes per key the index may cost at 100k keys): null when the
/// slot is empty; else its only block, when it holds under `CHUNK` handles (the usual case); or,
/// tagged with the low bit (blocks have alignment 2, `Big` 8, so it is free), a `Box<Big>`.
struct SlotKeys(*mut u8);

// SAFETY: a SlotKeys exclusively owns what it points to (a block or a Big), like a Box would.
unsafe impl Send for SlotKeys {}
// SAFETY: as above; `&SlotKeys` only reads.
unsafe impl Sync for SlotKeys {}

impl Default for SlotKeys {
    fn default() -> Self {
        SlotKeys(std::ptr::null_mut())
    }
}

impl Drop for SlotKeys {
    fn drop(&mut self) {
        drop(self.take());
    }
}

impl SlotKeys {
    fn is_big(&self) -> bool {
        self.0 as usize & 1 == 1
    }

    /// The full blocks and the tail, borrowed.
    fn parts(&self) -> (&[Block], Option<&Block>) {
        if self.0.is_null() {
            (&[], None)
        } else if self.is_big() {
            // SAFETY: a tagged pointer is a `Box<Big>`'s, owned by this slot (see `put`).
            let big = unsafe { &*(self.0.wrapping_sub(1) as *const Big) };
            (&big.full, big.tail.as_ref())
        } else {
            // SAFETY: an untagged non-null pointer is a live block's, and `Block` is a
            // transparent `NonNull<u8>`, laid out as the `*mut u8` it is read through.
            (&[], Some(unsafe { &*(&self.0 as *const *mut u8 as *const Block) }))
        }
    }

    /// Moves the storage out, leaving the slot empty.
    fn take(&mut self) -> Parts {
        let p = std::mem::replace(&mut self.0, std::ptr::null_mut());
        match NonNull::new(p) {
            None => Parts::Empty,
            // SAFETY: tagged: a pointer from `Box::into_raw` in `put`, plus one.
            Some(_) if p as usize & 1 == 1 => Parts::Big(unsafe { Box::from_raw(p.wrapping_sub(1) as *mut Big) }),
            Some(nn) => Parts::Small(Block(nn)),
        }
    }

    /// Stores `parts` in the (empty) slot.
    fn put(&mut self, parts: Parts) {
        debug_assert!(self.0.is_null());
        self.0 = match parts {
            Parts::Empty => std::ptr::null_mut(),
            Parts::Small(b) => {
                let p = b.0.as_ptr();
                std::mem::forget(b);
                p
            }
            Parts::Big(b) => (Box::into_raw(b) as *mut u8).wrapping_add(1),
        };
    }

    fn len(&self) -> usize {
        let (full, tail) = self.parts();
        full.len() * CHUNK + tail.map_or(0, Block::len)
    }

    fn get(&self, pos: usize) -> Option<Handle> {
        let (full, tail) = self.parts();
        if pos < full.len() * CHUNK {
            return full.get(pos / CHUNK)?.get(pos % CHUNK);
        }
        tail?.get(pos - full.len() * CHUNK)
    }

    /// Appends `h`; returns its position.
    fn push(&mut self, h: Handle) -> usize {
        let pos = self.len();
        let parts = match self.take() {
            Parts::Empty => {
                let mut t = Block::new(capacity_for(1));
                push_onto(&mut t, h);
                Parts::Small(t)
            }
            Parts::Small(mut t) => {
                push_onto(&mut t, h);
                if t.len() == CHUNK {
                    Parts::Big(Box::new(Big { full: vec![t], tail: None }))
                } else {
                    Parts::Small(t)
                }
            }
            Parts::Big(mut big) => {
                let t = big.tail.get_or_insert_with(|| Block::new(capacity_for(1)));
                push_onto(t, h);
                if t.len() == CHUNK {
                    if let Some(t) = big.tail.take() {
                        big.full.push(t);
                    }
                }
                Parts::Big(big)
            }
        };
        self.put(parts);
        pos
    }

    /// Removes the handle at `pos`; returns the handle moved into its place and that place (none
    /// when `pos` was the last).
    fn remove_at(&mut self, pos: usize) -> Option<(Handle, usize)> {
        match self.take() {
            Parts::Empty => None,
            Parts::Small(t) => {
                let mut tail = Some(t);
                let moved = remove_from(&mut [], &mut tail, pos);
                self.put(tail.map_or(Parts::Empty, Parts::Small));
                moved
            }
            Parts::Big(mut big) => {
                if big.tail.is_none() {
                    big.tail = big.full.pop();
                }
                let Big { full, tail } = &mut *big;
                let moved = remove_from(full, tail, pos);
                // Back to one block (or none) once no full block is left.
                self.put(if big.full.is_empty() {
                    big.tail.take().map_or(Parts::Empty, Parts::Small)
                } else {
                    Parts::Big(big)
                });
                moved
            }
        }
    }

    /// The position of `h`, by a scan of the positions from `from` on.
    fn find(&self, h: Handle, from: usize) -> Option<usize> {
        let want = pack(h);
        (from..self.len()).find(|&p| self.get(p).map(pack) == Some(want))
    }

    fn iter(&self) -> impl Iterator<Item = Handle> + '_ {
        let (full, tail) = self.parts();
        full.iter().chain(tail).flat_map(|b| b.bytes().chunks_exact(H).filter_map(unpack))
    }
}

/// Appends `h` to a block of under `CHUNK` handles, growing it a size class if full.
fn push_onto(t: &mut Block, h: Handle) {
    let len = t.len();
    if len == t.cap() {
        t.resize(capacity_for(len + 1));
    }
    t.put(len, pack(h));
    t.set_len(len + 1);
}

/// Removes position `pos` of the handles in `full` then `tail` (non-empty when any handle is
/// left): the last handle moves into the hole. Returns the moved handle and its new position.
fn remove_from(full: &mut [Block], tail: &mut Option<Block>, pos: usize) -> Option<(Handle, usize)> {
    let t = tail.as_mut()?;
    let last_i = t.len().checked_sub(1)?;
    let last_pos = full.len() * CHUNK + last_i;
    if pos > last_pos {
        return None;
    }
    let moved = if pos == last_pos {
        None
    } else {
        let mut h = [0u8; H];
        h.copy_from_slice(&t.bytes()[last_i * H..last_i * H + H]);
        if pos < full.len() * CHUNK {
            full[pos / CHUNK].put(pos % CHUNK, h);
        } else {
            t.put(pos - full.len() * CHUNK, h);
        }
        unpack(&h).map(|m| (m, pos))
    };
    t.set_len(last_i);
    if last_i == 0 {
        *tail = None;
    } else if last_i <= t.cap() / 2 {
        // Shrink once half empty: growing back takes as many pushes as it took removals.
        t.resize(capacity_for(last_i));
    }
    moved
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
        assert!(idx.slots[slot].0.is_null());
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
        // A slot's header is one pointer: the index's fixed part is 16384 of them.
        assert_eq!(std::mem::size_of::<SlotKeys>(), 8);
    }
}
