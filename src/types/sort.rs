//! What SORT sorts, apart from how the command reads its input: the elements loaded from a
//! list, set or zset snapshot (`Objs`, `Item`), Redis's comparator (sortCompare), and weights
//! parsed as C's strtod parses them. The command (`commands::sort`) and its walk
//! (`executor::sort_walk`) both use it.

use crate::types::list::ListSnapshot;
use crate::types::set::SetSnapshot;
use crate::types::zset::ZSetSnapshot;

/// One element being sorted with its weight, in 16 bytes: where its bytes are in the buffer all
/// elements share (`Objs`), and its weight: a number's bits, or (ALPHA with BY) where the
/// looked-up bytes are in that buffer (`NO_WEIGHT`: the key is missing). An owned `Vec` per
/// element, a weight beside it and a `Reply` per element in the reply peaked at +143 MiB over
/// steady state for a BY or GET SORT of 1M small integers (Redis +49 MiB).
pub struct Item {
    pub at: usize,
    pub w: u64,
}

/// ALPHA BY's weight of an element whose weight key is missing (sorts first).
pub const NO_WEIGHT: u64 = u64::MAX;

impl Item {
    pub fn score(&self) -> f64 {
        f64::from_bits(self.w)
    }
}

/// The loaded elements' bytes (and ALPHA BY's weights), back to back, each after its length
/// as a varint.
pub struct Objs(pub Vec<u8>);

impl Objs {
    pub fn get(&self, at: usize) -> &[u8] {
        let (mut len, mut shift, mut i) = (0usize, 0, at);
        loop {
            let b = self.0[i];
            len |= ((b & 0x7f) as usize) << shift;
            i += 1;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        &self.0[i..i + len]
    }

    pub fn of(&self, it: &Item) -> &[u8] {
        self.get(it.at)
    }

    pub fn append(&mut self, b: &[u8]) -> usize {
        let at = self.0.len();
        let mut len = b.len();
        while len >= 0x80 {
            self.0.push((len as u8) | 0x80);
            len >>= 7;
        }
        self.0.push(len as u8);
        self.0.extend_from_slice(b);
        at
    }

    pub fn push(&mut self, items: &mut Vec<Item>, b: &[u8]) {
        let at = self.append(b);
        items.push(Item { at, w: 0f64.to_bits() });
    }
}

/// The bytes before the first NUL: what C string functions see of a Redis string.
pub fn cstr(b: &[u8]) -> &[u8] {
    match memchr::memchr(0, b) {
        Some(i) => &b[..i],
        None => b,
    }
}

/// What a deferred SORT reads: a snapshot of its collection (for a list or zset read without
/// sorting, only the LIMIT range, in the order it is read).
pub enum SortSource {
    List(ListSnapshot),
    Set(SetSnapshot),
    ZSet(ZSetSnapshot),
}

/// Loads a snapshot's elements as `sort_generic` loads the live collection (a SORT walk's first
/// step, on a thread of its own): a list or zset read without sorting holds the range alone, in
/// the order read, which then starts at 0. Returns the elements and the range to reply.
pub fn sort_load(
    source: &SortSource,
    dontsort: bool,
    desc: bool,
    mut start: i64,
    mut end: i64,
    n: usize,
) -> (Objs, Vec<Item>, i64, i64) {
    let mut items: Vec<Item> = Vec::new();
    let mut objs = Objs(Vec::new());
    match source {
        SortSource::List(l) => {
            l.for_each(|e| match e {
                crate::types::list::Elem::Int(v) => objs.push(&mut items, itoa::Buffer::new().format(v).as_bytes()),
                crate::types::list::Elem::Bytes(b) => objs.push(&mut items, b),
            });
            if dontsort && end >= start {
                if desc {
                    items.reverse();
                }
                end -= start;
                start = 0;
            }
        }
        SortSource::Set(set) => set.for_each(|m| objs.push(&mut items, m)),
        SortSource::ZSet(z) if dontsort => {
            if n > 0 {
                let s = start as usize;
                z.walk(s, s + n - 1, desc, &mut |m, _| {
                    objs.push(&mut items, m);
                    true
                });
            }
            end -= start;
            start = 0;
        }
        SortSource::ZSet(z) => z.walk(0, usize::MAX, false, &mut |m, _| {
            objs.push(&mut items, m);
            true
        }),
    }
    (objs, items, start, end)
}

/// The error a SORT of a member that is not a number replies with.
pub const NOT_A_DOUBLE: &str = "ERR One or more scores can't be converted into double";

/// Redis's sortCompare, before DESC is applied.
pub fn compare(a: &Item, b: &Item, objs: &Objs, alpha: bool, by: bool, store: bool) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (ao, bo) = (objs.of(a), objs.of(b));
    if !alpha {
        let (sa, sb) = (a.score(), b.score());
        if sa > sb {
            Ordering::Greater
        } else if sa < sb {
            Ordering::Less
        } else {
            ao.cmp(bo)
        }
    } else if by {
        match (a.w, b.w) {
            (NO_WEIGHT, NO_WEIGHT) => Ordering::Equal,
            (NO_WEIGHT, _) => Ordering::Less,
            (_, NO_WEIGHT) => Ordering::Greater,
            (x, y) => {
                let (x, y) = (objs.get(x as usize), objs.get(y as usize));
                if store {
                    x.cmp(y)
                } else {
                    cstr(x).cmp(cstr(y))
                }
            }
        }
    } else if store {
        ao.cmp(bo)
    } else {
        cstr(ao).cmp(cstr(bo))
    }
}

/// Parses a weight as Redis does: C `strtod` over the string up to its first NUL, which must be
/// consumed entirely, with overflow/underflow (ERANGE) and NaN rejected. An empty string is 0.
pub fn strtod(b: &[u8]) -> Option<f64> {
    let s = cstr(b);
    // A plain decimal integer: strtod's correctly rounded double is the integer's own rounding.
    if let Some(n) = crate::util::num::parse_i64(s) {
        return Some(n as f64);
    }
    let (mut on_stack, mut on_heap) = ([0u8; 64], Vec::new());
    let buf: &[u8] = if s.len() < on_stack.len() {
        on_stack[..s.len()].copy_from_slice(s);
        &on_stack[..=s.len()]
    } else {
        on_heap.extend_from_slice(s);
        on_heap.push(0);
        &on_heap
    };
    let mut end: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `buf` is NUL-terminated and outlives the call; strtod only reads up to the NUL and
    // stores a pointer into `buf` in `end`. errno is thread-local.
    let (d, consumed, erange) = unsafe {
        *libc::__errno_location() = 0;
        let d = libc::strtod(buf.as_ptr() as *const libc::c_char, &mut end);
        let consumed = end.offset_from(buf.as_ptr() as *const libc::c_char) as usize;
        (d, consumed, *libc::__errno_location() == libc::ERANGE)
    };
    if consumed != s.len() || erange || d.is_nan() {
        return None;
    }
    Some(d)
}

/// How many elements' BY or GET lookups are named (and their buckets asked of memory) at once.
pub const LOOKUPS_AHEAD: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_follows_c() {
        assert_eq!(strtod(b"1.5"), Some(1.5));
        assert_eq!(strtod(b" 2"), Some(2.0));
        assert_eq!(strtod(b""), Some(0.0));
        assert_eq!(strtod(b"0x10"), Some(16.0));
        assert_eq!(strtod(b"3\0junk"), Some(3.0));
        assert_eq!(strtod(b"inf"), Some(f64::INFINITY));
        assert_eq!(strtod(b"nan"), None);
        assert_eq!(strtod(b"1e400"), None);
        assert_eq!(strtod(b"1x"), None);
        assert_eq!(strtod(b"2 "), None);
        assert!(strtod(b"-0").is_some_and(|d| d == 0.0 && d.is_sign_negative()));
        assert_eq!(strtod(b"9007199254740993"), Some(9007199254740992.0));
        assert_eq!(strtod(b"-9223372036854775808"), Some(-9223372036854775808.0));
        assert_eq!(strtod(b"+5"), Some(5.0));
        assert_eq!(strtod(b"007"), Some(7.0));
        let long = format!("{}.5", "1".repeat(80));
        assert_eq!(strtod(long.as_bytes()), long.parse().ok());
    }

    #[test]
    fn alpha_compares_up_to_nul_unless_storing() {
        let (mut objs, mut items) = (Objs(Vec::new()), Vec::new());
        objs.push(&mut items, b"a\0z");
        objs.push(&mut items, &[b'b'; 300]);
        objs.push(&mut items, b"a\0b");
        assert_eq!(objs.of(&items[1]), &[b'b'; 300][..], "a length over one varint byte");
        items.remove(1);
        assert_eq!(compare(&items[0], &items[1], &objs, true, false, false), std::cmp::Ordering::Equal);
        assert_eq!(compare(&items[0], &items[1], &objs, true, false, true), std::cmp::Ordering::Greater);
    }
}
