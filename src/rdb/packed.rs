//! Decoders for the packed blobs Redis embeds in RDB strings: ziplist, listpack, intset and
//! zipmap. Each one validates the whole blob before handing out a single element (the
//! sanitize-dump-payload "deep" rules: header sizes, every entry's length staying inside the
//! blob, back-lengths matching, terminators, declared counts), so a corrupt file becomes an
//! error and never an out-of-bounds read. Errors are plain reasons; the RDB reader adds the
//! file offset.

/// One element of a packed blob: bytes borrowed from the blob, or an integer entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PElem<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl PElem<'_> {
    /// Calls `f` with the element's string form (integers formatted on the stack).
    pub fn with_bytes<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            PElem::Str(s) => f(s),
            PElem::Int(v) => f(itoa::Buffer::new().format(v).as_bytes()),
        }
    }

    pub fn to_vec(self) -> Vec<u8> {
        self.with_bytes(|b| b.to_vec())
    }

    /// The element as an integer: an integer entry, or a string spelling one canonically.
    pub fn as_int(self) -> Option<i64> {
        match self {
            PElem::Int(v) => Some(v),
            PElem::Str(s) => crate::util::num::parse_i64(s),
        }
    }
}

pub type PResult<T> = Result<T, String>;

fn le_u32(b: &[u8], at: usize) -> PResult<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| "truncated header".to_string())
}

fn le_uint(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(x)
}

/// Sign-extends the little-endian integer in `b` (1..=8 bytes).
fn le_int(b: &[u8]) -> i64 {
    let shift = 64 - 8 * b.len() as u32;
    ((le_uint(b) << shift) as i64) >> shift
}

// ---------------------------------------------------------------------------------------------
// ziplist

const ZL_HEADER: usize = 10;

/// Every entry of a ziplist, validated: total and tail offsets, each entry's prevlen equal to the
/// previous entry's size, entries inside the blob, the 0xFF terminator, and the count when the
/// header holds one (it saturates at 65535).
pub fn ziplist(blob: &[u8]) -> PResult<Vec<PElem<'_>>> {
    if blob.len() < ZL_HEADER + 1 {
        return Err("ziplist shorter than its header".into());
    }
    let total = le_u32(blob, 0)? as usize;
    let tail = le_u32(blob, 4)? as usize;
    let count = u16::from_le_bytes([blob[8], blob[9]]) as usize;
    if total != blob.len() {
        return Err(format!("ziplist header says {total} bytes, blob has {}", blob.len()));
    }
    if blob[total - 1] != 0xFF {
        return Err("ziplist not terminated by 0xFF".into());
    }
    let mut out = Vec::with_capacity(count.min(blob.len() / 2));
    let mut pos = ZL_HEADER;
    let mut prev_size = 0usize;
    let mut last_start = ZL_HEADER;
    let end = total - 1;
    while pos < end {
        let start = pos;
        let first = blob[pos];
        let prevlen = if first < 254 {
            pos += 1;
            first as usize
        } else if first == 254 {
            let v = le_u32(blob, pos + 1)? as usize;
            pos += 5;
            v
        } else {
            return Err("ziplist entry starts with 0xFF before the end".into());
        };
        if prevlen != prev_size {
            return Err("ziplist entry prevlen does not match the previous entry".into());
        }
        let enc = *blob.get(pos).ok_or("ziplist entry truncated")?;
        let elem;
        match enc >> 6 {
            0 => {
                let n = (enc & 0x3f) as usize;
                pos += 1;
                elem = PElem::Str(blob.get(pos..pos + n).ok_or("ziplist string runs past the end")?);
                pos += n;
            }
            1 => {
                let b2 = *blob.get(pos + 1).ok_or("ziplist entry truncated")?;
                let n = (((enc & 0x3f) as usize) << 8) | b2 as usize;
                pos += 2;
                elem = PElem::Str(blob.get(pos..pos + n).ok_or("ziplist string runs past the end")?);
                pos += n;
            }
            2 => {
                if enc != 0x80 {
                    return Err("ziplist entry has an invalid string encoding".into());
                }
                let s = blob.get(pos + 1..pos + 5).ok_or("ziplist entry truncated")?;
                let n = u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize;
                pos += 5;
                let data_end = pos.checked_add(n).ok_or("ziplist length overflow")?;
                elem = PElem::Str(blob.get(pos..data_end).ok_or("ziplist string runs past the end")?);
                pos = data_end;
            }
            _ => {
                let width = match enc {
                    0xC0 => 2,
                    0xD0 => 4,
                    0xE0 => 8,
                    0xF0 => 3,
                    0xFE => 1,
                    0xF1..=0xFD => 0,
                    _ => return Err("ziplist entry has an invalid integer encoding".into()),
                };
                pos += 1;
                if width == 0 {
                    elem = PElem::Int((enc & 0x0f) as i64 - 1);
                } else {
                    let b = blob.get(pos..pos + width).ok_or("ziplist integer runs past the end")?;
                    elem = PElem::Int(le_int(b));
                    pos += width;
                }
            }
        }
        if pos > end {
            return Err("ziplist entry runs past the end".into());
        }
        prev_size = pos - start;
        last_start = start;
        out.push(elem);
    }
    if tail != last_start {
        return Err("ziplist tail offset is wrong".into());
    }
    if count != u16::MAX as usize && count != out.len() {
        return Err(format!("ziplist header counts {count} entries, found {}", out.len()));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// listpack

const LP_HEADER: usize = 6;

/// Every entry of a listpack, validated: total size, each entry inside the blob with a
/// back-length that encodes its size, the 0xFF terminator, and the count unless it saturated.
pub fn listpack(blob: &[u8]) -> PResult<Vec<PElem<'_>>> {
    let (out, count) = listpack_header(blob)?;
    let out = listpack_entries(blob, out)?;
    if count != u16::MAX as usize && count != out.len() {
        return Err(format!("listpack header counts {count} entries, found {}", out.len()));
    }
    Ok(out)
}

/// What Redis's shallow check (sanitize-dump-payload no) accepts: a header that gives the blob's
/// size and a 0xFF at its end. The entries are the valid ones up to the first malformed one
/// (none of them read past the blob); the declared count is not compared.
pub fn listpack_shallow(blob: &[u8]) -> PResult<Vec<PElem<'_>>> {
    let (mut out, _) = listpack_header(blob)?;
    // A malformed entry ends the walk; what came before it stands.
    let _ = listpack_walk(blob, &mut out);
    Ok(out)
}

/// The header checks, and an output vector sized from the declared count.
fn listpack_header(blob: &[u8]) -> PResult<(Vec<PElem<'_>>, usize)> {
    if blob.len() < LP_HEADER + 1 {
        return Err("listpack shorter than its header".into());
    }
    let total = le_u32(blob, 0)? as usize;
    let count = u16::from_le_bytes([blob[4], blob[5]]) as usize;
    if total != blob.len() {
        return Err(format!("listpack header says {total} bytes, blob has {}", blob.len()));
    }
    let end = total - 1;
    if blob[end] != 0xFF {
        return Err("listpack not terminated by 0xFF".into());
    }
    Ok((Vec::with_capacity(count.min(blob.len() / 2)), count))
}

fn listpack_entries<'a>(blob: &'a [u8], mut out: Vec<PElem<'a>>) -> PResult<Vec<PElem<'a>>> {
    listpack_walk(blob, &mut out)?;
    Ok(out)
}

/// Appends each valid entry of a listpack whose header checked out, stopping at the first
/// malformed one.
fn listpack_walk<'a>(blob: &'a [u8], out: &mut Vec<PElem<'a>>) -> PResult<()> {
    let end = blob.len() - 1;
    let mut pos = LP_HEADER;
    while pos < end {
        let start = pos;
        let b = blob[pos];
        let (elem, size) = if b & 0x80 == 0 {
            (PElem::Int((b & 0x7f) as i64), 1)
        } else if b & 0xC0 == 0x80 {
            let n = (b & 0x3f) as usize;
            (PElem::Str(blob.get(pos + 1..pos + 1 + n).ok_or("listpack string runs past the end")?), 1 + n)
        } else if b & 0xE0 == 0xC0 {
            let b2 = *blob.get(pos + 1).ok_or("listpack entry truncated")?;
            let u = (((b & 0x1f) as i64) << 8) | b2 as i64;
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            (PElem::Int(v), 2)
        } else if b & 0xF0 == 0xE0 {
            let b2 = *blob.get(pos + 1).ok_or("listpack entry truncated")?;
            let n = (((b & 0x0f) as usize) << 8) | b2 as usize;
            (PElem::Str(blob.get(pos + 2..pos + 2 + n).ok_or("listpack string runs past the end")?), 2 + n)
        } else {
            match b {
                0xF0 => {
                    let n = le_u32(blob, pos + 1)? as usize;
                    let data_end = (pos + 5).checked_add(n).ok_or("listpack length overflow")?;
                    (PElem::Str(blob.get(pos + 5..data_end).ok_or("listpack string runs past the end")?), 5 + n)
                }
                0xF1..=0xF4 => {
                    let w = [2, 3, 4, 8][(b - 0xF1) as usize];
                    let s = blob.get(pos + 1..pos + 1 + w).ok_or("listpack integer runs past the end")?;
                    (PElem::Int(le_int(s)), 1 + w)
                }
                _ => return Err("listpack entry has an invalid encoding".into()),
            }
        };
        let bl = crate::util::listpack::backlen_bytes(size);
        let next = start + size + bl;
        if next > end {
            return Err("listpack entry runs past the end".into());
        }
        // The back-length is stored big-endian-ish from the right: 7 bits a byte, the high bit
        // set on every byte but the leftmost.
        let mut v = 0usize;
        for (i, &c) in blob[start + size..next].iter().rev().enumerate() {
            let more = c & 0x80 != 0;
            if more != (i + 1 < bl) {
                return Err("listpack back-length is malformed".into());
            }
            v |= ((c & 0x7f) as usize) << (7 * i);
        }
        if v != size {
            return Err("listpack back-length does not match the entry".into());
        }
        pos = next;
        out.push(elem);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// intset

/// An intset's (width, contents), validated: width 2, 4 or 8, the size matching the count, and
/// members strictly ascending (sorted and distinct).
pub fn intset(blob: &[u8]) -> PResult<(u8, &[u8])> {
    if blob.len() < 8 {
        return Err("intset shorter than its header".into());
    }
    let width = le_u32(blob, 0)?;
    let count = le_u32(blob, 4)? as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(format!("intset has an invalid encoding {width}"));
    }
    let w = width as usize;
    if count.checked_mul(w).and_then(|n| n.checked_add(8)) != Some(blob.len()) {
        return Err("intset size does not match its count".into());
    }
    let body = &blob[8..];
    let mut prev: Option<i64> = None;
    for c in body.chunks_exact(w) {
        let v = le_int(c);
        if prev.is_some_and(|p| p >= v) {
            return Err("intset members are not sorted and distinct".into());
        }
        prev = Some(v);
    }
    Ok((width as u8, body))
}

/// The members of a validated intset body.
pub fn intset_members(width: u8, body: &[u8]) -> impl Iterator<Item = i64> + '_ {
    body.chunks_exact(width as usize).map(le_int)
}

// ---------------------------------------------------------------------------------------------
// zipmap

/// A zipmap's (field, value) pairs, validated: lengths inside the blob, the free bytes after
/// each value inside the blob, the 0xFF terminator last, and the count when it is below 254.
pub fn zipmap(blob: &[u8]) -> PResult<Vec<(&[u8], &[u8])>> {
    let Some(&declared) = blob.first() else {
        return Err("zipmap is empty".into());
    };
    let mut pos = 1;
    let mut out = Vec::new();
    let read_len = |pos: &mut usize| -> PResult<Option<usize>> {
        let b = *blob.get(*pos).ok_or("zipmap truncated")?;
        match b {
            0..=253 => {
                *pos += 1;
                Ok(Some(b as usize))
            }
            254 => {
                let v = le_u32(blob, *pos + 1)? as usize;
                *pos += 5;
                Ok(Some(v))
            }
            _ => Ok(None),
        }
    };
    while let Some(klen) = read_len(&mut pos)? {
        let key =
            blob.get(pos..pos.checked_add(klen).ok_or("zipmap overflow")?).ok_or("zipmap key runs past the end")?;
        pos += klen;
        let vlen = read_len(&mut pos)?.ok_or("zipmap key without a value")?;
        let free = *blob.get(pos).ok_or("zipmap truncated")? as usize;
        pos += 1;
        let val =
            blob.get(pos..pos.checked_add(vlen).ok_or("zipmap overflow")?).ok_or("zipmap value runs past the end")?;
        pos += vlen + free;
        if pos >= blob.len() {
            return Err("zipmap value runs past the end".into());
        }
        out.push((key, val));
    }
    if pos + 1 != blob.len() {
        return Err("zipmap has bytes after its terminator".into());
    }
    if (declared as usize) < 254 && declared as usize != out.len() {
        return Err("zipmap count does not match its entries".into());
    }
    // Redis's zipmap check refuses an empty one (no writer ever stored an empty hash).
    if out.is_empty() {
        return Err("zipmap has no entries".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a listpack the way Redis encodes it (strings only up to 63 bytes, small ints).
    fn lp(entries: &[PElem]) -> Vec<u8> {
        let mut body = Vec::new();
        for e in entries {
            let start = body.len();
            match e {
                PElem::Int(v) => {
                    assert!((0..128).contains(v));
                    body.push(*v as u8);
                }
                PElem::Str(s) => {
                    assert!(s.len() < 64);
                    body.push(0x80 | s.len() as u8);
                    body.extend_from_slice(s);
                }
            }
            let size = body.len() - start;
            body.push(size as u8);
        }
        let mut out = ((body.len() + 7) as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(0xFF);
        out
    }

    fn zl(entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut tail = ZL_HEADER;
        for e in entries {
            let start = body.len();
            tail = ZL_HEADER + start;
            body.push(prev as u8);
            body.push(e.len() as u8);
            body.extend_from_slice(e);
            prev = body.len() - start;
        }
        let mut out = ((body.len() + 11) as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&(tail as u32).to_le_bytes());
        out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(0xFF);
        out
    }

    #[test]
    fn listpack_round_trip_and_corruption() {
        let blob = lp(&[PElem::Str(b"abc"), PElem::Int(7), PElem::Str(b"")]);
        assert_eq!(listpack(&blob).unwrap(), vec![PElem::Str(b"abc"), PElem::Int(7), PElem::Str(b"")]);
        let mut bad = blob.clone();
        bad[0] += 1;
        assert!(listpack(&bad).is_err());
        let mut bad = blob.clone();
        bad[4] = 5;
        assert!(listpack(&bad).is_err(), "count mismatch");
        let mut bad = blob.clone();
        bad[6] = 0x80 | 40; // string length past the end
        assert!(listpack(&bad).is_err());
        let mut bad = blob.clone();
        bad[10] = 9; // back-length of the first entry
        assert!(listpack(&bad).is_err());
        let mut bad = blob.clone();
        *bad.last_mut().unwrap() = 0;
        assert!(listpack(&bad).is_err());
        assert!(listpack(&blob[..5]).is_err());
    }

    #[test]
    fn listpack_integer_encodings() {
        // 13-bit -1, int16 -300, int24 100000, int32, int64
        let mut body = vec![0xDF, 0xFF, 2];
        body.extend_from_slice(&[0xF1, 0xD4, 0xFE, 3]);
        body.extend_from_slice(&[0xF2, 0xA0, 0x86, 0x01, 4]);
        body.extend_from_slice(&[0xF3, 0, 0, 0, 0x80, 5]);
        body.extend_from_slice(&[0xF4, 1, 0, 0, 0, 0, 0, 0, 0x80, 9]);
        let mut blob = ((body.len() + 7) as u32).to_le_bytes().to_vec();
        blob.extend_from_slice(&5u16.to_le_bytes());
        blob.extend_from_slice(&body);
        blob.push(0xFF);
        let got = listpack(&blob).unwrap();
        assert_eq!(
            got,
            vec![
                PElem::Int(-1),
                PElem::Int(-300),
                PElem::Int(100000),
                PElem::Int(i32::MIN as i64),
                PElem::Int(i64::MIN + 1)
            ]
        );
    }

    #[test]
    fn ziplist_round_trip_and_corruption() {
        let blob = zl(&[b"a", b"bc", b""]);
        assert_eq!(ziplist(&blob).unwrap(), vec![PElem::Str(b"a"), PElem::Str(b"bc"), PElem::Str(b"")]);
        let mut bad = blob.clone();
        bad[4] = 11; // tail
        assert!(ziplist(&bad).is_err());
        let mut bad = blob.clone();
        bad[13] = 9; // prevlen of the second entry
        assert!(ziplist(&bad).is_err());
        let mut bad = blob.clone();
        bad[11] = 50; // string length past the end
        assert!(ziplist(&bad).is_err());
        let mut bad = blob.clone();
        bad[8] = 7;
        assert!(ziplist(&bad).is_err());
        assert_eq!(ziplist(&zl(&[])).unwrap(), vec![]);
    }

    #[test]
    fn ziplist_integers() {
        // prevlen 0, int8 -5; prevlen 3, immediate 12; prevlen 2, int24 -2
        let body = [0u8, 0xFE, 0xFB, 3, 0xFD, 2, 0xF0, 0xFE, 0xFF, 0xFF];
        let mut blob = ((body.len() + 11) as u32).to_le_bytes().to_vec();
        blob.extend_from_slice(&((ZL_HEADER + 5) as u32).to_le_bytes());
        blob.extend_from_slice(&3u16.to_le_bytes());
        blob.extend_from_slice(&body);
        blob.push(0xFF);
        assert_eq!(ziplist(&blob).unwrap(), vec![PElem::Int(-5), PElem::Int(12), PElem::Int(-2)]);
    }

    #[test]
    fn intset_checks() {
        let mut blob = 2u32.to_le_bytes().to_vec();
        blob.extend_from_slice(&2u32.to_le_bytes());
        blob.extend_from_slice(&(-3i16).to_le_bytes());
        blob.extend_from_slice(&9i16.to_le_bytes());
        let (w, body) = intset(&blob).unwrap();
        assert_eq!(intset_members(w, body).collect::<Vec<_>>(), vec![-3, 9]);
        let mut unsorted = blob.clone();
        unsorted[8..10].copy_from_slice(&20i16.to_le_bytes());
        assert!(intset(&unsorted).is_err());
        let mut badw = blob.clone();
        badw[0] = 3;
        assert!(intset(&badw).is_err());
        assert!(intset(&blob[..11]).is_err());
    }

    #[test]
    fn zipmap_checks() {
        let blob = [2u8, 1, b'a', 2, 0, b'x', b'y', 1, b'b', 1, 2, b'z', 0, 0, 0xFF];
        assert_eq!(zipmap(&blob).unwrap(), vec![(&b"a"[..], &b"xy"[..]), (&b"b"[..], &b"z"[..])]);
        assert!(zipmap(&blob[..blob.len() - 1]).is_err());
        let mut bad = blob;
        bad[0] = 3;
        assert!(zipmap(&bad).is_err());
        let mut bad = blob;
        bad[3] = 200;
        assert!(zipmap(&bad).is_err());
    }
}
