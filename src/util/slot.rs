//! Redis Cluster's key → hash slot mapping: CRC16 (XMODEM polynomial 0x1021) of the key, or of
//! its hash tag (the bytes between the first `{` and the next `}` when that span is not empty),
//! modulo 16384. Kept here, below `db`, because the keyspace keeps a per-slot key count.

/// Number of hash slots in Redis Cluster.
pub const SLOTS: usize = 16384;

const fn crc16_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
}

/// `TABLES[k][i]`: the CRC of byte `i` followed by `k` zero bytes. The CRC being linear (no
/// initial or final xor), four bytes take one step of four lookups (slicing by 4) where the
/// byte loop takes four dependent steps: the slot of every key of every cluster command is
/// computed here.
const fn crc16_tables() -> [[u16; 256]; 4] {
    let t0 = crc16_table();
    let mut t = [[0u16; 256]; 4];
    t[0] = t0;
    let mut k = 1;
    while k < 4 {
        let mut i = 0;
        while i < 256 {
            let p = t[k - 1][i];
            t[k][i] = (p << 8) ^ t0[(p >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u16; 256]; 4] = crc16_tables();

/// One step over four bytes `w` (big-endian) from register `crc`.
#[inline(always)]
fn step4(crc: u16, w: u32) -> u16 {
    let x = w ^ ((crc as u32) << 16);
    TABLES[3][(x >> 24) as usize]
        ^ TABLES[2][((x >> 16) & 0xff) as usize]
        ^ TABLES[1][((x >> 8) & 0xff) as usize]
        ^ TABLES[0][(x & 0xff) as usize]
}

#[inline(always)]
fn step1(crc: u16, b: u8) -> u16 {
    (crc << 8) ^ TABLES[0][(((crc >> 8) as u8) ^ b) as usize]
}

/// CRC16-XMODEM of `data`, as Redis's crc16().
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    let mut quads = data.chunks_exact(4);
    for q in &mut quads {
        crc = step4(crc, u32::from_be_bytes([q[0], q[1], q[2], q[3]]));
    }
    for &b in quads.remainder() {
        crc = step1(crc, b);
    }
    crc
}

/// Whether the word has a byte `{` (`word ^ '{'...` has a zero byte; exact, no false hit).
#[inline(always)]
fn word_has_brace(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let x = w ^ (ONES * b'{' as u64);
    x.wrapping_sub(ONES) & !x & HIGHS != 0
}

/// Whether `key` holds a `{`, eight bytes at a time.
#[cfg(test)]
fn has_open_brace(key: &[u8]) -> bool {
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        if word_has_brace(u64::from_be_bytes(b)) {
            return true;
        }
    }
    words.remainder().contains(&b'{')
}

/// The hash slot of `key` (Redis's keyHashSlot). Every command with keys in cluster mode
/// computes it: one pass of eight bytes a step looks for a `{` and runs the CRC together (a
/// pass for each cost ~30% more on a 16-byte key); a key with a `{` (rare) goes to
/// `tagged_slot`.
#[inline]
pub fn key_hash_slot(key: &[u8]) -> usize {
    let mut crc: u16 = 0;
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let w = u64::from_be_bytes(b);
        if word_has_brace(w) {
            return tagged_slot(key);
        }
        crc = step4(step4(crc, (w >> 32) as u32), w as u32);
    }
    let rest = words.remainder();
    if rest.contains(&b'{') {
        return tagged_slot(key);
    }
    let mut quads = rest.chunks_exact(4);
    for q in &mut quads {
        crc = step4(crc, u32::from_be_bytes([q[0], q[1], q[2], q[3]]));
    }
    for &b in quads.remainder() {
        crc = step1(crc, b);
    }
    (crc & 0x3FFF) as usize
}

/// The slot of a key with a `{`: its tag's when a `}` closes a non-empty one after the first
/// `{`, else the whole key's.
#[cold]
fn tagged_slot(key: &[u8]) -> usize {
    let hashed = match key.iter().position(|&c| c == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&c| c == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    (crc16(hashed) & 0x3FFF) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // CLUSTER KEYSLOT answers from a real Redis 7.0.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(key_hash_slot(b"bar"), 5061);
        assert_eq!(key_hash_slot(b"{user1000}.following"), key_hash_slot(b"user1000"));
        assert_eq!(key_hash_slot(b"foo{}{bar}"), key_hash_slot(b"foo{}{bar}"));
        assert_eq!(key_hash_slot(b"{}x"), crc16(b"{}x") as usize & 0x3FFF);
        assert_eq!(key_hash_slot(b""), 0);
        // A tag anywhere (first byte, last, past the first word, unclosed, empty) is found.
        for k in [
            &b"key:000000001234"[..],
            b"a",
            b"x}y",
            b"}{",
            b"ab{",
            b"ab{c",
            b"{a}",
            b"zz{a}",
            b"q{}{a}",
            b"0123456789{tag}",
            b"01234567{",
            b"\xfb\x7b\x7a\x7c{}",
        ] {
            let tag = k.iter().position(|&c| c == b'{').and_then(|o| {
                k[o + 1..].iter().position(|&c| c == b'}').filter(|&l| l > 0).map(|l| &k[o + 1..o + 1 + l])
            });
            assert_eq!(key_hash_slot(k), crc16(tag.unwrap_or(k)) as usize & 0x3FFF, "{k:?}");
        }
    }

    /// Two bytes per step give the byte loop's CRC, for every length and byte value.
    #[test]
    fn sliced_crc_matches_the_byte_loop() {
        fn bytewise(data: &[u8]) -> u16 {
            data.iter().fold(0u16, |crc, &b| (crc << 8) ^ crc16_table()[(((crc >> 8) as u8) ^ b) as usize])
        }
        let mut rng = fastrand::Rng::with_seed(16);
        for len in 0..64 {
            for _ in 0..50 {
                let data: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
                assert_eq!(crc16(&data), bytewise(&data));
                assert_eq!(has_open_brace(&data), data.contains(&b'{'), "{data:?}");
                assert_eq!(key_hash_slot(&data), tagged_slot(&data), "{data:?}");
                // A brace in each position of each word, and the rest.
                if len > 0 {
                    let mut braced = data.clone();
                    braced[rng.usize(..len)] = b'{';
                    assert_eq!(key_hash_slot(&braced), tagged_slot(&braced), "{braced:?}");
                }
            }
        }
    }
}
