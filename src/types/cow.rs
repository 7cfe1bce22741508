//! `CowVec`: one chunk of a big collection's storage that a reply snapshot can share.
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
//! allocation per key and no atomic operation on its paths.

use std::ops::Deref;
use std::sync::Arc;

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
}
