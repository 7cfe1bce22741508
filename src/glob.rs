//! Glob-style matching with Redis's exact rules (stringmatchlen). Bootstrap version: `*` and `?`.

/// Whether `string` matches `pattern`.
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    fn eq(a: u8, b: u8, nocase: bool) -> bool {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    }
    match pattern.split_first() {
        None => string.is_empty(),
        Some((b'*', rest)) => (0..=string.len()).any(|i| glob_match(rest, &string[i..], nocase)),
        Some((b'?', rest)) => !string.is_empty() && glob_match(rest, &string[1..], nocase),
        Some((&c, rest)) => string.first().is_some_and(|&s| eq(c, s, nocase)) && glob_match(rest, &string[1..], nocase),
    }
}
