//! SLOWLOG: the most recent commands slower than slowlog-log-slower-than, newest first, with
//! argv trimmed as Redis trims it (32 arguments, 128 bytes each) and secrets shown as
//! `(redacted)` where Redis 7.0's handlers redact them (see `redacted_positions`).

use std::collections::VecDeque;

pub const MAX_ARGC: usize = 32;
pub const MAX_ARG_LEN: usize = 128;

#[derive(Debug, Clone)]
pub struct SlowlogEntry {
    pub id: u64,
    pub time: i64,
    pub duration_us: u64,
    pub argv: Vec<Vec<u8>>,
    pub peer: String,
    pub name: String,
}

#[derive(Debug, Default)]
pub struct Slowlog {
    pub entries: VecDeque<SlowlogEntry>,
    pub next_id: u64,
}

impl Slowlog {
    /// Adds an entry for a command that took `duration_us`, trimming the argument list and
    /// hiding the arguments at `redacted`.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        argv: &[bytes::Bytes],
        redacted: &[usize],
        duration_us: u64,
        unix_secs: i64,
        peer: &str,
        name: &str,
        max_len: usize,
    ) {
        let mut trimmed: Vec<Vec<u8>> = Vec::with_capacity(argv.len().min(MAX_ARGC));
        let shown = if argv.len() > MAX_ARGC { MAX_ARGC - 1 } else { argv.len() };
        for (i, a) in argv[..shown].iter().enumerate() {
            if redacted.contains(&i) {
                trimmed.push(REDACTED.to_vec());
            } else if a.len() > MAX_ARG_LEN {
                let mut v = a[..MAX_ARG_LEN].to_vec();
                v.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_ARG_LEN).as_bytes());
                trimmed.push(v);
            } else {
                trimmed.push(a.to_vec());
            }
        }
        if argv.len() > MAX_ARGC {
            trimmed.push(format!("... ({} more arguments)", argv.len() - MAX_ARGC + 1).into_bytes());
        }
        self.entries.push_front(SlowlogEntry {
            id: self.next_id,
            time: unix_secs,
            duration_us,
            argv: trimmed,
            peer: peer.to_string(),
            name: name.to_string(),
        });
        self.next_id += 1;
        self.entries.truncate(max_len);
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }
}

/// What a hidden argument shows.
pub const REDACTED: &[u8] = b"(redacted)";

/// The configuration values CONFIG SET hides (Redis 7.0's sensitive configs).
const SENSITIVE_CONFIGS: [&str; 3] = ["masteruser", "masterauth", "requirepass"];

/// Argument positions Redis 7.0 hides from the slow log: its handlers redact as they parse, so
/// an argument counts only if the handler got that far before an error. `name` is the
/// command (`acl|setuser` for a subcommand).
///
/// - AUTH: every argument, unless there are too many (a syntax error first);
/// - HELLO: the user and password after AUTH, once the protocol version was accepted, up to
///   the first bad option;
/// - ACL SETUSER: the user name and every rule;
/// - CONFIG SET: the values of masteruser, masterauth and requirepass (for a well-formed
///   argument list, unknown names notwithstanding);
/// - MIGRATE: AUTH's password and AUTH2's user and password, up to the first bad option.
pub fn redacted_positions(name: &str, argv: &[bytes::Bytes]) -> Vec<usize> {
    let argc = argv.len();
    match name {
        "auth" if argc <= 3 => (1..argc).collect(),
        "hello" => {
            let version = argv.get(1).and_then(|v| crate::util::num::parse_i64(v));
            if argc < 2 || !matches!(version, Some(2 | 3)) {
                return Vec::new();
            }
            let mut out = Vec::new();
            let mut j = 2;
            while j < argc {
                let more = argc - 1 - j;
                if argv[j].eq_ignore_ascii_case(b"auth") && more >= 2 {
                    out.extend([j + 1, j + 2]);
                    j += 3;
                } else if argv[j].eq_ignore_ascii_case(b"setname") && more >= 1 {
                    j += 2;
                } else {
                    break;
                }
            }
            out
        }
        "acl|setuser" => (2..argc).collect(),
        "config|set" if argc >= 4 && argc.is_multiple_of(2) => (2..argc)
            .step_by(2)
            .filter(|&i| {
                std::str::from_utf8(&argv[i])
                    .ok()
                    .and_then(crate::config::lookup)
                    .is_some_and(|d| SENSITIVE_CONFIGS.contains(&d.name))
            })
            .map(|i| i + 1)
            .collect(),
        "migrate" => {
            let mut out = Vec::new();
            let mut j = 6;
            while j < argc {
                let more = argc - 1 - j;
                let opt = &argv[j];
                if opt.eq_ignore_ascii_case(b"copy") || opt.eq_ignore_ascii_case(b"replace") {
                    j += 1;
                } else if opt.eq_ignore_ascii_case(b"auth") && more >= 1 {
                    out.push(j + 1);
                    j += 2;
                } else if opt.eq_ignore_ascii_case(b"auth2") && more >= 2 {
                    out.extend([j + 1, j + 2]);
                    j += 3;
                } else {
                    // KEYS ends the options; anything else is a syntax error.
                    break;
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<bytes::Bytes> {
        words.iter().map(|w| bytes::Bytes::copy_from_slice(w.as_bytes())).collect()
    }

    #[test]
    fn redaction_follows_the_handlers_parse() {
        // Each case's expectation is what redis-server 7.0.15's SLOWLOG GET showed.
        let cases: &[(&str, &[&str], &[usize])] = &[
            ("auth", &["auth", "foo"], &[1]),
            ("auth", &["auth", "a", "b", "c"], &[]),
            ("hello", &["hello", "3", "auth", "default", "x", "setname", "n"], &[3, 4]),
            ("hello", &["hello", "2", "setname", "y", "auth", "u"], &[]),
            ("hello", &["hello", "9", "auth", "a", "b"], &[]),
            ("acl|setuser", &["acl", "setuser", "a b", "on"], &[2, 3]),
            ("acl|setuser", &["acl", "setuser", "ok"], &[2]),
            ("config|set", &["config", "set", "nosuch", "x", "masterauth", "y"], &[5]),
            ("config|set", &["config", "set", "MASTERAUTH", ""], &[3]),
            ("config|set", &["config", "set", "requirepass", "", "masteruser", "u"], &[3, 5]),
            ("config|set", &["config", "set", "tls-key-file-pass", "x"], &[]),
            ("migrate", &["migrate", "h", "1", "key", "0", "10", "AUTH", "pw"], &[7]),
            ("migrate", &["migrate", "h", "1", "key", "0", "10", "AUTH2", "u", "pw", "KEYS", "a"], &[7, 8]),
            ("migrate", &["migrate", "h", "1", "", "0", "10", "COPY", "AUTH"], &[]),
            ("migrate", &["migrate", "h", "1", "", "0", "10", "AUTH2", "x"], &[]),
            ("migrate", &["migrate", "h", "1", "", "0", "10", "AUTH", "p", "bogus", "AUTH", "q"], &[7]),
        ];
        for (name, words, want) in cases {
            assert_eq!(redacted_positions(name, &argv(words)), want.to_vec(), "{words:?}");
        }
    }
}
