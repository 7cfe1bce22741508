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

static CRC16_TABLE: [u16; 256] = crc16_table();

/// CRC16-XMODEM of `data`, as Redis's crc16().
pub fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc = (crc << 8) ^ CRC16_TABLE[(((crc >> 8) as u8) ^ b) as usize];
    }
    crc
}

/// The hash slot of `key` (Redis's keyHashSlot).
#[inline]
pub fn key_hash_slot(key: &[u8]) -> usize {
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
    }
}
