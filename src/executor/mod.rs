//! The keyspace executor: the one owner of every database, the clients' server-side state, stats
//! and the slowlog. Connections hand it batches of parsed commands; it runs each through `call()`
//! and answers the batch with one buffer of encoded replies. `cron()` runs `hz` times a second:
//! active expiry, idle-client timeouts, instantaneous metrics.
//!
//! Two ways to drive it (io-threads): on the connections' own thread behind a mutex that is never
//! contended (`Executor::handle` called inline), or on a dedicated thread fed through a channel
//! (`spawn_thread`). The executor itself is the same in both.

pub mod access;
pub mod aof;
pub mod blocking;
pub mod call;
pub mod clients;
pub mod cluster;
pub mod ctx;
pub mod evict;
pub mod expire_cycle;
pub mod handoff;
pub mod migrate_cache;
pub mod multi;
pub mod nodes_conf;
pub mod propagate;
pub mod pubsub;
pub mod registry;
pub mod repl_block;
pub mod replication;
pub mod scripting;
pub mod shutdown;
pub mod snapshot;
pub mod sort_walk;
pub mod tracking;
pub mod walks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::config::Config;
use crate::db::Db;
use crate::slowlog::Slowlog;
use crate::stats::Stats;
use crate::util::clock::{random_hex, unix_ms};
use clients::{Client, ClientHandle, ClientTable, ConnInfo};
use registry::CommandSpec;

/// One parsed command as the connection hands it over: the table lookup is done there.
#[derive(Debug)]
pub struct Cmd {
    pub spec: Option<&'static CommandSpec>,
    pub argv: Vec<Bytes>,
}

/// What the server should do once the current batch is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownRequest {
    Save,
    NoSave,
}

/// Redis's static reply buffer (PROTO_REPLY_CHUNK_BYTES): replies past it are the client's
/// output list, which maxmemory-clients counts.
const REPLY_BUFFER_BYTES: usize = 16 * 1024;

/// `State::pause_held` bit: FAILOVER waits for its target with writes paused.
pub const PAUSE_FAILOVER: u8 = 1;
/// `State::pause_held` bit: a shutdown waits for lagging replicas with writes paused.
pub const PAUSE_SHUTDOWN: u8 = 2;
/// `State::pause_held` bit: a master holds writes while its replica takes over (CLUSTER FAILOVER).
pub const PAUSE_CLUSTER_MF: u8 = 4;

/// What is left of one cron tick's budgeted work (see `Executor::cron_slice`).
pub struct CronWork {
    /// Active rehashing: the next database and the time left.
    rehash_db: usize,
    rehash_left: Duration,
}

/// Everything handlers may read or change through `Ctx`, apart from the calling client.
pub struct State {
    pub dbs: Vec<Db>,
    pub config: Config,
    pub stats: Stats,
    pub slowlog: Slowlog,
    /// LATENCY LATEST/HISTORY events (see crate::latency).
    pub latency: crate::latency::Monitor,
    /// Every connected client except the one whose batch is running, taken out and put back
    /// around each batch (hence a hash map: a B-tree's rebalancing cost a few percent of a
    /// request's CPU). Iteration order is arbitrary; CLIENT LIST sorts by id.
    pub clients: ClientTable,
    pub next_client_id: u64,
    /// Changes since the last save.
    pub dirty: u64,
    pub start_time: Instant,
    pub start_unix_ms: i64,
    pub run_id: String,
    pub lastsave_unix: i64,
    pub shutdown: Option<ShutdownRequest>,
    /// Whether the active expiry cycle runs (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire_enabled: bool,
    /// A shutdown waiting for lagging replicas, and the SHUTDOWN callers blocked meanwhile.
    pub shutdown_state: shutdown::Shutdown,
    /// DEBUG PAUSE-CRON: periodic work is skipped while set.
    pub cron_paused: bool,
    /// The cron tick's rehashing still to do.
    pub cron_work: Option<CronWork>,
    /// Active expiry's cycles (see `expire_cycle`).
    pub expire_cycle: expire_cycle::ExpireCycle,
    /// DEBUG REPLYBUFFER: how the client cron resizes reply buffers.
    pub reply_buffer: clients::ReplyBufferPolicy,
    /// The biggest client buffers the client cron saw lately (INFO's client_recent_max_*).
    pub client_peaks: clients::RecentPeaks,
    /// The client cron's rotation over the clients (Redis's client list order).
    pub cron_rotation: clients::CronRotation,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call commands flagged noscript.
    pub scripts_may_call_noscript: bool,
    pub cron_loops: u64,
    /// The cron's frequency now (INFO hz): `hz`, raised by dynamic-hz with many clients.
    pub hz: u32,
    /// Blocked clients by (db, key), in arrival order.
    pub waiters: std::collections::HashMap<(usize, Vec<u8>), std::collections::VecDeque<u64>>,
    /// Keys signalled ready since the executor last served waiters.
    pub ready_keys: Vec<(usize, Vec<u8>)>,
    /// Deadlines of blocked clients: (unix ms, client id).
    pub blocked_deadlines: std::collections::BTreeSet<(i64, u64)>,
    pub blocked_clients: usize,
    /// WATCHed keys: (db, key) → ids of the clients watching it.
    pub watched: std::collections::HashMap<(usize, Vec<u8>), Vec<u64>>,
    /// Woken when a blocked client's deadline is earlier than the timer's next wake-up.
    pub timer: Arc<tokio::sync::Notify>,
    /// Replication: IDs and offset, backlog, replicas, the master link (see `replication`).
    pub repl: replication::ReplState,
    /// CLIENT PAUSE: until when (unix ms) and whether all commands or only writes wait.
    pub pause_end_ms: i64,
    pub pause_all: bool,
    /// Pauses of writes held until lifted, not timed (`PAUSE_FAILOVER`, `PAUSE_SHUTDOWN`): Redis
    /// keeps one pause per purpose, and CLIENT UNPAUSE lifts only its own.
    pub pause_held: u8,
    /// Pub/sub subscriptions and MONITOR clients (pub/sub hook).
    pub pubsub: crate::pubsub::PubSub,
    /// Function libraries restored from RDB (no engine runs them yet).
    pub functions: crate::functions::Libraries,
    /// The Lua engine and script cache (EVAL, SCRIPT).
    pub scripting: crate::executor::scripting::Engine,
    /// Users, their permissions and the ACL LOG.
    pub acl: crate::acl::Acl,
    /// The function an FCALL is running, for FUNCTION STATS during a busy function.
    pub running_function: Option<crate::executor::scripting::host::RunningFunction>,
    /// Whether memory was over maxmemory with nothing left to evict when the running command
    /// started (Redis's pre_command_oom_state): a script may not begin to write then.
    pub pre_command_oom: bool,
    /// Connections run on the executor's own thread (io-threads 1): while a script is busy, only
    /// then can it answer them itself (`scripting::busy`); with I/O threads they run beside it.
    pub connections_inline: bool,
    /// Client-side caching: keys read by tracking clients, BCAST prefixes.
    pub tracking: crate::executor::tracking::Table,
    /// maxmemory-clients in bytes, as `clients::refresh_limits` last computed it (each batch
    /// asks, and parsing the setting per batch showed in the -P 1 profile).
    pub client_eviction_limit: u64,
    /// Clients holding commands until CLIENT PAUSE ends, in the order they were stopped.
    pub postponed: std::collections::VecDeque<u64>,
    /// The RDB load running in the background at startup; commands without the LOADING flag
    /// are refused until it is swapped in.
    pub loading: Option<Arc<crate::rdb::load::LoadJob>>,
    /// SAVE/BGSAVE bookkeeping (the background save child, save points).
    pub snapshot: snapshot::SnapshotState,
    /// maxmemory eviction: the candidate pool and whether a pass is to be continued.
    pub evict: evict::EvictState,
    /// What the running execution unit propagates (to the AOF).
    pub prop: propagate::Propagation,
    /// The append-only file.
    pub aof: aof::AofState,
    /// MIGRATE's connections to its targets.
    pub migrate: migrate_cache::MigrateSockets,
    /// Cluster mode (cluster-enabled yes): the cluster state (see `cluster`).
    pub cluster: Option<Box<crate::cluster::ClusterState>>,
    /// Bus links' peer and local IPs, as the bus side reported them.
    pub cluster_link_addrs: std::collections::HashMap<u64, (String, String)>,
    /// Cluster mode: nodes.conf's writer thread (see `nodes_conf`).
    pub cluster_conf: Option<Arc<nodes_conf::ConfWriter>>,
    /// Cluster mode: the slot of the running command's keys (a script's keys must stay in it),
    /// and its client's ASKING and READONLY flags, for the script's own commands.
    pub cluster_caller_slot: Option<usize>,
    pub cluster_caller_flags: (bool, bool),
    /// When the cluster cron last ran (it runs every 100 ms whatever hz is).
    pub cluster_cron_ms: i64,
    /// KEYS walks in progress (see `walks`).
    pub walks: walks::Walks,
}

impl State {
    pub fn new(config: Config) -> State {
        crate::db::index_slots(config.other.get("cluster-enabled").is_some_and(|v| v == "yes"));
        let dbs = (0..config.databases.max(1)).map(Db::numbered).collect();
        let now = unix_ms();
        let hz = config.hz.clamp(1, 500);
        let mut st = State {
            dbs,
            config,
            stats: Stats::default(),
            slowlog: Slowlog::default(),
            latency: crate::latency::Monitor::default(),
            clients: ClientTable::default(),
            next_client_id: 1,
            dirty: 0,
            start_time: Instant::now(),
            start_unix_ms: now,
            run_id: random_hex(40),
            lastsave_unix: now / 1000,
            shutdown: None,
            active_expire_enabled: true,
            shutdown_state: shutdown::Shutdown::default(),
            cron_paused: false,
            cron_work: None,
            expire_cycle: expire_cycle::ExpireCycle::default(),
            reply_buffer: clients::ReplyBufferPolicy::default(),
            client_peaks: clients::RecentPeaks::default(),
            cron_rotation: clients::CronRotation::default(),
            scripts_may_call_noscript: false,
            cron_loops: 0,
            hz,
            waiters: std::collections::HashMap::new(),
            ready_keys: Vec::new(),
            blocked_deadlines: std::collections::BTreeSet::new(),
            blocked_clients: 0,
            watched: std::collections::HashMap::new(),
            timer: Arc::new(tokio::sync::Notify::new()),
            repl: replication::ReplState::default(),
            pause_end_ms: 0,
            pause_all: false,
            pause_held: 0,
            pubsub: crate::pubsub::PubSub::default(),
            functions: crate::functions::Libraries::default(),
            scripting: crate::executor::scripting::Engine::new(),
            acl: crate::acl::Acl::default(),
            running_function: None,
            pre_command_oom: false,
            connections_inline: false,
            tracking: crate::executor::tracking::Table::default(),
            client_eviction_limit: 0,
            postponed: std::collections::VecDeque::new(),
            loading: None,
            prop: Default::default(),
            aof: Default::default(),
            migrate: Default::default(),
            cluster: None,
            cluster_link_addrs: Default::default(),
            cluster_conf: None,
            cluster_cron_ms: 0,
            cluster_caller_slot: None,
            cluster_caller_flags: (false, false),
            snapshot: snapshot::SnapshotState::default(),
            evict: evict::EvictState::default(),
            walks: walks::Walks::default(),
        };
        st.evict = evict::EvictState::with_limit(st.config.maxmemory);
        evict::apply_access_clock(&mut st);
        let password = st.config.requirepass.clone();
        st.acl.set_default_password(password.as_deref());
        st
    }
}

impl State {
    /// used_memory as maxmemory counts it: allocated bytes less the Lua VM's heap, which Redis
    /// keeps outside its allocator's count (and reports apart, as used_memory_lua).
    pub fn used_memory(&self) -> u64 {
        self.stats.used_memory_now().saturating_sub(self.scripting.vm_allocated() as u64)
    }

    /// Memory maxmemory does not count (Redis's freeMemoryGetNotCountedMemory, INFO
    /// mem_not_counted_for_evict): the replicas' output buffers and the AOF buffer. Evicting
    /// keys because a slow replica's stream piles up would only feed the stream more DELs.
    pub fn not_counted_for_evict(&self) -> u64 {
        // The shared replication buffer beyond the backlog's size (what replicas hold back), as
        // Redis counts it: even once they are gone, until it is trimmed.
        let shared = self.repl.backlog.as_ref().map_or(0, |b| b.memory().saturating_sub(b.size() as u64));
        // What each replica's connection holds of its own (a killed one stays until its
        // connection is gone, and so does its memory), and those waiting for their sync.
        let attached = self.repl.replicas.iter().map(|r| r.handle.output_memory());
        let replicas: u64 = attached.chain(self.repl.wait_start.iter().map(|w| w.handle.output_memory())).sum();
        shared + replicas + self.aof.buffer_len() as u64
    }

    /// used_memory less what maxmemory does not count: what eviction compares with the limit.
    pub fn used_memory_for_evict(&self) -> u64 {
        self.used_memory().saturating_sub(self.not_counted_for_evict())
    }

    /// Samples the allocator (raising the peak): its figures, and used_memory as INFO shows it.
    pub fn sample_memory(&mut self) -> (crate::stats::AllocatorStats, u64) {
        let lua = self.scripting.vm_allocated() as u64;
        self.stats.sample_memory(lua)
    }

    /// The cron's memory sample: raises the peak (see `Stats::note_memory_peak`).
    pub fn note_memory_peak(&mut self) {
        let lua = self.scripting.vm_allocated() as u64;
        self.stats.note_memory_peak(lua)
    }

    /// Swaps in the databases of a finished background load.
    pub fn poll_loading(&mut self) {
        let Some(job) = &self.loading else { return };
        let Some(done) = job.take_done() else { return };
        walks::set_aside_all(self);
        let mut dbs = done.dbs;
        dbs.resize_with(self.dbs.len(), Db::new);
        self.dbs = dbs;
        evict::apply_access_clock(self);
        self.functions = done.functions;
        crate::executor::scripting::host::reload_all(self);
        replication::after_load(self, done.repl, done.expired);
        self.stats.persistence.last_load_keys_loaded = done.keys_loaded;
        self.stats.persistence.last_load_keys_expired = done.keys_expired;
        self.stats.persistence.loading = false;
        self.loading = None;
        aof::open_after_load(self);
    }

    /// Whether some pause holds commands now (CLIENT PAUSE, or writes held by FAILOVER or a
    /// shutdown waiting for replicas): keys neither expire nor get evicted meanwhile.
    #[inline]
    pub fn paused(&self, now_ms: i64) -> bool {
        self.pause_held != 0 || self.pause_end_ms > now_ms
    }

    /// The earliest deadline of a blocked client.
    pub fn next_block_deadline(&self) -> Option<i64> {
        self.blocked_deadlines.first().map(|&(d, _)| d)
    }

    /// Signals every key of `db` that has waiters (FLUSHDB, FLUSHALL, SWAPDB replace the whole
    /// database under them).
    pub fn signal_db_waiters(&mut self, db: usize) {
        let keys: Vec<(usize, Vec<u8>)> = self.waiters.keys().filter(|(d, _)| *d == db).cloned().collect();
        for k in keys {
            if !self.ready_keys.contains(&k) {
                self.ready_keys.push(k);
            }
        }
    }

    /// Notes that `key` in `db` may serve blocked clients; only keys someone waits on are kept.
    pub fn signal_ready(&mut self, db: usize, key: &[u8]) {
        if self.waiters.is_empty() {
            return;
        }
        let k = (db, key.to_vec());
        if self.waiters.contains_key(&k) && !self.ready_keys.contains(&k) {
            self.ready_keys.push(k);
        }
    }
}

/// latency-monitor-threshold in milliseconds (0: off).
pub fn latency_threshold_ms(st: &State) -> u64 {
    crate::config::lookup("latency-monitor-threshold").and_then(|d| st.config.get(d).parse().ok()).unwrap_or(0)
}

/// Records `event` when a span of `duration_us` reaches the threshold (Redis's
/// latencyAddSampleIfNeeded, which compares whole milliseconds).
pub fn record_latency(st: &mut State, event: &str, duration_us: u64) {
    let ms = duration_us / 1000;
    if ms == 0 {
        return;
    }
    let threshold = latency_threshold_ms(st);
    if threshold > 0 && ms >= threshold {
        st.latency.add(event, ms, crate::util::clock::unix_ms() / 1000);
    }
}

/// The executor: state plus the batch and cron entry points.
pub struct Executor {
    pub state: State,
}

impl Executor {
    pub fn new(config: Config) -> Self {
        let mut state = State::new(config);
        // The limits of redis.conf and the command line hold from the first connection, not
        // from the first cron tick (a subscriber flooded right after startup was closed at the
        // default pubsub limit although `pubsub 0 0 0` was configured).
        clients::refresh_limits(&mut state);
        Executor { state }
    }

    /// Registers a new connection; returns its client id. `authenticated` is false when a password is set.
    pub fn connect(&mut self, info: ConnInfo, handle: Arc<ClientHandle>) -> u64 {
        let id = self.state.next_client_id;
        self.state.next_client_id += 1;
        let authenticated = self.state.acl.new_connections_authenticated();
        handle.set_authenticated(authenticated);
        let client = Box::new(Client::new(id, info, handle, unix_ms(), authenticated));
        self.state.clients.insert(id, client);
        id
    }

    pub fn disconnect(&mut self, id: u64) {
        disconnect_client(&mut self.state, id);
    }

    /// Number of connected clients (maxclients check).
    pub fn client_count(&self) -> usize {
        self.state.clients.len()
    }

    /// Runs a batch for client `id`, appending every reply to `out`. Returns what the connection
    /// should do afterwards. A blocked client's commands wait until it is served.
    /// Runs the commands of `cmds` (left empty, its capacity kept for the next batch).
    pub fn handle_batch(&mut self, id: u64, cmds: &mut Vec<Cmd>, out: &mut Vec<u8>) -> BatchEnd {
        let Some(mut client) = self.state.clients.remove(&id) else {
            cmds.clear();
            return BatchEnd::Close;
        };
        if self.state.loading.is_some() {
            self.state.poll_loading();
        }
        let now = unix_ms();
        client.last_interaction_ms = now;
        let mut clock = call::Clock::new(now);
        let st = &mut self.state;
        expire_cycle::note_served(st);
        // maxmemory-clients before the commands too: another client's query buffer may have
        // grown past the limit while it reads a large argument (no batch of its own yet), and
        // Redis evicts it as it reads, so this batch (a CLIENT LIST) must not see it.
        if clients::client_eviction_limit(st) > 0 {
            st.clients.insert(id, client);
            let _ = clients::evict_clients(st, None);
            client = st.clients.remove(&id).expect("just inserted");
        }
        let mut cmds = cmds.drain(..);
        let evicting = clients::client_eviction_limit(st) > 0;
        let mut reply_checked = 0;
        // A client already closing runs nothing more (Redis stops at CLOSE_ASAP): one killed or
        // evicted while this batch was on its way, or just now by the check above, its query
        // buffer being over maxmemory-clients (Redis evicts it while it reads, before the
        // command is whole).
        if client.blocked.is_none() && !client.postponed && !client.handle.close_requested() {
            prefetch_key(st, &client, cmds.as_slice().first(), Db::prefetch_slot);
            prefetch_key(st, &client, cmds.as_slice().get(1), Db::prefetch_slot);
            while let Some(cmd) = cmds.next() {
                // The next two commands' keys load while this one runs: the entry of the next
                // (its slot was asked for a command ago), the slot of the one after. 3M keys,
                // -P 16, server CPU: GET -16%, SET (a growing table) -6%; a deeper pipeline
                // (4 and 2 ahead) or slots only did no better.
                prefetch_key(st, &client, cmds.as_slice().first(), Db::prefetch_entry);
                prefetch_key(st, &client, cmds.as_slice().get(1), Db::prefetch_slot);
                client.batch_last = cmds.len() == 0;
                client.batch_reply = out.len();
                // maxmemory-clients between the commands of a pipeline too, once its replies
                // grew by a reply buffer's worth: Redis evicts before each command, and the
                // replies of a long pipeline to a client that does not read are its output
                // buffer (the client itself may go, then its remaining commands do not run).
                if evicting && out.len() - reply_checked >= REPLY_BUFFER_BYTES {
                    reply_checked = out.len();
                    let _ = clients::evict_clients(st, Some(&client));
                    if client.handle.close_requested() {
                        break;
                    }
                }
                blocking::run_one(st, &mut client, cmd, out, &mut clock, true);
                if !client.authenticated && !client.handle.admit_unauthenticated(out.len()) {
                    break;
                }
                if !st.ready_keys.is_empty() {
                    blocking::serve_ready_keys(st, &mut clock);
                }
                if blocking::must_stop(st, &client) {
                    break;
                }
            }
        }
        client.batch_reply = 0;
        client.batch_last = false;
        // Replies past a reply buffer's worth are the client's output from now until its
        // connection writes them (Redis's reply list): maxmemory-clients must see them while
        // other batches run before that write. The output limit goes first, as in Redis: a
        // client it closes is not evicted for what it would have held.
        if out.len() >= REPLY_BUFFER_BYTES && client.handle.admit_reply(out.len()) {
            client.handle.add_in_flight(out.len());
        }
        if cmds.len() > 0 {
            client.pending.extend(cmds);
        }
        let end = if st.shutdown.is_some() {
            BatchEnd::Shutdown
        } else if client.close_after_reply || client.handle.close_requested() {
            BatchEnd::Close
        } else {
            BatchEnd::Continue
        };
        crate::executor::tracking::broadcast(st, Some((&mut client, out)));
        client.handle.set_authenticated(client.authenticated);
        let handle = client.handle.clone();
        st.clients.insert(id, client);
        // maxmemory-clients, after commands that may have grown any client's buffers; the
        // caller itself may be the one evicted.
        let _ = clients::evict_clients(st, None);
        let end = if end == BatchEnd::Continue && handle.close_requested() { BatchEnd::Close } else { end };
        // FAILOVER may end here (its target acknowledged), lifting its pause of writes.
        replication::failover_cron(st);
        if !st.postponed.is_empty() {
            call::resume_postponed(st);
        }
        // What this batch changed is in the AOF before its replies go out, and queued to the
        // replicas (before the replies too, as Redis's beforeSleep order).
        aof::flush(st);
        replication::flush(st);
        end
    }

    /// When the timer should next wake the executor: the next cron tick or blocked deadline.
    pub fn next_wakeup(&self, next_cron: Instant) -> Instant {
        let mut next_cron = next_cron;
        // Held pauses (FAILOVER, a shutdown) end from the cron or a command, not at a time.
        if !self.state.postponed.is_empty() && (self.state.pause_held == 0 || self.state.pause_end_ms > 0) {
            let ms = (self.state.pause_end_ms - unix_ms()).max(0) as u64;
            next_cron = next_cron.min(Instant::now() + Duration::from_millis(ms));
        }
        if let Some(due) = expire_cycle::fast_due(&self.state) {
            next_cron = next_cron.min(due);
        }
        match self.state.next_block_deadline() {
            Some(d) => {
                let ms = (d - unix_ms()).max(0) as u64;
                next_cron.min(Instant::now() + Duration::from_millis(ms))
            }
            None => next_cron,
        }
    }

    /// Starts a fast expire cycle when one is due (see `expire_cycle`); `cron_slice` runs it.
    pub fn start_fast_expire(&mut self) -> bool {
        expire_cycle::start_fast(&mut self.state)
    }

    /// Answers blocked clients whose deadline passed.
    pub fn expire_blocked(&mut self) {
        if !self.state.blocked_deadlines.is_empty() {
            blocking::expire_deadlines(&mut self.state);
        }
        replication::failover_cron(&mut self.state);
        if !self.state.postponed.is_empty() {
            call::resume_postponed(&mut self.state);
        }
        aof::flush(&mut self.state);
        replication::flush(&mut self.state);
    }

    /// Periodic work, called `hz` times a second.
    pub fn cron(&mut self) {
        if self.state.cron_paused {
            return;
        }
        if self.state.loading.is_some() {
            self.state.poll_loading();
        }
        // The watchdog is fed by each tick, except while a load is in progress: Redis loads
        // inside one call of its event loop, with no serverCron until it ends, so a long load
        // (a slow master's socket) is a stall the watchdog reports.
        if self.state.loading.is_none() && self.state.repl.sync_loading.is_none() {
            crate::watchdog::feed();
        }
        let now = unix_ms();
        let st = &mut self.state;
        st.cron_loops += 1;
        st.hz = cron_hz(st.config.hz, st.config.dynamic_hz, st.clients.len());
        st.stats.ops.track(now, st.stats.total_commands_processed);
        {
            use crate::stats::{load, NET_INPUT_BYTES, NET_OUTPUT_BYTES, NET_REPL_INPUT_BYTES, NET_REPL_OUTPUT_BYTES};
            let (repl_in, repl_out) = (load(&NET_REPL_INPUT_BYTES), load(&NET_REPL_OUTPUT_BYTES));
            st.stats.net_input.track(now, load(&NET_INPUT_BYTES) + repl_in);
            st.stats.net_output.track(now, load(&NET_OUTPUT_BYTES) + repl_out);
            st.stats.net_repl_input.track(now, repl_in);
            st.stats.net_repl_output.track(now, repl_out);
        }
        // Redis's run_with_period(5000): every 5 s in cron ticks, from the first one.
        let ticks_per_5s = 5000 / (1000 / st.hz.max(1) as u64).max(1);
        if ticks_per_5s <= 1 || (st.cron_loops - 1).is_multiple_of(ticks_per_5s) {
            log_periodic(st);
        }
        clients::refresh_limits(st);
        for c in st.clients.values() {
            clients::log_if_obuf_exceeded(st, c);
        }
        clients::cron(st, now);
        scripting::ldb::reap_children();
        crate::executor::tracking::broadcast(st, None);
        // Redis's slow expire cycle (see `expire_cycle`), then active rehashing, as Redis's
        // activerehashing: a 1 ms slice per tick finishes a resize (or shrink) of a table that
        // is no longer written to. Both run in `cron_slice`, a slice at a time.
        expire_cycle::start_slow(st, now);
        st.cron_work = Some(CronWork { rehash_db: 0, rehash_left: Duration::from_millis(1) });
        // pub/sub hook: `expired` keyspace events of keys expired since the last tick.
        crate::executor::pubsub::drain_expired(st, None);
        st.stats.expired_keys = st.dbs.iter().map(|d| d.counters.expired_keys).sum();
        st.note_memory_peak();
        // maxmemory: a pass that ran out of time goes on here (Redis's eviction time proc).
        if st.evict.running {
            evict::perform(st, None, now);
        }
        // Persistence: reap a finished BGSAVE child, start scheduled saves and save points.
        snapshot::cron(st);
        aof::cron(st);
        replication::cron(st, now);
        if st.cluster.is_some() && now - st.cluster_cron_ms >= 90 {
            st.cluster_cron_ms = now;
            cluster::cron(st);
            cluster::redirect_blocked(st);
        }
        shutdown::cron(st, now);
        if !st.migrate.is_empty() {
            st.migrate.close_idle(now);
        }
        if st.config.timeout > 0 {
            let limit = st.config.timeout as i64 * 1000;
            for c in st.clients.values() {
                if now - c.last_interaction_ms > limit {
                    c.handle.request_close();
                }
            }
        }
    }

    /// Goes on with the budgeted work (an expire cycle, then the tick's active rehashing) for at
    /// most about `slice`; returns whether some is left. The one-thread runtime's cron task
    /// yields between slices, so a 25 ms expire cycle of many keys due at once is clients'
    /// commands with looks at the sockets in between, not one 25 ms wait for all of them.
    pub fn cron_slice(&mut self, slice: Duration) -> bool {
        let st = &mut self.state;
        let slice_end = Instant::now() + slice;
        // Each slice takes one step at least, however short.
        let mut stepped = false;
        if expire_cycle::running(st) {
            if expire_cycle::run_slice(st, slice_end) {
                return true;
            }
            stepped = true;
        }
        let Some(mut w) = st.cron_work.take() else { return false };
        // Not while a BGSAVE child shares our pages: rehashing would copy them (as Redis).
        while w.rehash_db < st.dbs.len() && !w.rehash_left.is_zero() && st.snapshot.child.is_none() {
            let started = Instant::now();
            if stepped && started >= slice_end {
                st.cron_work = Some(w);
                return true;
            }
            let deadline = slice_end.min(started + w.rehash_left);
            if !st.dbs[w.rehash_db].rehash_until(deadline) {
                w.rehash_db += 1;
            }
            stepped = true;
            w.rehash_left = w.rehash_left.saturating_sub(started.elapsed());
        }
        false
    }

    /// Milliseconds between cron runs.
    pub fn cron_period(&self) -> Duration {
        Duration::from_millis(1000 / self.state.hz as u64)
    }
}

/// The cron's frequency for `configured` hz: with dynamic-hz, doubled (up to 500) while there are
/// more than 200 clients per tick, as Redis's serverCron adapts it.
fn cron_hz(configured: u32, dynamic: bool, clients: usize) -> u32 {
    /// Redis's MAX_CLIENTS_PER_CLOCK_TICK and CONFIG_MAX_HZ.
    const CLIENTS_PER_TICK: usize = 200;
    const MAX_HZ: u32 = 500;
    let mut hz = configured.clamp(1, MAX_HZ);
    while dynamic && hz < MAX_HZ && clients / hz as usize > CLIENTS_PER_TICK {
        hz = (hz * 2).min(MAX_HZ);
    }
    hz
}

/// What the connection does after a batch's replies are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEnd {
    Continue,
    Close,
    Shutdown,
}

/// A message to the executor thread (threaded mode).
pub enum Msg {
    Connect(ConnInfo, Arc<ClientHandle>, tokio::sync::oneshot::Sender<u64>),
    Batch(u64, Vec<Cmd>, Vec<u8>, tokio::sync::oneshot::Sender<(Vec<u8>, BatchEnd)>),
    Disconnect(u64),
    /// Runs a closure on the executor (a shutdown by signal, the replica link's steps); the
    /// closure sends back its own answer.
    Run(Box<dyn FnOnce(&mut Executor) + Send>),
}

/// Runs the executor on its own thread, serving messages until every sender is gone.
pub fn spawn_thread(mut exec: Executor) -> std::sync::mpsc::Sender<Msg> {
    let (tx, rx) = std::sync::mpsc::channel::<Msg>();
    std::thread::Builder::new()
        .name("executor".into())
        .spawn(move || {
            let mut next_cron = Instant::now() + exec.cron_period();
            // When KEYS walks last had a step: while batches keep coming they get one step
            // (`walks::STEP`) per step's worth of batches; with none waiting they step on.
            let mut last_step = Instant::now();
            loop {
                let walking = exec.state.walks.pending();
                let wait = if walking {
                    Duration::ZERO
                } else if exec.state.walks.in_thread() {
                    // A SORT walk's thread raises `walks.wake`, which this loop does not wait on:
                    // it looks again within a millisecond.
                    exec.next_wakeup(next_cron).saturating_duration_since(Instant::now()).min(Duration::from_millis(1))
                } else {
                    exec.next_wakeup(next_cron).saturating_duration_since(Instant::now())
                };
                match rx.recv_timeout(wait) {
                    Ok(msg) => {
                        exec.handle_msg(msg);
                        // Drain what queued meanwhile before sleeping again.
                        for _ in 0..1024 {
                            if walking && last_step.elapsed() >= walks::STEP {
                                walks::step(&mut exec.state, walks::STEP);
                                last_step = Instant::now();
                            }
                            match rx.try_recv() {
                                Ok(msg) => exec.handle_msg(msg),
                                Err(_) => break,
                            }
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                }
                if exec.state.walks.pending() {
                    walks::step(&mut exec.state, walks::STEP);
                    last_step = Instant::now();
                }
                exec.expire_blocked();
                if Instant::now() >= next_cron {
                    exec.cron();
                    while exec.cron_slice(Duration::from_secs(1)) {}
                    next_cron = Instant::now() + exec.cron_period();
                }
                // Redis's beforeSleep: a fast expire cycle when the last cycle ran out of time.
                if exec.start_fast_expire() {
                    while exec.cron_slice(Duration::from_secs(1)) {}
                }
            }
        })
        .expect("spawn executor thread");
    tx
}

impl Executor {
    fn handle_msg(&mut self, msg: Msg) {
        match msg {
            Msg::Connect(info, handle, reply) => {
                let id = self.connect(info, handle);
                let _ = reply.send(id);
            }
            Msg::Batch(id, mut cmds, mut out, reply) => {
                let end = self.handle_batch(id, &mut cmds, &mut out);
                let _ = reply.send((out, end));
            }
            Msg::Disconnect(id) => self.disconnect(id),
            Msg::Run(f) => f(self),
        }
    }
}

/// Redis's serverCron lines every 5 s: each database with keys at verbose, the clients and the
/// memory in use at debug (nothing is computed at a higher level).
fn log_periodic(st: &State) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    for (j, db) in st.dbs.iter().enumerate() {
        let (used, volatile) = (db.len(), db.expires_len());
        if used > 0 || volatile > 0 {
            tracing::debug!("DB {j}: {used} keys ({volatile} volatile) in {} slots HT.", db.buckets());
        }
    }
    let replicas = replication::replica_count(st);
    tracing::trace!(
        "{} clients connected ({replicas} replicas), {} bytes in use",
        st.clients.len().saturating_sub(replicas),
        st.used_memory()
    );
}

/// Forgets a client whose connection is gone (its subscriptions, watches, blocked state and
/// replica entry too).
pub fn disconnect_client(st: &mut State, id: u64) {
    st.cron_rotation.forget(id);
    if let Some(mut client) = st.clients.remove(&id) {
        clients::log_if_obuf_exceeded(st, &client);
        clients::log_if_peer_closed(st, &client);
        crate::executor::tracking::forget(&mut st.tracking, &mut client);
        if client.postponed {
            st.postponed.retain(|&p| p != id);
        }
        crate::executor::multi::unwatch_client(st, &mut client);
        if let Some(blocked) = client.blocked.take() {
            blocking::unpark(st, id, &blocked);
            replication::end_wait(st, id);
            shutdown::forget(st, id);
        }
        replication::client_gone(st, &client);
    }
    // pub/sub hook: drop the client's subscriptions and monitor mode.
    crate::executor::pubsub::forget_client(st, id);
    walks::client_gone(st, id);
}

/// Starts loading, with `stage` (`Db::prefetch_slot` or `Db::prefetch_entry`), the first key of
/// `cmd` in the client's database. A hint only: a command that changes the database first
/// (SELECT) just wastes it.
fn prefetch_key(st: &State, client: &Client, cmd: Option<&Cmd>, stage: fn(&Db, &[u8])) {
    let Some(cmd) = cmd else { return };
    let Some(spec) = cmd.spec else { return };
    let first = spec.keys.first;
    if first > 0 && (first as usize) < cmd.argv.len() {
        if let Some(db) = st.dbs.get(client.db) {
            stage(db, &cmd.argv[first as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cron's expire cycle done in slices: each slice makes progress, a slice's end is not
    /// the cycle's time cap, and the cycle ends with every stale key gone or the cap counted.
    #[test]
    fn the_expire_cycle_runs_in_slices() {
        let mut e = Executor::new(Config::default());
        let now = unix_ms();
        let db = &mut e.state.dbs[0];
        for i in 0..20_000 {
            let k = format!("k{i}").into_bytes();
            db.set(&k, crate::types::Value::Str(crate::types::string::RStr::from_bytes(b"v")), now);
            db.set_expire(&k, now - 1);
        }
        e.cron();
        assert!(e.cron_slice(Duration::ZERO), "a zero slice does one step and leaves the rest");
        let db = &e.state.dbs[0];
        assert!(db.len() < 20_000 && db.len() >= 20_000 - 40, "{}", db.len());
        assert_eq!(e.state.stats.expired_time_cap_reached, 0);
        let mut slices = 1;
        while e.cron_slice(Duration::from_micros(250)) {
            slices += 1;
        }
        let db = &e.state.dbs[0];
        assert!(db.is_empty() || e.state.stats.expired_time_cap_reached == 1, "{} left", db.len());
        assert!(e.state.stats.expired_stale_perc > 0.0);
        assert_eq!(e.state.stats.expired_keys as usize, 20_000 - db.len());
        assert!(slices > 1);
        assert!(e.state.cron_work.is_none());
    }

    fn stale_keys(e: &mut Executor, db: usize, n: usize, now: i64) {
        for i in 0..n {
            let k = format!("k{i}").into_bytes();
            e.state.dbs[db].set(&k, crate::types::Value::Str(crate::types::string::RStr::from_bytes(b"v")), now);
            e.state.dbs[db].set_expire(&k, now - 1);
        }
    }

    /// A cycle that runs out of time in a database leaves it to the next cycle, which begins
    /// with the database after it: a database full of stale keys does not keep the others'
    /// keys from expiring. A cycle the next tick finds unfinished ran out of time.
    #[test]
    fn cycles_take_turns_over_the_databases() {
        // hz 500: a 2 ms slow cycle, too short for db 0.
        let mut e = Executor::new(Config { hz: 500, ..Config::default() });
        let now = unix_ms();
        stale_keys(&mut e, 0, 200_000, now);
        stale_keys(&mut e, 1, 10, now);
        e.cron();
        while e.cron_slice(Duration::from_secs(1)) {}
        assert_eq!(e.state.stats.expired_time_cap_reached, 1);
        assert_eq!(e.state.dbs[1].len(), 10, "the first cycle ran out of time in db 0");
        e.cron();
        while e.cron_slice(Duration::from_secs(1)) {}
        assert_eq!(e.state.dbs[1].len(), 0, "the second cycle began with db 1");
        // Started and not finished when the next tick comes.
        e.cron();
        assert!(e.cron_slice(Duration::ZERO));
        let capped = e.state.stats.expired_time_cap_reached;
        e.cron();
        assert_eq!(e.state.stats.expired_time_cap_reached, capped + 1);
    }

    /// Fast cycles follow a cycle that ran out of time, once clients were served since the last
    /// one, at most every two fast-cycle durations; none after a cycle that finished in time.
    #[test]
    fn fast_cycles_follow_cycles_that_ran_out_of_time() {
        let mut e = Executor::new(Config { hz: 500, ..Config::default() });
        let now = unix_ms();
        stale_keys(&mut e, 0, 300_000, now);
        e.cron();
        while e.cron_slice(Duration::from_secs(1)) {}
        assert_eq!(e.state.stats.expired_time_cap_reached, 1);
        // The tick counts as served: a fast cycle at once.
        assert!(e.start_fast_expire());
        while e.cron_slice(Duration::from_secs(1)) {}
        assert_eq!(e.state.stats.expired_time_cap_reached, 2, "1 ms is not enough either");
        assert!(!e.start_fast_expire(), "no client served since");
        expire_cycle::note_served(&mut e.state);
        let due = expire_cycle::fast_due(&e.state).expect("a fast cycle is due");
        if Instant::now() < due {
            assert!(!e.start_fast_expire(), "too soon after the last");
        }
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        assert!(e.start_fast_expire());
        while e.cron_slice(Duration::from_secs(1)) {}
        // A cycle that finishes in time: no fast cycles after it.
        e.state.dbs[0] = Db::numbered(0);
        e.state.config.hz = 10;
        e.cron();
        while e.cron_slice(Duration::from_secs(1)) {}
        expire_cycle::note_served(&mut e.state);
        assert_eq!(expire_cycle::fast_due(&e.state), None);
        // A cycle out of time, then expiry stopped: no fast cycle is due (the cron task would
        // otherwise wake for one at once, again and again).
        stale_keys(&mut e, 0, 300_000, now);
        e.state.config.hz = 500;
        e.cron();
        while e.cron_slice(Duration::from_secs(1)) {}
        expire_cycle::note_served(&mut e.state);
        assert!(expire_cycle::fast_due(&e.state).is_some());
        e.state.active_expire_enabled = false;
        assert_eq!(expire_cycle::fast_due(&e.state), None);
    }

    /// Expiry stopped between two slices (DEBUG SET-ACTIVE-EXPIRE 0, a CLIENT PAUSE, becoming a
    /// replica) deletes nothing more in that tick.
    #[test]
    fn expiry_stopped_between_slices_stops_the_cycle() {
        let mut e = Executor::new(Config::default());
        let now = unix_ms();
        for i in 0..5_000 {
            let k = format!("k{i}").into_bytes();
            e.state.dbs[0].set(&k, crate::types::Value::Str(crate::types::string::RStr::from_bytes(b"v")), now);
            e.state.dbs[0].set_expire(&k, now - 1);
        }
        e.cron();
        assert!(e.cron_slice(Duration::ZERO));
        let left = e.state.dbs[0].len();
        assert!(left < 5_000);
        e.state.active_expire_enabled = false;
        while e.cron_slice(Duration::ZERO) {}
        assert_eq!(e.state.dbs[0].len(), left);
    }
}
