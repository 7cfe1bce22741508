//! Server counters for INFO: the executor-owned ones (commands, keyspace hits, errors, latency
//! histograms, memory peak) and the atomics the connection tasks bump from any thread (network
//! bytes, connections, reads and writes).
//!
//! Per-command latency uses an HDR histogram with Redis's parameters (1 ns .. 1 s, two
//! significant digits) so INFO latencystats and LATENCY HISTOGRAM print the same bucket
//! boundaries Redis prints. Its counts array is allocated only for commands that run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes read from clients (all connections, any thread), the master link's excepted.
pub static NET_INPUT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes written to clients, replicas excepted.
pub static NET_OUTPUT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes read from the master, snapshot and stream (INFO total_net_repl_input_bytes).
pub static NET_REPL_INPUT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes written to replicas, snapshots and stream (INFO total_net_repl_output_bytes).
pub static NET_REPL_OUTPUT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Packed blobs checked deeply under sanitize-dump-payload (INFO dump_payload_sanitizations);
/// bumped by RESTORE and by loads, which may run on another thread.
pub static DUMP_PAYLOAD_SANITIZATIONS: AtomicU64 = AtomicU64::new(0);
/// Connections refused because of maxclients.
pub static REJECTED_CONNECTIONS: AtomicU64 = AtomicU64::new(0);
/// Connections accepted.
pub static TOTAL_CONNECTIONS: AtomicU64 = AtomicU64::new(0);
/// Reads of clients' sockets, as Redis counts its read handler's calls (INFO
/// total_reads_processed): each read that got data, the end of input or an error; the master
/// link's stream included.
pub static TOTAL_READS: AtomicU64 = AtomicU64::new(0);
/// Writes of replies to clients' sockets, as Redis counts writeToClient's calls (INFO
/// total_writes_processed): one per slice of output written; replicas' stream and the
/// replica's ACKs to its master included, snapshots not.
pub static TOTAL_WRITES: AtomicU64 = AtomicU64::new(0);

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

pub fn load(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Counts bytes written to a client: a replica's in the replication figure, as Redis counts.
#[inline]
pub fn add_output(to_replica: bool, n: u64) {
    add(if to_replica { &NET_REPL_OUTPUT_BYTES } else { &NET_OUTPUT_BYTES }, n);
}

/// A command's stats name (`get`, `config|get`). Every one comes from the command table (or
/// `executor::call::full_name`, which hands out one string per subcommand), so a name is
/// identified by its address: the per-call stats lookup hashes a pointer, not the bytes.
#[derive(Debug, Clone, Copy)]
pub struct StatName(pub &'static str);

impl PartialEq for StatName {
    fn eq(&self, other: &StatName) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for StatName {}

impl std::hash::Hash for StatName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.0.as_ptr() as usize);
    }
}

/// Per-command figures (INFO commandstats, latencystats, LATENCY HISTOGRAM).
#[derive(Debug, Default, Clone)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    pub latency: LatencyHistogram,
}

impl CommandStat {
    /// Counts one executed call that took `usec` microseconds; its latency goes into the
    /// histogram when `track` (latency-tracking) is on.
    pub fn record(&mut self, usec: u64, track: bool) {
        self.calls += 1;
        self.usec += usec;
        if track {
            self.latency.record(usec.saturating_mul(1000));
        }
    }
}

/// Smallest and largest recorded latency in nanoseconds; values outside are clamped, as Redis does.
pub const LATENCY_MIN_NS: u64 = 1;
pub const LATENCY_MAX_NS: u64 = 1_000_000_000;
/// Two significant decimal digits need 256 sub-buckets (the next power of two above 2 * 10^2).
const SUB_BUCKET_BITS: u32 = 8;
const SUB_BUCKET_HALF: u64 = 1 << (SUB_BUCKET_BITS - 1);

/// An HDR histogram: one counter per slot of equivalent values, allocated on first use (24 KB,
/// as in Redis) so recording stays one array increment on the command path.
#[derive(Debug, Default, Clone)]
pub struct LatencyHistogram {
    counts: Option<Box<[u64]>>,
    total: u64,
}

/// Slots needed to cover LATENCY_MAX_NS: 23 power-of-two buckets of 128 upper sub-buckets,
/// plus the lower half of the first.
const HDR_SLOTS: usize = 24 * SUB_BUCKET_HALF as usize;

/// The bucket (power-of-two magnitude) and sub-bucket of `v`.
fn hdr_position(v: u64) -> (u32, u64) {
    let bits = 64 - (v | (2 * SUB_BUCKET_HALF - 1)).leading_zeros();
    let bucket = bits - SUB_BUCKET_BITS;
    (bucket, v >> bucket)
}

fn hdr_index(v: u64) -> u32 {
    let (bucket, sub) = hdr_position(v);
    // Bucket 0 uses all 256 sub-buckets; every later bucket only its upper half.
    if bucket == 0 {
        sub as u32
    } else {
        (bucket as u64 * SUB_BUCKET_HALF + sub) as u32
    }
}

fn hdr_value_at(index: u32) -> u64 {
    let index = index as u64;
    if index < 2 * SUB_BUCKET_HALF {
        return index;
    }
    let bucket = index / SUB_BUCKET_HALF - 1;
    let sub = index % SUB_BUCKET_HALF + SUB_BUCKET_HALF;
    sub << bucket
}

/// The largest value counted in the same slot as `v`.
pub fn hdr_highest_equivalent(v: u64) -> u64 {
    let (bucket, sub) = hdr_position(v);
    let lowest = sub << bucket;
    lowest + (1u64 << bucket) - 1
}

impl LatencyHistogram {
    pub fn record(&mut self, ns: u64) {
        let v = ns.clamp(LATENCY_MIN_NS, LATENCY_MAX_NS);
        let counts = self.counts.get_or_insert_with(|| vec![0; HDR_SLOTS].into_boxed_slice());
        if let Some(c) = counts.get_mut(hdr_index(v) as usize) {
            *c += 1;
            self.total += 1;
        }
    }

    /// Non-empty slots in value order.
    fn slots(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.counts.iter().flat_map(|c| c.iter().enumerate()).filter(|(_, &n)| n > 0).map(|(i, &n)| (i as u32, n))
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// The value at `percentile` (0..=100), reported as the highest value of its slot.
    pub fn value_at_percentile(&self, percentile: f64) -> u64 {
        let p = percentile.min(100.0);
        let wanted = (((p / 100.0) * self.total as f64) + 0.5) as u64;
        let wanted = wanted.max(1);
        let mut seen = 0;
        for (idx, n) in self.slots() {
            seen += n;
            if seen >= wanted {
                return hdr_highest_equivalent(hdr_value_at(idx));
            }
        }
        0
    }

    /// Cumulative counts at power-of-two steps from 1024 ns, as (microseconds, count) pairs,
    /// only where the count grew (LATENCY HISTOGRAM).
    pub fn cumulative_log2(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut level: u64 = 1024;
        let mut iter = self.slots().peekable();
        let mut cumulative = 0;
        let mut previous = 0;
        while cumulative < self.total {
            let limit = hdr_index(level);
            while let Some(&(idx, n)) = iter.peek() {
                if idx > limit {
                    break;
                }
                cumulative += n;
                iter.next();
            }
            if cumulative > previous {
                out.push((hdr_highest_equivalent(level) / 1000, cumulative));
            }
            previous = cumulative;
            level = level.saturating_mul(2);
        }
        out
    }
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
    /// Active expiry: the running average of the share of expired keys among those its cycles
    /// looked at, how many cycles ran out of time, and the time they took (microseconds).
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached: u64,
    pub expire_cycle_us: u64,
    pub evicted_keys: u64,
    /// Clients closed by maxmemory-clients (INFO evicted_clients).
    pub evicted_clients: u64,
    /// Reply buffers the client cron resized (INFO reply_buffer_shrinks / _expands).
    pub reply_buffer_shrinks: u64,
    pub reply_buffer_expands: u64,
    pub total_error_replies: u64,
    pub unexpected_error_replies: u64,
    pub commands: HashMap<StatName, CommandStat, foldhash::fast::FixedState>,
    /// How many CONFIG RESETSTATs there were: a command counted before one and timed after it
    /// (a KEYS walk, `executor::walks::Account`) adds no time to the counters it was not in.
    pub epoch: u64,
    pub errors: HashMap<String, u64, foldhash::fast::FixedState>,
    pub ops: InstantMetric,
    pub net_input: InstantMetric,
    pub net_output: InstantMetric,
    pub net_repl_input: InstantMetric,
    pub net_repl_output: InstantMetric,
    /// Highest jemalloc `allocated` seen (INFO used_memory_peak).
    pub mem_peak: u64,
    /// `allocated` when memory was first sampled, shortly after start (used_memory_startup).
    pub mem_startup: u64,
    /// jemalloc's allocated bytes at the last stats refresh, and this thread's own allocation
    /// counters then: `used_memory_now` moves the figure on by what this thread did since.
    mem_base: u64,
    mem_base_thread: (u64, u64),
    /// Milliseconds eviction has run past its time limit (INFO total_eviction_exceeded_time),
    /// and when the current overrun began.
    pub eviction_exceeded_ms: u64,
    pub eviction_exceeded_since: Option<i64>,
    pub persistence: PersistenceStats,
}

/// What the persistence code reports to INFO persistence (filled in by the RDB writer).
#[derive(Debug, Clone)]
pub struct PersistenceStats {
    pub loading: bool,
    pub bgsave_in_progress: bool,
    /// Unix seconds when the running BGSAVE started.
    pub bgsave_started_unix: i64,
    pub last_bgsave_ok: bool,
    /// Seconds the last BGSAVE took, -1 if none ran.
    pub last_bgsave_time_sec: i64,
    pub rdb_saves: u64,
    pub last_load_keys_loaded: u64,
    pub last_load_keys_expired: u64,
    pub total_forks: u64,
    pub latest_fork_usec: u64,
}

impl Default for PersistenceStats {
    fn default() -> Self {
        PersistenceStats {
            loading: false,
            bgsave_in_progress: false,
            bgsave_started_unix: 0,
            last_bgsave_ok: true,
            last_bgsave_time_sec: -1,
            rdb_saves: 0,
            last_load_keys_loaded: 0,
            last_load_keys_expired: 0,
            total_forks: 0,
            latest_fork_usec: 0,
        }
    }
}

/// jemalloc's figures, refreshed by advancing its stats epoch.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllocatorStats {
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub mapped: u64,
    pub retained: u64,
}

/// This thread's running totals of bytes allocated and freed, read through the pointers
/// jemalloc hands out for them (looked up once per thread).
fn thread_counters() -> (u64, u64) {
    use tikv_jemalloc_ctl::thread::{allocatedp, deallocatedp, ThreadLocal};
    thread_local! {
        static COUNTERS: Option<(ThreadLocal<u64>, ThreadLocal<u64>)> =
            allocatedp::read().ok().zip(deallocatedp::read().ok());
    }
    COUNTERS.with(|c| c.map_or((0, 0), |(a, d)| (a.get(), d.get())))
}

impl AllocatorStats {
    pub fn read() -> AllocatorStats {
        use tikv_jemalloc_ctl::{epoch, stats};
        let _ = epoch::advance();
        AllocatorStats {
            allocated: stats::allocated::read().unwrap_or(0) as u64,
            active: stats::active::read().unwrap_or(0) as u64,
            resident: stats::resident::read().unwrap_or(0) as u64,
            mapped: stats::mapped::read().unwrap_or(0) as u64,
            retained: stats::retained::read().unwrap_or(0) as u64,
        }
    }
}

impl Stats {
    /// Counts an error reply under its code (`ERR`, `WRONGTYPE`, ...), as errorstats does.
    pub fn count_error(&mut self, line: impl AsRef<[u8]>) {
        self.total_error_replies += 1;
        let line = line.as_ref();
        // A line may carry the `-` of its own code (a script's `-CODE msg`): the writer sends one
        // `-` either way, and the code is what follows it.
        let line = line.strip_prefix(b"-").unwrap_or(line);
        // The code is the first word, looked for in the first 32 bytes; without a space there
        // (`DEBUG ERROR foo`) Redis falls back to ERR.
        let head = &line[..line.len().min(32)];
        let code = match head.iter().position(|&c| c == b' ') {
            Some(end) => String::from_utf8_lossy(&line[..end]),
            None => "ERR".into(),
        };
        // Redis caps distinct error codes at 128 to bound memory.
        if let Some(n) = self.errors.get_mut(code.as_ref()) {
            *n += 1;
        } else if self.errors.len() < 128 {
            self.errors.insert(code.into_owned(), 1);
        }
    }

    /// Samples jemalloc and raises the peak (called from cron and INFO). Returns the sample and
    /// used_memory: allocated less `not_counted` (the Lua heap, which Redis does not count).
    pub fn sample_memory(&mut self, not_counted: u64) -> (AllocatorStats, u64) {
        let a = AllocatorStats::read();
        self.mem_base = a.allocated;
        self.mem_base_thread = thread_counters();
        // The counting allocator's exact figure when it is installed (see `crate::alloc`).
        let used = crate::alloc::used().unwrap_or(a.allocated).saturating_sub(not_counted);
        if self.mem_startup == 0 {
            self.mem_startup = used;
        }
        self.mem_peak = self.mem_peak.max(used);
        (a, used)
    }

    /// Raises the peak (the cron's sample) without refreshing jemalloc's statistics when the
    /// counting allocator gives used_memory: an epoch refresh merges the statistics of every
    /// size class of the arenas (about 330k instructions a call under callgrind, hz times a
    /// second, where Redis's whole serverCron took about 120k), and only INFO and MEMORY read
    /// those figures, which sample for themselves. Without the counting allocator, a full
    /// sample.
    pub fn note_memory_peak(&mut self, not_counted: u64) {
        let Some(used) = crate::alloc::used() else {
            self.sample_memory(not_counted);
            return;
        };
        let used = used.saturating_sub(not_counted);
        if self.mem_startup == 0 {
            self.mem_startup = used;
        }
        self.mem_peak = self.mem_peak.max(used);
    }

    /// Allocated bytes now, for maxmemory: the counting allocator's sum when it is installed;
    /// else the last stats refresh (made ten times a second by the cron) moved on by this
    /// thread's allocations and frees since, where other threads' frees show at the next refresh.
    pub fn used_memory_now(&self) -> u64 {
        if let Some(used) = crate::alloc::used() {
            return used;
        }
        let (alloc, dealloc) = thread_counters();
        let (alloc0, dealloc0) = self.mem_base_thread;
        let grown = alloc.wrapping_sub(alloc0) as i64 - dealloc.wrapping_sub(dealloc0) as i64;
        (self.mem_base as i64).saturating_add(grown).max(0) as u64
    }

    /// CONFIG RESETSTAT. The memory baseline, peak and persistence state survive, as in Redis.
    pub fn reset(&mut self) {
        crate::db::lazyfree::reset_stats();
        let ops = std::mem::take(&mut self.ops);
        let persistence = std::mem::take(&mut self.persistence);
        *self = Stats {
            ops,
            persistence,
            mem_peak: self.mem_peak,
            mem_startup: self.mem_startup,
            mem_base: self.mem_base,
            mem_base_thread: self.mem_base_thread,
            epoch: self.epoch + 1,
            ..Default::default()
        };
        for c in [
            &NET_INPUT_BYTES,
            &NET_OUTPUT_BYTES,
            &NET_REPL_INPUT_BYTES,
            &NET_REPL_OUTPUT_BYTES,
            &DUMP_PAYLOAD_SANITIZATIONS,
            &REJECTED_CONNECTIONS,
            &TOTAL_CONNECTIONS,
            &TOTAL_READS,
            &TOTAL_WRITES,
        ] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdr_slots_match_redis_reports() {
        // Redis prints 5 us as 5.023, 10 us as 10.047, 16 us as 16.063 (highest equivalent values).
        assert_eq!(hdr_highest_equivalent(5000), 5023);
        assert_eq!(hdr_highest_equivalent(10_000), 10_047);
        assert_eq!(hdr_highest_equivalent(16_000), 16_063);
        assert_eq!(hdr_highest_equivalent(2048), 2063);
        assert_eq!(hdr_highest_equivalent(100), 100);
        assert!((hdr_index(LATENCY_MAX_NS) as usize) < HDR_SLOTS);
        for v in [1u64, 255, 256, 1000, 5000, 123_456, 999_999_999] {
            let idx = hdr_index(v);
            let low = hdr_value_at(idx);
            assert!(low <= v && v <= hdr_highest_equivalent(low), "{v}");
        }
    }

    #[test]
    fn error_codes() {
        let mut st = Stats::default();
        st.count_error("WRONGTYPE Operation against a key");
        st.count_error("foo");
        st.count_error("ERR x");
        st.count_error("-OOM command not allowed");
        assert_eq!(st.errors.get("WRONGTYPE"), Some(&1));
        assert_eq!(st.errors.get("ERR"), Some(&2));
        assert_eq!(st.errors.get("OOM"), Some(&1));
        assert_eq!(st.total_error_replies, 4);
    }

    #[test]
    fn percentiles_and_cdf() {
        let mut h = LatencyHistogram::default();
        for us in [8u64, 8, 11] {
            h.record(us * 1000);
        }
        assert_eq!(h.value_at_percentile(50.0), 8031);
        assert_eq!(h.value_at_percentile(99.0), 11_007);
        assert_eq!(h.cumulative_log2(), vec![(8, 2), (16, 3)]);
        let mut h = LatencyHistogram::default();
        h.record(2000);
        assert_eq!(h.cumulative_log2(), vec![(2, 1)]);
        h.record(135_000_000);
        assert_eq!(h.cumulative_log2(), vec![(2, 1), (135_266, 2)]);
    }
}
