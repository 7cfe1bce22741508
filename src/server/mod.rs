//! The network side: listeners, connection tasks and the runtime that drives them, in one of
//! two modes chosen by io-threads (see `executor`). Nothing imports this module but `main`/`lib`.

mod coalesce;
pub mod connection;
pub mod listener;
pub mod rdb_transfer;
mod replica_link;
mod signals;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::config::Config;
use crate::executor::{self, clients::ClientHandle, clients::ConnInfo, BatchEnd, Cmd, Executor, Msg, SignalShutdown};

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

    /// A shutdown by signal (SIGTERM/SIGINT), carried out as Redis's serverCron carries out
    /// shutdown_asap: not while DEBUG PAUSE-CRON holds the cron (`Later`), not at all once
    /// SHUTDOWN ABORT cancelled it (`Stay`), else after the save the signal's directive asks for
    /// (`Stay` when that save failed). `first` marks the signal's arrival.
    pub async fn signal_shutdown(&self, signal: &'static str, first: bool) -> SignalShutdown {
        let run = move |e: &mut Executor| {
            let st = &mut e.state;
            if first {
                executor::SHUTDOWN_ASAP.store(true, Ordering::Release);
            }
            if !executor::SHUTDOWN_ASAP.load(Ordering::Acquire) {
                return SignalShutdown::Stay;
            }
            if st.cron_paused {
                return SignalShutdown::Later;
            }
            // Still set while the save runs: a second SIGINT then exits at once (`signals`).
            tracing::warn!("User requested shutdown...");
            let name = if signal == "SIGINT" { "shutdown-on-sigint" } else { "shutdown-on-sigterm" };
            let flags = st.config.other.get(name).cloned().unwrap_or_default();
            let save =
                if flags.contains("nosave") { false } else { flags.contains("save") || !st.config.save.is_empty() };
            match executor::snapshot::shutdown_save(st, save) {
                Ok(()) => SignalShutdown::Exit,
                Err(_) => {
                    tracing::warn!("Error trying to save the DB, can't exit.");
                    executor::SHUTDOWN_ASAP.store(false, Ordering::Release);
                    SignalShutdown::Stay
                }
            }
        };
        self.run(run).await.unwrap_or(SignalShutdown::Exit)
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
    pub shutdown: tokio::sync::Notify,
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
    // `replicaof host port` in the configuration: the link task connects once serving.
    if let Some((host, port)) = config.other.get("replicaof").and_then(|v| v.split_once(' ')) {
        if let Ok(port) = port.parse() {
            crate::commands::replication::set_master(&mut exec.state, host.to_string(), port);
            exec.state.repl.psync_fresh = true;
        }
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
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_park(move || coalesce::before_park(!gate.sync_written()))
            .on_thread_unpark(coalesce::after_unpark)
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
                        _ = tokio::time::sleep_until(wake.into()) => {}
                        _ = timer.notified() => continue,
                    }
                    let mut e = ExecHandle::local(&cron_exec);
                    e.expire_blocked();
                    if std::time::Instant::now() >= next_cron {
                        e.cron();
                        next_cron = std::time::Instant::now() + e.cron_period();
                    }
                }
            });
            serve(ExecHandle::Local(exec), config).await
        })
    } else {
        let tx = executor::spawn_thread(exec);
        let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                tracing::warn!("Failed creating the runtime: {e}");
                return 1;
            }
        };
        rt.block_on(serve(ExecHandle::Remote(tx), config))
    }
}

async fn serve(exec: ExecHandle, config: Config) -> i32 {
    let shared = Arc::new(Shared {
        exec,
        config,
        shutdown: tokio::sync::Notify::new(),
        connections: std::sync::atomic::AtomicUsize::new(0),
    });
    if let Err(e) = listener::start(shared.clone()).await {
        tracing::warn!("{e}");
        return 1;
    }
    tokio::spawn(replica_link::run(shared.clone()));
    tracing::info!("Ready to accept connections tcp");
    if shared.config.notify_systemd {
        crate::daemon::notify_systemd_ready();
    }
    signals::install();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    // A signal's shutdown waits while DEBUG PAUSE-CRON holds the cron: it is asked again every
    // cron period (100 ms) until it happens or SHUTDOWN ABORT cancels it.
    let mut pending: Option<&'static str> = None;
    loop {
        let sigterm_fut = async {
            match sigterm.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        let retry = async {
            match pending {
                Some(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
                None => std::future::pending().await,
            }
        };
        // SHUTDOWN saved (or not) on the executor already; a signal saves there too, and a
        // failed save keeps the server running, as in Redis.
        let (signal, first) = tokio::select! {
            _ = shared.shutdown.notified() => {
                tracing::warn!("User requested shutdown...");
                break;
            }
            _ = tokio::signal::ctrl_c() => (Some("SIGINT"), true),
            _ = sigterm_fut => (Some("SIGTERM"), true),
            _ = retry => (pending, false),
        };
        // The arrival was logged by the handler itself (`signals`).
        let Some(sig) = signal else { continue };
        match shared.exec.signal_shutdown(sig, first).await {
            SignalShutdown::Exit => break,
            SignalShutdown::Stay => pending = None,
            SignalShutdown::Later => pending = Some(sig),
        }
    }
    listener::cleanup(&shared.config);
    tracing::warn!("Redis is now ready to exit, bye bye...");
    0
}
