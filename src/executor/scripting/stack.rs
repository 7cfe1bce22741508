//! The conversions at the script boundary, on the Lua stack: redis.call and redis.pcall as C
//! functions (arguments read off the stack, the command's reply pushed as Redis pushes it,
//! redisProtocolToLuaType), and a script's result read off the stack into a `Reply`. Through
//! mlua each value would be a registry reference taken and released under the VM's lock.
//!
//! A C function that raises a Lua error longjmps over its Rust frames, skipping destructors.
//! Each function therefore works in two phases: first it reads the arguments and runs the
//! command in `read_and_run`, an ordinary Rust function that makes no Lua call able to raise;
//! then it pushes the result, from frames that own nothing (the reply bytes stay in the run's
//! buffer), where a raise is harmless.

use std::ffi::{c_char, c_int};

use bytes::Bytes;
use mlua::ffi;

use super::{convert, run_command, with_run};
use crate::resp::Reply;

/// redis.call: the reply, or the command's error raised as `{err=...}`.
pub unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    call(state, true)
}

/// redis.pcall: the reply, errors returned as `{err=...}`.
pub unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    call(state, false)
}

extern "C-unwind" {
    /// Redis's read-only table flag, in our Lua (vendor/lua-src).
    fn lua_enablereadonlytable(state: *mut ffi::lua_State, index: c_int, enabled: c_int);
}

/// `readonly(t)`, for the environment script only: sets Redis's read-only flag on table `t`,
/// whose raw writes (rawset, table.insert, ...) and new metatables are then refused.
pub unsafe extern "C-unwind" fn make_readonly(state: *mut ffi::lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    lua_enablereadonlytable(state, 1, 1);
    0
}

/// The global `pcall` as Redis 7.0 replaces it: an error that is a table with a string (or
/// number) `err` field, as redis.call raises, is caught as that field's value, so a script sees
/// the message itself. Without arguments it reports what Redis's does (it calls its own `true`).
pub unsafe extern "C-unwind" fn base_pcall(state: *mut ffi::lua_State) -> c_int {
    let argc = ffi::lua_gettop(state);
    if argc == 0 {
        ffi::lua_pushboolean(state, 0);
        push_bytes(state, b"attempt to call a boolean value");
        return 2;
    }
    ffi::lua_pushboolean(state, 1);
    ffi::lua_insert(state, 1);
    if ffi::lua_pcall(state, argc - 1, ffi::LUA_MULTRET, 0) != 0 {
        // The stack is now [true, error]: the placeholder becomes `false`.
        if ffi::lua_type(state, -1) == ffi::LUA_TTABLE {
            // Not raw: Redis reads the field through metamethods too.
            ffi::lua_getfield(state, -1, c"err".as_ptr());
            if ffi::lua_isstring(state, -1) != 0 {
                ffi::lua_replace(state, -2);
            } else {
                ffi::lua_settop(state, -2);
            }
        }
        ffi::lua_pushboolean(state, 0);
        ffi::lua_replace(state, 1);
    }
    ffi::lua_gettop(state)
}

unsafe fn call(state: *mut ffi::lua_State, raise: bool) -> c_int {
    let result = read_and_run(state);
    // The arguments are copied out: their slots go, so a call made with nearly the whole C stack
    // (`redis.call(cmd, unpack(t))` of ~8000 values) still has room for its reply.
    ffi::lua_settop(state, 0);
    match result {
        Err((msg, refused)) => {
            super::ldb::log_if_enabled(|| format!("<error> {msg}").into_bytes());
            match msg.strip_prefix('-') {
                Some(line) => push_error_line(state, line.as_bytes()),
                None => push_error_table(state, b"ERR ", msg.as_bytes()),
            }
            // A refused command was counted in errorstats where it was refused; an argument
            // error is counted if it becomes the script's reply.
            if refused {
                mark_counted(state);
            }
        }
        Ok(()) => {
            let Some(reply) = with_run(|run| &run.reply_buf[..] as *const [u8]) else {
                ffi::lua_pushnil(state);
                return 1;
            };
            // SAFETY: the buffer belongs to the run in progress and is only written by the next
            // command, which cannot start before this push has finished.
            let reply = &*reply;
            if super::ldb::enabled() {
                if reply.first() == Some(&b'-') {
                    let end = memchr::memmem::find(reply, b"\r\n").unwrap_or(reply.len());
                    super::ldb::log_if_enabled(|| [&b"<error> "[..], &reply[..end]].concat());
                }
                super::ldb::log_reply_if_enabled(reply);
            }
            let mut pos = 0;
            if !push_reply(state, reply, &mut pos) {
                ffi::lua_pushnil(state);
            }
            if !(raise && is_error_table(state)) {
                return 1;
            }
        }
    }
    if raise {
        ffi::lua_error(state);
    }
    1
}

/// Reads the command's arguments (strings as they are, numbers as `%.17g`) and runs it; the
/// reply is left in the run's buffer. Makes no Lua call that can raise.
/// An error is the message and whether the command itself was refused (already counted).
unsafe fn read_and_run(state: *mut ffi::lua_State) -> Result<(), (super::Refusal, bool)> {
    let argc = ffi::lua_gettop(state);
    if argc == 0 {
        return Err(("Please specify at least one argument for this redis lib call".into(), false));
    }
    let mut argv = Vec::with_capacity(argc as usize);
    for i in 1..=argc {
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => {
                let mut len = 0;
                // No conversion (and no allocation) for a value that is a string.
                let ptr = ffi::lua_tolstring(state, i, &mut len) as *const u8;
                argv.push(Bytes::copy_from_slice(std::slice::from_raw_parts(ptr, len)));
            }
            ffi::LUA_TNUMBER => argv.push(Bytes::from(crate::util::num::fmt_g17(ffi::lua_tonumber(state, i)))),
            _ => return Err(("Lua redis lib command arguments must be strings or integers".into(), false)),
        }
    }
    super::ldb::log_command_if_enabled(&argv);
    match with_run(|run| run_command(run, argv)) {
        Some(result) => result.map_err(|msg| (msg, true)),
        None => Err(("no script is running".into(), false)),
    }
}

/// Whether the value on top is a table with a string `err` field.
unsafe fn is_error_table(state: *mut ffi::lua_State) -> bool {
    if ffi::lua_type(state, -1) != ffi::LUA_TTABLE {
        return false;
    }
    push_bytes(state, b"err");
    ffi::lua_rawget(state, -2);
    let is_string = ffi::lua_type(state, -1) == ffi::LUA_TSTRING;
    ffi::lua_settop(state, -2);
    is_string
}

unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    ffi::lua_pushlstring(state, bytes.as_ptr() as *const c_char, bytes.len());
}

/// Pushes `{err = "ERR " .. message}` (luaPushError of a message without a code).
pub(super) unsafe fn push_error(state: *mut ffi::lua_State, message: &[u8]) {
    push_error_table(state, b"ERR ", message);
}

/// Pushes `{err = prefix .. message}`.
unsafe fn push_error_table(state: *mut ffi::lua_State, prefix: &[u8], message: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    push_bytes(state, b"err");
    push_bytes(state, prefix);
    push_bytes(state, message);
    ffi::lua_concat(state, 2);
    ffi::lua_rawset(state, -3);
}

/// Wraps the value on top in a one-field table `{key = value}`.
unsafe fn wrap_in_field(state: *mut ffi::lua_State, key: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    ffi::lua_insert(state, -2);
    push_bytes(state, key);
    ffi::lua_insert(state, -2);
    ffi::lua_rawset(state, -3);
}

/// The line at `pos` without its CRLF, advancing past it.
fn take_line<'a>(bytes: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let rest = bytes.get(*pos..)?;
    let end = memchr::memmem::find(rest, b"\r\n")?;
    *pos += end + 2;
    Some(&rest[..end])
}

fn take_bulk<'a>(bytes: &'a [u8], pos: &mut usize, len: usize) -> Option<&'a [u8]> {
    let data = bytes.get(*pos..pos.checked_add(len)?)?;
    *pos += len + 2;
    Some(data)
}

/// Pushes one encoded reply as Lua sees it; false (nothing pushed) on malformed input.
unsafe fn push_reply(state: *mut ffi::lua_State, bytes: &[u8], pos: &mut usize) -> bool {
    // Deeply nested replies need a few slots per level.
    if ffi::lua_checkstack(state, 4) == 0 {
        return false;
    }
    let Some(line) = take_line(bytes, pos) else { return false };
    let Some((&kind, body)) = line.split_first() else { return false };
    let int = || crate::util::num::parse_i64(body).unwrap_or(0);
    match kind {
        b'+' => {
            push_bytes(state, body);
            wrap_in_field(state, b"ok");
        }
        b'-' => push_error_line(state, body),
        b':' => ffi::lua_pushnumber(state, int() as f64),
        b'$' => {
            let n = int();
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
            } else {
                let Some(data) = take_bulk(bytes, pos, n as usize) else { return false };
                push_bytes(state, data);
            }
        }
        b'*' | b'>' => {
            let n = int();
            if n < 0 {
                ffi::lua_pushboolean(state, 0);
                return true;
            }
            ffi::lua_createtable(state, n.min(1 << 20) as c_int, 0);
            for i in 0..n {
                if !push_reply(state, bytes, pos) {
                    ffi::lua_settop(state, -2);
                    return false;
                }
                ffi::lua_rawseti(state, -2, (i + 1) as _);
            }
        }
        b'~' => {
            ffi::lua_createtable(state, 0, 0);
            for _ in 0..int() {
                if !push_reply(state, bytes, pos) {
                    ffi::lua_settop(state, -2);
                    return false;
                }
                ffi::lua_pushboolean(state, 1);
                ffi::lua_rawset(state, -3);
            }
            wrap_in_field(state, b"set");
        }
        b'%' => {
            ffi::lua_createtable(state, 0, 0);
            for _ in 0..int() {
                if !push_reply(state, bytes, pos) {
                    ffi::lua_settop(state, -2);
                    return false;
                }
                if !push_reply(state, bytes, pos) {
                    ffi::lua_settop(state, -3);
                    return false;
                }
                ffi::lua_rawset(state, -3);
            }
            wrap_in_field(state, b"map");
        }
        b'_' => ffi::lua_pushnil(state),
        b'#' => ffi::lua_pushboolean(state, (body == b"t") as c_int),
        b',' => {
            let d = crate::util::num::parse_f64(body).unwrap_or(match body {
                b"nan" | b"-nan" => f64::NAN,
                _ => 0.0,
            });
            ffi::lua_pushnumber(state, d);
            wrap_in_field(state, b"double");
        }
        b'(' => {
            push_bytes(state, body);
            wrap_in_field(state, b"big_number");
        }
        b'=' => {
            let Some(data) = take_bulk(bytes, pos, int().max(0) as usize) else { return false };
            let (format, text) = if data.len() >= 4 { (&data[..3], &data[4..]) } else { (&b""[..], data) };
            ffi::lua_createtable(state, 0, 2);
            push_bytes(state, b"format");
            push_bytes(state, format);
            ffi::lua_rawset(state, -3);
            push_bytes(state, b"string");
            push_bytes(state, text);
            ffi::lua_rawset(state, -3);
            wrap_in_field(state, b"verbatim_string");
        }
        b'!' => {
            let Some(data) = take_bulk(bytes, pos, int().max(0) as usize) else { return false };
            push_error_line(state, data);
        }
        b'|' => {
            // Attributes carry no value of their own: skip them, the reply follows.
            for _ in 0..2 * int().max(0) {
                if !push_reply(state, bytes, pos) {
                    return false;
                }
                ffi::lua_settop(state, -2);
            }
            return push_reply(state, bytes, pos);
        }
        _ => return false,
    }
    true
}

/// Pushes `{err=...}` for an error line (without its `-`), in the error-table form: a first
/// word followed by a space is the code, otherwise ERR is put in front.
unsafe fn push_error_line(state: *mut ffi::lua_State, line: &[u8]) {
    let trimmed = trim_crlf(line);
    if line.contains(&b' ') {
        push_error_table(state, b"", trimmed);
    } else {
        push_error_table(state, b"ERR ", trimmed);
    }
    // The command's error reply was counted in errorstats when it was sent.
    mark_counted(state);
}

/// The field Redis sets on an error table whose error errorstats counted already: if the script
/// returns (or raises) it, its reply is not counted again.
const COUNTED_FIELD: &[u8] = b"ignore_error_stats_update";

/// Sets the counted mark on the error table on top.
unsafe fn mark_counted(state: *mut ffi::lua_State) {
    push_bytes(state, COUNTED_FIELD);
    ffi::lua_pushboolean(state, 1);
    ffi::lua_rawset(state, -3);
}

fn trim_crlf(mut s: &[u8]) -> &[u8] {
    while let [b'\r' | b'\n', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b'\r' | b'\n'] = s {
        s = rest;
    }
    s
}

/// Nesting levels of a script's result whose stack slots (four per level) the caller reserves
/// with `lua_checkstack` before converting. Deeper levels reserve their own as they go, as Redis
/// does; reserving for the deepest result up front would grow the stack by 64 KB on every run,
/// garbage the collector then shrinks away again.
const RESERVED_LEVELS: usize = 16;

/// Stack slots the caller reserves before converting a result (see RESERVED_LEVELS).
pub const REPLY_STACK: c_int = 4 * RESERVED_LEVELS as c_int + 8;

/// The value at `idx` as a reply, by Redis 7.0's rules (luaReplyToRedisReply): strings are bulk
/// strings, numbers integers (truncated), booleans :1/nil in RESP2 (#t/#f after setresp 3), and a
/// table is its err/ok/double/big_number/verbatim_string/map/set field or else an array up to
/// the first nil. Read straight off the stack. With REPLY_STACK slots reserved, no Lua call here
/// allocates for the first RESERVED_LEVELS levels; deeper ones grow the stack with
/// `lua_checkstack`, which can raise only when the allocator itself fails.
pub unsafe fn reply_at(state: *mut ffi::lua_State, idx: c_int, resp: u8, depth: usize) -> Reply {
    let idx = if idx < 0 { ffi::lua_gettop(state) + idx + 1 } else { idx };
    if depth > convert::MAX_DEPTH {
        return Reply::Error("ERR reached lua stack limit".into());
    }
    match ffi::lua_type(state, idx) {
        ffi::LUA_TSTRING => Reply::Bulk(string_at(state, idx).to_vec()),
        ffi::LUA_TBOOLEAN => {
            let b = ffi::lua_toboolean(state, idx) != 0;
            match (resp, b) {
                (2, true) => Reply::Int(1),
                (2, false) => Reply::Nil,
                _ => Reply::Bool(b),
            }
        }
        ffi::LUA_TNUMBER => Reply::Int(convert::lua_number_to_int(ffi::lua_tonumber(state, idx))),
        ffi::LUA_TTABLE if depth >= RESERVED_LEVELS && ffi::lua_checkstack(state, 4) == 0 => {
            Reply::Error("ERR reached lua stack limit".into())
        }
        ffi::LUA_TTABLE => table_reply(state, idx, resp, depth),
        _ => Reply::Nil,
    }
}

/// The bytes of the string at `idx` (the caller checked its type: no conversion happens).
unsafe fn string_at<'a>(state: *mut ffi::lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0;
    let ptr = ffi::lua_tolstring(state, idx, &mut len) as *const u8;
    std::slice::from_raw_parts(ptr, len)
}

/// The special fields of a reply table, found in one pass over it.
#[derive(Default)]
struct Fields {
    err: Option<Vec<u8>>,
    ok: Option<Vec<u8>>,
    double: Option<f64>,
    big_number: Option<Vec<u8>>,
    verbatim: Option<(Vec<u8>, Vec<u8>)>,
    map: bool,
    set: bool,
    /// The error was counted in errorstats already (COUNTED_FIELD is true).
    counted: bool,
}

unsafe fn table_reply(state: *mut ffi::lua_State, t: c_int, resp: u8, depth: usize) -> Reply {
    let mut f = Fields::default();
    ffi::lua_pushnil(state);
    while ffi::lua_next(state, t) != 0 {
        // Only string keys are looked at (reading a number key as a string would convert it
        // in place and break the iteration).
        if ffi::lua_type(state, -2) == ffi::LUA_TSTRING {
            let value_type = ffi::lua_type(state, -1);
            match (string_at(state, -2), value_type) {
                (b"err", ffi::LUA_TSTRING) => f.err = Some(string_at(state, -1).to_vec()),
                (b"ok", ffi::LUA_TSTRING) => f.ok = Some(string_at(state, -1).to_vec()),
                (b"double", ffi::LUA_TNUMBER) => f.double = Some(ffi::lua_tonumber(state, -1)),
                (b"big_number", ffi::LUA_TSTRING) => f.big_number = Some(string_at(state, -1).to_vec()),
                (b"verbatim_string", ffi::LUA_TTABLE) => f.verbatim = verbatim_fields(state, ffi::lua_gettop(state)),
                (b"map", ffi::LUA_TTABLE) => f.map = true,
                (b"set", ffi::LUA_TTABLE) => f.set = true,
                (COUNTED_FIELD, _) => f.counted = ffi::lua_toboolean(state, -1) != 0,
                _ => {}
            }
        }
        ffi::lua_settop(state, -2);
    }
    if let Some(err) = f.err {
        if depth == 0 && f.counted {
            super::note_error_counted();
        }
        return convert::line_reply(b'-', err);
    }
    if let Some(ok) = f.ok {
        return convert::line_reply(b'+', ok);
    }
    if let Some(d) = f.double {
        return Reply::Double(d);
    }
    if let Some(big) = f.big_number {
        return Reply::BigNumber(String::from_utf8_lossy(&big).replace(['\r', '\n'], " "));
    }
    if let Some((format, text)) = f.verbatim {
        return Reply::Verbatim(if format == b"mkd" { "mkd" } else { "txt" }, text);
    }
    if f.map || f.set {
        let name: &[u8] = if f.map { b"map" } else { b"set" };
        if push_field(state, t, name) {
            let inner = ffi::lua_gettop(state);
            let mut items = Vec::new();
            let mut pairs = Vec::new();
            ffi::lua_pushnil(state);
            while ffi::lua_next(state, inner) != 0 {
                let key = reply_at(state, -2, resp, depth + 1);
                if f.map {
                    pairs.push((key, reply_at(state, -1, resp, depth + 1)));
                } else {
                    items.push(key);
                }
                ffi::lua_settop(state, -2);
            }
            ffi::lua_settop(state, -2);
            return if f.map { Reply::Map(pairs) } else { Reply::Set(items) };
        }
    }
    let mut items = Vec::new();
    for i in 1.. {
        ffi::lua_rawgeti(state, t, i);
        if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
            ffi::lua_settop(state, -2);
            break;
        }
        items.push(reply_at(state, -1, resp, depth + 1));
        ffi::lua_settop(state, -2);
    }
    Reply::Array(items)
}

/// Pushes the value of the string key `name` of table `t`, found by iteration (pushing the key
/// itself could allocate); false (nothing pushed) when absent.
unsafe fn push_field(state: *mut ffi::lua_State, t: c_int, name: &[u8]) -> bool {
    ffi::lua_pushnil(state);
    while ffi::lua_next(state, t) != 0 {
        if ffi::lua_type(state, -2) == ffi::LUA_TSTRING && string_at(state, -2) == name {
            ffi::lua_replace(state, -2);
            return true;
        }
        ffi::lua_settop(state, -2);
    }
    false
}

/// `format` and `string` of a verbatim_string table at `t`, when both are strings.
unsafe fn verbatim_fields(state: *mut ffi::lua_State, t: c_int) -> Option<(Vec<u8>, Vec<u8>)> {
    let (mut format, mut text) = (None, None);
    ffi::lua_pushnil(state);
    while ffi::lua_next(state, t) != 0 {
        if ffi::lua_type(state, -2) == ffi::LUA_TSTRING && ffi::lua_type(state, -1) == ffi::LUA_TSTRING {
            match string_at(state, -2) {
                b"format" => format = Some(string_at(state, -1).to_vec()),
                b"string" => text = Some(string_at(state, -1).to_vec()),
                _ => {}
            }
        }
        ffi::lua_settop(state, -2);
    }
    Some((format?, text?))
}
