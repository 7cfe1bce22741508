//! Logging in Redis's line format, `pid:M dd Mon yyyy HH:MM:SS.mmm * message`, through tracing.
//! Bootstrap version: stdout only, level from loglevel.

use std::io::Write;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::{format::Writer, FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Formats events as Redis's serverLog does.
pub struct RedisFormat {
    pub role: char,
}

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
        write!(w, "{}:{} {} {} ", std::process::id(), self.role, timestamp(), mark)?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
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

/// Installs the global subscriber for `loglevel` writing to stdout.
pub fn init(loglevel: &str) {
    let level = match loglevel {
        "debug" => Level::TRACE,
        "verbose" => Level::DEBUG,
        "warning" => Level::WARN,
        _ => Level::INFO,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stdout)
        .event_format(RedisFormat { role: 'M' })
        .try_init();
    let _ = std::io::stdout().flush();
}
