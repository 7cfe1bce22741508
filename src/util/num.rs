//! Numbers as Redis reads and prints them: strict integer parsing (`string2ll`), float parsing
//! (`strtold` rules without spaces or NaN) and `%.17g` formatting, the reply format of Redis 7.0.

/// Parses a base-10 i64 exactly as Redis's `string2ll`: optional `-`, no `+`, no leading zeros,
/// no spaces, no empty string, and nothing out of range.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (neg, digits) = if s[0] == b'-' { (true, &s[1..]) } else { (false, s) };
    if digits.is_empty() || digits[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    if neg {
        if v > (i64::MAX as u64) + 1 {
            None
        } else {
            Some((v as i64).wrapping_neg())
        }
    } else if v > i64::MAX as u64 {
        None
    } else {
        Some(v as i64)
    }
}

/// Parses a u64 with the same strictness as `parse_i64`.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    if s[0] == b'0' {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

/// Parses a double as Redis's `string2d` (and `getDoubleFromObject`) does: all of `s` must be a
/// number for C's `strtod` (decimal, hex float, `inf`/`infinity`), with no leading space, never
/// NaN, and not out of range (an overflow to infinity or an underflow to zero is refused).
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    // Plain integers (most scores) the short way: up to 15 digits are exact in an f64, as
    // strtod reads them ("-0" included: the sign applies to the float).
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if !digits.is_empty() && digits.len() <= 15 && digits.iter().all(u8::is_ascii_digit) {
        let v = digits.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')) as f64;
        return Some(if neg { -v } else { v });
    }
    match strtod(s)? {
        (v, false) if !v.is_nan() => Some(v),
        _ => None,
    }
}

/// C's `strtod` (glibc) over all of `s`, which must not start with space: decimal, hex floats,
/// `inf`/`infinity`/`nan` in any case. Returns the value and whether it is out of range (an
/// overflow to infinity or a non-zero literal that underflows to zero: glibc's ERANGE); None
/// unless strtod would consume every byte.
pub fn strtod(s: &[u8]) -> Option<(f64, bool)> {
    let (neg, body) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let sign = if neg { -1.0 } else { 1.0 };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some((sign * f64::INFINITY, false));
    }
    if body.len() >= 3 && body[..3].eq_ignore_ascii_case(b"nan") {
        // "nan" or "nan(chars)" with letters, digits and underscores inside.
        let rest = &body[3..];
        let payload = rest.strip_prefix(b"(").and_then(|r| r.strip_suffix(b")"));
        let valid =
            rest.is_empty() || payload.is_some_and(|p| p.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_'));
        return valid.then_some((f64::NAN, false));
    }
    if body.len() > 2 && body[0] == b'0' && body[1] | 0x20 == b'x' {
        if let Some((v, erange)) = hex_float(&body[2..]) {
            return Some((sign * v, erange));
        }
    }
    // Past the sign only digits may start the number ("+-1" is not one), and Rust's parser
    // agrees with strtod on every string made of these bytes.
    if !body.first().is_some_and(|c| c.is_ascii_digit() || *c == b'.')
        || !body.iter().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    let v: f64 = std::str::from_utf8(body).ok()?.parse().ok()?;
    let nonzero = body.iter().take_while(|c| !matches!(c, b'e' | b'E')).any(|c| (b'1'..=b'9').contains(c));
    let erange = v.is_infinite() || (v == 0.0 && nonzero);
    Some((sign * v, erange))
}

/// The digits of a hex float after `0x` as C's strtod reads them, `h[.h][p[+-]d]`: the value and
/// whether it is out of range (overflow, or a nonzero value that underflows to zero, ERANGE);
/// None when malformed.
pub fn hex_float(s: &[u8]) -> Option<(f64, bool)> {
    let mut v = 0.0f64;
    let mut exp: i64 = 0;
    let mut digits = 0;
    let mut i = 0;
    let mut seen_dot = false;
    while i < s.len() {
        let c = s[i];
        if c == b'.' && !seen_dot {
            seen_dot = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            v = v * 16.0 + d as f64;
            digits += 1;
            if seen_dot {
                exp -= 4;
            }
        } else {
            break;
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    if i < s.len() {
        if s[i] | 0x20 != b'p' {
            return None;
        }
        let rest = &s[i + 1..];
        let digits_at = usize::from(rest.first().is_some_and(|c| *c == b'+' || *c == b'-'));
        if rest.len() <= digits_at || !rest[digits_at..].iter().all(u8::is_ascii_digit) {
            return None;
        }
        let negative = rest[0] == b'-';
        // A longer exponent than i64 holds saturates (the value is out of range either way).
        let magnitude = parse_i64(&rest[digits_at..]).unwrap_or(100_000);
        let e = if negative { -magnitude } else { magnitude };
        exp = exp.saturating_add(e);
    }
    // Scaled in two steps so that neither factor overflows or underflows on its own.
    let exp = exp.clamp(-2200, 2200) as i32;
    let r = if v == 0.0 { 0.0 } else { v * 2f64.powi(exp / 2) * 2f64.powi(exp - exp / 2) };
    Some((r, r.is_infinite() || (r == 0.0 && v != 0.0)))
}

/// Formats like C's `printf("%.17g", v)`: the format Redis 7.0 uses for double replies.
pub fn fmt_g17(v: f64) -> String {
    fmt_g(v, 17)
}

/// C's `%.<precision>g` for finite and infinite values (`inf`, `-inf`, `nan` as glibc prints them).
pub fn fmt_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = precision.max(1);
    if v == 0.0 {
        return if v.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if exp < -4 || exp >= p as i32 {
        let m = trim_fraction_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", m, sign, exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        let fixed = format!("{:.*}", decimals, v);
        trim_fraction_zeros(&fixed).to_string()
    }
}

fn trim_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Writes the decimal form of an integer into `out` without allocating.
/// C `atoi` / `strtol` base 10: leading whitespace, an optional sign, then digits up to the
/// first non-digit (0 if none); saturates on overflow as strtol does.
pub fn atoi(s: &[u8]) -> i64 {
    let s = match s.iter().position(|c| !c.is_ascii_whitespace()) {
        Some(i) => &s[i..],
        None => return 0,
    };
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: i64 = 0;
    for &c in digits.iter().take_while(|c| c.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add((c - b'0') as i64);
    }
    if neg {
        -n
    } else {
        n
    }
}

pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(v).as_bytes());
}

/// An inclusive index range over `len` items as LRANGE, LTRIM and ZRANGE take it (negative
/// indexes count from the end, then both ends are clamped in): Some((start, end)) in bounds, or
/// None when the range is empty.
pub fn clamp_index_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { len.saturating_add(start) } else { start }.max(0);
    let end = if end < 0 { len.saturating_add(end) } else { end };
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

#[cfg(test)]
mod tests {

    #[test]
    fn atoi_reads_like_c() {
        use super::atoi;
        assert_eq!(atoi(b"12abc"), 12);
        assert_eq!(atoi(b"a"), 0);
        assert_eq!(atoi(b" -3"), -3);
        assert_eq!(atoi(b"99999999999999999999999"), i64::MAX);
    }

    /// C's strtod over a whole string: (value, ERANGE), None unless every byte was consumed.
    fn libc_strtod(s: &[u8]) -> Option<(f64, bool)> {
        let c = std::ffi::CString::new(s).ok()?;
        let mut end: *mut libc::c_char = std::ptr::null_mut();
        // SAFETY: `c` is NUL-terminated and outlives the call; errno is thread-local.
        let (v, consumed, erange) = unsafe {
            *libc::__errno_location() = 0;
            let v = libc::strtod(c.as_ptr(), &mut end);
            (v, end.offset_from(c.as_ptr()) as usize, *libc::__errno_location() == libc::ERANGE)
        };
        (consumed == s.len() && !s.is_empty()).then_some((v, erange))
    }

    /// `strtod` agrees with glibc's on random strings of number-like bytes (space first excluded:
    /// callers refuse it before parsing).
    #[test]
    fn strtod_matches_libc() {
        let alphabet = b"0123456789.eE+-xXpPaAfFnNiItTyY ()_";
        let mut rng = fastrand::Rng::with_seed(7);
        let fixed: &[&[u8]] = &[
            b"+-1",
            b"-+1",
            b"--1",
            b"0x",
            b"0x1p",
            b"1e",
            b".",
            b"-.5e-3",
            b"1e400",
            b"1e-400",
            b"0e-400",
            b"infinity",
            b"-INF",
            b"nan",
            b"0x1.8p1",
            b"4.9e-324",
        ];
        let randoms: Vec<Vec<u8>> = (0..200_000)
            .map(|_| (0..rng.usize(1..8)).map(|_| alphabet[rng.usize(..alphabet.len())]).collect())
            .collect();
        for s in fixed.iter().copied().chain(randoms.iter().map(Vec::as_slice)) {
            if s[0] == b' ' {
                continue;
            }
            let want = libc_strtod(s);
            let got = strtod(s);
            let same = match (want, got) {
                // glibc also flags subnormal results ERANGE; only overflow and underflow to zero
                // (the cases string2d refuses) are reported here.
                (Some((a, ea)), Some((b, eb))) => {
                    (a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
                        && (ea && (a.is_infinite() || a == 0.0)) == eb
                }
                (None, None) => true,
                _ => false,
            };
            assert!(same, "{:?}: libc {want:?}, ours {got:?}", String::from_utf8_lossy(s));
        }
    }

    /// `hex_float` against C's strtod on the same `0x...` strings.
    #[test]
    fn hex_float_reads_like_strtod() {
        for body in [
            "1",
            "ff",
            "1.8",
            ".8",
            "1p4",
            "1P-4",
            "1.8p+1",
            "1p99999",
            "1p-99999",
            "0p99999",
            "abc.def",
            "1p",
            "1p+",
            "g",
            ".",
            "1.2.3",
            "1p1x",
            "1p-1074",
            "1p-1075",
            "1p1023",
            "1p1024",
            "1.fffffffffffffp1023",
            ".1p-1070",
            "10p-1080",
        ] {
            let c = std::ffi::CString::new(format!("0x{body}")).unwrap();
            let mut end: *mut libc::c_char = std::ptr::null_mut();
            // SAFETY: `c` is NUL-terminated and outlives the call; errno is thread-local.
            let (want, all, erange) = unsafe {
                *libc::__errno_location() = 0;
                let d = libc::strtod(c.as_ptr(), &mut end);
                let used = end.offset_from(c.as_ptr()) as usize;
                (d, used == body.len() + 2, *libc::__errno_location() == libc::ERANGE)
            };
            let got = hex_float(body.as_bytes());
            if all {
                assert_eq!(got, Some((want, erange)), "0x{body}");
            } else {
                assert_eq!(got, None, "0x{body}");
            }
        }
    }
    use super::*;

    #[test]
    fn index_ranges_clamp_like_lrange() {
        assert_eq!(clamp_index_range(0, -1, 5), Some((0, 4)));
        assert_eq!(clamp_index_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(clamp_index_range(3, 1, 5), None);
        assert_eq!(clamp_index_range(5, 9, 5), None);
        assert_eq!(clamp_index_range(-2, -1, 5), Some((3, 4)));
        assert_eq!(clamp_index_range(0, -1, 0), None);
        assert_eq!(clamp_index_range(i64::MIN, i64::MAX, 3), Some((0, 2)));
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        for bad in [&b""[..], b"01", b"+1", b" 1", b"1 ", b"-0", b"-", b"1a"] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn g17_matches_printf() {
        assert_eq!(fmt_g17(1.0), "1");
        assert_eq!(fmt_g17(1.5), "1.5");
        assert_eq!(fmt_g17(0.1), "0.10000000000000001");
        assert_eq!(fmt_g17(1e-7), "9.9999999999999995e-08");
        assert_eq!(fmt_g17(1e20), "1e+20");
        assert_eq!(fmt_g17(123456789.0), "123456789");
        assert_eq!(fmt_g17(f64::INFINITY), "inf");
        assert_eq!(fmt_g17(-0.0), "-0");
        assert_eq!(fmt_g(3.0, 6), "3");
        assert_eq!(fmt_g(0.0001, 6), "0.0001");
        assert_eq!(fmt_g(0.00001, 6), "1e-05");
    }

    #[test]
    fn floats_refuse_nan_and_spaces() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        // Plain integers, read the short way, as strtod reads them.
        for text in
            ["0", "-0", "+0", "7", "-7", "+7", "007", "999999999999999", "-999999999999999", "1234567890123456789"]
        {
            let got = parse_f64(text.as_bytes()).unwrap();
            let want = strtod(text.as_bytes()).unwrap().0;
            assert_eq!(got.to_bits(), want.to_bits(), "{text}");
        }
        assert!(parse_f64(b"-0").unwrap().is_sign_negative());
        assert_eq!(parse_f64(b"-"), None);
        assert_eq!(parse_f64(b"+"), None);
        assert_eq!(parse_f64(b"1 "), None);
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b""), None);
    }
}

extern "C" {
    fn ferrodis_incrbyfloat(
        cur: *const u8,
        curlen: usize,
        incr: *const u8,
        incrlen: usize,
        out: *mut u8,
        cap: usize,
    ) -> std::os::raw::c_long;
    fn ferrodis_is_long_double(s: *const u8, len: usize) -> std::os::raw::c_int;
    fn ferrodis_timeout_ms(s: *const u8, len: usize, out: *mut i64) -> std::os::raw::c_int;
}

/// A timeout in seconds converted to milliseconds exactly as Redis 7.0 does it (long double,
/// `ceil(v * 1000)`, cast to a 64-bit integer). None when the text is not a valid long double.
pub fn timeout_ms(s: &[u8]) -> Option<i64> {
    let mut out = 0i64;
    // SAFETY: the pointer/length pair describes a live slice the C side only reads; `out` is a
    // valid i64 it writes once.
    let ok = unsafe { ferrodis_timeout_ms(s.as_ptr(), s.len(), &mut out) };
    (ok != 0).then_some(out)
}

/// Why a long-double increment failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LdError {
    /// The stored value is not a valid float.
    BadCurrent,
    /// The increment is not a valid float.
    BadIncrement,
    /// The result would be NaN or infinite.
    NanOrInf,
}

/// `cur + incr` in x87 long double, formatted as Redis's INCRBYFLOAT replies (`%.17Lf`, trailing
/// zeros trimmed). `cur` None means a missing key (0).
pub fn incr_long_double(cur: Option<&[u8]>, incr: &[u8]) -> Result<Vec<u8>, LdError> {
    let mut out = vec![0u8; 5 * 1024 + 64];
    let (cp, cl) = match cur {
        Some(c) => (c.as_ptr(), c.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: every pointer/length pair describes a live slice; the C side writes at most `cap`
    // bytes into `out` and reads at most the given lengths.
    let n = unsafe { ferrodis_incrbyfloat(cp, cl, incr.as_ptr(), incr.len(), out.as_mut_ptr(), out.len()) };
    match n {
        -1 => Err(LdError::BadCurrent),
        -2 => Err(LdError::BadIncrement),
        n if n < 0 => Err(LdError::NanOrInf),
        n => {
            out.truncate(n as usize);
            Ok(out)
        }
    }
}

/// Whether `s` parses as a long double the way Redis accepts it.
pub fn is_long_double(s: &[u8]) -> bool {
    // SAFETY: the pointer/length pair describes a live slice that the C side only reads.
    unsafe { ferrodis_is_long_double(s.as_ptr(), s.len()) != 0 }
}

#[cfg(test)]
mod long_double_tests {
    use super::*;

    #[test]
    fn incrbyfloat_matches_redis() {
        assert_eq!(incr_long_double(Some(b"0.1"), b"0.2").unwrap(), b"0.3");
        assert_eq!(incr_long_double(Some(b"5000"), b"0.1").unwrap(), b"5000.10000000000000009");
        assert_eq!(incr_long_double(None, b"-0").unwrap(), b"0");
        assert_eq!(incr_long_double(Some(b"abc"), b"1"), Err(LdError::BadCurrent));
        assert_eq!(incr_long_double(Some(b"1"), b" 1"), Err(LdError::BadIncrement));
        assert_eq!(incr_long_double(Some(b"1"), b"inf"), Err(LdError::NanOrInf));
    }
}
