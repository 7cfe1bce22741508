//! Timers for the connection runtimes, kept by a thread of their own.
//!
//! The runtimes that serve clients are built without tokio's time driver: with it, every park
//! of the event loop (at -P 1, about one per request) locks the timer wheel, reads the clock
//! and turns the wheel, some 500 instructions where Redis's aeProcessEvents spends a few
//! dozen. The server's timers are few and slow (the cron's 100 ms, connect and handshake
//! timeouts), so they live on the "timers" thread's runtime instead: a `Sleep` made here is
//! polled by whichever task awaits it, and its expiry wakes that task across threads like any
//! other waker. Everything that serves clients creates its timers through this module; a bare
//! `tokio::time::sleep` there would panic, for want of a time driver.

use std::future::Future;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::time::{Interval, Sleep, Timeout};

/// The timer thread's runtime, started on first use; it lives as long as the process.
fn handle() -> &'static Handle {
    static HANDLE: OnceLock<Handle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("building the timer runtime (no I/O resources needed) cannot fail");
        let handle = rt.handle().clone();
        std::thread::Builder::new()
            .name("timers".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .expect("spawning the timer thread");
        handle
    })
}

/// Completes `duration` from now.
pub fn sleep(duration: Duration) -> Sleep {
    let _on_timer_thread = handle().enter();
    tokio::time::sleep(duration)
}

/// Completes at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    let _on_timer_thread = handle().enter();
    tokio::time::sleep_until(deadline.into())
}

/// `future`, or `Elapsed` once `duration` has passed first.
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    let _on_timer_thread = handle().enter();
    tokio::time::timeout(duration, future)
}

/// Ticks every `period`, the first at once.
pub fn interval(period: Duration) -> Interval {
    let _on_timer_thread = handle().enter();
    tokio::time::interval(period)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_on_a_runtime_without_a_time_driver() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
        rt.block_on(async {
            let start = Instant::now();
            sleep(Duration::from_millis(20)).await;
            assert!(start.elapsed() >= Duration::from_millis(20));
            sleep_until(Instant::now() + Duration::from_millis(5)).await;
            let never = std::future::pending::<()>();
            assert!(timeout(Duration::from_millis(10), never).await.is_err());
            assert_eq!(timeout(Duration::from_secs(5), async { 7 }).await, Ok(7));
            let mut ticks = interval(Duration::from_millis(5));
            for _ in 0..3 {
                ticks.tick().await;
            }
            // A timer reset after it fired still fires again.
            let mut s = Box::pin(sleep(Duration::from_millis(1)));
            (&mut s).await;
            s.as_mut().reset((Instant::now() + Duration::from_millis(5)).into());
            s.await;
        });
    }
}
