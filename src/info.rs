//! INFO: renders the report sections (server, clients, memory, persistence, stats, replication,
//! cpu, modules, commandstats, errorstats, latencystats, cluster, keyspace) with the field names
//! and order Redis 7.0.15 prints, from executor state, jemalloc, /proc and getrusage.
//!
//! Owns only formatting and the OS probes; the counters themselves live in `stats` and `State`.
//! Fields for subsystems ferrodis does not have (replication links, defrag, AOF, the function
//! engine's VM) print the values an idle Redis prints, so tools that parse INFO keep working.

use std::fmt::Write;

use crate::executor::clients::Client;
use crate::executor::clients::{client_memory, CALLER_QUERY_BUFFER, REPLY_MIN_BYTES};
use crate::executor::registry::{self, CommandSpec};
use crate::executor::State;
use crate::stats::{self, AllocatorStats};

/// Every section, in the order Redis prints them.
const ORDER: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// The sections an INFO argument list asks for: none means `default`; `all` adds commandstats and
/// latencystats; `everything` would add module-generated sections too (there are none). Unknown
/// names are ignored, as Redis ignores them.
pub fn select_sections(args: &[&[u8]]) -> Vec<&'static str> {
    let mut wanted = [false; ORDER.len()];
    let mut mark = |name: &str| {
        if let Some(i) = ORDER.iter().position(|s| *s == name) {
            wanted[i] = true;
        }
    };
    if args.is_empty() {
        DEFAULT.iter().for_each(|s| mark(s));
    }
    for a in args {
        let name = String::from_utf8_lossy(a).to_ascii_lowercase();
        match name.as_str() {
            "default" => DEFAULT.iter().for_each(|s| mark(s)),
            "all" | "everything" => ORDER.iter().for_each(|s| mark(s)),
            other => mark(other),
        }
    }
    ORDER.iter().zip(wanted).filter(|(_, w)| *w).map(|(s, _)| *s).collect()
}

/// The INFO text for `sections` (from `select_sections`), `\r\n`-terminated lines, sections
/// separated by an empty line.
pub fn render(st: &mut State, now_ms: i64, sections: &[&str]) -> String {
    // Grown as it is written, as Redis's info string is: used_memory, sampled on the way,
    // counts only what was written before it (a 4 KiB head start would show as 4 KiB over
    // maxmemory to anyone watching the limit).
    let mut out = String::new();
    for (i, name) in sections.iter().enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        let mut s = Section(&mut out);
        match *name {
            "server" => server(&mut s, st, now_ms),
            "clients" => clients(&mut s, st),
            "memory" => memory(&mut s, st),
            "persistence" => persistence(&mut s, st, now_ms),
            "stats" => stats_section(&mut s, st),
            "replication" => replication(&mut s, st),
            "cpu" => cpu(&mut s),
            "modules" => s.title("Modules"),
            "commandstats" => commandstats(&mut s, st),
            "errorstats" => errorstats(&mut s, st),
            "latencystats" => latencystats(&mut s, st),
            "cluster" => {
                s.title("Cluster");
                s.field("cluster_enabled", u8::from(st.cluster.is_some()));
            }
            "keyspace" => keyspace(&mut s, st, now_ms),
            _ => {}
        }
    }
    out
}

struct Section<'a>(&'a mut String);

impl Section<'_> {
    fn title(&mut self, t: &str) {
        let _ = write!(self.0, "# {t}\r\n");
    }

    fn field(&mut self, name: &str, value: impl std::fmt::Display) {
        let _ = write!(self.0, "{name}:{value}\r\n");
    }
}

/// Redis's bytesToHuman: `512B`, `1.50K`, `2.00M`, ...
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: &[(u64, &str)] = &[(1 << 50, "P"), (1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    if n >= 1024 << 50 {
        return format!("{n}B");
    }
    for &(unit, suffix) in UNITS {
        if n >= unit {
            return format!("{:.2}{suffix}", n as f64 / unit as f64);
        }
    }
    format!("{n}B")
}

/// `uname -s -r -m`, as Redis prints it in `os:`.
pub fn os_name() -> String {
    // SAFETY: uname fills a zeroed utsname whose fields are NUL-terminated C strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "Linux".into();
        }
        let field = |f: &[libc::c_char]| std::ffi::CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned();
        format!("{} {} {}", field(&u.sysname), field(&u.release), field(&u.machine))
    }
}

/// `(seconds, microseconds)` of user and system CPU for `who` (RUSAGE_SELF, _CHILDREN, _THREAD).
fn rusage(who: libc::c_int) -> (libc::timeval, libc::timeval) {
    // SAFETY: getrusage writes a plain struct we own.
    unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut r);
        (r.ru_stime, r.ru_utime)
    }
}

fn tv(t: libc::timeval) -> String {
    format!("{}.{:06}", t.tv_sec, t.tv_usec)
}

/// Resident set size from /proc/self/statm (pages × page size).
pub fn rss_bytes() -> u64 {
    let page = page_size();
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * page)
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

fn total_system_memory() -> u64 {
    // SAFETY: as above.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    if pages > 0 {
        pages as u64 * page_size()
    } else {
        0
    }
}

/// A stable build id (Redis prints a hash of its build environment).
fn build_id() -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in concat!("ferrodis-", env!("CARGO_PKG_VERSION")).bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    format!("{:x}", h >> 4)
}

fn server(s: &mut Section, st: &State, now_ms: i64) {
    let uptime = st.start_time.elapsed().as_secs();
    let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
    let config_file = st
        .config
        .config_file
        .as_ref()
        .map(|f| {
            let p = std::path::Path::new(f);
            std::fs::canonicalize(p).map(|p| p.display().to_string()).unwrap_or_else(|_| f.clone())
        })
        .unwrap_or_default();
    s.title("Server");
    s.field("redis_version", crate::REDIS_VERSION);
    s.field("ferrodis_version", crate::FERRODIS_VERSION);
    s.field("redis_git_sha1", "00000000");
    s.field("redis_git_dirty", 0);
    s.field("redis_build_id", build_id());
    s.field("redis_mode", if st.cluster.is_some() { "cluster" } else { "standalone" });
    s.field("os", os_name());
    s.field("arch_bits", usize::BITS);
    s.field("monotonic_clock", "POSIX clock_gettime");
    s.field("multiplexing_api", "epoll");
    s.field("atomicvar_api", "c11-builtin");
    s.field("gcc_version", "0.0.0");
    s.field("process_id", std::process::id());
    s.field("process_supervised", "no");
    s.field("run_id", &st.run_id);
    s.field("tcp_port", st.config.port);
    s.field("server_time_usec", crate::util::clock::unix_us());
    s.field("uptime_in_seconds", uptime);
    s.field("uptime_in_days", uptime / 86400);
    s.field("hz", st.hz);
    s.field("configured_hz", st.config.hz);
    s.field("lru_clock", crate::db::lru_clock(now_ms));
    s.field("executable", exe);
    s.field("config_file", config_file);
    s.field("io_threads_active", 0);
    if let Some(ms) = crate::executor::shutdown::remaining_ms(st, now_ms) {
        s.field("shutdown_in_milliseconds", ms);
    }
}

/// Clients counted as connected: the caller plus the others not already being closed, less
/// the replicas (Redis counts its clients less its replicas).
pub fn connected_clients(st: &State) -> usize {
    1 + st.clients.values().filter(|c| !c.handle.close_requested() && !c.handle.is_replica()).count()
}

fn clients(s: &mut Section, st: &State) {
    s.title("Clients");
    s.field("connected_clients", connected_clients(st));
    // Redis's count: two links (one each way) to every other node it knows.
    s.field("cluster_connections", st.cluster.as_ref().map_or(0, |c| c.nodes.len().saturating_sub(1) * 2));
    s.field("maxclients", st.config.maxclients);
    // What the client cron saw over the last seconds (so not the caller's own command, which
    // the cron cannot have seen yet, as in Redis).
    s.field("client_recent_max_input_buffer", st.client_peaks.max_input());
    s.field("client_recent_max_output_buffer", st.client_peaks.max_output());
    // Clients held by CLIENT PAUSE count as blocked, as in Redis.
    s.field("blocked_clients", st.blocked_clients + st.postponed.len());
    s.field("tracking_clients", st.tracking.clients);
    // Blocked clients with a timeout (BLPOP, WAIT...): Redis's clients_timeout_table.
    s.field("clients_in_timeout_table", st.blocked_deadlines.len());
}

/// Bytes the key tables themselves spend (entries and bucket arrays), the part of
/// used_memory_overhead that grows with the dataset.
fn db_overhead(st: &State) -> u64 {
    let table = |n: usize| if n == 0 { 0 } else { n as u64 * 24 + n.next_power_of_two() as u64 * 8 };
    st.dbs.iter().map(|d| table(d.len()) + table(d.expires_len())).sum()
}

/// The memory figures INFO memory and MEMORY STATS share.
pub struct MemoryFigures {
    pub alloc: AllocatorStats,
    pub used: u64,
    pub peak: u64,
    pub startup: u64,
    pub rss: u64,
    pub clients_normal: u64,
    /// The replicas' clients (mem_clients_slaves), apart from the others as in Redis.
    pub clients_slaves: u64,
    pub overhead: u64,
    pub dataset: u64,
    pub db_overhead: u64,
}

pub fn memory_figures(st: &mut State) -> MemoryFigures {
    let (alloc, used) = st.sample_memory();
    let replica = |c: &Client| c.handle.is_replica() && !c.master;
    let clients_normal: u64 = st.clients.values().filter(|c| !replica(c.as_ref())).map(|c| c.memory()).sum::<u64>()
        + client_memory(CALLER_QUERY_BUFFER, REPLY_MIN_BYTES);
    // As Redis 7.0 counts them: what the shared replication buffer holds beyond the backlog's
    // size, with the stream a replica's connection holds outside the shared chunks (in Redis
    // that sits in the shared buffer too), and not the replica clients' own structures and
    // query buffers (an idle replica shows 0). A replica being closed is no replica any more.
    let clients_slaves: u64 = crate::executor::replication::buffers_beyond_backlog(st)
        + st.clients
            .values()
            .filter(|c| replica(c.as_ref()) && !c.handle.close_requested())
            .map(|c| c.handle.pending_output().saturating_sub(c.handle.shared_output()) as u64)
            .sum::<u64>();
    let db_overhead = db_overhead(st);
    let startup = st.stats.mem_startup.min(used);
    let overhead = (startup + clients_normal + clients_slaves + db_overhead).min(used);
    MemoryFigures {
        alloc,
        used,
        peak: st.stats.mem_peak.max(used),
        startup,
        rss: rss_bytes(),
        clients_normal,
        clients_slaves,
        overhead,
        dataset: used - overhead,
        db_overhead,
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn memory(s: &mut Section, st: &mut State) {
    let m = memory_figures(st);
    let a = m.alloc;
    let net = m.used.saturating_sub(m.startup);
    let total_mem = total_system_memory();
    s.title("Memory");
    s.field("used_memory", m.used);
    s.field("used_memory_human", bytes_to_human(m.used));
    s.field("used_memory_rss", m.rss);
    s.field("used_memory_rss_human", bytes_to_human(m.rss));
    s.field("used_memory_peak", m.peak);
    s.field("used_memory_peak_human", bytes_to_human(m.peak));
    s.field("used_memory_peak_perc", format!("{:.2}%", ratio(m.used, m.peak) * 100.0));
    s.field("used_memory_overhead", m.overhead);
    s.field("used_memory_startup", m.startup);
    s.field("used_memory_dataset", m.dataset);
    s.field("used_memory_dataset_perc", format!("{:.2}%", ratio(m.dataset, net) * 100.0));
    s.field("allocator_allocated", a.allocated);
    s.field("allocator_active", a.active);
    s.field("allocator_resident", a.resident);
    s.field("total_system_memory", total_mem);
    s.field("total_system_memory_human", bytes_to_human(total_mem));
    // The EVAL engine's VM and script cache; the function engine (no VM yet) as an idle Redis
    // reports its empty one.
    let vm_eval = st.scripting.vm_memory() as u64;
    let scripts_eval = st.scripting.cache_memory() as u64;
    const VM_FUNCTIONS: u64 = 33792;
    const FUNCTIONS_MEMORY: u64 = 200;
    s.field("used_memory_lua", vm_eval);
    s.field("used_memory_vm_eval", vm_eval);
    s.field("used_memory_lua_human", bytes_to_human(vm_eval));
    s.field("used_memory_scripts_eval", scripts_eval);
    s.field("number_of_cached_scripts", st.scripting.len());
    s.field("number_of_functions", st.scripting.registry().function_count());
    s.field("number_of_libraries", st.scripting.registry().libraries.len());
    s.field("used_memory_vm_functions", VM_FUNCTIONS);
    s.field("used_memory_vm_total", vm_eval + VM_FUNCTIONS);
    s.field("used_memory_vm_total_human", bytes_to_human(vm_eval + VM_FUNCTIONS));
    s.field("used_memory_functions", FUNCTIONS_MEMORY);
    s.field("used_memory_scripts", scripts_eval + FUNCTIONS_MEMORY);
    s.field("used_memory_scripts_human", bytes_to_human(scripts_eval + FUNCTIONS_MEMORY));
    s.field("maxmemory", st.config.maxmemory);
    s.field("maxmemory_human", bytes_to_human(st.config.maxmemory));
    s.field("maxmemory_policy", &st.config.maxmemory_policy);
    s.field("allocator_frag_ratio", format!("{:.2}", ratio(a.active, a.allocated)));
    s.field("allocator_frag_bytes", a.active as i64 - a.allocated as i64);
    s.field("allocator_rss_ratio", format!("{:.2}", ratio(a.resident, a.active)));
    s.field("allocator_rss_bytes", a.resident as i64 - a.active as i64);
    s.field("rss_overhead_ratio", format!("{:.2}", ratio(m.rss, a.resident)));
    s.field("rss_overhead_bytes", m.rss as i64 - a.resident as i64);
    s.field("mem_fragmentation_ratio", format!("{:.2}", ratio(m.rss, m.used)));
    s.field("mem_fragmentation_bytes", m.rss as i64 - m.used as i64);
    s.field("mem_not_counted_for_evict", st.not_counted_for_evict());
    let beyond = crate::executor::replication::buffers_beyond_backlog(st);
    let backlog_mem = st.repl.backlog.as_ref().map_or(0, |b| b.memory()) - beyond;
    s.field("mem_replication_backlog", backlog_mem);
    s.field("mem_total_replication_buffers", crate::executor::replication::buffers_memory(st));
    s.field("mem_clients_slaves", m.clients_slaves);
    s.field("mem_clients_normal", m.clients_normal);
    s.field("mem_cluster_links", 0);
    s.field("mem_aof_buffer", st.aof.buffer_len());
    s.field("mem_allocator", "jemalloc-5.3.0");
    s.field("active_defrag_running", 0);
    s.field("lazyfree_pending_objects", crate::db::lazyfree::pending_objects());
    s.field("lazyfreed_objects", crate::db::lazyfree::freed_objects());
}

fn persistence(s: &mut Section, st: &State, now_ms: i64) {
    let p = &st.stats.persistence;
    let current_bgsave = if p.bgsave_in_progress { now_ms / 1000 - p.bgsave_started_unix } else { -1 };
    s.title("Persistence");
    let sync_loading = st.repl.sync_loading;
    s.field("loading", (p.loading || sync_loading == Some(false)) as u8);
    s.field("async_loading", (sync_loading == Some(true)) as u8);
    // What the running child last reported (zeros when none runs).
    let c = &st.snapshot.progress;
    s.field("current_cow_peak", c.cow_peak);
    s.field("current_cow_size", c.cow);
    s.field("current_cow_size_age", c.cow_at.map_or(0, |t| t.elapsed().as_secs()));
    s.field("current_fork_perc", format!("{:.2}", c.percent()));
    s.field("current_save_keys_processed", c.keys_processed);
    s.field("current_save_keys_total", c.keys_total);
    s.field("rdb_changes_since_last_save", st.dirty);
    // A full sync's child counts too (it is the server's RDB child, as in Redis).
    s.field("rdb_bgsave_in_progress", p.bgsave_in_progress as u8);
    s.field("rdb_last_save_time", st.lastsave_unix);
    s.field("rdb_last_bgsave_status", if p.last_bgsave_ok { "ok" } else { "err" });
    s.field("rdb_last_bgsave_time_sec", p.last_bgsave_time_sec);
    s.field("rdb_current_bgsave_time_sec", current_bgsave);
    s.field("rdb_saves", p.rdb_saves);
    s.field("rdb_last_cow_size", st.snapshot.last_cow_size);
    s.field("rdb_last_load_keys_expired", p.last_load_keys_expired);
    s.field("rdb_last_load_keys_loaded", p.last_load_keys_loaded);
    let aof = &st.aof;
    let aof_on = aof.enabled();
    s.field("aof_enabled", aof_on as u8);
    s.field("aof_rewrite_in_progress", aof.rewrite_started.is_some() as u8);
    s.field("aof_rewrite_scheduled", aof.rewrite_scheduled as u8);
    s.field("aof_last_rewrite_time_sec", aof.last_rewrite_time_sec);
    s.field("aof_current_rewrite_time_sec", aof.rewrite_started.map_or(-1, |t| t.elapsed().as_secs() as i64));
    s.field("aof_last_bgrewrite_status", if aof.last_rewrite_ok { "ok" } else { "err" });
    s.field("aof_rewrites", aof.rewrites);
    s.field("aof_rewrites_consecutive_failures", aof.consecutive_failures);
    s.field("aof_last_write_status", if aof.write_error.is_none() { "ok" } else { "err" });
    s.field("aof_last_cow_size", aof.last_cow_size);
    s.field("module_fork_in_progress", 0);
    s.field("module_fork_last_cow_size", 0);
    if aof_on {
        s.field("aof_current_size", aof.current_size);
        s.field("aof_base_size", aof.base_size);
        s.field("aof_pending_rewrite", 0);
        s.field("aof_buffer_length", aof.buffer_len());
        s.field("aof_pending_bio_fsync", 0);
        s.field("aof_delayed_fsync", 0);
    }
    if let Some(job) = &st.loading {
        let pr = &job.progress;
        let loaded = pr.loaded_bytes.load(std::sync::atomic::Ordering::Relaxed);
        let elapsed = (now_ms / 1000 - pr.start_unix_s).max(0) as u64;
        let perc = if pr.total_bytes > 0 { loaded as f64 * 100.0 / pr.total_bytes as f64 } else { 0.0 };
        let eta = if elapsed == 0 || loaded == 0 { 1 } else { (elapsed * pr.total_bytes) / loaded - elapsed };
        s.field("loading_start_time", pr.start_unix_s);
        s.field("loading_total_bytes", pr.total_bytes);
        s.field("loading_rdb_used_mem", pr.rdb_used_mem.load(std::sync::atomic::Ordering::Relaxed));
        s.field("loading_loaded_bytes", loaded);
        s.field("loading_loaded_perc", format!("{perc:.2}"));
        s.field("loading_eta_seconds", eta);
    }
}

fn stats_section(s: &mut Section, st: &State) {
    let x = &st.stats;
    let expired: u64 = st.dbs.iter().map(|d| d.counters.expired_keys).sum();
    let kbps = |v: u64| format!("{:.2}", v as f64 / 1024.0);
    s.title("Stats");
    s.field("total_connections_received", stats::load(&stats::TOTAL_CONNECTIONS));
    s.field("total_commands_processed", x.total_commands_processed);
    s.field("instantaneous_ops_per_sec", x.ops.value());
    // Redis 7.0's totals include the replication traffic it also shows on its own.
    let (repl_in, repl_out) = (stats::load(&stats::NET_REPL_INPUT_BYTES), stats::load(&stats::NET_REPL_OUTPUT_BYTES));
    s.field("total_net_input_bytes", stats::load(&stats::NET_INPUT_BYTES) + repl_in);
    s.field("total_net_output_bytes", stats::load(&stats::NET_OUTPUT_BYTES) + repl_out);
    s.field("total_net_repl_input_bytes", repl_in);
    s.field("total_net_repl_output_bytes", repl_out);
    s.field("instantaneous_input_kbps", kbps(x.net_input.value()));
    s.field("instantaneous_output_kbps", kbps(x.net_output.value()));
    s.field("instantaneous_input_repl_kbps", kbps(x.net_repl_input.value()));
    s.field("instantaneous_output_repl_kbps", kbps(x.net_repl_output.value()));
    s.field("rejected_connections", stats::load(&stats::REJECTED_CONNECTIONS));
    s.field("sync_full", st.repl.sync_full);
    s.field("sync_partial_ok", st.repl.sync_partial_ok);
    s.field("sync_partial_err", st.repl.sync_partial_err);
    s.field("expired_keys", expired.max(x.expired_keys));
    s.field("expired_stale_perc", format!("{:.2}", x.expired_stale_perc * 100.0));
    s.field("expired_time_cap_reached_count", x.expired_time_cap_reached);
    s.field("expire_cycle_cpu_milliseconds", x.expire_cycle_us / 1000);
    s.field("evicted_keys", x.evicted_keys);
    s.field("evicted_clients", st.stats.evicted_clients);
    let now_ms = crate::util::clock::unix_ms();
    let current_exceeded = x.eviction_exceeded_since.map_or(0, |since| (now_ms - since).max(0) as u64);
    s.field("total_eviction_exceeded_time", x.eviction_exceeded_ms + current_exceeded);
    s.field("current_eviction_exceeded_time", current_exceeded);
    s.field("keyspace_hits", x.keyspace_hits);
    s.field("keyspace_misses", x.keyspace_misses);
    s.field("pubsub_channels", st.pubsub.channel_count());
    s.field("pubsub_patterns", st.pubsub.pattern_count());
    s.field("pubsubshard_channels", st.pubsub.channel_names(crate::pubsub::Kind::Shard).count());
    s.field("latest_fork_usec", x.persistence.latest_fork_usec);
    s.field("total_forks", x.persistence.total_forks);
    s.field("migrate_cached_sockets", st.migrate.len());
    s.field("slave_expires_tracked_keys", crate::executor::replication::local_expire_count(st));
    s.field("active_defrag_hits", 0);
    s.field("active_defrag_misses", 0);
    s.field("active_defrag_key_hits", 0);
    s.field("active_defrag_key_misses", 0);
    s.field("total_active_defrag_time", 0);
    s.field("current_active_defrag_time", 0);
    let (tracked_keys, tracked_items, tracked_prefixes) = st.tracking.totals();
    s.field("tracking_total_keys", tracked_keys);
    s.field("tracking_total_items", tracked_items);
    s.field("tracking_total_prefixes", tracked_prefixes);
    s.field("unexpected_error_replies", x.unexpected_error_replies);
    s.field("total_error_replies", x.total_error_replies);
    s.field("dump_payload_sanitizations", stats::load(&stats::DUMP_PAYLOAD_SANITIZATIONS));
    s.field("total_reads_processed", stats::load(&stats::TOTAL_READS));
    s.field("total_writes_processed", stats::load(&stats::TOTAL_WRITES));
    s.field("io_threaded_reads_processed", 0);
    s.field("io_threaded_writes_processed", 0);
    s.field("reply_buffer_shrinks", st.stats.reply_buffer_shrinks);
    s.field("reply_buffer_expands", st.stats.reply_buffer_expands);
}

fn replication(s: &mut Section, st: &State) {
    use crate::executor::replication::{self, LinkState};
    let now = crate::util::clock::unix_ms();
    let r = &st.repl;
    s.title("Replication");
    match &r.master {
        None => s.field("role", "master"),
        Some(m) => {
            s.field("role", "slave");
            s.field("master_host", &m.host);
            s.field("master_port", m.port);
            let up = m.state == LinkState::Connected;
            s.field("master_link_status", if up { "up" } else { "down" });
            let syncing = m.state == LinkState::Transfer;
            let link = &r.link;
            let last_io = link.last_io_ms.load(std::sync::atomic::Ordering::Relaxed);
            s.field("master_last_io_seconds_ago", if up { (now - last_io) / 1000 } else { -1 });
            s.field("master_sync_in_progress", syncing as u8);
            s.field("slave_read_repl_offset", r.offset + crate::executor::replication::unapplied(st));
            s.field("slave_repl_offset", r.offset);
            if syncing {
                let total = link.transfer_size.load(std::sync::atomic::Ordering::Relaxed);
                let read = link.transfer_read.load(std::sync::atomic::Ordering::Relaxed);
                let left = if total >= 0 { total - read } else { -1 };
                let perc = if total > 0 { read as f64 * 100.0 / total as f64 } else { 0.0 };
                s.field("master_sync_total_bytes", total);
                s.field("master_sync_read_bytes", read);
                s.field("master_sync_left_bytes", left);
                s.field("master_sync_perc", format!("{perc:.2}"));
                s.field("master_sync_last_io_seconds_ago", (now - last_io) / 1000);
            }
            if !up {
                let since = if m.down_since_ms > 0 { (now - m.down_since_ms) / 1000 } else { -1 };
                s.field("master_link_down_since_seconds", since);
            }
            let other = |name: &str, default: &str| st.config.other.get(name).cloned().unwrap_or(default.into());
            s.field("slave_priority", other("replica-priority", "100"));
            s.field("slave_read_only", st.config.replica_read_only() as u8);
            s.field("replica_announced", (other("replica-announced", "yes") == "yes") as u8);
        }
    }
    s.field("connected_slaves", replication::replica_count(st));
    if st.config.min_replicas_to_write > 0 && st.config.min_replicas_max_lag > 0 {
        s.field("min_slaves_good_slaves", replication::good_replicas(st, now));
    }
    for (name, line) in replication::info_replicas(st, now) {
        s.field(&name, line);
    }
    s.field("master_failover_state", r.failover.state.name());
    s.field("master_replid", &r.replid);
    s.field("master_replid2", &r.replid2);
    s.field("master_repl_offset", r.offset);
    s.field("second_repl_offset", r.second_offset);
    match &r.backlog {
        Some(b) => {
            s.field("repl_backlog_active", 1);
            s.field("repl_backlog_size", b.size());
            s.field("repl_backlog_first_byte_offset", b.first_offset);
            s.field("repl_backlog_histlen", b.histlen());
        }
        None => {
            let size = st.config.other.get("repl-backlog-size").cloned().unwrap_or("1048576".into());
            s.field("repl_backlog_active", 0);
            s.field("repl_backlog_size", size);
            s.field("repl_backlog_first_byte_offset", 0);
            s.field("repl_backlog_histlen", 0);
        }
    }
}

fn cpu(s: &mut Section) {
    let (sys, user) = rusage(libc::RUSAGE_SELF);
    let (csys, cuser) = rusage(libc::RUSAGE_CHILDREN);
    // INFO runs on the executor thread, which is Redis's "main thread".
    let (tsys, tuser) = rusage(libc::RUSAGE_THREAD);
    s.title("CPU");
    s.field("used_cpu_sys", tv(sys));
    s.field("used_cpu_user", tv(user));
    s.field("used_cpu_sys_children", tv(csys));
    s.field("used_cpu_user_children", tv(cuser));
    s.field("used_cpu_sys_main_thread", tv(tsys));
    s.field("used_cpu_user_main_thread", tv(tuser));
}

/// Every command and subcommand with its stats name (`get`, `config|get`), in table order.
fn stat_names() -> impl Iterator<Item = &'static str> {
    registry::all().flat_map(|top: &'static CommandSpec| {
        std::iter::once(top.name)
            .chain(top.subcommands.iter().map(move |sub| crate::executor::call::full_name(top, sub)))
    })
}

fn commandstats(s: &mut Section, st: &State) {
    s.title("Commandstats");
    for name in stat_names() {
        let Some(c) = st.stats.commands.get(&crate::stats::StatName(name)) else { continue };
        if c.calls == 0 && c.failed_calls == 0 && c.rejected_calls == 0 {
            continue;
        }
        let per_call = if c.calls == 0 { 0.0 } else { c.usec as f64 / c.calls as f64 };
        s.field(
            &format!("cmdstat_{name}"),
            format_args!(
                "calls={},usec={},usec_per_call={:.2},rejected_calls={},failed_calls={}",
                c.calls, c.usec, per_call, c.rejected_calls, c.failed_calls
            ),
        );
    }
}

fn errorstats(s: &mut Section, st: &State) {
    s.title("Errorstats");
    let mut errors: Vec<(&String, &u64)> = st.stats.errors.iter().collect();
    errors.sort();
    for (code, n) in errors {
        s.field(&format!("errorstat_{code}"), format_args!("count={n}"));
    }
}

fn latencystats(s: &mut Section, st: &State) {
    s.title("Latencystats");
    // latency-tracking no: the section is empty, whatever the histograms hold (Redis 7.0).
    if !st.config.latency_tracking {
        return;
    }
    // latency-tracking-info-percentiles keeps each value in the form Redis prints (%f, trailing
    // zeros trimmed), which is also the label's.
    let configured = crate::config::lookup("latency-tracking-info-percentiles").map(|d| st.config.get(d));
    let percentiles: Vec<(f64, &str)> = configured
        .as_deref()
        .unwrap_or_default()
        .split(' ')
        .filter_map(|p| Some((crate::util::num::parse_f64(p.as_bytes())?, p)))
        .collect();
    for name in stat_names() {
        let Some(c) = st.stats.commands.get(&crate::stats::StatName(name)) else { continue };
        if c.latency.total() == 0 {
            continue;
        }
        let parts: Vec<String> = percentiles
            .iter()
            .map(|&(p, label)| format!("p{label}={:.3}", c.latency.value_at_percentile(p) as f64 / 1000.0))
            .collect();
        s.field(&format!("latency_percentiles_usec_{name}"), parts.join(","));
    }
}

/// Keys examined per database to estimate avg_ttl (Redis keeps a running estimate instead).
const TTL_SAMPLE: usize = 1000;

fn keyspace(s: &mut Section, st: &mut State, now_ms: i64) {
    s.title("Keyspace");
    for (i, db) in st.dbs.iter_mut().enumerate() {
        if db.is_empty() {
            continue;
        }
        let mut avg_ttl = 0;
        if db.expires_len() > 0 {
            let sample: Vec<Vec<u8>> = db.keys(now_ms).take(TTL_SAMPLE).map(|(k, _)| k.to_vec()).collect();
            let (mut sum, mut n) = (0i64, 0i64);
            for k in &sample {
                if let Some(at) = db.expire_at(k, now_ms) {
                    sum += (at - now_ms).max(0);
                    n += 1;
                }
            }
            if n > 0 {
                avg_ttl = sum / n;
            }
        }
        s.field(&format!("db{i}"), format_args!("keys={},expires={},avg_ttl={avg_ttl}", db.len(), db.expires_len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes() {
        assert_eq!(bytes_to_human(200), "200B");
        assert_eq!(bytes_to_human(32768), "32.00K");
        assert_eq!(bytes_to_human(916376), "894.90K");
        assert_eq!(bytes_to_human(7233536), "6.90M");
        assert_eq!(bytes_to_human(25276502016), "23.54G");
    }

    #[test]
    fn keyspace_and_layout() {
        use crate::types::{RStr, Value};
        let mut st = State::new(crate::config::Config::default());
        let now = 1_000_000;
        st.dbs[0].set(b"a", Value::Str(RStr::from_bytes(b"1")), now);
        st.dbs[0].set(b"b", Value::Str(RStr::from_bytes(b"2")), now);
        st.dbs[0].set_expire(b"a", now + 5000);
        st.dbs[2].set(b"c", Value::Str(RStr::from_bytes(b"3")), now);
        let text = render(&mut st, now, &select_sections(&[b"keyspace", b"cluster"]));
        assert_eq!(
            text,
            "# Cluster\r\ncluster_enabled:0\r\n\r\n# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=5000\r\n\
             db2:keys=1,expires=0,avg_ttl=0\r\n"
        );
        let all = render(&mut st, now, &select_sections(&[b"everything"]));
        assert!(all.starts_with("# Server\r\nredis_version:7.0.15\r\nferrodis_version:"));
        assert!(all.contains("\r\n\r\n# Modules\r\n\r\n# Commandstats\r\n"));
        assert!(all.contains("connected_clients:1\r\n"));
    }

    #[test]
    fn section_selection() {
        assert_eq!(select_sections(&[b"cpu", b"server"]), vec!["server", "cpu"]);
        assert_eq!(select_sections(&[b"foo"]), Vec::<&str>::new());
        assert_eq!(select_sections(&[]), DEFAULT.to_vec());
        assert_eq!(select_sections(&[b"default", b"foo"]), DEFAULT.to_vec());
        assert_eq!(select_sections(&[b"ALL"]).len(), ORDER.len());
        assert_eq!(select_sections(&[b"CPU", b"cpu"]), vec!["cpu"]);
    }
}
