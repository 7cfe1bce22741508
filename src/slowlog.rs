//! SLOWLOG: the most recent commands slower than slowlog-log-slower-than, newest first, with
//! argv trimmed as Redis trims it (32 arguments, 128 bytes each).

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
    /// Adds an entry for a command that took `duration_us`, trimming the argument list.
    pub fn push(
        &mut self,
        argv: &[bytes::Bytes],
        duration_us: u64,
        unix_secs: i64,
        peer: &str,
        name: &str,
        max_len: usize,
    ) {
        let mut trimmed: Vec<Vec<u8>> = Vec::with_capacity(argv.len().min(MAX_ARGC));
        let shown = if argv.len() > MAX_ARGC { MAX_ARGC - 1 } else { argv.len() };
        for a in &argv[..shown] {
            if a.len() > MAX_ARG_LEN {
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
