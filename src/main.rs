//! ferrodis-server: argv and redis.conf → Config (or Redis's FATAL report) → daemonize, log,
//! pidfile, open-files limit → server::run. Nothing else.

use ferrodis::config::{self, Cli, Config};
use ferrodis::{daemon, log, FERRODIS_VERSION, REDIS_VERSION};

#[global_allocator]
static GLOBAL: ferrodis::alloc::Counting = ferrodis::alloc::Counting;

fn usage() -> String {
    let p = "./ferrodis-server";
    format!(
        "Usage: {p} [/path/to/redis.conf] [options] [-]\n       {p} - (read config from stdin)\n       {p} -v or --version\n       {p} -h or --help\n\nExamples:\n       {p} (run the server with default conf)\n       echo 'maxmemory 128mb' | {p} -\n       {p} /etc/redis/6379.conf\n       {p} --port 7777\n       {p} --port 7777 --replicaof 127.0.0.1 8888\n       {p} /etc/myredis.conf --loglevel verbose -\n       {p} /etc/myredis.conf --loglevel verbose\n\n"
    )
}

/// The startup banner: shown when `always-show-logo yes`, or when the log goes to a terminal, as
/// Redis decides; otherwise one "Running mode" line. Tools (Redis's own test suite among them)
/// read the `PID:` and `Port:` fields of it, so those keep Redis's spelling; the art is ours.
fn show_logo_or_mode(cfg: &Config) {
    use std::io::IsTerminal;
    let to_terminal = cfg.logfile.is_empty() && std::io::stdout().is_terminal();
    // Redis shows the TCP port, or the TLS port when it listens on TLS only.
    let port = if cfg.port != 0 { cfg.port } else { ferrodis::server::tls::port(cfg) };
    let mode = if cfg.other.get("cluster-enabled").is_some_and(|v| v == "yes") { "cluster" } else { "standalone" };
    if !(cfg.always_show_logo || to_terminal) {
        tracing::info!("Running mode={mode}, port={port}.");
        return;
    }
    let pid = std::process::id();
    let banner = format!(
        "\n\
         \x20   .-----------------------------.\n\
         \x20  /  ferrodis {FERRODIS_VERSION:<19}/|     Redis {REDIS_VERSION} (00000000/0) 64 bit\n\
         \x20 +-----------------------------+ |\n\
         \x20 |  F E R R O D I S            | |     Running in {mode} mode\n\
         \x20 |                             | |     Port: {port}\n\
         \x20 |  a drop-in redis-server     | /     PID: {pid}\n\
         \x20 +-----------------------------+/\n\n"
    );
    log::raw(&cfg.logfile, &banner);
}

fn main() {
    let mut argv = std::env::args();
    let program = argv.next().unwrap_or_else(|| "ferrodis-server".into());
    let args: Vec<String> = argv.collect();
    // Before any thread exists (it rebuilds the environment) and after the last read of argv.
    ferrodis::proctitle::init(&program);
    ferrodis::alloc::purge_oversize_eagerly();
    // The command table, before the config (rename-command is checked against it).
    ferrodis::commands::install();
    let (file, stdin, options) = match config::parse_cli(&args) {
        Cli::Version => {
            println!(
                "Redis server v={REDIS_VERSION} sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=0000000000000000 ferrodis={FERRODIS_VERSION}"
            );
            std::process::exit(0);
        }
        Cli::Help => {
            eprint!("{}", usage());
            std::process::exit(1);
        }
        Cli::TestMemory | Cli::CheckSystem => {
            eprintln!("ferrodis-server: --test-memory and --check-system are not supported");
            std::process::exit(1);
        }
        Cli::Run { config_file, from_stdin, options } => (config_file, from_stdin, options),
    };
    let mut cfg = match Config::load(file.as_deref(), stdin, &options) {
        Ok(c) => c,
        Err(config::Fatal(text)) => {
            // Redis prints config errors on stderr, but a config file it cannot open is reported
            // through its logger, which writes to stdout at that point.
            if text.starts_with('\n') {
                eprint!("{text}");
            } else {
                print!("{text}");
            }
            std::process::exit(1);
        }
    };
    match ferrodis::executor::registry::renamed_table(&cfg.renamed_commands) {
        Ok(renames) if !renames.is_empty() => ferrodis::executor::registry::install_renames(renames),
        _ => {}
    }
    let syslog = cfg.other_flag("syslog-enabled", false);
    if syslog {
        log::enable_syslog();
    }
    log::init(&cfg.loglevel, &cfg.logfile);
    log::install_crash_handler(cfg.other_flag("crash-log-enabled", true), cfg.other_flag("use-exit-on-panic", false));
    if cfg.watchdog_period() > 0 {
        ferrodis::watchdog::apply(&mut cfg);
    }
    tracing::warn!("oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo");
    tracing::warn!(
        "Redis version={REDIS_VERSION}, bits=64, commit=00000000, modified=0, pid={}, just started",
        std::process::id()
    );
    if args.is_empty() {
        tracing::warn!(
            "Warning: no config file specified, using the default config. In order to specify a config file use {program} /path/to/redis.conf"
        );
    } else {
        tracing::warn!("Configuration loaded");
    }
    for w in std::mem::take(&mut cfg.warnings) {
        tracing::warn!("{w}");
    }
    let supervisor = daemon::detect_supervisor(&cfg.supervised);
    let background = cfg.daemonize && supervisor == daemon::Supervisor::None;
    if background {
        daemon::daemonize();
    }
    if syslog {
        let get = |name: &str| cfg.get(config::lookup(name).expect("a syslog directive"));
        log::open_syslog(&get("syslog-ident"), &get("syslog-facility"));
    }
    log::set_role('M');
    // Redis's clock line: ours is std's Instant, clock_gettime(CLOCK_MONOTONIC).
    tracing::info!("monotonic clock: POSIX clock_gettime");
    let granted = daemon::adjust_open_files_limit(cfg.maxclients);
    if granted == 0 {
        std::process::exit(1);
    }
    cfg.maxclients = granted;
    if background && cfg.pidfile.is_none() {
        cfg.pidfile = Some(daemon::DEFAULT_PIDFILE.to_string());
    }
    if let Some(p) = &cfg.pidfile {
        daemon::write_pidfile(p);
        if background {
            log::remove_pidfile_on_crash(p);
        }
    }
    // TLS contexts before the listeners, as Redis's main runs tlsConfigure before initServer.
    if ferrodis::server::tls::wanted(&cfg) && ferrodis::server::tls::configure(&cfg).is_err() {
        tracing::warn!("Failed to configure TLS. Check logs for more info.");
        std::process::exit(1);
    }
    // Listening before the banner, as Redis (initServer binds before the logo and the load).
    if let Err(e) = ferrodis::server::listener::prebind(&cfg) {
        tracing::warn!("{e}");
        std::process::exit(1);
    }
    ferrodis::proctitle::set(&cfg);
    show_logo_or_mode(&cfg);
    tracing::warn!("Server initialized");
    daemon::linux_memory_warnings(cfg.other_flag("disable-thp", true));
    cfg.notify_systemd = supervisor == daemon::Supervisor::Systemd;
    let replica = cfg.replicaof_set();
    let class = if replica { daemon::OomClass::Replica } else { daemon::OomClass::Master };
    if let Err(why) = daemon::apply_oom_score_adj(&cfg, class) {
        tracing::warn!("{why}");
    }
    std::process::exit(ferrodis::server::run(cfg));
}
