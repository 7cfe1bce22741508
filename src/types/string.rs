//! Redis strings: integers kept as `i64` (encoding `int`), short strings inline in the value
//! (`embstr`), longer ones on the heap (`embstr` up to 44 bytes as Redis reports, `raw` beyond or
//! once modified in place by APPEND, SETRANGE or SETBIT, as Redis does).
//!
//! A big value written whole can also keep the allocation it arrived in (`RStr::adopt`), as Redis
//! keeps the query buffer a big argument was read into: storing it costs no copy, and copying a
//! 64 MiB value (with its page faults) held every other client back for tens of milliseconds.

use std::alloc::{self, Layout};
use std::ptr::{self, NonNull};

use bytes::Bytes;

/// Bytes that fit inline in a 16-byte value next to the tag and the length.
pub const INLINE_CAP: usize = 14;
/// Redis's OBJ_ENCODING_EMBSTR_SIZE_LIMIT.
pub const EMBSTR_LIMIT: usize = 44;

#[derive(Clone)]
pub enum RStr {
    /// A decimal integer in canonical form (what Redis stores as OBJ_ENCODING_INT).
    Int(i64),
    /// Up to `INLINE_CAP` bytes stored in the value itself.
    Inline(u8, [u8; INLINE_CAP]),
    /// Heap bytes written whole (reported as `embstr` when short, else `raw`).
    Heap(ThinBytes),
    /// Heap bytes that were modified in place (always reported `raw`); keeps spare capacity.
    Raw(Box<Vec<u8>>),
    /// A big value kept in the allocation it arrived in (reported `raw`); see `adopt`.
    Adopted(Box<Bytes>),
}

/// Equal when the strings are: the same bytes compare equal whatever their encodings.
impl PartialEq for RStr {
    fn eq(&self, other: &RStr) -> bool {
        match (self, other) {
            (RStr::Int(a), RStr::Int(b)) => a == b,
            _ => self.with_bytes(|a| other.with_bytes(|b| a == b)),
        }
    }
}

impl std::fmt::Debug for RStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RStr({:?}, {:?})", self.encoding_name(), String::from_utf8_lossy(&self.to_vec()))
    }
}

impl RStr {
    /// Stores `bytes` the way Redis's `tryObjectEncoding` would: as an integer when it is a
    /// canonical i64 of at most 20 chars, else inline or on the heap.
    pub fn from_bytes(bytes: &[u8]) -> RStr {
        if bytes.len() <= 20 {
            if let Some(n) = crate::util::num::parse_i64(bytes) {
                return RStr::Int(n);
            }
        }
        RStr::from_bytes_no_int(bytes)
    }

    /// Stores `bytes` as a string, never as an integer.
    pub fn from_bytes_no_int(bytes: &[u8]) -> RStr {
        if bytes.len() <= INLINE_CAP {
            let mut data = [0u8; INLINE_CAP];
            data[..bytes.len()].copy_from_slice(bytes);
            RStr::Inline(bytes.len() as u8, data)
        } else {
            RStr::Heap(ThinBytes::new(bytes))
        }
    }

    /// Stores `bytes` without copying them. The caller vouches that `bytes` is the whole of an
    /// allocation nothing else will keep (a big argument's own buffer): a slice of a bigger
    /// buffer would pin all of it for as long as the value lives. Short values are stored as
    /// `from_bytes` stores them, so the encoding is the one Redis reports.
    pub fn adopt(bytes: Bytes) -> RStr {
        if bytes.len() <= EMBSTR_LIMIT {
            return RStr::from_bytes(&bytes);
        }
        RStr::Adopted(Box::new(bytes))
    }

    pub fn from_i64(n: i64) -> RStr {
        RStr::Int(n)
    }

    /// Length in bytes of the string form.
    pub fn len(&self) -> usize {
        match self {
            RStr::Int(n) => itoa::Buffer::new().format(*n).len(),
            RStr::Inline(len, _) => *len as usize,
            RStr::Heap(v) => v.len(),
            RStr::Raw(v) => v.len(),
            RStr::Adopted(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with the string bytes, formatting integers on the stack.
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            RStr::Int(n) => {
                let mut buf = itoa::Buffer::new();
                f(buf.format(*n).as_bytes())
            }
            RStr::Inline(len, data) => f(&data[..*len as usize]),
            RStr::Heap(v) => f(v),
            RStr::Raw(v) => f(v),
            RStr::Adopted(v) => f(v),
        }
    }

    /// The bytes, borrowed when not an integer.
    pub fn as_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            RStr::Int(n) => std::borrow::Cow::Owned(itoa::Buffer::new().format(*n).as_bytes().to_vec()),
            RStr::Inline(len, data) => std::borrow::Cow::Borrowed(&data[..*len as usize]),
            RStr::Heap(v) => std::borrow::Cow::Borrowed(v),
            RStr::Raw(v) => std::borrow::Cow::Borrowed(v),
            RStr::Adopted(v) => std::borrow::Cow::Borrowed(v),
        }
    }

    pub fn to_vec(&self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// The integer value, if the string is a valid i64 (as INCR requires).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            RStr::Int(n) => Some(*n),
            _ => self.with_bytes(crate::util::num::parse_i64),
        }
    }

    /// Mutable heap bytes for in-place edits (APPEND, SETRANGE, SETBIT); the encoding becomes `raw`.
    pub fn make_raw(&mut self) -> &mut Vec<u8> {
        if !matches!(self, RStr::Raw(_)) {
            let bytes = match std::mem::replace(self, RStr::Int(0)) {
                RStr::Heap(v) => v.to_vec(),
                // The allocation becomes the Vec when nothing else holds it (no copy).
                RStr::Adopted(v) => Vec::from(*v),
                other => other.to_vec(),
            };
            *self = RStr::Raw(Box::new(bytes));
        }
        match self {
            RStr::Raw(v) => v,
            _ => unreachable!("just converted to Raw"),
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding_name(&self) -> &'static str {
        match self {
            RStr::Int(_) => "int",
            RStr::Inline(..) => "embstr",
            RStr::Heap(v) if v.len() <= EMBSTR_LIMIT => "embstr",
            RStr::Heap(_) | RStr::Raw(_) | RStr::Adopted(_) => "raw",
        }
    }
}

/// Immutable bytes behind one thin pointer: a `usize` length then the bytes, in a single
/// allocation. A 100-byte value costs one 112-byte block where `Box<Vec<u8>>` costs two (a 32-byte
/// Vec header plus the buffer), and the pointer is 8 bytes, so `Value` stays at 16.
pub struct ThinBytes(NonNull<u8>);

// SAFETY: ThinBytes owns its allocation exclusively and never mutates it after construction,
// exactly like Box<[u8]>.
unsafe impl Send for ThinBytes {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for ThinBytes {}

const LEN_HEADER: usize = std::mem::size_of::<usize>();

impl ThinBytes {
    fn layout(len: usize) -> Layout {
        match LEN_HEADER.checked_add(len).map(|size| Layout::from_size_align(size, LEN_HEADER)) {
            Some(Ok(layout)) => layout,
            _ => panic!("string of {len} bytes exceeds the address space"),
        }
    }

    pub fn new(bytes: &[u8]) -> ThinBytes {
        let layout = Self::layout(bytes.len());
        // SAFETY: the layout has a non-zero size (at least the length header).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else { alloc::handle_alloc_error(layout) };
        // SAFETY: the allocation is aligned for usize and holds the header plus `bytes.len()`
        // bytes; the source cannot overlap a fresh allocation.
        unsafe {
            ptr.as_ptr().cast::<usize>().write(bytes.len());
            ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.as_ptr().add(LEN_HEADER), bytes.len());
        }
        ThinBytes(ptr)
    }

    pub fn len(&self) -> usize {
        // SAFETY: the header was written by `new` and the allocation lives as long as self.
        unsafe { self.0.as_ptr().cast::<usize>().read() }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `new` initialised `len` bytes after the header; they live as long as self.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(LEN_HEADER), self.len()) }
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        // SAFETY: allocated by `new` with exactly this layout, and dropped once.
        unsafe { alloc::dealloc(self.0.as_ptr(), Self::layout(self.len())) }
    }
}

impl Clone for ThinBytes {
    fn clone(&self) -> ThinBytes {
        ThinBytes::new(self.as_slice())
    }
}

impl PartialEq for ThinBytes {
    fn eq(&self, other: &ThinBytes) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::ops::Deref for ThinBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_follow_redis() {
        assert_eq!(RStr::from_bytes(b"123").encoding_name(), "int");
        assert_eq!(RStr::from_bytes(b"0123").encoding_name(), "embstr");
        assert_eq!(RStr::from_bytes(&[b'a'; 44]).encoding_name(), "embstr");
        assert_eq!(RStr::from_bytes(&[b'a'; 45]).encoding_name(), "raw");
        let mut s = RStr::from_bytes(b"ab");
        s.make_raw().push(b'c');
        assert_eq!(s.encoding_name(), "raw");
        assert_eq!(s.to_vec(), b"abc");
        assert_eq!(RStr::from_bytes(b"-42").len(), 3);
    }

    #[test]
    fn thin_bytes_hold_any_length() {
        for len in [0usize, 1, 7, 8, 9, 100, 4096, 100_000] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let t = ThinBytes::new(&data);
            assert_eq!(t.len(), len);
            assert_eq!(&*t, &data[..]);
            let c = t.clone();
            drop(t);
            assert_eq!(c.as_slice(), &data[..]);
        }
        assert_eq!(std::mem::size_of::<RStr>(), 16);
    }

    #[test]
    fn adopted_values_keep_their_allocation() {
        let data = vec![7u8; 100_000];
        let at = data.as_ptr();
        let s = RStr::adopt(Bytes::from(data));
        assert_eq!(s.encoding_name(), "raw");
        assert_eq!(s.len(), 100_000);
        s.with_bytes(|b| assert_eq!(b.as_ptr(), at));
        let mut edited = s.clone();
        edited.make_raw().push(1);
        assert_eq!(edited.len(), 100_001);
        assert_eq!(s.len(), 100_000);
        // Short values take the encodings Redis reports for them.
        assert_eq!(RStr::adopt(Bytes::from_static(b"12")).encoding_name(), "int");
        assert_eq!(RStr::adopt(Bytes::from_static(b"abc")).encoding_name(), "embstr");
    }
}
