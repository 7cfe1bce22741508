//! Bit-level helpers over byte strings for the bitmap commands (SETBIT, BITCOUNT, BITPOS, BITOP,
//! BITFIELD). Bits are numbered as Redis numbers them: bit 0 is the most significant bit of byte 0.
//! Bits past the end of a string read as zero. Pure functions: no commands, no replies.

/// Whether bit `offset` is set; bits past the end read as zero.
pub fn get_bit(s: &[u8], offset: u64) -> bool {
    let byte = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    byte < s.len() && s[byte] & mask != 0
}

/// Sets or clears bit `offset` (which must lie inside `s`).
pub fn set_bit(s: &mut [u8], offset: u64, on: bool) {
    let byte = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    if on {
        s[byte] |= mask;
    } else {
        s[byte] &= !mask;
    }
}

/// Number of set bits in `s`.
pub fn popcount(s: &[u8]) -> u64 {
    let mut chunks = s.chunks_exact(8);
    let mut n: u64 = 0;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        n += u64::from_ne_bytes(w).count_ones() as u64;
    }
    n + chunks.remainder().iter().map(|b| b.count_ones() as u64).sum::<u64>()
}

/// Resolves a BITCOUNT/BITPOS `start`/`end` pair against a string of `len` bytes the way Redis
/// does (negative values count from the end, then both are clamped into the string). `is_bit`
/// says the indexes are bit indexes rather than byte indexes. Returns the inclusive bit range,
/// or `None` when it is empty.
pub fn resolve_range(len: usize, start: i64, end: i64, is_bit: bool) -> Option<(u64, u64)> {
    let total = if is_bit { (len as i64) << 3 } else { len as i64 };
    let mut start = if start < 0 { total.saturating_add(start) } else { start };
    let mut end = if end < 0 { total.saturating_add(end) } else { end };
    if start < 0 {
        start = 0;
    }
    if end < 0 {
        end = 0;
    }
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    if is_bit {
        Some((start as u64, end as u64))
    } else {
        Some(((start as u64) << 3, ((end as u64) << 3) | 7))
    }
}

/// Number of set bits in the inclusive bit range `[first, last]` (which must lie inside `s`).
pub fn count_bits(s: &[u8], first: u64, last: u64) -> u64 {
    let fb = (first >> 3) as usize;
    let lb = (last >> 3) as usize;
    let mut n = popcount(&s[fb..=lb]);
    // Take back the bits of the edge bytes that fall outside the range.
    let head = !(0xffu8 >> (first & 7));
    let tail = (0xffu16 >> ((last & 7) + 1)) as u8;
    n -= (s[fb] & head).count_ones() as u64;
    n -= (s[lb] & tail).count_ones() as u64;
    n
}

/// Position of the first bit equal to `bit` in the inclusive bit range `[first, last]` of `s`
/// (which must lie inside `s`), or `None`.
pub fn find_bit(s: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    let mut pos = first;
    // Walk bit by bit up to a byte boundary, then skip whole bytes that cannot match.
    while pos <= last {
        if pos & 7 == 0 && pos + 7 <= last {
            let b = s[(pos >> 3) as usize];
            if (bit && b == 0) || (!bit && b == 0xff) {
                pos += 8;
                continue;
            }
            let lead = if bit { b.leading_zeros() } else { (!b).leading_zeros() };
            return Some(pos + lead as u64);
        }
        if get_bit(s, pos) == bit {
            return Some(pos);
        }
        pos += 1;
    }
    None
}

/// The unsigned integer of `bits` bits (1..=64) stored at bit `offset`, most significant bit
/// first; bits past the end of `s` read as zero.
pub fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v: u64 = 0;
    for i in 0..bits as u64 {
        v = (v << 1) | get_bit(s, offset + i) as u64;
    }
    v
}

/// The signed (two's complement) integer of `bits` bits stored at bit `offset`.
pub fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(s, offset, bits);
    if bits < 64 && v & (1u64 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Stores the low `bits` bits of `value` at bit `offset` (which must lie inside `s`).
pub fn set_unsigned(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let on = value & (1u64 << (bits as u64 - 1 - i)) != 0;
        set_bit(s, offset + i, on);
    }
}

/// BITFIELD's OVERFLOW policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// Checks `value + incr` against an unsigned field of `bits` bits (1..=63). Returns `None` when
/// it fits, else the value to store under the policy (`None` inside for FAIL). The arithmetic
/// follows Redis's, wrap-arounds included, so odd inputs give the same answers.
pub fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<u64>> {
    let max: u64 = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let limit_high = || match ow {
        Overflow::Wrap => Some(wrap_unsigned(value, incr, bits)),
        Overflow::Sat => Some(max),
        Overflow::Fail => None,
    };
    if value > max || (incr > 0 && incr > maxincr) {
        return Some(limit_high());
    }
    if incr < 0 && incr < minincr {
        return Some(match ow {
            Overflow::Wrap => Some(wrap_unsigned(value, incr, bits)),
            Overflow::Sat => Some(0),
            Overflow::Fail => None,
        });
    }
    None
}

fn wrap_unsigned(value: u64, incr: i64, bits: u32) -> u64 {
    let res = value.wrapping_add(incr as u64);
    if bits >= 64 {
        res
    } else {
        res & !(u64::MAX << bits)
    }
}

/// Checks `value + incr` against a signed field of `bits` bits (1..=64), like `unsigned_overflow`.
pub fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<i64>> {
    let max: i64 = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min: i64 = -max - 1;
    // Redis computes both bounds up front with wrapping arithmetic; keep that, since the
    // comparisons below then behave the same on extreme inputs.
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wide = bits != 64;
    if value > max || (wide && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        return Some(match ow {
            Overflow::Wrap => Some(wrap_signed(value, incr, bits)),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        });
    }
    if value < min || (wide && incr < minincr) || (value < 0 && incr < 0 && incr < minincr) {
        return Some(match ow {
            Overflow::Wrap => Some(wrap_signed(value, incr, bits)),
            Overflow::Sat => Some(min),
            Overflow::Fail => None,
        });
    }
    None
}

fn wrap_signed(value: i64, incr: i64, bits: u32) -> i64 {
    let mut c = (value as u64).wrapping_add(incr as u64);
    if bits < 64 {
        let msb = 1u64 << (bits - 1);
        let mask = u64::MAX << bits;
        if c & msb != 0 {
            c |= mask;
        } else {
            c &= !mask;
        }
    }
    c as i64
}

/// BITOP's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// Combines `srcs` byte by byte into a string as long as the longest; shorter inputs are
/// zero-padded. NOT uses only the first source.
pub fn bitop(op: BitOp, srcs: &[&[u8]]) -> Vec<u8> {
    let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    let at = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(0);
    let Some((first, rest)) = srcs.split_first() else {
        return Vec::new();
    };
    let mut out = vec![0u8; maxlen];
    match op {
        BitOp::Not => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = !at(first, i);
            }
        }
        BitOp::And | BitOp::Or | BitOp::Xor => {
            out[..first.len()].copy_from_slice(first);
            for s in rest {
                match op {
                    BitOp::And => {
                        for (i, o) in out.iter_mut().enumerate() {
                            *o &= at(s, i);
                        }
                    }
                    BitOp::Or => {
                        for (o, b) in out.iter_mut().zip(s.iter()) {
                            *o |= b;
                        }
                    }
                    _ => {
                        for (o, b) in out.iter_mut().zip(s.iter()) {
                            *o ^= b;
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_msb_first() {
        let mut s = vec![0u8; 2];
        set_bit(&mut s, 1, true);
        set_bit(&mut s, 15, true);
        assert_eq!(s, [0x40, 0x01]);
        assert!(get_bit(&s, 1) && get_bit(&s, 15) && !get_bit(&s, 0) && !get_bit(&s, 100));
        set_bit(&mut s, 1, false);
        assert_eq!(s, [0x00, 0x01]);
    }

    #[test]
    fn ranges_and_counts() {
        assert_eq!(resolve_range(3, 0, -1, false), Some((0, 23)));
        assert_eq!(resolve_range(3, -2, -1, false), Some((8, 23)));
        assert_eq!(resolve_range(3, 2, 1, false), None);
        assert_eq!(resolve_range(3, 5, 100, true), Some((5, 23)));
        assert_eq!(resolve_range(0, 0, -1, false), None);
        assert_eq!(resolve_range(3, i64::MIN, i64::MAX, false), Some((0, 23)));
        let s = b"foobar";
        assert_eq!(popcount(s), 26);
        assert_eq!(count_bits(s, 8, 15), 6);
        assert_eq!(count_bits(s, 5, 30), 17);
        assert_eq!(count_bits(&[0xff], 3, 3), 1);
        let long: Vec<u8> = (0..100u8).collect();
        let naive: u64 = long.iter().map(|b| b.count_ones() as u64).sum();
        assert_eq!(popcount(&long), naive);
    }

    #[test]
    fn find_bits() {
        let s = [0xff, 0xf0, 0x00];
        assert_eq!(find_bit(&s, false, 0, 23), Some(12));
        assert_eq!(find_bit(&s, true, 0, 23), Some(0));
        assert_eq!(find_bit(&s, true, 12, 23), None);
        assert_eq!(find_bit(&s, true, 9, 23), Some(9));
        assert_eq!(find_bit(&[0xff, 0xff], false, 0, 15), None);
        assert_eq!(find_bit(&[0x00, 0x01], true, 0, 15), Some(15));
    }

    #[test]
    fn bitfields() {
        let mut s = vec![0u8; 9];
        set_unsigned(&mut s, 3, 8, 0xab);
        assert_eq!(get_unsigned(&s, 3, 8), 0xab);
        assert_eq!(get_signed(&s, 3, 8), 0xab_u8 as i8 as i64);
        set_unsigned(&mut s, 0, 64, u64::MAX);
        assert_eq!(get_signed(&s, 0, 64), -1);
        assert_eq!(get_unsigned(&[0x80], 0, 4), 8);
        assert_eq!(get_unsigned(&[0x80], 4, 8), 0);
    }

    #[test]
    fn overflow_rules() {
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), Some(Some(4)));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Sat), Some(Some(255)));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Fail), Some(None));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), Some(Some(0)));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Wrap), Some(Some(251)));
        assert_eq!(unsigned_overflow(5, 10, 8, Overflow::Wrap), None);
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Overflow::Sat), Some(Some(255)));
        assert_eq!(signed_overflow(120, 10, 8, Overflow::Wrap), Some(Some(-126)));
        assert_eq!(signed_overflow(120, 10, 8, Overflow::Sat), Some(Some(127)));
        assert_eq!(signed_overflow(-120, -10, 8, Overflow::Sat), Some(Some(-128)));
        assert_eq!(signed_overflow(-120, -10, 8, Overflow::Wrap), Some(Some(126)));
        assert_eq!(signed_overflow(i64::MAX, 1, 64, Overflow::Wrap), Some(Some(i64::MIN)));
        assert_eq!(signed_overflow(i64::MAX, 0, 64, Overflow::Wrap), None);
        assert_eq!(signed_overflow(i64::MIN, -1, 64, Overflow::Sat), Some(Some(i64::MIN)));
    }

    #[test]
    fn bitops() {
        assert_eq!(bitop(BitOp::And, &[b"\xff\x0f", b"\x0f"]), b"\x0f\x00");
        assert_eq!(bitop(BitOp::Or, &[b"\x01", b"\x10\x20"]), b"\x11\x20");
        assert_eq!(bitop(BitOp::Xor, &[b"\xff", b"\x0f", b""]), b"\xf0");
        assert_eq!(bitop(BitOp::Not, &[b"\x0f\xff"]), b"\xf0\x00");
        assert!(bitop(BitOp::And, &[b"", b""]).is_empty());
    }
}
