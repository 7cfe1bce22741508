//! `bit`: LuaBitOp 1.0.2 — 32-bit bitwise operations on Lua numbers.
//!
//! A number becomes 32 bits the way LuaBitOp does it: add 2^52+2^51 and keep the low 32 bits of
//! the double, which rounds to nearest (ties to even) and wraps modulo 2^32 for moderate values.
//! Results are signed 32-bit numbers.

use mlua::{Lua, Table, Value};

use super::{func, Args, LibResult, Ret};

pub(super) fn open(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", func(lua, |a| bret(barg(a, 1)?))?)?;
    t.set("bnot", func(lua, |a| bret(!barg(a, 1)?))?)?;
    t.set("band", func(lua, |a| fold(a, |x, y| x & y))?)?;
    t.set("bor", func(lua, |a| fold(a, |x, y| x | y))?)?;
    t.set("bxor", func(lua, |a| fold(a, |x, y| x ^ y))?)?;
    t.set("lshift", func(lua, |a| shift(a, |b, n| b << n))?)?;
    t.set("rshift", func(lua, |a| shift(a, |b, n| b >> n))?)?;
    t.set("arshift", func(lua, |a| shift(a, |b, n| ((b as i32) >> n) as u32))?)?;
    t.set("rol", func(lua, |a| shift(a, |b, n| b.rotate_left(n)))?)?;
    t.set("ror", func(lua, |a| shift(a, |b, n| b.rotate_right(n)))?)?;
    t.set("bswap", func(lua, |a| bret(barg(a, 1)?.swap_bytes()))?)?;
    t.set("tohex", func(lua, tohex)?)?;
    Ok(t)
}

/// Argument `i` as 32 bits; a non-number is a type error.
fn barg(a: &Args, i: usize) -> LibResult<u32> {
    match a.number_of(a.get(i))? {
        Some(n) => Ok((n + 6_755_399_441_055_744.0).to_bits() as u32),
        None => Err(a.type_error(i, "number")),
    }
}

fn bret(b: u32) -> LibResult<Ret> {
    Ok(Ret::One(Value::Number(f64::from(b as i32))))
}

/// band/bor/bxor: the first argument, then the others from the last one down (the order in which
/// LuaBitOp checks them, which decides which bad argument is reported).
fn fold(a: &Args, op: fn(u32, u32) -> u32) -> LibResult<Ret> {
    let mut b = barg(a, 1)?;
    for i in (2..=a.len()).rev() {
        b = op(b, barg(a, i)?);
    }
    bret(b)
}

fn shift(a: &Args, op: fn(u32, u32) -> u32) -> LibResult<Ret> {
    let b = barg(a, 1)?;
    let n = barg(a, 2)? & 31;
    bret(op(b, n))
}

/// tohex(x [, n]): n hex digits (default 8, at most 8); a negative n means upper case.
fn tohex(a: &Args) -> LibResult<Ret> {
    let mut b = barg(a, 1)?;
    let n = if a.get(2).is_none() { 8 } else { barg(a, 2)? as i32 };
    let (digits, n) = if n < 0 { (b"0123456789ABCDEF", n.unsigned_abs()) } else { (b"0123456789abcdef", n as u32) };
    let n = n.min(8) as usize;
    let mut buf = [0u8; 8];
    for slot in buf[..n].iter_mut().rev() {
        *slot = digits[(b & 15) as usize];
        b >>= 4;
    }
    Ok(Ret::One(Value::String(a.lua.create_string(&buf[..n])?)))
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
            ("return {bit.tobit(2^31), bit.tobit(2^32+5), bit.tobit(1.5), bit.tobit(2.5), bit.tobit(-1.5), bit.tobit(0/0), bit.tobit(1/0), bit.tobit(2^53), bit.tobit(2^60+2^35+7), bit.tobit('0x10'), bit.tobit(' 12 ')}", "[-2147483648,5,2,2,-2,0,0,0,134217728,16,12]"),
            ("return {bit.tobit(-2^60-3), bit.tobit(1e300), bit.tobit(-0.5), bit.tobit(3.5), bit.tobit(-2^31-1), bit.tobit(2^52-1)}", "[0,-2013235812,0,4,2147483647,0]"),
            ("return {bit.bnot(0), bit.band(0xff, 0x0f, 0x3), bit.bor(1,2,4,8), bit.bxor(5,3,1), bit.band(7), bit.bswap(0x12345678)}", "[-1,3,15,7,7,2018915346]"),
            ("return {bit.lshift(1,31), bit.lshift(1,32), bit.lshift(1, 33), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.rol(1, 0), bit.ror(1, -1)}", "[-2147483648,1,2,15,-16,878082066,2014458966,1,2]"),
            ("return {bit.tohex(1, -2147483647), bit.tohex(255,-3), bit.tohex(255, 0), bit.tohex(-1, 12), bit.tohex(0x12345678, 2), bit.tohex(255, 2^32+3), bit.tohex(1,'3'), bit.tohex(255, -2^31), bit.tohex(0xabc)}", r#"["00000001","0FF","","ffffffff","78","0ff","001","000000FF","00000abc"]"#),
            ("return bit.band()", "ERR user_script:1: bad argument #1 to 'band' (number expected, got no value)"),
            ("return bit.band(1, 'x', nil)", "ERR user_script:1: bad argument #3 to 'band' (number expected, got nil)"),
            ("return bit.lshift(1)", "ERR user_script:1: bad argument #2 to 'lshift' (number expected, got no value)"),
            ("return bit.tohex(1, 'z')", "ERR user_script:1: bad argument #2 to 'tohex' (number expected, got string)"),
            ("return bit.bnot(function() end)", "ERR user_script:1: bad argument #1 to 'bnot' (number expected, got function)"),
            ("return bit.bor(1, 2, cjson.null)", "ERR user_script:1: bad argument #3 to 'bor' (number expected, got userdata)"),
        ] {
            assert_eq!(eval(&lua, code), want, "{code}");
        }
    }
}
