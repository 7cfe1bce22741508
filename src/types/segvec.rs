//! `SegVec`: a vector stored as segments of at most `SEG` elements, so growing a big one never
//! copies it whole. A `Vec` doubling at 2M elements copies 16 MB in one push (tens of ms on the
//! executor); here only the last segment grows by doubling, up to `SEG` elements (512 KiB of
//! `u64`), and every other segment is full and never moves. Indexing is one shift and one mask.
//! It supports what a dense slab needs: push, swap_remove, index, iteration. Segments are
//! `CowVec`s, so a reply snapshot can share them (`share`) and a write copies only the segment
//! it touches while the snapshot lives.

use std::sync::Arc;

use super::cow::CowVec;

/// Elements per segment (a power of two).
const SEG_BITS: u32 = 16;
const SEG: usize = 1 << SEG_BITS;

/// A vector in segments: all but the last are exactly `SEG` long.
#[derive(Clone, Default)]
pub struct SegVec<T> {
    segs: Vec<CowVec<T>>,
}

impl<T: Clone> SegVec<T> {
    pub fn with_capacity(n: usize) -> Self {
        let segs = if n == 0 { Vec::new() } else { vec![Vec::with_capacity(n.min(SEG)).into()] };
        SegVec { segs }
    }

    /// Derived rather than stored, so a `SegVec` is as small as a `Vec`.
    pub fn len(&self) -> usize {
        self.segs.last().map_or(0, |last| (self.segs.len() - 1) * SEG + last.len())
    }

    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    pub fn push(&mut self, v: T) {
        match self.segs.last_mut() {
            Some(last) if last.len() < SEG => {
                let last = last.make_mut();
                if last.len() == last.capacity() {
                    // Double, but never past SEG, so full segments hold exactly SEG.
                    let want = (last.capacity() * 2).clamp(4, SEG);
                    last.reserve_exact(want - last.len());
                }
                last.push(v);
            }
            _ => {
                let mut seg = Vec::with_capacity(if self.segs.is_empty() { 4 } else { SEG });
                seg.push(v);
                self.segs.push(seg.into());
            }
        }
    }

    /// Removes the last element.
    pub fn pop(&mut self) -> Option<T> {
        let last = self.segs.last_mut()?.make_mut();
        let v = last.pop();
        if last.is_empty() {
            self.segs.pop();
        }
        v
    }

    /// Removes element `i`, moving the last element into its place.
    pub fn swap_remove(&mut self, i: usize) -> T {
        let len = self.len();
        assert!(i < len, "swap_remove index {i} out of bounds ({len})");
        let last = self.pop().unwrap_or_else(|| unreachable!("non-empty"));
        if i == len - 1 {
            last
        } else {
            std::mem::replace(&mut self[i], last)
        }
    }

    pub fn iter(&self) -> std::iter::Flatten<std::slice::Iter<'_, CowVec<T>>> {
        self.segs.iter().flatten()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.segs.iter_mut().flat_map(|s| s.make_mut().iter_mut())
    }

    /// The segments as they are now, shared with a snapshot (see `types::cow`).
    pub fn share(&mut self) -> Vec<Arc<Vec<T>>> {
        self.segs.iter_mut().map(CowVec::share).collect()
    }

    /// Elements allocated for.
    pub fn capacity(&self) -> usize {
        self.segs.iter().map(|s| s.capacity()).sum()
    }

    /// Gives back the last segment's spare room beyond `min` elements in total.
    pub fn shrink_to(&mut self, min: usize) {
        let full = self.len() - self.segs.last().map_or(0, |s| s.len());
        if let Some(last) = self.segs.last_mut() {
            last.make_mut().shrink_to(min.saturating_sub(full));
        }
    }
}

impl<T: Clone> std::ops::Index<usize> for SegVec<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        &self.segs[i >> SEG_BITS][i & (SEG - 1)]
    }
}

impl<T: Clone> std::ops::IndexMut<usize> for SegVec<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.segs[i >> SEG_BITS].make_mut()[i & (SEG - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a Vec model across segment boundaries.
    #[test]
    fn model() {
        fastrand::seed(3);
        let mut s: SegVec<u64> = SegVec::with_capacity(10);
        let mut m: Vec<u64> = Vec::new();
        for round in 0..600_000u64 {
            if m.is_empty() || fastrand::u8(..10) < if (round / 150_000) % 2 == 0 { 8 } else { 1 } {
                s.push(round);
                m.push(round);
            } else {
                let i = fastrand::usize(..m.len());
                assert_eq!(s.swap_remove(i), m.swap_remove(i));
            }
            assert_eq!(s.len(), m.len());
            if round % 50_001 == 0 {
                assert!(s.iter().eq(m.iter()));
                for (k, seg) in s.segs.iter().enumerate() {
                    assert!(seg.len() <= SEG && (k + 1 == s.segs.len() || seg.len() == SEG));
                }
                if let Some(i) = m.len().checked_sub(1) {
                    s[i] += 1;
                    m[i] += 1;
                    assert_eq!(s[i], m[i]);
                }
            }
        }
        s.shrink_to(0);
        assert!(s.iter().eq(m.iter()));
    }
}
