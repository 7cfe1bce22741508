//! Builders for the packed containers Redis embeds in RDB strings, writer side: listpack (RDB 10+
//! lists, hashes, zsets, sets and every stream node), ziplist (RDB 9 lists, hashes and zsets)
//! and intset. Each builder appends entries and `finish`es into the exact byte layout Redis's
//! loader validates (header counts, back-lengths, terminator). Integer-looking strings are stored
//! as integers, as Redis's own `lpAppend`/`ziplistPush` do, so files match what Redis writes.

use crate::util::num::parse_i64;

/// The integer a string spells when a packed container would store it as one (Redis's
/// `lpStringToInt64`/`string2ll`: canonical decimal, at most 20 bytes).
fn packed_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    parse_i64(s)
}

/// What the list, hash and sorted-set writers need of a packed container: the same code builds
/// a listpack (RDB 10+) or a ziplist (RDB 9).
pub trait Packer: Default {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn bytes(&self) -> usize;
    fn push_str(&mut self, s: &[u8]);
    fn push_int(&mut self, v: i64);
    fn finish(self) -> Vec<u8>;
}

macro_rules! packer {
    ($t:ty) => {
        impl Packer for $t {
            fn len(&self) -> usize {
                <$t>::len(self)
            }
            fn bytes(&self) -> usize {
                <$t>::bytes(self)
            }
            fn push_str(&mut self, s: &[u8]) {
                <$t>::push_str(self, s)
            }
            fn push_int(&mut self, v: i64) {
                <$t>::push_int(self, v)
            }
            fn finish(self) -> Vec<u8> {
                <$t>::finish(self)
            }
        }
    };
}
packer!(Listpack);
packer!(Ziplist);

/// A listpack under construction.
#[derive(Debug, Default)]
pub struct Listpack {
    body: Vec<u8>,
    count: usize,
}

impl Listpack {
    pub fn new() -> Listpack {
        Listpack::default()
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the finished listpack would take.
    pub fn bytes(&self) -> usize {
        self.body.len() + 7
    }

    /// Appends a string entry (an integer entry when the string is a canonical integer).
    pub fn push_str(&mut self, s: &[u8]) {
        if let Some(v) = packed_int(s) {
            return self.push_int(v);
        }
        let start = self.body.len();
        let n = s.len();
        if n < 64 {
            self.body.push(0x80 | n as u8);
        } else if n < 4096 {
            self.body.push(0xE0 | (n >> 8) as u8);
            self.body.push(n as u8);
        } else {
            self.body.push(0xF0);
            self.body.extend_from_slice(&(n as u32).to_le_bytes());
        }
        self.body.extend_from_slice(s);
        self.backlen(start);
    }

    /// Appends an integer entry in the narrowest encoding.
    pub fn push_int(&mut self, v: i64) {
        let start = self.body.len();
        if (0..=127).contains(&v) {
            self.body.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u16) & 0x1FFF;
            self.body.push(0xC0 | (u >> 8) as u8);
            self.body.push(u as u8);
        } else if (-32768..=32767).contains(&v) {
            self.body.push(0xF1);
            self.body.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            self.body.push(0xF2);
            self.body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            self.body.push(0xF3);
            self.body.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.body.push(0xF4);
            self.body.extend_from_slice(&v.to_le_bytes());
        }
        self.backlen(start);
    }

    /// The back-length after an entry: its size in 7-bit groups, most significant first, every
    /// byte but the first flagged so the entry can be found walking backwards.
    fn backlen(&mut self, start: usize) {
        let l = (self.body.len() - start) as u64;
        let groups = match l {
            0..=127 => 1,
            128..=16382 => 2,
            16383..=2_097_150 => 3,
            2_097_151..=268_435_454 => 4,
            _ => 5,
        };
        for i in (0..groups).rev() {
            let b = ((l >> (7 * i)) & 127) as u8;
            self.body.push(if i == groups - 1 { b } else { b | 128 });
        }
        self.count += 1;
    }

    /// The finished listpack: total bytes, entry count (65535 = "count it"), entries, 0xFF.
    pub fn finish(self) -> Vec<u8> {
        let total = self.body.len() + 7;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        out.extend_from_slice(&(self.count.min(65535) as u16).to_le_bytes());
        out.extend_from_slice(&self.body);
        out.push(0xFF);
        out
    }
}

/// A ziplist under construction (RDB 9 and older).
#[derive(Debug, Default)]
pub struct Ziplist {
    body: Vec<u8>,
    count: usize,
    prev_len: usize,
    tail: usize,
}

impl Ziplist {
    pub fn new() -> Ziplist {
        Ziplist::default()
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn bytes(&self) -> usize {
        self.body.len() + 11
    }

    fn prevlen(&mut self) {
        if self.prev_len < 254 {
            self.body.push(self.prev_len as u8);
        } else {
            self.body.push(254);
            self.body.extend_from_slice(&(self.prev_len as u32).to_le_bytes());
        }
    }

    /// Appends a string entry (an integer entry when a canonical integer under 32 bytes).
    pub fn push_str(&mut self, s: &[u8]) {
        if s.len() < 32 {
            if let Some(v) = packed_int(s) {
                return self.push_int(v);
            }
        }
        let start = self.body.len();
        self.prevlen();
        let n = s.len();
        if n <= 63 {
            self.body.push(n as u8);
        } else if n <= 16383 {
            self.body.push(0x40 | (n >> 8) as u8);
            self.body.push(n as u8);
        } else {
            self.body.push(0x80);
            self.body.extend_from_slice(&(n as u32).to_be_bytes());
        }
        self.body.extend_from_slice(s);
        self.done(start);
    }

    pub fn push_int(&mut self, v: i64) {
        let start = self.body.len();
        self.prevlen();
        if (0..=12).contains(&v) {
            self.body.push(0xF1 + v as u8);
        } else if (i8::MIN as i64..=i8::MAX as i64).contains(&v) {
            self.body.push(0xFE);
            self.body.push(v as i8 as u8);
        } else if (i16::MIN as i64..=i16::MAX as i64).contains(&v) {
            self.body.push(0xC0);
            self.body.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-8_388_608..=8_388_607).contains(&v) {
            self.body.push(0xF0);
            self.body.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
            self.body.push(0xD0);
            self.body.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            self.body.push(0xE0);
            self.body.extend_from_slice(&v.to_le_bytes());
        }
        self.done(start);
    }

    fn done(&mut self, start: usize) {
        self.tail = start;
        self.prev_len = self.body.len() - start;
        self.count += 1;
    }

    /// The finished ziplist: total bytes, tail offset, count (65535 = "count it"), entries, 0xFF.
    pub fn finish(self) -> Vec<u8> {
        let total = self.body.len() + 11;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&(total as u32).to_le_bytes());
        let tail = if self.count == 0 { 10 } else { 10 + self.tail };
        out.extend_from_slice(&(tail as u32).to_le_bytes());
        out.extend_from_slice(&(self.count.min(65535) as u16).to_le_bytes());
        out.extend_from_slice(&self.body);
        out.push(0xFF);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_layout_matches_redis() {
        // "a", 1, -1, 300, 70000, 2^40: a 6-bit string, then the 7-bit, 13-bit, 13-bit,
        // 24-bit and 64-bit integer encodings, each followed by its back-length.
        let mut lp = Listpack::new();
        lp.push_str(b"a");
        lp.push_str(b"1");
        lp.push_int(-1);
        lp.push_int(300);
        lp.push_int(70000);
        lp.push_int(1 << 40);
        let b = lp.finish();
        assert_eq!(&b[..6], &[b.len() as u8, 0, 0, 0, 6, 0]);
        assert_eq!(&b[6..9], &[0x81, b'a', 2]);
        assert_eq!(&b[9..11], &[1, 1]);
        assert_eq!(&b[11..14], &[0xDF, 0xFF, 2]);
        assert_eq!(&b[14..17], &[0xC1, 0x2C, 2]);
        assert_eq!(&b[17..22], &[0xF2, 0x70, 0x11, 0x01, 4]);
        assert_eq!(&b[22..32], &[0xF4, 0, 0, 0, 0, 0, 1, 0, 0, 9]);
        assert_eq!(b[32], 0xFF);
    }

    #[test]
    fn listpack_long_backlen() {
        let mut lp = Listpack::new();
        lp.push_str(&[b'x'; 200]);
        let b = lp.finish();
        // 2-byte header + 200 = 202 = 0b1_1001010: [1, 0xCA]
        assert_eq!(&b[6..8], &[0xE0, 200]);
        assert_eq!(&b[208..210], &[1, 0x4A | 0x80]);
    }

    #[test]
    fn ziplist_layout() {
        let mut z = Ziplist::new();
        z.push_str(b"ab");
        z.push_str(b"5");
        z.push_int(-200);
        let b = z.finish();
        assert_eq!(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, b.len());
        assert_eq!(&b[8..10], &[3, 0]);
        assert_eq!(&b[10..14], &[0, 2, b'a', b'b']);
        assert_eq!(&b[14..16], &[4, 0xF6]);
        assert_eq!(&b[16..20], &[2, 0xC0, 0x38, 0xFF]);
        assert_eq!(u32::from_le_bytes([b[4], b[5], b[6], b[7]]), 16);
        assert_eq!(*b.last().unwrap(), 0xFF);
    }
}
