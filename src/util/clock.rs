//! Clocks and random identifiers: wall-clock and monotonic time as commands read them, and the
//! hex run ids and replication ids Redis hands out.

/// Reads `clock` in microseconds. Commands read the clock a few times each, so this skips
/// std's checked `Duration` arithmetic (a visible share of a small command's CPU).
fn clock_us(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; both clocks used here always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
}

pub fn unix_ms() -> i64 {
    clock_us(libc::CLOCK_REALTIME) / 1000
}

pub fn unix_us() -> i64 {
    clock_us(libc::CLOCK_REALTIME)
}

/// Monotonic microseconds, for measuring how long commands take.
pub fn mono_us() -> u64 {
    clock_us(libc::CLOCK_MONOTONIC) as u64
}

pub fn random_hex(n: usize) -> String {
    (0..n).map(|_| char::from_digit(fastrand::u32(..16), 16).unwrap_or('0')).collect()
}
