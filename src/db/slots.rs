//! The cluster's keys-per-hash-slot index (Redis's slots_to_keys): for each of the 16384 slots, a
//! handle to every key table entry whose key hashes there. CLUSTER COUNTKEYSINSLOT and
//! GETKEYSINSLOT, SETSLOT NODE's "do I still hold keys" check and the deletion of a lost slot's
//! keys read one slot's list instead of walking the whole keyspace (a walk cost ~50 ms per
//! GETKEYSINSLOT with a million keys, and a resharding calls it for every slot).
//!
//! Memory (issue 19: at most 8 bytes per key over standalone; Redis 7.0 pays 16 for its two
//! list pointers): one 8-byte handle per key, kept in fixed chunks of `CHUNK` handles (512 bytes,
//! an exact allocator size class, so nothing is lost to rounding), every chunk of a slot full but
//! its last. What comes on top is per slot, not per key: the chunk list and one partly filled
//! chunk. Removal finds the handle by a linear scan of its slot's chunks (contiguous memory:
//! with a million keys a slot holds ~60) and fills the hole with the slot's last handle.

use crate::types::table::EntryRef;
use crate::types::Value;
use crate::util::slot::SLOTS;

/// Handles per chunk.
const CHUNK: usize = 64;

type Handle = EntryRef<Value>;

/// One slot's handles: full chunks, then a tail of fewer than `CHUNK` (growing by doubling up
/// to `CHUNK`, so a slot holding a few keys costs little).
#[derive(Default)]
struct SlotKeys {
    // Boxed on purpose: a `Vec` of the arrays themselves would grow by doubling 512-byte
    // elements, up to twice the memory for full chunks; boxes cost one pointer per 64 keys.
    #[allow(clippy::vec_box)]
    full: Vec<Box<[Handle; CHUNK]>>,
    tail: Vec<Handle>,
}

impl SlotKeys {
    fn len(&self) -> usize {
        self.full.len() * CHUNK + self.tail.len()
    }

    fn push(&mut self, h: Handle) {
        if self.tail.capacity() == 0 {
            self.tail.reserve_exact(4);
        }
        self.tail.push(h);
        if self.tail.len() == CHUNK {
            let tail = std::mem::take(&mut self.tail);
            if let Ok(chunk) = Box::<[Handle; CHUNK]>::try_from(tail.into_boxed_slice()) {
                self.full.push(chunk);
            }
        }
    }

    /// Removes `h`; false when it is not there.
    fn remove(&mut self, h: Handle) -> bool {
        // Keep the tail non-empty while there are handles, so the hole can be filled from it.
        if self.tail.is_empty() {
            let Some(chunk) = self.full.pop() else { return false };
            self.tail = (chunk as Box<[Handle]>).into_vec();
        }
        // Recently added keys are the likeliest to go first: look at the tail, then the chunks
        // from the newest.
        let last = self.tail.len() - 1;
        if let Some(i) = self.tail.iter().rposition(|&e| e == h) {
            self.tail.swap_remove(i);
        } else {
            let found = self
                .full
                .iter()
                .enumerate()
                .rev()
                .find_map(|(c, chunk)| chunk.iter().position(|&e| e == h).map(|i| (c, i)));
            let Some((c, i)) = found else { return false };
            self.full[c][i] = self.tail[last];
            self.tail.pop();
        }
        if self.tail.is_empty() {
            self.tail = Vec::new();
        }
        true
    }

    fn iter(&self) -> impl Iterator<Item = Handle> + '_ {
        self.full.iter().flat_map(|c| c.iter().copied()).chain(self.tail.iter().copied())
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
    pub fn add(&mut self, slot: usize, h: Handle) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.push(h);
        }
    }

    pub fn remove(&mut self, slot: usize, h: Handle) -> bool {
        self.slots.get_mut(slot).is_some_and(|s| s.remove(h))
    }

    pub fn count(&self, slot: usize) -> usize {
        self.slots.get(slot).map_or(0, SlotKeys::len)
    }

    /// The handles of `slot`, newest chunk last.
    pub fn handles(&self, slot: usize) -> impl Iterator<Item = Handle> + '_ {
        self.slots.get(slot).into_iter().flat_map(SlotKeys::iter)
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

    /// Adds and removes keys of one slot in a shuffled order across chunk boundaries and checks
    /// the index lists exactly the keys present, every time.
    #[test]
    fn index_follows_inserts_and_removes_across_chunks() {
        let mut table: Table<Value> = Table::new();
        let mut idx = SlotIndex::default();
        let slot = 7;
        let mut present: Vec<Vec<u8>> = Vec::new();
        let mut rng = fastrand::Rng::with_seed(19);
        for round in 0..3000 {
            if present.is_empty() || rng.u32(..3) != 0 {
                let k = format!("k{round}").into_bytes();
                let (old, h) = table.insert_entry(&k, val(), 0);
                assert!(old.is_none());
                idx.add(slot, h);
                present.push(k);
            } else {
                let k = present.swap_remove(rng.usize(..present.len()));
                let (_, h) = table.remove_entry(&k).expect("present");
                assert!(idx.remove(slot, h));
            }
            if round % 97 == 0 || round > 2990 {
                let mut listed: Vec<Vec<u8>> =
                    idx.handles(slot).map(|h| unsafe { table.entry_key(h) }.to_vec()).collect();
                listed.sort();
                let mut want = present.clone();
                want.sort();
                assert_eq!(listed, want);
                assert_eq!(idx.count(slot), present.len());
            }
        }
        // Drain everything: the slot ends empty and holds no chunk.
        for k in std::mem::take(&mut present) {
            let (_, h) = table.remove_entry(&k).expect("present");
            assert!(idx.remove(slot, h));
        }
        assert_eq!(idx.count(slot), 0);
        assert!(idx.slots[slot].full.is_empty() && idx.slots[slot].tail.capacity() == 0);
    }
}
