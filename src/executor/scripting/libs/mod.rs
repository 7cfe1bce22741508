//! The four extra libraries Redis 7.0 loads into its Lua VM, written in Rust on mlua: `cjson`
//! (lua-cjson 2.1.0), `cmsgpack` (lua-cmsgpack 0.4.0), `struct` (Roberto Ierusalimschy's struct
//! library as patched by Redis) and `bit` (LuaBitOp 1.0.2); and Redis's own `math.random`.
//!
//! Behaviour, including error texts and the quirks of the C originals, follows what Debian's
//! redis-server 7.0.15 does; the expected values in the tests were taken from that server.
//!
//! Errors are raised the way a C library function raises them: as a plain Lua string (so `pcall`
//! hands the script a string, as in Redis), prefixed by the caller's position (`user_script:1: `)
//! when the message comes from `luaL_error`/`luaL_argerror`. mlua raises a Rust callback's error as
//! a userdata, so every library function is a small C closure ([`shim`]) around the Rust body: the
//! body returns its values, or the error text, and the shim raises the text with `lua_error`.

mod bit;
mod cjson;
mod cmsgpack;
mod random;
mod struct_;

use std::ffi::c_int;

use mlua::{ffi, Function, Lua, MultiValue, Table, Value};

/// Sets the globals `cjson`, `cmsgpack`, `struct` and `bit`, and Redis's `math.random`.
pub fn load(lua: &Lua) -> mlua::Result<()> {
    let globals = lua.globals();
    globals.set("cjson", cjson::open(lua)?)?;
    globals.set("cmsgpack", cmsgpack::open(lua)?)?;
    globals.set("struct", struct_::open(lua)?)?;
    globals.set("bit", bit::open(lua)?)?;
    random::install(lua, &globals.get::<Table>("math")?)?;
    Ok(())
}

/// Lua's `LUAI_MAXCSTACK`: a C function may hold at most this many stack slots.
const MAX_C_STACK: usize = 8000;

/// The largest string `cjson.encode` or `cmsgpack.pack` builds (Redis's default
/// proto-max-bulk-len), and the most steps (values written, keys walked) one call may take. Tables
/// shared many times over (`t = {u, u}, u = {v, v}, ...`) or sparse arrays allowed by
/// `encode_sparse_array` can ask for far more than the input holds; Redis would try it all.
const MAX_OUTPUT: usize = 512 << 20;
const MAX_WORK: usize = 1 << 27;

/// Open containers kept as live mlua handles while encoding or decoding nested data; deeper ones
/// wait in the registry (a Lua state has room for only about 8000 live handles).
const LIVE_FRAMES: usize = 32;

/// Why a library function failed.
enum Fail {
    /// An error of mlua itself (out of memory, ...): propagated unchanged.
    Lua(mlua::Error),
    /// `luaL_error`: the message, raised with the caller's position in front.
    Error(Vec<u8>),
    /// `luaL_argerror`: argument number and message, worded with the function's name.
    Arg(usize, Vec<u8>),
    /// A message raised as it is (errors Lua itself raises inside a C function).
    Plain(Vec<u8>),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

type LibResult<T> = Result<T, Fail>;

/// What a library function returns.
enum Ret {
    One(Value),
    /// The first `n` elements of the table, as separate return values.
    Many(Table, usize),
}

/// Makes a library function from its body.
fn func<F>(lua: &Lua, body: F) -> mlua::Result<Function>
where
    F: Fn(&Args) -> LibResult<Ret> + Send + 'static,
{
    let inner = lua.create_function(move |lua, vals: MultiValue| {
        let args = Args { lua, vals: vals.into_iter().collect() };
        match body(&args) {
            Ok(Ret::One(v)) => Ok((1, v, 0)),
            Ok(Ret::Many(t, n)) => Ok((2, Value::Table(t), n)),
            Err(Fail::Lua(e)) => Err(e),
            // Worded here, where the stack is back to: level 0 this body, level 1 the shim (the
            // function the script called), level 2 its caller.
            Err(Fail::Error(msg)) => Ok((0, Value::String(lua.create_string(located(lua, &msg))?), 0)),
            Err(Fail::Arg(i, msg)) => Ok((0, Value::String(lua.create_string(arg_message(lua, i, &msg))?), 0)),
            Err(Fail::Plain(msg)) => Ok((0, Value::String(lua.create_string(msg)?), 0)),
        }
    })?;
    // SAFETY: `lua_pushcclosure` pops the one value `exec_raw` pushed (the body) and pushes the
    // closure, which `exec_raw` returns; it runs protected, so an allocation error is caught.
    unsafe { lua.exec_raw::<Function>(inner, |state| ffi::lua_pushcclosure(state, shim, 1)) }
}

/// The C side of every library function: calls the body (upvalue 1) with the arguments and either
/// returns its values or raises its message as a plain string.
///
/// The body answers `(kind, value, n)`: kind 1 returns `value`; kind 2 returns `value[1..=n]`;
/// kind 0 raises `value` (a string). An error of the body itself is re-raised unchanged.
unsafe extern "C-unwind" fn shim(state: *mut ffi::lua_State) -> c_int {
    // SAFETY (whole function): only Lua C API calls on the running state, within the slots Lua
    // guarantees a C function (LUA_MINSTACK) or checked with `lua_checkstack`. No Rust value with
    // a destructor lives in this frame, so `lua_error` may longjmp over it (mlua does the same).
    let nargs = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    if ffi::lua_pcall(state, nargs, 3, 0) != 0 {
        ffi::lua_error(state);
    }
    let kind = ffi::lua_tointeger(state, 1);
    let n = ffi::lua_tointeger(state, 3);
    ffi::lua_settop(state, 2);
    ffi::lua_remove(state, 1);
    match kind {
        1 => 1,
        2 => {
            let n = c_int::try_from(n).unwrap_or(c_int::MAX);
            if ffi::lua_checkstack(state, n) == 0 {
                ffi::lua_pushstring(state, c"stack overflow".as_ptr());
                ffi::lua_error(state);
            }
            for i in 1..=n {
                ffi::lua_rawgeti(state, 1, i as ffi::lua_Integer);
            }
            ffi::lua_remove(state, 1);
            n
        }
        _ => ffi::lua_error(state),
    }
}

/// The arguments of a call, with the checks of Lua's auxiliary library (`luaL_check*`).
struct Args<'a> {
    lua: &'a Lua,
    vals: Vec<Value>,
}

impl Args<'_> {
    /// The `i`th argument (1-based), None when absent ("no value").
    fn get(&self, i: usize) -> Option<&Value> {
        i.checked_sub(1).and_then(|i| self.vals.get(i))
    }

    fn len(&self) -> usize {
        self.vals.len()
    }

    /// `luaL_error`: the message, with the caller's position in front once raised.
    fn error(&self, msg: impl AsRef<[u8]>) -> Fail {
        Fail::Error(msg.as_ref().to_vec())
    }

    /// `luaL_argerror`: "bad argument #i to 'name' (msg)", worded once raised.
    fn arg_error(&self, i: usize, msg: impl AsRef<[u8]>) -> Fail {
        Fail::Arg(i, msg.as_ref().to_vec())
    }

    /// `luaL_typerror` for a value (None: absent).
    fn type_error_of(&self, i: usize, v: Option<&Value>, expected: &str) -> Fail {
        self.arg_error(i, format!("{expected} expected, got {}", type_name(v)))
    }

    fn type_error(&self, i: usize, expected: &str) -> Fail {
        self.type_error_of(i, self.get(i), expected)
    }

    /// `lua_tonumber` of a value: None when it is neither a number nor a numeric string.
    fn number_of(&self, v: Option<&Value>) -> LibResult<Option<f64>> {
        Ok(match v {
            None => None,
            Some(Value::Number(n)) => Some(*n),
            Some(Value::Integer(n)) => Some(*n as f64),
            Some(v @ Value::String(_)) => self.lua.coerce_number(v.clone())?,
            Some(_) => None,
        })
    }

    /// `luaL_checknumber` of a value standing at argument position `i`.
    fn check_number_of(&self, i: usize, v: Option<&Value>) -> LibResult<f64> {
        match self.number_of(v)? {
            Some(n) => Ok(n),
            None => Err(self.type_error_of(i, v, "number")),
        }
    }

    fn check_number(&self, i: usize) -> LibResult<f64> {
        self.check_number_of(i, self.get(i))
    }

    /// `luaL_checkinteger`: the number converted as C converts a double to `long`.
    fn check_integer(&self, i: usize) -> LibResult<i64> {
        self.check_number(i).map(c_long)
    }

    /// `luaL_optinteger`.
    fn opt_integer(&self, i: usize, default: i64) -> LibResult<i64> {
        match self.get(i) {
            None | Some(Value::Nil) => Ok(default),
            Some(_) => self.check_integer(i),
        }
    }

    /// `luaL_checklstring` of a value at argument position `i`: strings, and numbers converted to
    /// their Lua text.
    fn check_bytes_of(&self, i: usize, v: Option<&Value>) -> LibResult<Vec<u8>> {
        match v {
            Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
            Some(v @ (Value::Number(_) | Value::Integer(_))) => match self.lua.coerce_string(v.clone())? {
                Some(s) => Ok(s.as_bytes().to_vec()),
                None => Err(self.type_error_of(i, Some(v), "string")),
            },
            _ => Err(self.type_error_of(i, v, "string")),
        }
    }

    fn check_bytes(&self, i: usize) -> LibResult<Vec<u8>> {
        self.check_bytes_of(i, self.get(i))
    }

    /// `luaL_checkstring` as C sees it: up to the first NUL.
    fn check_cstring(&self, i: usize) -> LibResult<Vec<u8>> {
        let mut s = self.check_bytes(i)?;
        if let Some(p) = s.iter().position(|&b| b == 0) {
            s.truncate(p);
        }
        Ok(s)
    }
}

/// `luaL_where(L, 1)` + msg: the position of the Lua code that called the library function, as
/// `chunk:line: `, or nothing when the caller is not Lua code (e.g. `pcall`). Valid in the body
/// wrapper of [`func`] (level 1 is the shim).
fn located(lua: &Lua, msg: &[u8]) -> Vec<u8> {
    let place = lua
        .inspect_stack(2, |d| {
            let line = d.current_line()?;
            let src = d.source().short_src.map(|s| s.into_owned()).unwrap_or_default();
            Some(format!("{src}:{line}: "))
        })
        .flatten()
        .unwrap_or_default();
    let mut m = place.into_bytes();
    m.extend_from_slice(msg);
    m
}

/// `luaL_argerror`'s wording, with the name the caller used for the function (level 1, the
/// shim): "bad argument #i to 'name' (msg)", or "calling 'name' on bad self" for a method's self.
fn arg_message(lua: &Lua, i: usize, msg: &[u8]) -> Vec<u8> {
    let (name, what) = lua
        .inspect_stack(1, |d| {
            let n = d.names();
            (n.name.map(|s| s.into_owned()), n.name_what)
        })
        .unwrap_or((None, None));
    let mut m = Vec::new();
    if what == Some("method") && i == 1 {
        let name = name.unwrap_or_else(|| "(null)".to_string());
        m.extend_from_slice(format!("calling '{name}' on bad self (").as_bytes());
    } else {
        let i = if what == Some("method") { i - 1 } else { i };
        let name = name.unwrap_or_else(|| "?".to_string());
        m.extend_from_slice(format!("bad argument #{i} to '{name}' (").as_bytes());
    }
    m.extend_from_slice(msg);
    m.push(b')');
    located(lua, &m)
}

/// Lua's name for a value's type (`luaL_typename`); None is an absent argument.
fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Number(_) | Value::Integer(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// 2^63 as a double.
const TWO63: f64 = 9_223_372_036_854_775_808.0;

/// A double converted to a C `long` as x86-64 does it (`cvttsd2si`): truncation, and the
/// "integer indefinite" value `i64::MIN` for NaN and anything out of range.
fn c_long(d: f64) -> i64 {
    if (-TWO63..TWO63).contains(&d) {
        d as i64
    } else {
        i64::MIN
    }
}

/// A double converted to a C `unsigned long` as gcc does it on x86-64: values below 2^63 (and NaN)
/// go through `cvttsd2si` directly, larger ones have 2^63 taken off first and the top bit flipped.
fn c_ulong(d: f64) -> u64 {
    if d.is_nan() || d < TWO63 {
        c_long(d) as u64
    } else {
        (c_long(d - TWO63) as u64) ^ (1 << 63)
    }
}

/// A double converted to a C `int` through `long` (`(int)luaL_checkinteger(...)`): the low 32
/// bits of [`c_long`].
fn c_int_of(d: f64) -> i32 {
    c_long(d) as i32
}

/// A double assigned straight to a C `int` (32-bit `cvttsd2si`): out of range (and NaN) gives
/// `i32::MIN`.
fn c_int32(d: f64) -> i32 {
    if d > -2_147_483_649.0 && d < 2_147_483_648.0 {
        d as i32
    } else {
        i32::MIN
    }
}

/// C's `%.{prec}g` for a double.
fn fmt_g(n: f64, prec: usize) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if n.is_infinite() {
        return if n < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = prec.max(1);
    if n == 0.0 {
        return if n.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    // The exponent after rounding to p significant digits decides the style.
    let e = format!("{:.*e}", p - 1, n);
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if x < -4 || x >= p as i32 {
        let mant = strip_zeros(mant);
        let sign = if x < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", x.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - x).max(0) as usize;
        strip_zeros(&format!("{n:.decimals$}")).to_string()
    }
}

/// `%g` drops trailing zeros after the decimal point, and the point itself if nothing follows.
fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Lua state with the libraries loaded.
    pub(super) fn state() -> Lua {
        let lua = Lua::new();
        load(&lua).expect("load libs");
        lua
    }

    /// Runs a chunk named like Redis's (`@user_script`) and renders its result as Redis would
    /// reply to EVAL, minus the error suffix: numbers truncated to integers, tables as arrays up
    /// to the first nil, `false`/nil as nil, errors as `ERR <message>`; bytes outside printable
    /// ASCII (and `"`, `\`) as `\xNN`, strings in quotes.
    pub(super) fn eval(lua: &Lua, code: &str) -> String {
        let run = || -> mlua::Result<String> {
            let f = lua.load(code).set_name("@user_script").into_function()?;
            let runner = lua.load("local f = ... return pcall(f)").into_function()?;
            let (ok, v): (bool, Value) = runner.call(f)?;
            Ok(match (ok, v) {
                (true, v) => render(&v),
                (false, Value::String(s)) => format!("ERR {}", escape(&s.as_bytes())),
                (false, v) => format!("ERR <{}>", v.type_name()),
            })
        };
        run().unwrap_or_else(|e| format!("harness error: {e}"))
    }

    fn escape(b: &[u8]) -> String {
        b.iter()
            .map(|&c| match c {
                0x20..=0x7e if c != b'"' && c != b'\\' => (c as char).to_string(),
                c => format!("\\x{c:02x}"),
            })
            .collect()
    }

    fn render(v: &Value) -> String {
        match v {
            Value::Nil | Value::Boolean(false) => "nil".into(),
            Value::Boolean(true) => "1".into(),
            Value::Number(n) => c_long(*n).to_string(),
            Value::Integer(n) => n.to_string(),
            Value::String(s) => format!("\"{}\"", escape(&s.as_bytes())),
            Value::Table(t) => {
                let mut out = Vec::new();
                for i in 1.. {
                    match t.raw_get::<Value>(i) {
                        Ok(Value::Nil) | Err(_) => break,
                        Ok(v) => out.push(render(&v)),
                    }
                }
                format!("[{}]", out.join(","))
            }
            _ => "nil".into(),
        }
    }

    #[test]
    fn globals_exist() {
        let lua = state();
        // From redis-server 7.0.15: the fields of each library.
        assert_eq!(
            eval(&lua, "local t={} for k,v in pairs(bit) do t[#t+1]=k end table.sort(t) return table.concat(t,' ')"),
            "\"arshift band bnot bor bswap bxor lshift rol ror rshift tobit tohex\""
        );
        assert_eq!(
            eval(&lua, "local t={} for k,v in pairs(struct) do t[#t+1]=k end table.sort(t) return table.concat(t,' ')"),
            "\"pack size unpack\""
        );
    }

    #[test]
    fn errors_are_strings_with_the_callers_position() {
        let lua = state();
        // From redis-server 7.0.15.
        assert_eq!(
            eval(&lua, "return bit.band(nil)"),
            "ERR user_script:1: bad argument #1 to 'band' (number expected, got nil)"
        );
        assert_eq!(
            eval(&lua, "return {pcall(bit.band, nil)}"),
            "[nil,\"bad argument #1 to '?' (number expected, got nil)\"]"
        );
        assert_eq!(
            eval(&lua, "local f = bit.band return f(nil)"),
            "ERR user_script:1: bad argument #1 to 'f' (number expected, got nil)"
        );
        assert_eq!(
            eval(&lua, "return bit:tobit()"),
            "ERR user_script:1: calling 'tobit' on bad self (number expected, got table)"
        );
    }

    /// Nesting as deep as Redis accepts, on a thread with a small stack: the encoder and the
    /// decoders are iterative. Expected values from redis-server 7.0.15.
    #[test]
    fn deep_nesting_needs_no_rust_stack() {
        let got = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let lua = state();
                [
                    eval(&lua, "local c = cjson.new() c.encode_max_depth(100000) c.decode_max_depth(100000) local t = {} local x = t for i=1,3998 do x.a = {} x = x.a end return #c.encode(c.decode(c.encode(t)))"),
                    eval(&lua, "local c = cjson.new() c.decode_max_depth(100000) return #c.decode(string.rep('[', 7998) .. string.rep(']', 7998))"),
                    eval(&lua, "return type(cmsgpack.unpack(string.rep('\\145', 3999) .. '\\1'))"),
                ]
            })
            .expect("spawn")
            .join()
            .expect("no stack overflow");
        assert_eq!(got, ["23990", "1", "\"table\""]);
    }

    #[test]
    fn g14() {
        for (n, s) in [
            (0.1, "0.1"),
            (1e14, "1e+14"),
            (123456789012345.0, "1.2345678901234e+14"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (-2.5, "-2.5"),
            (100.0, "100"),
            (1.0 / 3.0, "0.33333333333333"),
        ] {
            assert_eq!(fmt_g(n, 14), s);
        }
    }

    #[test]
    fn c_conversions() {
        assert_eq!(c_long(f64::NAN), i64::MIN);
        assert_eq!(c_long(-1.9), -1);
        assert_eq!(c_ulong(18446744073709551616.0), 0);
        assert_eq!(c_ulong(f64::NAN), 1 << 63);
        assert_eq!(c_ulong(f64::INFINITY), 0);
        assert_eq!(c_int_of(4294967301.0), 5);
    }
}
