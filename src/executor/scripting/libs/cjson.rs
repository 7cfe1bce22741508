//! `cjson`: lua-cjson 2.1.0 as bundled with Redis 7.0 — JSON encode/decode plus the configuration
//! functions, each instance (`cjson`, or one made by `cjson.new()`) with its own settings.
//!
//! Quirks kept from the C code: numbers are written with `%.14g` (configurable precision), `/` is
//! escaped as `\/`, DEL as `\u007f`, bytes >= 0x80 pass through untouched; a table is an array when
//! every key is a positive integer (holes become `null`, "excessively sparse" ones are an error or
//! an object), else an object; the empty table is `{}`. Decoding accepts what C's `strtod` accepts
//! where a number may start (hex, `inf`, `nan`, leading `+` and zeros) while
//! `decode_invalid_numbers` is on (the default), stops at a NUL byte, and returns `cjson.null` (a
//! NULL light userdata) for `null`.
//!
//! Nesting: the C code is bounded by its depth settings and by Lua's C stack (`LUAI_MAXCSTACK`);
//! both are modelled. Encoder and decoder are iterative (no Rust recursion), and deep containers
//! wait in the registry, so any depth Redis accepts is accepted. Unlike Redis, an encode that
//! outgrows `MAX_OUTPUT` bytes or `MAX_WORK` steps (shared subtables, relaxed sparse-array
//! settings) fails with "Cannot serialise, output too large" instead of exhausting memory.

use std::sync::{Arc, Mutex, MutexGuard};

use mlua::{LightUserData, Lua, RegistryKey, Table, Value};

use super::{
    c_int32, c_int_of, fmt_g, func, type_name, Args, Fail, LibResult, Ret, LIVE_FRAMES, MAX_C_STACK, MAX_OUTPUT,
    MAX_WORK,
};

/// One instance's settings (`json_config_t`).
#[derive(Clone)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: i32,
    sparse_safe: i32,
    encode_max_depth: i32,
    decode_max_depth: i32,
    precision: i32,
    keep_buffer: bool,
    /// 0 off, 1 on, 2 "null".
    encode_invalid: i32,
    decode_invalid: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            precision: 14,
            keep_buffer: true,
            encode_invalid: 0,
            decode_invalid: true,
        }
    }
}

type Shared = Arc<Mutex<Config>>;

/// The settings of an instance (no code panics while holding the lock, so it is never poisoned).
fn settings(c: &Shared) -> MutexGuard<'_, Config> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn open(lua: &Lua) -> mlua::Result<Table> {
    new_instance(lua)
}

/// A module table with fresh settings (what both `require` and `cjson.new()` return).
fn new_instance(lua: &Lua) -> mlua::Result<Table> {
    let cfg: Shared = Arc::new(Mutex::new(Config::default()));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.set("encode", func(lua, move |a| encode(a, &settings(&c).clone()))?)?;
    let c = cfg.clone();
    t.set("decode", func(lua, move |a| decode(a, &settings(&c).clone()))?)?;
    let c = cfg.clone();
    t.set(
        "encode_sparse_array",
        func(lua, move |a| {
            let mut cfg = settings(&c);
            arg_init(a, 3)?;
            let convert = enum_option(a, 1, &["off", "on"], cfg.sparse_convert as usize)?;
            cfg.sparse_convert = convert == 1;
            cfg.sparse_ratio = integer_option(a, 2, cfg.sparse_ratio, 0, i32::MAX)?;
            cfg.sparse_safe = integer_option(a, 3, cfg.sparse_safe, 0, i32::MAX)?;
            let out = a.lua.create_table()?;
            out.raw_set(1, cfg.sparse_convert)?;
            out.raw_set(2, cfg.sparse_ratio)?;
            out.raw_set(3, cfg.sparse_safe)?;
            Ok(Ret::Many(out, 3))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_max_depth",
        func(lua, move |a| {
            let mut cfg = settings(&c);
            arg_init(a, 1)?;
            cfg.encode_max_depth = integer_option(a, 1, cfg.encode_max_depth, 1, i32::MAX)?;
            Ok(Ret::One(Value::Integer(cfg.encode_max_depth.into())))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode_max_depth",
        func(lua, move |a| {
            let mut cfg = settings(&c);
            arg_init(a, 1)?;
            cfg.decode_max_depth = integer_option(a, 1, cfg.decode_max_depth, 1, i32::MAX)?;
            Ok(Ret::One(Value::Integer(cfg.decode_max_depth.into())))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_number_precision",
        func(lua, move |a| {
            let mut cfg = settings(&c);
            arg_init(a, 1)?;
            cfg.precision = integer_option(a, 1, cfg.precision, 1, 14)?;
            Ok(Ret::One(Value::Integer(cfg.precision.into())))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_keep_buffer",
        func(lua, move |a| {
            let mut cfg = settings(&c);
            arg_init(a, 1)?;
            cfg.keep_buffer = enum_option(a, 1, &["off", "on"], cfg.keep_buffer as usize)? == 1;
            Ok(Ret::One(Value::Boolean(cfg.keep_buffer)))
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_invalid_numbers",
        func(lua, move |a| {
            let mut cfg = settings(&c);
            arg_init(a, 1)?;
            let v = enum_option(a, 1, &["off", "on", "null"], cfg.encode_invalid as usize)?;
            cfg.encode_invalid = v as i32;
            Ok(Ret::One(match v {
                0 | 1 => Value::Boolean(v == 1),
                _ => Value::String(a.lua.create_string("null")?),
            }))
        })?,
    )?;
    let c = cfg;
    t.set(
        "decode_invalid_numbers",
        func(lua, move |a| {
            let mut cfg = settings(&c);
            arg_init(a, 1)?;
            cfg.decode_invalid = enum_option(a, 1, &["off", "on"], cfg.decode_invalid as usize)? == 1;
            Ok(Ret::One(Value::Boolean(cfg.decode_invalid)))
        })?,
    )?;
    t.set("new", func(lua, |a| Ok(Ret::One(Value::Table(new_instance(a.lua).map_err(Fail::Lua)?))))?)?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    t.set("null", null())?;
    Ok(t)
}

/// `cjson.null`: a NULL light userdata.
fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// `json_arg_init`: at most `n` arguments.
fn arg_init(a: &Args, n: usize) -> LibResult<()> {
    if a.len() > n {
        return Err(a.arg_error(n + 1, "found too many arguments"));
    }
    Ok(())
}

/// `json_integer_option`: a nil (or absent) argument leaves the setting alone.
fn integer_option(a: &Args, i: usize, current: i32, min: i32, max: i32) -> LibResult<i32> {
    match a.get(i) {
        None | Some(Value::Nil) => Ok(current),
        Some(_) => {
            let v = c_int_of(a.check_number(i)?);
            if v < min || v > max {
                return Err(a.arg_error(1, format!("expected integer between {min} and {max}")));
            }
            Ok(v)
        }
    }
}

/// `json_enum_option` with boolean shortcuts: returns the option's index.
fn enum_option(a: &Args, i: usize, options: &[&str], current: usize) -> LibResult<usize> {
    match a.get(i) {
        None | Some(Value::Nil) => Ok(current),
        Some(Value::Boolean(b)) => Ok(usize::from(*b)),
        Some(_) => {
            let s = a.check_bytes(i)?;
            let s = match s.iter().position(|&b| b == 0) {
                Some(p) => &s[..p],
                None => &s[..],
            };
            match options.iter().position(|o| o.as_bytes() == s) {
                Some(p) => Ok(p),
                None => {
                    let mut msg = b"invalid option '".to_vec();
                    msg.extend_from_slice(s);
                    msg.push(b'\'');
                    Err(a.arg_error(i, msg))
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

struct Encoder<'a, 'b> {
    a: &'a Args<'b>,
    cfg: &'a Config,
    out: Vec<u8>,
    /// Steps taken (see [`MAX_WORK`]).
    work: usize,
}

/// How a table being encoded is walked.
enum Walk {
    /// Elements 1..=len; `next` is the next index.
    Array { len: i32, next: i32 },
    /// The keys, in `lua_next` order, collected in a Lua table; `next` is the next position.
    Object { keys: Option<Table>, count: usize, next: usize },
}

/// A table being encoded. The encoder is iterative: frames deeper than [`LIVE_FRAMES`] park
/// their tables in the registry while a nested table is encoded.
struct EFrame {
    table: Option<Table>,
    walk: Walk,
    /// Height of the C encoder's Lua stack with this table on top.
    top: usize,
    parked: Option<(RegistryKey, Option<RegistryKey>)>,
}

fn encode(a: &Args, cfg: &Config) -> LibResult<Ret> {
    if a.len() != 1 {
        return Err(a.arg_error(1, "expected 1 argument"));
    }
    let mut e = Encoder { a, cfg, out: Vec::new(), work: 0 };
    let v = a.get(1).cloned().unwrap_or(Value::Nil);
    let mut frames: Vec<EFrame> = Vec::new();
    // The value sits in slot 1 of the C function's stack.
    e.value(v, 1, &mut frames)?;
    while let Some(f) = frames.last_mut() {
        let Some(table) = f.table.as_ref() else { break };
        let top = f.top;
        let child = match &mut f.walk {
            Walk::Array { len, next } if *next <= *len => {
                if *next > 1 {
                    e.out.push(b',');
                }
                let item: Value = table.raw_get(*next)?;
                *next += 1;
                Some((item, top + 1))
            }
            Walk::Object { keys: Some(keys), count, next } if *next <= *count => {
                if *next > 1 {
                    e.out.push(b',');
                }
                let k: Value = keys.raw_get(*next)?;
                *next += 1;
                let item: Value = table.raw_get(&k)?;
                e.key(&k)?;
                Some((item, top + 2))
            }
            Walk::Array { .. } => {
                e.out.push(b']');
                None
            }
            Walk::Object { .. } => {
                e.out.push(b'}');
                None
            }
        };
        e.work += 1;
        if e.out.len() > MAX_OUTPUT || e.work > MAX_WORK {
            return Err(a.error("Cannot serialise, output too large"));
        }
        match child {
            Some((item, top)) => e.value(item, top, &mut frames)?,
            None => {
                frames.pop();
                if let Some(parent) = frames.last_mut() {
                    if let Some((t, k)) = parent.parked.take() {
                        parent.table = Some(a.lua.registry_value::<Table>(&t)?);
                        a.lua.remove_registry_value(t)?;
                        if let (Some(k), Walk::Object { keys, .. }) = (k, &mut parent.walk) {
                            *keys = Some(a.lua.registry_value::<Table>(&k)?);
                            a.lua.remove_registry_value(k)?;
                        }
                    }
                }
            }
        }
    }
    Ok(Ret::One(Value::String(a.lua.create_string(&e.out)?)))
}

impl Encoder<'_, '_> {
    fn exception(&self, type_name: &str, reason: &str) -> Fail {
        self.a.error(format!("Cannot serialise {type_name}: {reason}"))
    }

    /// `json_append_data` for one value; a table opens a frame (with `top`, the C stack height
    /// once it is on top) that the caller's loop walks.
    fn value(&mut self, v: Value, top: usize, frames: &mut Vec<EFrame>) -> LibResult<()> {
        match v {
            Value::String(s) => append_string(&mut self.out, &s.as_bytes()),
            Value::Number(n) => self.number(n)?,
            Value::Integer(n) => self.number(n as f64)?,
            Value::Boolean(b) => self.out.extend_from_slice(if b { b"true" } else { b"false" }),
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            Value::Table(t) => {
                let depth = frames.len() + 1;
                // json_check_encode_depth: the setting, and lua_checkstack(l, 3).
                if depth > self.cfg.encode_max_depth as usize || top + 3 > MAX_C_STACK {
                    return Err(self.a.error(format!("Cannot serialise, excessive nesting ({depth})")));
                }
                let len = self.array_length(&t)?;
                let walk = if len > 0 {
                    self.out.push(b'[');
                    Walk::Array { len, next: 1 }
                } else {
                    self.out.push(b'{');
                    let keys = self.a.lua.create_table()?;
                    let mut count = 0;
                    t.for_each::<Value, Value>(|k, _| {
                        count += 1;
                        self.work += 1;
                        keys.raw_set(count, k)
                    })?;
                    Walk::Object { keys: Some(keys), count, next: 1 }
                };
                if frames.len() >= LIVE_FRAMES {
                    if let Some(parent) = frames.last_mut() {
                        if let Some(pt) = parent.table.take() {
                            let keys = match &mut parent.walk {
                                Walk::Object { keys, .. } => match keys.take() {
                                    Some(k) => Some(self.a.lua.create_registry_value(k)?),
                                    None => None,
                                },
                                Walk::Array { .. } => None,
                            };
                            parent.parked = Some((self.a.lua.create_registry_value(pt)?, keys));
                        }
                    }
                }
                frames.push(EFrame { table: Some(t), walk, top, parked: None });
            }
            v => return Err(self.exception(type_name(Some(&v)), "type not supported")),
        }
        Ok(())
    }

    /// An object key: numbers are quoted, other types are an error.
    fn key(&mut self, k: &Value) -> LibResult<()> {
        match k {
            Value::Number(n) => {
                self.out.push(b'"');
                self.number(*n)?;
                self.out.extend_from_slice(b"\":");
            }
            Value::Integer(n) => {
                self.out.push(b'"');
                self.number(*n as f64)?;
                self.out.extend_from_slice(b"\":");
            }
            Value::String(s) => {
                append_string(&mut self.out, &s.as_bytes());
                self.out.push(b':');
            }
            k => return Err(self.exception(type_name(Some(k)), "table key must be a number or string")),
        }
        Ok(())
    }

    fn number(&mut self, n: f64) -> LibResult<()> {
        if n.is_nan() || n.is_infinite() {
            match self.cfg.encode_invalid {
                0 => return Err(self.exception("number", "must not be NaN or Inf")),
                1 if n.is_nan() => {
                    self.out.extend_from_slice(b"nan");
                    return Ok(());
                }
                1 => {}
                _ => {
                    self.out.extend_from_slice(b"null");
                    return Ok(());
                }
            }
        }
        self.out.extend_from_slice(fmt_g(n, self.cfg.precision.max(1) as usize).as_bytes());
        Ok(())
    }

    /// `lua_array_length`: the array length, or -1 (or another non-positive value) for an object.
    /// `max` is a C int and is assigned from the double key, keeping C's conversion.
    fn array_length(&mut self, t: &Table) -> LibResult<i32> {
        let mut max: i32 = 0;
        let mut items: i32 = 0;
        for pair in t.pairs::<Value, Value>() {
            let (k, _) = pair?;
            let k = match k {
                Value::Number(n) => n,
                Value::Integer(n) => n as f64,
                _ => return Ok(-1),
            };
            if k == 0.0 || k.floor() != k || k < 1.0 {
                return Ok(-1);
            }
            if k > f64::from(max) {
                max = c_int32(k);
            }
            items = items.wrapping_add(1);
            self.work += 1;
        }
        let cfg = self.cfg;
        if cfg.sparse_ratio > 0 && max > items.wrapping_mul(cfg.sparse_ratio) && max > cfg.sparse_safe {
            if !cfg.sparse_convert {
                return Err(self.exception("table", "excessively sparse array"));
            }
            return Ok(-1);
        }
        Ok(max)
    }
}

/// A JSON string, escaped as lua-cjson does.
fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

// ---------------------------------------------------------------------------------------------
// Decoding

#[derive(Clone, Copy, PartialEq, Debug)]
enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str,
    Num,
    Bool,
    Null,
    Colon,
    Comma,
    End,
    /// An error token, with its description.
    Error(&'static str),
}

impl Tok {
    fn name(self) -> &'static str {
        match self {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str => "T_STRING",
            Tok::Num => "T_NUMBER",
            Tok::Bool => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(s) => s,
        }
    }
}

struct Token {
    tok: Tok,
    /// Offset of the token in the input (0-based).
    index: usize,
    num: f64,
    boolean: bool,
    string: Vec<u8>,
}

struct Parser<'d> {
    data: &'d [u8],
    pos: usize,
    decode_invalid: bool,
}

impl Parser<'_> {
    /// The byte at `i`, NUL past the end (the C string's terminator).
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let index = self.pos;
        let mut t = Token { tok: Tok::End, index, num: 0.0, boolean: false, string: Vec::new() };
        let ch = self.at(self.pos);
        let single = match ch {
            b'{' => Some(Tok::ObjBegin),
            b'}' => Some(Tok::ObjEnd),
            b'[' => Some(Tok::ArrBegin),
            b']' => Some(Tok::ArrEnd),
            b',' => Some(Tok::Comma),
            b':' => Some(Tok::Colon),
            _ => None,
        };
        if let Some(tok) = single {
            t.tok = tok;
            self.pos += 1;
            return t;
        }
        match ch {
            0 => t.tok = Tok::End,
            b'"' => self.string_token(&mut t),
            b'-' | b'0'..=b'9' => {
                if !self.decode_invalid && self.is_invalid_number() {
                    t.tok = Tok::Error("invalid number");
                } else {
                    self.number_token(&mut t);
                }
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                let rest = &self.data[self.pos..];
                if rest.starts_with(b"true") {
                    t.tok = Tok::Bool;
                    t.boolean = true;
                    self.pos += 4;
                } else if rest.starts_with(b"false") {
                    t.tok = Tok::Bool;
                    self.pos += 5;
                } else if rest.starts_with(b"null") {
                    t.tok = Tok::Null;
                    self.pos += 4;
                } else if self.decode_invalid && self.is_invalid_number() {
                    self.number_token(&mut t);
                } else {
                    t.tok = Tok::Error("invalid token");
                }
            }
            _ => t.tok = Tok::Error("invalid token"),
        }
        t
    }

    /// `json_is_invalid_number`: forms strtod takes that strict JSON does not.
    fn is_invalid_number(&self) -> bool {
        let mut p = self.pos;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let rest = &self.data[p.min(self.data.len())..];
        let ci = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
        ci(b"inf") || ci(b"nan")
    }

    fn number_token(&mut self, t: &mut Token) {
        match strtod(self.data, self.pos) {
            Some((n, end)) => {
                t.tok = Tok::Num;
                t.num = n;
                self.pos = end;
            }
            None => t.tok = Tok::Error("invalid number"),
        }
    }

    fn string_token(&mut self, t: &mut Token) {
        self.pos += 1;
        let mut s = Vec::new();
        loop {
            let ch = self.at(self.pos);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                t.tok = Tok::Error("unexpected end of string");
                t.index = self.pos;
                return;
            }
            if ch == b'\\' {
                let esc = match self.at(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => b'\x08',
                    b'f' => b'\x0c',
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        if self.unicode_escape(&mut s) {
                            continue;
                        }
                        t.tok = Tok::Error("invalid unicode escape code");
                        t.index = self.pos;
                        return;
                    }
                    _ => {
                        t.tok = Tok::Error("invalid escape code");
                        t.index = self.pos;
                        return;
                    }
                };
                s.push(esc);
                self.pos += 2;
                continue;
            }
            s.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        t.tok = Tok::Str;
        t.string = s;
    }

    fn hex4(&self, p: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            let d = (self.at(p + i) as char).to_digit(16)?;
            v = (v << 4) | d;
        }
        Some(v)
    }

    /// `\uXXXX` (or a surrogate pair) at `pos`, appended as UTF-8; false when malformed.
    fn unicode_escape(&mut self, s: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else { return false };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else { return false };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let mut buf = [0u8; 4];
        match char::from_u32(cp) {
            Some(c) => s.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
            // Lone low surrogates cannot occur here (rejected above); encode like C anyway.
            None => s.extend_from_slice(&[
                (cp >> 12) as u8 | 0xE0,
                ((cp >> 6) & 0x3F) as u8 | 0x80,
                (cp & 0x3F) as u8 | 0x80,
            ]),
        }
        self.pos += len;
        true
    }
}

/// C's `strtod` in the C locale, from `start`: the value and where it stopped, or None when no
/// number starts there.
fn strtod(s: &[u8], start: usize) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = start;
    while matches!(at(i), b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let neg = match at(i) {
        b'-' => {
            i += 1;
            true
        }
        b'+' => {
            i += 1;
            false
        }
        _ => false,
    };
    let sign = |v: f64| if neg { -v } else { v };
    let word = |i: usize, w: &[u8]| s.len() >= i + w.len() && s[i..i + w.len()].eq_ignore_ascii_case(w);
    if word(i, b"inf") {
        let end = if word(i, b"infinity") { i + 8 } else { i + 3 };
        return Some((sign(f64::INFINITY), end));
    }
    if word(i, b"nan") {
        let mut end = i + 3;
        if at(end) == b'(' {
            let mut j = end + 1;
            while at(j).is_ascii_alphanumeric() || at(j) == b'_' {
                j += 1;
            }
            if at(j) == b')' {
                end = j + 1;
            }
        }
        // glibc's NaN has the sign bit clear; '-' sets it.
        return Some((sign(f64::NAN), end));
    }
    if at(i) == b'0' && (at(i + 1) | 0x20) == b'x' {
        if let Some((v, end)) = hex_float(s, i + 2) {
            return Some((sign(v), end));
        }
        // "0x" without hex digits: just the zero.
        return Some((sign(0.0), i + 1));
    }
    // Decimal: digits [. digits] [e [sign] digits], at least one digit in the mantissa.
    let int_start = i;
    while at(i).is_ascii_digit() {
        i += 1;
    }
    let int_part = &s[int_start..i];
    let mut frac_part: &[u8] = &[];
    if at(i) == b'.' {
        let f = i + 1;
        let mut j = f;
        while at(j).is_ascii_digit() {
            j += 1;
        }
        frac_part = &s[f..j];
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        i = j;
    } else if int_part.is_empty() {
        return None;
    }
    let mut exp_part: &[u8] = &[];
    if at(i) | 0x20 == b'e' {
        let mut j = i + 1;
        if matches!(at(j), b'+' | b'-') {
            j += 1;
        }
        let d = j;
        while at(j).is_ascii_digit() {
            j += 1;
        }
        if j > d {
            exp_part = &s[i + 1..j];
            i = j;
        }
    }
    let mut text = String::with_capacity(int_part.len() + frac_part.len() + exp_part.len() + 4);
    text.push_str(if int_part.is_empty() { "0" } else { std::str::from_utf8(int_part).ok()? });
    if !frac_part.is_empty() {
        text.push('.');
        text.push_str(std::str::from_utf8(frac_part).ok()?);
    }
    if !exp_part.is_empty() {
        text.push('e');
        text.push_str(std::str::from_utf8(exp_part).ok()?);
    }
    let v: f64 = text.parse().ok()?;
    Some((sign(v), i))
}

/// The part of a hex float after "0x": hex digits with an optional point, then an optional binary
/// exponent. None when there is no hex digit. Rounds to nearest, ties to even, like glibc.
fn hex_float(s: &[u8], start: usize) -> Option<(f64, usize)> {
    let at = |i: usize| s.get(i).copied().unwrap_or(0);
    let mut i = start;
    let mut mant: u64 = 0;
    let mut sticky = false;
    let mut exp: i64 = 0;
    let mut any = false;
    let mut seen_point = false;
    loop {
        let c = at(i);
        if c == b'.' && !seen_point {
            seen_point = true;
            i += 1;
            continue;
        }
        let Some(d) = (c as char).to_digit(16) else { break };
        any = true;
        if mant >> 60 == 0 {
            mant = (mant << 4) | u64::from(d);
            if seen_point {
                exp -= 4;
            }
        } else {
            sticky |= d != 0;
            if !seen_point {
                exp += 4;
            }
        }
        i += 1;
    }
    if !any {
        return None;
    }
    if at(i) | 0x20 == b'p' {
        let mut j = i + 1;
        let neg = match at(j) {
            b'-' => {
                j += 1;
                true
            }
            b'+' => {
                j += 1;
                false
            }
            _ => false,
        };
        let d = j;
        let mut e: i64 = 0;
        while at(j).is_ascii_digit() {
            e = (e * 10 + i64::from(at(j) - b'0')).min(1 << 40);
            j += 1;
        }
        if j > d {
            exp += if neg { -e } else { e };
            i = j;
        }
    }
    Some((compose(mant, sticky, exp), i))
}

/// `mant * 2^exp` (plus a sticky bit below `mant`), correctly rounded to a double.
fn compose(mut mant: u64, mut sticky: bool, mut exp: i64) -> f64 {
    if mant == 0 {
        return 0.0;
    }
    // Normalise so bit 63 is set.
    let lz = mant.leading_zeros();
    mant <<= lz;
    exp -= i64::from(lz);
    // Value = mant * 2^exp with mant in [2^63, 2^64): the unbiased exponent of the leading bit.
    let lead = exp + 63;
    if lead > 1023 {
        return f64::INFINITY;
    }
    // Bits to keep: 53 for normal numbers, fewer for subnormals.
    let keep: i64 = if lead >= -1022 { 53 } else { 53 - (-1022 - lead) };
    if keep <= 0 {
        // Below half the smallest subnormal (or exactly half: ties to even gives 0).
        if keep == 0 && (mant > 1 << 63 || (mant == 1 << 63 && sticky)) {
            return f64::from_bits(1);
        }
        return 0.0;
    }
    let drop = (64 - keep) as u32;
    let rest = mant & ((1u64 << drop) - 1);
    let half = 1u64 << (drop - 1);
    let mut kept = mant >> drop;
    sticky |= rest & (half - 1) != 0;
    if rest & half != 0 && (sticky || kept & 1 == 1) {
        kept += 1;
    }
    // kept * 2^(exp + drop)
    let e2 = exp + i64::from(drop);
    let v = kept as f64;
    scale2(v, e2)
}

/// `v * 2^e` without intermediate overflow or double rounding (v has at most 54 bits, and the
/// result's precision was already settled by [`compose`]).
fn scale2(mut v: f64, mut e: i64) -> f64 {
    while e > 0 {
        let step = e.min(1000);
        v *= f64::powi(2.0, step as i32);
        e -= step;
    }
    while e < 0 {
        let step = (-e).min(1000);
        v /= f64::powi(2.0, step as i32);
        e += step;
    }
    v
}

/// A container being filled: what the next value completes.
enum Kind {
    /// An array and the index of its next element.
    Array(i64),
    /// An object and the key whose value is being parsed.
    Object(Vec<u8>),
}

/// An open container. Containers deeper than [`LIVE_FRAMES`] park their table in the registry
/// while a nested one is filled, so deep nesting costs neither Rust stack nor mlua handles.
struct Frame {
    kind: Kind,
    table: Option<Table>,
    parked: Option<RegistryKey>,
}

fn decode(a: &Args, cfg: &Config) -> LibResult<Ret> {
    if a.len() != 1 {
        return Err(a.arg_error(1, "expected 1 argument"));
    }
    let data = a.check_bytes(1)?;
    if data.len() >= 2 && (data[0] == 0 || data[1] == 0) {
        return Err(a.error("JSON parser does not support UTF-16 or UTF-32"));
    }
    let mut p = Parser { data: &data, pos: 0, decode_invalid: cfg.decode_invalid };
    let lua = a.lua;
    let parse_error = |expected: &str, t: &Token| -> Fail {
        a.error(format!("Expected {expected} but found {} at character {}", t.tok.name(), t.index + 1))
    };
    let mut frames: Vec<Frame> = Vec::new();
    // Lua stack height of the C decoder: the argument, plus a table per open array and a table
    // and a key per open object.
    let mut top: usize = 1;
    let mut t = p.next_token();
    let result: Value = 'value: loop {
        // Parse the value that starts with token `t`.
        let mut value = match t.tok {
            Tok::Str => Value::String(lua.create_string(&t.string)?),
            Tok::Num => Value::Number(t.num),
            Tok::Bool => Value::Boolean(t.boolean),
            Tok::Null => null(),
            Tok::ObjBegin | Tok::ArrBegin => {
                let is_obj = t.tok == Tok::ObjBegin;
                // json_decode_descend: the depth setting and lua_checkstack(l, 3 or 2).
                let depth = frames.len() + 1;
                let slots = if is_obj { 3 } else { 2 };
                if depth > cfg.decode_max_depth as usize || top + slots > MAX_C_STACK {
                    return Err(
                        a.error(format!("Found too many nested data structures ({depth}) at character {}", p.pos))
                    );
                }
                let table = lua.create_table()?;
                let n = p.next_token();
                if n.tok == (if is_obj { Tok::ObjEnd } else { Tok::ArrEnd }) {
                    Value::Table(table)
                } else {
                    let kind = if is_obj {
                        if n.tok != Tok::Str {
                            return Err(parse_error("object key string", &n));
                        }
                        let colon = p.next_token();
                        if colon.tok != Tok::Colon {
                            return Err(parse_error("colon", &colon));
                        }
                        t = p.next_token();
                        Kind::Object(n.string)
                    } else {
                        t = n;
                        Kind::Array(1)
                    };
                    if frames.len() >= LIVE_FRAMES {
                        if let Some(f) = frames.last_mut() {
                            if let Some(c) = f.table.take() {
                                f.parked = Some(lua.create_registry_value(c)?);
                            }
                        }
                    }
                    frames.push(Frame { kind, table: Some(table), parked: None });
                    top += slots - 1;
                    continue 'value;
                }
            }
            _ => return Err(parse_error("value", &t)),
        };
        // Store the value in its container; a container that ends becomes the next value.
        loop {
            let Some(frame) = frames.last_mut() else { break 'value value };
            let Some(table) = frame.table.take() else { break 'value value };
            let n = p.next_token();
            match &mut frame.kind {
                Kind::Array(i) => {
                    table.raw_set(*i, value)?;
                    *i += 1;
                    match n.tok {
                        Tok::Comma => {
                            frame.table = Some(table);
                            t = p.next_token();
                            continue 'value;
                        }
                        Tok::ArrEnd => top -= 1,
                        _ => return Err(parse_error("comma or array end", &n)),
                    }
                }
                Kind::Object(key) => {
                    table.raw_set(lua.create_string(&*key)?, value)?;
                    match n.tok {
                        Tok::Comma => {
                            let k = p.next_token();
                            if k.tok != Tok::Str {
                                return Err(parse_error("object key string", &k));
                            }
                            let colon = p.next_token();
                            if colon.tok != Tok::Colon {
                                return Err(parse_error("colon", &colon));
                            }
                            *key = k.string;
                            frame.table = Some(table);
                            t = p.next_token();
                            continue 'value;
                        }
                        Tok::ObjEnd => top -= 2,
                        _ => return Err(parse_error("comma or object end", &n)),
                    }
                }
            }
            frames.pop();
            if let Some(parent) = frames.last_mut() {
                if let Some(k) = parent.parked.take() {
                    parent.table = Some(lua.registry_value::<Table>(&k)?);
                    lua.remove_registry_value(k)?;
                }
            }
            value = Value::Table(table);
        }
    };
    let end = p.next_token();
    if end.tok != Tok::End {
        return Err(parse_error("the end", &end));
    }
    Ok(Ret::One(result))
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
            ("return {cjson._NAME, cjson._VERSION, type(cjson.null), tostring(cjson.null), cjson.decode('null') == cjson.null}", r#"["cjson","2.1.0","userdata","userdata: (nil)",1]"#),
            ("return {cjson.encode({1,2,3}), cjson.encode({}), cjson.encode({a={b={c={1,{d=true}}}}}), cjson.encode({[1]=1, x=2}), cjson.encode({{},{{}},{a={}}})}", r#"["[1,2,3]","{}","{\x22a\x22:{\x22b\x22:{\x22c\x22:[1,{\x22d\x22:true}]}}}","{\x221\x22:1,\x22x\x22:2}","[{},[{}],{\x22a\x22:{}}]"]"#),
            (r#"return cjson.encode('a/b"c\\d\n\r\t\b\f\0\1\31\127\128\255')"#, r#""\x22a\x5c/b\x5c\x22c\x5c\x5cd\x5cn\x5cr\x5ct\x5cb\x5cf\x5cu0000\x5cu0001\x5cu001f\x5cu007f\x80\xff\x22""#),
            ("return {cjson.encode(nil), cjson.encode(cjson.null), cjson.encode(true), cjson.encode({cjson.null, false})}", r#"["null","null","true","[null,false]"]"#),
            ("return {cjson.encode(0.1), cjson.encode(1/3), cjson.encode(1e14), cjson.encode(123456789012345678), cjson.encode(-0), cjson.encode(1e-5), cjson.encode(2^53), cjson.encode(100)}", r#"["0.1","0.33333333333333","1e+14","1.2345678901235e+17","-0","1e-05","9.007199254741e+15","100"]"#),
            ("return {cjson.encode({[1]=1, [2]=2, [4]=4}), cjson.encode({[1]=1, [10]=2}), cjson.encode({[1.5]=1}), cjson.encode({[0]=1}), cjson.encode({[2^31]=1}), cjson.encode({[2^31]=2, [1]=1})}", r#"["[1,2,null,4]","[1,null,null,null,null,null,null,null,null,2]","{\x221.5\x22:1}","{\x220\x22:1}","{\x222147483648\x22:1}","[1]"]"#),
            ("return cjson.encode({[1]=1, [11]=2})", "ERR user_script:1: Cannot serialise table: excessively sparse array"),
            ("return cjson.encode(0/0)", "ERR user_script:1: Cannot serialise number: must not be NaN or Inf"),
            ("return cjson.encode({f=function() end})", "ERR user_script:1: Cannot serialise function: type not supported"),
            ("return cjson.encode({[true]=1})", "ERR user_script:1: Cannot serialise boolean: table key must be a number or string"),
            ("return cjson.encode()", "ERR user_script:1: bad argument #1 to 'encode' (expected 1 argument)"),
            ("local t = {} t[1] = t return cjson.encode(t)", "ERR user_script:1: Cannot serialise, excessive nesting (1001)"),
            ("local t = {} local c = t for i=1,999 do c[1] = {} c = c[1] end return #cjson.encode(t)", "2000"),
            ("local t = {} local c = t for i=1,1000 do c.a = {} c = c.a end return cjson.encode(t)", "ERR user_script:1: Cannot serialise, excessive nesting (1001)"),
            ("local c = cjson.new() c.encode_max_depth(100000) local t = {} local x = t for i=1,3998 do x.a = {} x = x.a end return #c.encode(t)", "23990"),
            ("local c = cjson.new() c.encode_max_depth(100000) local t = {} local x = t for i=1,7997 do x[1] = {} x = x[1] end return c.encode(t)", "ERR user_script:1: Cannot serialise, excessive nesting (7998)"),
            (r#"return {cjson.decode('[1,2,3]'), cjson.decode('{"a":1}').a, cjson.decode('"\\u00e9\\ud83d\\ude00\\/\\n"'), cjson.decode('  -1.5e2  '), cjson.decode('[1]\0garbage')}"#, r#"[[1,2,3],1,"\xc3\xa9\xf0\x9f\x98\x80/\x0a",-150,[1]]"#),
            ("return {cjson.decode('01'), cjson.decode('0x10'), cjson.decode('-0x10'), cjson.decode('+1'), cjson.decode('1.'), tostring(cjson.decode('-Infinity')), tostring(cjson.decode('nan(12)')), cjson.decode('0x1p4')}", r#"[1,16,-16,1,1,"-inf","nan",16]"#),
            ("return cjson.decode('')", "ERR user_script:1: Expected value but found T_END at character 1"),
            ("return cjson.decode('[1,2,]')", "ERR user_script:1: Expected value but found T_ARR_END at character 6"),
            (r#"return cjson.decode('{"a" 1}')"#, "ERR user_script:1: Expected colon but found T_NUMBER at character 6"),
            ("return cjson.decode('{1:1}')", "ERR user_script:1: Expected object key string but found T_NUMBER at character 2"),
            ("return cjson.decode('[1] x')", "ERR user_script:1: Expected the end but found invalid token at character 5"),
            (r#"return cjson.decode('"abc')"#, "ERR user_script:1: Expected value but found unexpected end of string at character 5"),
            (r#"return cjson.decode('"\\x"')"#, "ERR user_script:1: Expected value but found invalid escape code at character 2"),
            (r#"return cjson.decode('"\\ud800\\u0041"')"#, "ERR user_script:1: Expected value but found invalid unicode escape code at character 2"),
            ("return cjson.decode('- 1')", "ERR user_script:1: Expected value but found invalid number at character 1"),
            (r#"return cjson.decode('1\0')"#, "ERR user_script:1: JSON parser does not support UTF-16 or UTF-32"),
            ("return cjson.decode({})", "ERR user_script:1: bad argument #1 to 'decode' (string expected, got table)"),
            ("return cjson.decode(string.rep('[', 1001))", "ERR user_script:1: Found too many nested data structures (1001) at character 1001"),
            ("local c = cjson.new() c.decode_max_depth(100000) return c.decode(string.rep('[', 7999) .. string.rep(']', 7999))", "ERR user_script:1: Found too many nested data structures (7999) at character 7999"),
            (r#"local c = cjson.new() c.decode_max_depth(100000) return #c.decode(string.rep('{"a":[', 2666) .. '1' .. string.rep(']}', 2666)).a"#, "1"),
            ("return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision(), cjson.encode_keep_buffer(), cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers(), cjson.encode_sparse_array()}", "[1000,1000,14,1,nil,1,nil,2,10]"),
            ("local c = cjson.new() return {c.encode_sparse_array(true, 3, 2)}", "[1,3,2]"),
            ("local c = cjson.new() return {c.encode_number_precision(3), c.encode(1/3), c.encode(12345), c.encode_max_depth(2.7), c.encode_max_depth(2^32+1)}", r#"[3,"0.333","1.23e+04",2,1]"#),
            ("local c = cjson.new() return {c.encode_invalid_numbers(true), c.encode(0/0), c.encode(-1/0), c.encode_invalid_numbers('null'), c.encode({0/0, [1/0] = 1})}", r#"[1,"nan","-inf","null","{\x221\x22:null,\x22null\x22:1}"]"#),
            ("local c = cjson.new() return {c.encode_keep_buffer('off'), c.encode_keep_buffer(nil), c.encode_sparse_array(true), c.encode({[1]=1,[20]=2})}", r#"[nil,nil,1,"{\x221\x22:1,\x2220\x22:2}"]"#),
            ("local c = cjson.new() c.decode_invalid_numbers(false) return {pcall(c.decode, '01'), c.decode('-0'), pcall(c.decode, 'inf'), pcall(c.decode, '+1'), pcall(c.decode, 'tru')}", r#"[nil,0,nil,nil,nil,"Expected value but found invalid token at character 1"]"#),
            ("return cjson.encode_max_depth(0)", "ERR user_script:1: bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)"),
            ("return cjson.encode_max_depth(1, 2)", "ERR user_script:1: bad argument #2 to 'encode_max_depth' (found too many arguments)"),
            ("return cjson.new().encode_keep_buffer('yes')", "ERR user_script:1: bad argument #1 to 'encode_keep_buffer' (invalid option 'yes')"),
            ("return cjson.new().encode_sparse_array(true, 1, -1)", "ERR user_script:1: bad argument #1 to 'encode_sparse_array' (expected integer between 0 and 2147483647)"),
            ("return cjson.new().encode_number_precision(15)", "ERR user_script:1: bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)"),
        ] {
            assert_eq!(eval(&lua, code), want, "{code}");
        }
    }
}
