//! Sizes in Redis's listpack encoding: what an entry of a string or an integer takes, header,
//! payload and back-length. The list type counts its nodes in them (Redis decides where to cut a
//! quicklist node on listpack sizes), and the RDB reader walks listpacks with them.

/// A listpack's header (total bytes, entry count) and end byte.
pub const FRAME: usize = 7;

/// Bytes of the back-length that ends an entry whose encoding and payload take `encoded`.
pub fn backlen_bytes(encoded: usize) -> usize {
    match encoded {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// The entry of a string of `len` bytes.
pub fn string_entry_bytes(len: usize) -> usize {
    let header = if len < 64 {
        1
    } else if len < 4096 {
        2
    } else {
        5
    };
    header + len + backlen_bytes(header + len)
}

/// The entry of an integer, in the narrowest of listpack's integer encodings.
pub fn int_entry_bytes(v: i64) -> usize {
    let encoded = match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8_388_608..=8_388_607 => 4,
        _ if i32::try_from(v).is_ok() => 5,
        _ => 9,
    };
    encoded + backlen_bytes(encoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes of entries as Redis's listpack.c lays them out (lpEncodeBacklen, lpEncodeString,
    /// the integer encodings), at each boundary.
    #[test]
    fn entry_sizes_at_the_boundaries() {
        assert_eq!(string_entry_bytes(0), 2);
        assert_eq!(string_entry_bytes(63), 65);
        assert_eq!(string_entry_bytes(64), 67);
        assert_eq!(string_entry_bytes(125), 128);
        assert_eq!(string_entry_bytes(126), 130);
        assert_eq!(string_entry_bytes(4095), 4099);
        assert_eq!(string_entry_bytes(4096), 4103);
        assert_eq!([127, 128, -4096, 4096, -32769, 8_388_608, 1 << 31].map(int_entry_bytes), [2, 3, 3, 4, 5, 6, 10]);
    }
}
