//! Logging in Redis's line format, `pid:R dd Mon yyyy HH:MM:SS.mmm <mark> message`, through
//! tracing with our own `FormatEvent`. Levels map as Redis's: debug (`.`, tracing TRACE),
//! verbose (`-`, DEBUG), notice (`*`, INFO), warning (`#`, WARN and ERROR). Output goes to the
//! `logfile` (appended) or stdout when it is empty. The level is an atomic checked per event so
//! CONFIG SET loglevel takes effect at once; the role letter (`C` until the server is
//! initialized, then `M`) is an atomic too.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::{format::Writer, FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// 0 = debug, 1 = verbose, 2 = notice, 3 = warning.
static LEVEL: AtomicU8 = AtomicU8::new(2);
static ROLE: AtomicU8 = AtomicU8::new(b'C');

/// Formats events as Redis's serverLog does.
pub struct RedisFormat;

impl<S, N> FormatEvent<S, N> for RedisFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut w: Writer<'_>, event: &Event<'_>) -> std::fmt::Result {
        let mark = match *event.metadata().level() {
            Level::ERROR | Level::WARN => '#',
            Level::INFO => '*',
            Level::DEBUG => '-',
            Level::TRACE => '.',
        };
        let role = ROLE.load(Ordering::Relaxed) as char;
        write!(w, "{}:{} {} {} ", std::process::id(), role, timestamp(), mark)?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

fn level_rank(level: &Level) -> u8 {
    match *level {
        Level::TRACE => 0,
        Level::DEBUG => 1,
        Level::INFO => 2,
        Level::WARN | Level::ERROR => 3,
    }
}

/// Sets the level from a loglevel name (debug, verbose, notice, warning).
pub fn set_level(loglevel: &str) {
    let rank = match loglevel {
        "debug" => 0,
        "verbose" => 1,
        "warning" => 3,
        _ => 2,
    };
    LEVEL.store(rank, Ordering::Relaxed);
}

/// Sets the role letter of later lines (`M` once the server is initialized).
pub fn set_role(role: char) {
    ROLE.store(role as u8, Ordering::Relaxed);
}

/// `30 Nov 2026 16:00:12.345` in local time.
pub fn timestamp() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    let millis = now.subsec_millis();
    // SAFETY: localtime_r writes into the tm we own; the pointers are valid for the call.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&secs, &mut tm) };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MONTHS[(tm.tm_mon.clamp(0, 11)) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        millis
    )
}

/// Installs the global subscriber: `loglevel`, and `logfile` (appended) or stdout when empty.
/// A logfile that cannot be opened falls back to stdout (the config loader already checked it).
pub fn init(loglevel: &str, logfile: &str) {
    set_level(loglevel);
    let filter =
        tracing_subscriber::filter::filter_fn(|meta| level_rank(meta.level()) >= LEVEL.load(Ordering::Relaxed));
    let result = match logfile {
        "" => {
            let layer = tracing_subscriber::fmt::layer()
                .event_format(RedisFormat)
                .with_writer(std::io::stdout)
                .with_filter(filter);
            tracing_subscriber::registry().with(layer).try_init()
        }
        path => {
            let layer = tracing_subscriber::fmt::layer()
                .event_format(RedisFormat)
                .with_writer(AppendFile(path.to_string()))
                .with_filter(filter);
            tracing_subscriber::registry().with(layer).try_init()
        }
    };
    let _ = result;
    let _ = std::io::stdout().flush();
}

/// Writes `text` as it is, with no line prefix (Redis's serverLogRaw), at notice level: to the
/// `logfile` when set, else stdout.
pub fn raw(logfile: &str, text: &str) {
    if LEVEL.load(Ordering::Relaxed) > 2 {
        return;
    }
    let _ = match logfile {
        "" => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|_| out.flush())
        }
        path => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes())),
    };
}

/// Opens the log file for every line, as Redis does, so a log rotated away by renaming is
/// followed by a fresh file at the configured path. Lines that cannot be written are dropped.
struct AppendFile(String);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for AppendFile {
    type Writer = Box<dyn Write + 'a>;

    fn make_writer(&'a self) -> Self::Writer {
        match std::fs::OpenOptions::new().create(true).append(true).open(&self.0) {
            Ok(f) => Box::new(f),
            Err(_) => Box::new(std::io::sink()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamp_shape() {
        let t = super::timestamp();
        // "30 Nov 2026 16:00:12.345"
        assert_eq!(t.len(), 24, "{t}");
        assert_eq!(&t[2..3], " ");
        assert_eq!(&t[20..21], ".");
    }
}
