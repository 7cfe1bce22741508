//! The pieces of the reply conversions that touch no Lua state: the wording of error tables,
//! status and error lines of any bytes, and Redis's number cast. The conversions themselves work
//! on the Lua stack (`stack`).

use crate::resp::Reply;

/// Deeper than this, a returned table is answered with an error in its place (Redis runs out of
/// Lua stack there; this keeps a self-referencing table from recursing without end).
pub const MAX_DEPTH: usize = 1000;

/// A status (`+`) or error (`-`) line of any bytes, carriage returns and newlines made spaces
/// (it must stay one line). A status that is not UTF-8 goes out encoded as it is: a `Reply`
/// holds status lines as strings, and a script may answer any bytes.
pub fn line_reply(kind: u8, mut text: Vec<u8>) -> Reply {
    for c in text.iter_mut() {
        if *c == b'\r' || *c == b'\n' {
            *c = b' ';
        }
    }
    if kind == b'-' {
        // The leading `-` keeps a message that itself starts with `-` (the writer drops one).
        text.insert(0, b'-');
        return Reply::Error(text);
    }
    match String::from_utf8(text) {
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
