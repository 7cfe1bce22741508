//! `CowVec`: one chunk of a big collection's storage that a reply snapshot can share; and
//! `Chunks`, a collection's whole chunk list whose snapshot costs no allocation or atomic
//! operation per chunk (for a skiplist zset's ~17.6k chunks at 2M members; see its doc).
//!
//! A big read (SMEMBERS, HGETALL of millions of elements) must not hold the executor while its
//! reply is encoded, yet its reply must be the collection as it was when the command ran. So the
//! command takes a snapshot instead: every chunk of the collection moves behind an `Arc` (one
//! small allocation per chunk of up to 1 MiB, no copy) and the snapshot holds a clone of each
//! `Arc`. The reply is then encoded on another thread while writers go on: a writer that touches
//! a chunk still shared copies just that chunk first (`make_mut`), so the snapshot keeps seeing
//! the old bytes and memory grows by at most the collection's size, chunk by chunk, only where
//! written. Once the snapshot is dropped the chunks are back to a count of one and `make_mut`
//! takes them back without copying. A collection never snapshotted keeps plain `Vec`s: no extra
//! allocation per key and no atomic operation on its paths. `Chunks` keeps the same promises
//! (snapshot as of the command, copy only the chunks written while one is alive) with a
//! snapshot that copies pointers instead of making `Arc`s.

use std::ops::Deref;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// A chunk owned outright, or shared with reply snapshots.
#[derive(Clone)]
pub enum CowVec<T> {
    Owned(Vec<T>),
    Shared(Arc<Vec<T>>),
}

impl<T> Default for CowVec<T> {
    fn default() -> Self {
        CowVec::Owned(Vec::new())
    }
}

impl<T> From<Vec<T>> for CowVec<T> {
    fn from(v: Vec<T>) -> Self {
        CowVec::Owned(v)
    }
}

impl<T> Deref for CowVec<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        match self {
            CowVec::Owned(v) => v,
            CowVec::Shared(a) => a,
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for CowVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// Equal when the contents are, shared or not.
impl<T: PartialEq> PartialEq for CowVec<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<'a, T> IntoIterator for &'a CowVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Clone> CowVec<T> {
    /// The chunk for writing: taken back from the `Arc` when no snapshot holds it any more,
    /// else copied (with the same capacity, so an arena's fill rule is unchanged).
    pub fn make_mut(&mut self) -> &mut Vec<T> {
        if let CowVec::Shared(a) = self {
            let owned = match Arc::get_mut(a) {
                Some(v) => std::mem::take(v),
                None => {
                    let mut v = Vec::with_capacity(a.capacity());
                    v.extend_from_slice(a);
                    v
                }
            };
            *self = CowVec::Owned(owned);
        }
        match self {
            CowVec::Owned(v) => v,
            CowVec::Shared(_) => unreachable!("made owned above"),
        }
    }
}

impl<T> CowVec<T> {
    /// A handle on the chunk as it is now, for a snapshot: the chunk moves behind an `Arc` (no
    /// copy) if it is not there yet.
    pub fn share(&mut self) -> Arc<Vec<T>> {
        if let CowVec::Owned(v) = self {
            *self = CowVec::Shared(Arc::new(std::mem::take(v)));
        }
        match self {
            CowVec::Shared(a) => a.clone(),
            CowVec::Owned(_) => unreachable!("made shared above"),
        }
    }
}

/// Chunked storage whose snapshot costs one pointer copy per chunk: no allocation and no atomic
/// operation per chunk (`CowVec::share` costs both, an `Arc` each).
///
/// Why: a 2M-member skiplist zset has ~17.6k chunks. Moving each behind an `Arc` on the first
/// snapshot took 1.3-1.75 ms of the executor; chunks kept behind `Arc`s from the start would
/// still pay one atomic increment per chunk, each on a cache line of its own that is cold by
/// then (measured: 1.2 ms for 17.6k `Arc<[T]>` clones after a cache flush, against 28 us to
/// copy their pointers). So the snapshot copies each chunk's pointer and length and holds one
/// `Arc` (a `Keep`) instead, and the storage tells frozen chunks by epoch: a chunk records the
/// epoch it was made in (`born`), and taking a snapshot freezes every chunk there is
/// (`frozen = epoch; epoch += 1`). A write into a chunk born at or before `frozen` asks whether
/// a snapshot is still alive (one load of the newest `Keep`'s count, through a `Weak`): if so it
/// copies the chunk and hands the old one to that `Keep`, which frees it when the last snapshot
/// that may read it goes (off the executor, where snapshots are dropped); if not, nothing is
/// frozen any more (`frozen = 0`) and it writes in place. With no snapshot alive (after the
/// first write that finds them gone), a write costs one comparison of `born` with `frozen`,
/// inlined, the copy being a cold call apart (`CowVec::make_mut` was a call of its own, copy
/// included).
///
/// Measured on a skiplist zset, the server (jemalloc), a loaded 2-core machine: with 2M members
/// the first ZRANGE z 0 -1 WITHSCORES after loading spent 860 us on the executor with an `Arc`
/// per chunk, 110 us now; later ones after 200 or 5000 writes 241-339 us, now 78-145 us
/// (SLOWLOG, wall time); ZADD on a 259k-member zset 23.9-24.3k instructions a request, now
/// 20.5-21.0k (callgrind; the treap's functions went from 317M to 248M instructions over 20000
/// requests); memory per member +0.06% at 2M members, +0.34% in 200-member zsets (the header
/// grew from 24 to 48 bytes and each chunk's entry from 24 to 32).
///
/// A `Keep` is the newest when it is made; when a later snapshot comes after writes that
/// retired chunks into it, the later one gets a new `Keep`, which the older links to (`next`):
/// a retired chunk goes to the newest `Keep`, and every snapshot that may read it holds that
/// `Keep` directly or through the links, while a `Keep` with only old chunks is freed once the
/// snapshots older than the next one have gone.
pub struct Chunks<T> {
    chunks: Vec<Chunk<T>>,
    /// Chunks born at or before this epoch may be read by a live snapshot (0: none).
    frozen: u64,
    /// The epoch of chunks made or copied now; always above `frozen`.
    epoch: u64,
    /// The newest snapshot's `Keep`, where retired chunks go.
    keep: Weak<Keep<T>>,
}

struct Chunk<T> {
    data: Vec<T>,
    born: u64,
}

/// Chunks retired while snapshots may still read them, freed with the last such snapshot.
struct Keep<T> {
    retired: Mutex<Vec<Vec<T>>>,
    /// The next newer `Keep`: chunks retired into it may be read by this one's snapshots too.
    next: OnceLock<Arc<Keep<T>>>,
}

impl<T> Drop for Keep<T> {
    /// Frees a chain of `Keep`s in a loop, not by recursion (many snapshots may have overlapped).
    fn drop(&mut self) {
        let mut next = self.next.take();
        while let Some(k) = next {
            next = Arc::into_inner(k).and_then(|mut k| k.next.take());
        }
    }
}

impl<T> Default for Chunks<T> {
    fn default() -> Self {
        Chunks { chunks: Vec::new(), frozen: 0, epoch: 1, keep: Weak::new() }
    }
}

impl<T> Chunks<T> {
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// Adds an empty chunk with room for `cap` elements (pushes up to `cap` never move it).
    pub fn push_chunk(&mut self, cap: usize) {
        self.chunks.push(Chunk { data: Vec::with_capacity(cap), born: self.epoch });
    }

    /// Chunk `c` for reading.
    #[inline]
    pub fn get(&self, c: usize) -> &Vec<T> {
        &self.chunks[c].data
    }

    pub fn iter(&self) -> impl Iterator<Item = &Vec<T>> {
        self.chunks.iter().map(|c| &c.data)
    }

    /// True when a snapshot is still alive; with none, nothing is frozen any more.
    fn snapshot_alive(&mut self) -> Option<Arc<Keep<T>>> {
        let keep = self.keep.upgrade();
        if keep.is_none() {
            // The last snapshot's drop released its reads of our chunks (`Arc`'s decrement is
            // a release); this orders our writes after them.
            fence(Ordering::Acquire);
            self.frozen = 0;
            self.keep = Weak::new();
        }
        keep
    }

    /// Drops every chunk, retiring those a live snapshot may read.
    pub fn clear(&mut self) {
        if self.frozen != 0 {
            if let Some(keep) = self.snapshot_alive() {
                let mut retired = keep.retired.lock().unwrap_or_else(|e| e.into_inner());
                retired.extend(self.chunks.drain(..).map(|c| c.data));
            }
        }
        self.chunks.clear();
    }

    /// A snapshot of every chunk as it is now: its pointer and length, and one `Arc`.
    pub fn snapshot(&mut self) -> ChunksSnapshot<T> {
        let keep = match self.keep.upgrade() {
            Some(k) if k.retired.lock().unwrap_or_else(|e| e.into_inner()).is_empty() => k,
            newest => {
                let k = Arc::new(Keep { retired: Mutex::new(Vec::new()), next: OnceLock::new() });
                if let Some(newest) = newest {
                    // Set only here, and only on the newest Keep, so never set twice.
                    let _ = newest.next.set(k.clone());
                }
                k
            }
        };
        self.keep = Arc::downgrade(&keep);
        self.frozen = self.epoch;
        self.epoch += 1;
        let parts = self.chunks.iter().map(|c| (c.data.as_ptr(), c.data.len())).collect();
        ChunksSnapshot { parts, _keep: keep }
    }
}

impl<T: Clone> Chunks<T> {
    /// Chunk `c` for writing: copied first (with the same capacity, so an arena's fill rule is
    /// unchanged) while a snapshot may read it.
    #[inline]
    pub fn get_mut(&mut self, c: usize) -> &mut Vec<T> {
        if self.chunks[c].born <= self.frozen {
            self.thaw(c);
        }
        &mut self.chunks[c].data
    }

    /// The last chunk for writing (see `get_mut`).
    pub fn last_mut(&mut self) -> Option<&mut Vec<T>> {
        let n = self.chunks.len();
        if n == 0 {
            None
        } else {
            Some(self.get_mut(n - 1))
        }
    }

    #[cold]
    fn thaw(&mut self, c: usize) {
        let epoch = self.epoch;
        if let Some(keep) = self.snapshot_alive() {
            let chunk = &mut self.chunks[c];
            let mut copy = Vec::with_capacity(chunk.data.capacity());
            copy.extend_from_slice(&chunk.data);
            let old = std::mem::replace(&mut chunk.data, copy);
            keep.retired.lock().unwrap_or_else(|e| e.into_inner()).push(old);
            chunk.born = epoch;
        }
    }
}

impl<T> Drop for Chunks<T> {
    /// A snapshot may outlive the collection (DEL while a big reply is encoded).
    fn drop(&mut self) {
        self.clear();
    }
}

/// A `Chunks` as it was when `Chunks::snapshot` ran: chunk `c` is `self[c]`.
pub struct ChunksSnapshot<T> {
    parts: Vec<(*const T, usize)>,
    _keep: Arc<Keep<T>>,
}

impl<T> ChunksSnapshot<T> {
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }
}

impl<T> std::ops::Index<usize> for ChunksSnapshot<T> {
    type Output = [T];
    #[inline]
    fn index(&self, c: usize) -> &[T] {
        let (p, n) = self.parts[c];
        // SAFETY: `p` pointed at `n` initialized elements of a chunk's buffer when the snapshot
        // was taken, and that buffer is neither written nor freed while this snapshot lives:
        // the chunk was frozen then (born <= frozen), so `Chunks` copies it before any write
        // (`get_mut`, `last_mut`: pushes too, so the buffer never moves) and hands the old
        // buffer to the newest `Keep` instead of freeing it (`thaw`, `clear`, drop), and this
        // snapshot holds that `Keep`, directly or through older `Keep`s' `next` links, for as
        // long as it lives. A write goes in place only once the newest `Keep` is gone, that is
        // once every snapshot is (with an acquire fence after seeing it, in `snapshot_alive`).
        unsafe { std::slice::from_raw_parts(p, n) }
    }
}

// SAFETY: the snapshot only reads elements that no one writes while it lives (see `index`), and
// may free them (the `Keep`) on the thread that drops it: as for `Arc<Vec<T>>`.
unsafe impl<T: Send + Sync> Send for ChunksSnapshot<T> {}
// SAFETY: as above; shared access only reads.
unsafe impl<T: Send + Sync> Sync for ChunksSnapshot<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_as_small_as_a_vec() {
        assert_eq!(std::mem::size_of::<CowVec<u8>>(), std::mem::size_of::<Vec<u8>>());
    }

    #[test]
    fn a_write_copies_only_while_shared() {
        let mut c: CowVec<u8> = Vec::with_capacity(16).into();
        c.make_mut().extend_from_slice(b"abc");
        let snap = c.share();
        c.make_mut().push(b'd');
        assert_eq!(&snap[..], b"abc");
        assert_eq!(&c[..], b"abcd");
        assert_eq!(c.capacity(), 16);
        let snap2 = c.share();
        drop(snap2);
        // No snapshot holds it: taken back without a copy.
        let p = c.as_ptr();
        c.make_mut().push(b'e');
        assert_eq!(c.as_ptr(), p);
        assert_eq!(&snap[..], b"abc");
    }

    fn snap_vec(s: &ChunksSnapshot<u32>) -> Vec<u32> {
        (0..s.len()).flat_map(|c| s[c].to_vec()).collect()
    }

    fn live_vec(c: &Chunks<u32>) -> Vec<u32> {
        c.iter().flatten().copied().collect()
    }

    /// `0..n` in chunks of `per` elements.
    fn filled(n: u32, per: usize) -> Chunks<u32> {
        let mut c = Chunks::default();
        for i in 0..n {
            if (i as usize).is_multiple_of(per) {
                c.push_chunk(per);
            }
            c.last_mut().unwrap().push(i);
        }
        c
    }

    /// Snapshots see the chunks as they were, through writes, pushes, overlapping snapshots
    /// (the older outliving the newer) and the storage's drop; writes with no snapshot left go
    /// in place.
    #[test]
    fn chunk_snapshots_keep_what_they_saw() {
        let mut c = filled(10, 4);
        let s1 = c.snapshot();
        let want1 = live_vec(&c);
        c.get_mut(0)[1] = 100;
        c.last_mut().unwrap().push(10);
        let s2 = c.snapshot();
        let want2 = live_vec(&c);
        // The chunk copied for s1 is frozen again for s2.
        c.get_mut(0)[2] = 200;
        c.get_mut(1)[0] = 300;
        drop(s2);
        c.get_mut(2)[0] = 400;
        c.push_chunk(4);
        assert_eq!(snap_vec(&s1), want1);
        assert_eq!(want2, [0, 100, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        let s3 = c.snapshot();
        let want3 = live_vec(&c);
        drop(c);
        assert_eq!(snap_vec(&s1), want1);
        assert_eq!(snap_vec(&s3), want3);
        assert_eq!(want3, [0, 100, 200, 3, 300, 5, 6, 7, 400, 9, 10]);
        drop(s1);
        assert_eq!(snap_vec(&s3), want3);

        let mut c: Chunks<u32> = Chunks::default();
        c.push_chunk(4);
        c.last_mut().unwrap().push(1);
        drop(c.snapshot());
        let p = c.get(0).as_ptr();
        c.get_mut(0).push(2);
        assert_eq!(c.get(0).as_ptr(), p);
        assert_eq!(c.get(0).capacity(), 4);
    }

    /// A snapshot held while many others come and go, each after a write, links a long chain of
    /// `Keep`s; freeing it must not recurse once per link.
    #[test]
    fn a_long_chain_of_keeps_frees_without_recursion() {
        let mut c: Chunks<u32> = Chunks::default();
        c.push_chunk(1);
        c.last_mut().unwrap().push(0);
        let first = c.snapshot();
        // Miri (which checks the unsafe reads) interprets: a shorter chain there.
        let links = if cfg!(miri) { 2_000 } else { 200_000 };
        for i in 1..links {
            c.get_mut(0)[0] = i;
            drop(c.snapshot());
        }
        assert_eq!(snap_vec(&first), [0]);
        drop(first);
        c.get_mut(0)[0] = 7;
        assert_eq!(live_vec(&c), [7]);
    }

    /// Snapshots read on other threads while the owner writes every chunk, takes newer
    /// snapshots and drops them: each sees what it saw when taken.
    #[test]
    fn snapshots_read_on_other_threads_while_written() {
        let (n, rounds, reads) = if cfg!(miri) { (256, 4, 3) } else { (4096, 8, 50) };
        let mut c = filled(n, 64);
        let mut readers = Vec::new();
        for round in 0..rounds {
            let snap = c.snapshot();
            let want = live_vec(&c);
            readers.push(std::thread::spawn(move || {
                for _ in 0..reads {
                    assert_eq!(snap_vec(&snap), want);
                }
            }));
            for k in 0..c.len() {
                for x in c.get_mut(k).iter_mut() {
                    *x = x.wrapping_mul(31).wrapping_add(round);
                }
            }
            if round % 3 == 0 {
                drop(c.snapshot());
            }
        }
        for r in readers {
            r.join().unwrap();
        }
    }
}
