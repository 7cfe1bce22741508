//! Glob-style matching with exactly the rules of Redis 7.0's `stringmatchlen` (KEYS, SCAN MATCH,
//! CONFIG GET, PSUBSCRIBE, ACL key patterns). Owns nothing else.
//!
//! Behaviour reproduced on purpose, oddities included, because clients observe it:
//! - `*` matches any run of bytes, but a pattern is only tried against a non-empty string, so `*`
//!   (or `**`) does not match the empty string. KEYS and SCAN treat the pattern `*` as "everything"
//!   before calling us, which is how the empty key still shows up there.
//! - `?` matches one byte.
//! - `[...]` matches one byte from a set: `^` right after `[` negates (`!` does not), `x-y` is a
//!   range whose ends may come in either order, `\c` inside the set is the literal `c` (compared
//!   case-sensitively even under `nocase`), and a `-` that has no end before the pattern ends is a
//!   literal. A set left unterminated is closed by the end of the pattern: `[abc` matches one of
//!   `a`, `b`, `c`, and `[^` matches any byte. `[a-]` is the range `a`..`]` (the `]` is taken as
//!   the range end, as Redis does). Range ends compare as signed C chars, so bytes from 0x80 up
//!   sort below 0x00 (`[a-\xff]` covers 0xff and 0x00..=`a`), as in the x86-64 build of
//!   Redis that is our reference (C `char` is signed there).
//! - `\c` outside a set is the literal `c`; a lone trailing `\` is a literal backslash.
//! - `nocase` folds ASCII letters only (the C locale's `tolower`); range ends are swapped first and
//!   folded afterwards, so `[Z-a]` is empty under `nocase`, as in Redis.
//! - After a `*` failed to place the rest of the pattern anywhere in the string, no earlier `*`
//!   can succeed either (a longer match for it only leaves a shorter tail), so the whole match
//!   stops there: this is what keeps `a*a*a*a*...b` linear instead of exponential.
//! - Each `*` recurses once; past 1000 levels of nesting the match fails (Redis 7.0's cap), so a
//!   hostile pattern can neither overflow the stack nor run for long.

/// How deep `*` may nest before the match gives up (Redis 7.0's limit).
const MAX_NESTING: u32 = 1000;

/// Whether `string` matches `pattern` (Redis `stringmatchlen` semantics).
pub fn glob_match(pattern: &[u8], string: &[u8], nocase: bool) -> bool {
    let mut give_up = false;
    match_at(pattern, string, nocase, &mut give_up, 0)
}

#[inline]
fn fold(c: u8, nocase: bool) -> u8 {
    if nocase {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

/// Matches `pat` against `s`. `give_up` is shared by the whole match: once set, every enclosing
/// `*` stops trying longer spans.
fn match_at(pat: &[u8], s: &[u8], nocase: bool, give_up: &mut bool, nesting: u32) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    let mut p = 0;
    let mut i = 0;
    while p < pat.len() && i < s.len() {
        match pat[p] {
            b'*' => {
                while pat.get(p + 1) == Some(&b'*') {
                    p += 1;
                }
                if p + 1 == pat.len() {
                    return true;
                }
                // Only non-empty tails are tried: an empty tail is handled by the caller's
                // "string consumed, skip trailing stars" rule.
                while i < s.len() {
                    if match_at(&pat[p + 1..], &s[i..], nocase, give_up, nesting + 1) {
                        return true;
                    }
                    if *give_up {
                        return false;
                    }
                    i += 1;
                }
                *give_up = true;
                return false;
            }
            b'?' => i += 1,
            b'[' => {
                let (hit, last) = match_set(pat, p + 1, s[i], nocase);
                if !hit {
                    return false;
                }
                p = last;
                i += 1;
            }
            c => {
                let lit = if c == b'\\' && p + 1 < pat.len() {
                    p += 1;
                    pat[p]
                } else {
                    c
                };
                if fold(lit, nocase) != fold(s[i], nocase) {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
        if i == s.len() {
            while pat.get(p) == Some(&b'*') {
                p += 1;
            }
            break;
        }
    }
    p == pat.len() && i == s.len()
}

/// Matches byte `c` against the set whose body starts at `pat[p]` (just after `[`). Returns
/// whether it matched and the index of the set's last pattern byte (its `]`, or the final byte of
/// the pattern when the set is unterminated).
fn match_set(pat: &[u8], mut p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let negate = pat.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    loop {
        let left = pat.len() - p;
        if left >= 2 && pat[p] == b'\\' {
            p += 1;
            if pat[p] == c {
                hit = true;
            }
        } else if left >= 1 && pat[p] == b']' {
            break;
        } else if left == 0 {
            // Unterminated: the end of the pattern closes the set; step back onto the last byte
            // so the caller's advance lands exactly on the end.
            p -= 1;
            break;
        } else if left >= 3 && pat[p + 1] == b'-' {
            // Redis compares range ends as (signed) C chars: bytes >= 0x80 sort below `\0`.
            let (mut lo, mut hi) = (pat[p], pat[p + 2]);
            if (lo as i8) > (hi as i8) {
                std::mem::swap(&mut lo, &mut hi);
            }
            let (lo, hi, c) = (fold(lo, nocase) as i8, fold(hi, nocase) as i8, fold(c, nocase) as i8);
            if lo <= c && c <= hi {
                hit = true;
            }
            p += 2;
        } else if fold(pat[p], nocase) == fold(c, nocase) {
            hit = true;
        }
        p += 1;
    }
    (hit != negate, p)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    fn m(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes(), false)
    }

    fn mi(p: &str, s: &str) -> bool {
        glob_match(p.as_bytes(), s.as_bytes(), true)
    }

    #[test]
    fn star_and_question() {
        assert!(m("*", "abc"));
        assert!(!m("*", ""));
        assert!(!m("**", ""));
        assert!(m("", ""));
        assert!(!m("", "a"));
        assert!(m("a*", "a"));
        assert!(m("a**", "a"));
        assert!(m("*a*", "a"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(!m("a*?", "a"));
        assert!(m("*b", "aab"));
        assert!(!m("*b", "aba"));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(!m("a*b*c", "axxbyy"));
    }

    #[test]
    fn sets() {
        assert!(m("h[ae]llo", "hello"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        // `!` is a plain member, not a negation.
        assert!(m("[!a]", "!"));
        assert!(m("[!a]", "a"));
        assert!(!m("[!a]", "b"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("[b-a]", "a"));
        assert!(m("[b-a]", "b"));
        assert!(!m("[b-a]", "c"));
        assert!(m("[\\]]", "]"));
        assert!(m("[\\-]", "-"));
        assert!(m("[a-]", "]"));
        assert!(m("[a-]", "_"));
        assert!(!m("[a-]", "-"));
        assert!(m("[-a]", "-"));
        assert!(!m("[]", "x"));
        assert!(!m("[]a]", "]a"));
        assert!(!m("[]a]", "a"));
    }

    #[test]
    fn unterminated_sets() {
        assert!(m("[abc", "b"));
        assert!(!m("[abc", "d"));
        assert!(!m("[", "["));
        assert!(!m("[", ""));
        assert!(m("[^", "x"));
        assert!(m("[^", "^"));
        assert!(!m("a[", "a"));
        assert!(m("[a-", "a"));
        assert!(m("[a-", "-"));
        assert!(m("[\\", "\\"));
        assert!(m("x[ab", "xa"));
    }

    #[test]
    fn escapes() {
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
        assert!(m("\\?", "?"));
        assert!(m("a\\", "a\\"));
        assert!(m("\\", "\\"));
        assert!(m("\\a", "a"));
    }

    #[test]
    fn nocase() {
        assert!(mi("HELLO", "hello"));
        assert!(mi("h[A-Z]llo", "hello"));
        assert!(mi("h[E]llo", "hello"));
        assert!(!mi("h[\\E]llo", "hello"));
        assert!(mi("h\\Ello", "hello"));
        assert!(!mi("[Z-a]", "a"));
        assert!(!m("HELLO", "hello"));
    }

    #[test]
    fn high_bytes_in_ranges() {
        assert!(glob_match(b"[a-\xff]", b"\xff", false));
        assert!(glob_match(b"[a-\xff]", b"\x00", false));
        assert!(glob_match(b"[a-\xff]", b"a", false));
        assert!(!glob_match(b"[a-\xff]", b"b", false));
        assert!(!glob_match(b"[a-\xff]", b"\x80", false));
        assert!(glob_match(b"[\x80-\x90]", b"\x85", false));
        assert!(glob_match(b"\xc3?", b"\xc3\xa9", true));
    }

    #[test]
    fn pathological_patterns_finish() {
        let pat = "a*".repeat(50) + "b";
        let s = "a".repeat(100);
        assert!(!m(&pat, &s));
        let pat = "*".repeat(100_000) + "x";
        assert!(m(&pat, "abcx"));
        // Deep nesting of stars separated by literals exceeds the cap and fails instead of recursing.
        let pat = "a*".repeat(2000);
        let s = "a".repeat(3000);
        assert!(!m(&pat, &s));
        let pat = "a*".repeat(900);
        assert!(m(&pat, &s));
    }
}
