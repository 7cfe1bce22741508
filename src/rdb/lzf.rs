//! LZF compression for the RDB writer, fast enough to run once per string of a large dataset.
//!
//! Why not `format::lzf_compress` (the `lzf` crate): it zeroes a fresh hash table on every
//! call, which dominates for short strings: a SAVE of 1M 100-byte values took 31 s with it
//! against 1.8 s uncompressed. liblzf (Redis's copy) avoids that by leaving its table
//! uninitialised and validating every candidate. Here the table is kept per thread across calls
//! with the same validation (the candidate must lie before the current position and its three
//! bytes must match), so stale entries only cost a missed match, never a wrong one. The output
//! is the standard LZF stream that Redis's `lzf_decompress` (and `format::lzf_decompress`) read:
//! literal runs of 1..=32 bytes (`000LLLLL`), and back-references of 3..=264 bytes within 8 KiB
//! (`LLLooooo [L] oooooooo`). The hash (liblzf's VERY_FAST one over a 2^16 table) and every match
//! and bound rule follow liblzf, so the bytes equal Redis's own: DUMP payloads are compared with it.

use std::cell::RefCell;

const HLOG: u32 = 16;
const MAX_LIT: usize = 32;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

thread_local! {
    static TABLE: RefCell<Vec<u32>> = RefCell::new(vec![0; 1 << HLOG]);
}

/// liblzf's hash slot of the three bytes at the start of `b` (its VERY_FAST variant). The same
/// table size, hash and match rules as Redis's copy make the output byte-identical to Redis's,
/// which DUMP payloads are compared against.
#[inline]
fn slot(b: &[u8]) -> usize {
    let h = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
    ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) & ((1 << HLOG) - 1)) as usize
}

/// Compresses `data`, as Redis does only when the result saves at least 4 bytes (it gives LZF
/// an output buffer of `len - 4`); `None` otherwise.
pub fn compress(data: &[u8]) -> Option<Vec<u8>> {
    let n = data.len();
    if n <= 4 {
        return None;
    }
    let limit = n - 4;
    TABLE.with(|t| {
        let mut table = t.borrow_mut();
        compress_with(data, limit, &mut table)
    })
}

/// liblzf's algorithm step for step, with `out.len()` as its output pointer (the control byte of
/// the open literal run is already in `out`) and `limit` as the output size it may not reach.
fn compress_with(data: &[u8], limit: usize, table: &mut [u32]) -> Option<Vec<u8>> {
    let n = data.len();
    let mut out: Vec<u8> = Vec::with_capacity(limit + MAX_LIT + 4);
    out.push(0);
    let mut lit = 0usize;
    let mut ip = 0usize;
    while ip + 2 < n {
        let h = slot(&data[ip..]);
        let r = table[h] as usize;
        table[h] = ip as u32;
        // liblzf never references position 0 (`ref > in_data`).
        let off = ip.wrapping_sub(r).wrapping_sub(1);
        if off < MAX_OFF && r > 0 && data[r..r + 3] == data[ip..ip + 3] {
            let maxlen = (n - ip - 2).min(MAX_REF);
            if out.len() + 4 >= limit && out.len() - usize::from(lit == 0) + 4 >= limit {
                return None;
            }
            // Close the literal run (drop its control byte if it is empty).
            let run_at = out.len() - lit - 1;
            out[run_at] = lit.wrapping_sub(1) as u8;
            if lit == 0 {
                out.pop();
            }
            // `len` ends as the number of matching bytes. liblzf first compares 16 bytes
            // without the `maxlen` bound when `maxlen > 16`, so a match may then run past it.
            let mut len = 2;
            let mut done = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if data[r + len] != data[ip + len] {
                        done = true;
                        break;
                    }
                }
            }
            if !done {
                loop {
                    len += 1;
                    if !(len < maxlen && data[r + len] == data[ip + len]) {
                        break;
                    }
                }
            }
            let code = len - 2;
            if code < 7 {
                out.push(((code << 5) | (off >> 8)) as u8);
            } else {
                out.push(((7 << 5) | (off >> 8)) as u8);
                out.push((code - 7) as u8);
            }
            out.push(off as u8);
            out.push(0);
            lit = 0;
            ip += len;
            if ip + 2 >= n {
                break;
            }
            // Index the last two positions of the match so runs keep matching.
            table[slot(&data[ip - 2..])] = (ip - 2) as u32;
            table[slot(&data[ip - 1..])] = (ip - 1) as u32;
        } else {
            if out.len() >= limit {
                return None;
            }
            out.push(data[ip]);
            ip += 1;
            lit += 1;
            if lit == MAX_LIT {
                let run_at = out.len() - lit - 1;
                out[run_at] = (MAX_LIT - 1) as u8;
                out.push(0);
                lit = 0;
            }
        }
    }
    if out.len() + 3 > limit {
        return None;
    }
    while ip < n {
        out.push(data[ip]);
        ip += 1;
        lit += 1;
        if lit == MAX_LIT {
            let run_at = out.len() - lit - 1;
            out[run_at] = (MAX_LIT - 1) as u8;
            out.push(0);
            lit = 0;
        }
    }
    let run_at = out.len() - lit - 1;
    out[run_at] = lit.wrapping_sub(1) as u8;
    if lit == 0 {
        out.pop();
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdb::format::lzf_decompress;

    fn round_trip(data: &[u8]) {
        if let Some(c) = compress(data) {
            assert!(c.len() <= data.len() - 4);
            assert_eq!(lzf_decompress(&c, data.len()).as_deref(), Some(data), "len {}", data.len());
        }
    }

    #[test]
    fn compresses_repetitive_data_and_round_trips() {
        let data = b"hello world ".repeat(1000);
        let c = compress(&data).expect("compressible");
        assert!(c.len() < data.len() / 10);
        round_trip(&data);
        round_trip(&[b'a'; 21]);
        round_trip(&[0u8; 100_000]);
        let mut v = b"value:123".to_vec();
        v.resize(100, 0);
        round_trip(&v);
    }

    #[test]
    fn random_and_mixed_inputs_round_trip() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in [5usize, 6, 20, 21, 33, 64, 100, 300, 1000, 8192, 9000, 70_000] {
            for mode in 0..4 {
                let data: Vec<u8> = (0..len)
                    .map(|i| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        match mode {
                            0 => x as u8,
                            1 => (x % 4) as u8,
                            2 => b"abcdefgh"[(i / 7) % 8],
                            _ => ((i * 31) % 251) as u8 ^ ((x % 2) as u8),
                        }
                    })
                    .collect();
                round_trip(&data);
            }
        }
        // Incompressible data is refused, as Redis stores it plain.
        let noise: Vec<u8> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(compress(&noise).is_none());
    }
}
