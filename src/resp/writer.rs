//! Reply → bytes. The only code that knows RESP wire syntax for replies; RESP2 and RESP3 differ
//! only in how the RESP3-only shapes are lowered.

use super::reply::Reply;

/// Appends the encoding of `reply` for a client speaking protocol `proto` (2 or 3).
pub fn write_reply(out: &mut Vec<u8>, reply: &Reply, proto: u8) {
    let resp3 = proto >= 3;
    match reply {
        Reply::Ok => out.extend_from_slice(b"+OK\r\n"),
        Reply::Status(s) => line(out, b'+', s.as_bytes()),
        Reply::StatusOwned(s) => line(out, b'+', s.as_bytes()),
        Reply::Error(e) => error_line(out, e),
        Reply::Int(n) => int_line(out, b':', *n),
        Reply::Bulk(b) => bulk(out, b),
        Reply::Nil => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        Reply::NilArray => out.extend_from_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" }),
        Reply::Array(items) => {
            int_line(out, b'*', items.len() as i64);
            for item in items {
                write_reply(out, item, proto);
            }
        }
        Reply::Map(pairs) => {
            if resp3 {
                int_line(out, b'%', pairs.len() as i64);
            } else {
                int_line(out, b'*', 2 * pairs.len() as i64);
            }
            for (k, v) in pairs {
                write_reply(out, k, proto);
                write_reply(out, v, proto);
            }
        }
        Reply::Set(items) => {
            int_line(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
            for item in items {
                write_reply(out, item, proto);
            }
        }
        Reply::Push(items) => {
            int_line(out, if resp3 { b'>' } else { b'*' }, items.len() as i64);
            for item in items {
                write_reply(out, item, proto);
            }
        }
        Reply::Double(d) => {
            let text = crate::util::num::fmt_g17(*d);
            if resp3 {
                line(out, b',', text.as_bytes());
            } else {
                bulk(out, text.as_bytes());
            }
        }
        Reply::Bool(b) => {
            if resp3 {
                out.extend_from_slice(if *b { b"#t\r\n" } else { b"#f\r\n" });
            } else {
                out.extend_from_slice(if *b { b":1\r\n" } else { b":0\r\n" });
            }
        }
        Reply::Verbatim(format, text) => {
            if resp3 {
                int_line(out, b'=', (text.len() + 4) as i64);
                out.extend_from_slice(format.as_bytes());
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            } else {
                bulk(out, text);
            }
        }
        Reply::BigNumber(n) => {
            if resp3 {
                line(out, b'(', n.as_bytes());
            } else {
                bulk(out, n.as_bytes());
            }
        }
        Reply::Raw(bytes) => out.extend_from_slice(bytes),
        Reply::Deferred(d) => d.0.encode(proto, out),
    }
}

/// Appends a bulk string: `$len\r\nbytes\r\n`.
pub fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    int_line(out, b'$', bytes.len() as i64);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// Appends `<prefix><n>\r\n`.
pub fn int_line(out: &mut Vec<u8>, prefix: u8, n: i64) {
    out.push(prefix);
    crate::util::num::push_i64(out, n);
    out.extend_from_slice(b"\r\n");
}

fn line(out: &mut Vec<u8>, prefix: u8, text: &[u8]) {
    out.push(prefix);
    // A status line cannot carry CR or LF; Redis replaces them with spaces too.
    out.extend(text.iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }));
    out.extend_from_slice(b"\r\n");
}

fn error_line(out: &mut Vec<u8>, text: &[u8]) {
    if text.first() == Some(&b'-') {
        line(out, b'-', &text[1..]);
    } else {
        line(out, b'-', text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(r: &Reply, proto: u8) -> Vec<u8> {
        let mut v = Vec::new();
        write_reply(&mut v, r, proto);
        v
    }

    #[test]
    fn resp2_lowers_resp3_shapes() {
        let m = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        assert_eq!(enc(&m, 2), b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&m, 3), b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(enc(&Reply::Nil, 2), b"$-1\r\n");
        assert_eq!(enc(&Reply::NilArray, 2), b"*-1\r\n");
        assert_eq!(enc(&Reply::Nil, 3), b"_\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 2), b"$3\r\n1.5\r\n");
        assert_eq!(enc(&Reply::Double(1.5), 3), b",1.5\r\n");
        assert_eq!(enc(&Reply::Bool(true), 2), b":1\r\n");
        assert_eq!(enc(&Reply::error("ERR a\r\nb"), 2), b"-ERR a  b\r\n");
    }
}
