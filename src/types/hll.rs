//! HyperLogLog in Redis's exact in-string byte format, so an HLL written here reads back in
//! real Redis (GET/SET, DUMP/RESTORE, RDB) and the other way round. Pure functions over the
//! string bytes; the PF* commands live in `commands::hyperloglog`.
//!
//! Layout: a 16-byte header (`HYLL`, encoding byte, three unused bytes, cached cardinality as a
//! little-endian u64 whose top bit marks it stale) followed by the registers, 16384 of 6 bits:
//! - dense: 12288 bytes, register `i` at bit `6*i`, least significant bits first;
//! - sparse: run-length opcodes, ZERO `00xxxxxx` (1..64 zero registers), XZERO `01xxxxxx
//!   yyyyyyyy` (1..16384 zero registers), VAL `1vvvvvxx` (1..4 registers holding 1..32).
//!
//! New HLLs start sparse and are promoted to dense when a register needs a value above 32 or the
//! string would grow past `hll-sparse-max-bytes`. Every in-place edit (opcode splits, the merge
//! of neighbouring VAL opcodes, promotion) follows Redis step for step, since the bytes are
//! observable. Elements are hashed with MurmurHash64A (seed 0xadc83b19); the cardinality comes
//! from the register histogram with Ertl's improved estimator, as in Redis 4.0 and later.

/// Header bytes before the registers.
pub const HDR_SIZE: usize = 16;
/// Index bits of the hash (P).
pub const P: u32 = 14;
/// Hash bits left for the run of zeros (Q = 64 - P).
pub const Q: usize = 64 - P as usize;
pub const REGISTERS: usize = 1 << P;
const P_MASK: u64 = REGISTERS as u64 - 1;
pub const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
/// Length of a dense HLL string: header plus 16384 6-bit registers.
pub const DENSE_SIZE: usize = HDR_SIZE + (REGISTERS * BITS).div_ceil(8);
pub const DENSE: u8 = 0;
pub const SPARSE: u8 = 1;
const MAX_ENCODING: u8 = 1;

const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln(2), the estimator's alpha for an infinite number of registers.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
const HASH_SEED: u64 = 0xadc8_3b19;

/// The sparse representation does not add up to 16384 registers (or overruns them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// MurmurHash2, 64-bit version (MurmurHash64A), reading 8-byte blocks little-endian as Redis
/// does on every platform.
pub fn murmurhash64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let mut k = u64::from_le_bytes(w);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element lands in and the length of its `000..1` pattern (1..=Q+1).
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmurhash64a(ele, HASH_SEED);
    let index = (hash & P_MASK) as usize;
    // The sentinel bit at Q bounds the count at Q+1.
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// A fresh empty HLL: sparse, one XZERO opcode covering every register.
pub fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR_SIZE + 2);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.extend_from_slice(&[0u8; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(SPARSE_XZERO_MAX_LEN);
        push_xzero(&mut v, n);
        left -= n;
    }
    v
}

/// Whether `s` looks like an HLL: magic, a known encoding, and the exact size when dense.
/// (The sparse body is checked when it is walked.)
pub fn is_hll(s: &[u8]) -> bool {
    s.len() >= HDR_SIZE && &s[..4] == b"HYLL" && s[4] <= MAX_ENCODING && (s[4] != DENSE || s.len() == DENSE_SIZE)
}

/// The encoding byte (`DENSE` or `SPARSE`) of a validated HLL.
pub fn encoding(s: &[u8]) -> u8 {
    s[4]
}

/// The cached cardinality, when it is still valid.
pub fn cached_card(s: &[u8]) -> Option<u64> {
    if s[15] & 0x80 != 0 {
        return None;
    }
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[8..16]);
    Some(u64::from_le_bytes(w))
}

pub fn store_card(s: &mut [u8], card: u64) {
    s[8..16].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality stale (sets the top bit, keeps the other bytes as Redis does).
pub fn invalidate_card(s: &mut [u8]) {
    s[15] |= 0x80;
}

// ---------------------------------------------------------------------------------------------
// Dense registers.

/// Register `i` of a dense register area.
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let bit = i * BITS;
    let byte = bit / 8;
    let fb = bit & 7;
    let b0 = regs[byte] as u16;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> fb) | (b1 << (8 - fb))) & REGISTER_MAX as u16) as u8
}

/// Sets register `i` of a dense register area to `val` (0..=63).
pub fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let bit = i * BITS;
    let byte = bit / 8;
    let fb = bit & 7;
    let v = (val & REGISTER_MAX) as u16 as u32;
    let mask = (REGISTER_MAX as u32) << fb;
    regs[byte] = ((regs[byte] as u32 & !mask) | (v << fb)) as u8;
    if fb > 2 {
        let hi = (REGISTER_MAX as u32) >> (8 - fb);
        regs[byte + 1] = ((regs[byte + 1] as u32 & !hi) | (v >> (8 - fb))) as u8;
    }
}

/// Raises dense register `i` to `count` if it is lower. Returns whether it changed.
fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set(regs, i, count);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------------------------
// Sparse opcodes.

/// Byte `i`, or 0 past the end (a truncated XZERO reads the terminator Redis's strings carry).
fn byte_at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

const fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

const fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

const fn zero_len(b: u8) -> usize {
    (b & 0x3f) as usize + 1
}

fn xzero_len(s: &[u8], p: usize) -> usize {
    ((((s[p] & 0x3f) as usize) << 8) | byte_at(s, p + 1) as usize) + 1
}

fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}

const fn val_len(b: u8) -> usize {
    (b & 0x3) as usize + 1
}

fn val_op(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len as u8 - 1)
}

fn push_xzero(v: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    v.push(0x40 | (l >> 8) as u8);
    v.push((l & 0xff) as u8);
}

fn push_zeros(v: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        push_xzero(v, len);
    } else {
        v.push((len - 1) as u8);
    }
}

/// The registers a one-byte opcode covers (ZERO 1-64, VAL 1-4), by its byte; 0 for the first
/// byte of an XZERO, whose length takes two.
const ONE_BYTE_SPAN: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        table[b] = if is_zero(byte) {
            zero_len(byte) as u8
        } else if is_val(byte) {
            val_len(byte) as u8
        } else {
            0
        };
        b += 1;
    }
    table
};

/// One decoded sparse opcode: `len` registers holding `value` (0 for ZERO/XZERO).
struct Run {
    len: usize,
    value: u8,
}

/// Walks the sparse body of `s`, calling `f(first_register, run)` for each opcode. Fails when
/// the runs overrun 16384 registers or do not reach it.
fn walk_sparse(s: &[u8], mut f: impl FnMut(usize, Run)) -> Result<(), Corrupt> {
    let mut p = HDR_SIZE;
    let mut idx = 0usize;
    while p < s.len() {
        let b = s[p];
        let (run, oplen) = if is_zero(b) {
            (Run { len: zero_len(b), value: 0 }, 1)
        } else if is_xzero(b) {
            (Run { len: xzero_len(s, p), value: 0 }, 2)
        } else {
            (Run { len: val_len(b), value: val_value(b) }, 1)
        };
        if idx + run.len > REGISTERS {
            return Err(Corrupt);
        }
        let len = run.len;
        f(idx, run);
        idx += len;
        p += oplen;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    Ok(())
}

/// Converts a sparse HLL to dense in place (no-op when already dense). The header, cached
/// cardinality included, is kept; only the encoding byte changes. On a corrupt body `s` is
/// left untouched.
pub fn sparse_to_dense(s: &mut Vec<u8>) -> Result<(), Corrupt> {
    if s[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR_SIZE].copy_from_slice(&s[..HDR_SIZE]);
    dense[4] = DENSE;
    let regs = &mut dense[HDR_SIZE..];
    walk_sparse(s, |first, run| {
        if run.value != 0 {
            for i in first..first + run.len {
                dense_set(regs, i, run.value);
            }
        }
    })?;
    *s = dense;
    Ok(())
}

/// Raises register `index` to `count` if lower, in whichever encoding `s` has; a sparse HLL may
/// be promoted to dense on the way (when `count` exceeds 32 or the string would grow past
/// `sparse_max`). Returns whether the register changed. Does not touch the cached cardinality
/// of a dense HLL (callers invalidate it); sparse edits invalidate it as Redis does.
pub fn set_register(s: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, Corrupt> {
    if s[4] == DENSE {
        return Ok(dense_raise(&mut s[HDR_SIZE..], index, count));
    }
    sparse_set(s, index, count, sparse_max)
}

/// Adds one element. Returns whether a register changed.
pub fn add(s: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    let (index, count) = pattern(ele);
    set_register(s, index, count, sparse_max)
}

fn promote(s: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    sparse_to_dense(s)?;
    // A register needing promotion is always below `count`, so this always reports a change.
    dense_raise(&mut s[HDR_SIZE..], index, count);
    Ok(true)
}

fn sparse_set(s: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(s, index, count);
    }

    // Step 1: find the opcode covering `index`, remembering the one before it.
    let end = s.len();
    let mut p = HDR_SIZE;
    let mut first = 0usize;
    let mut prev: Option<usize> = None;
    let mut span = 0usize;
    while p < end {
        // One table load instead of a three-way branch on the opcode's kind, whose pattern
        // (VAL and ZERO interleaved as the registers fall) the CPU mispredicts.
        let oplen = match ONE_BYTE_SPAN[s[p] as usize] {
            0 => {
                span = xzero_len(s, p);
                2
            }
            n => {
                span = n as usize;
                1
            }
        };
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Corrupt);
    }

    let b = s[p];
    let (zero, xzero) = (is_zero(b), is_xzero(b));
    let runlen = if zero {
        zero_len(b)
    } else if xzero {
        xzero_len(s, p)
    } else {
        val_len(b)
    };

    // Step 2: the cheap cases are edited in place.
    let mut in_place = false;
    if is_val(b) {
        if val_value(b) >= count {
            return Ok(false);
        }
        in_place = runlen == 1;
    } else if zero && runlen == 1 {
        in_place = true;
    }

    if in_place {
        s[p] = val_op(count, 1);
    } else {
        // Otherwise split the opcode around `index`: at most XZERO, VAL, XZERO (5 bytes).
        let last = first + span - 1;
        let mut seq: Vec<u8> = Vec::with_capacity(5);
        if zero || xzero {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        } else {
            let cur = val_value(b);
            if index != first {
                seq.push(val_op(cur, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(cur, last - index));
            }
        }

        // Step 3: replace the opcode, unless the string would outgrow the sparse limit.
        let oldlen = if xzero { 2 } else { 1 };
        if seq.len() > oldlen && s.len() + (seq.len() - oldlen) > sparse_max {
            return promote(s, index, count);
        }
        // A truncated XZERO (corrupt input) has one byte fewer than `oldlen`; Redis's length
        // arithmetic then drops the last byte of the new sequence, and so do we.
        let missing = (p + oldlen).saturating_sub(s.len());
        seq.truncate(seq.len() - missing);
        let stop = (p + oldlen).min(s.len());
        s.splice(p..stop, seq);
    }

    // Step 4: merge neighbouring VAL opcodes of equal value, scanning at most five opcodes
    // from the one before the edit, exactly as Redis does (the bytes are observable).
    let mut end = s.len();
    let mut p = prev.unwrap_or(HDR_SIZE);
    let mut scan = 5;
    while p < end && scan > 0 {
        scan -= 1;
        let b = s[p];
        if is_xzero(b) {
            p += 2;
            continue;
        }
        if is_zero(b) {
            p += 1;
            continue;
        }
        if p + 1 < end && is_val(s[p + 1]) {
            let v1 = val_value(b);
            let v2 = val_value(s[p + 1]);
            if v1 == v2 {
                let len = val_len(b) + val_len(s[p + 1]);
                if len <= SPARSE_VAL_MAX_LEN {
                    s[p + 1] = val_op(v1, len);
                    s.remove(p);
                    end -= 1;
                    continue;
                }
            }
        }
        p += 1;
    }

    invalidate_card(s);
    Ok(true)
}

// ---------------------------------------------------------------------------------------------
// Merging and counting.

/// Folds `s` into `max` (16384 one-byte registers): `max[i] = max(max[i], reg[i])`.
pub fn merge_into(max: &mut [u8], s: &[u8]) -> Result<(), Corrupt> {
    if s[4] == DENSE {
        let regs = &s[HDR_SIZE..];
        for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
            let v = dense_get(regs, i);
            if v > *m {
                *m = v;
            }
        }
        return Ok(());
    }
    walk_sparse(s, |first, run| {
        if run.value != 0 {
            for m in &mut max[first..first + run.len] {
                if run.value > *m {
                    *m = run.value;
                }
            }
        }
    })
}

/// Histogram of register values of an HLL string (fails on a corrupt sparse body).
pub fn histogram(s: &[u8]) -> Result<[u32; 64], Corrupt> {
    let mut h = [0u32; 64];
    if s[4] == DENSE {
        let regs = &s[HDR_SIZE..];
        for i in 0..REGISTERS {
            h[dense_get(regs, i) as usize] += 1;
        }
        return Ok(h);
    }
    walk_sparse(s, |_, run| h[run.value as usize] += run.len as u32)?;
    Ok(h)
}

/// Histogram of 16384 one-byte registers (the merged form PFCOUNT builds for several keys).
pub fn raw_histogram(regs: &[u8]) -> [u32; 64] {
    let mut h = [0u32; 64];
    for &r in regs {
        h[(r & 63) as usize] += 1;
    }
    h
}

/// Ertl's sigma function ("New cardinality estimation algorithms for HyperLogLog sketches").
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

/// Ertl's tau function.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The estimated cardinality from a register histogram.
pub fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    // C's llround: halves away from zero, as f64::round does.
    (ALPHA_INF * m * m / z).round() as u64
}

/// The estimated cardinality of an HLL string (ignoring the cache).
pub fn count(s: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&histogram(s)?))
}

/// PFDEBUG DECODE's text: `z:N` for ZERO, `Z:N` for XZERO, `v:V,N` for VAL, space separated.
pub fn decode_sparse(s: &[u8]) -> String {
    let mut out = String::new();
    let mut p = HDR_SIZE;
    while p < s.len() {
        let b = s[p];
        if !out.is_empty() {
            out.push(' ');
        }
        if is_zero(b) {
            out.push_str(&format!("z:{}", zero_len(b)));
            p += 1;
        } else if is_xzero(b) {
            out.push_str(&format!("Z:{}", xzero_len(s, p)));
            p += 2;
        } else {
            out.push_str(&format!("v:{},{}", val_value(b), val_len(b)));
            p += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 3000;

    #[test]
    fn bytes_match_real_redis() {
        // `PFADD t a b c foo` then GET, PFCOUNT, GET on redis-server 7.0.15.
        let mut h = new_sparse();
        for e in [&b"a"[..], b"b", b"c", b"foo"] {
            assert_eq!(add(&mut h, e, MAX), Ok(true));
        }
        invalidate_card(&mut h);
        let body = b"\\\xb3\x90D>\x80P\xb1\x84K\xfb\x80BZ";
        let mut want = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80".to_vec();
        want.extend_from_slice(body);
        assert_eq!(h, want);
        assert_eq!(cached_card(&h), None);
        let card = count(&h).unwrap();
        assert_eq!(card, 4);
        store_card(&mut h, card);
        assert_eq!(&h[8..16], b"\x04\0\0\0\0\0\0\0");
    }

    #[test]
    fn empty_hll_layout() {
        let h = new_sparse();
        assert_eq!(h, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert!(is_hll(&h));
        assert_eq!(cached_card(&h), Some(0));
        assert_eq!(count(&h), Ok(0));
        assert_eq!(decode_sparse(&h), "Z:16384");
    }

    #[test]
    fn dense_registers_round_trip() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR_SIZE];
        let mut state = 12345u64;
        let mut model = vec![0u8; REGISTERS];
        for _ in 0..3 {
            for (i, m) in model.iter_mut().enumerate() {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let v = (state >> 58) as u8;
                *m = v;
                dense_set(&mut regs, i, v);
            }
            for (i, m) in model.iter().enumerate() {
                assert_eq!(dense_get(&regs, i), *m, "register {i}");
            }
        }
    }

    #[test]
    fn sparse_splits_and_merges() {
        let mut h = new_sparse();
        assert_eq!(sparse_set(&mut h, 1000, 2, MAX), Ok(true));
        assert_eq!(decode_sparse(&h), "Z:1000 v:2,1 Z:15383");
        assert_eq!(sparse_set(&mut h, 1020, 3, MAX), Ok(true));
        assert_eq!(sparse_set(&mut h, 1021, 3, MAX), Ok(true));
        assert_eq!(decode_sparse(&h), "Z:1000 v:2,1 z:19 v:3,2 Z:15362");
        assert_eq!(sparse_set(&mut h, 1021, 2, MAX), Ok(false));
        assert_eq!(sparse_set(&mut h, 1001, 2, MAX), Ok(true));
        assert_eq!(decode_sparse(&h), "Z:1000 v:2,2 z:18 v:3,2 Z:15362");
        assert_eq!(h[15] & 0x80, 0x80);
        // The same registers through the dense path give the same counts.
        let mut d = h.clone();
        sparse_to_dense(&mut d).unwrap();
        assert_eq!(d.len(), DENSE_SIZE);
        assert_eq!(count(&d), count(&h));
        assert_eq!(dense_get(&d[HDR_SIZE..], 1021), 3);
    }

    #[test]
    fn promotion_on_big_value_and_size() {
        let mut h = new_sparse();
        assert_eq!(sparse_set(&mut h, 5, 33, MAX), Ok(true));
        assert_eq!(encoding(&h), DENSE);
        assert_eq!(dense_get(&h[HDR_SIZE..], 5), 33);

        let mut h = new_sparse();
        let mut i = 0;
        while encoding(&h) == SPARSE {
            add(&mut h, format!("ele{i}").as_bytes(), 200).unwrap();
            assert!(h.len() <= 200 || encoding(&h) == DENSE);
            i += 1;
        }
        assert_eq!(h.len(), DENSE_SIZE);
    }

    #[test]
    fn estimates_are_close() {
        let mut sparse = new_sparse();
        let mut dense = new_sparse();
        sparse_to_dense(&mut dense).unwrap();
        for i in 0..20000u32 {
            let e = i.to_le_bytes();
            add(&mut sparse, &e, MAX).unwrap();
            add(&mut dense, &e, MAX).unwrap();
            if i == 999 {
                assert_eq!(encoding(&sparse), SPARSE);
                assert_eq!(count(&sparse), count(&dense));
                let c = count(&sparse).unwrap() as f64;
                assert!((c - 1000.0).abs() < 50.0, "{c}");
            }
        }
        let c = count(&dense).unwrap() as f64;
        assert!((c - 20000.0).abs() < 20000.0 * 0.05, "{c}");
        let mut max = vec![0u8; REGISTERS];
        merge_into(&mut max, &sparse).unwrap();
        assert_eq!(estimate(&raw_histogram(&max)), count(&dense).unwrap());
    }

    #[test]
    fn corrupt_sparse_is_detected() {
        let mut h = new_sparse();
        h.truncate(HDR_SIZE + 1);
        h[HDR_SIZE] = 0x00; // ZERO:1, far short of 16384 registers
        assert_eq!(count(&h), Err(Corrupt));
        assert_eq!(sparse_set(&mut h, 100, 1, MAX), Err(Corrupt));
        let mut max = vec![0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &h), Err(Corrupt));
        let before = h.clone();
        assert_eq!(sparse_to_dense(&mut h), Err(Corrupt));
        assert_eq!(h, before);
        let mut over = new_sparse();
        over.extend_from_slice(&[0x00]);
        assert_eq!(count(&over), Err(Corrupt));
    }
}
