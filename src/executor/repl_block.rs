//! The replication stream's storage blocks: fixed-size, append-only buffers that the backlog
//! owns and each replica's outbox reads from (Redis 7.0's shared replication buffer blocks).
//!
//! Why not a `Bytes` per batch: a stream of tiny writes (one `SET` a batch) then carried a
//! 32-byte handle, a shared-count allocation and the data's own size-class rounding for every
//! 45 bytes of stream, and the handles' ring doubled to a power of two: a 1 MB backlog took
//! about 3 MB (redis-server 7.0: 1.15 MB, blocks of 16 KiB it appends to). Here the backlog holds
//! one `Arc` per 16 KiB block; a batch is copied into the tail block, and only when replicas
//! are attached does it become a `Bytes` (`Bytes::from_owner` of a [`BlockSlice`]) that their
//! outboxes share and drop once their connections took it.
//!
//! Soundness: a [`Block`]'s bytes are written only through its one [`BlockWriter`] (not
//! `Clone`, so one writer per block), and only beyond what was written before; a
//! [`BlockSlice`] only ever covers bytes written before it was made. So no byte is written
//! while anything can read it, and a slice reaches another thread only through a
//! synchronizing handoff (the outbox's mutex).

use std::cell::UnsafeCell;
use std::sync::Arc;

use bytes::Bytes;

/// A fixed-capacity buffer of the stream.
pub struct Block {
    data: Box<[UnsafeCell<u8>]>,
}

// SAFETY: shared references only read bytes below a length their writer had reached, and the
// one writer (`BlockWriter`, which needs `&mut`) only writes beyond it: no byte is written and
// read concurrently (see the module header).
unsafe impl Sync for Block {}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block({})", self.data.len())
    }
}

impl Block {
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// The bytes `start..end`, which must have been written.
    ///
    /// # Safety
    /// `end` is at most the length the block's writer had reached when the caller learnt it.
    unsafe fn bytes(&self, start: usize, end: usize) -> &[u8] {
        debug_assert!(start <= end && end <= self.data.len());
        // SAFETY: in bounds (checked by the caller's contract and the assertion); UnsafeCell<u8>
        // has u8's layout; these bytes are written already and never again (module header).
        unsafe { std::slice::from_raw_parts(UnsafeCell::raw_get(self.data.as_ptr().add(start)), end - start) }
    }
}

/// The only writer of a block: appends at its end.
#[derive(Debug)]
pub struct BlockWriter {
    block: Arc<Block>,
    len: usize,
}

impl BlockWriter {
    pub fn new(capacity: usize) -> BlockWriter {
        let data = (0..capacity).map(|_| UnsafeCell::new(0)).collect();
        BlockWriter { block: Arc::new(Block { data }), len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.block.capacity()
    }

    /// Appends as much of `src` as fits; returns how much did.
    pub fn append(&mut self, src: &[u8]) -> usize {
        let n = src.len().min(self.capacity() - self.len);
        // SAFETY: `len..len + n` is in bounds and not written yet, so no slice covers it (they
        // cover written bytes only), and `&mut self` makes this the only write.
        unsafe {
            let dst = UnsafeCell::raw_get(self.block.data.as_ptr().add(self.len));
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n);
        }
        self.len += n;
        n
    }

    /// What is written so far.
    pub fn written(&self) -> &[u8] {
        // SAFETY: `len` is this writer's own length, and `&self` excludes a write meanwhile.
        unsafe { self.block.bytes(0, self.len) }
    }

    /// A shareable view of the written bytes `start..end`.
    pub fn slice(&self, start: usize, end: usize) -> Bytes {
        assert!(start <= end && end <= self.len, "a block slice covers written bytes only");
        Bytes::from_owner(BlockSlice { block: self.block.clone(), start, end })
    }

    /// The block as written, for reading only.
    pub fn seal(self) -> Sealed {
        Sealed { block: self.block, len: self.len }
    }
}

/// A block no one writes any more.
#[derive(Debug)]
pub struct Sealed {
    block: Arc<Block>,
    len: usize,
}

impl Sealed {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.block.capacity()
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` is the writer's final length; nothing writes a sealed block.
        unsafe { self.block.bytes(0, self.len) }
    }
}

/// Written bytes of a block, kept alive by the replicas' outboxes that share them.
struct BlockSlice {
    block: Arc<Block>,
    start: usize,
    end: usize,
}

impl AsRef<[u8]> for BlockSlice {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: made by `BlockWriter::slice` over written bytes only.
        unsafe { self.block.bytes(self.start, self.end) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_stay_as_written_while_the_block_grows_and_after_the_writer_is_gone() {
        let mut w = BlockWriter::new(8);
        assert_eq!(w.append(b"abc"), 3);
        let first = w.slice(0, 3);
        assert_eq!(w.append(b"defghij"), 5, "only what fits");
        let second = w.slice(3, 8);
        let other_thread = std::thread::spawn(move || (first.to_vec(), second.to_vec()));
        assert_eq!(w.written(), b"abcdefgh");
        let sealed = w.seal();
        assert_eq!(sealed.bytes(), b"abcdefgh");
        let (a, b) = other_thread.join().unwrap();
        assert_eq!((&a[..], &b[..]), (&b"abc"[..], &b"defgh"[..]));
        let mut w = BlockWriter::new(4);
        let held = {
            w.append(b"xy");
            w.slice(1, 2)
        };
        drop(w);
        assert_eq!(&held[..], b"y", "a slice keeps its block alive");
    }

    #[test]
    #[should_panic(expected = "written bytes only")]
    fn a_slice_past_the_written_end_is_refused() {
        let mut w = BlockWriter::new(8);
        w.append(b"ab");
        let _ = w.slice(0, 3);
    }
}
