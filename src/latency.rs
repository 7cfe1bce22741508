//! The latency monitor (LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR): per event class, the
//! last 160 seconds that saw a spike of at least latency-monitor-threshold milliseconds, one
//! sample per second (the worst of that second), and the all-time worst.
//!
//! Events are named as Redis 7.0 names them, and recorded where Ferrodis does the same work:
//! `command` / `fast-command` (call(), by the command's FAST flag), `command-unblocking` (a woken
//! blocked command), `expire-cycle` (the cron's active expiry pass), `eviction-cycle` and
//! `eviction-del` (maxmemory eviction), `fork` (BGSAVE / BGREWRITEAOF forks), `aof-write` with
//! `aof-write-alone` or `aof-write-active-child`, and `aof-fsync-always` (the AOF buffer's write
//! and, under appendfsync always, its fsync).
//!
//! Not recorded: `expire-del` (Redis times each expired key's deletion; ours are not timed one by
//! one), `aof-write-pending-fsync`, `aof-fstat`, `aof-rename`, `rdb-unlink-temp-file`,
//! `while-blocked-cron` and the module events.
//!
//! Recording is cheap when the monitor is off: callers measure anyway (call() always has the
//! duration) and `record` looks the threshold up only for spans of a millisecond or more.
//! This module owns the series and their rendering; it measures nothing itself.

use std::fmt::Write as _;

/// Seconds of history kept per event (Redis's LATENCY_TS_LEN).
pub const TS_LEN: usize = 160;

/// Width of LATENCY GRAPH's sparkline.
const GRAPH_COLS: usize = 80;

#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    /// Unix seconds; 0 marks an unused slot.
    time: i64,
    latency_ms: u32,
}

/// One event's ring of samples.
#[derive(Debug, Clone)]
struct Series {
    next: usize,
    max: u32,
    samples: [Sample; TS_LEN],
}

impl Series {
    fn new() -> Series {
        Series { next: 0, max: 0, samples: [Sample::default(); TS_LEN] }
    }

    /// Used samples, oldest first.
    fn in_order(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..TS_LEN).map(move |j| self.samples[(self.next + j) % TS_LEN]).filter(|s| s.time != 0)
    }

    fn last(&self) -> Sample {
        self.samples[(self.next + TS_LEN - 1) % TS_LEN]
    }
}

/// Every event seen since the last reset, in first-seen order.
#[derive(Debug, Default)]
pub struct Monitor {
    events: Vec<(String, Box<Series>)>,
}

impl Monitor {
    /// Adds a `latency_ms` spike of `event` at `now_secs`; within one second only the worst counts.
    pub fn add(&mut self, event: &str, latency_ms: u64, now_secs: i64) {
        let latency_ms = latency_ms.min(u32::MAX as u64) as u32;
        let series = match self.events.iter().position(|(name, _)| name == event) {
            Some(i) => &mut self.events[i].1,
            None => {
                self.events.push((event.to_string(), Box::new(Series::new())));
                &mut self.events.last_mut().expect("just pushed").1
            }
        };
        series.max = series.max.max(latency_ms);
        let prev = (series.next + TS_LEN - 1) % TS_LEN;
        if series.samples[prev].time == now_secs {
            let s = &mut series.samples[prev];
            s.latency_ms = s.latency_ms.max(latency_ms);
            return;
        }
        series.samples[series.next] = Sample { time: now_secs, latency_ms };
        series.next = (series.next + 1) % TS_LEN;
    }

    /// Drops the named event (any case), or every event; returns how many were dropped.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.events.len();
        match event {
            None => self.events.clear(),
            Some(e) => self.events.retain(|(name, _)| !name.as_bytes().eq_ignore_ascii_case(e)),
        }
        before - self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    fn find(&self, event: &[u8]) -> Option<(&str, &Series)> {
        self.events.iter().find(|(name, _)| name.as_bytes() == event).map(|(n, s)| (n.as_str(), &**s))
    }

    /// LATENCY HISTORY: (unix seconds, milliseconds) pairs, oldest first; None for an unknown event.
    pub fn history(&self, event: &[u8]) -> Option<Vec<(i64, u32)>> {
        self.find(event).map(|(_, s)| s.in_order().map(|x| (x.time, x.latency_ms)).collect())
    }

    /// LATENCY LATEST: per event its name, the latest sample's time and latency, and the worst.
    pub fn latest(&self) -> Vec<(&str, i64, u32, u32)> {
        self.events
            .iter()
            .map(|(name, s)| {
                let last = s.last();
                (name.as_str(), last.time, last.latency_ms, s.max)
            })
            .collect()
    }

    /// LATENCY GRAPH: the event's samples as an ASCII sparkline, each labelled by its age.
    pub fn graph(&self, event: &[u8], now_secs: i64) -> Option<String> {
        let (name, series) = self.find(event)?;
        let samples: Vec<Sample> = series.in_order().collect();
        let low = samples.iter().map(|s| s.latency_ms).min().unwrap_or(0);
        let high = samples.iter().map(|s| s.latency_ms).max().unwrap_or(0);
        let mut out = format!("{name} - high {high} ms, low {low} ms (all time high {} ms)\n", series.max);
        out.push_str(&"-".repeat(GRAPH_COLS));
        out.push('\n');
        let points: Vec<(f64, String)> =
            samples.iter().map(|s| (s.latency_ms as f64, age_label(now_secs - s.time))).collect();
        sparkline(&mut out, &points, GRAPH_COLS, 4);
        Some(out)
    }

    /// Count, average, mean absolute deviation and first time of an event's samples.
    fn analyze(series: &Series, now_secs: i64) -> (u64, u64, u64, i64) {
        let samples: Vec<Sample> = series.in_order().collect();
        let n = samples.len() as u64;
        if n == 0 {
            return (0, 0, 0, 0);
        }
        let avg = samples.iter().map(|s| s.latency_ms as u64).sum::<u64>() / n;
        let mad = samples.iter().map(|s| (avg as i64 - s.latency_ms as i64).unsigned_abs()).sum::<u64>() / n;
        let oldest = samples.iter().map(|s| s.time).min().unwrap_or(now_secs);
        let period = match now_secs - oldest {
            0 => 1,
            p => p,
        };
        (n, avg, mad, period)
    }

    /// LATENCY DOCTOR's report, as Redis 7.0 words it.
    pub fn doctor(&self, d: &DoctorInputs) -> String {
        if self.events.is_empty() && d.threshold_ms == 0 {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. \
                    You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. \
                    If we weren't in a deep space mission I'd suggest to take a look at \
                    https://redis.io/topics/latency-monitor.\n"
                .to_string();
        }
        let mut a = Advice::default();
        let mut advices = 0;
        let mut report = String::new();
        for (i, (name, series)) in self.events.iter().enumerate() {
            if i == 0 {
                report.push_str(
                    "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about \
                     it, do you Dave?\n\n",
                );
            }
            let (n, avg, mad, period) = Self::analyze(series, d.now_secs);
            let _ = write!(
                report,
                "{}. {name}: {n} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). \
                 Worst all time event {}ms.",
                i + 1,
                period as f64 / n.max(1) as f64,
                series.max
            );
            let event = name.to_ascii_lowercase();
            match event.as_str() {
                "fork" => {
                    let rate = d.fork_rate_gb_per_sec;
                    let quality = if rate < 10.0 {
                        "terrible"
                    } else if rate < 25.0 {
                        "poor"
                    } else if rate < 100.0 {
                        "good"
                    } else {
                        "excellent"
                    };
                    if rate < 25.0 {
                        a.better_vm = true;
                        advices += 1;
                    }
                    let _ = write!(report, " Fork rate is {rate:.2} GB/sec ({quality}).");
                }
                "command" => {
                    if d.slowlog_log_slower_than < 0 {
                        a.slowlog_enabled = true;
                        advices += 1;
                    } else if d.slowlog_log_slower_than / 1000 > d.threshold_ms as i64 {
                        a.slowlog_tuning = true;
                        advices += 1;
                    }
                    a.slowlog_inspect = true;
                    a.large_objects = true;
                    advices += 2;
                }
                "fast-command" => {
                    a.scheduler = true;
                    advices += 1;
                }
                "aof-write-pending-fsync" => {
                    (a.local_disk, a.disk_contention, a.ssd, a.data_writeback) = (true, true, true, true);
                    advices += 4;
                }
                "aof-write-active-child" => {
                    (a.no_appendfsync, a.data_writeback, a.ssd) = (true, true, true);
                    advices += 3;
                }
                "aof-write-alone" => {
                    (a.local_disk, a.data_writeback, a.ssd) = (true, true, true);
                    advices += 3;
                }
                "aof-fsync-always" => {
                    a.relax_fsync_policy = true;
                    advices += 1;
                }
                "aof-fstat" | "rdb-unlink-temp-file" => {
                    (a.disk_contention, a.local_disk) = (true, true);
                    advices += 2;
                }
                "aof-rewrite-diff-write" | "aof-rename" => {
                    (a.write_load_info, a.data_writeback, a.ssd, a.local_disk) = (true, true, true, true);
                    advices += 4;
                }
                "expire-cycle" => {
                    (a.hz, a.large_objects) = (true, true);
                    advices += 2;
                }
                "eviction-del" => {
                    a.large_objects = true;
                    advices += 1;
                }
                "eviction-cycle" => {
                    a.mass_eviction = true;
                    advices += 1;
                }
                _ => {}
            }
            report.push('\n');
        }
        if d.anon_huge_pages > 0 {
            a.disable_thp = true;
            advices += 1;
        }
        if self.events.is_empty() && advices == 0 {
            report.push_str(
                "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the \
                 slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think \
                 things over.\n",
            );
        } else if !self.events.is_empty() && advices == 0 {
            report.push_str(
                "\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the \
                 Redis community to get some help, providing this report in your help request.\n",
            );
        } else {
            a.write(&mut report, d);
        }
        report
    }
}

/// What LATENCY DOCTOR reads besides the events.
#[derive(Debug, Clone, Default)]
pub struct DoctorInputs {
    pub now_secs: i64,
    pub threshold_ms: u64,
    pub slowlog_log_slower_than: i64,
    pub fork_rate_gb_per_sec: f64,
    pub appendfsync_always: bool,
    pub hz: u32,
    /// Bytes of anonymous huge pages mapped by this process.
    pub anon_huge_pages: u64,
}

#[derive(Debug, Default)]
struct Advice {
    better_vm: bool,
    slowlog_enabled: bool,
    slowlog_tuning: bool,
    slowlog_inspect: bool,
    disk_contention: bool,
    scheduler: bool,
    data_writeback: bool,
    no_appendfsync: bool,
    local_disk: bool,
    ssd: bool,
    write_load_info: bool,
    hz: bool,
    large_objects: bool,
    mass_eviction: bool,
    relax_fsync_policy: bool,
    disable_thp: bool,
}

impl Advice {
    fn write(&self, r: &mut String, d: &DoctorInputs) {
        let threshold_us = d.threshold_ms.saturating_mul(1000);
        r.push_str("\nI have a few advices for you:\n\n");
        if self.better_vm {
            r.push_str(
                "- If you are using a virtual machine, consider upgrading it with a faster one using a \
                 hypervisior that provides less latency during fork() calls. Xen is known to have poor fork() \
                 performance. Even in the context of the same VM provider, certain kinds of instances can \
                 execute fork faster than others.\n",
            );
        }
        if self.slowlog_enabled {
            let _ = writeln!(
                r,
                "- There are latency issues with potentially slow commands you are using. Try to enable the \
                 Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {threshold_us}'. \
                 If the Slow log is disabled Redis is not able to log slow commands execution for you."
            );
        }
        if self.slowlog_tuning {
            let _ = writeln!(
                r,
                "- Your current Slow Log configuration only logs events that are slower than your configured \
                 latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {threshold_us}'."
            );
        }
        if self.slowlog_inspect {
            r.push_str(
                "- Check your Slow Log to understand what are the commands you are running which are too slow \
                 to execute. Please check https://redis.io/commands/slowlog for more information.\n",
            );
        }
        if self.scheduler {
            r.push_str(
                "- The system is slow to execute Redis code paths not containing system calls. This usually \
                 means the system does not provide Redis CPU time to run for long periods. You should try \
                 to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running \
                 other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  \
                 4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your \
                 system.\n  5) Check if the problem is allocator-related by recompiling Redis with \
                 MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n",
            );
        }
        if self.local_disk {
            r.push_str(
                "- It is strongly advised to use local disks for persistence, especially if you are using \
                 AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n",
            );
        }
        if self.ssd {
            r.push_str(
                "- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and AOF \
                 log rewriting (resulting in smaller memory usage and smaller final AOF rewrite buffer \
                 flushes). With extremely high write load SSD disks can be a good option. However Redis \
                 should perform reasonably with high load using normal disks. Use this advice as a last \
                 resort.\n",
            );
        }
        if self.data_writeback {
            r.push_str(
                "- Mounting ext3/4 filesystems with data=writeback can provide a performance boost compared \
                 to data=ordered, however this mode of operation provides less guarantees, and sometimes it \
                 can happen that after a hard crash the AOF file will have a half-written command at the end \
                 and will require to be repaired before Redis restarts.\n",
            );
        }
        if self.disk_contention {
            r.push_str(
                "- Try to lower the disk contention. This is often caused by other disk intensive processes \
                 running in the same computer (including other Redis instances).\n",
            );
        }
        if self.no_appendfsync {
            r.push_str(
                "- Assuming from the point of view of data safety this is viable in your environment, you \
                 could try to enable the 'no-appendfsync-on-rewrite' option, so that fsync will not be \
                 performed while there is a child rewriting the AOF file or producing an RDB file (the moment \
                 where there is high disk contention).\n",
            );
        }
        if self.relax_fsync_policy && d.appendfsync_always {
            r.push_str(
                "- Your fsync policy is set to 'always'. It is very hard to get good performances with such a \
                 setup, if possible try to relax the fsync policy to 'onesec'.\n",
            );
        }
        if self.write_load_info {
            r.push_str(
                "- Latency during the AOF atomic rename operation or when the final difference is flushed to \
                 the AOF file at the end of the rewrite, sometimes is caused by very high write load, causing \
                 the AOF buffer to get very large. If possible try to send less commands to accomplish the \
                 same work, or use Lua scripts to group multiple operations into a single EVALSHA call.\n",
            );
        }
        if self.hz && d.hz < 100 {
            r.push_str(
                "- In order to make the Redis keys expiring process more incremental, try to set the 'hz' \
                 configuration parameter to 100 using 'CONFIG SET hz 100'.\n",
            );
        }
        if self.large_objects {
            r.push_str(
                "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking \
                 operation. If you have very large objects that are often deleted, expired, or evicted, try \
                 to fragment those objects into multiple smaller objects.\n",
            );
        }
        if self.mass_eviction {
            r.push_str(
                "- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects \
                 via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys \
                 migrations (RESTORE command), may create sudden memory pressure forcing the server to block \
                 trying to evict keys. \n",
            );
        }
        if self.disable_thp {
            r.push_str(
                "- I detected a non zero amount of anonymous huge pages used by your process. This creates \
                 very serious latency events in different conditions, especially when Redis is persisting on \
                 disk. To disable THP support use the command 'echo never > \
                 /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so \
                 that the command will be executed again after a reboot. Note that even if you have already \
                 disabled THP, you still need to restart the Redis process to get rid of the huge pages \
                 already created.\n",
            );
        }
    }
}

/// How long ago a sample was, as LATENCY GRAPH labels it: `12s`, `3m`, `5h`, `2d`.
fn age_label(elapsed: i64) -> String {
    match elapsed {
        e if e < 60 => format!("{e}s"),
        e if e < 3600 => format!("{}m", e / 60),
        e if e < 86400 => format!("{}h", e / 3600),
        e => format!("{}d", e / 86400),
    }
}

/// Renders `points` (value, label) as a filled sparkline of `rows` text rows, `columns` wide per
/// block, each label written vertically below its column after one blank row.
fn sparkline(out: &mut String, points: &[(f64, String)], columns: usize, rows: usize) {
    const FILL: [u8; 3] = *b"_o#";
    let min = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let max = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    let has_labels = points.iter().any(|p| !p.1.is_empty());
    let steps = (FILL.len() * rows) as i64;
    let relmax = if max - min == 0.0 { 1.0 } else { max - min };
    for (block, chunk) in points.chunks(columns).enumerate() {
        if block > 0 {
            out.push('\n');
        }
        let mut row = 0;
        loop {
            let mut line = vec![b' '; chunk.len()];
            let mut more = false;
            for (j, (value, label)) in chunk.iter().enumerate() {
                if row < rows {
                    // Truncate the scaled value first, then the ratio, as the C expression does.
                    let step = (((value - min) * steps as f64).trunc() / relmax) as i64;
                    let step = step.clamp(0, steps - 1);
                    let idx = step - ((rows - row - 1) * FILL.len()) as i64;
                    more = true;
                    if (0..FILL.len() as i64).contains(&idx) {
                        line[j] = FILL[idx as usize];
                    } else if idx >= FILL.len() as i64 {
                        line[j] = b'|';
                    }
                } else {
                    if has_labels && row - rows < 1 {
                        more = true;
                        break;
                    }
                    if let Some(&c) = label.as_bytes().get(row - rows - 1) {
                        more = true;
                        line[j] = c;
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&line));
            out.push('\n');
        }
    }
}

/// Bytes of AnonHugePages over every mapping of this process (/proc/self/smaps), 0 if unknown.
pub fn anon_huge_pages() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps") else { return 0 };
    text.lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .filter_map(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .sum::<u64>()
        * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst() {
        let mut m = Monitor::default();
        m.add("command", 300, 100);
        m.add("command", 250, 100);
        m.add("command", 400, 101);
        assert_eq!(m.history(b"command"), Some(vec![(100, 300), (101, 400)]));
        assert_eq!(m.latest(), vec![("command", 101, 400, 400)]);
        assert_eq!(m.history(b"COMMAND"), None);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert!(m.is_empty());
    }

    #[test]
    fn ring_keeps_160_seconds() {
        let mut m = Monitor::default();
        for t in 1..=200 {
            m.add("expire-cycle", t as u64, t);
        }
        let h = m.history(b"expire-cycle").unwrap_or_default();
        assert_eq!(h.len(), TS_LEN);
        assert_eq!(h[0], (41, 41));
        assert_eq!(h[TS_LEN - 1], (200, 200));
    }

    #[test]
    fn graph_of_one_sample() {
        // Bytes from redis-server 7.0.15 after one DEBUG SLEEP 0.3.
        let mut m = Monitor::default();
        m.add("command", 300, 1000);
        let g = m.graph(b"command", 1000).unwrap_or_default();
        let want = format!(
            "command - high 300 ms, low 300 ms (all time high 300 ms)\n{}\n \n \n \n_\n \n0\ns\n",
            "-".repeat(80)
        );
        assert_eq!(g, want);
    }
}
