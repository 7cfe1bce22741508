//! The script's return value as a `Reply` for the caller, by Redis 7.0's rules
//! (luaReplyToRedisReply), and the wording of error tables. The other direction, a command's
//! reply into Lua for redis.call, is pushed straight onto the Lua stack by `stack`.

use mlua::{Table, Value};

use crate::resp::Reply;

/// Deeper than this, a returned table is answered with an error in its place (Redis runs out of
/// Lua stack there; this keeps a self-referencing table from recursing without end).
pub const MAX_DEPTH: usize = 1000;

/// A status (`+`) or error (`-`) line of any bytes, carriage returns and newlines made spaces
/// (it must stay one line). Text that is not UTF-8 goes out encoded as it is: a `Reply` holds
/// lines as strings, and a script may fail with any bytes.
pub fn line_reply(kind: u8, mut text: Vec<u8>) -> Reply {
    for c in text.iter_mut() {
        if *c == b'\r' || *c == b'\n' {
            *c = b' ';
        }
    }
    match String::from_utf8(text) {
        // The leading `-` keeps a message that itself starts with `-` (the writer drops one).
        Ok(s) if kind == b'-' => Reply::Error(format!("-{s}")),
        Ok(s) => Reply::StatusOwned(s),
        Err(e) => {
            let text = e.into_bytes();
            let mut raw = Vec::with_capacity(text.len() + 3);
            raw.push(kind);
            raw.extend_from_slice(&text);
            raw.extend_from_slice(b"\r\n");
            Reply::Raw(raw)
        }
    }
}

/// An error message in Redis's error-table form (luaPushErrorBuff): `-CODE rest` keeps CODE as
/// the code (`-x` without a space gets ERR), anything else gets `ERR `; CR/LF at either end go.
pub fn error_table_text(msg: &str) -> String {
    let text = match msg.strip_prefix('-') {
        Some(rest) => match rest.split_once(' ') {
            Some((code, msg)) => format!("{code} {}", msg.trim_matches(['\r', '\n'])),
            None => format!("ERR {}", rest.trim_matches(['\r', '\n'])),
        },
        None => format!("ERR {}", msg.trim_matches(['\r', '\n'])),
    };
    text
}

/// A Lua number as Redis's `(long long)` cast of it gives on x86-64: out of range and NaN
/// become i64::MIN.
pub fn lua_number_to_int(n: f64) -> i64 {
    // 2^63 as a double: the first value past i64::MAX.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if n.is_nan() || !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

fn string_field(t: &Table, key: &str) -> Option<mlua::LuaString> {
    match t.raw_get::<Value>(key) {
        Ok(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// A script's return value as a reply (luaReplyToRedisReply). `resp` is the script client's
/// protocol (redis.setresp), which decides how booleans answer.
pub fn lua_to_reply(value: &Value, resp: u8, depth: usize) -> Reply {
    if depth > MAX_DEPTH {
        return Reply::Error("ERR reached lua stack limit".into());
    }
    match value {
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(b) if resp == 2 => {
            if *b {
                Reply::Int(1)
            } else {
                Reply::Nil
            }
        }
        Value::Boolean(b) => Reply::Bool(*b),
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(lua_number_to_int(*n)),
        Value::Table(t) => table_to_reply(t, resp, depth),
        _ => Reply::Nil,
    }
}

fn table_to_reply(t: &Table, resp: u8, depth: usize) -> Reply {
    if let Some(err) = string_field(t, "err") {
        return line_reply(b'-', err.as_bytes().to_vec());
    }
    if let Some(ok) = string_field(t, "ok") {
        return line_reply(b'+', ok.as_bytes().to_vec());
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(n)) => return Reply::Double(n),
        Ok(Value::Integer(i)) => return Reply::Double(i as f64),
        _ => {}
    }
    if let Some(big) = string_field(t, "big_number") {
        return Reply::BigNumber(String::from_utf8_lossy(&big.as_bytes()).replace(['\r', '\n'], " "));
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string") {
        if let (Some(format), Some(text)) = (string_field(&v, "format"), string_field(&v, "string")) {
            let format: &'static str = match &format.as_bytes()[..] {
                b"mkd" => "mkd",
                _ => "txt",
            };
            return Reply::Verbatim(format, text.as_bytes().to_vec());
        }
    }
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        let pairs = m
            .pairs::<Value, Value>()
            .filter_map(Result::ok)
            .map(|(k, v)| (lua_to_reply(&k, resp, depth + 1), lua_to_reply(&v, resp, depth + 1)))
            .collect();
        return Reply::Map(pairs);
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        let items =
            s.pairs::<Value, Value>().filter_map(Result::ok).map(|(k, _)| lua_to_reply(&k, resp, depth + 1)).collect();
        return Reply::Set(items);
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(lua_to_reply(&v, resp, depth + 1)),
        }
    }
    Reply::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_table_text_keeps_a_code_or_adds_err() {
        assert_eq!(error_table_text("-WRONGTYPE Operation"), "WRONGTYPE Operation");
        assert_eq!(error_table_text("-x"), "ERR x");
        assert_eq!(error_table_text("plain words"), "ERR plain words");
        assert_eq!(error_table_text("-ERR bad\r\n"), "ERR bad");
    }

    #[test]
    fn number_casts_like_x86() {
        assert_eq!(lua_number_to_int(3.99), 3);
        assert_eq!(lua_number_to_int(-3.99), -3);
        assert_eq!(lua_number_to_int(1e300), i64::MIN);
        assert_eq!(lua_number_to_int(f64::NAN), i64::MIN);
    }
}
