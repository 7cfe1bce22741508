//! The SCAN family's one loop (Redis's scanGenericCommand), shared by SCAN, SSCAN, HSCAN and
//! ZSCAN: the cursor and option parsing, the walk (steps until COUNT reply elements were
//! collected, the walk ended, or ten times COUNT steps were taken), the MATCH and TYPE filters,
//! and the reply. What a step visits is the collection's business: each family implements
//! `Scan` for what it walks (the keyspace, a set, a hash, a zset) next to its handler, since the
//! types know nothing of commands.

use super::{Args, CmdError, CmdResult};
use crate::glob::glob_match;
use crate::resp::writer::{bulk, int_line};
use crate::resp::Reply;

/// One entry a step visits.
pub(crate) struct Entry<'e> {
    /// What MATCH is matched against, and the entry's first reply element.
    pub name: &'e [u8],
    /// The second reply element (a hash field's value, a member's score), if the type has one.
    pub value: Option<&'e [u8]>,
    /// The key's type, for SCAN's TYPE filter (None: no TYPE filter applies).
    pub type_name: Option<&'static str>,
}

/// What a *SCAN command walks.
pub(crate) trait Scan {
    /// Reply elements per entry (2 for field-value pairs). Redis doubles COUNT for those and
    /// counts the elements it collected, so COUNT is still about entries, and the step budget
    /// (ten times the doubled COUNT) is twice as large.
    const ITEMS: i64;
    /// One step from `cursor`: hands every entry it visits to `visit` and returns the next
    /// cursor (0 when the walk is over). A small encoding is visited whole with cursor 0 back.
    fn step(&mut self, cursor: u64, visit: &mut dyn FnMut(Entry<'_>)) -> u64;
}

/// The reply to a *SCAN of a missing key: cursor 0, no elements.
pub(crate) fn empty() -> Reply {
    Reply::Raw(b"*2\r\n$1\r\n0\r\n*0\r\n".to_vec())
}

/// The options every *SCAN command takes (Redis's scanGenericCommand): COUNT (at least 1),
/// MATCH (`*` matches all, so it is dropped) and, for SCAN itself, TYPE. Option names compare
/// as C strings (`strcasecmp`: the text ends at a NUL), as Redis compares them.
pub(crate) struct ScanOptions<'a> {
    pub count: i64,
    pub pattern: Option<&'a [u8]>,
    pub type_name: Option<&'a [u8]>,
}

/// Runs one *SCAN call over `src` from `cursor`: walks, filters (MATCH, then TYPE), and builds
/// the reply (the next cursor and the elements). Also returns how many entries the TYPE filter
/// looked at (Redis looks each one up, which counts as a keyspace hit).
pub(crate) fn run<S: Scan>(mut src: S, mut cursor: u64, opts: &ScanOptions) -> (Reply, u64) {
    let mut body: Vec<u8> = Vec::new();
    let mut items: i64 = 0;
    let mut seen: i64 = 0;
    let mut type_checks = 0u64;
    let count = opts.count.saturating_mul(S::ITEMS);
    // Redis's `maxiterations--` runs only while the walk goes on: ten times COUNT steps, plus
    // the first.
    let mut budget = count.saturating_mul(10);
    loop {
        cursor = src.step(cursor, &mut |e| {
            // Redis collects first and filters afterwards: filtered entries count toward COUNT.
            seen += S::ITEMS;
            if opts.pattern.is_some_and(|p| !glob_match(p, e.name, false)) {
                return;
            }
            if let (Some(want), Some(have)) = (opts.type_name, e.type_name) {
                type_checks += 1;
                if !have.as_bytes().eq_ignore_ascii_case(want) {
                    return;
                }
            }
            bulk(&mut body, e.name);
            items += 1;
            if let Some(v) = e.value {
                bulk(&mut body, v);
                items += 1;
            }
        });
        if cursor == 0 || budget == 0 || seen >= count {
            break;
        }
        budget -= 1;
    }
    let mut out = Vec::with_capacity(body.len() + 40);
    out.extend_from_slice(b"*2\r\n");
    bulk(&mut out, itoa::Buffer::new().format(cursor).as_bytes());
    int_line(&mut out, b'*', items);
    out.extend_from_slice(&body);
    (Reply::Raw(out), type_checks)
}

/// The cursor argument, or Redis's error.
pub(crate) fn cursor_arg(args: &Args, i: usize) -> Result<u64, CmdError> {
    parse_cursor(args.get(i)).ok_or_else(|| CmdError::err("invalid cursor"))
}

/// SSCAN, HSCAN, ZSCAN: a walk over the collection `src` (None: the key is missing), with the
/// options from argument 3 on. The cursor was checked first, then the key (WRONGTYPE), and only
/// then the options, as Redis does.
pub(crate) fn collection<S: Scan>(src: Option<S>, cursor: u64, args: &Args) -> CmdResult {
    let Some(src) = src else {
        return Ok(empty());
    };
    let opts = scan_options(args, 3, false)?;
    Ok(run(src, cursor, &opts).0)
}

/// Parses the options from argument `from` on; the first bad one is the error.
pub(crate) fn scan_options(args: &Args, from: usize, with_type: bool) -> Result<ScanOptions<'_>, CmdError> {
    let mut opts = ScanOptions { count: 10, pattern: None, type_name: None };
    let mut i = from;
    while i < args.len() {
        let has_value = args.len() - i >= 2;
        let name = args.get(i);
        if c_word_is(name, "count") && has_value {
            opts.count = args.i64(i + 1)?;
            if opts.count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if c_word_is(name, "match") && has_value {
            let p = args.get(i + 1);
            opts.pattern = if p == b"*" { None } else { Some(p) };
        } else if with_type && c_word_is(name, "type") && has_value {
            opts.type_name = Some(args.get(i + 1));
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    Ok(opts)
}

/// `arg` equals `word` case-insensitively as C's strcasecmp sees it: up to the first NUL.
pub(crate) fn c_word_is(arg: &[u8], word: &str) -> bool {
    let arg = memchr::memchr(0, arg).map_or(arg, |end| &arg[..end]);
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// Parses a SCAN cursor as Redis 7.0 does with `strtoul`: leading whitespace is refused, an
/// optional sign is accepted (a negative value wraps around), the text ends at the first NUL, the
/// empty string is cursor 0, and overflow or trailing bytes are errors.
pub(crate) fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let text = arg.split(|&b| b == 0).next().unwrap_or(&[]);
    let Some(&first) = text.first() else {
        return Some(0);
    };
    if first == b' ' || (b'\t'..=b'\r').contains(&first) {
        return None;
    }
    let (negative, digits) = match first {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if negative { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::parse_cursor;

    #[test]
    fn cursor_parsing_follows_strtoul() {
        assert_eq!(parse_cursor(b"x"), None);
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"+3"), Some(3));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b" 5"), None);
        assert_eq!(parse_cursor(b"5 "), None);
        assert_eq!(parse_cursor(b"0x1"), None);
        assert_eq!(parse_cursor(b"+"), None);
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"7\0junk"), Some(7));
    }
}
