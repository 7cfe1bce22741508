//! `struct`: Roberto Ierusalimschy's struct library (0.2, with Redis's bounds checks) — converts
//! between Lua values and C structs packed in strings.
//!
//! Format letters: `>` big endian, `<` little endian, `![n]` maximum alignment n (default 8),
//! `x` one pad byte, `b`/`B` char, `h`/`H` short, `l`/`L` long, `T` size_t, `i[n]`/`I[n]` int of n
//! bytes (default 4, at most 32), `f` float, `d` double, `c[n]` n chars (`c0`: the whole string when
//! packing, the previous number as length when unpacking), `s` zero-terminated string; spaces are
//! ignored. Lower case is signed. Sizes are those of x86-64 Linux, and numbers are converted the way
//! that platform's C does it (see [`c_long`]).

use mlua::{Lua, Table, Value};

use super::{c_long, c_ulong, func, Args, LibResult, Ret, MAX_C_STACK};

/// Largest integer size (`i32`/`I32`).
const MAX_INT_SIZE: usize = 32;
/// Default for `!` (the alignment of a double on x86-64).
const MAX_ALIGN: usize = 8;

pub(super) fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", func(lua, pack)?)?;
    t.set("unpack", func(lua, unpack)?)?;
    t.set("size", func(lua, size)?)?;
    Ok(t)
}

/// The byte order and alignment in force.
struct Header {
    big: bool,
    align: usize,
}

impl Header {
    fn new() -> Self {
        Header { big: false, align: 1 }
    }
}

/// Walks a format string (already cut at its first NUL, as C sees it).
struct Fmt<'f> {
    s: &'f [u8],
    i: usize,
}

impl Fmt<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.s.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    /// A decimal count after an option, or `default` when there is none.
    fn num(&mut self, a: &Args, default: usize) -> LibResult<usize> {
        let mut n: i32 = 0;
        let mut any = false;
        while let Some(&c) = self.s.get(self.i) {
            if !c.is_ascii_digit() {
                break;
            }
            let d = i32::from(c - b'0');
            if n > i32::MAX / 10 || n * 10 > i32::MAX - d {
                return Err(a.error("integral size overflow"));
            }
            n = n * 10 + d;
            any = true;
            self.i += 1;
        }
        Ok(if any { n as usize } else { default })
    }

    /// The size of option `opt` (0 for options that take no room).
    fn opt_size(&mut self, a: &Args, opt: u8) -> LibResult<usize> {
        Ok(match opt {
            b'B' | b'b' | b'x' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.num(a, 1)?,
            b'i' | b'I' => {
                let n = self.num(a, 4)?;
                if n > MAX_INT_SIZE {
                    return Err(a.error(format!("integral size {n} is larger than limit of {MAX_INT_SIZE}")));
                }
                n
            }
            _ => 0,
        })
    }

    /// The endianness/alignment options, spaces; anything else is an invalid option.
    fn control(&mut self, a: &Args, opt: u8, h: &mut Header) -> LibResult<()> {
        match opt {
            b' ' => {}
            b'>' => h.big = true,
            b'<' => h.big = false,
            b'!' => {
                let n = self.num(a, MAX_ALIGN)?;
                if !n.is_power_of_two() {
                    return Err(a.error(format!("alignment {n} is not a power of 2")));
                }
                h.align = n;
            }
            _ => {
                let mut msg = b"invalid format option '".to_vec();
                msg.push(opt);
                msg.push(b'\'');
                return Err(a.arg_error(1, msg));
            }
        }
        Ok(())
    }
}

/// Padding needed before an item of `size` bytes at offset `len`.
fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & size.wrapping_sub(1))) & size.wrapping_sub(1)
}

/// Argument `i` of pack as C reads it: one past the arguments is the nil mark the C code pushes
/// before its string buffer (so a missing argument is reported as "got nil"). Nothing past the mark
/// is ever read: the mark fails every check.
fn pack_arg(a: &Args, i: usize) -> Option<Value> {
    if i == a.len() + 1 {
        Some(Value::Nil)
    } else {
        a.get(i).cloned()
    }
}

fn pack(a: &Args) -> LibResult<Ret> {
    let fmt = a.check_cstring(1)?;
    let mut f = Fmt { s: &fmt, i: 0 };
    let mut h = Header::new();
    let mut arg = 2;
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = f.next() {
        let mut size = f.opt_size(a, opt)?;
        let pad = to_align(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = pack_arg(a, arg);
                let n = a.check_number_of(arg, v.as_ref())?;
                arg += 1;
                let mut value = if n < 0.0 { c_long(n) as u64 } else { c_ulong(n) };
                let mut bytes = vec![0u8; size];
                for b in bytes.iter_mut() {
                    *b = value as u8;
                    value >>= 8;
                }
                if h.big {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = pack_arg(a, arg);
                let n = a.check_number_of(arg, v.as_ref())? as f32;
                arg += 1;
                out.extend_from_slice(&if h.big { n.to_be_bytes() } else { n.to_le_bytes() });
            }
            b'd' => {
                let v = pack_arg(a, arg);
                let n = a.check_number_of(arg, v.as_ref())?;
                arg += 1;
                out.extend_from_slice(&if h.big { n.to_be_bytes() } else { n.to_le_bytes() });
            }
            b'c' | b's' => {
                let v = pack_arg(a, arg);
                let s = a.check_bytes_of(arg, v.as_ref())?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // The C code names the argument after the string (its counter has moved on).
                    return Err(a.arg_error(arg, "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => f.control(a, opt, &mut h)?,
        }
    }
    Ok(Ret::One(Value::String(a.lua.create_string(&out)?)))
}

fn unpack(a: &Args) -> LibResult<Ret> {
    let fmt = a.check_cstring(1)?;
    let data = a.check_bytes(2)?;
    let ld = data.len();
    // size_t pos = luaL_optinteger(...): a negative offset wraps to a huge one.
    let mut pos = a.opt_integer(3, 1)? as usize;
    if pos == 0 {
        return Err(a.arg_error(3, "offset must be 1 or greater"));
    }
    pos -= 1;
    let mut f = Fmt { s: &fmt, i: 0 };
    let mut h = Header::new();
    let results = a.lua.create_table()?;
    let mut n = 0usize;
    let too_short = || a.arg_error(2, "data string too short");
    while let Some(opt) = f.next() {
        let mut size = f.opt_size(a, opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if size > ld || pos > ld - size {
            return Err(too_short());
        }
        // luaL_checkstack(L, 2, "too many results"): the arguments and results so far, plus 2.
        if a.len() + n + 2 > MAX_C_STACK {
            return Err(a.error("stack overflow (too many results)"));
        }
        let item = &data[pos..pos + size];
        let value = match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                Some(Value::Number(get_integer(item, h.big, opt.is_ascii_lowercase())))
            }
            b'x' => None,
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(item);
                Some(Value::Number(f64::from(if h.big { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) })))
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(item);
                Some(Value::Number(if h.big { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) }))
            }
            b'c' => {
                if size == 0 {
                    // The length is the previous result, which is consumed.
                    let prev = if n == 0 { None } else { a.number_of(Some(&results.raw_get::<Value>(n)?))? };
                    let Some(len) = prev else {
                        return Err(a.error("format 'c0' needs a previous size"));
                    };
                    size = c_ulong(len) as usize;
                    results.raw_set(n, Value::Nil)?;
                    n -= 1;
                    if size > ld || pos > ld - size {
                        return Err(too_short());
                    }
                }
                Some(Value::String(a.lua.create_string(&data[pos..pos + size])?))
            }
            b's' => {
                let Some(len) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(a.error("unfinished string in data"));
                };
                size = len + 1;
                Some(Value::String(a.lua.create_string(&data[pos..pos + len])?))
            }
            _ => {
                f.control(a, opt, &mut h)?;
                None
            }
        };
        if let Some(v) = value {
            n += 1;
            results.raw_set(n, v)?;
        }
        pos = pos.wrapping_add(size);
    }
    results.raw_set(n + 1, Value::Integer(pos.wrapping_add(1) as i64))?;
    Ok(Ret::Many(results, n + 1))
}

/// An integer of `bytes.len()` bytes; like the C code, only the last 8 bytes read survive, and the
/// sign mask's shift count is taken modulo 64 (x86 `shl`).
fn get_integer(bytes: &[u8], big: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let mut push = |b: u8| l = (l << 8) | u64::from(b);
    if big {
        bytes.iter().copied().for_each(&mut push);
    } else {
        bytes.iter().rev().copied().for_each(&mut push);
    }
    if !signed {
        return l as f64;
    }
    let shift = (bytes.len() as i64 * 8 - 1) as u32;
    let mask = u64::MAX.wrapping_shl(shift);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn size(a: &Args) -> LibResult<Ret> {
    let fmt = a.check_cstring(1)?;
    let mut f = Fmt { s: &fmt, i: 0 };
    let mut h = Header::new();
    let mut pos = 0usize;
    while let Some(opt) = f.next() {
        let size = f.opt_size(a, opt)?;
        pos = pos.wrapping_add(to_align(pos, &h, opt, size));
        if opt == b's' {
            return Err(a.arg_error(1, "option 's' has no fixed size"));
        } else if opt == b'c' && size == 0 {
            return Err(a.arg_error(1, "option 'c0' has no fixed size"));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(a, opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Ok(Ret::One(Value::Number(pos as i64 as f64)))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{eval, state};

    /// Expected replies from redis-server 7.0.15: the same snippets sent with EVAL, rendered as
    /// `eval` renders ours.
    #[test]
    fn matches_redis() {
        let lua = state();
        for (code, want) in [
            ("return {struct.size('i'), struct.size('!bd'), struct.size('c10'), struct.size('bzb'), struct.size('>!4 b i16 h'), struct.size(''), struct.size('x'), struct.size('I9')}", "[4,16,10,2,22,0,1,9]"),
            ("return {struct.pack('>i', 1), struct.pack('<i', -2), struct.pack('b', 300), struct.pack('B', -1), struct.pack('h', 70000), struct.pack('>H', 65535), struct.pack('>L', 2^63), struct.pack('T', 5)}", r#"["\x00\x00\x00\x01","\xfe\xff\xff\xff",",","\xff","p\x11","\xff\xff","\x80\x00\x00\x00\x00\x00\x00\x00","\x05\x00\x00\x00\x00\x00\x00\x00"]"#),
            ("return {struct.pack('>L', 2^64), struct.pack('>L', 0/0), struct.pack('>l', -2^64), struct.pack('>L', 1/0), struct.pack('>L', 1.9), struct.pack('>l', -1.9)}", r#"["\x00\x00\x00\x00\x00\x00\x00\x00","\x80\x00\x00\x00\x00\x00\x00\x00","\x80\x00\x00\x00\x00\x00\x00\x00","\x00\x00\x00\x00\x00\x00\x00\x00","\x00\x00\x00\x00\x00\x00\x00\x01","\xff\xff\xff\xff\xff\xff\xff\xff"]"#),
            ("return {struct.pack('>i16', -1), struct.pack('<i16', -1), struct.pack('>I3', 0x123456), struct.pack('i0', 5), struct.pack('>f', 1.5), struct.pack('<d', -2.25), struct.pack('>f', 0/0)}", r#"["\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff","\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00","\x124V","","?\xc0\x00\x00","\x00\x00\x00\x00\x00\x00\x02\xc0","\xff\xc0\x00\x00"]"#),
            (r#"return {struct.pack('c', 'abc'), struct.pack('c2', 'abc'), struct.pack('c0', 'abc'), struct.pack('s', 'ab'), struct.pack('x'), struct.pack('bxb', 1, 2), struct.pack('s', 12.5), struct.pack('b\0b', 1, 2)}"#, r#"["a","ab","abc","ab\x00","\x00","\x01\x00\x02","12.5\x00","\x01"]"#),
            ("return {struct.pack('!4bi', 1, 2), struct.pack('!bd', 1, 2), struct.pack('!2bd', 1, 2), struct.pack('!4 b c0 i', 1, 'abc', 7), struct.pack('!4 i3 i', 1, 7), struct.pack('<>i', 1)}", r#"["\x01\x00\x00\x00\x02\x00\x00\x00","\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00@","\x01\x00\x00\x00\x00\x00\x00\x00\x00@","\x01abc\x07\x00\x00\x00","\x00\x00\x01\x00\x00\x00\x00\x00\x07\x00\x00\x00","\x00\x00\x00\x01"]"#),
            (r#"return {struct.unpack('b', '\200'), struct.unpack('B', '\200'), struct.unpack('>h', '\255\254'), struct.unpack('>H', '\255\254'), struct.unpack('<l', '\255\255\255\255\255\255\255\255')}"#, "[-56,200,-2,65534,-1,9]"),
            (r#"return {struct.unpack('>i16', string.rep('\255', 16)), struct.unpack('>i3', '\255\255\255'), struct.unpack('<i16', '\1' .. string.rep('\0', 14) .. '\128'), struct.unpack('i0', 'xyz')}"#, "[-1,-1,1,0,1]"),
            (r#"return {struct.unpack('>f', '\63\192\0\0'), struct.unpack('<d', '\0\0\0\0\0\0\2\192'), struct.unpack('!4 b i', 'xyzw\1\0\0\0')}"#, "[1,-2,120,1,9]"),
            (r#"return {struct.unpack('c3', 'abcdef'), struct.unpack('s', 'ab\0cd'), struct.unpack('bc0', '\3abcd'), struct.unpack('c1 c0', '3abc')}"#, r#"["abc","ab","abc","abc",5]"#),
            ("return {struct.unpack('dc0', struct.pack('d', 1.5) .. 'abc'), struct.unpack('dc0', struct.pack('d', 2^64) .. 'abc')}", r#"["a","",9]"#),
            ("return {struct.unpack('b', 'abc', 3), struct.unpack('b', 'abc', '2')}", "[99,98,3]"),
            ("return #{struct.unpack(string.rep('b', 7997), string.rep('a', 8000))}", "7998"),
            ("return #{struct.unpack(string.rep('b', 7998), string.rep('a', 8000))}", "ERR user_script:1: stack overflow (too many results)"),
            ("return struct.pack('z', 1)", "ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'z')"),
            (r#"return struct.pack('\255')"#, r#"ERR user_script:1: bad argument #1 to 'pack' (invalid format option '\xff')"#),
            ("return struct.pack('i33', 1)", "ERR user_script:1: integral size 33 is larger than limit of 32"),
            ("return struct.pack('i99999999999', 1)", "ERR user_script:1: integral size overflow"),
            ("return struct.pack('!3', 1)", "ERR user_script:1: alignment 3 is not a power of 2"),
            ("return struct.pack('bbc3', 1, 2, 'ab')", "ERR user_script:1: bad argument #5 to 'pack' (string too short)"),
            ("return struct.pack('ii', 1)", "ERR user_script:1: bad argument #3 to 'pack' (number expected, got nil)"),
            ("return struct.pack('s', {})", "ERR user_script:1: bad argument #2 to 'pack' (string expected, got table)"),
            ("return struct.size('s')", "ERR user_script:1: bad argument #1 to 'size' (option 's' has no fixed size)"),
            ("return struct.size('c0')", "ERR user_script:1: bad argument #1 to 'size' (option 'c0' has no fixed size)"),
            ("return struct.size('b#')", "ERR user_script:1: bad argument #1 to 'size' (invalid format option '#')"),
            ("return struct.unpack('b', 'abc', 0)", "ERR user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater)"),
            ("return struct.unpack('b', 'abc', -1)", "ERR user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            ("return struct.unpack('i', 'abc')", "ERR user_script:1: bad argument #2 to 'unpack' (data string too short)"),
            (r#"return struct.unpack('s c0', 'ab\0cd')"#, "ERR user_script:1: format 'c0' needs a previous size"),
            ("return struct.unpack('s', 'abc')", "ERR user_script:1: unfinished string in data"),
            ("return struct.unpack('b', 'a', 'x')", "ERR user_script:1: bad argument #3 to 'unpack' (number expected, got string)"),
            ("return struct:unpack('b')", "ERR user_script:1: calling 'unpack' on bad self (string expected, got table)"),
        ] {
            assert_eq!(eval(&lua, code), want, "{code}");
        }
    }
}
