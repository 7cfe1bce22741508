//! Server counters for INFO: the executor-owned ones (commands, keyspace hits, errors) and the
//! atomics the connection tasks bump from any thread (network bytes, connections).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes read from clients (all connections, any thread).
pub static NET_INPUT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes written to clients.
pub static NET_OUTPUT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Connections refused because of maxclients.
pub static REJECTED_CONNECTIONS: AtomicU64 = AtomicU64::new(0);
/// Connections accepted.
pub static TOTAL_CONNECTIONS: AtomicU64 = AtomicU64::new(0);

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

pub fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Per-command figures (INFO commandstats).
#[derive(Debug, Default, Clone, Copy)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

/// Samples for `instantaneous_*` figures: Redis keeps 16 samples taken every 100 ms.
#[derive(Debug, Default, Clone)]
pub struct InstantMetric {
    samples: [u64; 16],
    idx: usize,
    last_time_ms: i64,
    last_value: u64,
}

impl InstantMetric {
    /// Records the counter's value at `now_ms` (called from cron).
    pub fn track(&mut self, now_ms: i64, value: u64) {
        if self.last_time_ms == 0 {
            self.last_time_ms = now_ms;
            self.last_value = value;
            return;
        }
        let dt = (now_ms - self.last_time_ms).max(1) as u64;
        let per_sec = (value.saturating_sub(self.last_value)) * 1000 / dt;
        self.samples[self.idx] = per_sec;
        self.idx = (self.idx + 1) % self.samples.len();
        self.last_time_ms = now_ms;
        self.last_value = value;
    }

    pub fn value(&self) -> u64 {
        self.samples.iter().sum::<u64>() / self.samples.len() as u64
    }
}

#[derive(Debug, Default)]
pub struct Stats {
    pub total_commands_processed: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
    pub evicted_keys: u64,
    pub total_error_replies: u64,
    pub unexpected_error_replies: u64,
    pub commands: HashMap<&'static str, CommandStat, foldhash::fast::FixedState>,
    pub errors: HashMap<String, u64, foldhash::fast::FixedState>,
    pub ops: InstantMetric,
    pub net_input: InstantMetric,
    pub net_output: InstantMetric,
}

impl Stats {
    /// Counts an error reply under its code (`ERR`, `WRONGTYPE`, ...), as errorstats does.
    pub fn count_error(&mut self, line: &str) {
        self.total_error_replies += 1;
        let code = line.split(' ').next().unwrap_or("ERR");
        // Redis caps distinct error codes at 128 to bound memory.
        if let Some(n) = self.errors.get_mut(code) {
            *n += 1;
        } else if self.errors.len() < 128 {
            self.errors.insert(code.to_string(), 1);
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&mut self) {
        let ops = std::mem::take(&mut self.ops);
        *self = Stats { ops, ..Default::default() };
        for c in [&NET_INPUT_BYTES, &NET_OUTPUT_BYTES, &REJECTED_CONNECTIONS, &TOTAL_CONNECTIONS] {
            c.store(0, Ordering::Relaxed);
        }
    }
}
