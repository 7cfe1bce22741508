//! LEB128 unsigned varints: the length and integer prefix of the packed encodings (hash, zset
//! and stream buffers, and the RDB loader that builds them directly): 7 bits a byte, low bits
//! first, the high bit set on every byte but the last.

/// Appends `v`.
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads the varint at `*pos` and moves `*pos` past it. The buffers are ours, so well formed; a
/// truncated one reads what is there and an overlong one ignores bits past 64, rather than
/// panicking.
#[inline]
pub fn get(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0u32;
    while let Some(&b) = buf.get(*pos) {
        *pos += 1;
        if shift < 64 {
            v |= ((b & 0x7f) as u64) << shift;
        }
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    v
}

/// How many bytes `put` writes for `v`.
#[inline]
pub fn len(v: u64) -> usize {
    (u64::BITS - (v | 1).leading_zeros()).div_ceil(7) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_lengths() {
        for v in [0u64, 1, 127, 128, 300, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(out.len(), len(v), "{v}");
            let mut pos = 0;
            assert_eq!(get(&out, &mut pos), v);
            assert_eq!(pos, out.len());
        }
        let mut pos = 0;
        assert_eq!(get(&[0x80, 0x80], &mut pos), 0, "truncated");
        let mut pos = 0;
        assert_eq!(get(&[0xff; 12], &mut pos), u64::MAX >> 1 | 1 << 63, "overlong");
    }
}
