//! The network side: listeners, connection tasks and the runtime that drives them, in one of
//! two modes chosen by io-threads (see `executor`). Nothing imports this module but `main`/`lib`.

mod cluster_bus;
mod coalesce;
pub mod connection;
pub mod listener;
pub mod rdb_transfer;
mod replica_link;
pub mod tls;
mod tls_v1;
mod turns;

use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::executor::{self, clients::ClientHandle, clients::ConnInfo, BatchEnd, Cmd, Executor, Msg};

/// How a connection task reaches the executor.
#[derive(Clone)]
pub enum ExecHandle {
    /// Same thread: the executor is called inline (the mutex is never contended).
    Local(Arc<Mutex<Executor>>),
    /// Executor thread: batches travel over a channel, replies come back on a oneshot.
    Remote(std::sync::mpsc::Sender<Msg>),
}

impl ExecHandle {
    fn local(exec: &Arc<Mutex<Executor>>) -> std::sync::MutexGuard<'_, Executor> {
        exec.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a connection at once when the executor runs on this thread (io-threads 1), so a
    /// connection accepted just before a script turns busy is known to the busy handler, which
    /// serves the sockets of registered clients itself; None with I/O threads, where the
    /// connection registers from its own task (`connection::serve`).
    pub fn connect_now(&self, info: &ConnInfo, handle: &Arc<ClientHandle>) -> Option<u64> {
        match self {
            ExecHandle::Local(e) => Some(Self::local(e).connect(info.clone(), handle.clone())),
            ExecHandle::Remote(_) => None,
        }
    }

    pub async fn connect(&self, info: ConnInfo, handle: Arc<ClientHandle>) -> Option<u64> {
        match self {
            ExecHandle::Local(e) => Some(Self::local(e).connect(info, handle)),
            ExecHandle::Remote(tx) => {
                let (rtx, rrx) = tokio::sync::oneshot::channel();
                tx.send(Msg::Connect(info, handle, rtx)).ok()?;
                rrx.await.ok()
            }
        }
    }

    /// Runs a batch, leaving `cmds` empty; the replies are appended to `out`.
    pub async fn batch(&self, id: u64, cmds: &mut Vec<Cmd>, out: &mut Vec<u8>) -> BatchEnd {
        match self {
            ExecHandle::Local(e) => {
                let (end, wait) = {
                    let mut ex = Self::local(e);
                    let end = ex.handle_batch(id, cmds, out);
                    (end, ex.state.aof.take_wait())
                };
                // appendfsync always: the replies wait for the group fsync of the runtime's
                // before-park hook.
                if let Some((gate, epoch)) = wait {
                    gate.synced(epoch).await;
                }
                end
            }
            ExecHandle::Remote(tx) => {
                let (rtx, rrx) = tokio::sync::oneshot::channel();
                let buf = std::mem::take(out);
                if tx.send(Msg::Batch(id, std::mem::take(cmds), buf, rtx)).is_err() {
                    return BatchEnd::Close;
                }
                match rrx.await {
                    Ok((buf, end)) => {
                        *out = buf;
                        end
                    }
                    Err(_) => BatchEnd::Close,
                }
            }
        }
    }

    /// Runs `f` on the executor and returns its answer; None once the executor is gone.
    pub async fn run<R, F>(&self, f: F) -> Option<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Executor) -> R + Send + 'static,
    {
        match self {
            ExecHandle::Local(e) => Some(f(&mut Self::local(e))),
            ExecHandle::Remote(tx) => {
                let (rtx, rrx) = tokio::sync::oneshot::channel();
                let job = move |e: &mut Executor| {
                    let _ = rtx.send(f(e));
                };
                tx.send(Msg::Run(Box::new(job))).ok()?;
                rrx.await.ok()
            }
        }
    }

    pub fn disconnect(&self, id: u64) {
        match self {
            ExecHandle::Local(e) => Self::local(e).disconnect(id),
            ExecHandle::Remote(tx) => {
                let _ = tx.send(Msg::Disconnect(id));
            }
        }
    }
}

/// State shared by the listeners and connection tasks.
pub struct Shared {
    pub exec: ExecHandle,
    pub config: Config,
    /// Woken when the server is to exit (the executor's `shutdown::Shutdown::exit`).
    pub shutdown: Arc<tokio::sync::Notify>,
    pub connections: std::sync::atomic::AtomicUsize,
}

/// Starts the server and blocks until it shuts down. Returns the process exit code.
pub fn run(config: Config) -> i32 {
    crate::config::live::publish(&config);
    let threads = config.io_threads.max(1);
    let mut exec = Executor::new(config.clone());
    if let Err(e) = crate::commands::users::load_at_startup(&mut exec.state) {
        tracing::warn!("{e}");
        return 1;
    }
    if let Err(e) = executor::cluster::init(&mut exec.state) {
        tracing::warn!("{e}");
        return 1;
    }
    // `replicaof host port` in the configuration: the link task connects once serving.
    if let Some((host, port)) = config.other.get("replicaof").and_then(|v| v.split_once(' ')) {
        if let Ok(port) = port.parse() {
            executor::replication::set_master_from_config(&mut exec.state, host.to_string(), port);
        }
    }
    if config.notify_systemd {
        crate::daemon::notify_systemd("STATUS=Redis is loading...\n");
    }
    // With appendonly yes the AOF is the dataset (dump.rdb is not read, as in Redis), else the
    // RDB file; either loads on its own thread while the listener answers LOADING.
    if config.appendonly {
        if !executor::aof::start_at_boot(&mut exec.state) {
            return 1;
        }
    } else if let Some(job) = crate::rdb::load::start_background(&config) {
        exec.state.stats.persistence.loading = true;
        exec.state.loading = Some(job);
    }
    if threads == 1 {
        coalesce::init_thread();
        exec.state.connections_inline = true;
        exec.state.aof.group_commit = true;
        let gate = exec.state.aof.fsync.clone();
        // No time driver: see util::timer.
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .on_thread_park(move || coalesce::before_park(!gate.sync_written()))
            .on_thread_unpark(|| {
                coalesce::after_unpark();
                turns::unparked();
            })
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!("Failed creating the runtime: {e}");
                return 1;
            }
        };
        let exec = Arc::new(Mutex::new(exec));
        rt.block_on(async move {
            let cron_exec = exec.clone();
            tokio::spawn(async move {
                let (period, timer) = {
                    let e = ExecHandle::local(&cron_exec);
                    (e.cron_period(), e.state.timer.clone())
                };
                let mut next_cron = std::time::Instant::now() + period;
                loop {
                    let wake = ExecHandle::local(&cron_exec).next_wakeup(next_cron);
                    tokio::select! {
                        _ = crate::util::timer::sleep_until(wake) => {}
                        _ = timer.notified() => continue,
                    }
                    let ticked = {
                        let mut e = ExecHandle::local(&cron_exec);
                        e.expire_blocked();
                        let due = std::time::Instant::now() >= next_cron;
                        if due {
                            e.cron();
                            next_cron = std::time::Instant::now() + e.cron_period();
                        }
                        due
                    };
                    // The tick's expire cycle and rehashing, a turn's worth at a time with the
                    // connections' turns in between.
                    while ticked && ExecHandle::local(&cron_exec).cron_slice(CRON_SLICE) {
                        tokio::task::yield_now().await;
                    }
                    // Redis's beforeSleep: a fast expire cycle when the last cycle ran out of
                    // time and clients were served since the last one.
                    if ExecHandle::local(&cron_exec).start_fast_expire() {
                        while ExecHandle::local(&cron_exec).cron_slice(CRON_SLICE) {
                            tokio::task::yield_now().await;
                        }
                    }
                }
            });
            // KEYS walks: a step at a time, each followed by a turn of the other connections
            // (yield_now lets the runtime poll the sockets before this task runs again).
            let walk_exec = exec.clone();
            tokio::spawn(async move {
                let wake = ExecHandle::local(&walk_exec).state.walks.wake.clone();
                loop {
                    wake.notified().await;
                    while executor::walks::step(&mut ExecHandle::local(&walk_exec).state, executor::walks::STEP) {
                        tokio::task::yield_now().await;
                    }
                }
            });
            serve(ExecHandle::Local(exec), config).await
        })
    } else {
        let tx = executor::spawn_thread(exec);
        let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_io().build() {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!("Failed creating the runtime: {e}");
                return 1;
            }
        };
        rt.block_on(serve(ExecHandle::Remote(tx), config))
    }
}

/// The most of the cron's expire cycle and rehashing done between two looks at the sockets on
/// the one-thread runtime: a connection's turn.
const CRON_SLICE: std::time::Duration = std::time::Duration::from_micros(turns::ROUND_US);

async fn serve(exec: ExecHandle, config: Config) -> i32 {
    let Some(exit) = exec.run(|e| e.state.shutdown_state.exit.clone()).await else { return 1 };
    let shared = Arc::new(Shared { exec, config, shutdown: exit, connections: std::sync::atomic::AtomicUsize::new(0) });
    let listening = match listener::start(shared.clone()).await {
        Ok(listening) => listening,
        Err(e) => {
            tracing::warn!("{e}");
            return 1;
        }
    };
    if let Err(e) = cluster_bus::start(shared.clone()).await {
        tracing::warn!("{e}");
        return 1;
    }
    tokio::spawn(replica_link::run(shared.clone()));
    tokio::spawn(announce_ready(shared.clone(), listening));
    if let Err(e) = watch_signals() {
        tracing::warn!("Can't handle SIGTERM/SIGINT: {e}");
    }
    // The executor decides when to exit (SHUTDOWN, or a signal's shutdown from its cron), has
    // saved and logged by then, and wakes this.
    shared.shutdown.notified().await;
    listener::cleanup(&shared.config);
    0
}

/// Redis's "Ready to accept connections" lines, and systemd's READY=1, once the dataset is
/// loaded, as Redis's main after loadDataFromDisk: connections are accepted meanwhile (they are
/// answered -LOADING), but a supervisor or a script reading the log waits for the data. Then,
/// as there, the warning about a maxmemory under 1 MB.
async fn announce_ready(shared: Arc<Shared>, listening: listener::Listeners) {
    // Swapping in a finished load here too, not only at the next tick, saves up to a tick.
    let loading = |e: &mut Executor| {
        e.state.poll_loading();
        e.state.stats.persistence.loading
    };
    while shared.exec.run(loading).await.unwrap_or(false) {
        crate::util::timer::sleep(std::time::Duration::from_millis(10)).await;
    }
    if listening.network {
        tracing::info!("Ready to accept connections");
    }
    if let (true, Some(path)) = (listening.unix, &shared.config.unixsocket) {
        tracing::info!("The server is now ready to accept connections at {path}");
    }
    if shared.config.notify_systemd {
        crate::daemon::notify_systemd_ready(shared.config.replicaof_set());
    }
    let maxmemory = shared.config.maxmemory;
    if maxmemory > 0 && maxmemory < 1024 * 1024 {
        tracing::warn!(
            "WARNING: You specified a maxmemory value that is less than 1MB (current value is {maxmemory} bytes). \
             Are you sure this is what you really want?"
        );
    }
}

/// SIGTERM and SIGINT are received on a thread of their own, as Redis's handler runs whatever
/// the server is doing: the executor only learns that a shutdown is asked for (its cron carries
/// it out), and a second SIGINT while one is pending exits at once even if the executor is
/// busy, say in the final save.
fn watch_signals() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    // The handlers are installed before this returns: until then the signals' default action
    // (exit at once) applies.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => return drop(ready_tx.send(Err(e))),
        };
        rt.block_on(async move {
            let (mut term, mut int) = match (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
                (Ok(t), Ok(i)) => (t, i),
                (Err(e), _) | (_, Err(e)) => return drop(ready_tx.send(Err(e))),
            };
            let _ = ready_tx.send(Ok(()));
            loop {
                let (sig, name) = tokio::select! {
                    _ = term.recv() => (libc::SIGTERM, "SIGTERM"),
                    _ = int.recv() => (libc::SIGINT, "SIGINT"),
                };
                // A second SIGINT: the user really wants out, without saving or waiting.
                if sig == libc::SIGINT && executor::shutdown::signalled() {
                    // Redis logs these from its signal handler, in the handler's own line shape.
                    crate::log::from_handler("You insist... exiting now.");
                    // The final save's temp file, if it was being written.
                    let _ = std::fs::remove_file(format!("temp-{}.rdb", std::process::id()));
                    std::process::exit(1);
                }
                crate::log::from_handler(&format!("Received {name} scheduling shutdown..."));
                executor::shutdown::on_signal(sig);
            }
        })
    })?;
    ready_rx.recv().map_err(std::io::Error::other)?
}
