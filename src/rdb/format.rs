//! Constants of the RDB format and the two primitives every part of it uses: Redis's CRC-64
//! (CRC-64/REDIS, "Jones") and LZF string compression.

/// Oldest and newest `REDIS00NN` header versions we read.
pub const MIN_VERSION: u32 = 1;
pub const MAX_VERSION: u32 = 12;

/// Object type bytes (RDB_TYPE_*).
pub mod obj {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE_PRE_GA: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;
    /// Redis 7.4 hashes with field TTLs (RDB 12).
    pub const HASH_METADATA_PRE_GA: u8 = 22;
    pub const HASH_LISTPACK_EX_PRE_GA: u8 = 23;
    pub const HASH_METADATA: u8 = 24;
    pub const HASH_LISTPACK_EX: u8 = 25;
}

/// Opcodes that may appear where an object type byte is expected.
pub mod op {
    pub const SLOT_INFO: u8 = 244;
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION_PRE_GA: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// Length prefix forms: the two top bits of the first byte.
pub mod len {
    pub const BITS_6: u8 = 0;
    pub const BITS_14: u8 = 1;
    /// `0x80` = 32-bit big-endian length follows, `0x81` = 64-bit.
    pub const BITS_32_OR_64: u8 = 2;
    pub const ENCVAL: u8 = 3;
    pub const LEN_32: u8 = 0x80;
    pub const LEN_64: u8 = 0x81;
    /// Special string encodings (low six bits when the top bits are ENCVAL).
    pub const ENC_INT8: u8 = 0;
    pub const ENC_INT16: u8 = 1;
    pub const ENC_INT32: u8 = 2;
    pub const ENC_LZF: u8 = 3;
}

/// Quicklist 2 node containers.
pub const QUICKLIST_NODE_PLAIN: u64 = 1;
pub const QUICKLIST_NODE_PACKED: u64 = 2;

/// Module id reserved for the opcode-level MODULE_AUX "when" field.
pub const MODULE_OPCODE_EOF: u64 = 0;

const CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// DEBUG SET-SKIP-CHECKSUM-VALIDATION: RDB files and DUMP payloads load whatever their
/// checksum says (process-wide, as Redis's flag; the RDB loads on another thread).
pub static SKIP_CHECKSUM_VALIDATION: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn skip_checksum_validation() -> bool {
    SKIP_CHECKSUM_VALIDATION.load(std::sync::atomic::Ordering::Relaxed)
}

/// Redis's CRC-64 over `data` continuing from `crc` (0 to start).
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    let mut digest = CRC64.digest_with_initial(crc.reverse_bits());
    digest.update(data);
    digest.finalize()
}

/// LZF-compresses `data` as Redis does (only when it saves at least 4 bytes); `None` when it
/// would not shrink.
pub fn lzf_compress(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() <= 4 {
        return None;
    }
    match lzf::compress(data) {
        Ok(out) if out.len() < data.len() - 4 => Some(out),
        _ => None,
    }
}

/// Decompresses an LZF block that must expand to exactly `expected_len` bytes.
pub fn lzf_decompress(data: &[u8], expected_len: usize) -> Option<Vec<u8>> {
    match lzf::decompress(data, expected_len) {
        Ok(out) if out.len() == expected_len => Some(out),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_jones() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6d914c4b8d9ca);
        let split = crc64(crc64(0, b"1234"), b"56789");
        assert_eq!(split, 0xe9c6d914c4b8d9ca);
    }

    #[test]
    fn lzf_round_trip() {
        let data = b"abcabcabcabcabcabcabcabcabcabcabcabc".repeat(10);
        let packed = lzf_compress(&data).expect("compressible");
        assert_eq!(lzf_decompress(&packed, data.len()).unwrap(), data);
        assert!(lzf_compress(b"xyz").is_none());
    }
}
